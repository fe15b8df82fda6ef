/* What the block queue's files share: the queue, its request slots and its
 * helper thread, and the calls between file.c (the queue core and file I/O),
 * driver_queue.c (the network drivers' side) and file_helper.c (the helper
 * thread's discards and copies). Nothing outside src/block includes it. */
#ifndef IOVM_BLOCK_QUEUE_INT_H
#define IOVM_BLOCK_QUEUE_INT_H

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "block/backend.h"
#include "block/driver.h"
#include "block/stats.h"

/* Watches of blkq_poll in flight at once. */
#define BLKQ_POLLS 8
/* Zeroing by writes (the file system can neither zero nor punch a range):
 * at most this many chunk writes in flight per queue, all from one shared
 * buffer of zeroes, whatever the requests' sizes. */
#define BLKQ_ZCHUNKS 4

/* What a slot is when it is not a request (enum blk_op): the ring's
 * completions carry slots, and reap_ready dispatches on op. */
enum { SLOT_POLL = 100, SLOT_ZCHUNK, SLOT_HELPER, SLOT_COPY, SLOT_DWATCH,
       SLOT_MAILBOX, SLOT_THR };

struct blk_slot {
	int op;			/* enum blk_op or SLOT_* */
	struct blk_backend *be;
	const struct iovec *iov;
	unsigned int iovcnt;
	bool buffered;		/* sent on be->fd_buffered */
	uint64_t offset;
	uint64_t len;		/* bytes expected (READ/WRITE), range length */
	blk_done_fn done;
	void *tag;
	int res;
	bool busy;		/* taken: queued, in flight or deferred */
	struct blk_slot *next;
	/* Zeroing: the fallocate mode tried (index into zero_method) or the
	 * writes of zeroes; res holds their first error. */
	uint8_t zstage;
	uint8_t zmethod;
	bool zwaiting;		/* on the queue's list for chunk writes */
	unsigned int zinflight;	/* its chunk writes in flight */
	uint64_t zpos;		/* next byte to write */
	struct blk_slot *parent;	/* SLOT_ZCHUNK: the request it zeroes */
	/* SLOT_COPY, on the helper thread: the caller's copy; whether it
	 * began (gate, same-file check), goes through the bounce buffer
	 * (overlap within a file, or copy_file_range refused), and runs from
	 * the end backwards (overlap with the destination above). */
	struct blk_copy *copy;
	bool copy_started;
	bool copy_bounce;
	bool copy_back;
	/* A network driver's request (block/driver.h); orphan: failed by
	 * blkq_abort while the driver still owned it, its slot kept out of
	 * the free list so that a late completion lands in valid memory. */
	bool drv;
	bool orphan;
	struct blk_dreq dreq;
	/* SLOT_DWATCH: the driver context and watch index it serves; the
	 * timer's time, which the kernel reads at submission. */
	struct blk_att *att;
	unsigned int widx;
	struct __kernel_timespec ts;
	/* Statistics (block/stats.h): the record the request counts in
	 * (NULL: not counted), when it started, and how many device
	 * requests it carries (a merged group: blkq_rw_merged). */
	struct blk_qstats *st;
	uint64_t t0;
	unsigned int nreq;
};

/* Slots finished on other threads (the helper's results, the network
 * drivers' completions) for the queue's thread: pushed on a list under a
 * lock, with one eventfd write per batch; the ring watches the eventfd
 * while the queue expects any, and the queue takes the whole list when it
 * fires. */
struct blk_inbox {
	pthread_mutex_t lock;
	struct blk_slot *list;	/* under lock, newest first */
	int efd;		/* -1 until inbox_open */
	bool armed;		/* the watch on efd is in the ring */
	struct blk_slot watch;	/* its op says whose inbox fired */
};

/* Block-device discards: no asynchronous BLKDISCARD in io_uring on the
 * kernels we support (Debian 12's 6.1), so they run on a helper thread of
 * the queue, started on the first one; its results come back through an
 * eventfd that the queue's ring watches, so the owner's loop wakes for
 * them like for any completion. Copies (blkq_copy) run there too, one
 * chunk at a time, each going back to the end of the list after its chunk
 * so that neither a copy nor a discard waits behind a long copy. */
struct blk_helper {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started;
	bool stop;			/* under lock */
	struct blk_slot *todo, **todo_tail;	/* under lock */
	struct blk_inbox done;		/* what the thread finished */
	unsigned int pending;		/* handed over and not yet finished */
	uint8_t *bounce;		/* the thread's: copies that cannot
					 * use copy_file_range */
};

struct blk_queue {
	struct io_uring ring;
	int efd;		/* registered lazily by blkq_event_fd */
	unsigned int depth;
	unsigned int used;	/* request slots taken */
	unsigned int polls_used;
	struct blk_slot *slots;
	struct blk_slot *free;
	struct blk_slot polls[BLKQ_POLLS];
	struct blk_slot *free_polls;
	struct blk_slot *deferred;	/* completed synchronously */
	struct blk_slot **deferred_tail;
	unsigned int unsubmitted;
	bool taskrun_flag;	/* the kernel tells when completions wait on us */
	struct blk_slot zchunks[BLKQ_ZCHUNKS];
	struct blk_slot *zfree;
	struct blk_slot *zwait, **zwait_tail;	/* requests wanting chunks */
	struct blk_helper helper;
	bool dead;		/* blkq_abort ran: every operation fails */
	/* Network drivers (block/driver.h): a context per backend used from
	 * this queue; requests the drivers own; watches and timers armed;
	 * the mailbox of completions from other threads, drained when its
	 * eventfd (watched by the ring while requests are out) fires. */
	struct blk_att **atts;
	unsigned int natts;
	unsigned int drv_inflight;
	unsigned int dwatches;
	bool closing;		/* blkq_destroy: watch events are dropped */
	struct blk_inbox mailbox;
	/* Statistics: the device's queue index (blkq_set_index); the time a
	 * reap pass read once for all its completions (0: not read yet, or
	 * not in a pass); this queue's record of each disk, by the disk's
	 * id (block/stats.h), made on the disk's first request here. */
	unsigned int index;
	bool reaping;
	uint64_t now;
	struct blk_qstats *st[BLK_STATS_MAX_DISKS];
	/* I/O limits (queue_throttle.c): NULL until a request of a disk
	 * with limits comes; thr_passing while a held request goes through
	 * blkq_* again, its tokens taken. */
	struct thr_queue *thr;
	bool thr_passing;
	uint64_t thr_t0;	/* while passing: when it arrived (0: unknown) */
	bool thr_off;		/* blkq_unthrottle */
};

/* file.c: the queue core. */
/* An SQE on q's ring (the queue is sent to the kernel first if the ring is
 * full), counted as unsubmitted; NULL if there is none even then. */
struct io_uring_sqe *queue_sqe(struct blk_queue *q);
/* A free slot set up for an operation on [offset, offset + len), or
 * NULL when the queue is full. */
struct blk_slot *queue_slot_start(struct blk_queue *q, enum blk_op op,
				  struct blk_backend *be, uint64_t offset,
				  uint64_t len, blk_done_fn done, void *tag);
void queue_slot_put(struct blk_queue *q, struct blk_slot *s);
/* s completes with res at the next reap (never inside the call that
 * started it). */
void queue_defer(struct blk_queue *q, struct blk_slot *s, int res);
/* Frees s, then calls its done(tag, res). */
void queue_finish(struct blk_queue *q, struct blk_slot *s, int res);

/* An inbox whose watch slot has op (SLOT_HELPER, SLOT_MAILBOX); its eventfd
 * is made by inbox_open (0 or -errno), kept until inbox_close. */
void inbox_init(struct blk_inbox *in, int op);
int inbox_open(struct blk_inbox *in);
void inbox_close(struct blk_inbox *in);
/* From any thread: s is finished with res. */
void inbox_post(struct blk_inbox *in, struct blk_slot *s, int res);
/* Puts the inbox's watch in q's ring if wanted (entries are expected) and
 * it is not there yet: 0, or -EBUSY with the ring full (the caller tries
 * again from blkq_submit and blkq_wait). */
int inbox_arm(struct blk_queue *q, struct blk_inbox *in, bool wanted);
/* The watch fired: every slot posted so far, in the order they were
 * posted (linked by next). */
struct blk_slot *inbox_take(struct blk_inbox *in);

static inline bool blk_range_ok(const struct blk_backend *be, uint64_t offset,
				uint64_t len)
{
	uint64_t size = blk_size(be);

	return offset <= size && len <= size - offset;
}

/* The test hooks of blk_set_test_hooks (NULL in production), and the
 * arrival a slow operation signals when it starts to wait at their gate. */
const struct blk_test_hooks *blk_hooks(void);
void blk_test_arrived(void);

/* driver_queue.c: network drivers under the queue (block/driver.h). */
void drvq_init(struct blk_queue *q);
/* Hands an operation on a network backend to its driver (nreq: the device
 * requests it carries, for the statistics). */
int drvq_start(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	       const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	       uint64_t len, unsigned int nreq, blk_done_fn done, void *tag);
/* Puts the mailbox's watch in the ring while requests are out (again after
 * a full ring: blkq_submit and blkq_wait call it). */
int drvq_arm_mailbox(struct blk_queue *q);
/* Completions of the ring's slots: SLOT_MAILBOX and SLOT_DWATCH. */
void drvq_reap_mailbox(struct blk_queue *q);
void drvq_watch_done(struct blk_queue *q, struct blk_slot *w, int res);
/* blkq_destroy: the drivers let go, the contexts go away. */
void drvq_detach_all(struct blk_queue *q);

/* queue_throttle.c: I/O limits (backend.h: blk_set_limits). */
/* Whether a request on be must pass the limits' gate: one load and a
 * predictable branch for a disk that never had limits. */
static inline bool thr_gated(const struct blk_queue *q,
			     const struct blk_backend *be)
{
	return __builtin_expect(__atomic_load_n(&be->thr, __ATOMIC_ACQUIRE) != NULL, 0) &&
	       !q->thr_passing && !q->thr_off;
}
/* The gate: 1 when the request goes on now (its tokens taken), 0 when it
 * is held (its done comes later, from blkq_reap), or -errno. */
int thr_gate(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	     const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	     uint64_t len, unsigned int nreq, blk_done_fn done, void *tag);
/* Puts the timer and the wakeup watch in the ring when due (again after a
 * full ring: blkq_submit and blkq_wait call it). */
void thr_arm(struct blk_queue *q);
/* A SLOT_THR completion: the timer or the wakeup. */
void thr_event(struct blk_queue *q, struct blk_slot *s, int res);
/* blkq_abort, blkq_destroy: every held request finishes with err. */
void thr_fail(struct blk_queue *q, int err);
/* blkq_destroy, after the ring is gone: the queue's state is freed. */
void thr_queue_free(struct blk_queue *q);
/* blk_open, blk_close: the disk's limits. */
int thr_disk_open(struct blk_backend *be, const struct disk_limits *l);
void thr_disk_close(struct blk_backend *be);

/* file_helper.c: the helper thread (block-device discards, copies). */
void helper_init(struct blk_helper *h);
void helper_join(struct blk_helper *h);
void helper_stop(struct blk_helper *h);
/* Hands s (a block device's DISCARD, or SLOT_COPY) to the thread, which
 * is started on the first. */
int helper_queue(struct blk_queue *q, struct blk_slot *s);
/* As drvq_arm_mailbox, for the helper's results. */
int helper_arm(struct blk_queue *q);
/* SLOT_HELPER fired: finishes what the thread did. */
void helper_reap(struct blk_queue *q);

#endif
