/* 9P2000.L server: fids, confined path resolution over O_PATH descriptors,
 * and one handler per message. Payloads of read, write and readdir go
 * between the host file and the transport's iovecs without a bounce
 * buffer, so a request costs memory by its own size, never by msize. */
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/iov.h"
#include "p9/proto.h"
#include "p9/server.h"

#define P9_MIN_MSIZE 4096
/* A request other than Twrite carries at most 16 names of 255 bytes, or a
 * name and a symlink target: this bounds what is copied to decode it. */
#define P9_SMALL_MAX 8192
#define P9_NAME_MAX 255
#define P9_TARGET_MAX 4095
#define XATTR_MAX 65536
#define REPLY_BUF 512

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)

/* A host object reached by a walk: an O_PATH descriptor, and where it was
 * reached from (for Tremove/Trename and for ".."). Nodes are shared by
 * cloned fids and by children; the root node has no parent. */
struct p9_node {
	atomic_uint refs;
	int fd;
	struct p9_session *sess;	/* whose budget fd is in (the root: none) */
	struct p9_node *parent;
	uint16_t namelen;
	char name[];
};

enum fid_kind { FID_PATH, FID_FILE, FID_DIR, FID_XATTR_READ, FID_XATTR_WRITE };

struct p9_fid {
	uint32_t fid;
	struct p9_fid *hnext;
	unsigned int refs;		/* under session lock */
	bool unlinked;			/* out of the table (clunk, remove) */
	uint32_t uid;
	struct p9_node *node;
	_Atomic int ofd;		/* opened descriptor, -1 until lopen */
	_Atomic int kind;
	pthread_mutex_t lock;		/* readdir position, xattr state */
	/* xattr fids */
	char *xname;
	uint8_t *xbuf;
	size_t xsize, xcopied;
	int xflags;
};

struct p9_server {
	struct p9_node *root;
	int procfd;			/* /proc/self/fd, to reopen O_PATH fds */
	dev_t root_dev;
	bool ro;
	bool is_root;			/* running as uid 0: pass uid/gid through */
	enum p9_security sec;
	uint32_t msize;
	struct p9_limits lim;
	atomic_uint nodes;
};

struct p9_session {
	struct p9_server *srv;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	struct p9_fid **buckets;
	uint32_t nbuckets;
	uint32_t nfids;
	atomic_uint nopen;
	atomic_uint fds;		/* host descriptors held, see fd_take */
	atomic_uint xattr_bytes;
	_Atomic uint32_t msize;
	struct p9_req pending;		/* list head */
	uint32_t npending;
	uint64_t seq;
};

/* ---------- iovec helpers ---------- */

/* preadv2/pwritev2 over any number of iovecs, until all is moved or EOF.
 * With RWF_NOWAIT in flags, returns -EAGAIN as soon as the kernel would
 * block (what was moved so far is not reported: the caller starts over);
 * a file system without RWF_NOWAIT gets plain calls. */
static ssize_t rw_iov(int fd, bool write, struct iovec *iov, unsigned int n,
		      uint64_t off, int flags)
{
	size_t done = 0, skip = 0;	/* skip: bytes done in iov[i] */
	unsigned int i = 0;

	while (i < n) {
		unsigned int cnt = n - i > IOV_MAX ? IOV_MAX : n - i;
		struct iovec save = iov[i];
		size_t adv;
		ssize_t r;

		if (off + done > INT64_MAX)
			return done ? (ssize_t)done : -EINVAL;
		iov[i].iov_base = (uint8_t *)iov[i].iov_base + skip;
		iov[i].iov_len -= skip;
		r = write ? pwritev2(fd, iov + i, cnt, off + done, flags)
			  : preadv2(fd, iov + i, cnt, off + done, flags);
		iov[i] = save;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if ((flags & RWF_NOWAIT) && errno == EAGAIN)
				return -EAGAIN;
			if ((flags & RWF_NOWAIT) && errno == EOPNOTSUPP) {
				flags &= ~RWF_NOWAIT;
				continue;
			}
			return done ? (ssize_t)done : -errno;
		}
		if (r == 0)
			break;		/* EOF */
		done += r;
		adv = r + skip;
		while (i < n && adv >= iov[i].iov_len) {
			adv -= iov[i].iov_len;
			i++;
		}
		skip = adv;
	}
	return done;
}

/* ---------- descriptor budget ---------- */

/* Descriptors held by every 9P server of the process, and how many they
 * may hold (see P9_FD_RESERVE); set as each server opens. */
static atomic_uint fds_used;
static atomic_uint fds_pool;

/* Takes one descriptor from the session's share and from the process's
 * budget, before the open that needs it, so the process itself never runs
 * out: a guest's walks fail with EMFILE, never another device's setup. */
static int fd_take(struct p9_session *s)
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

static void fd_give(struct p9_session *s)
{
	atomic_fetch_sub(&fds_used, 1);
	atomic_fetch_sub(&s->fds, 1);
}

/* The process's budget for 9P under the current soft limit, less extra. */
static uint64_t fd_budget(uint64_t extra)
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

/* ---------- nodes ---------- */

/* fd is already counted in sess's budget (fd_take), which the node
 * gives back when it closes fd. */
static struct p9_node *node_new(struct p9_server *srv, struct p9_session *sess,
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

static void node_get(struct p9_node *n)
{
	atomic_fetch_add(&n->refs, 1);
}

static void node_put(struct p9_server *srv, struct p9_node *n)
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

static struct p9_fid *fid_get(struct p9_session *s, uint32_t fid)
{
	struct p9_fid *f;

	pthread_mutex_lock(&s->lock);
	f = fid_find_locked(s, fid);
	if (f)
		f->refs++;
	pthread_mutex_unlock(&s->lock);
	return f;
}

static void fid_put(struct p9_session *s, struct p9_fid *f)
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
static int fid_swap_node(struct p9_session *s, struct p9_fid *f,
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
static int fid_add(struct p9_session *s, uint32_t fid, struct p9_node *node,
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
	return 0;
}

/* Removes fid from the table; the caller's reference (if any) still holds
 * it. Returns the fid (with one reference for the caller) or NULL. */
static struct p9_fid *fid_unlink(struct p9_session *s, uint32_t fid)
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
	return f;	/* the table's reference passes to the caller */
}

/* Empties the table in one sweep of the buckets (a rescan from bucket 0
 * per fid would be quadratic with a full table), then drops the table's
 * references outside the session lock, as fid_free closes descriptors. */
static void fid_clear_all(struct p9_session *s)
{
	struct p9_fid *list = NULL, *f, *next;

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
	s->nfids = 0;
	pthread_mutex_unlock(&s->lock);
	for (f = list; f; f = next) {
		next = f->hnext;
		fid_put(s, f);
	}
}

/* ---------- host helpers ---------- */

static int check_name(const struct p9_str *n, char *buf)
{
	if (!n->len)
		return -EINVAL;
	if (n->len > P9_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(n->s, '/', n->len) || memchr(n->s, 0, n->len))
		return -EINVAL;
	memcpy(buf, n->s, n->len);
	buf[n->len] = 0;
	if (!strcmp(buf, ".") || !strcmp(buf, ".."))
		return -EINVAL;
	return 0;
}

static int open_beneath(int dirfd, const char *name, uint64_t flags,
			uint64_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.mode = mode,
		.resolve = RESOLVE_FLAGS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : (int)fd;
}

static int node_stat(struct p9_node *n, struct stat *st)
{
	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -errno;
	return 0;
}

/* Tremove and Trename act on the name a fid was walked by. That name goes
 * stale when another fid renames or removes the file (nodes keep the name
 * they were reached by), and may by then name another file: refuse with
 * ESTALE unless the name still leads to the node's own file. st gets the
 * node's stat. */
static int node_name_check(struct p9_node *n, struct stat *st)
{
	struct stat by_name;
	int ret = node_stat(n, st);

	if (ret)
		return ret;
	if (fstatat(n->parent->fd, n->name, &by_name, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? -ESTALE : -errno;
	if (by_name.st_dev != st->st_dev || by_name.st_ino != st->st_ino)
		return -ESTALE;
	return 0;
}

static void make_qid(struct p9_server *srv, const struct stat *st,
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

static int proc_name(int fd, char *buf)
{
	snprintf(buf, 16, "%d", fd);
	return 0;
}

static int proc_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
	return 0;
}

/* ---------- security models ---------- */

/* mapped-xattr: where the guest's view of an object is kept (QEMU's names
 * and sizes, so a folder can move between the two VMMs). */
#define VIRTFS_PREFIX "user.virtfs."
#define VIRTFS_UID "user.virtfs.uid"
#define VIRTFS_GID "user.virtfs.gid"
#define VIRTFS_MODE "user.virtfs.mode"
#define VIRTFS_RDEV "user.virtfs.rdev"
/* ... and the host modes of its objects: the server's alone. */
#define MAPPED_FILE_MODE 0600
#define MAPPED_DIR_MODE 0700

/* Outside passthrough no host object is made setuid, nor setgid unless it
 * is a folder (where setgid only picks the group of new entries, and they
 * stay the server's anyway). */
static uint32_t host_safe_mode(mode_t type, uint32_t mode)
{
	mode &= 07777;
	return S_ISDIR(type) ? mode & ~S_ISUID : mode & ~(S_ISUID | S_ISGID);
}

/* The mode a new object gets from the create call itself: never more
 * than the model allows, so there is no window with a setuid file. */
static uint32_t create_mode(struct p9_server *srv, mode_t type, uint32_t mode)
{
	switch (srv->sec) {
	case P9_SEC_PASSTHROUGH:
		return mode & 07777;
	case P9_SEC_NONE:
		return host_safe_mode(type, mode);
	default:
		return S_ISDIR(type) ? MAPPED_DIR_MODE : MAPPED_FILE_MODE;
	}
}

static int mx_put(int fd, const char *name, uint64_t v, size_t len)
{
	char path[40];
	uint8_t b[8];

	for (size_t i = 0; i < len; i++)
		b[i] = v >> (8 * i);
	proc_path(fd, path, sizeof(path));
	return setxattr(path, name, b, len, 0) ? -errno : 0;
}

static bool mx_get(const char *path, bool follow, const char *name,
		   uint64_t *v, size_t len)
{
	uint8_t b[8];

	if ((follow ? getxattr(path, name, b, len) :
		      lgetxattr(path, name, b, len)) != (ssize_t)len)
		return false;
	*v = 0;
	for (size_t i = 0; i < len; i++)
		*v |= (uint64_t)b[i] << (8 * i);
	return true;
}

/* The type a guest's stored mode may give a host object: a regular host
 * file stands for the guest's FIFOs, sockets and device nodes; anything
 * else on the host is what it is. */
static mode_t mapped_type(mode_t host, uint32_t stored)
{
	if (S_ISREG(host)) {
		switch (stored & S_IFMT) {
		case S_IFIFO:
		case S_IFSOCK:
		case S_IFCHR:
		case S_IFBLK:
			return stored & S_IFMT;
		}
	}
	return host & S_IFMT;
}

/* Overlays the stored owner, mode and rdev on st, the host's stat of the
 * object at path (a /proc/self/fd magic link, followed). Symlinks carry
 * no user xattrs. The server always stores mode, uid and gid together,
 * so an object without a stored mode (one the host made) costs one
 * lookup, not three. */
static void mapped_overlay(const char *path, struct stat *st)
{
	uint64_t v;

	if (S_ISLNK(st->st_mode) || !mx_get(path, true, VIRTFS_MODE, &v, 4))
		return;
	st->st_mode = mapped_type(st->st_mode, v) | (v & 07777);
	if (mx_get(path, true, VIRTFS_UID, &v, 4))
		st->st_uid = v;
	if (mx_get(path, true, VIRTFS_GID, &v, 4))
		st->st_gid = v;
	if ((S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) &&
	    mx_get(path, true, VIRTFS_RDEV, &v, 8))
		st->st_rdev = v;
}

/* The attributes the guest sees for a node. */
static int node_guest_stat(struct p9_server *srv, struct p9_node *n,
			   struct stat *st)
{
	char path[40];

	if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (srv->sec == P9_SEC_MAPPED_XATTR) {
		proc_path(n->fd, path, sizeof(path));
		mapped_overlay(path, st);
	}
	return 0;
}

/* Gives a new object (fd: an O_PATH descriptor of it) the owner and mode
 * the client asked for, as far as the security model lets them reach the
 * host: passthrough applies both (the owner only when running as root),
 * none keeps the server's owner and a safe mode, mapped-xattr stores the
 * client's owner, mode (type included) and rdev and keeps the host object
 * the server's at 0600/0700. The process umask must not apply, so the
 * mode is set again after the create. Returns -errno when mapped-xattr
 * cannot store the attributes; the caller then removes the object. */
static int set_new_attrs(struct p9_server *srv, int fd, uint32_t uid,
			 uint32_t gid, uint32_t mode, uint64_t rdev)
{
	struct stat st;
	uint32_t want;
	char nm[16];
	int ret;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		if (srv->sec == P9_SEC_PASSTHROUGH && srv->is_root)
			(void)!fchownat(fd, "", uid, gid,
					AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	switch (srv->sec) {
	case P9_SEC_PASSTHROUGH:
		/* chown clears setuid and setgid: the mode is compared after */
		if (srv->is_root &&
		    !fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) &&
		    fstat(fd, &st))
			return -errno;
		want = mode & 07777;
		break;
	case P9_SEC_NONE:
		want = host_safe_mode(st.st_mode, mode);
		break;
	default:
		ret = mx_put(fd, VIRTFS_UID, uid, 4);
		if (!ret)
			ret = mx_put(fd, VIRTFS_GID, gid, 4);
		if (!ret)
			ret = mx_put(fd, VIRTFS_MODE, mode, 4);
		if (!ret && (S_ISCHR(mode) || S_ISBLK(mode)))
			ret = mx_put(fd, VIRTFS_RDEV, rdev, 8);
		if (ret)
			return ret;
		want = create_mode(srv, st.st_mode, mode);
		break;
	}
	if ((st.st_mode & 07777) != want) {
		proc_name(fd, nm);
		(void)!fchmodat(srv->procfd, nm, want, 0);
	}
	return 0;
}

/* ---------- request handling ---------- */

struct op {
	struct p9_session *s;
	struct p9_server *srv;
	struct p9_msg *m;
	struct p9_msg *r;
	struct iovec *in;
	unsigned int nin;
	struct iovec *out;
	unsigned int nout;
	size_t out_len;
	struct p9_req *req;
};

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

static int walk_one(struct op *o, struct p9_node *cur, const struct p9_str *nm,
		    struct p9_node **next, struct p9_qid *qid)
{
	char name[P9_NAME_MAX + 1];
	struct stat st;
	int fd, ret;

	if (nm->len == 2 && !memcmp(nm->s, "..", 2)) {
		/* ".." goes back the way the walk came; at the root it
		 * stays there. */
		*next = cur->parent ? cur->parent : cur;
		node_get(*next);
	} else if (nm->len == 1 && nm->s[0] == '.') {
		*next = cur;
		node_get(cur);
	} else {
		ret = check_name(nm, name);
		if (ret)
			return ret;
		ret = fd_take(o->s);
		if (ret)
			return ret;
		fd = open_beneath(cur->fd, name, O_PATH | O_NOFOLLOW, 0);
		if (fd < 0) {
			fd_give(o->s);
			return fd;
		}
		*next = node_new(o->srv, o->s, fd, cur, name, nm->len);
		if (!*next) {
			close(fd);
			fd_give(o->s);
			return -ENOMEM;
		}
	}
	ret = node_stat(*next, &st);
	if (ret) {
		node_put(o->srv, *next);
		return ret;
	}
	make_qid(o->srv, &st, qid);
	return 0;
}

static int h_walk(struct op *o)
{
	struct p9_session *s = o->s;
	uint32_t fid = o->m->u.twalk.fid, newfid = o->m->u.twalk.newfid;
	unsigned int nw = o->m->u.twalk.nwname, i;
	struct p9_fid *f = fid_get(s, fid);
	struct p9_node *cur;
	int ret = 0;

	if (!f)
		return -EBADF;
	if (newfid != fid) {
		struct p9_fid *g = fid_get(s, newfid);

		if (g) {
			fid_put(s, g);
			fid_put(s, f);
			return -EEXIST;
		}
	}
	cur = f->node;
	node_get(cur);
	for (i = 0; i < nw; i++) {
		struct p9_node *next;

		ret = walk_one(o, cur, &o->m->u.twalk.wname[i], &next,
			       &o->r->u.rwalk.wqid[i]);
		if (ret)
			break;
		node_put(o->srv, cur);
		cur = next;
	}
	o->r->u.rwalk.nwqid = i;
	if (i < nw) {
		node_put(o->srv, cur);
		fid_put(s, f);
		/* The first name failing is an error; later ones give a
		 * partial Rwalk and no new fid. */
		return i == 0 ? ret : 0;
	}
	if (newfid == fid) {
		struct p9_node *old;

		if (atomic_load(&f->ofd) >= 0 || atomic_load(&f->kind) != FID_PATH) {
			node_put(o->srv, cur);
			fid_put(s, f);
			return -EBUSY;
		}
		ret = fid_swap_node(s, f, cur, &old);
		node_put(o->srv, ret ? cur : old);
	} else {
		ret = fid_add(s, newfid, cur, f->uid);
		if (ret)
			node_put(o->srv, cur);
	}
	fid_put(s, f);
	return ret;
}

static int h_getattr(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tgetattr.fid);
	struct p9_attr *a = &o->r->u.rgetattr.a;
	struct stat st;
	int ret;

	if (!f)
		return -EBADF;
	ret = node_guest_stat(o->srv, f->node, &st);
	fid_put(o->s, f);
	if (ret)
		return ret;
	o->r->u.rgetattr.valid = P9_GETATTR_BASIC;
	make_qid(o->srv, &st, &o->r->u.rgetattr.qid);
	memset(a, 0, sizeof(*a));
	a->mode = st.st_mode;
	a->uid = st.st_uid;
	a->gid = st.st_gid;
	a->nlink = st.st_nlink;
	a->rdev = st.st_rdev;
	a->size = st.st_size;
	a->blksize = st.st_blksize;
	a->blocks = st.st_blocks;
	a->atime_sec = st.st_atim.tv_sec;
	a->atime_nsec = st.st_atim.tv_nsec;
	a->mtime_sec = st.st_mtim.tv_sec;
	a->mtime_nsec = st.st_mtim.tv_nsec;
	a->ctime_sec = st.st_ctim.tv_sec;
	a->ctime_nsec = st.st_ctim.tv_nsec;
	return 0;
}

/* Mode and owner under passthrough and none. */
static int setattr_host(struct op *o, struct p9_fid *f, const struct stat *st)
{
	uint32_t valid = o->m->u.tsetattr.valid;
	struct p9_server *srv = o->srv;
	int fd = f->node->fd;
	uint32_t mode = o->m->u.tsetattr.mode & 07777;
	char nm[16];

	proc_name(fd, nm);
	if (valid & P9_SETATTR_MODE) {
		if (srv->sec != P9_SEC_PASSTHROUGH)
			mode = host_safe_mode(st->st_mode, mode);
		if (fchmodat(srv->procfd, nm, mode, 0))
			return -errno;
	}
	/* none: the host file stays the server's; like QEMU's none, the
	 * client is not told that its chown did not reach the host. */
	if ((valid & (P9_SETATTR_UID | P9_SETATTR_GID)) &&
	    srv->sec == P9_SEC_PASSTHROUGH) {
		uid_t uid = valid & P9_SETATTR_UID ? o->m->u.tsetattr.uid : (uid_t)-1;
		gid_t gid = valid & P9_SETATTR_GID ? o->m->u.tsetattr.gid : (gid_t)-1;

		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
			return -errno;
	}
	return 0;
}

/* Mode and owner under mapped-xattr: stored, the host object untouched. A
 * symlink cannot carry them; its chown is accepted and changes nothing. */
static int setattr_mapped(struct op *o, struct p9_fid *f, const struct stat *st)
{
	uint32_t valid = o->m->u.tsetattr.valid;
	struct stat gst = *st;
	char path[40];
	int fd = f->node->fd, ret;

	if (S_ISLNK(st->st_mode) ||
	    !(valid & (P9_SETATTR_MODE | P9_SETATTR_UID | P9_SETATTR_GID)))
		return 0;
	/* The guest's view so far (the stored type of a guest's FIFO or
	 * device is kept), changed as asked, stored whole: see
	 * mapped_overlay. */
	proc_path(fd, path, sizeof(path));
	mapped_overlay(path, &gst);
	if (valid & P9_SETATTR_MODE)
		gst.st_mode = (gst.st_mode & S_IFMT) |
			      (o->m->u.tsetattr.mode & 07777);
	if (valid & P9_SETATTR_UID)
		gst.st_uid = o->m->u.tsetattr.uid;
	if (valid & P9_SETATTR_GID)
		gst.st_gid = o->m->u.tsetattr.gid;
	ret = mx_put(fd, VIRTFS_UID, gst.st_uid, 4);
	if (!ret)
		ret = mx_put(fd, VIRTFS_GID, gst.st_gid, 4);
	if (!ret)
		ret = mx_put(fd, VIRTFS_MODE, gst.st_mode, 4);
	return ret;
}

static int do_setattr(struct op *o, struct p9_fid *f)
{
	uint32_t valid = o->m->u.tsetattr.valid;
	struct p9_server *srv = o->srv;
	int fd = f->node->fd;
	char nm[16];
	struct stat st;
	int ret;

	if (valid & ~0x1ffu)
		return -EINVAL;
	if (srv->ro && (valid & ~P9_SETATTR_CTIME))
		return -EROFS;
	ret = node_stat(f->node, &st);
	if (ret)
		return ret;
	proc_name(fd, nm);
	if ((valid & P9_SETATTR_MODE) && S_ISLNK(st.st_mode))
		return -EOPNOTSUPP;
	ret = srv->sec == P9_SEC_MAPPED_XATTR ? setattr_mapped(o, f, &st) :
	      setattr_host(o, f, &st);
	if (ret)
		return ret;
	if (valid & P9_SETATTR_SIZE) {
		int wfd;

		if (!S_ISREG(st.st_mode))
			return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		if (o->m->u.tsetattr.size > INT64_MAX)
			return -EFBIG;
		ret = fd_take(o->s);
		if (ret)
			return ret;
		wfd = openat(srv->procfd, nm, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
		ret = wfd < 0 ? -errno :
		      ftruncate(wfd, o->m->u.tsetattr.size) ? -errno : 0;
		if (wfd >= 0)
			close(wfd);
		fd_give(o->s);
		if (ret)
			return ret;
	}
	if (valid & (P9_SETATTR_ATIME | P9_SETATTR_MTIME)) {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

		if (valid & P9_SETATTR_ATIME) {
			ts[0].tv_nsec = UTIME_NOW;
			if (valid & P9_SETATTR_ATIME_SET) {
				ts[0].tv_sec = o->m->u.tsetattr.atime_sec;
				ts[0].tv_nsec = o->m->u.tsetattr.atime_nsec;
				if (ts[0].tv_nsec >= 1000000000)
					return -EINVAL;
			}
		}
		if (valid & P9_SETATTR_MTIME) {
			ts[1].tv_nsec = UTIME_NOW;
			if (valid & P9_SETATTR_MTIME_SET) {
				ts[1].tv_sec = o->m->u.tsetattr.mtime_sec;
				ts[1].tv_nsec = o->m->u.tsetattr.mtime_nsec;
				if (ts[1].tv_nsec >= 1000000000)
					return -EINVAL;
			}
		}
		if (utimensat(srv->procfd, nm, ts, 0))
			return -errno;
	}
	return 0;
}

static int h_setattr(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tsetattr.fid);
	int ret;

	if (!f)
		return -EBADF;
	ret = do_setattr(o, f);
	fid_put(o->s, f);
	return ret;
}

static int open_flags(uint32_t p9, bool ro)
{
	int fl = p9 & P9_DOTL_ACCMODE;

	if (fl == 3)
		return -EINVAL;
	if (ro && (fl != O_RDONLY || (p9 & P9_DOTL_TRUNC)))
		return -EROFS;
	if (p9 & P9_DOTL_TRUNC)
		fl |= O_TRUNC;
	if (p9 & P9_DOTL_APPEND)
		fl |= O_APPEND;
	if (p9 & P9_DOTL_DSYNC)
		fl |= O_DSYNC;
	if ((p9 & P9_DOTL_SYNC) == P9_DOTL_SYNC)
		fl |= O_SYNC;
	if (p9 & P9_DOTL_DIRECTORY)
		fl |= O_DIRECTORY;
	/* Never block a worker on a FIFO without a peer; ignored for
	 * regular files. */
	return fl | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
}

/* An open file: a slot of max_open and a descriptor of the budget. */
static int take_open_slot(struct p9_session *s)
{
	int ret;

	if (atomic_fetch_add(&s->nopen, 1) >= s->srv->lim.max_open) {
		atomic_fetch_sub(&s->nopen, 1);
		return -EMFILE;
	}
	ret = fd_take(s);
	if (ret)
		atomic_fetch_sub(&s->nopen, 1);
	return ret;
}

static void give_open_slot(struct p9_session *s)
{
	atomic_fetch_sub(&s->nopen, 1);
	fd_give(s);
}

static int h_lopen(struct op *o)
{
	struct p9_session *s = o->s;
	struct p9_fid *f = fid_get(s, o->m->u.tlopen.fid);
	struct stat st;
	char nm[16];
	int fl, fd, ret, expect = -1;

	if (!f)
		return -EBADF;
	ret = node_stat(f->node, &st);
	if (ret)
		goto out;
	ret = fl = open_flags(o->m->u.tlopen.flags, o->srv->ro);
	if (ret < 0)
		goto out;
	if (S_ISLNK(st.st_mode)) {
		ret = -ELOOP;
		goto out;
	}
	/* Device nodes would reach host devices: never opened. */
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		ret = -EACCES;
		goto out;
	}
	ret = take_open_slot(s);
	if (ret)
		goto out;
	proc_name(f->node->fd, nm);
	fd = openat(o->srv->procfd, nm, fl);
	if (fd < 0) {
		ret = -errno;
		give_open_slot(s);
		goto out;
	}
	pthread_mutex_lock(&f->lock);
	if (!atomic_compare_exchange_strong(&f->ofd, &expect, fd) ||
	    atomic_load(&f->kind) != FID_PATH) {
		pthread_mutex_unlock(&f->lock);
		close(fd);
		give_open_slot(s);
		ret = -EBUSY;
		goto out;
	}
	atomic_store(&f->kind, S_ISDIR(st.st_mode) ? FID_DIR : FID_FILE);
	pthread_mutex_unlock(&f->lock);
	make_qid(o->srv, &st, &o->r->u.ropen.qid);
	o->r->u.ropen.iounit = 0;
	ret = 0;
out:
	fid_put(s, f);
	return ret;
}

/* Tlcreate of a name that exists (no P9_DOTL_EXCL) opens that file, which
 * must be a regular one: a device node would reach a host device (which
 * Tlopen refuses too), and a directory, FIFO or socket is no file to
 * create. The type is checked on an O_PATH descriptor before any real
 * open (opening a device has effects), and the open goes through that
 * same descriptor, so a name swapped in between changes nothing. Returns
 * the opened descriptor and its O_PATH one. */
static int open_existing(struct p9_server *srv, int dirfd, const char *name,
			 int fl, int *fdp, int *pfdp)
{
	struct stat st;
	char nm[16];
	int fd, pfd, ret;

	pfd = open_beneath(dirfd, name, O_PATH | O_NOFOLLOW, 0);
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &st)) {
		ret = -errno;
		close(pfd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		return S_ISLNK(st.st_mode) ? -ELOOP : -EACCES;
	}
	proc_name(pfd, nm);
	fd = openat(srv->procfd, nm, fl);
	if (fd < 0) {
		ret = -errno;
		close(pfd);
		return ret;
	}
	*fdp = fd;
	*pfdp = pfd;
	return 0;
}

static int h_lcreate(struct op *o)
{
	struct p9_session *s = o->s;
	struct p9_server *srv = o->srv;
	struct p9_fid *f = fid_get(s, o->m->u.tlcreate.fid);
	char name[P9_NAME_MAX + 1], nm[16];
	struct p9_node *node, *old;
	uint32_t p9fl = o->m->u.tlcreate.flags;
	bool created = true, pfd_counted = true;
	struct stat st;
	int fl, fd, pfd = -1, ret;

	if (!f)
		return -EBADF;
	ret = check_name(&o->m->u.tlcreate.name, name);
	if (ret)
		goto out;
	if (srv->ro) {
		ret = -EROFS;
		goto out;
	}
	ret = fl = open_flags(p9fl, false);
	if (ret < 0)
		goto out;
	if (atomic_load(&f->ofd) >= 0 || atomic_load(&f->kind) != FID_PATH) {
		ret = -EBUSY;
		goto out;
	}
	/* the open file, and the O_PATH descriptor of the new node */
	ret = take_open_slot(s);
	if (ret)
		goto out;
	ret = fd_take(s);
	if (ret) {
		give_open_slot(s);
		goto out;
	}
	/* O_EXCL first, to know whether the mode and owner are ours to set;
	 * O_NOFOLLOW so an existing symlink is never opened through. */
	fd = open_beneath(f->node->fd, name, fl | O_CREAT | O_EXCL | O_NOFOLLOW,
			  create_mode(srv, S_IFREG, o->m->u.tlcreate.mode));
	if (fd == -EEXIST && !(p9fl & P9_DOTL_EXCL)) {
		created = false;
		ret = open_existing(srv, f->node->fd, name, fl, &fd, &pfd);
		if (ret)
			goto out_slot;
	} else {
		if (fd < 0) {
			ret = fd;
			goto out_slot;
		}
		proc_name(fd, nm);
		pfd = openat(srv->procfd, nm, O_PATH | O_CLOEXEC);
		if (pfd < 0) {
			ret = -errno;
			close(fd);
			goto out_slot;
		}
	}
	if (created)
		ret = set_new_attrs(srv, pfd, f->uid, o->m->u.tlcreate.gid,
				    S_IFREG | (o->m->u.tlcreate.mode & 07777), 0);
	if (ret) {
		unlinkat(f->node->fd, name, 0);
		close(fd);
		close(pfd);
		goto out_slot;
	}
	if (fstat(pfd, &st)) {
		ret = -errno;
		close(fd);
		close(pfd);
		goto out_slot;
	}
	node = node_new(srv, s, pfd, f->node, name, strlen(name));
	if (!node) {
		ret = -ENOMEM;
		close(fd);
		close(pfd);
		goto out_slot;
	}
	pfd_counted = false;	/* the node gives it back */
	pthread_mutex_lock(&f->lock);
	if (atomic_load(&f->ofd) >= 0 || atomic_load(&f->kind) != FID_PATH) {
		/* A concurrent request on the same fid got there first. */
		pthread_mutex_unlock(&f->lock);
		node_put(srv, node);
		close(fd);
		ret = -EBUSY;
		goto out_slot;
	}
	ret = fid_swap_node(s, f, node, &old);
	if (ret) {
		pthread_mutex_unlock(&f->lock);
		node_put(srv, node);
		close(fd);
		goto out_slot;
	}
	atomic_store(&f->ofd, fd);
	atomic_store(&f->kind, FID_FILE);
	pthread_mutex_unlock(&f->lock);
	node_put(srv, old);
	make_qid(srv, &st, &o->r->u.ropen.qid);
	o->r->u.ropen.iounit = 0;
	ret = 0;
	goto out;
out_slot:
	give_open_slot(s);
	if (pfd_counted)
		fd_give(s);
out:
	fid_put(s, f);
	return ret;
}

/* Common tail of mkdir, symlink, mknod: owner, mode and qid of the new
 * object, looked up without following it (mode carries the type the
 * client asked for). An object whose attributes cannot be stored is
 * removed again. */
static int new_object_qid(struct op *o, int dirfd, const char *name,
			  uint32_t uid, uint32_t gid, uint32_t mode,
			  uint64_t rdev, struct p9_qid *qid)
{
	struct stat st;
	int fd, ret = fd_take(o->s);

	if (ret) {
		unlinkat(dirfd, name, S_ISDIR(mode) ? AT_REMOVEDIR : 0);
		return ret;
	}
	fd = open_beneath(dirfd, name, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0) {
		fd_give(o->s);
		return fd;
	}
	ret = set_new_attrs(o->srv, fd, uid, gid, mode, rdev);
	if (ret)
		unlinkat(dirfd, name, S_ISDIR(mode) ? AT_REMOVEDIR : 0);
	else if (fstat(fd, &st))
		ret = -errno;
	close(fd);
	fd_give(o->s);
	if (!ret)
		make_qid(o->srv, &st, qid);
	return ret;
}

static int h_mkdir(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tmkdir.dfid);
	char name[P9_NAME_MAX + 1];
	uint32_t mode = o->m->u.tmkdir.mode & 07777;
	int ret;

	if (!f)
		return -EBADF;
	ret = check_name(&o->m->u.tmkdir.name, name);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret && mkdirat(f->node->fd, name,
			    create_mode(o->srv, S_IFDIR, mode)))
		ret = -errno;
	if (!ret)
		ret = new_object_qid(o, f->node->fd, name, f->uid,
				     o->m->u.tmkdir.gid, S_IFDIR | mode, 0,
				     &o->r->u.rqid.qid);
	fid_put(o->s, f);
	return ret;
}

static int h_symlink(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tsymlink.fid);
	const struct p9_str *t = &o->m->u.tsymlink.target;
	char name[P9_NAME_MAX + 1], target[P9_TARGET_MAX + 1];
	int ret;

	if (!f)
		return -EBADF;
	ret = check_name(&o->m->u.tsymlink.name, name);
	if (!ret && (!t->len || memchr(t->s, 0, t->len)))
		ret = -EINVAL;
	if (!ret && t->len > P9_TARGET_MAX)
		ret = -ENAMETOOLONG;
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret) {
		/* The target is stored as given: it is never followed by
		 * the server, only read back by the client. */
		memcpy(target, t->s, t->len);
		target[t->len] = 0;
		if (symlinkat(target, f->node->fd, name))
			ret = -errno;
	}
	if (!ret)
		ret = new_object_qid(o, f->node->fd, name, f->uid,
				     o->m->u.tsymlink.gid, S_IFLNK | 0777, 0,
				     &o->r->u.rqid.qid);
	fid_put(o->s, f);
	return ret;
}

static int h_mknod(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tmknod.dfid);
	char name[P9_NAME_MAX + 1];
	uint32_t mode = o->m->u.tmknod.mode;
	int ret;

	if (!f)
		return -EBADF;
	ret = check_name(&o->m->u.tmknod.name, name);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	/* Device nodes would give the guest host devices: mapped-xattr makes
	 * every special file a plain host file (the type in its xattrs), the
	 * others refuse device nodes. */
	if (!ret && !S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISREG(mode) &&
	    (o->srv->sec != P9_SEC_MAPPED_XATTR ||
	     (!S_ISCHR(mode) && !S_ISBLK(mode))))
		ret = S_ISCHR(mode) || S_ISBLK(mode) ? -EPERM : -EINVAL;
	if (!ret) {
		mode_t host = o->srv->sec == P9_SEC_MAPPED_XATTR ? S_IFREG :
			      mode & S_IFMT;

		if (mknodat(f->node->fd, name,
			    host | create_mode(o->srv, host, mode), 0))
			ret = -errno;
	}
	if (!ret)
		ret = new_object_qid(o, f->node->fd, name, f->uid,
				     o->m->u.tmknod.gid, mode & (S_IFMT | 07777),
				     makedev(o->m->u.tmknod.major,
					     o->m->u.tmknod.minor),
				     &o->r->u.rqid.qid);
	fid_put(o->s, f);
	return ret;
}

static int h_readlink(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tfid.fid);
	/* The reply is encoded from this buffer before the handler's
	 * caller returns: it lives in the op's reply scratch. */
	static _Thread_local char buf[P9_TARGET_MAX + 1];
	ssize_t n;

	if (!f)
		return -EBADF;
	n = readlinkat(f->node->fd, "", buf, sizeof(buf));
	fid_put(o->s, f);
	if (n < 0)
		return errno == ENOENT ? -EINVAL : -errno;
	if (n > P9_TARGET_MAX)
		return -ENAMETOOLONG;
	o->r->u.rreadlink.target = (struct p9_str){ n, buf };
	return 0;
}

static int h_link(struct op *o)
{
	struct p9_fid *d = fid_get(o->s, o->m->u.tlink.dfid);
	struct p9_fid *f = fid_get(o->s, o->m->u.tlink.fid);
	char name[P9_NAME_MAX + 1], nm[16];
	int ret;

	if (!d || !f) {
		ret = -EBADF;
		goto out;
	}
	ret = check_name(&o->m->u.tlink.name, name);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret) {
		/* Through /proc: linkat(AT_EMPTY_PATH) needs a capability
		 * iovm should not need. */
		proc_name(f->node->fd, nm);
		if (linkat(o->srv->procfd, nm, d->node->fd, name,
			   AT_SYMLINK_FOLLOW))
			ret = -errno;
	}
out:
	fid_put(o->s, d);
	fid_put(o->s, f);
	return ret;
}

static int h_rename(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.trename.fid);
	struct p9_fid *d = fid_get(o->s, o->m->u.trename.dfid);
	char name[P9_NAME_MAX + 1];
	struct stat st;
	int ret;

	if (!d || !f) {
		ret = -EBADF;
		goto out;
	}
	ret = check_name(&o->m->u.trename.name, name);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret && !f->node->parent)
		ret = -EBUSY;	/* the export root */
	if (!ret)
		ret = node_name_check(f->node, &st);
	if (!ret && renameat(f->node->parent->fd, f->node->name, d->node->fd,
			     name))
		ret = -errno;
out:
	fid_put(o->s, d);
	fid_put(o->s, f);
	return ret;
}

static int h_renameat(struct op *o)
{
	struct p9_fid *od = fid_get(o->s, o->m->u.trenameat.olddirfid);
	struct p9_fid *nd = fid_get(o->s, o->m->u.trenameat.newdirfid);
	char oldn[P9_NAME_MAX + 1], newn[P9_NAME_MAX + 1];
	int ret;

	if (!od || !nd) {
		ret = -EBADF;
		goto out;
	}
	ret = check_name(&o->m->u.trenameat.oldname, oldn);
	if (!ret)
		ret = check_name(&o->m->u.trenameat.newname, newn);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret && renameat(od->node->fd, oldn, nd->node->fd, newn))
		ret = -errno;
out:
	fid_put(o->s, od);
	fid_put(o->s, nd);
	return ret;
}

static int h_unlinkat(struct op *o)
{
	struct p9_fid *d = fid_get(o->s, o->m->u.tunlinkat.dfid);
	uint32_t flags = o->m->u.tunlinkat.flags;
	char name[P9_NAME_MAX + 1];
	int ret;

	if (!d)
		return -EBADF;
	ret = check_name(&o->m->u.tunlinkat.name, name);
	if (!ret && (flags & ~P9_AT_REMOVEDIR))
		ret = -EINVAL;
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret && unlinkat(d->node->fd, name,
			     flags & P9_AT_REMOVEDIR ? AT_REMOVEDIR : 0))
		ret = -errno;
	fid_put(o->s, d);
	return ret;
}

static int clunk_fid(struct p9_session *s, struct p9_fid *f)
{
	int ret = 0;

	/* An xattr written through this fid is set when it is clunked. */
	if (atomic_load(&f->kind) == FID_XATTR_WRITE) {
		char path[40];

		pthread_mutex_lock(&f->lock);
		proc_path(f->node->fd, path, sizeof(path));
		if (f->xcopied != f->xsize)
			ret = -EINVAL;
		else if (!f->xsize)
			ret = removexattr(path, f->xname) ? -errno : 0;
		else
			ret = setxattr(path, f->xname, f->xbuf, f->xsize,
				       f->xflags) ? -errno : 0;
		atomic_store(&f->kind, FID_PATH);
		pthread_mutex_unlock(&f->lock);
	}
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

static int h_remove(struct op *o)
{
	struct p9_fid *f = fid_unlink(o->s, o->m->u.tfid.fid);
	struct stat st;
	int ret;

	if (!f)
		return -EBADF;
	if (o->srv->ro)
		ret = -EROFS;
	else if (!f->node->parent)
		ret = -EBUSY;
	else
		ret = node_name_check(f->node, &st);
	if (!ret && unlinkat(f->node->parent->fd, f->node->name,
			     S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0))
		ret = -errno;
	/* Tremove clunks the fid whatever the outcome. */
	fid_put(o->s, f);
	return ret;
}

static int h_statfs(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tfid.fid);
	struct statfs sf;
	int ret;

	if (!f)
		return -EBADF;
	ret = fstatfs(f->node->fd, &sf) ? -errno : 0;
	fid_put(o->s, f);
	if (ret)
		return ret;
	o->r->u.rstatfs.type = sf.f_type;
	o->r->u.rstatfs.bsize = sf.f_bsize;
	o->r->u.rstatfs.blocks = sf.f_blocks;
	o->r->u.rstatfs.bfree = sf.f_bfree;
	o->r->u.rstatfs.bavail = sf.f_bavail;
	o->r->u.rstatfs.files = sf.f_files;
	o->r->u.rstatfs.ffree = sf.f_ffree;
	o->r->u.rstatfs.fsid = (uint32_t)sf.f_fsid.__val[0] |
			       (uint64_t)(uint32_t)sf.f_fsid.__val[1] << 32;
	o->r->u.rstatfs.namelen = sf.f_namelen;
	return 0;
}

/* Largest payload a reply may carry: msize and the reply buffers bound it. */
static int payload_room(struct op *o, uint32_t count, uint32_t *room)
{
	uint32_t msize = atomic_load(&o->s->msize);

	if (count > msize - P9_IOHDRSZ)
		return -EINVAL;
	if (o->out_len < P9_IOHDRSZ)
		return -ENOBUFS;
	*room = count;
	if (*room > o->out_len - P9_IOHDRSZ)
		*room = o->out_len - P9_IOHDRSZ;
	return 0;
}

static int h_read(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tread.fid);
	uint64_t off = o->m->u.tread.offset;
	struct iov_window w;
	uint32_t room;
	ssize_t n;
	int ret, kind, ofd;

	if (!f)
		return -EBADF;
	ret = payload_room(o, o->m->u.tread.count, &room);
	if (ret)
		goto out;
	kind = atomic_load(&f->kind);
	if (kind == FID_XATTR_READ) {
		pthread_mutex_lock(&f->lock);
		n = 0;
		if (off < f->xcopied) {
			n = f->xcopied - off < room ? f->xcopied - off : room;
			iov_from_buf(o->out, o->nout, P9_IOHDRSZ, f->xbuf + off, n);
		}
		pthread_mutex_unlock(&f->lock);
	} else if (kind == FID_FILE) {
		ofd = atomic_load(&f->ofd);
		if (off > INT64_MAX) {
			ret = -EINVAL;
			goto out;
		}
		iov_window(o->out, o->nout, P9_IOHDRSZ, room, &w);
		n = rw_iov(ofd, false, w.iov, w.n, off,
			   o->req->nowait ? RWF_NOWAIT : 0);
		iov_window_restore(&w);
		if (n == -EAGAIN && o->req->nowait)
			o->req->again = true;
		if (n < 0) {
			ret = n;
			goto out;
		}
	} else {
		ret = kind == FID_DIR ? -EISDIR : -EBADF;
		goto out;
	}
	o->r->u.rdata = (struct p9_data){ n, NULL };
out:
	fid_put(o->s, f);
	return ret;
}

static int h_write(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.twrite.fid);
	uint64_t off = o->m->u.twrite.offset;
	uint32_t count = o->m->u.twrite.d.count;
	struct iov_window w;
	ssize_t n;
	int ret = 0, kind;

	if (!f)
		return -EBADF;
	kind = atomic_load(&f->kind);
	if (kind == FID_XATTR_WRITE) {
		pthread_mutex_lock(&f->lock);
		if (off != f->xcopied || count > f->xsize - f->xcopied) {
			ret = -ENOSPC;
		} else if (iov_to_buf(o->in, o->nin, P9_TWRITE_HDRSZ,
				    f->xbuf + off, count) != count) {
			/* p9_handle checked count against the payload;
			 * never account bytes that were not copied. */
			ret = -EPROTO;
		} else {
			f->xcopied += count;
			n = count;
		}
		pthread_mutex_unlock(&f->lock);
		if (ret)
			goto out;
	} else if (kind == FID_FILE) {
		if (o->srv->ro) {
			ret = -EROFS;
			goto out;
		}
		if (off > INT64_MAX || count > INT64_MAX - off) {
			ret = -EFBIG;
			goto out;
		}
		iov_window(o->in, o->nin, P9_TWRITE_HDRSZ, count, &w);
		n = rw_iov(atomic_load(&f->ofd), true, w.iov, w.n, off, 0);
		iov_window_restore(&w);
		if (n < 0) {
			ret = n;
			goto out;
		}
	} else {
		ret = kind == FID_DIR ? -EISDIR : -EBADF;
		goto out;
	}
	o->r->u.rwrite.count = n;
out:
	fid_put(o->s, f);
	return ret;
}

/* mapped-xattr: the type of a regular host file as the guest made it
 * (a FIFO, socket or device node it created with mknod). */
static uint8_t mapped_dtype(int dirfd, const char *name)
{
	char path[300];
	uint64_t v;

	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name);
	if (!mx_get(path, false, VIRTFS_MODE, &v, 4))
		return DT_REG;
	switch (mapped_type(S_IFREG, v)) {
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	default: return DT_REG;
	}
}

/* Writes dirents straight into the reply's iovecs after the header. */
static int h_readdir(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tread.fid);
	uint64_t off = o->m->u.tread.offset;
	char dbuf[4096] __attribute__((aligned(8)));
	uint32_t room, used = 0;
	uint64_t dev_bits = 0;
	bool full = false, mapped = o->srv->sec == P9_SEC_MAPPED_XATTR;
	struct stat dst;
	int ret, fd;

	if (!f)
		return -EBADF;
	ret = payload_room(o, o->m->u.tread.count, &room);
	if (ret)
		goto out;
	if (atomic_load(&f->kind) != FID_DIR) {
		ret = -ENOTDIR;
		goto out;
	}
	fd = atomic_load(&f->ofd);
	/* Entries get the qid path make_qid would give them: inode numbers of
	 * a file system mounted inside the export carry its device. */
	if (!fstat(fd, &dst) && dst.st_dev != o->srv->root_dev)
		dev_bits = (uint64_t)dst.st_dev << 40;
	pthread_mutex_lock(&f->lock);
	if (off > INT64_MAX || lseek(fd, off, SEEK_SET) < 0) {
		ret = off > INT64_MAX ? -EINVAL : -errno;
		goto unlock;
	}
	while (!full) {
		long n = syscall(SYS_getdents64, fd, dbuf, sizeof(dbuf));

		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		for (long pos = 0; pos < n;) {
			struct dirent64 *d = (struct dirent64 *)(dbuf + pos);
			size_t nl = strlen(d->d_name);
			uint8_t e[P9_QIDSZ + 8 + 1 + 2];
			uint8_t dt = d->d_type == DT_REG && mapped ?
				     mapped_dtype(fd, d->d_name) : d->d_type;
			uint8_t qt = dt == DT_DIR ? P9_QTDIR :
				     dt == DT_LNK ? P9_QTSYMLINK : P9_QTFILE;
			uint64_t ino = d->d_ino ^ dev_bits, doff = d->d_off;

			pos += d->d_reclen;
			if (p9_dirent_size(nl) > room - used) {
				full = true;
				break;
			}
			e[0] = qt;
			memset(e + 1, 0, 4);
			for (int i = 0; i < 8; i++) {
				e[5 + i] = ino >> (8 * i);
				e[13 + i] = doff >> (8 * i);
			}
			e[21] = dt;
			e[22] = nl;
			e[23] = nl >> 8;
			iov_from_buf(o->out, o->nout, P9_IOHDRSZ + used, e,
				 sizeof(e));
			iov_from_buf(o->out, o->nout, P9_IOHDRSZ + used + sizeof(e),
				 d->d_name, nl);
			used += p9_dirent_size(nl);
		}
	}
	/* An error after some entries still returns those entries; no
	 * entry fitting at all would read as the end of the folder. */
	if (ret && used)
		ret = 0;
	if (!ret && !used && full)
		ret = -EINVAL;
	o->r->u.rdata = (struct p9_data){ used, NULL };
unlock:
	pthread_mutex_unlock(&f->lock);
out:
	fid_put(o->s, f);
	return ret;
}

static int h_fsync(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tfsync.fid);
	int fd, ret;

	if (!f)
		return -EBADF;
	fd = atomic_load(&f->ofd);
	if (fd < 0)
		ret = -EBADF;
	else if (o->m->u.tfsync.datasync)
		ret = fdatasync(fd) ? -errno : 0;
	else
		ret = fsync(fd) ? -errno : 0;
	fid_put(o->s, f);
	return ret;
}

static int lock_range(uint64_t start, uint64_t length, struct flock *fl)
{
	if (start > INT64_MAX || length > INT64_MAX ||
	    (length && start > (uint64_t)INT64_MAX - length + 1))
		return -EINVAL;
	fl->l_whence = SEEK_SET;
	fl->l_start = start;
	fl->l_len = length;
	fl->l_pid = 0;
	return 0;
}

static int lock_type(uint8_t t)
{
	switch (t) {
	case P9_LOCK_TYPE_RDLCK: return F_RDLCK;
	case P9_LOCK_TYPE_WRLCK: return F_WRLCK;
	case P9_LOCK_TYPE_UNLCK: return F_UNLCK;
	default: return -EINVAL;
	}
}

/* Locks are open-file-description locks on the fid's descriptor: one guest
 * open file, one owner. The server never waits for a lock: a conflict is
 * BLOCKED, and the client retries (so no worker is held hostage). */
static int h_lock(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tlock.fid);
	struct flock fl = { 0 };
	int fd, t;

	if (!f)
		return -EBADF;
	fd = atomic_load(&f->ofd);
	t = lock_type(o->m->u.tlock.type);
	o->r->u.rlock.status = P9_LOCK_ERROR;
	if (fd >= 0 && t >= 0 &&
	    !lock_range(o->m->u.tlock.start, o->m->u.tlock.length, &fl)) {
		fl.l_type = t;
		if (!fcntl(fd, F_OFD_SETLK, &fl))
			o->r->u.rlock.status = P9_LOCK_SUCCESS;
		else if (errno == EAGAIN || errno == EACCES)
			o->r->u.rlock.status = P9_LOCK_BLOCKED;
	}
	fid_put(o->s, f);
	return fd < 0 ? -EBADF : t < 0 ? -EINVAL : 0;
}

static int h_getlock(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.getlock.fid);
	struct flock fl = { 0 };
	int fd, t, ret;

	if (!f)
		return -EBADF;
	fd = atomic_load(&f->ofd);
	t = lock_type(o->m->u.getlock.type);
	ret = fd < 0 ? -EBADF : t < 0 || t == F_UNLCK ? -EINVAL : 0;
	if (!ret)
		ret = lock_range(o->m->u.getlock.start,
				 o->m->u.getlock.length, &fl);
	if (!ret) {
		fl.l_type = t;
		ret = fcntl(fd, F_OFD_GETLK, &fl) ? -errno : 0;
	}
	fid_put(o->s, f);
	if (ret)
		return ret;
	o->r->u.getlock = o->m->u.getlock;
	o->r->u.getlock.type = fl.l_type == F_RDLCK ? P9_LOCK_TYPE_RDLCK :
			       fl.l_type == F_WRLCK ? P9_LOCK_TYPE_WRLCK :
			       P9_LOCK_TYPE_UNLCK;
	if (fl.l_type != F_UNLCK) {
		o->r->u.getlock.start = fl.l_start;
		o->r->u.getlock.length = fl.l_len;
		/* OFD locks have no owning process. */
		o->r->u.getlock.proc_id = fl.l_pid > 0 ? fl.l_pid : 0;
	}
	return 0;
}

static int xattr_name(const struct p9_str *n, char *buf, bool allow_empty)
{
	if (!n->len && !allow_empty)
		return -EINVAL;
	if (n->len > XATTR_NAME_MAX)
		return -ERANGE;
	if (memchr(n->s, 0, n->len))
		return -EINVAL;
	memcpy(buf, n->s, n->len);
	buf[n->len] = 0;
	return 0;
}

static int xattr_reserve(struct p9_session *s, size_t size)
{
	if (atomic_fetch_add(&s->xattr_bytes, size) + size >
	    s->srv->lim.xattr_budget) {
		atomic_fetch_sub(&s->xattr_bytes, size);
		return -ENOMEM;
	}
	return 0;
}

/* Takes the user.virtfs.* names out of a listxattr list; returns its new
 * length. */
static size_t xattr_list_hide(uint8_t *buf, size_t n)
{
	size_t in = 0, out = 0, plen = strlen(VIRTFS_PREFIX);

	while (in < n) {
		const uint8_t *end = memchr(buf + in, 0, n - in);
		size_t len = end ? (size_t)(end - (buf + in)) + 1 : n - in;

		if (len <= plen || memcmp(buf + in, VIRTFS_PREFIX, plen)) {
			memmove(buf + out, buf + in, len);
			out += len;
		}
		in += len;
	}
	return out;
}

static int h_xattrwalk(struct op *o)
{
	struct p9_session *s = o->s;
	struct p9_fid *f = fid_get(s, o->m->u.txattrwalk.fid), *nf;
	uint32_t newfid = o->m->u.txattrwalk.newfid;
	char name[XATTR_NAME_MAX + 1], path[40];
	uint8_t *buf = NULL;
	size_t reserved = 0;
	ssize_t n;
	int ret;

	if (!f)
		return -EBADF;
	ret = xattr_name(&o->m->u.txattrwalk.name, name, true);
	if (ret)
		goto out;
	/* mapped-xattr: the stored owner and mode are the server's, not
	 * xattrs of the guest's (QEMU hides them the same way) */
	if (o->srv->sec == P9_SEC_MAPPED_XATTR &&
	    !strncmp(name, VIRTFS_PREFIX, strlen(VIRTFS_PREFIX))) {
		ret = -ENODATA;
		goto out;
	}
	proc_path(f->node->fd, path, sizeof(path));
	/* Size first, then the value, so only the real size is held; a
	 * value that grows in between fails with ERANGE. */
	n = name[0] ? getxattr(path, name, NULL, 0) : listxattr(path, NULL, 0);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	if (n > XATTR_MAX) {
		ret = -E2BIG;
		goto out;
	}
	ret = xattr_reserve(s, n);
	if (ret)
		goto out;
	reserved = n;
	if (n) {
		buf = malloc(n);
		if (!buf) {
			ret = -ENOMEM;
			goto out_budget;
		}
		n = name[0] ? getxattr(path, name, buf, reserved) :
			      listxattr(path, (char *)buf, reserved);
		if (n < 0) {
			ret = -errno;
			goto out_budget;
		}
		if (!name[0] && o->srv->sec == P9_SEC_MAPPED_XATTR)
			n = xattr_list_hide(buf, n);
	}
	node_get(f->node);
	ret = fid_add(s, newfid, f->node, f->uid);
	if (ret) {
		node_put(o->srv, f->node);
		goto out_budget;
	}
	nf = fid_get(s, newfid);
	if (!nf) {	/* clunked by a concurrent request already */
		ret = -EBADF;
		goto out_budget;
	}
	pthread_mutex_lock(&nf->lock);
	nf->xbuf = buf;
	nf->xsize = reserved;	/* the budget held; n <= reserved */
	nf->xcopied = n;
	atomic_store(&nf->kind, FID_XATTR_READ);
	pthread_mutex_unlock(&nf->lock);
	fid_put(s, nf);
	o->r->u.rxattrwalk.size = n;
	fid_put(s, f);
	return 0;
out_budget:
	free(buf);
	atomic_fetch_sub(&s->xattr_bytes, reserved);
out:
	fid_put(s, f);
	return ret;
}

/* Only the user namespace and POSIX ACLs may be set: security.* and
 * trusted.* would let the guest grant host capabilities or labels. */
static bool xattr_settable(const char *name)
{
	return !strncmp(name, "user.", 5) ||
	       !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

static int h_xattrcreate(struct op *o)
{
	struct p9_session *s = o->s;
	struct p9_fid *f = fid_get(s, o->m->u.txattrcreate.fid);
	uint64_t size = o->m->u.txattrcreate.size;
	uint32_t flags = o->m->u.txattrcreate.flags;
	char name[XATTR_NAME_MAX + 1];
	int ret;

	if (!f)
		return -EBADF;
	ret = xattr_name(&o->m->u.txattrcreate.name, name, false);
	if (!ret && o->srv->ro)
		ret = -EROFS;
	if (!ret && !xattr_settable(name))
		ret = -EOPNOTSUPP;
	if (!ret && o->srv->sec == P9_SEC_MAPPED_XATTR &&
	    !strncmp(name, VIRTFS_PREFIX, strlen(VIRTFS_PREFIX)))
		ret = -EACCES;
	/* A POSIX ACL set on the host file changes its real permission bits
	 * (and can name host uids): under mapped-xattr the guest's
	 * permissions live in user.virtfs.*, never on the host file. */
	if (!ret && o->srv->sec == P9_SEC_MAPPED_XATTR &&
	    !strncmp(name, "system.posix_acl_", strlen("system.posix_acl_")))
		ret = -EOPNOTSUPP;
	if (!ret && (flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE)))
		ret = -EINVAL;
	if (!ret && size > XATTR_MAX)
		ret = -E2BIG;
	if (ret)
		goto out;
	pthread_mutex_lock(&f->lock);
	if (atomic_load(&f->kind) != FID_PATH || atomic_load(&f->ofd) >= 0) {
		ret = -EBUSY;
	} else if (!(ret = xattr_reserve(s, size))) {
		/* zeroed: no stale host heap can reach setxattr */
		f->xbuf = size ? calloc(1, size) : NULL;
		f->xname = strdup(name);
		if ((size && !f->xbuf) || !f->xname) {
			free(f->xbuf);
			free(f->xname);
			f->xbuf = NULL;
			f->xname = NULL;
			atomic_fetch_sub(&s->xattr_bytes, size);
			ret = -ENOMEM;
		} else {
			f->xsize = size;
			f->xcopied = 0;
			f->xflags = flags;
			atomic_store(&f->kind, FID_XATTR_WRITE);
		}
	}
	pthread_mutex_unlock(&f->lock);
out:
	fid_put(s, f);
	return ret;
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
		return reply_error(&o, tag, -EPROTO);
	size = r->size;
	m.type = r->type;
	tag = r->tag;
	if (!r->tracked)
		return reply_error(&o, tag, -ENOMEM);	/* too many in flight */
	if (size != in_len)
		return reply_error(&o, tag, -EPROTO);
	if (size > msize)
		return reply_error(&o, tag, -EMSGSIZE);
	/* Only the fixed header of a Twrite is copied; its payload stays in
	 * the iovecs until pwritev. Other requests are small by nature. */
	copy = m.type == P9_TWRITE ? (size < P9_TWRITE_HDRSZ ? size : P9_TWRITE_HDRSZ) : size;
	if (copy > P9_SMALL_MAX)
		return reply_error(&o, tag, -EPROTO);
	if (copy > sizeof(r->small)) {
		buf = malloc(copy);
		if (!buf)
			return reply_error(&o, tag, -ENOMEM);
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
	atomic_store(&fds_pool, pool);
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
	if (!srv->lim.xattr_budget)
		srv->lim.xattr_budget = 1u << 20;
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
