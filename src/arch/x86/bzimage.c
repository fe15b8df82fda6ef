/* bzImage loading per the Linux x86 boot protocol, version 2.12 and up,
 * entered at the 64-bit entry point. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arch/x86/bzimage.h"
#include "arch/x86/e820.h"
#include "arch/x86/layout.h"

/* Offsets in the image's first sector and in boot_params (the same). */
#define OFF_EXT_RAMDISK_IMAGE	0x0c0
#define OFF_EXT_RAMDISK_SIZE	0x0c4
#define OFF_EXT_CMD_LINE_PTR	0x0c8
#define OFF_ALT_MEM_K		0x1e0
#define OFF_E820_ENTRIES	0x1e8
#define OFF_SETUP_SECTS		0x1f1
#define OFF_BOOT_FLAG		0x1fe
#define OFF_JUMP		0x200
#define OFF_HEADER		0x202
#define OFF_VERSION		0x206
#define OFF_KERNEL_VERSION	0x20e
#define OFF_TYPE_OF_LOADER	0x210
#define OFF_LOADFLAGS		0x211
#define OFF_CODE32_START	0x214
#define OFF_RAMDISK_IMAGE	0x218
#define OFF_RAMDISK_SIZE	0x21c
#define OFF_CMD_LINE_PTR	0x228
#define OFF_INITRD_ADDR_MAX	0x22c
#define OFF_KERNEL_ALIGNMENT	0x230
#define OFF_RELOCATABLE		0x234
#define OFF_XLOADFLAGS		0x236
#define OFF_CMDLINE_SIZE	0x238
#define OFF_PAYLOAD_OFFSET	0x248
#define OFF_PAYLOAD_LENGTH	0x24c
#define OFF_PREF_ADDRESS	0x258
#define OFF_INIT_SIZE		0x260
#define HDR_MIN_END		0x264	/* through init_size (2.10+) */
#define OFF_E820_TABLE		0x2d0
#define E820_TABLE_MAX		128
#define BOOT_PARAMS_SIZE	4096

static uint16_t rd16(const uint8_t *p) { return p[0] | p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, v); wr16(p + 2, v >> 16); }

#define fail(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

static void read_version_string(const uint8_t *img, size_t len,
				struct bzimage_info *bi)
{
	/* kernel_version points (minus 0x200) at a NUL-terminated string
	 * inside the setup code. */
	size_t off = rd16(img + OFF_KERNEL_VERSION);
	size_t i;

	bi->kernel_version[0] = '\0';
	if (!off || off + 0x200 >= bi->setup_size || off + 0x200 >= len)
		return;
	off += 0x200;
	for (i = 0; i + 1 < sizeof(bi->kernel_version) && off + i < len; i++) {
		uint8_t c = img[off + i];

		if (!c)
			break;
		bi->kernel_version[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
	}
	bi->kernel_version[i] = '\0';
}

int bzimage_parse(const uint8_t *img, size_t len, struct bzimage_info *bi,
		  char *err, size_t errlen)
{
	unsigned int sects;

	memset(bi, 0, sizeof(*bi));
	if (len < OFF_HEADER + 4 || rd16(img + OFF_BOOT_FLAG) != 0xAA55 ||
	    memcmp(img + OFF_HEADER, "HdrS", 4))
		return -ENOEXEC;
	/* "HdrS" ends where the version begins: a file cut right after it
	 * must not be read past its end. */
	if (len < OFF_VERSION + 2)
		return fail("truncated bzImage: the setup header is incomplete");
	bi->version = rd16(img + OFF_VERSION);
	if (bi->version < BZ_MIN_VERSION)
		return fail("boot protocol %u.%02u is too old: iovm needs 2.12 or later (a 64-bit kernel)",
			    bi->version >> 8, bi->version & 0xff);
	bi->hdr_end = OFF_JUMP + 2 + img[OFF_JUMP + 1];
	if (len < HDR_MIN_END || bi->hdr_end < HDR_MIN_END)
		return fail("truncated bzImage: the setup header is incomplete");
	if (bi->hdr_end > OFF_E820_TABLE)
		bi->hdr_end = OFF_E820_TABLE;
	sects = img[OFF_SETUP_SECTS] ? img[OFF_SETUP_SECTS] : 4;
	bi->setup_size = (size_t)(sects + 1) * 512;
	if (bi->setup_size >= len)
		return fail("truncated bzImage: no protected-mode kernel after %zu bytes of setup",
			    bi->setup_size);
	bi->kernel_off = bi->setup_size;
	bi->kernel_size = len - bi->setup_size;
	if (!(img[OFF_LOADFLAGS] & BZ_LOADED_HIGH))
		return fail("not a bzImage (a zImage loaded low), which iovm does not boot");
	bi->xloadflags = rd16(img + OFF_XLOADFLAGS);
	if (!(bi->xloadflags & XLF_KERNEL_64))
		return fail("this kernel has no 64-bit entry point (XLF_KERNEL_64): iovm boots 64-bit kernels");
	bi->initrd_addr_max = rd32(img + OFF_INITRD_ADDR_MAX);
	bi->kernel_alignment = rd32(img + OFF_KERNEL_ALIGNMENT);
	bi->relocatable = img[OFF_RELOCATABLE];
	bi->cmdline_size = rd32(img + OFF_CMDLINE_SIZE);
	bi->pref_address = rd64(img + OFF_PREF_ADDRESS);
	bi->init_size = rd32(img + OFF_INIT_SIZE);
	bi->payload_offset = rd32(img + OFF_PAYLOAD_OFFSET);
	bi->payload_length = rd32(img + OFF_PAYLOAD_LENGTH);
	if (bi->init_size < bi->kernel_size)
		bi->init_size = bi->kernel_size;
	if (bi->kernel_alignment & (bi->kernel_alignment - 1))
		return fail("bzImage kernel_alignment 0x%x is not a power of two",
			    bi->kernel_alignment);
	read_version_string(img, len, bi);
	return 0;
}

int bzimage_place(const struct bzimage_info *bi, uint64_t mem_size,
		  uint64_t initrd_size, struct bzimage_layout *lay, char *err,
		  size_t errlen)
{
	uint64_t low_end = e820_low_ram_end(mem_size);
	uint64_t addr = bi->pref_address, align = bi->kernel_alignment;
	uint64_t kend, top;

	memset(lay, 0, sizeof(*lay));
	if (addr < HIGH_MEMORY || addr + bi->init_size > low_end) {
		if (!bi->relocatable && addr >= HIGH_MEMORY)
			return fail("the kernel needs %u MiB of RAM from 0x%llx; --memory is too small",
				    (unsigned int)((bi->init_size + (1u << 20) - 1) >> 20),
				    (unsigned long long)addr);
		addr = HIGH_MEMORY;
		if (bi->relocatable && align > 1)
			addr = (addr + align - 1) & ~(align - 1);
	}
	kend = addr + bi->init_size;
	if (kend > low_end)
		return fail("the kernel needs %llu MiB of RAM; --memory is too small",
			    (unsigned long long)((kend + (1u << 20) - 1) >> 20));
	lay->load_addr = addr;
	if (!initrd_size)
		return 0;
	/* Highest page-aligned spot below both the end of low RAM and
	 * initrd_addr_max, as bootloaders do, clear of the kernel. */
	top = low_end;
	if (bi->initrd_addr_max && (uint64_t)bi->initrd_addr_max + 1 < top)
		top = (uint64_t)bi->initrd_addr_max + 1;
	if (initrd_size > top || ((top - initrd_size) & ~0xfffull) < kend)
		return fail("the initrd (%llu MiB) does not fit in RAM above the kernel; raise --memory",
			    (unsigned long long)(initrd_size >> 20));
	lay->initrd_addr = (top - initrd_size) & ~0xfffull;
	lay->initrd_size = initrd_size;
	return 0;
}

int bzimage_copy_kernel(struct gmem *m, const uint8_t *img,
			const struct bzimage_info *bi,
			const struct bzimage_layout *lay)
{
	uint8_t *kern = gmem_ptr(m, lay->load_addr, bi->kernel_size);

	if (!kern)
		return -EINVAL;
	memcpy(kern, img + bi->kernel_off, bi->kernel_size);
	return 0;
}

int bzimage_setup(struct gmem *m, const uint8_t *img,
		  const struct bzimage_info *bi, const struct bzimage_layout *lay,
		  uint64_t mem_size, const char *cmdline, char *err,
		  size_t errlen)
{
	struct e820_entry e820[E820_MAX];
	size_t clen = strlen(cmdline);
	uint8_t *bp = gmem_ptr(m, BOOT_PARAMS, BOOT_PARAMS_SIZE);
	uint8_t *cl = gmem_ptr(m, BOOT_CMDLINE, clen + 1);
	unsigned int n;

	if (clen > bi->cmdline_size || clen + 1 > BOOT_CMDLINE_MAX)
		return fail("--append is %zu bytes; this kernel takes at most %u",
			    clen, bi->cmdline_size < BOOT_CMDLINE_MAX - 1 ?
			    bi->cmdline_size : (unsigned int)BOOT_CMDLINE_MAX - 1);
	if (!bp || !cl)
		return fail("guest RAM too small for boot_params");
	memcpy(cl, cmdline, clen + 1);

	memset(bp, 0, BOOT_PARAMS_SIZE);
	memcpy(bp + OFF_SETUP_SECTS, img + OFF_SETUP_SECTS, bi->hdr_end - OFF_SETUP_SECTS);
	bp[OFF_TYPE_OF_LOADER] = 0xff;		/* undefined boot loader */
	bp[OFF_LOADFLAGS] = BZ_LOADED_HIGH;	/* no heap: 64-bit entry */
	wr32(bp + OFF_CODE32_START, lay->load_addr);
	wr32(bp + OFF_CMD_LINE_PTR, BOOT_CMDLINE);
	wr32(bp + OFF_EXT_CMD_LINE_PTR, 0);
	wr32(bp + OFF_RAMDISK_IMAGE, (uint32_t)lay->initrd_addr);
	wr32(bp + OFF_RAMDISK_SIZE, (uint32_t)lay->initrd_size);
	wr32(bp + OFF_EXT_RAMDISK_IMAGE, (uint32_t)(lay->initrd_addr >> 32));
	wr32(bp + OFF_EXT_RAMDISK_SIZE, (uint32_t)(lay->initrd_size >> 32));
	{
		uint64_t kb = (e820_low_ram_end(mem_size) - HIGH_MEMORY) >> 10;

		wr32(bp + OFF_ALT_MEM_K, kb > 0xffffffffu ? 0xffffffffu : (uint32_t)kb);
	}
	n = e820_build(mem_size, e820);
	bp[OFF_E820_ENTRIES] = n;
	memcpy(bp + OFF_E820_TABLE, e820, n * sizeof(e820[0]));
	return 0;
}
