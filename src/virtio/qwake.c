/* Device-owned wakeups for virtio queue threads. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/log.h"
#include "virtio/qwake.h"

int qwake_open(struct qwake *w)
{
	w->armed = false;
	w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return w->fd < 0 ? -errno : 0;
}

void qwake_close(struct qwake *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	w->armed = false;
}

void qwake_signal(struct qwake *w, const char *who)
{
	uint64_t one = 1;

	if (write(w->fd, &one, sizeof(one)) < 0)
		pr_warn("waking %s: %s", who, strerror(errno));
}
