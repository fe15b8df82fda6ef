/* virtio-9p driven by the test virtio driver over fake guest RAM: the mount
 * tag, 9P requests in the layouts Linux's 9pnet_virtio uses (zero-copy
 * payloads in their own descriptors), slow requests that do not hold up
 * the others, and broken chains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "p9/proto.h"
#include "vdriver.h"
#include "virtio/9p.h"

#define RAM (160u << 20)
#define MSIZE (32u << 20)

struct fx {
	char dir[64];
	struct vdriver d;
	struct virtio_dev *dev;
	uint64_t req, rep;	/* guest buffers of MSIZE */
};

static struct p9_str S(const char *s)
{
	return (struct p9_str){ strlen(s), s };
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct share_cfg cfg = { .tag = "hostshare", .msize = MSIZE,
				 .poll_us = CONFIG_POLL_US_DEFAULT };
	char err[256];

	strcpy(f->dir, "/tmp/v9ptest.XXXXXX");
	if (!mkdtemp(f->dir) || vdriver_init(&f->d, RAM))
		return -1;
	cfg.path = f->dir;
	f->dev = virtio_9p_create(&cfg, err, sizeof(err));
	if (!f->dev)
		return -1;
	if (vdriver_attach(&f->d, f->dev, 0) ||
	    vdriver_queue_start(&f->d, 0, VIRTIO_9P_QUEUE_SIZE))
		return -1;
	f->req = vdriver_alloc(&f->d, MSIZE);
	f->rep = vdriver_alloc(&f->d, MSIZE);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	vdriver_destroy(&f->d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		return -1;
	free(f);
	return 0;
}

/* Sends t (encoded at gpa req) with the reply into [rep, rep+room) split
 * as Linux does for zero-copy reads: the reply header in its own
 * descriptor, then the payload area. Returns the used length. */
static uint32_t rpc_at(struct fx *f, uint64_t req, uint64_t rep,
		       struct p9_msg *t, uint32_t room, struct p9_msg *r)
{
	uint8_t *rq = vdriver_ptr(&f->d, req, MSIZE);
	int len = p9_encode(t, rq, MSIZE);
	struct vbuf b[3] = {
		{ req, len, false },
		{ rep, P9_IOHDRSZ, true },
		{ rep + P9_IOHDRSZ, room - P9_IOHDRSZ, true },
	};
	uint32_t id, used;

	assert_true(len > 0);
	if (t->type == P9_TWRITE)
		b[0].len = P9_TWRITE_HDRSZ + t->u.twrite.d.count;
	assert_true(vdriver_add(&f->d, 0, b, 3, false) >= 0);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &used, 10000), 1);
	if (r && used)
		assert_int_equal(p9_decode(vdriver_ptr(&f->d, rep, used), used,
					   false, r), 0);
	return used;
}

static int rpc(struct fx *f, struct p9_msg *t, struct p9_msg *r)
{
	t->tag = 1;
	rpc_at(f, f->req, f->rep, t, 8192, r);
	if (r->type == P9_RLERROR)
		return -(int)r->u.rlerror.ecode;
	return r->type == t->type + 1 ? 0 : -EIO;
}

static void mount_share(struct fx *f)
{
	struct p9_msg t = { .type = P9_TVERSION }, r;

	t.u.version.msize = 64u << 20;
	t.u.version.version = S(P9_VERSION_L);
	assert_int_equal(rpc(f, &t, &r), 0);
	assert_int_equal(r.u.version.msize, MSIZE);	/* capped to the share's */
	t = (struct p9_msg){ .type = P9_TATTACH };
	t.u.tattach.fid = 0;
	t.u.tattach.afid = P9_NOFID;
	t.u.tattach.uname = S("root");
	t.u.tattach.aname = S("");
	assert_int_equal(rpc(f, &t, &r), 0);
}

/* Walks from the root (fid 0) to name as fid, then opens it. */
static void walk_open(struct fx *f, uint32_t fid, const char *name,
		      uint32_t flags)
{
	struct p9_msg t = { .type = P9_TWALK }, r;

	t.u.twalk.fid = 0;
	t.u.twalk.newfid = fid;
	t.u.twalk.nwname = 1;
	t.u.twalk.wname[0] = S(name);
	assert_int_equal(rpc(f, &t, &r), 0);
	t = (struct p9_msg){ .type = P9_TLOPEN };
	t.u.tlopen.fid = fid;
	t.u.tlopen.flags = flags;
	assert_int_equal(rpc(f, &t, &r), 0);
}

static void test_config_tag(void **state)
{
	struct fx *f = *state;
	uint8_t cfg[16];

	assert_int_equal(f->dev->device_id, VIRTIO_ID_9P);
	assert_int_equal(f->dev->num_queues, 1);
	assert_true(f->dev->host_features & (1ull << VIRTIO_9P_F_MOUNT_TAG));
	assert_int_equal(f->dev->config_len, 2 + 9);
	f->dev->ops->config_read(f->dev, 0, cfg, 11);
	assert_int_equal(cfg[0] | cfg[1] << 8, 9);
	assert_memory_equal(cfg + 2, "hostshare", 9);
}

static void test_requests_over_the_ring(void **state)
{
	struct fx *f = *state;
	struct p9_msg t, r;
	const uint32_t count = MSIZE - P9_TWRITE_HDRSZ;
	uint8_t *payload = vdriver_ptr(&f->d, f->req + P9_TWRITE_HDRSZ, count);
	uint8_t *back;

	mount_share(f);
	t = (struct p9_msg){ .type = P9_TWALK };
	t.u.twalk.fid = 0;
	t.u.twalk.newfid = 1;
	assert_int_equal(rpc(f, &t, &r), 0);
	t = (struct p9_msg){ .type = P9_TLCREATE };
	t.u.tlcreate.fid = 1;
	t.u.tlcreate.name = S("data");
	t.u.tlcreate.flags = O_RDWR | O_CREAT;
	t.u.tlcreate.mode = 0644;
	assert_int_equal(rpc(f, &t, &r), 0);

	/* a full-msize write, its payload in guest memory, in place */
	for (uint32_t i = 0; i < count; i++)
		payload[i] = i * 13 + (i >> 11);
	t = (struct p9_msg){ .type = P9_TWRITE, .tag = 2 };
	t.u.twrite.fid = 1;
	t.u.twrite.offset = 0;
	t.u.twrite.d = (struct p9_data){ count, NULL };
	rpc_at(f, f->req, f->rep, &t, 8192, &r);
	assert_int_equal(r.type, P9_RWRITE);
	assert_int_equal(r.u.rwrite.count, count);

	/* and read back at full size, header and payload apart */
	t = (struct p9_msg){ .type = P9_TREAD, .tag = 3 };
	t.u.tread.fid = 1;
	t.u.tread.offset = 0;
	t.u.tread.count = MSIZE - P9_IOHDRSZ;
	back = vdriver_ptr(&f->d, f->rep, MSIZE);
	assert_int_equal(rpc_at(f, f->req,
				f->rep, &t, MSIZE, NULL), P9_IOHDRSZ + count);
	assert_int_equal(back[4], P9_RREAD);
	assert_int_equal(p9_get32(back + 7), count);
	{
		/* the request buffer held the write payload: compare with
		 * a regenerated pattern */
		for (uint32_t i = 0; i < count; i += 4093)
			assert_int_equal(back[P9_IOHDRSZ + i],
					 (uint8_t)(i * 13 + (i >> 11)));
	}
	t = (struct p9_msg){ .type = P9_TGETATTR };
	t.u.tgetattr.fid = 1;
	t.u.tgetattr.mask = P9_GETATTR_BASIC;
	assert_int_equal(rpc(f, &t, &r), 0);
	assert_int_equal(r.u.rgetattr.a.size, count);
}

/* The slow file: preadv2/pwritev2 on it (preadv64v2/pwritev64v2 with
 * 64-bit offsets) wait until the test lets them go, and a RWF_NOWAIT read
 * of it fails with EAGAIN, as for data on a disk. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool released;
	dev_t dev;
	ino_t ino;		/* 0: no slow file */
	unsigned int nowait_reads;
} slow = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, 0,
	   0 };

ssize_t __real_preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off,
		       int flags);
ssize_t __real_pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off,
			int flags);

static bool slow_file(int fd)
{
	struct stat st;

	return slow.ino && !fstat(fd, &st) && st.st_ino == slow.ino &&
	       st.st_dev == slow.dev;
}

static void slow_wait(void)
{
	pthread_mutex_lock(&slow.lock);
	while (!slow.released)
		pthread_cond_wait(&slow.cond, &slow.lock);
	pthread_mutex_unlock(&slow.lock);
}

ssize_t __wrap_preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off,
		       int flags)
{
	if (slow_file(fd)) {
		if (flags & RWF_NOWAIT) {
			__atomic_add_fetch(&slow.nowait_reads, 1, __ATOMIC_RELAXED);
			errno = EAGAIN;
			return -1;
		}
		slow_wait();
	}
	return __real_preadv64v2(fd, iov, cnt, off, flags);
}

ssize_t __wrap_pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off,
			int flags)
{
	if (slow_file(fd))
		slow_wait();
	return __real_pwritev64v2(fd, iov, cnt, off, flags);
}

/* A request that blocks does not hold up the one behind it: a slow read
 * (not in the page cache) goes to another thread at once, a slow write
 * (no RWF_NOWAIT for buffered writes) has the standby thread take the
 * ring over. The getattr queued behind it is answered while it still
 * waits; once let go it completes with the right data. */
static void slow_request(struct fx *f, bool write)
{
	const uint32_t n = 4096;
	uint64_t reqs = vdriver_alloc(&f->d, 2 * (64 + n));
	uint64_t reps[2] = { vdriver_alloc(&f->d, P9_IOHDRSZ + n),
			     vdriver_alloc(&f->d, 8192) };
	uint8_t data[4096], *rp;
	unsigned int nowait_reads;
	struct p9_msg t;
	uint32_t id, used;
	bool ok;
	struct stat st;
	char p[128];
	int fd;

	for (uint32_t i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 7 + 1);
	snprintf(p, sizeof(p), "%s/slow", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write ? 0 : pwrite(fd, data, n, 0), write ? 0 : n);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	mount_share(f);
	walk_open(f, 10, "slow", O_RDWR);
	pthread_mutex_lock(&slow.lock);
	slow.dev = st.st_dev;
	slow.ino = st.st_ino;
	slow.released = false;
	slow.nowait_reads = 0;
	pthread_mutex_unlock(&slow.lock);

	/* the slow request, then a getattr, published before one kick */
	for (int i = 0; i < 2; i++) {
		/* the write's payload follows its header */
		uint64_t at = reqs + (i ? 64 + n : 0);
		uint8_t *rq = vdriver_ptr(&f->d, at, 64 + n);
		struct vbuf b[2];
		int len;

		if (i == 0 && write) {
			t = (struct p9_msg){ .type = P9_TWRITE, .tag = 100 };
			t.u.twrite.fid = 10;
			t.u.twrite.d = (struct p9_data){ n, data };
		} else if (i == 0) {
			t = (struct p9_msg){ .type = P9_TREAD, .tag = 100 };
			t.u.tread.fid = 10;
			t.u.tread.count = n;
		} else {
			t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 101 };
			t.u.tgetattr.fid = 0;
			t.u.tgetattr.mask = P9_GETATTR_BASIC;
		}
		len = p9_encode(&t, rq, 64 + n);
		assert_true(len > 0);
		b[0] = (struct vbuf){ at, len, false };
		b[1] = (struct vbuf){ reps[i], i ? 8192 : P9_IOHDRSZ + n, true };
		assert_true(vdriver_add(&f->d, 0, b, 2, false) >= 0);
	}
	vdriver_kick(&f->d, 0);
	/* The slow request cannot complete before it is let go: the first
	 * completion is the getattr's. */
	ok = vdriver_wait_used(&f->d, 0, &id, &used, 10000) == 1;
	pthread_mutex_lock(&slow.lock);
	nowait_reads = slow.nowait_reads;
	/* let go before any assertion, which would leave it blocked */
	slow.released = true;
	pthread_cond_broadcast(&slow.cond);
	pthread_mutex_unlock(&slow.lock);
	assert_true(ok);
	rp = vdriver_ptr(&f->d, reps[1], 8192);
	assert_true(used >= P9_HDRSZ);
	assert_int_equal(rp[4], P9_RGETATTR);
	assert_int_equal(p9_get16(rp + 5), 101);
	/* the read was tried without blocking, on the owner, first */
	assert_int_equal(nowait_reads, write ? 0 : 1);

	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &used, 10000), 1);
	rp = vdriver_ptr(&f->d, reps[0], P9_IOHDRSZ + n);
	assert_int_equal(p9_get16(rp + 5), 100);
	assert_int_equal(rp[4], write ? P9_RWRITE : P9_RREAD);
	assert_int_equal(p9_get32(rp + 7), n);
	if (write) {
		uint8_t back[4096];

		fd = open(p, O_RDONLY);
		assert_int_equal(pread(fd, back, n, 0), n);
		close(fd);
		assert_memory_equal(back, data, n);
	} else {
		assert_int_equal(used, P9_IOHDRSZ + n);
		assert_memory_equal(rp + P9_IOHDRSZ, data, n);
	}
	pthread_mutex_lock(&slow.lock);
	slow.ino = 0;
	pthread_mutex_unlock(&slow.lock);
}

static void test_slow_read(void **state)
{
	slow_request(*state, false);
}

static void test_slow_write(void **state)
{
	slow_request(*state, true);
}

/* A full ring of data requests (more than there are threads) at once:
 * every one is answered. */
static void test_full_ring(void **state)
{
	struct fx *f = *state;
	const unsigned int n = VIRTIO_9P_QUEUE_SIZE;
	uint64_t reqs = vdriver_alloc(&f->d, 64 * n);
	uint64_t reps = vdriver_alloc(&f->d, 4096 * n);
	struct p9_msg t;
	bool seen[VIRTIO_9P_QUEUE_SIZE] = { false };
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/small", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	mount_share(f);
	walk_open(f, 1, "small", O_RDONLY);
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *rq = vdriver_ptr(&f->d, reqs + 64 * i, 64);
		struct vbuf b[2];
		int len;

		t = (struct p9_msg){ .type = P9_TREAD, .tag = i };
		t.u.tread.fid = 1;
		t.u.tread.offset = 4096 * i;
		t.u.tread.count = 4096 - P9_IOHDRSZ;
		len = p9_encode(&t, rq, 64);
		b[0] = (struct vbuf){ reqs + 64 * i, len, false };
		b[1] = (struct vbuf){ reps + 4096 * i, 4096, true };
		/* indirect: one ring descriptor per request */
		assert_true(vdriver_add(&f->d, 0, b, 2, true) >= 0);
	}
	vdriver_kick(&f->d, 0);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t id, used;

		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &used, 10000), 1);
		assert_int_equal(used, 4096);
	}
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *rp = vdriver_ptr(&f->d, reps + 4096 * i, 16);

		assert_int_equal(rp[4], P9_RREAD);
		assert_false(seen[p9_get16(rp + 5)]);
		seen[p9_get16(rp + 5)] = true;
	}
}

static void test_broken_chains(void **state)
{
	struct fx *f = *state;
	struct p9_msg t = { .type = P9_TCLUNK }, r;
	uint8_t *rq = vdriver_ptr(&f->d, f->req, 64);
	struct vbuf b[1];
	uint32_t id, used;
	int len;

	mount_share(f);
	/* no writable part: nothing can be answered, the device goes on */
	t.u.tfid.fid = 0;
	len = p9_encode(&t, rq, 64);
	b[0] = (struct vbuf){ f->req, len, false };
	assert_true(vdriver_add(&f->d, 0, b, 1, false) >= 0);
	vdriver_kick(&f->d, 0);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &used, 10000), 1);
	assert_int_equal(used, 0);
	t = (struct p9_msg){ .type = P9_TGETATTR };
	t.u.tgetattr.fid = 0;
	assert_int_equal(rpc(f, &t, &r), 0);
	/* a descriptor outside guest RAM breaks the ring: needs reset */
	{
		struct vbuf bad[2] = { { f->req, len, false }, { f->rep, 64, true } };
		int head = vdriver_add(&f->d, 0, bad, 2, false);

		assert_true(head >= 0);
		vdriver_desc(&f->d, 0, head)->addr = RAM + 4096;
		vdriver_kick(&f->d, 0);
		for (int i = 0; i < 100 && !f->d.needs_reset; i++)
			usleep(10000);
		assert_int_equal(f->d.needs_reset, 1);
	}
}

/* A reset (queue stop) ends the mount: fids do not survive it. */
static void test_reset_ends_session(void **state)
{
	struct fx *f = *state;
	struct p9_msg t = { .type = P9_TGETATTR }, r;

	mount_share(f);
	t.u.tgetattr.fid = 0;
	assert_int_equal(rpc(f, &t, &r), 0);
	vdriver_queue_stop(&f->d, 0);
	assert_int_equal(vdriver_queue_start(&f->d, 0, VIRTIO_9P_QUEUE_SIZE), 0);
	t = (struct p9_msg){ .type = P9_TVERSION };
	t.u.version.msize = 8192;
	t.u.version.version = S(P9_VERSION_L);
	assert_int_equal(rpc(f, &t, &r), 0);
	t = (struct p9_msg){ .type = P9_TGETATTR };
	t.u.tgetattr.fid = 0;
	assert_int_equal(rpc(f, &t, &r), -EBADF);
}

static void test_create_errors(void **state)
{
	struct share_cfg cfg = { .path = "/nonexistent", .tag = "t" };
	char err[256];

	assert_null(virtio_9p_create(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent"));
	cfg.path = "/tmp";
	cfg.tag = NULL;
	assert_null(virtio_9p_create(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "tag"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config_tag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_requests_over_the_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_broken_chains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_ends_session, setup, teardown),
		cmocka_unit_test(test_create_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
