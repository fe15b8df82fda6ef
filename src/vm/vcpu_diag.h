/* Diagnosis of an exit the VMM cannot serve: what, where, which bytes. */
#ifndef IOVM_VM_VCPU_DIAG_H
#define IOVM_VM_VCPU_DIAG_H

#include <linux/kvm.h>
#include <stdint.h>

#include "lib/gmem.h"

/* Prints the exit reason, suberror, RIP and the instruction bytes there
 * (read from m, the guest's RAM). Slow path only: may use
 * KVM_GET_REGS/SREGS. */
void vcpu_report_exit(const struct gmem *m, unsigned int idx, int fd,
		      const struct kvm_run *run);

/* Translates a guest linear address through the guest's page tables as
 * described by cr0/cr3/cr4/efer. Returns 0 and the physical address, or
 * -EFAULT when unmapped or the tables lie outside RAM. */
int vcpu_translate(const struct gmem *m, uint64_t cr0, uint64_t cr3,
		   uint64_t cr4, uint64_t efer, uint64_t la, uint64_t *pa);

const char *vcpu_exit_name(uint32_t reason);

#endif
