/* A disk's I/O limits as token buckets (the model of QEMU's throttling and
 * Firecracker's rate limiter): pure functions of a `now` argument, the
 * nanoseconds of a monotonic clock, with no clock reads and no locking, so
 * that tests drive them with a fake clock. The block queue
 * (queue_throttle.c) holds the lock and reads the clock.
 *
 * Each limit of struct disk_limits is one bucket of capacity `burst`
 * units (operations or bytes; default a tenth of a second of the rate, at
 * least 1) refilled continuously at `rate` units per second and never
 * above its capacity, however long the disk is idle. A bucket starts full:
 * after a start, a new limit or a long idle, a burst passes at once, and
 * then requests pass at the rate.
 *
 * A request of n units passes when every bucket it draws from holds n
 * tokens, or is full if n is more than its capacity: a request larger
 * than the bucket passes once the bucket is full and leaves it in debt (a
 * negative level) that the refill pays back before anything else passes,
 * so it never waits for ever and the long-run rate still holds. A request
 * that cannot pass takes nothing and is told how long until it can.
 *
 * Arithmetic: levels are tokens x 10^9 (unit-nanoseconds per second) in
 * 128 bits, so that a refill is rate x elapsed ns with no division and no
 * rounding drift; with rates and bursts at most CONFIG_LIMIT_MAX (10^15)
 * and a request at most 2^64 units, nothing overflows, even across a clock
 * jump of 2^64 ns. A clock that stands still refills nothing; one that
 * goes back (another thread's older reading) is ignored until it passes
 * the last reading. */
#ifndef IOVM_BLOCK_THROTTLE_H
#define IOVM_BLOCK_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

__extension__ typedef __int128 thr_level_t;

struct thr_bucket {
	uint64_t rate;		/* units per second; 0: no limit */
	uint64_t cap;		/* the burst, units */
	thr_level_t level;	/* tokens x 10^9; below 0: debt */
	uint64_t last;		/* now of the last refill */
};

struct throttle {
	struct thr_bucket b[LIM_N];
};

/* What a request draws from: READ the total and -rd buckets, WRITE the
 * total and -wr ones; OTHER none (it passes, but still in its turn). */
enum thr_dir { THR_READ, THR_WRITE, THR_OTHER };

/* The bucket size of a limit: burst, or the default when burst is 0. */
uint64_t throttle_cap(uint64_t rate, uint64_t burst);

/* Applies l (already checked: disk_limits_check) at now. A bucket that was
 * off starts full; one whose rate or burst changed keeps its tokens (or
 * debt) up to the new capacity; a limit set to 0 is off. t must be zeroed
 * before its first use. */
void throttle_set(struct throttle *t, const struct disk_limits *l,
		  uint64_t now);

/* Whether any bucket is on. */
bool throttle_on(const struct throttle *t);

/* A request of one operation and bytes bytes in direction dir at now:
 * returns 0 when it passes (its tokens are taken), else the nanoseconds
 * (at least 1) until it could pass if nothing else took tokens meanwhile;
 * nothing is taken then. */
uint64_t throttle_take(struct throttle *t, enum thr_dir dir, uint64_t bytes,
		       uint64_t now);

#endif
