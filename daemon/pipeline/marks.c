/*
 * pipeline/marks.c: mirror loops at discovery.
 *
 * AddTopicsToMirror refuses a source topic marked as the active
 * destination of a mirror there (admin.c, srclookup.c, mirrormark.h), but
 * a pattern saved on the mirror adds matching topics later, at discovery
 * (pipeline.c pl_source_metadata()).  Before such a topic is added, its
 * mark on the source is read here: FindCoordinator of MIRRORMARK_GROUP on
 * the source, then OffsetFetch of that group for the candidates' partition
 * 0, through the pipeline's own source connections.  A candidate is added
 * only once an answer covering it is known (at most one metadata refresh
 * interval old) and says it is not an active mirror destination, or
 * mirror.allow.loops is true.  When the source does not answer the look
 * (no group coordinator, refused, timed out), the candidates are added as
 * before and that is logged: the marks are best effort.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"
#include "mirrorconf.h"
#include "mirrormark.h"
#include "pipe_int.h"

#define PMARKS_TIMEOUT_MS 10000

struct pmarks {
	int inflight;
	int64_t read_at;       /* mono ms of the last answer, 0 none */
	int failed;            /* the last look got no answer */
	char **asked;          /* candidates the last answer covers, sorted */
	size_t nasked;
	char **looped;         /* of those, active mirror destinations, sorted */
	size_t nlooped;
	char **pending;        /* asked in the look in flight */
	size_t npending;
};

struct pmreq {
	struct pipeline *pl;
	char *mirror;
};

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has(char *const *v, size_t n, const char *name)
{
	return n > 0 && bsearch(&name, v, n, sizeof(*v), name_cmp) != NULL;
}

void pmarks_forget(struct pmirror *pm)
{
	struct pmarks *mk = pm->marks;

	if (mk == NULL)
		return;
	names_free(mk->asked, mk->nasked);
	names_free(mk->looped, mk->nlooped);
	names_free(mk->pending, mk->npending);
	free(mk);
	pm->marks = NULL;
}

static struct pmirror *req_mirror(struct pmreq *r)
{
	for (size_t i = 0; i < r->pl->nmirrors; i++) {
		struct pmirror *pm = r->pl->mirrors[i];

		if (!pm->dead && pm->m != NULL && pm->marks != NULL &&
		    strcmp(pm->name, r->mirror) == 0)
			return pm;
	}
	return NULL;
}

static void req_free(struct pmreq *r)
{
	free(r->mirror);
	free(r);
}

/* The look ended: with looped (sorted, owned) or failed. */
static void look_done(struct pmirror *pm, int ok, char **looped, size_t n,
    const char *why)
{
	struct pmarks *mk = pm->marks;

	mk->inflight = 0;
	mk->read_at = clock_mono_ms();
	names_free(mk->asked, mk->nasked);
	names_free(mk->looped, mk->nlooped);
	mk->asked = mk->pending;
	mk->nasked = mk->npending;
	mk->pending = NULL;
	mk->npending = 0;
	mk->looped = looped;
	mk->nlooped = n;
	if (!ok && !mk->failed)
		log_warnx("mirror %s: cannot read the mirror marks on the source "
		    "(%s): topics discovered by pattern are added without the "
		    "mirror-loop check", pm->name, why);
	else if (ok && mk->failed)
		log_info("mirror %s: the mirror marks on the source are readable "
		    "again", pm->name);
	mk->failed = !ok;
	pl_source_metadata(pm); /* discovery again, with the answer */
}

static void of_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pmreq *r = arg;
	struct pmirror *pm = req_mirror(r);
	struct kp_offset_fetch_response resp;
	struct karena *a = NULL;
	char **looped = NULL, why[300];
	size_t n = 0;

	(void)c;
	if (pm == NULL || !pm->marks->inflight)
		goto out;
	if (err != KCONN_E_OK) {
		snprintf(why, sizeof(why), "OffsetFetch: %s", errstr);
		look_done(pm, 0, NULL, 0, why);
		goto out;
	}
	if ((a = karena_new(64u << 20)) == NULL ||
	    kp_offset_fetch_response_decode(body, a, 2, &resp) < 0 || body->err ||
	    resp.error_code != 0) {
		snprintf(why, sizeof(why), "OffsetFetch: %s", a == NULL ||
		    body->err ? "malformed answer" : kerr_name(resp.error_code));
		look_done(pm, 0, NULL, 0, why);
		goto out;
	}
	looped = calloc((size_t)MAX(resp.topics_n, 0) + 1, sizeof(*looped));
	for (int32_t t = 0; looped != NULL && t < resp.topics_n; t++) {
		const struct kp_offset_fetch_response_topic *rt = &resp.topics[t];

		for (int32_t i = 0; i < rt->partitions_n; i++) {
			const struct kp_offset_fetch_response_partition *pp =
			    &rt->partitions[i];
			char meta[600], src[128], other[256];
			int active;

			if (pp->partition_index != 0 || pp->error_code != 0 ||
			    pp->committed_offset < 0 || pp->metadata.len <= 0 ||
			    pp->metadata.len >= (int32_t)sizeof(meta))
				continue;
			memcpy(meta, pp->metadata.p, (size_t)pp->metadata.len);
			meta[pp->metadata.len] = '\0';
			if (mirrormark_parse(meta, &active, src, sizeof(src), other,
			    sizeof(other)) != 0 || !active)
				continue;
			if ((looped[n] = kstr_dup(rt->name)) != NULL) {
				log_warnx("mirror %s: topic %s on the source is the "
				    "destination of mirror %s there (from cluster %s): "
				    "not mirrored back (mirror loop; "
				    "mirror.allow.loops=true allows it)", pm->name,
				    looped[n], other, src);
				n++;
			}
		}
	}
	if (n > 1)
		qsort(looped, n, sizeof(*looped), name_cmp);
	look_done(pm, 1, looped, n, NULL);
out:
	karena_free(a);
	req_free(r);
}

static void fc_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pmreq *r = arg;
	struct pmirror *pm = req_mirror(r);
	struct kp_find_coordinator_response resp;
	struct kp_offset_fetch_request req;
	struct kp_offset_fetch_request_topic *ts = NULL;
	struct karena *a = NULL;
	struct kconn *coord = NULL;
	static int32_t zero = 0;
	char why[300];
	int v;

	(void)c;
	if (pm == NULL || !pm->marks->inflight)
		goto out;
	if (err != KCONN_E_OK) {
		snprintf(why, sizeof(why), "FindCoordinator: %s", errstr);
		goto fail;
	}
	if ((a = karena_new(1 << 20)) == NULL ||
	    kp_find_coordinator_response_decode(body, a, 1, &resp) < 0 ||
	    body->err || resp.error_code != 0) {
		snprintf(why, sizeof(why), "FindCoordinator: %s", a == NULL ||
		    body->err ? "malformed answer" : kerr_name(resp.error_code));
		goto fail;
	}
	for (size_t i = 0; i < pm->src->nbrokers; i++)
		if (pm->src->brokers[i]->id == resp.node_id)
			coord = pbroker_conn(pm->src->brokers[i]);
	if (coord == NULL) {
		/* Connecting (pbroker_conn() started it): ask again with the
		 * next metadata, wanted now. */
		pm->marks->inflight = 0;
		pcluster_want_metadata(pm->src);
		goto out;
	}
	v = kconn_pick_version(coord, KP_API_OFFSET_FETCH, 2, 2);
	ts = calloc(pm->marks->npending + 1, sizeof(*ts));
	if (v < 0 || ts == NULL) {
		snprintf(why, sizeof(why), "broker %s: no OffsetFetch v2",
		    kconn_name(coord));
		goto fail;
	}
	for (size_t i = 0; i < pm->marks->npending; i++) {
		kp_offset_fetch_request_topic_init(&ts[i]);
		ts[i].name = kstr_c(pm->marks->pending[i]);
		ts[i].partition_indexes = &zero;
		ts[i].partition_indexes_n = 1;
	}
	kp_offset_fetch_request_init(&req);
	req.group_id = kstr_c(MIRRORMARK_GROUP);
	req.topics = ts;
	req.topics_n = (int32_t)pm->marks->npending;
	if (kconn_send_msg(coord, KP_API_OFFSET_FETCH, 2, &req, 0,
	    PMARKS_TIMEOUT_MS, of_done, r, why, sizeof(why)) != 0)
		goto fail;
	free(ts);
	karena_free(a);
	return;
fail:
	look_done(pm, 0, NULL, 0, why);
out:
	free(ts);
	karena_free(a);
	req_free(r);
}

/* Starts a look at the marks of cand[0..n) (owned; sorted here). */
static void look_start(struct pmirror *pm, char **cand, size_t n)
{
	struct pmarks *mk = pm->marks;
	struct kp_find_coordinator_request req;
	struct kconn *ctl = pcluster_ctl(pm->src);
	struct pmreq *r;
	char why[300];

	qsort(cand, n, sizeof(*cand), name_cmp);
	names_free(mk->pending, mk->npending);
	mk->pending = cand;
	mk->npending = n;
	mk->inflight = 1;
	if (ctl == NULL || kconn_pick_version(ctl, KP_API_FIND_COORDINATOR, 1,
	    1) < 0) {
		mk->inflight = 0;  /* not ready yet: next metadata */
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->mirror = strdup(pm->name)) == NULL) {
		free(r);
		mk->inflight = 0;
		return;
	}
	r->pl = pm->pl;
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(MIRRORMARK_GROUP);
	req.key_type = 0;
	if (kconn_send_msg(ctl, KP_API_FIND_COORDINATOR, 1, &req, 0,
	    PMARKS_TIMEOUT_MS, fc_done, r, why, sizeof(why)) != 0) {
		req_free(r);
		mk->inflight = 0;
	}
}

int pmarks_allows(struct pmirror *pm, const char *topic, char **const cand,
    size_t ncand)
{
	struct pmarks *mk;
	int64_t now = clock_mono_ms();

	if (pm->conf != NULL && pm->conf->allow_loops)
		return 1;
	if (pm->marks == NULL && (pm->marks = calloc(1, sizeof(*pm->marks))) ==
	    NULL)
		return 0;
	mk = pm->marks;
	if (mk->inflight)
		return 0;
	if (mk->read_at > 0 && now - mk->read_at <
	    pm->conf->metadata_refresh_interval_ms && has(mk->asked, mk->nasked,
	    topic))
		return mk->failed || !has(mk->looped, mk->nlooped, topic);
	/* Unknown: ask for every candidate of this pass. */
	if (cand != NULL && ncand > 0) {
		char **v = calloc(ncand, sizeof(*v));
		size_t k = 0;

		for (size_t i = 0; v != NULL && i < ncand; i++)
			if ((v[k] = strdup(cand[i])) != NULL)
				k++;
		if (v != NULL)
			look_start(pm, v, k);
	}
	return 0;
}

/* ---- failback: one partition's mark ------------------------------------ */

struct pfreq {
	struct ppart *p;
	uint32_t gen;
};

static int fb_gone(struct pfreq *r)
{
	struct ppart *p = r->p;

	return p->dead || r->gen != p->gen || p->step != PS_PROVE ||
	    p->fb_state != 1;
}

static void fb_end(struct pfreq *r, int found, const char *src,
    const char *mirror, int64_t last, int32_t epoch, int ident, int64_t next)
{
	struct ppart *p = r->p;

	if (!fb_gone(r)) {
		pprove_failback(p, found, src, mirror, last, epoch, ident, next);
	} else if (!p->dead) {
		/* Moved on (stopping, paused): the look held the step as the
		 * prove's Fetch does; release it as that one does. */
		p->step_inflight = 0;
		if (p->fb_state == 1)
			p->fb_state = 0;
		pl_kick(p->pm->pl);
	}
	pl_part_unref(p);
	free(r);
}

static void fb_fetched(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pfreq *r = arg;
	struct kp_offset_fetch_response resp;
	struct karena *a = NULL;
	char meta[600], src[128] = "", mirror[256] = "";
	long long last = -1, next = -1;
	int epoch = -1, ident = 0, active = 1, found = 0;

	(void)c;
	(void)errstr;
	if (err == KCONN_E_OK && !fb_gone(r) &&
	    (a = karena_new(1 << 20)) != NULL &&
	    kp_offset_fetch_response_decode(body, a, 2, &resp) == 0 &&
	    !body->err && resp.error_code == 0 && resp.topics_n == 1 &&
	    resp.topics[0].partitions_n == 1) {
		const struct kp_offset_fetch_response_partition *pp =
		    &resp.topics[0].partitions[0];

		if (pp->error_code == 0 && pp->committed_offset >= 0 &&
		    pp->metadata.len > 0 && pp->metadata.len < (int32_t)sizeof(meta)) {
			memcpy(meta, pp->metadata.p, (size_t)pp->metadata.len);
			meta[pp->metadata.len] = '\0';
			found = mirrormark_parse(meta, &active, src, sizeof(src),
			    mirror, sizeof(mirror)) == 0 && !active &&
			    mirrormark_stop(meta, &last, &epoch, &ident, &next) == 0;
		}
	}
	karena_free(a);
	fb_end(r, found, src, mirror, last, epoch, ident, next);
}

static void fb_coordinator(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pfreq *r = arg;
	struct ppart *p = r->p;
	struct kp_find_coordinator_response resp;
	struct kp_offset_fetch_request req;
	struct kp_offset_fetch_request_topic t;
	struct karena *a = NULL;
	struct kconn *coord = NULL;
	int32_t part = p->index;
	char why[300];

	(void)c;
	(void)errstr;
	if (err != KCONN_E_OK || fb_gone(r) || p->pm->src == NULL ||
	    (a = karena_new(1 << 20)) == NULL ||
	    kp_find_coordinator_response_decode(body, a, 1, &resp) < 0 ||
	    body->err || resp.error_code != 0)
		goto none;
	for (size_t i = 0; i < p->pm->src->nbrokers; i++)
		if (p->pm->src->brokers[i]->id == resp.node_id)
			coord = pbroker_conn(p->pm->src->brokers[i]);
	if (coord == NULL) {
		/* Connecting: the next prove round asks again. */
		p->fb_state = 0;
		p->not_before = clock_mono_ms() + 200;
		p->step_inflight = 0;
		pl_part_unref(p);
		free(r);
		karena_free(a);
		return;
	}
	kp_offset_fetch_request_topic_init(&t);
	t.name = kstr_c(p->topic);
	t.partition_indexes = &part;
	t.partition_indexes_n = 1;
	kp_offset_fetch_request_init(&req);
	req.group_id = kstr_c(MIRRORMARK_GROUP);
	req.topics = &t;
	req.topics_n = 1;
	if (kconn_send_msg(coord, KP_API_OFFSET_FETCH, 2, &req, 0,
	    PMARKS_TIMEOUT_MS, fb_fetched, r, why, sizeof(why)) != 0)
		goto none;
	karena_free(a);
	return;
none:
	karena_free(a);
	fb_end(r, 0, NULL, NULL, -1, -1, 0, -1);
}

int pmarks_failback(struct ppart *p)
{
	struct kp_find_coordinator_request req;
	struct kconn *ctl = p->pm->src != NULL ? pcluster_ctl(p->pm->src) : NULL;
	struct pfreq *r;
	char why[300];

	if (ctl == NULL || kconn_pick_version(ctl, KP_API_FIND_COORDINATOR, 1,
	    1) < 0 || (r = calloc(1, sizeof(*r))) == NULL)
		return -1;
	r->p = p;
	r->gen = p->gen;
	p->refs++;
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(MIRRORMARK_GROUP);
	req.key_type = 0;
	if (kconn_send_msg(ctl, KP_API_FIND_COORDINATOR, 1, &req, 0,
	    PMARKS_TIMEOUT_MS, fb_coordinator, r, why, sizeof(why)) != 0) {
		pl_part_unref(p);
		free(r);
		return -1;
	}
	return 0;
}
