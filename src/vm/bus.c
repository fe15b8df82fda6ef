/* Exit dispatch table: ranges kept sorted by base so that a lookup on the
 * exit path is a binary search over at most BUS_MAX_RANGES entries, in a
 * table published read-copy-update style with hazard slots for reclamation.
 *
 * Why this is safe without a lock on the exit path:
 * - A writer (under b->lock) never changes the current table. It fills a
 *   spare one and publishes it with a release store of b->cur.
 * - A reader stores the table it is about to use in its hazard slot, then
 *   loads b->cur again; it uses the table only if it is still current. Both
 *   are sequentially consistent, so a writer that scans the slots after
 *   having published a newer table either sees the reader's hazard or the
 *   reader sees the newer table and retries.
 * - A writer picks as spare only a table that is neither current nor named
 *   by any hazard slot. There are at most BUS_MAX_READERS hazards and one
 *   current table, so one of BUS_MAX_TABLES is always free: a writer never
 *   waits for a reader (a vCPU can rewrite the table it is dispatching
 *   through, e.g. a config write that moves six BARs), and memory stays
 *   bounded however often a guest moves its BARs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vm/bus.h"

void bus_init(struct bus *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
}

void bus_destroy(struct bus *b)
{
	for (unsigned int i = 0; i < b->ntables; i++)
		free(b->tables[i]);
	b->ntables = 0;
	atomic_store(&b->cur, NULL);
}

/* Index of the first range whose base is > addr. */
static unsigned int upper_bound(const struct bus_table *t, uint64_t addr)
{
	unsigned int lo = 0, hi = t->n;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (t->r[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct bus_range *find(const struct bus_table *t, uint64_t addr)
{
	unsigned int i = upper_bound(t, addr);
	const struct bus_range *r;

	if (!i)
		return NULL;
	r = &t->r[i - 1];
	return addr - r->base < r->len ? r : NULL;
}

static int find_exact(const struct bus_table *t, uint64_t base)
{
	unsigned int i = upper_bound(t, base);

	if (!i || t->r[i - 1].base != base)
		return -ENOENT;
	return i - 1;
}

/* Would [base, base+len) overlap any range other than index skip? */
static bool overlaps(const struct bus_table *t, uint64_t base, uint64_t len,
		     int skip)
{
	for (unsigned int i = 0; i < t->n; i++) {
		const struct bus_range *r = &t->r[i];

		if ((int)i == skip)
			continue;
		if (base < r->base + r->len && r->base < base + len)
			return true;
	}
	return false;
}

static void insert_sorted(struct bus_table *t, const struct bus_range *nr)
{
	unsigned int i = upper_bound(t, nr->base);

	memmove(&t->r[i + 1], &t->r[i], (t->n - i) * sizeof(t->r[0]));
	t->r[i] = *nr;
	t->n++;
}

static void remove_at(struct bus_table *t, unsigned int i)
{
	memmove(&t->r[i], &t->r[i + 1], (t->n - i - 1) * sizeof(t->r[0]));
	t->n--;
}

static bool held_by_reader(struct bus *b, const struct bus_table *t)
{
	for (unsigned int i = 0; i < BUS_MAX_READERS; i++)
		if (atomic_load(&b->hazard[i]) == t)
			return true;
	return false;
}

/* A table no reader can be looking at, holding a copy of the current one;
 * NULL on allocation failure. Called with b->lock held. */
static struct bus_table *spare_copy(struct bus *b)
{
	struct bus_table *cur = atomic_load_explicit(&b->cur, memory_order_relaxed);
	struct bus_table *t = NULL;

	for (unsigned int i = 0; i < b->ntables && !t; i++)
		if (b->tables[i] != cur && !held_by_reader(b, b->tables[i]))
			t = b->tables[i];
	if (!t) {
		if (b->ntables >= BUS_MAX_TABLES)
			return NULL;	/* cannot happen: see the top comment */
		t = malloc(sizeof(*t));
		if (!t)
			return NULL;
		b->tables[b->ntables++] = t;
	}
	if (cur) {
		t->n = cur->n;
		memcpy(t->r, cur->r, cur->n * sizeof(cur->r[0]));
	} else {
		t->n = 0;
	}
	return t;
}

static void publish(struct bus *b, struct bus_table *t)
{
	atomic_store(&b->cur, t);
}

static const struct bus_table empty_table;

static const struct bus_table *current(struct bus *b)
{
	const struct bus_table *t = atomic_load_explicit(&b->cur, memory_order_relaxed);

	return t ? t : &empty_table;
}

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_io_fn fn,
		 void *opaque)
{
	struct bus_range nr = { base, len, fn, opaque };
	struct bus_table *t;
	int ret = 0;

	if (!len || !fn || base + len < base)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if (overlaps(current(b), base, len, -1))
		ret = -EBUSY;
	else if (current(b)->n >= BUS_MAX_RANGES)
		ret = -ENOSPC;
	else if (!(t = spare_copy(b)))
		ret = -ENOMEM;
	else {
		insert_sorted(t, &nr);
		publish(b, t);
	}
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int bus_move(struct bus *b, uint64_t old_base, uint64_t new_base)
{
	const struct bus_table *cur;
	struct bus_range nr;
	struct bus_table *t;
	int i, ret = 0;

	pthread_mutex_lock(&b->lock);
	cur = current(b);
	i = find_exact(cur, old_base);
	if (i < 0) {
		ret = i;
		goto out;
	}
	nr = cur->r[i];
	if (new_base == old_base)
		goto out;
	if (new_base + nr.len < new_base)
		ret = -EINVAL;
	else if (overlaps(cur, new_base, nr.len, i))
		ret = -EBUSY;
	else if (!(t = spare_copy(b)))
		ret = -ENOMEM;
	else {
		remove_at(t, i);
		nr.base = new_base;
		insert_sorted(t, &nr);
		publish(b, t);
	}
out:
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int bus_unregister(struct bus *b, uint64_t base)
{
	struct bus_table *t;
	int i, ret = 0;

	pthread_mutex_lock(&b->lock);
	i = find_exact(current(b), base);
	if (i < 0)
		ret = i;
	else if (!(t = spare_copy(b)))
		ret = -ENOMEM;
	else {
		remove_at(t, i);
		publish(b, t);
	}
	pthread_mutex_unlock(&b->lock);
	return ret;
}

bool bus_dispatch(struct bus *b, unsigned int reader, uint64_t addr, void *data,
		  unsigned int len, bool is_write)
{
	_Atomic(struct bus_table *) *slot = &b->hazard[reader];
	struct bus_table *t = atomic_load_explicit(&b->cur, memory_order_acquire);
	const struct bus_range *r;

	for (;;) {
		struct bus_table *again;

		if (!t)
			return false;
		atomic_store(slot, t);
		again = atomic_load(&b->cur);
		if (again == t)
			break;
		t = again;
	}
	/* t stays as it is until the slot is cleared, even if the callback
	 * moves or unmaps this very range (a PCI config write). */
	r = find(t, addr);
	if (r)
		r->fn(r->opaque, addr - r->base, data, len, is_write);
	atomic_store_explicit(slot, NULL, memory_order_release);
	return r != NULL;
}
