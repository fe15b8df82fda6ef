/* Per-disk and per-queue I/O statistics: operations, bytes, errors, requests
 * in flight and latency histograms, counted by the block queue on every
 * request whatever the backend (file, block device, RBD, NBD).
 *
 * Who writes, who reads, and why no lock is on the fast path:
 *
 * - A disk (struct blk_backend, blk_open) has one struct blk_stats. Each
 *   queue that sends it a request gets its own record (struct
 *   blk_qstats), made on the first request (the only allocation, under
 *   the disk's lock) and found after that in O(1): the queue keeps an
 *   array indexed by the disk's small id (blk_stats.id), so a request
 *   costs two loads to find its record, never a search.
 * - Only the queue's own thread writes its record: plain loads and
 *   relaxed 64-bit atomic stores (no read-modify-write instruction, no
 *   lock, no system call). Timestamps come from CLOCK_MONOTONIC through
 *   the vDSO: one read when a request starts, one per reap pass for all
 *   the requests that pass completes.
 * - A reader (the API thread) takes the disk's lock, which keeps records
 *   from being folded or freed under it, and copies each record with
 *   relaxed atomic loads: every field is an aligned 64-bit word, so no
 *   single value is ever torn. For a snapshot consistent across fields
 *   (a histogram that sums to the bytes' operations), the writer bumps
 *   the record's sequence count to odd before a completion's stores and
 *   to even after them (release fences: compiler barriers on x86); the
 *   reader retries a copy that saw an odd count or a count that moved,
 *   up to BLK_STATS_READ_TRIES times, and otherwise keeps its last copy,
 *   whose fields are each exact values of some moment of the last few
 *   completions.
 * - A queue that goes away (blkq_destroy) folds its records into the
 *   disk's retired record of the same queue index, under the disk's lock:
 *   the disk's totals and each queue index's counts only grow.
 * - The disk's struct blk_stats is reference-counted (the backend and
 *   each record): a queue may outlive blk_close, and a disk's id is not
 *   given to another while a record of it exists.
 *
 * Operation counts are the histograms' sums: a record cannot show more
 * operations than latencies. */
#ifndef IOVM_BLOCK_STATS_H
#define IOVM_BLOCK_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* What is counted, by kind (ZERO_UNMAP is counted as write-zeroes). */
enum blk_stat_kind {
	BLK_STAT_READ,
	BLK_STAT_WRITE,
	BLK_STAT_FLUSH,
	BLK_STAT_DISCARD,
	BLK_STAT_WRITE_ZEROES,
	BLK_STAT_KINDS,
};

/* Latency histogram: log-linear buckets over nanoseconds. Bucket 0 holds
 * latencies under BLK_HIST_MIN_NS (1.024 us); then each power of two from
 * 2^10 ns to 2^34 ns (17.2 s, past 10 s) is split in BLK_HIST_SUB linear
 * buckets (a relative width of 1/8 to 1/16); the last bucket holds
 * everything from 2^34 ns up. */
#define BLK_HIST_SUB_BITS 3
#define BLK_HIST_SUB (1u << BLK_HIST_SUB_BITS)
#define BLK_HIST_MIN_SHIFT 10
#define BLK_HIST_MAX_SHIFT 34
#define BLK_HIST_MIN_NS (1ull << BLK_HIST_MIN_SHIFT)
#define BLK_HIST_MAX_NS (1ull << BLK_HIST_MAX_SHIFT)
#define BLK_HIST_BUCKETS \
	(2 + (BLK_HIST_MAX_SHIFT - BLK_HIST_MIN_SHIFT) * BLK_HIST_SUB)

/* Most disks with statistics open at once in a process; a disk past it
 * works but is not counted (logged once). */
#define BLK_STATS_MAX_DISKS 256
/* Copies a reader tries for a consistent snapshot of a busy record. */
#define BLK_STATS_READ_TRIES 64

/* One kind's counters. */
struct blk_kind_stats {
	uint64_t bytes;		/* moved (read, write) or covered by the range
				 * (discard, write-zeroes) of successful ones */
	uint64_t errors;	/* completed with an error */
	uint64_t merged;	/* requests a device merged into another
				 * (virtio-blk's sequential groups) */
	uint64_t lat_sum_ns;	/* sum of the latencies */
	uint64_t hist[BLK_HIST_BUCKETS];
};

/* The counters of one queue on one disk (and of a snapshot). */
struct blk_counts {
	uint64_t inflight;	/* now */
	uint64_t max_inflight;	/* the most seen at once */
	struct blk_kind_stats k[BLK_STAT_KINDS];
};

/* A queue's record on a disk: written by the queue's thread only. */
struct blk_qstats {
	uint64_t seq;		/* odd while a completion is being counted */
	struct blk_counts c;
	struct blk_stats *disk;
	unsigned int qindex;	/* the device's queue index */
	bool retired;		/* its queue is gone; owned by the disk */
	struct blk_qstats *next;	/* the disk's list, under its lock */
};

struct blk_stats {
	pthread_mutex_t lock;	/* the list; folding; readers */
	unsigned int refs;	/* under lock */
	unsigned int id;	/* index of the queues' record arrays */
	struct blk_qstats *list;	/* live and retired records */
};

/* blk_open/blk_close: a disk's statistics (NULL when
 * BLK_STATS_MAX_DISKS are open: the disk is not counted). */
struct blk_stats *blk_stats_new(void);
void blk_stats_put(struct blk_stats *d);

/* The queue's record array (BLK_STATS_MAX_DISKS pointers): a new record
 * of d for queue index qindex, stored in *slot; NULL (the request is not
 * counted) without memory. */
struct blk_qstats *blk_qstats_attach(struct blk_qstats **slot,
				     struct blk_stats *d, unsigned int qindex);
/* blkq_destroy: r's counts go to its disk's retired record of the same
 * queue index (or r becomes it); r is not the caller's any more. */
void blk_qstats_retire(struct blk_qstats *r);

/* The bucket of a latency, and a bucket's bounds [lo, hi) in ns (hi of the
 * last bucket: UINT64_MAX). */
static inline unsigned int blk_hist_bucket(uint64_t ns)
{
	unsigned int msb, sub;

	if (ns < BLK_HIST_MIN_NS)
		return 0;
	if (ns >= BLK_HIST_MAX_NS)
		return BLK_HIST_BUCKETS - 1;
	msb = 63 - (unsigned int)__builtin_clzll(ns);
	sub = (unsigned int)(ns >> (msb - BLK_HIST_SUB_BITS)) & (BLK_HIST_SUB - 1);
	return 1 + (msb - BLK_HIST_MIN_SHIFT) * BLK_HIST_SUB + sub;
}
uint64_t blk_hist_lo(unsigned int b);
uint64_t blk_hist_hi(unsigned int b);

/* Operations counted in a histogram (its sum). */
uint64_t blk_hist_count(const uint64_t *hist);
/* The latency under which a fraction q (0 < q <= 1) of the histogram's
 * operations fall, interpolated linearly inside the bucket where the
 * rank ceil(q * count) falls (as Prometheus's histogram_quantile does);
 * the underflow bucket reads as [0, 1.024 us), the overflow bucket as its
 * lower bound. 0 for an empty histogram. */
uint64_t blk_hist_quantile(const uint64_t *hist, double q);

/* The fast path, on the queue's thread only. */
static inline void blk_stat_store(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static inline void blk_qstats_start(struct blk_qstats *r)
{
	uint64_t n = r->c.inflight + 1;

	blk_stat_store(&r->c.inflight, n);
	if (n > r->c.max_inflight)
		blk_stat_store(&r->c.max_inflight, n);
}

/* A request that started and was not sent (or failed at abort after its
 * completion was counted): no longer in flight. */
static inline void blk_qstats_drop(struct blk_qstats *r)
{
	blk_stat_store(&r->c.inflight, r->c.inflight - 1);
}

/* A completion of nreq device requests (merged into one I/O) of kind k:
 * bytes on success, an error if res < 0, lat_ns each. */
static inline void blk_qstats_done(struct blk_qstats *r, unsigned int k,
				   unsigned int nreq, uint64_t bytes, int res,
				   uint64_t lat_ns)
{
	struct blk_kind_stats *ks = &r->c.k[k];
	unsigned int b = blk_hist_bucket(lat_ns);

	blk_stat_store(&r->seq, r->seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	blk_stat_store(&ks->hist[b], ks->hist[b] + nreq);
	blk_stat_store(&ks->lat_sum_ns, ks->lat_sum_ns + lat_ns * nreq);
	if (res < 0)
		blk_stat_store(&ks->errors, ks->errors + nreq);
	else
		blk_stat_store(&ks->bytes, ks->bytes + bytes);
	if (nreq > 1)
		blk_stat_store(&ks->merged, ks->merged + nreq - 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	blk_stat_store(&r->seq, r->seq + 1);
}

/* Readers (any thread but the queues'). */

/* One queue index's counts on a disk: its live records and its retired
 * one summed. */
struct blk_queue_snap {
	unsigned int qindex;
	bool live;		/* a queue of this index exists now */
	struct blk_counts c;
};

/* Copies d's counters: total gets the sum of every record (inflight: the
 * sum now; max_inflight: the largest of any queue index); per[] one
 * entry per queue index, in ascending order, at most nper (more are only
 * in the total). Returns how many entries per[] got. */
unsigned int blk_stats_read(struct blk_stats *d, struct blk_counts *total,
			    struct blk_queue_snap *per, unsigned int nper);

/* Adds src's counts into dst (inflight summed, max_inflight the larger). */
void blk_counts_add(struct blk_counts *dst, const struct blk_counts *src);

/* The name of a kind in the API and metrics: "read", "write", "flush",
 * "discard", "write_zeroes". */
const char *blk_stat_kind_name(unsigned int k);

#endif
