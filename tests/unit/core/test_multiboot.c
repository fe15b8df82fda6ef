/* Multiboot ELF parsing and loading over fake guest RAM: valid images,
 * truncated ones, garbage and hostile program headers. */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "arch/x86/layout.h"
#include "arch/x86/multiboot.h"

#define RAM (32u << 20)
#define IMG 8192

static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* ELF32 with two PT_LOADs (code at 1 MiB, bss at 1 MiB + 64K) and the
 * multiboot header at 0x1000. */
static uint8_t *make_image(void)
{
	uint8_t *img = calloc(1, IMG);
	Elf32_Ehdr *eh = (Elf32_Ehdr *)img;
	Elf32_Phdr *ph = (Elf32_Phdr *)(img + sizeof(*eh));
	uint32_t hdr[3] = { MB_MAGIC, 0x3, -(MB_MAGIC + 0x3) };

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_386;
	eh->e_entry = 0x100010;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 3;
	ph[0] = (Elf32_Phdr){ .p_type = PT_LOAD, .p_offset = 0x1000, .p_vaddr = 0x100000,
			      .p_paddr = 0x100000, .p_filesz = 0x1000, .p_memsz = 0x1000 };
	ph[1] = (Elf32_Phdr){ .p_type = PT_NOTE, .p_offset = 0x5000, .p_filesz = 0x100000 };
	ph[2] = (Elf32_Phdr){ .p_type = PT_LOAD, .p_offset = 0x1800, .p_vaddr = 0x110000,
			      .p_paddr = 0x110000, .p_filesz = 0x10, .p_memsz = 0x4000 };
	memcpy(img + 0x1000, hdr, sizeof(hdr));
	memset(img + 0x1010, 0xf4, 16);
	return img;
}

static void test_parse_valid(void **state)
{
	struct mb_image mb;
	char err[256];
	uint8_t *img = make_image();

	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), 0);
	assert_int_equal(mb.nseg, 2);
	assert_int_equal(mb.entry, 0x100010);
	assert_int_equal(mb.flags, 3);
	assert_int_equal(mb.load_end, 0x114000);
	/* Higher-half link: the entry is translated to its physical twin. */
	((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)))[0].p_vaddr = 0xc0100000;
	((Elf32_Ehdr *)img)->e_entry = 0xc0100010;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), 0);
	assert_int_equal(mb.entry, 0x100010);
	free(img);
}

static void test_parse_errors(void **state)
{
	struct mb_image mb;
	char err[256];
	uint8_t *img = make_image();
	Elf32_Ehdr *eh = (Elf32_Ehdr *)img;
	Elf32_Phdr *ph = (Elf32_Phdr *)(img + sizeof(*eh));

	/* Truncated: the segment's bytes are past the end. */
	assert_int_equal(mb_parse(img, 0x1804, RAM, &mb, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated"));
	/* Program headers past the end. */
	eh->e_phoff = IMG - 10;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	eh->e_phoff = sizeof(*eh);
	/* Segment below 1 MiB (over the boot structures) or above RAM. */
	ph[0].p_paddr = 0x8000;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	ph[0].p_paddr = RAM - 0x800;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	ph[0].p_paddr = 0xfffff000;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	/* Overlapping segments. */
	ph[0].p_paddr = 0x110000;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "overlap"));
	ph[0].p_paddr = 0x100000;
	/* filesz > memsz. */
	ph[2].p_filesz = 0x5000;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	ph[2].p_filesz = 0x10;
	/* Entry outside every segment. */
	eh->e_entry = 0x200000;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	eh->e_entry = 0x100010;
	/* ELF64, or not ELF (a.out kludge). */
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	img[0] = 0;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	img[0] = 0x7f;
	/* Required flags iovm does not know. */
	((uint32_t *)(img + 0x1000))[1] = 0x8;
	((uint32_t *)(img + 0x1000))[2] = -(MB_MAGIC + 0x8);
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -EINVAL);
	/* Bad checksum: no header at all. */
	((uint32_t *)(img + 0x1000))[2] = 0;
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -ENOEXEC);
	/* Garbage and tiny inputs. */
	memset(img, 0x41, IMG);
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), -ENOEXEC);
	assert_int_equal(mb_parse(img, 3, RAM, &mb, err, sizeof(err)), -ENOEXEC);
	free(img);
}

static void test_setup(void **state)
{
	static uint8_t *ram;
	struct gmem m = { .n = 1 };
	struct mb_image mb;
	char err[256];
	uint8_t *img = make_image(), mod[5000];
	uint32_t mbi;

	ram = calloc(1, RAM);
	m.r[0] = (struct gmem_region){ 0, RAM, ram };
	memset(ram + 0x110000, 0x77, 0x4000);	/* bss must be zeroed */
	memset(mod, 0x3c, sizeof(mod));
	assert_int_equal(mb_parse(img, IMG, RAM, &mb, err, sizeof(err)), 0);
	assert_int_equal(mb_setup(&m, img, &mb, RAM, "probe quick", mod, sizeof(mod), "rd.img",
				  &mbi, err, sizeof(err)), 0);
	assert_int_equal(mbi, MB_INFO);
	assert_int_equal(ram[0x100010], 0xf4);
	assert_int_equal(ram[0x110000 + 0x20], 0);
	{
		uint8_t *info = ram + mbi;
		uint32_t flags = rd32(info);
		uint8_t *mm = ram + rd32(info + 48), *md = ram + rd32(info + 24);

		assert_true((flags & 0x1) && (flags & 0x4) && (flags & 0x40) && (flags & 0x8));
		assert_int_equal(rd32(info + 4), 639);			/* mem_lower */
		assert_int_equal(rd32(info + 8), (RAM >> 10) - 1024);	/* mem_upper */
		assert_string_equal((char *)ram + rd32(info + 16), "probe quick");
		assert_int_equal(rd32(info + 44), 4 * 24);		/* mmap_length */
		assert_int_equal(rd32(mm), 20);
		assert_int_equal(rd32(mm + 24 * 2 + 4), 0x100000);	/* 3rd: RAM at 1M */
		assert_int_equal(rd32(mm + 24 * 2 + 20), 1);
		assert_int_equal(rd32(info + 20), 1);			/* mods_count */
		assert_int_equal(rd32(md), 0x114000);			/* page aligned */
		assert_int_equal(rd32(md + 4) - rd32(md), sizeof(mod));
		assert_string_equal((char *)ram + rd32(md + 8), "rd.img");
		assert_int_equal(ram[0x114000], 0x3c);
		assert_string_equal((char *)ram + rd32(info + 64), "iovm");
	}
	/* A module that does not fit in RAM. */
	assert_int_equal(mb_setup(&m, img, &mb, 0x114800, "", mod, sizeof(mod), "x", &mbi, err,
				  sizeof(err)), -EINVAL);
	free(img);
	free(ram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
