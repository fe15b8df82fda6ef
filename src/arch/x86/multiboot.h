/* Multiboot (version 1) loading of ELF32 kernels, the format of iovm's
 * probe guest, which QEMU's -kernel boots the same way. */
#ifndef IOVM_ARCH_X86_MULTIBOOT_H
#define IOVM_ARCH_X86_MULTIBOOT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/gmem.h"

#define MB_MAGIC 0x1BADB002u
#define MB_BOOT_MAGIC 0x2BADB002u	/* in EAX at entry */
#define MB_SEARCH 8192
#define MB_MAX_SEGMENTS 16

struct mb_segment {
	uint64_t file_off;
	uint64_t filesz;
	uint64_t paddr;
	uint64_t memsz;
};

struct mb_image {
	uint32_t flags;			/* multiboot header flags */
	uint32_t entry;			/* physical entry point */
	uint64_t load_end;		/* end of the highest segment */
	struct mb_segment seg[MB_MAX_SEGMENTS];
	unsigned int nseg;
};

/* Returns 0, -ENOEXEC when img carries no multiboot header (not this
 * format), or -EINVAL with a message in err when it does but cannot be
 * booted (bad ELF, segments outside [1 MiB, low_ram_end)). */
int mb_parse(const uint8_t *img, size_t len, uint64_t low_ram_end,
	     struct mb_image *mb, char *err, size_t errlen);

/* Loads the segments, an optional module (the --initrd) right after them,
 * and the multiboot info (memory, mmap, command line) into guest RAM.
 * Returns the info's guest-physical address in *mbi. */
int mb_setup(struct gmem *m, const uint8_t *img, const struct mb_image *mb,
	     uint64_t mem_size, const char *cmdline, const uint8_t *mod,
	     size_t modlen, const char *modname, uint32_t *mbi, char *err,
	     size_t errlen);

#endif
