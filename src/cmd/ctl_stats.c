/* iovm ctl stats and metrics: query-stats as an iostat -x-like table
 * (rates between two samples with --watch), the Prometheus text as is. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block/stats.h"
#include "cmd/ctl_stats.h"
#include "lib/clock.h"

static uint64_t jget(struct json_object *o, const char *a, const char *b)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, a, &v))
		return 0;
	if (b && !json_object_object_get_ex(v, b, &v))
		return 0;
	return json_object_get_uint64(v);
}

/* A kind's histogram from its JSON buckets. */
static void hist_of(struct json_object *kind, uint64_t *h)
{
	struct json_object *a;

	memset(h, 0, BLK_HIST_BUCKETS * sizeof(*h));
	if (!kind || !json_object_object_get_ex(kind, "histogram", &a))
		return;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *b = json_object_array_get_idx(a, i);

		h[blk_hist_bucket(jget(b, "lo_ns", NULL))] += jget(b, "count", NULL);
	}
}

/* One kind over the interval (or since start): operations, bytes, average
 * and p99 latency in ms. */
struct kind_row {
	double ops, bytes, avg_ms, p99_ms;
};

static struct kind_row kind_row(struct json_object *cur, struct json_object *prev,
				const char *name)
{
	struct json_object *c = NULL, *p = NULL;
	uint64_t hc[BLK_HIST_BUCKETS], hp[BLK_HIST_BUCKETS];
	struct kind_row r;
	uint64_t ops, lat;

	json_object_object_get_ex(cur, name, &c);
	if (prev)
		json_object_object_get_ex(prev, name, &p);
	ops = jget(c, "ops", NULL) - jget(p, "ops", NULL);
	lat = jget(c, "latency_sum_ns", NULL) - jget(p, "latency_sum_ns", NULL);
	hist_of(c, hc);
	hist_of(p, hp);
	for (unsigned int b = 0; b < BLK_HIST_BUCKETS; b++)
		hc[b] -= hc[b] >= hp[b] ? hp[b] : hc[b];
	r.ops = (double)ops;
	r.bytes = (double)(jget(c, "bytes", NULL) - jget(p, "bytes", NULL));
	r.avg_ms = ops ? (double)lat / (double)ops / 1e6 : 0;
	r.p99_ms = (double)blk_hist_quantile(hc, 0.99) / 1e6;
	return r;
}

static void row(FILE *out, const char *disk, const char *queue,
		struct json_object *cur, struct json_object *prev, double secs)
{
	struct kind_row r = kind_row(cur, prev, "read");
	struct kind_row w = kind_row(cur, prev, "write");
	struct kind_row f = kind_row(cur, prev, "flush");
	double div = prev && secs > 0 ? secs : 1;

	fprintf(out, "%-8s %-6s %9.1f %9.1f %8.2f %8.2f %8.3f %8.3f %8.3f %8.3f %8.1f %8.3f %6llu\n",
		disk, queue, r.ops / div, w.ops / div, r.bytes / div / 1048576,
		w.bytes / div / 1048576, r.avg_ms, r.p99_ms, w.avg_ms, w.p99_ms,
		f.ops / div, f.avg_ms,
		(unsigned long long)jget(cur, "inflight", NULL));
}

/* prev's queue entry of the same index as q, or NULL. */
static struct json_object *same_queue(struct json_object *pdisk,
				      struct json_object *q)
{
	struct json_object *a;
	uint64_t idx = jget(q, "queue", NULL);

	if (!pdisk || !json_object_object_get_ex(pdisk, "queues", &a))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(a); i++)
		if (jget(json_object_array_get_idx(a, i), "queue", NULL) == idx)
			return json_object_array_get_idx(a, i);
	return NULL;
}

static struct json_object *list(struct json_object *o, const char *name)
{
	struct json_object *a;

	return o && json_object_object_get_ex(o, name, &a) &&
	       json_object_is_type(a, json_type_array) ? a : NULL;
}

/* --json: the reply as the socket sent it, {"return": ...}, as for every
 * other command. */
static void print_reply(struct json_object *ret)
{
	struct json_object *reply = json_object_new_object();

	json_object_object_add(reply, "return", json_object_get(ret));
	printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
	json_object_put(reply);
}

void ctl_stats_table(FILE *out, struct json_object *cur,
		     struct json_object *prev, double secs)
{
	struct json_object *disks = list(cur, "disks"), *shares = list(cur, "shares");
	struct json_object *pdisks = list(prev, "disks"), *pshares = list(prev, "shares");
	bool rates = prev && secs > 0;
	double div = rates ? secs : 1;

	if (rates)
		fprintf(out, "per second over %.1f s; latencies in ms\n", secs);
	else
		fprintf(out, "since start; latencies in ms\n");
	fprintf(out, "%-8s %-6s %9s %9s %8s %8s %8s %8s %8s %8s %8s %8s %6s\n",
		"disk", "queue", rates ? "r/s" : "reads", rates ? "w/s" : "writes",
		rates ? "rMB/s" : "rMB", rates ? "wMB/s" : "wMB", "r_await",
		"r_p99", "w_await", "w_p99", rates ? "f/s" : "flushes",
		"f_await", "inflt");
	for (size_t i = 0; disks && i < json_object_array_length(disks); i++) {
		struct json_object *d = json_object_array_get_idx(disks, i), *t = NULL;
		struct json_object *pd = pdisks ? json_object_array_get_idx(pdisks, i) : NULL;
		struct json_object *pt = NULL, *qs = list(d, "queues"), *name;
		const char *dn = json_object_object_get_ex(d, "name", &name) ?
				 json_object_get_string(name) : "?";

		json_object_object_get_ex(d, "total", &t);
		if (pd)
			json_object_object_get_ex(pd, "total", &pt);
		row(out, dn, "all", t, rates ? pt : NULL, secs);
		for (size_t j = 0; qs && j < json_object_array_length(qs); j++) {
			struct json_object *q = json_object_array_get_idx(qs, j);
			char qn[16];

			snprintf(qn, sizeof(qn), "%llu",
				 (unsigned long long)jget(q, "queue", NULL));
			row(out, "", qn, q, rates ? same_queue(pd, q) : NULL, secs);
		}
	}
	if (!shares || !json_object_array_length(shares))
		return;
	fprintf(out, "%-8s %10s %8s %9s %9s %8s %8s\n", "share",
		rates ? "ops/s" : "ops", "errors", rates ? "rMB/s" : "rMB",
		rates ? "wMB/s" : "wMB", "fids", "open");
	for (size_t i = 0; i < json_object_array_length(shares); i++) {
		struct json_object *s = json_object_array_get_idx(shares, i), *ops, *name;
		struct json_object *ps = rates && pshares ?
					 json_object_array_get_idx(pshares, i) : NULL, *pops = NULL;
		double n = 0;

		if (json_object_object_get_ex(s, "ops", &ops)) {
			if (ps)
				json_object_object_get_ex(ps, "ops", &pops);
			json_object_object_foreach(ops, k, v)
				n += (double)(json_object_get_uint64(v) - jget(pops, k, NULL));
		}
		fprintf(out, "%-8s %10.1f %8llu %9.2f %9.2f %8llu %8llu\n",
			json_object_object_get_ex(s, "name", &name) ?
			json_object_get_string(name) : "?", n / div,
			(unsigned long long)(jget(s, "errors", NULL) - jget(ps, "errors", NULL)),
			(double)(jget(s, "bytes_read", NULL) - jget(ps, "bytes_read", NULL)) / div / 1048576,
			(double)(jget(s, "bytes_written", NULL) - jget(ps, "bytes_written", NULL)) / div / 1048576,
			(unsigned long long)jget(s, "fids", NULL),
			(unsigned long long)jget(s, "open_files", NULL));
	}
}

static volatile sig_atomic_t stop_watch;

static void on_stop(int sig)
{
	stop_watch = 1;
}

/* Sleeps secs unless a signal stops the watch first. */
static void nap(double secs)
{
	struct timespec ts = { .tv_sec = (time_t)secs,
			       .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9) };

	while (!stop_watch && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int ctl_stats_main(int argc, char **argv, bool json, ctl_call_fn call,
		   void *ctx)
{
	struct json_object *args = json_object_new_object(), *prev = NULL;
	double watch = 0;
	uint64_t t_prev = 0;
	char err[256];
	int ret = 0;

	for (int i = 0; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--watch") && i + 1 < argc) {
			watch = strtod(argv[++i], &end);
			if (*end || !(watch >= 0.1 && watch <= 86400)) {
				fprintf(stderr, "iovm ctl stats: --watch %s: seconds from 0.1 to 86400\n",
					argv[i]);
				json_object_put(args);
				return 2;
			}
		} else if (!strncmp(argv[i], "disk=", 5) || !strncmp(argv[i], "share=", 6)) {
			char *eq = strchr(argv[i], '=');

			*eq = 0;
			json_object_object_add(args, argv[i], json_object_new_string(eq + 1));
			*eq = '=';
		} else {
			fprintf(stderr, "iovm ctl stats: unknown argument '%s' (expected --watch N, disk=NAME, share=NAME)\n",
				argv[i]);
			json_object_put(args);
			return 2;
		}
	}
	if (watch) {
		struct sigaction sa = { .sa_handler = on_stop };

		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	do {
		struct json_object *cur = call(ctx, "query-stats", args, err, sizeof(err));
		uint64_t now = mono_ns();

		if (!cur) {
			fprintf(stderr, "iovm ctl stats: %s\n", err);
			ret = 1;
			break;
		}
		if (json)
			print_reply(cur);
		else
			ctl_stats_table(stdout, cur, prev,
					prev ? (double)(now - t_prev) / 1e9 : 0);
		if (watch && !json)
			printf("\n");
		fflush(stdout);
		json_object_put(prev);
		prev = cur;
		t_prev = now;
		if (watch)
			nap(watch);
	} while (watch && !stop_watch);
	json_object_put(prev);
	json_object_put(args);
	return ret;
}

int ctl_metrics_main(int argc, char **argv, bool json, ctl_call_fn call,
		     void *ctx)
{
	struct json_object *r, *t;
	char err[256];

	if (argc) {
		fprintf(stderr, "iovm ctl metrics: takes no arguments ('%s')\n", argv[0]);
		return 2;
	}
	r = call(ctx, "metrics", NULL, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "iovm ctl metrics: %s\n", err);
		return 1;
	}
	if (json)
		print_reply(r);
	else if (json_object_object_get_ex(r, "text", &t))
		fputs(json_object_get_string(t), stdout);
	json_object_put(r);
	return 0;
}
