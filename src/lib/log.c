/* Logging to stderr, and a time-based rate limit for repeated host errors. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "lib/clock.h"
#include "lib/log.h"

enum log_level log_threshold = LOG_INFO;

static uint64_t (*log_clock)(void);
static void (*log_sink)(const char *line);

static const char *const level_prefix[] = {
	[LOG_ERR] = "error: ",
	[LOG_WARN] = "warning: ",
	[LOG_INFO] = "",
	[LOG_DEBUG] = "debug: ",
};

void log_set_clock(uint64_t (*now_ns)(void))
{
	log_clock = now_ns;
}

void log_set_sink(void (*sink)(const char *line))
{
	log_sink = sink;
}

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	int n;

	if (level > log_threshold)
		return;
	n = snprintf(line, sizeof(line), "iovm: %s", level_prefix[level]);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (log_sink) {
		log_sink(line);
		return;
	}
	/* One write per line so that lines from several threads do not mix. */
	fprintf(stderr, "%s\n", line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void log_rated(struct log_rate *r, enum log_level level, const char *fmt, ...)
{
	uint64_t now, missed = 0;
	bool print;
	va_list ap;

	pthread_mutex_lock(&r->lock);
	/* Read under the lock: a time read before another thread started a
	 * newer interval would wrap now - start_ns and start yet another. */
	now = log_clock ? log_clock() : mono_ns();
	if (!r->printed || now - r->start_ns >= LOG_RATE_INTERVAL_NS) {
		/* A new interval: report what the last one left out. */
		missed = r->suppressed;
		r->suppressed = 0;
		r->start_ns = now;
		r->printed = 0;
	}
	print = r->printed < LOG_RATE_BURST;
	if (print) {
		r->printed++;
	} else {
		r->suppressed++;
		r->total_suppressed++;
	}
	/* Under the lock: the count line comes before the new message. */
	if (missed)
		log_msg(level, "... %llu similar messages suppressed",
			(unsigned long long)missed);
	if (print) {
		va_start(ap, fmt);
		log_vmsg(level, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->lock);
}
