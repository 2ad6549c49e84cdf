/*
 * fuzz_request: what mirrord's listener does with a frame from a peer.
 *
 * The input is one frame's contents (the bytes after the 4-byte size): a
 * request header, then the body.  The harness decodes the header, looks the
 * ApiKey up in the codec's table, decodes the body with the request decoder
 * (any API and version the codec knows, served or not), requires all bytes
 * to be consumed, and then:
 *   - re-encodes the decoded request and decodes that again: the second
 *     encoding must equal the first (decode and encode agree);
 *   - for the APIs mirrord serves, encodes a framed response at the same
 *     version, as the listener would;
 *   - feeds the same body to the response decoder too, since mirrord is
 *     also a client that reads broker responses.
 * Any disagreement aborts, so libFuzzer (and the replay) report it.
 *
 * Built two ways: with clang -fsanitize=fuzzer (MIRRORD_LIBFUZZER) under
 * --enable-fuzzers, and always as a replay program with its own main()
 * that runs every file of test/fuzz/corpus/request (or of the directories
 * and files given as arguments) through the same entry point.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compat.h"
#include "kbuf.h"
#include "kproto.h"

#define ARENA_CAP (8u << 20)
#define WRITER_CAP (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what, const struct kp_request_header *h)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_request: %s (ApiKey %d v%d)\n", what, h->request_api_key,
	    h->request_api_version);
	abort();
}

/* Decode body at version v with dec; 0 if it parsed and used every byte. */
static int decode_all(kp_decode_fn dec, const uint8_t *p, size_t n, struct karena *a,
    int16_t v, void *m)
{
	struct kr r;

	kr_init(&r, p, n);
	if (dec(&r, a, v, m) != 0)
		return -1;
	return kp_expect_end(&r);
}

static void request_path(const struct kp_api *api, const struct kp_request_header *h,
    const uint8_t *body, size_t n, struct karena *a)
{
	int16_t v = h->request_api_version;
	void *m = karena_alloc(a, api->request_size);
	void *m2 = karena_alloc(a, api->request_size);
	void *resp = karena_alloc(a, api->response_size);
	struct kw w1, w2;

	if (m == NULL || m2 == NULL || resp == NULL)
		return;
	if (decode_all(api->request_decode, body, n, a, v, m) != 0)
		return; /* the listener logs and closes the connection */

	/* decode(encode(decode(x))) encodes to the same bytes. */
	kw_init(&w1, WRITER_CAP);
	kw_init(&w2, WRITER_CAP);
	check(api->request_encode(&w1, v, m) == 0, "a decoded request does not re-encode", h);
	check(decode_all(api->request_decode, w1.buf, w1.len, a, v, m2) == 0,
	    "a re-encoded request does not decode", h);
	check(api->request_encode(&w2, v, m2) == 0, "second re-encode failed", h);
	check(w1.len == w2.len && (w1.len == 0 || memcmp(w1.buf, w2.buf, w1.len) == 0),
	    "re-encoding is not stable", h);
	/*
	 * A request may be longer than its re-encoding (unknown tagged fields
	 * are dropped) but never shorter.
	 */
	check(w1.len <= n, "re-encoding grew the request", h);

	/* Served APIs get an (empty, default) response at the same version. */
	if (api->served_min >= 0 && v >= api->served_min && v <= api->served_max) {
		kw_reset(&w1);
		api->response_init(resp);
		check(kp_response_write(&w1, h->request_api_key, v, h->correlation_id, resp) == 0,
		    "a default response does not encode", h);
		check(w1.len >= 4 && (size_t)(int32_t)be32_load(w1.buf) == w1.len - 4,
		    "response frame size is wrong", h);
	}
	kw_fini(&w1);
	kw_fini(&w2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct karena *a = karena_new(ARENA_CAP);
	struct kp_request_header h;
	const struct kp_api *api;
	struct kr r;
	int hver;

	if (a == NULL)
		return 0;
	kr_init(&r, data, size);
	if (kp_request_header_read(&r, &h, &hver) != 0) {
		check(r.err && r.why != NULL && r.err_off <= size, "header error without a reason", &h);
		goto out;
	}
	api = kp_api_find(h.request_api_key);
	if (api == NULL || h.request_api_version < api->min_version ||
	    h.request_api_version > api->max_version)
		goto out;
	request_path(api, &h, r.p, kr_left(&r), a);

	/* The same bytes as a response body (mirrord reads those as a client). */
	karena_reset(a);
	{
		void *m = karena_alloc(a, api->response_size);
		struct kw w;

		if (m != NULL && decode_all(api->response_decode, r.p, kr_left(&r), a,
		    h.request_api_version, m) == 0) {
			kw_init(&w, WRITER_CAP);
			check(api->response_encode(&w, h.request_api_version, m) == 0,
			    "a decoded response does not re-encode", &h);
			kw_fini(&w);
		}
	}
out:
	karena_free(a);
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/request (see replay.c). */
const char fuzz_corpus[] = "request";
