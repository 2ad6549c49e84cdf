/* Unit tests for cfgprov: ${file:...}, ${dir:...}, ${env:...} and
 * ${credential:...} references, their errors and the untrusted policy. */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfgprov.h"

static char dir[] = "/tmp/test_cfgprov.XXXXXX";
static char other[] = "/tmp/test_cfgprov_out.XXXXXX";
static char err[1024];
static char *out;

static void put(const char *base, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", base, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	char sub[512];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_ptr_nonnull(mkdtemp(other));
	put(dir, "secrets.properties", "# comment\nsource.password = S3cret\\=Value\n"
	    "source.user: alice\n");
	snprintf(sub, sizeof(sub), "%s/d", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	put(sub, "pw", "DirSecret\r\n\n");
	snprintf(sub, sizeof(sub), "%s/creds", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	put(sub, "dest-pw", "CredSecret\n");
	put(other, "secrets.properties", "source.password=Elsewhere\n");
	setenv("TEST_CFGPROV_PW", "EnvSecret", 1);
	unsetenv("TEST_CFGPROV_UNSET");
	out = NULL;
}

static void teardown(void)
{
	char cmd[600];

	free(out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, other);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
	memcpy(other + strlen(other) - 6, "XXXXXX", 6);
}

static int resolve(const struct cfgprov_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int resolve(const struct cfgprov_opts *o, const char *fmt, ...)
{
	char v[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	free(out);
	out = NULL;
	err[0] = '\0';
	return cfgprov_resolve("sasl.password", v, o, &out, err, sizeof(err));
}

static const struct cfgprov_opts trusted = { .allowed = CFGPROV_ALL };

START_TEST(test_has_ref)
{
	ck_assert(cfgprov_has_ref("${file:/a:b}"));
	ck_assert(cfgprov_has_ref("x${env:A}y"));
	ck_assert(cfgprov_has_ref("${nope:x}"));     /* unknown: still a reference */
	ck_assert(cfgprov_has_ref("${env:A"));       /* unterminated: still one */
	ck_assert(!cfgprov_has_ref("plain"));
	ck_assert(!cfgprov_has_ref("a${b}c"));       /* no provider: literal, as in Kafka */
	ck_assert(!cfgprov_has_ref("${:x}"));
	ck_assert(!cfgprov_has_ref("$env:A}"));
	ck_assert(!cfgprov_has_ref(NULL));
}
END_TEST

START_TEST(test_file_provider)
{
	ck_assert_int_eq(resolve(&trusted, "${file:%s/secrets.properties:source.password}",
	    dir), 0);
	ck_assert_str_eq(out, "S3cret=Value");
	/* Text around references and several references. */
	ck_assert_int_eq(resolve(&trusted, "<${file:%s/secrets.properties:source.user}"
	    "|${env:TEST_CFGPROV_PW}>", dir), 0);
	ck_assert_str_eq(out, "<alice|EnvSecret>");
	/* Missing key: named with the file, not the value. */
	ck_assert_int_eq(resolve(&trusted, "${file:%s/secrets.properties:nope}",
	    dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "sasl.password"));
	ck_assert_ptr_nonnull(strstr(err, "key 'nope' not found"));
	ck_assert_ptr_nonnull(strstr(err, "secrets.properties"));
	ck_assert_ptr_null(strstr(err, "S3cret"));
	/* Missing file. */
	ck_assert_int_eq(resolve(&trusted, "${file:%s/absent.properties:k}", dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "absent.properties"));
	ck_assert_ptr_nonnull(strstr(err, "No such file"));
	/* Malformed. */
	ck_assert_int_eq(resolve(&trusted, "${file:%s/secrets.properties}", dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "expected ${file:/path/to/file.properties:key}"));
	ck_assert_int_eq(resolve(&trusted, "${file:relative.properties:k}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "absolute"));
	ck_assert_int_eq(resolve(&trusted, "${file:/x:k"), -1);
	ck_assert_ptr_nonnull(strstr(err, "no closing"));
	ck_assert_int_eq(resolve(&trusted, "${vault:/x:k}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown config provider 'vault'"));
	/* No reference: the value as it is. */
	ck_assert_int_eq(resolve(&trusted, "a${b}c"), 0);
	ck_assert_str_eq(out, "a${b}c");
}
END_TEST

START_TEST(test_dir_env_credential)
{
	struct cfgprov_opts o = trusted;
	char creds[512];

	/* Whole file, trailing CR/LF trimmed. */
	ck_assert_int_eq(resolve(&o, "${dir:%s/d:pw}", dir), 0);
	ck_assert_str_eq(out, "DirSecret");
	ck_assert_int_eq(resolve(&o, "${dir:%s/d/:pw}", dir), 0);
	ck_assert_str_eq(out, "DirSecret");
	ck_assert_int_eq(resolve(&o, "${dir:%s:d/pw}", dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a file name of its own"));
	ck_assert_int_eq(resolve(&o, "${dir:%s/d:..}", dir), -1);
	ck_assert_int_eq(resolve(&o, "${dir:%s/d:absent}", dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "absent"));

	ck_assert_int_eq(resolve(&o, "${env:TEST_CFGPROV_PW}"), 0);
	ck_assert_str_eq(out, "EnvSecret");
	ck_assert_int_eq(resolve(&o, "${env:TEST_CFGPROV_UNSET}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "environment variable TEST_CFGPROV_UNSET is not set"));
	ck_assert_int_eq(resolve(&o, "${env:1BAD}"), -1);

	snprintf(creds, sizeof(creds), "%s/creds", dir);
	o.credentials_dir = creds;
	ck_assert_int_eq(resolve(&o, "${credential:dest-pw}"), 0);
	ck_assert_str_eq(out, "CredSecret");
	ck_assert_int_eq(resolve(&o, "${credential:nope}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "nope"));
	ck_assert_int_eq(resolve(&o, "${credential:../d/pw}"), -1);
	/* From the environment, as systemd sets it. */
	o.credentials_dir = NULL;
	setenv("CREDENTIALS_DIRECTORY", creds, 1);
	ck_assert_int_eq(resolve(&o, "${credential:dest-pw}"), 0);
	ck_assert_str_eq(out, "CredSecret");
	unsetenv("CREDENTIALS_DIRECTORY");
	ck_assert_int_eq(resolve(&o, "${credential:dest-pw}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "$CREDENTIALS_DIRECTORY is not set"));
	ck_assert_ptr_nonnull(strstr(err, "LoadCredential=dest-pw:"));
}
END_TEST

START_TEST(test_untrusted_policy)
{
	const char *dirs[] = { dir, NULL };
	const struct cfgprov_opts wire = {
		.allowed = CFGPROV_BIT(FILE) | CFGPROV_BIT(DIR),
		.untrusted = 1, .dirs = dirs, .refused_hint = "(hint)",
	};
	const struct cfgprov_opts none = {
		.allowed = CFGPROV_BIT(FILE), .untrusted = 1,
	};
	char v[512];

	/* Inside the allowed directory: read. */
	ck_assert_int_eq(resolve(&wire, "${file:%s/secrets.properties:source.password}",
	    dir), 0);
	ck_assert_str_eq(out, "S3cret=Value");
	ck_assert_int_eq(resolve(&wire, "${dir:%s/d:pw}", dir), 0);
	ck_assert_str_eq(out, "DirSecret");
	/* Outside: refused, naming the path. */
	ck_assert_int_eq(resolve(&wire, "${file:%s/secrets.properties:source.password}",
	    other), -1);
	ck_assert_ptr_nonnull(strstr(err, other));
	ck_assert_ptr_nonnull(strstr(err, "outside the allowed directories"));
	ck_assert_ptr_null(strstr(err, "Elsewhere"));
	/* Not past the allowed directory with "..". */
	ck_assert_int_eq(resolve(&wire, "${file:%s/../%s/secrets.properties:source.password}",
	    dir, strrchr(other, '/') + 1), -1);
	/* Pseudo files are never read. */
	ck_assert_int_eq(resolve(&wire, "${file:/proc/self/environ:PATH}"), -1);
	/* Providers the policy does not allow. */
	ck_assert_int_eq(resolve(&wire, "${env:TEST_CFGPROV_PW}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "config provider env is not allowed here (hint)"));
	ck_assert_ptr_null(strstr(err, "EnvSecret"));
	ck_assert_int_eq(resolve(&wire, "${credential:dest-pw}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "config provider credential is not allowed"));
	/* No directories allowed: no file at all. */
	ck_assert_int_eq(resolve(&none, "${file:%s/secrets.properties:source.password}",
	    dir), -1);
	ck_assert_ptr_nonnull(strstr(err, "allowed_file_dirs"));

	/* cfgprov_check looks without reading. */
	snprintf(v, sizeof(v), "${file:%s/secrets.properties:source.password}", dir);
	ck_assert_int_eq(cfgprov_check("sasl.password", v, &wire, 1, err, sizeof(err)), 0);
	snprintf(v, sizeof(v), "${file:%s/absent.properties:k}", dir);
	ck_assert_int_eq(cfgprov_check("sasl.password", v, &wire, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(cfgprov_check("sasl.password", v, &wire, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "absent.properties"));
	snprintf(v, sizeof(v), "${file:%s/secrets.properties:k}", other);
	ck_assert_int_eq(cfgprov_check("sasl.password", v, &wire, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "outside the allowed directories"));
	ck_assert_int_eq(cfgprov_check("sasl.password", "${env:TEST_CFGPROV_PW}", &wire,
	    0, err, sizeof(err)), -1);
	ck_assert_int_eq(cfgprov_check("sasl.password", "${env:TEST_CFGPROV_UNSET}",
	    &trusted, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not set"));
	ck_assert_int_eq(cfgprov_check("sasl.password", "plain", &wire, 1, err,
	    sizeof(err)), 0);
}
END_TEST

static void collect(void *arg, const char *path)
{
	char *buf = arg;

	strcat(buf, path);
	strcat(buf, ";");
}

static int canned_read(void *arg, const char *path, char **res,
    size_t *reslen, char *e, size_t elen)
{
	(void)arg;
	if (strstr(path, "gone") != NULL) {
		snprintf(e, elen, "%s: No such file or directory", path);
		return -1;
	}
	*res = strdup(strstr(path, ".properties") ? "k=FromHook\n" : "DirHook\n");
	*reslen = strlen(*res);
	return 0;
}

START_TEST(test_files_and_read_hook)
{
	struct cfgprov_opts o = trusted;
	char paths[2048] = "";

	/* The files a value's references read, in order, dir entries joined. */
	ck_assert_int_eq(cfgprov_files("p", "${file:/a/s.properties:k}-${dir:/d/:n}"
	    "-${env:TEST_CFGPROV_PW}", &o, collect, paths, err, sizeof(err)), 0);
	ck_assert_str_eq(paths, "/a/s.properties;/d/n;");
	/* Checked like cfgprov_check: a refused provider is an error. */
	o.allowed = CFGPROV_BIT(ENV);
	ck_assert_int_eq(cfgprov_files("p", "${file:/a/s.properties:k}", &o,
	    collect, paths, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not allowed"));
	/* A read hook replaces the file reads (contents read elsewhere). */
	o = trusted;
	o.read = canned_read;
	ck_assert_int_eq(resolve(&o, "${file:/x/s.properties:k}/${dir:/x:n}"), 0);
	ck_assert_str_eq(out, "FromHook/DirHook");
	ck_assert_int_eq(resolve(&o, "${file:/gone/s.properties:k}"), -1);
	ck_assert_ptr_nonnull(strstr(err, "/gone/s.properties: No such file"));
}
END_TEST

static Suite *cfgprov_suite(void)
{
	Suite *s = suite_create("cfgprov");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_has_ref);
	tcase_add_test(tc, test_file_provider);
	tcase_add_test(tc, test_dir_env_credential);
	tcase_add_test(tc, test_untrusted_policy);
	tcase_add_test(tc, test_files_and_read_hook);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cfgprov_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
