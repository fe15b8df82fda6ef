/* I/O job engine for the blk tests and benchmark. */
#include "blk_job.h"

#include "lib/pattern.h"
#include "lib/probe.h"

static uint8_t *pool;
static uint64_t pool_size;
static uint32_t *perm, *lat_buf;
static uint64_t perm_cap, lat_cap;
static struct vblk_io ios[VBLK_MAX_QD];

int blk_job_init(uint64_t pool_bytes, uint64_t lat_samples)
{
	pool = dma_alloc(pool_bytes, 4096);
	lat_buf = dma_alloc(lat_samples * 4, 64);
	if (!pool || !lat_buf)
		return -1;
	pool_size = pool_bytes;
	lat_cap = lat_samples;
	return 0;
}

const char *blk_status_name(uint8_t s)
{
	switch (s) {
	case VIRTIO_BLK_S_OK: return "OK";
	case VIRTIO_BLK_S_IOERR: return "IOERR";
	case VIRTIO_BLK_S_UNSUPP: return "UNSUPP";
	default: return "invalid";
	}
}

static uint64_t job_block(struct blk_job *j, uint64_t n, uint64_t seq,
			  uint64_t *rng)
{
	if (!j->max_ticks)
		return j->random ? perm[seq] : seq;
	return j->random ? rand64(rng) % n : seq % n;
}

/* Checks the job's geometry and, for a random single pass, builds the
 * permutation of its blocks. */
static void job_prepare(struct vblk *b, struct blk_job *j, uint64_t n,
			uint64_t *rng)
{
	if (!j->bs || j->len % j->bs || j->off % 512 || j->bs % 512 || !n)
		probe_fail("job %s: bad geometry", j->name);
	if (j->qd == 0 || j->qd > VBLK_MAX_QD ||
	    j->qd * 3u > vblk_min_queue_size(b) * b->nq ||
	    (uint64_t)j->qd * j->bs > pool_size)
		probe_fail("job %s: qd %u x bs %u does not fit", j->name,
			   j->qd, j->bs);
	if (j->max_ticks || !j->random)
		return;
	if (n > perm_cap) {
		perm = dma_alloc(n * 4, 64);
		if (!perm)
			probe_fail("job %s: out of memory", j->name);
		perm_cap = n;
	}
	for (uint64_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t k = rand64(rng) % (i + 1);
		uint32_t t = perm[i];

		perm[i] = perm[k];
		perm[k] = t;
	}
}

static void job_submit(struct vblk *b, struct blk_job *j, struct vblk_io *io,
		       uint64_t blk)
{
	uint64_t off = j->off + blk * j->bs;

	if (j->type == VIRTIO_BLK_T_OUT)
		pattern_fill(io->user, off, j->bs, j->seed);
	vblk_io_init(io, j->type, off / 512, io->user, j->bs);
	if (vblk_submit(b, io) < 0)
		probe_fail("job %s: submit failed", j->name);
}

static void job_complete(struct blk_job *j, struct vblk_io *io)
{
	uint64_t off = io->sector * 512;
	size_t bad;

	lat_add(&j->lat, io->t_done - io->t_submit);
	if (io->status != VIRTIO_BLK_S_OK)
		probe_fail("job %s: %s at sector %lu got %s", j->name,
			   j->type == VIRTIO_BLK_T_IN ? "read" : "write",
			   io->sector, blk_status_name(io->status));
	if (!j->verify || j->type != VIRTIO_BLK_T_IN)
		return;
	bad = pattern_check(io->user, off, j->bs, j->seed);
	if (bad != j->bs)
		probe_fail("job %s: data mismatch at disk offset %lu", j->name,
			   off + bad);
}

void blk_job_run(struct vblk *b, struct blk_job *j)
{
	uint64_t n = j->len / j->bs, issued = 0, done = 0, rng = j->seed + 1;
	struct vblk_io *idle[VBLK_MAX_QD], *io;
	unsigned int nidle = 0;
	uint64_t t0, deadline;
	bool stop = false;

	job_prepare(b, j, n, &rng);
	for (unsigned int i = 0; i < j->qd; i++) {
		ios[i].user = pool + (uint64_t)i * j->bs;
		idle[nidle++] = &ios[i];
	}
	lat_init(&j->lat, lat_buf, lat_cap);
	t0 = rdtsc();
	deadline = t0 + j->max_ticks;
	/* Keep qd in flight: fill, then refill as completions come back. */
	for (;;) {
		while (!stop && nidle && (j->max_ticks || issued < n))
			job_submit(b, j, idle[--nidle],
				   job_block(j, n, issued++, &rng));
		vblk_kick(b);
		if (done == issued)
			break;
		for (io = vblk_wait(b); io; io = vblk_reap(b)) {
			job_complete(j, io);
			done++;
			idle[nidle++] = io;
		}
		if (j->max_ticks && rdtsc() >= deadline)
			stop = true;
	}
	j->ticks = rdtsc() - t0;
	j->ios = done;
	j->bytes = done * j->bs;
}

void blk_job_report(struct blk_job *j)
{
	job_report(j->name, j->ticks, j->ios, j->bytes, &j->lat);
}
