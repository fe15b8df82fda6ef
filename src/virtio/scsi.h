/* virtio-scsi HBA: SCSI disks (src/scsi/disk.c) behind virtio queues.
 * Transport-independent: virtio-pci in `iovm run`, vhost-user in
 * `iovm vhost-user-scsi`. */
#ifndef IOVM_VIRTIO_SCSI_H
#define IOVM_VIRTIO_SCSI_H

#include <stddef.h>

#include "config.h"
#include "virtio/virtio.h"

/* Queues: control, event, then the request queues. */
#define VIRTIO_SCSI_CTRL_Q 0
#define VIRTIO_SCSI_EVENT_Q 1
#define VIRTIO_SCSI_REQ_Q0 2

#define VIRTIO_SCSI_MAX_QUEUES 64	/* request queues */
/* Largest queue: 1024 is the most a QEMU front-end can ask for
 * (vhost-user-scsi's virtqueue_size, VIRTQUEUE_MAX_SIZE); QEMU computes the
 * config the guest sees itself (seg_max = virtqueue_size - 2, max_sectors
 * its own property), so iovm must take every chain such a queue can hold.
 * A queue's pool holds one request per entry, each with 2 * REQ_MAX_IOV
 * iovecs (src/virtio/scsi.c): 32 KiB of address space per request, of
 * which a request touches only the pages its own descriptors need. */
#define VIRTIO_SCSI_QUEUE_SIZE 1024
/* Data segments per request: a chain must fit the largest queue (virtio
 * 1.2, 2.7.5.3.1) with the request header and the response beside its
 * data, as QEMU's own device has it. Linux takes seg_max as sg_tablesize;
 * with the block layer's 64 KiB segments, 1022 of them carry 63.9 MiB, so
 * a command of max_sectors is never short of segments. */
#define VIRTIO_SCSI_SEG_MAX (VIRTIO_SCSI_QUEUE_SIZE - 2)
/* 512-byte sectors per request: what the SCSI disk takes in one READ or
 * WRITE, MAX_XFER_BYTES (32 MiB, src/scsi/disk_int.h) / 512; the 65535 a
 * Linux host defaults to would refuse the 65536-block commands (32 MiB)
 * the disk accepts and libiscsi's WriteSame16.Unmap sends. */
#define VIRTIO_SCSI_MAX_SECTORS 65536
#define VIRTIO_SCSI_MAX_TARGET 15
#define VIRTIO_SCSI_MAX_LUN 255
#define VIRTIO_SCSI_CDB_DEFAULT 32
#define VIRTIO_SCSI_SENSE_DEFAULT 96
#define VIRTIO_SCSI_CDB_MAX 255		/* largest cdb_size accepted */
#define VIRTIO_SCSI_SENSE_MAX 4096	/* largest sense_size accepted */

/* Config space (virtio 1.2, 5.6.4), little-endian. */
#define VIRTIO_SCSI_CFG_NUM_QUEUES 0
#define VIRTIO_SCSI_CFG_SEG_MAX 4
#define VIRTIO_SCSI_CFG_MAX_SECTORS 8
#define VIRTIO_SCSI_CFG_CMD_PER_LUN 12
#define VIRTIO_SCSI_CFG_EVENT_INFO_SIZE 16
#define VIRTIO_SCSI_CFG_SENSE_SIZE 20	/* writable */
#define VIRTIO_SCSI_CFG_CDB_SIZE 24	/* writable */
#define VIRTIO_SCSI_CFG_MAX_CHANNEL 28
#define VIRTIO_SCSI_CFG_MAX_TARGET 30
#define VIRTIO_SCSI_CFG_MAX_LUN 32
#define VIRTIO_SCSI_CFG_LEN 36

/* Request header: lun[8], id (le64), task_attr, prio, crn, cdb[cdb_size]. */
#define VIRTIO_SCSI_REQ_HDR 19
/* Response: sense_len, residual (le32), status_qualifier (le16), status,
 * response, then sense[sense_size]. */
#define VIRTIO_SCSI_RESP_HDR 12

/* Response codes. */
#define VIRTIO_SCSI_S_OK 0
#define VIRTIO_SCSI_S_FUNCTION_COMPLETE 0
#define VIRTIO_SCSI_S_OVERRUN 1
#define VIRTIO_SCSI_S_ABORTED 2
#define VIRTIO_SCSI_S_BAD_TARGET 3
#define VIRTIO_SCSI_S_RESET 4
#define VIRTIO_SCSI_S_BUSY 5
#define VIRTIO_SCSI_S_TRANSPORT_FAILURE 6
#define VIRTIO_SCSI_S_TARGET_FAILURE 7
#define VIRTIO_SCSI_S_NEXUS_FAILURE 8
#define VIRTIO_SCSI_S_FAILURE 9
#define VIRTIO_SCSI_S_FUNCTION_SUCCEEDED 10
#define VIRTIO_SCSI_S_FUNCTION_REJECTED 11
#define VIRTIO_SCSI_S_INCORRECT_LUN 12

/* Control queue request types and TMF subtypes. */
#define VIRTIO_SCSI_T_TMF 0
#define VIRTIO_SCSI_T_AN_QUERY 1
#define VIRTIO_SCSI_T_AN_SUBSCRIBE 2

#define VIRTIO_SCSI_T_TMF_ABORT_TASK 0
#define VIRTIO_SCSI_T_TMF_ABORT_TASK_SET 1
#define VIRTIO_SCSI_T_TMF_CLEAR_ACA 2
#define VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET 3
#define VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET 4
#define VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET 5
#define VIRTIO_SCSI_T_TMF_QUERY_TASK 6
#define VIRTIO_SCSI_T_TMF_QUERY_TASK_SET 7

/* A TMF is 24 readable bytes (type, subtype, lun[8], id) and 1 writable
 * (response); AN requests are 16 readable (type, lun[8], event_requested)
 * and 5 writable (event_actual, response). */
#define VIRTIO_SCSI_TMF_REQ 24
#define VIRTIO_SCSI_AN_REQ 16
#define VIRTIO_SCSI_AN_RESP 5

/* Creates one HBA holding every disk in disks[0..n) (each with iface
 * virtio-scsi; target/lun from the config, a disk without target= takes the
 * lowest target no other disk names). Request queues: the largest queues=
 * of the disks, else default_queues (one per vCPU). Opens the backends; on
 * error returns NULL with a one-line message in err. ops->destroy closes
 * them. */
struct virtio_dev *virtio_scsi_create(const struct disk_cfg *const *disks,
				      unsigned int n,
				      unsigned int default_queues, char *err,
				      size_t errlen);

/* The i-th disk given to virtio_scsi_create (NULL past the last), for the
 * control socket's commands. */
struct blk_backend;
struct blk_backend *virtio_scsi_backend(struct virtio_dev *dev, unsigned int i);

#endif
