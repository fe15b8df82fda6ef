/* `iovm vhost-user-blk` and `iovm vhost-user-scsi`: iovm's virtio-blk and
 * virtio-scsi devices served to a vhost-user front-end (QEMU, Cloud
 * Hypervisor, ...) over a UNIX socket. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/objects.h"
#include "api/start.h"
#include "cmd/commands.h"
#include "cmd/vhost_opts.h"
#include "cmd/disk_help.h"
#include "config.h"
#include "lib/log.h"
#include "vhost/server.h"
#include "virtio/blk.h"
#include "virtio/scsi.h"

#define COMMON_HELP                                                              \
"iovm listens on PATH and serves one client at a time. When a client\n"         \
"disconnects or dies, every request it submitted is completed, the disks are\n" \
"flushed (fdatasync), and iovm waits for the next client; data the guest\n"     \
"was told was written is never lost. A client that breaks the protocol is\n"    \
"disconnected with one log line naming the problem. The front-end's guest\n"    \
"RAM must be shareable (QEMU: -object memory-backend-memfd,share=on, or\n"     \
"memory-backend-file,share=on; a client that truncates that file under iovm\n" \
"is disconnected). If iovm itself dies, the requests it had in flight are\n"   \
"run again by the next iovm on the same socket, for front-ends that keep the\n" \
"inflight buffer iovm hands out (QEMU's vhost-user-blk-pci does; add\n"        \
"reconnect=1 to its -chardev so that it reconnects).\n"                        \
"\n"                                                                            \
"Common options:\n"                                                             \
"  --socket PATH      UNIX socket to listen on. A stale socket at PATH is\n"    \
"                     replaced; any other file there is an error.\n"            \
"                     (--socket-path PATH is the same, as the vhost-user\n"     \
"                     back-end conventions name it.)\n"                         \
"  --fd N             serve on inherited file descriptor N instead: a\n"        \
"                     listening UNIX socket, or a connected one (one client)\n" \
"  --print-capabilities  print the vhost-user capabilities (JSON) and exit\n"   \
"  --once             exit after the first client disconnects instead of\n"     \
"                     waiting for another\n"                                    \
VHOST_API_SOCKET_HELP                                                           \
VHOST_METRICS_LISTEN_HELP                                                       \
"  --test-stop-after N  test only: after N requests completed on a queue\n"   \
"                     (since the front-end started it), complete no more;\n"   \
"                     later requests stay in flight until iovm is killed.\n"  \
"                     For crash tests of the inflight buffer\n"                \
"                     (tests/guest/vhost-user-crash.sh); never in service\n"   \
"  -v, --verbose      log every vhost-user message\n"                           \
"  -q, --quiet        log errors only\n"                                        \
"  -h, --help         show this help\n"                                         \
"\n"                                                                            \
"Disk options (in --disk, comma-separated):\n"                                  \
"  path=FILE          raw image file or block device, or a network disk\n"   \
"                     (below) (required)\n"                                    \
"  ro                 read-only: the guest sees a write-protected disk and\n"   \
"                     writes fail\n"                                            \
"  cache=none         O_DIRECT, no host page cache (default)\n"                \
"  cache=writeback    through the host page cache; guest flushes become\n"      \
"                     fdatasync\n"                                              \
"  queues=N           most request queues offered, 1-64 (default: one per\n"    \
"                     host CPU); the front-end uses as many as it wants\n"     \
"  poll-us=N          how long a queue's thread busy-polls for the next\n"     \
"                     request or completion before it sleeps, 0-10000\n"       \
"                     microseconds (default 50; 0 never polls). Polling\n"     \
"                     saves a wakeup and the front-end's notification per\n"   \
"                     request at low queue depth, for up to one host CPU\n"    \
"                     per queue while the guest does I/O. Unless given, a\n"   \
"                     network disk's queues never poll for a completion at\n" \
"                     low depth and at most 10 us for the next request\n"

#define HELP_TAIL                                                                \
"\n"                                                                            \
LIMITS_HELP                                                                      \
"\n"                                                                            \
NETDISK_HELP                                                                     \
"\n"                                                                            \
"SIGINT or SIGTERM: finish in-flight requests, flush, remove the socket,\n"     \
"exit 0. Exit status 1: bad option, unusable disk or socket path.\n"

static const char blk_help[] =
"Usage: iovm vhost-user-blk --socket PATH --disk path=FILE[,OPTIONS] [--once]\n"
"       iovm vhost-user-blk --socket-path=PATH --blk-file=FILE [--read-only]\n"
"\n"
"Serves one disk as a virtio-blk device to a vhost-user front-end such as\n"
"QEMU (-device vhost-user-blk-pci). The device model is the same as\n"
"`iovm run`'s.\n"
"\n"
COMMON_HELP
"\n"
"vhost-user-blk back-end conventions (for management tools such as libvirt):\n"
"  --blk-file FILE    the disk, as --disk path=FILE\n"
"  --read-only        the disk is read-only, as --disk ...,ro\n"
HELP_TAIL
"\n"
"Example:\n"
"  iovm vhost-user-blk --socket /tmp/vblk.sock --disk path=disk.img &\n"
"  qemu-system-x86_64 -object memory-backend-memfd,id=mem,size=1G,share=on \\\n"
"      -numa node,memdev=mem -chardev socket,id=c0,path=/tmp/vblk.sock \\\n"
"      -device vhost-user-blk-pci,chardev=c0 ...\n";

static const char scsi_help[] =
"Usage: iovm vhost-user-scsi --socket PATH --disk path=FILE[,OPTIONS]... [--once]\n"
"\n"
"Serves a virtio-scsi HBA with one SCSI disk per --disk (up to 16) to a\n"
"vhost-user front-end such as QEMU (-device vhost-user-scsi-pci). The HBA\n"
"and disk models are the same as `iovm run`'s if=virtio-scsi.\n"
"\n"
COMMON_HELP
"  target=N           SCSI target id, 0-15 (default: the lowest that no\n"
"                     other disk names)\n"
"  lun=M              logical unit number, 0-255 (default 0)\n"
"  pr-state=FILE      where the disk's persistent reservations (and\n"
"                     RESERVE(6)) live, shared by every iovm process on the\n"
"                     image: guest clusters on one shared disk see each\n"
"                     other's reservations. Default: FILE.pr beside the\n"
"                     image, made when a guest first registers (if it cannot\n"
"                     be made: this process only, with a warning); an\n"
"                     explicit FILE is made at start (an error if it cannot\n"
"                     be). none: this process only\n"
"  pr-id=NAME         this back-end's I_T nexus: 1-127 printable characters,\n"
"                     the iSCSI name of its TransportID in READ FULL STATUS\n"
"                     (default HOSTNAME:SOCKET, stable across restarts, so a\n"
"                     restarted back-end finds registrations APTPL kept)\n"
"The HBA takes the largest queues= and poll-us= its disks give.\n"
HELP_TAIL
"\n"
"Example:\n"
"  iovm vhost-user-scsi --socket /tmp/vscsi.sock --disk path=a.img \\\n"
"      --disk path=b.img,target=0,lun=1 &\n"
"  qemu-system-x86_64 -object memory-backend-memfd,id=mem,size=1G,share=on \\\n"
"      -numa node,memdev=mem -chardev socket,id=c0,path=/tmp/vscsi.sock \\\n"
"      -device vhost-user-scsi-pci,chardev=c0 ...\n";

struct vhu_cmd {
	const char *name;		/* "vhost-user-blk" */
	const char *help;
	enum disk_if iface;
	unsigned int max_disks;
	struct vhost_opts o;
	bool read_only;		/* --read-only */
	uint64_t test_stop_after;	/* --test-stop-after; 0: off */
	struct disk_cfg disks[CONFIG_MAX_DISKS];
	unsigned int ndisks;
};

static unsigned int host_cpus(unsigned int max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return (unsigned long)n > max ? max : (unsigned int)n;
}

/* --disk for this command's interface: a SCSI disk spec is parsed as if it
 * said if=virtio-scsi, so that target= and lun= are accepted. */
static int parse_disk(struct vhu_cmd *c, const char *arg)
{
	char err[256], *spec;
	struct disk_cfg *d;
	int ret;

	if (c->ndisks == c->max_disks) {
		if (c->max_disks == 1)
			fprintf(stderr, "iovm: %s serves one disk; run one per disk\n", c->name);
		else
			fprintf(stderr, "iovm: %s: at most %u disks\n", c->name, c->max_disks);
		return -1;
	}
	d = &c->disks[c->ndisks];
	if (c->iface == DISK_IF_VIRTIO_SCSI) {
		bool bare = !strchr(arg, '=') && !strchr(arg, ',');

		if (asprintf(&spec, "if=virtio-scsi,%s%s", bare ? "path=" : "", arg) < 0)
			return -1;
	} else {
		spec = strdup(arg);
		if (!spec)
			return -1;
	}
	err[0] = 0;
	ret = config_parse_disk(spec, d, err, sizeof(err));
	free(spec);
	if (ret) {
		fprintf(stderr, "iovm: %s\n", err);
		config_free_disk(d);
		return -1;
	}
	if (d->iface != c->iface) {
		fprintf(stderr, "iovm: --disk: if=%s does not apply to %s\n",
			disk_if_name(d->iface), c->name);
		config_free_disk(d);
		return -1;
	}
	c->ndisks++;
	return 0;
}

/* Parses the command line; returns -1 to exit 1, 1 to exit 0 (--help),
 * 0 to go on. */
static int parse_args(struct vhu_cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-path", required_argument, NULL, 's' },
		{ "fd", required_argument, NULL, 'f' },
		{ "print-capabilities", no_argument, NULL, 'c' },
		{ "blk-file", required_argument, NULL, 'b' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "disk", required_argument, NULL, 'd' },
		{ "once", no_argument, NULL, 'o' },
		{ "api-socket", required_argument, NULL, VHOST_OPT_API_SOCKET },
		{ "metrics-listen", required_argument, NULL, VHOST_OPT_METRICS_LISTEN },
		{ "test-stop-after", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int opt;

	optind = 1;
	opterr = 0;	/* our own one-line messages below */
	while ((opt = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if (parse_disk(c, optarg))
				return -1;
			break;
		case 't': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || errno || !v) {
				fprintf(stderr, "iovm: %s: --test-stop-after wants a request "
					"count of at least 1, got '%s'\n", c->name, optarg);
				return -1;
			}
			c->test_stop_after = v;
			break;
		}
		case 'c':
			/* The vhost-user.json schema: "block" with the two
			 * conventional options we take, or "scsi". */
			if (c->iface == DISK_IF_VIRTIO_BLK)
				printf("{\n  \"type\": \"block\",\n"
				       "  \"features\": [\n    \"read-only\",\n    \"blk-file\"\n  ]\n}\n");
			else
				printf("{\n  \"type\": \"scsi\",\n  \"features\": []\n}\n");
			return 1;
		case 'b':
			if (c->iface != DISK_IF_VIRTIO_BLK) {
				fprintf(stderr, "iovm: --blk-file is a vhost-user-blk option; use --disk\n");
				return -1;
			}
			if (c->ndisks) {
				fprintf(stderr, "iovm: %s serves one disk; run one per disk\n", c->name);
				return -1;
			}
			memset(&c->disks[0], 0, sizeof(c->disks[0]));
			c->disks[0].path = strdup(optarg);
			if (!c->disks[0].path)
				return -1;
			c->disks[0].iface = DISK_IF_VIRTIO_BLK;
			c->disks[0].cache = CACHE_NONE;
			c->ndisks = 1;
			break;
		case 'r':
			if (c->iface != DISK_IF_VIRTIO_BLK) {
				fprintf(stderr, "iovm: --read-only is a vhost-user-blk option; use --disk ...,ro\n");
				return -1;
			}
			c->read_only = true;
			break;
		case 'h':
			fputs(c->help, stdout);
			return 1;
		default:
			if (vhost_opt(&c->o, c->name, opt, optarg, argv))
				return -1;
			break;
		}
	}
	if (vhost_opts_check(&c->o, c->name, argc, argv))
		return -1;
	if ((!c->o.socket && c->o.fd < 0) || !c->ndisks) {
		fprintf(stderr, "iovm: %s needs --socket PATH (or --fd N) and --disk path=FILE (see --help)\n",
			c->name);
		return -1;
	}
	if (c->read_only)
		c->disks[0].ro = true;
	return 0;
}

/* config_parse_disk strdup()s the paths; freed once the device is gone. */
static void free_disks(struct vhu_cmd *c)
{
	for (unsigned int i = 0; i < c->ndisks; i++)
		config_free_disk(&c->disks[i]);
	c->ndisks = 0;
}

/* The disks as the control socket shows them, in --disk order. */
static void show_disks(struct vhu_cmd *c, struct virtio_dev *dev, struct api_objects *objs)
{
	struct api_disk *d;

	objs->command = c->name;
	for (unsigned int i = 0; i < c->ndisks; i++) {
		if (c->iface == DISK_IF_VIRTIO_BLK)
			d = api_add_disk(objs, &c->disks[i], virtio_blk_backend(dev),
					 dev->num_queues);
		else
			d = api_add_disk(objs, &c->disks[i], virtio_scsi_backend(dev, i),
					 dev->num_queues - VIRTIO_SCSI_REQ_Q0);
		if (!d)
			continue;
		d->dev = dev;
		d->resized = c->iface == DISK_IF_VIRTIO_BLK ? virtio_blk_resized :
							       virtio_scsi_resized;
	}
}

static int serve(struct vhu_cmd *c, struct virtio_dev *dev)
{
	/* Static: sized for every disk, read by the API thread until
	 * api_free. */
	static struct api_objects objs;
	struct vhu_server *s = vhu_server_new(dev);
	struct api_server *api = NULL;
	int status;

	if (!s) {
		pr_err("out of memory");
		dev->ops->destroy(dev);
		free_disks(c);
		return 1;
	}
	if (c->test_stop_after)
		pr_info("%s: --test-stop-after %" PRIu64 ": a test run, requests "
			"will be left in flight", c->name, c->test_stop_after);
	vhu_server_set_test_stop_after(s, c->test_stop_after);
	show_disks(c, dev, &objs);
	if (vhost_api_start(&c->o, &objs, &api)) {
		vhu_server_free(s);
		dev->ops->destroy(dev);
		free_disks(c);
		return 1;
	}
	status = vhu_server_run(s, c->o.socket, c->o.fd, c->o.once);
	vhost_api_stop(api);
	vhu_server_free(s);
	/* Queues stopped, the disks are flushed: once, as the device flushes
	 * only what ran since its last flush (the last client's departure
	 * did it already); destroy only frees. */
	if (dev->ops->flush)
		dev->ops->flush(dev);
	dev->ops->destroy(dev);
	free_disks(c);
	return status;
}

/* Each back-end is its own I_T nexus for SCSI persistent reservations; by
 * default it is named HOSTNAME:SOCKET, which a restarted back-end keeps,
 * so that it finds its registrations again when APTPL kept them. */
static int default_pr_ids(struct vhu_cmd *c)
{
	char host[64] = "localhost", *id;
	size_t n;

	if (c->iface != DISK_IF_VIRTIO_SCSI || !c->o.socket)
		return 0;
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = 0;
	for (unsigned int i = 0; i < c->ndisks; i++) {
		if (c->disks[i].pr_id)
			continue;
		if (asprintf(&id, "%s:%s", host, c->o.socket) < 0)
			return -1;
		n = strlen(id);
		if (n > 127)	/* the socket's tail tells them apart */
			memmove(id, id + n - 127, 128);
		for (char *p = id; *p; p++)
			if (*p <= 0x20 || *p >= 0x7f)
				*p = '_';
		c->disks[i].pr_id = id;
	}
	return 0;
}

/* The device the command serves: the one virtio-blk disk, or a virtio-scsi
 * HBA with all of them. */
static struct virtio_dev *create_dev(struct vhu_cmd *c, char *err, size_t errlen)
{
	const struct disk_cfg *disks[CONFIG_MAX_DISKS];

	if (c->iface == DISK_IF_VIRTIO_BLK)
		return virtio_blk_create(&c->disks[0], host_cpus(VIRTIO_BLK_MAX_QUEUES), err,
					 errlen);
	for (unsigned int i = 0; i < c->ndisks; i++)
		disks[i] = &c->disks[i];
	return virtio_scsi_create(disks, c->ndisks, host_cpus(VIRTIO_SCSI_MAX_QUEUES), err,
				  errlen);
}

static int run(struct vhu_cmd *c, int argc, char **argv)
{
	struct virtio_dev *dev;
	char err[256] = "out of memory";
	int ret = parse_args(c, argc, argv);

	if (ret) {
		free_disks(c);
		return ret > 0 ? 0 : 1;
	}
	dev = default_pr_ids(c) ? NULL : create_dev(c, err, sizeof(err));
	if (!dev) {
		fprintf(stderr, "iovm: error: --disk: %s\n", err);
		free_disks(c);
		return 1;
	}
	return serve(c, dev);
}

int cmd_vhost_user_blk(int argc, char **argv)
{
	struct vhu_cmd c = {
		.name = "vhost-user-blk",
		.help = blk_help,
		.iface = DISK_IF_VIRTIO_BLK,
		.max_disks = 1,
		.o.fd = -1,
	};

	return run(&c, argc, argv);
}

int cmd_vhost_user_scsi(int argc, char **argv)
{
	struct vhu_cmd c = {
		.name = "vhost-user-scsi",
		.help = scsi_help,
		.iface = DISK_IF_VIRTIO_SCSI,
		.max_disks = CONFIG_MAX_DISKS,
		.o.fd = -1,
	};

	return run(&c, argc, argv);
}
