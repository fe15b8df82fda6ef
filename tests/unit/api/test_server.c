/* api/api.c and core.c live: the server on a temporary socket with fake
 * objects, driven by real clients (several at once, garbage, oversized
 * lines, hang-ups mid-line, one client too many, one that does not read),
 * and the socket file's mode, replacement and removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/start.h"
#include "block/backend.h"

static char dir[] = "/tmp/iovm-api-test.XXXXXX";
static char path[256];

static struct disk_cfg dcfg[2] = {
	{ .path = "/images/a.img", .iface = DISK_IF_VIRTIO_BLK, .cache = CACHE_WRITEBACK },
	{ .path = "rbd:pool/b", .iface = DISK_IF_VIRTIO_SCSI, .ro = true },
};
static struct blk_backend be[2] = {
	{ .size = 64ull << 20 },
	{ .size = 1ull << 30, .ro = true },
};
static struct share_cfg scfg = {
	.path = "/srv/share", .tag = "hostshare", .msize = 1u << 20,
	.security = SHARE_SEC_NONE,
};

static atomic_int paused, shutdowns;

static int fake_pause(void *owner) { atomic_store(&paused, 1); return 0; }
static int fake_resume(void *owner) { atomic_store(&paused, 0); return 0; }
static bool fake_paused(void *owner) { return atomic_load(&paused); }
static int fake_shutdown(void *owner) { atomic_fetch_add(&shutdowns, 1); return 0; }

static struct api_objects objs;

/* A command whose reply is 100 KiB, to fill a client's output. */
#define BIG (100u << 10)
static int big(void *opaque, struct api_req *req)
{
	static char s[BIG + 1];

	memset(s, 'b', BIG);
	req->ret = json_object_new_string(s);
	return 0;
}

static struct api_server *start(bool with_vcpus)
{
	struct api_server *s = api_new();
	char err[256] = "";

	memset(&objs, 0, sizeof(objs));
	objs.command = with_vcpus ? "run" : "vhost-user-blk";
	api_add_disk(&objs, &dcfg[0], &be[0], 2);
	api_add_disk(&objs, &dcfg[1], &be[1], 4);
	api_add_share(&objs, &scfg, NULL);
	if (with_vcpus) {
		objs.pause = fake_pause;
		objs.resume = fake_resume;
		objs.paused = fake_paused;
	}
	objs.shutdown = fake_shutdown;
	atomic_store(&paused, 0);
	atomic_store(&shutdowns, 0);
	assert_non_null(s);
	assert_int_equal(api_add_core(s, &objs), 0);
	assert_int_equal(api_register(s, "big", big, NULL, "a large reply"), 0);
	assert_int_equal(api_register(s, "big", big, NULL, "again"), -EEXIST);
	if (api_listen(s, path, err, sizeof(err)))
		fail_msg("api_listen: %s", err);
	return s;
}

static int client(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* a bound so that a broken server fails the test, never hangs it */
	struct timeval tv = { .tv_sec = 30 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(sa.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		assert_true(n > 0);
		p += n;
		len -= n;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

/* One reply line, parsed; NULL at EOF. */
static struct json_object *recv_reply(int fd)
{
	char line[8192];
	size_t len = 0;

	while (len < sizeof(line) - 1) {
		ssize_t n = recv(fd, line + len, 1, 0);

		if (n == 0 && len == 0)
			return NULL;
		assert_int_equal(n, 1);
		if (line[len] == '\n') {
			struct json_object *j;

			line[len] = 0;
			j = json_tokener_parse(line);
			if (!j)
				fail_msg("reply is not JSON: %s", line);
			return j;
		}
		len++;
	}
	fail_msg("reply line too long");
	return NULL;
}

static struct json_object *member(struct json_object *j, const char *a)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(j, a, &v))
		fail_msg("no '%s' in %s", a, json_object_to_json_string(j));
	return v;
}

/* Sends a request, returns its "return" (the whole reply in *whole, to
 * put). */
static struct json_object *call(int fd, const char *req, struct json_object **whole)
{
	send_str(fd, req);
	*whole = recv_reply(fd);
	assert_non_null(*whole);
	return member(*whole, "return");
}

/* Expects the next reply to be an error of class cls whose desc holds
 * want. */
static void expect_error(int fd, const char *cls, const char *want)
{
	struct json_object *r = recv_reply(fd), *e;

	assert_non_null(r);
	e = member(r, "error");
	assert_string_equal(json_object_get_string(member(e, "class")), cls);
	if (!strstr(json_object_get_string(member(e, "desc")), want))
		fail_msg("error %s does not say '%s'", json_object_to_json_string(e), want);
	json_object_put(r);
}

static void expect_eof(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
}

static const char *str_of(struct json_object *j, const char *k)
{
	return json_object_get_string(member(j, k));
}

static void test_socket_file(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct api_server *s, *s2;
	char err[256];
	struct stat st;
	int fd;

	/* a stale socket: bound, then its process gone */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(sa.sun_path, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	umask(0);	/* the mode must not depend on the umask */
	s = start(false);
	umask(022);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	/* a live one is not taken over */
	s2 = api_new();
	assert_int_equal(api_listen(s2, path, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, "another process"));
	api_free(s2);
	assert_int_equal(lstat(path, &st), 0);
	api_free(s);
	assert_int_equal(lstat(path, &st), -1);

	/* someone's file is left alone */
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	close(fd);
	s2 = api_new();
	assert_int_equal(api_listen(s2, path, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "not a socket"));
	api_free(s2);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	unlink(path);
}

static void test_core_commands(void **state)
{
	struct api_server *s = start(false);
	struct json_object *w, *r, *d;
	int fd = client();

	r = call(fd, "{\"execute\": \"query-version\", \"id\": 1}\n", &w);
	assert_string_equal(str_of(r, "version"), IOVM_VERSION);
	assert_string_equal(str_of(r, "package"), "iovm");
	assert_int_equal(json_object_get_int(member(w, "id")), 1);
	json_object_put(w);

	r = call(fd, "{\"execute\": \"query-status\", \"id\": \"s\"}\n", &w);
	assert_string_equal(str_of(r, "status"), "running");
	assert_true(json_object_get_boolean(member(r, "running")));
	assert_string_equal(str_of(r, "command"), "vhost-user-blk");
	assert_int_equal(json_object_get_int(member(r, "pid")), getpid());
	assert_string_equal(str_of(w, "id"), "s");
	json_object_put(w);

	r = call(fd, "{\"execute\": \"query-disks\"}\n", &w);
	assert_int_equal(json_object_array_length(r), 2);
	d = json_object_array_get_idx(r, 0);
	assert_string_equal(str_of(d, "name"), "disk0");
	assert_string_equal(str_of(d, "path"), "/images/a.img");
	assert_string_equal(str_of(d, "interface"), "virtio-blk");
	assert_true(json_object_get_uint64(member(d, "size")) == 64ull << 20);
	assert_false(json_object_get_boolean(member(d, "read-only")));
	assert_string_equal(str_of(d, "cache"), "writeback");
	assert_int_equal(json_object_get_int(member(d, "queues")), 2);
	d = json_object_array_get_idx(r, 1);
	assert_string_equal(str_of(d, "name"), "disk1");
	assert_string_equal(str_of(d, "path"), "rbd:pool/b");
	assert_string_equal(str_of(d, "interface"), "virtio-scsi");
	assert_true(json_object_get_boolean(member(d, "read-only")));
	assert_string_equal(str_of(d, "cache"), "none");
	assert_int_equal(json_object_get_int(member(d, "queues")), 4);
	json_object_put(w);
	assert_ptr_equal(api_find_disk(&objs, "disk1"), &objs.disks[1]);
	assert_ptr_equal(api_find_disk(&objs, "/images/a.img"), &objs.disks[0]);
	assert_null(api_find_disk(&objs, "disk2"));
	assert_null(api_find_disk(&objs, "a.img"));

	r = call(fd, "{\"execute\": \"query-shares\"}\n", &w);
	assert_int_equal(json_object_array_length(r), 1);
	d = json_object_array_get_idx(r, 0);
	assert_string_equal(str_of(d, "name"), "share0");
	assert_string_equal(str_of(d, "path"), "/srv/share");
	assert_string_equal(str_of(d, "tag"), "hostshare");
	assert_int_equal(json_object_get_int(member(d, "msize")), 1 << 20);
	assert_string_equal(str_of(d, "security"), "none");
	json_object_put(w);

	r = call(fd, "{\"execute\": \"query-commands\"}\n", &w);
	assert_int_equal(json_object_array_length(r), 9);
	assert_string_equal(str_of(json_object_array_get_idx(r, 0), "name"), "query-version");
	assert_string_equal(str_of(json_object_array_get_idx(r, 8), "name"), "big");
	json_object_put(w);

	/* no vCPUs here */
	send_str(fd, "{\"execute\": \"pause\"}\n");
	expect_error(fd, API_ERR_GENERIC, "no vCPUs");
	send_str(fd, "{\"execute\": \"resume\"}\n");
	expect_error(fd, API_ERR_GENERIC, "no vCPUs");
	/* unknown commands and arguments */
	send_str(fd, "{\"execute\": \"query-everything\", \"id\": [7]}\n");
	w = recv_reply(fd);
	assert_string_equal(str_of(member(w, "error"), "class"), API_ERR_NOT_FOUND);
	assert_string_equal(json_object_to_json_string_ext(member(w, "id"), JSON_C_TO_STRING_PLAIN), "[7]");
	json_object_put(w);
	send_str(fd, "{\"execute\": \"query-disks\", \"arguments\": {\"disk\": \"disk0\"}}\n");
	expect_error(fd, API_ERR_GENERIC, "unknown argument 'disk'");

	assert_int_equal(atomic_load(&shutdowns), 0);
	r = call(fd, "{\"execute\": \"shutdown\"}\n", &w);
	assert_int_equal(json_object_object_length(r), 0);
	json_object_put(w);
	/* the hook runs after the reply went out: poll for it, with a
	 * generous bound */
	for (int i = 0; i < 10000 && !atomic_load(&shutdowns); i++)
		usleep(1000);
	assert_int_equal(atomic_load(&shutdowns), 1);
	r = call(fd, "{\"execute\": \"query-status\"}\n", &w);
	assert_string_equal(str_of(r, "status"), "shutting-down");
	json_object_put(w);
	close(fd);
	api_free(s);
}

static void test_pause_resume(void **state)
{
	struct api_server *s = start(true);
	struct json_object *w, *r;
	int fd = client();

	call(fd, "{\"execute\": \"pause\"}\n", &w);
	json_object_put(w);
	assert_int_equal(atomic_load(&paused), 1);
	r = call(fd, "{\"execute\": \"query-status\"}\n", &w);
	assert_string_equal(str_of(r, "status"), "paused");
	assert_false(json_object_get_boolean(member(r, "running")));
	json_object_put(w);
	call(fd, "{\"execute\": \"resume\"}\n", &w);
	json_object_put(w);
	r = call(fd, "{\"execute\": \"query-status\"}\n", &w);
	assert_string_equal(str_of(r, "status"), "running");
	json_object_put(w);
	close(fd);
	api_free(s);
}

static void test_two_clients_and_garbage(void **state)
{
	struct api_server *s = start(false);
	struct json_object *w, *r;
	int a = client(), b = client();
	static const char bin[] = "\x00\x01\xff{\"execute\"\x00:1}\n";

	/* a's request arrives in two pieces around b's whole one */
	send_str(a, "{\"execute\": \"query-ver");
	r = call(b, "{\"execute\": \"query-status\", \"id\": \"b\"}\n", &w);
	assert_string_equal(str_of(w, "id"), "b");
	json_object_put(w);
	r = call(a, "sion\", \"id\": \"a\"}\n", &w);
	assert_string_equal(str_of(r, "version"), IOVM_VERSION);
	assert_string_equal(str_of(w, "id"), "a");
	json_object_put(w);

	/* garbage: an error per line, and the connection goes on */
	send_str(a, "hello\n");
	expect_error(a, API_ERR_GENERIC, "not JSON");
	send_all(a, bin, sizeof(bin) - 1);
	expect_error(a, API_ERR_GENERIC, "NUL");
	send_str(a, "[\"execute\"]\n{\"execute\": 3}\n\n{}\n");
	expect_error(a, API_ERR_GENERIC, "must be a JSON object");
	expect_error(a, API_ERR_GENERIC, "must be a string");
	expect_error(a, API_ERR_GENERIC, "empty");
	expect_error(a, API_ERR_GENERIC, "no \"execute\"");
	/* several requests in one send, answered in order */
	send_str(b, "{\"execute\":\"query-version\",\"id\":1}\n{\"execute\":\"query-status\",\"id\":2}\n");
	w = recv_reply(b);
	assert_int_equal(json_object_get_int(member(w, "id")), 1);
	json_object_put(w);
	w = recv_reply(b);
	assert_int_equal(json_object_get_int(member(w, "id")), 2);
	json_object_put(w);
	r = call(a, "{\"execute\": \"query-version\"}\n", &w);
	json_object_put(w);
	close(a);
	close(b);
	api_free(s);
}

static void test_oversized(void **state)
{
	struct api_server *s = start(false);
	size_t n = API_MAX_LINE + 5000;
	char *line = malloc(n);
	struct json_object *w;
	int fd = client();

	/* a long line, sent in pieces, then a good request on the same
	 * connection: one error, then the answer */
	memset(line, 'x', n);
	send_all(fd, line, n / 3);
	send_all(fd, line, n - n / 3);
	send_str(fd, "yyy\n{\"execute\": \"query-version\", \"id\": 9}\n");
	expect_error(fd, API_ERR_GENERIC, "longer than");
	call(fd, "", &w);
	assert_int_equal(json_object_get_int(member(w, "id")), 9);
	json_object_put(w);

	/* exactly API_MAX_LINE bytes is a request */
	memset(line, ' ', API_MAX_LINE);
	memcpy(line, "{\"execute\": \"query-version\", \"id\": 10}", 38);
	line[API_MAX_LINE] = '\n';
	send_all(fd, line, API_MAX_LINE + 1);
	w = recv_reply(fd);
	assert_int_equal(json_object_get_int(member(w, "id")), 10);
	json_object_put(w);
	/* and one byte more is not */
	memset(line, ' ', API_MAX_LINE + 1);
	memcpy(line, "{\"execute\": \"query-version\", \"id\": 11}", 38);
	line[API_MAX_LINE + 1] = '\n';
	send_all(fd, line, API_MAX_LINE + 2);
	expect_error(fd, API_ERR_GENERIC, "longer than");
	free(line);
	close(fd);
	api_free(s);
}

static void test_hangups_and_limits(void **state)
{
	struct api_server *s = start(false);
	int fds[API_MAX_CLIENTS], extra, fd;
	struct json_object *w;
	char buf[4096];

	/* a client gone mid-line leaves nothing behind */
	fd = client();
	send_str(fd, "{\"execute\": \"shut");
	close(fd);
	/* as many clients as allowed, each answered */
	for (int i = 0; i < API_MAX_CLIENTS; i++) {
		fds[i] = client();
		call(fds[i], "{\"execute\": \"query-version\"}\n", &w);
		json_object_put(w);
	}
	/* one more is told and closed */
	extra = client();
	expect_error(extra, API_ERR_GENERIC, "too many clients");
	expect_eof(extra);
	close(extra);
	assert_int_equal(atomic_load(&shutdowns), 0);
	/* a free slot is taken again */
	close(fds[0]);
	fds[0] = -1;
	for (int tries = 0; fds[0] < 0; tries++) {
		/* the server may see the next connect before the hang-up:
		 * that one is refused, a later one gets the slot */
		int c = client();

		send_str(c, "{\"execute\": \"query-version\"}\n");
		w = recv_reply(c);
		assert_non_null(w);
		if (json_object_object_get_ex(w, "return", NULL))
			fds[0] = c;
		else
			close(c);
		json_object_put(w);
		assert_true(tries < 1000);
	}

	/* a client that sends but never reads is cut off once its unread
	 * replies pass API_MAX_OUTPUT, and the others go on */
	close(fds[1]);
	for (;;) {
		fds[1] = client();
		send_str(fds[1], "{\"execute\": \"query-version\"}\n");
		w = recv_reply(fds[1]);
		if (json_object_object_get_ex(w, "return", NULL)) {
			json_object_put(w);
			break;
		}
		json_object_put(w);
		close(fds[1]);
	}
	{
		static const char req[] = "{\"execute\": \"big\"}\n";
		size_t asked = 0, got = 0;
		ssize_t n;

		for (unsigned int i = 0; i < 2 * (API_MAX_OUTPUT / BIG); i++) {
			if (send(fds[1], req, sizeof(req) - 1, MSG_NOSIGNAL) < 0)
				break;
			asked++;
		}
		assert_true(asked > API_MAX_OUTPUT / BIG);
		/* what arrives ends, short of the replies asked for */
		while ((n = recv(fds[1], buf, sizeof(buf), 0)) > 0)
			got += n;
		assert_true(n == 0 || errno == ECONNRESET);
		assert_true(got < asked * BIG);
	}
	call(fds[2], "{\"execute\": \"query-status\"}\n", &w);
	json_object_put(w);

	/* api_free with clients connected: they see the end */
	api_free(s);
	for (int i = 2; i < API_MAX_CLIENTS; i++) {
		expect_eof(fds[i]);
		close(fds[i]);
	}
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(access(path, F_OK), -1);
}

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socket_file),
		cmocka_unit_test(test_core_commands),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_two_clients_and_garbage),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_hangups_and_limits),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
