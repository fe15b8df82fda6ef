/* libFuzzer harness for virtio-blk request parsing: the input is guest RAM
 * holding a ring whose chains are virtio-blk requests (headers, segments,
 * status bytes, discard ranges), served by the real device on a small
 * temporary disk through its I/O thread and io_uring. Any request must end
 * with a status or the queue in NEEDS_RESET; nothing may crash or touch
 * memory outside guest RAM.
 *
 * Input: [u8 queue size exponent][u8 flags][RAM bytes...]
 * flags: bit 0 event index, bit 1 read-only disk. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "virtio/blk.h"
#include "virtio/ring.h"

#define REGION (64u << 10)
#define DISK (256u << 10)

static uint8_t *ram;
static char path[64];
static struct virtio_dev *dev[2];
static int kick_fd, call_fd;
static int resets;

static void on_reset(struct virtio_dev *d)
{
	__atomic_fetch_add(&resets, 1, __ATOMIC_SEQ_CST);
}

static void setup(void)
{
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK, .queues = 1 };
	char err[256];
	int fd;

	log_threshold = LOG_ERR;	/* guest warnings are expected */
	ram = aligned_alloc(4096, 2 * REGION);
	strcpy(path, "/tmp/iovm-fuzz-blk-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, DISK))
		abort();
	close(fd);
	cfg.path = path;
	dev[0] = virtio_blk_create(&cfg, 1, err, sizeof(err));
	cfg.ro = true;
	dev[1] = virtio_blk_create(&cfg, 1, err, sizeof(err));
	unlink(path);	/* the open descriptors keep it */
	if (!dev[0] || !dev[1])
		abort();
	kick_fd = eventfd(0, EFD_NONBLOCK);
	call_fd = eventfd(0, EFD_NONBLOCK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gmem mem;
	struct virtq vq = { 0 };
	struct virtio_dev *d;
	uint64_t v;

	if (!ram)
		setup();
	if (size < 2)
		return 0;
	d = dev[(data[1] >> 1) & 1];
	memset(ram, 0, 2 * REGION);
	memcpy(ram, data + 2, size - 2 < 2 * REGION ? size - 2 : 2 * REGION);
	mem.n = 2;
	mem.r[0] = (struct gmem_region){ 0, REGION, ram };
	mem.r[1] = (struct gmem_region){ REGION, REGION, ram + REGION };
	d->mem = &mem;
	d->transport.needs_reset = on_reset;
	d->guest_features = d->host_features;
	if (!(data[1] & 1))
		d->guest_features &= ~(1ull << VIRTIO_F_RING_EVENT_IDX);
	vq.mem = &mem;
	vq.size = 1u << (data[0] % 7);		/* 1 .. 64 */
	vq.desc_gpa = 0;
	vq.avail_gpa = 16u * vq.size;
	vq.used_gpa = (vq.avail_gpa + 6 + 2u * vq.size + 3) & ~3u;
	vq.kick_fd = kick_fd;
	vq.call_fd = call_fd;
	vq.indirect = true;
	vq.event_idx = data[1] & 1;
	if (virtq_init(&vq))
		return 0;
	resets = 0;
	if (d->ops->queue_start(d, 0, &vq))
		abort();
	/* The I/O thread pops everything at start; wait until the ring is
	 * consumed (or declared broken), then stop, which drains. */
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&resets, __ATOMIC_SEQ_CST) ||
		    !virtq_avail_count(&vq))
			break;
		sched_yield();
	}
	d->ops->queue_stop(d, 0);
	while (read(kick_fd, &v, 8) == 8 || read(call_fd, &v, 8) == 8)
		;
	return 0;
}
