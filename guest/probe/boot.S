/* Probe guest entry: multiboot v1 header, 32-bit -> long mode switch, AP
 * trampoline, and the few CPL 0 paths (interrupt stubs, syscalls). CPL 0 code
 * is emulated on PVM (~2 us per instruction), so it is kept to a minimum and
 * everything else runs at CPL 3. */
#include "lib/layout.h"

#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00000003	/* page-align modules, give memory map */

	.section .multiboot, "a"
	.align 4
	.long MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)

/* ---------------------------------------------------------------- 32-bit */
	.section .text.boot, "ax"
	.code32
	.globl _start
_start:
	cli
	mov %eax, boot_magic		/* multiboot magic and info for C */
	mov %ebx, boot_info
	mov $bsp_stack_top, %esp
	xor %ebp, %ebp			/* 0: bootstrap processor */
	jmp enter_long

/* Reached from the AP trampoline in 32-bit protected mode, flat segments. */
	.globl ap_entry32
ap_entry32:
	mov $GDT_KDATA, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov $1, %ebp			/* 1: application processor */
enter_long:
	mov %cr4, %eax
	or $0x20, %eax			/* PAE */
	mov %eax, %cr4
	mov $pml4, %eax
	mov %eax, %cr3
	mov $0xC0000080, %ecx		/* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax		/* PG | PE */
	mov %eax, %cr0
	lgdt gdt_ptr
	ljmp $GDT_KCODE, $long_entry

/* ---------------------------------------------------------------- 64-bit */
	.code64
long_entry:
	mov $GDT_KDATA, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	xor %eax, %eax
	mov %ax, %fs
	mov %ax, %gs
	lidt idt_ptr(%rip)
	test %ebp, %ebp
	jnz ap_long

	/* BSP: TSS descriptor for cpu 0, then drop to CPL 3. */
	xor %edi, %edi
	mov $bsp_kstack_top, %rsi
	call tss_install
	movq $bsp_ustack_top, %rax
	mov $(GDT_UDATA | 3), %ecx
	pushq %rcx			/* ss */
	pushq %rax			/* rsp */
	mov $0xff, %al			/* mask both 8259s: MSI only */
	out %al, $0x21
	out %al, $0xa1
	pushq $0x3202			/* rflags: IOPL 3, IF 1 */
	pushq $(GDT_UCODE | 3)		/* cs */
	pushq $probe_user_entry		/* rip */
	iretq

/* First CPL 3 code: call the C main with a conventionally aligned stack. */
probe_user_entry:
	call probe_main
	ud2

/* tss_install: edi = cpu index (0: only the BSP runs CPL 3 code and needs
 * one), rsi = CPL 0 stack top. Fills the TSS and its GDT descriptor, then
 * loads TR. */
tss_install:
	mov %edi, %ecx
	mov %rsi, %r8
	imul $TSS_STRIDE, %rcx, %rax
	lea tss_area(%rip), %rdx
	add %rdx, %rax			/* rax = &tss[cpu] */
	mov %r8, 4(%rax)		/* rsp0 */
	movw $TSS_SIZE, 102(%rax)	/* I/O bitmap right after the TSS */
	movb $0xff, TSS_SIZE + 8192(%rax)	/* bitmap terminator */
	/* 16-byte system descriptor at GDT_TSS0 + 16 * cpu */
	lea gdt(%rip), %rdx
	shl $4, %rcx
	add %rcx, %rdx
	add $GDT_TSS0, %rdx
	mov %rax, %r10
	movw $(TSS_SIZE + 8192), 0(%rdx)	/* limit 15:0 */
	movw %r10w, 2(%rdx)		/* base 15:0 */
	shr $16, %r10
	movb %r10b, 4(%rdx)		/* base 23:16 */
	movb $0x89, 5(%rdx)		/* present, 64-bit TSS available */
	movb $0, 6(%rdx)
	shr $8, %r10
	movb %r10b, 7(%rdx)		/* base 31:24 */
	shr $8, %r10
	movl %r10d, 8(%rdx)		/* base 63:32 */
	movl $0, 12(%rdx)
	mov %ecx, %edx			/* selector = GDT_TSS0 + 16 * cpu */
	add $GDT_TSS0, %edx
	ltr %dx
	ret

/* AP in long mode at CPL 0: take an index, a stack, report alive (C), halt. */
ap_long:
	mov $1, %eax
	lock xadd %eax, ap_next(%rip)	/* index 1.. */
	mov %eax, %ebx
	mov %eax, %ecx
	shl $AP_STACK_SHIFT, %rcx
	lea ap_stacks(%rip), %rsp
	add %rcx, %rsp
	add $(1 << AP_STACK_SHIFT), %rsp
	mov %ebx, %edi
	call ap_main
1:	cli
	hlt
	jmp 1b

/* ------------------------------------------------------ interrupt stubs */
/* Exceptions: push a uniform frame and report (C at CPL 0, then exit). */
.macro EXC_NOERR vec
	.globl exc_stub_\vec
exc_stub_\vec:
	pushq $0
	pushq $\vec
	jmp exc_common
.endm
.macro EXC_ERR vec
	.globl exc_stub_\vec
exc_stub_\vec:
	pushq $\vec
	jmp exc_common
.endm
	EXC_NOERR 0
	EXC_NOERR 1
	EXC_NOERR 2
	EXC_NOERR 3
	EXC_NOERR 4
	EXC_NOERR 5
	EXC_NOERR 7
	EXC_ERR 8
	EXC_NOERR 9
	EXC_ERR 10
	EXC_ERR 11
	EXC_ERR 12
	EXC_ERR 13
	EXC_ERR 14
	EXC_NOERR 15
	EXC_NOERR 16
	EXC_ERR 17
	EXC_NOERR 18
	EXC_NOERR 19
	EXC_NOERR 20
	EXC_ERR 21
	/* vectors 32..255 with no handler of their own */
	.globl exc_stub_unexpected
exc_stub_unexpected:
	pushq $0
	pushq $255
	jmp exc_common

exc_common:
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	mov %rsp, %rdi
	and $-16, %rsp
	call exception_report		/* does not return */
1:	cli
	hlt
	jmp 1b

/* MSI/MSI-X vectors IRQ_VEC_BASE..+15: count the interrupt, EOI, return.
 * Kept to a handful of instructions since each one is emulated. */
.macro IRQ_STUB n
	.globl irq_stub_\n
irq_stub_\n:
	lock incq irq_count + 8 * \n(%rip)
	lock incq irq_total(%rip)
	movl $0, LAPIC_EOI_ADDR32	/* via the -1 GiB alias */
	iretq
.endm
	IRQ_STUB 0
	IRQ_STUB 1
	IRQ_STUB 2
	IRQ_STUB 3
	IRQ_STUB 4
	IRQ_STUB 5
	IRQ_STUB 6
	IRQ_STUB 7
	IRQ_STUB 8
	IRQ_STUB 9
	IRQ_STUB 10
	IRQ_STUB 11
	IRQ_STUB 12
	IRQ_STUB 13
	IRQ_STUB 14
	IRQ_STUB 15

	.globl spurious_stub
spurious_stub:
	iretq

/* Syscalls. PVM turns `int n` from CPL 3 into #UD and does not switch to
 * CPL 0 on SYSCALL, but it does deliver exceptions to CPL 0 through the IDT:
 * so a syscall is `ud2` with r10d = SYSCALL_MAGIC, rax = function, rdi/rsi
 * arguments; the result comes back in rax. */
	.globl exc_stub_6
exc_stub_6:
	cmp $SYSCALL_MAGIC, %r10d
	jne 2f
	addq $2, (%rsp)			/* resume after the ud2 */
	cmp $SYS_PIO_LOOP, %eax
	je sys_pio_loop
	cmp $SYS_WAIT_IRQ, %eax
	je sys_wait_irq
	cmp $SYS_MMIO_WRITE16, %eax
	je sys_mmio_write16
	cmp $SYS_WRITE, %eax
	je sys_write
	mov $-1, %rax
	iretq
2:	pushq $0
	pushq $6
	jmp exc_common

/* rdi = port, rsi = rounds of 16 outb; returns TSC ticks spent. */
sys_pio_loop:
	mov %rsi, %rcx
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, %r8
	mov %edi, %edx
	xor %eax, %eax
1:	.rept 16
	outb %al, %dx
	.endr
	dec %rcx
	jnz 1b
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	sub %r8, %rax
	iretq

/* rdi = buffer, rsi = length: one string-I/O exit for the whole buffer
 * (port I/O from CPL 3 costs a trap per byte on PVM). */
sys_write:
	mov %rsi, %rcx
	mov %rdi, %rsi
	mov $0x3f8, %edx
	rep outsb
	xor %eax, %eax
	iretq

/* rdi = address, si = value: a 16-bit MMIO write from CPL 0 (virtio
 * notify), where PVM handles the exit more cheaply than from CPL 3. */
sys_mmio_write16:
	mov %si, (%rdi)
	iretq

/* rdi = the irq_total value the caller saw: halts unless an interrupt came
 * since (checked with interrupts off; sti; hlt is atomic, so none is
 * missed). */
sys_wait_irq:
	cmp irq_total(%rip), %rdi
	jne 1f
	sti
	hlt
	cli
1:	xor %eax, %eax
	iretq

/* ------------------------------------------------------ AP trampoline */
/* Copied to AP_TRAMPOLINE (below 1 MiB); the SIPI starts it in real mode
 * with cs = AP_TRAMPOLINE >> 4, ip = 0. */
	.code16
	.globl ap_tramp_start, ap_tramp_end
ap_tramp_start:
	cli
	xor %ax, %ax
	mov %ax, %ds
	lgdtl AP_TRAMPOLINE + (ap_tramp_gdt_ptr - ap_tramp_start)
	mov %cr0, %eax
	or $1, %eax
	mov %eax, %cr0
	ljmpl $GDT_KCODE32, $ap_entry32
	.align 8
ap_tramp_gdt_ptr:
	.word GDT_SIZE - 1
	.long gdt
ap_tramp_end:

/* ---------------------------------------------------------------- data */
	.code64
	.data
	.align 16
	.globl gdt
gdt:
	.quad 0				/* null */
	.quad 0x00209A0000000000	/* GDT_KCODE: 64-bit code, DPL 0 */
	.quad 0x00CF92000000FFFF	/* GDT_KDATA: flat data, DPL 0 */
	.quad 0x00CFF2000000FFFF	/* GDT_UDATA: flat data, DPL 3 */
	.quad 0x0020FA0000000000	/* GDT_UCODE: 64-bit code, DPL 3 */
	.quad 0x00CF9A000000FFFF	/* GDT_KCODE32: 32-bit code, DPL 0 */
	.fill 2, 8, 0			/* GDT_TSS0: the BSP's TSS (APs stay at CPL 0) */
gdt_end:
	.align 16
gdt_ptr:
	.word GDT_SIZE - 1
	.quad gdt
	.align 16
idt_ptr:
	.word 256 * 16 - 1
	.quad idt
	.globl boot_magic, boot_info
boot_magic:
	.long 0
boot_info:
	.long 0
	.globl ap_next
ap_next:
	.long 1

/* Identity map of the low 4 GiB with 2 MiB user-accessible pages; the top
 * GiB (PCI hole, IOAPIC, LAPIC) uncached. Built at assembly time so that no
 * emulated CPL 0 loop fills it. */
	.section .data.pagetables, "aw"
	.align 4096
	.globl pml4
pml4:
	.quad pdpt + 0x7
	.fill 510, 8, 0
	.quad pdpt_hi + 0x7
/* The top 1 GiB is aliased at -1 GiB so that CPL 0 stubs can reach the LAPIC
 * with a sign-extended 32-bit absolute address (one instruction). */
pdpt_hi:
	.fill 511, 8, 0
	.quad pd + 0x3000 + 0x7
pdpt:
	.quad pd + 0x7
	.quad pd + 0x1000 + 0x7
	.quad pd + 0x2000 + 0x7
	.quad pd + 0x3000 + 0x7
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 1536
	.quad (i << 21) | 0x87
	.set i, i + 1
	.endr
	.rept 512
	.quad (i << 21) | 0x9f
	.set i, i + 1
	.endr

	.bss
	.align 4096
	.globl idt
idt:
	.fill 256 * 16, 1, 0
	.globl tss_area
tss_area:
	.fill TSS_STRIDE, 1, 0
	.globl irq_count, irq_total
irq_count:
	.fill 16, 8, 0
irq_total:
	.quad 0
	.align 4096
	.fill BSP_STACK_SIZE, 1, 0
bsp_stack_top:
	.fill BSP_STACK_SIZE, 1, 0
bsp_kstack_top:
	.fill USER_STACK_SIZE, 1, 0
bsp_ustack_top:
	.align 4096
	.globl ap_stacks
ap_stacks:
	.fill (MAX_CPUS + 1) << AP_STACK_SHIFT, 1, 0
