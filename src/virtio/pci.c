/* virtio-pci modern transport. Register accesses arrive on vCPU threads
 * (or the virtio-pcidev thread for UML); queue kicks never do where the
 * host has ioeventfds (KVM signals the queue's eventfd, which the device's
 * I/O thread waits on), and interrupts leave through eventfds that pci.c
 * binds to the host's routes (irqfds under KVM). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hw/pci.h"
#include "lib/log.h"
#include "virtio/pci.h"
#include "virtio/ring.h"

#define VPCI_MAX_QUEUES 65

struct vpci_queue {
	struct virtq vq;
	uint16_t size;
	uint16_t vector;
	bool enabled;
	bool started;
	uint64_t desc, avail, used;
	int kick_fd;
	int call_fd;
};

struct vpci {
	struct virtio_dev *dev;
	struct pci_dev *pd;
	pthread_mutex_t lock;		/* common config: several vCPUs */
	uint32_t dfselect, gfselect;
	uint64_t gfeatures;		/* being negotiated */
	uint16_t config_vector;
	uint8_t status;			/* atomic: the I/O threads set NEEDS_RESET */
	uint8_t isr;			/* atomic: bit 0 queue, bit 1 config */
	uint16_t qsel;
	int config_fd;
	uint64_t notify_base;		/* guest address of the notify area */
	bool notify_mapped;
	unsigned int pcicfg_off;	/* the PCI_CFG capability */
	unsigned int nq;
	struct vpci_queue q[VPCI_MAX_QUEUES];
};

/* --- interrupts -------------------------------------------------------- */

static void raise_config(struct vpci *v)
{
	uint64_t one = 1;

	__atomic_fetch_or(&v->isr, 2, __ATOMIC_SEQ_CST);
	if (write(v->config_fd, &one, sizeof(one)) < 0)
		pr_warn("virtio-pci: config interrupt: %s", strerror(errno));
}

static void t_needs_reset(struct virtio_dev *dev)
{
	struct vpci *v = dev->transport.opaque;

	/* Only atomics here: this runs on an I/O thread, possibly while a
	 * vCPU holding v->lock waits for that thread in queue_stop. */
	__atomic_fetch_or(&v->status, VIRTIO_STATUS_NEEDS_RESET, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&v->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_DRIVER_OK)
		raise_config(v);
}

static int t_config_changed(struct virtio_dev *dev)
{
	struct vpci *v = dev->transport.opaque;

	/* Before DRIVER_OK the driver reads config space as it sets up: no
	 * interrupt for it to take yet. */
	if (!(__atomic_load_n(&v->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_DRIVER_OK))
		return -ENOTCONN;
	raise_config(v);
	return 0;
}

static bool intx_pending(struct pci_dev *pd)
{
	struct vpci *v = pci_dev_opaque(pd);

	return __atomic_load_n(&v->isr, __ATOMIC_SEQ_CST) != 0;
}

/* --- queue notifications ----------------------------------------------- */

static void notify_register(struct vpci *v, bool assign)
{
	for (unsigned int i = 0; i < v->nq; i++) {
		int ret = pci_ioeventfd(v->pd, v->notify_base + VPCI_NOTIFY_MULT * i,
					2, v->q[i].kick_fd, assign);

		/* Without it kicks still work, through the BAR handler. */
		if (ret && assign && ret != -EOPNOTSUPP)
			pr_warn("virtio-pci: ioeventfd for queue %u: %s", i,
				strerror(-ret));
	}
}

static void bar_mapped(struct pci_dev *pd, unsigned int bar, uint64_t addr,
		       bool mapped)
{
	struct vpci *v = pci_dev_opaque(pd);

	if (bar != 0)
		return;
	if (v->notify_mapped)
		notify_register(v, false);
	v->notify_mapped = mapped;
	v->notify_base = addr + VPCI_NOTIFY_OFF;
	if (mapped)
		notify_register(v, true);
}

/* --- queues and status ------------------------------------------------- */

static void queue_defaults(struct vpci *v, struct vpci_queue *q)
{
	q->size = v->dev->max_queue_size;
	q->vector = PCI_NO_VECTOR;
	q->enabled = false;
	q->desc = q->avail = q->used = 0;
	pci_irq_bind(v->pd, q->call_fd, PCI_NO_VECTOR);
}

static void mark_needs_reset(struct vpci *v, const char *why, unsigned int qi)
{
	pr_guest("%s: queue %u: %s; device needs reset", v->dev->name, qi, why);
	t_needs_reset(v->dev);
}

static void queue_start(struct vpci *v, unsigned int i)
{
	struct vpci_queue *q = &v->q[i];
	int ret;

	if (q->started || !q->enabled)
		return;
	q->vq.mem = v->dev->mem;
	q->vq.size = q->size;
	q->vq.desc_gpa = q->desc;
	q->vq.avail_gpa = q->avail;
	q->vq.used_gpa = q->used;
	q->vq.kick_fd = q->kick_fd;
	q->vq.call_fd = q->call_fd;
	q->vq.isr = &v->isr;
	q->vq.event_idx = virtio_has_feature(v->dev, VIRTIO_F_RING_EVENT_IDX);
	q->vq.indirect = virtio_has_feature(v->dev, VIRTIO_F_RING_INDIRECT_DESC);
	q->vq.last_avail = 0;
	if (q->size > v->dev->max_queue_size || virtq_init(&q->vq)) {
		mark_needs_reset(v, "ring outside guest RAM or bad size", i);
		return;
	}
	virtq_reset_used_idx(&q->vq);
	ret = v->dev->ops->queue_start(v->dev, i, &q->vq);
	if (ret) {
		mark_needs_reset(v, strerror(-ret), i);
		return;
	}
	q->started = true;
}

static void stop_queues(struct vpci *v)
{
	for (unsigned int i = 0; i < v->nq; i++) {
		if (!v->q[i].started)
			continue;
		v->dev->ops->queue_stop(v->dev, i);
		v->q[i].started = false;
	}
}

static void device_reset(struct vpci *v)
{
	uint64_t cnt;

	stop_queues(v);
	for (unsigned int i = 0; i < v->nq; i++) {
		queue_defaults(v, &v->q[i]);
		/* Drop kicks and interrupts of the old session. */
		if (read(v->q[i].kick_fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			pr_warn("virtio-pci: reset: %s", strerror(errno));
		if (read(v->q[i].call_fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			pr_warn("virtio-pci: reset: %s", strerror(errno));
	}
	v->dev->guest_features = 0;
	v->gfeatures = 0;
	v->dfselect = v->gfselect = 0;
	v->qsel = 0;
	v->config_vector = PCI_NO_VECTOR;
	pci_irq_bind(v->pd, v->config_fd, PCI_NO_VECTOR);
	__atomic_store_n(&v->isr, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&v->status, 0, __ATOMIC_SEQ_CST);
}

static void status_write(struct vpci *v, uint8_t val)
{
	uint8_t old = __atomic_load_n(&v->status, __ATOMIC_SEQ_CST);

	if (!val) {
		device_reset(v);
		return;
	}
	/* Only a reset clears status bits (the driver must not, 2.1.2):
	 * dropping FEATURES_OK would reopen feature negotiation and change
	 * guest_features under running queue threads. */
	val |= old & ~VIRTIO_STATUS_NEEDS_RESET;
	if ((val & VIRTIO_STATUS_FEATURES_OK) && !(old & VIRTIO_STATUS_FEATURES_OK)) {
		uint64_t f = v->gfeatures;

		/* A subset of what we offer, and modern: else refuse by
		 * leaving FEATURES_OK clear (the driver checks). */
		if ((f & ~v->dev->host_features) ||
		    !(f & (1ull << VIRTIO_F_VERSION_1))) {
			val &= ~VIRTIO_STATUS_FEATURES_OK;
		} else {
			v->dev->guest_features = f;
			if (v->dev->ops->features_ok && v->dev->ops->features_ok(v->dev))
				val &= ~VIRTIO_STATUS_FEATURES_OK;
		}
	}
	if ((val & VIRTIO_STATUS_DRIVER_OK) && !(old & VIRTIO_STATUS_FEATURES_OK) &&
	    !(val & VIRTIO_STATUS_FEATURES_OK))
		val &= ~VIRTIO_STATUS_DRIVER_OK;	/* out of order */
	/* NEEDS_RESET is ours to set, never the driver's to clear, and an
	 * I/O thread may set it right now: keep it through a CAS. */
	val &= ~VIRTIO_STATUS_NEEDS_RESET;
	while (!__atomic_compare_exchange_n(&v->status, &old,
					    val | (old & VIRTIO_STATUS_NEEDS_RESET),
					    false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	val |= old & VIRTIO_STATUS_NEEDS_RESET;
	if ((val & VIRTIO_STATUS_DRIVER_OK) && !(old & VIRTIO_STATUS_DRIVER_OK) &&
	    !(val & VIRTIO_STATUS_NEEDS_RESET)) {
		for (unsigned int i = 0; i < v->nq; i++)
			queue_start(v, i);
	}
}

/* --- common configuration ---------------------------------------------- */

static uint64_t common_read(struct vpci *v, unsigned int off)
{
	struct vpci_queue *q = v->qsel < v->nq ? &v->q[v->qsel] : NULL;

	switch (off) {
	case VPCI_DFSELECT:
		return v->dfselect;
	case VPCI_DF:
		return v->dfselect < 2 ? (uint32_t)(v->dev->host_features >> (32 * v->dfselect)) : 0;
	case VPCI_GFSELECT:
		return v->gfselect;
	case VPCI_GF:
		return v->gfselect < 2 ? (uint32_t)(v->gfeatures >> (32 * v->gfselect)) : 0;
	case VPCI_MSIX_CONFIG:
		return v->config_vector;
	case VPCI_NUM_QUEUES:
		return v->nq;
	case VPCI_STATUS:
		return __atomic_load_n(&v->status, __ATOMIC_SEQ_CST);
	case VPCI_CFG_GENERATION:
		return (uint8_t)__atomic_load_n(&v->dev->config_gen, __ATOMIC_SEQ_CST);
	case VPCI_Q_SELECT:
		return v->qsel;
	case VPCI_Q_SIZE:
		return q ? q->size : 0;
	case VPCI_Q_MSIX:
		return q ? q->vector : PCI_NO_VECTOR;
	case VPCI_Q_ENABLE:
		return q ? q->enabled : 0;
	case VPCI_Q_NOFF:
		return q ? v->qsel : 0;
	case VPCI_Q_DESC:
		return q ? q->desc : 0;
	case VPCI_Q_DESC + 4:
		return q ? q->desc >> 32 : 0;
	case VPCI_Q_AVAIL:
		return q ? q->avail : 0;
	case VPCI_Q_AVAIL + 4:
		return q ? q->avail >> 32 : 0;
	case VPCI_Q_USED:
		return q ? q->used : 0;
	case VPCI_Q_USED + 4:
		return q ? q->used >> 32 : 0;
	}
	return 0;
}

static void set_half(uint64_t *p, unsigned int hi, uint64_t val, unsigned int len)
{
	if (len == 8 && !hi) {
		*p = val;
		return;
	}
	if (hi)
		*p = (*p & 0xffffffffull) | (val << 32);
	else
		*p = (*p & ~0xffffffffull) | (uint32_t)val;
}

static uint16_t valid_vector(struct vpci *v, uint16_t vec)
{
	return vec < v->nq + 1 ? vec : PCI_NO_VECTOR;
}

static void common_write(struct vpci *v, unsigned int off, uint64_t val,
			 unsigned int len)
{
	struct vpci_queue *q = v->qsel < v->nq ? &v->q[v->qsel] : NULL;
	/* Queue registers are frozen once the queue runs. */
	bool q_rw = q && !q->started && !q->enabled;

	switch (off) {
	case VPCI_DFSELECT:
		v->dfselect = val;
		return;
	case VPCI_GFSELECT:
		v->gfselect = val;
		return;
	case VPCI_GF:
		if (v->gfselect < 2 &&
		    !(__atomic_load_n(&v->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_FEATURES_OK))
			set_half(&v->gfeatures, v->gfselect, (uint32_t)val, 4);
		return;
	case VPCI_MSIX_CONFIG:
		v->config_vector = valid_vector(v, val);
		pci_irq_bind(v->pd, v->config_fd, v->config_vector);
		return;
	case VPCI_STATUS:
		status_write(v, val);
		return;
	case VPCI_Q_SELECT:
		v->qsel = val;
		return;
	case VPCI_Q_SIZE:
		if (q_rw)
			q->size = val;
		return;
	case VPCI_Q_MSIX:
		if (!q)
			return;
		q->vector = valid_vector(v, val);
		pci_irq_bind(v->pd, q->call_fd, q->vector);
		return;
	case VPCI_Q_ENABLE:
		if (!q || val != 1 || q->enabled)
			return;
		q->enabled = true;
		if (__atomic_load_n(&v->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_DRIVER_OK)
			queue_start(v, v->qsel);
		return;
	case VPCI_Q_DESC:
	case VPCI_Q_DESC + 4:
		if (q_rw)
			set_half(&q->desc, off & 4, val, len);
		return;
	case VPCI_Q_AVAIL:
	case VPCI_Q_AVAIL + 4:
		if (q_rw)
			set_half(&q->avail, off & 4, val, len);
		return;
	case VPCI_Q_USED:
	case VPCI_Q_USED + 4:
		if (q_rw)
			set_half(&q->used, off & 4, val, len);
		return;
	}
}

/* Field widths of the common structure, to refuse misaligned or partial
 * accesses (they read as zero and are dropped when written). */
static unsigned int field_len(unsigned int off)
{
	switch (off) {
	case VPCI_DFSELECT: case VPCI_DF: case VPCI_GFSELECT: case VPCI_GF:
		return 4;
	case VPCI_STATUS: case VPCI_CFG_GENERATION:
		return 1;
	case VPCI_Q_DESC: case VPCI_Q_AVAIL: case VPCI_Q_USED:
		return 8;
	case VPCI_Q_DESC + 4: case VPCI_Q_AVAIL + 4: case VPCI_Q_USED + 4:
		return 4;
	default:
		return off < VPCI_Q_DESC && !(off & 1) ? 2 : 0;
	}
}

static void common_io(struct vpci *v, unsigned int off, void *data,
		      unsigned int len, bool is_write)
{
	unsigned int fl = field_len(off);
	uint64_t val = 0;

	/* 64-bit fields may also be accessed as two dwords. */
	if (!(len == fl || (fl == 8 && len == 4))) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	pthread_mutex_lock(&v->lock);
	if (is_write) {
		memcpy(&val, data, len);
		common_write(v, off, val, len);
	} else {
		val = common_read(v, off);
		if (fl == 8 && len == 8)
			val = common_read(v, off) | common_read(v, off + 4) << 32;
		memcpy(data, &val, len);
	}
	pthread_mutex_unlock(&v->lock);
}

static void bar0_io(void *opaque, uint64_t off, void *data, unsigned int len,
		    bool is_write)
{
	struct vpci *v = opaque;

	if (off < VPCI_COMMON_OFF + VPCI_COMMON_LEN) {
		common_io(v, off - VPCI_COMMON_OFF, data, len, is_write);
		return;
	}
	if (off == VPCI_ISR_OFF) {
		/* Reading clears it (and lets INTx drop at the next EOI). */
		if (!is_write) {
			memset(data, 0, len);
			*(uint8_t *)data = __atomic_exchange_n(&v->isr, 0, __ATOMIC_SEQ_CST);
		}
		return;
	}
	if (off >= VPCI_DEVICE_OFF && off < VPCI_DEVICE_OFF + v->dev->config_len) {
		uint32_t o = off - VPCI_DEVICE_OFF;

		if (len > v->dev->config_len - o) {
			if (!is_write)
				memset(data, 0, len);
			return;
		}
		if (is_write)
			v->dev->ops->config_write(v->dev, o, data, len);
		else
			v->dev->ops->config_read(v->dev, o, data, len);
		return;
	}
	if (off >= VPCI_NOTIFY_OFF && off < VPCI_NOTIFY_OFF + VPCI_NOTIFY_MULT * v->nq) {
		/* A kick that KVM's ioeventfd did not take (other width). */
		uint64_t one = 1;
		unsigned int qi = (off - VPCI_NOTIFY_OFF) / VPCI_NOTIFY_MULT;

		if (is_write && write(v->q[qi].kick_fd, &one, sizeof(one)) < 0)
			pr_warn("virtio-pci: kick: %s", strerror(errno));
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (!is_write)
		memset(data, 0, len);
}

/* VIRTIO_PCI_CAP_PCI_CFG: a window into the BARs through config space. */
static void cfg_access(struct pci_dev *pd, unsigned int off, void *data,
		       unsigned int len, bool is_write)
{
	struct vpci *v = pci_dev_opaque(pd);
	uint8_t *cfg = pci_cfg_space(pd);
	unsigned int pcicfg_off = v->pcicfg_off, d = pcicfg_off + 16;
	uint32_t boff, blen;

	if (off != d || cfg[pcicfg_off + 4] != 0)
		return;
	memcpy(&boff, cfg + pcicfg_off + 8, 4);
	memcpy(&blen, cfg + pcicfg_off + 12, 4);
	if ((blen != 1 && blen != 2 && blen != 4) || blen > len ||
	    boff >= VPCI_BAR0_SIZE || boff + blen > VPCI_BAR0_SIZE)
		return;
	bar0_io(v, boff, is_write ? cfg + d : data, blen, is_write);
	if (!is_write)
		memcpy(cfg + d, data, blen);
}

/* --- creation and shutdown --------------------------------------------- */

/* The VM is stopping (its vCPUs already are): drain every queue, flush the
 * backend, free the device. */
static void vpci_shutdown(void *opaque)
{
	struct vpci *v = opaque;

	pthread_mutex_lock(&v->lock);
	stop_queues(v);
	if (v->dev->ops->flush)
		v->dev->ops->flush(v->dev);
	v->dev->ops->destroy(v->dev);
	for (unsigned int i = 0; i < v->nq; i++) {
		pci_irq_unbind(v->pd, v->q[i].call_fd);
		close(v->q[i].kick_fd);
		close(v->q[i].call_fd);
	}
	pci_irq_unbind(v->pd, v->config_fd);
	close(v->config_fd);
	pthread_mutex_unlock(&v->lock);
	free(v);
}

static int add_vcap(struct pci_dev *pd, uint8_t type, uint32_t off,
		    uint32_t len, const uint32_t *mult)
{
	uint8_t cap[20] = { PCI_CAP_ID_VNDR, 0, mult ? 20 : 16, type, 0 };

	memcpy(cap + 8, &off, 4);
	memcpy(cap + 12, &len, 4);
	if (mult)
		memcpy(cap + 16, mult, 4);
	return pci_cap_add(pd, cap, cap[2]);
}

static const struct pci_dev_ops vpci_pci_ops = {
	.bar_mapped = bar_mapped,
	.intx_pending = intx_pending,
	.cfg_access = cfg_access,
};

static int fail(struct virtio_dev *dev, const char *what, int ret)
{
	pr_err("%s: %s: %s", dev->name, what, strerror(-ret));
	return ret;
}

int virtio_pci_create(struct pci_bus *bus, struct virtio_dev *dev)
{
	struct pci_dev_info info = {
		.vendor = VIRTIO_PCI_VENDOR,
		.device = VIRTIO_PCI_DEVICE_BASE + dev->device_id,
		.subsys_vendor = VIRTIO_PCI_VENDOR,
		.subsys = VIRTIO_PCI_DEVICE_BASE + dev->device_id,
		.revision = 1,
		.class_code = dev->device_id == VIRTIO_ID_BLOCK ? 0x018000 :
			      dev->device_id == VIRTIO_ID_SCSI ? 0x010000 : 0x000200,
	};
	const uint32_t mult = VPCI_NOTIFY_MULT;
	struct vpci *v;
	uint8_t pcicap[20] = { PCI_CAP_ID_VNDR, 0, 20, 5 };
	uint8_t *wmask;
	int ret;

	if (dev->num_queues > VPCI_MAX_QUEUES || !dev->num_queues ||
	    dev->config_len > 0x1000)
		return fail(dev, "too many queues or config too large", -EINVAL);
	v = calloc(1, sizeof(*v));
	if (!v)
		return fail(dev, "virtio-pci", -ENOMEM);
	v->dev = dev;
	v->nq = dev->num_queues;
	pthread_mutex_init(&v->lock, NULL);
	dev->mem = pci_bus_gmem(bus);
	dev->transport.needs_reset = t_needs_reset;
	dev->transport.config_changed = t_config_changed;
	dev->transport.opaque = v;
	v->config_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	for (unsigned int i = 0; i < v->nq; i++) {
		v->q[i].kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		v->q[i].call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (v->q[i].kick_fd < 0 || v->q[i].call_fd < 0)
			return fail(dev, "eventfd", -errno);
	}
	if (v->config_fd < 0)
		return fail(dev, "eventfd", -errno);
	v->pd = pci_dev_add(bus, &info, &vpci_pci_ops, v);
	if (!v->pd)
		return fail(dev, "PCI bus", -ENOSPC);
	if (add_vcap(v->pd, 1, VPCI_COMMON_OFF, VPCI_COMMON_LEN, NULL) < 0 ||
	    add_vcap(v->pd, 3, VPCI_ISR_OFF, 1, NULL) < 0 ||
	    add_vcap(v->pd, 4, VPCI_DEVICE_OFF, dev->config_len, NULL) < 0 ||
	    add_vcap(v->pd, 2, VPCI_NOTIFY_OFF, VPCI_NOTIFY_MULT * v->nq, &mult) < 0)
		return fail(dev, "PCI capabilities", -ENOSPC);
	ret = pci_cap_add(v->pd, pcicap, sizeof(pcicap));
	if (ret < 0)
		return fail(dev, "PCI capabilities", ret);
	v->pcicfg_off = ret;
	wmask = pci_cfg_wmask(v->pd);
	/* bar, offset, length and data are the driver's to write */
	memset(wmask + ret + 4, 0xff, 1);
	memset(wmask + ret + 8, 0xff, 12);
	ret = pci_msix_init(v->pd, v->nq + 1, VPCI_MSIX_BAR);
	if (ret)
		return fail(dev, "MSI-X", ret);
	ret = pci_bar_add(v->pd, 0, VPCI_BAR0_SIZE, false, bar0_io, v);
	if (ret)
		return fail(dev, "BAR 0", ret);
	v->config_vector = PCI_NO_VECTOR;
	pci_irq_bind(v->pd, v->config_fd, PCI_NO_VECTOR);
	for (unsigned int i = 0; i < v->nq; i++)
		queue_defaults(v, &v->q[i]);
	ret = pci_bus_add_shutdown_hook(bus, vpci_shutdown, v);
	if (ret)
		return fail(dev, "shutdown hook", ret);
	return 0;
}
