/* virtio-9p client for the probe (CPL 3): finds the device, reads the mount
 * tag, and runs 9P2000.L requests with the codec of src/p9/proto.c. Bulk
 * payloads travel in their own descriptors (as Linux's zero-copy path does),
 * and several requests may be in flight for the benchmarks. */
#ifndef PROBE_VIRTIO_9P_H
#define PROBE_VIRTIO_9P_H

#include "lib/virtio_pci.h"
#include "p9/proto.h"

#define VIRTIO_ID_9P 9
#define VIRTIO_9P_F_MOUNT_TAG (1ull << 0)
#define V9P_MAX_QD 16
#define V9P_MSG_BUF 8192	/* request/reply area per slot, payloads apart */

struct v9p_call {
	/* set by the caller */
	struct p9_msg t;
	const void *wdata;	/* Twrite payload (t.u.twrite.d.data = NULL) */
	void *rdata;		/* Rread/Rreaddir payload destination */
	uint32_t rdata_len;
	/* results */
	struct p9_msg r;
	int err;		/* 0, or the Rlerror errno, or -1 (transport) */
	uint32_t rcount;	/* Rread/Rreaddir payload bytes */
	/* private */
	int slot;
};

struct v9p {
	struct virtio_pci vp;
	struct virtq vq;
	char tag[64];
	uint32_t msize;
	uint8_t *tbuf, *rbuf;	/* V9P_MSG_BUF per slot */
	struct v9p_call *call_of_head[1024];
	int free_slots[V9P_MAX_QD];
	unsigned int nfree, inflight;
	uint16_t next_tag;
};

/* Opens the index-th virtio-9p device (polling mode). 0 or -1. */
int v9p_open(struct v9p *c, unsigned int index);
/* Queues a call (not kicked). 0, or -1 when no slot/descriptor is free. */
int v9p_submit(struct v9p *c, struct v9p_call *call);
void v9p_kick(struct v9p *c);
/* Takes one completed call (decoded), or NULL when none is ready. */
struct v9p_call *v9p_reap(struct v9p *c);
/* submit + kick + wait: returns call->err. */
int v9p_rpc(struct v9p *c, struct v9p_call *call);

/* Convenience wrappers on v9p_rpc; return 0 or the Rlerror errno. */
int v9p_version(struct v9p *c, uint32_t msize);
int v9p_attach(struct v9p *c, uint32_t fid);
int v9p_walk(struct v9p *c, uint32_t fid, uint32_t newfid, unsigned int n,
	     const char *const *names, struct p9_qid *last);
int v9p_lopen(struct v9p *c, uint32_t fid, uint32_t flags);
int v9p_lcreate(struct v9p *c, uint32_t fid, const char *name, uint32_t flags,
		uint32_t mode);
int v9p_clunk(struct v9p *c, uint32_t fid);
int v9p_getattr(struct v9p *c, uint32_t fid, struct p9_msg *r);
int v9p_unlinkat(struct v9p *c, uint32_t dfid, const char *name);
/* Read/write up to len bytes at off; returns bytes moved, or -errno. */
int64_t v9p_read(struct v9p *c, uint32_t fid, uint64_t off, void *buf,
		 uint32_t len);
int64_t v9p_write(struct v9p *c, uint32_t fid, uint64_t off, const void *buf,
		  uint32_t len);
int64_t v9p_readdir(struct v9p *c, uint32_t fid, uint64_t off, void *buf,
		    uint32_t len);

#endif
