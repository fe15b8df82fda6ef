/* Split virtqueue, device side: pops descriptor chains from the available
 * ring into iovecs that point straight into guest RAM, pushes used elements,
 * and decides (event index or flags) when to interrupt the driver. Every
 * address and length the guest wrote is checked before use. */
#ifndef IOVM_VIRTIO_RING_H
#define IOVM_VIRTIO_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lib/gmem.h"

#define VIRTQ_MAX_SIZE 32768

#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_USED_F_NO_NOTIFY 1
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

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

/* Inflight I/O tracking (vhost-user INFLIGHT_SHMFD), split rings: a region
 * of memory that outlives the back-end process (the front-end keeps it and
 * hands it to the next back-end) recording which chains were popped and not
 * yet pushed, so that a restarted back-end resubmits them. Layout as in the
 * vhost-user specification: native endian, one per queue. */
struct virtq_inflight_desc {
	uint8_t inflight;	/* head popped, not yet pushed */
	uint8_t padding[5];
	uint16_t next;		/* last batch of pushes: next head */
	uint64_t counter;	/* pop order */
};

struct virtq_inflight_region {
	uint64_t features;	/* 0 */
	uint16_t version;	/* VIRTQ_INFLIGHT_VERSION; 0: never used */
	uint16_t desc_num;	/* queue size */
	uint16_t last_batch_head;	/* head of the last push batch */
	uint16_t used_idx;	/* used idx once that batch was published */
	struct virtq_inflight_desc desc[];
};

#define VIRTQ_INFLIGHT_VERSION 1

/* Bytes of one queue's region (64-byte aligned, so regions of successive
 * queues can follow each other). */
static inline uint64_t virtq_inflight_region_size(uint16_t queue_size)
{
	return (sizeof(struct virtq_inflight_region) +
		(uint64_t)queue_size * sizeof(struct virtq_inflight_desc) + 63) & ~63ull;
}

struct virtq_resubmit {
	uint64_t counter;
	uint16_t head;
};

/* One queue's tracking state; the transport points virtq.inflight at it. */
struct virtq_inflight {
	/* --- filled in by the transport --- */
	struct virtq_inflight_region *region;	/* shared, untrusted: every
						 * index read back is checked */
	struct virtq_resubmit *resubmit;	/* room for size entries */
	/* Test only (vhost-user --test-stop-after): once this many chains
	 * were pushed since virtq_init, pushes are dropped and their chains
	 * stay in flight, in the region as in the driver's eyes, as if the
	 * back-end had died right after doing their I/O; 0: never. */
	uint64_t stop_after;
	/* --- set by virtq_init, then read-only: what recovery found --- */
	uint16_t recovered;	/* chains flagged in flight, to pop again */
	uint16_t finished;	/* pushes cut short (used index published,
				 * flags not cleared) that it completed */
	/* --- private to ring.c (the queue thread's) --- */
	uint64_t counter;	/* next pop order */
	uint64_t pushed;	/* pushes since virtq_init */
	uint16_t nresubmit;	/* heads to pop again after a restart... */
	uint16_t next_resubmit;	/* ...and how many of them were popped */
};

/* One queue. The transport (virtio-pci, vhost-user) fills in the fields of
 * the first block, calls virtq_init(), then hands the queue to the device's
 * queue_start. From then on only the device's queue thread touches it until
 * queue_stop returns. */
struct virtq {
	/* --- filled in by the transport --- */
	const struct gmem *mem;
	uint16_t size;		/* entries, a power of two <= VIRTQ_MAX_SIZE */
	uint64_t desc_gpa;	/* 16-byte aligned */
	uint64_t avail_gpa;	/* 2-byte aligned */
	uint64_t used_gpa;	/* 4-byte aligned */
	int kick_fd;		/* eventfd the driver's notifications signal */
	int call_fd;		/* non-blocking fd whose 8-byte write interrupts
				 * the driver (an eventfd; under vhost-user also
				 * a pipe or UNIX socket); -1: none */
	uint8_t *isr;		/* virtio-pci: ISR byte to set (bit 0) before
				 * a call, with MSI-X too (a driver may read
				 * it); NULL under vhost-user */
	bool event_idx;		/* VIRTIO_F_RING_EVENT_IDX negotiated */
	bool indirect;		/* VIRTIO_F_RING_INDIRECT_DESC negotiated */
	uint16_t last_avail;	/* next avail entry to pop (vhost-user
				 * SET/GET_VRING_BASE); the used index starts
				 * from the used ring's current idx */
	struct virtq_inflight *inflight;	/* NULL: no tracking (iovm run) */

	/* --- private to ring.c --- */
	struct virtq_desc *desc;
	volatile uint16_t *avail;	/* flags, idx, ring[size], used_event */
	volatile uint16_t *used_flags;	/* used ring: flags, idx */
	volatile struct virtq_used_elem *used_ring;
	volatile uint16_t *avail_event;
	uint16_t used_idx;		/* next used slot (our shadow) */
	uint16_t signalled_used;	/* used idx at the last interrupt */
	bool signalled_valid;
	bool kicks_enabled;
};

/* What virtq_pop found: iov[0 .. out_num) are device-readable (driver "out"),
 * iov[out_num .. out_num+in_num) device-writable. */
struct virtq_elem {
	uint16_t head;		/* id to push back */
	unsigned int out_num;
	unsigned int in_num;
	uint64_t out_len;	/* bytes in the readable part */
	uint64_t in_len;	/* bytes in the writable part */
};

/* Maps the rings after the transport set their addresses. Returns 0, or
 * -EINVAL when a ring lies outside guest RAM, is misaligned, or the size is
 * not a power of two.
 * With inflight tracking, a region never used before is initialised; one
 * that a previous back-end used says what it had popped and not pushed
 * (vhost-user.rst, "Inflight I/O tracking", split rings): a push it had
 * published in the used ring but not yet cleared in the region is
 * finished, never run again (the driver may already have reused that head
 * for a newer request); last_avail becomes the used index plus the
 * chains still flagged, and those are popped again first, in their
 * original order (inflight->recovered says how many, for good;
 * virtq_inflight_pending how many are left). -EINVAL when the region does
 * not fit the queue. */
int virtq_init(struct virtq *vq);

/* Chains recovered from the inflight region and not yet popped again. */
static inline unsigned int virtq_inflight_pending(const struct virtq *vq)
{
	return vq->inflight ? vq->inflight->nresubmit - vq->inflight->next_resubmit : 0;
}

/* For a ring the driver has just set up (virtio-pci queue enable, after
 * virtq_init): the used index starts at 0 (virtio 1.x, 2.7.8), whatever the
 * ring's memory holds, and 0 is written there. vhost-user does not call it:
 * there the used index carries over from the previous back end. */
void virtq_reset_used_idx(struct virtq *vq);

/* Pops the next available chain into iov (at most max_iov entries; a
 * descriptor that crosses a guest RAM region boundary takes one per region).
 * Returns 1 with *elem filled, 0 when the ring is empty, or for a malformed
 * ring or chain -EINVAL (bad index, address outside RAM, loop, too long,
 * nested indirect, readable after writable) or -ENOBUFS (more than max_iov
 * segments). On -EINVAL/-ENOBUFS the device must stop using the queue and
 * call its transport's needs_reset: the driver broke the ring contract. */
int virtq_pop(struct virtq *vq, struct virtq_elem *elem, struct iovec *iov,
	      unsigned int max_iov);

/* Returns a chain to the driver with len bytes written into its writable
 * part. The used index is published (release order) at once. With
 * inflight tracking the region is updated around it in the order the
 * specification gives (see inflight_put in ring.c). */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t len);

/* Test only: with inflight tracking, the first steps of virtq_push's
 * VIRTQ_PUSH_STEPS stores (see inflight_put in ring.c), the state a
 * back-end that dies inside a push leaves: for tests that build each
 * crash point from the code that defines the order. */
#define VIRTQ_PUSH_STEPS 6
void virtq_push_partial(struct virtq *vq, uint16_t head, uint32_t len,
			unsigned int steps);

/* Interrupts the driver if it asked to be told about the elements pushed
 * since the last call (event index or NO_INTERRUPT flag). Returns true when
 * an interrupt was sent. */
bool virtq_notify(struct virtq *vq);

/* Kick suppression while the device is busy popping: with kicks disabled
 * the driver need not notify. virtq_enable_kicks re-arms them and returns
 * true when new entries arrived meanwhile (pop again before sleeping). */
void virtq_disable_kicks(struct virtq *vq);
bool virtq_enable_kicks(struct virtq *vq);

/* With at least this many requests in flight a device's queue thread
 * leaves the driver's kicks off while it sleeps and looks at the ring
 * whenever a completion wakes it: a kick is a VM exit, and the wait it
 * saves the guest is bounded by the quickest of these in-flight requests. */
#define VIRTQ_KICKS_OFF_INFLIGHT 4

/* Entries available and not yet popped (0 on a malformed avail index). */
unsigned int virtq_avail_count(struct virtq *vq);

#endif
