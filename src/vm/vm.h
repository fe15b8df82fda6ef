/* The KVM virtual machine: memory, vCPUs, interrupt routing, and the services
 * devices use (buses, ioeventfds, irqfds, MSI routes, PCI-hole allocation). */
#ifndef IOVM_VM_VM_H
#define IOVM_VM_VM_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/gmem.h"
#include "vm/bus.h"

/* Guest-physical layout (x86). RAM is split around the PCI hole. */
#define VM_PCI_HOLE_START 0xC0000000ull	/* 3 GiB: BARs live from here */
#define VM_PCI_HOLE_END 0xFEC00000ull	/* IOAPIC and LAPIC above */
#define VM_HIGH_RAM_START 0x100000000ull

struct vm;

struct gmem *vm_gmem(struct vm *vm);
struct bus *vm_pio_bus(struct vm *vm);
struct bus *vm_mmio_bus(struct vm *vm);
unsigned int vm_ncpus(const struct vm *vm);

/* Assigns (or with assign=false removes) an ioeventfd: a guest write to addr
 * signals fd in the kernel, without a userspace exit. len 0 matches any
 * width; datamatch < 0 means any value. */
int vm_ioeventfd(struct vm *vm, uint64_t addr, unsigned int len, bool pio,
		 int64_t datamatch, int fd, bool assign);

/* Binds eventfd fd to interrupt gsi. resample_fd >= 0 makes it a
 * level-triggered INTx line that the kernel deasserts on EOI and reports
 * through resample_fd. */
int vm_irqfd(struct vm *vm, unsigned int gsi, int fd, int resample_fd,
	     bool assign);

/* Level of an IOAPIC/PIC input line (INTx, serial). */
int vm_irq_line(struct vm *vm, unsigned int gsi, int level);

/* MSI routes: allocate a GSI, then (re)program its address/data; the routing
 * table is pushed to KVM on each change. A masked vector is routed nowhere
 * (the device then latches it in the PBA). addr 0 (a vector never
 * programmed) is routed nowhere too. Returns gsi >= 0 or -errno. */
int vm_msi_route_alloc(struct vm *vm);
int vm_msi_route_set(struct vm *vm, unsigned int gsi, uint64_t addr,
		     uint32_t data);

/* Places a BAR of size bytes (a power of two, naturally aligned) in the
 * 32-bit PCI hole. Returns its guest-physical base, 0 when full. */
uint64_t vm_pci_mmio_alloc(struct vm *vm, uint64_t size);

/* Allocates size bytes of I/O port space (aligned to size) for PCI I/O
 * BARs, from 0xc000 upward. Returns the base or 0 when full. */
uint16_t vm_pci_pio_alloc(struct vm *vm, uint16_t size);

/* Requests an orderly stop with this exit status (guest poweroff, exit
 * device, signal). Safe from any thread. */
void vm_request_stop(struct vm *vm, int status);

/* Devices with I/O threads register a drain hook: called once on shutdown,
 * after the vCPUs stopped, to finish in-flight I/O and flush backends. */
int vm_add_shutdown_hook(struct vm *vm, void (*fn)(void *opaque), void *opaque);

/* Asks the main loop to call fn(opaque) when fd is readable (console
 * input); fn returns false at end of input. One input at most. */
int vm_set_input(struct vm *vm, int fd, bool (*fn)(void *opaque), void *opaque);

/* Reboot semantics: the guest asked for a reset (through the keyboard
 * controller); a triple fault that follows is the reset, not a crash. */
void vm_request_reset(struct vm *vm);

#endif
