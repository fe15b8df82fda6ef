/* SCSI disk target: the commands it implements (with their CDB usage
 * maps) and the CDB decoder that checks a command and finds its data phase. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"
#include "scsi/disk_pr.h"

#define LBA4 0xff, 0xff, 0xff, 0xff
#define LBA8 LBA4, LBA4
const struct cmd_desc disk_cmds[] = {
	{ TEST_UNIT_READY, 0, false, 6, { 0x00, 0, 0, 0, 0, 0 } },
	{ REQUEST_SENSE, 0, false, 6, { 0x03, 0x01, 0, 0, 0xff, 0 } },
	{ READ_6, 0, false, 6, { 0x08, 0x1f, 0xff, 0xff, 0xff, 0 } },
	{ WRITE_6, 0, false, 6, { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0 } },
	{ INQUIRY, 0, false, 6, { 0x12, 0x01, 0xff, 0xff, 0xff, 0 } },
	{ MODE_SELECT_6, 0, false, 6, { 0x15, 0x11, 0, 0, 0xff, 0 } },
	{ RESERVE_6, 0, false, 6, { 0x16, 0, 0, 0, 0, 0 } },
	{ RELEASE_6, 0, false, 6, { 0x17, 0, 0, 0, 0, 0 } },
	{ MODE_SENSE_6, 0, false, 6, { 0x1a, 0x08, 0xff, 0xff, 0xff, 0 } },
	{ START_STOP_UNIT, 0, false, 6, { 0x1b, 0x01, 0, 0, 0x05, 0 } },
	{ PREVENT_ALLOW, 0, false, 6, { 0x1e, 0, 0, 0, 0x01, 0 } },
	{ READ_CAPACITY_10, 0, false, 10, { 0x25, 0, LBA4, 0, 0, 0x01, 0 } },
	{ READ_10, 0, false, 10, { 0x28, 0x18, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ WRITE_10, 0, false, 10, { 0x2a, 0x18, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ WRITE_VERIFY_10, 0, false, 10, { 0x2e, 0x16, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ VERIFY_10, 0, false, 10, { 0x2f, 0x16, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ PRE_FETCH_10, 0, false, 10, { 0x34, 0x02, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ SYNC_CACHE_10, 0, false, 10, { 0x35, 0x06, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ READ_DEFECT_10, 0, false, 10, { 0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0 } },
	{ WRITE_SAME_10, 0, false, 10, { 0x41, 0x08, LBA4, 0x1f, 0xff, 0xff, 0 } },
	{ UNMAP, 0, false, 10, { 0x42, 0, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0 } },
	{ MODE_SELECT_10, 0, false, 10, { 0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0 } },
	{ MODE_SENSE_10, 0, false, 10, { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0 } },
#define PRIN(sa) { PERSISTENT_RESERVE_IN, sa, true, 10, \
		   { 0x5e, 0x1f, 0, 0, 0, 0, 0, 0xff, 0xff, 0 } }
	PRIN(0), PRIN(1), PRIN(2), PRIN(3),
#define PROUT(sa) { PERSISTENT_RESERVE_OUT, sa, true, 10, \
		    { 0x5f, 0x1f, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0 } }
	PROUT(0), PROUT(1), PROUT(2), PROUT(3), PROUT(4), PROUT(5), PROUT(6),
	{ READ_16, 0, false, 16, { 0x88, 0x18, LBA8, LBA4, 0x1f, 0 } },
	{ COMPARE_AND_WRITE, 0, false, 16,
	  { 0x89, 0x18, LBA8, 0, 0, 0, 0xff, 0x1f, 0 } },
	{ WRITE_16, 0, false, 16, { 0x8a, 0x18, LBA8, LBA4, 0x1f, 0 } },
	{ ORWRITE_16, 0, false, 16, { 0x8b, 0x18, LBA8, LBA4, 0x1f, 0 } },
	{ WRITE_VERIFY_16, 0, false, 16, { 0x8e, 0x16, LBA8, LBA4, 0x1f, 0 } },
	{ VERIFY_16, 0, false, 16, { 0x8f, 0x16, LBA8, LBA4, 0x1f, 0 } },
	{ PRE_FETCH_16, 0, false, 16, { 0x90, 0x02, LBA8, LBA4, 0x1f, 0 } },
	{ SYNC_CACHE_16, 0, false, 16, { 0x91, 0x06, LBA8, LBA4, 0x1f, 0 } },
	{ WRITE_SAME_16, 0, false, 16, { 0x93, 0x09, LBA8, LBA4, 0x1f, 0 } },
	{ SERVICE_ACTION_IN_16, SAI_READ_CAPACITY_16, true, 16,
	  { 0x9e, 0x1f, LBA8, LBA4, 0x01, 0 } },
	{ SERVICE_ACTION_IN_16, SAI_GET_LBA_STATUS, true, 16,
	  { 0x9e, 0x1f, LBA8, LBA4, 0, 0 } },
	{ EXTENDED_COPY, 0x00, true, 16, { 0x83, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0 } },
	{ RECEIVE_COPY_RESULTS, 0x00, true, 16, { 0x84, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0 } },
	{ RECEIVE_COPY_RESULTS, 0x03, true, 16, { 0x84, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0 } },
	{ RECEIVE_COPY_RESULTS, 0x04, true, 16, { 0x84, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0 } },
	{ REPORT_LUNS, 0, false, 12, { 0xa0, 0, 0xff, 0, 0, 0, LBA4, 0, 0 } },
	{ MAINTENANCE_IN, MI_REPORT_SUPPORTED_OPCODES, true, 12,
	  { 0xa3, 0x1f, 0x87, 0xff, 0xff, 0xff, LBA4, 0, 0 } },
	{ READ_12, 0, false, 12, { 0xa8, 0x18, LBA4, LBA4, 0x1f, 0 } },
	{ WRITE_12, 0, false, 12, { 0xaa, 0x18, LBA4, LBA4, 0x1f, 0 } },
	{ WRITE_VERIFY_12, 0, false, 12, { 0xae, 0x16, LBA4, LBA4, 0x1f, 0 } },
	{ VERIFY_12, 0, false, 12, { 0xaf, 0x16, LBA4, LBA4, 0x1f, 0 } },
	{ READ_DEFECT_12, 0, false, 12, { 0xb7, 0x1f, LBA4, LBA4, 0, 0 } },
};
const unsigned int disk_ncmds = sizeof(disk_cmds) / sizeof(disk_cmds[0]);

const struct cmd_desc *disk_cmd_find(uint8_t op, uint8_t sa, bool any_sa)
{
	for (unsigned int i = 0; i < disk_ncmds; i++) {
		if (disk_cmds[i].op != op)
			continue;
		if (!disk_cmds[i].has_sa || any_sa || disk_cmds[i].sa == sa)
			return &disk_cmds[i];
	}
	return NULL;
}

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

bool disk_is_write_op(uint8_t op)
{
	switch (op) {
	case WRITE_6: case WRITE_10: case WRITE_12: case WRITE_16:
	case WRITE_SAME_10: case WRITE_SAME_16: case UNMAP:
	case WRITE_VERIFY_10: case WRITE_VERIFY_12: case WRITE_VERIFY_16:
	case COMPARE_AND_WRITE: case ORWRITE_16:
		return true;
	}
	return false;
}

/* The LBA range [lba, lba+n) must lie on the medium. */
static bool range_ok(const struct scsi_disk *d, struct decoded *dc,
		     uint64_t lba, uint64_t n)
{
	if (lba < dc->medium && n <= dc->medium - lba)
		return true;
	fail(dc, SENSE_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	return false;
}

static void decode_rw(const struct scsi_disk *d, const uint8_t *cdb,
		      struct decoded *dc)
{
	unsigned int len_at;
	bool wr = disk_is_write_op(cdb[0]);

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

/* SYNCHRONIZE CACHE, WRITE SAME: an LBA range, no direct data. */
static void decode_range(const struct scsi_disk *d, const uint8_t *cdb,
			 struct decoded *dc)
{
	bool is16 = cdb[0] & 0x80;

	dc->lba = is16 ? be64(cdb + 2) : be32(cdb + 2);
	dc->nblocks = is16 ? be32(cdb + 10) : be16(cdb + 7);
	switch (cdb[0]) {
	case SYNC_CACHE_10: case SYNC_CACHE_16:
		/* 0 blocks: everything from lba to the end. */
		if (dc->nblocks == 0 && dc->lba <= dc->medium)
			return;
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

/* The LBA and length fields of a CDB of the common layouts (10, 12 or 16
 * bytes, by the opcode's group); returns the length field's byte. */
static unsigned int lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n)
{
	if (cdb[0] >= 0x80 && cdb[0] < 0xa0) {
		*lba = be64(cdb + 2);
		*n = be32(cdb + 10);
		return 10;
	}
	*lba = be32(cdb + 2);
	if (cdb[0] >= 0xa0) {
		*n = be32(cdb + 6);
		return 6;
	}
	*n = be16(cdb + 7);
	return 7;
}

/* VERIFY, WRITE AND VERIFY, COMPARE AND WRITE, ORWRITE (disk_cmp.c). The
 * LBA range is checked before the other fields: an initiator probing the
 * end of the medium with BYTCHK set wants LBA OUT OF RANGE, not a complaint
 * about the data it would have sent. */
static void decode_cmp(const struct scsi_disk *d, const uint8_t *cdb,
		       struct decoded *dc)
{
	unsigned int len_at = lba_len(cdb, &dc->lba, &dc->nblocks);
	uint8_t bytchk = (cdb[1] >> 1) & 3;
	bool wr = disk_is_write_op(cdb[0]);
	uint64_t xfer;

	if (cdb[0] == COMPARE_AND_WRITE) {
		dc->nblocks = cdb[13];
		len_at = 13;
	}
	if (!range_ok(d, dc, dc->lba, dc->nblocks))
		return;
	if (wr && d->be->ro)
		return fail(dc, SENSE_DATA_PROTECT, ASC_WRITE_PROTECTED);
	switch (cdb[0]) {
	case VERIFY_10: case VERIFY_12: case VERIFY_16:
		if (bytchk == 2)	/* reserved */
			return bad_field(dc, true, 1, 2);
		if (bytchk == 0)	/* medium verification: no data */
			return;
		dc->cmp = bytchk == 1 ? CMP_VERIFY : CMP_VERIFY_SAME;
		break;
	case WRITE_VERIFY_10: case WRITE_VERIFY_12: case WRITE_VERIFY_16:
		/* 10b and 11b are reserved for WRITE AND VERIFY in SBC-4 */
		if (bytchk > 1)
			return bad_field(dc, true, 1, 2);
		dc->cmp = bytchk ? CMP_WRITE_VERIFY : CMP_NONE;
		break;
	case COMPARE_AND_WRITE:
		/* Its atomicity rests on the image file's locks: a network
		 * disk has none to take (docs/ARCHITECTURE.md). */
		if (d && !blk_is_local(d->be))
			return fail(dc, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
		if (dc->nblocks > MAX_CAW_BLOCKS)
			return bad_field(dc, true, 13, -1);
		dc->cmp = CMP_CAW;
		break;
	default:
		dc->cmp = CMP_ORWRITE;
		break;
	}
	if (dc->nblocks > d->max_xfer_blocks)
		return bad_field(dc, true, len_at, -1);
	if (dc->nblocks == 0) {
		dc->cmp = CMP_NONE;
		return;
	}
	xfer = (uint64_t)dc->nblocks * d->bs;
	if (dc->cmp == CMP_VERIFY_SAME)
		xfer = d->bs;
	else if (dc->cmp == CMP_CAW)
		xfer *= 2;
	/* WRITE AND VERIFY is written through (the verify is of what is
	 * stored); the others follow their FUA bit and the write cache */
	dc->fua = wr && (cdb[1] & 0x08 || cdb[0] == WRITE_VERIFY_10 ||
			 cdb[0] == WRITE_VERIFY_12 || cdb[0] == WRITE_VERIFY_16);
	dc->info.dir = SCSI_DIR_TO_DEV;
	dc->info.xfer = xfer;
	dc->info.direct = true;
	dc->info.offset = dc->lba * d->bs;
}

/* PRE-FETCH and GET LBA STATUS: an LBA (and length) on the medium. */
static void decode_lba(const struct scsi_disk *d, const uint8_t *cdb,
		       struct decoded *dc)
{
	unsigned int len_at = lba_len(cdb, &dc->lba, &dc->nblocks);

	if (cdb[0] == SERVICE_ACTION_IN_16) {	/* GET LBA STATUS */
		if (dc->lba >= dc->medium)
			return fail(dc, SENSE_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
		dc->info.dir = dc->nblocks ? SCSI_DIR_FROM_DEV : SCSI_DIR_NONE;
		dc->info.xfer = dc->nblocks;	/* the allocation length */
		return;
	}
	if (!range_ok(d, dc, dc->lba, dc->nblocks))
		return;
	if (dc->nblocks > d->max_xfer_blocks)	/* MAXIMUM PREFETCH LENGTH */
		bad_field(dc, true, len_at, -1);
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
void disk_decode(const struct scsi_disk *d, const uint8_t *cdb,
		 unsigned int cdb_len, struct decoded *dc)
{
	const struct cmd_desc *c;

	memset(&dc->info, 0, sizeof(dc->info));
	dc->medium = d ? disk_nblocks(d) : 0;
	dc->bad = false;
	dc->fua = false;
	dc->cmp = CMP_NONE;
	if (cdb_len == 0)
		return fail(dc, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	c = disk_cmd_find(cdb[0], cdb_len > 1 ? cdb[1] & 0x1f : 0, false);
	if (!c) {
		if (disk_cmd_find(cdb[0], 0, true))	/* known op, unknown SA */
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
		if ((cdb[1] & 0x1f) == SAI_GET_LBA_STATUS)
			return decode_lba(d, cdb, dc);
		return data_in(dc, be32(cdb + 10));
	case PRE_FETCH_10: case PRE_FETCH_16:
		return decode_lba(d, cdb, dc);
	case READ_DEFECT_10:
		return data_in(dc, be16(cdb + 7));
	case READ_DEFECT_12:
		return data_in(dc, be32(cdb + 6));
	case VERIFY_10: case VERIFY_12: case VERIFY_16:
	case WRITE_VERIFY_10: case WRITE_VERIFY_12: case WRITE_VERIFY_16:
	case COMPARE_AND_WRITE: case ORWRITE_16:
		return decode_cmp(d, cdb, dc);
	case REPORT_LUNS:
		if (cdb[2] > 2)
			return bad_field(dc, true, 2, -1);
		if (be32(cdb + 6) < 16)
			return bad_field(dc, true, 6, -1);
		return data_in(dc, be32(cdb + 6));
	case MAINTENANCE_IN:
		return data_in(dc, be32(cdb + 6));
	case PERSISTENT_RESERVE_IN: case PERSISTENT_RESERVE_OUT:
	case RESERVE_6: case RELEASE_6:
		return disk_pr_decode(cdb, dc);
	case EXTENDED_COPY: case RECEIVE_COPY_RESULTS:
		return disk_xcopy_decode(cdb, dc);
	case UNMAP:
		if (d->be->ro)
			return fail(dc, SENSE_DATA_PROTECT, ASC_WRITE_PROTECTED);
		return data_out(dc, be16(cdb + 7), 7);
	case READ_6: case READ_10: case READ_12: case READ_16:
	case WRITE_6: case WRITE_10: case WRITE_12: case WRITE_16:
		return decode_rw(d, cdb, dc);
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

	disk_decode(d, cdb, cdb_len, &dc);
	if (dc.bad)
		memset(&dc.info, 0, sizeof(dc.info));
	*info = dc.info;
}
