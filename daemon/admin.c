/*
 * admin.c: see admin.h.  Each handler decodes its request from the
 * request's arena, does its work, encodes the response, and answers through
 * adminsrv.  AddTopicsToMirror is the one asynchronous handler: it looks at
 * the source cluster first (srclookup) and answers when that is done; the
 * connection reads no further request meanwhile, so answers stay in order.
 */
#include "config.h"

#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "admin.h"
#include "adminauth.h"
#include "adminsrv.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "mstate.h"
#include "pipeline.h"
#include "srclookup.h"

#define MSG_LEN 512
/* Source lookups made for AddTopicsToMirror give up after this long. */
#define LOOKUP_TIMEOUT_MS 15000

struct admin {
	struct event_base *base;
	struct mstate *st;
	const struct config *cfg;
	struct pipeline *pl;
	struct metrics_std *ms;
	struct adminsrv *srv;
	struct adminauth *auth;  /* listener security (TLS, SASL) */
	struct pending *pending; /* lookups in flight, to cancel at exit */
	struct resolve *resolves; /* background source cluster id lookups */
};

/* An AddTopicsToMirror waiting for its source lookup. */
struct pending {
	struct pending *next, **prevp;
	struct admin *adm;
	struct adminsrv_req *rq;
	struct kp_add_topics_to_mirror_request req;
	char *mirror;
	struct srclookup *lookup;
};

/* ---- helpers -------------------------------------------------------- */

static char *arena_strdup(struct karena *a, struct kstr s)
{
	char *p;

	if (s.len < 0)
		return NULL;
	p = karena_alloc(a, (size_t)s.len + 1);
	if (p != NULL && s.len > 0)
		memcpy(p, s.p, (size_t)s.len);
	return p;
}

static int has_nul(struct kstr s)
{
	return s.len > 0 && memchr(s.p, '\0', (size_t)s.len) != NULL;
}

static struct kstr arena_kstr(struct karena *a, const char *s)
{
	size_t n = strlen(s);
	char *p = karena_alloc(a, n + 1);

	if (p == NULL)
		return KSTR_NULL;
	memcpy(p, s, n);
	return (struct kstr){ p, (int32_t)n };
}

static void *arena_array(struct karena *a, size_t n, size_t size)
{
	return karena_alloc(a, (n == 0 ? 1 : n) * size);
}

/* Answers with the encoding in w (rc: the encoder's return value). */
static void send_encoded(struct adminsrv_req *rq, struct kw *w, int rc,
    int16_t error_code)
{
	int16_t key = adminsrv_req_api_key(rq), ver = adminsrv_req_api_version(rq);
	int hv;

	if (rc < 0 || w->err) {
		/* Our own response did not encode: a bug, not the peer's fault. */
		log_errorx("admin: cannot encode the %s v%d response: %s",
		    kp_api_name(key), ver, w->why != NULL ? w->why : "encode error");
		adminsrv_reject(rq, ADMINSRV_REJECT_MALFORMED_BODY,
		    "internal error encoding the response");
		return;
	}
	hv = key == KP_API_API_VERSIONS ? 0 : kp_response_header_version(key, ver);
	adminsrv_respond(rq, hv, w->buf, w->len, error_code);
}

/* Encodes msg (the response struct of the request's ApiKey) and answers. */
static void respond(struct adminsrv_req *rq, const void *msg,
    int16_t error_code)
{
	const struct kp_api *api = kp_api_find(adminsrv_req_api_key(rq));
	struct kw w;

	kw_init(&w, 256u << 20);
	send_encoded(rq, &w, api->response_encode(&w,
	    adminsrv_req_api_version(rq), msg), error_code);
	kw_fini(&w);
}

/* Decodes the body into msg (the request struct of the request's ApiKey);
 * rejects (closing the connection) when it does not parse. */
static int decode_body(struct adminsrv_req *rq, void *msg)
{
	const struct kp_api *api = kp_api_find(adminsrv_req_api_key(rq));
	struct kr *r = adminsrv_req_body(rq);

	api->request_init(msg);
	if (api->request_decode(r, adminsrv_req_arena(rq),
	    adminsrv_req_api_version(rq), msg) < 0 || r->err) {
		adminsrv_reject(rq, ADMINSRV_REJECT_MALFORMED_BODY,
		    r->why != NULL ? r->why : "body does not parse");
		return -1;
	}
	if (kp_expect_end(r) < 0) {
		adminsrv_reject(rq, ADMINSRV_REJECT_MALFORMED_BODY,
		    "bytes left over after the request body");
		return -1;
	}
	return 0;
}

/* ---- ApiVersions ------------------------------------------------------ */

static void h_api_versions(struct admin *adm, struct adminsrv_req *rq)
{
	const struct kp_api *self = kp_api_find(KP_API_API_VERSIONS);
	int16_t ver = adminsrv_req_api_version(rq);
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_api_versions_response resp;
	size_t n = 0;

	(void)adm;
	kp_api_versions_response_init(&resp);
	if (ver < self->served_min || ver > self->served_max) {
		/*
		 * KIP-511: answer in the v0 shape, listing ApiVersions' own
		 * range, so the client can retry with a version we speak.
		 */
		struct kw w;
		uint8_t *body;

		resp.error_code = KERR_UNSUPPORTED_VERSION;
		resp.api_keys = arena_array(a, 1, sizeof(*resp.api_keys));
		resp.api_keys[0].api_key = KP_API_API_VERSIONS;
		resp.api_keys[0].min_version = self->served_min;
		resp.api_keys[0].max_version = self->served_max;
		resp.api_keys_n = 1;
		kw_init(&w, 4096);
		kp_api_versions_response_encode(&w, 0, &resp);
		body = w.buf;
		adminsrv_respond(rq, 0, body, w.len, KERR_UNSUPPORTED_VERSION);
		kw_fini(&w);
		return;
	}
	{
		struct kp_api_versions_request req;

		if (decode_body(rq, &req) < 0)
			return;
	}
	resp.api_keys = arena_array(a, kp_api_count, sizeof(*resp.api_keys));
	for (size_t i = 0; i < kp_api_count; i++) {
		const struct kp_api *api = &kp_api_table[i];

		if (api->served_min < 0)
			continue;
		resp.api_keys[n].api_key = api->api_key;
		resp.api_keys[n].min_version = api->served_min;
		resp.api_keys[n].max_version = api->served_max;
		n++;
	}
	resp.api_keys_n = (int32_t)n;
	respond(rq, &resp, 0);
}

/* ---- Metadata ----------------------------------------------------------- */

static void h_metadata(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	int16_t ver = adminsrv_req_api_version(rq);
	struct kp_metadata_request req;
	struct kp_metadata_response resp;
	const struct config *cfg = adm->cfg;

	if (decode_body(rq, &req) < 0)
		return;
	kp_metadata_response_init(&resp);
	resp.brokers = arena_array(a, 1, sizeof(*resp.brokers));
	kp_metadata_response_broker_init(&resp.brokers[0]);
	resp.brokers[0].node_id = (int32_t)cfg->server_node_id;
	resp.brokers[0].host = kstr_c(cfg->server_advertised.host);
	resp.brokers[0].port = cfg->server_advertised.port != 0 ?
	    cfg->server_advertised.port : admin_port(adm);
	resp.brokers_n = 1;
	resp.cluster_id = kstr_c(mstate_cluster_id(adm->st));
	resp.controller_id = (int32_t)cfg->server_node_id;
	/*
	 * mirrord hosts no topics.  A request for all topics (null, or an
	 * empty array at v0) gets none; named topics get
	 * UNKNOWN_TOPIC_OR_PARTITION each, as a broker that lacks them says.
	 */
	resp.topics_n = 0;
	if (req.topics_n > 0) {
		resp.topics = arena_array(a, (size_t)req.topics_n,
		    sizeof(*resp.topics));
		for (int32_t i = 0; i < req.topics_n; i++) {
			kp_metadata_response_topic_init(&resp.topics[i]);
			resp.topics[i].error_code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			resp.topics[i].name = req.topics[i].name;
			resp.topics[i].partitions_n = 0;
		}
		resp.topics_n = req.topics_n;
	}
	(void)ver;
	respond(rq, &resp, 0);
}

/* ---- CreateMirror / DeleteMirror / ListMirrors ------------------------ */

/*
 * Learning a mirror's source cluster id in the background: a lookup now,
 * and while the source cannot be reached, again with exponential backoff
 * (1 s doubling to 60 s) until it answers or the mirror is deleted.
 */
#define RESOLVE_BACKOFF_MIN_MS 1000
#define RESOLVE_BACKOFF_MAX_MS 60000

struct resolve {
	struct resolve *next, **prevp;
	struct admin *adm;
	char *mirror;
	struct srclookup *lookup;
	struct event *retry_ev;
	int backoff_ms;
	int attempts;
};

static void resolve_done(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics);

static void resolve_free(struct resolve *rs)
{
	*rs->prevp = rs->next;
	if (rs->next != NULL)
		rs->next->prevp = rs->prevp;
	srclookup_free(rs->lookup);
	if (rs->retry_ev != NULL)
		event_free(rs->retry_ev);
	free(rs->mirror);
	free(rs);
}

static void resolve_retry_later(struct resolve *rs)
{
	struct timeval tv;
	int ms = rs->backoff_ms;

	rs->backoff_ms = MIN(rs->backoff_ms * 2, RESOLVE_BACKOFF_MAX_MS);
	ms = ms / 2 + (int)(random() % (ms / 2 + 1));   /* jitter */
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(rs->retry_ev, &tv);
}

static void resolve_start(struct resolve *rs)
{
	struct mirror *m = mstate_mirror_find(rs->adm->st, rs->mirror);
	char err[MSG_LEN];

	if (m == NULL || m->source_cluster_id != NULL) {
		resolve_free(rs);   /* deleted, or learnt elsewhere (the pipeline) */
		return;
	}
	rs->attempts++;
	rs->lookup = srclookup_start(rs->adm->base, m, LOOKUP_TIMEOUT_MS,
	    resolve_done, rs, err, sizeof(err));
	if (rs->lookup == NULL) {
		log_warnx("mirror %s: cannot look up the source cluster: %s",
		    rs->mirror, err);
		resolve_retry_later(rs);
	}
}

static void resolve_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	resolve_start(arg);
}

static void resolve_source_id(struct admin *adm, const struct mirror *m)
{
	struct resolve *rs = calloc(1, sizeof(*rs));

	if (rs == NULL || (rs->mirror = strdup(m->name)) == NULL ||
	    (rs->retry_ev = evtimer_new(adm->base, resolve_retry_cb, rs)) == NULL) {
		log_warnx("mirror %s: out of memory; its source cluster id stays "
		    "unknown", m->name);
		if (rs != NULL)
			free(rs->mirror);
		free(rs);
		return;
	}
	rs->adm = adm;
	rs->backoff_ms = RESOLVE_BACKOFF_MIN_MS;
	rs->next = adm->resolves;
	if (adm->resolves != NULL)
		adm->resolves->prevp = &rs->next;
	rs->prevp = &adm->resolves;
	adm->resolves = rs;
	resolve_start(rs);
}

static void resolve_done(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics)
{
	struct resolve *rs = arg;
	struct mirror *m = mstate_mirror_find(rs->adm->st, rs->mirror);
	char msg[MSG_LEN];

	(void)topics;
	(void)ntopics;
	srclookup_free(rs->lookup);   /* safe inside its own callback */
	rs->lookup = NULL;
	if (!ok || cluster_id == NULL || cluster_id[0] == '\0') {
		if (rs->attempts == 1)
			log_warnx("mirror %s: source cluster not reachable yet (%s); "
			    "its cluster id will be resolved when it is", rs->mirror,
			    errstr != NULL ? errstr : "no cluster id in its Metadata");
		else
			log_debug("mirror %s: source still not reachable (%s)",
			    rs->mirror, errstr != NULL ? errstr : "no cluster id");
		resolve_retry_later(rs);
		return;
	}
	if (m != NULL && m->source_cluster_id == NULL &&
	    mstate_set_source_cluster_id(rs->adm->st, rs->mirror, cluster_id, msg,
	    sizeof(msg)) != 0)
		log_warnx("mirror %s: %s", rs->mirror, msg);
	resolve_free(rs);
}

static void h_create_mirror(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_create_mirror_request req;
	struct kp_create_mirror_response resp;
	const char **names, **values;
	struct mcfg *cfgs;
	char msg[MSG_LEN] = "";
	char *name;
	int16_t code = 0;
	int32_t n;

	if (decode_body(rq, &req) < 0)
		return;
	kp_create_mirror_response_init(&resp);
	name = arena_strdup(a, req.mirror_name);
	n = MAX(req.configs_n, 0);
	names = arena_array(a, (size_t)n, sizeof(*names));
	values = arena_array(a, (size_t)n, sizeof(*values));
	cfgs = arena_array(a, (size_t)n, sizeof(*cfgs));
	if (name == NULL || names == NULL || values == NULL || cfgs == NULL) {
		adminsrv_reject(rq, ADMINSRV_REJECT_OVERSIZED, "request too large");
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		names[i] = arena_strdup(a, req.configs[i].name);
		values[i] = arena_strdup(a, req.configs[i].value);
		cfgs[i].name = (char *)names[i];
		cfgs[i].value = (char *)values[i];
		/* A NUL inside a wire string would cut the C string short. */
		if (has_nul(req.configs[i].name) || has_nul(req.configs[i].value)) {
			snprintf(msg, sizeof(msg), "config %d contains a NUL byte", i);
			code = KERR_INVALID_REQUEST;
		}
	}
	if (has_nul(req.mirror_name)) {
		snprintf(msg, sizeof(msg), "the mirror name contains a NUL byte");
		code = KERR_INVALID_CLUSTER_MIRROR_NAME;
	}
	if (code == 0)
		code = (int16_t)mstate_check_mirror_name(name, msg, sizeof(msg));
	if (code == 0)
		mirrorconf_validate(names, values, (size_t)n, &code, msg, sizeof(msg));
	if (code == 0)
		code = (int16_t)mstate_create_mirror(adm->st, name, cfgs, (size_t)n,
		    msg, sizeof(msg));
	if (code == 0) {
		struct mirror *m = mstate_mirror_find(adm->st, name);

		log_info("mirror %s created (source %s) by %s", name,
		    mirror_bootstrap(m), adminsrv_req_peer(rq));
		if (m->source_cluster_id == NULL)
			resolve_source_id(adm, m);
	} else {
		log_info("CreateMirror %s from %s refused: %s: %s", name,
		    adminsrv_req_peer(rq), kerr_name(code), msg);
	}
	resp.error_code = code;
	resp.error_message = code != 0 ? arena_kstr(a, msg) : KSTR_NULL;
	respond(rq, &resp, code);
}

static void h_delete_mirror(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_delete_mirror_request req;
	struct kp_delete_mirror_response resp;
	char msg[MSG_LEN] = "";
	char *name;
	int16_t code;

	if (decode_body(rq, &req) < 0)
		return;
	kp_delete_mirror_response_init(&resp);
	name = arena_strdup(a, req.mirror_name);
	code = (int16_t)mstate_delete_mirror(adm->st, name, msg, sizeof(msg));
	if (code == 0)
		log_info("mirror %s deleted by %s", name, adminsrv_req_peer(rq));
	resp.error_code = code;
	resp.error_message = code != 0 ? arena_kstr(a, msg) : KSTR_NULL;
	respond(rq, &resp, code);
}

static void h_list_mirrors(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_list_mirrors_request req;
	struct kp_list_mirrors_response resp;
	size_t n = mstate_mirror_count(adm->st);

	if (decode_body(rq, &req) < 0)
		return;
	kp_list_mirrors_response_init(&resp);
	resp.mirrors = arena_array(a, n, sizeof(*resp.mirrors));
	for (size_t i = 0; i < n; i++) {
		const struct mirror *m = mstate_mirror_at(adm->st, i);

		kp_list_mirrors_response_mirror_init(&resp.mirrors[i]);
		resp.mirrors[i].mirror_name = kstr_c(m->name);
		resp.mirrors[i].source_bootstrap = kstr_c(mirror_bootstrap(m));
		resp.mirrors[i].source_cluster_id = kstr_c(
		    m->source_cluster_id != NULL ? m->source_cluster_id : "");
		resp.mirrors[i].topic_count = (int32_t)m->ntopics;
	}
	resp.mirrors_n = (int32_t)n;
	respond(rq, &resp, 0);
}

/* ---- DescribeMirrors ------------------------------------------------- */

static void describe_one(struct admin *adm, struct karena *a,
    const struct mirror *m, struct kp_describe_mirrors_response_mirror *out)
{
	out->mirror_name = kstr_c(m->name);
	out->topics = arena_array(a, m->ntopics, sizeof(*out->topics));
	out->topics_n = (int32_t)m->ntopics;
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];
		struct kp_describe_mirrors_response_topic *ot = &out->topics[t];

		kp_describe_mirrors_response_topic_init(ot);
		ot->name = kstr_c(mt->name);
		ot->partitions = arena_array(a, (size_t)mt->npart,
		    sizeof(*ot->partitions));
		ot->partitions_n = mt->npart;
		for (int32_t p = 0; p < mt->npart; p++) {
			const struct mpart *mp = mt->parts[p];
			struct kp_describe_mirrors_response_partition *op =
			    &ot->partitions[p];
			int64_t src = -1, dst = -1;
			struct pipeline_live live;

			kp_describe_mirrors_response_partition_init(op);
			pipeline_partition_offsets(adm->pl, mp, &src, &dst);
			op->partition_index = mp->index;
			op->source_offset = src;
			op->destination_offset = dst;
			op->lag = src >= 0 && dst >= 0 ? MAX(src - dst, 0) : -1;
			/* The pipeline's lag is in source offsets, right also when
			 * the translation map has anchors (holes, retention jumps). */
			if (pipeline_partition_live(adm->pl, mp, &live) == 0 &&
			    live.lag >= 0)
				op->lag = live.lag;
			op->state = kstr_c(mpart_state_name(mp->state));
			op->error_message = kstr_c(mp->state == MPART_FAILED ?
			    mp->error : NULL);
			op->last_mirrored_epoch = mp->last_epoch;
			op->last_mirrored_offset = mp->last_offset;
		}
	}
}

static void h_describe_mirrors(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_describe_mirrors_request req;
	struct kp_describe_mirrors_response resp;

	if (decode_body(rq, &req) < 0)
		return;
	kp_describe_mirrors_response_init(&resp);
	if (req.mirror_names_n <= 0) {
		size_t n = mstate_mirror_count(adm->st);

		resp.mirrors = arena_array(a, n, sizeof(*resp.mirrors));
		for (size_t i = 0; i < n; i++) {
			kp_describe_mirrors_response_mirror_init(&resp.mirrors[i]);
			describe_one(adm, a, mstate_mirror_at(adm->st, i),
			    &resp.mirrors[i]);
		}
		resp.mirrors_n = (int32_t)n;
	} else {
		resp.mirrors = arena_array(a, (size_t)req.mirror_names_n,
		    sizeof(*resp.mirrors));
		for (int32_t i = 0; i < req.mirror_names_n; i++) {
			char *name = arena_strdup(a, req.mirror_names[i]);
			const struct mirror *m = name != NULL ?
			    mstate_mirror_find(adm->st, name) : NULL;

			kp_describe_mirrors_response_mirror_init(&resp.mirrors[i]);
			if (m == NULL) {
				char msg[MSG_LEN];

				snprintf(msg, sizeof(msg), "mirror %s does not exist",
				    name != NULL ? name : "(null)");
				resp.mirrors[i].mirror_name = req.mirror_names[i];
				resp.mirrors[i].error_code =
				    KERR_UNKNOWN_CLUSTER_MIRROR;
				resp.mirrors[i].error_message = arena_kstr(a, msg);
				resp.mirrors[i].topics_n = 0;
				continue;
			}
			describe_one(adm, a, m, &resp.mirrors[i]);
		}
		resp.mirrors_n = req.mirror_names_n;
	}
	respond(rq, &resp, 0);
}

/* ---- topic operations (shared response shape) ------------------------- */

/* A growable per-topic result list in the request arena. */
struct results {
	struct karena *a;
	struct kp_add_topics_to_mirror_response_topic_result *v;
	int32_t n, cap;
};

static void results_add(struct results *rs, const char *topic, int code,
    const char *msg)
{
	if (rs->n == rs->cap) {
		int32_t cap = rs->cap ? rs->cap * 2 : 16;
		void *v = arena_array(rs->a, (size_t)cap, sizeof(*rs->v));

		if (v == NULL)
			return;
		if (rs->n > 0)
			memcpy(v, rs->v, (size_t)rs->n * sizeof(*rs->v));
		rs->v = v;
		rs->cap = cap;
	}
	kp_add_topics_to_mirror_response_topic_result_init(&rs->v[rs->n]);
	rs->v[rs->n].name = arena_kstr(rs->a, topic);
	rs->v[rs->n].error_code = (int16_t)code;
	rs->v[rs->n].error_message = code != 0 ? arena_kstr(rs->a, msg) : KSTR_NULL;
	rs->n++;
}

/* 1 if topic already has a result (a request may name it twice, or name
 * it and match it by pattern). */
static int results_has(const struct results *rs, const char *topic)
{
	size_t n = strlen(topic);

	for (int32_t i = 0; i < rs->n; i++)
		if ((size_t)rs->v[i].name.len == n &&
		    memcmp(rs->v[i].name.p, topic, n) == 0)
			return 1;
	return 0;
}

static void respond_results(struct adminsrv_req *rq, const char *mirror,
    int16_t top_code, const char *top_msg, struct results *rs)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_add_topics_to_mirror_response resp;
	int16_t worst = top_code;

	kp_add_topics_to_mirror_response_init(&resp);
	resp.error_code = top_code;
	resp.error_message = top_code != 0 ? arena_kstr(a, top_msg) : KSTR_NULL;
	resp.mirror_name = arena_kstr(a, mirror != NULL ? mirror : "");
	resp.topics = rs->v;
	resp.topics_n = rs->n;
	for (int32_t i = 0; worst == 0 && i < rs->n; i++)
		worst = rs->v[i].error_code;
	/*
	 * The four responses share one wire shape (mirror-protocol.md), so the
	 * AddTopicsToMirror encoder writes each of them.
	 */
	{
		struct kw w;

		kw_init(&w, 256u << 20);
		send_encoded(rq, &w, kp_add_topics_to_mirror_response_encode(&w,
		    adminsrv_req_api_version(rq), &resp), worst);
		kw_fini(&w);
	}
}

static void pattern_result(void *arg, const char *topic, int code,
    const char *msg)
{
	results_add(arg, topic, code, msg);
}

/* RemoveTopicsFromMirror, PauseMirrorTopics and ResumeMirrorTopics. */
static void h_topics_op(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	int16_t key = adminsrv_req_api_key(rq);
	struct results rs = { .a = a };
	struct kstr mname, *names = NULL, *pats = NULL;
	int32_t nn = 0, np = 0;
	char msg[MSG_LEN];
	char *mirror;

	/* Each request type keeps its own struct; the fields are the same. */
#define TOPIC_NAMES(req) do { \
		mname = (req).mirror_name; \
		nn = MAX((req).topics_n, 0); \
		names = arena_array(a, (size_t)nn, sizeof(*names)); \
		for (int32_t i_ = 0; names != NULL && i_ < nn; i_++) \
			names[i_] = (req).topics[i_].name; \
	} while (0)
	if (key == KP_API_REMOVE_TOPICS_FROM_MIRROR) {
		struct kp_remove_topics_from_mirror_request req;

		if (decode_body(rq, &req) < 0)
			return;
		TOPIC_NAMES(req);
		pats = req.patterns;
		np = MAX(req.patterns_n, 0);
	} else if (key == KP_API_PAUSE_MIRROR_TOPICS) {
		struct kp_pause_mirror_topics_request req;

		if (decode_body(rq, &req) < 0)
			return;
		TOPIC_NAMES(req);
	} else {
		struct kp_resume_mirror_topics_request req;

		if (decode_body(rq, &req) < 0)
			return;
		TOPIC_NAMES(req);
	}
#undef TOPIC_NAMES
	mirror = arena_strdup(a, mname);
	if (mirror == NULL || names == NULL) {
		adminsrv_reject(rq, ADMINSRV_REJECT_OVERSIZED, "request too large");
		return;
	}
	if (mstate_mirror_find(adm->st, mirror) == NULL) {
		snprintf(msg, sizeof(msg), "mirror %s does not exist", mirror);
		for (int32_t i = 0; i < nn; i++) {
			char *t = arena_strdup(a, names[i]);

			results_add(&rs, t != NULL ? t : "", KERR_UNKNOWN_CLUSTER_MIRROR,
			    msg);
		}
		respond_results(rq, mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
		return;
	}
	for (int32_t i = 0; i < nn; i++) {
		char *t = arena_strdup(a, names[i]);
		int code;

		if (t == NULL)
			continue;
		msg[0] = '\0';
		if (key == KP_API_REMOVE_TOPICS_FROM_MIRROR)
			code = mstate_remove_topic(adm->st, mirror, t, msg, sizeof(msg));
		else if (key == KP_API_PAUSE_MIRROR_TOPICS)
			code = mstate_pause_topic(adm->st, mirror, t, msg, sizeof(msg));
		else
			code = mstate_resume_topic(adm->st, mirror, t, msg, sizeof(msg));
		results_add(&rs, t, code, msg);
	}
	for (int32_t i = 0; i < np; i++) {
		char *p = arena_strdup(a, pats[i]);
		int code;

		if (p == NULL)
			continue;
		code = mstate_remove_pattern(adm->st, mirror, p, pattern_result, &rs,
		    msg, sizeof(msg));
		if (code != 0) {
			respond_results(rq, mirror, (int16_t)code, msg, &rs);
			return;
		}
	}
	log_info("%s %s from %s: %d topic result(s)", kp_api_name(key), mirror,
	    adminsrv_req_peer(rq), rs.n);
	respond_results(rq, mirror, 0, NULL, &rs);
}

/* ---- AddTopicsToMirror -------------------------------------------------- */

static void pending_free(struct pending *pd)
{
	*pd->prevp = pd->next;
	if (pd->next != NULL)
		pd->next->prevp = pd->prevp;
	srclookup_free(pd->lookup);
	free(pd->mirror);
	free(pd);
}

static int is_internal_name(const char *t)
{
	return strncmp(t, "__", 2) == 0;
}

static void add_lookup_done(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics)
{
	struct pending *pd = arg;
	struct admin *adm = pd->adm;
	struct adminsrv_req *rq = pd->rq;
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_add_topics_to_mirror_request *req = &pd->req;
	struct results rs = { .a = a };
	const char *mirror = pd->mirror;
	struct mirror *m = mstate_mirror_find(adm->st, mirror);
	char msg[MSG_LEN];
	int batched;

	if (m == NULL) {
		/* Deleted while we looked at the source. */
		snprintf(msg, sizeof(msg), "mirror %s does not exist", mirror);
		respond_results(rq, mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
		pending_free(pd);
		return;
	}
	if (ok && m->source_cluster_id == NULL && cluster_id != NULL &&
	    cluster_id[0] != '\0')
		mstate_set_source_cluster_id(adm->st, mirror, cluster_id, msg,
		    sizeof(msg));
	/*
	 * One fsync for the whole request (a pattern can add thousands of
	 * topics).  A batch validates each operation against the model as it
	 * was at the start, so each topic is touched once: results_has().
	 */
	batched = mstate_batch_begin(adm->st) == 0;
	/* Named topics: each must exist on the source. */
	for (int32_t i = 0; i < MAX(req->topics_n, 0); i++) {
		char *t = arena_strdup(a, req->topics[i].name);
		const struct srctopic *st;
		int code;

		if (t == NULL || results_has(&rs, t))
			continue;
		code = mstate_check_topic_name(t, msg, sizeof(msg));
		if (code != 0) {
			results_add(&rs, t, code, msg);
			continue;
		}
		if (!ok) {
			snprintf(msg, sizeof(msg), "cannot check topic %s on the source "
			    "cluster: %s", t, errstr);
			results_add(&rs, t, KERR_NETWORK_EXCEPTION, msg);
			continue;
		}
		st = srclookup_find(topics, ntopics, t);
		if (st == NULL) {
			snprintf(msg, sizeof(msg), "topic %s does not exist on the "
			    "source cluster %s", t, mirror_bootstrap(m));
			results_add(&rs, t, KERR_UNKNOWN_TOPIC_OR_PARTITION, msg);
			continue;
		}
		msg[0] = '\0';
		code = mstate_add_topic(adm->st, mirror, t, st->partitions, msg,
		    sizeof(msg));
		results_add(&rs, t, code, msg);
	}
	/* Patterns: saved for discovery, and matched against the source now. */
	if (req->include_patterns_n > 0 || req->exclude_patterns_n > 0) {
		int32_t ni = MAX(req->include_patterns_n, 0);
		int32_t ne = MAX(req->exclude_patterns_n, 0);
		const char **inc = arena_array(a, (size_t)ni, sizeof(*inc));
		const char **exc = arena_array(a, (size_t)ne, sizeof(*exc));
		int code;

		for (int32_t i = 0; inc != NULL && i < ni; i++)
			inc[i] = arena_strdup(a, req->include_patterns[i]);
		for (int32_t i = 0; exc != NULL && i < ne; i++)
			exc[i] = arena_strdup(a, req->exclude_patterns[i]);
		code = mstate_add_patterns(adm->st, mirror, inc, (size_t)ni, exc,
		    (size_t)ne, msg, sizeof(msg));
		if (code != 0) {
			if (batched)
				mstate_batch_abort(adm->st);
			respond_results(rq, mirror, (int16_t)code, msg, &rs);
			pending_free(pd);
			return;
		}
		for (size_t i = 0; ok && ni > 0 && i < ntopics; i++) {
			const char *t = topics[i].name;
			int any = 0;

			if (topics[i].internal || is_internal_name(t))
				continue;
			for (int32_t k = 0; k < ni && !any; k++)
				any = mstate_pattern_match(inc[k], t);
			if (!any)
				continue;
			for (int32_t k = 0; k < ne && any; k++)
				if (mstate_pattern_match(exc[k], t))
					any = 0;
			if (!any || mirror_topic_find(m, t) != NULL ||
			    results_has(&rs, t))
				continue;
			msg[0] = '\0';
			code = mstate_add_topic(adm->st, mirror, t,
			    topics[i].partitions, msg, sizeof(msg));
			results_add(&rs, t, code, msg);
		}
		if (!ok)
			log_warnx("mirror %s: patterns saved, but the source cannot be "
			    "read now (%s); matching topics join at the next discovery "
			    "pass", mirror, errstr);
	}
	if (batched) {
		int code = mstate_batch_commit(adm->st, msg, sizeof(msg));

		/* Nothing queued was made durable: say so for each of them. */
		for (int32_t i = 0; code != 0 && i < rs.n; i++) {
			if (rs.v[i].error_code != 0)
				continue;
			rs.v[i].error_code = (int16_t)code;
			rs.v[i].error_message = arena_kstr(a, msg);
		}
	}
	log_info("AddTopicsToMirror %s from %s: %d topic result(s)", mirror,
	    adminsrv_req_alive(rq) ? adminsrv_req_peer(rq) : "(gone)", rs.n);
	respond_results(rq, mirror, 0, NULL, &rs);
	pending_free(pd);
}

static void h_add_topics(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct results rs = { .a = a };
	struct pending *pd;
	struct mirror *m;
	char msg[MSG_LEN], err[MSG_LEN];

	pd = calloc(1, sizeof(*pd));
	if (pd == NULL)
		fatal("admin: out of memory");
	if (decode_body(rq, &pd->req) < 0) {
		free(pd);
		return;
	}
	pd->mirror = kstr_dup(pd->req.mirror_name);
	if (pd->mirror == NULL)
		pd->mirror = strdup("");
	m = mstate_mirror_find(adm->st, pd->mirror);
	if (m == NULL) {
		snprintf(msg, sizeof(msg), "mirror %s does not exist", pd->mirror);
		for (int32_t i = 0; i < MAX(pd->req.topics_n, 0); i++) {
			char *t = arena_strdup(a, pd->req.topics[i].name);

			results_add(&rs, t != NULL ? t : "", KERR_UNKNOWN_CLUSTER_MIRROR,
			    msg);
		}
		respond_results(rq, pd->mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
		free(pd->mirror);
		free(pd);
		return;
	}
	/* Bad patterns are the request's fault: say which, before any I/O. */
	for (int k = 0; k < 2; k++) {
		struct kstr *v = k == 0 ? pd->req.include_patterns :
		    pd->req.exclude_patterns;
		int32_t n = k == 0 ? pd->req.include_patterns_n :
		    pd->req.exclude_patterns_n;

		for (int32_t i = 0; i < n; i++) {
			char *p = arena_strdup(a, v[i]);
			regex_t re;
			int rc;

			if (p == NULL || p[0] == '\0') {
				snprintf(msg, sizeof(msg), "%s pattern %d is empty",
				    k == 0 ? "include" : "exclude", i);
				goto bad_request;
			}
			rc = regcomp(&re, p, REG_EXTENDED | REG_NOSUB);
			if (rc != 0) {
				char eb[128];

				regerror(rc, &re, eb, sizeof(eb));
				snprintf(msg, sizeof(msg), "%s pattern '%s' is not a valid "
				    "regular expression: %s", k == 0 ? "include" : "exclude",
				    p, eb);
				goto bad_request;
			}
			regfree(&re);
		}
	}
	pd->adm = adm;
	pd->rq = rq;
	pd->next = adm->pending;
	if (adm->pending != NULL)
		adm->pending->prevp = &pd->next;
	pd->prevp = &adm->pending;
	adm->pending = pd;
	pd->lookup = srclookup_start(adm->base, m, LOOKUP_TIMEOUT_MS,
	    add_lookup_done, pd, err, sizeof(err));
	if (pd->lookup == NULL) {
		/* Bad stored settings: answer as if the source were down. */
		add_lookup_done(pd, 0, err, NULL, NULL, 0);
	}
	return;
bad_request:
	respond_results(rq, pd->mirror, KERR_INVALID_REQUEST, msg, &rs);
	free(pd->mirror);
	free(pd);
}

/* ---- dispatch ----------------------------------------------------------- */

static void dispatch(struct adminsrv_req *rq, void *arg)
{
	struct admin *adm = arg;
	int16_t key = adminsrv_req_api_key(rq), ver = adminsrv_req_api_version(rq);
	const struct kp_api *api = kp_api_find(key);

	if (api == NULL || api->served_min < 0) {
		char d[64];

		snprintf(d, sizeof(d), "ApiKey %d is not served here", key);
		adminsrv_reject(rq, ADMINSRV_REJECT_UNKNOWN_API, d);
		return;
	}
	if (key != KP_API_API_VERSIONS &&
	    (ver < api->served_min || ver > api->served_max)) {
		char d[96];

		snprintf(d, sizeof(d), "%s v%d is not supported (v%d-%d are)",
		    api->name, ver, api->served_min, api->served_max);
		adminsrv_reject(rq, ADMINSRV_REJECT_UNSUPPORTED_VERSION, d);
		return;
	}
	switch (key) {
	case KP_API_API_VERSIONS: h_api_versions(adm, rq); break;
	case KP_API_METADATA: h_metadata(adm, rq); break;
	case KP_API_CREATE_MIRROR: h_create_mirror(adm, rq); break;
	case KP_API_ADD_TOPICS_TO_MIRROR: h_add_topics(adm, rq); break;
	case KP_API_REMOVE_TOPICS_FROM_MIRROR:
	case KP_API_PAUSE_MIRROR_TOPICS:
	case KP_API_RESUME_MIRROR_TOPICS: h_topics_op(adm, rq); break;
	case KP_API_LIST_MIRRORS: h_list_mirrors(adm, rq); break;
	case KP_API_DESCRIBE_MIRRORS: h_describe_mirrors(adm, rq); break;
	case KP_API_DELETE_MIRROR: h_delete_mirror(adm, rq); break;
	default:
		adminsrv_reject(rq, ADMINSRV_REJECT_UNKNOWN_API, "no handler");
		break;
	}
}

static void observe(void *arg, int16_t key, int16_t err, int reject)
{
	struct admin *adm = arg;

	if (adm->ms == NULL)
		return;
	if (reject >= 0) {
		metrics_counter_inc(metrics_series(MSTD(adm->ms,
		    ADMIN_REJECTED_REQUESTS), 1,
		    (const char *[]){ adminsrv_reject_name(reject) }));
		return;
	}
	metrics_counter_inc(metrics_series(MSTD(adm->ms, ADMIN_REQUESTS), 2,
	    (const char *[]){ kp_api_name(key), kerr_name(err) }));
}

static double connections_value(void *arg)
{
	struct admin *adm = arg;

	return adm->srv != NULL ? adminsrv_connections(adm->srv) : 0;
}

struct admin *admin_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct pipeline *pl, struct metrics_std *ms,
    char *err, size_t errlen)
{
	struct admin *adm = calloc(1, sizeof(*adm));
	struct adminsrv_opts o;

	if (adm == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	adm->base = base;
	adm->st = st;
	adm->cfg = cfg;
	adm->pl = pl;
	adm->ms = ms;
	memset(&o, 0, sizeof(o));
	o.host = cfg->server_listen.host != NULL ? cfg->server_listen.host : "";
	o.port = cfg->server_listen.port;
	o.max_request_bytes = (size_t)cfg->server_max_request_bytes;
	o.max_connections = (int)cfg->server_max_connections;
	o.dispatch = dispatch;
	o.observe = observe;
	o.arg = adm;
	adm->auth = adminauth_new(cfg, err, errlen);
	if (adm->auth == NULL) {
		free(adm);
		return NULL;
	}
	o.auth = adm->auth;
	adm->srv = adminsrv_new(base, &o, err, errlen);
	if (adm->srv == NULL) {
		adminauth_free(adm->auth);
		free(adm);
		return NULL;
	}
	if (ms != NULL)
		metrics_series_set_fn(metrics_series(MSTD(ms, ADMIN_CONNECTIONS), 0,
		    NULL), connections_value, adm);
	/* Mirrors created while their source was down learn its id now. */
	for (size_t i = 0; i < mstate_mirror_count(st); i++) {
		const struct mirror *m = mstate_mirror_at(st, i);

		if (m->source_cluster_id == NULL)
			resolve_source_id(adm, m);
	}
	return adm;
}

void admin_set_config(struct admin *adm, const struct config *cfg)
{
	adm->cfg = cfg;
	adminsrv_set_max_request_bytes(adm->srv,
	    (size_t)cfg->server_max_request_bytes);
	{
		char err[512];

		if (adminauth_reload(adm->auth, cfg, err, sizeof(err)) < 0)
			log_warnx("reload: %s", err);
	}
}

void admin_stop_accepting(struct admin *adm)
{
	adminsrv_stop_accepting(adm->srv);
}

int admin_port(const struct admin *adm)
{
	return adminsrv_port(adm->srv);
}

void admin_free(struct admin *adm)
{
	if (adm == NULL)
		return;
	while (adm->pending != NULL) {
		struct pending *pd = adm->pending;

		srclookup_free(pd->lookup);
		pd->lookup = NULL;
		*pd->prevp = pd->next;
		if (pd->next != NULL)
			pd->next->prevp = pd->prevp;
		free(pd->mirror);
		free(pd);
	}
	while (adm->resolves != NULL)
		resolve_free(adm->resolves);
	adminsrv_free(adm->srv);
	adminauth_free(adm->auth);
	free(adm);
}
