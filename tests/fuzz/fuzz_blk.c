/* libFuzzer harness for virtio-blk request parsing: the input is guest RAM
 * holding a ring whose chains are virtio-blk requests (headers, segments,
 * status bytes, discard ranges), served by the real device on a small
 * temporary disk through its I/O thread and io_uring. Any request must end
 * with a status or the queue in NEEDS_RESET; nothing may crash or touch
 * memory outside guest RAM.
 *
 * Input: [u8 queue size exponent][u8 flags][RAM bytes...]
 * flags: bit 0 event index, bit 1 read-only disk. */
#include <stdlib.h>
#include <unistd.h>

#include "virtio/blk.h"
#include "vqfuzz.h"

static struct virtio_dev *dev[2];

static void setup(void)
{
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK, .queues = 1 };
	char err[256], path[64];

	vqfuzz_setup();
	vqfuzz_disk(path, "blk");
	cfg.path = path;
	dev[0] = virtio_blk_create(&cfg, 1, err, sizeof(err));
	cfg.ro = true;
	dev[1] = virtio_blk_create(&cfg, 1, err, sizeof(err));
	unlink(path);	/* the open descriptors keep it */
	if (!dev[0] || !dev[1])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev[0])
		setup();
	vqfuzz_pair(dev, data, size);
	return 0;
}
