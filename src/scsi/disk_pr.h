/* SCSI disk target: persistent reservations (SPC-4 PERSISTENT RESERVE IN/
 * OUT) and SPC-2 RESERVE(6)/RELEASE(6), shared by every process that opens
 * one image through a small state file beside it; what disk_pr.c (the
 * commands and the conflict rules) and disk_prfile.c (the state file) share. */
#ifndef IOVM_SCSI_DISK_PR_H
#define IOVM_SCSI_DISK_PR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RESERVE_6 0x16
#define RELEASE_6 0x17
#define PERSISTENT_RESERVE_IN 0x5e
#define PERSISTENT_RESERVE_OUT 0x5f

/* Most I_T nexuses registered at once, and the longest nexus name (pr-id=,
 * NUL included): READ FULL STATUS of a full table fits SCSI_PARAM_MAX. */
#define PR_MAX_REGS 24
#define PR_ID_MAX 128

/* Reservation types (TYPE of PERSISTENT RESERVE OUT). */
#define PR_WE 1
#define PR_EA 3
#define PR_WE_RO 5
#define PR_EA_RO 6
#define PR_WE_AR 7
#define PR_EA_AR 8

struct pr_reg {
	uint64_t key;
	char id[PR_ID_MAX];	/* the I_T nexus: a process's pr-id */
};

/* One version of the reservation state: what a slot of the state file
 * holds, and each process's private snapshot. Fixed layout (the file is
 * shared by processes of possibly different iovm builds of one version). */
struct pr_state {
	uint64_t seq;		/* the generation this version is */
	uint64_t sum;		/* checksum of what follows */
	uint32_t prgen;		/* SPC's PRgeneration */
	uint32_t nregs;
	uint32_t clear_seq;	/* CLEARs so far: the unit attention a
				 * registrant that lost its key gets */
	uint32_t release_seq;	/* releases that other registrants are told
				 * of (RESERVATIONS RELEASED) */
	uint8_t aptpl;		/* persist through power loss */
	uint8_t type;		/* PR_*, 0: no persistent reservation */
	uint8_t scope;
	uint8_t pad[5];
	char holder[PR_ID_MAX];	/* the reservation's holder (not used by the
				 * all-registrants types) */
	char spc2[PR_ID_MAX];	/* RESERVE(6) holder, "" when none */
	struct pr_reg regs[PR_MAX_REGS];
};

/* What a nexus may not do under the current reservation (the cached
 * decision of a generation). */
#define PR_BLOCK_READ 0x01	/* read-class commands conflict */
#define PR_BLOCK_WRITE 0x02	/* write-class commands conflict */
#define PR_BLOCK_SPC2 0x04	/* RESERVE(6) by another nexus */

enum pr_mode {
	PR_LOCAL,	/* in this process only (pr-state=none, or fallback) */
	PR_PROBE,	/* default file not there yet: looked for now and then,
			 * created by the first PERSISTENT RESERVE OUT */
	PR_FILE,	/* attached to the shared state file */
};

struct disk_pr {
	pthread_mutex_t lock;	/* slow paths of all queue threads */
	char id[PR_ID_MAX];
	char *path;		/* state file; NULL: none */
	bool explicit_path;	/* pr-state=FILE given */
	enum pr_mode mode;
	bool broken;		/* the file turned corrupt: last good state */
	bool warned;
	int fd;
	void *map;		/* the file's mapping, or local memory */
	void *local;		/* local memory (kept: readers may hold it) */
	const uint64_t *genp;	/* the header's committed generation */
	uint64_t cache;		/* gen << 8 | PR_BLOCK_* for this nexus */
	uint64_t next_probe_ns;	/* PR_PROBE: when to look for the file */
	uint8_t ua;		/* pending ASCQ of a 2Ah unit attention */
	struct pr_state cur;	/* snapshot of generation cache >> 8 */
};

/* PR_PROBE looks for the file at most this often (while commands come);
 * a commit waits until the file is at least PRF_SETTLE_NS old, so that
 * every prober has seen it before it matters: a prober that last found no
 * file at time l (its clock read before the look) and does not look at t
 * has t < l + PROBE; the file was made after l, the commit at least SETTLE
 * later, so t came before the commit. Any clock all processes share and
 * that never goes back will do: CLOCK_MONOTONIC_COARSE, 7 ns a read here. */
#define PRF_PROBE_NS 10000000ull
#define PRF_SETTLE_NS 11000000ull

/* disk_prfile.c: the state file. All but prf_gen with pr->lock held. */
/* defer: no system call now; the first command probes. */
int prf_init(struct disk_pr *pr, bool defer, char *err, size_t errlen);
void prf_close(struct disk_pr *pr);
/* PR_PROBE: attaches the file if it exists now. 0, or -errno (corrupt:
 * -EBADMSG) with err set. */
int prf_probe(struct disk_pr *pr, char *err, size_t errlen);
/* PR_PROBE: creates (or attaches) the file for a first write. */
int prf_create(struct disk_pr *pr, char *err, size_t errlen);
/* A consistent copy of the committed state without locking; *gen its
 * generation. -EBADMSG when neither slot holds it intact. */
int prf_snapshot(const struct disk_pr *pr, struct pr_state *st, uint64_t *gen);
/* The committed generation of the current map. */
uint64_t prf_gen(const struct disk_pr *pr);
/* Exclusive access across processes for a read-modify-commit. */
int prf_lock(struct disk_pr *pr);
void prf_unlock(struct disk_pr *pr);
/* Publishes st as generation gen + 1 (prf_lock held). */
void prf_commit(struct disk_pr *pr, struct pr_state *st, uint64_t gen);
uint64_t prf_now_ns(void);
void prf_empty(struct pr_state *st);

/* disk_pr.c */
int pr_find(const struct pr_state *st, const char *id);
uint8_t pr_decide(const struct pr_state *st, const char *id);

#endif
