/*
 * fuzz_kclient: libFuzzer harness for what our Kafka client reads from a
 * broker before anything else trusts it: the ApiVersions response body
 * (kconn_apiversions_parse, any version, incl. the KIP-511 fallback) and
 * the SCRAM server messages (ksasl_scram_client_final /
 * ksasl_scram_verify_server).  The response framing and correlation checks
 * run on sockets and are covered by test_kconn's hostile fake brokers.
 *
 * Input: byte 0 picks the target (even: ApiVersions, odd: SCRAM), byte 1
 * the ApiVersions version (0-4) or the SCRAM hash (even: SHA-256, odd:
 * SHA-512); the rest is the peer's bytes.  For SCRAM the rest is
 * "server-first\nserver-final".
 *
 * Built with clang -fsanitize=fuzzer under --enable-fuzzers
 * (MIRRORD_LIBFUZZER), and always as a replay program that runs the saved
 * corpus (test/fuzz/corpus/kclient, or the paths given) under make check.
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

#include "kbuf.h"
#include "kconn.h"
#include "ksasl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_apiversions(int version, const uint8_t *p, size_t n)
{
	struct kconn_api_range ranges[KCONN_MAX_API_KEY];
	struct kr r;
	int retry = -1, rc;
	int16_t ec;

	kr_init(&r, p, n);
	rc = kconn_apiversions_parse(&r, version, ranges, &retry, &ec);
	assert(rc >= -1 && rc <= 1);
	assert(r.p >= r.start && r.p <= r.end);
	if (rc == 1) {
		/* the fallback only ever goes down */
		assert(ec == 35 && retry >= 0 && retry < version);
	}
	if (rc == 0) {
		assert(ec == 0);
		for (int i = 0; i < KCONN_MAX_API_KEY; i++)
			assert(ranges[i].min == -1 ||
			    (ranges[i].min >= 0 && ranges[i].min <= ranges[i].max));
	}
	if (rc == -1 && ec == 0)
		assert(r.err && r.why != NULL);
}

static void fuzz_scram(int sha512, const uint8_t *p, size_t n)
{
	char err[512];
	const char *msg;
	size_t mlen;
	const uint8_t *nl = memchr(p, '\n', n);
	size_t first = nl ? (size_t)(nl - p) : n;
	struct ksasl_scram *s = ksasl_scram_new(sha512 ? KSASL_SCRAM_SHA_512 :
	    KSASL_SCRAM_SHA_256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO", err,
	    sizeof(err));

	assert(s != NULL);
	if (ksasl_scram_client_final(s, p, first, &msg, &mlen, err,
		sizeof(err)) == 0) {
		assert(mlen == strlen(msg));
		assert(strncmp(msg, "c=biws,r=rOprNGfwEbeRWgbNEkqO", 29) == 0);
		if (nl != NULL)
			(void)ksasl_scram_verify_server(s, nl + 1, n - first - 1,
			    err, sizeof(err));
	} else {
		assert(err[0] != '\0');
		/* no server-final accepted without a client-final */
		assert(ksasl_scram_verify_server(s, p, n, err, sizeof(err)) == -1);
	}
	ksasl_scram_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (data[0] % 2 == 0)
		fuzz_apiversions(data[1] % 5, data + 2, size - 2);
	else
		fuzz_scram(data[1] % 2, data + 2, size - 2);
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/kclient (see replay.c). */
const char fuzz_corpus[] = "kclient";
