/* The client side of the vhost-user protocol, for the unit tests: sends
 * requests (with SCM_RIGHTS fds) and reads replies, asserting with cmocka. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "vclient.h"
#include "vhost/proto.h"
#include "vwire.h"

void send_msg(int fd, uint32_t req, uint32_t flags, const void *payload,
		     uint32_t size, const int *fds, unsigned int nfds)
{
	struct vhu_hdr h = { req, flags, size };

	assert_true(nfds <= VWIRE_MAX_FDS);
	/* The server may already have hung up on a hostile message. */
	(void)vwire_send(fd, &h, payload, fds, nfds, MSG_NOSIGNAL);
}

void send_req(int fd, uint32_t req, const void *payload, uint32_t size)
{
	send_msg(fd, req, VHU_VERSION, payload, size, NULL, 0);
}

int recv_reply_fd(int fd, uint32_t req, void *payload, uint32_t max, int *rfd)
{
	struct vhu_hdr h;
	ssize_t n = vwire_recv_hdr(fd, &h, rfd);

	if (n == 0)
		return -1;
	assert_int_equal(n, sizeof(h));
	assert_int_equal(h.request, req);
	assert_int_equal(h.flags, VHU_VERSION | VHU_FLAG_REPLY);
	assert_true(h.size <= max);
	if (h.size)
		assert_int_equal(recv(fd, payload, h.size, MSG_WAITALL), h.size);
	return h.size;
}

/* Reads one reply; returns its payload size, or -1 at end of stream. An fd
 * sent with it is closed (recv() would have dropped it too). */
int recv_reply(int fd, uint32_t req, void *payload, uint32_t max)
{
	int rfd;
	int n = recv_reply_fd(fd, req, payload, max, &rfd);

	if (rfd >= 0)
		close(rfd);
	return n;
}

uint64_t get_u64(int fd, uint32_t req)
{
	uint64_t v = 0;

	send_req(fd, req, NULL, 0);
	assert_int_equal(recv_reply(fd, req, &v, sizeof(v)), 8);
	return v;
}

/* Sends with NEED_REPLY and returns the REPLY_ACK status. */
uint64_t send_ack(int fd, uint32_t req, const void *payload, uint32_t size,
			 const int *fds, unsigned int nfds)
{
	uint64_t status = 0xdead;

	send_msg(fd, req, VHU_VERSION | VHU_FLAG_NEED_REPLY, payload, size, fds, nfds);
	assert_int_equal(recv_reply(fd, req, &status, sizeof(status)), 8);
	return status;
}

/* True when the server has closed the connection. */
bool hung_up(int fd)
{
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_WAITALL);

	/* A close with our bytes still unread shows as a reset. */
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

