/* Guest RAM and ring layout of the split-ring harnesses: see ringfuzz.h. */
#include <string.h>

#include "ringfuzz.h"

static uint8_t ram[2][RINGFUZZ_REGION];

void ringfuzz_load(struct gmem *mem, struct virtq *vq, const uint8_t *data,
		   size_t size)
{
	memset(ram, 0, sizeof(ram));
	memcpy(ram, data, size < sizeof(ram) ? size : sizeof(ram));
	mem->n = 2;
	mem->r[0] = (struct gmem_region){ 0, RINGFUZZ_REGION, ram[0] };
	mem->r[1] = (struct gmem_region){ RINGFUZZ_REGION, RINGFUZZ_REGION, ram[1] };
	vq->mem = mem;
	vq->desc_gpa = 0;
	vq->avail_gpa = 16u * vq->size;
	vq->used_gpa = (vq->avail_gpa + 6 + 2u * vq->size + 3) & ~3u;
	vq->kick_fd = vq->call_fd = -1;
}

bool ringfuzz_inside(const struct iovec *v)
{
	for (int i = 0; i < 2; i++) {
		uint8_t *b = v->iov_base;

		if (b >= ram[i] && b + v->iov_len <= ram[i] + RINGFUZZ_REGION &&
		    b + v->iov_len >= b)
			return true;
	}
	return false;
}
