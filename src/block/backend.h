/* Block backend interface: a disk image (raw file or host block device) and
 * per-thread asynchronous submission queues. Data moves on the caller's
 * iovecs (guest memory) straight to the kernel: no bounce buffer, no copy.
 * Every device (virtio-blk, the SCSI disk target) uses this interface and
 * nothing below it, so backends can be added (network, ...) without touching
 * devices. */
#ifndef IOVM_BLOCK_BACKEND_H
#define IOVM_BLOCK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "config.h"

struct blk_driver;
struct blk_stats;
struct blk_thr;

struct blk_backend {
	int fd;
	/* Bytes, a multiple of block_size. It only grows (blk_resize), on
	 * the control thread while the queue threads run: read it with
	 * blk_size(), once per request, so that a request is checked against
	 * one size; a request checked against the old, smaller size is
	 * still inside the new one. */
	uint64_t size;
	uint32_t block_size;	/* logical block size: 512 (or the device's) */
	uint32_t phys_block_size;
	bool ro;
	bool direct;		/* O_DIRECT (cache=none) */
	bool is_blockdev;
	bool discard_ok;	/* punch hole / BLKDISCARD supported */
	char serial[21];	/* stable id derived from the file (GET_ID, VPD 0x80) */
	/* cache=none: O_DIRECT needs buffers, lengths and offsets aligned to
	 * dio_align. Guests usually comply; a request that does not is sent
	 * on fd_buffered (same file, page cache) instead of failing, which
	 * stays coherent because the kernel writes back and invalidates the
	 * cached range around direct I/O. -1 when direct is false. */
	int fd_buffered;
	uint32_t dio_align;
	char *path;		/* as opened, for messages; NULL if not */
	/* Reads of deallocated (DISCARDed) blocks return zeroes: a file's
	 * punched holes do, a Ceph RBD image's 4 KiB discard or an NBD
	 * server's trim need not (SCSI's LBPRZ follows this). */
	bool discard_zeroes;
	/* A network disk (RBD, NBD: block/driver.h), NULL for a file or
	 * block device; fd and fd_buffered are -1 then and devices use
	 * nothing of the file's (locks, fadvise, SEEK_DATA). */
	const struct blk_driver *drv;
	void *priv;		/* the driver's */
	/* Bytes a device may hold back a sequential stream's requests for,
	 * while others are in flight, to send them as one (virtio-blk: see
	 * hold_group in virtio/blk.c): set by a driver whose every command
	 * costs its server more than the bytes do (NBD); 0: send each group
	 * as soon as it is popped (files, RBD). */
	uint32_t stream_hold;
	/* Its I/O statistics (block/stats.h), made by blk_open; NULL: not
	 * counted (a backend not opened by blk_open, or too many disks). */
	struct blk_stats *stats;
	/* I/O limits (block/throttle.h): NULL until the disk first has
	 * some (--disk iops=..., blk_set_limits), then kept until
	 * blk_close; the queues read it with an acquire load. */
	struct blk_thr *thr;
};

/* Whether be is a local file or block device (fd usable). */
static inline bool blk_is_local(const struct blk_backend *be)
{
	return !be->drv;
}

/* The disk's size in bytes now (see size). */
static inline uint64_t blk_size(const struct blk_backend *be)
{
	return __atomic_load_n(&be->size, __ATOMIC_ACQUIRE);
}

/* The name of be in messages. */
static inline const char *blk_name(const struct blk_backend *be)
{
	return be->path ? be->path : "(disk)";
}

/* Opens path per cfg (ro, cache). Errors are printed by the caller from the
 * returned -errno and err (a one-line message naming the problem): missing
 * file, not a regular file or block device, size < 512 or not a multiple of
 * 512. A path in a network scheme (rbd:POOL/IMAGE, nbd://, nbds://,
 * nbd+unix://) opens that driver's disk (block/driver.h). */
int blk_open(struct blk_backend *be, const struct disk_cfg *cfg, char *err,
	     size_t errlen);
void blk_close(struct blk_backend *be);

/* How a device's queue thread spins on its disks before it sleeps
 * (virtio/vqworker.c): at most ns (poll-us=); at low depth, for the
 * driver's next request after completions at most answer_ns, and for
 * completions only if completions is set. */
struct blk_spin {
	uint64_t ns;
	uint64_t answer_ns;
	bool completions;
};

/* A network disk whose poll-us= is not given spins at low depth only for
 * a driver that answers within this: a spin that waits longer for its
 * answer costs the thread more CPU than the driver's kick and a wakeup
 * would, and never for a completion, which takes a server's round trip
 * (tens to hundreds of microseconds: the spin would last all of it; QEMU's
 * iothreads do not poll sockets either). Measured: bench/RESULTS.md,
 * issue 17, "the queue thread's spin on network disks". */
#define BLK_SPIN_NET_ANSWER_NS 10000

/* The spin of a device serving the n disks of cfgs, be[i] opened from
 * cfgs[i]: ns is config_disks_poll_us; a file or block device, or a disk
 * with poll-us= given, spins as long as ns for answers and completions;
 * network disks alone, none with poll-us=, as BLK_SPIN_NET_ANSWER_NS says.
 * The deeper spins (BLKQ_SPIN_REFILL_NS, BLKQ_SPIN_BURST_NS) are the same
 * for every disk. */
void blk_spin_of(struct blk_spin *s, const struct blk_backend *const *be,
		 const struct disk_cfg *const *cfgs, unsigned int n);

/* I/O limits (struct disk_limits in config.h; token buckets shared by
 * every queue of the disk). A request that finds no tokens is held in its
 * queue, in order behind any held before it on that queue (a FLUSH too,
 * though it takes none), still counted by blkq_inflight, until the queue
 * thread's own io_uring timer says the tokens are there: nothing sleeps,
 * and a queue waiting for one disk's tokens serves its other disks.
 * READ draws one operation and its bytes from the total and -rd buckets;
 * WRITE, WRITE_ZEROES and ZERO_UNMAP one operation and their bytes from
 * the total and -wr ones; DISCARD one write operation and no bytes (it
 * moves no data); FLUSH nothing; blkq_copy (the host's own copy) is not
 * limited. blkq_abort fails held requests with its error, blkq_destroy
 * with -ECANCELED: they never reached the kernel.
 *
 * blk_set_limits (any thread; l checked by disk_limits_check) applies at
 * once: every queue holding requests of be is woken to look again. 0 or
 * -ENOMEM. blk_get_limits gives the limits as set (a burst of 0: the
 * default, throttle_cap) and how many requests are held now. Disks
 * opened with cfg->limits start with them. The queues that used be are
 * destroyed before blk_close. */
int blk_set_limits(struct blk_backend *be, const struct disk_limits *l);
void blk_get_limits(struct blk_backend *be, struct disk_limits *l,
		    unsigned int *held);

/* Tests only: the clock of the limits (nanoseconds, monotonic) instead of
 * CLOCK_MONOTONIC, so that a test decides when tokens are there. NULL in
 * production. */
extern uint64_t (*blk_thr_test_now)(void);

/* Writes back everything completed on be so far (fdatasync; nothing for a
 * read-only disk), synchronously: for shutdown and a vhost-user client's
 * departure, once the device's queues are drained. Returns 0 or -errno. */
int blk_flush(struct blk_backend *be);

/* Online resize (the control socket's `resize`). new_size 0: take the
 * size the image has now, after the operator grew it (a file's length, a
 * block device's size, an RBD image's size); else grow to new_size: a
 * file is extended (ftruncate), an RBD image resized; a block device
 * cannot be grown from here, so new_size must be the size it has now.
 * An NBD export cannot change size (-EOPNOTSUPP). Shrinking is refused
 * (-EINVAL): the guest may have data there. The size must stay a
 * multiple of the logical block size (-EINVAL). A read-only disk is
 * never extended by iovm, but takes the size its image grew to. On
 * success be->size holds the new size (an atomic store after the image
 * has it); a size that did not change is success too. The caller tells the guest (the device's resized hook).
 * From one thread at a time (the control thread), while the queue
 * threads run. Returns 0 or -errno with a one-line message in err. */
int blk_resize(struct blk_backend *be, uint64_t new_size, char *err,
	       size_t errlen);

enum blk_op {
	BLK_OP_READ,
	BLK_OP_WRITE,
	BLK_OP_FLUSH,		/* fdatasync of everything completed before */
	BLK_OP_DISCARD,		/* deallocate; reads return zeroes after */
	BLK_OP_WRITE_ZEROES,
	BLK_OP_ZERO_UNMAP,	/* zeroes, deallocated where the backend can
				 * (a file's punched hole), written if not */
};

/* I/O errors a device saw from its backend, by kind: counted in the
 * device's state by its queue threads (atomically) for the operator and a
 * control plane; the device logs each one, rate-limited. */
struct blk_errors {
	uint64_t read, write, flush, other;
};

static inline void blk_errors_add(struct blk_errors *e, enum blk_op op)
{
	uint64_t *c = op == BLK_OP_READ ? &e->read : op == BLK_OP_WRITE ? &e->write :
		      op == BLK_OP_FLUSH ? &e->flush : &e->other;

	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

static inline uint64_t blk_errors_total(const struct blk_errors *e)
{
	return __atomic_load_n(&e->read, __ATOMIC_RELAXED) +
	       __atomic_load_n(&e->write, __ATOMIC_RELAXED) +
	       __atomic_load_n(&e->flush, __ATOMIC_RELAXED) +
	       __atomic_load_n(&e->other, __ATOMIC_RELAXED);
}

/* A completion: res is bytes moved (READ/WRITE), 0, or -errno. */
typedef void (*blk_done_fn)(void *tag, int res);

/* One submission/completion queue (an io_uring), owned by one thread.
 * Requests are queued with blkq_*, sent with blkq_submit, and completed by
 * blkq_reap from the same thread, in any order. */
struct blk_queue;

/* depth: most requests in flight at once (the caller's pool size). */
struct blk_queue *blkq_create(unsigned int depth);
void blkq_destroy(struct blk_queue *q);
/* The device's index of the queue (its virtqueue), under which its
 * requests are counted in the disks' statistics (block/stats.h); 0 until
 * set. Before the queue's first request. */
void blkq_set_index(struct blk_queue *q, unsigned int index);

/* An eventfd that becomes readable when completions are ready, for the
 * owner's event loop. */
int blkq_event_fd(struct blk_queue *q);

/* Largest READ/WRITE in bytes (the result is an int). */
#define BLK_MAX_RW 0x7ffff000u

/* Queues an operation; iov must stay valid until completion. Returns 0 or
 * -errno (-EAGAIN when depth requests are already in flight). Offsets and
 * lengths are checked against the backend size by the device, and again
 * here (-EINVAL). */
int blkq_rw(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	    const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	    blk_done_fn done, void *tag);
/* As blkq_rw, for nreq device requests that the caller merged into one
 * I/O (virtio-blk's sequential groups): the statistics count nreq
 * operations of that latency, nreq - 1 of them merged, and the bytes of
 * the whole. */
int blkq_rw_merged(struct blk_queue *q, struct blk_backend *be,
		   enum blk_op op, const struct iovec *iov,
		   unsigned int iovcnt, uint64_t offset, unsigned int nreq,
		   blk_done_fn done, void *tag);
int blkq_flush(struct blk_queue *q, struct blk_backend *be, blk_done_fn done,
	       void *tag);
/* DISCARD, WRITE_ZEROES, ZERO_UNMAP: nothing of them runs on the calling
 * thread, however large the range. Zeroing tries the file system's
 * fallocate modes (in io_uring's workers) and, where it has none, writes
 * zeroes: a few chunk writes in flight per queue from one shared zero
 * buffer, so memory does not grow with the range. A block device's
 * DISCARD (an ioctl, not asynchronous in io_uring on Linux 6.1) runs on a
 * helper thread of the queue; its completion is reaped like any other. */
int blkq_discard(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
		 uint64_t offset, uint64_t len, blk_done_fn done, void *tag);

/* A copy between two backends (or within one) that the host does: the data
 * never passes through the caller's memory. Owned by the caller until the
 * completion; copied is how far it got (bytes, read with an atomic load
 * while it runs), cancel (set with an atomic store, from the owner's thread)
 * stops it after the chunk in flight with -ECANCELED. Ranges are checked
 * against both backends' sizes here (-EINVAL); dst must be writable
 * (-EROFS). Overlapping ranges of one file copy as memmove does: the
 * destination ends up with the source's old contents. */
struct blk_copy {
	struct blk_backend *src, *dst;
	uint64_t src_off, dst_off, len;
	uint64_t copied;
	bool cancel;
};
/* The most a copy moves in one step before others (copies, discards) on
 * the same queue get their turn. */
#define BLK_COPY_CHUNK (8u << 20)
/* Queues a copy: done(tag, 0 or -errno) comes from blkq_reap like any
 * completion; nothing of it runs on the calling thread. The file backend
 * uses copy_file_range(2) on a helper thread of the queue, chunk by chunk;
 * a backend that cannot copy by itself (network) returns -EOPNOTSUPP at
 * once and the device decides (fall back or refuse). Takes a request
 * slot (-EAGAIN when the queue is full). */
int blkq_copy(struct blk_queue *q, struct blk_copy *c, blk_done_fn done,
	      void *tag);

/* Tests only: holds the slow operations above in flight by construction.
 * While hooks are set, every zeroing that comes to writing zeroes, every
 * block-device discard and every copy (before its first chunk) first waits until gate_fd is readable
 * (-1: no gate) and writes 1 to arrive_fd (-1: none) when it starts to
 * wait; with no_fallocate, zeroing skips fallocate and files' discards
 * fail with -EOPNOTSUPP, as on a file system without them. h must stay
 * valid while set; NULL clears. */
struct blk_test_hooks {
	int gate_fd;
	int arrive_fd;
	bool no_fallocate;
	bool no_copy_range;	/* blkq_copy: copy_file_range fails EXDEV */
};
void blk_set_test_hooks(const struct blk_test_hooks *h);

/* Tests only (iovm vhost-user-pci --test-hold-writes): of the WRITEs queued
 * from now on (every queue, every backend of the process), those numbered
 * after+1 to after+count go to the kernel behind a gate, an io_uring poll
 * on an eventfd linked before the write: each is in flight (queued,
 * counted by blkq_inflight, its completion pending) and reads nothing of
 * its buffer until blk_test_hold_release opens the gate. A line is logged
 * once count are held. Returns 0 or -errno. */
int blk_test_hold_writes(uint64_t after, unsigned int count);
/* Opens that gate (any thread, not a signal handler): the held WRITEs and
 * any later ones run. Logs how many were held. */
void blk_test_hold_release(void);

/* One-shot watch: done(tag, poll mask or -errno) is called from blkq_reap
 * when fd becomes readable. Lets a queue thread wait on its kick eventfd and
 * its I/O completions in a single io_uring_enter. Uses no request slot. */
int blkq_poll(struct blk_queue *q, int fd, blk_done_fn done, void *tag);

/* Sends everything queued to the kernel. */
int blkq_submit(struct blk_queue *q);

/* Calls done() for every completion ready; with wait, blocks for at least
 * one if any is in flight, sending everything queued in the same system
 * call. What done() queues is sent by the next blkq_submit or blocking
 * blkq_reap. Returns the number reaped or -errno. */
int blkq_reap(struct blk_queue *q, bool wait);

/* Blocks until a completion (or a watched fd) is ready to reap, sending
 * everything queued in the same system call, without reaping it: the
 * caller can act between waking and its callbacks. Returns at once when
 * one is ready or nothing is in flight. Returns 0 or -errno. */
int blkq_wait(struct blk_queue *q);

/* Sends what is queued, then busy-polls for up to ns nanoseconds until a
 * completion (or a watched fd, see blkq_poll) is ready to reap, or until
 * more(arg) says other work arrived (a device polls its avail ring here;
 * more may be NULL). Returns whether either happened. A short spin before
 * blocking saves the thread a sleep and a wakeup per request at low queue
 * depth, where those dominate. */
bool blkq_spin(struct blk_queue *q, uint64_t ns, bool (*more)(void *),
	       void *arg);

/* Whether blkq_reap has something to take (or the queue failed), without
 * sending what is queued: for a thread that does not spin, whose next
 * blkq_wait sends it and sleeps in one system call. */
bool blkq_ready(struct blk_queue *q);

/* Device queue threads spin up to their disk's poll-us= before they block
 * (CONFIG_POLL_US_DEFAULT in config.h) while at most this many requests
 * are in flight; deeper, only this long after completions (the driver
 * seeing them and refilling). */
#define BLKQ_SPIN_MAX_INFLIGHT 2
#define BLKQ_SPIN_REFILL_NS 15000
/* ... and this long after new requests alone (the refill's burst). */
#define BLKQ_SPIN_BURST_NS 3000

/* Requests queued or in flight. */
unsigned int blkq_inflight(const struct blk_queue *q);

/* From now on q's requests pass the limits at once, and those it holds
 * are sent now (by the caller's next blkq_submit or blocking reap): for a
 * queue being stopped, whose drain must not wait for the limits' pace
 * (QEMU lifts throttling while it drains too). Other queues of the disk
 * keep to the limits. */
void blkq_unthrottle(struct blk_queue *q);

/* The queue's io_uring failed (blkq_reap or blkq_wait returned an error
 * the caller cannot wait out): completes every request still in flight,
 * with its real result where the kernel still delivers one (everything is
 * cancelled and reaped while the ring answers), else with err. From then
 * on every blkq_* operation on q fails with -EIO at once; the owner stops
 * using q and destroys it. */
void blkq_abort(struct blk_queue *q, int err);

/* Tests only: when set, every completion's result goes through it before
 * the backend interprets it, so that a test can make a disk fail (EIO,
 * ENOSPC, EOPNOTSUPP) without a failing disk. NULL in production. */
extern int (*blkq_test_result)(const struct blk_backend *be, enum blk_op op,
			       int res);

#endif
