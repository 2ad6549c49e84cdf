/*
 * corpusgen: fill source topics with the benchmark corpus.
 *
 * The corpus is a deterministic stream of JSON-like click-stream events
 * (what most Kafka topics carry), keyed by user id, spread round-robin over
 * every partition of the given topics and produced with librdkafka in the
 * given codec.  Same seed, same bytes: the lz4 and the uncompressed variants
 * carry identical records.
 *
 *   corpusgen -b BOOTSTRAP -t TOPIC[,TOPIC...] -p PARTITIONS -m MIB
 *             [-z none|gzip|snappy|lz4|zstd] [-S SEED] [-B BATCH_BYTES]
 *
 * -B writes small batches the way a latency-bound producer does: linger.ms
 * 0 and batch.size BATCH_BYTES (the bench's small-batch corpus uses 1024),
 * where the default is linger.ms 50 and 256 KiB batches.
 *
 * On success prints one JSON line: {"messages":N,"payload_bytes":N,...}
 * where payload_bytes counts keys plus values (the uncompressed record
 * payload, the denominator the bench reports against).  Any delivery error
 * is fatal: a short corpus would make every number after it wrong.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "compat.h"

#define MAX_TOPICS 64

struct gen {
	uint64_t rng;
	int64_t delivered;
	int64_t failed;
	char first_err[256];
};

static uint64_t rng_next(struct gen *g)
{
	/* xorshift64*: cheap, deterministic, good enough for synthetic text */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return g->rng * 2685821657736338717ULL;
}

static const char *const events[] = { "page_view", "click", "add_to_cart",
	"checkout", "search", "login", "logout", "video_play" };
static const char *const countries[] = { "DE", "FR", "US", "GB", "BR", "IN",
	"JP", "NL", "SE", "ES" };
static const char *const agents[] = {
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) Safari/604.1",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Firefox/121.0",
};

/* One event into buf; returns its length. */
static int make_event(struct gen *g, int64_t seq, char *buf, size_t cap,
    char *key, size_t keycap, int *keylen)
{
	uint64_t r1 = rng_next(g), r2 = rng_next(g), r3 = rng_next(g);
	unsigned user = (unsigned)(r1 % 250000);
	int n;

	*keylen = snprintf(key, keycap, "user-%06u", user);
	n = snprintf(buf, cap,
	    "{\"seq\":%" PRId64 ",\"ts\":%" PRId64 ",\"user\":\"user-%06u\","
	    "\"event\":\"%s\",\"page\":\"/catalog/%u/item/%u\","
	    "\"session\":\"%016" PRIx64 "\",\"country\":\"%s\","
	    "\"amount_cents\":%u,\"ua\":\"%s\",\"ab\":[%u,%u,%u],"
	    "\"referrer\":\"https://search.example.com/q?%08" PRIx64 "\"}",
	    seq, (int64_t)1700000000000LL + seq * 7, user,
	    events[r2 % ARRAY_SIZE(events)], (unsigned)(r2 >> 8) % 500,
	    (unsigned)(r2 >> 20) % 100000, r3,
	    countries[(r3 >> 4) % ARRAY_SIZE(countries)],
	    (unsigned)(r1 >> 32) % 100000, agents[(r1 >> 40) % ARRAY_SIZE(agents)],
	    (unsigned)(r3 >> 10) % 2, (unsigned)(r3 >> 11) % 2,
	    (unsigned)(r3 >> 12) % 2, r1 >> 28);
	return n;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct gen *g = opaque;

	(void)rk;
	if (m->err) {
		if (g->failed++ == 0)
			snprintf(g->first_err, sizeof(g->first_err), "%s [%" PRId32 "]: %s",
			    rd_kafka_topic_name(m->rkt), m->partition,
			    rd_kafka_err2str(m->err));
	} else {
		g->delivered++;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: corpusgen -b BOOTSTRAP -t TOPIC[,TOPIC...] -p PARTITIONS -m MIB"
			" [-z CODEC] [-S SEED] [-B BATCH_BYTES]\n");
	exit(2);
}

static int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "corpusgen: %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *bootstrap = NULL, *codec = "none";
	char *topics_arg = NULL, *topics[MAX_TOPICS];
	int ntopics = 0, partitions = 0, opt;
	const char *batch_bytes = NULL;
	double mib = 0;
	struct gen g = { .rng = 0x9e3779b97f4a7c15ULL };
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	char err[512], buf[1024], key[32];
	int64_t target, payload = 0, seq = 0;

	while ((opt = getopt(argc, argv, "b:t:p:m:z:S:B:")) != -1) {
		switch (opt) {
		case 'b': bootstrap = optarg; break;
		case 't': topics_arg = optarg; break;
		case 'p': partitions = atoi(optarg); break;
		case 'm': mib = atof(optarg); break;
		case 'z': codec = optarg; break;
		case 'S': g.rng = strtoull(optarg, NULL, 0) | 1; break;
		case 'B': batch_bytes = optarg; break;
		default: usage();
		}
	}
	if (bootstrap == NULL || topics_arg == NULL || partitions <= 0 || mib <= 0)
		usage();
	for (char *save = NULL, *t = strtok_r(topics_arg, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save)) {
		if (ntopics == MAX_TOPICS) {
			fprintf(stderr, "corpusgen: more than %d topics\n", MAX_TOPICS);
			return 2;
		}
		topics[ntopics++] = t;
	}
	target = (int64_t)(mib * 1048576.0);

	conf = rd_kafka_conf_new();
	if (conf_set(conf, "bootstrap.servers", bootstrap) ||
	    conf_set(conf, "compression.type", codec) ||
	    conf_set(conf, "linger.ms", batch_bytes ? "0" : "50") ||
	    conf_set(conf, "batch.size", batch_bytes ? batch_bytes : "262144") ||
	    conf_set(conf, "queue.buffering.max.kbytes", "65536") ||
	    conf_set(conf, "acks", "all"))
		return 2;
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_conf_set_opaque(conf, &g);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (rk == NULL) {
		fprintf(stderr, "corpusgen: rd_kafka_new: %s\n", err);
		return 1;
	}

	while (payload < target) {
		int keylen, len = make_event(&g, seq, buf, sizeof(buf), key, sizeof(key), &keylen);
		int slot = (int)(seq % (ntopics * partitions));
		rd_kafka_resp_err_t e;

		for (;;) {
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topics[slot / partitions]),
			    RD_KAFKA_V_PARTITION(slot % partitions),
			    RD_KAFKA_V_KEY(key, (size_t)keylen),
			    RD_KAFKA_V_VALUE(buf, (size_t)len),
			    RD_KAFKA_V_TIMESTAMP((int64_t)1700000000000LL + seq * 7),
			    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
			if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
				break;
			rd_kafka_poll(rk, 10);
		}
		if (e) {
			fprintf(stderr, "corpusgen: produce to %s [%d]: %s\n",
			    topics[slot / partitions], slot % partitions, rd_kafka_err2str(e));
			return 1;
		}
		payload += keylen + len;
		seq++;
		rd_kafka_poll(rk, 0);
	}
	if (rd_kafka_flush(rk, 300000) != RD_KAFKA_RESP_ERR_NO_ERROR)
		fprintf(stderr, "corpusgen: %d messages still queued after 300 s\n",
		    rd_kafka_outq_len(rk));
	rd_kafka_destroy(rk);
	if (g.failed || g.delivered != seq) {
		fprintf(stderr, "corpusgen: %" PRId64 " of %" PRId64 " messages not delivered; first: %s\n",
		    seq - g.delivered, seq, g.first_err);
		return 1;
	}
	printf("{\"messages\":%" PRId64 ",\"payload_bytes\":%" PRId64 ",\"codec\":\"%s\","
	       "\"topics\":%d,\"partitions\":%d}\n", seq, payload, codec, ntopics, partitions);
	return 0;
}
