/* The control socket's core commands: what the process is (version,
 * status, commands), what it serves (disks, shares), and its lifecycle
 * (shutdown, and pause/resume of iovm run's vCPUs). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/start.h"
#include "block/backend.h"
#include "lib/clock.h"

struct core {
	struct api_server *s;
	struct api_objects *o;
	uint64_t start_ns;
	atomic_bool shutting_down;
};

static const char *const no_args[] = { NULL };

static int add_str(struct json_object *j, const char *key, const char *v)
{
	return json_object_object_add(j, key, v ? json_object_new_string(v) : NULL);
}

static int add_u64(struct json_object *j, const char *key, uint64_t v)
{
	return json_object_object_add(j, key, json_object_new_uint64(v));
}

static int add_bool(struct json_object *j, const char *key, bool v)
{
	return json_object_object_add(j, key, json_object_new_boolean(v));
}

/* A reply object, or an error for want of memory. */
static struct json_object *new_obj(struct api_req *req)
{
	struct json_object *j = json_object_new_object();

	if (!j)
		api_error(req, API_ERR_GENERIC, "out of memory");
	return j;
}

static int query_version(void *opaque, struct api_req *req)
{
	unsigned int major = 0, minor = 0, micro = 0;
	struct json_object *j;

	if (api_args_only(req, no_args) || !(j = new_obj(req)))
		return -1;
	sscanf(IOVM_VERSION, "%u.%u.%u", &major, &minor, &micro);
	add_str(j, "version", IOVM_VERSION);
	add_u64(j, "major", major);
	add_u64(j, "minor", minor);
	add_u64(j, "micro", micro);
	add_str(j, "package", "iovm");
	req->ret = j;
	return 0;
}

static const char *status_of(struct core *c)
{
	if (atomic_load(&c->shutting_down))
		return "shutting-down";
	if (c->o->paused && c->o->paused(c->o->owner))
		return "paused";
	return "running";
}

static int query_status(void *opaque, struct api_req *req)
{
	struct core *c = opaque;
	struct json_object *j;
	const char *st;

	if (api_args_only(req, no_args) || !(j = new_obj(req)))
		return -1;
	st = status_of(c);
	add_str(j, "status", st);
	add_bool(j, "running", st[0] == 'r');
	add_str(j, "command", c->o->command);
	add_u64(j, "pid", getpid());
	add_u64(j, "uptime-ms", (mono_ns() - c->start_ns) / 1000000);
	req->ret = j;
	return 0;
}

/* A reply that is an array of n objects, each filled by fill. */
static int reply_array(struct core *c, struct api_req *req, unsigned int n,
		       void (*fill)(struct core *c, unsigned int i, struct json_object *j))
{
	struct json_object *a;

	if (api_args_only(req, no_args))
		return -1;
	a = json_object_new_array();
	if (!a)
		return api_error(req, API_ERR_GENERIC, "out of memory");
	for (unsigned int i = 0; i < n; i++) {
		struct json_object *j = json_object_new_object();

		fill(c, i, j);
		json_object_array_add(a, j);
	}
	req->ret = a;
	return 0;
}

static void fill_command(struct core *c, unsigned int i, struct json_object *j)
{
	const char *name = NULL, *summary = NULL;

	api_command_at(c->s, i, &name, &summary);
	add_str(j, "name", name);
	add_str(j, "summary", summary);
}

static int query_commands(void *opaque, struct api_req *req)
{
	struct core *c = opaque;
	const char *name, *summary;
	unsigned int n = 0;

	while (!api_command_at(c->s, n, &name, &summary))
		n++;
	return reply_array(c, req, n, fill_command);
}

static const char *cache_name(enum cache_mode m)
{
	return m == CACHE_WRITEBACK ? "writeback" : "none";
}

static void fill_disk(struct core *c, unsigned int i, struct json_object *j)
{
	const struct api_disk *d = &c->o->disks[i];

	add_str(j, "name", d->name);
	add_str(j, "path", d->cfg->path);
	add_str(j, "interface", d->iface);
	/* The size moves under resize: read it whole, as the device's
	 * threads do. */
	if (d->be)
		add_u64(j, "size", __atomic_load_n(&d->be->size, __ATOMIC_RELAXED));
	add_bool(j, "read-only", d->be ? d->be->ro : d->cfg->ro);
	add_str(j, "cache", cache_name(d->cfg->cache));
	add_u64(j, "queues", d->queues);
}

static int query_disks(void *opaque, struct api_req *req)
{
	struct core *c = opaque;

	return reply_array(c, req, c->o->ndisks, fill_disk);
}

static const char *security_name(enum share_security s)
{
	switch (s) {
	case SHARE_SEC_NONE: return "none";
	case SHARE_SEC_PASSTHROUGH: return "passthrough";
	case SHARE_SEC_MAPPED_XATTR: break;
	}
	return "mapped-xattr";
}

static void fill_share(struct core *c, unsigned int i, struct json_object *j)
{
	const struct api_share *sh = &c->o->shares[i];

	add_str(j, "name", sh->name);
	add_str(j, "path", sh->cfg->path);
	add_str(j, "tag", sh->cfg->tag);
	add_bool(j, "read-only", sh->cfg->ro);
	add_u64(j, "msize", sh->cfg->msize);
	add_str(j, "security", security_name(sh->cfg->security));
}

static int query_shares(void *opaque, struct api_req *req)
{
	struct core *c = opaque;

	return reply_array(c, req, c->o->nshares, fill_share);
}

/* After the reply: the command's own graceful stop. */
static void do_shutdown(void *opaque)
{
	struct core *c = opaque;
	int ret = c->o->shutdown(c->o->owner);

	if (ret)
		atomic_store(&c->shutting_down, false);
}

static int cmd_shutdown(void *opaque, struct api_req *req)
{
	struct core *c = opaque;

	if (api_args_only(req, no_args))
		return -1;
	if (!c->o->shutdown)
		return api_error(req, API_ERR_GENERIC, "iovm %s cannot shut down from here",
				 c->o->command);
	atomic_store(&c->shutting_down, true);
	req->after = do_shutdown;
	req->after_opaque = c;
	return 0;
}

static int pause_resume(struct core *c, struct api_req *req, int (*fn)(void *owner),
			const char *what)
{
	int ret;

	if (api_args_only(req, no_args))
		return -1;
	if (!fn)
		return api_error(req, API_ERR_GENERIC,
				 "iovm %s has no vCPUs to %s (only iovm run has)",
				 c->o->command, what);
	if (atomic_load(&c->shutting_down))
		return api_error(req, API_ERR_GENERIC, "shutting down");
	ret = fn(c->o->owner);
	if (ret == -ESHUTDOWN)
		return api_error(req, API_ERR_GENERIC, "the VM is stopping");
	if (ret)
		return api_error(req, API_ERR_GENERIC, "cannot %s the vCPUs: %s", what,
				 strerror(-ret));
	return 0;
}

static int cmd_pause(void *opaque, struct api_req *req)
{
	struct core *c = opaque;

	return pause_resume(c, req, c->o->pause, "pause");
}

static int cmd_resume(void *opaque, struct api_req *req)
{
	struct core *c = opaque;

	return pause_resume(c, req, c->o->resume, "resume");
}

int api_add_core(struct api_server *s, struct api_objects *o)
{
	static const struct {
		const char *name;
		api_fn fn;
		const char *summary;
	} cmds[] = {
		{ "query-version", query_version, "iovm's version" },
		{ "query-status", query_status,
		  "running, paused or shutting-down; the command, pid and uptime" },
		{ "query-commands", query_commands, "the commands this socket takes" },
		{ "query-disks", query_disks,
		  "each disk: name, path, interface, size, read-only, cache, queues" },
		{ "query-shares", query_shares,
		  "each shared folder: name, path, tag, read-only, msize, security" },
		{ "shutdown", cmd_shutdown,
		  "finish in-flight I/O, flush the disks and exit, as SIGTERM does" },
		{ "pause", cmd_pause, "stop the vCPUs (iovm run)" },
		{ "resume", cmd_resume, "restart the vCPUs (iovm run)" },
	};
	struct core *c = api_alloc(s, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->s = s;
	c->o = o;
	c->start_ns = mono_ns();
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		ret = api_register(s, cmds[i].name, cmds[i].fn, c, cmds[i].summary);
		if (ret)
			return ret;
	}
	return 0;
}
