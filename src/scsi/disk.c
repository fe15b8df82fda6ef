/* SCSI disk target: an SPC-4/SBC-3 direct-access logical unit over a block
 * backend; its life cycle and the command entry points, which check the
 * unit's state and dispatch to the decoder (disk_cdb.c), the emulated
 * commands (disk_emul.c) and the data path (disk_io.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"
#include "scsi/disk_pr.h"

/* ---- execution ---- */

static bool needs_medium(uint8_t op)
{
	switch (op) {
	case INQUIRY: case REQUEST_SENSE: case REPORT_LUNS: case MAINTENANCE_IN:
	case MODE_SENSE_6: case MODE_SENSE_10: case MODE_SELECT_6:
	case MODE_SELECT_10: case START_STOP_UNIT: case PREVENT_ALLOW:
	case READ_CAPACITY_10: case SERVICE_ACTION_IN_16:
	case PERSISTENT_RESERVE_IN: case PERSISTENT_RESERVE_OUT:
	case RESERVE_6: case RELEASE_6:
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
			disk_check(req, SENSE_UNIT_ATTENTION, 0x2900 | ua);
			req->done(req);
			return true;
		}
	}
	/* After a reset's (higher priority, SAM-5 5.14): one command sees
	 * the reset, the next the new capacity. */
	if (op != INQUIRY && op != REPORT_LUNS && op != REQUEST_SENSE &&
	    __atomic_load_n(&d->ua_capacity, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&d->ua_capacity, false, __ATOMIC_RELAXED)) {
		disk_check(req, SENSE_UNIT_ATTENTION, ASC_CAPACITY_CHANGED);
		req->done(req);
		return true;
	}
	return false;
}

static bool stopped_check(struct scsi_disk *d, struct scsi_req *req)
{
	if (!needs_medium(req->cdb[0]) ||
	    !__atomic_load_n(&d->stopped, __ATOMIC_RELAXED))
		return false;
	disk_check(req, SENSE_NOT_READY, ASC_NOT_READY_INIT_REQUIRED);
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
	req->cmp = CMP_NONE;
	req->scratch = NULL;
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
	if (req->buf_len && req->buf_dir != info->dir) {
		req->host = SCSI_HOST_BAD_DIR;
	} else if ((req->cdb[0] == WRITE_SAME_10 ||
		    req->cdb[0] == WRITE_SAME_16) && req->buf_len != info->xfer) {
		/* WRITE SAME's data-out is exactly one block (SBC-4 5.50):
		 * shorter or longer is the initiator's mistake about the
		 * command, reported as one, not as a transport failure */
		disk_check(req, SENSE_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH);
	}
	else if (req->buf_len < info->xfer)
		req->host = SCSI_HOST_OVERRUN;
	else
		return true;
	req->done(req);
	return false;
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

	switch (cdb[0]) {
	case TEST_UNIT_READY:
	case VERIFY_10: case VERIFY_12: case VERIFY_16:
	case WRITE_VERIFY_10: case WRITE_VERIFY_12: case WRITE_VERIFY_16:
	case COMPARE_AND_WRITE: case ORWRITE_16:
	case PREVENT_ALLOW:
		/* no data: VERIFY without BYTCHK (the medium is readable by
		 * construction), or zero blocks */
		req->done(req);
		return;
	case PRE_FETCH_10: case PRE_FETCH_16:
		disk_prefetch(req, dc);
		return;
	case READ_DEFECT_10: case READ_DEFECT_12:
		disk_read_defects(req, cdb, dc->info.xfer);
		return;
	case REQUEST_SENSE:
		n = disk_request_sense(d, cdb[1] & 1, buf);
		disk_send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case INQUIRY:
		disk_inquiry(req, cdb, dc->info.xfer);
		return;
	case SERVICE_ACTION_IN_16:
		if ((cdb[1] & 0x1f) == SAI_GET_LBA_STATUS) {
			disk_get_lba_status(req, dc, dc->info.xfer);
			return;
		}
		/* fall through */
	case READ_CAPACITY_10:
		n = disk_read_capacity(d, cdb[0] == SERVICE_ACTION_IN_16, buf);
		disk_send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case REPORT_LUNS:
		n = disk_report_luns(d->luns, cdb[2], buf);
		disk_send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	case MAINTENANCE_IN:
		disk_rsoc(req, cdb, dc->info.xfer);
		return;
	case MODE_SENSE_6: case MODE_SENSE_10:
		disk_mode_sense(req, cdb, dc->info.xfer);
		return;
	case MODE_SELECT_6: case MODE_SELECT_10:
		n = iov_to_buf(req->iov, req->iovcnt, 0, buf, dc->info.xfer);
		disk_mode_select(req, cdb, buf, n);
		return;
	case START_STOP_UNIT:
		disk_start_stop(d, req, cdb);
		return;
	case SYNC_CACHE_10: case SYNC_CACHE_16:
		disk_sync_cache(d, req);
		return;
	case WRITE_SAME_10: case WRITE_SAME_16:
		disk_write_same(req, cdb, dc);
		return;
	case UNMAP:
		n = iov_to_buf(req->iov, req->iovcnt, 0, buf, dc->info.xfer);
		disk_unmap(req, buf, n);
		return;
	case PERSISTENT_RESERVE_IN: case PERSISTENT_RESERVE_OUT:
	case RESERVE_6: case RELEASE_6:
		disk_pr_command(d, req, dc);
		return;
	case EXTENDED_COPY:
		n = iov_to_buf(req->iov, req->iovcnt, 0, buf, dc->info.xfer);
		disk_xcopy(req, buf, n);
		return;
	case RECEIVE_COPY_RESULTS:
		disk_rcr(req, cdb, dc->info.xfer);
		return;
	default:	/* disk_decode() lets nothing else through */
		disk_check(req, SENSE_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
		req->done(req);
		return;
	}
}

static void execute(struct scsi_disk *d, struct scsi_req *req,
		    const struct decoded *dc)
{
	req->is_write = disk_is_write_op(req->cdb[0]);
	req->sync_after = req->is_write &&
		(dc->fua || !__atomic_load_n(&d->wce, __ATOMIC_RELAXED));
	if (dc->cmp)
		disk_cmp_submit(req, dc);
	else if (dc->info.direct)
		disk_rw(d, req, dc);
	else
		emulate(d, req, dc);
}

void scsi_disk_submit(struct scsi_disk *d, struct scsi_req *req)
{
	struct decoded dc;

	init_req(d, req);
	disk_decode(d, req->cdb, req->cdb_len, &dc);
	req->info = dc.info;
	if (!dc.bad && !buffer_ok(req, &dc.info))
		return;
	if (state_check(d, req))
		return;
	if (disk_pr_gate(d, req, dc.bad))
		return;
	if (dc.bad) {
		disk_check_condition(req, &dc.err);
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
	disk_decode(d, req->cdb, req->cdb_len, &dc);
	req->info = dc.info;
	if (state_check(d, req))
		return 1;
	if (disk_pr_gate(d, req, dc.bad))
		return 1;
	if (dc.bad) {
		disk_check_condition(req, &dc.err);
		req->done(req);
		return 1;
	}
	if (!dc.info.direct)
		return -EINVAL;
	if (stopped_check(d, req))
		return 1;
	req->is_write = disk_is_write_op(req->cdb[0]);
	req->sync_after = req->is_write &&
		(dc.fua || !__atomic_load_n(&d->wce, __ATOMIC_RELAXED));
	if (dc.cmp && disk_cmp_prepare(req, &dc)) {
		disk_submit_failed(req, -ENOMEM);
		return 1;
	}
	return 0;
}

/* ---- task management, absent LUNs, life cycle ---- */

void scsi_disk_abort(struct scsi_req *req, bool reset)
{
	req->abort_host = reset ? SCSI_HOST_RESET : SCSI_HOST_ABORTED;
	if (req->op == EXTENDED_COPY)
		disk_xcopy_abort(req);
}

void scsi_disk_reset(struct scsi_disk *d, bool nexus)
{
	__atomic_store_n(&d->ua, nexus ? 0x07 : 0x03, __ATOMIC_RELAXED);
	disk_pr_reset(d, nexus);
	disk_xcopy_reset(d);
}

void scsi_disk_resized(struct scsi_disk *d)
{
	uint64_t n = blk_size(d->be) / d->bs;

	/* The size first: a command that takes the unit attention and then
	 * asks READ CAPACITY gets the new one. */
	if (n == disk_nblocks(d))
		return;
	__atomic_store_n(&d->nblocks, n, __ATOMIC_RELEASE);
	__atomic_store_n(&d->ua_capacity, true, __ATOMIC_RELEASE);
}

void scsi_lun_absent_submit(const struct scsi_lun_map *luns,
			    struct scsi_req *req)
{
	uint8_t buf[SCSI_PARAM_MAX];
	struct decoded dc;
	uint8_t op = req->cdb_len ? req->cdb[0] : 0xff;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_LUN_NOT_SUPPORTED,
			.field = -1, .bit = -1, .cd = false };
	size_t n;

	init_req(NULL, req);
	if (op != INQUIRY && op != REPORT_LUNS && op != REQUEST_SENSE) {
		disk_check_condition(req, &s);
		req->done(req);
		return;
	}
	disk_decode(NULL, req->cdb, req->cdb_len, &dc);
	if (dc.bad) {
		disk_check_condition(req, &dc.err);
		req->done(req);
		return;
	}
	switch (op) {
	case INQUIRY:
		if (req->cdb[1] & 1) {
			disk_check_condition(req, &s);
			req->done(req);
			return;
		}
		n = disk_std_inquiry(buf, 0x7f);	/* PQ 3: no LU here */
		break;
	case REPORT_LUNS:
		n = disk_report_luns(luns, req->cdb[2], buf);
		break;
	default:
		n = disk_sense_encode(&s, req->cdb[1] & 1, buf);
		break;
	}
	disk_send_in(req, buf, min_sz(n, dc.info.xfer));
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
	d->nblocks = blk_size(be) / d->bs;
	d->max_xfer_blocks = MAX_XFER_BYTES / d->bs;
	d->max_unmap_blocks = MAX_UNMAP_BYTES / d->bs;
	if (d->max_unmap_blocks > MAX_UNMAP_BLOCKS)
		d->max_unmap_blocks = MAX_UNMAP_BLOCKS;
	d->wce = true;
	pthread_mutex_init(&d->caw_lock, NULL);
	for (size_t i = 0; i < sizeof(be->serial) && be->serial[i]; i++)
		h = (h ^ (uint8_t)be->serial[i]) * 0x100000001b3ull;
	put64(d->naa, (h >> 4) | 0x3ull << 60);
	if (disk_xcopy_init(d)) {
		free(d);
		return NULL;
	}
	disk_pr_create(d);
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
	disk_xcopy_fini(d);
	pthread_mutex_destroy(&d->caw_lock);
	disk_pr_destroy(d);
	free(d);
}


void scsi_disk_count_error(struct scsi_disk *d, enum blk_op op)
{
	blk_errors_add(&d->errors, op);
}

const struct blk_errors *scsi_disk_errors(const struct scsi_disk *d)
{
	return &d->errors;
}
