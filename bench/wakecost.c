/* wakecost: what one sleep and one wakeup cost a thread on this host, in
 * wall time and in the thread's own CPU time. A queue thread chooses
 * between spinning (its CPU equals the time it spins) and sleeping (its
 * CPU is what this program prints); where a sleep costs tens of
 * microseconds of CPU, as in a nested or paravirtualised host, spinning
 * through a 40 us I/O is no dearer than sleeping through it.
 *
 * Usage: wakecost [--iters N] [--us T[,T...]]
 *   --iters N  sleeps or wakeups per figure (default 2000)
 *   --us LIST  the timed sleeps' lengths in microseconds (default 10,50)
 * Prints, per case: the mean wall time and the mean CPU time of the
 * sleeping thread (CLOCK_THREAD_CPUTIME_ID) per sleep:
 *   nanosleep T       a timer sleep (timer slack 1 ns)
 *   uring-timeout T   io_uring_enter waiting for a completion that does
 *                     not come, with a timeout (what a queue thread's
 *                     timed wait costs)
 *   eventfd-wake      another thread writes an eventfd the sleeper
 *                     blocks on, and waits for its answer: wall is the
 *                     round trip, CPU the sleeper's per wakeup */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void report(const char *what, unsigned int us, uint64_t wall,
		   uint64_t cpu, unsigned int iters)
{
	char name[48];

	if (us)
		snprintf(name, sizeof(name), "%s %uus", what, us);
	else
		snprintf(name, sizeof(name), "%s", what);
	printf("%-22s wall_us=%.1f cpu_us=%.1f\n", name,
	       wall / 1e3 / iters, cpu / 1e3 / iters);
}

static void timed_sleeps(unsigned int us, unsigned int iters)
{
	struct timespec ts = { 0, (long)us * 1000 };
	uint64_t t0 = mono_ns(), c0 = thread_cpu_ns();

	for (unsigned int i = 0; i < iters; i++)
		nanosleep(&ts, NULL);
	report("nanosleep", us, mono_ns() - t0, thread_cpu_ns() - c0, iters);
}

static int uring_timeouts(unsigned int us, unsigned int iters)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	uint64_t t0, c0;
	int ret = io_uring_queue_init(8, &ring, 0);

	if (ret < 0)
		return ret;
	if (!(ring.features & IORING_FEAT_EXT_ARG)) {
		io_uring_queue_exit(&ring);
		return -EOPNOTSUPP;
	}
	t0 = mono_ns();
	c0 = thread_cpu_ns();
	for (unsigned int i = 0; i < iters; i++) {
		struct __kernel_timespec ts = { 0, (long long)us * 1000 };

		ret = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts,
						       NULL);
		if (ret != -ETIME && ret != -EINTR) {
			io_uring_queue_exit(&ring);
			return ret < 0 ? ret : -EPROTO;
		}
	}
	report("uring-timeout", us, mono_ns() - t0, thread_cpu_ns() - c0,
	       iters);
	io_uring_queue_exit(&ring);
	return 0;
}

struct pingpong {
	int ping, pong;
	unsigned int iters;
	uint64_t cpu;
};

static void *sleeper(void *arg)
{
	struct pingpong *p = arg;
	uint64_t v, c0 = thread_cpu_ns();

	for (unsigned int i = 0; i < p->iters; i++) {
		if (read(p->ping, &v, sizeof(v)) != sizeof(v))
			break;
		v = 1;
		if (write(p->pong, &v, sizeof(v)) != sizeof(v))
			break;
	}
	p->cpu = thread_cpu_ns() - c0;
	return NULL;
}

static int eventfd_wakes(unsigned int iters)
{
	struct pingpong p = { .iters = iters };
	pthread_t t;
	uint64_t t0, v = 1;
	int ret;

	p.ping = eventfd(0, 0);
	p.pong = eventfd(0, 0);
	if (p.ping < 0 || p.pong < 0)
		return -errno;
	ret = pthread_create(&t, NULL, sleeper, &p);
	if (ret)
		return -ret;
	t0 = mono_ns();
	for (unsigned int i = 0; i < iters; i++) {
		if (write(p.ping, &v, sizeof(v)) != sizeof(v) ||
		    read(p.pong, &v, sizeof(v)) != sizeof(v)) {
			ret = -errno;
			break;
		}
	}
	pthread_join(t, NULL);
	if (!ret)
		report("eventfd-wake", 0, mono_ns() - t0, p.cpu, iters);
	close(p.ping);
	close(p.pong);
	return ret;
}

static void usage(FILE *f, int status)
{
	fprintf(f, "usage: wakecost [--iters N] [--us T[,T...]]\n"
		   "Prints the wall time and the sleeping thread's own CPU time per\n"
		   "timed sleep (nanosleep, io_uring wait with a timeout) and per\n"
		   "eventfd wakeup by another thread.\n"
		   "  --iters N  sleeps or wakeups per figure (default 2000)\n"
		   "  --us LIST  timed sleeps in microseconds (default 10,50)\n");
	exit(status);
}

static unsigned int parse_uint(const char *s, const char *opt,
			       unsigned int max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || !v || v > max) {
		fprintf(stderr, "wakecost: %s: '%s' is not a number from 1 to %u\n",
			opt, s, max);
		exit(2);
	}
	return (unsigned int)v;
}

int main(int argc, char **argv)
{
	unsigned int iters = 2000, us[16] = { 10, 50 }, nus = 2;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			usage(stdout, 0);
		if (i + 1 >= argc)
			usage(stderr, 2);
		if (!strcmp(argv[i], "--iters")) {
			iters = parse_uint(argv[++i], "--iters", 10000000);
		} else if (!strcmp(argv[i], "--us")) {
			char *list = argv[++i], *tok, *save = NULL;

			nus = 0;
			for (tok = strtok_r(list, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (nus == 16) {
					fprintf(stderr, "wakecost: --us: at most 16 lengths\n");
					return 2;
				}
				us[nus++] = parse_uint(tok, "--us", 1000000);
			}
			if (!nus)
				usage(stderr, 2);
		} else {
			usage(stderr, 2);
		}
	}
	/* What a latency-minded thread would set before timed waits. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	printf("wakecost: %u iterations per figure, %ld CPUs online\n", iters,
	       sysconf(_SC_NPROCESSORS_ONLN));
	for (unsigned int i = 0; i < nus; i++) {
		timed_sleeps(us[i], iters);
		ret = uring_timeouts(us[i], iters);
		if (ret)
			fprintf(stderr, "wakecost: io_uring timed wait: %s\n",
				strerror(-ret));
	}
	ret = eventfd_wakes(iters);
	if (ret)
		fprintf(stderr, "wakecost: eventfd wakeups: %s\n", strerror(-ret));
	return 0;
}
