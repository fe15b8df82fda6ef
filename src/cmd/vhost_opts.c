/* The options the vhost-user back-end commands share (vhost_opts.h). */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics_http.h"
#include "api/start.h"
#include "cmd/vhost_opts.h"
#include "lib/log.h"

int vhost_opt(struct vhost_opts *o, const char *name, int opt, const char *arg,
	      char **argv)
{
	char *end;
	long v;

	switch (opt) {
	case VHOST_OPT_SOCKET:
		o->socket = arg;
		return 0;
	case VHOST_OPT_FD:
		v = strtol(arg, &end, 10);
		if (*end || v < 0 || v > INT_MAX || fcntl(v, F_GETFD) < 0) {
			fprintf(stderr, "iovm: %s: --fd %s is not an open file descriptor\n",
				name, arg);
			return -1;
		}
		o->fd = v;
		return 0;
	case VHOST_OPT_ONCE:
		o->once = true;
		return 0;
	case VHOST_OPT_API_SOCKET:
		if (!*arg) {
			fprintf(stderr, "iovm: %s: --api-socket: the path is empty\n", name);
			return -1;
		}
		o->api_socket = arg;
		return 0;
	case VHOST_OPT_METRICS_LISTEN:
		o->metrics_listen = arg;
		return 0;
	case 'v':
		log_threshold = LOG_DEBUG;
		return 0;
	case 'q':
		log_threshold = LOG_ERR;
		return 0;
	case ':':
		fprintf(stderr, "iovm: %s: option '%s' needs a value (see --help)\n", name,
			argv[optind - 1]);
		return -1;
	}
	fprintf(stderr, "iovm: %s: unknown option '%s' (see --help)\n", name,
		argv[optind - 1]);
	return -1;
}

int vhost_opts_check(const struct vhost_opts *o, const char *name, int argc, char **argv)
{
	if (optind < argc) {
		fprintf(stderr, "iovm: %s: unexpected argument '%s'\n", name, argv[optind]);
		return -1;
	}
	if (o->socket && o->fd >= 0) {
		fprintf(stderr, "iovm: %s: --socket and --fd exclude each other\n", name);
		return -1;
	}
	if (o->socket && o->api_socket && !strcmp(o->socket, o->api_socket)) {
		fprintf(stderr, "iovm: %s: --api-socket must differ from --socket\n", name);
		return -1;
	}
	return 0;
}

/* --metrics-listen's server, while the command serves. */
static struct metrics_http *metrics;

int vhost_api_start(const struct vhost_opts *o, struct api_objects *objs,
		    struct api_server **api)
{
	char err[512];
	sigset_t set;

	*api = NULL;
	if (o->metrics_listen) {
		metrics = metrics_http_start(o->metrics_listen, objs, err, sizeof(err));
		if (!metrics) {
			pr_err("%s", err);
			return -1;
		}
	}
	if (!o->api_socket)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* vhu_server_run's signalfd takes it between messages. */
	objs->shutdown = api_shutdown_by_sigterm;
	if (api_start(objs, o->api_socket, api, err, sizeof(err))) {
		pr_err("%s", err);
		vhost_api_stop(NULL);
		return -1;
	}
	return 0;
}

void vhost_api_stop(struct api_server *api)
{
	metrics_http_stop(metrics);
	metrics = NULL;
	api_free(api);
}
