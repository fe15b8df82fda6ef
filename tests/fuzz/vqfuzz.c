/* Guest RAM, ring layout and queue runs shared by the virtio device
 * harnesses. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "virtio/ring.h"
#include "vqfuzz.h"

static uint8_t *ram;
static struct gmem mem;
static int kick_fd, call_fd;
static int resets;

static void on_reset(struct virtio_dev *d)
{
	__atomic_fetch_add(&resets, 1, __ATOMIC_SEQ_CST);
}

void vqfuzz_setup(void)
{
	log_threshold = LOG_ERR;	/* guest warnings are expected */
	ram = aligned_alloc(4096, 2 * VQFUZZ_REGION);
	kick_fd = eventfd(0, EFD_NONBLOCK);
	call_fd = eventfd(0, EFD_NONBLOCK);
	if (!ram || kick_fd < 0 || call_fd < 0)
		abort();
}

void vqfuzz_disk(char *path, const char *name)
{
	int fd;

	snprintf(path, 64, "/tmp/iovm-fuzz-%s-XXXXXX", name);
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, VQFUZZ_DISK))
		abort();
	close(fd);
}

void vqfuzz_load(struct virtio_dev *d, const uint8_t *data, size_t size,
		 bool event_idx)
{
	memset(ram, 0, 2 * VQFUZZ_REGION);
	memcpy(ram, data, size < 2 * VQFUZZ_REGION ? size : 2 * VQFUZZ_REGION);
	mem.n = 2;
	mem.r[0] = (struct gmem_region){ 0, VQFUZZ_REGION, ram };
	mem.r[1] = (struct gmem_region){ VQFUZZ_REGION, VQFUZZ_REGION,
					 ram + VQFUZZ_REGION };
	d->mem = &mem;
	d->transport.needs_reset = on_reset;
	d->guest_features = d->host_features;
	if (!event_idx)
		d->guest_features &= ~(1ull << VIRTIO_F_RING_EVENT_IDX);
}

void vqfuzz_run(struct virtio_dev *d, unsigned int qi, uint8_t size_exp,
		bool event_idx)
{
	struct virtq vq = { 0 };
	uint64_t v;

	vq.mem = &mem;
	vq.size = 1u << (size_exp % 7);		/* 1 .. 64 */
	vq.desc_gpa = 0;
	vq.avail_gpa = 16u * vq.size;
	vq.used_gpa = (vq.avail_gpa + 6 + 2u * vq.size + 3) & ~3u;
	vq.kick_fd = kick_fd;
	vq.call_fd = call_fd;
	vq.indirect = true;
	vq.event_idx = event_idx;
	if (virtq_init(&vq))
		return;
	resets = 0;
	if (d->ops->queue_start(d, qi, &vq))
		abort();
	/* The device's thread pops everything at start; wait until the ring
	 * is consumed (or declared broken), then stop, which drains. */
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&resets, __ATOMIC_SEQ_CST) ||
		    !virtq_avail_count(&vq))
			break;
		sched_yield();
	}
	d->ops->queue_stop(d, qi);
	while (read(kick_fd, &v, 8) == 8 || read(call_fd, &v, 8) == 8)
		;
}

void vqfuzz_pair(struct virtio_dev *const dev[2], const uint8_t *data,
		 size_t size)
{
	struct virtio_dev *d;

	if (size < 2)
		return;
	d = dev[(data[1] >> 1) & 1];
	vqfuzz_load(d, data + 2, size - 2, data[1] & 1);
	vqfuzz_run(d, 0, data[0], data[1] & 1);
}
