/*
 * reproducer: the baseline mirrord is measured against.
 *
 * It does the job MirrorMaker 2's MirrorSourceTask does, minus the JVM and
 * Kafka Connect: a librdkafka consumer reads every partition of the given
 * source topics from the beginning, and a librdkafka producer writes each
 * record (key, value, headers, timestamp) to the same topic and partition
 * on the destination, compressed with the given codec.  Every record is
 * decompressed, copied and recompressed, which is the cost mirrord's
 * batch-copy avoids.
 *
 *   reproducer -s SRC -d DST -t TOPIC[,TOPIC...] [-z CODEC]
 *
 * It stops once it has copied every partition up to the end offsets read
 * at start-up and every copy is acknowledged, then prints one JSON line:
 * {"messages":N,"payload_bytes":N,"wall_s":F}.  The bench measures its
 * CPU time and peak RSS from the outside (wait4).
 *
 * The tuning favours the baseline (large batches, linger, no per-record
 * flush), so the ratio the bench reports is a conservative one.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define MAX_TOPICS 64
#define MAX_PARTS 4096

struct part {
	const char *topic;
	int32_t partition;
	int64_t stop;   /* copy offsets below this */
	int64_t next;   /* next offset expected from the consumer */
	int done;
};

struct repro {
	struct part parts[MAX_PARTS];
	int nparts;
	int remaining;
	int64_t messages, payload, acked, failed;
	char first_err[256];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct repro *r = opaque;

	(void)rk;
	if (m->err) {
		if (r->failed++ == 0)
			snprintf(r->first_err, sizeof(r->first_err), "%s [%" PRId32 "]: %s",
			    rd_kafka_topic_name(m->rkt), m->partition,
			    rd_kafka_err2str(m->err));
	} else {
		r->acked++;
	}
}

static int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "reproducer: %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

static struct part *part_find(struct repro *r, const char *topic, int32_t p)
{
	for (int i = 0; i < r->nparts; i++)
		if (r->parts[i].partition == p && strcmp(r->parts[i].topic, topic) == 0)
			return &r->parts[i];
	return NULL;
}

/* Learns the partitions of each topic and their end offsets.  Blocking
 * calls are fine here: this is start-up of a benchmark tool. */
static int discover(rd_kafka_t *c, struct repro *r, char **topics, int ntopics)
{
	for (int t = 0; t < ntopics; t++) {
		const struct rd_kafka_metadata *md = NULL;
		rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topics[t], NULL);
		rd_kafka_resp_err_t e = rd_kafka_metadata(c, 0, rkt, &md, 10000);

		rd_kafka_topic_destroy(rkt);
		if (e || md->topic_cnt != 1 || md->topics[0].err) {
			fprintf(stderr, "reproducer: metadata for %s: %s\n", topics[t],
			    rd_kafka_err2str(e ? e : md->topics[0].err));
			if (md)
				rd_kafka_metadata_destroy(md);
			return -1;
		}
		for (int p = 0; p < md->topics[0].partition_cnt; p++) {
			struct part *pt;
			int64_t lo, hi;

			if (r->nparts == MAX_PARTS) {
				fprintf(stderr, "reproducer: more than %d partitions\n", MAX_PARTS);
				rd_kafka_metadata_destroy(md);
				return -1;
			}
			pt = &r->parts[r->nparts++];
			pt->topic = topics[t];
			pt->partition = md->topics[0].partitions[p].id;
			e = rd_kafka_query_watermark_offsets(c, pt->topic, pt->partition, &lo, &hi, 10000);
			if (e) {
				fprintf(stderr, "reproducer: watermarks of %s [%d]: %s\n", pt->topic,
				    pt->partition, rd_kafka_err2str(e));
				rd_kafka_metadata_destroy(md);
				return -1;
			}
			pt->stop = hi;
			pt->next = lo;
			pt->done = lo >= hi;
			if (!pt->done)
				r->remaining++;
		}
		rd_kafka_metadata_destroy(md);
	}
	return 0;
}

static int copy_one(rd_kafka_t *prod, struct repro *r, rd_kafka_message_t *m)
{
	rd_kafka_headers_t *hdrs = NULL, *src_hdrs = NULL;
	rd_kafka_timestamp_type_t tstype;
	int64_t ts = rd_kafka_message_timestamp(m, &tstype);
	const char *topic = rd_kafka_topic_name(m->rkt);
	rd_kafka_resp_err_t e;

	if (rd_kafka_message_headers(m, &src_hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
		hdrs = rd_kafka_headers_copy(src_hdrs);
	for (;;) {
		e = rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(topic),
		    RD_KAFKA_V_PARTITION(m->partition),
		    RD_KAFKA_V_KEY(m->key, m->key_len),
		    RD_KAFKA_V_VALUE(m->payload, m->len),
		    RD_KAFKA_V_TIMESTAMP(tstype == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : ts),
		    RD_KAFKA_V_HEADERS(hdrs),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(prod, 10);
	}
	if (e) {
		if (hdrs)
			rd_kafka_headers_destroy(hdrs);
		fprintf(stderr, "reproducer: produce %s [%d]: %s\n", topic, m->partition,
		    rd_kafka_err2str(e));
		return -1;
	}
	r->messages++;
	r->payload += (int64_t)(m->key_len + m->len);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: reproducer -s SRC -d DST -t TOPIC[,TOPIC...] [-z CODEC]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *src = NULL, *dst = NULL, *codec = "none";
	char *topics_arg = NULL, *topics[MAX_TOPICS];
	int ntopics = 0, opt, rc = 1;
	static struct repro r;
	rd_kafka_conf_t *cc, *pc;
	rd_kafka_t *cons = NULL, *prod = NULL;
	rd_kafka_topic_partition_list_t *assign = NULL;
	char err[512];
	double t0;

	while ((opt = getopt(argc, argv, "s:d:t:z:")) != -1) {
		switch (opt) {
		case 's': src = optarg; break;
		case 'd': dst = optarg; break;
		case 't': topics_arg = optarg; break;
		case 'z': codec = optarg; break;
		default: usage();
		}
	}
	if (src == NULL || dst == NULL || topics_arg == NULL)
		usage();
	for (char *save = NULL, *t = strtok_r(topics_arg, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save)) {
		if (ntopics == MAX_TOPICS)
			usage();
		topics[ntopics++] = t;
	}

	cc = rd_kafka_conf_new();
	if (conf_set(cc, "bootstrap.servers", src) ||
	    conf_set(cc, "group.id", "mirrord-bench-reproducer") ||
	    conf_set(cc, "enable.auto.commit", "false") ||
	    conf_set(cc, "enable.partition.eof", "false") ||
	    conf_set(cc, "isolation.level", "read_committed") ||
	    conf_set(cc, "check.crcs", "true") ||
	    conf_set(cc, "fetch.wait.max.ms", "100"))
		return 2;
	cons = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof(err));
	if (cons == NULL) {
		fprintf(stderr, "reproducer: consumer: %s\n", err);
		return 1;
	}
	pc = rd_kafka_conf_new();
	if (conf_set(pc, "bootstrap.servers", dst) ||
	    conf_set(pc, "compression.type", codec) ||
	    conf_set(pc, "linger.ms", "20") ||
	    conf_set(pc, "batch.size", "262144") ||
	    conf_set(pc, "queue.buffering.max.kbytes", "65536") ||
	    conf_set(pc, "acks", "all")) {
		rd_kafka_conf_destroy(pc);
		goto out;
	}
	rd_kafka_conf_set_dr_msg_cb(pc, dr_cb);
	rd_kafka_conf_set_opaque(pc, &r);
	prod = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof(err));
	if (prod == NULL) {
		fprintf(stderr, "reproducer: producer: %s\n", err);
		goto out;
	}

	t0 = now_s();
	if (discover(cons, &r, topics, ntopics) < 0)
		goto out;
	assign = rd_kafka_topic_partition_list_new(r.nparts);
	for (int i = 0; i < r.nparts; i++)
		if (!r.parts[i].done)
			rd_kafka_topic_partition_list_add(assign, r.parts[i].topic,
			    r.parts[i].partition)->offset = r.parts[i].next;
	if (rd_kafka_assign(cons, assign)) {
		fprintf(stderr, "reproducer: assign failed\n");
		goto out;
	}

	while (r.remaining > 0) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 100);
		struct part *pt;

		rd_kafka_poll(prod, 0);
		if (r.failed)
			break;
		if (m == NULL)
			continue;
		if (m->err) {
			fprintf(stderr, "reproducer: consume: %s\n", rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			goto out;
		}
		pt = part_find(&r, rd_kafka_topic_name(m->rkt), m->partition);
		if (pt != NULL && !pt->done && m->offset < pt->stop) {
			if (copy_one(prod, &r, m) < 0) {
				rd_kafka_message_destroy(m);
				goto out;
			}
			pt->next = m->offset + 1;
			if (pt->next >= pt->stop) {
				pt->done = 1;
				r.remaining--;
			}
		}
		rd_kafka_message_destroy(m);
	}
	if (rd_kafka_flush(prod, 300000) != RD_KAFKA_RESP_ERR_NO_ERROR)
		fprintf(stderr, "reproducer: %d copies unacknowledged after 300 s\n",
		    rd_kafka_outq_len(prod));
	if (r.failed || r.acked != r.messages) {
		fprintf(stderr, "reproducer: %" PRId64 " of %" PRId64 " copies failed; first: %s\n",
		    r.messages - r.acked, r.messages, r.first_err);
		goto out;
	}
	printf("{\"messages\":%" PRId64 ",\"payload_bytes\":%" PRId64 ",\"wall_s\":%.3f}\n",
	    r.messages, r.payload, now_s() - t0);
	rc = 0;
out:
	if (assign)
		rd_kafka_topic_partition_list_destroy(assign);
	if (cons) {
		rd_kafka_consumer_close(cons);
		rd_kafka_destroy(cons);
	}
	if (prod)
		rd_kafka_destroy(prod);
	return rc;
}
