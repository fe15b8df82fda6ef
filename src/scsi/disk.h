/* SCSI disk target: one SBC direct-access logical unit over a block backend.
 * It does not know its HBA: virtio-scsi hands it whole data buffers as
 * iovecs, the emulated LSI 53C895A moves data piecewise as its SCRIPTS run. */
#ifndef IOVM_SCSI_DISK_H
#define IOVM_SCSI_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "block/backend.h"

#define SCSI_CDB_MAX 16		/* longest CDB the target implements */
#define SCSI_SENSE_MAX 32	/* longest sense data the target returns */
/* Largest parameter data of a non-direct command (INQUIRY, MODE SENSE,
 * REPORT LUNS, UNMAP list, WRITE SAME block...): an HBA that needs a bounce
 * buffer for those (LSI) never needs more than this. */
#define SCSI_PARAM_MAX 4096
#define SCSI_MAX_LUNS 256	/* LUNs 0..255 per target */

/* SAM status codes. */
#define SAM_STAT_GOOD 0x00
#define SAM_STAT_CHECK_CONDITION 0x02
#define SAM_STAT_BUSY 0x08
#define SAM_STAT_RESERVATION_CONFLICT 0x18
#define SAM_STAT_TASK_SET_FULL 0x28
#define SAM_STAT_TASK_ABORTED 0x40

/* Sense keys. */
#define SENSE_NO_SENSE 0x0
#define SENSE_NOT_READY 0x2
#define SENSE_MEDIUM_ERROR 0x3
#define SENSE_HARDWARE_ERROR 0x4
#define SENSE_ILLEGAL_REQUEST 0x5
#define SENSE_UNIT_ATTENTION 0x6
#define SENSE_DATA_PROTECT 0x7
#define SENSE_ABORTED_COMMAND 0xb
#define SENSE_MISCOMPARE 0xe

enum scsi_dir {
	SCSI_DIR_NONE,
	SCSI_DIR_TO_DEV,	/* data-out: WRITE, MODE SELECT, UNMAP... */
	SCSI_DIR_FROM_DEV,	/* data-in: READ, INQUIRY... */
};

/* What happened to a command at the transport level; the HBA maps it to
 * its own codes (virtio-scsi response, LSI phase/interrupt). */
enum scsi_host_status {
	SCSI_HOST_OK,		/* executed: status, sense, xferred are valid */
	SCSI_HOST_OVERRUN,	/* the CDB moves more than the buffer: not run */
	SCSI_HOST_BAD_DIR,	/* buffer direction is not the command's: not run */
	SCSI_HOST_ABORTED,	/* aborted by a task management function */
	SCSI_HOST_RESET,	/* aborted by a LU or I_T nexus reset */
};

/* The data phase a CDB asks for, from scsi_disk_decode(). A CDB that the
 * target will refuse decodes as dir NONE, xfer 0: the HBA submits it without
 * data and gets the CHECK CONDITION. */
struct scsi_cmd_info {
	enum scsi_dir dir;
	uint32_t xfer;		/* bytes the CDB moves (data-in: at most) */
	bool direct;		/* READ/WRITE: data goes straight between the
				 * HBA's iovecs and the disk at offset */
	uint64_t offset;	/* direct: disk byte offset of the first byte */
};

struct scsi_disk;
struct scsi_req;

typedef void (*scsi_done_fn)(struct scsi_req *req);
typedef void (*scsi_seg_done_fn)(struct scsi_req *req, int res);

/* One command. Requests come from a pool of the HBA, per queue, sized at
 * queue setup; the target never allocates per request and initialises only
 * what it uses, so the HBA need not zero a request either: it sets the
 * "in" fields below for every command and reads the "out" fields in done().
 * A request and its blk_queue belong to one thread. */
struct scsi_req {
	/* In: set by the HBA. */
	uint8_t cdb[SCSI_CDB_MAX];	/* the first min(cdb_len, 16) bytes */
	uint8_t cdb_len;		/* as received (virtio: cdb_size) */
	enum scsi_dir buf_dir;		/* direction of iov */
	struct iovec *iov;		/* data buffer; valid until done();
					 * the target may shorten it to the
					 * transfer length */
	unsigned int iovcnt;		/* at most IOV_MAX */
	uint64_t buf_len;		/* sum of the iov lengths */
	struct blk_queue *q;		/* this thread's backend queue */
	scsi_done_fn done;
	scsi_seg_done_fn seg_done;	/* piecewise HBAs only */

	/* Out: valid when done() is called. */
	uint8_t host;			/* enum scsi_host_status */
	uint8_t status;			/* SAM_STAT_* */
	uint8_t sense_len;		/* 0 unless CHECK CONDITION */
	uint8_t sense[SCSI_SENSE_MAX];
	uint64_t xferred;		/* bytes moved to or from the buffer:
					 * residual = buf_len - xferred */

	/* Private to the target. */
	struct scsi_disk *disk;
	struct scsi_cmd_info info;
	uint8_t op;
	uint8_t stage;
	uint8_t abort_host;		/* 0, or the host status of an abort */
	uint8_t cmp;			/* enum cmp_mode (disk_int.h) */
	void *scratch;			/* compare commands' buffer, or NULL */
	bool is_write;
	bool dealloc;			/* UNMAP ranges: discard, not zeroes */
	bool zero_unmap;		/* else zeroes that may deallocate */
	bool sync_after;		/* write-through: flush before done */
	int err;
	uint16_t nsteps;		/* WRITE SAME chunks / UNMAP ranges */
	uint16_t step;
	uint64_t pos;			/* WRITE SAME: next byte to write */
	uint64_t end;
	union {
		/* WRITE SAME: the pattern block repeated (guest memory) */
		struct iovec ws_iov[32];
		/* UNMAP: validated ranges copied from the parameter list */
		struct {
			uint64_t off;
			uint64_t len;
		} unmap[32];
		/* compare commands: the span in progress, CMP_CHUNK at a time */
		struct {
			const struct iovec *iov;	/* guest data */
			unsigned int iovcnt;
			uint64_t gpos;	/* next byte of iov */
			uint64_t doff;	/* its disk offset */
			uint64_t left;	/* bytes still to do in the span */
			uint64_t base;	/* transfer offset of iov's byte 0 */
			uint64_t len;	/* bytes of the span */
			struct iovec riov;	/* the chunk in scratch */
			uint32_t chunk;	/* bytes of the chunk in flight */
			bool seg;	/* a piecewise segment (seg_done) */
			bool written;	/* WRITE AND VERIFY: write done */
		} c;
	};
};

/* The logical units of one target (bit n: LUN n exists), for REPORT LUNS.
 * Owned by the HBA; it may change between commands. */
struct scsi_lun_map {
	uint64_t bits[SCSI_MAX_LUNS / 64];
};

static inline bool scsi_lun_present(const struct scsi_lun_map *m,
				    unsigned int lun)
{
	return lun < SCSI_MAX_LUNS && (m->bits[lun / 64] >> (lun % 64)) & 1;
}

/* A logical unit on be (opened and kept open by the caller until
 * scsi_disk_destroy). luns: the target's LUN map (for REPORT LUNS).
 * Returns NULL (errno set) on allocation failure. */
struct scsi_disk *scsi_disk_create(struct blk_backend *be,
				   const struct scsi_lun_map *luns);
void scsi_disk_destroy(struct scsi_disk *d);

/* Runs a command whose whole data buffer is known (virtio-scsi; LSI for
 * non-direct commands through a bounce buffer of SCSI_PARAM_MAX). Checks
 * the buffer against the CDB (OVERRUN, BAD_DIR), executes, and calls
 * req->done() exactly once, possibly before returning. READ and WRITE go
 * to the backend asynchronously on req->q (the caller submits the queue
 * with blkq_submit and reaps it). */
void scsi_disk_submit(struct scsi_disk *d, struct scsi_req *req);

/* The data phase of a CDB (pure: no state changes). */
void scsi_disk_decode(const struct scsi_disk *d, const uint8_t *cdb,
		      unsigned int cdb_len, struct scsi_cmd_info *info);

/* Piecewise data phase for direct commands (info.direct), for HBAs that
 * move data as the guest presents it (LSI SCRIPTS block moves):
 *   scsi_disk_begin: validates the command (range, write protect, unit
 *     attention). Returns 0: go on with segments; 1: the command completed
 *     already (done() called with CHECK CONDITION).
 *   scsi_disk_segment: moves iov between guest memory and the disk at byte
 *     pos of the transfer, asynchronously on req->q; seg_done(req, res)
 *     reports bytes moved or -errno (the target records the error for the
 *     final status). One segment in flight per request. Returns 0 or
 *     -EINVAL when [pos, pos+len) is outside the transfer (nothing issued).
 *   scsi_disk_end: the data phase is over (all of it or what the guest
 *     offered): write-through flush if needed, then done() with the status.
 * req->cdb, cdb_len, q, done, seg_done are set by the HBA before begin. */
int scsi_disk_begin(struct scsi_disk *d, struct scsi_req *req);
int scsi_disk_segment(struct scsi_req *req, const struct iovec *iov,
		      unsigned int iovcnt, uint64_t pos);
void scsi_disk_end(struct scsi_req *req);

/* Task management. scsi_disk_abort marks a request in flight (on the
 * calling thread's queue) aborted: the backend I/O it has issued finishes,
 * no further stage starts, and done() reports SCSI_HOST_ABORTED (or RESET
 * with reset=true). scsi_disk_reset records the unit attention a LU reset
 * (or an I_T nexus loss, nexus=true) leaves for the next command. */
void scsi_disk_abort(struct scsi_req *req, bool reset);
void scsi_disk_reset(struct scsi_disk *d, bool nexus);

/* The disk's backend changed size (blk_resize, on the control thread,
 * while commands run): READ CAPACITY and the range checks take the new
 * size, and the initiator's next command (the I_T nexus this target
 * serves: one per process) gets CAPACITY DATA HAS CHANGED (UNIT
 * ATTENTION, 2Ah/09h), after any reset's unit attention. Nothing when the
 * size in blocks did not change. */
void scsi_disk_resized(struct scsi_disk *d);

/* A command for a LUN that does not exist on a target that does: INQUIRY
 * answers "no device here" (peripheral qualifier 3), REPORT LUNS and
 * REQUEST SENSE work, anything else is LOGICAL UNIT NOT SUPPORTED. Whole
 * buffer mode like scsi_disk_submit; done() is called before returning. */
void scsi_lun_absent_submit(const struct scsi_lun_map *luns,
			    struct scsi_req *req);

/* The backend errors the disk's commands met (counted since creation), and
 * one its HBA met outside a command (the shutdown flush). */
const struct blk_errors *scsi_disk_errors(const struct scsi_disk *d);
void scsi_disk_count_error(struct scsi_disk *d, enum blk_op op);

/* Sense data for a condition an HBA finds itself (key, asc = ASC << 8 |
 * ASCQ), in the format d's control mode page asks for: descriptor when
 * D_SENSE is set, else fixed (d NULL: fixed). Writes at most SCSI_SENSE_MAX
 * bytes to p and returns their number. */
unsigned int scsi_disk_sense(const struct scsi_disk *d, uint8_t key,
			     uint16_t asc, uint8_t *p);

/* Persistent reservations: where the state shared with the other
 * processes on the image lives and who this process is (its I_T nexus).
 * state: a file (opened or created now: an error if it cannot be), "none"
 * (this process only), or NULL: IMAGE.pr, made when a PERSISTENT RESERVE
 * OUT first needs it (in-process with one warning if it cannot be). id:
 * the nexus name (1-127 printable characters), NULL: HOSTNAME:PID. Call
 * before the first command. Returns 0 or -errno with err set. Without
 * it a disk works as with NULL, NULL. */
int scsi_disk_pr_setup(struct scsi_disk *d, const char *state, const char *id,
		       char *err, size_t errlen);
const char *scsi_disk_pr_id(const struct scsi_disk *d);

/* Write cache enabled (MODE SENSE caching page WCE), for HBAs and tests. */
bool scsi_disk_wce(const struct scsi_disk *d);

#endif
