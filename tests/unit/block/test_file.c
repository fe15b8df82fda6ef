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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/loop.h>

#include <cmocka.h>

#include "block/backend.h"
#include "blk_hold.h"

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


#define MiB (1ull << 20)

static void fill_fd(int fd, uint64_t off, uint64_t len, uint8_t v)
{
	assert_true(blk_fill_fd(fd, off, len, v));
}

static bool holds(int fd, uint64_t off, uint64_t len, uint8_t v)
{
	return blk_holds_fd(fd, off, len, v);
}

/* Zeroing on a file system without fallocate: zeroes are written, over
 * ranges that span several chunks and start and end off their boundaries;
 * the neighbours keep their data; a file's discard reports -EOPNOTSUPP. */
static void zero_by_writes(enum cache_mode cache)
{
	char *path = make_file(8 * MiB);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	struct done_rec wz = { 0 }, zu = { 0 }, dc = { 0 };
	static struct blk_hold h;	/* outlives a failed assert */
	int fd = open(path, O_RDWR);

	fill_fd(fd, 0, 8 * MiB, 0xab);
	open_disk(&be, path, false, cache);
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_WRITE_ZEROES, 1536,
				      5 * MiB + 2560, on_done, &wz), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_ZERO_UNMAP, 7 * MiB + 512,
				      4096, on_done, &zu), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_DISCARD, 0, 4096, on_done,
				      &dc), 0);
	assert_int_equal(blkq_submit(q), 0);
	wait_all(q);
	assert_true(blk_hold_end(&h));
	assert_int_equal(wz.calls, 1);
	assert_int_equal(wz.res, 0);
	assert_int_equal(zu.calls, 1);
	assert_int_equal(zu.res, 0);
	assert_int_equal(dc.calls, 1);
	assert_int_equal(dc.res, -EOPNOTSUPP);
	assert_true(holds(fd, 0, 1536, 0xab));
	assert_true(holds(fd, 1536, 5 * MiB + 2560, 0));
	assert_true(holds(fd, 1536 + 5 * MiB + 2560, 7 * MiB + 512 - (1536 + 5 * MiB + 2560), 0xab));
	assert_true(holds(fd, 7 * MiB + 512, 4096, 0));
	assert_true(holds(fd, 7 * MiB + 4608, MiB - 4608, 0xab));
	close(fd);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

static void test_zero_by_writes(void **state)
{
	zero_by_writes(CACHE_WRITEBACK);
}

static void test_zero_by_writes_direct(void **state)
{
	zero_by_writes(CACHE_NONE);
}

/* A 64 MiB zeroing by writes is held at the gate: a read queued after it
 * on the same queue completes meanwhile, and the zeroing only once the
 * gate opens, with the whole range zero. Fails if the zeroing runs on the
 * queue's thread (the read would wait behind it). */
static void test_zero_fill_held(void **state)
{
	char *path = make_file(80 * MiB);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	struct done_rec z = { 0 }, r = { 0 };
	static uint8_t b[4096];
	struct iovec iov = { b, sizeof(b) };
	static struct blk_hold h;	/* outlives a failed assert */
	int fd = open(path, O_RDWR);
	bool read_first;

	fill_fd(fd, 0, MiB, 0xab);
	fill_fd(fd, 63 * MiB, 2 * MiB, 0xab);
	fill_fd(fd, 70 * MiB, 4096, 0x5a);
	open_disk(&be, path, false, CACHE_WRITEBACK);
	assert_int_equal(blk_hold_start(&h, true, true), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_WRITE_ZEROES, 0, 64 * MiB,
				      on_done, &z), 0);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 70 * MiB,
				 on_done, &r), 0);
	assert_int_equal(blkq_submit(q), 0);
	while (!r.calls)
		assert_true(blkq_reap(q, true) >= 0);
	read_first = !z.calls;
	assert_true(blk_hold_arrived(&h, 1, 10000));
	blk_hold_release(&h);
	wait_all(q);
	assert_true(blk_hold_end(&h));
	assert_true(read_first);
	assert_int_equal(r.res, 4096);
	assert_int_equal(b[0], 0x5a);
	assert_int_equal(z.calls, 1);
	assert_int_equal(z.res, 0);
	assert_true(holds(fd, 0, 64 * MiB, 0));
	assert_true(holds(fd, 64 * MiB, MiB, 0xab));
	close(fd);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

/* blk_test_hold_writes (iovm vhost-user-pci --test-hold-writes): of the
 * WRITEs after the first one, one is held in flight, moving no data, while
 * a later WRITE completes; it runs when the gate opens. */
static void test_hold_writes(void **state)
{
	char *path = make_file(DISK_SIZE);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	struct done_rec w[3] = { { 0 } };
	static uint8_t b[3][4096];
	struct iovec iov[3];
	int fd = open(path, O_RDWR);

	open_disk(&be, path, false, CACHE_WRITEBACK);
	assert_int_equal(blk_test_hold_writes(1, 1), 0);
	for (int i = 0; i < 3; i++) {
		memset(b[i], 0x31 + i, sizeof(b[i]));
		iov[i] = (struct iovec){ b[i], sizeof(b[i]) };
		assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov[i], 1,
					 i * 4096, on_done, &w[i]), 0);
	}
	assert_int_equal(blkq_submit(q), 0);
	while (!w[0].calls || !w[2].calls)
		assert_true(blkq_reap(q, true) >= 0);
	/* the second WRITE is in flight and has written nothing */
	assert_int_equal(w[1].calls, 0);
	assert_int_equal(blkq_inflight(q), 1);
	assert_true(holds(fd, 4096, 4096, 0));
	assert_true(holds(fd, 2 * 4096, 4096, 0x33));
	/* what it writes is what its buffer holds when the gate opens */
	memset(b[1], 0x44, sizeof(b[1]));
	blk_test_hold_release();
	wait_all(q);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].res, 4096);
	assert_true(holds(fd, 0, 4096, 0x31));
	assert_true(holds(fd, 4096, 4096, 0x44));
	close(fd);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

/* A write of zeroes that fails reports the error. */
static void test_zero_fill_error(void **state)
{
	char *path = make_file(8 * MiB);
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	struct done_rec z = { 0 };
	static struct blk_hold h;	/* outlives a failed assert */
	int ro = open(path, O_RDONLY);

	open_disk(&be, path, false, CACHE_WRITEBACK);
	/* the backend's descriptor now refuses writes */
	assert_true(dup2(ro, be.fd) == be.fd);
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_WRITE_ZEROES, 0, 6 * MiB,
				      on_done, &z), 0);
	wait_all(q);
	assert_true(blk_hold_end(&h));
	assert_int_equal(z.calls, 1);
	assert_int_equal(z.res, -EBADF);
	close(ro);
	blkq_destroy(q);
	blk_close(&be);
	unlink(path);
	free(path);
}

/* Attaches file to a free loop device (detached when its last descriptor
 * closes). Returns the device's descriptor and its path in dev, or -1. */
static int loop_attach(const char *file, char *dev, size_t len)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	int ffd = open(file, O_RDWR | O_CLOEXEC);
	int lfd = -1;

	for (int tries = 0; ctl >= 0 && ffd >= 0 && tries < 16; tries++) {
		struct loop_config cfg = { .fd = ffd };
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			break;
		snprintf(dev, len, "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			break;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (!ioctl(lfd, LOOP_CONFIGURE, &cfg))
			break;
		close(lfd);	/* taken meanwhile by someone else */
		lfd = -1;
	}
	if (ctl >= 0)
		close(ctl);
	if (ffd >= 0)
		close(ffd);
	return lfd;
}

/* A block device's discard runs on the queue's helper thread: held at the
 * gate, a read on the same queue completes meanwhile; released, the range
 * reads back zero; a failing discard reports its error. Needs root and
 * loop devices. */
static void test_blockdev_discard_held(void **state)
{
	char *path = make_file(32 * MiB), dev[32];
	struct blk_backend be, bad;
	struct blk_queue *q = blkq_create(8);
	struct done_rec d = { 0 }, r = { 0 }, e = { 0 };
	static uint8_t b[4096];
	struct iovec iov = { b, sizeof(b) };
	static struct blk_hold h;	/* outlives a failed assert */
	int lfd = loop_attach(path, dev, sizeof(dev)), rofd;
	bool read_first;

	if (lfd < 0) {
		unlink(path);
		free(path);
		blkq_destroy(q);
		skip();
	}
	fill_fd(lfd, 0, 32 * MiB, 0xab);
	assert_int_equal(fsync(lfd), 0);
	open_disk(&be, dev, false, CACHE_WRITEBACK);
	assert_true(be.is_blockdev);
	assert_true(be.discard_ok);
	assert_int_equal(blk_hold_start(&h, true, false), 0);
	assert_int_equal(blkq_discard(q, &be, BLK_OP_DISCARD, 4 * MiB,
				      16 * MiB, on_done, &d), 0);
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 24 * MiB,
				 on_done, &r), 0);
	assert_int_equal(blkq_submit(q), 0);
	while (!r.calls)
		assert_true(blkq_reap(q, true) >= 0);
	read_first = !d.calls;
	assert_true(blk_hold_arrived(&h, 1, 10000));
	blk_hold_release(&h);
	wait_all(q);
	/* a discard the device refuses (descriptor not open for writing) */
	bad = be;
	rofd = open(dev, O_RDONLY | O_CLOEXEC);
	assert_true(rofd >= 0);
	bad.fd = rofd;
	assert_int_equal(blkq_discard(q, &bad, BLK_OP_DISCARD, 0, MiB, on_done,
				      &e), 0);
	wait_all(q);
	assert_true(blk_hold_end(&h));
	assert_true(read_first);
	assert_int_equal(r.res, 4096);
	assert_int_equal(b[0], 0xab);
	assert_int_equal(d.calls, 1);
	assert_int_equal(d.res, 0);
	assert_int_equal(e.calls, 1);
	assert_int_equal(e.res, -EBADF);
	assert_true(holds(be.fd, 0, 4 * MiB, 0xab));
	assert_true(holds(be.fd, 4 * MiB, 16 * MiB, 0));
	assert_true(holds(be.fd, 20 * MiB, 12 * MiB, 0xab));
	/* zeroing a block device by writes, for devices that cannot */
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	memset(&d, 0, sizeof(d));
	assert_int_equal(blkq_discard(q, &be, BLK_OP_ZERO_UNMAP, 21 * MiB + 512,
				      3 * MiB, on_done, &d), 0);
	wait_all(q);
	assert_true(blk_hold_end(&h));
	assert_int_equal(d.res, 0);
	assert_true(holds(be.fd, 20 * MiB, MiB + 512, 0xab));
	assert_true(holds(be.fd, 21 * MiB + 512, 3 * MiB, 0));
	assert_true(holds(be.fd, 24 * MiB + 512, 8 * MiB - 512, 0xab));
	close(rofd);
	blkq_destroy(q);
	blk_close(&be);
	close(lfd);
	unlink(path);
	free(path);
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
		cmocka_unit_test(test_zero_by_writes),
		cmocka_unit_test(test_zero_by_writes_direct),
		cmocka_unit_test(test_zero_fill_held),
		cmocka_unit_test(test_zero_fill_error),
		cmocka_unit_test(test_blockdev_discard_held),
		cmocka_unit_test(test_hold_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
