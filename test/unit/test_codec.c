/*
 * Codec tests: every generated message at every valid version round-trips
 * with non-default values; hand-derived golden vectors (the .hex files in test/unit/golden)
 * match what the codec writes and decode to the expected fields; unknown
 * tagged fields are skipped; every truncation fails cleanly.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"
#include "kp_gen_fill.h"
#include "kproto.h"

#define WMAX (4u << 20)

/* ---- golden files --------------------------------------------------- */

/* Parse a .hex vector: two-digit hex tokens, '#' comments to end of line. */
static uint8_t *golden_load(const char *name, size_t *len)
{
	const char *src = getenv("top_srcdir");
	char path[4096];
	uint8_t *out = NULL;
	size_t n = 0, cap = 0;
	FILE *fp;
	int c, hi = -1;

	snprintf(path, sizeof(path), "%s/test/unit/golden/%s", src ? src : "..", name);
	fp = fopen(path, "r");
	ck_assert_msg(fp != NULL, "cannot open %s: %s", path, strerror(errno));
	while ((c = fgetc(fp)) != EOF) {
		int d;

		if (c == '#') {
			while ((c = fgetc(fp)) != EOF && c != '\n')
				;
			ck_assert_msg(hi < 0, "%s: odd hex digit before a comment", name);
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			ck_assert_msg(hi < 0, "%s: hex bytes must be two digits", name);
			continue;
		}
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			ck_abort_msg("%s: unexpected character '%c'", name, c);
		if (hi < 0) {
			hi = d;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			out = realloc(out, cap);
			ck_assert_ptr_nonnull(out);
		}
		out[n++] = (uint8_t)(hi << 4 | d);
		hi = -1;
	}
	fclose(fp);
	ck_assert_msg(hi < 0, "%s: trailing half byte", name);
	*len = n;
	return out;
}

/* Compare encoded bytes with a golden vector, naming the first difference. */
static void golden_check(const char *name, const uint8_t *got, size_t got_len)
{
	size_t len;
	uint8_t *want = golden_load(name, &len);

	for (size_t i = 0; i < len && i < got_len; i++)
		ck_assert_msg(got[i] == want[i], "%s: byte %zu is %02x, golden has %02x", name, i,
		    got[i], want[i]);
	ck_assert_msg(got_len == len, "%s: encoded %zu bytes, golden has %zu", name, got_len, len);
	free(want);
}

/* Strip the frame and header of a golden request; returns the body reader. */
static void open_request(const uint8_t *buf, size_t len, struct kr *r,
    struct kp_request_header *h)
{
	int hver;

	kr_init(r, buf, len);
	ck_assert_int_eq(kr_i32(r), (int32_t)(len - 4));
	ck_assert_int_eq(kp_request_header_read(r, h, &hver), 0);
}

static void open_response(const uint8_t *buf, size_t len, int16_t key, int16_t ver,
    struct kr *r, int32_t corr)
{
	struct kp_response_header h;

	kr_init(r, buf, len);
	ck_assert_int_eq(kr_i32(r), (int32_t)(len - 4));
	ck_assert_int_eq(kp_response_header_decode(r, kp_response_header_version(key, ver), &h), 0);
	ck_assert_int_eq(h.correlation_id, corr);
}

static struct kp_request_header req_header(int16_t key, int16_t ver, int32_t corr)
{
	struct kp_request_header h;

	kp_request_header_init(&h);
	h.request_api_key = key;
	h.request_api_version = ver;
	h.correlation_id = corr;
	h.client_id = kstr_c("kp");
	return h;
}

/* ---- round trips of every message at every version ------------------ */

/*
 * Encode m at v, decode it back, re-encode and compare; then decode every
 * strict prefix and expect a clean failure at an offset inside the prefix.
 */
static void roundtrip_one(const struct kp_api *api, int is_req, int16_t v, uint32_t seed)
{
	const struct kp_fill *fill = NULL;
	struct karena *a = karena_new(1u << 24);
	size_t sz = is_req ? api->request_size : api->response_size;
	void *m1 = karena_alloc(a, sz), *m2 = karena_alloc(a, sz);
	kp_encode_fn enc = is_req ? api->request_encode : api->response_encode;
	kp_decode_fn dec = is_req ? api->request_decode : api->response_decode;
	const char *what = is_req ? "request" : "response";
	struct kw w1, w2;
	struct kr r;

	for (size_t i = 0; i < kp_fill_count; i++)
		if (kp_fill_table[i].api_key == api->api_key)
			fill = &kp_fill_table[i];
	ck_assert_ptr_nonnull(fill);
	(is_req ? fill->request : fill->response)(m1, a, v, &seed);

	kw_init(&w1, WMAX);
	ck_assert_msg(enc(&w1, v, m1) == 0, "%s v%d %s seed %u: encode failed: %s", api->name, v,
	    what, seed, w1.why);

	kr_init(&r, w1.buf, w1.len);
	ck_assert_msg(dec(&r, a, v, m2) == 0, "%s v%d %s seed %u: decode failed at %zu: %s",
	    api->name, v, what, seed, r.err_off, r.why);
	ck_assert_msg(kr_left(&r) == 0, "%s v%d %s: %zu bytes left after decode", api->name, v,
	    what, kr_left(&r));

	kw_init(&w2, WMAX);
	ck_assert_int_eq(enc(&w2, v, m2), 0);
	ck_assert_msg(w1.len == w2.len && (w1.len == 0 || memcmp(w1.buf, w2.buf, w1.len) == 0),
	    "%s v%d %s seed %u: re-encoding the decoded message changed the bytes", api->name, v,
	    what, seed);

	/* Every strict prefix is an error with the offset inside the prefix. */
	for (size_t cut = 0; cut < w1.len; cut++) {
		/* Copy so ASan sees any read past the prefix. */
		uint8_t *p = malloc(cut ? cut : 1);

		if (cut > 0)
			memcpy(p, w1.buf, cut);
		kr_init(&r, p, cut);
		ck_assert_msg(dec(&r, a, v, m2) == -1, "%s v%d %s: a %zu-byte prefix of %zu decoded",
		    api->name, v, what, cut, w1.len);
		ck_assert(r.err);
		ck_assert_ptr_nonnull(r.why);
		ck_assert_msg(r.err_off <= cut, "%s v%d: error offset %zu past the %zu-byte prefix",
		    api->name, v, r.err_off, cut);
		free(p);
	}
	kw_fini(&w1);
	kw_fini(&w2);
	karena_free(a);
}

START_TEST(test_roundtrip_every_version)
{
	int checked = 0;

	ck_assert_uint_eq(kp_fill_count, kp_api_count);
	for (size_t i = 0; i < kp_api_count; i++) {
		const struct kp_api *api = &kp_api_table[i];

		for (int16_t v = api->min_version; v <= api->max_version; v++)
			for (uint32_t seed = 1; seed <= 6; seed++) {
				roundtrip_one(api, 1, v, seed * 7919u + (uint32_t)v);
				roundtrip_one(api, 0, v, seed * 104729u + (uint32_t)v);
				checked++;
			}
	}
	ck_assert_int_gt(checked, 100);
}
END_TEST

START_TEST(test_api_table)
{
	const struct kp_api *api;
	int16_t prev = -1;

	for (size_t i = 0; i < kp_api_count; i++) {
		ck_assert_int_gt(kp_api_table[i].api_key, prev); /* sorted, unique */
		prev = kp_api_table[i].api_key;
	}
	api = kp_api_find(KP_API_API_VERSIONS);
	ck_assert_ptr_nonnull(api);
	ck_assert_str_eq(api->name, "ApiVersions");
	ck_assert_int_eq(api->first_flexible, 3);
	ck_assert_int_eq(api->served_min, 0);
	ck_assert_int_eq(api->served_max, 3);
	api = kp_api_find(KP_API_METADATA);
	ck_assert_int_eq(api->first_flexible, 9);
	ck_assert_int_eq(api->served_max, 12);
	/* The nine mirror RPCs: v0 only, flexible from 0, served. */
	static const int16_t mirror_keys[] = { 94, 95, 96, 98, 99, 102, 103, 104, 105 };
	for (size_t i = 0; i < ARRAY_SIZE(mirror_keys); i++) {
		api = kp_api_find(mirror_keys[i]);
		ck_assert_msg(api != NULL, "ApiKey %d missing", mirror_keys[i]);
		ck_assert_int_eq(api->min_version, 0);
		ck_assert_int_eq(api->max_version, 0);
		ck_assert_int_eq(api->first_flexible, 0);
		ck_assert_int_eq(api->served_min, 0);
		ck_assert_int_eq(api->served_max, 0);
	}
	ck_assert_str_eq(kp_api_name(99), "DescribeMirrors");
	ck_assert_str_eq(kp_api_name(104), "DeleteMirror");
	ck_assert_str_eq(kp_api_name(97), "Unknown");
	ck_assert_ptr_null(kp_api_find(-1));
	ck_assert_ptr_null(kp_api_find(32767));
	/* Header versions. */
	ck_assert_int_eq(kp_request_header_version(18, 2), 1);
	ck_assert_int_eq(kp_request_header_version(18, 3), 2);
	ck_assert_int_eq(kp_request_header_version(18, 9), 2); /* too new: still flexible */
	ck_assert_int_eq(kp_response_header_version(18, 3), 0); /* KIP-511 */
	ck_assert_int_eq(kp_request_header_version(3, 8), 1);
	ck_assert_int_eq(kp_request_header_version(3, 9), 2);
	ck_assert_int_eq(kp_response_header_version(3, 8), 0);
	ck_assert_int_eq(kp_response_header_version(3, 9), 1);
	ck_assert_int_eq(kp_response_header_version(94, 0), 1);
	ck_assert_int_eq(kp_request_header_version(97, 0), -1);

	/* What the listener advertises: ApiVersions, Metadata, SaslHandshake,
	 * DescribeConfigs, SaslAuthenticate, IncrementalAlterConfigs (a
	 * mirror's configs), the mirror RPCs. */
	{
		struct kp_api_versions_response_api_version av[16];
		size_t n = kp_served_api_versions(av, ARRAY_SIZE(av));

		ck_assert_uint_eq(n, 15);
		ck_assert_int_eq(av[0].api_key, 3);
		ck_assert_int_eq(av[0].max_version, 12);
		ck_assert_int_eq(av[1].api_key, 17);
		ck_assert_int_eq(av[1].max_version, 1);
		ck_assert_int_eq(av[2].api_key, 18);
		ck_assert_int_eq(av[2].max_version, 3);
		ck_assert_int_eq(av[3].api_key, 32);
		ck_assert_int_eq(av[3].max_version, 4);
		ck_assert_int_eq(av[4].api_key, 36);
		ck_assert_int_eq(av[4].min_version, 0);
		ck_assert_int_eq(av[4].max_version, 2);
		ck_assert_int_eq(av[5].api_key, 44);
		ck_assert_int_eq(av[5].max_version, 1);
		ck_assert_int_eq(av[6].api_key, 94);
		ck_assert_int_eq(av[13].api_key, 104);
		ck_assert_int_eq(av[14].api_key, 105);
		ck_assert_str_eq(kp_api_name(105), "RecoverMirrorTopics");
		ck_assert_uint_eq(kp_served_api_versions(av, 2), 15); /* count beyond room */
		ck_assert(kp_api_served(18, 3));
		ck_assert(!kp_api_served(18, 4));
		ck_assert(!kp_api_served(0, 3)); /* Produce: the codec knows it, mirrord does not serve it */
		ck_assert(!kp_api_served(97, 0));
	}
}
END_TEST

/* ---- golden vectors ------------------------------------------------- */

START_TEST(test_golden_api_versions_requests)
{
	struct kp_api_versions_request rq;
	struct kp_request_header h;
	struct karena *a = karena_new(1 << 20);
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	/* v0 */
	kw_init(&w, WMAX);
	kp_api_versions_request_init(&rq);
	h = req_header(18, 0, 1);
	ck_assert_int_eq(kp_request_write(&w, &h, &rq), 0);
	golden_check("api_versions_v0_request.hex", w.buf, w.len);
	kw_fini(&w);

	/* v3 */
	kw_init(&w, WMAX);
	rq.client_software_name = kstr_c("mirrord");
	rq.client_software_version = kstr_c("0.1.0");
	h = req_header(18, 3, 7);
	ck_assert_int_eq(kp_request_write(&w, &h, &rq), 0);
	golden_check("api_versions_v3_request.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("api_versions_v3_request.hex", &len);
	open_request(buf, len, &r, &h);
	ck_assert_int_eq(h.request_api_key, 18);
	ck_assert_int_eq(h.request_api_version, 3);
	ck_assert_int_eq(h.correlation_id, 7);
	ck_assert(kstr_eq(h.client_id, "kp"));
	ck_assert_int_eq(kp_api_versions_request_decode(&r, a, 3, &rq), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert(kstr_eq(rq.client_software_name, "mirrord"));
	ck_assert(kstr_eq(rq.client_software_version, "0.1.0"));
	free(buf);
	karena_free(a);
}
END_TEST

START_TEST(test_golden_api_versions_responses)
{
	struct kp_api_versions_response rs;
	struct kp_api_versions_response_api_version keys[2];
	struct karena *a = karena_new(1 << 20);
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	kp_api_versions_response_init(&rs);
	keys[0] = (struct kp_api_versions_response_api_version){ 18, 0, 3 };
	keys[1] = (struct kp_api_versions_response_api_version){ 3, 0, 12 };
	rs.api_keys = keys;
	rs.api_keys_n = 2;
	rs.throttle_time_ms = 250; /* ignorable: v0 has no throttle field */
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_response_write(&w, 18, 0, 1, &rs), 0);
	golden_check("api_versions_v0_response.hex", w.buf, w.len);
	kw_fini(&w);

	keys[1] = (struct kp_api_versions_response_api_version){ 94, 0, 0 };
	rs.throttle_time_ms = 0;
	rs.finalized_features_epoch = 5;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_response_write(&w, 18, 3, 7, &rs), 0);
	golden_check("api_versions_v3_response.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("api_versions_v3_response.hex", &len);
	open_response(buf, len, 18, 3, &r, 7);
	ck_assert_int_eq(kp_api_versions_response_decode(&r, a, 3, &rs), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.error_code, 0);
	ck_assert_int_eq(rs.api_keys_n, 2);
	ck_assert_int_eq(rs.api_keys[1].api_key, 94);
	ck_assert_int_eq(rs.api_keys[0].max_version, 3);
	ck_assert(rs.finalized_features_epoch == 5);
	ck_assert_int_eq(rs.supported_features_n, 0);
	ck_assert_int_eq(rs.zk_migration_ready, 0);
	free(buf);

	buf = golden_load("api_versions_v0_response.hex", &len);
	open_response(buf, len, 18, 0, &r, 1);
	ck_assert_int_eq(kp_api_versions_response_decode(&r, a, 0, &rs), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.api_keys_n, 2);
	ck_assert_int_eq(rs.api_keys[1].api_key, 3);
	ck_assert_int_eq(rs.api_keys[1].max_version, 12);
	ck_assert_int_eq(rs.throttle_time_ms, 0);
	ck_assert(rs.finalized_features_epoch == -1); /* the default, absent in v0 */
	free(buf);
	karena_free(a);
}
END_TEST

/* The one-broker, one-topic, one-partition metadata of the golden vectors. */
static void metadata_fill(struct kp_metadata_response *rs, struct kp_metadata_response_broker *b,
    struct kp_metadata_response_topic *t, struct kp_metadata_response_partition *p,
    int32_t *one)
{
	kp_metadata_response_init(rs);
	kp_metadata_response_broker_init(b);
	kp_metadata_response_topic_init(t);
	kp_metadata_response_partition_init(p);
	b->node_id = 1;
	b->host = kstr_c("h1");
	b->port = 9092;
	rs->brokers = b;
	rs->brokers_n = 1;
	rs->controller_id = 1;
	t->name = kstr_c("t");
	p->leader_id = 1;
	p->leader_epoch = 7;
	p->replica_nodes = one;
	p->replica_nodes_n = 1;
	p->isr_nodes = one;
	p->isr_nodes_n = 1;
	t->partitions = p;
	t->partitions_n = 1;
	rs->topics = t;
	rs->topics_n = 1;
}

START_TEST(test_golden_metadata_responses)
{
	struct kp_metadata_response rs;
	struct kp_metadata_response_broker b;
	struct kp_metadata_response_topic t;
	struct kp_metadata_response_partition p;
	struct karena *a = karena_new(1 << 20);
	int32_t one = 1;
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	metadata_fill(&rs, &b, &t, &p, &one);
	rs.cluster_id = kstr_c("c1"); /* ignorable, dropped at v1 */
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_response_write(&w, 3, 1, 2, &rs), 0);
	golden_check("metadata_v1_response.hex", w.buf, w.len);
	kw_fini(&w);

	for (int i = 0; i < 16; i++)
		t.topic_id.b[i] = (uint8_t)(i + 1);
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_response_write(&w, 3, 12, 3, &rs), 0);
	golden_check("metadata_v12_response.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("metadata_v12_response.hex", &len);
	open_response(buf, len, 3, 12, &r, 3);
	ck_assert_int_eq(kp_metadata_response_decode(&r, a, 12, &rs), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.brokers_n, 1);
	ck_assert(kstr_eq(rs.brokers[0].host, "h1"));
	ck_assert_int_eq(rs.brokers[0].port, 9092);
	ck_assert_int_eq(rs.brokers[0].rack.len, -1);
	ck_assert(kstr_eq(rs.cluster_id, "c1"));
	ck_assert_int_eq(rs.topics_n, 1);
	ck_assert(kstr_eq(rs.topics[0].name, "t"));
	ck_assert_uint_eq(rs.topics[0].topic_id.b[15], 0x10);
	ck_assert_int_eq(rs.topics[0].partitions[0].leader_epoch, 7);
	ck_assert_int_eq(rs.topics[0].partitions[0].isr_nodes_n, 1);
	ck_assert_int_eq(rs.topics[0].partitions[0].isr_nodes[0], 1);
	ck_assert_int_eq(rs.topics[0].partitions[0].offline_replicas_n, 0);
	ck_assert_int_eq(rs.topics[0].topic_authorized_operations, INT32_MIN);
	free(buf);

	buf = golden_load("metadata_v1_response.hex", &len);
	open_response(buf, len, 3, 1, &r, 2);
	ck_assert_int_eq(kp_metadata_response_decode(&r, a, 1, &rs), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.controller_id, 1);
	ck_assert_int_eq(rs.cluster_id.len, -1); /* absent in v1: default null */
	ck_assert_int_eq(rs.topics[0].partitions[0].leader_epoch, -1);
	ck_assert_int_eq(rs.topics[0].partitions[0].replica_nodes[0], 1);
	free(buf);
	karena_free(a);
}
END_TEST

START_TEST(test_golden_create_mirror_request)
{
	struct kp_create_mirror_request rq;
	struct kp_create_mirror_request_mirror_config cfg[2];
	struct kp_request_header h = req_header(94, 0, 11);
	struct karena *a = karena_new(1 << 20);
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	kp_create_mirror_request_init(&rq);
	rq.mirror_name = kstr_c("m1");
	cfg[0].name = kstr_c("bootstrap.servers");
	cfg[0].value = kstr_c("127.0.0.1:9092");
	cfg[1].name = kstr_c("a");
	cfg[1].value = KSTR_NULL;
	rq.configs = cfg;
	rq.configs_n = 2;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_request_write(&w, &h, &rq), 0);
	golden_check("create_mirror_request.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("create_mirror_request.hex", &len);
	open_request(buf, len, &r, &h);
	ck_assert_int_eq(h.request_api_key, 94);
	ck_assert_int_eq(h.correlation_id, 11);
	ck_assert_int_eq(kp_create_mirror_request_decode(&r, a, 0, &rq), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert(kstr_eq(rq.mirror_name, "m1"));
	ck_assert_int_eq(rq.configs_n, 2);
	ck_assert(kstr_eq(rq.configs[0].name, "bootstrap.servers"));
	ck_assert(kstr_eq(rq.configs[0].value, "127.0.0.1:9092"));
	ck_assert(kstr_eq(rq.configs[1].name, "a"));
	ck_assert_int_eq(rq.configs[1].value.len, -1);
	free(buf);
	karena_free(a);
}
END_TEST

START_TEST(test_golden_add_topics_tagged_patterns)
{
	struct kp_add_topics_to_mirror_request rq;
	struct kp_add_topics_to_mirror_request_topic topic;
	struct kstr inc[1] = { kstr_c("a.*") }, exc[2] = { kstr_c("x"), kstr_c("y") };
	struct kp_request_header h = req_header(95, 0, 12);
	struct karena *a = karena_new(1 << 20);
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	kp_add_topics_to_mirror_request_init(&rq);
	rq.mirror_name = kstr_c("m1");
	topic.name = kstr_c("t1");
	rq.topics = &topic;
	rq.topics_n = 1;
	rq.include_patterns = inc;
	rq.include_patterns_n = 1;
	rq.exclude_patterns = exc;
	rq.exclude_patterns_n = 2;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_request_write(&w, &h, &rq), 0);
	golden_check("add_topics_to_mirror_request.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("add_topics_to_mirror_request.hex", &len);
	open_request(buf, len, &r, &h);
	ck_assert_int_eq(kp_add_topics_to_mirror_request_decode(&r, a, 0, &rq), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert(kstr_eq(rq.topics[0].name, "t1"));
	ck_assert_int_eq(rq.include_patterns_n, 1);
	ck_assert(kstr_eq(rq.include_patterns[0], "a.*"));
	ck_assert_int_eq(rq.exclude_patterns_n, 2);
	ck_assert(kstr_eq(rq.exclude_patterns[0], "x"));
	ck_assert(kstr_eq(rq.exclude_patterns[1], "y"));

	/* Without patterns, no tagged fields are written: the section is 00. */
	rq.include_patterns_n = 0;
	rq.exclude_patterns_n = 0;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_add_topics_to_mirror_request_encode(&w, 0, &rq), 0);
	ck_assert_uint_eq(w.len, 3 + 1 + 4 + 1);
	ck_assert_uint_eq(w.buf[w.len - 1], 0x00);
	kw_fini(&w);
	free(buf); /* rq's strings point into it */
	karena_free(a);
}
END_TEST

START_TEST(test_golden_describe_mirrors_response)
{
	struct kp_describe_mirrors_response rs;
	struct kp_describe_mirrors_response_mirror mir;
	struct kp_describe_mirrors_response_topic top;
	struct kp_describe_mirrors_response_partition part;
	struct karena *a = karena_new(1 << 20);
	uint8_t *buf;
	size_t len;
	struct kw w;
	struct kr r;

	kp_describe_mirrors_response_init(&rs);
	kp_describe_mirrors_response_mirror_init(&mir);
	kp_describe_mirrors_response_topic_init(&top);
	kp_describe_mirrors_response_partition_init(&part);
	ck_assert(part.last_mirrored_epoch == -1 && part.last_mirrored_offset == -1);
	ck_assert(part.source_offset == -1 && part.lag == -1);
	part.partition_index = 0;
	part.source_offset = 100;
	part.destination_offset = 90;
	part.lag = 10;
	part.state = kstr_c("MIRRORING");
	part.last_mirrored_epoch = 3;
	part.last_mirrored_offset = 90;
	top.name = kstr_c("t1");
	top.partitions = &part;
	top.partitions_n = 1;
	mir.mirror_name = kstr_c("m1");
	mir.topics = &top;
	mir.topics_n = 1;
	rs.mirrors = &mir;
	rs.mirrors_n = 1;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_response_write(&w, 99, 0, 13, &rs), 0);
	golden_check("describe_mirrors_response.hex", w.buf, w.len);
	kw_fini(&w);

	buf = golden_load("describe_mirrors_response.hex", &len);
	open_response(buf, len, 99, 0, &r, 13);
	ck_assert_int_eq(kp_describe_mirrors_response_decode(&r, a, 0, &rs), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.error_message.len, -1);
	ck_assert(kstr_eq(rs.mirrors[0].mirror_name, "m1"));
	ck_assert(kstr_eq(rs.mirrors[0].topics[0].name, "t1"));
	{
		const struct kp_describe_mirrors_response_partition *p = &rs.mirrors[0].topics[0].partitions[0];

		ck_assert(p->source_offset == 100);
		ck_assert(p->destination_offset == 90);
		ck_assert(p->lag == 10);
		ck_assert(kstr_eq(p->state, "MIRRORING"));
		ck_assert_int_eq(p->error_message.len, -1);
		ck_assert_int_eq(p->last_mirrored_epoch, 3);
		ck_assert(p->last_mirrored_offset == 90);
	}
	free(buf);
	karena_free(a);
}
END_TEST

/* ---- tagged fields, version rules, hostile input -------------------- */

START_TEST(test_unknown_tags_skipped)
{
	/*
	 * DescribeMirrors v0 request body: MirrorNames ["m1"], then a body
	 * TAG_BUFFER with an unknown tag 5 (3 bytes) and an unknown tag 200
	 * (varint c8 01, empty).
	 */
	static const uint8_t body[] = { 0x02, 0x03, 'm', '1',
		0x02, 0x05, 0x03, 0xaa, 0xbb, 0xcc, 0xc8, 0x01, 0x00 };
	/*
	 * DescribeMirrors v0 response with an unknown tag 99 inside the
	 * partition next to the known tag 1, and tag 0 absent.
	 */
	static const uint8_t resp[] = {
		0, 0, 0, 0, 0, 0, 0x00,              /* throttle, error, null message */
		0x02, 0x03, 'm', '1', 0, 0, 0x00,    /* one mirror "m1" */
		0x02, 0x03, 't', '1',                /* one topic "t1" */
		0x02, 0, 0, 0, 2,                    /* one partition, index 2 */
		0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 'X', 0x00,                     /* state "X", null message */
		0x02, 0x01, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x2a, /* tag 1 = 42 */
		0x63, 0x02, 0xde, 0xad,              /* unknown tag 99 */
		0x00, 0x00, 0x00 };                  /* topic, mirror, body tags */
	struct kp_describe_mirrors_request rq;
	struct kp_describe_mirrors_response rs;
	struct karena *a = karena_new(1 << 20);
	struct kr r;

	kr_init(&r, body, sizeof(body));
	ck_assert_int_eq(kp_describe_mirrors_request_decode(&r, a, 0, &rq), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rq.mirror_names_n, 1);
	ck_assert(kstr_eq(rq.mirror_names[0], "m1"));

	kr_init(&r, resp, sizeof(resp));
	ck_assert_msg(kp_describe_mirrors_response_decode(&r, a, 0, &rs) == 0, "%s at %zu", r.why,
	    r.err_off);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert_int_eq(rs.mirrors[0].topics[0].partitions[0].partition_index, 2);
	ck_assert_int_eq(rs.mirrors[0].topics[0].partitions[0].last_mirrored_epoch, -1);
	ck_assert(rs.mirrors[0].topics[0].partitions[0].last_mirrored_offset == 42);
	karena_free(a);
}
END_TEST

START_TEST(test_known_tag_bad_size)
{
	/* AddTopicsToMirror body: tag 0 says size 6 but its array needs 5. */
	static const uint8_t longer[] = { 0x03, 'm', '1', 0x01,
		0x01, 0x00, 0x06, 0x02, 0x04, 'a', '.', '*', 0xff };
	/* Tag 0 says size 3 but its array needs 5: the value overruns it. */
	static const uint8_t shorter[] = { 0x03, 'm', '1', 0x01,
		0x01, 0x00, 0x03, 0x02, 0x04, 'a', '.', '*' };
	struct kp_add_topics_to_mirror_request rq;
	struct karena *a = karena_new(1 << 20);
	struct kr r;

	kr_init(&r, longer, sizeof(longer));
	ck_assert_int_eq(kp_add_topics_to_mirror_request_decode(&r, a, 0, &rq), -1);
	ck_assert_str_eq(r.why, "AddTopicsToMirrorRequest.IncludePatterns: tagged field longer than its value");
	ck_assert_uint_eq(r.err_off, 12);

	kr_init(&r, shorter, sizeof(shorter));
	ck_assert_int_eq(kp_add_topics_to_mirror_request_decode(&r, a, 0, &rq), -1);
	ck_assert_str_eq(r.why, "string length past the end of input");
	ck_assert_uint_eq(r.err_off, 8);
	karena_free(a);
}
END_TEST

START_TEST(test_version_rules)
{
	struct kp_metadata_request rq;
	struct kp_metadata_response rs;
	struct kp_create_mirror_request cm;
	struct kw w;

	/* A non-ignorable field with a non-default value fails to encode. */
	kp_metadata_request_init(&rq);
	ck_assert_int_eq(rq.allow_auto_topic_creation, 1);
	rq.allow_auto_topic_creation = 0;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_metadata_request_encode(&w, 3, &rq), -1);
	ck_assert_str_eq(w.why, "MetadataRequest.AllowAutoTopicCreation: a non-default value cannot be encoded in this version");
	kw_fini(&w);
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_metadata_request_encode(&w, 4, &rq), 0);
	kw_fini(&w);

	/* v0 cannot say "all topics" with null; v1+ can. */
	rq.allow_auto_topic_creation = 1;
	rq.topics_n = -1;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_metadata_request_encode(&w, 0, &rq), -1);
	ck_assert_str_eq(w.why, "MetadataRequest.Topics: null array in a non-nullable field");
	kw_fini(&w);
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_metadata_request_encode(&w, 1, &rq), 0);
	ck_assert_uint_eq(w.len, 4);
	ck_assert_uint_eq(be32_load(w.buf), 0xffffffffu);
	kw_fini(&w);

	/* An ignorable field is dropped silently. */
	kp_metadata_response_init(&rs);
	rs.throttle_time_ms = 100;
	rs.cluster_id = kstr_c("c");
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_metadata_response_encode(&w, 0, &rs), 0);
	ck_assert_uint_eq(w.len, 8); /* two empty int32 arrays */
	kw_fini(&w);

	/* Non-nullable compact string. */
	kp_create_mirror_request_init(&cm);
	cm.mirror_name = KSTR_NULL;
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_create_mirror_request_encode(&w, 0, &cm), -1);
	ck_assert_str_eq(w.why, "CreateMirrorRequest.MirrorName: null in a non-nullable field");
	kw_fini(&w);

	/* Versions outside the spec. */
	kw_init(&w, WMAX);
	ck_assert_int_eq(kp_create_mirror_request_encode(&w, 1, &cm), -1);
	ck_assert_str_eq(w.why, "CreateMirrorRequest: unsupported version");
	kw_fini(&w);
	{
		struct kr r;
		static const uint8_t empty[1] = { 0 };

		kr_init(&r, empty, 0);
		ck_assert_int_eq(kp_create_mirror_request_decode(&r, NULL, -1, &cm), -1);
		ck_assert_str_eq(r.why, "CreateMirrorRequest: unsupported version");
	}
}
END_TEST

START_TEST(test_hostile_counts)
{
	struct kp_create_mirror_request cm;
	struct kp_describe_mirrors_request dm;
	struct karena *small = karena_new(64);
	struct kr r;
	/* Configs count 0x0fffffff (varint ff ff ff 7f + 1) with 3 bytes left. */
	static const uint8_t huge[] = { 0x03, 'm', '1', 0xff, 0xff, 0xff, 0x7f, 0, 0, 0 };
	/* 30 config entries fit the bytes but not a 64-byte arena. */
	uint8_t many[200];
	/* A null MirrorName in a non-nullable field. */
	static const uint8_t nullname[] = { 0x00, 0x01, 0x00 };
	/* DescribeMirrors: the tag section claims 100 fields with 1 byte left. */
	static const uint8_t tags[] = { 0x01, 0x64, 0x00 };

	kr_init(&r, huge, sizeof(huge));
	ck_assert_int_eq(kp_create_mirror_request_decode(&r, small, 0, &cm), -1);
	ck_assert_uint_eq(r.err_off, 3);
	ck_assert_str_eq(r.why, "array count over the limit");

	memset(many, 0, sizeof(many));
	many[0] = 0x01; /* empty name */
	many[1] = 31;   /* 30 configs */
	for (int i = 0; i < 30; i++) {
		many[2 + 3 * i] = 0x01;     /* name "" */
		many[2 + 3 * i + 1] = 0x00; /* value null */
		many[2 + 3 * i + 2] = 0x00; /* tags */
	}
	kr_init(&r, many, 2 + 90 + 1);
	ck_assert_int_eq(kp_create_mirror_request_decode(&r, small, 0, &cm), -1);
	ck_assert_str_eq(r.why, "CreateMirrorRequest.Configs: array does not fit in the decode arena");
	ck_assert_uint_eq(r.err_off, 1);
	{
		struct karena *big = karena_new(1 << 20);

		kr_init(&r, many, 2 + 90 + 1);
		ck_assert_int_eq(kp_create_mirror_request_decode(&r, big, 0, &cm), 0);
		ck_assert_int_eq(cm.configs_n, 30);
		ck_assert_int_eq(cm.configs[29].value.len, -1);
		karena_free(big);
	}

	kr_init(&r, nullname, sizeof(nullname));
	ck_assert_int_eq(kp_create_mirror_request_decode(&r, small, 0, &cm), -1);
	ck_assert_str_eq(r.why, "CreateMirrorRequest.MirrorName: null in a non-nullable field");
	ck_assert_uint_eq(r.err_off, 0);

	kr_init(&r, tags, sizeof(tags));
	ck_assert_int_eq(kp_describe_mirrors_request_decode(&r, small, 0, &dm), -1);
	ck_assert_str_eq(r.why, "tagged field count larger than the bytes left");
	ck_assert_uint_eq(r.err_off, 1);
	karena_free(small);
}
END_TEST

START_TEST(test_frames_and_headers)
{
	static const uint8_t neg[] = { 0x80, 0, 0, 0 };
	static const uint8_t big[] = { 0x10, 0, 0, 0 };
	static const uint8_t part[] = { 0, 0, 0, 5, 1, 2 };
	static const uint8_t full[] = { 0, 0, 0, 2, 1, 2, 9 };
	/* Request header v2 with a client id and one unknown header tag. */
	static const uint8_t hdr[] = { 0, 94, 0, 0, 0, 0, 0, 9, 0xff, 0xff,
		0x01, 0x03, 0x01, 0x7a, 0x03, 'm', '1', 0x01, 0x00 };
	/* An unknown ApiKey: only the v1 fields are read. */
	static const uint8_t unk[] = { 0x7f, 0x00, 0, 1, 0, 0, 0, 4, 0, 1, 'c', 0xee };
	struct kp_request_header h;
	struct kp_create_mirror_request cm;
	struct karena *a = karena_new(4096);
	const char *why = NULL;
	size_t flen;
	struct kr r;
	int hver;

	ck_assert_int_eq(kp_frame_peek(neg, 3, 100, &flen, &why), 0);
	ck_assert_int_eq(kp_frame_peek(neg, 4, 100, &flen, &why), -1);
	ck_assert_str_eq(why, "negative frame size");
	ck_assert_int_eq(kp_frame_peek(big, 4, 100, &flen, &why), -1);
	ck_assert_str_eq(why, "frame size above the limit");
	ck_assert_int_eq(kp_frame_peek(part, sizeof(part), 100, &flen, &why), 0);
	ck_assert_int_eq(kp_frame_peek(full, sizeof(full), 100, &flen, &why), 1);
	ck_assert_uint_eq(flen, 6);

	kr_init(&r, hdr, sizeof(hdr));
	ck_assert_int_eq(kp_request_header_read(&r, &h, &hver), 0);
	ck_assert_int_eq(hver, 2);
	ck_assert_int_eq(h.request_api_key, 94);
	ck_assert_int_eq(h.correlation_id, 9);
	ck_assert_int_eq(h.client_id.len, -1);
	ck_assert_int_eq(kp_create_mirror_request_decode(&r, a, 0, &cm), 0);
	ck_assert_int_eq(kp_expect_end(&r), 0);
	ck_assert(kstr_eq(cm.mirror_name, "m1"));

	kr_init(&r, unk, sizeof(unk));
	ck_assert_int_eq(kp_request_header_read(&r, &h, &hver), 0);
	ck_assert_int_eq(hver, -1);
	ck_assert_int_eq(h.request_api_key, 0x7f00);
	ck_assert(kstr_eq(h.client_id, "c"));
	ck_assert_int_eq(kp_expect_end(&r), -1);
	ck_assert_str_eq(r.why, "trailing bytes after the message body");
	ck_assert_uint_eq(r.err_off, 11);

	/* A truncated header fails at the field that is cut. */
	kr_init(&r, hdr, 9);
	ck_assert_int_eq(kp_request_header_read(&r, &h, &hver), -1);
	ck_assert_uint_eq(r.err_off, 8);
	ck_assert_str_eq(r.why, "truncated int16");
	karena_free(a);
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_api_table);
	tcase_add_test(tc, test_roundtrip_every_version);
	tcase_add_test(tc, test_golden_api_versions_requests);
	tcase_add_test(tc, test_golden_api_versions_responses);
	tcase_add_test(tc, test_golden_metadata_responses);
	tcase_add_test(tc, test_golden_create_mirror_request);
	tcase_add_test(tc, test_golden_add_topics_tagged_patterns);
	tcase_add_test(tc, test_golden_describe_mirrors_response);
	tcase_add_test(tc, test_unknown_tags_skipped);
	tcase_add_test(tc, test_known_tag_bad_size);
	tcase_add_test(tc, test_version_rules);
	tcase_add_test(tc, test_hostile_counts);
	tcase_add_test(tc, test_frames_and_headers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(codec_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
