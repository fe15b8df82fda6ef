/* Probe guest main (CPL 3): early setup, then the test or benchmark named on
 * the command line. */
#include "lib/probe.h"

extern const struct probe_test __probe_tests_start[], __probe_tests_end[];

static const struct probe_test *find_test(const char *name)
{
	for (const struct probe_test *t = __probe_tests_start;
	     t < __probe_tests_end; t++)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static void list_tests(void)
{
	for (const struct probe_test *t = __probe_tests_start;
	     t < __probe_tests_end; t++)
		pr("probe:   %-12s %s\n", t->name, t->help);
}

/* hold_ms=N after a test that passed: instead of exiting, say so and wait
 * to be stopped from outside (a host test's SIGTERM: what the test wrote
 * must then be flushed by the VMM's shutdown, not by the guest). Tests
 * that use hold_ms themselves (blk-flush) never get here. */
static void hold(void)
{
	uint64_t ms = opt_u64("hold_ms", 0);

	pr("probe: HOLD test passed, waiting %lu ms to be stopped\n", ms);
	for (uint64_t end = rdtsc() + ms_to_ticks(ms); rdtsc() < end;)
		cpu_relax();
	probe_fail("still running %lu ms after HOLD (not stopped)", ms);
}

__attribute__((noreturn)) void probe_main(void);
void probe_main(void)
{
	const char *test, *bench;
	const struct probe_test *t;
	char name[80];

	idt_init();
	if (boot_info_init() < 0) {
		pr("probe: FAIL not started by a multiboot loader\n");
		probe_exit(PROBE_EXIT_FAIL);
	}
	pic_disable();
	pr("probe: start cmdline=\"%s\"\n", cmdline());
	if (tsc_calibrate() < 0)
		pr("probe: warning: TSC calibration failed, timings assume 1 GHz\n");
	pr("probe: tsc_khz=%lu tsc_source=%s\n", tsc_khz, tsc_source);

	test = opt_str("test", NULL);
	bench = opt_str("bench", NULL);
	if (test && bench)
		probe_fail("give test= or bench=, not both");
	if (bench)
		snprintf(name, sizeof(name), "bench-%s", bench);
	else
		snprintf(name, sizeof(name), "%s", test ? test : "basic");
	t = find_test(name);
	if (!t) {
		pr("probe: unknown test '%s'; known:\n", name);
		list_tests();
		probe_fail("unknown test %s", name);
	}
	t->run();
	if (opt_has("hold_ms"))
		hold();
	probe_pass();
}
