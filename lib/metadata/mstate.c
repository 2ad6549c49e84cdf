/*
 * mstate.c: the mirror state model (see mstate.h).
 *
 * This file: the state table, lookups, validation helpers, life cycle,
 * the cluster id, and the snapshot and text dumps.  The apply functions
 * and persistence are in mstate_apply.c, the operations in mstate_ops.c
 * (see mstate_int.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "mrec.h"
#include "mstate.h"
#include "mstate_int.h"
#include "tpattern.h"
#include "xlate.h"

/* ---- states and transitions ---------------------------------------------- */

static const char *const state_names[] = {
#define X(s) [MPART_##s] = #s,
	MPART_STATES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(state_names) == MPART_STATE_COUNT, "state names");

/*
 * allowed_from[to]: the states a partition may leave for `to` (the KIP's
 * state table with the seed's names: PREPARING is LOG_ALIGNMENT).  Additions
 * to the prototype's table, each from the rules of doc/protocol.md: PAUSING
 * and PAUSED resume straight to MIRRORING; PREPARING and FAILED may be
 * paused (Pause succeeds unless 139/140/142, and a paused partition simply
 * has no fetcher).  Any state may stay where it is, and fail.
 */
#define B(s) MST_BIT(s)
static const unsigned allowed_from[MPART_STATE_COUNT] = {
	[MPART_UNKNOWN] = 0,
	[MPART_PREPARING] = B(UNKNOWN) | B(STOPPED) | B(FAILED),
	[MPART_MIRRORING] = B(PREPARING) | B(PAUSED) | B(PAUSING) | B(FAILED),
	[MPART_PAUSING] = B(MIRRORING) | B(PREPARING) | B(FAILED),
	[MPART_PAUSED] = B(PAUSING),
	[MPART_STOPPING] = B(PREPARING) | B(MIRRORING) | B(PAUSING) |
	    B(PAUSED) | B(FAILED),
	[MPART_STOPPED] = B(STOPPING),
	[MPART_FAILED] = B(UNKNOWN) | B(PREPARING) | B(MIRRORING) |
	    B(PAUSING) | B(PAUSED) | B(STOPPING) | B(STOPPED),
};
#undef B

const char *mpart_state_name(int state)
{
	if (state == MTOPIC_MIXED)
		return "MIXED";
	if (state < 0 || state >= MPART_STATE_COUNT)
		return "?";
	return state_names[state];
}

int mpart_state_parse(const char *name)
{
	for (int i = 0; i < MPART_STATE_COUNT; i++)
		if (strcmp(state_names[i], name) == 0)
			return i;
	return -1;
}

int mpart_transition_ok(int from, int to)
{
	if (from < 0 || from >= MPART_STATE_COUNT || to < 0 ||
	    to >= MPART_STATE_COUNT)
		return 0;
	return from == to || (allowed_from[to] & (1u << from)) != 0;
}

/* ---- small helpers ------------------------------------------------------ */

void mstate_fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* NUL-terminated copy of a kstr (NULL for null); sets *oom on failure. */
char *mstate_kdup(struct kstr s, int *oom)
{
	if (s.len < 0)
		return NULL;
	char *c = malloc((size_t)s.len + 1);
	if (c == NULL) {
		*oom = 1;
		return NULL;
	}
	memcpy(c, s.p, (size_t)s.len);
	c[s.len] = '\0';
	return c;
}

/* strcmp of a kstr against a C string. */
int mstate_kcmp(struct kstr a, const char *b)
{
	size_t bl = strlen(b);
	size_t n = MIN((size_t)a.len, bl);
	int c = memcmp(a.p, b, n);

	if (c != 0)
		return c;
	return (size_t)a.len < bl ? -1 : (size_t)a.len > bl;
}

/*
 * Makes room for element n of a growable array whose capacity is implied
 * by its count (4, then doubling; arrays never shrink their allocation, so
 * the real capacity is never below the implied one).
 */
int mstate_grow(void *arrp, size_t n, size_t elem)
{
	void **arr = arrp;
	size_t cap;
	void *p;

	if (n == 0)
		cap = 4;
	else if (n >= 4 && (n & (n - 1)) == 0)
		cap = n * 2;
	else
		return 0;
	p = realloc(*arr, cap * elem);
	if (p == NULL)
		return -1;
	*arr = p;
	return 0;
}

/* ---- lookups ------------------------------------------------------------ */

/* Index of name in the sorted mirror array, or where it would go (*found 0). */
size_t mstate_mirror_pos(const struct mstate *st, struct kstr name, int *found)
{
	size_t lo = 0, hi = st->nmirrors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = mstate_kcmp(name, st->mirrors[mid]->name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = 0;
	return lo;
}

size_t mstate_topic_pos(const struct mirror *m, struct kstr name, int *found)
{
	size_t lo = 0, hi = m->ntopics;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = mstate_kcmp(name, m->topics[mid]->name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = 0;
	return lo;
}

struct mirror *mstate_find_mirror_k(const struct mstate *st, struct kstr name)
{
	int found;
	size_t i = mstate_mirror_pos(st, name, &found);

	return found ? st->mirrors[i] : NULL;
}

struct mtopic *mstate_find_topic_k(const struct mirror *m, struct kstr name)
{
	int found;
	size_t i = mstate_topic_pos(m, name, &found);

	return found ? m->topics[i] : NULL;
}

struct mirror *mstate_mirror_find(const struct mstate *st, const char *name)
{
	return name != NULL ? mstate_find_mirror_k(st, kstr_c(name)) : NULL;
}

struct mtopic *mirror_topic_find(const struct mirror *m, const char *topic)
{
	return m != NULL && topic != NULL ? mstate_find_topic_k(m, kstr_c(topic)) : NULL;
}

size_t mstate_mirror_count(const struct mstate *st)
{
	return st->nmirrors;
}

struct mirror *mstate_mirror_at(const struct mstate *st, size_t i)
{
	return i < st->nmirrors ? st->mirrors[i] : NULL;
}

const char *mstate_cluster_id(const struct mstate *st)
{
	return st->cluster_id;
}

const char *mirror_config_get(const struct mirror *m, const char *key)
{
	const char *v = NULL;

	for (size_t i = 0; i < m->nconfigs; i++)
		if (strcmp(m->configs[i].name, key) == 0)
			v = m->configs[i].value;
	return v;
}

const char *mirror_bootstrap(const struct mirror *m)
{
	const char *v = mirror_config_get(m, "bootstrap.servers");

	return v != NULL ? v : "";
}

int mtopic_state(const struct mtopic *t)
{
	if (t->npart == 0)
		return MPART_UNKNOWN;
	int s = (int)t->parts[0]->state;
	for (int32_t i = 1; i < t->npart; i++)
		if ((int)t->parts[i]->state != s)
			return MTOPIC_MIXED;
	return s;
}

const char *mtopic_state_name(const struct mtopic *t)
{
	return mpart_state_name(mtopic_state(t));
}

int mtopic_all_stopped(const struct mtopic *t)
{
	for (int32_t i = 0; i < t->npart; i++)
		if (t->parts[i]->state != MPART_STOPPED)
			return 0;
	return 1;
}

int mtopic_any(const struct mtopic *t, unsigned mask)
{
	for (int32_t i = 0; i < t->npart; i++)
		if (mask & (1u << t->parts[i]->state))
			return 1;
	return 0;
}

int mtopic_all(const struct mtopic *t, unsigned mask)
{
	for (int32_t i = 0; i < t->npart; i++)
		if (!(mask & (1u << t->parts[i]->state)))
			return 0;
	return 1;
}

struct mirror *mstate_topic_holder(const struct mstate *st, const char *topic,
    const struct mirror *except)
{
	for (size_t i = 0; i < st->nmirrors; i++) {
		struct mirror *m = st->mirrors[i];
		struct mtopic *t;
		if (m == except)
			continue;
		t = mirror_topic_find(m, topic);
		if (t != NULL && !mtopic_all_stopped(t))
			return m;
	}
	return NULL;
}

int32_t mstate_members(const struct mstate *st, const struct mmember **out,
    size_t *n)
{
	*out = st->members;
	*n = st->nmembers;
	return st->generation;
}

const struct mmember *mstate_member_find(const struct mstate *st,
    const char *instance_id)
{
	size_t lo = 0, hi = st->nmembers;

	if (instance_id == NULL)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(instance_id, st->members[mid].instance_id);

		if (c == 0)
			return &st->members[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

int mpart_owned_by(const struct mpart *p, const char *instance_id)
{
	if (instance_id == NULL)
		return 1;
	return p->owner != NULL && strcmp(p->owner, instance_id) == 0;
}

size_t mpart_nanchors(const struct mpart *p)
{
	return xlate_count(p->map);
}

struct manchor mpart_anchor(const struct mpart *p, size_t i)
{
	struct xlate_anchor a = xlate_at(p->map, i);
	struct manchor r = { a.src, a.dst };

	return r;
}

int64_t mpart_stop_dst(const struct mpart *p)
{
	int64_t l = p->last_offset, d;
	int rc;

	if (l < 0)
		return -1;
	if (mpart_nanchors(p) == 0)
		return l + 1;
	/* a source offset in a hole is not a mirrored record */
	rc = xlate_src_to_dst(p->map, l, &d);
	return rc == XLATE_EXACT ? d + 1 : -1;
}

int mstate_set_instance(struct mstate *st, const char *instance_id)
{
	char *id = NULL;

	if (instance_id != NULL && (id = strdup(instance_id)) == NULL)
		return -1;
	free(st->instance);
	st->instance = id;
	return 0;
}

/* ---- validation helpers ------------------------------------------------- */

static int legal_name_chars(const char *s)
{
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' ||
		    *s == '-'))
			return 0;
	return 1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

int mstate_check_mirror_name(const char *name, char *msg, size_t msglen)
{
	const char *why = NULL;

	if (name == NULL || name[0] == '\0')
		why = "is empty";
	else if (strlen(name) > MREC_MAX_NAME)
		why = "is longer than 249 characters";
	else if (!legal_name_chars(name))
		why = "has characters outside [a-zA-Z0-9._-]";
	else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		why = "cannot be '.' or '..'";
	else if (ends_with(name, ".removed") || ends_with(name, ".paused"))
		why = "cannot end in '.removed' or '.paused'";
	if (why == NULL)
		return 0;
	mstate_fmt(msg, msglen, "mirror name '%.249s' %s", name != NULL ? name : "",
	    why);
	return KERR_INVALID_CLUSTER_MIRROR_NAME;
}

int mstate_check_topic_name(const char *name, char *msg, size_t msglen)
{
	const char *why = NULL;

	if (name == NULL || name[0] == '\0')
		why = "is empty";
	else if (strlen(name) > MREC_MAX_NAME)
		why = "is longer than 249 characters";
	else if (!legal_name_chars(name))
		why = "has characters outside [a-zA-Z0-9._-]";
	else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		why = "cannot be '.' or '..'";
	if (why == NULL)
		return 0;
	mstate_fmt(msg, msglen, "topic name '%.249s' %s", name != NULL ? name : "",
	    why);
	return KERR_INVALID_TOPIC_EXCEPTION;
}

struct tpattern *mstate_compile_pattern(const char *pattern, char *msg,
    size_t msglen)
{
	char why[512];
	struct tpattern *p = tpattern_new(pattern, why, sizeof(why));

	if (p == NULL)
		mstate_fmt(msg, msglen, "pattern '%.200s%s' %s", pattern,
		    strlen(pattern) > 200 ? "..." : "", why);
	return p;
}

int mstate_pattern_match(const char *pattern, const char *name)
{
	struct tpattern *p = mstate_compile_pattern(pattern, NULL, 0);
	int m;

	if (p == NULL)
		return 0;
	m = tpattern_match(p, name);
	tpattern_free(p);
	return m;
}

int mirror_wants_topic(const struct mirror *m, const char *topic)
{
	int in = 0;

	for (size_t i = 0; i < m->nincludes && !in; i++)
		in = m->include_re[i] != NULL &&
		    tpattern_match(m->include_re[i], topic);
	for (size_t i = 0; i < m->nexcludes && in; i++)
		if (m->exclude_re[i] != NULL &&
		    tpattern_match(m->exclude_re[i], topic))
			in = 0;
	return in;
}

/* ---- freeing ---------------------------------------------------------- */

static void part_free(struct mpart *p)
{
	if (p == NULL)
		return;
	free(p->error);
	free(p->epochs);
	xlate_free(p->map);
	free(p->owner);
	free(p->failover_note);
	free(p);
}

void mstate_members_free(struct mmember *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].instance_id);
		free(m[i].member_id);
		free(m[i].admin_addr);
		free(m[i].http_addr);
	}
	free(m);
}

void mstate_topic_free(struct mtopic *t)
{
	if (t == NULL)
		return;
	for (int32_t i = 0; i < t->npart; i++)
		part_free(t->parts[i]);
	free(t->parts);
	free(t->name);
	free(t->src_topic_id);
	free(t->dst_topic_id);
	free(t->note);
	free(t->dst_cluster_id);
	free(t->prior_dst_topic_id);
	free(t->realign_dst_topic_id);
	free(t->gone_dst_topic_id);
	free(t);
}

void mstate_mirror_free(struct mirror *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->ntopics; i++)
		mstate_topic_free(m->topics[i]);
	free(m->topics);
	for (size_t i = 0; i < m->nconfigs; i++) {
		free(m->configs[i].name);
		if (m->configs[i].value != NULL) {
			/* It may be a secret: do not leave it in freed heap. */
			memset(m->configs[i].value, 0, strlen(m->configs[i].value));
			free(m->configs[i].value);
		}
	}
	free(m->configs);
	for (size_t i = 0; i < m->nincludes; i++) {
		free(m->includes[i]);
		tpattern_free(m->include_re[i]);
	}
	free(m->includes);
	free(m->include_re);
	for (size_t i = 0; i < m->nexcludes; i++) {
		free(m->excludes[i]);
		tpattern_free(m->exclude_re[i]);
	}
	free(m->excludes);
	free(m->exclude_re);
	free(m->source_cluster_id);
	free(m->name);
	free(m);
}

struct mstate *mstate_new(void)
{
	struct mstate *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return NULL;
	st->cfgbuf = calloc(MREC_MAX_CONFIGS, sizeof(*st->cfgbuf));
	if (st->cfgbuf == NULL) {
		free(st);
		return NULL;
	}
	st->generation = -1;
	return st;
}

void mstate_free(struct mstate *st)
{
	if (st == NULL)
		return;
	if (st->batch && st->ml != NULL)
		mlog_discard(st->ml);
	mstate_batch_clear(st);
	mstate_async_free(st);
	free(st->instance);
	for (size_t i = 0; i < st->nmirrors; i++)
		mstate_mirror_free(st->mirrors[i]);
	free(st->mirrors);
	mstate_members_free(st->members, st->nmembers);
	for (size_t i = 0; i < st->nacls; i++) {
		free(st->acls[i].mirror);
		free(st->acls[i].binding);
	}
	free(st->acls);
	free(st->cfgbuf);
	free(st);
}

int mstate_add_hook(struct mstate *st, mstate_hook_fn fn, void *arg)
{
	if (st->nhooks == MAX_HOOKS)
		return -1;
	st->hooks[st->nhooks].fn = fn;
	st->hooks[st->nhooks].arg = arg;
	st->nhooks++;
	return 0;
}

void mstate_emit(struct mstate *st, int live, const struct mstate_event *ev)
{
	if (!live)
		return;
	for (size_t i = 0; i < st->nhooks; i++)
		st->hooks[i].fn(st->hooks[i].arg, ev);
}

/* ---- cluster id ---------------------------------------------------------- */

static void base64url(const uint8_t in[16], char out[23])
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < 16; i++) {
		acc = acc << 8 | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = al[(acc >> bits) & 0x3f];
		}
	}
	out[o++] = al[(acc << (6 - bits)) & 0x3f];   /* 128 = 21*6 + 2 */
	out[o] = '\0';
}

/* A random (version 4) UUID in Kafka's 22-character base64url form; like
 * Kafka, never one that starts with '-' (it would read as a CLI flag). */
static int new_cluster_id(char out[MSTATE_CLUSTER_ID_LEN + 1])
{
	uint8_t b[16];

	do {
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return -1;
		b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
		b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
		base64url(b, out);
	} while (out[0] == '-');
	return 0;
}

int mstate_open(struct mstate *st, struct mlog *ml, char *err, size_t errlen)
{
	if (mlog_open(ml, mstate_apply_rec, st, err, errlen) != 0)
		return -1;
	st->ml = ml;
	if (ml->applies_on_sync)
		return 0;       /* a follower: the writer writes the id */
	return mstate_ensure_cluster_id(st, err, errlen);
}

int mstate_ensure_cluster_id(struct mstate *st, char *err, size_t errlen)
{
	struct mrec r;
	char id[MSTATE_CLUSTER_ID_LEN + 1];

	if (st->cluster_id[0] != '\0')
		return 0;
	if (new_cluster_id(id) != 0) {
		mstate_fmt(err, errlen, "cannot generate a cluster id: %s",
		    strerror(errno));
		return -1;
	}
	mstate_rec_init(&r, MREC_CLUSTER_ID, NULL, NULL);
	r.str = kstr_c(id);
	if (mstate_persist(st, &r, 1, "cluster id", err, errlen) != 0)
		return -1;
	log_info("metadata log: new cluster id %s%s", id,
	    st->batch ? " (with the batch being written)" : "");
	return 0;
}

int mstate_compact(struct mstate *st, char *err, size_t errlen)
{
	if (st->ml == NULL) {
		mstate_fmt(err, errlen, "the metadata log is not open");
		return -1;
	}
	if (st->batch) {
		/* The snapshot would hide the batch's unapplied records. */
		mstate_fmt(err, errlen, "cannot compact while a batch is open");
		return -1;
	}
	mstate_async_drain(st);
	return mlog_compact(st->ml, mstate_dump_records, st, err, errlen);
}

int mstate_maybe_compact(struct mstate *st)
{
	char err[1024];

	if (st->ml == NULL || !mlog_want_compact(st->ml))
		return 0;
	if (mstate_compact(st, err, sizeof(err)) != 0) {
		log_errorx("metadata log compaction failed: %s", err);
		return 0;
	}
	return 1;
}

/* ---- snapshot and text dump ------------------------------------------ */

static int put_rec(struct mlog_sink *sink, const struct mrec *r, size_t max)
{
	char err[256];
	struct kw w;
	uint8_t *b;
	size_t len;
	int rc;

	kw_init(&w, max);
	if (mrec_encode(r, &w, err, sizeof(err)) != 0) {
		kw_fini(&w);
		log_errorx("snapshot: %s", err);
		sink->failed = 1;
		return -1;
	}
	b = kw_take(&w, &len);
	if (b == NULL) {
		sink->failed = 1;
		return -1;
	}
	rc = mlog_sink_put(sink, r->type, b, len);
	free(b);
	return rc;
}

static int dump_head(const struct mstate *st, struct mlog_sink *sink,
    size_t max)
{
	struct mrec r;
	int rc = 0;

	if (st->cluster_id[0] != '\0') {
		mstate_rec_init(&r, MREC_CLUSTER_ID, NULL, NULL);
		r.str = kstr_c(st->cluster_id);
		rc |= put_rec(sink, &r, max);
	}
	if (st->generation >= 0) {
		struct mrec_member *mm = calloc(st->nmembers + 1, sizeof(*mm));

		if (mm == NULL)
			return -1;
		for (size_t i = 0; i < st->nmembers; i++) {
			mm[i].instance_id = kstr_c(st->members[i].instance_id);
			mm[i].member_id = kstr_c(st->members[i].member_id);
			mm[i].local_broker_id = st->members[i].local_broker_id;
			mm[i].admin_addr = kstr_c(st->members[i].admin_addr);
			mm[i].http_addr = kstr_c(st->members[i].http_addr);
		}
		mstate_rec_init(&r, MREC_CLUSTER_MEMBERS, NULL, NULL);
		r.generation = st->generation;
		r.nmembers = (int32_t)st->nmembers;
		r.members = mm;
		rc |= put_rec(sink, &r, max);
		free(mm);
	}
	return rc;
}

/* The mirror's own records (create, source, patterns), not its topics. */
static int dump_mirror_head(const struct mirror *m, struct mlog_sink *sink,
    size_t max)
{
	struct mrec r;
	struct mrec_config *cfg = calloc(m->nconfigs + 1, sizeof(*cfg));
	int rc = 0;

	if (cfg == NULL)
		return -1;
	for (size_t c = 0; c < m->nconfigs; c++) {
		cfg[c].name = kstr_c(m->configs[c].name);
		cfg[c].value = kstr_c(m->configs[c].value);
	}
	mstate_rec_init(&r, MREC_MIRROR_CREATE, m->name, NULL);
	r.configs = cfg;
	r.nconfigs = (int32_t)m->nconfigs;
	rc |= put_rec(sink, &r, max);
	free(cfg);
	if (m->source_cluster_id != NULL) {
		mstate_rec_init(&r, MREC_MIRROR_SOURCE, m->name, NULL);
		r.str = kstr_c(m->source_cluster_id);
		rc |= put_rec(sink, &r, max);
	}
	for (size_t k = 0; k < m->nincludes + m->nexcludes; k++) {
		int inc = k < m->nincludes;
		mstate_rec_init(&r, MREC_MIRROR_PATTERN, m->name, NULL);
		r.kind = inc ? MREC_INCLUDE : MREC_EXCLUDE;
		r.str = kstr_c(inc ? m->includes[k] :
		    m->excludes[k - m->nincludes]);
		rc |= put_rec(sink, &r, max);
	}
	return rc;
}

/* The topic's own records (restore with its partition count, idents). */
static int dump_topic_head(const struct mtopic *t, struct mlog_sink *sink,
    size_t max)
{
	const struct mirror *m = t->mirror;
	struct mrec r;
	int rc = 0;

	mstate_rec_init(&r, MREC_TOPIC_RESTORE, m->name, t->name);
	r.count = t->npart;
	rc |= put_rec(sink, &r, max);
	for (int k = MTOPIC_IDENT_SOURCE; k <= MTOPIC_IDENT_DEST_GONE; k++) {
		const char *v = k == MTOPIC_IDENT_SOURCE ? t->src_topic_id :
		    k == MTOPIC_IDENT_DEST ? t->dst_topic_id :
		    k == MTOPIC_IDENT_NOTE ? t->note :
		    k == MTOPIC_IDENT_DEST_CLUSTER ? t->dst_cluster_id :
		    k == MTOPIC_IDENT_DEST_PRIOR ? t->prior_dst_topic_id :
		    t->gone_dst_topic_id;
		if (v == NULL)
			continue;
		mstate_rec_init(&r, MREC_TOPIC_IDENT, m->name, t->name);
		r.kind = (int8_t)k;
		r.str = kstr_c(v);
		rc |= put_rec(sink, &r, max);
	}
	if (t->realign) {
		mstate_rec_init(&r, MREC_TOPIC_REALIGN, m->name, t->name);
		r.kind = MREC_REALIGN_PENDING;
		r.str = kstr_c(t->realign_dst_topic_id);
		rc |= put_rec(sink, &r, max);
	}
	return rc;
}

/* Everything one partition holds. */
static int dump_part(const struct mpart *p, struct mlog_sink *sink,
    size_t max)
{
	struct mrec r;
	int rc = 0;

	mstate_part_rec(&r, MREC_PART_RESTORE, p);
	r.state = (int8_t)p->state;
	r.retry = p->retry_attempt;
	r.off = p->last_offset;
	r.epoch = p->last_epoch;
	r.str = kstr_c(p->error);
	rc |= put_rec(sink, &r, max);
	for (size_t e = 0; e < p->nepochs; e++) {
		mstate_part_rec(&r, MREC_PART_EPOCH, p);
		r.epoch = p->epochs[e].epoch;
		r.off = p->epochs[e].start_offset;
		rc |= put_rec(sink, &r, max);
	}
	/* The map as part-anchors records of up to MREC_MAX_ANCHORS each: a
	 * few bytes an anchor.  Applied to an empty map they give back this
	 * list (it is merged already: no merge applies again). */
	for (size_t x = 0; x < mpart_nanchors(p); ) {
		struct xlate_anchor xa[256];
		struct mrec_anchor v[256];
		size_t k = xlate_read(p->map, x, xa, ARRAY_SIZE(xa));

		mstate_part_rec(&r, MREC_PART_ANCHORS, p);
		r.off = -1;
		for (size_t i = 0; i < k; i++) {
			v[i].src = xa[i].src;
			v[i].dst = xa[i].dst;
		}
		x += k;
		r.anchors = v;
		r.nanchors = (int32_t)k;
		rc |= put_rec(sink, &r, max);
	}
	for (size_t x = 0; x < p->nproducers; x++) {
		mstate_part_rec(&r, MREC_PART_PRODUCER, p);
		r.off = p->producers[x].pid;
		r.epoch = p->producers[x].epoch;
		r.off2 = p->producers[x].seq_base;
		rc |= put_rec(sink, &r, max);
	}
	if (p->sending_dst >= 0) {
		mstate_part_rec(&r, MREC_PART_SENDING, p);
		r.off = p->sending_dst;
		rc |= put_rec(sink, &r, max);
	}
	if (p->owner != NULL) {
		mstate_part_rec(&r, MREC_PART_OWNER, p);
		r.str = kstr_c(p->owner);
		r.generation = p->owner_generation;
		rc |= put_rec(sink, &r, max);
	}
	if (p->has_failover && p->state == MPART_STOPPED) {
		mstate_part_rec(&r, MREC_PART_FAILOVER, p);
		r.off = p->failover.src_hwm;
		r.off2 = p->failover.lag;
		r.off3 = p->failover.lag_ms;
		rc |= put_rec(sink, &r, max);
		mstate_part_rec(&r, MREC_PART_FAILOVER_AT, p);
		r.off = p->failover.hwm_at;
		r.off2 = p->failover.stopped_at;
		r.flags = p->failover.asked ? MREC_F_ASKED : 0;
		rc |= put_rec(sink, &r, max);
		if (p->failover_note != NULL) {
			mstate_part_rec(&r, MREC_PART_FAILOVER_NOTE, p);
			r.str = kstr_c(p->failover_note);
			rc |= put_rec(sink, &r, max);
		}
	}
	return rc;
}

/* The acl bindings of mirror (NULL: all of them). */
static int dump_acls(const struct mstate *st, const char *mirror,
    struct mlog_sink *sink, size_t max)
{
	struct mrec r;
	int rc = 0;

	for (size_t i = 0; i < st->nacls && rc == 0; i++) {
		if (mirror != NULL && (st->acls[i].mirror == NULL ||
		    strcmp(st->acls[i].mirror, mirror) != 0))
			continue;
		mstate_rec_init(&r, MREC_ACL_BINDING, st->acls[i].mirror, NULL);
		r.kind = (int8_t)st->acls[i].kind;
		r.flags = MREC_F_ADD;
		r.str = kstr_c(st->acls[i].binding);
		rc |= put_rec(sink, &r, max);
	}
	return rc;
}

static size_t dump_max(const struct mstate *st)
{
	return st->ml != NULL ? st->ml->opts.max_record :
	    MLOG_MAX_RECORD_DEFAULT;
}

int mstate_dump_records(void *arg, struct mlog_sink *sink)
{
	struct mstate *st = arg;
	size_t max = dump_max(st);
	int rc = dump_head(st, sink, max);

	for (size_t i = 0; i < st->nmirrors && rc == 0; i++) {
		struct mirror *m = st->mirrors[i];

		rc |= dump_mirror_head(m, sink, max);
		for (size_t ti = 0; ti < m->ntopics && rc == 0; ti++) {
			struct mtopic *t = m->topics[ti];

			rc |= dump_topic_head(t, sink, max);
			for (int32_t pi = 0; pi < t->npart && rc == 0; pi++)
				rc |= dump_part(t->parts[pi], sink, max);
		}
	}
	if (rc == 0)
		rc |= dump_acls(st, NULL, sink, max);
	return rc != 0 || sink->failed ? -1 : 0;
}

/* Item j is the first of items[first..j] naming (mirror, topic[, part]). */
static int scope_first(const struct mstate_scope *sc, size_t first, size_t j,
    int with_part)
{
	for (size_t k = first; k < j; k++)
		if (strcmp(sc[k].mirror, sc[j].mirror) == 0 &&
		    sc[k].topic != NULL && strcmp(sc[k].topic, sc[j].topic) == 0 &&
		    (!with_part || sc[k].part == sc[j].part))
			return 0;
	return 1;
}

int mstate_dump_scoped(const struct mstate *st,
    const struct mstate_scope *sc, size_t n, struct mlog_sink *sink)
{
	size_t max = dump_max(st);
	int rc = dump_head(st, sink, max);

	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct mirror *m;
		const struct mtopic *t;
		size_t j;
		int whole = 0;

		/* Each mirror once, at its first item. */
		for (j = 0; j < i; j++)
			if (strcmp(sc[j].mirror, sc[i].mirror) == 0)
				break;
		if (j < i)
			continue;
		if ((m = mstate_mirror_find(st, sc[i].mirror)) == NULL) {
			/* Its acl bindings outlive it; for the rest the
			 * request's own records say why. */
			rc |= dump_acls(st, sc[i].mirror, sink, max);
			continue;
		}
		for (j = i; j < n; j++)
			if (strcmp(sc[j].mirror, m->name) == 0 &&
			    sc[j].topic == NULL)
				whole = 1;
		rc |= dump_mirror_head(m, sink, max);
		for (size_t ti = 0; whole && ti < m->ntopics && rc == 0; ti++) {
			t = m->topics[ti];
			rc |= dump_topic_head(t, sink, max);
			for (int32_t pi = 0; pi < t->npart && rc == 0; pi++)
				rc |= dump_part(t->parts[pi], sink, max);
		}
		/* Otherwise only the topics named, and in each only the
		 * partitions named unless the whole topic is. */
		for (j = i; !whole && j < n && rc == 0; j++) {
			int topic_whole = 0;

			if (strcmp(sc[j].mirror, m->name) != 0 ||
			    !scope_first(sc, i, j, 0) ||
			    (t = mirror_topic_find(m, sc[j].topic)) == NULL)
				continue;
			for (size_t k = j; k < n; k++)
				if (strcmp(sc[k].mirror, m->name) == 0 &&
				    strcmp(sc[k].topic, t->name) == 0 &&
				    sc[k].part < 0)
					topic_whole = 1;
			rc |= dump_topic_head(t, sink, max);
			for (size_t k = j; k < n && rc == 0; k++) {
				if (strcmp(sc[k].mirror, m->name) != 0 ||
				    strcmp(sc[k].topic, t->name) != 0)
					continue;
				if (topic_whole) {
					for (int32_t pi = 0; pi < t->npart &&
					    rc == 0; pi++)
						rc |= dump_part(t->parts[pi], sink,
						    max);
					break;
				}
				if (sc[k].part < t->npart &&
				    scope_first(sc, i, k, 1))
					rc |= dump_part(t->parts[sc[k].part],
					    sink, max);
			}
		}
		if (rc == 0)
			rc |= dump_acls(st, m->name, sink, max);
	}
	return rc != 0 || sink->failed ? -1 : 0;
}

char *mstate_dump(const struct mstate *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fprintf(f, "cluster_id %s\n", st->cluster_id);
	if (st->generation >= 0)
		fprintf(f, "members generation %d\n", (int)st->generation);
	for (size_t i = 0; i < st->nmembers; i++) {
		const struct mmember *mm = &st->members[i];

		fprintf(f, "  member %s id %s broker %d admin %s http %s\n",
		    mm->instance_id, mm->member_id, (int)mm->local_broker_id,
		    mm->admin_addr, mm->http_addr);
	}
	for (size_t i = 0; i < st->nmirrors; i++) {
		const struct mirror *m = st->mirrors[i];
		fprintf(f, "mirror %s\n", m->name);
		for (size_t c = 0; c < m->nconfigs; c++)
			fprintf(f, "  config %s=%s\n", m->configs[c].name,
			    m->configs[c].value != NULL ? m->configs[c].value :
			    "(null)");
		fprintf(f, "  source_cluster_id %s\n", m->source_cluster_id ?
		    m->source_cluster_id : "(unresolved)");
		for (size_t k = 0; k < m->nincludes; k++)
			fprintf(f, "  include %s\n", m->includes[k]);
		for (size_t k = 0; k < m->nexcludes; k++)
			fprintf(f, "  exclude %s\n", m->excludes[k]);
		for (size_t ti = 0; ti < m->ntopics; ti++) {
			const struct mtopic *t = m->topics[ti];
			fprintf(f, "  topic %s partitions %d state %s\n",
			    t->name, (int)t->npart, mtopic_state_name(t));
			if (t->src_topic_id != NULL || t->dst_topic_id != NULL ||
			    t->note != NULL || t->dst_cluster_id != NULL)
				fprintf(f, "    ident source %s destination %s note %s "
				    "destination cluster %s\n",
				    t->src_topic_id ? t->src_topic_id : "(none)",
				    t->dst_topic_id ? t->dst_topic_id : "(none)",
				    t->note ? t->note : "(none)",
				    t->dst_cluster_id ? t->dst_cluster_id : "(none)");
			if (t->prior_dst_topic_id != NULL || t->realign ||
			    t->gone_dst_topic_id != NULL)
				fprintf(f, "    realign prior %s deleting %s%s "
				    "deleted %s\n", t->prior_dst_topic_id ?
				    t->prior_dst_topic_id : "(none)", t->realign ?
				    "yes, id " : "no", t->realign ?
				    (t->realign_dst_topic_id ?
				    t->realign_dst_topic_id : "unknown") : "",
				    t->gone_dst_topic_id ? t->gone_dst_topic_id :
				    "(none)");
			for (int32_t pi = 0; pi < t->npart; pi++) {
				const struct mpart *p = t->parts[pi];
				fprintf(f, "    partition %d %s retry %d last "
				    "%" PRId64 "@%d error %s\n", (int)p->index,
				    mpart_state_name(p->state),
				    (int)p->retry_attempt, p->last_offset,
				    (int)p->last_epoch,
				    p->error != NULL ? p->error : "(none)");
				for (size_t e = 0; e < p->nepochs; e++)
					fprintf(f, "      epoch %d from %" PRId64
					    "\n", (int)p->epochs[e].epoch,
					    p->epochs[e].start_offset);
				for (size_t x = 0, k; x < mpart_nanchors(p); x += k) {
					struct xlate_anchor a[256];

					k = xlate_read(p->map, x, a, ARRAY_SIZE(a));
					for (size_t y = 0; y < k; y++)
						fprintf(f, "      anchor %" PRId64 " -> %"
						    PRId64 "\n", a[y].src, a[y].dst);
				}
				for (size_t x = 0; x < p->nproducers; x++)
					fprintf(f, "      producer %" PRId64 " epoch %d "
					    "sequence 0 at %" PRId64 "\n",
					    p->producers[x].pid,
					    (int)p->producers[x].epoch,
					    p->producers[x].seq_base);
				if (p->sending_dst >= 0)
					fprintf(f, "      anchors of a batch sent to %"
					    PRId64 "\n", p->sending_dst);
				if (p->owner != NULL)
					fprintf(f, "      owner %s generation %d\n",
					    p->owner, (int)p->owner_generation);
				if (p->has_failover && p->state == MPART_STOPPED)
					fprintf(f, "      stopped behind the source: "
					    "high watermark %" PRId64 ", %" PRId64
					    " offsets, %" PRId64 " ms\n",
					    p->failover.src_hwm, p->failover.lag,
					    p->failover.lag_ms);
				if (p->has_failover && p->state == MPART_STOPPED &&
				    p->failover.stopped_at >= 0)
					fprintf(f, "      stopped at %" PRId64 " ms, high "
					    "watermark as of %" PRId64 " ms%s\n",
					    p->failover.stopped_at, p->failover.hwm_at,
					    p->failover.asked ? "" :
					    " (the source did not answer at the stop)");
				if (p->has_failover && p->state == MPART_STOPPED &&
				    p->failover_note != NULL)
					fprintf(f, "      groups not synced at the stop: "
					    "%s\n", p->failover_note);
			}
		}
	}
	for (size_t i = 0; i < st->nacls; i++)
		fprintf(f, "acl %s %s %s\n", st->acls[i].mirror,
		    st->acls[i].kind == MACL_SYNC ? "sync" : "read-only",
		    st->acls[i].binding);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
