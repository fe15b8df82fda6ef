/* The wire of a vhost-user client: see vwire.h. */
#include <string.h>
#include <sys/socket.h>

#include "vwire.h"

ssize_t vwire_sendv(int sock, struct iovec *iov, unsigned int niov,
		    const int *fds, unsigned int nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(VWIRE_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = niov };

	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	return sendmsg(sock, &mh, flags);
}

ssize_t vwire_send(int sock, const struct vhu_hdr *h, const void *payload,
		   const int *fds, unsigned int nfds, int flags)
{
	struct iovec iov[2] = { { (void *)h, sizeof(*h) }, { (void *)payload, h->size } };

	return vwire_sendv(sock, iov, h->size ? 2 : 1, fds, nfds, flags);
}

ssize_t vwire_recv_hdr(int sock, struct vhu_hdr *h, int *rfd)
{
	struct iovec iov = { h, sizeof(*h) };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);

	*rfd = -1;
	c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(rfd, CMSG_DATA(c), sizeof(int));
	return n;
}
