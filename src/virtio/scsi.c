/* virtio-scsi: a control queue (task management, served by its own thread),
 * an event queue (no events are reported: no hotplug) and request queues,
 * each served by an I/O thread that waits on its kick eventfd and its
 * io_uring completions in one io_uring_enter. Commands go to the SCSI disk
 * target as soon as they are popped, data on iovecs into guest memory, and
 * complete in whatever order the backend finishes them. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block/backend.h"
#include "lib/iotrace.h"
#include "lib/iov.h"
#include "lib/le.h"
#include "lib/log.h"
#include "scsi/disk.h"
#include "virtio/ring.h"
#include "virtio/scsi.h"
#include "virtio/vqworker.h"

/* Data segments plus the request header and response, plus a few entries
 * for descriptors that cross a guest RAM region boundary. */
#define REQ_MAX_IOV (VIRTIO_SCSI_SEG_MAX + 4 + 8)
#define CTRL_MAX_IOV 16
#define NTARGETS (VIRTIO_SCSI_MAX_TARGET + 1)

struct vscsi_lu {
	struct blk_backend be;
	struct scsi_disk *disk;
	const char *path;
};

struct vscsi_target {
	bool present;
	struct scsi_lun_map map;
	struct vscsi_lu *lu[SCSI_MAX_LUNS];
};

struct vscsi_queue;

/* A task management function in progress: the control thread posts it to
 * every request queue, each queue thread marks its matching requests, and
 * the control thread answers once all of them have completed. */
struct vscsi_tmf {
	uint8_t target;
	uint16_t lun;
	uint64_t id;
	bool whole_target;	/* I_T nexus reset */
	bool one_task;		/* ABORT TASK / QUERY TASK: match id */
	bool query;		/* count, do not abort */
	bool reset;		/* aborted requests report RESET */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int acks_pending;	/* queues that have not scanned yet */
	unsigned int reqs_pending;	/* marked requests not completed */
	unsigned int found;
};

/* Per-request state, from the queue's pool; a request writes only the
 * fields it uses (the scsi_req "in" fields, the few below). */
struct vscsi_req {
	struct scsi_req s;		/* first: the target's done() gets &s */
	struct vscsi_queue *q;
	struct vscsi_req *next;		/* free list */
	struct iovec *iov;		/* the chain as popped */
	struct iovec *dat;		/* its data part */
	struct vscsi_tmf *tmf;		/* a TMF waiting for this request */
	uint64_t id;
	unsigned int out_num;
	unsigned int in_num;
	uint32_t resp_len;		/* writable bytes for response + sense */
	uint32_t sense_size;
	uint16_t head;
	uint16_t lun;
	uint8_t target;
	bool data_in;
};

struct vscsi_queue {
	struct vqworker w;	/* first: the worker's callbacks get &w; its
				 * qwake also carries TMF wakeups */
	struct vscsi *s;
	unsigned int pool_size;
	struct vscsi_req *reqs;
	struct iovec *iovs;
	struct vscsi_req *free;
	struct vscsi_req **slots;	/* in flight, by descriptor head */
	/* TMF mailbox, written by the control thread */
	pthread_mutex_t mbox_lock;
	struct vscsi_tmf *mbox;
	bool alive;
};

struct vscsi {
	struct virtio_dev dev;
	struct vscsi_target t[NTARGETS];
	struct vscsi_lu *lus;
	unsigned int nlus;
	uint16_t max_target;
	uint32_t sense_size;	/* driver-writable config, atomics */
	uint32_t cdb_size;
	/* control queue */
	struct virtq *ctrl_vq;
	pthread_t ctrl_thread;
	bool ctrl_running;
	bool ctrl_stop;
	struct qwake ctrl_wake;	/* stops the control thread */
	bool ctrl_broken;
	/* A request queue ran since the last flush (queues start, stop and
	 * flush from the transport's one control thread). */
	bool unflushed;
	struct vscsi_queue q[VIRTIO_SCSI_MAX_QUEUES];
};

static struct vscsi *to_vscsi(struct virtio_dev *dev)
{
	return (struct vscsi *)dev;
}

/* LUN field: 1, target, a single-level LUN (peripheral or flat space),
 * zeroes. Returns the LUN, or SCSI_MAX_LUNS for an address naming no LUN
 * we can have. */
static unsigned int decode_lun(const uint8_t *l)
{
	unsigned int lun;

	if (l[4] | l[5] | l[6] | l[7])
		return SCSI_MAX_LUNS;
	switch (l[2] >> 6) {
	case 0:		/* peripheral device addressing, bus 0 */
		lun = l[2] ? SCSI_MAX_LUNS : l[3];
		break;
	case 1:		/* flat space */
		lun = (l[2] & 0x3f) << 8 | l[3];
		break;
	default:
		return SCSI_MAX_LUNS;
	}
	return lun < SCSI_MAX_LUNS ? lun : SCSI_MAX_LUNS;
}

static struct vscsi_target *find_target(struct vscsi *s, const uint8_t *l)
{
	if (l[0] != 1 || l[1] >= NTARGETS || !s->t[l[1]].present)
		return NULL;
	return &s->t[l[1]];
}

/* ---- request pool ---- */

#ifdef VSCSI_MALLOC_REQ
/* Benchmark variant (bench/): every request allocated and zeroed whole, the
 * way request state is often handled, to measure what the pool saves. */
static struct vscsi_req *req_get(struct vscsi_queue *q)
{
	size_t sz = sizeof(struct vscsi_req) + 2 * REQ_MAX_IOV * sizeof(struct iovec);
	struct vscsi_req *r;

	if (q->w.inflight >= q->pool_size || !virtq_avail_count(q->w.vq))
		return NULL;
	r = malloc(sz);
	if (!r)
		return NULL;
	memset(r, 0, sz);
	r->iov = (struct iovec *)(r + 1);
	r->dat = r->iov + REQ_MAX_IOV;
	return r;
}

static void req_put(struct vscsi_queue *q, struct vscsi_req *r)
{
	free(r);
}
#else
static struct vscsi_req *req_get(struct vscsi_queue *q)
{
	struct vscsi_req *r = q->free;

	if (r)
		q->free = r->next;
	return r;
}

static void req_put(struct vscsi_queue *q, struct vscsi_req *r)
{
	r->next = q->free;
	q->free = r;
}
#endif

/* ---- request queues ---- */

static struct vscsi_queue *to_queue(struct vqworker *w)
{
	return (struct vscsi_queue *)w;
}

static void tmf_release(struct vscsi_tmf *t, bool req, bool ack)
{
	pthread_mutex_lock(&t->lock);
	if (req)
		t->reqs_pending--;
	if (ack)
		t->acks_pending--;
	if (!t->reqs_pending && !t->acks_pending)
		pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void req_finish(struct vscsi_req *r, uint32_t used)
{
	struct vscsi_queue *q = r->q;

	virtq_push(q->w.vq, r->head, used);
	q->w.need_notify = true;
	if (q->slots[r->head] == r)
		q->slots[r->head] = NULL;
	if (r->tmf)
		tmf_release(r->tmf, true, false);
	q->w.inflight--;
	req_put(q, r);
}

static void respond(struct vscsi_req *r, uint8_t response, uint8_t status,
		    uint32_t resid, const uint8_t *sense, uint32_t sense_len,
		    uint32_t data_in)
{
	uint8_t h[VIRTIO_SCSI_RESP_HDR];

	le_put32(h, sense_len);
	le_put32(h + 4, resid);
	le_put16(h + 8, 0);
	h[10] = status;
	h[11] = response;
	iov_from_buf(r->iov + r->out_num, r->in_num, 0, h, sizeof(h));
	if (sense_len)
		iov_from_buf(r->iov + r->out_num, r->in_num, sizeof(h), sense,
			     sense_len);
	req_finish(r, r->resp_len + data_in);
}

/* The disk target finished a command. */
static void req_done(struct scsi_req *sr)
{
	struct vscsi_req *r = (struct vscsi_req *)sr;
	uint32_t sense_len;

	iotrace(IOT_REAP, r->head, 1);

	switch (sr->host) {
	case SCSI_HOST_OK:
		sense_len = sr->sense_len < r->sense_size ? sr->sense_len : r->sense_size;
		respond(r, VIRTIO_SCSI_S_OK, sr->status, sr->buf_len - sr->xferred,
			sr->sense, sense_len, r->data_in ? sr->xferred : 0);
		return;
	case SCSI_HOST_OVERRUN:
		respond(r, VIRTIO_SCSI_S_OVERRUN, 0, sr->buf_len, NULL, 0, 0);
		return;
	case SCSI_HOST_ABORTED:
		respond(r, VIRTIO_SCSI_S_ABORTED, 0, sr->buf_len, NULL, 0, 0);
		return;
	case SCSI_HOST_RESET:
		respond(r, VIRTIO_SCSI_S_RESET, 0, sr->buf_len, NULL, 0, 0);
		return;
	default:	/* data buffer in the wrong direction */
		respond(r, VIRTIO_SCSI_S_FAILURE, 0, sr->buf_len, NULL, 0, 0);
		return;
	}
}

/* Decodes one popped chain and hands the command to its disk, or answers
 * it at once. */
static void req_start(struct vscsi_queue *q, struct vscsi_req *r,
		      const struct virtq_elem *e)
{
	struct vscsi *s = q->s;
	uint32_t cdb_size = __atomic_load_n(&s->cdb_size, __ATOMIC_RELAXED);
	uint32_t sense_size = __atomic_load_n(&s->sense_size, __ATOMIC_RELAXED);
	uint8_t hdr[VIRTIO_SCSI_REQ_HDR + SCSI_CDB_MAX];
	uint32_t hlen = VIRTIO_SCSI_REQ_HDR + cdb_size;
	uint32_t rlen = VIRTIO_SCSI_RESP_HDR + sense_size;
	uint32_t cdb_copy = cdb_size < SCSI_CDB_MAX ? cdb_size : SCSI_CDB_MAX;
	uint64_t out_data, in_data;
	struct vscsi_target *t;
	struct vscsi_lu *lu;
	unsigned int lun;

	r->q = q;
	r->head = e->head;
	r->out_num = e->out_num;
	r->in_num = e->in_num;
	r->tmf = NULL;
	q->w.inflight++;
	if (e->in_len < VIRTIO_SCSI_RESP_HDR) {
		/* Nowhere to put a response: hand the buffers back. */
		pr_guest("virtio-scsi: request without room for a response");
		req_finish(r, 0);
		return;
	}
	r->resp_len = e->in_len < rlen ? e->in_len : rlen;
	r->sense_size = r->resp_len - VIRTIO_SCSI_RESP_HDR;
	if (e->out_len < hlen || e->in_len < rlen) {
		respond(r, VIRTIO_SCSI_S_FAILURE, 0, 0, NULL, 0, 0);
		return;
	}
	out_data = e->out_len - hlen;
	in_data = e->in_len - rlen;
	if ((out_data && in_data) || out_data > UINT32_MAX || in_data > UINT32_MAX) {
		/* bidirectional commands (VIRTIO_SCSI_F_INOUT) not offered */
		respond(r, VIRTIO_SCSI_S_FAILURE, 0, 0, NULL, 0, 0);
		return;
	}
	iov_to_buf(r->iov, e->out_num, 0, hdr, VIRTIO_SCSI_REQ_HDR + cdb_copy);
	t = find_target(s, hdr);
	if (!t) {
		respond(r, VIRTIO_SCSI_S_BAD_TARGET, 0, out_data + in_data, NULL, 0, 0);
		return;
	}
	lun = decode_lun(hdr);
	lu = lun < SCSI_MAX_LUNS ? t->lu[lun] : NULL;
	r->target = hdr[1];
	r->lun = lun;
	r->id = le_get64(hdr + 8);

	memcpy(r->s.cdb, hdr + VIRTIO_SCSI_REQ_HDR, cdb_copy);
	r->s.cdb_len = cdb_size;
	r->data_in = in_data;
	if (out_data) {
		r->s.buf_dir = SCSI_DIR_TO_DEV;
		r->s.iovcnt = iov_slice(r->iov, e->out_num, hlen, r->dat);
		r->s.buf_len = out_data;
	} else if (in_data) {
		r->s.buf_dir = SCSI_DIR_FROM_DEV;
		r->s.iovcnt = iov_slice(r->iov + e->out_num, e->in_num, rlen, r->dat);
		r->s.buf_len = in_data;
	} else {
		r->s.buf_dir = SCSI_DIR_NONE;
		r->s.iovcnt = 0;
		r->s.buf_len = 0;
	}
	r->s.iov = r->dat;
	r->s.q = q->w.bq;
	r->s.done = req_done;
	q->slots[r->head] = r;
	iotrace(IOT_SUBMIT_Q, r->head, 1);
	if (lu)
		scsi_disk_submit(lu->disk, &r->s);
	else
		scsi_lun_absent_submit(&t->map, &r->s);
}

static bool tmf_match(const struct vscsi_tmf *t, const struct vscsi_req *r)
{
	if (r->target != t->target)
		return false;
	if (t->whole_target)
		return true;
	return r->lun == t->lun && (!t->one_task || r->id == t->id);
}

/* Marks this queue's requests that a posted TMF names. */
static void tmf_scan(struct vscsi_queue *q)
{
	struct vscsi_tmf *t;

	if (!__atomic_load_n(&q->mbox, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&q->mbox_lock);
	t = q->mbox;
	q->mbox = NULL;
	pthread_mutex_unlock(&q->mbox_lock);
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned int i = 0; i < q->w.vq->size; i++) {
		struct vscsi_req *r = q->slots[i];

		if (!r || !tmf_match(t, r))
			continue;
		t->found++;
		if (t->query || r->tmf)
			continue;
		scsi_disk_abort(&r->s, t->reset);
		r->tmf = t;
		t->reqs_pending++;
	}
	pthread_mutex_unlock(&t->lock);
	tmf_release(t, false, true);
}

/* Pops one chain into a free request and starts it. */
static int vscsi_pop(struct vqworker *w)
{
	struct vscsi_queue *q = to_queue(w);
	struct vscsi_req *r = req_get(q);
	struct virtq_elem e;
	int ret;

	if (!r)
		return 0;
	ret = virtq_pop(w->vq, &e, r->iov, REQ_MAX_IOV);
	if (ret <= 0) {
		req_put(q, r);
		return ret;
	}
	req_start(q, r, &e);
	/* Each request goes to the disk now rather than with the rest of the
	 * batch: a host queue fed one request at a time while the guest
	 * refills keeps the disk busy. */
	blkq_submit(w->bq);
	return 1;
}

static void vscsi_popped(struct vqworker *w)
{
	blkq_submit(w->bq);
	vqworker_notify(w);
}

static void vscsi_scan(struct vqworker *w)
{
	tmf_scan(to_queue(w));
}

static void vscsi_exit(struct vqworker *w)
{
	struct vscsi_queue *q = to_queue(w);

	/* A TMF posted meanwhile finds nothing in flight here. */
	pthread_mutex_lock(&q->mbox_lock);
	q->alive = false;
	pthread_mutex_unlock(&q->mbox_lock);
	tmf_scan(q);
}

static const struct vqworker_ops vscsi_queue_ops = {
	.pop = vscsi_pop,
	.popped = vscsi_popped,
	.scan = vscsi_scan,
	.exit = vscsi_exit,
};

static int pool_init(struct vscsi_queue *q, unsigned int size)
{
	struct vq_pool_array a[] = {
		{ q->reqs, sizeof(*q->reqs), 1 },
		{ q->iovs, sizeof(*q->iovs), 2 * REQ_MAX_IOV },
		{ q->slots, sizeof(*q->slots), 1 },
	};
	int ret = vq_pool_alloc(a, 3, &q->pool_size, size);

	q->reqs = a[0].p;
	q->iovs = a[1].p;
	q->slots = a[2].p;
	if (ret)
		return ret;
	q->free = NULL;
	for (unsigned int i = 0; i < size; i++) {
		q->reqs[i].iov = q->iovs + (size_t)i * 2 * REQ_MAX_IOV;
		q->reqs[i].dat = q->reqs[i].iov + REQ_MAX_IOV;
		q->reqs[i].next = q->free;
		q->free = &q->reqs[i];
		q->slots[i] = NULL;
	}
	return 0;
}

static int req_queue_start(struct vscsi *s, unsigned int index, struct virtq *vq)
{
	struct vscsi_queue *q = &s->q[index - VIRTIO_SCSI_REQ_Q0];
	char name[16];
	int ret;

	if (q->w.running)
		return -EBUSY;
	ret = pool_init(q, vq->size);
	if (ret)
		return ret;
	ret = vqworker_open(&q->w, index, vq, q->pool_size);
	if (ret)
		return ret;
	/* The control thread reads mbox, alive and vq under mbox_lock
	 * (tmf_run) while this queue starts. */
	pthread_mutex_lock(&q->mbox_lock);
	q->mbox = NULL;
	q->alive = true;
	pthread_mutex_unlock(&q->mbox_lock);
	s->unflushed = true;
	snprintf(name, sizeof(name), "iovm-scsi%u", index - VIRTIO_SCSI_REQ_Q0);
	ret = vqworker_run(&q->w, name);
	if (ret) {
		pthread_mutex_lock(&q->mbox_lock);
		q->alive = false;
		pthread_mutex_unlock(&q->mbox_lock);
		vqworker_close(&q->w);
	}
	return ret;
}

static void req_queue_stop(struct vscsi *s, unsigned int index)
{
	vqworker_stop(&s->q[index - VIRTIO_SCSI_REQ_Q0].w,
		      "a virtio-scsi request queue");
}

/* ---- control queue ---- */

/* Posts t to every running request queue and waits until each has marked
 * its requests and every marked request has completed. */
static void tmf_run(struct vscsi *s, struct vscsi_tmf *t)
{
	unsigned int nq = s->dev.num_queues - VIRTIO_SCSI_REQ_Q0;

	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	t->acks_pending = t->reqs_pending = t->found = 0;
	for (unsigned int i = 0; i < nq; i++) {
		struct vscsi_queue *q = &s->q[i];

		pthread_mutex_lock(&q->mbox_lock);
		if (q->alive) {
			pthread_mutex_lock(&t->lock);
			t->acks_pending++;
			pthread_mutex_unlock(&t->lock);
			__atomic_store_n(&q->mbox, t, __ATOMIC_RELEASE);
			/* Woken under the lock: while alive the thread has
			 * not exited, so its queue is not stopped and its
			 * wake fd not closed. */
			qwake_signal(&q->w.wake, "a virtio-scsi request queue");
		}
		pthread_mutex_unlock(&q->mbox_lock);
	}
	pthread_mutex_lock(&t->lock);
	while (t->acks_pending || t->reqs_pending)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}

static uint8_t do_tmf(struct vscsi *s, const uint8_t *req)
{
	uint32_t subtype = le_get32(req + 4);
	const uint8_t *l = req + 8;
	struct vscsi_target *tg = find_target(s, l);
	unsigned int lun = decode_lun(l);
	struct vscsi_tmf t = { 0 };

	if (!tg)
		return VIRTIO_SCSI_S_BAD_TARGET;
	t.target = l[1];
	t.lun = lun;
	t.id = le_get64(req + 16);
	switch (subtype) {
	case VIRTIO_SCSI_T_TMF_ABORT_TASK:
	case VIRTIO_SCSI_T_TMF_QUERY_TASK:
		t.one_task = true;
		break;
	case VIRTIO_SCSI_T_TMF_ABORT_TASK_SET:
	case VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET:
	case VIRTIO_SCSI_T_TMF_QUERY_TASK_SET:
		break;
	case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
		t.reset = true;
		break;
	case VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET:
		t.reset = true;
		t.whole_target = true;
		break;
	case VIRTIO_SCSI_T_TMF_CLEAR_ACA:	/* no ACA (NACA unsupported) */
	default:
		return VIRTIO_SCSI_S_FUNCTION_REJECTED;
	}
	if (!t.whole_target && (lun >= SCSI_MAX_LUNS || !tg->lu[lun]))
		return VIRTIO_SCSI_S_INCORRECT_LUN;
	t.query = subtype == VIRTIO_SCSI_T_TMF_QUERY_TASK ||
		  subtype == VIRTIO_SCSI_T_TMF_QUERY_TASK_SET;
	tmf_run(s, &t);
	if (t.query)
		return t.found ? VIRTIO_SCSI_S_FUNCTION_SUCCEEDED :
				 VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	if (subtype == VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET)
		scsi_disk_reset(tg->lu[lun]->disk, false);
	if (t.whole_target)
		for (unsigned int i = 0; i < SCSI_MAX_LUNS; i++)
			if (tg->lu[i])
				scsi_disk_reset(tg->lu[i]->disk, true);
	return VIRTIO_SCSI_S_FUNCTION_COMPLETE;
}

/* Answers one control request; returns the bytes written. */
static uint32_t ctrl_handle(struct vscsi *s, const struct iovec *iov,
			    const struct virtq_elem *e)
{
	const struct iovec *in = iov + e->out_num;
	uint8_t req[VIRTIO_SCSI_TMF_REQ];
	uint8_t resp[VIRTIO_SCSI_AN_RESP] = { 0 };
	uint32_t type;

	if (e->in_len < 1) {
		pr_guest("virtio-scsi: control request without room for a response");
		return 0;
	}
	if (e->out_len < 4) {
		resp[0] = VIRTIO_SCSI_S_FAILURE;
		return iov_from_buf(in, e->in_num, 0, resp, 1);
	}
	iov_to_buf(iov, e->out_num, 0, req, sizeof(req));
	type = le_get32(req);
	switch (type) {
	case VIRTIO_SCSI_T_TMF:
		resp[0] = e->out_len < VIRTIO_SCSI_TMF_REQ ? VIRTIO_SCSI_S_FAILURE :
							     do_tmf(s, req);
		return iov_from_buf(in, e->in_num, 0, resp, 1);
	case VIRTIO_SCSI_T_AN_QUERY:
	case VIRTIO_SCSI_T_AN_SUBSCRIBE:
		if (e->in_len < VIRTIO_SCSI_AN_RESP) {
			resp[0] = VIRTIO_SCSI_S_FAILURE;
			return iov_from_buf(in, e->in_num, 0, resp, 1);
		}
		/* No asynchronous events are supported: event_actual 0. */
		if (e->out_len < VIRTIO_SCSI_AN_REQ)
			resp[4] = VIRTIO_SCSI_S_FAILURE;
		else if (!find_target(s, req + 4))
			resp[4] = VIRTIO_SCSI_S_BAD_TARGET;
		else
			resp[4] = VIRTIO_SCSI_S_OK;
		return iov_from_buf(in, e->in_num, 0, resp, VIRTIO_SCSI_AN_RESP);
	default:
		resp[0] = VIRTIO_SCSI_S_FAILURE;
		return iov_from_buf(in, e->in_num, 0, resp, 1);
	}
}

static void ctrl_process(struct vscsi *s)
{
	struct iovec iov[CTRL_MAX_IOV];
	struct virtq_elem e;
	int ret;

	if (s->ctrl_broken)
		return;
	while ((ret = virtq_pop(s->ctrl_vq, &e, iov, CTRL_MAX_IOV)) > 0)
		virtq_push(s->ctrl_vq, e.head, ctrl_handle(s, iov, &e));
	if (ret < 0) {
		s->ctrl_broken = true;
		pr_guest("virtio-scsi control queue: malformed descriptor chain; device needs reset");
		if (s->dev.transport.needs_reset)
			s->dev.transport.needs_reset(&s->dev);
	}
	virtq_notify(s->ctrl_vq);
}

static void *ctrl_thread(void *arg)
{
	struct vscsi *s = arg;
	/* Stopped through an eventfd of ours, not the kick fd: a
	 * vhost-user client that reads its own kick eventfd could take a
	 * wakeup away from poll, and queue_stop would wait forever. */
	struct pollfd p[2] = {
		{ .fd = s->ctrl_vq->kick_fd, .events = POLLIN },
		{ .fd = s->ctrl_wake.fd, .events = POLLIN },
	};
	uint64_t v;

	pthread_setname_np(pthread_self(), "iovm-scsi-ctl");
	for (;;) {
		if (read(p[0].fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: no kick pending */
		}
		if (__atomic_load_n(&s->ctrl_stop, __ATOMIC_ACQUIRE))
			break;
		ctrl_process(s);
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
	}
	return NULL;
}

/* ---- virtio_dev_ops ---- */

static int vscsi_queue_start(struct virtio_dev *dev, unsigned int index,
			     struct virtq *vq)
{
	struct vscsi *s = to_vscsi(dev);
	int ret;

	if (index >= dev->num_queues)
		return -EINVAL;
	if (index == VIRTIO_SCSI_EVENT_Q)
		return 0;	/* buffers wait there for events that never come */
	if (index >= VIRTIO_SCSI_REQ_Q0)
		return req_queue_start(s, index, vq);
	if (s->ctrl_running)
		return -EBUSY;
	s->ctrl_vq = vq;
	s->ctrl_stop = s->ctrl_broken = false;
	ret = qwake_open(&s->ctrl_wake);
	if (ret)
		return ret;
	ret = pthread_create(&s->ctrl_thread, NULL, ctrl_thread, s);
	if (ret) {
		qwake_close(&s->ctrl_wake);
		return -ret;
	}
	s->ctrl_running = true;
	return 0;
}

static void vscsi_queue_stop(struct virtio_dev *dev, unsigned int index)
{
	struct vscsi *s = to_vscsi(dev);

	if (index >= dev->num_queues || index == VIRTIO_SCSI_EVENT_Q)
		return;
	if (index >= VIRTIO_SCSI_REQ_Q0) {
		req_queue_stop(s, index);
		return;
	}
	if (!s->ctrl_running)
		return;
	__atomic_store_n(&s->ctrl_stop, true, __ATOMIC_RELEASE);
	qwake_signal(&s->ctrl_wake, "the virtio-scsi control queue");
	pthread_join(s->ctrl_thread, NULL);
	qwake_close(&s->ctrl_wake);
	s->ctrl_running = false;
}

static void config_build(struct vscsi *s, uint8_t *c)
{
	memset(c, 0, VIRTIO_SCSI_CFG_LEN);
	le_put32(c + VIRTIO_SCSI_CFG_NUM_QUEUES, s->dev.num_queues - VIRTIO_SCSI_REQ_Q0);
	le_put32(c + VIRTIO_SCSI_CFG_SEG_MAX, VIRTIO_SCSI_SEG_MAX);
	le_put32(c + VIRTIO_SCSI_CFG_MAX_SECTORS, VIRTIO_SCSI_MAX_SECTORS);
	le_put32(c + VIRTIO_SCSI_CFG_CMD_PER_LUN, VIRTIO_SCSI_QUEUE_SIZE);
	le_put32(c + VIRTIO_SCSI_CFG_EVENT_INFO_SIZE, 16);
	le_put32(c + VIRTIO_SCSI_CFG_SENSE_SIZE,
	      __atomic_load_n(&s->sense_size, __ATOMIC_RELAXED));
	le_put32(c + VIRTIO_SCSI_CFG_CDB_SIZE,
	      __atomic_load_n(&s->cdb_size, __ATOMIC_RELAXED));
	le_put16(c + VIRTIO_SCSI_CFG_MAX_CHANNEL, 0);
	le_put16(c + VIRTIO_SCSI_CFG_MAX_TARGET, s->max_target);
	le_put32(c + VIRTIO_SCSI_CFG_MAX_LUN, VIRTIO_SCSI_MAX_LUN);
}

static void vscsi_config_read(struct virtio_dev *dev, uint32_t offset,
			      void *data, uint32_t len)
{
	uint8_t c[VIRTIO_SCSI_CFG_LEN];

	if (offset > sizeof(c) || len > sizeof(c) - offset)
		return;
	config_build(to_vscsi(dev), c);
	memcpy(data, c + offset, len);
}

/* Only sense_size and cdb_size are writable; values the device cannot
 * honour are ignored (the field keeps its value, as the driver reads). */
static void vscsi_config_write(struct virtio_dev *dev, uint32_t offset,
			       const void *data, uint32_t len)
{
	struct vscsi *s = to_vscsi(dev);
	uint8_t c[VIRTIO_SCSI_CFG_LEN];
	uint32_t sense, cdb;

	if (offset > sizeof(c) || len > sizeof(c) - offset)
		return;
	config_build(s, c);
	memcpy(c + offset, data, len);
	sense = le_get32(c + VIRTIO_SCSI_CFG_SENSE_SIZE);
	cdb = le_get32(c + VIRTIO_SCSI_CFG_CDB_SIZE);
	if (sense <= VIRTIO_SCSI_SENSE_MAX)
		__atomic_store_n(&s->sense_size, sense, __ATOMIC_RELAXED);
	else
		pr_guest("virtio-scsi: sense_size %u refused", sense);
	if (cdb <= VIRTIO_SCSI_CDB_MAX)
		__atomic_store_n(&s->cdb_size, cdb, __ATOMIC_RELAXED);
	else
		pr_guest("virtio-scsi: cdb_size %u refused", cdb);
}

static int vscsi_features_ok(struct virtio_dev *dev)
{
	return 0;
}

/* Every disk once per stop of the queues, however many times the
 * transport asks (vhost-user's disconnect runs again when the server is
 * freed). */
static void vscsi_flush(struct virtio_dev *dev)
{
	struct vscsi *s = to_vscsi(dev);

	if (!s->unflushed)
		return;
	s->unflushed = false;
	for (unsigned int i = VIRTIO_SCSI_REQ_Q0; i < dev->num_queues; i++)
		if (s->q[i - VIRTIO_SCSI_REQ_Q0].w.running)
			s->unflushed = true;	/* still writing */
	for (unsigned int i = 0; i < s->nlus; i++) {
		int ret = blk_flush(&s->lus[i].be);

		if (ret) {
			scsi_disk_count_error(s->lus[i].disk, BLK_OP_FLUSH);
			pr_err("virtio-scsi %s: flush: %s", s->lus[i].path,
			       strerror(-ret));
		}
	}
}

static void vscsi_destroy(struct virtio_dev *dev)
{
	struct vscsi *s = to_vscsi(dev);

	/* The transport flushed already (ops->flush, once the queues
	 * stopped): destroying only frees. */
	for (unsigned int i = 0; i < dev->num_queues; i++)
		vscsi_queue_stop(dev, i);
	for (unsigned int i = 0; i < VIRTIO_SCSI_MAX_QUEUES; i++) {
		free(s->q[i].reqs);
		free(s->q[i].iovs);
		free(s->q[i].slots);
		pthread_mutex_destroy(&s->q[i].mbox_lock);
	}
	for (unsigned int i = 0; i < s->nlus; i++) {
		scsi_disk_destroy(s->lus[i].disk);
		blk_close(&s->lus[i].be);
	}
	free(s->lus);
	free(s);
}

struct blk_backend *virtio_scsi_backend(struct virtio_dev *dev, unsigned int i)
{
	struct vscsi *s = to_vscsi(dev);

	return i < s->nlus ? &s->lus[i].be : NULL;
}

int virtio_scsi_resized(void *dev, struct blk_backend *be)
{
	struct vscsi *s = to_vscsi(dev);

	for (unsigned int i = 0; i < s->nlus; i++) {
		if (&s->lus[i].be == be) {
			scsi_disk_resized(s->lus[i].disk);
			return 0;
		}
	}
	return -ENODEV;
}

static const struct virtio_dev_ops vscsi_ops = {
	.config_read = vscsi_config_read,
	.config_write = vscsi_config_write,
	.features_ok = vscsi_features_ok,
	.queue_start = vscsi_queue_start,
	.queue_stop = vscsi_queue_stop,
	.flush = vscsi_flush,
	.destroy = vscsi_destroy,
};

/* Targets for disks without target=: the lowest ids no disk names. */
static int assign_targets(const struct disk_cfg *const *disks, unsigned int n,
			  unsigned int *target, char *err, size_t errlen)
{
	bool named[NTARGETS] = { false }, used[NTARGETS] = { false };
	unsigned int next = 0;

	for (unsigned int i = 0; i < n; i++)
		if (disks[i]->target_set && disks[i]->target < NTARGETS)
			named[disks[i]->target] = true;
	for (unsigned int i = 0; i < n; i++) {
		if (disks[i]->target_set) {
			target[i] = disks[i]->target;
		} else {
			while (next < NTARGETS && (named[next] || used[next]))
				next++;
			if (next == NTARGETS) {
				snprintf(err, errlen,
					 "%s: no free virtio-scsi target id left (at most %u targets)",
					 disks[i]->path, NTARGETS);
				return -EINVAL;
			}
			target[i] = next;
		}
		if (target[i] >= NTARGETS) {
			snprintf(err, errlen, "%s: target=%u is above %u",
				 disks[i]->path, target[i], NTARGETS - 1);
			return -EINVAL;
		}
		used[target[i]] = true;
		for (unsigned int j = 0; j < i; j++) {
			if (target[j] == target[i] && disks[j]->lun == disks[i]->lun) {
				snprintf(err, errlen,
					 "%s: virtio-scsi target %u lun %u is already %s",
					 disks[i]->path, target[i], disks[i]->lun,
					 disks[j]->path);
				return -EINVAL;
			}
		}
	}
	return 0;
}

struct virtio_dev *virtio_scsi_create(const struct disk_cfg *const *disks,
				      unsigned int n,
				      unsigned int default_queues, char *err,
				      size_t errlen)
{
	unsigned int target[CONFIG_MAX_DISKS], nq = 0;
	const struct blk_backend *be[CONFIG_MAX_DISKS];
	struct blk_spin spin;
	struct vscsi *s;

	if (!n || n > CONFIG_MAX_DISKS) {
		snprintf(err, errlen, "virtio-scsi: %u disks (1 to %u)", n,
			 CONFIG_MAX_DISKS);
		return NULL;
	}
	if (assign_targets(disks, n, target, err, errlen))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s)
		s->lus = calloc(n, sizeof(*s->lus));
	if (!s || !s->lus) {
		free(s);
		snprintf(err, errlen, "virtio-scsi: out of memory");
		return NULL;
	}
	for (unsigned int i = 0; i < VIRTIO_SCSI_MAX_QUEUES; i++) {
		s->q[i].s = s;
		pthread_mutex_init(&s->q[i].mbox_lock, NULL);
	}
	for (unsigned int i = 0; i < n; i++) {
		struct vscsi_lu *lu = &s->lus[i];
		struct vscsi_target *t = &s->t[target[i]];
		unsigned int lun = disks[i]->lun;

		if (blk_open(&lu->be, disks[i], err, errlen))
			goto fail;
		s->nlus++;
		lu->path = disks[i]->path;
		lu->disk = scsi_disk_create(&lu->be, &t->map);
		if (!lu->disk) {
			snprintf(err, errlen, "virtio-scsi: out of memory");
			goto fail;
		}
		if (scsi_disk_pr_setup(lu->disk, disks[i]->pr_state,
				       disks[i]->pr_id, err, errlen))
			goto fail;
		t->present = true;
		t->lu[lun] = lu;
		t->map.bits[lun / 64] |= 1ull << (lun % 64);
		if (target[i] > s->max_target)
			s->max_target = target[i];
		if (disks[i]->queues > nq)
			nq = disks[i]->queues;
		be[i] = &lu->be;
	}
	/* (the queues spin as the disks they serve want: opened first) */
	blk_spin_of(&spin, be, disks, n);
	for (unsigned int i = 0; i < VIRTIO_SCSI_MAX_QUEUES; i++)
		vqworker_init(&s->q[i].w, &vscsi_queue_ops, &s->dev,
			      "virtio-scsi", &spin);
	if (!nq)
		nq = default_queues ? default_queues : 1;
	if (nq > VIRTIO_SCSI_MAX_QUEUES)
		nq = VIRTIO_SCSI_MAX_QUEUES;
	s->sense_size = VIRTIO_SCSI_SENSE_DEFAULT;
	s->cdb_size = VIRTIO_SCSI_CDB_DEFAULT;
	s->dev.name = "virtio-scsi";
	s->dev.device_id = VIRTIO_ID_SCSI;
	s->dev.num_queues = VIRTIO_SCSI_REQ_Q0 + nq;
	s->dev.max_queue_size = VIRTIO_SCSI_QUEUE_SIZE;
	s->dev.config_len = VIRTIO_SCSI_CFG_LEN;
	s->dev.host_features = (1ull << VIRTIO_F_VERSION_1) |
			       (1ull << VIRTIO_F_RING_INDIRECT_DESC) |
			       (1ull << VIRTIO_F_RING_EVENT_IDX);
	s->dev.ops = &vscsi_ops;
	return &s->dev;
fail:
	for (unsigned int i = 0; i < s->nlus; i++) {
		scsi_disk_destroy(s->lus[i].disk);
		blk_close(&s->lus[i].be);
	}
	for (unsigned int i = 0; i < VIRTIO_SCSI_MAX_QUEUES; i++)
		pthread_mutex_destroy(&s->q[i].mbox_lock);
	free(s->lus);
	free(s);
	return NULL;
}
