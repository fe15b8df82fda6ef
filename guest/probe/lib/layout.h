/* Probe guest constants shared by boot.S and C: GDT selectors, vectors,
 * stack sizes, fixed low-memory addresses. */
#ifndef PROBE_LAYOUT_H
#define PROBE_LAYOUT_H

#define MAX_CPUS 64

#define GDT_KCODE 0x08
#define GDT_KDATA 0x10
#define GDT_UDATA 0x18
#define GDT_UCODE 0x20
#define GDT_KCODE32 0x28
#define GDT_TSS0 0x30
#define GDT_SIZE (GDT_TSS0 + 16)	/* one TSS: the BSP's */

#define TSS_SIZE 0x68
/* TSS + an all-zero I/O permission bitmap (8 KiB) + terminator, padded. */
#define TSS_STRIDE 0x2080

#define BSP_STACK_SIZE 0x4000
#define USER_STACK_SIZE 0x10000
#define AP_STACK_SHIFT 12	/* 4 KiB per AP: it only reports in */

/* Real-mode page where APs start (SIPI vector = AP_TRAMPOLINE >> 12). */
#define AP_TRAMPOLINE 0x8000

#define LAPIC_BASE 0xFEE00000
/* LAPIC EOI register through the -1 GiB alias of the top GiB. */
#define LAPIC_EOI_ADDR32 0xFFFFFFFFFEE000B0

/* Interrupt vectors: 16 MSI/MSI-X vectors, spurious. */
#define IRQ_VEC_BASE 0x40
#define IRQ_VEC_COUNT 16
/* irq_count[] slot of the watchdog LAPIC timer (drivers use the others). */
#define IRQ_TIMER 15
#define SPURIOUS_VEC 0xFF

/* Syscalls: ud2 with r10d = SYSCALL_MAGIC, rax = number (see boot.S). */
#define SYSCALL_MAGIC 0x5ca11
#define SYS_PIO_LOOP 1
#define SYS_WAIT_IRQ 2
#define SYS_WRITE 3
#define SYS_MMIO_WRITE16 4

#endif
