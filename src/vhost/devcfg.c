/* vhost-user config space messages: GET_CONFIG and SET_CONFIG on the
 * device's config space, and the back-end request channel that carries
 * config-change notices (SET_BACKEND_REQ_FD). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "vhost/server_internal.h"
#include "virtio/virtio.h"

int vhu_do_get_config(struct vhu_server *s, struct vhu_msg *m)
{
	struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->offset > VHU_MAX_CONFIG || c->size > VHU_MAX_CONFIG - c->offset) {
		/* An empty payload is the protocol's error reply. */
		return vhu_reply(s, m, c, 0);
	}
	/* The front-end may ask for its own idea of the config size, which
	 * can be larger than ours: the rest reads as zero, as it would for
	 * a device without those fields. */
	memset(c->data, 0, c->size);
	if (c->offset < len)
		s->dev->ops->config_read(s->dev, c->offset, c->data,
					 c->size < len - c->offset ? c->size : len - c->offset);
	return vhu_reply(s, m, c, VHU_CONFIG_HDR_SIZE + c->size);
}

int vhu_do_set_config(struct vhu_server *s, struct vhu_msg *m)
{
	const struct vhu_config *c = &m->p.cfg;
	uint32_t len = s->dev->config_len;

	if (c->flags > 1)
		return vhu_fail(s, -EINVAL, "SET_CONFIG: unknown flags 0x%x", c->flags);
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

/* BACKEND_REQ is offered because UML's virtio_uml (6.1) cannot take its
 * queue interrupts without it: it shares the channel's IRQ with them and
 * otherwise asks for IRQ 0, which fails with EBUSY. The channel is a UNIX
 * socket of the front-end's; we only ever send CONFIG_CHANGE_MSG on it
 * (an online resize), and read nothing but its acknowledgement. */
int vhu_do_set_backend_req_fd(struct vhu_server *s, struct vhu_msg *m)
{
	int fd = m->fds[0], domain = 0;
	socklen_t len = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) || domain != AF_UNIX)
		return vhu_fail(s, -EINVAL, "SET_BACKEND_REQ_FD: the fd is not a UNIX socket");
	vhu_stop_all(s);
	vhu_set_backend_fd(s, fd);
	m->nfds = 0;	/* the fd is ours now */
	return vhu_sync_all(s);
}

void vhu_set_backend_fd(struct vhu_server *s, int fd)
{
	pthread_mutex_lock(&s->backend_lock);
	vhu_close_fd(&s->backend_fd);
	s->backend_fd = fd;
	pthread_mutex_unlock(&s->backend_lock);
}

/* The front-end's answer to a NEED_REPLY message: a header with REPLY
 * and a u64, 0 for success. Waits at most ms in all. */
static int wait_ack(int fd, unsigned int ms)
{
	struct {
		struct vhu_hdr h;
		uint64_t status;
	} __attribute__((packed)) r;
	uint64_t end = mono_ns() + ms * 1000000ull, now;
	size_t got = 0;

	while (got < sizeof(r)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int ret;

		now = mono_ns();
		if (now >= end)
			return -ETIMEDOUT;
		ret = poll(&p, 1, (int)((end - now + 999999) / 1000000));
		if (ret < 0 && errno != EINTR)
			return -errno;
		if (ret <= 0)
			continue;
		n = recv(fd, (char *)&r + got, sizeof(r) - got, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n > 0)
			got += n;
	}
	if (r.h.request != VHU_BACKEND_CONFIG_CHANGE_MSG || !(r.h.flags & VHU_FLAG_REPLY) ||
	    r.h.size != sizeof(r.status))
		return -EPROTO;
	return r.status ? -EIO : 0;
}

int vhu_send_config_changed(struct vhu_server *s)
{
	struct vhu_hdr h = { VHU_BACKEND_CONFIG_CHANGE_MSG, VHU_VERSION, 0 };
	char junk[64];
	bool ack;
	ssize_t n;
	int fd, ret;

	/* A copy of the channel: the socket thread may replace or close the
	 * original meanwhile (then the copy's peer is gone and the wait
	 * ends), and must not wait for this thread while the front-end waits
	 * for its GET_CONFIG answer. */
	pthread_mutex_lock(&s->backend_lock);
	fd = s->backend_fd >= 0 ? fcntl(s->backend_fd, F_DUPFD_CLOEXEC, 0) : -1;
	ret = s->backend_fd < 0 ? -ENOTCONN : fd < 0 ? -errno : 0;
	pthread_mutex_unlock(&s->backend_lock);
	if (ret)
		return ret;
	ack = __atomic_load_n(&s->protocol_features, __ATOMIC_RELAXED) &
	      (1ull << VHU_PF_REPLY_ACK);
	if (ack)
		h.flags |= VHU_FLAG_NEED_REPLY;
	/* An answer that came after an earlier wait gave up is stale. */
	while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
	/* 12 bytes go out whole or not at all (one skb), never blocking: if
	 * the front-end's buffer is full, the notice is lost and the
	 * front-end sees the change at its next GET_CONFIG. */
	do
		n = send(fd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(h))
		ret = n < 0 ? -errno : -EIO;
	else if (ack)
		ret = wait_ack(fd, VHU_CONFIG_ACK_MS);
	close(fd);
	if (ret)
		pr_warn("vhost-user: %s: telling the front-end its config changed: %s",
			s->dev->name, strerror(-ret));
	return ret;
}
