/*
 * Unit tests for tpattern: whole-name matching as Java's Matcher.matches(),
 * the Java syntax people put in topic patterns, invalid patterns named with
 * PCRE2's message and offset, and every limit (length, nesting, compiled
 * size, match steps, depth, heap) refusing a pattern with its name.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpattern.h"

static char err[1024];

/* 1/0 as tpattern_match(), after compiling pattern (which must compile). */
static int matches(const char *pattern, const char *name)
{
	struct tpattern *p = tpattern_new(pattern, err, sizeof(err));
	int m;

	ck_assert_msg(p != NULL, "'%s' does not compile: %s", pattern, err);
	ck_assert_str_eq(tpattern_text(p), pattern);
	m = tpattern_match(p, name);
	tpattern_free(p);
	return m;
}

#define YES(pat, name) ck_assert_msg(matches(pat, name), \
	"'%s' should match '%s'", pat, name)
#define NO(pat, name) ck_assert_msg(!matches(pat, name), \
	"'%s' should not match '%s'", pat, name)

/* tpattern_check() refuses pattern with a message containing want. */
static void refused(const char *pattern, const char *want)
{
	err[0] = '\0';
	ck_assert_msg(tpattern_check(pattern, "include pattern", err,
	    sizeof(err)) == -1, "'%.80s' was accepted", pattern);
	ck_assert_msg(strstr(err, want) != NULL, "'%.80s': got \"%s\", want "
	    "\"%s\"", pattern, err, want);
	ck_assert_msg(strncmp(err, "include pattern '", 17) == 0, "%s", err);
}

START_TEST(test_whole_name)
{
	/* An alternation is anchored as a whole, as with matches(). */
	YES("foo|bar", "foo");
	YES("foo|bar", "bar");
	NO("foo|bar", "foobar");
	NO("foo|bar", "xbar");
	NO("foo|bar", "foox");
	NO("foo|bar", "fo");
	NO("orders", "orders2");
	NO("orders", "xorders");
	YES("orders.*", "orders");
	YES("orders.*", "orders.eu-1");
	/* Anchors the user wrote change nothing. */
	YES("^orders$", "orders");
	YES("^a|b$", "a");
	NO("^a|b$", "ab");
	/* An alternation that could match a prefix still has to reach the end. */
	YES("a|ab", "ab");
	YES("(a|ab)(c|bcd)", "abcd");
}
END_TEST

START_TEST(test_java_syntax)
{
	YES("orders\\..*", "orders.eu");
	NO("orders\\..*", "ordersXeu");
	YES("(?i)Orders.*", "ORDERS-1");
	YES("(?i)Orders.*", "orders");
	NO("Orders.*", "orders");
	YES("[a-z]+-v\\d+", "payments-v12");
	NO("[a-z]+-v\\d+", "payments-v");
	NO("[a-z]+-v\\d+", "Payments-v1");
	YES("\\Qa.b\\E", "a.b");
	NO("\\Qa.b\\E", "axb");
	YES("\\Qa.b", "a.b");            /* \Q to the end, as in Java */
	YES("\\Qa.b\\E-\\d", "a.b-7");
	/* Possessive and lazy quantifiers, atomic groups: Java's semantics. */
	YES("[a-z]++-x", "abc-x");
	NO("a*+a", "aaa");               /* a*+ keeps every a */
	YES("a*?a", "aaa");
	YES(".*?-dlq", "orders-dlq");
	YES("x{2,3}+y", "xxxy");
	NO("(?>a|ab)c", "abc");
	YES("(?>ab|a)c", "abc");
	/* Classes, escapes, look-around, named groups, back-references. */
	YES("\\w+", "a_b9");
	NO("\\w+", "a.b");
	YES("[\\w.-]+", "a.b-c_d");
	YES("\\p{L}+\\d", "abc1");
	YES("[[:alpha:]]+", "abc");
	YES("(?!tmp).*", "orders");
	NO("(?!tmp).*", "tmp-1");
	YES(".*(?<!-dlq)", "orders");
	NO(".*(?<!-dlq)", "orders-dlq");
	YES("(?<env>prod|dev)\\.\\k<env>", "prod.prod");
	YES("(a)-\\1", "a-a");
	YES("\\x41\\x{42}", "AB");
	YES("(?x) orders \\. .* # comment", "orders.eu");
	YES("a\\z", "a");
	YES("\\Aa", "a");
	YES("\\p{Lower}+\\p{Upper}\\p{Alpha}", "abcDe");
	/* Non-ASCII patterns compile (UTF); topic names never carry them. */
	NO("é.*", "e1");
}
END_TEST

START_TEST(test_invalid_patterns)
{
	refused("a(", "is not a valid regular expression: missing closing "
	    "parenthesis at offset 2");
	refused("*a", "quantifier does not follow a repeatable item at offset 0");
	refused("[a-", "missing terminating ] for character class at offset 3");
	refused("a{2,1}", "numbers out of order in {} quantifier at offset 5");
	refused("(?<n>a)\\k<m>", "reference to non-existent subpattern at "
	    "offset");
	refused("\\p{NoSuchProperty}", "unknown property");
	refused("ab\xff", "UTF-8 error");
	/* Java's \uhhhh is named, not misread (write \x{hhhh}). */
	refused("\\u0041", "PCRE2 does not support \\F, \\L, \\l, \\N{name}, "
	    "\\U, or \\u at offset 2");
	/* Java-only names are refused, not misread (see kafka-mirrors(1)). */
	refused("\\p{Digit}+", "unknown property after \\P or \\p at offset 9");
	refused("(?u)a", "unrecognized character after (? or (?- at offset 2");
	/* The pattern is named, cut when long. */
	char longp[400];
	memset(longp, 'x', sizeof(longp) - 2);
	longp[sizeof(longp) - 2] = '(';
	longp[sizeof(longp) - 1] = '\0';
	refused(longp, "xxx...' is not a valid regular expression");
	ck_assert_msg(strlen(err) < 400, "%s", err);
	/* tpattern_new() says the same without the name. */
	ck_assert_ptr_null(tpattern_new("a(", err, sizeof(err)));
	ck_assert_str_eq(err, "is not a valid regular expression: missing "
	    "closing parenthesis at offset 2");
	ck_assert_ptr_null(tpattern_new("", err, sizeof(err)));
	ck_assert_str_eq(err, "is empty");
	/* Without a word before it. */
	ck_assert_int_eq(tpattern_check("a(", NULL, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "'a(' is not a valid regular expression: missing "
	    "closing parenthesis at offset 2");
}
END_TEST

START_TEST(test_compile_limits)
{
	char *p = malloc(TPATTERN_MAX_LEN + 2);
	char msg[128];

	ck_assert_ptr_nonnull(p);
	/* Length. */
	memset(p, 'a', TPATTERN_MAX_LEN);
	p[TPATTERN_MAX_LEN] = '\0';
	ck_assert_int_eq(tpattern_check(p, "include pattern", err,
	    sizeof(err)), 0);
	strcpy(p + TPATTERN_MAX_LEN, "a");
	snprintf(msg, sizeof(msg), "is refused: it is %d bytes long, more than "
	    "the limit of %d", TPATTERN_MAX_LEN + 1, TPATTERN_MAX_LEN);
	refused(p, msg);
	/* Nesting. */
	size_t n = 0;
	for (int i = 0; i < TPATTERN_MAX_NEST + 1; i++)
		p[n++] = '(';
	p[n++] = 'a';
	for (int i = 0; i < TPATTERN_MAX_NEST + 1; i++)
		p[n++] = ')';
	p[n] = '\0';
	snprintf(msg, sizeof(msg), "parentheses are too deeply nested (the "
	    "limit is %d)", TPATTERN_MAX_NEST);
	refused(p, msg);
	memmove(p, p + 1, n - 2);           /* one level less: accepted */
	p[n - 2] = '\0';
	ck_assert_int_eq(tpattern_check(p, NULL, err, sizeof(err)), 0);
	/* Compiled size: a hostile pattern (2.8 GB as POSIX ERE). */
	snprintf(msg, sizeof(msg), "bytes, more than the limit of %d bytes",
	    TPATTERN_MAX_COMPILED);
	refused("((.{1,1000}){1,1000})", msg);
	refused("((.{1,1000}){1,1000})", "is refused: its compiled form is ");
	refused("(a{1,65535}){1,65535}", "is refused");
	free(p);
}
END_TEST

START_TEST(test_match_limits)
{
	/* Catastrophic backtracking is refused by the trial names. */
	refused("(a+)+b", "hit the match limit (100000 backtracking steps)");
	refused("(a|aa)+c", "the match limit");
	refused("(.*a){20}", "the match limit");
	refused("(x+x+)+y", "the match limit");
	refused("(a+)+b", "simplify it");
	/* The heap limit: 300 captures make each backtracking frame big. */
	char big[1400] = "(?:";
	for (int i = 0; i < 300; i++)
		strcat(big, "(a)?");
	strcat(big, "a)*z");
	refused(big, "hit the heap limit (2048 KiB)");
	/* The depth limit, on a name longer than Kafka allows. */
	char *longname = malloc(5001);
	struct tpattern *d = tpattern_new("(?:a|b)*", err, sizeof(err));
	ck_assert_ptr_nonnull(longname);
	ck_assert_ptr_nonnull(d);
	memset(longname, 'a', 5000);
	longname[5000] = '\0';
	ck_assert_int_eq(tpattern_match_err(d, longname, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "hit the depth limit (2000 nested "
	    "backtracking points)") != NULL, "%s", err);
	ck_assert_int_eq(tpattern_match(d, longname + 4800), 1);
	tpattern_free(d);
	free(longname);

	/* At match time a limit hit is no match, and says which limit. */
	struct tpattern *p = tpattern_new("(a+)+b", err, sizeof(err));
	char name[250];

	ck_assert_ptr_nonnull(p);
	memset(name, 'a', 240);
	strcpy(name + 240, "ab-");
	ck_assert_int_eq(tpattern_match_err(p, name, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "hit the match limit (100000 backtracking "
	    "steps)") != NULL, "%s", err);
	ck_assert_int_eq(tpattern_match(p, name), 0);
	ck_assert_int_eq(tpattern_match(p, name), 0);   /* logged once */
	ck_assert_int_eq(tpattern_match(p, "aab"), 1);  /* still works */
	tpattern_free(p);
}
END_TEST

START_TEST(test_ordinary_patterns_pass)
{
	static const char *const ok[] = {
		"orders\\..*", "(?i)Orders.*", "[a-z]+-v\\d+", "\\Qa.b\\E",
		"[a-z]++-x", ".*?-dlq", "foo|bar", ".*", ".+", "__.*",
		"(prod|staging)\\.(orders|payments)\\.v[0-9]+",
		".*-(dlq|retry)", "[^.]+\\.[^.]+", "(?!_).*", ".*a.*b.*",
		"[a-zA-Z0-9._-]{1,249}", "(\\w+\\.)*\\w+", "(.{1,100}){1,10}",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_msg(tpattern_check(ok[i], NULL, err, sizeof(err)) == 0,
		    "'%s' refused: %s", ok[i], err);
}
END_TEST

/* Joins the entries of a list with '|' between them. */
static const char *split(const char *list)
{
	static char out[256];
	char buf[256], *rest = buf;

	snprintf(buf, sizeof(buf), "%s", list);
	out[0] = '\0';
	while (rest != NULL) {
		char *e = tpattern_list_next(rest, &rest);
		strcat(out, out[0] != '\0' || e != buf ? "|" : "");
		strcat(out, e);
	}
	return out;
}

START_TEST(test_list_split)
{
	ck_assert_str_eq(split("a,b"), "a|b");
	ck_assert_str_eq(split("a"), "a");
	ck_assert_str_eq(split(""), "");
	ck_assert_str_eq(split("a,,b,"), "a||b|");
	ck_assert_str_eq(split("x{1,3},y"), "x{1,3}|y");
	ck_assert_str_eq(split("(a,b)|c,d"), "(a,b)|c|d");
	ck_assert_str_eq(split("[,]x,y"), "[,]x|y");
	ck_assert_str_eq(split("[[:alpha:],]+,y"), "[[:alpha:],]+|y");
	ck_assert_str_eq(split("a\\,b,c"), "a\\,b|c");
	ck_assert_str_eq(split("\\Qa,b\\E,c"), "\\Qa,b\\E|c");
	ck_assert_str_eq(split("((.{1,1000}){1,1000}), z"),
	    "((.{1,1000}){1,1000})| z");
	/* Unbalanced: the rest is one entry, which then does not compile. */
	ck_assert_str_eq(split("a(,b"), "a(,b");
}
END_TEST

static Suite *tpattern_suite(void)
{
	Suite *s = suite_create("tpattern");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_whole_name);
	tcase_add_test(tc, test_java_syntax);
	tcase_add_test(tc, test_invalid_patterns);
	tcase_add_test(tc, test_compile_limits);
	tcase_add_test(tc, test_match_limits);
	tcase_add_test(tc, test_ordinary_patterns_pass);
	tcase_add_test(tc, test_list_split);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tpattern_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
