/* Unit tests of virtio-blk driven by the test driver over fake guest RAM,
 * against a temporary disk file. */
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
#include <pthread.h>

#include "../block/blk_hold.h"
#include "block/backend.h"
#include "lib/log.h"
#include "uring_fail.h"
#include "vdriver.h"
#include "virtio/blk.h"

#define RAM (16u << 20)
#define DISK (4u << 20)
#define QSZ 64
#define WAIT_MS 5000

struct fixture {
	struct vdriver d;
	char path[64];
	struct virtio_dev *dev;
};

/* poll_us < 0: the default poll-us= */
static struct fixture *make(bool ro, enum cache_mode cache, unsigned int queues,
			    uint64_t drop, int poll_us)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg = { .ro = ro, .cache = cache, .queues = queues,
				.poll_us = poll_us < 0 ? 0 : (unsigned int)poll_us,
				.poll_set = poll_us >= 0 };
	char err[256];
	int fd;

	assert_non_null(f);
	strcpy(f->path, "/tmp/iovm-vblk-XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, DISK), 0);
	close(fd);
	cfg.path = f->path;
	f->dev = virtio_blk_create(&cfg, 2, err, sizeof(err));
	assert_non_null(f->dev);
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	assert_int_equal(vdriver_attach(&f->d, f->dev, drop), 0);
	for (unsigned int i = 0; i < f->dev->num_queues; i++)
		assert_int_equal(vdriver_queue_start(&f->d, i, QSZ), 0);
	return f;
}

static int setup(void **state)
{
	*state = make(false, CACHE_WRITEBACK, 0, 0, -1);
	return 0;
}

static int setup_direct(void **state)
{
	*state = make(false, CACHE_NONE, 1, 0, -1);
	return 0;
}

/* poll-us=0: the queue thread never spins, every request and completion
 * must wake it (no lost wakeup between turning kicks on and sleeping). */
static int setup_nopoll(void **state)
{
	*state = make(false, CACHE_NONE, 0, 0, 0);
	return 0;
}

static int setup_ro(void **state)
{
	*state = make(true, CACHE_WRITEBACK, 1, 0, -1);
	return 0;
}

static int setup_noevidx(void **state)
{
	*state = make(false, CACHE_WRITEBACK, 1, 1ull << VIRTIO_F_RING_EVENT_IDX, -1);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	vdriver_destroy(&f->d);
	unlink(f->path);
	free(f);
	return 0;
}

struct breq {
	uint64_t hdr, data, status;
	uint32_t len;
	int head;
};

/* Queues one request: header, optional data, status. */
static void add_req(struct fixture *f, unsigned int qi, struct breq *r,
		    uint32_t type, uint64_t sector, uint64_t data, uint32_t len,
		    bool data_writable, bool indirect)
{
	struct vbuf b[3];
	unsigned int n = 0;
	uint32_t *h;

	r->hdr = vdriver_alloc(&f->d, 16);
	r->status = vdriver_alloc(&f->d, 1);
	r->data = data;
	r->len = len;
	h = vdriver_ptr(&f->d, r->hdr, 16);
	h[0] = type;
	h[1] = 0;
	memcpy(h + 2, &sector, 8);
	*(uint8_t *)vdriver_ptr(&f->d, r->status, 1) = 0xee;
	b[n++] = (struct vbuf){ r->hdr, 16, false };
	if (len)
		b[n++] = (struct vbuf){ data, len, data_writable };
	b[n++] = (struct vbuf){ r->status, 1, true };
	r->head = vdriver_add(&f->d, qi, b, n, indirect);
	assert_true(r->head >= 0);
}

static uint8_t status_of(struct fixture *f, struct breq *r)
{
	return *(uint8_t *)vdriver_ptr(&f->d, r->status, 1);
}

/* Runs one request to completion; returns its status byte. */
static uint8_t run(struct fixture *f, unsigned int qi, uint32_t type,
		   uint64_t sector, uint64_t data, uint32_t len, bool wr,
		   uint32_t *used_len)
{
	struct breq r;
	uint32_t id, ulen;

	add_req(f, qi, &r, type, sector, data, len, wr, false);
	vdriver_kick(&f->d, qi);
	assert_int_equal(vdriver_wait_used(&f->d, qi, &id, &ulen, WAIT_MS), 1);
	assert_int_equal(id, r.head);
	if (used_len)
		*used_len = ulen;
	return status_of(f, &r);
}

static uint64_t cfg64(struct fixture *f, uint32_t off)
{
	uint64_t v = 0;

	f->dev->ops->config_read(f->dev, off, &v, 8);
	return v;
}

static uint32_t cfg32(struct fixture *f, uint32_t off)
{
	uint32_t v = 0;

	f->dev->ops->config_read(f->dev, off, &v, 4);
	return v;
}

static uint16_t cfg16(struct fixture *f, uint32_t off)
{
	uint16_t v = 0;

	f->dev->ops->config_read(f->dev, off, &v, 2);
	return v;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static void test_config(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(f->dev->device_id, VIRTIO_ID_BLOCK);
	assert_int_equal(cfg64(f, VIRTIO_BLK_CFG_CAPACITY), DISK / 512);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_SEG_MAX), VIRTIO_BLK_SEG_MAX);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_SIZE_MAX), VIRTIO_BLK_SIZE_MAX);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_BLK_SIZE), 512);
	assert_int_equal(cfg16(f, VIRTIO_BLK_CFG_NUM_QUEUES), 2);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_MAX_DISCARD_SEG), 1);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_MAX_WZ_SEG), 1);
	assert_true(cfg32(f, VIRTIO_BLK_CFG_MAX_DISCARD_SECTORS) > 0);
	assert_true(f->dev->host_features & (1ull << VIRTIO_BLK_F_FLUSH));
	assert_true(f->dev->host_features & (1ull << VIRTIO_BLK_F_MQ));
	assert_true(f->dev->host_features & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
	assert_false(f->dev->host_features & (1ull << VIRTIO_BLK_F_RO));
}

static void check_file(struct fixture *f, uint64_t off, const uint8_t *want,
		       size_t n)
{
	uint8_t *got = malloc(n);
	int fd = open(f->path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, n, off), (ssize_t)n);
	assert_memory_equal(got, want, n);
	close(fd);
	free(got);
}

/* Online resize: the file doubles (blk_resize), virtio_blk_resized puts
 * the new capacity in config space between two generation bumps (a driver
 * reading it in two halves around the change reads again) and tells the
 * transport once; the new sectors take I/O; nothing changes, nothing is
 * told. */
static void test_resize(void **state)
{
	struct fixture *f = *state;
	struct blk_backend *be = virtio_blk_backend(f->dev);
	uint64_t buf = vdriver_alloc(&f->d, 4096);
	uint8_t *p = vdriver_ptr(&f->d, buf, 4096), ref[4096];
	uint32_t gen = __atomic_load_n(&f->dev->config_gen, __ATOMIC_SEQ_CST);
	struct blk_backend other = { .fd = -1 };
	char err[256];

	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, DISK / 512, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(blk_resize(be, 2 * DISK, err, sizeof(err)), 0);
	/* not told yet: config space still has the old capacity */
	assert_int_equal(cfg64(f, VIRTIO_BLK_CFG_CAPACITY), DISK / 512);
	assert_int_equal(virtio_blk_resized(f->dev, be), 0);
	assert_int_equal(cfg64(f, VIRTIO_BLK_CFG_CAPACITY), 2 * DISK / 512);
	assert_int_equal(f->d.config_changed, 1);
	assert_int_equal(__atomic_load_n(&f->dev->config_gen, __ATOMIC_SEQ_CST), gen + 2);
	/* the rest of config space is as it was */
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_SEG_MAX), VIRTIO_BLK_SEG_MAX);
	assert_int_equal(cfg32(f, VIRTIO_BLK_CFG_BLK_SIZE), 512);

	fill(ref, sizeof(ref), 5);
	memcpy(p, ref, sizeof(ref));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 2 * DISK / 512 - 8, buf, 4096, false, NULL),
			 VIRTIO_BLK_S_OK);
	check_file(f, 2 * DISK - 4096, ref, sizeof(ref));
	memset(p, 0, 4096);
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, DISK / 512, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, 2 * DISK / 512 - 4, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_IOERR);

	/* the same size again: nothing to tell */
	assert_int_equal(virtio_blk_resized(f->dev, be), 0);
	assert_int_equal(f->d.config_changed, 1);
	assert_int_equal(__atomic_load_n(&f->dev->config_gen, __ATOMIC_SEQ_CST), gen + 2);
	/* a shrink is refused below and leaves config space alone */
	assert_int_equal(blk_resize(be, DISK, err, sizeof(err)), -EINVAL);
	assert_int_equal(virtio_blk_resized(f->dev, be), 0);
	assert_int_equal(cfg64(f, VIRTIO_BLK_CFG_CAPACITY), 2 * DISK / 512);
	/* not this device's disk */
	assert_int_equal(virtio_blk_resized(f->dev, &other), -ENODEV);
	assert_int_equal(f->d.config_changed, 1);
}

static void test_write_read(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 65536);
	uint8_t *p = vdriver_ptr(&f->d, buf, 65536), ref[65536];
	uint32_t ulen;

	fill(ref, sizeof(ref), 1);
	memcpy(p, ref, sizeof(ref));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 8, buf, 65536, false, &ulen),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(ulen, 1);
	check_file(f, 8 * 512, ref, sizeof(ref));
	memset(p, 0, 65536);
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, 8, buf, 65536, true, &ulen),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(ulen, 65537);
	assert_memory_equal(p, ref, sizeof(ref));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, &ulen),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(f->d.needs_reset, 0);
}

/* Unaligned guest buffers with cache=none still work (page-cache path). */
static void test_direct_unaligned(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 8192 + 64) + 8;
	uint8_t *p = vdriver_ptr(&f->d, buf, 8192), ref[8192];

	fill(ref, sizeof(ref), 2);
	memcpy(p, ref, sizeof(ref));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 3, buf, 8192, false, NULL),
			 VIRTIO_BLK_S_OK);
	memset(p, 0, 8192);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 3, buf, 8192, true, NULL),
			 VIRTIO_BLK_S_OK);
	assert_memory_equal(p, ref, sizeof(ref));
	check_file(f, 3 * 512, ref, sizeof(ref));
	/* aligned I/O through O_DIRECT too */
	buf = (vdriver_alloc(&f->d, 8192 + 4096) + 4095) & ~4095ull;
	p = vdriver_ptr(&f->d, buf, 8192);
	memcpy(p, ref, sizeof(ref));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 64, buf, 8192, false, NULL),
			 VIRTIO_BLK_S_OK);
	check_file(f, 64 * 512, ref, sizeof(ref));
}

/* Each of n 4 KiB requests r[i] read into p + i * 4096 what fill(seed + i)
 * wrote there, with status OK. */
static void expect_filled(struct fixture *f, struct breq *r, const uint8_t *p,
			  int n, unsigned int seed)
{
	enum { SZ = 4096 };

	for (int i = 0; i < n; i++) {
		uint8_t ref[SZ];

		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
		fill(ref, SZ, seed + i);
		assert_memory_equal(p + i * SZ, ref, SZ);
	}
}

/* Many requests in flight at once, mixed reads and writes, data checked;
 * all come back exactly once. */
static void test_many_in_flight(void **state)
{
	struct fixture *f = *state;
	enum { N = 48, SZ = 4096 };
	struct breq r[N];
	uint64_t buf = vdriver_alloc(&f->d, N * SZ);
	uint8_t *p = vdriver_ptr(&f->d, buf, N * SZ);
	bool seen[QSZ] = { false };
	uint32_t id, len;

	for (int i = 0; i < N; i++)
		fill(p + i * SZ, SZ, 10 + i);
	for (int i = 0; i < N; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_OUT, i * 8, buf + i * SZ, SZ,
			false, i % 8);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		assert_true(id < QSZ);
		assert_false(seen[id]);
		seen[id] = true;
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	memset(p, 0, N * SZ);
	for (int i = 0; i < N; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_IN, i * 8, buf + i * SZ, SZ,
			true, (i + 1) % 8);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	expect_filled(f, r, p, N, 10);
}

/* Kicks as a real driver does: only when the device asks for them. */
static void kick_if_needed(struct fixture *f, unsigned int qi, uint16_t old)
{
	if (vdriver_kick_needed(&f->d, qi, old, f->d.q[qi].avail_idx))
		vdriver_kick(&f->d, qi);
}

/* A driver that honours kick suppression and first answers each
 * completion late, then at once: the queue thread stops spinning for its
 * answers and comes back to it, and no request ever waits for a kick the
 * driver was told to skip, one at a time or 16 at once. */
static void test_slow_then_fast_driver(void **state)
{
	struct fixture *f = *state;
	enum { SZ = 4096, DEEP = 16, SLOW = 40, ALL = 300 };
	uint64_t buf = vdriver_alloc(&f->d, DEEP * SZ);
	uint8_t *p = vdriver_ptr(&f->d, buf, DEEP * SZ);
	struct breq r[DEEP];
	uint32_t id, len;
	uint16_t old;

	for (int i = 0; i < DEEP; i++)
		fill(p + i * SZ, SZ, 200 + i);
	for (int i = 0; i < ALL; i++) {
		bool wr = i < DEEP;
		int k = i % DEEP;

		old = f->d.q[0].avail_idx;
		add_req(f, 0, &r[0], wr ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN,
			k * 8, buf + k * SZ, SZ, !wr, false);
		kick_if_needed(f, 0, old);
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		assert_int_equal(id, r[0].head);
		assert_int_equal(status_of(f, &r[0]), VIRTIO_BLK_S_OK);
		if (i < SLOW)
			usleep(300);	/* "checking the data" */
	}
	memset(p, 0, DEEP * SZ);
	old = f->d.q[0].avail_idx;
	for (int i = 0; i < DEEP; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_IN, i * 8, buf + i * SZ, SZ,
			true, false);
	kick_if_needed(f, 0, old);
	for (int i = 0; i < DEEP; i++)
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	expect_filled(f, r, p, DEEP, 200);
}

/* A request that completes at once (GET_ID) overtakes a large read queued
 * before it: completions are pushed in completion order. */
static void test_out_of_order(void **state)
{
	struct fixture *f = *state;
	uint64_t big = vdriver_alloc(&f->d, 2u << 20), id_buf = vdriver_alloc(&f->d, 20);
	struct breq r1, r2;
	uint32_t id, len;

	add_req(f, 0, &r1, VIRTIO_BLK_T_IN, 0, big, 2u << 20, true, false);
	add_req(f, 0, &r2, VIRTIO_BLK_T_GET_ID, 0, id_buf, 20, true, false);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	assert_int_equal(id, r2.head);
	assert_int_equal(len, 21);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	assert_int_equal(id, r1.head);
	assert_int_equal(len, (2u << 20) + 1);
	assert_int_equal(status_of(f, &r1), VIRTIO_BLK_S_OK);
	assert_int_equal(status_of(f, &r2), VIRTIO_BLK_S_OK);
	assert_memory_equal(vdriver_ptr(&f->d, id_buf, 4), "iovm", 4);
}

static void test_get_id_short_buffer(void **state)
{
	struct fixture *f = *state;
	uint64_t b = vdriver_alloc(&f->d, 8);
	uint32_t ulen;

	assert_int_equal(run(f, 0, VIRTIO_BLK_T_GET_ID, 0, b, 8, true, &ulen),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(ulen, 9);
}

static void test_discard_write_zeroes(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 16384), seg = vdriver_alloc(&f->d, 16);
	uint8_t *p = vdriver_ptr(&f->d, buf, 16384);
	struct { uint64_t sector; uint32_t num, flags; } *s =
		vdriver_ptr(&f->d, seg, 16);
	uint8_t zero[4096] = { 0 };

	memset(p, 0x5a, 16384);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 0, buf, 16384, false, NULL),
			 VIRTIO_BLK_S_OK);
	*s = (typeof(*s)){ 8, 8, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_OK);
	*s = (typeof(*s)){ 24, 4, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_OK);
	*s = (typeof(*s)){ 28, 2, VIRTIO_BLK_WRITE_ZEROES_UNMAP };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_OK);
	check_file(f, 8 * 512, zero, 4096);
	check_file(f, 24 * 512, zero, 3072);
	memset(p, 0x5a, 4096);
	check_file(f, 0, p, 4096);
	check_file(f, 30 * 512, p, 1024);
	/* unknown flag, out of range, two segments, odd length */
	*s = (typeof(*s)){ 0, 1, VIRTIO_BLK_WRITE_ZEROES_UNMAP };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_UNSUPP);
	*s = (typeof(*s)){ DISK / 512 - 1, 2, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 12, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	*s = (typeof(*s)){ UINT64_MAX / 256, 8, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_IOERR);
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 4096);

	/* past the end, straddling the end, huge sector, odd length */
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, DISK / 512, buf, 512, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, DISK / 512 - 1, buf, 1024, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, UINT64_MAX / 512 + 2, buf, 512,
			     true, NULL), VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 100, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	/* unknown and unsupported types */
	assert_int_equal(run(f, 0, 0x1234, 0, buf, 512, true, NULL),
			 VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_GET_LIFETIME, 0, buf, 16, true, NULL),
			 VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_SECURE_ERASE, 0, buf, 16, false, NULL),
			 VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(f->d.needs_reset, 0);
	/* the device still works */
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
}

static void test_short_header(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 16), st = vdriver_alloc(&f->d, 1);
	struct vbuf b[] = { { h, 10, false }, { st, 1, true } };
	uint32_t id, len;

	memset(vdriver_ptr(&f->d, h, 16), 0, 16);
	assert_true(vdriver_add(&f->d, 0, b, 2, false) >= 0);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, st, 1), VIRTIO_BLK_S_IOERR);
	assert_int_equal(f->d.needs_reset, 0);
}

/* Header split 5+11 bytes, data split over three descriptors, one of them
 * crossing the boundary between the two RAM regions, status in the same
 * descriptor as the data's tail. */
static void test_split_everything(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 16), half = RAM / 2;
	uint64_t tail = vdriver_alloc(&f->d, 1024 + 1);
	uint8_t ref[2048];
	uint32_t hdr[4] = { VIRTIO_BLK_T_OUT, 0, 100, 0 };
	struct vbuf b[] = { { h, 5, false }, { h + 5, 11, false },
			    { half - 512, 1024, false }, { tail, 1024, false },
			    { tail + 1024, 1, true } };
	uint32_t id, len;

	fill(ref, sizeof(ref), 7);
	memcpy(vdriver_ptr(&f->d, h, 16), hdr, 16);
	memcpy(vdriver_ptr(&f->d, half - 512, 512), ref, 512);
	memcpy(vdriver_ptr(&f->d, half, 512), ref + 512, 512);
	memcpy(vdriver_ptr(&f->d, tail, 1024), ref + 1024, 1024);
	assert_true(vdriver_add(&f->d, 0, b, 5, false) >= 0);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, tail + 1024, 1), VIRTIO_BLK_S_OK);
	check_file(f, 100 * 512, ref, sizeof(ref));

	/* read it back with data and status sharing one descriptor */
	hdr[0] = VIRTIO_BLK_T_IN;
	memcpy(vdriver_ptr(&f->d, h, 16), hdr, 16);
	struct vbuf r[] = { { h, 16, false }, { half - 1000, 2049, true } };

	assert_true(vdriver_add(&f->d, 0, r, 2, true) >= 0);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
	assert_int_equal(len, 2049);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, half - 1000 + 2048, 1),
			 VIRTIO_BLK_S_OK);
	assert_memory_equal(vdriver_ptr(&f->d, half - 1000, 1000), ref, 1000);
	assert_memory_equal(vdriver_ptr(&f->d, half, 1048), ref + 1000, 1048);
}

/* The only writable byte missing: the driver broke the contract; the
 * device asks for a reset, and the other queue keeps working. */
static void test_status_read_only(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 16), st = vdriver_alloc(&f->d, 1);
	uint64_t buf = vdriver_alloc(&f->d, 512);
	struct vbuf b[] = { { h, 16, false }, { st, 1, false } };

	memset(vdriver_ptr(&f->d, h, 16), 0, 16);
	assert_true(vdriver_add(&f->d, 0, b, 2, false) >= 0);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < 500 && !__atomic_load_n(&f->d.needs_reset, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	assert_int_equal(f->d.needs_reset, 1);
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, 0, buf, 512, true, NULL),
			 VIRTIO_BLK_S_OK);
}

static void test_hostile_address(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 16), st = vdriver_alloc(&f->d, 1);
	struct vbuf b[] = { { h, 16, false }, { RAM + 4096, 512, true }, { st, 1, true } };

	memset(vdriver_ptr(&f->d, h, 16), 0, 16);
	assert_true(vdriver_add(&f->d, 0, b, 3, false) >= 0);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < 500 && !__atomic_load_n(&f->d.needs_reset, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	assert_int_equal(f->d.needs_reset, 1);
	/* the broken queue ignores further kicks; stop must still return */
	vdriver_kick(&f->d, 0);
	vdriver_queue_stop(&f->d, 0);
}

/* Sequential requests popped together are merged into one host I/O; data
 * at every boundary is right, and requests popped before a malformed chain
 * still complete (the queue then waits for a reset). */
static void test_merge_then_malformed(void **state)
{
	struct fixture *f = *state;
	enum { N = 6, SZ = 8192 };
	struct breq r[N];
	uint64_t buf = vdriver_alloc(&f->d, N * SZ), h = vdriver_alloc(&f->d, 16);
	uint8_t *p = vdriver_ptr(&f->d, buf, N * SZ), ref[N * SZ];
	struct vbuf bad[] = { { h, 16, false }, { RAM * 2, 512, true } };
	uint32_t id, len;

	fill(ref, sizeof(ref), 99);
	memcpy(p, ref, sizeof(ref));
	for (int i = 0; i < N; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_OUT, 40 + i * (SZ / 512),
			buf + i * SZ, SZ, false, i & 1);
	memset(vdriver_ptr(&f->d, h, 16), 0, 16);
	assert_true(vdriver_add(&f->d, 0, bad, 2, false) >= 0);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		assert_int_equal(len, 1);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	check_file(f, 40 * 512, ref, sizeof(ref));
	assert_int_equal(f->d.needs_reset, 1);
	/* read them back merged on the other queue, into shuffled buffers */
	memset(p, 0, sizeof(ref));
	for (int i = 0; i < N; i++)
		add_req(f, 1, &r[i], VIRTIO_BLK_T_IN, 40 + i * (SZ / 512),
			buf + (N - 1 - i) * SZ, SZ, true, !(i & 1));
	vdriver_kick(&f->d, 1);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vdriver_wait_used(&f->d, 1, &id, &len, WAIT_MS), 1);
		assert_int_equal(len, SZ + 1);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
		assert_memory_equal(p + (N - 1 - i) * SZ, ref + i * SZ, SZ);
	}
}

static void test_read_only_disk(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 4096), seg = vdriver_alloc(&f->d, 16);

	assert_true(f->dev->host_features & (1ull << VIRTIO_BLK_F_RO));
	assert_false(f->dev->host_features & (1ull << VIRTIO_BLK_F_DISCARD));
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 0, buf, 4096, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL),
			 VIRTIO_BLK_S_OK);
}

/* Stopping a queue with requests in flight completes all of them first. */
static void test_stop_drains(void **state)
{
	struct fixture *f = *state;
	enum { N = 32 };
	struct breq r[N];
	uint64_t buf = vdriver_alloc(&f->d, N * 65536);
	uint32_t id, len;

	for (int i = 0; i < N; i++)
		add_req(f, 0, &r[i], i % 3 ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_FLUSH,
			i * 128, buf + i * 65536ull, i % 3 ? 65536 : 0, false, true);
	vdriver_kick(&f->d, 0);
	/* let the device pop them, then stop at once */
	for (int i = 0; i < 200 && f->d.q[0].vq.last_avail != N; i++)
		usleep(1000);
	assert_int_equal(f->d.q[0].vq.last_avail, N);
	vdriver_queue_stop(&f->d, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_OK);
	}
}

/* Without event index the NO_INTERRUPT flag silences completions; with
 * it, used_event does. */
static void test_interrupt_suppression(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 512);
	struct breq r;
	uint32_t id, len;

	vdriver_calls(&f->d, 0);
	vdriver_set_avail_flags(&f->d, 0, VIRTQ_AVAIL_F_NO_INTERRUPT);
	add_req(f, 0, &r, VIRTIO_BLK_T_IN, 0, buf, 512, true, false);
	vdriver_kick(&f->d, 0);
	for (int i = 0; i < 500 && status_of(f, &r) == 0xee; i++)
		usleep(2000);
	usleep(20000);
	assert_int_equal(vdriver_calls(&f->d, 0), 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
	vdriver_set_avail_flags(&f->d, 0, 0);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 512, true, NULL),
			 VIRTIO_BLK_S_OK);
	usleep(20000);
	assert_int_equal(vdriver_calls(&f->d, 0), 1);
}

static void test_event_idx_device(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 512);
	struct breq r[3];
	uint32_t id, len;

	/* the driver asks to hear only once used idx passes 2 */
	vdriver_set_used_event(&f->d, 0, 2);
	vdriver_calls(&f->d, 0);
	for (int k = 0; k < 3; k++) {
		add_req(f, 0, &r[k], VIRTIO_BLK_T_IN, 0, buf, 512, true, false);
		vdriver_kick(&f->d, 0);
		for (int i = 0; i < 500 && status_of(f, &r[k]) == 0xee; i++)
			usleep(2000);
		usleep(5000);
		/* the first completion always interrupts (nothing signalled
		 * yet), the second (idx 2) does not pass 2, the third does */
		assert_int_equal(vdriver_calls(&f->d, 0), k != 1);
	}
	for (int k = 0; k < 3; k++)
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
}

#define MiB (1ull << 20)

/* A one-queue device on a 24 MiB disk with data at [0, 1 MiB),
 * [15 MiB, 17 MiB) and [20 MiB, 21 MiB). */
static struct fixture *make_big(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK, .queues = 1 };
	char err[256];
	int fd;

	assert_non_null(f);
	strcpy(f->path, "/tmp/iovm-vblk-XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 24 * MiB), 0);
	close(fd);
	assert_true(blk_fill(f->path, 0, MiB, 0x5a));
	assert_true(blk_fill(f->path, 15 * MiB, 2 * MiB, 0x5a));
	assert_true(blk_fill(f->path, 20 * MiB, MiB, 0x5a));
	cfg.path = f->path;
	f->dev = virtio_blk_create(&cfg, 1, err, sizeof(err));
	assert_non_null(f->dev);
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	assert_int_equal(vdriver_attach(&f->d, f->dev, 0), 0);
	assert_int_equal(vdriver_queue_start(&f->d, 0, QSZ), 0);
	return f;
}

/* A 16 MiB WRITE ZEROES on a file system without fallocate (zeroes
 * written) is held in flight at the backend: a read queued behind it on
 * the same queue completes meanwhile; released, the zeroing completes OK
 * with zeroes on disk. Then the same where the writes fail: IOERR. Fails
 * if the zeroing runs on the queue's thread (the read waits behind it). */
static void test_big_write_zeroes_does_not_block(void **state)
{
	struct fixture *f = make_big();
	uint64_t seg = vdriver_alloc(&f->d, 16), buf = vdriver_alloc(&f->d, 4096);
	struct { uint64_t sector; uint32_t num, flags; } *s =
		vdriver_ptr(&f->d, seg, 16);
	struct breq wz, rd;
	static struct blk_hold h;	/* outlives a failed assert */
	uint32_t id[2] = { ~0u, ~0u }, len;
	int got;

	assert_int_equal(blk_hold_start(&h, true, true), 0);
	*s = (typeof(*s)){ 0, (16 * MiB) / 512, 0 };
	add_req(f, 0, &wz, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, false);
	vdriver_kick(&f->d, 0);
	assert_true(blk_hold_arrived(&h, 1, WAIT_MS));
	add_req(f, 0, &rd, VIRTIO_BLK_T_IN, (20 * MiB) / 512, buf, 4096, true,
		false);
	vdriver_kick(&f->d, 0);
	got = vdriver_wait_used(&f->d, 0, &id[0], &len, WAIT_MS);
	blk_hold_release(&h);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id[1], &len,
					   BLK_HOLD_WATCHDOG_MS), 1);
	assert_true(blk_hold_end(&h));
	assert_int_equal(got, 1);
	assert_int_equal(id[0], rd.head);
	assert_int_equal(status_of(f, &rd), VIRTIO_BLK_S_OK);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, buf, 1), 0x5a);
	assert_int_equal(id[1], wz.head);
	assert_int_equal(status_of(f, &wz), VIRTIO_BLK_S_OK);
	assert_true(blk_holds(f->path, 0, 16 * MiB, 0));
	assert_true(blk_holds(f->path, 16 * MiB, MiB, 0x5a));
	/* writes of zeroes that fail */
	assert_true(blk_break_writes(f->path) > 0);
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	*s = (typeof(*s)){ 0, (8 * MiB) / 512, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false,
			     NULL), VIRTIO_BLK_S_IOERR);
	assert_true(blk_hold_end(&h));
	teardown((void **)&f);
}

static void test_open_error(void **state)
{
	struct disk_cfg cfg = { .path = "/nonexistent/disk.img" };
	char err[256] = "";

	assert_null(virtio_blk_create(&cfg, 1, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/disk.img"));
}

/* ---- backend errors: logged however many, counted, and io_uring failure ---- */

static uint64_t fake_now;
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int read_lines, suppressed_lines;
static char last_suppressed[256];

static uint64_t fake_clock(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

/* Log lines come from the queue threads. */
static void count_line(const char *line)
{
	pthread_mutex_lock(&lines_lock);
	if (strstr(line, "virtio-blk") && strstr(line, "read of"))
		read_lines++;
	if (strstr(line, "similar messages suppressed")) {
		suppressed_lines++;
		snprintf(last_suppressed, sizeof(last_suppressed), "%s", line);
	}
	pthread_mutex_unlock(&lines_lock);
}

static int fail_reads(const struct blk_backend *be, enum blk_op op, int res)
{
	return op == BLK_OP_READ ? -EIO : res;
}

static int no_hole_punching(const struct blk_backend *be, enum blk_op op, int res)
{
	return op == BLK_OP_DISCARD ? -EOPNOTSUPP : res;
}

/* A disk that fails every read: the 9th and later errors still reach the
 * log, LOG_RATE_BURST lines per interval and then a count of the rest
 * once the clock (the test's) moves on; every one is counted. */
static void test_errors_logged_rated(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 4096);
	const struct blk_errors *e = virtio_blk_errors(f->dev);
	unsigned int n = LOG_RATE_BURST + 10;

	read_lines = suppressed_lines = 0;
	fake_now = 1000;
	log_set_clock(fake_clock);
	log_set_sink(count_line);
	blkq_test_result = fail_reads;
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, i * 64, buf, 4096, true, NULL),
				 VIRTIO_BLK_S_IOERR);
	assert_int_equal(read_lines, LOG_RATE_BURST);
	assert_int_equal(suppressed_lines, 0);
	assert_int_equal(e->read, n);
	/* the next interval: the count of what was left out, then the line */
	__atomic_store_n(&fake_now, fake_now + LOG_RATE_INTERVAL_NS, __ATOMIC_RELAXED);
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	blkq_test_result = NULL;
	log_set_sink(NULL);
	log_set_clock(NULL);
	assert_int_equal(suppressed_lines, 1);
	assert_non_null(strstr(last_suppressed, " 10 similar messages suppressed"));
	assert_int_equal(read_lines, LOG_RATE_BURST + 1);
	assert_int_equal(e->read, n + 1);
	assert_int_equal(e->write + e->flush + e->other, 0);
	/* writes still work, and are not counted */
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 0, buf, 4096, false, NULL),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(blk_errors_total(e), n + 1);
	assert_int_equal(f->d.needs_reset, 0);
}

/* DISCARD on a file system without hole punching: a hint the disk may
 * ignore, so OK (fstrim must not fail), and not an error. */
static void test_discard_unsupported(void **state)
{
	struct fixture *f = *state;
	uint64_t seg = vdriver_alloc(&f->d, 16);
	struct { uint64_t sector; uint32_t num, flags; } *s =
		vdriver_ptr(&f->d, seg, 16);

	assert_true(f->dev->guest_features & (1ull << VIRTIO_BLK_F_DISCARD));
	blkq_test_result = no_hole_punching;
	*s = (typeof(*s)){ 8, 8, 0 };
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL),
			 VIRTIO_BLK_S_OK);
	blkq_test_result = NULL;
	assert_int_equal(blk_errors_total(virtio_blk_errors(f->dev)), 0);
}

/* The queue's io_uring fails with requests in flight: every one of them
 * completes (IOERR), the device asks for a reset, later requests fail at
 * once until it is reset, the other queue goes on. */
static void test_uring_failure(void **state)
{
	struct fixture *f = *state;
	enum { N = 8 };
	uint64_t buf = vdriver_alloc(&f->d, N * 4096);
	struct breq r[N];
	bool seen[N] = { false };
	uint32_t id, len;

	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	uring_fail_arm(true);
	/* all N reach the device at once: it takes them all before it
	 * submits any */
	vdriver_hold_avail(&f->d, 0, true);
	for (unsigned int i = 0; i < N; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_IN, i * 64, buf + i * 4096, 4096,
			true, false);
	vdriver_hold_avail(&f->d, 0, false);
	vdriver_kick(&f->d, 0);
	for (unsigned int n = 0; n < N; n++) {
		unsigned int i;

		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		for (i = 0; i < N && r[i].head != (int)id; i++)
			;
		assert_true(i < N);
		assert_false(seen[i]);
		seen[i] = true;
		assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_IOERR);
	}
	assert_true(uring_fail_count() > 0);
	assert_int_equal(f->d.needs_reset, 1);
	uring_fail_arm(false);
	/* until the reset, every later request on queue 0 fails at once, a
	 * flush too, kicked or found in the ring (never a hang) */
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_IOERR);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL),
			 VIRTIO_BLK_S_IOERR);
	vdriver_hold_avail(&f->d, 0, true);
	for (unsigned int i = 0; i < N; i++)
		add_req(f, 0, &r[i], VIRTIO_BLK_T_OUT, i * 64, buf + i * 4096, 4096,
			false, false);
	vdriver_hold_avail(&f->d, 0, false);
	vdriver_kick(&f->d, 0);
	for (unsigned int n = 0; n < N; n++) {
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, WAIT_MS), 1);
		for (unsigned int i = 0; i < N; i++)
			if (r[i].head == (int)id)
				assert_int_equal(status_of(f, &r[i]), VIRTIO_BLK_S_IOERR);
	}
	/* the other queue has its own ring */
	assert_int_equal(run(f, 1, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	/* a reset (stop, start) gives queue 0 a new ring that works */
	vdriver_queue_stop(&f->d, 0);
	uring_fail_reset();
	assert_int_equal(vdriver_queue_start(&f->d, 0, QSZ), 0);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
}

/* io_uring_enter's EAGAIN is the kernel short of memory for now: the
 * queue waits again, its requests complete, no reset. */
static void test_uring_eagain(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 4096);
	unsigned int broken = uring_fail_count();

	/* (the thread sleeps in the kernel: a request wakes it, and it
	 * takes every refusal before it can sleep again) */
	uring_fail_transient(5);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	for (unsigned int ms = 0; uring_fail_transient_left() && ms < WAIT_MS; ms++)
		usleep(1000);
	assert_int_equal(uring_fail_transient_left(), 0);
	assert_int_equal(run(f, 0, VIRTIO_BLK_T_OUT, 8, buf, 4096, false, NULL),
			 VIRTIO_BLK_S_OK);
	assert_int_equal(f->d.needs_reset, 0);
	assert_int_equal(uring_fail_count(), broken);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_unaligned, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_order, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_slow_then_fast_driver, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_slow_then_fast_driver, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_write_read, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_many_in_flight, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_order, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_get_id_short_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard_write_zeroes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_split_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_then_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_disk, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(test_stop_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_suppression, setup_noevidx, teardown),
		cmocka_unit_test_setup_teardown(test_event_idx_device, setup, teardown),
		cmocka_unit_test(test_open_error),
		cmocka_unit_test(test_big_write_zeroes_does_not_block),
		cmocka_unit_test_setup_teardown(test_errors_logged_rated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard_unsupported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uring_failure, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_uring_eagain, setup_nopoll, teardown),
		cmocka_unit_test_setup_teardown(test_uring_failure, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
