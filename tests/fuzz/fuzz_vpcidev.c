/* libFuzzer harness for the cmd-queue messages of the virtio-pcidev
 * transport (UML's PCI over virtio): config-space and BAR reads, writes and
 * memsets with any op, BAR, size and address, headers and data split
 * across descriptors at any point, reply buffers of any size, served by the
 * real virtio-blk over virtio-pci function or the real LSI 53C895A, with
 * guest RAM behind them. Every message gets an answer (all-ones when
 * refused); nothing may crash, hang or leak.
 *
 * Input: byte 0 picks the function (even: virtio-blk, odd: LSI), then
 * records [u16 len][u8 split][u8 reply] followed by len bytes of message
 * (the 16-byte header and its data). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "hw/pci.h"
#include "lib/log.h"
#include "scsi/lsi_pci.h"
#include "vhost/pcidev.h"
#include "virtio/blk.h"
#include "virtio/pci.h"
#include "virtio/virtio.h"

#define RAM (64u << 10)

static uint8_t *ram;
static char path[64];
static struct gmem mem;
static uint8_t reply[VPCIDEV_MAX_XFER + 64];

static void remove_disk(void)
{
	unlink(path);
}

static void setup(void)
{
	int fd;

	log_threshold = LOG_ERR;
	ram = aligned_alloc(4096, RAM);
	strcpy(path, "/tmp/iovm-fuzz-vpcidev-XXXXXX");
	fd = mkstemp(path);
	if (!ram || fd < 0 || ftruncate(fd, 1 << 20))
		abort();
	close(fd);
	atexit(remove_disk);
	mem.n = 1;
	mem.r[0] = (struct gmem_region){ 0, RAM, ram };
}

static int make_blk(struct pci_bus *bus, void *opaque)
{
	struct disk_cfg cfg = { .path = path, .cache = CACHE_WRITEBACK, .queues = 2 };
	char err[256];
	struct virtio_dev *dev = virtio_blk_create(&cfg, 2, err, sizeof(err));

	return dev ? virtio_pci_create(bus, dev) : -1;
}

static int make_lsi(struct pci_bus *bus, void *opaque)
{
	static struct disk_cfg cfg;
	const struct disk_cfg *disks[1] = { &cfg };

	cfg = (struct disk_cfg){ .path = path, .iface = DISK_IF_LSI,
				 .cache = CACHE_WRITEBACK };
	return lsi_pci_create(bus, disks, 1, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct virtio_dev *dev;
	size_t i = 1;

	if (!ram)
		setup();
	if (!size)
		return 0;
	memset(ram, 0, RAM);
	dev = vpcidev_create(data[0] & 1 ? make_lsi : make_blk, NULL);
	if (!dev)
		abort();
	dev->mem = &mem;
	if (vpcidev_session_begin(dev))
		abort();
	while (i + 4 <= size) {
		uint16_t len;
		uint8_t split = data[i + 2], rsel = data[i + 3];
		struct iovec iov[3];
		unsigned int n = 0;
		size_t rlen;

		memcpy(&len, data + i, 2);
		i += 4;
		if (len > size - i)
			len = size - i;
		/* the driver's part, in one or two descriptors */
		if (split && split < len) {
			iov[n++] = (struct iovec){ (void *)(data + i), split };
			iov[n++] = (struct iovec){ (void *)(data + i + split), len - split };
		} else {
			iov[n++] = (struct iovec){ (void *)(data + i), len };
		}
		/* reply sizes around the interesting ones, and large */
		rlen = rsel < 0xf0 ? rsel % 17 : (size_t)(rsel - 0xf0) << 12;
		iov[n] = (struct iovec){ reply, rlen };
		if (vpcidev_serve_msg(dev, iov, n, rlen ? 1 : 0) > rlen)
			abort();	/* wrote past the reply buffer */
		i += len;
	}
	vpcidev_session_end(dev);
	dev->ops->destroy(dev);
	return 0;
}
