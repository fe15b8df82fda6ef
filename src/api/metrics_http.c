/* --metrics-listen: GET /metrics over HTTP/1.1 for a Prometheus scraper,
 * served by one thread, one request per connection. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "api/metrics.h"
#include "api/metrics_http.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/sock.h"

struct metrics_http {
	struct api_objects *o;
	int lfd;
	int stop_fd;
	pthread_t thread;
	char addr[128];
};

/* RFC 9110's tchar. */
static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The length of a token at p (up to end). */
static size_t token_len(const char *p, const char *end)
{
	const char *q = p;

	while (q < end && is_tchar(*q))
		q++;
	return (size_t)(q - p);
}

/* Where the line at p ends (its '\n'), or NULL. */
static const char *line_end(const char *p, const char *end)
{
	return memchr(p, '\n', (size_t)(end - p));
}

/* A header line [p, e) (no CR/LF): "name:" with a token name, and no
 * control characters but tabs. */
static bool header_ok(const char *p, const char *e)
{
	size_t n = token_len(p, e);

	if (!n || p + n == e || p[n] != ':')
		return false;
	for (const char *q = p + n + 1; q < e; q++)
		if ((unsigned char)*q < 0x20 && *q != '\t')
			return false;
		else if (*q == 0x7f)
			return false;
	return true;
}

int metrics_http_parse(const char *buf, size_t len)
{
	const char *end, *p = buf, *e, *sp;
	size_t n, tlen;
	bool get;

	if (len > METRICS_HTTP_MAX_HEAD)
		len = METRICS_HTTP_MAX_HEAD;
	end = buf + len;
	/* The request line. */
	e = line_end(p, end);
	if (!e)
		return len >= METRICS_HTTP_MAX_HEAD ? 400 : 0;
	if (e > p && e[-1] == '\r')
		e--;
	n = token_len(p, e);
	if (!n || p + n == e || p[n] != ' ')
		return 400;
	get = n == 3 && !memcmp(p, "GET", 3);
	p += n + 1;
	sp = memchr(p, ' ', (size_t)(e - p));
	if (!sp || sp == p)
		return 400;
	for (const char *q = p; q < sp; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return 400;
	tlen = (size_t)(sp - p);
	if ((size_t)(e - sp - 1) != 8 || memcmp(sp + 1, "HTTP/1.", 7) ||
	    sp[8] < '0' || sp[8] > '9')
		return 400;
	/* The headers, to the empty line. */
	for (const char *h = line_end(buf, end) + 1;; ) {
		const char *he = line_end(h, end), *hv;

		if (!he)
			return len >= METRICS_HTTP_MAX_HEAD ? 400 : 0;
		hv = he;
		if (hv > h && hv[-1] == '\r')
			hv--;
		if (hv == h)
			break;
		if (!header_ok(h, hv))
			return 400;
		h = he + 1;
	}
	if (!get)
		return 405;
	/* The path, without a query. */
	for (size_t i = 0; i < tlen; i++)
		if (p[i] == '?') {
			tlen = i;
			break;
		}
	return tlen == 8 && !memcmp(p, "/metrics", 8) ? 200 : 404;
}

static int send_all(int fd, const char *b, size_t len)
{
	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static void answer(struct metrics_http *m, int fd, int status)
{
	const char *reason = status == 200 ? "OK" : status == 404 ? "Not Found" :
			     status == 405 ? "Method Not Allowed" : "Bad Request";
	char head[256], *body = NULL;
	size_t blen = 0;
	int hl;

	if (status == 200) {
		body = api_metrics_text(m->o, &blen);
		if (!body) {
			status = 500;
			reason = "Internal Server Error";
		}
	}
	if (!body) {
		char msg[64];

		snprintf(msg, sizeof(msg), "%d %s\n", status, reason);
		hl = snprintf(head, sizeof(head),
			      "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			      "Content-Length: %zu\r\n%sConnection: close\r\n\r\n%s",
			      status, reason, strlen(msg),
			      status == 405 ? "Allow: GET\r\n" : "", msg);
		send_all(fd, head, (size_t)hl);
		return;
	}
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		      "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	if (!send_all(fd, head, (size_t)hl))
		send_all(fd, body, blen);
	free(body);
}

/* One connection: its head within METRICS_HTTP_TIMEOUT_S, one answer. */
static void serve(struct metrics_http *m, int fd)
{
	struct timeval tv = { .tv_sec = METRICS_HTTP_TIMEOUT_S };
	uint64_t deadline = mono_ns() + METRICS_HTTP_TIMEOUT_S * 1000000000ull;
	char *buf = malloc(METRICS_HTTP_MAX_HEAD);
	size_t len = 0;
	int status = 0;

	if (!buf)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (!status) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = m->stop_fd, .events = POLLIN } };
		uint64_t now = mono_ns();
		ssize_t n;

		if (now >= deadline ||
		    poll(p, 2, (int)((deadline - now) / 1000000 + 1)) <= 0 ||
		    p[1].revents)
			break;
		n = recv(fd, buf + len, METRICS_HTTP_MAX_HEAD - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		status = metrics_http_parse(buf, len);
	}
	if (status)
		answer(m, fd, status);
	free(buf);
}

static void *http_thread(void *arg)
{
	struct metrics_http *m = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = m->lfd, .events = POLLIN },
				       { .fd = m->stop_fd, .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("metrics: poll: %s", strerror(errno));
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != EAGAIN &&
			    errno != ECONNABORTED)
				pr_warn_rated("metrics: accept: %s", strerror(errno));
			continue;
		}
		serve(m, fd);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
}

struct metrics_http *metrics_http_start(const char *spec,
					struct api_objects *o, char *err,
					size_t errlen)
{
	struct metrics_http *m;
	char why[128];
	int ret;

	if (strncmp(spec, "tcp:", 4)) {
		snprintf(err, errlen, "--metrics-listen %s: expected tcp:PORT or tcp:HOST:PORT",
			 spec);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "--metrics-listen: %s", strerror(ENOMEM));
		return NULL;
	}
	m->o = o;
	m->lfd = sock_listen_tcp(spec + 4, 16, m->addr, sizeof(m->addr), why,
				 sizeof(why));
	if (m->lfd < 0) {
		snprintf(err, errlen, "--metrics-listen %s: %s", spec, why);
		free(m);
		return NULL;
	}
	/* A connection reset between poll and accept must not block the
	 * thread in accept. */
	fcntl(m->lfd, F_SETFL, fcntl(m->lfd, F_GETFL) | O_NONBLOCK);
	m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ret = m->stop_fd < 0 ? errno :
	      pthread_create(&m->thread, NULL, http_thread, m);
	if (ret) {
		snprintf(err, errlen, "--metrics-listen: %s", strerror(ret));
		if (m->stop_fd >= 0)
			close(m->stop_fd);
		close(m->lfd);
		free(m);
		return NULL;
	}
	pr_info("metrics: serving GET /metrics on %s", m->addr);
	return m;
}

const char *metrics_http_addr(const struct metrics_http *m)
{
	return m->addr;
}

void metrics_http_stop(struct metrics_http *m)
{
	uint64_t one = 1;

	if (!m)
		return;
	if (write(m->stop_fd, &one, sizeof(one)) != sizeof(one))
		pr_err("metrics: stop: %s", strerror(errno));
	pthread_join(m->thread, NULL);
	close(m->stop_fd);
	close(m->lfd);
	free(m);
}
