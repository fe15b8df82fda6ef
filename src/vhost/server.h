/* A vhost-user back-end: serves one virtio device (the same device model as
 * `iovm run`) to a vhost-user front-end (QEMU, ...) over a UNIX socket, one
 * client at a time. The device sees only guest memory, virtqueues with kick
 * and call eventfds, and config space: exactly what virtio-pci gives it. */
#ifndef IOVM_VHOST_SERVER_H
#define IOVM_VHOST_SERVER_H

#include <stdbool.h>
#include <stdint.h>

struct virtio_dev;
struct vhu_server;

/* Wraps dev (which stays owned by the caller and must outlive the
 * server). Returns NULL when out of memory or eventfds. */
struct vhu_server *vhu_server_new(struct virtio_dev *dev);
void vhu_server_free(struct vhu_server *s);

/* Serves one connected client on sock until it disconnects, breaks the
 * protocol (logged, one line) or stop_fd (-1: none) becomes readable.
 * Then stops every queue (in-flight requests complete first), flushes the
 * device, unmaps the client's memory and forgets its state, so the next
 * client starts afresh. Closes sock. Returns 0 when the client hung up,
 * -EBADMSG (or another -errno) when it was disconnected for an error,
 * -EINTR when stop_fd fired; -ETIMEDOUT when the client left a reply
 * unread in a full socket for the send timeout. */
int vhu_server_serve(struct vhu_server *s, int sock, int stop_fd);

/* How long a reply may wait for room in the socket before the client is
 * dropped as not reading (default VHU_SEND_TIMEOUT_MS); applies from the
 * next vhu_server_serve. */
#define VHU_SEND_TIMEOUT_MS 10000
void vhu_server_set_send_timeout(struct vhu_server *s, unsigned int ms);

/* Test only (--test-stop-after): on each queue with inflight tracking,
 * after n completions since the queue started, complete no more: later
 * requests stay in flight (in the inflight buffer and for the guest)
 * until the process is killed, so that a crash test kills it with
 * requests in flight by construction. 0 (the default): off. Applies from
 * the next queue start. */
void vhu_server_set_test_stop_after(struct vhu_server *s, uint64_t n);

/* Listens on a UNIX socket at path (replacing a stale socket there), or
 * with path NULL on the inherited socket fd (listening, or already
 * connected: then that one client is served), and serves clients one after
 * the other until SIGINT/SIGTERM, or after the first client with once.
 * Returns a process exit status. */
int vhu_server_run(struct vhu_server *s, const char *path, int fd, bool once);

#endif
