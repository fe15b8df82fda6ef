/* Test double for the blkq_* half of block/backend.h (see fake_blkq.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fake_blkq.h"

#define FAKE_MAX 1024

struct fake_op {
	enum blk_op op;
	struct blk_backend *be;
	const struct iovec *iov;
	unsigned int iovcnt;
	uint64_t offset;
	blk_done_fn done;
	void *tag;
};

struct blk_queue {
	struct fake_op ops[FAKE_MAX];
	unsigned int n;
	unsigned int depth;
};

static enum fake_order order = FAKE_FIFO;
static struct fake_stats stats;
static struct blk_queue *last_q;
static int fail_next;
static unsigned int release_newest;

void fake_blkq_release_newest(void)
{
	release_newest++;
}

void fake_blkq_fail_next(int err)
{
	fail_next = err;
}

void fake_blkq_order(enum fake_order o)
{
	order = o;
}

unsigned int fake_blkq_pending(void)
{
	return last_q ? last_q->n : 0;
}

struct fake_stats *fake_blkq_stats(void)
{
	return &stats;
}

void fake_blkq_reset_stats(void)
{
	memset(&stats, 0, sizeof(stats));
}

struct blk_queue *blkq_create(unsigned int depth)
{
	struct blk_queue *q = calloc(1, sizeof(*q));

	if (q)
		q->depth = depth < FAKE_MAX ? depth : FAKE_MAX;
	last_q = q;
	return q;
}

void blkq_destroy(struct blk_queue *q)
{
	if (last_q == q)
		last_q = NULL;
	free(q);
}

int blkq_event_fd(struct blk_queue *q)
{
	return -ENOSYS;
}

static int push(struct blk_queue *q, const struct fake_op *op)
{
	if (q->n >= q->depth)
		return -EAGAIN;
	q->ops[q->n++] = *op;
	if (q->n > stats.max_inflight)
		stats.max_inflight = q->n;
	return 0;
}

int blkq_rw(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	    const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	    blk_done_fn done, void *tag)
{
	struct fake_op o = { op, be, iov, iovcnt, offset, done, tag };
	uint64_t len = 0;

	if (op != BLK_OP_READ && op != BLK_OP_WRITE)
		return -EINVAL;
	if (fail_next) {
		int err = fail_next;

		fail_next = 0;
		return err;
	}
	for (unsigned int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (offset > be->size || len > be->size - offset)
		return -EINVAL;
	stats.submitted++;
	if (iovcnt > stats.max_iovcnt)
		stats.max_iovcnt = iovcnt;
	if (op == BLK_OP_READ)
		stats.reads++;
	else
		stats.writes++;
	return push(q, &o);
}

int blkq_flush(struct blk_queue *q, struct blk_backend *be, blk_done_fn done,
	       void *tag)
{
	struct fake_op o = { BLK_OP_FLUSH, be, NULL, 0, 0, done, tag };

	stats.flushes++;
	return push(q, &o);
}

int blkq_discard(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
		 uint64_t offset, uint64_t len, blk_done_fn done, void *tag)
{
	struct fake_op o = { op, be, NULL, 0, offset, done, tag };

	return push(q, &o);
}

/* The LSI tests send no EXTENDED COPY: a backend without copies. */
int blkq_copy(struct blk_queue *q, struct blk_copy *c, blk_done_fn done,
	      void *tag)
{
	(void)q; (void)c; (void)done; (void)tag;
	return -EOPNOTSUPP;
}

int blkq_poll(struct blk_queue *q, int fd, blk_done_fn done, void *tag)
{
	return -ENOSYS;
}

int blkq_submit(struct blk_queue *q)
{
	return 0;
}

static int run(struct fake_op *o)
{
	ssize_t r;

	switch (o->op) {
	case BLK_OP_READ:
		r = preadv(o->be->fd, o->iov, o->iovcnt, o->offset);
		return r < 0 ? -errno : (int)r;
	case BLK_OP_WRITE:
		r = pwritev(o->be->fd, o->iov, o->iovcnt, o->offset);
		return r < 0 ? -errno : (int)r;
	case BLK_OP_FLUSH:
		return fdatasync(o->be->fd) < 0 ? -errno : 0;
	default:
		return 0;
	}
}

int blkq_reap(struct blk_queue *q, bool wait)
{
	int n = 0;

	if (order == FAKE_HOLD) {
		struct fake_op o;

		if (!release_newest || !q->n)
			return 0;
		release_newest--;
		o = q->ops[--q->n];
		o.done(o.tag, run(&o));
		return 1;
	}
	/* Completions may queue more requests: take a snapshot. */
	while (q->n) {
		struct fake_op o;

		if (order == FAKE_LIFO) {
			o = q->ops[--q->n];
		} else {
			o = q->ops[0];
			memmove(q->ops, q->ops + 1, --q->n * sizeof(q->ops[0]));
		}
		o.done(o.tag, run(&o));
		n++;
		if (!wait)
			continue;
	}
	return n;
}

unsigned int blkq_inflight(const struct blk_queue *q)
{
	return order == FAKE_HOLD ? 0 : q->n;
}

/* Fails what is queued, oldest first. */
void blkq_abort(struct blk_queue *q, int err)
{
	while (q->n) {
		struct fake_op o = q->ops[0];

		memmove(q->ops, q->ops + 1, --q->n * sizeof(q->ops[0]));
		o.done(o.tag, err);
	}
}
