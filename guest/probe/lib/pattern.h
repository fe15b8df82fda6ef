/* Data pattern shared by the probe and the host-side checker: the 64-bit
 * word at byte offset off (a multiple of 8) of a disk, for a given seed.
 * Position-dependent, so misplaced or missing writes show; seed-dependent,
 * so each test phase writes different data. Header-only, no dependencies. */
#ifndef PROBE_PATTERN_H
#define PROBE_PATTERN_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t pattern_word(uint64_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) + seed * 0x9E3779B97F4A7C15ull;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return x;
}

/* Fills len bytes (a multiple of 8) at buf with the pattern for disk byte
 * offset off. */
static inline void pattern_fill(void *buf, uint64_t off, size_t len,
				uint64_t seed)
{
	uint64_t *w = (uint64_t *)buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = pattern_word(seed, off + 8 * i);
}

/* Returns the byte index of the first mismatch, or len when all match. */
static inline size_t pattern_check(const void *buf, uint64_t off, size_t len,
				   uint64_t seed)
{
	const uint64_t *w = (const uint64_t *)buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != pattern_word(seed, off + 8 * i))
			return 8 * i;
	return len;
}

#endif
