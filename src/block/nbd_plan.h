/* The pure parts of the NBD driver, apart so that unit tests reach them
 * without a server: how a request's iovecs become NBD commands, and when
 * a lost connection is tried again or given up on. */
#ifndef IOVM_BLOCK_NBD_PLAN_H
#define IOVM_BLOCK_NBD_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/* Largest command payload when the server names none (and the most iovm
 * sends in one even if it names more): the NBD protocol's advice. */
#define NBD_DEFAULT_MAX_PAYLOAD (32u << 20)

/* Calls send(opaque, buf, len, off) for each command of a READ or WRITE
 * of iov at offset: one per run of iovecs contiguous in memory, split at
 * max bytes; empty iovecs are skipped. Stops at the first non-zero return
 * and returns it, else 0. */
int nbd_plan_segments(const struct iovec *iov, unsigned int iovcnt,
		      uint64_t offset, uint64_t max,
		      int (*send)(void *opaque, void *buf, uint64_t len,
				  uint64_t off),
		      void *opaque);

/* Scattered buffers: runs of iovecs shorter than this that follow one
 * another are copied into one buffer and sent as one command, up to this
 * many bytes a command (nbd.c: NBD_BOUNCE_BUFS such buffers a connection
 * at most). One NBD command per 4k piece cost the queue thread ~8 us of
 * CPU each and ran 64k requests of sixteen pieces at 0.13-0.25x the IOPS
 * of a copy (bench/RESULTS.md); a copy of 128 KiB costs less than two
 * commands. */
#define NBD_GATHER_MAX (128u << 10)

/* A command of a READ or WRITE at off of len bytes: the data are at buf,
 * contiguous; or, when buf is NULL, they are the iovecs iov[0..iovcnt)
 * (whole; empty ones may be among them), to gather into one buffer. */
struct nbd_cmd {
	void *buf;
	const struct iovec *iov;
	unsigned int iovcnt;
	uint64_t len, off;
};

/* Plans a READ or WRITE of iov at offset as commands, calling
 * send(opaque, cmd) for each in order: a run of memory-contiguous iovecs
 * of gather bytes or more goes from where it is (split at max bytes);
 * shorter runs that follow one another go gathered, up to gather bytes a
 * command, unless a gathered command would hold one run only (then it goes
 * from where it is). gather 0: nothing is gathered (nbd_plan_segments).
 * gather must not exceed max. Stops at the first non-zero return and
 * returns it, else 0. */
int nbd_plan_commands(const struct iovec *iov, unsigned int iovcnt,
		      uint64_t offset, uint64_t max, uint64_t gather,
		      int (*send)(void *opaque, const struct nbd_cmd *cmd),
		      void *opaque);

/* Reconnect timing (nanoseconds of a monotonic clock). */
#define NBD_BACKOFF_FIRST_NS 100000000ull	/* 100 ms */
#define NBD_BACKOFF_MAX_NS 2000000000ull	/* 2 s */

struct nbd_reconnect {
	uint64_t timeout_ns;	/* give up on waiting requests after */
	uint64_t backoff_ns;	/* wait before the next attempt */
	uint64_t next_try;	/* time of the next attempt */
	uint64_t down_since;	/* when the server was lost */
	bool down;
	bool fresh;		/* down because never connected yet */
};

void nbd_rc_init(struct nbd_reconnect *rc, uint64_t timeout_ns);
/* The connection is gone (or, fresh, was never made: try at once). A loss
 * while already down counts as a failed attempt. */
void nbd_rc_lost(struct nbd_reconnect *rc, uint64_t now, bool fresh);
/* An attempt failed: the wait before the next doubles, up to the max. */
void nbd_rc_failed(struct nbd_reconnect *rc, uint64_t now);
/* Whether an attempt is due. */
bool nbd_rc_try_now(const struct nbd_reconnect *rc, uint64_t now);
/* Connected: returns whether that ends an outage (not a first connect). */
bool nbd_rc_up(struct nbd_reconnect *rc);
/* Whether the server has been gone for the timeout or longer. */
bool nbd_rc_expired(const struct nbd_reconnect *rc, uint64_t now);
/* When something is next due (an attempt, or the timeout), for a timer;
 * now or earlier means at once. */
uint64_t nbd_rc_next_event(const struct nbd_reconnect *rc, uint64_t now);

#endif
