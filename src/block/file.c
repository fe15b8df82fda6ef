/* The file block backend: a raw image file or a host block device, driven
 * through one io_uring per queue thread. Reads and writes go straight from
 * the caller's iovecs (guest memory) to the kernel. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "block/backend.h"
#include "lib/clock.h"

#define BLKQ_POLLS 8

static int open_err(char *err, size_t errlen, int ret, const char *fmt,
		    const char *path, const char *what)
{
	snprintf(err, errlen, fmt, path, what);
	return ret;
}

static bool blockdev_discard_ok(dev_t rdev)
{
	char path[96], buf[32];
	FILE *f;
	bool ok = false;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/discard_max_bytes",
		 major(rdev), minor(rdev));
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		ok = strtoull(buf, NULL, 10) > 0;
	fclose(f);
	return ok;
}

/* O_DIRECT alignment: what the file system reports (statx, Linux 6.1+),
 * else the logical block size. */
static uint32_t dio_alignment(int fd, uint32_t block_size)
{
#ifdef STATX_DIOALIGN
	struct statx stx;

	if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
		uint32_t a = stx.stx_dio_offset_align;

		if (stx.stx_dio_mem_align > a)
			a = stx.stx_dio_mem_align;
		return a;
	}
#endif
	return block_size;
}

int blk_open(struct blk_backend *be, const struct disk_cfg *cfg, char *err,
	     size_t errlen)
{
	int flags = (cfg->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct stat st;
	int fd, ret;

	memset(be, 0, sizeof(*be));
	be->fd = be->fd_buffered = -1;
	be->ro = cfg->ro;
	be->direct = cfg->cache == CACHE_NONE;
	fd = open(cfg->path, flags | (be->direct ? O_DIRECT : 0));
	if (fd < 0) {
		ret = -errno;
		if (ret == -EINVAL && be->direct)
			return open_err(err, errlen, ret,
					"%s: the file system does not support cache=none (O_DIRECT)%s; use cache=writeback",
					cfg->path, "");
		if (ret == -EISDIR)
			return open_err(err, errlen, -EINVAL,
					"%s: not a regular file or block device%s",
					cfg->path, "");
		if (ret == -EROFS || (ret == -EACCES && !cfg->ro))
			return open_err(err, errlen, ret,
					"%s: cannot open read-write (%s); add ro to use it read-only",
					cfg->path, strerror(-ret));
		return open_err(err, errlen, ret, "%s: %s", cfg->path,
				strerror(-ret));
	}
	be->fd = fd;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto fail_errno;
	}
	if (S_ISREG(st.st_mode)) {
		be->size = st.st_size;
		be->block_size = 512;
		be->phys_block_size = st.st_blksize >= 4096 ? 4096 : 512;
		be->discard_ok = true;	/* hole punching; checked per call */
	} else if (S_ISBLK(st.st_mode)) {
		uint64_t sz;
		int lbs = 512, pbs = 512;

		be->is_blockdev = true;
		if (ioctl(fd, BLKGETSIZE64, &sz)) {
			ret = -errno;
			goto fail_errno;
		}
		be->size = sz;
		if (ioctl(fd, BLKSSZGET, &lbs) || lbs < 512)
			lbs = 512;
		if (ioctl(fd, BLKPBSZGET, &pbs) || (unsigned int)pbs < (unsigned int)lbs)
			pbs = lbs;
		be->block_size = lbs;
		be->phys_block_size = pbs;
		be->discard_ok = blockdev_discard_ok(st.st_rdev);
	} else {
		ret = open_err(err, errlen, -EINVAL,
			       "%s: not a regular file or block device%s",
			       cfg->path, "");
		goto fail;
	}
	if (be->size < 512) {
		ret = open_err(err, errlen, -EINVAL,
			       "%s: smaller than one sector (512 bytes)%s",
			       cfg->path, "");
		goto fail;
	}
	if (be->size % 512) {
		ret = open_err(err, errlen, -EINVAL,
			       "%s: size is not a multiple of 512 bytes%s",
			       cfg->path, "");
		goto fail;
	}
	if (be->direct) {
		be->dio_align = dio_alignment(fd, be->block_size);
		be->fd_buffered = open(cfg->path, flags);
		if (be->fd_buffered < 0) {
			ret = -errno;
			goto fail_errno;
		}
	}
	be->path = strdup(cfg->path);
	snprintf(be->serial, sizeof(be->serial), "iovm%08llx%08llx",
		 (unsigned long long)(st.st_ino & 0xffffffffu),
		 (unsigned long long)(st.st_dev & 0xffffffffu));
	return 0;

fail_errno:
	snprintf(err, errlen, "%s: %s", cfg->path, strerror(-ret));
fail:
	blk_close(be);
	return ret;
}

void blk_close(struct blk_backend *be)
{
	if (be->fd >= 0)
		close(be->fd);
	if (be->fd_buffered >= 0)
		close(be->fd_buffered);
	be->fd = be->fd_buffered = -1;
	free(be->path);
	be->path = NULL;
}

int blk_flush(struct blk_backend *be)
{
	/* fdatasync syncs the inode, whichever of our two descriptors wrote
	 * the data. */
	if (be->ro || be->fd < 0)
		return 0;
	return fdatasync(be->fd) ? -errno : 0;
}

int (*blkq_test_result)(const struct blk_backend *be, enum blk_op op, int res);

enum { SLOT_POLL = 100 };

struct blk_slot {
	int op;			/* enum blk_op or SLOT_POLL */
	struct blk_backend *be;
	const struct iovec *iov;
	unsigned int iovcnt;
	bool buffered;		/* sent on be->fd_buffered */
	uint64_t offset;
	uint64_t len;		/* bytes expected (READ/WRITE), range length */
	blk_done_fn done;
	void *tag;
	int res;
	bool busy;		/* taken: queued, in flight or deferred */
	struct blk_slot *next;
};

struct blk_queue {
	struct io_uring ring;
	int efd;		/* registered lazily by blkq_event_fd */
	unsigned int depth;
	unsigned int used;	/* request slots taken */
	unsigned int polls_used;
	struct blk_slot *slots;
	struct blk_slot *free;
	struct blk_slot polls[BLKQ_POLLS];
	struct blk_slot *free_polls;
	struct blk_slot *deferred;	/* completed synchronously */
	struct blk_slot **deferred_tail;
	unsigned int unsubmitted;
	bool taskrun_flag;	/* the kernel tells when completions wait on us */
	bool dead;		/* blkq_abort ran: every operation fails */
};

struct blk_queue *blkq_create(unsigned int depth)
{
	struct blk_queue *q;
	unsigned int entries;
	int ret;

	if (!depth || depth > 32768 - BLKQ_POLLS)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->slots = calloc(depth, sizeof(*q->slots));
	if (!q->slots)
		goto fail;
	entries = depth + BLKQ_POLLS;
	/* TASKRUN_FLAG lets blkq_spin see, without a system call, when
	 * completions are waiting for this thread to enter the kernel. */
	ret = io_uring_queue_init(entries, &q->ring, IORING_SETUP_COOP_TASKRUN |
						     IORING_SETUP_TASKRUN_FLAG);
	q->taskrun_flag = ret == 0;
	if (ret == -EINVAL)
		ret = io_uring_queue_init(entries, &q->ring, IORING_SETUP_COOP_TASKRUN);
	if (ret == -EINVAL)
		ret = io_uring_queue_init(entries, &q->ring, 0);
	if (ret < 0)
		goto fail;
	q->efd = -1;
	q->depth = depth;
	for (unsigned int i = 0; i < depth; i++) {
		q->slots[i].next = q->free;
		q->free = &q->slots[i];
	}
	for (unsigned int i = 0; i < BLKQ_POLLS; i++) {
		q->polls[i].next = q->free_polls;
		q->free_polls = &q->polls[i];
	}
	q->deferred_tail = &q->deferred;
	return q;
fail:
	free(q->slots);
	free(q);
	return NULL;
}

void blkq_destroy(struct blk_queue *q)
{
	if (!q)
		return;
	/* Nothing may complete into freed memory: callers drain first, but
	 * wait here too rather than leave the kernel writing to a freed
	 * slot. */
	while (q->used)	/* polls are cancelled with the ring */
		if (blkq_reap(q, true) < 0)
			break;
	io_uring_queue_exit(&q->ring);
	if (q->efd >= 0)
		close(q->efd);
	free(q->slots);
	free(q);
}

int blkq_event_fd(struct blk_queue *q)
{
	if (q->efd < 0) {
		int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

		if (fd < 0)
			return -errno;
		if (io_uring_register_eventfd(&q->ring, fd) < 0) {
			close(fd);
			return -EIO;
		}
		q->efd = fd;
	}
	return q->efd;
}

unsigned int blkq_inflight(const struct blk_queue *q)
{
	return q->used;
}

static struct io_uring_sqe *get_sqe(struct blk_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		q->unsubmitted = 0;
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (sqe)
		q->unsubmitted++;
	return sqe;
}

static struct blk_slot *slot_get(struct blk_queue *q)
{
	struct blk_slot *s = q->free;

	if (!s)
		return NULL;
	q->free = s->next;
	q->used++;
	s->busy = true;
	return s;
}

static void slot_put(struct blk_queue *q, struct blk_slot *s)
{
	s->busy = false;
	s->next = q->free;
	q->free = s;
	q->used--;
}

static void defer(struct blk_queue *q, struct blk_slot *s, int res)
{
	uint64_t one = 1;

	s->res = res;
	s->next = NULL;
	*q->deferred_tail = s;
	q->deferred_tail = &s->next;
	if (q->efd >= 0 && write(q->efd, &one, sizeof(one)) < 0)
		return;	/* counter saturated: the loop is awake anyway */
}

static bool range_ok(const struct blk_backend *be, uint64_t offset,
		     uint64_t len)
{
	return offset <= be->size && len <= be->size - offset;
}

static bool dio_aligned(const struct blk_backend *be, const struct iovec *iov,
			unsigned int iovcnt, uint64_t offset)
{
	uint64_t mask = be->dio_align - 1;

	if (offset & mask)
		return false;
	for (unsigned int i = 0; i < iovcnt; i++)
		if (((uintptr_t)iov[i].iov_base | iov[i].iov_len) & mask)
			return false;
	return true;
}

static int prep_rw(struct blk_queue *q, struct blk_slot *s)
{
	struct io_uring_sqe *sqe = get_sqe(q);
	int fd = s->buffered ? s->be->fd_buffered : s->be->fd;

	if (!sqe)
		return -EBUSY;
	if (s->op == BLK_OP_READ)
		io_uring_prep_readv(sqe, fd, s->iov, s->iovcnt, s->offset);
	else
		io_uring_prep_writev(sqe, fd, s->iov, s->iovcnt, s->offset);
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

int blkq_rw(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	    const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	    blk_done_fn done, void *tag)
{
	struct blk_slot *s;
	uint64_t len = 0;
	int ret;

	if (q->dead)
		return -EIO;
	if (op != BLK_OP_READ && op != BLK_OP_WRITE)
		return -EINVAL;
	if (op == BLK_OP_WRITE && be->ro)
		return -EROFS;
	if (iovcnt > IOV_MAX)
		return -EINVAL;
	for (unsigned int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - len)
			return -EINVAL;
		len += iov[i].iov_len;
	}
	/* Results are reported as an int; the kernel moves at most this
	 * much per call anyway. */
	if (!range_ok(be, offset, len) || len > BLK_MAX_RW)
		return -EINVAL;
	s = slot_get(q);
	if (!s)
		return -EAGAIN;
	s->op = op;
	s->be = be;
	s->iov = iov;
	s->iovcnt = iovcnt;
	s->offset = offset;
	s->len = len;
	s->done = done;
	s->tag = tag;
	s->buffered = be->direct && !dio_aligned(be, iov, iovcnt, offset);
	ret = prep_rw(q, s);
	if (ret)
		slot_put(q, s);
	return ret;
}

int blkq_flush(struct blk_queue *q, struct blk_backend *be, blk_done_fn done,
	       void *tag)
{
	struct blk_slot *s = q->dead ? NULL : slot_get(q);
	struct io_uring_sqe *sqe;

	if (!s)
		return q->dead ? -EIO : -EAGAIN;
	s->op = BLK_OP_FLUSH;
	s->be = be;
	s->done = done;
	s->tag = tag;
	if (be->ro) {
		/* Nothing of ours to write back. */
		defer(q, s, 0);
		return 0;
	}
	sqe = get_sqe(q);
	if (!sqe) {
		slot_put(q, s);
		return -EBUSY;
	}
	/* Writes completed before this point are covered: fdatasync syncs
	 * the inode, whichever of our two descriptors wrote the data. */
	io_uring_prep_fsync(sqe, be->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

/* Zeroes a range with plain writes: the last resort when the file system
 * can neither zero nor punch a range. Synchronous, bounded by the caller's
 * range limit. */
static int write_zeroes_sync(struct blk_backend *be, uint64_t off, uint64_t len)
{
	static const uint8_t zero[65536] __attribute__((aligned(4096)));
	int fd = be->fd_buffered >= 0 ? be->fd_buffered : be->fd;

	while (len) {
		size_t n = len < sizeof(zero) ? len : sizeof(zero);
		ssize_t r = pwrite(fd, zero, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		off += r;
		len -= r;
	}
	return 0;
}

static int blockdev_range_ioctl(struct blk_backend *be, unsigned long req,
				uint64_t off, uint64_t len)
{
	uint64_t range[2] = { off, len };

	return ioctl(be->fd, req, range) ? -errno : 0;
}

int blkq_discard(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
		 uint64_t offset, uint64_t len, blk_done_fn done, void *tag)
{
	struct blk_slot *s;
	struct io_uring_sqe *sqe;
	int mode;

	if (q->dead)
		return -EIO;
	if (op != BLK_OP_DISCARD && op != BLK_OP_WRITE_ZEROES &&
	    op != BLK_OP_ZERO_UNMAP)
		return -EINVAL;
	/* A block device's discard does not promise zeroes on read-back. */
	if (op == BLK_OP_ZERO_UNMAP && be->is_blockdev)
		op = BLK_OP_WRITE_ZEROES;
	if (be->ro)
		return -EROFS;
	if (!range_ok(be, offset, len))
		return -EINVAL;
	s = slot_get(q);
	if (!s)
		return -EAGAIN;
	s->op = op;
	s->be = be;
	s->offset = offset;
	s->len = len;
	s->done = done;
	s->tag = tag;
	if (be->is_blockdev && op == BLK_OP_DISCARD) {
		/* No asynchronous discard for block devices in io_uring
		 * here: it runs now and completes on the next reap. */
		defer(q, s, be->discard_ok ?
			    blockdev_range_ioctl(be, BLKDISCARD, offset, len) :
			    -EOPNOTSUPP);
		return 0;
	}
	sqe = get_sqe(q);
	if (!sqe) {
		slot_put(q, s);
		return -EBUSY;
	}
	/* Zeroing runs in io_uring's workers: a block device zeroes the
	 * range (blkdev_fallocate) without stalling this queue's thread. */
	mode = op != BLK_OP_WRITE_ZEROES ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
				      FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	io_uring_prep_fallocate(sqe, be->fd, mode, offset, len);
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

int blkq_poll(struct blk_queue *q, int fd, blk_done_fn done, void *tag)
{
	struct blk_slot *s = q->free_polls;
	struct io_uring_sqe *sqe;

	if (q->dead)
		return -EIO;
	if (!s)
		return -EAGAIN;
	sqe = get_sqe(q);
	if (!sqe)
		return -EBUSY;
	q->free_polls = s->next;
	q->polls_used++;
	s->op = SLOT_POLL;
	s->done = done;
	s->tag = tag;
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

int blkq_submit(struct blk_queue *q)
{
	int ret;

	if (q->dead)
		return -EIO;
	if (!q->unsubmitted)
		return 0;
	ret = io_uring_submit(&q->ring);
	if (ret < 0)
		return ret;
	q->unsubmitted = 0;
	return 0;
}

/* Finishes a short read or write with plain syscalls: rare (a signal, a
 * device hiccup), so a temporary iovec copy is acceptable here. */
static int finish_short(struct blk_slot *s, uint64_t done)
{
	struct iovec *v = malloc(s->iovcnt * sizeof(*v));
	unsigned int i = 0, cnt = s->iovcnt;
	int fd = s->be->fd_buffered >= 0 ? s->be->fd_buffered : s->be->fd;
	int ret = 0;

	if (!v)
		return -ENOMEM;
	memcpy(v, s->iov, cnt * sizeof(*v));
	for (uint64_t skip = done; i < cnt && skip >= v[i].iov_len; i++)
		skip -= v[i].iov_len;
	if (i < cnt) {
		uint64_t before = 0;

		for (unsigned int j = 0; j < i; j++)
			before += v[j].iov_len;
		v[i].iov_base = (uint8_t *)v[i].iov_base + (done - before);
		v[i].iov_len -= done - before;
	}
	while (done < s->len && i < cnt) {
		ssize_t r = s->op == BLK_OP_READ ?
			    preadv(fd, v + i, cnt - i, s->offset + done) :
			    pwritev(fd, v + i, cnt - i, s->offset + done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -EIO;
			break;
		}
		done += r;
		while (i < cnt && (size_t)r >= v[i].iov_len) {
			r -= v[i].iov_len;
			i++;
		}
		if (i < cnt) {
			v[i].iov_base = (uint8_t *)v[i].iov_base + r;
			v[i].iov_len -= r;
		}
	}
	free(v);
	return ret;
}

static int complete_res(struct blk_queue *q, struct blk_slot *s, int res)
{
	if (blkq_test_result)
		res = blkq_test_result(s->be, s->op, res);
	switch (s->op) {
	case BLK_OP_READ:
	case BLK_OP_WRITE:
		if (res == -EAGAIN || res == -EINTR ||
		    (res == -EINVAL && !s->buffered && s->be->direct)) {
			/* -EINVAL on O_DIRECT: an alignment rule statx did
			 * not tell us about; the page cache path takes it. */
			if (res == -EINVAL)
				s->buffered = true;
			if (!prep_rw(q, s))
				return INT_MIN;
			return -EBUSY;
		}
		if (res >= 0 && (uint64_t)res < s->len) {
			int r = finish_short(s, res);

			return r ? r : (int)s->len;
		}
		return res >= 0 ? (int)s->len : res;
	case BLK_OP_WRITE_ZEROES:
		if (res == -EOPNOTSUPP || res == -EINVAL) {
			if (s->be->is_blockdev)
				return blockdev_range_ioctl(s->be, BLKZEROOUT,
							    s->offset, s->len);
			/* Punched holes read back as zeroes too. */
			if (fallocate(s->be->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      s->offset, s->len) == 0)
				return 0;
			return write_zeroes_sync(s->be, s->offset, s->len);
		}
		return res;
	case BLK_OP_ZERO_UNMAP:
		/* No hole punching in this file system: the range must
		 * still read back as zeroes. */
		if (res == -EOPNOTSUPP || res == -EINVAL) {
			if (fallocate(s->be->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
				      s->offset, s->len) == 0)
				return 0;
			return write_zeroes_sync(s->be, s->offset, s->len);
		}
		return res;
	default:
		return res;
	}
}

/* Decides what a kernel completion means; returns true when the operation
 * was sent again (nothing to report yet), else the result in *out. */
static bool complete(struct blk_queue *q, struct blk_slot *s, int res, int *out)
{
	*out = complete_res(q, s, res);
	return *out == INT_MIN;
}

static void finish(struct blk_queue *q, struct blk_slot *s, int res)
{
	blk_done_fn done = s->done;
	void *tag = s->tag;

	/* The slot is free before the callback runs: it may queue more. */
	slot_put(q, s);
	done(tag, res);
}

static int reap_ready(struct blk_queue *q)
{
	struct io_uring_cqe *cqe;
	int n = 0;

	while (q->deferred) {
		struct blk_slot *s = q->deferred;

		q->deferred = s->next;
		if (!q->deferred)
			q->deferred_tail = &q->deferred;
		finish(q, s, s->res);
		n++;
	}
	while (io_uring_peek_cqe(&q->ring, &cqe) == 0) {
		struct blk_slot *s = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&q->ring, cqe);
		if (!s)
			continue;	/* blkq_abort's cancel */
		n++;
		if (s->op == SLOT_POLL) {
			blk_done_fn done = s->done;
			void *tag = s->tag;

			s->next = q->free_polls;
			q->free_polls = s;
			q->polls_used--;
			done(tag, res);
			continue;
		}
		if (complete(q, s, res, &res))
			continue;
		finish(q, s, res);
	}
	return n;
}

bool blkq_spin(struct blk_queue *q, uint64_t ns, bool (*more)(void *),
	       void *arg)
{
	uint64_t deadline;
	unsigned int i = 0;

	if (blkq_submit(q) < 0 || q->deferred)
		return true;
	if (!ns)
		return io_uring_cq_ready(&q->ring) > 0;
	deadline = mono_ns() + ns;
	for (;;) {
		if (io_uring_cq_ready(&q->ring) || (more && more(arg)))
			return true;
		/* Completions of file I/O are posted by task work that runs
		 * only when this thread enters the kernel. */
		if (!q->taskrun_flag ||
		    (IO_URING_READ_ONCE(*q->ring.sq.kflags) & IORING_SQ_TASKRUN))
			io_uring_get_events(&q->ring);
		else
			__builtin_ia32_pause();
		if (!(++i & 15) && mono_ns() >= deadline)
			return io_uring_cq_ready(&q->ring) > 0 ||
			       (more && more(arg));
	}
}

int blkq_wait(struct blk_queue *q)
{
	if (q->dead)
		return -EIO;
	if (q->deferred)
		return 0;
	while (!io_uring_cq_ready(&q->ring) && (q->used || q->polls_used)) {
		int ret = io_uring_submit_and_wait(&q->ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EBUSY)
			return ret;
		q->unsubmitted = 0;
	}
	return 0;
}

int blkq_reap(struct blk_queue *q, bool wait)
{
	int n;

	if (q->dead)
		return -EIO;
	if (q->efd >= 0) {
		uint64_t v;

		if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
	n = reap_ready(q);
	if (!n && wait) {
		int ret = blkq_wait(q);

		if (ret)
			return ret;
		n = reap_ready(q);
	}
	/* What the callbacks queued goes out with the caller's blkq_submit
	 * or, in one system call, with its next blocking blkq_reap. */
	return n;
}

/* How long blkq_abort waits for the kernel's answers while none comes:
 * a ring that failed may have lost completions (-EBADR) that will never
 * arrive. */
#define BLKQ_ABORT_WAIT_S 10

void blkq_abort(struct blk_queue *q, int err)
{
	struct io_uring_sqe *sqe;

	if (q->dead)
		return;
	/* What is done already is reported as it came out. */
	reap_ready(q);
	/* The kernel may still own requests (and write into their buffers):
	 * ask it to cancel them all and take its answers while the ring
	 * gives them. */
	sqe = io_uring_get_sqe(&q->ring);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data(sqe, NULL);
	}
	for (unsigned int idle = 0; q->used && idle < BLKQ_ABORT_WAIT_S;) {
		struct __kernel_timespec ts = { .tv_sec = 1 };
		struct io_uring_cqe *cqe;
		int ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);

		if (ret == -ETIME) {
			idle++;
			continue;
		}
		if (ret < 0 && ret != -EINTR)
			break;
		q->unsubmitted = 0;
		if (reap_ready(q))
			idle = 0;
	}
	/* New requests from the callbacks below fail at once. */
	q->dead = true;
	for (unsigned int i = 0; i < q->depth && q->used; i++)
		if (q->slots[i].busy)
			finish(q, &q->slots[i], err);
	q->deferred = NULL;
	q->deferred_tail = &q->deferred;
}
