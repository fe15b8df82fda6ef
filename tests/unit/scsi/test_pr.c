/* SCSI disk target: persistent reservations and RESERVE(6)/RELEASE(6).
 * Two "processes" are two scsi_disk instances on one image and one state
 * file, each its own I_T nexus (pr-id A and B): their open file
 * descriptions lock against each other exactly as two processes' do, and
 * every interleaving is made by the order of the calls, never by timing. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"
#include "scsi/disk.h"

#define NBLOCKS 256u
#define BS 512u

enum { WE = 1, EA = 3, WE_RO = 5, EA_RO = 6, WE_AR = 7, EA_AR = 8 };
enum { REGISTER, RESERVE, RELEASE, CLEAR, PREEMPT, PREEMPT_ABORT, REG_IGNORE };

struct treq {
	struct scsi_req r;
	int completed;
	struct iovec iov[1];
};

static struct {
	char img[64];
	char state[80];
	struct blk_backend be;
	struct blk_queue *q;
	struct scsi_lun_map luns;
	struct scsi_disk *a, *b;
} E;

static void done_cb(struct scsi_req *r)
{
	((struct treq *)r)->completed++;
}

static struct scsi_disk *disk(const char *state, const char *id)
{
	char err[512] = "";
	struct scsi_disk *d = scsi_disk_create(&E.be, &E.luns);

	assert_non_null(d);
	if (scsi_disk_pr_setup(d, state, id, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		fail();
	}
	return d;
}

static int setup(void **st)
{
	struct disk_cfg cfg = { .path = E.img, .cache = CACHE_WRITEBACK };
	char err[256];
	int fd;

	snprintf(E.img, sizeof(E.img), "/tmp/iovm-pr-test-XXXXXX");
	fd = mkstemp(E.img);
	if (fd < 0 || ftruncate(fd, NBLOCKS * BS))
		return -1;
	close(fd);
	snprintf(E.state, sizeof(E.state), "%s.state", E.img);
	if (blk_open(&E.be, &cfg, err, sizeof(err)))
		return -1;
	E.luns = (struct scsi_lun_map){ { 1 } };
	E.q = blkq_create(16);
	E.a = disk(E.state, "A");
	E.b = disk(E.state, "B");
	return E.q ? 0 : -1;
}

static int teardown(void **st)
{
	if (E.a)
		scsi_disk_destroy(E.a);
	if (E.b)
		scsi_disk_destroy(E.b);
	E.a = E.b = NULL;
	blkq_destroy(E.q);
	blk_close(&E.be);
	unlink(E.state);
	unlink(E.img);
	{
		char p[96];

		snprintf(p, sizeof(p), "%s.pr", E.img);
		unlink(p);
	}
	return 0;
}

static struct treq T;

static struct treq *run(struct scsi_disk *d, const uint8_t *cdb, unsigned int n,
			enum scsi_dir dir, void *buf, size_t len)
{
	memset(&T, 0xa5, sizeof(T));
	T.completed = 0;
	memcpy(T.r.cdb, cdb, n);
	T.r.cdb_len = n;
	T.r.buf_dir = len ? dir : SCSI_DIR_NONE;
	T.iov[0].iov_base = buf;
	T.iov[0].iov_len = len;
	T.r.iov = T.iov;
	T.r.iovcnt = len ? 1 : 0;
	T.r.buf_len = len;
	T.r.q = E.q;
	T.r.done = done_cb;
	T.r.seg_done = NULL;
	scsi_disk_submit(d, &T.r);
	while (!T.completed) {
		assert_int_equal(blkq_submit(E.q), 0);
		assert_true(blkq_reap(E.q, true) >= 0);
	}
	assert_int_equal(T.completed, 1);
	return &T;
}

#define RUN(d, dir, buf, len, ...)                                        \
	({                                                                \
		const uint8_t _c[] = { __VA_ARGS__ };                     \
		run(d, _c, sizeof(_c), dir, buf, len);                    \
	})
#define RUN0(d, ...) RUN(d, SCSI_DIR_NONE, NULL, 0, __VA_ARGS__)

static void expect_good(const struct treq *t)
{
	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_GOOD);
}

static void expect_conflict(const struct treq *t)
{
	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_RESERVATION_CONFLICT);
	assert_int_equal(t->r.sense_len, 0);
}

/* Fixed sense: key, ASC, ASCQ, and the field pointer when field >= 0. */
static void expect_sense(const struct treq *t, uint8_t key, uint16_t asc,
			 int field)
{
	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(t->r.sense_len, 18);
	assert_int_equal(t->r.sense[2], key);
	assert_int_equal(t->r.sense[12] << 8 | t->r.sense[13], asc);
	if (field >= 0) {
		assert_true(t->r.sense[15] & 0x80);
		assert_int_equal(t->r.sense[16] << 8 | t->r.sense[17], field);
	}
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = v >> (56 - 8 * i);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static struct treq *pro(struct scsi_disk *d, uint8_t sa, uint8_t type,
			uint64_t key, uint64_t sakey, uint8_t flags)
{
	static uint8_t p[24];

	memset(p, 0, sizeof(p));
	put64(p, key);
	put64(p + 8, sakey);
	p[20] = flags;
	return RUN(d, SCSI_DIR_TO_DEV, p, 24, 0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0);
}

static void good_out(struct scsi_disk *d, uint8_t sa, uint8_t type,
		     uint64_t key, uint64_t sakey, uint8_t flags)
{
	expect_good(pro(d, sa, type, key, sakey, flags));
}

static uint8_t IN[4096];

static struct treq *pri(struct scsi_disk *d, uint8_t sa)
{
	memset(IN, 0xee, sizeof(IN));
	return RUN(d, SCSI_DIR_FROM_DEV, IN, sizeof(IN), 0x5e, sa, 0, 0, 0, 0, 0,
		   0x10, 0x00, 0);
}

/* READ KEYS: the keys, and PRgeneration in *gen. */
static unsigned int keys(struct scsi_disk *d, uint64_t *k, uint32_t *gen)
{
	unsigned int n;

	expect_good(pri(d, 0));
	n = get32(IN + 4) / 8;
	for (unsigned int i = 0; i < n; i++)
		k[i] = get64(IN + 8 + 8 * i);
	if (gen)
		*gen = get32(IN);
	return n;
}

static uint8_t blk[BS];

static struct treq *rd(struct scsi_disk *d)
{
	return RUN(d, SCSI_DIR_FROM_DEV, blk, BS, 0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0);
}

static struct treq *wr(struct scsi_disk *d)
{
	return RUN(d, SCSI_DIR_TO_DEV, blk, BS, 0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0);
}

/* Consumes a pending unit attention of ours (2Ah/ascq) with a TUR. */
static void expect_ua(struct scsi_disk *d, uint8_t ascq)
{
	expect_sense(RUN0(d, 0x00, 0, 0, 0, 0, 0), 0x6, 0x2a00 | ascq, -1);
	expect_good(RUN0(d, 0x00, 0, 0, 0, 0, 0));
}

/* ---- service actions ---- */

static void test_register(void **st)
{
	uint64_t k[8];
	uint32_t gen;

	assert_int_equal(keys(E.a, k, &gen), 0);
	assert_int_equal(gen, 0);
	/* not registered: a non-zero key conflicts, sakey 0 does nothing */
	expect_conflict(pro(E.a, REGISTER, 0, 5, 0x11, 0));
	good_out(E.a, REGISTER, 0, 0, 0, 0);
	assert_int_equal(keys(E.a, k, &gen), 0);
	good_out(E.a, REGISTER, 0, 0, 0x11, 0);
	good_out(E.b, REGISTER, 0, 0, 0x22, 0);
	assert_int_equal(keys(E.b, k, &gen), 2);
	assert_int_equal(gen, 2);
	assert_true(k[0] == 0x11 && k[1] == 0x22);
	/* registered: the key must match, REGISTER AND IGNORE ignores it */
	expect_conflict(pro(E.a, REGISTER, 0, 0x99, 0x33, 0));
	good_out(E.a, REGISTER, 0, 0x11, 0x33, 0);
	good_out(E.a, REG_IGNORE, 0, 0x12345, 0x44, 0);
	assert_int_equal(keys(E.a, k, &gen), 2);
	assert_true(k[0] == 0x44 && gen == 4);
	/* unregistering */
	good_out(E.a, REGISTER, 0, 0x44, 0, 0);
	assert_int_equal(keys(E.a, k, NULL), 1);
	assert_true(k[0] == 0x22);
	good_out(E.b, REG_IGNORE, 0, 0, 0, 0);
	assert_int_equal(keys(E.a, k, NULL), 0);
}

static void test_reserve_release(void **st)
{
	/* RESERVE needs a registration with the right key */
	expect_conflict(pro(E.a, RESERVE, WE, 0, 0, 0));
	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	expect_conflict(pro(E.a, RESERVE, WE, 0xb, 0, 0));
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	/* again, same type: fine; another type, or another nexus: conflict */
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	expect_conflict(pro(E.a, RESERVE, EA, 0xa, 0, 0));
	expect_conflict(pro(E.b, RESERVE, WE, 0xb, 0, 0));
	/* READ RESERVATION: the holder's key and the type */
	expect_good(pri(E.b, 1));
	assert_int_equal(get32(IN + 4), 16);
	assert_int_equal(get64(IN + 8), 0xa);
	assert_int_equal(IN[8 + 13], WE);
	/* a non-holder's release does nothing; the wrong type is refused */
	good_out(E.b, RELEASE, WE, 0xb, 0, 0);
	expect_sense(pro(E.a, RELEASE, EA, 0xa, 0, 0), 0x5, 0x2604, -1);
	expect_conflict(pro(E.a, RELEASE, WE, 0xdead, 0, 0));
	good_out(E.a, RELEASE, WE, 0xa, 0, 0);
	expect_good(pri(E.b, 1));
	assert_int_equal(get32(IN + 4), 0);
	/* releasing nothing is fine */
	good_out(E.a, RELEASE, WE, 0xa, 0, 0);
	/* the holder unregistering releases */
	good_out(E.b, RESERVE, EA, 0xb, 0, 0);
	expect_conflict(rd(E.a));
	good_out(E.b, REGISTER, 0, 0xb, 0, 0);
	expect_good(rd(E.a));
	expect_good(pri(E.a, 1));
	assert_int_equal(get32(IN + 4), 0);
}

/* The conflict table: per type, what B can do unregistered and
 * registered while A holds the reservation. */
static void test_types(void **st)
{
	static const struct {
		uint8_t type;
		bool rd_unreg, wr_unreg, rd_reg, wr_reg;
	} t[] = {
		{ WE, true, false, true, false },
		{ EA, false, false, false, false },
		{ WE_RO, true, false, true, true },
		{ EA_RO, false, false, true, true },
		{ WE_AR, true, false, true, true },
		{ EA_AR, false, false, true, true },
	};

	for (unsigned int i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct treq *r;

		good_out(E.a, REGISTER, 0, 0, 0xa, 0);
		good_out(E.a, RESERVE, t[i].type, 0xa, 0, 0);
		expect_good(rd(E.a));
		expect_good(wr(E.a));
		r = rd(E.b);
		t[i].rd_unreg ? expect_good(r) : expect_conflict(r);
		r = wr(E.b);
		t[i].wr_unreg ? expect_good(r) : expect_conflict(r);
		/* write class: SYNCHRONIZE CACHE; read class: MODE SENSE */
		r = RUN0(E.b, 0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0);
		t[i].wr_unreg ? expect_good(r) : expect_conflict(r);
		memset(IN, 0, 64);
		r = RUN(E.b, SCSI_DIR_FROM_DEV, IN, 64, 0x1a, 0, 0x3f, 0, 64, 0);
		t[i].rd_unreg ? expect_good(r) : expect_conflict(r);
		/* always allowed */
		expect_good(RUN0(E.b, 0x00, 0, 0, 0, 0, 0));
		expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 36, 0x12, 0, 0, 0, 36, 0));
		expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 8, 0x25, 0, 0, 0, 0, 0,
				0, 0, 0, 0));
		expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 64, 0xa0, 0, 0, 0, 0, 0,
				0, 0, 0, 64, 0, 0));
		good_out(E.b, REGISTER, 0, 0, 0xb, 0);
		r = rd(E.b);
		t[i].rd_reg ? expect_good(r) : expect_conflict(r);
		r = wr(E.b);
		t[i].wr_reg ? expect_good(r) : expect_conflict(r);
		/* all-registrants: B is a holder too, and READ RESERVATION
		 * shows key 0 */
		expect_good(pri(E.b, 1));
		assert_int_equal(IN[8 + 13], t[i].type);
		assert_int_equal(get64(IN + 8), t[i].type >= WE_AR ? 0 : 0xa);
		expect_good(pri(E.b, 3));
		assert_int_equal(IN[8 + 12] & 1, 1);	/* A: holder */
		assert_int_equal(IN[8 + 48 + 12] & 1, t[i].type >= WE_AR);
		good_out(E.a, CLEAR, 0, 0xa, 0, 0);
		expect_ua(E.b, 0x03);
		expect_good(wr(E.b));
	}
}

static void test_clear(void **st)
{
	uint64_t k[4];

	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	good_out(E.b, RESERVE, EA, 0xb, 0, 0);
	expect_conflict(pro(E.a, CLEAR, 0, 0xb, 0, 0));	/* not A's key */
	good_out(E.a, CLEAR, 0, 0xa, 0, 0);
	assert_int_equal(keys(E.a, k, NULL), 0);
	/* B is told: RESERVATIONS PREEMPTED, also through REQUEST SENSE */
	memset(IN, 0, 18);
	expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 18, 0x03, 0, 0, 0, 18, 0));
	assert_int_equal(IN[2], 0x6);
	assert_int_equal(IN[12], 0x2a);
	assert_int_equal(IN[13], 0x03);
	expect_good(RUN0(E.b, 0x00, 0, 0, 0, 0, 0));
	/* CLEAR by an unregistered nexus conflicts */
	expect_conflict(pro(E.a, CLEAR, 0, 0, 0, 0));
}

static void test_preempt(void **st)
{
	uint64_t k[4];

	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	expect_conflict(wr(E.b));
	/* no such key: conflict; SA key 0 with a non-AR holder: bad field */
	expect_conflict(pro(E.b, PREEMPT, WE, 0xb, 0x77, 0));
	expect_sense(pro(E.b, PREEMPT, WE, 0xb, 0, 0), 0x5, 0x2600, 8);
	/* B preempts A's key: holds WE, A is unregistered and told */
	good_out(E.b, PREEMPT, WE, 0xb, 0xa, 0);
	assert_int_equal(keys(E.b, k, NULL), 1);
	assert_true(k[0] == 0xb);
	expect_good(wr(E.b));
	expect_ua(E.a, 0x05);
	expect_conflict(wr(E.a));
	expect_good(rd(E.a));
	expect_good(pri(E.a, 1));
	assert_int_equal(get64(IN + 8), 0xb);
	/* preempting with a type change: the registrants left hear of it */
	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, PREEMPT_ABORT, EA, 0xb, 0xb, 0);
	expect_ua(E.a, 0x04);
	expect_conflict(rd(E.a));
	expect_good(pri(E.a, 1));
	assert_int_equal(IN[8 + 13], EA);
	/* releasing EA tells nobody */
	good_out(E.b, RELEASE, EA, 0xb, 0, 0);
	expect_good(rd(E.a));
}

static void test_preempt_all_registrants(void **st)
{
	uint64_t k[4];

	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	good_out(E.a, RESERVE, WE_AR, 0xa, 0, 0);
	/* SA key 0 on an all-registrants reservation: everyone else goes */
	good_out(E.b, PREEMPT, EA, 0xb, 0, 0);
	expect_ua(E.a, 0x05);
	assert_int_equal(keys(E.a, k, NULL), 1);
	assert_true(k[0] == 0xb);
	expect_conflict(rd(E.a));
	expect_good(pri(E.a, 1));
	assert_int_equal(IN[8 + 13], EA);
	assert_int_equal(get64(IN + 8), 0xb);
}

static void test_no_reservation_preempt(void **st)
{
	uint64_t k[4];

	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	good_out(E.b, PREEMPT, WE, 0xb, 0xa, 0);
	expect_ua(E.a, 0x05);
	assert_int_equal(keys(E.a, k, NULL), 1);
	expect_good(pri(E.a, 1));
	assert_int_equal(get32(IN + 4), 0);	/* no reservation made */
	expect_good(wr(E.a));
}

static void test_release_ro_ua(void **st)
{
	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.b, REGISTER, 0, 0, 0xb, 0);
	good_out(E.a, RESERVE, WE_RO, 0xa, 0, 0);
	good_out(E.a, RELEASE, WE_RO, 0xa, 0, 0);
	expect_ua(E.b, 0x04);
	/* WE's release tells nobody */
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	good_out(E.a, RELEASE, WE, 0xa, 0, 0);
	expect_good(RUN0(E.b, 0x00, 0, 0, 0, 0, 0));
}

static void test_report_caps_full_status(void **st)
{
	expect_good(pri(E.a, 2));
	assert_int_equal(IN[0] << 8 | IN[1], 8);
	assert_int_equal(IN[2], 0x05);		/* ATP_C, PTPL_C */
	assert_int_equal(IN[3], 0x80);		/* TMV, PTPL_A 0 */
	assert_int_equal(IN[4], 0xea);
	assert_int_equal(IN[5], 0x01);
	good_out(E.a, REGISTER, 0, 0, 0xa, 0x01);	/* APTPL */
	expect_good(pri(E.b, 2));
	assert_int_equal(IN[3], 0x81);
	good_out(E.a, RESERVE, EA_RO, 0xa, 0, 0);
	expect_good(pri(E.b, 3));
	assert_int_equal(get32(IN + 4), 24 + 24);
	assert_int_equal(get64(IN + 8), 0xa);
	assert_int_equal(IN[8 + 12], 0x01);
	assert_int_equal(IN[8 + 13], EA_RO);
	assert_int_equal(get32(IN + 8 + 20), 24);
	assert_int_equal(IN[8 + 24], 0x05);	/* iSCSI TransportID */
	assert_int_equal(IN[8 + 24 + 3], 20);
	assert_string_equal((char *)IN + 8 + 28, "A");
	/* the allocation length cuts */
	memset(IN, 0xee, 16);
	expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 16, 0x5e, 3, 0, 0, 0, 0, 0,
			0, 12, 0));
	assert_int_equal(T.r.xferred, 12);
	assert_int_equal(IN[12], 0xee);
	good_out(E.a, CLEAR, 0, 0xa, 0, 0);
}

/* ---- hostile CDBs and parameter lists ---- */

static void test_hostile(void **st)
{
	uint8_t p[4096] = { 0 };
	struct treq *r;

	/* parameter list length other than 24 */
	expect_sense(RUN(E.a, SCSI_DIR_TO_DEV, p, 23, 0x5f, 0, 0, 0, 0, 0, 0, 0,
			 23, 0), 0x5, 0x1a00, -1);
	expect_sense(RUN(E.a, SCSI_DIR_TO_DEV, p, 25, 0x5f, 0, 0, 0, 0, 0, 0, 0,
			 25, 0), 0x5, 0x1a00, -1);
	expect_sense(RUN0(E.a, 0x5f, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0x5, 0x1a00, -1);
	expect_sense(RUN0(E.a, 0x5f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0), 0x5,
		     0x1a00, -1);
	/* a buffer shorter than the list */
	r = RUN(E.a, SCSI_DIR_TO_DEV, p, 10, 0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0);
	assert_int_equal(r->r.host, SCSI_HOST_OVERRUN);
	/* SCOPE other than LU, bad TYPE, for RESERVE/RELEASE/PREEMPT */
	for (uint8_t sa = RESERVE; sa <= PREEMPT_ABORT; sa++) {
		if (sa == CLEAR)
			continue;
		expect_sense(pro(E.a, sa, 0x11, 0, 0, 0), 0x5, 0x2400, 2);
		for (uint8_t type = 0; type < 16; type++) {
			if (type == 1 || type == 3 || (type >= 5 && type <= 8))
				continue;
			expect_sense(pro(E.a, sa, type, 0, 0, 0), 0x5, 0x2400, 2);
		}
	}
	/* REGISTER ignores SCOPE and TYPE */
	good_out(E.a, REGISTER, 0xff, 0, 0, 0);
	/* SPEC_I_PT (not supported), reserved bits */
	expect_sense(pro(E.a, REGISTER, 0, 0, 1, 0x08), 0x5, 0x2600, 20);
	expect_sense(pro(E.a, REGISTER, 0, 0, 1, 0x10), 0x5, 0x2600, 20);
	expect_sense(pro(E.a, REGISTER, 0, 0, 1, 0x02), 0x5, 0x2600, 20);
	/* ALL_TG_PT is accepted: one target port */
	good_out(E.a, REGISTER, 0, 0, 1, 0x04);
	good_out(E.a, REGISTER, 0, 1, 0, 0);
	/* unknown service actions (REGISTER AND MOVE, 8..31), reserved CDB
	 * bytes */
	expect_sense(RUN0(E.a, 0x5f, 7, 0, 0, 0, 0, 0, 0, 24, 0), 0x5, 0x2400, 1);
	expect_sense(RUN0(E.a, 0x5f, 0x1f, 0, 0, 0, 0, 0, 0, 24, 0), 0x5, 0x2400, 1);
	expect_sense(RUN0(E.a, 0x5e, 4, 0, 0, 0, 0, 0, 0, 8, 0), 0x5, 0x2400, 1);
	expect_sense(RUN0(E.a, 0x5e, 0, 1, 0, 0, 0, 0, 0, 8, 0), 0x5, 0x2400, 2);
	expect_sense(RUN0(E.a, 0x5f, 0, 0, 1, 0, 0, 0, 0, 24, 0), 0x5, 0x2400, 3);
	expect_sense(RUN0(E.a, 0x5f, 0x20, 0, 0, 0, 0, 0, 0, 24, 0), 0x5, 0x2400, 1);
	/* a short CDB */
	expect_sense(RUN0(E.a, 0x5f, 0, 0, 0, 0, 0), 0x5, 0x2400, 0);
	/* allocation length 0: nothing moves */
	r = RUN0(E.a, 0x5e, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	expect_good(r);
	assert_int_equal(r->r.xferred, 0);
	/* nothing of it left a registration */
	expect_good(pri(E.b, 0));
	assert_int_equal(get32(IN + 4), 0);
}

static void test_registration_table_full(void **st)
{
	struct scsi_disk *d[24];
	char id[16];

	for (unsigned int i = 0; i < 24; i++) {
		snprintf(id, sizeof(id), "n%u", i);
		d[i] = disk(E.state, id);
		good_out(d[i], REGISTER, 0, 0, 100 + i, 0);
	}
	expect_sense(pro(E.a, REGISTER, 0, 0, 1, 0), 0x5, 0x5504, -1);
	expect_good(pri(E.a, 3));	/* READ FULL STATUS of a full table fits */
	assert_int_equal(get32(IN + 4), 24 * (24 + 24));
	for (unsigned int i = 0; i < 24; i++)
		scsi_disk_destroy(d[i]);
	/* their processes went, their registrations stay (A and B are
	 * still there: no power on) */
	expect_good(pri(E.a, 0));
	assert_int_equal(get32(IN + 4), 8 * 24);
	expect_sense(pro(E.a, REGISTER, 0, 0, 1, 0), 0x5, 0x5504, -1);
}

/* ---- persistence and the state file ---- */

static void reopen_both(void)
{
	scsi_disk_destroy(E.a);
	scsi_disk_destroy(E.b);
	E.a = disk(E.state, "A");
	E.b = disk(E.state, "B");
}

static void test_aptpl(void **st)
{
	uint64_t k[4];

	/* without APTPL: gone once every process has closed the disk */
	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	reopen_both();
	assert_int_equal(keys(E.b, k, NULL), 0);
	expect_good(wr(E.b));
	/* ... but not while another one keeps it open (a nexus loss) */
	good_out(E.a, REGISTER, 0, 0, 0xa, 0);
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);
	scsi_disk_destroy(E.a);
	E.a = disk(E.state, "A");
	assert_int_equal(keys(E.b, k, NULL), 1);
	expect_good(wr(E.a));		/* the same nexus: still the holder */
	expect_conflict(wr(E.b));
	good_out(E.a, CLEAR, 0, 0xa, 0, 0);
	/* with APTPL: kept */
	good_out(E.a, REGISTER, 0, 0, 0xa, 1);
	good_out(E.b, REGISTER, 0, 0, 0xb, 1);
	good_out(E.a, RESERVE, EA, 0xa, 0, 0);
	reopen_both();
	assert_int_equal(keys(E.b, k, NULL), 2);
	expect_conflict(rd(E.b));
	expect_good(rd(E.a));
	expect_good(pri(E.b, 2));
	assert_int_equal(IN[3] & 1, 1);		/* PTPL_A */
	/* the last REGISTER's APTPL counts */
	good_out(E.b, REGISTER, 0, 0xb, 0xbb, 0);
	reopen_both();
	assert_int_equal(keys(E.b, k, NULL), 0);
}

static void corrupt_at(off_t off)
{
	int fd = open(E.state, O_RDWR);
	uint8_t x;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &x, 1, off), 1);
	x ^= 0x5a;
	assert_int_equal(pwrite(fd, &x, 1, off), 1);
	close(fd);
}

static void test_corrupt(void **st)
{
	char err[512] = "", bad[96];
	struct scsi_disk *d;
	struct stat sb;
	int fd;

	good_out(E.a, REGISTER, 0, 0, 0xa, 1);
	good_out(E.a, RESERVE, WE, 0xa, 0, 0);		/* generation 2 */
	good_out(E.a, REGISTER, 0, 0xa, 0xaa, 1);	/* generation 3: slot 1 */
	expect_conflict(wr(E.b));			/* B has seen it */
	/* a byte of both slots flipped while they run: the last good state
	 * stays, PERSISTENT RESERVE OUT fails (HARDWARE ERROR) */
	corrupt_at(4096 + 100);
	corrupt_at(8192 + 100);
	assert_true(stat(E.state, &sb) == 0 && sb.st_size == 12288);
	expect_good(pri(E.b, 0));	/* generation unchanged: still cached */
	expect_conflict(wr(E.b));
	expect_sense(pro(E.b, REGISTER, 0, 0, 1, 0), 0x4, 0x4400, -1);
	expect_conflict(wr(E.b));
	/* a new process refuses it with a clear error */
	d = scsi_disk_create(&E.be, &E.luns);
	assert_int_equal(scsi_disk_pr_setup(d, E.state, "C", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "corrupt"));
	assert_non_null(strstr(err, E.state));
	/* the same through the default path beside the image */
	assert_int_equal(scsi_disk_pr_setup(d, NULL, "C", err, sizeof(err)), 0);
	scsi_disk_destroy(d);
	/* one that is not a state file at all */
	snprintf(bad, sizeof(bad), "%s.bad", E.img);
	fd = open(bad, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && write(fd, "hello", 5) == 5);
	close(fd);
	d = scsi_disk_create(&E.be, &E.luns);
	assert_int_equal(scsi_disk_pr_setup(d, bad, "C", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not an iovm"));
	unlink(bad);
	/* a bad pr-id, a state file where none can be */
	assert_int_equal(scsi_disk_pr_setup(d, NULL, "a b", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(scsi_disk_pr_setup(d, "/nonexistent-dir/x.pr", "C", err,
					    sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/nonexistent-dir/x.pr"));
	scsi_disk_destroy(d);
}

/* A version whose checksum holds but whose contents cannot be (a writer
 * that is not iovm): refused like a corrupt one. The checksum is the
 * state file's FNV-1a over the version after its seq and sum fields. */
static void test_insane(void **st)
{
	uint8_t slot[3560];
	uint64_t gen = 0, h = 0xcbf29ce484222325ull;
	char err[512] = "";
	struct scsi_disk *d;
	int fd;

	good_out(E.a, REGISTER, 0, 0, 0xa, 1);
	fd = open(E.state, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &gen, 8, 16), 8);
	assert_int_equal(pread(fd, slot, sizeof(slot), 4096 * (1 + (gen & 1))),
			 sizeof(slot));
	slot[20] = 0xe8;	/* nregs 1000 */
	slot[21] = 0x03;
	for (size_t i = 16; i < sizeof(slot); i++)
		h = (h ^ slot[i]) * 0x100000001b3ull;
	memcpy(slot + 8, &h, 8);
	assert_int_equal(pwrite(fd, slot, sizeof(slot), 4096 * (1 + (gen & 1))),
			 sizeof(slot));
	close(fd);
	d = scsi_disk_create(&E.be, &E.luns);
	/* one generation back (the version before) is intact: used */
	assert_int_equal(scsi_disk_pr_setup(d, E.state, "C", err, sizeof(err)), 0);
	expect_good(pri(d, 0));
	assert_int_equal(get32(IN + 4), 0);
	scsi_disk_destroy(d);
	/* A's view rolls back with the file: it is not registered any more */
	good_out(E.a, REGISTER, 0, 0, 0xa, 1);
	expect_ua(E.a, 0x05);
}

/* A torn update: the slot being written is garbage but the header never
 * moved to it; and a header that moved but whose slot was torn (a power
 * loss after the header reached the disk): one generation back. */
static void test_torn(void **st)
{
	uint64_t k[4];

	good_out(E.a, REGISTER, 0, 0, 0xa, 1);		/* generation 1: slot 1 */
	corrupt_at(4096 + 200);				/* the unused slot */
	reopen_both();
	assert_int_equal(keys(E.b, k, NULL), 1);
	good_out(E.b, REGISTER, 0, 0, 0xb, 1);		/* generation 2: slot 0 */
	corrupt_at(4096 + 300);				/* torn */
	reopen_both();
	assert_int_equal(keys(E.b, k, NULL), 1);	/* generation 1 again */
	assert_true(k[0] == 0xa);
}

static void test_local_only(void **st)
{
	struct scsi_disk *x = disk("none", "X"), *y = disk("none", "Y");
	char p[96];

	good_out(x, REGISTER, 0, 0, 1, 0);
	good_out(x, RESERVE, EA, 1, 0, 0);
	expect_good(rd(x));
	expect_good(rd(y));	/* y never hears of x's reservation */
	expect_good(rd(E.a));	/* the shared state never heard of them */
	scsi_disk_destroy(x);
	scsi_disk_destroy(y);
	snprintf(p, sizeof(p), "%s.pr", E.img);
	assert_int_equal(access(p, F_OK), -1);
}

/* The default file beside the image: only made when a PERSISTENT RESERVE
 * OUT needs it; a process that started before it existed sees it by its
 * next command after the first change (the creator waits out the probe
 * interval: disk_pr.h), which the order of calls here makes certain. */
static void test_default_file(void **st)
{
	struct scsi_disk *x, *y;
	char p[96];

	snprintf(p, sizeof(p), "%s.pr", E.img);
	x = disk(NULL, "X");
	y = disk(NULL, "Y");
	expect_good(rd(x));
	expect_good(wr(y));
	expect_good(pri(x, 0));
	good_out(x, REGISTER, 0, 0, 0, 0);	/* changes nothing */
	assert_int_equal(access(p, F_OK), -1);
	good_out(x, REGISTER, 0, 0, 1, 0);
	assert_int_equal(access(p, F_OK), 0);
	good_out(x, RESERVE, WE, 1, 0, 0);
	expect_conflict(wr(y));
	expect_good(rd(y));
	scsi_disk_destroy(x);
	scsi_disk_destroy(y);
	/* the default of a disk nobody set up: the same file */
	x = scsi_disk_create(&E.be, &E.luns);
	expect_good(pri(x, 0));
	assert_int_equal(get32(IN + 4), 0);	/* a new power on: cleared */
	scsi_disk_destroy(x);
	unlink(p);
}

/* A state file that cannot be made: this process only, with a warning. */
static void test_default_unwritable(void **st)
{
	char *saved = E.be.path;
	struct scsi_disk *x, *y;

	E.be.path = "/nonexistent-dir/img";
	x = disk(NULL, "X");
	y = disk(NULL, "Y");
	E.be.path = saved;
	good_out(x, REGISTER, 0, 0, 1, 0);
	good_out(x, RESERVE, WE, 1, 0, 0);
	expect_good(wr(x));
	expect_good(wr(y));	/* in-process only: y never hears of it */
	scsi_disk_destroy(x);
	scsi_disk_destroy(y);
}

/* ---- SPC-2 RESERVE(6) / RELEASE(6) ---- */

static void test_reserve6(void **st)
{
	expect_good(RUN0(E.a, 0x16, 0, 0, 0, 0, 0));
	expect_good(RUN0(E.a, 0x16, 0, 0, 0, 0, 0));	/* again: fine */
	expect_conflict(RUN0(E.b, 0x16, 0, 0, 0, 0, 0));
	expect_conflict(rd(E.b));
	expect_conflict(RUN0(E.b, 0x00, 0, 0, 0, 0, 0));
	expect_conflict(pri(E.b, 0));
	expect_conflict(pro(E.b, REGISTER, 0, 0, 1, 0));
	expect_good(RUN(E.b, SCSI_DIR_FROM_DEV, IN, 36, 0x12, 0, 0, 0, 36, 0));
	expect_good(RUN0(E.b, 0x17, 0, 0, 0, 0, 0));	/* not B's: nothing */
	expect_conflict(rd(E.b));
	expect_good(wr(E.a));
	expect_good(RUN0(E.a, 0x17, 0, 0, 0, 0, 0));
	expect_good(rd(E.b));
	/* reserved bits */
	expect_sense(RUN0(E.a, 0x16, 0x01, 0, 0, 0, 0), 0x5, 0x2400, 1);
	expect_sense(RUN0(E.a, 0x17, 0, 0, 0, 1, 0), 0x5, 0x2400, 4);
	/* a LU reset releases it; B's I_T nexus loss does not release A's */
	expect_good(RUN0(E.a, 0x16, 0, 0, 0, 0, 0));
	scsi_disk_reset(E.b, true);
	expect_sense(RUN0(E.b, 0x00, 0, 0, 0, 0, 0), 0x6, 0x2907, -1);
	expect_conflict(rd(E.b));
	scsi_disk_reset(E.b, false);
	expect_sense(RUN0(E.b, 0x00, 0, 0, 0, 0, 0), 0x6, 0x2903, -1);
	expect_good(rd(E.b));
	/* while anyone is registered, both conflict */
	good_out(E.b, REGISTER, 0, 0, 1, 0);
	expect_conflict(RUN0(E.a, 0x16, 0, 0, 0, 0, 0));
	expect_conflict(RUN0(E.a, 0x17, 0, 0, 0, 0, 0));
	good_out(E.b, REGISTER, 0, 1, 0, 0);
	/* a restarted process (same nexus) lost its RESERVE(6) */
	expect_good(RUN0(E.a, 0x16, 0, 0, 0, 0, 0));
	scsi_disk_destroy(E.a);
	E.a = disk(E.state, "A");
	expect_good(rd(E.b));
}

static void test_rsoc(void **st)
{
	static const uint8_t ops[][2] = { { 0x5e, 0 }, { 0x5e, 3 }, { 0x5f, 0 },
					  { 0x5f, 6 } };

	for (unsigned int i = 0; i < 4; i++) {
		memset(IN, 0, 32);
		expect_good(RUN(E.a, SCSI_DIR_FROM_DEV, IN, 32, 0xa3, 0x0c, 0x02,
				ops[i][0], 0, ops[i][1], 0, 0, 0, 32, 0, 0));
		assert_int_equal(IN[1] & 7, 3);
		assert_int_equal(IN[3], 10);
		assert_int_equal(IN[4], ops[i][0]);
	}
	expect_good(RUN(E.a, SCSI_DIR_FROM_DEV, IN, 32, 0xa3, 0x0c, 0x02, 0x5f, 0,
			7, 0, 0, 0, 32, 0, 0));
	assert_int_equal(IN[1] & 7, 1);		/* REGISTER AND MOVE: no */
	for (uint8_t op = 0x16; op <= 0x17; op++) {
		expect_good(RUN(E.a, SCSI_DIR_FROM_DEV, IN, 32, 0xa3, 0x0c, 0x01,
				op, 0, 0, 0, 0, 0, 32, 0, 0));
		assert_int_equal(IN[1] & 7, 3);
		assert_int_equal(IN[3], 6);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reserve_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preempt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preempt_all_registrants, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_reservation_preempt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_release_ro_ua, setup, teardown),
		cmocka_unit_test_setup_teardown(test_report_caps_full_status, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registration_table_full, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_aptpl, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insane, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_unwritable, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reserve6, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rsoc, setup, teardown),
	};

	log_threshold = LOG_ERR;
	return cmocka_run_group_tests_name("scsi-pr", tests, NULL, NULL);
}
