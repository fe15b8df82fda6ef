/* Unit tests of inflight I/O tracking on the split virtqueue (vhost-user
 * INFLIGHT_SHMFD): the region's bookkeeping on pop and push, and what a
 * new back-end recovers from a region the previous one left behind when it
 * died: completed chains not run again, chains in flight popped again in
 * their original order, a push cut short finished, hostile regions refused. */
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
		cmocka_unit_test_setup_teardown(test_hostile_region, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untracked, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
