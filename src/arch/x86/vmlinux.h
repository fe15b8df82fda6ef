/* The vmlinux ELF inside a bzImage: iovm decompresses it on the host and
 * boots it directly at its 64-bit entry (as Firecracker does), sparing the
 * guest the decompressor. On this project's PVM hosts, where guest kernel
 * code is emulated, the decompressor alone would take many minutes. */
#ifndef IOVM_ARCH_X86_VMLINUX_H
#define IOVM_ARCH_X86_VMLINUX_H

#include <stddef.h>
#include <stdint.h>

#include "arch/x86/bzimage.h"
#include "lib/gmem.h"

#define VMLINUX_MAX_SIZE (512u << 20)
#define VMLINUX_MAX_SEGMENTS 16

struct vmlinux_segment {
	uint64_t file_off, filesz, paddr, memsz;
};

struct vmlinux_image {
	uint64_t entry;		/* physical */
	uint64_t start, end;	/* physical extent of all segments */
	struct vmlinux_segment seg[VMLINUX_MAX_SEGMENTS];
	unsigned int nseg;
};

/* Decompresses the bzImage's payload (xz, zstd or gzip) into scratch when
 * it fits there (then *out == scratch: iovm passes unused guest RAM, so no
 * kernel-sized host buffer stays resident), else into a malloc'ed buffer
 * the caller frees. Returns 0, -ENOTSUP for a payload format iovm cannot
 * decompress (then the in-guest decompressor is used), or -EINVAL with a
 * message. */
int vmlinux_extract(const uint8_t *img, size_t len, const struct bzimage_info *bi,
		    uint8_t *scratch, size_t scratch_len, uint8_t **out,
		    size_t *outlen, char *err, size_t errlen);

/* Checks an x86-64 ELF executable and its loadable segments, which must
 * lie in [1 MiB, low_ram_end). */
int vmlinux_parse(const uint8_t *elf, size_t len, uint64_t low_ram_end,
		  struct vmlinux_image *vi, char *err, size_t errlen);

int vmlinux_load(struct gmem *m, const uint8_t *elf, const struct vmlinux_image *vi);

#endif
