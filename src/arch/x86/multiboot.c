/* Multiboot v1: header search, ELF32 program headers (every field bounds
 * checked: the image is input), segment loading and the info structure. */
#include <elf.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arch/x86/e820.h"
#include "arch/x86/layout.h"
#include "arch/x86/multiboot.h"

#define MBF_PAGE_ALIGN		(1u << 0)
#define MBF_MEMORY_INFO		(1u << 1)
#define MBF_VIDEO_MODE		(1u << 2)
#define MBF_AOUT_KLUDGE		(1u << 16)
#define MBF_KNOWN_REQUIRED	(MBF_PAGE_ALIGN | MBF_MEMORY_INFO | MBF_VIDEO_MODE)

/* multiboot_info flags */
#define MBI_MEMORY		(1u << 0)
#define MBI_CMDLINE		(1u << 2)
#define MBI_MODS		(1u << 3)
#define MBI_MMAP		(1u << 6)
#define MBI_LOADER_NAME		(1u << 9)

struct mb_info {
	uint32_t flags;
	uint32_t mem_lower, mem_upper;
	uint32_t boot_device;
	uint32_t cmdline;
	uint32_t mods_count, mods_addr;
	uint32_t syms[4];
	uint32_t mmap_length, mmap_addr;
	uint32_t drives_length, drives_addr;
	uint32_t config_table;
	uint32_t boot_loader_name;
	uint32_t apm_table;
	uint32_t vbe[6];
} __attribute__((packed));

struct mb_mmap_entry {
	uint32_t size;			/* of the rest: 20 */
	uint64_t addr, len;
	uint32_t type;
} __attribute__((packed));

struct mb_module {
	uint32_t start, end, string, reserved;
};

static const char loader_name[] = "iovm";

#define fail(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

static uint32_t rd32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static int find_header(const uint8_t *img, size_t len, uint32_t *flags)
{
	size_t end = len < MB_SEARCH ? len : MB_SEARCH;

	for (size_t off = 0; off + 12 <= end; off += 4) {
		uint32_t magic = rd32(img + off), f = rd32(img + off + 4);

		if (magic == MB_MAGIC && magic + f + rd32(img + off + 8) == 0) {
			*flags = f;
			return 0;
		}
	}
	return -ENOEXEC;
}

static int check_elf_header(const Elf32_Ehdr *eh, size_t len, char *err,
			    size_t errlen)
{
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return fail("multiboot image is not an ELF file (a.out kludge images are not supported)");
	if (eh->e_ident[EI_CLASS] != ELFCLASS32 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return fail("multiboot image is not a little-endian ELF32 file");
	if (eh->e_type != ET_EXEC || eh->e_machine != EM_386)
		return fail("multiboot image is not an i386 executable");
	if (eh->e_phentsize != sizeof(Elf32_Phdr) || !eh->e_phnum)
		return fail("multiboot image has no usable program headers");
	if (eh->e_phoff > len || (uint64_t)eh->e_phnum * sizeof(Elf32_Phdr) > len - eh->e_phoff)
		return fail("truncated multiboot image: program headers beyond the end of the file");
	return 0;
}

static int add_segment(const Elf32_Phdr *ph, size_t len, uint64_t low_ram_end,
		       struct mb_image *mb, char *err, size_t errlen)
{
	struct mb_segment *s;

	if (ph->p_filesz > ph->p_memsz)
		return fail("ELF segment at 0x%x has a file size above its memory size", ph->p_paddr);
	if (ph->p_offset > len || ph->p_filesz > len - ph->p_offset)
		return fail("truncated multiboot image: segment at 0x%x lies beyond the end of the file",
			    ph->p_paddr);
	if (ph->p_paddr < HIGH_MEMORY || (uint64_t)ph->p_paddr + ph->p_memsz > low_ram_end)
		return fail("ELF segment [0x%x, 0x%llx) is outside guest RAM from 1 MiB (raise --memory?)",
			    ph->p_paddr, (unsigned long long)ph->p_paddr + ph->p_memsz);
	for (unsigned int i = 0; i < mb->nseg; i++)
		if (ph->p_paddr < mb->seg[i].paddr + mb->seg[i].memsz &&
		    mb->seg[i].paddr < (uint64_t)ph->p_paddr + ph->p_memsz)
			return fail("ELF segments at 0x%llx and 0x%x overlap",
				    (unsigned long long)mb->seg[i].paddr, ph->p_paddr);
	if (mb->nseg >= MB_MAX_SEGMENTS)
		return fail("multiboot image has more than %d loadable segments", MB_MAX_SEGMENTS);
	s = &mb->seg[mb->nseg++];
	*s = (struct mb_segment){ ph->p_offset, ph->p_filesz, ph->p_paddr, ph->p_memsz };
	if (s->paddr + s->memsz > mb->load_end)
		mb->load_end = s->paddr + s->memsz;
	return 0;
}

int mb_parse(const uint8_t *img, size_t len, uint64_t low_ram_end,
	     struct mb_image *mb, char *err, size_t errlen)
{
	Elf32_Ehdr eh;
	bool entry_ok = false;
	int ret;

	memset(mb, 0, sizeof(*mb));
	if (find_header(img, len, &mb->flags))
		return -ENOEXEC;
	if (mb->flags & 0xffff & ~MBF_KNOWN_REQUIRED)
		return fail("multiboot header requires features iovm does not know (flags 0x%x)",
			    mb->flags);
	if (len < sizeof(eh))
		return fail("truncated multiboot image: no ELF header");
	memcpy(&eh, img, sizeof(eh));
	ret = check_elf_header(&eh, len, err, errlen);
	if (ret)
		return ret;
	mb->entry = eh.e_entry;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		Elf32_Phdr ph;

		memcpy(&ph, img + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		ret = add_segment(&ph, len, low_ram_end, mb, err, errlen);
		if (ret)
			return ret;
		/* The entry is a virtual address; boot at its physical
		 * twin, as a multiboot loader runs with paging off. */
		if (eh.e_entry >= ph.p_vaddr && eh.e_entry - ph.p_vaddr < ph.p_memsz) {
			mb->entry = ph.p_paddr + (eh.e_entry - ph.p_vaddr);
			entry_ok = true;
		}
	}
	if (!mb->nseg)
		return fail("multiboot image has no loadable segment");
	if (!entry_ok)
		return fail("multiboot entry point 0x%x is outside every loaded segment", eh.e_entry);
	return 0;
}

static unsigned int write_mmap(struct gmem *m, uint64_t mem_size)
{
	struct e820_entry e820[E820_MAX];
	unsigned int n = e820_build(mem_size, e820);
	struct mb_mmap_entry *out = gmem_ptr(m, MB_MMAP, n * sizeof(*out));

	for (unsigned int i = 0; out && i < n; i++)
		out[i] = (struct mb_mmap_entry){ 20, e820[i].addr, e820[i].size, e820[i].type };
	return out ? n * sizeof(*out) : 0;
}

static int load_module(struct gmem *m, const struct mb_image *mb, uint64_t mem_size,
		       const uint8_t *mod, size_t modlen, const char *modname,
		       struct mb_info *info, char *err, size_t errlen)
{
	uint64_t start = (mb->load_end + 0xfff) & ~0xfffull;
	struct mb_module *md = gmem_ptr(m, MB_MODS, sizeof(*md));
	size_t nlen = strlen(modname);
	char *name = gmem_ptr(m, MB_MODNAME, nlen + 1);
	uint8_t *dst;

	if (nlen + 1 > MB_MODNAME_MAX)
		return fail("initrd file name too long for the multiboot module string");
	if (start + modlen > e820_low_ram_end(mem_size) || start + modlen > 0xffffffffull ||
	    !(dst = gmem_ptr(m, start, modlen)) || !md || !name)
		return fail("the initrd (%zu KiB) does not fit in RAM after the kernel; raise --memory",
			    modlen >> 10);
	memcpy(dst, mod, modlen);
	memcpy(name, modname, nlen + 1);
	*md = (struct mb_module){ (uint32_t)start, (uint32_t)(start + modlen), MB_MODNAME, 0 };
	info->flags |= MBI_MODS;
	info->mods_count = 1;
	info->mods_addr = MB_MODS;
	return 0;
}

int mb_setup(struct gmem *m, const uint8_t *img, const struct mb_image *mb,
	     uint64_t mem_size, const char *cmdline, const uint8_t *mod,
	     size_t modlen, const char *modname, uint32_t *mbi, char *err,
	     size_t errlen)
{
	size_t clen = strlen(cmdline);
	struct mb_info *info = gmem_ptr(m, MB_INFO, sizeof(*info));
	char *cl = gmem_ptr(m, BOOT_CMDLINE, clen + 1);
	char *name = gmem_ptr(m, MB_NAME, sizeof(loader_name));
	uint64_t upper = (e820_low_ram_end(mem_size) - HIGH_MEMORY) >> 10;

	if (clen + 1 > BOOT_CMDLINE_MAX)
		return fail("--append is %zu bytes, more than the %llu iovm passes", clen,
			    (unsigned long long)BOOT_CMDLINE_MAX - 1);
	if (!info || !cl || !name)
		return fail("guest RAM too small for the multiboot information");
	for (unsigned int i = 0; i < mb->nseg; i++) {
		const struct mb_segment *s = &mb->seg[i];
		uint8_t *dst = gmem_ptr(m, s->paddr, s->memsz);

		if (!dst)
			return fail("ELF segment at 0x%llx is outside guest RAM",
				    (unsigned long long)s->paddr);
		memcpy(dst, img + s->file_off, s->filesz);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
	memset(info, 0, sizeof(*info));
	info->flags = MBI_MEMORY | MBI_CMDLINE | MBI_MMAP | MBI_LOADER_NAME;
	info->mem_lower = EBDA_START >> 10;
	info->mem_upper = upper > 0xffffffffu ? 0xffffffffu : (uint32_t)upper;
	memcpy(cl, cmdline, clen + 1);
	info->cmdline = BOOT_CMDLINE;
	info->mmap_addr = MB_MMAP;
	info->mmap_length = write_mmap(m, mem_size);
	memcpy(name, loader_name, sizeof(loader_name));
	info->boot_loader_name = MB_NAME;
	if (mod) {
		int ret = load_module(m, mb, mem_size, mod, modlen, modname, info, err, errlen);

		if (ret)
			return ret;
	}
	*mbi = MB_INFO;
	return 0;
}
