/* Kernel image parsers: bzImage header, placement and boot_params; the
 * multiboot header, ELF32 program headers and info; the vmlinux ELF64
 * loader. Input: the image file; loaded into 32 MiB of fake guest RAM. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86/bzimage.h"
#include "arch/x86/multiboot.h"
#include "arch/x86/vmlinux.h"

#define RAM (32u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	struct gmem m = { .n = 1 };
	struct bzimage_info bi;
	struct bzimage_layout lay;
	struct mb_image mb;
	struct vmlinux_image vi;
	char err[256];
	uint32_t mbi;

	if (!ram && !(ram = malloc(RAM)))
		return 0;
	m.r[0] = (struct gmem_region){ 0, RAM, ram };
	if (!bzimage_parse(data, size, &bi, err, sizeof(err)) &&
	    !bzimage_place(&bi, RAM, size / 2, &lay, err, sizeof(err))) {
		bzimage_setup(&m, data, &bi, &lay, RAM, "console=ttyS0", err, sizeof(err));
		bzimage_copy_kernel(&m, data, &bi, &lay);
	}
	if (!mb_parse(data, size, RAM, &mb, err, sizeof(err)))
		mb_setup(&m, data, &mb, RAM, "test=basic", data, size < 4096 ? size : 4096,
			 "initrd", &mbi, err, sizeof(err));
	if (!vmlinux_parse(data, size, RAM, &vi, err, sizeof(err)))
		vmlinux_load(&m, data, &vi);
	return 0;
}
