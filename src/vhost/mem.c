/* The vhost-user memory table: mapping, checking and translating. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vhost/mem.h"

int vhu_mem_init(struct vhu_mem *m)
{
	memset(m, 0, sizeof(*m));
	return vhu_fault_init(&m->fault);
}

void vhu_mem_fini(struct vhu_mem *m)
{
	vhu_mem_clear(m);
	vhu_fault_fini(&m->fault);
}

static void rebuild_gmem(struct vhu_mem *m)
{
	m->gmem.n = m->n;
	for (unsigned int i = 0; i < m->n; i++) {
		m->gmem.r[i].gpa = m->r[i].gpa;
		m->gmem.r[i].size = m->r[i].size;
		m->gmem.r[i].hva = m->r[i].hva;
	}
}

/* [a, a+alen) and [b, b+blen) intersect; neither wraps (checked before). */
static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static int check_region(const struct vhu_mem *m, const struct vhu_region *r,
			char *err, size_t errlen)
{
	if (!r->size) {
		snprintf(err, errlen, "memory region at gpa 0x%" PRIx64 " is empty", r->gpa);
		return -EINVAL;
	}
	if (r->gpa + r->size < r->gpa || r->uaddr + r->size < r->uaddr ||
	    r->mmap_offset + r->size < r->mmap_offset) {
		snprintf(err, errlen, "memory region gpa 0x%" PRIx64 " size 0x%" PRIx64
			 " wraps around the address space", r->gpa, r->size);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < m->n; i++) {
		const struct vhu_mem_region *o = &m->r[i];

		if (overlaps(r->gpa, r->size, o->gpa, o->size)) {
			snprintf(err, errlen, "memory region gpa 0x%" PRIx64 "+0x%" PRIx64
				 " overlaps region gpa 0x%" PRIx64 "+0x%" PRIx64,
				 r->gpa, r->size, o->gpa, o->size);
			return -EINVAL;
		}
		if (overlaps(r->uaddr, r->size, o->uaddr, o->size)) {
			snprintf(err, errlen, "memory region user address 0x%" PRIx64 "+0x%" PRIx64
				 " overlaps region at 0x%" PRIx64 "+0x%" PRIx64,
				 r->uaddr, r->size, o->uaddr, o->size);
			return -EINVAL;
		}
	}
	if (m->n == VHU_MEM_MAX_REGIONS) {
		snprintf(err, errlen, "more than %u memory regions", VHU_MEM_MAX_REGIONS);
		return -ENOSPC;
	}
	return 0;
}

/* A memfd, as opposed to a file someone opened on tmpfs or hugetlbfs
 * (F_GET_SEALS works on both): memfd_create's files live on the kernel's
 * internal mounts, where their path reads "/memfd:NAME (deleted)". Without
 * /proc to tell, it counts as one: refused rather than trusted. */
static bool is_memfd(int fd)
{
	char path[32], target[16];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target));
	return n < 0 || (n >= 7 && !memcmp(target, "/memfd:", 7));
}

int vhu_mem_add(struct vhu_mem *m, const struct vhu_region *r, int fd,
		char *err, size_t errlen)
{
	struct vhu_mem_region *n;
	struct stat st;
	uint64_t align, start, len;
	void *p;
	int ret, seals;

	ret = check_region(m, r, err, errlen);
	if (ret)
		return ret;
	/* The size check below only holds while the file cannot shrink: a
	 * client truncating its file under our mapping turns every access
	 * past the new end into a SIGBUS in the backend. A memfd must carry
	 * F_SEAL_SHRINK, as QEMU's memory-backend-memfd sets by default
	 * (seal=on); one without it (made without MFD_ALLOW_SEALING, or
	 * never sealed) is refused, since its client could have sealed it.
	 * It is checked before fstat: a seal is permanent, so the size read
	 * after it stays true. Files that cannot be sealed at all are
	 * accepted: tmpfs and hugetlbfs files not made by memfd_create (UML's
	 * memory file, QEMU's memory-backend-file on /dev/shm or hugetlbfs),
	 * for which F_GET_SEALS reports only F_SEAL_SEAL, and files on other
	 * filesystems, for which it fails. A client that truncates one of
	 * those makes our accesses fault, which sigbus.c catches and turns
	 * into a dropped client. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals >= 0 && !(seals & F_SEAL_SHRINK) && is_memfd(fd)) {
		snprintf(err, errlen, "memory region gpa 0x%" PRIx64 " is a memfd without "
			 "F_SEAL_SHRINK: the client could truncate it under the backend "
			 "(QEMU: memory-backend-memfd with seal=on)", r->gpa);
		return -EPERM;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "memory region fd: %s", strerror(errno));
		return ret;
	}
	/* Only files have a size to check against: mapping past the end of
	 * one would turn a client's lie into a SIGBUS in the backend. */
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "memory region fd is not a regular file or memfd");
		return -EINVAL;
	}
	if (r->mmap_offset + r->size > (uint64_t)st.st_size) {
		snprintf(err, errlen, "memory region offset 0x%" PRIx64 " size 0x%" PRIx64
			 " lies outside its file of 0x%" PRIx64 " bytes",
			 r->mmap_offset, r->size, (uint64_t)st.st_size);
		return -EINVAL;
	}
	/* mmap offsets must be page aligned (huge-page aligned on
	 * hugetlbfs, whose st_blksize is the huge page size). */
	align = sysconf(_SC_PAGESIZE);
	if (st.st_blksize > 0 && (uint64_t)st.st_blksize > align &&
	    !(st.st_blksize & (st.st_blksize - 1)))
		align = st.st_blksize;
	start = r->mmap_offset & ~(align - 1);
	len = r->mmap_offset - start + r->size;
	if (len > SIZE_MAX) {
		snprintf(err, errlen, "memory region of 0x%" PRIx64 " bytes is too large", len);
		return -EINVAL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		 fd, start);
	if (p == MAP_FAILED) {
		ret = -errno;
		snprintf(err, errlen, "cannot map memory region gpa 0x%" PRIx64 " size 0x%" PRIx64 ": %s",
			 r->gpa, r->size, strerror(errno));
		return ret;
	}
	/* Guarded before anyone can touch it. */
	ret = vhu_guard_add(p, len, align, &m->fault);
	if (ret < 0) {
		munmap(p, len);
		snprintf(err, errlen, "memory region gpa 0x%" PRIx64 ": more than %u regions "
			 "mapped in this process", r->gpa, VHU_GUARD_SLOTS);
		return ret;
	}
	n = &m->r[m->n++];
	n->guard = ret;
	n->gpa = r->gpa;
	n->size = r->size;
	n->uaddr = r->uaddr;
	n->map_base = p;
	n->map_len = len;
	n->hva = (uint8_t *)p + (r->mmap_offset - start);
	rebuild_gmem(m);
	return 0;
}

int vhu_mem_remove(struct vhu_mem *m, const struct vhu_region *r, char *err,
		   size_t errlen)
{
	for (unsigned int i = 0; i < m->n; i++) {
		struct vhu_mem_region *o = &m->r[i];

		if (o->gpa != r->gpa || o->uaddr != r->uaddr || o->size != r->size)
			continue;
		vhu_guard_remove(o->guard);
		munmap(o->map_base, o->map_len);
		memmove(o, o + 1, (m->n - i - 1) * sizeof(*o));
		m->n--;
		rebuild_gmem(m);
		return 0;
	}
	snprintf(err, errlen, "no memory region at gpa 0x%" PRIx64 " user address 0x%" PRIx64
		 " size 0x%" PRIx64 " to remove", r->gpa, r->uaddr, r->size);
	return -ENOENT;
}

void vhu_mem_clear(struct vhu_mem *m)
{
	uintptr_t addr;

	for (unsigned int i = 0; i < m->n; i++) {
		vhu_guard_remove(m->r[i].guard);
		munmap(m->r[i].map_base, m->r[i].map_len);
	}
	m->n = 0;
	rebuild_gmem(m);
	/* A fault report belongs to the memory it was about. */
	if (m->fault.efd >= 0)
		vhu_fault_take(&m->fault, &addr);
}

bool vhu_mem_take_fault(struct vhu_mem *m, uint64_t *gpa, uint64_t *size,
			uint64_t *offset)
{
	uintptr_t addr;

	if (!vhu_fault_take(&m->fault, &addr))
		return false;
	*gpa = *size = *offset = 0;
	for (unsigned int i = 0; i < m->n; i++) {
		const struct vhu_mem_region *r = &m->r[i];
		uintptr_t base = (uintptr_t)r->map_base;

		if (addr < base || addr - base >= r->map_len)
			continue;
		*gpa = r->gpa;
		*size = r->size;
		/* The offset in the region; an access in the alignment
		 * slack before the region counts as its start. */
		*offset = addr >= (uintptr_t)r->hva ? addr - (uintptr_t)r->hva : 0;
		break;
	}
	return true;
}

static const struct vhu_mem_region *find_uva(const struct vhu_mem *m,
					     uint64_t uaddr, uint64_t len)
{
	for (unsigned int i = 0; i < m->n; i++) {
		const struct vhu_mem_region *r = &m->r[i];

		if (uaddr < r->uaddr || uaddr - r->uaddr >= r->size)
			continue;
		if (len > r->size - (uaddr - r->uaddr))
			return NULL;
		return r;
	}
	return NULL;
}

void *vhu_mem_uva_to_hva(const struct vhu_mem *m, uint64_t uaddr, uint64_t len)
{
	const struct vhu_mem_region *r = find_uva(m, uaddr, len);

	return r ? r->hva + (uaddr - r->uaddr) : NULL;
}

int vhu_mem_uva_to_gpa(const struct vhu_mem *m, uint64_t uaddr, uint64_t len,
		       uint64_t *gpa)
{
	const struct vhu_mem_region *r = find_uva(m, uaddr, len);

	if (!r)
		return -EFAULT;
	*gpa = r->gpa + (uaddr - r->uaddr);
	return 0;
}
