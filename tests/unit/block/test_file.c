/* Unit tests of the io_uring file backend against temporary files. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"

#define DISK_SIZE (1u << 20)

struct done_rec {
	int calls;
	int res;
};

static void on_done(void *tag, int res)
{
	struct done_rec *d = tag;

	d->calls++;
	d->res = res;
}

static char *make_file(uint64_t size)
{
	char *path = strdup("/tmp/iovm-blk-test-XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
	return path;
}

static void open_disk(struct blk_backend *be, const char *path, bool ro,
		      enum cache_mode cache)
{
	struct disk_cfg cfg = { .path = path, .ro = ro, .cache = cache };
	char err[256];

	assert_int_equal(blk_open(be, &cfg, err, sizeof(err)), 0);
}

static void wait_all(struct blk_queue *q)
{
	while (blkq_inflight(q))
		assert_true(blkq_reap(q, true) >= 0);
}

static void test_open_errors(void **state)
{
	struct blk_backend be;
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK };
	char err[256];
	char *small = make_file(100), *odd = make_file(1000);

	cfg.path = "/nonexistent/iovm-disk";
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/iovm-disk"));
	cfg.path = small;
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "smaller than one sector"));
	cfg.path = odd;
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "multiple of 512"));
	cfg.path = "/tmp";
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	unlink(small);
	unlink(odd);
	free(small);
	free(odd);
}

/* Many writes in flight at once, then many reads, data checked; the buffers
 * are deliberately misaligned for O_DIRECT in the cache=none run. */
static void rw_roundtrip(enum cache_mode cache, size_t misalign)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(64);
	enum { N = 32, SZ = 8192 };
	uint8_t *buf = aligned_alloc(4096, N * SZ + 4096);
	struct iovec iov[N][2];
	struct done_rec d[N] = { 0 };

	assert_non_null(q);
	open_disk(&be, path, false, cache);
	assert_int_equal(be.size, DISK_SIZE);
	for (int i = 0; i < N * SZ; i++)
		buf[misalign + i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < N; i++) {
		/* two segments per request */
		iov[i][0] = (struct iovec){ buf + misalign + i * SZ, SZ / 2 };
		iov[i][1] = (struct iovec){ buf + misalign + i * SZ + SZ / 2, SZ / 2 };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, iov[i], 2,
					 (uint64_t)(N - 1 - i) * SZ, on_done, &d[i]), 0);
	}
	assert_int_equal(blkq_inflight(q), N);
	assert_int_equal(blkq_submit(q), 0);
	wait_all(q);
	for (int i = 0; i < N; i++) {
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].res, SZ);
	}
	memset(buf, 0, N * SZ + 4096);
	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++)
		assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, iov[i], 2,
					 (uint64_t)(N - 1 - i) * SZ, on_done, &d[i]), 0);
	assert_int_equal(blkq_submit(q), 0);
	wait_all(q);
	for (int i = 0; i < N; i++)
		assert_int_equal(d[i].res, SZ);
	for (int i = 0; i < N * SZ; i++)
		if (buf[misalign + i] != (uint8_t)(i * 7 + 3))
			fail_msg("byte %d differs", i);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
	free(buf);
}

static void test_rw_writeback(void **state)
{
	rw_roundtrip(CACHE_WRITEBACK, 0);
}

static void test_rw_direct(void **state)
{
	rw_roundtrip(CACHE_NONE, 0);
}

static void test_rw_direct_unaligned(void **state)
{
	rw_roundtrip(CACHE_NONE, 8);
}

static void test_limits(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be, ro;
	struct blk_queue *q = blkq_create(2);
	uint8_t b[512];
	struct iovec iov = { b, sizeof(b) };
	struct done_rec d = { 0 };

	open_disk(&be, path, false, CACHE_WRITEBACK);
	open_disk(&ro, path, true, CACHE_WRITEBACK);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, DISK_SIZE - 256,
				 on_done, &d), -EINVAL);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, UINT64_MAX - 100,
				 on_done, &d), -EINVAL);
	assert_int_equal(blkq_rw(q, &ro, BLK_OP_WRITE, &iov, 1, 0, on_done, &d),
			 -EROFS);
	assert_int_equal(blkq_discard(q, &ro, BLK_OP_DISCARD, 0, 512, on_done, &d),
			 -EROFS);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_DISCARD, DISK_SIZE, 512,
				      on_done, &d), -EINVAL);
	/* depth is a hard bound */
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 0, on_done, &d), 0);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 0, on_done, &d), 0);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 0, on_done, &d),
			 -EAGAIN);
	wait_all(q);
	assert_int_equal(d.calls, 2);
	/* a read-only flush completes at once */
	assert_int_equal(blkq_flush(q, &ro, on_done, &d), 0);
	wait_all(q);
	assert_int_equal(d.calls, 3);
	assert_int_equal(d.res, 0);
	blkq_destroy(q);
	blk_close(&be);
	blk_close(&ro);
	unlink(path);
	free(path);
}

static void test_flush_discard_zeroes(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	static uint8_t b[65536];
	struct iovec iov = { b, sizeof(b) };
	struct done_rec d = { 0 };
	int efd;

	open_disk(&be, path, false, CACHE_WRITEBACK);
	efd = blkq_event_fd(q);
	assert_true(efd >= 0);
	memset(b, 0xab, sizeof(b));
	assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov, 1, 0, on_done, &d), 0);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov, 1, 65536, on_done, &d), 0);
	wait_all(q);
	assert_int_equal(blkq_flush(q, &be, on_done, &d), 0);
	wait_all(q);
	assert_int_equal(d.res, 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_DISCARD, 4096, 8192, on_done, &d), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_WRITE_ZEROES, 65536 + 512, 1024,
				      on_done, &d), 0);
	wait_all(q);
	assert_int_equal(d.calls, 5);
	assert_int_equal(d.res, 0);
	memset(b, 0x11, sizeof(b));
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 0, on_done, &d), 0);
	wait_all(q);
	for (int i = 0; i < 65536; i++)
		assert_int_equal(b[i], i >= 4096 && i < 4096 + 8192 ? 0 : 0xab);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 65536, on_done, &d), 0);
	wait_all(q);
	for (int i = 0; i < 65536; i++)
		assert_int_equal(b[i], i >= 512 && i < 512 + 1024 ? 0 : 0xab);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

static void test_poll(void **state)
{
	struct blk_queue *q = blkq_create(4);
	struct done_rec d = { 0 };
	int fd = eventfd(0, EFD_NONBLOCK);
	uint64_t one = 1;

	assert_int_equal(blkq_poll(q, fd, on_done, &d), 0);
	assert_int_equal(blkq_submit(q), 0);
	assert_int_equal(blkq_reap(q, false), 0);
	assert_int_equal(d.calls, 0);
	assert_int_equal(write(fd, &one, 8), 8);
	assert_int_equal(blkq_reap(q, true), 1);
	assert_int_equal(d.calls, 1);
	assert_true(d.res & POLLIN);
	blkq_destroy(q);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_rw_writeback),
		cmocka_unit_test(test_rw_direct),
		cmocka_unit_test(test_rw_direct_unaligned),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_flush_discard_zeroes),
		cmocka_unit_test(test_poll),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
