/* Unit tests of inflight I/O tracking on the split virtqueue (vhost-user
 * INFLIGHT_SHMFD): the region's bookkeeping on pop and push, and what a
 * new back-end recovers from a region the previous one left behind when it
 * died: completed chains not run again, chains in flight popped again in
 * their original order, a push cut short at any of its steps (or a batch
 * of pushes) finished and never run again, the crash test's stop hook,
 * hostile regions refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vdriver.h"

#define RAM (4u << 20)
#define QSZ 8

struct fixture {
	struct vdriver d;
	struct virtio_dev dev;
	struct iovec iov[16];
	struct virtq_inflight inf;
	struct virtq_inflight_region *region;
	struct virtq_resubmit resubmit[QSZ];
	uint64_t buf[QSZ];	/* a 512-byte buffer per chain */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	f->dev.host_features = 1ull << VIRTIO_F_VERSION_1;
	assert_int_equal(vdriver_attach(&f->d, &f->dev, 0), 0);
	assert_int_equal(vdriver_queue_setup(&f->d, 0, QSZ), 0);
	f->region = calloc(1, virtq_inflight_region_size(QSZ));
	assert_non_null(f->region);
	f->inf.region = f->region;
	f->inf.resubmit = f->resubmit;
	for (unsigned int i = 0; i < QSZ; i++)
		f->buf[i] = vdriver_alloc(&f->d, 512);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	vdriver_destroy(&f->d);
	free(f->region);
	free(f);
	return 0;
}

static struct virtq *vq(struct fixture *f)
{
	return &f->d.q[0].vq;
}

/* (Re)starts the device side of the ring with tracking, as the vhost-user
 * transport does at every ring start: base is what SET_VRING_BASE said
 * (after a crash QEMU sends the used index). */
static int start(struct fixture *f, uint16_t base)
{
	vq(f)->last_avail = base;
	vq(f)->inflight = &f->inf;
	return virtq_init(vq(f));
}

/* Adds a one-descriptor chain whose buffer identifies it: returns head. */
static uint16_t add(struct fixture *f, unsigned int tag)
{
	struct vbuf b = { f->buf[tag], 512, false };
	int head = vdriver_add(&f->d, 0, &b, 1, false);

	assert_true(head >= 0);
	return head;
}

/* Pops one chain and returns the tag of its buffer. */
static unsigned int pop_tag(struct fixture *f, uint16_t *head)
{
	struct virtq_elem e;

	assert_int_equal(virtq_pop(vq(f), &e, f->iov, 16), 1);
	assert_int_equal(e.out_num, 1);
	*head = e.head;
	for (unsigned int i = 0; i < QSZ; i++)
		if (f->iov[0].iov_base == vdriver_ptr(&f->d, f->buf[i], 512))
			return i;
	fail_msg("popped a buffer that was never added");
	return 0;
}

static void test_fresh_region_and_bookkeeping(void **state)
{
	struct fixture *f = *state;
	uint16_t h[3];

	assert_int_equal(start(f, 0), 0);
	assert_int_equal(f->region->version, VIRTQ_INFLIGHT_VERSION);
	assert_int_equal(f->region->desc_num, QSZ);
	assert_int_equal(virtq_inflight_pending(vq(f)), 0);
	for (unsigned int i = 0; i < 3; i++)
		add(f, i);
	for (unsigned int i = 0; i < 3; i++) {
		assert_int_equal(pop_tag(f, &h[i]), i);
		assert_int_equal(f->region->desc[h[i]].inflight, 1);
		assert_int_equal(f->region->desc[h[i]].counter, i);
	}
	/* Completed out of order: the middle one first. */
	virtq_push(vq(f), h[1], 0);
	assert_int_equal(f->region->desc[h[1]].inflight, 0);
	assert_int_equal(f->region->desc[h[0]].inflight, 1);
	assert_int_equal(f->region->last_batch_head, h[1]);
	assert_int_equal(f->region->used_idx, 1);
	virtq_push(vq(f), h[0], 0);
	virtq_push(vq(f), h[2], 0);
	for (unsigned int i = 0; i < QSZ; i++)
		assert_int_equal(f->region->desc[i].inflight, 0);
	assert_int_equal(f->region->used_idx, 3);
}

/* Four chains popped, two completed out of order (the second and the
 * fourth), then the back-end dies. QEMU restarts the ring from the used
 * index (2): without the region a new back-end would run the third and
 * fourth again and never the first. With it: the first and third, in that
 * order, then new chains. */
static void test_resubmit_after_restart(void **state)
{
	struct fixture *f = *state;
	uint16_t h[4], r;
	uint32_t id, len;

	assert_int_equal(start(f, 0), 0);
	for (unsigned int i = 0; i < 4; i++)
		add(f, i);
	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(pop_tag(f, &h[i]), i);
	virtq_push(vq(f), h[3], 0);
	virtq_push(vq(f), h[1], 0);

	/* The new back-end: fresh device-side state, the same region. */
	memset(&f->inf, 0, sizeof(f->inf));
	f->inf.region = f->region;
	f->inf.resubmit = f->resubmit;
	assert_int_equal(start(f, 2), 0);
	assert_int_equal(virtq_inflight_pending(vq(f)), 2);
	assert_int_equal(vq(f)->last_avail, 4);
	assert_int_equal(virtq_avail_count(vq(f)), 2);
	assert_int_equal(pop_tag(f, &r), 0);
	assert_int_equal(r, h[0]);
	assert_int_equal(pop_tag(f, &r), 2);
	assert_int_equal(r, h[2]);
	assert_int_equal(virtq_inflight_pending(vq(f)), 0);
	/* Then the ring goes on where the driver is. */
	add(f, 4);
	assert_int_equal(pop_tag(f, &r), 4);
	assert_true(f->region->desc[r].counter > f->region->desc[h[2]].counter);
	virtq_push(vq(f), h[2], 0);
	virtq_push(vq(f), h[0], 0);
	virtq_push(vq(f), r, 0);
	/* The driver sees every chain exactly once. */
	{
		unsigned int seen = 0;

		for (unsigned int i = 0; i < 5; i++) {
			assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
			assert_true(id < QSZ);
			assert_false(seen & (1u << id));
			seen |= 1u << id;
		}
		assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 0);
	}
	{
		struct virtq_elem e;

		assert_int_equal(virtq_pop(vq(f), &e, f->iov, 16), 0);
	}
}

/* The back-end died inside a push: the used index was published but the
 * head's flag not yet cleared (nor the region's used_idx advanced). The
 * new back-end finishes that push instead of running the chain again. */
static void test_push_cut_short(void **state)
{
	struct fixture *f = *state;
	uint16_t h[2], r;

	assert_int_equal(start(f, 0), 0);
	add(f, 0);
	add(f, 1);
	assert_int_equal(pop_tag(f, &h[0]), 0);
	assert_int_equal(pop_tag(f, &h[1]), 1);
	virtq_push(vq(f), h[0], 0);
	/* Undo the last two steps of that push, as a crash would have. */
	f->region->desc[h[0]].inflight = 1;
	f->region->used_idx = 0;

	memset(&f->inf, 0, sizeof(f->inf));
	f->inf.region = f->region;
	f->inf.resubmit = f->resubmit;
	assert_int_equal(start(f, 1), 0);
	assert_int_equal(f->region->desc[h[0]].inflight, 0);
	assert_int_equal(f->region->used_idx, 1);
	assert_int_equal(virtq_inflight_pending(vq(f)), 1);
	assert_int_equal(vq(f)->last_avail, 2);
	assert_int_equal(pop_tag(f, &r), 1);
	assert_int_equal(r, h[1]);
}

/* The points of a push (vhost-user.rst's order) a back-end may die at:
 * how many of virtq_push's steps it made. */
enum push_point {
	BEFORE_PUSH,
	AFTER_NEXT,		/* desc[head].next = last_batch_head */
	AFTER_BATCH_HEAD,	/* last_batch_head = head */
	AFTER_USED_ELEM,	/* used ring element written */
	AFTER_USED_IDX,		/* used->idx published: the driver sees it */
	AFTER_CLEAR,		/* desc[head].inflight = 0 */
	AFTER_REGION_USED_IDX,	/* region used_idx = used->idx: done */
	NPOINTS
};

static volatile uint16_t *ring_used_idx(struct fixture *f)
{
	return vdriver_ptr(&f->d, f->d.q[0].used_gpa + 2, 2);
}

/* The device side of a new back-end: its own state, the same region. */
static void new_backend(struct fixture *f)
{
	memset(&f->inf, 0, sizeof(f->inf));
	f->inf.region = f->region;
	f->inf.resubmit = f->resubmit;
}

/* The driver takes the next used element (it must be head) and reuses
 * the head at once for a new chain tagged tag, as Linux's free list does. */
static void driver_reuses(struct fixture *f, uint16_t head, unsigned int tag)
{
	uint32_t id, len;

	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
	assert_int_equal(id, head);
	assert_int_equal(add(f, tag), head);
}

/* Five chains popped (tags 0-4); the second completed and its head reused
 * by the driver for a new chain (tag 5, not popped yet); then the back-end
 * dies inside the push of the fourth, at each point in turn. Once the
 * driver can see that push (the used index published) it may reuse that
 * head too (tag 6): from then on running the fourth again would run tag 6
 * out of order, and once more when its avail entry is popped, and push a
 * head twice: the driver would take the second for the completion of
 * whatever it put there next. So the new back-end resubmits exactly the
 * chains the driver has not seen completed (0, 2, 4, and 3 before the
 * publish), in pop order, then pops 5 (and 6) once each, then nothing. */
static void test_crash_inside_push(void **state)
{
	for (enum push_point p = BEFORE_PUSH; p < NPOINTS; p++) {
		struct fixture *f;
		bool seen = p >= AFTER_USED_IDX;
		unsigned int want[6], nwant = 0, nresub;
		uint16_t h[5], r;
		struct virtq_elem e;

		assert_int_equal(setup((void **)&f), 0);
		assert_int_equal(start(f, 0), 0);
		for (unsigned int i = 0; i < 5; i++)
			add(f, i);
		for (unsigned int i = 0; i < 5; i++)
			assert_int_equal(pop_tag(f, &h[i]), i);
		virtq_push(vq(f), h[1], 0);
		driver_reuses(f, h[1], 5);
		assert_int_equal(NPOINTS, VIRTQ_PUSH_STEPS + 1);
		virtq_push_partial(vq(f), h[3], 0, p);
		/* Whether the driver can see it, from the ring itself. */
		assert_int_equal(*ring_used_idx(f) == 2, seen);
		if (seen)
			driver_reuses(f, h[3], 6);

		new_backend(f);
		assert_int_equal(start(f, *ring_used_idx(f)), 0);
		want[nwant++] = 0;
		want[nwant++] = 2;
		if (!seen)
			want[nwant++] = 3;
		want[nwant++] = 4;
		nresub = nwant;
		want[nwant++] = 5;
		if (seen)
			want[nwant++] = 6;
		print_message("crash point %d\n", p);
		assert_int_equal(f->inf.recovered, nresub);
		assert_int_equal(f->inf.finished, seen && p < AFTER_REGION_USED_IDX);
		assert_int_equal(virtq_inflight_pending(vq(f)), nresub);
		assert_int_equal(f->region->used_idx, *ring_used_idx(f));
		assert_int_equal(f->region->desc[h[3]].inflight, !seen);
		for (unsigned int i = 0; i < nwant; i++) {
			assert_int_equal(pop_tag(f, &r), want[i]);
			if (want[i] < 5)
				assert_int_equal(r, h[want[i]]);
			else
				assert_int_equal(r, want[i] == 5 ? h[1] : h[3]);
		}
		assert_int_equal(virtq_pop(vq(f), &e, f->iov, 16), 0);
		/* What recovery found stays put while the queue pops. */
		assert_int_equal(f->inf.recovered, nresub);
		assert_int_equal(virtq_inflight_pending(vq(f)), 0);
		teardown((void **)&f);
	}
}

/* A back-end that pushes in batches (allowed by the specification) died
 * after publishing a batch of two and before clearing either flag: both
 * are finished, only the other two chains run again. */
static void test_crash_after_batch(void **state)
{
	struct fixture *f = *state;
	uint16_t h[4], r;
	uint16_t rused;

	assert_int_equal(start(f, 0), 0);
	for (unsigned int i = 0; i < 4; i++)
		add(f, i);
	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(pop_tag(f, &h[i]), i);
	rused = f->region->used_idx;
	/* One batch: next[h1] = old head, next[h3] = h1, last_batch_head =
	 * h3, used->idx += 2; the flags and used_idx not yet updated. */
	virtq_push(vq(f), h[1], 0);
	virtq_push(vq(f), h[3], 0);
	assert_int_equal(f->region->last_batch_head, h[3]);
	assert_int_equal(f->region->desc[h[3]].next, h[1]);
	f->region->desc[h[1]].inflight = 1;
	f->region->desc[h[3]].inflight = 1;
	f->region->used_idx = rused;
	driver_reuses(f, h[1], 4);
	driver_reuses(f, h[3], 5);

	new_backend(f);
	assert_int_equal(start(f, 2), 0);
	assert_int_equal(f->inf.recovered, 2);
	assert_int_equal(f->inf.finished, 2);
	assert_int_equal(pop_tag(f, &r), 0);
	assert_int_equal(pop_tag(f, &r), 2);
	assert_int_equal(pop_tag(f, &r), 4);
	assert_int_equal(r, h[1]);
	assert_int_equal(pop_tag(f, &r), 5);
	assert_int_equal(r, h[3]);
	{
		struct virtq_elem e;

		assert_int_equal(virtq_pop(vq(f), &e, f->iov, 16), 0);
	}
}

/* The crash test's hook (--test-stop-after): after stop_after pushes the
 * rest stay in flight, in the region and for the driver; a new back-end
 * resubmits exactly those, and no push was left half done. */
static void test_stop_after(void **state)
{
	struct fixture *f = *state;
	uint16_t h[4], r;
	uint32_t id, len;

	f->inf.stop_after = 2;
	assert_int_equal(start(f, 0), 0);
	for (unsigned int i = 0; i < 4; i++)
		add(f, i);
	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(pop_tag(f, &h[i]), i);
	virtq_push(vq(f), h[2], 0);
	virtq_push(vq(f), h[0], 0);
	virtq_push(vq(f), h[3], 0);	/* dropped */
	virtq_push(vq(f), h[1], 0);	/* dropped */
	assert_int_equal(*ring_used_idx(f), 2);
	assert_int_equal(f->region->used_idx, 2);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 0);
	assert_int_equal(f->region->desc[h[1]].inflight, 1);
	assert_int_equal(f->region->desc[h[3]].inflight, 1);

	new_backend(f);
	assert_int_equal(start(f, 2), 0);
	assert_int_equal(f->inf.recovered, 2);
	assert_int_equal(f->inf.finished, 0);
	assert_int_equal(pop_tag(f, &r), 1);
	assert_int_equal(pop_tag(f, &r), 3);
	virtq_push(vq(f), h[1], 0);
	virtq_push(vq(f), h[3], 0);
	assert_int_equal(*ring_used_idx(f), 4);
}

/* The region lives in the front-end's memory: a wrong size, version or
 * batch list is refused, never followed out of bounds; flags on heads
 * the driver never made available make pop fail the chain checks at
 * worst. */
static void test_hostile_region(void **state)
{
	struct fixture *f = *state;
	struct virtq_elem e;

	assert_int_equal(start(f, 0), 0);
	f->region->desc_num = QSZ * 2;
	assert_int_equal(start(f, 0), -EINVAL);
	f->region->desc_num = QSZ;
	f->region->version = 7;
	assert_int_equal(start(f, 0), -EINVAL);
	f->region->version = VIRTQ_INFLIGHT_VERSION;
	/* A batch longer than the ring, or one leading outside it. */
	f->region->used_idx = (uint16_t)(0 - QSZ - 1);
	assert_int_equal(start(f, 0), -EINVAL);
	f->region->used_idx = (uint16_t)-1;
	f->region->last_batch_head = QSZ;
	assert_int_equal(start(f, 0), -EINVAL);
	f->region->used_idx = 0;
	/* Every head flagged, with descriptors the driver never filled:
	 * popped again and refused by the chain checks (zero length is
	 * fine, a zero address is in RAM), never a crash. */
	for (unsigned int i = 0; i < QSZ; i++) {
		f->region->desc[i].inflight = 1;
		f->region->desc[i].counter = QSZ - i;
	}
	assert_int_equal(start(f, 0), 0);
	assert_int_equal(virtq_inflight_pending(vq(f)), QSZ);
	assert_int_equal(vq(f)->last_avail, QSZ);
	/* In counter order: the highest head first. */
	assert_true(virtq_pop(vq(f), &e, f->iov, 16) >= 0);
	assert_int_equal(e.head, QSZ - 1);
	/* The driver has made nothing available: the index is now "ahead"
	 * of it by a whole ring, which pop reports as a broken ring once
	 * the resubmissions are done. */
	for (unsigned int i = 1; i < QSZ; i++)
		assert_true(virtq_pop(vq(f), &e, f->iov, 16) >= 0);
	assert_int_equal(virtq_pop(vq(f), &e, f->iov, 16), -EINVAL);
}

/* Without a region (iovm run) nothing of this happens. */
static void test_untracked(void **state)
{
	struct fixture *f = *state;
	uint16_t h;

	vq(f)->inflight = NULL;
	vq(f)->last_avail = 0;
	assert_int_equal(virtq_init(vq(f)), 0);
	add(f, 0);
	assert_int_equal(pop_tag(f, &h), 0);
	virtq_push(vq(f), h, 0);
	assert_int_equal(f->region->version, 0);
	assert_int_equal(virtq_inflight_pending(vq(f)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fresh_region_and_bookkeeping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resubmit_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_cut_short, setup, teardown),
		cmocka_unit_test(test_crash_inside_push),
		cmocka_unit_test_setup_teardown(test_crash_after_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_region, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untracked, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
