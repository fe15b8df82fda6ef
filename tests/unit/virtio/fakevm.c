/* A fake VM for device tests and fuzzers (see fakevm.h). */
#include <errno.h>
#include <string.h>

#include "fakevm.h"
#include "vm/vm.h"

struct fake_vm *fvm;

void fakevm_init(struct fake_vm *f, struct gmem *mem)
{
	memset(f, 0, sizeof(*f));
	f->mem = mem;
	f->mmio_next = VM_PCI_HOLE_START;
	f->pio_next = 0xc000;
	f->next_gsi = 24;
	bus_init(&f->pio);
	bus_init(&f->mmio);
	fvm = f;
}

void fakevm_shutdown(struct fake_vm *f)
{
	for (unsigned int i = 0; i < f->nhooks; i++)
		f->hook[i](f->hook_opaque[i]);
	f->nhooks = 0;
	bus_destroy(&f->pio);
	bus_destroy(&f->mmio);
}

struct gmem *vm_gmem(struct vm *vm)
{
	return fvm->mem;
}

struct bus *vm_pio_bus(struct vm *vm)
{
	return &fvm->pio;
}

struct bus *vm_mmio_bus(struct vm *vm)
{
	return &fvm->mmio;
}

unsigned int vm_ncpus(const struct vm *vm)
{
	return 2;
}

int vm_ioeventfd(struct vm *vm, uint64_t addr, unsigned int len, bool pio,
		 int64_t datamatch, int fd, bool assign)
{
	for (unsigned int i = 0; i < fvm->nioev; i++) {
		if (fvm->ioev_fd[i] == fd && fvm->ioev_addr[i] == addr) {
			if (assign)
				return -EEXIST;
			fvm->nioev--;
			fvm->ioev_fd[i] = fvm->ioev_fd[fvm->nioev];
			fvm->ioev_addr[i] = fvm->ioev_addr[fvm->nioev];
			return 0;
		}
	}
	if (!assign)
		return -ENOENT;
	if (fvm->nioev == FAKEVM_MAX_REC)
		return -ENOSPC;
	fvm->ioev_fd[fvm->nioev] = fd;
	fvm->ioev_addr[fvm->nioev++] = addr;
	return 0;
}

int vm_irqfd(struct vm *vm, unsigned int gsi, int fd, int resample_fd,
	     bool assign)
{
	struct irqfd_rec *r = fakevm_irqfd_of(fd);

	if (r && assign)
		return -EBUSY;	/* as KVM: one irqfd per eventfd */
	if (!assign) {
		if (!r)
			return -ENOENT;
		r->assigned = false;
		return 0;
	}
	for (unsigned int i = 0; i < fvm->nirqfd; i++) {
		if (!fvm->irqfd[i].assigned) {
			fvm->irqfd[i] = (struct irqfd_rec){ fd, gsi, resample_fd, true };
			return 0;
		}
	}
	if (fvm->nirqfd == FAKEVM_MAX_REC)
		return -ENOSPC;
	fvm->irqfd[fvm->nirqfd++] = (struct irqfd_rec){ fd, gsi, resample_fd, true };
	return 0;
}

struct irqfd_rec *fakevm_irqfd_of(int fd)
{
	for (unsigned int i = 0; i < fvm->nirqfd; i++)
		if (fvm->irqfd[i].fd == fd && fvm->irqfd[i].assigned)
			return &fvm->irqfd[i];
	return NULL;
}

int vm_irq_line(struct vm *vm, unsigned int gsi, int level)
{
	return 0;
}

int vm_msi_route_alloc(struct vm *vm)
{
	if (fvm->next_gsi - 24 >= FAKEVM_MAX_REC)
		return -ENOSPC;
	return fvm->next_gsi++;
}

int vm_msi_route_set(struct vm *vm, unsigned int gsi, uint64_t addr,
		     uint32_t data)
{
	if (gsi < 24 || gsi - 24 >= FAKEVM_MAX_REC)
		return -EINVAL;
	fvm->route_addr[gsi - 24] = addr;
	fvm->route_data[gsi - 24] = data;
	return 0;
}

uint64_t vm_pci_mmio_alloc(struct vm *vm, uint64_t size)
{
	uint64_t b = (fvm->mmio_next + size - 1) & ~(size - 1);

	if (b + size > VM_PCI_HOLE_END)
		return 0;
	fvm->mmio_next = b + size;
	return b;
}

uint16_t vm_pci_pio_alloc(struct vm *vm, uint16_t size)
{
	uint32_t b = (fvm->pio_next + size - 1) & ~(size - 1u);

	if (b + size > 0x10000)
		return 0;
	fvm->pio_next = b + size;
	return b;
}

void vm_request_stop(struct vm *vm, int status)
{
}

int vm_add_shutdown_hook(struct vm *vm, void (*fn)(void *), void *opaque)
{
	if (fvm->nhooks == 8)
		return -ENOSPC;
	fvm->hook[fvm->nhooks] = fn;
	fvm->hook_opaque[fvm->nhooks++] = opaque;
	return 0;
}
