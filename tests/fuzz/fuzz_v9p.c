/* libFuzzer harness for virtio-9p: the input is guest RAM holding a ring
 * whose chains carry 9P2000.L requests, served by the real device (its
 * threads, the server) on a small temporary folder. Every chain must be
 * answered or the queue put in NEEDS_RESET; nothing may crash, hang, or
 * touch memory outside guest RAM.
 *
 * Input: [u8 queue size exponent][u8 flags][RAM bytes...]
 * flags: bit 0 event index, bit 1 read-only share. */
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "virtio/9p.h"
#include "virtio/ring.h"

#define REGION (64u << 10)

static uint8_t *ram;
static char dir[] = "/tmp/iovm-fuzz-9p-XXXXXX";
static struct virtio_dev *dev[2];
static int kick_fd, call_fd;
static int resets;

static void on_reset(struct virtio_dev *d)
{
	__atomic_fetch_add(&resets, 1, __ATOMIC_SEQ_CST);
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(p) && 0;
}

static void cleanup(void)
{
	for (int i = 0; i < 2; i++)
		dev[i]->ops->destroy(dev[i]);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	struct share_cfg cfg = { .tag = "fuzz", .msize = 65536 };
	char err[256], p[128];

	log_threshold = LOG_ERR;	/* guest warnings are expected */
	ram = aligned_alloc(4096, 2 * REGION);
	if (!mkdtemp(dir))
		abort();
	snprintf(p, sizeof(p), "%s/file", dir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	snprintf(p, sizeof(p), "%s/dir", dir);
	mkdir(p, 0755);
	cfg.path = dir;
	dev[0] = virtio_9p_create(&cfg, err, sizeof(err));
	cfg.ro = true;
	dev[1] = virtio_9p_create(&cfg, err, sizeof(err));
	if (!dev[0] || !dev[1])
		abort();
	kick_fd = eventfd(0, EFD_NONBLOCK);
	call_fd = eventfd(0, EFD_NONBLOCK);
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gmem mem;
	struct virtq vq = { 0 };
	struct virtio_dev *d;
	uint64_t v;

	if (!ram)
		setup();
	if (size < 2)
		return 0;
	d = dev[(data[1] >> 1) & 1];
	memset(ram, 0, 2 * REGION);
	memcpy(ram, data + 2, size - 2 < 2 * REGION ? size - 2 : 2 * REGION);
	mem.n = 2;
	mem.r[0] = (struct gmem_region){ 0, REGION, ram };
	mem.r[1] = (struct gmem_region){ REGION, REGION, ram + REGION };
	d->mem = &mem;
	d->transport.needs_reset = on_reset;
	d->guest_features = d->host_features;
	if (!(data[1] & 1))
		d->guest_features &= ~(1ull << VIRTIO_F_RING_EVENT_IDX);
	vq.mem = &mem;
	vq.size = 1u << (data[0] % 7);		/* 1 .. 64 */
	vq.desc_gpa = 0;
	vq.avail_gpa = 16u * vq.size;
	vq.used_gpa = (vq.avail_gpa + 6 + 2u * vq.size + 3) & ~3u;
	vq.kick_fd = kick_fd;
	vq.call_fd = call_fd;
	vq.indirect = true;
	vq.event_idx = data[1] & 1;
	if (virtq_init(&vq))
		return 0;
	resets = 0;
	if (d->ops->queue_start(d, 0, &vq))
		abort();
	/* The polling thread pops everything at start; wait until the ring
	 * is consumed (or declared broken), then stop, which drains. */
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&resets, __ATOMIC_SEQ_CST) ||
		    !virtq_avail_count(&vq))
			break;
		sched_yield();
	}
	d->ops->queue_stop(d, 0);
	while (read(kick_fd, &v, 8) == 8 || read(call_fd, &v, 8) == 8)
		;
	return 0;
}
