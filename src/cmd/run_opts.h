/* Command line of `iovm run`, parsed without touching KVM or files so that
 * it can be tested on its own. */
#ifndef IOVM_CMD_RUN_OPTS_H
#define IOVM_CMD_RUN_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

#define RUN_DEFAULT_MEMORY (512ull << 20)
#define RUN_MIN_MEMORY (16ull << 20)
#define RUN_MAX_MEMORY (1ull << 40)

struct run_opts {
	struct vm_config cfg;
	const char *api_socket;	/* --api-socket PATH, or NULL */
	const char *metrics_listen;	/* --metrics-listen SPEC, or NULL */
	bool paused;		/* --paused: vCPUs wait for resume */
	bool help;
	bool version;
	bool verbose;
	bool quiet;
};

/* Returns 0 (o filled; o->help / o->version set for --help / --version) or -EINVAL with a one-line
 * message (without "iovm: ") in err. */
int run_parse_args(int argc, char **argv, struct run_opts *o, char *err,
		   size_t errlen);

/* Frees what parsing allocated (disk and share strings). */
void run_opts_free(struct run_opts *o);

void run_usage(FILE *f);

#endif
