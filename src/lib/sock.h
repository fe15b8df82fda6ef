/* Listening on a UNIX stream socket path, replacing a stale socket there;
 * listening on a TCP address. */
#ifndef IOVM_LIB_SOCK_H
#define IOVM_LIB_SOCK_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

/* The longest path a UNIX socket address holds. */
#define SOCK_UNIX_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* Binds a UNIX stream socket (close-on-exec) at path and listens on it
 * with backlog. A socket left at path by an earlier run is replaced;
 * anything else there is someone's file and is left alone. Prints
 * nothing: returns the fd, or -ENAMETOOLONG (path longer than
 * SOCK_UNIX_PATH_MAX), -EEXIST (a file other than a socket is at path),
 * or the -errno of socket, bind or listen, for the caller's message. */
int sock_listen_unix(const char *path, int backlog);

/* The same, with the socket file made with mode (e.g. 0600) from the
 * start: the mode is set on the socket before bind, which Linux gives the
 * file it creates (less the umask), so that no one else can connect in
 * between. -EPERM if the file still came out wider than mode. */
int sock_listen_unix_mode(const char *path, int backlog, mode_t mode);

/* Binds a TCP socket (close-on-exec, SO_REUSEADDR) at hostport: "PORT"
 * (127.0.0.1), "HOST:PORT" or "[IPV6]:PORT", and listens with backlog.
 * Returns the fd and the address bound ("tcp:HOST:PORT", the port chosen
 * for 0) in desc, or -EINVAL with a reason (bad host or port, the
 * resolver's or bind's error) in err. */
int sock_listen_tcp(const char *hostport, int backlog, char *desc,
		    size_t desclen, char *err, size_t errlen);

#endif
