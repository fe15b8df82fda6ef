/* What a command shows its control socket (objects.h): its disks and
 * shares, named in the order they were given. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/objects.h"

struct api_disk *api_find_disk(struct api_objects *o, const char *name)
{
	for (unsigned int i = 0; i < o->ndisks; i++)
		if (!strcmp(o->disks[i].name, name))
			return &o->disks[i];
	/* The path exactly as given, for whoever knows the disk by it. */
	for (unsigned int i = 0; i < o->ndisks; i++)
		if (o->disks[i].cfg && o->disks[i].cfg->path &&
		    !strcmp(o->disks[i].cfg->path, name))
			return &o->disks[i];
	return NULL;
}

struct api_disk *api_add_disk(struct api_objects *o, const struct disk_cfg *cfg,
			      struct blk_backend *be, unsigned int queues)
{
	struct api_disk *d;

	if (o->ndisks == CONFIG_MAX_DISKS)
		return NULL;
	d = &o->disks[o->ndisks];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "disk%u", o->ndisks);
	d->cfg = cfg;
	d->iface = disk_if_name(cfg->iface);
	d->be = be;
	d->queues = queues;
	o->ndisks++;
	return d;
}

struct api_share *api_add_share(struct api_objects *o, const struct share_cfg *cfg,
				void *srv)
{
	struct api_share *sh;

	if (o->nshares == CONFIG_MAX_SHARES)
		return NULL;
	sh = &o->shares[o->nshares];
	memset(sh, 0, sizeof(*sh));
	snprintf(sh->name, sizeof(sh->name), "share%u", o->nshares);
	sh->cfg = cfg;
	sh->srv = srv;
	o->nshares++;
	return sh;
}

int api_shutdown_by_sigterm(void *owner)
{
	/* To the process, not this thread (which blocks every signal): the
	 * command's signalfd or handler takes it. */
	return kill(getpid(), SIGTERM) ? -errno : 0;
}
