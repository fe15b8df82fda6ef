/* A device's own wakeup for its queue threads (stop, task management).
 * The transport never signals a queue thread through the guest's kick
 * eventfd: under vhost-user that fd belongs to the client, which can drain
 * it between our write and the thread's poll, and the wakeup vanishes. */
#ifndef IOVM_VIRTIO_QWAKE_H
#define IOVM_VIRTIO_QWAKE_H

#include <stdbool.h>

struct qwake {
	int fd;		/* eventfd, non-blocking */
	bool armed;	/* watched by the owner's loop (vqworker) */
};

/* Returns 0 or -errno. */
int qwake_open(struct qwake *w);
void qwake_close(struct qwake *w);

/* From any thread: wake the owner. who names it in the warning if the
 * write fails. */
void qwake_signal(struct qwake *w, const char *who);

#endif
