/* Kernel detection, loading and the boot vCPU's entry state. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch/x86/acpi.h"
#include "arch/x86/boot.h"
#include "arch/x86/bzimage.h"
#include "arch/x86/cpuid.h"
#include "arch/x86/e820.h"
#include "arch/x86/layout.h"
#include "arch/x86/mptable.h"
#include "arch/x86/multiboot.h"
#include "arch/x86/vmlinux.h"
#include "config.h"
#include "lib/log.h"
#include "vm/machine.h"

#define CR0_PE 1ull
#define CR0_ET (1ull << 4)
#define CR0_PG (1ull << 31)
#define CR4_PAE (1ull << 5)
#define EFER_LME (1ull << 8)
#define EFER_LMA (1ull << 10)

struct file_map {
	const uint8_t *p;
	size_t len;
};

/* Maps a whole file read-only; files given by the user are only read. */
static int map_file(const char *path, const char *what, struct file_map *f)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		pr_err("cannot open %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		pr_err("%s '%s' is not a regular file", what, path);
		close(fd);
		return -EINVAL;
	}
	if (!st.st_size) {
		pr_err("%s '%s' is empty", what, path);
		close(fd);
		return -EINVAL;
	}
	f->len = st.st_size;
	f->p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f->p == MAP_FAILED) {
		int e = errno;

		f->p = NULL;
		pr_err("cannot read %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	return 0;
}

static void unmap_file(struct file_map *f)
{
	if (f->p)
		munmap((void *)f->p, f->len);
}

/* Size of a file the user named, with a clear error. */
static int file_size(const char *path, const char *what, size_t *size)
{
	struct stat st;

	if (stat(path, &st)) {
		int e = errno;

		pr_err("cannot open %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode) || !st.st_size) {
		pr_err("%s '%s' is %s", what, path, S_ISREG(st.st_mode) ? "empty" :
		       "not a regular file");
		return -EINVAL;
	}
	*size = st.st_size;
	return 0;
}

/* Reads a whole file straight into guest RAM: no host-side copy of it
 * stays resident. */
static int read_into(const char *path, const char *what, uint8_t *dst, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t done = 0;

	if (fd < 0) {
		int e = errno;

		pr_err("cannot open %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	while (done < size) {
		ssize_t n = pread(fd, dst + done, size - done, done);

		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			if (e == EINTR)
				continue;
			pr_err("cannot read %s '%s': %s", what, path,
			       n < 0 ? strerror(e) : "file shrank while being read");
			close(fd);
			return -e;
		}
		done += n;
	}
	close(fd);
	return 0;
}

/* Decompresses the kernel on the host when iovm knows the payload's
 * format; vi->nseg stays 0 (boot through the decompressor) otherwise. The
 * ELF goes to guest RAM above the kernel's own range when it fits there;
 * after its segments are copied into place those pages are dropped. */
static int load_vmlinux(struct vm *vm, const struct vm_config *cfg,
			const struct file_map *k, const struct bzimage_info *bi,
			struct vmlinux_image *vi, char *err, size_t errlen)
{
	uint64_t low_end = e820_low_ram_end(cfg->mem_size);
	uint64_t sgpa = (bi->pref_address + bi->init_size + (2u << 20) - 1) & ~((2ull << 20) - 1);
	uint8_t *scratch = NULL, *elf;
	size_t slen = 0, len;
	int ret;

	memset(vi, 0, sizeof(*vi));
	if (sgpa > HIGH_MEMORY && sgpa < low_end) {
		slen = low_end - sgpa;
		scratch = gmem_ptr(vm_gmem(vm), sgpa, slen);
	}
	ret = vmlinux_extract(k->p, k->len, bi, scratch, scratch ? slen : 0, &elf, &len,
			      err, errlen);
	if (ret == -ENOTSUP) {
		pr_debug("bzImage payload format unknown: booting through its decompressor");
		return 0;
	}
	if (ret)
		return ret;
	ret = vmlinux_parse(elf, len, low_end, vi, err, errlen);
	if (!ret && elf == scratch && vi->end > sgpa) {
		/* The kernel reaches into the scratch area (init_size
		 * understated): copy out of the way first. */
		uint8_t *copy = malloc(len);

		if (!copy)
			ret = -ENOMEM, snprintf(err, errlen, "out of memory");
		else
			elf = memcpy(copy, elf, len);
	}
	if (!ret && vmlinux_load(vm_gmem(vm), elf, vi))
		ret = -EINVAL, snprintf(err, errlen, "kernel outside guest RAM");
	if (elf == scratch)
		madvise(scratch, (len + 4095) & ~4095ul, MADV_DONTNEED);
	else
		free(elf);
	return ret;
}

static int load_bzimage(struct vm *vm, const struct vm_config *cfg,
			const struct file_map *k, const struct bzimage_info *bi,
			struct boot_entry *entry)
{
	struct bzimage_layout lay;
	struct bzimage_info placed = *bi;
	struct vmlinux_image vi;
	size_t rdlen = 0;
	char err[256] = "";
	int ret;

	if (cfg->initrd && (ret = file_size(cfg->initrd, "initrd", &rdlen)))
		return ret;
	ret = load_vmlinux(vm, cfg, k, bi, &vi, err, sizeof(err));
	if (!ret && vi.nseg) {
		/* The decompressed kernel sits at its link address. */
		placed.pref_address = vi.start;
		placed.init_size = vi.end - vi.start;
		placed.relocatable = false;
	}
	if (!ret)
		ret = bzimage_place(&placed, cfg->mem_size, rdlen, &lay, err, sizeof(err));
	if (!ret)
		ret = bzimage_setup(vm_gmem(vm), k->p, bi, &lay, cfg->mem_size,
				    cfg->append ? cfg->append : "", err, sizeof(err));
	if (!ret && !vi.nseg && bzimage_copy_kernel(vm_gmem(vm), k->p, bi, &lay))
		ret = -EINVAL, snprintf(err, sizeof(err), "kernel outside guest RAM");
	if (ret) {
		pr_err("%s: %s", cfg->kernel, err);
		return ret;
	}
	if (rdlen) {
		uint8_t *dst = gmem_ptr(vm_gmem(vm), lay.initrd_addr, rdlen);

		if (!dst) {
			pr_err("%s: initrd outside guest RAM", cfg->initrd);
			return -EINVAL;
		}
		ret = read_into(cfg->initrd, "initrd", dst, rdlen);
		if (ret)
			return ret;
	}
	pr_debug("Linux %s, boot protocol %u.%02u, %s at 0x%llx",
		 bi->kernel_version[0] ? bi->kernel_version : "(no version string)",
		 bi->version >> 8, bi->version & 0xff,
		 vi.nseg ? "decompressed by iovm, loaded" : "loaded with its decompressor",
		 (unsigned long long)lay.load_addr);
	*entry = (struct boot_entry){
		.kind = BOOT_LINUX64,
		/* vmlinux's entry is startup_64; a bzImage's 64-bit entry
		 * is 0x200 into its protected-mode part. */
		.rip = vi.nseg ? vi.entry : lay.load_addr + 0x200,
		.rsi = BOOT_PARAMS,
	};
	return 0;
}

static int load_multiboot(struct vm *vm, const struct vm_config *cfg,
			  const struct file_map *k, const struct mb_image *mb,
			  struct boot_entry *entry)
{
	struct file_map rd = { 0 };
	char err[256] = "";
	uint32_t mbi;
	int ret;

	if (cfg->initrd && (ret = map_file(cfg->initrd, "initrd", &rd)))
		return ret;
	ret = mb_setup(vm_gmem(vm), k->p, mb, cfg->mem_size, cfg->append ? cfg->append : "",
		       rd.p, rd.len, cfg->initrd ? cfg->initrd : "", &mbi, err, sizeof(err));
	unmap_file(&rd);
	if (ret) {
		pr_err("%s: %s", cfg->kernel, err);
		return ret;
	}
	pr_debug("multiboot ELF, entry 0x%x", mb->entry);
	*entry = (struct boot_entry){
		.kind = BOOT_MULTIBOOT,
		.rip = mb->entry,
		.eax = MB_BOOT_MAGIC,
		.ebx = mbi,
	};
	return 0;
}

int x86_load_kernel(struct vm *vm, const struct vm_config *cfg,
		    struct boot_entry *entry)
{
	struct file_map k = { 0 };
	struct bzimage_info bi;
	struct mb_image mb;
	char err[256] = "";
	int ret;

	ret = map_file(cfg->kernel, "kernel", &k);
	if (ret)
		return ret;
	ret = bzimage_parse(k.p, k.len, &bi, err, sizeof(err));
	if (!ret)
		ret = load_bzimage(vm, cfg, &k, &bi, entry);
	else if (ret == -ENOEXEC) {
		ret = mb_parse(k.p, k.len, e820_low_ram_end(cfg->mem_size), &mb, err,
			       sizeof(err));
		if (!ret)
			ret = load_multiboot(vm, cfg, &k, &mb, entry);
		else if (ret == -ENOEXEC)
			pr_err("%s is neither a Linux bzImage nor a multiboot ELF", cfg->kernel);
		else
			pr_err("%s: %s", cfg->kernel, err);
	} else {
		pr_err("%s: %s", cfg->kernel, err);
	}
	unmap_file(&k);
	return ret;
}

/* A 4 GiB identity map with 2 MiB pages: covers the kernel, boot_params,
 * the command line and the initrd wherever they went below 4 GiB. */
static int write_page_tables(struct gmem *m)
{
	uint64_t *pml4 = gmem_ptr(m, BOOT_PML4, 4096);
	uint64_t *pdpt = gmem_ptr(m, BOOT_PDPT, 4096);
	uint64_t *pd = gmem_ptr(m, BOOT_PD, 4 * 4096);

	if (!pml4 || !pdpt || !pd)
		return -EINVAL;
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT | 0x3;		/* present, writable */
	for (unsigned int i = 0; i < 4; i++)
		pdpt[i] = (BOOT_PD + i * 4096) | 0x3;
	for (unsigned int i = 0; i < 4 * 512; i++)
		pd[i] = ((uint64_t)i << 21) | 0x83;	/* present, writable, 2 MiB */
	return 0;
}

static int write_gdt(struct gmem *m)
{
	uint64_t *gdt = gmem_ptr(m, BOOT_GDT, 5 * 8);

	if (!gdt)
		return -EINVAL;
	gdt[0] = 0;
	gdt[1] = 0;
	gdt[GDT_CS64 / 8] = 0x00af9b000000ffffull;	/* 64-bit code */
	gdt[GDT_DS / 8] = 0x00cf93000000ffffull;	/* flat data */
	gdt[GDT_CS32 / 8] = 0x00cf9b000000ffffull;	/* flat 32-bit code */
	return 0;
}

static struct kvm_segment flat_segment(uint16_t sel, bool code, bool l)
{
	return (struct kvm_segment){
		.base = 0, .limit = 0xffffffff, .selector = sel,
		.type = code ? 0xb : 0x3, .present = 1, .dpl = 0,
		.db = l ? 0 : 1, .s = 1, .l = l, .g = 1,
	};
}

static int set_entry_regs(int fd, const struct boot_entry *e)
{
	bool lm = e->kind == BOOT_LINUX64;
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rflags = 2 };
	struct kvm_segment ds = flat_segment(GDT_DS, false, false);

	if (ioctl(fd, KVM_GET_SREGS, &sregs))
		return -errno;
	sregs.cs = flat_segment(lm ? GDT_CS64 : GDT_CS32, true, lm);
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = ds;
	sregs.gdt.base = BOOT_GDT;
	sregs.gdt.limit = 5 * 8 - 1;
	sregs.cr0 = CR0_PE | CR0_ET;
	if (lm) {
		sregs.cr0 |= CR0_PG;
		sregs.cr3 = BOOT_PML4;
		sregs.cr4 = CR4_PAE;
		sregs.efer = EFER_LME | EFER_LMA;
	}
	if (ioctl(fd, KVM_SET_SREGS, &sregs))
		return -errno;
	regs.rip = e->rip;
	regs.rsp = BOOT_STACK_TOP;
	regs.rsi = e->rsi;
	if (!lm) {
		regs.rax = e->eax;
		regs.rbx = e->ebx;
	}
	if (ioctl(fd, KVM_SET_REGS, &regs))
		return -errno;
	return 0;
}

static int setup_cpuid(struct vm *vm, const struct vm_config *cfg,
		       uint32_t *sig, uint32_t *feat)
{
	static struct cpuid_set base, per;
	struct kvm_cpuid2 *c;
	struct kvm_cpuid_entry2 *l1;
	char err[256];
	int ret;

	ret = cpuid_get_supported(vm_kvm_fd(vm), &base);
	if (ret) {
		pr_err("KVM_GET_SUPPORTED_CPUID: %s", strerror(-ret));
		return ret;
	}
	if (cfg->cpu_features &&
	    cpuid_apply_features(&base, cfg->cpu_features, err, sizeof(err))) {
		pr_err("%s", err);
		return -EINVAL;
	}
	l1 = cpuid_find(&base, 1, 0);
	*sig = l1 ? l1->eax : 0;
	*feat = l1 ? l1->edx : 0;
	c = malloc(sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(c->entries[0]));
	if (!c)
		return -ENOMEM;
	for (unsigned int i = 0; i < vm_ncpus(vm); i++) {
		cpuid_for_vcpu(&base, i, vm_ncpus(vm), &per);
		c->nent = per.n;
		memcpy(c->entries, per.e, per.n * sizeof(per.e[0]));
		if (ioctl(vm_vcpu_fd(vm, i), KVM_SET_CPUID2, c)) {
			ret = -errno;
			pr_err("KVM_SET_CPUID2 on vCPU %u: %s", i, strerror(errno));
			break;
		}
	}
	free(c);
	return ret;
}

int x86_setup(struct vm *vm, const struct vm_config *cfg)
{
	struct boot_entry entry;
	uint32_t sig, feat;
	int ret;

	ret = setup_cpuid(vm, cfg, &sig, &feat);
	if (ret)
		return ret;
	if (mptable_write(vm_gmem(vm), vm_ncpus(vm), sig, feat) ||
	    acpi_write_tables(vm_gmem(vm), vm_ncpus(vm)) ||
	    write_gdt(vm_gmem(vm)) || write_page_tables(vm_gmem(vm))) {
		pr_err("guest RAM too small for the boot tables");
		return -EINVAL;
	}
	ret = x86_load_kernel(vm, cfg, &entry);
	if (ret)
		return ret;
	ret = set_entry_regs(vm_vcpu_fd(vm, 0), &entry);
	if (ret)
		pr_err("cannot set the boot vCPU's registers: %s", strerror(-ret));
	return ret;
}
