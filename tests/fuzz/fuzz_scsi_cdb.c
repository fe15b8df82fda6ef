/* libFuzzer harness for the SCSI disk target's CDB decoding and command
 * execution: the input is a CDB, its length, a buffer direction and the
 * data-out bytes, run against a small temporary disk in whole-buffer mode
 * (virtio-scsi) and, for direct commands, in piecewise mode (LSI). The
 * target must complete every command exactly once, never move more than
 * the buffer holds and always return well-formed sense data.
 *
 * Input: [cdb 16][u8 cdb_len][u8 flags][u16 buf_len][data-out bytes...]
 * flags: bits 0-1 buffer direction, bit 2 read-only disk, bit 3 D_SENSE
 * first, bit 4 absent LUN. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "scsi/disk.h"

#define DISK (1u << 20)

static struct blk_backend be[2];
static struct blk_queue *q;
static struct scsi_lun_map luns = { { 1 } };
static struct scsi_req req;
static int completions;
static int seg_completions;
static uint8_t buf[65536];

static void done(struct scsi_req *r)
{
	completions++;
}

static void seg_done(struct scsi_req *r, int res)
{
	seg_completions++;
}

static void setup(void)
{
	char path[] = "/tmp/iovm-fuzz-scsi-XXXXXX";
	struct disk_cfg cfg = { .path = path, .cache = CACHE_WRITEBACK };
	char err[256];
	int fd;

	log_threshold = LOG_ERR;
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, DISK))
		abort();
	close(fd);
	if (blk_open(&be[0], &cfg, err, sizeof(err)))
		abort();
	cfg.ro = true;
	if (blk_open(&be[1], &cfg, err, sizeof(err)))
		abort();
	unlink(path);
	q = blkq_create(8);
	if (!q)
		abort();
}

static void wait_for(int *counter, int want)
{
	while (*counter < want) {
		if (blkq_submit(q) < 0 || blkq_reap(q, true) < 0)
			abort();
	}
}

static void check_result(const struct scsi_req *r)
{
	if (r->host > SCSI_HOST_RESET)
		abort();
	if (r->host != SCSI_HOST_OK)
		return;
	if (r->xferred > r->buf_len)
		abort();
	if (r->status == SAM_STAT_CHECK_CONDITION) {
		if (r->sense_len != 8 && r->sense_len != 16 && r->sense_len != 18 &&
		    r->sense_len != 20 && r->sense_len != 28 &&
		    r->sense_len != 32)	/* COPY ABORTED with a target's sense */
			abort();
		if ((r->sense[0] & 0x7e) != 0x70 && (r->sense[0] & 0x7e) != 0x72)
			abort();
	} else if (r->sense_len) {
		abort();
	}
}

static void prep(const uint8_t *cdb, uint8_t cdb_len, enum scsi_dir dir,
		 struct iovec *iov, size_t len)
{
	memset(&req, 0x5a, sizeof(req));	/* no zeroed state to lean on */
	memcpy(req.cdb, cdb, cdb_len < SCSI_CDB_MAX ? cdb_len : SCSI_CDB_MAX);
	req.cdb_len = cdb_len;
	req.buf_dir = dir;
	req.iov = iov;
	req.iovcnt = len ? 2 : 0;
	req.buf_len = len;
	req.q = q;
	req.done = done;
	req.seg_done = seg_done;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cdb = data;
	uint8_t flags, cdb_len;
	size_t len, n;
	struct scsi_disk *d;
	struct scsi_cmd_info info;
	struct iovec iov[2];
	enum scsi_dir dir;

	if (!q)
		setup();
	if (size < 20)
		return 0;
	cdb_len = data[16];
	flags = data[17];
	len = (data[18] | data[19] << 8) % sizeof(buf);
	dir = flags & 3;
	if (dir > SCSI_DIR_FROM_DEV)
		dir = SCSI_DIR_NONE;
	n = size - 20 < len ? size - 20 : len;
	memset(buf, 0, sizeof(buf));
	memcpy(buf, data + 20, n);
	/* two segments, the split point from the data length */
	iov[0] = (struct iovec){ buf, len / 3 };
	iov[1] = (struct iovec){ buf + len / 3, len - len / 3 };

	d = scsi_disk_create(&be[(flags >> 2) & 1], &luns);
	if (!d)
		abort();
	/* reservations within this process: every input starts from none,
	 * and no state file is made beside the image */
	{
		char err[256];

		if (scsi_disk_pr_setup(d, "none", "fuzz", err, sizeof(err)))
			abort();
	}
	if (flags & 8) {
		/* MODE SELECT(6) of the control page with D_SENSE set */
		static const uint8_t ms[6] = { 0x15, 0x10, 0, 0, 16, 0 };
		static uint8_t p[16] = { 0, 0, 0, 0, 0x0a, 0x0a, 0x04, 0x10,
					 0, 0, 0xff, 0xff };
		struct iovec v[2] = { { p, 8 }, { p + 8, 8 } };

		prep(ms, 6, SCSI_DIR_TO_DEV, v, 16);
		completions = 0;
		scsi_disk_submit(d, &req);
		wait_for(&completions, 1);
	}

	prep(cdb, cdb_len, dir, iov, dir == SCSI_DIR_NONE ? 0 : len);
	completions = 0;
	if (flags & 16)
		scsi_lun_absent_submit(&luns, &req);
	else
		scsi_disk_submit(d, &req);
	wait_for(&completions, 1);
	if (completions != 1 || blkq_inflight(q))
		abort();
	check_result(&req);

	/* the piecewise path of the same CDB */
	scsi_disk_decode(d, cdb, cdb_len, &info);
	if (info.dir == SCSI_DIR_NONE && info.xfer)
		abort();
	if (info.direct && !(flags & 16)) {
		struct iovec v = { buf, info.xfer < sizeof(buf) ? info.xfer : sizeof(buf) };
		int ret;

		prep(cdb, cdb_len, SCSI_DIR_NONE, NULL, 0);
		req.buf_len = info.xfer;	/* for check_result only */
		completions = seg_completions = 0;
		ret = scsi_disk_begin(d, &req);
		if (ret == 0) {
			if (scsi_disk_segment(&req, &v, 1, 0) == 0)
				wait_for(&seg_completions, 1);
			v.iov_len = 1;
			if (scsi_disk_segment(&req, &v, 1, info.xfer) != -22)
				abort();
			scsi_disk_end(&req);
		}
		wait_for(&completions, 1);
		if (completions != 1)
			abort();
		check_result(&req);
	}
	scsi_disk_destroy(d);
	return 0;
}
