/* A block queue for HBA unit tests that completes requests only when the
 * test says so, in the order it picks, so that queueing and out-of-order
 * completion are checked deterministically. The data moves (preadv/pwritev
 * on the backend fd) happen at completion time, as late as a real disk. */
#ifndef IOVM_TESTS_FAKE_BLKQ_H
#define IOVM_TESTS_FAKE_BLKQ_H

#include <stdbool.h>

#include "block/backend.h"

enum fake_order { FAKE_FIFO, FAKE_LIFO, FAKE_HOLD };

struct fake_stats {
	unsigned int submitted;		/* read/write requests seen */
	unsigned int max_iovcnt;	/* largest iovec count of one request */
	unsigned int max_inflight;	/* most requests pending at once */
	unsigned int reads, writes, flushes;
};

/* How the next blkq_reap calls complete pending requests. */
void fake_blkq_order(enum fake_order o);
unsigned int fake_blkq_pending(void);
struct fake_stats *fake_blkq_stats(void);
void fake_blkq_reset_stats(void);
/* In FAKE_HOLD: the next blkq_reap completes the newest pending request
 * (only it), as a disk may finish a later request before an earlier one. */
void fake_blkq_release_newest(void);
/* The next blkq_rw fails with err (negative) without queueing anything. */
void fake_blkq_fail_next(int err);

#endif
