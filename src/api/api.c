/* The control socket's server: one thread polls the listening socket, up to
 * API_MAX_CLIENTS clients and a wake eventfd; each client's lines are
 * parsed (proto.c), run by their command's handler and answered in order. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/log.h"
#include "lib/sock.h"

struct api_cmd {
	const char *name;
	const char *summary;
	api_fn fn;
	void *opaque;
};

struct api_client {
	int fd;			/* -1: a free slot */
	char *in;		/* API_MAX_LINE + 1: a line and its newline */
	size_t inlen;
	bool discarding;	/* the rest of an oversized line */
	bool eof;		/* hung up: send what is queued, then close */
	char *out;		/* replies not yet sent */
	size_t outlen, outoff, outcap;
};

/* api_alloc's blocks, freed with the server. */
struct api_mem {
	struct api_mem *next;
	max_align_t data[];
};

struct api_server {
	struct api_mem *mem;
	struct api_cmd *cmds;
	unsigned int ncmds;
	int lfd;
	int wake_fd;
	pthread_t thread;
	bool running;
	char path[SOCK_UNIX_PATH_MAX + 1];
	dev_t dev;		/* of the socket file, to remove only ours */
	ino_t ino;
	struct api_client c[API_MAX_CLIENTS];
};

struct api_server *api_new(void)
{
	struct api_server *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->lfd = -1;
	s->wake_fd = -1;
	for (unsigned int i = 0; i < API_MAX_CLIENTS; i++)
		s->c[i].fd = -1;
	return s;
}

int api_register(struct api_server *s, const char *name, api_fn fn,
		 void *opaque, const char *summary)
{
	struct api_cmd *n;

	if (s->running)
		return -EBUSY;
	for (unsigned int i = 0; i < s->ncmds; i++)
		if (!strcmp(s->cmds[i].name, name))
			return -EEXIST;
	n = realloc(s->cmds, (s->ncmds + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->cmds = n;
	s->cmds[s->ncmds++] = (struct api_cmd){ name, summary, fn, opaque };
	return 0;
}

void *api_alloc(struct api_server *s, size_t size)
{
	struct api_mem *m = calloc(1, sizeof(*m) + size);

	if (!m)
		return NULL;
	m->next = s->mem;
	s->mem = m;
	return m->data;
}

int api_command_at(struct api_server *s, unsigned int i, const char **name,
		   const char **summary)
{
	if (i >= s->ncmds)
		return -1;
	*name = s->cmds[i].name;
	*summary = s->cmds[i].summary;
	return 0;
}

static const struct api_cmd *find_cmd(struct api_server *s, const char *name)
{
	for (unsigned int i = 0; i < s->ncmds; i++)
		if (!strcmp(s->cmds[i].name, name))
			return &s->cmds[i];
	return NULL;
}

/* ---- replies ---- */

static void drop_client(struct api_client *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->in);
	free(c->out);
	c->in = c->out = NULL;
	c->inlen = c->outlen = c->outoff = c->outcap = 0;
	c->discarding = c->eof = false;
}

/* Sends what the socket takes now; never waits. -1 when the client is
 * gone. */
static int flush_out(struct api_client *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		c->outoff += n;
	}
	c->outoff = c->outlen = 0;
	return 0;
}

/* Queues one reply line whole. -1: the client has more unread replies
 * than API_MAX_OUTPUT and is to be dropped. */
static int queue_line(struct api_client *c, const char *text, size_t len)
{
	size_t pending = c->outlen - c->outoff;

	if (pending + len + 1 > API_MAX_OUTPUT) {
		pr_warn("api: a client left %zu bytes of replies unread; disconnected", pending);
		return -1;
	}
	if (c->outoff) {	/* keep what is unsent at the start */
		memmove(c->out, c->out + c->outoff, pending);
		c->outoff = 0;
		c->outlen = pending;
	}
	if (c->outlen + len + 1 > c->outcap) {
		size_t cap = c->outcap ? c->outcap : 4096;
		char *n;

		while (cap < c->outlen + len + 1)
			cap *= 2;
		if (cap > API_MAX_OUTPUT)
			cap = API_MAX_OUTPUT;
		n = realloc(c->out, cap);
		if (!n)
			return -1;
		c->out = n;
		c->outcap = cap;
	}
	memcpy(c->out + c->outlen, text, len);
	c->out[c->outlen + len] = '\n';
	c->outlen += len + 1;
	return 0;
}

/* The reply object for req (its ret, or its error), with id echoed. */
static struct json_object *make_reply(struct api_req *req, struct json_object *id,
				      bool ok)
{
	struct json_object *r = json_object_new_object(), *e;

	if (!r)
		return NULL;
	if (ok) {
		json_object_object_add(r, "return", req->ret ? req->ret : json_object_new_object());
		req->ret = NULL;
	} else {
		e = json_object_new_object();
		json_object_object_add(e, "class", json_object_new_string(req->err_class));
		json_object_object_add(e, "desc", json_object_new_string(req->err_desc));
		json_object_object_add(r, "error", e);
	}
	if (id)
		json_object_object_add(r, "id", json_object_get(id));
	return r;
}

static int send_reply(struct api_client *c, struct json_object *r)
{
	const char *text;
	size_t len;
	int ret;

	if (!r)
		return -1;
	text = json_object_to_json_string_length(r, JSON_C_TO_STRING_PLAIN |
						 JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	ret = text ? queue_line(c, text, len) : -1;
	json_object_put(r);
	return ret;
}

static int send_error(struct api_client *c, const char *cls, const char *desc)
{
	struct api_req req = { 0 };

	api_error(&req, cls, "%s", desc);
	return send_reply(c, make_reply(&req, NULL, false));
}

/* One request line (without its newline): parse, run, answer. */
static int serve_line(struct api_server *s, struct api_client *c, const char *line,
		      size_t len)
{
	struct json_object *root, *id;
	const struct api_cmd *cmd;
	struct api_req req;
	const char *name;
	bool ok = false;
	int ret;

	if (!api_parse_request(line, len, &root, &name, &id, &req)) {
		cmd = find_cmd(s, name);
		if (!cmd)
			api_error(&req, API_ERR_NOT_FOUND,
				  "unknown command '%.64s' (query-commands lists them)", name);
		else if (!cmd->fn(cmd->opaque, &req))
			ok = true;
		else if (!req.err_class[0])	/* a handler that forgot why */
			api_error(&req, API_ERR_GENERIC, "%s failed", cmd->name);
	}
	if (!ok) {
		json_object_put(req.ret);
		req.ret = NULL;
	}
	ret = send_reply(c, make_reply(&req, id, ok));
	json_object_put(root);
	if (ok && req.after) {
		/* The reply goes first, as far as the socket takes it now. */
		if (!ret)
			ret = flush_out(c);
		req.after(req.after_opaque);
	}
	return ret;
}

/* Reads what the client sent and answers every whole line in it. -1:
 * drop the client (gone, or not reading its replies). */
static int client_readable(struct api_server *s, struct api_client *c)
{
	size_t cap = API_MAX_LINE + 1, start = 0;
	ssize_t n;
	char *nl;

	n = recv(c->fd, c->in + c->inlen, cap - c->inlen, MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	if (!n) {
		/* A line cut short by the hang-up is dropped; replies
		 * already queued still go out. */
		c->eof = true;
		return flush_out(c);
	}
	c->inlen += n;
	while ((nl = memchr(c->in + start, '\n', c->inlen - start))) {
		size_t len = nl - (c->in + start);

		if (c->discarding)
			c->discarding = false;	/* its error went out already */
		else if (serve_line(s, c, c->in + start, len))
			return -1;
		start += len + 1;
	}
	if (start) {
		memmove(c->in, c->in + start, c->inlen - start);
		c->inlen -= start;
	}
	if (c->inlen == cap) {
		/* No newline in API_MAX_LINE + 1 bytes: one error for the
		 * line, whose rest is skipped up to its newline. */
		if (!c->discarding) {
			char desc[80];

			snprintf(desc, sizeof(desc), "request longer than %u bytes", API_MAX_LINE);
			if (send_error(c, API_ERR_GENERIC, desc))
				return -1;
		}
		c->discarding = true;
		c->inlen = 0;
	}
	return flush_out(c);
}

static void accept_client(struct api_server *s)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	static const char full[] = "{\"error\":{\"class\":\"GenericError\",\"desc\":"
				   "\"too many clients (at most 16 at once)\"}}\n";
	struct api_client *c = NULL;

	_Static_assert(API_MAX_CLIENTS == 16, "the message above says 16");
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			pr_warn("api: accept: %s", strerror(errno));
		return;
	}
	for (unsigned int i = 0; i < API_MAX_CLIENTS && !c; i++)
		if (s->c[i].fd < 0)
			c = &s->c[i];
	if (c)
		c->in = malloc(API_MAX_LINE + 1);
	if (!c || !c->in) {
		if (send(fd, full, sizeof(full) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			pr_debug("api: a client over the limit: %s", strerror(errno));
		close(fd);
		return;
	}
	c->fd = fd;
}

static void *api_thread(void *arg)
{
	struct api_server *s = arg;
	struct pollfd p[2 + API_MAX_CLIENTS];

	pthread_setname_np(pthread_self(), "api");
	for (;;) {
		unsigned int n = 2;
		struct api_client *who[API_MAX_CLIENTS];

		p[0] = (struct pollfd){ .fd = s->wake_fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
		for (unsigned int i = 0; i < API_MAX_CLIENTS; i++) {
			struct api_client *c = &s->c[i];

			if (c->fd < 0)
				continue;
			/* Read on while replies wait: a client that sends but
			 * does not read reaches API_MAX_OUTPUT and goes. */
			p[n] = (struct pollfd){ .fd = c->fd,
				.events = (c->eof ? 0 : POLLIN) |
					  (c->outlen > c->outoff ? POLLOUT : 0) };
			who[n - 2] = c;
			n++;
		}
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("api: poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents)
			break;
		for (unsigned int i = 2; i < n; i++) {
			struct api_client *c = who[i - 2];
			int ret = 0;

			if (!p[i].revents)
				continue;
			if (p[i].revents & POLLOUT)
				ret = flush_out(c);
			if (!ret && !c->eof && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				ret = client_readable(s, c);
			else if (!ret && (p[i].revents & (POLLHUP | POLLERR)))
				ret = -1;	/* gone with replies unsent */
			if (ret || (p[i].revents & POLLNVAL) ||
			    (c->eof && c->outlen == c->outoff))
				drop_client(c);
		}
		if (p[1].revents & POLLIN)
			accept_client(s);
	}
	return NULL;
}

/* A socket at path that a live server still answers on is not stale. */
static bool socket_in_use(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	bool live;
	int fd;

	if (lstat(path, &st) || !S_ISSOCK(st.st_mode) || strlen(path) > SOCK_UNIX_PATH_MAX)
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	strcpy(sa.sun_path, path);
	live = !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return live;
}

int api_listen(struct api_server *s, const char *path, char *err,
	       size_t errlen)
{
	sigset_t all, old;
	struct stat st;
	int ret;

	if (s->running)
		return -EBUSY;
	if (socket_in_use(path)) {
		snprintf(err, errlen, "--api-socket %s: another process is listening there", path);
		return -EADDRINUSE;
	}
	s->lfd = sock_listen_unix_mode(path, API_MAX_CLIENTS, 0600);
	if (s->lfd < 0) {
		ret = s->lfd;
		s->lfd = -1;
		if (ret == -ENAMETOOLONG)
			snprintf(err, errlen, "--api-socket %s: path longer than %zu bytes", path,
				 SOCK_UNIX_PATH_MAX);
		else if (ret == -EEXIST)
			snprintf(err, errlen, "--api-socket %s: exists and is not a socket", path);
		else if (ret == -EPERM)
			snprintf(err, errlen, "--api-socket %s: the socket could not be made "
				 "with mode 0600", path);
		else
			snprintf(err, errlen, "--api-socket %s: %s", path, strerror(-ret));
		return ret;
	}
	strcpy(s->path, path);
	if (!lstat(path, &st)) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "--api-socket: eventfd: %s", strerror(-ret));
		goto fail;
	}
	/* The thread takes no signals: the command's main thread (or its
	 * signalfd) handles SIGTERM & co, whichever thread is running. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&s->thread, NULL, api_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		snprintf(err, errlen, "--api-socket: cannot start its thread: %s", strerror(-ret));
		goto fail;
	}
	s->running = true;
	return 0;
fail:
	close(s->lfd);
	s->lfd = -1;
	unlink(path);
	s->path[0] = 0;
	return ret;
}

void api_free(struct api_server *s)
{
	struct stat st;
	uint64_t one = 1;

	if (!s)
		return;
	if (s->running) {
		if (write(s->wake_fd, &one, sizeof(one)) < 0)
			pr_warn("api: wake: %s", strerror(errno));
		pthread_join(s->thread, NULL);
	}
	for (unsigned int i = 0; i < API_MAX_CLIENTS; i++)
		if (s->c[i].fd >= 0)
			drop_client(&s->c[i]);
	if (s->lfd >= 0)
		close(s->lfd);
	/* Only our socket: another process may have taken the path since. */
	if (s->path[0] && !lstat(s->path, &st) && st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(s->path);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	free(s->cmds);
	while (s->mem) {
		struct api_mem *m = s->mem;

		s->mem = m->next;
		free(m);
	}
	free(s);
}
