/* A test virtio driver over fake guest RAM (see vdriver.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vdriver.h"

static void on_needs_reset(struct virtio_dev *dev)
{
	struct vdriver *d = dev->transport.opaque;

	__atomic_fetch_add(&d->needs_reset, 1, __ATOMIC_SEQ_CST);
}

static int on_config_changed(struct virtio_dev *dev)
{
	struct vdriver *d = dev->transport.opaque;

	__atomic_fetch_add(&d->config_changed, 1, __ATOMIC_SEQ_CST);
	return 0;
}

int vdriver_init(struct vdriver *d, uint64_t ram_size)
{
	memset(d, 0, sizeof(*d));
	if (ram_size % (2u << 20) || !ram_size)
		return -EINVAL;
	d->ram_size = ram_size;
	for (int i = 0; i < 2; i++) {
		d->ram[i] = aligned_alloc(4096, ram_size / 2);
		if (!d->ram[i])
			return -ENOMEM;
		memset(d->ram[i], 0, ram_size / 2);
		d->mem.r[i].gpa = i * (ram_size / 2);
		d->mem.r[i].size = ram_size / 2;
		d->mem.r[i].hva = d->ram[i];
	}
	d->mem.n = 2;
	d->brk = 4096;	/* keep gpa 0 unused: a NULL-like address */
	for (int i = 0; i < VDRIVER_MAX_QUEUES; i++) {
		d->q[i].vq.kick_fd = -1;
		d->q[i].vq.call_fd = -1;
	}
	return 0;
}

void vdriver_destroy(struct vdriver *d)
{
	if (d->dev) {
		for (unsigned int i = 0; i < VDRIVER_MAX_QUEUES; i++)
			vdriver_queue_stop(d, i);
		if (d->dev->ops && d->dev->ops->destroy)
			d->dev->ops->destroy(d->dev);
		d->dev = NULL;
	}
	for (int i = 0; i < VDRIVER_MAX_QUEUES; i++) {
		if (d->q[i].vq.kick_fd >= 0)
			close(d->q[i].vq.kick_fd);
		if (d->q[i].vq.call_fd >= 0)
			close(d->q[i].vq.call_fd);
		d->q[i].vq.kick_fd = d->q[i].vq.call_fd = -1;
	}
	free(d->ram[0]);
	free(d->ram[1]);
	d->ram[0] = d->ram[1] = NULL;
}

int vdriver_attach(struct vdriver *d, struct virtio_dev *dev, uint64_t drop)
{
	d->dev = dev;
	dev->mem = &d->mem;
	dev->transport.needs_reset = on_needs_reset;
	dev->transport.config_changed = on_config_changed;
	dev->transport.opaque = d;
	dev->guest_features = dev->host_features & ~drop;
	return dev->ops && dev->ops->features_ok ? dev->ops->features_ok(dev) : 0;
}

uint64_t vdriver_alloc(struct vdriver *d, uint64_t len)
{
	uint64_t gpa = (d->brk + 63) & ~63ull;
	uint64_t half = d->ram_size / 2;

	/* Driver structures never straddle the two regions unless a test
	 * asks for that explicitly with its own addresses. */
	if (gpa < half && gpa + len > half)
		gpa = half;
	if (gpa + len > d->ram_size)
		return 0;
	d->brk = gpa + len;
	memset(vdriver_ptr(d, gpa, len), 0, len);
	return gpa;
}

void *vdriver_ptr(struct vdriver *d, uint64_t gpa, uint64_t len)
{
	return gmem_ptr(&d->mem, gpa, len);
}

int vdriver_queue_setup(struct vdriver *d, unsigned int qi, uint16_t size)
{
	struct vdq *q = &d->q[qi];
	bool evidx = virtio_has_feature(d->dev, VIRTIO_F_RING_EVENT_IDX);

	if (qi >= VDRIVER_MAX_QUEUES || size > VDRIVER_MAX_SIZE)
		return -EINVAL;
	q->size = size;
	q->desc_gpa = vdriver_alloc(d, 16u * size);
	q->avail_gpa = vdriver_alloc(d, 6 + 2u * size);
	q->used_gpa = vdriver_alloc(d, 6 + 8u * size);
	if (!q->desc_gpa || !q->avail_gpa || !q->used_gpa)
		return -ENOMEM;
	q->avail_idx = q->last_used = 0;
	q->free_head = 0;
	q->num_free = size;
	for (unsigned int i = 0; i < size; i++)
		vdriver_desc(d, qi, i)->next = i + 1;
	if (q->vq.kick_fd < 0)
		q->vq.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->vq.call_fd < 0)
		q->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->vq.mem = &d->mem;
	q->vq.size = size;
	q->vq.desc_gpa = q->desc_gpa;
	q->vq.avail_gpa = q->avail_gpa;
	q->vq.used_gpa = q->used_gpa;
	q->vq.isr = NULL;
	q->vq.event_idx = evidx;
	q->vq.indirect = virtio_has_feature(d->dev, VIRTIO_F_RING_INDIRECT_DESC);
	q->vq.last_avail = 0;
	return virtq_init(&q->vq);
}

int vdriver_queue_start(struct vdriver *d, unsigned int qi, uint16_t size)
{
	int ret = vdriver_queue_setup(d, qi, size);

	if (ret)
		return ret;
	ret = d->dev->ops->queue_start(d->dev, qi, &d->q[qi].vq);
	if (!ret)
		d->q[qi].started = true;
	return ret;
}

void vdriver_queue_stop(struct vdriver *d, unsigned int qi)
{
	if (!d->q[qi].started)
		return;
	d->dev->ops->queue_stop(d->dev, qi);
	d->q[qi].started = false;
}

struct virtq_desc *vdriver_desc(struct vdriver *d, unsigned int qi,
				unsigned int i)
{
	struct vdq *q = &d->q[qi];

	return vdriver_ptr(d, q->desc_gpa + 16ull * (i % q->size), 16);
}

static uint16_t *avail(struct vdriver *d, struct vdq *q)
{
	return vdriver_ptr(d, q->avail_gpa, 6 + 2u * q->size);
}

static uint16_t *used_hdr(struct vdriver *d, struct vdq *q)
{
	return vdriver_ptr(d, q->used_gpa, 6 + 8u * q->size);
}

void vdriver_publish(struct vdriver *d, unsigned int qi, uint16_t head)
{
	struct vdq *q = &d->q[qi];
	uint16_t *a = avail(d, q);

	a[2 + (q->avail_idx & (q->size - 1))] = head;
	q->avail_idx++;
	if (!q->hold_avail)
		__atomic_store_n(&a[1], q->avail_idx, __ATOMIC_RELEASE);
}

void vdriver_hold_avail(struct vdriver *d, unsigned int qi, bool hold)
{
	struct vdq *q = &d->q[qi];

	q->hold_avail = hold;
	if (!hold)
		__atomic_store_n(&avail(d, q)[1], q->avail_idx, __ATOMIC_RELEASE);
}

int vdriver_add(struct vdriver *d, unsigned int qi, const struct vbuf *b,
		unsigned int n, bool indirect)
{
	struct vdq *q = &d->q[qi];
	unsigned int need = indirect ? 1 : n;
	uint16_t head = q->free_head, i = head;

	if (!n || q->num_free < need)
		return -ENOSPC;
	if (indirect) {
		uint64_t t = vdriver_alloc(d, 16ull * n);
		struct virtq_desc *tab = vdriver_ptr(d, t, 16ull * n);
		struct virtq_desc *desc = vdriver_desc(d, qi, head);

		if (!t)
			return -ENOMEM;
		for (unsigned int k = 0; k < n; k++) {
			tab[k].addr = b[k].gpa;
			tab[k].len = b[k].len;
			tab[k].flags = (b[k].write ? VIRTQ_DESC_F_WRITE : 0) |
				       (k + 1 < n ? VIRTQ_DESC_F_NEXT : 0);
			tab[k].next = k + 1;
		}
		q->free_head = desc->next;
		desc->addr = t;
		desc->len = 16 * n;
		desc->flags = VIRTQ_DESC_F_INDIRECT;
		q->indirect_gpa[head] = t;
	} else {
		for (unsigned int k = 0; k < n; k++) {
			struct virtq_desc *desc = vdriver_desc(d, qi, i);

			desc->addr = b[k].gpa;
			desc->len = b[k].len;
			desc->flags = (b[k].write ? VIRTQ_DESC_F_WRITE : 0) |
				      (k + 1 < n ? VIRTQ_DESC_F_NEXT : 0);
			if (k + 1 < n)
				i = desc->next;
			else
				q->free_head = desc->next;
		}
		q->indirect_gpa[head] = 0;
	}
	q->num_free -= need;
	q->chain_len[head] = need;
	vdriver_publish(d, qi, head);
	return head;
}

void vdriver_kick(struct vdriver *d, unsigned int qi)
{
	uint64_t one = 1;

	if (write(d->q[qi].vq.kick_fd, &one, sizeof(one)) != sizeof(one))
		abort();
}

bool vdriver_kick_needed(struct vdriver *d, unsigned int qi, uint16_t old,
			 uint16_t new_idx)
{
	struct vdq *q = &d->q[qi];
	uint16_t *u = used_hdr(d, q);

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (q->vq.event_idx) {
		uint16_t ev = __atomic_load_n(&u[2 + 4 * q->size], __ATOMIC_RELAXED);

		return (uint16_t)(new_idx - ev - 1) < (uint16_t)(new_idx - old);
	}
	return !(__atomic_load_n(&u[0], __ATOMIC_RELAXED) & VIRTQ_USED_F_NO_NOTIFY);
}

/* Puts a completed chain's descriptors back on the free list. */
static void free_chain(struct vdriver *d, unsigned int qi, uint16_t head)
{
	struct vdq *q = &d->q[qi];
	uint16_t i = head, n = q->chain_len[head];

	if (head >= q->size || !n)
		return;
	for (uint16_t k = 1; k < n; k++)
		i = vdriver_desc(d, qi, i)->next;
	vdriver_desc(d, qi, i)->next = q->free_head;
	q->free_head = head;
	q->num_free += n;
	q->chain_len[head] = 0;
}

static int take_used(struct vdriver *d, unsigned int qi, uint32_t *id,
		     uint32_t *len)
{
	struct vdq *q = &d->q[qi];
	uint16_t *u = used_hdr(d, q);
	struct virtq_used_elem *ring = (struct virtq_used_elem *)(u + 2);
	uint16_t idx = __atomic_load_n(&u[1], __ATOMIC_ACQUIRE);
	struct virtq_used_elem e;

	if (idx == q->last_used)
		return 0;
	e = ring[q->last_used & (q->size - 1)];
	q->last_used++;
	/* Ask for an interrupt on the next completion (event index). */
	avail(d, q)[2 + q->size] = q->last_used;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*id = e.id;
	*len = e.len;
	free_chain(d, qi, e.id);
	return 1;
}

static uint64_t drain_calls(struct vdq *q)
{
	uint64_t v = 0;

	if (read(q->vq.call_fd, &v, sizeof(v)) == sizeof(v))
		q->calls += v;
	return v;
}

int vdriver_wait_used(struct vdriver *d, unsigned int qi, uint32_t *id,
		      uint32_t *len, int timeout_ms)
{
	struct vdq *q = &d->q[qi];
	struct pollfd p = { .fd = q->vq.call_fd, .events = POLLIN };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long ms;

		if (take_used(d, qi, id, len))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= timeout_ms)
			return take_used(d, qi, id, len);
		/* The interrupt is counted, not lost, for vdriver_calls. */
		if (poll(&p, 1, 10) > 0)
			drain_calls(q);
	}
}

uint64_t vdriver_calls(struct vdriver *d, unsigned int qi)
{
	struct vdq *q = &d->q[qi];
	uint64_t v;

	drain_calls(q);
	v = q->calls;
	q->calls = 0;
	return v;
}

void vdriver_set_used_event(struct vdriver *d, unsigned int qi, uint16_t v)
{
	struct vdq *q = &d->q[qi];

	__atomic_store_n(&avail(d, q)[2 + q->size], v, __ATOMIC_RELEASE);
}

void vdriver_set_avail_flags(struct vdriver *d, unsigned int qi, uint16_t f)
{
	__atomic_store_n(&avail(d, &d->q[qi])[0], f, __ATOMIC_RELEASE);
}
