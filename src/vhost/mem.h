/* The vhost-user memory table: the client's guest RAM regions, mapped from
 * the file descriptors it sent, with translations from guest-physical and
 * from client user (virtual) addresses. Every region is checked against
 * the others and against the file it came with before it is mapped. */
#ifndef IOVM_VHOST_MEM_H
#define IOVM_VHOST_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/gmem.h"
#include "vhost/proto.h"
#include "vhost/sigbus.h"

#define VHU_MEM_MAX_REGIONS GMEM_MAX_REGIONS

struct vhu_mem_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uaddr;
	uint8_t *hva;		/* host address of gpa */
	void *map_base;		/* what mmap returned, for munmap */
	size_t map_len;
	int guard;		/* its SIGBUS guard slot (sigbus.h) */
};

struct vhu_mem {
	struct vhu_mem_region r[VHU_MEM_MAX_REGIONS];
	unsigned int n;
	/* The device's view (gpa -> hva), rebuilt on every change. */
	struct gmem gmem;
	/* Accesses past the end of a region file the client truncated. */
	struct vhu_fault fault;
};

/* 0, or -errno when the fault eventfd cannot be made. */
int vhu_mem_init(struct vhu_mem *m);
/* Unmaps everything and releases what vhu_mem_init took. */
void vhu_mem_fini(struct vhu_mem *m);

/* Maps one region from fd (which the caller still owns and closes).
 * Refuses (-EINVAL, err says why) an empty region, one whose addresses
 * wrap, that overlaps another in guest-physical or user address space,
 * that lies outside its file, or a fd that is not a regular file or memfd;
 * -EPERM for a memfd without F_SEAL_SHRINK (it could shrink under us;
 * unsealable tmpfs and hugetlbfs files are accepted and guarded by
 * sigbus.c instead);
 * -ENOSPC when the table is full. */
int vhu_mem_add(struct vhu_mem *m, const struct vhu_region *r, int fd,
		char *err, size_t errlen);

/* Unmaps the region with this gpa, uaddr and size (-ENOENT if none). */
int vhu_mem_remove(struct vhu_mem *m, const struct vhu_region *r, char *err,
		   size_t errlen);

/* Unmaps everything (and forgets a fault report). Every thread that may
 * touch guest memory must be stopped. */
void vhu_mem_clear(struct vhu_mem *m);

/* The fd to poll for faults: readable when the client truncated the file
 * behind a region while it was mapped (sigbus.c). */
static inline int vhu_mem_fault_fd(const struct vhu_mem *m)
{
	return m->fault.efd;
}

/* Consumes a fault report: true with the region that faulted (its guest
 * address, size and the offset of the first faulting access) filled in
 * when one did since the last call. */
bool vhu_mem_take_fault(struct vhu_mem *m, uint64_t *gpa, uint64_t *size,
			uint64_t *offset);

/* Host pointer for [uaddr, uaddr+len) in the client's address space, if
 * wholly inside one region; NULL otherwise. */
void *vhu_mem_uva_to_hva(const struct vhu_mem *m, uint64_t uaddr,
			 uint64_t len);

/* Guest-physical address for [uaddr, uaddr+len); 0 or -EFAULT. */
int vhu_mem_uva_to_gpa(const struct vhu_mem *m, uint64_t uaddr, uint64_t len,
		       uint64_t *gpa);

#endif
