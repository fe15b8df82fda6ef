/* The I/O thread of a virtio request queue whose requests go to a block
 * queue (virtio-blk, virtio-scsi): one loop for the guest's kicks, the
 * io_uring completions, the device's own wakeups and the spin before it
 * sleeps. The device supplies only its request handling (ops). */
#ifndef IOVM_VIRTIO_VQWORKER_H
#define IOVM_VIRTIO_VQWORKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "block/backend.h"
#include "virtio/qwake.h"

struct blk_queue;
struct virtio_dev;
struct virtq;
struct vqworker;

/* Whether the driver answers a completion within the thread's spin (see
 * vqworker.c); its own type so that its unit test can drive it. */
struct vq_answers {
	uint16_t hist;		/* last 16 answer spins: 1 = answered */
	unsigned int turns;	/* answer turns while it does not answer */
};

void vq_answers_init(struct vq_answers *a);
/* On a turn after completions were pushed: whether to spin for the
 * driver's answer (always while it answers, else every few turns). */
bool vq_answers_spin(struct vq_answers *a);
/* After such a spin that ran to its end or saw the answer. */
void vq_answers_record(struct vq_answers *a, bool answered);
/* Whether the driver answers within a spin, lately. */
bool vq_answers_ok(const struct vq_answers *a);

struct vqworker_ops {
	/* Pops one chain and starts its request. Called only while the
	 * device's pool has a free request (inflight < depth). Returns 1 when
	 * it took a chain, 0 when there is none to take, or virtq_pop's
	 * negative errno (the worker then marks the queue broken). */
	int (*pop)(struct vqworker *w);
	/* After a run of pops: whatever the device holds back for a batch
	 * (virtio-blk: the merge group being built). */
	void (*popped)(struct vqworker *w);
	/* Optional: sends what popped held back (virtio-blk: a merge group
	 * it keeps open while other requests are in flight, see blk.c), all
	 * of it or (all false) what it no longer wants to hold. Called with
	 * all false after every reap that returned events, and with all
	 * true once the thread stops, when the queue fails and after every
	 * pop on a failed queue. So popped may hold back requests only while
	 * others of the queue are in flight: their completions come through
	 * such reaps. */
	void (*release)(struct vqworker *w, bool all);
	/* Optional: work other threads post to the queue through the
	 * device's qwake, done after each reap and on a kick before popping
	 * (virtio-scsi: task management). */
	void (*scan)(struct vqworker *w);
	/* Optional: the thread is about to return, its requests all done. */
	void (*exit)(struct vqworker *w);
};

/* Embedded in the device's queue; the device reads vq, bq and the flags
 * from its callbacks and updates inflight and need_notify. */
struct vqworker {
	const struct vqworker_ops *ops;
	struct virtio_dev *dev;	/* its transport hears of a broken queue */
	const char *name;	/* the device, in messages */
	unsigned int index;	/* the queue, in messages */
	struct virtq *vq;
	struct blk_queue *bq;
	unsigned int depth;	/* requests in the device's pool */
	unsigned int inflight;	/* taken from the pool and not finished */
	/* how it spins before a sleep (blk_spin_of) */
	struct blk_spin spin;
	struct vq_answers answers;
	/* Whether a spin waiting on requests in flight (after new ones were
	 * popped, at low depth) sees a completion within it: a network disk
	 * whose round trip is longer than the spin never does (see
	 * vqworker.c). The same bookkeeping as answers. */
	struct vq_answers completes;
	bool answer_due;	/* the last turn pushed completions */
	pthread_t thread;
	bool running;
	bool stop;		/* written by the transport, read by the thread */
	bool broken;		/* the driver broke the ring: ignored until reset */
	bool need_notify;
	bool stalled;		/* pool empty: pop again on completion */
	bool polling;		/* kicks off: pop again on completion */
	bool kick_armed;
	struct qwake wake;	/* the device's wakeups, never the guest's kick fd */
	char thread_name[16];
};

/* One array of a device's request pool (requests, their iovecs, ...): p
 * holds per elements of elem bytes for each entry of the ring. The caller
 * puts its current pointer in p and takes the new one back from it (a
 * plain value, so no pointer is written through another type). */
struct vq_pool_array {
	void *p;
	size_t elem;
	size_t per;
};

/* (Re)allocates the n arrays, zeroed, for a ring of size entries, unless
 * *cur is size already (then they are kept as they are). On failure every
 * array is freed (p NULL), *cur is 0 and -ENOMEM returned. */
int vq_pool_alloc(struct vq_pool_array *a, unsigned int n,
		  unsigned int *cur, unsigned int size);

/* What the thread's last turn did: slept or spun with nothing to show,
 * popped new requests, or reaped completions. */
enum vq_activity { VQ_IDLE, VQ_POPPED, VQ_REAPED };

/* How long the thread spins on its next turn, after a turn that did last;
 * answer: the driver owes an answer to completions that turn pushed (see
 * vqworker.c). Updates the answer trackers' probe counts. */
uint64_t vqworker_spin_ns(struct vqworker *w, enum vq_activity last,
			  bool answer);

/* Once, when the device is created. spin: how the thread busy-polls
 * before it sleeps (its disks' poll-us= and kind, see blk_spin_of); a
 * spin of 0 ns: it never polls. */
void vqworker_init(struct vqworker *w, const struct vqworker_ops *ops,
		   struct virtio_dev *dev, const char *name,
		   const struct blk_spin *spin);

/* Prepares w to serve vq (its block queue, its wakeup, a fresh state);
 * the device's pool holds depth requests. Returns 0 or -errno. */
int vqworker_open(struct vqworker *w, unsigned int index, struct virtq *vq,
		  unsigned int depth);
/* Starts the thread of an open worker. On failure w stays open (the
 * caller undoes what it did meanwhile, then vqworker_close). Returns 0 or
 * -errno. */
int vqworker_run(struct vqworker *w, const char *thread_name);
void vqworker_close(struct vqworker *w);
/* If running: lets in-flight requests finish, joins the thread and closes
 * w. who names the queue in a warning. */
void vqworker_stop(struct vqworker *w, const char *who);

/* From the queue's thread: stops serving the ring until the device is
 * reset, and tells the transport the device needs a reset. */
void vqworker_mark_broken(struct vqworker *w, const char *why);
/* From the queue's thread: interrupts the driver if requests completed. */
void vqworker_notify(struct vqworker *w);

#endif
