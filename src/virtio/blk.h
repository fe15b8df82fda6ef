/* virtio-blk device model: transport-independent (virtio-pci in `iovm run`,
 * vhost-user in `iovm vhost-user-blk`). */
#ifndef IOVM_VIRTIO_BLK_H
#define IOVM_VIRTIO_BLK_H

#include <stddef.h>

#include "config.h"
#include "virtio/virtio.h"

#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_T_GET_LIFETIME 10
#define VIRTIO_BLK_T_DISCARD 11
#define VIRTIO_BLK_T_WRITE_ZEROES 13
#define VIRTIO_BLK_T_SECURE_ERASE 14

#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2

#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_F_TOPOLOGY 10
#define VIRTIO_BLK_F_MQ 12
#define VIRTIO_BLK_F_DISCARD 13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

#define VIRTIO_BLK_WRITE_ZEROES_UNMAP 1
#define VIRTIO_BLK_ID_BYTES 20

/* Limits the device advertises (config space). */
#define VIRTIO_BLK_QUEUE_SIZE 256
#define VIRTIO_BLK_SEG_MAX 254		/* data segments per request */
#define VIRTIO_BLK_SIZE_MAX (4u << 20)	/* bytes per segment */
#define VIRTIO_BLK_MAX_DISCARD_SECTORS (1u << 22)	/* 2 GiB per request */
#define VIRTIO_BLK_MAX_QUEUES 64

/* Config space offsets (virtio 1.2, 5.2.4), little-endian fields. */
#define VIRTIO_BLK_CFG_CAPACITY 0
#define VIRTIO_BLK_CFG_SIZE_MAX 8
#define VIRTIO_BLK_CFG_SEG_MAX 12
#define VIRTIO_BLK_CFG_BLK_SIZE 20
#define VIRTIO_BLK_CFG_PHYS_EXP 24
#define VIRTIO_BLK_CFG_MIN_IO 26
#define VIRTIO_BLK_CFG_OPT_IO 28
#define VIRTIO_BLK_CFG_NUM_QUEUES 34
#define VIRTIO_BLK_CFG_MAX_DISCARD_SECTORS 36
#define VIRTIO_BLK_CFG_MAX_DISCARD_SEG 40
#define VIRTIO_BLK_CFG_DISCARD_ALIGN 44
#define VIRTIO_BLK_CFG_MAX_WZ_SECTORS 48
#define VIRTIO_BLK_CFG_MAX_WZ_SEG 52
#define VIRTIO_BLK_CFG_WZ_MAY_UNMAP 56
#define VIRTIO_BLK_CFG_LEN 60

/* Opens the disk of cfg and creates the device. cfg->queues 0 means
 * default_queues (one per vCPU, or what a vhost-user front end asks for).
 * On error returns NULL with a one-line message in err. The device owns
 * the backend; ops->destroy closes it. */
struct virtio_dev *virtio_blk_create(const struct disk_cfg *cfg,
				     unsigned int default_queues, char *err,
				     size_t errlen);

struct blk_errors;
/* The backend errors the device has seen (counted since creation). */
const struct blk_errors *virtio_blk_errors(struct virtio_dev *dev);

/* The device's disk, for the control socket's commands. */
struct blk_backend;
struct blk_backend *virtio_blk_backend(struct virtio_dev *dev);

#endif
