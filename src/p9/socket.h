/* The 9P2000.L server over a stream socket (UNIX or TCP): one session per
 * connection, with a reader thread, reusable message slots and a few
 * workers per connection. What `iovm 9p-serve` starts. */
#ifndef IOVM_P9_SOCKET_H
#define IOVM_P9_SOCKET_H

#include <stddef.h>

struct p9_server;

#define P9_SOCK_SLOTS 16	/* requests in flight per connection */
#define P9_SOCK_WORKERS 4	/* threads serving one connection */
/* A slot always keeps buffers up to this size: any metadata request and
 * its reply (p9_reply_room: 512 + a 4095-byte readlink target + the
 * request) fit, so the metadata path never reallocates. */
#define P9_SOCK_SLOT_KEEP 16384
#define P9_SOCK_MAX_CONNS 4096
#define P9_SOCK_IO_TIMEOUT_MAX 86400

struct p9_sock_limits {
	unsigned int max_conns;	/* connections served at once; more are closed */
	size_t mem_cap;		/* message buffers of all connections together */
	size_t conn_cap;	/* ... and of one connection */
	/* How long a connection may make no progress in the middle of a
	 * message it sends, or leave a reply untaken, before it is closed
	 * (0: forever). */
	unsigned int io_timeout_s;
};

/* Listens on "unix:PATH" (a stale socket at PATH is replaced), "tcp:PORT"
 * (loopback) or "tcp:HOST:PORT" (IPv6 as [ADDR]:PORT). Returns the
 * listening fd and the address bound in desc, or -EINVAL after printing
 * one line naming the problem. */
int p9_sock_listen(const char *spec, char *desc, size_t desclen);

/* Accepts connections on lfd and serves each on its own threads with a
 * session of srv. Returns only when accept fails for good (-errno, logged). */
int p9_sock_serve(struct p9_server *srv, int lfd, const struct p9_sock_limits *l);

#endif
