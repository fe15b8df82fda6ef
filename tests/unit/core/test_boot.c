/* Boot structures over fake guest RAM: e820, bzImage header parsing and
 * placement, boot_params, the payload decompression, the MP table and the
 * guest page walk used by crash reports. */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <cmocka.h>

#include "arch/x86/acpi.h"
#include "arch/x86/bzimage.h"
#include "arch/x86/e820.h"
#include "arch/x86/layout.h"
#include "arch/x86/mptable.h"
#include "arch/x86/vmlinux.h"
#include "vm/vcpu_diag.h"
#include "vm/vm.h"

#define RAM (64u << 20)
#define IMG_SETUP (5 * 512)
#define IMG_SIZE (IMG_SETUP + 8192)

static void wr16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void wr32(uint8_t *p, uint32_t v) { wr16(p, v); wr16(p + 2, v >> 16); }
static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static uint8_t *make_bzimage(size_t *len)
{
	uint8_t *img = calloc(1, IMG_SIZE);

	img[0x1f1] = 4;				/* setup_sects */
	wr16(img + 0x1fe, 0xAA55);
	img[0x200] = 0xeb;
	img[0x201] = 0x66;			/* header ends at 0x268 */
	memcpy(img + 0x202, "HdrS", 4);
	wr16(img + 0x206, 0x020f);
	wr16(img + 0x20e, 0x300);		/* version string at 0x500 */
	strcpy((char *)img + 0x500, "6.1.0-test (builder@host) #1");
	img[0x211] = 0x01;			/* LOADED_HIGH */
	wr32(img + 0x22c, 0x7fffffff);		/* initrd_addr_max */
	wr32(img + 0x230, 0x200000);		/* kernel_alignment */
	img[0x234] = 1;				/* relocatable */
	wr16(img + 0x236, 0x3);			/* XLF_KERNEL_64 | above 4G */
	wr32(img + 0x238, 2047);		/* cmdline_size */
	wr32(img + 0x258, 0x1000000);		/* pref_address */
	wr32(img + 0x260, 0x800000);		/* init_size */
	memset(img + IMG_SETUP, 0xcc, IMG_SIZE - IMG_SETUP);
	*len = IMG_SIZE;
	return img;
}

static struct gmem *fake_ram(uint64_t size)
{
	static struct gmem m;
	static uint8_t *ram;

	free(ram);
	ram = calloc(1, size);
	assert_non_null(ram);
	m.n = 1;
	m.r[0] = (struct gmem_region){ 0, size, ram };
	return &m;
}

static void test_e820(void **state)
{
	struct e820_entry e[E820_MAX];
	unsigned int n = e820_build(256ull << 20, e);

	assert_int_equal(n, 4);
	assert_true(e[0].addr == 0 && e[0].size == EBDA_START && e[0].type == E820_RAM);
	assert_true(e[1].addr == EBDA_START && e[1].type == E820_RESERVED);
	assert_true(e[2].addr == HIGH_MEMORY && e[2].addr + e[2].size == (256ull << 20));
	assert_true(e[3].addr == VM_PCI_HOLE_END && e[3].addr + e[3].size == (1ull << 32));
	/* 5 GiB: 3 GiB below the hole, 2 GiB from 4 GiB. */
	n = e820_build(5ull << 30, e);
	assert_int_equal(n, 5);
	assert_true(e[2].addr + e[2].size == VM_PCI_HOLE_START);
	assert_true(e[4].addr == (4ull << 30) && e[4].size == (2ull << 30) &&
		    e[4].type == E820_RAM);
	/* Exactly 3 GiB: nothing above 4 GiB. */
	assert_int_equal(e820_build(3ull << 30, e), 4);
	assert_int_equal(e820_low_ram_end(8ull << 30), VM_PCI_HOLE_START);
}

static void test_bzimage_parse(void **state)
{
	struct bzimage_info bi;
	char err[256];
	size_t len;
	uint8_t *img = make_bzimage(&len);

	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), 0);
	assert_int_equal(bi.version, 0x020f);
	assert_int_equal(bi.setup_size, IMG_SETUP);
	assert_int_equal(bi.kernel_off, IMG_SETUP);
	assert_int_equal(bi.kernel_size, IMG_SIZE - IMG_SETUP);
	assert_int_equal(bi.hdr_end, 0x268);
	assert_int_equal(bi.cmdline_size, 2047);
	assert_int_equal(bi.pref_address, 0x1000000);
	assert_string_equal(bi.kernel_version, "6.1.0-test (builder@host) #1");

	/* Truncated: header cut, then nothing after the setup. */
	assert_int_equal(bzimage_parse(img, 0x240, &bi, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(bzimage_parse(img, IMG_SETUP, &bi, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(bzimage_parse(img, 100, &bi, err, sizeof(err)), -ENOEXEC);
	/* Cut inside the version field, in a buffer of exactly that size
	 * (the fuzzer found a 1-byte overread there; ASan runs see it). */
	for (size_t cut = 0x206; cut < 0x208; cut++) {
		uint8_t *part = malloc(cut);

		assert_non_null(part);
		memcpy(part, img, cut);
		assert_int_equal(bzimage_parse(part, cut, &bi, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "truncated"));
		free(part);
	}

	/* Too old, no 64-bit entry, zImage. */
	wr16(img + 0x206, 0x0206);
	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too old"));
	wr16(img + 0x206, 0x020f);
	wr16(img + 0x236, 0);
	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "64-bit"));
	wr16(img + 0x236, 1);
	img[0x211] = 0;
	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), -EINVAL);
	img[0x211] = 1;

	/* Garbage: not a bzImage at all. */
	memset(img, 0x90, 0x300);
	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), -ENOEXEC);
	free(img);
}

static void test_bzimage_place(void **state)
{
	struct bzimage_info bi;
	struct bzimage_layout lay;
	char err[256];
	size_t len;
	uint8_t *img = make_bzimage(&len);

	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), 0);
	assert_int_equal(bzimage_place(&bi, RAM, 1 << 20, &lay, err, sizeof(err)), 0);
	assert_int_equal(lay.load_addr, 0x1000000);
	assert_int_equal(lay.initrd_size, 1 << 20);
	assert_int_equal(lay.initrd_addr, RAM - (1 << 20));
	/* initrd_addr_max caps the initrd below the end of RAM. */
	bi.initrd_addr_max = (32u << 20) - 1;
	assert_int_equal(bzimage_place(&bi, RAM, 4096 + 10, &lay, err, sizeof(err)), 0);
	assert_int_equal(lay.initrd_addr, (32u << 20) - 8192);
	/* Too little RAM for pref_address: a relocatable kernel moves down. */
	bi.initrd_addr_max = 0x7fffffff;
	assert_int_equal(bzimage_place(&bi, 20u << 20, 0, &lay, err, sizeof(err)), 0);
	assert_int_equal(lay.load_addr, 0x200000);
	/* Not relocatable: refused with a clear message. */
	bi.relocatable = false;
	assert_int_equal(bzimage_place(&bi, 20u << 20, 0, &lay, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--memory"));
	/* An initrd that cannot fit above the kernel. */
	bi.relocatable = true;
	assert_int_equal(bzimage_place(&bi, RAM, 60u << 20, &lay, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "initrd"));
	free(img);
}

static void test_boot_params(void **state)
{
	struct gmem *m = fake_ram(RAM);
	struct bzimage_info bi;
	struct bzimage_layout lay;
	char err[256], longline[3000];
	size_t len;
	uint8_t *img = make_bzimage(&len), *bp, *ram = m->r[0].hva;

	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), 0);
	assert_int_equal(bzimage_place(&bi, RAM, 8192, &lay, err, sizeof(err)), 0);
	assert_int_equal(bzimage_setup(m, img, &bi, &lay, RAM, "console=ttyS0", err,
				       sizeof(err)), 0);
	assert_int_equal(bzimage_copy_kernel(m, img, &bi, &lay), 0);
	bp = ram + BOOT_PARAMS;
	assert_memory_equal(bp + 0x202, "HdrS", 4);
	assert_int_equal(bp[0x210], 0xff);		/* type_of_loader */
	assert_int_equal(rd32(bp + 0x228), BOOT_CMDLINE);
	assert_string_equal((char *)ram + BOOT_CMDLINE, "console=ttyS0");
	assert_int_equal(rd32(bp + 0x218), lay.initrd_addr);
	assert_int_equal(rd32(bp + 0x21c), 8192);
	assert_int_equal(rd32(bp + 0x1e0), (RAM - HIGH_MEMORY) >> 10);
	assert_int_equal(bp[0x1e8], 4);			/* e820 entries */
	{
		struct e820_entry e[4];

		memcpy(e, bp + 0x2d0, sizeof(e));
		assert_true(e[2].addr == HIGH_MEMORY && e[2].size == RAM - HIGH_MEMORY &&
			    e[2].type == E820_RAM);
	}
	assert_int_equal(bp[0x1ef], 0);			/* sentinel */
	assert_int_equal(ram[lay.load_addr], 0xcc);	/* kernel copied */
	/* A command line longer than cmdline_size is refused. */
	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	assert_int_equal(bzimage_setup(m, img, &bi, &lay, RAM, longline, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "--append"));
	free(img);
}

/* A tiny vmlinux: one PT_LOAD at 16 MiB, gzip-compressed as a payload. */
static void test_vmlinux_payload(void **state)
{
	uint8_t elf[4096] = { 0 }, *img, *out = NULL;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)elf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(elf + sizeof(*eh));
	struct bzimage_info bi;
	struct vmlinux_image vi;
	uLongf clen = 4096;
	uint8_t comp[4096 + 64];
	char err[256];
	size_t len, outlen;
	z_stream z = { 0 };

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_entry = 0x1000000;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	*ph = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 1024, .p_paddr = 0x1000000,
			    .p_filesz = 512, .p_memsz = 8192 };
	memset(elf + 1024, 0xab, 512);
	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8,
				      Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = elf;
	z.avail_in = sizeof(elf);
	z.next_out = comp;
	z.avail_out = sizeof(comp) - 4;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	clen = z.total_out;
	deflateEnd(&z);
	wr32(comp + clen, sizeof(elf));
	clen += 4;

	img = make_bzimage(&len);
	memcpy(img + IMG_SETUP + 0x100, comp, clen);
	wr32(img + 0x248, 0x100);
	wr32(img + 0x24c, clen);
	assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), 0);
	assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)), 0);
	assert_int_equal(outlen, sizeof(elf));
	assert_memory_equal(out, elf, sizeof(elf));
	assert_int_equal(vmlinux_parse(out, outlen, RAM, &vi, err, sizeof(err)), 0);
	assert_int_equal(vi.entry, 0x1000000);
	assert_int_equal(vi.end, 0x1000000 + 8192);
	{
		struct gmem *m = fake_ram(RAM);

		assert_int_equal(vmlinux_load(m, out, &vi), 0);
		assert_int_equal(m->r[0].hva[0x1000000], 0xab);
		assert_int_equal(m->r[0].hva[0x1000000 + 600], 0);
	}
	/* Too little RAM for the segment; a segment beyond the file. */
	assert_int_equal(vmlinux_parse(out, outlen, 16u << 20, &vi, err, sizeof(err)), -EINVAL);
	ph = (Elf64_Phdr *)(out + sizeof(*eh));
	ph->p_offset = 4000;
	assert_int_equal(vmlinux_parse(out, outlen, RAM, &vi, err, sizeof(err)), -EINVAL);
	free(out);
	/* A corrupted stream is an error, an unknown format falls back. */
	img[IMG_SETUP + 0x100 + 20] ^= 0xff;
	assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)),
			 -EINVAL);
	img[IMG_SETUP + 0x100] = 0;
	assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)),
			 -ENOTSUP);
	/* Payload fields pointing outside the image. */
	bi.payload_length = 0xffffff00;
	assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)),
			 -ENOTSUP);
	free(img);
}

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static void test_mptable(void **state)
{
	struct gmem *m = fake_ram(RAM);
	uint8_t *mpf = m->r[0].hva + MPTABLE_BASE, *h, *p;
	unsigned int cpus = 0, ioapics = 0, ints = 0;

	assert_int_equal(mptable_write(m, 3, 0x806f8, 0x178bfbff), 0);
	assert_memory_equal(mpf, "_MP_", 4);
	assert_int_equal(sum(mpf, 16), 0);
	h = m->r[0].hva + rd32(mpf + 4);
	assert_memory_equal(h, "PCMP", 4);
	assert_int_equal(sum(h, h[4] | h[5] << 8), 0);
	p = h + 44;
	for (unsigned int i = 0; i < (unsigned int)(h[34] | h[35] << 8); i++) {
		switch (p[0]) {
		case 0:
			assert_int_equal(p[1], cpus);
			assert_int_equal(!!(p[3] & 2), cpus == 0);
			cpus++;
			p += 20;
			break;
		case 2:
			assert_int_equal(p[1], 3);	/* IOAPIC id after the CPUs */
			ioapics++;
			p += 8;
			break;
		case 3:
			/* ISA IRQ 0 arrives on pin 2, the rest 1:1. */
			assert_int_equal(p[7], p[5] ? p[5] : 2);
			ints++;
			p += 8;
			break;
		default:
			p += 8;
		}
	}
	assert_int_equal(cpus, 3);
	assert_int_equal(ioapics, 1);
	assert_int_equal(ints, 15);
	assert_int_not_equal(mptable_write(m, 255, 0, 0), 0);
}

static void test_page_walk(void **state)
{
	struct gmem *m = fake_ram(RAM);
	uint64_t *pml4 = (uint64_t *)(m->r[0].hva + 0x10000);
	uint64_t *pdpt = (uint64_t *)(m->r[0].hva + 0x11000);
	uint64_t *pd = (uint64_t *)(m->r[0].hva + 0x12000);
	uint64_t *pt = (uint64_t *)(m->r[0].hva + 0x13000);
	uint64_t pa;
	const uint64_t cr0 = 0x80000011, lma = 1 << 10, pae = 1 << 5;

	/* 0xffffffff81000123 -> 2 MiB page at 0x1000000 (kernel map). */
	pml4[511] = 0x11000 | 3;
	pdpt[510] = 0x12000 | 3;
	pd[8] = 0x1000000 | 0x83;
	pd[9] = 0x13000 | 3;
	pt[1] = 0x2000 | 3;
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, pae, lma, 0xffffffff81000123ull, &pa), 0);
	assert_int_equal(pa, 0x1000123);
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, pae, lma, 0xffffffff81201abcull, &pa), 0);
	assert_int_equal(pa, 0x2abc);
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, pae, lma, 0xffffffff81400000ull, &pa),
			 -EFAULT);
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, pae, lma, 0x1000, &pa), -EFAULT);
	/* Tables outside RAM fail cleanly. */
	pml4[0] = 0x7fff0000000ull | 3;
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, pae, lma, 0x1000, &pa), -EFAULT);
	/* Paging off: identity. */
	assert_int_equal(vcpu_translate(m, 0x11, 0, 0, 0, 0x123456, &pa), 0);
	assert_int_equal(pa, 0x123456);
	/* 32-bit paging with a 4 MiB page. */
	((uint32_t *)pml4)[1] = 0x400000 | 0x83;
	assert_int_equal(vcpu_translate(m, cr0, 0x10000, 1 << 4, 0, 0x400010, &pa), 0);
	assert_int_equal(pa, 0x400010);
}

static const uint8_t *table_at(struct gmem *m, uint32_t addr, const char *sig)
{
	const uint8_t *t = gmem_ptr(m, addr, 36);

	assert_non_null(t);
	assert_memory_equal(t, sig, 4);
	assert_int_equal(sum(t, rd32(t + 4)), 0);
	return t;
}

static void test_acpi(void **state)
{
	struct gmem *m = fake_ram(RAM);
	const uint8_t *rsdp = m->r[0].hva + ACPI_BASE, *rsdt, *xsdt, *fadt, *dsdt;
	uint64_t x;

	assert_int_equal(acpi_write_tables(m, 2), 0);
	assert_memory_equal(rsdp, "RSD PTR ", 8);
	assert_int_equal(sum(rsdp, 20), 0);
	assert_int_equal(sum(rsdp, 36), 0);
	assert_int_equal(rsdp[15], 2);
	rsdt = table_at(m, rd32(rsdp + 16), "RSDT");
	memcpy(&x, rsdp + 24, 8);
	xsdt = table_at(m, x, "XSDT");
	fadt = table_at(m, rd32(rsdt + 36), "FACP");
	memcpy(&x, xsdt + 36, 8);
	assert_int_equal(x, rd32(rsdt + 36));
	assert_int_equal(rd32(fadt + 4), 276);
	assert_int_equal(rd32(fadt + 64), ACPI_PM_BASE + ACPI_PM1_CNT_OFF);
	assert_int_equal(fadt[89], 2);
	assert_int_equal(fadt[46], ACPI_SCI_IRQ);
	assert_memory_equal(m->r[0].hva + rd32(fadt + 36), "FACS", 4);
	dsdt = table_at(m, rd32(fadt + 40), "DSDT");
	/* \_S5_ with SLP_TYP 5 */
	assert_memory_equal(dsdt + 36, "\x08_S5_\x12", 6);
	assert_int_equal(dsdt[36 + 9], ACPI_S5_TYP);
	/* The MADT: 2 CPUs, the IOAPIC after them, IRQ 0 -> GSI 2, SCI. */
	{
		const uint8_t *madt = table_at(m, rd32(rsdt + 40), "APIC"), *p;
		unsigned int cpus = 0, ioapics = 0, isos = 0;

		assert_int_equal(rd32(rsdt + 4), 44);
		assert_int_equal(rd32(madt + 36), 0xfee00000);
		for (p = madt + 44; p < madt + rd32(madt + 4); p += p[1]) {
			assert_true(p[1] >= 2);
			if (p[0] == 0) {
				assert_int_equal(p[3], cpus);
				cpus++;
			} else if (p[0] == 1) {
				assert_int_equal(p[2], 2);
				assert_int_equal(rd32(p + 4), 0xfec00000);
				ioapics++;
			} else if (p[0] == 2) {
				assert_true((p[3] == 0 && rd32(p + 4) == 2) ||
					    (p[3] == ACPI_SCI_IRQ && rd32(p + 4) == ACPI_SCI_IRQ));
				isos++;
			}
		}
		assert_true(p == madt + rd32(madt + 4));
		assert_int_equal(cpus, 2);
		assert_int_equal(ioapics, 1);
		assert_int_equal(isos, 2);
	}
	assert_int_not_equal(acpi_write_tables(m, 0), 0);
	assert_int_not_equal(acpi_write_tables(m, ACPI_MAX_CPUS + 1), 0);
	assert_int_equal(acpi_write_tables(m, ACPI_MAX_CPUS), 0);
	/* Everything inside the reserved BIOS area, clear of the MP table. */
	assert_true(ACPI_BASE >= EBDA_START && ACPI_BASE + 0x600 <= MPTABLE_BASE);
}

/* The same vmlinux as xz (CRC32 check, as the kernel build does) and
 * zstd payloads. */
static void test_vmlinux_formats(void **state)
{
	uint8_t elf[4096] = { 0 }, comp[8192], *img, *out;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)elf;
	struct bzimage_info bi;
	char err[256];
	size_t len, outlen, clen;

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	memset(elf + 64, 0x5a, 1000);
	for (int fmt = 0; fmt < 2; fmt++) {
		if (fmt == 0) {
			clen = 0;
			assert_int_equal(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, NULL, elf,
								 sizeof(elf), comp, &clen,
								 sizeof(comp) - 4), LZMA_OK);
		} else {
			clen = ZSTD_compress(comp, sizeof(comp) - 4, elf, sizeof(elf), 19);
			assert_false(ZSTD_isError(clen));
		}
		wr32(comp + clen, sizeof(elf));
		clen += 4;
		img = make_bzimage(&len);
		memcpy(img + IMG_SETUP + 0x200, comp, clen);
		wr32(img + 0x248, 0x200);
		wr32(img + 0x24c, clen);
		assert_int_equal(bzimage_parse(img, len, &bi, err, sizeof(err)), 0);
		assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)), 0);
		assert_int_equal(outlen, sizeof(elf));
		assert_memory_equal(out, elf, sizeof(elf));
		free(out);
		/* Into a scratch area big enough: no allocation. */
		{
			static uint8_t scratch[8192];

			assert_int_equal(vmlinux_extract(img, len, &bi, scratch, sizeof(elf), &out,
							 &outlen, err, sizeof(err)), 0);
			assert_ptr_equal(out, scratch);
			assert_memory_equal(scratch, elf, sizeof(elf));
			assert_int_equal(vmlinux_extract(img, len, &bi, scratch, sizeof(elf) - 1,
							 &out, &outlen, err, sizeof(err)), 0);
			assert_ptr_not_equal(out, scratch);
			free(out);
		}
		/* A size trailer that lies is caught. */
		wr32(img + IMG_SETUP + 0x200 + clen - 4, sizeof(elf) + 1);
		assert_int_equal(vmlinux_extract(img, len, &bi, NULL, 0, &out, &outlen, err, sizeof(err)),
				 -EINVAL);
		free(img);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e820),
		cmocka_unit_test(test_bzimage_parse),
		cmocka_unit_test(test_bzimage_place),
		cmocka_unit_test(test_boot_params),
		cmocka_unit_test(test_vmlinux_payload),
		cmocka_unit_test(test_vmlinux_formats),
		cmocka_unit_test(test_mptable),
		cmocka_unit_test(test_page_walk),
		cmocka_unit_test(test_acpi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
