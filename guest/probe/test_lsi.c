/* LSI 53C895A tests and benchmark, through the sym53c8xx-style driver:
 *   test=lsi   INQUIRY, READ CAPACITY, unit attention + REQUEST SENSE,
 *              READ/WRITE with data checks, CHECK CONDITION past the end,
 *              then qd tagged commands (reads and writes mixed) in flight
 *              at once; with expect_disconnect=1 every one of them must have
 *              disconnected and been reselected by its tag (iovm's HBA);
 *              a selection timeout for target lsi_absent=N (5), seen on
 *              INTA# through the IOAPIC with intx=1
 *   bench=lsi  bench=blk's jobs (4k random read QD1/QD32, 4k random write
 *              QD32, 64k sequential read/write QD16) and 16k sequential
 *              read/write QD16, reads verified: job=NAME iops=.. ...
 * Options: lsi_target=N (0), lsi_target2=N (a second disk to check),
 * qd=N (16), secs=N (bench, per job), region=BYTES, region_off=BYTES,
 * seed=N, io_timeout_ms=N. */
#include "lib/pattern.h"
#include "lib/pci.h"
#include "lib/probe.h"
#include "lsi.h"
#include "../../src/scsi/lsi_regs.h"

static struct lsi_hba hba;

static void *buf_alloc(size_t n)
{
	void *p = dma_alloc(n, 4096);

	if (!p)
		probe_fail("out of memory");
	return p;
}

static void rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 10);
	cdb[0] = op;
	cdb[2] = lba >> 24;
	cdb[3] = lba >> 16;
	cdb[4] = lba >> 8;
	cdb[5] = lba;
	cdb[7] = blocks >> 8;
	cdb[8] = blocks;
}

static uint8_t sense_key(unsigned int target)
{
	uint8_t cdb[6] = { 0x03, 0, 0, 0, 18, 0 };
	uint8_t *s = buf_alloc(4096);
	uint8_t st = lsi_run1(&hba, target, cdb, 6, LSI_IN, s, 18);

	if (st != 0)
		probe_fail("lsi: REQUEST SENSE status %x", st);
	return s[2] & 0x0f;
}

/* Clears the unit attention a bus reset leaves. */
static void ready(unsigned int target)
{
	uint8_t tur[6] = { 0 };

	for (int i = 0; i < 4; i++) {
		uint8_t st = lsi_run1(&hba, target, tur, 6, LSI_NONE, NULL, 0);

		if (st == 0)
			return;
		if (st != 2)
			probe_fail("lsi: TEST UNIT READY status %x", st);
		pr("probe: lsi target %u: sense key %x after reset\n", target,
		   sense_key(target));
	}
	probe_fail("lsi: target %u never ready", target);
}

static uint64_t capacity(unsigned int target)
{
	uint8_t cdb[10] = { 0x25 };
	uint8_t *b = buf_alloc(4096);
	uint8_t st = lsi_run1(&hba, target, cdb, 10, LSI_IN, b, 8);
	uint32_t last, bs;

	if (st)
		probe_fail("lsi: READ CAPACITY status %x", st);
	last = (uint32_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
	bs = (uint32_t)b[4] << 24 | b[5] << 16 | b[6] << 8 | b[7];
	if (bs != 512)
		probe_fail("lsi: block size %u", bs);
	return ((uint64_t)last + 1) * bs;
}

static void check_target(unsigned int target, uint64_t seed)
{
	uint8_t inq[6] = { 0x12, 0, 0, 0, 96, 0 };
	uint8_t cdb[10];
	uint8_t *b = buf_alloc(65536);
	uint64_t size;
	uint8_t st;

	ready(target);
	st = lsi_run1(&hba, target, inq, 6, LSI_IN, b, 96);
	if (st || (b[0] & 0x1f) != 0)
		probe_fail("lsi: INQUIRY status %x type %x", st, b[0]);
	pr("probe: lsi target %u: INQUIRY '%c%c%c%c%c%c%c%c' version %u\n",
	   target, b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15], b[2]);
	size = capacity(target);
	pr("probe: lsi target %u: capacity=%lu\n", target, size);
	if (size < (4 << 20))
		probe_fail("lsi: disk too small");

	/* WRITE 64k in 16 segments, READ it back */
	pattern_fill(b, 1 << 20, 65536, seed);
	rw10(cdb, 0x2a, (1 << 20) / 512, 128);
	st = lsi_run1(&hba, target, cdb, 10, LSI_OUT, b, 65536);
	if (st)
		probe_fail("lsi: WRITE status %x", st);
	memset(b, 0, 65536);
	rw10(cdb, 0x28, (1 << 20) / 512, 128);
	st = lsi_run1(&hba, target, cdb, 10, LSI_IN, b, 65536);
	if (st)
		probe_fail("lsi: READ status %x", st);
	if (pattern_check(b, 1 << 20, 65536, seed) != 65536)
		probe_fail("lsi: data read back differs");
	pr("probe: lsi target %u: write+read 64k ok\n", target);

	/* past the end: CHECK CONDITION, ILLEGAL REQUEST */
	rw10(cdb, 0x28, (uint32_t)(size / 512), 1);
	st = lsi_run1(&hba, target, cdb, 10, LSI_IN, b, 512);
	if (st != 2 || sense_key(target) != 5)
		probe_fail("lsi: read past the end: status %x", st);
	pr("probe: lsi target %u: read past end -> CHECK CONDITION, ILLEGAL REQUEST\n",
	   target);
}

/* qd tagged commands at once: even tags write, odd tags read what an
 * earlier pass wrote. */
static void check_tagged(unsigned int target, unsigned int qd, uint64_t seed)
{
	uint8_t **buf = buf_alloc(qd * sizeof(*buf));
	uint64_t deadline;
	uint32_t resel = 0;
	unsigned int left = qd;
	bool want_disc = opt_u64("expect_disconnect", 0);

	for (unsigned int t = 0; t < qd; t++) {
		uint64_t off = (2ull << 20) + t * 16384ull;
		uint8_t cdb[10];

		buf[t] = buf_alloc(16384);
		pattern_fill(buf[t], off, 16384, seed);
		rw10(cdb, 0x2a, off / 512, 32);
		if (lsi_run1(&hba, target, cdb, 10, LSI_OUT, buf[t], 16384))
			probe_fail("lsi: prefill write failed");
	}
	for (unsigned int t = 0; t < qd; t++) {
		uint64_t off = (2ull << 20) + t * 16384ull;
		bool wr = t & 1;
		void *seg[4];
		uint32_t len[4];
		uint8_t cdb[10];

		if (wr)
			pattern_fill(buf[t], off, 16384, seed + 1);
		else
			memset(buf[t], 0, 16384);
		for (int i = 0; i < 4; i++) {
			seg[i] = buf[t] + i * 4096;
			len[i] = 4096;
		}
		rw10(cdb, wr ? 0x2a : 0x28, off / 512, 32);
		lsi_submit(&hba, t, target, cdb, 10, wr ? LSI_OUT : LSI_IN, seg,
			   len, 4);
	}
	lsi_kick(&hba);
	deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	while (left) {
		int t = lsi_reap(&hba);

		if (t < 0) {
			if (rdtsc() > deadline)
				probe_fail("lsi: %u tagged commands never completed",
					   left);
			cpu_relax();
			continue;
		}
		if ((unsigned int)t >= qd || lsi_status(&hba, t))
			probe_fail("lsi: tag %d status %x", t, lsi_status(&hba, t));
		if (lsi_seen_status(&hba) == 0xff)
			probe_fail("lsi: tag %d's done queue entry was there before its status",
				   t);
		resel += lsi_resel_count(&hba, t);
		left--;
	}
	for (unsigned int t = 0; t < qd; t++) {
		uint64_t off = (2ull << 20) + t * 16384ull;
		uint8_t cdb[10];

		if (t & 1) {
			memset(buf[t], 0, 16384);
			rw10(cdb, 0x28, off / 512, 32);
			if (lsi_run1(&hba, target, cdb, 10, LSI_IN, buf[t], 16384))
				probe_fail("lsi: read back failed");
		}
		if (pattern_check(buf[t], off, 16384, seed + (t & 1)) != 16384)
			probe_fail("lsi: tag %u data differs", t);
	}
	pr("probe: lsi target %u: %u tagged reads+writes in flight, reselections=%u\n",
	   target, qd, resel);
	if (want_disc && resel < qd)
		probe_fail("lsi: only %u of %u commands disconnected", resel, qd);
}

/* Routes IOAPIC input gsi (PCI INTx: level, active low) to vector. */
static void ioapic_route(unsigned int gsi, unsigned int vector)
{
	volatile uint8_t *io = phys_ptr(0xfec00000);

	mmio_write32(io, 0x10 + 2 * gsi + 1);
	mmio_write32(io + 0x10, lapic_id() << 24);
	mmio_write32(io, 0x10 + 2 * gsi);
	mmio_write32(io + 0x10, vector | 1u << 13 | 1u << 15);
}

/* A command for a target that is not there: selection timeout (SIST1 STO),
 * the SCRIPTS halt, and with intx=1 the interrupt arrives on INTA# and
 * goes away once SIST is read (sym_int_sto's path). */
static void check_sto(unsigned int absent, bool intx)
{
	uint8_t tur[6] = { 0 };
	uint64_t deadline, before = irq_count[0], after;
	uint8_t istat = 0, sist1;

	if (intx) {
		unsigned int gsi = pci_read8(hba.pci, 0x3c);

		lapic_enable();
		ioapic_route(gsi, IRQ_VEC_BASE);
		pr("probe: lsi INTA# -> gsi %u\n", gsi);
	}
	lsi_submit(&hba, 1, absent, tur, 6, LSI_NONE, NULL, NULL, 0);
	lsi_kick(&hba);
	deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	while (!(istat & LSI_ISTAT_SIP)) {
		if (rdtsc() > deadline)
			probe_fail("lsi: no selection timeout for target %u",
				   absent);
		delay_us(200);
		istat = lsi_reg8(&hba, LSI_ISTAT);
	}
	/* The irqfd injects asynchronously, later still on a loaded host:
	 * whether it comes is the question, the deadline only ends a hang. */
	deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	while (intx && irq_count[0] == before && rdtsc() < deadline)
		cpu_relax();
	if (intx && irq_count[0] == before)
		probe_fail("lsi: SIP set but no interrupt on INTA#");
	lsi_reg8(&hba, LSI_SIST0);
	sist1 = lsi_reg8(&hba, LSI_SIST1);
	if (!(sist1 & LSI_SIST1_STO))
		probe_fail("lsi: sist1=%x, expected STO", sist1);
	istat = lsi_reg8(&hba, LSI_ISTAT);
	if (istat & (LSI_ISTAT_SIP | LSI_ISTAT_DIP))
		probe_fail("lsi: istat=%x after reading SIST", istat);
	/* One interrupt raised while the line was still up may land after
	 * the read: an EOI's re-raise (the resample thread saw SIP set)
	 * and KVM's irqfd injection are both asynchronous. Each EOI
	 * re-raises at most once, so more than one means the line stayed
	 * up; 20 ms leaves a line that stayed up time for many. (Counting
	 * any at all failed the suite once on a loaded host.) */
	after = irq_count[0];
	delay_us(20000);
	if (intx && irq_count[0] - after > 1)
		probe_fail("lsi: INTA# still firing after SIST was read (%u interrupts)",
			   (unsigned int)(irq_count[0] - after));
	pr("probe: lsi target %u absent: selection timeout, interrupts=%lu\n",
	   absent, (unsigned long)(after - before));
	lsi_restart(&hba);
}

static void test_lsi(void)
{
	unsigned int target = opt_u64("lsi_target", 0);
	uint64_t seed = opt_u64("seed", 1);
	unsigned int qd = opt_u64("qd", 16);

	if (qd == 0 || qd > LSI_NTAGS)
		probe_fail("qd must be 1..%u", LSI_NTAGS);
	if (lsi_open(&hba, 0))
		probe_fail("lsi: no usable HBA");
	check_target(target, seed);
	check_tagged(target, qd, seed);
	check_sto(opt_u64("lsi_absent", 5), opt_u64("intx", 0));
	if (opt_has("lsi_target2")) {
		unsigned int t2 = opt_u64("lsi_target2", 0);

		check_target(t2, seed + 7);
		check_tagged(t2, qd, seed + 7);
	}
}

PROBE_TEST(lsi, "lsi", test_lsi,
	   "LSI 53C895A: SCSI commands, data, errors, tagged queueing");

/* ---- benchmark ---- */

struct lsi_job {
	const char *name;
	bool write;
	bool random;
	uint32_t bs;
	unsigned int qd;
};

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Disk offset of the next I/O: sequential (wrapping) or random. */
static uint64_t job_off(const struct lsi_job *j, uint64_t off0,
			uint64_t region, uint64_t *next, uint64_t *rng)
{
	uint64_t o;

	if (j->random)
		o = (rng_next(rng) % (region / j->bs)) * j->bs;
	else
		o = *next % region;
	*next += j->bs;
	return off0 + o;
}

static void job_run(const struct lsi_job *j, unsigned int target,
		    uint64_t off0, uint64_t region,
		    uint64_t secs, uint64_t seed, uint8_t **bufs,
		    struct lat_stats *lat, bool one_pass)
{
	uint64_t start[LSI_NTAGS], lba_off[LSI_NTAGS];
	/* where each tag's command went in and came out, for the report
	 * of a completion that is not one: a done queue entry that repeats
	 * an older completion of the tag, or one stored before its status */
	uint32_t sq_at[LSI_NTAGS], dq_at[LSI_NTAGS], subs[LSI_NTAGS] = { 0 };
	uint64_t next = 0, ios = 0, t0, end, rng = seed * 2654435761u + 1;
	bool busy[LSI_NTAGS] = { false };
	unsigned int nseg = j->bs / 4096, inflight = 0, qd = j->qd;

	lat->n = lat->count = lat->sum = 0;
	t0 = rdtsc();
	end = one_pass ? UINT64_MAX : t0 + ms_to_ticks(secs * 1000);
	/* Fill the queue, then keep it full: every completion resubmits
	 * its tag at the next offset until the time is up. */
	for (unsigned int tag = 0; tag < qd && next < region; tag++) {
		void *seg[LSI_MAX_SG];
		uint32_t len[LSI_MAX_SG];
		uint8_t cdb[10];
		uint64_t off = job_off(j, off0, region, &next, &rng);

		for (unsigned int i = 0; i < nseg; i++) {
			seg[i] = bufs[tag] + i * 4096;
			len[i] = 4096;
		}
		if (j->write)
			pattern_fill(bufs[tag], off, j->bs, seed);
		rw10(cdb, j->write ? 0x2a : 0x28, off / 512, j->bs / 512);
		lba_off[tag] = off;
		start[tag] = rdtsc();
		lsi_submit(&hba, tag, target, cdb, 10,
			   j->write ? LSI_OUT : LSI_IN, seg, len, nseg);
		sq_at[tag] = hba.last_sq;
		dq_at[tag] = UINT32_MAX;
		subs[tag]++;
		busy[tag] = true;
		inflight++;
	}
	lsi_kick(&hba);
	while (inflight) {
		bool kick = false;
		int t;

		/* Take every completion there is, resubmit, kick once: the
		 * SIGP write is an exit. */
		while ((t = lsi_reap(&hba)) >= 0) {
			uint64_t now = rdtsc();

			if (t >= LSI_NTAGS || !busy[t]) {
				lsi_dump(&hba);
				probe_fail("job %s: completion of tag %d, not in flight (ios %lu)",
					   j->name, t, ios);
			}
			busy[t] = false;
			if (lsi_seen_status(&hba) == 0xff) {
				pr("probe: tag %d: done queue entry %u was there before its status (status byte ff then, %x now)\n",
				   t, hba.last_dq, lsi_status(&hba, t));
				lsi_dump(&hba);
				probe_fail("job %s: tag %d completed before its status",
					   j->name, t);
			}
			if (lsi_status(&hba, t)) {
				uint8_t st = lsi_status(&hba, t);

				delay_us(100000);
				pr("probe: tag %d status %x, 100 ms later %x, resel %u\n",
				   t, st, lsi_status(&hba, t), lsi_resel_count(&hba, t));
				pr("probe: tag %d: done queue entry %u; its command #%u of this job went in at start queue entry %u; the one before came out at done queue entry %d\n",
				   t, hba.last_dq, subs[t], sq_at[t],
				   dq_at[t] == UINT32_MAX ? -1 : (int)dq_at[t]);
				lsi_dump(&hba);
				probe_fail("job %s: status %x", j->name,
					   lsi_status(&hba, t));
			}
			if (!j->write &&
			    pattern_check(bufs[t], lba_off[t], j->bs, seed) !=
				    j->bs)
				probe_fail("job %s: data at %lu differs",
					   j->name, lba_off[t]);
			lat_add(lat, now - start[t]);
			ios++;
			inflight--;
			if (now < end && (!one_pass || next < region)) {
				void *seg[LSI_MAX_SG];
				uint32_t len[LSI_MAX_SG];
				uint8_t cdb[10];
				uint64_t off = job_off(j, off0, region, &next,
						       &rng);

				for (unsigned int i = 0; i < nseg; i++) {
					seg[i] = bufs[t] + i * 4096;
					len[i] = 4096;
				}
				if (j->write)
					pattern_fill(bufs[t], off, j->bs, seed);
				rw10(cdb, j->write ? 0x2a : 0x28, off / 512,
				     j->bs / 512);
				lba_off[t] = off;
				start[t] = rdtsc();
				dq_at[t] = hba.last_dq;
				lsi_submit(&hba, t, target, cdb, 10,
					   j->write ? LSI_OUT : LSI_IN, seg,
					   len, nseg);
				sq_at[t] = hba.last_sq;
				subs[t]++;
				busy[t] = true;
				inflight++;
				kick = true;
			}
		}
		if (kick) {
			lsi_kick(&hba);
			continue;
		}
		if (!one_pass &&
		    rdtsc() > end + ms_to_ticks(opt_u64("io_timeout_ms", 10000))) {
			for (unsigned int i = 0; i < LSI_NTAGS; i++)
				if (busy[i])
					pr("probe: tag %u in flight: status %x resel %u, start queue entry %u\n",
					   i, lsi_status(&hba, i),
					   lsi_resel_count(&hba, i), sq_at[i]);
			lsi_dump(&hba);
			probe_fail("job %s: I/O timed out", j->name);
		}
		cpu_relax();
	}
	{
		uint64_t ns = ticks_to_ns(rdtsc() - t0);
		uint64_t iops = ios * 1000000000ull / (ns ? ns : 1);

		if (one_pass)
			return;
		pr("job=%s iops=%lu bw_mbs=%lu lat_mean_us=%lu lat_p99_us=%lu ios=%lu\n",
		   j->name, iops, iops * j->bs / 1000000,
		   lat_mean_ns(lat) / 1000, lat_pct_ns(lat, 99) / 1000, ios);
	}
}

static void bench_lsi(void)
{
	/* bench=blk's jobs, then the 16k sequential pair */
	static const struct lsi_job jobs[] = {
		{ "randread-4k-qd1", false, true, 4096, 1 },
		{ "randread-4k-qd32", false, true, 4096, 32 },
		{ "randwrite-4k-qd32", true, true, 4096, 32 },
		{ "seqread-64k-qd16", false, false, 65536, 16 },
		{ "seqwrite-64k-qd16", true, false, 65536, 16 },
		{ "seqread-16k-qd16", false, false, 16384, 16 },
		{ "seqwrite-16k-qd16", true, false, 16384, 16 },
	};
	unsigned int target = opt_u64("lsi_target", 0);
	unsigned int qd = 32;
	uint64_t off = opt_u64("region_off", 1 << 20);
	uint64_t region = opt_u64("region", 64 << 20);
	uint64_t secs = opt_u64("secs", 3);
	uint64_t seed = opt_u64("seed", 1);
	uint64_t ncap = opt_u64("lat_samples", 1 << 20);
	struct lat_stats lat;
	uint8_t *bufs[LSI_NTAGS];

	if (region % 65536 || off % 65536 || !region)
		probe_fail("region and region_off must be multiples of 64k");
	for (unsigned int i = 0; i < qd; i++)
		bufs[i] = buf_alloc(65536);
	lat_init(&lat, buf_alloc(ncap * 4), ncap);
	if (lsi_open(&hba, 0))
		probe_fail("lsi: no usable HBA");
	ready(target);
	if (capacity(target) < off + region)
		probe_fail("lsi: disk smaller than region_off + region");
	/* the reads check what the writes left: cover the region once */
	{
		static const struct lsi_job fill = { "prefill", true, false,
						     65536, 16 };

		job_run(&fill, target, off, region, 0, seed, bufs, &lat, true);
	}
	pr("probe: bench region offset=%lu len=%lu secs=%lu\n", off, region,
	   secs);
	for (unsigned int i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++)
		job_run(&jobs[i], target, off, region, secs, seed, bufs, &lat,
			false);
}

PROBE_TEST(bench_lsi, "bench-lsi", bench_lsi,
	   "LSI 53C895A: bench=blk's jobs plus 16k sequential, verified");

/* ---- sustained mixed load ---- */

/* One command of the stress test: disk bytes [off, off + len), whole 4 KiB
 * units, none shared with another command in flight. */
struct stress_io {
	uint64_t off;
	uint32_t len;
	bool write;
	uint32_t gen;		/* write: the generation it puts there */
	uint8_t *buf;
};

struct stress {
	unsigned int target;
	uint64_t off0, units, seed, rng;
	uint32_t *gen;		/* per 4 KiB unit: generation written last */
	uint8_t *busy;		/* per unit: a command in flight on it */
	uint32_t next_gen;
	uint64_t reads, writes;
};

static bool stress_free(struct stress *st, uint64_t u, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (st->busy[u + i])
			return false;
	return true;
}

/* Picks a random read or write of 4, 16 or 64 KiB on units no command in
 * flight uses, marks them busy and submits it as tag. */
static void stress_submit(struct stress *st, unsigned int tag,
			  struct stress_io *io)
{
	static const uint32_t sizes[] = { 4096, 16384, 65536 };
	void *seg[LSI_MAX_SG];
	uint32_t seglen[LSI_MAX_SG];
	uint64_t u = 0, n = 1;
	uint8_t cdb[10];
	bool found = false;

	for (int tries = 0; tries < 64 && !found; tries++) {
		n = sizes[rand64(&st->rng) % 3] / 4096;
		u = rand64(&st->rng) % (st->units / n) * n;
		found = stress_free(st, u, n);
	}
	if (!found) {	/* crowded: the first free unit */
		n = 1;
		for (u = 0; st->busy[u]; u++)
			;
	}
	for (uint64_t i = 0; i < n; i++)
		st->busy[u + i] = 1;
	io->off = st->off0 + u * 4096;
	io->len = n * 4096;
	io->write = rand64(&st->rng) & 1;
	if (io->write) {
		io->gen = ++st->next_gen;
		pattern_fill(io->buf, io->off, io->len, st->seed + io->gen);
	} else {
		memset(io->buf, 0xa5, io->len);
	}
	for (unsigned int i = 0; i < n; i++) {
		seg[i] = io->buf + i * 4096;
		seglen[i] = 4096;
	}
	rw10(cdb, io->write ? 0x2a : 0x28, io->off / 512, io->len / 512);
	lsi_submit(&hba, tag, st->target, cdb, 10,
		   io->write ? LSI_OUT : LSI_IN, seg, seglen, n);
}

/* A completion: a read must hold, unit by unit, the generation the last
 * write there left; a write becomes that generation. */
static void stress_complete(struct stress *st, struct stress_io *io)
{
	uint64_t u0 = (io->off - st->off0) / 4096;

	for (uint64_t i = 0; i < io->len / 4096; i++) {
		uint64_t u = u0 + i;

		if (io->write) {
			st->gen[u] = io->gen;
		} else if (pattern_check(io->buf + i * 4096, io->off + i * 4096,
					 4096, st->seed + st->gen[u]) != 4096) {
			probe_fail("lsi stress: read at %lu: 4k at %lu is not generation %u",
				   io->off, io->off + i * 4096, st->gen[u]);
		}
		st->busy[u] = 0;
	}
	if (io->write)
		st->writes++;
	else
		st->reads++;
}

static void test_lsi_stress(void)
{
	unsigned int qd = opt_u64("qd", 32);
	uint64_t secs = opt_u64("secs", 20);
	uint64_t region = opt_u64("region", 16 << 20);
	uint64_t timeout = ms_to_ticks(opt_u64("io_timeout_ms", 10000));
	static struct stress_io io[LSI_NTAGS];
	bool busy[LSI_NTAGS] = { false };
	struct stress st = { 0 };
	unsigned int inflight = 0;
	uint64_t t0, end, last, ios = 0;
	bool first_r = false, first_w = false;

	st.target = opt_u64("lsi_target", 0);
	st.off0 = opt_u64("region_off", 1 << 20);
	st.seed = opt_u64("seed", 1) * 1000003;
	st.rng = st.seed | 1;
	st.units = region / 4096;
	/* a free unit always exists: more units than qd commands can hold */
	if (qd == 0 || qd > LSI_NTAGS || region % 65536 ||
	    st.units <= qd * 16ull || st.off0 % 4096)
		probe_fail("lsi stress: qd 1..%u, region a multiple of 64k",
			   LSI_NTAGS);
	st.gen = buf_alloc(st.units * sizeof(*st.gen));
	st.busy = buf_alloc(st.units);
	memset(st.gen, 0, st.units * sizeof(*st.gen));
	memset(st.busy, 0, st.units);
	for (unsigned int t = 0; t < qd; t++)
		io[t].buf = buf_alloc(65536);
	if (lsi_open(&hba, 0))
		probe_fail("lsi: no usable HBA");
	ready(st.target);
	if (capacity(st.target) < st.off0 + region)
		probe_fail("lsi: disk smaller than region_off + region");
	/* generation 0 everywhere, 64k at a time */
	for (uint64_t off = 0; off < region; off += 65536) {
		uint8_t cdb[10];

		pattern_fill(io[0].buf, st.off0 + off, 65536, st.seed);
		rw10(cdb, 0x2a, (st.off0 + off) / 512, 128);
		if (lsi_run1(&hba, st.target, cdb, 10, LSI_OUT, io[0].buf,
			     65536))
			probe_fail("lsi stress: prefill write failed");
	}
	pr("probe: lsi stress qd=%u secs=%lu region offset=%lu len=%lu\n", qd,
	   secs, st.off0, region);

	t0 = last = rdtsc();
	end = t0 + ms_to_ticks(secs * 1000);
	for (unsigned int t = 0; t < qd; t++) {
		stress_submit(&st, t, &io[t]);
		first_r |= !io[t].write;
		first_w |= io[t].write;
		busy[t] = true;
		inflight++;
	}
	/* The seed fixes the picks: the first batch mixes both. */
	if (qd > 1 && !(first_r && first_w))
		probe_fail("lsi stress: first batch not mixed");
	lsi_kick(&hba);
	while (inflight) {
		bool kick = false;
		int t;

		while ((t = lsi_reap(&hba)) >= 0) {
			uint64_t now = rdtsc();
			uint8_t status;

			if ((unsigned int)t >= qd || !busy[t]) {
				lsi_dump(&hba);
				probe_fail("lsi stress: completion of tag %d, not in flight (ios %lu)",
					   t, ios);
			}
			status = lsi_status(&hba, t);
			if (lsi_seen_status(&hba) == 0xff) {
				lsi_dump(&hba);
				probe_fail("lsi stress: tag %d's done queue entry was there before its status (status now %x)",
					   t, status);
			}
			if (status) {
				lsi_dump(&hba);
				probe_fail("lsi stress: tag %d (%s %u at %lu) status %x",
					   t, io[t].write ? "write" : "read",
					   io[t].len, io[t].off, status);
			}
			stress_complete(&st, &io[t]);
			busy[t] = false;
			inflight--;
			ios++;
			last = now;
			if (now < end) {
				stress_submit(&st, t, &io[t]);
				busy[t] = true;
				inflight++;
				kick = true;
			}
		}
		if (kick) {
			lsi_kick(&hba);
			continue;
		}
		/* A hang, not a slow host: nothing completed for that long. */
		if (rdtsc() - last > timeout) {
			for (unsigned int i = 0; i < qd; i++)
				if (busy[i])
					pr("probe: tag %u in flight: %s %u at %lu status %x resel %u\n",
					   i, io[i].write ? "write" : "read",
					   io[i].len, io[i].off,
					   lsi_status(&hba, i),
					   lsi_resel_count(&hba, i));
			lsi_dump(&hba);
			probe_fail("lsi stress: %u commands, none completed in %lu ms",
				   inflight, opt_u64("io_timeout_ms", 10000));
		}
		cpu_relax();
	}
	/* Everything the run wrote is where it belongs. */
	for (uint64_t off = 0; off < region; off += 65536) {
		uint8_t cdb[10];

		rw10(cdb, 0x28, (st.off0 + off) / 512, 128);
		if (lsi_run1(&hba, st.target, cdb, 10, LSI_IN, io[0].buf,
			     65536))
			probe_fail("lsi stress: read back failed");
		for (unsigned int i = 0; i < 16; i++) {
			uint64_t u = off / 4096 + i;

			if (pattern_check(io[0].buf + i * 4096,
					  st.off0 + u * 4096, 4096,
					  st.seed + st.gen[u]) != 4096)
				probe_fail("lsi stress: read back: 4k at %lu is not generation %u",
					   st.off0 + u * 4096, st.gen[u]);
		}
	}
	pr("probe: lsi stress ios=%lu reads=%lu writes=%lu secs=%lu verified\n",
	   ios, st.reads, st.writes, ticks_to_ns(rdtsc() - t0) / 1000000000);
}

PROBE_TEST(lsi_stress, "lsi-stress", test_lsi_stress,
	   "LSI 53C895A: qd=32 mixed verified reads/writes for secs=20");

static void test_lsi_reap(void)
{
	lsi_reap_selftest(opt_u64("lsi_reap_revive", 0) != 0);
}

PROBE_TEST(lsi_reap, "lsi-reap", test_lsi_reap,
	   "LSI driver's done queue reaping, no chip: held back until donepos moves; lsi_reap_revive=1 must fail");
