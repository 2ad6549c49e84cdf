/*
 * massert.h: invariants that stop the program where they break.
 *
 * MR_ASSERT(expr) states one of mirrord's own invariants: something the
 * design relies on about the state this process keeps (a byte counter
 * never below zero, offsets that only grow, a batch not freed while its
 * bytes are lent, one state write of a partition in flight).  It is never
 * used on what a peer sent: input from the wire, a file or the metadata
 * log is validated and answered with an error, not asserted.
 *
 * It is always on (NDEBUG does not remove it; a predicted branch where it
 * holds).  Where it does not, the log module writes one line at error
 * level, whatever the configured level and also before log_init() (the
 * line goes to stderr),
 *
 *     assertion failed: <expr> at <file>:<line> (<function>)
 *
 * and the process aborts (abort(): a core dump, or the sanitizer's
 * report, shows the stack).  MR_ASSERT_MSG(expr, fmt, ...) appends ": "
 * and a value or two; MR_NOTNULL(p) asserts that p is not NULL.  expr is
 * evaluated exactly once.
 */
#ifndef MIRRORD_MASSERT_H
#define MIRRORD_MASSERT_H

#include "compat.h"

#ifndef MIRRORD_LIBFUZZER
#include "log.h"
#define MR_ASSERT_FAIL_ log_assert_fail
#define MR_ASSERT_FAILF_ log_assert_failf
#else
/*
 * The libFuzzer binaries link a module or two without the log module
 * (test/fuzz, --enable-fuzzers): the same line straight to stderr, then
 * abort(), which libFuzzer reports as a crash with its input.
 */
#include <stdio.h>
#include <stdlib.h>

static inline NORETURN void massert_fuzz_fail(const char *expr,
    const char *file, int line, const char *func)
{
	fprintf(stderr, "assertion failed: %s at %s:%d (%s)\n", expr, file,
	    line, func);
	abort();
}
static inline NORETURN PRINTF_LIKE(5, 6) void massert_fuzz_failf(
    const char *expr, const char *file, int line, const char *func,
    const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "assertion failed: %s at %s:%d (%s): ", expr, file,
	    line, func);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
#define MR_ASSERT_FAIL_ massert_fuzz_fail
#define MR_ASSERT_FAILF_ massert_fuzz_failf
#endif

#define MR_ASSERT(expr) \
	do { \
		if (unlikely(!(expr))) \
			MR_ASSERT_FAIL_(#expr, __FILE__, __LINE__, __func__); \
	} while (0)

#define MR_ASSERT_MSG(expr, ...) \
	do { \
		if (unlikely(!(expr))) \
			MR_ASSERT_FAILF_(#expr, __FILE__, __LINE__, __func__, \
			    __VA_ARGS__); \
	} while (0)

#define MR_NOTNULL(p) MR_ASSERT((p) != NULL)

#endif
