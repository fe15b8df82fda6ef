/* Guest RAM that a vhost-user client can shrink under us: a SIGBUS handler
 * that turns an access past the end of a truncated region file into a
 * dropped connection instead of a dead back-end. */
#ifndef IOVM_VHOST_SIGBUS_H
#define IOVM_VHOST_SIGBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Regions guarded at once, process-wide (a back-end serves one client at
 * a time with at most VHU_MEM_MAX_REGIONS regions). */
#define VHU_GUARD_SLOTS 64

/* Where the handler reports a fault in one owner's regions. */
struct vhu_fault {
	int efd;		/* eventfd: readable once a guarded region faulted */
	uintptr_t addr;		/* first faulting address (atomic); 0: none */
};

/* Creates f's eventfd and installs the SIGBUS handler (once per process).
 * 0 or -errno. */
int vhu_fault_init(struct vhu_fault *f);
void vhu_fault_fini(struct vhu_fault *f);

/* Guards the mapping [base, base+len), whose pages are page bytes (the
 * huge page size on hugetlbfs): a SIGBUS inside it maps anonymous zero
 * pages over the faulting page, so the access completes, and reports to
 * owner. Call right after mmap, before anyone touches the mapping. Returns
 * the slot (for vhu_guard_remove) or -ENOSPC. */
int vhu_guard_add(void *base, size_t len, size_t page, struct vhu_fault *owner);

/* Stops guarding a slot. Call before munmap, with every thread that may
 * touch the mapping stopped. */
void vhu_guard_remove(int slot);

/* Consumes f's report: true (with the first faulting address) when a
 * guarded region of f faulted since the last call. */
bool vhu_fault_take(struct vhu_fault *f, uintptr_t *addr);

#endif
