/* lib/bufring: allocations never overlap and stay inside the ring, keep
 * their data until freed, space comes back in order only, an empty ring
 * gives its largest allocation, and a long random run of allocations and
 * out-of-order frees keeps all of that. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/bufring.h"

#define RING (64 * BUFRING_ALIGN)

static void test_order(void **state)
{
	struct bufring b;
	void *p[8];

	(void)state;
	bufring_init(&b, RING);
	assert_int_equal(bufring_max(&b), RING - BUFRING_ALIGN);
	assert_null(bufring_alloc(&b, RING));	/* never fits */
	/* four of 16 units each (15 of data, one of header): full */
	for (int i = 0; i < 4; i++) {
		p[i] = bufring_alloc(&b, 14 * BUFRING_ALIGN + 1);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % BUFRING_ALIGN, 0);
		assert_true(bufring_owns(&b, p[i]));
	}
	assert_null(bufring_alloc(&b, 1));
	/* freeing the second reclaims nothing: the first is older */
	bufring_free(&b, p[1]);
	assert_null(bufring_alloc(&b, 1));
	/* freeing the first reclaims both: room at the beginning */
	bufring_free(&b, p[0]);
	p[4] = bufring_alloc(&b, 30 * BUFRING_ALIGN);	/* 31 of those 32 units */
	assert_ptr_equal(p[4], p[0]);
	assert_null(bufring_alloc(&b, 1));
	bufring_free(&b, p[2]);
	bufring_free(&b, p[3]);
	/* the wrapped one is the oldest now: the end is free again */
	assert_null(bufring_alloc(&b, 33 * BUFRING_ALIGN));	/* 34 units: no */
	p[5] = bufring_alloc(&b, 32 * BUFRING_ALIGN);	/* the 33 after it */
	assert_non_null(p[5]);
	assert_ptr_equal(p[5], (char *)p[4] + 31 * BUFRING_ALIGN);
	assert_null(bufring_alloc(&b, 1));
	bufring_free(&b, p[5]);
	bufring_free(&b, p[4]);
	/* empty: everything from the beginning */
	p[6] = bufring_alloc(&b, bufring_max(&b));
	assert_ptr_equal(p[6], p[0]);
	bufring_free(&b, p[6]);
	assert_false(bufring_owns(&b, &b));
	bufring_destroy(&b);
}

struct live {
	unsigned char *p;
	size_t len;
	unsigned char fill;
};

static void test_random(void **state)
{
	struct live l[32];
	unsigned int n = 0, seed = 12345, made = 0;
	struct bufring b;

	(void)state;
	bufring_init(&b, RING);
	for (int step = 0; step < 200000; step++) {
		seed = seed * 1103515245 + 12345;
		if (n < 32 && (seed >> 16) % 3) {
			size_t len = 1 + (seed >> 8) % (RING / 4);
			unsigned char *p = bufring_alloc(&b, len);

			if (!p) {
				/* only when something is live (an empty ring
				 * takes up to its maximum) */
				assert_true(n > 0);
				continue;
			}
			made++;
			assert_true(bufring_owns(&b, p) && bufring_owns(&b, p + len - 1));
			for (unsigned int i = 0; i < n; i++)
				assert_true(p + len <= l[i].p || l[i].p + l[i].len <= p);
			l[n] = (struct live){ p, len, (unsigned char)step };
			memset(p, l[n].fill, len);
			n++;
		} else if (n) {
			/* mostly the oldest, sometimes any */
			unsigned int i = (seed >> 20) % 4 ? 0 : (seed >> 8) % n;

			for (size_t k = 0; k < l[i].len; k++)
				assert_int_equal(l[i].p[k], l[i].fill);
			bufring_free(&b, l[i].p);
			memmove(&l[i], &l[i + 1], (n - i - 1) * sizeof(l[0]));
			n--;
		}
	}
	assert_true(made > 50000);
	while (n)
		bufring_free(&b, l[--n].p);
	assert_non_null(bufring_alloc(&b, bufring_max(&b)));
	bufring_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
