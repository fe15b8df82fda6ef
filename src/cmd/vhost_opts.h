/* The options every vhost-user back-end command takes (--socket, --fd,
 * --once, -v, -q) and the checks of their combination. */
#ifndef IOVM_CMD_VHOST_OPTS_H
#define IOVM_CMD_VHOST_OPTS_H

#include <stdbool.h>

struct api_objects;
struct api_server;

struct vhost_opts {
	const char *socket;
	const char *api_socket;	/* --api-socket, or NULL */
	const char *metrics_listen;	/* --metrics-listen, or NULL */
	int fd;			/* --fd, or -1 */
	bool once;
};

/* getopt_long's short codes for them, to put in each command's table. */
#define VHOST_OPT_SOCKET 's'
#define VHOST_OPT_FD 'f'
#define VHOST_OPT_ONCE 'o'
#define VHOST_OPT_API_SOCKET 'A'
#define VHOST_OPT_METRICS_LISTEN 'M'

/* --metrics-listen's --help lines, in the back-ends' column layout. */
#define VHOST_METRICS_LISTEN_HELP                                               \
"  --metrics-listen tcp:[HOST:]PORT\n"                                         \
"                     serve the disks' statistics in Prometheus text format\n" \
"                     (0.0.4) over HTTP, GET /metrics, on HOST (default\n"     \
"                     127.0.0.1: this host only; another address is exposed\n" \
"                     as written) and PORT (0: a free port, logged); see\n"   \
"                     docs/api.md\n"

/* --api-socket's --help lines, in the back-ends' column layout. */
#define VHOST_API_SOCKET_HELP                                                    \
"  --api-socket PATH  serve the control socket on PATH: a UNIX socket (mode\n"  \
"                     0600; a stale socket there is replaced, any other file\n" \
"                     is an error; removed at exit) taking newline-delimited\n" \
"                     JSON commands in QMP's shape: query-status,\n"            \
"                     query-disks, shutdown (as SIGTERM) and more\n"            \
"                     (docs/api.md). Several clients at once; `iovm ctl\n"      \
"                     --socket PATH` is a client\n"

/* Starts the control socket (o->api_socket; nothing without it) over
 * objs: SIGINT and SIGTERM are blocked first, as vhu_server_run keeps
 * them, so that the shutdown command (which sends the process SIGTERM,
 * SIGTERM's own path) waits for the server's signalfd. 0, or -1 with a
 * message printed. */
int vhost_api_start(const struct vhost_opts *o, struct api_objects *objs,
		    struct api_server **api);
/* Stops what vhost_api_start started (the metrics server, then api), before
 * objs' devices go. */
void vhost_api_stop(struct api_server *api);

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
