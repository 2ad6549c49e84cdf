/*
 * Unit tests for the server side of SCRAM (lib/scram) against our client
 * side (lib/ksasl), SASL/PLAIN parsing and the credential store
 * (lib/credstore): round trips, wrong and tampered proofs, unknown users
 * that look like wrong passwords, and the store's file format and mode.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "credstore.h"
#include "ksasl.h"
#include "scram.h"

static struct credstore *store;
static char err[512], why[256];

static int lookup(void *arg, const char *user, int mech,
    struct scram_cred *cred)
{
	(void)arg;
	return credstore_lookup(store, user, mech, cred);
}

static void setup(void)
{
	struct scram_cred c;

	store = credstore_new();
	ck_assert_int_eq(scram_cred_derive(KSASL_SCRAM_SHA_256, "pencil", 6,
	    NULL, 0, 4096, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(credstore_set(store, "user", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(scram_cred_derive(KSASL_SCRAM_SHA_512, "pencil", 6,
	    NULL, 0, 4096, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(credstore_set(store, "user", &c, err, sizeof(err)), 0);
}

static void teardown(void)
{
	credstore_free(store);
	store = NULL;
}

/* Runs one exchange; returns the server's final verdict (0 ok, -1 failed)
 * and whether the client accepted the server's signature. */
static int exchange(int mech, const char *user, const char *pw,
    int tamper, int *client_ok)
{
	struct ksasl_scram *cl = ksasl_scram_new(mech, user, pw, NULL, err,
	    sizeof(err));
	struct scram_server *sv = scram_server_new(mech, lookup, NULL);
	const char *m, *o;
	size_t ml, ol;
	char *fin;
	int rc;

	ck_assert_ptr_nonnull(cl);
	ck_assert_ptr_nonnull(sv);
	ck_assert_int_eq(ksasl_scram_client_first(cl, &m, &ml), 0);
	ck_assert_int_eq(scram_server_step(sv, (const uint8_t *)m, ml, &o, &ol,
	    why, sizeof(why)), 1);
	ck_assert_int_eq(ksasl_scram_client_final(cl, (const uint8_t *)o, ol, &m,
	    &ml, err, sizeof(err)), 0);
	fin = strndup(m, ml);
	if (tamper)
		fin[ml - 2] = fin[ml - 2] == 'A' ? 'B' : 'A';
	rc = scram_server_step(sv, (const uint8_t *)fin, ml, &o, &ol, why,
	    sizeof(why));
	*client_ok = rc == 0 && ksasl_scram_verify_server(cl,
	    (const uint8_t *)o, ol, err, sizeof(err)) == 0;
	if (rc == 0)
		ck_assert_str_eq(scram_server_user(sv), user);
	else
		ck_assert_ptr_null(scram_server_user(sv));
	free(fin);
	ksasl_scram_free(cl);
	scram_server_free(sv);
	return rc;
}

START_TEST(test_round_trip)
{
	int ok;

	ck_assert_int_eq(exchange(KSASL_SCRAM_SHA_256, "user", "pencil", 0, &ok), 0);
	ck_assert(ok);
	ck_assert_int_eq(exchange(KSASL_SCRAM_SHA_512, "user", "pencil", 0, &ok), 0);
	ck_assert(ok);
}
END_TEST

START_TEST(test_wrong_password_and_tampering)
{
	int ok;

	ck_assert_int_eq(exchange(KSASL_SCRAM_SHA_256, "user", "pen", 0, &ok), -1);
	ck_assert_str_eq(why, "SCRAM proof does not match the stored key");
	ck_assert_int_eq(exchange(KSASL_SCRAM_SHA_512, "user", "pencil", 1, &ok), -1);
	ck_assert(!ok);
}
END_TEST

START_TEST(test_unknown_user_fails_late)
{
	struct scram_server *sv = scram_server_new(KSASL_SCRAM_SHA_256, lookup,
	    NULL);
	const char *o, *o2;
	size_t ol, ol2;
	char first[256];
	int ok;

	/* The server-first-message of an unknown user looks like any other
	 * and is stable for the name (no enumeration by salt). */
	ck_assert_int_eq(scram_server_step(sv, (const uint8_t *)"n,,n=ghost,r=abc",
	    16, &o, &ol, why, sizeof(why)), 1);
	ck_assert_ptr_nonnull(strstr(o, ",s="));
	ck_assert_ptr_nonnull(strstr(o, ",i=4096"));
	snprintf(first, sizeof(first), "%.*s", (int)ol, strstr(o, ",s="));
	scram_server_free(sv);
	sv = scram_server_new(KSASL_SCRAM_SHA_256, lookup, NULL);
	ck_assert_int_eq(scram_server_step(sv, (const uint8_t *)"n,,n=ghost,r=xyz",
	    16, &o2, &ol2, why, sizeof(why)), 1);
	ck_assert_str_eq(strstr(o2, ",s="), first);
	scram_server_free(sv);
	ck_assert_int_eq(exchange(KSASL_SCRAM_SHA_256, "ghost", "pencil", 0, &ok), -1);
	ck_assert_str_eq(why, "SCRAM user is not known");
}
END_TEST

START_TEST(test_bad_messages)
{
	static const char *const firsts[] = {
		"p=tls-unique,,n=user,r=abc", /* channel binding */
		"n,,n=user",                  /* no nonce */
		"n,,r=abc",                   /* no user */
		"n,a=other,n=user,r=abc",     /* authzid differs */
		"n,,n=us=er,r=abc",           /* bad saslname escape */
		"n,,n=user,r=abc,tokenauth=true",
		"x,,n=user,r=abc",
	};

	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		struct scram_server *sv = scram_server_new(KSASL_SCRAM_SHA_256,
		    lookup, NULL);
		const char *o;
		size_t ol;

		ck_assert_msg(scram_server_step(sv, (const uint8_t *)firsts[i],
		    strlen(firsts[i]), &o, &ol, why, sizeof(why)) == -1,
		    "accepted %s", firsts[i]);
		ck_assert_msg(ol > 2 && strncmp(o, "e=", 2) == 0, "%s", firsts[i]);
		scram_server_free(sv);
	}
}
END_TEST

START_TEST(test_plain)
{
	char user[256];
	const char *pw;
	size_t pwl;
	struct scram_cred c;

	ck_assert_int_eq(scram_plain_parse((const uint8_t *)"\0user\0pencil", 12,
	    user, sizeof(user), &pw, &pwl, why, sizeof(why)), 0);
	ck_assert_str_eq(user, "user");
	ck_assert_uint_eq(pwl, 6);
	ck_assert_int_eq(credstore_lookup(store, user, KSASL_SCRAM_SHA_512, &c), 0);
	ck_assert(scram_cred_check_password(&c, pw, pwl));
	ck_assert(!scram_cred_check_password(&c, "pencil2", 7));
	ck_assert_int_eq(scram_plain_parse((const uint8_t *)"user\0user\0pw", 12,
	    user, sizeof(user), &pw, &pwl, why, sizeof(why)), 0);
	ck_assert_int_eq(scram_plain_parse((const uint8_t *)"other\0user\0pw", 13,
	    user, sizeof(user), &pw, &pwl, why, sizeof(why)), -1);
	ck_assert_int_eq(scram_plain_parse((const uint8_t *)"\0user", 5,
	    user, sizeof(user), &pw, &pwl, why, sizeof(why)), -1);
	ck_assert_int_eq(scram_plain_parse((const uint8_t *)"\0\0pw", 4,
	    user, sizeof(user), &pw, &pwl, why, sizeof(why)), -1);
}
END_TEST

START_TEST(test_store_file)
{
	char path[] = "/tmp/test_scram_XXXXXX";
	int fd = mkstemp(path);
	struct credstore *back;
	struct scram_cred a, b;
	struct stat st;
	FILE *f;

	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(credstore_save(store, path, err, sizeof(err)), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	back = credstore_load(path, 0, err, sizeof(err));
	ck_assert_msg(back != NULL, "%s", err);
	ck_assert_uint_eq(credstore_count(back), 2);
	ck_assert_int_eq(credstore_lookup(back, "user", KSASL_SCRAM_SHA_512, &a), 0);
	ck_assert_int_eq(credstore_lookup(store, "user", KSASL_SCRAM_SHA_512, &b), 0);
	ck_assert_mem_eq(a.stored_key, b.stored_key, 64);
	ck_assert_mem_eq(a.salt, b.salt, b.salt_len);
	ck_assert_uint_eq(credstore_delete(back, "user", -1), 2);
	credstore_free(back);

	/* Group-readable: refused, naming the mode. */
	chmod(path, 0640);
	ck_assert_ptr_null(credstore_load(path, 0, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "mode 0640"));
	/* A bad line: refused, naming file and line. */
	chmod(path, 0600);
	f = fopen(path, "w");
	fputs("# c\n\nuser SCRAM-SHA-256 iterations=100 salt=AAAA "
	    "stored_key=AAAA server_key=AAAA\n", f);
	fclose(f);
	ck_assert_ptr_null(credstore_load(path, 0, err, sizeof(err)));
	ck_assert_msg(strstr(err, ":3: iterations must be 4096..16384") != NULL,
	    "%s", err);
	unlink(path);
	ck_assert_ptr_null(credstore_load(path, 0, err, sizeof(err)));
	back = credstore_load(path, 1, err, sizeof(err));
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(credstore_count(back), 0);
	credstore_free(back);
	ck_assert_int_eq(credstore_check_user("a b", err, sizeof(err)), -1);
}
END_TEST

static Suite *scram_suite(void)
{
	Suite *s = suite_create("scram");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_wrong_password_and_tampering);
	tcase_add_test(tc, test_unknown_user_fails_late);
	tcase_add_test(tc, test_bad_messages);
	tcase_add_test(tc, test_plain);
	tcase_add_test(tc, test_store_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(scram_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
