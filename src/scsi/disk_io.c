/* SCSI disk target: the data path. READ, WRITE, SYNCHRONIZE CACHE, WRITE
 * SAME and UNMAP go through the block queue, straight between the HBA's
 * iovecs and the backend; completions come back here in any order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"

/* ---- completion ---- */

static void io_done(void *tag, int res);
static void io_error(struct scsi_req *req);

void disk_complete(struct scsi_req *req)
{
	if (req->scratch) {
		free(req->scratch);
		req->scratch = NULL;
	}
	if (req->abort_host) {
		req->host = req->abort_host;
		req->status = SAM_STAT_TASK_ABORTED;
		req->sense_len = 0;
	} else if (req->err) {
		io_error(req);
		if (req->err == -ENOSPC && req->is_write)
			disk_check(req, SENSE_DATA_PROTECT, ASC_SPACE_ALLOC_FAILED);
		else
			disk_check(req, SENSE_MEDIUM_ERROR, req->is_write ?
			      ASC_WRITE_ERROR : ASC_UNRECOVERED_READ_ERROR);
	}
	req->done(req);
}

/* A backend operation could not even be queued. */
void disk_submit_failed(struct scsi_req *req, int ret)
{
	if (req->scratch) {
		free(req->scratch);
		req->scratch = NULL;
	}
	if (ret == -EAGAIN || ret == -EBUSY)
		req->status = SAM_STAT_TASK_SET_FULL;
	else
		disk_check(req, SENSE_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	req->done(req);
}

/* Write-through (WCE=0 or FUA): the data must be on stable storage before
 * the command completes. */
static void flush_then_complete(struct scsi_req *req, enum stage st)
{
	int ret;

	if (req->err || req->abort_host) {
		disk_complete(req);
		return;
	}
	req->stage = st;
	ret = blkq_flush(req->q, req->disk->be, io_done, req);
	if (ret) {
		req->err = ret;
		disk_complete(req);
	}
}

void disk_flush_then_complete(struct scsi_req *req)
{
	flush_then_complete(req, ST_FLUSH);
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
			disk_complete(req);
		} else if (req->sync_after) {
			flush_then_complete(req, ST_FLUSH);
		} else {
			disk_complete(req);
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
		disk_complete(req);
		return;
	case ST_STOP:
		if (res < 0)
			req->err = res;
		else
			__atomic_store_n(&d->stopped, true, __ATOMIC_RELAXED);
		disk_complete(req);
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
			disk_complete(req);
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
		disk_complete(req);
		return;
	}
	req->pos += chunk;
}

void disk_write_same(struct scsi_req *req, const uint8_t *cdb,
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
		req->dealloc = unmap && d->be->discard_ok &&
			       d->be->discard_zeroes;
		/* Where a discard need not read back zeroes (RBD, NBD),
		 * UNMAP still lets the backend deallocate while it zeroes
		 * (NBD: WRITE_ZEROES without NO_HOLE). */
		req->zero_unmap = unmap;
		unmap_next(req);
		return;
	}
	/* The pattern as iovecs into the guest's buffer (no copy). */
	for (unsigned int i = 0; i < req->iovcnt && got < d->bs; i++) {
		size_t n = min_sz(req->iov[i].iov_len, d->bs - got);

		if (pieces == 32) {
			disk_check(req, SENSE_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM);
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
			disk_complete(req);
		return;
	}
	req->stage = ST_UNMAP;
	ret = blkq_discard(req->q, d->be,
			   req->dealloc ? BLK_OP_DISCARD : req->zero_unmap ?
			   BLK_OP_ZERO_UNMAP : BLK_OP_WRITE_ZEROES,
			   req->unmap[req->step].off, req->unmap[req->step].len,
			   io_done, req);
	req->step++;
	if (ret) {
		req->err = ret;
		disk_complete(req);
	}
}

void disk_unmap(struct scsi_req *req, const uint8_t *p, size_t len)
{
	struct scsi_disk *d = req->disk;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_PARAM_LIST_LENGTH,
			.field = -1, .bit = -1, .cd = false };
	uint64_t medium = disk_nblocks(d);
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
		s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_PARAM,
			.field = 2, .bit = -1, .cd = false };
		goto fail;
	}
	for (unsigned int i = 0; i < bddl / 16; i++) {
		const uint8_t *e = p + 8 + 16 * i;
		uint64_t lba = be64(e);
		uint32_t cnt = be32(e + 8);

		if (cnt > d->max_unmap_blocks) {
			s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_PARAM,
			.field = 8 + 16 * i + 8, .bit = -1, .cd = false };
			goto fail;
		}
		if (lba > medium || cnt > medium - lba) {
			s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_LBA_OUT_OF_RANGE,
			.field = -1, .bit = -1, .cd = false };
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
	req->zero_unmap = false;
	unmap_next(req);
	return;
fail:
	disk_check_condition(req, &s);
	req->done(req);
}

void disk_rw(struct scsi_disk *d, struct scsi_req *req,
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
		disk_submit_failed(req, ret);
}

void disk_sync_cache(struct scsi_disk *d, struct scsi_req *req)
{
	int ret;

	req->is_write = true;
	req->stage = ST_FLUSH;
	ret = blkq_flush(req->q, d->be, io_done, req);
	if (ret)
		disk_submit_failed(req, ret);
}

void disk_start_stop(struct scsi_disk *d, struct scsi_req *req,
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

int scsi_disk_segment(struct scsi_req *req, const struct iovec *iov,
		      unsigned int iovcnt, uint64_t pos)
{
	uint64_t len = iov_size(iov, iovcnt);

	if (pos > req->info.xfer || len > req->info.xfer - pos)
		return -EINVAL;
	if (req->cmp)
		return disk_cmp_segment(req, iov, iovcnt, pos);
	req->stage = ST_SEG;
	return blkq_rw(req->q, req->disk->be,
		       req->is_write ? BLK_OP_WRITE : BLK_OP_READ, iov, iovcnt,
		       req->info.offset + pos, io_done, req);
}

void scsi_disk_end(struct scsi_req *req)
{
	if (req->cmp) {
		disk_cmp_end(req);
		return;
	}
	if (req->sync_after && req->xferred)
		flush_then_complete(req, ST_FLUSH);
	else
		disk_complete(req);
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
