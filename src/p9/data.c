/* 9P server operations on open files: lopen, read, write, readdir, fsync.
 * Payloads go between the host file and the transport's iovecs without a
 * bounce buffer, so a request costs memory by its own size, never msize. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/iov.h"
#include "p9/server_internal.h"

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

int open_flags(uint32_t p9, bool ro)
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

int h_lopen(struct op *o)
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

int h_read(struct op *o)
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

int h_write(struct op *o)
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

/* Writes dirents straight into the reply's iovecs after the header. */
int h_readdir(struct op *o)
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

int h_fsync(struct op *o)
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
