/* Private to the vhost-user back-end: the state of the server and of its
 * queues, shared by the connection (server.c) and the message handlers
 * (features.c, memtable.c, vring.c, inflight.c, devcfg.c). Everything here
 * runs on the one thread that reads the socket (see server.c). */
#ifndef IOVM_VHOST_SERVER_INTERNAL_H
#define IOVM_VHOST_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "vhost/mem.h"
#include "vhost/proto.h"
#include "vhost/server.h"
#include "virtio/ring.h"

struct vhu_queue {
	struct virtq vq;	/* vq.last_avail persists across stop/start */
	uint64_t desc_ua, avail_ua, used_ua;	/* client user addresses */
	uint32_t num;
	bool addr_set;
	bool started;		/* a kick fd arrived since the last GET_VRING_BASE */
	bool enabled;
	bool running;		/* between queue_start and queue_stop */
	bool ran;		/* started since call_fd was set: it may
				 * have been notified */
	int kick_fd, call_fd, err_fd;
};

struct vhu_server {
	struct virtio_dev *dev;
	struct vhu_mem mem;
	struct vhu_queue *q;
	unsigned int nq;
	uint64_t features;		/* acked by SET_FEATURES */
	/* acked by SET_PROTOCOL_FEATURES; written on the socket thread with
	 * atomic stores, read by the control thread with atomic loads */
	uint64_t protocol_features;
	int sock;
	/* The front-end's BACKEND_REQ channel, -1: none. Set and closed on
	 * the socket thread under backend_lock, which the control thread
	 * (a resize's config change) takes to borrow it. */
	int backend_fd;
	pthread_mutex_t backend_lock;
	unsigned int send_timeout_ms;	/* for one reply to leave */
	uint64_t test_stop_after;	/* --test-stop-after; 0: off */
	/* The inflight buffer (SET_INFLIGHT_FD): one region per queue for
	 * the first inflight_nq queues, whose rings must have
	 * inflight_qsize entries; NULL: no tracking. */
	uint8_t *inflight_map;
	size_t inflight_len;
	uint16_t inflight_nq, inflight_qsize;
	struct virtq_inflight *inflight;	/* [inflight_nq] */
	char err[256];			/* why the current message failed */
};

/* Handler results: 0 success; VHU_NACK a refused but well-formed request
 * (REPLY_ACK answers non-zero, the connection stays); < 0 a protocol
 * violation that closes the connection. */
#define VHU_NACK 1

/* server.c: the reason for the current message's failure (in s->err),
 * and replies. vhu_fail returns ret. */
int vhu_fail(struct vhu_server *s, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int vhu_reply_sent(struct vhu_server *s, int ret);
int vhu_reply(struct vhu_server *s, const struct vhu_msg *m,
	      const void *payload, uint32_t size);

static inline void vhu_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static inline bool vhu_has_pf(const struct vhu_server *s, unsigned int bit)
{
	return s->protocol_features & (1ull << bit);
}

/* vring.c: queues, started and stopped as their configuration asks. */
void vhu_queue_reset(struct vhu_queue *q);
void vhu_stop_all(struct vhu_server *s);
int vhu_queue_sync(struct vhu_server *s, unsigned int i);
int vhu_sync_all(struct vhu_server *s);

/* features.c: all rings stopped and forgotten, backends flushed, the
 * inflight buffer and the features dropped; memory and the connection
 * stay (RESET_DEVICE, and the first step of a disconnect). */
void vhu_reset_device(struct vhu_server *s);

/* devcfg.c: tells the front-end its config space changed, when it gave
 * us a BACKEND_REQ channel (otherwise it re-reads with GET_CONFIG), and
 * with REPLY_ACK waits (bounded: VHU_CONFIG_ACK_MS) for its answer. From
 * the control thread, never the socket thread: the front-end re-reads
 * the config with a GET_CONFIG before it answers. 0 once told (and
 * acknowledged when it can be), -ENOTCONN without a channel, -ETIMEDOUT,
 * -EPROTO for a bad answer, -EIO for a refusal, or the send's -errno. */
#define VHU_CONFIG_ACK_MS 10000
int vhu_send_config_changed(struct vhu_server *s);
/* Replaces the channel (-1: closes it), on the socket thread. */
void vhu_set_backend_fd(struct vhu_server *s, int fd);

/* inflight.c */
void vhu_inflight_clear(struct vhu_server *s);

/* The message handlers, called by server.c once the message's payload
 * size, file descriptors and protocol features are checked. */
int vhu_do_get_features(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_features(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_protocol_features(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_protocol_features(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_owner(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_reset(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_mem_table(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_add_mem_reg(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_rem_mem_reg(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_max_mem_slots(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_queue_num(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_vring_num(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_vring_addr(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_vring_base(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_vring_base(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_vring_fd(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_vring_enable(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_inflight_fd(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_inflight_fd(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_get_config(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_config(struct vhu_server *s, struct vhu_msg *m);
int vhu_do_set_backend_req_fd(struct vhu_server *s, struct vhu_msg *m);

#endif
