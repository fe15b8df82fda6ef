/* A test virtio driver over fake guest RAM: drives any struct virtio_dev
 * (blk, scsi, 9p) without KVM, the way a guest driver would, and lets tests
 * write hostile rings by hand. Reused by the SCSI and 9P unit tests.
 *
 * Guest RAM is two regions, contiguous in guest-physical space but in two
 * separate host buffers, so descriptors crossing the boundary are tested:
 *   [0, ram/2) and [ram/2, ram).
 * Typical use:
 *   vdriver_init(&d, 4 << 20); vdriver_attach(&d, dev, 0);
 *   vdriver_queue_start(&d, 0, 64);
 *   uint64_t buf = vdriver_alloc(&d, 4096);
 *   struct vbuf b[] = { { hdr, 16, false }, { buf, 4096, true } };
 *   vdriver_add(&d, 0, b, 2, false); vdriver_kick(&d, 0);
 *   vdriver_wait_used(&d, 0, &id, &len, 5000);
 */
#ifndef IOVM_TESTS_VDRIVER_H
#define IOVM_TESTS_VDRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/gmem.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"

#define VDRIVER_MAX_QUEUES 8
#define VDRIVER_MAX_SIZE 1024	/* largest queue the driver sets up */

struct vbuf {
	uint64_t gpa;
	uint32_t len;
	bool write;	/* device-writable */
};

struct vdq {
	struct virtq vq;	/* what a transport hands to the device */
	uint16_t size;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t avail_idx;	/* driver's shadow */
	uint16_t last_used;
	uint16_t free_head;	/* descriptor free list through next */
	unsigned int num_free;
	uint16_t chain_len[VDRIVER_MAX_SIZE];	/* per head, for freeing */
	uint64_t indirect_gpa[VDRIVER_MAX_SIZE];	/* 0: direct chain */
	bool started;
	bool hold_avail;	/* entries added, avail idx not yet moved */
	uint64_t calls;		/* interrupts seen, not yet reported */
};

struct vdriver {
	struct gmem mem;
	uint8_t *ram[2];
	uint64_t ram_size;
	uint64_t brk;		/* bump allocator for driver structures */
	struct virtio_dev *dev;
	struct vdq q[VDRIVER_MAX_QUEUES];
	int needs_reset;	/* count of transport.needs_reset calls */
	int config_changed;
};

/* ram_size: a multiple of 2 MiB. Returns 0 or -errno. */
int vdriver_init(struct vdriver *d, uint64_t ram_size);
void vdriver_destroy(struct vdriver *d);	/* stops queues, destroys dev */

/* Binds dev and negotiates: guest_features = host_features & ~drop. */
int vdriver_attach(struct vdriver *d, struct virtio_dev *dev, uint64_t drop);

/* Lays out a ring of size entries in guest RAM and fills in q[qi].vq as a
 * transport would (virtq_init done); vdriver_queue_start then calls the
 * device's queue_start. Ring-only tests use setup and d->q[qi].vq. */
int vdriver_queue_setup(struct vdriver *d, unsigned int qi, uint16_t size);
int vdriver_queue_start(struct vdriver *d, unsigned int qi, uint16_t size);
void vdriver_queue_stop(struct vdriver *d, unsigned int qi);

/* Guest memory: allocate (aligned to 64, zeroed), translate. */
uint64_t vdriver_alloc(struct vdriver *d, uint64_t len);
void *vdriver_ptr(struct vdriver *d, uint64_t gpa, uint64_t len);

/* Adds a chain (direct, or one indirect descriptor pointing at a table) to
 * the available ring, without kicking. Returns the head or -ENOSPC. */
int vdriver_add(struct vdriver *d, unsigned int qi, const struct vbuf *b,
		unsigned int n, bool indirect);
/* Raw access for hostile tests: descriptor i of the ring, and publishing
 * an arbitrary head. */
struct virtq_desc *vdriver_desc(struct vdriver *d, unsigned int qi,
				unsigned int i);
void vdriver_publish(struct vdriver *d, unsigned int qi, uint16_t head);

/* hold: chains added from now on are not published (the avail index
 * stays); !hold publishes them all with one store of the index, so the
 * device sees the whole batch or nothing of it. */
void vdriver_hold_avail(struct vdriver *d, unsigned int qi, bool hold);

/* Notifies the device (writes the kick eventfd). */
void vdriver_kick(struct vdriver *d, unsigned int qi);
/* Whether a driver honouring the device's suppression (event index or
 * NO_NOTIFY) would kick after adding entries old..new. */
bool vdriver_kick_needed(struct vdriver *d, unsigned int qi, uint16_t old,
			 uint16_t new_idx);

/* Takes one used element if any (returns 1), else waits up to timeout_ms
 * for an interrupt (the call eventfd) and tries again; 0 on timeout. */
int vdriver_wait_used(struct vdriver *d, unsigned int qi, uint32_t *id,
		      uint32_t *len, int timeout_ms);
/* Interrupts received on the queue's call eventfd since the last call. */
uint64_t vdriver_calls(struct vdriver *d, unsigned int qi);
/* The driver's used_event (event index): interrupt when used idx passes. */
void vdriver_set_used_event(struct vdriver *d, unsigned int qi, uint16_t v);
void vdriver_set_avail_flags(struct vdriver *d, unsigned int qi, uint16_t f);

#endif
