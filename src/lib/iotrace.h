/* Per-request I/O trace of the queue threads (meson -Dio_trace=true):
 * timestamped events into a per-thread buffer, dumped to a file when the
 * thread ends, for bench/io-trace.py. Without the option every hook
 * compiles to nothing.
 *
 * Runtime: only threads that call iotrace_thread_start record, and only
 * when the environment has IOVM_IO_TRACE=PREFIX; the buffer holds
 * IOVM_IO_TRACE_EVENTS records (default 4M, 24 bytes each, mapped at
 * start, touched as filled); when full, later events are counted as
 * dropped. iotrace_thread_end writes PREFIX.<pid>.<thread name>.<n> (n
 * counts the process's dumps from 0) and frees the buffer.
 *
 * File format (native endian, x86_64: little): struct iotrace_file_hdr,
 * then nrec struct iotrace_rec in the order recorded (ns never decreases).
 * What each event's id and arg are: enum iotrace_ev. */
#ifndef IOVM_LIB_IOTRACE_H
#define IOVM_LIB_IOTRACE_H

#include <stdbool.h>
#include <stdint.h>

enum iotrace_ev {
	/* virtq_pop took a chain from the avail ring. id: head; arg: bytes
	 * of the chain's larger part (device-readable or -writable), bit 31
	 * set when it is the writable one (a read), saturated. */
	IOT_POP = 1,
	/* The device handed the request to the block queue (virtio-blk:
	 * blkq_rw/flush/discard; virtio-scsi: the SCSI target, which calls
	 * blkq_rw for READ/WRITE). id: head; arg: requests in the one SQE
	 * (virtio-blk's merge group; 1 otherwise). Its SQE reaches the
	 * kernel with the next IOT_ENTER whose arg is not 0. */
	IOT_SUBMIT_Q = 2,
	/* Before an io_uring_enter of the queue. id: IOT_ENTER_SUBMIT
	 * (sends, does not wait), IOT_ENTER_WAIT (sends and sleeps for a
	 * completion) or IOT_ENTER_GETEVENTS (runs task work during a
	 * spin); arg: SQEs it hands to the kernel (all that are queued). */
	IOT_ENTER = 3,
	/* A waiting enter returned. arg: its result (SQEs taken, or a
	 * negative errno as u32). */
	IOT_WAKE = 4,
	/* A non-waiting enter (IOT_ENTER_SUBMIT) returned; arg as WAKE. */
	IOT_ENTER_DONE = 5,
	/* The request's completion was seen (virtio-blk: its CQE, once per
	 * request of a merge group; virtio-scsi: the target completed the
	 * command, right on the CQE of a READ/WRITE). id: head; arg:
	 * requests in its SQE (as SUBMIT_Q). */
	IOT_REAP = 6,
	/* A pass over the completion queue ended (blkq_reap). arg:
	 * completions taken (CQEs, kick/wakeup watches included). */
	IOT_REAP_PASS = 7,
	/* virtq_push wrote the used entry. id: head; arg: bytes written. */
	IOT_PUSH = 8,
	/* virtq_notify sent the driver an interrupt (call eventfd). arg:
	 * used entries since the last virtq_notify call. */
	IOT_NOTIFY = 9,
	/* virtq_notify sent none (event idx or NO_INTERRUPT suppressed it,
	 * or no call fd). arg as NOTIFY. */
	IOT_NOTIFY_SKIPPED = 10,
	/* blkq_spin began busy-polling. arg: its budget in ns. */
	IOT_SPIN_START = 11,
	/* ... and ended. id: IOT_SPIN_CQE (a completion was ready),
	 * IOT_SPIN_MORE (the caller's more(), the avail ring) or
	 * IOT_SPIN_TIMEOUT; arg: loop iterations. */
	IOT_SPIN_END = 12,
};

enum { IOT_ENTER_SUBMIT, IOT_ENTER_WAIT, IOT_ENTER_GETEVENTS };
enum { IOT_SPIN_TIMEOUT, IOT_SPIN_CQE, IOT_SPIN_MORE };

struct iotrace_rec {
	uint64_t ns;		/* CLOCK_MONOTONIC */
	uint32_t id;
	uint32_t arg;
	uint16_t queue;		/* the thread's, from iotrace_thread_start */
	uint8_t ev;		/* enum iotrace_ev */
	uint8_t reserved[5];
};

#define IOTRACE_MAGIC "IOVMTRC1"
#define IOTRACE_VERSION 1

struct iotrace_file_hdr {
	char magic[8];		/* IOTRACE_MAGIC, no NUL */
	uint32_t version;	/* IOTRACE_VERSION */
	uint32_t rec_size;	/* sizeof(struct iotrace_rec): 24 */
	uint64_t nrec;		/* records that follow */
	uint64_t dropped;	/* events not recorded: the buffer was full */
	uint64_t start_ns;	/* iotrace_thread_start, CLOCK_MONOTONIC */
	uint64_t end_ns;	/* iotrace_thread_end */
	uint32_t pid;
	uint16_t queue;
	uint16_t reserved;
	char name[32];		/* the thread's name, NUL-padded */
};

#define IOTRACE_DEFAULT_EVENTS (4u << 20)

#ifdef IOVM_IO_TRACE
struct iotrace_buf;
extern __thread struct iotrace_buf *iotrace_cur;

void iotrace_record(struct iotrace_buf *b, unsigned int ev, uint32_t id,
		    uint32_t arg);

/* Whether this thread records: guards work done only for the trace. */
static inline bool iotrace_on(void)
{
	return __builtin_expect(iotrace_cur != 0, 0);
}

#define iotrace(ev, id, arg)						\
	do {								\
		if (iotrace_on())					\
			iotrace_record(iotrace_cur, (ev), (id), (arg));	\
	} while (0)

/* This thread records from now on if IOVM_IO_TRACE is set (name: for
 * the dump's file name and header; queue: in every record). */
void iotrace_thread_start(const char *name, unsigned int queue);
/* Dumps and frees this thread's buffer (nothing when it has none).
 * Returns 0, or -errno when the file could not be written (logged). */
int iotrace_thread_end(void);
#else
static inline bool iotrace_on(void)
{
	return false;
}

#define iotrace(ev, id, arg) do { } while (0)

static inline void iotrace_thread_start(const char *name, unsigned int queue)
{
}

static inline int iotrace_thread_end(void)
{
	return 0;
}
#endif

#endif
