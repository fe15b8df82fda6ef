/* virtio-blk driver for the probe. */
#include "virtio_blk.h"

#include "lib/probe.h"

struct vblk_slot {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
	uint8_t status;
	uint8_t pad[15];
	struct virtq_desc table[VBLK_MAX_SEGS + 2];	/* indirect mode */
};

static uint32_t cfg32(struct vblk *b, unsigned int off)
{
	return off + 4 <= b->vp.devcfg_len ? mmio_read32(b->vp.devcfg + off) : 0;
}

int vblk_open(struct vblk *b, unsigned int index, bool msix, unsigned int nq)
{
	struct pci_dev *pci = pci_find(VIRTIO_VENDOR,
				       VIRTIO_DEV_MODERN(VIRTIO_ID_BLOCK),
				       0x1001, index);
	uint64_t want = VIRTIO_BLK_F_SIZE_MAX | VIRTIO_BLK_F_SEG_MAX |
			VIRTIO_BLK_F_RO | VIRTIO_BLK_F_BLK_SIZE |
			VIRTIO_BLK_F_FLUSH | VIRTIO_BLK_F_TOPOLOGY |
			VIRTIO_BLK_F_MQ | VIRTIO_BLK_F_DISCARD |
			VIRTIO_BLK_F_WRITE_ZEROES | VIRTIO_F_EVENT_IDX;
	uint16_t vec = VIRTIO_MSI_NO_VECTOR;

	memset(b, 0, sizeof(*b));
	if (!pci) {
		pr("probe: no virtio-blk device #%u\n", index);
		return -1;
	}
	if (virtio_pci_init(&b->vp, pci) < 0)
		return -1;
	if (opt_u64("event_idx", 1) == 0)
		want &= ~VIRTIO_F_EVENT_IDX;
	if (opt_u64("indirect", 0))
		want |= VIRTIO_F_INDIRECT_DESC;
	if (virtio_pci_negotiate(&b->vp, want) < 0)
		return -1;
	if (!b->vp.devcfg || b->vp.devcfg_len < 8) {
		pr("probe: virtio-blk: no device configuration\n");
		return -1;
	}
	b->capacity = mmio_read64(b->vp.devcfg);
	if (virtio_has(&b->vp, VIRTIO_BLK_F_SIZE_MAX))
		b->size_max = cfg32(b, 8);
	if (virtio_has(&b->vp, VIRTIO_BLK_F_SEG_MAX))
		b->seg_max = cfg32(b, 12);
	b->blk_size = virtio_has(&b->vp, VIRTIO_BLK_F_BLK_SIZE) ? cfg32(b, 20)
								  : 512;
	/* num_queues is the u16 at 34 (after writeback and a pad byte). */
	b->num_queues = virtio_has(&b->vp, VIRTIO_BLK_F_MQ)
				? (uint16_t)(cfg32(b, 32) >> 16) : 1;
	if (virtio_has(&b->vp, VIRTIO_BLK_F_DISCARD)) {
		b->max_discard_sectors = cfg32(b, 36);
		b->max_discard_seg = cfg32(b, 40);
	}
	if (virtio_has(&b->vp, VIRTIO_BLK_F_WRITE_ZEROES)) {
		b->max_wz_sectors = cfg32(b, 48);
		b->max_wz_seg = cfg32(b, 52);
	}
	b->ro = virtio_has(&b->vp, VIRTIO_BLK_F_RO);
	b->indirect = virtio_has(&b->vp, VIRTIO_F_INDIRECT_DESC);
	if (opt_u64("indirect", 0) && !b->indirect) {
		pr("probe: virtio-blk: indirect=1 but the device does not offer "
		   "VIRTIO_F_INDIRECT_DESC\n");
		return -1;
	}
	b->msix = msix;
	if (!nq || nq > VBLK_MAX_QUEUES || nq > b->num_queues) {
		pr("probe: virtio-blk: queues=%u: device has %u (probe max %u)\n",
		   nq, b->num_queues, VBLK_MAX_QUEUES);
		return -1;
	}
	b->nq = nq;
	if (msix && virtio_pci_msix_enable(&b->vp) < 0)
		return -1;
	for (unsigned int q = 0; q < nq; q++) {
		if (msix) {
			if (virtio_pci_msix_route(&b->vp, q) < 0)
				return -1;
			vec = (uint16_t)q;
		}
		if (virtq_setup(&b->vp, &b->vq[q], (uint16_t)q, 256, vec) < 0) {
			pr("probe: virtio-blk: queue %u setup failed\n", q);
			return -1;
		}
		if (!msix)
			virtq_irq_disable(&b->vq[q]);
	}
	b->slots = dma_alloc(sizeof(struct vblk_slot) * VBLK_MAX_QD, 64);
	if (!b->slots)
		return -1;
	for (unsigned int i = 0; i < VBLK_MAX_QD; i++)
		b->free_slots[i] = VBLK_MAX_QD - 1 - i;
	b->nfree = VBLK_MAX_QD;
	virtio_pci_driver_ok(&b->vp);
	if (virtio_pci_status(&b->vp) & VIRTIO_STATUS_NEEDS_RESET) {
		pr("probe: virtio-blk: device needs reset after DRIVER_OK\n");
		return -1;
	}
	pr("probe: blk dev=%02x:%02x.%x capacity=%lu blk_size=%u seg_max=%u "
	   "size_max=%u queues=%u queue_size=%u ro=%u features=0x%lx "
	   "mode=%s indirect=%u queues_used=%u\n", pci->bus, pci->dev, pci->fn,
	   b->capacity, b->blk_size, b->seg_max, b->size_max, b->num_queues,
	   b->vq[0].size, b->ro, b->vp.features, msix ? "msix" : "poll",
	   b->indirect, nq);
	return 0;
}

int vblk_submit(struct vblk *b, struct vblk_io *io)
{
	struct virtq_buf bufs[VBLK_MAX_SEGS + 2];
	struct vblk_slot *s;
	struct virtq *vq;
	bool dev_writes = io->type == VIRTIO_BLK_T_IN ||
			  io->type == VIRTIO_BLK_T_GET_ID;
	unsigned int n = 0;
	int head;

	if (!b->nfree || io->nseg > VBLK_MAX_SEGS)
		return -1;
	io->slot = b->free_slots[b->nfree - 1];
	s = &b->slots[io->slot];
	s->type = io->type;
	s->reserved = 0;
	s->sector = io->sector;
	s->status = 0xff;
	bufs[n++] = (struct virtq_buf){ s, 16, false };
	for (unsigned int i = 0; i < io->nseg; i++)
		bufs[n++] = (struct virtq_buf){ io->seg[i].p, io->seg[i].len,
						dev_writes };
	bufs[n++] = (struct virtq_buf){ &s->status, 1, true };
	io->queue = b->next_q;
	vq = &b->vq[io->queue];
	io->t_submit = rdtsc();
	head = b->indirect ? virtq_add_indirect(vq, s->table, bufs, n)
			   : virtq_add(vq, bufs, n);
	if (head < 0)
		return -1;
	b->next_q = (b->next_q + 1) % b->nq;
	b->nfree--;
	b->io_of_head[io->queue][head] = io;
	b->inflight++;
	return 0;
}

void vblk_kick(struct vblk *b)
{
	for (unsigned int q = 0; q < b->nq; q++)
		virtq_kick(&b->vq[q]);
}

unsigned int vblk_min_queue_size(const struct vblk *b)
{
	unsigned int m = b->vq[0].size;

	for (unsigned int q = 1; q < b->nq; q++)
		m = MIN(m, b->vq[q].size);
	return m;
}

void vblk_kick_stats(const struct vblk *b, uint64_t *kicks, uint64_t *skipped,
		     uint64_t *ticks)
{
	*kicks = *skipped = *ticks = 0;
	for (unsigned int q = 0; q < b->nq; q++) {
		*kicks += b->vq[q].kicks;
		*skipped += b->vq[q].kicks_skipped;
		*ticks += b->vq[q].kick_ticks;
	}
}

/* io completed: counted in b->done by its kind (GET_ID and unknown types
 * are not block I/O and are not counted). */
static void count_done(struct vblk *b, const struct vblk_io *io)
{
	struct vblk_counts *c;
	uint64_t bytes = 0;
	int k;

	switch (io->type) {
	case VIRTIO_BLK_T_IN: k = VBLK_K_READ; break;
	case VIRTIO_BLK_T_OUT: k = VBLK_K_WRITE; break;
	case VIRTIO_BLK_T_FLUSH: k = VBLK_K_FLUSH; break;
	case VIRTIO_BLK_T_DISCARD: k = VBLK_K_DISCARD; break;
	case VIRTIO_BLK_T_WRITE_ZEROES: k = VBLK_K_WRITE_ZEROES; break;
	default: return;
	}
	c = &b->done[k];
	if (io->status != VIRTIO_BLK_S_OK) {
		c->failed++;
		return;
	}
	for (unsigned int i = 0; i < io->nseg; i++) {
		const struct virtio_blk_dwz *r = io->seg[i].p;

		if (k == VBLK_K_DISCARD || k == VBLK_K_WRITE_ZEROES)
			for (uint32_t n = 0; n < io->seg[i].len / sizeof(*r); n++)
				bytes += (uint64_t)r[n].num_sectors * 512;
		else
			bytes += io->seg[i].len;
	}
	c->ok++;
	c->bytes += bytes;
}

struct vblk_io *vblk_reap(struct vblk *b)
{
	struct vblk_io *io;
	uint32_t len;
	unsigned int q;
	int head = -1;

	for (q = 0; q < b->nq; q++) {
		head = virtq_get_used(&b->vq[q], &len);
		if (head >= 0)
			break;
	}
	if (head < 0)
		return NULL;
	io = b->io_of_head[q][head];
	b->io_of_head[q][head] = NULL;
	if (!io)
		probe_fail("virtio-blk: completion for idle head %d", head);
	io->t_done = rdtsc();
	io->status = b->slots[io->slot].status;
	io->written = len;
	b->free_slots[b->nfree++] = io->slot;
	b->inflight--;
	count_done(b, io);
	return io;
}

static uint64_t irqs_total(const struct vblk *b)
{
	uint64_t n = 0;

	for (unsigned int q = 0; q < b->nq; q++)
		n += irq_count[q];
	return n;
}

struct vblk_io *vblk_wait(struct vblk *b)
{
	static uint64_t timeout_ticks;
	uint64_t deadline;
	struct vblk_io *io;

	if (!timeout_ticks)
		timeout_ticks = ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	deadline = rdtsc() + timeout_ticks;
	for (;;) {
		uint64_t seen = irqs_total(b), all = irq_total, now;

		io = vblk_reap(b);
		if (io)
			return io;
		if (b->msix && b->hlt) {
			/* Sleeps until any interrupt: the device's, or the
			 * watchdog tick that lets the timeout below fire. */
			sys_wait_irq(all);
			b->irqs_seen += irqs_total(b) - seen;
		} else if (b->msix) {
			/* Sleep-free wait: the CPL 0 handler bumps the
			 * counters; recheck the rings after each interrupt. */
			while ((now = irqs_total(b)) == seen &&
			       rdtsc() < deadline)
				cpu_relax();
			b->irqs_seen += now - seen;
		} else {
			cpu_relax();
		}
		if (rdtsc() > deadline)
			probe_fail("virtio-blk: no completion within %lu ms "
				   "(%u in flight, device status 0x%x)",
				   opt_u64("io_timeout_ms", 10000), b->inflight,
				   virtio_pci_status(&b->vp));
	}
}

uint8_t vblk_rw(struct vblk *b, uint32_t type, uint64_t sector, void *buf,
		uint32_t len)
{
	struct vblk_io io, *done;

	vblk_io_init(&io, type, sector, buf, len);
	if (vblk_submit(b, &io) < 0)
		probe_fail("virtio-blk: queue full on a synchronous request");
	vblk_kick(b);
	done = vblk_wait(b);
	if (done != &io)
		probe_fail("virtio-blk: unexpected completion");
	return io.status;
}
