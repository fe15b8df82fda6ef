/* Connecting an NBD handle on a thread of its own. For nbd:// and nbds://
 * URIs libnbd resolves the host name inside nbd_aio_connect_uri with a
 * blocking getaddrinfo: a name server that does not answer would hold the
 * calling thread for the resolver's own timeouts (at start-up past
 * timeout=; on a reconnect, a queue thread and the connection's lock that
 * every queue of the disk takes). A dial makes that call on a thread made
 * for it; the caller waits for it (bounded) or looks at it from its
 * timers, and takes the handle back once the call has returned. */
#ifndef IOVM_BLOCK_NBD_DIAL_H
#define IOVM_BLOCK_NBD_DIAL_H

#include <stdbool.h>
#include <stddef.h>

#include <libnbd.h>

struct nbd_dial;

/* Whether uri names a host to look up (nbd+unix:// and nbd+vsock:// do
 * not: they connect without one). */
bool nbd_dial_resolves(const char *uri);
/* Starts nbd_aio_connect_uri(h, uri) on a new thread; h is the dial's
 * from then on. NULL if no thread could be made (h is still the
 * caller's). */
struct nbd_dial *nbd_dial_start(struct nbd_handle *h, const char *uri);
/* Whether the call has returned. */
bool nbd_dial_done(struct nbd_dial *dl);
/* Waits at most secs seconds for the call to return; whether it did. */
bool nbd_dial_wait(struct nbd_dial *dl, unsigned int secs);
/* Once the call has returned: the handle is the caller's again (in *h)
 * and dl is gone. Returns 0 if the call succeeded (the handle is
 * connecting), else -1 with its error in err. */
int nbd_dial_take(struct nbd_dial *dl, struct nbd_handle **h, char *err, size_t errlen);
/* Gives dl up, returned or not: its handle is closed once the call has
 * returned. */
void nbd_dial_drop(struct nbd_dial *dl);

#endif
