/* SCSI disk target: the commands that compare or combine the initiator's
 * data with what the medium holds (VERIFY with BYTCHK, WRITE AND VERIFY,
 * COMPARE AND WRITE, ORWRITE), and the medium queries PRE-FETCH, GET LBA
 * STATUS and READ DEFECT DATA.
 *
 * The compare commands are direct (their data-out lies at the LBA range's
 * offset), so virtio-scsi hands them a whole buffer (disk_cmp_submit) and
 * the LSI hands them segments as its SCRIPTS move the data
 * (disk_cmp_segment, disk_cmp_end). The medium's side of a compare is read
 * through the block queue, CMP_CHUNK bytes at a time, into one bounded
 * buffer per command (req->scratch, freed when the command completes):
 * never a buffer of the size the guest asks for (DESIGN rule 2), and the
 * queue thread goes on serving other requests meanwhile.
 *
 * COMPARE AND WRITE is the exception: it reads, compares and writes
 * synchronously on the queue thread, at most MAX_CAW_BLOCKS blocks, under
 * the disk's mutex (other queue threads of this process) and an OFD write
 * lock on the byte range of the image (other processes: two VMs sharing a
 * disk each run their own iovm). That makes it atomic with respect to
 * every other COMPARE AND WRITE on the logical unit, from any queue or
 * process, which is what its users (VMware's ATS locking, clustered file
 * systems' disk locks) rely on. A plain WRITE racing it on the same blocks
 * is not ordered against it (as on LIO and tgt): serialising every WRITE
 * against a range lock would put a lock on the fast path of all I/O. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"

/* Bytes of medium per step of a streaming compare or ORWRITE. */
#define CMP_CHUNK (256u << 10)

/* The medium chunk size for a span of len bytes: whole blocks. */
static uint64_t chunk_cap(const struct scsi_disk *d, uint64_t len)
{
	uint64_t cap = CMP_CHUNK / d->bs * d->bs;

	if (!cap)
		cap = d->bs;
	return len < cap ? len : cap;
}

/* Where the gathered data-out lies in scratch: after the medium's part
 * (VERIFY BYTCHK 11b: one chunk; COMPARE AND WRITE: the N blocks). */
static uint8_t *gathered(const struct scsi_req *req)
{
	return (uint8_t *)req->scratch + chunk_cap(req->disk, req->end);
}

int disk_cmp_prepare(struct scsi_req *req, const struct decoded *dc)
{
	struct scsi_disk *d = req->disk;
	uint64_t range = (uint64_t)dc->nblocks * d->bs, size;

	req->cmp = dc->cmp;
	req->pos = dc->info.offset;	/* the range on disk */
	req->end = range;
	switch (dc->cmp) {
	case CMP_CAW:		/* medium N, data-out 2N (verify, write) */
		size = chunk_cap(d, range) + 2 * range;
		break;
	case CMP_VERIFY_SAME:	/* medium chunk, the one block */
		size = chunk_cap(d, range) + d->bs;
		break;
	default:
		size = chunk_cap(d, range);
		break;
	}
	/* page aligned, so that cache=none reads into it go direct */
	req->scratch = aligned_alloc(4096, (size + 4095) & ~4095ull);
	return req->scratch ? 0 : -ENOMEM;
}

static void miscompare(struct scsi_req *req, uint64_t off)
{
	struct sense s = { .key = SENSE_MISCOMPARE, .asc = ASC_MISCOMPARE_VERIFY,
			   .field = -1, .bit = -1, .info_valid = true,
			   .info = off };

	disk_check_condition(req, &s);
}

/* Calls fn on the pieces of n bytes of iov from byte off, in order (done:
 * bytes before the piece), until fn returns false. */
static void iov_walk(const struct iovec *iov, unsigned int cnt, uint64_t off,
		     uint64_t n, bool (*fn)(const uint8_t *p, uint64_t done,
					    uint64_t l, void *ctx),
		     void *ctx)
{
	uint64_t done = 0;

	for (unsigned int i = 0; i < cnt && done < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		uint64_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		p += off;
		l -= off;
		off = 0;
		if (l > n - done)
			l = n - done;
		if (!fn(p, done, l, ctx))
			return;
		done += l;
	}
}

static int64_t buf_diff(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	if (!memcmp(a, b, n))
		return -1;
	for (uint64_t j = 0; j < n; j++)
		if (a[j] != b[j])
			return j;
	return -1;
}

struct diff_ctx {
	const uint8_t *buf;
	int64_t at;
};

static bool piece_diff(const uint8_t *p, uint64_t done, uint64_t l, void *ctx)
{
	struct diff_ctx *c = ctx;
	int64_t at = buf_diff(p, c->buf + done, l);

	if (at < 0)
		return true;
	c->at = done + at;
	return false;
}

/* The first byte where n bytes of iov from off differ from buf, or -1. */
static int64_t iov_diff(const struct iovec *iov, unsigned int cnt, uint64_t off,
			const uint8_t *buf, uint64_t n)
{
	struct diff_ctx c = { buf, -1 };

	iov_walk(iov, cnt, off, n, piece_diff, &c);
	return c.at;
}

static bool piece_or(const uint8_t *p, uint64_t done, uint64_t l, void *ctx)
{
	uint8_t *buf = (uint8_t *)ctx + done;

	for (uint64_t j = 0; j < l; j++)
		buf[j] |= p[j];
	return true;
}

/* buf |= n bytes of iov from off. */
static void iov_or(const struct iovec *iov, unsigned int cnt, uint64_t off,
		   uint8_t *buf, uint64_t n)
{
	iov_walk(iov, cnt, off, n, piece_or, buf);
}

/* ---- the streaming engine: a span of the transfer, chunk by chunk ---- */

static void span_next(struct scsi_req *req);

static bool failed(const struct scsi_req *req)
{
	return req->err || req->abort_host ||
	       req->status != SAM_STAT_GOOD;
}

/* The span is over (done, failed or miscompared). */
static void span_end(struct scsi_req *req)
{
	int res;

	if (req->c.seg) {
		/* a piecewise segment: the data was taken whatever the
		 * outcome; scsi_disk_end reports the status */
		res = req->err ? req->err : (int)req->c.len;
		if (!req->err)
			req->xferred += req->c.len;
		req->seg_done(req, res);
		return;
	}
	req->xferred = req->info.xfer;
	if (!failed(req) && req->sync_after)
		disk_flush_then_complete(req);
	else
		disk_complete(req);
}

static void span_start(struct scsi_req *req, const struct iovec *iov,
		       unsigned int cnt, uint64_t base, uint64_t len, bool seg)
{
	req->c.iov = iov;
	req->c.iovcnt = cnt;
	req->c.gpos = 0;
	req->c.base = base;
	req->c.doff = req->pos + (req->cmp == CMP_VERIFY_SAME ? 0 : base);
	req->c.left = len;
	req->c.len = len;
	req->c.seg = seg;
	req->c.written = false;
	span_next(req);
}

static void advance(struct scsi_req *req)
{
	req->c.gpos += req->c.chunk;
	req->c.doff += req->c.chunk;
	req->c.left -= req->c.chunk;
	span_next(req);
}

static bool io_ok(struct scsi_req *req, int res, uint64_t want)
{
	if (res >= 0 && (uint64_t)res == want)
		return true;
	req->err = res < 0 ? res : -EIO;
	return false;
}

static void chunk_written(void *tag, int res)
{
	struct scsi_req *req = tag;

	if (!io_ok(req, res, req->c.chunk)) {
		span_end(req);
		return;
	}
	advance(req);
}

/* WRITE AND VERIFY: the span's data is on disk; now compare it. */
static void span_written(void *tag, int res)
{
	struct scsi_req *req = tag;

	if (!io_ok(req, res, req->c.len)) {
		span_end(req);
		return;
	}
	req->c.written = true;
	span_next(req);
}

static void chunk_read(void *tag, int res)
{
	struct scsi_req *req = tag;
	const struct scsi_disk *d = req->disk;
	const uint8_t *medium = req->scratch;
	uint32_t n = req->c.chunk;
	int64_t at;
	int ret;

	if (!io_ok(req, res, n) || req->abort_host) {
		span_end(req);
		return;
	}
	switch (req->cmp) {
	case CMP_VERIFY_SAME:
		for (uint32_t b = 0; b < n; b += d->bs) {
			at = buf_diff(medium + b, gathered(req), d->bs);
			if (at >= 0) {
				miscompare(req, req->c.gpos + b + at);
				span_end(req);
				return;
			}
		}
		break;
	case CMP_ORWRITE:
		iov_or(req->c.iov, req->c.iovcnt, req->c.gpos, req->scratch, n);
		ret = blkq_rw(req->q, d->be, BLK_OP_WRITE, &req->c.riov, 1,
			      req->c.doff, chunk_written, req);
		if (ret) {
			req->err = ret;
			span_end(req);
		}
		return;
	default:	/* VERIFY, WRITE AND VERIFY */
		at = iov_diff(req->c.iov, req->c.iovcnt, req->c.gpos, medium, n);
		if (at >= 0) {
			miscompare(req, req->c.base + req->c.gpos + at);
			span_end(req);
			return;
		}
		break;
	}
	advance(req);
}

static void span_next(struct scsi_req *req)
{
	struct scsi_disk *d = req->disk;
	int ret;

	if (failed(req) || !req->c.left) {
		span_end(req);
		return;
	}
	req->stage = ST_RW;	/* for the error accounting of disk_io.c */
	if (req->cmp == CMP_WRITE_VERIFY && !req->c.written) {
		/* the span's iov holds exactly its bytes (trimmed, or the
		 * HBA's segment) and stays valid until span_end */
		ret = blkq_rw(req->q, d->be, BLK_OP_WRITE, req->c.iov,
			      req->c.iovcnt, req->c.doff, span_written, req);
	} else {
		req->c.chunk = chunk_cap(d, req->c.left);
		req->c.riov.iov_base = req->scratch;
		req->c.riov.iov_len = req->c.chunk;
		ret = blkq_rw(req->q, d->be, BLK_OP_READ, &req->c.riov, 1,
			      req->c.doff, chunk_read, req);
	}
	if (ret) {
		req->err = ret;
		span_end(req);
	}
}

/* ---- COMPARE AND WRITE ---- */

/* All n bytes at off, or -errno (a short transfer: -EIO). */
static int pio_all(int fd, uint8_t *p, uint64_t n, uint64_t off, bool wr)
{
	while (n) {
		ssize_t r = wr ? pwrite(fd, p, n, off) : pread(fd, p, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		n -= r;
		off += r;
	}
	return 0;
}

/* Reads the N blocks, compares them with the first half of the data-out
 * and, if equal, writes its second half: all under the locks (see the top
 * of the file). Synchronous: at most MAX_CAW_BLOCKS blocks, on the page
 * cache (cache=none: the buffered twin of the O_DIRECT descriptor, which
 * the kernel keeps coherent with direct I/O), so it holds the queue thread
 * for a page-cache copy, or one device read when the blocks are cold. */
static void caw_run(struct scsi_req *req)
{
	struct scsi_disk *d = req->disk;
	struct blk_backend *be = d->be;
	int fd = be->direct && be->fd_buffered >= 0 ? be->fd_buffered : be->fd;
	uint64_t n = req->end, off = req->pos;
	uint8_t *medium = req->scratch, *data = gathered(req);
	/* the lock is on a shadow of the range far past the end of any
	 * image (locks beyond EOF are allowed): only COMPARE AND WRITEs take
	 * it, so byte-range locks others hold on the image itself (QEMU's
	 * image locking holds read locks on bytes 100-230 for as long as
	 * it has a file open) never stall a queue thread here */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = (off_t)(CAW_LOCK_BASE + off),
			    .l_len = (off_t)n };
	int64_t at = -1;
	int ret;

	req->stage = ST_RW;
	pthread_mutex_lock(&d->caw_lock);
	do
		ret = fcntl(fd, F_OFD_SETLKW, &fl) ? -errno : 0;
	while (ret == -EINTR);
	if (!ret) {
		ret = pio_all(fd, medium, n, off, false);
		if (!ret)
			at = buf_diff(medium, data, n);
		if (!ret && at < 0)
			ret = pio_all(fd, data + n, n, off, true);
		fl.l_type = F_UNLCK;
		fcntl(fd, F_OFD_SETLK, &fl);
	}
	pthread_mutex_unlock(&d->caw_lock);
	req->xferred = req->info.xfer;
	if (ret) {
		req->err = ret;
		disk_complete(req);
	} else if (at >= 0) {
		miscompare(req, at);
		disk_complete(req);
	} else if (req->sync_after) {
		disk_flush_then_complete(req);
	} else {
		disk_complete(req);
	}
}

/* ---- entry points ---- */

/* The command's data is all here (whole buffer, or gathered): run it. */
static void run_gathered(struct scsi_req *req)
{
	if (req->cmp == CMP_CAW)
		caw_run(req);
	else	/* VERIFY BYTCHK 11b: the one block against each block */
		span_start(req, NULL, 0, 0, req->end, false);
}

void disk_cmp_submit(struct scsi_req *req, const struct decoded *dc)
{
	unsigned int cnt;
	int ret = disk_cmp_prepare(req, dc);

	if (ret) {
		disk_submit_failed(req, ret);
		return;
	}
	cnt = iov_trim(req->iov, req->iovcnt, req->info.xfer);
	if (req->cmp == CMP_CAW || req->cmp == CMP_VERIFY_SAME) {
		iov_to_buf(req->iov, cnt, 0, gathered(req), req->info.xfer);
		run_gathered(req);
		return;
	}
	span_start(req, req->iov, cnt, 0, req->info.xfer, false);
}

/* A piecewise segment (the HBA checked pos and len against the transfer).
 * Gathered commands copy it and report it moved at once; the others
 * compare (or write and compare, or OR) it against the medium. After a
 * miscompare or an error, the rest of the data is taken and ignored. */
int disk_cmp_segment(struct scsi_req *req, const struct iovec *iov,
		     unsigned int iovcnt, uint64_t pos)
{
	uint64_t len = iov_size(iov, iovcnt);

	if (req->cmp == CMP_CAW || req->cmp == CMP_VERIFY_SAME || failed(req)) {
		if (!failed(req))
			iov_to_buf(iov, iovcnt, 0, gathered(req) + pos, len);
		req->xferred += len;
		req->seg_done(req, (int)len);
		return 0;
	}
	span_start(req, iov, iovcnt, pos, len, true);
	return 0;
}

void disk_cmp_end(struct scsi_req *req)
{
	bool gather = req->cmp == CMP_CAW || req->cmp == CMP_VERIFY_SAME;

	if (failed(req)) {
		disk_complete(req);
		return;
	}
	if (req->xferred != req->info.xfer) {
		/* the initiator sent less than the command needs: a gathered
		 * command compared and wrote nothing, a streaming one stopped
		 * where the data did; neither did what the CDB asked, and
		 * GOOD would say it had */
		disk_check(req, SENSE_ABORTED_COMMAND, ASC_DATA_PHASE_ERROR);
		if (req->sync_after && req->xferred && req->cmp != CMP_VERIFY &&
		    !gather)
			disk_flush_then_complete(req);	/* what was written */
		else
			disk_complete(req);
		return;
	}
	if (gather) {
		run_gathered(req);
		return;
	}
	if (req->sync_after && req->xferred)
		disk_flush_then_complete(req);
	else
		disk_complete(req);
}

/* ---- PRE-FETCH, GET LBA STATUS, READ DEFECT DATA ---- */

/* PRE-FETCH: the range (at most MAXIMUM PREFETCH LENGTH) into the page cache, asynchronously (the kernel's
 * readahead; nothing when the disk bypasses the cache). GOOD rather than
 * CONDITION MET: SBC-4 lets a device server that cannot promise the blocks
 * stay cached say GOOD, and the page cache promises nothing. */
void disk_prefetch(struct scsi_req *req, const struct decoded *dc)
{
	struct scsi_disk *d = req->disk;
	uint64_t n = dc->nblocks ? dc->nblocks : dc->medium - dc->lba;

	if (n > d->max_xfer_blocks)	/* 0: to the end, within the limit */
		n = d->max_xfer_blocks;

	if (!d->be->direct && d->be->fd >= 0)
		posix_fadvise(d->be->fd, (off_t)(dc->lba * d->bs),
			      (off_t)(n * d->bs), POSIX_FADV_WILLNEED);
	req->done(req);
}

/* The extent that starts at block lba: its length in blocks and whether
 * it is deallocated (a hole of the image file: it reads as zeroes, LBPRZ).
 * A block device, or a file system without SEEK_DATA, is all mapped. */
static uint64_t extent(const struct scsi_disk *d, uint64_t medium,
		       uint64_t lba, bool *hole)
{
	const struct blk_backend *be = d->be;
	uint64_t off = lba * d->bs, size = medium * d->bs, end = size;
	off_t data, h;

	*hole = false;
	if (!be->is_blockdev && be->fd >= 0) {
		data = lseek(be->fd, (off_t)off, SEEK_DATA);
		if (data < 0 && errno == ENXIO) {
			*hole = true;	/* no data from off to the end */
		} else if (data >= 0 && (uint64_t)data >= off + d->bs) {
			*hole = true;	/* a hole up to the block with data */
			end = (uint64_t)data / d->bs * d->bs;
		} else if (data >= 0) {
			h = lseek(be->fd, (off_t)off, SEEK_HOLE);
			if (h >= 0)
				end = ((uint64_t)h + d->bs - 1) / d->bs * d->bs;
		}
	}
	if (end > size)
		end = size;
	if (end <= off)
		end = off + d->bs;
	return (end - off) / d->bs;
}

void disk_get_lba_status(struct scsi_req *req, const struct decoded *dc,
			 uint32_t alloc)
{
	const struct scsi_disk *d = req->disk;
	uint8_t buf[SCSI_PARAM_MAX];
	/* descriptors: as many as the allocation length holds (at least
	 * one, truncated), at most what fits here; each costs two lseeks */
	unsigned int max = (sizeof(buf) - 8) / 16, ndesc = 0;
	uint64_t lba = dc->lba;
	size_t n = 8;

	if (alloc < 24)
		max = 1;
	else if ((alloc - 8) / 16 < max)
		max = (alloc - 8) / 16;
	memset(buf, 0, 8);
	while (lba < dc->medium && ndesc < max) {
		bool hole;
		uint64_t cnt = extent(d, dc->medium, lba, &hole);

		if (cnt > UINT32_MAX)
			cnt = UINT32_MAX;
		memset(buf + n, 0, 16);
		put64(buf + n, lba);
		put32(buf + n + 8, (uint32_t)cnt);
		buf[n + 12] = hole ? 0x01 : 0x00;	/* deallocated : mapped */
		n += 16;
		ndesc++;
		lba += cnt;
	}
	put32(buf, (uint32_t)(n - 4));	/* PARAMETER DATA LENGTH */
	disk_send_in(req, buf, min_sz(n, alloc));
}

/* READ DEFECT DATA: the image has no defects; both lists are valid and
 * empty, in the format asked for. */
void disk_read_defects(struct scsi_req *req, const uint8_t *cdb,
		       uint32_t alloc)
{
	bool is12 = cdb[0] == READ_DEFECT_12;
	uint8_t sel = is12 ? cdb[1] : cdb[2];
	uint8_t buf[8] = { 0 };

	buf[1] = sel & 0x1f;	/* PLISTV, GLISTV as requested; format */
	disk_send_in(req, buf, min_sz(is12 ? 8 : 4, alloc));
}
