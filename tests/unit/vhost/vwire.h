/* The wire of a vhost-user client: one message out with its fds, one
 * reply header in with the fd that came with it. No policy: the callers
 * (the unit tests' vclient.c, which asserts, bench/vhost-client.c, which
 * dies, and tests/fuzz/fuzz_vhost_user.c, which sends raw bytes) judge
 * the results. */
#ifndef IOVM_TESTS_VWIRE_H
#define IOVM_TESTS_VWIRE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "vhost/proto.h"

/* The most fds one message carries. */
#define VWIRE_MAX_FDS 16

/* sendmsg of niov iovecs with nfds fds (at most VWIRE_MAX_FDS) as
 * SCM_RIGHTS; flags go to sendmsg. Returns sendmsg's result. */
ssize_t vwire_sendv(int sock, struct iovec *iov, unsigned int niov,
		    const int *fds, unsigned int nfds, int flags);

/* Sends header h and h->size bytes of payload, with nfds fds (at most
 * VWIRE_MAX_FDS) as SCM_RIGHTS; flags go to sendmsg. Returns sendmsg's
 * result. */
ssize_t vwire_send(int sock, const struct vhu_hdr *h, const void *payload,
		   const int *fds, unsigned int nfds, int flags);

/* Reads one header into h and the one fd that came with it into *rfd (-1:
 * none; close-on-exec). Returns recvmsg's result. */
ssize_t vwire_recv_hdr(int sock, struct vhu_hdr *h, int *rfd);

#endif
