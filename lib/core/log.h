/*
 * log.h: the one log module.  Every message of mirrord, librdkafka and
 * libevent goes through here.  The level is checked before anything is
 * formatted.  In the foreground lines go to stderr with a timestamp; under
 * systemd (JOURNAL_STREAM set, or log_init(..., LOG_F_JOURNAL)) each line
 * starts with a "<N>" syslog priority prefix that journald understands.
 *
 * Never pass secrets (passwords, SASL tokens) to these functions: callers
 * redact with config_redact()/log_redacted() first.
 */
#ifndef MIRRORD_LOG_H
#define MIRRORD_LOG_H

#include <stdarg.h>
#include "compat.h"

#define LOG_LEVELS(X) \
	X(ERROR, "error", 3) \
	X(WARN, "warn", 4) \
	X(INFO, "info", 6) \
	X(DEBUG, "debug", 7)

enum log_level {
#define X(e, s, p) LOG_LVL_##e,
	LOG_LEVELS(X)
#undef X
	LOG_LVL_COUNT
};

#define LOG_F_JOURNAL 0x1 /* "<N>" priority prefixes, no timestamp */
#define LOG_F_AUTO 0x2    /* journal format if JOURNAL_STREAM is set */

extern int log_level_cur;

void log_init(const char *progname, int level, int flags);
void log_set_level(int level);
/* Returns the level for "error", "warn", "info" or "debug", or -1. */
int log_level_parse(const char *name);
const char *log_level_name(int level);

/* Route libevent's internal messages into this module. */
void log_route_libevent(void);
/* A librdkafka log callback (rd_kafka_conf_set_log_cb). */
struct rd_kafka_s;
void log_rdkafka_cb(const struct rd_kafka_s *rk, int level, const char *fac,
    const char *buf);

void log_emit(int level, int errnum, const char *fmt, ...) PRINTF_LIKE(3, 4);
void log_vemit(int level, int errnum, const char *fmt, va_list ap);

#define LOG_AT(lvl, errnum, ...) \
	do { \
		if (unlikely(log_level_cur >= (lvl))) \
			log_emit((lvl), (errnum), __VA_ARGS__); \
	} while (0)

/* _warn/_error append strerror(errno); the x variants do not. */
#define log_error(...) LOG_AT(LOG_LVL_ERROR, errno, __VA_ARGS__)
#define log_errorx(...) LOG_AT(LOG_LVL_ERROR, 0, __VA_ARGS__)
#define log_warn(...) LOG_AT(LOG_LVL_WARN, errno, __VA_ARGS__)
#define log_warnx(...) LOG_AT(LOG_LVL_WARN, 0, __VA_ARGS__)
#define log_info(...) LOG_AT(LOG_LVL_INFO, 0, __VA_ARGS__)
#define log_debug(...) LOG_AT(LOG_LVL_DEBUG, 0, __VA_ARGS__)

NORETURN void fatal(const char *fmt, ...) PRINTF_LIKE(1, 2);  /* + errno */
NORETURN void fatalx(const char *fmt, ...) PRINTF_LIKE(1, 2);

/* An invariant broke (massert.h's MR_ASSERT and MR_ASSERT_MSG): logs
 * "assertion failed: <expr> at <file>:<line> (<func>)" (and ": " with
 * fmt's words) at error level, whatever the level, and calls abort(). */
NORETURN void log_assert_fail(const char *expr, const char *file, int line,
    const char *func);
NORETURN void log_assert_failf(const char *expr, const char *file, int line,
    const char *func, const char *fmt, ...) PRINTF_LIKE(5, 6);

#include <errno.h>

#endif
