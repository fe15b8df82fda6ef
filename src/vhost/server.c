/* vhost-user back-end: the protocol state machine (features, memory table,
 * vrings, config) in front of a virtio device, and the listening loop.
 *
 * Threads: everything here runs on the one thread that reads the socket.
 * The device's queue threads only run between queue_start and queue_stop,
 * so any state they can see (guest memory, ring addresses, fds) is changed
 * only while the queues it concerns are stopped. A client that truncates
 * the file behind its guest RAM is caught by sigbus.c and reported on the
 * memory table's fault fd, which this thread polls with the socket. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/sock.h"
#include "vhost/mem.h"
#include "vhost/proto.h"
#include "vhost/server.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"

/* Features the vhost-user transport itself cannot provide, whatever the
 * device offers: an IOMMU (no IOTLB messages), packed rings (ring.c is
 * split only), dirty logging for migration. */
#define VHU_UNSUPPORTED_FEATURES                                          \
	((1ull << 33) /* ACCESS_PLATFORM */ | (1ull << 34) /* RING_PACKED */ | \
	 (1ull << 26) /* VHOST_F_LOG_ALL */)

#define VHU_PROTOCOL_FEATURES                                             \
	((1ull << VHU_PF_MQ) | (1ull << VHU_PF_REPLY_ACK) |                  \
	 (1ull << VHU_PF_CONFIG) | (1ull << VHU_PF_RESET_DEVICE) |           \
	 (1ull << VHU_PF_CONFIGURE_MEM_SLOTS) |                             \
	 (1ull << VHU_PF_INFLIGHT_SHMFD))

struct vhu_queue {
	struct virtq vq;	/* vq.last_avail persists across stop/start */
	uint64_t desc_ua, avail_ua, used_ua;	/* client user addresses */
	uint32_t num;
	bool addr_set;
	bool started;		/* a kick fd arrived since the last GET_VRING_BASE */
	bool enabled;
	bool running;		/* between queue_start and queue_stop */
	int kick_fd, call_fd, err_fd;
};

struct vhu_server {
	struct virtio_dev *dev;
	struct vhu_mem mem;
	struct vhu_queue *q;
	unsigned int nq;
	uint64_t features;		/* acked by SET_FEATURES */
	uint64_t protocol_features;	/* acked by SET_PROTOCOL_FEATURES */
	int sock;
	unsigned int send_timeout_ms;	/* for one reply to leave */
	uint64_t test_stop_after;	/* --test-stop-after; 0: off */
	/* The inflight buffer (SET_INFLIGHT_FD): one region per queue for
	 * the first inflight_nq queues, whose rings must have
	 * inflight_qsize entries; NULL: no tracking. */
	uint8_t *inflight_map;
	size_t inflight_len;
	uint16_t inflight_nq, inflight_qsize;
	struct virtq_inflight *inflight;	/* [inflight_nq] */
	char err[256];			/* why the current message failed */
};

/* Handler results: 0 success; VHU_NACK a refused but well-formed request
 * (REPLY_ACK answers non-zero, the connection stays); < 0 a protocol
 * violation that closes the connection. */
#define VHU_NACK 1

static int fail(struct vhu_server *s, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct vhu_server *s, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return ret;
}

/* The status of sending a reply (vhu_msg_reply*). The socket has a send
 * timeout (vhu_server_serve), so a client that stops reading its replies is
 * dropped, not waited for. */
static int reply_sent(struct vhu_server *s, int ret)
{
	if (ret == -EAGAIN)
		return fail(s, -ETIMEDOUT,
			    "cannot send a reply: the client has not read its replies for %u ms",
			    s->send_timeout_ms);
	if (ret)
		return fail(s, ret, "cannot send a reply: %s", strerror(-ret));
	return 0;
}

static int reply(struct vhu_server *s, const struct vhu_msg *m,
		 const void *payload, uint32_t size)
{
	return reply_sent(s, vhu_msg_reply(s->sock, m, payload, size));
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void queue_reset(struct vhu_queue *q)
{
	close_fd(&q->kick_fd);
	close_fd(&q->call_fd);
	close_fd(&q->err_fd);
	memset(q, 0, sizeof(*q));
	q->kick_fd = q->call_fd = q->err_fd = -1;
}

static bool has_pf(const struct vhu_server *s, unsigned int bit)
{
	return s->protocol_features & (1ull << bit);
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

static void stop_all(struct vhu_server *s)
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
		return fail(s, -EFAULT,
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
			return fail(s, -EINVAL, "vring %u: size %u is larger than the inflight "
				    "buffer's queue size %u", i, q->num, s->inflight_qsize);
		q->vq.inflight = &s->inflight[i];
		q->vq.inflight->stop_after = s->test_stop_after;
	}
	if (virtq_init(&q->vq))
		return fail(s, -EINVAL, q->vq.inflight ?
			    "vring %u: size %u, ring alignment or its inflight region is invalid" :
			    "vring %u: size %u or ring alignment is invalid", i, q->num);
	return 0;
}

/* Brings queue i to the state its configuration asks for: running when
 * started, enabled and fully set up; stopped otherwise. */
static int queue_sync(struct vhu_server *s, unsigned int i)
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
		return fail(s, ret, "vring %u: the device could not start it: %s", i,
			    strerror(-ret));
	q->running = true;
	if (q->vq.inflight && q->vq.inflight->recovered) {
		uint64_t one = 1;

		/* The front-end will not kick for requests it already
		 * kicked for: kick ourselves. */
		if (write(q->kick_fd, &one, sizeof(one)) < 0)
			pr_debug("vhost-user: vring %u kick: %s", i, strerror(errno));
	}
	return 0;
}

static int sync_all(struct vhu_server *s)
{
	for (unsigned int i = 0; i < s->nq; i++) {
		int ret = queue_sync(s, i);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- the device's transport callbacks (called on its queue threads) ---- */

static void transport_needs_reset(struct virtio_dev *dev)
{
	struct vhu_server *s = dev->transport.opaque;
	uint64_t one = 1;

	/* The front-end learns of a broken ring through the error eventfds;
	 * they change only while every queue is stopped. */
	for (unsigned int i = 0; i < s->nq; i++)
		if (s->q[i].err_fd >= 0 &&
		    write(s->q[i].err_fd, &one, sizeof(one)) < 0)
			pr_debug("vhost-user: vring %u error eventfd: %s", i,
				 strerror(errno));
}

static void transport_config_changed(struct virtio_dev *dev)
{
	/* Without a back-end request channel the front-end re-reads config
	 * space when it wants (GET_CONFIG); nothing to send. */
	pr_debug("vhost-user: %s config space changed", dev->name);
}

/* ---- message handlers ---- */

static int vring_index(struct vhu_server *s, uint32_t index)
{
	if (index >= s->nq)
		return fail(s, -EINVAL, "vring index %u out of range (the device has %u)",
			    index, s->nq);
	return 0;
}

static int do_get_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t f = (s->dev->host_features & ~VHU_UNSUPPORTED_FEATURES) |
		     (1ull << VHU_F_PROTOCOL_FEATURES);

	return reply(s, m, &f, sizeof(f));
}

static int do_set_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t offered = (s->dev->host_features & ~VHU_UNSUPPORTED_FEATURES) |
			   (1ull << VHU_F_PROTOCOL_FEATURES);
	uint64_t f = m->p.u64;
	uint64_t old = s->dev->guest_features;
	int ret;

	/* QEMU acks some device features without asking the back-end (its
	 * vhost-user-scsi sets CHANGE whatever was offered): such bits are
	 * dropped, so the device only ever sees features it offered. */
	if (f & ~offered) {
		pr_debug("vhost-user: ignoring unoffered features 0x%" PRIx64, f & ~offered);
		f &= offered;
	}
	stop_all(s);
	s->dev->guest_features = f & ~(1ull << VHU_F_PROTOCOL_FEATURES);
	ret = s->dev->ops->features_ok ? s->dev->ops->features_ok(s->dev) : 0;
	if (ret) {
		s->dev->guest_features = old;
		return fail(s, -EINVAL, "the device refused features 0x%" PRIx64, f);
	}
	s->features = f;
	/* Without protocol features rings are enabled from the start;
	 * with them, SET_VRING_ENABLE decides. */
	if (!(f & (1ull << VHU_F_PROTOCOL_FEATURES)))
		for (unsigned int i = 0; i < s->nq; i++)
			s->q[i].enabled = true;
	return sync_all(s);
}

static int do_get_protocol_features(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t f = VHU_PROTOCOL_FEATURES;

	return reply(s, m, &f, sizeof(f));
}

static int do_set_protocol_features(struct vhu_server *s, struct vhu_msg *m)
{
	if (m->p.u64 & ~(uint64_t)VHU_PROTOCOL_FEATURES)
		return fail(s, -EINVAL, "protocol features 0x%" PRIx64 " include unoffered bits",
			    m->p.u64);
	s->protocol_features = m->p.u64;
	return 0;
}

static int do_set_owner(struct vhu_server *s, struct vhu_msg *m)
{
	return 0;
}

/* Forgets the inflight buffer; the queues using it are stopped. */
static void inflight_clear(struct vhu_server *s)
{
	if (s->inflight_map)
		munmap(s->inflight_map, s->inflight_len);
	for (unsigned int i = 0; i < s->inflight_nq; i++)
		free(s->inflight[i].resubmit);
	free(s->inflight);
	s->inflight = NULL;
	s->inflight_map = NULL;
	s->inflight_len = 0;
	s->inflight_nq = s->inflight_qsize = 0;
}

/* RESET_OWNER (deprecated) and RESET_DEVICE: all rings stop and forget
 * their state (the inflight buffer too: it describes the old rings);
 * memory and the connection stay. */
static int do_reset(struct vhu_server *s, struct vhu_msg *m)
{
	stop_all(s);
	if (s->dev->ops->flush)
		s->dev->ops->flush(s->dev);
	for (unsigned int i = 0; i < s->nq; i++)
		queue_reset(&s->q[i]);
	inflight_clear(s);
	s->features = 0;
	s->dev->guest_features = 0;
	return 0;
}

static int do_set_mem_table(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_mem_table *t = &m->p.mem;
	int ret;

	stop_all(s);
	vhu_mem_clear(&s->mem);
	for (unsigned int i = 0; i < t->nregions; i++) {
		ret = vhu_mem_add(&s->mem, &t->r[i], m->fds[i], s->err, sizeof(s->err));
		if (ret)
			return ret;
	}
	return sync_all(s);
}

/* Memory changes while rings run (hotplug): rings are re-mapped, and a
 * ring whose memory is momentarily gone (a region being replaced by REM
 * then ADD) stays stopped until its memory is back. */
static void sync_after_mem_change(struct vhu_server *s)
{
	for (unsigned int i = 0; i < s->nq; i++)
		if (queue_sync(s, i))
			pr_debug("vhost-user: vring %u waits for its memory: %s", i, s->err);
	s->err[0] = 0;
}

static int do_add_mem_reg(struct vhu_server *s, struct vhu_msg *m)
{
	int ret;

	stop_all(s);
	ret = vhu_mem_add(&s->mem, &m->p.memreg.r, m->fds[0], s->err, sizeof(s->err));
	if (ret)
		return ret;
	sync_after_mem_change(s);
	return 0;
}

static int do_rem_mem_reg(struct vhu_server *s, struct vhu_msg *m)
{
	int ret;

	stop_all(s);
	ret = vhu_mem_remove(&s->mem, &m->p.memreg.r, s->err, sizeof(s->err));
	if (ret)
		return ret;
	sync_after_mem_change(s);
	return 0;
}

static int do_get_max_mem_slots(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t n = VHU_MEM_MAX_REGIONS;

	return reply(s, m, &n, sizeof(n));
}

static int do_get_queue_num(struct vhu_server *s, struct vhu_msg *m)
{
	uint64_t n = s->nq;

	return reply(s, m, &n, sizeof(n));
}

static int do_set_vring_num(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index, n = m->p.state.num;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (!n || n > s->dev->max_queue_size || (n & (n - 1)))
		return fail(s, -EINVAL, "vring %u: size %u is not a power of two up to %u",
			    i, n, s->dev->max_queue_size);
	queue_stop(s, i);
	s->q[i].num = n;
	return queue_sync(s, i);
}

static int do_set_vring_addr(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_vring_addr *a = &m->p.addr;
	struct vhu_queue *q;
	int ret = vring_index(s, a->index);

	if (ret)
		return ret;
	if (a->flags & VHU_VRING_F_LOG)
		return fail(s, -EINVAL, "vring %u: dirty logging was not offered", a->index);
	q = &s->q[a->index];
	queue_stop(s, a->index);
	q->desc_ua = a->desc;
	q->avail_ua = a->avail;
	q->used_ua = a->used;
	q->addr_set = true;
	return queue_sync(s, a->index);
}

static int do_set_vring_base(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.state.num > 0xffff)
		return fail(s, -EINVAL, "vring %u: base %u is not a 16-bit index", i,
			    m->p.state.num);
	queue_stop(s, i);
	s->q[i].vq.last_avail = m->p.state.num;
	return queue_sync(s, i);
}

/* Stops the ring: every request in flight completes and is pushed to the
 * used ring before the index is reported, so the front-end can resume (or
 * migrate) from a consistent point. (Requests recovered from an inflight
 * buffer and not yet popped again when the ring stops stay flagged there:
 * the next start with that buffer runs them.) */
static int do_get_vring_base(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_vring_state st;
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	queue_stop(s, i);
	s->q[i].started = false;
	close_fd(&s->q[i].kick_fd);
	st.index = i;
	st.num = s->q[i].vq.last_avail;
	return reply(s, m, &st, sizeof(st));
}

/* Kick, call and error fds come from the client and are read, polled and
 * written by the queue threads, and queue_stop wakes a thread by writing
 * to the kick fd. A pipe or socket there would never wake it (queue_stop
 * hangs in pthread_join), and a blocking eventfd whose counter the client
 * pushed near its maximum would block a write forever. So only eventfds
 * are accepted, and they are made non-blocking: a full counter is already
 * readable, so a write that fails with EAGAIN loses no wakeup. */
static int check_eventfd(struct vhu_server *s, int fd, uint32_t i, const char *what)
{
	char path[32], target[32];
	ssize_t n;
	int fl;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return fail(s, -errno, "vring %u: %s fd: %s: %s", i, what, path,
			    strerror(errno));
	target[n] = 0;
	if (strcmp(target, "anon_inode:[eventfd]"))
		return fail(s, -EINVAL, "vring %u: %s fd is %s, not an eventfd", i,
			    what, target);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return fail(s, -errno, "vring %u: %s fd: cannot make it non-blocking: %s",
			    i, what, strerror(errno));
	return 0;
}

static int do_set_vring_fd(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.u64 & VHU_VRING_IDX_MASK;
	bool nofd = m->p.u64 & VHU_VRING_NOFD;
	struct vhu_queue *q;
	int fd, ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.u64 & ~(VHU_VRING_IDX_MASK | VHU_VRING_NOFD))
		return fail(s, -EINVAL, "vring %u: unknown bits in 0x%" PRIx64, i, m->p.u64);
	q = &s->q[i];
	fd = nofd ? -1 : m->fds[0];
	if (fd >= 0) {
		/* Left in m on failure: handle_msg closes it. */
		ret = check_eventfd(s, fd, i,
				    m->hdr.request == VHU_SET_VRING_KICK ? "kick" :
				    m->hdr.request == VHU_SET_VRING_CALL ? "call" : "error");
		if (ret)
			return ret;
	}
	m->nfds = 0;	/* the fd is ours now */
	switch (m->hdr.request) {
	case VHU_SET_VRING_KICK:
		if (fd < 0)
			return fail(s, -EINVAL, "vring %u: polling mode (no kick fd) is not supported", i);
		queue_stop(s, i);
		close_fd(&q->kick_fd);
		q->kick_fd = fd;
		q->started = true;
		return queue_sync(s, i);
	case VHU_SET_VRING_CALL:
		/* The front-end swaps call fds while rings run (vector
		 * masking): stop, swap, restart; nothing is lost, as the
		 * front-end checks the old notifier when it unmasks. */
		queue_stop(s, i);
		close_fd(&q->call_fd);
		q->call_fd = fd;
		return queue_sync(s, i);
	default:
		/* Every queue thread may write error fds: stop them all. */
		stop_all(s);
		close_fd(&q->err_fd);
		q->err_fd = fd;
		return sync_all(s);
	}
}

static int do_set_vring_enable(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t i = m->p.state.index;
	int ret = vring_index(s, i);

	if (ret)
		return ret;
	if (m->p.state.num > 1)
		return fail(s, -EINVAL, "vring %u: enable value %u is not 0 or 1", i,
			    m->p.state.num);
	s->q[i].enabled = m->p.state.num;
	return queue_sync(s, i);
}

/* ---- inflight I/O tracking (INFLIGHT_SHMFD) ---- */

static int check_inflight(struct vhu_server *s, const struct vhu_inflight *in,
			  uint64_t *need)
{
	if (!in->num_queues || in->num_queues > s->nq)
		return fail(s, -EINVAL, "inflight buffer: %u queues, the device has %u",
			    in->num_queues, s->nq);
	if (!in->queue_size || in->queue_size > s->dev->max_queue_size)
		return fail(s, -EINVAL, "inflight buffer: queue size %u, at most %u",
			    in->queue_size, s->dev->max_queue_size);
	*need = in->num_queues * virtq_inflight_region_size(in->queue_size);
	return 0;
}

/* The front-end asks for a buffer to keep for us: a sealed memfd (it can
 * neither shrink under a later back-end nor grow), zeroed, so every
 * queue's region starts unused (version 0). */
static int do_get_inflight_fd(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_inflight in = m->p.inflight;
	uint64_t need;
	long pg = sysconf(_SC_PAGESIZE);
	int fd, ret = check_inflight(s, &in, &need);

	if (ret)
		return ret;
	need = (need + pg - 1) & ~(uint64_t)(pg - 1);
	fd = memfd_create("iovm-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return fail(s, -errno, "inflight buffer: memfd_create: %s", strerror(errno));
	if (ftruncate(fd, need) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = fail(s, -errno, "inflight buffer of %" PRIu64 " bytes: %s", need,
			   strerror(errno));
		close(fd);
		return ret;
	}
	in.mmap_size = need;
	in.mmap_offset = 0;
	ret = vhu_msg_reply_fd(s->sock, m, &in, sizeof(in), fd);
	close(fd);
	return reply_sent(s, ret);
}

/* The buffer comes back (at every start, and to a new back-end after a
 * crash): map it, and each queue's region tells virtq_init what the
 * previous back-end left in flight. It must be a memfd sealed against
 * shrinking, as the ones we hand out are. */
static int do_set_inflight_fd(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_inflight *in = &m->p.inflight;
	struct virtq_inflight *inf;
	struct stat st;
	uint64_t need;
	void *p;
	int seals, ret = check_inflight(s, in, &need);

	if (ret)
		return ret;
	seals = fcntl(m->fds[0], F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return fail(s, -EPERM, "inflight buffer fd is not a memfd sealed against shrinking");
	if (fstat(m->fds[0], &st) < 0)
		return fail(s, -errno, "inflight buffer fd: %s", strerror(errno));
	if (in->mmap_size < need || in->mmap_offset % sysconf(_SC_PAGESIZE) ||
	    in->mmap_offset > (uint64_t)st.st_size ||
	    need > (uint64_t)st.st_size - in->mmap_offset)
		return fail(s, -EINVAL, "inflight buffer: %" PRIu64 " bytes at offset %" PRIu64
			    " of a %" PRIu64 "-byte file, %u queues of %u need %" PRIu64,
			    in->mmap_size, in->mmap_offset, (uint64_t)st.st_size,
			    in->num_queues, in->queue_size, need);
	inf = calloc(in->num_queues, sizeof(*inf));
	if (!inf)
		return fail(s, -ENOMEM, "inflight buffer: out of memory");
	for (unsigned int i = 0; i < in->num_queues; i++) {
		inf[i].resubmit = calloc(in->queue_size, sizeof(*inf[i].resubmit));
		if (!inf[i].resubmit) {
			while (i--)
				free(inf[i].resubmit);
			free(inf);
			return fail(s, -ENOMEM, "inflight buffer: out of memory");
		}
	}
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[0], in->mmap_offset);
	if (p == MAP_FAILED) {
		ret = fail(s, -errno, "inflight buffer: mmap: %s", strerror(errno));
		for (unsigned int i = 0; i < in->num_queues; i++)
			free(inf[i].resubmit);
		free(inf);
		return ret;
	}
	stop_all(s);
	inflight_clear(s);
	s->inflight_map = p;
	s->inflight_len = need;
	s->inflight_nq = in->num_queues;
	s->inflight_qsize = in->queue_size;
	s->inflight = inf;
	for (unsigned int i = 0; i < in->num_queues; i++)
		inf[i].region = (struct virtq_inflight_region *)
			(s->inflight_map + i * virtq_inflight_region_size(in->queue_size));
	return sync_all(s);
}

static int do_get_config(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->offset > VHU_MAX_CONFIG || c->size > VHU_MAX_CONFIG - c->offset) {
		/* An empty payload is the protocol's error reply. */
		return reply(s, m, c, 0);
	}
	/* The front-end may ask for its own idea of the config size, which
	 * can be larger than ours: the rest reads as zero, as it would for
	 * a device without those fields. */
	memset(c->data, 0, c->size);
	if (c->offset < len)
		s->dev->ops->config_read(s->dev, c->offset, c->data,
					 c->size < len - c->offset ? c->size : len - c->offset);
	return reply(s, m, c, VHU_CONFIG_HDR_SIZE + c->size);
}

static int do_set_config(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->flags > 1)
		return fail(s, -EINVAL, "SET_CONFIG: unknown flags 0x%x", c->flags);
	if (c->offset > len || c->size > len - c->offset) {
		snprintf(s->err, sizeof(s->err), "SET_CONFIG: offset %u size %u outside config space of %u bytes",
			 c->offset, c->size, len);
		return VHU_NACK;
	}
	if (!s->dev->ops->config_write) {
		snprintf(s->err, sizeof(s->err), "SET_CONFIG: config space is read-only");
		return VHU_NACK;
	}
	/* The device's config_write ignores writes to read-only fields, as
	 * it does for a driver on virtio-pci. */
	s->dev->ops->config_write(s->dev, c->offset, c->data, c->size);
	return 0;
}

/* ---- dispatch and validation ---- */

enum fd_rule { FDS_NONE, FDS_TABLE, FDS_ONE, FDS_VRING, FDS_ANY_ONE };

struct handler {
	int (*fn)(struct vhu_server *s, struct vhu_msg *m);
	uint32_t size;		/* exact payload size (unless var_size) */
	bool var_size;		/* checked by check_size() */
	bool has_reply;		/* replies itself; no REPLY_ACK */
	enum fd_rule fds;
	int needs_pf;		/* protocol feature required, or -1 */
};

static const struct handler handlers[VHU_REQUEST_MAX] = {
	[VHU_GET_FEATURES] = { do_get_features, 0, false, true, FDS_NONE, -1 },
	[VHU_SET_FEATURES] = { do_set_features, 8, false, false, FDS_NONE, -1 },
	[VHU_SET_OWNER] = { do_set_owner, 0, false, false, FDS_NONE, -1 },
	[VHU_RESET_OWNER] = { do_reset, 0, false, false, FDS_NONE, -1 },
	[VHU_SET_MEM_TABLE] = { do_set_mem_table, 0, true, false, FDS_TABLE, -1 },
	[VHU_SET_VRING_NUM] = { do_set_vring_num, 8, false, false, FDS_NONE, -1 },
	[VHU_SET_VRING_ADDR] = { do_set_vring_addr, sizeof(struct vhu_vring_addr),
				 false, false, FDS_NONE, -1 },
	[VHU_SET_VRING_BASE] = { do_set_vring_base, 8, false, false, FDS_NONE, -1 },
	[VHU_GET_VRING_BASE] = { do_get_vring_base, 8, false, true, FDS_NONE, -1 },
	[VHU_SET_VRING_KICK] = { do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_SET_VRING_CALL] = { do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_SET_VRING_ERR] = { do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_GET_PROTOCOL_FEATURES] = { do_get_protocol_features, 0, false, true,
					FDS_NONE, -1 },
	[VHU_SET_PROTOCOL_FEATURES] = { do_set_protocol_features, 8, false, false,
					FDS_NONE, -1 },
	[VHU_GET_QUEUE_NUM] = { do_get_queue_num, 0, false, true, FDS_NONE, -1 },
	[VHU_SET_VRING_ENABLE] = { do_set_vring_enable, 8, false, false, FDS_NONE, -1 },
	[VHU_GET_CONFIG] = { do_get_config, 0, true, true, FDS_NONE, VHU_PF_CONFIG },
	[VHU_SET_CONFIG] = { do_set_config, 0, true, false, FDS_NONE, VHU_PF_CONFIG },
	[VHU_GET_INFLIGHT_FD] = { do_get_inflight_fd, sizeof(struct vhu_inflight), false,
				  true, FDS_NONE, VHU_PF_INFLIGHT_SHMFD },
	[VHU_SET_INFLIGHT_FD] = { do_set_inflight_fd, sizeof(struct vhu_inflight), false,
				  false, FDS_ONE, VHU_PF_INFLIGHT_SHMFD },
	[VHU_RESET_DEVICE] = { do_reset, 0, false, false, FDS_NONE, VHU_PF_RESET_DEVICE },
	[VHU_GET_MAX_MEM_SLOTS] = { do_get_max_mem_slots, 0, false, true, FDS_NONE, -1 },
	[VHU_ADD_MEM_REG] = { do_add_mem_reg, sizeof(struct vhu_mem_single), false,
			      false, FDS_ONE, VHU_PF_CONFIGURE_MEM_SLOTS },
	[VHU_REM_MEM_REG] = { do_rem_mem_reg, sizeof(struct vhu_mem_single), false,
			      false, FDS_ANY_ONE, VHU_PF_CONFIGURE_MEM_SLOTS },
};

static const char *pf_name(int bit)
{
	switch (bit) {
	case VHU_PF_CONFIG: return "CONFIG";
	case VHU_PF_RESET_DEVICE: return "RESET_DEVICE";
	case VHU_PF_CONFIGURE_MEM_SLOTS: return "CONFIGURE_MEM_SLOTS";
	case VHU_PF_INFLIGHT_SHMFD: return "INFLIGHT_SHMFD";
	default: return "?";
	}
}

static int check_size(struct vhu_server *s, const struct vhu_msg *m)
{
	uint32_t size = m->hdr.size;

	switch (m->hdr.request) {
	case VHU_SET_MEM_TABLE:
		if (size < VHU_MEM_TABLE_HDR_SIZE)
			break;
		if (m->p.mem.nregions > VHU_MAX_TABLE_REGIONS)
			return fail(s, -EBADMSG, "SET_MEM_TABLE: %u regions, at most %u",
				    m->p.mem.nregions, VHU_MAX_TABLE_REGIONS);
		if (size != VHU_MEM_TABLE_HDR_SIZE +
				    m->p.mem.nregions * sizeof(struct vhu_region))
			break;
		return 0;
	case VHU_GET_CONFIG:
	case VHU_SET_CONFIG:
		if (size < VHU_CONFIG_HDR_SIZE)
			break;
		if (m->p.cfg.size > VHU_MAX_CONFIG ||
		    size != VHU_CONFIG_HDR_SIZE + m->p.cfg.size)
			break;
		return 0;
	}
	return fail(s, -EBADMSG, "%s: payload size %u does not match its contents",
		    vhu_request_name(m->hdr.request), size);
}

/* Checks the frame against the request's rules before any handler sees
 * it: size, number of fds, negotiated protocol features. */
static int check_msg(struct vhu_server *s, const struct vhu_msg *m,
		     const struct handler *h)
{
	const char *name = vhu_request_name(m->hdr.request);
	unsigned int want;
	int ret;

	if (h->var_size) {
		ret = check_size(s, m);
		if (ret)
			return ret;
	} else if (m->hdr.size != h->size) {
		return fail(s, -EBADMSG, "%s: payload of %u bytes, expected %u", name,
			    m->hdr.size, h->size);
	}
	switch (h->fds) {
	case FDS_TABLE:
		want = m->p.mem.nregions;
		break;
	case FDS_ONE:
		want = 1;
		break;
	case FDS_VRING:
		want = (m->p.u64 & VHU_VRING_NOFD) ? 0 : 1;
		break;
	case FDS_ANY_ONE:
		/* The spec lets REM_MEM_REG carry a stray fd, to be closed. */
		want = m->nfds <= 1 ? m->nfds : 1;
		break;
	default:
		want = 0;
	}
	if (m->nfds != want)
		return fail(s, -EBADMSG, "%s: %u file descriptors, expected %u", name,
			    m->nfds, want);
	if (h->needs_pf >= 0 && !has_pf(s, h->needs_pf))
		return fail(s, -EBADMSG, "%s without protocol feature %s", name,
			    pf_name(h->needs_pf));
	return 0;
}

/* Handles one message. Returns 0 to go on, < 0 to drop the client. */
static int handle_msg(struct vhu_server *s, struct vhu_msg *m)
{
	uint32_t req = m->hdr.request;
	const struct handler *h = req < VHU_REQUEST_MAX ? &handlers[req] : NULL;
	int ret;

	s->err[0] = 0;
	if (!h || !h->fn) {
		const char *name = vhu_request_name(req);

		ret = name ? fail(s, -EBADMSG, "request %s (%u) is not supported", name, req)
			   : fail(s, -EBADMSG, "unknown request %u", req);
		goto out;
	}
	ret = check_msg(s, m, h);
	if (ret)
		goto out;
	pr_debug("vhost-user: %s", vhu_request_name(req));
	ret = h->fn(s, m);
	if (ret == VHU_NACK)
		pr_warn("vhost-user: %s refused: %s", vhu_request_name(req), s->err);
	if (ret >= 0 && !h->has_reply && (m->hdr.flags & VHU_FLAG_NEED_REPLY) &&
	    has_pf(s, VHU_PF_REPLY_ACK)) {
		uint64_t status = ret;

		ret = reply(s, m, &status, sizeof(status));
	}
out:
	vhu_msg_close_fds(m);
	return ret < 0 ? ret : 0;
}

/* Forgets the client: queues drained and stopped, backends flushed, its
 * memory unmapped, its fds closed, negotiation undone. */
static void disconnect(struct vhu_server *s)
{
	stop_all(s);
	if (s->dev->ops->flush)
		s->dev->ops->flush(s->dev);
	for (unsigned int i = 0; i < s->nq; i++)
		queue_reset(&s->q[i]);
	inflight_clear(s);
	vhu_mem_clear(&s->mem);
	s->features = 0;
	s->protocol_features = 0;
	s->dev->guest_features = 0;
	close_fd(&s->sock);
}

int vhu_server_serve(struct vhu_server *s, int sock, int stop_fd)
{
	struct vhu_msg m;
	int ret;

	s->sock = sock;
	/* A blocked sendmsg would stall this thread (and with it every
	 * reconfiguration and shutdown) for as long as the client likes. */
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO,
		   &(struct timeval){ .tv_sec = s->send_timeout_ms / 1000,
				      .tv_usec = s->send_timeout_ms % 1000 * 1000 },
		   sizeof(struct timeval));
	for (;;) {
		struct pollfd p[3] = {
			{ .fd = sock, .events = POLLIN },
			{ .fd = stop_fd, .events = POLLIN },
			{ .fd = vhu_mem_fault_fd(&s->mem), .events = POLLIN },
		};
		uint64_t gpa, size, off;

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			pr_err("vhost-user: poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents) {
			ret = -EINTR;
			break;
		}
		/* Our accesses past the end of a region file faulted: the
		 * client shrank its memory under us (sigbus.c). */
		if (p[2].revents && vhu_mem_take_fault(&s->mem, &gpa, &size, &off)) {
			pr_err("vhost-user: client truncated the memory file of region gpa 0x%" PRIx64
			       " size 0x%" PRIx64 " (no page at offset 0x%" PRIx64 "), dropping it",
			       gpa, size, off);
			ret = -EFAULT;
			break;
		}
		ret = vhu_msg_recv(sock, &m, s->err, sizeof(s->err));
		if (ret == -ECONNRESET) {
			pr_info("vhost-user: client disconnected");
			ret = 0;
			break;
		}
		if (ret == -EBADMSG) {
			pr_err("vhost-user: malformed message, dropping the client: %s", s->err);
			break;
		}
		if (ret) {
			pr_err("vhost-user: reading from the client: %s", strerror(-ret));
			break;
		}
		ret = handle_msg(s, &m);
		if (ret) {
			pr_err("vhost-user: %s from the client, dropping it: %s",
			       vhu_request_name(m.hdr.request) ? vhu_request_name(m.hdr.request)
							      : "bad request",
			       s->err[0] ? s->err : strerror(-ret));
			break;
		}
	}
	disconnect(s);
	return ret;
}

struct vhu_server *vhu_server_new(struct virtio_dev *dev)
{
	struct vhu_server *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->q = calloc(dev->num_queues ? dev->num_queues : 1, sizeof(*s->q));
	if (!s->q) {
		free(s);
		return NULL;
	}
	if (vhu_mem_init(&s->mem)) {
		free(s->q);
		free(s);
		return NULL;
	}
	s->dev = dev;
	s->nq = dev->num_queues;
	s->sock = -1;
	s->send_timeout_ms = VHU_SEND_TIMEOUT_MS;
	for (unsigned int i = 0; i < s->nq; i++)
		s->q[i].kick_fd = s->q[i].call_fd = s->q[i].err_fd = -1;
	dev->mem = &s->mem.gmem;
	dev->transport.needs_reset = transport_needs_reset;
	dev->transport.config_changed = transport_config_changed;
	dev->transport.opaque = s;
	return s;
}

void vhu_server_set_send_timeout(struct vhu_server *s, unsigned int ms)
{
	s->send_timeout_ms = ms ? ms : 1;
}

void vhu_server_set_test_stop_after(struct vhu_server *s, uint64_t n)
{
	s->test_stop_after = n;
}

void vhu_server_free(struct vhu_server *s)
{
	if (!s)
		return;
	disconnect(s);
	vhu_mem_fini(&s->mem);
	free(s->q);
	free(s);
}

/* ---- the listening socket ---- */

/* A socket left by an earlier run is replaced; anything else at the path is
 * someone's file and is left alone. */
static int listen_unix(const char *path)
{
	int fd = sock_listen_unix(path, 1);

	if (fd == -ENAMETOOLONG)
		pr_err("--socket %s: path longer than %zu bytes", path, SOCK_UNIX_PATH_MAX);
	else if (fd == -EEXIST)
		pr_err("--socket %s: exists and is not a socket", path);
	else if (fd < 0)
		pr_err("--socket %s: %s", path, strerror(-fd));
	return fd;
}

/* A socket handed over by the process manager (--fd): a listening socket
 * as the vhost-user conventions have it, or an already connected one. */
static bool is_listening(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return !getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) && v;
}

static void serve_client(struct vhu_server *s, int c, int sfd, int *ret)
{
	pr_info("vhost-user: client connected");
	/* Idle waits happen in poll; once a message has begun, the rest must
	 * follow promptly or the client is dropped. */
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO,
		   &(struct timeval){ .tv_sec = 10 }, sizeof(struct timeval));
	*ret = vhu_server_serve(s, c, sfd);
}

int vhu_server_run(struct vhu_server *s, const char *path, int fd, bool once)
{
	sigset_t set;
	int lfd, sfd, ret, status = 0;

	/* SIGINT/SIGTERM arrive on a signalfd, so that the queue threads
	 * (which inherit this mask) never take them and the socket loop
	 * sees them between messages. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0) {
		pr_err("signalfd: %s", strerror(errno));
		return 1;
	}
	if (path) {
		lfd = listen_unix(path);
		if (lfd < 0) {
			close(sfd);
			return 1;
		}
		pr_info("vhost-user: %s waiting for a client on %s", s->dev->name, path);
	} else if (is_listening(fd)) {
		lfd = fd;
		pr_info("vhost-user: %s waiting for a client on fd %d", s->dev->name, fd);
	} else {
		/* One client, already connected. */
		serve_client(s, fd, sfd, &ret);
		pr_info("vhost-user: shutting down");
		close(sfd);
		return 0;
	}
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = lfd, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
		};
		int c;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("poll: %s", strerror(errno));
			status = 1;
			break;
		}
		if (p[1].revents)
			break;
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
				continue;
			pr_err("accept: %s", strerror(errno));
			status = 1;
			break;
		}
		serve_client(s, c, sfd, &ret);
		if (ret == -EINTR || once)
			break;
	}
	pr_info("vhost-user: shutting down");
	close(lfd);
	if (path)
		unlink(path);
	close(sfd);
	return status;
}
