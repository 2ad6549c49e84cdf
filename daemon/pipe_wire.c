/*
 * pipe_wire.c: see pipe_wire.h.  Field order follows Apache Kafka's
 * message definitions for each version.
 */
#include "config.h"

#include <string.h>

#include "pipe_wire.h"

/* Writes the topic-grouped array head for tps[i..): returns how many
 * entries share tps[i]'s topic. */
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

/* ---- Metadata -------------------------------------------------------- */

int pw_metadata_encode(struct kw *w, int16_t version, const char *const *topics,
    size_t ntopics)
{
	if (topics == NULL && ntopics == 0) {
		kw_array(w, -1);
	} else {
		kw_array(w, (int32_t)ntopics);
		for (size_t i = 0; i < ntopics; i++)
			kw_str(w, kstr_c(topics[i]));
	}
	if (version >= 4)
		kw_bool(w, 0); /* allow_auto_topic_creation: never */
	if (version >= 8) {
		kw_bool(w, 0);
		kw_bool(w, 0);
	}
	return w->err ? -1 : 0;
}

static void skip_i32_array(struct kr *r)
{
	int32_t n = kr_array(r);

	for (int32_t i = 0; i < n && !r->err; i++)
		(void)kr_i32(r);
}

int pw_metadata_decode(struct kr *r, int16_t version, const struct pw_md_cb *cb)
{
	int32_t nb, nt;

	if (version >= 3)
		(void)kr_i32(r); /* throttle */
	nb = kr_array(r);
	for (int32_t i = 0; i < nb && !r->err; i++) {
		struct pw_md_broker b;

		b.node_id = kr_i32(r);
		b.host = kr_str(r);
		b.port = kr_i32(r);
		(void)kr_str(r); /* rack */
		if (!r->err && cb->broker)
			cb->broker(cb->arg, &b);
	}
	if (version >= 2) {
		struct kstr id = kr_str(r);

		if (!r->err && cb->cluster_id)
			cb->cluster_id(cb->arg, id);
	}
	(void)kr_i32(r); /* controller */
	nt = kr_array(r);
	for (int32_t t = 0; t < nt && !r->err; t++) {
		struct pw_md_part p;
		int32_t np;

		memset(&p, 0, sizeof(p));
		p.topic_error = kr_i16(r);
		p.topic = kr_str(r);
		(void)kr_bool(r); /* is_internal */
		np = kr_array(r);
		p.npart = np < 0 ? 0 : np;
		if (np <= 0 && !r->err) {
			p.partition = -1;
			p.leader = -1;
			p.leader_epoch = -1;
			if (cb->part)
				cb->part(cb->arg, &p);
		}
		for (int32_t i = 0; i < np && !r->err; i++) {
			p.error = kr_i16(r);
			p.partition = kr_i32(r);
			p.leader = kr_i32(r);
			p.leader_epoch = version >= 7 ? kr_i32(r) : -1;
			skip_i32_array(r); /* replicas */
			skip_i32_array(r); /* isr */
			if (version >= 5)
				skip_i32_array(r); /* offline */
			if (!r->err && cb->part)
				cb->part(cb->arg, &p);
		}
		if (version >= 8)
			(void)kr_i32(r); /* topic authorized operations */
	}
	if (version >= 8)
		(void)kr_i32(r); /* cluster authorized operations */
	return r->err ? -1 : 0;
}

/* ---- ListOffsets ----------------------------------------------------- */

int pw_list_offsets_encode(struct kw *w, int16_t version, const struct pw_tp *tps,
    size_t n)
{
	kw_i32(w, -1); /* replica id: a consumer */
	if (version >= 2)
		kw_i8(w, 0); /* isolation: read_uncommitted (the log end) */
	kw_array(w, count_groups(tps, n));
	for (size_t i = 0; i < n;) {
		size_t g = group_len(tps, n, i);

		kw_str(w, kstr_c(tps[i].topic));
		kw_array(w, (int32_t)g);
		for (size_t k = i; k < i + g; k++) {
			kw_i32(w, tps[k].partition);
			kw_i64(w, tps[k].offset);
		}
		i += g;
	}
	return w->err ? -1 : 0;
}

int pw_list_offsets_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_lo_part *p), void *arg)
{
	int32_t nt;

	if (version >= 2)
		(void)kr_i32(r);
	nt = kr_array(r);
	for (int32_t t = 0; t < nt && !r->err; t++) {
		struct pw_lo_part p;
		int32_t np;

		p.topic = kr_str(r);
		np = kr_array(r);
		for (int32_t i = 0; i < np && !r->err; i++) {
			p.partition = kr_i32(r);
			p.error = kr_i16(r);
			(void)kr_i64(r); /* timestamp */
			p.offset = kr_i64(r);
			if (!r->err)
				cb(arg, &p);
		}
	}
	return r->err ? -1 : 0;
}

/* ---- Fetch ----------------------------------------------------------- */

int pw_fetch_encode(struct kw *w, int16_t version, const struct pw_fetch_req *req,
    const struct pw_tp *tps, size_t n)
{
	kw_i32(w, -1); /* replica id */
	kw_i32(w, req->max_wait_ms);
	kw_i32(w, req->min_bytes);
	kw_i32(w, req->max_bytes);
	kw_i8(w, req->isolation);
	if (version >= 7) {
		kw_i32(w, 0);  /* session id: none */
		kw_i32(w, -1); /* session epoch: full fetch, no session */
	}
	kw_array(w, count_groups(tps, n));
	for (size_t i = 0; i < n;) {
		size_t g = group_len(tps, n, i);

		kw_str(w, kstr_c(tps[i].topic));
		kw_array(w, (int32_t)g);
		for (size_t k = i; k < i + g; k++) {
			kw_i32(w, tps[k].partition);
			if (version >= 9)
				kw_i32(w, -1); /* current leader epoch: unknown */
			kw_i64(w, tps[k].offset);
			if (version >= 5)
				kw_i64(w, -1); /* log start offset: not a follower */
			kw_i32(w, tps[k].max_bytes);
		}
		i += g;
	}
	if (version >= 7)
		kw_array(w, 0); /* forgotten topics */
	if (version >= 11)
		kw_str(w, kstr_c(""));
	return w->err ? -1 : 0;
}

int pw_fetch_decode(struct kr *r, int16_t version, int16_t *top_error,
    void (*cb)(void *arg, const struct pw_fetch_part *p), void *arg)
{
	static struct pw_aborted ab[PW_MAX_ABORTED]; /* loop thread only */
	int32_t nt;

	*top_error = 0;
	(void)kr_i32(r); /* throttle */
	if (version >= 7) {
		*top_error = kr_i16(r);
		(void)kr_i32(r); /* session id */
	}
	nt = kr_array(r);
	for (int32_t t = 0; t < nt && !r->err; t++) {
		struct pw_fetch_part p;
		int32_t np;

		memset(&p, 0, sizeof(p));
		p.topic = kr_str(r);
		np = kr_array(r);
		for (int32_t i = 0; i < np && !r->err; i++) {
			int32_t na;

			p.partition = kr_i32(r);
			p.error = kr_i16(r);
			p.high_watermark = kr_i64(r);
			p.last_stable_offset = kr_i64(r);
			p.log_start_offset = version >= 5 ? kr_i64(r) : -1;
			na = kr_array(r);
			if (na > PW_MAX_ABORTED) {
				kr_fail(r, "more aborted transactions than mirrord accepts in one partition");
				break;
			}
			p.naborted = 0;
			for (int32_t k = 0; k < na && !r->err; k++) {
				ab[k].producer_id = kr_i64(r);
				ab[k].first_offset = kr_i64(r);
				p.naborted++;
			}
			/* Kafka sends them in offset order; make sure. */
			for (size_t k = 1; k < p.naborted; k++) {
				struct pw_aborted x = ab[k];
				size_t j = k;

				while (j > 0 && ab[j - 1].first_offset > x.first_offset) {
					ab[j] = ab[j - 1];
					j--;
				}
				ab[j] = x;
			}
			p.aborted = ab;
			p.preferred_read_replica = version >= 11 ? kr_i32(r) : -1;
			p.records = kr_bytes(r);
			if (!r->err)
				cb(arg, &p);
		}
	}
	return r->err ? -1 : 0;
}

/* ---- Produce --------------------------------------------------------- */

int pw_produce_encode(struct kw *w, int16_t version, int16_t acks,
    int32_t timeout_ms, const struct pw_tp *tps, size_t n)
{
	kw_str(w, KSTR_NULL); /* transactional id */
	kw_i16(w, acks);
	kw_i32(w, timeout_ms);
	kw_array(w, count_groups(tps, n));
	for (size_t i = 0; i < n;) {
		size_t g = group_len(tps, n, i);

		kw_str(w, kstr_c(tps[i].topic));
		kw_array(w, (int32_t)g);
		for (size_t k = i; k < i + g; k++) {
			if (tps[k].records_len > INT32_MAX) {
				kw_fail(w, "a batch larger than 2 GiB");
				return -1;
			}
			kw_i32(w, tps[k].partition);
			kw_bytes(w, (struct kbytes){ tps[k].records,
			    (int32_t)tps[k].records_len });
		}
		i += g;
	}
	(void)version;
	return w->err ? -1 : 0;
}

int pw_produce_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_produce_part *p), void *arg)
{
	int32_t nt = kr_array(r);

	for (int32_t t = 0; t < nt && !r->err; t++) {
		struct pw_produce_part p;
		int32_t np;

		memset(&p, 0, sizeof(p));
		p.topic = kr_str(r);
		np = kr_array(r);
		for (int32_t i = 0; i < np && !r->err; i++) {
			p.partition = kr_i32(r);
			p.error = kr_i16(r);
			p.base_offset = kr_i64(r);
			(void)kr_i64(r); /* log append time */
			p.log_start_offset = version >= 5 ? kr_i64(r) : -1;
			p.error_message = KSTR_NULL;
			if (version >= 8) {
				int32_t ne = kr_array(r);

				for (int32_t k = 0; k < ne && !r->err; k++) {
					(void)kr_i32(r);
					(void)kr_str(r);
				}
				p.error_message = kr_str(r);
			}
			if (!r->err)
				cb(arg, &p);
		}
	}
	(void)kr_i32(r); /* throttle */
	return r->err ? -1 : 0;
}

/* ---- InitProducerId -------------------------------------------------- */

int pw_init_pid_encode(struct kw *w, int16_t version)
{
	kw_str(w, KSTR_NULL); /* no transactional id: idempotent only */
	kw_i32(w, 60000);
	(void)version;
	return w->err ? -1 : 0;
}

int pw_init_pid_decode(struct kr *r, int16_t version, int16_t *error,
    int64_t *producer_id, int16_t *producer_epoch)
{
	(void)kr_i32(r);
	*error = kr_i16(r);
	*producer_id = kr_i64(r);
	*producer_epoch = kr_i16(r);
	(void)version;
	return r->err ? -1 : 0;
}
