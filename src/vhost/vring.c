/* vhost-user vrings: each queue started on the device once its size,
 * addresses, base, kick fd and enable say so and stopped otherwise, and the
 * SET/GET_VRING_* messages that configure them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "lib/log.h"
#include "vhost/server_internal.h"
#include "virtio/virtio.h"

void vhu_queue_reset(struct vhu_queue *q)
{
	vhu_close_fd(&q->kick_fd);
	vhu_close_fd(&q->call_fd);
	vhu_close_fd(&q->err_fd);
	memset(q, 0, sizeof(*q));
	q->kick_fd = q->call_fd = q->err_fd = -1;
}

/* ---- starting and stopping queues ---- */

static void queue_stop(struct vhu_server *s, unsigned int i)
{
	struct vhu_queue *q = &s->q[i];

	if (!q->running)
		return;
	s->dev->ops->queue_stop(s->dev, i);
	q->running = false;
}

void vhu_stop_all(struct vhu_server *s)
{
	for (unsigned int i = 0; i < s->nq; i++)
		queue_stop(s, i);
}

static bool queue_ready(const struct vhu_server *s, const struct vhu_queue *q)
{
	return q->started && q->enabled && q->addr_set && q->num &&
	       q->kick_fd >= 0;
}

/* Translates the ring addresses (client user addresses) to guest-physical
 * ones for ring.c, which checks them again against guest memory. */
static int queue_map(struct vhu_server *s, unsigned int i)
{
	struct vhu_queue *q = &s->q[i];
	uint64_t n = q->num;

	if (vhu_mem_uva_to_gpa(&s->mem, q->desc_ua, 16 * n, &q->vq.desc_gpa) ||
	    vhu_mem_uva_to_gpa(&s->mem, q->avail_ua, 6 + 2 * n, &q->vq.avail_gpa) ||
	    vhu_mem_uva_to_gpa(&s->mem, q->used_ua, 6 + 8 * n, &q->vq.used_gpa))
		return vhu_fail(s, -EFAULT,
				"vring %u: rings at 0x%" PRIx64 "/0x%" PRIx64 "/0x%" PRIx64
				" (size %u) are not inside the memory table",
				i, q->desc_ua, q->avail_ua, q->used_ua, q->num);
	q->vq.mem = &s->mem.gmem;
	q->vq.size = q->num;
	q->vq.kick_fd = q->kick_fd;
	q->vq.call_fd = q->call_fd;
	q->vq.isr = NULL;
	q->vq.event_idx = s->dev->guest_features & (1ull << VIRTIO_F_RING_EVENT_IDX);
	q->vq.indirect = s->dev->guest_features & (1ull << VIRTIO_F_RING_INDIRECT_DESC);
	q->vq.inflight = NULL;
	if (s->inflight_map && i < s->inflight_nq) {
		/* The buffer is made for the largest ring the front-end
		 * offers (QEMU: its queue-size); a driver may choose a smaller
		 * one, which uses the first entries of its region. */
		if (q->num > s->inflight_qsize)
			return vhu_fail(s, -EINVAL, "vring %u: size %u is larger than the inflight "
					"buffer's queue size %u", i, q->num, s->inflight_qsize);
		q->vq.inflight = &s->inflight[i];
		q->vq.inflight->stop_after = s->test_stop_after;
	}
	if (virtq_init(&q->vq))
		return vhu_fail(s, -EINVAL, q->vq.inflight ?
				"vring %u: size %u, ring alignment or its inflight region is invalid" :
				"vring %u: size %u or ring alignment is invalid", i, q->num);
	return 0;
}

/* Brings queue i to the state its configuration asks for: running when
 * started, enabled and fully set up; stopped otherwise. */
int vhu_queue_sync(struct vhu_server *s, unsigned int i)
{
	struct vhu_queue *q = &s->q[i];
	int ret;

	if (!queue_ready(s, q)) {
		queue_stop(s, i);
		return 0;
	}
	if (q->running)
		return 0;
	ret = queue_map(s, i);
	if (ret)
		return ret;
	/* What recovery found, from fields the queue thread does not
	 * change: once it runs it pops the resubmissions at once, so the
	 * pending count read after queue_start would be anything from the
	 * full count down to 0. */
	if (q->vq.inflight && (q->vq.inflight->recovered || q->vq.inflight->finished))
		pr_info("vhost-user: vring %u: resubmitting %u requests left in flight "
			"by the previous back-end (%u completions it had published "
			"finished)", i, q->vq.inflight->recovered, q->vq.inflight->finished);
	ret = s->dev->ops->queue_start(s->dev, i, &q->vq);
	if (ret)
		return vhu_fail(s, ret, "vring %u: the device could not start it: %s", i,
				strerror(-ret));
	q->running = true;
	q->ran = true;
	if (q->vq.inflight && q->vq.inflight->recovered) {
		uint64_t one = 1;

		/* The front-end will not kick for requests it already
		 * kicked for: kick ourselves. */
		if (write(q->kick_fd, &one, sizeof(one)) < 0)
			pr_debug("vhost-user: vring %u kick: %s", i, strerror(errno));
	}
	return 0;
}

int vhu_sync_all(struct vhu_server *s)
{
	for (unsigned int i = 0; i < s->nq; i++) {
		int ret = vhu_queue_sync(s, i);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- vring messages ---- */

static int vring_index(struct vhu_server *s, uint32_t index)
{
	if (index >= s->nq)
		return vhu_fail(s, -EINVAL, "vring index %u out of range (the device has %u)",
				index, s->nq);
	return 0;
}

int vhu_do_set_vring_num(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index, n = m->p.state.num;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (!n || n > s->dev->max_queue_size || (n & (n - 1)))
		return vhu_fail(s, -EINVAL, "vring %u: size %u is not a power of two up to %u",
				i, n, s->dev->max_queue_size);
	queue_stop(s, i);
	s->q[i].num = n;
	return vhu_queue_sync(s, i);
}

int vhu_do_set_vring_addr(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_vring_addr *a = &m->p.addr;
	struct vhu_queue *q;
	int ret = vring_index(s, a->index);

	if (ret)
		return ret;
	if (a->flags & VHU_VRING_F_LOG)
		return vhu_fail(s, -EINVAL, "vring %u: dirty logging was not offered", a->index);
	q = &s->q[a->index];
	queue_stop(s, a->index);
	q->desc_ua = a->desc;
	q->avail_ua = a->avail;
	q->used_ua = a->used;
	q->addr_set = true;
	return vhu_queue_sync(s, a->index);
}

int vhu_do_set_vring_base(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.state.num > 0xffff)
		return vhu_fail(s, -EINVAL, "vring %u: base %u is not a 16-bit index", i,
				m->p.state.num);
	queue_stop(s, i);
	s->q[i].vq.last_avail = m->p.state.num;
	return vhu_queue_sync(s, i);
}

/* Stops the ring: every request in flight completes and is pushed to the
 * used ring before the index is reported, so the front-end can resume (or
 * migrate) from a consistent point. (Requests recovered from an inflight
 * buffer and not yet popped again when the ring stops stay flagged there:
 * the next start with that buffer runs them.) */
int vhu_do_get_vring_base(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_vring_state st;
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	queue_stop(s, i);
	s->q[i].started = false;
	vhu_close_fd(&s->q[i].kick_fd);
	st.index = i;
	st.num = s->q[i].vq.last_avail;
	return vhu_reply(s, m, &st, sizeof(st));
}

/* Kick, call and error fds come from the client and are read, polled and
 * written by the queue threads, and queue_stop wakes a thread by writing
 * to the kick fd. A kick fd must therefore be an eventfd: a pipe or socket
 * there would not wake the thread on our write (queue_stop would hang in
 * pthread_join). Call and error fds are only ever written, one 8-byte
 * value per notification, so anything a non-blocking write of 8 bytes
 * signals will do: an eventfd, a pipe or FIFO, or a UNIX socket (UML's
 * virtio_uml sends one end of a socketpair, because its interrupts come
 * from SIGIO, which eventfds do not raise). Regular files, devices and
 * other kinds are refused: a write there signals nobody, or could block.
 * Every fd is made non-blocking. A write that fails with EAGAIN loses no
 * notification: a full eventfd counter, pipe or socket buffer is already
 * readable, and the reader, once woken, looks at the used ring, which
 * holds every completion pushed before the write. (8 bytes go out whole
 * or not at all: below PIPE_BUF for pipes, one skb for UNIX sockets.) A
 * write to a pipe or socket whose reader is gone fails with EPIPE:
 * vhu_server_run ignores SIGPIPE for the whole process. */
static int check_notify_fd(struct vhu_server *s, int fd, uint32_t i, const char *what,
			   bool kick)
{
	char path[32], target[32];
	struct stat st;
	ssize_t n;
	int fl;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return vhu_fail(s, -errno, "vring %u: %s fd: %s: %s", i, what, path,
				strerror(errno));
	target[n] = 0;
	if (strcmp(target, "anon_inode:[eventfd]")) {
		int domain = 0;
		socklen_t len = sizeof(domain);

		if (kick)
			return vhu_fail(s, -EINVAL, "vring %u: %s fd is %s, not an eventfd",
					i, what, target);
		if (fstat(fd, &st) < 0)
			return vhu_fail(s, -errno, "vring %u: %s fd: %s", i, what,
					strerror(errno));
		if (S_ISSOCK(st.st_mode) &&
		    (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) || domain != AF_UNIX))
			return vhu_fail(s, -EINVAL, "vring %u: %s fd is a socket but not a UNIX one",
					i, what);
		if (!S_ISSOCK(st.st_mode) && !S_ISFIFO(st.st_mode))
			return vhu_fail(s, -EINVAL, "vring %u: %s fd is %s, not an eventfd, pipe or "
					"UNIX socket", i, what, target);
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return vhu_fail(s, -errno, "vring %u: %s fd: cannot make it non-blocking: %s",
				i, what, strerror(errno));
	return 0;
}

/* A ring that ran since its last call fd was set may have notified that
 * fd, and the front-end need not look at the fd it replaces. QEMU 7.2
 * starts vhost-user-blk and -scsi rings (KICK, ENABLE) while their call
 * fds are still the ones it set when it created the device, and hands
 * over the guest's interrupt eventfds only afterwards, without waiting for
 * the back-end; nothing reads the old ones any more. A guest that had
 * queued its first request by then got its completion signalled there and
 * waited for ever (virtio-scsi never times a command out: CI's hang in
 * virtio_scsi's probe). So the new fd is signalled once: at worst an
 * interrupt for which the driver finds nothing new. */
static void renotify(uint32_t i, int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		pr_debug("vhost-user: vring %u call: %s", i, strerror(errno));
}

int vhu_do_set_vring_fd(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.u64 & VHU_VRING_IDX_MASK;
	bool nofd = m->p.u64 & VHU_VRING_NOFD;
	struct vhu_queue *q;
	int fd, ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.u64 & ~(VHU_VRING_IDX_MASK | VHU_VRING_NOFD))
		return vhu_fail(s, -EINVAL, "vring %u: unknown bits in 0x%" PRIx64, i, m->p.u64);
	q = &s->q[i];
	fd = nofd ? -1 : m->fds[0];
	if (fd >= 0) {
		/* Left in m on failure: handle_msg closes it. */
		ret = check_notify_fd(s, fd, i,
				      m->hdr.request == VHU_SET_VRING_KICK ? "kick" :
				      m->hdr.request == VHU_SET_VRING_CALL ? "call" : "error",
				      m->hdr.request == VHU_SET_VRING_KICK);
		if (ret)
			return ret;
	}
	m->nfds = 0;	/* the fd is ours now */
	switch (m->hdr.request) {
	case VHU_SET_VRING_KICK:
		if (fd < 0)
			return vhu_fail(s, -EINVAL, "vring %u: polling mode (no kick fd) is not supported", i);
		queue_stop(s, i);
		vhu_close_fd(&q->kick_fd);
		q->kick_fd = fd;
		q->started = true;
		return vhu_queue_sync(s, i);
	case VHU_SET_VRING_CALL:
		/* The front-end swaps call fds while rings run (at start,
		 * and as the guest masks and unmasks vectors): stop, swap,
		 * pass on what the old fd may have taken, restart. */
		queue_stop(s, i);
		vhu_close_fd(&q->call_fd);
		q->call_fd = fd;
		if (q->ran)
			renotify(i, fd);
		q->ran = false;
		return vhu_queue_sync(s, i);
	default:
		/* Every queue thread may write error fds: stop them all. */
		vhu_stop_all(s);
		vhu_close_fd(&q->err_fd);
		q->err_fd = fd;
		return vhu_sync_all(s);
	}
}

int vhu_do_set_vring_enable(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.state.num > 1)
		return vhu_fail(s, -EINVAL, "vring %u: enable value %u is not 0 or 1", i,
				m->p.state.num);
	s->q[i].enabled = m->p.state.num;
	return vhu_queue_sync(s, i);
}
