/* CPU setup from CPL 3 (tables are plain user-accessible memory), the CPL 0
 * exception reporter and the AP entry. */
#include "lib/cpu.h"

#include "lib/arch.h"
#include "lib/console.h"
#include "lib/timing.h"

struct cpu_info cpus[MAX_CPUS];
unsigned int ncpus;
const char *cpus_source = "none";

struct idt_entry {
	uint16_t off_lo;
	uint16_t sel;
	uint8_t ist;
	uint8_t type;
	uint16_t off_mid;
	uint32_t off_hi;
	uint32_t zero;
} __attribute__((packed));

extern struct idt_entry idt[256];
extern char exc_stub_0[], exc_stub_1[], exc_stub_2[], exc_stub_3[],
	exc_stub_4[], exc_stub_5[], exc_stub_6[], exc_stub_7[], exc_stub_8[],
	exc_stub_9[], exc_stub_10[], exc_stub_11[], exc_stub_12[],
	exc_stub_13[], exc_stub_14[], exc_stub_15[], exc_stub_16[],
	exc_stub_17[], exc_stub_18[], exc_stub_19[], exc_stub_20[],
	exc_stub_21[], exc_stub_unexpected[];
extern char irq_stub_0[], irq_stub_1[], irq_stub_2[], irq_stub_3[],
	irq_stub_4[], irq_stub_5[], irq_stub_6[], irq_stub_7[], irq_stub_8[],
	irq_stub_9[], irq_stub_10[], irq_stub_11[], irq_stub_12[],
	irq_stub_13[], irq_stub_14[], irq_stub_15[];
extern char spurious_stub[];
extern char ap_tramp_start[], ap_tramp_end[];
extern volatile uint32_t ap_next;

static char *const exc_stubs[22] = {
	exc_stub_0, exc_stub_1, exc_stub_2, exc_stub_3, exc_stub_4,
	exc_stub_5, exc_stub_6, exc_stub_7, exc_stub_8, exc_stub_9,
	exc_stub_10, exc_stub_11, exc_stub_12, exc_stub_13, exc_stub_14,
	exc_stub_15, exc_stub_16, exc_stub_17, exc_stub_18, exc_stub_19,
	exc_stub_20, exc_stub_21,
};
static char *const irq_stubs[IRQ_VEC_COUNT] = {
	irq_stub_0, irq_stub_1, irq_stub_2, irq_stub_3, irq_stub_4,
	irq_stub_5, irq_stub_6, irq_stub_7, irq_stub_8, irq_stub_9,
	irq_stub_10, irq_stub_11, irq_stub_12, irq_stub_13, irq_stub_14,
	irq_stub_15,
};

static void idt_set(unsigned int vec, void *fn, unsigned int dpl)
{
	uintptr_t a = (uintptr_t)fn;
	struct idt_entry *e = &idt[vec];

	e->off_lo = (uint16_t)a;
	e->sel = GDT_KCODE;
	e->ist = 0;
	e->type = 0x8E | (dpl << 5);	/* present, 64-bit interrupt gate */
	e->off_mid = (uint16_t)(a >> 16);
	e->off_hi = (uint32_t)(a >> 32);
	e->zero = 0;
}

void idt_init(void)
{
	for (unsigned int v = 0; v < 256; v++)
		idt_set(v, exc_stub_unexpected, 0);
	for (unsigned int v = 0; v < ARRAY_SIZE(exc_stubs); v++)
		idt_set(v, exc_stubs[v], 0);
	for (unsigned int i = 0; i < IRQ_VEC_COUNT; i++)
		idt_set(IRQ_VEC_BASE + i, irq_stubs[i], 0);
	idt_set(SPURIOUS_VEC, spurious_stub, 0);
}

/* Remaps the 8259s away from the exception vectors and masks every line:
 * the probe uses MSI/MSI-X only. */
void pic_disable(void)
{
	outb(0x20, 0x11);
	outb(0xa0, 0x11);
	outb(0x21, 0x20);
	outb(0xa1, 0x28);
	outb(0x21, 0x04);
	outb(0xa1, 0x02);
	outb(0x21, 0x01);
	outb(0xa1, 0x01);
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
}

static volatile uint32_t *lapic_reg(unsigned int off)
{
	return (volatile uint32_t *)(uintptr_t)(LAPIC_BASE + off);
}

void lapic_enable(void)
{
	mmio_write32(lapic_reg(0xF0), 0x100 | SPURIOUS_VEC);
}

void lapic_timer_periodic(unsigned int irq, uint32_t count)
{
	lapic_enable();
	mmio_write32(lapic_reg(0x3E0), 0xB);		/* divide by 1 */
	mmio_write32(lapic_reg(0x320), (1u << 17) | (IRQ_VEC_BASE + irq));
	mmio_write32(lapic_reg(0x380), count);
}

/* From the LAPIC's own ID register, not CPUID.1:EBX[31:24]: on PVM a CPUID
 * at CPL 3 is not intercepted and answers with the APIC ID of whichever host
 * CPU the vCPU thread runs on at that moment, so an MSI addressed with it
 * reached no vCPU (or the wrong one) in some runs and not in others. */
uint32_t lapic_id(void)
{
	return mmio_read32(lapic_reg(0x20)) >> 24;
}

uint64_t msi_address(uint32_t apic_id)
{
	return 0xFEE00000ull | ((uint64_t)(apic_id & 0xff) << 12);
}

/* CPL 0 exception report: prints the frame and exits the VM. */
struct exc_frame {
	uint64_t r11, r10, r9, r8, rdi, rsi, rdx, rcx, rax;
	uint64_t vec, err, rip, cs, rflags, rsp, ss;
};

__attribute__((noreturn)) void exception_report(struct exc_frame *f);
void exception_report(struct exc_frame *f)
{
	uint64_t cr2;

	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	pr("probe: CRASH exception vec=%lu err=0x%lx rip=0x%lx cs=0x%lx "
	   "rflags=0x%lx rsp=0x%lx cr2=0x%lx rax=0x%lx\n",
	   f->vec, f->err, f->rip, f->cs, f->rflags, f->rsp, cr2, f->rax);
	probe_exit(PROBE_EXIT_CRASH);
}

/* ---- syscalls */
uint64_t sys_pio_loop(uint16_t port, uint64_t rounds)
{
	register uint64_t r10 __asm__("r10") = SYSCALL_MAGIC;
	uint64_t ret;

	__asm__ volatile("ud2"
			 : "=a"(ret), "+D"(port), "+S"(rounds)
			 : "a"((uint64_t)SYS_PIO_LOOP), "r"(r10)
			 : "rcx", "rdx", "r8", "memory");
	return ret;
}

void sys_wait_irq(uint64_t seen)
{
	register uint64_t r10 __asm__("r10") = SYSCALL_MAGIC;
	uint64_t ret;

	__asm__ volatile("ud2"
			 : "=a"(ret), "+D"(seen)
			 : "a"((uint64_t)SYS_WAIT_IRQ), "r"(r10)
			 : "memory");
}

void sys_write(const void *buf, size_t len)
{
	register uint64_t r10 __asm__("r10") = SYSCALL_MAGIC;
	uint64_t ret;

	__asm__ volatile("ud2"
			 : "=a"(ret), "+D"(buf), "+S"(len)
			 : "a"((uint64_t)SYS_WRITE), "r"(r10)
			 : "rcx", "rdx", "memory");
}

void sys_mmio_write16(volatile void *addr, uint16_t v)
{
	register uint64_t r10 __asm__("r10") = SYSCALL_MAGIC;
	uint64_t ret;

	__asm__ volatile("ud2"
			 : "=a"(ret), "+D"(addr), "+S"(v)
			 : "a"((uint64_t)SYS_MMIO_WRITE16), "r"(r10)
			 : "memory");
}

/* ---- CPU enumeration */
static uint8_t sum8(const volatile uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static const volatile uint8_t *scan(uintptr_t start, size_t len,
				    const char *sig, size_t siglen,
				    size_t cklen)
{
	for (uintptr_t a = start; a + cklen <= start + len; a += 16) {
		const volatile uint8_t *p = phys_ptr(a);

		if (memcmp((const void *)p, sig, siglen) == 0 &&
		    sum8(p, cklen) == 0)
			return p;
	}
	return NULL;
}

static const volatile uint8_t *scan_bios(const char *sig, size_t siglen,
					 size_t cklen)
{
	uintptr_t ebda = (uintptr_t)*(const volatile uint16_t *)phys_ptr(0x40E) << 4;
	const volatile uint8_t *p = NULL;

	if (ebda >= 0x80000 && ebda < 0xA0000)
		p = scan(ebda, 1024, sig, siglen, cklen);
	if (!p)
		p = scan(0x9FC00, 1024, sig, siglen, cklen);
	if (!p)
		p = scan(0xE0000, 0x20000, sig, siglen, cklen);
	return p;
}

static void cpu_add(uint32_t apic_id, bool bsp)
{
	if (ncpus >= MAX_CPUS) {
		pr("probe: warning: more than %u CPUs, ignoring apic_id %u\n",
		   MAX_CPUS, apic_id);
		return;
	}
	cpus[ncpus].apic_id = apic_id;
	cpus[ncpus].bsp = bsp;
	ncpus++;
}

static int enum_mptable(void)
{
	const volatile uint8_t *fp = scan_bios("_MP_", 4, 16);
	const volatile uint8_t *ct, *e, *end;
	uint32_t phys;
	uint16_t len, count;

	if (!fp)
		return -1;
	phys = *(const volatile uint32_t *)(fp + 4);
	if (!phys || phys >= 0x100000000ull - 44)
		return -1;
	ct = (const volatile uint8_t *)(uintptr_t)phys;
	if (memcmp((const void *)ct, "PCMP", 4) != 0)
		return -1;
	len = *(const volatile uint16_t *)(ct + 4);
	count = *(const volatile uint16_t *)(ct + 34);
	if (len < 44 || sum8(ct, len) != 0)
		return -1;
	e = ct + 44;
	end = ct + len;
	for (unsigned int i = 0; i < count && e < end; i++) {
		if (e[0] == 0) {
			if (e + 20 > end)
				break;
			if (e[3] & 1)
				cpu_add(e[1], e[3] & 2);
			e += 20;
		} else {
			e += 8;
		}
	}
	return ncpus ? 0 : -1;
}

static const volatile uint8_t *acpi_find(const volatile uint8_t *rsdp,
					 const char *sig)
{
	bool xsdt = rsdp[15] >= 2 && *(const volatile uint64_t *)(rsdp + 24);
	uint64_t root = xsdt ? *(const volatile uint64_t *)(rsdp + 24)
			     : *(const volatile uint32_t *)(rsdp + 16);
	const volatile uint8_t *t;
	uint32_t len;
	unsigned int esz = xsdt ? 8 : 4;

	if (!root || root >= 0x100000000ull)
		return NULL;
	t = (const volatile uint8_t *)(uintptr_t)root;
	len = *(const volatile uint32_t *)(t + 4);
	if (len < 36 || len > 0x10000)
		return NULL;
	for (uint32_t off = 36; off + esz <= len; off += esz) {
		uint64_t a = xsdt ? *(const volatile uint64_t *)(t + off)
				  : *(const volatile uint32_t *)(t + off);
		const volatile uint8_t *h = (const volatile uint8_t *)(uintptr_t)a;

		if (a && a < 0x100000000ull &&
		    memcmp((const void *)h, sig, 4) == 0)
			return h;
	}
	return NULL;
}

static int enum_madt(void)
{
	const volatile uint8_t *rsdp = scan_bios("RSD PTR ", 8, 20);
	const volatile uint8_t *madt, *e, *end;
	uint32_t bsp = lapic_id();

	if (!rsdp)
		return -1;
	madt = acpi_find(rsdp, "APIC");
	if (!madt)
		return -1;
	end = madt + *(const volatile uint32_t *)(madt + 4);
	for (e = madt + 44; e + 2 <= end && e[1] >= 2; e += e[1]) {
		if (e[0] == 0 && e[1] >= 8 &&
		    (*(const volatile uint32_t *)(e + 4) & 1))
			cpu_add(e[3], e[3] == bsp);
	}
	return ncpus ? 0 : -1;
}

int cpus_enumerate(void)
{
	ncpus = 0;
	if (enum_mptable() == 0) {
		cpus_source = "mptable";
		return 0;
	}
	ncpus = 0;
	if (enum_madt() == 0) {
		cpus_source = "madt";
		return 0;
	}
	ncpus = 0;
	cpu_add(lapic_id(), true);
	cpus_source = "none";
	return -1;
}

/* ---- AP start-up */
static volatile uint32_t ap_alive;
void (*volatile ap_task)(uint32_t index);

/* CPL 0 on the AP (emulated on PVM: kept short). */
void ap_main(uint32_t index);
void ap_main(uint32_t index)
{
	void (*task)(uint32_t) = ap_task;

	pr("probe: cpu %u apic_id=%u alive\n", index, lapic_id());
	__atomic_add_fetch(&ap_alive, 1, __ATOMIC_RELEASE);
	if (task)
		task(index);
}

static int lapic_ipi(uint32_t apic_id, uint32_t icr)
{
	mmio_write32(lapic_reg(0x310), apic_id << 24);
	mmio_write32(lapic_reg(0x300), icr);
	for (int i = 0; i < 100000; i++)
		if (!(mmio_read32(lapic_reg(0x300)) & (1u << 12)))
			return 0;
	return -1;
}

unsigned int cpus_start_aps(unsigned int timeout_ms)
{
	unsigned int expected = 0;
	uint64_t deadline;

	memcpy(phys_ptr(AP_TRAMPOLINE), ap_tramp_start,
	       (size_t)(ap_tramp_end - ap_tramp_start));
	lapic_enable();
	for (unsigned int i = 0; i < ncpus; i++) {
		if (cpus[i].bsp)
			continue;
		expected++;
		if (lapic_ipi(cpus[i].apic_id, 0x4500) < 0)	/* INIT */
			pr("probe: INIT to apic %u not delivered\n",
			   cpus[i].apic_id);
		delay_us(10000);
		for (int n = 0; n < 2; n++) {
			lapic_ipi(cpus[i].apic_id,
				  0x4600 | (AP_TRAMPOLINE >> 12));	/* SIPI */
			delay_us(200);
		}
	}
	deadline = rdtsc() + ms_to_ticks(timeout_ms);
	while (ap_alive < expected && rdtsc() < deadline)
		cpu_relax();
	return ap_alive;
}
