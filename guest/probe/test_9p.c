/* virtio-9p tests and benchmark:
 *   test=9p    version (msize=), attach, walk, lopen, lcreate, write, read,
 *              getattr, readdir, clunk, unlinkat on a share prepared by the
 *              host (tests/kvm/9p-iovm.sh): reads the host's file, writes
 *              one the host checks, walks that must fail, a hostile walk
 *   bench=9p   sequential write then read of a file of size= bytes at
 *              msize=, qd= requests in flight, then a metadata job (walk,
 *              lcreate, getattr, clunk, unlinkat of files= small files);
 *              prints job= lines with bw_mbs / ops_s
 * Options: msize=N (default 512000), p9_dev=N, size=N (bench, default 1G),
 * qd=N (bench, default 4), files=N (bench, default 10000). */
#include "virtio_9p.h"
#include "lib/probe.h"

static struct v9p p9;

/* The pattern both sides agree on: byte i of the probe's file. */
static inline uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 31 + (i >> 12) + 7);
}

static struct v9p *open_9p(void)
{
	uint32_t msize = opt_u64("msize", 512000);

	if (v9p_open(&p9, (unsigned int)opt_u64("p9_dev", 0)) < 0)
		probe_fail("virtio-9p device not usable");
	if (v9p_version(&p9, msize))
		probe_fail("Tversion refused");
	pr("probe: 9p version msize_asked=%u msize=%u\n", msize, p9.msize);
	if (p9.msize > msize || p9.msize < 4096)
		probe_fail("bad negotiated msize %u", p9.msize);
	if (v9p_attach(&p9, 0))
		probe_fail("Tattach refused");
	return &p9;
}

static void *buf_alloc(size_t n)
{
	void *p = dma_alloc(n, 4096);

	if (!p)
		probe_fail("out of memory");
	return p;
}

static void check(int err, const char *what)
{
	if (err)
		probe_fail("%s: error %d", what, err);
}

static void test_9p(void)
{
	struct v9p *c = open_9p();
	uint32_t chunk = c->msize - 24;
	const char *hello[] = { "hello.txt" };
	const char *sub[] = { "sub" };
	const char *missing[] = { "no-such-file" };
	const char *up[] = { "..", "..", "hello.txt" };
	static const char expect_hello[] = "hello from the host\n";
	uint64_t total = opt_u64("size", 3 << 20);
	uint8_t *buf = buf_alloc(chunk);
	struct p9_msg attr;
	struct p9_qid q;
	int64_t n;
	unsigned int entries = 0, subfiles = 0;
	uint64_t off;

	/* read a file the host wrote */
	check(v9p_walk(c, 0, 1, 1, hello, &q), "walk hello.txt");
	if (q.type != P9_QTFILE)
		probe_fail("hello.txt qid type %u", q.type);
	check(v9p_lopen(c, 1, 0), "lopen hello.txt");
	n = v9p_read(c, 1, 0, buf, chunk);
	if (n != (int64_t)sizeof(expect_hello) - 1 ||
	    memcmp(buf, expect_hello, n))
		probe_fail("hello.txt: read %ld bytes, wrong content", n);
	check(v9p_getattr(c, 1, &attr), "getattr hello.txt");
	if (attr.u.rgetattr.a.size != sizeof(expect_hello) - 1)
		probe_fail("hello.txt size %lu", attr.u.rgetattr.a.size);
	check(v9p_clunk(c, 1), "clunk");
	pr("probe: 9p read host file OK\n");

	/* ".." at the root stays there */
	check(v9p_walk(c, 0, 1, 3, up, &q), "walk ../../hello.txt");
	check(v9p_clunk(c, 1), "clunk");
	if (v9p_walk(c, 0, 1, 1, missing, NULL) != 2)
		probe_fail("walk to a missing name did not fail with ENOENT");

	/* create and write a file the host checks, in msize-sized chunks */
	check(v9p_walk(c, 0, 2, 0, NULL, NULL), "clone root");
	check(v9p_lcreate(c, 2, "from-probe", 02 | 0100 | 01000, 0640),
	      "lcreate from-probe");
	for (off = 0; off < total; off += n) {
		uint32_t len = total - off < chunk ? total - off : chunk;

		for (uint32_t i = 0; i < len; i++)
			buf[i] = pat(off + i);
		n = v9p_write(c, 2, off, buf, len);
		if (n != len)
			probe_fail("write at %lu: %ld", off, n);
	}
	for (off = 0; off < total; off += n) {
		n = v9p_read(c, 2, off, buf, chunk);
		if (n <= 0)
			probe_fail("read back at %lu: %ld", off, n);
		for (int64_t i = 0; i < n; i++)
			if (buf[i] != pat(off + i))
				probe_fail("read back: byte %lu differs", off + i);
	}
	check(v9p_getattr(c, 2, &attr), "getattr from-probe");
	if (attr.u.rgetattr.a.size != total ||
	    (attr.u.rgetattr.a.mode & 07777) != 0640)
		probe_fail("from-probe size %lu mode %o", attr.u.rgetattr.a.size,
			   attr.u.rgetattr.a.mode);
	check(v9p_clunk(c, 2), "clunk");
	pr("probe: 9p write+read %lu bytes in %u-byte chunks OK\n", total, chunk);

	/* readdir of the root and of sub/ */
	for (int d = 0; d < 2; d++) {
		check(v9p_walk(c, 0, 3, d, sub, NULL), "walk dir");
		check(v9p_lopen(c, 3, 0), "lopen dir");
		off = 0;
		for (;;) {
			struct p9_dirent de;
			size_t pos = 0;
			int r;

			n = v9p_readdir(c, 3, off, buf, chunk < 65536 ? chunk : 65536);
			if (n < 0)
				probe_fail("readdir: %ld", n);
			if (!n)
				break;
			while ((r = p9_dirent_next(buf, n, &pos, &de)) == 1) {
				off = de.offset;
				if (d == 0)
					entries++;
				else if (de.name.len > 1 && de.name.s[0] == 'f')
					subfiles++;
			}
			if (r < 0)
				probe_fail("malformed Rreaddir");
		}
		check(v9p_clunk(c, 3), "clunk dir");
	}
	if (entries < 4 || subfiles != opt_u64("subfiles", 100))
		probe_fail("readdir: %u root entries, %u files in sub/", entries,
			   subfiles);
	pr("probe: 9p readdir root=%u sub=%u OK\n", entries, subfiles);

	/* a hostile walk over 16 names is refused, the share still works */
	{
		struct v9p_call k = { .t = { .type = P9_TWALK } };

		k.t.u.twalk.fid = 0;
		k.t.u.twalk.newfid = 4;
		k.t.u.twalk.nwname = P9_MAXWELEM;
		for (int i = 0; i < P9_MAXWELEM; i++)
			k.t.u.twalk.wname[i] = (struct p9_str){ 1, "." };
		check(v9p_rpc(c, &k), "walk of 16 names");
		check(v9p_clunk(c, 4), "clunk");
	}
	check(v9p_walk(c, 0, 5, 0, NULL, NULL), "clone");
	check(v9p_lcreate(c, 5, "scratch", 02 | 0100, 0600), "lcreate scratch");
	check(v9p_clunk(c, 5), "clunk");
	check(v9p_unlinkat(c, 0, "scratch"), "unlinkat scratch");
	if (v9p_unlinkat(c, 0, "scratch") != 2)
		probe_fail("second unlinkat did not fail with ENOENT");
	pr("probe: 9p pattern name=from-probe len=%lu\n", total);
}

/* Moves size bytes sequentially with qd requests of msize-24 in flight,
 * each on its own buffer; returns the elapsed nanoseconds. */
static uint64_t seq_job(struct v9p *c, uint32_t fid, bool write, uint64_t size,
			unsigned int qd, uint8_t *bufs)
{
	uint32_t chunk = c->msize - 24;
	struct v9p_call calls[V9P_MAX_QD];
	bool busy[V9P_MAX_QD] = { false };
	uint64_t next = 0, done = 0, t0 = rdtsc();

	while (done < size) {
		struct v9p_call *k;
		bool added = false;

		for (unsigned int i = 0; i < qd && next < size; i++) {
			uint32_t len = size - next < chunk ? size - next : chunk;

			if (busy[i])
				continue;
			k = &calls[i];
			memset(k, 0, sizeof(*k));
			k->t.type = write ? P9_TWRITE : P9_TREAD;
			if (write) {
				k->t.u.twrite.fid = fid;
				k->t.u.twrite.offset = next;
				k->t.u.twrite.d = (struct p9_data){ len, NULL };
				k->wdata = bufs + (size_t)i * chunk;
			} else {
				k->t.u.tread.fid = fid;
				k->t.u.tread.offset = next;
				k->t.u.tread.count = len;
				k->rdata = bufs + (size_t)i * chunk;
				k->rdata_len = len;
			}
			if (v9p_submit(c, k))
				probe_fail("submit");
			busy[i] = true;
			next += len;
			added = true;
		}
		if (added)
			v9p_kick(c);
		k = v9p_reap(c);
		if (!k) {
			cpu_relax();
			continue;
		}
		if (k->err)
			probe_fail("%s error %d", write ? "write" : "read", k->err);
		if (write ? !k->r.u.rwrite.count : !k->rcount)
			probe_fail("%s moved nothing at offset %lu",
				   write ? "write" : "read", k->t.u.tread.offset);
		done += write ? k->r.u.rwrite.count : k->rcount;
		busy[k - calls] = false;
	}
	return ticks_to_ns(rdtsc() - t0);
}

static void bench_9p(void)
{
	struct v9p *c = open_9p();
	uint64_t size = opt_u64("size", 1ull << 30);
	unsigned int qd = opt_u64("qd", 4), files = opt_u64("files", 10000);
	uint32_t chunk = c->msize - 24;
	uint8_t *bufs;
	uint64_t ns, t0;
	char name[32];

	if (qd < 1 || qd > V9P_MAX_QD)
		probe_fail("qd must be 1 to %u", V9P_MAX_QD);
	bufs = buf_alloc((size_t)chunk * qd);
	for (size_t i = 0; i < (size_t)chunk * qd; i++)
		bufs[i] = pat(i);
	check(v9p_walk(c, 0, 1, 0, NULL, NULL), "clone");
	check(v9p_lcreate(c, 1, "bench.dat", 02 | 0100 | 01000, 0644), "lcreate");
	ns = seq_job(c, 1, true, size, qd, bufs);
	pr("job=seqwrite msize=%u qd=%u bytes=%lu ns=%lu bw_mbs=%lu\n", c->msize,
	   qd, size, ns, size * 1000 / (ns ? ns : 1));
	ns = seq_job(c, 1, false, size, qd, bufs);
	pr("job=seqread msize=%u qd=%u bytes=%lu ns=%lu bw_mbs=%lu\n", c->msize,
	   qd, size, ns, size * 1000 / (ns ? ns : 1));
	check(v9p_clunk(c, 1), "clunk");
	check(v9p_unlinkat(c, 0, "bench.dat"), "unlinkat");

	/* metadata: per file walk (clone), lcreate, getattr, clunk, unlinkat */
	t0 = rdtsc();
	for (unsigned int i = 0; i < files; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		check(v9p_walk(c, 0, 10, 0, NULL, NULL), "walk");
		check(v9p_lcreate(c, 10, name, 02 | 0100, 0644), "lcreate");
		check(v9p_getattr(c, 10, NULL), "getattr");
		check(v9p_clunk(c, 10), "clunk");
		check(v9p_unlinkat(c, 0, name), "unlinkat");
	}
	ns = ticks_to_ns(rdtsc() - t0);
	pr("job=metadata files=%u ops=%u ns=%lu ops_s=%lu files_s=%lu\n", files,
	   files * 5, ns, (uint64_t)(files * 5 * 1000000000ull / (ns ? ns : 1)),
	   (uint64_t)(files * 1000000000ull / (ns ? ns : 1)));
}

PROBE_TEST(p9, "9p", test_9p,
	   "virtio-9p: version/attach/walk/lopen/lcreate/read/write/getattr/readdir/clunk on a prepared share");
PROBE_TEST(bench_p9, "bench-9p", bench_9p,
	   "virtio-9p: sequential write/read (size=, msize=, qd=) and a metadata job (files=)");
