/*
 * kp_dump: print framed Kafka messages built with the codec, one per line,
 * as "<api> <version> <request|response> <correlation id> <hex>", for
 * test_tshark.py to wrap in a pcap and hand to Wireshark's Kafka dissector.
 *
 *   kp_dump            ApiVersions v0-v3 and Metadata v0-v12, each a
 *                      request followed by its response
 *   kp_dump decode     read "<api key> <version> request|response <hex body>"
 *                      lines on stdin; for each print "ok <re-encoded hex>
 *                      <value tokens>" or "error <offset> <reason>"
 *                      (test_codec_xcheck.py compares with kafka-python)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kp_gen_fill.h"
#include "kproto.h"

static int32_t next_corr = 100;

static void print_frame(const char *api, int16_t v, const char *dir, int32_t corr,
    const struct kw *w)
{
	printf("%s %d %s %d ", api, v, dir, corr);
	for (size_t i = 0; i < w->len; i++)
		printf("%02x", w->buf[i]);
	printf("\n");
}

static void emit(const char *api, int16_t key, int16_t v, const void *req, const void *resp)
{
	struct kp_request_header h;
	struct kw w;
	int32_t corr = next_corr++;

	kp_request_header_init(&h);
	h.request_api_key = key;
	h.request_api_version = v;
	h.correlation_id = corr;
	h.client_id = kstr_c("kp_dump");
	kw_init(&w, 1 << 20);
	if (kp_request_write(&w, &h, req) != 0) {
		fprintf(stderr, "kp_dump: %s v%d request: %s\n", api, v, w.why);
		exit(1);
	}
	print_frame(api, v, "request", corr, &w);
	kw_reset(&w);
	if (kp_response_write(&w, key, v, corr, resp) != 0) {
		fprintf(stderr, "kp_dump: %s v%d response: %s\n", api, v, w.why);
		exit(1);
	}
	print_frame(api, v, "response", corr, &w);
	kw_fini(&w);
}

static void api_versions(void)
{
	struct kp_api_versions_response_api_version keys[64];
	struct kp_api_versions_response rs;
	struct kp_api_versions_request rq;
	int32_t n;

	/* The ranges mirrord serves, as its listener would answer. */
	n = (int32_t)kp_served_api_versions(keys, ARRAY_SIZE(keys));
	if ((size_t)n > ARRAY_SIZE(keys)) {
		fprintf(stderr, "kp_dump: more served APIs than room\n");
		exit(1);
	}
	kp_api_versions_response_init(&rs);
	rs.api_keys = keys;
	rs.api_keys_n = n;
	for (int16_t v = 0; v <= 3; v++) {
		kp_api_versions_request_init(&rq);
		if (v >= 3) {
			rq.client_software_name = kstr_c("mirrord-kp-dump");
			rq.client_software_version = kstr_c("0.1.0");
		}
		emit("ApiVersions", KP_API_API_VERSIONS, v, &rq, &rs);
	}
}

static void metadata(void)
{
	struct kp_metadata_request rq;
	struct kp_metadata_request_topic rqt;
	struct kp_metadata_response rs;
	struct kp_metadata_response_broker b;
	struct kp_metadata_response_topic t;
	struct kp_metadata_response_partition p[2];
	int32_t nodes[1] = { 1 };

	kp_metadata_response_init(&rs);
	kp_metadata_response_broker_init(&b);
	kp_metadata_response_topic_init(&t);
	b.node_id = 1;
	b.host = kstr_c("127.0.0.1");
	b.port = 9092;
	rs.brokers = &b;
	rs.brokers_n = 1;
	rs.cluster_id = kstr_c("mirrord-test-cluster");
	rs.controller_id = 1;
	t.name = kstr_c("orders");
	for (int i = 0; i < 2; i++) {
		kp_metadata_response_partition_init(&p[i]);
		p[i].partition_index = i;
		p[i].leader_id = 1;
		p[i].leader_epoch = 3;
		p[i].replica_nodes = nodes;
		p[i].replica_nodes_n = 1;
		p[i].isr_nodes = nodes;
		p[i].isr_nodes_n = 1;
	}
	t.partitions = p;
	t.partitions_n = 2;
	for (int i = 0; i < 16; i++)
		t.topic_id.b[i] = (uint8_t)(0xa0 + i);
	rs.topics = &t;
	rs.topics_n = 1;

	kp_metadata_request_topic_init(&rqt);
	rqt.name = kstr_c("orders");
	for (int16_t v = 0; v <= 12; v++) {
		kp_metadata_request_init(&rq);
		rq.topics = &rqt;
		rq.topics_n = 1;
		/* Authorized operations only exist from v8; leave the defaults. */
		emit("Metadata", KP_API_METADATA, v, &rq, &rs);
	}
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static void decode_one(int16_t key, int16_t v, int is_req, const char *hex)
{
	const struct kp_api *api = kp_api_find(key);
	const struct kp_fill *fill = NULL;
	size_t n = strlen(hex) / 2;
	uint8_t *buf = malloc(n ? n : 1);
	struct karena *a = karena_new(1u << 24);
	void *m;
	struct kr r;
	struct kw w;

	for (size_t i = 0; i < kp_fill_count; i++)
		if (kp_fill_table[i].api_key == key)
			fill = &kp_fill_table[i];
	if (api == NULL || fill == NULL || buf == NULL || a == NULL) {
		printf("error 0 unknown ApiKey %d\n", key);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			printf("error 0 bad hex\n");
			goto out;
		}
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	m = karena_alloc(a, is_req ? api->request_size : api->response_size);
	kr_init(&r, buf, n);
	if ((is_req ? api->request_decode : api->response_decode)(&r, a, v, m) != 0 ||
	    kp_expect_end(&r) != 0) {
		printf("error %zu %s\n", r.err_off, r.why);
		goto out;
	}
	kw_init(&w, 1u << 24);
	if ((is_req ? api->request_encode : api->response_encode)(&w, v, m) != 0) {
		printf("error 0 re-encode: %s\n", w.why);
		kw_fini(&w);
		goto out;
	}
	printf("ok ");
	for (size_t i = 0; i < w.len; i++)
		printf("%02x", w.buf[i]);
	if (w.len == 0)
		printf("-");
	(is_req ? fill->request_tokens : fill->response_tokens)(stdout, v, m);
	printf("\n");
	kw_fini(&w);
out:
	free(buf);
	karena_free(a);
}

static int decode_lines(void)
{
	char line[1 << 16];

	while (fgets(line, sizeof(line), stdin) != NULL) {
		int key, v;
		char dir[16], hex[sizeof(line)];

		hex[0] = '\0';
		if (sscanf(line, "%d %d %15s %s", &key, &v, dir, hex) < 3) {
			fprintf(stderr, "kp_dump: bad input line: %s", line);
			return 1;
		}
		if (strcmp(hex, "-") == 0)
			hex[0] = '\0';
		decode_one((int16_t)key, (int16_t)v, strcmp(dir, "request") == 0, hex);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "decode") == 0)
		return decode_lines();
	if (argc != 1) {
		fprintf(stderr, "usage: kp_dump [decode]\n");
		return 2;
	}
	api_versions();
	metadata();
	return fflush(stdout) == 0 ? 0 : 1;
}
