/* `iovm 9p-serve`: the 9P2000.L server over a stream socket (UNIX or TCP),
 * one session per connection. Each connection has a reader thread that
 * frames messages into a fixed set of reusable slots and a few workers
 * that serve them concurrently, so a slow read does not hold up a getattr. */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "config.h"
#include "lib/kvopt.h"
#include "lib/log.h"
#include "lib/sock.h"
#include "p9/proto.h"
#include "p9/server.h"

#define SLOTS 16	/* requests in flight per connection */
#define WORKERS 4	/* threads serving one connection */
/* A slot always keeps buffers up to this size: any metadata request and
 * its reply (p9_reply_room: 512 + a 4095-byte readlink target + the
 * request) fit, so the metadata path never reallocates. */
#define SLOT_KEEP 16384

struct slot {
	struct p9_req req;
	uint8_t *in, *out;
	size_t incap, outcap, len;
	struct slot *next;	/* ready queue */
};

struct conn {
	int fd;
	struct p9_session *sess;
	pthread_mutex_t send_lock;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct slot slots[SLOTS];
	struct slot *free_list;
	struct slot *ready_head, *ready_tail;
	unsigned int inflight;
	bool stopping;
	/* Bytes of slot buffers held. Above twice msize when a slot is
	 * freed, its buffers beyond SLOT_KEEP go back to the heap: a burst of
	 * msize reads or writes leaves at most that much behind, instead of
	 * SLOTS buffers of msize each way for the connection's life. */
	atomic_size_t held;
	pthread_t workers[WORKERS];
};

static atomic_uint nconns;
static unsigned int max_conns = 64;
#define MAX_CONNS 4096
/* Message buffers of all connections together (--buffer-memory), and of
 * one connection: a quarter of that, so that no client takes it all. A
 * request whose buffers would go past either gets Rlerror ENOMEM. */
static size_t mem_cap, conn_cap;
static atomic_size_t mem_held;
#define MEM_CAP_DEFAULT (256u << 20)
static char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* SIGTERM/SIGINT: every reply sent so far is already in the host's files
 * (pwritev returned before the reply), so stopping needs no draining; the
 * UNIX socket is removed so the path is free again. */
static void on_term(int sig)
{
	if (unix_path[0])
		unlink(unix_path);
	_exit(0);
}

/* --io-timeout: how long a connection may make no progress in the middle
 * of a message it sends, or leave a reply untaken, before it is closed
 * (0: forever). Set on each connection's socket as SO_RCVTIMEO and
 * SO_SNDTIMEO, so it costs no system call per message; a connection that
 * is idle between messages is kept however long. */
static unsigned int io_timeout_s = 60;
#define IO_TIMEOUT_MAX 86400

/* Reads len bytes. idle: nothing of this message has arrived yet, so a
 * receive timeout only means the client is quiet (wait on). */
static int read_full(int fd, void *buf, size_t len, bool idle)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (idle)
				continue;
			pr_warn("9p-serve: client sent nothing for %u s in the middle of a message: closing the connection",
				io_timeout_s);
			return -ETIMEDOUT;
		}
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		idle = false;
		p += n;
		len -= n;
	}
	return 0;
}

static int send_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			pr_warn("9p-serve: client took no reply for %u s: closing the connection",
				io_timeout_s);
		if (n <= 0)
			return -errno;
		p += n;
		len -= n;
	}
	return 0;
}

/* Grows a slot buffer to at least need bytes (sized from the request,
 * never above the negotiated msize), counting it in c->held and in
 * mem_held; refused past conn_cap or mem_cap. */
static int ensure(struct conn *c, uint8_t **buf, size_t *cap, size_t need)
{
	size_t grow;
	uint8_t *p;

	if (*cap >= need)
		return 0;
	grow = need - *cap;
	if (atomic_fetch_add(&mem_held, grow) + grow > mem_cap) {
		atomic_fetch_sub(&mem_held, grow);
		return -ENOMEM;
	}
	if (atomic_fetch_add(&c->held, grow) + grow > conn_cap) {
		atomic_fetch_sub(&c->held, grow);
		atomic_fetch_sub(&mem_held, grow);
		return -ENOMEM;
	}
	p = realloc(*buf, need);
	if (!p) {
		atomic_fetch_sub(&c->held, grow);
		atomic_fetch_sub(&mem_held, grow);
		return -ENOMEM;
	}
	*buf = p;
	*cap = need;
	return 0;
}

static void free_buf(struct conn *c, uint8_t **buf, size_t *cap)
{
	free(*buf);
	atomic_fetch_sub(&c->held, *cap);
	atomic_fetch_sub(&mem_held, *cap);
	*buf = NULL;
	*cap = 0;
}

/* A buffer beyond SLOT_KEEP goes back to the heap once its request is
 * done when the connection holds more than twice msize (see conn.held) or
 * all connections more than half of mem_cap. */
static void trim_buf(struct conn *c, uint8_t **buf, size_t *cap)
{
	if (*cap <= SLOT_KEEP)
		return;
	if (atomic_load(&c->held) <= 2 * (size_t)p9_session_msize(c->sess) &&
	    atomic_load(&mem_held) <= mem_cap / 2)
		return;
	free_buf(c, buf, cap);
}

/* Called as a slot goes free. */
static void trim_slot(struct conn *c, struct slot *s)
{
	trim_buf(c, &s->in, &s->incap);
	trim_buf(c, &s->out, &s->outcap);
}

static void send_error(struct conn *c, uint16_t tag, int err)
{
	struct p9_msg m = { .type = P9_RLERROR, .tag = tag };
	uint8_t e[11];

	m.u.rlerror.ecode = err;
	p9_encode(&m, e, sizeof(e));
	pthread_mutex_lock(&c->send_lock);
	if (send_full(c->fd, e, sizeof(e)))
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->send_lock);
}

static void serve_slot(struct conn *c, struct slot *s)
{
	struct iovec in = { s->in, s->len };
	struct iovec out;
	size_t rlen;

	if (ensure(c, &s->out, &s->outcap,
		   p9_reply_room(c->sess, &s->req, &in, 1))) {
		/* No memory for a reply buffer: say so from the stack. */
		send_error(c, p9_get16(s->in + 5), ENOMEM);
	} else {
		out = (struct iovec){ s->out, s->outcap };
		rlen = p9_handle(c->sess, &s->req, &in, 1, &out, 1);
		/* A large request's buffer is done with: given back before
		 * the reply leaves, so a client that has its reply knows the
		 * memory is free again. */
		trim_buf(c, &s->in, &s->incap);
		pthread_mutex_lock(&c->send_lock);
		if (rlen && send_full(c->fd, s->out, rlen))
			shutdown(c->fd, SHUT_RDWR);
		pthread_mutex_unlock(&c->send_lock);
	}
	p9_req_end(c->sess, &s->req);
	trim_slot(c, s);
	pthread_mutex_lock(&c->lock);
	s->next = c->free_list;
	c->free_list = s;
	c->inflight--;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void *worker_main(void *arg)
{
	struct conn *c = arg;

	for (;;) {
		struct slot *s;

		pthread_mutex_lock(&c->lock);
		while (!c->ready_head && !c->stopping)
			pthread_cond_wait(&c->cond, &c->lock);
		s = c->ready_head;
		if (!s) {
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		c->ready_head = s->next;
		if (!c->ready_head)
			c->ready_tail = NULL;
		pthread_mutex_unlock(&c->lock);
		serve_slot(c, s);
	}
}

static struct slot *get_slot(struct conn *c)
{
	struct slot *s;

	pthread_mutex_lock(&c->lock);
	while (!c->free_list)
		pthread_cond_wait(&c->cond, &c->lock);
	s = c->free_list;
	c->free_list = s->next;
	c->inflight++;
	pthread_mutex_unlock(&c->lock);
	return s;
}

static void put_slot(struct conn *c, struct slot *s)
{
	trim_slot(c, s);
	pthread_mutex_lock(&c->lock);
	s->next = c->free_list;
	c->free_list = s;
	c->inflight--;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void quiesce(struct conn *c, unsigned int keep)
{
	pthread_mutex_lock(&c->lock);
	while (c->inflight > keep)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* A message no buffer could be had for: read past it and answer ENOMEM,
 * which keeps the stream's framing. */
static int refuse_message(struct conn *c, uint32_t size)
{
	uint8_t buf[4096];
	uint32_t left;
	uint16_t tag;
	int ret;

	ret = read_full(c->fd, buf, P9_HDRSZ - 4, false);	/* type[1] tag[2] */
	if (ret)
		return ret;
	tag = p9_get16(buf + 1);
	for (left = size - P9_HDRSZ; left;) {
		uint32_t n = left < sizeof(buf) ? left : sizeof(buf);

		ret = read_full(c->fd, buf, n, false);
		if (ret)
			return ret;
		left -= n;
	}
	send_error(c, tag, ENOMEM);
	return 1;
}

/* Reads one message into a slot: 0, 1 when the message was answered
 * already (no memory for it), or -errno. A length outside [7, msize]
 * loses the framing of the stream: the connection is closed. */
static int read_message(struct conn *c, struct slot *s)
{
	uint8_t hdr[4];
	uint32_t size, msize = p9_session_msize(c->sess);
	int ret;

	ret = read_full(c->fd, hdr, 4, true);
	if (ret)
		return ret;
	size = p9_get32(hdr);
	if (size < P9_HDRSZ || size > msize) {
		pr_warn("9p-serve: client sent a %u-byte message (msize %u): closing the connection",
			size, msize);
		return -EPROTO;
	}
	if (ensure(c, &s->in, &s->incap, size))
		return refuse_message(c, size);
	memcpy(s->in, hdr, 4);
	s->len = size;
	return read_full(c->fd, s->in + 4, size - 4, false);
}

static void conn_run(struct conn *c)
{
	for (;;) {
		struct slot *s = get_slot(c);
		struct iovec in;
		int ret = read_message(c, s);

		if (ret) {
			put_slot(c, s);
			if (ret > 0)
				continue;
			return;
		}
		in = (struct iovec){ s->in, s->len };
		if (s->in[4] == P9_TVERSION) {
			/* Tversion resets the session and changes msize:
			 * served alone, before the next message is read. */
			quiesce(c, 1);
			p9_req_begin(c->sess, &s->req, &in, 1);
			serve_slot(c, s);
			continue;
		}
		p9_req_begin(c->sess, &s->req, &in, 1);
		if (!p9_req_may_block(&s->req)) {
			/* quick metadata: cheaper here than a hand-off */
			serve_slot(c, s);
			continue;
		}
		pthread_mutex_lock(&c->lock);
		s->next = NULL;
		if (c->ready_tail)
			c->ready_tail->next = s;
		else
			c->ready_head = s;
		c->ready_tail = s;
		pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
}

struct conn_arg {
	int fd;
	struct p9_server *srv;
};

static void *conn_main(void *p)
{
	struct conn_arg *a = p;
	struct conn *c = calloc(1, sizeof(*c));
	unsigned int started = 0;

	if (!c)
		goto out;
	c->fd = a->fd;
	atomic_init(&c->held, 0);
	c->sess = p9_session_new(a->srv);
	if (!c->sess)
		goto out;
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	for (int i = SLOTS - 1; i >= 0; i--) {
		c->slots[i].next = c->free_list;
		c->free_list = &c->slots[i];
	}
	for (; started < WORKERS; started++)
		if (pthread_create(&c->workers[started], NULL, worker_main, c))
			break;
	if (started)
		conn_run(c);
	quiesce(c, 0);
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	for (unsigned int i = 0; i < started; i++)
		pthread_join(c->workers[i], NULL);
	for (int i = 0; i < SLOTS; i++) {
		free_buf(c, &c->slots[i].in, &c->slots[i].incap);
		free_buf(c, &c->slots[i].out, &c->slots[i].outcap);
	}
	p9_session_free(c->sess);
	pthread_mutex_destroy(&c->send_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
out:
	free(c);
	close(a->fd);
	free(a);
	atomic_fetch_sub(&nconns, 1);
	pr_debug("9p-serve: connection closed");
	return NULL;
}

/* "unix:PATH", "tcp:PORT", "tcp:HOST:PORT" (IPv6 as [ADDR]:PORT). */
static int listen_on(const char *spec, char *desc, size_t desclen)
{
	int fd, one = 1;

	if (!strncmp(spec, "unix:", 5)) {
		const char *path = spec + 5;

		if (!*path || strlen(path) > SOCK_UNIX_PATH_MAX) {
			pr_err("--listen %s: the socket path must be 1 to %zu bytes",
			       spec, SOCK_UNIX_PATH_MAX);
			return -EINVAL;
		}
		fd = sock_listen_unix(path, 16);
		if (fd < 0) {
			/* Any other file at path is not touched: the path is
			 * in use, as bind would say. */
			pr_err("--listen %s: %s", spec,
			       strerror(fd == -EEXIST ? EADDRINUSE : -fd));
			return -EINVAL;
		}
		snprintf(desc, desclen, "unix:%s", path);
		strcpy(unix_path, path);
		return fd;
	}
	if (!strncmp(spec, "tcp:", 4)) {
		char host[256] = "127.0.0.1", port[16], *colon;
		const char *rest = spec + 4;
		struct addrinfo hints = { .ai_family = AF_UNSPEC,
					  .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
		struct addrinfo *ai;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char h[NI_MAXHOST], sv[NI_MAXSERV];
		int err;

		colon = strrchr(rest, ':');
		if (colon) {
			size_t hl = colon - rest;

			if (hl >= sizeof(host) || !hl) {
				pr_err("--listen %s: bad host", spec);
				return -EINVAL;
			}
			memcpy(host, rest, hl);
			host[hl] = 0;
			if (host[0] == '[' && host[hl - 1] == ']') {
				memmove(host, host + 1, hl - 2);
				host[hl - 2] = 0;
			}
			rest = colon + 1;
		}
		if (!*rest || strlen(rest) >= sizeof(port) ||
		    strspn(rest, "0123456789") != strlen(rest) ||
		    atoi(rest) > 65535) {
			pr_err("--listen %s: the port must be a number from 0 to 65535", spec);
			return -EINVAL;
		}
		strcpy(port, rest);
		err = getaddrinfo(host, port, &hints, &ai);
		if (err) {
			pr_err("--listen %s: %s", spec, gai_strerror(err));
			return -EINVAL;
		}
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) ||
		    listen(fd, 16)) {
			pr_err("--listen %s: %s", spec, strerror(errno));
			if (fd >= 0)
				close(fd);
			freeaddrinfo(ai);
			return -EINVAL;
		}
		freeaddrinfo(ai);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), sv,
			    sizeof(sv), NI_NUMERICHOST | NI_NUMERICSERV);
		snprintf(desc, desclen, strchr(h, ':') ? "tcp:[%s]:%s" : "tcp:%s:%s",
			 h, sv);
		return fd;
	}
	pr_err("--listen %s: expected unix:PATH, tcp:PORT or tcp:HOST:PORT", spec);
	return -EINVAL;
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
"        Closes a connection that, in the middle of a message, sends nothing\n"
"        for SECONDS, or that takes no reply (or none of its bytes) for\n"
"        SECONDS: its buffers go back to the others. 0 to %d, default 60;\n"
"        0 waits forever. A connection idle between messages is kept.\n"
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
"%d requests in flight (served by %d threads), 1 MiB of extended-attribute\n"
"values. A request whose buffers would go past --buffer-memory (or the\n"
"connection's quarter of it) gets ENOMEM; the connection goes on. Between\n"
"requests a connection keeps at most 2 x msize of large buffers (none\n"
"once the total is above half).\n"
"\n"
"Runs until SIGTERM or SIGINT, which end it with status 0 (a UNIX socket\n"
"is removed). Exit status 1 on a setup error, 2 on a usage error.\n",
		MAX_CONNS, P9_MIN_SESSION_FDS, IO_TIMEOUT_MAX, P9_FD_RESERVE,
		SLOTS, WORKERS);
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
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct share_cfg share = { 0 };
	struct p9_server_cfg cfg = { 0 };
	struct p9_server *srv;
	const char *listen_spec = NULL;
	bool have_share = false;
	char err[512], desc[300];
	size_t slot_min;
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
		case 'm':
			if (parse_uint(optarg, 1, MAX_CONNS, &v)) {
				fprintf(stderr, "iovm: --max-connections %s: expected 1 to %d\n",
					optarg, MAX_CONNS);
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
			if (parse_uint(optarg, 0, IO_TIMEOUT_MAX, &v)) {
				fprintf(stderr, "iovm: --io-timeout %s: expected 0 to %d seconds\n",
					optarg, IO_TIMEOUT_MAX);
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
	if (!have_share || !listen_spec) {
		fprintf(stderr, "iovm: 9p-serve needs --share path=DIR and --listen ADDRESS (try iovm 9p-serve --help)\n");
		return 2;
	}
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
	slot_min = 2 * ((size_t)share.msize + P9_IOHDRSZ) + SLOTS * 2 * SLOT_KEEP;
	if (!mem_cap)
		mem_cap = MEM_CAP_DEFAULT > 4 * slot_min ? MEM_CAP_DEFAULT : 4 * slot_min;
	if (mem_cap < 4 * slot_min) {
		fprintf(stderr, "iovm: --buffer-memory must be at least %zu KiB at msize %u (4 connections' worth of one message each way)\n",
			(4 * slot_min + 1023) >> 10, share.msize);
		return 2;
	}
	conn_cap = mem_cap / 4;
	/* Each connection gets an equal share of the descriptors the
	 * process keeps for 9P, beyond a socket each. */
	cfg.max_sessions = max_conns;
	cfg.fd_reserve = max_conns + 16;
	if (p9_server_open(&cfg, &srv, err, sizeof(err))) {
		pr_err("%s", err);
		return 1;
	}
	lfd = listen_on(listen_spec, desc, sizeof(desc));
	if (lfd < 0) {
		p9_server_close(srv);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	printf("listening on %s\n", desc);
	fflush(stdout);
	pr_info("9p-serve: serving %s%s on %s (9P has no authentication)",
		share.path, share.ro ? " read-only" : "", desc);
	for (;;) {
		struct conn_arg *a;
		pthread_t th;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
				pr_warn("9p-serve: accept: %s", strerror(errno));
				usleep(100000);
				continue;
			}
			pr_err("9p-serve: accept: %s", strerror(errno));
			break;
		}
		if (atomic_fetch_add(&nconns, 1) >= max_conns) {
			atomic_fetch_sub(&nconns, 1);
			pr_warn("9p-serve: %u connections already: refusing one", max_conns);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (io_timeout_s) {
			struct timeval tv = { .tv_sec = io_timeout_s };

			if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
			    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
				pr_warn("9p-serve: setting --io-timeout: %s: refusing a connection",
					strerror(errno));
				close(fd);
				atomic_fetch_sub(&nconns, 1);
				continue;
			}
		}
		a = malloc(sizeof(*a));
		if (!a) {
			close(fd);
			atomic_fetch_sub(&nconns, 1);
			continue;
		}
		a->fd = fd;
		a->srv = srv;
		if (pthread_create(&th, NULL, conn_main, a)) {
			close(fd);
			free(a);
			atomic_fetch_sub(&nconns, 1);
			continue;
		}
		pthread_detach(th);
		pr_debug("9p-serve: new connection");
	}
	close(lfd);
	return 1;
}
