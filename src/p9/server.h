/* 9P2000.L server for one host folder. A transport (virtio-9p queue, stream
 * socket) owns a session per mount/connection and hands each request to the
 * server as scatter-gather buffers: the request's readable iovecs and the
 * reply's writable iovecs. Read, write and readdir payloads move straight
 * between the host file and those iovecs. Every call is thread-safe, so a
 * transport may serve one session's requests on several threads. */
#ifndef IOVM_P9_SERVER_H
#define IOVM_P9_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct p9_server;
struct p9_session;

/* Fids per session by default: P9_FIDS_TOTAL shared equally by the
 * sessions a server plans for, at least P9_MIN_SESSION_FIDS and at most
 * P9_MAX_SESSION_FIDS each. */
#define P9_FIDS_TOTAL (1u << 20)
#define P9_MIN_SESSION_FIDS 256
#define P9_MAX_SESSION_FIDS 65536
/* Bytes of extended-attribute values a session may hold (between
 * Txattrwalk/Txattrcreate and the clunk) by default: likewise a share of
 * P9_XATTR_TOTAL, from one largest value (64 KiB) to 1 MiB. */
#define P9_XATTR_TOTAL (256u << 20)
#define P9_MIN_SESSION_XATTR (64u << 10)
#define P9_MAX_SESSION_XATTR (1u << 20)

struct p9_limits {
	uint32_t max_fids;	/* fids per session (0: see P9_FIDS_TOTAL) */
	uint32_t max_open;	/* opened fids (files, dirs) per session */
	uint32_t max_pending;	/* requests in flight per session */
	/* Host descriptors per session: walked paths (O_PATH), open files
	 * and the few a request holds while it runs. Default: an equal
	 * share (1/max_sessions) of the process's 9P budget. */
	uint32_t max_fds;
	uint32_t xattr_budget;	/* bytes of xattr values held per session
				 * (0: see P9_XATTR_TOTAL) */
};

/* Every 9P server of the process together holds at most the soft
 * RLIMIT_NOFILE less a reserve for the rest of the process (the VMM's
 * disks, eventfds, io_uring, sockets): an eighth of the limit, at least
 * P9_FD_RESERVE, at most half; a request past it fails with ENFILE. */
#define P9_FD_RESERVE 1024
/* Fewer descriptors than this per session is a setup error. */
#define P9_MIN_SESSION_FDS 64

/* How the guest's owners and modes reach the host (QEMU's virtfs
 * security_model names). */
enum p9_security {
	/* The host object stays the server's, with mode 0600 (0700 for a
	 * folder); the guest's uid, gid, mode and, for mknod, file type
	 * and rdev are kept in user.virtfs.{uid,gid,mode,rdev} xattrs and
	 * are what getattr and readdir report. The default. */
	P9_SEC_MAPPED_XATTR,
	/* The host object stays the server's; modes apply without setuid
	 * (and setgid but on folders); chown is accepted and ignored. */
	P9_SEC_NONE,
	/* Owners (when the server runs as root) and modes go to the host as
	 * given, setuid included: a client can make setuid-root files. */
	P9_SEC_PASSTHROUGH,
};

struct p9_server_cfg {
	const char *path;	/* the exported folder */
	bool ro;
	enum p9_security security;
	/* Sessions this server may have at once (0: 1), each with an equal
	 * share of the budget; and descriptors the caller needs for itself
	 * beyond the reserve (9p-serve: a socket per connection). */
	unsigned int max_sessions;
	unsigned int fd_reserve;
	uint32_t msize;		/* largest msize accepted */
	struct p9_limits lim;	/* zero fields take defaults */
};

/* Opens the export. On failure returns -errno and writes a one-line reason
 * to err (openat2 missing, folder not found, no /proc, a descriptor limit
 * too low for max_sessions). */
int p9_server_open(const struct p9_server_cfg *cfg, struct p9_server **out,
		   char *err, size_t errlen);
void p9_server_close(struct p9_server *srv);

struct p9_session *p9_session_new(struct p9_server *srv);
/* Clunks every fid; no request may be in flight. */
void p9_session_free(struct p9_session *s);
/* Negotiated msize (the server's limit until Tversion). */
uint32_t p9_session_msize(struct p9_session *s);

/* Per-request state owned by the transport (embed it in the transport's
 * request slot): links the request into the session's in-flight list so
 * Tflush can wait for it. */
struct p9_req {
	struct p9_req *prev, *next;
	uint64_t seq;
	/* The header as read once from the request at p9_req_begin: the
	 * request memory may be guest memory that changes under us, so
	 * every later decision (worker or poller, size checks, dispatch)
	 * uses this copy and p9_handle refuses a message whose body no
	 * longer matches it. */
	uint32_t size;
	uint8_t type;
	bool hdr_ok;		/* the header was complete */
	uint16_t tag;
	bool tracked;		/* counted in the in-flight list */
	/* Set by the transport after p9_req_begin: a Tread is tried with
	 * RWF_NOWAIT, and if its data is not all in the page cache
	 * p9_handle returns 0 with again set, replying nothing, so that
	 * the transport can serve the request again (nowait cleared) on a
	 * thread that may block. */
	bool nowait;
	bool again;
	uint8_t small[128];	/* decode buffer for small requests */
};

/* Called in arrival order, on the thread that receives requests, before
 * the request is handed to a worker: registers it as in flight. */
void p9_req_begin(struct p9_session *s, struct p9_req *r,
		  const struct iovec *in, unsigned int nin);

/* Serves the request in in[0..nin) (the whole message, size[4] first;
 * the same iovecs given to p9_req_begin) and
 * writes the reply into out[0..nout). The arrays themselves may be
 * modified (not the memory they describe). Returns the reply length, or 0
 * when out cannot hold even an Rlerror. */
size_t p9_handle(struct p9_session *s, struct p9_req *r, struct iovec *in,
		 unsigned int nin, struct iovec *out, unsigned int nout);

/* Whether the request r (after p9_req_begin) may take long: it moves file
 * data, syncs, or waits for other requests (read, write, readdir, fsync,
 * setattr, lock, flush). Transports hand those to worker threads and may
 * serve the rest (walk, getattr, clunk, create, ...) on the receiving
 * thread, which saves a thread hand-off on the metadata path. It looks at
 * the type p9_req_begin recorded, the same one p9_handle dispatches on. */
bool p9_req_may_block(const struct p9_req *r);

/* Most bytes the reply to request r (after p9_req_begin, in[0..nin) its
 * message) can take, never above msize: count plus the Rread header for
 * Tread/Treaddir, a small bound for every other reply (a readlink target
 * and an echoed getlock client id included). Transports that allocate
 * reply buffers size them with this rather than msize. */
size_t p9_reply_room(struct p9_session *s, const struct p9_req *r,
		     const struct iovec *in, unsigned int nin);

/* Called once the reply has been delivered (pushed, sent). */
void p9_req_end(struct p9_session *s, struct p9_req *r);

/* begin + handle + end, for serial callers (tests, fuzzers). */
size_t p9_call(struct p9_session *s, struct iovec *in, unsigned int nin,
	       struct iovec *out, unsigned int nout);

/* Counters, for tests and statistics. */
struct p9_stats {
	uint32_t fids;
	uint32_t open;
	uint32_t pending;
	uint32_t nodes;		/* server-wide */
	uint32_t fds;		/* this session's host descriptors */
	uint32_t max_fds;	/* its budget */
};
void p9_session_stats(struct p9_session *s, struct p9_stats *st);

/* A server's statistics, every session together, for the control socket.
 * Requests of one server run on many threads at once (workers, sessions),
 * so no one thread owns the counters: they are relaxed atomic additions
 * (one per request, beside the request's own system calls), read with
 * relaxed atomic loads, never under a lock. */
#define P9_STAT_TYPES 128	/* T-messages by type / 2 */
struct p9_server_stats {
	uint64_t ops[P9_STAT_TYPES];	/* requests answered, by type / 2 */
	uint64_t errors;		/* answered with Rlerror */
	uint64_t bytes_read;		/* Rread payloads */
	uint64_t bytes_written;		/* Twrite payloads written */
	uint64_t fids;			/* now, every session */
	uint64_t open;			/* opened fids now */
};
void p9_server_stats(struct p9_server *srv, struct p9_server_stats *st);

#endif
