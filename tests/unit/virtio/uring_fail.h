/* io_uring failure injection for queue-thread tests: once armed, the
 * first submission of a ring that carries a read or write fails, and so
 * does every later submission of that ring, as if the ring had broken.
 * Tests that use it link with
 *   -Wl,--wrap=io_uring_submit,--wrap=io_uring_submit_and_wait,
 *   --wrap=io_uring_submit_and_wait_timeout
 * so that the backend's calls come here. */
#ifndef IOVM_TESTS_URING_FAIL_H
#define IOVM_TESTS_URING_FAIL_H

#include <stdbool.h>


/* Arms (or disarms: rings that failed stay failed) the injection. */
void uring_fail_arm(bool on);
/* Forgets the failed ring, for a test that restarts its queue. */
void uring_fail_reset(void);
/* The next n io_uring_submit_and_wait calls (of any ring) fail with
 * EAGAIN, as when the kernel is short of memory, and do nothing. */
void uring_fail_transient(unsigned int n);
/* How many of those are still to come. */
unsigned int uring_fail_transient_left(void);
/* Submissions refused as broken so far. */
unsigned int uring_fail_count(void);

#endif
