/* 9P server operations on names: confined walks, attributes, and the
 * creation, linking, renaming and removal of host objects. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "p9/server_internal.h"

#define P9_NAME_MAX 255

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

int h_walk(struct op *o)
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

int h_getattr(struct op *o)
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

int h_setattr(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tsetattr.fid);
	int ret;

	if (!f)
		return -EBADF;
	ret = do_setattr(o, f);
	fid_put(o->s, f);
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

int h_lcreate(struct op *o)
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

int h_mkdir(struct op *o)
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

int h_symlink(struct op *o)
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

int h_mknod(struct op *o)
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

int h_readlink(struct op *o)
{
	struct p9_fid *f = fid_get(o->s, o->m->u.tfid.fid);
	/* The target stays in this thread's buffer until p9_handle, on the
	 * same thread, has encoded the reply (reply_send) and returned. */
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

int h_link(struct op *o)
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

int h_rename(struct op *o)
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

int h_renameat(struct op *o)
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

int h_unlinkat(struct op *o)
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

int h_remove(struct op *o)
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

int h_statfs(struct op *o)
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
