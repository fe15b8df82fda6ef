/* The 9P2000.L server over a stream socket (UNIX or TCP), one session per
 * connection. Each connection has a reader thread that frames messages
 * into a fixed set of reusable slots and a few workers that serve them
 * concurrently, so a slow read does not hold up a getattr. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/sock.h"
#include "p9/proto.h"
#include "p9/server.h"
#include "p9/socket.h"

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
	struct slot slots[P9_SOCK_SLOTS];
	struct slot *free_list;
	struct slot *ready_head, *ready_tail;
	unsigned int inflight;
	bool stopping;
	/* Bytes of slot buffers held. Above twice msize when a slot is
	 * freed, its buffers beyond P9_SOCK_SLOT_KEEP go back to the heap: a
	 * burst of msize reads or writes leaves at most that much behind,
	 * instead of P9_SOCK_SLOTS buffers of msize each way for the
	 * connection's life. */
	atomic_size_t held;
	pthread_t workers[P9_SOCK_WORKERS];
};

static atomic_uint nconns;
static unsigned int max_conns;
/* Message buffers of all connections together, and of one connection (see
 * struct p9_sock_limits). A request whose buffers would go past either
 * gets Rlerror ENOMEM. */
static size_t mem_cap, conn_cap;
static atomic_size_t mem_held;

/* How long a client may take to send one message whole (from its first
 * byte) or to take one reply whole before its connection is closed (0:
 * forever; 9p-serve --io-timeout). SO_RCVTIMEO and SO_SNDTIMEO, set once
 * per connection, wake a blocked read or send; the deadline is checked on
 * the monotonic clock after each (no system call added per message). A
 * connection that is idle between messages is kept however long. */
static unsigned int io_timeout_s;

/* Whether a message or reply that began at *start (0: not yet; set now)
 * has taken longer than --io-timeout. The clock is read per system call,
 * not per message: a client that trickles a byte at a time still meets the
 * deadline of the whole message. */
static bool overdue(uint64_t *start)
{
	uint64_t now;

	if (!io_timeout_s)
		return false;
	now = mono_ns();
	if (!*start)
		*start = now;
	return now - *start > (uint64_t)io_timeout_s * 1000000000u;
}

/* Reads len bytes of the message that began at *start (0: nothing of it
 * has arrived yet, so a receive timeout only means the client is quiet
 * between messages: wait on). */
static int read_full(int fd, void *buf, size_t len, uint64_t *start)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !*start)
			continue;
		if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
			if (overdue(start)) {
				pr_warn("9p-serve: a message took the client more than %u s: closing the connection",
					io_timeout_s);
				return -ETIMEDOUT;
			}
			if (n < 0)
				continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= n;
	}
	return 0;
}

/* Sends a reply whole; it must be taken within --io-timeout. */
static int send_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t start = 0;

	overdue(&start);	/* the reply's clock starts now */
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if ((n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) &&
		    overdue(&start)) {
			pr_warn("9p-serve: the client took more than %u s over a reply: closing the connection",
				io_timeout_s);
			return -ETIMEDOUT;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
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

/* A buffer beyond P9_SOCK_SLOT_KEEP goes back to the heap once its request is
 * done when the connection holds more than twice msize (see conn.held) or
 * all connections more than half of mem_cap. */
static void trim_buf(struct conn *c, uint8_t **buf, size_t *cap)
{
	if (*cap <= P9_SOCK_SLOT_KEEP)
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

/* A slot is free again: its large buffers may go back (trim_slot). */
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
	put_slot(c, s);
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

static void quiesce(struct conn *c, unsigned int keep)
{
	pthread_mutex_lock(&c->lock);
	while (c->inflight > keep)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* A message no buffer could be had for: read past it and answer ENOMEM,
 * which keeps the stream's framing. */
static int refuse_message(struct conn *c, uint32_t size, uint64_t *start)
{
	uint8_t buf[4096];
	uint32_t left;
	uint16_t tag;
	int ret;

	ret = read_full(c->fd, buf, P9_HDRSZ - 4, start);	/* type[1] tag[2] */
	if (ret)
		return ret;
	tag = p9_get16(buf + 1);
	for (left = size - P9_HDRSZ; left;) {
		uint32_t n = left < sizeof(buf) ? left : sizeof(buf);

		ret = read_full(c->fd, buf, n, start);
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
	uint64_t start = 0;	/* of the message's first byte */
	int ret;

	ret = read_full(c->fd, hdr, 4, &start);
	if (ret)
		return ret;
	size = p9_get32(hdr);
	if (size < P9_HDRSZ || size > msize) {
		pr_warn("9p-serve: client sent a %u-byte message (msize %u): closing the connection",
			size, msize);
		return -EPROTO;
	}
	if (ensure(c, &s->in, &s->incap, size))
		return refuse_message(c, size, &start);
	memcpy(s->in, hdr, 4);
	s->len = size;
	return read_full(c->fd, s->in + 4, size - 4, &start);
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
	for (int i = P9_SOCK_SLOTS - 1; i >= 0; i--) {
		c->slots[i].next = c->free_list;
		c->free_list = &c->slots[i];
	}
	for (; started < P9_SOCK_WORKERS; started++)
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
	for (int i = 0; i < P9_SOCK_SLOTS; i++) {
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

int p9_sock_listen(const char *spec, char *desc, size_t desclen)
{
	int fd;

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
		return fd;
	}
	if (!strncmp(spec, "tcp:", 4)) {
		char err[128];

		fd = sock_listen_tcp(spec + 4, 16, desc, desclen, err, sizeof(err));
		if (fd < 0)
			pr_err("--listen %s: %s", spec, err);
		return fd;
	}
	pr_err("--listen %s: expected unix:PATH, tcp:PORT or tcp:HOST:PORT", spec);
	return -EINVAL;
}

int p9_sock_serve(struct p9_server *srv, int lfd, const struct p9_sock_limits *l)
{
	max_conns = l->max_conns;
	mem_cap = l->mem_cap;
	conn_cap = l->conn_cap;
	io_timeout_s = l->io_timeout_s;
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
			return -errno;
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
}
