/* The I/O thread shared by virtio-blk and virtio-scsi request queues: it
 * waits on the queue's kick eventfd and its io_uring completions in one
 * io_uring_enter, spins on both before it sleeps, and leaves the driver's
 * kicks off except right before sleeping. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block/backend.h"
#include "lib/iotrace.h"
#include "lib/log.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"
#include "virtio/vqworker.h"

static bool stopping(const struct vqworker *w)
{
	return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE);
}

void vqworker_mark_broken(struct vqworker *w, const char *why)
{
	if (w->broken)
		return;
	w->broken = true;
	pr_guest("%s queue %u: %s; device needs reset", w->name, w->index, why);
	if (w->dev->transport.needs_reset)
		w->dev->transport.needs_reset(w->dev);
}

void vqworker_notify(struct vqworker *w)
{
	if (w->need_notify) {
		w->need_notify = false;
		virtq_notify(w->vq);
	}
}

/* Pops and starts everything available, with the driver's kicks off: the
 * queue thread turns them back on only when it is about to sleep (see
 * may_sleep). A completion resumes popping when the pool ran empty. */
static void process_ring(struct vqworker *w)
{
	if (w->broken || stopping(w))
		return;
	w->stalled = false;
	virtq_disable_kicks(w->vq);
	while (w->inflight < w->depth) {
		int ret = w->ops->pop(w);

		if (!ret)
			break;
		if (ret < 0) {
			vqworker_mark_broken(w, ret == -ENOBUFS ?
					     "request with too many segments" :
					     "malformed descriptor chain");
			break;	/* still send what was popped */
		}
		if (w->broken)
			break;
	}
	if (!w->broken && w->inflight >= w->depth)
		w->stalled = true;
	w->polling = w->inflight >= VIRTQ_KICKS_OFF_INFLIGHT;
	w->ops->popped(w);
}

/* Before the thread sleeps: with requests in flight deep enough, or the
 * pool empty, a completion will wake it to pop again, and kicks stay off
 * (a kick is a costly exit for the guest). Otherwise kicks go back on,
 * and false means entries arrived meanwhile: pop them instead of sleeping. */
static bool may_sleep(struct vqworker *w)
{
	if (w->broken || w->stalled || w->polling || stopping(w))
		return true;
	return !virtq_enable_kicks(w->vq);
}

static void on_kick(void *tag, int res);

/* Drains a non-blocking eventfd. */
static void drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending, or another reader took it */
	}
}

static void on_wake(void *tag, int res)
{
	struct qwake *wk = tag;

	wk->armed = false;
	drain(wk->fd);
}

/* Watches the device's wakeup eventfd in the queue's io_uring (once; a
 * completion drains it and the next call watches again). */
static void arm_wake(struct vqworker *w)
{
	if (!w->wake.armed && blkq_poll(w->bq, w->wake.fd, on_wake, &w->wake) == 0)
		w->wake.armed = true;
}

static void arm_kick(struct vqworker *w)
{
	/* A broken queue keeps its watch (and ignores the ring) so the
	 * thread sleeps until the transport resets the device. */
	if (stopping(w) || w->kick_armed)
		return;
	if (blkq_poll(w->bq, w->vq->kick_fd, on_kick, w) == 0)
		w->kick_armed = true;
}

static void on_kick(void *tag, int res)
{
	struct vqworker *w = tag;

	w->kick_armed = false;
	if (stopping(w))
		return;
	drain(w->vq->kick_fd);	/* (taken by another reader: look anyway) */
	if (w->ops->scan)
		w->ops->scan(w);
	process_ring(w);
	arm_kick(w);
}

static bool avail_pending(void *arg)
{
	struct vqworker *w = arg;

	return virtq_avail_count(w->vq) != 0;
}

/* The thread busy-polls its io_uring and the avail ring, kicks off, for
 * up to ns: a request then costs the guest no notification exit and this
 * thread no wakeup (QEMU's iothreads poll the same way). Returns true when
 * it popped new requests. */
static bool spin_ring(struct vqworker *w, uint64_t ns)
{
	if (w->broken || w->stalled) {
		blkq_spin(w->bq, ns, NULL, NULL);
		return false;
	}
	virtq_disable_kicks(w->vq);
	blkq_spin(w->bq, ns, avail_pending, w);
	if (!avail_pending(w))
		return false;
	process_ring(w);
	return true;
}

/* Whether the driver answers. Spinning pays when the driver is waiting on
 * this thread: it sees a completion and sends its next request within the
 * spin (a QD1 job, a deep one refilling at once). A driver that first
 * works on the data it got answers later: the probe checks each 64 KiB it
 * reads (~30 us under PVM) before refilling, and then a spin after each
 * completion runs out almost every time, burning the CPU for nothing
 * (64k sequential reads used several times the VMM CPU of never polling,
 * at the same throughput: bench/RESULTS.md). So the spin on a turn after completions were pushed, at low
 * depth, records whether the driver answered within it (one that a
 * completion ends first tells nothing). While fewer than ANSWERS_MIN of
 * the last 16 did, the thread does not spin at all (it sleeps at once, as
 * with poll-us=0), except on every ANSWER_PROBE-th such turn, whose spin
 * tells when the driver answers again. */
#define ANSWERS_MIN 8
#define ANSWER_PROBE 8

void vq_answers_init(struct vq_answers *a)
{
	a->hist = 0xffff;	/* until the driver shows otherwise */
	a->turns = 0;
}

bool vq_answers_ok(const struct vq_answers *a)
{
	return __builtin_popcount(a->hist) >= ANSWERS_MIN;
}

bool vq_answers_spin(struct vq_answers *a)
{
	if (vq_answers_ok(a))
		return true;
	return ++a->turns % ANSWER_PROBE == 0;
}

void vq_answers_record(struct vq_answers *a, bool answered)
{
	a->hist = (uint16_t)(a->hist << 1 | answered);
}

static bool low_depth(const struct vqworker *w)
{
	return w->inflight <= BLKQ_SPIN_MAX_INFLIGHT ||
	       w->inflight < VIRTQ_KICKS_OFF_INFLIGHT;
}

/* The same for completions: a spin right after new requests went out, at
 * low depth, pays when the disk answers within it (a local file or device:
 * tens of microseconds). A network disk whose round trip is several times
 * the spin (RBD: ~250 us for a 4k read here) never completes within it,
 * and the spin only takes a CPU from the servers and threads that would
 * complete the request (measured: bench/RESULTS.md, the RBD QD1 rows). So
 * those spins record whether a completion (or a new request) ended them;
 * while fewer than ANSWERS_MIN of the last 16 did, the thread sleeps at
 * once after popping, spinning on every ANSWER_PROBE-th such turn only.
 * A network disk's (blk_spin_of: spin.completions false unless its
 * poll-us= is given) are not spun for at all: even one whose round trip
 * fits in the spin (nbdkit on this machine: ~40 us) would keep the thread
 * busy for all of it, and its answer spin waits at most spin.answer_ns
 * (10 us), so that a driver slower to answer than a kick and a wakeup cost
 * is not spun for either (the same tracker then stops those spins). */

/* How long to spin before sleeping: at low depth a sleep and a wakeup per
 * request cost more than the I/O, so wait there for the completion or the
 * next request (and at any depth where sleeping turns kicks back on: a
 * kick costs the guest an exit); deeper, right after completions, wait
 * briefly for the driver to see them and refill the ring (its kicks are
 * off, and a request left in the ring would wait for the next completion);
 * right after new requests only, wait less: a driver's refill comes in a
 * burst. None of this while the driver does not answer (see above). */
uint64_t vqworker_spin_ns(struct vqworker *w, enum vq_activity last,
			  bool answer)
{
	uint64_t ns;

	if (!vq_answers_ok(&w->answers))
		return answer && vq_answers_spin(&w->answers) ? w->spin.answer_ns : 0;
	if (low_depth(w) && !answer && last == VQ_POPPED && w->inflight)
		return w->spin.completions &&
		       vq_answers_spin(&w->completes) ? w->spin.ns : 0;
	if (low_depth(w))
		return answer ? w->spin.answer_ns : w->spin.ns;
	ns = last == VQ_REAPED ? BLKQ_SPIN_REFILL_NS :
	     last == VQ_POPPED ? BLKQ_SPIN_BURST_NS : 0;
	return ns < w->spin.ns ? ns : w->spin.ns;
}

/* The queue's io_uring failed: the thread cannot wait on it any more.
 * Every request in flight completes (with its real result where the
 * kernel still gives one, else an error status) and the device asks for a
 * reset; the thread then goes on in serve_failed. The guest sees errors,
 * never a hang, and a TMF waiting on these requests gets its answer. */
static void queue_failed(struct vqworker *w, int err)
{
	pr_err("%s queue %u: io_uring: %s; failing its %u requests in flight and all later ones until the device is reset",
	       w->name, w->index, strerror(-err), w->inflight);
	if (w->dev->transport.needs_reset)
		w->dev->transport.needs_reset(w->dev);
	blkq_abort(w->bq, -EIO);
	/* after the abort: what was held fails at once on the dead queue
	 * instead of reaching a disk the guest was told it did not */
	if (w->ops->release)
		w->ops->release(w, true);
	if (w->inflight)
		pr_err("%s queue %u: %u requests still in flight after failing the queue",
		       w->name, w->index, w->inflight);
}

/* After queue_failed, until the device is reset (the transport stops the
 * thread): the ring is sound, only the io_uring is gone. The thread waits
 * for the driver's kicks and the device's wakeups with poll(2), and every
 * request it pops fails at once (the dead block queue refuses every
 * submission, and the device completes the request with an error status),
 * so a driver that ignores DEVICE_NEEDS_RESET (Linux's virtio-blk and
 * virtio-scsi do; a vhost-user front-end is never told) gets errors, not
 * a hang. A queue broken by its driver is not touched: the thread only
 * waits for the stop. */
static void serve_failed(struct vqworker *w)
{
	struct pollfd p[2] = {
		{ .fd = w->broken ? -1 : w->vq->kick_fd, .events = POLLIN },
		{ .fd = w->wake.fd, .events = POLLIN },
	};

	while (!stopping(w)) {
		if (w->ops->scan)
			w->ops->scan(w);
		if (!w->broken) {
			process_ring(w);
			/* (nothing is held here: no reap would send it) */
			if (w->ops->release)
				w->ops->release(w, true);
			vqworker_notify(w);
			/* kicks on; true: entries arrived meanwhile (not
			 * worth a look while the pool is still empty, which
			 * a request that never ends would keep so: sleep) */
			if (!w->broken && virtq_enable_kicks(w->vq) &&
			    w->inflight < w->depth)
				continue;
			if (w->broken)
				p[0].fd = -1;
		}
		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			/* (ENOMEM: look again a little later) */
			pr_err_rated("%s queue %u: poll: %s", w->name, w->index,
				     strerror(errno));
			usleep(10000);
			continue;
		}
		if (p[0].fd >= 0 && (p[0].revents & POLLIN))
			drain(p[0].fd);
		if (p[1].revents & POLLIN)
			drain(p[1].fd);
	}
}

static void *queue_thread(void *arg)
{
	struct vqworker *w = arg;

	pthread_setname_np(pthread_self(), w->thread_name);
	iotrace_thread_start(w->thread_name, w->index);
	process_ring(w);
	arm_kick(w);
	blkq_submit(w->bq);
	for (enum vq_activity last = VQ_IDLE;;) {
		bool stop = stopping(w);
		bool busy, ready, answer;
		uint64_t ns;
		int ret;

		if (stop && !w->inflight)
			break;
		if (stop && w->ops->release)
			w->ops->release(w, true);
		if (stop)	/* a drain does not wait for I/O limits */
			blkq_unthrottle(w->bq);
		if (!stop && !w->kick_armed && !w->inflight)
			arm_kick(w);	/* stalled or failed to arm */
		arm_wake(w);
		/* (the driver owes an answer to what the last turn pushed) */
		answer = !stop && w->answer_due && low_depth(w);
		ns = stop ? 0 : vqworker_spin_ns(w, last, answer);
		busy = ns && spin_ring(w, ns);
		/* A thread that never spins (poll-us=0) sends what it queued
		 * with its sleep, in one io_uring_enter instead of two. */
		ready = !busy && (w->spin.ns ? blkq_spin(w->bq, 0, NULL, NULL) :
				  blkq_ready(w->bq));
		/* (a spin that a completion ended before the driver answered
		 * tells nothing) */
		if (answer && ns && ns == w->spin.answer_ns && !ready)
			vq_answers_record(&w->answers, busy);
		else if (!answer && last == VQ_POPPED && ns && ns == w->spin.ns)
			vq_answers_record(&w->completes, busy || ready);
		/* (kicks stay off if a completion ended the spin) */
		if (!busy && !ready && !may_sleep(w)) {
			process_ring(w);
			busy = true;
		}
		/* After a pop, reap without sleeping and spin again on what
		 * was just started. A sleep may end with kicks on: off again
		 * before the completions are pushed, or a driver that sees one
		 * may answer with a new request and a kick at once. */
		ret = busy ? 0 : blkq_wait(w->bq);
		if (!ret && !busy && !w->broken)
			virtq_disable_kicks(w->vq);
		if (!ret)
			ret = blkq_reap(w->bq, false);
		last = ret > 0 ? VQ_REAPED : busy ? VQ_POPPED : VQ_IDLE;
		if (ret > 0 && w->ops->release)
			w->ops->release(w, false);
		if (ret < 0) {
			queue_failed(w, ret);
			serve_failed(w);
			if (w->ops->release)	/* (stopped before its first turn) */
				w->ops->release(w, true);
			break;
		}
		if (w->ops->scan)
			w->ops->scan(w);
		if ((w->stalled && w->inflight < w->depth) || w->polling)
			process_ring(w);
		w->answer_due = w->need_notify;
		vqworker_notify(w);
	}
	vqworker_notify(w);
	/* Whoever takes the ring over next (vhost-user front end, a new
	 * queue_start) finds the driver's kicks on. */
	if (!w->broken)
		virtq_enable_kicks(w->vq);
	if (w->ops->exit)
		w->ops->exit(w);
	iotrace_thread_end();
	return NULL;
}

int vq_pool_alloc(struct vq_pool_array *a, unsigned int n,
		  unsigned int *cur, unsigned int size)
{
	bool ok = true;

	if (*cur == size)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		free(a[i].p);
		a[i].p = calloc((size_t)size * a[i].per, a[i].elem);
		ok = ok && a[i].p;
	}
	*cur = ok ? size : 0;
	if (ok)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		free(a[i].p);
		a[i].p = NULL;
	}
	return -ENOMEM;
}

void vqworker_init(struct vqworker *w, const struct vqworker_ops *ops,
		   struct virtio_dev *dev, const char *name,
		   const struct blk_spin *spin)
{
	w->spin = *spin;
	w->ops = ops;
	w->dev = dev;
	w->name = name;
	w->wake.fd = -1;
}

int vqworker_open(struct vqworker *w, unsigned int index, struct virtq *vq,
		  unsigned int depth)
{
	int ret;

	w->bq = blkq_create(vq->size);
	if (!w->bq)
		return -ENOMEM;
	blkq_set_index(w->bq, index);
	w->index = index;
	w->vq = vq;
	w->depth = depth;
	w->stop = w->broken = false;
	w->need_notify = w->stalled = false;
	w->polling = false;
	w->kick_armed = false;
	w->inflight = 0;
	vq_answers_init(&w->answers);
	vq_answers_init(&w->completes);
	w->answer_due = false;
	ret = qwake_open(&w->wake);
	if (ret) {
		blkq_destroy(w->bq);
		w->bq = NULL;
	}
	return ret;
}

int vqworker_run(struct vqworker *w, const char *thread_name)
{
	int ret;

	snprintf(w->thread_name, sizeof(w->thread_name), "%s", thread_name);
	ret = pthread_create(&w->thread, NULL, queue_thread, w);
	if (ret)
		return -ret;
	w->running = true;
	return 0;
}

void vqworker_close(struct vqworker *w)
{
	qwake_close(&w->wake);
	blkq_destroy(w->bq);
	w->bq = NULL;
}

void vqworker_stop(struct vqworker *w, const char *who)
{
	if (!w->running)
		return;
	__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE);
	qwake_signal(&w->wake, who);
	pthread_join(w->thread, NULL);
	vqworker_close(w);
	w->running = false;
}
