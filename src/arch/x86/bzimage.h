/* Linux x86 boot protocol (Documentation/arch/x86/boot.rst): bzImage
 * header checks, placement, boot_params, 64-bit entry. */
#ifndef IOVM_ARCH_X86_BZIMAGE_H
#define IOVM_ARCH_X86_BZIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/gmem.h"

#define BZ_MIN_VERSION 0x020c	/* 2.12: xloadflags, 64-bit entry */
#define XLF_KERNEL_64 (1u << 0)
#define BZ_LOADED_HIGH 0x01

struct bzimage_info {
	uint16_t version;
	size_t setup_size;		/* boot sector + real-mode setup */
	size_t kernel_off, kernel_size;	/* protected-mode kernel in the file */
	size_t hdr_end;			/* end of the setup header */
	uint32_t init_size;		/* memory the kernel needs from load */
	uint64_t pref_address;
	uint32_t kernel_alignment;
	bool relocatable;
	uint32_t initrd_addr_max;
	uint32_t cmdline_size;		/* without the NUL */
	uint16_t xloadflags;
	uint32_t payload_offset;	/* compressed vmlinux, from kernel_off */
	uint32_t payload_length;
	char kernel_version[96];	/* "" when the image has none */
};

struct bzimage_layout {
	uint64_t load_addr;
	uint64_t initrd_addr;
	uint64_t initrd_size;
};

/* Returns 0, -ENOEXEC when img is no bzImage at all (so another format may
 * be tried), or -EINVAL with a message in err for a bzImage iovm cannot
 * boot (truncated, too old, not 64-bit). */
int bzimage_parse(const uint8_t *img, size_t len, struct bzimage_info *bi,
		  char *err, size_t errlen);

/* Chooses where the kernel and the initrd go in a guest of mem_size. */
int bzimage_place(const struct bzimage_info *bi, uint64_t mem_size,
		  uint64_t initrd_size, struct bzimage_layout *lay, char *err,
		  size_t errlen);

/* Copies the protected-mode kernel (with its decompressor) to its load
 * address. */
int bzimage_copy_kernel(struct gmem *m, const uint8_t *img,
			const struct bzimage_info *bi,
			const struct bzimage_layout *lay);

/* Writes the command line and boot_params (setup header, e820, initrd)
 * into guest RAM. */
int bzimage_setup(struct gmem *m, const uint8_t *img,
		  const struct bzimage_info *bi, const struct bzimage_layout *lay,
		  uint64_t mem_size, const char *cmdline, char *err,
		  size_t errlen);

#endif
