/* Test registry: each driver/test file registers its entry points with
 * PROBE_TEST; `test=NAME` (or `bench=NAME`, looked up as "bench-NAME") on
 * the command line selects one. A test returns to pass, or calls
 * probe_fail(). */
#ifndef PROBE_PROBE_H
#define PROBE_PROBE_H

#include "lib/arch.h"
#include "lib/boot.h"
#include "lib/console.h"
#include "lib/cpu.h"
#include "lib/libc.h"
#include "lib/timing.h"

struct probe_test {
	const char *name;
	const char *help;
	void (*run)(void);
};

#define PROBE_TEST(ident, name_, fn_, help_)                                  \
	static const struct probe_test probe_test_##ident                     \
		__attribute__((used, section(".probe_tests"), aligned(8))) = { \
			.name = name_, .help = help_, .run = fn_ }

/* Measures port-I/O round trips (shared by `basic` and `pio`). */
void pio_measure(void);
/* Measures MMIO exit round trips from CPL 3. */
void mmio_measure(void);
/* Enumerates CPUs, starts the APs, reports memory (part of `basic`). */
void basic_report(void);

#endif
