/* `iovm 9p-serve`: options -> a 9P server on a host folder -> its socket
 * transport (p9/socket.c) on a UNIX or TCP address. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "api/metrics_http.h"
#include "api/start.h"
#include "cmd/commands.h"
#include "config.h"
#include "lib/kvopt.h"
#include "lib/log.h"
#include "lib/sock.h"
#include "p9/proto.h"
#include "p9/server.h"
#include "p9/socket.h"

#define MEM_CAP_DEFAULT (256u << 20)

static char unix_path[SOCK_UNIX_PATH_MAX + 1];
static char api_path[SOCK_UNIX_PATH_MAX + 1];

/* SIGTERM/SIGINT: every reply sent so far is already in the host's files
 * (pwritev returned before the reply), so stopping needs no draining; the
 * UNIX sockets are removed so the paths are free again. */
static void on_term(int sig)
{
	if (unix_path[0])
		unlink(unix_path);
	if (api_path[0])
		unlink(api_path);
	_exit(0);
}

/* The control socket (path, or none) and the metrics server (metrics, or
 * none), over the share; the metrics thread ends with the process. */
static int start_api(const char *path, const char *metrics,
		     const struct share_cfg *share, struct p9_server *srv,
		     struct api_server **api)
{
	static struct api_objects objs = { .command = "9p-serve" };
	char err[512];

	api_add_share(&objs, share, srv);
	objs.shutdown = api_shutdown_by_sigterm;	/* on_term */
	if (metrics && !metrics_http_start(metrics, &objs, err, sizeof(err))) {
		pr_err("%s", err);
		return -1;
	}
	if (!path)
		return 0;
	if (api_start(&objs, path, api, err, sizeof(err))) {
		pr_err("%s", err);
		return -1;
	}
	/* The path as bound; api_start checked its length. */
	snprintf(api_path, sizeof(api_path), "%s", path);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: iovm 9p-serve --share path=DIR[,ro][,msize=SIZE][,security=MODEL]\n"
"                    --listen ADDRESS [OPTIONS]\n"
"\n"
"Serves the host folder DIR with the 9P2000.L protocol over a stream socket,\n"
"one session per connection, as a Linux guest's 9p client expects it:\n"
"\n"
"  mount -t 9p -o trans=tcp,port=PORT,version=9p2000.L HOST /mnt\n"
"  mount -t 9p -o trans=unix,version=9p2000.L /path/to/socket /mnt\n"
"\n"
"The same server code backs the virtio-9p device of `iovm run --share`.\n"
"\n"
"Options:\n"
"  --share path=DIR[,ro][,msize=SIZE][,security=MODEL]\n"
"        The folder to serve (required). Every path a client names is\n"
"        resolved beneath DIR: \"..\" at DIR stays at DIR, and symbolic links\n"
"        are returned as links, never followed by the server. With ro, every\n"
"        change (create, write, rename, remove, setattr, xattr, ...) fails\n"
"        with EROFS. msize is the largest message size accepted, from 4K to\n"
"        64M (default 4M); clients get the smaller of theirs and this.\n"
"        security= is how the owners and modes a client sets reach the\n"
"        host (QEMU's virtfs security models):\n"
"          mapped-xattr  (default) files and folders the client makes stay\n"
"                        iovm's user's at mode 0600 (folders 0700); the\n"
"                        client's uid, gid, mode and device numbers are kept\n"
"                        in user.virtfs.* xattrs (DIR's file system must\n"
"                        support user xattrs) and are what the client sees\n"
"          none          files stay iovm's user's; modes apply without\n"
"                        setuid (and setgid but on folders); chown is ignored\n"
"          passthrough   modes as given and, when iovm runs as root, the\n"
"                        client's uid and gid. RISK: as root, any client can\n"
"                        then create setuid-root programs and files owned by\n"
"                        any user in DIR\n"
"  --listen ADDRESS\n"
"        Where to accept connections (required):\n"
"          unix:PATH       a UNIX stream socket at PATH (an old socket at\n"
"                          PATH is replaced)\n"
"          tcp:PORT        TCP on 127.0.0.1 (loopback only)\n"
"          tcp:HOST:PORT   TCP on the address HOST, e.g. 0.0.0.0 for every\n"
"                          interface, or [::1] for IPv6\n"
"        Port 0 picks a free port. The address actually bound is printed\n"
"        on standard output as \"listening on ADDRESS\".\n"
"  --max-connections N\n"
"        Connections served at once, 1 to %d (default 64); more are closed\n"
"        at once. Each gets an equal share of the descriptors (see Limits):\n"
"        fewer than %d each is a setup error.\n"
"  --buffer-memory SIZE\n"
"        Message buffers all connections may hold together: at least\n"
"        8 x msize + 2M (a quarter of it, what one connection may hold, fits\n"
"        a message of msize each way), default 256M or that least if more.\n"
"  --io-timeout SECONDS\n"
"        Closes a connection whose client takes more than SECONDS to send\n"
"        one message whole (from its first byte) or to take one reply\n"
"        whole: its buffers go back to the others, so that a client cannot\n"
"        hold them by sending or reading a byte at a time. 0 to %d,\n"
"        default 120; 0 waits forever. A connection idle between messages\n"
"        is kept however long; but a client paused in the middle of a\n"
"        message for longer (a suspended VM) loses its connection, and 9P\n"
"        does not reconnect: raise it, or use 0, for such clients.\n"
"  --api-socket PATH\n"
"        Serve the control socket on PATH: a UNIX socket (mode 0600; a stale\n"
"        socket there is replaced, any other file is an error; removed at\n"
"        exit) taking newline-delimited JSON commands in QMP's shape:\n"
"        query-status, query-shares, shutdown (as SIGTERM) and more\n"
"        (docs/api.md). Several clients at once; `iovm ctl --socket PATH`\n"
"        is a client.\n"
"  --metrics-listen tcp:[HOST:]PORT\n"
"        Serve the share's statistics in Prometheus text format (0.0.4)\n"
"        over HTTP, GET /metrics, on HOST (default 127.0.0.1: this host\n"
"        only; another address is exposed as written) and PORT (0: a free\n"
"        port, logged); see docs/api.md.\n"
"  -v, --verbose   log each connection\n"
"  -q, --quiet     log errors only\n"
"  -h, --help      show this help\n"
"\n"
"Security: 9P has no authentication. Anyone who can connect to the socket\n"
"can read (and unless ro, change) everything in DIR with the rights of the\n"
"iovm process. TCP listens on loopback unless a HOST is given; protect a\n"
"UNIX socket with the permissions of its folder. Unless security=passthrough,\n"
"nothing a client does makes a setuid or setgid file, or a file owned by\n"
"another user, on the host.\n"
"\n"
"Limits. The descriptors 9P may hold are the soft RLIMIT_NOFILE (raised to\n"
"the hard limit at start) less a reserve for the process itself: an eighth\n"
"of the limit, at least %d (at most half), plus one per connection. Each\n"
"connection gets 1/N of them (N = --max-connections) for the paths it has\n"
"walked and the files it has open, so one client cannot starve the others;\n"
"past its share a walk or open fails with EMFILE. Per connection also:\n"
"1/N of 1M fids (256 to 65536; 16384 at the default N), 4096 open files,\n"
"%d requests in flight (served by %d threads), 1/N of 256 MiB of\n"
"extended-attribute values (64 KiB to 1 MiB). A request whose buffers\n"
"would go past --buffer-memory (or the connection's quarter of it) gets\n"
"ENOMEM; the connection goes on. Between requests a connection keeps at\n"
"most 2 x msize of large buffers (none once the total is above half).\n"
"\n"
"Runs until SIGTERM or SIGINT, which end it with status 0 (a UNIX socket\n"
"is removed). Exit status 1 on a setup error, 2 on a usage error.\n",
		P9_SOCK_MAX_CONNS, P9_MIN_SESSION_FDS, P9_SOCK_IO_TIMEOUT_MAX, P9_FD_RESERVE,
		P9_SOCK_SLOTS, P9_SOCK_WORKERS);
}

static void raise_nofile(void)
{
	struct rlimit rl;

	/* Each walked path holds an O_PATH descriptor. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int cmd_9p_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "share", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ "buffer-memory", required_argument, NULL, 'b' },
		{ "io-timeout", required_argument, NULL, 't' },
		{ "api-socket", required_argument, NULL, 'A' },
		{ "metrics-listen", required_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct share_cfg share = { 0 };
	struct p9_server_cfg cfg = { 0 };
	struct p9_server *srv;
	const char *listen_spec = NULL, *api_socket = NULL, *metrics_listen = NULL;
	struct api_server *api = NULL;
	bool have_share = false;
	char err[512], desc[300];
	size_t slot_min;
	unsigned int max_conns = 64, io_timeout_s = 120;
	size_t mem_cap = 0;
	uint64_t v;
	int opt, lfd;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "vqh", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			err[0] = 0;
			if (have_share) {
				fprintf(stderr, "iovm: 9p-serve serves one --share\n");
				return 2;
			}
			if (config_parse_share(optarg, false, &share, err,
					       sizeof(err))) {
				fprintf(stderr, "iovm: %s\n", err);
				return 2;
			}
			have_share = true;
			break;
		case 'l':
			listen_spec = optarg;
			break;
		case 'A':
			if (!*optarg) {
				fprintf(stderr, "iovm: 9p-serve: --api-socket: the path is empty\n");
				return 2;
			}
			api_socket = optarg;
			break;
		case 'M':
			metrics_listen = optarg;
			break;
		case 'm':
			if (parse_uint(optarg, 1, P9_SOCK_MAX_CONNS, &v)) {
				fprintf(stderr, "iovm: --max-connections %s: expected 1 to %d\n",
					optarg, P9_SOCK_MAX_CONNS);
				return 2;
			}
			max_conns = v;
			break;
		case 'b':
			if (parse_size(optarg, &v) || v > SIZE_MAX / 2) {
				fprintf(stderr, "iovm: --buffer-memory %s: expected a size (e.g. 512M)\n",
					optarg);
				return 2;
			}
			mem_cap = v;
			break;
		case 't':
			if (parse_uint(optarg, 0, P9_SOCK_IO_TIMEOUT_MAX, &v)) {
				fprintf(stderr, "iovm: --io-timeout %s: expected 0 to %d seconds\n",
					optarg, P9_SOCK_IO_TIMEOUT_MAX);
				return 2;
			}
			io_timeout_s = v;
			break;
		case 'v':
			log_threshold = LOG_DEBUG;
			break;
		case 'q':
			log_threshold = LOG_ERR;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "iovm: 9p-serve: unknown or incomplete option '%s' (try iovm 9p-serve --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "iovm: 9p-serve: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (api_socket && !strncmp(listen_spec ? listen_spec : "", "unix:", 5) &&
	    !strcmp(listen_spec + 5, api_socket)) {
		fprintf(stderr, "iovm: 9p-serve: --api-socket must differ from --listen's path\n");
		return 2;
	}
	if (!have_share || !listen_spec) {
		fprintf(stderr, "iovm: 9p-serve needs --share path=DIR and --listen ADDRESS (try iovm 9p-serve --help)\n");
		return 2;
	}
	if (share.poll_set)
		pr_warn("9p-serve: poll-us=%u is ignored (it is virtio-9p's ring watch)",
			share.poll_us);
	if (share.tag)
		pr_warn("9p-serve: tag=%s is ignored (the client names the share by address)",
			share.tag);
	raise_nofile();
	cfg.path = share.path;
	cfg.ro = share.ro;
	cfg.msize = share.msize;
	cfg.security = share.security == SHARE_SEC_PASSTHROUGH ? P9_SEC_PASSTHROUGH :
		       share.security == SHARE_SEC_NONE ? P9_SEC_NONE :
		       P9_SEC_MAPPED_XATTR;
	/* A connection's buffers must hold one message of msize each way
	 * and the small ones of its other slots. */
	slot_min = 2 * ((size_t)share.msize + P9_IOHDRSZ) +
		   P9_SOCK_SLOTS * 2 * P9_SOCK_SLOT_KEEP;
	if (!mem_cap)
		mem_cap = MEM_CAP_DEFAULT > 4 * slot_min ? MEM_CAP_DEFAULT : 4 * slot_min;
	if (mem_cap < 4 * slot_min) {
		fprintf(stderr, "iovm: --buffer-memory must be at least %zu KiB at msize %u (4 connections' worth of one message each way)\n",
			(4 * slot_min + 1023) >> 10, share.msize);
		return 2;
	}
	/* Each connection gets an equal share of the descriptors the
	 * process keeps for 9P, beyond a socket each. */
	cfg.max_sessions = max_conns;
	cfg.fd_reserve = max_conns + 16;
	if (p9_server_open(&cfg, &srv, err, sizeof(err))) {
		pr_err("%s", err);
		return 1;
	}
	lfd = p9_sock_listen(listen_spec, desc, sizeof(desc));
	if (lfd < 0) {
		p9_server_close(srv);
		return 1;
	}
	if (!strncmp(listen_spec, "unix:", 5))
		strcpy(unix_path, listen_spec + 5);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	if ((api_socket || metrics_listen) &&
	    start_api(api_socket, metrics_listen, &share, srv, &api)) {
		if (unix_path[0])
			unlink(unix_path);
		close(lfd);
		p9_server_close(srv);
		return 1;
	}
	printf("listening on %s\n", desc);
	fflush(stdout);
	pr_info("9p-serve: serving %s%s on %s (9P has no authentication)",
		share.path, share.ro ? " read-only" : "", desc);
	p9_sock_serve(srv, lfd, &(struct p9_sock_limits){
		.max_conns = max_conns,
		.mem_cap = mem_cap,
		/* a quarter each, so that no client takes it all */
		.conn_cap = mem_cap / 4,
		.io_timeout_s = io_timeout_s,
	});
	api_free(api);
	close(lfd);
	return 1;
}
