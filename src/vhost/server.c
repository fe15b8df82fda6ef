/* vhost-user back-end: the connection in front of a virtio device (reading,
 * checking and dispatching messages, replies, the client's lifetime) and
 * the listening loop. The message handlers are in features.c, memtable.c,
 * vring.c, inflight.c and devcfg.c.
 *
 * Threads: everything here runs on the one thread that reads the socket.
 * The device's queue threads only run between queue_start and queue_stop,
 * so any state they can see (guest memory, ring addresses, fds) is changed
 * only while the queues it concerns are stopped. A client that truncates
 * the file behind its guest RAM is caught by sigbus.c and reported on the
 * memory table's fault fd, which this thread polls with the socket. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/sock.h"
#include "vhost/server_internal.h"
#include "virtio/virtio.h"

int vhu_fail(struct vhu_server *s, int ret, const char *fmt, ...)
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
int vhu_reply_sent(struct vhu_server *s, int ret)
{
	if (ret == -EAGAIN)
		return vhu_fail(s, -ETIMEDOUT,
				"cannot send a reply: the client has not read its replies for %u ms",
				s->send_timeout_ms);
	if (ret)
		return vhu_fail(s, ret, "cannot send a reply: %s", strerror(-ret));
	return 0;
}

int vhu_reply(struct vhu_server *s, const struct vhu_msg *m,
	      const void *payload, uint32_t size)
{
	return vhu_reply_sent(s, vhu_msg_reply(s->sock, m, payload, size));
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

static int transport_config_changed(struct virtio_dev *dev)
{
	struct vhu_server *s = dev->transport.opaque;

	pr_debug("vhost-user: %s config space changed", dev->name);
	return vhu_send_config_changed(s);
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
	[VHU_GET_FEATURES] = { vhu_do_get_features, 0, false, true, FDS_NONE, -1 },
	[VHU_SET_FEATURES] = { vhu_do_set_features, 8, false, false, FDS_NONE, -1 },
	[VHU_SET_OWNER] = { vhu_do_set_owner, 0, false, false, FDS_NONE, -1 },
	[VHU_RESET_OWNER] = { vhu_do_reset, 0, false, false, FDS_NONE, -1 },
	[VHU_SET_MEM_TABLE] = { vhu_do_set_mem_table, 0, true, false, FDS_TABLE, -1 },
	[VHU_SET_VRING_NUM] = { vhu_do_set_vring_num, 8, false, false, FDS_NONE, -1 },
	[VHU_SET_VRING_ADDR] = { vhu_do_set_vring_addr, sizeof(struct vhu_vring_addr),
				 false, false, FDS_NONE, -1 },
	[VHU_SET_VRING_BASE] = { vhu_do_set_vring_base, 8, false, false, FDS_NONE, -1 },
	[VHU_GET_VRING_BASE] = { vhu_do_get_vring_base, 8, false, true, FDS_NONE, -1 },
	[VHU_SET_VRING_KICK] = { vhu_do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_SET_VRING_CALL] = { vhu_do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_SET_VRING_ERR] = { vhu_do_set_vring_fd, 8, false, false, FDS_VRING, -1 },
	[VHU_GET_PROTOCOL_FEATURES] = { vhu_do_get_protocol_features, 0, false, true,
					FDS_NONE, -1 },
	[VHU_SET_PROTOCOL_FEATURES] = { vhu_do_set_protocol_features, 8, false, false,
					FDS_NONE, -1 },
	[VHU_GET_QUEUE_NUM] = { vhu_do_get_queue_num, 0, false, true, FDS_NONE, -1 },
	[VHU_SET_VRING_ENABLE] = { vhu_do_set_vring_enable, 8, false, false, FDS_NONE, -1 },
	[VHU_SET_BACKEND_REQ_FD] = { vhu_do_set_backend_req_fd, 0, false, false, FDS_ONE,
				     VHU_PF_BACKEND_REQ },
	[VHU_GET_CONFIG] = { vhu_do_get_config, 0, true, true, FDS_NONE, VHU_PF_CONFIG },
	[VHU_SET_CONFIG] = { vhu_do_set_config, 0, true, false, FDS_NONE, VHU_PF_CONFIG },
	[VHU_GET_INFLIGHT_FD] = { vhu_do_get_inflight_fd, sizeof(struct vhu_inflight), false,
				  true, FDS_NONE, VHU_PF_INFLIGHT_SHMFD },
	[VHU_SET_INFLIGHT_FD] = { vhu_do_set_inflight_fd, sizeof(struct vhu_inflight), false,
				  false, FDS_ONE, VHU_PF_INFLIGHT_SHMFD },
	[VHU_RESET_DEVICE] = { vhu_do_reset, 0, false, false, FDS_NONE, VHU_PF_RESET_DEVICE },
	[VHU_GET_MAX_MEM_SLOTS] = { vhu_do_get_max_mem_slots, 0, false, true, FDS_NONE, -1 },
	[VHU_ADD_MEM_REG] = { vhu_do_add_mem_reg, sizeof(struct vhu_mem_single), false,
			      false, FDS_ONE, VHU_PF_CONFIGURE_MEM_SLOTS },
	[VHU_REM_MEM_REG] = { vhu_do_rem_mem_reg, sizeof(struct vhu_mem_single), false,
			      false, FDS_ANY_ONE, VHU_PF_CONFIGURE_MEM_SLOTS },
};

static const char *pf_name(int bit)
{
	switch (bit) {
	case VHU_PF_BACKEND_REQ: return "BACKEND_REQ";
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
			return vhu_fail(s, -EBADMSG, "SET_MEM_TABLE: %u regions, at most %u",
					m->p.mem.nregions, VHU_MAX_TABLE_REGIONS);
		/* Front-ends may send their whole table struct: UML's has
		 * room for two regions and goes out with one (72 bytes),
		 * which libvhost-user (qemu-storage-daemon) accepts. The
		 * bytes past nregions are not read; a table larger than the
		 * protocol's largest (8 regions) is malformed. */
		if (size < VHU_MEM_TABLE_HDR_SIZE +
				   m->p.mem.nregions * sizeof(struct vhu_region) ||
		    size > sizeof(struct vhu_mem_table))
			break;
		return 0;
	case VHU_GET_CONFIG:
	case VHU_SET_CONFIG:
		/* Exact: the header's own size field says how much config
		 * space follows (and a GET_CONFIG reply mirrors it), so a
		 * longer payload means the two lengths disagree. QEMU and
		 * UML both send exactly header + size. */
		if (size < VHU_CONFIG_HDR_SIZE)
			break;
		if (m->p.cfg.size > VHU_MAX_CONFIG ||
		    size != VHU_CONFIG_HDR_SIZE + m->p.cfg.size)
			break;
		return 0;
	}
	return vhu_fail(s, -EBADMSG, "%s: payload size %u does not match its contents",
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
		return vhu_fail(s, -EBADMSG, "%s: payload of %u bytes, expected %u", name,
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
		return vhu_fail(s, -EBADMSG, "%s: %u file descriptors, expected %u", name,
				m->nfds, want);
	if (h->needs_pf >= 0 && !vhu_has_pf(s, h->needs_pf))
		return vhu_fail(s, -EBADMSG, "%s without protocol feature %s", name,
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

		ret = name ? vhu_fail(s, -EBADMSG, "request %s (%u) is not supported", name, req)
			   : vhu_fail(s, -EBADMSG, "unknown request %u", req);
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
	    vhu_has_pf(s, VHU_PF_REPLY_ACK)) {
		uint64_t status = ret;

		ret = vhu_reply(s, m, &status, sizeof(status));
	}
out:
	vhu_msg_close_fds(m);
	return ret < 0 ? ret : 0;
}

/* Forgets the client: queues drained and stopped, backends flushed, its
 * memory unmapped, its fds closed, negotiation undone. */
static void disconnect(struct vhu_server *s)
{
	vhu_reset_device(s);
	vhu_mem_clear(&s->mem);
	vhu_set_backend_fd(s, -1);
	__atomic_store_n(&s->protocol_features, 0, __ATOMIC_RELAXED);
	vhu_close_fd(&s->sock);
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
	s->backend_fd = -1;
	pthread_mutex_init(&s->backend_lock, NULL);
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
	pthread_mutex_destroy(&s->backend_lock);
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
