/* virtio-9p client for the probe. */
#include "virtio_9p.h"

#include "lib/probe.h"

static struct p9_str cstr(const char *s)
{
	return (struct p9_str){ (uint16_t)strlen(s), s };
}

int v9p_open(struct v9p *c, unsigned int index)
{
	struct pci_dev *pci = pci_find(VIRTIO_VENDOR,
				       VIRTIO_DEV_MODERN(VIRTIO_ID_9P),
				       0x1009, index);
	uint16_t tl;

	memset(c, 0, sizeof(*c));
	if (!pci) {
		pr("probe: no virtio-9p device #%u\n", index);
		return -1;
	}
	if (virtio_pci_init(&c->vp, pci) < 0 ||
	    virtio_pci_negotiate(&c->vp, VIRTIO_9P_F_MOUNT_TAG |
				 VIRTIO_F_EVENT_IDX | VIRTIO_F_INDIRECT_DESC) < 0)
		return -1;
	if (!virtio_has(&c->vp, VIRTIO_9P_F_MOUNT_TAG) || !c->vp.devcfg ||
	    c->vp.devcfg_len < 2) {
		pr("probe: virtio-9p: no mount tag\n");
		return -1;
	}
	tl = mmio_read16(c->vp.devcfg);
	if (tl >= sizeof(c->tag) || 2u + tl > c->vp.devcfg_len) {
		pr("probe: virtio-9p: bad tag length %u\n", tl);
		return -1;
	}
	for (unsigned int i = 0; i < tl; i++)
		c->tag[i] = mmio_read8(c->vp.devcfg + 2 + i);
	if (virtq_setup(&c->vp, &c->vq, 0, 128, VIRTIO_MSI_NO_VECTOR) < 0) {
		pr("probe: virtio-9p: queue setup failed\n");
		return -1;
	}
	virtq_irq_disable(&c->vq);
	c->tbuf = dma_alloc(V9P_MSG_BUF * V9P_MAX_QD, 4096);
	c->rbuf = dma_alloc(V9P_MSG_BUF * V9P_MAX_QD, 4096);
	if (!c->tbuf || !c->rbuf)
		return -1;
	for (unsigned int i = 0; i < V9P_MAX_QD; i++)
		c->free_slots[i] = V9P_MAX_QD - 1 - i;
	c->nfree = V9P_MAX_QD;
	virtio_pci_driver_ok(&c->vp);
	pr("probe: 9p dev=%02x:%02x.%x tag=%s queue_size=%u features=0x%lx\n",
	   pci->bus, pci->dev, pci->fn, c->tag, c->vq.size, c->vp.features);
	return 0;
}

int v9p_submit(struct v9p *c, struct v9p_call *call)
{
	struct virtq_buf b[4];
	unsigned int n = 0;
	uint8_t *tb, *rb;
	int len, head, slot;
	bool payload_in = call->t.type == P9_TREAD ||
			  call->t.type == P9_TREADDIR;

	if (!c->nfree)
		return -1;
	slot = c->free_slots[c->nfree - 1];
	tb = c->tbuf + (size_t)slot * V9P_MSG_BUF;
	rb = c->rbuf + (size_t)slot * V9P_MSG_BUF;
	call->t.tag = c->next_tag++;
	if (c->next_tag == P9_NOTAG)
		c->next_tag = 0;
	if (call->t.type == P9_TVERSION)
		call->t.tag = P9_NOTAG;
	len = p9_encode(&call->t, tb, V9P_MSG_BUF);
	if (len < 0)
		return -1;
	b[n++] = (struct virtq_buf){ tb, (uint32_t)len, false };
	if (call->t.type == P9_TWRITE && call->t.u.twrite.d.count)
		b[n++] = (struct virtq_buf){ call->wdata, call->t.u.twrite.d.count,
					     false };
	if (payload_in) {
		/* The reply header, then the payload straight into the
		 * caller's buffer. */
		b[n++] = (struct virtq_buf){ rb, P9_IOHDRSZ, true };
		b[n++] = (struct virtq_buf){ call->rdata, call->rdata_len, true };
	} else {
		b[n++] = (struct virtq_buf){ rb, V9P_MSG_BUF, true };
	}
	head = virtq_add(&c->vq, b, n);
	if (head < 0)
		return -1;
	c->nfree--;
	call->slot = slot;
	c->call_of_head[head] = call;
	c->inflight++;
	return 0;
}

void v9p_kick(struct v9p *c)
{
	virtq_kick(&c->vq);
}

struct v9p_call *v9p_reap(struct v9p *c)
{
	struct v9p_call *call;
	uint32_t len;
	uint8_t *rb;
	int head = virtq_get_used(&c->vq, &len);

	if (head < 0)
		return NULL;
	call = c->call_of_head[head];
	c->call_of_head[head] = NULL;
	if (!call)
		probe_fail("virtio-9p: completion for idle head %d", head);
	rb = c->rbuf + (size_t)call->slot * V9P_MSG_BUF;
	c->free_slots[c->nfree++] = call->slot;
	c->inflight--;
	call->err = -1;
	call->rcount = 0;
	if (len < P9_HDRSZ || p9_get32(rb) != len)
		return call;
	if (rb[4] == P9_RREAD || rb[4] == P9_RREADDIR) {
		if (len < P9_IOHDRSZ ||
		    p9_decode(rb, P9_IOHDRSZ, true, &call->r))
			return call;
		call->rcount = call->r.u.rdata.count;
		if (call->rcount > call->rdata_len)
			return call;
		call->r.u.rdata.data = call->rdata;
	} else if (p9_decode(rb, len, false, &call->r)) {
		return call;
	}
	if (call->r.tag != call->t.tag)
		return call;
	if (call->r.type == P9_RLERROR)
		call->err = (int)call->r.u.rlerror.ecode;
	else if (call->r.type == call->t.type + 1)
		call->err = 0;
	return call;
}

int v9p_rpc(struct v9p *c, struct v9p_call *call)
{
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	struct v9p_call *done;

	if (v9p_submit(c, call))
		probe_fail("virtio-9p: queue full");
	v9p_kick(c);
	while (!(done = v9p_reap(c))) {
		if (rdtsc() > deadline)
			probe_fail("virtio-9p: %s timed out", p9_type_name(call->t.type));
		cpu_relax();
	}
	if (done != call)
		probe_fail("virtio-9p: unexpected completion");
	return call->err;
}

int v9p_version(struct v9p *c, uint32_t msize)
{
	struct v9p_call k = { .t = { .type = P9_TVERSION } };
	int ret;

	k.t.u.version.msize = msize;
	k.t.u.version.version = cstr(P9_VERSION_L);
	ret = v9p_rpc(c, &k);
	if (ret)
		return ret;
	if (k.r.u.version.version.len != 8 ||
	    memcmp(k.r.u.version.version.s, P9_VERSION_L, 8))
		return -1;
	c->msize = k.r.u.version.msize;
	return 0;
}

int v9p_attach(struct v9p *c, uint32_t fid)
{
	struct v9p_call k = { .t = { .type = P9_TATTACH } };

	k.t.u.tattach.fid = fid;
	k.t.u.tattach.afid = P9_NOFID;
	k.t.u.tattach.uname = cstr("probe");
	k.t.u.tattach.aname = cstr("");
	k.t.u.tattach.n_uname = 0;
	return v9p_rpc(c, &k);
}

int v9p_walk(struct v9p *c, uint32_t fid, uint32_t newfid, unsigned int n,
	     const char *const *names, struct p9_qid *last)
{
	struct v9p_call k = { .t = { .type = P9_TWALK } };
	int ret;

	k.t.u.twalk.fid = fid;
	k.t.u.twalk.newfid = newfid;
	k.t.u.twalk.nwname = n;
	for (unsigned int i = 0; i < n && i < P9_MAXWELEM; i++)
		k.t.u.twalk.wname[i] = cstr(names[i]);
	ret = v9p_rpc(c, &k);
	if (ret)
		return ret;
	if (k.r.u.rwalk.nwqid != n)
		return 2;	/* ENOENT: a partial walk */
	if (last && n)
		*last = k.r.u.rwalk.wqid[n - 1];
	return 0;
}

int v9p_lopen(struct v9p *c, uint32_t fid, uint32_t flags)
{
	struct v9p_call k = { .t = { .type = P9_TLOPEN } };

	k.t.u.tlopen.fid = fid;
	k.t.u.tlopen.flags = flags;
	return v9p_rpc(c, &k);
}

int v9p_lcreate(struct v9p *c, uint32_t fid, const char *name, uint32_t flags,
		uint32_t mode)
{
	struct v9p_call k = { .t = { .type = P9_TLCREATE } };

	k.t.u.tlcreate.fid = fid;
	k.t.u.tlcreate.name = cstr(name);
	k.t.u.tlcreate.flags = flags;
	k.t.u.tlcreate.mode = mode;
	return v9p_rpc(c, &k);
}

int v9p_clunk(struct v9p *c, uint32_t fid)
{
	struct v9p_call k = { .t = { .type = P9_TCLUNK } };

	k.t.u.tfid.fid = fid;
	return v9p_rpc(c, &k);
}

int v9p_getattr(struct v9p *c, uint32_t fid, struct p9_msg *r)
{
	struct v9p_call k = { .t = { .type = P9_TGETATTR } };
	int ret;

	k.t.u.tgetattr.fid = fid;
	k.t.u.tgetattr.mask = P9_GETATTR_BASIC;
	ret = v9p_rpc(c, &k);
	if (!ret && r)
		*r = k.r;
	return ret;
}

int v9p_unlinkat(struct v9p *c, uint32_t dfid, const char *name)
{
	struct v9p_call k = { .t = { .type = P9_TUNLINKAT } };

	k.t.u.tunlinkat.dfid = dfid;
	k.t.u.tunlinkat.name = cstr(name);
	return v9p_rpc(c, &k);
}

static int64_t data_call(struct v9p *c, uint8_t type, uint32_t fid,
			 uint64_t off, void *buf, uint32_t len)
{
	struct v9p_call k = { .t = { .type = type } };
	int ret;

	if (type == P9_TWRITE) {
		k.t.u.twrite.fid = fid;
		k.t.u.twrite.offset = off;
		k.t.u.twrite.d = (struct p9_data){ len, NULL };
		k.wdata = buf;
	} else {
		k.t.u.tread.fid = fid;
		k.t.u.tread.offset = off;
		k.t.u.tread.count = len;
		k.rdata = buf;
		k.rdata_len = len;
	}
	ret = v9p_rpc(c, &k);
	if (ret)
		return -ret;
	return type == P9_TWRITE ? k.r.u.rwrite.count : k.rcount;
}

int64_t v9p_read(struct v9p *c, uint32_t fid, uint64_t off, void *buf,
		 uint32_t len)
{
	return data_call(c, P9_TREAD, fid, off, buf, len);
}

int64_t v9p_write(struct v9p *c, uint32_t fid, uint64_t off, const void *buf,
		  uint32_t len)
{
	return data_call(c, P9_TWRITE, fid, off, (void *)buf, len);
}

int64_t v9p_readdir(struct v9p *c, uint32_t fid, uint64_t off, void *buf,
		    uint32_t len)
{
	return data_call(c, P9_TREADDIR, fid, off, buf, len);
}
