/*
 * log.c: see log.h.  Single-threaded callers, except log_rdkafka_cb which
 * librdkafka may call from its own threads (and log_assert_fail*, from
 * any thread); a line is written with one write(2) so lines never
 * interleave.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"

int log_level_cur = LOG_LVL_INFO;
static const char *log_prog = "mirrord";
static int log_journal;

static const char *const level_names[] = {
#define X(e, s, p) [LOG_LVL_##e] = s,
	LOG_LEVELS(X)
#undef X
};
static const int level_prio[] = {
#define X(e, s, p) [LOG_LVL_##e] = p,
	LOG_LEVELS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(level_names) == LOG_LVL_COUNT, "level table");

int64_t clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void log_init(const char *progname, int level, int flags)
{
	if (progname != NULL)
		log_prog = progname;
	log_set_level(level);
	log_journal = (flags & LOG_F_JOURNAL) != 0;
	if ((flags & LOG_F_AUTO) && getenv("JOURNAL_STREAM") != NULL)
		log_journal = 1;
}

void log_set_level(int level)
{
	if (level >= 0 && level < LOG_LVL_COUNT)
		log_level_cur = level;
}

int log_level_parse(const char *name)
{
	for (int i = 0; i < LOG_LVL_COUNT; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	if (strcmp(name, "warning") == 0)
		return LOG_LVL_WARN;
	return -1;
}

const char *log_level_name(int level)
{
	if (level < 0 || level >= LOG_LVL_COUNT)
		return "?";
	return level_names[level];
}

void log_vemit(int level, int errnum, const char *fmt, va_list ap)
{
	char line[4096];
	size_t n = 0;
	int r;

	if (level < 0)
		level = 0;
	if (level >= LOG_LVL_COUNT)
		level = LOG_LVL_DEBUG;
	if (log_journal) {
		r = snprintf(line, sizeof(line), "<%d>", level_prio[level]);
	} else {
		struct timespec ts;
		struct tm tm;
		char tbuf[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
		r = snprintf(line, sizeof(line), "%s.%03ldZ %s[%d] %s: ", tbuf,
		    ts.tv_nsec / 1000000, log_prog, (int)getpid(),
		    level_names[level]);
	}
	if (r > 0)
		n = (size_t)r;
	if (n < sizeof(line)) {
		r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		if (r > 0)
			n = MIN(n + (size_t)r, sizeof(line) - 1);
	}
	if (errnum != 0 && n < sizeof(line)) {
		r = snprintf(line + n, sizeof(line) - n, ": %s", strerror(errnum));
		if (r > 0)
			n = MIN(n + (size_t)r, sizeof(line) - 1);
	}
	/* Keep one record per line: fold embedded newlines. */
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* A failed write of a log line has nowhere to be reported. */
	(void)!write(STDERR_FILENO, line, n);
}

void log_emit(int level, int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(level, errnum, fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vemit(LOG_LVL_ERROR, saved, fmt, ap);
	va_end(ap);
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(LOG_LVL_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}

void log_assert_fail(const char *expr, const char *file, int line,
    const char *func)
{
	log_emit(LOG_LVL_ERROR, 0, "assertion failed: %s at %s:%d (%s)", expr,
	    file, line, func);
	abort();
}

void log_assert_failf(const char *expr, const char *file, int line,
    const char *func, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_emit(LOG_LVL_ERROR, 0, "assertion failed: %s at %s:%d (%s): %s",
	    expr, file, line, func, msg);
	abort();
}

static void libevent_log_cb(int severity, const char *msg)
{
	int level;

	switch (severity) {
	case EVENT_LOG_DEBUG:
		level = LOG_LVL_DEBUG;
		break;
	case EVENT_LOG_MSG:
		level = LOG_LVL_INFO;
		break;
	case EVENT_LOG_WARN:
		level = LOG_LVL_WARN;
		break;
	default:
		level = LOG_LVL_ERROR;
		break;
	}
	LOG_AT(level, 0, "libevent: %s", msg);
}

static void libevent_fatal_cb(int err)
{
	fatalx("libevent: fatal error %d", err);
}

void log_route_libevent(void)
{
	event_set_log_callback(libevent_log_cb);
	event_set_fatal_callback(libevent_fatal_cb);
}

void log_rdkafka_cb(const struct rd_kafka_s *rk, int level, const char *fac,
    const char *buf)
{
	int lvl;

	(void)rk;
	/* librdkafka uses syslog levels 0..7. */
	if (level <= 3)
		lvl = LOG_LVL_ERROR;
	else if (level == 4)
		lvl = LOG_LVL_WARN;
	else if (level <= 6)
		lvl = LOG_LVL_INFO;
	else
		lvl = LOG_LVL_DEBUG;
	LOG_AT(lvl, 0, "librdkafka: %s: %s", fac, buf);
}
