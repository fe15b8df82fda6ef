/* The floor for the blk benchmark: the probe's job set (same names, sizes,
 * depths, data pattern and verification) issued straight on the host file
 * with io_uring and O_DIRECT. Prints the probe's result format:
 *   job=NAME iops=N bw_mbs=N lat_mean_us=N lat_p99_us=N ios=N cpu_us_per_io=N
 * The last two jobs (1 MiB sequential reads and writes, QD8) give the
 * file's best sequential bandwidth, against which the 64k jobs of a VMM
 * (that merges requests) are measured.
 * --batch takes every ready completion before refilling, as the probe's
 * job loop does (the floor for that guest with a VMM that costs nothing).
 * Usage: blk-floor FILE [--offset BYTES] [--region BYTES] [--secs N] [--poll]
 *                       [--batch] [--seed N] [--cache none|writeback] */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "pattern.h"

struct job {
	const char *name;
	bool write;
	unsigned int bs, qd;
	bool random;
};

static const struct job jobs[] = {
	{ "randread-4k-qd1", false, 4096, 1, true },
	{ "randread-4k-qd32", false, 4096, 32, true },
	{ "randwrite-4k-qd32", true, 4096, 32, true },
	{ "seqread-64k-qd16", false, 65536, 16, false },
	{ "seqwrite-64k-qd16", true, 65536, 16, false },
	/* The file's best sequential bandwidth, the floor for the 64k jobs:
	 * a VMM merges adjacent guest requests into larger host I/Os, which
	 * the 64k jobs above (one I/O per request) do not. */
	{ "seqread-1m-qd8", false, 1 << 20, 8, false },
	{ "seqwrite-1m-qd8", true, 1 << 20, 8, false },
};

#define MAX_BS (1u << 20)

struct slot {
	void *buf;
	uint64_t off, t0;
};

static int fd;
static struct io_uring ring;
static uint64_t region_off = 1 << 20, region_len = 64 << 20, seed = 3;
static struct slot slots[64];
static bool poll;		/* spin on the CQ instead of sleeping */
static bool batch;		/* take every ready completion, then refill */
static uint64_t *lat;
static size_t lat_cap = 1 << 22;


static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		       1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		       1000ull;
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static void submit(struct slot *s, const struct job *j)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	if (!sqe) {
		fprintf(stderr, "blk-floor: submission queue full\n");
		exit(1);
	}
	if (j->write) {
		pattern_fill(s->buf, s->off, j->bs, seed);
		io_uring_prep_write(sqe, fd, s->buf, j->bs, s->off);
	} else {
		io_uring_prep_read(sqe, fd, s->buf, j->bs, s->off);
	}
	io_uring_sqe_set_data(sqe, s);
	s->t0 = mono_ns();
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Runs j for secs (0: one sequential pass, the prefill); prints a line. */
static void run(const struct job *j, unsigned int secs, bool report)
{
	uint64_t n = region_len / j->bs, issued = 0, done = 0, rng = seed + 1;
	uint64_t t0 = mono_ns(), c0 = cpu_ns(), end = t0 + secs * 1000000000ull;
	uint64_t sum = 0, nlat = 0, t, c;
	unsigned int inflight = 0;
	bool stop = false;

	for (unsigned int i = 0; i < j->qd; i++) {
		struct slot *s = &slots[i];

		s->off = region_off +
			 (j->random ? rnd(&rng) % n : issued % n) * j->bs;
		submit(s, j);
		issued++;
		inflight++;
	}
	io_uring_submit(&ring);
	while (inflight) {
		struct slot *freed[64];
		struct io_uring_cqe *cqe;
		unsigned int nfreed = 0;
		int r;

		if (poll)
			while ((r = io_uring_peek_cqe(&ring, &cqe)) == -EAGAIN)
				__builtin_ia32_pause();
		else
			r = io_uring_wait_cqe(&ring, &cqe);
		if (r < 0) {
			fprintf(stderr, "blk-floor: wait: %s\n", strerror(-r));
			exit(1);
		}
		/* One completion, or with --batch every one that is ready, as
		 * the probe's job loop takes them (each checked as it is
		 * taken), before the requests are sent again. */
		do {
			struct slot *s = io_uring_cqe_get_data(cqe);

			if (cqe->res != (int)j->bs) {
				fprintf(stderr, "blk-floor: %s at %" PRIu64 ": %s\n",
					j->name, s->off,
					cqe->res < 0 ? strerror(-cqe->res) : "short");
				exit(1);
			}
			io_uring_cqe_seen(&ring, cqe);
			t = mono_ns();
			if (nlat < lat_cap)
				lat[nlat++] = t - s->t0;
			sum += t - s->t0;
			done++;
			inflight--;
			if (!j->write) {
				size_t bad = pattern_check(s->buf, s->off, j->bs, seed);

				if (bad != j->bs) {
					fprintf(stderr, "blk-floor: %s: data mismatch "
						"at %" PRIu64 "\n", j->name,
						s->off + bad);
					exit(1);
				}
			}
			freed[nfreed++] = s;
		} while (batch && nfreed < j->qd && io_uring_peek_cqe(&ring, &cqe) == 0);
		if (secs ? t >= end : issued >= n)
			stop = true;
		/* Each request is sent with its own system call, as the
		 * probe's driver publishes each one and a VMM queue thread
		 * sends each as it pops it. */
		for (unsigned int i = 0; i < nfreed && !stop; i++) {
			struct slot *s = freed[i];

			s->off = region_off +
				 (j->random ? rnd(&rng) % n : issued % n) * j->bs;
			submit(s, j);
			issued++;
			inflight++;
			io_uring_submit(&ring);
		}
	}
	t = mono_ns() - t0;
	c = cpu_ns() - c0;
	if (!report)
		return;
	qsort(lat, nlat, sizeof(*lat), cmp64);
	{
		uint64_t iops = done * 1000000000ull / t;
		uint64_t bw10 = done * j->bs * 10000ull / t;
		uint64_t mean = sum / done;
		uint64_t k = (nlat * 99 + 99) / 100;
		uint64_t p99 = lat[k ? k - 1 : 0];

		printf("job=%s iops=%" PRIu64 " bw_mbs=%" PRIu64 ".%" PRIu64
		       " lat_mean_us=%" PRIu64 ".%" PRIu64 " lat_p99_us=%"
		       PRIu64 ".%" PRIu64 " ios=%" PRIu64
		       " cpu_us_per_io=%.2f\n",
		       j->name, iops, bw10 / 10, bw10 % 10, mean / 1000,
		       mean % 1000 / 100, p99 / 1000, p99 % 1000 / 100, done,
		       (double)c / 1000.0 / (double)done);
		fflush(stdout);
	}
}

static uint64_t num(const char *opt, const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		goto bad;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (!*end)
		return v;
bad:
	fprintf(stderr, "blk-floor: bad number for %s: '%s'\n", opt, s);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "region", required_argument, NULL, 'r' },
		{ "secs", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ "cache", required_argument, NULL, 'c' },
		{ "poll", no_argument, NULL, 'p' },
		{ "batch", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct job fill = { "prefill", true, 65536, 16, false };
	unsigned int secs = 3;
	bool direct = true;
	struct stat st;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': region_off = num("--offset", optarg); break;
		case 'r': region_len = num("--region", optarg); break;
		case 's': secs = (unsigned int)num("--secs", optarg); break;
		case 'S': seed = num("--seed", optarg); break;
		case 'p': poll = true; break;
		case 'b': batch = true; break;
		case 'c':
			if (strcmp(optarg, "none") && strcmp(optarg, "writeback")) {
				fprintf(stderr, "blk-floor: --cache is none or "
					"writeback\n");
				return 2;
			}
			direct = !strcmp(optarg, "none");
			break;
		case 'h':
			printf("usage: blk-floor FILE [--offset BYTES] "
			       "[--region BYTES] [--secs N] [--seed N] "
			       "[--cache none|writeback] [--poll] [--batch]\n"
			       "Runs the probe's blk jobs on FILE with io_uring, "
			       "then 1 MiB sequential reads and writes at QD8\n"
			       "(the file's best bandwidth) "
			       "(defaults: offset 1M, region 64M, 3 s per job,\n"
			       "seed 3, cache none = O_DIRECT).\n"
			       "--poll busy-polls the completion queue instead "
			       "of sleeping in io_uring_enter: the disk's own\n"
			       "latency, with no wakeup in it (as a VMM queue "
			       "thread that spins sees it).\n"
			       "--batch takes every completion that is ready (checking "
			       "each) before sending any request\n"
			       "again, as the probe's job loop does: the floor "
			       "for a guest that refills in batches,\n"
			       "with a VMM that costs nothing.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: blk-floor FILE [options] (--help)\n");
		return 2;
	}
	if (region_off % 65536 || region_len % 65536 || !region_len || !secs) {
		fprintf(stderr, "blk-floor: offset and region must be "
			"multiples of 64k, region and secs non-zero\n");
		return 2;
	}
	fd = open(argv[optind], O_RDWR | (direct ? O_DIRECT : 0));
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "blk-floor: %s: %s\n", argv[optind],
			strerror(errno));
		return 1;
	}
	if ((uint64_t)st.st_size < region_off + region_len) {
		fprintf(stderr, "blk-floor: %s: smaller than offset + region\n",
			argv[optind]);
		return 1;
	}
	r = io_uring_queue_init(64, &ring, 0);
	if (r < 0) {
		fprintf(stderr, "blk-floor: io_uring: %s\n", strerror(-r));
		return 1;
	}
	for (unsigned int i = 0; i < 64; i++)
		if (posix_memalign(&slots[i].buf, 4096, MAX_BS))
			return 1;
	lat = malloc(lat_cap * sizeof(*lat));
	if (!lat)
		return 1;
	run(&fill, 0, false);
	printf("floor: region offset=%" PRIu64 " len=%" PRIu64 " secs=%u\n",
	       region_off, region_len, secs);
	for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++)
		run(&jobs[i], secs, true);
	return 0;
}
