/* `iovm ctl`: the command-line client of the control socket
 * (--api-socket): one request, its reply printed for people (tables,
 * key: value lines) or as it came (--json). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cmd/commands.h"
#include "cmd/ctl_stats.h"
#include "lib/kvopt.h"
#include "lib/sock.h"

/* The largest reply taken: statistics of many disks and queues fit. */
#define CTL_MAX_REPLY (64u << 20)

/* --watch: the longest interval, seconds. */
#define CTL_MAX_WATCH 3600

/* Exit statuses. */
#define CTL_OK 0
#define CTL_ERROR 1	/* the command answered "error" */
#define CTL_USAGE 2	/* bad usage, no connection, a broken reply */

/* A column of a table: the member shown and how. */
struct ctl_col {
	const char *key;
	const char *head;
	void (*fmt)(struct json_object *v, char *buf, size_t len);
};

/* ---- printers ---- */

static void fmt_plain(struct json_object *v, char *buf, size_t len)
{
	if (!v)
		snprintf(buf, len, "-");
	else if (json_object_is_type(v, json_type_string))
		snprintf(buf, len, "%s", json_object_get_string(v));
	else if (json_object_is_type(v, json_type_boolean))
		snprintf(buf, len, "%s", json_object_get_boolean(v) ? "yes" : "no");
	else
		snprintf(buf, len, "%s",
			 json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Bytes as the largest binary unit that divides them: 64M, 1G, 4096. */
static void fmt_size(struct json_object *v, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	uint64_t n;
	int u = -1;

	if (!v || !json_object_is_type(v, json_type_int)) {
		fmt_plain(v, buf, len);
		return;
	}
	n = json_object_get_uint64(v);
	while (n && !(n & 1023) && u < 5) {
		n >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, n);
	else
		snprintf(buf, len, "%" PRIu64 "%c", n, units[u]);
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	if (json_object_is_type(o, json_type_object))
		json_object_object_get_ex(o, key, &v);
	return v;
}

static void print_cell(const char *s, size_t width, bool last)
{
	if (last)
		printf("%s\n", s);
	else
		printf("%-*s  ", (int)width, s);
}

/* An array of objects as a table, a column per entry of cols, the last
 * column unpadded (paths). */
static int print_table(struct json_object *ret, const struct ctl_col *cols,
		       unsigned int ncols)
{
	size_t n = json_object_is_type(ret, json_type_array) ? json_object_array_length(ret) : 0;
	size_t width[16] = { 0 };
	char cell[512];

	if (!json_object_is_type(ret, json_type_array))
		return -1;
	for (unsigned int c = 0; c < ncols; c++)
		width[c] = strlen(cols[c].head);
	for (size_t r = 0; r < n; r++)
		for (unsigned int c = 0; c < ncols; c++) {
			cols[c].fmt(get(json_object_array_get_idx(ret, r), cols[c].key),
				    cell, sizeof(cell));
			if (strlen(cell) > width[c])
				width[c] = strlen(cell);
		}
	for (unsigned int c = 0; c < ncols; c++)
		print_cell(cols[c].head, width[c], c + 1 == ncols);
	for (size_t r = 0; r < n; r++)
		for (unsigned int c = 0; c < ncols; c++) {
			cols[c].fmt(get(json_object_array_get_idx(ret, r), cols[c].key),
				    cell, sizeof(cell));
			print_cell(cell, width[c], c + 1 == ncols);
		}
	return 0;
}

/* Any value as "key: value" lines; nested members as a.b, a[0]. */
static void print_flat(const char *prefix, struct json_object *v)
{
	char name[256], cell[4096];

	if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, key, val) {
			snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", key);
			print_flat(name, val);
		}
		return;
	}
	if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			snprintf(name, sizeof(name), "%s[%zu]", prefix, i);
			print_flat(name, json_object_array_get_idx(v, i));
		}
		return;
	}
	fmt_plain(v, cell, sizeof(cell));
	printf("%s: %s\n", *prefix ? prefix : "return", cell);
}

static int print_kv(struct json_object *ret)
{
	print_flat("", ret);
	return 0;
}

static int print_disks(struct json_object *ret)
{
	static const struct ctl_col cols[] = {
		{ "name", "NAME", fmt_plain },
		{ "interface", "INTERFACE", fmt_plain },
		{ "size", "SIZE", fmt_size },
		{ "read-only", "RO", fmt_plain },
		{ "cache", "CACHE", fmt_plain },
		{ "queues", "QUEUES", fmt_plain },
		{ "path", "PATH", fmt_plain },
	};

	return print_table(ret, cols, sizeof(cols) / sizeof(cols[0]));
}

static int print_shares(struct json_object *ret)
{
	static const struct ctl_col cols[] = {
		{ "name", "NAME", fmt_plain },
		{ "tag", "TAG", fmt_plain },
		{ "read-only", "RO", fmt_plain },
		{ "msize", "MSIZE", fmt_size },
		{ "security", "SECURITY", fmt_plain },
		{ "path", "PATH", fmt_plain },
	};

	return print_table(ret, cols, sizeof(cols) / sizeof(cols[0]));
}

static int print_commands(struct json_object *ret)
{
	static const struct ctl_col cols[] = {
		{ "name", "COMMAND", fmt_plain },
		{ "summary", "SUMMARY", fmt_plain },
	};

	return print_table(ret, cols, sizeof(cols) / sizeof(cols[0]));
}

/* Whether v is a limit of 0 (none), then printed as "-". */
static bool fmt_no_limit(struct json_object *v, char *buf, size_t len)
{
	if (!v || !json_object_is_type(v, json_type_int) || json_object_get_uint64(v))
		return false;
	snprintf(buf, len, "-");
	return true;
}

static void fmt_limit(struct json_object *v, char *buf, size_t len)
{
	if (!fmt_no_limit(v, buf, len))
		fmt_plain(v, buf, len);
}

/* A bytes limit: binary units. */
static void fmt_limit_size(struct json_object *v, char *buf, size_t len)
{
	if (!fmt_no_limit(v, buf, len))
		fmt_size(v, buf, len);
}

/* query-limits (every disk) and set-limits (the one it changed): a row
 * per disk, each rate beside its burst. */
static int print_limits(struct json_object *ret)
{
	static const struct ctl_col cols[] = {
		{ "disk", "DISK", fmt_plain },
		{ "iops", "IOPS", fmt_limit },
		{ "iops-burst", "BURST", fmt_limit },
		{ "iops-rd", "IOPS-RD", fmt_limit },
		{ "iops-rd-burst", "BURST", fmt_limit },
		{ "iops-wr", "IOPS-WR", fmt_limit },
		{ "iops-wr-burst", "BURST", fmt_limit },
		{ "bps", "BPS", fmt_limit_size },
		{ "bps-burst", "BURST", fmt_limit_size },
		{ "bps-rd", "BPS-RD", fmt_limit_size },
		{ "bps-rd-burst", "BURST", fmt_limit_size },
		{ "bps-wr", "BPS-WR", fmt_limit_size },
		{ "bps-wr-burst", "BURST", fmt_limit_size },
		{ "held", "HELD", fmt_plain },
	};
	struct json_object *rows = ret;
	int r;

	if (json_object_is_type(ret, json_type_object)) {
		rows = json_object_new_array();
		if (!rows)
			return -1;
		json_object_array_add(rows, json_object_get(ret));
	}
	r = print_table(rows, cols, sizeof(cols) / sizeof(cols[0]));
	if (rows != ret)
		json_object_put(rows);
	return r;
}

/* The commands with a short name and a printer of their own; any other
 * name is sent as given and its reply printed as key: value lines. One
 * entry per command: {alias, command, printer, what it shows}. */
static const struct ctl_cmd {
	const char *alias;
	const char *command;
	int (*print)(struct json_object *ret);
	const char *summary;
} ctl_cmds[] = {
	{ "status", "query-status", print_kv,
	  "running, paused or shutting-down; the command, its pid, uptime" },
	{ "version", "query-version", print_kv, "iovm's version" },
	{ "disks", "query-disks", print_disks,
	  "a table of the disks: name, interface, size, read-only, cache, queues, path" },
	{ "shares", "query-shares", print_shares,
	  "a table of the shared folders: name, tag, read-only, msize, security, path" },
	{ "commands", "query-commands", print_commands,
	  "the commands the socket takes, with a line on each" },
	{ "shutdown", "shutdown", print_kv,
	  "finish in-flight I/O, flush, exit (as SIGTERM; iovm run exits 0)" },
	{ "pause", "pause", print_kv, "stop the vCPUs (iovm run only)" },
	{ "resume", "resume", print_kv, "let the vCPUs run again (iovm run only)" },
	{ "limits", "query-limits", print_limits,
	  "a table of the disks' I/O limits, each with its burst (- for none), and the requests they hold now" },
	{ "set-limits", "set-limits", print_limits,
	  "disk=NAME and any of iops=N iops-rd=N iops-wr=N bps=N bps-rd=N bps-wr=N and their -burst=N: change a disk's I/O limits (0 removes one; bytes as plain integers)" },
	{ "resize", "resize", print_kv,
	  "grow a disk: disk=NAME [size=BYTES, 128M, 2G]; no size: what its image has now" },
};

#define NCTL (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static void usage(FILE *f)
{
	fprintf(f,
"Usage: iovm ctl --socket PATH [--json] COMMAND [KEY=VALUE | KEY:=JSON]...\n"
"\n"
"Sends one command to the control socket of a running iovm (iovm run,\n"
"vhost-user-blk, vhost-user-scsi, vhost-user-pci or 9p-serve started with\n"
"--api-socket PATH) and prints its answer: a table for lists of disks,\n"
"shares and commands, \"key: value\" lines for the rest (nested members as\n"
"a.b and a[0]); nothing for a command that answers an empty object.\n"
"\n"
"Options:\n"
"  -s, --socket PATH  the control socket (required)\n"
"  -j, --json         print the reply line itself, as the socket sent it:\n"
"                     {\"return\": ...} or {\"error\": {\"class\": ..., \"desc\": ...}}\n"
"  -h, --help         show this help\n"
"\n"
"COMMAND is a short name below or any command's full name (the full names\n"
"are what `iovm ctl ... commands` lists; docs/api.md describes each, with\n"
"its arguments and reply). Short names:\n");
	for (size_t i = 0; i < NCTL; i++)
		fprintf(f, "  %-10s %-16s %s\n", ctl_cmds[i].alias, ctl_cmds[i].command,
			ctl_cmds[i].summary);
	fprintf(f,
"  stats      query-stats      an iostat -x-like table: per disk (all queues,\n"
"                              then each queue) reads, writes, MB, average and\n"
"                              p99 latency (ms) of reads, writes, flushes, and\n"
"                              requests in flight; per share its 9P requests,\n"
"                              errors, MB read and written, fids, open files.\n"
"                              Once: counts since start. disk=NAME, share=NAME:\n"
"                              only those. --watch N (0.1 to 86400 s): a table\n"
"                              every N seconds of the rates over the last N\n"
"                              seconds (r/s, w/s, rMB/s, wMB/s, f/s; latencies\n"
"                              and p99 of that interval's requests), until\n"
"                              interrupted. --json: each reply as a line\n"
"  metrics    metrics          the statistics in Prometheus text format 0.0.4\n"
"                              (as --metrics-listen serves them; docs/api.md)\n"
"\n"
"Arguments: KEY=VALUE sends an integer if VALUE is one (-12, 4096), true or\n"
"false as booleans, anything else as a string; KEY:=JSON sends the JSON\n"
"value as written (a string that looks like a number: disk:='\"12\"'; an\n"
"object: limits:='{\"iops\": 100}'). resize's size= also takes K, M, G\n"
"and T suffixes (powers of 1024: size=128M is 134217728).\n"
"\n"
"--watch N (among the arguments, e.g. `iovm ctl --socket S status --watch 2`)\n"
"sends the command again every N seconds (1 to 3600), each reply printed\n"
"below the last (a blank line between them), until interrupted or until a\n"
"reply is an error.\n"
"\n"
"Exit status: 0 when the command answered \"return\"; 1 when it answered\n"
"\"error\" (its class and description go to standard error); 2 on bad usage,\n"
"when the socket cannot be reached, or when the reply is not one.\n"
"\n"
"Examples:\n"
"  iovm vhost-user-blk --socket /run/vblk.sock --disk path=disk.img \\\n"
"      --api-socket /run/vblk.api &\n"
"  iovm ctl --socket /run/vblk.api disks\n"
"  iovm ctl --socket /run/vblk.api --json query-status\n"
"  iovm ctl --socket /run/vm.api pause\n"
"  iovm ctl --socket /run/vblk.api set-limits disk=disk0 iops=500 iops-burst=2000\n"
"  iovm ctl --socket /run/vblk.api set-limits disk=disk0 iops=0\n"
"  iovm ctl --socket /run/vblk.api resize disk=disk0 size=128G\n");
}

/* ---- the request ---- */

/* VALUE's JSON: an integer, a boolean, or a string. */
static struct json_object *typed_value(const char *s)
{
	const char *d = s + (*s == '-');
	char *end;

	if (*d >= '0' && *d <= '9') {
		errno = 0;
		if (*s == '-') {
			long long v = strtoll(s, &end, 10);

			if (!*end && !errno)
				return json_object_new_int64(v);
		} else {
			unsigned long long v = strtoull(s, &end, 10);

			if (!*end && !errno)
				return json_object_new_uint64(v);
		}
	}
	if (!strcmp(s, "true") || !strcmp(s, "false"))
		return json_object_new_boolean(s[0] == 't');
	return json_object_new_string(s);
}

/* resize's size= as a person writes it: 128M, 2G, 1T (powers of 1024)
 * become bytes. -1 with a message printed. */
static int size_arg(const char *command, struct json_object *args)
{
	struct json_object *v;
	uint64_t n;

	if (strcmp(command, "resize") || !json_object_object_get_ex(args, "size", &v) ||
	    !json_object_is_type(v, json_type_string))
		return 0;
	if (parse_size(json_object_get_string(v), &n)) {
		fprintf(stderr, "iovm ctl: size=%s is not a size (bytes, or a number with K, M, G or T)\n",
			json_object_get_string(v));
		return -1;
	}
	json_object_object_add(args, "size", json_object_new_uint64(n));
	return 0;
}

/* KEY=VALUE and KEY:=JSON into args. -1 with a message printed. */
static int add_arg(struct json_object *args, const char *arg)
{
	const char *eq = strchr(arg, '=');
	struct json_object *v;
	bool raw;
	char *key;

	if (!eq || eq == arg || (eq == arg + 1 && arg[0] == ':')) {
		fprintf(stderr, "iovm ctl: argument '%s' is not KEY=VALUE or KEY:=JSON\n", arg);
		return -1;
	}
	raw = eq[-1] == ':';
	key = strndup(arg, eq - arg - raw);
	if (!key)
		return -1;
	if (json_object_object_get_ex(args, key, NULL)) {
		fprintf(stderr, "iovm ctl: argument '%s' is given twice\n", key);
		free(key);
		return -1;
	}
	if (raw) {
		enum json_tokener_error e;

		v = json_tokener_parse_verbose(eq + 1, &e);
		if (!v && e != json_tokener_success) {
			fprintf(stderr, "iovm ctl: %s:=%s is not JSON: %s\n", key, eq + 1,
				json_tokener_error_desc(e));
			free(key);
			return -1;
		}
	} else {
		v = typed_value(eq + 1);
	}
	json_object_object_add(args, key, v);
	free(key);
	return 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) > SOCK_UNIX_PATH_MAX) {
		fprintf(stderr, "iovm ctl: --socket %s: path longer than %zu bytes\n", path,
			SOCK_UNIX_PATH_MAX);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "iovm ctl: cannot connect to %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* One reply line (newline removed), malloc'd; NULL with a message. */
static char *read_line(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *nl = NULL;

	while (buf && !nl) {
		ssize_t n;

		if (len + 1 >= cap) {
			char *b = cap >= CTL_MAX_REPLY ? NULL : realloc(buf, cap * 2);

			if (!b) {
				fprintf(stderr, "iovm ctl: the reply is longer than %u bytes\n",
					CTL_MAX_REPLY);
				free(buf);
				return NULL;
			}
			buf = b;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "iovm ctl: the socket closed without a reply%s%s\n",
				n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			free(buf);
			return NULL;
		}
		nl = memchr(buf + len, '\n', n);
		len += n;
	}
	if (nl)
		*nl = 0;
	return buf;
}

/* Sends the request; returns the reply, or NULL with a message. */
static struct json_object *call(const char *path, const char *command,
				struct json_object *args, char **line)
{
	struct json_object *req = json_object_new_object(), *reply;
	const char *text;
	size_t len;
	char *msg;
	int fd;

	*line = NULL;
	json_object_object_add(req, "execute", json_object_new_string(command));
	if (json_object_object_length(args))
		json_object_object_add(req, "arguments", json_object_get(args));
	text = json_object_to_json_string_length(req, JSON_C_TO_STRING_PLAIN |
						 JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	msg = malloc(len + 1);
	if (!msg) {
		json_object_put(req);
		return NULL;
	}
	memcpy(msg, text, len);
	msg[len] = '\n';
	json_object_put(req);
	fd = connect_to(path);
	if (fd < 0) {
		free(msg);
		return NULL;
	}
	if (send_all(fd, msg, len + 1)) {
		fprintf(stderr, "iovm ctl: %s: %s\n", path, strerror(errno));
		free(msg);
		close(fd);
		return NULL;
	}
	free(msg);
	*line = read_line(fd);
	close(fd);
	if (!*line)
		return NULL;
	reply = json_tokener_parse(*line);
	if (!json_object_is_type(reply, json_type_object)) {
		fprintf(stderr, "iovm ctl: the reply is not a JSON object: %.200s\n", *line);
		json_object_put(reply);
		return NULL;
	}
	return reply;
}

/* ctl_stats.h's ctl_call_fn over call(): ctx is the socket's path. */
static struct json_object *stats_call(void *ctx, const char *command,
				      struct json_object *args, char *err,
				      size_t errlen)
{
	struct json_object *none = args ? NULL : json_object_new_object();
	struct json_object *reply, *ret = NULL, *e;
	char *line;

	reply = call(ctx, command, args ? args : none, &line);
	json_object_put(none);
	if (!reply)
		snprintf(err, errlen, "no reply from %s", (const char *)ctx);
	else if (json_object_object_get_ex(reply, "error", &e))
		snprintf(err, errlen, "%s: %s", json_object_get_string(get(e, "class")),
			 json_object_get_string(get(e, "desc")));
	else if (json_object_object_get_ex(reply, "return", &ret))
		json_object_get(ret);
	else
		snprintf(err, errlen, "the reply has no \"return\"");
	json_object_put(reply);
	free(line);
	return ret;
}

static const struct ctl_cmd *find(const char *name)
{
	for (size_t i = 0; i < NCTL; i++)
		if (!strcmp(name, ctl_cmds[i].alias) || !strcmp(name, ctl_cmds[i].command))
			return &ctl_cmds[i];
	return NULL;
}

/* Prints the reply; the exit status. */
static int show(struct json_object *reply, const char *line, const struct ctl_cmd *cmd,
		bool json)
{
	struct json_object *ret, *err;

	if (json_object_object_get_ex(reply, "error", &err)) {
		if (json)
			printf("%s\n", line);
		fprintf(stderr, "iovm ctl: %s: %s\n",
			json_object_get_string(get(err, "class")),
			json_object_get_string(get(err, "desc")));
		return CTL_ERROR;
	}
	if (!json_object_object_get_ex(reply, "return", &ret)) {
		fprintf(stderr, "iovm ctl: the reply has neither \"return\" nor \"error\": %.200s\n",
			line);
		return CTL_USAGE;
	}
	if (json)
		printf("%s\n", line);
	else if ((cmd ? cmd->print : print_kv)(ret))
		print_kv(ret);	/* not the shape the printer knows */
	return CTL_OK;
}

int cmd_ctl(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *command;
	const struct ctl_cmd *cmd;
	struct json_object *args, *reply;
	unsigned long watch = 0;
	bool json = false;
	char *line, *end;
	int opt, status;

	optind = 1;
	opterr = 0;
	/* "+": options end at COMMAND; what follows is its arguments. */
	while ((opt = getopt_long(argc, argv, "+:s:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return CTL_OK;
		case ':':
			fprintf(stderr, "iovm ctl: option '%s' needs a value (see iovm ctl --help)\n",
				argv[optind - 1]);
			return CTL_USAGE;
		default:
			fprintf(stderr, "iovm ctl: unknown option '%s' (see iovm ctl --help)\n",
				argv[optind - 1]);
			return CTL_USAGE;
		}
	}
	if (!path || !*path) {
		fprintf(stderr, "iovm ctl: --socket PATH is required (see iovm ctl --help)\n");
		return CTL_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "iovm ctl: no COMMAND given (see iovm ctl --help)\n");
		return CTL_USAGE;
	}
	command = argv[optind++];
	/* Statistics: tables and rates of their own (cmd/ctl_stats.c). */
	if (!strcmp(command, "stats"))
		return ctl_stats_main(argc - optind, argv + optind, json, stats_call,
				      (void *)path);
	if (!strcmp(command, "metrics"))
		return ctl_metrics_main(argc - optind, argv + optind, json,
					stats_call, (void *)path);
	cmd = find(command);
	if (cmd)
		command = cmd->command;
	args = json_object_new_object();
	for (; optind < argc; optind++) {
		if (!strcmp(argv[optind], "--watch")) {
			const char *v = optind + 1 < argc ? argv[++optind] : "";

			watch = strtoul(v, &end, 10);
			if (*v < '1' || *v > '9' || *end || watch > CTL_MAX_WATCH) {
				fprintf(stderr, "iovm ctl: --watch wants seconds from 1 to %u, got '%s'\n",
					CTL_MAX_WATCH, v);
				json_object_put(args);
				return CTL_USAGE;
			}
		} else if (add_arg(args, argv[optind])) {
			json_object_put(args);
			return CTL_USAGE;
		}
	}
	if (size_arg(command, args)) {
		json_object_put(args);
		return CTL_USAGE;
	}
	for (unsigned long round = 0;; round++) {
		reply = call(path, command, args, &line);
		if (!reply) {
			status = CTL_USAGE;
			free(line);
			break;
		}
		if (round && !json)
			putchar('\n');	/* reports apart, as iostat's */
		status = show(reply, line, cmd, json);
		json_object_put(reply);
		free(line);
		fflush(stdout);
		if (!watch || status)
			break;
		sleep(watch);
	}
	json_object_put(args);
	return status;
}
