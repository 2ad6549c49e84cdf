/*
 * pipeline/wire.c: see pipeline/wire.h.  The bytes on the wire come from the
 * generated kp_ codec (lib/kp_gen.c); this file only builds its request
 * structs from the pipeline's flat pw_tp arrays and walks its decoded
 * responses partition by partition.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kproto.h"
#include "wire.h"

/*
 * Arena cap for one decoded response: the generated structs take at most
 * about 7 bytes per wire byte (a Metadata topic with an empty name is
 * 9 bytes on the wire and about 64 in memory); records and strings point
 * into the response and cost nothing.  The arena is freed per response.
 */
#define PW_ARENA_PER_BYTE 8u
#define PW_ARENA_SLACK 4096u

static struct karena *response_arena(const struct kr *r)
{
	size_t left = (size_t)(r->end - r->p);

	if (left > (SIZE_MAX - PW_ARENA_SLACK) / PW_ARENA_PER_BYTE)
		left = (SIZE_MAX - PW_ARENA_SLACK) / PW_ARENA_PER_BYTE;
	return karena_new(left * PW_ARENA_PER_BYTE + PW_ARENA_SLACK);
}

/* Returns how many entries from tps[i] on share tps[i]'s topic. */
static size_t group_len(const struct pw_tp *tps, size_t n, size_t i)
{
	size_t j = i + 1;

	while (j < n && (tps[j].topic == tps[i].topic ||
	    strcmp(tps[j].topic, tps[i].topic) == 0))
		j++;
	return j - i;
}

static int32_t count_groups(const struct pw_tp *tps, size_t n)
{
	int32_t g = 0;

	for (size_t i = 0; i < n; i += group_len(tps, n, i))
		g++;
	return g;
}

/*
 * The topic and partition arrays of a request, allocated together: ntopics
 * topic structs of tsize bytes, then n partition structs of psize bytes.
 * NULL (with the writer failed) when n is too large or memory is short.
 */
static void *request_arrays(struct kw *w, size_t ntopics, size_t tsize,
    size_t n, size_t psize, void **parts)
{
	char *m;

	if (n > INT32_MAX || ntopics > SIZE_MAX / tsize / 2 ||
	    n > SIZE_MAX / psize / 2) {
		kw_fail(w, "too many partitions in one request");
		return NULL;
	}
	m = calloc(1, ntopics * tsize + n * psize + 1);
	if (m == NULL) {
		kw_fail(w, "out of memory");
		return NULL;
	}
	*parts = m + ntopics * tsize;
	return m;
}

/* ---- ListOffsets ----------------------------------------------------- */

int pw_list_offsets_encode(struct kw *w, int16_t version, const struct pw_tp *tps,
    size_t n)
{
	struct kp_list_offsets_request m;
	struct kp_list_offsets_request_list_offsets_topic *t;
	struct kp_list_offsets_request_list_offsets_partition *p;
	void *pv;
	int32_t ng = count_groups(tps, n);
	int rc;

	t = request_arrays(w, (size_t)ng, sizeof(*t), n, sizeof(*p), &pv);
	if (t == NULL)
		return -1;
	p = pv;
	kp_list_offsets_request_init(&m);
	m.replica_id = -1; /* a consumer */
	if (version >= 2)
		m.isolation_level = 0; /* read_uncommitted: the log end */
	m.topics = t;
	m.topics_n = ng;
	for (size_t i = 0, g = 0; i < n; g++) {
		size_t len = group_len(tps, n, i);

		kp_list_offsets_request_list_offsets_topic_init(&t[g]);
		t[g].name = kstr_c(tps[i].topic);
		t[g].partitions = &p[i];
		t[g].partitions_n = (int32_t)len;
		for (size_t k = i; k < i + len; k++) {
			kp_list_offsets_request_list_offsets_partition_init(&p[k]);
			p[k].partition_index = tps[k].partition;
			p[k].timestamp = tps[k].offset;
		}
		i += len;
	}
	rc = kp_list_offsets_request_encode(w, version, &m);
	free(t);
	return rc < 0 || w->err ? -1 : 0;
}

int pw_list_offsets_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_lo_part *p), void *arg)
{
	struct kp_list_offsets_response m;
	struct karena *a = response_arena(r);
	int rc = -1;

	if (a == NULL) {
		kr_fail(r, "out of memory");
		return -1;
	}
	if (kp_list_offsets_response_decode(r, a, version, &m) < 0)
		goto out;
	for (int32_t t = 0; t < m.topics_n; t++) {
		const struct kp_list_offsets_response_list_offsets_topic_response *mt =
		    &m.topics[t];

		for (int32_t i = 0; i < mt->partitions_n; i++) {
			struct pw_lo_part p;

			p.topic = mt->name;
			p.partition = mt->partitions[i].partition_index;
			p.error = mt->partitions[i].error_code;
			p.offset = mt->partitions[i].offset;
			cb(arg, &p);
		}
	}
	rc = 0;
out:
	karena_free(a);
	return rc;
}

/* ---- Fetch ----------------------------------------------------------- */

int pw_fetch_encode(struct kw *w, int16_t version, const struct pw_fetch_req *req,
    const struct pw_tp *tps, size_t n)
{
	return pw_fetch_encode_session(w, version, req, NULL, tps, n);
}

/* ForgottenTopicsData (v7-12: by name, v13+: by id), allocated in one
 * block like the topics; NULL with the writer failed. */
static struct kp_fetch_request_forgotten_topic *forgotten_arrays(struct kw *w,
    const struct pw_fetch_session *sess, int32_t *ngroups)
{
	struct kp_fetch_request_forgotten_topic *t;
	int32_t *parts;
	void *pv;
	int32_t ng = count_groups(sess->forgotten, sess->nforgotten);

	t = request_arrays(w, (size_t)ng, sizeof(*t), sess->nforgotten,
	    sizeof(*parts), &pv);
	if (t == NULL)
		return NULL;
	parts = pv;
	for (size_t i = 0, g = 0; i < sess->nforgotten; g++) {
		size_t len = group_len(sess->forgotten, sess->nforgotten, i);

		kp_fetch_request_forgotten_topic_init(&t[g]);
		t[g].topic = kstr_c(sess->forgotten[i].topic);
		t[g].topic_id = sess->forgotten[i].topic_id;
		t[g].partitions = &parts[i];
		t[g].partitions_n = (int32_t)len;
		for (size_t k = i; k < i + len; k++)
			parts[k] = sess->forgotten[k].partition;
		i += len;
	}
	*ngroups = ng;
	return t;
}

int pw_fetch_encode_session(struct kw *w, int16_t version,
    const struct pw_fetch_req *req, const struct pw_fetch_session *sess,
    const struct pw_tp *tps, size_t n)
{
	struct kp_fetch_request m;
	struct kp_fetch_request_fetch_topic *t;
	struct kp_fetch_request_fetch_partition *p;
	struct kp_fetch_request_forgotten_topic *ft = NULL;
	void *pv;
	int32_t ng = count_groups(tps, n), nfg = 0;
	int rc;

	if (sess != NULL && version < 7) {
		kw_fail(w, "no fetch sessions before Fetch v7");
		return -1;
	}
	t = request_arrays(w, (size_t)ng, sizeof(*t), n, sizeof(*p), &pv);
	if (t == NULL)
		return -1;
	p = pv;
	if (sess != NULL && sess->nforgotten > 0 &&
	    (ft = forgotten_arrays(w, sess, &nfg)) == NULL) {
		free(t);
		return -1;
	}
	kp_fetch_request_init(&m); /* no session (0/-1), rack "" */
	if (sess != NULL) {
		m.session_id = sess->id;
		m.session_epoch = sess->epoch;
		m.forgotten_topics_data = ft;
		m.forgotten_topics_data_n = nfg;
	}
	m.replica_id = -1;
	m.max_wait_ms = req->max_wait_ms;
	m.min_bytes = req->min_bytes;
	m.max_bytes = req->max_bytes;
	m.isolation_level = req->isolation;
	m.topics = t;
	m.topics_n = ng;
	for (size_t i = 0, g = 0; i < n; g++) {
		size_t len = group_len(tps, n, i);

		kp_fetch_request_fetch_topic_init(&t[g]);
		t[g].topic = kstr_c(tps[i].topic);
		t[g].topic_id = tps[i].topic_id;
		if (version >= PW_FETCH_BY_ID && kuuid_is_zero(&t[g].topic_id)) {
			kw_fail(w, "Fetch v13+ without a topic's id");
			free(t);
			free(ft);
			return -1;
		}
		t[g].partitions = &p[i];
		t[g].partitions_n = (int32_t)len;
		for (size_t k = i; k < i + len; k++) {
			kp_fetch_request_fetch_partition_init(&p[k]);
			p[k].partition = tps[k].partition;
			p[k].current_leader_epoch = tps[k].leader_epoch;
			p[k].fetch_offset = tps[k].offset;
			/* not ignorable: only where the version has it */
			p[k].last_fetched_epoch = version >= 12 ? tps[k].last_epoch : -1;
			p[k].log_start_offset = -1; /* not a follower */
			p[k].partition_max_bytes = tps[k].max_bytes;
		}
		i += len;
	}
	rc = kp_fetch_request_encode(w, version, &m);
	free(t);
	free(ft);
	return rc < 0 || w->err ? -1 : 0;
}

static int aborted_cmp(const void *x, const void *y)
{
	const struct kp_fetch_response_aborted_transaction *a = x, *b = y;

	if (a->first_offset != b->first_offset)
		return a->first_offset < b->first_offset ? -1 : 1;
	return 0;
}

int pw_fetch_decode(struct kr *r, int16_t version, int16_t *top_error,
    void (*cb)(void *arg, const struct pw_fetch_part *p), void *arg)
{
	int32_t sid;

	return pw_fetch_decode_session(r, version, top_error, &sid, cb, arg);
}

int pw_fetch_decode_session(struct kr *r, int16_t version, int16_t *top_error,
    int32_t *session_id, void (*cb)(void *arg, const struct pw_fetch_part *p),
    void *arg)
{
	struct kp_fetch_response m;
	struct karena *a = response_arena(r);
	int rc = -1;

	*top_error = 0;
	*session_id = 0;
	if (a == NULL) {
		kr_fail(r, "out of memory");
		return -1;
	}
	if (kp_fetch_response_decode(r, a, version, &m) < 0)
		goto out;
	if (version >= 7) {
		*top_error = m.error_code;
		*session_id = m.session_id;
	}
	/*
	 * No cap on a partition's aborted transactions: the arena holds them
	 * (16 bytes each, as on the wire), so the response size bounds them.
	 * A list the intake cannot use fails only its partition there.
	 */
	for (int32_t t = 0; t < m.responses_n; t++) {
		const struct kp_fetch_response_fetchable_topic_response *mt =
		    &m.responses[t];

		for (int32_t i = 0; i < mt->partitions_n; i++) {
			struct kp_fetch_response_partition_data *d =
			    &mt->partitions[i];
			struct pw_fetch_part p;

			memset(&p, 0, sizeof(p));
			p.topic = mt->topic;
			if (version >= PW_FETCH_BY_ID)
				p.topic_id = mt->topic_id;
			p.partition = d->partition_index;
			p.error = d->error_code;
			p.high_watermark = d->high_watermark;
			p.last_stable_offset = d->last_stable_offset;
			p.log_start_offset = version >= 5 ? d->log_start_offset : -1;
			if (d->aborted_transactions_n > 0) {
				/* Kafka sends them in offset order; make sure
				 * (O(n log n) in the response's own entries). */
				qsort(d->aborted_transactions,
				    (size_t)d->aborted_transactions_n,
				    sizeof(*d->aborted_transactions), aborted_cmp);
				p.aborted = d->aborted_transactions;
				p.naborted = (size_t)d->aborted_transactions_n;
			}
			p.preferred_read_replica = version >= 11 ?
			    d->preferred_read_replica : -1;
			p.diverging_epoch = version >= 12 ?
			    d->diverging_epoch.epoch : -1;
			p.diverging_end = version >= 12 ?
			    d->diverging_epoch.end_offset : -1;
			p.records = d->records; /* points into the response */
			cb(arg, &p);
		}
	}
	rc = 0;
out:
	karena_free(a);
	return rc;
}

/* ---- OffsetForLeaderEpoch -------------------------------------------- */

int pw_ofle_encode(struct kw *w, int16_t version, const struct pw_tp *tps,
    size_t n)
{
	struct kp_offset_for_leader_epoch_request m;
	struct kp_offset_for_leader_epoch_request_offset_for_leader_topic *t;
	struct kp_offset_for_leader_epoch_request_offset_for_leader_partition *p;
	void *pv;
	int32_t ng = count_groups(tps, n);
	int rc;

	t = request_arrays(w, (size_t)ng, sizeof(*t), n, sizeof(*p), &pv);
	if (t == NULL)
		return -1;
	p = pv;
	kp_offset_for_leader_epoch_request_init(&m);
	m.replica_id = -1; /* a consumer */
	m.topics = t;
	m.topics_n = ng;
	for (size_t i = 0, g = 0; i < n; g++) {
		size_t len = group_len(tps, n, i);

		kp_offset_for_leader_epoch_request_offset_for_leader_topic_init(&t[g]);
		t[g].topic = kstr_c(tps[i].topic);
		t[g].partitions = &p[i];
		t[g].partitions_n = (int32_t)len;
		for (size_t k = i; k < i + len; k++) {
			kp_offset_for_leader_epoch_request_offset_for_leader_partition_init(&p[k]);
			p[k].partition = tps[k].partition;
			p[k].current_leader_epoch = tps[k].leader_epoch;
			p[k].leader_epoch = tps[k].last_epoch;
		}
		i += len;
	}
	rc = kp_offset_for_leader_epoch_request_encode(w, version, &m);
	free(t);
	return rc < 0 || w->err ? -1 : 0;
}

int pw_ofle_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_ofle_part *p), void *arg)
{
	struct kp_offset_for_leader_epoch_response m;
	struct karena *a = response_arena(r);
	int rc = -1;

	if (a == NULL) {
		kr_fail(r, "out of memory");
		return -1;
	}
	if (kp_offset_for_leader_epoch_response_decode(r, a, version, &m) < 0)
		goto out;
	for (int32_t t = 0; t < m.topics_n; t++) {
		const struct kp_offset_for_leader_epoch_response_offset_for_leader_topic_result *mt =
		    &m.topics[t];

		for (int32_t i = 0; i < mt->partitions_n; i++) {
			struct pw_ofle_part p;

			p.topic = mt->topic;
			p.partition = mt->partitions[i].partition;
			p.error = mt->partitions[i].error_code;
			p.leader_epoch = version >= 1 ? mt->partitions[i].leader_epoch : -1;
			p.end_offset = mt->partitions[i].end_offset;
			cb(arg, &p);
		}
	}
	rc = 0;
out:
	karena_free(a);
	return rc;
}

/* ---- Produce --------------------------------------------------------- */

int pw_produce_encode(struct kw *w, int16_t version, int16_t acks,
    int32_t timeout_ms, const struct pw_tp *tps, size_t n)
{
	struct kp_produce_request m;
	struct kp_produce_request_topic_produce_data *t;
	struct kp_produce_request_partition_produce_data *p;
	void *pv;
	int32_t ng = count_groups(tps, n);
	size_t total = 64;
	int rc;

	for (size_t k = 0; k < n; k++) {
		if (tps[k].records_len > INT32_MAX) {
			kw_fail(w, "a batch larger than 2 GiB");
			return -1;
		}
		/* the batch (unless lent: kw_lend()), the partition's fields,
		 * a topic's name and id */
		if (w->lend_min == 0 || tps[k].records_len < w->lend_min)
			total += tps[k].records_len;
		total += 32 + strlen(tps[k].topic) + 16;
	}
	kw_expect(w, total);
	t = request_arrays(w, (size_t)ng, sizeof(*t), n, sizeof(*p), &pv);
	if (t == NULL)
		return -1;
	p = pv;
	kp_produce_request_init(&m);
	m.transactional_id = KSTR_NULL;
	m.acks = acks;
	m.timeout_ms = timeout_ms;
	m.topic_data = t;
	m.topic_data_n = ng;
	for (size_t i = 0, g = 0; i < n; g++) {
		size_t len = group_len(tps, n, i);

		kp_produce_request_topic_produce_data_init(&t[g]);
		t[g].name = kstr_c(tps[i].topic);
		t[g].topic_id = tps[i].topic_id;
		if (version >= PW_PRODUCE_BY_ID && kuuid_is_zero(&t[g].topic_id)) {
			free(t);
			kw_fail(w, "Produce v13+ without the topic id of a topic");
			return -1;
		}
		t[g].partition_data = &p[i];
		t[g].partition_data_n = (int32_t)len;
		for (size_t k = i; k < i + len; k++) {
			kp_produce_request_partition_produce_data_init(&p[k]);
			p[k].index = tps[k].partition;
			p[k].records = (struct kbytes){ tps[k].records,
			    (int32_t)tps[k].records_len };
		}
		i += len;
	}
	rc = kp_produce_request_encode(w, version, &m);
	free(t);
	return rc < 0 || w->err ? -1 : 0;
}

int pw_produce_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_produce_part *p), void *arg)
{
	struct kp_produce_response m;
	struct karena *a = response_arena(r);
	int rc = -1;

	if (a == NULL) {
		kr_fail(r, "out of memory");
		return -1;
	}
	if (kp_produce_response_decode(r, a, version, &m) < 0)
		goto out;
	for (int32_t t = 0; t < m.responses_n; t++) {
		const struct kp_produce_response_topic_produce_response *mt =
		    &m.responses[t];

		for (int32_t i = 0; i < mt->partition_responses_n; i++) {
			const struct kp_produce_response_partition_produce_response *d =
			    &mt->partition_responses[i];
			struct pw_produce_part p;

			memset(&p, 0, sizeof(p));
			p.topic = mt->name;
			if (version >= PW_PRODUCE_BY_ID)
				p.topic_id = mt->topic_id;
			p.partition = d->index;
			p.error = d->error_code;
			p.base_offset = d->base_offset;
			p.log_start_offset = version >= 5 ? d->log_start_offset : -1;
			p.error_message = version >= 8 ? d->error_message : KSTR_NULL;
			cb(arg, &p);
		}
	}
	rc = 0;
out:
	karena_free(a);
	return rc;
}
