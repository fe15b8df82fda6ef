/* Where iovm puts the boot-time structures in guest-physical memory (x86).
 * Everything sits below 1 MiB, outside any kernel's load range. */
#ifndef IOVM_ARCH_X86_LAYOUT_H
#define IOVM_ARCH_X86_LAYOUT_H

#define BOOT_GDT		0x1000ull
#define BOOT_PARAMS		0x7000ull	/* Linux zero page */
#define MB_INFO			0x8000ull	/* multiboot info */
#define MB_MMAP			0x8200ull
#define MB_MMAP_MAX		0x400ull
#define MB_NAME			0x8600ull
#define MB_MODS			0x8700ull
#define MB_MODNAME		0x8800ull
#define MB_MODNAME_MAX		0x800ull
#define BOOT_PML4		0x9000ull
#define BOOT_PDPT		0xA000ull
#define BOOT_PD			0xB000ull	/* 4 pages: identity map of 4 GiB */
#define BOOT_STACK_TOP		0x1F000ull
#define BOOT_CMDLINE		0x20000ull
#define BOOT_CMDLINE_MAX	0x10000ull	/* 64 KiB, with the NUL */
#define EBDA_START		0x9FC00ull	/* reserved from here to 1 MiB */
#define ACPI_BASE		0xE0000ull	/* RSDP and the ACPI tables */
#define MPTABLE_BASE		0xF0000ull	/* MP floating pointer + table */
#define HIGH_MEMORY		0x100000ull	/* 1 MiB */
#define LAPIC_BASE		0xFEE00000ull
#define IOAPIC_BASE		0xFEC00000ull

/* GDT selectors: Linux's 64-bit boot protocol wants __BOOT_CS 0x10 and
 * __BOOT_DS 0x18; multiboot gets a flat 32-bit code segment at 0x20. */
#define GDT_CS64		0x10
#define GDT_DS			0x18
#define GDT_CS32		0x20

#endif
