/* Guest-side helper of 9p-tcp.sh: flock and POSIX (fcntl) record locks on
 * files of a 9p mount, between two processes. Prints "FLOCK OK" and
 * "FCNTL OK", or why it failed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

static int lk(int fd, int cmd, short type, off_t start, off_t len,
	      struct flock *out)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = start, .l_len = len };
	int r = fcntl(fd, cmd, &fl);

	if (out)
		*out = fl;
	return r;
}

static int child_flock(const char *path)
{
	pid_t pid = fork();
	int st;

	if (!pid) {
		int f2 = open(path, O_RDWR);

		_exit(flock(f2, LOCK_EX | LOCK_NB) ? (errno == EWOULDBLOCK ? 10 : 11) : 0);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int test_flock(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644), r;

	if (fd < 0 || flock(fd, LOCK_EX)) {
		printf("FLOCK FAIL: lock: %s\n", strerror(errno));
		return 1;
	}
	r = child_flock(path);
	if (r != 10) {
		printf("FLOCK FAIL: second exclusive flock: %d\n", r);
		return 1;
	}
	if (flock(fd, LOCK_UN)) {
		printf("FLOCK FAIL: unlock: %s\n", strerror(errno));
		return 1;
	}
	r = child_flock(path);
	if (r) {
		printf("FLOCK FAIL: flock after release: %d\n", r);
		return 1;
	}
	close(fd);
	printf("FLOCK OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	int fd, st;
	pid_t pid;

	if (argc != 2)
		return 2;
	snprintf(path, sizeof(path), "%s.flock", argv[1]);
	if (test_flock(path))
		return 1;
	fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0 || lk(fd, F_SETLK, F_WRLCK, 0, 100, NULL)) {
		printf("FCNTL FAIL: parent lock: %s\n", strerror(errno));
		return 1;
	}
	pid = fork();
	if (!pid) {
		struct flock fl;
		int f2 = open(argv[1], O_RDWR);

		if (!lk(f2, F_SETLK, F_WRLCK, 50, 10, NULL) || errno != EAGAIN) {
			printf("FCNTL FAIL: conflicting lock granted or %s\n",
			       strerror(errno));
			_exit(1);
		}
		if (lk(f2, F_GETLK, F_RDLCK, 10, 1, &fl) || fl.l_type != F_WRLCK ||
		    fl.l_pid != getppid()) {
			printf("FCNTL FAIL: F_GETLK type %d pid %d\n", fl.l_type,
			       fl.l_pid);
			_exit(1);
		}
		if (lk(f2, F_SETLK, F_WRLCK, 200, 10, NULL)) {
			printf("FCNTL FAIL: disjoint lock: %s\n", strerror(errno));
			_exit(1);
		}
		_exit(0);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	if (lk(fd, F_SETLK, F_UNLCK, 0, 100, NULL)) {
		printf("FCNTL FAIL: unlock: %s\n", strerror(errno));
		return 1;
	}
	pid = fork();
	if (!pid) {
		int f2 = open(argv[1], O_RDWR);

		_exit(lk(f2, F_SETLK, F_WRLCK, 50, 10, NULL) ? 1 : 0);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("FCNTL FAIL: lock after unlock refused\n");
		return 1;
	}
	printf("FCNTL OK\n");
	return 0;
}
