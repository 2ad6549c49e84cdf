/*
 * mstate_apply.c: the apply functions, one per record type, which are the
 * only code that writes the model; replay at start-up and live operations
 * (after their records are synced) both go through them.  And persistence:
 * encode, append, sync, then apply.  See mstate.h.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "massert.h"
#include "mlog.h"
#include "xlate.h"
#include "mrec.h"
#include "mstate.h"
#include "mstate_int.h"
#include "tpattern.h"

/* ---- apply: the only writers of the model ------------------------------- */

/* Context of one apply: live (after an operation's sync) or replay. */
struct apply {
	struct mstate *st;
	int live;
	int in_snapshot;
	char *err;
	size_t errlen;
};

#define FAIL(a, ...) do { mstate_fmt((a)->err, (a)->errlen, __VA_ARGS__); \
	return -1; } while (0)

/*
 * The one writer of mpart.state.  restore: a snapshot sets the state of a
 * partition that has none yet (UNKNOWN), bypassing the table.
 */
static void move_state(struct apply *a, struct mpart *p, enum mpart_state to,
    const char *why);

static int set_state(struct apply *a, struct mpart *p, enum mpart_state to,
    const char *why, int restore)
{
	enum mpart_state from = p->state;
	const struct mtopic *t = p->topic;

	if (restore ? from != MPART_UNKNOWN : !mpart_transition_ok(from, to))
		FAIL(a, "%s/%s-%d: %s -> %s is not an allowed transition",
		    t->mirror->name, t->name, (int)p->index,
		    mpart_state_name(from), mpart_state_name(to));
	move_state(a, p, to, why);
	return 0;
}

/* set_state() once the move is known to be allowed (a realign also moves
 * MIRRORING partitions to PREPARING, which the table leaves to it). */
static void move_state(struct apply *a, struct mpart *p, enum mpart_state to,
    const char *why)
{
	enum mpart_state from = p->state;
	const struct mtopic *t = p->topic;

	/* Through set_state() (the table, or a snapshot's restore of a
	 * partition that has no state yet) or a realign's move back to
	 * PREPARING: no other way. */
	MR_ASSERT_MSG(mpart_transition_ok(from, to) || from == MPART_UNKNOWN ||
	    (to == MPART_PREPARING && from == MPART_MIRRORING), "%s -> %s",
	    mpart_state_name(from), mpart_state_name(to));
	p->state = to;
	if (from == to)
		return;
	if (from == MPART_STOPPED) {
		p->has_failover = 0;  /* the report was of that stop */
		free(p->failover_note);
		p->failover_note = NULL;
	}
	if (to == MPART_MIRRORING)
		p->retry_attempt = 0;
	if (to != MPART_FAILED) {
		free(p->error);
		p->error = NULL;
	}
	if (a->live) {
		log_info("%s/%s-%d: %s -> %s (%s)", t->mirror->name, t->name,
		    (int)p->index, mpart_state_name(from),
		    mpart_state_name(to), why != NULL ? why : "");
		struct mstate_event ev = { .kind = MSTATE_EV_STATE,
		    .mirror = t->mirror, .topic = t, .part = p, .from = from,
		    .to = to, .why = why };
		mstate_emit(a->st, 1, &ev);
	} else {
		log_debug("%s/%s-%d: %s -> %s (replayed)", t->mirror->name,
		    t->name, (int)p->index, mpart_state_name(from),
		    mpart_state_name(to));
	}
}

static struct mpart *new_part(struct mtopic *t, int32_t i);

static struct mirror *need_mirror(struct apply *a, const struct mrec *r)
{
	struct mirror *m = mstate_find_mirror_k(a->st, r->mirror);

	if (m == NULL)
		mstate_fmt(a->err, a->errlen, "%s record names mirror '%.*s', which "
		    "does not exist", mrec_type_name(r->type),
		    (int)r->mirror.len, r->mirror.p);
	return m;
}

static struct mtopic *need_topic(struct apply *a, const struct mrec *r,
    struct mirror **mp)
{
	struct mirror *m = need_mirror(a, r);
	struct mtopic *t;

	if (m == NULL)
		return NULL;
	t = mstate_find_topic_k(m, r->topic);
	if (t == NULL)
		mstate_fmt(a->err, a->errlen, "%s record names topic '%.*s', which is "
		    "not in mirror %s", mrec_type_name(r->type),
		    (int)r->topic.len, r->topic.p, m->name);
	if (mp != NULL)
		*mp = m;
	return t;
}

static struct mpart *need_part(struct apply *a, const struct mrec *r)
{
	struct mtopic *t = need_topic(a, r, NULL);

	if (t == NULL)
		return NULL;
	if (r->partition < 0 || r->partition >= t->npart) {
		mstate_fmt(a->err, a->errlen, "%s record names partition %s/%s-%d, "
		    "the topic has %d", mrec_type_name(r->type),
		    t->mirror->name, t->name, (int)r->partition, (int)t->npart);
		return NULL;
	}
	if (t->parts[r->partition] == NULL &&
	    (t->parts[r->partition] = new_part(t, r->partition)) == NULL)
		mstate_fmt(a->err, a->errlen, "out of memory");
	return t->parts[r->partition];
}

static int apply_cluster_id(struct apply *a, const struct mrec *r)
{
	if (r->str.len != MSTATE_CLUSTER_ID_LEN)
		FAIL(a, "cluster id of %d characters (want %d)", (int)r->str.len,
		    MSTATE_CLUSTER_ID_LEN);
	for (int i = 0; i < r->str.len; i++) {
		char c = r->str.p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			FAIL(a, "cluster id has a character outside base64url");
	}
	if (a->st->cluster_id[0] != '\0' &&
	    memcmp(a->st->cluster_id, r->str.p, MSTATE_CLUSTER_ID_LEN) != 0)
		FAIL(a, "a second cluster id %.22s (already %s)", r->str.p,
		    a->st->cluster_id);
	memcpy(a->st->cluster_id, r->str.p, MSTATE_CLUSTER_ID_LEN);
	a->st->cluster_id[MSTATE_CLUSTER_ID_LEN] = '\0';
	return 0;
}

/* Copies a record's configs (*out, *n); notes a clear secret met on replay.
 * Returns 0, or -1 when out of memory. */
static int copy_configs(struct apply *a, const struct mrec *r,
    struct mcfg **out, size_t *n)
{
	const struct mstate_sealer *s = &a->st->sealer;
	struct mcfg *c = NULL;
	int oom = 0;

	*out = NULL;
	*n = 0;
	if (r->nconfigs > 0 &&
	    (c = calloc((size_t)r->nconfigs, sizeof(*c))) == NULL)
		return -1;
	for (int32_t i = 0; i < r->nconfigs && !oom; i++) {
		c[i].name = mstate_kdup(r->configs[i].name, &oom);
		c[i].value = mstate_kdup(r->configs[i].value, &oom);
		(*n)++;
		if (!oom && !a->live && s->needs_seal != NULL &&
		    c[i].value != NULL &&
		    s->needs_seal(s->arg, c[i].name, c[i].value, 1))
			a->st->replay_clear = 1;
	}
	*out = c;
	return oom ? -1 : 0;
}

static void free_configs(struct mcfg *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].name);
		if (c[i].value != NULL) {
			/* It may be a secret: do not leave it in freed heap. */
			memset(c[i].value, 0, strlen(c[i].value));
			free(c[i].value);
		}
	}
	free(c);
}

static int apply_mirror_create(struct apply *a, const struct mrec *r)
{
	struct mstate *st = a->st;
	struct mirror *m;
	int found, oom = 0;
	size_t pos = mstate_mirror_pos(st, r->mirror, &found);
	char name[MREC_MAX_NAME + 1];

	memcpy(name, r->mirror.p, (size_t)r->mirror.len);
	name[r->mirror.len] = '\0';
	if (mstate_check_mirror_name(name, a->err, a->errlen) != 0)
		return -1;
	if (found)
		FAIL(a, "mirror %s is created twice", name);
	if (mstate_grow(&st->mirrors, st->nmirrors, sizeof(*st->mirrors)) != 0 ||
	    (m = calloc(1, sizeof(*m))) == NULL)
		FAIL(a, "out of memory creating mirror %s", name);
	m->name = strdup(name);
	if (copy_configs(a, r, &m->configs, &m->nconfigs) != 0)
		oom = 1;
	if (oom || m->name == NULL) {
		mstate_mirror_free(m);
		FAIL(a, "out of memory creating mirror %s", name);
	}
	memmove(st->mirrors + pos + 1, st->mirrors + pos,
	    (st->nmirrors - pos) * sizeof(*st->mirrors));
	st->mirrors[pos] = m;
	st->nmirrors++;
	if (a->live)
		log_info("mirror %s: created (source %s)", m->name,
		    mirror_bootstrap(m));
	struct mstate_event ev = { .kind = MSTATE_EV_MIRROR_CREATED,
	    .mirror = m };
	mstate_emit(st, a->live, &ev);
	return 0;
}

/* A mirror's configs replaced: the sealed form of the same configs (the
 * start-up migration), or an operator's IncrementalAlterConfigs. */
static int apply_mirror_configs(struct apply *a, const struct mrec *r)
{
	struct mirror *m = need_mirror(a, r);
	struct mcfg *c;
	size_t n;

	if (m == NULL)
		return -1;
	if (copy_configs(a, r, &c, &n) != 0) {
		free_configs(c, n);
		FAIL(a, "out of memory replacing the configs of mirror %s",
		    m->name);
	}
	free_configs(m->configs, m->nconfigs);
	m->configs = c;
	m->nconfigs = n;
	if (a->live)
		log_info("mirror %s: configs replaced (%zu)", m->name, n);
	struct mstate_event ev = { .kind = MSTATE_EV_CONFIGS, .mirror = m };
	mstate_emit(a->st, a->live, &ev);
	return 0;
}

static int apply_mirror_delete(struct apply *a, const struct mrec *r)
{
	struct mstate *st = a->st;
	int found;
	size_t pos = mstate_mirror_pos(st, r->mirror, &found);
	struct mirror *m;

	if (!found)
		return need_mirror(a, r) != NULL ? 0 : -1;
	m = st->mirrors[pos];
	for (size_t i = 0; i < m->ntopics; i++)
		if (!mtopic_all_stopped(m->topics[i]))
			FAIL(a, "mirror %s deleted while topic %s is %s",
			    m->name, m->topics[i]->name,
			    mtopic_state_name(m->topics[i]));
	struct mstate_event ev = { .kind = MSTATE_EV_MIRROR_DELETING,
	    .mirror = m };
	mstate_emit(st, a->live, &ev);
	if (a->live)
		log_info("mirror %s: deleted", m->name);
	memmove(st->mirrors + pos, st->mirrors + pos + 1,
	    (st->nmirrors - pos - 1) * sizeof(*st->mirrors));
	st->nmirrors--;
	mstate_mirror_free(m);
	return 0;
}

static int apply_mirror_source(struct apply *a, const struct mrec *r)
{
	struct mirror *m = need_mirror(a, r);
	int oom = 0;
	char *id;

	if (m == NULL)
		return -1;
	if (r->str.len <= 0 || r->str.len > MREC_MAX_NAME)
		FAIL(a, "mirror %s: source cluster id of %d bytes", m->name,
		    (int)r->str.len);
	id = mstate_kdup(r->str, &oom);
	if (oom)
		FAIL(a, "out of memory");
	free(m->source_cluster_id);
	m->source_cluster_id = id;
	if (a->live)
		log_info("mirror %s: source cluster id is %s", m->name, id);
	struct mstate_event ev = { .kind = MSTATE_EV_SOURCE_ID, .mirror = m };
	mstate_emit(a->st, a->live, &ev);
	return 0;
}

/* An include pattern removed (absent: nothing to do). */
static int remove_include(struct apply *a, struct mirror *m, struct kstr pat)
{
	size_t i = 0;

	while (i < m->nincludes && mstate_kcmp(pat, m->includes[i]) != 0)
		i++;
	if (i == m->nincludes)
		return 0;
	if (a->live)
		log_info("mirror %s: include pattern '%s' removed", m->name,
		    m->includes[i]);
	free(m->includes[i]);
	tpattern_free(m->include_re[i]);
	memmove(m->includes + i, m->includes + i + 1,
	    (m->nincludes - i - 1) * sizeof(*m->includes));
	memmove(m->include_re + i, m->include_re + i + 1,
	    (m->nincludes - i - 1) * sizeof(*m->include_re));
	m->nincludes--;
	struct mstate_event ev = { .kind = MSTATE_EV_PATTERNS, .mirror = m };
	mstate_emit(a->st, a->live, &ev);
	return 0;
}

static int apply_mirror_pattern(struct apply *a, const struct mrec *r)
{
	struct mirror *m = need_mirror(a, r);
	struct tpattern ***res;
	char ***list;
	size_t *n;
	int oom = 0;
	char why[600];

	if (m == NULL)
		return -1;
	if (r->kind != MREC_INCLUDE && r->kind != MREC_EXCLUDE &&
	    r->kind != MREC_INCLUDE_DEL)
		FAIL(a, "mirror %s: pattern kind %d", m->name, r->kind);
	if (r->str.len <= 0)
		FAIL(a, "mirror %s: empty pattern", m->name);
	if (r->kind == MREC_INCLUDE_DEL)
		return remove_include(a, m, r->str);
	list = r->kind == MREC_INCLUDE ? &m->includes : &m->excludes;
	res = r->kind == MREC_INCLUDE ? &m->include_re : &m->exclude_re;
	n = r->kind == MREC_INCLUDE ? &m->nincludes : &m->nexcludes;
	for (size_t i = 0; i < *n; i++)
		if (mstate_kcmp(r->str, (*list)[i]) == 0)
			return 0;
	if (*n >= MSTATE_MAX_PATTERNS)
		FAIL(a, "mirror %s: more than %d %s patterns", m->name,
		    MSTATE_MAX_PATTERNS, r->kind == MREC_INCLUDE ? "include" :
		    "exclude");
	if (mstate_grow(list, *n, sizeof(char *)) != 0 ||
	    mstate_grow(res, *n, sizeof(struct tpattern *)) != 0)
		FAIL(a, "out of memory");
	(*list)[*n] = mstate_kdup(r->str, &oom);
	if (oom)
		FAIL(a, "out of memory");
	/*
	 * Compiled once here, for discovery.  Live patterns were checked
	 * before they were written; one from an older log (POSIX ERE then)
	 * that PCRE2 refuses must not stop the start: it matches nothing.
	 */
	(*res)[*n] = mstate_compile_pattern((*list)[*n], why, sizeof(why));
	if ((*res)[*n] == NULL)
		log_warnx("mirror %s: %s %s; it matches no topic", m->name, r->kind == MREC_INCLUDE ? "include" :
		    "exclude", why);
	(*n)++;
	if (a->live)
		log_info("mirror %s: %s pattern '%s' added", m->name,
		    r->kind == MREC_INCLUDE ? "include" : "exclude",
		    (*list)[*n - 1]);
	struct mstate_event ev = { .kind = MSTATE_EV_PATTERNS, .mirror = m };
	mstate_emit(a->st, a->live, &ev);
	return 0;
}

/* Adds partitions t->npart..count-1, in UNKNOWN. */
static struct mpart *new_part(struct mtopic *t, int32_t i)
{
	struct mpart *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->topic = t;
	p->index = i;
	p->state = MPART_UNKNOWN;
	p->last_offset = -1;
	p->last_epoch = -1;
	p->sending_dst = -1;
	p->owner_generation = -1;
	return p;
}

/* Grows t to count partitions.  lazy (a sparse scratch model's restore
 * only): the new slots stay NULL until need_part() fills one. */
static int add_parts(struct mtopic *t, int32_t count, int lazy)
{
	struct mpart **parts;

	if (count <= t->npart)
		return 0;
	parts = realloc(t->parts, (size_t)count * sizeof(*parts));
	if (parts == NULL)
		return -1;
	t->parts = parts;
	if (lazy) {
		memset(t->parts + t->npart, 0, (size_t)(count - t->npart) *
		    sizeof(*parts));
		t->npart = count;
		return 0;
	}
	for (int32_t i = t->npart; i < count; i++) {
		struct mpart *p = new_part(t, i);
		if (p == NULL)
			return -1;
		t->parts[i] = p;
		t->npart = i + 1;
	}
	return 0;
}

static struct mtopic *new_topic(struct apply *a, struct mirror *m,
    const struct mrec *r)
{
	int found, oom = 0;
	size_t pos = mstate_topic_pos(m, r->topic, &found);
	struct mtopic *t;
	char name[MREC_MAX_NAME + 1];

	memcpy(name, r->topic.p, (size_t)r->topic.len);
	name[r->topic.len] = '\0';
	if (mstate_check_topic_name(name, a->err, a->errlen) != 0)
		return NULL;
	if (found) {
		mstate_fmt(a->err, a->errlen, "topic %.*s restored twice in mirror %s",
		    (int)r->topic.len, r->topic.p, m->name);
		return NULL;
	}
	if (mstate_grow(&m->topics, m->ntopics, sizeof(*m->topics)) != 0 ||
	    (t = calloc(1, sizeof(*t))) == NULL) {
		mstate_fmt(a->err, a->errlen, "out of memory");
		return NULL;
	}
	t->mirror = m;
	t->name = mstate_kdup(r->topic, &oom);
	if (oom || add_parts(t, r->count, a->st->sparse && a->in_snapshot) != 0) {
		mstate_topic_free(t);
		mstate_fmt(a->err, a->errlen, "out of memory adding topic %.*s",
		    (int)r->topic.len, r->topic.p);
		return NULL;
	}
	memmove(m->topics + pos + 1, m->topics + pos,
	    (m->ntopics - pos) * sizeof(*m->topics));
	m->topics[pos] = t;
	m->ntopics++;
	return t;
}

static int check_count(struct apply *a, const struct mrec *r)
{
	if (r->count < 1 || r->count > MSTATE_MAX_PARTITIONS)
		FAIL(a, "%s record for %.*s/%.*s: partition count %d (1-%d)",
		    mrec_type_name(r->type), (int)r->mirror.len, r->mirror.p,
		    (int)r->topic.len, r->topic.p, (int)r->count,
		    MSTATE_MAX_PARTITIONS);
	return 0;
}

static int apply_topic_add(struct apply *a, const struct mrec *r)
{
	struct mirror *m = need_mirror(a, r);
	struct mtopic *t;
	int32_t old = 0;
	int added;

	if (m == NULL || check_count(a, r) != 0)
		return -1;
	t = mstate_find_topic_k(m, r->topic);
	if (t == NULL) {
		if ((t = new_topic(a, m, r)) == NULL)
			return -1;
	} else {
		old = t->npart;
		if (add_parts(t, r->count, 0) != 0)
			FAIL(a, "out of memory growing %s/%s", m->name, t->name);
	}
	added = t->npart > old;
	if (r->flags & MREC_F_RESTART) {
		/* Added again, the operator's decision: mirrord's own stop is
		 * over, and the topics it now finds are the ones to mirror
		 * (their ids are adopted at the next Metadata answers).  The
		 * partitions' write history stays with the destination topic
		 * it was written in: the data plane keeps it for that topic
		 * and drops it for another (prior_dst_topic_id). */
		char **f[] = { &t->note, &t->src_topic_id, &t->dst_topic_id,
		    &t->dst_cluster_id };
		if (t->dst_topic_id != NULL) {
			free(t->prior_dst_topic_id);
			t->prior_dst_topic_id = t->dst_topic_id;
			t->dst_topic_id = NULL;
		}
		for (size_t k = 0; k < ARRAY_SIZE(f); k++) {
			free(*f[k]);
			*f[k] = NULL;
		}
	}
	for (int32_t i = 0; i < t->npart; i++) {
		struct mpart *p = t->parts[i];
		if (i >= old || ((r->flags & MREC_F_RESTART) &&
		    p->state == MPART_STOPPED))
			if (set_state(a, p, MPART_PREPARING, i >= old ?
			    "added to the mirror" : "added again", 0) != 0)
				return -1;
	}
	if (added) {
		struct mstate_event ev = { .kind = MSTATE_EV_TOPIC_ADDED,
		    .mirror = m, .topic = t };
		mstate_emit(a->st, a->live, &ev);
	}
	return 0;
}

static int apply_topic_ident(struct apply *a, const struct mrec *r)
{
	struct mtopic *t = need_topic(a, r, NULL);
	char **field, *v = NULL;
	int oom = 0;

	if (t == NULL)
		return -1;
	switch (r->kind) {
	case MTOPIC_IDENT_SOURCE: field = &t->src_topic_id; break;
	case MTOPIC_IDENT_DEST: field = &t->dst_topic_id; break;
	case MTOPIC_IDENT_NOTE: field = &t->note; break;
	case MTOPIC_IDENT_DEST_CLUSTER: field = &t->dst_cluster_id; break;
	case MTOPIC_IDENT_DEST_PRIOR: field = &t->prior_dst_topic_id; break;
	case MTOPIC_IDENT_DEST_GONE: field = &t->gone_dst_topic_id; break;
	default:
		FAIL(a, "%s record for %s/%s: kind %d is not a topic identity "
		    "field", mrec_type_name(r->type), t->mirror->name, t->name,
		    (int)r->kind);
	}
	if (r->str.len > MREC_MAX_NAME)
		FAIL(a, "%s record for %s/%s: value of %d characters (at most %d)",
		    mrec_type_name(r->type), t->mirror->name, t->name,
		    (int)r->str.len, MREC_MAX_NAME);
	if (r->str.len > 0) {
		v = mstate_kdup(r->str, &oom);
		if (oom)
			FAIL(a, "out of memory");
	}
	free(*field);
	*field = v;
	if (r->kind == MTOPIC_IDENT_DEST && v != NULL) {
		/* The destination topic is known again: the decision about
		 * the one before is made (the same: history kept; another:
		 * dropped by a reset before this record). */
		free(t->prior_dst_topic_id);
		free(t->gone_dst_topic_id);
		t->prior_dst_topic_id = t->gone_dst_topic_id = NULL;
	}
	return 0;
}

/* What a partition wrote into one destination topic: forgotten when the
 * topic is another one. */
static void drop_history(struct mpart *p)
{
	free(p->epochs);
	xlate_free(p->map);
	p->epochs = NULL;
	p->map = NULL;
	p->nepochs = 0;
	memset(p->producers, 0, sizeof(p->producers));
	p->nproducers = 0;
	p->sending_dst = -1;
	p->last_offset = -1;
	p->last_epoch = -1;
}

static int apply_topic_realign(struct apply *a, const struct mrec *r)
{
	struct mtopic *t = need_topic(a, r, NULL);
	char *v = NULL;
	int oom = 0;

	if (t == NULL)
		return -1;
	if (r->str.len > MREC_MAX_NAME)
		FAIL(a, "%s record for %s/%s: id of %d characters (at most %d)",
		    mrec_type_name(r->type), t->mirror->name, t->name,
		    (int)r->str.len, MREC_MAX_NAME);
	if (r->str.len > 0 && (v = mstate_kdup(r->str, &oom)) == NULL)
		FAIL(a, "out of memory");
	switch (r->kind) {
	case MREC_REALIGN_RESET:
		/* Written once the data plane saw another topic; a second
		 * writer's copy of the same decision finds it made. */
		if (t->prior_dst_topic_id == NULL || v == NULL ||
		    strcmp(t->prior_dst_topic_id, v) != 0)
			break;
		for (int32_t i = 0; i < t->npart; i++)
			if (t->parts[i] != NULL)
				drop_history(t->parts[i]);
		free(t->prior_dst_topic_id);
		t->prior_dst_topic_id = NULL;
		if (a->live) {
			struct mstate_event ev = { .kind = MSTATE_EV_REALIGNED,
			    .mirror = t->mirror, .topic = t };

			log_info("%s/%s: the destination topic is not the one "
			    "(topic id %s) its partitions' write history was "
			    "recorded in: history dropped, copied as a new topic",
			    t->mirror->name, t->name, v);
			mstate_emit(a->st, 1, &ev);
		}
		break;
	case MREC_REALIGN_DELETE:
		/* All or nothing: check every partition before moving any. */
		for (int32_t i = 0; i < t->npart; i++) {
			const struct mpart *p = t->parts[i];

			if (p != NULL && p->state != MPART_FAILED &&
			    p->state != MPART_MIRRORING &&
			    p->state != MPART_PREPARING) {
				free(v);
				FAIL(a, "%s record for %s/%s: partition %d is %s "
				    "(a realign needs FAILED, MIRRORING or "
				    "PREPARING)", mrec_type_name(r->type),
				    t->mirror->name, t->name, (int)i,
				    mpart_state_name(p->state));
			}
		}
		for (int32_t i = 0; i < t->npart; i++) {
			struct mpart *p = t->parts[i];

			if (p == NULL)
				continue;
			drop_history(p);
			move_state(a, p, MPART_PREPARING, "recovered by the "
			    "operator, resolution realign");
		}
		free(t->dst_topic_id);
		free(t->prior_dst_topic_id);
		free(t->gone_dst_topic_id);
		free(t->realign_dst_topic_id);
		t->dst_topic_id = t->prior_dst_topic_id = NULL;
		t->gone_dst_topic_id = NULL;
		t->realign_dst_topic_id = v;
		t->realign = 1;
		v = NULL;
		if (a->live) {
			struct mstate_event ev = { .kind = MSTATE_EV_REALIGNED,
			    .mirror = t->mirror, .topic = t };

			mstate_emit(a->st, 1, &ev);
		}
		break;
	case MREC_REALIGN_DELETED:
		if (!t->realign)
			break;   /* recorded already (another instance) */
		free(t->realign_dst_topic_id);
		free(t->gone_dst_topic_id);
		t->realign_dst_topic_id = NULL;
		t->gone_dst_topic_id = v;
		t->realign = 0;
		v = NULL;
		break;
	case MREC_REALIGN_PENDING:
		free(t->realign_dst_topic_id);
		t->realign_dst_topic_id = v;
		t->realign = 1;
		v = NULL;
		break;
	default:
		free(v);
		FAIL(a, "%s record for %s/%s: kind %d is not a realign step",
		    mrec_type_name(r->type), t->mirror->name, t->name,
		    (int)r->kind);
	}
	free(v);
	return 0;
}

static int check_state(struct apply *a, const struct mrec *r)
{
	if (r->state < 0 || r->state >= MPART_STATE_COUNT)
		FAIL(a, "%s record: state %d is not a partition state",
		    mrec_type_name(r->type), r->state);
	return 0;
}

static int apply_topic_state(struct apply *a, const struct mrec *r)
{
	struct mtopic *t = need_topic(a, r, NULL);
	char why[64];

	if (t == NULL || check_state(a, r) != 0)
		return -1;
	/* All or nothing: check every partition before moving any. */
	for (int32_t i = 0; i < t->npart; i++) {
		struct mpart *p = t->parts[i];
		if ((r->from_mask & (1u << p->state)) &&
		    !mpart_transition_ok(p->state, r->state))
			FAIL(a, "%s/%s-%d: %s -> %s is not an allowed transition",
			    t->mirror->name, t->name, (int)i,
			    mpart_state_name(p->state),
			    mpart_state_name(r->state));
	}
	snprintf(why, sizeof(why), "%.*s", r->str.len > 0 ? (int)r->str.len :
	    0, r->str.len > 0 ? r->str.p : "");
	for (int32_t i = 0; i < t->npart; i++) {
		struct mpart *p = t->parts[i];
		if ((r->from_mask & (1u << p->state)) &&
		    set_state(a, p, (enum mpart_state)r->state, why, 0) != 0)
			return -1;
	}
	return 0;
}

/* Sets p's error message from the record (cut at MAX_ERROR_MSG). */
static int set_error(struct apply *a, struct mpart *p, struct kstr s)
{
	char *e = NULL;

	if (s.len >= 0) {
		struct kstr cut = { s.p, MIN(s.len, MAX_ERROR_MSG) };
		int oom = 0;
		e = mstate_kdup(cut, &oom);
		if (oom)
			FAIL(a, "out of memory");
	}
	free(p->error);
	p->error = e;
	return 0;
}

static int apply_part_state(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	char why[256];

	if (p == NULL || check_state(a, r) != 0)
		return -1;
	if (!mpart_transition_ok(p->state, r->state))
		return set_state(a, p, (enum mpart_state)r->state, NULL, 0);
	snprintf(why, sizeof(why), "%.*s", r->str.len > 0 ? (int)MIN(r->str.len,
	    200) : 0, r->str.len > 0 ? r->str.p : "");
	if (r->flags & MREC_F_LAST) {
		p->last_offset = r->off;
		p->last_epoch = r->epoch;
	}
	if (r->state == MPART_FAILED) {
		/* Before the move, so the hooks see why. */
		if (set_error(a, p, r->str) != 0)
			return -1;
		p->retry_attempt = r->retry;
	}
	return set_state(a, p, (enum mpart_state)r->state, why, 0);
}

int mstate_realign_check(const struct mpart *p, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;

	if (!t->realign)
		return 0;
	mstate_fmt(err, errlen, "%s/%s-%d: the topic is being realigned (its "
	    "destination topic is deleted first): no write history is recorded "
	    "for it meanwhile", t->mirror->name, t->name, (int)p->index);
	return -1;
}

int mstate_epoch_check(const struct mpart *p, int32_t epoch, int64_t start,
    int *noop, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;

	*noop = 0;
	if (mstate_realign_check(p, err, errlen) != 0)
		return -1;
	if (epoch < 0 || start < 0) {
		mstate_fmt(err, errlen, "%s/%s-%d: epoch %d at offset %" PRId64 ": "
		    "negative", t->mirror->name, t->name, (int)p->index,
		    (int)epoch, start);
		return -1;
	}
	if (p->nepochs == 0)
		return 0;
	const struct mepoch *last = &p->epochs[p->nepochs - 1];
	if (epoch == last->epoch && start == last->start_offset) {
		*noop = 1;
		return 0;
	}
	if (epoch <= last->epoch || start < last->start_offset) {
		mstate_fmt(err, errlen, "%s/%s-%d: epoch %d at offset %" PRId64 " does "
		    "not follow epoch %d at offset %" PRId64, t->mirror->name,
		    t->name, (int)p->index, (int)epoch, start,
		    (int)last->epoch, last->start_offset);
		return -1;
	}
	return 0;
}

static int apply_part_epoch(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	int noop;

	if (p == NULL ||
	    mstate_epoch_check(p, r->epoch, r->off, &noop, a->err, a->errlen) != 0)
		return -1;
	if (noop)
		return 0;
	if (mstate_grow(&p->epochs, p->nepochs, sizeof(*p->epochs)) != 0)
		FAIL(a, "out of memory");
	p->epochs[p->nepochs].epoch = r->epoch;
	p->epochs[p->nepochs].start_offset = r->off;
	p->nepochs++;
	/* The history's epochs strictly increase, their offsets never go
	 * back (mstate_epoch_check()). */
	MR_ASSERT(p->nepochs < 2 ||
	    (p->epochs[p->nepochs - 1].epoch > p->epochs[p->nepochs - 2].epoch &&
	    p->epochs[p->nepochs - 1].start_offset >=
	    p->epochs[p->nepochs - 2].start_offset));
	return 0;
}

int mstate_producer_check(const struct mpart *p, int64_t pid, int32_t epoch,
    int64_t seq_base, int *noop, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;
	const struct mproducer *last;

	*noop = 0;
	if (mstate_realign_check(p, err, errlen) != 0)
		return -1;
	if (pid < 0 || epoch < 0 || epoch > INT16_MAX || seq_base < 0) {
		mstate_fmt(err, errlen, "%s/%s-%d: producer id %" PRId64 " epoch %d "
		    "from offset %" PRId64 ": out of range", t->mirror->name, t->name,
		    (int)p->index, pid, (int)epoch, seq_base);
		return -1;
	}
	if (p->nproducers == 0)
		return 0;
	last = &p->producers[p->nproducers - 1];
	*noop = last->pid == pid && last->epoch == epoch &&
	    last->seq_base == seq_base;
	return 0;
}

static int apply_part_producer(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	int noop;

	if (p == NULL || mstate_producer_check(p, r->off, r->epoch, r->off2, &noop,
	    a->err, a->errlen) != 0)
		return -1;
	if (noop)
		return 0;
	if (p->nproducers == MPART_MAX_PRODUCERS) {
		memmove(&p->producers[0], &p->producers[1],
		    (MPART_MAX_PRODUCERS - 1) * sizeof(p->producers[0]));
		p->nproducers--;
	}
	p->producers[p->nproducers].pid = r->off;
	p->producers[p->nproducers].epoch = r->epoch;
	p->producers[p->nproducers].seq_base = r->off2;
	p->nproducers++;
	return 0;
}

int mstate_anchor_check(const struct mpart *p, int64_t src, int64_t dst,
    int *action, struct manchor *fold, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;
	struct xlate_anchor tail[3], f;
	size_t k, n;

	*action = MST_ANCHOR_APPEND;
	if (mstate_realign_check(p, err, errlen) != 0)
		return -1;
	if (src < 0 || dst < 0) {
		mstate_fmt(err, errlen, "%s/%s-%d: anchor (%" PRId64 ", %" PRId64 "): "
		    "negative offset", t->mirror->name, t->name,
		    (int)p->index, src, dst);
		return -1;
	}
	if ((n = mpart_nanchors(p)) == 0)
		return 0;
	/* lib/xlate's merge rule, on the last three anchors */
	k = MIN(n, (size_t)3);
	for (size_t i = 0; i < k; i++)
		tail[i] = xlate_at(p->map, n - k + i);
	const struct xlate_anchor *l = &tail[k - 1];
	if (src < l->src || dst < l->dst) {
		mstate_fmt(err, errlen, "%s/%s-%d: anchor (%" PRId64 ", %" PRId64 ") "
		    "goes back from (%" PRId64 ", %" PRId64 ")",
		    t->mirror->name, t->name, (int)p->index, src, dst, l->src,
		    l->dst);
		return -1;
	}
	switch (xlate_rule(tail, k, src, dst, &f)) {
	case XLATE_R_NOOP:
		*action = MST_ANCHOR_NOOP;
		break;
	case XLATE_R_REPLACE:
		*action = MST_ANCHOR_REPLACE;
		break;
	case XLATE_R_FOLD:
		*action = MST_ANCHOR_FOLD;
		fold->src = f.src;
		fold->dst = f.dst;
		break;
	default:
		break;
	}
	return 0;
}

/* Adds one anchor to p with lib/xlate's merge rules. */
static int add_anchor(struct apply *a, struct mpart *p, int64_t src,
    int64_t dst)
{
	struct manchor fold;
	int action;

	if (mstate_anchor_check(p, src, dst, &action, &fold, a->err,
	    a->errlen) != 0)
		return -1;
	if (action == MST_ANCHOR_NOOP)
		return 0;
	/* lib/xlate merges as mstate_anchor_check() said: every offset maps
	 * as before, and a snapshot restores exactly this map. */
	if (p->map == NULL && (p->map = xlate_new(0)) == NULL)
		FAIL(a, "out of memory");
	if (xlate_add(p->map, src, dst, a->err, a->errlen) != 0)
		return -1;
	return 0;
}

static int apply_part_anchor(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);

	if (p == NULL)
		return -1;
	return add_anchor(a, p, r->off, r->off2);
}

/*
 * part-anchors: the part-sending offset (-1: unchanged) and a list of
 * anchors, each added as a part-anchor record would add it.  A record that
 * cannot apply whole changes nothing: the anchors are checked against the
 * partition (and each against the one before) first.
 */
static int apply_part_anchors(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	struct mrec_anchor *v;
	int64_t ls, ld;

	if (p == NULL || mstate_realign_check(p, a->err, a->errlen) != 0)
		return -1;
	if (r->off < -1)
		FAIL(a, "%s/%s-%d: batch sent to destination offset %" PRId64
		    ": negative", p->topic->mirror->name, p->topic->name,
		    (int)p->index, r->off);
	if ((v = calloc((size_t)r->nanchors, sizeof(*v))) == NULL)
		FAIL(a, "out of memory");
	if (mrec_anchors(r, v, a->err, a->errlen) != 0) {
		free(v);
		return -1;
	}
	/* mrec_decode() checked that the list ascends: the first anchor
	 * against the partition's last decides. */
	if (mpart_nanchors(p) > 0) {
		struct manchor l = mpart_anchor(p, mpart_nanchors(p) - 1);

		ls = l.src;
		ld = l.dst;
		if (v[0].src < ls || v[0].dst < ld) {
			mstate_fmt(a->err, a->errlen, "%s/%s-%d: anchor (%" PRId64
			    ", %" PRId64 ") goes back from (%" PRId64 ", %" PRId64
			    ")", p->topic->mirror->name, p->topic->name,
			    (int)p->index, v[0].src, v[0].dst, ls, ld);
			free(v);
			return -1;
		}
	}
	if (r->off >= 0)
		p->sending_dst = r->off;
	for (int32_t i = 0; i < r->nanchors; i++)
		if (add_anchor(a, p, v[i].src, v[i].dst) != 0) {
			/* Only out of memory, after the checks above. */
			free(v);
			return -1;
		}
	free(v);
	return 0;
}

size_t mstate_retract_anchors_at(const struct mpart *p, int64_t dst)
{
	return xlate_count_above_dst(p->map, dst);
}

/*
 * part-retract: the anchors whose destination offset lies above o go.
 * They were recorded for batches that never landed (the destination ends
 * at o), whose source batches changed since (mstate.h).
 */
static int apply_part_retract(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);

	if (p == NULL || mstate_realign_check(p, a->err, a->errlen) != 0)
		return -1;
	if (r->off < 0)
		FAIL(a, "%s/%s-%d: retract above destination offset %" PRId64
		    ": negative", p->topic->mirror->name, p->topic->name,
		    (int)p->index, r->off);
	if (p->map != NULL && xlate_drop_last(p->map,
	    mstate_retract_anchors_at(p, r->off)) != 0)
		FAIL(a, "out of memory");
	return 0;
}

size_t mstate_trim_epochs_at(const struct mpart *p, int64_t src_min,
    int64_t dst_min)
{
	int64_t below = MIN(src_min, dst_min);
	size_t lo = 0, hi = p->nepochs;

	/* keep the last entry starting at or below both: it covers them */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->epochs[mid].start_offset <= below)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 ? lo - 1 : 0;
}

size_t mstate_trim_anchors_at(const struct mpart *p, int64_t src_min,
    int64_t dst_min)
{
	return xlate_trim_point(p->map, src_min, dst_min);
}

/* Drops arr[0..drop) of n, giving memory back when most of it went
 * (keeping the capacity mstate_grow() assumes for the new count). */
static void drop_front(void *arrp, size_t *n, size_t drop, size_t elem)
{
	char **arr = arrp;
	size_t left = *n - drop, cap = 4;
	void *np;

	if (drop == 0)
		return;
	memmove(*arr, *arr + drop * elem, left * elem);
	*n = left;
	if (*n + drop < 256 || left > (*n + drop) / 4)
		return;
	while (cap < left)
		cap *= 2;
	if ((np = realloc(*arr, cap * elem)) != NULL)
		*arr = np;
}

static int apply_part_trim(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	size_t ne, na;

	if (p == NULL)
		return -1;
	if (r->off < 0 || r->off2 < 0)
		FAIL(a, "%s/%s-%d: trim below offsets %" PRId64 " and %" PRId64
		    ": negative", p->topic->mirror->name, p->topic->name,
		    (int)p->index, r->off, r->off2);
	ne = mstate_trim_epochs_at(p, r->off, r->off2);
	na = mstate_trim_anchors_at(p, r->off, r->off2);
	drop_front(&p->epochs, &p->nepochs, ne, sizeof(*p->epochs));
	if (na > 0)
		xlate_drop_first(p->map, na);
	return 0;
}

static int apply_part_sending(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);

	if (p == NULL || mstate_realign_check(p, a->err, a->errlen) != 0)
		return -1;
	if (r->off < 0)
		FAIL(a, "%s/%s-%d: batch sent to destination offset %" PRId64
		    ": negative", p->topic->mirror->name, p->topic->name,
		    (int)p->index, r->off);
	p->sending_dst = r->off;
	return 0;
}

/* ---- multi-instance mode --------------------------------------------------- */

static int member_cmp(const void *a, const void *b)
{
	const struct mmember *x = a, *y = b;

	return strcmp(x->instance_id, y->instance_id);
}

/* A copy of s, "" for null. */
static char *dup_or_empty(struct kstr s, int *oom)
{
	if (s.len < 0)
		s = kstr_c("");
	return mstate_kdup(s, oom);
}

static int apply_cluster_members(struct apply *a, const struct mrec *r)
{
	struct mstate *st = a->st;
	struct mrec_member *raw = NULL;
	struct mmember *mm = NULL;
	size_t n = (size_t)r->nmembers;
	int oom = 0, rc = -1;

	if (r->generation < 0)
		FAIL(a, "%s record: generation %d is negative",
		    mrec_type_name(r->type), (int)r->generation);
	if ((raw = calloc(n + 1, sizeof(*raw))) == NULL ||
	    (mm = calloc(n + 1, sizeof(*mm))) == NULL) {
		mstate_fmt(a->err, a->errlen, "out of memory");
		goto out;
	}
	if (mrec_members(r, raw, a->err, a->errlen) != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		mm[i].instance_id = mstate_kdup(raw[i].instance_id, &oom);
		mm[i].member_id = dup_or_empty(raw[i].member_id, &oom);
		mm[i].local_broker_id = raw[i].local_broker_id;
		mm[i].admin_addr = dup_or_empty(raw[i].admin_addr, &oom);
		mm[i].http_addr = dup_or_empty(raw[i].http_addr, &oom);
		if (oom) {
			mstate_fmt(a->err, a->errlen, "out of memory");
			n = i + 1;
			goto out;
		}
	}
	qsort(mm, n, sizeof(*mm), member_cmp);
	for (size_t i = 1; i < n; i++)
		if (strcmp(mm[i - 1].instance_id, mm[i].instance_id) == 0) {
			mstate_fmt(a->err, a->errlen, "%s record of generation %d "
			    "names instance %s twice", mrec_type_name(r->type),
			    (int)r->generation, mm[i].instance_id);
			goto out;
		}
	mstate_members_free(st->members, st->nmembers);
	st->members = mm;
	st->nmembers = n;
	st->generation = r->generation;
	mm = NULL;
	rc = 0;
	if (a->live)
		log_info("cluster: generation %d has %zu member%s", (int)r->generation,
		    st->nmembers, st->nmembers == 1 ? "" : "s");
	struct mstate_event ev = { .kind = MSTATE_EV_MEMBERS };
	mstate_emit(st, a->live, &ev);
out:
	if (mm != NULL)
		mstate_members_free(mm, n);
	free(raw);
	return rc;
}

static int apply_part_owner(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	const struct mtopic *t;
	char *owner = NULL, *was;
	int oom = 0;

	if (p == NULL)
		return -1;
	t = p->topic;
	if (r->str.len > MREC_MAX_ID)
		FAIL(a, "%s record for %s/%s-%d: owner of %d bytes (at most %d)",
		    mrec_type_name(r->type), t->mirror->name, t->name,
		    (int)p->index, (int)r->str.len, MREC_MAX_ID);
	if (r->str.len > 0 && (owner = mstate_kdup(r->str, &oom)) == NULL)
		FAIL(a, "out of memory");
	was = p->owner;
	p->owner = owner;
	p->owner_generation = r->generation;
	if ((was == NULL) != (owner == NULL) ||
	    (was != NULL && strcmp(was, owner) != 0)) {
		if (a->live)
			log_info("%s/%s-%d: owner %s -> %s (generation %d)",
			    t->mirror->name, t->name, (int)p->index,
			    was != NULL ? was : "(nobody)",
			    owner != NULL ? owner : "(nobody)", (int)r->generation);
		struct mstate_event ev = { .kind = MSTATE_EV_OWNER,
		    .mirror = t->mirror, .topic = t, .part = p,
		    .from = p->state, .to = p->state, .why = was };
		mstate_emit(a->st, a->live, &ev);
	}
	free(was);
	return 0;
}

static int apply_part_failover(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);

	if (p == NULL)
		return -1;
	if (p->state != MPART_STOPPED)
		FAIL(a, "%s/%s-%d: a failover report for a partition that is %s, "
		    "not STOPPED", p->topic->mirror->name, p->topic->name,
		    (int)p->index, mpart_state_name(p->state));
	if (r->off < -1 || r->off2 < -1 || r->off3 < -1)
		FAIL(a, "%s/%s-%d: failover report with a negative value "
		    "(%" PRId64 ", %" PRId64 ", %" PRId64 ")",
		    p->topic->mirror->name, p->topic->name, (int)p->index,
		    r->off, r->off2, r->off3);
	p->has_failover = 1;
	free(p->failover_note);   /* until a part-failover-note record says */
	p->failover_note = NULL;
	p->failover.src_hwm = r->off;
	p->failover.lag = r->off2;
	p->failover.lag_ms = r->off3;
	/* Until a part-failover-at record says (older logs have none). */
	p->failover.hwm_at = p->failover.stopped_at = -1;
	p->failover.asked = 1;
	return 0;
}

static int apply_part_failover_at(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);

	if (p == NULL)
		return -1;
	if (p->state != MPART_STOPPED || !p->has_failover)
		FAIL(a, "%s/%s-%d: failover times for a partition without a "
		    "failover report", p->topic->mirror->name, p->topic->name,
		    (int)p->index);
	if (r->off < -1 || r->off2 < -1)
		FAIL(a, "%s/%s-%d: failover times with a negative value (%" PRId64
		    ", %" PRId64 ")", p->topic->mirror->name, p->topic->name,
		    (int)p->index, r->off, r->off2);
	p->failover.hwm_at = r->off;
	p->failover.stopped_at = r->off2;
	p->failover.asked = (r->flags & MREC_F_ASKED) != 0;
	return 0;
}

/* What the final consumer-group offset sync at that stop missed (the
 * decoder bounded it: 1..MREC_MAX_NOTE bytes, no NUL). */
static int apply_part_failover_note(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	char *note;
	int oom = 0;

	if (p == NULL)
		return -1;
	if (p->state != MPART_STOPPED || !p->has_failover)
		FAIL(a, "%s/%s-%d: a final group sync note for a partition "
		    "without a failover report", p->topic->mirror->name,
		    p->topic->name, (int)p->index);
	note = mstate_kdup(r->str, &oom);
	if (oom || note == NULL)
		FAIL(a, "out of memory");
	free(p->failover_note);
	p->failover_note = note;
	return 0;
}

static int only_in_snapshot(struct apply *a, const struct mrec *r)
{
	if (!a->in_snapshot)
		FAIL(a, "%s record outside a snapshot", mrec_type_name(r->type));
	return 0;
}

static int apply_topic_restore(struct apply *a, const struct mrec *r)
{
	struct mirror *m;

	if (only_in_snapshot(a, r) != 0 || (m = need_mirror(a, r)) == NULL ||
	    check_count(a, r) != 0)
		return -1;
	return new_topic(a, m, r) != NULL ? 0 : -1;
}

static int apply_part_restore(struct apply *a, const struct mrec *r)
{
	struct mpart *p;

	if (only_in_snapshot(a, r) != 0 || (p = need_part(a, r)) == NULL ||
	    check_state(a, r) != 0)
		return -1;
	if (set_state(a, p, (enum mpart_state)r->state, "restored", 1) != 0)
		return -1;
	p->retry_attempt = r->retry;
	p->last_offset = r->off;
	p->last_epoch = r->epoch;
	return set_error(a, p, r->str);
}

static int apply_decoded(struct apply *a, const struct mrec *r)
{
	switch ((enum mrec_type)r->type) {
	case MREC_CLUSTER_ID: return apply_cluster_id(a, r);
	case MREC_MIRROR_CREATE: return apply_mirror_create(a, r);
	case MREC_MIRROR_DELETE: return apply_mirror_delete(a, r);
	case MREC_MIRROR_SOURCE: return apply_mirror_source(a, r);
	case MREC_MIRROR_PATTERN: return apply_mirror_pattern(a, r);
	case MREC_TOPIC_ADD: return apply_topic_add(a, r);
	case MREC_TOPIC_STATE: return apply_topic_state(a, r);
	case MREC_PART_STATE: return apply_part_state(a, r);
	case MREC_PART_EPOCH: return apply_part_epoch(a, r);
	case MREC_PART_ANCHOR: return apply_part_anchor(a, r);
	case MREC_PART_ANCHORS: return apply_part_anchors(a, r);
	case MREC_PART_RETRACT: return apply_part_retract(a, r);
	case MREC_TOPIC_RESTORE: return apply_topic_restore(a, r);
	case MREC_PART_RESTORE: return apply_part_restore(a, r);
	case MREC_MIRROR_CONFIGS: return apply_mirror_configs(a, r);
	case MREC_PART_TRIM: return apply_part_trim(a, r);
	case MREC_TOPIC_IDENT: return apply_topic_ident(a, r);
	case MREC_PART_PRODUCER: return apply_part_producer(a, r);
	case MREC_PART_SENDING: return apply_part_sending(a, r);
	case MREC_CLUSTER_MEMBERS: return apply_cluster_members(a, r);
	case MREC_PART_OWNER: return apply_part_owner(a, r);
	case MREC_ACL_BINDING:
		return mstate_acl_apply(a->st, r->mirror, r->kind, r->str,
		    (r->flags & MREC_F_ADD) != 0, a->err, a->errlen);
	case MREC_PART_FAILOVER: return apply_part_failover(a, r);
	case MREC_PART_FAILOVER_AT: return apply_part_failover_at(a, r);
	case MREC_PART_FAILOVER_NOTE: return apply_part_failover_note(a, r);
	case MREC_TOPIC_REALIGN: return apply_topic_realign(a, r);
	}
	FAIL(a, "record type %u has no apply function", r->type);
}

static int apply_payload(struct mstate *st, uint16_t type, const uint8_t *p,
    size_t len, int live, int in_snapshot, char *err, size_t errlen)
{
	struct mrec r;
	struct apply a = { .st = st, .live = live, .in_snapshot = in_snapshot,
	    .err = err, .errlen = errlen };

	if (mrec_decode(type, p, len, &r, st->cfgbuf, MREC_MAX_CONFIGS, err,
	    errlen) != 0)
		return -1;
	return apply_decoded(&a, &r);
}

int mstate_apply_rec(void *arg, const struct mlog_rec *rec, char *err,
    size_t errlen)
{
	return apply_payload(arg, rec->type, rec->p, rec->len, rec->live,
	    rec->in_snapshot, err, errlen);
}

int mstate_record_scope(struct mstate *st, uint16_t type, const uint8_t *p,
    size_t len, struct mpart **out, char *err, size_t errlen)
{
	struct mrec r;
	struct apply a = { .st = st, .err = err, .errlen = errlen };

	*out = NULL;
	if (mrec_decode(type, p, len, &r, st->cfgbuf, MREC_MAX_CONFIGS, err,
	    errlen) != 0)
		return -1;
	switch ((enum mrec_type)r.type) {
	case MREC_PART_STATE:
	case MREC_PART_EPOCH:
	case MREC_PART_ANCHOR:
	case MREC_PART_ANCHORS:
	case MREC_PART_RETRACT:
	case MREC_PART_TRIM:
	case MREC_PART_PRODUCER:
	case MREC_PART_SENDING:
	case MREC_PART_FAILOVER:
	case MREC_PART_FAILOVER_AT:
	case MREC_PART_FAILOVER_NOTE:
		if ((*out = need_part(&a, &r)) == NULL)
			return -1;
		return MSTATE_SCOPE_PART;
	case MREC_CLUSTER_ID:
	case MREC_CLUSTER_MEMBERS:
	case MREC_PART_OWNER:
		mstate_fmt(err, errlen, "a %s record is written only by the "
		    "metadata writer itself", mrec_type_name(r.type));
		return -1;
	case MREC_TOPIC_RESTORE:
	case MREC_PART_RESTORE:
		mstate_fmt(err, errlen, "a %s record belongs only in a snapshot",
		    mrec_type_name(r.type));
		return -1;
	case MREC_MIRROR_CREATE:
	case MREC_MIRROR_DELETE:
	case MREC_MIRROR_SOURCE:
	case MREC_MIRROR_PATTERN:
	case MREC_MIRROR_CONFIGS:
	case MREC_TOPIC_ADD:
	case MREC_TOPIC_STATE:
	case MREC_TOPIC_IDENT:
	case MREC_TOPIC_REALIGN:
	case MREC_ACL_BINDING:
		return MSTATE_SCOPE_NONE;
	}
	mstate_fmt(err, errlen, "record type %u has no scope", r.type);
	return -1;
}

/* ---- persistence -------------------------------------------------------- */

static int scratch_check(struct mstate *st, const struct mlog_rec *recs,
    size_t n, const char *label, const char *where, char *msg, size_t msglen);

void mstate_batch_clear(struct mstate *st)
{
	for (size_t i = 0; i < st->npending; i++)
		free(st->pending[i].buf);
	free(st->pending);
	st->pending = NULL;
	st->npending = 0;
}

/*
 * Batch mode: appends the records (no sync) and keeps them, buffers
 * handed over, for mstate_batch_commit().  An append that fails takes
 * back what this operation appended; the batch's earlier records stay.
 */
static int queue(struct mstate *st, const struct mrec *recs, uint8_t **bufs,
    size_t *lens, size_t n, const char *what, char *msg, size_t msglen)
{
	char err[1024];
	size_t i;

	if (st->batch_failed) {
		mstate_fmt(msg, msglen, "%s: the change was not made, an earlier "
		    "change of this batch could not be written", what);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (mstate_grow(&st->pending, st->npending + i,
		    sizeof(*st->pending)) != 0) {
			mstate_fmt(err, sizeof(err), "out of memory");
			break;
		}
		if (mlog_append(st->ml, recs[i].type, bufs[i], lens[i], err,
		    sizeof(err)) != 0)
			break;
		st->pending[st->npending + i].type = recs[i].type;
		st->pending[st->npending + i].buf = bufs[i];
		st->pending[st->npending + i].len = lens[i];
	}
	if (i < n) {
		/* The log cannot take back one operation's records alone:
		 * the whole batch fails (commit says so for all of it). */
		mlog_discard(st->ml);
		mstate_batch_clear(st);
		st->batch_failed = 1;
		mstate_fmt(msg, msglen, "%s: the change was not made, the "
		    "metadata log cannot take it (the whole batch is dropped): "
		    "%s", what, err);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	st->npending += n;
	for (i = 0; i < n; i++)
		bufs[i] = NULL;   /* now owned by st->pending */
	return KERR_NONE;
}

int mstate_batch_begin(struct mstate *st)
{
	if (st->batch || st->ml == NULL)
		return -1;
	mstate_async_drain(st);
	st->batch = 1;
	return 0;
}

int mstate_batch_commit(struct mstate *st, char *msg, size_t msglen)
{
	char err[1024];
	int rc = KERR_NONE;

	if (!st->batch) {
		mstate_fmt(msg, msglen, "no batch is open");
		return KERR_INVALID_REQUEST;
	}
	st->batch = 0;
	if (st->batch_failed) {
		st->batch_failed = 0;
		mstate_fmt(msg, msglen, "none of the batch's changes were made, "
		    "the metadata log refused a write");
		return KERR_KAFKA_STORAGE_ERROR;
	}
	if (st->npending == 0)
		return KERR_NONE;
	if (st->ml->base != NULL)
		st->astats.sync_writes++;   /* the loop waits for it */
	if (mlog_sync(st->ml, err, sizeof(err)) != 0) {
		int16_t code = st->ml->sync_error;

		mlog_discard(st->ml);
		mstate_batch_clear(st);
		if (code != 0) {
			mstate_fmt(msg, msglen, "the batch's changes: %s", err);
			return code;
		}
		mstate_fmt(msg, msglen, "none of the batch's changes were made, "
		    "the metadata log cannot persist them: %s", err);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	for (size_t i = 0; i < st->npending && !st->ml->applies_on_sync; i++) {
		struct mstate_pending *q = &st->pending[i];
		if (apply_payload(st, q->type, q->buf, q->len, 1, 0, err,
		    sizeof(err)) != 0) {
			/* Each was validated against the model before the
			 * batch; operations on one topic in one batch can
			 * still collide.  The record is durable: a bug. */
			log_errorx("batch: a persisted %s record does not "
			    "apply: %s", mrec_type_name(q->type), err);
			mstate_fmt(msg, msglen, "internal error: %s", err);
			rc = KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	mstate_batch_clear(st);
	mstate_maybe_compact(st);
	return rc;
}

void mstate_batch_abort(struct mstate *st)
{
	if (!st->batch)
		return;
	st->batch = 0;
	st->batch_failed = 0;
	mlog_discard(st->ml);
	mstate_batch_clear(st);
}

/*
 * Encodes, appends and syncs n records, then applies them.  Nothing is
 * applied unless all of them are durable.  In a batch, only appends and
 * queues them.  what names the object for the message.
 */
int mstate_persist(struct mstate *st, const struct mrec *recs, size_t n,
    const char *what, char *msg, size_t msglen)
{
	char err[1024];
	struct kw w;
	uint8_t **bufs;
	size_t *lens;
	int rc = KERR_NONE, recheck = 0;
	size_t i;

	if (st->ml == NULL) {
		mstate_fmt(msg, msglen, "%s: the metadata log is not open", what);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	/* The log order is the apply order: asynchronous writes first.  An
	 * operator's write among them may change what the caller validated
	 * these records against: then they are checked again below. */
	if (!st->batch) {
		recheck = st->excl == MSTATE_EXCL_FLIGHT;
		mstate_async_drain(st);
	}
	bufs = calloc(n, sizeof(*bufs));
	lens = calloc(n, sizeof(*lens));
	if (bufs == NULL || lens == NULL) {
		mstate_fmt(msg, msglen, "%s: out of memory", what);
		rc = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	for (i = 0; i < n; i++) {
		kw_init(&w, st->ml->opts.max_record);
		if (mrec_encode(&recs[i], &w, err, sizeof(err)) != 0) {
			kw_fini(&w);
			mstate_fmt(msg, msglen, "%s: the change cannot be recorded: %s",
			    what, err);
			rc = KERR_INVALID_REQUEST;
			goto out;
		}
		bufs[i] = kw_take(&w, &lens[i]);
		if (bufs[i] == NULL) {
			mstate_fmt(msg, msglen, "%s: out of memory", what);
			rc = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
	}
	if (st->batch) {
		rc = queue(st, recs, bufs, lens, n, what, msg, msglen);
		goto out;
	}
	if (recheck) {
		struct mlog_rec *lr = calloc(n, sizeof(*lr));

		for (i = 0; lr != NULL && i < n; i++)
			lr[i] = (struct mlog_rec){ .type = recs[i].type,
			    .p = bufs[i], .len = lens[i] };
		if (lr == NULL)
			mstate_fmt(err, sizeof(err), "out of memory");
		rc = lr == NULL ? KERR_UNKNOWN_SERVER_ERROR :
		    scratch_check(st, lr, n, "record", "", err, sizeof(err));
		free(lr);
		if (rc != KERR_NONE) {
			mstate_fmt(msg, msglen, "%s: not recorded, an operator's "
			    "command changed what it depends on meanwhile: %s",
			    what, err);
			if (rc == KERR_INVALID_REQUEST)
				rc = KERR_INVALID_CLUSTER_MIRROR_STATES;
			goto out;
		}
	}
	for (i = 0; i < n; i++)
		if (mlog_append(st->ml, recs[i].type, bufs[i], lens[i], err,
		    sizeof(err)) != 0)
			break;
	if (i == n && st->ml->base != NULL)
		st->astats.sync_writes++;
	if (i < n || mlog_sync(st->ml, err, sizeof(err)) != 0) {
		mlog_discard(st->ml);
		if (i == n && st->ml->sync_error != 0) {
			/* A follower's write the writer refused (its
			 * message), or whose outcome is unknown. */
			mstate_fmt(msg, msglen, "%s: %s", what, err);
			rc = st->ml->sync_error;
			goto out;
		}
		mstate_fmt(msg, msglen, "%s: the change was not made, the metadata log "
		    "cannot persist it: %s", what, err);
		rc = KERR_KAFKA_STORAGE_ERROR;
		goto out;
	}
	/* A follower's sync applied them already, live, in log order. */
	for (i = 0; i < n && !st->ml->applies_on_sync; i++) {
		if (apply_payload(st, recs[i].type, bufs[i], lens[i], 1, 0, err,
		    sizeof(err)) != 0) {
			/* Validated before it was written: a bug. */
			log_errorx("%s: a persisted %s record does not apply: %s",
			    what, mrec_type_name(recs[i].type), err);
			mstate_fmt(msg, msglen, "%s: internal error: %s", what, err);
			rc = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
	}
	/* The record/byte trigger of compaction.  It runs on the caller's
	 * thread: a snapshot of the model is small and this is rare (every
	 * storage.snapshot_every_records records). */
	mstate_maybe_compact(st);
out:
	if (bufs != NULL)
		for (i = 0; i < n; i++)
			free(bufs[i]);
	free(bufs);
	free(lens);
	return rc;
}

/* ---- asynchronous persists (group commit) ----------------------------- */

struct mstate_agroup {
	struct mstate *st;
	struct mstate_aop *ops;
	size_t nops;
};

static void aop_free(struct mstate_aop *op)
{
	for (size_t i = 0; i < op->n; i++)
		free(op->bufs[i]);
	free(op->bufs);
	free(op->lens);
	free(op->types);
	free(op->what);
	free(op->msg);
	free(op);
}

static void aop_set(struct mstate_aop *op, int rc, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
static void aop_set(struct mstate_aop *op, int rc, const char *fmt, ...)
{
	va_list ap;
	char buf[1536];

	op->rc = rc;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	free(op->msg);
	op->msg = strdup(buf);
}

static void on_callbacks(evutil_socket_t fd, short what, void *arg)
{
	struct mstate *st = arg;

	(void)fd;
	(void)what;
	/* One at a time: a callback may start new writes. */
	while (st->done_head != NULL) {
		struct mstate_aop *op = st->done_head;
		st->done_head = op->next;
		if (st->done_head == NULL)
			st->done_tail = NULL;
		if (st->astats.in_flight > 0)
			st->astats.in_flight--;
		if (op->cb != NULL)   /* NULL: mstate_excl_cancel() */
			op->cb(op->arg, op->rc, op->rc == KERR_NONE ? NULL :
			    op->msg);
		aop_free(op);
	}
}

/* Moves finished ops (a list) to the callback queue. */
static void defer_callbacks(struct mstate *st, struct mstate_aop *ops)
{
	struct mstate_aop *last;

	if (ops == NULL)
		return;
	for (last = ops; last->next != NULL; last = last->next)
		;
	if (st->done_tail != NULL)
		st->done_tail->next = ops;
	else
		st->done_head = ops;
	st->done_tail = last;
	if (st->cb_ev != NULL)
		event_active(st->cb_ev, 0, 0);
}

/* The replicated log could not confirm a write (mlog_kafka: no answer
 * within storage.kafka.timeout_ms): it may have landed. */
static int outcome_unknown(const char *why)
{
	return strstr(why, "outcome is unknown") != NULL ||
	    strstr(why, "outcome unknown") != NULL;
}

static void fail_ops(struct mstate *st, struct mstate_aop *ops, int rc,
    const char *why)
{
	for (struct mstate_aop *op = ops; op != NULL; op = op->next) {
		if (outcome_unknown(why))
			aop_set(op, rc, "%s: the metadata log could not confirm "
			    "the change, it may or may not be made (a restart "
			    "shows which): %s", op->what, why);
		else
			aop_set(op, rc, "%s: the change was not made, the "
			    "metadata log cannot persist it: %s", op->what, why);
	}
	defer_callbacks(st, ops);
}

static void start_group(struct mstate *st);
static void release_held(struct mstate *st, int check);
static void excl_poke(struct mstate *st);
static void excl_next(struct mstate *st);

/* The operator's write in flight failed.  When the log is broken the
 * writes held behind it fail the same way; when it is not (a follower's
 * write the writer refused) they go on, checked, as after a success. */
static void excl_failed(struct mstate *st, int code, const char *why)
{
	struct mstate_aop *held = st->held_head;
	struct mlog_stats ls;

	if (st->excl != MSTATE_EXCL_FLIGHT)
		return;
	st->excl = MSTATE_EXCL_NONE;
	st->excl_op = NULL;
	mlog_stats(st->ml, &ls);
	if (!ls.broken) {
		release_held(st, 1);
	} else {
		st->held_head = st->held_tail = NULL;
		fail_ops(st, held, code, why);
	}
	excl_next(st);
}

static void compact_done(void *arg, int rc, int16_t sync_error,
    const char *err)
{
	(void)arg;
	(void)sync_error;
	if (rc != 0)
		log_errorx("metadata log compaction failed: %s", err);
}

static int aop_append(struct mstate *st, struct mstate_aop *op, char *err,
    size_t errlen);

/* Appends op (taken off its list; next is the rest) for the next group:
 * 0, or -1 when the log refuses it: then op and next fail (aop_append()
 * failed the ones appended before). */
static int append_or_fail(struct mstate *st, struct mstate_aop *op,
    struct mstate_aop *next)
{
	char err[1024];

	if (aop_append(st, op, err, sizeof(err)) == 0)
		return 0;
	aop_set(op, KERR_KAFKA_STORAGE_ERROR, "%s: the change was not made, "
	    "the metadata log cannot persist it: %s", op->what, err);
	defer_callbacks(st, op);
	fail_ops(st, next, KERR_KAFKA_STORAGE_ERROR, err);
	return -1;
}

/* Appends ops again, in order, for the next group. */
static void requeue_ops(struct mstate *st, struct mstate_aop *ops)
{
	struct mstate_aop *op, *next;

	for (op = ops; op != NULL; op = next) {
		next = op->next;
		op->next = NULL;
		if (append_or_fail(st, op, next) != 0)
			return;
	}
}

/*
 * A follower's group the writer refused (mstate_set_instance()): its ops
 * with a record of a partition this instance no longer owns go to *lost,
 * the others to *keep, both in order.  0 (ops untouched) unless both are
 * non-empty and the operator's write is not among them.
 */
static int split_lost(struct mstate *st, struct mstate_aop *ops,
    struct mstate_aop **lost, struct mstate_aop **keep)
{
	struct mstate_aop *op, *next, **lt = lost, **kt = keep;
	size_t nlost = 0, n = 0;
	char err[512];

	*lost = *keep = NULL;
	if (st->instance == NULL)
		return 0;
	for (op = ops; op != NULL; op = op->next) {
		if (op->excl)
			return 0;
		n++;
		op->from_lost = 0;
		for (size_t i = 0; i < op->n && !op->from_lost; i++) {
			struct mpart *p = NULL;
			int scope = mstate_record_scope(st, op->types[i],
			    op->bufs[i], op->lens[i], &p, err, sizeof(err));

			/* Gone with its topic or mirror, or moved. */
			if (scope < 0 || (scope == MSTATE_SCOPE_PART &&
			    !mpart_owned_by(p, st->instance)))
				op->from_lost = 1;
		}
		nlost += (size_t)op->from_lost;
	}
	if (nlost == 0 || nlost == n)
		return 0;
	for (op = ops; op != NULL; op = next) {
		next = op->next;
		op->next = NULL;
		if (op->from_lost) {
			*lt = op;
			lt = &op->next;
		} else {
			*kt = op;
			kt = &op->next;
		}
	}
	return 1;
}

/*
 * A group the log did not write and hands back (MLOG_E_RESEND: this
 * follower became the metadata writer before any writer answered its
 * request).  The model may have moved since its ops were checked: those
 * of partitions this instance no longer owns fail as after a refusal;
 * the others are checked again against the model, together and in order
 * as the writer checks a forwarded request, and go first in the next
 * group, before the ops queued after it (acc).  0 when that was done, -1
 * when the group fails as it is (the operator's write is among it).
 */
static int resend_ops(struct mstate *st, struct mstate_aop *ops,
    struct mstate_aop *acc, const char *why)
{
	struct mstate_aop *op, *lost = NULL, *keep = NULL;
	struct mlog_rec *recs;
	size_t n = 0, i = 0;
	char msg[1024];
	int rc;

	for (op = ops; op != NULL; op = op->next)
		if (op->excl)
			return -1;
	if (!split_lost(st, ops, &lost, &keep)) {
		if (ops != NULL && ops->from_lost)
			lost = ops;
		else
			keep = ops;
	}
	if (lost != NULL)
		fail_ops(st, lost, KERR_NOT_LEADER_OR_FOLLOWER, why);
	for (op = keep; op != NULL; op = op->next)
		n += op->n;
	if ((recs = calloc(n + 1, sizeof(*recs))) == NULL) {
		fail_ops(st, keep, KERR_KAFKA_STORAGE_ERROR, "out of memory");
		requeue_ops(st, acc);
		return 0;
	}
	for (op = keep; op != NULL; op = op->next)
		for (size_t r = 0; r < op->n; r++, i++) {
			recs[i].type = op->types[r];
			recs[i].p = op->bufs[r];
			recs[i].len = (uint32_t)op->lens[r];
		}
	rc = n == 0 ? KERR_NONE : scratch_check(st, recs, n, "record",
	    " to the writer's model", msg, sizeof(msg));
	free(recs);
	if (rc != KERR_NONE) {
		log_warnx("metadata log: %zu record(s) this instance sent as a "
		    "follower no longer apply now that it writes the log: %s", n,
		    msg);
		fail_ops(st, keep, rc, msg);
	} else if (keep != NULL) {
		log_info("metadata log: %zu record(s) this instance sent as a "
		    "follower, never answered, go again as the writer's", n);
		st->astats.split_groups++;
		requeue_ops(st, keep);
	}
	requeue_ops(st, acc);
	return 0;
}

/* The log's completion of a group: apply its records in order, defer the
 * callbacks, maybe snapshot, then start the next group. */
static void group_done(void *arg, int rc, int16_t sync_error,
    const char *err)
{
	struct mstate_agroup *g = arg;
	struct mstate *st = g->st;
	char aerr[1024];

	/* One group in flight at a time: groups complete in log order. */
	MR_ASSERT(st->inflight == g);
	st->inflight = NULL;
	if (rc != 0) {
		int code = sync_error != 0 ? sync_error :
		    KERR_KAFKA_STORAGE_ERROR;
		const char *why = err != NULL ? err : "failed";
		struct mstate_aop *acc = st->acc_head, *lost, *keep;
		struct mlog_stats ls;

		/* The records appended since (the ops queued for the next
		 * group) go too. */
		mlog_discard(st->ml);
		st->acc_head = st->acc_tail = NULL;
		mlog_stats(st->ml, &ls);
		/* (only a writer's: a follower told so fails as refused) */
		if (!ls.broken && sync_error == MLOG_E_RESEND &&
		    !st->ml->applies_on_sync &&
		    resend_ops(st, g->ops, acc, why) == 0) {
			free(g);
			start_group(st);
			excl_poke(st);
			return;
		}
		if (!ls.broken && split_lost(st, g->ops, &lost, &keep)) {
			/* Some of its partitions moved to another instance
			 * while it was out: those writes fail, the others go
			 * again, before the ones queued after them. */
			size_t nl = 0, nk = 0;

			for (struct mstate_aop *o = lost; o != NULL; o = o->next)
				nl++;
			for (struct mstate_aop *o = keep; o != NULL; o = o->next)
				nk++;
			log_info("metadata log: the writer refused a group (%s); "
			    "%zu write(s) of partitions this instance no longer "
			    "owns fail, the other %zu go again", why, nl, nk);
			fail_ops(st, lost, code, why);
			st->astats.split_groups++;
			requeue_ops(st, keep);
			if (st->acc_head == NULL && keep != NULL) {
				/* The log refused them: failed with acc. */
				fail_ops(st, acc, KERR_KAFKA_STORAGE_ERROR,
				    "the metadata log refused a write");
				acc = NULL;
			}
		} else {
			fail_ops(st, g->ops, code, why);
		}
		if (ls.broken)
			/* The next group would fail the same way. */
			fail_ops(st, acc, code, why);
		else
			/* Refused (a follower's group the writer refused) or
			 * never sent: the log is usable.  The ops queued after
			 * it were validated without it (the model shows only
			 * completed writes): appended again, the next group. */
			requeue_ops(st, acc);
		excl_failed(st, code, why);
		free(g);
		start_group(st);
		excl_poke(st);
		return;
	}
	st->astats.groups++;
	st->astats.last_group_ops = g->nops;
	if (g->nops > st->astats.max_group_ops)
		st->astats.max_group_ops = g->nops;
	for (struct mstate_aop *op = g->ops; op != NULL; op = op->next) {
		op->rc = KERR_NONE;
		st->astats.ops++;
		if (op == st->excl_op)
			st->excl_op = NULL;
		/* A write's records are applied once, in the log's order. */
		MR_ASSERT(!op->applied);
		op->applied = 1;
		/* A follower's log applied them already, live. */
		for (size_t i = 0; i < op->n && !st->ml->applies_on_sync; i++) {
			if (apply_payload(st, op->types[i], op->bufs[i],
			    op->lens[i], 1, 0, aerr, sizeof(aerr)) != 0) {
				/* Validated before it was written: a bug. */
				log_errorx("%s: a persisted %s record does not "
				    "apply: %s", op->what,
				    mrec_type_name(op->types[i]), aerr);
				aop_set(op, KERR_UNKNOWN_SERVER_ERROR, "%s: "
				    "internal error: %s", op->what, aerr);
				break;
			}
		}
	}
	defer_callbacks(st, g->ops);
	free(g);
	/* The model holds every record handed to the log: the moment for a
	 * snapshot, written on the log's own thread. */
	if (mlog_in_flight(st->ml) == 0 && mlog_want_compact(st->ml)) {
		if (mlog_compact_async(st->ml, mstate_dump_records, st,
		    compact_done, NULL, aerr, sizeof(aerr)) != 0)
			log_errorx("metadata log compaction failed: %s", aerr);
	}
	if (st->excl == MSTATE_EXCL_FLIGHT && st->excl_op == NULL) {
		/* The operator's write is applied: the writes held meanwhile
		 * go now, each checked against it. */
		st->excl = MSTATE_EXCL_NONE;
		release_held(st, 1);
		excl_next(st);
	}
	start_group(st);
	excl_poke(st);
}

/* Hands every accumulated op to the log as one group. */
static void start_group(struct mstate *st)
{
	struct mstate_agroup *g;
	char err[1024];
	size_t n = 0;

	if (st->inflight != NULL || st->acc_head == NULL)
		return;
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		mlog_discard(st->ml);
		struct mstate_aop *acc = st->acc_head;
		st->acc_head = st->acc_tail = NULL;
		fail_ops(st, acc, KERR_KAFKA_STORAGE_ERROR, "out of memory");
		excl_failed(st, KERR_KAFKA_STORAGE_ERROR, "out of memory");
		return;
	}
	g->st = st;
	g->ops = st->acc_head;
	for (struct mstate_aop *op = g->ops; op != NULL; op = op->next)
		n++;
	g->nops = n;
	st->acc_head = st->acc_tail = NULL;
	st->inflight = g;
	if (mlog_sync_async(st->ml, group_done, g, err, sizeof(err)) != 0) {
		st->inflight = NULL;
		mlog_discard(st->ml);
		fail_ops(st, g->ops, st->ml->sync_error != 0 ?
		    st->ml->sync_error : KERR_KAFKA_STORAGE_ERROR, err);
		excl_failed(st, st->ml->sync_error != 0 ?
		    st->ml->sync_error : KERR_KAFKA_STORAGE_ERROR, err);
		free(g);
	}
}

/* Appends an op's records and queues it for the next group; -1 when the
 * log refuses (it is broken: the ops queued before it fail too). */
static int aop_append(struct mstate *st, struct mstate_aop *op, char *err,
    size_t errlen)
{
	struct mstate_aop *acc;
	size_t i;

	MR_ASSERT(!op->applied);   /* never written twice */
	for (i = 0; i < op->n; i++)
		if (mlog_append(st->ml, op->types[i], op->bufs[i], op->lens[i],
		    err, errlen) != 0)
			break;
	if (i == op->n) {
		op->next = NULL;
		if (st->acc_tail != NULL)
			st->acc_tail->next = op;
		else
			st->acc_head = op;
		st->acc_tail = op;
		return 0;
	}
	/* Only when the log is broken (encode kept the sizes in bounds). */
	mlog_discard(st->ml);
	acc = st->acc_head;
	st->acc_head = st->acc_tail = NULL;
	fail_ops(st, acc, KERR_KAFKA_STORAGE_ERROR, err);
	return -1;
}

static int ensure_cb_ev(struct mstate *st, const char *what, char *msg,
    size_t msglen)
{
	if (st->cb_ev != NULL)
		return 0;
	if (st->ml->base == NULL) {
		mstate_fmt(msg, msglen, "%s: asynchronous metadata writes need "
		    "the log's event base", what);
		return -1;
	}
	st->cb_ev = event_new(st->ml->base, -1, 0, on_callbacks, st);
	if (st->cb_ev == NULL) {
		mstate_fmt(msg, msglen, "%s: out of memory", what);
		return -1;
	}
	return 0;
}

int mstate_persist_async(struct mstate *st, const struct mrec *recs,
    size_t n, const char *what, mstate_done_fn cb, void *arg, char *msg,
    size_t msglen)
{
	struct mstate_aop *op;
	char err[1024];
	struct kw w;
	size_t i;

	if (st->ml == NULL) {
		mstate_fmt(msg, msglen, "%s: the metadata log is not open", what);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	if (st->batch) {
		mstate_fmt(msg, msglen, "%s: an asynchronous write while a "
		    "batch is open", what);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	if (ensure_cb_ev(st, what, msg, msglen) != 0)
		return KERR_UNKNOWN_SERVER_ERROR;
	op = calloc(1, sizeof(*op));
	if (op == NULL || (op->bufs = calloc(n, sizeof(*op->bufs))) == NULL ||
	    (op->lens = calloc(n, sizeof(*op->lens))) == NULL ||
	    (op->types = calloc(n, sizeof(*op->types))) == NULL ||
	    (op->what = strdup(what)) == NULL) {
		if (op != NULL)
			aop_free(op);
		mstate_fmt(msg, msglen, "%s: out of memory", what);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	op->n = n;
	op->cb = cb;
	op->arg = arg;
	for (i = 0; i < n; i++) {
		kw_init(&w, st->ml->opts.max_record);
		if (mrec_encode(&recs[i], &w, err, sizeof(err)) != 0) {
			kw_fini(&w);
			mstate_fmt(msg, msglen, "%s: the change cannot be "
			    "recorded: %s", what, err);
			aop_free(op);
			return KERR_INVALID_REQUEST;
		}
		op->types[i] = recs[i].type;
		op->bufs[i] = kw_take(&w, &op->lens[i]);
		if (op->bufs[i] == NULL) {
			mstate_fmt(msg, msglen, "%s: out of memory", what);
			aop_free(op);
			return KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	if (st->excl != MSTATE_EXCL_NONE) {
		/* An operator's write is wanted or in flight: held, and
		 * appended once that one is applied (checked against it).
		 * A state change was decided from the state now: kept. */
		op->from_state = -1;
		for (i = 0; i < n; i++) {
			struct mpart *pp;

			if (recs[i].type == MREC_PART_STATE &&
			    mstate_record_scope(st, op->types[i], op->bufs[i],
			    op->lens[i], &pp, err, sizeof(err)) ==
			    MSTATE_SCOPE_PART && pp != NULL)
				op->from_state = pp->state;
		}
		if (st->held_tail != NULL)
			st->held_tail->next = op;
		else
			st->held_head = op;
		st->held_tail = op;
		st->astats.in_flight++;
		st->astats.held++;
		return KERR_NONE;
	}
	if (aop_append(st, op, err, sizeof(err)) != 0) {
		mstate_fmt(msg, msglen, "%s: the change was not made, the "
		    "metadata log cannot persist it: %s", what, err);
		aop_free(op);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	st->astats.in_flight++;
	start_group(st);
	return KERR_NONE;
}

/* ---- exclusive writes (the operator's commands) ----------------------- */

/* 1 when the op has a record in a mirror the exclusive write named (or
 * either names no mirror): only then can that write have changed whether
 * the op's records apply. */
static int held_touched(struct mstate *st, const struct mstate_aop *op)
{
	char err[256];
	struct mrec r;

	if (st->excl_all)
		return 1;
	for (size_t i = 0; i < op->n; i++) {
		if (mrec_decode(op->types[i], op->bufs[i], op->lens[i], &r,
		    st->cfgbuf, MREC_MAX_CONFIGS, err, sizeof(err)) != 0 ||
		    r.mirror.len < 0)
			return 1;
		for (size_t k = 0; k < st->nexcl_mirrors; k++)
			if (mstate_kcmp(r.mirror, st->excl_mirrors[k]) == 0)
				return 1;
	}
	return 0;
}

/* 1 (err says how) when the op changes a partition's state and the
 * operator's write moved that partition since the op was decided: the
 * change was meant for the state before (a MIRRORING decided from
 * PREPARING must not undo a pause, although PAUSING -> MIRRORING is a
 * valid move). */
static int moved_meanwhile(struct mstate *st, const struct mstate_aop *op,
    char *err, size_t errlen)
{
	char e[256];
	struct mpart *p;

	if (op->from_state < 0)
		return 0;
	for (size_t i = 0; i < op->n; i++) {
		if (op->types[i] != MREC_PART_STATE)
			continue;
		if (mstate_record_scope(st, op->types[i], op->bufs[i],
		    op->lens[i], &p, e, sizeof(e)) != MSTATE_SCOPE_PART ||
		    p == NULL)
			return 0;   /* gone: the scratch check says so */
		if ((int)p->state != op->from_state) {
			mstate_fmt(err, errlen, "moved it from %s to %s "
			    "meanwhile", mpart_state_name(op->from_state),
			    mpart_state_name(p->state));
			return 1;
		}
	}
	return 0;
}

static void excl_mirrors_clear(struct mstate *st)
{
	for (size_t k = 0; k < st->nexcl_mirrors; k++)
		free(st->excl_mirrors[k]);
	free(st->excl_mirrors);
	st->excl_mirrors = NULL;
	st->nexcl_mirrors = 0;
	st->excl_all = 0;
}

/*
 * Hands the held ops to the log in the order they came.  With check, an
 * operator's write was applied since they were validated: an op it could
 * reach is checked again against the model and refused (its callback
 * says why) when its records no longer apply, so that every record in
 * the log still applies at replay.
 */
static void release_held(struct mstate *st, int check)
{
	struct mstate_aop *op = st->held_head, *next;
	char err[1024];

	st->held_head = st->held_tail = NULL;
	for (; op != NULL; op = next) {
		/* Decoded once: did the exclusive write name its mirror? */
		int touched = check && held_touched(st, op);

		next = op->next;
		op->next = NULL;
		if (touched && moved_meanwhile(st, op, err, sizeof(err))) {
			aop_set(op, KERR_INVALID_CLUSTER_MIRROR_STATES, "%s: not "
			    "recorded, an operator's command %s", op->what, err);
			st->astats.held_refused++;
			defer_callbacks(st, op);
			continue;
		}
		if (touched) {
			struct mlog_rec recs[8];
			size_t n = op->n < 8 ? op->n : 8;
			int rc;

			for (size_t i = 0; i < n; i++)
				recs[i] = (struct mlog_rec){ .type = op->types[i],
				    .p = op->bufs[i], .len = op->lens[i] };
			rc = op->n > 8 ? KERR_UNKNOWN_SERVER_ERROR :
			    scratch_check(st, recs, n, "record", "", err,
			    sizeof(err));
			if (rc != KERR_NONE) {
				aop_set(op, KERR_INVALID_CLUSTER_MIRROR_STATES,
				    "%s: not recorded, an operator's command "
				    "changed what it depends on meanwhile: %s",
				    op->what, op->n > 8 ? "too many records" :
				    err);
				st->astats.held_refused++;
				defer_callbacks(st, op);
				continue;
			}
		}
		if (append_or_fail(st, op, next) != 0)
			break;
	}
	start_group(st);
}

static int quiescent(const struct mstate *st)
{
	return st->inflight == NULL && st->acc_head == NULL && !st->batch;
}

/* The waiting exclusive write's turn: the log holds every write that
 * came before it, applied. */
static void on_excl(evutil_socket_t fd, short what, void *arg)
{
	struct mstate *st = arg;
	mstate_excl_fn ready = st->excl_ready;

	(void)fd;
	(void)what;
	if (st->excl != MSTATE_EXCL_WAITING || !quiescent(st))
		return;   /* not yet: the next group's completion comes back */
	st->excl = MSTATE_EXCL_OPEN;
	st->batch = 1;
	st->excl_ready = NULL;
	ready(st->excl_arg);
}

static void excl_poke(struct mstate *st)
{
	if (st->excl == MSTATE_EXCL_WAITING && st->excl_ev != NULL &&
	    quiescent(st))
		event_active(st->excl_ev, 0, 0);
}

/* The exclusive write that ended leaves the turn to the next one asked
 * for: it waits (WAITING: writes are held again) for the writes released
 * meanwhile, then on_excl() opens it. */
static void excl_next(struct mstate *st)
{
	struct mstate_xwait *w = st->xq_head;

	if (st->excl != MSTATE_EXCL_NONE || w == NULL)
		return;
	st->xq_head = w->next;
	if (st->xq_head == NULL)
		st->xq_tail = NULL;
	st->excl = MSTATE_EXCL_WAITING;
	st->excl_ready = w->ready;
	st->excl_arg = w->arg;
	free(w);
	excl_poke(st);
}

int mstate_excl_begin(struct mstate *st, mstate_excl_fn ready, void *arg)
{
	if (st->ml == NULL || (st->batch && (st->ml->base == NULL ||
	    st->excl != MSTATE_EXCL_OPEN)))
		return -1;   /* a batch of its own is open (not a turn's) */
	if (st->ml->base == NULL) {
		/* Tools and tests: synchronous, as a batch. */
		if (st->excl != MSTATE_EXCL_NONE)
			return -1;
		mstate_async_drain(st);
		st->excl = MSTATE_EXCL_OPEN;
		st->excl_arg = arg;
		st->batch = 1;
		return 1;
	}
	if (st->excl_ev == NULL &&
	    (st->excl_ev = event_new(st->ml->base, -1, 0, on_excl, st)) == NULL)
		return -1;
	if (st->excl != MSTATE_EXCL_NONE) {
		/* Another one is wanted or in flight: after it, in turn. */
		struct mstate_xwait *w = calloc(1, sizeof(*w));

		if (w == NULL)
			return -1;
		w->ready = ready;
		w->arg = arg;
		if (st->xq_tail != NULL)
			st->xq_tail->next = w;
		else
			st->xq_head = w;
		st->xq_tail = w;
		st->astats.excl_waits++;
		return 0;
	}
	if (quiescent(st)) {
		st->excl = MSTATE_EXCL_OPEN;
		st->excl_arg = arg;
		st->batch = 1;
		return 1;
	}
	st->excl = MSTATE_EXCL_WAITING;
	st->excl_ready = ready;
	st->excl_arg = arg;
	st->astats.excl_waits++;
	return 0;
}

static void excl_end(struct mstate *st)
{
	st->excl = MSTATE_EXCL_NONE;
	st->excl_op = NULL;
	st->excl_ready = NULL;
	release_held(st, 0);
	excl_next(st);
}

void mstate_excl_discard(struct mstate *st)
{
	if (st->excl != MSTATE_EXCL_OPEN)
		return;
	mlog_discard(st->ml);
	mstate_batch_clear(st);
	st->batch_failed = 0;
}

int mstate_excl_commit(struct mstate *st, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	struct mstate_aop *op;
	struct mrec r;
	char err[256];
	int rc;

	*started = 0;
	if (st->excl != MSTATE_EXCL_OPEN) {
		mstate_fmt(msg, msglen, "no exclusive write is open");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	if (st->ml->base == NULL || st->batch_failed || st->npending == 0 ||
	    ensure_cb_ev(st, "the operator's change", msg, msglen) != 0) {
		/* Nothing to write, a failed batch, or no event loop: the
		 * batch's own commit says how it went, now. */
		rc = mstate_batch_commit(st, msg, msglen);
		excl_end(st);
		return rc;
	}
	op = calloc(1, sizeof(*op));
	if (op == NULL || (op->bufs = calloc(st->npending,
	    sizeof(*op->bufs))) == NULL || (op->lens = calloc(st->npending,
	    sizeof(*op->lens))) == NULL || (op->types = calloc(st->npending,
	    sizeof(*op->types))) == NULL ||
	    (op->what = strdup("the operator's change")) == NULL) {
		if (op != NULL)
			aop_free(op);
		mstate_excl_discard(st);
		st->batch = 0;
		excl_end(st);
		mstate_fmt(msg, msglen, "none of the changes were made: out of "
		    "memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	/* Which mirrors it names: the held ops in others need no check. */
	excl_mirrors_clear(st);
	for (size_t i = 0; i < st->npending; i++) {
		struct mstate_pending *q = &st->pending[i];
		size_t k;

		op->types[i] = q->type;
		op->bufs[i] = q->buf;
		op->lens[i] = q->len;
		q->buf = NULL;
		if (mrec_decode(q->type, op->bufs[i], op->lens[i], &r,
		    st->cfgbuf, MREC_MAX_CONFIGS, err, sizeof(err)) != 0 ||
		    r.mirror.len < 0) {
			st->excl_all = 1;
			continue;
		}
		for (k = 0; k < st->nexcl_mirrors; k++)
			if (mstate_kcmp(r.mirror, st->excl_mirrors[k]) == 0)
				break;
		if (k < st->nexcl_mirrors)
			continue;
		if (mstate_grow(&st->excl_mirrors, st->nexcl_mirrors,
		    sizeof(*st->excl_mirrors)) != 0 ||
		    (st->excl_mirrors[st->nexcl_mirrors] = mstate_kdup(r.mirror,
		    &(int){ 0 })) == NULL)
			st->excl_all = 1;
		else
			st->nexcl_mirrors++;
	}
	op->n = st->npending;
	op->cb = cb;
	op->arg = arg;
	op->excl = 1;
	mstate_batch_clear(st);   /* the buffers are the op's now */
	st->batch = 0;
	/* Appended already, by the batch: the log is quiescent, so they go
	 * as a group of their own. */
	st->acc_head = st->acc_tail = op;
	st->excl = MSTATE_EXCL_FLIGHT;
	st->excl_op = op;
	st->astats.in_flight++;
	*started = 1;
	start_group(st);
	return KERR_NONE;
}

void mstate_excl_cancel(struct mstate *st, void *arg)
{
	struct mstate_xwait **pp = &st->xq_head, *w;

	/* Its turns still to come. */
	st->xq_tail = NULL;
	while ((w = *pp) != NULL) {
		if (w->arg == arg) {
			*pp = w->next;
			free(w);
			continue;
		}
		st->xq_tail = w;
		pp = &w->next;
	}
	/* Applied already, its callback not yet run. */
	for (struct mstate_aop *op = st->done_head; op != NULL; op = op->next)
		if (op->excl && op->arg == arg)
			op->cb = NULL;
	if (st->excl_arg != arg)
		return;
	switch (st->excl) {
	case MSTATE_EXCL_WAITING:
		excl_end(st);
		break;
	case MSTATE_EXCL_OPEN:
		mstate_excl_discard(st);
		st->batch = 0;
		excl_end(st);
		break;
	case MSTATE_EXCL_FLIGHT:
		st->excl_op->cb = NULL;   /* completes; nobody is told */
		break;
	default:
		break;
	}
}

int mstate_excl_state(const struct mstate *st)
{
	return st->excl;
}

void mstate_async_drain(struct mstate *st)
{
	if (st->ml == NULL)
		return;
	while (st->inflight != NULL || st->acc_head != NULL ||
	    st->held_head != NULL) {
		/* Held ops go now unless an operator's write is in flight
		 * (its completion releases them, checked): none came
		 * between their validation and now. */
		if (st->held_head != NULL && st->excl != MSTATE_EXCL_FLIGHT)
			release_held(st, 0);
		else if (st->held_head != NULL && st->inflight == NULL &&
		    st->acc_head == NULL) {
			/* Cannot happen (the operator's op is always in a
			 * group or queued for one); never spin on it. */
			st->excl = MSTATE_EXCL_NONE;
			st->excl_op = NULL;
			release_held(st, 1);
		}
		if (st->inflight == NULL)
			start_group(st);
		if (st->inflight != NULL)
			mlog_wait(st->ml);
	}
	/* A snapshot started from the last group's completion. */
	mlog_wait(st->ml);
	excl_poke(st);
}

int mstate_async_ready(const struct mstate *st)
{
	return st->ml != NULL && st->ml->base != NULL && !st->batch;
}

void mstate_async_wait(struct mstate *st)
{
	mstate_async_drain(st);
}

void mstate_async_free(struct mstate *st)
{
	if (st->ml != NULL)
		mstate_async_drain(st);
	while (st->done_head != NULL) {
		struct mstate_aop *op = st->done_head;
		st->done_head = op->next;
		aop_free(op);
	}
	st->done_tail = NULL;
	if (st->cb_ev != NULL) {
		event_free(st->cb_ev);
		st->cb_ev = NULL;
	}
	if (st->excl_ev != NULL) {
		event_free(st->excl_ev);
		st->excl_ev = NULL;
	}
	while (st->xq_head != NULL) {
		struct mstate_xwait *w = st->xq_head;

		st->xq_head = w->next;
		free(w);
	}
	st->xq_tail = NULL;
	excl_mirrors_clear(st);
}

void mstate_async_stats(const struct mstate *st,
    struct mstate_async_stats *out)
{
	*out = st->astats;
}

/* ---- forwarded writes ------------------------------------------------- */

/*
 * The scratch model a forwarded request is checked on holds only what
 * its records can reach: every apply rule looks within one mirror, a
 * partition's records within that partition, a topic's within that
 * topic.  So the scratch gets the named mirrors' own records, and of
 * those only the topics and partitions the records name (mstate_dump_
 * scoped()): the cost follows the request, not the model.
 */
struct scratch_sink {
	struct mlog_sink base;
	struct mstate *scratch;
	char err[512];
};

static int scratch_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	struct scratch_sink *s = (struct scratch_sink *)sink;

	return apply_payload(s->scratch, type, p, len, 0, 1, s->err,
	    sizeof(s->err));
}

/* What one record reaches: its partition, its topic or its mirror. */
static int scope_of(const struct mrec *r, struct mstate_scope *out, int *oom)
{
	out->mirror = mstate_kdup(r->mirror, oom);
	out->topic = NULL;
	out->part = -1;
	switch ((enum mrec_type)r->type) {
	case MREC_PART_STATE:
	case MREC_PART_EPOCH:
	case MREC_PART_ANCHOR:
	case MREC_PART_ANCHORS:
	case MREC_PART_RETRACT:
	case MREC_PART_TRIM:
	case MREC_PART_PRODUCER:
	case MREC_PART_SENDING:
	case MREC_PART_FAILOVER:
	case MREC_PART_FAILOVER_AT:
	case MREC_PART_FAILOVER_NOTE:
	case MREC_PART_OWNER:
	case MREC_PART_RESTORE:
		out->part = r->partition;
		/* FALLTHROUGH */
	case MREC_TOPIC_STATE:
	case MREC_TOPIC_IDENT:
	case MREC_TOPIC_REALIGN:
	case MREC_TOPIC_RESTORE:
		if (r->topic.len >= 0)
			out->topic = mstate_kdup(r->topic, oom);
		if (out->topic == NULL)
			out->part = -1;
		break;
	default:
		break;
	}
	return *oom ? -1 : 0;
}

/*
 * Whether n encoded records would apply, in order, to the model as it is
 * now, without touching it: they are applied to a scratch copy of what
 * they can reach.  KERR_NONE, or the code with msg naming the record
 * ("<label> i of n").
 */
static int scratch_check(struct mstate *st, const struct mlog_rec *recs,
    size_t n, const char *label, const char *where, char *msg, size_t msglen)
{
	struct scratch_sink s = { .base = { .put = scratch_put } };
	struct mstate_scope *sc = NULL;
	size_t nsc = 0;
	char err[1024];
	struct mrec r;
	size_t i;
	int rc = KERR_NONE, oom = 0, all = 0;

	s.scratch = mstate_new();
	if (s.scratch != NULL)
		s.scratch->sparse = 1;
	sc = calloc(n + 1, sizeof(*sc));
	if (s.scratch == NULL || sc == NULL) {
		mstate_fmt(msg, msglen, "out of memory");
		rc = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	/* What the records reach (decoding checks them, too). */
	for (i = 0; i < n; i++) {
		if (recs[i].type >= MLOG_TYPE_RESERVED ||
		    mrec_decode(recs[i].type, recs[i].p, recs[i].len, &r,
		    st->cfgbuf, MREC_MAX_CONFIGS, err, sizeof(err)) != 0) {
			if (recs[i].type >= MLOG_TYPE_RESERVED)
				mstate_fmt(err, sizeof(err), "framing type "
				    "0x%04x", recs[i].type);
			mstate_fmt(msg, msglen, "%s %zu of %zu (type %u) does "
			    "not decode: %s", label, i + 1, n, recs[i].type, err);
			rc = KERR_INVALID_REQUEST;
			goto out;
		}
		if (r.mirror.len < 0) {
			all = 1;        /* no mirror: the whole model */
			continue;
		}
		if (scope_of(&r, &sc[nsc++], &oom) != 0) {
			mstate_fmt(msg, msglen, "out of memory");
			rc = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
	}
	if ((all ? mstate_dump_records(st, &s.base) :
	    mstate_dump_scoped(st, sc, nsc, &s.base)) != 0 || s.base.failed) {
		mstate_fmt(msg, msglen, "internal error: the model does not "
		    "copy: %s", s.err);
		rc = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	/* All or nothing, exactly as replay would apply them. */
	for (i = 0; i < n; i++) {
		if (apply_payload(s.scratch, recs[i].type, recs[i].p, recs[i].len,
		    0, 0, err, sizeof(err)) != 0) {
			mstate_fmt(msg, msglen, "%s %zu of %zu (%s) does not "
			    "apply%s: %s", label, i + 1, n,
			    mrec_type_name(recs[i].type), where, err);
			rc = KERR_INVALID_REQUEST;
			goto out;
		}
	}
out:
	if (sc != NULL)
		for (i = 0; i < nsc; i++) {
			free((char *)sc[i].mirror);
			free((char *)sc[i].topic);
		}
	free(sc);
	mstate_free(s.scratch);
	return rc;
}

int mstate_apply_forwarded(struct mstate *st, const struct mlog_rec *recs,
    size_t n, char *msg, size_t msglen)
{
	char err[1024];
	size_t i;
	int rc;

	if (st->ml == NULL) {
		mstate_fmt(msg, msglen, "the metadata log is not open");
		return KERR_KAFKA_STORAGE_ERROR;
	}
	if (st->batch) {
		mstate_fmt(msg, msglen, "a batch is open on the writer");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	mstate_async_drain(st);
	rc = scratch_check(st, recs, n, "forwarded record",
	    " to the writer's model", msg, msglen);
	if (rc != KERR_NONE)
		return rc;
	for (i = 0; i < n; i++)
		if (mlog_append(st->ml, recs[i].type, recs[i].p, recs[i].len,
		    err, sizeof(err)) != 0)
			break;
	if (i == n && st->ml->base != NULL)
		st->astats.sync_writes++;
	if (i < n || mlog_sync(st->ml, err, sizeof(err)) != 0) {
		mlog_discard(st->ml);
		mstate_fmt(msg, msglen, "the change was not made, the metadata "
		    "log cannot persist it: %s", err);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	for (i = 0; i < n; i++) {
		if (apply_payload(st, recs[i].type, recs[i].p, recs[i].len, 1, 0,
		    err, sizeof(err)) != 0) {
			/* It applied to the copy: a bug. */
			log_errorx("a forwarded %s record does not apply after it "
			    "was persisted: %s", mrec_type_name(recs[i].type), err);
			mstate_fmt(msg, msglen, "internal error: %s", err);
			return KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	mstate_maybe_compact(st);
	return KERR_NONE;
}

/* Copies and queues n records in the open batch (the exclusive turn's). */
static int queue_copies(struct mstate *st, const struct mlog_rec *recs,
    size_t n, char *msg, size_t msglen)
{
	struct mrec *mr = calloc(n + 1, sizeof(*mr));
	uint8_t **bufs = calloc(n + 1, sizeof(*bufs));
	size_t *lens = calloc(n + 1, sizeof(*lens)), i;
	int rc = KERR_UNKNOWN_SERVER_ERROR;

	mstate_fmt(msg, msglen, "out of memory");
	if (mr == NULL || bufs == NULL || lens == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		mr[i].type = recs[i].type;
		lens[i] = recs[i].len;
		if ((bufs[i] = malloc(recs[i].len + 1)) == NULL)
			goto out;
		memcpy(bufs[i], recs[i].p, recs[i].len);
	}
	rc = queue(st, mr, bufs, lens, n, "forwarded records", msg, msglen);
out:
	if (bufs != NULL)
		for (i = 0; i < n; i++)
			free(bufs[i]);   /* NULL once queued */
	free(bufs);
	free(lens);
	free(mr);
	return rc;
}

static struct mstate *fwd_st(void *arg)
{
	return (struct mstate *)((char *)arg - offsetof(struct mstate, fwd));
}

static void fwd_done(void *arg, int code, const char *msg)
{
	struct mstate *st = fwd_st(arg);
	struct mstate_fwd f = st->fwd;

	st->fwd.busy = 0;
	if (f.cb != NULL)
		f.cb(f.arg, code, msg);
}

/* The forwarded request's turn: the model holds every write before it. */
static int fwd_turn(struct mstate *st, int *started, char *msg,
    size_t msglen)
{
	struct mstate_fwd *f = &st->fwd;
	char e[256];
	int rc;

	*started = 0;
	rc = scratch_check(st, f->recs, f->n, "forwarded record",
	    " to the writer's model", msg, msglen);
	if (rc == KERR_NONE)
		rc = queue_copies(st, f->recs, f->n, msg, msglen);
	if (rc != KERR_NONE) {
		/* Nothing queued: the commit only ends the turn. */
		mstate_excl_discard(st);
		(void)mstate_excl_commit(st, NULL, NULL, started, e, sizeof(e));
		*started = 0;
		return rc;
	}
	if (f->arm != NULL)
		f->arm(f->arg, 1);
	rc = mstate_excl_commit(st, fwd_done, f, started, msg, msglen);
	if (f->arm != NULL)
		f->arm(f->arg, 0);
	return rc;
}

static void fwd_ready(void *arg)
{
	struct mstate *st = fwd_st(arg);
	struct mstate_fwd f;
	char msg[1024];
	int started, rc = fwd_turn(st, &started, msg, sizeof(msg));

	if (started)
		return;
	f = st->fwd;
	st->fwd.busy = 0;
	if (f.cb != NULL)
		f.cb(f.arg, rc, msg);
}

int mstate_apply_forwarded_async(struct mstate *st,
    const struct mlog_rec *recs, size_t n, void (*arm)(void *arg, int on),
    void (*cb)(void *arg, int code, const char *msg), void *arg,
    int *started, char *msg, size_t msglen)
{
	int r, rc;

	*started = 0;
	if (st->ml == NULL) {
		mstate_fmt(msg, msglen, "the metadata log is not open");
		return KERR_KAFKA_STORAGE_ERROR;
	}
	if (st->fwd.busy) {
		mstate_fmt(msg, msglen, "internal error: the writer is handling "
		    "another forwarded request");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	st->fwd = (struct mstate_fwd){ .recs = recs, .n = n, .arm = arm,
	    .cb = cb, .arg = arg, .busy = 1 };
	/* &st->fwd names the turn (mstate_excl_cancel()). */
	r = mstate_excl_begin(st, fwd_ready, &st->fwd);
	if (r < 0) {
		st->fwd.busy = 0;
		mstate_fmt(msg, msglen, "the writer cannot take its turn to "
		    "write (a batch of its own is open, or out of memory)");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	if (r == 0) {
		*started = 1;      /* fwd_ready() when it is its turn */
		return KERR_NONE;
	}
	rc = fwd_turn(st, started, msg, msglen);
	if (!*started)
		st->fwd.busy = 0;
	return rc;
}

void mstate_forwarded_cancel(struct mstate *st)
{
	if (!st->fwd.busy)
		return;
	st->fwd.cb = NULL;
	mstate_excl_cancel(st, &st->fwd);
	st->fwd.busy = 0;
}

void mstate_rec_init(struct mrec *r, uint16_t type, const char *mirror,
    const char *topic)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->mirror = mirror != NULL ? kstr_c(mirror) : KSTR_NULL;
	r->topic = topic != NULL ? kstr_c(topic) : KSTR_NULL;
	r->str = KSTR_NULL;
}

void mstate_part_rec(struct mrec *r, uint16_t type, const struct mpart *p)
{
	mstate_rec_init(r, type, p->topic->mirror->name, p->topic->name);
	r->partition = p->index;
}
