/* Unit tests of the block statistics (block/stats.h): histogram buckets and
 * percentiles on known data, and the counters of real requests through a
 * block queue on a temporary file. */
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

#define DISK_SIZE (4u << 20)

static void test_buckets(void **state)
{
	assert_int_equal(BLK_HIST_BUCKETS, 194);
	assert_int_equal(blk_hist_bucket(0), 0);
	assert_int_equal(blk_hist_bucket(1023), 0);
	assert_int_equal(blk_hist_bucket(1024), 1);
	assert_int_equal(blk_hist_bucket(1024 + 127), 1);
	assert_int_equal(blk_hist_bucket(1024 + 128), 2);
	assert_int_equal(blk_hist_bucket(2047), 8);
	assert_int_equal(blk_hist_bucket(2048), 9);
	assert_int_equal(blk_hist_bucket((1ull << 34) - 1), BLK_HIST_BUCKETS - 2);
	assert_int_equal(blk_hist_bucket(1ull << 34), BLK_HIST_BUCKETS - 1);
	assert_int_equal(blk_hist_bucket(UINT64_MAX), BLK_HIST_BUCKETS - 1);
	/* 10 s is inside the range, not in the overflow bucket */
	assert_true(blk_hist_bucket(10000000000ull) < BLK_HIST_BUCKETS - 1);
	/* every bucket's bounds map back to it, and they tile the line */
	assert_int_equal(blk_hist_lo(0), 0);
	assert_int_equal(blk_hist_hi(0), 1024);
	for (unsigned int b = 1; b < BLK_HIST_BUCKETS; b++) {
		assert_int_equal(blk_hist_lo(b), blk_hist_hi(b - 1));
		assert_int_equal(blk_hist_bucket(blk_hist_lo(b)), b);
		if (b < BLK_HIST_BUCKETS - 1) {
			assert_true(blk_hist_hi(b) > blk_hist_lo(b));
			assert_int_equal(blk_hist_bucket(blk_hist_hi(b) - 1), b);
		}
	}
	assert_int_equal(blk_hist_lo(BLK_HIST_BUCKETS - 1), 1ull << 34);
	assert_true(blk_hist_hi(BLK_HIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_percentiles(void **state)
{
	uint64_t h[BLK_HIST_BUCKETS] = { 0 };
	unsigned int a = blk_hist_bucket(100000);	/* 100 us */
	unsigned int b = blk_hist_bucket(2000000);	/* 2 ms */
	unsigned int c = blk_hist_bucket(50000000);	/* 50 ms */
	uint64_t loa = blk_hist_lo(a), hia = blk_hist_hi(a);

	assert_int_equal(blk_hist_quantile(h, 0.5), 0);
	/* 1000 values: 900 in a, 90 in b, 9 in c, 1 in the overflow */
	h[a] = 900;
	h[b] = 90;
	h[c] = 9;
	h[BLK_HIST_BUCKETS - 1] = 1;
	assert_int_equal(blk_hist_count(h), 1000);
	/* rank 500 of a's 900, spread evenly over [lo, hi) */
	assert_int_equal(blk_hist_quantile(h, 0.5),
			 loa + (uint64_t)((double)(hia - loa) * 500 / 900));
	/* rank 900: a's last value, its upper bound */
	assert_int_equal(blk_hist_quantile(h, 0.9), hia);
	assert_int_equal(blk_hist_quantile(h, 0.99), blk_hist_hi(b));
	assert_int_equal(blk_hist_quantile(h, 0.999), blk_hist_hi(c));
	assert_int_equal(blk_hist_quantile(h, 1.0), 1ull << 34);
	/* one value in the underflow bucket */
	memset(h, 0, sizeof(h));
	h[0] = 1;
	assert_int_equal(blk_hist_quantile(h, 0.99), 1024);
	/* values 1..100 us each once: p50 within its bucket's width of 50 us */
	memset(h, 0, sizeof(h));
	for (uint64_t us = 1; us <= 100; us++)
		h[blk_hist_bucket(us * 1000)]++;
	{
		uint64_t p50 = blk_hist_quantile(h, 0.5);
		uint64_t w = blk_hist_hi(blk_hist_bucket(50000)) -
			     blk_hist_lo(blk_hist_bucket(50000));

		assert_true(p50 + w >= 50000 && p50 <= 50000 + w);
	}
}

static char *make_file(uint64_t size)
{
	char *path = strdup("/tmp/iovm-stats-test-XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
	return path;
}

static void open_disk(struct blk_backend *be, const char *path)
{
	struct disk_cfg cfg = { .path = path, .cache = CACHE_WRITEBACK };
	char err[256];

	assert_int_equal(blk_open(be, &cfg, err, sizeof(err)), 0);
	assert_non_null(be->stats);
}

static int done_calls, done_errors;

static void on_done(void *tag, int res)
{
	done_calls++;
	if (res < 0)
		done_errors++;
}

static void run(struct blk_queue *q)
{
	assert_int_equal(blkq_submit(q), 0);
	while (blkq_inflight(q))
		assert_true(blkq_reap(q, true) >= 0);
}

static uint64_t ops(const struct blk_counts *c, unsigned int k)
{
	return blk_hist_count(c->k[k].hist);
}

/* N known requests of each kind give exactly N operations and their
 * bytes; the histograms sum to N. */
static void test_counts(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(64);
	static uint8_t buf[64][8192] __attribute__((aligned(4096)));
	struct iovec iov[64];
	struct blk_counts t;
	struct blk_queue_snap per[4];

	assert_non_null(q);
	open_disk(&be, path);
	blkq_set_index(q, 3);
	done_calls = 0;
	for (int i = 0; i < 40; i++) {
		iov[i] = (struct iovec){ buf[i], 4096 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov[i], 1,
					 (uint64_t)i * 4096, on_done, NULL), 0);
	}
	run(q);
	for (int i = 0; i < 25; i++) {
		iov[i] = (struct iovec){ buf[i], 8192 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov[i], 1,
					 (uint64_t)i * 8192, on_done, NULL), 0);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(blkq_flush(q, &be, on_done, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(blkq_discard(q, &be, BLK_OP_DISCARD,
					      (uint64_t)i * 65536, 65536,
					      on_done, NULL), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_WRITE_ZEROES, 1 << 20,
				      1 << 20, on_done, NULL), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_ZERO_UNMAP, 2 << 20,
				      4096, on_done, NULL), 0);
	run(q);
	assert_int_equal(done_calls, 40 + 25 + 3 + 2 + 2);
	assert_int_equal(blk_stats_read(be.stats, &t, per, 4), 1);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 40);
	assert_int_equal(t.k[BLK_STAT_WRITE].bytes, 40 * 4096);
	assert_int_equal(ops(&t, BLK_STAT_READ), 25);
	assert_int_equal(t.k[BLK_STAT_READ].bytes, 25 * 8192);
	assert_int_equal(ops(&t, BLK_STAT_FLUSH), 3);
	assert_int_equal(t.k[BLK_STAT_FLUSH].bytes, 0);
	assert_int_equal(ops(&t, BLK_STAT_DISCARD), 2);
	assert_int_equal(t.k[BLK_STAT_DISCARD].bytes, 2 * 65536);
	assert_int_equal(ops(&t, BLK_STAT_WRITE_ZEROES), 2);
	assert_int_equal(t.k[BLK_STAT_WRITE_ZEROES].bytes, (1 << 20) + 4096);
	for (unsigned int k = 0; k < BLK_STAT_KINDS; k++) {
		assert_int_equal(t.k[k].errors, 0);
		assert_int_equal(t.k[k].merged, 0);
	}
	assert_int_equal(t.inflight, 0);
	/* all 40 writes were queued before the first completion */
	assert_int_equal(t.max_inflight, 40);
	assert_true(t.k[BLK_STAT_WRITE].lat_sum_ns > 0);
	assert_int_equal(per[0].qindex, 3);
	assert_true(per[0].live);
	assert_memory_equal(&per[0].c, &t, sizeof(t));
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

/* A merged group counts as its requests; a failed request counts as an
 * error without bytes. */
static int fail_writes(const struct blk_backend *be, enum blk_op op, int res)
{
	return op == BLK_OP_WRITE ? -EIO : res;
}

static void test_merged_and_errors(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	static uint8_t buf[16384] __attribute__((aligned(4096)));
	struct iovec iov = { buf, sizeof(buf) };
	struct blk_counts t;

	open_disk(&be, path);
	assert_int_equal(blkq_rw_merged(q, &be, BLK_OP_READ, &iov, 1, 0, 4,
					on_done, NULL), 0);
	run(q);
	blkq_test_result = fail_writes;
	done_errors = 0;
	assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov, 1, 0, on_done,
				 NULL), 0);
	run(q);
	blkq_test_result = NULL;
	assert_int_equal(done_errors, 1);
	blk_stats_read(be.stats, &t, NULL, 0);
	assert_int_equal(ops(&t, BLK_STAT_READ), 4);
	assert_int_equal(t.k[BLK_STAT_READ].merged, 3);
	assert_int_equal(t.k[BLK_STAT_READ].bytes, sizeof(buf));
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 1);
	assert_int_equal(t.k[BLK_STAT_WRITE].errors, 1);
	assert_int_equal(t.k[BLK_STAT_WRITE].bytes, 0);
	/* a request refused at once is neither counted nor left in flight */
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, DISK_SIZE,
				 on_done, NULL), -EINVAL);
	blk_stats_read(be.stats, &t, NULL, 0);
	assert_int_equal(t.inflight, 0);
	assert_int_equal(ops(&t, BLK_STAT_READ), 4);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

static void writes(struct blk_queue *q, struct blk_backend *be, int n)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	struct iovec iov = { buf, sizeof(buf) };

	for (int i = 0; i < n; i++) {
		assert_int_equal(blkq_rw(q, be, BLK_OP_WRITE, &iov, 1,
					 (uint64_t)i * 4096, on_done, NULL), 0);
		run(q);
	}
}

/* Queues that go away keep their counts: in the disk's total and under
 * their queue index; a queue may even outlive its disk's close. */
static void test_retired(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q0 = blkq_create(8), *q1 = blkq_create(8), *q0b;
	struct blk_counts t;
	struct blk_queue_snap per[4];

	open_disk(&be, path);
	blkq_set_index(q1, 1);
	writes(q0, &be, 5);
	writes(q1, &be, 7);
	assert_int_equal(blk_stats_read(be.stats, &t, per, 4), 2);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 12);
	blkq_destroy(q0);
	assert_int_equal(blk_stats_read(be.stats, &t, per, 4), 2);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 12);
	assert_int_equal(per[0].qindex, 0);
	assert_false(per[0].live);
	assert_int_equal(ops(&per[0].c, BLK_STAT_WRITE), 5);
	assert_true(per[1].live);
	/* a new queue of index 0 adds to the retired one's counts */
	q0b = blkq_create(8);
	writes(q0b, &be, 2);
	assert_int_equal(blk_stats_read(be.stats, &t, per, 4), 2);
	assert_true(per[0].live);
	assert_int_equal(ops(&per[0].c, BLK_STAT_WRITE), 7);
	blkq_destroy(q0b);
	assert_int_equal(blk_stats_read(be.stats, &t, per, 4), 2);
	assert_int_equal(ops(&per[0].c, BLK_STAT_WRITE), 7);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 14);
	/* per[] too small: the total still has everything */
	assert_int_equal(blk_stats_read(be.stats, &t, per, 1), 1);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 14);
	/* the disk closes first; its statistics live until q1 goes */
	blk_close(&be);
	blkq_destroy(q1);
	unlink(path);
	free(path);
}

/* A disk's id is reused after its statistics are gone, and a queue that
 * saw the old disk counts the new one apart. */
static void test_id_reuse(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend a, b;
	struct blk_queue *q = blkq_create(8);
	struct blk_counts t;
	unsigned int id;

	open_disk(&a, path);
	id = a.stats->id;
	writes(q, &a, 3);
	blk_close(&a);		/* q's record keeps a's statistics */
	open_disk(&b, path);
	assert_true(b.stats->id != id);
	writes(q, &b, 2);
	blk_stats_read(b.stats, &t, NULL, 0);
	assert_int_equal(ops(&t, BLK_STAT_WRITE), 2);
	blkq_destroy(q);	/* a's statistics go, and its id */
	blk_close(&b);
	open_disk(&a, path);
	assert_int_equal(a.stats->id, id);
	blk_close(&a);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_percentiles),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_merged_and_errors),
		cmocka_unit_test(test_retired),
		cmocka_unit_test(test_id_reuse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
