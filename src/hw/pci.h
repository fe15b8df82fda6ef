/* PCI bus 0: a host bridge answering configuration mechanism #1 (ports
 * 0xCF8/0xCFC), devices with a 256-byte config space, 32-bit BARs placed in
 * the PCI hole (and moved when the guest reprograms them), MSI-X (table and
 * PBA in a BAR, routed through KVM MSI routes and irqfds, masking honoured)
 * and an INTx fallback (level-triggered irqfd with resample). */
#ifndef IOVM_HW_PCI_H
#define IOVM_HW_PCI_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/bus.h"

struct vm;
struct pci_bus;
struct pci_dev;

#define PCI_MAX_SLOTS 32
#define PCI_NUM_BARS 6
#define PCI_MSIX_MAX_VECTORS 128
#define PCI_NO_VECTOR 0xffff

#define PCI_CAP_ID_VNDR 0x09
#define PCI_CAP_ID_MSIX 0x11

/* INTx wiring, fixed, for the MP table: INTA# of the device in slot s is
 * IOAPIC input pci_intx_gsi(s), level-triggered, active low (the PCI bus
 * default: MP irqflag 0). Source bus IRQ in MP terms: (s << 2) | 0. */
#define PCI_INTX_GSI_BASE 16
static inline unsigned int pci_intx_gsi(unsigned int slot)
{
	return PCI_INTX_GSI_BASE + slot % 8;
}

struct pci_dev_info {
	uint16_t vendor, device;
	uint16_t subsys_vendor, subsys;
	uint32_t class_code;	/* base << 16 | sub << 8 | prog-if */
	uint8_t revision;
};

/* Device callbacks, all optional, called on the vCPU thread that made the
 * config access (or the INTx resample thread for intx_pending). */
struct pci_dev_ops {
	/* A BAR became visible at addr (mapped) or stopped decoding: move
	 * ioeventfds that live in it. */
	void (*bar_mapped)(struct pci_dev *pd, unsigned int bar, uint64_t addr,
			   bool mapped);
	/* INTx level after the guest's EOI: true re-asserts the line.
	 * Called with the device's irq lock held and only while one of its
	 * eventfds is bound (pci_irq_unbind waits for a call in progress);
	 * it must not call pci_irq_bind/unbind. */
	bool (*intx_pending)(struct pci_dev *pd);
	/* Config accesses at or above 0x40 after the generic handling (a
	 * read may overwrite *data). */
	void (*cfg_access)(struct pci_dev *pd, unsigned int off, void *data,
			   unsigned int len, bool is_write);
};

/* The bus and its host bridge (slot 0); registers ports 0xCF8-0xCFF. */
struct pci_bus *pci_bus_create(struct vm *vm);
void pci_bus_destroy(struct pci_bus *bus);

/* Adds a function-0 device at the next free slot. Returns NULL when the
 * bus is full. */
struct pci_dev *pci_dev_add(struct pci_bus *bus, const struct pci_dev_info *info,
			    const struct pci_dev_ops *ops, void *opaque);
void *pci_dev_opaque(const struct pci_dev *pd);
unsigned int pci_dev_slot(const struct pci_dev *pd);

/* A 32-bit memory BAR (size a power of two >= 4096) placed in the PCI hole,
 * or an I/O BAR (pio, size a power of two 4..256). fn serves accesses with
 * offsets from the BAR's start. Returns 0 or -errno. */
int pci_bar_add(struct pci_dev *pd, unsigned int bar, uint64_t size, bool pio,
		bus_io_fn fn, void *opaque);
/* Current address of a BAR and whether it decodes. */
uint64_t pci_bar_addr(const struct pci_dev *pd, unsigned int bar, bool *mapped);

/* Appends a capability (cap[0] = id; cap[1], the next pointer, is filled
 * in). Returns its config-space offset or -ENOSPC. */
int pci_cap_add(struct pci_dev *pd, const void *cap, unsigned int len);
uint8_t *pci_cfg_space(struct pci_dev *pd);
/* Which config bits the guest may write (for capabilities with fields). */
uint8_t *pci_cfg_wmask(struct pci_dev *pd);

/* MSI-X with nvec vectors; table and PBA in their own memory BAR. */
int pci_msix_init(struct pci_dev *pd, unsigned int nvec, unsigned int bar);
bool pci_msix_enabled(const struct pci_dev *pd);

/* Routes interrupts signalled on eventfd fd: to MSI-X vector vec while
 * MSI-X is enabled (nowhere for PCI_NO_VECTOR or a vector out of range; a
 * masked vector latches its pending bit and fires on unmask), to the INTx
 * line while MSI-X is disabled. Binding an fd again changes its vector.
 * The binding follows every later enable, mask and INTx-disable change. */
int pci_irq_bind(struct pci_dev *pd, int fd, unsigned int vec);
void pci_irq_unbind(struct pci_dev *pd, int fd);

/* Config space access as mechanism #1 does it (also for tests). */
void pci_cfg_access(struct pci_bus *bus, unsigned int slot, unsigned int off,
		    void *data, unsigned int len, bool is_write);

#endif
