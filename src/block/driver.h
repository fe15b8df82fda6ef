/* Network block drivers (RBD, NBD) under the block queue: what a driver
 * gives the queue and what the queue gives a driver. Devices never see
 * this: they call blkq_rw/blkq_flush/blkq_discard on a blk_backend as for a
 * file, and the queue hands the request to the backend's driver.
 *
 * Threads: every call into a driver context (attach, submit, event,
 * detach) runs on the thread that owns its queue. A driver's completions
 * reach the queue either on that thread (blkq_dreq_done) or from any other
 * thread (blkq_dreq_done_remote: a per-queue mailbox and an eventfd that the
 * queue's io_uring watches, one wakeup for a batch). */
#ifndef IOVM_BLOCK_DRIVER_H
#define IOVM_BLOCK_DRIVER_H

#include <stdint.h>
#include <sys/uio.h>

#include "block/backend.h"

struct blk_queue;
struct blk_att;

/* One request handed to a driver. The driver owns it from submit until it
 * passes it to blkq_dreq_done*; iov points into guest memory and stays
 * valid until then. */
struct blk_dreq {
	enum blk_op op;
	const struct iovec *iov;	/* READ/WRITE */
	unsigned int iovcnt;
	uint64_t offset, len;		/* bytes; len of READ/WRITE is the
					 * iovecs' sum */
	struct blk_att *att;		/* the queue's context it came from */
	struct blk_dreq *next;		/* the driver's while it owns it */
	uint64_t drv[5];		/* the driver's scratch */
};

/* The watches and timers a context can have armed at once (index). */
#define BLK_ATT_WATCHES 4

/* A driver's per-queue context: one per (queue, backend), made by the
 * queue on the backend's first request from that queue. */
struct blk_att {
	struct blk_queue *q;
	struct blk_backend *be;
	void *ctx;		/* the driver's */
	/* internal to the queue: */
	void *slot[BLK_ATT_WATCHES];
	unsigned int armed;	/* bit per watch index */
	unsigned int inflight;	/* requests submitted, not yet done */
};

struct blk_driver {
	const char *name;
	/* Fills be (size, block sizes, ro, discard_ok, discard_zeroes,
	 * serial, path; priv). On error: -errno and a one-line message in
	 * err naming the disk and the cause; nothing stays open. */
	int (*open)(struct blk_backend *be, const struct disk_cfg *cfg,
		    char *err, size_t errlen);
	/* No context is attached any more. */
	void (*close)(struct blk_backend *be);
	/* blk_resize of a network disk: new_size 0 re-reads the image's
	 * size, else the image is resized to new_size (already checked to
	 * be larger and aligned). Sets *now to the image's size, without
	 * touching be->size. 0 or -errno with a one-line message in err.
	 * NULL: the disk's size cannot change (NBD). */
	int (*resize)(struct blk_backend *be, uint64_t new_size, uint64_t *now,
		      char *err, size_t errlen);
	/* Synchronous flush of everything completed so far (blk_flush). */
	int (*flush)(struct blk_backend *be);
	/* Sets att->ctx. 0 or -errno (the request that caused it fails). */
	int (*attach)(struct blk_att *att);
	/* Starts r: 0 once the driver owns it (its result comes through
	 * blkq_dreq_done*), or -errno if nothing was started. */
	int (*submit)(struct blk_att *att, struct blk_dreq *r);
	/* Watch or timer idx fired: res is the poll mask, 0 for a timer
	 * that expired, or -errno (-ECANCELED after blkq_disarm). */
	void (*event)(struct blk_att *att, unsigned int idx, int res);
	/* The queue goes away: returns once no request of att can complete
	 * any more (each completed, or guaranteed never to be); the
	 * context's watches are disarmed by the queue after this. */
	void (*detach)(struct blk_att *att);
};

/* Completion of r on its queue's own thread (from submit or event). */
void blkq_dreq_done(struct blk_dreq *r, int res);
/* Completion of r from any thread. */
void blkq_dreq_done_remote(struct blk_dreq *r, int res);

/* One-shot poll of fd for events (POLLIN, POLLOUT) as watch idx of att:
 * event(att, idx, mask) comes from the queue's reaping. -EBUSY if idx is
 * armed already. */
int blkq_watch(struct blk_att *att, unsigned int idx, int fd,
	       unsigned int events);
/* One-shot timer: event(att, idx, 0) after ns nanoseconds. */
int blkq_timer(struct blk_att *att, unsigned int idx, uint64_t ns);
/* Whether watch or timer idx is armed. */
static inline bool blkq_armed(const struct blk_att *att, unsigned int idx)
{
	return att->armed & (1u << idx);
}
/* Cancels watch or timer idx if armed: event(att, idx, -ECANCELED), or
 * its real result if it fired first, comes later. */
int blkq_disarm(struct blk_att *att, unsigned int idx);

/* The drivers (NULL when iovm is built without the library). */
extern const struct blk_driver blk_rbd_driver;
extern const struct blk_driver blk_nbd_driver;

/* Splits "rbd:POOL[/NAMESPACE]/IMAGE[@SNAP]" (a copy in *buf, which the
 * caller frees; the names point into it, ns and snap NULL when absent).
 * Returns 0 or -EINVAL with a one-line message. */
int blk_rbd_parse(const char *path, char **buf, const char **pool,
		  const char **ns, const char **image, const char **snap,
		  char *err, size_t errlen);

/* The driver of path (by its scheme), or NULL for a file. *missing is set
 * to the name of a driver this build lacks when the scheme is known. */
const struct blk_driver *blk_driver_for(const char *path, const char **missing);

#endif
