/* `iovm vhost-user-blk`: iovm's virtio-blk device served to a vhost-user
 * front-end (QEMU, Cloud Hypervisor, ...) over a UNIX socket. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "lib/log.h"
#include "vhost/server.h"
#include "virtio/blk.h"

static const char blk_help[] =
"Usage: iovm vhost-user-blk --socket PATH --disk path=FILE[,OPTIONS] [--once]\n"
"\n"
"Serves one disk as a virtio-blk device to a vhost-user front-end such as\n"
"QEMU (-chardev socket,path=PATH -device vhost-user-blk-pci,chardev=...).\n"
"The device model is the same as `iovm run`'s. The front-end's guest RAM\n"
"must be shareable (QEMU: -object memory-backend-memfd,share=on).\n"
"\n"
"iovm listens on PATH and serves one client at a time. When a client\n"
"disconnects or dies, every request it submitted is completed, the disk is\n"
"flushed (fdatasync), and iovm waits for the next client; data the guest\n"
"was told was written is never lost. A client that breaks the protocol is\n"
"disconnected with one log line naming the problem.\n"
"\n"
"Options:\n"
"  --socket PATH      UNIX socket to listen on. A stale socket at PATH is\n"
"                     replaced; any other file there is an error.\n"
"  --disk SPEC        the disk, SPEC = path=FILE[,ro][,cache=MODE][,queues=N]\n"
"                       path=FILE     raw image file or block device\n"
"                       ro            read-only: writes fail with an I/O\n"
"                                     error and the guest sees a RO disk\n"
"                       cache=none    O_DIRECT, no host page cache (default)\n"
"                       cache=writeback  through the host page cache;\n"
"                                     guest flushes become fdatasync\n"
"                       queues=N      most request queues offered, 1-64\n"
"                                     (default: one per host CPU); the\n"
"                                     front-end uses as many as it wants\n"
"  --once             exit after the first client disconnects instead of\n"
"                     waiting for another\n"
"  -v, --verbose      log every vhost-user message\n"
"  -q, --quiet        log errors only\n"
"  -h, --help         show this help\n"
"\n"
"SIGINT or SIGTERM: finish in-flight requests, flush, remove the socket,\n"
"exit 0. Exit status 1: bad option, unusable disk or socket path.\n"
"\n"
"Example:\n"
"  iovm vhost-user-blk --socket /tmp/vblk.sock --disk path=disk.img &\n"
"  qemu-system-x86_64 -object memory-backend-memfd,id=mem,size=1G,share=on \\\n"
"      -numa node,memdev=mem -chardev socket,id=c0,path=/tmp/vblk.sock \\\n"
"      -device vhost-user-blk-pci,chardev=c0 ...\n";

/* Options shared by the vhost-user commands. */
struct vhu_cmd_opts {
	const char *socket;
	bool once;
};

static unsigned int host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > VIRTIO_BLK_MAX_QUEUES ? VIRTIO_BLK_MAX_QUEUES : n;
}

static int serve(struct virtio_dev *dev, const struct vhu_cmd_opts *o)
{
	struct vhu_server *s = vhu_server_new(dev);
	int status;

	if (!s) {
		pr_err("out of memory");
		return 1;
	}
	status = vhu_server_run(s, o->socket, o->once);
	vhu_server_free(s);
	return status;
}

int cmd_vhost_user_blk(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "disk", required_argument, NULL, 'd' },
		{ "once", no_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct vhu_cmd_opts o = { 0 };
	struct disk_cfg disk = { .cache = CACHE_NONE };
	bool have_disk = false;
	struct virtio_dev *dev;
	char err[256];
	int c, status;

	optind = 1;
	while ((c = getopt_long(argc, argv, "vqh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'd':
			if (have_disk) {
				fprintf(stderr, "iovm: vhost-user-blk serves one disk; run one per disk\n");
				return 1;
			}
			if (config_parse_disk(optarg, &disk, err, sizeof(err))) {
				fprintf(stderr, "iovm: %s\n", err);
				return 1;
			}
			have_disk = true;
			break;
		case 'o':
			o.once = true;
			break;
		case 'v':
			log_threshold = LOG_DEBUG;
			break;
		case 'q':
			log_threshold = LOG_ERR;
			break;
		case 'h':
			fputs(blk_help, stdout);
			return 0;
		default:
			fprintf(stderr, "iovm: try iovm vhost-user-blk --help\n");
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "iovm: vhost-user-blk: unexpected argument '%s'\n", argv[optind]);
		return 1;
	}
	if (!o.socket || !have_disk) {
		fprintf(stderr, "iovm: vhost-user-blk needs --socket PATH and --disk path=FILE (see --help)\n");
		return 1;
	}
	if (!disk.path) {
		fprintf(stderr, "iovm: --disk: path=FILE is missing\n");
		return 1;
	}
	if (disk.iface != DISK_IF_VIRTIO_BLK) {
		fprintf(stderr, "iovm: --disk: if= does not apply to vhost-user-blk (always virtio-blk)\n");
		return 1;
	}
	dev = virtio_blk_create(&disk, host_cpus(), err, sizeof(err));
	if (!dev) {
		fprintf(stderr, "iovm: %s\n", err);
		return 1;
	}
	status = serve(dev, &o);
	dev->ops->destroy(dev);
	return status;
}
