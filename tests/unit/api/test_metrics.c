/* Unit tests of the statistics' outputs (api/metrics.h): query-stats' JSON
 * and the Prometheus text, parsed back, over a real disk with requests
 * through a block queue and a real 9P server; the HTTP request parser and
 * the --metrics-listen server on a loopback port. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/metrics.h"
#include "api/metrics_http.h"
#include "block/backend.h"
#include "block/stats.h"
#include "cmd/ctl_stats.h"
#include "../p9/p9c.h"

struct env {
	char disk[64], dir[64];
	struct disk_cfg dcfg;
	struct share_cfg scfg;
	struct blk_backend be;
	struct p9_server *srv;
	struct p9c c;
	struct api_objects o;
};

static void on_done(void *tag, int res)
{
	assert_true(res >= 0);
}

/* 10 writes of 4 KiB and 6 reads of 8 KiB on disk0; on share0 a version,
 * an attach, a walk, a create, a write and a read of 100 bytes, and a
 * getattr of a fid that does not exist. */
static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct p9_server_cfg pc = { .msize = 65536 };
	static uint8_t buf[8192] __attribute__((aligned(4096)));
	struct iovec iov = { buf, 4096 };
	struct blk_queue *q = blkq_create(16);
	char err[256];
	int fd;

	strcpy(e->disk, "/tmp/iovm-metrics-XXXXXX");
	fd = mkstemp(e->disk);
	assert_true(fd >= 0 && !ftruncate(fd, 1 << 20));
	close(fd);
	e->dcfg = (struct disk_cfg){ .path = e->disk, .cache = CACHE_WRITEBACK };
	assert_int_equal(blk_open(&e->be, &e->dcfg, err, sizeof(err)), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(blkq_rw(q, &e->be, BLK_OP_WRITE, &iov, 1,
					 (uint64_t)i * 4096, on_done, NULL), 0);
	iov.iov_len = 8192;
	for (int i = 0; i < 6; i++)
		assert_int_equal(blkq_rw(q, &e->be, BLK_OP_READ, &iov, 1,
					 (uint64_t)i * 8192, on_done, NULL), 0);
	assert_int_equal(blkq_submit(q), 0);
	while (blkq_inflight(q))
		assert_true(blkq_reap(q, true) >= 0);
	blkq_destroy(q);

	strcpy(e->dir, "/tmp/iovm-metrics-share-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	pc.path = e->dir;
	assert_int_equal(p9_server_open(&pc, &e->srv, err, sizeof(err)), 0);
	e->c.s = p9_session_new(e->srv);
	e->c.outsz = 65536 + 64;
	e->c.out = malloc(e->c.outsz);
	assert_int_equal(p9c_version(&e->c, 65536), 0);
	assert_int_equal(p9c_attach(&e->c, 0), 0);
	assert_int_equal(p9c_walk(&e->c, 0, 1, ""), 0);
	assert_int_equal(p9c_lcreate(&e->c, 1, "f", 2, 0644), 0);
	memset(buf, 'x', 100);
	assert_int_equal(p9c_write(&e->c, 1, 0, buf, 100), 0);
	assert_int_equal(p9c_read(&e->c, 1, 0, 100), 0);
	assert_int_equal(p9c_getattr(&e->c, 99), -EBADF);

	e->scfg = (struct share_cfg){ .path = e->dir, .tag = "t" };
	e->o.command = "test";
	e->o.ndisks = 1;
	strcpy(e->o.disks[0].name, "disk0");
	e->o.disks[0].cfg = &e->dcfg;
	e->o.disks[0].iface = "virtio-blk";
	e->o.disks[0].be = &e->be;
	e->o.disks[0].queues = 1;
	e->o.nshares = 1;
	strcpy(e->o.shares[0].name, "share0");
	e->o.shares[0].cfg = &e->scfg;
	e->o.shares[0].srv = e->srv;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char f[128];

	p9_session_free(e->c.s);
	p9_server_close(e->srv);
	free(e->c.out);
	blk_close(&e->be);
	unlink(e->disk);
	snprintf(f, sizeof(f), "%s/f", e->dir);
	unlink(f);
	rmdir(e->dir);
	free(e);
	return 0;
}

static uint64_t jget(struct json_object *o, const char *path)
{
	char tmp[128], *save = NULL;
	struct json_object *v = o;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *t = strtok_r(tmp, ".", &save); t; t = strtok_r(NULL, ".", &save)) {
		if (json_object_is_type(v, json_type_array))
			v = json_object_array_get_idx(v, (size_t)atoi(t));
		else if (!json_object_object_get_ex(v, t, &v))
			fail_msg("no %s in %s", t, path);
		assert_non_null(v);
	}
	return json_object_get_uint64(v);
}

static void test_json(void **state)
{
	struct env *e = *state;
	struct json_object *r = api_stats_json(&e->o, NULL, NULL), *h, *v;
	uint64_t sum = 0;

	assert_non_null(r);
	assert_int_equal(jget(r, "disks.0.total.write.ops"), 10);
	assert_int_equal(jget(r, "disks.0.total.write.bytes"), 40960);
	assert_int_equal(jget(r, "disks.0.total.read.ops"), 6);
	assert_int_equal(jget(r, "disks.0.total.read.bytes"), 6 * 8192);
	assert_int_equal(jget(r, "disks.0.total.errors"), 0);
	assert_int_equal(jget(r, "disks.0.total.inflight"), 0);
	assert_int_equal(jget(r, "disks.0.total.max_inflight"), 16);
	assert_int_equal(jget(r, "disks.0.queues.0.queue"), 0);
	assert_int_equal(jget(r, "disks.0.queues.0.write.ops"), 10);
	assert_true(jget(r, "disks.0.total.write.p50_ns") > 0);
	assert_true(jget(r, "disks.0.total.write.p999_ns") >=
		    jget(r, "disks.0.total.write.p50_ns"));
	/* the histogram: non-empty buckets whose counts sum to the ops */
	assert_true(json_object_object_get_ex(json_object_object_get(
		json_object_array_get_idx(json_object_object_get(r, "disks"), 0),
		"total"), "write", &v));
	assert_true(json_object_object_get_ex(v, "histogram", &h));
	for (size_t i = 0; i < json_object_array_length(h); i++) {
		uint64_t n = jget(json_object_array_get_idx(h, i), "count");

		assert_true(n > 0);
		assert_true(jget(json_object_array_get_idx(h, i), "hi_ns") >
			    jget(json_object_array_get_idx(h, i), "lo_ns"));
		sum += n;
	}
	assert_int_equal(sum, 10);
	assert_int_equal(jget(r, "shares.0.ops.version"), 1);
	assert_int_equal(jget(r, "shares.0.ops.attach"), 1);
	assert_int_equal(jget(r, "shares.0.ops.walk"), 1);
	assert_int_equal(jget(r, "shares.0.ops.lcreate"), 1);
	assert_int_equal(jget(r, "shares.0.ops.write"), 1);
	assert_int_equal(jget(r, "shares.0.ops.read"), 1);
	assert_int_equal(jget(r, "shares.0.ops.getattr"), 1);
	assert_int_equal(jget(r, "shares.0.errors"), 1);
	assert_int_equal(jget(r, "shares.0.bytes_read"), 100);
	assert_int_equal(jget(r, "shares.0.bytes_written"), 100);
	assert_int_equal(jget(r, "shares.0.fids"), 2);
	assert_int_equal(jget(r, "shares.0.open_files"), 1);
	json_object_put(r);
	/* one disk asked for: no shares */
	r = api_stats_json(&e->o, &e->o.disks[0], NULL);
	assert_int_equal(json_object_array_length(json_object_object_get(r, "disks")), 1);
	assert_int_equal(json_object_array_length(json_object_object_get(r, "shares")), 0);
	json_object_put(r);
	/* a clunk and a new version: the fids go */
	assert_int_equal(p9c_fidop(&e->c, P9_TCLUNK, 1), 0);
	r = api_stats_json(&e->o, NULL, &e->o.shares[0]);
	assert_int_equal(jget(r, "shares.0.fids"), 1);
	assert_int_equal(jget(r, "shares.0.open_files"), 0);
	json_object_put(r);
	assert_int_equal(p9c_version(&e->c, 65536), 0);
	r = api_stats_json(&e->o, NULL, &e->o.shares[0]);
	assert_int_equal(jget(r, "shares.0.fids"), 0);
	json_object_put(r);
}

/* ---- the Prometheus text, parsed back ---- */

struct family {
	char name[64], type[16];
	bool help;
};

struct prom {
	struct family f[32];
	unsigned int nf;
	/* the histogram series being read */
	char series[256];
	double last_le, last_cum;
	bool inf_seen;
	double inf;
	unsigned int series_done;
};

static struct family *family(struct prom *p, const char *name)
{
	for (unsigned int i = 0; i < p->nf; i++)
		if (!strcmp(p->f[i].name, name))
			return &p->f[i];
	return NULL;
}

/* The family a sample belongs to (a histogram's _bucket/_sum/_count). */
static struct family *sample_family(struct prom *p, const char *name,
				    const char **suffix)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	struct family *f = family(p, name);
	char base[64];

	*suffix = "";
	if (f)
		return f;
	for (unsigned int i = 0; i < 3; i++) {
		size_t n = strlen(name), s = strlen(sfx[i]);

		if (n > s && !strcmp(name + n - s, sfx[i]) && n - s < sizeof(base)) {
			memcpy(base, name, n - s);
			base[n - s] = 0;
			f = family(p, base);
			if (f && !strcmp(f->type, "histogram")) {
				*suffix = sfx[i];
				return f;
			}
		}
	}
	return NULL;
}

/* Checks one line; returns the sample's value (NAN for comments). */
static void prom_line(struct prom *p, char *line)
{
	char name[64], labels[256] = "", *sp, *brace;
	const char *suffix;
	struct family *f;
	double v;
	char *end;

	if (!strncmp(line, "# HELP ", 7)) {
		sp = strchr(line + 7, ' ');
		assert_non_null(sp);
		*sp = 0;
		assert_null(family(p, line + 7));
		assert_true(p->nf < 32);
		f = &p->f[p->nf++];
		snprintf(f->name, sizeof(f->name), "%s", line + 7);
		f->help = true;
		assert_true(!strncmp(f->name, "iovm_", 5));
		return;
	}
	if (!strncmp(line, "# TYPE ", 7)) {
		sp = strchr(line + 7, ' ');
		assert_non_null(sp);
		*sp = 0;
		f = family(p, line + 7);
		assert_non_null(f);	/* HELP came first */
		assert_int_equal(f->type[0], 0);
		snprintf(f->type, sizeof(f->type), "%s", sp + 1);
		assert_true(!strcmp(f->type, "counter") || !strcmp(f->type, "gauge") ||
			    !strcmp(f->type, "histogram"));
		if (!strcmp(f->type, "counter"))
			assert_non_null(strstr(f->name, "_total"));
		return;
	}
	assert_true(line[0] != '#');
	sp = strrchr(line, ' ');
	assert_non_null(sp);
	v = strtod(sp + 1, &end);
	assert_true(*end == 0 && end != sp + 1);
	assert_true(v >= 0);
	*sp = 0;
	brace = strchr(line, '{');
	if (brace) {
		assert_true(sp[-1] == '}');
		sp[-1] = 0;
		snprintf(labels, sizeof(labels), "%s", brace + 1);
		*brace = 0;
	}
	snprintf(name, sizeof(name), "%s", line);
	f = sample_family(p, name, &suffix);
	if (!f)
		fail_msg("sample %s before its # TYPE", name);
	assert_true(f->type[0]);
	if (!strcmp(suffix, "_bucket")) {
		char *le = strstr(labels, ",le=\"");
		double bound;

		assert_non_null(le);
		*le = 0;
		if (strcmp(p->series, labels)) {
			assert_false(p->series[0] && !p->inf_seen);
			snprintf(p->series, sizeof(p->series), "%s", labels);
			p->last_le = -1;
			p->last_cum = 0;
			p->inf_seen = false;
		}
		assert_false(p->inf_seen);
		if (!strcmp(le + 5, "+Inf\"")) {
			p->inf_seen = true;
			p->inf = v;
		} else {
			bound = strtod(le + 5, &end);
			assert_true(*end == '"' && bound > p->last_le);
			p->last_le = bound;
		}
		assert_true(v >= p->last_cum);	/* cumulative */
		p->last_cum = v;
	} else if (!strcmp(suffix, "_count")) {
		assert_string_equal(p->series, labels);
		assert_true(p->inf_seen);
		assert_true(v == p->inf);
		p->series_done++;
	}
}

static double prom_value(const char *text, const char *series)
{
	const char *at = strstr(text, series);
	size_t n = strlen(series);

	while (at && at != text && at[-1] != '\n')
		at = strstr(at + 1, series);
	if (!at || at[n] != ' ')
		fail_msg("no sample %s", series);
	return strtod(at + n + 1, NULL);
}

static void check_prom_text(char *text, size_t len)
{
	struct prom *p = calloc(1, sizeof(*p));
	char *save = NULL, *copy = strndup(text, len);

	assert_int_equal(strlen(text), len);
	assert_true(len && text[len - 1] == '\n');
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		prom_line(p, l);
	/* one queue, five kinds */
	assert_int_equal(p->series_done, 5);
	for (unsigned int i = 0; i < p->nf; i++)
		assert_true(p->f[i].help && p->f[i].type[0]);
	free(copy);
	free(p);
}

static void test_prometheus(void **state)
{
	struct env *e = *state;
	size_t len;
	char *t = api_metrics_text(&e->o, &len);

	assert_non_null(t);
	check_prom_text(t, len);
	assert_true(prom_value(t, "iovm_disk_ops_total{disk=\"disk0\",queue=\"0\",op=\"write\"}") == 10);
	assert_true(prom_value(t, "iovm_disk_bytes_total{disk=\"disk0\",queue=\"0\",op=\"write\"}") == 40960);
	assert_true(prom_value(t, "iovm_disk_ops_total{disk=\"disk0\",queue=\"0\",op=\"read\"}") == 6);
	assert_true(prom_value(t, "iovm_disk_latency_seconds_count{disk=\"disk0\",queue=\"0\",op=\"write\"}") == 10);
	assert_true(prom_value(t, "iovm_disk_latency_seconds_bucket{disk=\"disk0\",queue=\"0\",op=\"write\",le=\"+Inf\"}") == 10);
	assert_true(prom_value(t, "iovm_disk_latency_seconds_sum{disk=\"disk0\",queue=\"0\",op=\"write\"}") > 0);
	assert_true(prom_value(t, "iovm_disk_inflight{disk=\"disk0\",queue=\"0\"}") == 0);
	assert_true(prom_value(t, "iovm_share_ops_total{share=\"share0\",op=\"write\"}") == 1);
	assert_true(prom_value(t, "iovm_share_errors_total{share=\"share0\"}") == 1);
	assert_true(prom_value(t, "iovm_share_read_bytes_total{share=\"share0\"}") == 100);
	assert_true(prom_value(t, "iovm_share_fids{share=\"share0\"}") == 2);
	assert_true(prom_value(t, "iovm_share_open_files{share=\"share0\"}") == 1);
	free(t);
}

/* ---- iovm ctl stats' table ---- */

static __attribute__((noinline)) char *table(struct json_object *cur,
					    struct json_object *prev, double secs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ctl_stats_table(f, cur, prev, secs);
	fclose(f);
	return buf;
}

/* The numbers of the table line that starts with key. */
static __attribute__((noinline)) int table_row(const char *t, const char *key,
					       double *v, int n)
{
	const char *l = strstr(t, key);
	int got = 0;

	assert_non_null(l);
	l += strlen(key);
	while (got < n) {
		char *end;

		v[got] = strtod(l, &end);
		if (end == l)
			break;
		got++;
		l = end;
	}
	return got;
}

static void test_ctl_table(void **state)
{
	struct env *e = *state;
	struct json_object *a = api_stats_json(&e->o, NULL, NULL), *b;
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	struct iovec iov = { buf, sizeof(buf) };
	struct blk_queue *q = blkq_create(32);
	double v[11];
	char *t;

	/* since start: counts */
	t = table(a, NULL, 0);
	assert_non_null(strstr(t, "since start"));
	assert_int_equal(table_row(t, "disk0    all", v, 11), 11);
	assert_true(v[0] == 6 && v[1] == 10);	/* reads, writes */
	assert_true(v[3] == 0.04);		/* 40 KiB in MB, 2 decimals */
	assert_true(v[10] == 0);		/* in flight */
	assert_non_null(strstr(t, "share0"));
	free(t);
	/* 20 more writes, 4 of them in a merged group, over "2 s" */
	for (int i = 0; i < 16; i++)
		assert_int_equal(blkq_rw(q, &e->be, BLK_OP_WRITE, &iov, 1,
					 (uint64_t)i * 4096, on_done, NULL), 0);
	assert_int_equal(blkq_rw_merged(q, &e->be, BLK_OP_WRITE, &iov, 1, 0, 4,
					on_done, NULL), 0);
	assert_int_equal(blkq_submit(q), 0);
	while (blkq_inflight(q))
		assert_true(blkq_reap(q, true) >= 0);
	blkq_destroy(q);
	b = api_stats_json(&e->o, NULL, NULL);
	t = table(b, a, 2.0);
	assert_non_null(strstr(t, "per second over 2.0 s"));
	assert_int_equal(table_row(t, "disk0    all", v, 11), 11);
	assert_true(v[0] == 0 && v[1] == 10);	/* r/s, w/s */
	assert_true(v[6] > 0 && v[7] > 0);	/* w_await, w_p99 */
	assert_int_equal(table_row(t, "         0     ", v, 2), 2);
	assert_true(v[1] == 10);
	free(t);
	json_object_put(a);
	json_object_put(b);
}

/* ---- HTTP ---- */

static int parse(const char *s)
{
	return metrics_http_parse(s, strlen(s));
}

static void test_http_parse(void **state)
{
	char big[METRICS_HTTP_MAX_HEAD + 16];

	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
	assert_int_equal(parse("GET /metrics HTTP/1.0\r\n\r\n"), 200);
	assert_int_equal(parse("GET /metrics?x=1 HTTP/1.1\n\n"), 200);
	assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n"), 404);
	assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n"), 404);
	assert_int_equal(parse("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 405);
	assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n"), 405);
	/* incomplete heads wait for more */
	assert_int_equal(parse(""), 0);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\n"), 0);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n"), 0);
	/* garbage */
	assert_int_equal(parse("\r\n\r\n"), 400);
	assert_int_equal(parse("GET\r\n\r\n"), 400);
	assert_int_equal(parse("GET /metrics\r\n\r\n"), 400);
	assert_int_equal(parse("GET  /metrics HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(parse("GET /metrics HTTP/2.0\r\n\r\n"), 400);
	assert_int_equal(parse("GET /metrics HTTP/1.1 \r\n\r\n"), 400);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nno colon\r\n\r\n"), 400);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\n: empty\r\n\r\n"), 400);
	assert_int_equal(parse("G\x01T /metrics HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(metrics_http_parse("GET /m\0trics HTTP/1.1\r\n\r\n", 25), 400);
	/* a head that does not end within the bound */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	assert_int_equal(metrics_http_parse(big, METRICS_HTTP_MAX_HEAD - 1), 0);
	assert_int_equal(metrics_http_parse(big, METRICS_HTTP_MAX_HEAD), 400);
	assert_int_equal(metrics_http_parse(big, sizeof(big)), 400);
}

/* One request on a new connection to port; the whole answer in buf. */
static size_t http_get(int port, const char *req, char *buf, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t got = 0;
	ssize_t n;

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	while (got < len - 1 && (n = recv(fd, buf + got, len - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(fd);
	return got;
}

static void test_http_server(void **state)
{
	struct env *e = *state;
	char err[256], *buf = malloc(1 << 20), *body;
	struct metrics_http *m;
	const char *addr;
	int port;

	m = metrics_http_start("tcp:1.2.3.4.5:0", &e->o, err, sizeof(err));
	assert_null(m);
	assert_non_null(strstr(err, "--metrics-listen tcp:1.2.3.4.5:0"));
	m = metrics_http_start("udp:9", &e->o, err, sizeof(err));
	assert_null(m);
	m = metrics_http_start("tcp:0", &e->o, err, sizeof(err));
	assert_non_null(m);
	addr = metrics_http_addr(m);
	assert_true(!strncmp(addr, "tcp:127.0.0.1:", 14));
	port = atoi(addr + 14);
	assert_true(port > 0);

	http_get(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", buf, 1 << 20);
	assert_true(!strncmp(buf, "HTTP/1.1 200 OK\r\n", 17));
	assert_non_null(strstr(buf, "Content-Type: text/plain; version=0.0.4"));
	body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	assert_int_equal(strtoul(strstr(buf, "Content-Length: ") + 16, NULL, 10),
			 strlen(body));
	check_prom_text(body, strlen(body));
	http_get(port, "GET /other HTTP/1.1\r\n\r\n", buf, 1 << 20);
	assert_true(!strncmp(buf, "HTTP/1.1 404 ", 13));
	http_get(port, "DELETE /metrics HTTP/1.1\r\n\r\n", buf, 1 << 20);
	assert_true(!strncmp(buf, "HTTP/1.1 405 ", 13));
	assert_non_null(strstr(buf, "Allow: GET\r\n"));
	http_get(port, "\x16\x03\x01 garbage\r\n\r\n", buf, 1 << 20);
	assert_true(!strncmp(buf, "HTTP/1.1 400 ", 13));
	/* still serving after all that */
	http_get(port, "GET /metrics HTTP/1.0\r\n\r\n", buf, 1 << 20);
	assert_true(!strncmp(buf, "HTTP/1.1 200 OK\r\n", 17));
	metrics_http_stop(m);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prometheus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_table, setup, teardown),
		cmocka_unit_test(test_http_parse),
		cmocka_unit_test_setup_teardown(test_http_server, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
