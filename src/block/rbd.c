/* The Ceph RBD block driver: a disk that is an RBD image (path=
 * rbd:POOL[/NAMESPACE]/IMAGE[@SNAP]) through librbd's asynchronous calls,
 * straight on the guest's iovecs.
 *
 * Completions: librbd finishes requests on its own threads. By default
 * its callback thread posts each to its queue's mailbox (one eventfd
 * wakeup per batch). The other way (IOVM_RBD_COMPLETIONS=poll) avoids
 * that hop: the image's notification eventfd (rbd_set_image_notification)
 * is watched by the io_uring of every queue with requests out, and the
 * thread it wakes collects finished requests with rbd_poll_io_events,
 * completing its own directly and posting other queues' to their
 * mailboxes. Measured on this project's test machine (bench/rbd.sh,
 * bench/RESULTS.md), the callbacks won on reads by 7-23% and lost 4k QD1
 * writes by ~12% (a single queue; librbd's finisher thread still does the
 * work of a completion either way), hence the default. Requests are
 * never timed out here: librbd retries while the cluster recovers, and a
 * request Ceph will still complete must not be failed early. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include "block/driver.h"
#include "lib/log.h"

/* How long opening waits for the monitors before giving up (seconds). */
#define RBD_CONNECT_TIMEOUT "30"
/* Completions taken per rbd_poll_io_events call. */
#define RBD_POLL_BATCH 32
/* The watch index of the notification eventfd. */
#define W_EVENTS 0

struct rbd_disk {
	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t image;
	bool poll_mode;		/* notification eventfd; else callbacks */
	int efd;		/* the image's notification eventfd */
	/* Requests librbd owns, of every queue: detach waits for its own. */
};

struct rbd_ctx {
	struct rbd_disk *disk;
	unsigned int out;	/* atomic: this context's requests in librbd */
};

/* Parses "rbd:POOL[/NAMESPACE]/IMAGE[@SNAP]" into a copy split in place.
 * Returns 0, or -EINVAL with a message. */
int blk_rbd_parse(const char *path, char **buf, const char **pool,
		  const char **ns, const char **image, const char **snap,
		  char *err, size_t errlen)
{
	char *s, *slash, *at;

	*buf = NULL;
	*ns = *snap = NULL;
	if (strncmp(path, "rbd:", 4) || !(s = strdup(path + 4))) {
		snprintf(err, errlen, "%s: not rbd:POOL/IMAGE", path);
		return -EINVAL;
	}
	at = strchr(s, '@');
	if (at) {
		*at = 0;
		*snap = at + 1;
	}
	slash = strchr(s, '/');
	if (!slash)
		goto bad;
	*slash = 0;
	*pool = s;
	*image = slash + 1;
	slash = strchr(*image, '/');
	if (slash) {
		*slash = 0;
		*ns = *image;
		*image = slash + 1;
		if (!**ns || strchr(*image, '/'))
			goto bad;
	}
	if (!**pool || !**image || (*snap && !**snap))
		goto bad;
	*buf = s;
	return 0;
bad:
	free(s);
	snprintf(err, errlen, "%s: not rbd:POOL[/NAMESPACE]/IMAGE[@SNAP]", path);
	return -EINVAL;
}

static void disk_free(struct rbd_disk *d)
{
	if (!d)
		return;
	if (d->image)
		rbd_close(d->image);
	if (d->io)
		rados_ioctx_destroy(d->io);
	if (d->cluster)
		rados_shutdown(d->cluster);
	if (d->efd >= 0)
		close(d->efd);
	free(d);
}

/* Sets a Ceph option, naming it in the message on failure. */
static int conf_set(struct rbd_disk *d, const char *key, const char *val,
		    const char *path, char *err, size_t errlen)
{
	int ret = rados_conf_set(d->cluster, key, val);

	if (ret < 0)
		snprintf(err, errlen, "%s: Ceph option %s=%s: %s", path, key, val,
			 strerror(-ret));
	return ret;
}

static int rbd_open_disk(struct blk_backend *be, const struct disk_cfg *cfg,
			 char *err, size_t errlen)
{
	const char *pool, *ns, *name, *snap, *mode = getenv("IOVM_RBD_COMPLETIONS");
	struct rbd_disk *d;
	char *buf;
	uint64_t size, h = 0xcbf29ce484222325ull;
	int ret;

	if (mode && strcmp(mode, "poll") && strcmp(mode, "callback")) {
		snprintf(err, errlen, "IOVM_RBD_COMPLETIONS=%s is not poll or callback", mode);
		return -EINVAL;
	}
	ret = blk_rbd_parse(cfg->path, &buf, &pool, &ns, &name, &snap, err, errlen);
	if (ret)
		return ret;
	if (snap && !cfg->ro) {
		snprintf(err, errlen, "%s: an RBD snapshot is read-only; add ro", cfg->path);
		free(buf);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		free(buf);
		return -ENOMEM;
	}
	d->efd = -1;
	ret = rados_create(&d->cluster, cfg->rbd_user);
	if (ret < 0) {
		d->cluster = NULL;
		snprintf(err, errlen, "%s: cannot make a Ceph client%s%s: %s", cfg->path,
			 cfg->rbd_user ? " for user " : "",
			 cfg->rbd_user ? cfg->rbd_user : "", strerror(-ret));
		goto fail;
	}
	ret = rados_conf_read_file(d->cluster, cfg->rbd_conf);
	if (ret < 0) {
		snprintf(err, errlen, "%s: cannot read the Ceph configuration %s: %s",
			 cfg->path, cfg->rbd_conf ? cfg->rbd_conf :
			 "(CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/ceph.conf, ./ceph.conf)",
			 strerror(-ret));
		goto fail;
	}
	/* cache=none: a write is acknowledged once the OSDs hold it (as
	 * O_DIRECT on a file); writeback: librbd's cache acknowledges
	 * earlier and the guest's flushes write it back. */
	if ((cfg->rbd_keyring && (ret = conf_set(d, "keyring", cfg->rbd_keyring, cfg->path,
					      err, errlen)) < 0) ||
	    (ret = conf_set(d, "rbd_cache", cfg->cache == CACHE_NONE ? "false" : "true",
			    cfg->path, err, errlen)) < 0 ||
	    (ret = conf_set(d, "client_mount_timeout", RBD_CONNECT_TIMEOUT,
			    cfg->path, err, errlen)) < 0)
		goto fail;
	ret = rados_connect(d->cluster);
	if (ret < 0) {
		snprintf(err, errlen, "%s: cannot connect to the Ceph cluster: %s",
			 cfg->path, strerror(-ret));
		rados_shutdown(d->cluster);
		d->cluster = NULL;
		goto fail;
	}
	ret = rados_ioctx_create(d->cluster, pool, &d->io);
	if (ret < 0) {
		d->io = NULL;
		snprintf(err, errlen, "%s: cannot open pool %s: %s", cfg->path, pool,
			 strerror(-ret));
		goto fail;
	}
	if (ns)
		rados_ioctx_set_namespace(d->io, ns);
	ret = cfg->ro ? rbd_open_read_only(d->io, name, &d->image, snap) :
			rbd_open(d->io, name, &d->image, NULL);
	if (ret < 0) {
		d->image = NULL;
		snprintf(err, errlen, "%s: cannot open image %s%s%s in pool %s: %s",
			 cfg->path, name, snap ? "@" : "", snap ? snap : "", pool,
			 strerror(-ret));
		goto fail;
	}
	ret = rbd_get_size(d->image, &size);
	if (ret < 0) {
		snprintf(err, errlen, "%s: cannot read the image's size: %s", cfg->path,
			 strerror(-ret));
		goto fail;
	}
	if (size < 512 || size % 512) {
		snprintf(err, errlen, "%s: size %" PRIu64 " is not a positive multiple of 512 bytes",
			 cfg->path, size);
		ret = -EINVAL;
		goto fail;
	}
	d->poll_mode = mode && !strcmp(mode, "poll");
	if (d->poll_mode) {
		d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (d->efd < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: eventfd: %s", cfg->path, strerror(-ret));
			goto fail;
		}
		ret = rbd_set_image_notification(d->image, d->efd, EVENT_TYPE_EVENTFD);
		if (ret < 0) {
			pr_warn("%s: no completion notification (%s): using callbacks",
				cfg->path, strerror(-ret));
			close(d->efd);
			d->efd = -1;
			d->poll_mode = false;
		}
	}
	be->size = size;
	be->block_size = 512;
	/* RBD moves data in objects of megabytes; 4 KiB keeps guests'
	 * writes from being split into read-modify-writes of sectors. */
	be->phys_block_size = 4096;
	be->discard_ok = true;
	/* A discard that does not cover whole allocation units leaves the
	 * data (measured: 4 KiB discards read back unchanged). */
	be->discard_zeroes = false;
	be->ro = cfg->ro;
	for (const char *p = cfg->path; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	snprintf(be->serial, sizeof(be->serial), "iovm%016" PRIx64, h);
	be->path = strdup(cfg->path);
	be->priv = d;
	free(buf);
	return 0;
fail:
	free(buf);
	disk_free(d);
	return ret < 0 ? ret : -EIO;
}

static void rbd_close_disk(struct blk_backend *be)
{
	disk_free(be->priv);
}

static int rbd_flush_disk(struct blk_backend *be)
{
	struct rbd_disk *d = be->priv;

	return rbd_flush(d->image);
}

/* Resizing an image that other clients have open works (librbd tells
 * them through the header's watch); a snapshot or an image opened
 * read-only refuses with EROFS. */
static int rbd_resize_disk(struct blk_backend *be, uint64_t new_size,
			   uint64_t *now, char *err, size_t errlen)
{
	struct rbd_disk *d = be->priv;
	int ret;

	if (new_size) {
		ret = rbd_resize(d->image, new_size);
		if (ret < 0) {
			snprintf(err, errlen, "%s: cannot resize the image to %" PRIu64 " bytes: %s",
				 blk_name(be), new_size, strerror(-ret));
			return ret;
		}
	}
	ret = rbd_get_size(d->image, now);
	if (ret < 0)
		snprintf(err, errlen, "%s: cannot read the image's size: %s",
			 blk_name(be), strerror(-ret));
	return ret < 0 ? ret : 0;
}

static int rbd_attach(struct blk_att *att)
{
	struct rbd_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->disk = att->be->priv;
	att->ctx = c;
	return 0;
}

/* What a finished request reports: bytes for a read or write (librbd
 * moves all of it or fails), else 0, or -errno. */
static int result(const struct blk_dreq *r, ssize_t ret)
{
	if (ret < 0)
		return ret < INT32_MIN ? -EIO : (int)ret;
	return r->op == BLK_OP_READ || r->op == BLK_OP_WRITE ? (int)r->len : 0;
}

/* Hands a finished request to its queue. The context's count drops only
 * after that: detach (which frees the context, and then the queue goes)
 * waits for it, so nothing here touches freed memory. */
static void deliver(rbd_completion_t comp, struct blk_queue *self)
{
	struct blk_dreq *r = rbd_aio_get_arg(comp);
	struct rbd_ctx *c = r->att->ctx;
	int res = result(r, rbd_aio_get_return_value(comp));

	rbd_aio_release(comp);
	if (r->att->q == self)
		blkq_dreq_done(r, res);
	else
		blkq_dreq_done_remote(r, res);
	__atomic_sub_fetch(&c->out, 1, __ATOMIC_RELEASE);
}

/* librbd's thread: callback mode. */
static void on_complete(rbd_completion_t comp, void *arg)
{
	deliver(comp, NULL);
}

/* Poll mode: takes every finished request of the image; self is the
 * queue whose thread runs this (NULL from detach: all go to mailboxes). */
static void poll_events(struct rbd_disk *d, struct blk_queue *self)
{
	rbd_completion_t comps[RBD_POLL_BATCH];
	uint64_t v;
	int n;

	/* Read before polling: a completion queued after the poll writes
	 * the eventfd again and wakes a watch. */
	if (read(d->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: another queue's thread took this wakeup */
	}
	do {
		n = rbd_poll_io_events(d->image, comps, RBD_POLL_BATCH);
		for (int i = 0; i < n; i++)
			deliver(comps[i], self);
	} while (n == RBD_POLL_BATCH);
}

static void arm(struct blk_att *att)
{
	struct rbd_ctx *c = att->ctx;

	/* If the ring is full, the next submit or event arms it: requests
	 * out always have a watch by the time the thread sleeps, since
	 * each submit and each event comes back here. */
	if (c->disk->poll_mode && att->inflight && !blkq_armed(att, W_EVENTS))
		blkq_watch(att, W_EVENTS, c->disk->efd, POLLIN);
}

static int rbd_submit(struct blk_att *att, struct blk_dreq *r)
{
	struct rbd_ctx *c = att->ctx;
	struct rbd_disk *d = c->disk;
	rbd_completion_t comp;
	int ret;

	ret = rbd_aio_create_completion(r, d->poll_mode ? NULL : on_complete, &comp);
	if (ret < 0)
		return ret;
	__atomic_add_fetch(&c->out, 1, __ATOMIC_RELAXED);
	switch (r->op) {
	case BLK_OP_READ:
		ret = rbd_aio_readv(d->image, r->iov, (int)r->iovcnt, r->offset, comp);
		break;
	case BLK_OP_WRITE:
		ret = rbd_aio_writev(d->image, r->iov, (int)r->iovcnt, r->offset, comp);
		break;
	case BLK_OP_FLUSH:
		ret = rbd_aio_flush(d->image, comp);
		break;
	case BLK_OP_DISCARD:
		ret = rbd_aio_discard(d->image, r->offset, r->len, comp);
		break;
	case BLK_OP_WRITE_ZEROES:
	case BLK_OP_ZERO_UNMAP:
		/* librbd deallocates whole objects and zeroes the rest: reads
		 * return zeroes either way */
		ret = rbd_aio_write_zeroes(d->image, r->offset, r->len, comp, 0, 0);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret < 0) {
		__atomic_sub_fetch(&c->out, 1, __ATOMIC_RELAXED);
		rbd_aio_release(comp);
		return ret;
	}
	arm(att);
	return 0;
}

static void rbd_event(struct blk_att *att, unsigned int idx, int res)
{
	struct rbd_ctx *c = att->ctx;

	if (res != -ECANCELED)
		poll_events(c->disk, att->q);
	arm(att);
}

static void rbd_detach(struct blk_att *att)
{
	struct rbd_ctx *c = att->ctx;

	/* Only after blkq_abort can requests still be out here (the queue
	 * drains before it goes): librbd finishes every request it took, so
	 * wait for them, taking the image's events meanwhile. */
	while (__atomic_load_n(&c->out, __ATOMIC_ACQUIRE)) {
		if (c->disk->poll_mode) {
			struct pollfd p = { .fd = c->disk->efd, .events = POLLIN };

			poll(&p, 1, 100);
			poll_events(c->disk, NULL);
		} else {
			usleep(1000);
		}
	}
	free(c);
	att->ctx = NULL;
}

const struct blk_driver blk_rbd_driver = {
	.name = "rbd",
	.open = rbd_open_disk,
	.close = rbd_close_disk,
	.flush = rbd_flush_disk,
	.resize = rbd_resize_disk,
	.attach = rbd_attach,
	.submit = rbd_submit,
	.event = rbd_event,
	.detach = rbd_detach,
};
