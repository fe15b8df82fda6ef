/* libFuzzer harness for inflight I/O tracking (vhost-user INFLIGHT_SHMFD):
 * the inflight region comes from the front-end, so a back-end restarted on
 * it reads an adversary's data. The input is that region plus guest RAM
 * with a ring; the device recovers from the region (virtq_init), pops every
 * chain it can (resubmitted ones first), checks each iovec lies inside
 * guest RAM, and pushes it back. Nothing may crash or index outside the
 * region, and once every popped chain is pushed the region must say so.
 * Then one more chain is popped and the back-end dies inside its push
 * (after 0 to all of its steps): a new back-end must recover from that
 * region, resubmitting the chain exactly when the driver was not shown
 * its completion.
 *
 * Input: [u8 flags][u8 size exponent | last_avail << 4][region][RAM...]
 * flags: bit 0 keep the region's version (else 1), bit 1 keep its desc_num
 * (else the queue size), bit 2 indirect, bit 3 event index, bits 4-7 the
 * steps of the last push made before the death (modulo the step count
 * plus one). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringfuzz.h"

#define MAXQ 256

static uint64_t region_mem[(16 + 16 * MAXQ + 63) / 8 + 8];
static struct virtq_resubmit resubmit[MAXQ];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct virtq_inflight_region *r = (struct virtq_inflight_region *)region_mem;
	struct virtq_inflight inf = { .region = r, .resubmit = resubmit };
	struct gmem mem = { 0 };
	struct virtq vq = { 0 };
	struct iovec iov[64];
	struct virtq_elem e;
	size_t rlen;
	uint8_t flags, b1;

	if (size < 2)
		return 0;
	flags = data[0];
	b1 = data[1];
	vq.size = 1u << (b1 % 9);		/* 1 .. 256 */
	rlen = virtq_inflight_region_size(vq.size);
	data += 2;
	size -= 2;
	memset(region_mem, 0, sizeof(region_mem));
	memcpy(region_mem, data, size < rlen ? size : rlen);
	data += size < rlen ? size : rlen;
	size -= size < rlen ? size : rlen;
	if (!(flags & 1))
		r->version = VIRTQ_INFLIGHT_VERSION;
	if (!(flags & 2))
		r->desc_num = vq.size;
	ringfuzz_load(&mem, &vq, data, size);
	vq.indirect = flags & 4;
	vq.event_idx = flags & 8;
	vq.last_avail = b1 >> 4;	/* SET_VRING_BASE, used when fresh */
	vq.inflight = &inf;
	if (virtq_init(&vq))
		return 0;
	if (virtq_inflight_pending(&vq) > vq.size ||
	    virtq_inflight_pending(&vq) != inf.recovered)
		abort();
	for (unsigned int n = 0;; n++) {
		int ret = n < 2u * vq.size + 2 ? virtq_pop(&vq, &e, iov, 64) : 0;

		if (ret <= 0)
			return 0;
		if (e.head >= vq.size || !r->desc[e.head].inflight)
			abort();
		for (unsigned int i = 0; i < e.out_num + e.in_num; i++)
			if (!ringfuzz_inside(&iov[i]))
				abort();
		if (!virtq_avail_count(&vq))
			break;	/* the last one: its push is cut short */
		virtq_push(&vq, e.head, (uint32_t)e.in_len);
		if (r->desc[e.head].inflight || r->used_idx != vq.used_idx)
			abort();
	}
	{
		unsigned int steps = (flags >> 4) % (VIRTQ_PUSH_STEPS + 1);
		uint16_t before = vq.used_idx;
		bool published;

		virtq_push_partial(&vq, e.head, 0, steps);
		published = vq.used_idx != before;
		inf = (struct virtq_inflight){ .region = r, .resubmit = resubmit };
		if (virtq_init(&vq))
			abort();	/* our own region: always recoverable */
		if (r->desc[e.head].inflight == published ||
		    r->used_idx != vq.used_idx ||
		    inf.finished != (published && steps < VIRTQ_PUSH_STEPS))
			abort();
		if (!published && (!inf.recovered ||
				   inf.resubmit[inf.recovered - 1].head != e.head))
			abort();	/* the newest pop, so resubmitted last */
	}
	return 0;
}
