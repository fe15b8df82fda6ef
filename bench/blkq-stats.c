/* blkq-stats: what the block queue's per-request statistics (block/stats.h)
 * cost, in CPU time per request, measured where nothing else hides it:
 * FLUSHes of a read-only disk, which the queue completes by itself (no
 * system call, no I/O), submitted 32 at a time and reaped, with the disk's
 * statistics on (as iovm runs) and off (its record pointer cleared), in
 * alternating batches of the same process. The difference is the
 * statistics' cost per request: a clock read at submission, one per reap
 * pass, the counters' stores and the sequence count. Set it against a real
 * request's CPU cost (bench/vhost.sh's cpu_us_per_io, ~2.8 us for a 4k
 * write on tmpfs) for the fast-path share.
 *
 *   blkq-stats [FILE]   (default /dev/shm/iovm-blkq-stats.img, made and
 *                        removed; 1 MiB)
 * Prints one line per mode: median ns per request of 9 batches of 2^20
 * requests each, min-max, and the difference. Not part of the test suite. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "block/backend.h"

#define BATCH (1u << 20)
#define ROUNDS 9
#define DEPTH 32

static unsigned long ndone;

static void on_done(void *tag, int res)
{
	(void)tag;
	if (res)
		abort();
	ndone++;
}

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per request of one batch */
static double batch(struct blk_queue *q, struct blk_backend *be)
{
	double t0 = cpu_ns();

	ndone = 0;
	for (unsigned int i = 0; i < BATCH; i += DEPTH) {
		for (unsigned int k = 0; k < DEPTH; k++)
			if (blkq_flush(q, be, on_done, NULL))
				abort();
		if (blkq_submit(q) < 0)
			abort();
		while (blkq_inflight(q))
			if (blkq_reap(q, false) < 0)
				abort();
	}
	if (ndone != BATCH)
		abort();
	return (cpu_ns() - t0) / BATCH;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/shm/iovm-blkq-stats.img";
	struct disk_cfg cfg = { .path = path, .cache = CACHE_WRITEBACK, .ro = true };
	double t[2][ROUNDS];
	struct blk_backend be = { 0 };
	struct blk_queue *q;
	void *stats;
	char err[256];
	int fd;

	fd = open(path, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, 1 << 20)) {
		perror(path);
		return 1;
	}
	close(fd);
	if (blk_open(&be, &cfg, err, sizeof(err))) {
		fprintf(stderr, "blkq-stats: %s\n", err);
		return 1;
	}
	q = blkq_create(DEPTH);
	if (!q)
		return 1;
	stats = be.stats;
	batch(q, &be);	/* warm: the queue's record is made */
	for (int r = 0; r < ROUNDS; r++)
		for (int on = 1; on >= 0; on--) {
			be.stats = on ? stats : NULL;
			t[on][r] = batch(q, &be);
		}
	be.stats = stats;
	blkq_destroy(q);
	blk_close(&be);
	if (argc <= 1)
		unlink(path);
	for (int on = 1; on >= 0; on--)
		qsort(t[on], ROUNDS, sizeof(double), cmp);
	printf("statistics on:  %.1f ns/request (min %.1f, max %.1f)\n", t[1][ROUNDS / 2],
	       t[1][0], t[1][ROUNDS - 1]);
	printf("statistics off: %.1f ns/request (min %.1f, max %.1f)\n", t[0][ROUNDS / 2],
	       t[0][0], t[0][ROUNDS - 1]);
	printf("cost: %.1f ns/request (medians)\n", t[1][ROUNDS / 2] - t[0][ROUNDS / 2]);
	return 0;
}
