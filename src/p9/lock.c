/* 9P server byte-range locks (Tlock, Tgetlock) as open-file-description
 * locks that never wait. */
#include <errno.h>
#include <fcntl.h>

#include "p9/server_internal.h"

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
int h_lock(struct op *o)
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

int h_getlock(struct op *o)
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
