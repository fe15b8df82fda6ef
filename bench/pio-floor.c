/* pio-floor: the cost of a port-I/O exit with nothing around it. A bare
 * KVM VM runs a few 64-bit CPL 0 instructions (the mode of the probe's
 * CPL 0 measurement) doing `out` in a loop; each exit returns straight to
 * KVM_RUN. The result is the floor that iovm's
 * exit path (and QEMU's) is compared against in bench/RESULTS.md.
 * Usage: pio-floor [EXITS] [REPEATS]. Prints ns per exit for two guest
 * loops: out;dec;jnz (as a C loop in the probe compiles to) and 16 outs
 * per dec;jnz (exit cost with the loop overhead amortised). */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CODE_GPA 0x1000
#define PORT 0x2f0		/* unclaimed in iovm too, as in the probe */
#define DONE_PORT 0x2f1		/* the loop's end (HLT stays in KVM) */

static int kvm, vmfd, vcpu;
static struct kvm_run *run;
static uint8_t *mem;

static void die(const char *what)
{
	fprintf(stderr, "pio-floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void setup(void)
{
	struct kvm_userspace_memory_region r;
	int sz;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm");
	vmfd = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vmfd < 0)
		die("KVM_CREATE_VM");
	/* An in-kernel irqchip as iovm and QEMU have: KVM's exit path
	 * differs without one. */
	if (ioctl(vmfd, KVM_CREATE_IRQCHIP, 0))
		die("KVM_CREATE_IRQCHIP");
	mem = mmap(NULL, 0x10000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	r = (struct kvm_userspace_memory_region){ 0, 0, 0, 0x10000, (uintptr_t)mem };
	if (ioctl(vmfd, KVM_SET_USER_MEMORY_REGION, &r))
		die("KVM_SET_USER_MEMORY_REGION");
	vcpu = ioctl(vmfd, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		die("KVM_CREATE_VCPU");
	sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		die("mmap kvm_run");
}

/* Writes the loop: mov ecx, n; mov dx, PORT; 1: out dx, al (x unroll);
 * dec ecx; jnz 1b; out DONE_PORT. 64-bit code at CODE_GPA. */
static void write_code(uint32_t iterations, unsigned int unroll)
{
	uint8_t *p = mem + CODE_GPA;
	uint8_t *loop;

	*p++ = 0xb9;					/* mov ecx, imm32 */
	memcpy(p, &iterations, 4);
	p += 4;
	*p++ = 0x66; *p++ = 0xba;			/* mov dx, imm16 */
	*p++ = PORT & 0xff; *p++ = PORT >> 8;
	loop = p;
	for (unsigned int i = 0; i < unroll; i++)
		*p++ = 0xee;				/* out dx, al */
	*p++ = 0xff; *p++ = 0xc9;			/* dec ecx */
	*p++ = 0x75;					/* jnz loop */
	*p = (uint8_t)(loop - (p + 1));
	p++;
	*p++ = 0x66; *p++ = 0xba;			/* mov dx, DONE_PORT */
	*p++ = DONE_PORT & 0xff; *p++ = DONE_PORT >> 8;
	*p++ = 0xee;					/* out dx, al */
	*p++ = 0xf4;					/* hlt */
}

/* Long mode: identity-mapped first 2 MiB, a flat 64-bit code segment. */
static void enter_long_mode(void)
{
	uint64_t *pml4 = (uint64_t *)(mem + 0x2000), *pdpt = (uint64_t *)(mem + 0x3000);
	uint64_t *pd = (uint64_t *)(mem + 0x4000), *gdt = (uint64_t *)(mem + 0x500);
	struct kvm_segment cs = { .limit = 0xffffffff, .selector = 0x8, .type = 0xb,
				  .present = 1, .s = 1, .l = 1, .g = 1 };
	struct kvm_segment ds = { .limit = 0xffffffff, .selector = 0x10, .type = 0x3,
				  .present = 1, .s = 1, .db = 1, .g = 1 };
	struct kvm_sregs sregs;

	pml4[0] = 0x3000 | 3;
	pdpt[0] = 0x4000 | 3;
	pd[0] = 0x83;					/* 2 MiB page */
	gdt[1] = 0x00af9b000000ffffull;
	gdt[2] = 0x00cf93000000ffffull;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs))
		die("KVM_GET_SREGS");
	sregs.cs = cs;
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = ds;
	sregs.gdt.base = 0x500;
	sregs.gdt.limit = 3 * 8 - 1;
	sregs.cr0 = 0x80000011;				/* PG, ET, PE */
	sregs.cr3 = 0x2000;
	sregs.cr4 = 0x20;				/* PAE */
	sregs.efer = 0x500;				/* LME, LMA */
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs))
		die("KVM_SET_SREGS");
}

static double run_once(uint32_t iterations, unsigned int unroll)
{
	struct kvm_regs regs = { .rip = CODE_GPA, .rflags = 2, .rsp = 0x8000 };
	struct timespec t0, t1;
	uint64_t exits = 0;

	write_code(iterations, unroll);
	if (ioctl(vcpu, KVM_SET_REGS, &regs))
		die("KVM_SET_REGS");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue;
			die("KVM_RUN");
		}
		if (run->exit_reason == KVM_EXIT_IO) {
			if (run->io.port == DONE_PORT)
				break;
			exits++;
			continue;
		}
		fprintf(stderr, "pio-floor: unexpected exit %u\n", run->exit_reason);
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (exits != (uint64_t)iterations * unroll) {
		fprintf(stderr, "pio-floor: %llu exits, expected %llu\n",
			(unsigned long long)exits, (unsigned long long)iterations * unroll);
		exit(1);
	}
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / exits;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	uint32_t exits = argc > 1 ? strtoul(argv[1], NULL, 0) : 2048;
	unsigned int reps = argc > 2 ? strtoul(argv[2], NULL, 0) : 5;
	static const unsigned int unrolls[] = { 1, 16 };
	double t[64];

	if (!exits || reps < 1 || reps > 64) {
		fprintf(stderr, "usage: pio-floor [EXITS] [REPEATS<=64]\n");
		return 2;
	}
	setup();
	enter_long_mode();
	for (unsigned int u = 0; u < 2; u++) {
		uint32_t iters = exits / unrolls[u] ? exits / unrolls[u] : 1;

		for (unsigned int i = 0; i < reps; i++)
			t[i] = run_once(iters, unrolls[u]);
		qsort(t, reps, sizeof(t[0]), cmp);
		printf("pio-floor: loop=%s exits=%u repeats=%u ns_per_exit_median=%.0f min=%.0f max=%.0f\n",
		       unrolls[u] == 1 ? "out;dec;jnz" : "16x(out);dec;jnz",
		       iters * unrolls[u], reps, t[reps / 2], t[0], t[reps - 1]);
	}
	return 0;
}
