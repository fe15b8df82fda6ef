/* The options every vhost-user back-end command takes (--socket, --fd,
 * --once, -v, -q) and the checks of their combination. */
#ifndef IOVM_CMD_VHOST_OPTS_H
#define IOVM_CMD_VHOST_OPTS_H

#include <stdbool.h>

struct vhost_opts {
	const char *socket;
	int fd;			/* --fd, or -1 */
	bool once;
};

/* getopt_long's short codes for them, to put in each command's table. */
#define VHOST_OPT_SOCKET 's'
#define VHOST_OPT_FD 'f'
#define VHOST_OPT_ONCE 'o'

/* Handles what getopt_long returned that the command's own cases did not:
 * a common option (0), or else an error (-1, a one-line message printed:
 * ':' a missing value, anything else an unknown option). name: the
 * command, for messages. */
int vhost_opt(struct vhost_opts *o, const char *name, int opt, const char *arg,
	      char **argv);

/* After the loop: trailing arguments, and exactly one of --socket and --fd.
 * 0, or -1 with a message. */
int vhost_opts_check(const struct vhost_opts *o, const char *name, int argc, char **argv);

#endif
