/* What the pieces of the SCSI disk target share: its state, the decoded
 * form of a command, sense conditions, and the calls between the pieces. */
#ifndef IOVM_SCSI_DISK_INT_H
#define IOVM_SCSI_DISK_INT_H

#include <pthread.h>
#include <stddef.h>

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
#define WRITE_VERIFY_10 0x2e
#define VERIFY_10 0x2f
#define PRE_FETCH_10 0x34
#define SYNC_CACHE_10 0x35
#define READ_DEFECT_10 0x37
#define WRITE_SAME_10 0x41
#define UNMAP 0x42
#define MODE_SELECT_10 0x55
#define MODE_SENSE_10 0x5a
#define READ_16 0x88
#define COMPARE_AND_WRITE 0x89
#define WRITE_16 0x8a
#define ORWRITE_16 0x8b
#define WRITE_VERIFY_16 0x8e
#define VERIFY_16 0x8f
#define PRE_FETCH_16 0x90
#define SYNC_CACHE_16 0x91
#define WRITE_SAME_16 0x93
#define SERVICE_ACTION_IN_16 0x9e
#define EXTENDED_COPY 0x83
#define RECEIVE_COPY_RESULTS 0x84
#define REPORT_LUNS 0xa0
#define MAINTENANCE_IN 0xa3
#define READ_12 0xa8
#define WRITE_12 0xaa
#define WRITE_VERIFY_12 0xae
#define VERIFY_12 0xaf
#define READ_DEFECT_12 0xb7

#define SAI_READ_CAPACITY_16 0x10
#define SAI_GET_LBA_STATUS 0x12
#define MI_REPORT_SUPPORTED_OPCODES 0x0c

/* Limits advertised in the Block Limits VPD page and enforced here. */
#define MAX_XFER_BYTES (32u << 20)
#define MAX_UNMAP_BYTES (1ull << 30)
#define MAX_UNMAP_DESC 32
/* UNMAP and WRITE SAME: at most 1 Mi blocks per command (512 MiB of 512-byte
 * blocks, 4 GiB of 4 KiB ones), what initiators' sanity checks accept
 * (libiscsi's conformance suite wants MAXIMUM UNMAP LBA COUNT <= 1 Mi). */
#define MAX_UNMAP_BLOCKS (1u << 20)
/* COMPARE AND WRITE: blocks per command (Block Limits byte 5). The command
 * runs under a lock with a buffer of 3 x this many blocks, so keep it
 * small; VMware's ATS and Linux's users send 1. */
#define MAX_CAW_BLOCKS 32u
/* Where COMPARE AND WRITE's OFD range locks live on the image: the range's
 * offset + 2^62, past the end of any image (disk_cmp.c says why). */
#define CAW_LOCK_BASE (1ull << 62)

/* Additional sense codes (ASC << 8 | ASCQ). */
#define ASC_NONE 0x0000
#define ASC_NOT_READY_INIT_REQUIRED 0x0402
#define ASC_WRITE_ERROR 0x0c00
#define ASC_UNRECOVERED_READ_ERROR 0x1100
#define ASC_MISCOMPARE_VERIFY 0x1d00
#define ASC_PARAM_LIST_LENGTH 0x1a00
#define ASC_INVALID_OPCODE 0x2000
#define ASC_LBA_OUT_OF_RANGE 0x2100
#define ASC_INVALID_FIELD_CDB 0x2400
#define ASC_LUN_NOT_SUPPORTED 0x2500
#define ASC_INVALID_FIELD_PARAM 0x2600
#define ASC_WRITE_PROTECTED 0x2700
#define ASC_SPACE_ALLOC_FAILED 0x2707
#define ASC_CAPACITY_CHANGED 0x2a09
#define ASC_BUS_DEVICE_RESET 0x2903
#define ASC_I_T_NEXUS_LOSS 0x2907
#define ASC_SAVING_NOT_SUPPORTED 0x3900
#define ASC_INTERNAL_TARGET_FAILURE 0x4400
#define ASC_DATA_PHASE_ERROR 0x4b00

enum stage { ST_NONE, ST_RW, ST_FLUSH, ST_STOP, ST_WS, ST_UNMAP, ST_SEG };

/* The commands that compare or combine the guest's data with the medium's
 * (disk_cmp.c). They are direct (data-out at the LBA range's offset), so
 * both HBAs' data phases reach them. */
enum cmp_mode {
	CMP_NONE,
	CMP_VERIFY,		/* VERIFY BYTCHK 01b: data-out == medium */
	CMP_VERIFY_SAME,	/* VERIFY BYTCHK 11b: one block == each block */
	CMP_WRITE_VERIFY,	/* WRITE AND VERIFY BYTCHK 01b */
	CMP_CAW,		/* COMPARE AND WRITE */
	CMP_ORWRITE,		/* ORWRITE: medium |= data-out */
};

struct scsi_disk {
	struct blk_backend *be;
	const struct scsi_lun_map *luns;
	/* Blocks on the medium: grows (scsi_disk_resized) while the queue
	 * threads run; read with disk_nblocks, once per command. */
	uint64_t nblocks;
	uint32_t bs;
	uint32_t max_xfer_blocks;
	uint64_t max_unmap_blocks;
	uint8_t naa[8];		/* NAA 3 (locally assigned) LU name */
	/* Shared by every queue thread; accessed with atomics. */
	bool wce;
	bool dsense;
	/* COMPARE AND WRITE between this process's queue threads (between
	 * processes: an OFD lock on the image's byte range) */
	pthread_mutex_t caw_lock;
	bool stopped;
	uint8_t ua;		/* 0 or the ASCQ of a pending 29h unit attention */
	bool ua_capacity;	/* CAPACITY DATA HAS CHANGED pending (2Ah/09h) */
	struct blk_errors errors;	/* what the backend failed */
	struct disk_pr *pr;	/* reservations (disk_pr.c) */
	struct xcopy_state *xc;	/* EXTENDED COPY (disk_xcopy.c) */
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
	bool info_valid;	/* INFORMATION: info (MISCOMPARE: byte offset) */
	uint64_t info;
};

/* What the decoder found: the data phase plus the command's fields. */
struct decoded {
	struct scsi_cmd_info info;
	bool bad;
	struct sense err;
	uint64_t lba;
	uint32_t nblocks;
	/* The medium's blocks as the command was decoded (disk_nblocks read
	 * once): every check of the command uses this one size. */
	uint64_t medium;
	bool fua;
	uint8_t cmp;		/* enum cmp_mode: a disk_cmp.c command */
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

/* The medium's size in blocks now (see nblocks). */
static inline uint64_t disk_nblocks(const struct scsi_disk *d)
{
	return __atomic_load_n(&d->nblocks, __ATOMIC_ACQUIRE);
}

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)p[0] << 8 | p[1];
}

static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static inline size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* disk_cdb.c: the command table and the CDB decoder. */
extern const struct cmd_desc disk_cmds[];
extern const unsigned int disk_ncmds;
const struct cmd_desc *disk_cmd_find(uint8_t op, uint8_t sa, bool any_sa);
bool disk_is_write_op(uint8_t op);
void disk_decode(const struct scsi_disk *d, const uint8_t *cdb,
		 unsigned int cdb_len, struct decoded *dc);

/* disk_sense.c: sense data and CHECK CONDITION. */
unsigned int disk_sense_encode(const struct sense *s, bool desc, uint8_t *p);
bool disk_dsense(const struct scsi_disk *d);
void disk_check_condition(struct scsi_req *req, const struct sense *s);
void disk_check(struct scsi_req *req, uint8_t key, uint16_t asc);

/* disk_emul.c: the emulated commands, on stack buffers. */
void disk_send_in(struct scsi_req *req, const uint8_t *buf, size_t n);
size_t disk_std_inquiry(uint8_t *p, uint8_t pq_pdt);
void disk_inquiry(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc);
size_t disk_report_luns(const struct scsi_lun_map *m, uint8_t sel, uint8_t *p);
size_t disk_request_sense(struct scsi_disk *d, bool desc, uint8_t *p);
size_t disk_read_capacity(const struct scsi_disk *d, bool is16, uint8_t *p);
void disk_rsoc(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc);
void disk_mode_sense(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc);
void disk_mode_select(struct scsi_req *req, const uint8_t *cdb,
		      const uint8_t *p, size_t len);

/* disk_cmp.c: VERIFY with BYTCHK, WRITE AND VERIFY, COMPARE AND WRITE,
 * ORWRITE, in whole-buffer and piecewise mode; PRE-FETCH, GET LBA STATUS,
 * READ DEFECT DATA. */
int disk_cmp_prepare(struct scsi_req *req, const struct decoded *dc);
void disk_cmp_submit(struct scsi_req *req, const struct decoded *dc);
int disk_cmp_segment(struct scsi_req *req, const struct iovec *iov,
		     unsigned int iovcnt, uint64_t pos);
void disk_cmp_end(struct scsi_req *req);
void disk_prefetch(struct scsi_req *req, const struct decoded *dc);
void disk_get_lba_status(struct scsi_req *req, const struct decoded *dc,
			 uint32_t alloc);
void disk_read_defects(struct scsi_req *req, const uint8_t *cdb,
		       uint32_t alloc);

/* disk_io.c: the data path through the block queue. */
void disk_complete(struct scsi_req *req);
void disk_submit_failed(struct scsi_req *req, int ret);
void disk_flush_then_complete(struct scsi_req *req);
void disk_rw(struct scsi_disk *d, struct scsi_req *req,
	     const struct decoded *dc);
void disk_sync_cache(struct scsi_disk *d, struct scsi_req *req);
void disk_start_stop(struct scsi_disk *d, struct scsi_req *req,
		     const uint8_t *cdb);
void disk_write_same(struct scsi_req *req, const uint8_t *cdb,
		     const struct decoded *dc);
void disk_unmap(struct scsi_req *req, const uint8_t *p, size_t len);

/* disk_pr.c: persistent reservations, RESERVE(6)/RELEASE(6). The gate
 * runs for every command after the unit's own unit attentions: the
 * reservation unit attentions, then (unless the CDB is bad) RESERVATION
 * CONFLICT; true when it completed the command. */
void disk_pr_create(struct scsi_disk *d);
void disk_pr_destroy(struct scsi_disk *d);
bool disk_pr_gate(struct scsi_disk *d, struct scsi_req *req, bool bad);
bool disk_pr_blocks(struct scsi_disk *d, bool write);
void disk_pr_decode(const uint8_t *cdb, struct decoded *dc);
void disk_pr_command(struct scsi_disk *d, struct scsi_req *req,
		     const struct decoded *dc);
void disk_pr_reset(struct scsi_disk *d, bool nexus);
uint8_t disk_pr_take_ua(struct scsi_disk *d);
/* disk_xcopy.c: EXTENDED COPY (LID1), RECEIVE COPY RESULTS, the
 * Third-party Copy VPD page, and the process's registry of disks that a
 * copy can name. */
int disk_xcopy_init(struct scsi_disk *d);
void disk_xcopy_fini(struct scsi_disk *d);
void disk_xcopy_decode(const uint8_t *cdb, struct decoded *dc);
void disk_xcopy(struct scsi_req *req, const uint8_t *p, size_t len);
void disk_rcr(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc);
void disk_xcopy_abort(struct scsi_req *req);
void disk_xcopy_reset(struct scsi_disk *d);
size_t disk_xcopy_vpd(uint8_t *p);

#endif
