/* The block queue and the file backend: a raw image file or a host block
 * device, driven through one io_uring per queue thread. Reads and writes go
 * straight from the caller's iovecs (guest memory) to the kernel. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "block/queue_int.h"
#include "lib/clock.h"
#include "lib/iotrace.h"
#include "lib/iov.h"
#include "lib/log.h"

/* The size of one chunk write of zeroing by writes (BLKQ_ZCHUNKS). */
#define ZERO_CHUNK (1u << 20)

/* Never written: its pages stay the kernel's shared zero page, so the
 * buffer costs no memory. */
static uint8_t zero_buf[ZERO_CHUNK] __attribute__((aligned(4096)));

static const struct blk_test_hooks *test_hooks;

void blk_set_test_hooks(const struct blk_test_hooks *h)
{
	__atomic_store_n(&test_hooks, h, __ATOMIC_RELEASE);
}

const struct blk_test_hooks *blk_hooks(void)
{
	return __atomic_load_n(&test_hooks, __ATOMIC_ACQUIRE);
}

static bool test_no_fallocate(void)
{
	const struct blk_test_hooks *h = blk_hooks();

	return h && h->no_fallocate;
}

/* Tells the test that one more slow operation waits at its gate. */
void blk_test_arrived(void)
{
	const struct blk_test_hooks *h = blk_hooks();
	uint64_t one = 1;

	if (h && h->arrive_fd >= 0 && write(h->arrive_fd, &one, sizeof(one)) < 0)
		return;	/* the test sees no arrival and fails */
}

/* The WRITE hold of blk_test_hold_writes: gate_fd -1 when off. */
static struct {
	int gate_fd;
	uint64_t after;
	unsigned int count;
	uint64_t seen;		/* WRITEs queued since it was set */
	unsigned int held;
} write_hold = { .gate_fd = -1 };

int blk_test_hold_writes(uint64_t after, unsigned int count)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		return -errno;
	write_hold.after = after;
	write_hold.count = count;
	__atomic_store_n(&write_hold.gate_fd, fd, __ATOMIC_RELEASE);
	return 0;
}

void blk_test_hold_release(void)
{
	int fd = __atomic_load_n(&write_hold.gate_fd, __ATOMIC_ACQUIRE);
	uint64_t one = 1;

	if (fd < 0)
		return;
	pr_info("test-hold-writes: gate opened: the %u WRITEs held run now",
		__atomic_load_n(&write_hold.held, __ATOMIC_RELAXED));
	if (write(fd, &one, sizeof(one)) != sizeof(one))
		pr_err("test-hold-writes: gate: %s", strerror(errno));
}

/* The gate fd when the WRITE being queued is one to hold, else -1. */
static int write_hold_gate(void)
{
	int fd = __atomic_load_n(&write_hold.gate_fd, __ATOMIC_ACQUIRE);
	uint64_t n;
	unsigned int h;

	if (fd < 0)
		return -1;
	n = __atomic_add_fetch(&write_hold.seen, 1, __ATOMIC_RELAXED);
	if (n <= write_hold.after || n > write_hold.after + write_hold.count)
		return -1;
	h = __atomic_add_fetch(&write_hold.held, 1, __ATOMIC_RELAXED);
	if (h == write_hold.count)
		pr_info("test-hold-writes: %u WRITEs held in flight (those after the first %llu); SIGUSR1 releases them",
			h, (unsigned long long)write_hold.after);
	return fd;
}

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

/* The disk is open: the limits its --disk gave. */
static int open_limits(struct blk_backend *be, const struct disk_cfg *cfg,
		       char *err, size_t errlen)
{
	int ret = thr_disk_open(be, &cfg->limits);

	if (ret) {
		snprintf(err, errlen, "%s: I/O limits: %s", cfg->path,
			 strerror(-ret));
		blk_close(be);
	}
	return ret;
}

int blk_open(struct blk_backend *be, const struct disk_cfg *cfg, char *err,
	     size_t errlen)
{
	int flags = (cfg->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	const struct blk_driver *drv;
	const char *missing = NULL;
	struct stat st;
	int fd, ret;

	memset(be, 0, sizeof(*be));
	be->fd = be->fd_buffered = -1;
	drv = blk_driver_for(cfg->path, &missing);
	if (missing)
		return open_err(err, errlen, -ENOTSUP,
				"%s: this iovm was built without %s support",
				cfg->path, missing);
	if (drv) {
		be->drv = drv;
		be->ro = cfg->ro;
		ret = drv->open(be, cfg, err, errlen);
		if (ret) {
			memset(be, 0, sizeof(*be));
			be->fd = be->fd_buffered = -1;
			return ret;
		}
		be->stats = blk_stats_new();
		return open_limits(be, cfg, err, errlen);
	}
	be->ro = cfg->ro;
	be->discard_zeroes = true;
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
	be->stats = blk_stats_new();
	return open_limits(be, cfg, err, errlen);

fail_errno:
	snprintf(err, errlen, "%s: %s", cfg->path, strerror(-ret));
fail:
	blk_close(be);
	return ret;
}

void blk_close(struct blk_backend *be)
{
	thr_disk_close(be);
	if (be->drv) {
		be->drv->close(be);
		be->drv = NULL;
		be->priv = NULL;
	}
	if (be->fd >= 0)
		close(be->fd);
	if (be->fd_buffered >= 0)
		close(be->fd_buffered);
	be->fd = be->fd_buffered = -1;
	free(be->path);
	be->path = NULL;
	/* Queues that still hold records of it keep its statistics alive. */
	blk_stats_put(be->stats);
	be->stats = NULL;
}

int blk_flush(struct blk_backend *be)
{
	/* fdatasync syncs the inode, whichever of our two descriptors wrote
	 * the data. */
	if (be->ro)
		return 0;
	if (be->drv)
		return be->drv->flush(be);
	if (be->fd < 0)
		return 0;
	return fdatasync(be->fd) ? -errno : 0;
}

int (*blkq_test_result)(const struct blk_backend *be, enum blk_op op, int res);

struct blk_queue *blkq_create(unsigned int depth)
{
	struct blk_queue *q;
	unsigned int entries;
	int ret;

	if (!depth || depth > 32768 - BLKQ_POLLS - BLKQ_ZCHUNKS - 1)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->slots = calloc(depth, sizeof(*q->slots));
	if (!q->slots)
		goto fail;
	/* Every request, watch, chunk write and the helper's watch can be
	 * in flight at once. */
	entries = depth + BLKQ_POLLS + BLKQ_ZCHUNKS + 1;
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
	for (unsigned int i = 0; i < BLKQ_ZCHUNKS; i++) {
		q->zchunks[i].op = SLOT_ZCHUNK;
		q->zchunks[i].next = q->zfree;
		q->zfree = &q->zchunks[i];
	}
	q->zwait_tail = &q->zwait;
	helper_init(&q->helper);
	drvq_init(q);
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
	thr_fail(q, -ECANCELED);	/* held: they never reached the kernel */
	while (q->used)	/* polls are cancelled with the ring */
		if (blkq_reap(q, true) < 0)
			break;
	drvq_detach_all(q);
	helper_stop(&q->helper);
	io_uring_queue_exit(&q->ring);
	for (unsigned int i = 0; i < BLK_STATS_MAX_DISKS; i++)
		if (q->st[i])
			blk_qstats_retire(q->st[i]);
	thr_queue_free(q);
	if (q->efd >= 0)
		close(q->efd);
	free(q->slots);
	free(q);
}

void blkq_set_index(struct blk_queue *q, unsigned int index)
{
	q->index = index;
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

/* io_uring_submit and io_uring_submit_and_wait(1) of the queue's own
 * thread, traced (lib/iotrace.h: IOT_ENTER and its return). */
static inline int ring_submit(struct blk_queue *q)
{
	int ret;

	iotrace(IOT_ENTER, IOT_ENTER_SUBMIT, io_uring_sq_ready(&q->ring));
	ret = io_uring_submit(&q->ring);
	iotrace(IOT_ENTER_DONE, 0, (uint32_t)ret);
	return ret;
}

static inline int ring_submit_wait(struct blk_queue *q)
{
	int ret;

	iotrace(IOT_ENTER, IOT_ENTER_WAIT, io_uring_sq_ready(&q->ring));
	ret = io_uring_submit_and_wait(&q->ring, 1);
	iotrace(IOT_WAKE, 0, (uint32_t)ret);
	return ret;
}

struct io_uring_sqe *queue_sqe(struct blk_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		ring_submit(q);
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

/* The request's statistics record (block/stats.h): two loads when the
 * queue has sent this disk a request before, an allocation the first
 * time. One vDSO clock read (none for a held request passing now). */
static inline void stats_start(struct blk_queue *q, struct blk_slot *s)
{
	struct blk_stats *d = s->be->stats;
	struct blk_qstats *r = NULL;

	if (d) {
		r = q->st[d->id];
		if (__builtin_expect(!r, 0))
			r = blk_qstats_attach(&q->st[d->id], d, q->index);
	}
	s->st = r;
	s->nreq = 1;
	if (r) {
		/* A request the limits held counts from its arrival: its
		 * wait is part of what the guest sees. */
		s->t0 = q->thr_t0 ? q->thr_t0 : mono_ns();
		blk_qstats_start(r);
	}
}

/* Which kind a request counts as; BLK_STAT_KINDS: none (copies). */
static inline unsigned int stats_kind(int op)
{
	switch (op) {
	case BLK_OP_READ: return BLK_STAT_READ;
	case BLK_OP_WRITE: return BLK_STAT_WRITE;
	case BLK_OP_FLUSH: return BLK_STAT_FLUSH;
	case BLK_OP_DISCARD: return BLK_STAT_DISCARD;
	case BLK_OP_WRITE_ZEROES:
	case BLK_OP_ZERO_UNMAP: return BLK_STAT_WRITE_ZEROES;
	default: return BLK_STAT_KINDS;
	}
}

/* s completes with res: counted in its record. The clock is read once
 * per reap pass, for every completion the pass takes. */
static void stats_done(struct blk_queue *q, struct blk_slot *s, int res)
{
	unsigned int k = stats_kind(s->op);
	uint64_t now = q->now;

	if (k == BLK_STAT_KINDS)
		return;
	if (!now) {
		now = mono_ns();
		if (q->reaping)
			q->now = now;
	}
	blk_qstats_done(s->st, k, s->nreq, s->len, res,
			now > s->t0 ? now - s->t0 : 0);
}

struct blk_slot *queue_slot_start(struct blk_queue *q, enum blk_op op,
				  struct blk_backend *be, uint64_t offset,
				  uint64_t len, blk_done_fn done, void *tag)
{
	struct blk_slot *s = slot_get(q);

	if (!s)
		return NULL;
	s->op = op;
	s->be = be;
	s->offset = offset;
	s->len = len;
	s->done = done;
	s->tag = tag;
	stats_start(q, s);
	return s;
}

void queue_slot_put(struct blk_queue *q, struct blk_slot *s)
{
	if (s->st) {
		blk_qstats_drop(s->st);
		s->st = NULL;
	}
	s->busy = false;
	s->next = q->free;
	q->free = s;
	q->used--;
}

void queue_defer(struct blk_queue *q, struct blk_slot *s, int res)
{
	uint64_t one = 1;

	s->res = res;
	s->next = NULL;
	*q->deferred_tail = s;
	q->deferred_tail = &s->next;
	if (q->efd >= 0 && write(q->efd, &one, sizeof(one)) < 0)
		return;	/* counter saturated: the loop is awake anyway */
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
	struct io_uring_sqe *sqe = queue_sqe(q);
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

/* Tests: a poll on the hold's gate, linked before the next SQE (the write
 * it holds); its own completion carries no slot and is skipped. Both SQEs
 * go to the kernel in the same submission, so the link holds. */
static bool prep_gate(struct blk_queue *q, int gate)
{
	struct io_uring_sqe *sqe;

	if (io_uring_sq_space_left(&q->ring) < 2) {
		ring_submit(q);
		q->unsubmitted = 0;
	}
	sqe = queue_sqe(q);
	if (!sqe)
		return false;
	io_uring_prep_poll_add(sqe, gate, POLLIN);
	io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK);
	io_uring_sqe_set_data(sqe, NULL);
	return true;
}

/* ---- inboxes: slots finished on other threads ---- */

void inbox_init(struct blk_inbox *in, int op)
{
	pthread_mutex_init(&in->lock, NULL);
	in->list = NULL;
	in->efd = -1;
	in->armed = false;
	in->watch.op = op;
}

int inbox_open(struct blk_inbox *in)
{
	if (in->efd < 0) {
		in->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (in->efd < 0)
			return -errno;
	}
	return 0;
}

void inbox_close(struct blk_inbox *in)
{
	if (in->efd >= 0)
		close(in->efd);
	in->efd = -1;
	pthread_mutex_destroy(&in->lock);
}

void inbox_post(struct blk_inbox *in, struct blk_slot *s, int res)
{
	uint64_t one = 1;
	bool first;

	s->res = res;
	pthread_mutex_lock(&in->lock);
	first = !in->list;
	s->next = in->list;
	in->list = s;
	pthread_mutex_unlock(&in->lock);
	/* One wakeup per batch: the queue takes the whole list at once. */
	if (first && write(in->efd, &one, sizeof(one)) < 0) {
		/* saturated: the queue is awake anyway */
	}
}

int inbox_arm(struct blk_queue *q, struct blk_inbox *in, bool wanted)
{
	struct io_uring_sqe *sqe;

	if (in->armed || !wanted || in->efd < 0)
		return 0;
	sqe = queue_sqe(q);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, in->efd, POLLIN);
	io_uring_sqe_set_data(sqe, &in->watch);
	in->armed = true;
	return 0;
}

struct blk_slot *inbox_take(struct blk_inbox *in)
{
	struct blk_slot *s, *rev = NULL;
	uint64_t v;

	in->armed = false;
	/* Drained before the list is taken, so that an entry posted after
	 * the read fires the next watch. */
	if (read(in->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: taken with an earlier batch */
	}
	pthread_mutex_lock(&in->lock);
	s = in->list;
	in->list = NULL;
	pthread_mutex_unlock(&in->lock);
	while (s) {		/* posted newest first: restore the order */
		struct blk_slot *next = s->next;

		s->next = rev;
		rev = s;
		s = next;
	}
	return rev;
}

int blkq_rw(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
	    const struct iovec *iov, unsigned int iovcnt, uint64_t offset,
	    blk_done_fn done, void *tag)
{
	return blkq_rw_merged(q, be, op, iov, iovcnt, offset, 1, done, tag);
}

int blkq_rw_merged(struct blk_queue *q, struct blk_backend *be,
		   enum blk_op op, const struct iovec *iov,
		   unsigned int iovcnt, uint64_t offset, unsigned int nreq,
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
	if (!blk_range_ok(be, offset, len) || len > BLK_MAX_RW)
		return -EINVAL;
	if (thr_gated(q, be)) {
		ret = thr_gate(q, be, op, iov, iovcnt, offset, len, nreq, done, tag);
		if (ret <= 0)
			return ret;
	}
	if (be->drv)
		return drvq_start(q, be, op, iov, iovcnt, offset, len, nreq,
				  done, tag);
	s = queue_slot_start(q, op, be, offset, len, done, tag);
	if (!s)
		return -EAGAIN;
	s->nreq = nreq;
	s->iov = iov;
	s->iovcnt = iovcnt;
	s->buffered = be->direct && !dio_aligned(be, iov, iovcnt, offset);
	if (op == BLK_OP_WRITE) {
		int gate = write_hold_gate();

		if (gate >= 0 && !prep_gate(q, gate)) {
			queue_slot_put(q, s);
			return -EBUSY;
		}
	}
	ret = prep_rw(q, s);
	if (ret)
		queue_slot_put(q, s);
	return ret;
}

int blkq_flush(struct blk_queue *q, struct blk_backend *be, blk_done_fn done,
	       void *tag)
{
	struct blk_slot *s;
	struct io_uring_sqe *sqe;
	int ret;

	if (!q->dead && thr_gated(q, be)) {
		ret = thr_gate(q, be, BLK_OP_FLUSH, NULL, 0, 0, 0, 1, done, tag);
		if (ret <= 0)
			return ret;
	}
	if (be->drv && !be->ro && !q->dead)
		return drvq_start(q, be, BLK_OP_FLUSH, NULL, 0, 0, 0, 1, done,
				  tag);
	s = q->dead ? NULL : queue_slot_start(q, BLK_OP_FLUSH, be, 0, 0, done,
					      tag);
	if (!s)
		return q->dead ? -EIO : -EAGAIN;
	if (be->ro) {
		/* Nothing of ours to write back. */
		queue_defer(q, s, 0);
		return 0;
	}
	sqe = queue_sqe(q);
	if (!sqe) {
		queue_slot_put(q, s);
		return -EBUSY;
	}
	/* Writes completed before this point are covered: fdatasync syncs
	 * the inode, whichever of our two descriptors wrote the data. */
	io_uring_prep_fsync(sqe, be->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

/* ---- zeroing by writes ---- */

/* Where a zeroing request (WRITE_ZEROES, ZERO_UNMAP) is. */
enum { Z_FALLOC, Z_GATE, Z_FILL };

static void zwait_add(struct blk_queue *q, struct blk_slot *s)
{
	s->next = NULL;
	*q->zwait_tail = s;
	q->zwait_tail = &s->next;
	s->zwaiting = true;
}

static void zwait_remove(struct blk_queue *q, struct blk_slot *s)
{
	struct blk_slot **pp = &q->zwait, *prev = NULL;

	while (*pp && *pp != s) {
		prev = *pp;
		pp = &prev->next;
	}
	if (!*pp)
		return;
	*pp = s->next;
	if (q->zwait_tail == &s->next)
		q->zwait_tail = prev ? &prev->next : &q->zwait;
	s->zwaiting = false;
}

static int prep_zchunk(struct blk_queue *q, struct blk_slot *c)
{
	struct io_uring_sqe *sqe = queue_sqe(q);
	int fd = c->buffered ? c->be->fd_buffered : c->be->fd;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_write(sqe, fd, zero_buf, c->len, c->offset);
	/* A buffered write would copy the chunk into the page cache inside
	 * the submitting call (under an HBA's lock, for the LSI): leave it
	 * to io_uring's workers. */
	if (c->buffered || !c->be->direct)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	io_uring_sqe_set_data(sqe, c);
	return 0;
}

/* A request that will get no more chunks: it finishes once the ones in
 * flight have, or now (through the deferred list) if none are. */
static void fill_fail(struct blk_queue *q, struct blk_slot *s, int err)
{
	if (!s->res)
		s->res = err;
	if (s->zwaiting)
		zwait_remove(q, s);
	if (!s->zinflight)
		queue_defer(q, s, s->res);
}

/* Hands the free chunk writes to the waiting requests in turn, so that
 * several big requests progress side by side. */
static void fill_pump(struct blk_queue *q)
{
	while (q->dead && q->zwait)	/* blkq_abort: no new chunks */
		fill_fail(q, q->zwait, -EIO);
	while (q->zfree && q->zwait) {
		struct blk_slot *p = q->zwait, *c = q->zfree;
		uint64_t end = p->offset + p->len;
		/* chunks on ZERO_CHUNK boundaries: only the first and last
		 * may miss O_DIRECT's alignment */
		uint64_t n = ZERO_CHUNK - p->zpos % ZERO_CHUNK;

		if (n > end - p->zpos)
			n = end - p->zpos;
		c->parent = p;
		c->be = p->be;
		c->offset = p->zpos;
		c->len = n;
		c->buffered = p->be->direct &&
			      (((c->offset | c->len) & (p->be->dio_align - 1)) ||
			       p->be->dio_align > 4096);
		if (prep_zchunk(q, c)) {
			/* The ring is full and cannot be flushed. */
			fill_fail(q, p, -EBUSY);
			continue;
		}
		q->zfree = c->next;
		p->zpos += n;
		p->zinflight++;
		zwait_remove(q, p);
		if (p->zpos < end)
			zwait_add(q, p);
	}
}

static void fill_start(struct blk_queue *q, struct blk_slot *s)
{
	s->zstage = Z_FILL;
	s->zpos = s->offset;
	s->zinflight = 0;
	s->res = 0;
	s->zwaiting = false;
	zwait_add(q, s);
	fill_pump(q);
}

static void chunk_done(struct blk_queue *q, struct blk_slot *c, int res)
{
	struct blk_slot *p = c->parent;

	if (res == -EAGAIN || res == -EINTR ||
	    (res == -EINVAL && !c->buffered && c->be->direct)) {
		if (res == -EINVAL)
			c->buffered = true;
		if (!prep_zchunk(q, c))
			return;
		res = -EBUSY;
	} else if (res > 0 && (uint64_t)res < c->len) {
		c->offset += res;
		c->len -= res;
		if (!prep_zchunk(q, c))
			return;
		res = -EBUSY;
	} else if (res == 0) {
		res = -EIO;
	}
	c->next = q->zfree;
	q->zfree = c;
	p->zinflight--;
	if (res < 0 && !p->res) {
		p->res = res;
		if (p->zwaiting)
			zwait_remove(q, p);
	}
	/* Finished before the pump runs, which could otherwise fail p a
	 * second time (fill_fail). */
	if (!p->zinflight && !p->zwaiting)
		queue_finish(q, p, p->res);
	fill_pump(q);
}

/* The fallocate modes a zeroing request tries in turn before it writes
 * zeroes (0 ends the list). A block device zeroes in the kernel
 * (blkdev_fallocate, which writes zeroes itself where the device cannot),
 * so punching is no use there. */
static int zero_method(const struct blk_slot *s)
{
	static const int zr = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	static const int ph = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	const int wz_file[] = { zr, ph, 0 }, wz_dev[] = { zr, 0, 0 };
	const int zu[] = { ph, zr, 0 };
	const int *m = s->op == BLK_OP_ZERO_UNMAP ? zu :
		       s->be->is_blockdev ? wz_dev : wz_file;

	if (test_no_fallocate() || s->zmethod > 2)
		return 0;
	return m[s->zmethod];
}

/* Starts the next way of zeroing s: a fallocate mode, or the writes (the
 * test gate first, see blk_set_test_hooks). Returns 0 or -errno when
 * nothing could be queued. */
static int zero_next(struct blk_queue *q, struct blk_slot *s)
{
	const struct blk_test_hooks *h = blk_hooks();
	int mode = zero_method(s);
	struct io_uring_sqe *sqe;

	if (!mode && !(h && h->gate_fd >= 0)) {
		fill_start(q, s);
		return 0;
	}
	sqe = queue_sqe(q);
	if (!sqe)
		return -EBUSY;
	if (mode) {
		s->zstage = Z_FALLOC;
		io_uring_prep_fallocate(sqe, s->be->fd, mode, s->offset, s->len);
	} else {
		s->zstage = Z_GATE;
		io_uring_prep_poll_add(sqe, h->gate_fd, POLLIN);
		blk_test_arrived();
	}
	io_uring_sqe_set_data(sqe, s);
	return 0;
}

/* A completion of a zeroing request's fallocate or gate. */
static int zero_done(struct blk_queue *q, struct blk_slot *s, int res)
{
	int ret;

	if (s->zstage == Z_GATE) {
		if (res < 0)
			return res;
		fill_start(q, s);
		return INT_MIN;
	}
	/* Zeroing in the file system always wins; without it, the next
	 * way. */
	if (res != -EOPNOTSUPP && res != -EINVAL)
		return res;
	s->zmethod++;
	ret = zero_next(q, s);
	return ret ? ret : INT_MIN;
}

int blkq_discard(struct blk_queue *q, struct blk_backend *be, enum blk_op op,
		 uint64_t offset, uint64_t len, blk_done_fn done, void *tag)
{
	struct blk_slot *s;
	struct io_uring_sqe *sqe;
	int ret;

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
	if (!blk_range_ok(be, offset, len))
		return -EINVAL;
	if (thr_gated(q, be)) {
		ret = thr_gate(q, be, op, NULL, 0, offset, len, 1, done, tag);
		if (ret <= 0)
			return ret;
	}
	if (be->drv)
		return drvq_start(q, be, op, NULL, 0, offset, len, 1, done,
				  tag);
	s = queue_slot_start(q, op, be, offset, len, done, tag);
	if (!s)
		return -EAGAIN;
	if (op == BLK_OP_DISCARD) {
		if (!be->discard_ok ||
		    (!be->is_blockdev && test_no_fallocate())) {
			queue_defer(q, s, -EOPNOTSUPP);
			return 0;
		}
		if (be->is_blockdev) {
			ret = helper_queue(q, s);
			if (ret)
				queue_slot_put(q, s);
			return ret;
		}
		sqe = queue_sqe(q);
		if (!sqe) {
			queue_slot_put(q, s);
			return -EBUSY;
		}
		/* Runs in io_uring's workers, off this thread. */
		io_uring_prep_fallocate(sqe, be->fd, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, offset, len);
		io_uring_sqe_set_data(sqe, s);
		return 0;
	}
	if (!len) {
		queue_defer(q, s, 0);
		return 0;
	}
	/* fallocate runs in io_uring's workers (a block device zeroes the
	 * range in blkdev_fallocate), the writes of zeroes are asynchronous
	 * too: nothing of it stalls this queue's thread. */
	s->zmethod = 0;
	ret = zero_next(q, s);
	if (ret)
		queue_slot_put(q, s);
	return ret;
}

int blkq_poll(struct blk_queue *q, int fd, blk_done_fn done, void *tag)
{
	struct blk_slot *s = q->free_polls;
	struct io_uring_sqe *sqe;

	if (q->dead)
		return -EIO;
	if (!s)
		return -EAGAIN;
	sqe = queue_sqe(q);
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
	helper_arm(q);	/* if the ring was full when it was due */
	drvq_arm_mailbox(q);
	if (q->thr)
		thr_arm(q);
	if (!q->unsubmitted)
		return 0;
	ret = ring_submit(q);
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
	i = iov_skip(v, cnt, done);
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
		i += iov_skip(v + i, cnt - i, r);
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
	case BLK_OP_ZERO_UNMAP:
		return zero_done(q, s, res);
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

void queue_finish(struct blk_queue *q, struct blk_slot *s, int res)
{
	blk_done_fn done = s->done;
	void *tag = s->tag;

	if (s->st)
		stats_done(q, s, res);
	/* The slot is free before the callback runs: it may queue more. */
	queue_slot_put(q, s);
	done(tag, res);
}

static int reap_ready(struct blk_queue *q)
{
	struct io_uring_cqe *cqe;
	int n = 0;

	q->now = 0;
	q->reaping = true;
	while (q->deferred) {
		struct blk_slot *s = q->deferred;

		q->deferred = s->next;
		if (!q->deferred)
			q->deferred_tail = &q->deferred;
		queue_finish(q, s, s->res);
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
		if (s->op == SLOT_ZCHUNK) {
			chunk_done(q, s, res);
			continue;
		}
		if (s->op == SLOT_HELPER) {
			helper_reap(q);
			continue;
		}
		if (s->op == SLOT_DWATCH) {
			drvq_watch_done(q, s, res);
			continue;
		}
		if (s->op == SLOT_MAILBOX) {
			drvq_reap_mailbox(q);
			continue;
		}
		if (s->op == SLOT_THR) {
			thr_event(q, s, res);
			continue;
		}
		if (complete(q, s, res, &res))
			continue;
		queue_finish(q, s, res);
	}
	q->reaping = false;
	q->now = 0;
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
	iotrace(IOT_SPIN_START, 0, ns < UINT32_MAX ? (uint32_t)ns : UINT32_MAX);
	deadline = mono_ns() + ns;
	for (;;) {
		if (io_uring_cq_ready(&q->ring) || (more && more(arg))) {
			iotrace(IOT_SPIN_END, io_uring_cq_ready(&q->ring) ?
				IOT_SPIN_CQE : IOT_SPIN_MORE, i);
			return true;
		}
		/* Completions of file I/O are posted by task work that runs
		 * only when this thread enters the kernel. */
		if (!q->taskrun_flag ||
		    (IO_URING_READ_ONCE(*q->ring.sq.kflags) & IORING_SQ_TASKRUN)) {
			iotrace(IOT_ENTER, IOT_ENTER_GETEVENTS, 0);
			io_uring_get_events(&q->ring);
		} else {
			__builtin_ia32_pause();
		}
		if (!(++i & 15) && mono_ns() >= deadline) {
			iotrace(IOT_SPIN_END, io_uring_cq_ready(&q->ring) ?
				IOT_SPIN_CQE : IOT_SPIN_TIMEOUT, i);
			return io_uring_cq_ready(&q->ring) > 0 ||
			       (more && more(arg));
		}
	}
}

bool blkq_ready(struct blk_queue *q)
{
	return q->dead || q->deferred || io_uring_cq_ready(&q->ring) > 0;
}

/* io_uring_enter's EAGAIN: the kernel could not allocate a request for
 * now. The wait is retried every millisecond, for up to this many tries in
 * a row before the ring counts as failed. */
#define BLKQ_EAGAIN_TRIES 1000

int blkq_wait(struct blk_queue *q)
{
	unsigned int again = 0;

	if (q->dead)
		return -EIO;
	if (q->deferred)
		return 0;
	helper_arm(q);
	drvq_arm_mailbox(q);
	if (q->thr)
		thr_arm(q);
	while (!io_uring_cq_ready(&q->ring) &&
	       (q->used || q->polls_used || q->dwatches)) {
		int ret = ring_submit_wait(q);

		if (ret == -EAGAIN && ++again < BLKQ_EAGAIN_TRIES) {
			if (again == 1)
				pr_warn_rated("io_uring: %s; retrying", strerror(-ret));
			usleep(1000);
			continue;
		}
		if (ret < 0 && ret != -EINTR && ret != -EBUSY)
			return ret;
		if (ret >= 0)
			again = 0;
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
	iotrace(IOT_REAP_PASS, 0, (uint32_t)n);
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
	/* From here on nothing new is started: callbacks that would go on
	 * (the next segment of a WRITE SAME, more zero chunks) fail at once,
	 * and the wait below ends with what was in flight. */
	q->dead = true;
	/* What is done already is reported as it came out. */
	reap_ready(q);
	/* Held by the limits: they never reached the kernel. */
	thr_fail(q, err);
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

		if (ret == -ETIME || ret == -EBUSY || ret == -EAGAIN) {
			/* EBUSY: completions are waiting to be taken;
			 * EAGAIN: the kernel is short of memory, and this
			 * is the wait that must not give up early */
			if (!reap_ready(q))
				idle++;
			continue;
		}
		if (ret < 0 && ret != -EINTR)
			break;
		q->unsubmitted = 0;
		if (reap_ready(q))
			idle = 0;
	}
	/* No thread may touch a slot once it is failed below: the discard
	 * helper runs out its list and stops, and its requests are failed
	 * with the rest. */
	helper_join(&q->helper);
	for (unsigned int i = 0; i < q->depth && q->used; i++) {
		struct blk_slot *s = &q->slots[i];

		if (!s->busy || s->orphan)
			continue;
		if (s->drv) {
			/* Its driver still owns it: answered now, the slot
			 * kept until the driver lets go (blkq_destroy). */
			s->orphan = true;
			if (s->st) {
				stats_done(q, s, err);
				blk_qstats_drop(s->st);
				s->st = NULL;
			}
			s->done(s->tag, err);
			continue;
		}
		queue_finish(q, s, err);
	}
	q->deferred = NULL;
	q->deferred_tail = &q->deferred;
	q->zwait = NULL;
	q->zwait_tail = &q->zwait;
}

