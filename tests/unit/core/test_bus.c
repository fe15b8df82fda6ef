/* Bus dispatch: registration rules, lookups at range edges, moves. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

static const struct bus_table *tab(struct bus *b)
{
	return atomic_load(&b->cur);
}

static int bus_setup(void **state)
{
	struct bus *b = malloc(sizeof(*b));

	if (!b)
		return -1;
	bus_init(b);
	*state = b;
	return 0;
}

static int bus_teardown(void **state)
{
	bus_destroy(*state);
	free(*state);
	return 0;
}

static void test_register_rules(void **state)
{
	struct bus *b = *state;
	struct hit h = { 0 };

	assert_int_equal(bus_register(b, 0x100, 0x10, record, &h), 0);
	assert_int_equal(bus_register(b, 0x108, 0x10, record, &h), -EBUSY);
	assert_int_equal(bus_register(b, 0xf8, 0x10, record, &h), -EBUSY);
	assert_int_equal(bus_register(b, 0xf0, 0x10, record, &h), 0);
	assert_int_equal(bus_register(b, 0x110, 1, record, &h), 0);
	assert_int_equal(bus_register(b, 0x200, 0, record, &h), -EINVAL);
	assert_int_equal(bus_register(b, UINT64_MAX - 1, 4, record, &h), -EINVAL);
	assert_int_equal(bus_register(b, 0x300, 4, NULL, &h), -EINVAL);
	assert_int_equal(tab(b)->n, 3);
	for (unsigned int i = 1; i < tab(b)->n; i++)
		assert_true(tab(b)->r[i - 1].base < tab(b)->r[i].base);
}

static void test_full_table(void **state)
{
	struct bus *b = *state;
	struct hit h = { 0 };

	/* Registered in descending order: the table must still sort. */
	for (unsigned int i = BUS_MAX_RANGES; i > 0; i--)
		assert_int_equal(bus_register(b, i * 0x10, 8, record, &h), 0);
	assert_int_equal(bus_register(b, 0x10000, 8, record, &h), -ENOSPC);
	for (unsigned int i = 1; i <= BUS_MAX_RANGES; i++) {
		uint32_t v;

		h.count = 0;
		assert_true(bus_dispatch(b, 0, i * 0x10 + 7, &v, 1, false));
		assert_int_equal(h.offset, 7);
		assert_false(bus_dispatch(b, 0, i * 0x10 + 8, &v, 1, false));
	}
}

static void test_dispatch_edges(void **state)
{
	struct bus *b = *state;
	struct hit a = { 0 }, c = { 0 };
	uint32_t v = 0;

	assert_int_equal(bus_register(b, 0x3f8, 8, record, &a), 0);
	assert_int_equal(bus_register(b, 0x400, 4, record, &c), 0);
	assert_false(bus_dispatch(b, 0, 0x3f7, &v, 1, false));
	assert_true(bus_dispatch(b, 0, 0x3f8, &v, 1, false));
	assert_int_equal(a.offset, 0);
	assert_int_equal(v & 0xff, 0x5a);
	assert_true(bus_dispatch(b, 0, 0x3ff, &v, 2, true));
	assert_int_equal(a.offset, 7);
	assert_int_equal(a.len, 2);
	assert_true(a.is_write);
	assert_true(bus_dispatch(b, 0, 0x403, &v, 4, false));
	assert_int_equal(c.offset, 3);
	assert_false(bus_dispatch(b, 0, 0x404, &v, 1, false));
	assert_false(bus_dispatch(b, 0, 0, &v, 1, false));
	assert_false(bus_dispatch(b, 0, UINT64_MAX, &v, 1, false));
	assert_int_equal(a.count + c.count, 3);
}

static void test_move_unregister(void **state)
{
	struct bus *b = *state;
	struct hit h = { 0 };
	uint32_t v;

	assert_int_equal(bus_register(b, 0x1000, 0x100, record, &h), 0);
	assert_int_equal(bus_register(b, 0x3000, 0x100, record, &h), 0);
	assert_int_equal(bus_move(b, 0x1000, 0x30f0), -EBUSY);
	assert_int_equal(bus_move(b, 0x1001, 0x5000), -ENOENT);
	assert_int_equal(bus_move(b, 0x1000, 0x5000), 0);
	assert_false(bus_dispatch(b, 0, 0x1000, &v, 4, false));
	assert_true(bus_dispatch(b, 0, 0x5004, &v, 4, false));
	assert_int_equal(h.offset, 4);
	assert_true(tab(b)->r[0].base == 0x3000 && tab(b)->r[1].base == 0x5000);
	assert_int_equal(bus_move(b, 0x5000, 0x5000), 0);
	assert_int_equal(bus_unregister(b, 0x3000), 0);
	assert_int_equal(bus_unregister(b, 0x3000), -ENOENT);
	assert_false(bus_dispatch(b, 0, 0x3000, &v, 4, false));
	assert_int_equal(tab(b)->n, 1);
}

/* ---- dispatch while the table changes ---------------------------------- */

/* A device whose callback checks that it got its own opaque pointer and an
 * offset inside its range, and answers reads with its id. */
struct dev {
	uint32_t magic;
	uint32_t id;
	uint64_t len;
	atomic_uint bad;
};

#define DEV_MAGIC 0xdecafbadu

static void dev_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		   bool is_write)
{
	struct dev *d = opaque;

	if (d->magic != DEV_MAGIC || offset >= d->len)
		atomic_fetch_add(&d->bad, 1);
	if (!is_write)
		memcpy(data, &d->id, len < 4 ? len : 4);
}

/* A callback that parks its reader until the test lets it go: a reader in
 * the middle of a dispatch, by construction. */
struct parked {
	struct dev dev;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool inside, release;
};

static void parked_io(void *opaque, uint64_t offset, void *data, unsigned int len,
		      bool is_write)
{
	struct parked *p = opaque;

	pthread_mutex_lock(&p->mu);
	p->inside = true;
	pthread_cond_broadcast(&p->cv);
	while (!p->release)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	dev_io(&p->dev, offset, data, len, is_write);
}

struct parked_reader {
	struct bus *b;
	uint64_t addr;
	uint32_t v;
	bool hit;
};

static void *parked_reader_main(void *arg)
{
	struct parked_reader *r = arg;

	r->hit = bus_dispatch(r->b, 1, r->addr, &r->v, 4, false);
	return NULL;
}

/* While reader 1 sits in a callback, the writer inserts ranges below the
 * one it dispatched to (shifting it in a table edited in place) and moves
 * others: the table the reader is using must not change under it, and the
 * tables in use stay few. */
static void test_reader_keeps_its_table(void **state)
{
	struct bus *b = *state;
	struct parked p = { .dev = { .magic = DEV_MAGIC, .id = 7, .len = 0x100 } };
	struct dev other = { .magic = DEV_MAGIC, .id = 9, .len = 0x10 };
	struct parked_reader r = { .b = b, .addr = 0x8010 };
	struct bus_table snap;
	const struct bus_table *held;
	pthread_t t;
	uint32_t v;

	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	assert_int_equal(bus_register(b, 0x8000, 0x100, parked_io, &p), 0);
	assert_int_equal(bus_register(b, 0x9000, 0x10, dev_io, &other), 0);
	assert_int_equal(pthread_create(&t, NULL, parked_reader_main, &r), 0);
	pthread_mutex_lock(&p.mu);
	while (!p.inside)
		pthread_cond_wait(&p.cv, &p.mu);
	pthread_mutex_unlock(&p.mu);

	held = atomic_load(&b->hazard[1]);
	assert_non_null(held);
	memcpy(&snap, held, sizeof(snap));
	for (unsigned int i = 0; i < 1000; i++) {
		assert_int_equal(bus_register(b, 0x100 + i % 16 * 0x10, 0x10, dev_io,
					      &other), 0);
		assert_int_equal(bus_move(b, 0x9000, 0xa000), 0);
		assert_int_equal(bus_move(b, 0xa000, 0x9000), 0);
		assert_int_equal(bus_unregister(b, 0x100 + i % 16 * 0x10), 0);
		/* Reader 0 dispatches meanwhile, as another vCPU would. */
		assert_true(bus_dispatch(b, 0, 0x9004, &v, 4, false));
		assert_int_equal(v, 9);
	}
	assert_memory_equal(held, &snap, sizeof(snap));
	assert_true(b->ntables <= 3);

	pthread_mutex_lock(&p.mu);
	p.release = true;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(r.hit);
	assert_int_equal(r.v, 7);
	assert_null(atomic_load(&b->hazard[1]));
	assert_int_equal(atomic_load(&p.dev.bad) + atomic_load(&other.bad), 0);
}

/* A callback that rewrites the bus it was dispatched from, many times (a
 * config write that moves every BAR): it must neither deadlock nor grow the
 * tables. */
struct self_mover {
	struct bus *b;
	struct dev dev;
	uint64_t at;
};

static void self_move_io(void *opaque, uint64_t offset, void *data, unsigned int len,
			 bool is_write)
{
	struct self_mover *m = opaque;

	for (unsigned int i = 0; i < 100; i++) {
		uint64_t to = m->at == 0x4000 ? 0x6000 : 0x4000;

		if (bus_move(m->b, m->at, to) == 0)
			m->at = to;
	}
	dev_io(&m->dev, offset, data, len, is_write);
}

static void test_callback_rewrites_its_bus(void **state)
{
	struct bus *b = *state;
	struct self_mover m = {
		.b = b, .dev = { .magic = DEV_MAGIC, .id = 3, .len = 0x10 }, .at = 0x4000
	};
	uint32_t v = 0;

	assert_int_equal(bus_register(b, 0x4000, 0x10, self_move_io, &m), 0);
	for (unsigned int i = 0; i < 10; i++) {
		assert_true(bus_dispatch(b, 0, m.at + 4, &v, 4, false));
		assert_int_equal(v, 3);
	}
	assert_true(b->ntables <= 3);
	assert_int_equal(atomic_load(&m.dev.bad), 0);
}

/* Readers dispatch to fixed ranges and to one that a writer keeps moving,
 * unmapping and remapping, with ranges inserted and removed below the fixed
 * ones so that their table slots shift. A fixed range must always be found
 * with its own callback and opaque; the moving one may be missed but never
 * served by another range's callback. The writer waits for a reader to have
 * dispatched between two of its updates, so the two really interleave
 * (and ThreadSanitizer, in the thread-sanitized build of this test, checks
 * the memory ordering). */
#define RACE_READERS 3
#define RACE_UPDATES 1000
#define RACE_FIXED 8

struct race {
	struct bus *b;
	struct dev fixed[RACE_FIXED], moving, filler;
	atomic_uint progress[RACE_READERS];
	atomic_bool waiting;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool stop;
	atomic_uint wrong;
};

static uint64_t fixed_base(unsigned int i)
{
	return 0x10000 + i * 0x1000;
}

static unsigned int total_progress(struct race *r)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < RACE_READERS; i++)
		n += atomic_load(&r->progress[i]);
	return n;
}

/* A reader's round is done: wake the writer if it waits for one. The
 * writer sets `waiting` before it looks at the counters and a reader bumps
 * its counter before it looks at `waiting` (both sequentially consistent),
 * so one of them always sees the other. */
static void reader_round_done(struct race *r, unsigned int idx)
{
	atomic_fetch_add(&r->progress[idx], 1);
	if (atomic_load(&r->waiting)) {
		pthread_mutex_lock(&r->mu);
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
}

/* Sleeps until some reader has dispatched since the writer's last update
 * (sleeping, not spinning: on a loaded machine a spinning writer starves
 * the readers it waits for). */
static void wait_for_readers(struct race *r, unsigned int *seen)
{
	unsigned int now;

	pthread_mutex_lock(&r->mu);
	atomic_store(&r->waiting, true);
	while ((now = total_progress(r)) == *seen)
		pthread_cond_wait(&r->cv, &r->mu);
	atomic_store(&r->waiting, false);
	pthread_mutex_unlock(&r->mu);
	*seen = now;
}

struct race_reader {
	struct race *r;
	unsigned int idx;
};

static void *race_reader_main(void *arg)
{
	struct race_reader *rr = arg;
	struct race *r = rr->r;

	for (unsigned int n = 0; !atomic_load(&r->stop); n++) {
		unsigned int i = n % RACE_FIXED;
		uint32_t v = 0;

		if (!bus_dispatch(r->b, rr->idx, fixed_base(i) + 8, &v, 4, false) ||
		    v != r->fixed[i].id)
			atomic_fetch_add(&r->wrong, 1);
		v = 0;
		if (bus_dispatch(r->b, rr->idx, 0x20000 + 4, &v, 4, false) &&
		    v != r->moving.id)
			atomic_fetch_add(&r->wrong, 1);
		v = 0;
		if (bus_dispatch(r->b, rr->idx, 0x30000 + 4, &v, 4, false) &&
		    v != r->moving.id)
			atomic_fetch_add(&r->wrong, 1);
		reader_round_done(r, rr->idx);
	}
	return NULL;
}

static void test_dispatch_during_updates(void **state)
{
	static struct race r;
	struct race_reader rr[RACE_READERS];
	pthread_t t[RACE_READERS];
	struct bus *b = *state;
	unsigned int seen = 0;

	memset(&r, 0, sizeof(r));
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	r.b = b;
	for (unsigned int i = 0; i < RACE_FIXED; i++) {
		r.fixed[i] = (struct dev){ .magic = DEV_MAGIC, .id = 100 + i, .len = 0x10 };
		assert_int_equal(bus_register(b, fixed_base(i), 0x10, dev_io,
					      &r.fixed[i]), 0);
	}
	r.moving = (struct dev){ .magic = DEV_MAGIC, .id = 55, .len = 0x10 };
	r.filler = (struct dev){ .magic = DEV_MAGIC, .id = 66, .len = 0x10 };
	assert_int_equal(bus_register(b, 0x20000, 0x10, dev_io, &r.moving), 0);
	for (unsigned int i = 0; i < RACE_READERS; i++) {
		rr[i] = (struct race_reader){ &r, i };
		assert_int_equal(pthread_create(&t[i], NULL, race_reader_main, &rr[i]), 0);
	}
	for (unsigned int n = 0; n < RACE_UPDATES; n++) {
		switch (n % 4) {
		case 0:		/* a BAR moved */
			assert_int_equal(bus_move(b, 0x20000, 0x30000), 0);
			break;
		case 1:		/* moved back by unmap + map (decode bits) */
			assert_int_equal(bus_unregister(b, 0x30000), 0);
			assert_int_equal(bus_register(b, 0x20000, 0x10, dev_io,
						      &r.moving), 0);
			break;
		case 2:		/* a range below every fixed one: slots shift */
			assert_int_equal(bus_register(b, 0x100, 0x10, dev_io,
						      &r.filler), 0);
			break;
		case 3:
			assert_int_equal(bus_unregister(b, 0x100), 0);
			break;
		}
		wait_for_readers(&r, &seen);
	}
	atomic_store(&r.stop, true);
	for (unsigned int i = 0; i < RACE_READERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&r.wrong), 0);
	assert_int_equal(atomic_load(&r.moving.bad) + atomic_load(&r.filler.bad), 0);
	for (unsigned int i = 0; i < RACE_FIXED; i++)
		assert_int_equal(atomic_load(&r.fixed[i].bad), 0);
	assert_true(b->ntables <= RACE_READERS + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register_rules, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_full_table, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_dispatch_edges, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_move_unregister, bus_setup, bus_teardown),
		cmocka_unit_test_setup_teardown(test_reader_keeps_its_table, bus_setup,
						bus_teardown),
		cmocka_unit_test_setup_teardown(test_callback_rewrites_its_bus, bus_setup,
						bus_teardown),
		cmocka_unit_test_setup_teardown(test_dispatch_during_updates, bus_setup,
						bus_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
