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
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "virtio/9p.h"
#include "vqfuzz.h"

static char dir[] = "/tmp/iovm-fuzz-9p-XXXXXX";
static struct virtio_dev *dev[2];

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

	vqfuzz_setup();
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
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev[0])
		setup();
	vqfuzz_pair(dev, data, size);
	return 0;
}
