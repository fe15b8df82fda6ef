/* virtio-blk: each queue is served by its own I/O thread, which waits on the
 * queue's kick eventfd and its io_uring completions in one io_uring_enter.
 * Every request is sent to the backend as soon as it is popped, reads and
 * writes alike, on iovecs that point into guest memory (sequential ones
 * merged; on a network disk a stream's may be held while others are out:
 * hold_group); completions are pushed in whatever order they arrive. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block/backend.h"
#include "lib/iotrace.h"
#include "lib/iov.h"
#include "lib/le.h"
#include "lib/log.h"
#include "virtio/blk.h"
#include "virtio/ring.h"
#include "virtio/vqworker.h"

/* Header, data segments, status, plus a few extra entries for descriptors
 * that cross a guest RAM region boundary. */
#define REQ_MAX_IOV (VIRTIO_BLK_SEG_MAX + 2 + 8)

/* Sequential merging: reads (or writes) popped together whose sectors
 * follow each other go to the backend as one readv/writev, as a real disk
 * queue would merge them; fewer, larger host I/Os. Bounded per group. */
#define MERGE_MAX_REQS 32
#define MERGE_MAX_IOV 1024
#define MERGE_MAX_BYTES (4u << 20)
#define MERGE_SLOTS 16

struct vblk_queue;

/* Per-request state: taken from the queue's pool, only the fields used by
 * the request's type are written. */
struct vblk_req {
	struct vblk_queue *q;
	struct vblk_req *next;	/* free list */
	uint8_t *status;	/* in guest memory */
	uint32_t used_len;	/* bytes written to the guest on success */
	uint32_t data_len;	/* READ: bytes expected */
	uint16_t head;
	uint32_t type;
	struct iovec *iov;	/* REQ_MAX_IOV entries in the pool */
	/* IN/OUT waiting in the merge group */
	struct iovec *data_iov;
	unsigned int data_cnt;
	uint64_t sector;
	struct vblk_req *merge_next;
	bool sent;		/* IN/OUT handed to the backend (rw_out) */
};

/* A merged group in flight: its combined iovecs and its requests. */
struct merge_slot {
	struct vblk_queue *q;
	struct merge_slot *next_free;
	struct vblk_req *first;
	uint64_t bytes;
	struct iovec iov[MERGE_MAX_IOV];
};

/* The group being built while popping. */
struct merge_group {
	struct vblk_req *first, *last;
	unsigned int nreq, iovcnt;
	uint64_t bytes;
	uint64_t next_sector;
	uint32_t type;
};

struct vblk_queue {
	struct vqworker w;	/* first: the worker's callbacks get &w */
	struct vblk *b;
	unsigned int pool_size;
	struct vblk_req *reqs;
	struct iovec *iovs;
	struct vblk_req *free;
	struct merge_group grp;
	/* The sector after the last read or write popped: a request that
	 * starts there may be followed by more of its stream, and waits in
	 * the merge group for them; any other goes to the disk at once. */
	uint64_t stream_end;
	/* Reads and writes handed to the backend and not finished: what a
	 * held group waits behind (hold_group). */
	unsigned int rw_out;
	struct merge_slot *merge;	/* MERGE_SLOTS */
	struct merge_slot *merge_free;
};

struct vblk {
	struct virtio_dev dev;
	struct blk_backend be;
	struct vblk_queue q[VIRTIO_BLK_MAX_QUEUES];
	uint8_t config[VIRTIO_BLK_CFG_LEN];
	/* Config space's capacity field (sectors), apart from config[] so
	 * that a resize stores it in one atomic write that the transport's
	 * threads read whole (config_gen moves around it). */
	uint64_t capacity;
	struct blk_errors errors;	/* what the backend failed */
	/* A queue ran since the last flush: there may be writes to flush.
	 * Queues start, stop and flush from the transport's one control
	 * thread. */
	bool unflushed;
};

struct blk_outhdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

struct blk_range {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};

static struct vblk *to_vblk(struct virtio_dev *dev)
{
	return (struct vblk *)dev;
}

static struct vblk_queue *to_queue(struct vqworker *w)
{
	return (struct vblk_queue *)w;
}

static void req_finish(struct vblk_req *r, uint8_t status, uint32_t len)
{
	struct vblk_queue *q = r->q;

	if (r->sent) {
		r->sent = false;
		q->rw_out--;
	}
	*r->status = status;
	virtq_push(q->w.vq, r->head, len);
	q->w.need_notify = true;
	r->next = q->free;
	q->free = r;
	q->w.inflight--;
}

static enum blk_op type_op(uint32_t type)
{
	switch (type) {
	case VIRTIO_BLK_T_IN:
		return BLK_OP_READ;
	case VIRTIO_BLK_T_OUT:
		return BLK_OP_WRITE;
	case VIRTIO_BLK_T_FLUSH:
		return BLK_OP_FLUSH;
	default:
		return BLK_OP_DISCARD;
	}
}

static const char *type_name(uint32_t type)
{
	switch (type) {
	case VIRTIO_BLK_T_IN:
		return "read";
	case VIRTIO_BLK_T_OUT:
		return "write";
	case VIRTIO_BLK_T_FLUSH:
		return "flush";
	case VIRTIO_BLK_T_DISCARD:
		return "discard";
	default:
		return "write zeroes";
	}
}

/* The backend failed a request (the guest gets IOERR): counted, and
 * logged however often it happens, rate-limited. */
static void io_error(struct vblk *b, uint32_t type, uint64_t sector,
		     uint64_t bytes, int res)
{
	blk_errors_add(&b->errors, type_op(type));
	if (type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_OUT)
		pr_err_rated("virtio-blk %s: %s of %llu bytes at sector %llu failed: %s",
			     blk_name(&b->be), type_name(type),
			     (unsigned long long)bytes, (unsigned long long)sector,
			     strerror(-res));
	else
		pr_err_rated("virtio-blk %s: %s failed: %s", blk_name(&b->be),
			     type_name(type), strerror(-res));
}

static void req_done(void *tag, int res)
{
	struct vblk_req *r = tag;

	iotrace(IOT_REAP, r->head, 1);
	/* A discard is a hint (reads after it may return the old data): a
	 * file system that cannot punch holes just keeps the blocks. */
	if (res == -EOPNOTSUPP && r->type == VIRTIO_BLK_T_DISCARD)
		res = 0;
	if (res >= 0 && r->type == VIRTIO_BLK_T_IN && (uint32_t)res != r->data_len)
		res = -EIO;
	if (res < 0) {
		io_error(r->q->b, r->type, r->sector, r->data_len, res);
		req_finish(r, VIRTIO_BLK_S_IOERR, 1);
		return;
	}
	req_finish(r, VIRTIO_BLK_S_OK, r->used_len);
}

static bool sectors_ok(const struct blk_backend *be, uint64_t sector,
		       uint64_t bytes)
{
	uint64_t nsec = blk_size(be) / 512;

	return sector <= nsec && bytes / 512 <= nsec - sector;
}

static int submit_range(struct vblk *b, struct vblk_req *r, struct iovec *iov,
			unsigned int cnt, uint64_t len)
{
	struct blk_range rg;
	enum blk_op op = BLK_OP_DISCARD;
	uint32_t allowed = 0;

	if (len != sizeof(rg))
		return len && !(len % sizeof(rg)) ? -ENOTSUP : -EINVAL;
	iov_to_buf(iov, cnt, 0, &rg, sizeof(rg));
	rg.sector = le64toh(rg.sector);
	rg.num_sectors = le32toh(rg.num_sectors);
	rg.flags = le32toh(rg.flags);
	if (r->type == VIRTIO_BLK_T_WRITE_ZEROES) {
		allowed = VIRTIO_BLK_WRITE_ZEROES_UNMAP;
		/* Deallocate where the backend can and still promise
		 * zeroes (the backend falls back to writing them). */
		op = rg.flags & VIRTIO_BLK_WRITE_ZEROES_UNMAP ?
		     BLK_OP_ZERO_UNMAP : BLK_OP_WRITE_ZEROES;
	}
	if (rg.flags & ~allowed)
		return -ENOTSUP;
	if (rg.num_sectors > VIRTIO_BLK_MAX_DISCARD_SECTORS ||
	    !sectors_ok(&b->be, rg.sector, (uint64_t)rg.num_sectors * 512))
		return -EINVAL;
	return blkq_discard(r->q->w.bq, &b->be, op, rg.sector * 512,
			    (uint64_t)rg.num_sectors * 512, req_done, r);
}

/* An I/O trace event for each request of a merge group (arg: how many):
 * every request gets its own times. */
static void trace_group(unsigned int ev, const struct vblk_req *first)
{
	uint32_t n = 0;

	for (const struct vblk_req *r = first; r; r = r->merge_next)
		n++;
	for (const struct vblk_req *r = first; r; r = r->merge_next)
		iotrace(ev, r->head, n);
}

static void merge_done(void *tag, int res)
{
	struct merge_slot *m = tag;
	struct vblk_queue *q = m->q;
	struct vblk_req *r = m->first;
	bool ok = res >= 0 && (uint64_t)res == m->bytes;

	if (iotrace_on())
		trace_group(IOT_REAP, r);
	if (!ok)
		io_error(q->b, r->type, r->sector, m->bytes, res < 0 ? res : -EIO);
	while (r) {
		struct vblk_req *next = r->merge_next;

		req_finish(r, ok ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR,
			   ok ? r->used_len : 1);
		r = next;
	}
	m->next_free = q->merge_free;
	q->merge_free = m;
}

static int submit_one(struct vblk_queue *q, struct vblk_req *r)
{
	iotrace(IOT_SUBMIT_Q, r->head, 1);
	return blkq_rw(q->w.bq, &q->b->be,
		       r->type == VIRTIO_BLK_T_IN ? BLK_OP_READ : BLK_OP_WRITE,
		       r->data_iov, r->data_cnt, r->sector * 512, req_done, r);
}

/* Sends the group built so far: one request as it is, several through a
 * merge slot (or one by one when all slots are busy). */
static void merge_flush(struct vblk_queue *q)
{
	struct merge_group *g = &q->grp;
	struct merge_slot *m = q->merge_free;
	struct vblk_req *r = g->first;
	unsigned int n = 0, nreq = g->nreq;

	if (!g->nreq)
		return;
	g->nreq = 0;
	g->first = g->last = NULL;
	for (struct vblk_req *s = r; s; s = s->merge_next) {
		s->sent = true;
		q->rw_out++;
	}
	if (!r->merge_next || !m) {
		while (r) {
			struct vblk_req *next = r->merge_next;

			if (submit_one(q, r))
				req_finish(r, VIRTIO_BLK_S_IOERR, 1);
			r = next;
		}
		return;
	}
	q->merge_free = m->next_free;
	m->first = r;
	m->bytes = g->bytes;
	for (; r; r = r->merge_next) {
		memcpy(m->iov + n, r->data_iov, r->data_cnt * sizeof(*m->iov));
		n += r->data_cnt;
	}
	if (iotrace_on())
		trace_group(IOT_SUBMIT_Q, m->first);
	/* Counted as the nreq requests the guest sent (block/stats.h). */
	if (blkq_rw_merged(q->w.bq, &q->b->be,
			   g->type == VIRTIO_BLK_T_IN ? BLK_OP_READ : BLK_OP_WRITE,
			   m->iov, n, m->first->sector * 512, nreq, merge_done, m))
		merge_done(m, -EIO);
}

/* Adds a validated read or write to the group, sending the group first
 * when r does not continue it. */
static void merge_add(struct vblk_queue *q, struct vblk_req *r, uint64_t bytes)
{
	struct merge_group *g = &q->grp;
	bool alone;

	if (g->nreq && (g->type != r->type || g->next_sector != r->sector ||
			g->nreq == MERGE_MAX_REQS ||
			g->iovcnt + r->data_cnt > MERGE_MAX_IOV ||
			g->bytes + bytes > MERGE_MAX_BYTES)) {
		merge_flush(q);
		/* The finished group goes to the disk now rather than with
		 * the rest of the batch: a host queue fed one request at a
		 * time while the guest refills keeps the disk busy (random
		 * writes at depth gain from it: bench/RESULTS.md). */
		blkq_submit(q->w.bq);
	}
	/* A request that continues nothing popped before it is likely random,
	 * with nothing to merge with: it goes to the disk now, not when the
	 * next pop shows whether that one continues it (that wait cost each
	 * random request the pop of the next, 5 us p50 in the I/O trace:
	 * bench/RESULTS.md). A sequential stream loses only its first
	 * request to this. */
	alone = !g->nreq && r->sector != q->stream_end;
	r->merge_next = NULL;
	if (!g->nreq) {
		g->first = r;
		g->type = r->type;
		g->iovcnt = 0;
		g->bytes = 0;
	} else {
		g->last->merge_next = r;
	}
	g->last = r;
	g->nreq++;
	g->iovcnt += r->data_cnt;
	g->bytes += bytes;
	g->next_sector = r->sector + bytes / 512;
	q->stream_end = g->next_sector;
	if (alone) {
		merge_flush(q);
		blkq_submit(q->w.bq);
	}
}

/* Decodes one popped chain and sends it to the backend, or completes it. */
static void req_start(struct vblk_queue *q, struct vblk_req *r,
		      const struct virtq_elem *e)
{
	struct vblk *b = q->b;
	struct iovec *iov = r->iov;
	unsigned int out = e->out_num, in = e->in_num, first;
	struct blk_outhdr h;
	uint64_t data_len;
	struct iovec *last;
	int ret;

	r->head = e->head;
	if (!in) {
		/* No writable byte for the status: nothing to report into. */
		r->next = q->free;
		q->free = r;
		vqworker_mark_broken(&q->w, "request without a writable status byte");
		return;
	}
	r->q = q;
	q->w.inflight++;
	last = &iov[out + in - 1];
	r->status = (uint8_t *)last->iov_base + last->iov_len - 1;
	if (!--last->iov_len)
		in--;
	if (e->out_len < sizeof(h)) {
		req_finish(r, VIRTIO_BLK_S_IOERR, 1);
		return;
	}
	iov_to_buf(iov, out, 0, &h, sizeof(h));
	r->type = le32toh(h.type);
	h.sector = le64toh(h.sector);
	first = iov_skip(iov, out, sizeof(h));

	switch (le32toh(h.type)) {
	case VIRTIO_BLK_T_IN:
		data_len = e->in_len - 1;
		if (data_len % 512 || data_len > BLK_MAX_RW ||
		    !sectors_ok(&b->be, h.sector, data_len))
			break;
		r->data_len = data_len;
		r->used_len = data_len + 1;
		r->data_iov = iov + out;
		r->data_cnt = in;
		r->sector = h.sector;
		merge_add(q, r, data_len);
		return;
	case VIRTIO_BLK_T_OUT:
		data_len = e->out_len - sizeof(h);
		if (b->be.ro || data_len % 512 || data_len > BLK_MAX_RW ||
		    !sectors_ok(&b->be, h.sector, data_len))
			break;
		r->data_len = data_len;	/* for messages */
		r->used_len = 1;
		r->data_iov = iov + first;
		r->data_cnt = out - first;
		r->sector = h.sector;
		merge_add(q, r, data_len);
		return;
	case VIRTIO_BLK_T_FLUSH:
		r->used_len = 1;
		iotrace(IOT_SUBMIT_Q, r->head, 1);
		if (blkq_flush(q->w.bq, &b->be, req_done, r))
			break;
		return;
	case VIRTIO_BLK_T_GET_ID: {
		/* The id is NUL-padded to 20 bytes, not NUL-terminated. */
		char id[VIRTIO_BLK_ID_BYTES] = { 0 };
		size_t n = e->in_len - 1 < sizeof(id) ? e->in_len - 1 : sizeof(id);

		memcpy(id, b->be.serial, strnlen(b->be.serial, sizeof(id)));
		n = iov_from_buf(iov + out, in, 0, id, n);
		req_finish(r, VIRTIO_BLK_S_OK, n + 1);
		return;
	}
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES: {
		unsigned int bit = r->type == VIRTIO_BLK_T_DISCARD ?
				   VIRTIO_BLK_F_DISCARD : VIRTIO_BLK_F_WRITE_ZEROES;

		if (!virtio_has_feature(&b->dev, bit)) {
			req_finish(r, VIRTIO_BLK_S_UNSUPP, 1);
			return;
		}
		r->used_len = 1;
		iotrace(IOT_SUBMIT_Q, r->head, 1);
		ret = submit_range(b, r, iov + first, out - first,
				   e->out_len - sizeof(h));
		if (ret == -ENOTSUP) {
			req_finish(r, VIRTIO_BLK_S_UNSUPP, 1);
			return;
		}
		if (ret)
			break;
		return;
	}
	default:
		req_finish(r, VIRTIO_BLK_S_UNSUPP, 1);
		return;
	}
	req_finish(r, VIRTIO_BLK_S_IOERR, 1);
}

/* Pops one chain into a free request and starts it. */
static int vblk_pop(struct vqworker *w)
{
	struct vblk_queue *q = to_queue(w);
	struct vblk_req *r = q->free;
	struct virtq_elem e;
	int ret;

	if (!r)
		return 0;
	ret = virtq_pop(w->vq, &e, r->iov, REQ_MAX_IOV);
	if (ret <= 0)
		return ret;
	q->free = r->next;
	req_start(q, r, &e);
	return 1;
}

/* Holding a stream back. A guest streaming at depth (64k sequential writes
 * at QD16) refills its ring one request at a time as completions reach
 * it, and a thread that pops as fast as they come sends groups of one or
 * two: to a network disk, where every command costs the server a wakeup
 * and a round of its own (NBD), that was 1.7x QEMU's number of commands
 * for the same writes, whose iothread merely wakes up later (nbdkit's
 * log: bench/RESULTS.md). So on a disk that asks for it (stream_hold),
 * a group that continues a stream stays open while at least HOLD_OTHERS
 * reads and writes of the queue are out at the backend (rw_out: flushes
 * and discards do not count, they need not keep the server busy with
 * data), until it reaches stream_hold bytes or MERGE_MAX_REQS requests;
 * every reap looks again (the worker's release op), so it goes out as
 * soon as those drop below that. Never by a timer: a held group always
 * has requests out whose completions are such reaps, and a stopping or
 * failed queue sends it at once. A random request, or a stream's first,
 * is never held (merge_add sends it alone); a stream at QD1 never is. */
#define HOLD_OTHERS 4

static bool hold_group(const struct vblk_queue *q)
{
	const struct merge_group *g = &q->grp;

	return g->nreq && g->nreq < MERGE_MAX_REQS &&
	       g->bytes < q->b->be.stream_hold && q->rw_out >= HOLD_OTHERS;
}

static void vblk_popped(struct vqworker *w)
{
	struct vblk_queue *q = to_queue(w);

	if (hold_group(q))
		return;
	/* Sent by the thread's next blkq_spin or blkq_reap, in the same
	 * io_uring_enter that waits for completions. */
	merge_flush(q);
}

static void vblk_release(struct vqworker *w, bool all)
{
	struct vblk_queue *q = to_queue(w);

	if (all || !hold_group(q))
		merge_flush(q);
}

static const struct vqworker_ops vblk_queue_ops = {
	.pop = vblk_pop,
	.popped = vblk_popped,
	.release = vblk_release,
};

static int pool_init(struct vblk_queue *q, unsigned int size)
{
	struct vq_pool_array a[] = {
		{ q->reqs, sizeof(*q->reqs), 1 },
		{ q->iovs, sizeof(*q->iovs), REQ_MAX_IOV },
	};
	int ret = vq_pool_alloc(a, 2, &q->pool_size, size);

	q->reqs = a[0].p;
	q->iovs = a[1].p;
	if (ret)
		return ret;
	if (!q->merge) {
		q->merge = calloc(MERGE_SLOTS, sizeof(*q->merge));
		if (!q->merge)
			return -ENOMEM;
	}
	q->merge_free = NULL;
	for (unsigned int i = 0; i < MERGE_SLOTS; i++) {
		q->merge[i].q = q;
		q->merge[i].next_free = q->merge_free;
		q->merge_free = &q->merge[i];
	}
	memset(&q->grp, 0, sizeof(q->grp));
	q->stream_end = UINT64_MAX;
	q->rw_out = 0;
	q->free = NULL;
	for (unsigned int i = 0; i < size; i++) {
		q->reqs[i].iov = q->iovs + (size_t)i * REQ_MAX_IOV;
		q->reqs[i].sent = false;	/* (a kept pool: rw_out is 0) */
		q->reqs[i].next = q->free;
		q->free = &q->reqs[i];
	}
	return 0;
}

static int vblk_queue_start(struct virtio_dev *dev, unsigned int index,
			    struct virtq *vq)
{
	struct vblk *b = to_vblk(dev);
	struct vblk_queue *q;
	char name[16];
	int ret;

	if (index >= dev->num_queues)
		return -EINVAL;
	q = &b->q[index];
	if (q->w.running)
		return -EBUSY;
	ret = pool_init(q, vq->size);
	if (ret)
		return ret;
	ret = vqworker_open(&q->w, index, vq, q->pool_size);
	if (ret)
		return ret;
	b->unflushed = true;
	snprintf(name, sizeof(name), "iovm-blk%u", index);
	ret = vqworker_run(&q->w, name);
	if (ret)
		vqworker_close(&q->w);
	return ret;
}

static void vblk_queue_stop(struct virtio_dev *dev, unsigned int index)
{
	struct vblk *b = to_vblk(dev);

	if (index >= dev->num_queues)
		return;
	vqworker_stop(&b->q[index].w, "a virtio-blk queue");
}

static void vblk_config_read(struct virtio_dev *dev, uint32_t offset,
			     void *data, uint32_t len)
{
	struct vblk *b = to_vblk(dev);
	uint8_t c[VIRTIO_BLK_CFG_LEN];

	if (offset > sizeof(b->config) || len > sizeof(b->config) - offset)
		return;
	memcpy(c, b->config, sizeof(c));
	le_put64(c + VIRTIO_BLK_CFG_CAPACITY,
		 __atomic_load_n(&b->capacity, __ATOMIC_SEQ_CST));
	memcpy(data, c + offset, len);
}

int virtio_blk_resized(void *dev, struct blk_backend *be)
{
	struct vblk *b = to_vblk(dev);
	uint64_t sectors = blk_size(&b->be) / 512;

	if (be != &b->be)
		return -ENODEV;
	if (sectors == __atomic_load_n(&b->capacity, __ATOMIC_SEQ_CST))
		return 0;
	virtio_config_gen_bump(&b->dev);
	__atomic_store_n(&b->capacity, sectors, __ATOMIC_SEQ_CST);
	virtio_config_gen_bump(&b->dev);
	if (!b->dev.transport.config_changed)
		return -ENOTCONN;
	return b->dev.transport.config_changed(&b->dev);
}

static void vblk_config_write(struct virtio_dev *dev, uint32_t offset,
			      const void *data, uint32_t len)
{
	/* Nothing is writable: the cache mode is fixed by --disk. */
}

static int vblk_features_ok(struct virtio_dev *dev)
{
	return 0;
}

/* Once per stop of the queues, however many times the transport asks
 * (vhost-user's disconnect runs again when the server is freed). */
static void vblk_flush(struct virtio_dev *dev)
{
	struct vblk *b = to_vblk(dev);
	int ret;

	if (!b->unflushed)
		return;
	b->unflushed = false;
	for (unsigned int i = 0; i < dev->num_queues; i++)
		if (b->q[i].w.running)
			b->unflushed = true;	/* still writing */
	ret = blk_flush(&b->be);
	if (ret) {
		blk_errors_add(&b->errors, BLK_OP_FLUSH);
		pr_err("virtio-blk %s: flush: %s", blk_name(&b->be), strerror(-ret));
	}
}

/* The transport flushed already (ops->flush, once its queues stopped):
 * destroying only frees. */
static void vblk_destroy(struct virtio_dev *dev)
{
	struct vblk *b = to_vblk(dev);
	const struct blk_errors *e = &b->errors;

	for (unsigned int i = 0; i < dev->num_queues; i++) {
		vblk_queue_stop(dev, i);
		free(b->q[i].reqs);
		free(b->q[i].iovs);
		free(b->q[i].merge);
	}
	if (blk_errors_total(e))
		pr_warn("virtio-blk %s: I/O errors: %llu reads, %llu writes, %llu flushes, %llu other",
			blk_name(&b->be), (unsigned long long)e->read,
			(unsigned long long)e->write, (unsigned long long)e->flush,
			(unsigned long long)e->other);
	blk_close(&b->be);
	free(b);
}

const struct blk_errors *virtio_blk_errors(struct virtio_dev *dev)
{
	return &to_vblk(dev)->errors;
}

struct blk_backend *virtio_blk_backend(struct virtio_dev *dev)
{
	return &to_vblk(dev)->be;
}

static const struct virtio_dev_ops vblk_ops = {
	.config_read = vblk_config_read,
	.config_write = vblk_config_write,
	.features_ok = vblk_features_ok,
	.queue_start = vblk_queue_start,
	.queue_stop = vblk_queue_stop,
	.flush = vblk_flush,
	.destroy = vblk_destroy,
};

static void fill_config(struct vblk *b)
{
	const struct blk_backend *be = &b->be;
	uint8_t *c = b->config;
	unsigned int exp = 0;

	while ((be->block_size << exp) < be->phys_block_size && exp < 15)
		exp++;
	b->capacity = blk_size(be) / 512;	/* config_read puts it in */
	le_put32(c + VIRTIO_BLK_CFG_SIZE_MAX, VIRTIO_BLK_SIZE_MAX);
	le_put32(c + VIRTIO_BLK_CFG_SEG_MAX, VIRTIO_BLK_SEG_MAX);
	le_put32(c + VIRTIO_BLK_CFG_BLK_SIZE, be->block_size);
	c[VIRTIO_BLK_CFG_PHYS_EXP] = exp;
	le_put16(c + VIRTIO_BLK_CFG_MIN_IO, 1);
	le_put32(c + VIRTIO_BLK_CFG_OPT_IO, 0);
	le_put16(c + VIRTIO_BLK_CFG_NUM_QUEUES, b->dev.num_queues);
	le_put32(c + VIRTIO_BLK_CFG_MAX_DISCARD_SECTORS, VIRTIO_BLK_MAX_DISCARD_SECTORS);
	le_put32(c + VIRTIO_BLK_CFG_MAX_DISCARD_SEG, 1);
	le_put32(c + VIRTIO_BLK_CFG_DISCARD_ALIGN, be->phys_block_size / 512);
	le_put32(c + VIRTIO_BLK_CFG_MAX_WZ_SECTORS, VIRTIO_BLK_MAX_DISCARD_SECTORS);
	le_put32(c + VIRTIO_BLK_CFG_MAX_WZ_SEG, 1);
	c[VIRTIO_BLK_CFG_WZ_MAY_UNMAP] = !be->is_blockdev;
}

struct virtio_dev *virtio_blk_create(const struct disk_cfg *cfg,
				     unsigned int default_queues, char *err,
				     size_t errlen)
{
	struct vblk *b = calloc(1, sizeof(*b));
	unsigned int nq = cfg->queues ? cfg->queues : default_queues;
	const struct blk_backend *be;
	struct blk_spin spin;
	uint64_t f;

	if (!b) {
		snprintf(err, errlen, "%s: out of memory", cfg->path);
		return NULL;
	}
	if (!nq)
		nq = 1;
	if (nq > VIRTIO_BLK_MAX_QUEUES)
		nq = VIRTIO_BLK_MAX_QUEUES;
	if (blk_open(&b->be, cfg, err, errlen)) {
		free(b);
		return NULL;
	}
	f = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_RING_INDIRECT_DESC) |
	    (1ull << VIRTIO_F_RING_EVENT_IDX) | (1ull << VIRTIO_BLK_F_SIZE_MAX) |
	    (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
	    (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_TOPOLOGY) |
	    (1ull << VIRTIO_BLK_F_MQ);
	if (b->be.ro)
		f |= 1ull << VIRTIO_BLK_F_RO;
	else
		f |= (b->be.discard_ok ? 1ull << VIRTIO_BLK_F_DISCARD : 0) |
		     (1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	b->dev.name = "virtio-blk";
	b->dev.device_id = VIRTIO_ID_BLOCK;
	b->dev.num_queues = nq;
	b->dev.max_queue_size = VIRTIO_BLK_QUEUE_SIZE;
	b->dev.config_len = VIRTIO_BLK_CFG_LEN;
	b->dev.host_features = f;
	b->dev.ops = &vblk_ops;
	be = &b->be;
	blk_spin_of(&spin, &be, &cfg, 1);
	for (unsigned int i = 0; i < VIRTIO_BLK_MAX_QUEUES; i++) {
		b->q[i].b = b;
		vqworker_init(&b->q[i].w, &vblk_queue_ops, &b->dev, "virtio-blk",
			      &spin);
	}
	fill_config(b);
	return &b->dev;
}
