/* I/O job engine over the virtio-blk driver, shared by the blk tests and
 * the blk benchmark: keeps qd requests in flight over a disk region,
 * sequential or random, writing the pattern or verifying it. */
#ifndef PROBE_BLK_JOB_H
#define PROBE_BLK_JOB_H

#include "lib/timing.h"
#include "virtio_blk.h"

struct blk_job {
	const char *name;
	uint32_t type;		/* VIRTIO_BLK_T_IN or _OUT */
	uint32_t bs;
	unsigned int qd;
	bool random;
	uint64_t off, len;	/* region, bytes, multiples of bs */
	uint64_t seed;		/* pattern seed written / expected */
	/* Stop rule: max_ticks > 0 runs for that long (random picks with
	 * replacement, sequential wraps); else one pass over the region,
	 * each block once (random = a permutation). */
	uint64_t max_ticks;
	bool verify;
	/* results */
	uint64_t ios, bytes, ticks;
	struct lat_stats lat;
};

/* Runs the job; any I/O error or pattern mismatch fails the probe. */
void blk_job_run(struct vblk *b, struct blk_job *j);
/* Buffers for jobs, allocated once (qd * bs must fit). */
int blk_job_init(uint64_t pool_bytes, uint64_t lat_samples);
/* Prints "job=NAME iops=.. bw_mbs=.. lat_mean_us=.. lat_p99_us=.. ios=..". */
void blk_job_report(struct blk_job *j);
const char *blk_status_name(uint8_t s);

#endif
