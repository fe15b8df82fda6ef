/* Bus dispatch: registration rules, lookups at range edges, moves. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vm/bus.h"

struct hit {
	uint64_t offset;
	unsigned int len;
	bool is_write;
	int count;
};

static void record(void *opaque, uint64_t offset, void *data, unsigned int len,
		   bool is_write)
{
	struct hit *h = opaque;

	h->offset = offset;
	h->len = len;
	h->is_write = is_write;
	h->count++;
	if (!is_write)
		memset(data, 0x5a, len);
}

static void test_register_rules(void **state)
{
	static struct bus b;
	struct hit h = { 0 };

	memset(&b, 0, sizeof(b));
	assert_int_equal(bus_register(&b, 0x100, 0x10, record, &h), 0);
	assert_int_equal(bus_register(&b, 0x108, 0x10, record, &h), -EBUSY);
	assert_int_equal(bus_register(&b, 0xf8, 0x10, record, &h), -EBUSY);
	assert_int_equal(bus_register(&b, 0xf0, 0x10, record, &h), 0);
	assert_int_equal(bus_register(&b, 0x110, 1, record, &h), 0);
	assert_int_equal(bus_register(&b, 0x200, 0, record, &h), -EINVAL);
	assert_int_equal(bus_register(&b, UINT64_MAX - 1, 4, record, &h), -EINVAL);
	assert_int_equal(bus_register(&b, 0x300, 4, NULL, &h), -EINVAL);
	assert_int_equal(b.n, 3);
	for (unsigned int i = 1; i < b.n; i++)
		assert_true(b.r[i - 1].base < b.r[i].base);
}

static void test_full_table(void **state)
{
	static struct bus b;
	struct hit h = { 0 };

	memset(&b, 0, sizeof(b));
	/* Registered in descending order: the table must still sort. */
	for (unsigned int i = BUS_MAX_RANGES; i > 0; i--)
		assert_int_equal(bus_register(&b, i * 0x10, 8, record, &h), 0);
	assert_int_equal(bus_register(&b, 0x10000, 8, record, &h), -ENOSPC);
	for (unsigned int i = 1; i <= BUS_MAX_RANGES; i++) {
		uint32_t v;

		h.count = 0;
		assert_true(bus_dispatch(&b, i * 0x10 + 7, &v, 1, false));
		assert_int_equal(h.offset, 7);
		assert_false(bus_dispatch(&b, i * 0x10 + 8, &v, 1, false));
	}
}

static void test_dispatch_edges(void **state)
{
	static struct bus b;
	struct hit a = { 0 }, c = { 0 };
	uint32_t v = 0;

	memset(&b, 0, sizeof(b));
	assert_int_equal(bus_register(&b, 0x3f8, 8, record, &a), 0);
	assert_int_equal(bus_register(&b, 0x400, 4, record, &c), 0);
	assert_false(bus_dispatch(&b, 0x3f7, &v, 1, false));
	assert_true(bus_dispatch(&b, 0x3f8, &v, 1, false));
	assert_int_equal(a.offset, 0);
	assert_int_equal(v & 0xff, 0x5a);
	assert_true(bus_dispatch(&b, 0x3ff, &v, 2, true));
	assert_int_equal(a.offset, 7);
	assert_int_equal(a.len, 2);
	assert_true(a.is_write);
	assert_true(bus_dispatch(&b, 0x403, &v, 4, false));
	assert_int_equal(c.offset, 3);
	assert_false(bus_dispatch(&b, 0x404, &v, 1, false));
	assert_false(bus_dispatch(&b, 0, &v, 1, false));
	assert_false(bus_dispatch(&b, UINT64_MAX, &v, 1, false));
	assert_int_equal(a.count + c.count, 3);
}

static void test_move_unregister(void **state)
{
	static struct bus b;
	struct hit h = { 0 };
	uint32_t v;

	memset(&b, 0, sizeof(b));
	assert_int_equal(bus_register(&b, 0x1000, 0x100, record, &h), 0);
	assert_int_equal(bus_register(&b, 0x3000, 0x100, record, &h), 0);
	assert_int_equal(bus_move(&b, 0x1000, 0x30f0), -EBUSY);
	assert_int_equal(bus_move(&b, 0x1001, 0x5000), -ENOENT);
	assert_int_equal(bus_move(&b, 0x1000, 0x5000), 0);
	assert_false(bus_dispatch(&b, 0x1000, &v, 4, false));
	assert_true(bus_dispatch(&b, 0x5004, &v, 4, false));
	assert_int_equal(h.offset, 4);
	assert_true(b.r[0].base == 0x3000 && b.r[1].base == 0x5000);
	assert_int_equal(bus_move(&b, 0x5000, 0x5000), 0);
	assert_int_equal(bus_unregister(&b, 0x3000), 0);
	assert_int_equal(bus_unregister(&b, 0x3000), -ENOENT);
	assert_false(bus_dispatch(&b, 0x3000, &v, 4, false));
	assert_int_equal(b.n, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_rules),
		cmocka_unit_test(test_full_table),
		cmocka_unit_test(test_dispatch_edges),
		cmocka_unit_test(test_move_unregister),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
