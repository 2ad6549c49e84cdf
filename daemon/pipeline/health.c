/*
 * pipeline/health.c: what the data plane knows, since when, and what it
 * cannot reach.
 *
 * A number mirrord shows is only as good as its age.  Every party the
 * data plane talks to keeps a struct phealth: when it last answered well,
 * and since when it has been failing, how (enum ph_cause) and why, in
 * words that name the broker:
 *
 *   pcluster.md     the cluster's Metadata answers (kcluster refreshes);
 *   pbroker.health  a broker's data requests (Fetch on a source, Produce
 *                   on the destination) and its connection's failures;
 *   ppart.src/dst   the partition's own part of those answers (a Fetch or
 *                   ListOffsets part with an error, or without one).
 *
 * From them, at the moment something is shown (DescribeMirrors, a scrape,
 * /mirrors), part_trouble() decides whether a partition is STALLED: it
 * cannot read its source (while fetching, checking epochs or asking where
 * the source log starts, and while PAUSED, whose source end is asked on a
 * slow cadence) or write its destination (while reading the destination
 * end or producing).  An explicit failure (refused, unresolvable, TLS,
 * SASL, a Kafka error for the partition, no leader) stalls it once it has
 * lasted PH_GRACE_MS with no good answer since; a source that says
 * nothing stalls it after the stall bound ph_bound_ms() (the request
 * timeout plus the Fetch's wait: a healthy Fetch always answers within
 * it).  A partition whose queue is full is not waiting for the source,
 * so its silence is not the source's.
 *
 * Lag in time is measured from what is known, not from what was last
 * copied: caught_ms is the moment of the newest source answer after which
 * the destination held everything up to that answer's end.  While the
 * latest answer is younger than the bound and shows the destination
 * caught up, the lag is 0; otherwise it is the time since caught_ms (or,
 * when less, since the newest copied record was written: a backlog being
 * copied).  So a mirror that cannot read its source shows a lag that
 * grows from the moment it was last known current.
 *
 * Logs: one line when a mirror's source goes, one when it is back, a
 * reminder at most every PH_REMIND_MS while it stays away (ph_tick()).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "compat.h"
#include "daemonconf.h"
#include "kerr.h"
#include "log.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "pipe_int.h"

#define PH_GRACE_MS 3000        /* an explicit failure stalls after this */
#define PH_REMIND_MS 60000      /* a reminder while a source stays away */
#define PH_MIN_BOUND_MS 2000

static const char *const cause_names[] = {
#define X(e, s) s,
	PH_CAUSES(X)
#undef X
};
_Static_assert(sizeof(cause_names) / sizeof(cause_names[0]) == PH_NCAUSES,
    "one name per cause");

const char *ph_cause_name(int cause)
{
	return cause >= 0 && cause < PH_NCAUSES ? cause_names[cause] : "other";
}

void ph_ok(struct phealth *h, int64_t now)
{
	h->ok_ms = now;
	h->fail_since = 0;
}

void ph_vfail(struct phealth *h, int64_t now, int cause, const char *fmt,
    va_list ap)
{
	if (h->fail_since == 0)
		h->fail_since = now;
	h->fail_ms = now;
	h->cause = cause;
	vsnprintf(h->why, sizeof(h->why), fmt, ap);
}

void ph_fail(struct phealth *h, int64_t now, int cause, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ph_vfail(h, now, cause, fmt, ap);
	va_end(ap);
}

int ph_conn_cause(int err, const char *errstr)
{
	const char *s = errstr != NULL ? errstr : "";

	switch (err) {
	case KCONN_E_TIMEOUT: return PH_TIMEOUT;
	case KCONN_E_TLS: return PH_TLS;
	case KCONN_E_AUTH: return PH_SASL;
	default: break;
	}
	if (strstr(s, "cannot resolve") != NULL)
		return PH_DNS;
	if (strstr(s, "refused") != NULL)
		return PH_REFUSED;
	if (strstr(s, "timed out") != NULL || strstr(s, "no metadata after") != NULL)
		return PH_TIMEOUT;
	if (strstr(s, "TLS") != NULL || strstr(s, "certificate") != NULL)
		return PH_TLS;
	if (strstr(s, "SASL") != NULL)
		return PH_SASL;
	return err == KCONN_E_TRANSPORT || err == KCONN_E_CLOSED ?
	    PH_TRANSPORT : PH_OTHER;
}

int ph_kafka_cause(int16_t code)
{
	switch (code) {
	case KERR_TOPIC_AUTHORIZATION_FAILED:
	case KERR_CLUSTER_AUTHORIZATION_FAILED:
	case KERR_GROUP_AUTHORIZATION_FAILED:
		return PH_AUTHZ;
	case KERR_SASL_AUTHENTICATION_FAILED:
		return PH_SASL;
	case KERR_UNKNOWN_TOPIC_OR_PARTITION:
	case KERR_UNKNOWN_TOPIC_ID:
		return PH_UNKNOWN_TOPIC;
	case KERR_REQUEST_TIMED_OUT:
		return PH_TIMEOUT;
	case KERR_NOT_LEADER_OR_FOLLOWER:
	case KERR_LEADER_NOT_AVAILABLE:
	case KERR_FENCED_LEADER_EPOCH:
	case KERR_UNKNOWN_LEADER_EPOCH:
	case KERR_REPLICA_NOT_AVAILABLE:
	case KERR_NOT_ENOUGH_REPLICAS:
	case KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
	case KERR_KAFKA_STORAGE_ERROR:
		return PH_LEADER;
	default:
		return PH_OTHER;
	}
}

/* The mirror whose source cl is, or NULL (the destination). */
static struct pmirror *cluster_mirror(const struct pcluster *cl)
{
	if (!cl->is_source)
		return NULL;
	for (size_t i = 0; i < cl->pl->nmirrors; i++)
		if (cl->pl->mirrors[i]->src == cl)
			return cl->pl->mirrors[i];
	return NULL;
}

void ph_count(struct pipeline *pl, const char *mirror, int cause)
{
	if (pl->ms == NULL || mirror == NULL)
		return;
	metrics_counter_inc(METRICS_SERIES(MSTD(pl->ms, MIRROR_SOURCE_ERRORS),
	    mirror, ph_cause_name(cause)));
}

void ph_cl_fail(struct pcluster *cl, struct phealth *h, int cause,
    const char *fmt, ...)
{
	struct pmirror *pm;
	va_list ap;

	if (cl->dying)
		return;
	va_start(ap, fmt);
	ph_vfail(h, clock_wall_ms(), cause, fmt, ap);
	va_end(ap);
	if ((pm = cluster_mirror(cl)) != NULL)
		ph_count(cl->pl, pm->name, cause);
}

int64_t ph_bound_ms(const struct pmirror *pm)
{
	int64_t b = pm->pl->cfg->pipeline_request_timeout_ms +
	    (pm->conf != NULL ? pm->conf->fetch_wait_max_ms : 1000);

	return MAX(b, PH_MIN_BOUND_MS);
}

/* ---- what the partition knows --------------------------------------------- */

void ph_src_answer(struct ppart *p, int64_t now)
{
	ph_ok(&p->src, now);
	if (p->live.lag == 0)
		p->caught_ms = now;
}

void ph_note_copied(struct ppart *p)
{
	if (p->live.lag == 0 && p->src.ok_ms > p->caught_ms)
		p->caught_ms = p->src.ok_ms;
}

/* ---- words ------------------------------------------------------------------ */

/* "2026-12-06T13:04:05Z" */
static const char *wall_text(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(buf, len,
	    "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%" PRId64 " ms", ms);
	return buf;
}

/* "45 s", "12 min 5 s", "3 h 2 min" */
static const char *dur_text(int64_t ms, char *buf, size_t len)
{
	int64_t s = MAX(ms, 0) / 1000;

	if (s < 120)
		snprintf(buf, len, "%" PRId64 " s", s);
	else if (s < 7200)
		snprintf(buf, len, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRId64 " h %" PRId64 " min", s / 3600,
		    (s / 60) % 60);
	return buf;
}

/* The first bootstrap server, for the reasons' "(host:port)". */
static const char *source_name(const struct pmirror *pm, char *buf, size_t len)
{
	const char *b = pm->conf != NULL && pm->conf->bootstrap_servers != NULL ?
	    pm->conf->bootstrap_servers : pm->src != NULL ?
	    pm->src->kcfg.bootstrap : "";

	snprintf(buf, len, "%s", b);
	return buf;
}

static struct pbroker *broker_of(const struct pcluster *cl, int32_t node)
{
	for (size_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i]->id == node)
			return cl->brokers[i];
	return NULL;
}

/* "broker 1 (127.0.0.1:9093)" */
static const char *broker_text(const struct pcluster *cl, int32_t node,
    char *buf, size_t len)
{
	size_t n = kcluster_broker_count(cl->kc);

	for (size_t i = 0; i < n; i++) {
		const char *host, *rack;
		int32_t id;
		int port;

		if (kcluster_broker_at(cl->kc, i, &id, &host, &port, &rack) == 0 &&
		    id == node) {
			snprintf(buf, len, "broker %" PRId32 " (%s:%d)", node, host,
			    port);
			return buf;
		}
	}
	snprintf(buf, len, "broker %" PRId32, node);
	return buf;
}

/* ---- trouble ------------------------------------------------------------------ */

/* Trouble of one side of a partition. */
struct ptrouble {
	int side;             /* 0 none, 1 source, 2 destination */
	int stalled;          /* it lasted long enough to show */
	int cause;
	int64_t since;        /* wall ms */
	char why[640];
};

static void trouble_from(struct ptrouble *t, int side, const struct phealth *h)
{
	t->side = side;
	t->cause = h->cause;
	/* A timeout is noticed a timeout late: it began at the last answer. */
	t->since = h->cause == PH_TIMEOUT && h->ok_ms > 0 &&
	    h->ok_ms < h->fail_since ? h->ok_ms : h->fail_since;
	snprintf(t->why, sizeof(t->why), "%s", h->why);
}

/* The source side of p, while it reads the source (or PAUSED, asks it for
 * its end). */
static int source_trouble(const struct ppart *p, int64_t now,
    struct ptrouble *t)
{
	const struct pmirror *pm = p->pm;
	const struct pcluster *cl = pm->src;
	int32_t leader;
	const struct pbroker *b;
	int64_t base, bound = ph_bound_ms(pm);
	char bt[160], d[40];

	if (cl == NULL) {
		t->side = 1;
		t->cause = PH_CONFIG;
		t->since = pm->unusable_since != 0 ? pm->unusable_since : pm->born_ms;
		snprintf(t->why, sizeof(t->why), "%s", pm->unusable[0] != '\0' ?
		    pm->unusable : "the mirror's source client is not ready");
		return 1;
	}
	leader = kcluster_leader(cl->kc, p->topic, p->index, NULL);
	b = leader >= 0 ? broker_of(cl, leader) : NULL;
	if (b != NULL && b->health.fail_since != 0 &&
	    b->health.fail_since >= p->src.ok_ms &&
	    (p->src.fail_since == 0 || b->health.fail_ms >= p->src.fail_ms)) {
		/* The broker fails now (the partition's own error, if any,
		 * came before): its cause, since the first of them. */
		trouble_from(t, 1, &b->health);
		if (p->src.fail_since != 0)
			t->since = MIN(t->since, p->src.fail_since);
		return 1;
	}
	if (p->src.fail_since != 0) {
		trouble_from(t, 1, &p->src);
		if (leader < 0 && cl->md.fail_since != 0 &&
		    cl->md.fail_ms > p->src.fail_ms) {
			trouble_from(t, 1, &cl->md);
			t->since = MIN(t->since, p->src.fail_since);
		}
		return 1;
	}
	if (leader < 0) {
		if (cl->md.fail_since != 0) {
			trouble_from(t, 1, &cl->md);
			return 1;
		}
		base = MAX(MAX(p->src.ok_ms, cl->md.ok_ms), MAX(p->run_since,
		    cl->born_ms));
		if (now - base <= bound)
			return 0;
		t->side = 1;
		t->cause = cl->md.ok_ms == 0 ? PH_TIMEOUT : PH_LEADER;
		t->since = base;
		snprintf(t->why, sizeof(t->why), cl->md.ok_ms == 0 ?
		    "no Metadata answer from the source for %s" :
		    "the source's Metadata names no leader for the partition "
		    "(for %s)", dur_text(now - base, d, sizeof(d)));
		return 1;
	}
	/* Silence: fetching, with room, and no answer for the bound. */
	if (p->step != PS_RUN || p->mp == NULL || p->mp->state == MPART_PAUSED ||
	    (int64_t)p->qbytes > pm->pl->cfg->pipeline_max_inflight_bytes_per_partition / 2)
		return 0;
	base = MAX(p->src.ok_ms, p->run_since);
	if (base == 0 || now - base <= bound)
		return 0;
	t->side = 1;
	t->cause = PH_TIMEOUT;
	t->since = base;
	snprintf(t->why, sizeof(t->why), "%s: no answer to Fetch for %s",
	    broker_text(cl, leader, bt, sizeof(bt)),
	    dur_text(now - base, d, sizeof(d)));
	return 1;
}

/* The destination side of p, while it reads the destination end or has
 * batches to write. */
static int dest_trouble(const struct ppart *p, struct ptrouble *t)
{
	const struct pcluster *cl = p->pm->pl->dst;
	const struct pbroker *b;
	int32_t leader;

	if (cl == NULL)
		return 0;
	if (p->dst.fail_since != 0) {
		trouble_from(t, 2, &p->dst);
		return 1;
	}
	leader = kcluster_leader(cl->kc, p->topic, p->index, NULL);
	if (leader < 0) {
		if (cl->md.fail_since != 0) {
			trouble_from(t, 2, &cl->md);
			return 1;
		}
		return 0;
	}
	if ((b = broker_of(cl, leader)) != NULL && b->health.fail_since != 0 &&
	    b->health.fail_since >= p->dst.ok_ms) {
		trouble_from(t, 2, &b->health);
		return 1;
	}
	return 0;
}

/*
 * Multi-instance mode: the instance may not write its partitions now (its
 * group membership's lease ran out, pipeline_set_lease()).  That is no
 * passing failure but a decision, so it shows at once, since the moment
 * the lease ended.
 */
static int lease_trouble(const struct ppart *p, int64_t now,
    struct ptrouble *t)
{
	const struct pipeline *pl = p->pm->pl;
	int64_t mono = clock_mono_ms();

	if (mono < pl->lease_until)
		return 0;
	t->side = 2;
	t->cause = PH_OTHER;
	t->since = pl->lease_until > 0 ? now - (mono - pl->lease_until) :
	    pl->lease_off_wall > 0 ? pl->lease_off_wall : now;
	snprintf(t->why, sizeof(t->why), "%.600s", pl->lease_why[0] != '\0' ?
	    pl->lease_why : "this instance is no proven member of its group: "
	    "copying paused");
	t->stalled = 1;
	return 1;
}

/* A metadata write p waits for (its anchors, its identity, its state):
 * the log's broker, or with several instances the metadata writer, has
 * not confirmed it. */
static int write_trouble(const struct ppart *p, int64_t now,
    struct ptrouble *t)
{
	int64_t since = p->mwrite ? p->mwrite_wall : p->swrite ?
	    p->swrite_wall : 0;
	char d[40];

	if (since <= 0 || now - since < PH_GRACE_MS)
		return 0;
	t->side = 2;
	t->cause = PH_TIMEOUT;
	t->since = since;
	snprintf(t->why, sizeof(t->why), "the metadata log has not recorded %s "
	    "for %s (%s)", p->mwrite ? p->mwrite_what : "the partition's "
	    "state change", dur_text(now - since, d, sizeof(d)),
	    p->pm->pl->instance != NULL ? "the metadata writer has not "
	    "answered" : "the log's storage has not answered");
	t->stalled = 1;
	return 1;
}

static void part_trouble_io(const struct ppart *p, int64_t now,
    struct ptrouble *t);

/* What keeps p from being current now, if anything (t->side 0: nothing). */
static void part_trouble(const struct ppart *p, int64_t now,
    struct ptrouble *t)
{
	int st;

	memset(t, 0, sizeof(*t));
	if (p->dead || p->mp == NULL || !p->owned)
		return;
	st = p->mp->state;
	if (st != MPART_PREPARING && st != MPART_MIRRORING) {
		part_trouble_io(p, now, t);
		return;
	}
	if (lease_trouble(p, now, t))
		return;
	part_trouble_io(p, now, t);
	if (t->side == 0)
		(void)write_trouble(p, now, t);
}

/* The source's and the destination's part of part_trouble(). */
static void part_trouble_io(const struct ppart *p, int64_t now,
    struct ptrouble *t)
{
	int st;

	st = p->mp->state;
	if (st == MPART_PAUSED) {
		if (source_trouble(p, now, t) == 0)
			return;
	} else if (st != MPART_PREPARING && st != MPART_MIRRORING) {
		return;
	} else if (p->step == PS_RUN || p->step == PS_OOR || p->step == PS_EPOCH) {
		if (source_trouble(p, now, t) == 0 &&
		    ((p->ninflight == 0 && TAILQ_EMPTY(&p->q)) ||
		    dest_trouble(p, t) == 0))
			return;
	} else if (p->step == PS_SYNC || p->step == PS_PROVE) {
		if (dest_trouble(p, t) == 0)
			return;
	} else {
		return;
	}
	if (t->since <= 0)
		t->since = now;
	/* A silence was measured against the bound already. */
	t->stalled = now - t->since >= PH_GRACE_MS;
}

/* ---- what is shown ------------------------------------------------------------ */

int64_t ph_lag_ms(const struct ppart *p, int64_t now, int stalled)
{
	int64_t bound = ph_bound_ms(p->pm), v = -1;

	/* Caught up as of an answer younger than the bound, and nothing in
	 * the way since: current. */
	if (p->live.lag == 0 && p->caught_ms > 0 && now - p->caught_ms <= bound &&
	    !stalled)
		return 0;
	if (p->caught_ms > 0)
		v = MAX(now - p->caught_ms, 0);
	if (p->live.lag != 0 && p->live.last_batch_timestamp_ms >= 0) {
		int64_t w = MAX(now - p->live.last_batch_timestamp_ms, 0);

		v = v < 0 ? w : MIN(v, w);
	}
	return v;
}

int pipeline_partition_status(struct pipeline *pl, const struct mpart *mp,
    struct pipeline_status *out)
{
	struct ppart *p = pl_part_of(pl, mp);
	int64_t now = clock_wall_ms();
	struct ptrouble t;
	char src[200], since[40], d[40];

	memset(out, 0, sizeof(*out));
	out->source_offset_age_ms = out->lag_ms = out->caught_up_ms = -1;
	out->stalled_since_ms = -1;
	if (p == NULL || p->dead || !p->owned)
		return -1;
	if (p->live.source_high_watermark >= 0 && p->src.ok_ms > 0)
		out->source_offset_age_ms = MAX(now - p->src.ok_ms, 0);
	out->stale = out->source_offset_age_ms < 0 ||
	    out->source_offset_age_ms > ph_bound_ms(p->pm);
	if (p->caught_ms > 0)
		out->caught_up_ms = p->caught_ms;
	part_trouble(p, now, &t);
	out->lag_ms = ph_lag_ms(p, now, t.side != 0);
	if (t.side == 0 || !t.stalled)
		return 0;
	out->stalled = 1;
	out->stalled_since_ms = t.since;
	wall_text(t.since, since, sizeof(since));
	dur_text(now - t.since, d, sizeof(d));
	if (t.side == 1)
		snprintf(out->reason, sizeof(out->reason), "cannot read the source "
		    "(%s) since %s (for %s): %s", source_name(p->pm, src,
		    sizeof(src)), since, d, t.why);
	else
		snprintf(out->reason, sizeof(out->reason), "cannot write the "
		    "destination (%s) since %s (for %s): %s",
		    pl->dst != NULL ? pl->dst->kcfg.bootstrap : "", since, d, t.why);
	return 0;
}

/* ---- per mirror ----------------------------------------------------------------- */

/* Counts pm's partitions copied here and the worst of them. */
static void mirror_walk(const struct pmirror *pm, int64_t now,
    struct pipeline_mirror_health *h, struct ptrouble *first)
{
	int64_t bound = ph_bound_ms(pm);

	memset(h, 0, sizeof(*h));
	h->max_lag = h->max_lag_ms = -1;
	h->source_up = 1;
	first->side = 0;
	for (size_t i = 0; i < pm->nparts; i++) {
		const struct ppart *p = pm->parts[i];
		struct ptrouble t;
		int st;

		if (p->dead || p->mp == NULL || !p->owned)
			continue;
		st = p->mp->state;
		h->partitions++;
		if (st == MPART_FAILED)
			h->failed++;
		else if (st == MPART_PAUSED || st == MPART_PAUSING)
			h->paused++;
		else if (st == MPART_STOPPED || st == MPART_STOPPING)
			h->stopped++;
		if (st == MPART_STOPPED)
			continue;
		part_trouble(p, now, &t);
		if (st == MPART_PREPARING || st == MPART_MIRRORING ||
		    st == MPART_PAUSED) {
			int64_t lm = ph_lag_ms(p, now, t.side != 0);

			h->max_lag = MAX(h->max_lag, p->live.lag);
			h->max_lag_ms = MAX(h->max_lag_ms, lm);
			if (lm < 0 && st != MPART_PAUSED)
				h->lag_unknown++;
		}
		if (t.side == 0 || !t.stalled)
			continue;
		h->stalled++;
		if (t.side == 1)
			h->source_up = 0;
		if (first->side == 0 || (t.side == 1 && first->side != 1))
			*first = t;
	}
	if (pm->src == NULL) {
		h->source_up = 0;
		if (first->side != 1) {
			first->side = 1;
			first->cause = PH_CONFIG;
			first->since = pm->unusable_since ? pm->unusable_since :
			    pm->born_ms;
			snprintf(first->why, sizeof(first->why), "%s",
			    pm->unusable[0] ? pm->unusable :
			    "the mirror's source client is not ready");
		}
	} else if (pm->src->md.fail_since != 0 &&
	    now - pm->src->md.fail_since > bound) {
		h->source_up = 0;
		if (first->side != 1)
			trouble_from(first, 1, &pm->src->md);
	}
}

int pipeline_mirror_health(struct pipeline *pl, const char *mirror,
    struct pipeline_mirror_health *out)
{
	int64_t now = clock_wall_ms();
	struct ptrouble t;
	char src[200], since[40], d[40];

	for (size_t i = 0; i < pl->nmirrors; i++) {
		const struct pmirror *pm = pl->mirrors[i];

		if (pm->dead || strcmp(pm->name, mirror) != 0)
			continue;
		mirror_walk(pm, now, out, &t);
		out->reason[0] = '\0';
		if (t.side != 0) {
			wall_text(t.since, since, sizeof(since));
			dur_text(now - t.since, d, sizeof(d));
			snprintf(out->reason, sizeof(out->reason), "cannot %s (%s) "
			    "since %s (for %s): %s", t.side == 1 ?
			    "read the source" : "write the destination",
			    t.side == 1 ? source_name(pm, src, sizeof(src)) :
			    pl->dst != NULL ? pl->dst->kcfg.bootstrap : "", since, d,
			    t.why);
		}
		if (pm->src != NULL) {
			out->metadata_age_ms = pm->src->md.ok_ms > 0 ?
			    now - pm->src->md.ok_ms : now - pm->born_ms;
			out->fetch_age_ms = -1;
			for (size_t b = 0; b < pm->src->nbrokers; b++)
				if (pm->src->brokers[b]->health.ok_ms > 0)
					out->fetch_age_ms = out->fetch_age_ms < 0 ?
					    now - pm->src->brokers[b]->health.ok_ms :
					    MIN(out->fetch_age_ms, now -
					    pm->src->brokers[b]->health.ok_ms);
		} else {
			out->metadata_age_ms = now - pm->born_ms;
			out->fetch_age_ms = -1;
		}
		if (out->fetch_age_ms < 0)
			out->fetch_age_ms = now - pm->born_ms;
		return 0;
	}
	return -1;
}

int pipeline_sources_ready(struct pipeline *pl, char *why, size_t whylen)
{
	struct pipeline_mirror_health h;
	size_t down = 0;

	why[0] = '\0';
	for (size_t i = 0; i < pl->nmirrors; i++) {
		if (pl->mirrors[i]->dead || pl->mirrors[i]->m == NULL ||
		    pipeline_mirror_health(pl, pl->mirrors[i]->name, &h) != 0 ||
		    h.source_up)
			continue;
		if (down++ == 0)
			snprintf(why, whylen, "mirror %s: %s", pl->mirrors[i]->name,
			    h.reason);
	}
	if (down > 1) {
		size_t n = strlen(why);

		snprintf(why + n, whylen - n, " (and %zu more mirror(s))", down - 1);
	}
	return down == 0;
}

/* ---- logs and metrics ------------------------------------------------------------ */

void ph_tick(struct pipeline *pl, int64_t mono)
{
	int64_t now = clock_wall_ms();

	/* A walk of every partition: once a second is enough for a log. */
	if (mono - pl->health_ticked_ms < 1000)
		return;
	pl->health_ticked_ms = mono;
	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];
		struct pipeline_mirror_health h;
		struct ptrouble t;
		char d[40];

		if (pm->dead || pm->m == NULL)
			continue;
		mirror_walk(pm, now, &h, &t);
		if (!h.source_up && t.side == 1) {
			if (pm->down_since == 0) {
				pm->down_since = t.since > 0 ? t.since : now;
				pm->down_logged = now;
				pm->down_cause = t.cause;
				log_warnx("mirror %s: cannot read the source (%s): %s; "
				    "%zu partition(s) stalled", pm->name,
				    ph_cause_name(t.cause), t.why, h.stalled);
			} else if (now - pm->down_logged >= PH_REMIND_MS ||
			    t.cause != pm->down_cause) {
				pm->down_logged = now;
				pm->down_cause = t.cause;
				log_warnx("mirror %s: still cannot read the source after "
				    "%s (%s): %s; %zu partition(s) stalled", pm->name,
				    dur_text(now - pm->down_since, d, sizeof(d)),
				    ph_cause_name(t.cause), t.why, h.stalled);
			}
		} else if (h.source_up && pm->down_since != 0) {
			log_info("mirror %s: reading the source again after %s",
			    pm->name, dur_text(now - pm->down_since, d, sizeof(d)));
			pm->down_since = 0;
		}
	}
}

void ph_collect_mirror(struct pipeline *pl, const struct pmirror *pm)
{
	struct metrics_std *ms = pl->ms;
	struct pipeline_mirror_health h;
	const char *req;

	if (ms == NULL || pm->dead || pm->m == NULL ||
	    pipeline_mirror_health(pl, pm->name, &h) != 0)
		return;
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, MIRROR_SOURCE_UP), pm->name),
	    h.source_up ? 1 : 0);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, MIRROR_STALLED_PARTITIONS),
	    pm->name), (double)h.stalled);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, MIRROR_MAX_LAG_SECONDS),
	    pm->name), h.max_lag_ms >= 0 ? (double)h.max_lag_ms / 1000.0 : 0);
	req = "Metadata";
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, MIRROR_SOURCE_SINCE_SUCCESS),
	    pm->name, req), (double)MAX(h.metadata_age_ms, 0) / 1000.0);
	req = "Fetch";
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, MIRROR_SOURCE_SINCE_SUCCESS),
	    pm->name, req), (double)MAX(h.fetch_age_ms, 0) / 1000.0);
	/* Every cause from the start, at 0 until it happens. */
	for (int c = PH_REFUSED; c < PH_NCAUSES; c++)
		metrics_counter_add(METRICS_SERIES(MSTD(ms, MIRROR_SOURCE_ERRORS),
		    pm->name, ph_cause_name(c)), 0);
}

void ph_collect_partition(struct pipeline *pl, const struct ppart *p)
{
	struct metrics_std *ms = pl->ms;
	int64_t now = clock_wall_ms(), lm;
	struct ptrouble t;
	int st;

	if (ms == NULL || p->dead || p->mp == NULL || !p->owned)
		return;
	st = p->mp->state;
	if (st != MPART_PREPARING && st != MPART_MIRRORING && st != MPART_PAUSED &&
	    st != MPART_PAUSING)
		return;
	part_trouble(p, now, &t);
	lm = ph_lag_ms(p, now, t.side != 0);
	if (lm >= 0)
		metrics_gauge_set(metrics_std_partition(ms,
		    MSTD_PARTITION_LAG_SECONDS, p->pm->name, p->topic, p->index),
		    (double)lm / 1000.0);
	if (p->src.ok_ms > 0)
		metrics_gauge_set(metrics_std_partition(ms,
		    MSTD_PARTITION_SOURCE_OFFSET_AGE, p->pm->name, p->topic,
		    p->index), (double)MAX(now - p->src.ok_ms, 0) / 1000.0);
	metrics_gauge_set(metrics_std_partition(ms, MSTD_PARTITION_STALLED_SECONDS,
	    p->pm->name, p->topic, p->index), t.side != 0 && t.stalled ?
	    (double)MAX(now - t.since, 0) / 1000.0 : 0);
}
