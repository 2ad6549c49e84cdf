/*
 * mstate_ops.c: the admin operations (the wire contract's validation and
 * error codes) and the data-plane operations.  Each validates against the
 * model, builds its record(s) and hands them to mstate_persist(), which
 * applies them only once they are durable.  See mstate.h.
 */
#include "config.h"

#include <inttypes.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "mlog.h"
#include "mrec.h"
#include "mstate.h"
#include "mstate_int.h"
#include "tpattern.h"

#define B(s) MST_BIT(s)

/* ---- admin operations ------------------------------------------------- */

static int no_mirror(const char *name, char *msg, size_t msglen)
{
	mstate_fmt(msg, msglen, "cluster mirror '%s' does not exist", name);
	return KERR_UNKNOWN_CLUSTER_MIRROR;
}

static int no_topic(const char *mirror, const char *topic, char *msg,
    size_t msglen)
{
	mstate_fmt(msg, msglen, "topic '%s' is not in cluster mirror '%s'", topic,
	    mirror);
	return KERR_TOPIC_NOT_IN_CLUSTER_MIRROR;
}

/* Looks up mirror and topic for the per-topic operations. */
static int find_mt(struct mstate *st, const char *mirror, const char *topic,
    struct mirror **mp, struct mtopic **tp, char *msg, size_t msglen)
{
	*mp = mstate_mirror_find(st, mirror);
	if (*mp == NULL)
		return no_mirror(mirror, msg, msglen);
	*tp = mirror_topic_find(*mp, topic);
	if (*tp == NULL)
		return no_topic(mirror, topic, msg, msglen);
	return 0;
}

static int seal_value(struct mstate *st, const char *mirror, const char *name,
    const char *value, int stored, char **out, char *msg, size_t msglen);

int mstate_create_mirror(struct mstate *st, const char *name,
    const struct mcfg *configs, size_t nconfigs, char *msg, size_t msglen)
{
	struct mrec r;
	struct mrec_config *rc = NULL;
	char **sealed = NULL;
	int code, have_bootstrap = 0;

	if ((code = mstate_check_mirror_name(name, msg, msglen)) != 0)
		return code;
	if (mstate_mirror_find(st, name) != NULL) {
		mstate_fmt(msg, msglen, "cluster mirror '%s' already exists", name);
		return KERR_CLUSTER_MIRROR_ALREADY_EXISTS;
	}
	if (nconfigs > MREC_MAX_CONFIGS) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': %zu configs, at most %d",
		    name, nconfigs, MREC_MAX_CONFIGS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		if (configs[i].name == NULL || configs[i].name[0] == '\0') {
			mstate_fmt(msg, msglen, "cluster mirror '%s': config %zu has "
			    "no name", name, i);
			return KERR_INVALID_REQUEST;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(configs[i].name, configs[j].name) == 0) {
				mstate_fmt(msg, msglen, "cluster mirror '%s': config "
				    "'%s' is given twice", name,
				    configs[i].name);
				return KERR_INVALID_REQUEST;
			}
		if (strcmp(configs[i].name, "bootstrap.servers") == 0 &&
		    configs[i].value != NULL && configs[i].value[0] != '\0')
			have_bootstrap = 1;
	}
	if (!have_bootstrap) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': the configs must set "
		    "bootstrap.servers (the source cluster)", name);
		return KERR_INVALID_REQUEST;
	}
	rc = calloc(nconfigs + 1, sizeof(*rc));
	sealed = calloc(nconfigs + 1, sizeof(*sealed));
	if (rc == NULL || sealed == NULL) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': out of memory", name);
		code = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		rc[i].name = kstr_c(configs[i].name);
		rc[i].value = kstr_c(configs[i].value);
		if (seal_value(st, name, configs[i].name, configs[i].value, 0,
		    &sealed[i], msg, msglen) != 0) {
			code = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		if (sealed[i] != NULL)
			rc[i].value = kstr_c(sealed[i]);
	}
	mstate_rec_init(&r, MREC_MIRROR_CREATE, name, NULL);
	r.configs = rc;
	r.nconfigs = (int32_t)nconfigs;
	code = mstate_persist(st, &r, 1, name, msg, msglen);
out:
	for (size_t i = 0; sealed != NULL && i < nconfigs; i++)
		free(sealed[i]);
	free(sealed);
	free(rc);
	return code;
}

/* ---- secrets at rest ---------------------------------------------------- */

void mstate_set_sealer(struct mstate *st, const struct mstate_sealer *s)
{
	st->sealer = *s;
}

/* The form of one value to store: *out NULL to store it as given.  stored:
 * the value comes from the log (the migration), not from a request. */
static int seal_value(struct mstate *st, const char *mirror, const char *name,
    const char *value, int stored, char **out, char *msg, size_t msglen)
{
	const struct mstate_sealer *s = &st->sealer;
	char err[256];

	*out = NULL;
	if (s->needs_seal == NULL || value == NULL ||
	    !s->needs_seal(s->arg, name, value, stored))
		return 0;
	if (s->seal == NULL || s->seal(s->arg, mirror, name, value, out, err,
	    sizeof(err)) != 0) {
		/* Never store a secret in clear: refuse the change instead. */
		mstate_fmt(msg, msglen, "cluster mirror '%s': config %s cannot be "
		    "encrypted for the metadata log: %s", mirror, name,
		    s->seal == NULL ? "no key" : err);
		return -1;
	}
	return 0;
}

int mstate_seal_clear_secrets(struct mstate *st, size_t *nsealed,
    int *compacted, char *err, size_t errlen)
{
	struct mrec_config *rc = NULL;
	char **sealed = NULL;
	struct mrec r;
	int code = 0;

	*nsealed = 0;
	*compacted = 0;
	for (size_t i = 0; i < st->nmirrors && code == 0; i++) {
		struct mirror *m = st->mirrors[i];
		size_t n = 0;

		rc = calloc(m->nconfigs + 1, sizeof(*rc));
		sealed = calloc(m->nconfigs + 1, sizeof(*sealed));
		if (rc == NULL || sealed == NULL) {
			mstate_fmt(err, errlen, "out of memory");
			code = -1;
		}
		for (size_t c = 0; c < m->nconfigs && code == 0; c++) {
			rc[c].name = kstr_c(m->configs[c].name);
			rc[c].value = kstr_c(m->configs[c].value);
			if (seal_value(st, m->name, m->configs[c].name,
			    m->configs[c].value, 1, &sealed[c], err,
			    errlen) != 0)
				code = -1;
			else if (sealed[c] != NULL) {
				rc[c].value = kstr_c(sealed[c]);
				n++;
			}
		}
		if (code == 0 && n > 0) {
			mstate_rec_init(&r, MREC_MIRROR_CONFIGS, m->name, NULL);
			r.configs = rc;
			r.nconfigs = (int32_t)m->nconfigs;
			if (mstate_persist(st, &r, 1, m->name, err, errlen) != 0)
				code = -1;
			else
				*nsealed += n;
		}
		for (size_t c = 0; sealed != NULL && c < m->nconfigs; c++)
			free(sealed[c]);
		free(sealed);
		free(rc);
		sealed = NULL;
		rc = NULL;
	}
	if (code != 0)
		return -1;
	if (st->replay_clear || *nsealed > 0) {
		if (mstate_compact(st, err, errlen) != 0)
			return -1;
		st->replay_clear = 0;
		*compacted = 1;
	}
	return 0;
}

int mstate_delete_mirror(struct mstate *st, const char *name, char *msg,
    size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, name);
	struct mrec r;

	if (m == NULL)
		return no_mirror(name, msg, msglen);
	for (size_t i = 0; i < m->ntopics; i++) {
		struct mtopic *t = m->topics[i];
		if (!mtopic_all_stopped(t)) {
			mstate_fmt(msg, msglen, "cluster mirror '%s' is not empty: "
			    "topic '%s' is %s, not STOPPED", name, t->name,
			    mtopic_state_name(t));
			return KERR_CLUSTER_MIRROR_NOT_EMPTY;
		}
	}
	mstate_rec_init(&r, MREC_MIRROR_DELETE, name, NULL);
	return mstate_persist(st, &r, 1, name, msg, msglen);
}

static int check_npart(const char *mirror, const char *topic, int32_t npart,
    char *msg, size_t msglen)
{
	if (npart >= 1 && npart <= MSTATE_MAX_PARTITIONS)
		return 0;
	mstate_fmt(msg, msglen, "%s/%s: partition count %d is outside 1-%d", mirror,
	    topic, (int)npart, MSTATE_MAX_PARTITIONS);
	return KERR_INVALID_PARTITIONS;
}

int mstate_add_topic(struct mstate *st, const char *mirror, const char *topic,
    int32_t npart, char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror), *other;
	struct mtopic *t;
	struct mrec r;
	char what[520];
	int code;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if ((code = mstate_check_topic_name(topic, msg, msglen)) != 0 ||
	    (code = check_npart(mirror, topic, npart, msg, msglen)) != 0)
		return code;
	other = mstate_topic_holder(st, topic, m);
	if (other != NULL) {
		t = mirror_topic_find(other, topic);
		mstate_fmt(msg, msglen, "topic '%s' is already in cluster mirror '%s' "
		    "(%s)", topic, other->name, mtopic_state_name(t));
		return KERR_TOPIC_ALREADY_IN_CLUSTER_MIRROR;
	}
	mstate_rec_init(&r, MREC_TOPIC_ADD, mirror, topic);
	r.count = npart;
	t = mirror_topic_find(m, topic);
	if (t != NULL) {
		if (mtopic_any(t, B(STOPPING))) {
			mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is "
			    "being stopped", topic, mirror);
			return KERR_MIRROR_TOPIC_BEING_STOPPED;
		}
		r.count = MAX(npart, t->npart);
		if (mtopic_all_stopped(t))
			r.flags = MREC_F_RESTART;
		else if (npart <= t->npart)
			return KERR_NONE;   /* already mirrored: no change */
	}
	snprintf(what, sizeof(what), "%s/%s", mirror, topic);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

int mstate_grow_topic(struct mstate *st, const char *mirror,
    const char *topic, int32_t npart, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	struct mrec r;
	char what[520];
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0 ||
	    (code = check_npart(mirror, topic, npart, msg, msglen)) != 0)
		return code;
	if (npart <= t->npart || mtopic_any(t, B(STOPPING) | B(STOPPED)))
		return KERR_NONE;
	mstate_rec_init(&r, MREC_TOPIC_ADD, mirror, topic);
	r.count = npart;
	snprintf(what, sizeof(what), "%s/%s", mirror, topic);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

static int has_pattern(char *const *list, size_t n, const char *pat)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], pat) == 0)
			return 1;
	return 0;
}

int mstate_add_patterns(struct mstate *st, const char *mirror,
    const char *const *includes, size_t nincludes,
    const char *const *excludes, size_t nexcludes, char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	struct mrec *recs;
	size_t n = 0;
	int code;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if (m->nincludes + nincludes > MSTATE_MAX_PATTERNS ||
	    m->nexcludes + nexcludes > MSTATE_MAX_PATTERNS) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': more than %d include or "
		    "exclude patterns", mirror, MSTATE_MAX_PATTERNS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t k = 0; k < 2; k++) {
		const char *const *list = k == 0 ? includes : excludes;
		size_t ln = k == 0 ? nincludes : nexcludes;
		for (size_t i = 0; i < ln; i++) {
			char why[512];
			if (list[i] == NULL || list[i][0] == '\0') {
				mstate_fmt(msg, msglen, "cluster mirror '%s': empty "
				    "%s pattern", mirror, k == 0 ? "include" :
				    "exclude");
				return KERR_INVALID_REQUEST;
			}
			if (tpattern_check(list[i], k == 0 ? "include pattern" :
			    "exclude pattern", why, sizeof(why)) != 0) {
				mstate_fmt(msg, msglen, "cluster mirror '%s': %s",
				    mirror, why);
				return KERR_INVALID_REQUEST;
			}
		}
	}
	recs = calloc(nincludes + nexcludes + 1, sizeof(*recs));
	if (recs == NULL) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': out of memory", mirror);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < nincludes + nexcludes; i++) {
		int inc = i < nincludes;
		const char *pat = inc ? includes[i] : excludes[i - nincludes];
		if (has_pattern(inc ? m->includes : m->excludes,
		    inc ? m->nincludes : m->nexcludes, pat))
			continue;
		mstate_rec_init(&recs[n], MREC_MIRROR_PATTERN, mirror, NULL);
		recs[n].kind = inc ? MREC_INCLUDE : MREC_EXCLUDE;
		recs[n].str = kstr_c(pat);
		n++;
	}
	code = n > 0 ? mstate_persist(st, recs, n, mirror, msg, msglen) : KERR_NONE;
	free(recs);
	return code;
}

/* Moves the partitions of t whose state is in mask to `to`. */
static int topic_move(struct mstate *st, const struct mtopic *t,
    unsigned mask, enum mpart_state to, const char *why, char *msg,
    size_t msglen)
{
	struct mrec r;
	char what[520];

	mstate_rec_init(&r, MREC_TOPIC_STATE, t->mirror->name, t->name);
	r.state = (int8_t)to;
	r.from_mask = (uint16_t)mask;
	r.str = kstr_c(why);
	snprintf(what, sizeof(what), "%s/%s", t->mirror->name, t->name);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

int mstate_remove_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0)
		return code;
	if (mtopic_any(t, B(STOPPING))) {
		mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is already "
		    "being stopped", topic, mirror);
		return KERR_MIRROR_TOPIC_BEING_STOPPED;
	}
	if (mtopic_all_stopped(t))
		return KERR_NONE;   /* the contract: success, no change */
	return topic_move(st, t, B(PREPARING) | B(MIRRORING) | B(PAUSING) |
	    B(PAUSED) | B(FAILED), MPART_STOPPING, "removed from the mirror",
	    msg, msglen);
}

int mstate_remove_include(struct mstate *st, const char *mirror,
    const char *pattern, char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	struct mrec r;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if (!has_pattern(m->includes, m->nincludes, pattern))
		return KERR_NONE;
	mstate_rec_init(&r, MREC_MIRROR_PATTERN, mirror, NULL);
	r.kind = MREC_INCLUDE_DEL;
	r.str = kstr_c(pattern);
	return mstate_persist(st, &r, 1, mirror, msg, msglen);
}

/* The include patterns of m, quoted, for a message. */
static void includes_text(const struct mirror *m, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	if (m->nincludes == 0) {
		snprintf(buf, len, "it has no include patterns");
		return;
	}
	used = (size_t)snprintf(buf, len, "its include patterns are");
	for (size_t i = 0; i < m->nincludes && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s '%s'",
		    i > 0 ? "," : "", m->includes[i]);
}

int mstate_remove_pattern(struct mstate *st, const char *mirror,
    const char *pattern, mstate_topic_result_fn cb, void *arg, int *what,
    char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	const char *pats[1] = { pattern };
	struct tpattern *re;
	size_t matched = 0;
	int code;

	*what = 0;
	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if ((re = mstate_compile_pattern(pattern, msg, msglen)) == NULL)
		return KERR_INVALID_REQUEST;
	for (size_t i = 0; i < m->ntopics; i++)
		matched += tpattern_match(re, m->topics[i]->name) != 0;
	if (has_pattern(m->includes, m->nincludes, pattern)) {
		code = mstate_remove_include(st, mirror, pattern, msg, msglen);
		*what = MSTATE_PAT_INCLUDE_REMOVED;
	} else if (has_pattern(m->excludes, m->nexcludes, pattern)) {
		code = KERR_NONE;
		*what = MSTATE_PAT_EXCLUDE_KEPT;
	} else if (matched == 0) {
		char inc[600];

		includes_text(m, inc, sizeof(inc));
		mstate_fmt(msg, msglen, "pattern '%s' is not an include pattern of "
		    "cluster mirror '%s' and matches none of its topics; nothing "
		    "was changed (%s)", pattern, mirror, inc);
		tpattern_free(re);
		return KERR_INVALID_REQUEST;
	} else {
		code = mstate_add_patterns(st, mirror, NULL, 0, pats, 1, msg,
		    msglen);
		*what = MSTATE_PAT_EXCLUDE_ADDED;
	}
	if (code != 0) {
		*what = 0;
		tpattern_free(re);
		return code;
	}
	/* Topics are never removed from the array here, only moved to
	 * STOPPING, so indexing stays valid. */
	for (size_t i = 0; i < m->ntopics; i++) {
		struct mtopic *t = m->topics[i];
		char tmsg[1024] = "";
		int tc;
		if (!tpattern_match(re, t->name))
			continue;
		tc = mstate_remove_topic(st, mirror, t->name, tmsg,
		    sizeof(tmsg));
		if (cb != NULL)
			cb(arg, t->name, tc, tc != 0 ? tmsg : NULL);
	}
	tpattern_free(re);
	return KERR_NONE;
}

int mstate_set_mirror_configs(struct mstate *st, const char *mirror,
    const struct mcfg *configs, const int *fresh, size_t nconfigs,
    char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	struct mrec_config *rc = NULL;
	char **sealed = NULL;
	struct mrec r;
	int code = KERR_NONE, have_bootstrap = 0;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if (nconfigs > MREC_MAX_CONFIGS) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': %zu configs, at most %d",
		    mirror, nconfigs, MREC_MAX_CONFIGS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		if (configs[i].name == NULL || configs[i].name[0] == '\0') {
			mstate_fmt(msg, msglen, "cluster mirror '%s': config %zu has "
			    "no name", mirror, i);
			return KERR_INVALID_REQUEST;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(configs[i].name, configs[j].name) == 0) {
				mstate_fmt(msg, msglen, "cluster mirror '%s': config "
				    "'%s' is given twice", mirror, configs[i].name);
				return KERR_INVALID_REQUEST;
			}
		if (strcmp(configs[i].name, "bootstrap.servers") == 0 &&
		    configs[i].value != NULL && configs[i].value[0] != '\0')
			have_bootstrap = 1;
	}
	if (!have_bootstrap) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': the configs must set "
		    "bootstrap.servers (the source cluster)", mirror);
		return KERR_INVALID_REQUEST;
	}
	rc = calloc(nconfigs + 1, sizeof(*rc));
	sealed = calloc(nconfigs + 1, sizeof(*sealed));
	if (rc == NULL || sealed == NULL) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': out of memory", mirror);
		code = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		rc[i].name = kstr_c(configs[i].name);
		rc[i].value = kstr_c(configs[i].value);
		if (seal_value(st, mirror, configs[i].name, configs[i].value,
		    !fresh[i], &sealed[i], msg, msglen) != 0) {
			code = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		if (sealed[i] != NULL)
			rc[i].value = kstr_c(sealed[i]);
	}
	mstate_rec_init(&r, MREC_MIRROR_CONFIGS, mirror, NULL);
	r.configs = rc;
	r.nconfigs = (int32_t)nconfigs;
	code = mstate_persist(st, &r, 1, mirror, msg, msglen);
out:
	for (size_t i = 0; sealed != NULL && i < nconfigs; i++)
		free(sealed[i]);
	free(sealed);
	free(rc);
	return code;
}

static int being_stopped(const struct mtopic *t, char *msg, size_t msglen)
{
	mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is %s",
	    t->name, t->mirror->name, mtopic_any(t, B(STOPPING)) ?
	    "being stopped" : "stopped");
	return KERR_MIRROR_TOPIC_BEING_STOPPED;
}

int mstate_pause_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0)
		return code;
	if (mtopic_any(t, B(STOPPING) | B(STOPPED)))
		return being_stopped(t, msg, msglen);
	if (mtopic_all(t, B(PAUSING) | B(PAUSED))) {
		mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is already "
		    "paused", topic, mirror);
		return KERR_MIRROR_TOPIC_ALREADY_PAUSED;
	}
	return topic_move(st, t, B(PREPARING) | B(MIRRORING) | B(FAILED),
	    MPART_PAUSING, "paused", msg, msglen);
}

int mstate_resume_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0)
		return code;
	if (mtopic_any(t, B(STOPPING) | B(STOPPED)))
		return being_stopped(t, msg, msglen);
	if (!mtopic_any(t, B(PAUSING) | B(PAUSED))) {
		mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is not "
		    "paused (%s)", topic, mirror, mtopic_state_name(t));
		return KERR_MIRROR_TOPIC_NOT_PAUSED;
	}
	return topic_move(st, t, B(PAUSING) | B(PAUSED), MPART_MIRRORING,
	    "resumed", msg, msglen);
}

/*
 * What a FAILED partition's reason asks of RecoverMirrorTopics, by the
 * reason's beginning: the resolutions that move it ("skip-over", or
 * "skip-over or preserve"), "" for none but realign (then what it does),
 * NULL (not listed) when a plain retry will do; the resolution realign
 * is realign_topic()'s (mpart_realign_reason()).  The reasons are
 * daemon/pipeline/prove.c's and pipeline/preserve.c's.
 */
static const struct {
	const char *prefix;
	const char *accepts;
	const char *instead;
} needs[] = {
	{ "foreign write:", "skip-over", NULL },
	{ "unproven destination:", "skip-over", NULL },
	{ "failback divergence at offset", "skip-over or preserve", NULL },
	{ "destination truncated:", "", "the resolution realign deletes the "
	    "destination topic and copies it again from the source (see "
	    "REALIGN in kafka-mirrors(1))" },
	{ "failback:", "", "nothing was written to the destination; to mirror "
	    "the topic back, realign it after saving what you need of its "
	    "records on the destination cluster (the old primary): the "
	    "resolution realign deletes the destination topic and copies it "
	    "again from the source (see REALIGN in kafka-mirrors(1))" },
};

static int need_index(const struct mpart *p)
{
	if (p->state != MPART_FAILED || p->error == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++)
		if (strncmp(p->error, needs[i].prefix,
		    strlen(needs[i].prefix)) == 0)
			return (int)i;
	return -1;
}

const char *mpart_needs_resolution(const struct mpart *p)
{
	int i = need_index(p);

	return i < 0 ? NULL : needs[i].accepts;
}

/* 1 if resolution is one of the words of accepts ("a or b"). */
static int resolution_accepted(const char *accepts, const char *resolution)
{
	size_t n = strlen(resolution);
	const char *s = accepts;

	while (n > 0 && (s = strstr(s, resolution)) != NULL) {
		if ((s == accepts || s[-1] == ' ') && (s[n] == '\0' ||
		    s[n] == ' '))
			return 1;
		s += n;
	}
	return 0;
}

int mpart_realign_reason(const struct mpart *p)
{
	static const char *const start[] = { "failback divergence at offset",
	    "failback:", "destination truncated:" };
	const char *e = p->error;

	if (p->state != MPART_FAILED || e == NULL)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(start); i++)
		if (strncmp(e, start[i], strlen(start[i])) == 0)
			return 1;
	/* pipeline/copy.c's end below the translation map (truncated, found
	 * there), pipeline/ident.c's destination topic deleted, or deleted and
	 * recreated (not the cluster: another cluster is not realigned). */
	if (strncmp(e, "destination end offset ", 23) == 0 &&
	    strstr(e, ": the destination partition lost data mirrord wrote") !=
	    NULL)
		return 1;
	return strncmp(e, "destination topic ", 18) == 0 &&
	    (strstr(e, " was deleted and recreated (topic id ") != NULL ||
	    strstr(e, " was deleted (topic id ") != NULL);
}

/* The start of a reason, up to its first ':' or ';' (at most 160 bytes). */
static int reason_head(const char *e)
{
	size_t n = strcspn(e, ":;");

	return (int)MIN(n, (size_t)160);
}

/* The resolution realign (mstate.h): validated, one topic-realign DELETE
 * record; msg says what is deleted. */
static int realign_topic(struct mstate *st, struct mtopic *t, char *msg,
    size_t msglen)
{
	const char *mirror = t->mirror->name, *id;
	struct mrec r;
	char what[520], said[1024];
	size_t off;
	int n = 0, code;

	for (int32_t i = 0; i < t->npart; i++) {
		const struct mpart *p = t->parts[i];

		if (mpart_realign_reason(p)) {
			n++;
			continue;
		}
		switch (p->state) {
		case MPART_MIRRORING:
		case MPART_PREPARING:
			continue;
		case MPART_STOPPING:
		case MPART_STOPPED:
			return being_stopped(t, msg, msglen);
		case MPART_FAILED:
			mstate_fmt(msg, msglen, "partition %d of topic '%s' of "
			    "cluster mirror '%s' is FAILED for a reason a realign "
			    "does not repair (%.300s): recover it first",
			    (int)i, t->name, mirror, p->error != NULL ? p->error :
			    "no reason");
			return KERR_INVALID_REQUEST;
		default:
			mstate_fmt(msg, msglen, "partition %d of topic '%s' of "
			    "cluster mirror '%s' is %s: resume the topic first, a "
			    "realign copies every partition again", (int)i,
			    t->name, mirror, mpart_state_name(p->state));
			return KERR_INVALID_REQUEST;
		}
	}
	if (n == 0) {
		mstate_fmt(msg, msglen, "topic '%s' of cluster mirror '%s' has no "
		    "partition FAILED for a failback divergence or a destination "
		    "truncated, deleted or recreated: nothing to realign (%s)",
		    t->name, mirror, mtopic_state_name(t));
		return KERR_INVALID_REQUEST;
	}
	id = t->dst_topic_id != NULL ? t->dst_topic_id :
	    t->realign ? t->realign_dst_topic_id : NULL;
	/* What the operator is told is deleted: the topic, every partition
	 * with its state (and the start of its reason); said before the
	 * record applies (synchronously, it changes both). */
	off = (size_t)snprintf(said, sizeof(said), "destination topic %s "
	    "(topic id %s, %d partition%s) is deleted and copied again from the "
	    "source:", t->name, id != NULL ? id : "not recorded", (int)t->npart,
	    t->npart == 1 ? "" : "s");
	for (int32_t i = 0; i < t->npart && off < sizeof(said); i++) {
		const struct mpart *p = t->parts[i];

		if (p->state == MPART_FAILED && p->error != NULL)
			off += (size_t)snprintf(said + off, sizeof(said) - off,
			    "%s partition %d FAILED (%.*s)", i > 0 ? "," : "",
			    (int)i, reason_head(p->error), p->error);
		else
			off += (size_t)snprintf(said + off, sizeof(said) - off,
			    "%s partition %d %s", i > 0 ? "," : "", (int)i,
			    mpart_state_name(p->state));
	}
	mstate_rec_init(&r, MREC_TOPIC_REALIGN, mirror, t->name);
	r.kind = MREC_REALIGN_DELETE;
	r.str = kstr_c(id);
	snprintf(what, sizeof(what), "%s/%s", mirror, t->name);
	code = mstate_persist(st, &r, 1, what, msg, msglen);
	if (code == KERR_NONE)
		snprintf(msg, msglen, "%s", said);
	return code;
}

int mtopic_realign_reset(struct mstate *st, struct mtopic *t,
    const char *prior, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];

	if (prior == NULL || t->prior_dst_topic_id == NULL ||
	    strcmp(prior, t->prior_dst_topic_id) != 0)
		return KERR_NONE;
	mstate_rec_init(&r, MREC_TOPIC_REALIGN, t->mirror->name, t->name);
	r.kind = MREC_REALIGN_RESET;
	r.str = kstr_c(prior);
	snprintf(what, sizeof(what), "%s/%s", t->mirror->name, t->name);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

int mtopic_realign_deleted(struct mstate *st, struct mtopic *t,
    const char *id, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];

	if (!t->realign)
		return KERR_NONE;
	if (id != NULL && (id[0] == '\0' || strlen(id) > MREC_MAX_NAME)) {
		mstate_fmt(msg, msglen, "%s/%s: a topic id must be 1-%d "
		    "characters", t->mirror->name, t->name, MREC_MAX_NAME);
		return KERR_INVALID_REQUEST;
	}
	mstate_rec_init(&r, MREC_TOPIC_REALIGN, t->mirror->name, t->name);
	r.kind = MREC_REALIGN_DELETED;
	r.str = kstr_c(id);
	snprintf(what, sizeof(what), "%s/%s", t->mirror->name, t->name);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

int mstate_recover_topic(struct mstate *st, const char *mirror,
    const char *topic, const char *resolution, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	char why[96];
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0)
		return code;
	if (resolution != NULL && strcmp(resolution, "skip-over") != 0 &&
	    strcmp(resolution, "preserve") != 0 &&
	    strcmp(resolution, "realign") != 0) {
		mstate_fmt(msg, msglen, "resolution '%.100s' is not one of: "
		    "skip-over, preserve, realign", resolution);
		return KERR_INVALID_REQUEST;
	}
	if (resolution != NULL && strcmp(resolution, "realign") == 0)
		return realign_topic(st, t, msg, msglen);
	if (!mtopic_any(t, B(FAILED)))
		return KERR_NONE;   /* the contract: success, no change */
	for (int32_t i = 0; i < t->npart; i++) {
		int k = need_index(t->parts[i]);

		if (k < 0 || (resolution != NULL &&
		    resolution_accepted(needs[k].accepts, resolution)))
			continue;
		if (needs[k].accepts[0] == '\0')
			mstate_fmt(msg, msglen, "partition %d of topic '%s' of cluster "
			    "mirror '%s' failed for a reason only the resolution "
			    "realign repairs: %s (its reason: %.400s)", (int)i,
			    topic, mirror,
			    needs[k].instead, t->parts[i]->error);
		else if (resolution != NULL)
			mstate_fmt(msg, msglen, "partition %d of topic '%s' of cluster "
			    "mirror '%s' needs another decision (%.400s): the "
			    "resolution %s does not apply to it, recover it with the "
			    "resolution %s", (int)i, topic, mirror,
			    t->parts[i]->error, resolution, needs[k].accepts);
		else
			mstate_fmt(msg, msglen, "partition %d of topic '%s' of cluster "
			    "mirror '%s' needs an operator decision (%.400s): recover it "
			    "with the resolution %s", (int)i, topic, mirror,
			    t->parts[i]->error, needs[k].accepts);
		return KERR_INVALID_REQUEST;
	}
	snprintf(why, sizeof(why), "recovered by the operator%s%s",
	    resolution != NULL ? ", resolution " : "",
	    resolution != NULL ? resolution : "");
	return topic_move(st, t, B(FAILED), MPART_PREPARING, why, msg, msglen);
}

/* ---- data-plane operations ------------------------------------------ */

static void part_what(const struct mpart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%d", p->topic->mirror->name, p->topic->name,
	    (int)p->index);
}

/* The synchronous write (cb NULL) or the asynchronous one of n
 * validated records; *started as mstate.h says. */
static int persist_n(struct mstate *st, const struct mrec *r, size_t n,
    const char *what, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	int rc;

	/* Without the log's event base: written now, nothing pending. */
	if (cb == NULL || !mstate_async_ready(st))
		return mstate_persist(st, r, n, what, msg, msglen);
	rc = mstate_persist_async(st, r, n, what, cb, arg, msg, msglen);
	if (rc == KERR_NONE && started != NULL)
		*started = 1;
	return rc;
}

static int persist_one(struct mstate *st, const struct mrec *r,
    const char *what, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	return persist_n(st, r, 1, what, cb, arg, started, msg, msglen);
}

/*
 * A partition state record is validated against the model's state, which
 * does not show asynchronous writes still in flight.  The synchronous
 * forms therefore wait for those first (they would wait for them before
 * writing anyway): validated against the state the log will hold, the
 * record always applies, also at replay.  The asynchronous forms rely on
 * their caller (at most one state write of a partition in flight, mstate.h).
 */
static void state_sync_first(struct mstate *st, mstate_done_fn cb)
{
	if ((cb == NULL || !mstate_async_ready(st)) && st->ml != NULL &&
	    !st->batch)
		mstate_async_drain(st);
}

static int part_move(struct mstate *st, struct mpart *p, int to,
    const char *why, int32_t retry, int last, int64_t last_offset,
    int32_t last_epoch, const struct mfailover *fo, const char *note,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen)
{
	struct mrec r[4];
	char what[520];
	size_t n = 1;

	if (started != NULL)
		*started = 0;
	state_sync_first(st, cb);
	part_what(p, what, sizeof(what));
	if (to < 0 || to >= MPART_STATE_COUNT) {
		mstate_fmt(msg, msglen, "%s: %d is not a partition state", what, to);
		return KERR_INVALID_REQUEST;
	}
	if (last && p->state != MPART_STOPPING) {
		mstate_fmt(msg, msglen, "%s: %s -> STOPPED is not an allowed "
		    "transition", what, mpart_state_name(p->state));
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	}
	if (!mpart_transition_ok(p->state, to)) {
		mstate_fmt(msg, msglen, "%s: %s -> %s is not an allowed transition",
		    what, mpart_state_name(p->state), mpart_state_name(to));
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	}
	if ((int)p->state == to && to != MPART_FAILED && !last)
		return KERR_NONE;
	mstate_part_rec(&r[0], MREC_PART_STATE, p);
	r[0].state = (int8_t)to;
	r[0].retry = retry;
	r[0].str = kstr_c(why);
	if (last) {
		r[0].flags = MREC_F_LAST;
		r[0].off = last_offset;
		r[0].epoch = last_epoch;
	}
	if (fo != NULL) {
		/* The failover report goes in the same write. */
		mstate_part_rec(&r[1], MREC_PART_FAILOVER, p);
		r[1].off = fo->src_hwm < 0 ? -1 : fo->src_hwm;
		r[1].off2 = fo->lag < 0 ? -1 : fo->lag;
		r[1].off3 = fo->lag_ms < 0 ? -1 : fo->lag_ms;
		mstate_part_rec(&r[2], MREC_PART_FAILOVER_AT, p);
		r[2].off = fo->hwm_at < 0 ? -1 : fo->hwm_at;
		r[2].off2 = fo->stopped_at < 0 ? -1 : fo->stopped_at;
		r[2].flags = fo->asked ? MREC_F_ASKED : 0;
		n = 3;
		if (note != NULL && note[0] != '\0') {
			/* What the final group sync missed (cut to fit: the
			 * stop is never refused for its report). */
			mstate_part_rec(&r[3], MREC_PART_FAILOVER_NOTE, p);
			r[3].str = kstr_c(note);
			if (r[3].str.len > MREC_MAX_NOTE)
				r[3].str.len = MREC_MAX_NOTE;
			n = 4;
		}
	}
	return persist_n(st, r, n, what, cb, arg, started, msg, msglen);
}

int mpart_set_state(struct mstate *st, struct mpart *p, int to,
    const char *why, char *msg, size_t msglen)
{
	return part_move(st, p, to, why, p->retry_attempt, 0, 0, 0, NULL, NULL,
	    NULL, NULL, NULL, msg, msglen);
}

int mpart_set_state_async(struct mstate *st, struct mpart *p, int to,
    const char *why, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	return part_move(st, p, to, why, p->retry_attempt, 0, 0, 0, NULL, NULL,
	    cb, arg, started, msg, msglen);
}

int mpart_fail(struct mstate *st, struct mpart *p, const char *error,
    int32_t retry_attempt, char *msg, size_t msglen)
{
	return part_move(st, p, MPART_FAILED, error != NULL ? error :
	    "failed", retry_attempt, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,
	    msg, msglen);
}

int mpart_fail_async(struct mstate *st, struct mpart *p, const char *error,
    int32_t retry_attempt, mstate_done_fn cb, void *arg, int *started,
    char *msg, size_t msglen)
{
	return part_move(st, p, MPART_FAILED, error != NULL ? error :
	    "failed", retry_attempt, 0, 0, 0, NULL, NULL, cb, arg, started,
	    msg, msglen);
}

int mpart_stopped_report(struct mstate *st, struct mpart *p,
    int64_t last_offset, int32_t last_epoch, const struct mfailover *fo,
    const char *note, const char *why, char *msg, size_t msglen)
{
	return part_move(st, p, MPART_STOPPED, why, p->retry_attempt, 1,
	    last_offset, last_epoch, fo, note, NULL, NULL, NULL, msg, msglen);
}

int mpart_stopped_report_async(struct mstate *st, struct mpart *p,
    int64_t last_offset, int32_t last_epoch, const struct mfailover *fo,
    const char *note, const char *why, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	return part_move(st, p, MPART_STOPPED, why, p->retry_attempt, 1,
	    last_offset, last_epoch, fo, note, cb, arg, started, msg, msglen);
}

int mpart_stopped(struct mstate *st, struct mpart *p, int64_t last_offset,
    int32_t last_epoch, const char *why, char *msg, size_t msglen)
{
	return mpart_stopped_report(st, p, last_offset, last_epoch, NULL, NULL,
	    why, msg, msglen);
}

static int add_epoch(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, mstate_done_fn cb, void *arg, int *started,
    char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];
	int noop;

	if (mstate_epoch_check(p, epoch, start_offset, &noop, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	if (noop)
		return KERR_NONE;
	mstate_part_rec(&r, MREC_PART_EPOCH, p);
	r.epoch = epoch;
	r.off = start_offset;
	part_what(p, what, sizeof(what));
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_add_epoch(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, char *msg, size_t msglen)
{
	return add_epoch(st, p, epoch, start_offset, NULL, NULL, NULL, msg,
	    msglen);
}

int mpart_add_epoch_async(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, mstate_done_fn cb, void *arg, int *started,
    char *msg, size_t msglen)
{
	*started = 0;
	return add_epoch(st, p, epoch, start_offset, cb, arg, started, msg,
	    msglen);
}

static int set_producer(struct mstate *st, struct mpart *p, int64_t pid,
    int32_t epoch, int64_t seq_base, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];
	int noop;

	if (mstate_producer_check(p, pid, epoch, seq_base, &noop, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	if (noop)
		return KERR_NONE;
	mstate_part_rec(&r, MREC_PART_PRODUCER, p);
	r.off = pid;
	r.epoch = epoch;
	r.off2 = seq_base;
	part_what(p, what, sizeof(what));
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_set_producer(struct mstate *st, struct mpart *p, int64_t pid,
    int32_t epoch, int64_t seq_base, char *msg, size_t msglen)
{
	return set_producer(st, p, pid, epoch, seq_base, NULL, NULL, NULL, msg,
	    msglen);
}

int mpart_set_producer_async(struct mstate *st, struct mpart *p, int64_t pid,
    int32_t epoch, int64_t seq_base, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	*started = 0;
	return set_producer(st, p, pid, epoch, seq_base, cb, arg, started, msg,
	    msglen);
}

static ssize_t acl_find(const struct mstate *st, const char *mirror, int kind,
    const char *binding)
{
	for (size_t i = 0; i < st->nacls; i++)
		if (st->acls[i].kind == kind && strcmp(st->acls[i].mirror, mirror) == 0 &&
		    strcmp(st->acls[i].binding, binding) == 0)
			return (ssize_t)i;
	return -1;
}

int mstate_acl_note(struct mstate *st, const char *mirror, int kind,
    const char *binding, int add, char *msg, size_t msglen)
{
	struct mrec r;
	char what[400];

	snprintf(what, sizeof(what), "mirror %s: ACL binding %.300s", mirror,
	    binding);
	if ((kind != MACL_SYNC && kind != MACL_READONLY) ||
	    strlen(binding) == 0 || strlen(binding) > MACL_MAX_BINDING) {
		mstate_fmt(msg, msglen, "%s: kind %d or %zu bytes not allowed",
		    what, kind, strlen(binding));
		return KERR_INVALID_REQUEST;
	}
	if ((acl_find(st, mirror, kind, binding) >= 0) == (add != 0))
		return KERR_NONE;
	mstate_rec_init(&r, MREC_ACL_BINDING, mirror, NULL);
	r.kind = (int8_t)kind;
	r.flags = add ? MREC_F_ADD : 0;
	r.str = kstr_c(binding);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

size_t mstate_acl_count(const struct mstate *st)
{
	return st->nacls;
}

const struct macl *mstate_acl_get(const struct mstate *st, size_t i)
{
	return i < st->nacls ? &st->acls[i] : NULL;
}

/* Applies an acl-binding record (mstate_apply.c). */
int mstate_acl_apply(struct mstate *st, struct kstr mirror, int kind,
    struct kstr binding, int add, char *err, size_t errlen)
{
	int oom = 0;
	char *m, *b;
	ssize_t at;

	if ((kind != MACL_SYNC && kind != MACL_READONLY) || binding.len <= 0 ||
	    binding.len > MACL_MAX_BINDING) {
		mstate_fmt(err, errlen, "acl-binding record: kind %d, binding of "
		    "%d bytes", kind, (int)binding.len);
		return -1;
	}
	m = mstate_kdup(mirror, &oom);
	b = mstate_kdup(binding, &oom);
	if (oom) {
		free(m);
		free(b);
		mstate_fmt(err, errlen, "out of memory");
		return -1;
	}
	at = acl_find(st, m, kind, b);
	if (add && at < 0) {
		if (mstate_grow(&st->acls, st->nacls, sizeof(*st->acls)) != 0) {
			free(m);
			free(b);
			mstate_fmt(err, errlen, "out of memory");
			return -1;
		}
		st->acls[st->nacls].mirror = m;
		st->acls[st->nacls].kind = kind;
		st->acls[st->nacls].binding = b;
		st->nacls++;
		return 0;
	}
	if (!add && at >= 0) {
		free(st->acls[at].mirror);
		free(st->acls[at].binding);
		st->acls[at] = st->acls[--st->nacls];
	}
	free(m);
	free(b);
	return 0;
}

static int add_anchor(struct mstate *st, struct mpart *p, int64_t src,
    int64_t dst, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	struct mrec r;
	char what[520];
	int action;
	struct manchor fold;

	if (mstate_anchor_check(p, src, dst, &action, &fold, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	if (action == MST_ANCHOR_NOOP)
		return KERR_NONE;
	mstate_part_rec(&r, MREC_PART_ANCHOR, p);
	r.off = src;
	r.off2 = dst;
	part_what(p, what, sizeof(what));
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_add_anchor_async(struct mstate *st, struct mpart *p, int64_t src,
    int64_t dst, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	if (started != NULL)
		*started = 0;
	return add_anchor(st, p, src, dst, cb, arg, started, msg, msglen);
}

static int add_anchors(struct mstate *st, struct mpart *p,
    int64_t sending_dst, const struct mrec_anchor *v, size_t n,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];

	part_what(p, what, sizeof(what));
	if (n == 0 || n > MREC_MAX_ANCHORS) {
		mstate_fmt(msg, msglen, "%s: %zu anchors in one record (1 to %d)",
		    what, n, MREC_MAX_ANCHORS);
		return KERR_INVALID_REQUEST;
	}
	if (sending_dst < -1) {
		mstate_fmt(msg, msglen, "%s: batch sent to destination offset %"
		    PRId64 ": negative", what, sending_dst);
		return KERR_INVALID_REQUEST;
	}
	if (mstate_realign_check(p, msg, msglen) != 0)
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	for (size_t i = 0; i < n; i++) {
		int64_t ls = i > 0 ? v[i - 1].src : -1, ld = i > 0 ? v[i - 1].dst : -1;

		if (i == 0 && mpart_nanchors(p) > 0) {
			struct manchor l = mpart_anchor(p, mpart_nanchors(p) - 1);

			ls = l.src;
			ld = l.dst;
		}
		if (v[i].src < 0 || v[i].dst < 0 || v[i].src < ls || v[i].dst < ld) {
			mstate_fmt(msg, msglen, "%s: anchor (%" PRId64 ", %" PRId64
			    ") is negative or goes back from (%" PRId64 ", %" PRId64
			    ")", what, v[i].src, v[i].dst, ls, ld);
			return KERR_INVALID_REQUEST;
		}
	}
	mstate_part_rec(&r, MREC_PART_ANCHORS, p);
	r.off = sending_dst == p->sending_dst ? -1 : sending_dst;
	r.anchors = v;
	r.nanchors = (int32_t)n;
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_add_anchors_async(struct mstate *st, struct mpart *p,
    int64_t sending_dst, const struct mrec_anchor *v, size_t n,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen)
{
	if (started != NULL)
		*started = 0;
	return add_anchors(st, p, sending_dst, v, n, cb, arg, started, msg,
	    msglen);
}

size_t mpart_anchors_above(const struct mpart *p, int64_t dst)
{
	return mstate_retract_anchors_at(p, dst);
}

int mpart_retract_async(struct mstate *st, struct mpart *p, int64_t dst,
    size_t *dropped, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen)
{
	struct mrec r;
	char what[520];
	size_t n;

	if (started != NULL)
		*started = 0;
	if (dropped != NULL)
		*dropped = 0;
	part_what(p, what, sizeof(what));
	if (dst < 0) {
		mstate_fmt(msg, msglen, "%s: retract above destination offset %"
		    PRId64 ": negative", what, dst);
		return KERR_INVALID_REQUEST;
	}
	if (mstate_realign_check(p, msg, msglen) != 0)
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	if ((n = mstate_retract_anchors_at(p, dst)) == 0)
		return KERR_NONE;
	if (dropped != NULL)
		*dropped = n;
	mstate_part_rec(&r, MREC_PART_RETRACT, p);
	r.off = dst;
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

static int note_sending(struct mstate *st, struct mpart *p, int64_t dst,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];

	part_what(p, what, sizeof(what));
	if (dst < 0) {
		mstate_fmt(msg, msglen, "%s: batch sent to destination offset %"
		    PRId64 ": negative", what, dst);
		return KERR_INVALID_REQUEST;
	}
	if (mstate_realign_check(p, msg, msglen) != 0)
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	if (p->sending_dst == dst)
		return KERR_NONE;
	mstate_part_rec(&r, MREC_PART_SENDING, p);
	r.off = dst;
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_note_sending_async(struct mstate *st, struct mpart *p, int64_t dst,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen)
{
	if (started != NULL)
		*started = 0;
	return note_sending(st, p, dst, cb, arg, started, msg, msglen);
}

static int part_trim(struct mstate *st, struct mpart *p, int64_t src_min,
    int64_t dst_min, size_t *dropped, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];
	size_t ne, na;

	if (started != NULL)
		*started = 0;
	if (dropped != NULL)
		*dropped = 0;
	part_what(p, what, sizeof(what));
	if (src_min < 0 || dst_min < 0) {
		mstate_fmt(msg, msglen, "%s: trim below offsets %" PRId64 " and %"
		    PRId64 ": negative", what, src_min, dst_min);
		return KERR_INVALID_REQUEST;
	}
	ne = mstate_trim_epochs_at(p, src_min, dst_min);
	na = mstate_trim_anchors_at(p, src_min, dst_min);
	if (ne == 0 && na == 0)
		return KERR_NONE;
	mstate_part_rec(&r, MREC_PART_TRIM, p);
	r.off = src_min;
	r.off2 = dst_min;
	if (dropped != NULL)
		*dropped = ne + na;
	return persist_one(st, &r, what, cb, arg, started, msg, msglen);
}

int mpart_trim(struct mstate *st, struct mpart *p, int64_t src_min,
    int64_t dst_min, size_t *dropped, char *msg, size_t msglen)
{
	return part_trim(st, p, src_min, dst_min, dropped, NULL, NULL, NULL,
	    msg, msglen);
}

int mpart_trim_async(struct mstate *st, struct mpart *p, int64_t src_min,
    int64_t dst_min, size_t *dropped, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen)
{
	return part_trim(st, p, src_min, dst_min, dropped, cb, arg, started,
	    msg, msglen);
}

int mtopic_set_ident(struct mstate *st, struct mtopic *t, int which,
    const char *value, char *msg, size_t msglen)
{
	const char *cur;
	struct mrec r;
	char what[520];

	snprintf(what, sizeof(what), "%s/%s", t->mirror->name, t->name);
	switch (which) {
	case MTOPIC_IDENT_SOURCE: cur = t->src_topic_id; break;
	case MTOPIC_IDENT_DEST: cur = t->dst_topic_id; break;
	case MTOPIC_IDENT_NOTE: cur = t->note; break;
	case MTOPIC_IDENT_DEST_CLUSTER: cur = t->dst_cluster_id; break;
	default:
		mstate_fmt(msg, msglen, "%s: %d is not a topic identity field",
		    what, which);
		return KERR_INVALID_REQUEST;
	}
	if (value != NULL && (value[0] == '\0' || strlen(value) > MREC_MAX_NAME)) {
		mstate_fmt(msg, msglen, "%s: a topic identity value must be 1-%d "
		    "characters", what, MREC_MAX_NAME);
		return KERR_INVALID_REQUEST;
	}
	if ((cur == NULL && value == NULL) ||
	    (cur != NULL && value != NULL && strcmp(cur, value) == 0))
		return KERR_NONE;
	mstate_rec_init(&r, MREC_TOPIC_IDENT, t->mirror->name, t->name);
	r.kind = (int8_t)which;
	r.str = kstr_c(value);
	return mstate_persist(st, &r, 1, what, msg, msglen);
}

int mstate_set_source_cluster_id(struct mstate *st, const char *mirror,
    const char *cluster_id, char *msg, size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	struct mrec r;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	if (cluster_id == NULL || cluster_id[0] == '\0' ||
	    strlen(cluster_id) > MREC_MAX_NAME) {
		mstate_fmt(msg, msglen, "cluster mirror '%s': source cluster id must "
		    "be 1-%d characters", mirror, MREC_MAX_NAME);
		return KERR_INVALID_REQUEST;
	}
	if (m->source_cluster_id != NULL &&
	    strcmp(m->source_cluster_id, cluster_id) == 0)
		return KERR_NONE;
	mstate_rec_init(&r, MREC_MIRROR_SOURCE, mirror, NULL);
	r.str = kstr_c(cluster_id);
	return mstate_persist(st, &r, 1, mirror, msg, msglen);
}

/* ---- multi-instance mode -------------------------------------------------- */

static int id_len_ok(const char *s, int allow_empty)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return (n > 0 || allow_empty) && n <= MREC_MAX_ID;
}

int mstate_set_members(struct mstate *st, int32_t generation,
    const struct mmember *members, size_t n, char *msg, size_t msglen)
{
	struct mrec_member *mm;
	struct mrec r;
	int code;

	if (generation < 0) {
		mstate_fmt(msg, msglen, "cluster members: generation %d is negative",
		    (int)generation);
		return KERR_INVALID_REQUEST;
	}
	if (n > MREC_MAX_MEMBERS) {
		mstate_fmt(msg, msglen, "cluster members of generation %d: %zu "
		    "members, at most %d", (int)generation, n, MREC_MAX_MEMBERS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t i = 0; i < n; i++) {
		const struct mmember *m = &members[i];

		if (!id_len_ok(m->instance_id, 0) || !id_len_ok(m->member_id, 1) ||
		    !id_len_ok(m->admin_addr, 1) || !id_len_ok(m->http_addr, 1) ||
		    m->local_broker_id < -1) {
			mstate_fmt(msg, msglen, "cluster members of generation %d: "
			    "member %zu (instance '%.100s'): instance id must be "
			    "1-%d bytes, member id and addresses at most %d, local "
			    "broker id -1 or more (%d)", (int)generation, i,
			    m->instance_id != NULL ? m->instance_id : "",
			    MREC_MAX_ID, MREC_MAX_ID, (int)m->local_broker_id);
			return KERR_INVALID_REQUEST;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(members[j].instance_id, m->instance_id) == 0) {
				mstate_fmt(msg, msglen, "cluster members of "
				    "generation %d: instance '%.200s' is named "
				    "twice", (int)generation, m->instance_id);
				return KERR_INVALID_REQUEST;
			}
	}
	if ((mm = calloc(n + 1, sizeof(*mm))) == NULL) {
		mstate_fmt(msg, msglen, "cluster members: out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < n; i++) {
		mm[i].instance_id = kstr_c(members[i].instance_id);
		mm[i].member_id = kstr_c(members[i].member_id != NULL ?
		    members[i].member_id : "");
		mm[i].local_broker_id = members[i].local_broker_id;
		mm[i].admin_addr = kstr_c(members[i].admin_addr);
		mm[i].http_addr = kstr_c(members[i].http_addr);
	}
	mstate_rec_init(&r, MREC_CLUSTER_MEMBERS, NULL, NULL);
	r.generation = generation;
	r.nmembers = (int32_t)n;
	r.members = mm;
	code = mstate_persist(st, &r, 1, "cluster members", msg, msglen);
	free(mm);
	return code;
}

int mpart_set_owners(struct mstate *st, struct mpart *const *parts,
    const char *const *owners, size_t n, int32_t generation, char *msg,
    size_t msglen)
{
	struct mrec *recs;
	char what[520];
	size_t k = 0;
	int code;

	for (size_t i = 0; i < n; i++) {
		const char *o = owners[i];

		part_what(parts[i], what, sizeof(what));
		if (o != NULL && strlen(o) > MREC_MAX_ID) {
			mstate_fmt(msg, msglen, "%s: owner instance id of %zu bytes "
			    "(at most %d)", what, strlen(o), MREC_MAX_ID);
			return KERR_INVALID_REQUEST;
		}
	}
	if ((recs = calloc(n + 1, sizeof(*recs))) == NULL) {
		mstate_fmt(msg, msglen, "partition owners: out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < n; i++) {
		const char *o = owners[i] != NULL && owners[i][0] != '\0' ?
		    owners[i] : NULL;
		const char *cur = parts[i]->owner;

		if ((o == NULL && cur == NULL) ||
		    (o != NULL && cur != NULL && strcmp(o, cur) == 0))
			continue;
		mstate_part_rec(&recs[k], MREC_PART_OWNER, parts[i]);
		recs[k].str = kstr_c(o != NULL ? o : "");
		recs[k].generation = generation;
		k++;
	}
	code = k > 0 ? mstate_persist(st, recs, k, "partition owners", msg,
	    msglen) : KERR_NONE;
	free(recs);
	return code;
}
