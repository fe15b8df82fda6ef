/* A fake VM for tests and fuzzers of PCI devices without KVM: implements
 * the vm.h services over plain buses and a given guest memory, recording
 * what KVM would have been asked (ioeventfds, irqfds, MSI routes). Linking
 * it keeps the real vm.c out of the executable. One fake at a time: fvm. */
#ifndef IOVM_TESTS_FAKEVM_H
#define IOVM_TESTS_FAKEVM_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/gmem.h"
#include "vm/bus.h"

#define FAKEVM_MAX_REC 256

struct irqfd_rec {
	int fd;
	unsigned int gsi;
	int resample_fd;
	bool assigned;
};

struct fake_vm {
	struct gmem *mem;
	struct bus pio, mmio;
	uint64_t mmio_next;
	uint16_t pio_next;
	int next_gsi;
	uint64_t route_addr[FAKEVM_MAX_REC];
	uint32_t route_data[FAKEVM_MAX_REC];
	struct irqfd_rec irqfd[FAKEVM_MAX_REC];
	unsigned int nirqfd;
	uint64_t ioev_addr[FAKEVM_MAX_REC];
	int ioev_fd[FAKEVM_MAX_REC];
	unsigned int nioev;
	void (*hook[8])(void *);
	void *hook_opaque[8];
	unsigned int nhooks;
};

/* The current fake; pass it (cast) wherever a struct vm * is wanted. */
extern struct fake_vm *fvm;

void fakevm_init(struct fake_vm *f, struct gmem *mem);
/* Runs the shutdown hooks, as vm_run does on exit. */
void fakevm_shutdown(struct fake_vm *f);
/* The irqfd currently assigned for eventfd fd, or NULL. */
struct irqfd_rec *fakevm_irqfd_of(int fd);

#endif
