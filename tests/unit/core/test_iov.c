/* lib/iov: copies and cuts at every boundary of a three-entry array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/iov.h"

static uint8_t a[3], b[1], c[4];	/* 8 bytes in 3 entries */

static void reset(struct iovec v[3])
{
	v[0] = (struct iovec){ a, sizeof(a) };
	v[1] = (struct iovec){ b, sizeof(b) };
	v[2] = (struct iovec){ c, sizeof(c) };
}

static void test_copies(void **state)
{
	static const uint8_t src[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct iovec v[3];
	uint8_t out[16];

	reset(v);
	assert_int_equal(iov_size(v, 3), 8);
	assert_int_equal(iov_size(v, 0), 0);
	for (size_t off = 0; off <= 8; off++) {
		for (size_t len = 0; len <= 9; len++) {
			size_t want = off + len > 8 ? 8 - off : len;

			memset(a, 0, 3), memset(b, 0, 1), memset(c, 0, 4);
			assert_int_equal(iov_from_buf(v, 3, off, src, len), want);
			memset(out, 0xee, sizeof(out));
			assert_int_equal(iov_to_buf(v, 3, off, out, len), want);
			assert_memory_equal(out, src, want);
			assert_int_equal(out[want], 0xee);	/* nothing past it */
		}
	}
	/* the count bounds the walk, not the lengths */
	assert_int_equal(iov_to_buf(v, 1, 0, out, 8), 3);
	assert_int_equal(iov_to_buf(v, 3, 100, out, 8), 0);
}

static void test_cuts(void **state)
{
	struct iovec v[3], d[3];

	reset(v);
	assert_int_equal(iov_slice(v, 3, 0, d), 3);
	assert_int_equal(iov_slice(v, 3, 3, d), 2);
	assert_ptr_equal(d[0].iov_base, b);
	assert_int_equal(iov_slice(v, 3, 5, d), 1);
	assert_ptr_equal(d[0].iov_base, c + 1);
	assert_int_equal(d[0].iov_len, 3);
	assert_int_equal(iov_slice(v, 3, 8, d), 0);
	assert_int_equal(iov_skip(v, 3, 2), 0);
	assert_ptr_equal(v[0].iov_base, a + 2);
	assert_int_equal(v[0].iov_len, 1);
	reset(v);
	assert_int_equal(iov_skip(v, 3, 4), 2);
	assert_int_equal(v[2].iov_len, 4);
	assert_int_equal(iov_skip(v, 3, 8), 3);
	reset(v);
	assert_int_equal(iov_trim(v, 3, 4), 2);
	assert_int_equal(v[1].iov_len, 1);
	reset(v);
	assert_int_equal(iov_trim(v, 3, 5), 3);
	assert_int_equal(v[2].iov_len, 1);
	reset(v);
	assert_int_equal(iov_trim(v, 3, 100), 3);
	assert_int_equal(iov_trim(v, 3, 0), 0);
}

static void test_window(void **state)
{
	struct iovec v[3], save[3];
	struct iov_window w;

	reset(v);
	memcpy(save, v, sizeof(v));
	for (size_t off = 0; off <= 8; off++) {
		for (size_t len = 0; off + len <= 8; len++) {
			iov_window(v, 3, off, len, &w);
			assert_int_equal(iov_size(w.iov, w.n), len);
			if (len)
				assert_ptr_equal(w.iov[0].iov_base,
						 off < 3 ? a + off : off < 4 ? b :
						 c + off - 4);
			iov_window_restore(&w);
			assert_memory_equal(v, save, sizeof(v));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_cuts),
		cmocka_unit_test(test_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
