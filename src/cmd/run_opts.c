/* Option parsing and help of `iovm run`. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86/cpuid.h"
#include "lib/kvopt.h"
#include "vm/machine.h"
#include "cmd/run_opts.h"
#include "cmd/disk_help.h"

enum { OPT_CPU = 0x100, OPT_API_SOCKET, OPT_PAUSED, OPT_METRICS_LISTEN };

static const struct option long_opts[] = {
	{ "kernel", required_argument, NULL, 'k' },
	{ "initrd", required_argument, NULL, 'i' },
	{ "append", required_argument, NULL, 'a' },
	{ "memory", required_argument, NULL, 'm' },
	{ "cpus", required_argument, NULL, 'c' },
	{ "cpu", required_argument, NULL, OPT_CPU },
	{ "disk", required_argument, NULL, 'd' },
	{ "share", required_argument, NULL, 's' },
	{ "api-socket", required_argument, NULL, OPT_API_SOCKET },
	{ "paused", no_argument, NULL, OPT_PAUSED },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

void run_usage(FILE *f)
{
	char names[2048];

	cpuid_feature_names(names, sizeof(names));
	fprintf(f,
"Usage: iovm run --kernel FILE [OPTIONS]\n"
"\n"
"Boots a virtual machine under KVM: a Linux bzImage (64-bit boot protocol 2.12\n"
"or later; an xz, zstd or gzip payload is decompressed by iovm and booted at\n"
"its 64-bit entry) or a multiboot ELF32 image such as iovm's probe guest. The\n"
"guest's 16550A serial port (COM1, 0x3f8, IRQ 4) is the console: its output\n"
"goes to standard output, standard input goes to it (in raw mode when it is a\n"
"terminal; Ctrl-C still stops the VM).\n"
"\n"
"iovm ends when the guest writes V to the exit device (port 0xf4, QEMU's\n"
"isa-debug-exit: status (V<<1)|1), resets through the i8042 or powers off\n"
"through ACPI (status 0), or crashes (status 2, with the exit reason, RIP and\n"
"instruction bytes of the faulting vCPU on standard error). SIGINT, SIGTERM\n"
"and SIGHUP stop it cleanly with status 128+signal. Setup errors exit with\n"
"status 1, bad options with status 2.\n"
"\n"
"Options:\n"
"  -k, --kernel FILE    kernel to boot: a bzImage or a multiboot ELF (required)\n"
"  -i, --initrd FILE    initial ramdisk; for a multiboot kernel, loaded as its\n"
"                       first module\n"
"  -a, --append STRING  kernel command line (Linux: e.g. \"console=ttyS0\";\n"
"                       multiboot: passed in the multiboot information)\n"
"  -m, --memory SIZE    guest RAM (default 512M; from 16M; suffixes K, M, G, T\n"
"                       are binary). RAM above 3 GiB is placed from 4 GiB up,\n"
"                       leaving [3 GiB, 4 GiB) to PCI devices. Mapped on demand:\n"
"                       the host only provides what the guest touches\n"
"  -c, --cpus N         number of vCPUs, 1 to %d (default 1); each runs in its\n"
"                       own thread and is listed in the guest's MP table and\n"
"                       ACPI MADT\n"
"      --cpu FEATURES   add or remove CPUID features: a comma-separated list of\n"
"                       +NAME or -NAME (a bare NAME adds). By default the guest\n"
"                       gets all that KVM supports; on a PVM host (kvm_pvm\n"
"                       loaded) iovm hides what PVM cannot run: the XSAVE\n"
"                       family (xsave, avx*, leaf 0xD), cx16, smap and smep.\n"
"                       (PVM as deployed here lets guests execute CPUID\n"
"                       natively, so there the guest still sees the host's\n"
"                       CPUID; Linux guests then need e.g. clearcpuid=)\n"
"  -d, --disk SPEC      add a disk (repeatable, up to %d). SPEC is FILE or\n"
"                       path=FILE[,if=virtio-blk|virtio-scsi|lsi][,ro[=on|off]]\n"
"                       [,cache=none|writeback][,queues=N][,target=T][,lun=L]\n"
"                       [,poll-us=N][,pr-state=FILE|none][,pr-id=NAME]\n"
"                       [,iops=N][,bps=SIZE][,...: I/O limits, below]\n"
"                         if=      guest interface (default virtio-blk)\n"
"                         ro       read-only disk\n"
"                         cache=   none: O_DIRECT, bypass the host page cache\n"
"                                  (default); writeback: use the page cache\n"
"                         queues=  request queues, 1-64 (default: one per vCPU)\n"
"                         target=  SCSI target id 0-15 (virtio-scsi, lsi)\n"
"                         lun=     SCSI LUN 0-255 (virtio-scsi only)\n"
"                         poll-us= how long the disk's I/O thread busy-polls\n"
"                                  for the next request or completion before\n"
"                                  it sleeps, 0-10000 microseconds (default\n"
"                                  50). Polling saves a wakeup and the guest's\n"
"                                  notification exit per request at low queue\n"
"                                  depth, for up to one host CPU per queue\n"
"                                  while the guest does I/O; 0 never polls.\n"
"                                  Unless given, a network disk's virtio\n"
"                                  queues never poll for a completion at\n"
"                                  low depth and at most 10 us for the next\n"
"                                  request\n"
"                         pr-state= SCSI disks: persistent reservation state\n"
"                                  shared by every iovm process on the image\n"
"                                  (default FILE.pr beside it, made on first\n"
"                                  use; none: this process only)\n"
"                         pr-id=   SCSI disks: this process's I_T nexus name\n"
"                                  (1-127 characters; default HOSTNAME:PID:\n"
"                                  give one to keep APTPL registrations\n"
"                                  across restarts)\n"
"                       All if=virtio-scsi disks sit on one virtio-scsi HBA,\n"
"                       all if=lsi disks on one LSI HBA; an HBA takes the\n"
"                       largest queues= (virtio-scsi) and poll-us= its disks\n"
"                       give. A disk without target= takes the lowest id no\n"
"                       disk names\n"
"  -d, --disk (continued): network disks\n"
NETDISK_HELP
"  -d, --disk (continued): I/O limits\n"
LIMITS_HELP
"  -s, --share SPEC     share a host folder over virtio-9p (repeatable, up to\n"
"                       %d). SPEC is path=DIR,tag=NAME[,ro][,msize=SIZE]\n"
"                       [,security=MODEL][,poll-us=N]\n"
"                         tag=     mount tag the guest uses (1-36 characters):\n"
"                                  mount -t 9p -o trans=virtio NAME /mnt\n"
"                         ro       read-only share\n"
"                         msize=   largest 9P message, 4K-64M (default 4M)\n"
"                         poll-us= how long the thread that owns the ring\n"
"                                  watches it for the next request before\n"
"                                  it sleeps, 0-10000 (default 50)\n"
"                         security= how the guest's owners and modes reach\n"
"                                  the host (QEMU's virtfs models):\n"
"                                  mapped-xattr (default): host files stay\n"
"                                  iovm's user's at 0600 (folders 0700); the\n"
"                                  guest's uid, gid, mode and device numbers\n"
"                                  live in user.virtfs.* xattrs, which the\n"
"                                  folder's file system must support\n"
"                                  none: host files stay iovm's user's, modes\n"
"                                  apply without setuid/setgid, chown is\n"
"                                  ignored\n"
"                                  passthrough: owners (iovm as root) and\n"
"                                  modes as the guest gives them. RISK: a\n"
"                                  guest can then plant setuid-root programs\n"
"                                  and files of any user on the host\n"
"      --api-socket PATH\n"
"                       serve the control socket on PATH: a UNIX socket\n"
"                       (mode 0600; a stale socket there is replaced, any\n"
"                       other file is an error; removed at exit) taking\n"
"                       newline-delimited JSON commands in QMP's shape:\n"
"                       query-status, query-disks, query-shares, pause and\n"
"                       resume of the vCPUs, shutdown (as SIGTERM, but exit\n"
"                       status 0) and more (docs/api.md). Several clients at\n"
"                       once; `iovm ctl --socket PATH` is a client\n"
"      --paused         start with the vCPUs paused, before the guest's first\n"
"                       instruction, until the control socket's resume\n"
"                       (QEMU's -S); needs --api-socket\n"
"      --metrics-listen tcp:[HOST:]PORT\n"
"                       serve the disks' and shares' statistics in Prometheus\n"
"                       text format (0.0.4) over HTTP, GET /metrics, on HOST\n"
"                       (default 127.0.0.1: this host only; another address\n"
"                       is exposed as written) and PORT (0: a free port,\n"
"                       logged); see docs/api.md\n"
"  -v, --verbose        report boot details, the stop reason and memory use\n"
"  -q, --quiet          report errors only\n"
"  -h, --help           show this help\n"
"  -V, --version        show iovm's version\n"
"\n"
"CPU feature names for --cpu:\n  ",
		VM_MAX_CPUS, CONFIG_MAX_DISKS, CONFIG_MAX_SHARES);
	/* Wrap the long list of names at commas. */
	for (const char *p = names; *p;) {
		const char *end = p;
		int col = 2;

		while (*end && col < 78) {
			const char *c = strchr(end, ',');
			size_t n = c ? (size_t)(c - end + 1) : strlen(end);

			if (col + (int)n > 78 && end != p)
				break;
			col += n;
			end += n;
		}
		fprintf(f, "%.*s\n", (int)(end - p), p);
		p = end;
		if (*p)
			fprintf(f, "  ");
	}
	fprintf(f,
"\n"
"Examples:\n"
"  Boot the probe guest on two vCPUs:\n"
"    iovm run --kernel build/guest/probe/probe.elf --cpus 2 --memory 64M\n"
"  Boot the default Linux guest to a shell (hardware KVM):\n"
"    iovm run --kernel build/guest/bzImage \\\n"
"        --initrd build/guest/initramfs.cpio.gz \\\n"
"        --append \"console=ttyS0\" --memory 1G --cpus 2\n"
"  The same with a virtio-blk disk and a shared folder:\n"
"    iovm run --kernel build/guest/bzImage \\\n"
"        --initrd build/guest/initramfs.cpio.gz \\\n"
"        --append \"console=ttyS0\" --disk path=disk.img,cache=none \\\n"
"        --share path=$HOME/src,tag=src\n");
}

static int bad(char *err, size_t errlen, const char *fmt, const char *arg)
{
	snprintf(err, errlen, fmt, arg);
	return -EINVAL;
}

static int parse_memory(const char *arg, uint64_t *out, char *err, size_t errlen)
{
	if (parse_size(arg, out))
		return bad(err, errlen, "--memory: '%s' is not a size (e.g. 512M, 2G)", arg);
	if (*out < RUN_MIN_MEMORY || *out > RUN_MAX_MEMORY)
		return bad(err, errlen, "--memory: '%s' is out of range (16M to 1T)", arg);
	if (*out & 0xfff)
		return bad(err, errlen, "--memory: '%s' is not a multiple of 4 KiB", arg);
	return 0;
}

static int parse_one(int c, const char *arg, struct run_opts *o, char *err,
		     size_t errlen)
{
	struct vm_config *cfg = &o->cfg;
	uint64_t v;

	switch (c) {
	case 'k':
		cfg->kernel = arg;
		return 0;
	case 'i':
		cfg->initrd = arg;
		return 0;
	case 'a':
		cfg->append = arg;
		return 0;
	case 'm':
		return parse_memory(arg, &cfg->mem_size, err, errlen);
	case 'c':
		if (parse_uint(arg, 1, VM_MAX_CPUS, &v))
			return bad(err, errlen, "--cpus: '%s' is not a number from 1 to "
				   "64", arg);
		cfg->cpus = v;
		return 0;
	case OPT_API_SOCKET:
		if (!*arg)
			return bad(err, errlen, "%s", "--api-socket: the path is empty");
		o->api_socket = arg;
		return 0;
	case OPT_PAUSED:
		o->paused = true;
		return 0;
	case OPT_METRICS_LISTEN:
		o->metrics_listen = arg;
		return 0;
	case OPT_CPU:
		cfg->cpu_features = arg;
		/* Names are checked now, bits later against KVM's set. */
		return cpuid_apply_features(NULL, arg, err, errlen);
	case 'd':
		if (cfg->ndisks >= CONFIG_MAX_DISKS)
			return bad(err, errlen, "--disk: at most %s disks", "16");
		return config_parse_disk(arg, &cfg->disks[cfg->ndisks++], err, errlen);
	case 's':
		if (cfg->nshares >= CONFIG_MAX_SHARES)
			return bad(err, errlen, "--share: at most %s shares", "8");
		return config_parse_share(arg, true, &cfg->shares[cfg->nshares++], err,
					  errlen);
	case 'v':
		o->verbose = true;
		o->quiet = false;
		return 0;
	case 'q':
		o->quiet = true;
		o->verbose = false;
		return 0;
	case 'h':
		o->help = true;
		return 0;
	case 'V':
		o->version = true;
		return 0;
	}
	return -EINVAL;
}

int run_parse_args(int argc, char **argv, struct run_opts *o, char *err,
		   size_t errlen)
{
	int c, ret;

	memset(o, 0, sizeof(*o));
	o->cfg.mem_size = RUN_DEFAULT_MEMORY;
	o->cfg.cpus = 1;
	if (errlen)
		err[0] = '\0';
	optind = 0;		/* full re-initialisation (GNU) */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":k:i:a:m:c:d:s:vqhV", long_opts, NULL)) != -1) {
		if (c == '?') {
			if (optopt && optopt < 0x100)
				return bad(err, errlen, "unknown option '-%s' (see iovm run --help)",
					   (char[]){ optopt, 0 });
			return bad(err, errlen, "unknown option '%s' (see iovm run --help)",
				   argv[optind - 1]);
		}
		if (c == ':')
			return bad(err, errlen, "option '%s' needs a value", argv[optind - 1]);
		ret = parse_one(c, optarg, o, err, errlen);
		if (ret)
			return ret;
	}
	if (o->help || o->version)
		return 0;
	if (optind < argc)
		return bad(err, errlen, "unexpected argument '%s' (see iovm run --help)",
			   argv[optind]);
	if (!o->cfg.kernel)
		return bad(err, errlen, "%s", "--kernel FILE is required (see iovm run --help)");
	if (o->paused && !o->api_socket)
		return bad(err, errlen, "%s", "--paused needs --api-socket PATH (to resume)");
	return 0;
}

void run_opts_free(struct run_opts *o)
{
	for (unsigned int i = 0; i < o->cfg.ndisks; i++)
		config_free_disk(&o->cfg.disks[i]);
	for (unsigned int i = 0; i < o->cfg.nshares; i++) {
		free((char *)o->cfg.shares[i].path);
		free((char *)o->cfg.shares[i].tag);
	}
	o->cfg.ndisks = o->cfg.nshares = 0;
}
