/* Serial console and VM exit. */
#include "lib/console.h"

#include "lib/arch.h"
#include "lib/cpu.h"

#define COM1 0x3f8
#define EXIT_PORT 0xf4

static volatile int console_lock;

static void lock(void)
{
	while (__atomic_exchange_n(&console_lock, 1, __ATOMIC_ACQUIRE))
		while (console_lock)
			cpu_relax();
}

static void unlock(void)
{
	__atomic_store_n(&console_lock, 0, __ATOMIC_RELEASE);
}

/* A VMM's 16550 accepts bytes as fast as they come, so there is no LSR
 * polling: the whole buffer goes out in one `rep outsb` at CPL 0 (one exit),
 * where CPL 3 would pay a trap per byte. */
void console_write(const char *s, size_t n)
{
	lock();
	sys_write(s, n);
	unlock();
}

void pr(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf))
		n = sizeof(buf) - 1;
	console_write(buf, (size_t)n);
}

void probe_exit(int value)
{
	outb(EXIT_PORT, (uint8_t)value);
	/* The exit device is missing: nothing else to do but stop here. */
	for (;;)
		cpu_relax();
}

void probe_pass(void)
{
	pr("probe: PASS\n");
	probe_exit(PROBE_EXIT_PASS);
}

void probe_fail(const char *fmt, ...)
{
	char buf[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pr("probe: FAIL %s\n", buf);
	probe_exit(PROBE_EXIT_FAIL);
}
