/* Listening on a UNIX stream socket path, replacing a stale socket there. */
#include <errno.h>
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
