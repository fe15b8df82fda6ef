/* libFuzzer harness for virtio-scsi request parsing: the input is guest RAM
 * holding a ring of virtio-scsi requests (command headers with LUN fields
 * and CDBs, responses, data segments) or control requests (TMF, AN),
 * served by the real device (two targets, one read-only) on temporary
 * disks. Every request must be answered or the queue put in NEEDS_RESET;
 * nothing may crash or touch memory outside guest RAM.
 *
 * Input: [u8 queue size exponent][u8 flags][u8 cdb_size][u8 sense_size]
 *        [RAM bytes...]
 * flags: bit 0 event index, bit 1 control queue instead of a request
 * queue. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "virtio/ring.h"
#include "virtio/scsi.h"

#define REGION (64u << 10)
#define DISK (256u << 10)

static uint8_t *ram;
static struct virtio_dev *dev;
static int kick_fd, call_fd;
static int resets;

static void on_reset(struct virtio_dev *d)
{
	__atomic_fetch_add(&resets, 1, __ATOMIC_SEQ_CST);
}

static void setup(void)
{
	static char path[2][64];
	static struct disk_cfg cfg[2];
	const struct disk_cfg *p[2] = { &cfg[0], &cfg[1] };
	char err[256];

	log_threshold = LOG_ERR;
	ram = aligned_alloc(4096, 2 * REGION);
	for (int i = 0; i < 2; i++) {
		int fd;

		strcpy(path[i], "/tmp/iovm-fuzz-vscsi-XXXXXX");
		fd = mkstemp(path[i]);
		if (fd < 0 || ftruncate(fd, DISK))
			abort();
		close(fd);
		cfg[i] = (struct disk_cfg){ .path = path[i], .iface = DISK_IF_VIRTIO_SCSI,
					    .cache = CACHE_WRITEBACK, .queues = 1,
					    .target = i, .target_set = true,
					    .ro = i == 1 };
	}
	dev = virtio_scsi_create(p, 2, 1, err, sizeof(err));
	unlink(path[0]);
	unlink(path[1]);
	if (!dev)
		abort();
	kick_fd = eventfd(0, EFD_NONBLOCK);
	call_fd = eventfd(0, EFD_NONBLOCK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gmem mem;
	struct virtq vq = { 0 };
	unsigned int qi;
	uint32_t v32;
	uint64_t v;

	if (!ram)
		setup();
	if (size < 4)
		return 0;
	memset(ram, 0, 2 * REGION);
	memcpy(ram, data + 4, size - 4 < 2 * REGION ? size - 4 : 2 * REGION);
	mem.n = 2;
	mem.r[0] = (struct gmem_region){ 0, REGION, ram };
	mem.r[1] = (struct gmem_region){ REGION, REGION, ram + REGION };
	dev->mem = &mem;
	dev->transport.needs_reset = on_reset;
	dev->guest_features = dev->host_features;
	if (!(data[1] & 1))
		dev->guest_features &= ~(1ull << VIRTIO_F_RING_EVENT_IDX);
	/* the driver-writable sizes, within and beyond what is accepted */
	v32 = data[2] % 40;
	dev->ops->config_write(dev, VIRTIO_SCSI_CFG_CDB_SIZE, &v32, 4);
	v32 = data[3] * 2;
	dev->ops->config_write(dev, VIRTIO_SCSI_CFG_SENSE_SIZE, &v32, 4);
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
	qi = data[1] & 2 ? VIRTIO_SCSI_CTRL_Q : VIRTIO_SCSI_REQ_Q0;
	if (dev->ops->queue_start(dev, qi, &vq))
		abort();
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&resets, __ATOMIC_SEQ_CST) ||
		    !virtq_avail_count(&vq))
			break;
		sched_yield();
	}
	dev->ops->queue_stop(dev, qi);
	while (read(kick_fd, &v, 8) == 8 || read(call_fd, &v, 8) == 8)
		;
	return 0;
}
