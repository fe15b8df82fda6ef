/* The monotonic clock in nanoseconds, for spin deadlines and timing. */
#ifndef IOVM_LIB_CLOCK_H
#define IOVM_LIB_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif
