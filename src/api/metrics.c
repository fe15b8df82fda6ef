/* query-stats' JSON and the Prometheus text exposition of the disks' and
 * shares' statistics. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics.h"
#include "block/backend.h"
#include "block/stats.h"
#include "p9/proto.h"
#include "p9/server.h"

/* A 9P request type's name in the statistics ("walk", "read"): p9/proto.h's
 * "Twalk" without its T; NULL for a type 9P2000.L does not have. */
static const char *share_op_name(unsigned int i)
{
	const char *n = p9_type_name((uint8_t)(i << 1));

	return n[0] == 'T' ? n + 1 : NULL;
}

/* Queue indexes reported per disk (more are only in the disk's totals). */
#define API_STATS_MAX_QUEUES 64

const double api_stats_pct[API_STATS_NPCT] = { 0.5, 0.9, 0.99, 0.999 };
const char *const api_stats_pct_name[API_STATS_NPCT] = {
	"p50_ns", "p90_ns", "p99_ns", "p999_ns",
};

/* A disk's counters: the total and each queue index's. */
struct disk_snap {
	struct blk_counts total;
	struct blk_queue_snap q[API_STATS_MAX_QUEUES];
	unsigned int nq;
};

static struct disk_snap *disk_read(const struct api_disk *d)
{
	struct disk_snap *s = malloc(sizeof(*s));

	if (!s)
		return NULL;
	s->nq = blk_stats_read(d->be ? d->be->stats : NULL, &s->total, s->q,
			       API_STATS_MAX_QUEUES);
	return s;
}

/* ---- JSON ---- */

static int add_u64(struct json_object *o, const char *key, uint64_t v)
{
	struct json_object *n = json_object_new_uint64(v);

	if (!n)
		return -1;
	return json_object_object_add(o, key, n);
}

static struct json_object *hist_json(const uint64_t *hist)
{
	struct json_object *a = json_object_new_array();

	for (unsigned int b = 0; a && b < BLK_HIST_BUCKETS; b++) {
		struct json_object *e;

		if (!hist[b])
			continue;
		e = json_object_new_object();
		if (!e || add_u64(e, "lo_ns", blk_hist_lo(b)) ||
		    (b < BLK_HIST_BUCKETS - 1 && add_u64(e, "hi_ns", blk_hist_hi(b))) ||
		    add_u64(e, "count", hist[b]) || json_object_array_add(a, e)) {
			json_object_put(e);
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

static struct json_object *kind_json(const struct blk_kind_stats *k)
{
	struct json_object *o = json_object_new_object(), *h;
	uint64_t n = blk_hist_count(k->hist);
	int bad = !o;

	bad = bad || add_u64(o, "ops", n) || add_u64(o, "bytes", k->bytes) ||
	      add_u64(o, "errors", k->errors) ||
	      add_u64(o, "merged", k->merged) ||
	      add_u64(o, "latency_sum_ns", k->lat_sum_ns) ||
	      add_u64(o, "latency_avg_ns", n ? k->lat_sum_ns / n : 0);
	for (unsigned int i = 0; !bad && i < API_STATS_NPCT; i++)
		bad = add_u64(o, api_stats_pct_name[i],
			      blk_hist_quantile(k->hist, api_stats_pct[i]));
	h = bad ? NULL : hist_json(k->hist);
	if (!h || json_object_object_add(o, "histogram", h)) {
		json_object_put(h);
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* Fills o with one set of counters. */
static int counts_json(struct json_object *o, const struct blk_counts *c)
{
	uint64_t errors = 0;

	for (unsigned int k = 0; k < BLK_STAT_KINDS; k++)
		errors += c->k[k].errors;
	if (add_u64(o, "inflight", c->inflight) ||
	    add_u64(o, "max_inflight", c->max_inflight) ||
	    add_u64(o, "errors", errors))
		return -1;
	for (unsigned int k = 0; k < BLK_STAT_KINDS; k++) {
		struct json_object *ko = kind_json(&c->k[k]);

		if (!ko || json_object_object_add(o, blk_stat_kind_name(k), ko)) {
			json_object_put(ko);
			return -1;
		}
	}
	return 0;
}

static struct json_object *disk_json(const struct api_disk *d)
{
	struct json_object *o = json_object_new_object(), *t = NULL, *qs = NULL;
	struct disk_snap *s = disk_read(d);

	if (!o || !s)
		goto fail;
	if (json_object_object_add(o, "name", json_object_new_string(d->name)) ||
	    json_object_object_add(o, "path", json_object_new_string(
				   d->cfg && d->cfg->path ? d->cfg->path : "")))
		goto fail;
	t = json_object_new_object();
	if (!t || counts_json(t, &s->total))
		goto fail;
	json_object_object_add(o, "total", t);
	t = NULL;
	qs = json_object_new_array();
	if (!qs)
		goto fail;
	for (unsigned int i = 0; i < s->nq; i++) {
		struct json_object *q = json_object_new_object();

		if (!q || add_u64(q, "queue", s->q[i].qindex) ||
		    json_object_object_add(q, "live",
					   json_object_new_boolean(s->q[i].live)) ||
		    counts_json(q, &s->q[i].c) || json_object_array_add(qs, q)) {
			json_object_put(q);
			goto fail;
		}
	}
	json_object_object_add(o, "queues", qs);
	free(s);
	return o;
fail:
	json_object_put(t);
	json_object_put(qs);
	json_object_put(o);
	free(s);
	return NULL;
}

static struct json_object *share_json(const struct api_share *sh)
{
	struct json_object *o = json_object_new_object(), *ops;
	struct p9_server_stats st;
	uint64_t other = 0;

	if (!o)
		return NULL;
	memset(&st, 0, sizeof(st));
	if (sh->srv)
		p9_server_stats(sh->srv, &st);
	ops = json_object_new_object();
	for (unsigned int i = 0; ops && i < P9_STAT_TYPES; i++) {
		const char *name = share_op_name(i);

		if (!st.ops[i])
			continue;
		if (!name)
			other += st.ops[i];
		else if (add_u64(ops, name, st.ops[i]))
			goto fail;
	}
	if (!ops || (other && add_u64(ops, "other", other)) ||
	    json_object_object_add(o, "name", json_object_new_string(sh->name)) ||
	    json_object_object_add(o, "path", json_object_new_string(
				   sh->cfg && sh->cfg->path ? sh->cfg->path : "")) ||
	    json_object_object_add(o, "ops", ops))
		goto fail;
	ops = NULL;
	if (add_u64(o, "errors", st.errors) ||
	    add_u64(o, "bytes_read", st.bytes_read) ||
	    add_u64(o, "bytes_written", st.bytes_written) ||
	    add_u64(o, "fids", st.fids) || add_u64(o, "open_files", st.open))
		goto fail;
	return o;
fail:
	json_object_put(ops);
	json_object_put(o);
	return NULL;
}

struct json_object *api_stats_json(struct api_objects *o,
				   const struct api_disk *disk,
				   const struct api_share *share)
{
	struct json_object *r = json_object_new_object();
	struct json_object *ds = json_object_new_array();
	struct json_object *ss = json_object_new_array();
	bool all = !disk && !share;

	if (!r || !ds || !ss)
		goto fail;
	for (unsigned int i = 0; i < o->ndisks; i++) {
		struct json_object *d;

		if (!all && disk != &o->disks[i])
			continue;
		d = disk_json(&o->disks[i]);
		if (!d || json_object_array_add(ds, d)) {
			json_object_put(d);
			goto fail;
		}
	}
	for (unsigned int i = 0; i < o->nshares; i++) {
		struct json_object *s;

		if (!all && share != &o->shares[i])
			continue;
		s = share_json(&o->shares[i]);
		if (!s || json_object_array_add(ss, s)) {
			json_object_put(s);
			goto fail;
		}
	}
	json_object_object_add(r, "disks", ds);
	json_object_object_add(r, "shares", ss);
	return r;
fail:
	json_object_put(ds);
	json_object_put(ss);
	json_object_put(r);
	return NULL;
}

/* ---- Prometheus text exposition, version 0.0.4 ---- */

struct text {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void __attribute__((format(printf, 2, 3)))
put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap * 2 + (size_t)n + 1;
		char *b = realloc(t->buf, cap);

		if (!b) {
			t->oom = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

static void head(struct text *t, const char *name, const char *type,
		 const char *help)
{
	put(t, "# HELP iovm_%s %s\n# TYPE iovm_%s %s\n", name, help, name, type);
}

/* A disk counter of each kind, per queue index. */
typedef uint64_t (*kind_field)(const struct blk_kind_stats *k);

static uint64_t f_ops(const struct blk_kind_stats *k) { return blk_hist_count(k->hist); }
static uint64_t f_bytes(const struct blk_kind_stats *k) { return k->bytes; }
static uint64_t f_errors(const struct blk_kind_stats *k) { return k->errors; }
static uint64_t f_merged(const struct blk_kind_stats *k) { return k->merged; }

static void disk_counter(struct text *t, struct api_objects *o,
			 struct disk_snap **snaps, const char *name,
			 const char *help, kind_field f)
{
	head(t, name, "counter", help);
	for (unsigned int d = 0; d < o->ndisks; d++)
		for (unsigned int i = 0; snaps[d] && i < snaps[d]->nq; i++)
			for (unsigned int k = 0; k < BLK_STAT_KINDS; k++)
				put(t, "iovm_%s{disk=\"%s\",queue=\"%u\",op=\"%s\"} %llu\n",
				    name, o->disks[d].name, snaps[d]->q[i].qindex,
				    blk_stat_kind_name(k),
				    (unsigned long long)f(&snaps[d]->q[i].c.k[k]));
}

static void disk_gauge(struct text *t, struct api_objects *o,
		       struct disk_snap **snaps, const char *name,
		       const char *help, bool max)
{
	head(t, name, "gauge", help);
	for (unsigned int d = 0; d < o->ndisks; d++)
		for (unsigned int i = 0; snaps[d] && i < snaps[d]->nq; i++) {
			const struct blk_counts *c = &snaps[d]->q[i].c;

			put(t, "iovm_%s{disk=\"%s\",queue=\"%u\"} %llu\n", name,
			    o->disks[d].name, snaps[d]->q[i].qindex,
			    (unsigned long long)(max ? c->max_inflight : c->inflight));
		}
}

/* One bucket per power of two (every BLK_HIST_SUB-th bound of the
 * histogram: exact cumulative counts), then +Inf. */
static void disk_hist(struct text *t, const char *disk, unsigned int qi,
		      const char *op, const struct blk_kind_stats *k)
{
	uint64_t cum = k->hist[0], n = blk_hist_count(k->hist);
	unsigned int b = 1;

	for (unsigned int sh = BLK_HIST_MIN_SHIFT; sh <= BLK_HIST_MAX_SHIFT; sh++) {
		/* bucket 0 is below 2^MIN_SHIFT; buckets up to b - 1 are
		 * below 2^sh */
		for (; b < BLK_HIST_BUCKETS - 1 && blk_hist_lo(b) < (1ull << sh); b++)
			cum += k->hist[b];
		put(t, "iovm_disk_latency_seconds_bucket{disk=\"%s\",queue=\"%u\",op=\"%s\",le=\"%.10g\"} %llu\n",
		    disk, qi, op, (double)(1ull << sh) / 1e9, (unsigned long long)cum);
	}
	put(t, "iovm_disk_latency_seconds_bucket{disk=\"%s\",queue=\"%u\",op=\"%s\",le=\"+Inf\"} %llu\n",
	    disk, qi, op, (unsigned long long)n);
	put(t, "iovm_disk_latency_seconds_sum{disk=\"%s\",queue=\"%u\",op=\"%s\"} %.9f\n",
	    disk, qi, op, (double)k->lat_sum_ns / 1e9);
	put(t, "iovm_disk_latency_seconds_count{disk=\"%s\",queue=\"%u\",op=\"%s\"} %llu\n",
	    disk, qi, op, (unsigned long long)n);
}

static void disks_text(struct text *t, struct api_objects *o)
{
	struct disk_snap *snaps[CONFIG_MAX_DISKS] = { 0 };

	for (unsigned int d = 0; d < o->ndisks; d++) {
		snaps[d] = disk_read(&o->disks[d]);
		if (!snaps[d])
			t->oom = true;
	}
	disk_counter(t, o, snaps, "disk_ops_total", "Requests completed (errors included).", f_ops);
	disk_counter(t, o, snaps, "disk_bytes_total", "Bytes of the requests that succeeded.", f_bytes);
	disk_counter(t, o, snaps, "disk_errors_total", "Requests completed with an error.", f_errors);
	disk_counter(t, o, snaps, "disk_merged_total", "Requests merged into another by the device.", f_merged);
	disk_gauge(t, o, snaps, "disk_inflight", "Requests in flight now.", false);
	disk_gauge(t, o, snaps, "disk_max_inflight", "The most requests in flight at once.", true);
	head(t, "disk_latency_seconds", "histogram",
	     "Request latency, from the block queue to its completion.");
	for (unsigned int d = 0; d < o->ndisks; d++)
		for (unsigned int i = 0; snaps[d] && i < snaps[d]->nq; i++)
			for (unsigned int k = 0; k < BLK_STAT_KINDS; k++)
				disk_hist(t, o->disks[d].name, snaps[d]->q[i].qindex,
					  blk_stat_kind_name(k), &snaps[d]->q[i].c.k[k]);
	for (unsigned int d = 0; d < o->ndisks; d++)
		free(snaps[d]);
}

static void shares_text(struct text *t, struct api_objects *o)
{
	struct p9_server_stats *st = calloc(o->nshares ? o->nshares : 1, sizeof(*st));
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} f[] = {
		{ "share_errors_total", "counter", "Requests answered with Rlerror.",
		  offsetof(struct p9_server_stats, errors) },
		{ "share_read_bytes_total", "counter", "Bytes read (Rread payloads).",
		  offsetof(struct p9_server_stats, bytes_read) },
		{ "share_written_bytes_total", "counter", "Bytes written (Twrite payloads).",
		  offsetof(struct p9_server_stats, bytes_written) },
		{ "share_fids", "gauge", "Fids now, every session.",
		  offsetof(struct p9_server_stats, fids) },
		{ "share_open_files", "gauge", "Opened fids now.",
		  offsetof(struct p9_server_stats, open) },
	};

	if (!st) {
		t->oom = true;
		return;
	}
	for (unsigned int s = 0; s < o->nshares; s++)
		if (o->shares[s].srv)
			p9_server_stats(o->shares[s].srv, &st[s]);
	head(t, "share_ops_total", "counter", "9P requests answered, by message type.");
	for (unsigned int s = 0; s < o->nshares; s++)
		for (unsigned int i = 0; i < P9_STAT_TYPES; i++) {
			const char *name = share_op_name(i);

			if (name)
				put(t, "iovm_share_ops_total{share=\"%s\",op=\"%s\"} %llu\n",
				    o->shares[s].name, name,
				    (unsigned long long)st[s].ops[i]);
		}
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		head(t, f[i].name, f[i].type, f[i].help);
		for (unsigned int s = 0; s < o->nshares; s++)
			put(t, "iovm_%s{share=\"%s\"} %llu\n", f[i].name,
			    o->shares[s].name,
			    (unsigned long long)*(const uint64_t *)
				((const char *)&st[s] + f[i].off));
	}
	free(st);
}

char *api_metrics_text(struct api_objects *o, size_t *len)
{
	struct text t = { .cap = 4096 };

	t.buf = malloc(t.cap);
	if (!t.buf)
		return NULL;
	t.buf[0] = 0;
	disks_text(&t, o);
	shares_text(&t, o);
	if (t.oom) {
		free(t.buf);
		return NULL;
	}
	*len = t.len;
	return t.buf;
}
