/* 9P server fids and nodes: each session's fid table, the O_PATH nodes the
 * fids hold, and the host descriptor budget both draw on. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "p9/server_internal.h"

/* ---------- descriptor budget ---------- */

/* Descriptors held by every 9P server of the process, and how many they
 * may hold (see P9_FD_RESERVE); set as each server opens. */
static atomic_uint fds_used;
static atomic_uint fds_pool;

/* Takes one descriptor from the session's share and from the process's
 * budget, before the open that needs it, so the process itself never runs
 * out: a guest's walks fail with EMFILE, never another device's setup. */
int fd_take(struct p9_session *s)
{
	if (atomic_fetch_add(&s->fds, 1) >= s->srv->lim.max_fds) {
		atomic_fetch_sub(&s->fds, 1);
		return -EMFILE;
	}
	if (atomic_fetch_add(&fds_used, 1) >= atomic_load(&fds_pool)) {
		atomic_fetch_sub(&fds_used, 1);
		atomic_fetch_sub(&s->fds, 1);
		return -ENFILE;
	}
	return 0;
}

void fd_give(struct p9_session *s)
{
	atomic_fetch_sub(&fds_used, 1);
	atomic_fetch_sub(&s->fds, 1);
}

/* The process's budget for 9P under the current soft limit, less extra. */
uint64_t fd_budget(uint64_t extra)
{
	struct rlimit rl;
	uint64_t lim, reserve;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 30) ?
	      (1u << 30) : rl.rlim_cur;
	reserve = lim / 8 > P9_FD_RESERVE ? lim / 8 : P9_FD_RESERVE;
	if (reserve > lim / 2)
		reserve = lim / 2;
	reserve += extra;
	return lim > reserve ? lim - reserve : 0;
}

/* Sets the budget of every server of the process (see fd_budget). */
void fd_pool_set(uint64_t pool)
{
	atomic_store(&fds_pool, pool);
}

/* An open file: a slot of max_open and a descriptor of the budget. */
int take_open_slot(struct p9_session *s)
{
	int ret;

	if (atomic_fetch_add(&s->nopen, 1) >= s->srv->lim.max_open) {
		atomic_fetch_sub(&s->nopen, 1);
		return -EMFILE;
	}
	ret = fd_take(s);
	if (ret)
		atomic_fetch_sub(&s->nopen, 1);
	else
		p9_stat_add(&s->srv->st_open, 1);
	return ret;
}

void give_open_slot(struct p9_session *s)
{
	atomic_fetch_sub(&s->nopen, 1);
	p9_stat_sub(&s->srv->st_open, 1);
	fd_give(s);
}

/* ---------- nodes ---------- */

/* fd is already counted in sess's budget (fd_take), which the node
 * gives back when it closes fd. */
struct p9_node *node_new(struct p9_server *srv, struct p9_session *sess,
			 int fd, struct p9_node *parent, const char *name,
			 size_t namelen)
{
	struct p9_node *n = malloc(sizeof(*n) + namelen + 1);

	if (!n)
		return NULL;
	atomic_init(&n->refs, 1);
	n->fd = fd;
	n->sess = sess;
	n->parent = parent;
	if (parent)
		atomic_fetch_add(&parent->refs, 1);
	n->namelen = namelen;
	memcpy(n->name, name, namelen);
	n->name[namelen] = 0;
	atomic_fetch_add(&srv->nodes, 1);
	return n;
}

void node_get(struct p9_node *n)
{
	atomic_fetch_add(&n->refs, 1);
}

void node_put(struct p9_server *srv, struct p9_node *n)
{
	/* Iterative, so a deep chain of parents cannot exhaust the stack. */
	while (n && atomic_fetch_sub(&n->refs, 1) == 1) {
		struct p9_node *parent = n->parent;

		close(n->fd);
		if (n->sess)
			fd_give(n->sess);
		free(n);
		atomic_fetch_sub(&srv->nodes, 1);
		n = parent;
	}
}

int node_stat(struct p9_node *n, struct stat *st)
{
	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

void make_qid(struct p9_server *srv, const struct stat *st,
	      struct p9_qid *q)
{
	q->type = S_ISDIR(st->st_mode) ? P9_QTDIR :
		  S_ISLNK(st->st_mode) ? P9_QTSYMLINK : P9_QTFILE;
	q->version = st->st_mtime ^ (st->st_size << 8);
	q->path = st->st_ino;
	/* Objects of other file systems mounted inside the export would
	 * collide by inode number: fold the device into the high bits. */
	if (st->st_dev != srv->root_dev)
		q->path ^= (uint64_t)st->st_dev << 40;
}

/* ---------- fids ---------- */

static uint32_t fid_hash(uint32_t fid, uint32_t nbuckets)
{
	return (fid * 2654435761u) >> 7 & (nbuckets - 1);
}

static struct p9_fid *fid_find_locked(struct p9_session *s, uint32_t fid)
{
	struct p9_fid *f = s->buckets[fid_hash(fid, s->nbuckets)];

	while (f && f->fid != fid)
		f = f->hnext;
	return f;
}

static void fid_grow_locked(struct p9_session *s)
{
	uint32_t nb = s->nbuckets * 2;
	struct p9_fid **b = calloc(nb, sizeof(*b));

	if (!b)
		return;		/* longer chains, still correct */
	for (uint32_t i = 0; i < s->nbuckets; i++) {
		struct p9_fid *f = s->buckets[i], *next;

		for (; f; f = next) {
			uint32_t h = fid_hash(f->fid, nb);

			next = f->hnext;
			f->hnext = b[h];
			b[h] = f;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = nb;
}

static void fid_free(struct p9_session *s, struct p9_fid *f)
{
	int ofd = atomic_load(&f->ofd);

	if (ofd >= 0) {
		close(ofd);
		atomic_fetch_sub(&s->nopen, 1);
		p9_stat_sub(&s->srv->st_open, 1);
		fd_give(s);
	}
	if (f->xbuf || f->xsize)
		atomic_fetch_sub(&s->xattr_bytes, f->xsize);
	free(f->xbuf);
	free(f->xname);
	node_put(s->srv, f->node);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

struct p9_fid *fid_get(struct p9_session *s, uint32_t fid)
{
	struct p9_fid *f;

	pthread_mutex_lock(&s->lock);
	f = fid_find_locked(s, fid);
	if (f)
		f->refs++;
	pthread_mutex_unlock(&s->lock);
	return f;
}

void fid_put(struct p9_session *s, struct p9_fid *f)
{
	bool last;

	if (!f)
		return;
	pthread_mutex_lock(&s->lock);
	last = --f->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		fid_free(s, f);
}

/* Points the fid at another node (walk to itself, lcreate). Handlers use
 * f->node without a reference of their own, so this is refused while any
 * other request holds the fid: the table's reference and the caller's are
 * the only ones allowed. Once the fid left the table (a Tclunk or Tremove
 * in progress), the other reference is that request's, which is using
 * f->node: refused too. */
int fid_swap_node(struct p9_session *s, struct p9_fid *f,
		  struct p9_node *n, struct p9_node **old)
{
	pthread_mutex_lock(&s->lock);
	if (f->unlinked || f->refs > 2) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	*old = f->node;
	f->node = n;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Adds a fid holding node (the reference is taken over). */
int fid_add(struct p9_session *s, uint32_t fid, struct p9_node *node,
	    uint32_t uid)
{
	struct p9_fid *f;
	uint32_t h;

	if (fid == P9_NOFID)
		return -EBADF;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fid = fid;
	f->refs = 1;
	f->uid = uid;
	f->node = node;
	atomic_init(&f->ofd, -1);
	atomic_init(&f->kind, FID_PATH);
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&s->lock);
	if (fid_find_locked(s, fid)) {
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return -EEXIST;
	}
	if (s->nfids >= s->srv->lim.max_fids) {
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return -EMFILE;
	}
	if (s->nfids >= s->nbuckets)
		fid_grow_locked(s);
	h = fid_hash(fid, s->nbuckets);
	f->hnext = s->buckets[h];
	s->buckets[h] = f;
	s->nfids++;
	pthread_mutex_unlock(&s->lock);
	p9_stat_add(&s->srv->st_fids, 1);
	return 0;
}

/* Removes fid from the table; the caller's reference (if any) still holds
 * it. Returns the fid (with one reference for the caller) or NULL. */
struct p9_fid *fid_unlink(struct p9_session *s, uint32_t fid)
{
	struct p9_fid **pp, *f;

	pthread_mutex_lock(&s->lock);
	pp = &s->buckets[fid_hash(fid, s->nbuckets)];
	while (*pp && (*pp)->fid != fid)
		pp = &(*pp)->hnext;
	f = *pp;
	if (f) {
		*pp = f->hnext;
		f->unlinked = true;
		s->nfids--;
	}
	pthread_mutex_unlock(&s->lock);
	if (f)
		p9_stat_sub(&s->srv->st_fids, 1);
	return f;	/* the table's reference passes to the caller */
}

/* Empties the table in one sweep of the buckets (a rescan from bucket 0
 * per fid would be quadratic with a full table), then drops the table's
 * references outside the session lock, as fid_free closes descriptors. */
void fid_clear_all(struct p9_session *s)
{
	struct p9_fid *list = NULL, *f, *next;
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->nbuckets; i++) {
		for (f = s->buckets[i]; f; f = next) {
			next = f->hnext;
			f->unlinked = true;
			f->hnext = list;
			list = f;
		}
		s->buckets[i] = NULL;
	}
	n = s->nfids;
	s->nfids = 0;
	pthread_mutex_unlock(&s->lock);
	p9_stat_sub(&s->srv->st_fids, n);
	for (f = list; f; f = next) {
		next = f->hnext;
		fid_put(s, f);
	}
}
