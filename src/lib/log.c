/* Logging to stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "lib/log.h"

enum log_level log_threshold = LOG_INFO;

static const char *const level_prefix[] = {
	[LOG_ERR] = "error: ",
	[LOG_WARN] = "warning: ",
	[LOG_INFO] = "",
	[LOG_DEBUG] = "debug: ",
};

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > log_threshold)
		return;
	n = snprintf(line, sizeof(line), "iovm: %s", level_prefix[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	/* One write per line so that lines from several threads do not mix. */
	fprintf(stderr, "%s\n", line);
}
