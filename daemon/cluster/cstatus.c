/*
 * cstatus.c: the status topic of several instances (see cstatus.h).
 *
 * Everything runs on the daemon's event loop, on the destination's
 * kcluster (the data plane's, shared with the group client; the status
 * topic is added to the topics its Metadata asks for): a round, once per interval
 * or as soon as the loop hands over a new snapshot, is a chain of
 * non-blocking steps, each bounded (a metadata refresh by the cluster's
 * metadata timeout, every request by storage.kafka.timeout_ms):
 *
 *   leader   the leader of partition 0 from the cluster's metadata;
 *            unknown: one refresh; still unknown and the topic missing:
 *            CreateTopics (1 partition, compacted, replication factor up
 *            to 3) and the next round soon after;
 *   produce  the pending snapshot (acks=1: a lost status is replaced by
 *            the next), kept for the next round if it fails;
 *   fetch    what is new from the offset after the last record read (at
 *            most FETCH_ROUNDS requests a round), keeping the newest value
 *            per instance, decoded into an array sorted by (mirror, topic,
 *            partition).
 *
 * A failing step ends the round with its reason (logged once while it
 * stays the same, kept for cstatus_last_error()); leader errors ask the
 * cluster for fresh metadata.  Callbacks hold a reference: cstatus_free()
 * while one is outstanding frees at the last one (kcluster_free() fails
 * them all).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "batch.h"
#include "compat.h"
#include "cstatus.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"

#define CSTATUS_VERSION 2
#define FETCH_MAX (8 << 20)
#define FETCH_ROUNDS 64
#define CREATED_RETRY_MS 500   /* after CreateTopics: the next round */

/* The versions used (Kafka 2.4+ has them all; a ready connection picks
 * the highest both sides support up to these). */
#define V_CREATE_TOPICS 7
#define V_PRODUCE 9
#define V_FETCH 12

struct entry {
	char *mirror, *topic;
	int32_t partition;
	int64_t src, dst, lag, lag_ms;
	int64_t src_ok_ms, caught_ms, stalled_since;
	char *reason;
};

struct inst {
	char *id;
	int64_t wall_ms;          /* of the snapshot */
	struct entry *v;          /* sorted */
	size_t n;
};

struct cstatus {
	struct event_base *base;
	struct kcluster *kc;       /* borrowed */
	const char *topic, *instance_id;
	int timeout_ms, interval_ms;
	struct event *tick;        /* the next round */
	int busy;                  /* a round is running */
	int refreshed;             /* this round refreshed the metadata */
	int fetches;               /* Fetch requests this round */
	int16_t ver;               /* of the CreateTopics or Produce in flight */
	int refs;                  /* callbacks outstanding */
	int dead;                  /* cstatus_free() ran */
	uint8_t *pending;          /* value to produce, malloc'd */
	size_t pending_len;
	uint8_t *sending;          /* the value of the Produce in flight */
	size_t sending_len;
	struct inst *insts;
	size_t ninsts;
	char last_err[512];
	int64_t next_offset;
};

static void destroy(struct cstatus *s);

/* ---- value codec ------------------------------------------------------ */

uint8_t *cstatus_encode(const struct cstatus_part *parts, size_t n,
    int64_t wall_ms, size_t *outlen)
{
	struct kw w;
	uint8_t *out;

	kw_init(&w, 1u << 30);
	kw_i16(&w, CSTATUS_VERSION);
	kw_i64(&w, wall_ms);
	kw_i32(&w, (int32_t)n);
	for (size_t i = 0; i < n; i++) {
		kw_str(&w, kstr_c(parts[i].mirror));
		kw_str(&w, kstr_c(parts[i].topic));
		kw_i32(&w, parts[i].partition);
		kw_i64(&w, parts[i].src);
		kw_i64(&w, parts[i].dst);
		kw_i64(&w, parts[i].lag);
		kw_i64(&w, parts[i].lag_ms);
		kw_i64(&w, parts[i].src_ok_ms);
		kw_i64(&w, parts[i].caught_ms);
		kw_i64(&w, parts[i].stalled_since);
		kw_str(&w, kstr_c(parts[i].reason != NULL ? parts[i].reason : ""));
	}
	if (w.err) {
		kw_fini(&w);
		return NULL;
	}
	out = malloc(w.len > 0 ? w.len : 1);
	if (out != NULL) {
		memcpy(out, w.buf, w.len);
		*outlen = w.len;
	}
	kw_fini(&w);
	return out;
}

static int entry_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = strcmp(a->mirror, b->mirror);

	if (c == 0)
		c = strcmp(a->topic, b->topic);
	if (c == 0)
		c = a->partition < b->partition ? -1 : a->partition > b->partition;
	return c;
}

static void inst_clear(struct inst *in)
{
	for (size_t i = 0; i < in->n; i++) {
		free(in->v[i].mirror);
		free(in->v[i].topic);
		free(in->v[i].reason);
	}
	free(in->v);
	in->v = NULL;
	in->n = 0;
}

/* Decodes a value into fresh entries; -1 when malformed. */
static int decode_value(const uint8_t *p, size_t len, int64_t *wall,
    struct entry **out, size_t *nout)
{
	struct kr r;
	int32_t n;
	struct entry *v;
	int16_t version;

	kr_init(&r, p, len);
	version = kr_i16(&r);
	if (version != 1 && version != CSTATUS_VERSION)
		return -1;
	*wall = kr_i64(&r);
	n = kr_i32(&r);
	if (r.err || n < 0 || (size_t)n > len / 40 + 1)
		return -1;
	v = calloc((size_t)n + 1, sizeof(*v));
	if (v == NULL)
		return -1;
	for (int32_t i = 0; i < n; i++) {
		struct kstr m = kr_str(&r), t = kr_str(&r);

		v[i].partition = kr_i32(&r);
		v[i].src = kr_i64(&r);
		v[i].dst = kr_i64(&r);
		v[i].lag = kr_i64(&r);
		v[i].lag_ms = kr_i64(&r);
		v[i].src_ok_ms = v[i].caught_ms = v[i].stalled_since = -1;
		if (version >= 2) {
			struct kstr why;

			v[i].src_ok_ms = kr_i64(&r);
			v[i].caught_ms = kr_i64(&r);
			v[i].stalled_since = kr_i64(&r);
			why = kr_str(&r);
			if (!r.err && why.len > 0 &&
			    (v[i].reason = kstr_dup(why)) == NULL)
				goto bad;
		}
		if (r.err || m.len < 0 || t.len < 0)
			goto bad;
		v[i].mirror = kstr_dup(m);
		v[i].topic = kstr_dup(t);
		if (v[i].mirror == NULL || v[i].topic == NULL)
			goto bad;
	}
	qsort(v, (size_t)n, sizeof(*v), entry_cmp);
	*out = v;
	*nout = (size_t)n;
	return 0;
bad:
	for (int32_t i = 0; i < n; i++) {
		free(v[i].mirror);
		free(v[i].topic);
		free(v[i].reason);
	}
	free(v);
	return -1;
}

/* ---- one record batch ----------------------------------------------- */

static void put_varint(struct kw *w, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);

	while (z >= 0x80) {
		kw_i8(w, (int8_t)((z & 0x7f) | 0x80));
		z >>= 7;
	}
	kw_i8(w, (int8_t)z);
}

static int64_t get_varint(const uint8_t **p, const uint8_t *end, int *err)
{
	uint64_t z = 0;
	int shift = 0;

	while (*p < end && shift < 64) {
		uint8_t c = *(*p)++;

		z |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
		shift += 7;
	}
	*err = 1;
	return 0;
}

/* One uncompressed v2 batch of one record (key, value). */
static uint8_t *encode_batch(const char *key, const uint8_t *v, size_t vlen,
    size_t *outlen)
{
	struct kw rec, w;
	size_t klen = strlen(key);
	int64_t now = clock_wall_ms();
	uint8_t *out;
	uint32_t crc;

	kw_init(&rec, 1u << 30);
	kw_i8(&rec, 0);                 /* attributes */
	put_varint(&rec, 0);            /* timestamp delta */
	put_varint(&rec, 0);            /* offset delta */
	put_varint(&rec, (int64_t)klen);
	kw_raw(&rec, key, klen);
	put_varint(&rec, (int64_t)vlen);
	kw_raw(&rec, v, vlen);
	put_varint(&rec, 0);            /* headers */
	kw_init(&w, 1u << 30);
	kw_i64(&w, 0);                  /* base offset */
	kw_i32(&w, 0);                  /* batch length, below */
	kw_i32(&w, -1);                 /* partition leader epoch */
	kw_i8(&w, 2);                   /* magic */
	kw_i32(&w, 0);                  /* crc, below */
	kw_i16(&w, 0);                  /* attributes */
	kw_i32(&w, 0);                  /* last offset delta */
	kw_i64(&w, now);
	kw_i64(&w, now);
	kw_i64(&w, -1);                 /* producer id */
	kw_i16(&w, -1);
	kw_i32(&w, -1);
	kw_i32(&w, 1);                  /* records */
	put_varint(&w, (int64_t)rec.len);
	kw_raw(&w, rec.buf, rec.len);
	if (w.err || rec.err) {
		kw_fini(&rec);
		kw_fini(&w);
		return NULL;
	}
	be32_store(w.buf + 8, (uint32_t)(w.len - 12));
	crc = batch_compute_crc(w.buf, w.len);
	be32_store(w.buf + 17, crc);
	out = malloc(w.len);
	if (out != NULL) {
		memcpy(out, w.buf, w.len);
		*outlen = w.len;
	}
	kw_fini(&rec);
	kw_fini(&w);
	return out;
}

/* ---- the worker ------------------------------------------------------- */

static void store(struct cstatus *s, const uint8_t *key, size_t klen,
    const uint8_t *v, size_t vlen)
{
	struct entry *ev;
	size_t n;
	int64_t wall;
	struct inst *in = NULL;

	if (v == NULL || decode_value(v, vlen, &wall, &ev, &n) < 0)
		return;
	for (size_t i = 0; i < s->ninsts; i++)
		if (strlen(s->insts[i].id) == klen &&
		    memcmp(s->insts[i].id, key, klen) == 0)
			in = &s->insts[i];
	if (in == NULL) {
		struct inst *ni = realloc(s->insts, (s->ninsts + 1) *
		    sizeof(*ni));
		char *id = malloc(klen + 1);

		if (ni != NULL)
			s->insts = ni;
		if (ni == NULL || id == NULL) {
			free(id);
			return;
		}
		memcpy(id, key, klen);
		id[klen] = '\0';
		in = &s->insts[s->ninsts++];
		memset(in, 0, sizeof(*in));
		in->id = id;
	}
	if (wall >= in->wall_ms) {
		inst_clear(in);
		in->v = ev;
		in->n = n;
		in->wall_ms = wall;
		ev = NULL;
	}
	if (ev != NULL) {
		for (size_t i = 0; i < n; i++) {
			free(ev[i].mirror);
			free(ev[i].topic);
		}
		free(ev);
	}
}

static void records(struct cstatus *s, const struct batch *b)
{
	const uint8_t *p = b->records, *end = b->records + b->records_len;
	int err = 0;

	for (int32_t i = 0; i < b->record_count && !err; i++) {
		int64_t len = get_varint(&p, end, &err);
		const uint8_t *rend = p + len, *key, *val;
		int64_t kl, vl;

		if (err || len < 0 || len > end - p)
			return;
		p++;                                   /* attributes */
		(void)get_varint(&p, rend, &err);      /* timestamp delta */
		(void)get_varint(&p, rend, &err);      /* offset delta */
		kl = get_varint(&p, rend, &err);
		if (err || kl < 0 || kl > rend - p)
			return;
		key = p;
		p += kl;
		vl = get_varint(&p, rend, &err);
		if (err || vl > rend - p)
			return;
		val = vl >= 0 ? p : NULL;
		if (vl > 0)
			p += vl;
		store(s, key, (size_t)kl, val, vl > 0 ? (size_t)vl : 0);
		p = rend;
	}
}

/* ---- the rounds ------------------------------------------------------- */

static void step_leader(struct cstatus *s);
static void step_produce(struct cstatus *s);
static void step_fetch(struct cstatus *s);

static void schedule(struct cstatus *s, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!s->dead)
		evtimer_add(s->tick, &tv);
}

static void round_end(struct cstatus *s, int next_ms)
{
	s->busy = 0;
	schedule(s, s->pending != NULL ? 0 : next_ms);
}

static void round_ok(struct cstatus *s)
{
	s->last_err[0] = '\0';
	round_end(s, s->interval_ms);
}

static void round_fail(struct cstatus *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void round_fail(struct cstatus *s, const char *fmt, ...)
{
	char why[sizeof(s->last_err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (strcmp(s->last_err, why) != 0)
		log_warnx("cluster status topic %s: %s", s->topic, why);
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	s->busy = 0;
	schedule(s, s->interval_ms);
}

/* A callback's reference: 0 to go on (err is handled by the caller; a
 * connection the kcluster closed is an ordinary failure of the round), 1
 * when s is being freed: nothing more is done. */
static int unref(struct cstatus *s)
{
	s->refs--;
	if (s->dead) {
		if (s->refs == 0)
			destroy(s);
		return 1;
	}
	return 0;
}

static int16_t version(struct kconn *c, int16_t api, int16_t want)
{
	int v = kconn_is_ready(c) ? kconn_pick_version(c, api, 0, want) : want;

	return (int16_t)(v < 0 ? want : v);
}

static void refreshed_cb(struct kcluster *cl, int err, const char *errstr,
    void *arg)
{
	struct cstatus *s = arg;

	(void)cl;
	if (unref(s))
		return;
	if (err != KCONN_E_OK) {
		round_fail(s, "metadata: %s", errstr != NULL ? errstr :
		    kconn_err_name(err));
		return;
	}
	step_leader(s);
}

static void created_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct cstatus *s = arg;
	struct kp_create_topics_response resp;
	struct karena *a;
	int16_t e = KERR_UNKNOWN_SERVER_ERROR;

	(void)c;
	if (unref(s))
		return;
	if (err != KCONN_E_OK) {
		round_fail(s, "CreateTopics: %s", errstr);
		return;
	}
	if ((a = karena_new(1 << 16)) == NULL) {
		round_fail(s, "CreateTopics: out of memory");
		return;
	}
	kp_create_topics_response_init(&resp);
	if (kp_create_topics_response_decode(body, a, s->ver, &resp) < 0 ||
	    body->err) {
		karena_free(a);
		round_fail(s, "CreateTopics: malformed answer");
		return;
	}
	if (resp.topics_n == 1)
		e = resp.topics[0].error_code;
	karena_free(a);
	if (e != 0 && e != KERR_TOPIC_ALREADY_EXISTS) {
		round_fail(s, "cannot create topic %s: %s", s->topic, kerr_name(e));
		return;
	}
	if (e == 0)
		log_info("cluster: created the status topic %s (1 partition, "
		    "compacted)", s->topic);
	/* Its leader is elected in a moment: the next round looks. */
	kcluster_refresh(s->kc, NULL, NULL);
	s->last_err[0] = '\0';
	round_end(s, CREATED_RETRY_MS);
}

static void create_topic(struct cstatus *s)
{
	struct kp_create_topics_request req;
	struct kp_create_topics_request_creatable_topic t;
	struct kp_create_topics_request_creatable_topic_config cf[3];
	struct kconn *c = NULL;
	size_t nb = kcluster_broker_count(s->kc);
	int32_t node = kcluster_controller_id(s->kc);
	char err[256] = "no broker known";
	int16_t v;

	/* The controller if known (any broker forwards it), else the first
	 * broker that has a connection to give. */
	if (node >= 0)
		c = kcluster_broker_conn(s->kc, node, err, sizeof(err));
	for (size_t i = 0; c == NULL && i < nb; i++)
		if (kcluster_broker_at(s->kc, i, &node, NULL, NULL, NULL) == 0)
			c = kcluster_broker_conn(s->kc, node, err, sizeof(err));
	if (c == NULL) {
		round_fail(s, "topic %s is missing and cannot be created: %s",
		    s->topic, err);
		return;
	}
	cf[0] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("cleanup.policy"), kstr_c("compact") };
	cf[1] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("segment.ms"), kstr_c("600000") };
	cf[2] = (struct kp_create_topics_request_creatable_topic_config){
	    kstr_c("min.cleanable.dirty.ratio"), kstr_c("0.1") };
	kp_create_topics_request_init(&req);
	kp_create_topics_request_creatable_topic_init(&t);
	t.name = kstr_c(s->topic);
	t.num_partitions = 1;
	t.replication_factor = (int16_t)MIN(3, MAX((int)nb, 1));
	t.configs = cf;
	t.configs_n = (int32_t)ARRAY_SIZE(cf);
	req.topics = &t;
	req.topics_n = 1;
	req.timeout_ms = s->timeout_ms;
	v = s->ver = version(c, KP_API_CREATE_TOPICS, V_CREATE_TOPICS);
	s->refs++;
	if (kconn_send_msg(c, KP_API_CREATE_TOPICS, v, &req, 0, s->timeout_ms,
	    created_cb, s, err, sizeof(err)) != 0) {
		s->refs--;
		round_fail(s, "CreateTopics of %s: %s", s->topic, err);
		return;
	}
	log_info("cluster: creating the status topic %s (replication factor "
	    "%d)", s->topic, t.replication_factor);
}

/* 1 when the last metadata says the status topic does not exist: absent
 * (every topic asked) or listed with UNKNOWN_TOPIC_OR_PARTITION (named in
 * the request: the shared kcluster asks for it by name). */
static int topic_missing(const struct cstatus *s)
{
	const struct kcluster_topic *t = kcluster_topic(s->kc, s->topic);

	return t == NULL || t->error == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
	    (t->error == 0 && t->npart == 0);
}

static void step_leader(struct cstatus *s)
{
	int32_t leader = kcluster_leader(s->kc, s->topic, 0, NULL);

	if (leader >= 0) {
		step_produce(s);
		return;
	}
	if (!s->refreshed) {
		s->refreshed = 1;
		s->refs++;
		kcluster_refresh(s->kc, refreshed_cb, s);
		return;
	}
	if (leader == KCLUSTER_UNKNOWN && topic_missing(s)) {
		create_topic(s);
		return;
	}
	round_fail(s, "topic %s partition 0 has no leader", s->topic);
}

/* Leader moved or topic gone: fresh metadata for the next round. */
static void leader_error(struct cstatus *s, int16_t e)
{
	if (e == KERR_NOT_LEADER_OR_FOLLOWER || e == KERR_LEADER_NOT_AVAILABLE ||
	    e == KERR_UNKNOWN_TOPIC_OR_PARTITION || e == KERR_FENCED_LEADER_EPOCH ||
	    e == KERR_UNKNOWN_LEADER_EPOCH)
		kcluster_refresh(s->kc, NULL, NULL);
}

static void produced_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct cstatus *s = arg;
	struct kp_produce_response resp;
	struct karena *a = NULL;
	char why[256] = "";
	int16_t e = 0;

	(void)c;
	if (unref(s))
		return;
	if (err != KCONN_E_OK) {
		snprintf(why, sizeof(why), "Produce to %s-0: %s", s->topic, errstr);
	} else if ((a = karena_new(1 << 16)) == NULL) {
		snprintf(why, sizeof(why), "out of memory");
	} else {
		kp_produce_response_init(&resp);
		if (kp_produce_response_decode(body, a, s->ver, &resp) < 0 ||
		    body->err)
			snprintf(why, sizeof(why), "Produce to %s-0: malformed "
			    "answer", s->topic);
		else if (resp.responses_n != 1 ||
		    resp.responses[0].partition_responses_n != 1)
			snprintf(why, sizeof(why), "Produce to %s-0: answer without "
			    "the partition", s->topic);
		else if ((e = resp.responses[0].partition_responses[0].error_code))
			snprintf(why, sizeof(why), "Produce to %s-0: %s", s->topic,
			    kerr_name(e));
	}
	karena_free(a);
	if (why[0] != '\0') {
		/* Not sent: kept unless a newer one came. */
		if (s->pending == NULL) {
			s->pending = s->sending;
			s->pending_len = s->sending_len;
		} else {
			free(s->sending);
		}
		s->sending = NULL;
		leader_error(s, e);
		round_fail(s, "%s", why);
		return;
	}
	free(s->sending);
	s->sending = NULL;
	s->fetches = 0;
	step_fetch(s);
}

static void step_produce(struct cstatus *s)
{
	struct kp_produce_request req;
	struct kp_produce_request_topic_produce_data t;
	struct kp_produce_request_partition_produce_data p;
	struct kconn *c;
	uint8_t *b;
	size_t blen = 0;
	char err[256];
	int16_t v;
	int rc;

	if (s->pending == NULL) {
		s->fetches = 0;
		step_fetch(s);
		return;
	}
	if ((c = kcluster_leader_conn(s->kc, s->topic, 0, err,
	    sizeof(err))) == NULL) {
		kcluster_refresh(s->kc, NULL, NULL);
		round_fail(s, "Produce to %s-0: %s", s->topic, err);
		return;
	}
	if ((b = encode_batch(s->instance_id, s->pending, s->pending_len,
	    &blen)) == NULL) {
		round_fail(s, "out of memory");
		return;
	}
	kp_produce_request_init(&req);
	kp_produce_request_partition_produce_data_init(&p);
	p.index = 0;
	p.records = (struct kbytes){ b, (int32_t)blen };
	kp_produce_request_topic_produce_data_init(&t);
	t.name = kstr_c(s->topic);
	t.partition_data = &p;
	t.partition_data_n = 1;
	req.transactional_id = (struct kstr){ NULL, -1 };
	req.acks = 1;
	req.timeout_ms = s->timeout_ms;
	req.topic_data = &t;
	req.topic_data_n = 1;
	v = s->ver = version(c, KP_API_PRODUCE, V_PRODUCE);
	s->refs++;
	rc = kconn_send_msg(c, KP_API_PRODUCE, v, &req, 0, s->timeout_ms,
	    produced_cb, s, err, sizeof(err));
	free(b);
	if (rc != 0) {
		s->refs--;
		round_fail(s, "Produce to %s-0: %s", s->topic, err);
		return;
	}
	s->sending = s->pending;
	s->sending_len = s->pending_len;
	s->pending = NULL;
}

/* Applies a Fetch answer: 1 if there may be more, 0 caught up, -1 with
 * why. */
static int fetch_apply(struct cstatus *s, struct kr *body, int16_t v,
    char *why, size_t whylen, int16_t *code)
{
	struct karena *a = karena_new(1 << 20);
	struct kp_fetch_response resp;
	struct kp_fetch_response_partition_data *pd;
	struct batch_iter it;
	struct batch b;
	char e2[256];
	int rc = -1;

	if (a == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	kp_fetch_response_init(&resp);
	if (kp_fetch_response_decode(body, a, v, &resp) < 0 || body->err) {
		snprintf(why, whylen, "Fetch %s-0: malformed answer", s->topic);
		goto out;
	}
	if (resp.responses_n != 1 || resp.responses[0].partitions_n != 1) {
		snprintf(why, whylen, "Fetch answer without %s-0", s->topic);
		goto out;
	}
	pd = &resp.responses[0].partitions[0];
	if (pd->error_code == KERR_OFFSET_OUT_OF_RANGE) {
		s->next_offset = pd->log_start_offset >= 0 ?
		    pd->log_start_offset : 0;
		rc = 1;
		goto out;
	}
	if (pd->error_code != 0) {
		*code = pd->error_code;
		snprintf(why, whylen, "Fetch %s-0 at %" PRId64 ": %s", s->topic,
		    s->next_offset, kerr_name(pd->error_code));
		goto out;
	}
	rc = 0;
	batch_iter_init(&it, pd->records.p, pd->records.len > 0 ?
	    (size_t)pd->records.len : 0);
	for (;;) {
		int r = batch_iter_next(&it, &b, e2, sizeof(e2));

		if (r == BATCH_END || r == BATCH_INCOMPLETE)
			break;
		if (r == BATCH_ERROR || batch_verify_crc(&b, e2, sizeof(e2))) {
			snprintf(why, whylen, "%s-0: %s", s->topic, e2);
			rc = -1;
			break;
		}
		if (batch_next_offset(&b) <= s->next_offset)
			continue;
		if (!batch_is_control(&b) &&
		    batch_codec(&b) == BATCH_CODEC_NONE)
			records(s, &b);
		s->next_offset = batch_next_offset(&b);
		rc = 1;
	}
	if (rc == 1 && s->next_offset >= pd->high_watermark)
		rc = 0;
out:
	karena_free(a);
	return rc;
}

struct fetch_req {
	struct cstatus *s;
	int16_t version;
};

static void fetched_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct fetch_req *fr = arg;
	struct cstatus *s = fr->s;
	int16_t v = fr->version, code = 0;
	char why[512];
	int r;

	(void)c;
	free(fr);
	if (unref(s))
		return;
	if (err != KCONN_E_OK) {
		round_fail(s, "Fetch %s-0 at %" PRId64 ": %s", s->topic,
		    s->next_offset, errstr);
		return;
	}
	r = fetch_apply(s, body, v, why, sizeof(why), &code);
	if (r < 0) {
		leader_error(s, code);
		round_fail(s, "%s", why);
	} else if (r > 0 && s->fetches < FETCH_ROUNDS) {
		step_fetch(s);
	} else {
		round_ok(s);
	}
}

static void step_fetch(struct cstatus *s)
{
	struct kp_fetch_request req;
	struct kp_fetch_request_fetch_topic t;
	struct kp_fetch_request_fetch_partition p;
	struct fetch_req *fr;
	struct kconn *c;
	char err[256];

	if ((c = kcluster_leader_conn(s->kc, s->topic, 0, err,
	    sizeof(err))) == NULL) {
		kcluster_refresh(s->kc, NULL, NULL);
		round_fail(s, "Fetch %s-0: %s", s->topic, err);
		return;
	}
	if ((fr = calloc(1, sizeof(*fr))) == NULL) {
		round_fail(s, "out of memory");
		return;
	}
	fr->s = s;
	fr->version = version(c, KP_API_FETCH, V_FETCH);
	kp_fetch_request_init(&req);
	kp_fetch_request_fetch_partition_init(&p);
	p.partition = 0;
	p.current_leader_epoch = -1;
	p.fetch_offset = s->next_offset;
	p.last_fetched_epoch = -1;
	p.log_start_offset = -1;
	p.partition_max_bytes = FETCH_MAX;
	kp_fetch_request_fetch_topic_init(&t);
	t.topic = kstr_c(s->topic);
	t.partitions = &p;
	t.partitions_n = 1;
	req.replica_id = -1;
	req.max_wait_ms = 0;
	req.min_bytes = 1;
	req.max_bytes = FETCH_MAX;
	req.isolation_level = 0;
	req.session_id = 0;
	req.session_epoch = -1;
	req.topics = &t;
	req.topics_n = 1;
	req.forgotten_topics_data_n = 0;
	req.rack_id = kstr_c("");
	s->fetches++;
	s->refs++;
	if (kconn_send_msg(c, KP_API_FETCH, fr->version, &req, 0, s->timeout_ms,
	    fetched_cb, fr, err, sizeof(err)) != 0) {
		s->refs--;
		free(fr);
		round_fail(s, "Fetch %s-0: %s", s->topic, err);
	}
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cstatus *s = arg;

	(void)fd;
	(void)what;
	if (s->busy || s->dead)
		return;
	s->busy = 1;
	s->refreshed = 0;
	s->fetches = 0;
	step_leader(s);
}

/* ---- the loop's side -------------------------------------------------- */

struct cstatus *cstatus_new(struct event_base *base, struct kcluster *kc,
    const char *topic, const char *instance_id, int timeout_ms,
    int interval_ms, char *err, size_t errlen)
{
	struct cstatus *s = calloc(1, sizeof(*s));

	if (s == NULL || (s->tick = evtimer_new(base, tick_cb, s)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* The kcluster is shared with the data plane, which asks Metadata
	 * only for the topics it writes: the status topic joins them. */
	if (kcluster_add_topic(kc, topic) != 0) {
		event_free(s->tick);
		free(s);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->base = base;
	s->kc = kc;
	s->topic = topic;
	s->instance_id = instance_id;
	s->timeout_ms = timeout_ms;
	s->interval_ms = interval_ms;
	schedule(s, 0);
	return s;
}

void cstatus_publish(struct cstatus *s, const struct cstatus_part *parts,
    size_t n)
{
	size_t len = 0;
	uint8_t *v = cstatus_encode(parts, n, clock_wall_ms(), &len);

	if (v == NULL)
		return;
	free(s->pending);
	s->pending = v;
	s->pending_len = len;
	if (!s->busy)
		schedule(s, 0);
}

int cstatus_lookup(struct cstatus *s, const char *instance,
    const char *mirror, const char *topic, int32_t partition,
    struct cstatus_part *out, int64_t *age_ms)
{
	struct entry key = { .mirror = (char *)mirror, .topic = (char *)topic,
		.partition = partition };

	for (size_t i = 0; i < s->ninsts; i++) {
		const struct entry *e;

		if (strcmp(s->insts[i].id, instance) != 0)
			continue;
		e = bsearch(&key, s->insts[i].v, s->insts[i].n,
		    sizeof(*e), entry_cmp);
		if (e == NULL)
			return 0;
		memset(out, 0, sizeof(*out));
		out->partition = partition;
		out->src = e->src;
		out->dst = e->dst;
		out->lag = e->lag;
		out->lag_ms = e->lag_ms;
		out->src_ok_ms = e->src_ok_ms;
		out->caught_ms = e->caught_ms;
		out->stalled_since = e->stalled_since;
		out->reason = e->reason;
		*age_ms = clock_wall_ms() - s->insts[i].wall_ms;
		return 1;
	}
	return 0;
}

void cstatus_last_error(struct cstatus *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s", s->last_err);
}

static void destroy(struct cstatus *s)
{
	for (size_t i = 0; i < s->ninsts; i++) {
		inst_clear(&s->insts[i]);
		free(s->insts[i].id);
	}
	free(s->insts);
	free(s->pending);
	free(s->sending);
	free(s);
}

void cstatus_free(struct cstatus *s)
{
	if (s == NULL)
		return;
	if (s->tick != NULL)
		event_free(s->tick);
	s->tick = NULL;
	if (!s->dead)
		kcluster_remove_topic(s->kc, s->topic);
	s->dead = 1;
	if (s->refs == 0)
		destroy(s);
}
