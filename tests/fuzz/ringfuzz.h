/* Shared by the split-ring harnesses (fuzz_ring, fuzz_inflight): fake
 * guest RAM of two regions, contiguous in guest-physical space, loaded from
 * the input, with a ring laid out at its start, served by the ring code
 * alone (no device, no threads). */
#ifndef IOVM_FUZZ_RINGFUZZ_H
#define IOVM_FUZZ_RINGFUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/ring.h"

/* Each of the two guest RAM regions. */
#define RINGFUZZ_REGION (32u << 10)

/* Loads data into guest RAM (the rest zeroed), points mem at it and lays
 * out vq's ring of vq->size entries at guest address 0 (descriptor table,
 * then available and used rings), without kick or call eventfds. */
void ringfuzz_load(struct gmem *mem, struct virtq *vq, const uint8_t *data,
		   size_t size);

/* Whether v lies wholly inside one region of guest RAM. */
bool ringfuzz_inside(const struct iovec *v);

#endif
