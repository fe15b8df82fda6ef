/* lib/iotrace: a thread's records, the count of those dropped when its
 * buffer is full, and the dump file read back; built with the trace on
 * whatever the build's io_trace option says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/iotrace.h"

static char dir[] = "/tmp/iotrace-test.XXXXXX";
static char prefix[64];
static unsigned int dumps;	/* files written so far: the next one's <n> */

/* Reads PREFIX.<pid>.<name>.<n> into *h and returns its records. */
static struct iotrace_rec *read_dump(const char *name, unsigned int n,
				     struct iotrace_file_hdr *h)
{
	char path[128];
	struct iotrace_rec *r;
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d.%s.%u", prefix, (int)getpid(), name, n);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(h, sizeof(*h), 1, f), 1);
	r = calloc(h->nrec + 1, sizeof(*r));
	assert_non_null(r);
	assert_int_equal(fread(r, sizeof(*r), h->nrec, f), h->nrec);
	assert_int_equal(fgetc(f), EOF);	/* nothing after them */
	fclose(f);
	unlink(path);
	return r;
}

static void test_off_without_env(void **state)
{
	unsetenv("IOVM_IO_TRACE");
	iotrace_thread_start("q0", 0);
	assert_false(iotrace_on());
	iotrace(IOT_POP, 1, 2);	/* nowhere to go: no crash */
	assert_int_equal(iotrace_thread_end(), 0);
}

static void test_records_and_drops(void **state)
{
	struct iotrace_file_hdr h;
	struct iotrace_rec *r;

	setenv("IOVM_IO_TRACE", prefix, 1);
	setenv("IOVM_IO_TRACE_EVENTS", "4", 1);
	iotrace_thread_start("blk/q7", 7);
	assert_true(iotrace_on());
	for (uint32_t i = 0; i < 6; i++)
		iotrace(IOT_POP + i, 100 + i, 0x80000000u | i);
	assert_int_equal(iotrace_thread_end(), 0);
	assert_false(iotrace_on());

	r = read_dump("blk_q7", dumps++, &h);	/* '/' is no path here */
	assert_memory_equal(h.magic, IOTRACE_MAGIC, 8);
	assert_int_equal(h.version, IOTRACE_VERSION);
	assert_int_equal(h.rec_size, sizeof(struct iotrace_rec));
	assert_int_equal(h.nrec, 4);
	assert_int_equal(h.dropped, 2);
	assert_int_equal(h.pid, getpid());
	assert_int_equal(h.queue, 7);
	assert_string_equal(h.name, "blk_q7");
	assert_true(h.start_ns <= h.end_ns);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(r[i].ev, IOT_POP + i);
		assert_int_equal(r[i].id, 100 + i);
		assert_int_equal(r[i].arg, 0x80000000u | i);
		assert_int_equal(r[i].queue, 7);
		assert_true(r[i].ns >= (i ? r[i - 1].ns : h.start_ns));
		assert_true(r[i].ns <= h.end_ns);
	}
	free(r);
	unsetenv("IOVM_IO_TRACE_EVENTS");
}

static void *other_thread(void *arg)
{
	/* Not started: records nothing, whatever the main thread does. */
	iotrace(IOT_PUSH, 1, 1);
	*(bool *)arg = iotrace_on();
	return NULL;
}

static void test_per_thread(void **state)
{
	struct iotrace_file_hdr h;
	struct iotrace_rec *r;
	pthread_t t;
	bool on = true;

	setenv("IOVM_IO_TRACE", prefix, 1);
	setenv("IOVM_IO_TRACE_EVENTS", "junk", 1);	/* the default, then */
	iotrace_thread_start("q1", 1);
	iotrace(IOT_SPIN_START, 0, 5);
	assert_int_equal(pthread_create(&t, NULL, other_thread, &on), 0);
	pthread_join(t, NULL);
	assert_false(on);
	iotrace(IOT_SPIN_END, IOT_SPIN_MORE, 9);
	assert_int_equal(iotrace_thread_end(), 0);
	unsetenv("IOVM_IO_TRACE_EVENTS");

	r = read_dump("q1", dumps++, &h);
	assert_int_equal(h.nrec, 2);
	assert_int_equal(h.dropped, 0);
	assert_int_equal(r[0].ev, IOT_SPIN_START);
	assert_int_equal(r[1].ev, IOT_SPIN_END);
	assert_int_equal(r[1].id, IOT_SPIN_MORE);
	assert_int_equal(r[1].arg, 9);
	free(r);
}

static void test_unwritable(void **state)
{
	setenv("IOVM_IO_TRACE", "/nonexistent-iotrace-dir/t", 1);
	iotrace_thread_start("q2", 2);
	iotrace(IOT_POP, 1, 1);
	dumps++;	/* tried: the counter moves */
	assert_int_equal(iotrace_thread_end(), -ENOENT);
	assert_false(iotrace_on());
	unsetenv("IOVM_IO_TRACE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_without_env),
		cmocka_unit_test(test_records_and_drops),
		cmocka_unit_test(test_per_thread),
		cmocka_unit_test(test_unwritable),
	};
	int ret;

	if (!mkdtemp(dir))
		return 1;
	snprintf(prefix, sizeof(prefix), "%s/t", dir);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return ret;
}
