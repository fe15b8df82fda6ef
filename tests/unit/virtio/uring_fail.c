/* io_uring failure injection through the linker's --wrap (see
 * uring_fail.h). */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>

#include "uring_fail.h"

int __real_io_uring_submit(struct io_uring *ring);
int __real_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr);
int __wrap_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr);
int __real_io_uring_submit_and_wait_timeout(struct io_uring *ring,
					    struct io_uring_cqe **cqe,
					    unsigned int wait_nr,
					    struct __kernel_timespec *ts,
					    sigset_t *sigmask);
int __wrap_io_uring_submit_and_wait_timeout(struct io_uring *ring,
					    struct io_uring_cqe **cqe,
					    unsigned int wait_nr,
					    struct __kernel_timespec *ts,
					    sigset_t *sigmask);

/* Queue threads submit while the test arms and reads. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool armed;
static struct io_uring *failed;
static unsigned int failures;
static unsigned int transient;	/* waits still to refuse with EAGAIN */

void uring_fail_arm(bool on)
{
	pthread_mutex_lock(&lock);
	armed = on;
	pthread_mutex_unlock(&lock);
}

void uring_fail_reset(void)
{
	pthread_mutex_lock(&lock);
	failed = NULL;
	pthread_mutex_unlock(&lock);
}

void uring_fail_transient(unsigned int n)
{
	pthread_mutex_lock(&lock);
	transient = n;
	pthread_mutex_unlock(&lock);
}

unsigned int uring_fail_transient_left(void)
{
	unsigned int n;

	pthread_mutex_lock(&lock);
	n = transient;
	pthread_mutex_unlock(&lock);
	return n;
}

static bool refuse_once(void)
{
	bool ret;

	pthread_mutex_lock(&lock);
	ret = transient > 0;
	transient -= ret;
	pthread_mutex_unlock(&lock);
	return ret;
}

unsigned int uring_fail_count(void)
{
	unsigned int n;

	pthread_mutex_lock(&lock);
	n = failures;
	pthread_mutex_unlock(&lock);
	return n;
}

/* Whether the entries queued and not yet submitted hold a read or write
 * (a queue that only re-arms its kick watch does not fail). */
static bool sq_has_rw(const struct io_uring *ring)
{
	for (unsigned int i = ring->sq.sqe_head; i != ring->sq.sqe_tail; i++) {
		const struct io_uring_sqe *sqe =
			&ring->sq.sqes[i & *ring->sq.kring_mask];

		if (sqe->opcode == IORING_OP_READV || sqe->opcode == IORING_OP_WRITEV)
			return true;
	}
	return false;
}

static bool fails(struct io_uring *ring)
{
	bool ret;

	pthread_mutex_lock(&lock);
	if (armed && !failed && sq_has_rw(ring))
		failed = ring;
	ret = failed == ring;
	failures += ret;
	pthread_mutex_unlock(&lock);
	return ret;
}

int __wrap_io_uring_submit(struct io_uring *ring)
{
	return fails(ring) ? -EBADR : __real_io_uring_submit(ring);
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr)
{
	if (fails(ring))
		return -EBADR;
	if (refuse_once())
		return -EAGAIN;
	return __real_io_uring_submit_and_wait(ring, wait_nr);
}

int __wrap_io_uring_submit_and_wait_timeout(struct io_uring *ring,
					    struct io_uring_cqe **cqe,
					    unsigned int wait_nr,
					    struct __kernel_timespec *ts,
					    sigset_t *sigmask)
{
	return fails(ring) ? -EBADR :
	       __real_io_uring_submit_and_wait_timeout(ring, cqe, wait_nr, ts, sigmask);
}
