/* Serial console (16550 at 0x3f8) output and the exit device (port 0xf4,
 * isa-debug-exit semantics: a write of v ends the VM with status (v<<1)|1). */
#ifndef PROBE_CONSOLE_H
#define PROBE_CONSOLE_H

#include "lib/libc.h"

/* Probe exit values and the VMM exit statuses they become. Tests treat VMM
 * status 1 as pass. */
#define PROBE_EXIT_PASS 0	/* VMM exits 1 */
#define PROBE_EXIT_FAIL 1	/* VMM exits 3 */
#define PROBE_EXIT_CRASH 2	/* VMM exits 5: exception or internal error */

/* printf to the serial port; safe from several CPUs (a spinlock) and from
 * CPL 0 or CPL 3. */
void pr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void console_write(const char *s, size_t n);

/* Prints "probe: PASS" / "probe: FAIL <reason>" and exits the VM. */
__attribute__((noreturn)) void probe_pass(void);
__attribute__((noreturn, format(printf, 1, 2))) void probe_fail(const char *fmt, ...);
__attribute__((noreturn)) void probe_exit(int value);

#endif
