/* PCI through configuration mechanism #1 (0xcf8/0xcfc): enumeration (bus 0
 * and the buses behind bridges), capabilities, BARs (assigned here when the
 * firmware left them unassigned). */
#ifndef PROBE_PCI_H
#define PROBE_PCI_H

#include "lib/libc.h"

#define PCI_MAX_DEVS 64

struct pci_dev {
	uint8_t bus, dev, fn;
	uint16_t vendor, device;
	uint8_t class_code, subclass, prog_if, header_type;
};

extern struct pci_dev pci_devs[PCI_MAX_DEVS];
extern unsigned int pci_ndevs;

uint32_t pci_read32(const struct pci_dev *d, uint16_t off);
uint16_t pci_read16(const struct pci_dev *d, uint16_t off);
uint8_t pci_read8(const struct pci_dev *d, uint16_t off);
void pci_write32(const struct pci_dev *d, uint16_t off, uint32_t v);
void pci_write16(const struct pci_dev *d, uint16_t off, uint16_t v);
void pci_write8(const struct pci_dev *d, uint16_t off, uint8_t v);

/* Scans once (later calls return the cached count). */
unsigned int pci_scan(void);
/* The index-th device (0-based) with this vendor and one of the device ids
 * (device2 = 0xffff if only one); NULL when there is none. */
struct pci_dev *pci_find(uint16_t vendor, uint16_t device, uint16_t device2,
			 unsigned int index);
/* Offset of the first capability with id cap at or after position start
 * (pass 0 to begin), 0 when none. */
uint8_t pci_find_cap(const struct pci_dev *d, uint8_t cap, uint8_t start);
/* Memory/I-O decoding and bus mastering on. */
void pci_enable(const struct pci_dev *d);
/* Address of memory BAR bar (64-bit BARs handled), assigning one when the
 * firmware did not; size in *size. 0 on error (I/O BAR, no BAR). */
uint64_t pci_bar(const struct pci_dev *d, unsigned int bar, uint64_t *size);

#endif
