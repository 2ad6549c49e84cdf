/*
 * admin.c: see admin.h.  Each handler decodes its request from the
 * request's arena, does its work, encodes the response, and answers through
 * adminsrv.  AddTopicsToMirror is the one asynchronous handler: it looks at
 * the source cluster first (srclookup) and answers when that is done; the
 * connection reads no further request meanwhile, so answers stay in order.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "admin.h"
#include "adminauth.h"
#include "adminsrv.h"
#include "authz.h"
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
#include "mirrormark.h"
#include "pipeline.h"
#include "secrets.h"
#include "srclookup.h"
#include "tpattern.h"

/* Room for a 144 message: a principal (up to 511 bytes), the operation,
 * a mirror name and the API. */
#define MSG_LEN 1024
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
	struct authz *az;        /* rules in force, rebuilt on reload */
	int loopback_only;       /* server.listen reaches this machine only */
	const struct admin_cluster_view *cv; /* several instances, or NULL */
	void *cv_arg;
	/* The operator's writes, one at a time (struct awrite). */
	struct awrite *wq_head, *wq_tail;
	int wq_busy;             /* the head has the log (excl) */
};

/* An AddTopicsToMirror waiting for its source lookup. */
struct pending {
	struct pending *next, **prevp;
	struct admin *adm;
	struct adminsrv_req *rq;
	struct kp_add_topics_to_mirror_request req;
	char *mirror;
	struct srclookup *lookup;
	/* What the lookup found, copied into the request's arena. */
	int ok;
	const char *errstr, *cluster_id;
	struct srctopic *topics;
	size_t ntopics;
};

/*
 * An operator's command that changes the metadata.  The commands run one
 * at a time, each when the metadata log is exclusively its own
 * (mstate_excl_begin(): every write before it applied, later ones held),
 * so it validates against everything before it; its records go as one
 * group and the answer waits until they are durable and applied.  The
 * loop never waits for the disk (or the replicated log) meanwhile.
 * run() validates and queues (the synchronous mstate forms queue in the
 * open batch); it either answers at once (nothing to write: kind stays
 * AW_NONE and anything queued is dropped) or sets kind and what the
 * answer needs, for awrite_finish().
 */
enum { AW_NONE, AW_CREATE, AW_DELETE, AW_TOPICS, AW_ADD, AW_RESOLVE,
    AW_CONFIGS };

struct results {
	struct karena *a;
	struct kp_add_topics_to_mirror_response_topic_result *v;
	int32_t n, cap;
	int32_t *slots;   /* index + 1 into v, 0 = empty; 2 * cap of them */
	int oom;          /* the arena ran out: some result is missing */
	struct kstr warning; /* AddTopicsToMirror's WarningMessage, or null */
	/* RemoveTopicsFromMirror: what its patterns did (tags 0-1). */
	struct kstr *inc_removed, *exc_added;
	int32_t ninc_removed, nexc_added;
};

struct awrite {
	struct awrite *next;
	struct admin *adm;
	struct adminsrv_req *rq;  /* NULL: the daemon's own (AW_RESOLVE) */
	void (*run)(struct awrite *w);
	int kind;                 /* AW_* */
	const char *name;         /* the mirror (create, delete, topics) */
	struct results rs;        /* topics, add */
	struct pending *pd;       /* add: freed at the answer */
	char *mirror, *cluster_id; /* resolve: heap */
	char *bootstrap;          /* resolve: the source it looked at */
	/* configs: the answer, and which resources were queued */
	struct kp_incremental_alter_configs_response *iac;
	char *iac_queued;
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

/* The request's working memory (its arena) ran out: close cleanly. */
static void reject_arena(struct adminsrv_req *rq, const char *what)
{
	char d[160];

	snprintf(d, sizeof(d), "request too large to handle: its working memory "
	    "ran out while building %s", what);
	adminsrv_reject(rq, ADMINSRV_REJECT_OVERSIZED, d);
}

/* 1 if w failed only because the encoding outgrew its cap. */
static int kw_over_cap(const struct kw *w)
{
	return w->err && w->why != NULL && strstr(w->why, "cap") != NULL;
}

static size_t max_response(const struct admin *adm)
{
	return (size_t)adm->cfg->server_max_response_bytes;
}

static uint32_t name_hash(const char *p, size_t n)
{
	return fnv1a32(p, n);
}

/* Answers with the encoding in w (rc: the encoder's return value). */
static void send_encoded(struct adminsrv_req *rq, struct kw *w, int rc,
    int16_t error_code)
{
	int16_t key = adminsrv_req_api_key(rq), ver = adminsrv_req_api_version(rq);
	int hv;

	if (kw_over_cap(w)) {
		char d[160];

		snprintf(d, sizeof(d), "the %s v%d response would exceed "
		    "server.max_response_bytes (%zu)", kp_api_name(key), ver, w->max);
		adminsrv_reject(rq, ADMINSRV_REJECT_RESPONSE_TOO_LARGE, d);
		return;
	}
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

/*
 * Encodes msg (the response struct of the request's ApiKey) into at most
 * server.max_response_bytes and answers.  With fallback set, an encoding
 * over the cap sends nothing and returns -1 so the caller can answer
 * smaller; otherwise it closes the connection naming the limit.
 */
static int respond_capped(struct admin *adm, struct adminsrv_req *rq,
    const void *msg, int16_t error_code, int fallback)
{
	const struct kp_api *api = kp_api_find(adminsrv_req_api_key(rq));
	struct kw w;
	int rc;

	kw_init(&w, max_response(adm));
	rc = api->response_encode(&w, adminsrv_req_api_version(rq), msg);
	if (fallback && kw_over_cap(&w)) {
		kw_fini(&w);
		return -1;
	}
	send_encoded(rq, &w, rc, error_code);
	kw_fini(&w);
	return 0;
}

static void respond(struct admin *adm, struct adminsrv_req *rq,
    const void *msg, int16_t error_code)
{
	respond_capped(adm, rq, msg, error_code, 0);
}

/* The message for an answer that would not fit. */
static void too_large_msg(struct admin *adm, struct adminsrv_req *rq,
    char *msg, size_t len, const char *advice)
{
	snprintf(msg, len, "the %s response would exceed server.max_response_bytes "
	    "(%zu bytes); %s", kp_api_name(adminsrv_req_api_key(rq)),
	    max_response(adm), advice);
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

/* ---- authorization ------------------------------------------------------ */

/*
 * What the admin listener's security means for authorization: authn_on is
 * whether clients authenticate (SASL, or SSL with client certificates
 * requested or required; authorization.enabled = auto then denies by
 * default); anonymous is whether a client can be User:ANONYMOUS
 * at all: on PLAINTEXT, and on SSL without required client certificates.
 */
struct listener_sec {
	int authn_on;
	int anonymous;
};

static struct listener_sec listener_security(const struct config *cfg)
{
	switch (cfg->server_security_protocol) {
	case CONFIG_SEC_SSL:
		/* Without client certificates nobody authenticates on SSL. */
		return (struct listener_sec){ .authn_on =
		    cfg->server_ssl_client_auth != CONFIG_CLIENT_AUTH_NONE, .anonymous =
		    cfg->server_ssl_client_auth != CONFIG_CLIENT_AUTH_REQUIRED };
	case CONFIG_SEC_SASL_PLAINTEXT:
	case CONFIG_SEC_SASL_SSL:
		return (struct listener_sec){ .authn_on = 1, .anonymous = 0 };
	default:
		return (struct listener_sec){ .authn_on = 0, .anonymous = 1 };
	}
}

/* 1 if a listen host can only be reached from this machine. */
static int host_is_loopback(const char *h)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (h == NULL)
		return 0;
	if (strcmp(h, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, h, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		    (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	/* Another host name may resolve to anything: assume it is exposed. */
	return 0;
}

/*
 * Builds the rules of cfg and swaps them in; logs what is in force and,
 * when other hosts can reach the listener and anonymous clients may change
 * mirrors, one warning saying what to configure.  -1 (old rules kept) only
 * when out of memory.
 */
static int authz_load(struct admin *adm, const struct config *cfg)
{
	struct listener_sec ls = listener_security(cfg);
	const char *host = cfg->server_listen.host != NULL ?
	    cfg->server_listen.host : "";
	int v6 = strchr(host, ':') != NULL;
	/* The bound port: server.listen may say 0 (any free port). */
	int port = adm->srv != NULL ? admin_port(adm) : cfg->server_listen.port;
	char err[256], d[256];
	struct authz *az;

	az = authz_new(cfg, ls.authn_on, err, sizeof(err));
	if (az == NULL) {
		log_warnx("authorization: %s; the rules in force stay", err);
		return -1;
	}
	authz_free(adm->az);
	adm->az = az;
	authz_describe(az, d, sizeof(d));
	log_info("authorization: %s", d);
	if (!adm->loopback_only && ls.anonymous &&
	    authz_may_alter_some(az, AUTHZ_ANONYMOUS))
		log_warnx("admin listener %s%s%s:%d accepts connections from other "
		    "hosts, and anonymous clients (User:ANONYMOUS) may create, "
		    "change and delete mirrors (%s); set server.listen to "
		    "127.0.0.1:%d, or configure authentication "
		    "(server.security_protocol) and authorization "
		    "(authorization.acls, authorization.super_users)",
		    v6 ? "[" : "", host, v6 ? "]" : "", port,
		    authz_enabled(az) ? "allowed by authorization.acls or "
		    "authorization.super_users" : "authorization is off", port);
	return 0;
}

static void count_denied(struct admin *adm, int16_t key, enum authz_op op,
    double n)
{
	if (adm->ms == NULL || n <= 0)
		return;
	metrics_counter_add(metrics_series(MSTD(adm->ms,
	    ADMIN_AUTHORIZATION_DENIED), 2,
	    (const char *[]){ kp_api_name(key), authz_op_name(op) }), n);
}

/*
 * 0 if the request's principal may do op to the mirror; otherwise
 * CLUSTER_MIRROR_AUTHORIZATION_FAILED with the answer's message in msg
 * ("User:bob may not alter mirror prod-x (CreateMirror)": who, what, which
 * mirror), the refusal logged (principal, peer, operation, mirror, and the
 * rule or the absence of one that decided) unless quiet, and counted.
 * Called before anything else looks at the mirror, so a refusal says
 * nothing about whether the mirror exists.
 */
static int16_t authorize(struct admin *adm, struct adminsrv_req *rq,
    enum authz_op op, const char *mirror, int quiet, char *msg, size_t msglen)
{
	const char *who = adminsrv_req_principal(rq);
	int16_t key = adminsrv_req_api_key(rq);
	char why[320], shown[251];
	size_t i;

	if (mirror == NULL)
		mirror = "";
	if (authz_allowed(adm->az, who, op, mirror, why, sizeof(why))) {
		/* Several instances: only the metadata writer changes mirrors;
		 * the others name it, as a broker answers NOT_CONTROLLER. */
		if ((op == AUTHZ_ALTER || op == AUTHZ_ALTER_CONFIGS) &&
		    adm->cv != NULL &&
		    !adm->cv->may_mutate(adm->cv_arg, msg, msglen)) {
			log_info("%s from %s: %s", kp_api_name(key),
			    adminsrv_req_peer(rq), msg);
			return KERR_NOT_CONTROLLER;
		}
		return 0;
	}
	/* The name comes from the wire: show at most a valid name's length,
	 * and nothing that could forge a log line. */
	for (i = 0; i < sizeof(shown) - 1 && mirror[i] != '\0'; i++)
		shown[i] = mirror[i] >= 0x20 && mirror[i] < 0x7f ? mirror[i] : '?';
	shown[i] = '\0';
	snprintf(msg, msglen, "%s may not %s mirror %s (%s)", who,
	    authz_op_name(op), shown, kp_api_name(key));
	if (!quiet)
		log_warnx("authorization: %s from %s may not %s mirror %s (%s): %s",
		    who, adminsrv_req_peer(rq), authz_op_name(op), shown,
		    kp_api_name(key), why);
	count_denied(adm, key, op, 1);
	return KERR_CLUSTER_MIRROR_AUTHORIZATION_FAILED;
}

/* 1 if the request's principal may describe m (list filtering: a mirror
 * left out of a listing is not a refusal, so neither logged nor counted). */
static int may_describe(struct admin *adm, struct adminsrv_req *rq,
    const struct mirror *m)
{
	return authz_allowed(adm->az, adminsrv_req_principal(rq),
	    AUTHZ_DESCRIBE, m->name, NULL, 0);
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
		if (resp.api_keys == NULL) {
			reject_arena(rq, "the ApiVersions response");
			return;
		}
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
	if (resp.api_keys == NULL) {
		reject_arena(rq, "the ApiVersions response");
		return;
	}
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
	respond(adm, rq, &resp, 0);
}

/* ---- Metadata ----------------------------------------------------------- */

#define ADMIN_MAX_MEMBERS 256

/* Several instances: every member a broker, the writer the controller.
 * Leaves brokers_n 0 when the group is not known yet; -1 if rejected. */
static int metadata_members(struct admin *adm, struct adminsrv_req *rq,
    struct kp_metadata_response *resp)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct admin_broker *v;
	int32_t controller = -1;
	size_t n;

	v = calloc(ADMIN_MAX_MEMBERS, sizeof(*v));
	if (v == NULL)
		fatal("admin: out of memory");
	n = adm->cv->brokers(adm->cv_arg, v, ADMIN_MAX_MEMBERS, &controller);
	if (n > 0) {
		resp->brokers = arena_array(a, n, sizeof(*resp->brokers));
		if (resp->brokers == NULL) {
			free(v);
			reject_arena(rq, "the Metadata response");
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			kp_metadata_response_broker_init(&resp->brokers[i]);
			resp->brokers[i].node_id = v[i].node_id;
			resp->brokers[i].host = arena_kstr(a, v[i].host);
			resp->brokers[i].port = v[i].port;
		}
		resp->brokers_n = (int32_t)n;
		resp->controller_id = controller;
	}
	free(v);
	return 0;
}

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
	if (adm->cv != NULL && metadata_members(adm, rq, &resp) < 0)
		return;
	if (resp.brokers_n <= 0) {
		resp.brokers = arena_array(a, 1, sizeof(*resp.brokers));
		if (resp.brokers == NULL) {
			reject_arena(rq, "the Metadata response");
			return;
		}
		kp_metadata_response_broker_init(&resp.brokers[0]);
		resp.brokers[0].node_id = (int32_t)cfg->server_node_id;
		resp.brokers[0].host = kstr_c(cfg->server_advertised.host);
		resp.brokers[0].port = cfg->server_advertised.port != 0 ?
		    cfg->server_advertised.port : admin_port(adm);
		resp.brokers_n = 1;
		resp.controller_id = (int32_t)cfg->server_node_id;
	}
	resp.cluster_id = kstr_c(mstate_cluster_id(adm->st));
	/*
	 * mirrord hosts no topics.  A request for all topics (null, or an
	 * empty array at v0) gets none; named topics get
	 * UNKNOWN_TOPIC_OR_PARTITION each, as a broker that lacks them says.
	 */
	resp.topics_n = 0;
	if (req.topics_n > 0) {
		resp.topics = arena_array(a, (size_t)req.topics_n,
		    sizeof(*resp.topics));
		if (resp.topics == NULL) {
			reject_arena(rq, "the Metadata response");
			return;
		}
		for (int32_t i = 0; i < req.topics_n; i++) {
			kp_metadata_response_topic_init(&resp.topics[i]);
			resp.topics[i].error_code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			resp.topics[i].name = req.topics[i].name;
			resp.topics[i].partitions_n = 0;
		}
		resp.topics_n = req.topics_n;
	}
	(void)ver;
	respond(adm, rq, &resp, 0);
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
	rs->lookup = srclookup_start(rs->adm->base, m,
	    (const char *const *)rs->adm->cfg->mirrors_allowed_file_dirs.v,
	    LOOKUP_TIMEOUT_MS,
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

static void awrite_queue(struct admin *adm, struct awrite *w);

/* The source cluster id of a mirror, recorded as an operator's write
 * would be (the daemon's own: nobody is answered). */
static void aw_resolve(struct awrite *w)
{
	struct mirror *m = mstate_mirror_find(w->adm->st, w->mirror);
	char msg[MSG_LEN];

	if (m == NULL || m->source_cluster_id != NULL ||
	    strcmp(mirror_bootstrap(m), w->bootstrap) != 0)
		return;   /* deleted (or made again), or learnt meanwhile */
	if (mstate_set_source_cluster_id(w->adm->st, w->mirror, w->cluster_id,
	    msg, sizeof(msg)) != 0) {
		log_warnx("mirror %s: %s", w->mirror, msg);
		return;
	}
	w->kind = AW_RESOLVE;
}

static void resolve_record(struct admin *adm, const struct mirror *m,
    const char *cluster_id)
{
	struct awrite *w = calloc(1, sizeof(*w));

	if (w == NULL || (w->mirror = strdup(m->name)) == NULL ||
	    (w->cluster_id = strdup(cluster_id)) == NULL ||
	    (w->bootstrap = strdup(mirror_bootstrap(m))) == NULL)
		fatal("admin: out of memory");
	w->adm = adm;
	w->run = aw_resolve;
	awrite_queue(adm, w);
}

static void resolve_done(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics)
{
	struct resolve *rs = arg;
	struct mirror *m = mstate_mirror_find(rs->adm->st, rs->mirror);

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
	if (m != NULL && m->source_cluster_id == NULL)
		resolve_record(rs->adm, m, cluster_id);
	resolve_free(rs);
}

static void aw_create(struct awrite *w)
{
	struct admin *adm = w->adm;
	struct adminsrv_req *rq = w->rq;
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
		reject_arena(rq, "the mirror's configs");
		return;
	}
	code = authorize(adm, rq, AUTHZ_ALTER, name, 0, msg, sizeof(msg));
	if (code != 0) {
		resp.error_code = code;
		resp.error_message = arena_kstr(a, msg);
		respond(adm, rq, &resp, code);
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		names[i] = arena_strdup(a, req.configs[i].name);
		values[i] = arena_strdup(a, req.configs[i].value);
		if (names[i] == NULL || (values[i] == NULL &&
		    req.configs[i].value.len >= 0)) {
			reject_arena(rq, "the mirror's configs");
			return;
		}
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
	/* Files named over the wire: only regular files inside the operator's
	 * directories (a look, no open: nothing here can block). */
	if (code == 0)
		mirrorconf_check_files(names, values, (size_t)n,
		    (const char *const *)adm->cfg->mirrors_allowed_file_dirs.v,
		    &code, msg, sizeof(msg));
	/* Config provider references: the wire policy, and what they name is
	 * there (a missing file or variable fails now, not at first use). */
	for (int32_t i = 0; code == 0 && i < n; i++)
		if (secrets_check_wire(names[i], values[i], msg, sizeof(msg)) < 0)
			code = KERR_INVALID_CONFIG;
	if (code == 0 && mstate_mirror_find(adm->st, name) == NULL &&
	    mstate_mirror_count(adm->st) >= (size_t)adm->cfg->limits_max_mirrors) {
		snprintf(msg, sizeof(msg), "mirrord already holds %zu mirrors, the "
		    "most limits.max_mirrors (%" PRId64 ") allows; delete a mirror or "
		    "raise the limit", mstate_mirror_count(adm->st),
		    adm->cfg->limits_max_mirrors);
		code = KERR_POLICY_VIOLATION;
	}
	if (code == 0)
		code = (int16_t)mstate_create_mirror(adm->st, name, cfgs, (size_t)n,
		    msg, sizeof(msg));
	if (code == 0) {
		/* Queued: answered once durable (awrite_finish()). */
		w->kind = AW_CREATE;
		w->name = name;
		return;
	}
	log_info("CreateMirror %s from %s refused: %s: %s", name,
	    adminsrv_req_peer(rq), kerr_name(code), msg);
	resp.error_code = code;
	resp.error_message = arena_kstr(a, msg);
	respond(adm, rq, &resp, code);
}

static void aw_delete(struct awrite *w)
{
	struct admin *adm = w->adm;
	struct adminsrv_req *rq = w->rq;
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
	if (name == NULL) {
		reject_arena(rq, "the mirror name");
		return;
	}
	code = authorize(adm, rq, AUTHZ_ALTER, name, 0, msg, sizeof(msg));
	if (code == 0)
		code = (int16_t)mstate_delete_mirror(adm->st, name, msg, sizeof(msg));
	if (code == 0) {
		w->kind = AW_DELETE;
		w->name = name;
		return;
	}
	resp.error_code = code;
	resp.error_message = arena_kstr(a, msg);
	respond(adm, rq, &resp, code);
}

static void h_list_mirrors(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_list_mirrors_request req;
	struct kp_list_mirrors_response resp;
	size_t n = mstate_mirror_count(adm->st), j = 0;

	if (decode_body(rq, &req) < 0)
		return;
	kp_list_mirrors_response_init(&resp);
	resp.mirrors = arena_array(a, n, sizeof(*resp.mirrors));
	if (resp.mirrors == NULL) {
		reject_arena(rq, "the ListMirrors response");
		return;
	}
	/* Only the mirrors the principal may describe (as Kafka lists topics). */
	for (size_t i = 0; i < n; i++) {
		const struct mirror *m = mstate_mirror_at(adm->st, i);

		if (!may_describe(adm, rq, m))
			continue;
		kp_list_mirrors_response_mirror_init(&resp.mirrors[j]);
		resp.mirrors[j].mirror_name = kstr_c(m->name);
		resp.mirrors[j].source_bootstrap = kstr_c(mirror_bootstrap(m));
		resp.mirrors[j].source_cluster_id = kstr_c(
		    m->source_cluster_id != NULL ? m->source_cluster_id : "");
		resp.mirrors[j].topic_count = (int32_t)m->ntopics;
		j++;
	}
	resp.mirrors_n = (int32_t)j;
	if (respond_capped(adm, rq, &resp, 0, 1) < 0) {
		char msg[MSG_LEN];

		too_large_msg(adm, rq, msg, sizeof(msg), "raise the limit");
		kp_list_mirrors_response_init(&resp);
		resp.error_code = KERR_POLICY_VIOLATION;
		resp.error_message = kstr_c(msg);
		resp.mirrors_n = 0;
		respond(adm, rq, &resp, KERR_POLICY_VIOLATION);
	}
}

/* ---- is a mirror current ------------------------------------------- */

int admin_mirror_status(struct admin *adm, const char *mirror,
    struct admin_mirror_status *out)
{
	const struct mirror *m = mstate_mirror_find(adm->st, mirror);
	struct pipeline_mirror_health h;

	memset(out, 0, sizeof(*out));
	if (m == NULL)
		return -1;
	out->max_lag = out->max_lag_ms = -1;
	out->source_up = 1;
	if (pipeline_mirror_health(adm->pl, mirror, &h) == 0 && !h.source_up) {
		out->source_up = 0;
		snprintf(out->reason, sizeof(out->reason), "%s", h.reason);
	}
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];

		for (int32_t i = 0; i < mt->npart; i++) {
			const struct mpart *mp = mt->parts[i];
			struct admin_partition_numbers rn;
			struct pipeline_status ps;
			struct pipeline_live live;
			int64_t lag = -1, lag_ms = -1;
			char why[1200] = "";

			out->partitions++;
			switch (mp->state) {
			case MPART_STOPPED:
			case MPART_STOPPING:
				out->stopped++;
				continue;
			case MPART_FAILED:
				out->failed++;
				if (out->reason[0] == '\0')
					snprintf(out->reason, sizeof(out->reason),
					    "%s-%d FAILED: %.1000s", mt->name,
					    (int)mp->index, mp->error != NULL ?
					    mp->error : "");
				continue;
			case MPART_PAUSED:
			case MPART_PAUSING:
				out->paused++;
				break;
			case MPART_MIRRORING:
				out->mirroring++;
				break;
			default:
				out->other++;
				break;
			}
			if (adm->cv != NULL && adm->cv->partition_numbers != NULL &&
			    adm->cv->partition_numbers(adm->cv_arg, mp, &rn)) {
				lag = rn.lag;
				lag_ms = rn.lag_ms;
				snprintf(why, sizeof(why), "%s", rn.reason);
			} else {
				if (pipeline_partition_live(adm->pl, mp, &live) == 0)
					lag = live.lag;
				if (pipeline_partition_status(adm->pl, mp, &ps) == 0) {
					lag_ms = ps.lag_ms;
					if (ps.stalled)
						snprintf(why, sizeof(why), "%s",
						    ps.reason);
				}
			}
			out->max_lag = MAX(out->max_lag, lag);
			out->max_lag_ms = MAX(out->max_lag_ms, lag_ms);
			if (lag_ms < 0)
				out->lag_unknown++;
			if (why[0] == '\0')
				continue;
			if (mp->state != MPART_PAUSED && mp->state != MPART_PAUSING)
				out->stalled++;
			if (strncmp(why, "cannot read the source", 22) == 0)
				out->source_up = 0;
			if (out->reason[0] == '\0')
				snprintf(out->reason, sizeof(out->reason), "%s-%d: %.1000s",
				    mt->name, (int)mp->index, why);
		}
	}
	return 0;
}

const char *admin_mirror_name(struct admin *adm, size_t i)
{
	return i < mstate_mirror_count(adm->st) ?
	    mstate_mirror_at(adm->st, i)->name : NULL;
}

/* ---- DescribeMirrors ------------------------------------------------- */

/* Fills out for m; -1 when the arena ran out. */
static int describe_one(struct admin *adm, struct karena *a,
    const struct mirror *m, struct kp_describe_mirrors_response_mirror *out)
{
	out->mirror_name = kstr_c(m->name);
	out->topics = arena_array(a, m->ntopics, sizeof(*out->topics));
	if (out->topics == NULL)
		return -1;
	out->topics_n = (int32_t)m->ntopics;
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];
		struct kp_describe_mirrors_response_topic *ot = &out->topics[t];

		kp_describe_mirrors_response_topic_init(ot);
		ot->name = kstr_c(mt->name);
		ot->partitions = arena_array(a, (size_t)mt->npart,
		    sizeof(*ot->partitions));
		if (ot->partitions == NULL)
			return -1;
		ot->partitions_n = mt->npart;
		for (int32_t p = 0; p < mt->npart; p++) {
			const struct mpart *mp = mt->parts[p];
			struct kp_describe_mirrors_response_partition *op =
			    &ot->partitions[p];
			int64_t src = -1, dst = -1;
			struct pipeline_live live;
			struct pipeline_status ps;
			struct admin_partition_numbers rn;
			char warn[2048];

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
			/* What is known and since when (pipeline/health.c); the
			 * lag in time as mirrord_partition_lag_seconds. */
			if (pipeline_partition_status(adm->pl, mp, &ps) == 0) {
				op->lag_ms = ps.lag_ms;
				op->source_offset_age_ms = ps.source_offset_age_ms;
				op->caught_up_time_ms = ps.caught_up_ms;
				if (ps.stalled) {
					op->stalled_since_ms = ps.stalled_since_ms;
					op->stalled_reason = arena_kstr(a, ps.reason);
					if (op->stalled_reason.p == NULL)
						return -1;
				}
			}
			if (adm->cv != NULL && adm->cv->partition_numbers != NULL &&
			    adm->cv->partition_numbers(adm->cv_arg, mp, &rn)) {
				/* Another instance copies it: its published
				 * numbers (the status topic), aged. */
				op->source_offset = rn.src;
				op->destination_offset = rn.dst;
				op->lag = rn.lag;
				op->lag_ms = rn.lag_ms;
				op->source_offset_age_ms = rn.src_age_ms;
				op->caught_up_time_ms = rn.caught_up_ms;
				op->stalled_since_ms = rn.stalled_since_ms;
				if (rn.reason[0] != '\0') {
					op->stalled_reason = arena_kstr(a, rn.reason);
					if (op->stalled_reason.p == NULL)
						return -1;
				}
			}
			op->state = kstr_c(mpart_state_name(mp->state));
			/* FAILED: why; STOPPING/STOPPED: why mirrord stopped
			 * it itself (its source topic was deleted), if so. */
			op->error_message = kstr_c(mp->state == MPART_FAILED ?
			    mp->error : (mp->state == MPART_STOPPING ||
			    mp->state == MPART_STOPPED) ? mp->topic->note : NULL);
			op->last_mirrored_epoch = mp->last_epoch;
			op->last_mirrored_offset = mp->last_offset;
			if (mp->state == MPART_STOPPED && mp->has_failover) {
				op->failover_source_offset = mp->failover.src_hwm;
				op->failover_lag = mp->failover.lag;
				op->failover_lag_ms = mp->failover.lag_ms;
				if (mp->failover.hwm_at >= 0 &&
				    mp->failover.stopped_at >= 0)
					op->failover_source_offset_age_ms = MAX(
					    mp->failover.stopped_at -
					    mp->failover.hwm_at, 0);
				op->failover_lag_is_lower_bound = !mp->failover.asked;
			}
			if (pipeline_partition_warning(adm->pl, mp, warn, sizeof(warn))) {
				op->warning_message = arena_kstr(a, warn);
				if (op->warning_message.p == NULL)
					return -1;
			}
		}
	}
	return 0;
}

/* The strings of list as an arena array. */
static struct kstr *pattern_array(struct karena *a, char *const *list,
    size_t n)
{
	struct kstr *v = arena_array(a, n, sizeof(*v));

	for (size_t i = 0; v != NULL && i < n; i++)
		v[i] = kstr_c(list[i]);
	return v;
}

/* The mirror's saved include and exclude patterns (tagged fields 0-1 of
 * a DescribeMirrors mirror); -1 when the arena ran out. */
static int describe_patterns(struct karena *a, const struct mirror *m,
    struct kp_describe_mirrors_response_mirror *out)
{
	out->include_patterns = pattern_array(a, m->includes, m->nincludes);
	out->exclude_patterns = pattern_array(a, m->excludes, m->nexcludes);
	if (out->include_patterns == NULL || out->exclude_patterns == NULL)
		return -1;
	out->include_patterns_n = (int32_t)m->nincludes;
	out->exclude_patterns_n = (int32_t)m->nexcludes;
	return 0;
}

/*
 * A lower bound of m's encoded size in a DescribeMirrors response, to refuse
 * an answer over server.max_response_bytes before building it.
 */
static size_t describe_estimate(const struct mirror *m)
{
	size_t n = 16 + strlen(m->name);

	for (size_t t = 0; t < m->ntopics; t++)
		n += 8 + strlen(m->topics[t]->name) +
		    (size_t)MAX(m->topics[t]->npart, 0) * 36;
	return n;
}

/*
 * Positions of the distinct names in *out, in the order first named (a
 * request may name a mirror many times; it is described once).  A hash of
 * the names keeps this linear for any number of names.  Returns their
 * count, or -1 when the arena ran out.
 */
static int32_t distinct_names(struct karena *a, const struct kstr *names,
    int32_t n, int32_t **out)
{
	size_t nslots = 16, mask;
	int32_t *slots, *v, nv = 0;

	while (nslots < (size_t)n * 2)
		nslots *= 2;
	slots = arena_array(a, nslots, sizeof(*slots));
	v = arena_array(a, (size_t)n, sizeof(*v));
	if (slots == NULL || v == NULL)
		return -1;
	mask = nslots - 1;
	for (int32_t i = 0; i < n; i++) {
		size_t k = name_hash(names[i].p, (size_t)MAX(names[i].len, 0)) & mask;

		while (slots[k] != 0 && !kstr_same(names[slots[k] - 1], names[i]))
			k = (k + 1) & mask;
		if (slots[k] == 0) {
			slots[k] = i + 1;
			v[nv++] = i;
		}
	}
	*out = v;
	return nv;
}

static void h_describe_mirrors(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_describe_mirrors_request req;
	struct kp_describe_mirrors_response resp;
	const struct mirror **ms;
	struct kstr *asked;   /* the name asked for, for unknown mirrors */
	struct kstr *denied_msg; /* set when the principal may not describe it */
	int32_t *pos, denied = 0;
	size_t n = 0, est = 0;
	char msg[MSG_LEN], first[MSG_LEN] = "";

	if (decode_body(rq, &req) < 0)
		return;
	kp_describe_mirrors_response_init(&resp);
	if (req.mirror_names_n <= 0) {
		size_t all = mstate_mirror_count(adm->st);

		ms = arena_array(a, all, sizeof(*ms));
		asked = arena_array(a, all, sizeof(*asked));
		denied_msg = arena_array(a, all, sizeof(*denied_msg));
		if (ms == NULL || asked == NULL || denied_msg == NULL)
			goto arena;
		/* All mirrors: those the principal may not describe are left
		 * out, as Kafka leaves unauthorized topics out of Metadata. */
		for (size_t i = 0; i < all; i++) {
			const struct mirror *m = mstate_mirror_at(adm->st, i);

			if (!may_describe(adm, rq, m))
				continue;
			ms[n] = m;
			denied_msg[n] = KSTR_NULL;
			est += describe_estimate(ms[n]);
			n++;
		}
	} else {
		int32_t nu = distinct_names(a, req.mirror_names,
		    req.mirror_names_n, &pos);

		if (nu < 0)
			goto arena;
		ms = arena_array(a, (size_t)nu, sizeof(*ms));
		asked = arena_array(a, (size_t)nu, sizeof(*asked));
		denied_msg = arena_array(a, (size_t)nu, sizeof(*denied_msg));
		if (ms == NULL || asked == NULL || denied_msg == NULL)
			goto arena;
		for (int32_t k = 0; k < nu; k++) {
			int32_t i = pos[k];
			char *name, amsg[MSG_LEN];

			name = arena_strdup(a, req.mirror_names[i]);
			if (name == NULL && req.mirror_names[i].len >= 0)
				goto arena;
			asked[n] = req.mirror_names[i];
			denied_msg[n] = KSTR_NULL;
			ms[n] = NULL;
			/* Checked before the mirror is looked up, so a refusal says
			 * nothing about whether it exists; the first refusal is
			 * logged, the others summed up below. */
			if (authorize(adm, rq, AUTHZ_DESCRIBE, name, denied > 0,
			    amsg, sizeof(amsg)) != 0) {
				if (denied++ == 0)
					snprintf(first, sizeof(first), "%s", amsg);
				denied_msg[n] = arena_kstr(a, amsg);
				if (denied_msg[n].p == NULL)
					goto arena;
				est += 64 + (size_t)MAX(asked[n].len, 0) * 2;
				n++;
				continue;
			}
			/* A NUL inside the wire string must not cut it to another name. */
			ms[n] = name != NULL && !has_nul(asked[n]) ?
			    mstate_mirror_find(adm->st, name) : NULL;
			est += ms[n] != NULL ? describe_estimate(ms[n]) :
			    32 + (size_t)MAX(asked[n].len, 0) * 2;
			n++;
		}
		if (denied > 1)
			log_warnx("authorization: %s from %s: %d more mirror(s) of the "
			    "same DescribeMirrors refused after \"%s\"",
			    adminsrv_req_principal(rq), adminsrv_req_peer(rq),
			    denied - 1, first);
	}
	if (est > max_response(adm))
		goto too_large;
	resp.mirrors = arena_array(a, n, sizeof(*resp.mirrors));
	if (resp.mirrors == NULL)
		goto arena;
	for (size_t i = 0; i < n; i++) {
		struct kp_describe_mirrors_response_mirror *out = &resp.mirrors[i];

		kp_describe_mirrors_response_mirror_init(out);
		if (denied_msg[i].p != NULL) {
			out->mirror_name = asked[i];
			out->error_code = KERR_CLUSTER_MIRROR_AUTHORIZATION_FAILED;
			out->error_message = denied_msg[i];
			out->topics_n = 0;
			continue;
		}
		if (ms[i] != NULL) {
			if (describe_one(adm, a, ms[i], out) < 0 ||
			    describe_patterns(a, ms[i], out) < 0)
				goto arena;
			continue;
		}
		snprintf(msg, sizeof(msg), "mirror %.*s does not exist",
		    (int)MIN(MAX(asked[i].len, 0), 300),
		    asked[i].p != NULL ? asked[i].p : "");
		out->mirror_name = asked[i];
		out->error_code = KERR_UNKNOWN_CLUSTER_MIRROR;
		out->error_message = arena_kstr(a, msg);
		if (out->error_message.p == NULL)
			goto arena;
		out->topics_n = 0;
	}
	resp.mirrors_n = (int32_t)n;
	if (respond_capped(adm, rq, &resp, 0, 1) == 0)
		return;
too_large:
	too_large_msg(adm, rq, msg, sizeof(msg), "name fewer mirrors or raise "
	    "the limit");
	kp_describe_mirrors_response_init(&resp);
	resp.error_code = KERR_POLICY_VIOLATION;
	resp.error_message = kstr_c(msg);
	resp.mirrors_n = 0;
	respond(adm, rq, &resp, KERR_POLICY_VIOLATION);
	return;
arena:
	reject_arena(rq, "the DescribeMirrors response");
}

/* ---- topic operations (shared response shape) ------------------------- */

/*
 * A growable per-topic result list in the request arena, with a hash index
 * of the names so results_has() stays O(1) for requests naming or matching
 * many thousands of topics.
 */
static void results_index(struct results *rs, int32_t i)
{
	size_t mask = (size_t)rs->cap * 2 - 1;
	size_t k = name_hash(rs->v[i].name.p, (size_t)rs->v[i].name.len) & mask;

	while (rs->slots[k] != 0)
		k = (k + 1) & mask;
	rs->slots[k] = i + 1;
}

static int results_grow(struct results *rs)
{
	int32_t cap = rs->cap ? rs->cap * 2 : 16;
	void *v, *slots;

	if (cap > INT32_MAX / 4)
		return -1;
	v = arena_array(rs->a, (size_t)cap, sizeof(*rs->v));
	slots = arena_array(rs->a, (size_t)cap * 2, sizeof(*rs->slots));
	if (v == NULL || slots == NULL)
		return -1;
	if (rs->n > 0)
		memcpy(v, rs->v, (size_t)rs->n * sizeof(*rs->v));
	rs->v = v;
	rs->slots = slots;   /* zeroed by the arena */
	rs->cap = cap;
	for (int32_t i = 0; i < rs->n; i++)
		results_index(rs, i);
	return 0;
}

static void results_add(struct results *rs, const char *topic, int code,
    const char *msg)
{
	struct kp_add_topics_to_mirror_response_topic_result *r;

	if (rs->oom)
		return;
	if (rs->n == rs->cap && results_grow(rs) < 0) {
		rs->oom = 1;
		return;
	}
	r = &rs->v[rs->n];
	kp_add_topics_to_mirror_response_topic_result_init(r);
	r->name = arena_kstr(rs->a, topic);
	r->error_code = (int16_t)code;
	r->error_message = code != 0 ? arena_kstr(rs->a, msg) : KSTR_NULL;
	if (r->name.p == NULL || (code != 0 && r->error_message.p == NULL)) {
		rs->oom = 1;
		return;
	}
	results_index(rs, rs->n);
	rs->n++;
}

/* 1 if topic already has a result (a request may name it twice, or name
 * it and match it by pattern). */
static int results_has(const struct results *rs, const char *topic)
{
	size_t n = strlen(topic), mask, k;

	if (rs->cap == 0)
		return 0;
	mask = (size_t)rs->cap * 2 - 1;
	for (k = name_hash(topic, n) & mask; rs->slots[k] != 0; k = (k + 1) & mask) {
		const struct kstr *s = &rs->v[rs->slots[k] - 1].name;

		if ((size_t)s->len == n && memcmp(s->p, topic, n) == 0)
			return 1;
	}
	return 0;
}

static int encode_results(struct admin *adm, struct adminsrv_req *rq,
    const struct kp_add_topics_to_mirror_response *resp, int16_t code)
{
	struct kw w;
	int rc;

	kw_init(&w, max_response(adm));
	rc = kp_add_topics_to_mirror_response_encode(&w,
	    adminsrv_req_api_version(rq), resp);
	if (kw_over_cap(&w)) {
		kw_fini(&w);
		return -1;
	}
	send_encoded(rq, &w, rc, code);
	kw_fini(&w);
	return 0;
}

/*
 * The four responses share one wire shape (doc/protocol.md), so the
 * AddTopicsToMirror encoder writes each of them.  Over
 * server.max_response_bytes the per-topic messages go first (names and
 * codes stay), then the per-topic results (POLICY_VIOLATION naming the
 * limit).  Results lost to an exhausted arena close the connection.
 */
static void respond_results(struct admin *adm, struct adminsrv_req *rq,
    const char *mirror, int16_t top_code, const char *top_msg,
    struct results *rs)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_add_topics_to_mirror_response resp;
	int16_t worst = top_code;
	char msg[MSG_LEN];

	if (rs->oom) {
		log_warnx("admin: %s: %s %s: %d topic result(s) recorded before the "
		    "request's working memory ran out", adminsrv_req_peer(rq),
		    kp_api_name(adminsrv_req_api_key(rq)), mirror != NULL ? mirror :
		    "", rs->n);
		reject_arena(rq, "the per-topic results");
		return;
	}
	kp_add_topics_to_mirror_response_init(&resp);
	resp.error_code = top_code;
	resp.error_message = top_code != 0 ? kstr_c(top_msg) : KSTR_NULL;
	resp.mirror_name = arena_kstr(a, mirror != NULL ? mirror : "");
	if (resp.mirror_name.p == NULL) {
		reject_arena(rq, "the response");
		return;
	}
	resp.topics = rs->v;
	resp.topics_n = rs->n;
	if (rs->warning.p != NULL && top_code == 0)
		resp.warning_message = rs->warning;
	if (top_code == 0 && rs->inc_removed != NULL) {
		resp.removed_include_patterns = rs->inc_removed;
		resp.removed_include_patterns_n = rs->ninc_removed;
		resp.added_exclude_patterns = rs->exc_added;
		resp.added_exclude_patterns_n = rs->nexc_added;
	}
	for (int32_t i = 0; worst == 0 && i < rs->n; i++)
		worst = rs->v[i].error_code;
	if (encode_results(adm, rq, &resp, worst) == 0)
		return;
	for (int32_t i = 0; i < rs->n; i++)
		rs->v[i].error_message = KSTR_NULL;
	if (encode_results(adm, rq, &resp, worst) == 0)
		return;
	too_large_msg(adm, rq, msg, sizeof(msg), rs->n > 0 ? "the per-topic "
	    "results were dropped; DescribeMirrors shows the mirror's topics" :
	    "raise the limit");
	resp.error_code = KERR_POLICY_VIOLATION;
	resp.error_message = kstr_c(msg);
	resp.topics_n = 0;
	if (encode_results(adm, rq, &resp, KERR_POLICY_VIOLATION) < 0)
		adminsrv_reject(rq, ADMINSRV_REJECT_RESPONSE_TOO_LARGE, msg);
}

/*
 * POLICY_VIOLATION when adding these patterns would take m past
 * limits.max_patterns_per_mirror; patterns the mirror already has do not
 * count.  0 otherwise.
 */
static int patterns_over_limit(struct admin *adm, const struct mirror *m,
    const struct kstr *inc, int32_t ni, const struct kstr *exc, int32_t ne,
    char *msg, size_t len)
{
	size_t max = (size_t)adm->cfg->limits_max_patterns_per_mirror;
	size_t have = m->nincludes + m->nexcludes, add = 0;

	ni = MAX(ni, 0);
	ne = MAX(ne, 0);
	if ((size_t)ni + (size_t)ne > max) {
		add = (size_t)ni + (size_t)ne;
	} else {
		for (int32_t i = 0; i < ni; i++) {
			size_t k = 0;

			while (k < m->nincludes && !kstr_eq(inc[i], m->includes[k]))
				k++;
			add += k == m->nincludes;
		}
		for (int32_t i = 0; i < ne; i++) {
			size_t k = 0;

			while (k < m->nexcludes && !kstr_eq(exc[i], m->excludes[k]))
				k++;
			add += k == m->nexcludes;
		}
	}
	if (add == 0 || have + add <= max)
		return 0;
	snprintf(msg, len, "mirror %s has %zu topic pattern(s) and the request "
	    "adds %zu: more than limits.max_patterns_per_mirror (%zu) allows",
	    m->name, have, add, max);
	return KERR_POLICY_VIOLATION;
}

static void pattern_result(void *arg, const char *topic, int code,
    const char *msg)
{
	if (!results_has(arg, topic))   /* named, or matched twice */
		results_add(arg, topic, code, msg);
}

/*
 * The four topic operations need alter on their mirror.  When it is
 * refused, answers (top level and each named topic carry the mirror's
 * verdict, as for an unknown mirror) and returns 1.
 */
static int refuse_topics(struct admin *adm, struct adminsrv_req *rq,
    const char *mirror, const struct kstr *names, int32_t nn)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct results rs = { .a = a };
	char msg[MSG_LEN];
	int16_t code;

	code = authorize(adm, rq, AUTHZ_ALTER, mirror, 0, msg, sizeof(msg));
	if (code == 0)
		return 0;
	for (int32_t i = 0; i < nn; i++) {
		char *t = arena_strdup(a, names[i]);

		results_add(&rs, t != NULL ? t : "", code, msg);
	}
	respond_results(adm, rq, mirror, code, msg, &rs);
	return 1;
}

/*
 * RemoveTopicsFromMirror's patterns: each removes the saved include
 * pattern it equals, or is added to the excludes, and stops the topics it
 * matches (mstate_remove_pattern()); what each did goes in rs for the
 * answer's tagged fields.  -1 after answering with an error (nothing of
 * the command is made).
 */
static int remove_patterns(struct admin *adm, struct adminsrv_req *rq,
    const char *mirror, const struct kstr *pats, int32_t np,
    struct results *rs)
{
	struct karena *a = adminsrv_req_arena(rq);
	char msg[MSG_LEN];
	int code, what;

	rs->inc_removed = arena_array(a, (size_t)np, sizeof(*rs->inc_removed));
	rs->exc_added = arena_array(a, (size_t)np, sizeof(*rs->exc_added));
	if (rs->inc_removed == NULL || rs->exc_added == NULL) {
		reject_arena(rq, "the pattern results");
		return -1;
	}
	for (int32_t i = 0; i < np && !rs->oom; i++) {
		char *p = arena_strdup(a, pats[i]);

		if (p == NULL || has_nul(pats[i])) {
			snprintf(msg, sizeof(msg), "pattern %d is %s", i,
			    pats[i].len < 0 ? "null" : p == NULL ?
			    "too large to handle" : "not text (a NUL byte)");
			respond_results(adm, rq, mirror, KERR_INVALID_REQUEST, msg, rs);
			return -1;
		}
		code = mstate_remove_pattern(adm->st, mirror, p, pattern_result, rs,
		    &what, msg, sizeof(msg));
		if (code != 0) {
			log_info("RemoveTopicsFromMirror %s from %s refused: %s",
			    mirror, adminsrv_req_peer(rq), msg);
			respond_results(adm, rq, mirror, (int16_t)code, msg, rs);
			return -1;
		}
		/* A pattern given twice is reported once. */
		for (int32_t k = 0; k < i; k++)
			if (kstr_eq(pats[k], p))
				what = 0;
		if (what == MSTATE_PAT_INCLUDE_REMOVED)
			rs->inc_removed[rs->ninc_removed++] = kstr_c(p);
		else if (what == MSTATE_PAT_EXCLUDE_ADDED)
			rs->exc_added[rs->nexc_added++] = kstr_c(p);
	}
	return 0;
}

/* RemoveTopicsFromMirror, PauseMirrorTopics, ResumeMirrorTopics and
 * RecoverMirrorTopics. */
static void aw_topics(struct awrite *w)
{
	struct admin *adm = w->adm;
	struct adminsrv_req *rq = w->rq;
	struct karena *a = adminsrv_req_arena(rq);
	int16_t key = adminsrv_req_api_key(rq);
	struct results rs = { .a = a };
	struct kstr mname, *names = NULL, *pats = NULL;
	int32_t nn = 0, np = 0;
	char msg[MSG_LEN];
	const struct mirror *m;
	char *mirror, **tnames, *resolution = NULL;
	int code, validate_only = 0, realign = 0;

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
	} else if (key == KP_API_RECOVER_MIRROR_TOPICS) {
		struct kp_recover_mirror_topics_request req;

		if (decode_body(rq, &req) < 0)
			return;
		TOPIC_NAMES(req);
		if (req.resolution.len >= 0 &&
		    (resolution = arena_strdup(a, req.resolution)) == NULL) {
			reject_arena(rq, "the resolution");
			return;
		}
		validate_only = req.validate_only;
		realign = resolution != NULL && strcmp(resolution, "realign") == 0;
	} else {
		struct kp_resume_mirror_topics_request req;

		if (decode_body(rq, &req) < 0)
			return;
		TOPIC_NAMES(req);
	}
#undef TOPIC_NAMES
	mirror = arena_strdup(a, mname);
	if (mirror == NULL || names == NULL) {
		reject_arena(rq, "the topic list");
		return;
	}
	if (refuse_topics(adm, rq, mirror, names, nn))
		return;
	m = mstate_mirror_find(adm->st, mirror);
	if (m == NULL) {
		snprintf(msg, sizeof(msg), "mirror %s does not exist", mirror);
		for (int32_t i = 0; i < nn; i++) {
			char *t = arena_strdup(a, names[i]);

			results_add(&rs, t != NULL ? t : "", KERR_UNKNOWN_CLUSTER_MIRROR,
			    msg);
		}
		respond_results(adm, rq, mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
		return;
	}
	code = patterns_over_limit(adm, m, NULL, 0, pats, np, msg, sizeof(msg));
	if (code != 0) {
		log_info("%s %s from %s refused: %s", kp_api_name(key), mirror,
		    adminsrv_req_peer(rq), msg);
		respond_results(adm, rq, mirror, (int16_t)code, msg, &rs);
		return;
	}
	/* The names first: nothing changes when they do not fit in memory. */
	tnames = arena_array(a, (size_t)nn, sizeof(*tnames));
	for (int32_t i = 0; tnames != NULL && i < nn; i++)
		if ((tnames[i] = arena_strdup(a, names[i])) == NULL)
			tnames = NULL;
	if (tnames == NULL) {
		reject_arena(rq, "the topic list");
		return;
	}
	/*
	 * Everything the command changes goes in one batch: one write however
	 * many topics are named or matched.  A batch validates each operation
	 * against the model as it was before the command, so it wants each
	 * topic once: a topic named twice, or named and matched by a pattern,
	 * has one result (and a second move of it would be a no-op).
	 */
	for (int32_t i = 0; i < nn && !rs.oom; i++) {
		const char *t = tnames[i];

		if (results_has(&rs, t))
			continue;
		msg[0] = '\0';
		if (key == KP_API_REMOVE_TOPICS_FROM_MIRROR)
			code = mstate_remove_topic(adm->st, mirror, t, msg, sizeof(msg));
		else if (key == KP_API_PAUSE_MIRROR_TOPICS)
			code = mstate_pause_topic(adm->st, mirror, t, msg, sizeof(msg));
		else if (key == KP_API_RECOVER_MIRROR_TOPICS)
			code = mstate_recover_topic(adm->st, mirror, t, resolution, msg,
			    sizeof(msg));
		else
			code = mstate_resume_topic(adm->st, mirror, t, msg, sizeof(msg));
		results_add(&rs, t, code, msg);
		/* A realign says what it deletes, also when it succeeds. */
		if (realign && code == 0 && !rs.oom && msg[0] != '\0' &&
		    (rs.v[rs.n - 1].error_message = arena_kstr(a, msg)).p == NULL)
			rs.oom = 1;
		if (realign && code == 0 && !validate_only)
			log_info("RecoverMirrorTopics %s/%s from %s, resolution "
			    "realign: %s", mirror, t, adminsrv_req_peer(rq), msg);
	}
	if (rs.oom) {
		/* Nothing is made (AW_NONE) when a result is missing. */
		respond_results(adm, rq, mirror, 0, NULL, &rs);   /* closes */
		return;
	}
	if (validate_only) {
		/* Checked, and answered: kind stays AW_NONE, so what was
		 * queued is dropped. */
		respond_results(adm, rq, mirror, 0, NULL, &rs);
		return;
	}
	if (key == KP_API_REMOVE_TOPICS_FROM_MIRROR &&
	    remove_patterns(adm, rq, mirror, pats, np, &rs) < 0)
		return;
	if (rs.oom) {
		respond_results(adm, rq, mirror, 0, NULL, &rs);   /* closes */
		return;
	}
	w->kind = AW_TOPICS;
	w->name = mirror;
	w->rs = rs;
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

/* A hash index of the source's topics: naming many topics stays linear. */
struct topic_index {
	const struct srctopic *topics;
	size_t ntopics;
	int32_t *slots;   /* index + 1 into topics, 0 = empty; NULL: no index */
	size_t mask;
};

static void topic_index_build(struct karena *a, const struct srctopic *topics,
    size_t n, struct topic_index *ix)
{
	size_t nslots = 16;

	ix->topics = topics;
	ix->ntopics = n;
	while (nslots < n * 2)
		nslots *= 2;
	ix->mask = nslots - 1;
	/* Without memory for it, srclookup_find() still answers, slowly. */
	ix->slots = n > 0 && n < INT32_MAX ? arena_array(a, nslots,
	    sizeof(*ix->slots)) : NULL;
	for (size_t i = 0; ix->slots != NULL && i < n; i++) {
		size_t k = name_hash(topics[i].name, strlen(topics[i].name)) &
		    ix->mask;

		while (ix->slots[k] != 0)
			k = (k + 1) & ix->mask;
		ix->slots[k] = (int32_t)i + 1;
	}
}

static const struct srctopic *topic_index_find(const struct topic_index *ix,
    const char *name)
{
	size_t k;

	if (ix->slots == NULL)
		return srclookup_find(ix->topics, ix->ntopics, name);
	for (k = name_hash(name, strlen(name)) & ix->mask; ix->slots[k] != 0;
	    k = (k + 1) & ix->mask) {
		const struct srctopic *t = &ix->topics[ix->slots[k] - 1];

		if (strcmp(t->name, name) == 0)
			return t;
	}
	return NULL;
}

/* mirror.allow.loops as the mirror's configs say (default false). */
static int mirror_allows_loops(const struct mirror *m)
{
	int yes = 0;

	for (size_t i = 0; i < m->nconfigs; i++)
		if (strcmp(m->configs[i].name, "mirror.allow.loops") == 0)
			yes = m->configs[i].value != NULL &&
			    strcasecmp(m->configs[i].value, "true") == 0;
	return yes;
}

/*
 * A source topic that is itself the active destination of a mirror there
 * (its mirror mark, mirrormark.h): KERR_INVALID_REQUEST with the message
 * naming the loop, unless mirror.allow.loops; else 0.
 */
static int loop_check(struct admin *adm, const struct mirror *m,
    const struct srctopic *st, char *msg, size_t msglen)
{
	char src[128], other[256];
	const char *dst = pipeline_destination_cluster_id(adm->pl);
	int active;

	if (st->mark == NULL || mirrormark_parse(st->mark, &active, src,
	    sizeof(src), other, sizeof(other)) != 0 || !active ||
	    mirror_allows_loops(m))
		return 0;
	if (dst != NULL && strcmp(src, dst) == 0)
		snprintf(msg, msglen, "mirror loop: topic %s on the source cluster "
		    "%s is itself mirrored there by mirror %s from cluster %s, "
		    "which is this mirrord's destination: mirroring it back would "
		    "copy the copies; stop that mirror first (failback), or set "
		    "mirror.allow.loops=true on mirror %s", st->name,
		    mirror_bootstrap(m), other, src, m->name);
	else
		snprintf(msg, msglen, "mirror loop refused: topic %s on the source "
		    "cluster %s is itself the destination of mirror %s there "
		    "(from cluster %s); mirror its origin instead, stop that "
		    "mirror, or set mirror.allow.loops=true on mirror %s",
		    st->name, mirror_bootstrap(m), other, src, m->name);
	return KERR_INVALID_REQUEST;
}

static void awrite_submit(struct admin *adm, struct adminsrv_req *rq,
    void (*run)(struct awrite *), struct pending *pd);
static void aw_add(struct awrite *w);

static const char *arena_cstr(struct karena *a, const char *s, int *oom)
{
	struct kstr k;

	if (s == NULL)
		return NULL;
	k = arena_kstr(a, s);
	if (k.p == NULL)
		*oom = 1;
	return k.p;
}

/* The source answered: what it said is kept (the lookup goes), and the
 * topics are added when the metadata log is the command's own. */
static void add_lookup_done(void *arg, int ok, const char *errstr,
    const char *cluster_id, const struct srctopic *topics, size_t ntopics)
{
	struct pending *pd = arg;
	struct karena *a = adminsrv_req_arena(pd->rq);
	int oom = 0;

	pd->ok = ok;
	pd->errstr = arena_cstr(a, errstr, &oom);
	pd->cluster_id = arena_cstr(a, cluster_id, &oom);
	if (ntopics > 0 &&
	    (pd->topics = arena_array(a, ntopics, sizeof(*pd->topics))) == NULL)
		oom = 1;
	for (size_t i = 0; !oom && i < ntopics; i++) {
		pd->topics[i] = topics[i];
		pd->topics[i].name = arena_cstr(a, topics[i].name, &oom);
		pd->topics[i].mark = arena_cstr(a, topics[i].mark, &oom);
	}
	pd->ntopics = oom ? 0 : ntopics;
	srclookup_free(pd->lookup);   /* safe inside its own callback */
	pd->lookup = NULL;
	if (oom) {
		reject_arena(pd->rq, "the source's topics");
		pending_free(pd);
		return;
	}
	awrite_submit(pd->adm, pd->rq, aw_add, pd);
}

static void aw_add(struct awrite *w)
{
	struct pending *pd = w->pd;
	struct admin *adm = pd->adm;
	struct adminsrv_req *rq = pd->rq;
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_add_topics_to_mirror_request *req = &pd->req;
	struct results rs = { .a = a };
	const char *mirror = pd->mirror;
	struct mirror *m = mstate_mirror_find(adm->st, mirror);
	char msg[MSG_LEN];
	const char **inc = NULL, **exc = NULL;
	const struct srctopic *topics = pd->topics;
	size_t ntopics = pd->ntopics;
	int ok = pd->ok;
	const char *errstr = pd->errstr != NULL ? pd->errstr : "no answer";
	const char *cluster_id = pd->cluster_id;
	struct topic_index tix = { .topics = topics, .ntopics = ntopics };
	int32_t ni = MAX(req->include_patterns_n, 0);
	int32_t ne = MAX(req->exclude_patterns_n, 0);
	int code;

	if (m == NULL) {
		/* Deleted while we looked at the source. */
		snprintf(msg, sizeof(msg), "mirror %s does not exist", mirror);
		respond_results(adm, rq, mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
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
	/* Checked again here: another request may have added patterns since. */
	code = patterns_over_limit(adm, m, req->include_patterns, ni,
	    req->exclude_patterns, ne, msg, sizeof(msg));
	if (code != 0) {
		respond_results(adm, rq, mirror, (int16_t)code, msg, &rs);
		pending_free(pd);
		return;
	}
	if (ni > 0 || ne > 0) {
		inc = arena_array(a, (size_t)ni, sizeof(*inc));
		exc = arena_array(a, (size_t)ne, sizeof(*exc));
		for (int32_t i = 0; inc != NULL && i < ni; i++)
			if ((inc[i] = arena_strdup(a, req->include_patterns[i])) == NULL)
				inc = NULL;
		for (int32_t i = 0; exc != NULL && i < ne; i++)
			if ((exc[i] = arena_strdup(a, req->exclude_patterns[i])) == NULL)
				exc = NULL;
		if (inc == NULL || exc == NULL) {
			reject_arena(rq, "the patterns");
			pending_free(pd);
			return;
		}
	}
	if (ok && MAX(req->topics_n, 0) > 0)
		topic_index_build(a, topics, ntopics, &tix);
	/* Named topics: each must exist on the source. */
	for (int32_t i = 0; i < MAX(req->topics_n, 0); i++) {
		char *t = arena_strdup(a, req->topics[i].name);
		const struct srctopic *st;

		if (t == NULL) {
			rs.oom = 1;
			break;
		}
		if (results_has(&rs, t))
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
		st = topic_index_find(&tix, t);
		if (st == NULL) {
			snprintf(msg, sizeof(msg), "topic %s does not exist on the "
			    "source cluster %s", t, mirror_bootstrap(m));
			results_add(&rs, t, KERR_UNKNOWN_TOPIC_OR_PARTITION, msg);
			continue;
		}
		if ((code = loop_check(adm, m, st, msg, sizeof(msg))) != 0) {
			results_add(&rs, t, code, msg);
			continue;
		}
		msg[0] = '\0';
		code = mstate_add_topic(adm->st, mirror, t, st->partitions, msg,
		    sizeof(msg));
		results_add(&rs, t, code, msg);
	}
	/* Patterns: saved for discovery, and matched against the source now. */
	if (!rs.oom && (ni > 0 || ne > 0)) {
		struct tpattern **re = NULL;

		code = mstate_add_patterns(adm->st, mirror, inc, (size_t)ni, exc,
		    (size_t)ne, msg, sizeof(msg));
		if (code != 0) {
			respond_results(adm, rq, mirror, (int16_t)code, msg, &rs);
			pending_free(pd);
			return;
		}
		/* Compiled once for all the source's topics (includes, then
		 * excludes); they were checked, so NULL only on no memory. */
		if (ok && ni > 0 && inc != NULL && (ne == 0 || exc != NULL) &&
		    (re = calloc((size_t)(ni + ne), sizeof(*re))) == NULL)
			fatal("admin: out of memory");
		for (int32_t k = 0; re != NULL && k < ni + ne; k++)
			re[k] = tpattern_new(k < ni ? inc[k] : exc[k - ni], msg,
			    sizeof(msg));
		for (size_t i = 0; re != NULL && i < ntopics; i++) {
			const char *t = topics[i].name;
			int any = 0;

			if (topics[i].internal || is_internal_name(t))
				continue;
			for (int32_t k = 0; k < ni && !any; k++)
				any = re[k] != NULL && tpattern_match(re[k], t);
			if (!any)
				continue;
			for (int32_t k = ni; k < ni + ne && any; k++)
				if (re[k] != NULL && tpattern_match(re[k], t))
					any = 0;
			if (!any || mirror_topic_find(m, t) != NULL ||
			    results_has(&rs, t))
				continue;
			if ((code = loop_check(adm, m, &topics[i], msg,
			    sizeof(msg))) != 0) {
				results_add(&rs, t, code, msg);
				continue;
			}
			msg[0] = '\0';
			code = mstate_add_topic(adm->st, mirror, t,
			    topics[i].partitions, msg, sizeof(msg));
			results_add(&rs, t, code, msg);
		}
		for (int32_t k = 0; re != NULL && k < ni + ne; k++)
			tpattern_free(re[k]);
		free(re);
		if (!ok) {
			log_warnx("mirror %s: patterns saved, but the source cannot be "
			    "read now (%s); matching topics join at the next discovery "
			    "pass", mirror, errstr);
			snprintf(msg, sizeof(msg), "patterns saved to mirror %s, but "
			    "its source (%s) cannot be read now: %s; topics they "
			    "match join once it answers (kafka-mirrors --describe "
			    "shows them then)", mirror, mirror_bootstrap(m), errstr);
			rs.warning = arena_kstr(a, msg);
		}
	}
	if (rs.oom) {
		/* Nothing is made (AW_NONE) when a result is missing. */
		respond_results(adm, rq, mirror, 0, NULL, &rs);
		pending_free(pd);
		return;
	}
	w->kind = AW_ADD;
	w->name = mirror;
	w->rs = rs;
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
	if (pd->mirror == NULL)
		fatal("admin: out of memory");
	{
		int32_t nn = MAX(pd->req.topics_n, 0);
		struct kstr *names = arena_array(a, (size_t)nn, sizeof(*names));

		for (int32_t i = 0; names != NULL && i < nn; i++)
			names[i] = pd->req.topics[i].name;
		if (names != NULL &&
		    refuse_topics(adm, rq, pd->mirror, names, nn)) {
			free(pd->mirror);
			free(pd);
			return;
		}
	}
	m = mstate_mirror_find(adm->st, pd->mirror);
	if (m != NULL && patterns_over_limit(adm, m, pd->req.include_patterns,
	    pd->req.include_patterns_n, pd->req.exclude_patterns,
	    pd->req.exclude_patterns_n, msg, sizeof(msg)) != 0) {
		log_info("AddTopicsToMirror %s from %s refused: %s", pd->mirror,
		    adminsrv_req_peer(rq), msg);
		respond_results(adm, rq, pd->mirror, KERR_POLICY_VIOLATION, msg, &rs);
		free(pd->mirror);
		free(pd);
		return;
	}
	if (m == NULL) {
		snprintf(msg, sizeof(msg), "mirror %s does not exist", pd->mirror);
		for (int32_t i = 0; i < MAX(pd->req.topics_n, 0); i++) {
			char *t = arena_strdup(a, pd->req.topics[i].name);

			results_add(&rs, t != NULL ? t : "", KERR_UNKNOWN_CLUSTER_MIRROR,
			    msg);
		}
		respond_results(adm, rq, pd->mirror, KERR_UNKNOWN_CLUSTER_MIRROR, msg, &rs);
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

			if (p == NULL || p[0] == '\0') {
				snprintf(msg, sizeof(msg), "%s pattern %d is empty",
				    k == 0 ? "include" : "exclude", i);
				goto bad_request;
			}
			/* Syntax and limits (tpattern.h), with PCRE2's reason. */
			if (tpattern_check(p, k == 0 ? "include pattern" :
			    "exclude pattern", msg, sizeof(msg)) != 0)
				goto bad_request;
		}
	}
	pd->adm = adm;
	pd->rq = rq;
	pd->next = adm->pending;
	if (adm->pending != NULL)
		adm->pending->prevp = &pd->next;
	pd->prevp = &adm->pending;
	adm->pending = pd;
	pd->lookup = srclookup_start(adm->base, m,
	    (const char *const *)adm->cfg->mirrors_allowed_file_dirs.v,
	    LOOKUP_TIMEOUT_MS,
	    add_lookup_done, pd, err, sizeof(err));
	if (pd->lookup == NULL) {
		/* Bad stored settings: answer as if the source were down. */
		add_lookup_done(pd, 0, err, NULL, NULL, 0);
	}
	return;
bad_request:
	respond_results(adm, rq, pd->mirror, KERR_INVALID_REQUEST, msg, &rs);
	free(pd->mirror);
	free(pd);
}

/* ---- mirror configs: DescribeConfigs, IncrementalAlterConfigs ---------- */

/*
 * KIP-1279 keeps a mirror's configs as configs of a resource of type
 * CLUSTER_MIRROR (64) named after the mirror, read and changed with
 * DescribeConfigs and IncrementalAlterConfigs (describe_configs and
 * alter_configs in the authorization rules).  Secret values are never
 * answered: null with IsSensitive set, as Kafka does.
 */
#define CONFIG_RESOURCE_MIRROR 64
#define IAC_SET 0
#define IAC_DELETE 1

/* 0, or an error code with msg for a resource of another type. */
static int16_t config_resource_ok(int8_t type, char *msg, size_t len)
{
	if (type == CONFIG_RESOURCE_MIRROR)
		return 0;
	snprintf(msg, len, "resource type %d is not served here: mirrord's "
	    "admin listener has the configs of mirrors (resource type %d, "
	    "CLUSTER_MIRROR)", type, CONFIG_RESOURCE_MIRROR);
	return KERR_INVALID_REQUEST;
}

/* 1 if keys (null: every key) lists name. */
static int config_key_asked(const struct kstr *keys, int32_t n,
    const char *name)
{
	if (n < 0)
		return 1;
	for (int32_t i = 0; i < n; i++)
		if (kstr_eq(keys[i], name))
			return 1;
	return 0;
}

/* One resource of a DescribeConfigs: its configs into out, or an error. */
static int describe_mirror_configs(struct admin *adm,
    struct adminsrv_req *rq, const struct kp_describe_configs_request_describe_configs_resource *in,
    struct kp_describe_configs_response_describe_configs_result *out)
{
	struct karena *a = adminsrv_req_arena(rq);
	const struct mirror *m;
	char msg[MSG_LEN], *name;
	int16_t code;
	size_t n = 0;

	out->resource_type = in->resource_type;
	out->resource_name = in->resource_name;
	out->error_message = KSTR_NULL;
	if ((name = arena_strdup(a, in->resource_name)) == NULL)
		return -1;
	code = config_resource_ok(in->resource_type, msg, sizeof(msg));
	if (code == 0)
		code = authorize(adm, rq, AUTHZ_DESCRIBE_CONFIGS, name, 0, msg,
		    sizeof(msg));
	m = code == 0 ? mstate_mirror_find(adm->st, name) : NULL;
	if (code == 0 && m == NULL) {
		snprintf(msg, sizeof(msg), "mirror %.300s does not exist", name);
		code = KERR_UNKNOWN_CLUSTER_MIRROR;
	}
	if (code != 0) {
		out->error_code = code;
		out->error_message = arena_kstr(a, msg);
		return out->error_message.p == NULL ? -1 : 0;
	}
	out->configs = arena_array(a, m->nconfigs, sizeof(*out->configs));
	if (out->configs == NULL)
		return -1;
	for (size_t i = 0; i < m->nconfigs; i++) {
		struct kp_describe_configs_response_describe_configs_resource_result *c =
		    &out->configs[n];
		const struct mcfg *mc = &m->configs[i];

		if (!config_key_asked(in->configuration_keys,
		    in->configuration_keys_n, mc->name))
			continue;
		kp_describe_configs_response_describe_configs_resource_result_init(c);
		c->name = kstr_c(mc->name);
		c->is_sensitive = mirrorconf_is_secret(mc->name);
		c->value = c->is_sensitive ? KSTR_NULL : kstr_c(mc->value);
		c->read_only = 0;
		c->is_default = 0;
		c->config_source = 0;   /* Kafka has no source for a mirror's */
		c->synonyms_n = 0;
		n++;
	}
	out->configs_n = (int32_t)n;
	return 0;
}

static void h_describe_configs(struct admin *adm, struct adminsrv_req *rq)
{
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_describe_configs_request req;
	struct kp_describe_configs_response resp;
	int32_t n;

	if (decode_body(rq, &req) < 0)
		return;
	kp_describe_configs_response_init(&resp);
	n = MAX(req.resources_n, 0);
	resp.results = arena_array(a, (size_t)n, sizeof(*resp.results));
	if (resp.results == NULL) {
		reject_arena(rq, "the DescribeConfigs response");
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		kp_describe_configs_response_describe_configs_result_init(
		    &resp.results[i]);
		if (describe_mirror_configs(adm, rq, &req.resources[i],
		    &resp.results[i]) < 0) {
			reject_arena(rq, "the DescribeConfigs response");
			return;
		}
	}
	resp.results_n = n;
	respond(adm, rq, &resp, n > 0 ? resp.results[0].error_code : 0);
}

/*
 * The configs of m after the resource's operations: kept ones in their
 * stored form (fresh 0), set ones from the request (fresh 1); plain holds
 * every value as the operator gave it (sealed ones opened) for the
 * validation, to be wiped.  An error code with msg naming the key, or 0.
 */
struct alter_set {
	struct mcfg *cfg;
	int *fresh;
	char **plain;
	size_t n;
};

static int16_t alter_merge(struct karena *a, const struct mirror *m,
    const struct kp_incremental_alter_configs_request_alter_configs_resource *in,
    struct alter_set *as, char *msg, size_t len)
{
	size_t cap = m->nconfigs + (size_t)MAX(in->configs_n, 0);
	char err[512];

	as->cfg = arena_array(a, cap, sizeof(*as->cfg));
	as->fresh = arena_array(a, cap, sizeof(*as->fresh));
	as->plain = calloc(cap + 1, sizeof(*as->plain));
	as->n = 0;
	if (as->cfg == NULL || as->fresh == NULL || as->plain == NULL) {
		snprintf(msg, len, "out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < m->nconfigs; i++) {
		as->cfg[as->n].name = m->configs[i].name;
		as->cfg[as->n].value = m->configs[i].value;
		as->fresh[as->n++] = 0;
	}
	for (int32_t i = 0; i < in->configs_n; i++) {
		const struct kp_incremental_alter_configs_request_alterable_config *op =
		    &in->configs[i];
		char *k = arena_strdup(a, op->name), *v;
		size_t j = 0;

		if (k == NULL || has_nul(op->name) || has_nul(op->value) ||
		    k[0] == '\0') {
			snprintf(msg, len, "config %d has %s", i, k == NULL ?
			    "no name" : k[0] == '\0' ? "an empty name" :
			    "a NUL byte");
			return KERR_INVALID_REQUEST;
		}
		for (int32_t p = 0; p < i; p++)
			if (kstr_eq(in->configs[p].name, k)) {
				snprintf(msg, len, "config %.255s is altered twice in "
				    "one request", k);
				return KERR_INVALID_REQUEST;
			}
		while (j < as->n && strcmp(as->cfg[j].name, k) != 0)
			j++;
		if (op->config_operation == IAC_DELETE) {
			if (strcmp(k, "bootstrap.servers") == 0) {
				snprintf(msg, len, "bootstrap.servers cannot be "
				    "deleted: a mirror needs its source cluster; "
				    "set another value instead");
				return KERR_INVALID_CONFIG;
			}
			if (j == as->n && !mirrorconf_is_known(k)) {
				snprintf(msg, len, "Unknown config %.255s: the mirror "
				    "has no such key to delete", k);
				return KERR_INVALID_CONFIG;
			}
			if (j < as->n) {
				memmove(as->cfg + j, as->cfg + j + 1,
				    (as->n - j - 1) * sizeof(*as->cfg));
				memmove(as->fresh + j, as->fresh + j + 1,
				    (as->n - j - 1) * sizeof(*as->fresh));
				as->n--;
			}
			continue;
		}
		if (op->config_operation != IAC_SET) {
			snprintf(msg, len, "config %.255s: operation %d is not "
			    "supported for a mirror (SET 0 and DELETE 1 are)", k,
			    op->config_operation);
			return KERR_INVALID_REQUEST;
		}
		if (op->value.len < 0) {
			snprintf(msg, len, "config %.255s: SET with a null value "
			    "(DELETE removes a key)", k);
			return KERR_INVALID_CONFIG;
		}
		if ((v = arena_strdup(a, op->value)) == NULL) {
			snprintf(msg, len, "out of memory");
			return KERR_UNKNOWN_SERVER_ERROR;
		}
		if (j == as->n)
			as->n++;
		as->cfg[j].name = k;
		as->cfg[j].value = v;
		as->fresh[j] = 1;
	}
	for (size_t i = 0; i < as->n; i++) {
		if (as->fresh[i]) {
			if (as->cfg[i].value != NULL &&
			    (as->plain[i] = strdup(as->cfg[i].value)) == NULL) {
				snprintf(msg, len, "out of memory");
				return KERR_UNKNOWN_SERVER_ERROR;
			}
		} else if (secrets_open_stored(m->name, as->cfg[i].name,
		    as->cfg[i].value, &as->plain[i], err, sizeof(err)) != 0) {
			snprintf(msg, len, "the mirror's config %s", err);
			return KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	return 0;
}

/* CreateMirror's checks of a mirror's configs. */
static int16_t alter_validate(struct admin *adm, const struct alter_set *as,
    char *msg, size_t len)
{
	const char **names = calloc(as->n + 1, sizeof(*names));
	int16_t code = 0;

	if (names == NULL) {
		snprintf(msg, len, "out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < as->n; i++)
		names[i] = as->cfg[i].name;
	mirrorconf_validate(names, (const char *const *)as->plain, as->n, &code,
	    msg, len);
	if (code == 0)
		mirrorconf_check_files(names, (const char *const *)as->plain,
		    as->n, (const char *const *)adm->cfg->mirrors_allowed_file_dirs.v,
		    &code, msg, len);
	for (size_t i = 0; code == 0 && i < as->n; i++)
		if (as->fresh[i] && secrets_check_wire(names[i], as->plain[i], msg,
		    len) < 0)
			code = KERR_INVALID_CONFIG;
	free(names);
	return code;
}

/* The keys a resource sets and deletes, for the log (never a value). */
static void alter_summary(
    const struct kp_incremental_alter_configs_request_alter_configs_resource *in,
    char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int32_t i = 0; i < in->configs_n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s %.*s",
		    i > 0 ? "," : "", in->configs[i].config_operation == IAC_DELETE ?
		    "delete" : "set", (int)MIN(MAX(in->configs[i].name.len, 0), 255),
		    in->configs[i].name.p != NULL ? in->configs[i].name.p : "");
}

/* One resource of an IncrementalAlterConfigs: 1 if its record was
 * queued, 0 if answered (out's code), -1 when the arena ran out. */
static int alter_one(struct admin *adm, struct adminsrv_req *rq,
    const struct kp_incremental_alter_configs_request *req, int32_t idx,
    struct kp_incremental_alter_configs_response_alter_configs_resource_response *out)
{
	const struct kp_incremental_alter_configs_request_alter_configs_resource *in =
	    &req->resources[idx];
	struct karena *a = adminsrv_req_arena(rq);
	struct alter_set as = { 0 };
	const struct mirror *m = NULL;
	char msg[MSG_LEN] = "", what[600], *name;
	int16_t code;
	int queued = 0;

	out->resource_type = in->resource_type;
	out->resource_name = in->resource_name;
	if ((name = arena_strdup(a, in->resource_name)) == NULL)
		return -1;
	code = config_resource_ok(in->resource_type, msg, sizeof(msg));
	if (code == 0)
		code = authorize(adm, rq, AUTHZ_ALTER_CONFIGS, name, 0, msg,
		    sizeof(msg));
	for (int32_t i = 0; code == 0 && i < idx; i++)
		if (req->resources[i].resource_type == in->resource_type &&
		    kstr_eq(req->resources[i].resource_name, name)) {
			snprintf(msg, sizeof(msg), "mirror %.300s is named twice in "
			    "one request", name);
			code = KERR_INVALID_REQUEST;
		}
	if (code == 0 && (m = mstate_mirror_find(adm->st, name)) == NULL) {
		snprintf(msg, sizeof(msg), "mirror %.300s does not exist", name);
		code = KERR_UNKNOWN_CLUSTER_MIRROR;
	}
	if (code == 0)
		code = alter_merge(a, m, in, &as, msg, sizeof(msg));
	if (code == 0)
		code = alter_validate(adm, &as, msg, sizeof(msg));
	if (code == 0 && !req->validate_only) {
		code = (int16_t)mstate_set_mirror_configs(adm->st, name, as.cfg,
		    as.fresh, as.n, msg, sizeof(msg));
		queued = code == 0;
	}
	if (as.plain != NULL)
		secrets_values_free(as.plain, as.n);
	alter_summary(in, what, sizeof(what));
	if (code != 0)
		log_info("IncrementalAlterConfigs of mirror %.300s from %s "
		    "refused (%s): %s: %s", name, adminsrv_req_peer(rq), what,
		    kerr_name(code), msg);
	out->error_code = code;
	out->error_message = code != 0 ? arena_kstr(a, msg) : KSTR_NULL;
	if (code != 0 && out->error_message.p == NULL)
		return -1;
	return queued;
}

static void aw_alter_configs(struct awrite *w)
{
	struct admin *adm = w->adm;
	struct adminsrv_req *rq = w->rq;
	struct karena *a = adminsrv_req_arena(rq);
	struct kp_incremental_alter_configs_request req;
	struct kp_incremental_alter_configs_response *resp;
	int32_t n;
	int any = 0, r;

	if (decode_body(rq, &req) < 0)
		return;
	n = MAX(req.resources_n, 0);
	resp = karena_alloc(a, sizeof(*resp));
	w->iac_queued = arena_array(a, (size_t)n, 1);
	if (resp == NULL || w->iac_queued == NULL)
		goto arena;
	kp_incremental_alter_configs_response_init(resp);
	resp->responses = arena_array(a, (size_t)n, sizeof(*resp->responses));
	if (resp->responses == NULL)
		goto arena;
	resp->responses_n = n;
	for (int32_t i = 0; i < n; i++) {
		kp_incremental_alter_configs_response_alter_configs_resource_response_init(
		    &resp->responses[i]);
		if ((r = alter_one(adm, rq, &req, i, &resp->responses[i])) < 0)
			goto arena;
		w->iac_queued[i] = (char)r;
		any |= r;
	}
	if (any) {
		/* Answered once durable (configs_finish()). */
		w->kind = AW_CONFIGS;
		w->iac = resp;
		return;
	}
	respond(adm, rq, resp, n > 0 ? resp->responses[0].error_code : 0);
	return;
arena:
	/* kind stays AW_NONE: whatever was queued is dropped. */
	reject_arena(rq, "the IncrementalAlterConfigs response");
}

static void configs_finish(struct admin *adm, struct awrite *w, int code,
    const char *msg)
{
	struct adminsrv_req *rq = w->rq;
	struct kp_incremental_alter_configs_response *resp = w->iac;
	struct karena *a = adminsrv_req_arena(rq);

	for (int32_t i = 0; i < resp->responses_n; i++) {
		struct kp_incremental_alter_configs_response_alter_configs_resource_response *r =
		    &resp->responses[i];

		if (!w->iac_queued[i])
			continue;
		if (code != 0) {
			r->error_code = (int16_t)code;
			r->error_message = arena_kstr(a, msg);
			log_info("IncrementalAlterConfigs of mirror %.*s from %s "
			    "failed: %s: %s", (int)r->resource_name.len,
			    r->resource_name.p, adminsrv_req_peer(rq),
			    kerr_name((int16_t)code), msg);
		} else {
			log_info("mirror %.*s: configs altered by %s",
			    (int)r->resource_name.len, r->resource_name.p,
			    adminsrv_req_peer(rq));
		}
	}
	respond(adm, rq, resp, code != 0 ? (int16_t)code :
	    resp->responses_n > 0 ? resp->responses[0].error_code : 0);
}

/* ---- the operator's writes, one at a time ------------------------------ */

static void awrite_free(struct awrite *w)
{
	free(w->mirror);
	free(w->cluster_id);
	free(w->bootstrap);
	free(w);
}

/* CreateMirror's or DeleteMirror's answer: a code, and why unless 0. */
static void respond_mirror_op(struct admin *adm, struct adminsrv_req *rq,
    int16_t code, const char *msg)
{
	struct kstr why = code != 0 ? arena_kstr(adminsrv_req_arena(rq), msg) :
	    KSTR_NULL;

	if (adminsrv_req_api_key(rq) == KP_API_CREATE_MIRROR) {
		struct kp_create_mirror_response resp;

		kp_create_mirror_response_init(&resp);
		resp.error_code = code;
		resp.error_message = why;
		respond(adm, rq, &resp, code);
	} else {
		struct kp_delete_mirror_response resp;

		kp_delete_mirror_response_init(&resp);
		resp.error_code = code;
		resp.error_message = why;
		respond(adm, rq, &resp, code);
	}
}

/* The answer, once the command's records are durable and applied (code
 * 0), or with the reason none of them was made. */
static void awrite_finish(struct admin *adm, struct awrite *w, int code,
    const char *msg)
{
	struct adminsrv_req *rq = w->rq;
	struct karena *a;

	if (w->kind == AW_NONE)
		return;   /* run() answered already: rq is gone */
	if (msg == NULL)
		msg = "the metadata log did not say why";
	a = rq != NULL ? adminsrv_req_arena(rq) : NULL;
	switch (w->kind) {
	case AW_CREATE: {
		const struct mirror *m = mstate_mirror_find(adm->st, w->name);

		if (code == 0) {
			log_info("mirror %s created (source %s) by %s", w->name,
			    m != NULL ? mirror_bootstrap(m) : "?",
			    adminsrv_req_peer(rq));
			if (m != NULL && m->source_cluster_id == NULL)
				resolve_source_id(adm, m);
		} else {
			log_info("CreateMirror %s from %s refused: %s: %s",
			    w->name, adminsrv_req_peer(rq),
			    kerr_name((int16_t)code), msg);
		}
		respond_mirror_op(adm, rq, (int16_t)code, msg);
		break;
	}
	case AW_DELETE:
		if (code == 0)
			log_info("mirror %s deleted by %s", w->name,
			    adminsrv_req_peer(rq));
		else
			log_info("DeleteMirror %s from %s failed: %s: %s",
			    w->name, adminsrv_req_peer(rq),
			    kerr_name((int16_t)code), msg);
		respond_mirror_op(adm, rq, (int16_t)code, msg);
		break;
	case AW_TOPICS:
	case AW_ADD: {
		struct results *rs = &w->rs;

		/* Nothing queued was made durable: say so for each of them. */
		for (int32_t i = 0; code != 0 && i < rs->n; i++) {
			if (rs->v[i].error_code != 0)
				continue;
			rs->v[i].error_code = (int16_t)code;
			rs->v[i].error_message = arena_kstr(a, msg);
			if (rs->v[i].error_message.p == NULL)
				rs->oom = 1;
		}
		log_info("%s %s from %s: %d topic result(s)%s%s",
		    kp_api_name(adminsrv_req_api_key(rq)), w->name,
		    adminsrv_req_alive(rq) ? adminsrv_req_peer(rq) : "(gone)",
		    rs->n, code != 0 ? ", none made: " : "",
		    code != 0 ? msg : "");
		respond_results(adm, rq, w->name, 0, NULL, rs);
		if (w->kind == AW_ADD)
			pending_free(w->pd);
		break;
	}
	case AW_CONFIGS:
		configs_finish(adm, w, code, msg);
		break;
	case AW_RESOLVE:
		if (code != 0)
			log_warnx("mirror %s: cannot record the source cluster id "
			    "%s: %s", w->mirror, w->cluster_id, msg);
		break;
	default:
		break;   /* run() answered already */
	}
}

static void awrite_next(struct admin *adm);

/* The head's records are durable and applied, or failed. */
static void awrite_done(void *arg, int code, const char *msg)
{
	struct admin *adm = arg;
	struct awrite *w = adm->wq_head;

	adm->wq_head = w->next;
	if (adm->wq_head == NULL)
		adm->wq_tail = NULL;
	adm->wq_busy = 0;
	awrite_finish(adm, w, code, msg);
	awrite_free(w);
}

/* mstate's callback: the next command's turn. */
static void awrite_done_cb(void *arg, int code, const char *msg)
{
	awrite_done(arg, code, msg);
	awrite_next(arg);
}

/* The log is the head's: validate, queue, and hand the batch over. */
static void awrite_run(struct admin *adm)
{
	struct awrite *w = adm->wq_head;
	char msg[MSG_LEN] = "";
	int started = 0, code;

	w->run(w);
	if (w->kind == AW_NONE)
		mstate_excl_discard(adm->st);   /* answered: nothing is made */
	code = mstate_excl_commit(adm->st, awrite_done_cb, adm, &started, msg,
	    sizeof(msg));
	if (!started) {
		awrite_done(adm, code, msg);
		return;
	}
	if (w->rq != NULL)
		log_debug("admin: %s from %s: its change is being written to "
		    "the metadata log; answered once durable",
		    kp_api_name(adminsrv_req_api_key(w->rq)),
		    adminsrv_req_peer(w->rq));
}

static void awrite_ready(void *arg)
{
	struct admin *adm = arg;

	awrite_run(adm);
	awrite_next(adm);
}

static void awrite_next(struct admin *adm)
{
	while (adm->wq_head != NULL && !adm->wq_busy) {
		int r;

		adm->wq_busy = 1;
		r = mstate_excl_begin(adm->st, awrite_ready, adm);
		if (r == 0)
			return;   /* awrite_ready() when the log is quiet */
		if (r == 1) {
			awrite_run(adm);   /* in flight: busy until done */
			continue;
		}
		awrite_done(adm, KERR_KAFKA_STORAGE_ERROR, "the metadata log "
		    "cannot take an operator's change now");
	}
}

static void awrite_queue(struct admin *adm, struct awrite *w)
{
	if (adm->wq_tail != NULL && w->rq != NULL)
		log_debug("admin: %s from %s waits for the change before it",
		    kp_api_name(adminsrv_req_api_key(w->rq)),
		    adminsrv_req_peer(w->rq));
	if (adm->wq_tail != NULL)
		adm->wq_tail->next = w;
	else
		adm->wq_head = w;
	adm->wq_tail = w;
	awrite_next(adm);
}

static void awrite_submit(struct admin *adm, struct adminsrv_req *rq,
    void (*run)(struct awrite *), struct pending *pd)
{
	struct awrite *w = calloc(1, sizeof(*w));

	if (w == NULL)
		fatal("admin: out of memory");
	w->adm = adm;
	w->rq = rq;
	w->run = run;
	w->pd = pd;
	awrite_queue(adm, w);
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
	case KP_API_CREATE_MIRROR: awrite_submit(adm, rq, aw_create, NULL); break;
	case KP_API_ADD_TOPICS_TO_MIRROR: h_add_topics(adm, rq); break;
	case KP_API_REMOVE_TOPICS_FROM_MIRROR:
	case KP_API_PAUSE_MIRROR_TOPICS:
	case KP_API_RESUME_MIRROR_TOPICS:
	case KP_API_RECOVER_MIRROR_TOPICS:
		awrite_submit(adm, rq, aw_topics, NULL);
		break;
	case KP_API_LIST_MIRRORS: h_list_mirrors(adm, rq); break;
	case KP_API_DESCRIBE_MIRRORS: h_describe_mirrors(adm, rq); break;
	case KP_API_DELETE_MIRROR: awrite_submit(adm, rq, aw_delete, NULL); break;
	case KP_API_DESCRIBE_CONFIGS: h_describe_configs(adm, rq); break;
	case KP_API_INCREMENTAL_ALTER_CONFIGS:
		awrite_submit(adm, rq, aw_alter_configs, NULL);
		break;
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

static double buffered_value(void *arg)
{
	struct admin *adm = arg;

	return adm->srv != NULL ? (double)adminsrv_buffered(adm->srv) : 0;
}

/* The listener's limits from the config (at start and on reload). */
static void srv_limits(const struct config *cfg, struct adminsrv_opts *o)
{
	o->max_request_bytes = (size_t)cfg->server_max_request_bytes;
	o->max_connections = (int)cfg->server_max_connections;
	o->max_connections_per_ip = (int)cfg->server_max_connections_per_ip;
	o->idle_timeout_ms = cfg->server_idle_timeout_ms;
	o->request_timeout_ms = cfg->server_request_timeout_ms;
	o->max_buffered_bytes_per_conn =
	    (size_t)cfg->server_max_buffered_bytes_per_connection;
	/* A request and an answer of the largest sizes always fit (the key's
	 * help says so). */
	o->max_buffered_bytes_total = (size_t)MAX(
	    cfg->server_max_buffered_bytes_total, cfg->server_max_request_bytes +
	    4 + cfg->server_max_response_bytes + 9);
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
	adm->loopback_only = host_is_loopback(cfg->server_listen.host);
	memset(&o, 0, sizeof(o));
	o.host = cfg->server_listen.host != NULL ? cfg->server_listen.host : "";
	o.port = cfg->server_listen.port;
	srv_limits(cfg, &o);
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
	if (authz_load(adm, cfg) < 0) {
		snprintf(err, errlen, "out of memory building the authorization "
		    "rules");
		adminsrv_free(adm->srv);
		free(adm);
		return NULL;
	}
	if (ms != NULL) {
		metrics_series_set_fn(metrics_series(MSTD(ms, ADMIN_CONNECTIONS), 0,
		    NULL), connections_value, adm);
		metrics_series_set_fn(metrics_series(MSTD(ms, ADMIN_BUFFERED), 0,
		    NULL), buffered_value, adm);
	}
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
	struct adminsrv_opts o;

	adm->cfg = cfg;
	memset(&o, 0, sizeof(o));
	srv_limits(cfg, &o);
	adminsrv_set_limits(adm->srv, &o);
	authz_load(adm, cfg);
	{
		char err[512];

		if (adminauth_reload(adm->auth, cfg, err, sizeof(err)) < 0)
			log_warnx("reload: %s", err);
	}
}

void admin_set_cluster(struct admin *adm, const struct admin_cluster_view *v,
    void *arg)
{
	adm->cv = v;
	adm->cv_arg = arg;
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
	/* Commands waiting or in flight: never answered (adminsrv_free()). */
	if (adm->wq_busy)
		mstate_excl_cancel(adm->st, adm);
	while (adm->wq_head != NULL) {
		struct awrite *w = adm->wq_head;

		adm->wq_head = w->next;
		awrite_free(w);
	}
	adm->wq_tail = NULL;
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
	authz_free(adm->az);
	adminauth_free(adm->auth);
	free(adm);
}
