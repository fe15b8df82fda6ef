/* virtio-9p driven by the test virtio driver over fake guest RAM: the mount
 * tag, 9P requests in the layouts Linux's 9pnet_virtio uses (zero-copy
 * payloads in their own descriptors), requests served concurrently, and
 * broken chains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
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
	struct share_cfg cfg = { .tag = "hostshare", .msize = MSIZE };
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

/* Several requests in flight: a getattr queued behind large reads is
 * served by another worker and completes before the reads. */
static void test_concurrent(void **state)
{
	struct fx *f = *state;
	struct p9_msg t, r;
	uint64_t reqs = vdriver_alloc(&f->d, 4096);
	uint64_t reps[3];
	int order[4], n = 0;
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/big", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_int_equal(ftruncate(fd, MSIZE), 0);
	close(fd);
	mount_share(f);
	for (int i = 0; i < 3; i++) {
		t = (struct p9_msg){ .type = P9_TWALK };
		t.u.twalk.fid = 0;
		t.u.twalk.newfid = 10 + i;
		t.u.twalk.nwname = 1;
		t.u.twalk.wname[0] = S("big");
		assert_int_equal(rpc(f, &t, &r), 0);
		t = (struct p9_msg){ .type = P9_TLOPEN };
		t.u.tlopen.fid = 10 + i;
		assert_int_equal(rpc(f, &t, &r), 0);
	}
	reps[0] = f->rep;
	reps[1] = f->req;	/* reuse the big buffers as read targets */
	reps[2] = vdriver_alloc(&f->d, 8192);
	/* two full reads, then a getattr, all published before one kick */
	for (int i = 0; i < 3; i++) {
		uint8_t *rq = vdriver_ptr(&f->d, reqs + i * 64, 64);
		struct vbuf b[2];
		int len;

		if (i < 2) {
			t = (struct p9_msg){ .type = P9_TREAD, .tag = 100 + i };
			t.u.tread.fid = 10 + i;
			t.u.tread.count = MSIZE - P9_IOHDRSZ;
		} else {
			t = (struct p9_msg){ .type = P9_TGETATTR, .tag = 102 };
			t.u.tgetattr.fid = 12;
			t.u.tgetattr.mask = P9_GETATTR_BASIC;
		}
		len = p9_encode(&t, rq, 64);
		b[0] = (struct vbuf){ reqs + i * 64, len, false };
		b[1] = (struct vbuf){ reps[i], i < 2 ? MSIZE : 8192, true };
		assert_true(vdriver_add(&f->d, 0, b, 2, false) >= 0);
	}
	vdriver_kick(&f->d, 0);
	while (n < 3) {
		uint32_t id, used;

		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &used, 10000), 1);
		for (int i = 0; i < 3; i++) {
			uint8_t *rp = vdriver_ptr(&f->d, reps[i], 16);

			if (used && p9_get16(rp + 5) == 100 + i && rp[4] != 0) {
				order[n++] = i;
				rp[4] = 0;
				break;
			}
		}
	}
	print_message("completion order: %d %d %d\n", order[0], order[1], order[2]);
	assert_int_not_equal(order[2], 2);	/* the getattr did not wait */
}

/* A full ring of data requests (more than there are threads) at once:
 * every one is answered. */
static void test_full_ring(void **state)
{
	struct fx *f = *state;
	const unsigned int n = VIRTIO_9P_QUEUE_SIZE;
	uint64_t reqs = vdriver_alloc(&f->d, 64 * n);
	uint64_t reps = vdriver_alloc(&f->d, 4096 * n);
	struct p9_msg t, r;
	bool seen[VIRTIO_9P_QUEUE_SIZE] = { false };
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/small", f->dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	mount_share(f);
	t = (struct p9_msg){ .type = P9_TWALK };
	t.u.twalk.fid = 0;
	t.u.twalk.newfid = 1;
	t.u.twalk.nwname = 1;
	t.u.twalk.wname[0] = S("small");
	assert_int_equal(rpc(f, &t, &r), 0);
	t = (struct p9_msg){ .type = P9_TLOPEN };
	t.u.tlopen.fid = 1;
	assert_int_equal(rpc(f, &t, &r), 0);
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
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_broken_chains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_ends_session, setup, teardown),
		cmocka_unit_test(test_create_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
