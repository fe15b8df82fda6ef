/* The guest's physical memory map (e820), shared by the Linux and the
 * multiboot loaders. */
#ifndef IOVM_ARCH_X86_E820_H
#define IOVM_ARCH_X86_E820_H

#include <stdint.h>

#define E820_RAM 1
#define E820_RESERVED 2
#define E820_MAX 8

struct e820_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
} __attribute__((packed));

/* Fills out[] for a guest of mem_size bytes (>= 2 MiB) and returns the
 * number of entries: base RAM, the EBDA/BIOS hole, RAM from 1 MiB up to
 * the PCI hole, the IOAPIC/LAPIC range, RAM above 4 GiB. */
unsigned int e820_build(uint64_t mem_size, struct e820_entry *out);

/* End of the RAM that starts at 1 MiB (below the PCI hole). */
uint64_t e820_low_ram_end(uint64_t mem_size);

#endif
