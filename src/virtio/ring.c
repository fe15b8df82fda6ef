/* Split virtqueue, device side (virtio 1.x, section 2.7). The guest may
 * rewrite any ring field at any time, so each descriptor is copied once and
 * validated on the copy, and every count is bounded before it is used. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/iotrace.h"
#include "lib/log.h"
#include "virtio/ring.h"

#define mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

static inline uint16_t load_acquire16(volatile uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint16_t load16(volatile uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void store_release16(volatile uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline void store16(volatile uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static inline void store_release8(volatile uint8_t *p, uint8_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static int cmp_resubmit(const void *a, const void *b)
{
	const struct virtq_resubmit *x = a, *y = b;

	return x->counter < y->counter ? -1 : x->counter > y->counter;
}

/* Reads the inflight region a previous back-end left (the front-end's
 * copy of it, so every index is checked), or initialises a fresh one.
 * Recovery, for split rings:
 * - A push batch may have been cut short between publishing the used
 *   index and clearing its heads' inflight flags: used_idx then lags the
 *   ring's, and the batch (a list from last_batch_head) is finished. Its
 *   heads went back to the driver, which may already have put one of
 *   them in the avail ring again for a newer request: running it here
 *   would run that request early, and once more when popped.
 * - Every chain popped is either counted in the used index or still
 *   flagged inflight, so popping resumes at used + inflight, after the
 *   flagged chains are popped again in their original order. */
static int inflight_recover(struct virtq *vq)
{
	struct virtq_inflight *inf = vq->inflight;
	struct virtq_inflight_region *r = inf->region;
	uint16_t used = vq->used_idx, n = 0;
	uint64_t max = 0;

	inf->counter = 0;
	inf->pushed = 0;
	inf->recovered = inf->finished = 0;
	inf->nresubmit = inf->next_resubmit = 0;
	if (!__atomic_load_n(&r->version, __ATOMIC_ACQUIRE)) {
		memset(r->desc, 0, vq->size * sizeof(r->desc[0]));
		r->features = 0;
		r->desc_num = vq->size;
		r->last_batch_head = 0;
		r->used_idx = used;
		__atomic_store_n(&r->version, VIRTQ_INFLIGHT_VERSION, __ATOMIC_RELEASE);
		return 0;
	}
	if (r->version != VIRTQ_INFLIGHT_VERSION || r->desc_num != vq->size)
		return -EINVAL;
	if (r->used_idx != used) {
		uint16_t batch = used - r->used_idx, h = r->last_batch_head;

		if (batch > vq->size)
			return -EINVAL;
		for (uint16_t i = 0; i < batch; i++) {
			if (h >= vq->size)
				return -EINVAL;
			store_release8(&r->desc[h].inflight, 0);
			h = r->desc[h].next;
		}
		__atomic_store_n(&r->used_idx, used, __ATOMIC_RELEASE);
		inf->finished = batch;
	}
	for (uint16_t i = 0; i < vq->size; i++) {
		struct virtq_resubmit *e = &inf->resubmit[n];

		if (!__atomic_load_n(&r->desc[i].inflight, __ATOMIC_RELAXED))
			continue;
		/* A private copy: the sort must not see the counters
		 * change under it. */
		e->counter = __atomic_load_n(&r->desc[i].counter, __ATOMIC_RELAXED);
		e->head = i;
		if (e->counter >= max)
			max = e->counter + 1;
		n++;
	}
	qsort(inf->resubmit, n, sizeof(inf->resubmit[0]), cmp_resubmit);
	inf->nresubmit = inf->recovered = n;
	inf->counter = max;
	vq->last_avail = used + n;
	return 0;
}

int virtq_init(struct virtq *vq)
{
	uint64_t n = vq->size;
	uint8_t *used;

	if (!vq->mem || !n || n > VIRTQ_MAX_SIZE || (n & (n - 1)))
		return -EINVAL;
	if ((vq->desc_gpa & 15) || (vq->avail_gpa & 1) || (vq->used_gpa & 3))
		return -EINVAL;
	vq->desc = gmem_ptr(vq->mem, vq->desc_gpa, 16 * n);
	vq->avail = gmem_ptr(vq->mem, vq->avail_gpa, 6 + 2 * n);
	used = gmem_ptr(vq->mem, vq->used_gpa, 6 + 8 * n);
	if (!vq->desc || !vq->avail || !used)
		return -EINVAL;
	vq->used_flags = (volatile uint16_t *)used;
	vq->used_ring = (volatile struct virtq_used_elem *)(used + 4);
	vq->avail_event = (volatile uint16_t *)(used + 4 + 8 * n);
	vq->used_idx = load16(&vq->used_flags[1]);
	if (vq->inflight && inflight_recover(vq))
		return -EINVAL;
	vq->signalled_valid = false;
	/* A ring handed over mid-life (vhost-user reconnect) may still say
	 * "no kicks" from its previous server. */
	vq->kicks_enabled = true;
	store16(&vq->used_flags[0], 0);
	/* Likewise a stale avail_event (ring memory reused after a reset)
	 * would suppress the driver's first kicks and leave the queue idle:
	 * ask for a kick at the next entry. */
	if (vq->event_idx)
		store16(vq->avail_event, vq->last_avail);
	return 0;
}

void virtq_reset_used_idx(struct virtq *vq)
{
	vq->used_idx = 0;
	store16(&vq->used_flags[1], 0);
}

unsigned int virtq_avail_count(struct virtq *vq)
{
	uint16_t n = load_acquire16(&vq->avail[1]) - vq->last_avail;

	return (n > vq->size ? 0 : n) + virtq_inflight_pending(vq);
}

/* Appends the host view of [gpa, gpa+len) to iov, one entry per guest RAM
 * region the range touches (regions may be contiguous in guest-physical
 * space while their host mappings are not). */
static int map_range(const struct gmem *m, uint64_t gpa, uint64_t len,
		     struct iovec *iov, unsigned int *n, unsigned int max)
{
	if (gpa + len < gpa)
		return -EINVAL;
	while (len) {
		const struct gmem_region *r = NULL;
		uint64_t off, chunk;

		for (unsigned int i = 0; i < m->n; i++) {
			if (gpa >= m->r[i].gpa && gpa - m->r[i].gpa < m->r[i].size) {
				r = &m->r[i];
				break;
			}
		}
		if (!r)
			return -EINVAL;
		if (*n >= max)
			return -ENOBUFS;
		off = gpa - r->gpa;
		chunk = r->size - off < len ? r->size - off : len;
		iov[*n].iov_base = r->hva + off;
		iov[*n].iov_len = chunk;
		(*n)++;
		gpa += chunk;
		len -= chunk;
	}
	return 0;
}

/* Chain walk state: the budget bounds the descriptors visited (loops and
 * overlong chains end there) and writing remembers that the readable part
 * is over. */
struct walk {
	struct virtq_elem *elem;
	struct iovec *iov;
	unsigned int max_iov;
	bool writing;
};

static int add_desc(struct virtq *vq, struct walk *w, const struct virtq_desc *d)
{
	struct virtq_elem *elem = w->elem;
	unsigned int n = elem->out_num + elem->in_num, before = n;
	bool wr = d->flags & VIRTQ_DESC_F_WRITE;
	int ret;

	if (!wr && w->writing)
		return -EINVAL;	/* readable after writable */
	w->writing |= wr;
	ret = map_range(vq->mem, d->addr, d->len, w->iov, &n, w->max_iov);
	if (ret)
		return ret;
	if (wr) {
		elem->in_num += n - before;
		elem->in_len += d->len;
	} else {
		elem->out_num += n - before;
		elem->out_len += d->len;
	}
	return 0;
}

/* Walks one descriptor table (the ring's or an indirect one) from index i;
 * at most budget descriptors. */
static int walk(struct virtq *vq, struct walk *w,
		const struct virtq_desc *table, unsigned int tsize,
		unsigned int i, bool nested, unsigned int budget)
{
	for (;;) {
		struct virtq_desc d;
		int ret;

		if (i >= tsize || !budget)
			return -EINVAL;	/* bad index, loop or overlong chain */
		budget--;
		memcpy(&d, (const void *)&table[i], sizeof(d));
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			const struct virtq_desc *ind;
			unsigned int n = d.len / sizeof(struct virtq_desc);

			if (nested || !vq->indirect ||
			    (d.flags & VIRTQ_DESC_F_NEXT) || !d.len ||
			    d.len % sizeof(struct virtq_desc) ||
			    n > VIRTQ_MAX_SIZE)
				return -EINVAL;
			ind = gmem_ptr(vq->mem, d.addr, d.len);
			if (!ind)
				return -EINVAL;
			/* Each entry of the table is visited at most once. */
			return walk(vq, w, ind, n, 0, true, n);
		}
		ret = add_desc(vq, w, &d);
		if (ret)
			return ret;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		i = d.next;
	}
}

/* Pops the next chain recovered from the inflight region. */
static int pop_resubmit(struct virtq *vq, struct virtq_elem *elem,
			struct walk *w)
{
	struct virtq_inflight *inf = vq->inflight;
	uint16_t head = inf->resubmit[inf->next_resubmit++].head;
	int ret;

	elem->head = head;
	elem->out_num = elem->in_num = 0;
	elem->out_len = elem->in_len = 0;
	__atomic_store_n(&inf->region->desc[head].counter, inf->counter++,
			 __ATOMIC_RELAXED);
	ret = walk(vq, w, vq->desc, vq->size, head, false, vq->size);
	return ret ? ret : 1;
}

/* Records a popped head before the device can act on it: its pop order,
 * then the flag (release: a flagged head always has its counter). */
static void inflight_get(struct virtq *vq, uint16_t head)
{
	struct virtq_inflight *inf = vq->inflight;

	__atomic_store_n(&inf->region->desc[head].counter, inf->counter++,
			 __ATOMIC_RELAXED);
	store_release8(&inf->region->desc[head].inflight, 1);
}

#ifdef IOVM_IO_TRACE
/* IOT_POP's arg: the size of the chain's larger part, and its direction. */
static inline uint32_t pop_trace_arg(const struct virtq_elem *e)
{
	uint64_t n = e->in_len > e->out_len ? e->in_len : e->out_len;

	return (n < 0x7fffffffu ? (uint32_t)n : 0x7fffffffu) |
	       (e->in_len > e->out_len ? 1u << 31 : 0);
}
#endif

int virtq_pop(struct virtq *vq, struct virtq_elem *elem, struct iovec *iov,
	      unsigned int max_iov)
{
	uint16_t avail_idx;
	uint16_t head;
	struct walk w = { elem, iov, max_iov, false };
	int ret;

	if (vq->inflight && virtq_inflight_pending(vq))
		return pop_resubmit(vq, elem, &w);
	avail_idx = load_acquire16(&vq->avail[1]);
	if (avail_idx == vq->last_avail)
		return 0;
	if ((uint16_t)(avail_idx - vq->last_avail) > vq->size)
		return -EINVAL;
	head = load16(&vq->avail[2 + (vq->last_avail & (vq->size - 1))]);
	if (head >= vq->size)
		return -EINVAL;
	vq->last_avail++;
	elem->head = head;
	elem->out_num = elem->in_num = 0;
	elem->out_len = elem->in_len = 0;
	ret = walk(vq, &w, vq->desc, vq->size, head, false, vq->size);
	if (ret)
		return ret;
	if (vq->inflight)
		inflight_get(vq, head);
	if (vq->event_idx && vq->kicks_enabled)
		store16(vq->avail_event, vq->last_avail);
	iotrace(IOT_POP, head, pop_trace_arg(elem));
	return 1;
}

/* Push order with inflight tracking, a batch of one, exactly as the
 * specification gives it, in VIRTQ_PUSH_STEPS steps: (1) link the head
 * into the batch list (desc.next) and (2) name it the batch
 * (last_batch_head), (3) write the used element and (4) publish the used
 * index, (5) clear the head's flag, (6) record the used index.
 * The flag must stay set until the driver can see the push: cleared
 * earlier, a back-end dying in between would leave a request that
 * neither the driver nor the next back-end completes. And the region's
 * used_idx must move only after the flag: while it lags the ring's,
 * inflight_recover knows the batch was published and clears its flags
 * rather than run its heads again. A back-end that dies after any step
 * thus leaves a region from which inflight_recover reaches the state
 * after the push, or the state before it (flag set, nothing published).
 * steps < VIRTQ_PUSH_STEPS stops early, as such a death would (tests). */
static inline void inflight_put(struct virtq *vq, uint16_t head, uint32_t len,
				unsigned int steps)
{
	struct virtq_inflight_region *r = vq->inflight->region;
	volatile struct virtq_used_elem *e =
		&vq->used_ring[vq->used_idx & (vq->size - 1)];

	if (steps < 1)
		return;
	__atomic_store_n(&r->desc[head].next, r->last_batch_head, __ATOMIC_RELAXED);
	if (steps < 2)
		return;
	__atomic_store_n(&r->last_batch_head, head, __ATOMIC_RELEASE);
	if (steps < 3)
		return;
	e->id = head;
	e->len = len;
	if (steps < 4)
		return;
	vq->used_idx++;
	store_release16(&vq->used_flags[1], vq->used_idx);
	if (steps < 5)
		return;
	store_release8(&r->desc[head].inflight, 0);
	if (steps < 6)
		return;
	__atomic_store_n(&r->used_idx, vq->used_idx, __ATOMIC_RELEASE);
}

_Static_assert(VIRTQ_PUSH_STEPS == 6, "inflight_put has 6 steps");

void virtq_push_partial(struct virtq *vq, uint16_t head, uint32_t len,
			unsigned int steps)
{
	if (vq->inflight)
		inflight_put(vq, head, len, steps);
}

/* The test hook: past stop_after pushes, the chain stays in flight. */
static bool inflight_stopped(struct virtq_inflight *inf)
{
	if (!inf->stop_after || inf->pushed < inf->stop_after)
		return false;
	if (inf->pushed++ == inf->stop_after)
		pr_info("test-stop-after: %" PRIu64 " requests completed on the "
			"queue, completing no more", inf->stop_after);
	return true;
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t len)
{
	volatile struct virtq_used_elem *e;

	if (vq->inflight) {
		if (inflight_stopped(vq->inflight))
			return;
		vq->inflight->pushed++;
		inflight_put(vq, head, len, VIRTQ_PUSH_STEPS);
		iotrace(IOT_PUSH, head, len);
		return;
	}
	e = &vq->used_ring[vq->used_idx & (vq->size - 1)];
	e->id = head;
	e->len = len;
	vq->used_idx++;
	store_release16(&vq->used_flags[1], vq->used_idx);
	iotrace(IOT_PUSH, head, len);
}

bool virtq_notify(struct virtq *vq)
{
	uint16_t old = vq->signalled_used, now = vq->used_idx;
	bool need;
	uint64_t one = 1;

	/* Our used idx store must be visible before we read the driver's
	 * suppression state, or we could miss its re-enable. */
	mb();
	if (vq->event_idx) {
		uint16_t event = load16(&vq->avail[2 + vq->size]);

		need = !vq->signalled_valid ||
		       (uint16_t)(now - event - 1) < (uint16_t)(now - old);
	} else {
		need = !(load16(&vq->avail[0]) & VIRTQ_AVAIL_F_NO_INTERRUPT);
	}
	if (vq->signalled_valid && old == now)
		need = false;
	vq->signalled_used = now;
	vq->signalled_valid = true;
	if (!need || vq->call_fd < 0) {
		iotrace(IOT_NOTIFY_SKIPPED, 0, (uint16_t)(now - old));
		return false;
	}
	if (vq->isr)
		__atomic_fetch_or(vq->isr, 1, __ATOMIC_SEQ_CST);
	if (write(vq->call_fd, &one, sizeof(one)) < 0)
		return false;
	iotrace(IOT_NOTIFY, 0, (uint16_t)(now - old));
	return true;
}

void virtq_disable_kicks(struct virtq *vq)
{
	if (!vq->kicks_enabled)
		return;
	vq->kicks_enabled = false;
	/* With event idx, an avail_event behind last_avail suppresses
	 * further kicks (the driver kicks only when its index crosses it);
	 * without it the flag says so. */
	if (vq->event_idx)
		store16(vq->avail_event, (uint16_t)(vq->last_avail - 1));
	else
		store16(&vq->used_flags[0], VIRTQ_USED_F_NO_NOTIFY);
}

bool virtq_enable_kicks(struct virtq *vq)
{
	vq->kicks_enabled = true;
	if (vq->event_idx)
		store16(vq->avail_event, vq->last_avail);
	else
		store16(&vq->used_flags[0], 0);
	/* The re-enable must be visible before we look at avail idx again:
	 * otherwise a driver that saw kicks disabled and a device that saw no
	 * new entries would both go to sleep. */
	mb();
	return load_acquire16(&vq->avail[1]) != vq->last_avail ||
	       virtq_inflight_pending(vq);
}
