/* Token buckets of a disk's I/O limits: the arithmetic, apart from the
 * queue, the clock and the lock (throttle.h says the model). */
#include "block/throttle.h"

#define NS 1000000000ull

uint64_t throttle_cap(uint64_t rate, uint64_t burst)
{
	if (!rate)
		return 0;
	if (burst)
		return burst;
	/* A tenth of a second, as QEMU's default: enough to absorb a timer
	 * that fires late without losing rate, small enough that a burst
	 * nobody asked for stays invisible. */
	return rate >= 10 ? rate / 10 : 1;
}

/* Brings b's level to now; a reading older than the last one (another
 * thread's, taken before it got the lock) adds nothing. */
static void refill(struct thr_bucket *b, uint64_t now)
{
	thr_level_t full = (thr_level_t)b->cap * NS;

	if (now <= b->last)
		return;
	if (b->level < full) {
		/* rate < 2^50 and the elapsed time < 2^64: < 2^114 */
		thr_level_t gain = (thr_level_t)b->rate * (now - b->last);

		b->level = gain >= full - b->level ? full : b->level + gain;
	}
	b->last = now;
}

void throttle_set(struct throttle *t, const struct disk_limits *l,
		  uint64_t now)
{
	for (unsigned int i = 0; i < LIM_N; i++) {
		struct thr_bucket *b = &t->b[i];
		uint64_t rate = l->rate[i];
		uint64_t cap = throttle_cap(rate, l->burst[i]);

		if (!rate) {
			*b = (struct thr_bucket){ 0 };
			continue;
		}
		if (!b->rate) {
			b->level = (thr_level_t)cap * NS;
			b->last = now;
		} else {
			/* What was earned at the old rate is kept. */
			refill(b, now);
			if (b->level > (thr_level_t)cap * NS)
				b->level = (thr_level_t)cap * NS;
		}
		b->rate = rate;
		b->cap = cap;
	}
}

bool throttle_on(const struct throttle *t)
{
	for (unsigned int i = 0; i < LIM_N; i++)
		if (t->b[i].rate)
			return true;
	return false;
}

/* The buckets a request draws from: one operation from the first two,
 * its bytes from the last two. */
static const enum disk_limit draw[2][4] = {
	[THR_READ] = { LIM_IOPS, LIM_IOPS_RD, LIM_BPS, LIM_BPS_RD },
	[THR_WRITE] = { LIM_IOPS, LIM_IOPS_WR, LIM_BPS, LIM_BPS_WR },
};

uint64_t throttle_take(struct throttle *t, enum thr_dir dir, uint64_t bytes,
		       uint64_t now)
{
	uint64_t wait = 0;

	if (dir != THR_READ && dir != THR_WRITE)
		return 0;
	for (unsigned int i = 0; i < 4; i++) {
		struct thr_bucket *b = &t->b[draw[dir][i]];
		uint64_t n = i < 2 ? 1 : bytes;
		thr_level_t need, w;

		if (!b->rate)
			continue;
		refill(b, now);
		/* More than the bucket holds: a full bucket lets it pass. */
		need = (thr_level_t)(n < b->cap ? n : b->cap) * NS;
		if (b->level >= need)
			continue;
		w = (need - b->level + b->rate - 1) / b->rate;
		if (w > (thr_level_t)UINT64_MAX)
			w = UINT64_MAX;
		if ((uint64_t)w > wait)
			wait = (uint64_t)w;
	}
	if (wait)
		return wait;
	for (unsigned int i = 0; i < 4; i++) {
		struct thr_bucket *b = &t->b[draw[dir][i]];

		if (b->rate)
			b->level -= (thr_level_t)(i < 2 ? 1 : bytes) * NS;
	}
	return 0;
}
