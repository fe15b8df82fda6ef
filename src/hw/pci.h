/* PCI bus 0: devices with a 256-byte config space and capabilities, 32-bit
 * BARs (moved when the driver reprograms them), MSI-X (table and PBA in a
 * BAR, masking honoured) and an INTx fallback with resample. How accesses
 * arrive and interrupts leave is the bus's host (struct pci_host_ops): in
 * `iovm run` the KVM VM (mechanism #1 ports 0xCF8/0xCFC, BARs in the PCI
 * hole on its exit buses, MSI routes and irqfds); for UML the virtio-pcidev
 * transport (vhost/pcidev.c), which passes messages. */
#ifndef IOVM_HW_PCI_H
#define IOVM_HW_PCI_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/bus.h"

struct gmem;
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

/* What carries a bus's accesses and interrupts. Interrupts are eventfds
 * bound to routes: an MSI-X vector's route, or a slot's INTx line. */
struct pci_host_ops {
	/* A route for one MSI-X vector (KVM: an MSI GSI), or -errno. */
	int (*msi_alloc)(void *host);
	/* (Re)programs an MSI route with the vector's table entry; addr 0
	 * (never programmed) routes it nowhere. */
	int (*msi_set)(void *host, unsigned int route, uint64_t addr, uint32_t data);
	/* The route of slot's INTA#. */
	int (*intx_route)(void *host, unsigned int slot);
	/* From now on (assign) signals on eventfd fd raise route, or no
	 * longer do. A count fd already holds when assigned is delivered at
	 * once (that is how a masked vector's latched interrupt leaves on
	 * unmask). resample_fd >= 0: route is a level-triggered line, held
	 * until the driver has served it (KVM: its EOI), then the host
	 * signals resample_fd and the bus re-asserts if the device asks. */
	int (*irqfd)(void *host, unsigned int route, int fd, int resample_fd,
		     bool assign);
	/* Optional: a driver write of len bytes at addr signals fd without
	 * calling the BAR's handler (KVM ioeventfd). */
	int (*ioeventfd)(void *host, uint64_t addr, unsigned int len, int fd,
			 bool assign);
	/* fn(opaque) runs once when the functions go away: the devices
	 * drain in-flight I/O, flush and free themselves there. */
	int (*add_shutdown_hook)(void *host, void (*fn)(void *opaque), void *opaque);
	/* Optional, both or neither: an address space BARs decode in. Then
	 * each BAR is placed at creation (bar_alloc returns its address, 0
	 * when full) and registered at its address while it decodes
	 * (bar_map; -ERANGE: outside the host's window, it does not decode).
	 * Without them the driver places BARs and accesses arrive as (BAR,
	 * offset) through pci_bar_access. */
	uint64_t (*bar_alloc)(void *host, uint64_t size, bool pio);
	int (*bar_map)(void *host, uint64_t addr, uint64_t size, bool pio,
		       bus_io_fn fn, void *opaque, bool map);
};

/* The bus and its host bridge (slot 0) in a KVM VM; registers ports
 * 0xCF8-0xCFF. */
struct pci_bus *pci_bus_create(struct vm *vm);
/* A bus on another host; mem is the memory its devices DMA to (it may
 * change contents while no device runs). */
struct pci_bus *pci_bus_create_host(const struct pci_host_ops *ops, void *host,
				    const struct gmem *mem);
void pci_bus_destroy(struct pci_bus *bus);

/* The host's services, for device code: DMA memory, shutdown hooks,
 * ioeventfds (-EOPNOTSUPP where the host has none: then the BAR handler
 * sees the write). */
const struct gmem *pci_bus_gmem(const struct pci_bus *bus);
int pci_bus_add_shutdown_hook(struct pci_bus *bus, void (*fn)(void *opaque),
			      void *opaque);
int pci_ioeventfd(struct pci_dev *pd, uint64_t addr, unsigned int len, int fd,
		  bool assign);
/* The device in slot (1..PCI_MAX_SLOTS-1), or NULL. */
struct pci_dev *pci_bus_dev(struct pci_bus *bus, unsigned int slot);

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
uint64_t pci_bar_size(const struct pci_dev *pd, unsigned int bar);
/* An access of len (1-8) bytes at offset off of BAR bar, for hosts whose
 * accesses arrive by BAR (no bar_map). -EINVAL for a bad BAR number or
 * length, -ENXIO when the BAR does not exist or does not decode (command
 * register), -ERANGE past its end: a read is then left to the caller to
 * fill (all-ones, as a master abort reads). */
int pci_bar_access(struct pci_dev *pd, unsigned int bar, uint64_t off,
		   void *data, unsigned int len, bool is_write);

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
