/* iovm: command dispatch. Each subcommand parses its own options. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "run", cmd_run, "boot a VM (a Linux bzImage or the probe) with disks and shares" },
	{ "9p-serve", cmd_9p_serve, "serve a host folder over 9P2000.L on a UNIX or TCP socket" },
	{ "vhost-user-blk", cmd_vhost_user_blk, "serve a disk as virtio-blk to QEMU & co over vhost-user" },
	{ "vhost-user-scsi", cmd_vhost_user_scsi, "serve disks on a virtio-scsi HBA to QEMU & co over vhost-user" },
	{ "vhost-user-pci", cmd_vhost_user_pci, "serve a PCI function (virtio-pci, LSI) to User-Mode Linux over virtio-pcidev" },
	{ "ctl", cmd_ctl, "talk to a running iovm's control socket (--api-socket)" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "Usage: iovm COMMAND [OPTIONS]\n"
		   "       iovm COMMAND --help\n\n"
		   "iovm is a KVM virtual machine monitor built for fast guest disk and file I/O.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-18s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nOptions:\n"
		   "  -h, --help         show this help\n"
		   "  -V, --version      show the version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("iovm %s\n", IOVM_VERSION);
		return 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "iovm: unknown command '%s' (try iovm --help)\n", argv[1]);
	return 2;
}
