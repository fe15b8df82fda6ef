/* A ring of buffer space (bufring.h). Each allocation is a header (its
 * length, whether it was freed) and its data; the live ones lie from tail
 * to head, or, wrapped, from tail to wrap and from the beginning to head. */
#include <stdlib.h>

#include "lib/bufring.h"

struct bufring_hdr {
	size_t len;		/* bytes of the block, header included */
	bool freed;
	char pad[BUFRING_ALIGN - sizeof(size_t) - sizeof(bool)];
};

_Static_assert(sizeof(struct bufring_hdr) == BUFRING_ALIGN, "one header, one alignment unit");

static void reset(struct bufring *b)
{
	b->head = b->tail = 0;
	b->wrap = b->size;
	b->wrapped = false;
	b->live = 0;
}

void bufring_init(struct bufring *b, size_t size)
{
	b->mem = NULL;
	b->size = size - size % BUFRING_ALIGN;
	reset(b);
}

void bufring_destroy(struct bufring *b)
{
	free(b->mem);
	b->mem = NULL;
}

size_t bufring_max(const struct bufring *b)
{
	return b->size - sizeof(struct bufring_hdr);
}

void *bufring_alloc(struct bufring *b, size_t len)
{
	struct bufring_hdr *h;
	size_t need;

	if (len > bufring_max(b))
		return NULL;
	need = sizeof(*h) + (len + BUFRING_ALIGN - 1) / BUFRING_ALIGN * BUFRING_ALIGN;
	if (!b->mem) {
		b->mem = aligned_alloc(BUFRING_ALIGN, b->size);
		if (!b->mem)
			return NULL;
	}
	if (b->wrapped) {
		if (need > b->tail - b->head)
			return NULL;
	} else if (need > b->size - b->head) {
		/* not before the end: from the beginning, up to tail */
		if (need > b->tail)
			return NULL;
		b->wrap = b->head;
		b->head = 0;
		b->wrapped = true;
	}
	h = (struct bufring_hdr *)(b->mem + b->head);
	h->len = need;
	h->freed = false;
	b->head += need;
	b->live++;
	return h + 1;
}

void bufring_free(struct bufring *b, void *p)
{
	struct bufring_hdr *h = (struct bufring_hdr *)p - 1;

	h->freed = true;
	/* reclaim from the oldest while it is freed */
	while (b->live) {
		h = (struct bufring_hdr *)(b->mem + b->tail);
		if (!h->freed)
			break;
		b->tail += h->len;
		b->live--;
		if (b->wrapped && b->tail == b->wrap) {
			b->tail = 0;
			b->wrap = b->size;
			b->wrapped = false;
		}
	}
	if (!b->live)
		reset(b);
}

bool bufring_owns(const struct bufring *b, const void *p)
{
	const char *c = p;

	return b->mem && c >= b->mem && c < b->mem + b->size;
}
