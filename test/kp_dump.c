/*
 * kp_dump: print framed Kafka messages built with the codec, one per line,
 * as "<api> <version> <request|response> <correlation id> <hex>", for
 * test_tshark.py to wrap in a pcap and hand to Wireshark's Kafka dissector.
 *
 *   kp_dump            ApiVersions v0-v3 and Metadata v0-v12, each a
 *                      request followed by its response
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
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
	int32_t n = 0;

	/* The ranges mirrord serves, as its listener would answer. */
	for (size_t i = 0; i < kp_api_count && n < (int32_t)ARRAY_SIZE(keys); i++) {
		const struct kp_api *api = &kp_api_table[i];

		if (api->served_min < 0)
			continue;
		keys[n].api_key = api->api_key;
		keys[n].min_version = api->served_min;
		keys[n].max_version = api->served_max;
		n++;
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

int main(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: kp_dump\n");
		return 2;
	}
	api_versions();
	metadata();
	return fflush(stdout) == 0 ? 0 : 1;
}
