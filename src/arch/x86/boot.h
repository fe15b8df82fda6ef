/* x86 machine setup for `iovm run`: CPUID and MP table for every vCPU,
 * the kernel (bzImage or multiboot ELF) and initrd in guest RAM, and the
 * boot vCPU's registers at the kernel's entry point. */
#ifndef IOVM_ARCH_X86_BOOT_H
#define IOVM_ARCH_X86_BOOT_H

#include <stdbool.h>
#include <stdint.h>

struct vm;
struct vm_config;

enum boot_kind { BOOT_LINUX64, BOOT_MULTIBOOT };

struct boot_entry {
	enum boot_kind kind;
	uint64_t rip;
	uint64_t rsi;		/* Linux: boot_params */
	uint32_t eax, ebx;	/* multiboot: magic, info */
};

/* Prints one clear error line and returns -errno on failure. */
int x86_setup(struct vm *vm, const struct vm_config *cfg);

/* Loads cfg->kernel (and initrd) into guest RAM; fills the entry state. */
int x86_load_kernel(struct vm *vm, const struct vm_config *cfg,
		    struct boot_entry *entry);

#endif
