/*
 * pipeline/tconf.c: destination topic configs follow the source's.
 *
 * pipeline/topic.c copies a source topic's configs once, when it creates the
 * destination topic.  This module keeps them in step afterwards: every
 * mirror.metadata.refresh.interval.ms (the KIP's interval for config, group
 * and ACL sync) it asks the source and the destination for the configs of
 * the mirror's topics that have a partition MIRRORING (DescribeConfigs,
 * one request per side for up to TC_MAX_TOPICS topics), and sends the
 * destination the differences (IncrementalAlterConfigs):
 *
 *   - a config set on the source topic itself (config source
 *     DYNAMIC_TOPIC_CONFIG) whose value the destination topic lacks or
 *     differs in is SET; broker defaults and static configs are not;
 *   - a config set on the destination topic itself that the source topic
 *     does not set (reverted to its default there, or set by hand on the
 *     destination) is DELETED;
 *   - names in mirror.topic.properties.exclude (and mirror.name) are left
 *     alone on both sides, as are sensitive configs (no value to copy).
 *
 * The destination applies one topic's changes all together or not at all;
 * after it refused several together, the topic's changes go one per
 * request from the next round on (topic_split()), so only the refused ones
 * stay behind.  A topic whose changes it refuses (INVALID_CONFIG, POLICY_VIOLATION,
 * TOPIC_AUTHORIZATION_FAILED...) keeps a warning: logged when it starts or
 * changes, counted in mirrord_topic_config_errors_total by error name,
 * shown as the WarningMessage of the topic's partitions in DescribeMirrors,
 * and retried every interval.  Nothing else changes: the topic keeps being
 * mirrored and the other topics keep being synced.
 *
 * A topic that is not MIRRORING when the round begins is not looked at;
 * one that stops (a failover) while the round is under way gets no change
 * either (round_alter()): a stopped topic is the destination's own.  While
 * the health module says the mirror's source cannot be read
 * (pmirror.down_since), no round starts.
 *
 * Everything is asynchronous on the loop (kconn).  One round per mirror is
 * in flight; its requests hold a reference to the mirror's struct ptconf,
 * which outlives the mirror (pm NULL) until the last answer is in.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "pipe_int.h"

#define TC_MAX_TOPICS 200          /* topics per round (one request a side) */
#define TC_MAX_CONFIGS 512         /* configs kept per topic and side */
#define TC_ARENA_BYTES (32u << 20) /* a decoded DescribeConfigs answer */
#define TC_RESOURCE_TOPIC 2
#define TC_SOURCE_DYNAMIC_TOPIC 1
#define TC_OP_SET 0
#define TC_OP_DELETE 1

struct tckv {
	char *name;
	char *value;                 /* NULL: a DELETE operation */
};

enum { TC_ST_NONE, TC_ST_SENT, TC_ST_APPLIED, TC_ST_REFUSED };

struct tctopic {
	char *name;
	struct tckv *src, *dst, *ops;
	size_t nsrc, ndst, nops;
	int src_ok, dst_ok;
	uint8_t *opst;               /* per op: TC_ST_* */
	int split;                   /* one op per request (topic_split()) */
	int16_t error;               /* the last refusal */
	char errmsg[320];
};

struct tcround {
	struct ptconf *tc;
	struct tctopic *t;
	size_t n;
	int pending;                 /* DescribeConfigs answers awaited */
};

struct tcwarn {
	char *topic;
	int16_t error;
	char *text;                  /* the DescribeMirrors warning */
	int split;                   /* its changes go one per request */
};

struct ptconf {
	struct pmirror *pm;          /* NULL once the mirror is gone */
	int refs;                    /* 1 for pm, 1 for a round in flight */
	int64_t next_at;             /* next round (mono ms) */
	size_t cursor;               /* next topic index of the mirror */
	struct tcround *round;
	struct tcwarn *warn;
	size_t nwarn;
};

/* ---- bookkeeping -------------------------------------------------------- */

static void kv_free(struct tckv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

static void warn_free_all(struct ptconf *tc)
{
	for (size_t i = 0; i < tc->nwarn; i++) {
		free(tc->warn[i].topic);
		free(tc->warn[i].text);
	}
	free(tc->warn);
	tc->warn = NULL;
	tc->nwarn = 0;
}

static void tc_unref(struct ptconf *tc)
{
	if (--tc->refs > 0)
		return;
	warn_free_all(tc);
	free(tc);
}

static void round_free(struct tcround *r)
{
	struct ptconf *tc = r->tc;

	for (size_t i = 0; i < r->n; i++) {
		free(r->t[i].name);
		kv_free(r->t[i].src, r->t[i].nsrc);
		kv_free(r->t[i].dst, r->t[i].ndst);
		kv_free(r->t[i].ops, r->t[i].nops);
		free(r->t[i].opst);
	}
	free(r->t);
	if (tc->round == r)
		tc->round = NULL;
	free(r);
	tc_unref(tc);
}

void ptconf_forget(struct pmirror *pm)
{
	struct ptconf *tc = pm->tconf;

	if (tc == NULL)
		return;
	pm->tconf = NULL;
	tc->pm = NULL;
	warn_free_all(tc);
	tc_unref(tc);
}

static struct tcwarn *warn_find(const struct ptconf *tc, const char *topic)
{
	for (size_t i = 0; i < tc->nwarn; i++)
		if (strcmp(tc->warn[i].topic, topic) == 0)
			return &tc->warn[i];
	return NULL;
}

static void warn_drop(struct ptconf *tc, struct tcwarn *w)
{
	free(w->topic);
	free(w->text);
	*w = tc->warn[--tc->nwarn];
}

static void warn_clear(struct ptconf *tc, const char *topic)
{
	struct tcwarn *w = warn_find(tc, topic);

	if (w == NULL)
		return;
	log_info("mirror %s: topic %s: the destination takes the topic's configs "
	    "from the source again", tc->pm->name, topic);
	warn_drop(tc, w);
}


/* A refusal of topic's configs: what was refused (lead), the error code and
 * the cluster's words in em. */
static void warn_set(struct ptconf *tc, const char *topic, int16_t code,
    const char *lead, struct kstr em)
{
	struct pmirror *pm = tc->pm;
	struct tcwarn *w = warn_find(tc, topic), *arr;
	char text[900];

	snprintf(text, sizeof(text), "%s: %s%s%.*s; mirroring goes on, retried "
	    "every %" PRId64 " ms", lead, kerr_name(code), em.len > 0 ? ": " : "",
	    em.len > 0 ? (int)MIN(em.len, 300) : 0, em.len > 0 ? em.p : "",
	    pm->conf->metadata_refresh_interval_ms);
	if (pm->pl->ms != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(pm->pl->ms,
		    TOPIC_CONFIG_ERRORS), pm->name, kerr_name(code)));
	if (w != NULL && w->error == code && strcmp(w->text, text) == 0) {
		log_debug("mirror %s: topic %s: %s", pm->name, topic, text);
		return;
	}
	log_warnx("mirror %s: topic %s: %s", pm->name, topic, text);
	if (w == NULL) {
		arr = realloc(tc->warn, (tc->nwarn + 1) * sizeof(*arr));
		if (arr == NULL)
			return;
		tc->warn = arr;
		w = &tc->warn[tc->nwarn];
		w->topic = strdup(topic);
		w->text = NULL;
		w->split = 0;
		if (w->topic == NULL)
			return;
		tc->nwarn++;
	}
	free(w->text);
	w->error = code;
	w->text = strdup(text); /* NULL (out of memory): no warning shown */
}

int ptconf_warning(struct pmirror *pm, const char *topic, char *buf,
    size_t len)
{
	const struct tcwarn *w;

	if (pm->tconf == NULL || (w = warn_find(pm->tconf, topic)) == NULL ||
	    w->text == NULL)
		return 0;
	snprintf(buf, len, "%s", w->text);
	return 1;
}

/* ---- DescribeConfigs on both sides ---------------------------------------- */

struct tcreq {
	struct tcround *r;
	int is_dst;
	int16_t version;
	size_t k;                    /* IncrementalAlterConfigs: which request */
};

static struct tctopic *round_topic(struct tcround *r, struct kstr name)
{
	for (size_t i = 0; i < r->n; i++)
		if (kstr_eq(name, r->t[i].name))
			return &r->t[i];
	return NULL;
}

/* Configs of one side worth comparing: set on the topic itself, with a
 * value, not excluded. */
static int kept(const struct ptconf *tc,
    const struct kp_describe_configs_response_describe_configs_resource_result *c,
    char *name, size_t namelen)
{
	if (c->config_source != TC_SOURCE_DYNAMIC_TOPIC || c->is_sensitive ||
	    c->name.len <= 0 || (size_t)c->name.len >= namelen || c->value.len < 0)
		return 0;
	memcpy(name, c->name.p, (size_t)c->name.len);
	name[c->name.len] = '\0';
	return !mirrorconf_topic_property_excluded(tc->pm->conf, name);
}

static void round_alter(struct tcround *r);

static void describe_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct tcreq *q = arg;
	struct tcround *r = q->r;
	struct ptconf *tc = r->tc;
	struct kp_describe_configs_response resp;
	struct karena *a = NULL;
	const char *side = q->is_dst ? "destination" : "source";

	r->pending--;
	if (tc->pm == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		log_debug("mirror %s: DescribeConfigs on the %s: %s", tc->pm->name,
		    side, errstr);
		goto out;
	}
	if ((a = karena_new(TC_ARENA_BYTES)) == NULL)
		goto out;
	kp_describe_configs_response_init(&resp);
	if (kp_describe_configs_response_decode(body, a, q->version, &resp) != 0 ||
	    body->err) {
		log_warnx("mirror %s: DescribeConfigs response of the %s does not "
		    "parse at byte %zu: %s", tc->pm->name, side, body->err_off,
		    body->why);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed DescribeConfigs response");
		goto out;
	}
	for (int32_t i = 0; i < resp.results_n; i++) {
		const struct kp_describe_configs_response_describe_configs_result *res =
		    &resp.results[i];
		struct tctopic *t = round_topic(r, res->resource_name);
		struct tckv **kv;
		size_t *nkv;

		if (t == NULL || res->resource_type != TC_RESOURCE_TOPIC)
			continue;
		if (res->error_code == 3 /* UNKNOWN_TOPIC_OR_PARTITION */) {
			/* Deleted meanwhile: the data plane sees to it. */
			log_debug("mirror %s: topic %s: DescribeConfigs on the %s: %s",
			    tc->pm->name, t->name, side, kerr_name(res->error_code));
			continue;
		}
		if (res->error_code != 0) {
			warn_set(tc, t->name, res->error_code, q->is_dst ?
			    "the destination does not describe the topic's configs "
			    "(DescribeConfigs), so they cannot follow the source's" :
			    "the source does not describe the topic's configs "
			    "(DescribeConfigs), so the destination's cannot follow them",
			    res->error_message);
			continue;
		}
		kv = q->is_dst ? &t->dst : &t->src;
		nkv = q->is_dst ? &t->ndst : &t->nsrc;
		if (*kv != NULL)
			continue; /* named twice: the first answer counts */
		*kv = calloc((size_t)MAX(res->configs_n, 1), sizeof(**kv));
		if (*kv == NULL)
			continue;
		for (int32_t k = 0; k < res->configs_n && *nkv < TC_MAX_CONFIGS; k++) {
			char name[256];

			if (!kept(tc, &res->configs[k], name, sizeof(name)))
				continue;
			(*kv)[*nkv].name = strdup(name);
			(*kv)[*nkv].value = kstr_dup(res->configs[k].value);
			if ((*kv)[*nkv].name == NULL || (*kv)[*nkv].value == NULL) {
				free((*kv)[*nkv].name);
				free((*kv)[*nkv].value);
				continue;
			}
			(*nkv)++;
		}
		if (q->is_dst)
			t->dst_ok = 1;
		else
			t->src_ok = 1;
	}
out:
	karena_free(a);
	free(q);
	if (r->pending > 0)
		return;
	/* Shutting down: the destination is freed first (NULL), and its
	 * answer may be the first of the two to fail. */
	if (tc->pm == NULL || tc->pm->pl->dst == NULL || tc->pm->pl->dst->dying)
		round_free(r);
	else
		round_alter(r);
}

static const char *kv_get(const struct tckv *kv, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].name, name) == 0)
			return kv[i].value;
	return NULL;
}

static int op_add(struct tctopic *t, const char *name, const char *value)
{
	struct tckv *o = realloc(t->ops, (t->nops + 1) * sizeof(*o));

	if (o == NULL)
		return -1;
	t->ops = o;
	o[t->nops].name = strdup(name);
	o[t->nops].value = value != NULL ? strdup(value) : NULL;
	if (o[t->nops].name == NULL || (value != NULL && o[t->nops].value == NULL)) {
		free(o[t->nops].name);
		free(o[t->nops].value);
		return -1;
	}
	t->nops++;
	return 0;
}

/* "set a=1, b=2, deleted c" for logs and warnings: the ops whose status
 * is st (TC_ST_*). */
static void ops_text(const struct tctopic *t, int st, char *buf, size_t len)
{
	size_t at = 0;
	int setting = 0, deleting = 0, first = 1;

	buf[0] = '\0';
	for (size_t i = 0; i < t->nops && at < len; i++) {
		const struct tckv *o = &t->ops[i];
		int n;

		if (t->opst[i] != st)
			continue;
		if (o->value != NULL)
			n = snprintf(buf + at, len - at, "%s%s%s=%s", first ? "" : ", ",
			    setting ? "" : "set ", o->name, o->value);
		else
			n = snprintf(buf + at, len - at, "%s%s%s", first ? "" : ", ",
			    deleting ? "" : "deleted ", o->name);
		if (o->value == NULL)
			deleting = 1;
		else
			setting = 1;
		first = 0;
		if (n < 0)
			break;
		at += (size_t)n;
	}
}

/* ---- IncrementalAlterConfigs on the destination ----------------------------- */

/*
 * A topic whose changes were refused together is split: from the next
 * round on each of its changes goes in a request of its own (k-th change
 * in the k-th request; the destination refuses a topic named twice in one
 * request), so the changes it accepts are applied and the warning names
 * only those it refuses.
 */
static int topic_split(const struct ptconf *tc, const char *topic)
{
	const struct tcwarn *w = warn_find(tc, topic);

	return w != NULL && w->split;
}

/* Which of t's ops request k carries: [*lo, *hi). */
static void req_ops(const struct tctopic *t, size_t k, size_t *lo, size_t *hi)
{
	if (t->split) {
		*lo = k < t->nops ? k : t->nops;
		*hi = k < t->nops ? k + 1 : t->nops;
	} else {
		*lo = 0;
		*hi = k == 0 ? t->nops : 0;
	}
}

static void round_finish(struct tcround *r)
{
	struct ptconf *tc = r->tc;
	char what[600], lead[700];

	for (size_t i = 0; tc->pm != NULL && i < r->n; i++) {
		struct tctopic *t = &r->t[i];
		size_t napplied = 0, nrefused = 0;

		for (size_t k = 0; k < t->nops; k++) {
			napplied += t->opst[k] == TC_ST_APPLIED;
			nrefused += t->opst[k] == TC_ST_REFUSED;
		}
		if (napplied > 0) {
			ops_text(t, TC_ST_APPLIED, what, sizeof(what));
			log_info("mirror %s: topic %s: configs synced from the source: %s",
			    tc->pm->name, t->name, what);
			if (tc->pm->pl->ms != NULL)
				metrics_counter_add(METRICS_SERIES(MSTD(tc->pm->pl->ms,
				    TOPIC_CONFIGS_APPLIED), tc->pm->name),
				    (double)napplied);
		}
		if (nrefused > 0) {
			struct tcwarn *w;

			ops_text(t, TC_ST_REFUSED, what, sizeof(what));
			snprintf(lead, sizeof(lead), "the destination refuses the "
			    "topic's configs from the source (%s)", what);
			warn_set(tc, t->name, t->error, lead, kstr_c(t->errmsg));
			w = warn_find(tc, t->name);
			if (w != NULL && nrefused > 1 && t->error != 29 /* authz */)
				w->split = 1;
		} else if (napplied == t->nops && t->nops > 0) {
			warn_clear(tc, t->name);
		}
	}
	round_free(r);
}

static void alter_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct tcreq *q = arg;
	struct tcround *r = q->r;
	struct ptconf *tc = r->tc;
	struct kp_incremental_alter_configs_response resp;
	struct karena *a = NULL;

	r->pending--;
	if (tc->pm == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		log_warnx("mirror %s: IncrementalAlterConfigs on the destination: %s; "
		    "retried in %" PRId64 " ms", tc->pm->name, errstr,
		    tc->pm->conf->metadata_refresh_interval_ms);
		goto out;
	}
	if ((a = karena_new(1u << 20)) == NULL)
		goto out;
	kp_incremental_alter_configs_response_init(&resp);
	if (kp_incremental_alter_configs_response_decode(body, a, q->version,
	    &resp) != 0 || body->err) {
		log_warnx("mirror %s: IncrementalAlterConfigs response does not parse "
		    "at byte %zu: %s", tc->pm->name, body->err_off, body->why);
		kconn_close(c, KCONN_E_PROTOCOL,
		    "malformed IncrementalAlterConfigs response");
		goto out;
	}
	for (int32_t i = 0; i < resp.responses_n; i++) {
		const struct kp_incremental_alter_configs_response_alter_configs_resource_response *x =
		    &resp.responses[i];
		struct tctopic *t = round_topic(r, x->resource_name);
		size_t lo, hi;

		if (t == NULL)
			continue;
		req_ops(t, q->k, &lo, &hi);
		for (size_t k = lo; k < hi; k++)
			if (t->opst[k] == TC_ST_SENT)
				t->opst[k] = x->error_code == 0 ? TC_ST_APPLIED :
				    TC_ST_REFUSED;
		if (x->error_code != 0 && lo < hi) {
			t->error = x->error_code;
			snprintf(t->errmsg, sizeof(t->errmsg), "%.*s",
			    x->error_message.len > 0 ? (int)MIN(x->error_message.len, 300) : 0,
			    x->error_message.len > 0 ? x->error_message.p : "");
		}
	}
out:
	karena_free(a);
	free(q);
	if (r->pending > 0)
		return;
	round_finish(r);
}

/* Sends request k of the round: 0, or -1 when it has nothing to carry or
 * could not be sent. */
static int send_alter(struct tcround *r, struct kconn *c, int v, size_t k)
{
	struct pmirror *pm = r->tc->pm;
	struct kp_incremental_alter_configs_request req;
	struct kp_incremental_alter_configs_request_alter_configs_resource *res = NULL;
	struct kp_incremental_alter_configs_request_alterable_config *cf = NULL;
	size_t nres = 0, ncf = 0, total = 0, lo, hi;
	struct tcreq *q = NULL;
	char err[256];
	int rc = -1;

	for (size_t i = 0; i < r->n; i++) {
		req_ops(&r->t[i], k, &lo, &hi);
		if (lo < hi) {
			nres++;
			total += hi - lo;
		}
	}
	if (nres == 0)
		return -1;
	res = calloc(nres, sizeof(*res));
	cf = calloc(total, sizeof(*cf));
	q = calloc(1, sizeof(*q));
	if (res == NULL || cf == NULL || q == NULL)
		goto out;
	kp_incremental_alter_configs_request_init(&req);
	nres = 0;
	for (size_t i = 0; i < r->n; i++) {
		struct tctopic *t = &r->t[i];

		req_ops(t, k, &lo, &hi);
		if (lo >= hi)
			continue;
		kp_incremental_alter_configs_request_alter_configs_resource_init(&res[nres]);
		res[nres].resource_type = TC_RESOURCE_TOPIC;
		res[nres].resource_name = kstr_c(t->name);
		res[nres].configs = &cf[ncf];
		res[nres].configs_n = (int32_t)(hi - lo);
		for (size_t o = lo; o < hi; o++, ncf++) {
			kp_incremental_alter_configs_request_alterable_config_init(&cf[ncf]);
			cf[ncf].name = kstr_c(t->ops[o].name);
			cf[ncf].config_operation = t->ops[o].value != NULL ?
			    TC_OP_SET : TC_OP_DELETE;
			cf[ncf].value = kstr_c(t->ops[o].value);
			t->opst[o] = TC_ST_SENT;
		}
		nres++;
	}
	req.resources = res;
	req.resources_n = (int32_t)nres;
	q->r = r;
	q->is_dst = 1;
	q->version = (int16_t)v;
	q->k = k;
	r->pending++;
	if (kconn_send_msg(c, KP_API_INCREMENTAL_ALTER_CONFIGS, (int16_t)v,
	    &req, 0, (int)MIN(pm->pl->cfg->pipeline_request_timeout_ms, INT32_MAX),
	    alter_response, q, err, sizeof(err)) != 0) {
		r->pending--;
		log_warnx("mirror %s: IncrementalAlterConfigs: %s", pm->name, err);
		for (size_t i = 0; i < r->n; i++) {
			req_ops(&r->t[i], k, &lo, &hi);
			for (size_t o = lo; o < hi; o++)
				r->t[i].opst[o] = TC_ST_NONE;
		}
		goto out;
	}
	q = NULL;
	rc = 0;
out:
	free(res);
	free(cf);
	free(q);
	return rc;
}

static int topic_mirroring(const struct mtopic *mt);

static void round_alter(struct tcround *r)
{
	struct ptconf *tc = r->tc;
	struct pmirror *pm = tc->pm;
	size_t nres = 0, nreq = 0;
	struct kconn *c;
	int v;

	for (size_t i = 0; i < r->n; i++) {
		struct tctopic *t = &r->t[i];
		const struct mtopic *mt = mirror_topic_find(pm->m, t->name);

		if (!t->src_ok || !t->dst_ok)
			continue;
		if (mt == NULL || !topic_mirroring(mt)) {
			/* Stopped (failed over), paused or gone since the round
			 * began: the destination's configs are left alone. */
			log_debug("mirror %s: topic %s: not mirrored any more: its "
			    "configs are left as they are", pm->name, t->name);
			continue;
		}
		for (size_t k = 0; k < t->nsrc; k++) {
			const char *dv = kv_get(t->dst, t->ndst, t->src[k].name);

			if (dv == NULL || strcmp(dv, t->src[k].value) != 0)
				(void)op_add(t, t->src[k].name, t->src[k].value);
		}
		for (size_t k = 0; k < t->ndst; k++)
			if (kv_get(t->src, t->nsrc, t->dst[k].name) == NULL)
				(void)op_add(t, t->dst[k].name, NULL);
		if (t->nops == 0) {
			warn_clear(tc, t->name); /* in step */
			continue;
		}
		if ((t->opst = calloc(t->nops, 1)) == NULL) {
			kv_free(t->ops, t->nops);
			t->ops = NULL;
			t->nops = 0;
			continue;
		}
		t->split = t->nops > 1 && topic_split(tc, t->name);
		nres++;
		nreq = MAX(nreq, t->split ? t->nops : 1);
	}
	if (nres == 0)
		goto done;
	c = pcluster_ctl(pm->pl->dst);
	v = c != NULL ? kconn_pick_version(c, KP_API_INCREMENTAL_ALTER_CONFIGS, 0, 1) : -1;
	if (v < 0) {
		if (c != NULL)
			log_warnx("mirror %s: %zu topics' configs differ from the source's "
			    "but the destination has no IncrementalAlterConfigs v0-v1",
			    pm->name, nres);
		goto done;
	}
	/* round_finish() once the last answer is in (none is called from
	 * inside kconn_send()). */
	for (size_t k = 0; k < nreq; k++)
		(void)send_alter(r, c, v, k);
	if (r->pending > 0)
		return;
done:
	round_free(r);
}

/* ---- the round ------------------------------------------------------------ */

static int topic_mirroring(const struct mtopic *mt)
{
	for (int32_t i = 0; i < mt->npart; i++)
		if (mt->parts[i] != NULL && mt->parts[i]->state == MPART_MIRRORING)
			return 1;
	return 0;
}

static int send_describe(struct tcround *r, struct pcluster *cl, int is_dst)
{
	struct pmirror *pm = r->tc->pm;
	struct kconn *c = pcluster_ctl(cl);
	struct kp_describe_configs_request req;
	struct kp_describe_configs_request_describe_configs_resource *res;
	struct tcreq *q;
	char err[256];
	int v;

	v = c != NULL ? kconn_pick_version(c, KP_API_DESCRIBE_CONFIGS, 1, 4) : -1;
	if (v < 0)
		return -1;
	res = calloc(r->n, sizeof(*res));
	q = calloc(1, sizeof(*q));
	if (res == NULL || q == NULL) {
		free(res);
		free(q);
		return -1;
	}
	kp_describe_configs_request_init(&req);
	for (size_t i = 0; i < r->n; i++) {
		kp_describe_configs_request_describe_configs_resource_init(&res[i]);
		res[i].resource_type = TC_RESOURCE_TOPIC;
		res[i].resource_name = kstr_c(r->t[i].name);
		res[i].configuration_keys_n = -1; /* every key */
	}
	req.resources = res;
	req.resources_n = (int32_t)r->n;
	q->r = r;
	q->is_dst = is_dst;
	q->version = (int16_t)v;
	r->pending++;
	if (kconn_send_msg(c, KP_API_DESCRIBE_CONFIGS, (int16_t)v, &req,
	    0, (int)MIN(pm->pl->cfg->pipeline_request_timeout_ms, INT32_MAX),
	    describe_response, q, err, sizeof(err)) != 0) {
		r->pending--;
		log_debug("mirror %s: DescribeConfigs on the %s: %s", pm->name,
		    is_dst ? "destination" : "source", err);
		free(res);
		free(q);
		return -1;
	}
	free(res);
	return 0;
}

void ptconf_tick(struct pmirror *pm, int64_t now)
{
	struct ptconf *tc = pm->tconf;
	const struct mirror *m = pm->m;
	struct tcround *r;
	if (m == NULL || pm->conf == NULL || pm->src == NULL || pm->pl->draining ||
	    pm->pl->dst == NULL)
		return;
	if (tc == NULL) {
		if ((tc = calloc(1, sizeof(*tc))) == NULL)
			return;
		tc->pm = pm;
		tc->refs = 1;
		tc->next_at = now + pm->conf->metadata_refresh_interval_ms;
		pm->tconf = tc;
		return; /* creation copied the configs just now */
	}
	if (tc->round != NULL || now < tc->next_at)
		return;
	if (pm->down_since != 0)
		return; /* the source cannot be read (pipeline/health.c says so) */
	if (pcluster_ctl(pm->src) == NULL || pcluster_ctl(pm->pl->dst) == NULL)
		return; /* connecting: try again on a later tick */
	/* Warnings of topics that left the mirror go. */
	for (size_t i = 0; i < tc->nwarn;) {
		int found = 0;

		for (size_t k = 0; k < m->ntopics && !found; k++)
			found = strcmp(m->topics[k]->name, tc->warn[i].topic) == 0;
		if (found) {
			i++;
			continue;
		}
		warn_drop(tc, &tc->warn[i]);
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return;
	r->t = calloc(MIN(MAX(m->ntopics, 1), TC_MAX_TOPICS), sizeof(*r->t));
	if (r->t == NULL) {
		free(r);
		return;
	}
	r->tc = tc;
	tc->refs++;
	tc->round = r;
	if (tc->cursor >= m->ntopics)
		tc->cursor = 0;
	for (; tc->cursor < m->ntopics && r->n < TC_MAX_TOPICS; tc->cursor++) {
		const struct mtopic *mt = m->topics[tc->cursor];
		const struct kcluster_topic *sd = pcluster_topic(pm->src, mt->name);
		const struct kcluster_topic *dd = pcluster_topic(pm->pl->dst, mt->name);

		if (!topic_mirroring(mt)) {
			/* Paused, stopped, failed: not synced, nothing to show. */
			struct tcwarn *w = warn_find(tc, mt->name);

			if (w != NULL)
				warn_drop(tc, w);
			continue;
		}
		if (sd == NULL || sd->error != 0 || dd == NULL || dd->error != 0)
			continue;
		if ((r->t[r->n].name = strdup(mt->name)) == NULL)
			break;
		r->n++;
	}
	/* The rest of a long topic list goes next tick, else wait. */
	tc->next_at = tc->cursor < m->ntopics ? now :
	    now + pm->conf->metadata_refresh_interval_ms;
	if (r->n == 0 || send_describe(r, pm->src, 0) != 0) {
		round_free(r);
		return;
	}
	(void)send_describe(r, pm->pl->dst, 1);
	/* The destination's answer missing: the round ends with nothing to
	 * compare (dst_ok stays 0) when the source's comes. */
}
