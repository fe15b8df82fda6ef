/* Driver for the LSI 53C895A SCSI HBA, modelled on Linux's sym53c8xx: its
 * SCRIPTS live in the chip's on-chip RAM, commands go through a start queue
 * in host memory (SIGP wakes the SCRIPTS from WAIT RESELECT), every
 * command is a tagged one whose target may disconnect and reselect, the
 * DSA points at the command's control block and all moves are table
 * indirect off it, and completions land in a done queue the CPU polls. */
#ifndef PROBE_LSI_H
#define PROBE_LSI_H

#include "lib/libc.h"

struct pci_dev;

#define LSI_MAX_SG 16		/* segments per command */
#define LSI_NTAGS 64		/* commands in flight (tags 0..63) */
#define LSI_DQ_RECHECK 8	/* cleared done queue entries lsi_reap rechecks */

struct lsi_ccb {		/* 256 bytes, at ccb_base | tag << 8 */
	uint32_t select;	/* table-indirect SELECT: id << 16 */
	uint32_t pad0;
	uint32_t msgout[2];	/* count, address: IDENTIFY + tag */
	uint32_t cmd[2];
	uint32_t status[2];
	uint32_t msgin[2];
	uint32_t datap;		/* SCRIPTS address of the data moves */
	uint32_t pad1;
	uint32_t resel;		/* times reselected */
	uint32_t pad2[3];
	uint8_t msgout_bytes[16];
	uint8_t cdb[16];
	uint8_t status_byte;
	uint8_t msgin_byte;
	uint8_t pad3[6];
	uint32_t pad4[2];
	uint32_t sg[LSI_MAX_SG][2];	/* count, address; used from the end */
	uint32_t pad5[4];
};
/* The reselection path finds a CCB as ccb_base | tag << 8. */
_Static_assert(sizeof(struct lsi_ccb) == 256, "CCB must be 256 bytes");

struct lsi_hba {
	struct pci_dev *pci;
	volatile uint8_t *regs;	/* BAR1 */
	volatile uint8_t *ram;	/* BAR2: SCRIPTS RAM */
	uint32_t ram_phys;
	struct lsi_shared *sh;
	struct lsi_ccb *ccb;	/* LSI_NTAGS control blocks */
	uint32_t sq_put;	/* next start queue entry the CPU fills */
	uint32_t dq_get;	/* next done queue entry the CPU reads */
	uint32_t last_sq;	/* start queue entry of the last lsi_submit */
	uint32_t last_dq;	/* done queue entry of the last lsi_reap */
	uint32_t peek;		/* dq_get + 1 once its entry was seen */
	uint8_t peek_status;	/* its CCB's status byte at that moment */
	uint8_t seen_status;	/* the same, of the last lsi_reap */
	uint32_t a_start, a_dispatch, a_data_in, a_data_out;
};

enum lsi_dir { LSI_NONE, LSI_IN, LSI_OUT };

/* Finds the index-th 53C895A, resets chip and bus, loads the SCRIPTS and
 * starts them. Returns 0 or -1 (printed). */
int lsi_open(struct lsi_hba *h, unsigned int index);
/* Queues a tagged command (tag < LSI_NTAGS, not in flight) for target;
 * data in nseg segments. */
void lsi_submit(struct lsi_hba *h, unsigned int tag, unsigned int target,
		const uint8_t *cdb, unsigned int cdb_len, enum lsi_dir dir,
		void *const *seg, const uint32_t *seg_len, unsigned int nseg);
/* Tells the SCRIPTS that the start queue has work (SIGP). */
void lsi_kick(struct lsi_hba *h);
/* A completed tag, or -1 when none yet. Fails the probe on an unexpected
 * chip interrupt (checked every few hundred calls). */
int lsi_reap(struct lsi_hba *h);
/* Submits one command and waits for it (timeout: io_timeout_ms). Returns
 * the SCSI status. */
uint8_t lsi_run1(struct lsi_hba *h, unsigned int target, const uint8_t *cdb,
		 unsigned int cdb_len, enum lsi_dir dir, void *buf,
		 uint32_t len);
uint8_t lsi_status(struct lsi_hba *h, unsigned int tag);
/* The status byte of the last lsi_reap's CCB as it was when its done queue
 * entry first appeared: 0xff (what lsi_submit puts there) means the entry
 * was stored before the status phase wrote it. */
uint8_t lsi_seen_status(struct lsi_hba *h);
/* A chip register (reading DSTAT/SIST0/SIST1 clears them). */
uint8_t lsi_reg8(struct lsi_hba *h, unsigned int reg);
/* Restarts the SCRIPTS at START after an interrupt the CPU handled. */
void lsi_restart(struct lsi_hba *h);
/* Prints the SCRIPTS' and the CPU's queue positions and the queues. */
void lsi_dump(struct lsi_hba *h);
uint32_t lsi_resel_count(struct lsi_hba *h, unsigned int tag);
/* lsi_reap against a done queue that this function writes as QEMU's model
 * does; revive: also store an entry again after it was taken (must fail). */
void lsi_reap_selftest(bool revive);

#endif
