/*
 * pipeline.c: the data plane's partition machine, the mstate hook, and the
 * public API (see pipeline.h for the design).  Fetch and Produce are in
 * pipeline/copy.c, clusters and metadata in pipeline/pcluster.c.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "compat.h"
#include "daemonconf.h"
#include "groupsync.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "massert.h"
#include "metrics.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "mrec.h"
#include "pipe_int.h"
#include "secrets.h"
#include "clientfiles.h"

#define TICK_MS 100
/*
 * How long a partition waits before reading the destination end when a
 * Produce of ours may still be in a broker's hands: at start-up (a previous
 * process may have been killed with one in flight) and after an uncertain
 * outcome (a timed-out connection's request can still be applied).  The
 * kept producer identity and offset-derived sequences make a real broker
 * reject a late duplicate anyway; this covers brokers that do not check
 * sequences (the librdkafka mock).
 */
#define SETTLE_MS 1000

int64_t pl_backoff_ms(const struct pipeline *pl)
{
	return pl->cfg->pipeline_retry_backoff_ms > 0 ? pl->cfg->pipeline_retry_backoff_ms : 1;
}

/*
 * Every answer kicks the loop, and a kick walks every partition (part_step,
 * the Fetch and Produce rounds): with P partitions and answers arriving
 * for them one by one that is O(P^2).  So once the partitions are many,
 * sweeps are at least sweep_gap_ms apart (1 ms per SWEEP_PARTS_PER_MS
 * partitions, 0 below that: small pipelines run as before); the kicks in
 * between are folded into one timed sweep.
 */
#define SWEEP_PARTS_PER_MS 1000

void pl_kick(struct pipeline *pl)
{
	int64_t wait;

	if (pl->kick_ev == NULL)
		return;
	wait = pl->sweep_gap_ms > 0 ?
	    pl->last_sweep_ms + pl->sweep_gap_ms - clock_mono_ms() : 0;
	if (wait <= 0) {
		event_active(pl->kick_ev, 0, 0);
	} else if (!event_pending(pl->kick_ev, EV_TIMEOUT, NULL)) {
		struct timeval tv = { (time_t)(wait / 1000),
		    (suseconds_t)(wait % 1000) * 1000 };

		if (event_add(pl->kick_ev, &tv) != 0)
			event_active(pl->kick_ev, 0, 0);
	}
}

void pl_free_batches(struct pbatchq *q)
{
	struct pbatch *b;

	while ((b = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, b, link);
		pbatch_free(b);
	}
}

size_t pl_unsent_bytes(const struct pipeline *pl)
{
	size_t n = pl->dst == NULL || pl->dst->kc == NULL ? 0 :
	    kcluster_unsent_bytes(pl->dst->kc);

	/* Lent batch bytes are counted where they lie (qbytes, pin_extra),
	 * not twice.  A loan partly written counts whole until released, so
	 * this may count up to the written part of it less of the copied
	 * request headers. */
	return n > pl->lent ? n - pl->lent : 0;
}

size_t pl_held_now(const struct pipeline *pl)
{
	return pl->qbytes + pl->ubytes + pl->fetch_reserved + pl->dreads +
	    pl->pin_extra +
	    pl_unsent_bytes(pl);
}

size_t pl_held_note(struct pipeline *pl)
{
	size_t n = pl_held_now(pl);

	if ((int64_t)n > pl->held_peak)
		pl->held_peak = (int64_t)n;
	return n;
}

int pl_dread_room(struct pipeline *pl, size_t want)
{
	if (pl->dread_flight == 0 || pl_held_now(pl) + want <=
	    (size_t)pl->cfg->pipeline_max_inflight_bytes_total)
		return 1;
	pl->dread_waiting = 1;
	return 0;
}

void pl_dread_set(struct pipeline *pl, size_t *held, size_t n)
{
	MR_ASSERT_MSG(pl->dreads >= *held, "%zu < %zu", pl->dreads, *held);
	pl->dreads = pl->dreads - *held + n;
	*held = n;
	(void)pl_held_note(pl);
}

void pl_dread_start(struct pipeline *pl, size_t *held, size_t want)
{
	MR_ASSERT(*held == 0);
	pl->dread_flight++;
	pl_dread_set(pl, held, want);
}

void pl_dread_grow(struct pipeline *pl, size_t *held, size_t n)
{
	if (n > *held)
		pl_dread_set(pl, held, n);
}

void pl_dread_done(struct pipeline *pl, size_t *held)
{
	MR_ASSERT(pl->dread_flight > 0);
	pl->dread_flight--;
	pl_dread_set(pl, held, 0);
	if (pl->dread_waiting) {
		pl->dread_waiting = 0;
		pl_kick(pl);
	}
}

void pl_discarded(struct ppart *p, size_t len)
{
	p->live.discarded_bytes += (int64_t)len;
	p->pm->pl->totals.discarded_bytes += (int64_t)len;
}

void pl_drop_queue(struct ppart *p)
{
	struct pbatch *b;
	struct pipeline *pl = p->pm->pl;

	while ((b = TAILQ_FIRST(&p->q)) != NULL) {
		MR_ASSERT_MSG(p->qbytes >= b->len && pl->qbytes >= p->qbytes,
		    "%zu, %zu, %zu", b->len, p->qbytes, pl->qbytes);
		TAILQ_REMOVE(&p->q, b, link);
		p->qbytes -= b->len;
		pl->qbytes -= b->len;
		pl_discarded(p, b->len);
		pbatch_free(b);
	}
	p->gen++;
	p->src_fetch = p->src_copied = -1;
	p->dst_tail = p->dst_next;
	/* An epoch whose record failed or is still in flight is written
	 * again before the next batch of it is sent (a no-op if it landed). */
	if (p->mp != NULL)
		p->last_epoch = p->mp->nepochs > 0 ?
		    p->mp->epochs[p->mp->nepochs - 1].epoch : -1;
}

/* Lag: source high watermark minus the source offset the destination end
 * stands for. */
void pl_update_lag(struct ppart *p)
{
	if (p->live.source_high_watermark < 0 || p->src_done < 0)
		return;
	p->live.lag = MAX(0, p->live.source_high_watermark - p->src_done);
	ph_note_copied(p);
}

static const char *part_name(const struct ppart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%" PRId32, p->pm->name, p->topic, p->index);
	return buf;
}

/* ---- the source's last stable offset ---------------------------------------- */

void pl_note_lso(struct ppart *p, int64_t lso, int64_t hwm)
{
	int64_t now = clock_mono_ms(), warn = p->pm->pl->cfg->pipeline_stuck_lso_warn_ms;
	int behind = lso >= 0 && hwm >= 0 && lso < hwm;
	char name[300];

	if (!behind || lso != p->live.last_stable_offset || p->lso_since == 0) {
		if (p->lso_warned)
			log_info("%s: the source's last stable offset moved on from %"
			    PRId64 " to %" PRId64 " after %" PRId64 " s",
			    part_name(p, name, sizeof(name)), p->live.last_stable_offset,
			    lso, (now - p->lso_since) / 1000);
		p->lso_since = behind ? now : 0;
		p->lso_warned = 0;
	}
	p->live.last_stable_offset = lso;
	if (behind && !p->lso_warned && warn > 0 && now - p->lso_since >= warn) {
		p->lso_warned = 1;
		log_warnx("%s: the source's last stable offset has stayed at %" PRId64
		    " for %" PRId64 " s while the high watermark is %" PRId64 ": a "
		    "transaction open on the source holds back read_committed "
		    "readers, mirrord included", part_name(p, name, sizeof(name)),
		    lso, (now - p->lso_since) / 1000, hwm);
	}
}

int64_t pl_lso_stuck_ms(const struct ppart *p, int64_t now)
{
	int64_t warn = p->pm->pl->cfg->pipeline_stuck_lso_warn_ms;

	if (warn <= 0 || p->lso_since == 0 || p->step != PS_RUN ||
	    !pl_part_wants_run(p) || now - p->lso_since < warn)
		return 0;
	return now - p->lso_since;
}

int pl_part_wants_run(const struct ppart *p)
{
	return p->mp != NULL && !p->dead && !p->pm->pl->draining && p->owned &&
	    (p->mp->state == MPART_PREPARING || p->mp->state == MPART_MIRRORING);
}

int pl_part_owned(const struct ppart *p)
{
	return p->mp != NULL && !p->dead &&
	    mpart_owned_by(p->mp, p->pm->pl->instance);
}

/* Full-jitter exponential backoff for FAILED retries. */
static int64_t retry_delay(const struct pmirror *pm, int attempt)
{
	int64_t base = pm->conf ? pm->conf->failed_retry_initial_backoff_ms : 1000;
	int64_t cap = pm->conf ? pm->conf->failed_retry_max_backoff_ms : 60000;
	int64_t d = base > 0 ? base : 1;

	for (int i = 1; i < attempt && d < cap; i++)
		d *= 2;
	d = MIN(d, cap);
	return d > 0 ? (int64_t)((uint64_t)random() % (uint64_t)(d + 1)) : 0;
}

static void part_vfail(struct ppart *p, int final, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

void pl_part_fail(struct ppart *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	part_vfail(p, 0, fmt, ap);
	va_end(ap);
}

void pl_part_fail_final(struct ppart *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	part_vfail(p, 1, fmt, ap);
	va_end(ap);
}

/* final: 0 retried up to mirror.failed.retry.max.attempts, 1 never, 2 for
 * as long as it takes (a denial: the cure is an ACL, not the operator). */
static void part_vfail(struct ppart *p, int final, const char *fmt, va_list ap)
{
	char why[1024], msg[512], name[300];
	int64_t max = p->pm->conf && final == 0 ? p->pm->conf->failed_retry_max_attempts : 0;
	int32_t attempt;
	size_t pre = strlen(PL_DENIED_PREFIX);

	if (final == 2)
		memcpy(why, PL_DENIED_PREFIX, pre);
	else
		pre = 0;
	vsnprintf(why + pre, sizeof(why) - pre, fmt, ap);
	pl_drop_queue(p);
	p->step = PS_IDLE;
	if (p->mp == NULL || p->dead)
		return;
	p->attempts++;
	attempt = (max > 0 && p->attempts <= max) ? p->attempts : -1;
	if (final == 2)
		attempt = MIN(p->attempts, INT32_MAX - 1);
	struct pl_state_req rq = { .to = MPART_FAILED, .why = why,
	    .retry = attempt };
	if (pl_part_state(p, &rq, msg, sizeof(msg)) < 0) {
		log_warnx("%s: cannot record the failure (%s): %s",
		    part_name(p, name, sizeof(name)), why, msg);
		p->not_before = clock_mono_ms() + 1000;
		return;
	}
	if (attempt > 0) {
		int64_t d = retry_delay(p->pm, attempt);

		p->retry_at = clock_mono_ms() + d;
		if (final == 2)
			log_info("%s: retry %d (for as long as the destination "
			    "refuses) in %" PRId64 " ms",
			    part_name(p, name, sizeof(name)), attempt, d);
		else
			log_info("%s: retry %d of %" PRId64 " in %" PRId64 " ms",
			    part_name(p, name, sizeof(name)), attempt, max, d);
	} else {
		p->retry_at = 0;
	}
}

void pl_part_fail_denied(struct ppart *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	part_vfail(p, 2, fmt, ap);
	va_end(ap);
}

void pl_part_resync(struct ppart *p, const char *why)
{
	char name[300];

	log_info("%s: re-reading the destination end (%s)",
	    part_name(p, name, sizeof(name)), why);
	pl_drop_queue(p);
	p->live.retries++;
	p->step = PS_SYNC;
	p->not_before = clock_mono_ms() + MAX(pl_backoff_ms(p->pm->pl), SETTLE_MS);
	pl_kick(p->pm->pl);
}

/* A state change asked for while another was in flight (pl_part_state()). */
struct pl_snext {
	struct pl_snext *next;
	struct pl_state_req rq;      /* why, fo and note point into this */
	char why[1024];
	struct mfailover fo;
	char note[MREC_MAX_NOTE + 1];
	uint32_t gen, og;
};

static void snext_drop(struct ppart *p)
{
	struct pl_snext *q;

	while ((q = p->snext_head) != NULL) {
		p->snext_head = q->next;
		free(q);
	}
	p->snext_tail = NULL;
}

static void part_free(struct ppart *p)
{
	struct pbatch *b;

	while ((b = TAILQ_FIRST(&p->q)) != NULL) {
		TAILQ_REMOVE(&p->q, b, link);
		pbatch_free(b);
	}
	pl_free_batches(&p->inflight);
	pl_free_batches(&p->failed);
	pl_free_batches(&p->unsure);
	snext_drop(p);
	free(p->pv_topic);
	free(p->pv_buf);
	free(p->pv_note);
	free(p->fb_mirror);
	free(p->topic);
	free(p);
}

void pl_part_unref(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;

	MR_ASSERT_MSG(p->refs > 0, "%d", p->refs);
	/* Dead but not buried yet (its mirror was deleted a moment ago,
	 * pm->parts still holds it): pm_free() buries it. */
	if (--p->refs > 0 || !p->dead || !p->buried)
		return;
	for (size_t i = 0; i < pl->ngrave; i++)
		if (pl->graveyard[i] == p) {
			pl->graveyard[i] = pl->graveyard[--pl->ngrave];
			break;
		}
	part_free(p);
}

static int swrite_start(struct ppart *p, const struct pl_state_req *rq,
    uint32_t gen, uint32_t og, int *code, char *msg, size_t msglen);

/* p's state write to `to` failed with code: p stays in its old state (the
 * model shows only durable states) and part_step() tries again in a
 * second.  An operator's command that moved it meanwhile is not a fault
 * (mstate_excl_begin()). */
static void swrite_failed(struct ppart *p, int to, int code, const char *msg)
{
	char name[300];

	if (code == KERR_INVALID_CLUSTER_MIRROR_STATES)
		log_info("%s: the move to %s is dropped, it is %s now: %s",
		    part_name(p, name, sizeof(name)), mpart_state_name(to),
		    mpart_state_name(p->mp->state), msg);
	else
		log_warnx("%s: cannot record the move to %s, staying %s: %s",
		    part_name(p, name, sizeof(name)), mpart_state_name(to),
		    mpart_state_name(p->mp->state), msg);
	p->step = PS_IDLE;
	p->not_before = clock_mono_ms() + 1000;
	if (to == MPART_PREPARING)
		p->retry_at = p->not_before;  /* FAILED: retry */
}

/* The state changes queued behind the one that completed, in order, until
 * one is in flight.  One that completes at once (nothing to write) runs
 * its continuation when it is the last. */
static void snext_run(struct ppart *p)
{
	struct pl_snext *q;
	char msg[512];
	int r, code;

	while ((q = p->snext_head) != NULL) {
		if ((p->snext_head = q->next) == NULL)
			p->snext_tail = NULL;
		if (p->dead || p->mp == NULL || p->own_gen != q->og) {
			free(q);   /* p lost or gone: so are its changes */
			continue;
		}
		r = swrite_start(p, &q->rq, q->gen, q->og, &code, msg,
		    sizeof(msg));
		if (r < 0)
			swrite_failed(p, q->rq.to, code, msg);
		else if (r == 0 && q->rq.then != NULL && p->snext_head == NULL &&
		    p->gen == q->gen && (int)p->mp->state == q->rq.to)
			q->rq.then(p);
		free(q);
		if (r > 0)
			return;
	}
}

/* The completion of p's asynchronous state write (pl_part_state()). */
static void swrite_done(void *arg, int code, const char *msg)
{
	struct ppart *p = arg;
	struct pipeline *pl = p->pm->pl;
	void (*then)(struct ppart *) = p->swrite_then;

	MR_ASSERT(p->swrite);   /* one completion per write */
	p->swrite = 0;
	p->swrite_then = NULL;
	if (!p->dead && p->mp != NULL && p->own_gen == p->swrite_og) {
		if (code != 0)
			swrite_failed(p, p->swrite_to, code, msg);
		else if (then != NULL && p->snext_head == NULL &&
		    p->gen == p->swrite_gen && (int)p->mp->state == p->swrite_to)
			then(p);   /* not when a later change is queued */
		snext_run(p);
		pl_kick(pl);
	} else {
		snext_drop(p);
	}
	pl_part_unref(p);
}

int pl_part_heading(const struct ppart *p, void (**then)(struct ppart *p))
{
	if (p->snext_tail != NULL) {
		*then = p->snext_tail->rq.then;
		return p->snext_tail->rq.to;
	}
	*then = p->swrite_then;
	return p->swrite ? p->swrite_to : -1;
}

/* Queued behind the state write in flight: copied (why, fo), started when
 * that one completes (snext_run()). */
static void snext_add(struct ppart *p, const struct pl_state_req *rq)
{
	struct pl_snext *q = calloc(1, sizeof(*q));
	char name[300];

	if (q == NULL)
		fatal("pipeline: out of memory");
	q->rq = *rq;
	if (rq->why != NULL) {
		snprintf(q->why, sizeof(q->why), "%s", rq->why);
		q->rq.why = q->why;
	}
	if (rq->fo != NULL) {
		q->fo = *rq->fo;
		q->rq.fo = &q->fo;
	}
	if (rq->note != NULL) {
		snprintf(q->note, sizeof(q->note), "%s", rq->note);
		q->rq.note = q->note;
	}
	q->gen = p->gen;
	q->og = p->own_gen;
	if (p->snext_tail != NULL)
		p->snext_tail->next = q;
	else
		p->snext_head = q;
	p->snext_tail = q;
	log_debug("%s: the move to %s waits for the move to %s in flight",
	    part_name(p, name, sizeof(name)), mpart_state_name(rq->to),
	    mpart_state_name(p->swrite_to));
}

int pl_part_state(struct ppart *p, const struct pl_state_req *rq, char *msg,
    size_t msglen)
{
	struct mstate *st = p->pm->pl->st;
	struct mpart *mp = p->mp;
	int r;

	if (mp == NULL || p->dead) {
		snprintf(msg, msglen, "the partition is no longer mirrored");
		return -1;
	}
	if (p->swrite) {
		/* One state write of p in flight at a time (each validated
		 * against the model, which shows only completed writes). */
		snext_add(p, rq);
		return 1;
	}
	if (!mstate_async_ready(st)) {
		/* Synchronous (no event base, or in a batch). */
		if (rq->last)
			r = mpart_stopped_report(st, mp, rq->last_offset,
			    rq->last_epoch, rq->fo, rq->note, rq->why, msg,
			    msglen);
		else if (rq->to == MPART_FAILED)
			r = mpart_fail(st, mp, rq->why, rq->retry, msg, msglen);
		else
			r = mpart_set_state(st, mp, rq->to, rq->why, msg, msglen);
		return r != 0 ? -1 : 0;
	}
	return swrite_start(p, rq, p->gen, p->own_gen, &r, msg, msglen);
}

/* Starts p's state write, asked for under gens gen and og: -1 refused
 * (*code, msg), 0 done (nothing to write), 1 in flight (swrite_done()
 * follows). */
static int swrite_start(struct ppart *p, const struct pl_state_req *rq,
    uint32_t gen, uint32_t og, int *code, char *msg, size_t msglen)
{
	struct mstate *st = p->pm->pl->st;
	struct mpart *mp = p->mp;
	int started = 0, r;

	/* One state write of p in flight (pl_part_state() queues the
	 * others behind it): each is validated against the state the one
	 * before it left. */
	MR_ASSERT(!p->swrite);
	/* The ref: a follower's write may apply other instances' records
	 * first and lose p or bury it; the callback still finds it. */
	p->swrite = 1;
	p->swrite_wall = clock_wall_ms();
	p->swrite_gen = gen;
	p->swrite_og = og;
	p->swrite_to = rq->to;
	p->swrite_then = rq->then;
	p->refs++;
	if (rq->last)
		r = mpart_stopped_report_async(st, mp, rq->last_offset,
		    rq->last_epoch, rq->fo, rq->note, rq->why, swrite_done, p,
		    &started, msg, msglen);
	else if (rq->to == MPART_FAILED)
		r = mpart_fail_async(st, mp, rq->why, rq->retry, swrite_done, p,
		    &started, msg, msglen);
	else
		r = mpart_set_state_async(st, mp, rq->to, rq->why, swrite_done, p,
		    &started, msg, msglen);
	if (!started) {
		p->swrite = 0;
		p->swrite_then = NULL;
		p->refs--;
	}
	*code = r;
	if (r != 0)
		return -1;
	return started ? 1 : 0;
}

/* Takes p out of service; freed now or when its last request answers. */
static void part_bury(struct pipeline *pl, struct ppart *p)
{
	struct ppart **g;

	p->dead = 1;
	p->buried = 1;
	p->mp = NULL;
	pl->pmap_ok = 0; /* p may be freed: no map entry may point at it */
	MR_ASSERT(pl->qbytes >= p->qbytes && pl->ubytes >= p->ubytes &&
	    pl->totals.inflight_batches >= p->ninflight);
	pl->qbytes -= p->qbytes;
	p->qbytes = 0;
	pl->ubytes -= p->ubytes;
	p->ubytes = 0;
	free(p->pv_buf);
	p->pv_buf = NULL;
	pl_dread_set(pl, &p->pv_held, 0);
	pl->totals.inflight_batches -= p->ninflight;
	if (p->refs == 0) {
		part_free(p);
		return;
	}
	g = realloc(pl->graveyard, (pl->ngrave + 1) * sizeof(*g));
	if (g == NULL) {
		log_errorx("out of memory: leaking a partition record");
		return;
	}
	pl->graveyard = g;
	pl->graveyard[pl->ngrave++] = p;
}

/* ---- mpart -> ppart ---------------------------------------------------------- */

static size_t pmap_slot(const struct pipeline *pl, const struct mpart *mp)
{
	uint64_t h = (uint64_t)(uintptr_t)mp * UINT64_C(0x9e3779b97f4a7c15);

	return (size_t)(h >> 17) & (pl->pmap_cap - 1);
}

static void pmap_put(struct pipeline *pl, struct ppart *p)
{
	size_t i = pmap_slot(pl, p->mp);

	while (pl->pmap[i] != NULL)
		i = (i + 1) & (pl->pmap_cap - 1);
	pl->pmap[i] = p;
	pl->pmap_n++;
}

/* Every live partition of every mirror; at most half full. */
static int pmap_build(struct pipeline *pl)
{
	size_t n = 0, cap = 64;

	for (size_t i = 0; i < pl->nmirrors; i++)
		n += pl->mirrors[i]->nparts;
	while (cap < 2 * n + 2)
		cap *= 2;
	if (cap != pl->pmap_cap) {
		struct ppart **m = calloc(cap, sizeof(*m));

		if (m == NULL)
			return -1;
		free(pl->pmap);
		pl->pmap = m;
		pl->pmap_cap = cap;
	} else {
		memset(pl->pmap, 0, cap * sizeof(*pl->pmap));
	}
	pl->pmap_n = 0;
	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++)
			if (pl->mirrors[i]->parts[j]->mp != NULL)
				pmap_put(pl, pl->mirrors[i]->parts[j]);
	pl->pmap_ok = 1;
	return 0;
}

/* A new partition: into the map while it stays at most half full. */
static void pmap_add(struct pipeline *pl, struct ppart *p)
{
	if (!pl->pmap_ok)
		return;
	if (2 * (pl->pmap_n + 1) + 2 > pl->pmap_cap)
		pl->pmap_ok = 0; /* grows at the next look-up */
	else
		pmap_put(pl, p);
}

struct ppart *pl_part_of(struct pipeline *pl, const struct mpart *mp)
{
	if (mp == NULL || (!pl->pmap_ok && pmap_build(pl) != 0)) {
		/* Out of memory: the slow way. */
		for (size_t i = 0; mp != NULL && i < pl->nmirrors; i++)
			for (size_t j = 0; j < pl->mirrors[i]->nparts; j++)
				if (pl->mirrors[i]->parts[j]->mp == mp)
					return pl->mirrors[i]->parts[j];
		return NULL;
	}
	for (size_t i = pmap_slot(pl, mp); pl->pmap[i] != NULL;
	    i = (i + 1) & (pl->pmap_cap - 1))
		if (pl->pmap[i]->mp == mp)
			return pl->pmap[i];
	return NULL;
}

/* ---- the model: mirrors and partitions ------------------------------------ */

static struct pmirror *pm_find(struct pipeline *pl, const struct mirror *m)
{
	for (size_t i = 0; i < pl->nmirrors; i++)
		if (pl->mirrors[i]->m == m)
			return pl->mirrors[i];
	return NULL;
}

static void pm_free(struct pmirror *pm)
{
	if (pm->pl->ms != NULL && pm->dead)
		metrics_std_mirror_remove(pm->pl->ms, pm->name);
	/* Bury the partitions before closing the source: closing fails their
	 * in-flight requests, whose callbacks free buried partitions. */
	ptconf_forget(pm);
	pacl_forget(pm);
	pmarks_forget(pm);
	for (size_t i = 0; i < pm->nparts; i++)
		part_bury(pm->pl, pm->parts[i]);
	clientfiles_cancel(pm->files);
	secrets_resolve_cancel(pm->resolving);
	pcluster_free(pm->src);
	ptopic_forget_all(pm);
	pident_forget(pm);
	free(pm->parts);
	mirrorconf_free(pm->conf);
	free(pm->name);
	free(pm);
}

/* The source cluster from its final client properties. */
static void pm_make_src(struct pmirror *pm, const char *const *cn,
    const char *const *cv, size_t cnum)
{
	char msg[512], label[96];

	snprintf(label, sizeof(label), "source of mirror %s", pm->name);
	pm->src = pcluster_new(pm->pl, label, 1, pm->conf->bootstrap_servers, cn,
	    cv, cnum, msg, sizeof(msg));
	if (pm->src == NULL) {
		log_warnx("mirror %s: %s: not mirroring it", pm->name, msg);
		snprintf(pm->unusable, sizeof(pm->unusable), "the mirror's "
		    "source cannot be used: %s", msg);
	}
	else {
		pcluster_set_refresh_ms(pm->src,
		    pm->conf->metadata_refresh_interval_ms);
		/* After a dropped client: a partition waiting for a Metadata
		 * answer newer than the old one's still waits for one. */
		pm->src->md_gen = pm->src_gen;
		pm->src->md_epochs = pm->src_epochs;
	}
}

/*
 * Closes the source client for one made from new configs.  Its requests
 * fail now, as on a closed connection, while pm->src still names it
 * (dying): Fetches in flight leave their partitions to be fetched again
 * from src_fetch, the other steps are retried.  No partition's position,
 * queue or batches in flight to the destination change; the leaders
 * cached from it are forgotten.
 */
static void pm_drop_src(struct pmirror *pm)
{
	if (pm->src == NULL)
		return;
	pm->src_gen = pm->src->md_gen;
	pm->src_epochs = pm->src->md_epochs;
	pcluster_free(pm->src);
	pm->src = NULL;
	for (size_t i = 0; i < pm->nparts; i++) {
		pm->parts[i]->src_leader = NULL;
		pm->parts[i]->src_md_gen = 0;
	}
}

/* 1 if a and b make the same source client (bootstrap.servers and the
 * client properties, in order): then the running client is kept. */
static int same_client(const struct mirrorconf *a, const struct mirrorconf *b)
{
	if (strcmp(a->bootstrap_servers, b->bootstrap_servers) != 0 ||
	    a->client_n != b->client_n)
		return 0;
	for (size_t i = 0; i < a->client_n; i++)
		if (strcmp(a->client_names[i], b->client_names[i]) != 0 ||
		    strcmp(a->client_values[i], b->client_values[i]) != 0)
			return 0;
	return 1;
}

#define FILES_RETRY_MIN_MS 5000
#define FILES_RETRY_MAX_MS 300000
/* A read that takes this long (a hung file system) fails the partitions
 * with that reason; the read goes on, and a late success still counts. */
#define FILES_SLOW_MS 30000

static void pm_files_cb(void *arg, const char *err, const char *const *names,
    const char *const *values, size_t n)
{
	struct pmirror *pm = arg;

	pm->files = NULL;
	if (err != NULL) {
		char was[sizeof(pm->unusable)];

		/* Logged when the reason changes; retried with backoff. */
		memcpy(was, pm->unusable, sizeof(was));
		snprintf(pm->unusable, sizeof(pm->unusable), "the mirror's "
		    "source cannot be used: %s", err);
		if (!pm->files_failed || strcmp(was, pm->unusable) != 0)
			log_warnx("mirror %s: %s: not mirroring it", pm->name, err);
		pm->files_failed = 1;
		pm->files_backoff_ms = pm->files_backoff_ms == 0 ?
		    FILES_RETRY_MIN_MS : MIN(pm->files_backoff_ms * 2,
		    FILES_RETRY_MAX_MS);
		pm->files_retry_at = clock_mono_ms() + pm->files_backoff_ms;
	} else {
		if (pm->files_failed)
			log_info("mirror %s: its files can be read again", pm->name);
		pm->files_failed = 0;
		pm->files_backoff_ms = 0;
		pm_make_src(pm, names, values, n);
	}
	pl_kick(pm->pl);
}

/* Reads the files the source's settings name on the fileload worker; the
 * source is made when they are in (pm_files_cb). */
static void pm_load_files(struct pmirror *pm)
{
	char msg[512];

	pm->files_started_ms = clock_mono_ms();
	pm->files = clientfiles_start(pm->pl->base, pm->conf,
	    (const char *const *)pm->pl->cfg->mirrors_allowed_file_dirs.v,
	    pm_files_cb, pm, msg, sizeof(msg));
	if (pm->files == NULL) {
		log_warnx("mirror %s: cannot read its files: %s", pm->name, msg);
		snprintf(pm->unusable, sizeof(pm->unusable), "the mirror's "
		    "source cannot be used: %s", msg);
		pm->files_failed = 1;
		pm->files_backoff_ms = FILES_RETRY_MAX_MS;
		pm->files_retry_at = clock_mono_ms() + pm->files_backoff_ms;
	}
}

/*
 * With the mirror's configs opened and resolved (values, or err): parses
 * them, then reads the files they name or makes the source.  A reference
 * that cannot be resolved (a file or key gone) is tried again with the
 * files' backoff: the partitions stay FAILED with the reason until it
 * resolves.  Frees values.
 */
static void pm_configured(struct pmirror *pm, char **values, const char *err)
{
	const struct mirror *m = pm->m;
	const char *const *cn, *const *cv;
	const char **names;
	size_t cnum;
	int16_t code;
	char msg[512];
	struct mirrorconf *old = pm->conf;

	/* Replaced configs (pm_reconfigure()) are decided on below, with
	 * the old ones still at hand. */
	pm->conf = NULL;
	if ((names = calloc(m->nconfigs + 1, sizeof(*names))) == NULL) {
		snprintf(pm->unusable, sizeof(pm->unusable), "out of memory");
		secrets_values_free(values, m->nconfigs);
		pm_drop_src(pm);
		mirrorconf_free(old);
		return;
	}
	for (size_t i = 0; i < m->nconfigs; i++)
		names[i] = m->configs[i].name;
	if (err != NULL) {
		/* The mirror.* options (the FAILED retry policy) hold no
		 * reference: parse them from the stored values, so that the
		 * partitions are retried while the reference is fixed. */
		const char **stored = calloc(m->nconfigs + 1, sizeof(*stored));

		for (size_t i = 0; stored != NULL && i < m->nconfigs; i++)
			stored[i] = m->configs[i].value;
		if (stored == NULL || mirrorconf_parse(names, stored, m->nconfigs,
		    &pm->conf, &code, msg, sizeof(msg)) != 0)
			pm->conf = NULL;
		free(stored);
		if (!pm->resolve_failed)
			log_warnx("mirror %s: its configs cannot be resolved (%s): "
			    "not mirroring it", m->name, err);
		snprintf(pm->unusable, sizeof(pm->unusable), "the mirror's configs "
		    "cannot be resolved: %s", err);
		pm->resolve_failed = 1;
		pm->files_backoff_ms = pm->files_backoff_ms == 0 ?
		    FILES_RETRY_MIN_MS : MIN(pm->files_backoff_ms * 2,
		    FILES_RETRY_MAX_MS);
		pm->files_retry_at = clock_mono_ms() + pm->files_backoff_ms;
		free(names);
		pm_drop_src(pm);
		mirrorconf_free(old);
		return;
	}
	if (pm->resolve_failed) {
		log_info("mirror %s: its configs resolve again", m->name);
		pm->resolve_failed = 0;
		pm->files_backoff_ms = 0;
	}
	if (mirrorconf_parse(names, (const char *const *)values, m->nconfigs,
	    &pm->conf, &code, msg, sizeof(msg)) != 0) {
		log_warnx("mirror %s: its configs do not parse (%s): not mirroring it",
		    m->name, msg);
		pm->conf = NULL;
		snprintf(pm->unusable, sizeof(pm->unusable), "the mirror's configs "
		    "do not parse: %s", msg);
		pm_drop_src(pm);
	} else if (pm->src != NULL && old != NULL && same_client(old, pm->conf)) {
		/* Only mirror.* options changed: they are read at each use. */
		pcluster_set_refresh_ms(pm->src,
		    pm->conf->metadata_refresh_interval_ms);
		log_info("mirror %s: new configs in force; the source client "
		    "is unchanged", m->name);
	} else {
		if (pm->src != NULL)
			log_info("mirror %s: the source client is made again from "
			    "the new configs; every partition goes on from its "
			    "position", m->name);
		pm_drop_src(pm);
		if (clientfiles_count(pm->conf) > 0) {
			/* Files named over the wire: never read on the loop. */
			pm_load_files(pm);
		} else {
			mirrorconf_client_pairs(pm->conf, &cn, &cv, &cnum);
			pm_make_src(pm, cn, cv, cnum);
		}
	}
	mirrorconf_free(old);
	free(names);
	secrets_values_free(values, m->nconfigs);
}

static void pm_configure(struct pmirror *pm);

/*
 * The mirror's configs were replaced: resolved and parsed again; the
 * source client is kept when its settings did not change, made again
 * otherwise (pm_configured()).  A read of the old configs' files or
 * references still going is cancelled.
 */
static void pm_reconfigure(struct pmirror *pm)
{
	pm->reconf = 0;
	if (pm->dead || pm->m == NULL)
		return;
	clientfiles_cancel(pm->files);
	pm->files = NULL;
	secrets_resolve_cancel(pm->resolving);
	pm->resolving = NULL;
	pm->files_failed = 0;
	pm->resolve_failed = 0;
	pm->files_backoff_ms = 0;
	pm->unusable[0] = '\0';
	pm_configure(pm);
}

static void pm_resolved_cb(void *arg, const char *err,
    const char *const *names, char **values, size_t n)
{
	struct pmirror *pm = arg;

	(void)names;
	pm->resolving = NULL;
	if (pm->m == NULL || pm->m->nconfigs != n) {
		/* Deleted meanwhile (freed at the next tick). */
		secrets_values_free(values, n);
		return;
	}
	pm_configured(pm, values, err);
	pl_kick(pm->pl);
}

/*
 * Opens the mirror's secrets and resolves its config provider references;
 * files they name are read off the loop first.  The resolved values live
 * only in pm->conf.
 */
static void pm_configure(struct pmirror *pm)
{
	const struct mirror *m = pm->m;
	char **values = NULL;
	char msg[512];

	if (secrets_mirror_reads_files(m)) {
		pm->resolving = secrets_resolve_start(pm->pl->base, m,
		    pm_resolved_cb, pm, msg, sizeof(msg));
		if (pm->resolving == NULL)
			pm_configured(pm, NULL, msg);
		return;
	}
	if (secrets_mirror_values(m, &values, msg, sizeof(msg)) != 0)
		pm_configured(pm, NULL, msg);
	else
		pm_configured(pm, values, NULL);
}

static struct pmirror *pm_new(struct pipeline *pl, const struct mirror *m)
{
	struct pmirror *pm = calloc(1, sizeof(*pm)), **arr;

	if (pm == NULL)
		return NULL;
	pm->pl = pl;
	pm->m = m;
	pm->born_ms = clock_wall_ms();
	pm->name = strdup(m->name);
	if (pm->name == NULL)
		goto fail;
	pm_configure(pm);
	arr = realloc(pl->mirrors, (pl->nmirrors + 1) * sizeof(*arr));
	if (arr == NULL)
		goto fail;
	pl->mirrors = arr;
	pl->mirrors[pl->nmirrors++] = pm;
	return pm;
fail:
	pm_free(pm);
	return NULL;
}

/*
 * What a partition knows when this process starts copying it (created, or
 * gained from another instance): nothing about the destination end (SYNC
 * and the proof learn it), the identity to be taken again from the model
 * (the last recorded one is reused: part_identity() in pipeline/copy.c), the
 * process start or the handover counting as an uncertain Produce.
 */
static void part_reset(struct ppart *p)
{
	const struct mpart *mp = p->mp;

	p->src_fetch = p->src_copied = -1;
	p->dst_next = p->dst_tail = -1;
	p->src_done = -1;
	p->sync_lo = p->sync_hi = -1;
	p->prove_end = p->proven_end = -1;
	p->prove_strict = 0;
	p->seq_probe = 0;
	p->pid = -1;
	p->pepoch = -1;
	p->seq_base = -1;
	p->pid_fresh = 0;
	p->pid_wait_since = 0;
	p->unsure_sent_ms = clock_mono_ms();
	p->last_src = mp->last_offset;
	p->last_epoch = mp->nepochs > 0 ? mp->epochs[mp->nepochs - 1].epoch : -1;
	p->fetch_epoch = p->check_epoch = -1;
	p->fetch_epoch_end = p->check_src_end = p->check_dst_end = -1;
	p->check_resume = -1;
	p->live.source_high_watermark = -1;
	p->live.source_log_start = -1;
	p->dst_log_start = -1;
	p->deleted_from = -1;
	p->live.destination_end = -1;
	p->live.lag = -1;
	p->live.last_batch_timestamp_ms = -1;
	p->live.last_stable_offset = -1;
	p->lso_since = 0;
	p->lso_warned = 0;
	p->step = PS_IDLE;
	p->attempts = 0;
	p->retry_at = 0;
	p->gs_final = GS_FINAL_NONE;
	if (mp->state == MPART_FAILED && mp->retry_attempt > 0) {
		/* A retry that was due before a restart: keep its schedule. */
		p->attempts = mp->retry_attempt;
		p->retry_at = clock_mono_ms() + retry_delay(p->pm, mp->retry_attempt);
	}
}

static struct ppart *part_new(struct pmirror *pm, const struct mtopic *t,
    struct mpart *mp)
{
	struct ppart *p = calloc(1, sizeof(*p)), **arr;

	if (p == NULL || (p->topic = strdup(t->name)) == NULL) {
		free(p);
		return NULL;
	}
	arr = realloc(pm->parts, (pm->nparts + 1) * sizeof(*arr));
	if (arr == NULL) {
		free(p->topic);
		free(p);
		return NULL;
	}
	pm->parts = arr;
	p->pm = pm;
	p->mp = mp;
	p->index = mp->index;
	TAILQ_INIT(&p->q);
	TAILQ_INIT(&p->inflight);
	TAILQ_INIT(&p->failed);
	TAILQ_INIT(&p->unsure);
	part_reset(p);
	pknown_seed(pm->pl, p);
	p->not_before = pm->pl->started_ms + SETTLE_MS;
	p->owned = pl_part_owned(p);
	pm->parts[pm->nparts++] = p;
	pmap_add(pm->pl, p);
	return p;
}

/* Brings mirrors and partitions in line with mstate. */
static void model_sync(struct pipeline *pl)
{
	size_t nm = mstate_mirror_count(pl->st);

	for (size_t i = 0; i < nm; i++) {
		const struct mirror *m = mstate_mirror_at(pl->st, i);
		struct pmirror *pm = pm_find(pl, m);

		if (pm == NULL && (pm = pm_new(pl, m)) == NULL) {
			log_errorx("mirror %s: out of memory", m->name);
			continue;
		}
		for (size_t t = 0; t < m->ntopics; t++) {
			const struct mtopic *mt = m->topics[t];

			for (int32_t k = 0; k < mt->npart; k++) {
				struct mpart *mp = mt->parts[k];

				if (pl_part_of(pl, mp) == NULL &&
				    part_new(pm, mt, mp) == NULL)
					log_errorx("mirror %s: out of memory", m->name);
			}
		}
	}
	pl->model_dirty = 0;
}

static void source_metadata(struct pmirror *pm);

/* Source metadata arrived: discover topics and partitions, notice
 * deletions; then record what the pass learnt (pipeline/meta.c). */
void pl_source_metadata(struct pmirror *pm)
{
	struct pipeline *pl = pm->pl;

	source_metadata(pm);
	pmeta_flush(pl);
}

static void source_metadata(struct pmirror *pm)
{
	struct pipeline *pl = pm->pl;
	const struct mirror *m = pm->m;

	if (m == NULL || pm->dead)
		return;
	if (pl_controller(pl) && m->source_cluster_id == NULL &&
	    pm->src->cluster_id != NULL)
		pmeta_defer(pl, PMETA_SOURCE_ID, pm->name, NULL, 0,
		    pm->src->cluster_id, 0);
	if (pident_source(pm) != 0)
		return; /* another cluster: no growth, no discovery */
	/* Growth and deletion (pipeline/ident.c) of the mirror's topics. */
	for (size_t t = 0; t < m->ntopics; t++) {
		const struct mtopic *mt = m->topics[t];
		const struct kcluster_topic *md = pcluster_topic(pm->src, mt->name);
		int st = mtopic_state(mt);

		if (st == MPART_STOPPING || st == MPART_STOPPED)
			continue;
		if (pident_source_topic(pm, m->topics[t], md)) {
			if ((m = pm->m) == NULL || pm->dead)
				return;
			continue;
		}
		if (md->error == 0 && md->npart > mt->npart && pl_controller(pl))
			pmeta_defer(pl, PMETA_GROW, pm->name, mt->name, 0, NULL,
			    md->npart);
	}
	/* Patterns: source topics that match and are not mirrored yet, and
	 * are not a mirror's destination there (pipeline/marks.c). */
	if (m->nincludes == 0 || !pl_controller(pl))
		return;
	char **cand = NULL;
	size_t ncand = 0;

	for (int pass = 0; pass < 2; pass++)
	for (size_t i = 0; i < kcluster_topic_count(pm->src->kc); i++) {
		const struct kcluster_topic *md = kcluster_topic_at(pm->src->kc, i);

		if (md->error != 0 || md->npart <= 0 || strncmp(md->name, "__", 2) == 0 ||
		    mirror_topic_find(m, md->name) != NULL ||
		    !mirror_wants_topic(m, md->name) ||
		    mstate_topic_holder(pl->st, md->name, m) != NULL)
			continue;
		if (pass == 0) {
			char **nc = realloc(cand, (ncand + 1) * sizeof(*cand));

			if (nc != NULL) {
				cand = nc;
				cand[ncand++] = (char *)(uintptr_t)md->name;
			}
			continue;
		}
		if (!pmarks_allows(pm, md->name, cand, ncand)) {
			ncand = 0; /* asked once per pass */
			continue;
		}
		/* Written with everything else the pass learnt, in one
		 * group (pipeline/meta.c): one write for a pattern that matches
		 * thousands, and the loop goes on meanwhile. */
		pmeta_defer(pl, PMETA_ADD, pm->name, md->name, 0, NULL,
		    md->npart);
	}
	free(cand);
}

/* ---- ownership (multi-instance mode) ---------------------------------------- */

/*
 * This instance no longer copies p (its part-owner record names another
 * instance or nobody, or the instance id changed).  Everything about p in
 * flight is forgotten here and now, and NOTHING is written: no state
 * change, no anchor, no producer identity (the new owner finds the model
 * as this instance last recorded it).  Answers to requests already sent
 * are ignored: Fetch, ListOffsets and the proof by p->gen (bumped by
 * pl_drop_queue()), a Produce by p->own_gen.  A Produce still in a broker's
 * hands is the deposed owner's late Produce (doc/ha.md): the new owner
 * reuses the same identity and sequences, so the broker takes exactly one
 * copy of the batch at its offset.
 */
static void part_lose(struct ppart *p)
{
	char name[300];

	pl_drop_queue(p);
	if (p->ninflight > 0)
		log_info("%s: the answers to %d Produce request%s in flight will be "
		    "ignored", part_name(p, name, sizeof(name)), p->ninflight,
		    p->ninflight == 1 ? "" : "s");
	pl_produce_forget(p);
	/* A lost partition holds no batch and no byte of the cap. */
	MR_ASSERT_MSG(p->qbytes == 0 && p->ubytes == 0, "%zu and %zu bytes held",
	    p->qbytes, p->ubytes);
	p->own_gen++;
	p->pm->pl->losses++;
	p->owned = 0;
	p->step = PS_IDLE;
	/* The new owner moves the end: no group offset sync (groupsync.c)
	 * from this instance's stale numbers. */
	p->src_done = p->dst_next = p->dst_tail = -1;
	p->pid = -1;
	p->seq_base = -1;
	p->retry_at = 0;
	p->live.destination_end = p->live.lag = -1;
	p->live.source_high_watermark = -1;
	p->live.last_stable_offset = -1;
	log_info("%s: not copied by this instance any more (owner %s)",
	    part_name(p, name, sizeof(name)), p->mp != NULL &&
	    p->mp->owner != NULL ? p->mp->owner : "(nobody)");
	pl_kick(p->pm->pl);
}

/* This instance now copies p: as after a restart (SYNC after the settle
 * delay, the proof of the destination end, the recorded identity). */
static void part_gain(struct ppart *p)
{
	char name[300];

	part_reset(p);
	p->owned = 1;
	p->not_before = clock_mono_ms() + SETTLE_MS;
	log_info("%s: copied by this instance (%s) from now on: re-reading the "
	    "destination end", part_name(p, name, sizeof(name)),
	    p->pm->pl->instance != NULL ? p->pm->pl->instance : "single mode");
	pl_kick(p->pm->pl);
}

/*
 * p's write history was dropped (mstate's REALIGNED: the operator's realign,
 * or a topic added again onto another destination topic): what this
 * process knew of the destination partition is of a topic that is gone.
 * Everything in flight is forgotten as when p is lost (answers ignored:
 * gen, own_gen), then p starts as after a restart, from a destination end
 * read anew and proven against the empty history, with a fresh producer
 * identity.  Nothing is written here.
 */
static void part_realigned(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;
	char name[300];

	pl_drop_queue(p);
	pl_produce_forget(p);
	p->own_gen++;
	pl->losses++;
	ppreserve_reset(p);
	free(p->pv_note);   /* of the old topic */
	p->pv_note = NULL;
	part_reset(p);
	p->skip_over_once = p->preserve_once = 0;
	p->fb_state = 0;
	p->fb_last = -1;
	p->fb_epoch = -1;
	p->fb_next = -1;
	p->not_before = clock_mono_ms();
	log_info("%s: its write history is dropped (the destination topic is "
	    "a new one): copied as a new topic", part_name(p, name,
	    sizeof(name)));
}

/* Starts or stops p as its owner says; 1 if this instance copies it. */
static int part_own(struct ppart *p)
{
	int owned;

	if (p->dead || p->mp == NULL)
		return 0;
	owned = pl_part_owned(p);
	if (p->owned && !owned)
		part_lose(p);
	else if (!p->owned && owned)
		part_gain(p);
	return owned;
}

/* ---- the per-partition machine ------------------------------------------- */

/*
 * STOPPING -> STOPPED with the failover report: what the source held that
 * was not copied, as of a ListOffsets of the source asked once nothing was
 * in flight (waited for up to PL_FINAL_HW_WAIT_MS), else of the source's
 * last answer, with the time of that answer and whether the source
 * answered at the stop (when it did not, what was not copied is a lower
 * bound); the high watermark, the source offsets from the end of what was
 * copied to it, and the lag in time as DescribeMirrors shows it; -1 where
 * this process never learnt the source's end.
 */
#define PL_FINAL_HW_WAIT_MS 3000

/* STOPPED is durable: its final group sync is behind it (and a topic
 * added again starts afresh); the mirror marks say where it stopped. */
static void stopped_then(struct ppart *p)
{
	p->gs_final = GS_FINAL_NONE;
	groupsync_kick(p->pm->pl->gs, p->pm->name);
}

/* 0 STOPPED, 1 being recorded (stopped_then() follows), -1 failed. */
static int part_stopped(struct ppart *p, char *msg, size_t msglen)
{
	struct mfailover fo = { -1, -1, -1, -1, -1, 0 };
	int64_t hw = p->live.source_high_watermark, now = clock_wall_ms();
	int64_t done = p->src_done >= 0 ? p->src_done :
	    p->last_src >= 0 ? p->last_src + 1 : -1;
	int64_t last = p->last_src >= 0 ? p->last_src : done > 0 ? done - 1 :
	    -1;
	char name[300];

	fo.asked = p->final_ask == 3;
	fo.stopped_at = now;
	if (hw >= 0) {
		fo.src_hwm = hw;
		fo.hwm_at = p->src.ok_ms > 0 ? p->src.ok_ms : -1;
		if (done >= 0)
			fo.lag = MAX(hw - done, 0);
	}
	fo.lag_ms = fo.lag == 0 && fo.asked ? 0 : fo.lag < 0 ? -1 :
	    ph_lag_ms(p, now, !fo.asked);
	if (fo.lag != 0 || !fo.asked)
		log_warnx("%s: stopped with %s%" PRId64 " source offsets not copied "
		    "(source high watermark %" PRId64 "%s, copied up to offset %"
		    PRId64 ", lag %" PRId64 " ms; -1 = unknown)",
		    part_name(p, name, sizeof(name)), fo.asked ? "" : "at least ",
		    fo.lag, fo.src_hwm, fo.asked ? "" : " as last known: the "
		    "source did not answer at the stop", last, fo.lag_ms);
	p->final_ask = 0;
	p->stop_dst = 0;
	struct pl_state_req rq = { .to = MPART_STOPPED, .why = "fetching "
	    "stopped, nothing in flight", .last = 1, .last_offset = last,
	    .last_epoch = p->last_epoch, .fo = &fo,
	    .note = groupsync_final_note(p->pm->pl->gs, p),
	    .then = stopped_then };
	return pl_part_state(p, &rq, msg, msglen);
}

static void part_step(struct ppart *p, int64_t now)
{
	struct pipeline *pl = p->pm->pl;
	char msg[512], name[300];
	int st, rc;

	if (p->dead || p->mp == NULL)
		return;
	/* Another instance's partition: no request, no record (the owner
	 * acknowledges PAUSING and STOPPING and retries FAILED). */
	if (!part_own(p))
		return;
	/* Frozen while its state change is being recorded. */
	if (p->swrite)
		return;
	st = p->mp->state;
	switch (st) {
	case MPART_PREPARING:
	case MPART_MIRRORING:
		if (pl->draining) {
			pl_drop_queue(p);
			break;
		}
		if (p->step == PS_IDLE && now >= p->not_before) {
			if (!pident_restart_ok(p))
				break;
			p->step = PS_SYNC;
			p->sync_lo = p->sync_hi = -1;
		}
		if (p->step == PS_SYNC && !p->step_inflight && p->ninflight == 0 &&
		    now >= p->not_before)
			pcopy_sync(p);
		else if (p->step == PS_OOR && !p->step_inflight && now >= p->not_before)
			pcopy_oor(p);
		else if (p->step == PS_PROVE && !p->step_inflight && now >= p->not_before)
			pprove_send(p);
		else if (p->step == PS_EPOCH && !p->step_inflight && now >= p->not_before)
			pepoch_send(p);
		break;
	case MPART_PAUSING:
	case MPART_STOPPING:
		if (p->step == PS_RUN || p->step == PS_OOR)
			pl_drop_queue(p);
		if (p->step != PS_SYNC)
			p->step = PS_IDLE;
		if (p->step == PS_SYNC && p->sync_lo < 0 && p->last_send_ms == 0 &&
		    !p->step_inflight) {
			/* The start's SYNC, and nothing sent since: no outcome
			 * to learn (the destination topic may be gone). */
			p->step = PS_IDLE;
		}
		if (p->step == PS_SYNC && !p->step_inflight && p->ninflight == 0 &&
		    now >= p->not_before) {
			/* An uncertain Produce: learn what happened first. */
			pcopy_sync(p);
			break;
		}
		if (p->ninflight > 0 || p->step_inflight || p->step == PS_SYNC)
			break;
		if (st == MPART_STOPPING && p->src_done < 0 && p->stop_dst != 2) {
			/* Never synced in this process: what was copied is the
			 * destination end, asked for the report (again until
			 * the deadline while its leader is not known yet). */
			if (p->stop_dst == 0) {
				p->stop_dst = 1;
				p->final_deadline = now + PL_FINAL_HW_WAIT_MS;
			}
			if (!p->paused_lo && pcopy_paused_end(p) == 0)
				p->stop_dst = 2;
			else if (now >= p->final_deadline)
				p->stop_dst = 2;
		}
		if (st == MPART_STOPPING && (p->stop_dst == 1 || p->paused_lo) &&
		    now < p->final_deadline)
			break;
		if (st == MPART_STOPPING && (p->final_ask == 0 ||
		    p->final_ask == 4)) {
			/* The source's end now, for the failover report; a
			 * source that does not answer soon is not waited for.
			 * One not connected yet (a partition that never
			 * fetched) is asked again until the deadline. */
			if (p->final_ask == 0)
				p->final_deadline = now + PL_FINAL_HW_WAIT_MS;
			if (pcopy_final_hw(p) == 0)
				p->final_ask = 1;
			else
				p->final_ask = now < p->final_deadline ? 4 : 2;
		}
		/* The consumer groups' offsets once more, while nothing but
		 * the source's consumers can have moved them (groupsync.c),
		 * alongside the ask above. */
		if (st == MPART_STOPPING && groupsync_final(pl->gs, p, now))
			break;
		if (st == MPART_STOPPING && (p->final_ask == 1 ||
		    p->final_ask == 4) && now < p->final_deadline)
			break;
		if (st == MPART_PAUSING) {
			struct pl_state_req rq = { .to = MPART_PAUSED,
			    .why = "fetching stopped, nothing in flight" };

			if (pl_part_state(p, &rq, msg, sizeof(msg)) < 0)
				log_warnx("%s: %s", part_name(p, name, sizeof(name)), msg);
		} else if ((rc = part_stopped(p, msg, sizeof(msg))) < 0) {
			log_warnx("%s: %s", part_name(p, name, sizeof(name)), msg);
		} else if (rc == 0) {
			stopped_then(p);
		}
		break;
	case MPART_FAILED:
		if (p->step != PS_IDLE)
			pl_drop_queue(p);
		p->step = PS_IDLE;
		if (p->retry_at > 0 && now >= p->retry_at && p->ninflight == 0 &&
		    !p->step_inflight && !pl->draining) {
			struct pl_state_req rq = { .to = MPART_PREPARING,
			    .why = "automatic retry" };

			p->retry_at = 0;
			if (pl_part_state(p, &rq, msg, sizeof(msg)) < 0)
				log_warnx("%s: %s", part_name(p, name, sizeof(name)), msg);
			break;
		}
		/* Waiting for a decision a realign may be (mstate.h): its
		 * destination end, once, for what a realign would delete
		 * (unknown after a restart). */
		if (p->retry_at == 0 && p->live.destination_end < 0 &&
		    mpart_realign_reason(p->mp) && !p->paused_lo &&
		    !p->step_inflight && p->ninflight == 0 && !pl->draining &&
		    now >= p->paused_lo_at) {
			if (pcopy_paused_end(p) == 0)
				p->paused_lo_at = now + (p->pm->conf != NULL ?
				    p->pm->conf->metadata_refresh_interval_ms :
				    30000);
			else   /* no leader or connection yet */
				p->paused_lo_at = now + pl_backoff_ms(pl);
		}
		break;
	default:
		/* PAUSED, STOPPED, UNKNOWN: nothing to copy. */
		if (p->step != PS_IDLE && p->ninflight == 0 && !p->step_inflight) {
			pl_drop_queue(p);
			p->step = PS_IDLE;
		}
		/* PAUSED: the source's end on a slow cadence, so the lag
		 * shown is the source's, not the one at the pause. */
		if (st == MPART_PAUSED && p->step == PS_IDLE && !p->paused_lo &&
		    !p->step_inflight && !pl->draining && now >= p->paused_lo_at) {
			p->paused_lo_at = now + (p->pm->conf != NULL ?
			    p->pm->conf->metadata_refresh_interval_ms : 30000);
			(void)pcopy_paused_end(p);
		}
		break;
	}
}

static int anything_inflight(const struct pipeline *pl)
{
	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++)
			if (pl->mirrors[i]->parts[j]->ninflight > 0)
				return 1;
	return 0;
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pipeline *pl = arg;
	int64_t now = clock_mono_ms();

	(void)fd;
	(void)what;
	pl->last_sweep_ms = now;
	if (pl->model_dirty)
		model_sync(pl);
	if (pl->leaders_changed) {
		pl->leaders_changed = 0;
		if (pl->leader_hook != NULL)
			pl->leader_hook(pl->leader_arg);
	}
	/* Deleted mirrors. */
	for (size_t i = 0; i < pl->nmirrors;) {
		if (pl->mirrors[i]->dead) {
			pm_free(pl->mirrors[i]);
			pl->mirrors[i] = pl->mirrors[--pl->nmirrors];
		} else {
			i++;
		}
	}
	{
		size_t parts = 0;

		for (size_t i = 0; i < pl->nmirrors; i++)
			parts += pl->mirrors[i]->nparts;
		pl->sweep_gap_ms = (int64_t)(parts / SWEEP_PARTS_PER_MS);
	}
	pcluster_tick(pl->dst);
	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];

		if (pm->reconf)
			pm_reconfigure(pm);
		if (pm->src == NULL && pm->resolving != NULL)
			continue;   /* the files its references name are being read */
		if (pm->src == NULL && pm->files != NULL) {
			if (now - pm->files_started_ms < FILES_SLOW_MS)
				continue;   /* its files are being read */
			if (!pm->files_failed) {
				pm->files_failed = 1;
				snprintf(pm->unusable, sizeof(pm->unusable),
				    "the mirror's source cannot be used: its "
				    "files were not read within %d ms",
				    FILES_SLOW_MS);
				log_warnx("mirror %s: %s", pm->name, pm->unusable);
			}
		}
		if (pm->src == NULL && pm->resolve_failed && pm->m != NULL &&
		    now >= pm->files_retry_at) {
			/* Perhaps the file or the key is back. */
			pm_configure(pm);
			if (pm->files != NULL || pm->resolving != NULL ||
			    pm->src != NULL)
				continue;
		}
		if (pm->src == NULL && pm->files == NULL && pm->files_failed &&
		    now >= pm->files_retry_at) {
			/* Perhaps the file was fixed; the partitions stay
			 * FAILED (with the reason) until it is. */
			pm_load_files(pm);
			if (pm->files != NULL)
				continue;
		}
		if (pm->src == NULL && pm->unusable_since == 0)
			pm->unusable_since = clock_wall_ms();
		else if (pm->src != NULL)
			pm->unusable_since = 0;
		if (pm->src == NULL) {
			/* Say why on every partition that would copy; retries
			 * fail the same way until the attempts run out. */
			for (size_t j = 0; j < pm->nparts; j++) {
				struct ppart *p = pm->parts[j];

				if (!part_own(p))
					continue;   /* its owner says */
				if (p->swrite)
					continue;   /* once that is recorded */
				if (p->mp->state == MPART_PREPARING ||
				    p->mp->state == MPART_MIRRORING) {
					pl_part_fail(p, "%s", pm->unusable);
				} else if (p->mp->state == MPART_FAILED &&
				    pm->unusable[0] != '\0' &&
				    (p->mp->error == NULL ||
				    strcmp(p->mp->error, pm->unusable) != 0)) {
					/* FAILED before (an earlier run, another
					 * cause): show the reason that holds now. */
					char msg[256];
					struct pl_state_req rq = {
					    .to = MPART_FAILED,
					    .why = pm->unusable,
					    .retry = p->mp->retry_attempt };

					if (pl_part_state(p, &rq, msg,
					    sizeof(msg)) < 0)
						log_warnx("mirror %s: %s", pm->name,
						    msg);
				}
			}
			continue;
		}
		pcluster_tick(pm->src);
		for (size_t j = 0; j < pm->nparts; j++)
			part_step(pm->parts[j], now);
		if (pl_controller(pl)) {
			ptconf_tick(pm, now);
			pacl_tick(pm, now);
		}
	}
	pcopy_sync_flush(pl); /* the destination ends asked for above */
	if (pl_controller(pl))
		pacl_orphans_tick(pl, now);
	for (size_t i = 0; i < pl->nmirrors; i++)
		if (pl->mirrors[i]->src != NULL && !pl->draining)
			pcopy_fetch_round(pl->mirrors[i]);
	pcopy_produce_round(pl);
	if (pl->dst->pid_demand > 0)
		pcluster_tick(pl->dst); /* producer ids for the partitions waiting */
	if (pl->draining && pl->drain_cb != NULL && !anything_inflight(pl)) {
		void (*cb)(void *) = pl->drain_cb;

		pl->drain_cb = NULL;
		cb(pl->drain_arg);
	}
}

/*
 * The periodic sweep serves the timers (not_before, retries, metadata age).
 * At scale a sweep costs O(partitions), so it runs at most every
 * SWEEP_TICK_GAPS sweep gaps (500 ms at 10,000 partitions) and not at all
 * while answers sweep often enough: an idle mirror of 10,000 partitions
 * otherwise spends its CPU walking them ten times a second.
 */
#define SWEEP_TICK_GAPS 50

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pipeline *pl = arg;

	if (pl->sweep_gap_ms == 0 || clock_mono_ms() - pl->last_sweep_ms >=
	    MAX(TICK_MS, SWEEP_TICK_GAPS * pl->sweep_gap_ms))
		kick_cb(fd, what, arg);
	groupsync_tick(pl->gs);
	ph_tick(pl, clock_mono_ms());
	pknown_save(pl, clock_mono_ms(), 0);
}

/* ---- metrics --------------------------------------------------------------- */

static const char *const state_names[] = {
#define X(st) #st,
	MPART_STATES(X)
#undef X
};

/* A partition counter brought up to now; at 0 from the start, so a rate()
 * or an alert has a series before the first event. */
static void counter_to(struct metrics_std *ms, enum metrics_std_id id,
    const struct ppart *p, int64_t now, int64_t *reported)
{
	metrics_counter_add(metrics_std_partition(ms, id, p->pm->name, p->topic,
	    p->index), now > *reported ? (double)(now - *reported) : 0);
	if (now > *reported)
		*reported = now;
}

/* The request error counters of a cluster exist from the start: a series
 * with error="NONE" stays 0 (the errors have their own). */
static void request_errors_zero(struct metrics_std *ms, const char *side,
    const char *mirror, const char *api)
{
	metrics_counter_add(METRICS_SERIES(MSTD(ms, CLUSTER_REQUEST_ERRORS), side,
	    mirror, api, "NONE"), 0);
}

static void gauge(struct metrics_std *ms, enum metrics_std_id id,
    const struct ppart *p, int64_t v)
{
	if (v >= 0)
		metrics_gauge_set(metrics_std_partition(ms, id, p->pm->name, p->topic,
		    p->index), (double)v);
}

/* Scrape time: open connections and unanswered request bytes per cluster. */
static void cluster_gauges(struct metrics_std *ms, const struct pcluster *cl,
    const char *mirror)
{
	const char *side = cl->is_source ? "source" : "destination";
	size_t conns, inflight;

	kcluster_conn_stats(cl->kc, &conns, &inflight);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, CLUSTER_CONNECTIONS), side,
	    mirror), (double)conns);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, CLUSTER_INFLIGHT_BYTES), side,
	    mirror), (double)inflight);
}

/* Scrape time: mirrord_memory_held_bytes{kind} (pl->qbytes split into
 * queued and sending by a walk of the batches in flight). */
static void memory_gauges(struct pipeline *pl)
{
	size_t sending = 0, unsent = pl_unsent_bytes(pl);
	const struct pbatch *b;
	const char *kind;
	double v;

	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++) {
			const struct ppart *p = pl->mirrors[i]->parts[j];

			if (p->dead)
				continue;
			TAILQ_FOREACH(b, &p->inflight, link)
				sending += b->len;
			TAILQ_FOREACH(b, &p->failed, link)
				sending += b->len;
		}
	sending = MIN(sending, pl->qbytes);
	kind = "queued";
	v = (double)(pl->qbytes - sending);
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind), v);
	kind = "sending";
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind),
	    (double)sending);
	kind = "unsure";
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind),
	    (double)pl->ubytes);
	kind = "fetch_responses";   /* incl. answers' buffers batches pin */
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind),
	    (double)(pl->fetch_reserved + pl->pin_extra));
	kind = "produce_requests";
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind),
	    (double)unsent);
	kind = "destination_reads";
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD), 1, &kind),
	    (double)pl->dreads);
	(void)pl_held_note(pl);
	metrics_gauge_set(metrics_series(MSTD(pl->ms, MEMORY_HELD_PEAK), 0, NULL),
	    (double)pl->held_peak);
}

static void collect_clusters(struct metric_family *f, void *arg)
{
	struct pipeline *pl = arg;

	(void)f;
	cluster_gauges(pl->ms, pl->dst, "");
	request_errors_zero(pl->ms, "destination", "", "Produce");
	request_errors_zero(pl->ms, "destination", "", "InitProducerId");
	metrics_gauge_set(metrics_series(MSTD(pl->ms, CLUSTER_OWNED_PARTITIONS),
	    0, NULL), (double)pipeline_owned_partitions(pl));
	metrics_gauge_set(metrics_series(MSTD(pl->ms, PRODUCE_INFLIGHT_BATCHES), 0, NULL),
	    (double)pl->totals.inflight_batches);
	metrics_gauge_set(metrics_series(MSTD(pl->ms, PRODUCE_INFLIGHT_PEAK), 0, NULL),
	    (double)pl->totals.partition_inflight_peak);
	metrics_gauge_set(metrics_series(MSTD(pl->ms, PRODUCE_REQUESTS_PEAK), 0, NULL),
	    (double)pl->totals.broker_requests_peak);
	memory_gauges(pl);
	for (size_t i = 0; i < pl->nmirrors; i++) {
		if (!pl->mirrors[i]->dead && pl->mirrors[i]->src != NULL)
			cluster_gauges(pl->ms, pl->mirrors[i]->src,
			    pl->mirrors[i]->name);
		if (!pl->mirrors[i]->dead)
			request_errors_zero(pl->ms, "source", pl->mirrors[i]->name,
			    "Fetch");
		ph_collect_mirror(pl, pl->mirrors[i]);
	}
}

/* Scrape time: the per-partition series from the live numbers (nothing on
 * the copy path touches the registry). */
static void collect_partitions(struct metric_family *f, void *arg)
{
	struct pipeline *pl = arg;
	struct metrics_std *ms = pl->ms;
	int64_t now = clock_mono_ms();

	(void)f;
	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];

		for (size_t j = 0; j < pm->nparts; j++) {
			struct ppart *p = pm->parts[j];

			if (p->dead || p->mp == NULL)
				continue;
			metrics_std_partition_state(ms, pm->name, p->topic, p->index,
			    state_names, ARRAY_SIZE(state_names), (size_t)p->mp->state);
			gauge(ms, MSTD_PARTITION_LAG_RECORDS, p, p->live.lag);
			/* lag in time, source age, stalled (pipeline/health.c) */
			ph_collect_partition(pl, p);
			gauge(ms, MSTD_PARTITION_SOURCE_HIGH_WATERMARK, p,
			    p->live.source_high_watermark);
			gauge(ms, MSTD_PARTITION_DESTINATION_END_OFFSET, p,
			    p->live.destination_end);
			metrics_gauge_set(metrics_std_partition(ms,
			    MSTD_PARTITION_LSO_STUCK_SECONDS, pm->name, p->topic,
			    p->index), (double)pl_lso_stuck_ms(p, now) / 1000.0);
			counter_to(ms, MSTD_PARTITION_RECORDS, p, p->live.records,
			    &p->reported.records);
			counter_to(ms, MSTD_PARTITION_BYTES, p, p->live.bytes,
			    &p->reported.bytes);
			counter_to(ms, MSTD_PARTITION_BATCHES, p, p->live.batches,
			    &p->reported.batches);
			counter_to(ms, MSTD_PARTITION_CRC_FAILURES, p, p->live.crc_failures,
			    &p->reported.crc_failures);
			counter_to(ms, MSTD_PARTITION_OFFSET_HOLES, p, p->live.offset_holes,
			    &p->reported.offset_holes);
			counter_to(ms, MSTD_PARTITION_RETRIES, p, p->live.retries,
			    &p->reported.retries);
			counter_to(ms, MSTD_PARTITION_SOURCE_DIVERGENCES, p,
			    p->live.divergences, &p->reported.divergences);
			counter_to(ms, MSTD_PARTITION_SOURCE_DELETED, p,
			    p->live.source_deleted, &p->reported.source_deleted);
			counter_to(ms, MSTD_PARTITION_DISCARDED_BYTES, p,
			    p->live.discarded_bytes, &p->reported.discarded_bytes);
			counter_to(ms, MSTD_PARTITION_COALESCED_BATCHES, p,
			    p->live.coalesced, &p->reported.coalesced);
		}
	}
}

/* The mirror a source cluster belongs to ("" for the destination). */
static const char *cluster_mirror_name(const struct pcluster *cl)
{
	for (size_t i = 0; i < cl->pl->nmirrors; i++)
		if (cl->pl->mirrors[i]->src == cl)
			return cl->pl->mirrors[i]->name;
	return "";
}

void pl_kafka_error(struct pcluster *cl, int16_t api_key, int16_t code)
{
	struct metrics_std *ms = cl->pl->ms;

	if (ms == NULL || cl->dying || code == 0)
		return;
	metrics_counter_inc(METRICS_SERIES(MSTD(ms, CLUSTER_REQUEST_ERRORS),
	    cl->is_source ? "source" : "destination", cluster_mirror_name(cl),
	    api_key == 0 ? "Produce" : api_key == KP_API_INIT_PRODUCER_ID ?
	    "InitProducerId" : "Fetch", kerr_name(code)));
	if (!cl->is_source && pl_is_denial(code))
		metrics_counter_inc(METRICS_SERIES(MSTD(ms,
		    DESTINATION_WRITES_DENIED), api_key == 0 ? "Produce" :
		    "InitProducerId", kerr_name(code)));
}

void pl_request_stats(void *arg, int16_t api_key, int err, int64_t latency_us,
    size_t request_bytes, size_t response_bytes)
{
	struct pcluster *cl = arg;
	struct metrics_std *ms = cl->pl->ms;
	const char *api, *mirror = "";

	(void)request_bytes;
	(void)response_bytes;
	if (ms == NULL || cl->dying)
		return;
	if (api_key == 0)
		api = "Produce";
	else if (api_key == 1)
		api = "Fetch";
	else
		return;
	mirror = cluster_mirror_name(cl);
	metrics_histogram_observe(METRICS_SERIES(MSTD(ms, CLUSTER_REQUEST_DURATION),
	    cl->is_source ? "source" : "destination", mirror, api),
	    (double)latency_us / 1e6);
	if (err != KCONN_E_OK)
		metrics_counter_inc(METRICS_SERIES(MSTD(ms, CLUSTER_REQUEST_ERRORS),
		    cl->is_source ? "source" : "destination", mirror, api,
		    kconn_err_name(err)));
}

/* ---- mstate hook ----------------------------------------------------------- */

static struct ppart *part_of(struct pipeline *pl, const struct mpart *mp);

static void on_mstate(void *arg, const struct mstate_event *ev)
{
	struct pipeline *pl = arg;
	struct pmirror *pm;
	struct ppart *p;

	switch (ev->kind) {
	case MSTATE_EV_MIRROR_DELETING:
		/* Its memory goes right after this hook: cut every pointer now. */
		pm = pm_find(pl, ev->mirror);
		if (pm != NULL) {
			pm->dead = 1;
			pm->m = NULL;
			pl->losses++;
			/* own_gen: a caller in the middle of a follower's
			 * metadata write sees it (pl_part_kept()). */
			for (size_t i = 0; i < pm->nparts; i++) {
				pm->parts[i]->mp = NULL;
				pm->parts[i]->dead = 1;
				pm->parts[i]->own_gen++;
			}
		}
		break;
	case MSTATE_EV_MIRROR_CREATED:
	case MSTATE_EV_TOPIC_ADDED:
		pl->model_dirty = 1;
		break;
	case MSTATE_EV_REALIGNED:
		if ((pm = pm_find(pl, ev->mirror)) == NULL)
			break;
		/* A creation done or a deletion of the topic before is of a
		 * topic that is gone. */
		ptopic_forget(pm, ev->topic->name);
		for (size_t i = 0; i < pm->nparts; i++) {
			p = pm->parts[i];
			if (!p->dead && p->mp != NULL && p->mp->topic == ev->topic &&
			    p->owned)
				part_realigned(p);
		}
		break;
	case MSTATE_EV_STATE:
		/* Added again: a topic created by this process before may
		 * have been deleted since (the operator's realign). */
		if (ev->from == MPART_STOPPED && ev->to == MPART_PREPARING &&
		    ev->part->index == 0 && (pm = pm_find(pl, ev->mirror)) != NULL)
			ptopic_forget(pm, ev->topic->name);
		/* RecoverMirrorTopics: retry now, with the operator's decision. */
		if (ev->from != MPART_FAILED || ev->to != MPART_PREPARING ||
		    ev->why == NULL || strstr(ev->why, "recovered by the operator") == NULL ||
		    (pm = pm_find(pl, ev->mirror)) == NULL)
			break;
		if ((p = pl_part_of(pl, ev->part)) != NULL && p->pm == pm) {
			p->attempts = 0;
			p->retry_at = 0;
			p->not_before = 0;
			p->skip_over_once =
			    strstr(ev->why, "resolution skip-over") != NULL;
			p->preserve_once =
			    strstr(ev->why, "resolution preserve") != NULL;
		}
		break;
	case MSTATE_EV_OWNER: {
		/* Lost: stop at once, before any answer of a request sent as
		 * the owner is read.  Gained: part_step() starts it. */
		p = pl_part_of(pl, ev->part);
		if (p != NULL && p->owned && !pl_part_owned(p))
			part_lose(p);
		break;
	}
	case MSTATE_EV_PATTERNS:
		pm = pm_find(pl, ev->mirror);
		if (pm != NULL && pm->src != NULL)
			pcluster_want_metadata(pm->src);
		break;
	case MSTATE_EV_CONFIGS:
		/* Applied at the next sweep, on the loop (pm_reconfigure()). */
		pm = pm_find(pl, ev->mirror);
		if (pm != NULL)
			pm->reconf = 1;
		break;
	default:
		break;
	}
	pl_kick(pl);
}

/* ---- public API --------------------------------------------------------- */

struct pipeline *pipeline_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct metrics_std *ms, char *err,
    size_t errlen)
{
	struct pipeline *pl = calloc(1, sizeof(*pl));
	char **dvalues;

	if (pl == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pl->base = base;
	TAILQ_INIT(&pl->loans);
	pl->st = st;
	pl->cfg = cfg;
	pl->ms = ms;
	pl->model_dirty = 1;
	pl->lease_until = INT64_MAX;
	pl->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (cfg->destination_bootstrap_servers == NULL) {
		snprintf(err, errlen, "destination.bootstrap_servers is not set");
		goto fail;
	}
	/* References (${credential:...}) are read now and never kept. */
	if (secrets_resolve_map("destination.client", &cfg->destination_client,
	    &dvalues, err, errlen) != 0)
		goto fail;
	pl->dst = pcluster_new(pl, "destination", 0, cfg->destination_bootstrap_servers,
	    (const char *const *)cfg->destination_client.names,
	    (const char *const *)dvalues, cfg->destination_client.n, err, errlen);
	secrets_values_free(dvalues, cfg->destination_client.n);
	if (pl->dst == NULL)
		goto fail;
	pcluster_load_pid(pl->dst, cfg->storage_data_dir);
	pknown_load(pl);
	if ((pl->gs = groupsync_new(pl)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	pl->kick_ev = event_new(base, -1, 0, kick_cb, pl);
	pl->tick_ev = event_new(base, -1, EV_PERSIST, tick_cb, pl);
	if (pl->kick_ev == NULL || pl->tick_ev == NULL) {
		snprintf(err, errlen, "cannot create the pipeline's events");
		goto fail;
	}
	if (ms != NULL) {
		metrics_family_on_collect(MSTD(ms, PARTITION_STATE),
		    collect_partitions, pl);
		metrics_family_on_collect(MSTD(ms, CLUSTER_INFLIGHT_BYTES),
		    collect_clusters, pl);
	}
	if (mstate_add_hook(st, on_mstate, pl) != 0) {
		snprintf(err, errlen, "mstate has no room for another hook");
		goto fail;
	}
	return pl;
fail:
	pipeline_free(pl);
	return NULL;
}

void pipeline_start(struct pipeline *pl)
{
	const struct timeval tv = { 0, TICK_MS * 1000 };

	if (!pl->started && event_add(pl->tick_ev, &tv) == 0) {
		pl->started = 1;
		pl->started_ms = clock_mono_ms();
	}
	/* Probe the destination now, mirrors or not: /readyz reports it. */
	pcluster_want_metadata(pl->dst);
	pl_kick(pl);
}

void pipeline_set_instance(struct pipeline *pl, const char *instance_id)
{
	char *id = NULL;

	if (instance_id != NULL && (id = strdup(instance_id)) == NULL) {
		log_errorx("pipeline: out of memory for the instance id");
		return;
	}
	free(pl->instance);
	pl->instance = id;
	log_info("pipeline: %s%s", id != NULL ? "copying the partitions owned "
	    "by instance " : "single mode, copying every partition",
	    id != NULL ? id : "");
	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++) {
			struct ppart *p = pl->mirrors[i]->parts[j];

			if (p->owned && !pl_part_owned(p))
				part_lose(p);
		}
	pl_kick(pl);
}

void pipeline_set_destination_refresh_ms(struct pipeline *pl, int64_t ms)
{
	if (pl->dst != NULL && ms >= 1000)
		pcluster_set_refresh_ms(pl->dst, ms);
}

void pipeline_set_controller(struct pipeline *pl, int is_writer)
{
	if (pl->controller != (is_writer != 0))
		log_info("pipeline: %s the mirrors' cluster-wide work (discovery, "
		    "growth, topic configs, ACLs)", is_writer ? "doing" :
		    "leaving the metadata writer");
	pl->controller = is_writer != 0;
	pl_kick(pl);
}

void pipeline_set_lease(struct pipeline *pl, int64_t until_ms,
    const char *why)
{
	int64_t now = clock_mono_ms();
	int was = pipeline_lease_held(pl);

	if (until_ms <= 0 && pl->lease_until > 0)
		pl->lease_off_wall = clock_wall_ms();
	pl->lease_until = until_ms;
	if (why != NULL)
		snprintf(pl->lease_why, sizeof(pl->lease_why), "%s", why);
	if (!was && until_ms > now)
		pl_kick(pl);
}

int pipeline_lease_held(const struct pipeline *pl)
{
	return clock_mono_ms() < pl->lease_until;
}

int pl_controller(const struct pipeline *pl)
{
	return pl->instance == NULL || pl->controller;
}

const char *pipeline_instance(const struct pipeline *pl)
{
	return pl->instance;
}

int32_t pipeline_destination_leader(struct pipeline *pl, const char *topic,
    int32_t partition)
{
	const struct kcluster_topic *t = pl->dst != NULL ?
	    pcluster_topic(pl->dst, topic) : NULL;

	if (t == NULL || t->error != 0 || partition < 0 ||
	    partition >= t->npart)
		return -1;
	return t->leader[partition];
}

void pipeline_set_leader_hook(struct pipeline *pl, void (*fn)(void *arg),
    void *arg)
{
	pl->leader_hook = fn;
	pl->leader_arg = arg;
}

size_t pipeline_owned_partitions(const struct pipeline *pl)
{
	size_t n = 0;

	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++)
			n += pl_part_owned(pl->mirrors[i]->parts[j]);
	return n;
}

void pipeline_set_config(struct pipeline *pl, const struct config *cfg)
{
	pl->cfg = cfg;
	pl_kick(pl);
}

void pipeline_shutdown(struct pipeline *pl, void (*done)(void *arg), void *arg)
{
	pl->draining = 1;
	pl->drain_cb = done;
	pl->drain_arg = arg;
	pl_kick(pl);
}

void pipeline_free(struct pipeline *pl)
{
	if (pl == NULL)
		return;
	if (pl->kick_ev)
		event_free(pl->kick_ev);
	if (pl->tick_ev)
		event_free(pl->tick_ev);
	pl->kick_ev = pl->tick_ev = NULL;
	if (pl->started)
		pknown_save(pl, clock_mono_ms(), 1);
	pknown_free(pl);
	groupsync_dying(pl->gs);
	pacl_orphans_free(pl);
	/* Connections first: their callbacks still see valid partitions. */
	pcluster_free(pl->dst);
	pl->dst = NULL;
	for (size_t i = 0; i < pl->nmirrors; i++) {
		pcluster_free(pl->mirrors[i]->src);
		pl->mirrors[i]->src = NULL;
	}
	for (size_t i = 0; i < pl->nmirrors; i++)
		pm_free(pl->mirrors[i]);
	free(pl->mirrors);
	for (size_t i = 0; i < pl->ngrave; i++)
		part_free(pl->graveyard[i]);
	free(pl->graveyard);
	free(pl->pmap);
	free(pl->sync_pend); /* flushed by every sweep: holds no request */
	pacl_writes_free(pl);
	pmeta_free(pl);
	groupsync_free(pl->gs);
	free(pl->instance);
	pl_loans_orphan(pl);
	if (pl->dns)
		evdns_base_free(pl->dns, 0);
	if (pl->ms != NULL) {
		metrics_family_on_collect(MSTD(pl->ms, PARTITION_STATE), NULL, NULL);
		metrics_family_on_collect(MSTD(pl->ms, CLUSTER_INFLIGHT_BYTES), NULL,
		    NULL);
	}
	free(pl);
}

const char *pipeline_destination_cluster_id(struct pipeline *pl)
{
	return pl != NULL && pl->dst != NULL ? pl->dst->cluster_id : NULL;
}

int pipeline_destination_ready(struct pipeline *pl, char *why, size_t whylen)
{
	const struct pcluster *d = pl->dst;
	int64_t age;

	if (!pcluster_ready(d, &age)) {
		snprintf(why, whylen, "the destination (%s) has not answered Metadata yet",
		    pl->cfg->destination_bootstrap_servers);
		return 0;
	}
	if (age > 2 * pcluster_refresh_ms(d) + 10000) {
		snprintf(why, whylen, "the destination's last Metadata answer is %"
		    PRId64 " ms old", age);
		return 0;
	}
	return 1;
}

int pl_ready_unless_failed(const struct pipeline *pl,
    int (*failed)(const struct mpart *mp), const char *because, char *why,
    size_t whylen)
{
	const struct mpart *first = NULL;
	size_t n = 0;

	for (size_t i = 0; i < pl->nmirrors; i++) {
		const struct mirror *m = pl->mirrors[i]->m;

		for (size_t t = 0; m != NULL && t < m->ntopics; t++)
			for (int32_t k = 0; k < m->topics[t]->npart; k++) {
				const struct mpart *mp = m->topics[t]->parts[k];

				if (mp->state != MPART_FAILED || !failed(mp))
					continue;
				if (n++ == 0)
					first = mp;
			}
	}
	if (n == 0)
		return 1;
	snprintf(why, whylen, "%zu partition%s FAILED %s, first %s/%s-%d: %s",
	    n, n == 1 ? "" : "s", because, first->topic->mirror->name,
	    first->topic->name, (int)first->index, first->error);
	return 0;
}

static int write_denied(const struct mpart *mp)
{
	return mp->error != NULL && strncmp(mp->error, PL_DENIED_PREFIX,
	    strlen(PL_DENIED_PREFIX)) == 0;
}

int pipeline_write_access_ready(struct pipeline *pl, char *why, size_t whylen)
{
	if (pl == NULL || pl->st == NULL)
		return 1;
	return pl_ready_unless_failed(pl, write_denied, "because the "
	    "destination refuses mirrord's principal (retried until it allows "
	    "it)", why, whylen);
}

/* The pipeline's record of mp (DescribeMirrors asks for every partition). */
static struct ppart *part_of(struct pipeline *pl, const struct mpart *mp)
{
	return pl_part_of(pl, mp);
}

void pipeline_partition_offsets(struct pipeline *pl, const struct mpart *p,
    int64_t *source_hwm, int64_t *dest_end)
{
	const struct ppart *pp = part_of(pl, p);

	*source_hwm = pp ? pp->live.source_high_watermark : -1;
	*dest_end = pp ? pp->live.destination_end : -1;
}

int pipeline_partition_live(struct pipeline *pl, const struct mpart *p,
    struct pipeline_live *out)
{
	const struct ppart *pp = part_of(pl, p);

	if (pp == NULL)
		return -1;
	*out = pp->live;
	out->lso_stuck_ms = pl_lso_stuck_ms(pp, clock_mono_ms());
	return 0;
}

/* Appends one warning to those in buf ("a; b"), cut at len. */
static void warn_cat(char *buf, size_t len, const char *piece)
{
	size_t at = strlen(buf);

	if (at + 1 < len)
		snprintf(buf + at, len - at, "%s%s", at > 0 ? "; " : "", piece);
}

int pipeline_partition_warning(struct pipeline *pl, const struct mpart *p,
    char *buf, size_t len)
{
	const struct ppart *pp = part_of(pl, p);
	int64_t stuck = pp != NULL ? pl_lso_stuck_ms(pp, clock_mono_ms()) : 0;
	char piece[1536];

	if (len == 0)
		return 0;
	buf[0] = '\0';
	if (stuck > 0) {
		snprintf(piece, sizeof(piece), "the source's last stable offset has stayed at %" PRId64
		    " for %.1f s (pipeline.stuck_lso_warn_ms is %" PRId64 ") while "
		    "the high watermark is %" PRId64 ": a transaction open on the source "
		    "holds back read_committed readers, and mirrord copies only up to the "
		    "last stable offset", pp->live.last_stable_offset, (double)stuck / 1000.0,
		    pl->cfg->pipeline_stuck_lso_warn_ms, pp->live.source_high_watermark);
		warn_cat(buf, len, piece);
	}
	/* What a failback found after the stop point and did with it: a
	 * wait, a preserve under way or done (pipeline/preserve.c). */
	if (pp != NULL && ppreserve_note(pp, piece, sizeof(piece)))
		warn_cat(buf, len, piece);
	/* The topic's configs refused by the destination (pipeline/tconf.c). */
	if (pp != NULL && ptconf_warning(pp->pm, pp->topic, piece, sizeof(piece)))
		warn_cat(buf, len, piece);
	/* The mirror's ACL sync or read-only guard refused (pipeline/acl.c). */
	if (pp != NULL && pacl_warning(pp->pm, piece, sizeof(piece)))
		warn_cat(buf, len, piece);
	/* Its consumer groups' final sync at the stop missed some (this
	 * process's report, else the one recorded with the stop). */
	if (groupsync_warning(pl->gs, p, pp, piece, sizeof(piece)))
		warn_cat(buf, len, piece);
	return buf[0] != '\0';
}

void pipeline_totals(const struct pipeline *pl, struct pipeline_totals *out)
{
	*out = pl->totals;
	out->queued_bytes = (int64_t)pl->qbytes;
	out->held_bytes = (int64_t)pl_held_now(pl);
	out->held_bytes_peak = pl->held_peak;
}
