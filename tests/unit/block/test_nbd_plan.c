/* Unit tests of the NBD driver's pure parts: requests into commands (one
 * per run of iovecs, or short runs gathered; which flags a zeroing
 * carries), what an export that came back different
 * refuses, and the reconnect timing (backoff, timeout, outage vs. first
 * connect, the bound on one attempt). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "block/nbd_plan.h"

/* ---- requests into commands ---- */

static struct nbd_cmd cmds[64];
static int ncmds, fail_at = -1;

static int rec_cmd(void *opaque, const struct nbd_cmd *c)
{
	if (ncmds == fail_at)
		return -5;
	assert_true(ncmds < 64);
	cmds[ncmds++] = *c;
	return 0;
}

/* Without gathering: one command per run of memory-contiguous iovecs,
 * split at max; empty iovecs skipped. */
static void test_segments(void **state)
{
	static char m[1 << 16];
	struct iovec v[] = {
		{ m, 4096 }, { m + 4096, 4096 },	/* contiguous: one */
		{ m + 16384, 512 },			/* a gap: new */
		{ m + 20000, 0 },			/* empty: skipped */
		{ m + 16896, 1024 },			/* follows the 512 */
		{ m + 30000, 10000 },			/* split at 4096 */
	};

	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 6, 1000, 4096, NULL, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 6);
	assert_ptr_equal(cmds[0].buf, m);
	assert_int_equal(cmds[0].len, 4096);
	assert_int_equal(cmds[0].off, 1000);
	assert_int_equal(cmds[1].len, 4096);
	assert_int_equal(cmds[1].off, 5096);
	assert_ptr_equal(cmds[2].buf, m + 16384);
	assert_int_equal(cmds[2].len, 1536);
	assert_int_equal(cmds[2].off, 9192);
	assert_int_equal(cmds[3].len, 4096);
	assert_int_equal(cmds[4].len, 4096);
	assert_int_equal(cmds[5].len, 10000 - 8192);
	assert_ptr_equal(cmds[5].buf, m + 30000 + 8192);
	assert_int_equal(cmds[5].off, 9192 + 1536 + 8192);
	/* bytes add up; offsets follow each other */
	for (int i = 1; i < ncmds; i++)
		assert_int_equal(cmds[i].off, cmds[i - 1].off + cmds[i - 1].len);
	/* the first error stops the plan */
	ncmds = 0;
	fail_at = 2;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 6, 0, 4096, NULL, rec_cmd, NULL), -5);
	assert_int_equal(ncmds, 2);
	/* nothing to send */
	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v + 3, 1, 0, 4096, NULL, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 0);
}

static int plan(const struct nbd_export *e, enum blk_op op, uint64_t off,
		uint64_t len)
{
	static char m[8192];
	struct iovec v = { m, len < sizeof(m) ? len : sizeof(m) };

	ncmds = 0;
	fail_at = -1;
	return nbd_plan_request(e, op, &v, 1, off, len, NULL, rec_cmd, NULL);
}

static const struct nbd_export all = {
	.size = 1 << 20, .min_block = 1, .max_payload = 4096,
	.can_flush = true, .can_trim = true, .can_zero = true,
};

static void test_request_commands(void **state)
{
	struct nbd_export e = all;

	/* a READ or WRITE is its segments, split at the maximum payload */
	assert_int_equal(plan(&e, BLK_OP_READ, 4096, 8192), 0);
	assert_int_equal(ncmds, 2);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_READ);
	assert_int_equal(cmds[1].off, 8192);
	assert_int_equal(plan(&e, BLK_OP_WRITE, 0, 512), 0);
	assert_int_equal(ncmds, 1);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_WRITE);
	assert_int_equal(cmds[0].flags, 0);
	/* FLUSH; nothing to send to a server without flush */
	assert_int_equal(plan(&e, BLK_OP_FLUSH, 0, 0), 0);
	assert_int_equal(ncmds, 1);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_FLUSH);
	e.can_flush = false;
	assert_int_equal(plan(&e, BLK_OP_FLUSH, 0, 0), NBD_PLAN_NOTHING);
	assert_int_equal(ncmds, 0);
	/* DISCARD is a TRIM, whose data need not read back as zeroes */
	assert_int_equal(plan(&e, BLK_OP_DISCARD, 65536, 65536), 0);
	assert_int_equal(ncmds, 1);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_TRIM);
	assert_int_equal(cmds[0].flags, 0);
	assert_int_equal(cmds[0].off, 65536);
	assert_int_equal(cmds[0].len, 65536);
	/* the server lacks it: unsupported, nothing sent */
	e.can_trim = false;
	assert_int_equal(plan(&e, BLK_OP_DISCARD, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(ncmds, 0);
	e.can_zero = false;
	assert_int_equal(plan(&e, BLK_OP_WRITE_ZEROES, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(ncmds, 0);
}

/* virtio-blk WRITE_ZEROES without UNMAP and SCSI WRITE SAME without UNMAP
 * (BLK_OP_WRITE_ZEROES) must not deallocate: NO_HOLE. With UNMAP
 * (BLK_OP_ZERO_UNMAP) the server may punch a hole. Neither is FAST_ZERO
 * (the protocol's bit 4): no guest request asks to fail rather than be
 * slow. */
static void test_zero_flags(void **state)
{
	struct nbd_export e = all;

	assert_int_equal(plan(&e, BLK_OP_WRITE_ZEROES, 4096, 8192), 0);
	assert_int_equal(ncmds, 1);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_ZERO);
	assert_int_equal(cmds[0].flags, NBD_PLAN_FLAG_NO_HOLE);
	assert_int_equal(NBD_PLAN_FLAG_NO_HOLE, 1 << 1);	/* the protocol's */
	assert_int_equal(cmds[0].off, 4096);
	assert_int_equal(cmds[0].len, 8192);
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 4096, 8192), 0);
	assert_int_equal(ncmds, 1);
	assert_int_equal(cmds[0].cmd, NBD_PLAN_ZERO);
	assert_int_equal(cmds[0].flags, 0);
	/* a zeroing is not split at the payload limit, only where the
	 * protocol's 32-bit length needs it */
	e.size = 8ull << 30;
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 512, (5ull << 30) + 512), 0);
	assert_int_equal(ncmds, 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(cmds[i].off, 512 + (uint64_t)i * NBD_MAX_RANGE);
		assert_int_equal(cmds[i].len, i < 5 ? NBD_MAX_RANGE : 512);
		assert_int_equal(cmds[i].flags & (1u << 4), 0);
	}
	assert_int_equal(plan(&e, BLK_OP_DISCARD, 0, NBD_MAX_RANGE * 2), 0);
	assert_int_equal(ncmds, 2);
}

/* A server that came back with a different export: what it cannot take
 * fails with EIO before anything is sent. */
static void test_request_bounds(void **state)
{
	struct nbd_export e = all;

	e.size = 65536;
	assert_int_equal(plan(&e, BLK_OP_WRITE, 65536 - 512, 512), 0);
	assert_int_equal(plan(&e, BLK_OP_WRITE, 65536, 512), -EIO);
	assert_int_equal(ncmds, 0);
	assert_int_equal(plan(&e, BLK_OP_READ, 65536 - 512, 1024), -EIO);
	assert_int_equal(plan(&e, BLK_OP_WRITE_ZEROES, 32768, 65536), -EIO);
	assert_int_equal(plan(&e, BLK_OP_DISCARD, UINT64_MAX - 511, 512), -EIO);
	assert_int_equal(ncmds, 0);
	/* a minimum block size: the request must be aligned to it */
	e.min_block = 4096;
	assert_int_equal(plan(&e, BLK_OP_READ, 4096, 4096), 0);
	assert_int_equal(plan(&e, BLK_OP_READ, 512, 4096), -EIO);
	assert_int_equal(plan(&e, BLK_OP_WRITE, 4096, 512), -EIO);
	assert_int_equal(ncmds, 0);
	/* read-only: reads and flushes go, writes of any kind do not */
	e = all;
	e.ro = true;
	assert_int_equal(plan(&e, BLK_OP_READ, 0, 512), 0);
	assert_int_equal(plan(&e, BLK_OP_FLUSH, 0, 0), 0);
	assert_int_equal(plan(&e, BLK_OP_WRITE, 0, 512), -EIO);
	assert_int_equal(plan(&e, BLK_OP_WRITE_ZEROES, 0, 512), -EIO);
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 0, 512), -EIO);
	assert_int_equal(plan(&e, BLK_OP_DISCARD, 0, 512), -EIO);
	assert_int_equal(ncmds, 0);
}

static void test_export_changes(void **state)
{
	struct nbd_export a = all, b = all;

	assert_int_equal(nbd_plan_export_changes(&a, &b), 0);
	b.max_payload = 512;	/* followed per connection: no change */
	assert_int_equal(nbd_plan_export_changes(&a, &b), 0);
	b.size /= 2;
	b.ro = true;
	assert_int_equal(nbd_plan_export_changes(&a, &b),
			 NBD_CHANGED_SIZE | NBD_CHANGED_RO);
	b = all;
	b.min_block = 4096;
	b.can_zero = false;
	b.multi_conn = true;
	assert_int_equal(nbd_plan_export_changes(&a, &b),
			 NBD_CHANGED_MIN_BLOCK | NBD_CHANGED_FEATURES |
			 NBD_CHANGED_MULTI_CONN);
}

/* Short runs that follow one another are gathered up to the limit; a
 * long run goes from guest memory, split at max; a gathered command of one
 * run goes from guest memory too. */
static void test_gather(void **state)
{
	static char m[1 << 20];
	struct iovec v[] = {
		{ m, 4096 }, { m + 8192, 4096 },	/* 0, 1: two runs */
		{ m + 12288, 0 },			/* 2: empty */
		{ m + 16384, 4096 },			/* 3: a third: 12k, full */
		{ m + 24576, 4096 },			/* 4: over 12k: next one */
		{ m + 65536, 20000 },			/* 5: long, split at 16k */
		{ m + 131072, 1024 },			/* 6: alone: direct */
	};
	const struct nbd_gather g12k = { 12288, 12288 }, g128k = { 131072, 131072 },
				g4k = { 4096, 4096 }, none = { 4096, 0 };
	uint64_t sum = 0;

	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 7, 512, 16384, &g12k, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 5);
	for (int i = 0; i < ncmds; i++)
		assert_int_equal(cmds[i].cmd, NBD_PLAN_READ);
	/* 0-3 gathered (the empty iovec among them) */
	assert_null(cmds[0].buf);
	assert_ptr_equal(cmds[0].iov, v);
	assert_int_equal(cmds[0].iovcnt, 4);
	assert_int_equal(cmds[0].len, 12288);
	assert_int_equal(cmds[0].off, 512);
	/* 4 alone before a long run: from guest memory */
	assert_ptr_equal(cmds[1].buf, m + 24576);
	assert_int_equal(cmds[1].len, 4096);
	assert_ptr_equal(cmds[2].buf, m + 65536);
	assert_int_equal(cmds[2].len, 16384);
	assert_ptr_equal(cmds[3].buf, m + 65536 + 16384);
	assert_int_equal(cmds[3].len, 20000 - 16384);
	assert_ptr_equal(cmds[4].buf, m + 131072);
	assert_int_equal(cmds[4].len, 1024);
	for (int i = 0; i < ncmds; i++) {
		if (i)
			assert_int_equal(cmds[i].off, cmds[i - 1].off + cmds[i - 1].len);
		sum += cmds[i].len;
	}
	assert_int_equal(sum, 4 * 4096 + 20000 + 1024);
	/* no gathering: one command per run, as test_segments */
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 7, 0, 16384, NULL, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 7);
	for (int i = 0; i < ncmds; i++)
		assert_non_null(cmds[i].buf);
	/* max 0 gathers nothing, whatever direct says */
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 7, 0, 16384, &none, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 7);
	/* a contiguous 64k of 4k iovecs is one run: from guest memory */
	struct iovec c[16];
	for (int i = 0; i < 16; i++)
		c[i] = (struct iovec){ m + i * 4096, 4096 };
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_WRITE, 0, c, 16, 0, 1 << 20, &g128k, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 1);
	assert_ptr_equal(cmds[0].buf, m);
	assert_int_equal(cmds[0].len, 65536);
	/* sixteen scattered 4k pieces: one gathered command */
	for (int i = 0; i < 16; i++)
		c[i] = (struct iovec){ m + i * 8192, 4096 };
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_WRITE, 0, c, 16, 0, 1 << 20, &g128k, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 1);
	assert_null(cmds[0].buf);
	assert_int_equal(cmds[0].iovcnt, 16);
	assert_int_equal(cmds[0].len, 65536);
	/* leading empty iovecs: the single run goes direct from its data */
	struct iovec e[] = { { m + 500, 0 }, { m + 4096, 512 } };
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, e, 2, 0, 16384, &g4k, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 1);
	assert_ptr_equal(cmds[0].buf, m + 4096);
	/* the first error stops the plan */
	ncmds = 0;
	fail_at = 1;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 7, 0, 16384, &g12k, rec_cmd, NULL), -5);
	assert_int_equal(ncmds, 1);
	fail_at = -1;
}

/* direct below max: runs of direct bytes or more go from guest memory,
 * shorter ones are gathered up to max a command, across the long ones'
 * places in the order. */
static void test_gather_direct(void **state)
{
	static char m[1 << 20];
	const struct nbd_gather g = { 16384, 65536 };
	struct iovec v[12];
	int i;

	/* 8 scattered 8k runs, a 16k run, 4 scattered 8k runs */
	for (i = 0; i < 8; i++)
		v[i] = (struct iovec){ m + i * 16384, 8192 };
	v[8] = (struct iovec){ m + 200000, 16384 };
	for (i = 9; i < 12; i++)
		v[i] = (struct iovec){ m + 300000 + i * 16384, 8192 };
	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_WRITE, 0, v, 12, 0, 1 << 20, &g, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 3);
	assert_null(cmds[0].buf);
	assert_int_equal(cmds[0].iovcnt, 8);
	assert_int_equal(cmds[0].len, 65536);
	assert_ptr_equal(cmds[1].buf, m + 200000);
	assert_int_equal(cmds[1].len, 16384);
	assert_int_equal(cmds[1].off, 65536);
	assert_null(cmds[2].buf);
	assert_ptr_equal(cmds[2].iov, v + 9);
	assert_int_equal(cmds[2].iovcnt, 3);
	assert_int_equal(cmds[2].len, 3 * 8192);
	assert_int_equal(cmds[2].off, 65536 + 16384);
	/* nine 8k runs: 64k gathered, the ninth alone goes direct */
	v[8] = (struct iovec){ m + 200000, 8192 };
	ncmds = 0;
	assert_int_equal(nbd_plan_commands(NBD_PLAN_READ, 0, v, 9, 0, 1 << 20, &g, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 2);
	assert_int_equal(cmds[0].len, 65536);
	assert_ptr_equal(cmds[1].buf, m + 200000);
	assert_int_equal(cmds[1].len, 8192);
}

/* nbd_plan_request gathers with the driver's limits, but never past the
 * export's maximum payload (direct is cut to it as well: 1k runs are
 * still gathered, 4k a command). */
static void test_request_gathers(void **state)
{
	static char m[1 << 16];
	struct nbd_export e = all;	/* max_payload 4096 */
	struct iovec c[16];

	for (int i = 0; i < 16; i++)
		c[i] = (struct iovec){ m + i * 2048, 1024 };
	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_request(&e, BLK_OP_WRITE, c, 16, 0, 16384,
					  &(struct nbd_gather){ 131072, 1 << 20 },
					  rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 4);
	for (int i = 0; i < ncmds; i++) {
		assert_int_equal(cmds[i].cmd, NBD_PLAN_WRITE);
		assert_null(cmds[i].buf);
		assert_int_equal(cmds[i].iovcnt, 4);
		assert_int_equal(cmds[i].len, 4096);
		assert_int_equal(cmds[i].off, (uint64_t)i * 4096);
	}
}

/* fua_writes (a connection that lost multi-conn among several): every
 * WRITE, gathered or not, and every WRITE_ZEROES carries FUA; READ, TRIM
 * and FLUSH do not; without it nothing does. */
static void test_fua_writes(void **state)
{
	static char m[1 << 16];
	struct nbd_export e = all;
	struct iovec c[3] = { { m, 1024 }, { m + 2048, 1024 }, { m + 8192, 4096 } };
	const struct nbd_gather g = { 4096, 4096 };

	e.can_fua = true;
	e.fua_writes = true;
	ncmds = 0;
	fail_at = -1;
	assert_int_equal(nbd_plan_request(&e, BLK_OP_WRITE, c, 3, 0, 6144, &g, rec_cmd, NULL), 0);
	assert_int_equal(ncmds, 2);
	assert_null(cmds[0].buf);	/* gathered */
	assert_int_equal(cmds[0].flags, NBD_PLAN_FLAG_FUA);
	assert_non_null(cmds[1].buf);	/* direct */
	assert_int_equal(cmds[1].flags, NBD_PLAN_FLAG_FUA);
	ncmds = 0;
	assert_int_equal(nbd_plan_request(&e, BLK_OP_READ, c, 3, 0, 6144, &g, rec_cmd, NULL), 0);
	for (int i = 0; i < ncmds; i++)
		assert_int_equal(cmds[i].flags, 0);
	ncmds = 0;
	assert_int_equal(plan(&e, BLK_OP_WRITE_ZEROES, 0, 4096), 0);
	assert_int_equal(cmds[0].flags, NBD_PLAN_FLAG_NO_HOLE | NBD_PLAN_FLAG_FUA);
	ncmds = 0;
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 0, 4096), 0);
	assert_int_equal(cmds[0].flags, NBD_PLAN_FLAG_FUA);
	ncmds = 0;
	assert_int_equal(plan(&e, BLK_OP_DISCARD, 0, 4096), 0);
	assert_int_equal(cmds[0].flags, 0);
	ncmds = 0;
	assert_int_equal(plan(&e, BLK_OP_FLUSH, 0, 0), 0);
	assert_int_equal(cmds[0].flags, 0);
	/* the default: no FUA anywhere */
	e.fua_writes = false;
	ncmds = 0;
	assert_int_equal(nbd_plan_request(&e, BLK_OP_WRITE, c, 3, 0, 6144, &g, rec_cmd, NULL), 0);
	assert_int_equal(cmds[0].flags | cmds[1].flags, 0);
	ncmds = 0;
	assert_int_equal(plan(&e, BLK_OP_ZERO_UNMAP, 0, 4096), 0);
	assert_int_equal(cmds[0].flags, 0);
}

#define MS 1000000ull
#define S 1000000000ull

static void test_backoff_and_timeout(void **state)
{
	struct nbd_reconnect rc;
	uint64_t t = 1000 * S, want = 100 * MS;

	nbd_rc_init(&rc, 30 * S);
	assert_false(nbd_rc_try_now(&rc, t));
	assert_false(nbd_rc_expired(&rc, t + 3600 * S));	/* up: never */
	nbd_rc_lost(&rc, t, false);
	assert_false(nbd_rc_try_now(&rc, t));
	assert_int_equal(nbd_rc_next_event(&rc, t), t + 100 * MS);
	assert_true(nbd_rc_try_now(&rc, t + 100 * MS));
	/* each failure doubles the wait, up to 2 s */
	uint64_t now = t + 100 * MS;
	for (int i = 0; i < 8; i++) {
		want = want * 2 > 2 * S ? 2 * S : want * 2;
		nbd_rc_failed(&rc, now);
		assert_int_equal(rc.next_try, now + want);
		assert_false(nbd_rc_try_now(&rc, now + want - 1));
		now += want;
	}
	assert_int_equal(rc.backoff_ns, 2 * S);
	/* a loss noticed again while down is one more failure, and does not
	 * move the start of the outage */
	nbd_rc_lost(&rc, now, false);
	assert_int_equal(rc.down_since, t);
	/* the timeout counts from the loss */
	assert_false(nbd_rc_expired(&rc, t + 30 * S - 1));
	assert_true(nbd_rc_expired(&rc, t + 30 * S));
	/* timer: the attempt if earlier than the timeout, else the timeout */
	rc.next_try = t + 31 * S;
	assert_int_equal(nbd_rc_next_event(&rc, t + 29 * S), t + 30 * S);
	/* past the timeout attempts go on */
	assert_int_equal(nbd_rc_next_event(&rc, t + 30 * S + 1), t + 31 * S);
	/* back: an outage ended; the backoff starts over */
	assert_true(nbd_rc_up(&rc));
	assert_false(nbd_rc_expired(&rc, t + 100 * S));
	assert_int_equal(rc.backoff_ns, 100 * MS);
	/* firing the same check twice (two queues' timers) changes nothing */
	nbd_rc_lost(&rc, t + 200 * S, false);
	assert_false(nbd_rc_try_now(&rc, t + 200 * S));
	assert_false(nbd_rc_try_now(&rc, t + 200 * S));
	assert_int_equal(rc.next_try, t + 200 * S + 100 * MS);
}

static void test_fresh(void **state)
{
	struct nbd_reconnect rc;

	nbd_rc_init(&rc, 5 * S);
	nbd_rc_lost(&rc, 7, true);	/* a new connection: try at once */
	assert_true(nbd_rc_try_now(&rc, 7));
	assert_false(nbd_rc_up(&rc));	/* a first connect is no outage */
	assert_false(rc.down);
}

/* A connection attempt that never finishes (a host that drops SYNs, a
 * server that accepts and never answers) is abandoned after at most
 * NBD_ATTEMPT_MAX_NS, or the timeout if shorter, and counts as failed. */
static void test_attempt_bound(void **state)
{
	struct nbd_reconnect rc;
	uint64_t t = 50 * S;

	nbd_rc_init(&rc, 30 * S);
	nbd_rc_lost(&rc, t, false);
	t += 100 * MS;
	assert_true(nbd_rc_try_now(&rc, t));
	nbd_rc_attempt(&rc, t);
	/* no second attempt while one is under way */
	assert_false(nbd_rc_try_now(&rc, t + 5 * S));
	assert_false(nbd_rc_attempt_overdue(&rc, t + NBD_ATTEMPT_MAX_NS - 1));
	assert_true(nbd_rc_attempt_overdue(&rc, t + NBD_ATTEMPT_MAX_NS));
	/* the timer wakes for it */
	assert_int_equal(nbd_rc_next_event(&rc, t), t + NBD_ATTEMPT_MAX_NS);
	t += NBD_ATTEMPT_MAX_NS;
	nbd_rc_failed(&rc, t);
	assert_false(nbd_rc_attempt_overdue(&rc, t + 3600 * S));
	assert_int_equal(rc.next_try, t + 200 * MS);
	/* the timeout is still counted from the loss, attempt or not */
	nbd_rc_attempt(&rc, 75 * S);
	assert_int_equal(nbd_rc_next_event(&rc, 75 * S), 50 * S + 30 * S);
	assert_true(nbd_rc_expired(&rc, 50 * S + 30 * S));
	/* up: no attempt under way any more */
	nbd_rc_up(&rc);
	assert_false(nbd_rc_attempt_overdue(&rc, 3600 * S));
	/* a short timeout bounds the attempt too */
	nbd_rc_init(&rc, 2 * S);
	nbd_rc_lost(&rc, t, true);
	nbd_rc_attempt(&rc, t);
	assert_true(nbd_rc_attempt_overdue(&rc, t + 2 * S));
	assert_false(nbd_rc_attempt_overdue(&rc, t + 2 * S - 1));
}

/* A live connection counts as stalled once it has owed replies and heard
 * none for the timeout; any reply, or owing nothing, restarts the clock.
 * Dropped, the server counts as gone since it went quiet: the timeout has
 * passed, an attempt is due at once. */
static void test_stall(void **state)
{
	struct nbd_reconnect rc;
	uint64_t t = 10 * S;

	nbd_rc_init(&rc, 30 * S);
	/* idle for an hour: never stalled */
	assert_false(nbd_rc_stalled(&rc, t, 0, false));
	assert_false(nbd_rc_stalled(&rc, t + 3600 * S, 0, false));
	t += 3600 * S;
	/* owing from t: the clock runs from when it began to owe */
	assert_false(nbd_rc_stalled(&rc, t + 1 * S, 0, true));
	assert_int_equal(nbd_rc_stall_due(&rc), t + 30 * S);
	assert_false(nbd_rc_stalled(&rc, t + 30 * S - 1, 0, true));
	/* a reply at t + 29 s: quiet again only from then */
	assert_false(nbd_rc_stalled(&rc, t + 29 * S, 1, true));
	assert_false(nbd_rc_stalled(&rc, t + 58 * S, 1, true));
	assert_int_equal(nbd_rc_stall_due(&rc), t + 59 * S);
	assert_true(nbd_rc_stalled(&rc, t + 59 * S, 1, true));
	/* a slow server whose replies keep coming never stalls */
	for (uint64_t k = 2; k < 100; k++)
		assert_false(nbd_rc_stalled(&rc, t + 59 * S + k * 29 * S, k, true));
	t += 59 * S + 99 * 29 * S;
	assert_true(nbd_rc_stalled(&rc, t + 30 * S, 99, true));
	/* dropped: gone since it went quiet, so already past the timeout */
	nbd_rc_silent(&rc, t + 30 * S);
	assert_true(rc.down);
	assert_true(nbd_rc_expired(&rc, t + 30 * S));
	assert_true(nbd_rc_try_now(&rc, t + 30 * S));
	/* back: the clock starts afresh (the driver notes owing nothing) */
	assert_true(nbd_rc_up(&rc));
	assert_false(nbd_rc_stalled(&rc, t + 31 * S, 99, false));
	assert_false(nbd_rc_stalled(&rc, t + 60 * S, 99, true));
	assert_true(nbd_rc_stalled(&rc, t + 61 * S, 99, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_gather_direct),
		cmocka_unit_test(test_fua_writes),
		cmocka_unit_test(test_request_gathers),
		cmocka_unit_test(test_request_commands),
		cmocka_unit_test(test_zero_flags),
		cmocka_unit_test(test_request_bounds),
		cmocka_unit_test(test_export_changes),
		cmocka_unit_test(test_attempt_bound),
		cmocka_unit_test(test_backoff_and_timeout),
		cmocka_unit_test(test_fresh),
		cmocka_unit_test(test_stall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
