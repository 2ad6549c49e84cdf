/* Unit tests for props: the Java .properties grammar and its errors. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "props.h"

static struct props P;
static char err[512];

static int parse(const char *text)
{
	props_fini(&P);
	err[0] = '\0';
	return props_parse_buf(&P, text, strlen(text), "t.properties", err,
	    sizeof(err));
}

static void expect(const char *name, const char *value)
{
	const char *v = props_get(&P, name);

	ck_assert_msg(v != NULL, "key '%s' missing", name);
	ck_assert_str_eq(v, value);
}

static void setup(void)
{
	props_init(&P);
}

static void teardown(void)
{
	props_fini(&P);
}

START_TEST(test_separators)
{
	ck_assert_int_eq(parse("a=1\nb: 2\nc 3\nd\t=\t4\ne   :  5\nf\n"
	    "g=\nh = = x\n"), 0);
	ck_assert_uint_eq(P.n, 8);
	expect("a", "1");
	expect("b", "2");
	expect("c", "3");
	expect("d", "4");
	expect("e", "5");
	expect("f", "");
	expect("g", "");
	/* Only one separator is consumed; the second '=' is value. */
	expect("h", "= x");
	/* Order of first appearance is kept. */
	ck_assert_str_eq(P.names[0], "a");
	ck_assert_str_eq(P.names[7], "h");
}
END_TEST

START_TEST(test_comments_and_blank_lines)
{
	ck_assert_int_eq(parse("# comment\n! bang comment\n   # indented\n"
	    "\n \t \nkey=value # not a comment\n"), 0);
	ck_assert_uint_eq(P.n, 1);
	expect("key", "value # not a comment");
}
END_TEST

START_TEST(test_whitespace)
{
	/* Leading whitespace goes, trailing whitespace of a value stays. */
	ck_assert_int_eq(parse("   k1 = v  \n\fk2=\tv2\t\n"), 0);
	expect("k1", "v  ");
	expect("k2", "v2\t");
}
END_TEST

START_TEST(test_continuations)
{
	ck_assert_int_eq(parse("list = a,\\\n      b,\\\n\t c\n"
	    "two\\\\\nthree=\\\\\\\nx\n"), 0);
	expect("list", "a,b,c");
	/* An even number of backslashes does not continue the line. */
	expect("two\\", "");
	expect("three", "\\x");
	/* A comment line ending in a backslash does not continue. */
	ck_assert_int_eq(parse("# c \\\nk=v\n"), 0);
	ck_assert_uint_eq(P.n, 1);
	expect("k", "v");
	/* A continuation line starting with '#' is data, not a comment. */
	ck_assert_int_eq(parse("k=a\\\n  #b\n"), 0);
	expect("k", "a#b");
	/* A backslash at end of input is dropped. */
	ck_assert_int_eq(parse("k=v\\"), 0);
	expect("k", "v");
}
END_TEST

START_TEST(test_escapes)
{
	ck_assert_int_eq(parse("tab=a\\tb\nnl=a\\nb\ncr=\\r\nff=\\f\n"
	    "bs=C:\\\\dir\nkey\\ with\\ space\\=x=\\:v\nother=\\q\n"
	    "e=\\u00e9\\u20AC\nemoji=\\uD83D\\uDE00\n"), 0);
	expect("tab", "a\tb");
	expect("nl", "a\nb");
	expect("cr", "\r");
	expect("ff", "\f");
	expect("bs", "C:\\dir");
	expect("key with space=x", ":v");
	expect("other", "q");
	expect("e", "\xc3\xa9\xe2\x82\xac");
	expect("emoji", "\xf0\x9f\x98\x80");
}
END_TEST

START_TEST(test_line_endings)
{
	ck_assert_int_eq(parse("a=1\r\nb=2\rc=3\nd=x\\\r\n  y"), 0);
	expect("a", "1");
	expect("b", "2");
	expect("c", "3");
	expect("d", "xy");
}
END_TEST

START_TEST(test_duplicates_last_wins)
{
	ck_assert_int_eq(parse("a=1\nb=2\na=3\n"), 0);
	ck_assert_uint_eq(P.n, 2);
	expect("a", "3");
	ck_assert_str_eq(P.names[0], "a");
}
END_TEST

START_TEST(test_raw_utf8_passes)
{
	ck_assert_int_eq(parse("name=caf\xc3\xa9\n"), 0);
	expect("name", "caf\xc3\xa9");
}
END_TEST

START_TEST(test_errors_name_file_and_line)
{
	ck_assert_int_eq(parse("a=1\n\nb=\\u12G4\n"), -1);
	ck_assert_str_eq(err, "t.properties:3: malformed \\uXXXX escape in "
	    "value (need 4 hex digits)");
	ck_assert_uint_eq(P.n, 0);

	ck_assert_int_eq(parse("a=1\nk\\u00=v\n"), -1);
	ck_assert_str_eq(err, "t.properties:2: malformed \\uXXXX escape in "
	    "key (need 4 hex digits)");

	/* The line reported is where the logical line starts. */
	ck_assert_int_eq(parse("a=1\nb=x\\\n  y\\\n  \\uD800z\n"), -1);
	ck_assert_str_eq(err, "t.properties:2: unpaired UTF-16 high "
	    "surrogate \\uD800 in value");

	ck_assert_int_eq(parse("x=\\uDC00\n"), -1);
	ck_assert_str_eq(err, "t.properties:1: unpaired UTF-16 low surrogate "
	    "\\uDC00 in value");

	ck_assert_int_eq(parse("x=\\u0000\n"), -1);
	ck_assert_str_eq(err, "t.properties:1: \\u0000 (NUL) is not allowed "
	    "in value");

	ck_assert_int_eq(parse("a=1\r\nb=\xff\n"), -1);
	ck_assert_str_eq(err, "t.properties:2: invalid UTF-8 (byte 0xff)");

	/* Overlong encoding of '/'. */
	ck_assert_int_eq(parse("a=\xc0\xaf\n"), -1);
	ck_assert_str_eq(err, "t.properties:1: invalid UTF-8 (byte 0xc0)");

	/* Truncated sequence at end of input. */
	ck_assert_int_eq(parse("a=\xe2\x82"), -1);
	ck_assert_str_eq(err, "t.properties:1: invalid UTF-8 (byte 0xe2)");
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "a=1\nb=x\0y\n";

	props_fini(&P);
	ck_assert_int_eq(props_parse_buf(&P, text, sizeof(text) - 1, "t",
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "t:2: NUL byte in input");
}
END_TEST

START_TEST(test_file)
{
	char path[] = "/tmp/test_props_XXXXXX";
	int fd = mkstemp(path);
	static const char text[] = "bootstrap.servers=127.0.0.1:9092\n"
	    "security.protocol=SASL_SSL\n";

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1),
	    (ssize_t)(sizeof(text) - 1));
	close(fd);
	ck_assert_int_eq(props_parse_file(&P, path, err, sizeof(err)), 0);
	expect("bootstrap.servers", "127.0.0.1:9092");
	expect("security.protocol", "SASL_SSL");
	unlink(path);

	props_fini(&P);
	ck_assert_int_eq(props_parse_file(&P, path, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, path) == err, "%s", err);
	ck_assert_msg(strstr(err, ": cannot open: No such file") != NULL,
	    "%s", err);

	ck_assert_int_eq(props_parse_file(&P, "/tmp", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "/tmp: not a regular file");
}
END_TEST

START_TEST(test_too_large)
{
	size_t n = PROPS_MAX_FILE_BYTES + 1;
	char *big = malloc(n);

	ck_assert_ptr_nonnull(big);
	memset(big, '#', n);
	ck_assert_int_eq(props_parse_buf(&P, big, n, "big", err, sizeof(err)),
	    -1);
	ck_assert_str_eq(err, "big: larger than 1048576 bytes");
	free(big);
}
END_TEST

static Suite *props_suite(void)
{
	Suite *s = suite_create("props");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_separators);
	tcase_add_test(tc, test_comments_and_blank_lines);
	tcase_add_test(tc, test_whitespace);
	tcase_add_test(tc, test_continuations);
	tcase_add_test(tc, test_escapes);
	tcase_add_test(tc, test_line_endings);
	tcase_add_test(tc, test_duplicates_last_wins);
	tcase_add_test(tc, test_raw_utf8_passes);
	tcase_add_test(tc, test_errors_name_file_and_line);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_too_large);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(props_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
