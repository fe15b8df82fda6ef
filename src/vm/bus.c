/* Exit dispatch table: ranges kept sorted by base so that a lookup on the
 * exit path is a binary search over at most BUS_MAX_RANGES entries. */
#include <errno.h>
#include <string.h>

#include "vm/bus.h"

/* Index of the first range whose base is > addr. */
static unsigned int upper_bound(const struct bus *b, uint64_t addr)
{
	unsigned int lo = 0, hi = b->n;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (b->r[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct bus_range *find(const struct bus *b, uint64_t addr)
{
	unsigned int i = upper_bound(b, addr);
	const struct bus_range *r;

	if (!i)
		return NULL;
	r = &b->r[i - 1];
	return addr - r->base < r->len ? r : NULL;
}

static int find_exact(const struct bus *b, uint64_t base)
{
	unsigned int i = upper_bound(b, base);

	if (!i || b->r[i - 1].base != base)
		return -ENOENT;
	return i - 1;
}

/* Would [base, base+len) overlap any range other than index skip? */
static bool overlaps(const struct bus *b, uint64_t base, uint64_t len,
		     int skip)
{
	for (unsigned int i = 0; i < b->n; i++) {
		const struct bus_range *r = &b->r[i];

		if ((int)i == skip)
			continue;
		if (base < r->base + r->len && r->base < base + len)
			return true;
	}
	return false;
}

static void insert_sorted(struct bus *b, const struct bus_range *nr)
{
	unsigned int i = upper_bound(b, nr->base);

	memmove(&b->r[i + 1], &b->r[i], (b->n - i) * sizeof(b->r[0]));
	b->r[i] = *nr;
	b->n++;
}

static void remove_at(struct bus *b, unsigned int i)
{
	memmove(&b->r[i], &b->r[i + 1], (b->n - i - 1) * sizeof(b->r[0]));
	b->n--;
}

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_io_fn fn,
		 void *opaque)
{
	struct bus_range nr = { base, len, fn, opaque };

	if (!len || !fn || base + len < base)
		return -EINVAL;
	if (overlaps(b, base, len, -1))
		return -EBUSY;
	if (b->n >= BUS_MAX_RANGES)
		return -ENOSPC;
	insert_sorted(b, &nr);
	return 0;
}

int bus_move(struct bus *b, uint64_t old_base, uint64_t new_base)
{
	int i = find_exact(b, old_base);
	struct bus_range nr;

	if (i < 0)
		return i;
	nr = b->r[i];
	if (new_base == old_base)
		return 0;
	if (new_base + nr.len < new_base)
		return -EINVAL;
	if (overlaps(b, new_base, nr.len, i))
		return -EBUSY;
	remove_at(b, i);
	nr.base = new_base;
	insert_sorted(b, &nr);
	return 0;
}

int bus_unregister(struct bus *b, uint64_t base)
{
	int i = find_exact(b, base);

	if (i < 0)
		return i;
	remove_at(b, i);
	return 0;
}

bool bus_dispatch(const struct bus *b, uint64_t addr, void *data,
		  unsigned int len, bool is_write)
{
	const struct bus_range *r = find(b, addr);

	if (!r)
		return false;
	r->fn(r->opaque, addr - r->base, data, len, is_write);
	return true;
}
