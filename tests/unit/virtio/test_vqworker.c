/* The queue thread's answer tracker: when it stops spinning for a driver
 * that does not answer within the spin, how it probes, how it comes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_starts_spinning),
		cmocka_unit_test(test_probes_while_slow),
		cmocka_unit_test(test_comes_back),
		cmocka_unit_test(test_short_slow_spell),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
