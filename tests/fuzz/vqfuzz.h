/* Shared by the harnesses of the virtio devices (fuzz_blk, fuzz_v9p,
 * fuzz_vscsi): fake guest RAM of two regions loaded from the input, a split
 * ring laid out at its start, and one queue of the real device served on
 * it by the device's own threads. */
#ifndef IOVM_FUZZ_VQFUZZ_H
#define IOVM_FUZZ_VQFUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio/virtio.h"

/* Each of the two guest RAM regions. */
#define VQFUZZ_REGION (64u << 10)
/* A temporary disk from vqfuzz_disk. */
#define VQFUZZ_DISK (256u << 10)

/* Once, before the harness creates its devices: guest RAM and the ring's
 * eventfds; only errors are logged (guest warnings are expected). */
void vqfuzz_setup(void);

/* Creates a temporary disk file of VQFUZZ_DISK bytes, /tmp/iovm-fuzz-
 * <name>-XXXXXX, and writes its name into path (64 bytes). Aborts on
 * failure. */
void vqfuzz_disk(char *path, const char *name);

/* Loads the input into guest RAM (the rest zeroed) and hands that RAM to
 * d, with every offered feature but event idx unless event_idx. */
void vqfuzz_load(struct virtio_dev *d, const uint8_t *data, size_t size,
		 bool event_idx);

/* Serves a ring of 1 << (size_exp % 7) entries at guest address 0 on
 * queue qi of d: starts the queue, waits until the ring is consumed or the
 * device asked for a reset, then stops it, which drains. */
void vqfuzz_run(struct virtio_dev *d, unsigned int qi, uint8_t size_exp,
		bool event_idx);

/* One input for a harness with two devices, the second read-only:
 * [u8 queue size exponent][u8 flags][RAM bytes...], flags bit 0 event idx,
 * bit 1 the read-only device; served on queue 0. */
void vqfuzz_pair(struct virtio_dev *const dev[2], const uint8_t *data,
		 size_t size);

#endif
