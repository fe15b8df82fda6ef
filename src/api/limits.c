/* set-limits and query-limits: a disk's I/O limits (block/throttle.h)
 * through the control socket. The handlers run on the API thread and
 * change the limits only through blk_set_limits, which the disk's queues
 * see at once. */
#include <errno.h>
#include <string.h>

#include "api/limits.h"
#include "block/backend.h"
#include "block/throttle.h"

/* One disk's limits as the API shows them: every rate and its burst in
 * effect (the default when none was set; 0 for no limit), and the
 * requests held now. */
static struct json_object *limits_json(struct api_disk *d)
{
	struct json_object *o = json_object_new_object();
	struct disk_limits l;
	unsigned int held;

	if (!o)
		return NULL;
	blk_get_limits(d->be, &l, &held);
	json_object_object_add(o, "disk", json_object_new_string(d->name));
	for (unsigned int i = 0; i < LIM_N; i++) {
		json_object_object_add(o, disk_limit_names[i],
				       json_object_new_uint64(l.rate[i]));
		json_object_object_add(o, disk_limit_burst_names[i],
				       json_object_new_uint64(throttle_cap(l.rate[i], l.burst[i])));
	}
	json_object_object_add(o, "held", json_object_new_uint64(held));
	return o;
}

static struct api_disk *disk_arg(struct api_objects *o, struct api_req *req,
				 bool required)
{
	const char *name = NULL;
	struct api_disk *d;
	int ret = api_arg_str(req, "disk", required, &name);

	if (ret)
		return NULL;	/* error set, or absent (req's error clear) */
	d = api_find_disk(o, name);
	if (!d)
		api_error(req, API_ERR_DEVICE, "no disk named '%s'", name);
	return d;
}

static int out_of_memory(struct api_req *req)
{
	return api_error(req, API_ERR_GENERIC, "out of memory");
}

static int query_limits(void *opaque, struct api_req *req)
{
	static const char *const args[] = { "disk", NULL };
	struct api_objects *o = opaque;
	struct api_disk *one = NULL;
	struct json_object *arr;

	if (api_args_only(req, args))
		return -1;
	if (json_object_object_get_ex(req->args, "disk", NULL)) {
		one = disk_arg(o, req, true);
		if (!one)
			return -1;
	}
	arr = json_object_new_array();
	if (!arr)
		return out_of_memory(req);
	for (unsigned int i = 0; i < o->ndisks; i++) {
		struct json_object *e;

		if (one && one != &o->disks[i])
			continue;
		e = limits_json(&o->disks[i]);
		if (!e || json_object_array_add(arr, e)) {
			json_object_put(e);
			json_object_put(arr);
			return out_of_memory(req);
		}
	}
	req->ret = arr;
	return 0;
}

/* Members given change; a rate set to 0 drops its burst too unless the
 * request gives one (which is then an error: a burst of no limit). */
static int set_limits(void *opaque, struct api_req *req)
{
	static const char *args[2 * LIM_N + 2];
	struct api_objects *o = opaque;
	struct api_disk *d;
	struct disk_limits l;
	char err[160];
	int ret;

	if (!args[0]) {
		args[0] = "disk";
		for (unsigned int i = 0; i < LIM_N; i++) {
			args[1 + 2 * i] = disk_limit_names[i];
			args[2 + 2 * i] = disk_limit_burst_names[i];
		}
	}
	if (api_args_only(req, args))
		return -1;
	d = disk_arg(o, req, true);
	if (!d)
		return -1;
	blk_get_limits(d->be, &l, NULL);
	for (unsigned int i = 0; i < LIM_N; i++) {
		uint64_t v;

		ret = api_arg_u64(req, disk_limit_names[i], false, &v);
		if (ret < 0)
			return -1;
		if (!ret) {
			l.rate[i] = v;
			if (!v)
				l.burst[i] = 0;
		}
		ret = api_arg_u64(req, disk_limit_burst_names[i], false, &v);
		if (ret < 0)
			return -1;
		if (!ret)
			l.burst[i] = v;
	}
	if (disk_limits_check(&l, err, sizeof(err)))
		return api_error(req, API_ERR_GENERIC, "%s", err);
	ret = blk_set_limits(d->be, &l);
	if (ret)
		return api_error(req, API_ERR_GENERIC, "%s: %s", d->name,
				 strerror(-ret));
	req->ret = limits_json(d);
	return req->ret ? 0 : out_of_memory(req);
}

int api_limits_run(struct api_objects *o, const char *name,
		   struct api_req *req)
{
	if (!strcmp(name, "set-limits"))
		return set_limits(o, req);
	if (!strcmp(name, "query-limits"))
		return query_limits(o, req);
	return api_error(req, API_ERR_NOT_FOUND, "no command '%s' here", name);
}

int api_add_limits(struct api_server *s, struct api_objects *o)
{
	int ret = api_register(s, "set-limits", set_limits, o,
			       "set a disk's I/O limits (IOPS, bytes/s, bursts)");

	if (!ret)
		ret = api_register(s, "query-limits", query_limits, o,
				   "every disk's I/O limits and held requests");
	return ret;
}
