/* Unit tests of blk_resize: a file grows (ftruncate) or is re-read after
 * the operator grew it, shrinking and misaligned sizes are refused and
 * change nothing, a read-only disk only takes what its file grew to, a
 * network disk without a resize call (NBD) says so and one with it (RBD)
 * is asked; the queue's range check follows the new size at once. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "block/backend.h"
#include "block/driver.h"

#define MIB (1ull << 20)

struct fx {
	char path[64];
	struct blk_backend be;
	char err[256];
};

static struct fx *make(bool ro)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK, .ro = ro };
	int fd;

	assert_non_null(f);
	strcpy(f->path, "/tmp/iovm-resize-XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, MIB), 0);
	close(fd);
	cfg.path = f->path;
	assert_int_equal(blk_open(&f->be, &cfg, f->err, sizeof(f->err)), 0);
	return f;
}

static void drop(struct fx *f)
{
	blk_close(&f->be);
	unlink(f->path);
	free(f);
}

/* blk_size, not inlined: GCC 12 with -fsanitize=address takes the atomic
 * load inlined into these tests for a write into an empty object
 * (-Wstringop-overflow), a false alarm. */
static uint64_t __attribute__((noinline)) size_of(const struct blk_backend *be)
{
	return blk_size(be);
}

static uint64_t file_size(struct fx *f)
{
	struct stat st;

	assert_int_equal(stat(f->path, &st), 0);
	return st.st_size;
}

/* The operator's side: the file's length changed behind iovm. */
static void set_file_size(struct fx *f, uint64_t n)
{
	assert_int_equal(truncate(f->path, (off_t)n), 0);
}

static void done_cb(void *tag, int res)
{
	*(int *)tag = res;
}

/* A read of one sector at off through a queue: its result. */
static int read_at(struct fx *f, uint64_t off)
{
	struct blk_queue *q = blkq_create(4);
	char buf[512];
	struct iovec iov = { buf, sizeof(buf) };
	int res = 1, ret;

	assert_non_null(q);
	ret = blkq_rw(q, &f->be, BLK_OP_READ, &iov, 1, off, done_cb, &res);
	if (!ret) {
		assert_int_equal(blkq_submit(q), 0);
		while (res == 1)
			assert_true(blkq_reap(q, true) >= 0);
		ret = res;
	}
	blkq_destroy(q);
	return ret;
}

static void test_grow_file(void **state)
{
	struct fx *f = make(false);

	assert_int_equal(read_at(f, MIB), -EINVAL);	/* past the end */
	assert_int_equal(blk_resize(&f->be, 2 * MIB, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 2 * MIB);
	assert_int_equal(file_size(f), 2 * MIB);
	/* the next request is checked against the new size */
	assert_int_equal(read_at(f, MIB), 512);
	assert_int_equal(read_at(f, 2 * MIB), -EINVAL);
	/* the same size again: nothing to do, no error */
	assert_int_equal(blk_resize(&f->be, 2 * MIB, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 2 * MIB);
	drop(f);
}

static void test_refused(void **state)
{
	struct fx *f = make(false);

	/* shrinking */
	assert_int_equal(blk_resize(&f->be, MIB / 2, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "shrinking is refused"));
	assert_int_equal(size_of(&f->be), MIB);
	assert_int_equal(file_size(f), MIB);
	/* not a whole number of logical blocks */
	assert_int_equal(blk_resize(&f->be, 2 * MIB + 100, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "logical block"));
	assert_int_equal(size_of(&f->be), MIB);
	assert_int_equal(file_size(f), MIB);
	/* a file the operator made longer than asked is never cut */
	set_file_size(f, 4 * MIB);
	assert_int_equal(blk_resize(&f->be, 3 * MIB, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "resize without a size"));
	assert_int_equal(file_size(f), 4 * MIB);
	assert_int_equal(size_of(&f->be), MIB);
	drop(f);
}

static void test_reread(void **state)
{
	struct fx *f = make(false);

	/* size 0: whatever the file has now */
	set_file_size(f, 3 * MIB);
	assert_int_equal(blk_resize(&f->be, 0, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 3 * MIB);
	/* unchanged: still fine */
	assert_int_equal(blk_resize(&f->be, 0, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 3 * MIB);
	/* a file cut shorter behind iovm is not followed */
	set_file_size(f, 2 * MIB);
	assert_int_equal(blk_resize(&f->be, 0, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "smaller than the disk's"));
	assert_int_equal(size_of(&f->be), 3 * MIB);
	/* nor one of a length that is no whole number of sectors */
	set_file_size(f, 4 * MIB + 1);
	assert_int_equal(blk_resize(&f->be, 0, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "logical block"));
	assert_int_equal(size_of(&f->be), 3 * MIB);
	drop(f);
}

/* A read-only disk: iovm never writes its file, not even its length, but
 * the disk follows a file the operator grew. */
static void test_read_only(void **state)
{
	struct fx *f = make(true);

	assert_int_equal(blk_resize(&f->be, 2 * MIB, f->err, sizeof(f->err)), -EROFS);
	assert_non_null(strstr(f->err, "read-only"));
	assert_int_equal(file_size(f), MIB);
	assert_int_equal(size_of(&f->be), MIB);
	set_file_size(f, 2 * MIB);
	assert_int_equal(blk_resize(&f->be, 0, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 2 * MIB);
	/* asking for exactly what the file has is fine too */
	set_file_size(f, 3 * MIB);
	assert_int_equal(blk_resize(&f->be, 3 * MIB, f->err, sizeof(f->err)), 0);
	assert_int_equal(size_of(&f->be), 3 * MIB);
	drop(f);
}

/* Network disks: what the driver offers. */
static struct {
	uint64_t image;		/* the fake image's size */
	uint64_t asked;		/* the last new_size the driver got */
	unsigned int calls;
} img;

static int fake_resize(struct blk_backend *be, uint64_t new_size, uint64_t *now,
		       char *err, size_t errlen)
{
	img.calls++;
	img.asked = new_size;
	if (new_size)
		img.image = new_size;
	*now = img.image;
	return 0;
}

static const struct blk_driver fixed_drv = { .name = "nbd" };
static const struct blk_driver sized_drv = { .name = "rbd", .resize = fake_resize };

static void net_backend(struct blk_backend *be, const struct blk_driver *drv)
{
	memset(be, 0, sizeof(*be));
	be->fd = be->fd_buffered = -1;
	be->size = 8 * MIB;
	be->block_size = 512;
	be->drv = drv;
	be->path = (char *)"net:disk";
}

static void test_network(void **state)
{
	struct blk_backend be;
	char err[256];

	net_backend(&be, &fixed_drv);
	assert_int_equal(blk_resize(&be, 16 * MIB, err, sizeof(err)), -EOPNOTSUPP);
	assert_non_null(strstr(err, "an nbd disk cannot change size"));
	assert_int_equal(blk_resize(&be, 0, err, sizeof(err)), -EOPNOTSUPP);
	assert_int_equal(size_of(&be), 8 * MIB);

	net_backend(&be, &sized_drv);
	img.image = 8 * MIB;
	assert_int_equal(blk_resize(&be, 16 * MIB, err, sizeof(err)), 0);
	assert_int_equal(img.asked, 16 * MIB);
	assert_int_equal(size_of(&be), 16 * MIB);
	/* grown by someone else: re-read */
	img.image = 20 * MIB;
	assert_int_equal(blk_resize(&be, 0, err, sizeof(err)), 0);
	assert_int_equal(img.asked, 0);
	assert_int_equal(size_of(&be), 20 * MIB);
	/* the size it has already: re-read, not resized */
	assert_int_equal(blk_resize(&be, 20 * MIB, err, sizeof(err)), 0);
	assert_int_equal(img.asked, 0);
	/* shrinking never reaches the driver */
	img.calls = 0;
	assert_int_equal(blk_resize(&be, 8 * MIB, err, sizeof(err)), -EINVAL);
	assert_int_equal(img.calls, 0);
	/* read-only: never resized by iovm, re-read only */
	be.ro = true;
	assert_int_equal(blk_resize(&be, 32 * MIB, err, sizeof(err)), -EROFS);
	assert_int_equal(img.calls, 0);
	img.image = 24 * MIB;
	assert_int_equal(blk_resize(&be, 0, err, sizeof(err)), 0);
	assert_int_equal(size_of(&be), 24 * MIB);
	/* an image that came back smaller is refused */
	img.image = 4 * MIB;
	assert_int_equal(blk_resize(&be, 0, err, sizeof(err)), -EINVAL);
	assert_int_equal(size_of(&be), 24 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_file),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_reread),
		cmocka_unit_test(test_read_only),
		cmocka_unit_test(test_network),
	};

	return cmocka_run_group_tests_name("block-resize", tests, NULL, NULL);
}
