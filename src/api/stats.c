/* The control socket's statistics commands: query-stats (JSON) and metrics
 * (Prometheus text in a string); api/metrics.c builds both. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/metrics.h"
#include "api/stats.h"

/* The share named name ("share0"), or given by its path or tag. */
static struct api_share *find_share(struct api_objects *o, const char *name)
{
	for (unsigned int i = 0; i < o->nshares; i++) {
		const struct share_cfg *c = o->shares[i].cfg;

		if (!strcmp(o->shares[i].name, name) ||
		    (c && c->path && !strcmp(c->path, name)) ||
		    (c && c->tag && !strcmp(c->tag, name)))
			return &o->shares[i];
	}
	return NULL;
}

static int query_stats(void *opaque, struct api_req *req)
{
	static const char *const args[] = { "disk", "share", NULL };
	struct api_objects *o = opaque;
	const char *dname = NULL, *sname = NULL;
	struct api_disk *d = NULL;
	struct api_share *s = NULL;

	if (api_args_only(req, args) ||
	    api_arg_str(req, "disk", false, &dname) < 0 ||
	    api_arg_str(req, "share", false, &sname) < 0)
		return -1;
	if (dname && !(d = api_find_disk(o, dname)))
		return api_error(req, API_ERR_DEVICE, "no disk '%s'", dname);
	if (sname && !(s = find_share(o, sname)))
		return api_error(req, API_ERR_DEVICE, "no share '%s'", sname);
	req->ret = api_stats_json(o, d, s);
	if (!req->ret)
		return api_error(req, API_ERR_GENERIC, "out of memory");
	return 0;
}

static int metrics(void *opaque, struct api_req *req)
{
	static const char *const args[] = { NULL };
	struct api_objects *o = opaque;
	struct json_object *t;
	size_t len;
	char *text;

	if (api_args_only(req, args))
		return -1;
	text = api_metrics_text(o, &len);
	req->ret = json_object_new_object();
	t = text ? json_object_new_string_len(text, (int)len) : NULL;
	free(text);
	if (!req->ret || !t || json_object_object_add(req->ret, "text", t)) {
		json_object_put(t);
		json_object_put(req->ret);
		req->ret = NULL;
		return api_error(req, API_ERR_GENERIC, "out of memory");
	}
	return 0;
}

int api_add_stats(struct api_server *s, struct api_objects *o)
{
	int ret = api_register(s, "query-stats", query_stats, o,
		     "per disk and queue: operations, bytes, errors, in flight, latency histograms and percentiles; per share: 9P counters");
	return ret ? ret : api_register(s, "metrics", metrics, o,
		"the statistics in Prometheus text exposition format 0.0.4");
}
