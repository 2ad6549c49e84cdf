/*
 * Unit tests for the TLS context kconn builds from memory: CA bundles,
 * certificate chains and (encrypted) keys given as PEM text (ssl.*.pem,
 * what the fileload worker hands over), the errors naming the property and
 * the path, and the trusted *_location fallback refusing what is not a
 * regular file.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kconn.h"

static char err[1024];

/* A self-signed certificate and its key, as PEM text (malloc'd). */
static void make_cert(const char *cn, const char *password, char **cert_pem,
    char **key_pem)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	BIO *b;
	char *p;
	long n;

	ck_assert_ptr_nonnull(key);
	ck_assert_ptr_nonnull(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, name);
	ck_assert_int_gt(X509_sign(x, key, EVP_sha256()), 0);

	b = BIO_new(BIO_s_mem());
	ck_assert_int_eq(PEM_write_bio_X509(b, x), 1);
	n = BIO_get_mem_data(b, &p);
	*cert_pem = strndup(p, (size_t)n);
	BIO_free(b);

	b = BIO_new(BIO_s_mem());
	if (password != NULL)
		ck_assert_int_eq(PEM_write_bio_PrivateKey(b, key,
		    EVP_aes_256_cbc(), (unsigned char *)(uintptr_t)password,
		    (int)strlen(password), NULL, NULL), 1);
	else
		ck_assert_int_eq(PEM_write_bio_PrivateKey(b, key, NULL, NULL,
		    0, NULL, NULL), 1);
	n = BIO_get_mem_data(b, &p);
	*key_pem = strndup(p, (size_t)n);
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(key);
}

static void set(struct kconn_config *cfg, const char *name, const char *value)
{
	ck_assert_msg(kconn_config_set(cfg, name, value, err, sizeof(err)) == 0,
	    "%s: %s", name, err);
}

static int prepare(struct kconn_config *cfg)
{
	err[0] = '\0';
	return kconn_config_prepare(cfg, err, sizeof(err));
}

static void expect_err(const char *needle)
{
	ck_assert_msg(strstr(err, needle) != NULL, "error '%s' does not say "
	    "'%s'", err, needle);
}

START_TEST(test_ca_bundle)
{
	struct kconn_config cfg;
	char *c1, *k1, *c2, *k2, *bundle;
	STACK_OF(X509_OBJECT) *objs;

	make_cert("ca one", NULL, &c1, &k1);
	make_cert("ca two", NULL, &c2, &k2);
	ck_assert_int_gt(asprintf(&bundle, "# comment lines are fine\n%s\n%s",
	    c1, c2), 0);
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.pem", bundle);
	ck_assert_msg(prepare(&cfg) == 0, "%s", err);
	ck_assert_ptr_nonnull(cfg.ssl_ctx);
	objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(cfg.ssl_ctx));
	ck_assert_int_eq(sk_X509_OBJECT_num(objs), 2);
	kconn_config_fini(&cfg);

	/* Garbage, or nothing, is no CA. */
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.pem", "not a certificate\n");
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("ssl.ca.pem: no PEM certificate in it");
	kconn_config_fini(&cfg);
	free(c1);
	free(k1);
	free(c2);
	free(k2);
	free(bundle);
}
END_TEST

START_TEST(test_cert_and_encrypted_key)
{
	struct kconn_config cfg;
	char *cert, *key, *c2, *k2;

	make_cert("client", "s3cret", &cert, &key);
	ck_assert_ptr_nonnull(strstr(key, "ENCRYPTED"));
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.certificate.pem", cert);
	set(&cfg, "ssl.key.pem", key);
	set(&cfg, "ssl.key.password", "s3cret");
	ck_assert_msg(prepare(&cfg) == 0, "%s", err);
	ck_assert_ptr_nonnull(SSL_CTX_get0_certificate(cfg.ssl_ctx));
	ck_assert_ptr_nonnull(SSL_CTX_get0_privatekey(cfg.ssl_ctx));
	kconn_config_fini(&cfg);

	/* A wrong password names the key, never the password. */
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.certificate.pem", cert);
	set(&cfg, "ssl.key.pem", key);
	set(&cfg, "ssl.key.password", "wrong-pw");
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("ssl.key.pem: ");
	ck_assert_ptr_null(strstr(err, "wrong-pw"));
	kconn_config_fini(&cfg);

	/* A key of another certificate. */
	make_cert("other", NULL, &c2, &k2);
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.certificate.pem", cert);
	set(&cfg, "ssl.key.pem", k2);
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("ssl.key.pem does not match ssl.certificate.pem");
	kconn_config_fini(&cfg);
	free(cert);
	free(key);
	free(c2);
	free(k2);
}
END_TEST

START_TEST(test_locations)
{
	struct kconn_config cfg;
	char dir[] = "/tmp/kconn_pem.XXXXXX", ca[PATH_MAX], fifo[PATH_MAX];
	char *cert, *key, cmd[PATH_MAX + 16];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	make_cert("ca", NULL, &cert, &key);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	f = fopen(ca, "w");
	ck_assert_ptr_nonnull(f);
	fputs(cert, f);
	fclose(f);

	/* Trusted settings: kconn reads the file itself. */
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.location", ca);
	ck_assert_msg(prepare(&cfg) == 0, "%s", err);
	kconn_config_fini(&cfg);

	/* Contents handed over: the errors name the location. */
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.location", ca);
	set(&cfg, "ssl.ca.pem", "garbage");
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("ssl.ca.location ");
	expect_err(ca);
	kconn_config_fini(&cfg);

	/* A fifo is refused, not read (it would block). */
	snprintf(fifo, sizeof(fifo), "%s/fifo.pem", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.location", fifo);
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("ssl.ca.location ");
	expect_err("not a regular file (a fifo)");
	kconn_config_fini(&cfg);

	/* So are devices and /proc. */
	kconn_config_init(&cfg);
	set(&cfg, "security.protocol", "ssl");
	set(&cfg, "ssl.ca.location", "/proc/self/fd/0");
	ck_assert_int_eq(prepare(&cfg), -1);
	expect_err("not a regular file");
	kconn_config_fini(&cfg);

	/* Plaintext reads nothing. */
	kconn_config_init(&cfg);
	set(&cfg, "ssl.ca.location", fifo);
	ck_assert_int_eq(prepare(&cfg), 0);
	kconn_config_fini(&cfg);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cert);
	free(key);
}
END_TEST

static Suite *kconn_pem_suite(void)
{
	Suite *s = suite_create("kconn_pem");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_ca_bundle);
	tcase_add_test(tc, test_cert_and_encrypted_key);
	tcase_add_test(tc, test_locations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kconn_pem_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
