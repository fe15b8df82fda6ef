/* SCSI disk target: SPC-4/SBC-3 command set of a direct-access logical unit
 * over a block backend. READ and WRITE go straight between the HBA's iovecs
 * and the backend; everything else is emulated on small stack buffers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk.h"

/* Operation codes. */
#define TEST_UNIT_READY 0x00
#define REQUEST_SENSE 0x03
#define READ_6 0x08
#define WRITE_6 0x0a
#define INQUIRY 0x12
#define MODE_SELECT_6 0x15
#define MODE_SENSE_6 0x1a
#define START_STOP_UNIT 0x1b
#define PREVENT_ALLOW 0x1e
#define READ_CAPACITY_10 0x25
#define READ_10 0x28
#define WRITE_10 0x2a
#define VERIFY_10 0x2f
#define SYNC_CACHE_10 0x35
#define WRITE_SAME_10 0x41
#define UNMAP 0x42
#define MODE_SELECT_10 0x55
#define MODE_SENSE_10 0x5a
#define READ_16 0x88
#define WRITE_16 0x8a
#define VERIFY_16 0x8f
#define SYNC_CACHE_16 0x91
#define WRITE_SAME_16 0x93
#define SERVICE_ACTION_IN_16 0x9e
#define REPORT_LUNS 0xa0
#define MAINTENANCE_IN 0xa3
#define READ_12 0xa8
#define WRITE_12 0xaa

#define SAI_READ_CAPACITY_16 0x10
#define MI_REPORT_SUPPORTED_OPCODES 0x0c

/* Limits advertised in the Block Limits VPD page and enforced here. */
#define MAX_XFER_BYTES (32u << 20)
#define MAX_UNMAP_BYTES (1ull << 30)
#define MAX_UNMAP_DESC 32

/* Additional sense codes (ASC << 8 | ASCQ). */
#define ASC_NONE 0x0000
#define ASC_NOT_READY_INIT_REQUIRED 0x0402
#define ASC_WRITE_ERROR 0x0c00
#define ASC_UNRECOVERED_READ_ERROR 0x1100
#define ASC_PARAM_LIST_LENGTH 0x1a00
#define ASC_INVALID_OPCODE 0x2000
#define ASC_LBA_OUT_OF_RANGE 0x2100
#define ASC_INVALID_FIELD_CDB 0x2400
#define ASC_LUN_NOT_SUPPORTED 0x2500
#define ASC_INVALID_FIELD_PARAM 0x2600
#define ASC_WRITE_PROTECTED 0x2700
#define ASC_SPACE_ALLOC_FAILED 0x2707
#define ASC_BUS_DEVICE_RESET 0x2903
#define ASC_I_T_NEXUS_LOSS 0x2907
#define ASC_SAVING_NOT_SUPPORTED 0x3900
#define ASC_INTERNAL_TARGET_FAILURE 0x4400

enum stage { ST_NONE, ST_RW, ST_FLUSH, ST_STOP, ST_WS, ST_UNMAP, ST_SEG };

struct scsi_disk {
	struct blk_backend *be;
	const struct scsi_lun_map *luns;
	uint64_t nblocks;
	uint32_t bs;
	uint32_t max_xfer_blocks;
	uint64_t max_unmap_blocks;
	uint8_t naa[8];		/* NAA 3 (locally assigned) LU name */
	/* Shared by every queue thread; accessed with atomics. */
	bool wce;
	bool dsense;
	bool stopped;
	uint8_t ua;		/* 0 or the ASCQ of a pending 29h unit attention */
	struct blk_errors errors;	/* what the backend failed */
};

/* A sense condition found while checking a command. field >= 0 points at
 * the offending byte (of the CDB when cd, else of the parameter list), bit
 * at the offending bit (-1: the whole field). */
struct sense {
	uint8_t key;
	uint16_t asc;
	int16_t field;
	int8_t bit;
	bool cd;
};

/* What the decoder found: the data phase plus the command's fields. */
struct decoded {
	struct scsi_cmd_info info;
	bool bad;
	struct sense err;
	uint64_t lba;
	uint32_t nblocks;
	bool fua;
};

/* The commands implemented, with their CDB usage maps (the bits the device
 * server looks at), for REPORT SUPPORTED OPERATION CODES and for rejecting
 * reserved bits. */
struct cmd_desc {
	uint8_t op;
	uint8_t sa;
	bool has_sa;
	uint8_t len;
	uint8_t usage[16];
};

#define LBA4 0xff, 0xff, 0xff, 0xff
#define LBA8 LBA4, LBA4
static const struct cmd_desc cmds[] = {
	{ TEST_UNIT_READY, 0, false, 6, { 0x00, 0, 0, 0, 0, 0 } },
	{ REQUEST_SENSE, 0, false, 6, { 0x03, 0x01, 0, 0, 0xff, 0 } },
	{ READ_6, 0, false, 6, { 0x08, 0x1f, 0xff, 0xff, 0xff, 0 } },
	{ WRITE_6, 0, false, 6, { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0 } },
	{ INQUIRY, 0, false, 6, { 0x12, 0x01, 0xff, 0xff, 0xff, 0 } },
	{ MODE_SELECT_6, 0, false, 6, { 0x15, 0x11, 0, 0, 0xff, 0 } },
	{ MODE_SENSE_6, 0, false, 6, { 0x1a, 0x08, 0xff, 0xff, 0xff, 0 } },
	{ START_STOP_UNIT, 0, false, 6, { 0x1b, 0x01, 0, 0, 0x05, 0 } },
	{ PREVENT_ALLOW, 0, false, 6, { 0x1e, 0, 0, 0, 0x01, 0 } },
	{ READ_CAPACITY_10, 0, false, 10, { 0x25, 0, LBA4, 0, 0, 0x01, 0 } },
	{ READ_10, 0, false, 10, { 0x28, 0x18, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ WRITE_10, 0, false, 10, { 0x2a, 0x18, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ VERIFY_10, 0, false, 10, { 0x2f, 0x10, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ SYNC_CACHE_10, 0, false, 10, { 0x35, 0x06, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ WRITE_SAME_10, 0, false, 10, { 0x41, 0x08, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ UNMAP, 0, false, 10, { 0x42, 0, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0 } },
	{ MODE_SELECT_10, 0, false, 10, { 0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0 } },
	{ MODE_SENSE_10, 0, false, 10, { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0 } },
	{ READ_16, 0, false, 16, { 0x88, 0x18, LBA8, LBA4, 0x1f, 0 } },
	{ WRITE_16, 0, false, 16, { 0x8a, 0x18, LBA8, LBA4, 0x1f, 0 } },
	{ VERIFY_16, 0, false, 16, { 0x8f, 0x10, LBA8, LBA4, 0x1f, 0 } },
	{ SYNC_CACHE_16, 0, false, 16, { 0x91, 0x06, LBA8, LBA4, 0x1f, 0 } },
	{ WRITE_SAME_16, 0, false, 16, { 0x93, 0x09, LBA8, LBA4, 0x1f, 0 } },
	{ SERVICE_ACTION_IN_16, SAI_READ_CAPACITY_16, true, 16,
	  { 0x9e, 0x1f, LBA8, LBA4, 0x01, 0 } },
	{ REPORT_LUNS, 0, false, 12, { 0xa0, 0, 0xff, 0, 0, 0, LBA4, 0, 0 } },
	{ MAINTENANCE_IN, MI_REPORT_SUPPORTED_OPCODES, true, 12,
	  { 0xa3, 0x1f, 0x87, 0xff, 0xff, 0xff, LBA4, 0, 0 } },
	{ READ_12, 0, false, 12, { 0xa8, 0x18, LBA4, LBA4, 0x1f, 0 } },
	{ WRITE_12, 0, false, 12, { 0xaa, 0x18, LBA4, LBA4, 0x1f, 0 } },
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static const struct cmd_desc *cmd_find(uint8_t op, uint8_t sa, bool any_sa)
{
	for (unsigned int i = 0; i < NCMDS; i++) {
		if (cmds[i].op != op)
			continue;
		if (!cmds[i].has_sa || any_sa || cmds[i].sa == sa)
			return &cmds[i];
	}
	return NULL;
}

/* ---- sense data ---- */

static void fail(struct decoded *dc, uint8_t key, uint16_t asc)
{
	dc->bad = true;
	dc->err = (struct sense){ .key = key, .asc = asc, .field = -1, .bit = -1 };
}

static void bad_field(struct decoded *dc, bool cdb, int field, int bit)
{
	dc->bad = true;
	dc->err = (struct sense){
		.key = SENSE_ILLEGAL_REQUEST,
		.asc = cdb ? ASC_INVALID_FIELD_CDB : ASC_INVALID_FIELD_PARAM,
		.field = field, .bit = bit, .cd = cdb,
	};
}

/* Writes sense data: descriptor format when the control mode page's
 * D_SENSE (or REQUEST SENSE's DESC) asks for it, else fixed format.
 * Returns its length. */
static unsigned int sense_encode(const struct sense *s, bool desc, uint8_t *p)
{
	uint8_t sks[3] = { 0 };
	bool sksv = s->field >= 0;

	if (sksv) {
		sks[0] = 0x80 | (s->cd ? 0x40 : 0) |
			 (s->bit >= 0 ? 0x08 | s->bit : 0);
		sks[1] = s->field >> 8;
		sks[2] = s->field;
	}
	if (desc) {
		memset(p, 0, 8);
		p[0] = 0x72;
		p[1] = s->key;
		p[2] = s->asc >> 8;
		p[3] = s->asc;
		if (!sksv)
			return 8;
		p[7] = 8;
		memset(p + 8, 0, 8);
		p[8] = 0x02;	/* sense key specific descriptor */
		p[9] = 6;
		memcpy(p + 12, sks, 3);
		return 16;
	}
	memset(p, 0, 18);
	p[0] = 0x70;
	p[2] = s->key;
	p[7] = 10;
	p[12] = s->asc >> 8;
	p[13] = s->asc;
	memcpy(p + 15, sks, 3);
	return 18;
}

static bool dsense(const struct scsi_disk *d)
{
	return d && __atomic_load_n(&d->dsense, __ATOMIC_RELAXED);
}

static void check_condition(struct scsi_req *req, const struct sense *s)
{
	req->status = SAM_STAT_CHECK_CONDITION;
	req->sense_len = sense_encode(s, dsense(req->disk), req->sense);
}

static void check(struct scsi_req *req, uint8_t key, uint16_t asc)
{
	struct sense s = { .key = key, .asc = asc, .field = -1, .bit = -1 };

	check_condition(req, &s);
}

/* ---- completion ---- */

static void io_done(void *tag, int res);
static void io_error(struct scsi_req *req);

static void complete(struct scsi_req *req)
{
	if (req->abort_host) {
		req->host = req->abort_host;
		req->status = SAM_STAT_TASK_ABORTED;
		req->sense_len = 0;
	} else if (req->err) {
		io_error(req);
		if (req->err == -ENOSPC && req->is_write)
			check(req, SENSE_DATA_PROTECT, ASC_SPACE_ALLOC_FAILED);
		else
			check(req, SENSE_MEDIUM_ERROR, req->is_write ?
			      ASC_WRITE_ERROR : ASC_UNRECOVERED_READ_ERROR);
	}
	req->done(req);
}

/* A backend operation could not even be queued. */
static void submit_failed(struct scsi_req *req, int ret)
{
	if (ret == -EAGAIN || ret == -EBUSY)
		req->status = SAM_STAT_TASK_SET_FULL;
	else
		check(req, SENSE_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	req->done(req);
}

/* Write-through (WCE=0 or FUA): the data must be on stable storage before
 * the command completes. */
static void flush_then_complete(struct scsi_req *req, enum stage st)
{
	int ret;

	if (req->err || req->abort_host) {
		complete(req);
		return;
	}
	req->stage = st;
	ret = blkq_flush(req->q, req->disk->be, io_done, req);
	if (ret) {
		req->err = ret;
		complete(req);
	}
}

static void ws_next(struct scsi_req *req);
static void unmap_next(struct scsi_req *req);

static void io_done(void *tag, int res)
{
	struct scsi_req *req = tag;
	struct scsi_disk *d = req->disk;

	switch (req->stage) {
	case ST_RW:
		if (res >= 0)
			req->xferred = res;
		if (res >= 0 && (uint32_t)res != req->info.xfer)
			res = -EIO;
		if (res < 0) {
			req->err = res;
			complete(req);
		} else if (req->sync_after) {
			flush_then_complete(req, ST_FLUSH);
		} else {
			complete(req);
		}
		return;
	case ST_SEG:
		if (res >= 0)
			req->xferred += res;
		if (res < 0 && !req->err)
			req->err = res;
		req->seg_done(req, res);
		return;
	case ST_FLUSH:
		if (res < 0)
			req->err = res;
		complete(req);
		return;
	case ST_STOP:
		if (res < 0)
			req->err = res;
		else
			__atomic_store_n(&d->stopped, true, __ATOMIC_RELAXED);
		complete(req);
		return;
	case ST_WS:
		if (res < 0)
			req->err = res;
		ws_next(req);
		return;
	case ST_UNMAP:
		if (res == -EOPNOTSUPP && req->dealloc) {
			/* no hole punching here: zeroes read back the same */
			req->dealloc = false;
			req->step--;
		} else if (res < 0) {
			req->err = res;
		}
		unmap_next(req);
		return;
	}
}

/* ---- decoding ---- */

static bool cdb_reserved_ok(const uint8_t *cdb, const struct cmd_desc *c,
			    struct decoded *dc)
{
	for (unsigned int i = 1; i < c->len; i++) {
		uint8_t extra = cdb[i] & ~c->usage[i];

		if (extra) {
			bad_field(dc, true, i, 31 - __builtin_clz(extra));
			return false;
		}
	}
	return true;
}

static bool is_write_op(uint8_t op)
{
	switch (op) {
	case WRITE_6: case WRITE_10: case WRITE_12: case WRITE_16:
	case WRITE_SAME_10: case WRITE_SAME_16: case UNMAP:
		return true;
	}
	return false;
}

/* The LBA range [lba, lba+n) must lie on the medium. */
static bool range_ok(const struct scsi_disk *d, struct decoded *dc,
		     uint64_t lba, uint64_t n)
{
	if (lba < d->nblocks && n <= d->nblocks - lba)
		return true;
	fail(dc, SENSE_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	return false;
}

static void decode_rw(const struct scsi_disk *d, const uint8_t *cdb,
		      struct decoded *dc)
{
	unsigned int len_at;
	bool wr = is_write_op(cdb[0]);

	switch (cdb[0]) {
	case READ_6: case WRITE_6:
		dc->lba = (cdb[1] & 0x1f) << 16 | be16(cdb + 2);
		dc->nblocks = cdb[4] ? cdb[4] : 256;
		len_at = 4;
		break;
	case READ_10: case WRITE_10:
		dc->lba = be32(cdb + 2);
		dc->nblocks = be16(cdb + 7);
		len_at = 7;
		break;
	case READ_12: case WRITE_12:
		dc->lba = be32(cdb + 2);
		dc->nblocks = be32(cdb + 6);
		len_at = 6;
		break;
	default:
		dc->lba = be64(cdb + 2);
		dc->nblocks = be32(cdb + 10);
		len_at = 10;
		break;
	}
	if (dc->nblocks > d->max_xfer_blocks)
		return bad_field(dc, true, len_at, -1);
	if (wr && d->be->ro)
		return fail(dc, SENSE_DATA_PROTECT, ASC_WRITE_PROTECTED);
	if (!range_ok(d, dc, dc->lba, dc->nblocks))
		return;
	dc->fua = cdb[0] != READ_6 && cdb[0] != WRITE_6 && (cdb[1] & 0x08);
	dc->info.dir = wr ? SCSI_DIR_TO_DEV : SCSI_DIR_FROM_DEV;
	dc->info.xfer = dc->nblocks * d->bs;
	dc->info.direct = true;
	dc->info.offset = dc->lba * d->bs;
}

/* VERIFY, SYNCHRONIZE CACHE, WRITE SAME: an LBA range, no direct data. */
static void decode_range(const struct scsi_disk *d, const uint8_t *cdb,
			 struct decoded *dc)
{
	bool is16 = cdb[0] & 0x80;

	dc->lba = is16 ? be64(cdb + 2) : be32(cdb + 2);
	dc->nblocks = is16 ? be32(cdb + 10) : be16(cdb + 7);
	switch (cdb[0]) {
	case SYNC_CACHE_10: case SYNC_CACHE_16:
		/* 0 blocks: everything from lba to the end. */
		if (dc->nblocks == 0 && dc->lba <= d->nblocks)
			return;
		range_ok(d, dc, dc->lba, dc->nblocks);
		return;
	case VERIFY_10: case VERIFY_16:
		range_ok(d, dc, dc->lba, dc->nblocks);
		return;
	}
	/* WRITE SAME: WSNZ=1 (0 blocks is not accepted), at most
	 * max_unmap_blocks (the Block Limits MAXIMUM WRITE SAME LENGTH). */
	if (dc->nblocks == 0 || dc->nblocks > d->max_unmap_blocks)
		return bad_field(dc, true, is16 ? 10 : 7, -1);
	if (d->be->ro)
		return fail(dc, SENSE_DATA_PROTECT, ASC_WRITE_PROTECTED);
	if (!range_ok(d, dc, dc->lba, dc->nblocks))
		return;
	if (is16 && (cdb[1] & 0x01))	/* NDOB: zeroes, no data-out */
		return;
	if (d->bs > SCSI_PARAM_MAX)
		return bad_field(dc, true, 1, -1);
	dc->info.dir = SCSI_DIR_TO_DEV;
	dc->info.xfer = d->bs;
}

static void data_in(struct decoded *dc, uint32_t alloc)
{
	dc->info.dir = alloc ? SCSI_DIR_FROM_DEV : SCSI_DIR_NONE;
	dc->info.xfer = alloc;
}

static void data_out(struct decoded *dc, uint32_t len, unsigned int len_at)
{
	if (len > SCSI_PARAM_MAX)
		return bad_field(dc, true, len_at, -1);
	dc->info.dir = len ? SCSI_DIR_TO_DEV : SCSI_DIR_NONE;
	dc->info.xfer = len;
}

/* Decodes and checks a CDB's fields; d may be NULL for the commands an
 * absent LUN answers (INQUIRY, REPORT LUNS, REQUEST SENSE). */
static void decode(const struct scsi_disk *d, const uint8_t *cdb,
		   unsigned int cdb_len, struct decoded *dc)
{
	const struct cmd_desc *c;

	memset(&dc->info, 0, sizeof(dc->info));
	dc->bad = false;
	dc->fua = false;
	if (cdb_len == 0)
		return fail(dc, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	c = cmd_find(cdb[0], cdb_len > 1 ? cdb[1] & 0x1f : 0, false);
	if (!c) {
		if (cmd_find(cdb[0], 0, true))	/* known op, unknown SA */
			return bad_field(dc, true, 1, 4);
		return fail(dc, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	}
	if (cdb_len < c->len)
		return bad_field(dc, true, 0, -1);
	if (!cdb_reserved_ok(cdb, c, dc))
		return;

	switch (cdb[0]) {
	case REQUEST_SENSE:
		return data_in(dc, cdb[4]);
	case INQUIRY:
		if (!(cdb[1] & 1) && cdb[2])
			return bad_field(dc, true, 2, -1);
		return data_in(dc, be16(cdb + 3));
	case MODE_SENSE_6:
		return data_in(dc, cdb[4]);
	case MODE_SENSE_10:
		return data_in(dc, be16(cdb + 7));
	case MODE_SELECT_6:
	case MODE_SELECT_10:
		if (!(cdb[1] & 0x10))	/* PF: only standard pages */
			return bad_field(dc, true, 1, 4);
		if (cdb[1] & 0x01)	/* SP: no saved pages */
			return bad_field(dc, true, 1, 0);
		if (cdb[0] == MODE_SELECT_6)
			return data_out(dc, cdb[4], 4);
		return data_out(dc, be16(cdb + 7), 7);
	case READ_CAPACITY_10:
		if (!(cdb[8] & 1) && be32(cdb + 2))
			return bad_field(dc, true, 2, -1);
		return data_in(dc, 8);
	case SERVICE_ACTION_IN_16:
		return data_in(dc, be32(cdb + 10));
	case REPORT_LUNS:
		if (cdb[2] > 2)
			return bad_field(dc, true, 2, -1);
		if (be32(cdb + 6) < 16)
			return bad_field(dc, true, 6, -1);
		return data_in(dc, be32(cdb + 6));
	case MAINTENANCE_IN:
		return data_in(dc, be32(cdb + 6));
	case UNMAP:
		if (d->be->ro)
			return fail(dc, SENSE_DATA_PROTECT, ASC_WRITE_PROTECTED);
		return data_out(dc, be16(cdb + 7), 7);
	case READ_6: case READ_10: case READ_12: case READ_16:
	case WRITE_6: case WRITE_10: case WRITE_12: case WRITE_16:
		return decode_rw(d, cdb, dc);
	case VERIFY_10: case VERIFY_16:
	case SYNC_CACHE_10: case SYNC_CACHE_16:
	case WRITE_SAME_10: case WRITE_SAME_16:
		return decode_range(d, cdb, dc);
	}
	/* TEST UNIT READY, START STOP UNIT, PREVENT ALLOW: no data. */
}

void scsi_disk_decode(const struct scsi_disk *d, const uint8_t *cdb,
		      unsigned int cdb_len, struct scsi_cmd_info *info)
{
	struct decoded dc;

	decode(d, cdb, cdb_len, &dc);
	if (dc.bad)
		memset(&dc.info, 0, sizeof(dc.info));
	*info = dc.info;
}

/* ---- emulated data-in commands ---- */

/* Sends n bytes of data-in (already cut to the allocation length). */
static void send_in(struct scsi_req *req, const uint8_t *buf, size_t n)
{
	if (n > req->buf_len || (n && req->buf_dir != SCSI_DIR_FROM_DEV)) {
		req->host = n > req->buf_len ? SCSI_HOST_OVERRUN : SCSI_HOST_BAD_DIR;
		req->done(req);
		return;
	}
	req->xferred = iov_from_buf(req->iov, req->iovcnt, 0, buf, n);
	req->done(req);
}

static void pad(uint8_t *p, const char *s, size_t n)
{
	size_t l = strlen(s);

	memset(p, ' ', n);
	memcpy(p, s, l < n ? l : n);
}

static size_t std_inquiry(uint8_t *p, uint8_t pq_pdt)
{
	static const uint16_t versions[] = { 0x00a0, 0x0460, 0x04c0 };

	memset(p, 0, 96);
	p[0] = pq_pdt;
	p[2] = 0x06;		/* SPC-4 */
	p[3] = 0x12;		/* HISUP, response data format 2 */
	p[4] = 96 - 5;
	p[7] = 0x02;		/* CMDQUE */
	pad(p + 8, "IOVM", 8);
	pad(p + 16, "iovm disk", 16);
	pad(p + 32, IOVM_VERSION, 4);
	for (unsigned int i = 0; i < 3; i++)
		put16(p + 58 + 2 * i, versions[i]);
	return 96;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

static size_t vpd_page(const struct scsi_disk *d, uint8_t page, uint8_t *p)
{
	size_t n;

	memset(p, 0, 64);
	p[1] = page;
	switch (page) {
	case 0x00:
		memcpy(p + 4, vpd_pages, sizeof(vpd_pages));
		n = 4 + sizeof(vpd_pages);
		break;
	case 0x80:
		n = strnlen(d->be->serial, sizeof(d->be->serial));
		memcpy(p + 4, d->be->serial, n);
		n += 4;
		break;
	case 0x83: {
		size_t sl = strnlen(d->be->serial, sizeof(d->be->serial));

		/* NAA locally assigned, binary */
		p[4] = 0x01;
		p[5] = 0x03;
		p[7] = 8;
		memcpy(p + 8, d->naa, 8);
		/* T10 vendor ID based, ASCII: vendor + serial */
		p[16] = 0x02;
		p[17] = 0x01;
		p[19] = 8 + sl;
		pad(p + 20, "IOVM", 8);
		memcpy(p + 28, d->be->serial, sl);
		n = 28 + sl;
		break;
	}
	case 0xb0: {
		uint32_t gran = d->be->phys_block_size > d->bs ?
				d->be->phys_block_size / d->bs : 1;

		p[4] = 0x01;	/* WSNZ */
		put16(p + 6, gran);
		put32(p + 8, d->max_xfer_blocks);
		put32(p + 20, d->max_unmap_blocks);
		put32(p + 24, MAX_UNMAP_DESC);
		put32(p + 28, gran);
		put64(p + 36, d->max_unmap_blocks);
		n = 64;
		break;
	}
	case 0xb1:
		put16(p + 4, 1);	/* non-rotating medium */
		n = 64;
		break;
	case 0xb2:
		p[5] = 0xe4;	/* LBPU, LBPWS, LBPWS10, LBPRZ */
		p[6] = 0x02;	/* thin provisioned */
		n = 8;
		break;
	default:
		return 0;
	}
	put16(p + 2, n - 4);
	return n;
}

static void do_inquiry(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	uint8_t buf[128];
	size_t n;

	if (cdb[1] & 1) {
		n = vpd_page(req->disk, cdb[2], buf);
		if (!n) {
			struct sense s = { SENSE_ILLEGAL_REQUEST,
					   ASC_INVALID_FIELD_CDB, 2, -1, true };

			check_condition(req, &s);
			req->done(req);
			return;
		}
	} else {
		n = std_inquiry(buf, 0x00);
	}
	send_in(req, buf, min_sz(n, alloc));
}

static size_t report_luns(const struct scsi_lun_map *m, uint8_t sel,
			  uint8_t *p)
{
	size_t n = 8;

	memset(p, 0, 8);
	/* select report 1: well-known LUNs only, of which there are none */
	for (unsigned int lun = 0; sel != 1 && lun < SCSI_MAX_LUNS; lun++) {
		if (!scsi_lun_present(m, lun))
			continue;
		memset(p + n, 0, 8);
		p[n + 1] = lun;	/* peripheral device addressing, bus 0 */
		n += 8;
	}
	put32(p, n - 8);
	return n;
}

static size_t request_sense(struct scsi_disk *d, bool desc, uint8_t *p)
{
	struct sense s = { SENSE_NO_SENSE, ASC_NONE, -1, -1, false };
	uint8_t ua = __atomic_exchange_n(&d->ua, 0, __ATOMIC_RELAXED);

	if (ua) {
		s.key = SENSE_UNIT_ATTENTION;
		s.asc = 0x2900 | ua;
	} else if (__atomic_load_n(&d->stopped, __ATOMIC_RELAXED)) {
		s.key = SENSE_NOT_READY;
		s.asc = ASC_NOT_READY_INIT_REQUIRED;
	}
	return sense_encode(&s, desc, p);
}

static size_t read_capacity(const struct scsi_disk *d, bool is16, uint8_t *p)
{
	uint64_t last = d->nblocks - 1;
	unsigned int exp = 0;

	if (!is16) {
		put32(p, last > 0xffffffffull ? 0xffffffff : last);
		put32(p + 4, d->bs);
		return 8;
	}
	memset(p, 0, 32);
	put64(p, last);
	put32(p + 8, d->bs);
	while ((d->bs << (exp + 1)) <= d->be->phys_block_size && exp < 15)
		exp++;
	p[13] = exp;
	p[14] = 0xc0;		/* LBPME, LBPRZ */
	return 32;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---- */

static size_t rsoc_timeouts(uint8_t *p)
{
	memset(p, 0, 12);
	put16(p, 10);	/* nominal/recommended timeouts: not specified */
	return 12;
}

static void do_rsoc(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	uint8_t buf[SCSI_PARAM_MAX];
	bool rctd = cdb[2] & 0x80;
	uint8_t opt = cdb[2] & 7, op = cdb[3];
	uint16_t sa = be16(cdb + 4);
	const struct cmd_desc *c;
	struct sense s = { SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, 2, -1,
			   true };
	size_t n;

	if (opt == 0) {
		n = 4;
		for (unsigned int i = 0; i < NCMDS; i++) {
			uint8_t *e = buf + n;

			memset(e, 0, 8);
			e[0] = cmds[i].op;
			put16(e + 2, cmds[i].sa);
			e[5] = (rctd ? 0x02 : 0) | (cmds[i].has_sa ? 0x01 : 0);
			put16(e + 6, cmds[i].len);
			n += 8;
			if (rctd)
				n += rsoc_timeouts(buf + n);
		}
		put32(buf, n - 4);
		send_in(req, buf, min_sz(n, alloc));
		return;
	}
	c = cmd_find(op, 0, true);
	switch (opt) {
	case 1:		/* opcode without service action */
		if (c && c->has_sa)
			goto invalid;
		break;
	case 2:		/* opcode + service action */
		if (c && !c->has_sa)
			goto invalid;
		if (c)
			c = cmd_find(op, sa, false);
		break;
	case 3:		/* opcode, service action if it has them */
		if (c && c->has_sa)
			c = cmd_find(op, sa, false);
		break;
	default:
		goto invalid;
	}
	memset(buf, 0, 4);
	if (!c) {
		buf[1] = 0x01;	/* not supported */
		send_in(req, buf, min_sz(4, alloc));
		return;
	}
	buf[1] = (rctd ? 0x80 : 0) | 0x03;	/* supported per standard */
	put16(buf + 2, c->len);
	memcpy(buf + 4, c->usage, c->len);
	n = 4 + c->len;
	if (rctd)
		n += rsoc_timeouts(buf + n);
	send_in(req, buf, min_sz(n, alloc));
	return;
invalid:
	check_condition(req, &s);
	req->done(req);
}

/* ---- mode pages ---- */

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };

#define CACHING_PAGE 0x08
#define CONTROL_PAGE 0x0a
#define CACHING_LEN 20
#define CONTROL_LEN 12

static size_t caching_page(const struct scsi_disk *d, int pc, uint8_t *p)
{
	memset(p, 0, CACHING_LEN);
	p[0] = CACHING_PAGE;
	p[1] = CACHING_LEN - 2;
	if (pc == PC_CHANGEABLE)
		p[2] = 0x04;
	else if (pc == PC_DEFAULT || __atomic_load_n(&d->wce, __ATOMIC_RELAXED))
		p[2] = 0x04;	/* WCE */
	return CACHING_LEN;
}

static size_t control_page(const struct scsi_disk *d, int pc, uint8_t *p)
{
	memset(p, 0, CONTROL_LEN);
	p[0] = CONTROL_PAGE;
	p[1] = CONTROL_LEN - 2;
	if (pc == PC_CHANGEABLE) {
		p[2] = 0x04;	/* D_SENSE */
		return CONTROL_LEN;
	}
	if (pc == PC_CURRENT && dsense(d))
		p[2] = 0x04;
	p[3] = 0x10;		/* queue algorithm: unrestricted reordering */
	put16(p + 8, 0xffff);	/* busy timeout: unlimited */
	return CONTROL_LEN;
}

static void do_mode_sense(struct scsi_req *req, const uint8_t *cdb,
			  uint32_t alloc)
{
	struct scsi_disk *d = req->disk;
	bool ten = cdb[0] == MODE_SENSE_10;
	bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
	int pc = cdb[2] >> 6;
	uint8_t page = cdb[2] & 0x3f, sub = cdb[3];
	uint8_t buf[128];
	size_t hdr = ten ? 8 : 4, n = hdr, bdl = dbd ? 0 : llbaa ? 16 : 8;
	struct sense s = { SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, 2, -1,
			   true };

	if (pc == PC_SAVED) {
		s = (struct sense){ SENSE_ILLEGAL_REQUEST,
				    ASC_SAVING_NOT_SUPPORTED, -1, -1, false };
		goto fail;
	}
	if (page != CACHING_PAGE && page != CONTROL_PAGE && page != 0x3f)
		goto fail;
	if (sub && !(page == 0x3f && sub == 0xff)) {
		s.field = 3;
		goto fail;
	}
	memset(buf, 0, hdr + bdl);
	if (bdl == 8) {
		put32(buf + n, d->nblocks > 0xffffffffull ? 0xffffffff : d->nblocks);
		put32(buf + n + 4, d->bs);	/* density 0, block length */
	} else if (bdl == 16) {
		put64(buf + n, d->nblocks);
		put32(buf + n + 12, d->bs);
	}
	n += bdl;
	if (page == CACHING_PAGE || page == 0x3f)
		n += caching_page(d, pc, buf + n);
	if (page == CONTROL_PAGE || page == 0x3f)
		n += control_page(d, pc, buf + n);
	/* device-specific parameter: WP, DPOFUA */
	if (ten) {
		put16(buf, n - 2);
		buf[3] = (d->be->ro ? 0x80 : 0) | 0x10;
		buf[4] = llbaa ? 0x01 : 0;
		put16(buf + 6, bdl);
	} else {
		buf[0] = n - 1;
		buf[2] = (d->be->ro ? 0x80 : 0) | 0x10;
		buf[3] = bdl;
	}
	send_in(req, buf, min_sz(n, alloc));
	return;
fail:
	check_condition(req, &s);
	req->done(req);
}

/* Checks a MODE SELECT parameter list (all of it) before applying it, so a
 * bad list changes nothing. */
static void do_mode_select(struct scsi_req *req, const uint8_t *cdb,
			   const uint8_t *p, size_t len)
{
	struct scsi_disk *d = req->disk;
	bool ten = cdb[0] == MODE_SELECT_10;
	size_t hdr = ten ? 8 : 4, bdl, off;
	struct sense s = { SENSE_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH, -1, -1,
			   false };
	int wce = -1, ds = -1;

	req->xferred = len;
	if (len == 0)
		goto done;
	if (len < hdr)
		goto fail;
	bdl = ten ? be16(p + 6) : p[3];
	if (bdl && bdl != (ten && (p[4] & 1) ? 16u : 8u)) {
		s = (struct sense){ SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM,
				    ten ? 6 : 3, -1, false };
		goto fail;
	}
	if (len < hdr + bdl)
		goto fail;
	if (bdl) {
		/* the block length cannot change */
		uint32_t bl = bdl == 16 ? be32(p + hdr + 12) : be32(p + hdr + 4) & 0xffffff;

		if (bl != d->bs) {
			s = (struct sense){ SENSE_ILLEGAL_REQUEST,
					    ASC_INVALID_FIELD_PARAM,
					    hdr + (bdl == 16 ? 12 : 5), -1, false };
			goto fail;
		}
	}
	for (off = hdr + bdl; off < len;) {
		uint8_t cur[CACHING_LEN], chg[CACHING_LEN];
		const uint8_t *pg = p + off;
		size_t plen;

		if (len - off < 2)
			goto fail;
		plen = pg[1] + 2;
		s = (struct sense){ SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM,
				    off, -1, false };
		if ((pg[0] & 0x3f) == CACHING_PAGE && !(pg[0] & 0x40)) {
			caching_page(d, PC_CURRENT, cur);
			caching_page(d, PC_CHANGEABLE, chg);
		} else if ((pg[0] & 0x3f) == CONTROL_PAGE && !(pg[0] & 0x40)) {
			control_page(d, PC_CURRENT, cur);
			control_page(d, PC_CHANGEABLE, chg);
		} else {
			goto fail;
		}
		if (plen != (size_t)cur[1] + 2) {
			s.field = off + 1;
			goto fail;
		}
		if (len - off < plen) {
			s = (struct sense){ SENSE_ILLEGAL_REQUEST,
					    ASC_PARAM_LIST_LENGTH, -1, -1, false };
			goto fail;
		}
		/* only the changeable bits may differ from current values */
		for (size_t i = 2; i < plen; i++) {
			uint8_t diff = (pg[i] ^ cur[i]) & ~chg[i];

			if (diff) {
				s.field = off + i;
				s.bit = 31 - __builtin_clz(diff);
				goto fail;
			}
		}
		if ((pg[0] & 0x3f) == CACHING_PAGE)
			wce = !!(pg[2] & 0x04);
		else
			ds = !!(pg[2] & 0x04);
		off += plen;
	}
	if (wce >= 0)
		__atomic_store_n(&d->wce, wce, __ATOMIC_RELAXED);
	if (ds >= 0)
		__atomic_store_n(&d->dsense, ds, __ATOMIC_RELAXED);
done:
	req->done(req);
	return;
fail:
	check_condition(req, &s);
	req->done(req);
}

/* ---- WRITE SAME and UNMAP ---- */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}


/* Issues the next chunk of a patterned WRITE SAME: the pattern block in
 * guest memory, repeated through ws_iov, written straight to disk. */
static void ws_next(struct scsi_req *req)
{
	struct scsi_disk *d = req->disk;
	uint64_t chunk;
	int ret;

	if (req->err || req->abort_host || req->pos >= req->end) {
		if (req->sync_after)
			flush_then_complete(req, ST_FLUSH);
		else
			complete(req);
		return;
	}
	chunk = (uint64_t)req->step * d->bs;	/* step: blocks per chunk */
	if (chunk > req->end - req->pos)
		chunk = req->end - req->pos;
	req->stage = ST_WS;
	ret = blkq_rw(req->q, d->be, BLK_OP_WRITE, req->ws_iov,
		      req->nsteps * (chunk / d->bs) / req->step, req->pos,
		      io_done, req);
	if (ret) {
		req->err = ret;
		complete(req);
		return;
	}
	req->pos += chunk;
}

static void do_write_same(struct scsi_req *req, const uint8_t *cdb,
			  const struct decoded *dc)
{
	struct scsi_disk *d = req->disk;
	bool unmap = cdb[1] & 0x08;
	uint8_t block[SCSI_PARAM_MAX];
	uint64_t off = dc->lba * d->bs, len = (uint64_t)dc->nblocks * d->bs;
	unsigned int pieces = 0, reps;
	size_t got = 0;

	if (dc->info.xfer) {
		iov_to_buf(req->iov, req->iovcnt, 0, block, d->bs);
		req->xferred = d->bs;
	}
	if (!dc->info.xfer || all_zero(block, d->bs)) {
		/* Deallocated blocks read as zeroes (LBPRZ), so a WRITE SAME
		 * of zeroes with UNMAP may deallocate: one UNMAP range. */
		req->unmap[0].off = off;
		req->unmap[0].len = len;
		req->nsteps = 1;
		req->step = 0;
		req->dealloc = unmap && d->be->discard_ok;
		unmap_next(req);
		return;
	}
	/* The pattern as iovecs into the guest's buffer (no copy). */
	for (unsigned int i = 0; i < req->iovcnt && got < d->bs; i++) {
		size_t n = min_sz(req->iov[i].iov_len, d->bs - got);

		if (pieces == 32) {
			check(req, SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM);
			req->done(req);
			return;
		}
		req->ws_iov[pieces].iov_base = req->iov[i].iov_base;
		req->ws_iov[pieces].iov_len = n;
		pieces++;
		got += n;
	}
	reps = 32 / pieces;
	for (unsigned int r = 1; r < reps; r++)
		memcpy(req->ws_iov + r * pieces, req->ws_iov,
		       pieces * sizeof(struct iovec));
	req->nsteps = reps * pieces;	/* iovecs per full chunk */
	req->step = reps;		/* blocks per full chunk */
	req->pos = off;
	req->end = off + len;
	ws_next(req);
}

static void unmap_next(struct scsi_req *req)
{
	struct scsi_disk *d = req->disk;
	int ret;

	if (req->err || req->abort_host || req->step >= req->nsteps) {
		if (req->sync_after)
			flush_then_complete(req, ST_FLUSH);
		else
			complete(req);
		return;
	}
	req->stage = ST_UNMAP;
	ret = blkq_discard(req->q, d->be,
			   req->dealloc ? BLK_OP_DISCARD : BLK_OP_WRITE_ZEROES,
			   req->unmap[req->step].off, req->unmap[req->step].len,
			   io_done, req);
	req->step++;
	if (ret) {
		req->err = ret;
		complete(req);
	}
}

static void do_unmap(struct scsi_req *req, const uint8_t *p, size_t len)
{
	struct scsi_disk *d = req->disk;
	struct sense s = { SENSE_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH, -1, -1,
			   false };
	uint16_t bddl;
	unsigned int n = 0;

	req->xferred = len;
	if (len == 0) {
		req->done(req);
		return;
	}
	if (len < 8 || len < (size_t)be16(p) + 2 || len < (size_t)be16(p + 2) + 8)
		goto fail;
	bddl = be16(p + 2);
	if (bddl / 16 > MAX_UNMAP_DESC) {
		s = (struct sense){ SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM,
				    2, -1, false };
		goto fail;
	}
	for (unsigned int i = 0; i < bddl / 16; i++) {
		const uint8_t *e = p + 8 + 16 * i;
		uint64_t lba = be64(e);
		uint32_t cnt = be32(e + 8);

		if (cnt > d->max_unmap_blocks) {
			s = (struct sense){ SENSE_ILLEGAL_REQUEST,
					    ASC_INVALID_FIELD_PARAM, 8 + 16 * i + 8,
					    -1, false };
			goto fail;
		}
		if (lba > d->nblocks || cnt > d->nblocks - lba) {
			s = (struct sense){ SENSE_ILLEGAL_REQUEST,
					    ASC_LBA_OUT_OF_RANGE, -1, -1, false };
			goto fail;
		}
		if (!cnt)
			continue;
		req->unmap[n].off = lba * d->bs;
		req->unmap[n].len = (uint64_t)cnt * d->bs;
		n++;
	}
	req->nsteps = n;
	req->step = 0;
	req->dealloc = d->be->discard_ok;
	unmap_next(req);
	return;
fail:
	check_condition(req, &s);
	req->done(req);
}

/* ---- execution ---- */

static bool needs_medium(uint8_t op)
{
	switch (op) {
	case INQUIRY: case REQUEST_SENSE: case REPORT_LUNS: case MAINTENANCE_IN:
	case MODE_SENSE_6: case MODE_SENSE_10: case MODE_SELECT_6:
	case MODE_SELECT_10: case START_STOP_UNIT: case PREVENT_ALLOW:
	case READ_CAPACITY_10: case SERVICE_ACTION_IN_16:
		return false;
	}
	return true;
}

/* Unit attention and stopped-unit conditions, reported before anything
 * else the command would do. Returns true when the command completed. */
static bool state_check(struct scsi_disk *d, struct scsi_req *req)
{
	uint8_t op = req->cdb_len ? req->cdb[0] : 0xff;
	uint8_t ua;

	if (op != INQUIRY && op != REPORT_LUNS && op != REQUEST_SENSE &&
	    __atomic_load_n(&d->ua, __ATOMIC_RELAXED)) {
		ua = __atomic_exchange_n(&d->ua, 0, __ATOMIC_RELAXED);
		if (ua) {
			check(req, SENSE_UNIT_ATTENTION, 0x2900 | ua);
			req->done(req);
			return true;
		}
	}
	return false;
}

static bool stopped_check(struct scsi_disk *d, struct scsi_req *req)
{
	if (!needs_medium(req->cdb[0]) ||
	    !__atomic_load_n(&d->stopped, __ATOMIC_RELAXED))
		return false;
	check(req, SENSE_NOT_READY, ASC_NOT_READY_INIT_REQUIRED);
	req->done(req);
	return true;
}

static void init_req(struct scsi_disk *d, struct scsi_req *req)
{
	req->disk = d;
	req->host = SCSI_HOST_OK;
	req->status = SAM_STAT_GOOD;
	req->sense_len = 0;
	req->xferred = 0;
	req->abort_host = 0;
	req->err = 0;
	req->stage = ST_NONE;
	req->op = req->cdb_len ? req->cdb[0] : 0;
	req->is_write = false;
	req->sync_after = false;
}

/* Whole-buffer mode: the buffer must hold what the CDB moves, in the
 * command's direction. */
static bool buffer_ok(struct scsi_req *req, const struct scsi_cmd_info *info)
{
	if (info->dir == SCSI_DIR_NONE || info->dir == SCSI_DIR_FROM_DEV) {
		/* data-in non-direct commands are checked once their data
		 * length is known (send_in) */
		if (info->dir == SCSI_DIR_NONE || !info->direct)
			return true;
	}
	if (req->buf_len && req->buf_dir != info->dir)
		req->host = SCSI_HOST_BAD_DIR;
	else if (req->buf_len < info->xfer)
		req->host = SCSI_HOST_OVERRUN;
	else
		return true;
	req->done(req);
	return false;
}

static void do_rw(struct scsi_disk *d, struct scsi_req *req,
		  const struct decoded *dc)
{
	unsigned int cnt;
	int ret;

	if (!dc->info.xfer) {
		req->done(req);
		return;
	}
	cnt = iov_trim(req->iov, req->iovcnt, dc->info.xfer);
	req->stage = ST_RW;
	ret = blkq_rw(req->q, d->be, req->is_write ? BLK_OP_WRITE : BLK_OP_READ,
		      req->iov, cnt, dc->info.offset, io_done, req);
	if (ret)
		submit_failed(req, ret);
}

static void do_start_stop(struct scsi_disk *d, struct scsi_req *req,
			  const uint8_t *cdb)
{
	if (cdb[4] & 0x01) {
		__atomic_store_n(&d->stopped, false, __ATOMIC_RELAXED);
		req->done(req);
		return;
	}
	if (cdb[4] & 0x04) {	/* NO_FLUSH */
		__atomic_store_n(&d->stopped, true, __ATOMIC_RELAXED);
		req->done(req);
		return;
	}
	req->is_write = true;
	flush_then_complete(req, ST_STOP);
}

/* Everything but READ and WRITE: emulated on a stack buffer, kept out of
 * the READ/WRITE path's frame. */
static void __attribute__((noinline)) emulate(struct scsi_disk *d,
					      struct scsi_req *req,
					      const struct decoded *dc)
{
	const uint8_t *cdb = req->cdb;
	uint8_t buf[SCSI_PARAM_MAX];
	size_t n;
	int ret;

	switch (cdb[0]) {
	case TEST_UNIT_READY:
	case VERIFY_10: case VERIFY_16:
	case PREVENT_ALLOW:
		req->done(req);
		return;
	case REQUEST_SENSE:
		n = request_sense(d, cdb[1] & 1, buf);
		send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case INQUIRY:
		do_inquiry(req, cdb, dc->info.xfer);
		return;
	case READ_CAPACITY_10:
	case SERVICE_ACTION_IN_16:
		n = read_capacity(d, cdb[0] == SERVICE_ACTION_IN_16, buf);
		send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case REPORT_LUNS:
		n = report_luns(d->luns, cdb[2], buf);
		send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case MAINTENANCE_IN:
		do_rsoc(req, cdb, dc->info.xfer);
		return;
	case MODE_SENSE_6: case MODE_SENSE_10:
		do_mode_sense(req, cdb, dc->info.xfer);
		return;
	case MODE_SELECT_6: case MODE_SELECT_10:
		n = iov_to_buf(req->iov, req->iovcnt, 0, buf, dc->info.xfer);
		do_mode_select(req, cdb, buf, n);
		return;
	case START_STOP_UNIT:
		do_start_stop(d, req, cdb);
		return;
	case SYNC_CACHE_10: case SYNC_CACHE_16:
		req->is_write = true;
		req->stage = ST_FLUSH;
		ret = blkq_flush(req->q, d->be, io_done, req);
		if (ret)
			submit_failed(req, ret);
		return;
	case WRITE_SAME_10: case WRITE_SAME_16:
		do_write_same(req, cdb, dc);
		return;
	case UNMAP:
		n = iov_to_buf(req->iov, req->iovcnt, 0, buf, dc->info.xfer);
		do_unmap(req, buf, n);
		return;
	default:	/* decode() lets nothing else through */
		check(req, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
		req->done(req);
		return;
	}
}

static void execute(struct scsi_disk *d, struct scsi_req *req,
		    const struct decoded *dc)
{
	req->is_write = is_write_op(req->cdb[0]);
	req->sync_after = req->is_write &&
		(dc->fua || !__atomic_load_n(&d->wce, __ATOMIC_RELAXED));
	if (dc->info.direct)
		do_rw(d, req, dc);
	else
		emulate(d, req, dc);
}

void scsi_disk_submit(struct scsi_disk *d, struct scsi_req *req)
{
	struct decoded dc;

	init_req(d, req);
	decode(d, req->cdb, req->cdb_len, &dc);
	req->info = dc.info;
	if (!dc.bad && !buffer_ok(req, &dc.info))
		return;
	if (state_check(d, req))
		return;
	if (dc.bad) {
		check_condition(req, &dc.err);
		req->done(req);
		return;
	}
	if (stopped_check(d, req))
		return;
	execute(d, req, &dc);
}

/* ---- piecewise data phase ---- */

int scsi_disk_begin(struct scsi_disk *d, struct scsi_req *req)
{
	struct decoded dc;

	init_req(d, req);
	decode(d, req->cdb, req->cdb_len, &dc);
	req->info = dc.info;
	if (state_check(d, req))
		return 1;
	if (dc.bad) {
		check_condition(req, &dc.err);
		req->done(req);
		return 1;
	}
	if (!dc.info.direct)
		return -EINVAL;
	if (stopped_check(d, req))
		return 1;
	req->is_write = is_write_op(req->cdb[0]);
	req->sync_after = req->is_write &&
		(dc.fua || !__atomic_load_n(&d->wce, __ATOMIC_RELAXED));
	return 0;
}

int scsi_disk_segment(struct scsi_req *req, const struct iovec *iov,
		      unsigned int iovcnt, uint64_t pos)
{
	uint64_t len = iov_size(iov, iovcnt);

	if (pos > req->info.xfer || len > req->info.xfer - pos)
		return -EINVAL;
	req->stage = ST_SEG;
	return blkq_rw(req->q, req->disk->be,
		       req->is_write ? BLK_OP_WRITE : BLK_OP_READ, iov, iovcnt,
		       req->info.offset + pos, io_done, req);
}

void scsi_disk_end(struct scsi_req *req)
{
	if (req->sync_after && req->xferred)
		flush_then_complete(req, ST_FLUSH);
	else
		complete(req);
}

/* ---- task management, absent LUNs, life cycle ---- */

void scsi_disk_abort(struct scsi_req *req, bool reset)
{
	req->abort_host = reset ? SCSI_HOST_RESET : SCSI_HOST_ABORTED;
}

void scsi_disk_reset(struct scsi_disk *d, bool nexus)
{
	__atomic_store_n(&d->ua, nexus ? 0x07 : 0x03, __ATOMIC_RELAXED);
}

void scsi_lun_absent_submit(const struct scsi_lun_map *luns,
			    struct scsi_req *req)
{
	uint8_t buf[SCSI_PARAM_MAX];
	struct decoded dc;
	uint8_t op = req->cdb_len ? req->cdb[0] : 0xff;
	struct sense s = { SENSE_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED, -1, -1,
			   false };
	size_t n;

	init_req(NULL, req);
	if (op != INQUIRY && op != REPORT_LUNS && op != REQUEST_SENSE) {
		check_condition(req, &s);
		req->done(req);
		return;
	}
	decode(NULL, req->cdb, req->cdb_len, &dc);
	if (dc.bad) {
		check_condition(req, &dc.err);
		req->done(req);
		return;
	}
	switch (op) {
	case INQUIRY:
		if (req->cdb[1] & 1) {
			check_condition(req, &s);
			req->done(req);
			return;
		}
		n = std_inquiry(buf, 0x7f);	/* PQ 3: no LU here */
		break;
	case REPORT_LUNS:
		n = report_luns(luns, req->cdb[2], buf);
		break;
	default:
		n = sense_encode(&s, req->cdb[1] & 1, buf);
		break;
	}
	send_in(req, buf, min_sz(n, dc.info.xfer));
}

bool scsi_disk_wce(const struct scsi_disk *d)
{
	return __atomic_load_n(&d->wce, __ATOMIC_RELAXED);
}

struct scsi_disk *scsi_disk_create(struct blk_backend *be,
				   const struct scsi_lun_map *luns)
{
	struct scsi_disk *d = calloc(1, sizeof(*d));
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a of the serial */

	if (!d)
		return NULL;
	d->be = be;
	d->luns = luns;
	d->bs = be->block_size ? be->block_size : 512;
	d->nblocks = be->size / d->bs;
	d->max_xfer_blocks = MAX_XFER_BYTES / d->bs;
	d->max_unmap_blocks = MAX_UNMAP_BYTES / d->bs;
	d->wce = true;
	for (size_t i = 0; i < sizeof(be->serial) && be->serial[i]; i++)
		h = (h ^ (uint8_t)be->serial[i]) * 0x100000001b3ull;
	put64(d->naa, (h >> 4) | 0x3ull << 60);
	return d;
}

void scsi_disk_destroy(struct scsi_disk *d)
{
	const struct blk_errors *e = &d->errors;

	if (blk_errors_total(e))
		pr_warn("scsi disk %s: I/O errors: %llu reads, %llu writes, %llu flushes, %llu other",
			blk_name(d->be), (unsigned long long)e->read,
			(unsigned long long)e->write, (unsigned long long)e->flush,
			(unsigned long long)e->other);
	free(d);
}

/* ---- errors ---- */

static enum blk_op error_op(const struct scsi_req *req)
{
	switch (req->stage) {
	case ST_RW:
	case ST_SEG:
		return req->is_write ? BLK_OP_WRITE : BLK_OP_READ;
	case ST_FLUSH:
	case ST_STOP:
		return BLK_OP_FLUSH;
	default:
		return BLK_OP_WRITE_ZEROES;
	}
}

static const char *op_name(enum blk_op op)
{
	switch (op) {
	case BLK_OP_READ:
		return "read";
	case BLK_OP_WRITE:
		return "write";
	case BLK_OP_FLUSH:
		return "flush";
	default:
		return "unmap/write same";
	}
}

/* The backend failed a command (the HBA reports CHECK CONDITION): counted,
 * and logged however often it happens, rate-limited. Both HBAs (virtio-scsi,
 * LSI) end here. */
static void io_error(struct scsi_req *req)
{
	struct scsi_disk *d = req->disk;
	enum blk_op op = error_op(req);

	blk_errors_add(&d->errors, op);
	pr_err_rated("scsi disk %s: %s (opcode 0x%02x) failed: %s", blk_name(d->be),
		     op_name(op), req->op, strerror(-req->err));
}

void scsi_disk_count_error(struct scsi_disk *d, enum blk_op op)
{
	blk_errors_add(&d->errors, op);
}

const struct blk_errors *scsi_disk_errors(const struct scsi_disk *d)
{
	return &d->errors;
}
