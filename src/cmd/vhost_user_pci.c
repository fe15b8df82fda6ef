/* `iovm vhost-user-pci`: one of iovm's own PCI functions (a virtio-pci
 * virtio-blk, virtio-scsi or virtio-9p, or the LSI 53C895A) served to
 * User-Mode Linux over its PCI-over-virtio protocol (virtio-pcidev). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/start.h"
#include "block/backend.h"
#include "cmd/commands.h"
#include "cmd/devices.h"
#include "cmd/vhost_opts.h"
#include "config.h"
#include "lib/log.h"
#include "vhost/pcidev.h"
#include "vhost/server.h"
#include "virtio/virtio.h"

static const char help[] =
"Usage: iovm vhost-user-pci --socket PATH --disk SPEC [--disk SPEC...]\n"
"       iovm vhost-user-pci --socket PATH --share path=DIR,tag=TAG[,...]\n"
"\n"
"Serves one of iovm's own PCI functions to User-Mode Linux over UML's PCI\n"
"over virtio (CONFIG_UML_PCI_OVER_VIRTIO, arch/um/drivers/virt-pci.c): the\n"
"same function `iovm run` puts on its PCI bus (config space, capabilities,\n"
"BARs, the MSI-X table, INTx), with config and BAR accesses arriving as\n"
"messages on a virtqueue instead of VM exits, interrupts leaving as messages\n"
"(MSI by the vector's data value, INTx as INT), and device DMA going to\n"
"UML's memory through the vhost-user memory table. Real Linux drivers\n"
"(virtio_pci with virtio_blk, virtio_scsi or 9pnet_virtio; sym53c8xx) then\n"
"drive iovm's own virtio-pci transport and LSI HBA.\n"
"\n"
"One socket is one PCI function (UML gives each virtio-pcidev device its\n"
"own slot): give either one --disk with if=virtio-blk, or --disk options\n"
"that all say if=virtio-scsi (one HBA, each disk a target/LUN), or all\n"
"if=lsi (one LSI HBA, each disk a target), or one --share (virtio-9p). Run\n"
"one iovm per function, up to 8 (UML's slots).\n"
"\n"
"UML connects at boot, so start iovm first. On UML's command line:\n"
"  virtio_uml.device=PATH:ID\n"
"where ID is the virtio device id UML's kernel was built with for PCI over\n"
"virtio (CONFIG_UML_PCI_OVER_VIRTIO_DEVICE_ID; tools/mkuml.sh uses 1234).\n"
"\n"
"Each time UML starts the device (and when it changes its memory table),\n"
"the function is made afresh, just out of reset; when UML disconnects or\n"
"stops it, every request in flight completes and the disks are flushed\n"
"before iovm waits for the next client.\n"
"\n"
"Options:\n"
"  --socket PATH      UNIX socket to listen on. A stale socket at PATH is\n"
"                     replaced; any other file there is an error.\n"
"  --fd N             serve on inherited file descriptor N instead: a\n"
"                     listening UNIX socket, or a connected one (one client)\n"
"  --disk SPEC        a disk, as `iovm run --disk` takes it:\n"
"                     path=FILE[,if=virtio-blk|virtio-scsi|lsi][,ro]\n"
"                     [,cache=none|writeback][,queues=N][,target=N][,lun=M]\n"
"                     [,poll-us=N][,iops=N][,bps=SIZE][,...] (I/O limits:\n"
"                     see iovm run --help). The LSI is reached through its\n"
"                     memory BARs (UML has no I/O ports: build sym53c8xx with\n"
"                     CONFIG_SCSI_SYM53C8XX_MMIO)\n"
"  --share SPEC       a host folder over virtio-9p, as `iovm run --share`:\n"
"                     path=DIR,tag=TAG[,ro][,msize=SIZE][,security=MODEL]\n"
"  --once             exit after the first client disconnects\n"
VHOST_API_SOCKET_HELP
"                     (here the function is made afresh for each session:\n"
"                     query-disks shows no size, and statistics are not\n"
"                     kept)\n"
VHOST_METRICS_LISTEN_HELP
"  --test-hold-writes N:M  test only: the WRITEs number N+1 to N+M that the\n"
"                     disks send to their backend are queued in the kernel\n"
"                     behind a gate and move no data until SIGUSR1 opens it\n"
"                     (or %u s pass); a line is logged once M are held. So\n"
"                     commands stay in flight at the HBA by construction, for\n"
"                     the bus reset test of tests/uml/uml-vpci-lsi.sh; never\n"
"                     in service\n"
"  -v, --verbose      log every vhost-user message\n"
"  -q, --quiet        log errors only\n"
"  -h, --help         show this help\n"
"\n"
"What UML's virt-pci can use: memory BARs only, function 0, MSI/MSI-X\n"
"(at most 32 vectors in all) or INTx; a 256 MiB window for all BARs.\n"
"Malformed messages (unknown operation, bad BAR, size or address, short\n"
"buffers) are refused with an all-ones reply, as a master abort reads.\n"
"\n"
"SIGINT or SIGTERM: finish in-flight requests, flush, remove the socket,\n"
"exit 0. Exit status 1: bad option, unusable disk, folder or socket path.\n"
"\n"
"Example (an LSI HBA with two disks for UML's sym53c8xx):\n"
"  iovm vhost-user-pci --socket /tmp/lsi.sock --disk path=a.img,if=lsi \\\n"
"      --disk path=b.img,if=lsi &\n"
"  linux mem=512M root=/dev/root rootfstype=hostfs \\\n"
"      virtio_uml.device=/tmp/lsi.sock:1234 ...\n";

struct vpci_cmd {
	struct vhost_opts o;
	struct vm_config cfg;
	bool hold;		/* --test-hold-writes */
	uint64_t hold_after;
	unsigned int hold_count;
};

/* --test-hold-writes: the gate opens at the latest after this long, so
 * that a test that failed before it released the WRITEs leaves no iovm
 * stuck draining them. */
#define HOLD_WATCHDOG_S 600u

#define VPCI_OPT_HOLD 0x100

static unsigned int host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 64 ? 64 : (unsigned int)n;
}

static void free_cfg(struct vm_config *cfg)
{
	for (unsigned int i = 0; i < cfg->ndisks; i++)
		config_free_disk(&cfg->disks[i]);
	for (unsigned int i = 0; i < cfg->nshares; i++) {
		free((char *)cfg->shares[i].path);
		free((char *)cfg->shares[i].tag);
	}
	cfg->ndisks = cfg->nshares = 0;
}

/* --test-hold-writes N:M, both counts, M at least 1. */
static int parse_hold(struct vpci_cmd *c, const char *arg)
{
	unsigned long long n, m;
	const char *p;
	char *end;

	errno = 0;
	n = strtoull(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end != ':' || errno)
		goto bad;
	p = end + 1;
	m = strtoull(p, &end, 10);
	if (*p < '0' || *p > '9' || *end || errno || !m || m > 65536)
		goto bad;
	c->hold = true;
	c->hold_after = n;
	c->hold_count = (unsigned int)m;
	return 0;
bad:
	fprintf(stderr, "iovm: vhost-user-pci: --test-hold-writes wants N:M (WRITEs to let "
		"through, then WRITEs to hold, 1 to 65536), got '%s'\n", arg);
	return -1;
}

/* SIGUSR1 opens the gate of --test-hold-writes. It is blocked in every
 * thread (they inherit the mask) and taken here, so that no other thread
 * sees a system call interrupted by it. */
static void *hold_thread(void *arg)
{
	sigset_t *set = arg, all;
	struct timespec ts = { .tv_sec = HOLD_WATCHDOG_S };

	/* SIGINT and SIGTERM are for the server loop's signalfd, which
	 * blocks them only in threads made after this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		int sig = sigtimedwait(set, NULL, &ts);

		if (sig == SIGUSR1) {
			/* once open, the gate stays open: later SIGUSR1s
			 * stay pending, blocked everywhere */
			blk_test_hold_release();
			return NULL;
		} else if (sig < 0 && errno == EAGAIN) {
			pr_warn("test-hold-writes: no SIGUSR1 within %u s: opening the gate",
				HOLD_WATCHDOG_S);
			blk_test_hold_release();
			return NULL;
		}
	}
	return NULL;
}

static int start_hold(const struct vpci_cmd *c)
{
	static sigset_t set;
	pthread_t t;
	int ret;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ret = blk_test_hold_writes(c->hold_after, c->hold_count);
	if (!ret)
		ret = -pthread_create(&t, NULL, hold_thread, &set);
	if (ret) {
		pr_err("test-hold-writes: %s", strerror(-ret));
		return ret;
	}
	pthread_detach(t);
	pr_info("test-hold-writes %" PRIu64 ":%u: a test run, WRITEs will be held "
		"until SIGUSR1", c->hold_after, c->hold_count);
	return 0;
}

/* Returns -1 to exit 1, 1 to exit 0 (--help), 0 to go on. */
static int parse_args(struct vpci_cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, VHOST_OPT_SOCKET },
		{ "fd", required_argument, NULL, VHOST_OPT_FD },
		{ "disk", required_argument, NULL, 'd' },
		{ "share", required_argument, NULL, 'S' },
		{ "once", no_argument, NULL, VHOST_OPT_ONCE },
		{ "api-socket", required_argument, NULL, VHOST_OPT_API_SOCKET },
		{ "metrics-listen", required_argument, NULL, VHOST_OPT_METRICS_LISTEN },
		{ "test-hold-writes", required_argument, NULL, VPCI_OPT_HOLD },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char err[256];
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":vqh", longopts, NULL)) != -1) {
		err[0] = 0;
		switch (opt) {
		case 'd':
			if (c->cfg.ndisks == CONFIG_MAX_DISKS) {
				fprintf(stderr, "iovm: --disk: at most %u disks\n", CONFIG_MAX_DISKS);
				return -1;
			}
			if (config_parse_disk(optarg, &c->cfg.disks[c->cfg.ndisks], err,
					      sizeof(err))) {
				fprintf(stderr, "iovm: %s\n", err);
				return -1;
			}
			c->cfg.ndisks++;
			break;
		case 'S':
			if (c->cfg.nshares == CONFIG_MAX_SHARES) {
				fprintf(stderr, "iovm: --share: at most %u shares\n",
					CONFIG_MAX_SHARES);
				return -1;
			}
			if (config_parse_share(optarg, true, &c->cfg.shares[c->cfg.nshares],
					       err, sizeof(err))) {
				fprintf(stderr, "iovm: %s\n", err);
				return -1;
			}
			c->cfg.nshares++;
			break;
		case VPCI_OPT_HOLD:
			if (parse_hold(c, optarg))
				return -1;
			break;
		case 'h':
			printf(help, HOLD_WATCHDOG_S);
			return 1;
		default:
			if (vhost_opt(&c->o, "vhost-user-pci", opt, optarg, argv))
				return -1;
			break;
		}
	}
	if (vhost_opts_check(&c->o, "vhost-user-pci", argc, argv))
		return -1;
	if (!c->o.socket && c->o.fd < 0) {
		fprintf(stderr, "iovm: vhost-user-pci needs --socket PATH (or --fd N) (see --help)\n");
		return -1;
	}
	if (devices_count(&c->cfg) != 1) {
		fprintf(stderr, "iovm: vhost-user-pci serves one PCI function per socket, and "
			"these options make %u: give one if=virtio-blk disk, or only "
			"if=virtio-scsi disks, or only if=lsi disks, or one --share\n",
			devices_count(&c->cfg));
		return -1;
	}
	return 0;
}

/* A session's function: exactly what `iovm run` would put on its bus. */
static int make_function(struct pci_bus *bus, void *opaque)
{
	struct vpci_cmd *c = opaque;

	return devices_add(bus, &c->cfg, host_cpus(), NULL);
}

/* The control socket sees the configuration only: the function and its
 * backends are made afresh for each session and gone between them. */
static void show_cfg(struct vpci_cmd *c, struct api_objects *objs)
{
	objs->command = "vhost-user-pci";
	for (unsigned int i = 0; i < c->cfg.ndisks; i++)
		api_add_disk(objs, &c->cfg.disks[i], NULL, 0);
	for (unsigned int i = 0; i < c->cfg.nshares; i++)
		api_add_share(objs, &c->cfg.shares[i], NULL);
}

int cmd_vhost_user_pci(int argc, char **argv)
{
	static struct api_objects objs;
	struct api_server *api = NULL;
	struct vpci_cmd c = { .o.fd = -1 };
	struct virtio_dev *dev;
	struct vhu_server *s;
	int status, ret;

	ret = parse_args(&c, argc, argv);
	if (ret) {
		free_cfg(&c.cfg);
		return ret > 0 ? 0 : 1;
	}
	/* Before any thread exists, so that all of them block SIGUSR1. */
	if (c.hold && start_hold(&c)) {
		free_cfg(&c.cfg);
		return 1;
	}
	dev = vpcidev_create(make_function, &c);
	s = dev ? vhu_server_new(dev) : NULL;
	if (!s) {
		pr_err("out of memory");
		if (dev)
			dev->ops->destroy(dev);
		free_cfg(&c.cfg);
		return 1;
	}
	/* Open every disk and folder once before listening, so that a bad
	 * path is an error now rather than at UML's boot. */
	ret = vpcidev_session_begin(dev);
	vpcidev_session_end(dev);
	if (ret) {
		vhu_server_free(s);
		dev->ops->destroy(dev);
		free_cfg(&c.cfg);
		return 1;
	}
	show_cfg(&c, &objs);
	if (vhost_api_start(&c.o, &objs, &api))
		status = 1;
	else
		status = vhu_server_run(s, c.o.socket, c.o.fd, c.o.once);
	vhost_api_stop(api);
	vhu_server_free(s);
	dev->ops->destroy(dev);
	free_cfg(&c.cfg);
	return status;
}
