/*
 * cstatus.c: the status topic of several instances (see cstatus.h).
 *
 * The worker thread, once per interval or when the loop hands over a new
 * snapshot: connect (any bootstrap server, Metadata, the partition
 * leader), create the topic if it is missing (1 partition, compacted,
 * replication factor up to 3), produce the pending snapshot (acks=1: a
 * lost status is replaced by the next), then Fetch what is new from the
 * offset after the last record read and keep the newest value per
 * instance, decoded into an array sorted by (mirror, topic, partition).
 * Any failure drops the connection and is retried next round.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "compat.h"
#include "cstatus.h"
#include "kblock.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"

#define CSTATUS_VERSION 1
#define FETCH_MAX (8 << 20)
#define MAX_BOOT 32

struct entry {
	char *mirror, *topic;
	int32_t partition;
	int64_t src, dst, lag, lag_ms;
};

struct inst {
	char *id;
	int64_t wall_ms;          /* of the snapshot */
	struct entry *v;          /* sorted */
	size_t n;
};

struct cstatus {
	const struct kconn_config *kcfg;
	char *boot_host[MAX_BOOT];
	int boot_port[MAX_BOOT];
	size_t nboot;
	const char *topic, *instance_id;
	int timeout_ms, interval_ms;

	pthread_t th;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	uint8_t *pending;          /* value to produce, malloc'd */
	size_t pending_len;
	struct inst *insts;
	size_t ninsts;
	char last_err[512];

	/* worker only */
	struct kblock *conn;
	int64_t next_offset;
	int created_checked;
};

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

	kr_init(&r, p, len);
	if (kr_i16(&r) != CSTATUS_VERSION)
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
	pthread_mutex_lock(&s->mu);
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
			pthread_mutex_unlock(&s->mu);
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
	pthread_mutex_unlock(&s->mu);
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

static void fail(struct cstatus *s, const char *why)
{
	pthread_mutex_lock(&s->mu);
	if (strcmp(s->last_err, why) != 0)
		log_warnx("cluster status topic %s: %s", s->topic, why);
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	pthread_mutex_unlock(&s->mu);
	kblock_free(s->conn);
	s->conn = NULL;
}

static int create_topic(struct cstatus *s, struct kblock *c, int nbrokers,
    char *err, size_t errlen)
{
	struct kp_create_topics_request req;
	struct kp_create_topics_response resp;
	struct kp_create_topics_request_creatable_topic t;
	struct kp_create_topics_request_creatable_topic_config cf[3];
	struct karena *a = karena_new(1 << 20);
	uint8_t *frame;
	int rc = -1;

	if (a == NULL)
		return -1;
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
	t.replication_factor = (int16_t)MIN(3, MAX(nbrokers, 1));
	t.configs = cf;
	t.configs_n = (int32_t)ARRAY_SIZE(cf);
	req.topics = &t;
	req.topics_n = 1;
	req.timeout_ms = s->timeout_ms;
	frame = kblock_call(c, KP_API_CREATE_TOPICS, 7, &req, &resp, a,
	    s->timeout_ms, err, errlen);
	if (frame != NULL) {
		int16_t e = resp.topics_n == 1 ? resp.topics[0].error_code :
		    KERR_UNKNOWN_SERVER_ERROR;

		if (e == 0 || e == KERR_TOPIC_ALREADY_EXISTS) {
			if (e == 0)
				log_info("cluster: created the status topic %s "
				    "(1 partition, compacted, replication factor "
				    "%d)", s->topic, t.replication_factor);
			rc = 0;
		} else {
			snprintf(err, errlen, "cannot create topic %s: %s",
			    s->topic, kerr_name(e));
		}
	}
	free(frame);
	karena_free(a);
	return rc;
}

/* Connects s->conn to the partition leader, creating the topic if needed. */
static int connect_leader(struct cstatus *s, char *err, size_t errlen)
{
	struct kp_metadata_request req;
	struct kp_metadata_response resp;
	struct kp_metadata_request_topic t;
	struct karena *a;
	struct kblock *c = NULL;
	uint8_t *frame;
	char host[256] = "";
	int port = 0, exists = 0;
	int32_t leader = -1;

	for (size_t i = 0; i < s->nboot && c == NULL; i++)
		c = kblock_connect(s->kcfg, s->boot_host[i], s->boot_port[i],
		    s->timeout_ms, err, errlen);
	if (c == NULL)
		return -1;
	a = karena_new(4 << 20);
	if (a == NULL) {
		kblock_free(c);
		return -1;
	}
	kp_metadata_request_init(&req);
	kp_metadata_request_topic_init(&t);
	t.name = kstr_c(s->topic);
	req.topics = &t;
	req.topics_n = 1;
	req.allow_auto_topic_creation = 0;
	frame = kblock_call(c, KP_API_METADATA, 12, &req, &resp, a,
	    s->timeout_ms, err, errlen);
	if (frame != NULL) {
		for (int32_t i = 0; i < resp.topics_n; i++) {
			if (resp.topics[i].error_code != 0)
				continue;
			exists = 1;
			for (int32_t j = 0; j < resp.topics[i].partitions_n; j++)
				if (resp.topics[i].partitions[j].partition_index == 0)
					leader = resp.topics[i].partitions[j].leader_id;
		}
		for (int32_t i = 0; leader >= 0 && i < resp.brokers_n; i++)
			if (resp.brokers[i].node_id == leader) {
				snprintf(host, sizeof(host), "%.*s",
				    (int)resp.brokers[i].host.len,
				    resp.brokers[i].host.p);
				port = resp.brokers[i].port;
			}
		if (!exists && create_topic(s, c, resp.brokers_n, err,
		    errlen) == 0)
			snprintf(err, errlen, "topic %s created; its leader is "
			    "not known yet", s->topic);
		else if (exists && host[0] == '\0')
			snprintf(err, errlen, "topic %s partition 0 has no leader",
			    s->topic);
	}
	free(frame);
	karena_free(a);
	kblock_free(c);
	if (host[0] == '\0')
		return -1;
	s->conn = kblock_connect(s->kcfg, host, port, s->timeout_ms, err,
	    errlen);
	return s->conn != NULL ? 0 : -1;
}

static int produce(struct cstatus *s, const uint8_t *v, size_t vlen,
    char *err, size_t errlen)
{
	struct kp_produce_request req;
	struct kp_produce_response resp;
	struct kp_produce_request_topic_produce_data t;
	struct kp_produce_request_partition_produce_data p;
	struct karena *a = karena_new(1 << 16);
	size_t blen = 0;
	uint8_t *b = encode_batch(s->instance_id, v, vlen, &blen), *frame;
	int rc = -1;

	if (a == NULL || b == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
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
	frame = kblock_call(s->conn, KP_API_PRODUCE, 9, &req, &resp, a,
	    s->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	if (resp.responses_n == 1 &&
	    resp.responses[0].partition_responses_n == 1 &&
	    resp.responses[0].partition_responses[0].error_code == 0)
		rc = 0;
	else
		snprintf(err, errlen, "Produce to %s-0: %s", s->topic,
		    resp.responses_n == 1 &&
		    resp.responses[0].partition_responses_n == 1 ?
		    kerr_name(resp.responses[0].partition_responses[0].error_code) :
		    "answer without the partition");
	free(frame);
out:
	free(b);
	karena_free(a);
	return rc;
}

/* Reads what is new; 1 if there may be more. */
static int fetch(struct cstatus *s, char *err, size_t errlen)
{
	struct karena *a = karena_new(1 << 20);
	struct kp_fetch_request req;
	struct kp_fetch_response resp;
	struct kp_fetch_request_fetch_topic t;
	struct kp_fetch_request_fetch_partition p;
	struct kp_fetch_response_partition_data *pd;
	struct batch_iter it;
	struct batch b;
	uint8_t *frame;
	char e2[256];
	int rc = -1;

	if (a == NULL)
		return -1;
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
	frame = kblock_call(s->conn, KP_API_FETCH, 12, &req, &resp, a,
	    s->timeout_ms, err, errlen);
	if (frame == NULL)
		goto out;
	if (resp.responses_n != 1 || resp.responses[0].partitions_n != 1) {
		snprintf(err, errlen, "Fetch answer without %s-0", s->topic);
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
		snprintf(err, errlen, "Fetch %s-0 at %" PRId64 ": %s", s->topic,
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
			snprintf(err, errlen, "%s-0: %s", s->topic, e2);
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
	free(frame);
	karena_free(a);
	return rc;
}

static void *worker(void *arg)
{
	struct cstatus *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		uint8_t *v = s->pending;
		size_t vlen = s->pending_len;
		char err[512] = "";
		int ok = 1;

		s->pending = NULL;
		pthread_mutex_unlock(&s->mu);
		if (s->conn == NULL && connect_leader(s, err, sizeof(err)) != 0)
			ok = 0;
		if (ok && v != NULL && produce(s, v, vlen, err, sizeof(err)) != 0)
			ok = 0;
		for (int i = 0; ok && i < 64; i++) {
			int r = fetch(s, err, sizeof(err));

			if (r < 0)
				ok = 0;
			if (r <= 0)
				break;
		}
		if (!ok) {
			fail(s, err);
			/* Not sent: keep it unless a newer one came. */
			pthread_mutex_lock(&s->mu);
			if (s->pending == NULL && v != NULL) {
				s->pending = v;
				s->pending_len = vlen;
				v = NULL;
			}
			pthread_mutex_unlock(&s->mu);
		} else {
			pthread_mutex_lock(&s->mu);
			s->last_err[0] = '\0';
			pthread_mutex_unlock(&s->mu);
		}
		free(v);
		pthread_mutex_lock(&s->mu);
		if (!s->stop && s->pending == NULL) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += s->interval_ms / 1000;
			ts.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- the loop's side -------------------------------------------------- */

struct cstatus *cstatus_new(const struct kconn_config *kcfg,
    const char *bootstrap, const char *topic, const char *instance_id,
    int timeout_ms, int interval_ms, char *err, size_t errlen)
{
	struct cstatus *s = calloc(1, sizeof(*s));
	char *list, *save = NULL, *tok;

	if (s == NULL || (list = strdup(bootstrap)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (tok = strtok_r(list, ",", &save); tok != NULL &&
	    s->nboot < MAX_BOOT; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(tok, ':');

		while (*tok == ' ')
			tok++;
		if (colon == NULL)
			continue;
		*colon = '\0';
		if (tok[0] == '[' && colon > tok && colon[-1] == ']') {
			colon[-1] = '\0';
			tok++;
		}
		s->boot_host[s->nboot] = strdup(tok);
		s->boot_port[s->nboot] = atoi(colon + 1);
		if (s->boot_host[s->nboot] != NULL)
			s->nboot++;
	}
	free(list);
	s->kcfg = kcfg;
	s->topic = topic;
	s->instance_id = instance_id;
	s->timeout_ms = timeout_ms;
	s->interval_ms = interval_ms;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, worker, s) != 0) {
		snprintf(err, errlen, "cannot start the status thread");
		cstatus_free(s);
		return NULL;
	}
	s->started = 1;
	return s;
}

void cstatus_publish(struct cstatus *s, const struct cstatus_part *parts,
    size_t n)
{
	size_t len = 0;
	uint8_t *v = cstatus_encode(parts, n, clock_wall_ms(), &len);

	if (v == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	free(s->pending);
	s->pending = v;
	s->pending_len = len;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int cstatus_lookup(struct cstatus *s, const char *instance,
    const char *mirror, const char *topic, int32_t partition,
    struct cstatus_part *out, int64_t *age_ms)
{
	struct entry key = { (char *)mirror, (char *)topic, partition, 0, 0,
		0, 0 };
	int found = 0;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->ninsts && !found; i++) {
		const struct entry *e;

		if (strcmp(s->insts[i].id, instance) != 0)
			continue;
		e = bsearch(&key, s->insts[i].v, s->insts[i].n,
		    sizeof(*e), entry_cmp);
		if (e == NULL)
			break;
		memset(out, 0, sizeof(*out));
		out->partition = partition;
		out->src = e->src;
		out->dst = e->dst;
		out->lag = e->lag;
		out->lag_ms = e->lag_ms;
		*age_ms = clock_wall_ms() - s->insts[i].wall_ms;
		found = 1;
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

void cstatus_last_error(struct cstatus *s, char *buf, size_t len)
{
	pthread_mutex_lock(&s->mu);
	snprintf(buf, len, "%s", s->last_err);
	pthread_mutex_unlock(&s->mu);
}

void cstatus_free(struct cstatus *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stop = 1;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->th, NULL);
	}
	kblock_free(s->conn);
	for (size_t i = 0; i < s->ninsts; i++) {
		inst_clear(&s->insts[i]);
		free(s->insts[i].id);
	}
	free(s->insts);
	free(s->pending);
	for (size_t i = 0; i < s->nboot; i++)
		free(s->boot_host[i]);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
