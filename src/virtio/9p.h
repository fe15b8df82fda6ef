/* virtio-9p device model: a 9P2000.L share (src/p9/) on one request
 * queue, transport-independent like the other virtio devices. */
#ifndef IOVM_VIRTIO_9P_H
#define IOVM_VIRTIO_9P_H

#include <stddef.h>

#include "config.h"
#include "virtio/virtio.h"

#define VIRTIO_9P_F_MOUNT_TAG 0
#define VIRTIO_9P_QUEUE_SIZE 128
/* Segments one request may have: Linux uses up to 128 scatter-gather
 * entries per direction; a few more for descriptors that cross a guest RAM
 * region boundary. */
#define VIRTIO_9P_MAX_IOV 264
/* Threads serving one device's requests, so a slow read does not hold up
 * a getattr. */
#define VIRTIO_9P_THREADS 8
/* How long the owner may spend in one request before the standby thread
 * takes the ring over (if the owner sleeps in it rather than runs); also
 * the standby's check interval while the owner is busy (one wake-up per
 * interval, not per request). */
#define VIRTIO_9P_STALL_NS 2000000

/* Opens the share (cfg->tag is the mount tag) and creates the device. On
 * error returns NULL with a one-line message in err. */
struct virtio_dev *virtio_9p_create(const struct share_cfg *cfg, char *err,
				    size_t errlen);

/* The share's 9P server, for the control socket's commands. */
struct p9_server;
struct p9_server *virtio_9p_server(struct virtio_dev *dev);

#endif
