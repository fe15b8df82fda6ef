/* Logging: one line per message on stderr, prefixed with "iovm: ". */
#ifndef IOVM_LIB_LOG_H
#define IOVM_LIB_LOG_H

#include <pthread.h>
#include <stdint.h>

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

/* Host errors the operator must see however often they happen (a disk's
 * EIO, ENOSPC): at most LOG_RATE_BURST lines per LOG_RATE_INTERVAL_NS per
 * call site, and the first line after a quiet interval says how many were
 * left out ("... N similar messages suppressed"), so none disappears
 * without a trace. Callable from any thread. */
#define LOG_RATE_BURST 10
#define LOG_RATE_INTERVAL_NS 5000000000ull

struct log_rate {
	pthread_mutex_t lock;
	uint64_t start_ns;	/* of the current interval */
	unsigned int printed;	/* lines in the current interval */
	uint64_t suppressed;	/* left out since the last report */
	uint64_t total_suppressed;
};

#define LOG_RATE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER, .printed = 0 }

void log_rated(struct log_rate *r, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_rated_here(level, ...)                                      \
	do {                                                            \
		static struct log_rate __log_rate = LOG_RATE_INIT;      \
		log_rated(&__log_rate, level, __VA_ARGS__);             \
	} while (0)
#define pr_err_rated(...) log_rated_here(LOG_ERR, __VA_ARGS__)
#define pr_warn_rated(...) log_rated_here(LOG_WARN, __VA_ARGS__)

/* Tests: the clock the rate limit reads (NULL: CLOCK_MONOTONIC), and
 * where lines go (NULL: stderr). */
void log_set_clock(uint64_t (*now_ns)(void));
void log_set_sink(void (*sink)(const char *line));

#endif
