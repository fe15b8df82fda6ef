/* TSC timing: calibration (PIT channel 2, else CPUID 0x15), conversions,
 * busy delays, and latency statistics (mean, percentiles). */
#ifndef PROBE_TIMING_H
#define PROBE_TIMING_H

#include "lib/libc.h"

extern uint64_t tsc_khz;
extern const char *tsc_source;

int tsc_calibrate(void);
uint64_t ticks_to_ns(uint64_t ticks);
uint64_t ms_to_ticks(uint64_t ms);
uint64_t us_to_ticks(uint64_t us);
void delay_us(uint64_t us);

/* Latency samples in TSC ticks; storage is provided by the caller. */
struct lat_stats {
	uint32_t *samples;	/* ticks, saturated at UINT32_MAX */
	uint64_t cap, n;	/* samples beyond cap only enter the mean */
	uint64_t count, sum;
};

void lat_init(struct lat_stats *s, uint32_t *buf, uint64_t cap);
static inline void lat_add(struct lat_stats *s, uint64_t ticks)
{
	if (s->n < s->cap)
		s->samples[s->n++] = ticks > UINT32_MAX ? UINT32_MAX
							: (uint32_t)ticks;
	s->count++;
	s->sum += ticks;
}
uint64_t lat_mean_ns(const struct lat_stats *s);
/* Percentile (0..100) in ns; reorders the samples. */
uint64_t lat_pct_ns(struct lat_stats *s, unsigned int pct);

/* Prints a benchmark job's result line, as bench/ reads it: job=NAME
 * iops=.. bw_mbs=.. lat_mean_us=.. lat_p99_us=.. ios=..; reorders the
 * latency samples. */
void job_report(const char *name, uint64_t ticks, uint64_t ios,
		uint64_t bytes, struct lat_stats *lat);

#endif
