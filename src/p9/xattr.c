/* 9P server extended attributes: xattr fids read by Txattrwalk and
 * written by Txattrcreate, Twrite and Tclunk. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "p9/server_internal.h"

#define XATTR_MAX 65536

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

int h_xattrwalk(struct op *o)
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

int h_xattrcreate(struct op *o)
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

/* An xattr written through f is set as its fid is clunked: the whole
 * value, or no value (removed) when it was created empty. */
int xattr_commit(struct p9_fid *f)
{
	char path[40];
	int ret;

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
	return ret;
}
