/* The pure parts of the NBD driver, apart so that unit tests reach them
 * without a server: how a request becomes NBD commands on an export as a
 * connection found it, what changed when a reconnect finds it different,
 * and when a lost connection is tried again or given up on. */
#ifndef IOVM_BLOCK_NBD_PLAN_H
#define IOVM_BLOCK_NBD_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "block/backend.h"

/* Largest command payload when the server names none (and the most iovm
 * sends in one even if it names more): the NBD protocol's advice. */
#define NBD_DEFAULT_MAX_PAYLOAD (32u << 20)
/* Largest TRIM or WRITE_ZEROES command: the protocol's length is 32 bits;
 * a larger range goes as several (1 GiB keeps every piece aligned to any
 * minimum block size, which is at most 64 KiB). */
#define NBD_MAX_RANGE (1ull << 30)

/* An export as one connection's handshake described it. */
struct nbd_export {
	uint64_t size;		/* bytes */
	uint32_t min_block;	/* 1 when the server names none */
	uint64_t max_payload;	/* at most NBD_DEFAULT_MAX_PAYLOAD */
	bool ro, can_flush, can_trim, can_zero, can_fua, multi_conn;
	/* The driver's choice, not the server's: every WRITE and
	 * WRITE_ZEROES goes with FUA, durable once answered (a connection
	 * that lost multi-conn among several: a FLUSH on another one does
	 * not cover its writes). */
	bool fua_writes;
};

/* The commands iovm sends. */
enum nbd_plan_cmd {
	NBD_PLAN_READ,
	NBD_PLAN_WRITE,
	NBD_PLAN_FLUSH,
	NBD_PLAN_TRIM,
	NBD_PLAN_ZERO,
};

/* Command flags, with the NBD protocol's values (libnbd's
 * LIBNBD_CMD_FLAG_* are the same numbers). FAST_ZERO is never sent: see
 * nbd_plan_request. */
#define NBD_PLAN_FLAG_FUA (1u << 0)
#define NBD_PLAN_FLAG_NO_HOLE (1u << 1)

/* A command. A READ's or WRITE's data are at buf, contiguous; or, when
 * buf is NULL, they are the iovecs iov[0..iovcnt) (whole; empty ones may
 * be among them), to gather into one buffer (nbd_plan_commands). */
struct nbd_cmd {
	enum nbd_plan_cmd cmd;
	uint32_t flags;
	void *buf;
	const struct iovec *iov;
	unsigned int iovcnt;
	uint64_t len, off;	/* not FLUSH */
};

/* How scattered buffers are sent: runs of memory-contiguous iovecs shorter
 * than direct bytes that follow one another are copied into one buffer
 * and sent as one command, up to max bytes a command; runs of direct
 * bytes or more go from where they are. max 0: nothing is gathered.
 * direct must not exceed max. */
struct nbd_gather {
	uint64_t direct, max;
};

/* nbd_plan_request's answer when no command is needed (a FLUSH to a server
 * that has no flush: it writes through). */
#define NBD_PLAN_NOTHING 1

/* Plans request op (offset, len; iov for READ/WRITE) on export e and calls
 * send(opaque, cmd) for each command, stopping at the first non-zero
 * return, which it returns. Before sending anything it refuses, with
 * -EOPNOTSUPP, a DISCARD or zeroing the server does not offer and, with
 * -EIO, a request the export as it is now cannot take: past its end, not
 * aligned to its minimum block, or writing to a read-only export (a server
 * that came back different after a reconnect). With e->fua_writes, WRITE
 * and WRITE_ZEROES commands carry FUA. A READ or WRITE goes as
 * nbd_plan_commands plans it with g (its limits cut to the export's
 * maximum payload). Returns 0 once all were sent, or NBD_PLAN_NOTHING. */
int nbd_plan_request(const struct nbd_export *e, enum blk_op op,
		     const struct iovec *iov, unsigned int iovcnt,
		     uint64_t offset, uint64_t len, const struct nbd_gather *g,
		     int (*send)(void *opaque, const struct nbd_cmd *cmd),
		     void *opaque);

/* What differs between two handshakes' views of an export, as bits. */
#define NBD_CHANGED_SIZE 0x1u
#define NBD_CHANGED_RO 0x2u
#define NBD_CHANGED_MIN_BLOCK 0x4u
#define NBD_CHANGED_FEATURES 0x8u	/* flush, trim, zero offered */
#define NBD_CHANGED_MULTI_CONN 0x10u
unsigned int nbd_plan_export_changes(const struct nbd_export *was,
				     const struct nbd_export *now);

/* The NBD driver's choice (bench/RESULTS.md). One NBD command per 4k piece
 * cost the queue thread ~8 us of CPU each and ran 64k requests of sixteen
 * pieces at 0.13-0.25x the IOPS of a copy: short runs are gathered. The
 * command count is what costs, on both ends of the socket: gathering up
 * to 1 MiB a command (as large as the virtio-blk queue's merged runs of
 * 64k requests at QD16) rather than 128 KiB took the probe's 64k
 * sequential reads from 0.76 to 0.95 of QEMU's IOPS and their p99 from
 * ~3 ms to ~0.9 ms; a run of 128 KiB or more costs less as a command of
 * its own than as a copy. */
#define NBD_GATHER_DIRECT (128u << 10)
#define NBD_GATHER_MAX (1024u << 10)

/* Plans a READ or WRITE (cmd, each command with flags) of iov at offset
 * as commands, calling send(opaque, cmd) for each in order, as g says (NULL: one command per
 * run), each at most max bytes; a gathered command that would hold one
 * run only goes from where it is. g->max must not exceed max. Stops at
 * the first non-zero return and returns it, else 0. */
int nbd_plan_commands(enum nbd_plan_cmd cmd, uint32_t flags, const struct iovec *iov,
		      unsigned int iovcnt, uint64_t offset, uint64_t max,
		      const struct nbd_gather *g,
		      int (*send)(void *opaque, const struct nbd_cmd *cmd),
		      void *opaque);

/* Reconnect timing (nanoseconds of a monotonic clock). */
#define NBD_BACKOFF_FIRST_NS 100000000ull	/* 100 ms */
#define NBD_BACKOFF_MAX_NS 2000000000ull	/* 2 s */
/* The longest one connection attempt may take (a host that drops SYNs, a
 * server that accepts and never negotiates) before it is abandoned and
 * counted as failed; shorter when the timeout is. */
#define NBD_ATTEMPT_MAX_NS 10000000000ull	/* 10 s */

struct nbd_reconnect {
	uint64_t timeout_ns;	/* give up on waiting requests after */
	uint64_t backoff_ns;	/* wait before the next attempt */
	uint64_t next_try;	/* time of the next attempt */
	uint64_t down_since;	/* when the server was lost */
	uint64_t attempt_until;	/* while attempting: when to abandon it */
	bool down;
	bool fresh;		/* down because never connected yet */
	bool attempting;	/* a connection is being made */
	/* While up: since when the server has owed replies and sent none
	 * (the last reply, or the time it went from owing nothing to owing);
	 * how many replies had come then. */
	uint64_t quiet_since;
	uint64_t replies_seen;
};

void nbd_rc_init(struct nbd_reconnect *rc, uint64_t timeout_ns);
/* The connection is gone (or, fresh, was never made: try at once). A loss
 * while already down counts as a failed attempt. */
void nbd_rc_lost(struct nbd_reconnect *rc, uint64_t now, bool fresh);
/* An attempt failed: the wait before the next doubles, up to the max. */
void nbd_rc_failed(struct nbd_reconnect *rc, uint64_t now);
/* Whether an attempt is due (none is under way and its time has come). */
bool nbd_rc_try_now(const struct nbd_reconnect *rc, uint64_t now);
/* How long one attempt may take: min(timeout, NBD_ATTEMPT_MAX_NS). */
uint64_t nbd_rc_attempt_ns(const struct nbd_reconnect *rc);
/* An attempt starts; it is due to end nbd_rc_attempt_ns from now. */
void nbd_rc_attempt(struct nbd_reconnect *rc, uint64_t now);
/* Whether the attempt under way has taken too long (abandon it, then
 * nbd_rc_failed). */
bool nbd_rc_attempt_overdue(const struct nbd_reconnect *rc, uint64_t now);
/* Connected: returns whether that ends an outage (not a first connect). */
bool nbd_rc_up(struct nbd_reconnect *rc);
/* Whether the server has been gone for the timeout or longer. */
bool nbd_rc_expired(const struct nbd_reconnect *rc, uint64_t now);
/* Whether a live connection has stalled: it owes replies (owing) and
 * none has come (replies, a running count of them, unchanged) for the
 * timeout. Call on every look at the connection; it notes progress. */
bool nbd_rc_stalled(struct nbd_reconnect *rc, uint64_t now, uint64_t replies,
		    bool owing);
/* When the connection, owing replies and hearing none, counts as stalled. */
uint64_t nbd_rc_stall_due(const struct nbd_reconnect *rc);
/* The stalled connection is dropped: the server counts as gone since it
 * went quiet, so the timeout has already passed (the waiting requests
 * fail, new ones fail at once until a reconnect succeeds); an attempt is
 * due at once. */
void nbd_rc_silent(struct nbd_reconnect *rc, uint64_t now);
/* When something is next due (an attempt, abandoning the one under way,
 * or the timeout), for a timer; now or earlier means at once. */
uint64_t nbd_rc_next_event(const struct nbd_reconnect *rc, uint64_t now);

#endif
