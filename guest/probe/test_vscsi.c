/* virtio-scsi tests and benchmark:
 *   test=vscsi   INQUIRY (standard, VPD), READ CAPACITY 10/16, REPORT LUNS,
 *                READ/WRITE 10/16 on split buffers, errors with sense data,
 *                BAD_TARGET, OVERRUN, SYNCHRONIZE CACHE, write-through
 *                (WCE cleared by MODE SELECT, read back), task management
 *                (ABORT TASK with commands in flight, LU and I_T nexus
 *                reset with their unit attention), then random writes and
 *                verified reads at 4k/16k/64k, QD 1 and 32; prints the
 *                pattern left on disk for a host-side check
 *   bench=vscsi  the blk benchmark's jobs plus 16k sequential read/write
 * Options: mode=poll|msix, scsi_dev=N, target=T, lun=L, seed=N,
 * region_off=BYTES, region=BYTES, secs=N (bench, per job),
 * io_timeout_ms=N, indirect=1, event_idx=0, strict_resid=0 (accept a
 * residual that is not buffer minus transferred). */
#include "lib/pattern.h"
#include "lib/probe.h"
#include "virtio_scsi.h"

static struct vscsi hba;
static unsigned int tgt, lun;
static uint32_t block_size;
static uint64_t nblocks;

static struct vscsi *open_hba(void)
{
	bool msix = opt_msix();

	if (vscsi_open(&hba, (unsigned int)opt_u64("scsi_dev", 0), msix) < 0)
		probe_fail("virtio-scsi HBA not usable");
	if (vscsi_job_init(opt_u64("pool", 4 << 20),
			   opt_u64("lat_samples", 1 << 20)) < 0)
		probe_fail("out of memory for I/O buffers");
	tgt = (unsigned int)opt_u64("target", 0);
	lun = (unsigned int)opt_u64("lun", 0);
	return &hba;
}

static void *buf_alloc(size_t n)
{
	void *p = dma_alloc(n, 4096);

	if (!p)
		probe_fail("out of memory");
	return p;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint8_t sense_key(const struct vscsi_io *io)
{
	if (io->sense_len < 3)
		return 0xff;
	return (io->sense[0] & 0x7f) >= 0x72 ? io->sense[1] & 15 : io->sense[2] & 15;
}

static uint8_t sense_asc(const struct vscsi_io *io)
{
	if ((io->sense[0] & 0x7f) >= 0x72)
		return io->sense_len > 2 ? io->sense[2] : 0xff;
	return io->sense_len > 12 ? io->sense[12] : 0xff;
}

static void expect_good(const struct vscsi_io *io, const char *what)
{
	if (io->response != VSCSI_S_OK || io->status != 0)
		probe_fail("%s: response %s status 0x%x sense key %x asc %x", what,
			   vscsi_response_name(io->response), io->status,
			   sense_key(io), sense_asc(io));
}

static void expect_sense(const struct vscsi_io *io, uint8_t key, uint8_t asc,
			 const char *what)
{
	if (io->response != VSCSI_S_OK || io->status != 2 ||
	    sense_key(io) != key || sense_asc(io) != asc)
		probe_fail("%s: response %s status 0x%x sense %x/%x, expected "
			   "CHECK CONDITION %x/%x", what,
			   vscsi_response_name(io->response), io->status,
			   sense_key(io), sense_asc(io), key, asc);
	pr("probe: vscsi %s: CHECK CONDITION key=%x asc=%x\n", what, key, asc);
}

/* TEST UNIT READY until GOOD, accepting unit attentions (power on,
 * reset) on the way, as an initiator does. Returns how many it saw. */
static unsigned int ready(struct vscsi *s)
{
	static const uint8_t tur[6] = { 0 };
	struct vscsi_io io;
	unsigned int ua = 0;

	for (int i = 0; i < 8; i++) {
		vscsi_run(s, &io, tgt, lun, tur, 6, NULL, 0, false);
		if (io.response == VSCSI_S_OK && io.status == 0)
			return ua;
		if (io.status != 2 || sense_key(&io) != 6)
			expect_good(&io, "TEST UNIT READY");
		ua++;
	}
	probe_fail("TEST UNIT READY: still not ready");
}

static void test_inquiry(struct vscsi *s)
{
	uint8_t *b = buf_alloc(4096);
	const uint8_t inq[6] = { 0x12, 0, 0, 0, 96, 0 };
	const uint8_t vpd0[6] = { 0x12, 1, 0x00, 0, 255, 0 };
	const uint8_t vpd80[6] = { 0x12, 1, 0x80, 0, 255, 0 };
	const uint8_t vpd83[6] = { 0x12, 1, 0x83, 0, 255, 0 };
	const uint8_t rc10[10] = { 0x25 };
	const uint8_t rc16[16] = { 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32 };
	const uint8_t luns[12] = { 0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0 };
	char vendor[9] = { 0 }, product[17] = { 0 }, serial[64] = { 0 };
	struct vscsi_io io;
	bool has80 = false, has83 = false, listed = false;
	uint32_t n;

	vscsi_run(s, &io, tgt, lun, inq, 6, b, 96, true);
	expect_good(&io, "INQUIRY");
	if ((b[0] & 0x1f) != 0 || (b[0] >> 5) != 0)
		probe_fail("INQUIRY: peripheral 0x%x, expected a disk", b[0]);
	if (io.resid > 96 - 36)
		probe_fail("INQUIRY: only %u bytes", 96 - io.resid);
	memcpy(vendor, b + 8, 8);
	memcpy(product, b + 16, 16);
	pr("probe: vscsi INQUIRY vendor=\"%s\" product=\"%s\" version=%u "
	   "cmdque=%u\n", vendor, product, b[2], (b[7] >> 1) & 1);

	vscsi_run(s, &io, tgt, lun, vpd0, 6, b, 255, true);
	expect_good(&io, "INQUIRY VPD 0x00");
	for (unsigned int i = 0; i < b[3]; i++) {
		has80 |= b[4 + i] == 0x80;
		has83 |= b[4 + i] == 0x83;
	}
	if (b[1] != 0 || !has83)
		probe_fail("VPD 0x00 does not list 0x83");
	if (has80) {	/* optional (QEMU's scsi-hd has it with serial=) */
		vscsi_run(s, &io, tgt, lun, vpd80, 6, b, 255, true);
		expect_good(&io, "INQUIRY VPD 0x80");
		memcpy(serial, b + 4, b[3] < 63 ? b[3] : 63);
	}
	vscsi_run(s, &io, tgt, lun, vpd83, 6, b, 255, true);
	expect_good(&io, "INQUIRY VPD 0x83");
	if (b[1] != 0x83 || (b[2] << 8 | b[3]) < 4)
		probe_fail("VPD 0x83 without a designator");
	pr("probe: vscsi VPD serial=\"%s\" id_len=%u\n", serial, b[2] << 8 | b[3]);

	vscsi_run(s, &io, tgt, lun, rc10, 10, b, 8, true);
	expect_good(&io, "READ CAPACITY(10)");
	block_size = be32(b + 4);
	nblocks = (uint64_t)be32(b) + 1;
	vscsi_run(s, &io, tgt, lun, rc16, 16, b, 32, true);
	expect_good(&io, "READ CAPACITY(16)");
	if (((uint64_t)be32(b) << 32 | be32(b + 4)) + 1 != nblocks ||
	    be32(b + 8) != block_size)
		probe_fail("READ CAPACITY 10 and 16 disagree");
	if (block_size < 512 || block_size > 4096 || block_size & (block_size - 1))
		probe_fail("block size %u", block_size);
	pr("probe: vscsi capacity blocks=%lu block_size=%u\n", nblocks, block_size);

	vscsi_run(s, &io, tgt, lun, luns, 12, b, 4096, true);
	expect_good(&io, "REPORT LUNS");
	n = be32(b) / 8;
	for (uint32_t i = 0; i < n && i < 500; i++) {
		const uint8_t *l = b + 8 + 8 * i;

		if (((l[0] & 0x3f) << 8 | l[1]) == lun)
			listed = true;
	}
	if (!listed)
		probe_fail("REPORT LUNS does not list LUN %u", lun);
	pr("probe: vscsi REPORT LUNS luns=%u\n", n);
}

static void test_rw_errors(struct vscsi *s, uint64_t seed, uint64_t off)
{
	uint32_t bs = block_size, len = 8 * bs;
	uint8_t *w = buf_alloc(len), *r = buf_alloc(len);
	uint8_t cdb[16];
	struct vscsi_io io;
	uint64_t lba = off / bs;

	/* WRITE(10) split over three segments, READ(16) back */
	pattern_fill(w, off, len, seed);
	memset(cdb, 0, 16);
	cdb[0] = 0x2a;
	cdb[2] = lba >> 24;
	cdb[3] = lba >> 16;
	cdb[4] = lba >> 8;
	cdb[5] = lba;
	cdb[8] = 8;
	io = (struct vscsi_io){ .target = tgt, .lun = lun, .tag = 7, .cdb_len = 10,
				.nseg = 3 };
	memcpy(io.cdb, cdb, 10);
	io.seg[0].p = w;
	io.seg[0].len = bs;
	io.seg[1].p = w + bs;
	io.seg[1].len = 5 * bs;
	io.seg[2].p = w + 6 * bs;
	io.seg[2].len = 2 * bs;
	if (vscsi_submit(s, &io) < 0)
		probe_fail("submit failed");
	vscsi_kick(s);
	if (vscsi_wait(s) != &io)
		probe_fail("unexpected completion");
	expect_good(&io, "WRITE(10) on 3 segments");
	vscsi_rw16(cdb, false, lba, 8);
	vscsi_run(s, &io, tgt, lun, cdb, 16, r, len, true);
	expect_good(&io, "READ(16)");
	if (io.resid || pattern_check(r, off, len, seed) != len)
		probe_fail("READ(16) data differs from WRITE(10)");
	pr("probe: vscsi WRITE(10)/READ(16) %u bytes verified\n", len);

	/* READ(10) of 4 blocks into an 8-block buffer: residual */
	cdb[0] = 0x28;
	memset(cdb + 1, 0, 9);
	cdb[5] = lba;
	cdb[4] = lba >> 8;
	cdb[3] = lba >> 16;
	cdb[2] = lba >> 24;
	cdb[8] = 4;
	vscsi_run(s, &io, tgt, lun, cdb, 10, r, len, true);
	expect_good(&io, "READ(10) short");
	/* strict_resid=0 for QEMU 7.2, which reports the transfer minus the
	 * buffer (negative) instead of the bytes not transferred */
	if (io.resid != 4 * bs && opt_u64("strict_resid", 1))
		probe_fail("residual %u, expected %u", io.resid, 4 * bs);
	/* 8 blocks into a 4-block buffer: overrun, not a partial transfer */
	cdb[8] = 8;
	vscsi_run(s, &io, tgt, lun, cdb, 10, r, 4 * bs, true);
	if (io.response != VSCSI_S_OVERRUN)
		probe_fail("READ(10) into a short buffer: response %s",
			   vscsi_response_name(io.response));
	pr("probe: vscsi residual and OVERRUN ok\n");

	/* past the end: LBA OUT OF RANGE */
	vscsi_rw16(cdb, false, nblocks - 1, 2);
	vscsi_run(s, &io, tgt, lun, cdb, 16, r, 2 * bs, true);
	expect_sense(&io, 5, 0x21, "READ(16) past the end");
	/* an opcode no disk has */
	memset(cdb, 0, 16);
	cdb[0] = 0xff;
	vscsi_run(s, &io, tgt, lun, cdb, 6, NULL, 0, false);
	expect_sense(&io, 5, 0x20, "invalid opcode");
	/* SYNCHRONIZE CACHE(10) */
	memset(cdb, 0, 16);
	cdb[0] = 0x35;
	vscsi_run(s, &io, tgt, lun, cdb, 10, NULL, 0, false);
	expect_good(&io, "SYNCHRONIZE CACHE(10)");
	/* a target that is not there */
	memset(cdb, 0, 16);
	vscsi_run(s, &io, hba.max_target < 255 ? hba.max_target + 1 : 200, 0,
		  cdb, 6, NULL, 0, false);
	if (io.response != VSCSI_S_BAD_TARGET)
		probe_fail("absent target: response %s",
			   vscsi_response_name(io.response));
	pr("probe: vscsi absent target: BAD_TARGET\n");
}

/* The caching mode page's WCE bit, through MODE SENSE(10). */
static bool wce(struct vscsi *s, uint8_t *b)
{
	const uint8_t ms[10] = { 0x5a, 0x08, 0x08, 0, 0, 0, 0, 0, 64, 0 };
	struct vscsi_io io;

	vscsi_run(s, &io, tgt, lun, ms, 10, b, 64, true);
	expect_good(&io, "MODE SENSE(10) caching page");
	if ((b[8] & 0x3f) != 0x08 || b[9] < 10)
		probe_fail("MODE SENSE(10): no caching page");
	return b[10] & 0x04;
}

/* Write-through: clear WCE with MODE SELECT(10), check it reads back,
 * write and verify with it off, then set it again. */
static void test_wce(struct vscsi *s, uint64_t seed, uint64_t off)
{
	uint8_t *b = buf_alloc(4096), *p = buf_alloc(4096);
	struct vscsi_job w = { .name = "writethrough", .write = true, .bs = 16384,
			       .qd = 8, .off = off, .len = 1 << 20, .seed = seed,
			       .target = tgt, .lun = lun, .block_size = block_size };
	struct vscsi_job r = w;
	struct vscsi_io io;
	uint8_t sel[10] = { 0x55, 0x10, 0, 0, 0, 0, 0, 0, 0, 0 };
	uint32_t plen;

	if (!wce(s, b))
		probe_fail("write cache off at start");
	for (int on = 0; on < 2; on++) {
		plen = 8 + 2 + b[9];
		memset(p, 0, 8);		/* mode parameter header, no descriptors */
		memcpy(p + 8, b + 8, plen - 8);
		p[8] &= 0x3f;			/* PS is reserved in MODE SELECT */
		p[10] = on ? p[10] | 0x04 : p[10] & ~0x04;
		sel[8] = plen;
		vscsi_run(s, &io, tgt, lun, sel, 10, p, plen, false);
		expect_good(&io, "MODE SELECT(10) caching page");
		if (wce(s, b) != on)
			probe_fail("WCE=%d did not stick", on);
		pr("probe: vscsi MODE SELECT WCE=%d: read back\n", on);
		if (on)
			break;
		vscsi_job_run(s, &w);
		r.name = "writethrough-verify";
		r.write = false;
		r.verify = true;
		vscsi_job_run(s, &r);
		pr("probe: vscsi write-through writes=%lu verified\n", w.ios);
	}
}

static void expect_tmf(uint8_t got, uint8_t want, const char *what)
{
	if (got != want)
		probe_fail("%s: %s, expected %s", what, vscsi_response_name(got),
			   vscsi_response_name(want));
	pr("probe: vscsi TMF %s: %s\n", what, vscsi_response_name(got));
}

static void test_tmf(struct vscsi *s, uint64_t seed, uint64_t off)
{
	enum { N = 16 };
	static struct vscsi_io io[N];
	uint32_t len = 65536;
	uint8_t *buf = buf_alloc((uint64_t)N * len);
	unsigned int ok = 0, aborted = 0;
	struct vscsi_job w = { .name = "tmf-fill", .write = true, .bs = len,
			       .qd = 8, .off = off, .len = (uint64_t)N * len,
			       .seed = seed, .target = tgt, .lun = lun,
			       .block_size = block_size };
	unsigned int uas;

	expect_tmf(vscsi_tmf(s, VSCSI_TMF_ABORT_TASK, tgt, lun, 0xdead),
		   VSCSI_S_OK, "ABORT TASK (no such task)");
	vscsi_job_run(s, &w);
	/* N reads in flight, then abort one of them: each comes back either
	 * done (and verified) or ABORTED, never lost */
	for (unsigned int i = 0; i < N; i++) {
		io[i] = (struct vscsi_io){ .target = tgt, .lun = lun, .tag = 1000 + i,
					   .cdb_len = 16, .data_in = true, .nseg = 1 };
		vscsi_rw16(io[i].cdb, false, (off + (uint64_t)i * len) / block_size,
			   len / block_size);
		io[i].seg[0].p = buf + (uint64_t)i * len;
		io[i].seg[0].len = len;
		if (vscsi_submit(s, &io[i]) < 0)
			probe_fail("submit failed");
	}
	vscsi_kick(s);
	expect_tmf(vscsi_tmf(s, VSCSI_TMF_ABORT_TASK, tgt, lun, 1000 + N - 1),
		   VSCSI_S_OK, "ABORT TASK (in flight)");
	for (unsigned int i = 0; i < N; i++) {
		struct vscsi_io *d = vscsi_wait(s);
		unsigned int k = d - io;

		if (d->response == VSCSI_S_ABORTED) {
			aborted++;
			continue;
		}
		expect_good(d, "READ beside an ABORT TASK");
		if (pattern_check(d->seg[0].p, off + (uint64_t)k * len, len, seed) != len)
			probe_fail("READ beside an ABORT TASK: data differs");
		ok++;
	}
	pr("probe: vscsi ABORT TASK with %u in flight: completed=%u aborted=%u\n",
	   N, ok, aborted);

	expect_tmf(vscsi_tmf(s, VSCSI_TMF_LOGICAL_UNIT_RESET, tgt, lun, 0),
		   VSCSI_S_OK, "LOGICAL UNIT RESET");
	uas = ready(s);
	if (!uas)
		probe_fail("no unit attention after a LOGICAL UNIT RESET");
	expect_tmf(vscsi_tmf(s, VSCSI_TMF_I_T_NEXUS_RESET, tgt, lun, 0),
		   VSCSI_S_OK, "I_T NEXUS RESET");
	uas = ready(s);
	if (!uas)
		probe_fail("no unit attention after an I_T NEXUS RESET");
	expect_tmf(vscsi_tmf(s, VSCSI_TMF_ABORT_TASK_SET, tgt, lun, 0),
		   VSCSI_S_OK, "ABORT TASK SET");
	expect_tmf(vscsi_tmf(s, VSCSI_TMF_ABORT_TASK,
			     hba.max_target < 255 ? hba.max_target + 1 : 200, 0, 1),
		   VSCSI_S_BAD_TARGET, "ABORT TASK on an absent target");
}

static void test_vscsi(void)
{
	struct vscsi *s = open_hba();
	uint64_t seed = opt_u64("seed", 1), off, len, phase = 0;
	static const uint32_t sizes[3] = { 4096, 16384, 65536 };
	static const unsigned int depths[2] = { 1, 32 };

	pr("probe: vscsi unit attentions at start: %u\n", ready(s));
	test_inquiry(s);
	opt_region(nblocks * block_size, &off, &len);
	test_rw_errors(s, seed + 50, off);
	test_wce(s, seed + 55, off);
	test_tmf(s, seed + 60, off);
	for (unsigned int i = 0; i < 3; i++) {
		for (unsigned int q = 0; q < 2; q++) {
			struct vscsi_job w = {
				.name = "randwrite", .write = true,
				.bs = sizes[i], .qd = depths[q], .random = true,
				.off = off, .len = len, .target = tgt, .lun = lun,
				.block_size = block_size,
				.seed = seed + 100 + phase++,
			};
			struct vscsi_job r = w;

			r.name = "randread";
			r.write = false;
			r.verify = true;
			vscsi_job_run(s, &w);
			vscsi_job_run(s, &r);
			pr("probe: vscsi phase bs=%u qd=%u writes=%lu reads=%lu "
			   "verified seed=%lu\n", w.bs, w.qd, w.ios, r.ios, w.seed);
		}
	}
	if (s->msix && !s->irqs_seen)
		probe_fail("MSI-X mode but no interrupt was seen");
	pr("probe: vscsi pattern offset=%lu len=%lu seed=%lu\n", off, len,
	   seed + 100 + phase - 1);
}

static void bench_vscsi(void)
{
	struct vscsi *s = open_hba();
	uint64_t seed = opt_u64("seed", 3), off, len;
	uint64_t ticks = ms_to_ticks(opt_u64("secs", 3) * 1000);
	struct vscsi_job jobs[] = {
		{ .name = "randread-4k-qd1", .bs = 4096, .qd = 1, .random = true },
		{ .name = "randread-4k-qd32", .bs = 4096, .qd = 32, .random = true },
		{ .name = "randwrite-4k-qd32", .write = true, .bs = 4096, .qd = 32,
		  .random = true },
		{ .name = "seqread-64k-qd16", .bs = 65536, .qd = 16 },
		{ .name = "seqwrite-64k-qd16", .write = true, .bs = 65536, .qd = 16 },
		{ .name = "seqread-16k-qd16", .bs = 16384, .qd = 16 },
		{ .name = "seqwrite-16k-qd16", .write = true, .bs = 16384, .qd = 16 },
	};
	struct vscsi_job fill = { .name = "prefill", .write = true, .bs = 65536,
				  .qd = 16 };

	ready(s);
	test_inquiry(s);
	opt_region(nblocks * block_size, &off, &len);
	fill.off = off;
	fill.len = len;
	fill.seed = seed;
	fill.target = tgt;
	fill.lun = lun;
	fill.block_size = block_size;
	vscsi_job_run(s, &fill);
	pr("probe: bench region offset=%lu len=%lu secs=%lu mode=%s\n", off, len,
	   opt_u64("secs", 3), s->msix ? "msix" : "poll");
	for (unsigned int i = 0; i < ARRAY_SIZE(jobs); i++) {
		jobs[i].off = off;
		jobs[i].len = len;
		jobs[i].seed = seed;
		jobs[i].verify = true;
		jobs[i].max_ticks = ticks;
		jobs[i].target = tgt;
		jobs[i].lun = lun;
		jobs[i].block_size = block_size;
		vscsi_job_run(s, &jobs[i]);
		vscsi_job_report(&jobs[i]);
	}
	pr("probe: vscsi irqs=%lu kicks=%lu kicks_skipped=%lu\n", s->irqs_seen,
	   s->reqq.kicks, s->reqq.kicks_skipped);
}

PROBE_TEST(vscsi, "vscsi", test_vscsi,
	   "virtio-scsi: SPC/SBC commands, errors, TMF, random I/O verified");
PROBE_TEST(bench_vscsi, "bench-vscsi", bench_vscsi,
	   "virtio-scsi benchmark (secs= per job, mode=poll|msix)");
