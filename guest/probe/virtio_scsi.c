/* virtio-scsi driver and job engine for the probe. */
#include "virtio_scsi.h"

#include "lib/pattern.h"
#include "lib/probe.h"

#define HDR_LEN (19 + VSCSI_CDB_SIZE)
#define RESP_LEN (12 + VSCSI_SENSE_SIZE)

struct vscsi_slot {
	uint8_t hdr[HDR_LEN];
	uint8_t pad0[64 - HDR_LEN % 64];
	uint8_t resp[RESP_LEN];
	uint8_t pad1[128 - RESP_LEN];
	struct virtq_desc table[VSCSI_MAX_SEGS + 2];	/* indirect mode */
};

struct vscsi_ctl {
	uint32_t type, subtype;
	uint8_t lun[8];
	uint64_t tag;
	uint8_t response;
	uint8_t pad[7];
};

static uint32_t cfg32(struct vscsi *s, unsigned int off)
{
	return off + 4 <= s->vp.devcfg_len ? mmio_read32(s->vp.devcfg + off) : 0;
}

static void lun_field(uint8_t *l, unsigned int target, unsigned int lun)
{
	memset(l, 0, 8);
	l[0] = 1;
	l[1] = target;
	l[2] = 0x40 | lun >> 8;
	l[3] = lun;
}

const char *vscsi_response_name(uint8_t r)
{
	switch (r) {
	case VSCSI_S_OK: return "OK";
	case VSCSI_S_OVERRUN: return "OVERRUN";
	case VSCSI_S_ABORTED: return "ABORTED";
	case VSCSI_S_BAD_TARGET: return "BAD_TARGET";
	case VSCSI_S_RESET: return "RESET";
	case VSCSI_S_FAILURE: return "FAILURE";
	case VSCSI_S_FUNCTION_SUCCEEDED: return "FUNCTION_SUCCEEDED";
	case VSCSI_S_FUNCTION_REJECTED: return "FUNCTION_REJECTED";
	case VSCSI_S_INCORRECT_LUN: return "INCORRECT_LUN";
	default: return "other";
	}
}

int vscsi_open(struct vscsi *s, unsigned int index, bool msix)
{
	struct pci_dev *pci = pci_find(VIRTIO_VENDOR,
				       VIRTIO_DEV_MODERN(VIRTIO_ID_SCSI),
				       0x1004, index);
	uint64_t want = VIRTIO_F_EVENT_IDX;
	uint16_t vec = VIRTIO_MSI_NO_VECTOR;

	memset(s, 0, sizeof(*s));
	if (!pci) {
		pr("probe: no virtio-scsi device #%u\n", index);
		return -1;
	}
	if (virtio_pci_init(&s->vp, pci) < 0)
		return -1;
	if (opt_u64("event_idx", 1) == 0)
		want &= ~VIRTIO_F_EVENT_IDX;
	if (opt_u64("indirect", 0))
		want |= VIRTIO_F_INDIRECT_DESC;
	if (virtio_pci_negotiate(&s->vp, want) < 0)
		return -1;
	if (!s->vp.devcfg || s->vp.devcfg_len < 36) {
		pr("probe: virtio-scsi: no device configuration\n");
		return -1;
	}
	s->num_queues = cfg32(s, 0);
	s->seg_max = cfg32(s, 4);
	s->max_sectors = cfg32(s, 8);
	s->cmd_per_lun = cfg32(s, 12);
	s->max_target = (uint16_t)(cfg32(s, 28) >> 16);
	s->max_lun = cfg32(s, 32);
	/* the sizes this driver lays out its headers with */
	mmio_write32(s->vp.devcfg + 20, VSCSI_SENSE_SIZE);
	mmio_write32(s->vp.devcfg + 24, VSCSI_CDB_SIZE);
	if (cfg32(s, 20) != VSCSI_SENSE_SIZE || cfg32(s, 24) != VSCSI_CDB_SIZE) {
		pr("probe: virtio-scsi: sense_size/cdb_size not accepted\n");
		return -1;
	}
	s->indirect = virtio_has(&s->vp, VIRTIO_F_INDIRECT_DESC);
	if (opt_u64("indirect", 0) && !s->indirect) {
		pr("probe: virtio-scsi: indirect=1 but not offered\n");
		return -1;
	}
	s->msix = msix;
	if (msix) {
		if (virtio_pci_msix_enable(&s->vp) < 0 ||
		    virtio_pci_msix_route(&s->vp, 0) < 0)
			return -1;
		vec = 0;
	}
	if (virtq_setup(&s->vp, &s->ctrlq, 0, 64, VIRTIO_MSI_NO_VECTOR) < 0 ||
	    virtq_setup(&s->vp, &s->reqq, 2, 256, vec) < 0) {
		pr("probe: virtio-scsi: queue setup failed\n");
		return -1;
	}
	virtq_irq_disable(&s->ctrlq);
	if (!msix)
		virtq_irq_disable(&s->reqq);
	s->slots = dma_alloc(sizeof(struct vscsi_slot) * VSCSI_MAX_QD, 64);
	s->ctl = dma_alloc(sizeof(*s->ctl), 64);
	if (!s->slots || !s->ctl)
		return -1;
	for (unsigned int i = 0; i < VSCSI_MAX_QD; i++)
		s->free_slots[i] = VSCSI_MAX_QD - 1 - i;
	s->nfree = VSCSI_MAX_QD;
	virtio_pci_driver_ok(&s->vp);
	if (virtio_pci_status(&s->vp) & VIRTIO_STATUS_NEEDS_RESET) {
		pr("probe: virtio-scsi: device needs reset after DRIVER_OK\n");
		return -1;
	}
	pr("probe: vscsi dev=%02x:%02x.%x num_queues=%u seg_max=%u "
	   "max_sectors=%u cmd_per_lun=%u max_target=%u max_lun=%u "
	   "queue_size=%u features=0x%lx mode=%s indirect=%u\n", pci->bus,
	   pci->dev, pci->fn, s->num_queues, s->seg_max, s->max_sectors,
	   s->cmd_per_lun, s->max_target, s->max_lun, s->reqq.size,
	   s->vp.features, msix ? "msix" : "poll", s->indirect);
	return 0;
}

int vscsi_submit(struct vscsi *s, struct vscsi_io *io)
{
	struct virtq_buf bufs[VSCSI_MAX_SEGS + 2];
	struct vscsi_slot *sl;
	unsigned int n = 0;
	int head;

	if (!s->nfree || io->nseg > VSCSI_MAX_SEGS || io->cdb_len > 16)
		return -1;
	io->slot = s->free_slots[s->nfree - 1];
	sl = &s->slots[io->slot];
	memset(sl->hdr, 0, HDR_LEN);
	lun_field(sl->hdr, io->target, io->lun);
	memcpy(sl->hdr + 8, &io->tag, 8);
	memcpy(sl->hdr + 19, io->cdb, io->cdb_len);
	sl->resp[11] = 0xff;
	bufs[n++] = (struct virtq_buf){ sl->hdr, HDR_LEN, false };
	if (!io->data_in)
		for (unsigned int i = 0; i < io->nseg; i++)
			bufs[n++] = (struct virtq_buf){ io->seg[i].p,
							io->seg[i].len, false };
	bufs[n++] = (struct virtq_buf){ sl->resp, RESP_LEN, true };
	if (io->data_in)
		for (unsigned int i = 0; i < io->nseg; i++)
			bufs[n++] = (struct virtq_buf){ io->seg[i].p,
							io->seg[i].len, true };
	io->t_submit = rdtsc();
	head = s->indirect ? virtq_add_indirect(&s->reqq, sl->table, bufs, n)
			   : virtq_add(&s->reqq, bufs, n);
	if (head < 0)
		return -1;
	s->nfree--;
	s->io_of_head[head] = io;
	s->inflight++;
	return 0;
}

void vscsi_kick(struct vscsi *s)
{
	virtq_kick(&s->reqq);
}

struct vscsi_io *vscsi_reap(struct vscsi *s)
{
	struct vscsi_io *io;
	struct vscsi_slot *sl;
	uint32_t len;
	int head = virtq_get_used(&s->reqq, &len);

	if (head < 0)
		return NULL;
	io = s->io_of_head[head];
	s->io_of_head[head] = NULL;
	if (!io)
		probe_fail("virtio-scsi: completion for idle head %d", head);
	io->t_done = rdtsc();
	sl = &s->slots[io->slot];
	memcpy(&io->sense_len, sl->resp, 4);
	memcpy(&io->resid, sl->resp + 4, 4);
	io->status = sl->resp[10];
	io->response = sl->resp[11];
	if (io->sense_len > VSCSI_SENSE_SIZE)
		probe_fail("virtio-scsi: sense_len %u > sense_size", io->sense_len);
	memcpy(io->sense, sl->resp + 12, io->sense_len);
	io->written = len;
	s->free_slots[s->nfree++] = io->slot;
	s->inflight--;
	return io;
}

struct vscsi_io *vscsi_wait(struct vscsi *s)
{
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	struct vscsi_io *io;

	for (;;) {
		uint64_t seen = irq_count[0];

		io = vscsi_reap(s);
		if (io)
			return io;
		if (s->msix) {
			while (irq_count[0] == seen && rdtsc() < deadline)
				cpu_relax();
			s->irqs_seen += irq_count[0] - seen;
		} else {
			cpu_relax();
		}
		if (rdtsc() > deadline)
			probe_fail("virtio-scsi: no completion within %lu ms "
				   "(%u in flight, device status 0x%x)",
				   opt_u64("io_timeout_ms", 10000), s->inflight,
				   virtio_pci_status(&s->vp));
	}
}

void vscsi_run(struct vscsi *s, struct vscsi_io *io, unsigned int target,
	       unsigned int lun, const uint8_t *cdb, unsigned int cdb_len,
	       void *buf, uint32_t len, bool data_in)
{
	io->target = target;
	io->lun = lun;
	io->tag = 1;
	memcpy(io->cdb, cdb, cdb_len);
	io->cdb_len = cdb_len;
	io->data_in = data_in;
	io->nseg = len ? 1 : 0;
	io->seg[0].p = buf;
	io->seg[0].len = len;
	if (vscsi_submit(s, io) < 0)
		probe_fail("virtio-scsi: queue full on a synchronous command");
	vscsi_kick(s);
	if (vscsi_wait(s) != io)
		probe_fail("virtio-scsi: unexpected completion");
}

uint8_t vscsi_tmf(struct vscsi *s, uint32_t subtype, unsigned int target,
		  unsigned int lun, uint64_t tag)
{
	struct vscsi_ctl *c = s->ctl;
	struct virtq_buf b[2] = { { c, 24, false }, { &c->response, 1, true } };
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	uint32_t len;
	int head;

	c->type = 0;
	c->subtype = subtype;
	lun_field(c->lun, target, lun);
	c->tag = tag;
	c->response = 0xff;
	if (virtq_add(&s->ctrlq, b, 2) < 0)
		probe_fail("virtio-scsi: control queue full");
	virtq_kick(&s->ctrlq);
	while ((head = virtq_get_used(&s->ctrlq, &len)) < 0) {
		if (rdtsc() > deadline)
			probe_fail("virtio-scsi: TMF %u not answered", subtype);
		cpu_relax();
	}
	if (len != 1)
		probe_fail("virtio-scsi: TMF answer of %u bytes", len);
	return c->response;
}

void vscsi_rw16(uint8_t *cdb, bool write, uint64_t lba, uint32_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = write ? 0x8a : 0x88;
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = lba >> (56 - 8 * i);
	for (int i = 0; i < 4; i++)
		cdb[10 + i] = blocks >> (24 - 8 * i);
}

/* ---- job engine ---- */

static uint8_t *pool;
static uint64_t pool_size;
static uint32_t *lat_buf;
static uint64_t lat_cap;
static struct vscsi_io ios[VSCSI_MAX_QD];

int vscsi_job_init(uint64_t pool_bytes, uint64_t lat_samples)
{
	pool = dma_alloc(pool_bytes, 4096);
	lat_buf = dma_alloc(lat_samples * 4, 64);
	if (!pool || !lat_buf)
		return -1;
	pool_size = pool_bytes;
	lat_cap = lat_samples;
	return 0;
}

static void job_check(struct vscsi_job *j, struct vscsi_io *io)
{
	if (io->response != VSCSI_S_OK || io->status != 0)
		probe_fail("job %s: %s at offset %lu: response %s status 0x%x "
			   "sense %x/%x/%x", j->name, j->write ? "write" : "read",
			   io->disk_off, vscsi_response_name(io->response),
			   io->status, io->sense_len > 2 ? io->sense[2] & 15 : 0,
			   io->sense_len > 12 ? io->sense[12] : 0,
			   io->sense_len > 13 ? io->sense[13] : 0);
	if (io->resid)
		probe_fail("job %s: residual %u", j->name, io->resid);
	if (j->verify && !j->write) {
		size_t bad = pattern_check(io->user, io->disk_off, j->bs, j->seed);

		if (bad != j->bs)
			probe_fail("job %s: data mismatch at disk offset %lu",
				   j->name, io->disk_off + bad);
	}
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

void vscsi_job_run(struct vscsi *s, struct vscsi_job *j)
{
	uint64_t n = j->len / j->bs, issued = 0, done = 0, rng = j->seed + 1;
	uint64_t t0, deadline;
	struct vscsi_io *freel[VSCSI_MAX_QD];
	unsigned int nfree = j->qd;
	uint64_t stride, start;
	bool stop = false;

	if (!j->bs || !j->block_size || j->len % j->bs || j->bs % j->block_size ||
	    j->off % j->block_size || !n)
		probe_fail("job %s: bad geometry", j->name);
	/* (a request takes 3 descriptors, or 1 through an indirect table) */
	if (!j->qd || j->qd > VSCSI_MAX_QD ||
	    j->qd * (s->indirect ? 1u : 3u) > s->reqq.size ||
	    (uint64_t)j->qd * j->bs > pool_size)
		probe_fail("job %s: qd %u x bs %u does not fit", j->name, j->qd,
			   j->bs);
	/* One random pass visits every block once: i -> stride * i + start
	 * (mod n) is a permutation when stride and n are coprime. */
	stride = 1000003 % n;
	while (!stride || gcd(stride, n) != 1)
		stride++;
	start = rand64(&rng) % n;
	lat_init(&j->lat, lat_buf, lat_cap);
	for (unsigned int i = 0; i < j->qd; i++) {
		ios[i].user = pool + (uint64_t)i * j->bs;
		freel[i] = &ios[i];
	}
	t0 = rdtsc();
	deadline = t0 + j->max_ticks;
	for (;;) {
		while (!stop && nfree && (j->max_ticks || issued < n)) {
			struct vscsi_io *io = freel[--nfree];
			uint64_t blk = issued % n;

			if (j->random)
				blk = j->max_ticks ? rand64(&rng) % n :
				      (stride * issued + start) % n;
			uint64_t off = j->off + blk * j->bs;

			if (j->write)
				pattern_fill(io->user, off, j->bs, j->seed);
			io->target = j->target;
			io->lun = j->lun;
			io->tag = issued;
			vscsi_rw16(io->cdb, j->write, off / j->block_size,
				   j->bs / j->block_size);
			io->cdb_len = 16;
			io->data_in = !j->write;
			io->nseg = 1;
			io->seg[0].p = io->user;
			io->seg[0].len = j->bs;
			io->disk_off = off;
			if (vscsi_submit(s, io) < 0)
				probe_fail("job %s: submit failed", j->name);
			issued++;
		}
		vscsi_kick(s);
		if (done == issued)
			break;
		struct vscsi_io *io = vscsi_wait(s);

		do {
			lat_add(&j->lat, io->t_done - io->t_submit);
			job_check(j, io);
			done++;
			freel[nfree++] = io;
		} while ((io = vscsi_reap(s)));
		if (j->max_ticks && rdtsc() >= deadline)
			stop = true;
	}
	j->ticks = rdtsc() - t0;
	j->ios = done;
	j->bytes = done * j->bs;
}

void vscsi_job_report(struct vscsi_job *j)
{
	job_report(j->name, j->ticks, j->ios, j->bytes, &j->lat);
}
