/*
 * mlog_kafka.c: the metadata log in a topic of the destination cluster
 * (storage.backend: kafka).  See mlog.h for the interface and the frame
 * format, mlog_kafka.h for the options.
 *
 * The topic.  One partition; created by mirrord if missing with the wanted
 * replication factor (capped by the broker count, with a warning),
 * min.insync.replicas (capped by the replication factor, with a warning),
 * unclean.leader.election.enable=false, cleanup.policy=delete with
 * retention.ms=-1 and retention.bytes=-1 (nothing is ever deleted by the
 * broker), and max.message.bytes large enough for one record of
 * storage max size.  An existing topic is checked: more than one
 * partition, compaction, or a finite retention refuse the start (each of
 * them would lose or reorder records); a lower replication factor or
 * min.insync.replicas than wanted is a warning.  Every Produce uses
 * acks=all.
 *
 * The records.  Each Kafka record's value is exactly one mlog frame (the
 * 12-byte checked header and the payload), so replay checks the same
 * CRC-32C as the file backend.  Records of a snapshot carry the key
 * "snapshot"; the records of the log have a null key.  One mlog_sync() is
 * one record batch (Kafka appends a batch atomically: all of a sync's
 * records or none).
 *
 * One writer, fenced.  Every writer gets its producer id and epoch from
 * InitProducerId with the transactional id "mirrord-metadata-<topic>"; the
 * transaction coordinator bumps the epoch on every call, so the newest
 * writer holds the highest epoch.  A partition leader learns an epoch only
 * when a batch carrying it is appended, so a new writer's first act is to
 * append a claim record (type MLOG_T_CLAIM, naming its producer id and
 * epoch) and only then read the log to its end.  From the moment the claim
 * is appended the leader refuses every batch of an older epoch of that
 * producer id with INVALID_PRODUCER_EPOCH; a deposed writer's late batch
 * therefore either landed before the claim (and the new writer replays it)
 * or is refused.  A writer refused that way marks the log broken ("fenced")
 * and every later mutation fails with that message: it never writes again.
 * The batches are idempotent (producer id, epoch, sequence) but not
 * transactional: no AddPartitionsToTxn/EndTxn is needed for the epoch
 * check, which the leader applies to every batch with a producer id (this
 * is checked against Kafka 4.4 by test/test_mlog_kafka.py).  The sequence
 * numbers make a resend after a lost answer exact: the leader answers a
 * duplicate with the first append's offset.
 *
 * Replay applies the fence again, independently of the broker: after a
 * claim, a batch from any other producer id or epoch is skipped with a
 * warning (it cannot appear while the broker keeps the producer's state;
 * see the known limits).
 *
 * Snapshots.  mlog_compact() appends a snapshot: a MLOG_T_SNAPSHOT record,
 * the dump's records, then MLOG_T_SNAPEND holding the record count and the
 * offset of the MLOG_T_SNAPSHOT record, all keyed "snapshot", written by
 * one writer (one producer epoch).  At open the newest complete snapshot
 * is found by reading backwards from the end in growing windows (the log
 * after a snapshot is bounded by storage.snapshot_every_records), and the
 * replay starts there; snapshot records met later in the replay (an
 * unfinished snapshot of a fenced writer) are skipped.  After a snapshot
 * the writer also deletes the records before it (DeleteRecords), so the
 * log normally starts at its newest snapshot.  Either way start-up reads
 * the newest snapshot and the log after it, not the history.
 *
 * Known limits (first piece of issue 10):
 *  - Blocking: every mlog_sync() is a Produce round trip on the calling
 *    (loop) thread on a dedicated connection, bounded by
 *    storage.kafka.timeout_ms, as the file backend blocks on fsync.  An
 *    answer lost past the timeout leaves the outcome unknown: the log is
 *    then broken (restart re-reads what is really there).
 *  - Trimming: after each snapshot the writer deletes the records before
 *    it (DeleteRecords); retention stays infinite, so the broker itself
 *    never deletes anything.  A trim that fails is retried at the next
 *    snapshot.
 *  - The broker forgets a producer id's state once no batch of it was
 *    appended for producer.id.expiration.ms (one day by default).  A
 *    deposed writer paused longer than that, with no write of the new
 *    writer in between, could then append after the claim; replay skips
 *    such a batch (see above), but the deposed writer itself would not
 *    learn it was fenced until a later write is refused.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"
#include "kblock.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "mlog_kafka.h"

#define CLAIM_LEN 26u            /* pid i64, epoch i16, wall ms i64, pid of the process i64 */
#define SNAPEND_LEN 16u          /* body count u64, begin offset i64 */
#define FETCH_MAX_BYTES (8 << 20)
#define SCAN_WINDOW 4096         /* first backward window, in offsets */
#define TXN_TIMEOUT_MS 60000
#define BACKOFF_MS 100

struct mk {
	struct mlog base;
	struct kconn_config kcfg;
	char **boot_host;
	int *boot_port;
	size_t nboot;
	char *topic;
	char txn_id[320];
	int want_rf, want_isr, timeout_ms, require_empty;
	size_t batch_max;           /* topic max.message.bytes we set */

	struct kblock *conn;        /* to the partition leader */
	int32_t leader_id;
	char leader_host[256];
	int leader_port;
	int nbrokers;

	int64_t pid;
	int16_t epoch;
	int32_t seq;                /* next base sequence */

	struct kw pend;             /* frames appended, not yet synced */
	uint32_t npend;

	int broken;
	char broken_why[768];
	struct mlog_stats st;
};

void mlog_kafka_opts_init(struct mlog_kafka_opts *ko)
{
	memset(ko, 0, sizeof(*ko));
	ko->topic = MLOG_KAFKA_TOPIC_DEFAULT;
	ko->replication_factor = 3;
	ko->min_insync_replicas = 2;
	ko->timeout_ms = 15000;
}

void mlog_kafka_writer(const struct mlog *ml, int64_t *producer_id,
    int16_t *epoch)
{
	const struct mk *k = (const struct mk *)ml;

	*producer_id = k->pid;
	*epoch = k->epoch;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void set_broken(struct mk *k, const char *why)
{
	k->broken = 1;
	k->st.broken = 1;
	seterr(k->broken_why, sizeof(k->broken_why), "%s", why);
	log_errorx("metadata log: %s", why);
}

static int check_usable(struct mk *k, char *err, size_t errlen)
{
	if (!k->broken)
		return 0;
	seterr(err, errlen, "metadata log is read-only after an earlier "
	    "failure: %s", k->broken_why);
	return -1;
}

/* ---- connections and metadata ------------------------------------------- */

static void drop_conn(struct mk *k)
{
	kblock_free(k->conn);
	k->conn = NULL;
}

/* A connection to any bootstrap server. */
static struct kblock *connect_any(struct mk *k, char *err, size_t errlen)
{
	char e[512] = "no bootstrap server";

	for (size_t i = 0; i < k->nboot; i++) {
		struct kblock *c = kblock_connect(&k->kcfg, k->boot_host[i],
		    k->boot_port[i], k->timeout_ms, e, sizeof(e));
		if (c != NULL)
			return c;
	}
	seterr(err, errlen, "cannot reach the destination cluster: %s", e);
	return NULL;
}

struct topic_md {
	int exists;
	int16_t error;
	int partitions;
	int rf;
	int32_t leader;
	char host[256];
	int port;
	int nbrokers;
};

static int metadata(struct mk *k, struct kblock *c, struct topic_md *md,
    char *err, size_t errlen)
{
	struct kp_metadata_request req;
	struct kp_metadata_response resp;
	struct kp_metadata_request_topic t;
	struct karena *a = karena_new(4 << 20);
	uint8_t *frame;
	int rc = -1;

	memset(md, 0, sizeof(*md));
	md->leader = -1;
	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	kp_metadata_request_init(&req);
	kp_metadata_request_topic_init(&t);
	t.name = kstr_c(k->topic);
	req.topics = &t;
	req.topics_n = 1;
	req.allow_auto_topic_creation = 0;
	frame = kblock_call(c, KP_API_METADATA, 12, &req, &resp, a,
	    k->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	md->nbrokers = resp.brokers_n;
	for (int32_t i = 0; i < resp.topics_n; i++) {
		struct kp_metadata_response_topic *tp = &resp.topics[i];
		if (tp->name.len != (int32_t)strlen(k->topic) ||
		    memcmp(tp->name.p, k->topic, (size_t)tp->name.len) != 0)
			continue;
		md->error = tp->error_code;
		if (tp->error_code == KERR_UNKNOWN_TOPIC_OR_PARTITION)
			break;
		md->exists = 1;
		md->partitions = tp->partitions_n;
		for (int32_t j = 0; j < tp->partitions_n; j++) {
			if (tp->partitions[j].partition_index != 0)
				continue;
			md->leader = tp->partitions[j].leader_id;
			md->rf = tp->partitions[j].replica_nodes_n;
		}
	}
	for (int32_t i = 0; md->leader >= 0 && i < resp.brokers_n; i++) {
		if (resp.brokers[i].node_id != md->leader)
			continue;
		seterr(md->host, sizeof(md->host), "%.*s",
		    (int)resp.brokers[i].host.len, resp.brokers[i].host.p);
		md->port = resp.brokers[i].port;
	}
	if (md->leader >= 0 && md->host[0] == '\0')
		md->leader = -1;
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

/* Connects k->conn to the partition leader (before deadline). */
static int connect_leader(struct mk *k, int64_t deadline, char *err,
    size_t errlen)
{
	for (;;) {
		struct topic_md md;
		struct kblock *c = connect_any(k, err, errlen);

		if (c != NULL) {
			int rc = metadata(k, c, &md, err, errlen);
			kblock_free(c);
			if (rc == 0 && !md.exists)
				seterr(err, errlen, "topic %s does not exist "
				    "(deleted while mirrord runs?)", k->topic);
			else if (rc == 0 && md.leader < 0)
				seterr(err, errlen, "topic %s partition 0 has no "
				    "leader", k->topic);
			else if (rc == 0) {
				k->conn = kblock_connect(&k->kcfg, md.host, md.port,
				    k->timeout_ms, err, errlen);
				if (k->conn != NULL) {
					k->leader_id = md.leader;
					seterr(k->leader_host,
					    sizeof(k->leader_host), "%s", md.host);
					k->leader_port = md.port;
					return 0;
				}
			}
		}
		if (clock_mono_ms() + BACKOFF_MS >= deadline)
			return -1;
		sleep_ms(BACKOFF_MS);
	}
}

/* ---- the topic ---------------------------------------------------------- */

static int create_topic(struct mk *k, struct kblock *c, int nbrokers,
    char *err, size_t errlen)
{
	struct kp_create_topics_request req;
	struct kp_create_topics_response resp;
	struct kp_create_topics_request_creatable_topic t;
	struct kp_create_topics_request_creatable_topic_config cf[6];
	char isr[16], mmb[24];
	int rf = k->want_rf, mi = k->want_isr;
	struct karena *a = karena_new(1 << 20);
	uint8_t *frame = NULL;
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	if (nbrokers > 0 && rf > nbrokers) {
		log_warnx("metadata log: topic %s: storage.kafka.replication_factor "
		    "%d capped to %d, the number of brokers in the destination "
		    "cluster", k->topic, rf, nbrokers);
		rf = nbrokers;
	}
	if (mi > rf) {
		log_warnx("metadata log: topic %s: storage.kafka.min_insync_replicas "
		    "%d capped to %d, the replication factor", k->topic, mi, rf);
		mi = rf;
	}
	seterr(isr, sizeof(isr), "%d", mi);
	seterr(mmb, sizeof(mmb), "%zu", k->batch_max);
	cf[0] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("cleanup.policy"), kstr_c("delete") };
	cf[1] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("retention.ms"), kstr_c("-1") };
	cf[2] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("retention.bytes"), kstr_c("-1") };
	cf[3] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("min.insync.replicas"), kstr_c(isr) };
	cf[4] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("unclean.leader.election.enable"), kstr_c("false") };
	cf[5] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("max.message.bytes"), kstr_c(mmb) };
	kp_create_topics_request_init(&req);
	kp_create_topics_request_creatable_topic_init(&t);
	t.name = kstr_c(k->topic);
	t.num_partitions = 1;
	t.replication_factor = (int16_t)rf;
	t.configs = cf;
	t.configs_n = (int32_t)ARRAY_SIZE(cf);
	req.topics = &t;
	req.topics_n = 1;
	req.timeout_ms = k->timeout_ms;
	frame = kblock_call(c, KP_API_CREATE_TOPICS, 7, &req, &resp, a,
	    k->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	for (int32_t i = 0; i < resp.topics_n; i++) {
		int16_t e = resp.topics[i].error_code;
		struct kstr m = resp.topics[i].error_message;

		if (e == 0 || e == KERR_TOPIC_ALREADY_EXISTS)
			continue;
		seterr(err, errlen, "cannot create topic %s (1 partition, "
		    "replication factor %d, min.insync.replicas %d): %s: %.*s",
		    k->topic, rf, mi, kerr_name(e), m.len > 0 ? (int)m.len : 0,
		    m.len > 0 ? m.p : "");
		goto out;
	}
	log_info("metadata log: created topic %s (1 partition, replication "
	    "factor %d, min.insync.replicas %d, acks=all, unclean leader "
	    "election off, infinite retention)", k->topic, rf, mi);
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

static int kstr_is(struct kstr s, const char *c)
{
	return s.len == (int32_t)strlen(c) && memcmp(s.p, c, (size_t)s.len) == 0;
}

/* A small decimal config value; -1 if it is not one. */
static int kstr_int(struct kstr s)
{
	int v = 0;

	if (s.len <= 0 || s.len > 9)
		return -1;
	for (int32_t i = 0; i < s.len; i++) {
		if (s.p[i] < '0' || s.p[i] > '9')
			return -1;
		v = v * 10 + (s.p[i] - '0');
	}
	return v;
}

/* Refuses a topic whose settings could lose or reorder records. */
static int check_topic(struct mk *k, struct kblock *c, const struct topic_md *md,
    char *err, size_t errlen)
{
	struct kp_describe_configs_request req;
	struct kp_describe_configs_response resp;
	struct kp_describe_configs_request_describe_configs_resource res;
	struct karena *a = karena_new(1 << 20);
	uint8_t *frame = NULL;
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	if (md->partitions != 1) {
		seterr(err, errlen, "topic %s has %d partitions; the metadata log "
		    "needs exactly 1 (delete it or set storage.kafka.topic)",
		    k->topic, md->partitions);
		goto out;
	}
	if (md->rf < k->want_rf && md->rf < md->nbrokers)
		log_warnx("metadata log: topic %s has replication factor %d, "
		    "storage.kafka.replication_factor wants %d", k->topic,
		    md->rf, k->want_rf);
	kp_describe_configs_request_init(&req);
	kp_describe_configs_request_describe_configs_resource_init(&res);
	res.resource_type = 2;          /* TOPIC */
	res.resource_name = kstr_c(k->topic);
	res.configuration_keys_n = -1;
	req.resources = &res;
	req.resources_n = 1;
	frame = kblock_call(c, KP_API_DESCRIBE_CONFIGS, 4, &req, &resp, a,
	    k->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	for (int32_t i = 0; i < resp.results_n; i++) {
		struct kp_describe_configs_response_describe_configs_result *r =
		    &resp.results[i];
		if (r->error_code != 0) {
			seterr(err, errlen, "cannot read the configs of topic %s: "
			    "%s", k->topic, kerr_name(r->error_code));
			goto out;
		}
		for (int32_t j = 0; j < r->configs_n; j++) {
			struct kstr n = r->configs[j].name, v = r->configs[j].value;
			const char *bad = NULL;

			if (kstr_is(n, "cleanup.policy") && !kstr_is(v, "delete"))
				bad = "must be delete (compaction would drop "
				    "records of the log)";
			else if ((kstr_is(n, "retention.ms") ||
			    kstr_is(n, "retention.bytes")) && !kstr_is(v, "-1"))
				bad = "must be -1 (the broker would delete "
				    "records of the log)";
			else if (kstr_is(n, "unclean.leader.election.enable") &&
			    !kstr_is(v, "false"))
				bad = "must be false (an unclean leader could "
				    "lose acknowledged records)";
			else if (kstr_is(n, "min.insync.replicas") && v.len > 0 &&
			    kstr_int(v) < MIN(k->want_isr, md->rf))
				log_warnx("metadata log: topic %s has "
				    "min.insync.replicas=%.*s, "
				    "storage.kafka.min_insync_replicas wants %d",
				    k->topic, (int)v.len, v.p, k->want_isr);
			if (bad != NULL) {
				seterr(err, errlen, "topic %s: %.*s=%.*s %s", k->topic,
				    (int)n.len, n.p, v.len > 0 ? (int)v.len : 0,
				    v.len > 0 ? v.p : "", bad);
				goto out;
			}
		}
	}
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

/* Creates or checks the topic, then connects to its leader. */
static int ensure_topic(struct mk *k, char *err, size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	struct kblock *c = connect_any(k, err, errlen);
	struct topic_md md;
	int rc = -1;

	if (c == NULL)
		return -1;
	if (metadata(k, c, &md, err, errlen) != 0)
		goto out;
	k->nbrokers = md.nbrokers;
	if (!md.exists) {
		if (create_topic(k, c, md.nbrokers, err, errlen) != 0)
			goto out;
	} else if (check_topic(k, c, &md, err, errlen) != 0) {
		goto out;
	}
	rc = connect_leader(k, deadline, err, errlen);
out:
	kblock_free(c);
	return rc;
}

/* ---- offsets and reading ----------------------------------------------- */

static int list_offset(struct mk *k, int64_t ts, int64_t *out, char *err,
    size_t errlen)
{
	struct kp_list_offsets_request req;
	struct kp_list_offsets_response resp;
	struct kp_list_offsets_request_list_offsets_topic t;
	struct kp_list_offsets_request_list_offsets_partition p;
	struct karena *a = karena_new(1 << 16);
	uint8_t *frame = NULL;
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	kp_list_offsets_request_init(&req);
	kp_list_offsets_request_list_offsets_partition_init(&p);
	p.partition_index = 0;
	p.current_leader_epoch = -1;
	p.timestamp = ts;
	kp_list_offsets_request_list_offsets_topic_init(&t);
	t.name = kstr_c(k->topic);
	t.partitions = &p;
	t.partitions_n = 1;
	req.replica_id = -1;
	req.topics = &t;
	req.topics_n = 1;
	frame = kblock_call(k->conn, KP_API_LIST_OFFSETS, 7, &req, &resp, a,
	    k->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	if (resp.topics_n != 1 || resp.topics[0].partitions_n != 1) {
		seterr(err, errlen, "%s: ListOffsets answer without partition "
		    "%s-0", kblock_addr(k->conn), k->topic);
		goto out;
	}
	if (resp.topics[0].partitions[0].error_code != 0) {
		seterr(err, errlen, "%s: ListOffsets %s-0: %s",
		    kblock_addr(k->conn), k->topic,
		    kerr_name(resp.topics[0].partitions[0].error_code));
		goto out;
	}
	*out = resp.topics[0].partitions[0].offset;
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

/* What read_range() hands its callback for each record. */
struct krec {
	int64_t offset;
	int64_t ts;             /* the batch's max timestamp */
	int64_t pid;
	int16_t epoch;
	int snapshot;
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
};
typedef int (*krec_fn)(void *arg, const struct krec *r, char *err,
    size_t errlen);

struct range_ctx {
	struct mk *k;
	const struct batch *b;
	int64_t lo, hi, next;
	krec_fn cb;
	void *arg;
	char *err;
	size_t errlen;
	int failed;
};

static int one_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	struct krec *r = arg;

	(void)off;
	r->type = type;
	r->p = p;
	r->len = len;
	return 0;
}

static int range_rec(void *arg, const struct mlog_kafka_rec *kr)
{
	struct range_ctx *rc = arg;
	struct mlog_scan_result res;
	struct krec r = { .offset = kr->offset, .ts = rc->b->max_timestamp,
	    .pid = rc->b->producer_id,
	    .epoch = rc->b->producer_epoch, .snapshot = kr->snapshot };

	if (kr->offset < rc->lo || kr->offset >= rc->hi)
		return 0;
	mlog_scan(kr->value, kr->value_len, rc->k->base.opts.max_record,
	    one_frame, &r, &res);
	if (res.end != MLOG_SCAN_CLEAN || res.nrec != 1) {
		seterr(rc->err, rc->errlen, "topic %s partition 0 offset %" PRId64
		    ": the record is not one intact metadata frame (%s); "
		    "refusing to start", rc->k->topic, kr->offset,
		    res.end != MLOG_SCAN_CLEAN ? res.why : "several frames");
		rc->failed = 1;
		return -1;
	}
	if (rc->cb(rc->arg, &r, rc->err, rc->errlen) != 0) {
		rc->failed = 1;
		return -1;
	}
	return 0;
}

/* Reads every record with an offset in [lo, hi) in order. */
static int read_range(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen)
{
	int64_t o = lo;
	struct karena *a = karena_new(1 << 20);
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	while (o < hi) {
		struct kp_fetch_request req;
		struct kp_fetch_response resp;
		struct kp_fetch_request_fetch_topic t;
		struct kp_fetch_request_fetch_partition p;
		struct kp_fetch_response_partition_data *pd;
		struct batch_iter it;
		struct batch b;
		uint8_t *frame;
		int64_t before = o;
		char e2[256];

		kp_fetch_request_init(&req);
		kp_fetch_request_fetch_partition_init(&p);
		p.partition = 0;
		p.current_leader_epoch = -1;
		p.fetch_offset = o;
		p.last_fetched_epoch = -1;
		p.log_start_offset = -1;
		p.partition_max_bytes = FETCH_MAX_BYTES;
		kp_fetch_request_fetch_topic_init(&t);
		t.topic = kstr_c(k->topic);
		t.partitions = &p;
		t.partitions_n = 1;
		req.replica_id = -1;
		req.max_wait_ms = 0;
		req.min_bytes = 1;
		req.max_bytes = FETCH_MAX_BYTES;
		req.isolation_level = 0;
		req.session_id = 0;
		req.session_epoch = -1;
		req.topics = &t;
		req.topics_n = 1;
		req.forgotten_topics_data_n = 0;
		req.rack_id = kstr_c("");
		karena_reset(a);
		frame = kblock_call(k->conn, KP_API_FETCH, 12, &req, &resp, a,
		    k->timeout_ms, err, errlen);
		if (frame == NULL)
			goto out;
		if (resp.responses_n != 1 || resp.responses[0].partitions_n != 1) {
			seterr(err, errlen, "%s: Fetch answer without partition "
			    "%s-0", kblock_addr(k->conn), k->topic);
			free(frame);
			goto out;
		}
		pd = &resp.responses[0].partitions[0];
		if (pd->error_code != 0) {
			seterr(err, errlen, "%s: Fetch %s-0 at offset %" PRId64
			    ": %s", kblock_addr(k->conn), k->topic, o,
			    kerr_name(pd->error_code));
			free(frame);
			goto out;
		}
		batch_iter_init(&it, pd->records.p, pd->records.len > 0 ?
		    (size_t)pd->records.len : 0);
		for (;;) {
			int r = batch_iter_next(&it, &b, e2, sizeof(e2));
			struct range_ctx rc2 = { .k = k, .b = &b, .lo = o,
			    .hi = hi, .cb = cb, .arg = arg, .err = err,
			    .errlen = errlen };

			if (r == BATCH_END || r == BATCH_INCOMPLETE)
				break;
			if (r == BATCH_ERROR || batch_verify_crc(&b, e2,
			    sizeof(e2)) != 0) {
				seterr(err, errlen, "topic %s partition 0: %s; "
				    "refusing to start", k->topic, e2);
				free(frame);
				goto out;
			}
			if (batch_next_offset(&b) <= o)
				continue;
			if (batch_is_control(&b)) {
				o = batch_next_offset(&b);
				continue;
			}
			if (b.record_count != b.last_offset_delta + 1) {
				seterr(err, errlen, "topic %s partition 0: batch at "
				    "offset %" PRId64 " holds %d records for %d "
				    "offsets: not written by mirrord; refusing to "
				    "start", k->topic, b.base_offset,
				    b.record_count, b.last_offset_delta + 1);
				free(frame);
				goto out;
			}
			if (batch_codec(&b) != BATCH_CODEC_NONE) {
				seterr(err, errlen, "topic %s partition 0: batch at "
				    "offset %" PRId64 " is compressed (%s): not "
				    "written by mirrord; refusing to start",
				    k->topic, b.base_offset,
				    batch_codec_name(batch_codec(&b)));
				free(frame);
				goto out;
			}
			r = mlog_kafka_decode_records(b.base_offset, b.records,
			    b.records_len, b.record_count, range_rec, &rc2, err,
			    errlen);
			if (r != 0) {
				if (r < 0)
					seterr(err, errlen, "topic %s partition 0: "
					    "batch at offset %" PRId64 ": record "
					    "malformed; refusing to start",
					    k->topic, b.base_offset);
				free(frame);
				goto out;
			}
			o = batch_next_offset(&b);
		}
		free(frame);
		if (o == before) {
			seterr(err, errlen, "topic %s partition 0: no record "
			    "readable at offset %" PRId64 " (high watermark %"
			    PRId64 ", want up to %" PRId64 ")", k->topic, o,
			    pd->high_watermark, hi);
			goto out;
		}
	}
	rc = 0;
out:
	karena_free(a);
	return rc;
}

/* ---- producing ----------------------------------------------------------- */

/*
 * Appends one batch (already carrying our producer id, epoch and sequence)
 * with acks=all; resends the same bytes after a transport error, a timeout
 * or a retriable error until the deadline (the sequence makes a resend of a
 * batch that did land answer with its first offset).  *base gets the offset
 * of its first record.  A refusal of our epoch breaks the log (fenced).
 */
static int produce(struct mk *k, const uint8_t *batchp, size_t blen,
    int64_t *base, char *err, size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	int uncertain = 0;
	char last[512] = "no attempt";
	struct karena *a = karena_new(1 << 16);
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	for (;;) {
		struct kp_produce_request req;
		struct kp_produce_response resp;
		struct kp_produce_request_topic_produce_data t;
		struct kp_produce_request_partition_produce_data p;
		uint8_t *frame;
		int16_t e;

		if (k->conn == NULL && connect_leader(k, deadline, last,
		    sizeof(last)) != 0)
			goto give_up;
		kp_produce_request_init(&req);
		kp_produce_request_partition_produce_data_init(&p);
		p.index = 0;
		p.records = (struct kbytes){ batchp, (int32_t)blen };
		kp_produce_request_topic_produce_data_init(&t);
		t.name = kstr_c(k->topic);
		t.partition_data = &p;
		t.partition_data_n = 1;
		req.transactional_id = (struct kstr){ NULL, -1 };
		req.acks = -1;
		req.timeout_ms = k->timeout_ms;
		req.topic_data = &t;
		req.topic_data_n = 1;
		karena_reset(a);
		frame = kblock_call(k->conn, KP_API_PRODUCE, 9, &req, &resp, a,
		    (int)MAX(1, deadline - clock_mono_ms()), last, sizeof(last));
		if (frame == NULL) {
			uncertain = 1;
			drop_conn(k);
			goto retry;
		}
		if (resp.responses_n != 1 ||
		    resp.responses[0].partition_responses_n != 1) {
			seterr(last, sizeof(last), "Produce answer without "
			    "partition %s-0", k->topic);
			free(frame);
			uncertain = 1;
			drop_conn(k);
			goto retry;
		}
		e = resp.responses[0].partition_responses[0].error_code;
		*base = resp.responses[0].partition_responses[0].base_offset;
		free(frame);
		if (e == 0 || e == KERR_DUPLICATE_SEQUENCE_NUMBER) {
			rc = 0;
			goto out;
		}
		if (e == KERR_INVALID_PRODUCER_EPOCH || e == KERR_PRODUCER_FENCED) {
			char why[600];

			seterr(why, sizeof(why), "fenced: another mirrord became "
			    "the writer of topic %s (the leader refused producer "
			    "id %" PRId64 " epoch %d with %s); this instance no "
			    "longer writes metadata: restart it to follow the "
			    "new writer", k->topic, k->pid, k->epoch,
			    kerr_name(e));
			set_broken(k, why);
			seterr(err, errlen, "metadata log %s", why);
			goto out;
		}
		seterr(last, sizeof(last), "%s-0 leader %s: %s", k->topic,
		    kblock_addr(k->conn), kerr_name(e));
		if (e == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER ||
		    e == KERR_UNKNOWN_PRODUCER_ID) {
			char why[800];

			/* Our sequence and the leader's disagree: what it
			 * holds of ours is not what we think. */
			seterr(why, sizeof(why), "topic %s: the leader refused "
			    "producer id %" PRId64 " epoch %d sequence %d: %s; "
			    "refusing further writes until restart", k->topic,
			    k->pid, k->epoch, k->seq, last);
			set_broken(k, why);
			seterr(err, errlen, "%s", why);
			goto out;
		}
		if (!kerr_retriable(e) && e != KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND) {
			if (uncertain)
				goto give_up;
			seterr(err, errlen, "topic %s: the leader refused the "
			    "write: %s", k->topic, last);
			goto out;
		}
		if (e == KERR_NOT_LEADER_OR_FOLLOWER ||
		    e == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
		    e == KERR_LEADER_NOT_AVAILABLE)
			drop_conn(k);
		if (e == KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
		    e == KERR_REQUEST_TIMED_OUT)
			uncertain = 1;
retry:
		if (clock_mono_ms() + BACKOFF_MS >= deadline)
			goto give_up;
		sleep_ms(BACKOFF_MS);
	}
give_up:
	if (uncertain) {
		char why[800];

		seterr(why, sizeof(why), "topic %s: a write's outcome is "
		    "unknown after storage.kafka.timeout_ms (%d ms): %s; "
		    "refusing further writes until restart", k->topic,
		    k->timeout_ms, last);
		set_broken(k, why);
		seterr(err, errlen, "%s", why);
	} else {
		seterr(err, errlen, "topic %s: no write within "
		    "storage.kafka.timeout_ms (%d ms): %s", k->topic,
		    k->timeout_ms, last);
	}
out:
	karena_free(a);
	return rc;
}

/* Produces frames[0..len) as one batch with the next sequence. */
static int produce_frames(struct mk *k, const uint8_t *frames, size_t len,
    uint32_t count, int snapshot, int64_t *base, char *err, size_t errlen)
{
	size_t blen;
	uint8_t *b;
	int rc;

	b = mlog_kafka_encode_batch(frames, len, snapshot, k->pid, k->epoch,
	    k->seq, clock_wall_ms(), &blen, err, errlen);
	if (b == NULL)
		return -1;
	if (blen > k->batch_max) {
		seterr(err, errlen, "one write of %u records is %zu bytes, over "
		    "the %zu bytes a batch of topic %s may hold", count, blen,
		    k->batch_max, k->topic);
		free(b);
		return -1;
	}
	rc = produce(k, b, blen, base, err, errlen);
	free(b);
	if (rc == 0)
		k->seq = (int32_t)(((int64_t)k->seq + count) & INT32_MAX);
	return rc;
}

/* ---- becoming the writer -------------------------------------------------- */

static int init_producer(struct mk *k, char *err, size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	struct karena *a = karena_new(1 << 16);
	char last[512] = "";
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	for (;;) {
		struct kp_find_coordinator_request fr;
		struct kp_find_coordinator_response fresp;
		struct kp_init_producer_id_request ir;
		struct kp_init_producer_id_response iresp;
		struct kstr key = kstr_c(k->txn_id);
		struct kblock *c = connect_any(k, last, sizeof(last)), *coord = NULL;
		uint8_t *frame = NULL;
		char host[256];
		int port;
		int16_t e = -1;

		if (c == NULL)
			goto retry;
		kp_find_coordinator_request_init(&fr);
		fr.key_type = 1;                /* transaction */
		fr.coordinator_keys = &key;
		fr.coordinator_keys_n = 1;
		karena_reset(a);
		frame = kblock_call(c, KP_API_FIND_COORDINATOR, 4, &fr, &fresp, a,
		    k->timeout_ms, last, sizeof(last));
		kblock_free(c);
		if (frame == NULL)
			goto retry;
		if (fresp.coordinators_n != 1 ||
		    fresp.coordinators[0].error_code != 0) {
			seterr(last, sizeof(last), "FindCoordinator(%s): %s",
			    k->txn_id, fresp.coordinators_n == 1 ? kerr_name(
			    fresp.coordinators[0].error_code) : "no answer");
			free(frame);
			goto retry;
		}
		seterr(host, sizeof(host), "%.*s",
		    (int)fresp.coordinators[0].host.len,
		    fresp.coordinators[0].host.p);
		port = fresp.coordinators[0].port;
		free(frame);
		coord = kblock_connect(&k->kcfg, host, port, k->timeout_ms, last,
		    sizeof(last));
		if (coord == NULL)
			goto retry;
		kp_init_producer_id_request_init(&ir);
		ir.transactional_id = kstr_c(k->txn_id);
		ir.transaction_timeout_ms = TXN_TIMEOUT_MS;
		ir.producer_id = -1;
		ir.producer_epoch = -1;
		karena_reset(a);
		frame = kblock_call(coord, KP_API_INIT_PRODUCER_ID, 4, &ir, &iresp,
		    a, k->timeout_ms, last, sizeof(last));
		kblock_free(coord);
		if (frame == NULL)
			goto retry;
		e = iresp.error_code;
		if (e == 0) {
			k->pid = iresp.producer_id;
			k->epoch = iresp.producer_epoch;
			k->seq = 0;
			free(frame);
			rc = 0;
			break;
		}
		free(frame);
		seterr(last, sizeof(last), "InitProducerId(%s) at %s:%d: %s",
		    k->txn_id, host, port, kerr_name(e));
		if (!kerr_retriable(e) && e != KERR_CONCURRENT_TRANSACTIONS)
			break;
retry:
		if (clock_mono_ms() + BACKOFF_MS >= deadline)
			break;
		sleep_ms(BACKOFF_MS);
	}
	if (rc != 0)
		seterr(err, errlen, "cannot become the writer of topic %s: %s",
		    k->topic, last);
	karena_free(a);
	return rc;
}

static int claim(struct mk *k, int64_t *off, char *err, size_t errlen)
{
	uint8_t f[MLOG_FRAME_HDR + CLAIM_LEN], *p = f + MLOG_FRAME_HDR;

	be64_store(p, (uint64_t)k->pid);
	be16_store(p + 8, (uint16_t)k->epoch);
	be64_store(p + 10, (uint64_t)clock_wall_ms());
	be64_store(p + 18, (uint64_t)getpid());
	mlog_frame_header(f, MLOG_T_CLAIM, p, CLAIM_LEN);
	return produce_frames(k, f, sizeof(f), 1, 0, off, err, errlen);
}

/* ---- open: find the newest snapshot, replay -------------------------------- */

struct find_snap {
	int64_t begin;      /* newest SNAPEND's begin offset, -1 none */
	int64_t end_off;
};

static int find_cb(void *arg, const struct krec *r, char *err, size_t errlen)
{
	struct find_snap *fs = arg;

	(void)err;
	(void)errlen;
	if (r->snapshot && r->type == MLOG_T_SNAPEND && r->len == SNAPEND_LEN) {
		fs->begin = (int64_t)be64_load(r->p + 8);
		fs->end_off = r->offset;
	}
	return 0;
}

/* The offset of the newest complete snapshot in [start, end), or -1. */
static int find_snapshot(struct mk *k, int64_t start, int64_t end,
    int64_t *snap, char *err, size_t errlen)
{
	int64_t hi = end, w = SCAN_WINDOW;

	*snap = -1;
	while (hi > start) {
		int64_t lo = hi - w < start ? start : hi - w;
		struct find_snap fs = { .begin = -1 };

		if (read_range(k, lo, hi, find_cb, &fs, err, errlen) != 0)
			return -1;
		if (fs.begin >= start && fs.begin < fs.end_off) {
			*snap = fs.begin;
			return 0;
		}
		hi = lo;
		w = w > INT64_MAX / 4 ? INT64_MAX : w * 4;
	}
	return 0;
}

struct replay {
	struct mk *k;
	mlog_apply_fn apply;
	void *arg;
	int64_t snap;            /* offset of the snapshot replayed, -1 none */
	int in_snap, snap_done;
	uint64_t snap_body;
	int64_t owner_pid;       /* writer of the latest claim, -1 none yet */
	int16_t owner_epoch;
	uint64_t applied, since_snap, bytes_since_snap, skipped;
	int64_t snap_ts;
	char file[300];
};

static int replay_cb(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct replay *rp = arg;
	struct mk *k = rp->k;

	if (r->snapshot) {
		if (r->offset == rp->snap) {
			if (r->type != MLOG_T_SNAPSHOT) {
				seterr(err, errlen, "topic %s offset %" PRId64 ": "
				    "the snapshot starts with a record of type "
				    "0x%04x", k->topic, r->offset, r->type);
				return -1;
			}
			rp->in_snap = 1;
			rp->snap_ts = r->ts;
			rp->owner_pid = r->pid;
			rp->owner_epoch = r->epoch;
			return 0;
		}
		if (!rp->in_snap)
			return 0;   /* an older or unfinished snapshot */
		if (r->pid != rp->owner_pid || r->epoch != rp->owner_epoch) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": snapshot "
			    "record of producer %" PRId64 " epoch %d inside the "
			    "snapshot of producer %" PRId64 " epoch %d", k->topic,
			    r->offset, r->pid, r->epoch, rp->owner_pid,
			    rp->owner_epoch);
			return -1;
		}
		if (r->type == MLOG_T_SNAPEND) {
			if (r->len != SNAPEND_LEN || be64_load(r->p) != rp->snap_body) {
				seterr(err, errlen, "topic %s offset %" PRId64 ": "
				    "snapshot end counts %" PRIu64 " records, "
				    "the snapshot holds %" PRIu64, k->topic,
				    r->offset, r->len == SNAPEND_LEN ?
				    be64_load(r->p) : 0, rp->snap_body);
				return -1;
			}
			rp->in_snap = 0;
			rp->snap_done = 1;
			return 0;
		}
		if (r->type >= MLOG_TYPE_RESERVED) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": framing "
			    "record 0x%04x inside a snapshot", k->topic,
			    r->offset, r->type);
			return -1;
		}
		struct mlog_rec rec = { .type = r->type, .len = r->len,
		    .p = r->p, .off = (uint64_t)r->offset, .file = rp->file,
		    .in_snapshot = 1 };
		if (rp->apply != NULL && rp->apply(rp->arg, &rec, err,
		    errlen) != 0)
			return -1;
		rp->snap_body++;
		rp->applied++;
		return 0;
	}
	if (rp->in_snap) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": log record "
		    "inside the snapshot that starts at offset %" PRId64,
		    k->topic, r->offset, rp->snap);
		return -1;
	}
	if (r->type == MLOG_T_CLAIM) {
		if (r->len != CLAIM_LEN || (int64_t)be64_load(r->p) != r->pid ||
		    (int16_t)be16_load(r->p + 8) != r->epoch) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": claim "
			    "record does not name the producer that wrote it",
			    k->topic, r->offset);
			return -1;
		}
		rp->owner_pid = r->pid;
		rp->owner_epoch = r->epoch;
		return 0;
	}
	if (rp->owner_pid < 0) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": record before "
		    "any writer's claim; refusing to start", k->topic,
		    r->offset);
		return -1;
	}
	if (r->pid != rp->owner_pid || r->epoch != rp->owner_epoch) {
		log_warnx("metadata log: topic %s offset %" PRId64 ": skipping a "
		    "record of producer %" PRId64 " epoch %d written after the "
		    "claim of producer %" PRId64 " epoch %d (a deposed writer's "
		    "late write)", k->topic, r->offset, r->pid, r->epoch,
		    rp->owner_pid, rp->owner_epoch);
		rp->skipped++;
		return 0;
	}
	if (r->type >= MLOG_TYPE_RESERVED) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": unexpected "
		    "framing record 0x%04x", k->topic, r->offset, r->type);
		return -1;
	}
	struct mlog_rec rec = { .type = r->type, .len = r->len, .p = r->p,
	    .off = (uint64_t)r->offset, .file = rp->file, .in_snapshot = 0 };
	if (rp->apply != NULL && rp->apply(rp->arg, &rec, err, errlen) != 0)
		return -1;
	rp->applied++;
	rp->since_snap++;
	rp->bytes_since_snap += MLOG_FRAME_HDR + r->len;
	return 0;
}

/* Migration: anything but claims in [start, end) means a log is there. */
struct emptiness {
	uint64_t state;
	int64_t first;
};

static int empty_cb(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct emptiness *em = arg;

	(void)err;
	(void)errlen;
	if (r->type != MLOG_T_CLAIM) {
		if (em->state++ == 0)
			em->first = r->offset;
	}
	return 0;
}

static int check_empty(struct mk *k, char *err, size_t errlen)
{
	int64_t start, end;
	struct emptiness em = { 0, -1 };

	if (list_offset(k, -2, &start, err, errlen) != 0 ||
	    list_offset(k, -1, &end, err, errlen) != 0)
		return -1;
	if (start < end && read_range(k, start, end, empty_cb, &em, err,
	    errlen) != 0)
		return -1;
	if (em.state > 0 || start > 0) {
		seterr(err, errlen, "topic %s already holds a metadata log "
		    "(%" PRIu64 " records from offset %" PRId64 ", log end %"
		    PRId64 "); refusing to write over it", k->topic, em.state,
		    em.first >= 0 ? em.first : start, end);
		return -1;
	}
	return 0;
}

static int kafka_open(struct mlog *ml, mlog_apply_fn apply, void *arg,
    char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct replay rp = { .k = k, .apply = apply, .arg = arg, .snap = -1,
	    .owner_pid = -1 };
	int64_t claim_off, start, end, from;

	if (ensure_topic(k, err, errlen) != 0)
		return -1;
	if (k->require_empty && check_empty(k, err, errlen) != 0)
		return -1;
	if (init_producer(k, err, errlen) != 0)
		return -1;
	/* Write first: from here on the leader refuses older epochs. */
	if (claim(k, &claim_off, err, errlen) != 0)
		return -1;
	log_info("metadata log: claimed topic %s at offset %" PRId64 " as "
	    "producer id %" PRId64 " epoch %d (transactional id %s)", k->topic,
	    claim_off, k->pid, k->epoch, k->txn_id);
	/* ... then read to the end, so that every write of an earlier writer
	 * that landed before the claim is replayed. */
	if (list_offset(k, -2, &start, err, errlen) != 0 ||
	    list_offset(k, -1, &end, err, errlen) != 0)
		return -1;
	if (end <= claim_off) {
		seterr(err, errlen, "topic %s: log end %" PRId64 " is not past "
		    "our claim at offset %" PRId64, k->topic, end, claim_off);
		return -1;
	}
	if (find_snapshot(k, start, end, &rp.snap, err, errlen) != 0)
		return -1;
	from = rp.snap >= 0 ? rp.snap : start;
	seterr(rp.file, sizeof(rp.file), "topic %s", k->topic);
	if (read_range(k, from, end, replay_cb, &rp, err, errlen) != 0)
		return -1;
	if (rp.snap >= 0 && !rp.snap_done) {
		seterr(err, errlen, "topic %s: the snapshot at offset %" PRId64
		    " ends before its end marker", k->topic, rp.snap);
		return -1;
	}
	if (rp.owner_pid != k->pid || rp.owner_epoch != k->epoch) {
		char why[600];

		seterr(why, sizeof(why), "fenced: producer %" PRId64 " epoch %d "
		    "claimed topic %s after us (producer %" PRId64 " epoch %d) "
		    "while we were opening", rp.owner_pid, rp.owner_epoch,
		    k->topic, k->pid, k->epoch);
		seterr(err, errlen, "metadata log %s", why);
		return -1;
	}
	k->st.records = rp.applied;
	k->st.records_since_snapshot = rp.since_snap;
	k->st.bytes_since_snapshot = rp.bytes_since_snap;
	k->st.bytes = rp.bytes_since_snap;
	if (rp.snap >= 0)
		k->st.snapshot_wall_ms = rp.snap_ts;
	if (rp.skipped > 0)
		log_warnx("metadata log: topic %s: %" PRIu64 " late record%s of "
		    "deposed writers skipped", k->topic, rp.skipped,
		    rp.skipped == 1 ? "" : "s");
	log_info("metadata log: topic %s replayed from offset %" PRId64 " (%s) "
	    "to %" PRId64 ": %" PRIu64 " records", k->topic, from,
	    rp.snap >= 0 ? "snapshot" : "log start", end, rp.applied);
	return 0;
}

/* ---- append, sync, compact ------------------------------------------------- */

static int kafka_append(struct mlog *ml, uint16_t type, const void *p,
    size_t len, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	uint8_t hdr[MLOG_FRAME_HDR];

	if (check_usable(k, err, errlen) != 0)
		return -1;
	mlog_frame_header(hdr, type, p, (uint32_t)len);
	kw_raw(&k->pend, hdr, sizeof(hdr));
	if (len > 0)
		kw_raw(&k->pend, p, len);
	if (k->pend.err) {
		seterr(err, errlen, "pending metadata records are over %zu bytes "
		    "(one batch of topic %s)", k->batch_max, k->topic);
		return -1;
	}
	k->npend++;
	k->st.pending = k->npend;
	return 0;
}

static void kafka_discard(struct mlog *ml)
{
	struct mk *k = (struct mk *)ml;

	kw_reset(&k->pend);
	k->npend = 0;
	k->st.pending = 0;
}

static int kafka_sync(struct mlog *ml, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	int64_t t0, base;
	size_t bytes = k->pend.len;
	uint32_t n = k->npend;
	int rc;

	if (check_usable(k, err, errlen) != 0) {
		kafka_discard(ml);
		return -1;
	}
	if (n == 0)
		return 0;
	t0 = clock_mono_ms();
	rc = produce_frames(k, k->pend.buf, k->pend.len, n, 0, &base, err,
	    errlen);
	kafka_discard(ml);
	if (rc != 0)
		return -1;
	k->st.last_fsync_us = (clock_mono_ms() - t0) * 1000;
	k->st.syncs++;
	k->st.records += n;
	k->st.records_since_snapshot += n;
	k->st.bytes_since_snapshot += bytes;
	k->st.bytes += bytes;
	return 0;
}

struct ksink {
	struct mlog_sink base;
	struct mk *k;
	struct kw buf;
	uint32_t n;
	int64_t begin;          /* offset of the MLOG_T_SNAPSHOT record */
	char err[768];
};

static int ksink_flush(struct ksink *s)
{
	int64_t base;

	if (s->n == 0)
		return 0;
	if (produce_frames(s->k, s->buf.buf, s->buf.len, s->n, 1, &base, s->err,
	    sizeof(s->err)) != 0)
		return -1;
	if (s->begin < 0)
		s->begin = base;
	kw_reset(&s->buf);
	s->n = 0;
	return 0;
}

static int ksink_frame(struct ksink *s, uint16_t type, const void *p,
    size_t len)
{
	uint8_t hdr[MLOG_FRAME_HDR];

	if (len > s->k->base.opts.max_record) {
		seterr(s->err, sizeof(s->err), "snapshot record of type 0x%04x "
		    "is %zu bytes, over the %u-byte maximum", type, len,
		    s->k->base.opts.max_record);
		return -1;
	}
	/* Batches of about half the topic's limit; one big record alone. */
	if (s->n > 0 && s->buf.len + MLOG_FRAME_HDR + len > s->k->batch_max / 2 &&
	    ksink_flush(s) != 0)
		return -1;
	mlog_frame_header(hdr, type, p, (uint32_t)len);
	kw_raw(&s->buf, hdr, sizeof(hdr));
	if (len > 0)
		kw_raw(&s->buf, p, len);
	s->n++;
	return s->buf.err ? -1 : 0;
}

static int ksink_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	return ksink_frame((struct ksink *)sink, type, p, len);
}

/*
 * Moves the log start offset up to the newest snapshot (DeleteRecords),
 * so the topic holds one snapshot and the log after it.  Safe against a
 * newer writer: it trims only below a snapshot whose end marker was
 * acknowledged, so before any later claim, and a newer writer replays
 * from the newest complete snapshot, which is that one or a later one.
 * A failure costs only space: logged, the log is intact.
 */
static void trim_before(struct mk *k, int64_t off)
{
	struct kp_delete_records_request req;
	struct kp_delete_records_response resp;
	struct kp_delete_records_request_delete_records_topic t;
	struct kp_delete_records_request_delete_records_partition p;
	struct karena *a = karena_new(1 << 16);
	char err[512] = "out of memory";
	uint8_t *frame = NULL;
	int16_t e = -1;

	if (a == NULL || k->conn == NULL)
		goto out;
	kp_delete_records_request_init(&req);
	kp_delete_records_request_delete_records_topic_init(&t);
	kp_delete_records_request_delete_records_partition_init(&p);
	p.partition_index = 0;
	p.offset = off;
	t.name = kstr_c(k->topic);
	t.partitions = &p;
	t.partitions_n = 1;
	req.topics = &t;
	req.topics_n = 1;
	req.timeout_ms = k->timeout_ms;
	frame = kblock_call(k->conn, KP_API_DELETE_RECORDS, 2, &req, &resp, a,
	    k->timeout_ms, err, sizeof(err));
	if (frame == NULL) {
		drop_conn(k);
		goto out;
	}
	if (resp.topics_n == 1 && resp.topics[0].partitions_n == 1)
		e = resp.topics[0].partitions[0].error_code;
	if (e == 0) {
		log_debug("metadata log: topic %s: records before offset %" PRId64
		    " deleted (the newest snapshot starts there)", k->topic, off);
		free(frame);
		karena_free(a);
		return;
	}
	seterr(err, sizeof(err), "%s", e < 0 ? "no answer for the partition" :
	    kerr_name(e));
out:
	log_warnx("metadata log: topic %s: cannot delete the records before "
	    "the snapshot at offset %" PRId64 " (they only take space; the next "
	    "snapshot tries again): %s", k->topic, off, err);
	free(frame);
	karena_free(a);
}

static int kafka_compact(struct mlog *ml, mlog_dump_fn dump, void *arg,
    char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct ksink s = { .base = { .put = ksink_put }, .k = k, .begin = -1 };
	uint8_t hdr[8], end[SNAPEND_LEN];
	int rc = -1;

	if (check_usable(k, err, errlen) != 0 || kafka_sync(ml, err, errlen) != 0)
		return -1;
	if (k->st.records_since_snapshot == 0 && k->st.snapshot_wall_ms >= 0)
		return 0;
	kw_init(&s.buf, k->batch_max + MLOG_FRAME_HDR);
	be32_store(hdr, 0x4d524c47u);   /* "MRLG" */
	be16_store(hdr + 4, 1);
	be16_store(hdr + 6, (uint16_t)k->epoch);
	if (ksink_frame(&s, MLOG_T_SNAPSHOT, hdr, sizeof(hdr)) != 0)
		goto fail;
	/* The first batch fixes the snapshot's offset, which its end names. */
	if (ksink_flush(&s) != 0)
		goto fail;
	if (dump(arg, &s.base) != 0 || s.base.failed)
		goto fail;
	if (ksink_flush(&s) != 0)
		goto fail;
	be64_store(end, s.base.records);
	be64_store(end + 8, (uint64_t)s.begin);
	if (ksink_frame(&s, MLOG_T_SNAPEND, end, sizeof(end)) != 0 ||
	    ksink_flush(&s) != 0)
		goto fail;
	k->st.records_since_snapshot = 0;
	k->st.bytes_since_snapshot = 0;
	k->st.snapshot_wall_ms = clock_wall_ms();
	k->st.compactions++;
	log_info("metadata log: topic %s: snapshot of %" PRIu64 " records at "
	    "offset %" PRId64, k->topic, s.base.records, s.begin);
	trim_before(k, s.begin);
	rc = 0;
	goto out;
fail:
	seterr(err, errlen, "topic %s: snapshot not written: %s", k->topic,
	    s.err[0] ? s.err : "the state could not be written out");
out:
	kw_fini(&s.buf);
	return rc;
}

/* ---- life cycle ------------------------------------------------------------ */

static void kafka_stats(const struct mlog *ml, struct mlog_stats *out)
{
	*out = ((const struct mk *)ml)->st;
}

static void kafka_free(struct mlog *ml)
{
	struct mk *k = (struct mk *)ml;

	drop_conn(k);
	kw_fini(&k->pend);
	kconn_config_fini(&k->kcfg);
	for (size_t i = 0; i < k->nboot; i++)
		free(k->boot_host[i]);
	free(k->boot_host);
	free(k->boot_port);
	free(k->topic);
	free(k);
}

static const struct mlog_ops kafka_ops = {
	.name = "kafka",
	.open = kafka_open,
	.append = kafka_append,
	.sync = kafka_sync,
	.discard = kafka_discard,
	.compact = kafka_compact,
	.stats = kafka_stats,
	.free = kafka_free,
};

static int parse_bootstrap(struct mk *k, const char *list, char *err,
    size_t errlen)
{
	char *copy = strdup(list != NULL ? list : ""), *save = NULL, *tok;
	int rc = 0;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ", ", &save); tok != NULL && rc == 0;
	    tok = strtok_r(NULL, ", ", &save)) {
		char *colon = strrchr(tok, ':'), *end;
		long port;
		char **nh;
		int *np;

		port = colon != NULL ? strtol(colon + 1, &end, 10) : 0;
		if (colon == NULL || colon == tok || *end != '\0' || port <= 0 ||
		    port > 65535) {
			seterr(err, errlen, "bootstrap server \"%s\" is not "
			    "host:port", tok);
			rc = -1;
			break;
		}
		*colon = '\0';
		nh = realloc(k->boot_host, (k->nboot + 1) * sizeof(*nh));
		if (nh != NULL)
			k->boot_host = nh;
		np = realloc(k->boot_port, (k->nboot + 1) * sizeof(*np));
		if (np != NULL)
			k->boot_port = np;
		if (nh == NULL || np == NULL ||
		    (k->boot_host[k->nboot] = strdup(tok)) == NULL) {
			seterr(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		k->boot_port[k->nboot++] = (int)port;
	}
	free(copy);
	if (rc == 0 && k->nboot == 0) {
		seterr(err, errlen, "no bootstrap servers for the metadata log");
		rc = -1;
	}
	return rc;
}

struct mlog *mlog_kafka_new(const struct mlog_opts *opts,
    const struct mlog_kafka_opts *ko, char *err, size_t errlen)
{
	struct mk *k = calloc(1, sizeof(*k));
	char e2[512];

	if (k == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	k->base.ops = &kafka_ops;
	k->base.opts = *opts;
	if (k->base.opts.max_record == 0)
		k->base.opts.max_record = MLOG_MAX_RECORD_DEFAULT;
	k->base.opts.dir = NULL;
	kconn_config_init(&k->kcfg);
	k->st.last_fsync_us = -1;
	k->st.snapshot_wall_ms = -1;
	k->pid = -1;
	k->epoch = -1;
	k->leader_id = -1;
	k->want_rf = ko->replication_factor > 0 ? ko->replication_factor : 3;
	k->want_isr = ko->min_insync_replicas > 0 ? ko->min_insync_replicas : 2;
	k->timeout_ms = ko->timeout_ms > 0 ? ko->timeout_ms : 15000;
	k->require_empty = ko->require_empty;
	/* One record of the largest size plus room for the rest of a write. */
	k->batch_max = (size_t)k->base.opts.max_record + (1u << 20);
	kw_init(&k->pend, k->batch_max - 4096);
	k->topic = strdup(ko->topic != NULL && ko->topic[0] != '\0' ? ko->topic :
	    MLOG_KAFKA_TOPIC_DEFAULT);
	if (k->topic == NULL) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	seterr(k->txn_id, sizeof(k->txn_id), "mirrord-metadata-%s", k->topic);
	if (parse_bootstrap(k, ko->bootstrap, err, errlen) != 0)
		goto fail;
	for (size_t i = 0; i < ko->nprops; i++) {
		int rc = kconn_config_set(&k->kcfg, ko->prop_names[i],
		    ko->prop_values[i], e2, sizeof(e2));
		if (rc < 0) {
			seterr(err, errlen, "destination.client: %s", e2);
			goto fail;
		}
	}
	if (kconn_config_prepare(&k->kcfg, e2, sizeof(e2)) != 0) {
		seterr(err, errlen, "destination.client: %s", e2);
		goto fail;
	}
	return &k->base;
fail:
	kafka_free(&k->base);
	return NULL;
}
