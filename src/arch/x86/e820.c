/* Guest memory map: RAM around the legacy BIOS area and the PCI hole. */
#include "arch/x86/e820.h"
#include "arch/x86/layout.h"
#include "vm/vm.h"

uint64_t e820_low_ram_end(uint64_t mem_size)
{
	return mem_size < VM_PCI_HOLE_START ? mem_size : VM_PCI_HOLE_START;
}

unsigned int e820_build(uint64_t mem_size, struct e820_entry *out)
{
	uint64_t low = e820_low_ram_end(mem_size);
	unsigned int n = 0;

	out[n++] = (struct e820_entry){ 0, EBDA_START, E820_RAM };
	out[n++] = (struct e820_entry){ EBDA_START, HIGH_MEMORY - EBDA_START, E820_RESERVED };
	out[n++] = (struct e820_entry){ HIGH_MEMORY, low - HIGH_MEMORY, E820_RAM };
	out[n++] = (struct e820_entry){ VM_PCI_HOLE_END, VM_HIGH_RAM_START - VM_PCI_HOLE_END,
					E820_RESERVED };
	if (mem_size > low)
		out[n++] = (struct e820_entry){ VM_HIGH_RAM_START, mem_size - low, E820_RAM };
	return n;
}
