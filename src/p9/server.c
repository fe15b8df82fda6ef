/* 9P2000.L server: sessions and their requests (begin, dispatch to one
 * handler per message, reply, end), Tversion, Tattach, Tclunk, Tflush,
 * and opening the export. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/iov.h"
#include "p9/server_internal.h"

#define P9_MIN_MSIZE 4096
/* A request other than Twrite carries at most 16 names of 255 bytes, or a
 * name and a symlink target: this bounds what is copied to decode it. */
#define P9_SMALL_MAX 8192
#define REPLY_BUF 512

static int h_version(struct op *o)
{
	struct p9_session *s = o->s;
	uint32_t msize = o->m->u.version.msize;
	const struct p9_str *v = &o->m->u.version.version;
	static const char unknown[] = "unknown";

	if (msize < P9_MIN_MSIZE)
		return -EINVAL;
	/* A new version starts a new session: every fid goes away. */
	fid_clear_all(s);
	if (msize > s->srv->msize)
		msize = s->srv->msize;
	o->r->u.version.msize = msize;
	if (v->len >= 8 && !memcmp(v->s, P9_VERSION_L, 8) &&
	    (v->len == 8 || v->s[8] == '.')) {
		o->r->u.version.version = (struct p9_str){ 8, P9_VERSION_L };
		atomic_store(&s->msize, msize);
	} else {
		o->r->u.version.version = (struct p9_str){ 7, unknown };
	}
	return 0;
}

static int h_attach(struct op *o)
{
	struct p9_server *srv = o->srv;
	struct stat st;
	int ret;

	if (o->m->u.tattach.afid != P9_NOFID)
		return -EBADF;	/* no auth fids exist */
	ret = node_stat(srv->root, &st);
	if (ret)
		return ret;
	node_get(srv->root);
	ret = fid_add(o->s, o->m->u.tattach.fid, srv->root,
		      o->m->u.tattach.n_uname);
	if (ret) {
		node_put(srv, srv->root);
		return ret;
	}
	make_qid(srv, &st, &o->r->u.rqid.qid);
	return 0;
}

static int clunk_fid(struct p9_session *s, struct p9_fid *f)
{
	int ret = 0;

	/* An xattr written through this fid is set when it is clunked. */
	if (atomic_load(&f->kind) == FID_XATTR_WRITE)
		ret = xattr_commit(f);
	fid_put(s, f);
	return ret;
}

static int h_clunk(struct op *o)
{
	struct p9_fid *f = fid_unlink(o->s, o->m->u.tfid.fid);

	if (!f)
		return -EBADF;
	return clunk_fid(o->s, f);
}

static int h_flush(struct op *o)
{
	struct p9_session *s = o->s;
	uint16_t oldtag = o->m->u.tflush.oldtag;
	uint64_t myseq = o->req->seq;

	/* The flushed request is answered before Rflush: wait until every
	 * older request with that tag has been delivered. Requests never
	 * block indefinitely (locks do not wait, FIFOs open non-blocking),
	 * so this wait is bounded. */
	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct p9_req *r;
		bool found = false;

		for (r = s->pending.next; r != &s->pending; r = r->next)
			if (r->tag == oldtag && r->seq < myseq && r != o->req) {
				found = true;
				break;
			}
		if (!found)
			break;
		pthread_cond_wait(&s->done_cond, &s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int dispatch(struct op *o)
{
	switch (o->m->type) {
	case P9_TVERSION: return h_version(o);
	case P9_TAUTH: return -EOPNOTSUPP;	/* 9P has no auth here */
	case P9_TATTACH: return h_attach(o);
	case P9_TFLUSH: return h_flush(o);
	case P9_TWALK: return h_walk(o);
	case P9_TLOPEN: return h_lopen(o);
	case P9_TLCREATE: return h_lcreate(o);
	case P9_TREAD: return h_read(o);
	case P9_TWRITE: return h_write(o);
	case P9_TCLUNK: return h_clunk(o);
	case P9_TREMOVE: return h_remove(o);
	case P9_TGETATTR: return h_getattr(o);
	case P9_TSETATTR: return h_setattr(o);
	case P9_TREADDIR: return h_readdir(o);
	case P9_TMKDIR: return h_mkdir(o);
	case P9_TMKNOD: return h_mknod(o);
	case P9_TSYMLINK: return h_symlink(o);
	case P9_TREADLINK: return h_readlink(o);
	case P9_TLINK: return h_link(o);
	case P9_TRENAME: return h_rename(o);
	case P9_TRENAMEAT: return h_renameat(o);
	case P9_TUNLINKAT: return h_unlinkat(o);
	case P9_TSTATFS: return h_statfs(o);
	case P9_TFSYNC: return h_fsync(o);
	case P9_TLOCK: return h_lock(o);
	case P9_TGETLOCK: return h_getlock(o);
	case P9_TXATTRWALK: return h_xattrwalk(o);
	case P9_TXATTRCREATE: return h_xattrcreate(o);
	default: return -EOPNOTSUPP;
	}
}

static size_t reply_error(struct op *o, uint16_t tag, int err)
{
	uint8_t b[11];
	struct p9_msg e = { .type = P9_RLERROR, .tag = tag };

	e.u.rlerror.ecode = -err;
	if (o->out_len < sizeof(b))
		return 0;
	p9_encode(&e, b, sizeof(b));
	iov_from_buf(o->out, o->nout, 0, b, sizeof(b));
	return sizeof(b);
}

/* Encodes the reply (without payload) into the head of out. */
static size_t reply_send(struct op *o, uint16_t tag)
{
	uint8_t small[REPLY_BUF], *b = small;
	size_t need = REPLY_BUF;
	int len;

	o->r->tag = tag;
	if (o->r->type == P9_RREADLINK)
		need += o->r->u.rreadlink.target.len;
	else if (o->r->type == P9_RGETLOCK)
		need += o->r->u.getlock.client_id.len;
	if (need > REPLY_BUF) {
		b = malloc(need);
		if (!b)
			return reply_error(o, tag, -ENOMEM);
	}
	len = p9_encode(o->r, b, need);
	if (len >= 0 && p9_get32(b) > o->out_len)
		len = -ERANGE;	/* the client gave too little room */
	if (len >= 0)
		iov_from_buf(o->out, o->nout, 0, b, len);
	if (b != small)
		free(b);
	if (len < 0)
		return reply_error(o, tag, len == -ENOSPC ? -ERANGE : len);
	if (o->r->type == P9_RREAD || o->r->type == P9_RREADDIR)
		return len + o->r->u.rdata.count;
	return len;
}

/* A request answered with Rlerror before it could be decoded: counted as
 * an error only (its type may be anything). */
static size_t reply_bad(struct op *o, uint16_t tag, int err)
{
	p9_stat_add(&o->srv->st_errors, 1);
	return reply_error(o, tag, err);
}

/* The statistics of a request answered: its type, its error, its data. */
static void count_reply(struct p9_server *srv, uint8_t type,
			const struct p9_msg *reply, int err)
{
	p9_stat_add(&srv->st_ops[type >> 1], 1);
	if (err)
		p9_stat_add(&srv->st_errors, 1);
	else if (reply->type == P9_RREAD)
		p9_stat_add(&srv->st_read, reply->u.rdata.count);
	else if (reply->type == P9_RWRITE)
		p9_stat_add(&srv->st_written, reply->u.rwrite.count);
}

size_t p9_handle(struct p9_session *s, struct p9_req *r, struct iovec *in,
		 unsigned int nin, struct iovec *out, unsigned int nout)
{
	struct p9_msg m, reply;
	struct op o = {
		.s = s, .srv = s->srv, .m = &m, .r = &reply, .in = in,
		.nin = nin, .out = out, .nout = nout, .req = r,
	};
	uint8_t *buf = r->small;
	size_t in_len = iov_size(in, nin), copy;
	uint32_t size, msize = p9_session_msize(s);
	uint16_t tag = P9_NOTAG;
	size_t ret;
	int err;

	o.out_len = iov_size(out, nout);
	/* The header p9_req_begin read: the request memory is the guest's
	 * and may change between two reads, so it is never read again for
	 * a decision (see the check after the copy below). */
	if (!r->hdr_ok)
		return reply_bad(&o, tag, -EPROTO);
	size = r->size;
	m.type = r->type;
	tag = r->tag;
	if (!r->tracked)
		return reply_bad(&o, tag, -ENOMEM);	/* too many in flight */
	if (size != in_len)
		return reply_bad(&o, tag, -EPROTO);
	if (size > msize)
		return reply_bad(&o, tag, -EMSGSIZE);
	/* Only the fixed header of a Twrite is copied; its payload stays in
	 * the iovecs until pwritev. Other requests are small by nature. */
	copy = m.type == P9_TWRITE ? (size < P9_TWRITE_HDRSZ ? size : P9_TWRITE_HDRSZ) : size;
	if (copy > P9_SMALL_MAX)
		return reply_bad(&o, tag, -EPROTO);
	if (copy > sizeof(r->small)) {
		buf = malloc(copy);
		if (!buf)
			return reply_bad(&o, tag, -ENOMEM);
	}
	/* The body is decoded from this one copy; its header must still be
	 * the one validated above, or a size grown after the check could
	 * make a Twrite count run past the payload actually present. */
	if (iov_to_buf(in, nin, 0, buf, copy) != copy)
		err = -EPROTO;
	else if (copy >= P9_HDRSZ && (p9_get32(buf) != size ||
				      buf[4] != m.type ||
				      p9_get16(buf + 5) != tag))
		err = -EPROTO;
	else
		err = p9_decode(buf, copy, m.type == P9_TWRITE, &m);
	if (!err && (m.type & 1))
		err = -EOPNOTSUPP;	/* R-messages are not requests */
	if (!err && m.type != P9_TVERSION &&
	    atomic_load(&s->msize) == 0)
		err = -EPROTO;
	memset(&reply, 0, offsetof(struct p9_msg, u));
	reply.type = m.type + 1;
	r->again = false;
	if (!err)
		err = dispatch(&o);
	if (err == -EAGAIN && r->again)
		ret = 0;	/* to be served again without RWF_NOWAIT */
	else
		ret = err ? reply_error(&o, tag, err) : reply_send(&o, tag);
	if (ret)
		count_reply(s->srv, m.type, &reply, err);
	if (buf != r->small)
		free(buf);
	return ret;
}

void p9_req_begin(struct p9_session *s, struct p9_req *r,
		  const struct iovec *in, unsigned int nin)
{
	uint8_t hdr[P9_HDRSZ];

	r->tag = P9_NOTAG;
	r->size = 0;
	r->type = 0;
	r->nowait = r->again = false;
	r->hdr_ok = iov_to_buf(in, nin, 0, hdr, sizeof(hdr)) == sizeof(hdr);
	if (r->hdr_ok) {
		r->size = p9_get32(hdr);
		r->type = hdr[4];
		r->tag = p9_get16(hdr + 5);
	}
	pthread_mutex_lock(&s->lock);
	r->tracked = s->npending < s->srv->lim.max_pending;
	if (r->tracked) {
		r->seq = ++s->seq;
		r->next = &s->pending;
		r->prev = s->pending.prev;
		s->pending.prev->next = r;
		s->pending.prev = r;
		s->npending++;
	}
	pthread_mutex_unlock(&s->lock);
}

bool p9_req_may_block(const struct p9_req *r)
{
	if (!r->hdr_ok)
		return false;	/* answered with EPROTO at once */
	switch (r->type) {
	case P9_TREAD:
	case P9_TWRITE:
	case P9_TREADDIR:
	case P9_TFSYNC:
	case P9_TSETATTR:
	case P9_TLOCK:
	case P9_TFLUSH:
		return true;
	default:
		return false;
	}
}

size_t p9_reply_room(struct p9_session *s, const struct p9_req *r,
		     const struct iovec *in, unsigned int nin)
{
	uint32_t msize = p9_session_msize(s);
	/* reply_send's fixed part, a readlink target, or a getlock client
	 * id (which comes from the request, so within r->size; only there:
	 * a Twrite's reply must not cost as much as its data) */
	size_t room = REPLY_BUF + P9_TARGET_MAX +
		      (r->type == P9_TGETLOCK ? (size_t)r->size : 0);
	uint8_t cnt[4];

	/* Tread and Treaddir: fid[4] offset[8] count[4] after the header;
	 * the reply is an Rread/Rreaddir of up to count bytes or an
	 * Rlerror, no longer than the Rread header. */
	if (r->hdr_ok && (r->type == P9_TREAD || r->type == P9_TREADDIR) &&
	    iov_to_buf(in, nin, P9_HDRSZ + 12, cnt, sizeof(cnt)) == sizeof(cnt))
		room = P9_IOHDRSZ + (size_t)p9_get32(cnt);
	return room < msize ? room : msize;
}

void p9_req_end(struct p9_session *s, struct p9_req *r)
{
	if (!r->tracked)
		return;
	pthread_mutex_lock(&s->lock);
	r->prev->next = r->next;
	r->next->prev = r->prev;
	s->npending--;
	r->tracked = false;
	pthread_cond_broadcast(&s->done_cond);
	pthread_mutex_unlock(&s->lock);
}

size_t p9_call(struct p9_session *s, struct iovec *in, unsigned int nin,
	       struct iovec *out, unsigned int nout)
{
	struct p9_req r;
	size_t len;

	p9_req_begin(s, &r, in, nin);
	len = p9_handle(s, &r, in, nin, out, nout);
	p9_req_end(s, &r);
	return len;
}

/* ---------- sessions and server ---------- */

struct p9_session *p9_session_new(struct p9_server *srv)
{
	struct p9_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->srv = srv;
	s->nbuckets = 64;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (!s->buckets) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->done_cond, NULL);
	s->pending.next = s->pending.prev = &s->pending;
	atomic_init(&s->msize, 0);
	return s;
}

void p9_session_free(struct p9_session *s)
{
	if (!s)
		return;
	fid_clear_all(s);
	free(s->buckets);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->done_cond);
	free(s);
}

uint32_t p9_session_msize(struct p9_session *s)
{
	uint32_t m = atomic_load(&s->msize);

	return m ? m : s->srv->msize;
}

void p9_session_stats(struct p9_session *s, struct p9_stats *st)
{
	pthread_mutex_lock(&s->lock);
	st->fids = s->nfids;
	st->pending = s->npending;
	pthread_mutex_unlock(&s->lock);
	st->open = atomic_load(&s->nopen);
	st->nodes = atomic_load(&s->srv->nodes);
	st->fds = atomic_load(&s->fds);
	st->max_fds = s->srv->lim.max_fds;
}

void p9_server_stats(struct p9_server *srv, struct p9_server_stats *st)
{
	for (unsigned int i = 0; i < P9_STAT_TYPES; i++)
		st->ops[i] = __atomic_load_n(&srv->st_ops[i], __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&srv->st_errors, __ATOMIC_RELAXED);
	st->bytes_read = __atomic_load_n(&srv->st_read, __ATOMIC_RELAXED);
	st->bytes_written = __atomic_load_n(&srv->st_written, __ATOMIC_RELAXED);
	st->fids = __atomic_load_n(&srv->st_fids, __ATOMIC_RELAXED);
	st->open = __atomic_load_n(&srv->st_open, __ATOMIC_RELAXED);
}

int p9_server_open(const struct p9_server_cfg *cfg, struct p9_server **out,
		   char *err, size_t errlen)
{
	struct p9_server *srv;
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_FLAGS };
	struct stat st;
	unsigned int sessions;
	uint64_t pool;
	int fd, probe;

	fd = open(cfg->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "share %s: %s", cfg->path, strerror(e));
		return -e;
	}
	probe = syscall(SYS_openat2, fd, ".", &how, sizeof(how));
	if (probe < 0) {
		int e = errno;

		close(fd);
		snprintf(err, errlen, e == ENOSYS ?
			 "share %s: this kernel lacks openat2 (Linux >= 5.6 needed to confine the share)" :
			 "share %s: openat2 failed: %s", cfg->path, strerror(e));
		return -e;
	}
	close(probe);
	if (fstat(fd, &st)) {
		int e = errno;

		close(fd);
		snprintf(err, errlen, "share %s: %s", cfg->path, strerror(e));
		return -e;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	srv->procfd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (srv->procfd < 0) {
		int e = errno;

		close(fd);
		free(srv);
		snprintf(err, errlen, "share %s: /proc/self/fd: %s (is /proc mounted?)",
			 cfg->path, strerror(e));
		return -e;
	}
	srv->root = node_new(srv, NULL, fd, NULL, "", 0);
	if (!srv->root) {
		close(fd);
		close(srv->procfd);
		free(srv);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	srv->root_dev = st.st_dev;
	srv->ro = cfg->ro;
	srv->is_root = geteuid() == 0;
	srv->sec = cfg->security;
	/* mapped-xattr keeps every owner and mode in user xattrs: a file
	 * system without them could store nothing the guest creates. */
	if (srv->sec == P9_SEC_MAPPED_XATTR && !srv->ro) {
		char path[40];

		proc_path(fd, path, sizeof(path));
		if (getxattr(path, VIRTFS_MODE, NULL, 0) < 0 &&
		    (errno == EOPNOTSUPP || errno == ENOTSUP)) {
			snprintf(err, errlen, "share %s: its file system has no user extended attributes, which security=mapped-xattr needs (security=none works without them)",
				 cfg->path);
			node_put(srv, srv->root);
			close(srv->procfd);
			free(srv);
			return -EOPNOTSUPP;
		}
	}
	srv->msize = cfg->msize ? cfg->msize : (4u << 20);
	if (srv->msize < P9_MIN_MSIZE)
		srv->msize = P9_MIN_MSIZE;
	srv->lim = cfg->lim;
	sessions = cfg->max_sessions ? cfg->max_sessions : 1;
	/* An equal share of P9_FIDS_TOTAL (a fid is ~130 bytes of heap),
	 * so that many connections cannot add up to gigabytes. */
	if (!srv->lim.max_fids) {
		uint32_t share = P9_FIDS_TOTAL / sessions;

		srv->lim.max_fids = share > P9_MAX_SESSION_FIDS ? P9_MAX_SESSION_FIDS :
				    share < P9_MIN_SESSION_FIDS ? P9_MIN_SESSION_FIDS :
				    share;
	}
	if (!srv->lim.max_open)
		srv->lim.max_open = 4096;
	if (!srv->lim.max_pending)
		srv->lim.max_pending = 1024;
	pool = fd_budget(cfg->fd_reserve);
	fd_pool_set(pool);
	if (!srv->lim.max_fds)
		srv->lim.max_fds = pool / sessions > UINT32_MAX ? UINT32_MAX :
				   pool / sessions;
	if (srv->lim.max_fds < P9_MIN_SESSION_FDS && !cfg->lim.max_fds) {
		snprintf(err, errlen, "share %s: the descriptor limit (RLIMIT_NOFILE) leaves %llu descriptors for 9P, fewer than %u for each of %u sessions: raise it (ulimit -n) or allow fewer sessions",
			 cfg->path, (unsigned long long)pool, P9_MIN_SESSION_FDS,
			 sessions);
		p9_server_close(srv);
		return -EMFILE;
	}
	/* The same for extended-attribute values in flight. */
	if (!srv->lim.xattr_budget) {
		uint32_t share = P9_XATTR_TOTAL / sessions;

		srv->lim.xattr_budget = share > P9_MAX_SESSION_XATTR ? P9_MAX_SESSION_XATTR :
					share < P9_MIN_SESSION_XATTR ? P9_MIN_SESSION_XATTR :
					share;
	}
	*out = srv;
	return 0;
}

void p9_server_close(struct p9_server *srv)
{
	if (!srv)
		return;
	node_put(srv, srv->root);
	close(srv->procfd);
	free(srv);
}
