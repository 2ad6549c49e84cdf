/*
 * Unit tests for fileload: files read on the worker thread and handed back
 * to the event loop, each callback exactly once, never from inside
 * fileload_start(), never after fileload_cancel().
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "fileload.h"

static char root[PATH_MAX];
static char allowed_dir[PATH_MAX + 16];
static struct event_base *base;

struct seen {
	int calls;
	size_t n;
	char data[4][64];
	char err[4][700];
	char key[4][64];
};

static void cb(void *arg, const struct fileload_result *res, size_t n)
{
	struct seen *s = arg;

	s->calls++;
	s->n = n;
	for (size_t i = 0; i < n && i < 4; i++) {
		snprintf(s->key[i], sizeof(s->key[i]), "%s", res[i].key);
		snprintf(s->data[i], sizeof(s->data[i]), "%s",
		    res[i].data != NULL ? res[i].data : "(null)");
		snprintf(s->err[i], sizeof(s->err[i]), "%s",
		    res[i].err != NULL ? res[i].err : "(null)");
	}
	event_base_loopbreak(base);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
	char p[PATH_MAX];

	snprintf(root, sizeof(root), "/tmp/fileload.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_ptr_nonnull(realpath(root, p));
	memcpy(root, p, sizeof(root));
	snprintf(allowed_dir, sizeof(allowed_dir), "%s/allowed", root);
	ck_assert_int_eq(mkdir(allowed_dir, 0700), 0);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
	char cmd[PATH_MAX + 32];

	event_base_free(base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs the loop until the callback or a 10 s deadline. */
static void run_loop(double seconds)
{
	struct timeval tv = { (time_t)seconds,
	    (suseconds_t)((seconds - (time_t)seconds) * 1e6) };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

START_TEST(test_results)
{
	const char *allowed[] = { allowed_dir, NULL };
	char good[PATH_MAX + 32], fifo[PATH_MAX + 32], out[PATH_MAX + 32];
	const char *keys[] = { "ssl.ca.location", "ssl.certificate.location",
	    "ssl.key.location" };
	const char *paths[] = { good, fifo, out };
	struct seen s = { 0 };
	char err[256];
	struct fileload *fl;

	snprintf(good, sizeof(good), "%s/ca.pem", allowed_dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo.pem", allowed_dir);
	snprintf(out, sizeof(out), "%s/outside.pem", root);
	write_file(good, "PEM DATA");
	write_file(out, "SECRET");
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);

	fl = fileload_start(base, keys, paths, 3, allowed, 1024, cb, &s, err,
	    sizeof(err));
	ck_assert_ptr_nonnull(fl);
	ck_assert_int_eq(s.calls, 0);   /* never from inside start */
	run_loop(10);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_str_eq(s.key[0], "ssl.ca.location");
	ck_assert_str_eq(s.data[0], "PEM DATA");
	ck_assert_str_eq(s.err[0], "(null)");
	ck_assert_str_eq(s.data[1], "(null)");
	ck_assert_msg(strstr(s.err[1], "not a regular file (a fifo)") != NULL,
	    "%s", s.err[1]);
	ck_assert_msg(strstr(s.err[1], fifo) != NULL, "%s", s.err[1]);
	ck_assert_str_eq(s.data[2], "(null)");
	ck_assert_msg(strstr(s.err[2], "outside the allowed directories") !=
	    NULL, "%s", s.err[2]);
	/* Nothing more comes. */
	run_loop(0.2);
	ck_assert_int_eq(s.calls, 1);
}
END_TEST

START_TEST(test_cancel)
{
	const char *allowed[] = { allowed_dir, NULL };
	char good[PATH_MAX + 32];
	const char *keys[] = { "k" }, *paths[] = { good };
	struct seen s[20];
	struct fileload *fl[20];
	char err[256];

	snprintf(good, sizeof(good), "%s/ca.pem", allowed_dir);
	write_file(good, "x");
	memset(s, 0, sizeof(s));
	/* Some are cancelled while queued, some perhaps while running. */
	for (int i = 0; i < 20; i++) {
		fl[i] = fileload_start(base, keys, paths, 1, allowed, 1024, cb,
		    &s[i], err, sizeof(err));
		ck_assert_ptr_nonnull(fl[i]);
		if (i % 2 == 0)
			fileload_cancel(fl[i]);
	}
	/* The odd ones each call back once. */
	for (int round = 0; round < 50; round++) {
		int left = 0;

		for (int i = 1; i < 20; i += 2)
			left += s[i].calls == 0;
		if (left == 0)
			break;
		run_loop(2);
	}
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(s[i].calls, i % 2);
	run_loop(0.2);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(s[i].calls, i % 2);
}
END_TEST

START_TEST(test_nothing_allowed)
{
	const char *none[] = { NULL };
	char good[PATH_MAX + 32];
	const char *keys[] = { "ssl.ca.location" }, *paths[] = { good };
	struct seen s = { 0 };
	char err[256];

	snprintf(good, sizeof(good), "%s/ca.pem", allowed_dir);
	write_file(good, "x");
	ck_assert_ptr_nonnull(fileload_start(base, keys, paths, 1, none, 1024,
	    cb, &s, err, sizeof(err)));
	run_loop(10);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_msg(strstr(s.err[0], "mirrors.allowed_file_dirs is empty") !=
	    NULL, "%s", s.err[0]);
}
END_TEST

static Suite *fileload_suite(void)
{
	Suite *s = suite_create("fileload");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_results);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_nothing_allowed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fileload_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
