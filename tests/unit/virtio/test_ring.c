/* Unit tests of the split virtqueue: chain parsing (direct, indirect,
 * hostile), used ring and notification suppression in both directions. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/iov.h"
#include "vdriver.h"

#define RAM (4u << 20)
#define QSZ 16

struct fixture {
	struct vdriver d;
	struct virtio_dev dev;
	struct iovec iov[64];
};

static int setup_features(void **state, uint64_t features)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	f->dev.host_features = features;
	assert_int_equal(vdriver_attach(&f->d, &f->dev, 0), 0);
	assert_int_equal(vdriver_queue_setup(&f->d, 0, QSZ), 0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_features(state, (1ull << VIRTIO_F_VERSION_1) |
				     (1ull << VIRTIO_F_RING_INDIRECT_DESC) |
				     (1ull << VIRTIO_F_RING_EVENT_IDX));
}

static int setup_plain(void **state)
{
	return setup_features(state, 1ull << VIRTIO_F_VERSION_1);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	vdriver_destroy(&f->d);
	free(f);
	return 0;
}

static struct virtq *vq(struct fixture *f)
{
	return &f->d.q[0].vq;
}

static int pop(struct fixture *f, struct virtq_elem *e)
{
	return virtq_pop(vq(f), e, f->iov, 64);
}

static void test_empty(void **state)
{
	struct fixture *f = *state;
	struct virtq_elem e;

	assert_int_equal(pop(f, &e), 0);
	assert_int_equal(virtq_avail_count(vq(f)), 0);
}

static void test_direct_chain(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 16), b = vdriver_alloc(&f->d, 4096),
		 c = vdriver_alloc(&f->d, 1);
	struct vbuf bufs[] = { { a, 16, false }, { b, 4096, true }, { c, 1, true } };
	struct virtq_elem e;
	int head = vdriver_add(&f->d, 0, bufs, 3, false);

	assert_true(head >= 0);
	assert_int_equal(virtq_avail_count(vq(f)), 1);
	assert_int_equal(pop(f, &e), 1);
	assert_int_equal(e.head, head);
	assert_int_equal(e.out_num, 1);
	assert_int_equal(e.in_num, 2);
	assert_int_equal(e.out_len, 16);
	assert_int_equal(e.in_len, 4097);
	assert_ptr_equal(f->iov[0].iov_base, vdriver_ptr(&f->d, a, 16));
	assert_ptr_equal(f->iov[1].iov_base, vdriver_ptr(&f->d, b, 4096));
	assert_int_equal(f->iov[2].iov_len, 1);
	assert_int_equal(pop(f, &e), 0);

	virtq_push(vq(f), e.head, 4097);
	uint32_t id, len;

	assert_int_equal(vdriver_wait_used(&f->d, 0, &id, &len, 0), 1);
	assert_int_equal(id, head);
	assert_int_equal(len, 4097);
}

static void test_indirect_chain(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64), b = vdriver_alloc(&f->d, 8192);
	struct vbuf bufs[] = { { a, 16, false }, { a + 16, 48, false },
			       { b, 8192, true } };
	struct virtq_elem e;

	assert_true(vdriver_add(&f->d, 0, bufs, 3, true) >= 0);
	assert_int_equal(pop(f, &e), 1);
	assert_int_equal(e.out_num, 2);
	assert_int_equal(e.in_num, 1);
	assert_int_equal(e.out_len, 64);
	assert_int_equal(e.in_len, 8192);
}

/* A descriptor spanning the two host buffers of guest RAM becomes two
 * iovecs, each inside its own region. */
static void test_region_crossing(void **state)
{
	struct fixture *f = *state;
	uint64_t half = RAM / 2;
	struct vbuf bufs[] = { { half - 100, 300, true } };
	struct virtq_elem e;

	assert_true(vdriver_add(&f->d, 0, bufs, 1, false) >= 0);
	assert_int_equal(pop(f, &e), 1);
	assert_int_equal(e.in_num, 2);
	assert_int_equal(e.in_len, 300);
	assert_ptr_equal(f->iov[0].iov_base, vdriver_ptr(&f->d, half - 100, 100));
	assert_int_equal(f->iov[0].iov_len, 100);
	assert_ptr_equal(f->iov[1].iov_base, vdriver_ptr(&f->d, half, 200));
	assert_int_equal(f->iov[1].iov_len, 200);
}

static void expect_malformed(struct fixture *f, const struct vbuf *b,
			     unsigned int n, bool indirect)
{
	struct virtq_elem e;

	assert_true(vdriver_add(&f->d, 0, b, n, indirect) >= 0);
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_outside_ram(void **state)
{
	struct fixture *f = *state;
	struct vbuf b[] = { { RAM - 10, 20, true } };

	expect_malformed(f, b, 1, false);
}

static void test_length_overflow(void **state)
{
	struct fixture *f = *state;
	struct vbuf b[] = { { UINT64_MAX - 8, 4096, true } };

	expect_malformed(f, b, 1, false);
}

static void test_readable_after_writable(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { a, 16, true }, { a + 16, 16, false } };

	expect_malformed(f, b, 2, false);
}

static void test_loop(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { a, 16, false }, { a + 16, 16, true } };
	int head = vdriver_add(&f->d, 0, b, 2, false);
	struct virtq_desc *d1 = vdriver_desc(&f->d, 0, vdriver_desc(&f->d, 0, head)->next);
	struct virtq_elem e;

	/* the writable tail points back at the head */
	d1->flags |= VIRTQ_DESC_F_NEXT;
	d1->next = head;
	d1->flags &= ~VIRTQ_DESC_F_WRITE;
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_self_loop_writable(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct virtq_desc *d0 = vdriver_desc(&f->d, 0, 3);
	struct virtq_elem e;

	*d0 = (struct virtq_desc){ a, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 3 };
	vdriver_publish(&f->d, 0, 3);
	assert_int_equal(pop(f, &e), -EINVAL);
}

/* A chain of QSZ+1 distinct-looking descriptors can only exist inside an
 * indirect table; a direct one longer than the queue must loop. */
static void test_chain_longer_than_queue(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct virtq_elem e;

	for (unsigned int i = 0; i < QSZ; i++)
		*vdriver_desc(&f->d, 0, i) = (struct virtq_desc){
			a, 4, VIRTQ_DESC_F_NEXT, (i + 1) % QSZ };
	vdriver_publish(&f->d, 0, 0);
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_indirect_loop(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { a, 16, false }, { a + 16, 16, false } };
	int head = vdriver_add(&f->d, 0, b, 2, true);
	struct virtq_desc *tab = vdriver_ptr(&f->d, vdriver_desc(&f->d, 0, head)->addr, 32);
	struct virtq_elem e;

	tab[1].flags |= VIRTQ_DESC_F_NEXT;
	tab[1].next = 0;
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_nested_indirect(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64), t = vdriver_alloc(&f->d, 16);
	struct vbuf b[] = { { a, 16, false }, { t, 16, false } };
	int head = vdriver_add(&f->d, 0, b, 2, true);
	struct virtq_desc *tab = vdriver_ptr(&f->d, vdriver_desc(&f->d, 0, head)->addr, 32);
	struct virtq_elem e;

	tab[1].flags |= VIRTQ_DESC_F_INDIRECT;
	*(struct virtq_desc *)vdriver_ptr(&f->d, t, 16) =
		(struct virtq_desc){ a, 16, 0, 0 };
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_indirect_bad_len(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { a, 16, false } };
	int head = vdriver_add(&f->d, 0, b, 1, true);
	struct virtq_elem e;

	vdriver_desc(&f->d, 0, head)->len = 20;	/* not a multiple of 16 */
	assert_int_equal(pop(f, &e), -EINVAL);
}

static void test_indirect_not_negotiated(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { a, 16, false } };

	expect_malformed(f, b, 1, true);
}

static void test_bad_head_and_index(void **state)
{
	struct fixture *f = *state;
	struct virtq_elem e;
	uint16_t *avail = vdriver_ptr(&f->d, f->d.q[0].avail_gpa, 4);

	vdriver_publish(&f->d, 0, QSZ + 3);
	assert_int_equal(pop(f, &e), -EINVAL);
	/* the driver claims more entries than the ring holds */
	vq(f)->last_avail = 0;
	avail[1] = QSZ + 1;
	assert_int_equal(pop(f, &e), -EINVAL);
	assert_int_equal(virtq_avail_count(vq(f)), 0);
}

static void test_too_many_segments(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 64);
	struct vbuf b[4] = { { a, 4, false }, { a + 4, 4, false },
			     { a + 8, 4, false }, { a + 12, 4, true } };
	struct virtq_elem e;

	assert_true(vdriver_add(&f->d, 0, b, 4, false) >= 0);
	assert_int_equal(virtq_pop(vq(f), &e, f->iov, 3), -ENOBUFS);
}

static void test_misaligned_ring_refused(void **state)
{
	struct fixture *f = *state;
	struct virtq v = *vq(f);

	v.desc_gpa += 8;
	assert_int_equal(virtq_init(&v), -EINVAL);
	v = *vq(f);
	v.used_gpa = RAM - 8;
	assert_int_equal(virtq_init(&v), -EINVAL);
	v = *vq(f);
	v.size = 12;
	assert_int_equal(virtq_init(&v), -EINVAL);
}

static void push_n(struct fixture *f, int n)
{
	uint64_t a = vdriver_alloc(&f->d, 16);
	struct vbuf b[] = { { a, 16, true } };
	struct virtq_elem e;

	for (int i = 0; i < n; i++) {
		assert_true(vdriver_add(&f->d, 0, b, 1, false) >= 0);
		assert_int_equal(pop(f, &e), 1);
		virtq_push(vq(f), e.head, 0);
	}
}

/* Device -> driver: interrupts only when used idx crosses used_event. */
static void test_event_idx_interrupts(void **state)
{
	struct fixture *f = *state;

	vdriver_calls(&f->d, 0);
	push_n(f, 1);
	assert_true(virtq_notify(vq(f)));	/* first one always */
	assert_int_equal(vdriver_calls(&f->d, 0), 1);
	/* the driver wants to hear when used idx passes 4 */
	vdriver_set_used_event(&f->d, 0, 4);
	push_n(f, 2);		/* used idx 3 */
	assert_false(virtq_notify(vq(f)));
	push_n(f, 1);		/* 4: not past yet */
	assert_false(virtq_notify(vq(f)));
	push_n(f, 1);		/* 5: crossed 4 */
	assert_true(virtq_notify(vq(f)));
	assert_int_equal(vdriver_calls(&f->d, 0), 1);
	/* nothing new pushed: no interrupt */
	assert_false(virtq_notify(vq(f)));
}

/* Driver -> device: after enable_kicks avail_event = last_avail, so a
 * driver adding one more entry kicks; after disable_kicks it sits behind
 * last_avail, so the driver skips the kick. */
static void test_event_idx_kicks(void **state)
{
	struct fixture *f = *state;
	uint64_t a = vdriver_alloc(&f->d, 16);
	struct vbuf b[] = { { a, 16, true } };
	struct virtq_elem e;

	assert_true(vdriver_add(&f->d, 0, b, 1, false) >= 0);
	assert_int_equal(pop(f, &e), 1);
	virtq_disable_kicks(vq(f));
	assert_true(vdriver_add(&f->d, 0, b, 1, false) >= 0);
	/* disabling put avail_event behind last_avail (1): adding 1->2 does
	 * not cross it, so the driver need not kick */
	assert_false(vdriver_kick_needed(&f->d, 0, 1, 2));
	assert_int_equal(pop(f, &e), 1);
	assert_true(vdriver_add(&f->d, 0, b, 1, false) >= 0);
	/* popping with kicks disabled left avail_event behind: no kick */
	assert_false(vdriver_kick_needed(&f->d, 0, 2, 3));
	/* re-enabling sees the entry that arrived meanwhile */
	assert_true(virtq_enable_kicks(vq(f)));
	assert_int_equal(pop(f, &e), 1);
	assert_false(virtq_enable_kicks(vq(f)));
	assert_true(vdriver_kick_needed(&f->d, 0, 3, 4));
}

/* Ring memory reused after a reset may hold a stale avail_event far from
 * the new avail idx; the driver would then never kick. virtq_init re-arms
 * it at last_avail. */
static void test_init_rearms_stale_avail_event(void **state)
{
	struct fixture *f = *state;
	uint16_t *ev = vdriver_ptr(&f->d, f->d.q[0].used_gpa + 4 + 8 * QSZ, 2);

	*ev = 0x1234;
	vq(f)->last_avail = 0;
	assert_int_equal(virtq_init(vq(f)), 0);
	assert_int_equal(*ev, 0);
	assert_true(vdriver_kick_needed(&f->d, 0, 0, 1));
}

static void test_flags_suppression(void **state)
{
	struct fixture *f = *state;

	vdriver_calls(&f->d, 0);
	vdriver_set_avail_flags(&f->d, 0, VIRTQ_AVAIL_F_NO_INTERRUPT);
	push_n(f, 1);
	assert_false(virtq_notify(vq(f)));
	vdriver_set_avail_flags(&f->d, 0, 0);
	push_n(f, 1);
	assert_true(virtq_notify(vq(f)));
	assert_int_equal(vdriver_calls(&f->d, 0), 1);
	virtq_disable_kicks(vq(f));
	assert_false(vdriver_kick_needed(&f->d, 0, 2, 3));
	assert_false(virtq_enable_kicks(vq(f)));
	assert_true(vdriver_kick_needed(&f->d, 0, 2, 3));
}

static void test_isr(void **state)
{
	struct fixture *f = *state;
	uint8_t isr = 0;

	vq(f)->isr = &isr;
	push_n(f, 1);
	assert_true(virtq_notify(vq(f)));
	assert_int_equal(isr, 1);
}

static void test_iov_copy(void **state)
{
	uint8_t a[3], b[5], out[8];
	struct iovec v[] = { { a, 3 }, { b, 5 } };

	assert_int_equal(iov_from_buf(v, 2, 1, "abcdefgh", 8), 7);
	assert_memory_equal(a + 1, "ab", 2);
	assert_memory_equal(b, "cdefg", 5);
	assert_int_equal(iov_to_buf(v, 2, 2, out, 8), 6);
	assert_memory_equal(out, "bcdefg", 6);
	assert_int_equal(iov_to_buf(v, 2, 9, out, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_region_crossing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_ram, setup, teardown),
		cmocka_unit_test_setup_teardown(test_length_overflow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readable_after_writable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_self_loop_writable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_longer_than_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nested_indirect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_bad_len, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_not_negotiated, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_bad_head_and_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_many_segments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_misaligned_ring_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_idx_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_idx_kicks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_rearms_stale_avail_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flags_suppression, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_isr, setup, teardown),
		cmocka_unit_test(test_iov_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
