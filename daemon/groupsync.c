/*
 * groupsync.c: consumer-group offset sync, exact (issue 11).
 *
 * Every mirror.groups.sync.interval.ms, per mirror, on the pipeline's loop:
 *
 *   1. ListGroups on every source broker (and the control connection):
 *      the groups matching mirror.groups.include and not
 *      mirror.groups.exclude;
 *   2. per group, one at a time: FindCoordinator and OffsetFetch
 *      (RequireStable, all partitions) on the source;
 *   3. each committed offset C of a partition mirrored by this mirror
 *      (MIRRORING or STOPPING; STOPPED only for the one sync after it
 *      stopped in this process) is translated to a destination offset D:
 *
 *      - C below the source offset the pipeline knows is on the
 *        destination (src_done): the partition's translation anchors
 *        (lib/xlate; none = identity).  C inside a hole (aborted
 *        transactional data, commit markers, records the cleaner removed)
 *        gives the destination offset of the next source record that is
 *        there: the record a consumer at C reads next.  D is never past
 *        the destination end (dst_next): a hole at the end of what was
 *        mirrored maps to where the next record will land;
 *      - D below the destination log start (retention or DeleteRecords
 *        removed those records there): D is the first offset the
 *        destination still has, the earliest record a consumer can read;
 *        logged.  Source offsets below the first anchor map as mirroring
 *        started: source 0 is destination 0 (a start at a later source
 *        log start is itself an anchor, so such a commit maps to the
 *        first mirrored record);
 *      - C at or past src_done: D = dst_next, the translation of the
 *        highest mirrored offset <= C.  Past it (C > src_done) the group is
 *        lagging: the records [src_done, C) are not mirrored yet and a
 *        consumer failing over now would read them again.  Nothing is ever
 *        committed beyond what is mirrored, so nothing is skipped;
 *
 *   4. FindCoordinator and DescribeGroups on the destination: a group
 *      with members (state other than Empty or Dead) is left alone;
 *   5. OffsetCommit with generation -1 and no member id (what an admin
 *      tool sends; the broker refuses it too while the group has members),
 *      the source's metadata string, and leader epoch -1 so that a
 *      destination consumer never validates the position against the
 *      source's epochs (no truncation, no reset).
 *
 * Nothing here blocks; every request goes through the pipeline's own
 * connections (pcluster, pbroker).  A failed step ends the group's sync for
 * this round with a logged, counted error; the next round tries again.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "groupsync.h"
#include "kbuf.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "mirrormark.h"
#include "pipe_int.h"

#define GS_ARENA (16u << 20)
#define GS_TIMEOUT_MS 30000

struct gscommit {
	char *topic;
	int32_t partition;
	int64_t offset;     /* destination offset to commit */
	char *metadata;     /* NULL: null */
};

struct gsmirror {
	struct groupsync *gs;
	char *name;
	int64_t next_at;    /* mono ms */
	int running;
	int kicked;         /* a sync is wanted as soon as possible */
	int seen;           /* still in the pipeline (tick bookkeeping) */
	/* The round. */
	int lg_pending;
	char **groups;
	size_t ngroups, groups_cap, gi;
	int round_errors;
	int round_lagging;
	int mark_done;      /* the mirror marks were sent this round */
	uint64_t mark_sig;  /* of the marks last committed, 0 none */
	int64_t mark_at;    /* when (mono ms): renewed hourly, so that the
	                     * broker's offset retention never expires them */
	/* The group being synced. */
	char *group;
	struct gscommit *commits;
	size_t ncommits;
	/* Its OffsetCommit, sent in pieces (OC_PIECE_BYTES): the next
	 * commit to send and the answers' counts so far. */
	size_t oc_next;
	int oc_ok, oc_failed, oc_active;
	int16_t oc_first;
	int64_t last_ok_wall_ms; /* end of the last round without errors, 0 never */
	int unsupported_logged;  /* the source lacks ListGroups: said once */
	/* What was last committed per group (a signature of the commit set),
	 * sorted by group: an unchanged translation is not committed again.
	 * last: the previous round's; next: this round's, built in the
	 * (sorted) order groups are handled; sig: the current group's. */
	struct gslast *last, *next;
	size_t nlast, nnext, capnext;
	char *sig;
	size_t siglen;
};

struct gslast {
	char *group;
	char *sig;
	size_t siglen;
};

struct groupsync {
	struct pipeline *pl;
	struct gsmirror **ms;
	size_t n;
	int dying;
};

/* ---- bookkeeping -------------------------------------------------------- */

static void commits_clear(struct gsmirror *gm)
{
	for (size_t i = 0; i < gm->ncommits; i++) {
		free(gm->commits[i].topic);
		free(gm->commits[i].metadata);
	}
	free(gm->commits);
	gm->commits = NULL;
	gm->ncommits = 0;
	gm->oc_next = 0;
	free(gm->sig);
	gm->sig = NULL;
	gm->siglen = 0;
}

static int last_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct gslast *)elem)->group);
}

/* The signature of the commit set (topic, partition, offset, metadata of
 * each, in order) into gm->sig; -1 on ENOMEM. */
static int sig_build(struct gsmirror *gm)
{
	size_t len = 0, o = 0;

	for (size_t i = 0; i < gm->ncommits; i++)
		len += strlen(gm->commits[i].topic) + 1 + 64 +
		    (gm->commits[i].metadata ? strlen(gm->commits[i].metadata) : 0) + 2;
	free(gm->sig);
	if ((gm->sig = malloc(len + 1)) == NULL)
		return -1;
	for (size_t i = 0; i < gm->ncommits; i++) {
		const struct gscommit *c = &gm->commits[i];

		o += (size_t)snprintf(gm->sig + o, len + 1 - o, "%s%c%" PRId32 ":%"
		    PRId64 ":%c%s%c", c->topic, 0, c->partition, c->offset,
		    c->metadata ? 'm' : 'n', c->metadata ? c->metadata : "", 0);
	}
	gm->siglen = o;
	return 0;
}

/* Remembers the current group's commit set for the next round (moves
 * gm->sig); nothing on ENOMEM (it is committed again next round). */
static void last_keep(struct gsmirror *gm, char *sig, size_t siglen)
{
	struct gslast *l;

	if (gm->nnext == gm->capnext) {
		size_t cap = gm->capnext ? gm->capnext * 2 : 16;

		if ((l = realloc(gm->next, cap * sizeof(*l))) == NULL) {
			free(sig);
			return;
		}
		gm->next = l;
		gm->capnext = cap;
	}
	l = &gm->next[gm->nnext];
	if ((l->group = strdup(gm->group)) == NULL) {
		free(sig);
		return;
	}
	l->sig = sig;
	l->siglen = siglen;
	gm->nnext++;
}

static void groups_clear(struct gsmirror *gm)
{
	for (size_t i = 0; i < gm->ngroups; i++)
		free(gm->groups[i]);
	free(gm->groups);
	gm->groups = NULL;
	gm->ngroups = gm->groups_cap = gm->gi = 0;
	free(gm->group);
	gm->group = NULL;
	commits_clear(gm);
}

static void lasts_free(struct gslast *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(l[i].group);
		free(l[i].sig);
	}
	free(l);
}

static void gm_free(struct gsmirror *gm)
{
	lasts_free(gm->last, gm->nlast);
	lasts_free(gm->next, gm->nnext);
	free(gm->sig);
	groups_clear(gm);
	free(gm->name);
	free(gm);
}

static struct pmirror *gm_pmirror(struct gsmirror *gm)
{
	struct pipeline *pl = gm->gs->pl;

	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];

		if (!pm->dead && pm->m != NULL && strcmp(pm->name, gm->name) == 0)
			return pm;
	}
	return NULL;
}

static struct metrics_std *gs_ms(struct gsmirror *gm)
{
	return gm->gs->pl->ms;
}

static void count_group(struct gsmirror *gm, const char *result)
{
	struct metrics_std *ms = gs_ms(gm);

	if (gm->group != NULL && strcmp(gm->group, MIRRORMARK_GROUP) == 0)
		return; /* the mirror marks are not a synced group */
	if (ms != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(ms, GROUP_SYNCS), gm->name,
		    result));
}

static void gs_error(struct gsmirror *gm, const char *what, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

static void gs_error(struct gsmirror *gm, const char *what, const char *fmt,
    ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (gm->group != NULL && strcmp(gm->group, MIRRORMARK_GROUP) == 0) {
		/* The marks are retried next round; a failed one holds no
		 * group's final sync back. */
		log_warnx("mirror %s: the mirror marks (group %s) on the "
		    "destination: %s", gm->name, MIRRORMARK_GROUP, msg);
		return;
	}
	log_warnx("mirror %s: consumer-group offset sync: %s", gm->name, msg);
	gm->round_errors++;
	if (gs_ms(gm) != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(gs_ms(gm), GROUP_SYNC_ERRORS),
		    gm->name, what));
}

/* A partition whose committed offsets are synced now. */
static int part_eligible(const struct ppart *p)
{
	if (p->dead || p->mp == NULL || !p->owned || p->src_done < 0 ||
	    p->dst_next < 0)
		return 0;   /* (another instance's: its owner syncs it) */
	switch (p->mp->state) {
	case MPART_MIRRORING:
	case MPART_STOPPING:
		return 1;
	case MPART_STOPPED:
		return p->gs_final != 0;
	default:
		return 0;
	}
}

static struct ppart *part_find(struct pmirror *pm, const char *topic,
    int32_t index)
{
	for (size_t i = 0; i < pm->nparts; i++) {
		struct ppart *p = pm->parts[i];

		if (p->index == index && !p->dead && strcmp(p->topic, topic) == 0)
			return p;
	}
	return NULL;
}

/* ---- the round ---------------------------------------------------------- */

static void round_end(struct gsmirror *gm);
static void group_next(struct gsmirror *gm);

static struct kconn *broker_conn_by_id(struct pcluster *cl, int32_t id)
{
	for (size_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i]->id == id)
			return pbroker_conn(cl->brokers[i]);
	return NULL;
}

/* A request context: the mirror's name is looked up again on the answer. */
struct gsreq {
	struct groupsync *gs;
	struct gsmirror *gm;
	int16_t version;
	int is_dst;
};

static struct gsreq *req_new(struct gsmirror *gm, int16_t version, int is_dst)
{
	struct gsreq *r = calloc(1, sizeof(*r));

	if (r != NULL) {
		r->gs = gm->gs;
		r->gm = gm;
		r->version = version;
		r->is_dst = is_dst;
	}
	return r;
}

/*
 * The start every answer shares: decodes the response to r (api_key) into
 * resp, in a new arena *a of arena_size bytes that the caller frees (NULL
 * too).  -1 after gs_error() for a transport error or a malformed answer
 * ("group g: OffsetFetch on the source: malformed answer").
 */
static int gs_answer(struct gsmirror *gm, const struct gsreq *r,
    int16_t api_key, int err, const char *errstr, struct kr *body,
    size_t arena_size, void *resp, struct karena **a)
{
	const struct kp_api *api = kp_api_find(api_key);
	const char *side = r->is_dst ? "destination" : "source";
	char what[300] = "";

	if (api_key != KP_API_LIST_GROUPS)
		snprintf(what, sizeof(what), "group %s: ", gm->group);
	if (err != KCONN_E_OK) {
		gs_error(gm, api->name, "%s%s on the %s: %s", what, api->name,
		    side, errstr);
		return -1;
	}
	if ((*a = karena_new(arena_size)) == NULL ||
	    api->response_decode(body, *a, r->version, resp) < 0 || body->err) {
		gs_error(gm, api->name, "%s%s on the %s: malformed answer", what,
		    api->name, side);
		return -1;
	}
	return 0;
}

/* 1 when the answer must be dropped (shutting down; the round is over). */
static int req_gone(struct gsreq *r)
{
	return r->gs->dying;
}

/*
 * Sends one request of the round: api_key's request msg at the newest
 * version in [vmin, vmax] that c offers, answered by done with a fresh
 * context.  0 when sent; else -1 after counting and logging what failed,
 * naming the group (or "every group" for ListGroups) and the broker.
 */
static int gs_send(struct gsmirror *gm, struct kconn *c, int16_t api_key,
    int16_t vmin, int16_t vmax, int is_dst, const void *msg,
    kconn_resp_cb done)
{
	const char *api = kp_api_name(api_key);
	struct gsreq *r;
	char err[300], what[300];
	int v = kconn_pick_version(c, api_key, vmin, vmax);

	if (api_key == KP_API_LIST_GROUPS)
		snprintf(what, sizeof(what), "every group");
	else
		snprintf(what, sizeof(what), "group %s", gm->group);

	if (v < 0) {
		gs_error(gm, api, "%s: the %s broker %s does not support %s v%d-%d",
		    what, is_dst ? "destination" : "source", kconn_name(c), api,
		    (int)vmin, (int)vmax);
		return -1;
	}
	if ((r = req_new(gm, (int16_t)v, is_dst)) == NULL) {
		gs_error(gm, api, "%s: %s: out of memory", what, api);
		return -1;
	}
	if (kconn_send_msg(c, api_key, (int16_t)v, msg, 0, GS_TIMEOUT_MS, done,
	    r, err, sizeof(err)) != 0) {
		free(r);
		gs_error(gm, api, "%s: %s to %s: %s", what, api, kconn_name(c), err);
		return -1;
	}
	return 0;
}

/* ListGroups */

static int group_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lg_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct pmirror *pm;
	struct kp_list_groups_response resp;
	struct karena *a = NULL;

	(void)c;
	if (req_gone(r)) {
		free(r);
		return;
	}
	gm->lg_pending--;
	pm = gm_pmirror(gm);
	if (gs_answer(gm, r, KP_API_LIST_GROUPS, err, errstr, body, GS_ARENA,
	    &resp, &a) != 0)
		goto out;
	if (resp.error_code != 0) {
		gs_error(gm, "ListGroups", "ListGroups on the source: %s",
		    kerr_name(resp.error_code));
		goto out;
	}
	for (int32_t i = 0; pm != NULL && i < resp.groups_n; i++) {
		const struct kstr *g = &resp.groups[i].group_id;
		char *name;

		if (g->len <= 0)
			continue;
		/* Consumer groups only (classic "consumer" or KIP-848 ones,
		 * whose protocol type is "consumer" too); Connect and others
		 * keep no offsets of topics. */
		if (resp.groups[i].protocol_type.len > 0 &&
		    !(resp.groups[i].protocol_type.len == 8 &&
		    memcmp(resp.groups[i].protocol_type.p, "consumer", 8) == 0))
			continue;
		if ((name = strndup(g->p, (size_t)g->len)) == NULL)
			break;
		if (strcmp(name, MIRRORMARK_GROUP) == 0 ||
		    !mirrorconf_group_selected(pm->conf, name)) {
			free(name);
			continue;
		}
		if (gm->ngroups == gm->groups_cap) {
			size_t cap = gm->groups_cap ? gm->groups_cap * 2 : 16;
			char **ng = realloc(gm->groups, cap * sizeof(*ng));

			if (ng == NULL) {
				free(name);
				break;
			}
			gm->groups = ng;
			gm->groups_cap = cap;
		}
		gm->groups[gm->ngroups++] = name;
	}
out:
	karena_free(a);
	free(r);
	if (gm->lg_pending > 0)
		return;
	if (pm == NULL) {
		round_end(gm);
		return;
	}
	/* Sorted, without the duplicates several brokers' answers give. */
	if (gm->ngroups > 1) {
		size_t k = 1;

		qsort(gm->groups, gm->ngroups, sizeof(*gm->groups), group_cmp);
		for (size_t i = 1; i < gm->ngroups; i++) {
			if (strcmp(gm->groups[i], gm->groups[k - 1]) == 0)
				free(gm->groups[i]);
			else
				gm->groups[k++] = gm->groups[i];
		}
		gm->ngroups = k;
	}
	gm->gi = 0;
	group_next(gm);
}

static void lg_send(struct gsmirror *gm, struct kconn *c)
{
	struct kp_list_groups_request req;

	if (kconn_pick_version(c, KP_API_LIST_GROUPS, 0, 4) < 0) {
		/* Logged once per mirror (the librdkafka mock has no
		 * ListGroups): counted every round. */
		gm->round_errors++;
		if (gs_ms(gm) != NULL)
			metrics_counter_inc(METRICS_SERIES(MSTD(gs_ms(gm),
			    GROUP_SYNC_ERRORS), gm->name, "ListGroups"));
		if (!gm->unsupported_logged)
			log_warnx("mirror %s: consumer-group offset sync: the source "
			    "broker %s does not support ListGroups v0-4: no group "
			    "offsets are synced", gm->name, kconn_name(c));
		gm->unsupported_logged = 1;
		return;
	}
	kp_list_groups_request_init(&req);
	if (gs_send(gm, c, KP_API_LIST_GROUPS, 0, 4, 0, &req, lg_done) == 0)
		gm->lg_pending++;
}

/* 1 if a round started; 0 if there is nothing to sync yet. */
static int round_start(struct gsmirror *gm, struct pmirror *pm)
{
	struct pcluster *src = pm->src;
	int any = 0;

	groups_clear(gm);
	gm->round_errors = 0;
	gm->round_lagging = 0;
	gm->mark_done = 0;
	for (size_t i = 0; i < pm->nparts; i++)
		if (part_eligible(pm->parts[i]))
			any = 1;
	if (!any)
		return 0; /* nothing mirrored yet */
	for (size_t i = 0; i < pm->nparts; i++)
		if (pm->parts[i]->gs_final == 1)
			pm->parts[i]->gs_final = 2; /* covered by this round */
	gm->running = 1;
	gm->lg_pending = 0;
	if (pm->conf->groups_include.n == 0) {
		group_next(gm); /* no group wanted: only the mirror marks */
		return 1;
	}
	{
		struct kconn *ctl = pcluster_ctl(src);

		if (ctl != NULL)
			lg_send(gm, ctl);
	}
	for (size_t i = 0; i < src->nbrokers; i++) {
		struct kconn *c = pbroker_conn(src->brokers[i]);

		if (c != NULL)
			lg_send(gm, c);
		else
			pcluster_want_metadata(src); /* connecting: next round */
	}
	if (gm->lg_pending == 0) {
		if (!gm->unsupported_logged)
			gs_error(gm, "ListGroups", "no connection to the source is ready");
		group_next(gm); /* the mirror marks, then the end */
	}
	return 1;
}

static void round_end(struct gsmirror *gm)
{
	struct pmirror *pm = gm_pmirror(gm);
	struct metrics_std *ms = gs_ms(gm);

	gm->running = 0;
	groups_clear(gm);
	/* Groups handled this round in sorted order: next is sorted. */
	lasts_free(gm->last, gm->nlast);
	gm->last = gm->next;
	gm->nlast = gm->nnext;
	gm->next = NULL;
	gm->nnext = gm->capnext = 0;
	if (pm != NULL) {
		for (size_t i = 0; i < pm->nparts; i++) {
			struct ppart *p = pm->parts[i];

			if (p->gs_final == 2)
				p->gs_final = gm->round_errors ? 1 : 0;
		}
		gm->next_at = clock_mono_ms() + pm->conf->groups_sync_interval_ms;
		for (size_t i = 0; i < pm->nparts; i++)
			if (pm->parts[i]->gs_final == 1)
				gm->kicked = 1; /* again soon: the final sync failed */
	}
	if (gm->round_errors == 0)
		gm->last_ok_wall_ms = clock_wall_ms();
	if (ms != NULL)
		metrics_gauge_set(METRICS_SERIES(MSTD(ms, GROUP_SYNC_LAGGING),
		    gm->name), gm->round_lagging);
}

/* One group: source coordinator */

struct gsfc {
	struct gsreq r;
	int step; /* 0: source, 1: destination */
};

static void of_send(struct gsmirror *gm, struct kconn *c);
static void dg_send(struct gsmirror *gm, struct kconn *c);
static void oc_send(struct gsmirror *gm, struct kconn *c);
static uint64_t marks_sig(const struct gsmirror *gm);

static void fc_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct kp_find_coordinator_response resp;
	struct pmirror *pm;
	struct kconn *coord = NULL;
	struct karena *a = NULL;
	const char *side = r->is_dst ? "destination" : "source";

	(void)c;
	if (req_gone(r)) {
		free(r);
		return;
	}
	pm = gm_pmirror(gm);
	if (pm == NULL)
		goto next;
	if (gs_answer(gm, r, KP_API_FIND_COORDINATOR, err, errstr, body,
	    1 << 20, &resp, &a) != 0)
		goto next;
	if (resp.error_code != 0) {
		gs_error(gm, "FindCoordinator", "group %s: FindCoordinator on the %s: %s",
		    gm->group, side, kerr_name(resp.error_code));
		goto next;
	}
	coord = broker_conn_by_id(r->is_dst ? gm->gs->pl->dst : pm->src,
	    resp.node_id);
	if (coord == NULL) {
		pcluster_want_metadata(r->is_dst ? gm->gs->pl->dst : pm->src);
		gs_error(gm, "FindCoordinator", "group %s: no ready connection to "
		    "its coordinator, %s broker %" PRId32, gm->group, side,
		    resp.node_id);
		goto next;
	}
	karena_free(a);
	free(r);
	if (side[0] == 'd' && strcmp(gm->group, MIRRORMARK_GROUP) == 0)
		oc_send(gm, coord); /* never has members; and the librdkafka
		                     * mock closes on DescribeGroups */
	else if (side[0] == 'd')
		dg_send(gm, coord);
	else
		of_send(gm, coord);
	return;
next:
	karena_free(a);
	free(r);
	group_next(gm);
}

static void fc_send(struct gsmirror *gm, struct kconn *ctl, int is_dst)
{
	struct kp_find_coordinator_request req;

	if (ctl == NULL) {
		gs_error(gm, "FindCoordinator", "group %s: no ready connection to the %s: "
		    "the round ends here", gm->group, is_dst ? "destination" : "source");
		gm->gi = gm->ngroups; /* the others would fail alike (and recurse) */
		group_next(gm);
		return;
	}
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(gm->group);
	req.key_type = 0;
	if (gs_send(gm, ctl, KP_API_FIND_COORDINATOR, 0, 3, is_dst, &req,
	    fc_done) != 0) {
		/* The other groups would fail alike: the round ends here. */
		gm->gi = gm->ngroups;
		group_next(gm);
	}
}

/* OffsetFetch on the source */

static void of_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct kp_offset_fetch_response resp;
	struct pmirror *pm;
	struct karena *a = NULL;
	size_t cap = 0;

	(void)c;
	if (req_gone(r)) {
		free(r);
		return;
	}
	pm = gm_pmirror(gm);
	if (pm == NULL)
		goto next;
	if (gs_answer(gm, r, KP_API_OFFSET_FETCH, err, errstr, body, GS_ARENA,
	    &resp, &a) != 0)
		goto next;
	if (resp.error_code != 0) {
		gs_error(gm, "OffsetFetch", "group %s: OffsetFetch on the source: %s",
		    gm->group, kerr_name(resp.error_code));
		goto next;
	}
	commits_clear(gm);
	for (int32_t t = 0; t < resp.topics_n; t++) {
		const struct kp_offset_fetch_response_topic *tp = &resp.topics[t];
		char topic[256];

		if (tp->name.len <= 0 || tp->name.len >= (int32_t)sizeof(topic))
			continue;
		memcpy(topic, tp->name.p, (size_t)tp->name.len);
		topic[tp->name.len] = '\0';
		if (mirror_topic_find(pm->m, topic) == NULL)
			continue; /* not mirrored here: no partition scan */
		for (int32_t i = 0; i < tp->partitions_n; i++) {
			const struct kp_offset_fetch_response_partition *pp =
			    &tp->partitions[i];
			struct ppart *p = part_find(pm, topic, pp->partition_index);
			struct gscommit *gc;
			int64_t d;
			int kind;

			if (p == NULL || !part_eligible(p) || pp->committed_offset < 0)
				continue;
			if (pp->error_code != 0) {
				/* UNSTABLE_OFFSET_COMMIT: a transactional commit is
				 * pending; the next round sees its outcome. */
				gs_error(gm, "OffsetFetch", "group %s: %s-%" PRId32 ": %s",
				    gm->group, topic, pp->partition_index,
				    kerr_name(pp->error_code));
				continue;
			}
			kind = groupsync_translate(p->mp->anchors, p->mp->nanchors,
			    p->src_done, p->dst_next, p->dst_log_start,
			    pp->committed_offset, &d);
			if (kind == GS_INVALID) {
				gs_error(gm, "translate", "group %s: %s-%" PRId32 ": the "
				    "translation map is invalid or memory ran out",
				    gm->group, topic, pp->partition_index);
				continue;
			}
			if (kind == GS_LAGGING) {
				gm->round_lagging++;
				log_debug("mirror %s: group %s: %s-%" PRId32 " committed "
				    "source offset %" PRId64 " is past the mirrored end %"
				    PRId64 ": committing destination offset %" PRId64
				    " (lagging)", gm->name, gm->group, topic,
				    pp->partition_index, pp->committed_offset, p->src_done, d);
			} else if (kind == GS_BEFORE_START) {
				log_debug("mirror %s: group %s: %s-%" PRId32 " committed "
				    "source offset %" PRId64 " is before what the destination "
				    "holds: committing its first offset %" PRId64, gm->name,
				    gm->group, topic, pp->partition_index,
				    pp->committed_offset, d);
			}
			if (gm->ncommits == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct gscommit *n = realloc(gm->commits, nc * sizeof(*n));

				if (n == NULL)
					goto next;
				gm->commits = n;
				cap = nc;
			}
			gc = &gm->commits[gm->ncommits];
			memset(gc, 0, sizeof(*gc));
			gc->topic = strdup(topic);
			gc->partition = pp->partition_index;
			gc->offset = d;
			if (pp->metadata.len >= 0)
				gc->metadata = strndup(pp->metadata.p ? pp->metadata.p : "",
				    (size_t)pp->metadata.len);
			gm->ncommits++;
			if (gc->topic == NULL)
				goto next;
		}
	}
	karena_free(a);
	free(r);
	if (gm->ncommits == 0) {
		count_group(gm, "nothing");
		group_next(gm);
		return;
	}
	if (sig_build(gm) == 0 && gm->nlast > 0) {
		const struct gslast *l = bsearch(gm->group, gm->last, gm->nlast,
		    sizeof(*gm->last), last_cmp);

		if (l != NULL && l->siglen == gm->siglen &&
		    memcmp(l->sig, gm->sig, gm->siglen) == 0) {
			/* Committed so, and the group had no members then. */
			last_keep(gm, gm->sig, gm->siglen);
			gm->sig = NULL;
			count_group(gm, "unchanged");
			group_next(gm);
			return;
		}
	}
	fc_send(gm, pcluster_ctl(gm->gs->pl->dst), 1);
	return;
next:
	karena_free(a);
	free(r);
	group_next(gm);
}

static void of_send(struct gsmirror *gm, struct kconn *c)
{
	struct kp_offset_fetch_request req;

	kp_offset_fetch_request_init(&req);
	req.group_id = kstr_c(gm->group);
	req.topics = NULL;
	req.topics_n = -1; /* every partition */
	req.require_stable = 1;
	if (gs_send(gm, c, KP_API_OFFSET_FETCH, 2, 7, 0, &req, of_done) != 0)
		group_next(gm);
}

/* DescribeGroups, then OffsetCommit, on the destination coordinator */

struct gscoord {
	struct gsreq r;
	struct kconn *c;
};

static void oc_send(struct gsmirror *gm, struct kconn *c);

static int kstr_is(struct kstr s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len == (int32_t)n && memcmp(s.p, lit, n) == 0;
}

static void dg_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct kp_describe_groups_response resp;
	struct karena *a = NULL;

	if (req_gone(r)) {
		free(r);
		return;
	}
	if (gm_pmirror(gm) == NULL)
		goto next;
	if (gs_answer(gm, r, KP_API_DESCRIBE_GROUPS, err, errstr, body,
	    GS_ARENA, &resp, &a) != 0)
		goto next;
	if (resp.groups_n != 1) {
		gs_error(gm, "DescribeGroups", "group %s: DescribeGroups on the "
		    "destination: malformed answer", gm->group);
		goto next;
	}
	/* GROUP_ID_NOT_FOUND (69): no such group yet, committing creates it. */
	if (resp.groups[0].error_code != 0 && resp.groups[0].error_code != 69) {
		gs_error(gm, "DescribeGroups", "group %s: DescribeGroups on the "
		    "destination: %s", gm->group, kerr_name(resp.groups[0].error_code));
		goto next;
	}
	if (resp.groups[0].error_code == 0 &&
	    (resp.groups[0].members_n > 0 ||
	    !(kstr_is(resp.groups[0].group_state, "Empty") ||
	    kstr_is(resp.groups[0].group_state, "Dead") ||
	    resp.groups[0].group_state.len <= 0))) {
		log_info("mirror %s: group %s is active on the destination "
		    "(state %.*s, %" PRId32 " members): its offsets are not synced",
		    gm->name, gm->group, (int)MAX(resp.groups[0].group_state.len, 0),
		    resp.groups[0].group_state.p ? resp.groups[0].group_state.p : "",
		    MAX(resp.groups[0].members_n, 0));
		count_group(gm, "active");
		goto next;
	}
	karena_free(a);
	free(r);
	oc_send(gm, c);
	return;
next:
	karena_free(a);
	free(r);
	group_next(gm);
}

static void dg_send(struct gsmirror *gm, struct kconn *c)
{
	struct kp_describe_groups_request req;
	struct kstr g = kstr_c(gm->group);

	kp_describe_groups_request_init(&req);
	req.groups = &g;
	req.groups_n = 1;
	if (gs_send(gm, c, KP_API_DESCRIBE_GROUPS, 0, 5, 1, &req, dg_done) != 0)
		group_next(gm);
}

static void oc_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct kp_offset_commit_response resp;
	struct karena *a = NULL;
	int ok = 0, failed = 0, active = 0;
	int16_t first = 0;

	if (req_gone(r)) {
		free(r);
		return;
	}
	if (gs_answer(gm, r, KP_API_OFFSET_COMMIT, err, errstr, body, GS_ARENA,
	    &resp, &a) != 0)
		goto next;
	ok = gm->oc_ok;
	failed = gm->oc_failed;
	active = gm->oc_active;
	first = gm->oc_first;
	for (int32_t t = 0; t < resp.topics_n; t++)
		for (int32_t i = 0; i < resp.topics[t].partitions_n; i++) {
			int16_t e = resp.topics[t].partitions[i].error_code;

			if (e == 0) {
				ok++;
			} else if (e == 25 || e == 22 || e == 27 || e == 68) {
				/* UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
				 * REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP:
				 * members joined since DescribeGroups (or a
				 * KIP-848 group that DescribeGroups does not
				 * describe); the broker kept their offsets. */
				active++;
			} else {
				failed++;
				if (first == 0)
					first = e;
			}
		}
	if (ok > gm->oc_ok && gs_ms(gm) != NULL)
		metrics_counter_add(METRICS_SERIES(MSTD(gs_ms(gm),
		    GROUP_OFFSETS_COMMITTED), gm->name), ok - gm->oc_ok);
	if (gm->oc_next < gm->ncommits) {
		/* The next piece, on the same coordinator connection. */
		gm->oc_ok = ok;
		gm->oc_failed = failed;
		gm->oc_active = active;
		gm->oc_first = first;
		karena_free(a);
		free(r);
		oc_send(gm, c);
		return;
	}
	if (failed > 0)
		gs_error(gm, "OffsetCommit", "group %s: OffsetCommit on the "
		    "destination refused %d partitions: %s", gm->group, failed,
		    kerr_name(first));
	else if (active > 0)
		count_group(gm, "active");
	else
		count_group(gm, "synced");
	if (failed == 0 && active == 0 && gm->group != NULL &&
	    strcmp(gm->group, MIRRORMARK_GROUP) == 0)
		gm->mark_sig = marks_sig(gm), gm->mark_at = clock_mono_ms();
	if (failed == 0 && active == 0 && gm->sig != NULL) {
		last_keep(gm, gm->sig, gm->siglen);
		gm->sig = NULL;
	}
	log_debug("mirror %s: group %s: %d offsets committed to the destination",
	    gm->name, gm->group, ok);
next:
	karena_free(a);
	free(r);
	group_next(gm);
}

/*
 * The group's commits from gm->oc_next on, as many as fit in one piece:
 * a broker writes one OffsetCommit's offsets as one batch of its offsets
 * topic, whose size is capped (message.max.bytes, 1 MiB by default;
 * Kafka 4 refuses the whole commit, UNKNOWN_SERVER_ERROR, when it is
 * over), and a mirror of 10,000 partitions marks every one (about 2 MB).
 * 32 KiB pieces stay under any limit a broker is likely to have; the
 * estimate counts a record's framing generously.  oc_done() sends the
 * next piece on the same connection.
 */
#define OC_PIECE_BYTES (32 * 1024)

static void oc_send(struct gsmirror *gm, struct kconn *c)
{
	struct kp_offset_commit_request req;
	struct kp_offset_commit_request_topic *topics = NULL;
	struct kp_offset_commit_request_partition *parts = NULL;
	size_t from = gm->oc_next, end = from, bytes = 0;
	int32_t nt = 0;

	if (from == 0)
		gm->oc_ok = gm->oc_failed = gm->oc_active = gm->oc_first = 0;
	/* Its record in the offsets topic: the key (group, topic,
	 * partition), the value (offset, metadata, times), the framing. */
	while (end < gm->ncommits && (end == from || bytes < OC_PIECE_BYTES)) {
		const struct gscommit *gc = &gm->commits[end++];

		bytes += 64 + strlen(gm->group) + strlen(gc->topic) +
		    (gc->metadata != NULL ? strlen(gc->metadata) : 0);
	}
	gm->oc_next = end;
	topics = calloc(end - from, sizeof(*topics));
	parts = calloc(end - from, sizeof(*parts));
	if (topics == NULL || parts == NULL) {
		gs_error(gm, "OffsetCommit", "group %s: OffsetCommit: out of memory",
		    gm->group);
		goto fail;
	}
	/* Commits arrive grouped by topic (one OffsetFetch topic at a time). */
	for (size_t i = from; i < end; i++) {
		const struct gscommit *gc = &gm->commits[i];
		struct kp_offset_commit_request_partition *pp = &parts[i - from];

		if (nt == 0 || strcmp(topics[nt - 1].name.p, gc->topic) != 0) {
			kp_offset_commit_request_topic_init(&topics[nt]);
			topics[nt].name = kstr_c(gc->topic);
			topics[nt].partitions = pp;
			topics[nt].partitions_n = 0;
			nt++;
		}
		kp_offset_commit_request_partition_init(pp);
		pp->partition_index = gc->partition;
		pp->committed_offset = gc->offset;
		pp->committed_leader_epoch = -1;
		pp->committed_metadata = gc->metadata != NULL ?
		    kstr_c(gc->metadata) : KSTR_NULL;
		topics[nt - 1].partitions_n++;
	}
	kp_offset_commit_request_init(&req);
	req.group_id = kstr_c(gm->group);
	req.generation_id_or_member_epoch = -1;
	req.member_id = kstr_c("");
	req.group_instance_id = KSTR_NULL;
	req.retention_time_ms = -1;
	req.topics = topics;
	req.topics_n = nt;
	if (gs_send(gm, c, KP_API_OFFSET_COMMIT, 2, 8, 1, &req, oc_done) != 0)
		goto fail;
	free(topics);
	free(parts);
	return;
fail:
	free(topics);
	free(parts);
	group_next(gm);
}

/*
 * The mirror marks (mirrormark.h) as the commits of the current "group":
 * every partition of every topic of the mirror, active while one of its
 * partitions is not STOPPED.  Returns how many.
 */
static size_t marks_build(struct gsmirror *gm, struct pmirror *pm)
{
	const struct mirror *m = pm->m;
	char meta[600];

	size_t n = 0;

	if (m == NULL || m->ntopics == 0)
		return 0;
	commits_clear(gm);
	for (size_t t = 0; t < m->ntopics; t++)
		n += (size_t)MAX(m->topics[t]->npart, 0);
	gm->commits = calloc(n + 1, sizeof(*gm->commits));
	if (gm->commits == NULL)
		return 0;
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];
		int active = 0;

		if (mt->npart <= 0)
			continue;
		for (int32_t i = 0; i < mt->npart; i++)
			if (mt->parts[i]->state != MPART_STOPPED)
				active = 1;
		/* Every partition (a stale stopped mark of an earlier stop
		 * must not outlive a topic added again); stopped ones with
		 * where they stopped (a failback reads it). */
		for (int32_t i = 0; i < mt->npart; i++) {
			const struct mpart *mp = mt->parts[i];
			struct gscommit *gc = &gm->commits[gm->ncommits];
			int len = mirrormark_format(meta, sizeof(meta), active,
			    m->source_cluster_id, m->name);
			int64_t sd = active ? -1 : mpart_stop_dst(mp);

			if (!active && mp->last_offset >= 0 && len > 0 &&
			    (size_t)len < sizeof(meta))
				len += snprintf(meta + len, sizeof(meta) - (size_t)len,
				    " last=%" PRId64 " epoch=%" PRId32 " ident=%d",
				    mp->last_offset, mp->last_epoch,
				    mp->nanchors == 0);
			/* Where the destination's own records begin (a
			 * failback of a topic not copied offset for offset
			 * needs it, pipe_prove.c). */
			if (!active && mp->last_offset >= 0 && sd >= 0 && len > 0 &&
			    (size_t)len < sizeof(meta))
				snprintf(meta + len, sizeof(meta) - (size_t)len,
				    " dst=%" PRId64, sd);
			gc->topic = strdup(mt->name);
			gc->metadata = strdup(meta);
			gc->partition = i;
			gc->offset = 0;
			gm->ncommits++;
			if (gc->topic == NULL || gc->metadata == NULL)
				return 0;
		}
	}
	return gm->ncommits;
}

/* FNV-1a over the marks: unchanged marks are not committed again. */
static uint64_t marks_sig(const struct gsmirror *gm)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < gm->ncommits; i++) {
		const struct gscommit *gc = &gm->commits[i];
		const char *parts[] = { gc->topic, gc->metadata };

		for (size_t k = 0; k < 2; k++)
			for (const char *s = parts[k]; s != NULL && *s; s++)
				h = (h ^ (uint8_t)*s) * 1099511628211ull;
		h = (h ^ (uint64_t)gc->partition) * 1099511628211ull;
	}
	return h != 0 ? h : 1;
}

/* Next group of the round, or its end. */
static void group_next(struct gsmirror *gm)
{
	struct pmirror *pm = gm_pmirror(gm);

	free(gm->group);
	gm->group = NULL;
	commits_clear(gm);
	if (pm != NULL && !gm->gs->pl->draining && !gm->mark_done &&
	    (pm->src == NULL || gm->gi >= gm->ngroups)) {
		/* Last: the marks that tell a mirrord reading the
		 * destination as its source which topics are mirrored. */
		gm->mark_done = 1;
		if (marks_build(gm, pm) > 0 && (marks_sig(gm) != gm->mark_sig ||
		    clock_mono_ms() - gm->mark_at > 3600000) &&
		    (gm->group = strdup(MIRRORMARK_GROUP)) != NULL) {
			gm->mark_sig = 0; /* set again once committed */
			fc_send(gm, pcluster_ctl(gm->gs->pl->dst), 1);
			return;
		}
		commits_clear(gm);
	}
	if (pm == NULL || pm->src == NULL || gm->gi >= gm->ngroups ||
	    gm->gs->pl->draining) {
		round_end(gm);
		return;
	}
	gm->group = gm->groups[gm->gi];
	gm->groups[gm->gi++] = NULL;
	fc_send(gm, pcluster_ctl(pm->src), 0);
}

/* ---- interface ---------------------------------------------------------- */

static double age_fn(void *arg)
{
	struct gsmirror *gm = arg;

	if (gm->last_ok_wall_ms == 0)
		return -1;
	return (double)(clock_wall_ms() - gm->last_ok_wall_ms) / 1000.0;
}

struct groupsync *groupsync_new(struct pipeline *pl)
{
	struct groupsync *gs = calloc(1, sizeof(*gs));

	if (gs != NULL)
		gs->pl = pl;
	return gs;
}

void groupsync_free(struct groupsync *gs)
{
	if (gs == NULL)
		return;
	for (size_t i = 0; i < gs->n; i++) {
		if (gs->pl->ms != NULL)
			metrics_series_set_fn(metrics_series_find(MSTD(gs->pl->ms,
			    GROUP_SYNC_AGE), 1, (const char *const[]){ gs->ms[i]->name }),
			    NULL, NULL);
		gm_free(gs->ms[i]);
	}
	free(gs->ms);
	free(gs);
}

void groupsync_dying(struct groupsync *gs)
{
	if (gs != NULL)
		gs->dying = 1;
}

static struct gsmirror *gm_get(struct groupsync *gs, const char *name)
{
	struct gsmirror *gm, **n;

	for (size_t i = 0; i < gs->n; i++)
		if (strcmp(gs->ms[i]->name, name) == 0)
			return gs->ms[i];
	if ((n = realloc(gs->ms, (gs->n + 1) * sizeof(*n))) == NULL)
		return NULL;
	gs->ms = n;
	if ((gm = calloc(1, sizeof(*gm))) == NULL ||
	    (gm->name = strdup(name)) == NULL) {
		free(gm);
		return NULL;
	}
	gm->gs = gs;
	gs->ms[gs->n++] = gm;
	if (gs->pl->ms != NULL)
		metrics_series_set_fn(METRICS_SERIES(MSTD(gs->pl->ms, GROUP_SYNC_AGE),
		    gm->name), age_fn, gm);
	return gm;
}

void groupsync_kick(struct groupsync *gs, const char *mirror)
{
	struct gsmirror *gm;

	if (gs != NULL && (gm = gm_get(gs, mirror)) != NULL)
		gm->kicked = 1;
}

void groupsync_tick(struct groupsync *gs)
{
	struct pipeline *pl;
	int64_t now = clock_mono_ms();

	if (gs == NULL || gs->dying)
		return;
	pl = gs->pl;
	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];
		struct gsmirror *gm;

		if (pm->dead || pm->m == NULL || pm->conf == NULL || pm->src == NULL)
			continue;
		if ((gm = gm_get(gs, pm->name)) == NULL || gm->running)
			continue;
		if (pl->draining || (!gm->kicked && now < gm->next_at))
			continue;
		gm->kicked = 0;
		gm->next_at = now + pm->conf->groups_sync_interval_ms;
		if (!round_start(gm, pm)) /* look again soon, not an interval later */
			gm->next_at = now + MIN(pm->conf->groups_sync_interval_ms, 1000);
	}
	/* Mirrors that left the pipeline: forget them once idle. */
	for (size_t i = 0; i < gs->n;) {
		struct gsmirror *gm = gs->ms[i];

		if (!gm->running && gm_pmirror(gm) == NULL) {
			if (pl->ms != NULL) {
				struct metric_series *s = metrics_series_find(MSTD(pl->ms,
				    GROUP_SYNC_AGE), 1, (const char *const[]){ gm->name });

				metrics_series_set_fn(s, NULL, NULL);
				metrics_series_remove(s);
			}
			gm_free(gm);
			gs->ms[i] = gs->ms[--gs->n];
			continue;
		}
		i++;
	}
}
