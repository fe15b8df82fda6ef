/* Multiboot info, command line options and the DMA heap. */
#include "lib/boot.h"

#include "lib/console.h"

#define MB_BOOTLOADER_MAGIC 0x2BADB002

struct mb_info {
	uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
	uint32_t mods_count, mods_addr, syms[4];
	uint32_t mmap_length, mmap_addr;
} __attribute__((packed));

struct mb_mmap {
	uint32_t size;
	uint64_t addr, len;
	uint32_t type;
} __attribute__((packed));

extern uint32_t boot_magic, boot_info;
extern char __image_end[];

struct mem_region mem_regions[MAX_MEM_REGIONS];
unsigned int n_mem_regions;
uint64_t mem_total;

static char cmd[1024];
static uint64_t heap_next, heap_end;

/* The DMA heap stays below the 3 GiB PCI hole (everything is identity
 * mapped only up to 4 GiB). */
#define HEAP_LIMIT 0xC0000000ull

int boot_info_init(void)
{
	const struct mb_info *mb = (const struct mb_info *)(uintptr_t)boot_info;
	uint64_t start = ALIGN_UP((uint64_t)(uintptr_t)__image_end, 0x200000);

	if (boot_magic != MB_BOOTLOADER_MAGIC)
		return -1;
	if (mb->flags & (1u << 2)) {
		const char *s = (const char *)(uintptr_t)mb->cmdline;
		size_t i;

		for (i = 0; i + 1 < sizeof(cmd) && s[i]; i++)
			cmd[i] = s[i];
		cmd[i] = 0;
	}
	if (mb->flags & (1u << 6)) {
		uint64_t p = mb->mmap_addr, end = p + mb->mmap_length;

		while (p + sizeof(struct mb_mmap) <= end &&
		       n_mem_regions < MAX_MEM_REGIONS) {
			const struct mb_mmap *m =
				(const struct mb_mmap *)(uintptr_t)p;

			p += m->size + 4;
			if (!m->len)
				continue;
			mem_regions[n_mem_regions].base = m->addr;
			mem_regions[n_mem_regions].len = m->len;
			mem_regions[n_mem_regions].type = m->type;
			n_mem_regions++;
			if (m->type == 1)
				mem_total += m->len;
		}
	} else if (mb->flags & 1) {
		mem_regions[0] = (struct mem_region){ 0, mb->mem_lower * 1024ull, 1 };
		mem_regions[1] = (struct mem_region){ 0x100000,
						      mb->mem_upper * 1024ull, 1 };
		n_mem_regions = 2;
		mem_total = mem_regions[0].len + mem_regions[1].len;
	}
	/* The heap is the rest of the RAM region holding the image. */
	for (unsigned int i = 0; i < n_mem_regions; i++) {
		const struct mem_region *r = &mem_regions[i];
		uint64_t end = MIN(r->base + r->len, HEAP_LIMIT);

		if (r->type == 1 && r->base <= start && end > start) {
			heap_next = start;
			heap_end = end;
		}
	}
	return 0;
}

const char *cmdline(void)
{
	return cmd;
}

/* Finds key=value in the command line; copies the value into out. */
static bool opt_find(const char *key, char *out, size_t outsz)
{
	size_t klen = strlen(key);
	const char *p = cmd;

	while (*p) {
		const char *w = p, *e;

		while (*p && *p != ' ')
			p++;
		e = p;
		while (*p == ' ')
			p++;
		if ((size_t)(e - w) > klen && strncmp(w, key, klen) == 0 &&
		    w[klen] == '=') {
			size_t n = (size_t)(e - w) - klen - 1;

			if (n >= outsz)
				n = outsz - 1;
			memcpy(out, w + klen + 1, n);
			out[n] = 0;
			return true;
		}
	}
	return false;
}

const char *opt_str(const char *key, const char *def)
{
	/* A few slots so that callers can hold several values at once. */
	static char vals[8][64];
	static unsigned int next;
	char *v = vals[next++ % ARRAY_SIZE(vals)];

	return opt_find(key, v, sizeof(vals[0])) ? v : def;
}

bool opt_has(const char *key)
{
	char v[64];

	return opt_find(key, v, sizeof(v));
}

uint64_t opt_u64(const char *key, uint64_t def)
{
	char v[64];
	uint64_t n;

	if (!opt_find(key, v, sizeof(v)))
		return def;
	if (parse_u64(v, &n) < 0)
		probe_fail("bad number for option %s: '%s'", key, v);
	return n;
}

bool opt_msix(void)
{
	const char *mode = opt_str("mode", "poll");

	if (strcmp(mode, "poll") == 0)
		return false;
	if (strcmp(mode, "msix") != 0)
		probe_fail("mode must be poll or msix, not '%s'", mode);
	return true;
}

void opt_region(uint64_t disk, uint64_t *off, uint64_t *len)
{
	*off = opt_u64("region_off", 1 << 20);
	*len = opt_u64("region", 16 << 20);
	if (*off % 65536 || *len % 65536 || !*len)
		probe_fail("region_off and region must be multiples of 64k");
	if (*off > disk || *len > disk - *off)
		probe_fail("disk too small: need %lu bytes, has %lu",
			   *off + *len, disk);
}

void *dma_alloc(size_t size, size_t align)
{
	uint64_t a = ALIGN_UP(heap_next, (uint64_t)align);

	if (!heap_end || a + size > heap_end || a + size < a)
		return NULL;
	heap_next = a + size;
	memset((void *)(uintptr_t)a, 0, size);
	return (void *)(uintptr_t)a;
}

uint64_t dma_free_bytes(void)
{
	return heap_end > heap_next ? heap_end - heap_next : 0;
}
