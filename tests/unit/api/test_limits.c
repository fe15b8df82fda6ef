/* set-limits and query-limits (api/limits.c) through a live control socket
 * on a temporary path, on a disk opened on a temporary file: the replies,
 * every error a client can provoke, and that the limits reach the disk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/limits.h"
#include "block/backend.h"

static char dir[] = "/tmp/iovm-api-limits.XXXXXX";
static char sock[256], img[256];
static struct disk_cfg cfg = { .cache = CACHE_WRITEBACK };
static struct blk_backend be;
static struct api_objects objs;
static struct api_server *srv;
static int fd = -1;

static int setup(void **state)
{
	char err[256];
	FILE *f;

	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	snprintf(img, sizeof(img), "%s/d.img", dir);
	f = fopen(img, "w");
	if (!f || ftruncate(fileno(f), 1 << 20))
		return -1;
	fclose(f);
	cfg.path = img;
	cfg.limits.rate[LIM_BPS_WR] = 1 << 20;	/* as --disk bps-wr=1M */
	if (blk_open(&be, &cfg, err, sizeof(err)))
		return -1;
	objs.command = "vhost-user-blk";
	if (!api_add_disk(&objs, &cfg, &be, 1))
		return -1;
	srv = api_new();
	if (!srv || api_add_limits(srv, &objs) || api_listen(srv, sock, err, sizeof(err)))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	if (fd >= 0)
		close(fd);
	api_free(srv);
	blk_close(&be);
	unlink(img);
	rmdir(dir);
	return 0;
}

/* Sends one request line; returns the reply, parsed (put it). */
static struct json_object *ask(const char *req)
{
	struct timeval tv = { .tv_sec = 30 };	/* a broken server fails, never hangs */
	char line[8192];
	size_t len = 0;

	if (fd < 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		strcpy(sa.sun_path, sock);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	assert_int_equal(send(fd, "\n", 1, MSG_NOSIGNAL), 1);
	for (;;) {
		assert_true(len < sizeof(line) - 1);
		assert_int_equal(recv(fd, line + len, 1, 0), 1);
		if (line[len] == '\n')
			break;
		len++;
	}
	line[len] = 0;
	return json_tokener_parse(line);
}

static struct json_object *get(struct json_object *j, const char *k)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(j, k, &v))
		fail_msg("no '%s' in %s", k, json_object_to_json_string(j));
	return v;
}

static uint64_t num(struct json_object *j, const char *k)
{
	return json_object_get_uint64(get(j, k));
}

/* The request fails with class cls, and its desc says want. */
static void refused(const char *req, const char *cls, const char *want)
{
	struct json_object *r = ask(req), *e;

	assert_non_null(r);
	e = get(r, "error");
	assert_string_equal(json_object_get_string(get(e, "class")), cls);
	if (!strstr(json_object_get_string(get(e, "desc")), want))
		fail_msg("%s: error %s does not say '%s'", req,
			 json_object_to_json_string(e), want);
	json_object_put(r);
}

static void test_query(void **state)
{
	struct json_object *r = ask("{\"execute\": \"query-limits\"}"), *a, *d;
	char req[512];

	a = get(r, "return");
	assert_int_equal(json_object_array_length(a), 1);
	d = json_object_array_get_idx(a, 0);
	assert_string_equal(json_object_get_string(get(d, "disk")), "disk0");
	assert_int_equal(num(d, "bps-wr"), 1 << 20);
	assert_int_equal(num(d, "bps-wr-burst"), (1 << 20) / 10);
	assert_int_equal(num(d, "iops"), 0);
	assert_int_equal(num(d, "iops-burst"), 0);
	assert_int_equal(num(d, "held"), 0);
	assert_int_equal(json_object_object_length(d), 2 + 2 * LIM_N);
	json_object_put(r);

	r = ask("{\"execute\": \"query-limits\", \"arguments\": {\"disk\": \"disk0\"}}");
	assert_int_equal(json_object_array_length(get(r, "return")), 1);
	json_object_put(r);
	/* a disk by its path as given */
	snprintf(req, sizeof(req), "{\"execute\": \"query-limits\", \"arguments\": {\"disk\": \"%s\"}}",
		 img);
	r = ask(req);
	d = json_object_array_get_idx(get(r, "return"), 0);
	assert_string_equal(json_object_get_string(get(d, "disk")), "disk0");
	json_object_put(r);
	refused("{\"execute\": \"query-limits\", \"arguments\": {\"disk\": \"disk9\"}}",
		API_ERR_DEVICE, "disk9");
	refused("{\"execute\": \"query-limits\", \"arguments\": {\"disk\": 0}}",
		API_ERR_GENERIC, "disk");
	refused("{\"execute\": \"query-limits\", \"arguments\": {\"dsk\": \"disk0\"}}",
		API_ERR_GENERIC, "dsk");
}

static void test_set(void **state)
{
	struct json_object *r, *d;
	struct disk_limits l;

	r = ask("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\","
		" \"iops\": 200, \"iops-rd\": 50, \"iops-rd-burst\": 500}}");
	d = get(r, "return");
	assert_int_equal(num(d, "iops"), 200);
	assert_int_equal(num(d, "iops-burst"), 20);
	assert_int_equal(num(d, "iops-rd"), 50);
	assert_int_equal(num(d, "iops-rd-burst"), 500);
	assert_int_equal(num(d, "bps-wr"), 1 << 20);	/* kept */
	json_object_put(r);
	blk_get_limits(&be, &l, NULL);
	assert_int_equal(l.rate[LIM_IOPS], 200);
	assert_int_equal(l.burst[LIM_IOPS], 0);
	assert_int_equal(l.rate[LIM_IOPS_RD], 50);
	assert_int_equal(l.burst[LIM_IOPS_RD], 500);
	assert_int_equal(l.rate[LIM_BPS_WR], 1 << 20);

	/* 0 removes a limit and its burst */
	r = ask("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\","
		" \"iops-rd\": 0, \"bps-wr\": 0}}");
	d = get(r, "return");
	assert_int_equal(num(d, "iops-rd"), 0);
	assert_int_equal(num(d, "iops-rd-burst"), 0);
	assert_int_equal(num(d, "bps-wr"), 0);
	assert_int_equal(num(d, "iops"), 200);
	json_object_put(r);
	blk_get_limits(&be, &l, NULL);
	assert_int_equal(l.burst[LIM_IOPS_RD], 0);
	assert_int_equal(l.rate[LIM_BPS_WR], 0);

}

static void test_refused(void **state)
{
	struct disk_limits before, after;

	blk_get_limits(&be, &before, NULL);
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"iops\": 1}}",
		API_ERR_GENERIC, "disk");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk7\", \"iops\": 1}}",
		API_ERR_DEVICE, "disk7");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"iops\": \"many\"}}",
		API_ERR_GENERIC, "iops");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"iops\": -1}}",
		API_ERR_GENERIC, "iops");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"iops\": 1.5}}",
		API_ERR_GENERIC, "iops");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"iopz\": 1}}",
		API_ERR_GENERIC, "iopz");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"bps\": 1000000000000001}}",
		API_ERR_GENERIC, "bps is above the largest limit, 10^15");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"bps-rd-burst\": 4096}}",
		API_ERR_GENERIC, "bps-rd-burst needs bps-rd");
	refused("{\"execute\": \"set-limits\", \"arguments\": {\"disk\": \"disk0\", \"iops\": 0, \"iops-burst\": 9}}",
		API_ERR_GENERIC, "iops-burst needs iops");
	/* nothing of a refused request was applied */
	blk_get_limits(&be, &after, NULL);
	assert_memory_equal(&before, &after, sizeof(before));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
