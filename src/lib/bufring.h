/* A ring of buffer space for allocations that are freed mostly in the
 * order they were made (the commands of one connection): one block of
 * memory, allocations taken at its head and reclaimed from its tail as
 * the oldest are freed. One freed out of order keeps its space until all
 * made before it are freed too. No allocation crosses the end of the
 * block: one that does not fit before the end starts at the beginning.
 * Not thread-safe: its owner's lock covers it. */
#ifndef IOVM_LIB_BUFRING_H
#define IOVM_LIB_BUFRING_H

#include <stdbool.h>
#include <stddef.h>

struct bufring {
	char *mem;		/* made on the first allocation */
	size_t size;
	size_t head;		/* where the next allocation goes */
	size_t tail;		/* the oldest allocation not reclaimed */
	size_t wrap;		/* wrapped: where the allocations before
				 * the beginning end; else size */
	bool wrapped;		/* head has gone round to before tail */
	size_t live;		/* allocations not reclaimed */
};

/* Allocations are aligned to, and cost a header of, this many bytes. */
#define BUFRING_ALIGN 64

/* A ring of size bytes (a multiple of BUFRING_ALIGN); no memory yet. */
void bufring_init(struct bufring *b, size_t size);
/* Frees the memory; nothing may be allocated any more. */
void bufring_destroy(struct bufring *b);
/* The largest len that bufring_alloc can ever give. */
size_t bufring_max(const struct bufring *b);
/* len bytes (aligned), or NULL when there is no room now (it comes as
 * earlier allocations are freed; an empty ring has bufring_max), when len
 * is larger than bufring_max, or when memory cannot be had. */
void *bufring_alloc(struct bufring *b, size_t len);
/* Gives back p, from bufring_alloc of b. */
void bufring_free(struct bufring *b, void *p);
/* Whether p is in b's memory (else it came from somewhere else). */
bool bufring_owns(const struct bufring *b, const void *p);

#endif
