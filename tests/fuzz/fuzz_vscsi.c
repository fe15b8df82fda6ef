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
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "virtio/scsi.h"
#include "vqfuzz.h"

static struct virtio_dev *dev;

static void setup(void)
{
	static char path[2][64];
	static struct disk_cfg cfg[2];
	const struct disk_cfg *p[2] = { &cfg[0], &cfg[1] };
	char err[256];

	vqfuzz_setup();
	for (int i = 0; i < 2; i++) {
		vqfuzz_disk(path[i], "vscsi");
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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t v32;

	if (!dev)
		setup();
	if (size < 4)
		return 0;
	vqfuzz_load(dev, data + 4, size - 4, data[1] & 1);
	/* the driver-writable sizes, within and beyond what is accepted */
	v32 = data[2] % 40;
	dev->ops->config_write(dev, VIRTIO_SCSI_CFG_CDB_SIZE, &v32, 4);
	v32 = data[3] * 2;
	dev->ops->config_write(dev, VIRTIO_SCSI_CFG_SENSE_SIZE, &v32, 4);
	vqfuzz_run(dev, data[1] & 2 ? VIRTIO_SCSI_CTRL_Q : VIRTIO_SCSI_REQ_Q0,
		   data[0], data[1] & 1);
	return 0;
}
