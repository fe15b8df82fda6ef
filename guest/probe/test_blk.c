/* virtio-blk tests and benchmark:
 *   test=blk        every request type with data checks, error statuses,
 *                   random writes then reads at 4k/16k/64k, QD 1 and 32;
 *                   prints the pattern left on disk for a host-side check
 *   test=blk-ro     a read-only disk refuses writes (IOERR); with
 *                   pattern_seed=N, the region holds that seed's pattern
 *   test=blk-flush  writes, FLUSH, prints a marker, waits to be killed
 *   bench=blk       4k randread QD1/QD32, 4k randwrite QD32, 64k seq
 *                   read/write QD16, verified, with IOPS/bw/latency
 * Options: mode=poll|msix, wait=spin|hlt (msix), blk_dev=N, queues=N, seed=N, region_off=BYTES, strict_ro=1,
 * region=BYTES, secs=N (bench, per job), io_timeout_ms=N, indirect=1,
 * event_idx=0, verify=0 (bench: skip checking read data). */
#include "blk_job.h"
#include "lib/pattern.h"
#include "lib/probe.h"

static struct vblk blk;

static struct vblk *open_blk(void)
{
	bool msix = opt_msix();

	if (vblk_open(&blk, (unsigned int)opt_u64("blk_dev", 0), msix,
		      (unsigned int)opt_u64("queues", 1)) < 0)
		probe_fail("virtio-blk device not usable");
	{
		const char *wait = opt_str("wait", "spin");

		if (strcmp(wait, "hlt") && strcmp(wait, "spin"))
			probe_fail("wait must be spin or hlt, not '%s'", wait);
		if (!strcmp(wait, "hlt") && !msix)
			probe_fail("wait=hlt needs mode=msix");
		vblk_set_hlt(&blk, !strcmp(wait, "hlt"));
		/* A 100 ms tick so that a halted wait still sees its
		 * timeout if the device never interrupts. */
		if (!strcmp(wait, "hlt"))
			lapic_timer_periodic(IRQ_TIMER, 100000000);
	}
	if (blk_job_init(opt_u64("pool", 4 << 20), opt_u64("lat_samples",
							   1 << 20)) < 0)
		probe_fail("out of memory for I/O buffers");
	return &blk;
}

static void report_kicks(struct vblk *b)
{
	uint64_t kicks, skipped, ticks;

	vblk_kick_stats(b, &kicks, &skipped, &ticks);
	pr("probe: blk irqs=%lu kicks=%lu kicks_skipped=%lu kick_mean_ns=%lu "
	   "timer_ticks=%lu\n", b->irqs_seen, kicks, skipped,
	   kicks ? ticks_to_ns(ticks / kicks) : 0, irq_count[IRQ_TIMER]);
}

/* What completed, by kind: "read=OK/BYTES/FAILED ...". */
static void report_done(const struct vblk *b)
{
	static const char *const names[VBLK_KINDS] = {
		"read", "write", "flush", "discard", "write_zeroes" };

	pr("probe: blk done");
	for (int k = 0; k < VBLK_KINDS; k++)
		pr(" %s=%lu/%lu/%lu", names[k], b->done[k].ok, b->done[k].bytes,
		   b->done[k].failed);
	pr("\n");
}

static void *buf_alloc(size_t n)
{
	void *p = dma_alloc(n, 4096);

	if (!p)
		probe_fail("out of memory");
	return p;
}

static void expect_quiet(uint8_t got, uint8_t want, const char *what)
{
	if (got != want)
		probe_fail("%s: status %s, expected %s", what,
			   blk_status_name(got), blk_status_name(want));
}

static void expect(uint8_t got, uint8_t want, const char *what)
{
	expect_quiet(got, want, what);
	pr("probe: blk %s: %s\n", what, blk_status_name(got));
}

/* A request whose data is split over several descriptors. */
static uint8_t rw_split(struct vblk *b, uint32_t type, uint64_t sector,
			uint8_t *buf, const uint32_t *lens, unsigned int n)
{
	struct vblk_io io;

	io.type = type;
	io.sector = sector;
	io.nseg = n;
	for (unsigned int i = 0; i < n; i++) {
		io.seg[i].p = buf;
		io.seg[i].len = lens[i];
		buf += lens[i];
	}
	if (vblk_submit(b, &io) < 0)
		probe_fail("submit failed");
	vblk_kick(b);
	if (vblk_wait(b) != &io)
		probe_fail("unexpected completion");
	return io.status;
}

static uint8_t dwz(struct vblk *b, uint32_t type, uint64_t sector,
		   uint32_t n, uint32_t flags)
{
	struct virtio_blk_dwz *seg = buf_alloc(sizeof(*seg));

	seg->sector = sector;
	seg->num_sectors = n;
	seg->flags = flags;
	return vblk_rw(b, type, 0, seg, sizeof(*seg));
}

static void check_range(const uint8_t *buf, uint64_t base_off, uint64_t len,
			uint64_t zlo, uint64_t zhi, uint64_t seed,
			const char *what)
{
	/* [zlo, zhi) (disk offsets) must read zero, the rest the pattern. */
	for (uint64_t o = 0; o < len; o += 8) {
		uint64_t d = base_off + o, w = *(const uint64_t *)(buf + o);
		uint64_t want = d >= zlo && d < zhi ? 0 : pattern_word(seed, d);

		if (w != want)
			probe_fail("%s: disk offset %lu reads 0x%lx, expected "
				   "0x%lx", what, d, w, want);
	}
}

static void test_types(struct vblk *b, uint64_t seed)
{
	uint8_t *buf = buf_alloc(65536), *id = buf_alloc(4096);
	const uint32_t wlens[3] = { 4096, 1536, 65536 - 4096 - 1536 };
	const uint32_t rlens[2] = { 512, 65536 - 512 };
	uint8_t st;

	/* GET_ID: 20 bytes, NUL-padded when shorter. */
	memset(id, 0xAA, 64);
	st = vblk_rw(b, VIRTIO_BLK_T_GET_ID, 0, id, 20);
	expect(st, VIRTIO_BLK_S_OK, "GET_ID");
	for (int i = 0; i < 20 && id[i]; i++)
		if (id[i] < 0x20 || id[i] > 0x7e)
			probe_fail("GET_ID: non-printable byte 0x%x", id[i]);
	if (id[20] != 0xAA)
		probe_fail("GET_ID wrote past its 20-byte buffer");
	id[20] = 0;
	pr("probe: blk id=\"%s\"\n", (char *)id);

	/* OUT then IN, 64 KiB at sector 0, split differently each way. */
	pattern_fill(buf, 0, 65536, seed);
	expect(rw_split(b, VIRTIO_BLK_T_OUT, 0, buf, wlens, 3),
	       VIRTIO_BLK_S_OK, "OUT 64k (3 segments)");
	memset(buf, 0, 65536);
	expect(rw_split(b, VIRTIO_BLK_T_IN, 0, buf, rlens, 2),
	       VIRTIO_BLK_S_OK, "IN 64k (2 segments)");
	if (pattern_check(buf, 0, 65536, seed) != 65536)
		probe_fail("IN: data differs from what OUT wrote");

	if (virtio_has(&b->vp, VIRTIO_BLK_F_FLUSH))
		expect(vblk_rw(b, VIRTIO_BLK_T_FLUSH, 0, NULL, 0),
		       VIRTIO_BLK_S_OK, "FLUSH");
	else
		pr("probe: blk FLUSH: not offered, skipped\n");

	if (virtio_has(&b->vp, VIRTIO_BLK_F_WRITE_ZEROES) &&
	    b->max_wz_sectors >= 8) {
		/* 64 KiB of pattern at 128 KiB, zero 4 KiB in its middle. */
		pattern_fill(buf, 131072, 65536, seed);
		expect(vblk_rw(b, VIRTIO_BLK_T_OUT, 256, buf, 65536),
		       VIRTIO_BLK_S_OK, "OUT before WRITE_ZEROES");
		expect(dwz(b, VIRTIO_BLK_T_WRITE_ZEROES, 264, 8, 0),
		       VIRTIO_BLK_S_OK, "WRITE_ZEROES");
		memset(buf, 0xee, 65536);
		expect(vblk_rw(b, VIRTIO_BLK_T_IN, 256, buf, 65536),
		       VIRTIO_BLK_S_OK, "IN after WRITE_ZEROES");
		check_range(buf, 131072, 65536, 264 * 512, 272 * 512, seed,
			    "WRITE_ZEROES");
	} else {
		pr("probe: blk WRITE_ZEROES: not offered, skipped\n");
	}

	if (virtio_has(&b->vp, VIRTIO_BLK_F_DISCARD) &&
	    b->max_discard_sectors >= 8) {
		/* Discarded data is unspecified; its neighbours are not. */
		pattern_fill(buf, 262144, 65536, seed);
		expect(vblk_rw(b, VIRTIO_BLK_T_OUT, 512, buf, 65536),
		       VIRTIO_BLK_S_OK, "OUT before DISCARD");
		expect(dwz(b, VIRTIO_BLK_T_DISCARD, 520, 8, 0),
		       VIRTIO_BLK_S_OK, "DISCARD");
		expect(vblk_rw(b, VIRTIO_BLK_T_IN, 512, buf, 65536),
		       VIRTIO_BLK_S_OK, "IN after DISCARD");
		if (pattern_check(buf, 262144, 4096, seed) != 4096 ||
		    pattern_check(buf + 8192, 262144 + 8192, 65536 - 8192,
				  seed) != 65536 - 8192)
			probe_fail("DISCARD changed data outside its range");
	} else {
		pr("probe: blk DISCARD: not offered, skipped\n");
	}

	/* Errors: beyond the end, straddling the end, unknown type. */
	expect(vblk_rw(b, VIRTIO_BLK_T_IN, b->capacity, buf, 512),
	       VIRTIO_BLK_S_IOERR, "IN past the end");
	expect(vblk_rw(b, VIRTIO_BLK_T_IN, b->capacity - 1, buf, 1024),
	       VIRTIO_BLK_S_IOERR, "IN straddling the end");
	expect(vblk_rw(b, 0x7f, 0, buf, 512), VIRTIO_BLK_S_UNSUPP,
	       "unknown type 0x7f");
}

static void test_blk(void)
{
	struct vblk *b = open_blk();
	uint64_t seed = opt_u64("seed", 1), off, len, phase = 0;
	static const uint32_t sizes[3] = { 4096, 16384, 65536 };
	static const unsigned int depths[2] = { 1, 32 };

	if (b->ro)
		probe_fail("disk is read-only");
	opt_region(b->capacity * 512, &off, &len);
	test_types(b, seed);
	for (unsigned int s = 0; s < 3; s++) {
		for (unsigned int q = 0; q < 2; q++) {
			struct blk_job w = {
				.name = "randwrite", .type = VIRTIO_BLK_T_OUT,
				.bs = sizes[s], .qd = depths[q], .random = true,
				.off = off, .len = len,
				.seed = seed + 100 + phase++,
			};
			struct blk_job r = w;

			r.name = "randread";
			r.type = VIRTIO_BLK_T_IN;
			r.verify = true;
			blk_job_run(b, &w);
			blk_job_run(b, &r);
			pr("probe: blk phase bs=%u qd=%u writes=%lu reads=%lu "
			   "verified seed=%lu\n", w.bs, w.qd, w.ios, r.ios,
			   w.seed);
		}
	}
	if (b->msix && !b->irqs_seen)
		probe_fail("MSI-X mode but no interrupt was seen");
	report_kicks(b);
	report_done(b);
	pr("probe: blk pattern offset=%lu len=%lu seed=%lu\n", off, len,
	   seed + 100 + phase - 1);
}

/* The region (region_off=, region=) holds the pattern of seed: what a
 * test=blk run left there, read back from a read-only disk (an RBD
 * snapshot taken after it, say). */
static void check_region_pattern(struct vblk *b, uint64_t seed)
{
	uint8_t *buf = buf_alloc(65536);
	uint64_t off, len;

	opt_region(b->capacity * 512, &off, &len);
	for (uint64_t o = off; o < off + len; o += 65536) {
		size_t bad;

		expect_quiet(vblk_rw(b, VIRTIO_BLK_T_IN, o / 512, buf, 65536),
			     VIRTIO_BLK_S_OK, "IN of the pattern");
		bad = pattern_check(buf, o, 65536, seed);
		if (bad != 65536)
			probe_fail("disk offset %lu does not hold the pattern of seed %lu",
				   o + bad, seed);
	}
	pr("probe: blk-ro pattern offset=%lu len=%lu seed=%lu verified\n", off,
	   len, seed);
}

static void test_blk_ro(void)
{
	struct vblk *b = open_blk();
	uint8_t *before = buf_alloc(4096), *buf = buf_alloc(4096);

	if (!b->ro)
		probe_fail("device does not report VIRTIO_BLK_F_RO");
	expect(vblk_rw(b, VIRTIO_BLK_T_IN, 0, before, 4096), VIRTIO_BLK_S_OK,
	       "IN on read-only disk");
	memset(buf, 0x5a, 4096);
	expect(vblk_rw(b, VIRTIO_BLK_T_OUT, 0, buf, 4096),
	       VIRTIO_BLK_S_IOERR, "OUT on read-only disk");
	if (virtio_has(&b->vp, VIRTIO_BLK_F_WRITE_ZEROES))
		expect(dwz(b, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0),
		       VIRTIO_BLK_S_IOERR, "WRITE_ZEROES on read-only disk");
	if (virtio_has(&b->vp, VIRTIO_BLK_F_DISCARD)) {
		/* QEMU completes a DISCARD on a read-only disk as a no-op;
		 * strict_ro=1 demands IOERR. The data must survive anyway. */
		uint8_t st = dwz(b, VIRTIO_BLK_T_DISCARD, 0, 8, 0);

		if (opt_u64("strict_ro", 0))
			expect(st, VIRTIO_BLK_S_IOERR,
			       "DISCARD on read-only disk");
		else
			pr("probe: blk DISCARD on read-only disk: %s\n",
			   blk_status_name(st));
	}
	expect(vblk_rw(b, VIRTIO_BLK_T_IN, 0, buf, 4096), VIRTIO_BLK_S_OK,
	       "IN after refused writes");
	if (memcmp(before, buf, 4096) != 0)
		probe_fail("read-only disk content changed");
	if (opt_has("pattern_seed"))
		check_region_pattern(b, opt_u64("pattern_seed", 0));
}

static void test_blk_flush(void)
{
	struct vblk *b = open_blk();
	uint64_t seed = opt_u64("seed", 7), off, len;
	uint64_t hold = ms_to_ticks(opt_u64("hold_ms", 30000));
	struct blk_job w = { .name = "flushwrite", .type = VIRTIO_BLK_T_OUT,
			     .bs = 65536, .qd = 16, .random = true };

	opt_region(b->capacity * 512, &off, &len);
	w.off = off;
	w.len = len;
	w.seed = seed;
	blk_job_run(b, &w);
	if (!virtio_has(&b->vp, VIRTIO_BLK_F_FLUSH))
		probe_fail("device does not offer FLUSH");
	expect(vblk_rw(b, VIRTIO_BLK_T_FLUSH, 0, NULL, 0), VIRTIO_BLK_S_OK,
	       "FLUSH");
	/* The host test kills the VMM on this line and checks the file. */
	pr("probe: FLUSHED offset=%lu len=%lu seed=%lu\n", off, len, seed);
	for (uint64_t end = rdtsc() + hold; rdtsc() < end;)
		cpu_relax();
	probe_fail("still running %lu ms after FLUSHED (not killed)",
		   opt_u64("hold_ms", 30000));
}

static void bench_blk(void)
{
	struct vblk *b = open_blk();
	uint64_t seed = opt_u64("seed", 3), off, len;
	uint64_t ticks = ms_to_ticks(opt_u64("secs", 3) * 1000);
	struct blk_job jobs[] = {
		{ .name = "randread-4k-qd1", .type = VIRTIO_BLK_T_IN,
		  .bs = 4096, .qd = 1, .random = true },
		{ .name = "randread-4k-qd32", .type = VIRTIO_BLK_T_IN,
		  .bs = 4096, .qd = 32, .random = true },
		{ .name = "randwrite-4k-qd32", .type = VIRTIO_BLK_T_OUT,
		  .bs = 4096, .qd = 32, .random = true },
		{ .name = "seqread-64k-qd16", .type = VIRTIO_BLK_T_IN,
		  .bs = 65536, .qd = 16, .random = false },
		{ .name = "seqwrite-64k-qd16", .type = VIRTIO_BLK_T_OUT,
		  .bs = 65536, .qd = 16, .random = false },
	};
	struct blk_job fill = { .name = "prefill", .type = VIRTIO_BLK_T_OUT,
				.bs = 65536, .qd = 16 };

	if (b->ro)
		probe_fail("disk is read-only");
	opt_region(b->capacity * 512, &off, &len);
	/* Every job reads or writes the same pattern, so reads verify
	 * whatever order the writes landed in. */
	fill.off = off;
	fill.len = len;
	fill.seed = seed;
	blk_job_run(b, &fill);
	pr("probe: bench region offset=%lu len=%lu secs=%lu mode=%s%s\n", off,
	   len, opt_u64("secs", 3), b->msix ? "msix" : "poll",
	   opt_u64("verify", 1) ? "" : " verify=0");
	for (unsigned int i = 0; i < ARRAY_SIZE(jobs); i++) {
		/* only=NAME: one job, for a diagnostic (strace, perf) */
		if (opt_has("only") && strcmp(opt_str("only", ""), jobs[i].name))
			continue;
		jobs[i].off = off;
		jobs[i].len = len;
		jobs[i].seed = seed;
		/* verify=0: a diagnostic, to see what the guest's own check of
		 * the data costs; the benchmark verifies by default. */
		jobs[i].verify = opt_u64("verify", 1) != 0;
		jobs[i].max_ticks = ticks;
		blk_job_run(b, &jobs[i]);
		blk_job_report(&jobs[i]);
	}
	report_kicks(b);
}

PROBE_TEST(blk, "blk", test_blk,
	   "virtio-blk: all request types, random I/O 4k-64k QD1/32, verified");
PROBE_TEST(blk_ro, "blk-ro", test_blk_ro,
	   "virtio-blk: read-only disk refuses writes");
PROBE_TEST(blk_flush, "blk-flush", test_blk_flush,
	   "virtio-blk: write, FLUSH, print FLUSHED marker, wait to be killed");
PROBE_TEST(bench_blk, "bench-blk", bench_blk,
	   "virtio-blk benchmark (secs= per job, mode=poll|msix)");
