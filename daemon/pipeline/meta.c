/*
 * pipeline/meta.c: the metadata the data plane learns from Metadata answers
 * (a mirror's source cluster id, topics its patterns discover, partitions
 * a source topic grows, topic identities, a source topic deleted, a
 * partition not set up yet that must fail), written without blocking the
 * loop.
 *
 * A pass over a Metadata answer only notes what it learnt (pmeta_defer());
 * at its end pmeta_flush() asks mstate for an exclusive turn
 * (mstate_excl_begin(): the operator's commands take turns the same way,
 * in order), and when the turn comes every noted change is checked again
 * against the model, which by then holds every write before it (a mirror
 * deleted meanwhile, a topic added by an operator, an identity recorded by
 * another pass: the change is dropped), queued in the turn's batch and
 * written as one group: one fsync or one replicated round trip for the
 * whole pass, and the loop goes on copying while it is written.  The model
 * shows the changes once they are durable (the hooks then start copying
 * the new partitions).  Passes that end while a write is waiting or in
 * flight note theirs for the next one; a change noted twice is kept once
 * (a hash of what it changes), so a pass repeated while the log is slow
 * does not grow the list.  A write that fails is logged; the next pass
 * learns the same changes again.  Realigning (pipeline/ident.c): a topic added
 * again onto another destination topic has its partitions' write history
 * dropped (a topic-realign RESET) before that topic's id is recorded, and
 * the deletion of the operator's realign is recorded (DELETED).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kerr.h"
#include "log.h"
#include "mstate.h"
#include "pipe_int.h"

struct pmeta_w {
	int kind;           /* PMETA_* */
	int which;          /* PMETA_IDENT: MTOPIC_IDENT_* */
	int32_t npart;      /* PMETA_GROW, PMETA_ADD */
	char *mirror;
	char *topic;        /* NULL for PMETA_SOURCE_ID */
	char *value;        /* PMETA_SOURCE_ID, PMETA_IDENT, PMETA_REALIGN_* */
	uint64_t hash;
};

enum { TURN_NONE, TURN_WAITING, TURN_FLIGHT };

/* What a change is about: a topic discovered is one change whichever
 * mirror found it first (two mirrors' patterns may match it; the model
 * gives a topic to one mirror). */
static uint64_t key_hash(int kind, int which, const char *mirror,
    const char *topic)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	const char *parts[2] = { kind == PMETA_ADD ? "" : mirror,
	    topic != NULL ? topic : "" };

	h = (h ^ (uint64_t)kind) * UINT64_C(0x100000001b3);
	h = (h ^ (uint64_t)which) * UINT64_C(0x100000001b3);
	for (int k = 0; k < 2; k++) {
		for (const char *c = parts[k]; *c != '\0'; c++)
			h = (h ^ (uint8_t)*c) * UINT64_C(0x100000001b3);
		h = (h ^ 0xff) * UINT64_C(0x100000001b3);
	}
	return h;
}

static int key_same(const struct pmeta_w *w, int kind, int which,
    const char *mirror, const char *topic)
{
	if (w->kind != kind || w->which != which)
		return 0;
	if (kind != PMETA_ADD && strcmp(w->mirror, mirror) != 0)
		return 0;
	if ((w->topic == NULL) != (topic == NULL))
		return 0;
	return topic == NULL || strcmp(w->topic, topic) == 0;
}

/* The table holds index + 1 of each noted change (0: empty), at most
 * half full. */
static void table_put(struct pipeline *pl, size_t idx)
{
	size_t mask = pl->mw_tcap - 1, i = (size_t)pl->mw[idx].hash & mask;

	while (pl->mw_table[i] != 0)
		i = (i + 1) & mask;
	pl->mw_table[i] = idx + 1;
}

static int table_grow(struct pipeline *pl)
{
	size_t cap = pl->mw_tcap != 0 ? pl->mw_tcap * 2 : 64;
	size_t *t = calloc(cap, sizeof(*t));

	if (t == NULL)
		return -1;
	free(pl->mw_table);
	pl->mw_table = t;
	pl->mw_tcap = cap;
	for (size_t i = 0; i < pl->nmw; i++)
		table_put(pl, i);
	return 0;
}

static struct pmeta_w *noted(const struct pipeline *pl, uint64_t h,
    int kind, int which, const char *mirror, const char *topic)
{
	size_t mask = pl->mw_tcap - 1;

	if (pl->mw_tcap == 0)
		return NULL;
	for (size_t i = (size_t)h & mask; pl->mw_table[i] != 0;
	    i = (i + 1) & mask) {
		struct pmeta_w *w = &pl->mw[pl->mw_table[i] - 1];

		if (w->hash == h && key_same(w, kind, which, mirror, topic))
			return w;
	}
	return NULL;
}

int pmeta_noted(const struct pipeline *pl, int kind, const char *mirror,
    const char *topic, int which)
{
	uint64_t h = key_hash(kind, which, mirror, topic);

	if (noted(pl, h, kind, which, mirror, topic) != NULL)
		return 1;
	/* The turn's write in flight (a short list, asked about rarely: a
	 * topic missing from an answer). */
	for (size_t i = 0; i < pl->nmw_fl; i++)
		if (pl->mw_fl[i].hash == h &&
		    key_same(&pl->mw_fl[i], kind, which, mirror, topic))
			return 1;
	return 0;
}

/* Frees n noted changes (their strings; not the array). */
static void notes_fini(struct pmeta_w *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].mirror);
		free(v[i].topic);
		free(v[i].value);
	}
}

static void flight_free(struct pipeline *pl)
{
	notes_fini(pl->mw_fl, pl->nmw_fl);
	free(pl->mw_fl);
	pl->mw_fl = NULL;
	pl->nmw_fl = 0;
}

void pmeta_defer(struct pipeline *pl, int kind, const char *mirror,
    const char *topic, int which, const char *value, int32_t npart)
{
	uint64_t h = key_hash(kind, which, mirror, topic);
	struct pmeta_w *w;

	if ((w = noted(pl, h, kind, which, mirror, topic)) != NULL) {
		/* Noted already: growth keeps the largest count, the rest
		 * the first value learnt. */
		if (kind == PMETA_GROW && npart > w->npart)
			w->npart = npart;
		return;
	}
	if ((pl->nmw + 1) * 2 > pl->mw_tcap && table_grow(pl) != 0)
		fatal("pipeline: out of memory");
	if (pl->nmw == pl->mw_cap) {
		size_t cap = pl->mw_cap != 0 ? pl->mw_cap * 2 : 16;
		struct pmeta_w *v = realloc(pl->mw, cap * sizeof(*v));

		if (v == NULL)
			fatal("pipeline: out of memory");
		pl->mw = v;
		pl->mw_cap = cap;
	}
	w = &pl->mw[pl->nmw];
	*w = (struct pmeta_w){ .kind = kind, .which = which, .npart = npart,
	    .hash = h };
	w->mirror = strdup(mirror);
	w->topic = topic != NULL ? strdup(topic) : NULL;
	w->value = value != NULL ? strdup(value) : NULL;
	if (w->mirror == NULL || (topic != NULL && w->topic == NULL) ||
	    (value != NULL && w->value == NULL))
		fatal("pipeline: out of memory");
	table_put(pl, pl->nmw);
	pl->nmw++;
}

static const char *ident_of(const struct mtopic *mt, int which)
{
	switch (which) {
	case MTOPIC_IDENT_SOURCE: return mt->src_topic_id;
	case MTOPIC_IDENT_DEST: return mt->dst_topic_id;
	case MTOPIC_IDENT_DEST_CLUSTER: return mt->dst_cluster_id;
	default: return mt->note;
	}
}

/*
 * The source topic of mt was deleted: its note (why mirrord stopped it,
 * which DescribeMirrors shows) and STOPPING for each of its partitions
 * this instance owns that is not stopping already, in the turn's group
 * like an operator's RemoveTopicsFromMirror; the partitions then report
 * their last offsets and go STOPPED (part_step()).  An operator's failover
 * meanwhile has stopped them already: nothing is left to do.  1 if
 * anything was queued.
 */
static int queue_deleted(struct pipeline *pl, struct mtopic *mt,
    const char *why)
{
	struct mstate *st = pl->st;
	char msg[512];
	int queued = 0, any = 0;

	for (int32_t k = 0; k < mt->npart; k++) {
		struct mpart *mp = mt->parts[k];

		if (mp->state == MPART_STOPPING || mp->state == MPART_STOPPED ||
		    !mpart_owned_by(mp, pl->instance))
			continue;
		any = 1;
		if (mpart_set_state(st, mp, MPART_STOPPING, why, msg,
		    sizeof(msg)) != 0)
			log_warnx("mirror %s: %s-%d: %s", mt->mirror->name,
			    mt->name, (int)k, msg);
		else
			queued = 1;
	}
	if (!any)
		return 0;
	if (mt->note == NULL || strcmp(mt->note, why) != 0) {
		if (mtopic_set_ident(st, mt, MTOPIC_IDENT_NOTE, why, msg,
		    sizeof(msg)) != 0)
			log_warnx("mirror %s: %s", mt->mirror->name, msg);
		else
			queued = 1;
	}
	return queued;
}

/* Partition k of mt FAILED with no automatic retry for why, unless it is
 * stopping, another instance's, or FAILED so already. */
static int queue_fail(struct pipeline *pl, struct mtopic *mt, int k,
    const char *why)
{
	struct mpart *mp = k >= 0 && k < mt->npart ? mt->parts[k] : NULL;
	char msg[512];

	if (mp == NULL || mp->state == MPART_STOPPING ||
	    mp->state == MPART_STOPPED || !mpart_owned_by(mp, pl->instance) ||
	    (mp->state == MPART_FAILED && mp->retry_attempt == -1 &&
	    mp->error != NULL && strcmp(mp->error, why) == 0))
		return 0;
	if (mpart_fail(pl->st, mp, why, -1, msg, sizeof(msg)) != 0) {
		log_warnx("mirror %s: %s-%d: cannot record the failure (%s): %s",
		    mt->mirror->name, mt->name, k, why, msg);
		return 0;
	}
	log_warnx("mirror %s: %s-%d FAILED (no automatic retry): %s",
	    mt->mirror->name, mt->name, k, why);
	return 1;
}

/*
 * Queues one noted change in the open batch when it still applies: 1
 * queued, 0 no longer needed (or refused: logged).  The batch validates
 * against the model as it was when the turn came, so a change that needs
 * another of the same batch is not noted together with it (an identity is
 * noted only for a topic the model has).
 */
static int queue_one(struct pipeline *pl, const struct pmeta_w *w)
{
	struct mstate *st = pl->st;
	struct mirror *m = mstate_mirror_find(st, w->mirror);
	struct mtopic *mt = m != NULL && w->topic != NULL ?
	    mirror_topic_find(m, w->topic) : NULL;
	char msg[512];
	int s, r;

	if (m == NULL)
		return 0;   /* deleted meanwhile */
	switch (w->kind) {
	case PMETA_SOURCE_ID:
		if (!pl_controller(pl) || m->source_cluster_id != NULL)
			return 0;
		r = mstate_set_source_cluster_id(st, w->mirror, w->value, msg,
		    sizeof(msg));
		break;
	case PMETA_GROW:
		if (!pl_controller(pl) || mt == NULL || w->npart <= mt->npart)
			return 0;
		s = mtopic_state(mt);
		if (s == MPART_STOPPING || s == MPART_STOPPED)
			return 0;
		r = mstate_grow_topic(st, w->mirror, w->topic, w->npart, msg,
		    sizeof(msg));
		break;
	case PMETA_ADD:
		/* Added by an operator, or by another mirror's pattern, or
		 * no longer wanted (a pattern removed) meanwhile. */
		if (!pl_controller(pl) || mt != NULL ||
		    !mirror_wants_topic(m, w->topic) ||
		    mstate_topic_holder(st, w->topic, m) != NULL)
			return 0;
		r = mstate_add_topic(st, w->mirror, w->topic, w->npart, msg,
		    sizeof(msg));
		if (r == 0)
			log_info("mirror %s: discovered topic %s (%d partitions)",
			    w->mirror, w->topic, (int)w->npart);
		else
			log_warnx("mirror %s: discovered topic %s: %s",
			    w->mirror, w->topic, msg);
		return r == 0;
	case PMETA_DELETED:
		return mt != NULL ? queue_deleted(pl, mt, w->value) : 0;
	case PMETA_FAIL:
		return mt != NULL ? queue_fail(pl, mt, w->which, w->value) : 0;
	case PMETA_REALIGN_RESET:
		/* Decided meanwhile (the same topic kept, another pass's
		 * reset, the operator's realign): nothing to drop. */
		if (mt == NULL || mt->realign || mt->dst_topic_id != NULL ||
		    mt->prior_dst_topic_id == NULL ||
		    strcmp(mt->prior_dst_topic_id, w->value) != 0)
			return 0;
		r = mtopic_realign_reset(st, mt, w->value, msg, sizeof(msg));
		break;
	case PMETA_REALIGN_DELETED:
		if (mt == NULL || !mt->realign)
			return 0;
		r = mtopic_realign_deleted(st, mt, w->value, msg, sizeof(msg));
		break;
	default:   /* PMETA_IDENT */
		if (mt == NULL || ident_of(mt, w->which) != NULL)
			return 0;
		/* A destination id learnt before a realign, or another than
		 * the one the write history is of (a reset decides first),
		 * or the id a realign deleted (an answer older than that). */
		if (w->which == MTOPIC_IDENT_DEST && (mt->realign ||
		    (mt->prior_dst_topic_id != NULL &&
		    strcmp(mt->prior_dst_topic_id, w->value) != 0) ||
		    (mt->gone_dst_topic_id != NULL &&
		    strcmp(mt->gone_dst_topic_id, w->value) == 0)))
			return 0;
		r = mtopic_set_ident(st, mt, w->which, w->value, msg,
		    sizeof(msg));
		break;
	}
	if (r != 0)
		log_warnx("mirror %s: %s", w->mirror, msg);
	return r == 0;
}

static void meta_done(void *arg, int code, const char *msg)
{
	struct pipeline *pl = arg;

	pl->mw_turn = TURN_NONE;
	flight_free(pl);
	if (code != 0)
		log_warnx("pipeline: %zu metadata change(s) learnt from "
		    "Metadata answers were not recorded (the next pass learns "
		    "them again): %s", pl->mw_queued, msg);
	pl->mw_queued = 0;
	/* What the passes noted meanwhile. */
	pmeta_flush(pl);
}

/* The turn: the noted changes are checked and written as one group. */
static void meta_ready(void *arg)
{
	struct pipeline *pl = arg;
	struct pmeta_w *v = pl->mw;
	size_t n = pl->nmw, queued = 0;
	char msg[512];
	int started = 0, code;

	/* Taken off first: what is noted from here on waits for the next
	 * turn. */
	pl->mw = NULL;
	pl->nmw = pl->mw_cap = 0;
	if (pl->mw_table != NULL)
		memset(pl->mw_table, 0, pl->mw_tcap * sizeof(*pl->mw_table));
	pl->mw_turn = TURN_FLIGHT;
	for (size_t i = 0; i < n; i++)
		queued += (size_t)queue_one(pl, &v[i]);
	flight_free(pl);
	pl->mw_fl = v;   /* until the write completes (pmeta_noted()) */
	pl->nmw_fl = n;
	pl->mw_queued = queued;
	if (queued > 0)
		log_debug("pipeline: %zu metadata change(s) learnt from "
		    "Metadata answers are being written", queued);
	code = mstate_excl_commit(pl->st, meta_done, pl, &started, msg,
	    sizeof(msg));
	if (!started)
		meta_done(pl, code, msg);
}

void pmeta_flush(struct pipeline *pl)
{
	int r;

	if (pl->nmw == 0)
		return;
	if (pl->mw_turn == TURN_NONE)
		r = mstate_excl_begin(pl->st, meta_ready, pl);
	else
		r = 0;   /* flushed again when the turn's write completes */
	if (r == 1) {
		meta_ready(pl);
	} else if (r == 0) {
		if (pl->mw_turn == TURN_NONE)
			pl->mw_turn = TURN_WAITING;
		log_debug("pipeline: %zu metadata change(s) learnt from "
		    "Metadata answers wait for their turn in the metadata log",
		    pl->nmw);
	} else {
		/* Kept for the next pass's flush. */
		log_warnx("pipeline: the metadata log cannot take the %zu "
		    "change(s) learnt from Metadata answers now", pl->nmw);
	}
}

void pmeta_free(struct pipeline *pl)
{
	if (pl->mw_turn != TURN_NONE)
		mstate_excl_cancel(pl->st, pl);
	pl->mw_turn = TURN_NONE;
	notes_fini(pl->mw, pl->nmw);
	free(pl->mw);
	free(pl->mw_table);
	flight_free(pl);
	pl->mw = NULL;
	pl->mw_table = NULL;
	pl->nmw = pl->mw_cap = pl->mw_tcap = 0;
}
