/*
 * Unit tests for safefile: which names named over the wire may be read, and
 * the errors for those that may not.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safefile.h"

static char root[PATH_MAX];     /* a fresh directory per test */
static char allowed_dir[PATH_MAX + 16];
static char err[1024];

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", root, name);
}

static void write_file(const char *name, const char *text, size_t len)
{
	char p[PATH_MAX + 64];
	FILE *f;

	path_of(p, sizeof(p), name);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char p[PATH_MAX];

	snprintf(root, sizeof(root), "%s/safefile.XXXXXX",
	    tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(root));
	/* mkdtemp may live under a symlinked TMPDIR: use the real name. */
	ck_assert_ptr_nonnull(realpath(root, p));
	memcpy(root, p, sizeof(root));
	snprintf(allowed_dir, sizeof(allowed_dir), "%s/allowed", root);
	ck_assert_int_eq(mkdir(allowed_dir, 0700), 0);
	err[0] = '\0';
}

static void teardown(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

static int check1(const char *path, const char *dir)
{
	const char *allowed[] = { dir, NULL };

	err[0] = '\0';
	return safefile_check(path, allowed, err, sizeof(err));
}

static void expect_err(const char *needle)
{
	ck_assert_msg(strstr(err, needle) != NULL,
	    "error '%s' does not say '%s'", err, needle);
}

START_TEST(test_regular_file)
{
	const char *allowed[] = { allowed_dir, NULL };
	char p[PATH_MAX + 64];
	char *out = NULL;
	size_t outlen = 0;

	write_file("allowed/ca.pem", "-----BEGIN-----\n", 16);
	path_of(p, sizeof(p), "allowed/ca.pem");
	ck_assert_int_eq(safefile_check(p, allowed, err, sizeof(err)), 0);
	ck_assert_int_eq(safefile_read(p, allowed, SAFEFILE_DEFAULT_MAX, &out,
	    &outlen, err, sizeof(err)), 0);
	ck_assert_uint_eq(outlen, 16);
	ck_assert_str_eq(out, "-----BEGIN-----\n");
	free(out);

	/* An empty file is a file. */
	write_file("allowed/empty", "", 0);
	path_of(p, sizeof(p), "allowed/empty");
	out = NULL;
	ck_assert_int_eq(safefile_read(p, allowed, 100, &out, &outlen, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(outlen, 0);
	ck_assert_str_eq(out, "");
	free(out);
}
END_TEST

START_TEST(test_trailing_slash)
{
	char p[PATH_MAX + 64], dir[PATH_MAX + 64];

	write_file("allowed/ca.pem", "x", 1);
	path_of(p, sizeof(p), "allowed/ca.pem");
	ck_assert_int_eq(check1(p, allowed_dir), 0);
	snprintf(dir, sizeof(dir), "%s/", allowed_dir);
	ck_assert_int_eq(check1(p, dir), 0);
	snprintf(dir, sizeof(dir), "%s//", allowed_dir);
	ck_assert_int_eq(check1(p, dir), 0);
	/* The directory "/" allows every path, still only regular files. */
	ck_assert_int_eq(check1(p, "/"), 0);
	/* A subdirectory of an allowed one is allowed. */
	ck_assert_int_eq(mkdir(strcat(strcpy(dir, allowed_dir), "/sub"),
	    0700), 0);
	write_file("allowed/sub/key.pem", "k", 1);
	path_of(p, sizeof(p), "allowed/sub/key.pem");
	ck_assert_int_eq(check1(p, allowed_dir), 0);
}
END_TEST

START_TEST(test_sibling_prefix)
{
	char p[PATH_MAX + 64], dir[PATH_MAX + 64];

	/* .../allowed does not allow .../allowed2/x. */
	snprintf(dir, sizeof(dir), "%s/allowed2", root);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	write_file("allowed2/x", "x", 1);
	path_of(p, sizeof(p), "allowed2/x");
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err("outside the allowed directories");
	expect_err(allowed_dir);
}
END_TEST

START_TEST(test_symlink_out)
{
	const char *allowed[] = { allowed_dir, NULL };
	char p[PATH_MAX + 64], target[PATH_MAX + 64], in[PATH_MAX + 64];
	char *out = (char *)"untouched";
	size_t outlen = 7;

	write_file("secret", "s3cret", 6);
	path_of(target, sizeof(target), "secret");
	path_of(p, sizeof(p), "allowed/link.pem");
	ck_assert_int_eq(symlink(target, p), 0);
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err(p);
	expect_err("resolves to");
	expect_err(target);
	expect_err("outside the allowed directories");
	ck_assert_int_eq(safefile_read(p, allowed, 100, &out, &outlen, err,
	    sizeof(err)), -1);
	ck_assert_str_eq(out, "untouched");
	ck_assert_uint_eq(outlen, 7);

	/* A link that stays inside is followed. */
	write_file("allowed/real.pem", "r", 1);
	path_of(in, sizeof(in), "allowed/real.pem");
	path_of(p, sizeof(p), "allowed/inside.pem");
	ck_assert_int_eq(symlink(in, p), 0);
	ck_assert_int_eq(check1(p, allowed_dir), 0);

	/* A link to a descriptor that is no file (a pipe) names its target. */
	{
		int fds[2];
		char fdpath[64];

		ck_assert_int_eq(pipe(fds), 0);
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fds[0]);
		path_of(p, sizeof(p), "allowed/pipe.pem");
		ck_assert_int_eq(symlink(fdpath, p), 0);
		ck_assert_int_eq(check1(p, allowed_dir), -1);
		expect_err("resolves to /proc/self/fd/");
		expect_err("not a regular file");
		close(fds[0]);
		close(fds[1]);
	}

	/* A link to a device is refused even when "/" is allowed. */
	path_of(p, sizeof(p), "allowed/dev.pem");
	ck_assert_int_eq(symlink("/dev/zero", p), 0);
	ck_assert_int_eq(check1(p, "/"), -1);
	expect_err("not a regular file");
	expect_err("/dev/zero");
}
END_TEST

START_TEST(test_dotdot)
{
	char p[PATH_MAX + 64];

	ck_assert_int_eq(check1("/etc/mirrord/../shadow", "/etc/mirrord"), -1);
	ck_assert_msg(strstr(err, "/etc/mirrord/../shadow") != NULL, "%s", err);

	write_file("secret", "s", 1);
	snprintf(p, sizeof(p), "%s/../secret", allowed_dir);
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err("outside the allowed directories");
	/* .. that stays inside is fine. */
	write_file("allowed/a.pem", "a", 1);
	snprintf(p, sizeof(p), "%s/../allowed/a.pem", allowed_dir);
	ck_assert_int_eq(check1(p, allowed_dir), 0);
}
END_TEST

START_TEST(test_fifo)
{
	const char *allowed[] = { allowed_dir, NULL };
	char p[PATH_MAX + 64];
	char *out = NULL;
	size_t outlen = 0;

	path_of(p, sizeof(p), "allowed/fifo.pem");
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err("not a regular file (a fifo)");
	/* Would block forever if it opened the fifo for reading. */
	ck_assert_int_eq(safefile_read(p, allowed, 100, &out, &outlen, err,
	    sizeof(err)), -1);
	expect_err("not a regular file (a fifo)");
	ck_assert_ptr_null(out);
}
END_TEST

START_TEST(test_devices_and_proc)
{
	const char *all[] = { "/", NULL };
	char *out = NULL;
	size_t outlen = 0;

	/* Even when everything is allowed, these are never files. */
	ck_assert_int_eq(check1("/dev/null", "/"), -1);
	expect_err("/dev/null: not a regular file");
	ck_assert_int_eq(check1("/dev/zero", "/dev"), -1);
	expect_err("not a regular file");
	ck_assert_int_eq(check1("/proc/self/fd/0", "/"), -1);
	expect_err("/proc/self/fd/0: not a regular file");
	ck_assert_int_eq(check1("/proc/self/fd/4", "/proc"), -1);
	expect_err("not a regular file");
	/* A regular file as far as stat goes, but procfs. */
	ck_assert_int_eq(check1("/proc/self/environ", "/"), -1);
	expect_err("not a regular file");
	ck_assert_int_eq(check1("/sys/kernel/mm/transparent_hugepage/enabled",
	    "/"), -1);
	ck_assert_int_eq(safefile_read("/dev/zero", all, 100, &out, &outlen,
	    err, sizeof(err)), -1);
	ck_assert_ptr_null(out);
	/* Outside the allowed directories first of all. */
	ck_assert_int_eq(check1("/proc/self/fd/0", allowed_dir), -1);
	expect_err("not a regular file");
}
END_TEST

START_TEST(test_directory)
{
	char p[PATH_MAX + 64];

	path_of(p, sizeof(p), "allowed/sub");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err("not a regular file (a directory)");
	/* The allowed directory itself is not a file inside it. */
	ck_assert_int_eq(check1(allowed_dir, allowed_dir), -1);
}
END_TEST

START_TEST(test_too_large)
{
	const char *allowed[] = { allowed_dir, NULL };
	char p[PATH_MAX + 64];
	char *out = NULL;
	size_t outlen = 0;
	int fd;

	write_file("allowed/ten", "0123456789", 10);
	path_of(p, sizeof(p), "allowed/ten");
	ck_assert_int_eq(safefile_read(p, allowed, 10, &out, &outlen, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(outlen, 10);
	ck_assert_str_eq(out, "0123456789");
	free(out);
	out = NULL;
	ck_assert_int_eq(safefile_read(p, allowed, 9, &out, &outlen, err,
	    sizeof(err)), -1);
	expect_err("larger than 9 bytes");
	expect_err(p);
	ck_assert_ptr_null(out);

	/* safefile_check applies the default cap. */
	path_of(p, sizeof(p), "allowed/big");
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, SAFEFILE_DEFAULT_MAX + 1), 0);
	close(fd);
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err("larger than 1048576 bytes");
}
END_TEST

START_TEST(test_relative_and_empty)
{
	const char *none[] = { NULL };
	char p[PATH_MAX + 64];

	ck_assert_int_eq(check1("ca.pem", allowed_dir), -1);
	expect_err("ca.pem: not an absolute path");
	ck_assert_int_eq(check1("./allowed/ca.pem", "/"), -1);
	expect_err("not an absolute path");
	ck_assert_int_eq(check1("", allowed_dir), -1);
	ck_assert_int_eq(check1(NULL, allowed_dir), -1);

	/* No allowed directory: nothing may be read. */
	write_file("allowed/ca.pem", "x", 1);
	path_of(p, sizeof(p), "allowed/ca.pem");
	ck_assert_int_eq(safefile_check(p, NULL, err, sizeof(err)), -1);
	expect_err("mirrors.allowed_file_dirs is empty");
	ck_assert_int_eq(safefile_check(p, none, err, sizeof(err)), -1);
	expect_err("mirrors.allowed_file_dirs is empty");
}
END_TEST

START_TEST(test_missing_and_unreadable)
{
	char p[PATH_MAX + 64];

	path_of(p, sizeof(p), "allowed/missing.pem");
	ck_assert_int_eq(check1(p, allowed_dir), -1);
	expect_err(p);
	expect_err("No such file or directory");

	if (geteuid() != 0) {
		write_file("allowed/locked.pem", "x", 1);
		path_of(p, sizeof(p), "allowed/locked.pem");
		ck_assert_int_eq(chmod(p, 0), 0);
		ck_assert_int_eq(check1(p, allowed_dir), -1);
		expect_err("Permission denied");
	}
}
END_TEST

static Suite *safefile_suite(void)
{
	Suite *s = suite_create("safefile");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_regular_file);
	tcase_add_test(tc, test_trailing_slash);
	tcase_add_test(tc, test_sibling_prefix);
	tcase_add_test(tc, test_symlink_out);
	tcase_add_test(tc, test_dotdot);
	tcase_add_test(tc, test_fifo);
	tcase_add_test(tc, test_devices_and_proc);
	tcase_add_test(tc, test_directory);
	tcase_add_test(tc, test_too_large);
	tcase_add_test(tc, test_relative_and_empty);
	tcase_add_test(tc, test_missing_and_unreadable);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(safefile_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
