/* I/O limits on the block queue: a disk's token buckets (throttle.c),
 * shared by its queues under a lock, and each queue's FIFO of the requests
 * that found no tokens, released by the queue thread's own io_uring
 * timeout, or at once when the limits change (an eventfd the ring watches
 * while requests are held). Nothing here sleeps. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "block/queue_int.h"
#include "block/throttle.h"
#include "lib/clock.h"

#define NS 1000000000ull

uint64_t (*blk_thr_test_now)(void);

/* A disk's limits (be->thr), made by the first blk_set_limits that sets
 * one and kept until blk_close, so that a queue thread that loaded the
 * pointer never sees it go. */
struct blk_thr {
	pthread_mutex_t lock;
	struct throttle t;		/* under lock */
	struct disk_limits lim;		/* under lock: as set */
	bool on;			/* any limit (atomic) */
	unsigned int held;		/* requests held now (atomic) */
	struct thr_ctx *ctxs;		/* under lock: queues that use it */
};

/* A disk with limits on one queue: its held requests, oldest first. */
struct thr_ctx {
	struct blk_backend *be;
	struct thr_queue *tq;
	struct blk_slot *head, **tail;
	struct thr_ctx *next;		/* in the disk's ctxs */
};

/* A queue's side: its disks with limits, one timer for the earliest
 * release any of them waits for, and the wakeup for new limits. */
struct thr_queue {
	struct thr_ctx **ctx;
	unsigned int nctx;
	unsigned int held;
	int efd;			/* written by blk_set_limits */
	struct blk_slot timer, wake;	/* SLOT_THR; timer.ts is its time */
	bool timer_armed, wake_armed;
	uint64_t deadline;		/* of the armed timer */
	bool want;			/* a timer is due at want_at */
	uint64_t want_at;
	struct __kernel_timespec upd_ts;	/* a timeout update's time */
};

static uint64_t thr_now(void)
{
	uint64_t (*f)(void) = blk_thr_test_now;

	return f ? f() : mono_ns();
}

static enum thr_dir op_dir(int op)
{
	switch (op) {
	case BLK_OP_READ:
		return THR_READ;
	case BLK_OP_WRITE:
	case BLK_OP_WRITE_ZEROES:
	case BLK_OP_ZERO_UNMAP:
	case BLK_OP_DISCARD:
		return THR_WRITE;
	default:
		return THR_OTHER;
	}
}

/* A discard moves no data: one operation, no bytes. */
static uint64_t op_bytes(int op, uint64_t len)
{
	return op == BLK_OP_DISCARD ? 0 : len;
}

/* ---- the disk's side ---- */

int thr_disk_open(struct blk_backend *be, const struct disk_limits *l)
{
	return disk_limits_any(l) ? blk_set_limits(be, l) : 0;
}

void thr_disk_close(struct blk_backend *be)
{
	struct blk_thr *th = be->thr;

	if (!th)
		return;
	pthread_mutex_destroy(&th->lock);
	free(th);
	be->thr = NULL;
}

int blk_set_limits(struct blk_backend *be, const struct disk_limits *l)
{
	struct blk_thr *th = __atomic_load_n(&be->thr, __ATOMIC_ACQUIRE);
	struct blk_thr *fresh = NULL;
	uint64_t one = 1;

	if (!th) {
		if (!disk_limits_any(l))
			return 0;	/* no limits, and none asked for */
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh)
			return -ENOMEM;
		pthread_mutex_init(&fresh->lock, NULL);
		/* Filled before it is published: a queue that sees the
		 * pointer sees the limits. */
		fresh->lim = *l;
		throttle_set(&fresh->t, l, thr_now());
		fresh->on = true;
		if (__atomic_compare_exchange_n(&be->thr, &th, fresh, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return 0;
		/* Another caller made it first: apply l to that one. */
		pthread_mutex_destroy(&fresh->lock);
		free(fresh);
	}
	pthread_mutex_lock(&th->lock);
	th->lim = *l;
	throttle_set(&th->t, l, thr_now());
	__atomic_store_n(&th->on, throttle_on(&th->t), __ATOMIC_RELEASE);
	/* Every queue that has used the disk looks again: held requests
	 * may pass now, or sooner than its timer says. */
	for (struct thr_ctx *c = th->ctxs; c; c = c->next)
		if (write(c->tq->efd, &one, sizeof(one)) < 0) {
			/* saturated: the queue has a wakeup pending anyway */
		}
	pthread_mutex_unlock(&th->lock);
	return 0;
}

void blk_get_limits(struct blk_backend *be, struct disk_limits *l,
		    unsigned int *held)
{
	struct blk_thr *th = __atomic_load_n(&be->thr, __ATOMIC_ACQUIRE);

	if (!th) {
		memset(l, 0, sizeof(*l));
		if (held)
			*held = 0;
		return;
	}
	pthread_mutex_lock(&th->lock);
	*l = th->lim;
	pthread_mutex_unlock(&th->lock);
	if (held)
		*held = __atomic_load_n(&th->held, __ATOMIC_RELAXED);
}

/* ---- the queue's side (its own thread only) ---- */

static struct thr_queue *tq_get(struct blk_queue *q, int *err)
{
	struct thr_queue *tq = q->thr;

	if (tq)
		return tq;
	tq = calloc(1, sizeof(*tq));
	if (!tq) {
		*err = -ENOMEM;
		return NULL;
	}
	tq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tq->efd < 0) {
		*err = -errno;
		free(tq);
		return NULL;
	}
	tq->timer.op = tq->wake.op = SLOT_THR;
	q->thr = tq;
	return tq;
}

/* The context of be (which has limits) on q, made on first use. */
static struct thr_ctx *ctx_get(struct blk_queue *q, struct blk_backend *be,
			       int *err)
{
	struct thr_queue *tq = tq_get(q, err);
	struct blk_thr *th = be->thr;
	struct thr_ctx *c, **ctx;

	if (!tq)
		return NULL;
	for (unsigned int i = 0; i < tq->nctx; i++)
		if (tq->ctx[i]->be == be)
			return tq->ctx[i];
	ctx = realloc(tq->ctx, (tq->nctx + 1) * sizeof(*ctx));
	if (ctx)
		tq->ctx = ctx;
	c = ctx ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->be = be;
	c->tq = tq;
	c->tail = &c->head;
	pthread_mutex_lock(&th->lock);
	c->next = th->ctxs;
	th->ctxs = c;
	pthread_mutex_unlock(&th->lock);
	tq->ctx[tq->nctx++] = c;
	return c;
}

static void want_timer(struct thr_queue *tq, uint64_t now, uint64_t wait)
{
	uint64_t at = wait > UINT64_MAX - now ? UINT64_MAX : now + wait;

	if (!tq->want || at < tq->want_at)
		tq->want_at = at;
	tq->want = true;
}

void thr_arm(struct blk_queue *q)
{
	struct thr_queue *tq = q->thr;
	struct __kernel_timespec *ts;
	struct io_uring_sqe *sqe;
	uint64_t now, rel;

	if (!tq || !tq->held || q->dead)
		return;
	if (!tq->wake_armed) {
		sqe = queue_sqe(q);
		if (!sqe)
			return;		/* again from blkq_submit, blkq_wait */
		io_uring_prep_poll_add(sqe, tq->efd, POLLIN);
		io_uring_sqe_set_data(sqe, &tq->wake);
		tq->wake_armed = true;
	}
	if (!tq->want)
		return;
	if (tq->timer_armed && tq->deadline <= tq->want_at) {
		tq->want = false;	/* it fires first; its turn re-arms */
		return;
	}
	sqe = queue_sqe(q);
	if (!sqe)
		return;
	now = thr_now();
	rel = tq->want_at > now ? tq->want_at - now : 1;
	ts = tq->timer_armed ? &tq->upd_ts : &tq->timer.ts;
	ts->tv_sec = (long long)(rel / NS);
	ts->tv_nsec = (long long)(rel % NS);
	if (tq->timer_armed) {
		/* Sooner than the armed one (limits raised): moved. If it has
		 * just fired, the update fails and that completion re-arms. */
		io_uring_prep_timeout_update(sqe, ts, (__u64)(uintptr_t)&tq->timer, 0);
		io_uring_sqe_set_data(sqe, NULL);
	} else {
		io_uring_prep_timeout(sqe, ts, 0, 0);
		io_uring_sqe_set_data(sqe, &tq->timer);
		tq->timer_armed = true;
	}
	tq->deadline = tq->want_at;
	tq->want = false;
}

static void held_add(struct thr_queue *tq, struct thr_ctx *c,
		     struct blk_slot *s)
{
	s->next = NULL;
	*c->tail = s;
	c->tail = &s->next;
	tq->held++;
	__atomic_add_fetch(&c->be->thr->held, 1, __ATOMIC_RELAXED);
}

static void held_drop(struct thr_queue *tq, struct blk_slot *s)
{
	tq->held--;
	__atomic_sub_fetch(&s->be->thr->held, 1, __ATOMIC_RELAXED);
}

int thr_gate(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	     const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	     uint64_t len, unsigned int nreq, blk_done_fn done, void *tag)
{
	struct blk_thr *th = be->thr;
	struct thr_ctx *c;
	struct blk_slot *s;
	uint64_t now = 0, wait = 0;
	int err = 0;

	/* Limits lifted, or a request that draws nothing (a flush), and
	 * nothing held here: straight on. */
	if (!(q->thr && q->thr->held) &&
	    (op_dir(op) == THR_OTHER || !__atomic_load_n(&th->on, __ATOMIC_ACQUIRE)))
		return 1;
	c = ctx_get(q, be, &err);
	if (!c)
		return err;
	/* Behind a held request of this queue it waits its turn, whatever
	 * the buckets hold. */
	if (!c->head) {
		now = thr_now();
		pthread_mutex_lock(&th->lock);
		wait = throttle_take(&th->t, op_dir(op), op_bytes(op, len), now);
		pthread_mutex_unlock(&th->lock);
		if (!wait)
			return 1;
	}
	s = queue_slot_start(q, op, be, offset, len, done, tag);
	if (!s)
		return -EAGAIN;
	s->iov = iov;
	s->iovcnt = iovcnt;
	s->nreq = nreq;		/* a merged group stays one, counted as many */
	held_add(q->thr, c, s);
	if (wait)
		want_timer(q->thr, now, wait);
	thr_arm(q);
	return 0;
}

/* A held request whose tokens are taken goes through blkq_* as if it
 * came now (nothing of it reached the kernel yet); an error it meets
 * there comes back through its done, from the next reap. */
static void held_start(struct blk_queue *q, struct blk_slot *s)
{
	struct blk_backend *be = s->be;
	const struct iovec *iov = s->iov;
	unsigned int iovcnt = s->iovcnt;
	uint64_t offset = s->offset, len = s->len;
	blk_done_fn done = s->done;
	void *tag = s->tag;
	unsigned int nreq = s->nreq;
	int op = s->op, ret;

	held_drop(q->thr, s);
	/* its statistics keep the time it arrived (file.c: stats_start) */
	q->thr_t0 = s->st ? s->t0 : 0;
	queue_slot_put(q, s);	/* the slot it takes again */
	q->thr_passing = true;
	if (op == BLK_OP_READ || op == BLK_OP_WRITE)
		ret = blkq_rw_merged(q, be, op, iov, iovcnt, offset, nreq, done, tag);
	else if (op == BLK_OP_FLUSH)
		ret = blkq_flush(q, be, done, tag);
	else
		ret = blkq_discard(q, be, op, offset, len, done, tag);
	q->thr_passing = false;
	q->thr_t0 = 0;
	if (!ret)
		return;
	s = queue_slot_start(q, op, be, offset, len, done, tag);
	if (s)
		queue_defer(q, s, ret);
	else
		done(tag, ret);	/* cannot be: the slot just freed */
}

/* Starts, in order, the held requests whose tokens are there now; the
 * timer is wanted for the first that must still wait. */
static void release(struct blk_queue *q)
{
	struct thr_queue *tq = q->thr;
	uint64_t now = thr_now();

	/* (by index: a request started may add a context) */
	for (unsigned int i = 0; i < tq->nctx; i++) {
		struct thr_ctx *c = tq->ctx[i];
		struct blk_thr *th = c->be->thr;
		struct blk_slot *go = NULL, **go_tail = &go, *s;
		uint64_t wait = 0;

		if (!c->head)
			continue;
		pthread_mutex_lock(&th->lock);
		while ((s = c->head)) {
			if (!q->thr_off)
				wait = throttle_take(&th->t, op_dir(s->op),
						     op_bytes(s->op, s->len), now);
			if (wait)
				break;
			c->head = s->next;
			s->next = NULL;
			*go_tail = s;
			go_tail = &s->next;
		}
		if (!c->head)
			c->tail = &c->head;
		pthread_mutex_unlock(&th->lock);
		if (wait)
			want_timer(tq, now, wait);
		while ((s = go)) {
			go = s->next;
			held_start(q, s);
		}
	}
	thr_arm(q);
}

void blkq_unthrottle(struct blk_queue *q)
{
	q->thr_off = true;
	if (q->thr && q->thr->held && !q->dead)
		release(q);
}

void thr_event(struct blk_queue *q, struct blk_slot *s, int res)
{
	struct thr_queue *tq = q->thr;
	uint64_t v;

	(void)res;	/* -ETIME, a poll mask, or -ECANCELED by blkq_abort */
	if (s == &tq->timer) {
		tq->timer_armed = false;
	} else {
		tq->wake_armed = false;
		if (read(tq->efd, &v, sizeof(v)) < 0) {
			/* EAGAIN: drained by an earlier turn */
		}
	}
	if (!q->dead)
		release(q);
}

void thr_fail(struct blk_queue *q, int err)
{
	struct thr_queue *tq = q->thr;

	if (!tq)
		return;
	/* (by index, and the head read again each time: a callback may
	 * queue more) */
	for (unsigned int i = 0; i < tq->nctx; i++) {
		struct thr_ctx *c = tq->ctx[i];
		struct blk_slot *s;

		while ((s = c->head)) {
			c->head = s->next;
			if (!c->head)
				c->tail = &c->head;
			held_drop(tq, s);
			queue_finish(q, s, err);
		}
	}
}

void thr_queue_free(struct blk_queue *q)
{
	struct thr_queue *tq = q->thr;

	if (!tq)
		return;
	/* Off the disks' lists before the eventfd they write is closed. */
	for (unsigned int i = 0; i < tq->nctx; i++) {
		struct thr_ctx *c = tq->ctx[i], **pp;
		struct blk_thr *th = c->be->thr;

		pthread_mutex_lock(&th->lock);
		for (pp = &th->ctxs; *pp && *pp != c; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = c->next;
		pthread_mutex_unlock(&th->lock);
		free(c);
	}
	free(tq->ctx);
	close(tq->efd);
	free(tq);
	q->thr = NULL;
}
