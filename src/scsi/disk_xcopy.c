/* SCSI disk target: EXTENDED COPY (LID1, SPC-4 6.4) and RECEIVE COPY
 * RESULTS (6.18), for copies within one disk and between the disks of this
 * process, done by the host (blkq_copy: copy_file_range) so that the data
 * never passes through iovm's memory.
 *
 * What the copy manager accepts:
 *  - CSCD descriptors: identification descriptor (E4h) naming a disk of this
 *    process by the NAA designator of its Device Identification VPD page
 *    (peripheral type 0, NUL 0, DISK BLOCK LENGTH the disk's or 0; SPC-3's
 *    LU ID TYPE is obsolete in SPC-4 and ignored); a disk not found (or destroyed) is COPY TARGET DEVICE NOT
 *    REACHABLE.
 *  - segment descriptors: block to block (02h) and block with offset to
 *    block with offset (0Ah). A segment of zero blocks/bytes moves nothing.
 *    Overlapping ranges of one disk copy as memmove does: the destination
 *    gets the source's contents from before the segment.
 *  - no inline data, no stream devices, no RECEIVE DATA.
 * Errors found in the parameter list (lengths, counts, descriptor types and
 * fields) are ILLEGAL REQUEST with a field pointer into the list; errors of
 * a copy target (unreachable, LBA out of range, write protected, I/O
 * errors; another disk's reservation that the copy's READ or WRITE would
 * conflict with) are COPY ABORTED with the segment pointer and, in fixed-format
 * sense data, the target's own sense data (key and ASC, e.g. LBA OUT OF
 * RANGE or WRITE PROTECTED) at the DESTINATION (or SOURCE) SENSE DATA
 * OFFSET of byte 8/9, as SPC-4 describes.
 *
 * The whole list is checked before anything moves. A command refused in
 * that check never started a copy: it leaves no held data behind (RECEIVE
 * COPY RESULTS for its list identifier finds nothing). A command that got
 * past it holds its results (LIST ID USAGE 00b) until COPY STATUS (or, for
 * one that failed, FAILED SEGMENT DETAILS) has reported them, another
 * EXTENDED COPY with the same list identifier arrives (even one refused in
 * the check: SPC-3 6.17.2 lists the new command, not its success, as the
 * end of the old data; libiscsi's ReceiveCopyResults.CopyStatus relies on
 * it after ExtendedCopy.ValidTgtDescr held list 1 and ValidSegDescr reused
 * it), or the table of XC_RESULTS entries needs the room (the oldest
 * completed entry goes). A process is one I_T nexus for
 * its transports (virtio-scsi, vhost-user-scsi, LSI), so the table is per
 * logical unit.
 *
 * Lifetime: every disk is in a process-wide registry from creation to
 * destruction. A copy takes a reference on each disk it names when it
 * resolves the CSCD descriptors and drops them when it completes;
 * scsi_disk_destroy removes the disk from the registry (no new copy can
 * name it) and then waits until no copy references it, so a copy never
 * uses a freed disk or a closed backend. Copies complete on their queue
 * thread: a device destroys its disks after its queues stopped (drained). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"

#define XC_MAX_CSCD 8		/* CSCD descriptors per command */
#define XC_MAX_SEG 16		/* segment descriptors per command */
#define XC_MAX_LIST 1024	/* parameter list bytes */
#define XC_MAX_ACTIVE 4		/* copies in progress per disk */
#define XC_RESULTS 16		/* held results per disk */
#define XC_MAX_SEG_BYTES (256u << 20)	/* one segment */

#define CSCD_LEN 32
#define HDR_LEN 16

#define SENSE_COPY_ABORTED 0x0a
#define ASC_OP_IN_PROGRESS 0x0016
#define ASC_TARGET_NOT_REACHABLE 0x0d02
#define ASC_TOO_MANY_CSCD 0x2606
#define ASC_UNSUPP_CSCD_TYPE 0x2607
#define ASC_TOO_MANY_SEG 0x2608
#define ASC_UNSUPP_SEG_TYPE 0x2609
#define ASC_INEXACT_SEGMENT 0x260a
#define ASC_INLINE_TOO_LONG 0x260b
#define ASC_INVALID_OP_FOR_COPY 0x260c
#define ASC_INSUFFICIENT_RESOURCES 0x5503

#define RCR_COPY_STATUS 0x00
#define RCR_OP_PARAMS 0x03
#define RCR_FAILED_SEGMENT 0x04

/* A copy's end as a copy target saw it, for the COPY ABORTED sense data. */
struct tgt_err {
	uint8_t key;
	uint16_t asc;
	bool dst;		/* the destination's (else the source's) */
};

struct xc_seg {
	struct scsi_disk *src, *dst;
	uint64_t src_off, dst_off, len;
	uint16_t at;		/* its offset in the parameter list */
};

struct xc_result {
	bool used;
	bool running;
	bool status_held;	/* COPY STATUS not yet reported */
	bool fsd_held;		/* FAILED SEGMENT DETAILS not yet reported */
	uint8_t list_id;
	uint8_t cm_status;	/* 01h: completed, 02h: with errors */
	uint16_t segs;		/* segments processed */
	uint64_t bytes;
	uint64_t seq;		/* age, for replacement */
	struct xc_job *job;	/* while running */
	uint8_t cmd_status;	/* the EXTENDED COPY's status */
	uint8_t sense_len;
	uint8_t sense[SCSI_SENSE_MAX];
};

struct xc_job {
	bool used;
	bool hold;		/* has a result entry */
	bool idd;		/* list id identifies it (usage 00b/10b) */
	uint8_t list_id;
	struct scsi_req *req;
	struct scsi_disk *cscd[XC_MAX_CSCD];
	unsigned int ncscd;
	struct xc_seg seg[XC_MAX_SEG];
	unsigned int nseg;
	unsigned int cur;	/* segment in flight */
	unsigned int flush_i;	/* write-through: next destination to flush */
	uint64_t bytes;		/* of the segments done */
	struct xc_result *res;
	struct blk_copy bc;
	bool cancel;
};

struct xcopy_state {
	struct scsi_disk *d;
	/* registry */
	struct xcopy_state *next;
	unsigned int refs;	/* under reg_lock */
	/* per disk */
	pthread_mutex_t lock;
	struct xc_job jobs[XC_MAX_ACTIVE];
	struct xc_result res[XC_RESULTS];
	uint64_t seq;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct xcopy_state *reg_head;

/* ---- registry ---- */

int disk_xcopy_init(struct scsi_disk *d)
{
	struct xcopy_state *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->d = d;
	pthread_mutex_init(&x->lock, NULL);
	d->xc = x;
	pthread_mutex_lock(&reg_lock);
	x->next = reg_head;
	reg_head = x;
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

void disk_xcopy_fini(struct scsi_disk *d)
{
	struct xcopy_state *x = d->xc, **pp;

	if (!x)
		return;
	pthread_mutex_lock(&reg_lock);
	for (pp = &reg_head; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	while (x->refs)
		pthread_cond_wait(&reg_cond, &reg_lock);
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_destroy(&x->lock);
	free(x);
	d->xc = NULL;
}

/* The disk with this NAA designator, referenced; NULL if none. self (the
 * disk the command came to) first: two disks of one image share the NAA. */
static struct scsi_disk *disk_get(struct scsi_disk *self, const uint8_t *naa)
{
	struct scsi_disk *d = NULL;

	pthread_mutex_lock(&reg_lock);
	if (!memcmp(self->naa, naa, 8)) {
		self->xc->refs++;
		d = self;
	}
	for (struct xcopy_state *x = reg_head; !d && x; x = x->next) {
		if (!memcmp(x->d->naa, naa, 8)) {
			x->refs++;
			d = x->d;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return d;
}

static void disks_put(struct scsi_disk **v, unsigned int n)
{
	pthread_mutex_lock(&reg_lock);
	for (unsigned int i = 0; i < n; i++)
		if (!--v[i]->xc->refs)
			pthread_cond_broadcast(&reg_cond);
	pthread_mutex_unlock(&reg_lock);
}

/* ---- decoding ---- */

void disk_xcopy_decode(const uint8_t *cdb, struct decoded *dc)
{
	uint32_t len = be32(cdb + 10);

	if (cdb[0] == RECEIVE_COPY_RESULTS) {
		dc->info.dir = len ? SCSI_DIR_FROM_DEV : SCSI_DIR_NONE;
		dc->info.xfer = len;
		return;
	}
	if (len > XC_MAX_LIST) {
		/* beyond MAXIMUM DESCRIPTOR LIST LENGTH */
		dc->bad = true;
		dc->err = (struct sense){ .key = SENSE_ILLEGAL_REQUEST,
					  .asc = ASC_PARAM_LIST_LENGTH,
					  .field = -1, .bit = -1 };
		return;
	}
	dc->info.dir = len ? SCSI_DIR_TO_DEV : SCSI_DIR_NONE;
	dc->info.xfer = len;
}

/* ---- sense data ---- */

static void fail_param(struct scsi_req *req, uint16_t asc, int field, int bit)
{
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = asc,
			   .field = field, .bit = bit };

	disk_check_condition(req, &s);
}

/* COPY ABORTED; field: the segment pointer (parameter list offset) or -1;
 * t: the copy target's condition, or NULL. */
static void fail_copy(struct scsi_req *req, uint16_t asc, int field,
		      const struct tgt_err *t)
{
	struct sense s = { .key = SENSE_COPY_ABORTED, .asc = asc,
			   .field = field, .bit = -1 };
	uint8_t *p = req->sense;

	disk_check_condition(req, &s);
	if (!t || p[0] != 0x70 || req->sense_len != 18 ||
	    SCSI_SENSE_MAX < 18 + 14)
		return;
	/* the target's sense data (fixed format, through its ASCQ) */
	memset(p + 18, 0, 14);
	p[18] = 0x70;
	p[20] = t->key;
	p[25] = 6;
	p[30] = t->asc >> 8;
	p[31] = t->asc;
	p[t->dst ? 9 : 8] = 18;
	p[7] = 10 + 14;
	req->sense_len = 32;
}

/* ---- the parameter list ---- */

/* Checks the whole list and resolves its CSCDs (referenced in j->cscd).
 * Returns 0, or -1 with the CHECK CONDITION set (no reference kept). */
static int parse(struct scsi_req *req, const uint8_t *p, size_t len,
		 struct xc_job *j)
{
	uint32_t cscd_len, seg_len, inl, off;
	unsigned int nseg = 0;
	struct tgt_err te;

	j->ncscd = 0;
	j->nseg = 0;
	if (len < HDR_LEN) {
		fail_param(req, ASC_PARAM_LIST_LENGTH, -1, -1);
		return -1;
	}
	cscd_len = be16(p + 2);
	seg_len = be32(p + 8);
	inl = be32(p + 12);
	if ((p[1] & 0x18) == 0x08) {		/* LIST ID USAGE 01b */
		fail_param(req, ASC_INVALID_FIELD_PARAM, 1, 4);
		return -1;
	}
	if ((p[1] & 0x18) == 0x18 && p[0]) {	/* no list id: must be 0 */
		fail_param(req, ASC_INVALID_FIELD_PARAM, 0, -1);
		return -1;
	}
	if (p[1] & 0xc0) {
		fail_param(req, ASC_INVALID_FIELD_PARAM, 1,
			   31 - __builtin_clz(p[1] & 0xc0));
		return -1;
	}
	if ((uint64_t)HDR_LEN + cscd_len + seg_len + inl > len) {
		fail_param(req, ASC_PARAM_LIST_LENGTH, -1, -1);
		return -1;
	}
	if (inl) {
		fail_param(req, ASC_INLINE_TOO_LONG, 12, -1);
		return -1;
	}
	if (cscd_len % CSCD_LEN) {
		fail_param(req, ASC_INVALID_FIELD_PARAM, 2, -1);
		return -1;
	}
	if (cscd_len / CSCD_LEN > XC_MAX_CSCD) {
		fail_param(req, ASC_TOO_MANY_CSCD, -1, -1);
		return -1;
	}
	/* count the segments before looking into them */
	for (off = 0; off < seg_len; nseg++) {
		const uint8_t *e = p + HDR_LEN + cscd_len + off;

		if (seg_len - off < 4) {
			fail_param(req, ASC_PARAM_LIST_LENGTH, -1, -1);
			return -1;
		}
		if (nseg == XC_MAX_SEG) {
			fail_param(req, ASC_TOO_MANY_SEG, -1, -1);
			return -1;
		}
		if (seg_len - off < 4u + be16(e + 2)) {
			fail_param(req, ASC_PARAM_LIST_LENGTH, -1, -1);
			return -1;
		}
		off += 4u + be16(e + 2);
	}
	/* CSCD descriptors */
	for (unsigned int i = 0; i < cscd_len / CSCD_LEN; i++) {
		unsigned int at = HDR_LEN + i * CSCD_LEN;
		const uint8_t *e = p + at;
		struct scsi_disk *t;
		uint32_t bl;

		if (e[0] != 0xe4) {
			fail_param(req, ASC_UNSUPP_CSCD_TYPE, at, -1);
			goto fail;
		}
		/* e[1] bits 7-6: SPC-3's LU ID TYPE, obsolete in SPC-4
		 * (ignored, as libiscsi 1.19 expects of an SPC-4 target) */
		if (e[1] & 0x1f) {		/* a direct-access device */
			fail_param(req, ASC_INVALID_FIELD_PARAM, at + 1, -1);
			goto fail;
		}
		/* NUL (no device), or a designator other than a binary NAA
		 * one of a logical unit: nothing this copy manager reaches */
		if ((e[1] & 0x20) || (e[4] & 0x0f) != 1 || (e[5] & 0x3f) != 0x03 ||
		    e[7] != 8 || !(t = disk_get(req->disk, e + 8))) {
			fail_copy(req, ASC_TARGET_NOT_REACHABLE, at, NULL);
			goto fail;
		}
		j->cscd[j->ncscd++] = t;
		bl = (uint32_t)e[29] << 16 | be16(e + 30);
		if (bl && bl != t->bs) {
			fail_param(req, ASC_INVALID_FIELD_PARAM, at + 29, -1);
			goto fail;
		}
	}
	/* segment descriptors: every one checked before any moves */
	for (off = 0; off < seg_len;) {
		unsigned int at = HDR_LEN + cscd_len + off;
		const uint8_t *e = p + at;
		struct xc_seg *s = &j->seg[j->nseg];
		uint16_t si = be16(e + 4), di = be16(e + 6);
		uint64_t slba, dlba, n, ssz, dsz;

		off += 4u + be16(e + 2);
		if (e[0] != 0x02 && e[0] != 0x0a) {
			fail_param(req, ASC_UNSUPP_SEG_TYPE, at, -1);
			goto fail;
		}
		if (be16(e + 2) != (e[0] == 0x02 ? 0x18 : 0x1c)) {
			fail_param(req, ASC_INVALID_FIELD_PARAM, at + 2, -1);
			goto fail;
		}
		if (si >= j->ncscd || di >= j->ncscd) {
			fail_copy(req, ASC_TARGET_NOT_REACHABLE,
				  at + (si >= j->ncscd ? 4 : 6), NULL);
			goto fail;
		}
		s->src = j->cscd[si];
		s->dst = j->cscd[di];
		s->at = at;
		slba = be64(e + 12);
		dlba = be64(e + 20);
		if (e[0] == 0x02) {
			/* DC: NUMBER OF BLOCKS counts destination blocks */
			n = (uint64_t)be16(e + 10) *
			    ((e[1] & 0x02) ? s->dst->bs : s->src->bs);
			if (n % s->src->bs || n % s->dst->bs) {
				fail_copy(req, ASC_INEXACT_SEGMENT, at + 10, NULL);
				goto fail;
			}
			s->src_off = slba * s->src->bs;
			s->dst_off = dlba * s->dst->bs;
			if (slba > UINT64_MAX / s->src->bs)
				s->src_off = UINT64_MAX;
			if (dlba > UINT64_MAX / s->dst->bs)
				s->dst_off = UINT64_MAX;
		} else {
			uint16_t sbo = be16(e + 28), dbo = be16(e + 30);

			n = be32(e + 8);
			if (sbo >= s->src->bs || dbo >= s->dst->bs) {
				fail_param(req, ASC_INVALID_FIELD_PARAM,
					   at + (sbo >= s->src->bs ? 28 : 30), -1);
				goto fail;
			}
			s->src_off = slba > UINT64_MAX / s->src->bs ? UINT64_MAX :
				     slba * s->src->bs + sbo;
			s->dst_off = dlba > UINT64_MAX / s->dst->bs ? UINT64_MAX :
				     dlba * s->dst->bs + dbo;
		}
		if (n > XC_MAX_SEG_BYTES) {
			fail_param(req, ASC_INVALID_FIELD_PARAM,
				   at + (e[0] == 0x02 ? 10 : 8), -1);
			goto fail;
		}
		s->len = n;
		ssz = blk_size(s->src->be);
		dsz = blk_size(s->dst->be);
		if (s->src_off > ssz || n > ssz - s->src_off) {
			te = (struct tgt_err){ SENSE_ILLEGAL_REQUEST,
					       ASC_LBA_OUT_OF_RANGE, false };
			fail_copy(req, ASC_NONE, at + 12, &te);
			goto fail;
		}
		if (s->dst_off > dsz || n > dsz - s->dst_off) {
			te = (struct tgt_err){ SENSE_ILLEGAL_REQUEST,
					       ASC_LBA_OUT_OF_RANGE, true };
			fail_copy(req, ASC_NONE, at + 20, &te);
			goto fail;
		}
		/* another disk's reservations (this one's: the command's own
		 * gate) as the copy's READ and WRITE would meet them */
		if (n && s->src != req->disk && disk_pr_blocks(s->src, false)) {
			fail_copy(req, ASC_NONE, at + 4, NULL);
			goto fail;
		}
		if (n && s->dst != req->disk && disk_pr_blocks(s->dst, true)) {
			fail_copy(req, ASC_NONE, at + 6, NULL);
			goto fail;
		}
		if (n && s->dst->be->ro) {
			te = (struct tgt_err){ SENSE_DATA_PROTECT,
					       ASC_WRITE_PROTECTED, true };
			fail_copy(req, ASC_NONE, at + 6, &te);
			goto fail;
		}
		j->nseg++;
	}
	return 0;
fail:
	disks_put(j->cscd, j->ncscd);
	j->ncscd = 0;
	return -1;
}

/* ---- results ---- */

static struct xc_result *result_find(struct xcopy_state *x, uint8_t id)
{
	for (unsigned int i = 0; i < XC_RESULTS; i++)
		if (x->res[i].used && x->res[i].list_id == id)
			return &x->res[i];
	return NULL;
}

/* A result entry for id (under x->lock): its old one, a free one, or the
 * oldest completed one. NULL when all are running (cannot happen while
 * XC_RESULTS > XC_MAX_ACTIVE). */
static struct xc_result *result_take(struct xcopy_state *x, uint8_t id)
{
	struct xc_result *r = result_find(x, id), *old = NULL;

	for (unsigned int i = 0; !r && i < XC_RESULTS; i++) {
		if (!x->res[i].used) {
			r = &x->res[i];
		} else if (!x->res[i].running &&
			   (!old || x->res[i].seq < old->seq)) {
			old = &x->res[i];
		}
	}
	if (!r)
		r = old;
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->used = true;
	r->running = true;
	r->status_held = true;
	r->list_id = id;
	r->seq = ++x->seq;
	return r;
}

/* ---- execution ---- */

static void seg_next(struct xc_job *j);

static void job_end(struct xc_job *j)
{
	struct scsi_req *req = j->req;
	struct xcopy_state *x = req->disk->xc;

	pthread_mutex_lock(&x->lock);
	if (j->res) {
		struct xc_result *r = j->res;

		r->running = false;
		r->job = NULL;
		r->segs = j->cur;
		r->bytes = j->bytes;
		r->cm_status = req->status == SAM_STAT_GOOD ? 0x01 : 0x02;
		r->cmd_status = req->status;
		r->sense_len = req->sense_len;
		memcpy(r->sense, req->sense, req->sense_len);
		r->fsd_held = req->status != SAM_STAT_GOOD;
	}
	j->used = false;
	pthread_mutex_unlock(&x->lock);
	disks_put(j->cscd, j->ncscd);
	req->done(req);
}

static void seg_done(void *tag, int res)
{
	struct xc_job *j = tag;
	struct scsi_req *req = j->req;
	struct xc_seg *s = &j->seg[j->cur];

	if (req->abort_host) {
		req->host = req->abort_host;
		req->status = SAM_STAT_TASK_ABORTED;
		req->sense_len = 0;
		job_end(j);
		return;
	}
	if (res < 0) {
		struct tgt_err te = { SENSE_MEDIUM_ERROR, ASC_WRITE_ERROR, true };

		blk_errors_add(&s->dst->errors, BLK_OP_WRITE);
		pr_err_rated("scsi disk %s: EXTENDED COPY from %s failed: %s",
			     blk_name(s->dst->be), blk_name(s->src->be),
			     strerror(-res));
		if (res == -ENOSPC)
			te = (struct tgt_err){ SENSE_DATA_PROTECT,
					       ASC_SPACE_ALLOC_FAILED, true };
		j->bytes += __atomic_load_n(&j->bc.copied, __ATOMIC_ACQUIRE);
		fail_copy(req, ASC_NONE, s->at, &te);
		job_end(j);
		return;
	}
	j->bytes += s->len;
	j->cur++;
	seg_next(j);
}

static void flush_done(void *tag, int res)
{
	struct xc_job *j = tag;

	if (res < 0) {
		struct tgt_err te = { SENSE_MEDIUM_ERROR, ASC_WRITE_ERROR, true };

		blk_errors_add(&j->cscd[j->flush_i - 1]->errors, BLK_OP_FLUSH);
		fail_copy(j->req, ASC_NONE, -1, &te);
		job_end(j);
		return;
	}
	seg_next(j);
}

/* Issues the next segment; after the last one, the write-through flush of
 * every destination with its write cache off; then completes. */
static void seg_next(struct xc_job *j)
{
	struct scsi_req *req = j->req;
	int ret;

	while (j->cur < j->nseg && !j->seg[j->cur].len) {
		j->cur++;	/* zero-length: nothing to move */
	}
	if (j->cur < j->nseg) {
		struct xc_seg *s = &j->seg[j->cur];

		struct xcopy_state *x = req->disk->xc;

		j->bc = (struct blk_copy){
			.src = s->src->be, .dst = s->dst->be,
			.src_off = s->src_off, .dst_off = s->dst_off,
			.len = s->len,
		};
		/* an abort from another thread sets j->cancel under the
		 * lock: read it there, after bc is whole, so that one landing
		 * while bc was built is not overwritten */
		pthread_mutex_lock(&x->lock);
		if (j->cancel)
			j->bc.cancel = true;
		pthread_mutex_unlock(&x->lock);
		ret = blkq_copy(req->q, &j->bc, seg_done, j);
		if (!ret)
			return;
		if (j->cur || j->bytes) {
			/* earlier segments moved data: a retry would not be
			 * the same copy, so say where it stopped (COPY
			 * ABORTED, the segment pointer), never "nothing
			 * happened" */
			fail_copy(req, ASC_NONE, s->at, NULL);
		} else if (ret == -EAGAIN || ret == -EBUSY) {
			req->status = SAM_STAT_TASK_SET_FULL;
		} else if (ret == -EOPNOTSUPP) {
			/* a backend that cannot copy by itself: refused,
			 * the initiator copies with READ and WRITE */
			fail_param(req, ASC_INVALID_OP_FOR_COPY, s->at, -1);
		} else {
			disk_check(req, SENSE_HARDWARE_ERROR,
				   ASC_INTERNAL_TARGET_FAILURE);
		}
		job_end(j);
		return;
	}
	while (j->flush_i < j->ncscd) {
		struct scsi_disk *t = j->cscd[j->flush_i++];
		bool dst = false;

		for (unsigned int i = 0; i < j->nseg; i++)
			dst |= j->seg[i].dst == t && j->seg[i].len;
		if (!dst || __atomic_load_n(&t->wce, __ATOMIC_RELAXED))
			continue;
		ret = blkq_flush(req->q, t->be, flush_done, j);
		if (!ret)
			return;
		disk_check(req, SENSE_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		break;
	}
	job_end(j);
}

void disk_xcopy(struct scsi_req *req, const uint8_t *p, size_t len)
{
	struct scsi_disk *d = req->disk;
	struct xcopy_state *x = d->xc;
	struct xc_job *j = NULL;
	uint8_t usage;

	req->xferred = len;
	if (len == 0) {		/* no list: nothing to do (SPC-4) */
		req->done(req);
		return;
	}
	usage = len > 1 ? (p[1] >> 3) & 3 : 0;
	pthread_mutex_lock(&x->lock);
	for (unsigned int i = 0; i < XC_MAX_ACTIVE; i++) {
		struct xc_job *o = &x->jobs[i];

		if (o->used && o->idd && usage != 3 && o->list_id == p[0]) {
			pthread_mutex_unlock(&x->lock);
			disk_check(req, SENSE_ILLEGAL_REQUEST, ASC_OP_IN_PROGRESS);
			req->done(req);
			return;
		}
		if (!o->used && !j)
			j = o;
	}
	if (usage != 3) {
		/* a new command with this list identifier: what was held
		 * for the old one goes (SPC-3 6.17.2 b), whether or not the
		 * new one gets as far as holding anything */
		struct xc_result *r = result_find(x, p[0]);

		if (r && !r->running)
			r->used = false;
	}
	if (!j) {
		pthread_mutex_unlock(&x->lock);
		disk_check(req, SENSE_ILLEGAL_REQUEST, ASC_INSUFFICIENT_RESOURCES);
		req->done(req);
		return;
	}
	j->used = true;		/* reserved; the rest below */
	j->res = NULL;
	/* what another queue's in-progress check and an abort read, set
	 * before they can see the slot */
	j->req = req;
	j->cancel = false;
	j->list_id = p[0];
	j->idd = usage != 3;
	j->hold = usage == 0;
	pthread_mutex_unlock(&x->lock);

	j->cur = 0;
	j->flush_i = 0;
	j->bytes = 0;
	if (parse(req, p, len, j)) {
		pthread_mutex_lock(&x->lock);
		j->used = false;
		pthread_mutex_unlock(&x->lock);
		req->done(req);
		return;
	}
	if (j->hold) {
		pthread_mutex_lock(&x->lock);
		j->res = result_take(x, j->list_id);
		if (j->res)
			j->res->job = j;
		pthread_mutex_unlock(&x->lock);
	}
	seg_next(j);
}

void disk_xcopy_abort(struct scsi_req *req)
{
	struct xcopy_state *x = req->disk ? req->disk->xc : NULL;

	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	for (unsigned int i = 0; i < XC_MAX_ACTIVE; i++) {
		struct xc_job *j = &x->jobs[i];

		if (j->used && j->req == req) {
			j->cancel = true;
			__atomic_store_n(&j->bc.cancel, true, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&x->lock);
}

/* A logical unit reset or I_T nexus loss: the held data of completed
 * copies goes (SPC-3 6.17.2 c); running copies are the task management's
 * to abort, and keep their entries. */
void disk_xcopy_reset(struct scsi_disk *d)
{
	struct xcopy_state *x = d->xc;

	pthread_mutex_lock(&x->lock);
	for (unsigned int i = 0; i < XC_RESULTS; i++)
		if (x->res[i].used && !x->res[i].running)
			x->res[i].used = false;
	pthread_mutex_unlock(&x->lock);
}

/* ---- RECEIVE COPY RESULTS ---- */

static size_t op_params(uint8_t *p)
{
	static const uint8_t types[] = { 0x02, 0x0a, 0xe4 };

	memset(p, 0, 44);
	put32(p, 44 + sizeof(types) - 4);
	/* SNLID: LIST ID USAGE 11b is accepted */
	p[4] = 0x01;
	put16(p + 8, XC_MAX_CSCD);
	put16(p + 10, XC_MAX_SEG);
	put32(p + 12, XC_MAX_LIST);
	put32(p + 16, XC_MAX_SEG_BYTES);
	put32(p + 20, 0);		/* inline data */
	put32(p + 24, 0);		/* held data (RECEIVE DATA) */
	put32(p + 28, 0);		/* stream transfer size */
	put16(p + 34, XC_MAX_ACTIVE);
	p[36] = XC_MAX_ACTIVE;
	p[37] = 9;			/* data segment granularity: 512 */
	p[43] = sizeof(types);
	memcpy(p + 44, types, sizeof(types));
	return 44 + sizeof(types);
}

/* TRANSFER COUNT and its unit (bytes, KiB, MiB...) */
static void put_count(uint8_t *p, uint64_t bytes)
{
	uint8_t unit = 0;

	while (bytes > 0xffffffffull) {
		bytes >>= 10;
		unit++;
	}
	p[0] = unit;
	put32(p + 1, bytes);
}

void disk_rcr(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	struct xcopy_state *x = req->disk->xc;
	uint8_t sa = cdb[1] & 0x1f, buf[64 + SCSI_SENSE_MAX];
	struct xc_result *r;
	size_t n;

	if (sa == RCR_OP_PARAMS) {
		n = op_params(buf);
		disk_send_in(req, buf, min_sz(n, alloc));
		return;
	}
	pthread_mutex_lock(&x->lock);
	r = result_find(x, cdb[2]);
	if (r && sa == RCR_COPY_STATUS && r->status_held) {
		uint64_t bytes = r->bytes;

		memset(buf, 0, 12);
		put32(buf, 8);
		if (r->running) {
			struct xc_job *j = r->job;

			buf[4] = 0x00;	/* in progress */
			put16(buf + 5, j->cur);
			bytes = j->bytes + __atomic_load_n(&j->bc.copied,
							   __ATOMIC_ACQUIRE);
		} else {
			buf[4] = r->cm_status;
			put16(buf + 5, r->segs);
			r->status_held = false;
		}
		put_count(buf + 7, bytes);
		n = 12;
	} else if (r && sa == RCR_FAILED_SEGMENT && (r->running || r->fsd_held)) {
		memset(buf, 0, 60);
		if (r->running) {
			n = 4;	/* nothing yet */
		} else {
			buf[56] = r->cmd_status;
			put16(buf + 58, r->sense_len);
			memcpy(buf + 60, r->sense, r->sense_len);
			n = 60 + r->sense_len;
			put32(buf, n - 4);
			r->fsd_held = false;
		}
	} else {
		r = NULL;
	}
	if (r && !r->running && !r->status_held && !r->fsd_held)
		r->used = false;
	pthread_mutex_unlock(&x->lock);
	if (!r) {
		/* no held data for this list identifier */
		struct sense s = { .key = SENSE_ILLEGAL_REQUEST,
				   .asc = ASC_INVALID_FIELD_CDB, .field = 2,
				   .bit = -1, .cd = true };

		disk_check_condition(req, &s);
		req->done(req);
		return;
	}
	disk_send_in(req, buf, min_sz(n, alloc));
}

/* ---- Third-party Copy VPD page (8Fh) ---- */

size_t disk_xcopy_vpd(uint8_t *p)
{
	size_t n = 4;
	uint8_t *e;

	/* Supported Commands: EXTENDED COPY (LID1), RECEIVE COPY RESULTS */
	e = p + n;
	memset(e, 0, 16);
	put16(e, 0x0001);
	put16(e + 2, 12);
	e[4] = 8;
	e[5] = EXTENDED_COPY;
	e[6] = 1;
	e[7] = 0x00;
	e[8] = RECEIVE_COPY_RESULTS;
	e[9] = 3;
	e[10] = RCR_COPY_STATUS;
	e[11] = RCR_OP_PARAMS;
	e[12] = RCR_FAILED_SEGMENT;
	n += 16;
	/* General Copy Operations */
	e = p + n;
	memset(e, 0, 32);
	put16(e, 0x8001);
	put16(e + 2, 28);
	put32(e + 4, XC_MAX_ACTIVE);
	put32(e + 8, XC_MAX_ACTIVE);
	put32(e + 12, XC_MAX_SEG_BYTES);
	e[16] = 9;
	n += 32;
	return n;
}
