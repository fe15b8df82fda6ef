/* Framing of vhost-user messages on the UNIX socket: header, payload and the
 * SCM_RIGHTS file descriptors that travel with the header. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vhost/proto.h"

static const char *const request_names[VHU_REQUEST_MAX] = {
	[VHU_GET_FEATURES] = "GET_FEATURES",
	[VHU_SET_FEATURES] = "SET_FEATURES",
	[VHU_SET_OWNER] = "SET_OWNER",
	[VHU_RESET_OWNER] = "RESET_OWNER",
	[VHU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VHU_SET_LOG_BASE] = "SET_LOG_BASE",
	[VHU_SET_LOG_FD] = "SET_LOG_FD",
	[VHU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VHU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VHU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VHU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VHU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VHU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VHU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VHU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VHU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VHU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VHU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VHU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
	[VHU_GET_CONFIG] = "GET_CONFIG",
	[VHU_SET_CONFIG] = "SET_CONFIG",
	[VHU_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VHU_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
	[VHU_RESET_DEVICE] = "RESET_DEVICE",
	[VHU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
	[VHU_ADD_MEM_REG] = "ADD_MEM_REG",
	[VHU_REM_MEM_REG] = "REM_MEM_REG",
};

const char *vhu_request_name(uint32_t request)
{
	return request < VHU_REQUEST_MAX ? request_names[request] : NULL;
}

void vhu_msg_close_fds(struct vhu_msg *m)
{
	for (unsigned int i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nfds = 0;
}

/* Takes the SCM_RIGHTS fds out of a received control buffer. Anything
 * else in it (credentials, truncation) makes the frame malformed, but
 * every fd that did arrive is still collected so it can be closed. */
static int take_fds(struct msghdr *mh, struct vhu_msg *m, char *err,
		    size_t errlen)
{
	int ret = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;
		int *fds = (int *)CMSG_DATA(c);

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			snprintf(err, errlen, "unexpected control message type %d",
				 c->cmsg_type);
			ret = -EBADMSG;
			continue;
		}
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, fds + i, sizeof(fd));
			if (m->nfds < VHU_MAX_FDS) {
				m->fds[m->nfds++] = fd;
			} else {
				close(fd);
				ret = -EBADMSG;
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC) {
		snprintf(err, errlen, "more than %u file descriptors", VHU_MAX_FDS);
		ret = -EBADMSG;
	}
	if (ret == -EBADMSG && !err[0])
		snprintf(err, errlen, "more than %u file descriptors", VHU_MAX_FDS);
	return ret;
}

/* Reads exactly len bytes; fds may arrive only with the first byte of a
 * message (first == true). */
static int recv_full(int sock, void *buf, size_t len, struct vhu_msg *m,
		     bool first, char *err, size_t errlen)
{
	size_t got = 0;

	while (got < len) {
		union {
			char buf[CMSG_SPACE(VHU_MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { (char *)buf + got, len - got };
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf),
		};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		int ret;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				snprintf(err, errlen, "client stalled in the middle of a message");
				return -EBADMSG;
			}
			return -errno;
		}
		if (mh.msg_controllen) {
			ret = take_fds(&mh, m, err, errlen);
			if (!ret && !(first && got == 0)) {
				snprintf(err, errlen, "file descriptors in the middle of a message");
				ret = -EBADMSG;
			}
			if (ret)
				return ret;
		}
		if (n == 0) {
			if (first && got == 0)
				return -ECONNRESET;
			snprintf(err, errlen, "connection closed in the middle of a message");
			return -EBADMSG;
		}
		got += n;
	}
	return 0;
}

int vhu_msg_recv(int sock, struct vhu_msg *m, char *err, size_t errlen)
{
	int ret;

	err[0] = 0;
	m->nfds = 0;
	ret = recv_full(sock, &m->hdr, sizeof(m->hdr), m, true, err, errlen);
	if (ret)
		goto fail;
	if ((m->hdr.flags & VHU_VERSION_MASK) != VHU_VERSION) {
		snprintf(err, errlen, "request %u: unsupported protocol version %u",
			 m->hdr.request, m->hdr.flags & VHU_VERSION_MASK);
		ret = -EBADMSG;
		goto fail;
	}
	if (m->hdr.flags & VHU_FLAG_REPLY) {
		snprintf(err, errlen, "request %u carries the reply flag",
			 m->hdr.request);
		ret = -EBADMSG;
		goto fail;
	}
	if (m->hdr.size > VHU_MAX_PAYLOAD) {
		snprintf(err, errlen, "request %u: payload of %u bytes is larger than any valid message (%zu)",
			 m->hdr.request, m->hdr.size, VHU_MAX_PAYLOAD);
		ret = -EBADMSG;
		goto fail;
	}
	ret = recv_full(sock, &m->p, m->hdr.size, m, false, err, errlen);
	if (ret)
		goto fail;
	return 0;
fail:
	vhu_msg_close_fds(m);
	return ret;
}

int vhu_msg_reply_fd(int sock, const struct vhu_msg *m, const void *payload,
		     uint32_t size, int fd)
{
	struct vhu_hdr hdr = {
		.request = m->hdr.request,
		.flags = VHU_VERSION | VHU_FLAG_REPLY,
		.size = size,
	};
	struct iovec iov[2] = {
		{ &hdr, sizeof(hdr) },
		{ (void *)payload, size },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t want = sizeof(hdr) + size;
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* A reply is at most a few hundred bytes: a short write means the
	 * send timeout struck part way, the peer is wedged. */
	return (size_t)n == want ? 0 : -EAGAIN;
}

int vhu_msg_reply(int sock, const struct vhu_msg *m, const void *payload,
		  uint32_t size)
{
	return vhu_msg_reply_fd(sock, m, payload, size, -1);
}
