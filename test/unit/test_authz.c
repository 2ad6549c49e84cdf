/*
 * Unit tests for authz (prefix authz_): the rule matcher (super users, deny
 * wins, prefixes, wildcard principals, alter implies describe, deny by
 * default, off), the authorization section of mirrord.yaml read back and
 * its errors with file:line:column, the anonymous-alter probe, and the
 * section surviving --check-config's dump.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "daemonconf.h"

static struct config_errors errs;

static struct config *load(const char *text)
{
	struct config *cfg = NULL;

	config_errors_fini(&errs);
	config_load_string("t.yaml", text, strlen(text), &cfg, &errs);
	return cfg;
}

/* A config with the given authorization section, and its rule set. */
static struct authz *rules(const char *section, int authn_on)
{
	char text[4096], err[256];
	struct config *cfg;
	struct authz *az;

	snprintf(text, sizeof(text),
	    "destination:\n  bootstrap_servers: k:9092\n%s", section);
	cfg = load(text);
	ck_assert_msg(cfg != NULL, "%s", errs.n ? errs.v[0].text : "?");
	az = authz_new(cfg, authn_on, err, sizeof(err));
	ck_assert_msg(az != NULL, "%s", err);
	config_free(cfg);   /* the rule set keeps its own copies */
	return az;
}

static int may(const struct authz *az, const char *who, enum authz_op op,
    const char *mirror)
{
	return authz_allowed(az, who, op, mirror, NULL, 0);
}

static void setup(void)
{
	config_errors_init(&errs);
}

static void teardown(void)
{
	config_errors_fini(&errs);
}

static const char dev_section[] =
    "authorization:\n"
    "  super_users: [\"User:admin\"]\n"
    "  acls:\n"
    "    - principal: User:ANONYMOUS\n"
    "      operations: [describe]\n"
    "      mirrors: [\"*\"]\n"
    "      permission: allow\n"
    "    - principal: User:ANONYMOUS\n"
    "      operations: alter\n"
    "      mirrors: \"dev-*\"\n"
    "      permission: allow\n"
    "    - principal: \"User:*\"\n"
    "      operations: [all]\n"
    "      mirrors: [dev-secret]\n"
    "      permission: deny\n"
    "    - principal: User:alice\n"
    "      operations: [alter]\n"
    "      mirrors: [prod-eu, \"prod-us*\"]\n"
    "      permission: allow\n";

START_TEST(test_matcher)
{
	struct authz *az = rules(dev_section, 0);
	char why[256];

	ck_assert_int_eq(authz_enabled(az), 1);   /* rules given: auto is on */
	ck_assert_uint_eq(authz_rule_count(az), 4);
	ck_assert_uint_eq(authz_super_user_count(az), 1);

	/* Describe on every mirror, alter on dev-* only. */
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_DESCRIBE, "prod-x"), 1);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "prod-x"), 0);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "dev-x"), 1);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "dev-"), 1);
	/* A prefix is a prefix, not a substring or a suffix. */
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "xdev-x"), 0);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "dev"), 0);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, ""), 0);

	/* Deny wins over the allow rules, for both operations ("all"). */
	ck_assert_int_eq(authz_allowed(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER,
	    "dev-secret", why, sizeof(why)), 0);
	ck_assert_str_eq(why, "denied by authorization.acls[2] (t.yaml:14)");
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_DESCRIBE, "dev-secret"), 0);
	/* ... and User:* covers every user, alice included. */
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_DESCRIBE, "dev-secret"), 0);

	/* Literal names are exact; alter implies describe. */
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_ALTER, "prod-eu"), 1);
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_DESCRIBE, "prod-eu"), 1);
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_ALTER, "prod-eu2"), 0);
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_ALTER, "prod-us-east"), 1);
	ck_assert_int_eq(authz_allowed(az, "User:alice", AUTHZ_ALTER,
	    "prod-us", why, sizeof(why)), 1);
	ck_assert_str_eq(why, "allowed by authorization.acls[3] (t.yaml:18)");
	/* Deny by default: nothing grants alice anything on dev-x. */
	ck_assert_int_eq(authz_allowed(az, "User:alice", AUTHZ_ALTER, "dev-x",
	    why, sizeof(why)), 0);
	ck_assert_str_eq(why, "no rule allows it");
	ck_assert_int_eq(may(az, "User:alice", AUTHZ_DESCRIBE, "other"), 0);
	/* Principals are compared exactly (case included). */
	ck_assert_int_eq(may(az, "User:Alice", AUTHZ_ALTER, "prod-eu"), 0);
	ck_assert_int_eq(may(az, "User:alice2", AUTHZ_ALTER, "prod-eu"), 0);

	/* A super user may do everything, deny rules notwithstanding. */
	ck_assert_int_eq(authz_allowed(az, "User:admin", AUTHZ_ALTER,
	    "dev-secret", why, sizeof(why)), 1);
	ck_assert_str_eq(why, "super user");
	ck_assert_int_eq(may(az, "User:admin", AUTHZ_ALTER, "anything"), 1);

	/* Anonymous may alter something (dev-*); alice may (prod-eu). */
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 1);
	ck_assert_int_eq(authz_may_alter_some(az, "User:alice"), 1);
	ck_assert_int_eq(authz_may_alter_some(az, "User:bob"), 0);
	authz_free(az);
}
END_TEST

START_TEST(test_wildcard_principal_is_per_type)
{
	struct authz *az = rules(
	    "authorization:\n"
	    "  acls:\n"
	    "    - {principal: \"User:*\", operations: [describe], mirrors: [\"*\"], permission: allow}\n"
	    "    - {principal: \"Group:*\", operations: [all], mirrors: [\"*\"], permission: allow}\n", 0);

	ck_assert_int_eq(may(az, "User:bob", AUTHZ_DESCRIBE, "m"), 1);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_DESCRIBE, "m"), 1);
	ck_assert_int_eq(may(az, "User:bob", AUTHZ_ALTER, "m"), 0);
	ck_assert_int_eq(may(az, "Group:ops", AUTHZ_ALTER, "m"), 1);
	/* "User:*" does not match a principal of another type that merely
	 * starts alike. */
	ck_assert_int_eq(may(az, "Userx:bob", AUTHZ_DESCRIBE, "m"), 0);
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 0);
	authz_free(az);
}
END_TEST

START_TEST(test_deny_alter_keeps_describe)
{
	struct authz *az = rules(
	    "authorization:\n"
	    "  acls:\n"
	    "    - {principal: User:carol, operations: [all], mirrors: [\"*\"], permission: allow}\n"
	    "    - {principal: User:carol, operations: [alter], mirrors: [\"prod-*\"], permission: deny}\n", 0);

	ck_assert_int_eq(may(az, "User:carol", AUTHZ_ALTER, "prod-1"), 0);
	ck_assert_int_eq(may(az, "User:carol", AUTHZ_DESCRIBE, "prod-1"), 1);
	ck_assert_int_eq(may(az, "User:carol", AUTHZ_ALTER, "dev-1"), 1);
	authz_free(az);
}
END_TEST

START_TEST(test_modes)
{
	struct authz *az;
	char d[256];

	/* No rules, PLAINTEXT: off, everyone may do everything. */
	az = rules("", 0);
	ck_assert_int_eq(authz_enabled(az), 0);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_ALTER, "x"), 1);
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 1);
	authz_describe(az, d, sizeof(d));
	ck_assert_msg(strncmp(d, "off (", 5) == 0, "%s", d);
	authz_free(az);

	/* No rules, an authenticating listener: on, deny by default. */
	az = rules("authorization:\n  super_users: [User:root]\n", 1);
	ck_assert_int_eq(authz_enabled(az), 1);
	ck_assert_int_eq(may(az, "User:bob", AUTHZ_DESCRIBE, "x"), 0);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_DESCRIBE, "x"), 0);
	ck_assert_int_eq(may(az, "User:root", AUTHZ_ALTER, "x"), 1);
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 0);
	authz_free(az);
	az = rules("", 1);
	ck_assert_int_eq(authz_enabled(az), 1);
	ck_assert_int_eq(may(az, "User:bob", AUTHZ_ALTER, "x"), 0);
	authz_describe(az, d, sizeof(d));
	ck_assert_msg(strstr(d, "everyone else is denied") != NULL, "%s", d);
	authz_free(az);

	/* Explicit true on PLAINTEXT with no rules: everyone denied. */
	az = rules("authorization:\n  enabled: true\n", 0);
	ck_assert_int_eq(authz_enabled(az), 1);
	ck_assert_int_eq(may(az, AUTHZ_ANONYMOUS, AUTHZ_DESCRIBE, "x"), 0);
	authz_free(az);

	/* Explicit false wins over rules and authentication. */
	az = rules("authorization:\n  enabled: false\n"
	    "  acls: [{principal: User:a, operations: all, mirrors: x, permission: deny}]\n", 1);
	ck_assert_int_eq(authz_enabled(az), 0);
	ck_assert_int_eq(may(az, "User:a", AUTHZ_ALTER, "x"), 1);
	authz_describe(az, d, sizeof(d));
	ck_assert_msg(strstr(d, "rules are ignored") != NULL, "%s", d);
	authz_free(az);

	/* Anonymous as a super user may alter. */
	az = rules("authorization:\n  super_users: [User:ANONYMOUS]\n", 0);
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 1);
	authz_free(az);

	/* An allow on dev-* fully shadowed by a deny on dev-*. */
	az = rules("authorization:\n  acls:\n"
	    "    - {principal: User:ANONYMOUS, operations: [alter], mirrors: [\"dev-*\"], permission: allow}\n"
	    "    - {principal: \"User:*\", operations: [alter], mirrors: [\"*\"], permission: deny}\n", 0);
	ck_assert_int_eq(authz_may_alter_some(az, AUTHZ_ANONYMOUS), 0);
	authz_free(az);
}
END_TEST

START_TEST(test_config_errors)
{
	static const char *const want[] = {
		"t.yaml:4:17: authorization.super_users: 'admin' is not a principal: expected Type:name, such as User:alice",
		"t.yaml:4:24: authorization.super_users: 'User:*': a wildcard cannot be a super user; allow all on '*' in authorization.acls instead",
		"t.yaml:6:18: authorization.acls[0].principal: '*' is not a principal; write User:* for every user",
		"t.yaml:7:30: authorization.acls[0].operations: 'write' is not an operation: expected describe, alter, describe_configs, alter_configs or all",
		"t.yaml:8:17: authorization.acls[0].mirrors: 'pro*d': '*' may only end a mirror pattern (prod-* matches every mirror whose name starts with prod-)",
		"t.yaml:9:19: authorization.acls[0].permission: 'maybe' is not allow or deny",
		"t.yaml:10:8: authorization.acls[1].principle: unknown rule key; did you mean principal?",
		"t.yaml:10:7: authorization.acls[1]: the rule has no principal",
		"t.yaml:10:7: authorization.acls[1]: the rule has no permission (allow or deny)",
		"t.yaml:11:7: authorization.acls[2]: expected a rule (a mapping with principal, operations, mirrors and permission), got a scalar",
		"t.yaml:12:7: authorization.acls[3]: the rule has no mirrors",
		"t.yaml:13:12: authorization.enabled: 'maybe' is not one of auto|true|false",
	};
	struct config *cfg = load(
	    "destination:\n  bootstrap_servers: k:9092\n"
	    "authorization:\n"
	    "  super_users: [admin, \"User:*\"]\n"
	    "  acls:\n"
	    "    - principal: \"*\"\n"
	    "      operations: [describe, write]\n"
	    "      mirrors: [\"pro*d\"]\n"
	    "      permission: maybe\n"
	    "    - {principle: User:a, operations: all, mirrors: \"*\"}\n"
	    "    - just a string\n"
	    "    - {principal: User:a, operations: all, permission: allow}\n"
	    "  enabled: maybe\n");

	ck_assert_ptr_null(cfg);
	for (size_t i = 0; i < errs.n && i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_str_eq(errs.v[i].text, want[i]);
	ck_assert_msg(errs.n == sizeof(want) / sizeof(want[0]),
	    "got %zu errors (last: %s)", errs.n, errs.n ? errs.v[errs.n - 1].text : "-");

	/* The wrong shapes. */
	cfg = load("destination:\n  bootstrap_servers: k:9092\n"
	    "authorization:\n  acls: {principal: User:a}\n  super_users: {a: b}\n");
	ck_assert_ptr_null(cfg);
	ck_assert_uint_eq(errs.n, 2);
	ck_assert_str_eq(errs.v[0].text, "t.yaml:4:9: authorization.acls: expected a list of rules "
	    "(mappings with principal, operations, mirrors and permission), got a mapping");
	ck_assert_str_eq(errs.v[1].text, "t.yaml:5:16: authorization.super_users: expected a list "
	    "of principals (User:name), got a mapping");
	cfg = load("destination:\n  bootstrap_servers: k:9092\n"
	    "authorization:\n  acls:\n    - {principal: User:a, operations: [], mirrors: [x], permission: allow}\n");
	ck_assert_ptr_null(cfg);
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].text, "t.yaml:5:39: authorization.acls[0].operations: expected a "
	    "list of describe, alter, describe_configs, alter_configs or all, got an "
	    "empty list");
}
END_TEST

START_TEST(test_dump_round_trip)
{
	char *text = NULL, *again = NULL;
	size_t len = 0, len2 = 0;
	struct config *a, *b;
	FILE *f;

	a = load("destination:\n  bootstrap_servers: k:9092\n"
	    "authorization:\n  enabled: true\n"
	    "  super_users: [\"User:CN=ops,O=example\", User:admin]\n"
	    "  acls:\n"
	    "    - {principal: \"User:*\", operations: [describe], mirrors: [\"*\", \"prod-*\", m.1], permission: allow}\n"
	    "    - {principal: User:x, operations: [describe, alter], mirrors: y, permission: DENY}\n");
	ck_assert_msg(a != NULL, "%s", errs.n ? errs.v[0].text : "?");
	ck_assert_int_eq(a->authorization_enabled, CONFIG_AUTHZ_TRUE);
	ck_assert_uint_eq(a->authorization_acls.n, 2);
	ck_assert_int_eq(a->authorization_acls.v[1].deny, 1);
	ck_assert_uint_eq(a->authorization_acls.v[1].ops,
	    AUTHZ_OP_BIT(AUTHZ_DESCRIBE) | AUTHZ_OP_BIT(AUTHZ_ALTER));
	f = open_memstream(&text, &len);
	config_dump(a, f);
	fclose(f);
	b = load(text);
	ck_assert_msg(b != NULL, "dump does not load back: %s\n%s",
	    errs.n ? errs.v[0].text : "?", text);
	f = open_memstream(&again, &len2);
	config_dump(b, f);
	fclose(f);
	ck_assert_str_eq(text, again);
	ck_assert_ptr_nonnull(strstr(text, "    - principal: \"User:*\"\n"
	    "      operations: [describe]\n"
	    "      mirrors: [\"*\", \"prod-*\", m.1]\n"
	    "      permission: allow\n"));
	/* Reload: the section may change on SIGHUP. */
	{
		const char *keys[8];

		ck_assert_int_eq(config_key_reloadable("authorization.acls"), 1);
		ck_assert_int_eq(config_key_reloadable("authorization.super_users"), 1);
		ck_assert_int_eq(config_key_reloadable("authorization.enabled"), 1);
		ck_assert_uint_eq(config_reload_diff(a, b, keys, 8), 0);
	}
	config_free(a);
	config_free(b);
	free(text);
	free(again);
}
END_TEST

static Suite *authz_suite(void)
{
	Suite *s = suite_create("authz");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_matcher);
	tcase_add_test(tc, test_wildcard_principal_is_per_type);
	tcase_add_test(tc, test_deny_alter_keeps_describe);
	tcase_add_test(tc, test_modes);
	tcase_add_test(tc, test_config_errors);
	tcase_add_test(tc, test_dump_round_trip);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(authz_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
