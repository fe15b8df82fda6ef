/* Reporting of exits iovm cannot serve (emulation failures, triple faults,
 * failed entries): enough detail to find the guest instruction at fault. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "lib/log.h"
#include "vm/vcpu_diag.h"

#define PTE_P 1ull
#define PTE_PS (1ull << 7)
#define PTE_ADDR 0x000ffffffffff000ull

static const char *const exit_names[] = {
	[KVM_EXIT_UNKNOWN] = "KVM_EXIT_UNKNOWN",
	[KVM_EXIT_EXCEPTION] = "KVM_EXIT_EXCEPTION",
	[KVM_EXIT_IO] = "KVM_EXIT_IO",
	[KVM_EXIT_HYPERCALL] = "KVM_EXIT_HYPERCALL",
	[KVM_EXIT_DEBUG] = "KVM_EXIT_DEBUG",
	[KVM_EXIT_HLT] = "KVM_EXIT_HLT",
	[KVM_EXIT_MMIO] = "KVM_EXIT_MMIO",
	[KVM_EXIT_IRQ_WINDOW_OPEN] = "KVM_EXIT_IRQ_WINDOW_OPEN",
	[KVM_EXIT_SHUTDOWN] = "KVM_EXIT_SHUTDOWN (triple fault)",
	[KVM_EXIT_FAIL_ENTRY] = "KVM_EXIT_FAIL_ENTRY",
	[KVM_EXIT_INTR] = "KVM_EXIT_INTR",
	[KVM_EXIT_SET_TPR] = "KVM_EXIT_SET_TPR",
	[KVM_EXIT_TPR_ACCESS] = "KVM_EXIT_TPR_ACCESS",
	[KVM_EXIT_NMI] = "KVM_EXIT_NMI",
	[KVM_EXIT_INTERNAL_ERROR] = "KVM_EXIT_INTERNAL_ERROR",
	[KVM_EXIT_SYSTEM_EVENT] = "KVM_EXIT_SYSTEM_EVENT",
};

static const char *const internal_names[] = {
	[KVM_INTERNAL_ERROR_EMULATION] = "emulation failure",
	[KVM_INTERNAL_ERROR_SIMUL_EX] = "exception while delivering an exception",
	[KVM_INTERNAL_ERROR_DELIVERY_EV] = "event delivery failed",
	[KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON] = "unexpected exit reason",
};

const char *vcpu_exit_name(uint32_t reason)
{
	if (reason < sizeof(exit_names) / sizeof(exit_names[0]) && exit_names[reason])
		return exit_names[reason];
	return "unknown exit";
}

static int read_pte(const struct gmem *m, uint64_t gpa, unsigned int size,
		    uint64_t *out)
{
	const void *p = gmem_ptr(m, gpa, size);

	if (!p)
		return -EFAULT;
	*out = 0;
	memcpy(out, p, size);
	return 0;
}

int vcpu_translate(const struct gmem *m, uint64_t cr0, uint64_t cr3,
		   uint64_t cr4, uint64_t efer, uint64_t la, uint64_t *pa)
{
	uint64_t e;

	if (!(cr0 & (1ull << 31))) {
		*pa = la;
		return 0;
	}
	if (efer & (1ull << 10)) {		/* long mode: 4 or 5 levels */
		int levels = (cr4 & (1ull << 12)) ? 5 : 4;
		uint64_t table = cr3 & PTE_ADDR;

		for (int l = levels; l >= 1; l--) {
			unsigned int shift = 12 + 9 * (l - 1);

			if (read_pte(m, table + ((la >> shift) & 511) * 8, 8, &e) ||
			    !(e & PTE_P))
				return -EFAULT;
			if (l == 1 || ((l == 2 || l == 3) && (e & PTE_PS))) {
				uint64_t mask = (1ull << shift) - 1;

				*pa = ((e & PTE_ADDR) & ~mask) | (la & mask);
				return 0;
			}
			table = e & PTE_ADDR;
		}
		return -EFAULT;
	}
	la &= 0xffffffffull;
	if (cr4 & (1ull << 5)) {		/* PAE: 3 levels */
		if (read_pte(m, (cr3 & 0xffffffe0ull) + (la >> 30) * 8, 8, &e) ||
		    !(e & PTE_P))
			return -EFAULT;
		if (read_pte(m, (e & PTE_ADDR) + ((la >> 21) & 511) * 8, 8, &e) ||
		    !(e & PTE_P))
			return -EFAULT;
		if (e & PTE_PS) {
			*pa = (e & PTE_ADDR & ~0x1fffffull) | (la & 0x1fffff);
			return 0;
		}
		if (read_pte(m, (e & PTE_ADDR) + ((la >> 12) & 511) * 8, 8, &e) ||
		    !(e & PTE_P))
			return -EFAULT;
		*pa = (e & PTE_ADDR) | (la & 0xfff);
		return 0;
	}
	/* 32-bit paging: 2 levels of 4-byte entries. */
	if (read_pte(m, (cr3 & 0xfffff000ull) + (la >> 22) * 4, 4, &e) || !(e & PTE_P))
		return -EFAULT;
	if ((e & PTE_PS) && (cr4 & (1ull << 4))) {
		*pa = (e & 0xffc00000ull) | (la & 0x3fffff);
		return 0;
	}
	if (read_pte(m, (e & 0xfffff000ull) + ((la >> 12) & 1023) * 4, 4, &e) ||
	    !(e & PTE_P))
		return -EFAULT;
	*pa = (e & 0xfffff000ull) | (la & 0xfff);
	return 0;
}

static void describe_reason(char *buf, size_t len, const struct kvm_run *run)
{
	switch (run->exit_reason) {
	case KVM_EXIT_INTERNAL_ERROR: {
		uint32_t s = run->internal.suberror;
		const char *n = s < sizeof(internal_names) / sizeof(internal_names[0]) &&
				internal_names[s] ? internal_names[s] : "unknown";

		int used = snprintf(buf, len, "KVM_EXIT_INTERNAL_ERROR, suberror %u (%s)", s, n);
		uint32_t nd = run->internal.ndata;

		/* KVM's extra words (exit qualification, GPA, ...), bounded. */
		if (nd > 4)
			nd = 4;
		for (uint32_t i = 0; i < nd && used > 0 && (size_t)used < len; i++)
			used += snprintf(buf + used, len - used, "%s0x%llx", i ? " " : ", data ",
					 (unsigned long long)run->internal.data[i]);
		break;
	}
	case KVM_EXIT_FAIL_ENTRY:
		snprintf(buf, len, "KVM_EXIT_FAIL_ENTRY, hardware reason 0x%llx",
			 (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		snprintf(buf, len, "KVM_EXIT_SYSTEM_EVENT type %u", run->system_event.type);
		break;
	default:
		snprintf(buf, len, "%s (exit reason %u)", vcpu_exit_name(run->exit_reason),
			 run->exit_reason);
	}
}

void vcpu_report_exit(const struct gmem *m, unsigned int idx, int fd,
		      const struct kvm_run *run)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	char reason[256], bytes[16 * 3 + 1] = "";
	uint64_t la, pa;
	const uint8_t *code;

	describe_reason(reason, sizeof(reason), run);
	if (ioctl(fd, KVM_GET_REGS, &regs) || ioctl(fd, KVM_GET_SREGS, &sregs)) {
		pr_err("vCPU %u: %s; registers unavailable: %s", idx, reason,
		       strerror(errno));
		return;
	}
	la = (sregs.efer & (1ull << 10)) && sregs.cs.l ? regs.rip : sregs.cs.base + regs.rip;
	if (!vcpu_translate(m, sregs.cr0, sregs.cr3, sregs.cr4, sregs.efer,
			    la, &pa)) {
		for (unsigned int n = 16; n > 0; n--) {
			code = gmem_ptr(m, pa, n);
			if (!code)
				continue;
			for (unsigned int i = 0; i < n; i++)
				snprintf(bytes + 3 * i, 4, "%02x ", code[i]);
			break;
		}
	}
	if (!bytes[0])
		snprintf(bytes, sizeof(bytes), "(not in guest RAM) ");
	bytes[strlen(bytes) - 1] = '\0';
	pr_err("vCPU %u: %s at RIP 0x%llx (CS 0x%x, %s mode, CR0 0x%llx, CR3 0x%llx), code: %s",
	       idx, reason, (unsigned long long)regs.rip, sregs.cs.selector,
	       sregs.cs.l ? "64-bit" : (sregs.cr0 & 1) ? (sregs.cs.db ? "32-bit" : "16-bit protected") : "real",
	       (unsigned long long)sregs.cr0, (unsigned long long)sregs.cr3, bytes);
	pr_err("vCPU %u: RAX 0x%llx RBX 0x%llx RCX 0x%llx RDX 0x%llx RSP 0x%llx RFLAGS 0x%llx",
	       idx, (unsigned long long)regs.rax, (unsigned long long)regs.rbx,
	       (unsigned long long)regs.rcx, (unsigned long long)regs.rdx,
	       (unsigned long long)regs.rsp, (unsigned long long)regs.rflags);
}
