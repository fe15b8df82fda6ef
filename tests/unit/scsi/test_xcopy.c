/* SCSI disk target: EXTENDED COPY (LID1) and RECEIVE COPY RESULTS on two
 * disks over real temporary files through the io_uring backend: parameter
 * lists good and hostile, copies within and between the disks (data
 * checked), the copy_file_range fallback, cache=none, held results per list
 * identifier, the limits, and a disk destroyed while a copy names it.
 * Copies that must be in flight are held at the backend's test gate, so no
 * test depends on timing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"
#include "scsi/disk.h"

#define NBLOCKS 2048u
#define BS 512u
#define SENSE_COPY_ABORTED 0x0a

struct treq {
	struct scsi_req r;
	int completed;
	struct iovec iov[1];
};

struct tdisk {
	char path[64];
	struct blk_backend be;
	struct scsi_disk *d;
	uint8_t naa[8];
	bool open;
};

static struct {
	struct tdisk a, b;
	struct blk_queue *q;
	struct scsi_lun_map luns;
} E;

static void done_cb(struct scsi_req *r)
{
	((struct treq *)r)->completed++;
}

static void prep(struct treq *t, const uint8_t *cdb, unsigned int cdb_len,
		 enum scsi_dir dir, void *buf, size_t len)
{
	memset(t, 0xa5, sizeof(*t));
	t->completed = 0;
	memcpy(t->r.cdb, cdb, cdb_len);
	t->r.cdb_len = cdb_len;
	t->r.buf_dir = len ? dir : SCSI_DIR_NONE;
	t->iov[0].iov_base = buf;
	t->iov[0].iov_len = len;
	t->r.iov = t->iov;
	t->r.iovcnt = len ? 1 : 0;
	t->r.buf_len = len;
	t->r.q = E.q;
	t->r.done = done_cb;
	t->r.seg_done = NULL;
}

static void wait_done(struct treq *t)
{
	while (!t->completed) {
		assert_int_equal(blkq_submit(E.q), 0);
		assert_true(blkq_reap(E.q, true) >= 0);
	}
	assert_int_equal(t->completed, 1);
}

static struct treq T;

static struct treq *run(struct scsi_disk *d, const uint8_t *cdb,
			unsigned int cdb_len, enum scsi_dir dir, void *buf,
			size_t len)
{
	prep(&T, cdb, cdb_len, dir, buf, len);
	scsi_disk_submit(d, &T.r);
	wait_done(&T);
	return &T;
}

static int disk_open(struct tdisk *t, bool ro, enum cache_mode cache)
{
	struct disk_cfg cfg = { .path = t->path, .cache = cache, .ro = ro };
	char err[256] = "";
	uint8_t buf[64];
	static const uint8_t inq[6] = { 0x12, 1, 0x83, 0, 64, 0 };

	if (blk_open(&t->be, &cfg, err, sizeof(err))) {
		fprintf(stderr, "blk_open: %s\n", err);
		return -1;
	}
	t->d = scsi_disk_create(&t->be, &E.luns);
	if (!t->d)
		return -1;
	t->open = true;
	/* the NAA designator the guest sees */
	run(t->d, inq, 6, SCSI_DIR_FROM_DEV, buf, sizeof(buf));
	if (T.r.status || buf[5] != 0x03 || buf[7] != 8)
		return -1;
	memcpy(t->naa, buf + 8, 8);
	return 0;
}

static void disk_close(struct tdisk *t)
{
	if (!t->open)
		return;
	scsi_disk_destroy(t->d);
	blk_close(&t->be);
	t->open = false;
}

static int mkfile(struct tdisk *t)
{
	int fd;
	uint8_t blk[BS];

	snprintf(t->path, sizeof(t->path), "/tmp/iovm-xcopy-test-XXXXXX");
	fd = mkstemp(t->path);
	if (fd < 0 || ftruncate(fd, NBLOCKS * BS))
		return -1;
	/* every block says which disk and LBA it is */
	for (unsigned int i = 0; i < NBLOCKS; i++) {
		memset(blk, 0, BS);
		snprintf((char *)blk, BS, "%s lba %u", t == &E.a ? "A" : "B", i);
		for (unsigned int k = 32; k < BS; k++)
			blk[k] = (uint8_t)(i * 7 + k + (t == &E.a ? 0 : 101));
		if (pwrite(fd, blk, BS, (off_t)i * BS) != BS)
			return -1;
	}
	close(fd);
	return 0;
}

static int setup_mode(bool b_ro, enum cache_mode cache)
{
	memset(&E, 0, sizeof(E));
	E.luns.bits[0] = 1;
	E.q = blkq_create(64);
	if (!E.q || mkfile(&E.a) || mkfile(&E.b))
		return -1;
	if (disk_open(&E.a, false, cache) || disk_open(&E.b, b_ro, cache))
		return -1;
	return 0;
}

static int setup(void **state)
{
	return setup_mode(false, CACHE_WRITEBACK);
}

static int setup_b_ro(void **state)
{
	return setup_mode(true, CACHE_WRITEBACK);
}

static int setup_direct(void **state)
{
	return setup_mode(false, CACHE_NONE);
}

static int teardown(void **state)
{
	blk_set_test_hooks(NULL);
	blkq_destroy(E.q);
	disk_close(&E.a);
	disk_close(&E.b);
	unlink(E.a.path);
	unlink(E.b.path);
	return 0;
}

/* ---- parameter lists ---- */

struct plist {
	uint8_t p[2048];
	size_t ncscd, cscd_len, seg_len;
};

static void pl_init(struct plist *l, uint8_t list_id, uint8_t usage)
{
	memset(l, 0, sizeof(*l));
	l->p[0] = list_id;
	l->p[1] = usage << 3;
}

/* CSCD descriptors come first: add them all before the segments. */
static void pl_cscd(struct plist *l, const uint8_t *naa)
{
	uint8_t *e = l->p + 16 + l->cscd_len;

	e[0] = 0xe4;
	e[4] = 0x01;		/* binary */
	e[5] = 0x03;		/* LU, NAA */
	e[7] = 8;
	memcpy(e + 8, naa, 8);
	e[30] = BS >> 8;
	e[31] = BS & 0xff;
	l->cscd_len += 32;
	l->ncscd++;
}

static uint8_t *pl_b2b(struct plist *l, uint16_t si, uint16_t di,
		       uint16_t nblocks, uint64_t slba, uint64_t dlba)
{
	uint8_t *e = l->p + 16 + l->cscd_len + l->seg_len;

	e[0] = 0x02;
	e[3] = 0x18;
	e[4] = si >> 8;
	e[5] = si;
	e[6] = di >> 8;
	e[7] = di;
	e[10] = nblocks >> 8;
	e[11] = nblocks;
	for (int i = 0; i < 8; i++) {
		e[12 + i] = slba >> (56 - 8 * i);
		e[20 + i] = dlba >> (56 - 8 * i);
	}
	l->seg_len += 28;
	return e;
}

static uint8_t *pl_offs(struct plist *l, uint16_t si, uint16_t di,
			uint32_t bytes, uint64_t slba, uint16_t sbo,
			uint64_t dlba, uint16_t dbo)
{
	uint8_t *e = l->p + 16 + l->cscd_len + l->seg_len;

	e[0] = 0x0a;
	e[3] = 0x1c;
	e[5] = si;
	e[7] = di;
	e[8] = bytes >> 24;
	e[9] = bytes >> 16;
	e[10] = bytes >> 8;
	e[11] = bytes;
	for (int i = 0; i < 8; i++) {
		e[12 + i] = slba >> (56 - 8 * i);
		e[20 + i] = dlba >> (56 - 8 * i);
	}
	e[28] = sbo >> 8;
	e[29] = sbo;
	e[30] = dbo >> 8;
	e[31] = dbo;
	l->seg_len += 32;
	return e;
}

static size_t pl_done(struct plist *l)
{
	l->p[2] = l->cscd_len >> 8;
	l->p[3] = l->cscd_len;
	l->p[10] = l->seg_len >> 8;
	l->p[11] = l->seg_len;
	return 16 + l->cscd_len + l->seg_len;
}

static void xcopy_prep(struct treq *t, void *p, size_t len)
{
	uint8_t cdb[16] = { 0x83, 0 };

	cdb[10] = len >> 24;
	cdb[11] = len >> 16;
	cdb[12] = len >> 8;
	cdb[13] = len;
	prep(t, cdb, 16, SCSI_DIR_TO_DEV, p, len);
}

static struct treq *xcopy(struct scsi_disk *d, void *p, size_t len)
{
	xcopy_prep(&T, p, len);
	scsi_disk_submit(d, &T.r);
	wait_done(&T);
	return &T;
}

static struct treq *rcr(struct scsi_disk *d, uint8_t sa, uint8_t id,
			uint8_t *buf, uint32_t alloc)
{
	const uint8_t cdb[16] = { 0x84, sa, id, 0, 0, 0, 0, 0, 0, 0,
				  alloc >> 24, alloc >> 16, alloc >> 8, alloc, 0, 0 };

	return run(d, cdb, 16, SCSI_DIR_FROM_DEV, buf, alloc);
}

static void expect_good(const struct treq *t)
{
	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_GOOD);
	assert_int_equal(t->r.sense_len, 0);
}

/* key/ASC/ASCQ, and the field pointer (-1: none) into the list */
static void expect_sense(const struct treq *t, uint8_t key, uint16_t asc,
			 int field)
{
	const uint8_t *s = t->r.sense;

	assert_int_equal(t->r.status, SAM_STAT_CHECK_CONDITION);
	assert_true(t->r.sense_len >= 18);
	assert_int_equal(s[0], 0x70);
	assert_int_equal(s[2], key);
	assert_int_equal(s[12] << 8 | s[13], asc);
	if (field < 0) {
		assert_int_equal(s[15] & 0x80, 0);
	} else {
		/* SKSV; C/D: the CDB's ASC 24h, else the list's */
		assert_int_equal(s[15] & 0xc0, asc == 0x2400 ? 0xc0 : 0x80);
		assert_int_equal(s[16] << 8 | s[17], field);
	}
}

/* COPY ABORTED carrying a copy target's sense data (fixed format). */
static void expect_target_sense(const struct treq *t, bool dst, uint8_t key,
				uint16_t asc)
{
	const uint8_t *s = t->r.sense;
	uint8_t off = s[dst ? 9 : 8];

	assert_int_equal(t->r.sense_len, 32);
	assert_int_equal(off, 18);
	assert_int_equal(s[off], 0x70);
	assert_int_equal(s[off + 2], key);
	assert_int_equal(s[off + 12] << 8 | s[off + 13], asc);
}

static void read_blocks(struct tdisk *t, uint64_t lba, unsigned int n,
			uint8_t *buf)
{
	assert_int_equal(pread(t->be.fd_buffered >= 0 ? t->be.fd_buffered :
			       t->be.fd, buf, (size_t)n * BS, (off_t)lba * BS),
			 (ssize_t)n * BS);
}

static uint8_t bufa[NBLOCKS * BS], bufb[NBLOCKS * BS];

/* ---- copies ---- */

static void test_copy_within(void **state)
{
	struct plist l;
	size_t n;

	read_blocks(&E.a, 0, 64, bufa);
	pl_init(&l, 1, 2);		/* results not held */
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 64, 0, NBLOCKS - 64);
	n = pl_done(&l);
	expect_good(xcopy(E.a.d, l.p, n));
	assert_int_equal(T.r.xferred, n);
	read_blocks(&E.a, NBLOCKS - 64, 64, bufb);
	assert_memory_equal(bufa, bufb, 64 * BS);
	/* not held: nothing to report */
	expect_sense(rcr(E.a.d, 0, 1, bufb, 64), SENSE_ILLEGAL_REQUEST, 0x2400, 2);
}

static void test_copy_between(void **state)
{
	struct plist l;
	uint8_t st[64];

	read_blocks(&E.a, 100, 300, bufa);
	read_blocks(&E.b, 0, 1, bufb + 400 * BS);
	/* list on disk B: copy A -> B, two segments, a zero-length one */
	pl_init(&l, 7, 0);
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);
	pl_b2b(&l, 0, 1, 200, 100, 10);
	pl_b2b(&l, 0, 1, 0, 0, NBLOCKS);	/* zero blocks at the end */
	pl_b2b(&l, 0, 1, 100, 300, 210);
	expect_good(xcopy(E.b.d, l.p, pl_done(&l)));
	read_blocks(&E.b, 10, 300, bufb);
	assert_memory_equal(bufa, bufb, 300 * BS);
	read_blocks(&E.b, 0, 1, bufb);
	assert_memory_equal(bufb, bufb + 400 * BS, BS);	/* untouched */
	/* COPY STATUS on B for list 7: done, 3 segments, 300 blocks */
	expect_good(rcr(E.b.d, 0, 7, st, sizeof(st)));
	assert_int_equal(T.r.xferred, 12);
	assert_int_equal(st[3], 8);
	assert_int_equal(st[4], 0x01);
	assert_int_equal(st[5] << 8 | st[6], 3);
	assert_int_equal(st[7], 0);
	assert_int_equal((uint32_t)st[8] << 24 | st[9] << 16 | st[10] << 8 | st[11],
			 300 * BS);
	/* reported once; A never saw list 7 */
	expect_sense(rcr(E.b.d, 0, 7, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
	expect_sense(rcr(E.a.d, 0, 7, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
}

static void test_copy_offsets(void **state)
{
	struct plist l;

	read_blocks(&E.a, 5, 3, bufa);
	pl_init(&l, 2, 3);		/* no list identifier */
	l.p[0] = 0;
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);
	pl_offs(&l, 0, 1, 1000, 5, 17, 50, 3);
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	read_blocks(&E.b, 50, 3, bufb);
	assert_memory_equal(bufa + 17, bufb + 3, 1000);
	/* usage 11b with a list identifier */
	l.p[0] = 9;
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_ILLEGAL_REQUEST,
		     0x2600, 0);
}

/* Overlapping ranges of one disk: as memmove. */
static void test_copy_overlap(void **state)
{
	struct plist l;

	read_blocks(&E.a, 0, 1000, bufa);
	pl_init(&l, 3, 2);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 1000, 0, 3);		/* up by 3 */
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	read_blocks(&E.a, 3, 1000, bufb);
	assert_memory_equal(bufa, bufb, 1000 * BS);

	read_blocks(&E.a, 500, 1000, bufa);
	pl_init(&l, 3, 2);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 1000, 500, 499);	/* down by 1 */
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	read_blocks(&E.a, 499, 1000, bufb);
	assert_memory_equal(bufa, bufb, 1000 * BS);
}

/* copy_file_range refused (as between file systems): the bounce buffer. */
static void test_copy_fallback(void **state)
{
	struct blk_test_hooks h = { .gate_fd = -1, .arrive_fd = -1,
				    .no_copy_range = true };
	struct plist l;

	blk_set_test_hooks(&h);
	read_blocks(&E.b, 1, 1500, bufa);
	pl_init(&l, 4, 2);
	pl_cscd(&l, E.b.naa);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 1, 1500, 1, 2);
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	blk_set_test_hooks(NULL);
	read_blocks(&E.a, 2, 1500, bufb);
	assert_memory_equal(bufa, bufb, 1500 * BS);
}

/* cache=none: through the backends' page-cache descriptors, coherent with
 * O_DIRECT reads that follow. */
static void test_copy_direct(void **state)
{
	struct plist l;
	uint8_t rd[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 8, 0, 0 };
	static uint8_t dbuf[8 * BS] __attribute__((aligned(4096)));

	read_blocks(&E.a, 0, 8, bufa);
	/* the destination range cached before the copy */
	run(E.b.d, rd, 16, SCSI_DIR_FROM_DEV, dbuf, sizeof(dbuf));
	expect_good(&T);
	pl_init(&l, 5, 2);
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);
	pl_b2b(&l, 0, 1, 8, 0, 40);
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	run(E.b.d, rd, 16, SCSI_DIR_FROM_DEV, dbuf, sizeof(dbuf));
	expect_good(&T);
	assert_memory_equal(bufa, dbuf, 8 * BS);
}

/* ---- hostile lists ---- */

static void test_param_errors(void **state)
{
	struct plist l;
	size_t n;
	uint8_t *e;
	uint8_t ghost[8] = { 0x3f, 1, 2, 3, 4, 5, 6, 7 };

	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 8, 0, 100);
	n = pl_done(&l);
	/* no list: GOOD; a short header; truncated descriptors */
	expect_good(xcopy(E.a.d, l.p, 0));
	expect_sense(xcopy(E.a.d, l.p, 15), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	expect_sense(xcopy(E.a.d, l.p, 16 + 31), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	expect_sense(xcopy(E.a.d, l.p, n - 1), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	/* longer than MAXIMUM DESCRIPTOR LIST LENGTH: refused unread */
	expect_sense(xcopy(E.a.d, l.p, 1025), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	/* LIST ID USAGE 01b */
	l.p[1] = 0x08;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2600, 1);
	l.p[1] = 0;
	/* inline data */
	l.p[15] = 4;
	expect_sense(xcopy(E.a.d, l.p, n + 4), SENSE_ILLEGAL_REQUEST, 0x260b, 12);
	l.p[15] = 0;
	/* CSCD list not a multiple of 32 */
	l.p[3] = 31;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2600, 2);
	l.p[3] = 32;
	/* unsupported CSCD type (FC N_Port_Name), segment type (stream) */
	l.p[16] = 0xe0;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2607, 16);
	l.p[16] = 0xe4;
	l.p[48] = 0x03;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2609, 48);
	l.p[48] = 0x02;
	/* segment descriptor length wrong for its type */
	l.p[51] = 0x14;
	l.p[11] = 24;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2600, 50);
	/* ... and running past the segment list */
	l.p[51] = 0x18;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	l.p[11] = 28;
	/* SPC-3's LU ID TYPE (obsolete): ignored; peripheral type not a disk */
	l.p[17] = 0x80;
	l.p[1] = 0x10;		/* not held: the check at the end holds */
	expect_good(xcopy(E.a.d, l.p, n));
	l.p[1] = 0;
	l.p[17] = 0x01;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2600, 17);
	/* NUL: no such device here */
	l.p[17] = 0x20;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_COPY_ABORTED, 0x0d02, 16);
	l.p[17] = 0;
	/* block length not the disk's */
	l.p[46] = 0x10;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_ILLEGAL_REQUEST, 0x2600, 45);
	l.p[46] = BS >> 8;
	/* a disk nobody has, a designator that is not NAA */
	memcpy(l.p + 24, ghost, 8);
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_COPY_ABORTED, 0x0d02, 16);
	memcpy(l.p + 24, E.a.naa, 8);
	l.p[21] = 0x01;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_COPY_ABORTED, 0x0d02, 16);
	l.p[21] = 0x03;
	/* CSCD index beyond the list */
	l.p[55] = 1;
	expect_sense(xcopy(E.a.d, l.p, n), SENSE_COPY_ABORTED, 0x0d02, 54);
	l.p[55] = 0;
	/* beyond the end of the destination, of the source */
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 8, 0, NBLOCKS - 7);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_COPY_ABORTED, 0, 48 + 20);
	expect_target_sense(&T, true, SENSE_ILLEGAL_REQUEST, 0x2100);
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	e = pl_b2b(&l, 0, 0, 8, UINT64_MAX / 2, 0);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_COPY_ABORTED, 0, 48 + 12);
	expect_target_sense(&T, false, SENSE_ILLEGAL_REQUEST, 0x2100);
	/* 0Ah: byte offset not inside a block */
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_offs(&l, 0, 0, 100, 0, BS, 10, 0);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_ILLEGAL_REQUEST, 0x2600,
		     48 + 28);
	(void)e;
	/* nothing was held by any of these */
	expect_sense(rcr(E.a.d, 0, 1, bufb, 64), SENSE_ILLEGAL_REQUEST, 0x2400, 2);
	expect_sense(rcr(E.a.d, 4, 1, bufb, 64), SENSE_ILLEGAL_REQUEST, 0x2400, 2);
}

static void test_descriptor_limits(void **state)
{
	struct plist l;
	uint8_t op[64];
	unsigned int maxc, maxs;

	expect_good(rcr(E.a.d, 3, 0, op, sizeof(op)));
	assert_int_equal(T.r.xferred, 47);
	assert_int_equal((uint32_t)op[0] << 24 | op[1] << 16 | op[2] << 8 | op[3], 43);
	maxc = op[8] << 8 | op[9];
	maxs = op[10] << 8 | op[11];
	assert_int_equal(op[43], 3);
	assert_int_equal(op[44], 0x02);
	assert_int_equal(op[45], 0x0a);
	assert_int_equal(op[46], 0xe4);

	pl_init(&l, 1, 0);
	for (unsigned int i = 0; i < maxc + 1; i++)
		pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 1, 0, 1);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_ILLEGAL_REQUEST,
		     0x2606, -1);
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	for (unsigned int i = 0; i < maxs + 1; i++)
		pl_b2b(&l, 0, 0, 1, 0, 1);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_ILLEGAL_REQUEST,
		     0x2608, -1);
	/* exactly the limits: fine */
	pl_init(&l, 1, 2);
	for (unsigned int i = 0; i < maxc; i++)
		pl_cscd(&l, i & 1 ? E.b.naa : E.a.naa);
	for (unsigned int i = 0; i < maxs; i++)
		pl_b2b(&l, 0, 1, 1, i, 1000 + i);
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	read_blocks(&E.a, 0, maxs, bufa);
	read_blocks(&E.b, 1000, maxs, bufb);
	assert_memory_equal(bufa, bufb, maxs * BS);
}

static void test_write_protected(void **state)
{
	struct plist l;

	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);		/* read-only */
	pl_b2b(&l, 0, 1, 8, 0, 0);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_COPY_ABORTED, 0, 48 + 32 + 6);
	expect_target_sense(&T, true, SENSE_DATA_PROTECT, 0x2700);
	/* from the read-only disk: fine */
	read_blocks(&E.b, 0, 8, bufb);
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.b.naa);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 1, 8, 0, 16);
	expect_good(xcopy(E.b.d, l.p, pl_done(&l)));
	read_blocks(&E.a, 16, 8, bufa);
	assert_memory_equal(bufa, bufb, 8 * BS);
}

/* ---- copies held in flight ---- */

static struct blk_test_hooks gate_hooks;

static void gate_close(void)
{
	gate_hooks.gate_fd = eventfd(0, EFD_CLOEXEC);
	gate_hooks.arrive_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	assert_true(gate_hooks.gate_fd >= 0 && gate_hooks.arrive_fd >= 0);
	blk_set_test_hooks(&gate_hooks);
}

static void gate_arrived(void)
{
	uint64_t v;

	assert_int_equal(read(gate_hooks.arrive_fd, &v, 8), 8);
}

static void gate_open(void)
{
	uint64_t one = 1;

	assert_int_equal(write(gate_hooks.gate_fd, &one, 8), 8);
}

static void gate_free(void)
{
	blk_set_test_hooks(NULL);
	close(gate_hooks.gate_fd);
	close(gate_hooks.arrive_fd);
}

static struct treq held[5];

static void test_limits_and_status(void **state)
{
	struct plist l[5];
	uint8_t st[64];

	gate_close();
	/* four copies in progress, list ids 10..13: the first held at the
	 * gate, the others queued behind it on the queue's helper */
	for (unsigned int i = 0; i < 4; i++) {
		pl_init(&l[i], 10 + i, 0);
		pl_cscd(&l[i], E.a.naa);
		pl_cscd(&l[i], E.b.naa);
		pl_b2b(&l[i], 0, 1, 100, 100 * i, 100 * i);
		xcopy_prep(&held[i], l[i].p, pl_done(&l[i]));
		scsi_disk_submit(E.a.d, &held[i].r);
		assert_int_equal(blkq_submit(E.q), 0);
	}
	gate_arrived();
	/* in progress: COPY STATUS 00h, nothing moved */
	expect_good(rcr(E.a.d, 0, 12, st, sizeof(st)));
	assert_int_equal(st[4], 0x00);
	assert_int_equal(st[5] << 8 | st[6], 0);
	/* FAILED SEGMENT DETAILS of a running copy: nothing yet */
	expect_good(rcr(E.a.d, 4, 12, st, sizeof(st)));
	assert_int_equal(T.r.xferred, 4);
	/* a list id in use; a fifth copy */
	expect_sense(xcopy(E.a.d, l[1].p, pl_done(&l[1])), SENSE_ILLEGAL_REQUEST,
		     0x0016, -1);
	pl_init(&l[4], 20, 0);
	pl_cscd(&l[4], E.a.naa);
	pl_b2b(&l[4], 0, 0, 0, 0, 1);	/* zero blocks: never queued */
	expect_sense(xcopy(E.a.d, l[4].p, pl_done(&l[4])), SENSE_ILLEGAL_REQUEST,
		     0x5503, -1);
	/* disk B has its own limit */
	expect_good(xcopy(E.b.d, l[4].p, pl_done(&l[4])));
	gate_open();	/* stays open: for all */
	for (unsigned int i = 0; i < 4; i++) {
		wait_done(&held[i]);
		expect_good(&held[i]);
	}
	gate_free();
	/* results in any order */
	for (int i = 3; i >= 0; i--) {
		expect_good(rcr(E.a.d, 0, 10 + i, st, sizeof(st)));
		assert_int_equal(st[4], 0x01);
		assert_int_equal(st[5] << 8 | st[6], 1);
		assert_int_equal((uint32_t)st[10] << 8 | st[11], 100 * BS);
	}
	/* a completed copy's FAILED SEGMENT DETAILS: none held */
	expect_sense(rcr(E.a.d, 4, 10, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
}

/* More held results than the table keeps: the oldest go. */
static void test_results_table(void **state)
{
	struct plist l;
	uint8_t st[64];

	for (unsigned int i = 0; i < 40; i++) {
		pl_init(&l, 100 + i, 0);
		pl_cscd(&l, E.a.naa);
		pl_b2b(&l, 0, 0, 1, i, 1000 + i);
		expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	}
	expect_sense(rcr(E.a.d, 0, 100, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
	expect_good(rcr(E.a.d, 0, 139, st, sizeof(st)));
	assert_int_equal(st[4], 0x01);
	expect_good(rcr(E.a.d, 0, 124, st, sizeof(st)));
	expect_sense(rcr(E.a.d, 0, 123, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
	/* a new command with list id 130, refused: 130's old result goes;
	 * one with usage 11b (no list id) leaves 131's alone */
	pl_init(&l, 130, 0);
	expect_sense(xcopy(E.a.d, l.p, 15), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	expect_sense(rcr(E.a.d, 0, 130, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
	pl_init(&l, 131, 3);
	expect_sense(xcopy(E.a.d, l.p, 15), SENSE_ILLEGAL_REQUEST, 0x1a00, -1);
	expect_good(rcr(E.a.d, 0, 131, st, sizeof(st)));
	/* a LU reset: held data goes (after the unit attention) */
	scsi_disk_reset(E.a.d, false);
	expect_sense(rcr(E.a.d, 0, 132, st, sizeof(st)), SENSE_UNIT_ATTENTION,
		     0x2903, -1);
	expect_sense(rcr(E.a.d, 0, 132, st, sizeof(st)), SENSE_ILLEGAL_REQUEST,
		     0x2400, 2);
}

static void *destroy_b(void *arg)
{
	disk_close(&E.b);
	return NULL;
}

/* A disk destroyed while a copy names it: destroy waits for the copy; a
 * later copy cannot reach it. */
static void test_destroy_while_copying(void **state)
{
	struct plist l;
	pthread_t th;
	uint8_t naa_b[8];
	struct treq *t = &held[0];

	memcpy(naa_b, E.b.naa, 8);
	read_blocks(&E.a, 0, 200, bufa);
	gate_close();
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);
	pl_b2b(&l, 0, 1, 200, 0, 0);
	xcopy_prep(t, l.p, pl_done(&l));
	scsi_disk_submit(E.a.d, &t->r);
	assert_int_equal(blkq_submit(E.q), 0);
	gate_arrived();
	assert_int_equal(pthread_create(&th, NULL, destroy_b, NULL), 0);
	/* once B is out of the registry, a new copy cannot name it */
	for (;;) {
		struct plist l2;

		pl_init(&l2, 2, 0);
		pl_cscd(&l2, naa_b);
		pl_b2b(&l2, 0, 0, 0, 0, 1);	/* not queued behind the gate */
		xcopy(E.a.d, l2.p, pl_done(&l2));
		if (T.r.status == SAM_STAT_CHECK_CONDITION)
			break;
		/* the registry lookup raced the destroying thread */
		assert_int_equal(T.r.status, SAM_STAT_GOOD);
	}
	expect_sense(&T, SENSE_COPY_ABORTED, 0x0d02, 16);
	gate_open();
	wait_done(t);
	expect_good(t);
	assert_int_equal(pthread_join(th, NULL), 0);
	gate_free();
	/* B's file has the data although B is gone */
	{
		int fd = open(E.b.path, O_RDONLY);

		assert_true(fd >= 0);
		assert_int_equal(pread(fd, bufb, 200 * BS, 0), 200 * BS);
		close(fd);
	}
	assert_memory_equal(bufa, bufb, 200 * BS);
}

/* An aborted EXTENDED COPY stops at its next chunk and says so. */
static void test_abort(void **state)
{
	struct plist l;
	struct treq *t = &held[0];

	gate_close();
	pl_init(&l, 1, 0);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 0, 100, 0, 1000);
	xcopy_prep(t, l.p, pl_done(&l));
	scsi_disk_submit(E.a.d, &t->r);
	assert_int_equal(blkq_submit(E.q), 0);
	gate_arrived();
	scsi_disk_abort(&t->r, false);
	gate_open();
	wait_done(t);
	gate_free();
	assert_int_equal(t->r.host, SCSI_HOST_ABORTED);
	assert_int_equal(t->r.status, SAM_STAT_TASK_ABORTED);
}

static void prout(struct scsi_disk *d, uint8_t sa, uint8_t type, uint64_t key,
		  uint64_t sakey)
{
	uint8_t p[24] = { 0 };
	const uint8_t cdb[10] = { 0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0 };

	for (int i = 0; i < 8; i++) {
		p[i] = key >> (56 - 8 * i);
		p[8 + i] = sakey >> (56 - 8 * i);
	}
	run(d, cdb, 10, SCSI_DIR_TO_DEV, p, sizeof(p));
	expect_good(&T);
}

/* B reserved (WRITE EXCLUSIVE) by another nexus: a copy that disk A
 * receives may read B but not write it. */
static void test_reserved_target(void **state)
{
	char st[96], err[256];
	struct scsi_disk *other;
	struct plist l;

	snprintf(st, sizeof(st), "%s.pr", E.b.path);
	/* the other nexus: a second disk on B's image (registered first, so
	 * that B's own disk is the one A's copies find) */
	scsi_disk_destroy(E.b.d);
	other = scsi_disk_create(&E.b.be, &E.luns);
	E.b.d = scsi_disk_create(&E.b.be, &E.luns);
	assert_non_null(other);
	assert_non_null(E.b.d);
	assert_int_equal(scsi_disk_pr_setup(other, st, "other", err, sizeof(err)), 0);
	assert_int_equal(scsi_disk_pr_setup(E.b.d, st, "me", err, sizeof(err)), 0);
	prout(other, 0x00, 0, 0, 0x1234);		/* REGISTER */
	prout(other, 0x01, 0x01, 0x1234, 0);		/* RESERVE, WE */

	pl_init(&l, 1, 2);
	pl_cscd(&l, E.a.naa);
	pl_cscd(&l, E.b.naa);
	pl_b2b(&l, 0, 1, 8, 0, 0);
	expect_sense(xcopy(E.a.d, l.p, pl_done(&l)), SENSE_COPY_ABORTED, 0,
		     16 + 64 + 6);
	read_blocks(&E.b, 0, 8, bufb);
	pl_init(&l, 1, 2);
	pl_cscd(&l, E.b.naa);
	pl_cscd(&l, E.a.naa);
	pl_b2b(&l, 0, 1, 8, 0, 500);
	expect_good(xcopy(E.a.d, l.p, pl_done(&l)));
	read_blocks(&E.a, 500, 8, bufa);
	assert_memory_equal(bufa, bufb, 8 * BS);
	scsi_disk_destroy(other);
	unlink(st);
}

static void test_vpd_inquiry(void **state)
{
	uint8_t buf[128];
	static const uint8_t std[6] = { 0x12, 0, 0, 0, 96, 0 };
	static const uint8_t tpc[6] = { 0x12, 1, 0x8f, 0, 128, 0 };
	static const uint8_t rsoc[12] = { 0xa3, 0x0c, 0x02, 0x84, 0, 0x04, 0, 0, 0, 64, 0, 0 };

	run(E.a.d, std, 6, SCSI_DIR_FROM_DEV, buf, 96);
	expect_good(&T);
	assert_int_equal(buf[5] & 0x08, 0x08);		/* 3PC */
	run(E.a.d, tpc, 6, SCSI_DIR_FROM_DEV, buf, sizeof(buf));
	expect_good(&T);
	assert_int_equal(buf[1], 0x8f);
	assert_int_equal(buf[2] << 8 | buf[3], T.r.xferred - 4);
	assert_int_equal(buf[4] << 8 | buf[5], 0x0001);	/* supported commands */
	assert_int_equal(buf[9], 0x83);
	assert_int_equal(buf[12], 0x84);
	/* REPORT SUPPORTED OPERATION CODES knows RECEIVE COPY RESULTS 04h */
	run(E.a.d, rsoc, 12, SCSI_DIR_FROM_DEV, buf, 64);
	expect_good(&T);
	assert_int_equal(buf[1] & 0x07, 0x03);
	assert_int_equal(buf[3], 16);
	assert_int_equal(buf[4], 0x84);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_copy_within, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_between, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_offsets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_overlap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_direct, setup_direct,
						teardown),
		cmocka_unit_test_setup_teardown(test_param_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_descriptor_limits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_write_protected, setup_b_ro,
						teardown),
		cmocka_unit_test_setup_teardown(test_limits_and_status, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_results_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_while_copying, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reserved_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vpd_inquiry, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
