/* virtio-blk driver (CPL 3): config, every request type, many requests in
 * flight, completion by polling the used ring or by MSI-X. */
#ifndef PROBE_VIRTIO_BLK_H
#define PROBE_VIRTIO_BLK_H

#include "lib/virtio_pci.h"

#define VIRTIO_ID_BLOCK 2

#define VIRTIO_BLK_F_SIZE_MAX (1ull << 1)
#define VIRTIO_BLK_F_SEG_MAX (1ull << 2)
#define VIRTIO_BLK_F_RO (1ull << 5)
#define VIRTIO_BLK_F_BLK_SIZE (1ull << 6)
#define VIRTIO_BLK_F_FLUSH (1ull << 9)
#define VIRTIO_BLK_F_TOPOLOGY (1ull << 10)
#define VIRTIO_BLK_F_MQ (1ull << 12)
#define VIRTIO_BLK_F_DISCARD (1ull << 13)
#define VIRTIO_BLK_F_WRITE_ZEROES (1ull << 14)

#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_T_DISCARD 11
#define VIRTIO_BLK_T_WRITE_ZEROES 13

#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2

#define VBLK_MAX_SEGS 8
#define VBLK_MAX_QD 128
#define VBLK_MAX_QUEUES 8

/* Segment descriptor of DISCARD / WRITE_ZEROES requests. */
struct virtio_blk_dwz {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;		/* bit 0: unmap (WRITE_ZEROES) */
};

struct vblk_io {
	/* set by the caller */
	uint32_t type;
	uint64_t sector;
	unsigned int nseg;
	struct {
		void *p;
		uint32_t len;
	} seg[VBLK_MAX_SEGS];
	void *user;
	/* set by the driver */
	uint8_t status;
	uint32_t written;	/* bytes the device reports writing */
	uint64_t t_submit, t_done;	/* TSC */
	unsigned int slot, queue;
};

/* What completed of each kind (counted by vblk_reap): a host test checks the
 * VMM's statistics against these. */
enum { VBLK_K_READ, VBLK_K_WRITE, VBLK_K_FLUSH, VBLK_K_DISCARD,
       VBLK_K_WRITE_ZEROES, VBLK_KINDS };
struct vblk_counts {
	uint64_t ok;		/* requests that completed with status OK */
	uint64_t bytes;		/* of them: data (IN, OUT) or range (others) */
	uint64_t failed;	/* requests that completed with another status */
};

struct vblk {
	struct virtio_pci vp;
	struct virtq vq[VBLK_MAX_QUEUES];
	unsigned int nq, next_q;	/* queues in use; round-robin cursor */
	uint64_t capacity;	/* 512-byte sectors */
	uint32_t blk_size, seg_max, size_max;
	uint32_t max_discard_sectors, max_discard_seg;
	uint32_t max_wz_sectors, max_wz_seg;
	uint16_t num_queues;
	bool ro, msix, indirect;
	bool hlt;		/* MSI-X waits halt the CPU instead of spinning */
	unsigned int inflight;
	/* per-slot DMA header and status */
	struct vblk_slot *slots;
	unsigned int free_slots[VBLK_MAX_QD], nfree;
	struct vblk_io *io_of_head[VBLK_MAX_QUEUES][256];
	uint64_t irqs_seen;
	struct vblk_counts done[VBLK_KINDS];
};

/* Opens the index-th virtio-blk device with nq request queues (capped by
 * the device's num_queues); msix selects completion by MSI-X interrupt, one
 * vector per queue (else the used rings are polled with interrupts
 * suppressed). Prints a line describing the device. 0 or -1. */
int vblk_open(struct vblk *b, unsigned int index, bool msix, unsigned int nq);
/* In MSI-X mode, wait for completions halted (HLT at CPL 0) rather than
 * spinning on the interrupt counters. */
static inline void vblk_set_hlt(struct vblk *b, bool hlt)
{
	b->hlt = hlt;
}
/* Queues io on the next queue, round-robin (not yet notified: vblk_kick).
 * -1 when that queue is full. */
int vblk_submit(struct vblk *b, struct vblk_io *io);
void vblk_kick(struct vblk *b);
/* Descriptors of the smallest queue: bounds the requests in flight. */
unsigned int vblk_min_queue_size(const struct vblk *b);
/* Kicks, notifies skipped thanks to EVENT_IDX, and time spent in notifies,
 * summed over the queues. */
void vblk_kick_stats(const struct vblk *b, uint64_t *kicks, uint64_t *skipped,
		     uint64_t *ticks);
/* A completed request, or NULL. */
struct vblk_io *vblk_reap(struct vblk *b);
/* Waits (polling or MSI-X) until at least one request completed, with a
 * timeout; returns it, or fails the probe on timeout. */
struct vblk_io *vblk_wait(struct vblk *b);
/* One request, synchronously; returns its status. */
uint8_t vblk_rw(struct vblk *b, uint32_t type, uint64_t sector, void *buf,
		uint32_t len);
static inline void vblk_io_init(struct vblk_io *io, uint32_t type,
				uint64_t sector, void *buf, uint32_t len)
{
	io->type = type;
	io->sector = sector;
	io->nseg = buf ? 1 : 0;
	io->seg[0].p = buf;
	io->seg[0].len = len;
}

#endif
