/* CPU setup run from CPL 3: IDT, PIC masking, LAPIC, CPU enumeration (MP
 * table or ACPI MADT), AP start-up (INIT-SIPI-SIPI), and the syscalls that
 * need CPL 0. */
#ifndef PROBE_CPU_H
#define PROBE_CPU_H

#include "lib/layout.h"
#include "lib/libc.h"

struct cpu_info {
	uint32_t apic_id;
	bool bsp;
};

extern struct cpu_info cpus[MAX_CPUS];
extern unsigned int ncpus;
extern const char *cpus_source;	/* "mptable", "madt" or "none" */

/* Interrupt counters, one per MSI vector IRQ_VEC_BASE + i, bumped by the
 * CPL 0 stub. */
extern volatile uint64_t irq_count[IRQ_VEC_COUNT];
extern volatile uint64_t irq_total;	/* all of them */

void idt_init(void);
void pic_disable(void);
void lapic_enable(void);
uint32_t lapic_id(void);
/* Periodic LAPIC timer on vector IRQ_VEC_BASE + irq (counted in
 * irq_count[irq]) every count bus cycles (1 ns each under KVM): a watchdog
 * tick that wakes halted waits. */
void lapic_timer_periodic(unsigned int irq, uint32_t count);
/* x86 MSI address for delivering to this CPU's LAPIC. */
uint64_t msi_address(uint32_t apic_id);

/* Fills cpus[]/ncpus from the MP table, else the ACPI MADT. */
int cpus_enumerate(void);
/* When set before cpus_start_aps, each AP runs it after reporting alive,
 * at CPL 0 (emulated on PVM: ~2 us an instruction) with interrupts off,
 * then halts. */
extern void (*volatile ap_task)(uint32_t index);
/* Starts every AP found; returns the number that reported alive within
 * timeout_ms (each prints "probe: cpu N apic_id=M alive"). */
unsigned int cpus_start_aps(unsigned int timeout_ms);

/* Runs rounds x 16 `outb` to port at CPL 0; returns TSC ticks. */
uint64_t sys_pio_loop(uint16_t port, uint64_t rounds);
/* Writes buf to the serial port with one string-I/O instruction at CPL 0. */
void sys_write(const void *buf, size_t len);
/* A 16-bit MMIO write done at CPL 0. */
void sys_mmio_write16(volatile void *addr, uint16_t v);
/* Halts (CPL 0, IF on) until an interrupt has been handled, unless
 * irq_total already differs from seen (read it before checking for work). */
void sys_wait_irq(uint64_t seen);

#endif
