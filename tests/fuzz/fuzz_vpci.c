/* libFuzzer harness for the guest's register interface of a virtio-blk PCI
 * function: PCI configuration space (mechanism #1 ports), BAR 0 (virtio
 * common/ISR/device/notify) and the MSI-X table/PBA, plus writes into guest
 * RAM so that queues it enables point at rings the input controls. BARs may
 * be moved or switched off, the device reset or started (I/O threads and
 * all) in any order; nothing may crash, hang or leak, and every access must
 * be answered.
 *
 * Input: 8-byte records [op][width][u16 where][u32 value]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/virtio/fakevm.h"
#include "hw/pci.h"
#include "lib/log.h"
#include "virtio/blk.h"
#include "virtio/pci.h"
#include "vm/vm.h"

#define RAM (64u << 10)

static uint8_t *ram;
static char path[64];
static struct fake_vm fake;
static struct gmem mem;

static void remove_disk(void)
{
	unlink(path);
}

static void setup(void)
{
	int fd;

	log_threshold = LOG_ERR;
	ram = aligned_alloc(4096, RAM);
	strcpy(path, "/tmp/iovm-fuzz-vpci-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, 1 << 20))
		abort();
	close(fd);
	atexit(remove_disk);	/* reopened for every input */
	mem.n = 1;
	mem.r[0] = (struct gmem_region){ 0, RAM, ram };
}

static uint64_t bar_addr(unsigned int bar)
{
	uint32_t a = 0x80000000u | 1 << 11 | (0x10 + 4 * bar), v = 0;

	bus_dispatch(&fake.pio, 0, 0xcf8, &a, 4, true);
	bus_dispatch(&fake.pio, 0, 0xcfc, &v, 4, false);
	return v & ~15u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK, .queues = 2 };
	struct virtio_dev *dev;
	struct pci_bus *bus;
	uint64_t bar0, msix;
	char err[256];

	if (!ram)
		setup();
	memset(ram, 0, RAM);
	fakevm_init(&fake, &mem);
	bus = pci_bus_create((struct vm *)&fake);
	cfg.path = path;
	dev = virtio_blk_create(&cfg, 2, err, sizeof(err));
	if (!bus || !dev || virtio_pci_create(bus, dev))
		abort();
	/* Where the BARs start; the input may move them, so look them up
	 * again each time. */
	bar0 = bar_addr(0);
	msix = bar_addr(VPCI_MSIX_BAR);
	for (size_t i = 0; i + 8 <= size; i += 8) {
		const uint8_t *r = data + i;
		unsigned int op = r[0] % 8, len = 1u << (r[1] % 4);
		uint16_t where;
		uint32_t val;
		uint64_t buf = 0;

		memcpy(&where, r + 2, 2);
		memcpy(&val, r + 4, 4);
		buf = val;
		if (len == 8)
			buf |= (uint64_t)val << 32;
		switch (op) {
		case 0:	/* config address register, then a data access */
		case 1: {
			uint32_t a = 0x80000000u | (where & 0xff00) << 3 | (where & 0xfc);

			if (len == 8)
				len = 4;
			bus_dispatch(&fake.pio, 0, 0xcf8, &a, 4, true);
			bus_dispatch(&fake.pio, 0, 0xcfc + (where & 3), &buf, len, op == 0);
			bar0 = bar_addr(0);
			msix = bar_addr(VPCI_MSIX_BAR);
			break;
		}
		case 2:
		case 3:
			bus_dispatch(&fake.mmio, 0, bar0 + where % VPCI_BAR0_SIZE, &buf,
				     len, op == 2);
			break;
		case 4:
		case 5:
			bus_dispatch(&fake.mmio, 0, msix + where % 4096, &buf, len, op == 4);
			break;
		case 6:	/* guest RAM */
			memcpy(ram + (where & ~3u) % RAM, &val, 4);
			break;
		case 7:	/* a kick through the notify area */
			bus_dispatch(&fake.mmio, 0, bar0 + VPCI_NOTIFY_OFF +
				     VPCI_NOTIFY_MULT * (where % 3), &buf, 2, true);
			break;
		}
	}
	fakevm_shutdown(&fake);	/* drain, flush, free the device */
	pci_bus_destroy(bus);
	return 0;
}
