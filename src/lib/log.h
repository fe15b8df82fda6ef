/* Logging: one line per message on stderr, prefixed with "iovm: ". */
#ifndef IOVM_LIB_LOG_H
#define IOVM_LIB_LOG_H

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above this level are dropped; set from --verbose/--quiet. */
extern enum log_level log_threshold;

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pr_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Guest-caused problems are logged at most a few times per call site, so a
 * hostile guest cannot flood the host's log. */
#define pr_guest(...)                                                   \
	do {                                                            \
		static unsigned __pr_guest_count;                       \
		if (__pr_guest_count < 8) {                             \
			__pr_guest_count++;                             \
			log_msg(LOG_WARN, "guest: " __VA_ARGS__);       \
		}                                                       \
	} while (0)

#endif
