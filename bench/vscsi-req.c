/* Microbenchmark of the virtio-scsi request path without KVM: a driver
 * thread (the unit tests' test driver over fake guest RAM) keeps qd
 * commands in flight on one request queue of the real device and counts
 * completions per second. Built twice (bench/meson.build): bench-vscsi-pool
 * with the device as shipped (per-queue request pool, only the used fields
 * written) and bench-vscsi-malloc with the device compiled with
 * VSCSI_MALLOC_REQ (each request malloc'ed and zeroed whole).
 *
 * Usage: bench-vscsi-xxx [cmd=tur|read4k] [qd=N] [secs=S] [file=PATH]
 *   tur:    TEST UNIT READY, no backend I/O: the request path alone
 *   read4k: READ(10) of 4 KiB from a page-cached file (cache=writeback)
 * Prints: variant=.. cmd=.. qd=.. reqs=.. secs=.. reqs_per_s=.. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "vdriver.h"
#include "virtio/scsi.h"

#ifdef VSCSI_MALLOC_REQ
#define VARIANT "malloc+memset"
#else
#define VARIANT "pool"
#endif

#define RAM (64u << 20)
#define QSZ 256
#define RQ VIRTIO_SCSI_REQ_Q0
#define HDR (VIRTIO_SCSI_REQ_HDR + VIRTIO_SCSI_CDB_DEFAULT)
#define RESP (VIRTIO_SCSI_RESP_HDR + VIRTIO_SCSI_SENSE_DEFAULT)

struct slot {
	uint64_t hdr, resp, data;
};

static const char *arg(int argc, char **argv, const char *key, const char *def)
{
	size_t n = strlen(key);

	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], key, n) && argv[i][n] == '=')
			return argv[i] + n + 1;
	return def;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void add(struct vdriver *d, struct slot *s, bool read, int *head_of,
		int idx)
{
	struct vbuf b[3] = {
		{ s->hdr, HDR, false },
		{ s->resp, RESP, true },
		{ s->data, 4096, true },
	};
	int head = vdriver_add(d, RQ, b, read ? 3 : 2, false);

	if (head < 0) {
		fprintf(stderr, "bench: ring full\n");
		exit(1);
	}
	head_of[head] = idx;
}

int main(int argc, char **argv)
{
	const char *cmd = arg(argc, argv, "cmd", "tur");
	unsigned int qd = atoi(arg(argc, argv, "qd", "32"));
	double secs = atof(arg(argc, argv, "secs", "2"));
	const char *file = arg(argc, argv, "file", NULL);
	char path[] = "/tmp/iovm-bench-vscsi-XXXXXX", err[256];
	struct disk_cfg cfg = { .iface = DISK_IF_VIRTIO_SCSI,
				.cache = CACHE_WRITEBACK, .queues = 1 };
	const struct disk_cfg *p = &cfg;
	bool read = !strcmp(cmd, "read4k");
	static struct vdriver d;
	static int head_of[QSZ];
	struct virtio_dev *dev;
	struct slot *slots;
	uint64_t done = 0;
	double t0, t1;

	log_threshold = LOG_ERR;
	if (!qd || qd > QSZ / 3 || (!read && strcmp(cmd, "tur"))) {
		fprintf(stderr, "usage: %s [cmd=tur|read4k] [qd=1..%u] [secs=S] [file=PATH]\n",
			argv[0], QSZ / 3);
		return 2;
	}
	if (!file) {
		int fd = mkstemp(path);

		if (fd < 0 || ftruncate(fd, 64 << 20)) {
			perror("bench: temporary disk");
			return 1;
		}
		close(fd);
		file = path;
	}
	cfg.path = file;
	dev = virtio_scsi_create(&p, 1, 1, err, sizeof(err));
	if (!dev) {
		fprintf(stderr, "bench: %s\n", err);
		return 1;
	}
	if (vdriver_init(&d, RAM) || vdriver_attach(&d, dev, 0) ||
	    vdriver_queue_start(&d, RQ, QSZ)) {
		fprintf(stderr, "bench: driver setup failed\n");
		return 1;
	}
	slots = calloc(qd, sizeof(*slots));
	for (unsigned int i = 0; i < qd; i++) {
		uint8_t *h;

		slots[i].hdr = vdriver_alloc(&d, HDR);
		slots[i].resp = vdriver_alloc(&d, RESP);
		slots[i].data = vdriver_alloc(&d, 4096);
		h = vdriver_ptr(&d, slots[i].hdr, HDR);
		memset(h, 0, HDR);
		h[0] = 1;			/* target 0 lun 0 */
		h[2] = 0x40;
		if (read) {
			/* READ(10), 8 blocks at a spread of LBAs */
			uint32_t lba = (i * 8) % (64 << 11);

			h[19] = 0x28;
			h[21] = lba >> 24;
			h[22] = lba >> 16;
			h[23] = lba >> 8;
			h[24] = lba;
			h[27] = 8;
		}
	}
	/* warm the page cache and the pool */
	for (unsigned int i = 0; i < qd; i++)
		add(&d, &slots[i], read, head_of, i);
	vdriver_kick(&d, RQ);
	t0 = now();
	t1 = t0;
	for (;;) {
		uint32_t id, len;
		int n = 0;

		if (vdriver_wait_used(&d, RQ, &id, &len, 5000) != 1) {
			fprintf(stderr, "bench: no completion in 5 s\n");
			return 1;
		}
		do {
			const uint8_t *r = vdriver_ptr(&d, slots[head_of[id]].resp, RESP);

			if (r[11] || r[10]) {
				fprintf(stderr, "bench: response %u status %u\n",
					r[11], r[10]);
				return 1;
			}
			add(&d, &slots[head_of[id]], read, head_of, head_of[id]);
			n++;
		} while (vdriver_wait_used(&d, RQ, &id, &len, 0) == 1);
		vdriver_kick(&d, RQ);
		done += n;
		if ((done & 1023) < (uint64_t)n) {
			t1 = now();
			if (t1 - t0 >= secs)
				break;
		}
	}
	printf("variant=%s cmd=%s qd=%u reqs=%lu secs=%.2f reqs_per_s=%.0f\n",
	       VARIANT, cmd, qd, (unsigned long)done, t1 - t0, done / (t1 - t0));
	vdriver_destroy(&d);
	if (file == path)
		unlink(path);
	return 0;
}
