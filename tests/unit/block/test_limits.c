/* Unit tests of I/O limits on the block queue (block/queue_throttle.c)
 * over a temporary file, on a fake clock that the test moves: a request
 * without tokens is held (in flight for blkq_inflight) and is not done
 * however often the queue reaps or its timer fires while the clock stands
 * still; once the clock has moved, the queue's own timer releases the
 * held requests in order, one per token; new limits release them at once;
 * blkq_destroy and blkq_abort finish them; two queues share one disk's
 * buckets; a disk opened without limits gets them at run time; a held
 * request's latency counts its wait. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "block/stats.h"

#define S 1000000000ull
#define BS 4096

static uint64_t fake_now = 1000 * S;

static uint64_t fake_clock(void)
{
	return fake_now;
}

/* Completions in the order they came: each request's tag is its number. */
static int order[64], norder;
static int results[64];

static void on_done(void *tag, int res)
{
	int n = (int)(intptr_t)tag;

	order[norder++] = n;
	results[n] = res;
}

static bool is_done(int n)
{
	for (int i = 0; i < norder; i++)
		if (order[i] == n)
			return true;
	return false;
}

struct fixture {
	char path[64];
	struct blk_backend be;
	struct blk_queue *q;
	uint8_t buf[8][BS];
	struct iovec iov[8];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int fd;

	snprintf(f->path, sizeof(f->path), "/tmp/iovm-limits-XXXXXX");
	fd = mkstemp(f->path);
	if (fd < 0 || ftruncate(fd, 1 << 20))
		return -1;
	close(fd);
	for (int i = 0; i < 8; i++)
		f->iov[i] = (struct iovec){ f->buf[i], BS };
	norder = 0;
	memset(results, 0, sizeof(results));
	fake_now = 1000 * S;
	blk_thr_test_now = fake_clock;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->q)
		blkq_destroy(f->q);
	blk_close(&f->be);
	unlink(f->path);
	free(f);
	blk_thr_test_now = NULL;
	return 0;
}

/* Opens the file with limits l (NULL: none) and a queue of depth 16. */
static void open_limited(struct fixture *f, const struct disk_limits *l)
{
	struct disk_cfg cfg = { .path = f->path, .cache = CACHE_WRITEBACK };
	char err[256];

	if (l)
		cfg.limits = *l;
	assert_int_equal(blk_open(&f->be, &cfg, err, sizeof(err)), 0);
	f->q = blkq_create(16);
	assert_non_null(f->q);
}

static void rd(struct fixture *f, struct blk_queue *q, int n)
{
	assert_int_equal(blkq_rw(q, &f->be, BLK_OP_READ, &f->iov[n % 8], 1,
				 (uint64_t)n * BS, on_done, (void *)(intptr_t)n), 0);
}

/* Reaps with waits until request n is done (each wait ends with a
 * completion, the timer or the wakeup: it cannot hang while anything is
 * held). */
static void reap_until(struct blk_queue *q, int n)
{
	for (int i = 0; !is_done(n); i++) {
		assert_true(i < 10000);
		assert_true(blkq_reap(q, true) >= 0);
	}
}

/* What is ready now, and whatever the timer fired meanwhile. */
static void reap_ready_now(struct blk_queue *q)
{
	assert_int_equal(blkq_submit(q), 0);
	for (int i = 0; i < 3; i++)
		assert_true(blkq_reap(q, false) >= 0);
}

static struct disk_limits iops(uint64_t rate, uint64_t burst)
{
	struct disk_limits l = { 0 };

	l.rate[LIM_IOPS] = rate;
	l.burst[LIM_IOPS] = burst;
	return l;
}

/* 10 IOPS, a burst of 2: the third and fourth reads are held while the
 * clock stands still, even after the timer (100 ms) fired several times;
 * each tenth of a second of the clock lets exactly one go, in order. */
static void test_held_in_order(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(10, 2);
	unsigned int held;

	open_limited(f, &l);
	for (int n = 1; n <= 4; n++)
		rd(f, f->q, n);
	assert_int_equal(blkq_inflight(f->q), 4);
	reap_until(f->q, 1);
	reap_until(f->q, 2);
	/* Each wait ends when the timer fires (100 ms), which finds the
	 * clock where it was: nothing more passes. */
	for (int i = 0; i < 3; i++) {
		reap_ready_now(f->q);
		assert_int_equal(blkq_reap(f->q, true), 1);
	}
	reap_ready_now(f->q);
	assert_int_equal(norder, 2);
	assert_int_equal(blkq_inflight(f->q), 2);
	blk_get_limits(&f->be, &l, &held);
	assert_int_equal(held, 2);
	assert_int_equal(l.rate[LIM_IOPS], 10);
	assert_int_equal(l.burst[LIM_IOPS], 2);

	fake_now += S / 10;
	reap_until(f->q, 3);
	reap_ready_now(f->q);
	assert_false(is_done(4));
	assert_int_equal(blkq_inflight(f->q), 1);
	fake_now += S / 10;
	reap_until(f->q, 4);
	assert_int_equal(norder, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(order[i], i + 1);
		assert_int_equal(results[i + 1], BS);
	}
	assert_int_equal(blkq_inflight(f->q), 0);
	blk_get_limits(&f->be, &l, &held);
	assert_int_equal(held, 0);
}

/* A request behind a held one waits its turn even when it needs no
 * tokens (a flush), and new limits (here none) release everything at
 * once, through the queue's wakeup, while the clock stands still. */
static void test_new_limits_release(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1), none = { 0 };

	open_limited(f, &l);
	rd(f, f->q, 1);
	rd(f, f->q, 2);
	assert_int_equal(blkq_flush(f->q, &f->be, on_done, (void *)(intptr_t)3), 0);
	rd(f, f->q, 4);
	reap_until(f->q, 1);
	reap_ready_now(f->q);
	assert_int_equal(norder, 1);
	assert_int_equal(blkq_inflight(f->q), 3);

	assert_int_equal(blk_set_limits(&f->be, &none), 0);
	reap_until(f->q, 2);
	reap_until(f->q, 3);
	reap_until(f->q, 4);
	assert_int_equal(results[2], BS);
	assert_int_equal(results[3], 0);
	assert_int_equal(results[4], BS);
	/* no limits: straight through */
	for (int n = 5; n < 13; n++)
		rd(f, f->q, n);
	reap_until(f->q, 12);
	while (blkq_inflight(f->q))
		assert_true(blkq_reap(f->q, true) >= 0);
	assert_int_equal(norder, 12);
}

/* Limits raised while a request is held: the timer armed for the old
 * rate (over an hour away) is moved to the new one's time. */
static void test_raised_limits(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);

	l.rate[LIM_BPS] = 1;	/* a byte a second, a bucket of one */
	open_limited(f, &l);
	rd(f, f->q, 1);		/* passes (full buckets) and leaves a debt */
	rd(f, f->q, 2);		/* held: owes 4096 s of bytes */
	reap_until(f->q, 1);
	reap_ready_now(f->q);
	assert_false(is_done(2));
	/* 1000 IOPS and 1 GB/s: a millisecond of the clock. The wakeup
	 * comes at once, finds the clock where it was and moves the timer:
	 * only that timer can release the request once the clock moves. */
	l.rate[LIM_IOPS] = 1000;
	l.rate[LIM_BPS] = 1000000000;
	assert_int_equal(blk_set_limits(&f->be, &l), 0);
	assert_int_equal(blkq_reap(f->q, true), 1);
	assert_false(is_done(2));
	fake_now += S / 1000;
	reap_until(f->q, 2);
	assert_int_equal(results[2], BS);
}

/* A queue being stopped (blkq_unthrottle) sends what it holds at once
 * and lets later requests through, while the clock stands still; another
 * queue of the disk keeps to the limits. */
static void test_unthrottle(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);
	struct blk_queue *q2;

	open_limited(f, &l);
	q2 = blkq_create(16);
	assert_non_null(q2);
	for (int n = 1; n <= 3; n++)
		rd(f, f->q, n);
	reap_until(f->q, 1);
	reap_ready_now(f->q);
	assert_int_equal(norder, 1);
	blkq_unthrottle(f->q);
	reap_until(f->q, 2);
	reap_until(f->q, 3);
	rd(f, f->q, 4);
	reap_until(f->q, 4);
	rd(f, q2, 5);		/* the bucket is still empty */
	reap_ready_now(q2);
	assert_false(is_done(5));
	assert_int_equal(blkq_inflight(q2), 1);
	blkq_destroy(q2);
	assert_int_equal(results[5], -ECANCELED);
}

/* blkq_destroy with requests held: they finish with -ECANCELED (they
 * never reached the kernel) at once; what was in flight with its
 * result. */
static void test_destroy_held(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);
	unsigned int held;

	open_limited(f, &l);
	for (int n = 1; n <= 3; n++)
		rd(f, f->q, n);
	assert_int_equal(blkq_submit(f->q), 0);
	blk_get_limits(&f->be, &l, &held);
	assert_int_equal(held, 2);
	blkq_destroy(f->q);
	f->q = NULL;
	assert_int_equal(norder, 3);
	assert_int_equal(results[1], BS);
	assert_int_equal(results[2], -ECANCELED);
	assert_int_equal(results[3], -ECANCELED);
	blk_get_limits(&f->be, &l, &held);
	assert_int_equal(held, 0);
}

/* blkq_abort: held requests finish with its error at once. */
static void test_abort_held(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);

	open_limited(f, &l);
	for (int n = 1; n <= 3; n++)
		rd(f, f->q, n);
	reap_until(f->q, 1);
	blkq_abort(f->q, -EIO);
	assert_int_equal(norder, 3);
	assert_int_equal(results[2], -EIO);
	assert_int_equal(results[3], -EIO);
	assert_int_equal(blkq_inflight(f->q), 0);
	assert_int_equal(blkq_rw(f->q, &f->be, BLK_OP_READ, f->iov, 1, 0,
				 on_done, NULL), -EIO);
}

/* Two queues of one disk draw from the same buckets. */
static void test_queues_share(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 2);
	struct blk_queue *q2;

	open_limited(f, &l);
	q2 = blkq_create(16);
	assert_non_null(q2);
	rd(f, f->q, 1);
	rd(f, q2, 2);
	rd(f, q2, 3);		/* the bucket is empty: held */
	rd(f, f->q, 4);		/* held too */
	reap_until(f->q, 1);
	reap_until(q2, 2);
	reap_ready_now(f->q);
	reap_ready_now(q2);
	assert_int_equal(norder, 2);
	assert_int_equal(blkq_inflight(f->q) + blkq_inflight(q2), 2);
	fake_now += 2 * S;
	reap_until(q2, 3);
	reap_until(f->q, 4);
	blkq_destroy(q2);
}

/* A disk opened without limits: its requests never meet the gate, and
 * limits set later apply to the next request. */
static void test_limits_at_run_time(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);

	open_limited(f, NULL);
	assert_null(f->be.thr);
	for (int n = 1; n <= 8; n++)
		rd(f, f->q, n);
	reap_until(f->q, 8);
	while (blkq_inflight(f->q))
		assert_true(blkq_reap(f->q, true) >= 0);
	assert_int_equal(blk_set_limits(&f->be, &l), 0);
	assert_non_null(f->be.thr);
	rd(f, f->q, 9);
	rd(f, f->q, 10);
	reap_until(f->q, 9);
	reap_ready_now(f->q);
	assert_false(is_done(10));
	fake_now += S;
	reap_until(f->q, 10);
}

/* A bytes limit: a request bigger than the bucket passes when it is full
 * and the next waits out the debt. */
static void test_bytes_debt(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = { 0 };
	struct iovec big = { f->buf, sizeof(f->buf) };	/* 32 KiB */

	l.rate[LIM_BPS] = 10 * BS;	/* 40 KiB/s, a 4 KiB bucket */
	l.burst[LIM_BPS] = BS;
	open_limited(f, &l);
	assert_int_equal(blkq_rw(f->q, &f->be, BLK_OP_WRITE, &big, 1, 0,
				 on_done, (void *)(intptr_t)1), 0);
	rd(f, f->q, 2);
	reap_until(f->q, 1);
	assert_int_equal(results[1], (int)sizeof(f->buf));
	reap_ready_now(f->q);
	assert_false(is_done(2));
	/* 32 KiB owed past the bucket, then 4 KiB more: 0.8 s */
	fake_now += 7 * S / 10;
	/* a nudge: tokens kept, not enough */
	assert_int_equal(blk_set_limits(&f->be, &l), 0);
	reap_ready_now(f->q);
	assert_true(blkq_reap(f->q, true) >= 0);
	reap_ready_now(f->q);
	assert_false(is_done(2));
	fake_now += S / 10;
	reap_until(f->q, 2);
}

/* A held request's latency in the statistics runs from its arrival, not
 * from its release: the second read is held while at least 50 ms of real
 * time pass (the statistics' clock; the limits' clock is the fake one,
 * which then lets it go), and its latency is at least that. */
static void test_held_latency(void **state)
{
	struct fixture *f = *state;
	struct disk_limits l = iops(1, 1);
	struct blk_counts t;
	const struct blk_kind_stats *k = &t.k[BLK_STAT_READ];
	uint64_t n = 0, slow = 0;

	open_limited(f, &l);
	rd(f, f->q, 1);
	reap_until(f->q, 1);
	rd(f, f->q, 2);
	reap_ready_now(f->q);
	assert_false(is_done(2));
	usleep(50000);	/* a lower bound on the wait, not a race */
	fake_now += S;
	reap_until(f->q, 2);
	assert_int_equal(results[2], BS);
	blk_stats_read(f->be.stats, &t, NULL, 0);
	for (unsigned int b = 0; b < BLK_HIST_BUCKETS; b++) {
		n += k->hist[b];
		if (b >= blk_hist_bucket(50000000ull))
			slow += k->hist[b];
	}
	assert_int_equal(n, 2);
	/* the held one, at least (the first may be slow too, on a loaded
	 * machine) */
	assert_true(slow >= 1);
	assert_true(k->lat_sum_ns >= 50000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_held_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_latency, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_limits_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_raised_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unthrottle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queues_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_at_run_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bytes_debt, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
