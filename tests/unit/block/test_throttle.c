/* Unit tests of the I/O limits' token buckets (block/throttle.c) on a fake
 * clock: the long-run rate equals the limit, bursts pass at once and then
 * the rate holds, a long idle fills no more than the burst, a clock that
 * stands still, goes back or jumps, a request bigger than its bucket, total
 * and per-direction limits together, limits changed on the way; and the
 * --disk options that set them (config.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "block/throttle.h"
#include "config.h"

#define S 1000000000ull		/* a second in ns */
#define T0 (1000 * S)		/* the fake clock's start */

static void set(struct throttle *t, enum disk_limit i, uint64_t rate,
		uint64_t burst, uint64_t now)
{
	struct disk_limits l = { 0 };

	l.rate[i] = rate;
	l.burst[i] = burst;
	memset(t, 0, sizeof(*t));
	throttle_set(t, &l, now);
}

/* Takes requests of bytes at now while they pass; how many passed. */
static unsigned int drain(struct throttle *t, enum thr_dir dir,
			  uint64_t bytes, uint64_t now)
{
	unsigned int n = 0;

	while (!throttle_take(t, dir, bytes, now))
		n++;
	return n;
}

static void test_default_burst(void **state)
{
	assert_int_equal(throttle_cap(0, 0), 0);
	assert_int_equal(throttle_cap(200, 0), 20);
	assert_int_equal(throttle_cap(5, 0), 1);	/* at least one */
	assert_int_equal(throttle_cap(200, 1000), 1000);
}

/* 100 IOPS, polled every millisecond for 100 s: exactly the burst and
 * then 100 a second. */
static void test_long_run_rate(void **state)
{
	struct throttle t;
	uint64_t n = 0;

	set(&t, LIM_IOPS, 100, 0, T0);
	for (uint64_t ms = 0; ms <= 100000; ms++)
		n += drain(&t, THR_READ, 4096, T0 + ms * 1000000);
	assert_int_equal(n, 10 + 100 * 100);
}

/* Driven by the waits it returns: each wait is exact (the request passes
 * at its end, not a nanosecond before), and 10 s hold burst + 10 x rate. */
static void test_waits_exact(void **state)
{
	struct throttle t;
	uint64_t now = T0, n = 0;

	set(&t, LIM_BPS, 1000000, 0, now);	/* 1 MB/s, 100 KB burst */
	while (now <= T0 + 10 * S) {
		uint64_t w = throttle_take(&t, THR_WRITE, 4000, now);

		if (!w) {
			n++;
			continue;
		}
		assert_true(w >= 1);
		assert_int_not_equal(throttle_take(&t, THR_WRITE, 4000, now + w - 1), 0);
		now += w;
	}
	/* 100 KB of burst and 10 MB of rate, in 4000-byte requests; the
	 * last is the one that passed at T0 + 10 s */
	assert_int_equal(n, (100000 + 10 * 1000000) / 4000);
}

/* A burst passes at once, then the rate holds. */
static void test_burst(void **state)
{
	struct throttle t;

	set(&t, LIM_IOPS, 10, 50, T0);
	assert_int_equal(drain(&t, THR_READ, 512, T0), 50);
	assert_int_equal(throttle_take(&t, THR_READ, 512, T0), S / 10);
	assert_int_equal(drain(&t, THR_READ, 512, T0 + S), 10);
	assert_int_equal(drain(&t, THR_READ, 512, T0 + 2 * S), 10);
}

/* An hour idle refills the burst, no more. */
static void test_long_idle(void **state)
{
	struct throttle t;

	set(&t, LIM_IOPS, 10, 5, T0);
	assert_int_equal(drain(&t, THR_WRITE, 0, T0), 5);
	assert_int_equal(drain(&t, THR_WRITE, 0, T0 + 3600 * S), 5);
	assert_int_equal(throttle_take(&t, THR_WRITE, 0, T0 + 3600 * S), S / 10);
}

/* A clock that stands still earns nothing; one that goes back (another
 * queue's older reading) neither earns nor loses; a jump to the end of
 * the clock's range fills the bucket without overflow, at the largest
 * rate too. */
static void test_clock(void **state)
{
	struct throttle t;

	set(&t, LIM_IOPS, 10, 1, T0);
	assert_int_equal(drain(&t, THR_READ, 0, T0), 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(throttle_take(&t, THR_READ, 0, T0), S / 10);
	assert_int_equal(throttle_take(&t, THR_READ, 0, T0 + S / 20), S / 20);
	/* back: nothing earned or lost since T0 + S / 20 */
	assert_int_equal(throttle_take(&t, THR_READ, 0, T0), S / 20);
	assert_int_equal(drain(&t, THR_READ, 0, T0 + S / 10), 1);
	assert_int_equal(drain(&t, THR_READ, 0, UINT64_MAX), 1);

	set(&t, LIM_BPS, CONFIG_LIMIT_MAX, CONFIG_LIMIT_MAX, 0);
	assert_int_equal(throttle_take(&t, THR_READ, CONFIG_LIMIT_MAX, 0), 0);
	assert_int_equal(throttle_take(&t, THR_READ, 1, 0), 1);
	assert_int_equal(throttle_take(&t, THR_READ, CONFIG_LIMIT_MAX, UINT64_MAX), 0);
}

/* A request bigger than its bucket passes once the bucket is full and
 * leaves a debt that every later request waits out. */
static void test_bigger_than_bucket(void **state)
{
	struct throttle t;

	set(&t, LIM_BPS, 1000, 1000, T0);
	/* not full: waits until it is */
	assert_int_equal(throttle_take(&t, THR_WRITE, 1, T0), 0);
	assert_int_equal(throttle_take(&t, THR_WRITE, 5000, T0), S / 1000);
	assert_int_equal(throttle_take(&t, THR_WRITE, 5000, T0 + S / 1000), 0);
	/* level -4000: a 1-byte request waits for 4001 bytes of refill */
	assert_int_equal(throttle_take(&t, THR_WRITE, 1, T0 + S / 1000),
			 4001 * (S / 1000));
	/* even a request of no bytes waits out the debt */
	assert_int_not_equal(throttle_take(&t, THR_WRITE, 0, T0 + S), 0);
	assert_int_equal(throttle_take(&t, THR_WRITE, 0, T0 + S / 1000 + 4 * S), 0);

	/* the largest request at the smallest rate: a wait the clock
	 * cannot hold is the longest it can */
	set(&t, LIM_BPS, 1, 1, T0);
	assert_int_equal(throttle_take(&t, THR_WRITE, UINT64_MAX, T0), 0);
	assert_true(throttle_take(&t, THR_WRITE, 1, T0) == UINT64_MAX);
}

/* Total and per-direction limits together: a request needs both. */
static void test_total_and_direction(void **state)
{
	struct disk_limits l = { 0 };
	struct throttle t = { 0 };

	l.rate[LIM_IOPS] = 100;
	l.burst[LIM_IOPS] = 10;
	l.rate[LIM_IOPS_WR] = 10;
	l.burst[LIM_IOPS_WR] = 2;
	throttle_set(&t, &l, T0);
	assert_int_equal(drain(&t, THR_WRITE, 4096, T0), 2);
	assert_int_equal(drain(&t, THR_READ, 4096, T0), 8);
	/* a read waits for the total, a write for both (the longer) */
	assert_int_equal(throttle_take(&t, THR_READ, 4096, T0), S / 100);
	assert_int_equal(throttle_take(&t, THR_WRITE, 4096, T0), S / 10);
	/* flushes draw nothing */
	assert_int_equal(throttle_take(&t, THR_OTHER, 0, T0), 0);
	/* read limits leave writes alone */
	memset(&l, 0, sizeof(l));
	l.rate[LIM_BPS_RD] = 4096;
	memset(&t, 0, sizeof(t));
	throttle_set(&t, &l, T0);
	assert_int_equal(drain(&t, THR_READ, 4096, T0), 1);
	for (int i = 0; i < 100; i++)
		assert_int_equal(throttle_take(&t, THR_WRITE, 1 << 20, T0), 0);
}

/* New limits: a bucket that was off starts full, one that changes keeps
 * its tokens up to its new size (a debt too), one set to 0 is off. */
static void test_change(void **state)
{
	struct disk_limits l = { 0 };
	struct throttle t = { 0 };

	l.rate[LIM_IOPS] = 10;
	l.burst[LIM_IOPS] = 10;
	throttle_set(&t, &l, T0);
	assert_true(throttle_on(&t));
	assert_int_equal(drain(&t, THR_READ, 0, T0), 10);
	/* raised: still empty, refilled at the new rate */
	l.rate[LIM_IOPS] = 1000;
	l.burst[LIM_IOPS] = 100;
	throttle_set(&t, &l, T0);
	assert_int_equal(throttle_take(&t, THR_READ, 0, T0), S / 1000);
	assert_int_equal(drain(&t, THR_READ, 0, T0 + S), 100);
	/* lowered below what it holds: clamped */
	assert_int_equal(drain(&t, THR_READ, 0, T0 + 10 * S), 100);
	assert_int_equal(drain(&t, THR_READ, 0, T0 + 20 * S), 100);
	l.burst[LIM_IOPS] = 3;
	throttle_set(&t, &l, T0 + 30 * S);
	assert_int_equal(drain(&t, THR_READ, 0, T0 + 30 * S), 3);
	/* off: everything passes; on again: full */
	memset(&l, 0, sizeof(l));
	throttle_set(&t, &l, T0 + 30 * S);
	assert_false(throttle_on(&t));
	for (int i = 0; i < 1000; i++)
		assert_int_equal(throttle_take(&t, THR_READ, 1 << 20, T0 + 30 * S), 0);
	l.rate[LIM_IOPS_RD] = 1;
	l.burst[LIM_IOPS_RD] = 4;
	throttle_set(&t, &l, T0 + 30 * S);
	assert_int_equal(drain(&t, THR_READ, 0, T0 + 30 * S), 4);
}

static int parse(const char *arg, struct disk_cfg *d, char *err)
{
	err[0] = 0;
	return config_parse_disk(arg, d, err, 256);
}

static void test_options(void **state)
{
	struct disk_cfg d;
	char err[256];

	assert_int_equal(parse("path=a.img,iops=200,iops-burst=1000,bps-wr=10M,"
			       "bps-wr-burst=1M,iops-rd=50", &d, err), 0);
	assert_int_equal(d.limits.rate[LIM_IOPS], 200);
	assert_int_equal(d.limits.burst[LIM_IOPS], 1000);
	assert_int_equal(d.limits.rate[LIM_BPS_WR], 10 << 20);
	assert_int_equal(d.limits.burst[LIM_BPS_WR], 1 << 20);
	assert_int_equal(d.limits.rate[LIM_IOPS_RD], 50);
	assert_int_equal(d.limits.rate[LIM_BPS], 0);
	assert_true(disk_limits_any(&d.limits));
	config_free_disk(&d);

	assert_int_equal(parse("path=a.img", &d, err), 0);
	assert_false(disk_limits_any(&d.limits));
	config_free_disk(&d);
	/* 0 is no limit */
	assert_int_equal(parse("path=a.img,bps=0,iops-wr=0", &d, err), 0);
	assert_false(disk_limits_any(&d.limits));
	config_free_disk(&d);

	assert_int_equal(parse("path=a.img,iops-burst=10", &d, err), -EINVAL);
	assert_string_equal(err, "--disk: iops-burst needs iops (a burst of no limit)");
	assert_int_equal(parse("path=a.img,iops=abc", &d, err), -EINVAL);
	assert_string_equal(err, "--disk: iops=abc is not a number from 0 to 10^15");
	assert_int_equal(parse("path=a.img,iops=-1", &d, err), -EINVAL);
	assert_int_equal(parse("path=a.img,iops=1000000000000001", &d, err), -EINVAL);
	assert_int_equal(parse("path=a.img,iops=1000000000000000", &d, err), 0);
	config_free_disk(&d);
	assert_int_equal(parse("path=a.img,bps-rd=1000T", &d, err), -EINVAL);
	assert_non_null(strstr(err, "bps-rd=1000T is not a size"));
	assert_int_equal(parse("path=a.img,bps=", &d, err), -EINVAL);
	assert_int_equal(parse("path=a.img,iops", &d, err), -EINVAL);
	assert_int_equal(parse("path=a.img,iops-total=5", &d, err), -EINVAL);
	assert_non_null(strstr(err, "unknown option 'iops-total'"));
}

static void test_check(void **state)
{
	struct disk_limits l = { 0 };
	char err[160];

	assert_int_equal(disk_limits_check(&l, err, sizeof(err)), 0);
	l.rate[LIM_BPS_RD] = CONFIG_LIMIT_MAX + 1;
	assert_int_equal(disk_limits_check(&l, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bps-rd is above the largest limit, 10^15");
	l.rate[LIM_BPS_RD] = 1;
	l.burst[LIM_BPS_RD] = CONFIG_LIMIT_MAX + 1;
	assert_int_equal(disk_limits_check(&l, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bps-rd-burst is above the largest limit, 10^15");
	l.burst[LIM_BPS_RD] = 0;
	l.burst[LIM_IOPS_WR] = 3;
	assert_int_equal(disk_limits_check(&l, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "iops-wr-burst needs iops-wr (a burst of no limit)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_burst),
		cmocka_unit_test(test_long_run_rate),
		cmocka_unit_test(test_waits_exact),
		cmocka_unit_test(test_burst),
		cmocka_unit_test(test_long_idle),
		cmocka_unit_test(test_clock),
		cmocka_unit_test(test_bigger_than_bucket),
		cmocka_unit_test(test_total_and_direction),
		cmocka_unit_test(test_change),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
