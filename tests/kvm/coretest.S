/* coretest: a minimal multiboot guest for iovm's VMM-core KVM tests. The
 * first character of its command line picks what it does:
 *   p  port I/O: unclaimed ports read all-ones, rep outsb to the UART,
 *      then exit through port 0xf4 with 0x10 (status 33), 0x11 on failure
 *   c  crash: a bad segment load (#GP) with an empty IDT: triple fault
 *   r  reset through the i8042 (command 0xfe)
 *   h  halt with interrupts off forever (a signal must stop iovm)
 *   i  interrupt: the UART's THR-empty interrupt on IRQ 4, through the
 *      in-kernel IOAPIC (GSI 4 -> pin 4, vector 0x24) and LAPIC; prints
 *      "coretest: irq-ok" and exits with 0x10
 *   o  ACPI power-off: RSDP -> RSDT -> FADT -> PM1a_CNT, write SLP_TYP 5
 *      (\_S5 in iovm's DSDT) with SLP_EN
 * Runs in 32-bit protected mode as multiboot hands it over. */
	.text
	.code32
	.align 4
mb_header:
	.long 0x1BADB002, 0x3, -(0x1BADB002 + 0x3)

	.globl _start
_start:
	cmp $0x2BADB002, %eax
	jne fail
	testl $4, (%ebx)		/* cmdline present */
	jz fail
	mov 16(%ebx), %edi
	mov $banner, %esi
	mov $banner_len, %ecx
	mov $0x3f8, %dx
	rep outsb
	movb (%edi), %al
	cmp $'p', %al
	je ports
	cmp $'c', %al
	je crash
	cmp $'r', %al
	je reset
	cmp $'h', %al
	je hang
	cmp $'o', %al
	je poweroff
	cmp $'i', %al
	je irq
	jmp fail

irq:
	cli
	/* IDT: every vector fails the test but 0x24, the UART's. */
	mov $idt, %edi
	xor %ecx, %ecx
1:	mov $bad_vector, %eax
	cmp $0x24, %ecx
	jne 2f
	mov $uart_vector, %eax
2:	mov %ax, (%edi)
	movw $0x20, 2(%edi)		/* the flat 32-bit code segment */
	movw $0x8e00, 4(%edi)		/* present 32-bit interrupt gate */
	shr $16, %eax
	mov %ax, 6(%edi)
	add $8, %edi
	inc %ecx
	cmp $0x30, %ecx
	jb 1b
	lidt idt_ptr
	mov $0xff, %al			/* the PICs stay out of it */
	outb %al, $0x21
	outb %al, $0xa1
	movl $0x18, 0xfec00000		/* IOAPIC redirection entry of pin 4 */
	movl $0x24, 0xfec00010		/* vector 0x24, fixed, edge, unmasked */
	movl $0x19, 0xfec00000
	movl $0, 0xfec00010		/* to APIC id 0 */
	movl $0x1ff, 0xfee000f0		/* LAPIC on, spurious vector 0xff */
	mov $0x3fc, %dx
	mov $0x08, %al			/* MCR: OUT2 gates the IRQ line */
	outb %al, %dx
	mov $0x3f9, %dx
	mov $0x02, %al			/* IER: THR empty */
	outb %al, %dx
	sti
3:	hlt
	jmp 3b				/* only the interrupt gets us out */

irq_done:
	mov $irqmsg, %esi
	mov $irqmsg_len, %ecx
	mov $0x3f8, %dx
	rep outsb
	mov $0x10, %al
	jmp exit

uart_vector:
	mov $0x3fa, %dx
	inb %dx, %al			/* IIR: must say THR empty */
	and $0x0f, %al
	cmp $0x02, %al
	jne fail
	mov $0x3f9, %dx
	xor %al, %al			/* IER off: one interrupt is enough */
	outb %al, %dx
	movl $0, 0xfee000b0		/* EOI */
	/* No iret: PVM's emulator fails on a 32-bit iret (seen here); the
	 * test is over anyway. */
	jmp irq_done

bad_vector:
	jmp fail

poweroff:
	mov $0xe0000, %esi
1:	cmpl $0x20445352, (%esi)	/* "RSD " */
	jne 2f
	cmpl $0x20525450, 4(%esi)	/* "PTR " */
	je 3f
2:	add $16, %esi
	cmp $0x100000, %esi
	jb 1b
	jmp fail
3:	mov 16(%esi), %esi		/* RSDT */
	cmpl $0x54445352, (%esi)	/* "RSDT" */
	jne fail
	mov 36(%esi), %esi		/* its first entry: the FADT */
	cmpl $0x50434146, (%esi)	/* "FACP" */
	jne fail
	mov 64(%esi), %edx		/* PM1a_CNT_BLK */
	inw %dx, %ax
	test $1, %ax			/* SCI_EN: ACPI mode */
	jz fail
	mov $((5 << 10) | (1 << 13)), %ax
	outw %ax, %dx
	jmp hang

ports:
	mov $0x2f0, %dx
	inb %dx, %al
	cmp $0xff, %al
	jne fail
	inw %dx, %ax
	cmp $0xffff, %ax
	jne fail
	inl %dx, %eax
	cmp $0xffffffff, %eax
	jne fail
	outb %al, %dx			/* ignored */
	mov $okmsg, %esi
	mov $okmsg_len, %ecx
	mov $0x3f8, %dx
	rep outsb
	mov $0x10, %al
	jmp exit

crash:
	lidt empty_idt
	mov $0x98, %ax			/* beyond the GDT's limit */
	mov %ax, %ds
	jmp fail

reset:
	mov $0xfe, %al
	outb %al, $0x64
	jmp hang

hang:
	cli
	hlt
	jmp hang

fail:
	mov $0x11, %al
exit:
	outb %al, $0xf4
	jmp hang

	.data
	.align 8
idt_ptr:
	.word 0x30 * 8 - 1
	.long idt
irqmsg:
	.ascii "coretest: irq-ok\n"
	.set irqmsg_len, . - irqmsg
	.align 8
idt:
	.fill 0x30 * 8, 1, 0
empty_idt:
	.word 0
	.long 0
banner:
	.ascii "coretest: start\n"
	.set banner_len, . - banner
okmsg:
	.ascii "coretest: rep-ok\n"
	.set okmsg_len, . - okmsg
