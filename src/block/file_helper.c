/* The block queue's helper thread: what io_uring cannot run asynchronously
 * for the file backend, block-device discards and copies between files,
 * off the queue's thread; results come back through the queue's ring. */
#include <errno.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/queue_int.h"

#define COPY_BOUNCE (1u << 20)

void helper_init(struct blk_helper *h)
{
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	h->todo_tail = &h->todo;
	inbox_init(&h->done, SLOT_HELPER);
}

/* Stops the thread once it has run every discard it was given (their
 * results stay on its done list for whoever reaps or fails them). */
void helper_join(struct blk_helper *h)
{
	if (!h->started)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	h->started = false;
}

void helper_stop(struct blk_helper *h)
{
	helper_join(h);
	inbox_close(&h->done);
	free(h->bounce);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
}

/* Tests: waits at the hooks' gate (blk_set_test_hooks). */
static void test_gate_wait(void)
{
	const struct blk_test_hooks *h = blk_hooks();
	struct pollfd p;

	if (!h || h->gate_fd < 0)
		return;
	p.fd = h->gate_fd;
	p.events = POLLIN;
	blk_test_arrived();
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

static int blockdev_range_ioctl(struct blk_backend *be, unsigned long req,
				uint64_t off, uint64_t len)
{
	uint64_t range[2] = { off, len };

	return ioctl(be->fd, req, range) ? -errno : 0;
}

static int copy_fd(const struct blk_backend *be)
{
	/* cache=none: the page cache path, for which copy_file_range has no
	 * alignment rule; coherent with O_DIRECT I/O as blkq_rw's fallback
	 * is (the kernel writes back and invalidates around direct I/O). */
	return be->fd_buffered >= 0 ? be->fd_buffered : be->fd;
}

static bool same_file(const struct blk_backend *a, const struct blk_backend *b)
{
	struct stat sa, sb;

	if (a == b || a->fd == b->fd)
		return true;
	if (fstat(a->fd, &sa) || fstat(b->fd, &sb))
		return true;	/* unknown: the safe (memmove) way */
	if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode))
		return sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* All n bytes of buf written to (out) or read from fd at off, however many
 * calls it takes: 0, or -errno (-EIO where the file ends first). */
static int io_all(bool out, int fd, uint8_t *buf, size_t n, uint64_t off)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? pwrite(fd, buf + done, n - done, off + done) :
				  pread(fd, buf + done, n - done, off + done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += r;
	}
	return 0;
}

/* Through the thread's buffer, in pieces going the copy's way (so that an
 * overlapping range reads each byte before it is overwritten). */
static int copy_bounce(struct blk_helper *h, int sfd, uint64_t so, int dfd,
		       uint64_t doff, uint64_t n, bool back)
{
	if (!h->bounce && !(h->bounce = malloc(COPY_BOUNCE)))
		return -ENOMEM;
	while (n) {
		uint64_t piece = n < COPY_BOUNCE ? n : COPY_BOUNCE;
		uint64_t at = back ? n - piece : 0;
		int ret = io_all(false, sfd, h->bounce, piece, so + at);

		if (!ret)
			ret = io_all(true, dfd, h->bounce, piece, doff + at);
		if (ret)
			return ret;
		if (!back) {
			so += piece;
			doff += piece;
		}
		n -= piece;
	}
	return 0;
}

/* One chunk of a copy. Returns 1 while more remains, 0 when it is all
 * done, or -errno. */
static int copy_step(struct blk_helper *h, struct blk_slot *s)
{
	struct blk_copy *c = s->copy;
	uint64_t done = c->copied, left = c->len - done, n;
	int sfd = copy_fd(c->src), dfd = copy_fd(c->dst);
	loff_t so, doff;

	if (!s->copy_started) {
		s->copy_started = true;
		test_gate_wait();
		if (same_file(c->src, c->dst) &&
		    c->src_off < c->dst_off + c->len &&
		    c->dst_off < c->src_off + c->len) {
			/* copy_file_range refuses overlap within a file */
			s->copy_bounce = true;
			s->copy_back = c->dst_off > c->src_off;
		}
	}
	if (__atomic_load_n(&c->cancel, __ATOMIC_ACQUIRE))
		return -ECANCELED;
	if (!left)
		return 0;
	n = left < BLK_COPY_CHUNK ? left : BLK_COPY_CHUNK;
	so = c->src_off + (s->copy_back ? left - n : done);
	doff = c->dst_off + (s->copy_back ? left - n : done);
	if (!s->copy_bounce) {
		const struct blk_test_hooks *th = blk_hooks();
		uint64_t rest = n;

		while (rest) {
			ssize_t r = th && th->no_copy_range ? (errno = EXDEV, -1) :
				    copy_file_range(sfd, &so, dfd, &doff, rest, 0);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EXDEV || errno == EOPNOTSUPP ||
				      errno == EINVAL || errno == ENOSYS)) {
				/* Not between these files: different file
				 * systems on kernels before 5.3 or since
				 * 5.19 for most of them (EXDEV), a file
				 * system or device without it (EOPNOTSUPP,
				 * EINVAL: e.g. a block device, or O_APPEND),
				 * an old kernel (ENOSYS). The rest of this
				 * copy takes the bounce buffer. */
				s->copy_bounce = true;
				break;
			}
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			rest -= r;
		}
		if (rest) {
			int ret = copy_bounce(h, sfd, so, dfd, doff, rest, false);

			if (ret)
				return ret;
		}
	} else {
		int ret = copy_bounce(h, sfd, so, dfd, doff, n, s->copy_back);

		if (ret)
			return ret;
	}
	__atomic_store_n(&c->copied, done + n, __ATOMIC_RELEASE);
	return done + n < c->len ? 1 : 0;
}

static void *helper_main(void *arg)
{
	struct blk_helper *h = arg;

	pthread_setname_np(pthread_self(), "iovm-blkhelper");
	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct blk_slot *s = h->todo;
		bool stop;
		int res;

		if (!s) {
			if (h->stop)
				break;
			pthread_cond_wait(&h->cond, &h->lock);
			continue;
		}
		h->todo = s->next;
		if (!h->todo)
			h->todo_tail = &h->todo;
		stop = h->stop;
		pthread_mutex_unlock(&h->lock);
		if (s->op == SLOT_COPY) {
			/* stopping (blkq_abort, blkq_destroy): copies end at
			 * their next chunk */
			res = stop ? -ECANCELED : copy_step(h, s);
		} else {
			test_gate_wait();
			do
				res = blockdev_range_ioctl(s->be, BLKDISCARD,
							   s->offset, s->len);
			while (res == -EINTR);
		}
		if (res != 1) {
			inbox_post(&h->done, s, res);
			pthread_mutex_lock(&h->lock);
			continue;
		}
		/* more of this copy: after what else waits */
		pthread_mutex_lock(&h->lock);
		s->next = NULL;
		*h->todo_tail = s;
		h->todo_tail = &s->next;
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static int helper_start(struct blk_helper *h)
{
	sigset_t all, old;
	int ret;

	ret = inbox_open(&h->done);
	if (ret)
		return ret;
	/* Signals are for the threads that wait for them, not this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&h->thread, NULL, helper_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return -ret;
	h->started = true;
	return 0;
}

int helper_arm(struct blk_queue *q)
{
	return inbox_arm(q, &q->helper.done, q->helper.pending);
}

int helper_queue(struct blk_queue *q, struct blk_slot *s)
{
	struct blk_helper *h = &q->helper;
	int ret;

	if (!h->started) {
		ret = helper_start(h);
		if (ret)
			return ret;
	}
	h->pending++;
	ret = helper_arm(q);
	if (ret) {
		h->pending--;
		return ret;
	}
	pthread_mutex_lock(&h->lock);
	s->next = NULL;
	*h->todo_tail = s;
	h->todo_tail = &s->next;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* The helper's eventfd fired: finish what it did. */
void helper_reap(struct blk_queue *q)
{
	struct blk_helper *h = &q->helper;
	struct blk_slot *s = inbox_take(&h->done), *next;

	for (; s; s = next) {
		next = s->next;
		h->pending--;
		queue_finish(q, s, s->res);
	}
	/* If the ring is full now, blkq_submit and blkq_wait retry. */
	helper_arm(q);
}

int blkq_copy(struct blk_queue *q, struct blk_copy *c, blk_done_fn done,
	      void *tag)
{
	struct blk_slot *s;
	int ret;

	if (q->dead)
		return -EIO;
	if (c->src->drv || c->dst->drv)
		return -EOPNOTSUPP;	/* no host-side copy over the network */
	if (c->dst->ro)
		return -EROFS;
	if (!blk_range_ok(c->src, c->src_off, c->len) ||
	    !blk_range_ok(c->dst, c->dst_off, c->len))
		return -EINVAL;
	s = queue_slot_start(q, BLK_OP_WRITE, c->dst, c->dst_off, c->len, done, tag);
	if (!s)
		return -EAGAIN;
	s->op = SLOT_COPY;
	s->copy = c;
	s->copy_started = false;
	s->copy_bounce = false;
	s->copy_back = false;
	__atomic_store_n(&c->copied, 0, __ATOMIC_RELAXED);
	if (!c->len) {
		queue_defer(q, s, 0);
		return 0;
	}
	ret = helper_queue(q, s);
	if (ret)
		queue_slot_put(q, s);
	return ret;
}
