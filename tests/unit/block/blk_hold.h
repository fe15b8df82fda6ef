/* Test helper: holds the block backend's slow operations (writes of zeroes,
 * block-device discards) at a gate the test opens (blk_set_test_hooks), so
 * a test sees what else runs while one is in flight. A watchdog opens the
 * gate if the code under test blocks on it instead of going on, turning
 * that hang into a failure (blk_hold_end returns false). */
#ifndef IOVM_TESTS_BLK_HOLD_H
#define IOVM_TESTS_BLK_HOLD_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

#endif
