/* What the multiboot loader handed over (copied early, before the DMA heap
 * may reuse that memory): command line, memory map. Plus the command-line
 * option helpers and the DMA allocator. */
#ifndef PROBE_BOOT_H
#define PROBE_BOOT_H

#include "lib/libc.h"

struct mem_region {
	uint64_t base, len;
	uint32_t type;		/* 1 = available RAM */
};

#define MAX_MEM_REGIONS 32
extern struct mem_region mem_regions[MAX_MEM_REGIONS];
extern unsigned int n_mem_regions;
extern uint64_t mem_total;	/* bytes of available RAM */

/* Copies the multiboot info; sets up the DMA heap. 0 or -1 (no multiboot). */
int boot_info_init(void);

/* Command line: space-separated key=value words; words without '=' (QEMU
 * puts the kernel path first) are ignored. */
const char *opt_str(const char *key, const char *def);
/* Number option (see parse_u64); a malformed value fails the probe. */
uint64_t opt_u64(const char *key, uint64_t def);
bool opt_has(const char *key);
/* mode=poll (the default) or mode=msix: whether a driver takes its
 * completions by MSI-X; any other value fails the probe. */
bool opt_msix(void);
/* The benchmark region of a disk of disk bytes: region_off= (1 MiB) and
 * region= (16 MiB), multiples of 64k inside the disk, or the probe fails. */
void opt_region(uint64_t disk, uint64_t *off, uint64_t *len);
const char *cmdline(void);

/* Identity-mapped, user-accessible, zeroed memory for rings and buffers;
 * align is a power of two. NULL when the heap is exhausted. */
void *dma_alloc(size_t size, size_t align);
/* Bytes left in the DMA heap. */
uint64_t dma_free_bytes(void);
static inline uint64_t virt_to_phys(const volatile void *p)
{
	return (uint64_t)(uintptr_t)p;
}

#endif
