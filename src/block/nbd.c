/* The NBD block driver: a disk that is an NBD server's export (nbd://,
 * nbds://, nbd+unix:// URIs), through libnbd's asynchronous calls driven
 * from the queue threads' own event loops: no thread of its own.
 *
 * Connections: one per queue when the server offers multi-conn (its
 * caches are then consistent across connections, so a FLUSH on one
 * covers writes completed on any), up to NBD_MAX_CONNS; else one that all
 * queues share. Every libnbd call on a connection is made under its lock;
 * every queue with requests out on it watches its socket through its
 * io_uring, and whichever thread wakes lets libnbd read the replies,
 * completing its own requests at once and posting other queues' to their
 * mailboxes.
 *
 * Scattered guest buffers: libnbd has no scatter-gather call, so a READ or
 * WRITE is sent as several commands, all in flight at once; the request is
 * done when all are. A run of memory-contiguous iovecs of
 * NBD_GATHER_DIRECT or more goes straight from guest memory (split at the
 * server's maximum payload); shorter runs that follow one another are
 * copied into one buffer and go as one command of up to NBD_GATHER_MAX
 * (nbd_plan.h). Measured, this is the exception to "no bounce buffers": a
 * command per 4k page cost several times the copy, and fewer, larger
 * commands beat more, smaller ones. The buffers come from a ring of
 * NBD_RING_BYTES per connection (lib/bufring.h; its memory made when
 * scattered I/O first needs it), all of a request's at once: a request
 * for which the ring has no room now waits, in order, for the replies that
 * free it, and one larger than the ring ever holds gathers into memory
 * made for it alone.
 *
 * Faults: when a connection drops, the requests on it are not failed: they
 * wait and are sent again, whole, on a new connection (reads and writes
 * are idempotent; a FLUSH in flight is sent again too). iovm reconnects
 * after 100 ms, doubling to 2 s between attempts; an attempt that gets no
 * answer (a host that drops SYNs, a server that accepts and never
 * negotiates) is abandoned after min(timeout, 10 s). Once the server has
 * been unreachable for timeout= seconds, the waiting requests fail with
 * EIO and new ones fail at once until a reconnect succeeds. The first
 * connection, at open, gets timeout= seconds and then start-up fails.
 * A server that keeps the connection open but answers nothing (stopped,
 * wedged, a dead peer behind a silent network) counts as gone: once a
 * connection has owed replies and received none for timeout= seconds it
 * is cut, its requests fail with EIO, and a reconnect starts. A slow
 * server whose replies keep coming is never cut, however deep its queue.
 * Errors the server returns on a live connection reach the guest at once.
 *
 * A server that comes back different: each connection plans its commands
 * on the export as its own handshake found it (nbd_plan.c), so a request
 * past the end of an export that shrank, not aligned to a larger minimum
 * block, or writing to an export now read-only fails with EIO without
 * reaching the server; the disk keeps the size the guest was told at open.
 * Each change is logged once. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "block/driver.h"
#include "block/nbd_dial.h"
#include "block/nbd_plan.h"
#include "lib/bufring.h"
#include "lib/clock.h"
#include "lib/iov.h"
#include "lib/log.h"

#define NBD_MAX_CONNS 16
/* A connection's gather ring: room for the gathered data of QD32 of 64k
 * requests, or of one request as large as the virtio-blk queue merges. */
#define NBD_RING_BYTES (4u << 20)
/* read_replies: at most this many notify_read calls in one wakeup, and
 * only a wakeup that finds at least NBD_BATCH_INFLIGHT commands out on the
 * connection makes more than one. */
#define NBD_READ_BATCH 32
#define NBD_BATCH_INFLIGHT 4
/* Watch and timer indexes of a context. */
#define W_READ 0
#define W_WRITE 1
#define W_TIMER 2
#define W_STALL 3

struct nbd_disk;

/* A gathered command's buffer, in its request's gather memory: the
 * command's data and the iovecs a READ's reply is copied to. */
struct nbd_gcmd {
	struct blk_dreq *r;
	const struct iovec *iov;
	unsigned int iovcnt;
	uint64_t len;
	char data[] __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct nbd_gcmd) == 64, "gcmd_size keeps every buffer 64-aligned");

struct nbd_conn {
	pthread_mutex_t lock;
	struct nbd_disk *disk;
	struct nbd_handle *h;		/* NULL while down */
	struct nbd_dial *dial;		/* an attempt still in its lookup */
	bool dial_late;			/* ... one already counted as failed */
	struct nbd_export ex;		/* as h's handshake found it */
	struct nbd_reconnect rc;	/* nbd_plan.h: when to try, give up */
	struct blk_dreq *pending;	/* waiting for a connection */
	struct blk_dreq **pending_tail;
	struct blk_queue *cur;		/* the queue whose thread holds lock */
	uint64_t gen;			/* handles made: fd numbers are reused */
	uint64_t replies;		/* commands whose reply came, all time */
	uint64_t reads;			/* libnbd calls that may have read the
					 * socket (see readable_now) */
	unsigned int users;		/* contexts attached (atomic) */
	struct bufring ring;		/* gather memory */
};

struct nbd_disk {
	char *uri;
	struct nbd_export ex;		/* at open: what the guest was told */
	struct nbd_gather gather;	/* nbd_plan.h; max 0: none */
	uint64_t timeout_ns;
	pthread_mutex_t lock;		/* conns[], nconns, next */
	struct nbd_conn *conns[NBD_MAX_CONNS];
	unsigned int nconns, next;
	struct nbd_handle *first;	/* open()'s connection, for the first */
	pthread_mutex_t seen_lock;	/* seen; taken under no other lock */
	struct nbd_export seen;		/* the export as last logged */
	/* counters (atomic) */
	uint64_t reconnects, retried, failed;
	uint64_t gather_waits;	/* requests that waited for gather room */
};

/* A queue's context: its connection, the requests of its own that the
 * driver holds (atomic: finished from other threads), the handle its
 * socket watches are on. */
struct nbd_ctx {
	struct nbd_conn *c;
	unsigned int owned;
	uint64_t watch_gen;	/* c->gen when its watches were armed */
	uint64_t watch_reads;	/* c->reads when its read watch was armed */
	uint64_t timer_due;	/* when its W_TIMER fires; 0: being cancelled */
};

static struct nbd_conn *conn_of(const struct blk_dreq *r)
{
	return ((struct nbd_ctx *)r->att->ctx)->c;
}

/* r->drv[]: commands of the request still out; its first error; whether a
 * command was lost with its connection (the request goes again); how many
 * of its callbacks ran (see queued()). */
#define R_LEFT 0
#define R_ERR 1
#define R_LOST 2
#define R_DONE 3
#define R_GATHER 4	/* its gather memory (a pointer), or 0 */

/* Connected and negotiated: waiting for commands (ready) or working on
 * some (processing). */
static bool live(struct nbd_handle *h)
{
	return h && (nbd_aio_is_ready(h) == 1 || nbd_aio_is_processing(h) == 1);
}

static struct nbd_handle *new_handle(void)
{
	struct nbd_handle *h = nbd_create();

	/* The URI is the operator's (the command line, which names local
	 * files anyway): let it name a TLS key or certificates (nbds://
	 * ...?tls-psk-file=FILE). */
	if (!h)
		return NULL;
	nbd_set_uri_allow_local_file(h, true);
	/* libnbd zeroes every read buffer before the read by default (so that
	 * a caller that ignores errors cannot leak its heap). iovm reads into
	 * guest memory or a gather buffer of this disk's connection, copies a
	 * gather buffer to the guest only when the read succeeded, and fails
	 * the guest's request on any error: the zeroing only doubled the
	 * memory traffic of every read (perf: memset was as costly as the
	 * gather copies on 64k sequential reads). */
	nbd_set_pread_initialize(h, false);
	/* Simple replies, not structured ones: libnbd 1.14 reads a
	 * structured reply in four recv calls (the header in two parts, the
	 * data chunk's offset, the data) against two for a simple one, and
	 * iovm uses nothing that needs them (no block status, no DF flag;
	 * a read error still comes back as an error, before any data).
	 * Measured (bench/netdisk.sh, nbdkit memory, 4k reads at QD32):
	 * 77-79k IOPS at 9.0-9.6 us of CPU each, against 60-69k at 10.6-12.0.
	 * What a server then sends for a hole is zeroes rather than a hole
	 * chunk: the same bytes a read of data would cost.
	 * IOVM_NBD_STRUCTURED=1 asks for them again, for comparison. */
	if (!getenv("IOVM_NBD_STRUCTURED") || strcmp(getenv("IOVM_NBD_STRUCTURED"), "1"))
		nbd_set_request_structured_replies(h, false);
	return h;
}

/* The handle's view of the export, after its handshake. */
static void read_export(struct nbd_handle *h, struct nbd_export *e)
{
	int64_t size = nbd_get_size(h);
	int64_t min = nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
	int64_t max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);

	*e = (struct nbd_export){
		.size = size > 0 ? (uint64_t)size : 0,
		.min_block = min > 0 ? (uint32_t)min : 1,
		.max_payload = max > 0 && (uint64_t)max < NBD_DEFAULT_MAX_PAYLOAD ?
			       (uint64_t)max : NBD_DEFAULT_MAX_PAYLOAD,
		.ro = nbd_is_read_only(h) == 1,
		.can_flush = nbd_can_flush(h) == 1,
		.can_trim = nbd_can_trim(h) == 1,
		.can_zero = nbd_can_zero(h) == 1,
		.can_fua = nbd_can_fua(h) == 1,
		.multi_conn = nbd_can_multi_conn(h) == 1,
	};
}

static int open_fail(char *err, size_t errlen, const char *uri,
		     const char *what, int ret)
{
	snprintf(err, errlen, "%s: %s: %s", uri, what, nbd_get_error() ?
		 nbd_get_error() : strerror(-ret));
	return ret;
}

static int libnbd_err(void)
{
	return nbd_get_errno() ? -nbd_get_errno() : -EIO;
}

/* How often a queue with requests waiting looks at a dial (nbd_dial.h). */
#define NBD_DIAL_POLL_NS 10000000ull	/* 10 ms */

/* Connects *hp to uri within secs seconds. nbd_connect_uri has no bound of
 * its own: a host that drops SYNs or a server that accepts and never
 * negotiates would hold start-up for ever, and a name server that does
 * not answer would hold it in the host name's lookup (nbd_dial.h). *hp is
 * NULL if that lookup is still going: the dial closes the handle. */
static int connect_within(struct nbd_handle **hp, const char *uri,
			  unsigned int secs, char *err, size_t errlen)
{
	uint64_t until = mono_ns() + secs * 1000000000ull;
	struct nbd_handle *h = *hp;
	struct nbd_dial *dl;
	char why[256];

	if (!strncmp(uri, "nbds", 4) && !nbd_supports_tls(h)) {
		snprintf(err, errlen, "%s: cannot connect: this libnbd has no TLS support", uri);
		return -ENOTSUP;
	}
	if (nbd_dial_resolves(uri) && (dl = nbd_dial_start(h, uri))) {
		if (!nbd_dial_wait(dl, secs)) {
			nbd_dial_drop(dl);
			*hp = NULL;
			snprintf(err, errlen, "%s: cannot connect: the host name's lookup did not end within %u s (timeout=)",
				 uri, secs);
			return -ETIMEDOUT;
		}
		if (nbd_dial_take(dl, hp, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s: cannot connect: %s", uri, why);
			return -ECONNREFUSED;
		}
	} else if (nbd_aio_connect_uri(h, uri) < 0) {
		return open_fail(err, errlen, uri, "cannot connect", libnbd_err());
	}
	while (nbd_aio_is_connecting(h) == 1) {
		uint64_t now = mono_ns(), ms;

		if (now >= until) {
			snprintf(err, errlen, "%s: cannot connect: no answer from the NBD server within %u s (timeout=)",
				 uri, secs);
			return -ETIMEDOUT;
		}
		ms = (until - now + 999999) / 1000000;
		if (nbd_poll(h, ms > INT32_MAX ? INT32_MAX : (int)ms) < 0)
			return open_fail(err, errlen, uri, "cannot connect", libnbd_err());
	}
	if (nbd_aio_is_ready(h) != 1) {
		snprintf(err, errlen, "%s: cannot connect: %s", uri, nbd_get_error() ?
			 nbd_get_error() : "the server ended the handshake");
		return -ECONNREFUSED;
	}
	return 0;
}

static int nbd_open_disk(struct blk_backend *be, const struct disk_cfg *cfg,
			 char *err, size_t errlen)
{
	struct nbd_disk *d = calloc(1, sizeof(*d));
	struct nbd_handle *h = new_handle();
	unsigned int secs = cfg->timeout_set ? cfg->timeout_s : CONFIG_NBD_TIMEOUT_DEFAULT;
	uint64_t hash = 0xcbf29ce484222325ull;
	uint32_t bs;
	int64_t pref;
	int ret = -EIO;

	if (!d || !h || !(d->uri = strdup(cfg->path))) {
		ret = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", cfg->path);
		goto fail;
	}
	ret = connect_within(&h, cfg->path, secs, err, errlen);
	if (ret)
		goto fail;
	read_export(h, &d->ex);
	/* A server's minimum block size up to 4 KiB becomes the disk's
	 * logical block size, so that guests send only what it takes. */
	bs = d->ex.min_block <= 512 ? 512 : d->ex.min_block;
	ret = -EINVAL;
	if (bs > 4096) {
		snprintf(err, errlen, "%s: the export's minimum block size %" PRIu32 " is more than 4096 bytes",
			 cfg->path, bs);
		goto fail;
	}
	if (d->ex.size < bs || d->ex.size % bs) {
		snprintf(err, errlen, "%s: export size %" PRIu64 " is not a positive multiple of %" PRIu32 " bytes",
			 cfg->path, d->ex.size, bs);
		goto fail;
	}
	if (d->ex.ro && !cfg->ro) {
		snprintf(err, errlen, "%s: the NBD server exports it read-only; add ro", cfg->path);
		ret = -EROFS;
		goto fail;
	}
	d->seen = d->ex;
	d->gather = (struct nbd_gather){ NBD_GATHER_DIRECT, NBD_GATHER_MAX };
	/* for bench/netdisk.sh's comparison with one command per run */
	if (getenv("IOVM_NBD_GATHER") && !strcmp(getenv("IOVM_NBD_GATHER"), "0"))
		d->gather = (struct nbd_gather){ 0, 0 };
	d->timeout_ns = secs * 1000000000ull;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->seen_lock, NULL);
	d->first = h;
	pref = nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED);
	be->size = d->ex.size;
	be->block_size = bs;
	be->phys_block_size = pref >= 4096 ? 4096 : bs;
	be->ro = cfg->ro;
	be->discard_ok = d->ex.can_trim;
	be->discard_zeroes = false;	/* a trim need not read back zeroes */
	/* a held stream goes as one gathered command (bench/RESULTS.md);
	 * IOVM_NBD_HOLD=0 sends each group at once, for comparison */
	be->stream_hold = d->gather.max;
	if (getenv("IOVM_NBD_HOLD") && !strcmp(getenv("IOVM_NBD_HOLD"), "0"))
		be->stream_hold = 0;
	for (const char *p = cfg->path; *p; p++)
		hash = (hash ^ (uint8_t)*p) * 0x100000001b3ull;
	snprintf(be->serial, sizeof(be->serial), "iovm%016" PRIx64, hash);
	be->path = strdup(cfg->path);
	be->priv = d;
	return 0;
fail:
	nbd_close(h);
	if (d)
		free(d->uri);
	free(d);
	return ret;
}

static void conn_free(struct nbd_conn *c)
{
	if (c->dial)
		nbd_dial_drop(c->dial);
	nbd_close(c->h);
	bufring_destroy(&c->ring);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void nbd_close_disk(struct blk_backend *be)
{
	struct nbd_disk *d = be->priv;

	for (unsigned int i = 0; i < d->nconns; i++)
		conn_free(d->conns[i]);
	nbd_close(d->first);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->seen_lock);
	if (d->reconnects || d->retried || d->failed || d->gather_waits)
		pr_info("%s: NBD reconnects=%" PRIu64 " requests resent=%" PRIu64
			" failed=%" PRIu64 " waited for gather memory=%" PRIu64, d->uri,
			d->reconnects, d->retried, d->failed, d->gather_waits);
	free(d->uri);
	free(d);
}

static void cut(struct nbd_conn *c);

/* A FLUSH on c's live connection, waited for at most the timeout: a
 * server that answers nothing then (stopped, wedged) gets its connection
 * cut rather than holding iovm's exit for ever (nbd_flush has no bound).
 * Replies to other commands that come meanwhile are completed as usual. */
static int flush_within(struct nbd_conn *c)
{
	uint64_t until = mono_ns() + c->disk->timeout_ns;
	int64_t cookie = nbd_aio_flush(c->h, NBD_NULL_COMPLETION, 0);

	if (cookie < 0)
		return libnbd_err();
	for (;;) {
		uint64_t now = mono_ns(), ms;
		int done = nbd_aio_command_completed(c->h, cookie);

		if (done == 1)
			return 0;
		if (done < 0)
			return libnbd_err();
		if (now >= until)
			break;
		ms = (until - now + 999999) / 1000000;
		c->reads++;
		if (nbd_poll(c->h, ms > INT32_MAX ? INT32_MAX : (int)ms) < 0)
			return libnbd_err();
	}
	pr_warn_rated("%s: the NBD server did not answer a FLUSH within %" PRIu64
		      " s (timeout=); dropping the connection", c->disk->uri,
		      c->disk->timeout_ns / 1000000000u);
	cut(c);
	nbd_rc_lost(&c->rc, mono_ns(), false);
	return -EIO;
}

/* blk_flush, at shutdown or a client's departure once the queues are
 * drained: on every connection the queues wrote through (without
 * multi-conn, a flush on another connection would not cover them). */
static int nbd_flush_disk(struct blk_backend *be)
{
	struct nbd_disk *d = be->priv;
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	for (unsigned int i = 0; i < d->nconns; i++) {
		struct nbd_conn *c = d->conns[i];

		pthread_mutex_lock(&c->lock);
		c->cur = NULL;
		if (live(c->h)) {
			/* a server without flush writes through */
			int r = c->ex.can_flush ? flush_within(c) : 0;

			if (r && !ret)
				ret = r;
		} else if (c->rc.down && !c->rc.fresh && !ret) {
			/* writes it completed before it dropped cannot be
			 * flushed from here */
			ret = -EIO;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static struct nbd_conn *conn_new(struct nbd_disk *d, struct nbd_handle *h)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->disk = d;
	c->h = h;
	if (h)
		c->ex = d->ex;	/* open()'s handle */
	c->pending_tail = &c->pending;
	bufring_init(&c->ring, NBD_RING_BYTES);
	/* Without a handle the first attempt is due now. */
	nbd_rc_init(&c->rc, d->timeout_ns);
	if (!h)
		nbd_rc_lost(&c->rc, mono_ns(), true);
	return c;
}

static int nbd_attach(struct blk_att *att)
{
	struct nbd_disk *d = att->be->priv;
	struct nbd_ctx *x = calloc(1, sizeof(*x));
	struct nbd_conn *c = NULL;

	if (!x)
		return -ENOMEM;

	pthread_mutex_lock(&d->lock);
	if (d->first || (d->ex.multi_conn && d->nconns < NBD_MAX_CONNS) || !d->nconns) {
		c = conn_new(d, d->first);
		if (c) {
			d->first = NULL;
			d->conns[d->nconns++] = c;
		}
	} else {
		c = d->conns[d->next++ % d->nconns];
	}
	if (c)
		__atomic_add_fetch(&c->users, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
	if (!c) {
		free(x);
		return -ENOMEM;
	}
	/* x->watch_gen stays 0, unread: arm() sets it under c->lock
	 * before it arms a watch and compares it only while one is armed. */
	x->c = c;
	att->ctx = x;
	return 0;
}

static void pend(struct nbd_conn *c, struct blk_dreq *r)
{
	r->next = NULL;
	*c->pending_tail = r;
	c->pending_tail = &r->next;
}

/* Completes r to its queue: directly when that is the running thread's. */
static void finish(struct nbd_conn *c, struct blk_dreq *r, int res)
{
	struct nbd_ctx *x = r->att->ctx;

	if (r->att->q == c->cur)
		blkq_dreq_done(r, res);
	else
		blkq_dreq_done_remote(r, res);
	/* after the hand-over: detach waits for this count */
	__atomic_sub_fetch(&x->owned, 1, __ATOMIC_RELEASE);
}

/* Gives r's gather memory back (conn lock held). */
static void gather_release(struct nbd_conn *c, struct blk_dreq *r)
{
	void *p = (void *)(uintptr_t)r->drv[R_GATHER];

	if (!p)
		return;
	r->drv[R_GATHER] = 0;
	if (bufring_owns(&c->ring, p))
		bufring_free(&c->ring, p);
	else
		free(p);
}

static bool conn_error(int e)
{
	return e == ENOTCONN || e == ECONNRESET || e == EPIPE || e == ESHUTDOWN ||
	       e == ECONNABORTED || e == EBADF;
}

/* One of r's commands ended (error: its errno, 0 for success), or, from
 * send_req, the hold on it was dropped. Conn lock held. */
static void command_done(struct blk_dreq *r, int *error)
{
	struct nbd_conn *c = conn_of(r);

	r->drv[R_DONE]++;
	if (*error) {
		if (conn_error(*error))
			r->drv[R_LOST] = 1;
		else if (!r->drv[R_ERR])
			r->drv[R_ERR] = (uint64_t)*error;
	}
	if (--r->drv[R_LEFT])
		return;
	gather_release(c, r);
	if (r->drv[R_LOST]) {
		/* sent again, whole, once there is a connection */
		__atomic_add_fetch(&c->disk->retried, 1, __ATOMIC_RELAXED);
		pend(c, r);
		return;
	}
	if (r->drv[R_ERR])
		finish(c, r, -(int)r->drv[R_ERR]);
	else
		finish(c, r, r->op == BLK_OP_READ || r->op == BLK_OP_WRITE ? (int)r->len : 0);
}

/* A command's reply (libnbd's thread of the moment, conn lock held). No
 * libnbd call here: the handle's lock is held. libnbd retires the
 * commands of a connection that dies with ENOTCONN. */
static int on_reply(void *user_data, int *error)
{
	struct blk_dreq *r = user_data;

	conn_of(r)->replies++;
	command_done(r, error);
	return 1;
}

_Static_assert(NBD_PLAN_FLAG_NO_HOLE == LIBNBD_CMD_FLAG_NO_HOLE &&
	       NBD_PLAN_FLAG_FUA == LIBNBD_CMD_FLAG_FUA,
	       "nbd_plan's flags are the protocol's, as libnbd's are");

struct send_ctx {
	struct nbd_conn *c;
	struct blk_dreq *r;
	char *next;		/* the next gathered command's buffer */
};

/* Whether cmd is a READ or WRITE whose data are to be gathered. */
static bool gathered(const struct nbd_cmd *cmd)
{
	return (cmd->cmd == NBD_PLAN_READ || cmd->cmd == NBD_PLAN_WRITE) && !cmd->buf;
}

/* Bytes of gather memory a gathered command of len bytes takes. */
static uint64_t gcmd_size(uint64_t len)
{
	return sizeof(struct nbd_gcmd) + (len + 63) / 64 * 64;
}

/* nbd_plan_request's send in a dry run: adds up the gather memory. */
static int count_gather(void *opaque, const struct nbd_cmd *cmd)
{
	uint64_t *need = opaque;

	if (gathered(cmd))
		*need += gcmd_size(cmd->len);
	return 0;
}

/* Makes the gather memory r's commands on c need, all at once, into
 * r->drv[R_GATHER] (0 when r gathers nothing). Returns 0, -ENOMEM, or
 * -EAGAIN when the ring has no room now: r waits for the replies that
 * make some. A request that needs more than the ring can ever give gets
 * memory of its own. */
static int gather_reserve(struct nbd_conn *c, struct blk_dreq *r)
{
	uint64_t need = 0;
	void *p = NULL;

	r->drv[R_GATHER] = 0;
	if (r->iovcnt < 2 || !c->disk->gather.max ||
	    (r->op != BLK_OP_READ && r->op != BLK_OP_WRITE))
		return 0;
	nbd_plan_request(&c->ex, r->op, r->iov, r->iovcnt, r->offset, r->len,
			 &c->disk->gather, count_gather, &need);
	if (!need)
		return 0;
	if (need <= bufring_max(&c->ring)) {
		p = bufring_alloc(&c->ring, need);
		/* an empty ring has room: then its memory could not be made */
		if (!p && c->ring.live)
			return -EAGAIN;
	}
	if (!p)
		p = aligned_alloc(64, need);	/* need: a multiple of 64 */
	if (!p)
		return -ENOMEM;
	r->drv[R_GATHER] = (uint64_t)(uintptr_t)p;
	return 0;
}

/* A gathered command's reply: a READ's data go to the guest's iovecs
 * (conn lock held, as in on_reply). */
static int on_gather_reply(void *user_data, int *error)
{
	struct nbd_gcmd *g = user_data;

	if (g->r->op == BLK_OP_READ && !*error)
		iov_from_buf(g->iov, g->iovcnt, 0, g->data, g->len);
	return on_reply(g->r, error);
}

/* Whether a command whose nbd_aio_* call returned -1 was queued all the
 * same. libnbd 1.14 queues a command before it runs its state machine to
 * send it; when that run fails (the server went away under the write),
 * the handle dies and retires every queued command, running its callback
 * with ENOTCONN, and the call still returns -1. So if any callback of r
 * ran during the call, the machine died and this command's ran too (it
 * is accounted for); if none did, it was never queued. done is
 * r->drv[R_DONE] from before the call. (Counting it twice left R_LEFT
 * wrapped and the request waiting for ever: seen in netdisk-tcg
 * nbd-restart.) */
static bool queued(const struct blk_dreq *r, uint64_t done)
{
	return r->drv[R_DONE] != done;
}

/* A READ or WRITE command of scattered iovecs, through its slice of the
 * request's gather memory. */
static int send_gathered(struct send_ctx *s, const struct nbd_cmd *cmd)
{
	nbd_completion_callback cb = { .callback = on_gather_reply };
	struct nbd_gcmd *g = (struct nbd_gcmd *)s->next;
	uint64_t done;
	int64_t cookie;

	s->next += gcmd_size(cmd->len);
	*g = (struct nbd_gcmd){ .r = s->r, .iov = cmd->iov, .iovcnt = cmd->iovcnt,
				.len = cmd->len };
	cb.user_data = g;
	done = s->r->drv[R_DONE];
	s->r->drv[R_LEFT]++;
	if (cmd->cmd == NBD_PLAN_READ) {
		cookie = nbd_aio_pread(s->c->h, g->data, cmd->len, cmd->off, cb, 0);
	} else {
		iov_to_buf(cmd->iov, cmd->iovcnt, 0, g->data, cmd->len);
		cookie = nbd_aio_pwrite(s->c->h, g->data, cmd->len, cmd->off, cb,
					cmd->flags);
	}
	if (cookie < 0) {
		int ret = libnbd_err();

		if (!queued(s->r, done))
			s->r->drv[R_LEFT]--;
		return ret;
	}
	return 0;
}

/* One command of a request (nbd_plan_request's send). */
static int send_cmd(void *opaque, const struct nbd_cmd *cmd)
{
	struct send_ctx *s = opaque;
	struct nbd_handle *h = s->c->h;
	nbd_completion_callback cb = { .callback = on_reply, .user_data = s->r };
	uint64_t done = s->r->drv[R_DONE];
	int64_t cookie = -1;

	if (gathered(cmd))
		return send_gathered(s, cmd);
	s->r->drv[R_LEFT]++;
	switch (cmd->cmd) {
	case NBD_PLAN_READ:
		cookie = nbd_aio_pread(h, cmd->buf, cmd->len, cmd->off, cb, 0);
		break;
	case NBD_PLAN_WRITE:
		cookie = nbd_aio_pwrite(h, cmd->buf, cmd->len, cmd->off, cb, cmd->flags);
		break;
	case NBD_PLAN_FLUSH:
		cookie = nbd_aio_flush(h, cb, 0);
		break;
	case NBD_PLAN_TRIM:
		cookie = nbd_aio_trim(h, cmd->len, cmd->off, cb, 0);
		break;
	case NBD_PLAN_ZERO:
		cookie = nbd_aio_zero(h, cmd->len, cmd->off, cb, cmd->flags);
		break;
	}
	if (cookie < 0) {
		int ret = libnbd_err();

		if (!queued(s->r, done))
			s->r->drv[R_LEFT]--;
		return ret;
	}
	return 0;
}

/* Sends r on c's ready connection, planned on the export as that
 * connection found it. r is finished here if nothing went out, or handed
 * back to pending if the connection died meanwhile. Returns false, having
 * done nothing, when r must wait for room in the gather ring. */
static bool send_req(struct nbd_conn *c, struct blk_dreq *r)
{
	int ret = gather_reserve(c, r), none = 0;
	struct send_ctx s = { c, r, (char *)(uintptr_t)r->drv[R_GATHER] };

	if (ret == -EAGAIN)
		return false;
	/* Not counted in c->reads: libnbd's nbd_aio_* calls queue a command
	 * and, from READY, run its state machine only to send it (the
	 * request, then a WRITE's payload), back to READY or blocked in a
	 * send state until notified; only notify_read (or nbd_poll) makes it
	 * read, and those are counted. Counting sends made readable_now poll
	 * the socket on nearly every reply at depth: 0.69 poll calls per I/O
	 * on 64k sequential writes. */
	r->drv[R_LEFT] = 1;	/* held until all are sent */
	r->drv[R_ERR] = 0;
	r->drv[R_LOST] = 0;
	r->drv[R_DONE] = 0;
	if (!ret)
		ret = nbd_plan_request(&c->ex, r->op, r->iov, r->iovcnt, r->offset, r->len,
				       &c->disk->gather, send_cmd, &s);
	if (ret == NBD_PLAN_NOTHING)
		ret = 0;
	if (ret && (conn_error(-ret) || !live(c->h))) {
		r->drv[R_LOST] = 1;	/* the connection went: again later */
	} else if (ret && !r->drv[R_ERR]) {
		r->drv[R_ERR] = (uint64_t)-ret;
	}
	/* drop the hold: this finishes it if nothing is out */
	command_done(r, &none);
	return true;
}

/* Makes c's handle die now, with its commands, and closes it: the socket
 * is shut down and libnbd, told it is readable, reads its end and retires
 * every command with ENOTCONN, so that each comes back to on_reply as
 * lost (nbd_close alone would free them without a callback: their
 * requests would never finish). The caller records the loss in c->rc. */
static void cut(struct nbd_conn *c)
{
	int fd = nbd_aio_get_fd(c->h);

	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	c->reads++;
	nbd_aio_notify_read(c->h);
	if (live(c->h))	/* a state that was not reading: it writes */
		nbd_aio_notify_write(c->h);
	if (live(c->h))
		pr_warn_rated("%s: NBD connection would not close", c->disk->uri);
	nbd_close(c->h);
	c->h = NULL;
}

/* Cuts c's live connection if it has owed replies and received none for
 * the timeout: a server stopped, wedged or behind a dead network. The
 * requests come back lost and, the server counting as gone since it went
 * quiet, fail at once (expire). */
static void drop_if_stalled(struct nbd_conn *c, uint64_t now)
{
	int64_t owed;

	if (!live(c->h))
		return;
	owed = nbd_aio_in_flight(c->h);
	if (!nbd_rc_stalled(&c->rc, now, c->replies, owed > 0))
		return;
	pr_warn_rated("%s: the NBD server has answered none of %" PRId64
		      " commands for %" PRIu64 " s (timeout=); dropping the connection",
		      c->disk->uri, owed, c->disk->timeout_ns / 1000000000u);
	cut(c);
	nbd_rc_silent(&c->rc, now);
}

/* Drops c's handle if it died, if its handshake failed, or if the attempt
 * to connect has taken too long. */
static void drop_bad_handle(struct nbd_conn *c, uint64_t now)
{
	struct nbd_disk *d = c->disk;
	const char *why = nbd_get_error() ? nbd_get_error() : "closed";

	if (!c->h || live(c->h))
		return;
	if (nbd_aio_is_connecting(c->h) == 1) {
		if (!nbd_rc_attempt_overdue(&c->rc, now))
			return;
		pr_warn_rated("%s: no answer from the NBD server within %" PRIu64 " s; trying again",
			      d->uri, nbd_rc_attempt_ns(&c->rc) / 1000000000u);
		nbd_close(c->h);
		c->h = NULL;
		nbd_rc_failed(&c->rc, now);
		return;
	}
	if (c->rc.attempting) {
		pr_warn_rated("%s: NBD reconnect failed (%s)", d->uri, why);
		nbd_close(c->h);
		c->h = NULL;
		nbd_rc_failed(&c->rc, now);
		return;
	}
	pr_warn_rated("%s: NBD connection lost (%s); reconnecting", d->uri, why);
	nbd_close(c->h);	/* its commands were retired: lost */
	c->h = NULL;
	nbd_rc_lost(&c->rc, now, false);
}

/* Takes the handle of c's dial once its lookup is done; counts an attempt
 * whose lookup outlasts the attempt's bound as failed, and lets the next
 * one start only once that lookup is over (one lookup thread at a time). */
static void collect_dial(struct nbd_conn *c, uint64_t now)
{
	struct nbd_handle *h;
	char why[256];
	bool ok;

	if (!c->dial)
		return;
	if (!nbd_dial_done(c->dial)) {
		if (!c->dial_late && nbd_rc_attempt_overdue(&c->rc, now)) {
			pr_warn_rated("%s: the host name's lookup did not end within %" PRIu64
				      " s; trying again once it does", c->disk->uri,
				      nbd_rc_attempt_ns(&c->rc) / 1000000000u);
			nbd_rc_failed(&c->rc, now);
			c->dial_late = true;
		}
		return;
	}
	ok = nbd_dial_take(c->dial, &h, why, sizeof(why)) == 0;
	c->dial = NULL;
	if (c->dial_late) {
		/* an attempt already given up on: its handle is not used */
		nbd_close(h);
	} else if (ok) {
		c->h = h;
		c->gen++;
		c->reads++;
	} else {
		nbd_close(h);
		pr_warn_rated("%s: NBD reconnect failed (%s)", c->disk->uri, why);
		nbd_rc_failed(&c->rc, now);
	}
	c->dial_late = false;
}

/* Starts a connection if one is due; returns whether it made a handle
 * (a dial on its own thread makes none yet: collect_dial takes it). */
static bool try_connect(struct nbd_conn *c, uint64_t now)
{
	struct nbd_handle *h;

	if (c->h || c->dial || !nbd_rc_try_now(&c->rc, now))
		return false;
	if (nbd_dial_resolves(c->disk->uri) && (h = new_handle())) {
		if ((c->dial = nbd_dial_start(h, c->disk->uri))) {
			nbd_rc_attempt(&c->rc, now);
			return false;
		}
		nbd_close(h);	/* no thread for it: connect from here */
	}
	c->h = new_handle();
	c->gen++;
	c->reads++;
	if (c->h && nbd_aio_connect_uri(c->h, c->disk->uri) == 0) {
		nbd_rc_attempt(&c->rc, now);
		return true;
	}
	pr_warn_rated("%s: NBD reconnect failed (%s)", c->disk->uri,
		      nbd_get_error() ? nbd_get_error() : "out of memory");
	nbd_close(c->h);
	c->h = NULL;
	nbd_rc_failed(&c->rc, now);
	return false;
}

/* Logs, once per change, that an export came back different from how it
 * was last seen, and what that does to requests. */
static void report_changes(struct nbd_conn *c)
{
	struct nbd_disk *d = c->disk;
	const struct nbd_export *now = &c->ex;
	struct nbd_export was;
	unsigned int ch;
	char msg[512];
	int n = 0;

	pthread_mutex_lock(&d->seen_lock);
	was = d->seen;
	ch = nbd_plan_export_changes(&was, now);
	d->seen = *now;
	pthread_mutex_unlock(&d->seen_lock);
	if (!ch)
		return;
	if (ch & NBD_CHANGED_SIZE)
		n += snprintf(msg + n, sizeof(msg) - n, "; size %" PRIu64 " -> %" PRIu64 " bytes%s",
			      was.size, now->size, now->size < d->ex.size ?
			      " (requests past its end fail with EIO)" : "");
	if ((ch & NBD_CHANGED_RO) && n < (int)sizeof(msg))
		n += snprintf(msg + n, sizeof(msg) - n, "; %s", now->ro ?
			      "now read-only (writes fail with EIO)" : "writable again");
	if ((ch & NBD_CHANGED_MIN_BLOCK) && n < (int)sizeof(msg))
		n += snprintf(msg + n, sizeof(msg) - n, "; minimum block %" PRIu32 " -> %" PRIu32
			      " bytes (requests not aligned to it fail with EIO)",
			      was.min_block, now->min_block);
	if ((ch & NBD_CHANGED_FEATURES) && n < (int)sizeof(msg))
		n += snprintf(msg + n, sizeof(msg) - n,
			      "; flush %s, trim %s, zero %s (what it lacks is unsupported)",
			      now->can_flush ? "yes" : "no", now->can_trim ? "yes" : "no",
			      now->can_zero ? "yes" : "no");
	if ((ch & NBD_CHANGED_MULTI_CONN) && n < (int)sizeof(msg))
		snprintf(msg + n, sizeof(msg) - n, "; multi-conn %s", now->multi_conn ? "offered" :
			 now->can_fua ? "no longer offered (writes go with FUA, so that a FLUSH "
					"on any connection still covers them)" :
					"no longer offered, and no FUA (a FLUSH covers the writes "
					"of its own queue's connection only)");
	pr_warn("%s: the NBD export changed%s", d->uri, msg);
}

/* c's handle finished its handshake: the end of an outage (or a first
 * connect); the export is read again, it may have changed. */
static void came_up(struct nbd_conn *c)
{
	if (!c->rc.down)
		return;
	read_export(c->h, &c->ex);
	/* A disk opened with multi-conn runs a connection per queue, and a
	 * FLUSH goes on its own queue's only. If the server stopped offering
	 * multi-conn, that FLUSH no longer covers writes answered on the
	 * others: this connection then writes with FUA (each write durable
	 * once answered), so whatever connection a FLUSH goes on, every
	 * write answered before it is covered. */
	c->ex.fua_writes = c->disk->ex.multi_conn && !c->ex.multi_conn && c->ex.can_fua;
	report_changes(c);
	/* the stall clock starts afresh: nothing is owed yet */
	nbd_rc_stalled(&c->rc, mono_ns(), c->replies, false);
	if (nbd_rc_up(&c->rc)) {
		__atomic_add_fetch(&c->disk->reconnects, 1, __ATOMIC_RELAXED);
		pr_warn_rated("%s: NBD connection back", c->disk->uri);
	}
}

/* Sends the waiting requests, in order, each once: one that comes back
 * (its connection failed while it went out) waits for the next pass, not
 * for this loop; once one must wait for gather room, it and all after it
 * wait. */
static void resend(struct nbd_conn *c)
{
	struct blk_dreq *r = c->pending, *next;

	c->pending = NULL;
	c->pending_tail = &c->pending;
	for (; r; r = next) {
		next = r->next;
		if (!live(c->h) || !send_req(c, r)) {
			*c->pending_tail = r;	/* r and the rest, linked */
			while (*c->pending_tail)
				c->pending_tail = &(*c->pending_tail)->next;
			return;
		}
	}
}

/* Fails the waiting requests once the server has been away too long. */
static void expire(struct nbd_conn *c, uint64_t now)
{
	struct nbd_disk *d = c->disk;
	unsigned int n = 0;

	if (!nbd_rc_expired(&c->rc, now) || !c->pending)
		return;
	while (c->pending) {
		struct blk_dreq *r = c->pending;

		c->pending = r->next;
		finish(c, r, -EIO);
		n++;
	}
	c->pending_tail = &c->pending;
	__atomic_add_fetch(&d->failed, n, __ATOMIC_RELAXED);
	pr_warn_rated("%s: NBD server unreachable for %" PRIu64 " s: %u requests failed",
		      d->uri, d->timeout_ns / 1000000000u, n);
}

/* The connection's state machine (under c->lock): notices a dead or
 * stalled handle, starts, bounds and finishes reconnects, resends waiting
 * requests, fails them once the server has been gone past the timeout. */
static void service(struct nbd_conn *c)
{
	uint64_t now = mono_ns();

	drop_if_stalled(c, now);
	collect_dial(c, now);
	drop_bad_handle(c, now);
	if (try_connect(c, now))
		drop_bad_handle(c, now);	/* refused at once */
	if (live(c->h)) {
		came_up(c);
		resend(c);
		return;
	}
	expire(c, now);
}

/* Arms att's socket watches while it has requests out or the connection
 * has commands of any queue in flight, its timer while the server is
 * away and it has requests waiting, and its stall timer while it has
 * requests out on a live connection (armed once per timeout, not per
 * request: when it fires early it is armed again for the new due time). Called with c->lock held, last thing
 * after every libnbd call: on a shared connection the thread that just
 * moved libnbd's state may be the only one that sees it now wants to
 * write (another queue's commands waiting for the socket); if that thread
 * stopped watching because its own requests were done, nobody would send
 * them and they would wait for ever. */
static void arm(struct blk_att *att, struct nbd_conn *c)
{
	struct nbd_ctx *x = att->ctx;
	uint64_t now, due;

	if (!att->inflight && !(c->h && nbd_aio_in_flight(c->h) > 0))
		return;
	if (c->h && nbd_aio_get_fd(c->h) >= 0) {
		int fd = nbd_aio_get_fd(c->h);
		unsigned int dir = nbd_aio_get_direction(c->h);

		/* Watches still on a socket of an old connection are
		 * cancelled; their -ECANCELED event arms the new one. */
		if (x->watch_gen != c->gen &&
		    (blkq_armed(att, W_READ) || blkq_armed(att, W_WRITE))) {
			blkq_disarm(att, W_READ);
			blkq_disarm(att, W_WRITE);
			return;
		}
		x->watch_gen = c->gen;

		if (!blkq_armed(att, W_READ)) {
			x->watch_reads = c->reads;
			blkq_watch(att, W_READ, fd, POLLIN);
		}
		if ((dir & LIBNBD_AIO_DIRECTION_WRITE) && !blkq_armed(att, W_WRITE))
			blkq_watch(att, W_WRITE, fd, POLLOUT);
	}
	if (att->inflight && !live(c->h)) {
		now = mono_ns();
		due = nbd_rc_next_event(&c->rc, now);
		if (c->dial && due > now + NBD_DIAL_POLL_NS)
			due = now + NBD_DIAL_POLL_NS;
		if (due <= now)
			due = now + 1000000;
		if (!blkq_armed(att, W_TIMER)) {
			x->timer_due = due;
			blkq_timer(att, W_TIMER, due - now);
		} else if (x->timer_due && due + 1000000 < x->timer_due) {
			/* Armed for later than now needed (for the bound on a
			 * connection attempt, when the connection then came up
			 * and has just died): cancelled, its -ECANCELED event
			 * arms it for now. Waiting for it delayed a reconnect
			 * by up to NBD_ATTEMPT_MAX_NS (block-nbd-live
			 * multi_conn_lost took 10 s). */
			x->timer_due = 0;
			blkq_disarm(att, W_TIMER);
		}
	}
	if (att->inflight && live(c->h) && !blkq_armed(att, W_STALL)) {
		now = mono_ns();
		due = nbd_rc_stall_due(&c->rc);
		blkq_timer(att, W_STALL, due > now ? due - now : 1000000);
	}
}

static void lock_conn(struct nbd_conn *c, struct blk_att *att)
{
	pthread_mutex_lock(&c->lock);
	c->cur = att->q;
}

static void unlock_conn(struct nbd_conn *c)
{
	c->cur = NULL;
	pthread_mutex_unlock(&c->lock);
}

static int nbd_submit(struct blk_att *att, struct blk_dreq *r)
{
	struct nbd_ctx *x = att->ctx;
	struct nbd_conn *c = x->c;
	struct nbd_disk *d = c->disk;
	int ret = 0;

	/* What the server offers (flush, trim, zero) is checked when the
	 * request goes out, on that connection's export (send_req). */
	lock_conn(c, att);
	service(c);
	if (c->h && nbd_aio_is_connecting(c->h) && nbd_rc_expired(&c->rc, mono_ns())) {
		/* Past the timeout no request waits, so no watch drives a
		 * reconnect: the requests that keep failing do, without
		 * blocking (a few steps of the handshake each). */
		for (int i = 0; i < 16 && nbd_aio_is_connecting(c->h) &&
				(c->reads++, nbd_poll(c->h, 0) > 0); i++)
			;
		service(c);
	}
	__atomic_add_fetch(&x->owned, 1, __ATOMIC_RELAXED);
	if (!live(c->h) && nbd_rc_expired(&c->rc, mono_ns()))
		ret = -EIO;	/* gone past the timeout: fail fast */
	else if (!live(c->h))
		pend(c, r);	/* waits for a connection */
	else if (c->pending || !send_req(c, r)) {
		pend(c, r);	/* waits for gather room, behind any waiting */
		__atomic_add_fetch(&d->gather_waits, 1, __ATOMIC_RELAXED);
	}
	if (!ret)
		arm(att, c);
	else
		__atomic_sub_fetch(&x->owned, 1, __ATOMIC_RELAXED);
	unlock_conn(c);
	if (ret)
		__atomic_add_fetch(&d->failed, 1, __ATOMIC_RELAXED);
	return ret;
}

/* Whether c's socket has data (or a hang-up) to read now. libnbd 1.14
 * must not be told the socket is readable when it is not: it then starts
 * a reply and waits in it (from READY, or pausing a command half sent),
 * and commands not yet on the wire stay there until a reply comes; with
 * none outstanding, none ever does. A watch that fired is not enough:
 * on a shared connection every queue's watch fires for the same data and
 * the first thread to take the lock reads it all; alone on a connection,
 * a watch armed during the handshake fires for data that libnbd read by
 * itself when it read the next reply straight after sending an option
 * (seen: netdisk-tcg nbd-restart hung, one request on the wire, about one
 * run in five). One poll of the socket per wakeup, under the lock, unless
 * nothing has run libnbd's state machine since the watch was armed. */
/* What one poll of c's socket for reading finds now: its revents, 0 for
 * nothing (or no socket). */
static short socket_events(struct nbd_conn *c)
{
	struct pollfd p = { .fd = nbd_aio_get_fd(c->h), .events = POLLIN };

	return p.fd >= 0 && poll(&p, 1, 0) > 0 ? p.revents : 0;
}

static bool readable_now(struct nbd_conn *c, const struct nbd_ctx *x, int res)
{
	/* Nothing has let libnbd near the socket since this watch was armed
	 * (c->reads counts every call that runs its state machine), so what
	 * the watch saw is still there: no poll. The common case (sends do
	 * not count, send_req), where it saves a system call per wakeup. */
	if ((res & (POLLIN | POLLHUP | POLLERR)) && c->reads == x->watch_reads)
		return true;
	return socket_events(c) != 0;
}

/* Whether more of a reply is waiting on c's socket now. */
static bool more_replies(struct nbd_conn *c)
{
	if (!live(c->h) || nbd_aio_in_flight(c->h) <= 0 ||
	    !(nbd_aio_get_direction(c->h) & LIBNBD_AIO_DIRECTION_READ))
		return false;
	return socket_events(c) & POLLIN;
}

/* libnbd reads at most one reply per notify_read on a plain socket (or
 * the rest of one that had not all arrived) and goes back to READY. With
 * many commands out the next replies are usually on the socket already:
 * reading them in this turn, up to NBD_READ_BATCH, completes them
 * together (one used-ring update and one interrupt for the lot) instead
 * of one io_uring poll, wakeup and interrupt each. A poll of the socket
 * says whether one is there (see readable_now: libnbd must never be told
 * the socket is readable when it is not); a wakeup that finds fewer than
 * NBD_BATCH_INFLIGHT commands out, where the next reply is rarely there
 * yet, makes no such poll, nor does one on a TLS connection: bytes on the
 * socket there may be part of a TLS record that gnutls cannot decrypt
 * yet, and libnbd 1.14, having started a reply from READY on them, would
 * wait in it. Measured: bench/RESULTS.md, issue 17, "NBD replies read in
 * batches". */
static void read_replies(struct nbd_conn *c)
{
	bool deep = nbd_aio_in_flight(c->h) >= NBD_BATCH_INFLIGHT &&
		    nbd_get_tls_negotiated(c->h) != 1;
	unsigned int n = 0;

	do {
		c->reads++;
		nbd_aio_notify_read(c->h);	/* -1: service() sees it */
	} while (deep && ++n < NBD_READ_BATCH && more_replies(c));
}

static void nbd_event(struct blk_att *att, unsigned int idx, int res)
{
	struct nbd_ctx *x = att->ctx;
	struct nbd_conn *c = x->c;

	lock_conn(c, att);
	if (idx != W_TIMER && x->watch_gen != c->gen) {
		/* A watch on the socket of a handle since closed: arm()
		 * cancelled it (-ECANCELED) or it fired first. Its result is
		 * not the new socket's; arm() below watches that one. */
	} else if (res < 0) {
		/* -ECANCELED here is not ours (the queue aborting) */
		if (res != -ECANCELED)
			pr_warn_rated("%s: NBD socket watch failed: %s", c->disk->uri,
				      strerror(-res));
	} else if (c->h && idx == W_READ) {
		if (readable_now(c, x, res))
			read_replies(c);
	} else if (c->h && idx == W_WRITE) {
		c->reads++;
		nbd_aio_notify_write(c->h);
	}
	service(c);
	arm(att, c);
	unlock_conn(c);
}

static void nbd_detach(struct blk_att *att)
{
	struct nbd_ctx *x = att->ctx;
	struct nbd_conn *c = x->c;
	struct nbd_disk *d = c->disk;
	struct blk_dreq **pp, *last = NULL;
	uint64_t until = mono_ns() + d->timeout_ns;

	/* Only after blkq_abort can att still own requests here: those
	 * waiting for a connection fail now; those on the wire are driven
	 * to their replies here (for at most the timeout), so that nothing
	 * completes into this queue once it is gone. */
	lock_conn(c, att);
	c->cur = NULL;		/* every completion goes to a mailbox */
	for (pp = &c->pending; *pp;) {
		if ((*pp)->att == att) {
			struct blk_dreq *r = *pp;

			*pp = r->next;
			finish(c, r, -EIO);
		} else {
			last = *pp;
			pp = &last->next;
		}
	}
	c->pending_tail = last ? &last->next : &c->pending;
	while (__atomic_load_n(&x->owned, __ATOMIC_ACQUIRE) && live(c->h) &&
	       mono_ns() < until) {
		c->reads++;
		nbd_poll(c->h, 100);
	}
	if (__atomic_load_n(&x->owned, __ATOMIC_ACQUIRE)) {
		/* a server that will not answer: cutting the connection
		 * retires its commands (they come back as lost, to pending;
		 * other queues' are sent again on a new connection) */
		if (c->h) {
			cut(c);
			nbd_rc_lost(&c->rc, mono_ns(), false);
		}
		for (pp = &c->pending; *pp;) {
			struct blk_dreq *r = *pp;

			if (r->att != att) {
				pp = &r->next;
				continue;
			}
			*pp = r->next;
			finish(c, r, -EIO);
		}
		c->pending_tail = &c->pending;
		while (*c->pending_tail)
			c->pending_tail = &(*c->pending_tail)->next;
	}
	unlock_conn(c);
	pthread_mutex_lock(&d->lock);
	__atomic_sub_fetch(&c->users, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
	free(x);
	att->ctx = NULL;
}

const struct blk_driver blk_nbd_driver = {
	.name = "nbd",
	.open = nbd_open_disk,
	.close = nbd_close_disk,
	.flush = nbd_flush_disk,
	.attach = nbd_attach,
	.submit = nbd_submit,
	.event = nbd_event,
	.detach = nbd_detach,
};
