/* The vhost-user wire format (QEMU docs/interop/vhost-user.rst): message
 * header, request numbers, protocol feature bits and payload layouts, plus
 * reading one message (with its file descriptors) from a stream socket. */
#ifndef IOVM_VHOST_PROTO_H
#define IOVM_VHOST_PROTO_H

#include <stddef.h>
#include <stdint.h>

enum vhu_request {
	VHU_GET_FEATURES = 1,
	VHU_SET_FEATURES = 2,
	VHU_SET_OWNER = 3,
	VHU_RESET_OWNER = 4,
	VHU_SET_MEM_TABLE = 5,
	VHU_SET_LOG_BASE = 6,
	VHU_SET_LOG_FD = 7,
	VHU_SET_VRING_NUM = 8,
	VHU_SET_VRING_ADDR = 9,
	VHU_SET_VRING_BASE = 10,
	VHU_GET_VRING_BASE = 11,
	VHU_SET_VRING_KICK = 12,
	VHU_SET_VRING_CALL = 13,
	VHU_SET_VRING_ERR = 14,
	VHU_GET_PROTOCOL_FEATURES = 15,
	VHU_SET_PROTOCOL_FEATURES = 16,
	VHU_GET_QUEUE_NUM = 17,
	VHU_SET_VRING_ENABLE = 18,
	VHU_SET_BACKEND_REQ_FD = 21,	/* "SET_SLAVE_REQ_FD" in older texts */
	VHU_GET_CONFIG = 24,
	VHU_SET_CONFIG = 25,
	VHU_GET_INFLIGHT_FD = 31,
	VHU_SET_INFLIGHT_FD = 32,
	VHU_RESET_DEVICE = 34,
	VHU_GET_MAX_MEM_SLOTS = 36,
	VHU_ADD_MEM_REG = 37,
	VHU_REM_MEM_REG = 38,
	VHU_REQUEST_MAX = 64,	/* exclusive bound of the dispatch table */
};

/* Header flags. */
#define VHU_VERSION 0x1u
#define VHU_VERSION_MASK 0x3u
#define VHU_FLAG_REPLY (1u << 2)
#define VHU_FLAG_NEED_REPLY (1u << 3)

/* Virtio feature bit that announces GET/SET_PROTOCOL_FEATURES. */
#define VHU_F_PROTOCOL_FEATURES 30

/* Protocol feature bits. */
#define VHU_PF_MQ 0
#define VHU_PF_REPLY_ACK 3
#define VHU_PF_BACKEND_REQ 5	/* "SLAVE_REQ" in older texts */
#define VHU_PF_CONFIG 9
#define VHU_PF_INFLIGHT_SHMFD 12
#define VHU_PF_RESET_DEVICE 13
#define VHU_PF_CONFIGURE_MEM_SLOTS 15

/* Requests from the back-end on the BACKEND_REQ channel. */
#define VHU_BACKEND_CONFIG_CHANGE_MSG 2

/* SET_VRING_KICK/CALL/ERR u64 payload. */
#define VHU_VRING_IDX_MASK 0xffu
#define VHU_VRING_NOFD (1ull << 8)

/* SET_VRING_ADDR flags: dirty logging of the used ring (migration). */
#define VHU_VRING_F_LOG (1u << 0)

/* The largest config space a GET/SET_CONFIG may carry. */
#define VHU_MAX_CONFIG 256u
/* Regions in one SET_MEM_TABLE, and fds in one message. */
#define VHU_MAX_TABLE_REGIONS 8u
#define VHU_MAX_FDS 8u

struct vhu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vhu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vhu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;		/* user addresses of the three rings */
	uint64_t used;
	uint64_t avail;
	uint64_t log;		/* guest address, for dirty logging only */
};

struct vhu_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uaddr;
	uint64_t mmap_offset;
};

struct vhu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vhu_region r[VHU_MAX_TABLE_REGIONS];
};

struct vhu_mem_single {
	uint64_t padding;
	struct vhu_region r;
};

struct vhu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t data[VHU_MAX_CONFIG];
};

/* GET/SET_INFLIGHT_FD: the inflight tracking buffer (its fd travels with
 * the reply to GET and with SET). */
struct vhu_inflight {
	uint64_t mmap_size;
	uint64_t mmap_offset;
	uint16_t num_queues;
	uint16_t queue_size;
};

#define VHU_CONFIG_HDR_SIZE offsetof(struct vhu_config, data)
#define VHU_MEM_TABLE_HDR_SIZE offsetof(struct vhu_mem_table, r)

union vhu_payload {
	uint64_t u64;
	struct vhu_vring_state state;
	struct vhu_vring_addr addr;
	struct vhu_mem_table mem;
	struct vhu_mem_single memreg;
	struct vhu_config cfg;
	struct vhu_inflight inflight;
};

/* No valid message is larger than this; anything larger is malformed. */
#define VHU_MAX_PAYLOAD sizeof(union vhu_payload)

struct vhu_msg {
	struct vhu_hdr hdr;
	union vhu_payload p;
	int fds[VHU_MAX_FDS];
	unsigned int nfds;
};

/* Reads one whole message from a stream socket, with the file descriptors
 * sent along with it. Returns 0, -ECONNRESET on a clean end of stream
 * before a message starts, -EBADMSG for a malformed frame (err says why),
 * or another -errno. On error no fd is left open. */
int vhu_msg_recv(int sock, struct vhu_msg *m, char *err, size_t errlen);

/* Sends a reply to m with this payload (flags: version + reply bit).
 * Returns 0, -EAGAIN when the socket's send timeout expired before all of
 * it left (the peer does not read), or another -errno. */
int vhu_msg_reply(int sock, const struct vhu_msg *m, const void *payload,
		  uint32_t size);

/* The same with one file descriptor sent along (fd >= 0). */
int vhu_msg_reply_fd(int sock, const struct vhu_msg *m, const void *payload,
		     uint32_t size, int fd);

/* Closes the fds still held by m (those a handler did not take). */
void vhu_msg_close_fds(struct vhu_msg *m);

/* Name of a request, for logs ("SET_MEM_TABLE"), or NULL if unknown. */
const char *vhu_request_name(uint32_t request);

#endif
