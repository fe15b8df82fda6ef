/* The control socket's `resize`: a disk grows (its file extended, its RBD
 * image resized, or the size its image was grown to taken) and its device
 * tells the guest: virtio-blk a config-change notification, a SCSI disk a
 * CAPACITY DATA HAS CHANGED unit attention. */
#include <errno.h>
#include <string.h>

#include "api/api.h"
#include "api/objects.h"
#include "block/backend.h"

/* Why the guest was not told, for the reply's "notice". */
static const char *untold(int ret)
{
	if (ret == -ENOTCONN)
		return "no driver is using the device yet: it reads the new size when it starts";
	if (ret == -ETIMEDOUT)
		return "the front-end did not acknowledge the config change in time";
	return strerror(-ret);
}

static int do_resize(void *opaque, struct api_req *req)
{
	static const char *const names[] = { "disk", "size", NULL };
	struct api_objects *o = opaque;
	struct api_disk *d;
	const char *name;
	uint64_t size = 0, old, now;
	char err[256];
	int ret;

	if (api_args_only(req, names) || api_arg_str(req, "disk", true, &name) < 0 ||
	    api_arg_u64(req, "size", false, &size) < 0)
		return -1;
	d = api_find_disk(o, name);
	if (!d)
		return api_error(req, API_ERR_DEVICE, "no disk named %s", name);
	if (!d->be)
		return api_error(req, API_ERR_GENERIC,
				 "%s: not open now (vhost-user-pci opens its disks for each session)",
				 d->name);
	/* Checked before anything changes: a disk the guest cannot be told
	 * about would change under it. */
	if (!d->resized)
		return api_error(req, API_ERR_GENERIC,
				 "%s: its %s device cannot tell the guest of a new size",
				 d->name, d->iface ? d->iface : "");
	old = blk_size(d->be);
	ret = blk_resize(d->be, size, err, sizeof(err));
	if (ret)
		return api_error(req, API_ERR_GENERIC, "%s: %s", d->name, err);
	now = blk_size(d->be);
	ret = now != old ? d->resized(d->dev, d->be) : 0;
	req->ret = json_object_new_object();
	json_object_object_add(req->ret, "disk", json_object_new_string(d->name));
	json_object_object_add(req->ret, "old-size", json_object_new_int64((int64_t)old));
	json_object_object_add(req->ret, "new-size", json_object_new_int64((int64_t)now));
	json_object_object_add(req->ret, "changed", json_object_new_boolean(now != old));
	json_object_object_add(req->ret, "guest-notified",
			       json_object_new_boolean(now != old && !ret));
	if (ret)
		json_object_object_add(req->ret, "notice",
				       json_object_new_string(untold(ret)));
	return 0;
}

int api_add_resize(struct api_server *s, struct api_objects *o)
{
	return api_register(s, "resize", do_resize, o,
			    "grow a disk (size: bytes; none: the size its image has now) and tell the guest");
}
