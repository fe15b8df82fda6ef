/* libFuzzer harness for the split virtqueue: the input is guest RAM (two
 * regions, contiguous in guest-physical space) holding a descriptor table,
 * an available ring and a used ring at fixed places; the device pops every
 * chain it can, checks each iovec lies inside guest RAM, pushes it back and
 * decides about interrupts. Nothing may crash or point outside RAM.
 *
 * Input: [u8 flags][u16 queue size exponent bits][RAM bytes...]
 * flags: bit 0 indirect, bit 1 event index, bit 2 max_iov small. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringfuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gmem mem = { 0 };
	struct virtq vq = { 0 };
	struct iovec iov[64];
	struct virtq_elem e;
	uint8_t flags;

	if (size < 2)
		return 0;
	flags = data[0];
	vq.size = 1u << (data[1] % 9);		/* 1 .. 256 */
	ringfuzz_load(&mem, &vq, data + 2, size - 2);
	vq.indirect = flags & 1;
	vq.event_idx = flags & 2;
	vq.last_avail = data[1] >> 4;
	if (virtq_init(&vq))
		return 0;
	for (unsigned int n = 0; n < 2u * vq.size + 2; n++) {
		unsigned int max = flags & 4 ? 3 : 64;
		int ret;

		if (n & 1)
			virtq_disable_kicks(&vq);
		ret = virtq_pop(&vq, &e, iov, max);
		if (ret <= 0)
			break;
		if (e.out_num + e.in_num > max)
			abort();
		for (unsigned int i = 0; i < e.out_num + e.in_num; i++)
			if (!ringfuzz_inside(&iov[i]))
				abort();
		/* touch every byte the device would read or write */
		for (unsigned int i = 0; i < e.out_num + e.in_num; i++)
			if (iov[i].iov_len)
				((volatile uint8_t *)iov[i].iov_base)[iov[i].iov_len - 1] ^= 0;
		virtq_push(&vq, e.head, (uint32_t)e.in_len);
		virtq_notify(&vq);
		virtq_enable_kicks(&vq);
	}
	return 0;
}
