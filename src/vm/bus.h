/* Exit dispatch: a sorted table of port or address ranges, each with the
 * device callback that serves it. Lookups happen on every PIO/MMIO exit and
 * take no lock: devices register before the vCPUs start. */
#ifndef IOVM_VM_BUS_H
#define IOVM_VM_BUS_H

#include <stdbool.h>
#include <stdint.h>

/* offset: from the start of the registered range. data: len bytes (1, 2, 4
 * or 8), little-endian, to fill on a read or to consume on a write. */
typedef void (*bus_io_fn)(void *opaque, uint64_t offset, void *data,
			  unsigned int len, bool is_write);

#define BUS_MAX_RANGES 64

struct bus_range {
	uint64_t base;
	uint64_t len;
	bus_io_fn fn;
	void *opaque;
};

struct bus {
	struct bus_range r[BUS_MAX_RANGES];
	unsigned int n;
};

/* Returns 0, -EBUSY if the range overlaps one already registered, -ENOSPC
 * when the table is full, -EINVAL for an empty or wrapping range. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_io_fn fn,
		 void *opaque);

/* Moves a registered range (a PCI BAR reprogrammed by the guest). */
int bus_move(struct bus *b, uint64_t old_base, uint64_t new_base);

int bus_unregister(struct bus *b, uint64_t base);

/* Serves an access; returns false when no range claims addr (then a read
 * is filled with all-ones by the caller's convention and a write ignored). */
bool bus_dispatch(const struct bus *b, uint64_t addr, void *data,
		  unsigned int len, bool is_write);

#endif
