/*
 * mstate.c: the mirror state model (see mstate.h).
 *
 * Layout of this file: the state table; lookups; the apply functions (one
 * per record type, shared by replay and by live operations, and the only
 * code that writes the model); persistence (encode, append, sync, apply);
 * the admin and data-plane operations, which validate and then persist;
 * the snapshot dump and the text dump.
 */
#include "config.h"

#include <inttypes.h>
#include <regex.h>
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

#define MAX_HOOKS 8
#define MAX_ERROR_MSG 4096     /* FAILED error messages are cut here */

struct mstate {
	struct mlog *ml;
	char cluster_id[MSTATE_CLUSTER_ID_LEN + 1];
	struct mirror **mirrors;   /* sorted by name */
	size_t nmirrors;
	struct {
		mstate_hook_fn fn;
		void *arg;
	} hooks[MAX_HOOKS];
	size_t nhooks;
	struct mrec_config *cfgbuf; /* decode scratch, MREC_MAX_CONFIGS */
};

/* ---- states and transitions ---------------------------------------------- */

static const char *const state_names[] = {
#define X(s) [MPART_##s] = #s,
	MPART_STATES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(state_names) == MPART_STATE_COUNT, "state names");

#define B(s) (1u << MPART_##s)
/*
 * allowed_from[to]: the states a partition may leave for `to` (kip-1279
 * notes 3.2 with the seed's names: PREPARING is LOG_ALIGNMENT).  Additions
 * to the prototype's table, each from mirror-protocol.md's rules: PAUSING
 * and PAUSED resume straight to MIRRORING; PREPARING and FAILED may be
 * paused (Pause succeeds unless 139/140/142, and a paused partition simply
 * has no fetcher).  Any state may stay where it is, and fail.
 */
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

static void fmt(char *buf, size_t len, const char *f, ...) PRINTF_LIKE(3, 4);
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* NUL-terminated copy of a kstr (NULL for null); sets *oom on failure. */
static char *kdup(struct kstr s, int *oom)
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
static int kcmp(struct kstr a, const char *b)
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
static int grow(void *arrp, size_t n, size_t elem)
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
static size_t mirror_pos(const struct mstate *st, struct kstr name, int *found)
{
	size_t lo = 0, hi = st->nmirrors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = kcmp(name, st->mirrors[mid]->name);
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

static size_t topic_pos(const struct mirror *m, struct kstr name, int *found)
{
	size_t lo = 0, hi = m->ntopics;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = kcmp(name, m->topics[mid]->name);
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

static struct mirror *find_mirror(const struct mstate *st, struct kstr name)
{
	int found;
	size_t i = mirror_pos(st, name, &found);

	return found ? st->mirrors[i] : NULL;
}

static struct mtopic *find_topic(const struct mirror *m, struct kstr name)
{
	int found;
	size_t i = topic_pos(m, name, &found);

	return found ? m->topics[i] : NULL;
}

struct mirror *mstate_mirror_find(const struct mstate *st, const char *name)
{
	return name != NULL ? find_mirror(st, kstr_c(name)) : NULL;
}

struct mtopic *mirror_topic_find(const struct mirror *m, const char *topic)
{
	return m != NULL && topic != NULL ? find_topic(m, kstr_c(topic)) : NULL;
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

static int topic_any(const struct mtopic *t, unsigned mask)
{
	for (int32_t i = 0; i < t->npart; i++)
		if (mask & (1u << t->parts[i]->state))
			return 1;
	return 0;
}

static int topic_all(const struct mtopic *t, unsigned mask)
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
	fmt(msg, msglen, "mirror name '%.249s' %s", name != NULL ? name : "",
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
	fmt(msg, msglen, "topic name '%.249s' %s", name != NULL ? name : "",
	    why);
	return KERR_INVALID_TOPIC_EXCEPTION;
}

static int compile_full(regex_t *re, const char *pattern, char *msg,
    size_t msglen)
{
	size_t n = strlen(pattern) + 5;
	char *anch = malloc(n);
	int rc;

	if (anch == NULL) {
		fmt(msg, msglen, "out of memory");
		return -1;
	}
	snprintf(anch, n, "^(%s)$", pattern);
	rc = regcomp(re, anch, REG_EXTENDED | REG_NOSUB);
	free(anch);
	if (rc != 0) {
		char why[128];
		regerror(rc, re, why, sizeof(why));
		fmt(msg, msglen, "pattern '%s' is not a valid regular "
		    "expression: %s", pattern, why);
		return -1;
	}
	return 0;
}

int mstate_pattern_match(const char *pattern, const char *name)
{
	regex_t re;
	int m;

	if (compile_full(&re, pattern, NULL, 0) != 0)
		return 0;
	m = regexec(&re, name, 0, NULL, 0) == 0;
	regfree(&re);
	return m;
}

int mirror_wants_topic(const struct mirror *m, const char *topic)
{
	int in = 0;

	for (size_t i = 0; i < m->nincludes && !in; i++)
		in = mstate_pattern_match(m->includes[i], topic);
	for (size_t i = 0; i < m->nexcludes && in; i++)
		if (mstate_pattern_match(m->excludes[i], topic))
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
	free(p->anchors);
	free(p);
}

static void topic_free(struct mtopic *t)
{
	if (t == NULL)
		return;
	for (int32_t i = 0; i < t->npart; i++)
		part_free(t->parts[i]);
	free(t->parts);
	free(t->name);
	free(t);
}

static void mirror_free(struct mirror *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->ntopics; i++)
		topic_free(m->topics[i]);
	free(m->topics);
	for (size_t i = 0; i < m->nconfigs; i++) {
		free(m->configs[i].name);
		free(m->configs[i].value);
	}
	free(m->configs);
	for (size_t i = 0; i < m->nincludes; i++)
		free(m->includes[i]);
	free(m->includes);
	for (size_t i = 0; i < m->nexcludes; i++)
		free(m->excludes[i]);
	free(m->excludes);
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
	return st;
}

void mstate_free(struct mstate *st)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < st->nmirrors; i++)
		mirror_free(st->mirrors[i]);
	free(st->mirrors);
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

static void emit(struct mstate *st, int live, const struct mstate_event *ev)
{
	if (!live)
		return;
	for (size_t i = 0; i < st->nhooks; i++)
		st->hooks[i].fn(st->hooks[i].arg, ev);
}

/* ---- apply: the only writers of the model ------------------------------- */

/* Context of one apply: live (after an operation's sync) or replay. */
struct apply {
	struct mstate *st;
	int live;
	int in_snapshot;
	char *err;
	size_t errlen;
};

#define FAIL(a, ...) do { fmt((a)->err, (a)->errlen, __VA_ARGS__); \
	return -1; } while (0)

/*
 * The one writer of mpart.state.  restore: a snapshot sets the state of a
 * partition that has none yet (UNKNOWN), bypassing the table.
 */
static int set_state(struct apply *a, struct mpart *p, enum mpart_state to,
    const char *why, int restore)
{
	enum mpart_state from = p->state;
	const struct mtopic *t = p->topic;

	if (restore ? from != MPART_UNKNOWN : !mpart_transition_ok(from, to))
		FAIL(a, "%s/%s-%d: %s -> %s is not an allowed transition",
		    t->mirror->name, t->name, (int)p->index,
		    mpart_state_name(from), mpart_state_name(to));
	p->state = to;
	if (from == to)
		return 0;
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
		emit(a->st, 1, &ev);
	} else {
		log_debug("%s/%s-%d: %s -> %s (replayed)", t->mirror->name,
		    t->name, (int)p->index, mpart_state_name(from),
		    mpart_state_name(to));
	}
	return 0;
}

static struct mirror *need_mirror(struct apply *a, const struct mrec *r)
{
	struct mirror *m = find_mirror(a->st, r->mirror);

	if (m == NULL)
		fmt(a->err, a->errlen, "%s record names mirror '%.*s', which "
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
	t = find_topic(m, r->topic);
	if (t == NULL)
		fmt(a->err, a->errlen, "%s record names topic '%.*s', which is "
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
		fmt(a->err, a->errlen, "%s record names partition %s/%s-%d, "
		    "the topic has %d", mrec_type_name(r->type),
		    t->mirror->name, t->name, (int)r->partition, (int)t->npart);
		return NULL;
	}
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

static int apply_mirror_create(struct apply *a, const struct mrec *r)
{
	struct mstate *st = a->st;
	struct mirror *m;
	int found, oom = 0;
	size_t pos = mirror_pos(st, r->mirror, &found);
	char name[MREC_MAX_NAME + 1];

	memcpy(name, r->mirror.p, (size_t)r->mirror.len);
	name[r->mirror.len] = '\0';
	if (mstate_check_mirror_name(name, a->err, a->errlen) != 0)
		return -1;
	if (found)
		FAIL(a, "mirror %s is created twice", name);
	if (grow(&st->mirrors, st->nmirrors, sizeof(*st->mirrors)) != 0 ||
	    (m = calloc(1, sizeof(*m))) == NULL)
		FAIL(a, "out of memory creating mirror %s", name);
	m->name = strdup(name);
	if (r->nconfigs > 0) {
		m->configs = calloc((size_t)r->nconfigs, sizeof(*m->configs));
		if (m->configs == NULL)
			oom = 1;
	}
	for (int32_t i = 0; i < r->nconfigs && !oom; i++) {
		m->configs[i].name = kdup(r->configs[i].name, &oom);
		m->configs[i].value = kdup(r->configs[i].value, &oom);
		m->nconfigs++;
	}
	if (oom || m->name == NULL) {
		mirror_free(m);
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
	emit(st, a->live, &ev);
	return 0;
}

static int apply_mirror_delete(struct apply *a, const struct mrec *r)
{
	struct mstate *st = a->st;
	int found;
	size_t pos = mirror_pos(st, r->mirror, &found);
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
	emit(st, a->live, &ev);
	if (a->live)
		log_info("mirror %s: deleted", m->name);
	memmove(st->mirrors + pos, st->mirrors + pos + 1,
	    (st->nmirrors - pos - 1) * sizeof(*st->mirrors));
	st->nmirrors--;
	mirror_free(m);
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
	id = kdup(r->str, &oom);
	if (oom)
		FAIL(a, "out of memory");
	free(m->source_cluster_id);
	m->source_cluster_id = id;
	if (a->live)
		log_info("mirror %s: source cluster id is %s", m->name, id);
	struct mstate_event ev = { .kind = MSTATE_EV_SOURCE_ID, .mirror = m };
	emit(a->st, a->live, &ev);
	return 0;
}

static int apply_mirror_pattern(struct apply *a, const struct mrec *r)
{
	struct mirror *m = need_mirror(a, r);
	char ***list;
	size_t *n;
	int oom = 0;

	if (m == NULL)
		return -1;
	if (r->kind != MREC_INCLUDE && r->kind != MREC_EXCLUDE)
		FAIL(a, "mirror %s: pattern kind %d", m->name, r->kind);
	if (r->str.len <= 0)
		FAIL(a, "mirror %s: empty pattern", m->name);
	list = r->kind == MREC_INCLUDE ? &m->includes : &m->excludes;
	n = r->kind == MREC_INCLUDE ? &m->nincludes : &m->nexcludes;
	for (size_t i = 0; i < *n; i++)
		if (kcmp(r->str, (*list)[i]) == 0)
			return 0;
	if (*n >= MSTATE_MAX_PATTERNS)
		FAIL(a, "mirror %s: more than %d %s patterns", m->name,
		    MSTATE_MAX_PATTERNS, r->kind == MREC_INCLUDE ? "include" :
		    "exclude");
	if (grow(list, *n, sizeof(char *)) != 0)
		FAIL(a, "out of memory");
	(*list)[*n] = kdup(r->str, &oom);
	if (oom)
		FAIL(a, "out of memory");
	(*n)++;
	if (a->live)
		log_info("mirror %s: %s pattern '%s' added", m->name,
		    r->kind == MREC_INCLUDE ? "include" : "exclude",
		    (*list)[*n - 1]);
	struct mstate_event ev = { .kind = MSTATE_EV_PATTERNS, .mirror = m };
	emit(a->st, a->live, &ev);
	return 0;
}

/* Adds partitions t->npart..count-1, in UNKNOWN. */
static int add_parts(struct mtopic *t, int32_t count)
{
	struct mpart **parts;

	if (count <= t->npart)
		return 0;
	parts = realloc(t->parts, (size_t)count * sizeof(*parts));
	if (parts == NULL)
		return -1;
	t->parts = parts;
	for (int32_t i = t->npart; i < count; i++) {
		struct mpart *p = calloc(1, sizeof(*p));
		if (p == NULL)
			return -1;
		p->topic = t;
		p->index = i;
		p->state = MPART_UNKNOWN;
		p->last_offset = -1;
		p->last_epoch = -1;
		t->parts[i] = p;
		t->npart = i + 1;
	}
	return 0;
}

static struct mtopic *new_topic(struct apply *a, struct mirror *m,
    const struct mrec *r)
{
	int found, oom = 0;
	size_t pos = topic_pos(m, r->topic, &found);
	struct mtopic *t;
	char name[MREC_MAX_NAME + 1];

	memcpy(name, r->topic.p, (size_t)r->topic.len);
	name[r->topic.len] = '\0';
	if (mstate_check_topic_name(name, a->err, a->errlen) != 0)
		return NULL;
	if (found) {
		fmt(a->err, a->errlen, "topic %.*s restored twice in mirror %s",
		    (int)r->topic.len, r->topic.p, m->name);
		return NULL;
	}
	if (grow(&m->topics, m->ntopics, sizeof(*m->topics)) != 0 ||
	    (t = calloc(1, sizeof(*t))) == NULL) {
		fmt(a->err, a->errlen, "out of memory");
		return NULL;
	}
	t->mirror = m;
	t->name = kdup(r->topic, &oom);
	if (oom || add_parts(t, r->count) != 0) {
		topic_free(t);
		fmt(a->err, a->errlen, "out of memory adding topic %.*s",
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
	t = find_topic(m, r->topic);
	if (t == NULL) {
		if ((t = new_topic(a, m, r)) == NULL)
			return -1;
	} else {
		old = t->npart;
		if (add_parts(t, r->count) != 0)
			FAIL(a, "out of memory growing %s/%s", m->name, t->name);
	}
	added = t->npart > old;
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
		emit(a->st, a->live, &ev);
	}
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
		e = kdup(cut, &oom);
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

static int epoch_check(const struct mpart *p, int32_t epoch, int64_t start,
    int *noop, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;

	*noop = 0;
	if (epoch < 0 || start < 0) {
		fmt(err, errlen, "%s/%s-%d: epoch %d at offset %" PRId64 ": "
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
		fmt(err, errlen, "%s/%s-%d: epoch %d at offset %" PRId64 " does "
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
	    epoch_check(p, r->epoch, r->off, &noop, a->err, a->errlen) != 0)
		return -1;
	if (noop)
		return 0;
	if (p->nepochs == MSTATE_MAX_EPOCHS) {
		/* Bounded memory: the oldest quarter goes (a quarter at a
		 * time, so a long replay does not move the array per record). */
		size_t drop = MSTATE_MAX_EPOCHS / 4;
		memmove(p->epochs, p->epochs + drop,
		    (p->nepochs - drop) * sizeof(*p->epochs));
		p->nepochs -= drop;
	}
	if (grow(&p->epochs, p->nepochs, sizeof(*p->epochs)) != 0)
		FAIL(a, "out of memory");
	p->epochs[p->nepochs].epoch = r->epoch;
	p->epochs[p->nepochs].start_offset = r->off;
	p->nepochs++;
	return 0;
}

enum { ANCHOR_APPEND, ANCHOR_REPLACE, ANCHOR_NOOP };

static int anchor_check(const struct mpart *p, int64_t src, int64_t dst,
    int *action, char *err, size_t errlen)
{
	const struct mtopic *t = p->topic;

	*action = ANCHOR_APPEND;
	if (src < 0 || dst < 0) {
		fmt(err, errlen, "%s/%s-%d: anchor (%" PRId64 ", %" PRId64 "): "
		    "negative offset", t->mirror->name, t->name,
		    (int)p->index, src, dst);
		return -1;
	}
	if (p->nanchors == 0)
		return 0;
	const struct manchor *l = &p->anchors[p->nanchors - 1];
	if (src < l->src || dst < l->dst) {
		fmt(err, errlen, "%s/%s-%d: anchor (%" PRId64 ", %" PRId64 ") "
		    "goes back from (%" PRId64 ", %" PRId64 ")",
		    t->mirror->name, t->name, (int)p->index, src, dst, l->src,
		    l->dst);
		return -1;
	}
	if (src - dst == l->src - l->dst)
		*action = ANCHOR_NOOP;
	else if (src == l->src || dst == l->dst)
		*action = ANCHOR_REPLACE;
	return 0;
}

static int apply_part_anchor(struct apply *a, const struct mrec *r)
{
	struct mpart *p = need_part(a, r);
	int action;

	if (p == NULL ||
	    anchor_check(p, r->off, r->off2, &action, a->err, a->errlen) != 0)
		return -1;
	if (action == ANCHOR_NOOP)
		return 0;
	if (action == ANCHOR_REPLACE) {
		struct manchor *l = &p->anchors[p->nanchors - 1];
		l->src = r->off;
		l->dst = r->off2;
		/* Keeping the previous delta makes it redundant: drop it, so
		 * that every stored anchor changes the delta (and a snapshot
		 * restores exactly this list). */
		if (p->nanchors >= 2 && l->src - l->dst ==
		    l[-1].src - l[-1].dst)
			p->nanchors--;
		return 0;
	}
	if (p->nanchors == MSTATE_MAX_ANCHORS) {
		size_t drop = MSTATE_MAX_ANCHORS / 4;   /* as for epochs */
		memmove(p->anchors, p->anchors + drop,
		    (p->nanchors - drop) * sizeof(*p->anchors));
		p->nanchors -= drop;
	}
	if (grow(&p->anchors, p->nanchors, sizeof(*p->anchors)) != 0)
		FAIL(a, "out of memory");
	p->anchors[p->nanchors].src = r->off;
	p->anchors[p->nanchors].dst = r->off2;
	p->nanchors++;
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
	case MREC_TOPIC_RESTORE: return apply_topic_restore(a, r);
	case MREC_PART_RESTORE: return apply_part_restore(a, r);
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
	return apply_payload(arg, rec->type, rec->p, rec->len, 0,
	    rec->in_snapshot, err, errlen);
}

/* ---- persistence -------------------------------------------------------- */

/*
 * Encodes, appends and syncs n records, then applies them.  Nothing is
 * applied unless all of them are durable.  what names the object for the
 * message.
 */
static int persist(struct mstate *st, const struct mrec *recs, size_t n,
    const char *what, char *msg, size_t msglen)
{
	char err[1024];
	struct kw w;
	uint8_t **bufs;
	size_t *lens;
	int rc = KERR_NONE;
	size_t i;

	if (st->ml == NULL) {
		fmt(msg, msglen, "%s: the metadata log is not open", what);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	bufs = calloc(n, sizeof(*bufs));
	lens = calloc(n, sizeof(*lens));
	if (bufs == NULL || lens == NULL) {
		fmt(msg, msglen, "%s: out of memory", what);
		rc = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	for (i = 0; i < n; i++) {
		kw_init(&w, st->ml->opts.max_record);
		if (mrec_encode(&recs[i], &w, err, sizeof(err)) != 0) {
			kw_fini(&w);
			fmt(msg, msglen, "%s: the change cannot be recorded: %s",
			    what, err);
			rc = KERR_INVALID_REQUEST;
			goto out;
		}
		bufs[i] = kw_take(&w, &lens[i]);
		if (bufs[i] == NULL) {
			fmt(msg, msglen, "%s: out of memory", what);
			rc = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
	}
	for (i = 0; i < n; i++)
		if (mlog_append(st->ml, recs[i].type, bufs[i], lens[i], err,
		    sizeof(err)) != 0)
			break;
	if (i < n || mlog_sync(st->ml, err, sizeof(err)) != 0) {
		mlog_discard(st->ml);
		fmt(msg, msglen, "%s: the change was not made, the metadata log "
		    "cannot persist it: %s", what, err);
		rc = KERR_KAFKA_STORAGE_ERROR;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (apply_payload(st, recs[i].type, bufs[i], lens[i], 1, 0, err,
		    sizeof(err)) != 0) {
			/* Validated before it was written: a bug. */
			log_errorx("%s: a persisted %s record does not apply: %s",
			    what, mrec_type_name(recs[i].type), err);
			fmt(msg, msglen, "%s: internal error: %s", what, err);
			rc = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
	}
out:
	if (bufs != NULL)
		for (i = 0; i < n; i++)
			free(bufs[i]);
	free(bufs);
	free(lens);
	return rc;
}

static void rec_init(struct mrec *r, uint16_t type, const char *mirror,
    const char *topic)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->mirror = mirror != NULL ? kstr_c(mirror) : KSTR_NULL;
	r->topic = topic != NULL ? kstr_c(topic) : KSTR_NULL;
	r->str = KSTR_NULL;
}

static void part_rec(struct mrec *r, uint16_t type, const struct mpart *p)
{
	rec_init(r, type, p->topic->mirror->name, p->topic->name);
	r->partition = p->index;
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
	struct mrec r;
	char id[MSTATE_CLUSTER_ID_LEN + 1];

	if (mlog_open(ml, mstate_apply_rec, st, err, errlen) != 0)
		return -1;
	st->ml = ml;
	if (st->cluster_id[0] != '\0')
		return 0;
	if (new_cluster_id(id) != 0) {
		fmt(err, errlen, "cannot generate a cluster id: %s",
		    strerror(errno));
		return -1;
	}
	rec_init(&r, MREC_CLUSTER_ID, NULL, NULL);
	r.str = kstr_c(id);
	if (persist(st, &r, 1, "cluster id", err, errlen) != 0)
		return -1;
	log_info("metadata log: new cluster id %s", st->cluster_id);
	return 0;
}

int mstate_compact(struct mstate *st, char *err, size_t errlen)
{
	if (st->ml == NULL) {
		fmt(err, errlen, "the metadata log is not open");
		return -1;
	}
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

/* ---- admin operations ------------------------------------------------- */

static int no_mirror(const char *name, char *msg, size_t msglen)
{
	fmt(msg, msglen, "cluster mirror '%s' does not exist", name);
	return KERR_UNKNOWN_CLUSTER_MIRROR;
}

static int no_topic(const char *mirror, const char *topic, char *msg,
    size_t msglen)
{
	fmt(msg, msglen, "topic '%s' is not in cluster mirror '%s'", topic,
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

int mstate_create_mirror(struct mstate *st, const char *name,
    const struct mcfg *configs, size_t nconfigs, char *msg, size_t msglen)
{
	struct mrec r;
	struct mrec_config *rc;
	int code, have_bootstrap = 0;

	if ((code = mstate_check_mirror_name(name, msg, msglen)) != 0)
		return code;
	if (mstate_mirror_find(st, name) != NULL) {
		fmt(msg, msglen, "cluster mirror '%s' already exists", name);
		return KERR_CLUSTER_MIRROR_ALREADY_EXISTS;
	}
	if (nconfigs > MREC_MAX_CONFIGS) {
		fmt(msg, msglen, "cluster mirror '%s': %zu configs, at most %d",
		    name, nconfigs, MREC_MAX_CONFIGS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		if (configs[i].name == NULL || configs[i].name[0] == '\0') {
			fmt(msg, msglen, "cluster mirror '%s': config %zu has "
			    "no name", name, i);
			return KERR_INVALID_REQUEST;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(configs[i].name, configs[j].name) == 0) {
				fmt(msg, msglen, "cluster mirror '%s': config "
				    "'%s' is given twice", name,
				    configs[i].name);
				return KERR_INVALID_REQUEST;
			}
		if (strcmp(configs[i].name, "bootstrap.servers") == 0 &&
		    configs[i].value != NULL && configs[i].value[0] != '\0')
			have_bootstrap = 1;
	}
	if (!have_bootstrap) {
		fmt(msg, msglen, "cluster mirror '%s': the configs must set "
		    "bootstrap.servers (the source cluster)", name);
		return KERR_INVALID_REQUEST;
	}
	rc = calloc(nconfigs + 1, sizeof(*rc));
	if (rc == NULL) {
		fmt(msg, msglen, "cluster mirror '%s': out of memory", name);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < nconfigs; i++) {
		rc[i].name = kstr_c(configs[i].name);
		rc[i].value = kstr_c(configs[i].value);
	}
	rec_init(&r, MREC_MIRROR_CREATE, name, NULL);
	r.configs = rc;
	r.nconfigs = (int32_t)nconfigs;
	code = persist(st, &r, 1, name, msg, msglen);
	free(rc);
	return code;
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
			fmt(msg, msglen, "cluster mirror '%s' is not empty: "
			    "topic '%s' is %s, not STOPPED", name, t->name,
			    mtopic_state_name(t));
			return KERR_CLUSTER_MIRROR_NOT_EMPTY;
		}
	}
	rec_init(&r, MREC_MIRROR_DELETE, name, NULL);
	return persist(st, &r, 1, name, msg, msglen);
}

static int check_npart(const char *mirror, const char *topic, int32_t npart,
    char *msg, size_t msglen)
{
	if (npart >= 1 && npart <= MSTATE_MAX_PARTITIONS)
		return 0;
	fmt(msg, msglen, "%s/%s: partition count %d is outside 1-%d", mirror,
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
		fmt(msg, msglen, "topic '%s' is already in cluster mirror '%s' "
		    "(%s)", topic, other->name, mtopic_state_name(t));
		return KERR_TOPIC_ALREADY_IN_CLUSTER_MIRROR;
	}
	rec_init(&r, MREC_TOPIC_ADD, mirror, topic);
	r.count = npart;
	t = mirror_topic_find(m, topic);
	if (t != NULL) {
		if (topic_any(t, B(STOPPING))) {
			fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is "
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
	return persist(st, &r, 1, what, msg, msglen);
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
	if (npart <= t->npart || topic_any(t, B(STOPPING) | B(STOPPED)))
		return KERR_NONE;
	rec_init(&r, MREC_TOPIC_ADD, mirror, topic);
	r.count = npart;
	snprintf(what, sizeof(what), "%s/%s", mirror, topic);
	return persist(st, &r, 1, what, msg, msglen);
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
		fmt(msg, msglen, "cluster mirror '%s': more than %d include or "
		    "exclude patterns", mirror, MSTATE_MAX_PATTERNS);
		return KERR_INVALID_REQUEST;
	}
	for (size_t k = 0; k < 2; k++) {
		const char *const *list = k == 0 ? includes : excludes;
		size_t ln = k == 0 ? nincludes : nexcludes;
		for (size_t i = 0; i < ln; i++) {
			regex_t re;
			char why[512];
			if (list[i] == NULL || list[i][0] == '\0') {
				fmt(msg, msglen, "cluster mirror '%s': empty "
				    "%s pattern", mirror, k == 0 ? "include" :
				    "exclude");
				return KERR_INVALID_REQUEST;
			}
			if (compile_full(&re, list[i], why, sizeof(why)) != 0) {
				fmt(msg, msglen, "cluster mirror '%s': %s",
				    mirror, why);
				return KERR_INVALID_REQUEST;
			}
			regfree(&re);
		}
	}
	recs = calloc(nincludes + nexcludes + 1, sizeof(*recs));
	if (recs == NULL) {
		fmt(msg, msglen, "cluster mirror '%s': out of memory", mirror);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (size_t i = 0; i < nincludes + nexcludes; i++) {
		int inc = i < nincludes;
		const char *pat = inc ? includes[i] : excludes[i - nincludes];
		if (has_pattern(inc ? m->includes : m->excludes,
		    inc ? m->nincludes : m->nexcludes, pat))
			continue;
		rec_init(&recs[n], MREC_MIRROR_PATTERN, mirror, NULL);
		recs[n].kind = inc ? MREC_INCLUDE : MREC_EXCLUDE;
		recs[n].str = kstr_c(pat);
		n++;
	}
	code = n > 0 ? persist(st, recs, n, mirror, msg, msglen) : KERR_NONE;
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

	rec_init(&r, MREC_TOPIC_STATE, t->mirror->name, t->name);
	r.state = (int8_t)to;
	r.from_mask = (uint16_t)mask;
	r.str = kstr_c(why);
	snprintf(what, sizeof(what), "%s/%s", t->mirror->name, t->name);
	return persist(st, &r, 1, what, msg, msglen);
}

int mstate_remove_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen)
{
	struct mirror *m;
	struct mtopic *t;
	int code;

	if ((code = find_mt(st, mirror, topic, &m, &t, msg, msglen)) != 0)
		return code;
	if (topic_any(t, B(STOPPING))) {
		fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is already "
		    "being stopped", topic, mirror);
		return KERR_MIRROR_TOPIC_BEING_STOPPED;
	}
	if (mtopic_all_stopped(t))
		return KERR_NONE;   /* the contract: success, no change */
	return topic_move(st, t, B(PREPARING) | B(MIRRORING) | B(PAUSING) |
	    B(PAUSED) | B(FAILED), MPART_STOPPING, "removed from the mirror",
	    msg, msglen);
}

int mstate_remove_pattern(struct mstate *st, const char *mirror,
    const char *pattern, mstate_topic_result_fn cb, void *arg, char *msg,
    size_t msglen)
{
	struct mirror *m = mstate_mirror_find(st, mirror);
	const char *pats[1] = { pattern };
	regex_t re;
	int code;

	if (m == NULL)
		return no_mirror(mirror, msg, msglen);
	code = mstate_add_patterns(st, mirror, NULL, 0, pats, 1, msg, msglen);
	if (code != 0)
		return code;
	if (compile_full(&re, pattern, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	/* Topics are never removed from the array here, only moved to
	 * STOPPING, so indexing stays valid. */
	for (size_t i = 0; i < m->ntopics; i++) {
		struct mtopic *t = m->topics[i];
		char tmsg[1024] = "";
		int tc;
		if (regexec(&re, t->name, 0, NULL, 0) != 0)
			continue;
		tc = mstate_remove_topic(st, mirror, t->name, tmsg,
		    sizeof(tmsg));
		if (cb != NULL)
			cb(arg, t->name, tc, tc != 0 ? tmsg : NULL);
	}
	regfree(&re);
	return KERR_NONE;
}

static int being_stopped(const struct mtopic *t, char *msg, size_t msglen)
{
	fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is %s",
	    t->name, t->mirror->name, topic_any(t, B(STOPPING)) ?
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
	if (topic_any(t, B(STOPPING) | B(STOPPED)))
		return being_stopped(t, msg, msglen);
	if (topic_all(t, B(PAUSING) | B(PAUSED))) {
		fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is already "
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
	if (topic_any(t, B(STOPPING) | B(STOPPED)))
		return being_stopped(t, msg, msglen);
	if (!topic_any(t, B(PAUSING) | B(PAUSED))) {
		fmt(msg, msglen, "topic '%s' of cluster mirror '%s' is not "
		    "paused (%s)", topic, mirror, mtopic_state_name(t));
		return KERR_MIRROR_TOPIC_NOT_PAUSED;
	}
	return topic_move(st, t, B(PAUSING) | B(PAUSED), MPART_MIRRORING,
	    "resumed", msg, msglen);
}

/* ---- data-plane operations ------------------------------------------ */

static void part_what(const struct mpart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%d", p->topic->mirror->name, p->topic->name,
	    (int)p->index);
}

static int part_move(struct mstate *st, struct mpart *p, int to,
    const char *why, int32_t retry, int last, int64_t last_offset,
    int32_t last_epoch, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];

	part_what(p, what, sizeof(what));
	if (to < 0 || to >= MPART_STATE_COUNT) {
		fmt(msg, msglen, "%s: %d is not a partition state", what, to);
		return KERR_INVALID_REQUEST;
	}
	if (!mpart_transition_ok(p->state, to)) {
		fmt(msg, msglen, "%s: %s -> %s is not an allowed transition",
		    what, mpart_state_name(p->state), mpart_state_name(to));
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	}
	if ((int)p->state == to && to != MPART_FAILED && !last)
		return KERR_NONE;
	part_rec(&r, MREC_PART_STATE, p);
	r.state = (int8_t)to;
	r.retry = retry;
	r.str = kstr_c(why);
	if (last) {
		r.flags = MREC_F_LAST;
		r.off = last_offset;
		r.epoch = last_epoch;
	}
	return persist(st, &r, 1, what, msg, msglen);
}

int mpart_set_state(struct mstate *st, struct mpart *p, int to,
    const char *why, char *msg, size_t msglen)
{
	return part_move(st, p, to, why, p->retry_attempt, 0, 0, 0, msg,
	    msglen);
}

int mpart_fail(struct mstate *st, struct mpart *p, const char *error,
    int32_t retry_attempt, char *msg, size_t msglen)
{
	return part_move(st, p, MPART_FAILED, error != NULL ? error :
	    "failed", retry_attempt, 0, 0, 0, msg, msglen);
}

int mpart_stopped(struct mstate *st, struct mpart *p, int64_t last_offset,
    int32_t last_epoch, const char *why, char *msg, size_t msglen)
{
	char what[520];

	if (p->state != MPART_STOPPING) {
		part_what(p, what, sizeof(what));
		fmt(msg, msglen, "%s: %s -> STOPPED is not an allowed "
		    "transition", what, mpart_state_name(p->state));
		return KERR_INVALID_CLUSTER_MIRROR_STATES;
	}
	return part_move(st, p, MPART_STOPPED, why, p->retry_attempt, 1,
	    last_offset, last_epoch, msg, msglen);
}

int mpart_add_epoch(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];
	int noop;

	if (epoch_check(p, epoch, start_offset, &noop, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	if (noop)
		return KERR_NONE;
	part_rec(&r, MREC_PART_EPOCH, p);
	r.epoch = epoch;
	r.off = start_offset;
	part_what(p, what, sizeof(what));
	return persist(st, &r, 1, what, msg, msglen);
}

int mpart_add_anchor(struct mstate *st, struct mpart *p, int64_t src,
    int64_t dst, char *msg, size_t msglen)
{
	struct mrec r;
	char what[520];
	int action;

	if (anchor_check(p, src, dst, &action, msg, msglen) != 0)
		return KERR_INVALID_REQUEST;
	if (action == ANCHOR_NOOP)
		return KERR_NONE;
	part_rec(&r, MREC_PART_ANCHOR, p);
	r.off = src;
	r.off2 = dst;
	part_what(p, what, sizeof(what));
	return persist(st, &r, 1, what, msg, msglen);
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
		fmt(msg, msglen, "cluster mirror '%s': source cluster id must "
		    "be 1-%d characters", mirror, MREC_MAX_NAME);
		return KERR_INVALID_REQUEST;
	}
	if (m->source_cluster_id != NULL &&
	    strcmp(m->source_cluster_id, cluster_id) == 0)
		return KERR_NONE;
	rec_init(&r, MREC_MIRROR_SOURCE, mirror, NULL);
	r.str = kstr_c(cluster_id);
	return persist(st, &r, 1, mirror, msg, msglen);
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

int mstate_dump_records(void *arg, struct mlog_sink *sink)
{
	struct mstate *st = arg;
	size_t max = st->ml != NULL ? st->ml->opts.max_record :
	    MLOG_MAX_RECORD_DEFAULT;
	struct mrec r;
	int rc = 0;

	if (st->cluster_id[0] != '\0') {
		rec_init(&r, MREC_CLUSTER_ID, NULL, NULL);
		r.str = kstr_c(st->cluster_id);
		rc |= put_rec(sink, &r, max);
	}
	for (size_t i = 0; i < st->nmirrors && rc == 0; i++) {
		struct mirror *m = st->mirrors[i];
		struct mrec_config *cfg = calloc(m->nconfigs + 1, sizeof(*cfg));
		if (cfg == NULL)
			return -1;
		for (size_t c = 0; c < m->nconfigs; c++) {
			cfg[c].name = kstr_c(m->configs[c].name);
			cfg[c].value = kstr_c(m->configs[c].value);
		}
		rec_init(&r, MREC_MIRROR_CREATE, m->name, NULL);
		r.configs = cfg;
		r.nconfigs = (int32_t)m->nconfigs;
		rc |= put_rec(sink, &r, max);
		free(cfg);
		if (m->source_cluster_id != NULL) {
			rec_init(&r, MREC_MIRROR_SOURCE, m->name, NULL);
			r.str = kstr_c(m->source_cluster_id);
			rc |= put_rec(sink, &r, max);
		}
		for (size_t k = 0; k < m->nincludes + m->nexcludes; k++) {
			int inc = k < m->nincludes;
			rec_init(&r, MREC_MIRROR_PATTERN, m->name, NULL);
			r.kind = inc ? MREC_INCLUDE : MREC_EXCLUDE;
			r.str = kstr_c(inc ? m->includes[k] :
			    m->excludes[k - m->nincludes]);
			rc |= put_rec(sink, &r, max);
		}
		for (size_t ti = 0; ti < m->ntopics && rc == 0; ti++) {
			struct mtopic *t = m->topics[ti];
			rec_init(&r, MREC_TOPIC_RESTORE, m->name, t->name);
			r.count = t->npart;
			rc |= put_rec(sink, &r, max);
			for (int32_t pi = 0; pi < t->npart && rc == 0; pi++) {
				struct mpart *p = t->parts[pi];
				part_rec(&r, MREC_PART_RESTORE, p);
				r.state = (int8_t)p->state;
				r.retry = p->retry_attempt;
				r.off = p->last_offset;
				r.epoch = p->last_epoch;
				r.str = kstr_c(p->error);
				rc |= put_rec(sink, &r, max);
				for (size_t e = 0; e < p->nepochs; e++) {
					part_rec(&r, MREC_PART_EPOCH, p);
					r.epoch = p->epochs[e].epoch;
					r.off = p->epochs[e].start_offset;
					rc |= put_rec(sink, &r, max);
				}
				for (size_t x = 0; x < p->nanchors; x++) {
					part_rec(&r, MREC_PART_ANCHOR, p);
					r.off = p->anchors[x].src;
					r.off2 = p->anchors[x].dst;
					rc |= put_rec(sink, &r, max);
				}
			}
		}
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
				for (size_t x = 0; x < p->nanchors; x++)
					fprintf(f, "      anchor %" PRId64 " -> %"
					    PRId64 "\n", p->anchors[x].src,
					    p->anchors[x].dst);
			}
		}
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
