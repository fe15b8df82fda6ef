/* virtio 1.x over PCI (modern transport) and split virtqueues, for drivers
 * running at CPL 3: capability discovery, reset, feature negotiation, queue
 * setup, MSI-X, and a virtqueue API that keeps many requests in flight.
 * See README.md for the calling sequence. */
#ifndef PROBE_VIRTIO_PCI_H
#define PROBE_VIRTIO_PCI_H

#include "lib/libc.h"
#include "lib/pci.h"

#define VIRTIO_VENDOR 0x1af4
/* Modern device ids are 0x1040 + virtio device type; transitional ones
 * 0x1000 + n. */
#define VIRTIO_DEV_MODERN(type) (0x1040 + (type))

#define VIRTIO_F_INDIRECT_DESC (1ull << 28)
#define VIRTIO_F_EVENT_IDX (1ull << 29)
#define VIRTIO_F_VERSION_1 (1ull << 32)

#define VIRTIO_STATUS_ACK 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED 128

#define VIRTIO_MSI_NO_VECTOR 0xffff

struct virtio_pci_common {
	uint32_t device_feature_select;
	uint32_t device_feature;
	uint32_t driver_feature_select;
	uint32_t driver_feature;
	uint16_t config_msix_vector;
	uint16_t num_queues;
	uint8_t device_status;
	uint8_t config_generation;
	uint16_t queue_select;
	uint16_t queue_size;
	uint16_t queue_msix_vector;
	uint16_t queue_enable;
	uint16_t queue_notify_off;
	uint64_t queue_desc;
	uint64_t queue_driver;
	uint64_t queue_device;
};	/* every field naturally aligned: no packing needed */

struct virtio_pci {
	struct pci_dev *pci;
	volatile struct virtio_pci_common *common;
	volatile uint8_t *notify_base;
	uint32_t notify_mult;
	volatile uint8_t *isr;
	volatile uint8_t *devcfg;	/* device-specific configuration */
	uint32_t devcfg_len;
	uint64_t device_features;
	uint64_t features;		/* negotiated */
	/* MSI-X */
	uint8_t msix_cap;
	uint16_t msix_nvec;
	volatile uint32_t *msix_table;
};

/* Finds the capabilities, maps them, enables the function, resets the
 * device and sets ACKNOWLEDGE|DRIVER. 0 or -1 (with a message printed). */
int virtio_pci_init(struct virtio_pci *vp, struct pci_dev *pci);
/* Offers (device & wanted) | VERSION_1, sets FEATURES_OK and checks that
 * the device kept it. vp->features holds the result. */
int virtio_pci_negotiate(struct virtio_pci *vp, uint64_t wanted);
void virtio_pci_driver_ok(struct virtio_pci *vp);
void virtio_pci_reset(struct virtio_pci *vp);
uint8_t virtio_pci_status(struct virtio_pci *vp);
static inline bool virtio_has(const struct virtio_pci *vp, uint64_t f)
{
	return (vp->features & f) != 0;
}

/* MSI-X: enables the capability; entry i -> IDT vector IRQ_VEC_BASE + i on
 * the BSP (so irq_count[i] counts it). */
int virtio_pci_msix_enable(struct virtio_pci *vp);
int virtio_pci_msix_route(struct virtio_pci *vp, unsigned int entry);

/* ---- split virtqueue */
#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1
#define VIRTQ_USED_F_NO_NOTIFY 1

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtq {
	uint16_t size, index;
	volatile struct virtq_desc *desc;
	volatile uint16_t *avail;	/* flags, idx, ring[size], used_event */
	volatile uint16_t *used_hdr;	/* flags, idx */
	volatile struct virtq_used_elem *used_ring;
	volatile uint16_t *avail_event;	/* after the used ring */
	volatile uint16_t *notify;
	bool event_idx;
	uint16_t free_head, num_free;
	uint16_t avail_idx;		/* next avail index (shadow) */
	uint16_t kicked_idx;		/* avail index at the last kick */
	uint16_t last_used;
	uint16_t *chain_len;		/* descriptors per head, for freeing */
	bool irq_off;
	uint64_t kicks, kicks_skipped;
	uint64_t kick_ticks;		/* time spent in notify writes */
};

/* One buffer of a request: device-readable unless write (device writes). */
struct virtq_buf {
	const volatile void *addr;
	uint32_t len;
	bool write;
};

/* Allocates queue index with up to max_size entries (capped by the
 * device), programs it, routes it to MSI-X entry msix (or
 * VIRTIO_MSI_NO_VECTOR for polling only) and enables it. */
int virtq_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t index,
		uint16_t max_size, uint16_t msix);
/* Adds a chain of n buffers to the avail ring (visible to the device but
 * not notified: call virtq_kick after a batch). Returns the head id, or -1
 * when fewer than n descriptors are free. */
int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned int n);
/* The same through one ring descriptor pointing at table (n entries of
 * DMA memory owned by the caller until completion); needs
 * VIRTIO_F_INDIRECT_DESC. */
int virtq_add_indirect(struct virtq *vq, volatile struct virtq_desc *table,
		       const struct virtq_buf *bufs, unsigned int n);
/* Notifies the device of everything added since the last kick, unless the
 * device suppressed notifications (EVENT_IDX or NO_NOTIFY). */
void virtq_kick(struct virtq *vq);
/* Takes one used element: returns its head id (its descriptors are freed)
 * and the written length in *len; -1 when the used ring is empty. */
int virtq_get_used(struct virtq *vq, uint32_t *len);
static inline bool virtq_has_used(const struct virtq *vq)
{
	return vq->used_hdr[1] != vq->last_used;
}
/* Interrupt suppression for polling (best effort, as the spec allows). */
void virtq_irq_disable(struct virtq *vq);
void virtq_irq_enable(struct virtq *vq);

#endif
