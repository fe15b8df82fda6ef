/* The network drivers' side of the block queue (block/driver.h): a context
 * per (queue, backend), watches and timers on the queue's io_uring, and the
 * mailbox that takes completions from other threads. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "block/queue_int.h"

void drvq_init(struct blk_queue *q)
{
	inbox_init(&q->mailbox, SLOT_MAILBOX);
}

int drvq_arm_mailbox(struct blk_queue *q)
{
	return inbox_arm(q, &q->mailbox, q->drv_inflight);
}

static struct blk_slot *dreq_slot(struct blk_dreq *r)
{
	return (struct blk_slot *)((char *)r - offsetof(struct blk_slot, dreq));
}

/* r is back from its driver: the counts drop on the owner's thread. */
static void dreq_back(struct blk_queue *q, struct blk_slot *s)
{
	s->dreq.att->inflight--;
	q->drv_inflight--;
}

void blkq_dreq_done(struct blk_dreq *r, int res)
{
	struct blk_slot *s = dreq_slot(r);
	struct blk_queue *q = r->att->q;

	dreq_back(q, s);
	if (s->orphan)
		return;		/* failed by blkq_abort already */
	queue_defer(q, s, res);
}

void blkq_dreq_done_remote(struct blk_dreq *r, int res)
{
	inbox_post(&r->att->q->mailbox, dreq_slot(r), res);
}

/* The mailbox's eventfd fired (or blkq_destroy drains it). */
void drvq_reap_mailbox(struct blk_queue *q)
{
	struct blk_slot *s = inbox_take(&q->mailbox), *next;

	for (; s; s = next) {
		next = s->next;
		dreq_back(q, s);
		if (!s->orphan)
			queue_finish(q, s, s->res);
	}
	drvq_arm_mailbox(q);
}

/* The context of be on q, made on first use. */
static struct blk_att *att_get(struct blk_queue *q, struct blk_backend *be,
			       int *err)
{
	struct blk_att *a, **atts;
	struct blk_slot *w;
	int ret;

	for (unsigned int i = 0; i < q->natts; i++)
		if (q->atts[i]->be == be)
			return q->atts[i];
	ret = inbox_open(&q->mailbox);
	if (ret) {
		*err = ret;
		return NULL;
	}
	atts = realloc(q->atts, (q->natts + 1) * sizeof(*atts));
	a = calloc(1, sizeof(*a));
	w = calloc(BLK_ATT_WATCHES, sizeof(*w));
	if (atts)
		q->atts = atts;
	if (!atts || !a || !w) {
		free(a);
		free(w);
		*err = -ENOMEM;
		return NULL;
	}
	a->q = q;
	a->be = be;
	for (unsigned int i = 0; i < BLK_ATT_WATCHES; i++) {
		w[i].op = SLOT_DWATCH;
		w[i].att = a;
		w[i].widx = i;
		a->slot[i] = &w[i];
	}
	ret = be->drv->attach(a);
	if (ret) {
		free(w);
		free(a);
		*err = ret;
		return NULL;
	}
	q->atts[q->natts++] = a;
	return a;
}

int drvq_start(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	       const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	       uint64_t len, unsigned int nreq, blk_done_fn done, void *tag)
{
	struct blk_att *att;
	struct blk_slot *s;
	int ret = 0;

	att = att_get(q, be, &ret);
	if (!att)
		return ret;
	s = queue_slot_start(q, op, be, offset, len, done, tag);
	if (!s)
		return -EAGAIN;
	s->nreq = nreq;
	s->drv = true;
	s->orphan = false;
	s->dreq = (struct blk_dreq){ .op = op, .iov = iov, .iovcnt = iovcnt,
				     .offset = offset, .len = len, .att = att };
	/* Counted before submit: a driver may complete it inside. */
	att->inflight++;
	q->drv_inflight++;
	ret = be->drv->submit(att, &s->dreq);
	if (ret) {
		att->inflight--;
		q->drv_inflight--;
		queue_slot_put(q, s);
		return ret;
	}
	/* If the ring is full now, blkq_submit and blkq_wait retry. */
	drvq_arm_mailbox(q);
	return 0;
}

/* The SQE that arms watch or timer idx of att, for the caller to prepare
 * and pass to arm_end; NULL with the error in *err. */
static struct io_uring_sqe *arm_start(struct blk_att *att, unsigned int idx,
				      int *err)
{
	struct io_uring_sqe *sqe = NULL;

	if (idx >= BLK_ATT_WATCHES)
		*err = -EINVAL;
	else if (blkq_armed(att, idx))
		*err = -EBUSY;
	else if (att->q->dead)
		*err = -EIO;
	else if (!(sqe = queue_sqe(att->q)))
		*err = -EBUSY;
	return sqe;
}

static int arm_end(struct blk_att *att, unsigned int idx,
		   struct io_uring_sqe *sqe)
{
	io_uring_sqe_set_data(sqe, att->slot[idx]);
	att->armed |= 1u << idx;
	att->q->dwatches++;
	return 0;
}

int blkq_watch(struct blk_att *att, unsigned int idx, int fd,
	       unsigned int events)
{
	int err;
	struct io_uring_sqe *sqe = arm_start(att, idx, &err);

	if (!sqe)
		return err;
	io_uring_prep_poll_add(sqe, fd, events);
	return arm_end(att, idx, sqe);
}

int blkq_timer(struct blk_att *att, unsigned int idx, uint64_t ns)
{
	int err;
	struct io_uring_sqe *sqe = arm_start(att, idx, &err);
	struct blk_slot *w;

	if (!sqe)
		return err;
	w = att->slot[idx];
	w->ts.tv_sec = (long long)(ns / 1000000000u);
	w->ts.tv_nsec = (long long)(ns % 1000000000u);
	io_uring_prep_timeout(sqe, &w->ts, 0, 0);
	return arm_end(att, idx, sqe);
}

int blkq_disarm(struct blk_att *att, unsigned int idx)
{
	struct blk_slot *w;
	struct io_uring_sqe *sqe;

	if (idx >= BLK_ATT_WATCHES)
		return -EINVAL;
	if (!blkq_armed(att, idx))
		return 0;
	sqe = queue_sqe(att->q);
	if (!sqe)
		return -EBUSY;
	w = att->slot[idx];
	/* Cancels a poll or a timeout alike; its own completion carries
	 * no slot and is skipped. */
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)w, 0);
	io_uring_sqe_set_data(sqe, NULL);
	return 0;
}

/* A watch or timer of a driver context completed. */
void drvq_watch_done(struct blk_queue *q, struct blk_slot *w, int res)
{
	struct blk_att *att = w->att;

	att->armed &= ~(1u << w->widx);
	q->dwatches--;
	if (res == -ETIME)
		res = 0;	/* a timer expired */
	if (!q->closing)
		att->be->drv->event(att, w->widx, res);
}

/* blkq_destroy: every context's driver lets go of its requests, then the
 * watches are cancelled and their answers taken, while the ring works. */
void drvq_detach_all(struct blk_queue *q)
{
	q->closing = true;
	for (unsigned int i = 0; i < q->natts; i++)
		q->atts[i]->be->drv->detach(q->atts[i]);
	for (unsigned int i = 0; i < q->natts; i++)
		for (unsigned int j = 0; j < BLK_ATT_WATCHES; j++)
			blkq_disarm(q->atts[i], j);
	while (q->dwatches && !q->dead)
		if (blkq_reap(q, true) < 0)
			break;
	if (q->mailbox.efd >= 0)
		drvq_reap_mailbox(q);	/* late completions of orphans */
	for (unsigned int i = 0; i < q->natts; i++) {
		free(q->atts[i]->slot[0]);
		free(q->atts[i]);
	}
	free(q->atts);
	q->atts = NULL;
	q->natts = 0;
	inbox_close(&q->mailbox);
}
