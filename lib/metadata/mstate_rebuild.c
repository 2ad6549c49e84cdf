/*
 * mstate_rebuild.c: a model rebuilt from the log without a restart.
 * A follower of the replicated log that fell behind the log
 * start (the writer deleted records it had not read) replays the newest
 * snapshot and the log after it into a fresh model (mstate_rebuild_new(),
 * records applied as in a replay: no hooks), then mstate_rebuild_adopt()
 * makes the live model equal to it in place.  Objects that exist in both
 * keep their addresses (the pipeline holds pointers to mirrors, topics and
 * partitions) and take the fresh content; the hooks see every difference
 * as the live records would have shown it: MIRROR_DELETING for a mirror
 * that is gone (before its memory goes), MIRROR_CREATED and TOPIC_ADDED
 * for new mirrors, topics and partitions, SOURCE_ID, PATTERNS, STATE (from
 * the old state to the new), OWNER (why = the previous owner) and MEMBERS.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "log.h"
#include "mstate.h"
#include "mstate_int.h"
#include "tpattern.h"

struct mstate *mstate_rebuild_new(const struct mstate *st)
{
	struct mstate *f = mstate_new();

	if (f != NULL)
		f->sealer = st->sealer;   /* replayed configs are stored alike */
	return f;
}

/* Room for n elements as mstate_grow() expects it of an array of n (its
 * capacity is implied by the count: 4, then powers of two). */
static void *array_for(size_t n, size_t elem)
{
	size_t cap = 4;

	while (cap < n)
		cap *= 2;
	return calloc(cap, elem);
}

static int str_differ(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a != b;
	return strcmp(a, b) != 0;
}

#define SWAP(x, y) do { __typeof__(x) tmp_ = (x); (x) = (y); (y) = tmp_; } \
	while (0)

static void emit(struct mstate *st, enum mstate_ev_kind kind,
    const struct mirror *m, const struct mtopic *t, const struct mpart *p,
    enum mpart_state from, enum mpart_state to, const char *why)
{
	struct mstate_event ev = { .kind = kind, .mirror = m, .topic = t,
	    .part = p, .from = from, .to = to, .why = why };

	mstate_emit(st, 1, &ev);
}

/* Live partition p takes fresh partition f's content. */
static void adopt_part(struct mstate *st, struct mpart *p, struct mpart *f)
{
	enum mpart_state from = p->state;
	char *was_owner = p->owner;
	int owner_moved = str_differ(p->owner, f->owner);

	p->state = f->state;
	SWAP(p->error, f->error);
	p->retry_attempt = f->retry_attempt;
	p->last_offset = f->last_offset;
	p->last_epoch = f->last_epoch;
	SWAP(p->epochs, f->epochs);
	SWAP(p->nepochs, f->nepochs);
	SWAP(p->map, f->map);
	memcpy(p->producers, f->producers, sizeof(p->producers));
	p->nproducers = f->nproducers;
	p->sending_dst = f->sending_dst;
	p->owner = f->owner;
	f->owner = was_owner;       /* freed with the fresh model */
	p->owner_generation = f->owner_generation;
	p->has_failover = f->has_failover;
	p->failover = f->failover;
	SWAP(p->failover_note, f->failover_note);
	if (from != p->state) {
		log_info("%s/%s-%d: %s -> %s (rebuilt from the log)",
		    p->topic->mirror->name, p->topic->name, (int)p->index,
		    mpart_state_name(from), mpart_state_name(p->state));
		emit(st, MSTATE_EV_STATE, p->topic->mirror, p->topic, p, from,
		    p->state, "rebuilt from the metadata log");
	}
	if (owner_moved)
		emit(st, MSTATE_EV_OWNER, p->topic->mirror, p->topic, p,
		    p->state, p->state, was_owner);
}

/* Live topic t takes fresh topic f's content; f's extra partitions move. */
static int adopt_topic(struct mstate *st, struct mtopic *t, struct mtopic *f)
{
	int32_t common = MIN(t->npart, f->npart);

	int realigned = 0;

	SWAP(t->src_topic_id, f->src_topic_id);
	SWAP(t->dst_topic_id, f->dst_topic_id);
	SWAP(t->note, f->note);
	SWAP(t->dst_cluster_id, f->dst_cluster_id);
	SWAP(t->prior_dst_topic_id, f->prior_dst_topic_id);
	SWAP(t->realign_dst_topic_id, f->realign_dst_topic_id);
	SWAP(t->gone_dst_topic_id, f->gone_dst_topic_id);
	t->realign = f->realign;
	/* A write history that is gone whole was dropped by a realign the
	 * follower did not see (a trim keeps the last entries). */
	for (int32_t i = 0; i < common; i++) {
		const struct mpart *p = t->parts[i], *q = f->parts[i];

		if ((p->nepochs > 0 || mpart_nanchors(p) > 0 || p->nproducers > 0) &&
		    q->nepochs == 0 && mpart_nanchors(q) == 0 && q->nproducers == 0)
			realigned = 1;
	}
	for (int32_t i = 0; i < common; i++)
		adopt_part(st, t->parts[i], f->parts[i]);
	if (f->npart > t->npart) {
		struct mpart **np = realloc(t->parts, (size_t)f->npart *
		    sizeof(*np));

		if (np == NULL)
			return -1;
		t->parts = np;
		for (int32_t i = t->npart; i < f->npart; i++) {
			t->parts[i] = f->parts[i];
			t->parts[i]->topic = t;
			f->parts[i] = NULL;     /* part_free(NULL) is a no-op */
		}
		t->npart = f->npart;
	}
	if (realigned)
		emit(st, MSTATE_EV_REALIGNED, t->mirror, t, NULL, 0, 0, NULL);
	return 0;
}

/* A topic moved from the fresh model into live mirror m. */
static void take_topic(struct mtopic *t, struct mirror *m)
{
	t->mirror = m;
	for (int32_t i = 0; i < t->npart; i++)
		if (t->parts[i] != NULL)
			t->parts[i]->topic = t;
}

/* Mirrors with the same name: is the live one the fresh one's earlier
 * self?  A topic the fresh one lacks, or fewer partitions, means it was
 * deleted and created again in between. */
static int same_mirror(const struct mirror *m, const struct mirror *f)
{
	for (size_t i = 0; i < m->ntopics; i++) {
		const struct mtopic *ft = mirror_topic_find(f, m->topics[i]->name);

		if (ft == NULL || ft->npart < m->topics[i]->npart)
			return 0;
	}
	return 1;
}

static int patterns_differ(const struct mirror *m, const struct mirror *f)
{
	if (m->nincludes != f->nincludes || m->nexcludes != f->nexcludes)
		return 1;
	for (size_t i = 0; i < m->nincludes; i++)
		if (strcmp(m->includes[i], f->includes[i]) != 0)
			return 1;
	for (size_t i = 0; i < m->nexcludes; i++)
		if (strcmp(m->excludes[i], f->excludes[i]) != 0)
			return 1;
	return 0;
}

static int configs_differ(const struct mirror *m, const struct mirror *f)
{
	if (m->nconfigs != f->nconfigs)
		return 1;
	for (size_t i = 0; i < m->nconfigs; i++)
		if (strcmp(m->configs[i].name, f->configs[i].name) != 0 ||
		    str_differ(m->configs[i].value, f->configs[i].value))
			return 1;
	return 0;
}

/* Live mirror m takes fresh mirror f's content. */
static int adopt_mirror(struct mstate *st, struct mirror *m, struct mirror *f)
{
	int src_changed = str_differ(m->source_cluster_id,
	    f->source_cluster_id);
	int pat_changed = patterns_differ(m, f);
	int cfg_changed = configs_differ(m, f);
	size_t nt = 0;
	struct mtopic **topics;
	char *grown;

	SWAP(m->configs, f->configs);
	SWAP(m->nconfigs, f->nconfigs);
	SWAP(m->source_cluster_id, f->source_cluster_id);
	SWAP(m->includes, f->includes);
	SWAP(m->nincludes, f->nincludes);
	SWAP(m->include_re, f->include_re);
	SWAP(m->excludes, f->excludes);
	SWAP(m->nexcludes, f->nexcludes);
	SWAP(m->exclude_re, f->exclude_re);
	if (src_changed)
		emit(st, MSTATE_EV_SOURCE_ID, m, NULL, NULL, 0, 0, NULL);
	if (pat_changed)
		emit(st, MSTATE_EV_PATTERNS, m, NULL, NULL, 0, 0, NULL);
	if (cfg_changed)
		emit(st, MSTATE_EV_CONFIGS, m, NULL, NULL, 0, 0, NULL);
	/* The topics: f's order (sorted by name) with the live objects of
	 * the topics m already has (same_mirror(): every one is in f). */
	topics = array_for(f->ntopics, sizeof(*topics));
	grown = calloc(f->ntopics + 1, 1);
	if (topics == NULL || grown == NULL) {
		free(topics);
		free(grown);
		return -1;
	}
	for (size_t i = 0; i < f->ntopics; i++) {
		struct mtopic *ft = f->topics[i];
		struct mtopic *t = mirror_topic_find(m, ft->name);

		if (t != NULL) {
			int32_t before = t->npart;

			if (adopt_topic(st, t, ft) != 0) {
				free(topics);
				free(grown);
				return -1;
			}
			grown[nt] = t->npart > before;
			topics[nt++] = t;
		} else {
			take_topic(ft, m);
			f->topics[i] = NULL;
			topics[nt++] = ft;
		}
	}
	/* Every live topic was found in f: none is dropped here. */
	free(m->topics);
	m->topics = topics;
	m->ntopics = nt;
	for (size_t i = 0; i < f->ntopics; i++)
		if (f->topics[i] == NULL || grown[i])
			emit(st, MSTATE_EV_TOPIC_ADDED, m, m->topics[i], NULL, 0,
			    0, NULL);
	free(grown);
	return 0;
}

static void drop_mirror(struct mstate *st, size_t pos)
{
	struct mirror *m = st->mirrors[pos];

	emit(st, MSTATE_EV_MIRROR_DELETING, m, NULL, NULL, 0, 0, NULL);
	log_info("mirror %s: deleted (rebuilt from the metadata log)", m->name);
	memmove(st->mirrors + pos, st->mirrors + pos + 1,
	    (st->nmirrors - pos - 1) * sizeof(*st->mirrors));
	st->nmirrors--;
	mstate_mirror_free(m);
}

int mstate_rebuild_adopt(struct mstate *st, struct mstate *f, char *err,
    size_t errlen)
{
	struct mirror **mirrors;
	size_t nm = 0, i;
	int members_changed;

	/* Mirrors that are gone, or gone and created again: deleted first,
	 * so their hooks run while the rest of the model is still as it
	 * was. */
	for (i = 0; i < st->nmirrors;) {
		struct mirror *fm = mstate_mirror_find(f, st->mirrors[i]->name);

		if (fm == NULL || !same_mirror(st->mirrors[i], fm))
			drop_mirror(st, i);
		else
			i++;
	}
	mirrors = array_for(f->nmirrors, sizeof(*mirrors));
	if (mirrors == NULL) {
		mstate_fmt(err, errlen, "out of memory adopting the rebuilt "
		    "model");
		return -1;
	}
	/* Membership first: owners below may name the new members. */
	members_changed = st->generation != f->generation ||
	    st->nmembers != f->nmembers;
	for (i = 0; !members_changed && i < st->nmembers; i++)
		members_changed = strcmp(st->members[i].instance_id,
		    f->members[i].instance_id) != 0 ||
		    strcmp(st->members[i].member_id, f->members[i].member_id) != 0;
	SWAP(st->members, f->members);
	SWAP(st->nmembers, f->nmembers);
	st->generation = f->generation;
	if (members_changed)
		emit(st, MSTATE_EV_MEMBERS, NULL, NULL, NULL, 0, 0, NULL);
	if (f->cluster_id[0] != '\0')
		memcpy(st->cluster_id, f->cluster_id, sizeof(st->cluster_id));
	SWAP(st->acls, f->acls);
	SWAP(st->nacls, f->nacls);
	for (i = 0; i < f->nmirrors; i++) {
		struct mirror *fm = f->mirrors[i];
		struct mirror *m = mstate_mirror_find(st, fm->name);

		if (m != NULL) {
			if (adopt_mirror(st, m, fm) != 0) {
				/* Keep the model whole: what is adopted stays,
				 * the rest of st is as it was. */
				free(mirrors);
				mstate_fmt(err, errlen, "out of memory adopting "
				    "mirror %s", m->name);
				return -1;
			}
			mirrors[nm++] = m;
		} else {
			for (size_t t = 0; t < fm->ntopics; t++)
				take_topic(fm->topics[t], fm);
			mirrors[nm++] = fm;
			f->mirrors[i] = NULL;
		}
	}
	free(st->mirrors);
	st->mirrors = mirrors;
	st->nmirrors = nm;
	/* New mirrors: created, then their topics added, as live records
	 * would have shown them (st->mirrors[i] is f->mirrors[i]'s). */
	for (i = 0; i < f->nmirrors; i++) {
		struct mirror *m = st->mirrors[i];

		if (f->mirrors[i] != NULL)
			continue;
		log_info("mirror %s: created (rebuilt from the metadata log)",
		    m->name);
		emit(st, MSTATE_EV_MIRROR_CREATED, m, NULL, NULL, 0, 0, NULL);
		for (size_t t = 0; t < m->ntopics; t++)
			emit(st, MSTATE_EV_TOPIC_ADDED, m, m->topics[t], NULL, 0,
			    0, NULL);
		for (size_t t = 0; t < m->ntopics; t++)
			for (int32_t p = 0; p < m->topics[t]->npart; p++) {
				struct mpart *mp = m->topics[t]->parts[p];

				if (mp->owner != NULL)
					emit(st, MSTATE_EV_OWNER, m, m->topics[t],
					    mp, mp->state, mp->state, NULL);
			}
	}
	/* f holds only what st gave up, and NULL where objects moved
	 * (mstate_mirror_free() and mstate_topic_free() skip NULL). */
	mstate_free(f);
	return 0;
}

void *mstate_rebuild_fresh_cb(void *st)
{
	return mstate_rebuild_new(st);
}

int mstate_rebuild_adopt_cb(void *st, void *fresh, char *err, size_t errlen)
{
	return mstate_rebuild_adopt(st, fresh, err, errlen);
}

void mstate_rebuild_drop_cb(void *fresh)
{
	mstate_free(fresh);
}
