/* Lifecycle of a VM, for `iovm run` and the architecture code: creation,
 * access to the vCPUs before they start, the main loop and teardown.
 * Devices use vm.h only. */
#ifndef IOVM_VM_MACHINE_H
#define IOVM_VM_MACHINE_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/vm.h"

#define VM_MAX_CPUS 64

/* Exit status of a VM that the guest crashed (unexpected KVM exit, triple
 * fault without a reboot request). Even, so it never collides with the
 * exit device's (v << 1) | 1. */
#define VM_STATUS_CRASH 2

struct vm_params {
	uint64_t mem_size;
	unsigned int ncpus;
};

/* Opens /dev/kvm, checks the API version and capabilities, creates the VM
 * with its RAM, in-kernel irqchip and PIT, default GSI routes and vCPUs.
 * Prints one clear error line and returns -errno on failure. */
int vm_create(const struct vm_params *p, struct vm **out);
void vm_destroy(struct vm *vm);

int vm_kvm_fd(const struct vm *vm);
int vm_vcpu_fd(const struct vm *vm, unsigned int idx);
uint64_t vm_mem_size(const struct vm *vm);

/* Starts one thread per vCPU, runs the main loop until a stop request
 * (guest exit, reboot, crash, SIGINT/SIGTERM/SIGHUP), stops the vCPUs, runs
 * the shutdown hooks and returns the VM's exit status. The caller must have
 * blocked those signals (vm_block_signals) before creating any thread. */
int vm_run(struct vm *vm);

/* Pause: every vCPU thread leaves KVM_RUN and waits; returns once all
 * running ones wait (0), or -ESHUTDOWN if the VM is stopping. Resume lets
 * them go on. Devices and their I/O threads are not paused. Callable from
 * any thread but a vCPU's, before or during vm_run. */
int vm_pause(struct vm *vm);
int vm_resume(struct vm *vm);
bool vm_paused(struct vm *vm);

/* Blocks the stop signals in the calling thread; call first thing, so that
 * every thread created later inherits the mask and the main loop receives
 * them through a signalfd. */
int vm_block_signals(void);

/* Prints (info level) iovm's peak RSS, the guest RAM resident, and the
 * difference: iovm's own memory. */
void vm_report_memory(struct vm *vm);

#endif
