/* State of the LSI 53C895A shared by its parts: register file, SCSI bus,
 * DMA, signalling, the SCRIPTS processor and the device's life cycle. */
#ifndef IOVM_SCSI_LSI_INTERNAL_H
#define IOVM_SCSI_LSI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "scsi/disk.h"
#include "scsi/lsi53c895a.h"
#include "scsi/lsi_regs.h"

/* Commands in flight on the whole HBA (all targets, all tags). sym53c8xx
 * queues at most 64 tagged commands per LUN by default; more than this get
 * TASK SET FULL and are retried by the guest. */
#define LSI_MAX_CMDS 256
/* Guest segments gathered before they go to the backend as one request.
 * sym53c8xx uses at most 96 segments per command, so a normal command is
 * one backend request; a longer scatter list is moved in several rounds
 * with the same array, keeping per-command memory fixed. */
#define LSI_CMD_MAX_IOV 128
#define LSI_PARAM_BUFS 8	/* bounce buffers for parameter data */
#define LSI_MSG_MAX 16		/* longest message we queue or parse */
#define LSI_SCRIPTS_SLICE 4096	/* instructions between looks at events */

struct lsi;

struct lsi_cmd {
	struct scsi_req req;	/* the target's view of the command */
	struct lsi *s;
	struct lsi_cmd *next;	/* free list or reselection queue */
	uint8_t target;
	uint8_t lun;
	int16_t tag;		/* -1: untagged */
	bool in_use;
	bool direct;		/* READ/WRITE: data straight to the backend */
	bool began;		/* direct: scsi_disk_begin accepted it */
	bool ended;		/* direct: scsi_disk_end called */
	bool seg_busy;		/* a backend segment in flight */
	bool submitted;		/* non-direct: handed to the target */
	bool done;		/* status known (req.status/sense valid) */
	bool queued;		/* on the reselection queue */
	bool aborted;		/* bus reset or abort: never reselects */
	bool own_status;	/* HBA-made status (no scsi_req done) */
	bool seg_failed;	/* a segment could not even be queued */
	bool rw_counted;	/* in active_rw[] (a direct READ or WRITE) */
	bool abort_io;		/* aborted with backend I/O in flight: in its
				 * target's aborted_io until done() */
	enum scsi_dir dir;	/* data direction, recorded at CDB decode */
	uint32_t xfer;		/* bytes of the data phase */
	uint32_t pos;		/* data phase bytes moved (or gathered) */
	uint32_t seg_pos;	/* transfer offset of iov[0] */
	unsigned int niov;
	uint8_t status;
	int param;		/* param buffer index or -1 */
	struct iovec param_iov;
	struct iovec iov[LSI_CMD_MAX_IOV];
};

enum lsi_after_msgin {
	LSI_AFTER_NEXT,		/* let the target pick the next phase */
	LSI_AFTER_FREE,		/* bus free (COMMAND COMPLETE, DISCONNECT) */
};

enum lsi_scr_state {
	LSI_SCR_IDLE,		/* halted: waiting for the CPU */
	LSI_SCR_RUN,
	LSI_SCR_WAIT_RESEL,	/* WAIT RESELECT with nothing to reselect */
	LSI_SCR_WAIT_BUS,	/* target not requesting yet (I/O pending) */
};

struct lsi_target {
	struct scsi_disk *disk;		/* NULL: no device at this ID */
	struct blk_backend *be;
	struct scsi_lun_map luns;
	/* Sense of the last CHECK CONDITION, for REQUEST SENSE: a parallel
	 * SCSI target holds it, there is no autosense on the bus. */
	uint8_t sense[SCSI_SENSE_MAX];
	uint8_t sense_len;
	uint8_t sense_lun;
	/* Commands a reset or an ABORT message took from the target whose
	 * backend I/O (on iovecs into guest memory) has not finished, and how
	 * many were aborted since it was last zero (for the log). */
	unsigned int aborted_io;
	unsigned int aborted_batch;
};

struct lsi {
	pthread_mutex_t lock;
	struct lsi_params p;
	uint64_t ram_base;
	uint64_t mmio_base;	/* register BAR (0: not decoded) */
	uint64_t mmio_size;

	/* Register file: multi-byte registers little-endian in place. */
	uint8_t regs[LSI_NREGS];
	uint8_t dstat, sist0, sist1, istat;
	bool carry;
	bool irq_level;
	enum lsi_scr_state scr;
	bool sto_pending;	/* selection timed out: report at next bus op */
	/* Budget units of the instruction just run: a memory move counts
	 * one per 4 KiB, so a slice (and the lock vCPUs may wait for) stays
	 * short whatever the guest moves. */
	long step_cost;

	/* SCSI bus as the initiator sees it. */
	bool connected;
	bool atn;
	bool ack;
	bool req_wait;		/* connected, target busy: no REQ yet */
	uint8_t phase;
	uint8_t target, lun;
	int16_t sel_tag;
	bool identified;
	bool disc_priv;		/* IDENTIFY allowed disconnection */
	bool selecting;		/* between selection and CDB */
	struct lsi_cmd *cur;	/* command on the bus */
	/* Selected a target whose aborted_io is not zero: it asserts no REQ
	 * until that I/O has finished. */
	bool sel_hold;
	uint8_t msgin[LSI_MSG_MAX];
	unsigned int msgin_len, msgin_pos;
	enum lsi_after_msgin after_msgin;
	uint8_t msgout[LSI_MSG_MAX];
	unsigned int msgout_len;
	bool msgout_abort;	/* the message ends the nexus */
	unsigned int msgout_skip;	/* bytes of a rejected long message */
	bool ack_hold;		/* ACK held on a message's last byte */
	bool moved_data;	/* a data phase happened on this connection */
	int bus_status;		/* status without a command (-1: none) */
	struct lsi_cmd *disconnecting;	/* sent DISCONNECT, ACK pending */
	uint8_t cdb[SCSI_CDB_MAX];
	unsigned int cdb_len, cdb_need;
	uint8_t last_in;	/* SIDL: last byte received */

	struct lsi_target tgt[LSI_MAX_TARGETS];
	struct lsi_cmd *cmds;	/* LSI_MAX_CMDS */
	struct lsi_cmd *free_cmds;
	struct lsi_cmd *resel_head, **resel_tail;
	unsigned int active;
	/* Direct READs [0] and WRITEs [1] accepted and not yet finished, and
	 * the most there were at once (lsi_cmds_peak). */
	unsigned int active_rw[2], peak_rw[2];
	unsigned long aborted_total;	/* by resets and ABORT messages */
	uint8_t *param_mem;	/* LSI_PARAM_BUFS * SCSI_PARAM_MAX */
	uint32_t param_free;	/* bitmap */
	struct blk_queue *q;

	uint8_t ram[LSI_RAM_SIZE];

	unsigned long bus_events;	/* selections, reselections, moves */

	/* Thread. */
	pthread_t thread;
	bool thread_started;
	bool stopping;
	bool io_failed;		/* the backend's io_uring failed: queue dead */
	int kick_fd;
};

#define container_of(p, t, m) ((t *)((char *)(p) - offsetof(t, m)))

/* Calls between the parts of the chip below the SCRIPTS processor; what the
 * processor itself uses of them is in lsi_chip.h. */
/* lsi_irq.c */
void lsi_kick(struct lsi *s);		/* wake the HBA thread */
void lsi_wake(struct lsi *s);		/* an event a wait may be over */
void lsi_scripts_start(struct lsi *s);	/* DSP written: run SCRIPTS */
/* lsi_regfile.c */
void lsi_chip_reset(struct lsi *s);
/* lsi_bus.c */
void lsi_bus_reset(struct lsi *s, const char *why);
/* lsi_dma.c: the data phase of the command on the bus. */
void lsi_seg_done(struct scsi_req *req, int res);
int lsi_dma_direct(struct lsi *s, struct lsi_cmd *c, uint8_t *p,
		   uint32_t *count);
int lsi_dma_param(struct lsi *s, struct lsi_cmd *c, uint8_t *p,
		  uint32_t *count);

static inline uint32_t lsi_get32(const struct lsi *s, unsigned int off)
{
	return (uint32_t)s->regs[off] | (uint32_t)s->regs[off + 1] << 8 |
	       (uint32_t)s->regs[off + 2] << 16 |
	       (uint32_t)s->regs[off + 3] << 24;
}

static inline void lsi_set32(struct lsi *s, unsigned int off, uint32_t v)
{
	s->regs[off] = v;
	s->regs[off + 1] = v >> 8;
	s->regs[off + 2] = v >> 16;
	s->regs[off + 3] = v >> 24;
}

static inline uint32_t lsi_get_dbc(const struct lsi *s)
{
	return lsi_get32(s, LSI_DBC) & 0xffffff;
}

static inline void lsi_set_dbc(struct lsi *s, uint32_t v)
{
	s->regs[LSI_DBC] = v;
	s->regs[LSI_DBC + 1] = v >> 8;
	s->regs[LSI_DBC + 2] = v >> 16;
}

#endif
