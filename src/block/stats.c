/* Per-disk and per-queue I/O statistics: records, their retirement, the
 * histogram's buckets and percentiles, and the lock-free reader (see
 * block/stats.h for who writes what). */
#include <stdlib.h>
#include <string.h>

#include "block/stats.h"
#include "lib/log.h"

/* Which disk ids are taken. */
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ids_used[BLK_STATS_MAX_DISKS / 64];

static int id_take(void)
{
	int id = -1;

	pthread_mutex_lock(&ids_lock);
	for (unsigned int i = 0; i < BLK_STATS_MAX_DISKS / 64 && id < 0; i++) {
		if (~ids_used[i]) {
			unsigned int b = (unsigned int)__builtin_ctzll(~ids_used[i]);

			ids_used[i] |= 1ull << b;
			id = (int)(i * 64 + b);
		}
	}
	pthread_mutex_unlock(&ids_lock);
	return id;
}

static void id_give(unsigned int id)
{
	pthread_mutex_lock(&ids_lock);
	ids_used[id / 64] &= ~(1ull << (id % 64));
	pthread_mutex_unlock(&ids_lock);
}

struct blk_stats *blk_stats_new(void)
{
	struct blk_stats *d;
	int id = id_take();

	if (id < 0) {
		pr_warn_rated("statistics: more than %u disks open; the new ones are not counted",
			      BLK_STATS_MAX_DISKS);
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		id_give((unsigned int)id);
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->refs = 1;
	d->id = (unsigned int)id;
	return d;
}

void blk_stats_put(struct blk_stats *d)
{
	struct blk_qstats *r, *next;
	bool last;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	last = !--d->refs;
	pthread_mutex_unlock(&d->lock);
	if (!last)
		return;
	/* Only retired records are left: every live one holds a reference. */
	for (r = d->list; r; r = next) {
		next = r->next;
		free(r);
	}
	pthread_mutex_destroy(&d->lock);
	id_give(d->id);
	free(d);
}

struct blk_qstats *blk_qstats_attach(struct blk_qstats **slot,
				     struct blk_stats *d, unsigned int qindex)
{
	/* Aligned for the 64-bit words' single-copy atomicity. */
	struct blk_qstats *r = aligned_alloc(64, (sizeof(*r) + 63) & ~(size_t)63);

	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->disk = d;
	r->qindex = qindex;
	pthread_mutex_lock(&d->lock);
	d->refs++;
	r->next = d->list;
	d->list = r;
	pthread_mutex_unlock(&d->lock);
	*slot = r;
	return r;
}

static void kind_add(struct blk_kind_stats *dst, const struct blk_kind_stats *src)
{
	dst->bytes += src->bytes;
	dst->errors += src->errors;
	dst->merged += src->merged;
	dst->lat_sum_ns += src->lat_sum_ns;
	for (unsigned int b = 0; b < BLK_HIST_BUCKETS; b++)
		dst->hist[b] += src->hist[b];
}

void blk_counts_add(struct blk_counts *dst, const struct blk_counts *src)
{
	dst->inflight += src->inflight;
	if (src->max_inflight > dst->max_inflight)
		dst->max_inflight = src->max_inflight;
	for (unsigned int k = 0; k < BLK_STAT_KINDS; k++)
		kind_add(&dst->k[k], &src->k[k]);
}

/* Copies r's words with relaxed atomic loads. */
static void counts_load(struct blk_counts *dst, const struct blk_counts *src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *o = (uint64_t *)dst;

	for (size_t i = 0; i < sizeof(*src) / sizeof(uint64_t); i++)
		o[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

_Static_assert(sizeof(struct blk_counts) % sizeof(uint64_t) == 0,
	       "blk_counts is made of 64-bit words only");

/* A snapshot of r, consistent across its fields unless its queue kept
 * completing through every try. */
static void record_read(const struct blk_qstats *r, struct blk_counts *out)
{
	for (unsigned int i = 0; i < BLK_STATS_READ_TRIES; i++) {
		uint64_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE), s2;

		counts_load(out, &r->c);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		if (s1 == s2 && !(s1 & 1))
			return;
	}
}

void blk_qstats_retire(struct blk_qstats *r)
{
	struct blk_stats *d = r->disk;
	struct blk_qstats *old = NULL, **pp;

	pthread_mutex_lock(&d->lock);
	for (struct blk_qstats *o = d->list; o; o = o->next)
		if (o->retired && o->qindex == r->qindex)
			old = o;
	if (old) {
		/* Readers hold the lock, so old's plain updates here cannot
		 * be seen half done; r is unlinked and freed. */
		blk_counts_add(&old->c, &r->c);
		old->c.inflight = 0;
		for (pp = &d->list; *pp != r; pp = &(*pp)->next)
			;
		*pp = r->next;
	} else {
		r->retired = true;
		r->c.inflight = 0;
	}
	pthread_mutex_unlock(&d->lock);
	if (old)
		free(r);
	blk_stats_put(d);	/* r's reference */
}

static struct blk_queue_snap *snap_for(struct blk_queue_snap *per,
				       unsigned int *n, unsigned int nper,
				       unsigned int qindex)
{
	unsigned int i;

	for (i = 0; i < *n && per[i].qindex < qindex; i++)
		;
	if (i < *n && per[i].qindex == qindex)
		return &per[i];
	if (*n == nper)
		return NULL;
	memmove(&per[i + 1], &per[i], (*n - i) * sizeof(*per));
	memset(&per[i], 0, sizeof(per[i]));
	per[i].qindex = qindex;
	(*n)++;
	return &per[i];
}

unsigned int blk_stats_read(struct blk_stats *d, struct blk_counts *total,
			    struct blk_queue_snap *per, unsigned int nper)
{
	struct blk_counts *c = malloc(sizeof(*c));
	unsigned int n = 0;

	memset(total, 0, sizeof(*total));
	if (!d || !c) {
		free(c);
		return 0;
	}
	pthread_mutex_lock(&d->lock);
	for (const struct blk_qstats *r = d->list; r; r = r->next) {
		struct blk_queue_snap *p;

		record_read(r, c);
		blk_counts_add(total, c);
		p = per ? snap_for(per, &n, nper, r->qindex) : NULL;
		if (!p)
			continue;
		blk_counts_add(&p->c, c);
		if (!r->retired)
			p->live = true;
	}
	pthread_mutex_unlock(&d->lock);
	free(c);
	return n;
}

uint64_t blk_hist_lo(unsigned int b)
{
	unsigned int oct, sub;

	if (!b)
		return 0;
	if (b >= BLK_HIST_BUCKETS - 1)
		return BLK_HIST_MAX_NS;
	oct = (b - 1) / BLK_HIST_SUB + BLK_HIST_MIN_SHIFT;
	sub = (b - 1) % BLK_HIST_SUB;
	return (uint64_t)(BLK_HIST_SUB + sub) << (oct - BLK_HIST_SUB_BITS);
}

uint64_t blk_hist_hi(unsigned int b)
{
	if (b >= BLK_HIST_BUCKETS - 1)
		return UINT64_MAX;
	return blk_hist_lo(b + 1);
}

uint64_t blk_hist_count(const uint64_t *hist)
{
	uint64_t n = 0;

	for (unsigned int b = 0; b < BLK_HIST_BUCKETS; b++)
		n += hist[b];
	return n;
}

uint64_t blk_hist_quantile(const uint64_t *hist, double q)
{
	uint64_t n = blk_hist_count(hist), rank, seen = 0;

	if (!n)
		return 0;
	if (q <= 0)
		q = 1e-9;
	if (q > 1)
		q = 1;
	rank = (uint64_t)(q * (double)n);
	if ((double)rank < q * (double)n)
		rank++;		/* ceil */
	if (!rank)
		rank = 1;
	for (unsigned int b = 0; b < BLK_HIST_BUCKETS; b++) {
		uint64_t lo, hi;

		if (seen + hist[b] < rank) {
			seen += hist[b];
			continue;
		}
		lo = blk_hist_lo(b);
		if (b == BLK_HIST_BUCKETS - 1)
			return lo;
		hi = blk_hist_hi(b);
		/* The rank-th of the bucket's hist[b] values, spread evenly
		 * over [lo, hi). */
		return lo + (uint64_t)((double)(hi - lo) *
				       (double)(rank - seen) / (double)hist[b]);
	}
	return blk_hist_lo(BLK_HIST_BUCKETS - 1);
}

const char *blk_stat_kind_name(unsigned int k)
{
	static const char *const names[BLK_STAT_KINDS] = {
		[BLK_STAT_READ] = "read",
		[BLK_STAT_WRITE] = "write",
		[BLK_STAT_FLUSH] = "flush",
		[BLK_STAT_DISCARD] = "discard",
		[BLK_STAT_WRITE_ZEROES] = "write_zeroes",
	};

	return k < BLK_STAT_KINDS ? names[k] : "?";
}
