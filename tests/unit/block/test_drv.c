/* Unit tests of the block queue's network-driver glue (block/driver.h)
 * with a fake driver: requests reach the driver and come back through
 * each completion path (inline, a watch, a timer, another thread's
 * mailbox), in order, with counts right; the queue tears down with
 * contexts detached; rbd: paths parse. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "block/driver.h"

enum how { INLINE, WATCH, TIMER, REMOTE, FAIL_SUBMIT };

/* The fake driver's state: what it was given, how to complete. */
static struct {
	enum how how;
	int res;		/* what completes (INLINE/WATCH/TIMER/REMOTE) */
	int efd;		/* WATCH: the test writes it */
	unsigned int attaches, detaches, submits, events;
	struct blk_dreq *held[64];	/* WATCH/TIMER/REMOTE: waiting */
	unsigned int nheld;
	struct blk_att *att;
} fk;

static int fk_open(struct blk_backend *be, const struct disk_cfg *cfg,
		   char *err, size_t errlen)
{
	be->size = 1 << 20;
	be->block_size = 512;
	be->phys_block_size = 512;
	be->path = strdup(cfg->path);
	return 0;
}

static void fk_close(struct blk_backend *be)
{
}

static int fk_flush(struct blk_backend *be)
{
	return 0;
}

static int fk_attach(struct blk_att *att)
{
	fk.attaches++;
	fk.att = att;
	att->ctx = &fk;
	return 0;
}

static int fk_submit(struct blk_att *att, struct blk_dreq *r)
{
	fk.submits++;
	switch (fk.how) {
	case FAIL_SUBMIT:
		return -ENOSPC;
	case INLINE:
		blkq_dreq_done(r, fk.res);
		return 0;
	case WATCH:
		if (!blkq_armed(att, 0))
			assert_int_equal(blkq_watch(att, 0, fk.efd, POLLIN), 0);
		break;
	case TIMER:
		if (!blkq_armed(att, 1))
			assert_int_equal(blkq_timer(att, 1, 1000000), 0);
		break;
	case REMOTE:
		break;
	}
	fk.held[fk.nheld++] = r;
	return 0;
}

static void release_held(int res, bool remote)
{
	for (unsigned int i = 0; i < fk.nheld; i++)
		if (remote)
			blkq_dreq_done_remote(fk.held[i], res);
		else
			blkq_dreq_done(fk.held[i], res);
	fk.nheld = 0;
}

static void fk_event(struct blk_att *att, unsigned int idx, int res)
{
	uint64_t v;

	fk.events++;
	if (res == -ECANCELED)
		return;
	if (idx == 0) {
		assert_true(res & POLLIN);
		assert_int_equal(read(fk.efd, &v, sizeof(v)), sizeof(v));
	} else {
		assert_int_equal(res, 0);	/* expired */
	}
	release_held(fk.res, false);
}

static void fk_detach(struct blk_att *att)
{
	fk.detaches++;
	/* nothing still held: whatever was, went through blkq_dreq_done* */
	assert_int_equal(fk.nheld, 0);
}

static const struct blk_driver fake = {
	.name = "fake", .open = fk_open, .close = fk_close, .flush = fk_flush,
	.attach = fk_attach, .submit = fk_submit, .event = fk_event,
	.detach = fk_detach,
};

struct rec {
	int order[64];
	int res[64];
	int n;
};

static struct rec *ids[64];

static void on_done(void *tag, int res)
{
	struct rec *r = *(struct rec **)tag;
	int id = (int)(((uintptr_t)tag - (uintptr_t)&ids[0]) / sizeof(ids[0]));

	r->order[r->n] = id;
	r->res[r->n++] = res;
}

static void setup_disk(struct blk_backend *be)
{
	struct disk_cfg cfg = { .path = "fake:" };

	memset(&fk, 0, sizeof(fk));
	fk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(fk.efd >= 0);
	memset(be, 0, sizeof(*be));
	be->fd = be->fd_buffered = -1;
	be->drv = &fake;
	assert_int_equal(fake.open(be, &cfg, NULL, 0), 0);
}

static void teardown_disk(struct blk_backend *be)
{
	free(be->path);
	close(fk.efd);
}

static void submit_reads(struct blk_queue *q, struct blk_backend *be,
			 struct rec *r, int n, char *buf)
{
	static struct iovec iov[64];

	for (int i = 0; i < n; i++) {
		iov[i] = (struct iovec){ buf, 512 };
		ids[i] = r;
		assert_int_equal(blkq_rw(q, be, BLK_OP_READ, &iov[i], 1, (uint64_t)i * 512,
					 on_done, &ids[i]), 0);
	}
}

/* A queue on the fake disk with n reads submitted, which the driver
 * completes by how, with 512. */
struct reads {
	struct blk_backend be;
	struct blk_queue *q;
	struct rec r;
	char buf[512];
	int n;
};

static void reads_start(struct reads *f, enum how how, int n)
{
	f->q = blkq_create(16);
	f->r.n = 0;
	f->n = n;
	setup_disk(&f->be);
	fk.how = how;
	fk.res = 512;
	assert_non_null(f->q);
	submit_reads(f->q, &f->be, &f->r, n, f->buf);
	assert_int_equal(fk.attaches, 1);	/* one context for the queue */
	assert_int_equal(blkq_inflight(f->q), n);
	assert_int_equal(blkq_submit(f->q), 0);
}

/* Reaps until every read is done: each in the order submitted, with 512. */
static void reads_reap(struct reads *f)
{
	while (f->r.n < f->n)
		assert_true(blkq_reap(f->q, true) >= 0);
	for (int i = 0; i < f->n; i++) {
		assert_int_equal(f->r.order[i], i);
		assert_int_equal(f->r.res[i], 512);
	}
	assert_int_equal(blkq_inflight(f->q), 0);
}

/* The queue goes, detaching its one context. */
static void reads_end(struct reads *f)
{
	blkq_destroy(f->q);
	assert_int_equal(fk.detaches, 1);
	teardown_disk(&f->be);
}

static void test_paths(enum how how, bool remote)
{
	struct reads f;

	reads_start(&f, how, 5);
	if (how == WATCH) {
		uint64_t one = 1;

		assert_int_equal(blkq_reap(f.q, false), 0);	/* nothing yet */
		assert_int_equal(write(fk.efd, &one, sizeof(one)), sizeof(one));
	}
	if (how == REMOTE && remote) {
		/* completed from another thread's view: the mailbox */
		release_held(512, true);
	}
	reads_reap(&f);
	reads_end(&f);
}

static void test_inline(void **state)
{
	test_paths(INLINE, false);
}

static void test_watch(void **state)
{
	test_paths(WATCH, false);
	assert_int_equal(fk.events, 1);
}

static void test_timer(void **state)
{
	test_paths(TIMER, false);
	assert_int_equal(fk.events, 1);
}

static void test_mailbox_same_thread(void **state)
{
	test_paths(REMOTE, true);
}

/* A thread completes them while the queue's owner sleeps in its wait. */
static void *completer(void *arg)
{
	/* The owner may be before, in or after its blocking reap: the
	 * mailbox's eventfd holds the wakeup in every case. */
	release_held(512, true);
	return NULL;
}

static void test_mailbox_thread(void **state)
{
	struct reads f;
	pthread_t t;

	reads_start(&f, REMOTE, 8);
	assert_int_equal(pthread_create(&t, NULL, completer, NULL), 0);
	reads_reap(&f);		/* in order: the batch order is kept */
	pthread_join(t, NULL);	/* before the mailbox goes with the queue */
	reads_end(&f);
}

static void test_submit_error(void **state)
{
	struct blk_backend be;
	struct blk_queue *q = blkq_create(4);
	struct iovec iov;
	char buf[512];
	struct rec r = { .n = 0 };

	setup_disk(&be);
	fk.how = FAIL_SUBMIT;
	iov = (struct iovec){ buf, 512 };
	ids[0] = &r;
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 0, on_done, &ids[0]),
			 -ENOSPC);
	assert_int_equal(blkq_inflight(q), 0);	/* the slot came back */
	/* the queue's own checks come before the driver */
	assert_int_equal(blkq_rw(q, &be, BLK_OP_READ, &iov, 1, 1 << 20, on_done,
				 &ids[0]), -EINVAL);
	be.ro = true;
	assert_int_equal(blkq_rw(q, &be, BLK_OP_WRITE, &iov, 1, 0, on_done, &ids[0]),
			 -EROFS);
	/* a read-only disk's flush has nothing to do and does not reach the
	 * driver */
	fk.submits = 0;
	assert_int_equal(blkq_flush(q, &be, on_done, &ids[0]), 0);
	while (r.n < 1)
		assert_true(blkq_reap(q, true) >= 0);
	assert_int_equal(r.res[0], 0);
	assert_int_equal(fk.submits, 0);
	/* no host-side copy to or from a network disk */
	struct blk_copy c = { .src = &be, .dst = &be, .len = 512 };

	be.ro = false;
	assert_int_equal(blkq_copy(q, &c, on_done, &ids[0]), -EOPNOTSUPP);
	blkq_destroy(q);
	teardown_disk(&be);
}

/* Requests a driver still owns when the ring fails are answered at once
 * and their slots kept until the driver lets go. */
static void test_abort_orphans(void **state)
{
	struct blk_backend be;
	struct blk_queue *q = blkq_create(8);
	struct rec r = { .n = 0 };
	char buf[512];

	setup_disk(&be);
	fk.how = REMOTE;
	submit_reads(q, &be, &r, 3, buf);
	blkq_abort(q, -EIO);
	assert_int_equal(r.n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(r.res[i], -EIO);
	/* the late completions land in the kept slots and are dropped */
	release_held(512, true);
	blkq_destroy(q);
	assert_int_equal(r.n, 3);
	teardown_disk(&be);
}

#ifdef IOVM_HAVE_RBD
static void test_rbd_parse(void **state)
{
	const char *pool, *ns, *img, *snap;
	char err[256], *buf;

	assert_int_equal(blk_rbd_parse("rbd:p/i", &buf, &pool, &ns, &img, &snap,
				       err, sizeof(err)), 0);
	assert_string_equal(pool, "p");
	assert_string_equal(img, "i");
	assert_null(ns);
	assert_null(snap);
	free(buf);
	assert_int_equal(blk_rbd_parse("rbd:pool/ns/img@s1", &buf, &pool, &ns, &img,
				       &snap, err, sizeof(err)), 0);
	assert_string_equal(pool, "pool");
	assert_string_equal(ns, "ns");
	assert_string_equal(img, "img");
	assert_string_equal(snap, "s1");
	free(buf);
	static const char *const bad[] = {
		"rbd:", "rbd:pool", "rbd:/img", "rbd:pool/", "rbd:pool/img@",
		"rbd:a/b/c/d", "rbd://img", "rbd:a//b",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = 0;
		assert_int_equal(blk_rbd_parse(bad[i], &buf, &pool, &ns, &img, &snap,
					       err, sizeof(err)), -EINVAL);
		assert_null(buf);
		assert_non_null(strstr(err, "rbd:POOL"));
	}
}
#endif

static void test_config(void **state)
{
	struct disk_cfg d;
	char err[256];

	assert_int_equal(config_parse_disk("path=rbd:p/i,conf=/c,user=u,keyring=/k",
					   &d, err, sizeof(err)), 0);
	assert_string_equal(d.rbd_conf, "/c");
	assert_string_equal(d.rbd_user, "u");
	assert_string_equal(d.rbd_keyring, "/k");
	config_free_disk(&d);
	/* a bare URI, '=' of its query and all */
	assert_int_equal(config_parse_disk("nbd+unix:///e?socket=/s", &d, err,
					   sizeof(err)), 0);
	assert_string_equal(d.path, "nbd+unix:///e?socket=/s");
	config_free_disk(&d);
	assert_int_equal(config_parse_disk("path=nbd://h/e,timeout=5", &d, err,
					   sizeof(err)), 0);
	assert_true(d.timeout_set);
	assert_int_equal(d.timeout_s, 5);
	config_free_disk(&d);
	static const struct { const char *arg, *msg; } bad[] = {
		{ "path=x.img,conf=/c", "apply to Ceph RBD" },
		{ "path=nbd://h/e,user=u", "apply to Ceph RBD" },
		{ "path=rbd:p/i,timeout=3", "applies to NBD" },
		{ "path=nbd://h/e,timeout=0", "from 1 to 86400" },
		{ "path=nbd://h/e,timeout=x", "from 1 to 86400" },
		{ "path=rbd:p/i@s", "snapshot is read-only" },
		{ "path=rbd:p/i,conf=", "needs a value" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = 0;
		assert_int_equal(config_parse_disk(bad[i].arg, &d, err, sizeof(err)),
				 -EINVAL);
		if (!strstr(err, bad[i].msg))
			fail_msg("%s: got '%s'", bad[i].arg, err);
	}
	assert_int_equal(config_parse_disk("path=rbd:p/i@s,ro", &d, err, sizeof(err)), 0);
	config_free_disk(&d);
}

/* Without the library, the scheme is still recognised and refused with
 * a clear line. */
static void test_open_messages(void **state)
{
	struct disk_cfg cfg = { .path = "rbd:nopool" };
	struct blk_backend be;
	char err[256] = "";

	assert_true(blk_open(&be, &cfg, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "rbd:nopool"));
	assert_int_equal(be.fd, -1);
	assert_null(be.drv);
}

/* How a device spins on its disks (blk_spin_of): a network disk without
 * poll-us= spins at most BLK_SPIN_NET_ANSWER_NS for an answer and never
 * for a completion at low depth; given poll-us=, or served with a file,
 * it spins as a file does; poll-us=0 never spins. */
static void test_spin_of(void **state)
{
	struct blk_backend file = { .fd = -1 }, net = { .fd = -1, .drv = &fake };
	const struct blk_backend *both[2] = { &file, &net }, *one[1] = { &net };
	struct disk_cfg a, b;
	const struct disk_cfg *cfgs[2] = { &a, &b };
	struct blk_spin s;
	char err[256];

	assert_int_equal(config_parse_disk("path=f", &a, err, sizeof(err)), 0);
	assert_int_equal(config_parse_disk("path=nbd://h/e", &b, err, sizeof(err)), 0);
	blk_spin_of(&s, one, cfgs + 1, 1);
	assert_int_equal(s.ns, CONFIG_POLL_US_DEFAULT * 1000ull);
	assert_int_equal(s.answer_ns, BLK_SPIN_NET_ANSWER_NS);
	assert_false(s.completions);
	blk_spin_of(&s, both, cfgs, 2);
	assert_int_equal(s.ns, CONFIG_POLL_US_DEFAULT * 1000ull);
	assert_int_equal(s.answer_ns, s.ns);
	assert_true(s.completions);
	config_free_disk(&b);

	static const struct { const char *arg; uint64_t ns; } set[] = {
		{ "path=nbd://h/e,poll-us=50", 50000 },
		{ "path=nbd://h/e,poll-us=5", 5000 },
		{ "path=nbd://h/e,poll-us=0", 0 },
	};
	for (size_t i = 0; i < sizeof(set) / sizeof(*set); i++) {
		assert_int_equal(config_parse_disk(set[i].arg, &b, err,
						   sizeof(err)), 0);
		blk_spin_of(&s, one, cfgs + 1, 1);
		assert_int_equal(s.ns, set[i].ns);
		assert_int_equal(s.answer_ns, set[i].ns);
		assert_true(s.completions);
		config_free_disk(&b);
	}
	config_free_disk(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inline),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_timer),
		cmocka_unit_test(test_mailbox_same_thread),
		cmocka_unit_test(test_mailbox_thread),
		cmocka_unit_test(test_submit_error),
		cmocka_unit_test(test_abort_orphans),
#ifdef IOVM_HAVE_RBD
		cmocka_unit_test(test_rbd_parse),
#endif
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_open_messages),
		cmocka_unit_test(test_spin_of),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
