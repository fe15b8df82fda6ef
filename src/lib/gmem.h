/* Guest memory as the host sees it: a few regions mapping guest-physical
 * addresses to host pointers. Every device translates guest addresses here,
 * and nothing from the guest is dereferenced without passing through it. */
#ifndef IOVM_LIB_GMEM_H
#define IOVM_LIB_GMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GMEM_MAX_REGIONS 8

struct gmem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

struct gmem {
	struct gmem_region r[GMEM_MAX_REGIONS];
	unsigned int n;
};

/* Host pointer to [gpa, gpa+len) if that range lies wholly inside one
 * region, else NULL. Overflowing ranges are refused. len 0 is allowed. */
static inline void *gmem_ptr(const struct gmem *m, uint64_t gpa, uint64_t len)
{
	for (unsigned int i = 0; i < m->n; i++) {
		const struct gmem_region *r = &m->r[i];
		uint64_t off;

		if (gpa < r->gpa)
			continue;
		off = gpa - r->gpa;
		if (off >= r->size && !(off == r->size && len == 0))
			continue;
		if (len > r->size - off)
			return NULL;
		return r->hva + off;
	}
	return NULL;
}

#endif
