/* Exit dispatch: a sorted table of port or address ranges, each with the
 * device callback that serves it. Lookups happen on every PIO/MMIO exit and
 * take no lock, while a guest's PCI config write may move or unmap a BAR on
 * another vCPU at the same time: writers never touch the table readers see.
 * They copy it, change the copy and publish it with one release store;
 * readers announce the table they use in a per-reader hazard slot, and a
 * table is reused only when no slot names it (see bus.c). */
#ifndef IOVM_VM_BUS_H
#define IOVM_VM_BUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* offset: from the start of the registered range. data: len bytes (1, 2, 4
 * or 8), little-endian, to fill on a read or to consume on a write. */
typedef void (*bus_io_fn)(void *opaque, uint64_t offset, void *data,
			  unsigned int len, bool is_write);

#define BUS_MAX_RANGES 64
/* Threads that may dispatch at once, each with its own reader index below
 * this (a vCPU uses its index). */
#define BUS_MAX_READERS 64
/* Enough tables that a writer always finds one that is neither current nor
 * held by a reader (each reader holds at most one). */
#define BUS_MAX_TABLES (BUS_MAX_READERS + 2)

struct bus_range {
	uint64_t base;
	uint64_t len;
	bus_io_fn fn;
	void *opaque;
};

struct bus_table {
	unsigned int n;
	struct bus_range r[BUS_MAX_RANGES];
};

struct bus {
	_Atomic(struct bus_table *) cur;	/* NULL: nothing registered yet */
	_Atomic(struct bus_table *) hazard[BUS_MAX_READERS];
	pthread_mutex_t lock;			/* writers */
	struct bus_table *tables[BUS_MAX_TABLES];	/* allocated on demand */
	unsigned int ntables;
};

void bus_init(struct bus *b);
/* Frees the tables, leaving the bus empty; no dispatch may be running. */
void bus_destroy(struct bus *b);

/* Returns 0, -EBUSY if the range overlaps one already registered, -ENOSPC
 * when the table is full, -EINVAL for an empty or wrapping range, -ENOMEM. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_io_fn fn,
		 void *opaque);

/* Moves a registered range (a PCI BAR reprogrammed by the guest). */
int bus_move(struct bus *b, uint64_t old_base, uint64_t new_base);

int bus_unregister(struct bus *b, uint64_t base);

/* Serves an access as reader `reader` (< BUS_MAX_READERS; one thread per
 * index at a time, and not re-entered from a callback of the same bus);
 * returns false when no range claims addr (then a read is filled with
 * all-ones by the caller's convention and a write ignored). A callback may
 * run on a range that another thread has just moved or unmapped, as a
 * device on real hardware may see an access that raced with its decode
 * change; the device itself stays valid for the bus's lifetime. */
bool bus_dispatch(struct bus *b, unsigned int reader, uint64_t addr, void *data,
		  unsigned int len, bool is_write);

#endif
