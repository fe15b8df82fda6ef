/* virtio-pci modern transport and split virtqueues (driver side). */
#include "lib/virtio_pci.h"

#include "lib/arch.h"
#include "lib/boot.h"
#include "lib/console.h"
#include "lib/cpu.h"

#define CAP_COMMON 1
#define CAP_NOTIFY 2
#define CAP_ISR 3
#define CAP_DEVICE 4

#define C(vp, field) (&(vp)->common->field)

static volatile uint8_t *cap_map(struct virtio_pci *vp, uint8_t pos,
				 uint32_t *len)
{
	uint8_t bar = pci_read8(vp->pci, pos + 4);
	uint32_t off = pci_read32(vp->pci, pos + 8);
	uint32_t length = pci_read32(vp->pci, pos + 12);
	uint64_t size, base;

	if (bar > 5)
		return NULL;
	base = pci_bar(vp->pci, bar, &size);
	if (!base || off > size || length > size - off)
		return NULL;
	if (len)
		*len = length;
	return (volatile uint8_t *)(uintptr_t)(base + off);
}

int virtio_pci_init(struct virtio_pci *vp, struct pci_dev *pci)
{
	uint8_t pos = 0;

	memset(vp, 0, sizeof(*vp));
	vp->pci = pci;
	while ((pos = pci_find_cap(pci, 0x09, pos))) {
		uint8_t type = pci_read8(pci, pos + 3);
		uint32_t len;

		switch (type) {
		case CAP_COMMON:
			if (!vp->common)
				vp->common = (volatile struct virtio_pci_common *)
					cap_map(vp, pos, &len);
			break;
		case CAP_NOTIFY:
			if (!vp->notify_base) {
				vp->notify_base = cap_map(vp, pos, &len);
				vp->notify_mult = pci_read32(pci, pos + 16);
			}
			break;
		case CAP_ISR:
			if (!vp->isr)
				vp->isr = cap_map(vp, pos, &len);
			break;
		case CAP_DEVICE:
			if (!vp->devcfg) {
				vp->devcfg = cap_map(vp, pos, &len);
				vp->devcfg_len = len;
			}
			break;
		default:
			break;
		}
	}
	if (!vp->common || !vp->notify_base) {
		pr("probe: virtio %02x:%02x.%x: no common/notify capability\n",
		   pci->bus, pci->dev, pci->fn);
		return -1;
	}
	vp->msix_cap = pci_find_cap(pci, 0x11, 0);
	pci_enable(pci);
	virtio_pci_reset(vp);
	mmio_write8(C(vp, device_status), VIRTIO_STATUS_ACK);
	mmio_write8(C(vp, device_status),
		    VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
	return 0;
}

void virtio_pci_reset(struct virtio_pci *vp)
{
	mmio_write8(C(vp, device_status), 0);
	/* The device reports reset done by reading back 0. */
	for (int i = 0; i < 1000000 && mmio_read8(C(vp, device_status)); i++)
		cpu_relax();
}

uint8_t virtio_pci_status(struct virtio_pci *vp)
{
	return mmio_read8(C(vp, device_status));
}

int virtio_pci_negotiate(struct virtio_pci *vp, uint64_t wanted)
{
	uint64_t dev;

	mmio_write32(C(vp, device_feature_select), 0);
	dev = mmio_read32(C(vp, device_feature));
	mmio_write32(C(vp, device_feature_select), 1);
	dev |= (uint64_t)mmio_read32(C(vp, device_feature)) << 32;
	vp->device_features = dev;
	if (!(dev & VIRTIO_F_VERSION_1)) {
		pr("probe: virtio: device lacks VERSION_1 (features 0x%lx)\n",
		   dev);
		return -1;
	}
	vp->features = dev & (wanted | VIRTIO_F_VERSION_1);
	mmio_write32(C(vp, driver_feature_select), 0);
	mmio_write32(C(vp, driver_feature), (uint32_t)vp->features);
	mmio_write32(C(vp, driver_feature_select), 1);
	mmio_write32(C(vp, driver_feature), (uint32_t)(vp->features >> 32));
	mmio_write8(C(vp, device_status), VIRTIO_STATUS_ACK |
		    VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	if (!(mmio_read8(C(vp, device_status)) & VIRTIO_STATUS_FEATURES_OK)) {
		pr("probe: virtio: device refused features 0x%lx\n",
		   vp->features);
		return -1;
	}
	return 0;
}

void virtio_pci_driver_ok(struct virtio_pci *vp)
{
	mmio_write8(C(vp, device_status),
		    VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER |
			    VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

int virtio_pci_msix_enable(struct virtio_pci *vp)
{
	uint16_t ctrl;
	uint32_t tbl;
	uint64_t base, size;

	if (!vp->msix_cap) {
		pr("probe: virtio: no MSI-X capability\n");
		return -1;
	}
	ctrl = pci_read16(vp->pci, vp->msix_cap + 2);
	tbl = pci_read32(vp->pci, vp->msix_cap + 4);
	vp->msix_nvec = (ctrl & 0x7ff) + 1;
	base = pci_bar(vp->pci, tbl & 7, &size);
	if (!base || (tbl & ~7u) + vp->msix_nvec * 16ull > size) {
		pr("probe: virtio: MSI-X table outside its BAR\n");
		return -1;
	}
	vp->msix_table = (volatile uint32_t *)(uintptr_t)(base + (tbl & ~7u));
	/* Mask every entry until it is routed. */
	for (unsigned int i = 0; i < vp->msix_nvec; i++)
		mmio_write32(&vp->msix_table[i * 4 + 3], 1);
	pci_write16(vp->pci, vp->msix_cap + 2, (ctrl | 0x8000) & ~0x4000);
	lapic_enable();
	return 0;
}

int virtio_pci_msix_route(struct virtio_pci *vp, unsigned int entry)
{
	volatile uint32_t *e;
	uint64_t addr = msi_address(lapic_id());

	if (!vp->msix_table || entry >= vp->msix_nvec ||
	    entry >= IRQ_VEC_COUNT)
		return -1;
	e = &vp->msix_table[entry * 4];
	mmio_write32(&e[0], (uint32_t)addr);
	mmio_write32(&e[1], (uint32_t)(addr >> 32));
	mmio_write32(&e[2], IRQ_VEC_BASE + entry);	/* fixed, edge */
	mmio_write32(&e[3], 0);
	return 0;
}

/* ---- split virtqueue */
int virtq_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t index,
		uint16_t max_size, uint16_t msix)
{
	uint16_t size, noff;

	memset(vq, 0, sizeof(*vq));
	if (index >= mmio_read16(C(vp, num_queues)))
		return -1;
	mmio_write16(C(vp, queue_select), index);
	size = mmio_read16(C(vp, queue_size));
	if (!size)
		return -1;
	if (size > max_size)
		size = max_size;
	/* Split rings need a power of two. */
	while (size & (size - 1))
		size &= size - 1;
	vq->size = size;
	vq->index = index;
	vq->event_idx = virtio_has(vp, VIRTIO_F_EVENT_IDX);
	vq->desc = dma_alloc(16ull * size, 16);
	vq->avail = dma_alloc(6 + 2ull * size, 4096);
	vq->used_hdr = dma_alloc(6 + 8ull * size, 4096);
	vq->chain_len = dma_alloc(2ull * size, 8);
	if (!vq->desc || !vq->avail || !vq->used_hdr || !vq->chain_len)
		return -1;
	vq->used_ring = (volatile struct virtq_used_elem *)(vq->used_hdr + 2);
	vq->avail_event = (volatile uint16_t *)(vq->used_ring + size);
	for (uint16_t i = 0; i < size; i++)
		vq->desc[i].next = (uint16_t)(i + 1);
	vq->free_head = 0;
	vq->num_free = size;

	mmio_write16(C(vp, queue_size), size);
	mmio_write16(C(vp, queue_msix_vector), msix);
	if (msix != VIRTIO_MSI_NO_VECTOR &&
	    mmio_read16(C(vp, queue_msix_vector)) != msix) {
		pr("probe: virtio: queue %u: MSI-X vector %u refused\n", index,
		   msix);
		return -1;
	}
	mmio_write64(C(vp, queue_desc), virt_to_phys(vq->desc));
	mmio_write64(C(vp, queue_driver), virt_to_phys(vq->avail));
	mmio_write64(C(vp, queue_device), virt_to_phys(vq->used_hdr));
	noff = mmio_read16(C(vp, queue_notify_off));
	vq->notify = (volatile uint16_t *)(vp->notify_base +
					   (uint64_t)noff * vp->notify_mult);
	mmio_write16(C(vp, queue_enable), 1);
	return 0;
}

static void publish(struct virtq *vq, uint16_t head)
{
	vq->avail[2 + (vq->avail_idx & (vq->size - 1))] = head;
	/* Descriptors and ring entry before the index (x86: stores stay in
	 * order; the compiler must not reorder them). */
	barrier();
	vq->avail_idx++;
	vq->avail[1] = vq->avail_idx;
}

int virtq_add_indirect(struct virtq *vq, volatile struct virtq_desc *table,
		       const struct virtq_buf *bufs, unsigned int n)
{
	volatile struct virtq_desc *d;
	uint16_t head;

	if (!n || !vq->num_free)
		return -1;
	for (unsigned int k = 0; k < n; k++) {
		table[k].addr = virt_to_phys(bufs[k].addr);
		table[k].len = bufs[k].len;
		table[k].flags = (bufs[k].write ? VIRTQ_DESC_F_WRITE : 0) |
				 (k + 1 < n ? VIRTQ_DESC_F_NEXT : 0);
		table[k].next = (uint16_t)(k + 1 < n ? k + 1 : 0);
	}
	head = vq->free_head;
	d = &vq->desc[head];
	vq->free_head = d->next;
	vq->num_free--;
	d->addr = virt_to_phys(table);
	d->len = n * (uint32_t)sizeof(struct virtq_desc);
	d->flags = VIRTQ_DESC_F_INDIRECT;
	vq->chain_len[head] = 1;
	publish(vq, head);
	return head;
}

int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned int n)
{
	uint16_t head, i;

	if (!n || n > vq->num_free)
		return -1;
	head = i = vq->free_head;
	for (unsigned int k = 0; k < n; k++) {
		volatile struct virtq_desc *d = &vq->desc[i];

		d->addr = virt_to_phys(bufs[k].addr);
		d->len = bufs[k].len;
		d->flags = (bufs[k].write ? VIRTQ_DESC_F_WRITE : 0) |
			   (k + 1 < n ? VIRTQ_DESC_F_NEXT : 0);
		i = d->next;
	}
	vq->free_head = i;
	vq->num_free -= n;
	vq->chain_len[head] = (uint16_t)n;
	publish(vq, head);
	return head;
}

void virtq_kick(struct virtq *vq)
{
	uint16_t new_idx = vq->avail_idx, old = vq->kicked_idx;
	bool need;

	if (new_idx == old)
		return;
	/* The index store must be visible before we read the device's
	 * suppression state. */
	mb();
	if (vq->event_idx) {
		uint16_t ev = *vq->avail_event;

		need = (uint16_t)(new_idx - ev - 1) < (uint16_t)(new_idx - old);
	} else {
		need = !(vq->used_hdr[0] & VIRTQ_USED_F_NO_NOTIFY);
	}
	vq->kicked_idx = new_idx;
	if (need) {
		uint64_t t = rdtsc();

		mmio_write16(vq->notify, vq->index);
		vq->kick_ticks += rdtsc() - t;
		vq->kicks++;
	} else {
		vq->kicks_skipped++;
	}
}

int virtq_get_used(struct virtq *vq, uint32_t *len)
{
	volatile struct virtq_used_elem *e;
	uint16_t id, n, last;

	if (vq->used_hdr[1] == vq->last_used)
		return -1;
	/* Read the element only after seeing the index. */
	barrier();
	e = &vq->used_ring[vq->last_used & (vq->size - 1)];
	id = (uint16_t)e->id;
	if (len)
		*len = e->len;
	vq->last_used++;
	if (id >= vq->size || !vq->chain_len[id])
		probe_fail("virtq %u: device returned bad id %u", vq->index, id);
	n = vq->chain_len[id];
	vq->chain_len[id] = 0;
	/* Relink the chain onto the free list. */
	last = id;
	for (uint16_t k = 1; k < n; k++)
		last = vq->desc[last].next;
	vq->desc[last].next = vq->free_head;
	vq->free_head = id;
	vq->num_free += n;
	if (vq->event_idx && !vq->irq_off) {
		vq->avail[2 + vq->size] = vq->last_used;	/* used_event */
		/* The store must be visible before the caller looks at the
		 * used index again (and then waits for an interrupt): the
		 * device stores its index, fences, then reads used_event. A
		 * store still in this CPU's store buffer lets the device see
		 * the old used_event and skip the interrupt while we miss its
		 * new entry: a lost wakeup, seen under load as a request that
		 * never completes. */
		mb();
	}
	return id;
}

void virtq_irq_disable(struct virtq *vq)
{
	vq->irq_off = true;
	vq->avail[0] = VIRTQ_AVAIL_F_NO_INTERRUPT;
	/* With EVENT_IDX the flag is ignored: push used_event far back. */
	if (vq->event_idx)
		vq->avail[2 + vq->size] = (uint16_t)(vq->last_used - 0x8000);
}

void virtq_irq_enable(struct virtq *vq)
{
	vq->irq_off = false;
	vq->avail[0] = 0;
	if (vq->event_idx)
		vq->avail[2 + vq->size] = vq->last_used;
	mb();
}
