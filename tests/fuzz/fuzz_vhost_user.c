/* libFuzzer harness for the vhost-user back-end: the input is a stream of
 * client messages, each sent over a real UNIX socket with 0-3 file
 * descriptors (memfds standing in for guest RAM, or eventfds), to the
 * server serving a recording fake device. The server must never crash,
 * leak fds or mappings, or touch memory outside what it mapped.
 *
 * Input records: [u8 fd spec][u16 length][length bytes of message].
 * fd spec: bits 0-1 number of fds, which are memfds (sealed), unless bit 2
 * (eventfds), bit 3 (one end of a UNIX socketpair, as UML's call fds and
 * back-end channel are) or bit 4 (an unsealable tmpfs file, as UML's and
 * QEMU's memory-backend-file guest RAM is) says otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/log.h"
#include "vhost/server.h"
#include "virtio/ring.h"
#include "virtio/virtio.h"
#include "../unit/vhost/vwire.h"

#define MAX_RECORDS 256	/* replies must fit the socket buffer */
#define RAM_SIZE (64u << 10)

struct fuzz_dev {
	struct virtio_dev dev;
	uint8_t config[16];
	bool running[4];
};

static void f_config_read(struct virtio_dev *d, uint32_t off, void *data, uint32_t len)
{
	struct fuzz_dev *f = (struct fuzz_dev *)d;

	if (off > sizeof(f->config) || len > sizeof(f->config) - off)
		abort();	/* the transport must have checked */
	memcpy(data, f->config + off, len);
}

static void f_config_write(struct virtio_dev *d, uint32_t off, const void *data,
			   uint32_t len)
{
	struct fuzz_dev *f = (struct fuzz_dev *)d;

	if (off > sizeof(f->config) || len > sizeof(f->config) - off)
		abort();
	memcpy(f->config + off, data, len);
}

static int f_features_ok(struct virtio_dev *d)
{
	return 0;
}

/* Touch the rings the transport mapped, as a real device would: any
 * translation error shows up as an ASan report here. */
static int f_queue_start(struct virtio_dev *d, unsigned int i, struct virtq *vq)
{
	struct fuzz_dev *f = (struct fuzz_dev *)d;
	struct virtq_elem elem;
	struct iovec iov[8];

	if (i >= d->num_queues || f->running[i])
		abort();
	f->running[i] = true;
	for (int n = 0; n < 4 && virtq_pop(vq, &elem, iov, 8) == 1; n++)
		virtq_push(vq, elem.head, 0);
	return 0;
}

static void f_queue_stop(struct virtio_dev *d, unsigned int i)
{
	struct fuzz_dev *f = (struct fuzz_dev *)d;

	if (!f->running[i])
		abort();
	f->running[i] = false;
}

static const struct virtio_dev_ops f_ops = {
	.config_read = f_config_read,
	.config_write = f_config_write,
	.features_ok = f_features_ok,
	.queue_start = f_queue_start,
	.queue_stop = f_queue_stop,
};

static struct fuzz_dev fdev;
static struct vhu_server *srv;
static int memfd = -1, evfd = -1, tmpfd = -1, sockfd[2] = { -1, -1 };

static void setup(void)
{
	/* Every malformed message is logged, hundreds of thousands a run:
	 * iovm's log goes to /dev/null. libFuzzer and the sanitizers write
	 * to fd 2 (or their own copy of the original stderr), unaffected. */
	FILE *null = fopen("/dev/null", "w");

	if (null)
		stderr = null;
	log_threshold = LOG_ERR;
	fdev.dev.name = "fuzz";
	fdev.dev.num_queues = 4;
	fdev.dev.max_queue_size = 256;
	fdev.dev.config_len = sizeof(fdev.config);
	fdev.dev.host_features = (1ull << VIRTIO_F_VERSION_1) |
				 (1ull << VIRTIO_F_RING_EVENT_IDX) |
				 (1ull << VIRTIO_F_RING_INDIRECT_DESC);
	fdev.dev.ops = &f_ops;
	srv = vhu_server_new(&fdev.dev);
	memfd = memfd_create("fuzz-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	evfd = eventfd(0, EFD_CLOEXEC);
	/* sealed, or the server refuses every memory table */
	if (!srv || memfd < 0 || evfd < 0 || ftruncate(memfd, RAM_SIZE) ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK))
		abort();
	/* Nobody reads sockfd[1]: notifications the server writes to
	 * sockfd[0] fill it and then meet EAGAIN, as a stalled UML would. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockfd))
		abort();
	tmpfd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmpfd < 0)
		tmpfd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmpfd < 0 || ftruncate(tmpfd, RAM_SIZE))
		abort();
}

static int spec_fd(uint8_t spec)
{
	if (spec & 4)
		return evfd;
	if (spec & 8)
		return sockfd[0];
	if (spec & 16)
		return tmpfd;
	return memfd;
}

static void send_record(int sock, const uint8_t *data, size_t len, uint8_t spec)
{
	unsigned int nfds = spec & 3;
	int fds[3];
	struct iovec iov = { (void *)data, len };

	for (unsigned int i = 0; i < nfds; i++)
		fds[i] = spec_fd(spec);
	(void)vwire_sendv(sock, &iov, 1, fds, nfds, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	unsigned int records = 0;

	if (!srv)
		setup();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	while (size >= 3 && records++ < MAX_RECORDS) {
		uint8_t spec = data[0];
		size_t len = data[1] | (size_t)data[2] << 8;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		if (len)
			send_record(sv[0], data, len, spec);
		data += len;
		size -= len;
	}
	shutdown(sv[0], SHUT_WR);
	/* Serves until the end of the stream or the first error; then the
	 * server must be back to its initial state. */
	vhu_server_serve(srv, sv[1], -1);
	for (unsigned int i = 0; i < 4; i++)
		if (fdev.running[i])
			abort();
	if (fdev.dev.mem->n)
		abort();
	close(sv[0]);
	return 0;
}
