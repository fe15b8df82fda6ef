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
 * WRITE is sent as one command per run of memory-contiguous iovecs (split
 * at the server's maximum payload), all in flight at once; the request is
 * done when all are. No copy, no bounce buffer: Linux's virtio drivers
 * send 4k I/O as one segment and 64k as a few, and a command costs the
 * server a 28-byte header.
 *
 * Faults: when a connection drops, the requests on it are not failed: they
 * wait and are sent again, whole, on a new connection (reads and writes
 * are idempotent; a FLUSH in flight is sent again too). iovm reconnects
 * after 100 ms, doubling to 2 s between attempts; once the server has been
 * unreachable for timeout= seconds, the waiting requests fail with EIO and
 * new ones fail at once until a reconnect succeeds. Errors the server
 * returns on a live connection reach the guest at once. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "block/driver.h"
#include "block/nbd_plan.h"
#include "lib/clock.h"
#include "lib/log.h"

#define NBD_MAX_CONNS 16
/* Watch and timer indexes of a context. */
#define W_READ 0
#define W_WRITE 1
#define W_TIMER 2

struct nbd_disk;

struct nbd_conn {
	pthread_mutex_t lock;
	struct nbd_disk *disk;
	struct nbd_handle *h;		/* NULL while down */
	struct nbd_reconnect rc;	/* nbd_plan.h: when to try, give up */
	struct blk_dreq *pending;	/* waiting for a connection */
	struct blk_dreq **pending_tail;
	struct blk_queue *cur;		/* the queue whose thread holds lock */
	uint64_t gen;			/* handles made: fd numbers are reused */
	unsigned int users;		/* contexts attached (atomic) */
};

struct nbd_disk {
	char *uri;
	uint64_t max_payload;
	bool can_flush, can_trim, can_zero, can_fast_zero, multi_conn;
	uint64_t timeout_ns;
	pthread_mutex_t lock;		/* conns[], nconns, next */
	struct nbd_conn *conns[NBD_MAX_CONNS];
	unsigned int nconns, next;
	struct nbd_handle *first;	/* open()'s connection, for the first */
	/* counters (atomic) */
	uint64_t reconnects, retried, failed;
};

/* A queue's context: its connection, the requests of its own that the
 * driver holds (atomic: finished from other threads), the fd its socket
 * watches are on. */
struct nbd_ctx {
	struct nbd_conn *c;
	unsigned int owned;
	uint64_t watch_gen;	/* the handle its socket watches are on */
};

static struct nbd_conn *conn_of(const struct blk_dreq *r)
{
	return ((struct nbd_ctx *)r->att->ctx)->c;
}

/* r->drv[]: commands of the request still out; its first error; whether a
 * command was lost with its connection (the request goes again). */
#define R_LEFT 0
#define R_ERR 1
#define R_LOST 2

/* Connected and negotiated: waiting for commands (ready) or working on
 * some (processing). */
static bool live(struct nbd_handle *h)
{
	return h && (nbd_aio_is_ready(h) == 1 || nbd_aio_is_processing(h) == 1);
}

static struct nbd_handle *new_handle(void)
{
	struct nbd_handle *h = nbd_create();

	if (h)
		nbd_set_uri_allow_local_file(h, false);
	return h;
}

static int open_fail(char *err, size_t errlen, const char *uri,
		     const char *what, int ret)
{
	snprintf(err, errlen, "%s: %s: %s", uri, what, nbd_get_error() ?
		 nbd_get_error() : strerror(-ret));
	return ret;
}

static int nbd_open_disk(struct blk_backend *be, const struct disk_cfg *cfg,
			 char *err, size_t errlen)
{
	struct nbd_disk *d = calloc(1, sizeof(*d));
	struct nbd_handle *h = new_handle();
	uint64_t hash = 0xcbf29ce484222325ull;
	int64_t size, pref;
	int ret = -EIO;

	if (!d || !h || !(d->uri = strdup(cfg->path))) {
		ret = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", cfg->path);
		goto fail;
	}
	if (nbd_connect_uri(h, cfg->path) < 0) {
		int e = nbd_get_errno();

		ret = open_fail(err, errlen, cfg->path, "cannot connect", e ? -e : -EIO);
		goto fail;
	}
	size = nbd_get_size(h);
	if (size < 512 || size % 512) {
		snprintf(err, errlen, "%s: export size %" PRId64 " is not a positive multiple of 512 bytes",
			 cfg->path, size);
		ret = -EINVAL;
		goto fail;
	}
	if (nbd_is_read_only(h) == 1 && !cfg->ro) {
		snprintf(err, errlen, "%s: the NBD server exports it read-only; add ro", cfg->path);
		ret = -EROFS;
		goto fail;
	}
	d->can_flush = nbd_can_flush(h) == 1;
	d->can_trim = nbd_can_trim(h) == 1;
	d->can_zero = nbd_can_zero(h) == 1;
	d->can_fast_zero = nbd_can_fast_zero(h) == 1;
	d->multi_conn = nbd_can_multi_conn(h) == 1;
	d->max_payload = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM) > 0 ?
			 (uint64_t)nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM) :
			 NBD_DEFAULT_MAX_PAYLOAD;
	if (d->max_payload > NBD_DEFAULT_MAX_PAYLOAD)
		d->max_payload = NBD_DEFAULT_MAX_PAYLOAD;
	d->timeout_ns = (uint64_t)(cfg->timeout_set ? cfg->timeout_s :
				   CONFIG_NBD_TIMEOUT_DEFAULT) * 1000000000ull;
	pthread_mutex_init(&d->lock, NULL);
	d->first = h;
	pref = nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED);
	be->size = (uint64_t)size;
	be->block_size = 512;
	be->phys_block_size = pref == 4096 ? 4096 : 512;
	be->ro = cfg->ro;
	be->discard_ok = d->can_trim;
	be->discard_zeroes = false;	/* a trim need not read back zeroes */
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
	nbd_close(c->h);
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
	if (d->reconnects || d->retried || d->failed)
		pr_info("%s: NBD reconnects=%" PRIu64 " requests resent=%" PRIu64
			" failed=%" PRIu64, d->uri, d->reconnects, d->retried, d->failed);
	free(d->uri);
	free(d);
}

/* blk_flush, at shutdown or a client's departure once the queues are
 * drained: on every connection the queues wrote through (without
 * multi-conn, a flush on another connection would not cover them). */
static int nbd_flush_disk(struct blk_backend *be)
{
	struct nbd_disk *d = be->priv;
	int ret = 0;

	if (!d->can_flush)
		return 0;
	pthread_mutex_lock(&d->lock);
	for (unsigned int i = 0; i < d->nconns; i++) {
		struct nbd_conn *c = d->conns[i];

		pthread_mutex_lock(&c->lock);
		c->cur = NULL;
		if (live(c->h)) {
			if (nbd_flush(c->h, 0) < 0 && !ret)
				ret = nbd_get_errno() ? -nbd_get_errno() : -EIO;
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
	c->pending_tail = &c->pending;
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
	if (d->first || (d->multi_conn && d->nconns < NBD_MAX_CONNS) || !d->nconns) {
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
	x->c = c;
	x->watch_gen = c->gen;
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

static bool conn_error(int e)
{
	return e == ENOTCONN || e == ECONNRESET || e == EPIPE || e == ESHUTDOWN ||
	       e == ECONNABORTED || e == EBADF;
}

/* A command's reply (libnbd's thread of the moment, conn lock held). */
static int on_reply(void *user_data, int *error)
{
	struct blk_dreq *r = user_data;
	struct nbd_conn *c = conn_of(r);

	/* No libnbd call here: the handle's lock is held. libnbd retires
	 * the commands of a connection that dies with ENOTCONN. */
	if (*error) {
		if (conn_error(*error))
			r->drv[R_LOST] = 1;
		else if (!r->drv[R_ERR])
			r->drv[R_ERR] = (uint64_t)*error;
	}
	if (--r->drv[R_LEFT])
		return 1;
	if (r->drv[R_LOST]) {
		/* sent again, whole, once there is a connection */
		__atomic_add_fetch(&c->disk->retried, 1, __ATOMIC_RELAXED);
		pend(c, r);
		return 1;
	}
	if (r->drv[R_ERR])
		finish(c, r, -(int)r->drv[R_ERR]);
	else
		finish(c, r, r->op == BLK_OP_READ || r->op == BLK_OP_WRITE ? (int)r->len : 0);
	return 1;
}

struct send_ctx {
	struct nbd_conn *c;
	struct blk_dreq *r;
};

static int send_one(void *opaque, void *buf, uint64_t len, uint64_t off)
{
	struct send_ctx *s = opaque;
	nbd_completion_callback cb = { .callback = on_reply, .user_data = s->r };
	int64_t cookie;

	s->r->drv[R_LEFT]++;
	if (s->r->op == BLK_OP_READ)
		cookie = nbd_aio_pread(s->c->h, buf, len, off, cb, 0);
	else
		cookie = nbd_aio_pwrite(s->c->h, buf, len, off, cb, 0);
	if (cookie < 0) {
		s->r->drv[R_LEFT]--;
		return -(nbd_get_errno() ? nbd_get_errno() : EIO);
	}
	return 0;
}

/* Sends r on c's ready connection. Returns 0 when every command went out
 * (or r was handed back to pending, the connection having died). */
static int send_req(struct nbd_conn *c, struct blk_dreq *r)
{
	struct nbd_disk *d = c->disk;
	nbd_completion_callback cb = { .callback = on_reply, .user_data = r };
	struct send_ctx s = { c, r };
	int64_t cookie = 0;
	int ret = 0, none = 0;

	r->drv[R_LEFT] = 1;	/* held until all are sent */
	r->drv[R_ERR] = 0;
	r->drv[R_LOST] = 0;
	switch (r->op) {
	case BLK_OP_READ:
	case BLK_OP_WRITE:
		ret = nbd_plan_segments(r->iov, r->iovcnt, r->offset, d->max_payload,
					send_one, &s);
		break;
	case BLK_OP_FLUSH:
		r->drv[R_LEFT]++;
		cookie = nbd_aio_flush(c->h, cb, 0);
		break;
	case BLK_OP_DISCARD:
		r->drv[R_LEFT]++;
		cookie = nbd_aio_trim(c->h, r->len, r->offset, cb, 0);
		break;
	default:	/* WRITE_ZEROES, ZERO_UNMAP */
		r->drv[R_LEFT]++;
		cookie = nbd_aio_zero(c->h, r->len, r->offset, cb,
				      r->op == BLK_OP_WRITE_ZEROES ? LIBNBD_CMD_FLAG_NO_HOLE : 0);
		break;
	}
	if (cookie < 0) {
		r->drv[R_LEFT]--;
		ret = -(nbd_get_errno() ? nbd_get_errno() : EIO);
	}
	if (ret && (conn_error(-ret) || !live(c->h)))
		r->drv[R_LOST] = 1;	/* the connection went: again later */
	else if (ret && !r->drv[R_ERR])
		r->drv[R_ERR] = (uint64_t)-ret;
	/* drop the hold: on_reply's logic finishes it if nothing is out */
	on_reply(r, &none);
	return 0;
}

/* The connection's state machine (under c->lock): notices a dead handle,
 * starts and finishes reconnects, resends waiting requests, fails them
 * once the server has been gone past the timeout. */
static void service(struct nbd_conn *c)
{
	struct nbd_disk *d = c->disk;
	uint64_t now = mono_ns();

	if (c->h && (nbd_aio_is_dead(c->h) || nbd_aio_is_closed(c->h))) {
		pr_warn_rated("%s: NBD connection lost (%s); reconnecting", d->uri,
			      nbd_get_error() ? nbd_get_error() : "closed");
		nbd_close(c->h);	/* its commands were retired: lost */
		c->h = NULL;
		nbd_rc_lost(&c->rc, now, false);
	}
	if (c->h && nbd_aio_is_connecting(c->h))
		return;
	if (c->h && !live(c->h)) {
		nbd_close(c->h);	/* a handshake that failed */
		c->h = NULL;
		nbd_rc_failed(&c->rc, now);
	}
	if (!c->h && nbd_rc_try_now(&c->rc, now)) {
		c->h = new_handle();
		c->gen++;
		if (c->h && nbd_aio_connect_uri(c->h, d->uri) < 0) {
			nbd_close(c->h);
			c->h = NULL;
		}
		if (!c->h)
			nbd_rc_failed(&c->rc, now);
		else if (nbd_aio_is_connecting(c->h))
			return;
	}
	if (live(c->h)) {
		if (nbd_rc_up(&c->rc)) {
			__atomic_add_fetch(&d->reconnects, 1, __ATOMIC_RELAXED);
			pr_warn_rated("%s: NBD connection back", d->uri);
		}
		/* Each waiting request once: one that comes back (its
		 * connection failed while it went out) waits for the next
		 * pass, not for this loop. */
		struct blk_dreq *r = c->pending;

		c->pending = NULL;
		c->pending_tail = &c->pending;
		while (r) {
			struct blk_dreq *next = r->next;

			if (live(c->h))
				send_req(c, r);
			else
				pend(c, r);
			r = next;
		}
		return;
	}
	if (nbd_rc_expired(&c->rc, now) && c->pending) {
		unsigned int n = 0;

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
}

/* Arms att's socket watches while it has requests out or the connection
 * has commands of any queue in flight, and its timer while the server is
 * away and it has requests waiting. Called with c->lock held, last thing
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

		if (!blkq_armed(att, W_READ))
			blkq_watch(att, W_READ, fd, POLLIN);
		if ((dir & LIBNBD_AIO_DIRECTION_WRITE) && !blkq_armed(att, W_WRITE))
			blkq_watch(att, W_WRITE, fd, POLLOUT);
	}
	if (att->inflight && !live(c->h) && !blkq_armed(att, W_TIMER)) {
		now = mono_ns();
		due = nbd_rc_next_event(&c->rc, now);
		blkq_timer(att, W_TIMER, due > now ? due - now : 1000000);
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

	if ((r->op == BLK_OP_DISCARD && !d->can_trim) ||
	    ((r->op == BLK_OP_WRITE_ZEROES || r->op == BLK_OP_ZERO_UNMAP) && !d->can_zero))
		return -EOPNOTSUPP;
	if (r->op == BLK_OP_FLUSH && !d->can_flush) {
		/* a server without flush writes through: nothing to do */
		blkq_dreq_done(r, 0);
		return 0;
	}
	lock_conn(c, att);
	service(c);
	if (c->h && nbd_aio_is_connecting(c->h) && nbd_rc_expired(&c->rc, mono_ns())) {
		/* Past the timeout no request waits, so no watch drives a
		 * reconnect: the requests that keep failing do, without
		 * blocking (a few steps of the handshake each). */
		for (int i = 0; i < 16 && nbd_aio_is_connecting(c->h) &&
				nbd_poll(c->h, 0) > 0; i++)
			;
		service(c);
	}
	__atomic_add_fetch(&x->owned, 1, __ATOMIC_RELAXED);
	if (live(c->h))
		send_req(c, r);
	else if (nbd_rc_expired(&c->rc, mono_ns()))
		ret = -EIO;	/* gone past the timeout: fail fast */
	else
		pend(c, r);
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
 * must not be told the socket is readable when it is not: from READY it
 * then starts a reply and waits in it, and commands queued meanwhile are
 * not sent until a reply comes; with none outstanding, none ever does.
 * On a shared connection every queue's watch fires for the same data and
 * the first thread to take the lock reads it all, so the others look
 * first. Alone on it, a watch that fired is the truth. */
static bool readable_now(struct nbd_conn *c)
{
	struct pollfd p = { .fd = nbd_aio_get_fd(c->h), .events = POLLIN };

	if (__atomic_load_n(&c->users, __ATOMIC_RELAXED) < 2)
		return true;
	return p.fd >= 0 && poll(&p, 1, 0) > 0;
}

static void nbd_event(struct blk_att *att, unsigned int idx, int res)
{
	struct nbd_conn *c = ((struct nbd_ctx *)att->ctx)->c;

	lock_conn(c, att);
	if (res == -ECANCELED)
		;	/* a watch moved off an old socket: re-armed below */
	else if (c->h && idx == W_READ && readable_now(c))
		nbd_aio_notify_read(c->h);	/* -1: service() sees it */
	else if (c->h && idx == W_WRITE)
		nbd_aio_notify_write(c->h);
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
	       mono_ns() < until)
		nbd_poll(c->h, 100);
	if (__atomic_load_n(&x->owned, __ATOMIC_ACQUIRE)) {
		/* a server that will not answer: closing the connection
		 * retires its commands (they come back as lost) */
		nbd_close(c->h);
		c->h = NULL;
		nbd_rc_lost(&c->rc, mono_ns(), false);
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
