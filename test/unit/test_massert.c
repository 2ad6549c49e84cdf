/*
 * Unit tests for massert.h: an invariant that breaks stops the process.
 *
 * Each failing case runs in a child process whose stderr is a pipe: the
 * child must die of SIGABRT (abort(), so a core dump or the sanitizer's
 * report follows) after one log line naming the expression, the file and
 * line of the assertion and the function.  NDEBUG is defined before
 * anything is included: the assertions must stay on regardless.
 */
#define NDEBUG 1

#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "massert.h"

/* ---- a child that fails ------------------------------------------------ */

static int line_fd = -1;     /* the child tells the parent the line here */

/* The assertion about to fail is on line n (the next line of the caller). */
static void tell_line(int n)
{
	(void)!write(line_fd, &n, sizeof(n));
}

struct outcome {
	int status;          /* waitpid()'s */
	int line;            /* the failing assertion's line, 0 none */
	char err[8192];      /* what the child wrote to stderr */
};

/* Runs fn in a child (journal: the log set up for journald first, else
 * not set up at all) and collects its end. */
static void run_child(void (*fn)(void), int journal, struct outcome *o)
{
	int errp[2], linep[2];
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(pipe(errp), 0);
	ck_assert_int_eq(pipe(linep), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		(void)setrlimit(RLIMIT_CORE, &no_core); /* no core file here */
		close(errp[0]);
		close(linep[0]);
		if (dup2(errp[1], STDERR_FILENO) < 0)
			_exit(3);
		line_fd = linep[1];
		if (journal)
			log_init("massert-test", LOG_LVL_ERROR, LOG_F_JOURNAL);
		fn();
		_exit(0);   /* the assertion did not stop it */
	}
	close(errp[1]);
	close(linep[1]);
	while (n < sizeof(o->err) - 1 &&
	    (r = read(errp[0], o->err + n, sizeof(o->err) - 1 - n)) > 0)
		n += (size_t)r;
	o->err[n] = '\0';
	if (read(linep[0], &o->line, sizeof(o->line)) != (ssize_t)sizeof(o->line))
		o->line = 0;
	close(errp[0]);
	close(linep[0]);
	ck_assert_int_eq(waitpid(pid, &o->status, 0), pid);
}

/* The child died of SIGABRT with exactly one line on stderr that holds
 * want, then " at <...>test/unit/test_massert.c:<line> (<func>)" and tail. */
static void check_abort(const struct outcome *o, const char *want,
    const char *func, const char *tail)
{
	char at[256];
	const char *p;

	ck_assert_msg(WIFSIGNALED(o->status) && WTERMSIG(o->status) == SIGABRT,
	    "the child did not abort (status 0x%x), stderr: %s", o->status,
	    o->err);
	ck_assert_int_gt(o->line, 0);
	p = strstr(o->err, want);
	ck_assert_msg(p != NULL, "'%s' not in: %s", want, o->err);
	snprintf(at, sizeof(at), "test/unit/test_massert.c:%d (%s)%s\n", o->line,
	    func, tail);
	ck_assert_msg(strstr(p, at) != NULL, "'%s' not in: %s", at, o->err);
	ck_assert_msg(strstr(p, " at ") < strstr(p, at), "no ' at ' before "
	    "the place in: %s", o->err);
	/* One line, and nothing after the assertion ran. */
	ck_assert_ptr_eq(strchr(o->err, '\n'), o->err + strlen(o->err) - 1);
	ck_assert_ptr_null(strstr(o->err, "not reached"));
}

/* ---- the failing cases ------------------------------------------------- */

static void fail_plain(void)
{
	volatile int two = 2;

	tell_line(__LINE__ + 1);
	MR_ASSERT(two + 2 == 5);
	fputs("not reached\n", stderr);
}

static void fail_msg(void)
{
	volatile int n = 7;

	tell_line(__LINE__ + 1);
	MR_ASSERT_MSG(n < 3, "n is %d, the limit %d", n, 3);
	fputs("not reached\n", stderr);
}

static void fail_notnull(void)
{
	const char *volatile name = NULL;

	tell_line(__LINE__ + 1);
	MR_NOTNULL(name);
	fputs("not reached\n", stderr);
}

START_TEST(test_fails_before_log_init)
{
	struct outcome o;

	run_child(fail_plain, 0, &o);
	check_abort(&o, " error: assertion failed: two + 2 == 5", "fail_plain",
	    "");
	/* The log's own line: program name and pid. */
	ck_assert_ptr_nonnull(strstr(o.err, "mirrord["));
}
END_TEST

START_TEST(test_fails_with_values)
{
	struct outcome o;

	run_child(fail_msg, 0, &o);
	check_abort(&o, "assertion failed: n < 3", "fail_msg",
	    ": n is 7, the limit 3");
}
END_TEST

START_TEST(test_notnull)
{
	struct outcome o;

	run_child(fail_notnull, 0, &o);
	check_abort(&o, "assertion failed: (name) != NULL", "fail_notnull", "");
}
END_TEST

START_TEST(test_fails_through_the_log)
{
	struct outcome o;

	/* journald's priority prefix: the line went through log.c. */
	run_child(fail_plain, 1, &o);
	check_abort(&o, "<3>assertion failed: two + 2 == 5", "fail_plain", "");
	ck_assert_ptr_eq(strstr(o.err, "<3>assertion failed:"), o.err);
}
END_TEST

/* ---- what holds --------------------------------------------------------- */

static int evaluated;

static int count(int v)
{
	evaluated++;
	return v;
}

START_TEST(test_holds_evaluated_once)
{
	const char *p = "x";

	evaluated = 0;
	MR_ASSERT(count(1) == 1);
	MR_ASSERT_MSG(count(2) == 2, "%d", 2);
	MR_NOTNULL(p);
	if (count(1))
		MR_ASSERT(1);   /* one statement: safe in an unbraced if */
	else
		ck_abort_msg("not reached");
	ck_assert_int_eq(evaluated, 3);
}
END_TEST

static Suite *massert_suite(void)
{
	Suite *s = suite_create("massert");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_fails_before_log_init);
	tcase_add_test(tc, test_fails_with_values);
	tcase_add_test(tc, test_notnull);
	tcase_add_test(tc, test_fails_through_the_log);
	tcase_add_test(tc, test_holds_evaluated_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(massert_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
