/* PCI configuration mechanism #1. Each port access traps on PVM, so the scan
 * touches only what it must (bus 0, bridges' secondary buses). */
#include "lib/pci.h"

#include "lib/arch.h"

struct pci_dev pci_devs[PCI_MAX_DEVS];
unsigned int pci_ndevs;
static bool scanned;

/* BARs the firmware left at 0 get space from here (inside iovm's and QEMU's
 * 32-bit PCI hole, above what firmware normally uses). */
static uint64_t bar_next = 0xE0000000ull;
#define BAR_LIMIT 0xFEC00000ull

static uint32_t cfg_addr(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off)
{
	return 0x80000000u | ((uint32_t)bus << 16) | ((uint32_t)dev << 11) |
	       ((uint32_t)fn << 8) | (off & 0xfc);
}

static uint32_t raw_read32(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off)
{
	outl(0xcf8, cfg_addr(bus, dev, fn, off));
	return inl(0xcfc);
}

uint32_t pci_read32(const struct pci_dev *d, uint16_t off)
{
	return raw_read32(d->bus, d->dev, d->fn, off);
}

uint16_t pci_read16(const struct pci_dev *d, uint16_t off)
{
	outl(0xcf8, cfg_addr(d->bus, d->dev, d->fn, off));
	return inw(0xcfc + (off & 2));
}

uint8_t pci_read8(const struct pci_dev *d, uint16_t off)
{
	outl(0xcf8, cfg_addr(d->bus, d->dev, d->fn, off));
	return inb(0xcfc + (off & 3));
}

void pci_write32(const struct pci_dev *d, uint16_t off, uint32_t v)
{
	outl(0xcf8, cfg_addr(d->bus, d->dev, d->fn, off));
	outl(0xcfc, v);
}

void pci_write16(const struct pci_dev *d, uint16_t off, uint16_t v)
{
	outl(0xcf8, cfg_addr(d->bus, d->dev, d->fn, off));
	outw(0xcfc + (off & 2), v);
}

void pci_write8(const struct pci_dev *d, uint16_t off, uint8_t v)
{
	outl(0xcf8, cfg_addr(d->bus, d->dev, d->fn, off));
	outb(0xcfc + (off & 3), v);
}

static void scan_bus(uint8_t bus, unsigned int depth);

static void scan_fn(uint8_t bus, uint8_t dev, uint8_t fn, uint32_t id,
		    unsigned int depth)
{
	struct pci_dev *d;
	uint32_t cls;

	if (pci_ndevs >= PCI_MAX_DEVS)
		return;
	d = &pci_devs[pci_ndevs++];
	d->bus = bus;
	d->dev = dev;
	d->fn = fn;
	d->vendor = (uint16_t)id;
	d->device = (uint16_t)(id >> 16);
	cls = pci_read32(d, 0x08);
	d->class_code = cls >> 24;
	d->subclass = (uint8_t)(cls >> 16);
	d->prog_if = (uint8_t)(cls >> 8);
	d->header_type = (uint8_t)(pci_read32(d, 0x0c) >> 16);
	if ((d->header_type & 0x7f) == 1 && depth < 8) {
		uint8_t secondary = (uint8_t)(pci_read32(d, 0x18) >> 8);

		if (secondary > bus)
			scan_bus(secondary, depth + 1);
	}
}

static void scan_bus(uint8_t bus, unsigned int depth)
{
	for (uint8_t dev = 0; dev < 32; dev++) {
		uint32_t id = raw_read32(bus, dev, 0, 0);
		uint8_t ht;

		if ((uint16_t)id == 0xffff)
			continue;
		scan_fn(bus, dev, 0, id, depth);
		ht = (uint8_t)(raw_read32(bus, dev, 0, 0x0c) >> 16);
		if (!(ht & 0x80))
			continue;
		for (uint8_t fn = 1; fn < 8; fn++) {
			id = raw_read32(bus, dev, fn, 0);
			if ((uint16_t)id != 0xffff)
				scan_fn(bus, dev, fn, id, depth);
		}
	}
}

unsigned int pci_scan(void)
{
	if (!scanned) {
		scanned = true;
		scan_bus(0, 0);
	}
	return pci_ndevs;
}

struct pci_dev *pci_find(uint16_t vendor, uint16_t device, uint16_t device2,
			 unsigned int index)
{
	pci_scan();
	for (unsigned int i = 0; i < pci_ndevs; i++) {
		struct pci_dev *d = &pci_devs[i];

		if (d->vendor == vendor &&
		    (d->device == device || d->device == device2) &&
		    index-- == 0)
			return d;
	}
	return NULL;
}

uint8_t pci_find_cap(const struct pci_dev *d, uint8_t cap, uint8_t start)
{
	uint8_t pos;
	unsigned int guard = 0;

	if (!(pci_read16(d, 0x06) & (1u << 4)))	/* no capability list */
		return 0;
	pos = start ? pci_read8(d, start + 1) : pci_read8(d, 0x34);
	while (pos >= 0x40 && guard++ < 48) {
		pos &= 0xfc;
		if (pci_read8(d, pos) == cap)
			return pos;
		pos = pci_read8(d, pos + 1);
	}
	return 0;
}

void pci_enable(const struct pci_dev *d)
{
	pci_write16(d, 0x04, pci_read16(d, 0x04) | 0x7);
}

uint64_t pci_bar(const struct pci_dev *d, unsigned int bar, uint64_t *size)
{
	uint16_t off = 0x10 + 4 * bar;
	uint32_t lo = pci_read32(d, off), hi = 0, slo, shi = 0xffffffff;
	bool is64 = (lo & 0x6) == 0x4;
	uint16_t cmd = pci_read16(d, 0x04);
	uint64_t addr, sz;

	if (bar > 5 || (lo & 1) || (is64 && bar > 4))
		return 0;
	if (is64)
		hi = pci_read32(d, off + 4);
	/* Size the BAR with decoding off, then restore it. */
	pci_write16(d, 0x04, cmd & ~0x3);
	pci_write32(d, off, 0xffffffff);
	slo = pci_read32(d, off) & ~0xfu;
	if (is64) {
		pci_write32(d, off + 4, 0xffffffff);
		shi = pci_read32(d, off + 4);
	}
	sz = ~(((uint64_t)shi << 32) | slo) + 1;
	if (!is64)
		sz &= 0xffffffffull;
	addr = (((uint64_t)hi << 32) | lo) & ~0xfull;
	if (!addr && sz && sz <= BAR_LIMIT - bar_next) {
		addr = ALIGN_UP(bar_next, sz);
		if (addr + sz <= BAR_LIMIT)
			bar_next = addr + sz;
		else
			addr = 0;
	}
	pci_write32(d, off, (uint32_t)addr | (lo & 0xf));
	if (is64)
		pci_write32(d, off + 4, (uint32_t)(addr >> 32));
	pci_write16(d, 0x04, cmd);
	if (size)
		*size = sz;
	/* Only the identity-mapped low 4 GiB is reachable. */
	if (!sz || addr + sz > 0x100000000ull)
		return 0;
	return addr;
}
