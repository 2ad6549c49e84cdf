/*
 * groupsync.c: consumer-group offset sync, exact.
 *
 * Every mirror.groups.sync.interval.ms, per mirror, on the pipeline's loop:
 *
 *   1. ListGroups on every source broker (and the control connection):
 *      the groups matching mirror.groups.include and not
 *      mirror.groups.exclude;
 *   2. per group, one at a time: FindCoordinator and OffsetFetch
 *      (RequireStable, all partitions) on the source;
 *   3. each committed offset C of a partition mirrored by this mirror
 *      (MIRRORING, or STOPPING until its final sync, below; never
 *      STOPPED) is translated to a destination offset D:
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
 * The final sync.  A STOPPING partition (kafka-mirrors --remove: a
 * failover) with nothing in flight asks groupsync_final() before the
 * pipeline records it STOPPED.  A round that starts after that syncs its
 * groups once more: the topic is still mirrored and read-only, and nobody
 * has been told it stopped, so only the source's consumers can have moved
 * its offsets.  The partition goes STOPPED once that round ended, or
 * GS_FINAL_WAIT_MS after it asked (an OffsetCommit in flight that names it
 * is waited for: it may still be written).  What the round could not sync
 * for it (a group whose offsets could not be read or committed, the
 * groups not reached in time, every group when the source cannot be read)
 * is reported once: one warning naming the mirror, the partitions, the
 * groups and why; mirrord_group_sync_final_missed_total; the partition's
 * DescribeMirrors warning while it is STOPPED.  The pipeline records the
 * groups and why (groupsync_final_note()) with the STOPPED state, beside
 * the failover report (a part-failover-note record, mpart.failover_note):
 * after a restart, and on every instance, groupsync_warning() shows that
 * one, until the partition leaves STOPPED (the topic added again).  A new
 * stop of the partition drops its earlier report first.  From then
 * on the partition is never synced again, whatever the source does when
 * it comes back: its offsets on the destination are the destination
 * consumers'.  Nothing STOPPED is ever eligible, so a restart does not
 * sync it either.  Commits still to send for a partition that became
 * ineligible meanwhile are dropped (oc_send()).
 *
 * Logs.  A cluster that cannot be reached is said once when that has
 * lasted GS_GRACE_MS, reminded at most every GS_REMIND_MS, and said once
 * when it answers again; while the pipeline's health view says the mirror's source cannot
 * be read (pmirror.down_since, pipeline/health.c, which logs that itself),
 * rounds do not ask the source at all.  Any other failure is logged at
 * most once every GS_REMIND_MS per message, whichever group it names
 * (say_once()).
 *
 * Nothing here blocks; every request goes through the pipeline's own
 * connections (pcluster, pbroker).  A failed step ends the group's sync for
 * this round with a counted error; the next round tries again (a final
 * sync excepted).
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
#include "pipeline.h"

#define GS_ARENA (16u << 20)
#define GS_TIMEOUT_MS 30000
#define GS_FINAL_WAIT_MS 10000  /* a stopping partition's final sync */
#define GS_REMIND_MS 60000      /* a failure that lasts is said again */
#define GS_GRACE_MS 3000        /* an unreachable side is said after this */
#define GS_SEEN 32              /* messages said in the last GS_REMIND_MS */
#define GS_MAX_MISSES 4096      /* failures kept for a final report */
#define GS_WARN_LEN 1024        /* a partition's final-sync warning */

/* gs_fail() flags: where the step failed and what it leaves unsynced. */
#define GSE_SRC 0x01            /* on the source */
#define GSE_DST 0x02            /* on the destination */
#define GSE_CONN 0x04           /* no connection, or it failed */
#define GSE_ALL 0x08            /* every group of the round (ListGroups) */
#define GSE_REST 0x10           /* this group and those after it */
#define GSE_QUIET 0x20          /* no miss recorded (the caller does) */

enum { GS_SIDE_SRC, GS_SIDE_DST };

struct gscommit {
	char *topic;
	int32_t partition;
	int64_t offset;     /* destination offset to commit */
	char *metadata;     /* NULL: null */
	int dropped;        /* not sent: the partition stopped meanwhile */
};

/* A cluster the sync cannot reach: since when and the last line said
 * (mono ms); said: a line said it (so its return is said too). */
struct gstrouble {
	int64_t since, logged;
	int said;
};

/* What a round carrying final syncs could not sync: group (NULL every
 * group) for topic-partition (topic NULL: every partition), and why. */
struct gsmiss {
	char *group;
	char *topic;
	int32_t partition;
	char *why;
};

/* A partition whose final sync missed something: what (text, without
 * GS_FINAL_LEAD), its DescribeMirrors warning and the note recorded with
 * its stop (groupsync_final_note()); fresh until logged (flush_reports()). */
struct gsfwarn {
	char *topic;
	int32_t partition;
	char *text;
	int fresh;
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
	int listed;         /* the groups were listed (ListGroups answered) */
	int marks_only;     /* nothing to sync: the marks changed */
	int final_round;    /* it carries final syncs (GS_FINAL_RUNNING) */
	char **groups;
	size_t ngroups, groups_cap, gi;
	int round_errors;
	int round_lagging;
	int mark_done;      /* the mirror marks were sent this round */
	uint64_t mark_sig;  /* of the marks last committed, 0 none */
	int64_t mark_at;    /* when (mono ms): renewed hourly, so that the
	                     * broker's offset retention never expires them */
	struct gsmiss *miss;
	size_t nmiss, capmiss;
	/* The group being synced. */
	char *group;
	int fetched;        /* its OffsetFetch answered: commits are known */
	struct gscommit *commits;
	size_t ncommits;
	/* Its OffsetCommit, sent in pieces (OC_PIECE_BYTES): the next
	 * commit to send, the piece in flight [oc_from, oc_next) while
	 * oc_inflight, and the answers' counts so far. */
	size_t oc_next, oc_from;
	int oc_inflight;
	int oc_ok, oc_failed, oc_active, oc_dropped;
	int16_t oc_first;
	int64_t last_ok_wall_ms; /* end of the last round without errors, 0 never */
	int unsupported_logged;  /* the source lacks ListGroups: said once */
	struct gstrouble trouble[2];   /* by GS_SIDE_* */
	struct {
		uint64_t h;
		int64_t at;
	} said[GS_SEEN];
	struct gsfwarn *fw;
	size_t nfw;
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
	gm->oc_next = gm->oc_from = 0;
	gm->oc_inflight = 0;
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
	gm->fetched = 0;
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

static void misses_clear(struct gsmirror *gm)
{
	for (size_t i = 0; i < gm->nmiss; i++) {
		free(gm->miss[i].group);
		free(gm->miss[i].topic);
		free(gm->miss[i].why);
	}
	free(gm->miss);
	gm->miss = NULL;
	gm->nmiss = gm->capmiss = 0;
}

static void fw_drop(struct gsmirror *gm, size_t i)
{
	free(gm->fw[i].topic);
	free(gm->fw[i].text);
	gm->fw[i] = gm->fw[--gm->nfw];
}

static void gm_free(struct gsmirror *gm)
{
	lasts_free(gm->last, gm->nlast);
	lasts_free(gm->next, gm->nnext);
	free(gm->sig);
	groups_clear(gm);
	misses_clear(gm);
	while (gm->nfw > 0)
		fw_drop(gm, gm->nfw - 1);
	free(gm->fw);
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

static int is_marks(const struct gsmirror *gm)
{
	return gm->group != NULL && strcmp(gm->group, MIRRORMARK_GROUP) == 0;
}

static void count_group(struct gsmirror *gm, const char *result)
{
	struct metrics_std *ms = gs_ms(gm);

	if (is_marks(gm))
		return; /* the mirror marks are not a synced group */
	if (ms != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(ms, GROUP_SYNCS), gm->name,
		    result));
}

/* ---- logs --------------------------------------------------------------- */

/* "45 s", "12 min 5 s" */
static const char *dur_text(int64_t ms, char *buf, size_t len)
{
	int64_t s = MAX(ms, 0) / 1000;

	if (s < 120)
		snprintf(buf, len, "%" PRId64 " s", s);
	else
		snprintf(buf, len, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
	return buf;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h != 0 ? h : 1;
}

/* A warning, unless one of the same key (msg when NULL) was said in the
 * last GS_REMIND_MS: a failure that repeats every round is said once a
 * minute, not every round. */
static void say_once(struct gsmirror *gm, const char *msg, const char *key)
{
	uint64_t h = fnv(key != NULL ? key : msg);
	int64_t now = clock_mono_ms();
	size_t old = 0;

	for (size_t i = 0; i < GS_SEEN; i++) {
		if (gm->said[i].h == h) {
			if (now - gm->said[i].at < GS_REMIND_MS) {
				log_debug("mirror %s: %s", gm->name, msg);
				return;
			}
			old = i;
			break;
		}
		if (gm->said[i].at < gm->said[old].at)
			old = i;
	}
	gm->said[old].h = h;
	gm->said[old].at = now;
	log_warnx("mirror %s: %s", gm->name, msg);
}

static const char *side_name(int side)
{
	return side == GS_SIDE_SRC ? "source" : "destination";
}

/* The sync cannot reach a side: said once it has lasted GS_GRACE_MS (a
 * connection being made again is not an outage), unless the health
 * module says the source is down (it logs that), then at most every
 * GS_REMIND_MS. */
static void trouble_fail(struct gsmirror *gm, int side, const char *msg)
{
	struct gstrouble *t = &gm->trouble[side];
	struct pmirror *pm = gm_pmirror(gm);
	int64_t now = clock_mono_ms();
	char d[40];

	if (t->since == 0)
		t->since = now;
	if ((side == GS_SIDE_SRC && pm != NULL && pm->down_since != 0) ||
	    now - t->since < GS_GRACE_MS ||
	    (t->said && now - t->logged < GS_REMIND_MS)) {
		log_debug("mirror %s: consumer-group offset sync: %s", gm->name, msg);
		return;
	}
	if (!t->said)
		log_warnx("mirror %s: consumer-group offset sync cannot reach the "
		    "%s: %s", gm->name, side_name(side), msg);
	else
		log_warnx("mirror %s: consumer-group offset sync still cannot "
		    "reach the %s after %s: %s", gm->name, side_name(side),
		    dur_text(now - t->since, d, sizeof(d)), msg);
	t->said = 1;
	t->logged = now;
}

/* An answer from a side: its trouble, if any, is over. */
static void trouble_ok(struct gsmirror *gm, int side)
{
	struct gstrouble *t = &gm->trouble[side];
	char d[40];

	if (t->since == 0)
		return;
	if (t->said)
		log_info("mirror %s: consumer-group offset sync reaches the %s "
		    "again after %s", gm->name, side_name(side),
		    dur_text(clock_mono_ms() - t->since, d, sizeof(d)));
	t->since = 0;
	t->said = 0;
}

/* ---- final syncs -------------------------------------------------------- */

/* The live partition record of topic-index in pm, or NULL. */
static struct ppart *part_find(struct pmirror *pm, const char *topic,
    int32_t index)
{
	const struct mtopic *mt = mirror_topic_find(pm->m, topic);
	struct ppart *p;

	if (mt == NULL || index < 0 || index >= mt->npart ||
	    mt->parts[index] == NULL)
		return NULL;
	p = pl_part_of(pm->pl, mt->parts[index]);
	return p != NULL && !p->dead ? p : NULL;
}

/* A partition whose committed offsets are synced now. */
static int part_eligible(const struct ppart *p)
{
	if (p->dead || p->mp == NULL || !p->owned || p->src_done < 0 ||
	    p->dst_next < 0)
		return 0;   /* (another instance's: its owner syncs it) */
	/* No proven group membership: another instance may own it by now
	 * and commit from a newer end (pipeline_set_lease()). */
	if (!pipeline_lease_held(p->pm->pl))
		return 0;
	switch (p->mp->state) {
	case MPART_MIRRORING:
		return 1;
	case MPART_STOPPING:
		return p->gs_final != GS_FINAL_DONE;
	default:
		return 0;   /* STOPPED: never again */
	}
}

static void miss_add(struct gsmirror *gm, const char *group,
    const char *topic, int32_t partition, const char *why)
{
	struct gsmiss *m;

	for (size_t i = 0; i < gm->nmiss; i++) {
		m = &gm->miss[i];
		if ((m->group == NULL) == (group == NULL) &&
		    (group == NULL || strcmp(m->group, group) == 0) &&
		    (m->topic == NULL) == (topic == NULL) &&
		    (topic == NULL || (strcmp(m->topic, topic) == 0 &&
		    m->partition == partition)))
			return; /* the first reason stands */
	}
	if (gm->nmiss >= GS_MAX_MISSES)
		return;
	if (gm->nmiss == gm->capmiss) {
		size_t cap = gm->capmiss ? gm->capmiss * 2 : 8;

		if ((m = realloc(gm->miss, cap * sizeof(*m))) == NULL)
			return;
		gm->miss = m;
		gm->capmiss = cap;
	}
	m = &gm->miss[gm->nmiss];
	m->group = group != NULL ? strdup(group) : NULL;
	m->topic = topic != NULL ? strdup(topic) : NULL;
	m->partition = partition;
	m->why = strdup(why);
	if ((group != NULL && m->group == NULL) ||
	    (topic != NULL && m->topic == NULL) || m->why == NULL) {
		free(m->group);
		free(m->topic);
		free(m->why);
		return;
	}
	gm->nmiss++;
}

/* What a failure leaves unsynced, while the round carries final syncs:
 * every group (all), the current group and those after it (rest), the
 * current group for topic-partition, or for its known commits (its
 * OffsetFetch answered), or for every partition. */
static void miss_note(struct gsmirror *gm, int flags, const char *topic,
    int32_t partition, const char *why)
{
	if (!gm->final_round || (flags & GSE_QUIET))
		return;
	if ((flags & GSE_ALL) || gm->group == NULL) {
		miss_add(gm, NULL, NULL, -1, why);
		return;
	}
	if (topic != NULL) {
		miss_add(gm, gm->group, topic, partition, why);
	} else if (gm->fetched) {
		/* Those not answered yet (earlier pieces were). */
		for (size_t i = gm->oc_from; i < gm->ncommits; i++)
			if (!gm->commits[i].dropped)
				miss_add(gm, gm->group, gm->commits[i].topic,
				    gm->commits[i].partition, why);
	} else {
		miss_add(gm, gm->group, NULL, -1, why);
	}
	if (flags & GSE_REST)
		for (size_t i = gm->gi; i < gm->ngroups; i++)
			if (gm->groups[i] != NULL)
				miss_add(gm, gm->groups[i], NULL, -1, why);
}

/*
 * A failed step: counted in mirrord_group_sync_errors_total by what,
 * logged (trouble_fail() for a connection, say_once() else), and noted for
 * the round's final syncs (miss_note(), flags, topic-partition).
 */
static void gs_fail(struct gsmirror *gm, int flags, const char *what,
    const char *topic, int32_t partition, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void gs_fail(struct gsmirror *gm, int flags, const char *what,
    const char *topic, int32_t partition, const char *fmt, ...)
{
	char msg[600], line[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (is_marks(gm)) {
		/* The marks are retried next round; a failed one holds no
		 * group's final sync back. */
		snprintf(line, sizeof(line), "the mirror marks (group %s) on the "
		    "destination: %s", MIRRORMARK_GROUP, msg);
		say_once(gm, line, NULL);
		return;
	}
	gm->round_errors++;
	if (gs_ms(gm) != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(gs_ms(gm), GROUP_SYNC_ERRORS),
		    gm->name, what));
	if ((flags & GSE_CONN) && (flags & (GSE_SRC | GSE_DST))) {
		trouble_fail(gm, (flags & GSE_SRC) ? GS_SIDE_SRC : GS_SIDE_DST, msg);
	} else {
		/* The same failure of every group (an ACL missing, say) is
		 * said once, naming the first. */
		size_t glen = gm->group != NULL ? strlen(gm->group) : 0;
		char key[700];

		snprintf(line, sizeof(line), "consumer-group offset sync: %s", msg);
		snprintf(key, sizeof(key), "%s", msg);
		if (glen > 0 && strncmp(msg, "group ", 6) == 0 &&
		    strncmp(msg + 6, gm->group, glen) == 0)
			snprintf(key, sizeof(key), "group *%s", msg + 6 + glen);
		say_once(gm, line, key);
	}
	miss_note(gm, flags, topic, partition, msg);
}

static int miss_applies(const struct gsmiss *m, const struct ppart *p)
{
	return m->topic == NULL || (m->partition == p->index &&
	    strcmp(m->topic, p->topic) == 0);
}

/* Appends "; " and text to buf (of len), "..." when it is full. */
static void text_cat(char *buf, size_t len, const char *text)
{
	size_t at = strlen(buf);

	if (at + 8 >= len) {
		return;
	}
	snprintf(buf + at, len - at, "%s%s", at > 0 ? "; " : "", text);
	if (strlen(buf) + 1 >= len)
		memcpy(buf + len - 4, "...", 4);
}

#define GS_FINAL_LEAD "consumer-group offsets not synced at the stop " \
	"(the destination keeps those of the last sync before it; never " \
	"synced again)"

/*
 * The end of p's final sync (GS_FINAL_DONE from now on): what the round
 * noted for p, plus extra (groups not reached, NULL none).  Nothing
 * missed: p's old report goes.  Else the report: p's warning, counted,
 * logged at the next tick with the others of the moment (flush_reports()).
 */
static void final_settle(struct gsmirror *gm, struct ppart *p,
    const char *extra)
{
	char text[GS_WARN_LEN] = "";
	struct gsfwarn *w = NULL, *nw;

	p->gs_final = GS_FINAL_DONE;
	for (size_t i = 0; i < gm->nmiss; i++) {
		const struct gsmiss *m = &gm->miss[i];
		char one[800];

		if (!miss_applies(m, p))
			continue;
		if (m->group == NULL)
			snprintf(one, sizeof(one), "every group: %s", m->why);
		else if (strncmp(m->why, "group ", 6) == 0)
			snprintf(one, sizeof(one), "%s", m->why);
		else
			snprintf(one, sizeof(one), "group %s: %s", m->group, m->why);
		if (strstr(text, one) == NULL)
			text_cat(text, sizeof(text), one);
	}
	if (extra != NULL && extra[0] != '\0')
		text_cat(text, sizeof(text), extra);
	for (size_t i = 0; i < gm->nfw; i++)
		if (gm->fw[i].partition == p->index &&
		    strcmp(gm->fw[i].topic, p->topic) == 0)
			w = &gm->fw[i];
	if (text[0] == '\0') {
		if (w != NULL)
			fw_drop(gm, (size_t)(w - gm->fw));
		log_debug("mirror %s: %s-%" PRId32 ": consumer-group offsets synced "
		    "at the stop", gm->name, p->topic, p->index);
		return;
	}
	if (gs_ms(gm) != NULL)
		metrics_counter_inc(METRICS_SERIES(MSTD(gs_ms(gm),
		    GROUP_SYNC_FINAL_MISSED), gm->name));
	if (w == NULL) {
		if ((nw = realloc(gm->fw, (gm->nfw + 1) * sizeof(*nw))) == NULL)
			goto said;
		gm->fw = nw;
		w = &gm->fw[gm->nfw];
		memset(w, 0, sizeof(*w));
		if ((w->topic = strdup(p->topic)) == NULL)
			goto said;
		w->partition = p->index;
		gm->nfw++;
	}
	free(w->text);
	if ((w->text = strdup(text)) == NULL) {
		fw_drop(gm, (size_t)(w - gm->fw));
		goto said;
	}
	w->fresh = 1;
	return;
said:
	log_warnx("mirror %s: %s-%" PRId32 ": %s: %s", gm->name, p->topic,
	    p->index, GS_FINAL_LEAD, text);
}

/* One warning line per text for the reports made since the last tick,
 * naming their partitions. */
static void flush_reports(struct gsmirror *gm)
{
	for (size_t i = 0; i < gm->nfw; i++) {
		char parts[600] = "";
		size_t n = 0, more = 0;

		if (!gm->fw[i].fresh)
			continue;
		for (size_t k = i; k < gm->nfw; k++) {
			struct gsfwarn *w = &gm->fw[k];
			size_t at = strlen(parts);

			if (!w->fresh || strcmp(w->text, gm->fw[i].text) != 0)
				continue;
			if (k != i)
				w->fresh = 0;
			if (at + strlen(w->topic) + 20 < sizeof(parts))
				snprintf(parts + at, sizeof(parts) - at, "%s%s-%" PRId32,
				    n++ > 0 ? ", " : "", w->topic, w->partition);
			else
				more++;
		}
		gm->fw[i].fresh = 0;
		if (more > 0) {
			size_t at = strlen(parts);

			snprintf(parts + at, sizeof(parts) - at, " and %zu more", more);
		}
		log_warnx("mirror %s: %s: %s: %s", gm->name, parts, GS_FINAL_LEAD,
		    gm->fw[i].text);
	}
}

/* 1 while the OffsetCommit in flight names p: it may still be written. */
static int oc_covers(const struct gsmirror *gm, const struct ppart *p)
{
	if (!gm->oc_inflight || is_marks(gm))
		return 0;
	for (size_t i = gm->oc_from; i < gm->oc_next && i < gm->ncommits; i++)
		if (!gm->commits[i].dropped && gm->commits[i].partition == p->index &&
		    strcmp(gm->commits[i].topic, p->topic) == 0)
			return 1;
	return 0;
}

/* Appends name to the list in buf (", " between), counting it in *n, or
 * in *more when it does not fit. */
static void name_cat(char *buf, size_t len, const char *name, size_t *n,
    size_t *more)
{
	size_t l = strlen(buf);

	if (l + strlen(name) + 24 < len)
		snprintf(buf + l, len - l, "%s%s", (*n)++ > 0 ? ", " : "", name);
	else
		(*more)++;
}

/* What the round had not done for p when its time was up, in buf. */
static void cut_text(const struct gsmirror *gm, const struct ppart *p,
    char *buf, size_t len)
{
	size_t n = 0, more = 0;
	int cur = 0;

	buf[0] = '\0';
	if (p->gs_final == GS_FINAL_WANT) {
		snprintf(buf, len, "every group: no round could start within %d s "
		    "of the stop (the one before had not ended)",
		    GS_FINAL_WAIT_MS / 1000);
		return;
	}
	if (gm->lg_pending > 0) {
		snprintf(buf, len, "every group: ListGroups on the source did not "
		    "answer within %d s of the stop", GS_FINAL_WAIT_MS / 1000);
		return;
	}
	/* The current group: not read yet, or p's commit not sent yet. */
	if (gm->group != NULL && !is_marks(gm)) {
		if (!gm->fetched)
			cur = 1;
		for (size_t i = gm->oc_next; !cur && i < gm->ncommits; i++)
			cur = gm->commits[i].partition == p->index &&
			    strcmp(gm->commits[i].topic, p->topic) == 0;
	}
	snprintf(buf, len, "groups not synced within %d s of the stop: ",
	    GS_FINAL_WAIT_MS / 1000);
	if (cur)
		name_cat(buf, len, gm->group, &n, &more);
	for (size_t i = gm->gi; i < gm->ngroups; i++)
		if (gm->groups[i] != NULL)
			name_cat(buf, len, gm->groups[i], &n, &more);
	if (n == 0 && more == 0) {
		buf[0] = '\0';
		return;
	}
	if (more > 0) {
		size_t l = strlen(buf);

		snprintf(buf + l, len - l, " and %zu more", more);
	}
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
 * too).  An answer at all: the side is reachable.  -1 after gs_fail() for
 * a transport error or a malformed answer ("group g: OffsetFetch on the
 * source: malformed answer").
 */
static int gs_answer(struct gsmirror *gm, const struct gsreq *r,
    int16_t api_key, int err, const char *errstr, struct kr *body,
    size_t arena_size, void *resp, struct karena **a)
{
	const struct kp_api *api = kp_api_find(api_key);
	const char *side = r->is_dst ? "destination" : "source";
	int flags = (r->is_dst ? GSE_DST : GSE_SRC) |
	    (api_key == KP_API_LIST_GROUPS ? GSE_ALL : 0);
	char what[300] = "";

	if (api_key != KP_API_LIST_GROUPS)
		snprintf(what, sizeof(what), "group %s: ", gm->group);
	if (err != KCONN_E_OK) {
		gs_fail(gm, flags | GSE_CONN, api->name, NULL, -1, "%s%s on the %s: "
		    "%s", what, api->name, side, errstr);
		return -1;
	}
	trouble_ok(gm, r->is_dst ? GS_SIDE_DST : GS_SIDE_SRC);
	if ((*a = karena_new(arena_size)) == NULL ||
	    api->response_decode(body, *a, r->version, resp) < 0 || body->err) {
		gs_fail(gm, flags, api->name, NULL, -1, "%s%s on the %s: malformed "
		    "answer", what, api->name, side);
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
	int flags = (is_dst ? GSE_DST : GSE_SRC) |
	    (api_key == KP_API_LIST_GROUPS ? GSE_ALL : 0);

	if (api_key == KP_API_LIST_GROUPS)
		snprintf(what, sizeof(what), "every group");
	else
		snprintf(what, sizeof(what), "group %s", gm->group);

	if (v < 0) {
		gs_fail(gm, flags, api, NULL, -1, "%s: the %s broker %s does not "
		    "support %s v%d-%d", what, is_dst ? "destination" : "source",
		    kconn_name(c), api, (int)vmin, (int)vmax);
		return -1;
	}
	if ((r = req_new(gm, (int16_t)v, is_dst)) == NULL) {
		gs_fail(gm, flags, api, NULL, -1, "%s: %s: out of memory", what, api);
		return -1;
	}
	if (kconn_send_msg(c, api_key, (int16_t)v, msg, 0, GS_TIMEOUT_MS, done,
	    r, err, sizeof(err)) != 0) {
		free(r);
		gs_fail(gm, flags | GSE_CONN, api, NULL, -1, "%s: %s to %s: %s",
		    what, api, kconn_name(c), err);
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
		gs_fail(gm, GSE_SRC | GSE_ALL, "ListGroups", NULL, -1, "ListGroups "
		    "on the source broker %s: %s", kconn_name(c),
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
	gm->listed = 1;
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
		return; /* nothing is ever synced: no final sync is missed */
	}
	kp_list_groups_request_init(&req);
	if (gs_send(gm, c, KP_API_LIST_GROUPS, 0, 4, 0, &req, lg_done) == 0)
		gm->lg_pending++;
}

static size_t marks_build(struct gsmirror *gm, struct pmirror *pm);
static uint64_t marks_sig(const struct gsmirror *gm);

/* 1 when the mirror marks differ from those last committed. */
static int marks_changed(struct gsmirror *gm, struct pmirror *pm)
{
	int changed = marks_build(gm, pm) > 0 && marks_sig(gm) != gm->mark_sig;

	commits_clear(gm);
	return changed;
}

/* Why the source is not asked: the health module's words. */
static void source_down_why(struct gsmirror *gm, struct pmirror *pm,
    char *buf, size_t len)
{
	struct pipeline_mirror_health h;

	if (pipeline_mirror_health(gm->gs->pl, pm->name, &h) == 0 &&
	    h.reason[0] != '\0')
		snprintf(buf, len, "the source is not asked: %s", h.reason);
	else
		snprintf(buf, len, "the source is not asked: it cannot be read");
}

/*
 * 1 if a round started; 0 if there is nothing to sync yet.  The stopping
 * partitions waiting for their final sync are covered by it (RUNNING).  A
 * round with nothing to sync writes the mirror marks alone when they
 * changed (a topic stopped: a failback reads where).
 */
static int round_start(struct gsmirror *gm, struct pmirror *pm)
{
	struct pcluster *src = pm->src;
	int any = 0;

	groups_clear(gm);
	misses_clear(gm);
	gm->round_errors = 0;
	gm->round_lagging = 0;
	gm->mark_done = 0;
	gm->listed = 0;
	gm->marks_only = 0;
	gm->final_round = 0;
	for (size_t i = 0; i < pm->nparts; i++) {
		struct ppart *p = pm->parts[i];

		if (!part_eligible(p))
			continue;
		any = 1;
		if (p->gs_final == GS_FINAL_WANT) {
			p->gs_final = GS_FINAL_RUNNING; /* covered by this round */
			gm->final_round = 1;
		}
	}
	if (!any) {
		if (!marks_changed(gm, pm))
			return 0; /* nothing mirrored (yet) */
		gm->marks_only = 1;
	}
	gm->running = 1;
	gm->lg_pending = 0;
	if (gm->marks_only || pm->conf->groups_include.n == 0) {
		group_next(gm); /* no group wanted: only the mirror marks */
		return 1;
	}
	if (pm->down_since != 0) {
		/* The health module says the source cannot be read, and logs
		 * it: no group is asked for. */
		char why[1300];

		source_down_why(gm, pm, why, sizeof(why));
		gm->round_errors++;
		miss_note(gm, GSE_ALL, NULL, -1, why);
		log_debug("mirror %s: consumer-group offset sync: %s", gm->name, why);
		group_next(gm);
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
			gs_fail(gm, GSE_SRC | GSE_CONN | GSE_ALL, "ListGroups", NULL, -1,
			    "no connection to the source is ready");
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
	/* Groups handled this round in sorted order: next is sorted.  A
	 * round that listed none keeps what the last one learnt. */
	if (gm->listed) {
		lasts_free(gm->last, gm->nlast);
		gm->last = gm->next;
		gm->nlast = gm->nnext;
	} else {
		lasts_free(gm->next, gm->nnext);
	}
	gm->next = NULL;
	gm->nnext = gm->capnext = 0;
	if (pm != NULL) {
		int settled = 0;

		for (size_t i = 0; i < pm->nparts; i++) {
			struct ppart *p = pm->parts[i];

			if (p->gs_final == GS_FINAL_RUNNING && !p->dead) {
				final_settle(gm, p, NULL);
				settled = 1;
			}
		}
		/* The marks alone: partitions to sync are looked for soon, not
		 * an interval later (as when there is nothing to sync). */
		gm->next_at = clock_mono_ms() + (gm->marks_only ?
		    MIN(pm->conf->groups_sync_interval_ms, 1000) :
		    pm->conf->groups_sync_interval_ms);
		if (settled)
			pl_kick(gm->gs->pl); /* they go STOPPED now */
	}
	misses_clear(gm);
	gm->final_round = 0;
	if (gm->round_errors == 0 && !gm->marks_only)
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
	int sflag = r->is_dst ? GSE_DST : GSE_SRC;

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
		gs_fail(gm, sflag, "FindCoordinator", NULL, -1, "group %s: "
		    "FindCoordinator on the %s: %s", gm->group, side,
		    kerr_name(resp.error_code));
		goto next;
	}
	coord = broker_conn_by_id(r->is_dst ? gm->gs->pl->dst : pm->src,
	    resp.node_id);
	if (coord == NULL) {
		pcluster_want_metadata(r->is_dst ? gm->gs->pl->dst : pm->src);
		gs_fail(gm, sflag | GSE_CONN, "FindCoordinator", NULL, -1, "group "
		    "%s: no ready connection to its coordinator, %s broker %" PRId32,
		    gm->group, side, resp.node_id);
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

/* The groups after the current one are not tried this round (they would
 * fail alike): noted for the final syncs, then the round ends. */
static void round_cut(struct gsmirror *gm)
{
	char why[400];

	snprintf(why, sizeof(why), "not tried: the round ended at group %s",
	    gm->group);
	for (size_t i = gm->gi; gm->final_round && i < gm->ngroups; i++)
		if (gm->groups[i] != NULL)
			miss_add(gm, gm->groups[i], NULL, -1, why);
	gm->gi = gm->ngroups;
	group_next(gm);
}

static void fc_send(struct gsmirror *gm, struct kconn *ctl, int is_dst)
{
	struct kp_find_coordinator_request req;

	if (ctl == NULL) {
		gs_fail(gm, (is_dst ? GSE_DST : GSE_SRC) | GSE_CONN,
		    "FindCoordinator", NULL, -1, "group %s: no ready connection to "
		    "the %s: the round ends here", gm->group, is_dst ?
		    "destination" : "source");
		round_cut(gm); /* the others would fail alike (and recurse) */
		return;
	}
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(gm->group);
	req.key_type = 0;
	if (gs_send(gm, ctl, KP_API_FIND_COORDINATOR, 0, 3, is_dst, &req,
	    fc_done) != 0)
		round_cut(gm); /* the other groups would fail alike */
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
		gs_fail(gm, GSE_SRC, "OffsetFetch", NULL, -1, "group %s: "
		    "OffsetFetch on the source: %s", gm->group,
		    kerr_name(resp.error_code));
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
				gs_fail(gm, GSE_SRC, "OffsetFetch", topic,
				    pp->partition_index, "group %s: %s-%" PRId32 ": %s",
				    gm->group, topic, pp->partition_index,
				    kerr_name(pp->error_code));
				continue;
			}
			kind = groupsync_translate(p->mp->map, p->src_done,
			    p->dst_next, p->dst_log_start, pp->committed_offset, &d);
			if (kind == GS_INVALID) {
				gs_fail(gm, 0, "translate", topic, pp->partition_index,
				    "group %s: %s-%" PRId32 ": the translation map is "
				    "invalid or memory ran out", gm->group, topic,
				    pp->partition_index);
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
	gm->fetched = 1;
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
		gs_fail(gm, GSE_DST, "DescribeGroups", NULL, -1, "group %s: "
		    "DescribeGroups on the destination: malformed answer", gm->group);
		goto next;
	}
	/* GROUP_ID_NOT_FOUND (69): no such group yet, committing creates it. */
	if (resp.groups[0].error_code != 0 && resp.groups[0].error_code != 69) {
		gs_fail(gm, GSE_DST, "DescribeGroups", NULL, -1, "group %s: "
		    "DescribeGroups on the destination: %s", gm->group,
		    kerr_name(resp.groups[0].error_code));
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

/* The group's OffsetCommit is over (every piece answered, or none left to
 * send): counted, remembered when all went in, and the next group. */
static void oc_finish(struct gsmirror *gm)
{
	if (gm->oc_failed > 0)
		gs_fail(gm, GSE_DST | GSE_QUIET, "OffsetCommit", NULL, -1, "group %s: "
		    "OffsetCommit on the destination refused %d partitions: %s",
		    gm->group, gm->oc_failed, kerr_name(gm->oc_first));
	else if (gm->oc_active > 0)
		count_group(gm, "active");
	else if (gm->oc_ok > 0)
		count_group(gm, "synced");
	else
		count_group(gm, "nothing"); /* every partition stopped meanwhile */
	if (gm->oc_failed == 0 && gm->oc_active == 0 && is_marks(gm))
		gm->mark_sig = marks_sig(gm), gm->mark_at = clock_mono_ms();
	if (gm->oc_failed == 0 && gm->oc_active == 0 && gm->oc_dropped == 0 &&
	    gm->sig != NULL) {
		last_keep(gm, gm->sig, gm->siglen);
		gm->sig = NULL;
	}
	log_debug("mirror %s: group %s: %d offsets committed to the destination",
	    gm->name, gm->group, gm->oc_ok);
	group_next(gm);
}

static void oc_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct gsreq *r = arg;
	struct gsmirror *gm = r->gm;
	struct kp_offset_commit_response resp;
	struct karena *a = NULL;
	int ok;

	if (req_gone(r)) {
		free(r);
		return;
	}
	gm->oc_inflight = 0;
	if (gs_answer(gm, r, KP_API_OFFSET_COMMIT, err, errstr, body, GS_ARENA,
	    &resp, &a) != 0) {
		karena_free(a);
		free(r);
		group_next(gm);
		return;
	}
	ok = gm->oc_ok;
	for (int32_t t = 0; t < resp.topics_n; t++)
		for (int32_t i = 0; i < resp.topics[t].partitions_n; i++) {
			int16_t e = resp.topics[t].partitions[i].error_code;
			char topic[256], why[400];

			if (e == 0) {
				gm->oc_ok++;
			} else if (e == 25 || e == 22 || e == 27 || e == 68) {
				/* UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
				 * REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP:
				 * members joined since DescribeGroups (or a
				 * KIP-848 group that DescribeGroups does not
				 * describe); the broker kept their offsets. */
				gm->oc_active++;
			} else {
				gm->oc_failed++;
				if (gm->oc_first == 0)
					gm->oc_first = e;
				if (!gm->final_round || is_marks(gm))
					continue;
				snprintf(topic, sizeof(topic), "%.*s",
				    (int)MAX(resp.topics[t].name.len, 0),
				    resp.topics[t].name.p ? resp.topics[t].name.p : "");
				snprintf(why, sizeof(why), "group %s: OffsetCommit on the "
				    "destination refused %s-%" PRId32 ": %s", gm->group,
				    topic, resp.topics[t].partitions[i].partition_index,
				    kerr_name(e));
				miss_add(gm, gm->group, topic,
				    resp.topics[t].partitions[i].partition_index, why);
			}
		}
	if (gm->oc_ok > ok && gs_ms(gm) != NULL && !is_marks(gm))
		metrics_counter_add(METRICS_SERIES(MSTD(gs_ms(gm),
		    GROUP_OFFSETS_COMMITTED), gm->name), gm->oc_ok - ok);
	karena_free(a);
	free(r);
	if (gm->oc_next < gm->ncommits)
		oc_send(gm, c); /* the next piece, on the same connection */
	else
		oc_finish(gm);
}

/*
 * The group's commits from gm->oc_next on, as many as fit in one piece:
 * a broker writes one OffsetCommit's offsets as one batch of its offsets
 * topic, whose size is capped (message.max.bytes, 1 MiB by default;
 * Kafka 4 refuses the whole commit, UNKNOWN_SERVER_ERROR, when it is
 * over), and a mirror of 10,000 partitions marks every one (about 2 MB).
 * 32 KiB pieces stay under any limit a broker is likely to have; the
 * estimate counts a record's framing generously.  oc_done() sends the
 * next piece on the same connection.  A commit of a partition no longer
 * synced (it stopped since its group's OffsetFetch, or its final sync
 * ran out of time) is dropped here: nothing of the old mirror is written
 * once a partition is STOPPED.
 */
#define OC_PIECE_BYTES (32 * 1024)

static void oc_send(struct gsmirror *gm, struct kconn *c)
{
	struct kp_offset_commit_request req;
	struct kp_offset_commit_request_topic *topics = NULL;
	struct kp_offset_commit_request_partition *parts = NULL;
	struct pmirror *pm = gm_pmirror(gm);
	size_t from = gm->oc_next, end = from, bytes = 0, np = 0;
	int32_t nt = 0;

	if (from == 0) {
		gm->oc_ok = gm->oc_failed = gm->oc_active = gm->oc_dropped = 0;
		gm->oc_first = 0;
	}
	if (pm == NULL) {
		group_next(gm);
		return;
	}
	/* Its record in the offsets topic: the key (group, topic,
	 * partition), the value (offset, metadata, times), the framing. */
	while (end < gm->ncommits && (np == 0 || bytes < OC_PIECE_BYTES)) {
		struct gscommit *gc = &gm->commits[end++];
		struct ppart *p;

		if (!is_marks(gm) && ((p = part_find(pm, gc->topic,
		    gc->partition)) == NULL || !part_eligible(p))) {
			gc->dropped = 1;
			gm->oc_dropped++;
			log_debug("mirror %s: group %s: %s-%" PRId32 " is not synced "
			    "any more (stopped): its commit is dropped", gm->name,
			    gm->group, gc->topic, gc->partition);
			continue;
		}
		np++;
		bytes += 64 + strlen(gm->group) + strlen(gc->topic) +
		    (gc->metadata != NULL ? strlen(gc->metadata) : 0);
	}
	gm->oc_from = from;
	gm->oc_next = end;
	if (np == 0) {
		oc_finish(gm);
		return;
	}
	topics = calloc(np, sizeof(*topics));
	parts = calloc(np, sizeof(*parts));
	if (topics == NULL || parts == NULL) {
		gs_fail(gm, 0, "OffsetCommit", NULL, -1, "group %s: OffsetCommit: "
		    "out of memory", gm->group);
		goto fail;
	}
	/* Commits arrive grouped by topic (one OffsetFetch topic at a time). */
	np = 0;
	for (size_t i = from; i < end; i++) {
		const struct gscommit *gc = &gm->commits[i];
		struct kp_offset_commit_request_partition *pp = &parts[np];

		if (gc->dropped)
			continue;
		np++;
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
	gm->oc_inflight = 1;
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
				    mpart_nanchors(mp) == 0);
			/* Where the destination's own records begin (a
			 * failback of a topic not copied offset for offset
			 * needs it, pipeline/prove.c). */
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
	gm->fetched = 0;
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
	if (gs->pl->ms != NULL) {
		metrics_series_set_fn(METRICS_SERIES(MSTD(gs->pl->ms, GROUP_SYNC_AGE),
		    gm->name), age_fn, gm);
		metrics_counter_add(METRICS_SERIES(MSTD(gs->pl->ms,
		    GROUP_SYNC_FINAL_MISSED), gm->name), 0);
	}
	return gm;
}

static struct gsmirror *gm_find(const struct groupsync *gs, const char *name)
{
	for (size_t i = 0; i < gs->n; i++)
		if (strcmp(gs->ms[i]->name, name) == 0)
			return gs->ms[i];
	return NULL;
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

		if (pm->dead || pm->m == NULL)
			continue;
		/* Known (its series exported) from the mirror's start. */
		if ((gm = gm_get(gs, pm->name)) == NULL)
			continue;
		flush_reports(gm);
		if (gm->running || pm->conf == NULL || pm->src == NULL)
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

int groupsync_final(struct groupsync *gs, struct ppart *p, int64_t now)
{
	struct pmirror *pm = p->pm;
	struct gsmirror *gm;
	char why[700];

	if (gs == NULL || pm->conf == NULL)
		return 0;
	if ((gm = gm_get(gs, pm->name)) == NULL) {
		p->gs_final = GS_FINAL_DONE; /* out of memory: nothing to say it */
		return 0;
	}
	switch (p->gs_final) {
	case GS_FINAL_NONE:
		/* A new stop: the report of an earlier one goes. */
		for (size_t i = 0; i < gm->nfw; i++)
			if (gm->fw[i].partition == p->index &&
			    strcmp(gm->fw[i].topic, p->topic) == 0) {
				fw_drop(gm, i);
				break;
			}
		if (pm->conf->groups_include.n == 0) {
			p->gs_final = GS_FINAL_DONE; /* no group is synced */
			return 0;
		}
		/* What can never start is said at once. */
		why[0] = '\0';
		if (pm->src == NULL)
			snprintf(why, sizeof(why), "every group: the mirror's source "
			    "client is not ready: %s", pm->unusable[0] != '\0' ?
			    pm->unusable : "(no reason known)");
		else if (p->src_done < 0 || p->dst_next < 0)
			snprintf(why, sizeof(why), "every group: where the copy "
			    "ended is not known to this process (the partition was "
			    "not copied since mirrord started)");
		else if (gs->pl->draining || gs->dying)
			snprintf(why, sizeof(why), "every group: mirrord is shutting "
			    "down");
		if (why[0] != '\0') {
			final_settle(gm, p, why);
			return 0;
		}
		p->gs_final = GS_FINAL_WANT;
		p->gs_final_at = now + GS_FINAL_WAIT_MS;
		gm->kicked = 1;
		return 1;
	case GS_FINAL_WANT:
	case GS_FINAL_RUNNING:
		if (now < p->gs_final_at && !gs->pl->draining && !gs->dying)
			return 1;
		if (oc_covers(gm, p))
			return 1; /* its answer says whether it was written */
		cut_text(gm, p, why, sizeof(why));
		final_settle(gm, p, why[0] != '\0' ? why : NULL);
		return 0;
	default:
		return oc_covers(gm, p);
	}
}

/* p's report of its final sync, or NULL. */
static const struct gsfwarn *fw_of(const struct groupsync *gs,
    const struct ppart *p)
{
	const struct gsmirror *gm;

	if (gs == NULL || p == NULL || (gm = gm_find(gs, p->pm->name)) == NULL)
		return NULL;
	for (size_t i = 0; i < gm->nfw; i++)
		if (gm->fw[i].partition == p->index &&
		    strcmp(gm->fw[i].topic, p->topic) == 0)
			return &gm->fw[i];
	return NULL;
}

const char *groupsync_final_note(struct groupsync *gs, const struct ppart *p)
{
	const struct gsfwarn *w = fw_of(gs, p);

	return w != NULL ? w->text : NULL;
}

int groupsync_warning(struct groupsync *gs, const struct mpart *mp,
    const struct ppart *p, char *buf, size_t len)
{
	const struct gsfwarn *w;

	if (mp == NULL || (mp->state != MPART_STOPPING &&
	    mp->state != MPART_STOPPED))
		return 0;
	/* This process's report, else the one recorded with the stop (a
	 * restart since, or another instance's stop). */
	if ((w = fw_of(gs, p)) != NULL) {
		snprintf(buf, len, "%s: %s", GS_FINAL_LEAD, w->text);
		return 1;
	}
	if (mp->state == MPART_STOPPED && mp->has_failover &&
	    mp->failover_note != NULL) {
		snprintf(buf, len, "%s: %s", GS_FINAL_LEAD, mp->failover_note);
		return 1;
	}
	return 0;
}
