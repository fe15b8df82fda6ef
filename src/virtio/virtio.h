/* The contract between a virtio device model (blk, scsi, 9p) and whatever
 * transport feeds it: virtio-pci inside `iovm run`, or vhost-user in the
 * standalone backends. A device sees only guest memory, its virtqueues (each
 * with a kick eventfd and a call eventfd) and its config space; it never
 * knows which transport it is on. */
#ifndef IOVM_VIRTIO_VIRTIO_H
#define IOVM_VIRTIO_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/gmem.h"

#define VIRTIO_F_RING_INDIRECT_DESC 28
#define VIRTIO_F_RING_EVENT_IDX 29
#define VIRTIO_F_VERSION_1 32

#define VIRTIO_ID_BLOCK 2
#define VIRTIO_ID_SCSI 8
#define VIRTIO_ID_9P 9

struct virtq;
struct virtio_dev;

/* The transport's side: set by the transport before the device is used. */
struct virtio_transport {
	/* The device hit a malformed ring: the transport sets
	 * DEVICE_NEEDS_RESET and tells the driver (config interrupt). */
	void (*needs_reset)(struct virtio_dev *dev);
	/* Config space changed (capacity, ...): tell the driver (virtio-pci:
	 * a config interrupt once DRIVER_OK; vhost-user: CONFIG_CHANGE_MSG
	 * to the front-end, which re-reads the config and tells its guest).
	 * Called from the control thread only, never a queue thread: it may
	 * wait a bounded time for the front-end's acknowledgement. Returns 0
	 * when the driver was told, -ENOTCONN when there is no driver to
	 * tell yet (it reads the new config when it comes), other -errno when
	 * telling it failed. */
	int (*config_changed)(struct virtio_dev *dev);
	void *opaque;
};

struct virtio_dev_ops {
	/* Reads or writes config space; offset+len is within config_len
	 * (checked by the transport). */
	void (*config_read)(struct virtio_dev *dev, uint32_t offset, void *data,
			    uint32_t len);
	void (*config_write)(struct virtio_dev *dev, uint32_t offset,
			     const void *data, uint32_t len);
	/* Driver finished feature negotiation (FEATURES_OK): guest_features
	 * is final. Returns 0, or -EINVAL to refuse the feature set. */
	int (*features_ok)(struct virtio_dev *dev);
	/* The queue is set up and enabled (DRIVER_OK, or vhost-user's
	 * SET_VRING_ENABLE/KICK): start serving it, usually on an I/O
	 * thread that waits on vq->kick_fd. */
	int (*queue_start)(struct virtio_dev *dev, unsigned int index,
			   struct virtq *vq);
	/* Stop serving the queue: wait for every request in flight to
	 * complete and be pushed to the used ring (drain), then return. After
	 * this the transport may read vq->last_avail (GET_VRING_BASE). */
	void (*queue_stop)(struct virtio_dev *dev, unsigned int index);
	/* Flush backends (shutdown, vhost-user disconnect). Optional. */
	void (*flush)(struct virtio_dev *dev);
	/* Free the device. */
	void (*destroy)(struct virtio_dev *dev);
};

struct virtio_dev {
	const char *name;		/* "virtio-blk", for logs */
	uint16_t device_id;		/* VIRTIO_ID_* */
	uint16_t num_queues;
	uint16_t max_queue_size;	/* power of two, <= 32768 */
	uint32_t config_len;
	uint64_t host_features;		/* offered, incl. VERSION_1 etc. */
	uint64_t guest_features;	/* accepted by the driver */
	const struct virtio_dev_ops *ops;
	struct virtio_transport transport;
	const struct gmem *mem;		/* guest memory, set by the transport */
	/* Config generation (virtio 1.2, 4.1.4.3): bumped by the device
	 * before and after each change of its config space (atomics), so
	 * that a driver reading a field in several accesses around a change
	 * sees the generation move and reads again. */
	uint32_t config_gen;
};

/* A device changes a config field: config_gen moves around the change. */
static inline void virtio_config_gen_bump(struct virtio_dev *dev)
{
	__atomic_add_fetch(&dev->config_gen, 1, __ATOMIC_SEQ_CST);
}

static inline bool virtio_has_feature(const struct virtio_dev *dev,
				      unsigned int bit)
{
	return dev->guest_features & (1ull << bit);
}

#endif
