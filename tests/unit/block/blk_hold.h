/* Test helper: holds the block backend's slow operations (writes of zeroes,
 * block-device discards) at a gate the test opens (blk_set_test_hooks), so
 * a test sees what else runs while one is in flight. A watchdog opens the
 * gate if the code under test blocks on it instead of going on, turning
 * that hang into a failure (blk_hold_end returns false). */
#ifndef IOVM_TESTS_BLK_HOLD_H
#define IOVM_TESTS_BLK_HOLD_H

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "block/backend.h"

/* Long enough never to fire when the code goes on, whatever the load. */
#define BLK_HOLD_WATCHDOG_MS 30000

struct blk_hold {
	struct blk_test_hooks hooks;
	int cancel_fd;
	pthread_t watchdog;
	bool fired;
};

static inline void blk_hold_open_gate(struct blk_hold *h)
{
	uint64_t one = 1;

	if (write(h->hooks.gate_fd, &one, sizeof(one)) != sizeof(one))
		return;
}

static inline void *blk_hold_watchdog(void *arg)
{
	struct blk_hold *h = arg;
	struct pollfd p = { .fd = h->cancel_fd, .events = POLLIN };

	if (poll(&p, 1, BLK_HOLD_WATCHDOG_MS) == 0) {
		__atomic_store_n(&h->fired, true, __ATOMIC_SEQ_CST);
		blk_hold_open_gate(h);
	}
	return NULL;
}

/* Closes the gate for every backend from now on; gated: hold the slow
 * operations (else only no_fallocate applies). Returns 0 or -1. */
static inline int blk_hold_start(struct blk_hold *h, bool gated,
				 bool no_fallocate)
{
	h->fired = false;
	h->hooks.no_fallocate = no_fallocate;
	h->hooks.gate_fd = gated ? eventfd(0, EFD_CLOEXEC) : -1;
	h->hooks.arrive_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	h->cancel_fd = eventfd(0, EFD_CLOEXEC);
	if ((gated && h->hooks.gate_fd < 0) || h->hooks.arrive_fd < 0 ||
	    h->cancel_fd < 0 ||
	    pthread_create(&h->watchdog, NULL, blk_hold_watchdog, h))
		return -1;
	blk_set_test_hooks(&h->hooks);
	return 0;
}

/* Waits until n more operations wait at the gate (or timeout_ms passed:
 * false). */
static inline bool blk_hold_arrived(struct blk_hold *h, unsigned int n,
				    int timeout_ms)
{
	struct pollfd p = { .fd = h->hooks.arrive_fd, .events = POLLIN };

	while (n) {
		uint64_t v;

		if (poll(&p, 1, timeout_ms) <= 0)
			return false;
		if (read(h->hooks.arrive_fd, &v, sizeof(v)) == sizeof(v))
			n = v >= n ? 0 : n - (unsigned int)v;
	}
	return true;
}

/* Whether the watchdog had to open the gate. */
static inline bool blk_hold_fired(struct blk_hold *h)
{
	return __atomic_load_n(&h->fired, __ATOMIC_SEQ_CST);
}

/* Opens the gate (what waits at it goes on). */
static inline void blk_hold_release(struct blk_hold *h)
{
	if (h->hooks.gate_fd >= 0)
		blk_hold_open_gate(h);
}

/* After everything held has finished: clears the hooks, stops the
 * watchdog. Returns whether the watchdog never had to open the gate. */
static inline bool blk_hold_end(struct blk_hold *h)
{
	uint64_t one = 1;

	blk_hold_release(h);
	blk_set_test_hooks(NULL);
	if (write(h->cancel_fd, &one, sizeof(one)) != sizeof(one))
		return false;
	pthread_join(h->watchdog, NULL);
	close(h->cancel_fd);
	close(h->hooks.arrive_fd);
	if (h->hooks.gate_fd >= 0)
		close(h->hooks.gate_fd);
	return !blk_hold_fired(h);
}

/* Fills [off, off+len) of fd with byte v. Returns whether it did. */
static inline bool blk_fill_fd(int fd, uint64_t off, uint64_t len, uint8_t v)
{
	static uint8_t b[1 << 20];

	memset(b, v, sizeof(b));
	while (len) {
		size_t n = len < sizeof(b) ? len : sizeof(b);

		if (pwrite(fd, b, n, off) != (ssize_t)n)
			return false;
		off += n;
		len -= n;
	}
	return true;
}

/* Whether [off, off+len) of fd holds only byte v (says where not). */
static inline bool blk_holds_fd(int fd, uint64_t off, uint64_t len, uint8_t v)
{
	static uint8_t b[1 << 20], want[1 << 20];

	memset(want, v, sizeof(want));
	while (len) {
		size_t n = len < sizeof(b) ? len : sizeof(b);

		if (pread(fd, b, n, off) != (ssize_t)n || memcmp(b, want, n)) {
			fprintf(stderr, "bytes at %llu are not all %#x\n",
				(unsigned long long)off, v);
			return false;
		}
		off += n;
		len -= n;
	}
	return true;
}

static inline bool blk_fill(const char *path, uint64_t off, uint64_t len,
			    uint8_t v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && blk_fill_fd(fd, off, len, v);

	if (fd >= 0)
		close(fd);
	return ok;
}

static inline bool blk_holds(const char *path, uint64_t off, uint64_t len,
			     uint8_t v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && blk_holds_fd(fd, off, len, v);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Makes every descriptor of this process open on path refuse writes (each
 * replaced by a read-only one), to test write errors in devices that open
 * their disks themselves. Returns how many it replaced. */
static inline int blk_break_writes(const char *path)
{
	DIR *d = opendir("/proc/self/fd");
	int ro = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	struct dirent *e;

	while (d && ro >= 0 && (e = readdir(d))) {
		char link[64], target[PATH_MAX];
		int fd = atoi(e->d_name);
		ssize_t len;

		if (e->d_name[0] == '.' || fd == ro || fd == dirfd(d))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		if (!strcmp(target, path) && dup3(ro, fd, O_CLOEXEC) == fd)
			n++;
	}
	if (d)
		closedir(d);
	if (ro >= 0)
		close(ro);
	return n;
}

#endif
