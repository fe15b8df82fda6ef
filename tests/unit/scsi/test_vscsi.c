/* Unit tests of virtio-scsi driven by the test virtio driver over fake guest
 * RAM: commands on several targets and LUNs, task management with requests
 * held in flight, and hostile requests. */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../block/blk_hold.h"
#include "scsi/disk.h"
#include "uring_fail.h"
#include "vdriver.h"
#include "virtio/scsi.h"

#define RAM (32u << 20)
#define DISK (4u << 20)
#define QSZ 128
#define WAIT_MS 5000
#define NREQ 2			/* request queues */
#define CTRL 0
#define RQ0 2

struct fixture {
	struct vdriver d;
	char path[3][64];
	struct virtio_dev *dev;
	uint32_t cdb_size, sense_size;
};

/* The test driver on f's device, every queue started. */
static struct fixture *start_driver(struct fixture *f)
{
	assert_int_equal(vdriver_init(&f->d, RAM), 0);
	assert_int_equal(vdriver_attach(&f->d, f->dev, 0), 0);
	for (unsigned int i = 0; i < f->dev->num_queues; i++)
		assert_int_equal(vdriver_queue_start(&f->d, i, QSZ), 0);
	f->cdb_size = VIRTIO_SCSI_CDB_DEFAULT;
	f->sense_size = VIRTIO_SCSI_SENSE_DEFAULT;
	return f;
}

/* Disks: target 0 lun 0, target 0 lun 2, target 3 lun 0 (auto target
 * numbering is tested separately). */
static struct fixture *make(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg[3];
	const struct disk_cfg *p[3];
	char err[256] = "";

	assert_non_null(f);
	for (int i = 0; i < 3; i++) {
		int fd;

		strcpy(f->path[i], "/tmp/iovm-vscsi-XXXXXX");
		fd = mkstemp(f->path[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, DISK), 0);
		close(fd);
		cfg[i] = (struct disk_cfg){ .path = f->path[i], .iface = DISK_IF_VIRTIO_SCSI,
					    .cache = CACHE_WRITEBACK, .target_set = true };
		p[i] = &cfg[i];
	}
	cfg[1].lun = 2;
	cfg[2].target = 3;
	f->dev = virtio_scsi_create(p, 3, NREQ, err, sizeof(err));
	if (!f->dev)
		fprintf(stderr, "%s\n", err);
	assert_non_null(f->dev);
	assert_int_equal(f->dev->num_queues, 2 + NREQ);
	return start_driver(f);
}

static int setup(void **state)
{
	*state = make();
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	vdriver_destroy(&f->d);
	for (int i = 0; i < 3; i++)
		unlink(f->path[i]);
	free(f);
	return 0;
}

struct cmd {
	uint64_t hdr, resp, data;
	uint32_t dlen;
	int head;
};

struct resp {
	uint32_t sense_len, resid;
	uint8_t status, response;
	uint8_t sense[96];
	uint32_t used;
};

static void lun_addr(uint8_t *l, unsigned int target, unsigned int lun)
{
	memset(l, 0, 8);
	l[0] = 1;
	l[1] = target;
	l[2] = 0x40 | lun >> 8;
	l[3] = lun;
}

/* Queues a command: header, [data-out], response, [data-in]. */
static void add_cmd(struct fixture *f, unsigned int qi, struct cmd *c,
		    unsigned int target, unsigned int lun, uint64_t id,
		    const uint8_t *cdb, unsigned int cdb_len, uint64_t data,
		    uint32_t dlen, bool data_in)
{
	uint32_t hl = VIRTIO_SCSI_REQ_HDR + f->cdb_size;
	uint32_t rl = VIRTIO_SCSI_RESP_HDR + f->sense_size;
	uint8_t *h;
	struct vbuf b[4];
	unsigned int n = 0;

	c->hdr = vdriver_alloc(&f->d, hl);
	c->resp = vdriver_alloc(&f->d, rl);
	c->data = data;
	c->dlen = dlen;
	h = vdriver_ptr(&f->d, c->hdr, hl);
	memset(h, 0, hl);
	lun_addr(h, target, lun);
	memcpy(h + 8, &id, 8);
	memcpy(h + VIRTIO_SCSI_REQ_HDR, cdb, cdb_len);
	memset(vdriver_ptr(&f->d, c->resp, rl), 0xee, rl);
	b[n++] = (struct vbuf){ c->hdr, hl, false };
	if (dlen && !data_in)
		b[n++] = (struct vbuf){ data, dlen, false };
	b[n++] = (struct vbuf){ c->resp, rl, true };
	if (dlen && data_in)
		b[n++] = (struct vbuf){ data, dlen, true };
	c->head = vdriver_add(&f->d, qi, b, n, false);
	assert_true(c->head >= 0);
}

static void read_resp(struct fixture *f, const struct cmd *c, struct resp *r)
{
	const uint8_t *p = vdriver_ptr(&f->d, c->resp, 12);

	memcpy(&r->sense_len, p, 4);
	memcpy(&r->resid, p + 4, 4);
	r->sense_len = le32toh(r->sense_len);
	r->resid = le32toh(r->resid);
	r->status = p[10];
	r->response = p[11];
	if (r->sense_len <= sizeof(r->sense))
		memcpy(r->sense, vdriver_ptr(&f->d, c->resp + 12, r->sense_len),
		       r->sense_len);
}

static void wait_cmd(struct fixture *f, unsigned int qi, struct cmd *c,
		     struct resp *r)
{
	uint32_t id, len;

	assert_int_equal(vdriver_wait_used(&f->d, qi, &id, &len, WAIT_MS), 1);
	assert_int_equal(id, c->head);
	r->used = len;
	read_resp(f, c, r);
}

static void run_cmd(struct fixture *f, unsigned int qi, unsigned int target,
		    unsigned int lun, const uint8_t *cdb, unsigned int cdb_len,
		    uint64_t data, uint32_t dlen, bool data_in, struct resp *r)
{
	struct cmd c;

	add_cmd(f, qi, &c, target, lun, 1, cdb, cdb_len, data, dlen, data_in);
	vdriver_kick(&f->d, qi);
	wait_cmd(f, qi, &c, r);
}

#define CDB(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

static uint32_t cfg32(struct fixture *f, uint32_t off)
{
	uint32_t v = 0;

	f->dev->ops->config_read(f->dev, off, &v, 4);
	return le32toh(v);
}

static void set_cfg32(struct fixture *f, uint32_t off, uint32_t v)
{
	v = htole32(v);
	f->dev->ops->config_write(f->dev, off, &v, 4);
}

static void test_config(void **state)
{
	struct fixture *f = *state;
	uint16_t mt = 0;

	assert_int_equal(f->dev->device_id, VIRTIO_ID_SCSI);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_NUM_QUEUES), NREQ);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_SEG_MAX), VIRTIO_SCSI_SEG_MAX);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_MAX_SECTORS), VIRTIO_SCSI_MAX_SECTORS);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE), 96);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE), 32);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_MAX_LUN), 255);
	f->dev->ops->config_read(f->dev, VIRTIO_SCSI_CFG_MAX_TARGET, &mt, 2);
	assert_int_equal(le16toh(mt), 3);
	/* writable fields; values out of range are refused */
	set_cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE, 64);
	set_cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE, 16);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE), 64);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE), 16);
	set_cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE, 1 << 20);
	set_cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE, 4096);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE), 64);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE), 16);
	/* read-only fields ignore writes */
	set_cfg32(f, VIRTIO_SCSI_CFG_SEG_MAX, 3);
	assert_int_equal(cfg32(f, VIRTIO_SCSI_CFG_SEG_MAX), VIRTIO_SCSI_SEG_MAX);
}

static void test_inquiry_and_luns(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 256);
	uint8_t *p = vdriver_ptr(&f->d, buf, 256);
	struct resp r;

	run_cmd(f, RQ0, 0, 0, CDB(0x12, 0, 0, 0, 96, 0), buf, 256, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(r.sense_len, 0);
	assert_int_equal(r.resid, 256 - 96);
	assert_int_equal(r.used, 12 + 96 + 96);
	assert_int_equal(p[0], 0);
	assert_memory_equal(p + 8, "IOVM    ", 8);

	/* REPORT LUNS on target 0: LUNs 0 and 2 */
	run_cmd(f, RQ0 + 1, 0, 0, CDB(0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), buf, 256,
		true, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(p[3], 16);
	assert_int_equal(p[9], 0);
	assert_int_equal(p[17], 2);
	/* target 3: one LUN */
	run_cmd(f, RQ0, 3, 0, CDB(0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), buf, 256, true, &r);
	assert_int_equal(p[3], 8);
	/* LUN 1 of target 0 does not exist: INQUIRY says so, TUR fails */
	run_cmd(f, RQ0, 0, 1, CDB(0x12, 0, 0, 0, 36, 0), buf, 36, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(p[0], 0x7f);
	run_cmd(f, RQ0, 0, 1, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense_len, 18);
	assert_int_equal(r.sense[2], SENSE_ILLEGAL_REQUEST);
	assert_int_equal(r.sense[12], 0x25);
	/* absent targets */
	run_cmd(f, RQ0, 1, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_BAD_TARGET);
	run_cmd(f, RQ0, 200, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_BAD_TARGET);
	assert_int_equal(f->d.needs_reset, 0);
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static void test_read_write(void **state)
{
	struct fixture *f = *state;
	uint64_t w = vdriver_alloc(&f->d, 8192), rd = vdriver_alloc(&f->d, 8192);
	struct resp r;

	fill(vdriver_ptr(&f->d, w, 8192), 8192, 3);
	run_cmd(f, RQ0, 0, 2, CDB(0x2a, 0, 0, 0, 0, 8, 0, 0, 16, 0), w, 8192, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(r.resid, 0);
	assert_int_equal(r.used, 12 + 96);
	run_cmd(f, RQ0 + 1, 0, 2, CDB(0x88, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 16, 0, 0),
		rd, 8192, true, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(r.used, 12 + 96 + 8192);
	assert_memory_equal(vdriver_ptr(&f->d, rd, 8192), vdriver_ptr(&f->d, w, 8192), 8192);
	/* the other disks did not see it */
	memset(vdriver_ptr(&f->d, rd, 8192), 0x55, 8192);
	run_cmd(f, RQ0, 0, 0, CDB(0x28, 0, 0, 0, 0, 8, 0, 0, 16, 0), rd, 8192, true, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, rd, 1), 0);
	/* transfer shorter than the buffer: residual */
	run_cmd(f, RQ0, 0, 2, CDB(0x28, 0, 0, 0, 0, 8, 0, 0, 4, 0), rd, 8192, true, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(r.resid, 8192 - 2048);
	assert_int_equal(r.used, 12 + 96 + 2048);
	/* longer than the buffer: overrun, nothing done */
	run_cmd(f, RQ0, 0, 2, CDB(0x28, 0, 0, 0, 0, 8, 0, 0, 32, 0), rd, 8192, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OVERRUN);
	/* data buffer in the wrong direction */
	run_cmd(f, RQ0, 0, 2, CDB(0x28, 0, 0, 0, 0, 8, 0, 0, 16, 0), rd, 8192, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_FAILURE);
	run_cmd(f, RQ0, 0, 2, CDB(0x2a, 0, 0, 0, 0, 8, 0, 0, 16, 0), rd, 8192, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_FAILURE);
	/* a CHECK CONDITION carries the sense data */
	run_cmd(f, RQ0, 0, 2, CDB(0x28, 0, 0, 0xff, 0, 0, 0, 0, 1, 0), rd, 512, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense_len, 18);
	assert_int_equal(r.sense[0], 0x70);
	assert_int_equal(r.sense[12], 0x21);
	assert_int_equal(r.resid, 512);
}

/* seg_max data segments in one command (indirect), the header and the
 * response beside them: on a queue of the largest size, where the chain
 * fills the queue exactly, and on a smaller one, where Linux's virtio_scsi
 * sends them all the same (it sizes its tables from seg_max alone). */
static void test_seg_max(void **state)
{
	struct fixture *f = *state;
	const uint32_t seg = 4096, n = VIRTIO_SCSI_SEG_MAX;
	const uint32_t len = n * seg, blocks = len / 512;
	uint64_t w = vdriver_alloc(&f->d, len), rd = vdriver_alloc(&f->d, len);
	uint32_t hl = VIRTIO_SCSI_REQ_HDR + f->cdb_size;
	uint32_t rl = VIRTIO_SCSI_RESP_HDR + f->sense_size;
	struct vbuf *b = calloc(n + 2, sizeof(*b));
	uint32_t id, used;
	struct cmd c;
	struct resp r;
	uint8_t *h;

	assert_non_null(b);
	assert_true(w && rd);
	assert_int_equal(VIRTIO_SCSI_SEG_MAX + 2, VIRTIO_SCSI_QUEUE_SIZE);
	assert_true(blocks <= DISK / 512);
	vdriver_queue_stop(&f->d, RQ0);
	assert_int_equal(vdriver_queue_start(&f->d, RQ0, VIRTIO_SCSI_QUEUE_SIZE), 0);
	fill(vdriver_ptr(&f->d, w, len), len, 5);
	for (int pass = 0; pass < 2; pass++) {
		/* WRITE(10) on the 1024-entry queue, READ(10) on the small one */
		unsigned int qi = pass ? RQ0 + 1 : RQ0;
		bool in = pass;
		uint64_t data = in ? rd : w;
		unsigned int k = 0;

		c.hdr = vdriver_alloc(&f->d, hl);
		c.resp = vdriver_alloc(&f->d, rl);
		h = vdriver_ptr(&f->d, c.hdr, hl);
		memset(h, 0, hl);
		lun_addr(h, 0, 0);
		h[VIRTIO_SCSI_REQ_HDR] = in ? 0x28 : 0x2a;
		h[VIRTIO_SCSI_REQ_HDR + 7] = blocks >> 8;
		h[VIRTIO_SCSI_REQ_HDR + 8] = blocks & 0xff;
		b[k++] = (struct vbuf){ c.hdr, hl, false };
		if (in)
			b[k++] = (struct vbuf){ c.resp, rl, true };
		for (uint32_t i = 0; i < n; i++)
			b[k++] = (struct vbuf){ data + (uint64_t)i * seg, seg, in };
		if (!in)
			b[k++] = (struct vbuf){ c.resp, rl, true };
		assert_int_equal(k, n + 2);
		c.head = vdriver_add(&f->d, qi, b, k, true);
		assert_true(c.head >= 0);
		vdriver_kick(&f->d, qi);
		assert_int_equal(vdriver_wait_used(&f->d, qi, &id, &used, WAIT_MS), 1);
		assert_int_equal(id, c.head);
		read_resp(f, &c, &r);
		assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
		assert_int_equal(r.status, SAM_STAT_GOOD);
		assert_int_equal(r.resid, 0);
		assert_int_equal(used, rl + (in ? len : 0));
	}
	assert_memory_equal(vdriver_ptr(&f->d, rd, len), vdriver_ptr(&f->d, w, len), len);
	assert_int_equal(f->d.needs_reset, 0);
	free(b);
}

/* Many commands in flight on both queues, completing in any order. */
static void test_many_in_flight(void **state)
{
	struct fixture *f = *state;
	enum { N = 40 };
	struct cmd c[N];
	uint64_t data = vdriver_alloc(&f->d, N * 4096ull);
	bool seen[N] = { false };

	for (int i = 0; i < N; i++) {
		uint8_t cdb[10] = { 0x2a, 0, 0, 0, (8 * i) >> 8, 8 * i, 0, 0, 8, 0 };

		fill(vdriver_ptr(&f->d, data + i * 4096ull, 4096), 4096, i);
		add_cmd(f, RQ0 + i % 2, &c[i], 3, 0, i, cdb, 10, data + i * 4096ull,
			4096, false);
	}
	vdriver_kick(&f->d, RQ0);
	vdriver_kick(&f->d, RQ0 + 1);
	for (int n = 0; n < N; n++) {
		uint32_t id, len;
		int qi = RQ0 + n % 2, found = -1;

		assert_int_equal(vdriver_wait_used(&f->d, qi, &id, &len, WAIT_MS), 1);
		for (int i = qi - RQ0; i < N; i += 2)
			if ((uint32_t)c[i].head == id)
				found = i;
		assert_true(found >= 0);
		assert_false(seen[found]);
		seen[found] = true;
	}
	for (int i = 0; i < N; i++) {
		uint8_t cdb[10] = { 0x28, 0, 0, 0, (8 * i) >> 8, 8 * i, 0, 0, 8, 0 };
		uint64_t rd = vdriver_alloc(&f->d, 4096);
		struct resp r;

		run_cmd(f, RQ0, 3, 0, cdb, 10, rd, 4096, true, &r);
		assert_int_equal(r.status, SAM_STAT_GOOD);
		assert_memory_equal(vdriver_ptr(&f->d, rd, 4096),
				    vdriver_ptr(&f->d, data + i * 4096ull, 4096), 4096);
	}
}

static void test_malformed(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 64), resp = vdriver_alloc(&f->d, 128);
	uint64_t d = vdriver_alloc(&f->d, 4096);
	uint8_t *hp = vdriver_ptr(&f->d, h, 64);
	uint8_t *rp = vdriver_ptr(&f->d, resp, 128);
	uint32_t id, len;
	struct resp r;

	memset(hp, 0, 64);
	lun_addr(hp, 0, 0);
	/* header shorter than 19 + cdb_size */
	{
		struct vbuf b[] = { { h, 30, false }, { resp, 108, true } };

		assert_true(vdriver_add(&f->d, RQ0, b, 2, false) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[11], VIRTIO_SCSI_S_FAILURE);
		assert_int_equal(len, 108);
	}
	/* response area shorter than 12 + sense_size */
	{
		struct vbuf b[] = { { h, 51, false }, { resp, 20, true } };

		rp[11] = 0xee;
		assert_true(vdriver_add(&f->d, RQ0, b, 2, false) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[11], VIRTIO_SCSI_S_FAILURE);
		assert_int_equal(len, 20);
	}
	/* no room even for the response header: handed back untouched */
	{
		struct vbuf b[] = { { h, 51, false }, { resp, 8, true } };

		memset(rp, 0xee, 16);
		assert_true(vdriver_add(&f->d, RQ0, b, 2, false) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(len, 0);
		assert_int_equal(rp[0], 0xee);
	}
	/* data in both directions (INOUT not offered) */
	{
		struct vbuf b[] = { { h, 51, false }, { d, 512, false }, { resp, 108, true },
				    { d + 512, 512, true } };

		hp[19] = 0x28;
		hp[27] = 1;
		assert_true(vdriver_add(&f->d, RQ0, b, 4, false) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[11], VIRTIO_SCSI_S_FAILURE);
	}
	/* header and response split over several descriptors, indirect */
	{
		struct vbuf b[] = { { h, 10, false }, { h + 10, 41, false },
				    { resp, 5, true }, { resp + 5, 103, true },
				    { d, 512, true } };

		memset(hp + 19, 0, 32);
		hp[19] = 0x28;
		hp[27] = 1;
		assert_true(vdriver_add(&f->d, RQ0, b, 5, true) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[11], VIRTIO_SCSI_S_OK);
		assert_int_equal(rp[10], SAM_STAT_GOOD);
		assert_int_equal(len, 108 + 512);
	}
	/* LUN field naming no LUN we can have: the target answers */
	hp[2] = 0x80;
	{
		struct vbuf b[] = { { h, 51, false }, { resp, 108, true } };

		memset(hp + 19, 0, 32);
		assert_true(vdriver_add(&f->d, RQ0, b, 2, false) >= 0);
		vdriver_kick(&f->d, RQ0);
		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[11], VIRTIO_SCSI_S_OK);
		assert_int_equal(rp[10], SAM_STAT_CHECK_CONDITION);
		assert_int_equal(rp[12 + 12], 0x25);
	}
	/* nothing above asked for a reset, and the device still works */
	assert_int_equal(f->d.needs_reset, 0);
	run_cmd(f, RQ0, 0, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_GOOD);
}

/* Smaller sense_size and cdb_size written by the driver. */
static void test_sizes(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 512);
	struct resp r;

	set_cfg32(f, VIRTIO_SCSI_CFG_SENSE_SIZE, 8);
	set_cfg32(f, VIRTIO_SCSI_CFG_CDB_SIZE, 6);
	f->sense_size = 8;
	f->cdb_size = 6;
	run_cmd(f, RQ0, 0, 0, CDB(0xff, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense_len, 8);	/* cut to sense_size */
	assert_int_equal(r.used, 12 + 8);
	/* a 10-byte CDB does not fit in 6 */
	run_cmd(f, RQ0, 0, 0, CDB(0x28, 0, 0, 0, 0, 0), buf, 512, true, &r);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	/* a 6-byte READ does */
	run_cmd(f, RQ0, 0, 0, CDB(0x08, 0, 0, 0, 1, 0), buf, 512, true, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(r.used, 12 + 8 + 512);
}

/* A ring the driver broke: the device asks for a reset; the other queue
 * keeps working. */
static void test_hostile_ring(void **state)
{
	struct fixture *f = *state;
	uint64_t h = vdriver_alloc(&f->d, 64);
	struct vbuf b[] = { { h, 51, false }, { RAM + 4096, 108, true } };
	struct resp r;

	assert_true(vdriver_add(&f->d, RQ0, b, 2, false) >= 0);
	vdriver_kick(&f->d, RQ0);
	for (int i = 0; i < 500 && !__atomic_load_n(&f->d.needs_reset, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	assert_int_equal(f->d.needs_reset, 1);
	run_cmd(f, RQ0 + 1, 0, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
}

/* ---- task management ---- */

struct ctl {
	uint64_t req, resp;
	int head;
};

static void add_tmf(struct fixture *f, struct ctl *c, uint32_t subtype,
		    unsigned int target, unsigned int lun, uint64_t id)
{
	uint8_t *p;
	struct vbuf b[2];

	c->req = vdriver_alloc(&f->d, VIRTIO_SCSI_TMF_REQ);
	c->resp = vdriver_alloc(&f->d, 1);
	p = vdriver_ptr(&f->d, c->req, VIRTIO_SCSI_TMF_REQ);
	memset(p, 0, VIRTIO_SCSI_TMF_REQ);
	p[4] = subtype;
	lun_addr(p + 8, target, lun);
	memcpy(p + 16, &id, 8);
	*(uint8_t *)vdriver_ptr(&f->d, c->resp, 1) = 0xee;
	b[0] = (struct vbuf){ c->req, VIRTIO_SCSI_TMF_REQ, false };
	b[1] = (struct vbuf){ c->resp, 1, true };
	c->head = vdriver_add(&f->d, CTRL, b, 2, false);
	assert_true(c->head >= 0);
}

static uint8_t tmf(struct fixture *f, uint32_t subtype, unsigned int target,
		   unsigned int lun, uint64_t id)
{
	struct ctl c;
	uint32_t hid, len;

	add_tmf(f, &c, subtype, target, lun, id);
	vdriver_kick(&f->d, CTRL);
	assert_int_equal(vdriver_wait_used(&f->d, CTRL, &hid, &len, WAIT_MS), 1);
	assert_int_equal(hid, c.head);
	assert_int_equal(len, 1);
	return *(uint8_t *)vdriver_ptr(&f->d, c.resp, 1);
}

/* Makes reads of a disk block until the test writes to a pipe: the
 * backend's descriptor for that file is replaced by the pipe's read end,
 * so a READ stays in flight as long as the test wants. */
static int hold_reads(struct fixture *f, int disk, int *wfd)
{
	char link[320], target[PATH_MAX];
	struct dirent *de;
	DIR *dir = opendir("/proc/self/fd");
	int p[2], fd = -1;

	assert_non_null(dir);
	while ((de = readdir(dir))) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (!strcmp(target, f->path[disk]))
			fd = atoi(de->d_name);
	}
	closedir(dir);
	assert_true(fd >= 0);
	assert_int_equal(pipe(p), 0);
	assert_true(dup2(p[0], fd) == fd);
	close(p[0]);
	*wfd = p[1];
	return fd;
}

static void release_reads(int wfd, size_t n)
{
	static uint8_t junk[65536];

	while (n) {
		size_t k = n < sizeof(junk) ? n : sizeof(junk);

		assert_int_equal(write(wfd, junk, k), (ssize_t)k);
		n -= k;
	}
}

static bool used_ready(struct fixture *f, unsigned int qi)
{
	struct vdq *q = &f->d.q[qi];
	uint16_t *u = vdriver_ptr(&f->d, q->used_gpa, 4);

	return __atomic_load_n(&u[1], __ATOMIC_ACQUIRE) != q->last_used;
}

static void test_tmf_abort_in_flight(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 4 * 512);
	struct cmd a, b, c;
	struct ctl t;
	struct resp r;
	uint32_t id, len;
	int wa, wb;

	/* one held read on target 3 lun 0, one on target 0 lun 2 */
	hold_reads(f, 2, &wa);
	hold_reads(f, 1, &wb);
	add_cmd(f, RQ0, &a, 3, 0, 100, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, 512, true);
	add_cmd(f, RQ0 + 1, &b, 0, 2, 101, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf + 512,
		512, true);
	vdriver_kick(&f->d, RQ0);
	vdriver_kick(&f->d, RQ0 + 1);
	usleep(50000);
	assert_false(used_ready(f, RQ0));
	assert_false(used_ready(f, RQ0 + 1));
	/* the task is there */
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_QUERY_TASK, 3, 0, 100),
			 VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_QUERY_TASK, 3, 0, 999),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, 0, 2, 0),
			 VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, 0, 0, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	/* ABORT TASK 100: its answer waits until the read has finished */
	add_tmf(f, &t, VIRTIO_SCSI_T_TMF_ABORT_TASK, 3, 0, 100);
	vdriver_kick(&f->d, CTRL);
	usleep(50000);
	assert_false(used_ready(f, CTRL));
	release_reads(wa, 512);
	assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, t.resp, 1),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	/* by then the aborted command is back, marked ABORTED */
	assert_true(used_ready(f, RQ0));
	wait_cmd(f, RQ0, &a, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_ABORTED);
	assert_int_equal(r.resid, 512);
	assert_false(used_ready(f, RQ0 + 1));
	/* LOGICAL UNIT RESET of 0/2: the held read comes back with RESET */
	add_tmf(f, &t, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 2, 0);
	vdriver_kick(&f->d, CTRL);
	usleep(50000);
	assert_false(used_ready(f, CTRL));
	release_reads(wb, 512);
	assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, t.resp, 1),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_true(used_ready(f, RQ0 + 1));
	wait_cmd(f, RQ0 + 1, &b, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_RESET);
	/* and the next command sees the reset's unit attention */
	add_cmd(f, RQ0, &c, 0, 2, 102, CDB(0, 0, 0, 0, 0, 0), 0, 0, false);
	vdriver_kick(&f->d, RQ0);
	wait_cmd(f, RQ0, &c, &r);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense[2], SENSE_UNIT_ATTENTION);
	assert_int_equal(r.sense[12], 0x29);
	assert_int_equal(r.sense[13], 0x03);
	/* closing the pipes ends any read still waiting (EOF) */
	close(wa);
	close(wb);
}

/* The queue's io_uring fails with a READ held in the kernel and a TMF
 * waiting for it: both READs in flight complete (MEDIUM ERROR), the TMF
 * gets its answer, the device asks for a reset, the other queue goes on. */
static void test_uring_failure(void **state)
{
	struct fixture *f = *state;
	uint64_t buf = vdriver_alloc(&f->d, 2 * 512);
	struct cmd a, b;
	struct ctl t;
	struct resp r;
	uint32_t id, len;
	int wa;

	hold_reads(f, 2, &wa);
	add_cmd(f, RQ0, &a, 3, 0, 100, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, 512, true);
	vdriver_kick(&f->d, RQ0);
	/* ABORT TASK waits for the held read */
	add_tmf(f, &t, VIRTIO_SCSI_T_TMF_ABORT_TASK, 3, 0, 100);
	vdriver_kick(&f->d, CTRL);
	/* the next read breaks the queue's ring */
	uring_fail_arm(true);
	add_cmd(f, RQ0, &b, 0, 0, 101, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf + 512,
		512, true);
	vdriver_kick(&f->d, RQ0);
	for (int n = 0; n < 2; n++) {
		struct cmd *c;

		assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id, &len, WAIT_MS), 1);
		c = (int)id == a.head ? &a : &b;
		assert_true((int)id == c->head);
		read_resp(f, c, &r);
		if (r.response == VIRTIO_SCSI_S_ABORTED)
			continue;	/* the TMF took it before the failure */
		assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
		assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
		assert_int_equal(r.sense[2], SENSE_MEDIUM_ERROR);
	}
	assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
	assert_int_equal(id, t.head);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, t.resp, 1),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_true(uring_fail_count() > 0);
	assert_int_equal(f->d.needs_reset, 1);
	uring_fail_arm(false);
	/* later commands on the failed queue fail at once (never a hang),
	 * later TMFs are answered too; the other queue still works */
	run_cmd(f, RQ0, 0, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, 512, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense[2], SENSE_HARDWARE_ERROR);
	run_cmd(f, RQ0, 0, 0, CDB(0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense[2], SENSE_HARDWARE_ERROR);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 0, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	run_cmd(f, RQ0 + 1, 0, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, 512, true, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	close(wa);	/* the held read ends (EOF) */
	uring_fail_reset();
}

static void test_tmf_responses(void **state)
{
	struct fixture *f = *state;
	struct resp r;

	/* nothing in flight: complete at once */
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0, 5),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, 0, 2, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET, 0, 2, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, 0, 0),
			 VIRTIO_SCSI_S_FUNCTION_REJECTED);
	assert_int_equal(tmf(f, 99, 0, 0, 0), VIRTIO_SCSI_S_FUNCTION_REJECTED);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_ABORT_TASK, 7, 0, 0),
			 VIRTIO_SCSI_S_BAD_TARGET);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 1, 0),
			 VIRTIO_SCSI_S_INCORRECT_LUN);
	/* I_T nexus reset: every LUN of the target reports the nexus loss */
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, 0, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	for (unsigned int lun = 0; lun <= 2; lun += 2) {
		run_cmd(f, RQ0, 0, lun, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
		assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
		assert_int_equal(r.sense[12], 0x29);
		assert_int_equal(r.sense[13], 0x07);
	}
	/* target 3 was not reset */
	run_cmd(f, RQ0, 3, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
}

/* TMFs on the control queue while a request queue stops and starts: the
 * control thread may wake a request queue only while that queue runs. A
 * wake after queue_stop returned would go to a kick fd the transport may
 * have closed or reused (vhost-user closes it), so here every stop is
 * followed by a check that nothing writes the kick eventfd any more. */
struct tmf_loop {
	struct fixture *f;
	uint64_t req, resp;
	volatile bool done;
	unsigned int runs, bad;
};

static void *tmf_loop_thread(void *arg)
{
	struct tmf_loop *l = arg;
	struct vdriver *d = &l->f->d;
	struct vbuf b[2] = {
		{ l->req, VIRTIO_SCSI_TMF_REQ, false },
		{ l->resp, 1, true },
	};

	/* No cmocka asserts off the main thread: failures are counted. */
	while (!l->done) {
		uint8_t *resp = vdriver_ptr(d, l->resp, 1);
		uint32_t id, len;
		int head;

		*resp = 0xee;
		head = vdriver_add(d, CTRL, b, 2, false);
		vdriver_kick(d, CTRL);
		if (head < 0 || vdriver_wait_used(d, CTRL, &id, &len, WAIT_MS) != 1 ||
		    id != (uint32_t)head || *resp != VIRTIO_SCSI_S_FUNCTION_COMPLETE)
			l->bad++;
		l->runs++;
	}
	return NULL;
}

static void test_tmf_during_queue_restart(void **state)
{
	struct fixture *f = *state;
	struct tmf_loop l = { .f = f };
	struct timespec pause = { 0, 100000 };
	pthread_t th;
	struct resp r;
	uint8_t *p;
	uint64_t v;

	l.req = vdriver_alloc(&f->d, VIRTIO_SCSI_TMF_REQ);
	l.resp = vdriver_alloc(&f->d, 1);
	p = vdriver_ptr(&f->d, l.req, VIRTIO_SCSI_TMF_REQ);
	memset(p, 0, VIRTIO_SCSI_TMF_REQ);
	p[4] = VIRTIO_SCSI_T_TMF_ABORT_TASK_SET;
	lun_addr(p + 8, 0, 0);
	assert_int_equal(pthread_create(&th, NULL, tmf_loop_thread, &l), 0);
	for (unsigned int i = 0; i < 1000; i++) {
		int kick = f->d.q[RQ0].vq.kick_fd;

		vdriver_queue_stop(&f->d, RQ0);
		/* queue_stop's own wakeup, then silence */
		(void)!read(kick, &v, sizeof(v));
		nanosleep(&pause, NULL);
		if (read(kick, &v, sizeof(v)) == sizeof(v)) {
			l.done = true;
			pthread_join(th, NULL);
			fail_msg("restart %u: the kick fd of a stopped queue was written", i);
		}
		assert_int_equal(vdriver_queue_start(&f->d, RQ0, QSZ), 0);
	}
	l.done = true;
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(l.runs > 0);
	assert_int_equal(l.bad, 0);
	/* the restarted queue still serves */
	run_cmd(f, RQ0, 3, 0, CDB(0, 0, 0, 0, 0, 0), 0, 0, false, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
}

/* The control thread is stopped through an eventfd of the device's own,
 * never through the kick fd, which a vhost-user client shares and can
 * drain. Here the kick fd is a pipe's read end, which no write wakes:
 * queue_stop must still return (SIGALRM ends the test if it hangs). */
static void test_ctrl_stop_ignores_kick_fd(void **state)
{
	struct fixture *f = *state;
	int pfd[2];

	vdriver_queue_stop(&f->d, CTRL);
	close(f->d.q[CTRL].vq.kick_fd);
	/* non-blocking, as transports hand kick fds over */
	assert_int_equal(pipe2(pfd, O_CLOEXEC | O_NONBLOCK), 0);
	f->d.q[CTRL].vq.kick_fd = pfd[0];
	assert_int_equal(vdriver_queue_start(&f->d, CTRL, QSZ), 0);
	/* let the thread reach its wait */
	nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	alarm(10);
	vdriver_queue_stop(&f->d, CTRL);
	alarm(0);
	close(pfd[0]);
	close(pfd[1]);
	/* a fresh kick eventfd: the queue serves again */
	f->d.q[CTRL].vq.kick_fd = -1;
	assert_int_equal(vdriver_queue_start(&f->d, CTRL, QSZ), 0);
	assert_int_equal(tmf(f, VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, 0, 0, 0),
			 VIRTIO_SCSI_S_FUNCTION_COMPLETE);
}

static void test_ctrl_malformed(void **state)
{
	struct fixture *f = *state;
	uint64_t req = vdriver_alloc(&f->d, 32), resp = vdriver_alloc(&f->d, 8);
	uint8_t *p = vdriver_ptr(&f->d, req, 32), *rp = vdriver_ptr(&f->d, resp, 8);
	uint32_t id, len;

	memset(p, 0, 32);
	/* short TMF */
	{
		struct vbuf b[] = { { req, 12, false }, { resp, 1, true } };

		rp[0] = 0xee;
		assert_true(vdriver_add(&f->d, CTRL, b, 2, false) >= 0);
		vdriver_kick(&f->d, CTRL);
		assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[0], VIRTIO_SCSI_S_FAILURE);
	}
	/* AN query: no events supported */
	{
		struct vbuf b[] = { { req, 16, false }, { resp, 5, true } };

		p[0] = VIRTIO_SCSI_T_AN_QUERY;
		lun_addr(p + 4, 0, 0);
		p[12] = 0xff;
		memset(rp, 0xee, 8);
		assert_true(vdriver_add(&f->d, CTRL, b, 2, false) >= 0);
		vdriver_kick(&f->d, CTRL);
		assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
		assert_int_equal(len, 5);
		assert_memory_equal(rp, ((const uint8_t[]){ 0, 0, 0, 0, VIRTIO_SCSI_S_OK }), 5);
	}
	/* unknown type; no writable byte at all */
	{
		struct vbuf b[] = { { req, 16, false }, { resp, 1, true } };
		struct vbuf c[] = { { req, 16, false } };

		p[0] = 77;
		assert_true(vdriver_add(&f->d, CTRL, b, 2, false) >= 0);
		vdriver_kick(&f->d, CTRL);
		assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
		assert_int_equal(rp[0], VIRTIO_SCSI_S_FAILURE);
		assert_true(vdriver_add(&f->d, CTRL, c, 1, false) >= 0);
		vdriver_kick(&f->d, CTRL);
		assert_int_equal(vdriver_wait_used(&f->d, CTRL, &id, &len, WAIT_MS), 1);
		assert_int_equal(len, 0);
	}
	assert_int_equal(f->d.needs_reset, 0);
}

#define MiB (1ull << 20)

/* One disk (target 0 LUN 0) of 24 MiB with data at [0, 1 MiB),
 * [15 MiB, 17 MiB) and [20 MiB, 21 MiB). */
static struct fixture *make_big(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg = { .iface = DISK_IF_VIRTIO_SCSI,
				.cache = CACHE_WRITEBACK, .target_set = true };
	const struct disk_cfg *p = &cfg;
	char err[256] = "";
	int fd;

	assert_non_null(f);
	strcpy(f->path[0], "/tmp/iovm-vscsi-XXXXXX");
	fd = mkstemp(f->path[0]);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 24 * MiB), 0);
	close(fd);
	assert_true(blk_fill(f->path[0], 0, MiB, 0x5a));
	assert_true(blk_fill(f->path[0], 15 * MiB, 2 * MiB, 0x5a));
	assert_true(blk_fill(f->path[0], 20 * MiB, MiB, 0x5a));
	cfg.path = f->path[0];
	f->dev = virtio_scsi_create(&p, 1, NREQ, err, sizeof(err));
	assert_non_null(f->dev);
	return start_driver(f);
}

/* A 16 MiB WRITE SAME of zeroes (NDOB) on a file system without fallocate
 * is held in flight at the backend: a READ queued behind it on the same
 * request queue completes meanwhile; released, the WRITE SAME completes
 * GOOD with zeroes on disk. Then the same where the writes fail: CHECK
 * CONDITION, MEDIUM ERROR / WRITE ERROR. Fails if the zeroing runs on the
 * queue's thread (the read waits behind it). */
static void test_big_write_same_does_not_block(void **state)
{
	struct fixture *f = make_big();
	uint64_t buf = vdriver_alloc(&f->d, 4096);
	const uint8_t ws[16] = { 0x93, 0x01, 0, 0, 0, 0, 0, 0, 0, 0,
				 0, 0, 0x80, 0 };	/* 32 Ki blocks */
	const uint8_t rd10[10] = { 0x28, 0, 0, 0, 0xa0, 0, 0, 0, 8, 0 };
	struct cmd wc, rc;
	struct resp r;
	static struct blk_hold h;	/* outlives a failed assert */
	uint32_t id[2] = { ~0u, ~0u }, len;
	int got;

	assert_int_equal(blk_hold_start(&h, true, true), 0);
	add_cmd(f, RQ0, &wc, 0, 0, 1, ws, 16, 0, 0, false);
	vdriver_kick(&f->d, RQ0);
	assert_true(blk_hold_arrived(&h, 1, WAIT_MS));
	/* READ(10) of 8 blocks at 20 MiB */
	add_cmd(f, RQ0, &rc, 0, 0, 2, rd10, 10, buf, 4096, true);
	vdriver_kick(&f->d, RQ0);
	got = vdriver_wait_used(&f->d, RQ0, &id[0], &len, WAIT_MS);
	blk_hold_release(&h);
	assert_int_equal(vdriver_wait_used(&f->d, RQ0, &id[1], &len,
					   BLK_HOLD_WATCHDOG_MS), 1);
	assert_true(blk_hold_end(&h));
	assert_int_equal(got, 1);
	assert_int_equal(id[0], rc.head);
	read_resp(f, &rc, &r);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_int_equal(*(uint8_t *)vdriver_ptr(&f->d, buf, 1), 0x5a);
	assert_int_equal(id[1], wc.head);
	read_resp(f, &wc, &r);
	assert_int_equal(r.response, VIRTIO_SCSI_S_OK);
	assert_int_equal(r.status, SAM_STAT_GOOD);
	assert_true(blk_holds(f->path[0], 0, 16 * MiB, 0));
	assert_true(blk_holds(f->path[0], 16 * MiB, MiB, 0x5a));
	/* writes of zeroes that fail */
	assert_true(blk_break_writes(f->path[0]) > 0);
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	run_cmd(f, RQ0, 0, 0, ws, 16, 0, 0, false, &r);
	assert_true(blk_hold_end(&h));
	assert_int_equal(r.status, SAM_STAT_CHECK_CONDITION);
	assert_int_equal(r.sense[2] & 0xf, SENSE_MEDIUM_ERROR);
	assert_int_equal(r.sense[12], 0x0c);	/* WRITE ERROR */
	vdriver_destroy(&f->d);
	unlink(f->path[0]);
	free(f);
}

/* Disks without target= take the lowest free ids; clashes are refused. */
static void test_create_errors(void **state)
{
	char path[] = "/tmp/iovm-vscsi-c-XXXXXX";
	int fd = mkstemp(path);
	struct disk_cfg a = { .path = path, .iface = DISK_IF_VIRTIO_SCSI },
			b = a, c = a;
	const struct disk_cfg *p[3] = { &a, &b, &c };
	char err[256] = "";
	struct virtio_dev *dev;
	uint16_t mt;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	b.target_set = true;
	b.target = 0;
	dev = virtio_scsi_create(p, 3, 1, err, sizeof(err));
	assert_non_null(dev);
	dev->ops->config_read(dev, VIRTIO_SCSI_CFG_MAX_TARGET, &mt, 2);
	assert_int_equal(le16toh(mt), 2);	/* a -> 1, b = 0, c -> 2 */
	assert_int_equal(dev->num_queues, 3);
	dev->ops->destroy(dev);

	c.target_set = true;
	c.target = 0;
	assert_null(virtio_scsi_create(p, 3, 1, err, sizeof(err)));
	assert_non_null(strstr(err, "target 0 lun 0 is already"));
	c.path = "/nonexistent/disk.img";
	c.target = 5;
	assert_null(virtio_scsi_create(p, 3, 1, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/disk.img"));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inquiry_and_luns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seg_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tmf_abort_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tmf_responses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tmf_during_queue_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctrl_stop_ignores_kick_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctrl_malformed, setup, teardown),
		cmocka_unit_test(test_create_errors),
		cmocka_unit_test(test_big_write_same_does_not_block),
		cmocka_unit_test_setup_teardown(test_uring_failure, setup, teardown),
	};

	return cmocka_run_group_tests_name("virtio-scsi", tests, NULL, NULL);
}
