/*
 * mkseeds_request: write the seed corpus of fuzz_request into a directory.
 *
 *   mkseeds_request DIR
 *
 * One file per request (frame contents: header and body, no size prefix):
 * two filled with non-default values for every version of every API mirrord
 * serves, one for every version of the other APIs in the codec's table,
 * plus truncated copies, an unknown ApiKey, an unsupported version and a
 * few hostile counts.  The output is deterministic; its files are committed
 * in test/fuzz/corpus/request and replayed by make check.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbuf.h"
#include "kp_gen_fill.h"
#include "kproto.h"

static const char *dir;

static void put(const char *name, const uint8_t *p, size_t n)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(p, 1, n, fp) != n || fclose(fp) != 0) {
		fprintf(stderr, "mkseeds_request: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void seed(const struct kp_api *api, const struct kp_fill *fill, int16_t v, uint32_t s,
    int truncated)
{
	struct karena *a = karena_new(1u << 22);
	void *m = karena_alloc(a, api->request_size);
	struct kp_request_header h;
	struct kw w;
	char name[256];

	fill->request(m, a, v, &s);
	kp_request_header_init(&h);
	h.request_api_key = api->api_key;
	h.request_api_version = v;
	h.correlation_id = (int32_t)s;
	h.client_id = kstr_c("seed");
	kw_init(&w, 1u << 22);
	if (kp_request_write(&w, &h, m) != 0) {
		fprintf(stderr, "mkseeds_request: %s v%d: %s\n", api->name, v, w.why);
		exit(1);
	}
	snprintf(name, sizeof(name), "%s-v%d-%u", api->name, v, (unsigned)s % 1000);
	put(name, w.buf + 4, w.len - 4);
	if (truncated) {
		snprintf(name, sizeof(name), "trunc-%s-v%d", api->name, v);
		put(name, w.buf + 4, (w.len - 4) / 2);
	}
	kw_fini(&w);
	karena_free(a);
}

int main(int argc, char **argv)
{
	/* ApiKey 97 (unknown), v0, correlation 1, client "x", then junk. */
	static const uint8_t unknown[] = { 0, 97, 0, 0, 0, 0, 0, 1, 0, 1, 'x', 0xde, 0xad };
	/* CreateMirror v7 (unsupported version), flexible header. */
	static const uint8_t badver[] = { 0, 94, 0, 7, 0, 0, 0, 2, 0xff, 0xff, 0, 3, 'm', '1', 1, 0 };
	/* CreateMirror v0 with a configs count of 2^28 - 2. */
	static const uint8_t hugecount[] = { 0, 94, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0,
		3, 'm', '1', 0xff, 0xff, 0xff, 0x7f, 0 };
	/* Metadata v1 with a topics count of 0x7fffffff. */
	static const uint8_t hugearray[] = { 0, 3, 0, 1, 0, 0, 0, 4, 0, 0, 0x7f, 0xff, 0xff, 0xff };
	/* DescribeMirrors v0 with a tagged field whose size runs past the end. */
	static const uint8_t tagpast[] = { 0, 99, 0, 0, 0, 0, 0, 5, 0xff, 0xff, 0, 0,
		0x01, 0x00, 0x7f, 0x01 };
	/* A header with a negative client id length. */
	static const uint8_t negstr[] = { 0, 18, 0, 0, 0, 0, 0, 6, 0x80, 0x00 };
	/* An 11-byte varint in the header tags of ApiVersions v3. */
	static const uint8_t longvar[] = { 0, 18, 0, 3, 0, 0, 0, 8, 0, 0, 0x80, 0x80, 0x80,
		0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 };

	if (argc != 2) {
		fprintf(stderr, "usage: mkseeds_request DIR\n");
		return 2;
	}
	dir = argv[1];
	for (size_t i = 0; i < kp_api_count; i++) {
		const struct kp_api *api = &kp_api_table[i];
		const struct kp_fill *fill = NULL;

		for (size_t j = 0; j < kp_fill_count; j++)
			if (kp_fill_table[j].api_key == api->api_key)
				fill = &kp_fill_table[j];
		for (int16_t v = api->min_version; v <= api->max_version; v++) {
			int served = api->served_min >= 0 && v >= api->served_min && v <= api->served_max;

			seed(api, fill, v, 1000u * (uint32_t)api->api_key + (uint32_t)v + 1, served);
			if (served)
				seed(api, fill, v, 7777u * (uint32_t)api->api_key + (uint32_t)v + 2, 0);
		}
	}
	put("garbage-unknown-key", unknown, sizeof(unknown));
	put("garbage-bad-version", badver, sizeof(badver));
	put("garbage-huge-count", hugecount, sizeof(hugecount));
	put("garbage-huge-array", hugearray, sizeof(hugearray));
	put("garbage-tag-past-end", tagpast, sizeof(tagpast));
	put("garbage-negative-string", negstr, sizeof(negstr));
	put("garbage-long-varint", longvar, sizeof(longvar));
	put("garbage-empty", unknown, 0);
	put("garbage-short-header", unknown, 5);
	return 0;
}
