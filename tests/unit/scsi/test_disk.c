/* SCSI disk target: every command with good and bad CDBs, exact sense data,
 * residuals, write-cache semantics, aborts, absent LUNs and the piecewise
 * (LSI) data phase, on a real temporary file through the io_uring backend. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"
#include "scsi/disk_int.h"

#define NBLOCKS 2048u
#define BS 512u

struct treq {
	struct scsi_req r;
	int completed;
	int seg_res;
	int segs;
	struct iovec iov[8];
};

static struct {
	char path[64];
	struct blk_backend be;
	struct blk_queue *q;
	struct scsi_disk *d;
	struct scsi_lun_map luns;
	bool fake_be;		/* be built by hand (error injection) */
} E;

static void done_cb(struct scsi_req *r)
{
	struct treq *t = (struct treq *)r;

	t->completed++;
}

static void seg_cb(struct scsi_req *r, int res)
{
	struct treq *t = (struct treq *)r;

	t->seg_res = res;
	t->segs++;
}

static int open_disk(bool ro)
{
	struct disk_cfg cfg = { .path = E.path, .cache = CACHE_WRITEBACK, .ro = ro };
	char err[256] = "";
	int ret = blk_open(&E.be, &cfg, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "blk_open: %s\n", err);
		return -1;
	}
	E.luns = (struct scsi_lun_map){ { 0 } };
	E.luns.bits[0] = 1 | 1u << 3;	/* LUNs 0 and 3 */
	E.d = scsi_disk_create(&E.be, &E.luns);
	E.q = blkq_create(64);
	return E.d && E.q ? 0 : -1;
}

static int setup_common(bool ro)
{
	int fd;

	snprintf(E.path, sizeof(E.path), "/tmp/iovm-scsi-test-XXXXXX");
	fd = mkstemp(E.path);
	if (fd < 0 || ftruncate(fd, NBLOCKS * BS))
		return -1;
	close(fd);
	E.fake_be = false;
	return open_disk(ro);
}

static int setup(void **state)
{
	return setup_common(false);
}

static int setup_ro(void **state)
{
	return setup_common(true);
}

static int teardown(void **state)
{
	blkq_destroy(E.q);
	scsi_disk_destroy(E.d);
	if (E.fake_be) {
		close(E.be.fd);
	} else {
		blk_close(&E.be);
		unlink(E.path);
	}
	return 0;
}

/* A backend on a file that fails the way a broken disk does: a directory
 * (reads fail with EISDIR) or /dev/null (writes work, fdatasync fails). */
static int setup_fake(const char *path)
{
	memset(&E.be, 0, sizeof(E.be));
	E.be.fd = open(path, O_RDWR);
	if (E.be.fd < 0)
		E.be.fd = open(path, O_RDONLY);
	E.be.fd_buffered = -1;
	E.be.size = NBLOCKS * BS;
	E.be.block_size = BS;
	E.be.phys_block_size = BS;
	strcpy(E.be.serial, "fake0001");
	E.fake_be = true;
	E.luns = (struct scsi_lun_map){ { 1 } };
	E.d = scsi_disk_create(&E.be, &E.luns);
	E.q = blkq_create(16);
	return E.be.fd >= 0 && E.d && E.q ? 0 : -1;
}

static int setup_dir(void **state)
{
	return setup_fake("/tmp");
}

static int setup_null(void **state)
{
	return setup_fake("/dev/null");
}

static void prep(struct treq *t, const uint8_t *cdb, unsigned int cdb_len,
		 enum scsi_dir dir, void *buf, size_t len)
{
	memset(t, 0xa5, sizeof(*t));	/* the target must not rely on zeroes */
	t->completed = 0;
	t->segs = 0;
	memcpy(t->r.cdb, cdb, cdb_len < SCSI_CDB_MAX ? cdb_len : SCSI_CDB_MAX);
	t->r.cdb_len = cdb_len;
	t->r.buf_dir = len ? dir : SCSI_DIR_NONE;
	t->iov[0].iov_base = buf;
	t->iov[0].iov_len = len;
	t->r.iov = t->iov;
	t->r.iovcnt = len ? 1 : 0;
	t->r.buf_len = len;
	t->r.q = E.q;
	t->r.done = done_cb;
	t->r.seg_done = seg_cb;
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

static struct treq *run(const uint8_t *cdb, unsigned int cdb_len,
			enum scsi_dir dir, void *buf, size_t len)
{
	prep(&T, cdb, cdb_len, dir, buf, len);
	scsi_disk_submit(E.d, &T.r);
	wait_done(&T);
	return &T;
}

#define RUN(dir, buf, len, ...)                                          \
	({                                                               \
		const uint8_t _c[] = { __VA_ARGS__ };                    \
		run(_c, sizeof(_c), dir, buf, len);                      \
	})
#define RUN0(...) RUN(SCSI_DIR_NONE, NULL, 0, __VA_ARGS__)

static void expect_good(const struct treq *t)
{
	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_GOOD);
	assert_int_equal(t->r.sense_len, 0);
}

/* Fixed-format sense, with the sense-key specific bytes. */
static void expect_sense(const struct treq *t, uint8_t key, uint8_t asc,
			 uint8_t ascq, uint8_t sks0, uint16_t field)
{
	uint8_t want[18] = { 0x70, 0, key, 0, 0, 0, 0, 10, 0, 0, 0, 0, asc, ascq,
			     0, sks0, sks0 ? field >> 8 : 0, sks0 ? field : 0 };

	assert_int_equal(t->r.host, SCSI_HOST_OK);
	assert_int_equal(t->r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(t->r.sense_len, 18);
	assert_memory_equal(t->r.sense, want, 18);
}

/* SKS byte 0 for a CDB field: SKSV, C/D, and the bit pointer if bit >= 0 */
#define CDB_FIELD(bit) (0xc0 | ((bit) >= 0 ? 0x08 | (bit) : 0))
#define PARAM_FIELD(bit) (0x80 | ((bit) >= 0 ? 0x08 | (bit) : 0))

static void expect_invalid_cdb(const struct treq *t, uint16_t byte, int bit)
{
	expect_sense(t, SENSE_ILLEGAL_REQUEST, 0x24, 0, CDB_FIELD(bit), byte);
}

/* ---- commands ---- */

static void test_tur(void **state)
{
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));
	/* reserved bit in byte 1 */
	expect_invalid_cdb(RUN0(0x00, 0x20, 0, 0, 0, 0), 1, 5);
	/* NACA in the control byte is not supported */
	expect_invalid_cdb(RUN0(0x00, 0, 0, 0, 0, 0x04), 5, 2);
}

static void test_invalid_opcode(void **state)
{
	expect_sense(RUN0(0xff, 0, 0, 0, 0, 0), SENSE_ILLEGAL_REQUEST, 0x20, 0, 0, 0);
	expect_sense(RUN0(0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0), SENSE_ILLEGAL_REQUEST,
		     0x20, 0, 0, 0);
	/* known opcode, unknown service action */
	expect_invalid_cdb(RUN0(0x9e, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0),
			   1, 4);
	/* a CDB shorter than its opcode's length */
	expect_invalid_cdb(RUN0(0x28, 0, 0, 0), 0, -1);
	/* empty CDB */
	prep(&T, (const uint8_t[]){ 0 }, 0, SCSI_DIR_NONE, NULL, 0);
	scsi_disk_submit(E.d, &T.r);
	wait_done(&T);
	expect_sense(&T, SENSE_ILLEGAL_REQUEST, 0x20, 0, 0, 0);
}

static void test_inquiry_std(void **state)
{
	uint8_t buf[256];
	struct treq *t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 0, 0, 0, 255, 0);

	expect_good(t);
	assert_int_equal(t->r.xferred, 96);
	assert_int_equal(buf[0], 0x00);		/* connected direct-access */
	assert_int_equal(buf[2], 0x06);		/* SPC-4 */
	assert_int_equal(buf[3], 0x12);
	assert_int_equal(buf[4], 91);
	assert_int_equal(buf[7], 0x02);		/* CMDQUE */
	assert_memory_equal(buf + 8, "IOVM    iovm disk       ", 24);
	/* allocation length cuts the data: residual is the rest */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 0, 0, 0, 36, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 36);
	/* page code without EVPD; obsolete CMDDT */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 255, 0x12, 0, 0x80, 0, 255, 0), 2, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 255, 0x12, 2, 0, 0, 255, 0), 1, 1);
}

static void test_inquiry_vpd(void **state)
{
	uint8_t buf[256];
	static const uint8_t pages[] = { 0, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2 };
	struct treq *t;

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0x00, 0, 255, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 11);
	assert_int_equal(buf[3], 7);
	assert_memory_equal(buf + 4, pages, 7);

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0x80, 0, 255, 0);
	expect_good(t);
	assert_int_equal(buf[1], 0x80);
	assert_int_equal(buf[3], strlen(E.be.serial));
	assert_memory_equal(buf + 4, E.be.serial, strlen(E.be.serial));

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0x83, 0, 255, 0);
	expect_good(t);
	assert_int_equal(buf[4], 0x01);		/* binary */
	assert_int_equal(buf[5], 0x03);		/* LU, NAA */
	assert_int_equal(buf[8] >> 4, 3);	/* NAA locally assigned */
	assert_int_equal(buf[16], 0x02);	/* ASCII */
	assert_int_equal(buf[17], 0x01);	/* T10 vendor id */
	assert_memory_equal(buf + 20, "IOVM    ", 8);
	assert_int_equal(t->r.xferred, 4 + (buf[2] << 8 | buf[3]));

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0xb0, 0, 255, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 64);
	assert_int_equal(buf[3], 0x3c);
	assert_int_equal(buf[4], 1);			/* WSNZ */
	assert_int_equal(buf[8] << 24 | buf[9] << 16 | buf[10] << 8 | buf[11],
			 (32 << 20) / BS);		/* max transfer */
	assert_int_equal(buf[27], 32);			/* unmap descriptors */

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0xb1, 0, 255, 0);
	expect_good(t);
	assert_int_equal(buf[4] << 8 | buf[5], 1);	/* non-rotating */

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x12, 1, 0xb2, 0, 255, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 8);
	assert_int_equal(buf[5], 0xe4);
	assert_int_equal(buf[6], 0x02);

	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 255, 0x12, 1, 0x99, 0, 255, 0), 2, -1);
}

static void test_read_capacity(void **state)
{
	uint8_t buf[32];
	static const uint8_t rc10[8] = { 0, 0, 0x07, 0xff, 0, 0, 0x02, 0 };
	uint8_t rc16[32] = { 0, 0, 0, 0, 0, 0, 0x07, 0xff, 0, 0, 0x02, 0, 0 };
	struct treq *t;

	t = RUN(SCSI_DIR_FROM_DEV, buf, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	expect_good(t);
	assert_memory_equal(buf, rc10, 8);
	/* LBA without PMI */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 8, 0x25, 0, 0, 0, 0, 1, 0, 0, 0, 0),
			   2, -1);
	/* buffer too small for the 8 bytes */
	t = RUN(SCSI_DIR_FROM_DEV, buf, 4, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	assert_int_equal(t->r.host, SCSI_HOST_OVERRUN);

	t = RUN(SCSI_DIR_FROM_DEV, buf, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 32, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 32);
	rc16[13] = E.be.phys_block_size == 4096 ? 3 : 0;
	rc16[14] = 0xc0;
	assert_memory_equal(buf, rc16, 32);
	t = RUN(SCSI_DIR_FROM_DEV, buf, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 12, 0, 0);
	assert_int_equal(t->r.xferred, 12);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = seed + i * 7 + (i >> 9);
}

static void test_read_write_all_sizes(void **state)
{
	static uint8_t w[4 * BS], r[4 * BS];
	/* WRITE/READ 6, 10, 12, 16 at LBA 5, 2 blocks */
	static const uint8_t wr[4][16] = {
		{ 0x0a, 0, 0, 5, 2, 0 },
		{ 0x2a, 0, 0, 0, 0, 5, 0, 0, 2, 0 },
		{ 0xaa, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0 },
		{ 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0 },
	};
	static const unsigned int len[4] = { 6, 10, 12, 16 };

	for (int i = 0; i < 4; i++) {
		struct treq *t;
		uint8_t rd[16];

		fill(w, 2 * BS, i * 31 + 1);
		t = run(wr[i], len[i], SCSI_DIR_TO_DEV, w, 2 * BS);
		expect_good(t);
		assert_int_equal(t->r.xferred, 2 * BS);
		memcpy(rd, wr[i], 16);
		rd[0] &= ~0x02;		/* WRITE -> READ opcode */
		memset(r, 0, sizeof(r));
		t = run(rd, len[i], SCSI_DIR_FROM_DEV, r, 2 * BS);
		expect_good(t);
		assert_int_equal(t->r.xferred, 2 * BS);
		assert_memory_equal(r, w, 2 * BS);
	}
	/* READ(6) transfer length 0 means 256 blocks */
	{
		static uint8_t big[256 * BS];
		struct treq *t = RUN(SCSI_DIR_FROM_DEV, big, sizeof(big), 0x08, 0, 0, 0, 0, 0);

		expect_good(t);
		assert_int_equal(t->r.xferred, 256 * BS);
	}
	/* READ(10) of 0 blocks: nothing moves, residual is the buffer */
	{
		struct treq *t = RUN(SCSI_DIR_FROM_DEV, r, BS, 0x28, 0, 0, 0, 0, 5, 0, 0, 0, 0);

		expect_good(t);
		assert_int_equal(t->r.xferred, 0);
	}
}

static void test_rw_errors(void **state)
{
	static uint8_t b[4 * BS];
	struct treq *t;

	/* last block is fine, one past it is not */
	expect_good(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0x07, 0xff, 0, 0, 1, 0));
	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0x08, 0, 0, 0, 1, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, 2 * BS, 0x28, 0, 0, 0, 0x07, 0xff, 0, 0, 2, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* 64-bit LBA overflow */
	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x88, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
			 0xff, 0xff, 0xff, 0, 0, 0, 2, 0, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* more than the maximum transfer length */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			       0, 1, 0, 1, 0, 0), 10, -1);
	/* RDPROTECT is not supported */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0),
			   1, 5);
	/* buffer smaller than the transfer: not executed */
	t = RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 2, 0);
	assert_int_equal(t->r.host, SCSI_HOST_OVERRUN);
	/* buffer in the wrong direction */
	t = RUN(SCSI_DIR_TO_DEV, b, 2 * BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 2, 0);
	assert_int_equal(t->r.host, SCSI_HOST_BAD_DIR);
	/* larger buffer: residual, and nothing past the transfer moves */
	memset(b, 0xee, sizeof(b));
	t = RUN(SCSI_DIR_FROM_DEV, b, 4 * BS, 0x28, 0, 0, 0, 0, 100, 0, 0, 1, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, BS);
	assert_int_equal(b[BS], 0xee);
	assert_int_equal(b[4 * BS - 1], 0xee);
	assert_int_equal(T.iov[0].iov_len, BS);	/* the iovec was cut */
}

/* Every request in flight at once, on a scatter-gather list. */
static void test_many_in_flight(void **state)
{
	enum { N = 48 };
	static struct treq reqs[N];
	static uint8_t data[N][BS * 2], back[N][BS * 2];
	int done = 0;

	for (int i = 0; i < N; i++) {
		uint8_t cdb[10] = { 0x2a, 0, 0, 0, 0, 10 + 2 * i, 0, 0, 2, 0 };

		fill(data[i], sizeof(data[i]), i);
		prep(&reqs[i], cdb, 10, SCSI_DIR_TO_DEV, data[i], BS);
		/* two segments */
		reqs[i].iov[1].iov_base = data[i] + BS;
		reqs[i].iov[1].iov_len = BS;
		reqs[i].r.iovcnt = 2;
		reqs[i].r.buf_len = 2 * BS;
		scsi_disk_submit(E.d, &reqs[i].r);
	}
	assert_int_equal(blkq_inflight(E.q), N);
	while (done < N) {
		assert_int_equal(blkq_submit(E.q), 0);
		assert_true(blkq_reap(E.q, true) > 0);
		done = 0;
		for (int i = 0; i < N; i++)
			done += reqs[i].completed;
	}
	for (int i = 0; i < N; i++) {
		uint8_t cdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 10 + 2 * i, 0, 0, 0, 2, 0, 0 };

		expect_good(&reqs[i]);
		prep(&reqs[i], cdb, 16, SCSI_DIR_FROM_DEV, back[i], sizeof(back[i]));
		scsi_disk_submit(E.d, &reqs[i].r);
	}
	assert_int_equal(blkq_inflight(E.q), N);
	for (int i = 0; i < N; i++)
		wait_done(&reqs[i]);
	for (int i = 0; i < N; i++) {
		expect_good(&reqs[i]);
		assert_memory_equal(back[i], data[i], sizeof(data[i]));
	}
}

static void test_verify_sync(void **state)
{
	expect_good(RUN0(0x2f, 0, 0, 0, 0, 0, 0, 0, 8, 0));
	expect_good(RUN0(0x8f, 0, 0, 0, 0, 0, 0, 0, 0x07, 0xf8, 0, 0, 0, 8, 0, 0));
	expect_sense(RUN0(0x2f, 0, 0, 0, 0x07, 0xff, 0, 0, 2, 0), SENSE_ILLEGAL_REQUEST,
		     0x21, 0, 0, 0);
	/* BYTCHK 10b is reserved; VRPROTECT (no protection information) */
	expect_invalid_cdb(RUN0(0x2f, 0x04, 0, 0, 0, 0, 0, 0, 1, 0), 1, 2);
	expect_invalid_cdb(RUN0(0x2f, 0x20, 0, 0, 0, 0, 0, 0, 1, 0), 1, 5);
	/* the range is checked first: BYTCHK 01b past the end */
	expect_sense(RUN0(0x2f, 0x02, 0, 0, 0x07, 0xff, 0, 0, 2, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* zero blocks with BYTCHK: nothing to compare, no data */
	expect_good(RUN0(0x2f, 0x02, 0, 0, 0, 0, 0, 0, 0, 0));
	expect_good(RUN0(0xaf, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0));
	expect_good(RUN0(0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	expect_good(RUN0(0x35, 0x02, 0, 0, 0, 0x10, 0, 0, 0x10, 0));
	expect_good(RUN0(0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	expect_sense(RUN0(0x35, 0, 0, 0, 0x08, 0x01, 0, 0, 0, 0), SENSE_ILLEGAL_REQUEST,
		     0x21, 0, 0, 0);
}

static void test_mode_sense(void **state)
{
	uint8_t buf[128];
	struct treq *t;

	/* MODE SENSE(6), all pages, with block descriptor */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0, 0x3f, 0, 255, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 4 + 8 + 20 + 12);
	assert_int_equal(buf[0], 4 + 8 + 20 + 12 - 1);
	assert_int_equal(buf[2], 0x10);		/* DPOFUA, not WP */
	assert_int_equal(buf[3], 8);
	assert_int_equal(buf[4 + 3], NBLOCKS & 0xff);
	assert_int_equal(buf[4 + 6], BS >> 8);
	assert_int_equal(buf[12], 0x08);
	assert_int_equal(buf[13], 0x12);
	assert_int_equal(buf[14], 0x04);	/* WCE on by default */
	assert_int_equal(buf[32], 0x0a);
	assert_int_equal(buf[33], 0x0a);
	assert_int_equal(buf[34], 0x00);	/* D_SENSE off */
	/* MODE SENSE(10), caching only, long LBA descriptor */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x5a, 0x10, 0x08, 0, 0, 0, 0, 0, 128, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 8 + 16 + 20);
	assert_int_equal(buf[1], 8 + 16 + 20 - 2);
	assert_int_equal(buf[4], 1);		/* LONGLBA */
	assert_int_equal(buf[7], 16);
	/* DBD, changeable values of the control page */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0x08, 0x4a, 0, 255, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 4 + 12);
	assert_int_equal(buf[3], 0);
	assert_int_equal(buf[6], 0x04);		/* D_SENSE changeable */
	assert_int_equal(buf[7], 0x00);
	/* saved values: not supported */
	expect_sense(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0, 0xc8, 0, 255, 0),
		     SENSE_ILLEGAL_REQUEST, 0x39, 0, 0, 0);
	/* unknown page, unknown subpage */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0, 0x19, 0, 255, 0),
			   2, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0, 0x08, 1, 255, 0),
			   3, -1);
	/* allocation length shorter than the data */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0, 0x3f, 0, 10, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 10);
	assert_int_equal(buf[0], 4 + 8 + 20 + 12 - 1);
}

static void mode_select_caching(bool wce)
{
	uint8_t p[4 + 20] = { 0, 0, 0, 0, 0x08, 0x12, wce ? 0x04 : 0 };
	struct treq *t = RUN(SCSI_DIR_TO_DEV, p, sizeof(p), 0x15, 0x10, 0, 0, sizeof(p), 0);

	expect_good(t);
	assert_int_equal(t->r.xferred, sizeof(p));
}

static void test_mode_select(void **state)
{
	uint8_t p[64];
	uint8_t buf[64];

	mode_select_caching(false);
	assert_false(scsi_disk_wce(E.d));
	RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x1a, 0x08, 0x08, 0, 255, 0);
	assert_int_equal(buf[4 + 2], 0);
	mode_select_caching(true);
	assert_true(scsi_disk_wce(E.d));

	/* PF=0 and SP=1 are refused */
	memset(p, 0, sizeof(p));
	p[4] = 0x08;
	p[5] = 0x12;
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, p, 24, 0x15, 0x00, 0, 0, 24, 0), 1, 4);
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, p, 24, 0x15, 0x11, 0, 0, 24, 0), 1, 0);
	/* a non-changeable bit (RCD) */
	p[6] = 0x01;
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 24, 0x15, 0x10, 0, 0, 24, 0),
		     SENSE_ILLEGAL_REQUEST, 0x26, 0, PARAM_FIELD(0), 6);
	/* wrong page length */
	p[6] = 0;
	p[5] = 0x10;
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 24, 0x15, 0x10, 0, 0, 24, 0),
		     SENSE_ILLEGAL_REQUEST, 0x26, 0, PARAM_FIELD(-1), 5);
	/* unknown page */
	p[4] = 0x1c;
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 24, 0x15, 0x10, 0, 0, 24, 0),
		     SENSE_ILLEGAL_REQUEST, 0x26, 0, PARAM_FIELD(-1), 4);
	/* page cut short by the parameter list length */
	p[4] = 0x08;
	p[5] = 0x12;
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 12, 0x15, 0x10, 0, 0, 12, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	/* shorter than the header */
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 2, 0x15, 0x10, 0, 0, 2, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	/* block descriptor with another block length */
	memset(p, 0, sizeof(p));
	p[3] = 8;
	p[4 + 6] = 0x10;	/* 4096 */
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 12, 0x15, 0x10, 0, 0, 12, 0),
		     SENSE_ILLEGAL_REQUEST, 0x26, 0, PARAM_FIELD(-1), 9);
	/* MODE SELECT(10) with block descriptor (same block length) + control
	 * page setting D_SENSE */
	memset(p, 0, sizeof(p));
	p[7] = 8;
	p[8 + 6] = BS >> 8;
	p[16] = 0x0a;
	p[17] = 0x0a;
	p[18] = 0x04;
	p[19] = 0x10;
	p[24] = 0xff;
	p[25] = 0xff;
	expect_good(RUN(SCSI_DIR_TO_DEV, p, 28, 0x55, 0x10, 0, 0, 0, 0, 0, 0, 28, 0));
	/* now sense comes in descriptor format, with the SKS descriptor */
	{
		struct treq *t = RUN0(0x00, 0x20, 0, 0, 0, 0);
		static const uint8_t want[16] = { 0x72, 0x05, 0x24, 0x00, 0, 0, 0, 8,
						  0x02, 0x06, 0, 0, 0xcd, 0, 1, 0 };

		assert_int_equal(t->r.status, SAM_STAT_CHECK_CONDITION);
		assert_int_equal(t->r.sense_len, 16);
		assert_memory_equal(t->r.sense, want, 16);
		t = RUN0(0xff, 0, 0, 0, 0, 0);
		assert_int_equal(t->r.sense_len, 8);
		assert_memory_equal(t->r.sense,
				    ((const uint8_t[]){ 0x72, 5, 0x20, 0, 0, 0, 0, 0 }), 8);
	}
	p[18] = 0;
	expect_good(RUN(SCSI_DIR_TO_DEV, p, 28, 0x55, 0x10, 0, 0, 0, 0, 0, 0, 28, 0));
	expect_sense(RUN0(0xff, 0, 0, 0, 0, 0), SENSE_ILLEGAL_REQUEST, 0x20, 0, 0, 0);
	/* parameter list longer than any valid one */
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, p, 28, 0x55, 0x10, 0, 0, 0, 0, 0, 0x20, 0, 0),
			   7, -1);
	/* zero-length list: nothing to do */
	expect_good(RUN0(0x15, 0x10, 0, 0, 0, 0));
}

/* Write-through: with WCE=0 (or FUA) a write completes only after the
 * flush; the /dev/null backend fails every flush, which makes the flush
 * visible as the command's status. */
static void test_wce_semantics(void **state)
{
	static uint8_t b[BS];

	expect_good(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0));
	/* FUA forces the flush */
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0x08, 0, 0, 0, 1, 0, 0, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x0c, 0, 0, 0);
	expect_sense(RUN0(0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0), SENSE_MEDIUM_ERROR, 0x0c, 0, 0, 0);
	mode_select_caching(false);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x0c, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x0a, 0, 0, 1, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x0c, 0, 0, 0);
	mode_select_caching(true);
	expect_good(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0));
}

/* On a working file: WCE=0 writes land and read back. */
static void test_wce_off_data(void **state)
{
	static uint8_t w[BS], r[BS];

	mode_select_caching(false);
	fill(w, BS, 99);
	expect_good(RUN(SCSI_DIR_TO_DEV, w, BS, 0x2a, 0, 0, 0, 0, 7, 0, 0, 1, 0));
	expect_good(RUN(SCSI_DIR_FROM_DEV, r, BS, 0x28, 0, 0, 0, 0, 7, 0, 0, 1, 0));
	assert_memory_equal(r, w, BS);
	mode_select_caching(true);
}

static void test_medium_error(void **state)
{
	static uint8_t b[BS];

	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x11, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x0c, 0, 0, 0);
}

static uint64_t fake_now;
static unsigned int error_lines, suppressed_lines;
static char last_line[256];

static uint64_t fake_clock(void)
{
	return fake_now;
}

static void count_line(const char *line)
{
	if (strstr(line, "scsi disk") && strstr(line, "read (opcode 0x28) failed"))
		error_lines++;
	if (strstr(line, "similar messages suppressed")) {
		suppressed_lines++;
		snprintf(last_line, sizeof(last_line), "%s", line);
	}
}

/* Every failed command reaches the log (both HBAs complete through the
 * target): LOG_RATE_BURST lines per interval, then how many were left out
 * once the interval is over; each is counted in the disk's state. */
static void test_errors_logged_rated(void **state)
{
	static uint8_t b[BS];
	const struct blk_errors *e = scsi_disk_errors(E.d);
	unsigned int n = LOG_RATE_BURST + 5;
	struct blk_errors before = *e;	/* the group shares one disk */

	fake_now = 1;
	error_lines = suppressed_lines = 0;
	log_set_clock(fake_clock);
	log_set_sink(count_line);
	for (unsigned int i = 0; i < n; i++)
		expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, i, 0, 0, 1, 0),
			     SENSE_MEDIUM_ERROR, 0x11, 0, 0, 0);
	assert_int_equal(error_lines, LOG_RATE_BURST);
	assert_int_equal(suppressed_lines, 0);
	fake_now += LOG_RATE_INTERVAL_NS;
	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_MEDIUM_ERROR, 0x11, 0, 0, 0);
	log_set_sink(NULL);
	log_set_clock(NULL);
	assert_int_equal(error_lines, LOG_RATE_BURST + 1);
	assert_int_equal(suppressed_lines, 1);
	assert_non_null(strstr(last_line, " 5 similar messages suppressed"));
	assert_int_equal(e->read - before.read, n + 1);
	assert_int_equal(blk_errors_total(e) - blk_errors_total(&before), n + 1);
}

static void test_read_only(void **state)
{
	static uint8_t b[BS];
	uint8_t um[24] = { 0, 22, 0, 16 };
	struct treq *t;

	expect_good(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0));
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, um, 24, 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0),
		     SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	/* the compare-and-write family writes; VERIFY only reads */
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2e, 0x02, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			 0, 0, 0), SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, b, BS, 0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			 1, 0, 0), SENSE_DATA_PROTECT, 0x27, 0, 0, 0);
	expect_good(RUN(SCSI_DIR_TO_DEV, b, BS, 0x2f, 0x02, 0, 0, 0, 0, 0, 0, 1, 0));
	t = RUN(SCSI_DIR_FROM_DEV, b, 64, 0x1a, 0, 0x08, 0, 64, 0);
	expect_good(t);
	assert_int_equal(b[2], 0x90);	/* WP | DPOFUA */
}

static void test_report_luns(void **state)
{
	uint8_t buf[64];
	static const uint8_t want[24] = { 0, 0, 0, 16, 0, 0, 0, 0,
					  0, 0, 0, 0, 0, 0, 0, 0,
					  0, 3, 0, 0, 0, 0, 0, 0 };
	struct treq *t;

	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 24);
	assert_memory_equal(buf, want, 24);
	/* well-known LUNs only: none */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa0, 0, 1, 0, 0, 0, 0, 0, 0, 64, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 8);
	assert_int_equal(buf[3], 0);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 64, 0xa0, 0, 3, 0, 0, 0, 0, 0, 0, 64, 0, 0),
			   2, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, 64, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0),
			   6, -1);
}

static void test_rsoc(void **state)
{
	static uint8_t buf[4096];
	struct treq *t;
	uint32_t len;
	bool saw_unmap = false;

	/* all commands */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0);
	expect_good(t);
	len = buf[0] << 24 | buf[1] << 16 | buf[2] << 8 | buf[3];
	assert_int_equal(t->r.xferred, len + 4);
	assert_int_equal(len % 8, 0);
	for (uint32_t i = 4; i < len + 4; i += 8)
		if (buf[i] == 0x42 && buf[i + 7] == 10)
			saw_unmap = true;
	assert_true(saw_unmap);
	/* with timeouts descriptors */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 0x80, 0, 0, 0, 0, 0, 0x10, 0, 0, 0);
	expect_good(t);
	assert_int_equal((buf[0] << 24 | buf[1] << 16 | buf[2] << 8 | buf[3]) % 20, 0);
	/* one command: READ(10) */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 1, 0x28, 0, 0, 0, 0, 1, 0, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 14);
	assert_memory_equal(buf, ((const uint8_t[]){ 0, 3, 0, 10, 0x28, 0x18, 0xff, 0xff,
						     0xff, 0xff, 0x1f, 0xff, 0xff, 0 }), 14);
	/* not supported opcode */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 1, 0xe0, 0, 0, 0, 0, 1, 0, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 4);
	assert_int_equal(buf[1], 1);
	/* READ CAPACITY(16) by opcode + service action */
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 2, 0x9e, 0, 0x10, 0, 0, 1, 0, 0, 0);
	expect_good(t);
	assert_int_equal(buf[1], 3);
	assert_int_equal(buf[3], 16);
	/* opcode with service actions asked without one, and vice versa */
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 1, 0x9e, 0, 0,
			       0, 0, 1, 0, 0, 0), 2, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 2, 0x28, 0, 0,
			       0, 0, 1, 0, 0, 0), 2, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xa3, 0x0c, 5, 0x28, 0, 0,
			       0, 0, 1, 0, 0, 0), 2, -1);
}

static bool zeroes(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void write_blocks(uint32_t lba, uint32_t n, uint8_t seed)
{
	static uint8_t w[64 * BS];

	fill(w, n * BS, seed);
	expect_good(RUN(SCSI_DIR_TO_DEV, w, n * BS, 0x2a, 0, lba >> 24, lba >> 16, lba >> 8,
			lba, 0, n >> 8, n, 0));
}

static void read_blocks(uint32_t lba, uint32_t n, uint8_t *out)
{
	expect_good(RUN(SCSI_DIR_FROM_DEV, out, n * BS, 0x28, 0, lba >> 24, lba >> 16,
			lba >> 8, lba, 0, n >> 8, n, 0));
}

static void test_unmap(void **state)
{
	static uint8_t r[64 * BS];
	uint8_t p[8 + 16 * 40];
	struct treq *t;

	write_blocks(100, 16, 3);
	memset(p, 0, sizeof(p));
	p[1] = 6 + 32;
	p[3] = 32;
	p[8 + 7] = 100;		/* LBA 100, 4 blocks */
	p[8 + 11] = 4;
	p[24 + 7] = 110;	/* LBA 110, 2 blocks */
	p[24 + 11] = 2;
	t = RUN(SCSI_DIR_TO_DEV, p, 40, 0x42, 0, 0, 0, 0, 0, 0, 0, 40, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 40);
	read_blocks(100, 16, r);
	assert_true(zeroes(r, 4 * BS));
	assert_false(zeroes(r + 4 * BS, BS));
	assert_true(zeroes(r + 10 * BS, 2 * BS));
	assert_false(zeroes(r + 12 * BS, BS));
	/* list length 0: nothing */
	expect_good(RUN0(0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	/* shorter than the header */
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 6, 0x42, 0, 0, 0, 0, 0, 0, 0, 6, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	/* descriptor data length beyond the list */
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 24, 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	/* out of range */
	p[8 + 6] = 0x08;	/* LBA 0x864 */
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, 40, 0x42, 0, 0, 0, 0, 0, 0, 0, 40, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* more descriptors than the Block Limits page allows */
	memset(p, 0, sizeof(p));
	p[0] = (6 + 16 * 40) >> 8;
	p[1] = (6 + 16 * 40) & 0xff;
	p[2] = (16 * 40) >> 8;
	p[3] = (16 * 40) & 0xff;
	expect_sense(RUN(SCSI_DIR_TO_DEV, p, sizeof(p), 0x42, 0, 0, 0, 0, 0, 0,
			 sizeof(p) >> 8, sizeof(p) & 0xff, 0),
		     SENSE_ILLEGAL_REQUEST, 0x26, 0, PARAM_FIELD(-1), 2);
	/* ANCHOR is not supported */
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, p, 24, 0x42, 1, 0, 0, 0, 0, 0, 0, 24, 0), 1, 0);
	/* the data buffer is shorter than the parameter list length */
	t = RUN(SCSI_DIR_TO_DEV, p, 24, 0x42, 0, 0, 0, 0, 0, 0, 0, 40, 0);
	assert_int_equal(t->r.host, SCSI_HOST_OVERRUN);
}

static void test_write_same(void **state)
{
	static uint8_t r[64 * BS], blk[BS];
	struct treq *t;

	/* zero block with UNMAP */
	write_blocks(200, 8, 5);
	memset(blk, 0, BS);
	t = RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0x08, 0, 0, 0, 200, 0, 0, 4, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, BS);
	read_blocks(200, 8, r);
	assert_true(zeroes(r, 4 * BS));
	assert_false(zeroes(r + 4 * BS, BS));
	/* a pattern over 50 blocks (more than one chunk of repeats) */
	fill(blk, BS, 77);
	t = RUN(SCSI_DIR_TO_DEV, blk, BS, 0x93, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 50, 0, 0);
	expect_good(t);
	read_blocks(256, 50, r);
	for (int i = 0; i < 50; i++)
		assert_memory_equal(r + i * BS, blk, BS);
	/* the pattern split over two iovecs */
	prep(&T, (const uint8_t[]){ 0x41, 0, 0, 0, 0x01, 0x80, 0, 0, 40, 0 }, 10,
	     SCSI_DIR_TO_DEV, blk, 100);
	T.iov[1].iov_base = blk + 100;
	T.iov[1].iov_len = BS - 100;
	T.r.iovcnt = 2;
	T.r.buf_len = BS;
	scsi_disk_submit(E.d, &T.r);
	wait_done(&T);
	expect_good(&T);
	read_blocks(384, 40, r);
	for (int i = 0; i < 40; i++)
		assert_memory_equal(r + i * BS, blk, BS);
	/* NDOB: zeroes without a data-out buffer */
	expect_good(RUN0(0x93, 0x09, 0, 0, 0, 0, 0, 0, 0x01, 0x80, 0, 0, 0, 40, 0, 0));
	read_blocks(384, 40, r);
	assert_true(zeroes(r, 40 * BS));
	/* 0 blocks (WSNZ), ANCHOR, out of range */
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0), 7, -1);
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0x10, 0, 0, 0, 0, 0, 0, 1, 0), 1, 4);
	expect_sense(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0, 0, 0, 0x07, 0xff, 0, 0, 2, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
}

/* Which zeroing operations reached the backend (blkq_test_result). */
static unsigned int seen_ops;

static int record_op(const struct blk_backend *be, enum blk_op op, int res)
{
	seen_ops |= 1u << op;
	return res;
}

/* A zero WRITE SAME with UNMAP on a backend whose discard need not read
 * back zeroes (RBD, NBD): zeroes that may deallocate (ZERO_UNMAP, NBD's
 * WRITE_ZEROES without NO_HOLE), never a discard; without UNMAP, zeroes
 * that must stay allocated; where a discard reads back zeroes (a file),
 * the discard itself. */
static void test_write_same_unmap_ops(void **state)
{
	static uint8_t r[8 * BS], blk[BS];

	memset(blk, 0, BS);
	blkq_test_result = record_op;
	E.be.discard_zeroes = false;
	write_blocks(300, 8, 6);
	seen_ops = 0;
	expect_good(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0x08, 0, 0, 0x01, 0x2c, 0, 0, 4, 0));
	assert_int_equal(seen_ops, 1u << BLK_OP_ZERO_UNMAP);
	seen_ops = 0;
	expect_good(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0, 0, 0, 0x01, 0x30, 0, 0, 2, 0));
	assert_int_equal(seen_ops, 1u << BLK_OP_WRITE_ZEROES);
	read_blocks(300, 8, r);
	assert_true(zeroes(r, 6 * BS));
	assert_false(zeroes(r + 6 * BS, BS));
	E.be.discard_zeroes = true;
	seen_ops = 0;
	expect_good(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0x08, 0, 0, 0x01, 0x2c, 0, 0, 4, 0));
	assert_int_equal(seen_ops, 1u << BLK_OP_DISCARD);
	blkq_test_result = NULL;
}

static void test_start_stop_prevent(void **state)
{
	static uint8_t b[BS];
	uint8_t s[18];
	struct treq *t;

	expect_good(RUN0(0x1b, 0, 0, 0, 0, 0));		/* stop (flushes) */
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_NOT_READY, 0x04, 0x02, 0, 0);
	expect_sense(RUN(SCSI_DIR_FROM_DEV, b, BS, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_NOT_READY, 0x04, 0x02, 0, 0);
	/* INQUIRY and READ CAPACITY still work */
	expect_good(RUN(SCSI_DIR_FROM_DEV, b, 36, 0x12, 0, 0, 0, 36, 0));
	expect_good(RUN(SCSI_DIR_FROM_DEV, b, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	/* REQUEST SENSE reports the condition */
	t = RUN(SCSI_DIR_FROM_DEV, s, 18, 0x03, 0, 0, 0, 18, 0);
	expect_good(t);
	assert_int_equal(s[2], SENSE_NOT_READY);
	assert_int_equal(s[12], 0x04);
	assert_int_equal(s[13], 0x02);
	expect_good(RUN0(0x1b, 1, 0, 0, 0x01, 0));	/* start, immed */
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));
	expect_good(RUN0(0x1b, 0, 0, 0, 0x04, 0));	/* stop, no flush */
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_NOT_READY, 0x04, 0x02, 0, 0);
	expect_good(RUN0(0x1b, 0, 0, 0, 0x01, 0));
	/* power conditions and LOEJ are not supported */
	expect_invalid_cdb(RUN0(0x1b, 0, 0, 0, 0x10, 0), 4, 4);
	expect_invalid_cdb(RUN0(0x1b, 0, 0, 0, 0x02, 0), 4, 1);

	expect_good(RUN0(0x1e, 0, 0, 0, 1, 0));
	expect_good(RUN0(0x1e, 0, 0, 0, 0, 0));
	expect_invalid_cdb(RUN0(0x1e, 0, 0, 0, 2, 0), 4, 1);
}

static void test_request_sense_ua(void **state)
{
	uint8_t s[32];
	struct treq *t;

	t = RUN(SCSI_DIR_FROM_DEV, s, sizeof(s), 0x03, 0, 0, 0, 32, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 18);
	assert_memory_equal(s, ((const uint8_t[]){ 0x70, 0, 0, 0, 0, 0, 0, 10 }), 8);
	assert_int_equal(s[12], 0);
	/* descriptor format on request */
	t = RUN(SCSI_DIR_FROM_DEV, s, sizeof(s), 0x03, 1, 0, 0, 32, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 8);
	assert_int_equal(s[0], 0x72);

	/* after a LU reset: INQUIRY passes, the next command reports the
	 * unit attention once */
	scsi_disk_reset(E.d, false);
	expect_good(RUN(SCSI_DIR_FROM_DEV, s, 32, 0x12, 0, 0, 0, 32, 0));
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_UNIT_ATTENTION, 0x29, 0x03, 0, 0);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));
	/* after an I_T nexus loss, REQUEST SENSE returns and clears it */
	scsi_disk_reset(E.d, true);
	t = RUN(SCSI_DIR_FROM_DEV, s, sizeof(s), 0x03, 0, 0, 0, 18, 0);
	expect_good(t);
	assert_int_equal(s[2], SENSE_UNIT_ATTENTION);
	assert_int_equal(s[12], 0x29);
	assert_int_equal(s[13], 0x07);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));
	/* a unit attention is not consumed by a transport-level failure */
	scsi_disk_reset(E.d, false);
	t = RUN(SCSI_DIR_FROM_DEV, s, 8, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
	assert_int_equal(t->r.host, SCSI_HOST_OVERRUN);
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_UNIT_ATTENTION, 0x29, 0x03, 0, 0);
}

/* Online resize: the medium doubles under the disk (blk_resize), then
 * scsi_disk_resized. The initiator's next command takes CAPACITY DATA HAS
 * CHANGED (after a reset's unit attention, if one is pending; INQUIRY
 * does not take it), then READ CAPACITY (10) and (16) answer the new size
 * and the new blocks can be written and read back. */
static void test_resize(void **state)
{
	uint8_t buf[32], data[BS], back[BS];
	uint64_t last = 2 * NBLOCKS - 1;
	char err[256];
	struct treq *t;

	/* before: the block past the end is out of range */
	expect_sense(RUN(SCSI_DIR_FROM_DEV, data, BS, 0x28, 0, 0, 0, NBLOCKS >> 8,
			 NBLOCKS & 0xff, 0, 0, 1, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0x00, 0, 0);
	/* a size that did not change makes no unit attention */
	scsi_disk_resized(E.d);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));

	assert_int_equal(blk_resize(&E.be, 2ull * NBLOCKS * BS, err, sizeof(err)), 0);
	scsi_disk_resized(E.d);
	expect_good(RUN(SCSI_DIR_FROM_DEV, buf, 32, 0x12, 0, 0, 0, 32, 0));
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_UNIT_ATTENTION, 0x2a, 0x09, 0, 0);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));
	t = RUN(SCSI_DIR_FROM_DEV, buf, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	expect_good(t);
	assert_memory_equal(buf, ((const uint8_t[]){ 0, 0, last >> 8, last & 0xff, 0, 0, 0x02, 0 }), 8);
	t = RUN(SCSI_DIR_FROM_DEV, buf, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 32, 0, 0);
	expect_good(t);
	assert_memory_equal(buf, ((const uint8_t[]){ 0, 0, 0, 0, 0, 0, last >> 8, last & 0xff,
						    0, 0, 0x02, 0 }), 12);
	/* the new blocks: the first and the last */
	fill(data, BS, 7);
	expect_good(RUN(SCSI_DIR_TO_DEV, data, BS, 0x2a, 0, 0, 0, NBLOCKS >> 8,
			NBLOCKS & 0xff, 0, 0, 1, 0));
	memset(back, 0, BS);
	expect_good(RUN(SCSI_DIR_FROM_DEV, back, BS, 0x28, 0, 0, 0, NBLOCKS >> 8,
			NBLOCKS & 0xff, 0, 0, 1, 0));
	assert_memory_equal(back, data, BS);
	expect_good(RUN(SCSI_DIR_FROM_DEV, back, BS, 0x28, 0, 0, 0, last >> 8,
			last & 0xff, 0, 0, 1, 0));
	expect_sense(RUN(SCSI_DIR_FROM_DEV, back, BS, 0x28, 0, 0, 0, (last + 1) >> 8,
			 (last + 1) & 0xff, 0, 0, 1, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0x00, 0, 0);

	/* with a reset pending too: the reset's first, then the capacity's */
	assert_int_equal(blk_resize(&E.be, 3ull * NBLOCKS * BS, err, sizeof(err)), 0);
	scsi_disk_resized(E.d);
	scsi_disk_reset(E.d, false);
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_UNIT_ATTENTION, 0x29, 0x03, 0, 0);
	expect_sense(RUN0(0x00, 0, 0, 0, 0, 0), SENSE_UNIT_ATTENTION, 0x2a, 0x09, 0, 0);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));

	/* REQUEST SENSE returns it and clears it */
	assert_int_equal(blk_resize(&E.be, 4ull * NBLOCKS * BS, err, sizeof(err)), 0);
	scsi_disk_resized(E.d);
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x03, 0, 0, 0, 18, 0);
	expect_good(t);
	assert_int_equal(buf[2], SENSE_UNIT_ATTENTION);
	assert_int_equal(buf[12], 0x2a);
	assert_int_equal(buf[13], 0x09);
	expect_good(RUN0(0x00, 0, 0, 0, 0, 0));

	/* the piecewise data phase (LSI) meets it too */
	assert_int_equal(blk_resize(&E.be, 5ull * NBLOCKS * BS, err, sizeof(err)), 0);
	scsi_disk_resized(E.d);
	prep(&T, (const uint8_t[]){ 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10,
	     SCSI_DIR_FROM_DEV, back, BS);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), 1);
	assert_int_equal(T.completed, 1);
	expect_sense(&T, SENSE_UNIT_ATTENTION, 0x2a, 0x09, 0, 0);
	t = RUN(SCSI_DIR_FROM_DEV, buf, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	expect_good(t);
	assert_int_equal(be32(buf), 5 * NBLOCKS - 1);
}

static void test_absent_lun(void **state)
{
	uint8_t buf[64];

	prep(&T, (const uint8_t[]){ 0x12, 0, 0, 0, 36, 0 }, 6, SCSI_DIR_FROM_DEV, buf, 64);
	scsi_lun_absent_submit(&E.luns, &T.r);
	assert_int_equal(T.completed, 1);
	expect_good(&T);
	assert_int_equal(T.r.xferred, 36);
	assert_int_equal(buf[0], 0x7f);

	prep(&T, (const uint8_t[]){ 0x00, 0, 0, 0, 0, 0 }, 6, SCSI_DIR_NONE, NULL, 0);
	scsi_lun_absent_submit(&E.luns, &T.r);
	expect_sense(&T, SENSE_ILLEGAL_REQUEST, 0x25, 0, 0, 0);

	prep(&T, (const uint8_t[]){ 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12,
	     SCSI_DIR_FROM_DEV, buf, 64);
	scsi_lun_absent_submit(&E.luns, &T.r);
	expect_good(&T);
	assert_int_equal(T.r.xferred, 24);

	prep(&T, (const uint8_t[]){ 0x03, 0, 0, 0, 18, 0 }, 6, SCSI_DIR_FROM_DEV, buf, 64);
	scsi_lun_absent_submit(&E.luns, &T.r);
	expect_good(&T);
	assert_int_equal(buf[2], SENSE_ILLEGAL_REQUEST);
	assert_int_equal(buf[12], 0x25);
}

static void test_abort_in_flight(void **state)
{
	static struct treq a, b;
	static uint8_t ba[BS], bb[BS];

	prep(&a, (const uint8_t[]){ 0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0 }, 10,
	     SCSI_DIR_FROM_DEV, ba, BS);
	prep(&b, (const uint8_t[]){ 0x2a, 0, 0, 0, 0, 2, 0, 0, 1, 0 }, 10,
	     SCSI_DIR_TO_DEV, bb, BS);
	scsi_disk_submit(E.d, &a.r);
	scsi_disk_submit(E.d, &b.r);
	scsi_disk_abort(&a.r, false);
	scsi_disk_abort(&b.r, true);
	wait_done(&a);
	wait_done(&b);
	assert_int_equal(a.r.host, SCSI_HOST_ABORTED);
	assert_int_equal(b.r.host, SCSI_HOST_RESET);
	assert_int_equal(blkq_inflight(E.q), 0);
	/* an aborted write-through write skips its flush stage */
	mode_select_caching(false);
	prep(&b, (const uint8_t[]){ 0x2a, 0, 0, 0, 0, 2, 0, 0, 1, 0 }, 10,
	     SCSI_DIR_TO_DEV, bb, BS);
	scsi_disk_submit(E.d, &b.r);
	scsi_disk_abort(&b.r, false);
	wait_done(&b);
	assert_int_equal(b.r.host, SCSI_HOST_ABORTED);
	mode_select_caching(true);
}

/* The LSI path: decode, begin, segments at transfer offsets, end. */
static void test_piecewise(void **state)
{
	static uint8_t w[4 * BS], r[4 * BS];
	const uint8_t wcdb[10] = { 0x2a, 0, 0, 0, 0x02, 0, 0, 0, 4, 0 };
	const uint8_t rcdb[10] = { 0x28, 0, 0, 0, 0x02, 0, 0, 0, 4, 0 };
	struct scsi_cmd_info info;
	struct iovec v;

	scsi_disk_decode(E.d, wcdb, 10, &info);
	assert_int_equal(info.dir, SCSI_DIR_TO_DEV);
	assert_int_equal(info.xfer, 4 * BS);
	assert_true(info.direct);
	assert_int_equal(info.offset, 512ull * BS);

	fill(w, sizeof(w), 42);
	prep(&T, wcdb, 10, SCSI_DIR_NONE, NULL, 0);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), 0);
	/* second half first: segments land at their transfer offset */
	v = (struct iovec){ w + 3 * BS, BS };
	assert_int_equal(scsi_disk_segment(&T.r, &v, 1, 3 * BS), 0);
	while (T.segs < 1) {
		blkq_submit(E.q);
		blkq_reap(E.q, true);
	}
	assert_int_equal(T.seg_res, BS);
	v = (struct iovec){ w, 3 * BS };
	assert_int_equal(scsi_disk_segment(&T.r, &v, 1, 0), 0);
	while (T.segs < 2) {
		blkq_submit(E.q);
		blkq_reap(E.q, true);
	}
	/* past the transfer: refused, nothing issued */
	v = (struct iovec){ w, 2 * BS };
	assert_int_equal(scsi_disk_segment(&T.r, &v, 1, 3 * BS), -EINVAL);
	scsi_disk_end(&T.r);
	wait_done(&T);
	expect_good(&T);
	assert_int_equal(T.r.xferred, 4 * BS);

	prep(&T, rcdb, 10, SCSI_DIR_NONE, NULL, 0);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), 0);
	v = (struct iovec){ r, 4 * BS };
	assert_int_equal(scsi_disk_segment(&T.r, &v, 1, 0), 0);
	while (T.segs < 1) {
		blkq_submit(E.q);
		blkq_reap(E.q, true);
	}
	scsi_disk_end(&T.r);
	wait_done(&T);
	expect_good(&T);
	assert_memory_equal(r, w, sizeof(w));

	/* a bad CDB decodes as no data and begin completes it */
	scsi_disk_decode(E.d, (const uint8_t[]){ 0x28, 0, 0xff, 0, 0, 0, 0, 0, 1, 0 }, 10, &info);
	assert_int_equal(info.dir, SCSI_DIR_NONE);
	assert_int_equal(info.xfer, 0);
	prep(&T, (const uint8_t[]){ 0x28, 0, 0xff, 0, 0, 0, 0, 0, 1, 0 }, 10, SCSI_DIR_NONE, NULL, 0);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), 1);
	assert_int_equal(T.completed, 1);
	expect_sense(&T, SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* non-direct commands go through scsi_disk_submit */
	scsi_disk_decode(E.d, (const uint8_t[]){ 0x12, 0, 0, 0, 36, 0 }, 6, &info);
	assert_int_equal(info.dir, SCSI_DIR_FROM_DEV);
	assert_int_equal(info.xfer, 36);
	assert_false(info.direct);
	prep(&T, (const uint8_t[]){ 0x12, 0, 0, 0, 36, 0 }, 6, SCSI_DIR_NONE, NULL, 0);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), -EINVAL);
}


/* ---- compare commands, PRE-FETCH, GET LBA STATUS, READ DEFECT DATA ---- */

/* Writes n blocks of buf at lba (any size, WRITE 16). */
static void write_buf(uint64_t lba, uint32_t n, const uint8_t *buf)
{
	expect_good(RUN(SCSI_DIR_TO_DEV, (void *)buf, (size_t)n * BS, 0x8a, 0, 0, 0, 0, 0,
			lba >> 24, lba >> 16, lba >> 8, lba, n >> 24, n >> 16, n >> 8, n,
			0, 0));
}

static void read_buf(uint64_t lba, uint32_t n, uint8_t *buf)
{
	expect_good(RUN(SCSI_DIR_FROM_DEV, buf, (size_t)n * BS, 0x88, 0, 0, 0, 0, 0,
			lba >> 24, lba >> 16, lba >> 8, lba, n >> 24, n >> 16, n >> 8, n,
			0, 0));
}

/* MISCOMPARE DURING VERIFY OPERATION, the offset in INFORMATION (fixed). */
static void expect_miscompare(const struct treq *t, uint32_t off)
{
	const uint8_t *s = t->r.sense;

	assert_int_equal(t->r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(t->r.sense_len, 18);
	assert_int_equal(s[0], 0xf0);	/* VALID: INFORMATION is set */
	assert_int_equal(s[2], SENSE_MISCOMPARE);
	assert_int_equal(s[12], 0x1d);
	assert_int_equal(s[13], 0);
	assert_int_equal((uint32_t)s[3] << 24 | s[4] << 16 | s[5] << 8 | s[6], off);
}

#define VN 600u	/* blocks: more than one CMP_CHUNK (256 KiB) of medium */

static void test_verify_bytchk(void **state)
{
	static uint8_t w[VN * BS], blk[BS];
	struct treq *t;

	fill(w, sizeof(w), 9);
	write_buf(100, VN, w);
	/* VERIFY(16) BYTCHK 01b: equal */
	t = RUN(SCSI_DIR_TO_DEV, w, sizeof(w), 0x8f, 0x02, 0, 0, 0, 0, 0, 0, 0, 100,
		0, 0, VN >> 8, VN & 0xff, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, sizeof(w));
	/* one byte differs in the second chunk: its offset is reported */
	w[550 * BS + 17] ^= 0x40;
	expect_miscompare(RUN(SCSI_DIR_TO_DEV, w, sizeof(w), 0x8f, 0x02, 0, 0, 0, 0, 0,
			      0, 0, 100, 0, 0, VN >> 8, VN & 0xff, 0, 0),
			  550 * BS + 17);
	w[550 * BS + 17] ^= 0x40;
	/* VERIFY(12) and (10), the first byte differs */
	expect_good(RUN(SCSI_DIR_TO_DEV, w, 8 * BS, 0xaf, 0x02, 0, 0, 0, 100, 0, 0, 0, 8,
			0, 0));
	w[0] ^= 1;
	expect_miscompare(RUN(SCSI_DIR_TO_DEV, w, 8 * BS, 0x2f, 0x12, 0, 0, 0, 100, 0, 0,
			      8, 0), 0);
	w[0] ^= 1;
	/* the buffer is shorter than the blocks to compare */
	t = RUN(SCSI_DIR_TO_DEV, w, 8 * BS - 1, 0x2f, 0x02, 0, 0, 0, 100, 0, 0, 8, 0);
	assert_int_equal(t->r.host, SCSI_HOST_OVERRUN);
	/* more blocks than the medium has: the range comes first */
	expect_sense(RUN0(0x2f, 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	/* BYTCHK 11b: one block against each block of the range */
	fill(blk, BS, 33);
	for (int i = 0; i < 8; i++)
		write_buf(40 + i, 1, blk);
	t = RUN(SCSI_DIR_TO_DEV, blk, BS, 0x2f, 0x06, 0, 0, 0, 40, 0, 0, 8, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, BS);
	blk[5] ^= 2;
	write_buf(45, 1, blk);
	blk[5] ^= 2;
	expect_miscompare(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x2f, 0x06, 0, 0, 0, 40, 0, 0, 8, 0),
			  5 * BS + 5);
}

static void test_write_verify(void **state)
{
	static uint8_t w[VN * BS], r[VN * BS];

	/* BYTCHK 01b: written, then compared with what is stored */
	fill(w, sizeof(w), 21);
	expect_good(RUN(SCSI_DIR_TO_DEV, w, sizeof(w), 0x8e, 0x02, 0, 0, 0, 0, 0, 0, 0,
			200, 0, 0, VN >> 8, VN & 0xff, 0, 0));
	read_buf(200, VN, r);
	assert_memory_equal(r, w, sizeof(w));
	/* BYTCHK 0: a write-through write */
	fill(w, 16 * BS, 22);
	expect_good(RUN(SCSI_DIR_TO_DEV, w, 16 * BS, 0x2e, 0, 0, 0, 0, 10, 0, 0, 16, 0));
	expect_good(RUN(SCSI_DIR_TO_DEV, w, 16 * BS, 0xae, 0x02, 0, 0, 0, 30, 0, 0, 0, 16,
			0, 0));
	read_buf(10, 16, r);
	assert_memory_equal(r, w, 16 * BS);
	read_buf(30, 16, r);
	assert_memory_equal(r, w, 16 * BS);
	/* BYTCHK 10b and 11b are reserved here; past the end */
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, w, BS, 0x2e, 0x04, 0, 0, 0, 0, 0, 0, 1, 0), 1, 2);
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, w, BS, 0x2e, 0x06, 0, 0, 0, 0, 0, 0, 1, 0), 1, 2);
	expect_sense(RUN(SCSI_DIR_TO_DEV, w, 2 * BS, 0x2e, 0x02, 0, 0, 0x07, 0xff, 0, 0, 2, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
}

/* COMPARE AND WRITE of n blocks at lba: cmp then new, both n blocks. */
static struct treq *caw(uint64_t lba, uint8_t n, const uint8_t *buf, size_t len)
{
	return RUN(SCSI_DIR_TO_DEV, (void *)buf, len, 0x89, 0, 0, 0, 0, 0, lba >> 24,
		   lba >> 16, lba >> 8, lba, 0, 0, 0, n, 0, 0);
}

static void test_compare_and_write(void **state)
{
	static uint8_t b[2 * 32 * BS], r[32 * BS];

	memset(b, 'A', 4 * BS);
	write_buf(20, 4, b);
	memset(b + 4 * BS, 'B', 4 * BS);
	expect_good(caw(20, 4, b, 8 * BS));
	read_buf(20, 4, r);
	assert_memory_equal(r, b + 4 * BS, 4 * BS);
	/* the medium holds B now: the compare with A fails at byte 0 and
	 * nothing is written */
	memset(b + 4 * BS, 'C', 4 * BS);
	expect_miscompare(caw(20, 4, b, 8 * BS), 0);
	read_buf(20, 4, r);
	assert_true(r[0] == 'B' && r[4 * BS - 1] == 'B');
	/* a miscompare 27 bytes before the end of the compared blocks */
	memset(b, 'B', 4 * BS);
	b[4 * BS - 27] = 'X';
	expect_miscompare(caw(20, 4, b, 8 * BS), 4 * BS - 27);
	b[4 * BS - 27] = 'B';
	expect_good(caw(20, 4, b, 8 * BS));
	read_buf(20, 4, r);
	assert_true(r[0] == 'C' && r[4 * BS - 1] == 'C');
	/* limits: 32 blocks, in range; 0 blocks does nothing */
	expect_invalid_cdb(caw(0, 33, b, sizeof(b)), 13, -1);
	expect_sense(caw(NBLOCKS - 1, 2, b, 4 * BS), SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	expect_good(caw(0, 0, NULL, 0));
	/* a buffer without the whole write half */
	assert_int_equal(caw(20, 4, b, 8 * BS - 1)->r.host, SCSI_HOST_OVERRUN);
	/* WRPROTECT is not supported */
	expect_invalid_cdb(RUN(SCSI_DIR_TO_DEV, b, 2 * BS, 0x89, 0x20, 0, 0, 0, 0, 0, 0, 0,
			       0, 0, 0, 0, 1, 0, 0), 1, 5);
}

static void test_orwrite(void **state)
{
	static uint8_t m[VN * BS], o[VN * BS], r[VN * BS];

	fill(m, sizeof(m), 3);
	fill(o, sizeof(o), 200);
	write_buf(500, VN, m);
	expect_good(RUN(SCSI_DIR_TO_DEV, o, sizeof(o), 0x8b, 0, 0, 0, 0, 0, 0, 0, 0x01,
			0xf4, 0, 0, VN >> 8, VN & 0xff, 0, 0));
	read_buf(500, VN, r);
	for (size_t i = 0; i < sizeof(r); i++)
		if (r[i] != (m[i] | o[i]))
			fail_msg("byte %zu: %#x != %#x | %#x", i, r[i], m[i], o[i]);
}

/* A piecewise command: segments of seg bytes in order, then the end. */
static void piecewise(const uint8_t *cdb, unsigned int len, uint8_t *buf,
		      uint32_t total, uint32_t seg)
{
	struct iovec v;

	prep(&T, cdb, len, SCSI_DIR_NONE, NULL, 0);
	assert_int_equal(scsi_disk_begin(E.d, &T.r), 0);
	for (uint32_t pos = 0; pos < total; pos += seg) {
		int want = T.segs + 1;

		v = (struct iovec){ buf + pos, seg < total - pos ? seg : total - pos };
		assert_int_equal(scsi_disk_segment(&T.r, &v, 1, pos), 0);
		while (T.segs < want) {
			blkq_submit(E.q);
			blkq_reap(E.q, true);
		}
	}
	scsi_disk_end(&T.r);
	wait_done(&T);
}

static void test_cmp_piecewise(void **state)
{
	static uint8_t w[VN * BS], r[VN * BS], b[8 * BS];
	const uint8_t vcdb[16] = { 0x8f, 0x02, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0,
				   VN >> 8, VN & 0xff, 0, 0 };
	const uint8_t wvcdb[10] = { 0x2e, 0x02, 0, 0, 0x03, 0, 0, 0, 64, 0 };
	const uint8_t cawcdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 60, 0, 0, 0, 4,
				     0, 0 };
	struct scsi_cmd_info info;

	scsi_disk_decode(E.d, vcdb, 16, &info);
	assert_true(info.direct);
	assert_int_equal(info.dir, SCSI_DIR_TO_DEV);
	assert_int_equal(info.xfer, VN * BS);
	fill(w, sizeof(w), 51);
	write_buf(100, VN, w);
	piecewise(vcdb, 16, w, VN * BS, 100 * BS);
	expect_good(&T);
	assert_int_equal(T.r.xferred, VN * BS);
	w[420 * BS + 3] ^= 8;	/* in the fifth segment */
	piecewise(vcdb, 16, w, VN * BS, 100 * BS);
	expect_miscompare(&T, 420 * BS + 3);
	/* WRITE AND VERIFY, in segments of odd sizes */
	fill(w, 64 * BS, 52);
	piecewise(wvcdb, 10, w, 64 * BS, 3000);
	expect_good(&T);
	read_buf(768, 64, r);
	assert_memory_equal(r, w, 64 * BS);
	/* COMPARE AND WRITE gathered from segments */
	memset(b, 'P', 4 * BS);
	write_buf(60, 4, b);
	memset(b + 4 * BS, 'Q', 4 * BS);
	piecewise(cawcdb, 16, b, 8 * BS, 1000);
	expect_good(&T);
	read_buf(60, 4, r);
	assert_memory_equal(r, b + 4 * BS, 4 * BS);
	/* ... and with half its data: nothing written */
	memset(b, 'Q', 4 * BS);
	memset(b + 4 * BS, 'R', 4 * BS);
	piecewise(cawcdb, 16, b, 4 * BS, 1000);
	expect_sense(&T, SENSE_ABORTED_COMMAND, 0x4b, 0, 0, 0);
	read_buf(60, 4, r);
	assert_int_equal(r[0], 'Q');
}

static void test_write_same_dataout_size(void **state)
{
	static uint8_t blk[2 * BS];

	fill(blk, sizeof(blk), 4);
	/* one block exactly, neither less nor more */
	expect_sense(RUN(SCSI_DIR_TO_DEV, blk, BS / 2, 0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, blk, 2 * BS, 0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0),
		     SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	expect_sense(RUN(SCSI_DIR_TO_DEV, blk, BS - 1, 0x93, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			 0, 0, 0, 1, 0, 0), SENSE_ILLEGAL_REQUEST, 0x1a, 0, 0, 0);
	expect_good(RUN(SCSI_DIR_TO_DEV, blk, BS, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0));
}

static void test_prefetch_defects(void **state)
{
	uint8_t buf[16];
	struct treq *t;

	expect_good(RUN0(0x34, 0, 0, 0, 0, 0, 0, 0, 8, 0));
	expect_good(RUN0(0x34, 0x02, 0, 0, 0, 0, 0, 0, 0, 0));	/* IMMED, to the end */
	expect_good(RUN0(0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0));
	expect_sense(RUN0(0x34, 0, 0, 0, 0x08, 0, 0, 0, 1, 0), SENSE_ILLEGAL_REQUEST,
		     0x21, 0, 0, 0);
	expect_invalid_cdb(RUN0(0x34, 0x01, 0, 0, 0, 0, 0, 0, 1, 0), 1, 0);
	/* READ DEFECT DATA: both lists valid and empty, in the format asked */
	memset(buf, 0xee, sizeof(buf));
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x37, 0, 0x1d, 0, 0, 0, 0, 0, 16, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 4);
	assert_memory_equal(buf, ((uint8_t[]){ 0, 0x1d, 0, 0 }), 4);
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0xb7, 0x0c, 0, 0, 0, 0, 0, 0, 0, 16,
		0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 8);
	assert_memory_equal(buf, ((uint8_t[]){ 0, 0x0c, 0, 0, 0, 0, 0, 0 }), 8);
}

static void test_get_lba_status(void **state)
{
	static uint8_t w[64 * BS], buf[64];
	const uint8_t unmap[24] = { 0, 22, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64,
				    0, 0, (NBLOCKS - 64) >> 8, (NBLOCKS - 64) & 0xff };
	struct treq *t;

	fill(w, sizeof(w), 1);
	write_buf(0, 64, w);
	expect_good(RUN(SCSI_DIR_TO_DEV, (void *)unmap, 24, 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0));
	t = RUN(SCSI_DIR_FROM_DEV, buf, sizeof(buf), 0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 64, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 40);
	assert_memory_equal(buf, ((uint8_t[]){ 0, 0, 0, 36, 0, 0, 0, 0 }), 8);
	/* (0, 64 blocks, mapped), (64, the rest, deallocated) */
	assert_memory_equal(buf + 8, ((uint8_t[]){ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64,
						   0 }), 13);
	assert_memory_equal(buf + 24, ((uint8_t[]){ 0, 0, 0, 0, 0, 0, 0, 64, 0, 0,
						    (NBLOCKS - 64) >> 8,
						    (NBLOCKS - 64) & 0xff, 1 }), 13);
	/* from inside the hole; a short allocation length truncates */
	t = RUN(SCSI_DIR_FROM_DEV, buf, 16, 0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0,
		0, 16, 0, 0);
	expect_good(t);
	assert_int_equal(t->r.xferred, 16);
	assert_int_equal(buf[3], 20);
	assert_memory_equal(buf + 8, ((uint8_t[]){ 0, 0, 0, 0, 0, 0, 0x01, 0 }), 8);
	expect_sense(RUN(SCSI_DIR_FROM_DEV, buf, 24, 0x9e, 0x12, 0, 0, 0, 0, 0, 0,
			 NBLOCKS >> 8, NBLOCKS & 0xff, 0, 0, 0, 24, 0, 0),
		     SENSE_ILLEGAL_REQUEST, 0x21, 0, 0, 0);
	expect_good(RUN0(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
}


/* Descriptor-format sense carries INFORMATION in its own descriptor, 64
 * bits wide, before the sense-key specific one. */
static void test_sense_information(void **state)
{
	struct sense s = { .key = SENSE_MISCOMPARE, .asc = 0x1d00, .field = -1,
			   .bit = -1, .info_valid = true, .info = 0x123456789aull };
	uint8_t p[SCSI_SENSE_MAX];
	const uint8_t want[20] = { 0x72, 0x0e, 0x1d, 0, 0, 0, 0, 12,
				   0, 0x0a, 0x80, 0, 0, 0, 0, 0x12, 0x34, 0x56,
				   0x78, 0x9a };

	assert_int_equal(disk_sense_encode(&s, true, p), 20);
	assert_memory_equal(p, want, 20);
	/* fixed format has 32 bits: a larger offset leaves VALID clear */
	assert_int_equal(disk_sense_encode(&s, false, p), 18);
	assert_int_equal(p[0], 0x70);
	s.info = 0x1234;
	disk_sense_encode(&s, false, p);
	assert_int_equal(p[0], 0xf0);
	assert_memory_equal(p + 3, ((uint8_t[]){ 0, 0, 0x12, 0x34 }), 4);
	/* both descriptors */
	s.field = 13;
	s.cd = true;
	assert_int_equal(disk_sense_encode(&s, true, p), 28);
	assert_int_equal(p[7], 20);
	assert_int_equal(p[20], 0x02);
}

/* ---- COMPARE AND WRITE atomicity ----
 * Two "VMs": two backends (two open file descriptions, as two iovm
 * processes have) with their own disk and queue, each on its own thread,
 * send a COMPARE AND WRITE of the same block expecting the same old
 * contents. The test holds an OFD lock on the block from a third
 * descriptor until both commands are waiting for it (/proc/locks lists the
 * waiters), so the two are in flight together by construction; then it
 * lets go. Exactly one must win each round; the block holds the winner's
 * data. */
struct racer {
	struct blk_backend be;
	struct blk_queue *q;
	struct scsi_disk *d;
	struct treq t;
	uint8_t buf[2 * BS];
	pthread_t th;
};

static void *race_run(void *arg)
{
	struct racer *r = arg;
	const uint8_t cdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 1, 0, 0 };

	memset(&r->t, 0, sizeof(r->t));
	memcpy(r->t.r.cdb, cdb, 16);
	r->t.r.cdb_len = 16;
	r->t.r.buf_dir = SCSI_DIR_TO_DEV;
	r->t.iov[0] = (struct iovec){ r->buf, sizeof(r->buf) };
	r->t.r.iov = r->t.iov;
	r->t.r.iovcnt = 1;
	r->t.r.buf_len = sizeof(r->buf);
	r->t.r.q = r->q;
	r->t.r.done = done_cb;
	scsi_disk_submit(r->d, &r->t.r);
	while (!r->t.completed) {
		blkq_submit(r->q);
		blkq_reap(r->q, true);
	}
	return NULL;
}

/* Waiters on OFD locks of inode ino, from /proc/locks ("N: -> OFDLCK ..."). */
static int lock_waiters(unsigned long ino)
{
	char line[256], tag[32];
	int n = 0;
	FILE *f = fopen("/proc/locks", "r");

	assert_non_null(f);
	snprintf(tag, sizeof(tag), ":%lu ", ino);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "->") && strstr(line, "OFDLCK") && strstr(line, tag))
			n++;
	fclose(f);
	return n;
}

static void test_caw_race(void **state)
{
	static struct racer r[2];
	struct disk_cfg cfg = { .path = E.path, .cache = CACHE_WRITEBACK };
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = CAW_LOCK_BASE + 256 * BS, .l_len = BS };
	uint8_t old[BS], now[BS];
	char err[256];
	struct stat st;
	int fd = open(E.path, O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(blk_open(&r[i].be, &cfg, err, sizeof(err)), 0);
		r[i].d = scsi_disk_create(&r[i].be, &E.luns);
		r[i].q = blkq_create(4);
		assert_true(r[i].d && r[i].q);
	}
	for (int round = 0; round < 20; round++) {
		int wins = 0, winner = -1;

		fill(old, BS, round);
		write_buf(256, 1, old);
		for (int i = 0; i < 2; i++) {
			memcpy(r[i].buf, old, BS);
			memset(r[i].buf + BS, 'a' + i, BS);
		}
		fl.l_type = F_WRLCK;
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_create(&r[i].th, NULL, race_run, &r[i]), 0);
		while (lock_waiters(st.st_ino) < 2)
			usleep(1000);
		fl.l_type = F_UNLCK;
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
		for (int i = 0; i < 2; i++) {
			pthread_join(r[i].th, NULL);
			if (r[i].t.r.status == SAM_STAT_GOOD) {
				wins++;
				winner = i;
			} else {
				expect_miscompare(&r[i].t, 0);
			}
		}
		assert_int_equal(wins, 1);
		read_buf(256, 1, now);
		assert_memory_equal(now, r[winner].buf + BS, BS);
	}
	/* a lock someone else holds on the image's own bytes (QEMU's image
	 * locking holds read locks on bytes 100-230) does not stall it */
	fl = (struct flock){ .l_type = F_RDLCK, .l_whence = SEEK_SET,
			     .l_start = 0, .l_len = 1 << 20 };
	assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
	memcpy(r[0].buf, now, BS);
	expect_good(caw(256, 1, r[0].buf, 2 * BS));
	for (int i = 0; i < 2; i++) {
		blkq_destroy(r[i].q);
		scsi_disk_destroy(r[i].d);
		blk_close(&r[i].be);
	}
	close(fd);
}

int main(void)
{
	const struct CMUnitTest rw[] = {
		cmocka_unit_test(test_tur),
		cmocka_unit_test(test_invalid_opcode),
		cmocka_unit_test(test_inquiry_std),
		cmocka_unit_test(test_inquiry_vpd),
		cmocka_unit_test(test_read_capacity),
		cmocka_unit_test(test_read_write_all_sizes),
		cmocka_unit_test(test_rw_errors),
		cmocka_unit_test(test_many_in_flight),
		cmocka_unit_test(test_verify_sync),
		cmocka_unit_test(test_mode_sense),
		cmocka_unit_test(test_mode_select),
		cmocka_unit_test(test_wce_off_data),
		cmocka_unit_test(test_report_luns),
		cmocka_unit_test(test_rsoc),
		cmocka_unit_test(test_unmap),
		cmocka_unit_test(test_write_same),
		cmocka_unit_test(test_write_same_unmap_ops),
		cmocka_unit_test(test_start_stop_prevent),
		cmocka_unit_test(test_request_sense_ua),
		cmocka_unit_test(test_absent_lun),
		cmocka_unit_test(test_abort_in_flight),
		cmocka_unit_test(test_piecewise),
		cmocka_unit_test(test_verify_bytchk),
		cmocka_unit_test(test_write_verify),
		cmocka_unit_test(test_compare_and_write),
		cmocka_unit_test(test_orwrite),
		cmocka_unit_test(test_cmp_piecewise),
		cmocka_unit_test(test_write_same_dataout_size),
		cmocka_unit_test(test_prefetch_defects),
		cmocka_unit_test(test_get_lba_status),
		cmocka_unit_test(test_sense_information),
		cmocka_unit_test(test_caw_race),
	};
	const struct CMUnitTest resize[] = {
		cmocka_unit_test(test_resize),
	};
	const struct CMUnitTest ro[] = {
		cmocka_unit_test(test_read_only),
	};
	const struct CMUnitTest broken_read[] = {
		cmocka_unit_test(test_medium_error),
		cmocka_unit_test(test_errors_logged_rated),
	};
	const struct CMUnitTest broken_flush[] = {
		cmocka_unit_test(test_wce_semantics),
	};
	int fails = 0;

	fails += cmocka_run_group_tests_name("scsi-disk", rw, setup, teardown);
	fails += cmocka_run_group_tests_name("scsi-disk-resize", resize, setup, teardown);
	fails += cmocka_run_group_tests_name("scsi-disk-ro", ro, setup_ro, teardown);
	fails += cmocka_run_group_tests_name("scsi-disk-eio", broken_read, setup_dir, teardown);
	fails += cmocka_run_group_tests_name("scsi-disk-flush", broken_flush, setup_null,
					     teardown);
	return fails ? 1 : 0;
}
