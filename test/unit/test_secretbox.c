/* Unit tests for secretbox: AES-256-GCM sealing of config values and the
 * key file. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secretbox.h"

static char dir[] = "/tmp/test_secretbox.XXXXXX";
static char err[512];

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
}

static struct secretbox *box_of(uint8_t fill)
{
	uint8_t key[SECRETBOX_KEY_LEN];

	memset(key, fill, sizeof(key));
	return secretbox_new(key);
}

START_TEST(test_round_trip)
{
	struct secretbox *b = box_of(7);
	char *sealed, *sealed2, *plain;

	ck_assert_int_eq(secretbox_seal(b, "S3cretValue", "m\0sasl.password",
	    15, &sealed, err, sizeof(err)), 0);
	ck_assert(secretbox_is_sealed(sealed));
	ck_assert_ptr_null(strstr(sealed, "S3cret"));
	ck_assert_int_eq(secretbox_open(b, sealed, "m\0sasl.password", 15,
	    &plain, err, sizeof(err)), 0);
	ck_assert_str_eq(plain, "S3cretValue");
	secretbox_wipe_free(plain);
	/* A random nonce per value: the same secret seals differently. */
	ck_assert_int_eq(secretbox_seal(b, "S3cretValue", "m\0sasl.password",
	    15, &sealed2, err, sizeof(err)), 0);
	ck_assert_str_ne(sealed, sealed2);
	/* The empty string seals and opens too. */
	free(sealed2);
	ck_assert_int_eq(secretbox_seal(b, "", NULL, 0, &sealed2, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(secretbox_open(b, sealed2, NULL, 0, &plain, err,
	    sizeof(err)), 0);
	ck_assert_str_eq(plain, "");
	secretbox_wipe_free(plain);
	free(sealed);
	free(sealed2);
	secretbox_free(b);
}
END_TEST

START_TEST(test_wrong_key_and_place)
{
	struct secretbox *a = box_of(1), *b = box_of(2);
	char *sealed, *plain = NULL, id[9];

	ck_assert_str_ne(secretbox_key_id(a), secretbox_key_id(b));
	ck_assert_int_eq(secretbox_seal(a, "pw", "m1\0k", 5, &sealed, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(secretbox_sealed_key_id(sealed, id), 0);
	ck_assert_str_eq(id, secretbox_key_id(a));
	/* Another key: named by both key ids. */
	ck_assert_int_eq(secretbox_open(b, sealed, "m1\0k", 5, &plain, err,
	    sizeof(err)), -1);
	ck_assert_ptr_null(plain);
	ck_assert_ptr_nonnull(strstr(err, secretbox_key_id(a)));
	ck_assert_ptr_nonnull(strstr(err, secretbox_key_id(b)));
	/* Another mirror (associated data): does not authenticate. */
	ck_assert_int_eq(secretbox_open(a, sealed, "m2\0k", 5, &plain, err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "does not authenticate"));
	/* A flipped ciphertext byte: does not authenticate. */
	{
		size_t n = strlen(sealed);

		sealed[n - 6] = sealed[n - 6] == 'A' ? 'B' : 'A';
		ck_assert_int_eq(secretbox_open(a, sealed, "m1\0k", 5, &plain,
		    err, sizeof(err)), -1);
	}
	/* Not the sealed form at all. */
	ck_assert_int_eq(secretbox_open(a, "enc:v1:%%%", NULL, 0, &plain, err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a well-formed"));
	ck_assert_int_eq(secretbox_open(a, "enc:v1:QUJD", NULL, 0, &plain, err,
	    sizeof(err)), -1);
	ck_assert(!secretbox_is_sealed("S3cretValue"));
	ck_assert(!secretbox_is_sealed(NULL));
	free(sealed);
	secretbox_free(a);
	secretbox_free(b);
}
END_TEST

START_TEST(test_key_files)
{
	uint8_t k1[SECRETBOX_KEY_LEN], k2[SECRETBOX_KEY_LEN];
	char path[256], raw[256], bad[256];
	struct stat sb;
	FILE *f;

	snprintf(path, sizeof(path), "%s/secret.key", dir);
	/* Missing: ENOENT, named. */
	ck_assert_int_eq(secretbox_load_key(path, k1, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(err, path));
	/* Created 0600, and it loads back to the same key. */
	ck_assert_int_eq(secretbox_create_key_file(path, k1, err, sizeof(err)), 0);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(secretbox_load_key(path, k2, err, sizeof(err)), 0);
	ck_assert_mem_eq(k1, k2, sizeof(k1));
	/* Never over an existing file. */
	ck_assert_int_eq(secretbox_create_key_file(path, k2, err, sizeof(err)), -1);
	ck_assert_int_eq(secretbox_load_key(path, k2, err, sizeof(err)), 0);
	ck_assert_mem_eq(k1, k2, sizeof(k1));
	/* 32 raw bytes. */
	snprintf(raw, sizeof(raw), "%s/raw.key", dir);
	ck_assert_ptr_nonnull(f = fopen(raw, "w"));
	ck_assert_uint_eq(fwrite(k1, 1, sizeof(k1), f), sizeof(k1));
	fclose(f);
	memset(k2, 0, sizeof(k2));
	ck_assert_int_eq(secretbox_load_key(raw, k2, err, sizeof(err)), 0);
	ck_assert_mem_eq(k1, k2, sizeof(k1));
	/* Not a key: named. */
	snprintf(bad, sizeof(bad), "%s/bad.key", dir);
	ck_assert_ptr_nonnull(f = fopen(bad, "w"));
	fputs("c2hvcnQ=\n", f);
	fclose(f);
	ck_assert_int_eq(secretbox_load_key(bad, k2, err, sizeof(err)), -1);
	ck_assert_int_ne(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "32-byte key"));
	ck_assert_ptr_nonnull(strstr(err, bad));
	/* A directory is not a key file. */
	ck_assert_int_eq(secretbox_load_key(dir, k2, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
}
END_TEST

static Suite *secretbox_suite(void)
{
	Suite *s = suite_create("secretbox");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_wrong_key_and_place);
	tcase_add_test(tc, test_key_files);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(secretbox_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
