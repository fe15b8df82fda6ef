/* Listening on a UNIX stream socket path, replacing a stale socket there;
 * listening on a TCP address. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/sock.h"

int sock_listen_unix(const char *path, int backlog)
{
	return sock_listen_unix_mode(path, backlog, 0);
}

int sock_listen_unix_mode(const char *path, int backlog, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, ret;

	if (strlen(path) > SOCK_UNIX_PATH_MAX)
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (mode && fchmod(fd, mode) < 0)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	/* Nobody can connect before listen; a kernel that ignored the mode
	 * is caught here, before the socket is open to anyone. */
	if (mode && (lstat(path, &st) || (st.st_mode & 07777 & ~mode))) {
		unlink(path);
		close(fd);
		return -EPERM;
	}
	if (listen(fd, backlog) < 0) {
		ret = -errno;
		unlink(path);
		close(fd);
		return ret;
	}
	return fd;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

int sock_listen_tcp(const char *hostport, int backlog, char *desc,
		    size_t desclen, char *err, size_t errlen)
{
	char host[256] = "127.0.0.1", port[16], *colon;
	const char *rest = hostport;
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[NI_MAXHOST], sv[NI_MAXSERV];
	int fd, ret, one = 1;

	colon = strrchr(rest, ':');
	if (colon) {
		size_t hl = colon - rest;

		if (hl >= sizeof(host) || !hl) {
			snprintf(err, errlen, "bad host");
			return -EINVAL;
		}
		memcpy(host, rest, hl);
		host[hl] = 0;
		if (host[0] == '[' && host[hl - 1] == ']') {
			memmove(host, host + 1, hl - 2);
			host[hl - 2] = 0;
		}
		rest = colon + 1;
	}
	if (!*rest || strlen(rest) >= sizeof(port) ||
	    strspn(rest, "0123456789") != strlen(rest) || atoi(rest) > 65535) {
		snprintf(err, errlen, "the port must be a number from 0 to 65535");
		return -EINVAL;
	}
	strcpy(port, rest);
	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret) {
		snprintf(err, errlen, "%s", gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) ||
	    listen(fd, backlog)) {
		snprintf(err, errlen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -EINVAL;
	}
	freeaddrinfo(ai);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), sv, sizeof(sv),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(desc, desclen, strchr(h, ':') ? "tcp:[%s]:%s" : "tcp:%s:%s",
		 h, sv);
	return fd;
}
