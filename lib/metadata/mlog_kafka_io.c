/*
 * mlog_kafka_io.c: the cluster side of the replicated metadata log (see
 * mlog_kafka.c for the protocol): connections to the bootstrap servers and
 * the partition leader, creating and checking the topic, ListOffsets,
 * reading a range of records with Fetch, and producing a batch with
 * acks=all and exact resends.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "compat.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "mlog_kafka_int.h"

#define FETCH_MAX_BYTES (8 << 20)

void mk_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

void mk_set_broken(struct mk *k, const char *why)
{
	if (mk_defer_on_thread(k, 0, why))
		return;         /* applied by the loop thread */
	k->broken = 1;
	k->st.broken = 1;
	seterr(k->broken_why, sizeof(k->broken_why), "%s", why);
	log_errorx("metadata log: %s", why);
}

/* ---- connections and metadata ------------------------------------------- */

void mk_drop_conn(struct mk *k)
{
	mk_conn_free(k->conn);
	k->conn = NULL;
}

/* A connection to any bootstrap server. */
struct mk_conn *mk_connect_any(struct mk *k, char *err, size_t errlen)
{
	char e[512] = "no bootstrap server";

	for (size_t i = 0; i < k->nboot; i++) {
		struct mk_conn *c = mk_conn_open(k->net, k->boot_host[i],
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

static int metadata(struct mk *k, struct mk_conn *c, struct topic_md *md,
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
	frame = mk_call(c, KP_API_METADATA, 12, &req, &resp, a,
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
int mk_connect_leader(struct mk *k, int64_t deadline, char *err,
    size_t errlen)
{
	for (;;) {
		struct topic_md md;
		struct mk_conn *c = mk_connect_any(k, err, errlen);

		if (c != NULL) {
			int rc = metadata(k, c, &md, err, errlen);
			mk_conn_free(c);
			if (rc == 0 && !md.exists)
				seterr(err, errlen, "topic %s does not exist "
				    "(deleted while mirrord runs?)", k->topic);
			else if (rc == 0 && md.leader < 0)
				seterr(err, errlen, "topic %s partition 0 has no "
				    "leader", k->topic);
			else if (rc == 0) {
				k->conn = mk_conn_open(k->net, md.host, md.port,
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
		if (clock_mono_ms() + MK_BACKOFF_MS >= deadline)
			return -1;
		mk_sleep_ms(MK_BACKOFF_MS);
	}
}

/* ---- the topic ---------------------------------------------------------- */

static int create_topic(struct mk *k, struct mk_conn *c, int nbrokers,
    char *err, size_t errlen)
{
	struct kp_create_topics_request req;
	struct kp_create_topics_response resp;
	struct kp_create_topics_request_creatable_topic t;
	struct kp_create_topics_request_creatable_topic_config cf[6];
	char isr[16], mmb[24], ret[24];
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
	/* The request topic only carries requests until they are
	 * answered: an hour is plenty (storage.kafka.timeout_ms bounds a
	 * follower's wait). */
	seterr(ret, sizeof(ret), "%d", k->is_req ? MLOG_KAFKA_REQ_RETENTION_MS :
	    -1);
	cf[1] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("retention.ms"), kstr_c(ret) };
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
	frame = mk_call(c, KP_API_CREATE_TOPICS, 7, &req, &resp, a,
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
	    "election off, %s)", k->topic, rf, mi, k->is_req ?
	    "retention.ms " "3600000" : "infinite retention");
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
static int check_topic(struct mk *k, struct mk_conn *c, const struct topic_md *md,
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
	frame = mk_call(c, KP_API_DESCRIBE_CONFIGS, 4, &req, &resp, a,
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
			else if (!k->is_req && (kstr_is(n, "retention.ms") ||
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
int mk_ensure_topic(struct mk *k, char *err, size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	struct mk_conn *c = mk_connect_any(k, err, errlen);
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
		/* A new topic's leader is known to the brokers only once the
		 * controller's metadata reached them, which takes its time
		 * on a loaded cluster: a full timeout for that from here. */
		deadline = clock_mono_ms() + k->timeout_ms;
	} else if (check_topic(k, c, &md, err, errlen) != 0) {
		goto out;
	}
	rc = mk_connect_leader(k, deadline, err, errlen);
out:
	mk_conn_free(c);
	return rc;
}

/* ---- offsets and reading ----------------------------------------------- */

/*
 * One ListOffsets of partition 0 at ts: 0 with *out, 1 with a retriable
 * partition error in err (a topic just created that its leader does not
 * know yet, a leader that moved), -1 otherwise.
 */
static int list_offset_once(struct mk *k, int64_t ts, int64_t *out,
    char *err, size_t errlen)
{
	struct kp_list_offsets_request req;
	struct kp_list_offsets_response resp;
	struct kp_list_offsets_request_list_offsets_topic t;
	struct kp_list_offsets_request_list_offsets_partition p;
	struct karena *a = karena_new(1 << 16);
	uint8_t *frame = NULL;
	int16_t e;
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
	frame = mk_call(k->conn, KP_API_LIST_OFFSETS, 7, &req, &resp, a,
	    k->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	if (resp.topics_n != 1 || resp.topics[0].partitions_n != 1) {
		seterr(err, errlen, "%s: ListOffsets answer without partition "
		    "%s-0", mk_conn_addr(k->conn), k->topic);
		goto out;
	}
	if ((e = resp.topics[0].partitions[0].error_code) != 0) {
		seterr(err, errlen, "%s: ListOffsets %s-0: %s",
		    mk_conn_addr(k->conn), k->topic, kerr_name(e));
		rc = kerr_retriable(e) ? 1 : -1;
		goto out;
	}
	*out = resp.topics[0].partitions[0].offset;
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

int mk_list_offset(struct mk *k, int64_t ts, int64_t *out, char *err,
    size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	int rc;

	for (;;) {
		if (k->conn == NULL && mk_connect_leader(k, deadline, err,
		    errlen) != 0)
			return -1;
		if ((rc = list_offset_once(k, ts, out, err, errlen)) <= 0)
			return rc;
		/* Retriable (UNKNOWN_TOPIC_OR_PARTITION from a leader the
		 * new topic has not reached yet, NOT_LEADER_OR_FOLLOWER):
		 * the leader again from the metadata, until the deadline. */
		mk_drop_conn(k);
		if (clock_mono_ms() + MK_BACKOFF_MS >= deadline)
			return -1;
		mk_sleep_ms(MK_BACKOFF_MS);
	}
}


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
	if (rc->k->is_req) {
		/* A request: the value as-is (checked by its decoder). */
		r.p = kr->value;
		r.len = (uint32_t)kr->value_len;
		r.key = kr->key;
		r.key_len = kr->key_len;
		if (rc->cb(rc->arg, &r, rc->err, rc->errlen) != 0) {
			rc->failed = 1;
			return -1;
		}
		return 0;
	}
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

/*
 * What the network thread checks of a Fetch's answer before handing it
 * over (mk_call_start_check()): the CRCs of its whole batches, in order,
 * up to the first one that reaches hi or fails (that one, and any after,
 * fetch_finish() checks itself, reporting a failure as it always did).
 * verified: the bytes of the records blob whose batches all passed.
 */
struct fetch_check {
	int64_t hi;
	size_t verified;
};

/* A Fetch sent (fetch_start()), its answer not yet read. */
struct mk_fetch {
	struct mk_pending *pd;
	struct fetch_check fc;
};

/* Network thread. */
static void fetch_check(void *arg, const uint8_t *body, size_t len)
{
	struct fetch_check *fc = arg;
	const struct kp_api *api = kp_api_find(KP_API_FETCH);
	struct karena *a = karena_new(1 << 20);
	struct kp_fetch_response resp;
	const struct kp_fetch_response_partition_data *pd;
	struct batch_iter it;
	struct batch b;
	struct kr r;
	char e[128];

	if (a == NULL || api == NULL)
		goto out;
	kr_init(&r, body, len);
	api->response_init(&resp);
	if (api->response_decode(&r, a, 12, &resp) < 0 || r.err ||
	    resp.responses_n != 1 || resp.responses[0].partitions_n != 1)
		goto out;
	pd = &resp.responses[0].partitions[0];
	if (pd->error_code != 0 || pd->records.len <= 0)
		goto out;
	batch_iter_init(&it, pd->records.p, (size_t)pd->records.len);
	while (batch_iter_next(&it, &b, e, sizeof(e)) == BATCH_OK &&
	    batch_next_offset(&b) < fc->hi &&
	    batch_verify_crc(&b, e, sizeof(e)) == 0)
		fc->verified = it.pos;
out:
	karena_free(a);
}

/* Sends the Fetch at offset o (connecting to the leader first if need
 * be); its answer is read by fetch_finish().  check: the network thread
 * checks the CRCs of the batches below hi. */
static struct mk_fetch *fetch_start(struct mk *k, int64_t o, int64_t hi,
    int check, int max_wait_ms, char *err, size_t errlen)
{
	struct mk_fetch *f;
	struct kp_fetch_request req;
	struct kp_fetch_request_fetch_topic t;
	struct kp_fetch_request_fetch_partition p;

	if (k->conn == NULL && mk_connect_leader(k, clock_mono_ms() +
	    k->timeout_ms, err, errlen) != 0)
		return NULL;
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
	req.max_wait_ms = max_wait_ms;
	req.min_bytes = 1;
	req.max_bytes = FETCH_MAX_BYTES;
	req.isolation_level = 0;
	req.session_id = 0;
	req.session_epoch = -1;
	req.topics = &t;
	req.topics_n = 1;
	req.forgotten_topics_data_n = 0;
	req.rack_id = kstr_c("");
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	f->fc.hi = hi;
	f->pd = mk_call_start_check(k->conn, KP_API_FETCH, 12, &req,
	    k->timeout_ms + max_wait_ms, check ? fetch_check : NULL, &f->fc,
	    err, errlen);
	if (f->pd == NULL) {
		free(f);
		return NULL;
	}
	return f;
}

/* Waits for a Fetch's answer only to drop it. */
static void fetch_drop(struct mk_fetch *f)
{
	char e[256];

	(void)mk_call_finish(f->pd, NULL, NULL, NULL, e, sizeof(e));
	free(f);
}

/* The offset after the last whole batch of records (o if none). */
static int64_t records_end(const uint8_t *p, int32_t len, int64_t o)
{
	struct batch_iter it;
	struct batch b;
	char e[128];

	batch_iter_init(&it, p, len > 0 ? (size_t)len : 0);
	while (batch_iter_next(&it, &b, e, sizeof(e)) == BATCH_OK)
		o = MAX(o, batch_next_offset(&b));
	return o;
}

/*
 * The answer of fetch_start()'s Fetch at o: hands cb the records in
 * [o, hi).  0, -2 when o is below the log start, 1 when the step may
 * succeed if tried again (connection lost, answer timed out, a retriable
 * partition error; nothing was handed to cb), -1 otherwise.  With
 * prefetch, the Fetch of the offset after the answer's records is sent
 * (*prefetch, at *pf_off) before they are handed on, so the next answer
 * travels while cb works; the caller finishes it.
 */
static int fetch_finish(struct mk *k, struct mk_fetch *f, int64_t o,
    int64_t hi, int snap_only, krec_fn cb, void *arg, int64_t *next,
    int64_t *hw, struct mk_fetch **prefetch, int64_t *pf_off, char *err,
    size_t errlen)
{
	struct mk_pending *pend = f->pd;
	size_t verified;
	struct karena *a = karena_new(1 << 20);
	struct kp_fetch_response resp;
	struct kp_fetch_response_partition_data *pd;
	struct batch_iter it;
	struct batch b;
	uint8_t *frame = NULL;
	char e2[256];
	int rc = -1;

	*next = o;
	*hw = -1;
	if (a == NULL) {
		fetch_drop(f);
		seterr(err, errlen, "out of memory");
		return -1;
	}
	frame = mk_call_finish(pend, &resp, a, NULL, err, errlen);
	verified = f->fc.verified;
	free(f);
	if (frame == NULL) {
		/* The connection failed or the answer timed out: another
		 * connection may do better (nothing was handed to cb). */
		mk_drop_conn(k);
		rc = 1;
		goto out;
	}
	if (resp.responses_n != 1 || resp.responses[0].partitions_n != 1) {
		seterr(err, errlen, "%s: Fetch answer without partition "
		    "%s-0", mk_conn_addr(k->conn), k->topic);
		goto out;
	}
	pd = &resp.responses[0].partitions[0];
	if (pd->error_code == KERR_OFFSET_OUT_OF_RANGE) {
		seterr(err, errlen, "%s: Fetch %s-0 at offset %" PRId64 ": %s",
		    mk_conn_addr(k->conn), k->topic, o,
		    kerr_name(pd->error_code));
		rc = -2;
		goto out;
	}
	if (pd->error_code != 0) {
		seterr(err, errlen, "%s: Fetch %s-0 at offset %" PRId64
		    ": %s", mk_conn_addr(k->conn), k->topic, o,
		    kerr_name(pd->error_code));
		if (pd->error_code == KERR_NOT_LEADER_OR_FOLLOWER ||
		    pd->error_code == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
		    pd->error_code == KERR_FENCED_LEADER_EPOCH ||
		    pd->error_code == KERR_LEADER_NOT_AVAILABLE)
			mk_drop_conn(k);
		if (kerr_retriable(pd->error_code))
			rc = 1;
		goto out;
	}
	*hw = pd->high_watermark;
	if (prefetch != NULL) {
		int64_t end = records_end(pd->records.p, pd->records.len, o);

		/* Nothing more to ask when the answer reaches hi or the
		 * high watermark; a failed send is only a lost head start. */
		if (end > o && end < hi && end < pd->high_watermark &&
		    (*prefetch = fetch_start(k, end, hi, !snap_only, 0, e2,
		    sizeof(e2))) != NULL)
			*pf_off = end;
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
		/* snap_only: a batch is all snapshot or none (one produce
		 * each), so its first record's key tells; nothing of the
		 * others is read or checked.  Otherwise every batch is
		 * checked, here or, below verified, on the network thread. */
		if (r != BATCH_ERROR && snap_only &&
		    !mlog_kafka_batch_is_snapshot(b.records, b.records_len,
		    b.record_count)) {
			if (batch_next_offset(&b) > o) {
				o = batch_next_offset(&b);
				*next = o;
			}
			if (o >= hi)
				break;
			continue;
		}
		if (r == BATCH_ERROR || (it.pos > verified &&
		    batch_verify_crc(&b, e2, sizeof(e2)) != 0)) {
			seterr(err, errlen, "topic %s partition 0: %s; "
			    "refusing to start", k->topic, e2);
			goto out;
		}
		if (batch_next_offset(&b) <= o)
			continue;
		if (batch_is_control(&b)) {
			o = batch_next_offset(&b);
			*next = o;
			continue;
		}
		if (b.record_count != b.last_offset_delta + 1) {
			seterr(err, errlen, "topic %s partition 0: batch at "
			    "offset %" PRId64 " holds %d records for %d "
			    "offsets: not written by mirrord; refusing to "
			    "start", k->topic, b.base_offset,
			    b.record_count, b.last_offset_delta + 1);
			goto out;
		}
		if (batch_codec(&b) != BATCH_CODEC_NONE) {
			seterr(err, errlen, "topic %s partition 0: batch at "
			    "offset %" PRId64 " is compressed (%s): not "
			    "written by mirrord; refusing to start",
			    k->topic, b.base_offset,
			    batch_codec_name(batch_codec(&b)));
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
			goto out;
		}
		o = batch_next_offset(&b);
		*next = o;
		if (o >= hi)
			break;
	}
	rc = 0;
out:
	free(frame);
	karena_free(a);
	return rc;
}

int mk_fetch(struct mk *k, int64_t o, int64_t hi, int max_wait_ms,
    krec_fn cb, void *arg, int64_t *next, int64_t *hw, char *err,
    size_t errlen)
{
	struct mk_fetch *f;
	int rc;

	*next = o;
	*hw = -1;
	if ((f = fetch_start(k, o, hi, 0, max_wait_ms, err, errlen)) == NULL) {
		mk_drop_conn(k);
		return -1;
	}
	/* Its callers retry on their own schedule: retriable (1) is -1. */
	rc = fetch_finish(k, f, o, hi, 0, cb, arg, next, hw, NULL, NULL, err,
	    errlen);
	return rc > 0 ? -1 : rc;
}

/*
 * Reads every record with an offset in [lo, hi) in order (snap_only:
 * only those of snapshot batches), the next Fetch on its way while the
 * records of one are handed to cb (replay).  A step that fails for a
 * reason that passes (the connection lost or an answer timed out, a
 * retriable partition error such as a leader that moved, a new leader
 * whose high watermark is still below hi) is tried again from the
 * leader the metadata names, every MK_BACKOFF_MS, until
 * storage.kafka.timeout_ms passes without progress; then the last
 * failure is the error.  Nothing is handed to cb twice: a failed step
 * hands over nothing.
 */
static int read_range(struct mk *k, int64_t lo, int64_t hi, int snap_only,
    krec_fn cb, void *arg, char *err, size_t errlen)
{
	struct mk_fetch *pf = NULL;
	int64_t o = lo, pf_off = -1;
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	int rc = 0, said = 0;

	while (o < hi) {
		struct mk_fetch *cur = pf;
		int64_t next = o, hw = -1;
		int r;

		pf = NULL;
		if (cur != NULL && pf_off != o) {
			/* The guess was wrong: drop it, ask again. */
			fetch_drop(cur);
			cur = NULL;
		}
		if (cur == NULL && (cur = fetch_start(k, o, hi, !snap_only, 0,
		    err, errlen)) == NULL) {
			mk_drop_conn(k);
			r = 1;
		} else {
			r = fetch_finish(k, cur, o, hi, snap_only, cb, arg,
			    &next, &hw, &pf, &pf_off, err, errlen);
		}
		if (r == 0 && next == o) {
			seterr(err, errlen, "topic %s partition 0: no record "
			    "readable at offset %" PRId64 " (high watermark %"
			    PRId64 ", want up to %" PRId64 ")", k->topic, o,
			    hw, hi);
			/* A new leader's high watermark can trail the old
			 * one's for a moment; at or past hi it is final. */
			r = hw >= 0 && hw < hi ? 1 : -1;
		}
		if (r == 0) {
			if (said)
				log_info("metadata log: topic %s: reading "
				    "again from offset %" PRId64, k->topic, o);
			o = next;
			deadline = clock_mono_ms() + k->timeout_ms;
			said = 0;
			continue;
		}
		if (r < 0) {
			rc = -1;
			break;
		}
		if (clock_mono_ms() + MK_BACKOFF_MS >= deadline) {
			char why[768];

			seterr(why, sizeof(why), "%s", err);
			seterr(err, errlen, "topic %s: reading offset %" PRId64
			    " failed for %d ms (storage.kafka.timeout_ms): %s",
			    k->topic, o, k->timeout_ms, why);
			rc = -1;
			break;
		}
		if (!said)
			log_warnx("metadata log: topic %s: reading offset %"
			    PRId64 " failed (%s); trying again for up to %d ms",
			    k->topic, o, err, k->timeout_ms);
		said = 1;
		if (pf != NULL) {
			fetch_drop(pf);
			pf = NULL;
		}
		mk_drop_conn(k);
		mk_sleep_ms(MK_BACKOFF_MS);
	}
	if (pf != NULL)
		fetch_drop(pf);
	return rc;
}

int mk_read_range(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen)
{
	return read_range(k, lo, hi, 0, cb, arg, err, errlen);
}

int mk_read_snapshots(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen)
{
	return read_range(k, lo, hi, 1, cb, arg, err, errlen);
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
	int uncertain = 0, unsent = 0;
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

		if (k->conn == NULL && mk_connect_leader(k, deadline, last,
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
		frame = mk_call_ex(k->conn, KP_API_PRODUCE, 9, &req, &resp, a,
		    (int)MAX(1, deadline - clock_mono_ms()), &unsent, last,
		    sizeof(last));
		if (frame == NULL) {
			/* Sent and unanswered: it may have landed.  Refused
			 * by a connection already closed: it did not. */
			if (!unsent)
				uncertain = 1;
			mk_drop_conn(k);
			goto retry;
		}
		if (resp.responses_n != 1 ||
		    resp.responses[0].partition_responses_n != 1) {
			seterr(last, sizeof(last), "Produce answer without "
			    "partition %s-0", k->topic);
			free(frame);
			uncertain = 1;
			mk_drop_conn(k);
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
			    "longer writes metadata: %s", k->topic, k->pid,
			    k->epoch, kerr_name(e), k->role_fn != NULL ?
			    "it follows the new writer" :
			    "restart it to follow the new writer");
			mk_fenced(k, why);
			seterr(err, errlen, "metadata log %s", why);
			goto out;
		}
		seterr(last, sizeof(last), "%s-0 leader %s: %s", k->topic,
		    mk_conn_addr(k->conn), kerr_name(e));
		if (e == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER ||
		    e == KERR_UNKNOWN_PRODUCER_ID) {
			char why[800];

			/* Our sequence and the leader's disagree: what it
			 * holds of ours is not what we think. */
			seterr(why, sizeof(why), "topic %s: the leader refused "
			    "producer id %" PRId64 " epoch %d sequence %d: %s; "
			    "refusing further writes until restart", k->topic,
			    k->pid, k->epoch, k->seq, last);
			mk_set_broken(k, why);
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
			mk_drop_conn(k);
		if (e == KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
		    e == KERR_REQUEST_TIMED_OUT)
			uncertain = 1;
retry:
		if (clock_mono_ms() + MK_BACKOFF_MS >= deadline)
			goto give_up;
		mk_sleep_ms(MK_BACKOFF_MS);
	}
give_up:
	if (uncertain) {
		char why[800];

		seterr(why, sizeof(why), "topic %s: a write's outcome is "
		    "unknown after storage.kafka.timeout_ms (%d ms): %s; "
		    "refusing further writes until restart", k->topic,
		    k->timeout_ms, last);
		mk_set_broken(k, why);
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
int mk_produce_frames(struct mk *k, const uint8_t *frames, size_t len,
    uint32_t count, int flags, int64_t *base, char *err, size_t errlen)
{
	size_t blen;
	uint8_t *b;
	int rc;

	b = mlog_kafka_encode_batch(frames, len,
	    (flags & MK_PF_SNAPSHOT) != 0, k->pid, k->epoch,
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
	if (rc == 0) {
		k->seq = (int32_t)(((int64_t)k->seq + count) & INT32_MAX);
		/* Only the writer writes: our records are the log's newest,
		 * and the tail (after a demotion) goes on after them. */
		if (!(flags & MK_PF_KEEP_NEXT))
			k->next = *base + (int64_t)count;
	}
	return rc;
}


int mk_produce_value(struct mk *k, const char *key, const uint8_t *v,
    size_t vlen, int64_t *base, char *err, size_t errlen)
{
	size_t blen;
	uint8_t *b;
	int rc;

	b = mlog_kafka_encode_value_batch(key, v, vlen, k->pid, k->epoch,
	    k->seq, clock_wall_ms(), &blen, err, errlen);
	if (b == NULL)
		return -1;
	if (blen > k->batch_max) {
		seterr(err, errlen, "one request of %zu bytes is over the %zu "
		    "bytes a batch of topic %s may hold", blen, k->batch_max,
		    k->topic);
		free(b);
		return -1;
	}
	rc = produce(k, b, blen, base, err, errlen);
	free(b);
	if (rc == 0)
		k->seq = (int32_t)(((int64_t)k->seq + 1) & INT32_MAX);
	return rc;
}
