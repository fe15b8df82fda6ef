/* The NBD driver's planning of a guest's request into NBD commands
 * (block/nbd_plan.c): the request's offset, length and scattered iovecs
 * are the guest's, the export's limits the server's. Every plan is checked
 * against the request: the commands cover its bytes once, in order, each
 * within the server's maximum payload; a command sent from guest memory
 * carries exactly the bytes of the request at its offset, and a gathered
 * one's iovecs add up to its length and hold those bytes; flags are only
 * the ones the export allows; a refusal names a request the export cannot
 * take, and an accepted one is inside it.
 *
 * Input: 16 bytes of export and request, then 3 bytes per iovec (length
 * in 16-byte units, whether it follows the previous one in memory, else
 * the gap). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block/nbd_plan.h"

#define MEM (1u << 20)
#define MAX_IOV 256

static uint8_t mem[MEM];		/* each byte names its own place */
static uint8_t want[MEM];		/* the request's bytes, in order */
static struct iovec iov[MAX_IOV];

struct plan {
	const struct nbd_export *e;
	enum blk_op op;
	uint64_t offset, len, next;
	uint64_t gmax;		/* a gathered command's most */
	int ncmds;
};

static void check(int cond)
{
	if (!cond)
		abort();
}

static int on_cmd(void *opaque, const struct nbd_cmd *c)
{
	struct plan *p = opaque;
	uint32_t fua = p->e->fua_writes ? NBD_PLAN_FLAG_FUA : 0;

	p->ncmds++;
	if (c->cmd == NBD_PLAN_FLUSH) {
		check(p->op == BLK_OP_FLUSH && c->flags == 0);
		return 0;
	}
	/* in order, no gap, no overlap, nothing past the request */
	check(c->len > 0 && c->off == p->next && c->len <= p->offset + p->len - p->next);
	p->next += c->len;
	switch (c->cmd) {
	case NBD_PLAN_READ:
	case NBD_PLAN_WRITE:
		check(p->op == (c->cmd == NBD_PLAN_READ ? BLK_OP_READ : BLK_OP_WRITE));
		check(c->flags == (c->cmd == NBD_PLAN_WRITE ? fua : 0));
		check(c->len <= p->e->max_payload);
		if (c->buf) {
			const uint8_t *b = c->buf;

			check(b >= mem && b + c->len <= mem + MEM);
			check(!memcmp(b, want + (c->off - p->offset), c->len));
		} else {
			uint64_t n = 0;

			check(c->len <= p->gmax);
			check(c->iovcnt > 0 && c->iov >= iov && c->iov + c->iovcnt <= iov + MAX_IOV);
			for (unsigned int i = 0; i < c->iovcnt; i++) {
				check(!memcmp(c->iov[i].iov_base, want + (c->off - p->offset) + n,
					      c->iov[i].iov_len));
				n += c->iov[i].iov_len;
			}
			check(n == c->len);
		}
		break;
	case NBD_PLAN_TRIM:
		check(p->op == BLK_OP_DISCARD && c->flags == 0 && c->len <= NBD_MAX_RANGE);
		break;
	case NBD_PLAN_ZERO:
		check(p->op == BLK_OP_WRITE_ZEROES || p->op == BLK_OP_ZERO_UNMAP);
		check(c->flags == ((p->op == BLK_OP_WRITE_ZEROES ? NBD_PLAN_FLAG_NO_HOLE : 0) | fua));
		check(c->len <= NBD_MAX_RANGE);
		break;
	default:
		check(0);
	}
	return 0;
}

static uint32_t u32(const uint8_t *d)
{
	return (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t blocks[] = { 1, 512, 4096, 65536 };
	static const uint64_t payloads[] = { 512, 4096, 65536, 1u << 20, NBD_DEFAULT_MAX_PAYLOAD };
	static const uint64_t directs[] = { 0, 4096, 65536, 131072 };
	static const uint64_t gathers[] = { 0, 4096, 131072, 1u << 20 };
	static bool filled;
	const uint8_t *hdr = data;
	struct nbd_export e = { 0 };
	struct nbd_gather g;
	struct plan p = { 0 };
	unsigned int n = 0;
	uint64_t pos = 0, len = 0;
	bool in_range, aligned;
	int ret;

	if (size < 16)
		return 0;
	if (!filled)
		for (size_t i = 0; i < MEM; i++)
			mem[i] = (uint8_t)(i * 2654435761u >> 13);
	filled = true;
	e.size = (uint64_t)u32(data) * 512;
	e.min_block = blocks[data[4] & 3];
	e.max_payload = payloads[(data[4] >> 2) % 5];
	e.ro = data[5] & 1;
	e.can_flush = data[5] & 2;
	e.can_trim = data[5] & 4;
	e.can_zero = data[5] & 8;
	e.can_fua = data[5] & 16;
	e.fua_writes = e.can_fua && (data[5] & 32);
	p.op = (enum blk_op)(data[6] % 6);
	p.offset = (uint64_t)u32(data + 7) * ((data[6] & 0x80) ? 512 : 1);
	g.direct = directs[data[11] & 3];
	g.max = gathers[(data[11] >> 2) & 3];
	if (g.direct > g.max)
		g.direct = g.max;
	data += 16;
	size -= 16;
	/* iovecs over mem: each follows the previous one or starts after a
	 * gap, and the request's bytes are their concatenation */
	for (; size >= 3 && n < MAX_IOV; data += 3, size -= 3) {
		uint64_t l = ((uint64_t)data[0] | (uint64_t)(data[1] & 0x3f) << 8) * 16;

		if (!(data[1] & 0x80) && n)
			pos += 16 * (1 + data[2]);	/* a gap */
		if (pos + l > MEM || len + l > MEM)
			break;
		iov[n++] = (struct iovec){ mem + pos, l };
		memcpy(want + len, mem + pos, l);
		pos += l;
		len += l;
	}
	if (p.op != BLK_OP_READ && p.op != BLK_OP_WRITE) {
		len = (uint64_t)u32(hdr + 12) * 512;
		n = 0;
	}
	p.e = &e;
	p.len = len;
	p.next = p.offset;
	p.gmax = g.max < e.max_payload ? g.max : e.max_payload;
	ret = nbd_plan_request(&e, p.op, iov, n, p.offset, len, (hdr[6] & 0x40) ? NULL : &g,
			       on_cmd, &p);
	in_range = p.offset <= e.size && len <= e.size - p.offset;
	aligned = e.min_block <= 1 || (!(p.offset % e.min_block) && !(len % e.min_block));
	if (p.op == BLK_OP_FLUSH) {
		check(ret == (e.can_flush ? 0 : NBD_PLAN_NOTHING));
		check(p.ncmds == (e.can_flush ? 1 : 0));
		return 0;
	}
	if ((p.op == BLK_OP_DISCARD && !e.can_trim) ||
	    ((p.op == BLK_OP_WRITE_ZEROES || p.op == BLK_OP_ZERO_UNMAP) && !e.can_zero)) {
		check(ret == -EOPNOTSUPP && p.ncmds == 0);
		return 0;
	}
	if (!in_range || !aligned || (p.op != BLK_OP_READ && e.ro)) {
		check(ret == -EIO && p.ncmds == 0);
		return 0;
	}
	check(ret == 0);
	check(p.next == p.offset + len);	/* every byte, once */
	return 0;
}
