/* virtio-scsi driver (CPL 3): control queue (task management) and one
 * request queue with many commands in flight, completion by polling the
 * used ring or by MSI-X; plus a job engine (qd in flight, sequential or
 * random, verified) for the tests and the benchmark. */
#ifndef PROBE_VIRTIO_SCSI_H
#define PROBE_VIRTIO_SCSI_H

#include "lib/timing.h"
#include "lib/virtio_pci.h"

#define VIRTIO_ID_SCSI 8

#define VSCSI_CDB_SIZE 32
#define VSCSI_SENSE_SIZE 96
#define VSCSI_MAX_SEGS 8
#define VSCSI_MAX_QD 128

/* virtio-scsi response codes */
#define VSCSI_S_OK 0
#define VSCSI_S_OVERRUN 1
#define VSCSI_S_ABORTED 2
#define VSCSI_S_BAD_TARGET 3
#define VSCSI_S_RESET 4
#define VSCSI_S_FAILURE 9
#define VSCSI_S_FUNCTION_SUCCEEDED 10
#define VSCSI_S_FUNCTION_REJECTED 11
#define VSCSI_S_INCORRECT_LUN 12

#define VSCSI_TMF_ABORT_TASK 0
#define VSCSI_TMF_ABORT_TASK_SET 1
#define VSCSI_TMF_I_T_NEXUS_RESET 4
#define VSCSI_TMF_LOGICAL_UNIT_RESET 5
#define VSCSI_TMF_QUERY_TASK 6

struct vscsi_io {
	/* set by the caller */
	uint8_t target;
	uint16_t lun;
	uint64_t tag;
	uint8_t cdb[16];
	uint8_t cdb_len;
	bool data_in;
	unsigned int nseg;
	struct {
		void *p;
		uint32_t len;
	} seg[VSCSI_MAX_SEGS];
	void *user;
	uint64_t disk_off;	/* job engine bookkeeping */
	/* set by the driver */
	uint8_t response, status;
	uint32_t resid, sense_len;
	uint8_t sense[VSCSI_SENSE_SIZE];
	uint32_t written;
	uint64_t t_submit, t_done;
	unsigned int slot;
};

struct vscsi {
	struct virtio_pci vp;
	struct virtq ctrlq, reqq;
	uint32_t num_queues, seg_max, max_sectors, cmd_per_lun;
	uint16_t max_target;
	uint32_t max_lun;
	bool msix, indirect;
	unsigned int inflight;
	struct vscsi_slot *slots;
	unsigned int free_slots[VSCSI_MAX_QD], nfree;
	struct vscsi_io *io_of_head[1024];
	struct vscsi_ctl *ctl;
	uint64_t irqs_seen;
};

/* Opens the index-th virtio-scsi HBA (control queue and the first request
 * queue); prints its configuration. 0 or -1. */
int vscsi_open(struct vscsi *s, unsigned int index, bool msix);
/* Queues io (not yet notified: vscsi_kick). -1 when full. */
int vscsi_submit(struct vscsi *s, struct vscsi_io *io);
void vscsi_kick(struct vscsi *s);
struct vscsi_io *vscsi_reap(struct vscsi *s);
/* Waits for a completion (io_timeout_ms, else the probe fails). */
struct vscsi_io *vscsi_wait(struct vscsi *s);
/* One command, synchronously, on a single data buffer; returns io. */
void vscsi_run(struct vscsi *s, struct vscsi_io *io, unsigned int target,
	       unsigned int lun, const uint8_t *cdb, unsigned int cdb_len,
	       void *buf, uint32_t len, bool data_in);
/* A task management function, synchronously; returns the response. */
uint8_t vscsi_tmf(struct vscsi *s, uint32_t subtype, unsigned int target,
		  unsigned int lun, uint64_t tag);
/* READ(16)/WRITE(16) CDB. */
void vscsi_rw16(uint8_t *cdb, bool write, uint64_t lba, uint32_t blocks);
const char *vscsi_response_name(uint8_t r);

struct vscsi_job {
	const char *name;
	bool write;
	uint32_t bs;
	unsigned int qd;
	bool random;
	uint64_t off, len;	/* region, bytes, multiples of bs */
	uint64_t seed;
	uint64_t max_ticks;	/* 0: one pass over the region */
	bool verify;
	unsigned int target, lun;
	uint32_t block_size;	/* logical block size of the LU */
	uint64_t ios, bytes, ticks;
	struct lat_stats lat;
};

int vscsi_job_init(uint64_t pool_bytes, uint64_t lat_samples);
/* Runs the job; any error or data mismatch fails the probe. */
void vscsi_job_run(struct vscsi *s, struct vscsi_job *j);
void vscsi_job_report(struct vscsi_job *j);

#endif
