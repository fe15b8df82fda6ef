/* Emulated LSI 53C895A PCI SCSI host bus adapter (the sym53c8xx family): its
 * register file, SCRIPTS processor and a SCSI bus with disk targets on it. */
#ifndef IOVM_SCSI_LSI53C895A_H
#define IOVM_SCSI_LSI53C895A_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "block/backend.h"
#include "lib/gmem.h"

#define LSI_MAX_TARGETS 16	/* wide SCSI bus IDs */
#define LSI_HOST_ID 7		/* the HBA's own ID: no target there */

struct lsi;

struct lsi_params {
	const struct gmem *mem;		/* guest RAM, target of all DMA */
	/* INTx level changes (any thread, under the HBA lock). */
	void (*set_irq)(void *opaque, int level);
	void *irq_opaque;
	/* true: SCRIPTS and I/O run on the HBA's own thread (iovm run).
	 * false: nothing runs until lsi_poll (unit tests, fuzzing). */
	bool threaded;
	/* Threaded mode: the longest the thread busy-polls for the next
	 * event before it sleeps (the disks' poll-us=); 0: never. */
	uint64_t spin_ns;
};

struct lsi *lsi_create(const struct lsi_params *p);

/* Puts a disk (LUN 0) at target id; before lsi_start. -EINVAL for the
 * host's ID or an out-of-range one, -EBUSY if taken. */
int lsi_attach(struct lsi *s, unsigned int target, struct blk_backend *be);
/* The disk attached as target (NULL: none), for its setters. */
struct scsi_disk *lsi_target_disk(struct lsi *s, unsigned int target);

/* The disk on be (attached to dev, a struct lsi) changed size
 * (blk_resize): its target answers READ CAPACITY with the new size and
 * gives the initiator a CAPACITY DATA HAS CHANGED unit attention on its
 * next command. The shape of struct api_disk's resized hook. 0, or
 * -ENODEV when no target of dev is on be. */
int lsi_resized(void *dev, struct blk_backend *be);

/* Starts the HBA thread (threaded mode). */
int lsi_start(struct lsi *s);

/* Stops the thread after in-flight I/O finished; frees everything. */
void lsi_destroy(struct lsi *s);

/* Register space (I/O BAR, memory BAR: offset within the BAR) and SCRIPTS
 * RAM (RAM BAR). Any thread; accesses of 1, 2, 4 or 8 bytes. */
void lsi_reg_io(struct lsi *s, uint64_t off, void *data, unsigned int len,
		bool is_write);
void lsi_ram_io(struct lsi *s, uint64_t off, void *data, unsigned int len,
		bool is_write);

/* Where the guest placed the RAM BAR (0: not decoded): SCRIPTS fetches and
 * DMA to that range hit the on-chip RAM, as on the real chip. */
void lsi_set_ram_base(struct lsi *s, uint64_t gpa);
/* Where the memory BAR with the registers is (size bytes; 0: not decoded):
 * memory moves and LOAD/STORE reach the registers there, as on the chip. */
void lsi_set_mmio_base(struct lsi *s, uint64_t gpa, uint64_t size);

/* Unthreaded mode: reaps backend completions (blocking for one if wait and
 * nothing else can progress) and runs SCRIPTS until they stop or wait, at
 * most budget instructions. Returns the number executed. */
long lsi_poll(struct lsi *s, bool wait, long budget);

/* Current INTx level (any thread, lock-free): for the resample after EOI. */
bool lsi_irq_pending(struct lsi *s);

/* Commands accepted and not yet finished (queued, disconnected or on the
 * bus), and backend requests in flight. */
unsigned int lsi_cmds_active(const struct lsi *s);

/* The most direct READ and WRITE commands that were in flight at once
 * (accepted, not yet finished) since lsi_create: how deep the driver's
 * tagged queueing really went. Read after lsi_destroy's drain or from the
 * HBA thread. */
void lsi_cmds_peak(const struct lsi *s, unsigned int *reads, unsigned int *writes);
/* Commands aborted by resets and ABORT messages since lsi_create (same
 * rules as lsi_cmds_peak). */
unsigned long lsi_cmds_aborted(const struct lsi *s);

/* Host memory one command can hold, whatever its transfer length: the
 * per-command state including its iovec array. Data never passes through
 * a host buffer except for the small parameter data of non-READ/WRITE
 * commands (a shared pool of SCSI_PARAM_MAX buffers). */
size_t lsi_cmd_mem_bound(void);

#endif
