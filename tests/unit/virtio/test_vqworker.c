/* The queue thread's answer tracker: when it stops spinning for a driver
 * that does not answer within the spin, how it probes, how it comes back;
 * and how long the thread spins on a network disk and on a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block/backend.h"
#include "virtio/vqworker.h"

static void record_n(struct vq_answers *a, bool answered, unsigned int n)
{
	while (n--)
		vq_answers_record(a, answered);
}

/* A fresh tracker spins; it tolerates up to half its history missing. */
static void test_starts_spinning(void **state)
{
	struct vq_answers a;

	vq_answers_init(&a);
	assert_true(vq_answers_ok(&a));
	assert_true(vq_answers_spin(&a));
	record_n(&a, false, 8);
	assert_true(vq_answers_ok(&a));	/* 8 of the last 16 answered */
	record_n(&a, false, 1);
	assert_false(vq_answers_ok(&a));
}

/* A driver that does not answer: no spin but every 8th turn. */
static void test_probes_while_slow(void **state)
{
	struct vq_answers a;
	unsigned int spins = 0;

	vq_answers_init(&a);
	record_n(&a, false, 16);
	assert_false(vq_answers_ok(&a));
	for (unsigned int i = 0; i < 64; i++)
		if (vq_answers_spin(&a)) {
			spins++;
			vq_answers_record(&a, false);
			assert_int_equal(i % 8, 7);
		}
	assert_int_equal(spins, 8);
	assert_false(vq_answers_ok(&a));
}

/* When the driver answers the probes again, spinning resumes after 8. */
static void test_comes_back(void **state)
{
	struct vq_answers a;
	unsigned int turns = 0, probes = 0;

	vq_answers_init(&a);
	record_n(&a, false, 16);
	while (!vq_answers_ok(&a)) {
		assert_true(++turns <= 64);
		if (vq_answers_spin(&a)) {
			probes++;
			vq_answers_record(&a, true);
		}
	}
	assert_int_equal(probes, 8);
	assert_int_equal(turns, 64);
	for (unsigned int i = 0; i < 16; i++)
		assert_true(vq_answers_spin(&a));
}

/* Answers after a slow spell of only 9 misses: the old hits still count,
 * so 8 answered probes suffice there too. */
static void test_short_slow_spell(void **state)
{
	struct vq_answers a;

	vq_answers_init(&a);
	record_n(&a, false, 9);
	assert_false(vq_answers_ok(&a));
	record_n(&a, true, 7);
	assert_false(vq_answers_ok(&a));
	record_n(&a, true, 1);
	assert_true(vq_answers_ok(&a));
}

static void spin_worker(struct vqworker *w, const struct blk_spin *spin)
{
	*w = (struct vqworker){ 0 };
	vqworker_init(w, NULL, NULL, "test", spin);
	vq_answers_init(&w->answers);
	vq_answers_init(&w->completes);
}

/* A network disk without poll-us= (blk_spin_of): at low depth no spin for
 * a completion ever (not even the tracker's probes), at most answer_ns for
 * the driver's answer; deep, the same short refill and burst spins as a
 * file's. A file spins the whole poll-us= for both at low depth. */
static void test_spin_policy(void **state)
{
	const struct blk_spin net = { 50000, 10000, false };
	const struct blk_spin file = { 50000, 50000, true };
	struct vqworker w;

	spin_worker(&w, &net);
	w.inflight = 1;
	for (unsigned int i = 0; i < 32; i++)
		assert_int_equal(vqworker_spin_ns(&w, VQ_POPPED, false), 0);
	assert_int_equal(vqworker_spin_ns(&w, VQ_REAPED, true), 10000);
	w.inflight = 16;
	assert_int_equal(vqworker_spin_ns(&w, VQ_REAPED, false),
			 BLKQ_SPIN_REFILL_NS);
	assert_int_equal(vqworker_spin_ns(&w, VQ_POPPED, false),
			 BLKQ_SPIN_BURST_NS);
	/* a driver that missed the 10 us: probed on every 8th answer only */
	record_n(&w.answers, false, 16);
	w.inflight = 1;
	unsigned int probes = 0;
	for (unsigned int i = 0; i < 64; i++) {
		uint64_t ns = vqworker_spin_ns(&w, VQ_REAPED, true);

		assert_true(ns == 0 || ns == 10000);
		probes += ns != 0;
	}
	assert_int_equal(probes, 8);

	spin_worker(&w, &file);
	w.inflight = 1;
	assert_int_equal(vqworker_spin_ns(&w, VQ_POPPED, false), 50000);
	assert_int_equal(vqworker_spin_ns(&w, VQ_REAPED, true), 50000);
	w.inflight = 16;
	assert_int_equal(vqworker_spin_ns(&w, VQ_REAPED, false),
			 BLKQ_SPIN_REFILL_NS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_starts_spinning),
		cmocka_unit_test(test_probes_while_slow),
		cmocka_unit_test(test_comes_back),
		cmocka_unit_test(test_short_slow_spell),
		cmocka_unit_test(test_spin_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
