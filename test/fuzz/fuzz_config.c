/*
 * fuzz_config: libFuzzer harness for the configuration readers.
 *
 * The first byte of an input picks the reader, the rest is its input:
 *   0: props_parse_buf (kafka-mirrors --mirror-config/--command-config)
 *   1: config_load_string (mirrord.yaml)
 *   2: mirrorconf_parse (CreateMirror configs from the wire: hostile); the
 *      rest is NUL-separated name, value, name, value ...
 * Our own promises are asserted: errors are well formed, CreateMirror
 * errors are 40 or 42 with a message, and no message ever contains the
 * value of a secret config.
 *
 * Built two ways, like fuzz_batch: with clang -fsanitize=fuzzer
 * (MIRRORD_LIBFUZZER) under --enable-fuzzers, and always as a plain replay
 * program that runs the saved corpus (test/fuzz/corpus/config, or the files
 * and directories on its command line) under `make check`.
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compat.h"
#include "daemonconf.h"
#include "mirrorconf.h"
#include "props.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_props(const char *buf, size_t len)
{
	struct props p;
	char err[512];

	props_init(&p);
	if (props_parse_buf(&p, buf, len, "f", err, sizeof(err)) < 0) {
		assert(strncmp(err, "f:", 2) == 0);
		assert(p.n == 0);
		return;
	}
	for (size_t i = 0; i < p.n; i++) {
		assert(p.names[i] != NULL && p.values[i] != NULL);
		/* later duplicates replace earlier ones: names are unique */
		for (size_t j = 0; j < i; j++)
			assert(strcmp(p.names[i], p.names[j]) != 0);
	}
	props_fini(&p);
}

static void fuzz_yaml(const char *buf, size_t len)
{
	struct config_errors errs;
	struct config *cfg = NULL;
	char tmp[1024];
	FILE *null;

	config_errors_init(&errs);
	if (config_load_string("f.yaml", buf, len, &cfg, &errs) < 0) {
		assert(cfg == NULL);
		assert(errs.n > 0);
		for (size_t i = 0; i < errs.n; i++)
			assert(strncmp(errs.v[i].text, "f.yaml", 6) == 0);
	} else {
		assert(cfg != NULL && errs.n == 0);
		assert(cfg->destination_bootstrap_servers != NULL);
		for (size_t i = 0; i < config_key_count(); i++)
			assert(config_format_value(cfg, config_key_path(i), tmp, sizeof(tmp)) == 0);
		null = fopen("/dev/null", "w");
		if (null != NULL) {
			config_dump(cfg, null);
			fclose(null);
		}
		config_free(cfg);
	}
	config_errors_fini(&errs);
}

/*
 * Values are echoed quoted ('value'), so a secret shows as its quoted
 * start.  A value that is also (the start of) a name or of a value
 * that is not secret may legitimately appear; it proves nothing.
 */
static int secret_echoed(const char *msg, const char *value,
    const char *const *names, const char *const *values, size_t n)
{
	char needle[70];
	size_t vl = strlen(value);

	snprintf(needle, sizeof(needle), "'%.64s", value);
	if (strstr(msg, needle) == NULL)
		return 0;
	for (size_t j = 0; j < n; j++) {
		if (strstr(names[j], value) != NULL || (vl > 64 &&
		    strncmp(names[j], value, 64) == 0))
			return 0;
		/* The same text inside the value of a key that is not
		 * secret ("'x'hunter22" holds "'hunter22"). */
		if (values[j] != NULL && !mirrorconf_is_secret(names[j]) &&
		    (strstr(values[j], value) != NULL || (vl > 64 &&
		    strstr(values[j], needle + 1) != NULL)))
			return 0;
	}
	return 1;
}

/*
 * Confirms secret_echoed(): parses again with values[i] masked (the same
 * length, every byte DEL).  If the message still quotes the secret's text,
 * that text came from somewhere else (the input holds it twice); if it no
 * longer does, the message echoed the secret.
 */
static int echoed_from(const char **names, const char **values, size_t n,
    size_t i, const char *msg)
{
	const char *secret = values[i];
	char *masked = strdup(secret), again[512], needle[70];
	struct mirrorconf *mc = NULL;
	int16_t code = -99;
	int echoed;

	if (masked == NULL)
		return 0;
	memset(masked, 0x7f, strlen(masked));
	values[i] = masked;
	again[0] = '\0';
	if (mirrorconf_parse(names, values, n, &mc, &code, again, sizeof(again)) == 0)
		mirrorconf_free(mc);
	values[i] = secret;
	free(masked);
	snprintf(needle, sizeof(needle), "'%.64s", secret);
	echoed = strstr(msg, needle) != NULL && strstr(again, needle) == NULL;
	if (echoed)
		fprintf(stderr, "fuzz_config: the message echoes the value of %s: %s\n",
		    names[i], msg);
	return echoed;
}

static void fuzz_mirror(const char *buf, size_t len)
{
	const char *names[MIRRORCONF_MAX_CONFIGS + 2], *values[MIRRORCONF_MAX_CONFIGS + 2];
	char *copy = malloc(len + 2), msg[512], *sug;
	struct mirrorconf *mc = NULL;
	size_t n = 0, off = 0;
	int16_t code = -99;

	if (copy == NULL)
		return;
	memcpy(copy, buf, len);
	copy[len] = '\0';
	copy[len + 1] = '\0';
	while (off <= len && n < ARRAY_SIZE(names)) {
		names[n] = copy + off;
		off += strlen(copy + off) + 1;
		/* A lone "\x01" value stands for a null value. */
		values[n] = off <= len ? copy + off : "";
		if (off <= len)
			off += strlen(copy + off) + 1;
		if (strcmp(values[n], "\x01") == 0)
			values[n] = NULL;
		n++;
	}
	if (mirrorconf_parse(names, values, n, &mc, &code, msg, sizeof(msg)) == 0) {
		assert(code == 0 && mc != NULL && mc->bootstrap_servers != NULL);
		(void)mirrorconf_topic_selected(mc, "topic");
		mirrorconf_free(mc);
	} else {
		assert(mc == NULL);
		assert(code == 40 || code == 42 || code == -1);
		assert(msg[0] != '\0');
		/* A suggestion names a key of mirrord's own table, never an
		 * input value: a secret that happens to equal such a name
		 * ("did you mean 'security.protocol'?") proves nothing. */
		if ((sug = strstr(msg, "; did you mean '")) != NULL)
			*sug = '\0';
		for (size_t i = 0; i < n; i++)
			if (values[i] != NULL && values[i][0] != '\0' &&
			    mirrorconf_is_secret(names[i]) &&
			    secret_echoed(msg, values[i], names, values, n))
				assert(!echoed_from(names, values, n, i, msg));
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0: fuzz_props((const char *)data + 1, size - 1); break;
	case 1: fuzz_yaml((const char *)data + 1, size - 1); break;
	default: fuzz_mirror((const char *)data + 1, size - 1); break;
	}
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/config (see replay.c). */
const char fuzz_corpus[] = "config";
