/* What a command (iovm run, vhost-user-blk/-scsi, 9p-serve) shows its
 * control socket: its disks and shares, by name, with the objects the API's
 * commands read and act on. Filled by the command once its devices exist,
 * before api_listen; read-only afterwards except through the calls named
 * here. */
#ifndef IOVM_API_OBJECTS_H
#define IOVM_API_OBJECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

struct blk_backend;

struct api_disk {
	char name[16];			/* "disk0", "disk1": --disk order */
	const struct disk_cfg *cfg;	/* path, ro, cache, queues as given */
	const char *iface;		/* "virtio-blk", "virtio-scsi", "lsi" */
	struct blk_backend *be;
	unsigned int queues;		/* the device's request queues */
	/* The device tells its guest the disk's new size (be->size already
	 * updated): virtio-blk a config-change interrupt, SCSI a CAPACITY
	 * DATA HAS CHANGED unit attention. NULL: the device cannot. */
	int (*resized)(void *dev, struct blk_backend *be);
	void *dev;
};

struct api_share {
	char name[16];			/* "share0": --share order */
	const struct share_cfg *cfg;
	void *srv;			/* struct p9_server */
};

struct api_objects {
	const char *command;		/* "run", "vhost-user-blk", ... */
	struct api_disk disks[CONFIG_MAX_DISKS];
	unsigned int ndisks;
	struct api_share shares[CONFIG_MAX_SHARES];
	unsigned int nshares;
	/* iovm run: stop and restart the vCPUs (NULL elsewhere); shutdown
	 * for every command: drain, flush, exit (asynchronous: returns once
	 * started). */
	int (*pause)(void *owner);
	int (*resume)(void *owner);
	bool (*paused)(void *owner);
	int (*shutdown)(void *owner);
	void *owner;
};

/* The disk named name ("disk0", or the path as given), or NULL. */
struct api_disk *api_find_disk(struct api_objects *o, const char *name);

/* Appends a disk (named "disk<N>" in call order, interface from cfg) or a
 * share ("share<N>"); the commands call these as they make their devices.
 * Returns the entry (to fill in resized/dev), or NULL when full. */
struct api_disk *api_add_disk(struct api_objects *o, const struct disk_cfg *cfg,
			      struct blk_backend *be, unsigned int queues);
struct api_share *api_add_share(struct api_objects *o, const struct share_cfg *cfg,
				void *srv);

/* A shutdown hook for commands whose SIGTERM is their graceful stop: sends
 * the process SIGTERM, so that shutdown takes exactly SIGTERM's path. */
int api_shutdown_by_sigterm(void *owner);

#endif
