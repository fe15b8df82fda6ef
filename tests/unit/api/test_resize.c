/* The control socket's `resize` (api/resize.c) live: a server on a
 * temporary socket with disks on real temporary files and fake devices
 * that record being told. Growth, re-reading, refusals that change
 * nothing (shrink, misaligned, unknown disk, wrong argument types, a
 * device that cannot tell its guest), a device with no driver yet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/start.h"
#include "block/backend.h"

#define MIB (1ull << 20)
#define NDISKS 3

static char dir[] = "/tmp/iovm-api-resize.XXXXXX";
static char sock[256];
static char img[NDISKS][256];
static struct disk_cfg cfg[NDISKS];
static struct blk_backend be[NDISKS];
static struct api_objects objs;
static struct api_server *srv;

/* What the fake devices were told. */
static struct {
	unsigned int calls;
	void *dev;
	struct blk_backend *be;
	uint64_t size_seen;
} told;

static int told_ok(void *dev, struct blk_backend *b)
{
	told.calls++;
	told.dev = dev;
	told.be = b;
	told.size_seen = blk_size(b);
	return 0;
}

static int no_driver(void *dev, struct blk_backend *b)
{
	told.calls++;
	return -ENOTCONN;
}

static int setup(void **state)
{
	char err[256] = "";
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	memset(&objs, 0, sizeof(objs));
	objs.command = "vhost-user-blk";
	for (int i = 0; i < NDISKS; i++) {
		struct api_disk *d;

		snprintf(img[i], sizeof(img[i]), "%s/d%d.img", dir, i);
		fd = open(img[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, MIB), 0);
		close(fd);
		cfg[i] = (struct disk_cfg){ .path = img[i], .iface = DISK_IF_VIRTIO_BLK,
					    .cache = CACHE_WRITEBACK };
		assert_int_equal(blk_open(&be[i], &cfg[i], err, sizeof(err)), 0);
		d = api_add_disk(&objs, &cfg[i], &be[i], 1);
		assert_non_null(d);
		d->dev = &be[i];	/* anything: the hook gets it back */
	}
	objs.disks[0].resized = told_ok;
	objs.disks[1].resized = NULL;		/* cannot tell its guest */
	objs.disks[2].resized = no_driver;
	srv = api_new();
	assert_non_null(srv);
	assert_int_equal(api_add_resize(srv, &objs), 0);
	assert_int_equal(api_listen(srv, sock, err, sizeof(err)), 0);
	return 0;
}

static int teardown(void **state)
{
	api_free(srv);
	for (int i = 0; i < NDISKS; i++) {
		blk_close(&be[i]);
		unlink(img[i]);
	}
	rmdir(dir);
	return 0;
}

/* One request line; the reply, parsed. */
static struct json_object *call(const char *line)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[4096];
	size_t len = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(sa.sun_path, sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, line, strlen(line), MSG_NOSIGNAL), (ssize_t)strlen(line));
	while (!len || buf[len - 1] != '\n') {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);

		assert_true(n > 0);
		len += n;
	}
	buf[len] = 0;
	close(fd);
	return json_tokener_parse(buf);
}

static struct json_object *member(struct json_object *o, const char *path1, const char *path2)
{
	struct json_object *v = NULL;

	assert_true(json_object_object_get_ex(o, path1, &v));
	if (path2)
		assert_true(json_object_object_get_ex(v, path2, &v));
	return v;
}

static int64_t ret_int(struct json_object *r, const char *name)
{
	return json_object_get_int64(member(r, "return", name));
}

static bool ret_bool(struct json_object *r, const char *name)
{
	return json_object_get_boolean(member(r, "return", name));
}

/* An error reply of class cls whose desc contains what. */
static void expect_error(struct json_object *r, const char *cls, const char *what)
{
	const char *desc = json_object_get_string(member(r, "error", "desc"));

	assert_string_equal(json_object_get_string(member(r, "error", "class")), cls);
	if (!strstr(desc, what))
		fail_msg("desc '%s' does not say '%s'", desc, what);
	json_object_put(r);
}

static uint64_t file_size(int i)
{
	struct stat st;

	assert_int_equal(stat(img[i], &st), 0);
	return st.st_size;
}

static void test_grow(void **state)
{
	struct json_object *r;

	told.calls = 0;
	r = call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": 2097152}, \"id\": 4}\n");
	assert_int_equal(ret_int(r, "old-size"), MIB);
	assert_int_equal(ret_int(r, "new-size"), 2 * MIB);
	assert_true(ret_bool(r, "changed"));
	assert_true(ret_bool(r, "guest-notified"));
	assert_false(json_object_object_get_ex(member(r, "return", NULL), "notice", NULL));
	assert_string_equal(json_object_get_string(member(r, "return", "disk")), "disk0");
	assert_int_equal(json_object_get_int(member(r, "id", NULL)), 4);
	json_object_put(r);
	assert_int_equal(file_size(0), 2 * MIB);
	assert_int_equal(blk_size(&be[0]), 2 * MIB);
	/* told once, with its device and its backend already at the size */
	assert_int_equal(told.calls, 1);
	assert_ptr_equal(told.dev, &be[0]);
	assert_ptr_equal(told.be, &be[0]);
	assert_int_equal(told.size_seen, 2 * MIB);

	/* the same size: nothing changes, nobody is told */
	r = call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": 2097152}}\n");
	assert_false(ret_bool(r, "changed"));
	assert_false(ret_bool(r, "guest-notified"));
	json_object_put(r);
	assert_int_equal(told.calls, 1);

	/* no size: what the operator grew the file to; the disk by its path */
	assert_int_equal(truncate(img[0], 3 * MIB), 0);
	{
		char line[512];

		snprintf(line, sizeof(line),
			 "{\"execute\": \"resize\", \"arguments\": {\"disk\": \"%s\"}}\n", img[0]);
		r = call(line);
	}
	assert_int_equal(ret_int(r, "old-size"), 2 * MIB);
	assert_int_equal(ret_int(r, "new-size"), 3 * MIB);
	assert_true(ret_bool(r, "guest-notified"));
	json_object_put(r);
	assert_int_equal(told.calls, 2);
}

static void test_refused(void **state)
{
	uint64_t before = blk_size(&be[0]);

	told.calls = 0;
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": 524288}}\n"),
		     API_ERR_GENERIC, "shrinking is refused");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": 8388609}}\n"),
		     API_ERR_GENERIC, "logical block");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk9\", \"size\": 8388608}}\n"),
		     API_ERR_DEVICE, "disk9");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": \"8M\"}}\n"),
		     API_ERR_GENERIC, "size");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"size\": -1}}\n"),
		     API_ERR_GENERIC, "size");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"size\": 8388608}}\n"),
		     API_ERR_GENERIC, "disk");
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk0\", \"sise\": 8388608}}\n"),
		     API_ERR_GENERIC, "sise");
	/* a device that cannot tell its guest: its disk is left alone */
	expect_error(call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk1\", \"size\": 8388608}}\n"),
		     API_ERR_GENERIC, "cannot tell the guest");
	assert_int_equal(file_size(1), MIB);
	assert_int_equal(blk_size(&be[1]), MIB);
	assert_int_equal(blk_size(&be[0]), before);
	assert_int_equal(told.calls, 0);
}

/* A device with no driver yet: the disk grows, the reply says why the
 * guest was not told (it reads the size when it comes). */
static void test_no_driver(void **state)
{
	struct json_object *r;

	r = call("{\"execute\": \"resize\", \"arguments\": {\"disk\": \"disk2\", \"size\": 4194304}}\n");
	assert_true(ret_bool(r, "changed"));
	assert_false(ret_bool(r, "guest-notified"));
	assert_non_null(strstr(json_object_get_string(member(r, "return", "notice")),
			       "no driver"));
	json_object_put(r);
	assert_int_equal(blk_size(&be[2]), 4 * MIB);
	assert_int_equal(file_size(2), 4 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_no_driver),
	};

	return cmocka_run_group_tests_name("api-resize", tests, setup, teardown);
}
