/*
 * pipeline/acl.c: ACL bindings of mirrored topics and groups follow the
 * source's (mirror.acls.sync), and mirrored destination topics are kept
 * read-only for everyone but mirrord (mirror.topic.read.only).
 *
 * Every mirror.metadata.refresh.interval.ms, on the pipeline's loop and
 * control connections, one round per mirror asks the source (sync only)
 * and the destination for every ACL binding (DescribeAcls with a filter
 * matching all), then:
 *
 *   Sync.  A source binding is in scope when it is on a mirrored topic (a
 *   topic of the mirror with a partition not STOPPED: LITERAL name of one,
 *   or PREFIXED pattern matching one and no stopped topic of the mirror)
 *   or on a consumer group that mirror.groups.include/exclude select
 *   (LITERAL) while the mirror still mirrors a topic.  A stopped topic
 *   (failover) and its groups are the destination's own: nothing the
 *   source does reaches them again, whenever it comes back; a planned
 *   creation or deletion whose topic stopped before it was sent is
 *   dropped (plan_written()).  Wildcard resource
 *   names (*) are never copied: they would reach beyond the mirror.  Its
 *   principal goes through mirror.acls.principal.map; a binding whose
 *   principal is then mirrord's own destination principal is not copied
 *   (a DENY of the source could stop mirroring).  ALLOW and DENY of every
 *   operation are copied, WRITE included: after failover the producers
 *   that could write on the source can write the destination, which is
 *   what an operator fails over for (MirrorMaker 2 copies only READ and
 *   leaves the producers to be granted by hand).  While the topic is
 *   mirrored those WRITE grants are neutralised by the read-only guard
 *   below; with mirror.topic.read.only=false they let clients write, which
 *   the data plane then reports as a foreign write.
 *   A binding in scope the destination lacks is recorded (acl-binding,
 *   mrec 22) and then created; a recorded one the source no longer has is
 *   deleted from the destination and forgotten; a recorded one no longer in
 *   scope (its topic left the mirror: failover) is forgotten and left in
 *   place, it is the destination's own now.  Nothing mirrord did not
 *   record is ever deleted.  A binding the destination already had before
 *   mirrord copied it is left alone and not recorded.
 *
 *   Read-only guard.  For every mirrored topic, each principal other than
 *   mirrord's that holds ALLOW WRITE or ALL on it at the destination
 *   (LITERAL name, LITERAL *, PREFIXED pattern matching it, including the
 *   bindings the sync creates in the same round) gets a DENY WRITE binding
 *   on the topic (LITERAL, host *).  DENY wins over ALLOW in Kafka's
 *   authorizer, so their Produce is refused with TOPIC_AUTHORIZATION_FAILED.
 *   The guard's bindings are recorded the same way and deleted exactly:
 *   when the topic has no partition left but STOPPED (RemoveTopicsFromMirror
 *   / failover: checked every second, so within about a second after the
 *   partitions report STOPPED, without asking the source, which is often
 *   down then), when the principal's ALLOW is gone, when
 *   the option is turned off, and when the mirror is deleted (the records
 *   outlive the mirror: pacl_orphans_tick() removes them).  An ALLOW WRITE
 *   for the wildcard principal User:* cannot be denied without denying
 *   mirrord: it is reported as a warning naming the binding.  Super users
 *   bypass ACLs: they cannot be denied at all.  A destination without an
 *   authorizer answers SECURITY_DISABLED: the guard is said to be off once
 *   (the data plane still detects foreign writes) and nothing else happens.
 *
 * Refusals (CLUSTER_AUTHORIZATION_FAILED: mirrord lacks DESCRIBE or ALTER
 * on the destination cluster; SECURITY_DISABLED with mirror.acls.sync on;
 * a CreateAcls or DeleteAcls result) keep a warning of the mirror: logged
 * when it starts or changes, counted in mirrord_acl_sync_errors_total by
 * error name, shown as the WarningMessage of the mirror's partitions, and
 * retried every interval.  They never fail a partition.
 *
 * A new ALLOW WRITE granted on the destination by hand takes effect until
 * the next round denies it (at most one interval).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "pipe_int.h"

#define AC_ARENA_BYTES (32u << 20) /* a decoded DescribeAcls answer */
#define AC_MAX_BINDINGS 100000     /* kept per side and round */
#define AC_CHECK_MS 1000           /* how often a lifted guard is looked for */
#define AC_ORPHAN_RETRY_MS 10000   /* a refused removal of a deleted mirror's */

/* Kafka's enums (org.apache.kafka.common.acl / resource). */
#define RT_ANY 1
#define RT_TOPIC 2
#define RT_GROUP 3
#define PT_ANY 1
#define PT_LITERAL 3
#define PT_PREFIXED 4
#define OP_ANY 1
#define OP_ALL 2
#define OP_WRITE 4
#define PM_ANY 1
#define PM_DENY 2
#define PM_ALLOW 3
#define E_SECURITY_DISABLED 54

struct abind {
	int8_t rtype, ptype, op, perm;
	char *name, *principal, *host;
};

struct aop {
	struct abind b;
	int kind;                    /* MACL_* */
	int fresh;                   /* recorded by this round */
	int16_t err;
	char msg[200];
};

struct acround {
	struct pacl *pa;
	int pending;
	int want_src, src_ok, dst_ok;
	int16_t dst_err;
	char dst_msg[300];
	struct abind *src, *dst;
	size_t nsrc, ndst;
	struct aop *cr, *dl;         /* to create, to delete */
	size_t ncr, ndl;
	char warn[1500];             /* this round's problems: shown */
	char quiet[1500];            /* and only logged (see problem()) */
};

/* Not sent this round: its record failed (-2), or its topic stopped
 * between the plan and the send (-3). */
static int op_unsent(const struct aop *o)
{
	return o->err == -2 || o->err == -3;
}

struct pacl {
	struct pmirror *pm;          /* NULL once the mirror is gone */
	int refs;
	int64_t next_at, check_at;
	struct acround *round;
	char *warn;                  /* the mirror's warning, NULL none */
	char *quiet;                 /* the last logged-only problems */
	int nosec_said;              /* SECURITY_DISABLED said once */
};

/* ---- bindings --------------------------------------------------------------- */

static void abind_fini(struct abind *b)
{
	free(b->name);
	free(b->principal);
	free(b->host);
	b->name = b->principal = b->host = NULL;
}

static int abind_set(struct abind *b, int rtype, int ptype, int op, int perm,
    const char *name, const char *principal, const char *host)
{
	b->rtype = (int8_t)rtype;
	b->ptype = (int8_t)ptype;
	b->op = (int8_t)op;
	b->perm = (int8_t)perm;
	b->name = strdup(name);
	b->principal = strdup(principal);
	b->host = strdup(host);
	if (b->name == NULL || b->principal == NULL || b->host == NULL) {
		abind_fini(b);
		return -1;
	}
	return 0;
}

static int abind_eq(const struct abind *a, const struct abind *b)
{
	return a->rtype == b->rtype && a->ptype == b->ptype && a->op == b->op &&
	    a->perm == b->perm && strcmp(a->name, b->name) == 0 &&
	    strcmp(a->principal, b->principal) == 0 &&
	    strcmp(a->host, b->host) == 0;
}

/* The recorded form: "rtype ptype op perm <len>:principal <len>:host name". */
static int abind_key(const struct abind *b, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d %d %d %d %zu:%s %zu:%s %s", b->rtype,
	    b->ptype, b->op, b->perm, strlen(b->principal), b->principal,
	    strlen(b->host), b->host, b->name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static const char *lenstr(const char *p, char **out)
{
	char *end;
	unsigned long n = strtoul(p, &end, 10);

	if (end == p || *end != ':' || n > MACL_MAX_BINDING || strlen(end + 1) < n)
		return NULL;
	if ((*out = strndup(end + 1, n)) == NULL)
		return NULL;
	p = end + 1 + n;
	return *p == ' ' ? p + 1 : NULL;
}

static int abind_parse(const char *s, struct abind *b)
{
	int rt, pt, op, pm, used = 0;
	const char *p;

	memset(b, 0, sizeof(*b));
	if (sscanf(s, "%d %d %d %d %n", &rt, &pt, &op, &pm, &used) != 4 ||
	    used == 0)
		return -1;
	p = s + used;
	if ((p = lenstr(p, &b->principal)) == NULL ||
	    (p = lenstr(p, &b->host)) == NULL || (b->name = strdup(p)) == NULL) {
		abind_fini(b);
		return -1;
	}
	b->rtype = (int8_t)rt;
	b->ptype = (int8_t)pt;
	b->op = (int8_t)op;
	b->perm = (int8_t)pm;
	return 0;
}

static const char *op_name(int op)
{
	static const char *const n[] = { "UNKNOWN", "ANY", "ALL", "READ", "WRITE",
	    "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
	    "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
	    "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT" };

	return op >= 0 && (size_t)op < ARRAY_SIZE(n) ? n[op] : "UNKNOWN";
}

static const char *rtype_name(int rt)
{
	static const char *const n[] = { "UNKNOWN", "ANY", "TOPIC", "GROUP",
	    "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER" };

	return rt >= 0 && (size_t)rt < ARRAY_SIZE(n) ? n[rt] : "UNKNOWN";
}

/* "ALLOW WRITE on TOPIC PREFIXED orders. for User:a from *" */
static const char *abind_text(const struct abind *b, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s on %s %s %.249s for %.200s from %.100s",
	    b->perm == PM_DENY ? "DENY" : b->perm == PM_ALLOW ? "ALLOW" : "?",
	    op_name(b->op), rtype_name(b->rtype),
	    b->ptype == PT_PREFIXED ? "PREFIXED" : "LITERAL", b->name,
	    b->principal, b->host);
	return buf;
}

static int set_has(const struct abind *set, size_t n, const struct abind *b)
{
	for (size_t i = 0; i < n; i++)
		if (abind_eq(&set[i], b))
			return 1;
	return 0;
}

static int ops_has(const struct aop *ops, size_t n, const struct abind *b)
{
	for (size_t i = 0; i < n; i++)
		if (abind_eq(&ops[i].b, b))
			return 1;
	return 0;
}

/* 1 when mirrord recorded b for mirror under kind. */
static int recorded(const struct mstate *st, const char *mirror, int kind,
    const struct abind *b)
{
	char key[MACL_MAX_BINDING + 1];

	if (abind_key(b, key, sizeof(key)) != 0)
		return 0;
	for (size_t i = 0; i < mstate_acl_count(st); i++) {
		const struct macl *a = mstate_acl_get(st, i);

		if (a->kind == kind && strcmp(a->mirror, mirror) == 0 &&
		    strcmp(a->binding, key) == 0)
			return 1;
	}
	return 0;
}

/* ---- records in the metadata log ----------------------------------------- */

/*
 * The records of a round (or of the deleted mirrors' sweep) go to the
 * metadata log as one group through the exclusive turn (mstate_excl_begin(),
 * as the operator's commands and the Metadata passes do), so the loop goes
 * on copying while they are written: aw_add() notes each, aw_write() asks
 * for the turn and then(arg, ok, msg) runs once the group is durable (ok 1)
 * or not written (0, msg why: the log refused or failed, a record could not
 * be queued, the mirror of a binding to record was deleted meanwhile, or
 * shutdown).  Records that would change nothing are dropped when the turn
 * comes.  Adds are write-ahead records: nothing of a group is sent to the
 * destination unless ok.
 */
struct anote {
	char *mirror;
	char *key;
	int kind;
	int add;
};

typedef void (*aw_fn)(void *arg, int ok, const char *msg);

struct awrite {
	struct pipeline *pl;
	struct awrite *next;         /* pl->acl_writes */
	struct anote *v;
	size_t n, cap;
	int failed;                  /* a note could not be taken */
	aw_fn then;
	void *arg;
};

static struct awrite *aw_new(struct pipeline *pl)
{
	struct awrite *aw = calloc(1, sizeof(*aw));

	if (aw == NULL)
		fatal("pipeline: out of memory");
	aw->pl = pl;
	return aw;
}

static void aw_free(struct awrite *aw)
{
	for (size_t i = 0; i < aw->n; i++) {
		free(aw->v[i].mirror);
		free(aw->v[i].key);
	}
	free(aw->v);
	free(aw);
}

/* 0, or -1 (a binding too long to record: logged, nothing noted). */
static int aw_add(struct awrite *aw, const char *mirror, int kind,
    const struct abind *b, int add)
{
	char key[MACL_MAX_BINDING + 1];
	struct anote *a;

	if (abind_key(b, key, sizeof(key)) != 0) {
		log_warnx("mirror %s: an ACL binding of %s is too long to record",
		    mirror, b->name);
		return -1;
	}
	if (aw->n == aw->cap) {
		size_t cap = aw->cap != 0 ? aw->cap * 2 : 16;
		struct anote *v = realloc(aw->v, cap * sizeof(*v));

		if (v == NULL)
			fatal("pipeline: out of memory");
		aw->v = v;
		aw->cap = cap;
	}
	a = &aw->v[aw->n];
	a->kind = kind;
	a->add = add;
	a->mirror = strdup(mirror);
	a->key = strdup(key);
	if (a->mirror == NULL || a->key == NULL)
		fatal("pipeline: out of memory");
	aw->n++;
	return 0;
}

static void aw_unlink(struct awrite *aw)
{
	for (struct awrite **pp = &aw->pl->acl_writes; *pp != NULL;
	    pp = &(*pp)->next)
		if (*pp == aw) {
			*pp = aw->next;
			break;
		}
}

static void aw_end(struct awrite *aw, int ok, const char *msg)
{
	aw_fn then = aw->then;
	void *arg = aw->arg;

	aw_unlink(aw);
	aw_free(aw);
	then(arg, ok, msg);
}

static void aw_done(void *arg, int code, const char *msg)
{
	struct awrite *aw = arg;

	aw_end(aw, code == 0 && !aw->failed, code != 0 ? msg :
	    "an ACL record could not be queued (logged)");
}

/* The turn: the group's records, checked against the model as it is now. */
static void aw_ready(void *arg)
{
	struct awrite *aw = arg;
	struct mstate *st = aw->pl->st;
	char msg[512], why[512] = "";
	int started = 0, code;

	for (size_t i = 0; i < aw->n; i++)
		if (aw->v[i].add &&
		    mstate_mirror_find(st, aw->v[i].mirror) == NULL) {
			snprintf(why, sizeof(why), "mirror %s was deleted",
			    aw->v[i].mirror);
			break;
		}
	for (size_t i = 0; why[0] == '\0' && i < aw->n; i++) {
		const struct anote *a = &aw->v[i];

		if (mstate_acl_note(st, a->mirror, a->kind, a->key, a->add, msg,
		    sizeof(msg)) != 0) {
			log_warnx("mirror %s: %s", a->mirror, msg);
			aw->failed = 1;
		}
	}
	code = mstate_excl_commit(st, aw_done, aw, &started, msg, sizeof(msg));
	if (started)
		return;
	if (why[0] != '\0')
		aw_end(aw, 0, why);
	else
		aw_done(aw, code, msg);
}

/* Takes aw: then() runs now (nothing to write, or the turn refused) or
 * once the group is written. */
static void aw_write(struct awrite *aw, aw_fn then, void *arg)
{
	struct pipeline *pl = aw->pl;
	int r;

	aw->then = then;
	aw->arg = arg;
	if (aw->n == 0) {
		aw_end(aw, !aw->failed, "an ACL record could not be queued");
		return;
	}
	aw->next = pl->acl_writes;
	pl->acl_writes = aw;
	r = mstate_excl_begin(pl->st, aw_ready, aw);
	if (r == 1)
		aw_ready(aw);
	else if (r < 0)
		aw_end(aw, 0, "the metadata log cannot take a write now");
}

void pacl_writes_free(struct pipeline *pl)
{
	struct awrite *aw;

	while ((aw = pl->acl_writes) != NULL) {
		mstate_excl_cancel(pl->st, aw);
		aw_end(aw, 0, "mirrord is stopping");
	}
}

/* ---- scope --------------------------------------------------------------- */

/* A topic of the mirror still mirrored: a partition not STOPPED. */
static int topic_guarded(const struct mtopic *mt)
{
	for (int32_t i = 0; i < mt->npart; i++)
		if (mt->parts[i] != NULL && mt->parts[i]->state != MPART_STOPPED)
			return 1;
	return 0;
}

static int is_guarded(const struct mirror *m, const char *topic)
{
	for (size_t i = 0; i < m->ntopics; i++)
		if (strcmp(m->topics[i]->name, topic) == 0)
			return topic_guarded(m->topics[i]);
	return 0;
}

/*
 * Source binding b concerns the mirror (before principal mapping).  A
 * stopped topic (failed over) is the destination's own: nothing the source
 * does reaches it again.  So a PREFIXED binding is in scope only while it
 * matches a mirrored topic and no stopped one (it would reach that one as
 * well), and a group's binding only while the mirror still mirrors a
 * topic.
 */
static int in_scope(const struct pmirror *pm, const struct abind *b)
{
	const struct mirror *m = pm->m;
	int mirrored = 0;

	if (strcmp(b->name, "*") == 0)
		return 0;
	if (b->rtype == RT_GROUP) {
		if (b->ptype != PT_LITERAL ||
		    !mirrorconf_group_selected(pm->conf, b->name))
			return 0;
		for (size_t i = 0; i < m->ntopics && !mirrored; i++)
			mirrored = topic_guarded(m->topics[i]);
		return mirrored;
	}
	if (b->rtype != RT_TOPIC)
		return 0;
	if (b->ptype == PT_LITERAL)
		return is_guarded(m, b->name);
	if (b->ptype != PT_PREFIXED)
		return 0;
	for (size_t i = 0; i < m->ntopics; i++) {
		if (strncmp(m->topics[i]->name, b->name, strlen(b->name)) != 0)
			continue;
		if (!topic_guarded(m->topics[i]))
			return 0;
		mirrored = 1;
	}
	return mirrored;
}

/* A planned creation still wanted: the sync's binding still in scope,
 * the guard's DENY on a topic still mirrored. */
static int still_wanted(const struct pmirror *pm, const struct aop *o)
{
	if (o->kind == MACL_SYNC)
		return in_scope(pm, &o->b);
	return o->b.rtype == RT_TOPIC && is_guarded(pm->m, o->b.name);
}

/* b grants WRITE on topic. */
static int grants_write(const struct abind *b, const char *topic)
{
	if (b->rtype != RT_TOPIC || b->perm != PM_ALLOW ||
	    (b->op != OP_WRITE && b->op != OP_ALL))
		return 0;
	if (b->ptype == PT_LITERAL)
		return strcmp(b->name, topic) == 0 || strcmp(b->name, "*") == 0;
	return b->ptype == PT_PREFIXED &&
	    strncmp(topic, b->name, strlen(b->name)) == 0;
}

/* mirrord's principal on the destination, or NULL when it cannot be known
 * (TLS client certificate: the broker's principal builder decides). */
static const char *my_principal(const struct pipeline *pl, char *buf,
    size_t len)
{
	const struct pcluster *d = pl->dst;

	if (d->kcfg.conn.sasl_username != NULL) {
		snprintf(buf, len, "User:%s", d->kcfg.conn.sasl_username);
		return buf;
	}
	if (!kconn_security_tls(d->kcfg.conn.security)) {
		snprintf(buf, len, "User:ANONYMOUS");
		return buf;
	}
	return NULL;
}

/* ---- bookkeeping --------------------------------------------------------- */

static void ops_free(struct aop *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		abind_fini(&ops[i].b);
	free(ops);
}

static void set_free(struct abind *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		abind_fini(&set[i]);
	free(set);
}

static void pa_unref(struct pacl *pa)
{
	if (--pa->refs > 0)
		return;
	free(pa->warn);
	free(pa->quiet);
	free(pa);
}

static void round_free(struct acround *r)
{
	struct pacl *pa = r->pa;

	set_free(r->src, r->nsrc);
	set_free(r->dst, r->ndst);
	ops_free(r->cr, r->ncr);
	ops_free(r->dl, r->ndl);
	if (pa->round == r)
		pa->round = NULL;
	free(r);
	pa_unref(pa);
}

void pacl_forget(struct pmirror *pm)
{
	struct pacl *pa = pm->acl;

	if (pa == NULL)
		return;
	pm->acl = NULL;
	pa->pm = NULL;
	pa_unref(pa);
}

int pacl_warning(struct pmirror *pm, char *buf, size_t len)
{
	if (pm->acl == NULL || pm->acl->warn == NULL)
		return 0;
	snprintf(buf, len, "%s", pm->acl->warn);
	return 1;
}

/* 1 when the mirror's configs set mirror.topic.read.only themselves. */
static int ro_explicit(const struct pmirror *pm)
{
	for (size_t i = 0; pm->m != NULL && i < pm->m->nconfigs; i++)
		if (strcmp(pm->m->configs[i].name, "mirror.topic.read.only") == 0)
			return 1;
	return 0;
}

/*
 * One problem of the round: counted now, logged (when it changes) and
 * shown in DescribeMirrors at the end of the round.  guard: a problem of the
 * read-only guard alone; unless the operator set mirror.topic.read.only
 * (it is on by default) such a problem is logged and counted but not shown
 * on the partitions, so a destination whose authorizer does not let
 * mirrord manage ACLs does not put a warning on every mirror.
 */
static void problem(struct acround *r, int guard, int16_t code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void problem(struct acround *r, int guard, int16_t code,
    const char *fmt, ...)
{
	struct pmirror *pm = r->pa->pm;
	char *buf = guard && pm != NULL && !ro_explicit(pm) ? r->quiet : r->warn;
	size_t at = strlen(buf);
	va_list ap;

	if (pm != NULL && pm->pl->ms != NULL && code != 0)
		metrics_counter_inc(METRICS_SERIES(MSTD(pm->pl->ms, ACL_SYNC_ERRORS),
		    pm->name, kerr_name(code)));
	if (at + 4 >= sizeof(r->warn))
		return;
	if (at > 0) {
		memcpy(buf + at, "; ", 3);
		at += 2;
	}
	va_start(ap, fmt);
	vsnprintf(buf + at, sizeof(r->warn) - at, fmt, ap);
	va_end(ap);
}

static void quiet_update(struct pacl *pa, const char *text)
{
	if (pa->pm == NULL || (pa->quiet == NULL && text[0] == '\0') ||
	    (pa->quiet != NULL && strcmp(pa->quiet, text) == 0))
		return;
	if (text[0] != '\0')
		log_warnx("mirror %s: %s", pa->pm->name, text);
	free(pa->quiet);
	pa->quiet = text[0] != '\0' ? strdup(text) : NULL;
}

/* mirrord_acl_bindings of the mirror: what it owns now, by kind. */
static void count_owned(struct pmirror *pm)
{
	size_t n[2] = { 0, 0 };

	if (pm->pl->ms == NULL)
		return;
	for (size_t i = 0; i < mstate_acl_count(pm->pl->st); i++) {
		const struct macl *a = mstate_acl_get(pm->pl->st, i);

		if (strcmp(a->mirror, pm->name) == 0)
			n[a->kind == MACL_SYNC ? 0 : 1]++;
	}
	metrics_gauge_set(METRICS_SERIES(MSTD(pm->pl->ms, ACL_BINDINGS), pm->name,
	    "sync"), (double)n[0]);
	metrics_gauge_set(METRICS_SERIES(MSTD(pm->pl->ms, ACL_BINDINGS), pm->name,
	    "read-only"), (double)n[1]);
}

static void warn_update(struct pacl *pa, const char *text)
{
	if (pa->pm != NULL)
		count_owned(pa->pm);
	if (pa->pm == NULL)
		return;
	if (text[0] == '\0') {
		if (pa->warn != NULL)
			log_info("mirror %s: ACL sync and read-only guard in order "
			    "again", pa->pm->name);
		free(pa->warn);
		pa->warn = NULL;
		return;
	}
	if (pa->warn != NULL && strcmp(pa->warn, text) == 0)
		return;
	log_warnx("mirror %s: %s", pa->pm->name, text);
	free(pa->warn);
	pa->warn = strdup(text);
}

/* ---- requests ------------------------------------------------------------- */

/*
 * The broker's words for an error, for a warning: none for authorization
 * errors, whose message names the request's session object (a new one
 * each time, so the warning would change every round and be logged
 * again); the error name says it all.
 */
static struct kstr brk_msg(int16_t code, struct kstr m)
{
	if (pl_is_denial(code) || m.len <= 0)
		return kstr_c("");
	if (m.len > 250)
		m.len = 250;
	return m;
}

struct acreq {
	struct acround *r;
	int is_dst;
	int16_t version;
};

static int timeout_ms(const struct pipeline *pl)
{
	return (int)MIN(pl->cfg->pipeline_request_timeout_ms, INT32_MAX);
}

/*
 * Sends api_key's request msg to c at the newest version in v1-v3 that c
 * offers (*version), answered by done(arg).  0 when sent; else
 * KERR_UNSUPPORTED_VERSION when c offers none ("the destination has no
 * CreateAcls v1-v3") or -1 (kconn's reason), with err set.
 */
static int acl_send(struct pipeline *pl, struct kconn *c, int is_dst,
    int16_t api_key, const void *msg, kconn_resp_cb done, void *arg,
    int16_t *version, char *err, size_t errlen)
{
	int v = kconn_pick_version(c, api_key, 1, 3);

	if (v < 0) {
		snprintf(err, errlen, "the %s has no %s v1-v3",
		    is_dst ? "destination" : "source", kp_api_name(api_key));
		return KERR_UNSUPPORTED_VERSION;
	}
	*version = (int16_t)v;
	return kconn_send_msg(c, api_key, (int16_t)v, msg, 0, timeout_ms(pl),
	    done, arg, err, errlen) != 0 ? -1 : 0;
}

/* acl_send() of one request of round r, answered by done with a fresh
 * context counted in r->pending. */
static int round_send(struct acround *r, struct kconn *c, int is_dst,
    int16_t api_key, const void *msg, kconn_resp_cb done, char *err,
    size_t errlen)
{
	struct acreq *q = calloc(1, sizeof(*q));
	int rc;

	if (q == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	q->r = r;
	q->is_dst = is_dst;
	r->pending++;
	rc = acl_send(r->pa->pm->pl, c, is_dst, api_key, msg, done, q,
	    &q->version, err, errlen);
	if (rc != 0) {
		r->pending--;
		free(q);
	}
	return rc;
}

/* The ops that were to go out failed, for why when known (err -2, not
 * sent this round, stays; -3, dropped: see plan_written()). */
static void ops_failed(struct aop *ops, size_t n, const char *why)
{
	for (size_t i = 0; i < n; i++) {
		if (op_unsent(&ops[i]))
			continue;
		ops[i].err = -1;
		if (why != NULL)
			snprintf(ops[i].msg, sizeof(ops[i].msg), "%s", why);
	}
}

/*
 * Decodes the answer to an ACL request (api_key at version) into resp, in
 * a new arena *a of arena_size bytes that the caller frees (NULL too).
 * -1 when there is none to use: out of memory, or a malformed answer,
 * logged as mirror's from side's broker, which closes c.
 */
static int acl_decode(struct kconn *c, int16_t api_key, int16_t version,
    struct kr *body, size_t arena_size, void *resp, struct karena **a,
    const char *mirror, const char *side)
{
	const struct kp_api *api = kp_api_find(api_key);
	char why[64];

	if ((*a = karena_new(arena_size)) == NULL)
		return -1;
	api->response_init(resp);
	if (api->response_decode(body, *a, version, resp) == 0 && !body->err)
		return 0;
	log_warnx("mirror %s: %s response of the %s does not parse at byte %zu: "
	    "%s", mirror, api->name, side, body->err_off, body->why);
	snprintf(why, sizeof(why), "malformed %s response", api->name);
	kconn_close(c, KCONN_E_PROTOCOL, why);
	return -1;
}

static void round_plan(struct acround *r);
static void round_finish(struct acround *r);
static void round_end(struct acround *r);
static void plan_written(void *arg, int ok, const char *msg);

static void describe_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct acreq *q = arg;
	struct acround *r = q->r;
	struct pacl *pa = r->pa;
	struct kp_describe_acls_response resp;
	struct karena *a = NULL;
	const char *side = q->is_dst ? "destination" : "source";
	struct abind **set = q->is_dst ? &r->dst : &r->src;
	size_t *nset = q->is_dst ? &r->ndst : &r->nsrc, total = 0;

	r->pending--;
	if (pa->pm == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		log_debug("mirror %s: DescribeAcls on the %s: %s", pa->pm->name,
		    side, errstr);
		goto out;
	}
	if (acl_decode(c, KP_API_DESCRIBE_ACLS, q->version, body,
	    AC_ARENA_BYTES, &resp, &a, pa->pm->name, side) != 0)
		goto out;
	if (resp.error_code != 0) {
		struct kstr em = brk_msg(resp.error_code, resp.error_message);

		if (q->is_dst) {
			r->dst_err = resp.error_code;
			snprintf(r->dst_msg, sizeof(r->dst_msg), "%.*s", (int)em.len,
			    em.p);
		} else {
			problem(r, 0, resp.error_code, "the source does not describe its "
			    "ACLs (DescribeAcls: %s%s%.*s), so they are not synced",
			    kerr_name(resp.error_code), em.len > 0 ? ": " : "",
			    (int)em.len, em.p);
		}
		goto out;
	}
	for (int32_t i = 0; i < resp.resources_n; i++)
		total += (size_t)MAX(resp.resources[i].acls_n, 0);
	if (total > AC_MAX_BINDINGS) {
		log_warnx("mirror %s: the %s has %zu ACL bindings, more than %d: "
		    "ACLs are not synced", pa->pm->name, side, total,
		    AC_MAX_BINDINGS);
		goto out;
	}
	if ((*set = calloc(MAX(total, 1), sizeof(**set))) == NULL)
		goto out;
	for (int32_t i = 0; i < resp.resources_n; i++) {
		const struct kp_describe_acls_response_describe_acls_resource *res =
		    &resp.resources[i];
		char *name = kstr_dup(res->resource_name);

		for (int32_t k = 0; name != NULL && k < res->acls_n; k++) {
			const struct kp_describe_acls_response_acl_description *d =
			    &res->acls[k];
			char *pr = kstr_dup(d->principal), *host = kstr_dup(d->host);

			if (pr != NULL && host != NULL &&
			    abind_set(&(*set)[*nset], res->resource_type,
			    res->pattern_type, d->operation, d->permission_type, name,
			    pr, host) == 0)
				(*nset)++;
			free(pr);
			free(host);
		}
		free(name);
	}
	if (q->is_dst)
		r->dst_ok = 1;
	else
		r->src_ok = 1;
out:
	karena_free(a);
	free(q);
	if (r->pending > 0)
		return;
	if (pa->pm == NULL || pa->pm->pl->dst == NULL || pa->pm->pl->dst->dying)
		round_free(r);
	else
		round_plan(r);
}

static int send_describe(struct acround *r, struct pcluster *cl, int is_dst)
{
	struct pmirror *pm = r->pa->pm;
	struct kconn *c = pcluster_ctl(cl);
	struct kp_describe_acls_request req;
	char err[256];

	if (c == NULL)
		return -1;
	kp_describe_acls_request_init(&req);
	req.resource_type_filter = RT_ANY;
	req.resource_name_filter = kstr_c(NULL);
	req.pattern_type_filter = PT_ANY;
	req.principal_filter = kstr_c(NULL);
	req.host_filter = kstr_c(NULL);
	req.operation = OP_ANY;
	req.permission_type = PM_ANY;
	if (round_send(r, c, is_dst, KP_API_DESCRIBE_ACLS, &req,
	    describe_response, err, sizeof(err)) != 0) {
		log_debug("mirror %s: DescribeAcls: %s", pm->name, err);
		return -1;
	}
	return 0;
}

static void create_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct acreq *q = arg;
	struct acround *r = q->r;
	struct kp_create_acls_response resp;
	struct karena *a = NULL;

	r->pending--;
	if (r->pa->pm == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		ops_failed(r->cr, r->ncr, errstr);
		goto out;
	}
	if (acl_decode(c, KP_API_CREATE_ACLS, q->version, body, 1u << 20,
	    &resp, &a, r->pa->pm->name, "destination") != 0) {
		ops_failed(r->cr, r->ncr, NULL);
		goto out;
	}
	/* Results by position among the creations sent (not err -2, -3). */
	for (size_t i = 0, k = 0; i < r->ncr; i++) {
		const struct kp_create_acls_response_acl_creation_result *x;

		if (op_unsent(&r->cr[i]))
			continue;
		if ((int32_t)k >= resp.results_n) {
			r->cr[i].err = -1;
			snprintf(r->cr[i].msg, sizeof(r->cr[i].msg),
			    "no result in the answer");
			continue;
		}
		x = &resp.results[k++];
		r->cr[i].err = x->error_code;
		snprintf(r->cr[i].msg, sizeof(r->cr[i].msg), "%.*s",
		    (int)brk_msg(x->error_code, x->error_message).len,
		    brk_msg(x->error_code, x->error_message).p);
	}
out:
	karena_free(a);
	free(q);
	if (r->pending == 0)
		round_finish(r);
}

static void delete_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct acreq *q = arg;
	struct acround *r = q->r;
	struct kp_delete_acls_response resp;
	struct karena *a = NULL;

	r->pending--;
	if (r->pa->pm == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		ops_failed(r->dl, r->ndl, errstr);
		goto out;
	}
	if (acl_decode(c, KP_API_DELETE_ACLS, q->version, body, 4u << 20,
	    &resp, &a, r->pa->pm->name, "destination") != 0) {
		ops_failed(r->dl, r->ndl, NULL);
		goto out;
	}
	/* Results by position among the filters sent (not err -3). */
	for (size_t i = 0, k = 0; i < r->ndl; i++) {
		const struct kp_delete_acls_response_delete_acls_filter_result *x;

		if (op_unsent(&r->dl[i]))
			continue;
		if ((int32_t)k >= resp.filter_results_n) {
			r->dl[i].err = -1;
			continue;
		}
		x = &resp.filter_results[k++];
		r->dl[i].err = x->error_code;
		snprintf(r->dl[i].msg, sizeof(r->dl[i].msg), "%.*s",
		    (int)brk_msg(x->error_code, x->error_message).len,
		    brk_msg(x->error_code, x->error_message).p);
	}
out:
	karena_free(a);
	free(q);
	if (r->pending == 0)
		round_finish(r);
}

/*
 * The DeleteAcls request of exactly the bindings of ops (filters naming
 * every field; not those unsent, err -3) in *req; returns the filters,
 * freed by the caller after the send, or NULL when out of memory.
 */
static struct kp_delete_acls_request_delete_acls_filter *delete_req(
    const struct aop *ops, size_t n, struct kp_delete_acls_request *req)
{
	struct kp_delete_acls_request_delete_acls_filter *f;

	size_t k = 0;

	if ((f = calloc(n, sizeof(*f))) == NULL)
		return NULL;
	kp_delete_acls_request_init(req);
	for (size_t i = 0; i < n; i++) {
		if (op_unsent(&ops[i]))
			continue;
		kp_delete_acls_request_delete_acls_filter_init(&f[k]);
		f[k].resource_type_filter = ops[i].b.rtype;
		f[k].resource_name_filter = kstr_c(ops[i].b.name);
		f[k].pattern_type_filter = ops[i].b.ptype;
		f[k].principal_filter = kstr_c(ops[i].b.principal);
		f[k].host_filter = kstr_c(ops[i].b.host);
		f[k].operation = ops[i].b.op;
		f[k].permission_type = ops[i].b.perm;
		k++;
	}
	req->filters = f;
	req->filters_n = (int32_t)k;
	return f;
}

/*
 * The CreateAcls request of the recorded ones of ops (err -2: the record
 * failed, so not created this round; -3: dropped) in *req; returns the
 * creations, freed by the caller after the send, or NULL when out of
 * memory.
 */
static struct kp_create_acls_request_acl_creation *create_req(
    const struct aop *ops, size_t n, struct kp_create_acls_request *req)
{
	struct kp_create_acls_request_acl_creation *cr;
	size_t k = 0;

	if ((cr = calloc(n, sizeof(*cr))) == NULL)
		return NULL;
	kp_create_acls_request_init(req);
	for (size_t i = 0; i < n; i++) {
		if (op_unsent(&ops[i]))
			continue;
		kp_create_acls_request_acl_creation_init(&cr[k]);
		cr[k].resource_type = ops[i].b.rtype;
		cr[k].resource_name = kstr_c(ops[i].b.name);
		cr[k].resource_pattern_type = ops[i].b.ptype;
		cr[k].principal = kstr_c(ops[i].b.principal);
		cr[k].host = kstr_c(ops[i].b.host);
		cr[k].operation = ops[i].b.op;
		cr[k].permission_type = ops[i].b.perm;
		k++;
	}
	req->creations = cr;
	req->creations_n = (int32_t)k;
	return cr;
}

/* ---- the plan --------------------------------------------------------------- */

static int op_add(struct aop **ops, size_t *n, const struct abind *b, int kind)
{
	struct aop *o = realloc(*ops, (*n + 1) * sizeof(*o));

	if (o == NULL)
		return -1;
	*ops = o;
	memset(&o[*n], 0, sizeof(o[*n]));
	if (abind_set(&o[*n].b, b->rtype, b->ptype, b->op, b->perm, b->name,
	    b->principal, b->host) != 0)
		return -1;
	o[*n].kind = kind;
	(*n)++;
	return 0;
}

/* The sync's wanted bindings: in scope on the source, mapped. */
static void plan_sync(struct acround *r, const char *mine, struct aop **want,
    size_t *nwant)
{
	struct pmirror *pm = r->pa->pm;

	for (size_t i = 0; i < r->nsrc; i++) {
		const struct abind *s = &r->src[i];
		struct abind b = *s;

		if (!in_scope(pm, s))
			continue;
		b.principal = (char *)mirrorconf_map_principal(pm->conf, s->principal);
		if (mine != NULL && strcmp(b.principal, mine) == 0)
			continue;
		if (!ops_has(*want, *nwant, &b))
			(void)op_add(want, nwant, &b, MACL_SYNC);
	}
}

static void round_plan(struct acround *r)
{
	struct pacl *pa = r->pa;
	struct pmirror *pm = pa->pm;
	struct pipeline *pl = pm->pl;
	const struct mirror *m = pm->m;
	struct aop *want = NULL, *ro = NULL, *fg = NULL, *tk = NULL;
	size_t nwant = 0, nro = 0, nfg = 0, ntk = 0;
	char mbuf[300], text[800];
	const char *mine = my_principal(pl, mbuf, sizeof(mbuf));
	struct awrite *aw;

	if (m == NULL)
		goto done;
	if (!r->dst_ok) {
		if (r->dst_err == E_SECURITY_DISABLED) {
			if (pm->conf->acls_sync)
				problem(r, 0, r->dst_err, "the destination runs no authorizer "
				    "(SECURITY_DISABLED), so ACLs cannot be synced "
				    "(mirror.acls.sync is true)");
			if (!pa->nosec_said && pm->conf->topic_read_only)
				log_info("mirror %s: the destination runs no authorizer: "
				    "mirrored topics cannot be made read-only there; "
				    "writes by others are detected as foreign writes",
				    pm->name);
			pa->nosec_said = 1;
		} else if (r->dst_err != 0) {
			problem(r, !pm->conf->acls_sync, r->dst_err, "the destination does not describe its "
			    "ACLs (DescribeAcls: %s%s%s), so ACLs are neither synced nor "
			    "used to keep mirrored topics read-only", kerr_name(r->dst_err),
			    r->dst_msg[0] ? ": " : "", r->dst_msg);
		}
		goto done;
	}
	pa->nosec_said = 0;
	/* What the sync wants. */
	if (pm->conf->acls_sync && r->src_ok)
		plan_sync(r, mine, &want, &nwant);
	for (size_t i = 0; i < nwant; i++) {
		int indst = set_has(r->dst, r->ndst, &want[i].b);

		if (!indst) {
			(void)op_add(&r->cr, &r->ncr, &want[i].b, MACL_SYNC);
		} else if (!recorded(pl->st, pm->name, MACL_SYNC, &want[i].b) &&
		    recorded(pl->st, pm->name, MACL_READONLY, &want[i].b)) {
			/* The guard's DENY is also the source's: the sync owns it
			 * now, so lifting the guard keeps it. */
			(void)op_add(&tk, &ntk, &want[i].b, MACL_SYNC);
		}
	}
	/* What the read-only guard wants. */
	if (pm->conf->topic_read_only && mine == NULL) {
		problem(r, 1, 0, "mirrord's principal on the destination is not known "
		    "(TLS client certificate, no SASL user): mirrored topics are not "
		    "made read-only (set mirror.topic.read.only=false to silence this)");
	} else if (pm->conf->topic_read_only) {
		for (size_t t = 0; t < m->ntopics; t++) {
			const char *tn = m->topics[t]->name;

			if (!topic_guarded(m->topics[t]))
				continue;
			for (size_t i = 0; i < r->ndst + r->ncr; i++) {
				const struct abind *g = i < r->ndst ? &r->dst[i] :
				    &r->cr[i - r->ndst].b;
				struct abind d;

				if (!grants_write(g, tn) || strcmp(g->principal, mine) == 0)
					continue;
				if (strcmp(g->principal, "User:*") == 0) {
					problem(r, 0, 0, "%s lets every principal write mirrored "
					    "topic %s; it cannot be denied without denying "
					    "mirrord (%s)", abind_text(g, text, sizeof(text)),
					    tn, mine);
					continue;
				}
				memset(&d, 0, sizeof(d));
				d.rtype = RT_TOPIC;
				d.ptype = PT_LITERAL;
				d.op = OP_WRITE;
				d.perm = PM_DENY;
				d.name = (char *)tn;
				d.principal = g->principal;
				d.host = (char *)"*";
				if (!ops_has(ro, nro, &d))
					(void)op_add(&ro, &nro, &d, MACL_READONLY);
			}
		}
		for (size_t i = 0; i < nro; i++)
			if (!set_has(r->dst, r->ndst, &ro[i].b) &&
			    !ops_has(r->cr, r->ncr, &ro[i].b))
				(void)op_add(&r->cr, &r->ncr, &ro[i].b, MACL_READONLY);
	}
	/* Recorded bindings no longer wanted. */
	for (size_t i = 0; i < mstate_acl_count(pl->st); i++) {
		const struct macl *a = mstate_acl_get(pl->st, i);
		struct abind b;
		int gone;

		if (strcmp(a->mirror, pm->name) != 0 || abind_parse(a->binding, &b) != 0)
			continue;
		if (a->kind == MACL_SYNC) {
			if (!pm->conf->acls_sync || !r->src_ok) {
				/* Off: left as they are.  Source unknown: next round. */
				abind_fini(&b);
				continue;
			}
			if (ops_has(want, nwant, &b)) {
				abind_fini(&b);
				continue;
			}
			/* In scope: the source deleted it; else its topic left the
			 * mirror and it is the destination's own now. */
			gone = 1;
			for (size_t s = 0; s < r->nsrc && gone; s++) {
				struct abind sb = r->src[s];

				sb.principal = (char *)mirrorconf_map_principal(pm->conf,
				    r->src[s].principal);
				if (abind_eq(&sb, &b))
					gone = 0;
			}
			if (gone && set_has(r->dst, r->ndst, &b) && in_scope(pm, &b) &&
			    ops_has(ro, nro, &b)) {
				/* A DENY the source dropped that the guard wants:
				 * the guard owns it now, it stays. */
				(void)op_add(&tk, &ntk, &b, MACL_READONLY);
				(void)op_add(&fg, &nfg, &b, MACL_SYNC);
			} else if (gone && set_has(r->dst, r->ndst, &b) &&
			    in_scope(pm, &b)) {
				(void)op_add(&r->dl, &r->ndl, &b, MACL_SYNC);
			} else {
				if (gone || !in_scope(pm, &b))
					log_info("mirror %s: ACL binding %s is no longer "
					    "synced and stays on the destination", pm->name,
					    abind_text(&b, text, sizeof(text)));
				(void)op_add(&fg, &nfg, &b, MACL_SYNC);
			}
		} else {
			if (ops_has(ro, nro, &b)) {
				abind_fini(&b);
				continue;
			}
			if (set_has(r->dst, r->ndst, &b) &&
			    !recorded(pl->st, pm->name, MACL_SYNC, &b) &&
			    !ops_has(want, nwant, &b)) {
				(void)op_add(&r->dl, &r->ndl, &b, MACL_READONLY);
			} else {
				(void)op_add(&fg, &nfg, &b, MACL_READONLY);
			}
		}
		abind_fini(&b);
	}
	/* The round's records, in one group written off the loop: the
	 * bindings the sync or the guard takes over and those forgotten
	 * (noted after the walk: a note changes the list walked), and the
	 * write-ahead records of what it creates.  Recorded before created,
	 * so a crash in between leaves a record of a binding that may exist,
	 * never a binding without one; nothing is sent unless the group is
	 * durable (a mirror of a thousand topics that a PREFIXED grant lets
	 * someone write needs a thousand DENYs: one write, not a thousand). */
	aw = aw_new(pl);
	for (size_t i = 0; i < ntk; i++)
		(void)aw_add(aw, pm->name, tk[i].kind, &tk[i].b, 1);
	for (size_t i = 0; i < nfg; i++)
		(void)aw_add(aw, pm->name, fg[i].kind, &fg[i].b, 0);
	for (size_t i = 0; i < r->ncr; i++) {
		if (recorded(pl->st, pm->name, r->cr[i].kind, &r->cr[i].b))
			continue;
		if (aw_add(aw, pm->name, r->cr[i].kind, &r->cr[i].b, 1) != 0) {
			r->cr[i].err = -2; /* not sent */
			continue;
		}
		r->cr[i].fresh = 1;
	}
	ops_free(want, nwant);
	ops_free(ro, nro);
	ops_free(fg, nfg);
	ops_free(tk, ntk);
	if (aw->n == 0 && r->ncr == 0 && r->ndl == 0) {
		aw_free(aw);
		round_end(r);
		return;
	}
	aw_write(aw, plan_written, r);
	return;
done:
	ops_free(want, nwant);
	ops_free(ro, nro);
	ops_free(fg, nfg);
	ops_free(tk, ntk);
	round_end(r);
}

/* The round's records are durable (ok) or not: creates and deletes go. */
static void plan_written(void *arg, int ok, const char *msg)
{
	struct acround *r = arg;
	struct pmirror *pm = r->pa->pm;
	struct kconn *c;
	size_t nfresh = 0;

	if (pm == NULL) {
		round_free(r);
		return;
	}
	if (!ok) {
		for (size_t i = 0; i < r->ncr; i++)
			if (r->cr[i].fresh) {
				r->cr[i].fresh = 0;
				r->cr[i].err = -2;
				nfresh++;
			}
		log_warnx("mirror %s: this round's ACL records were not written "
		    "(%s): %zu binding(s) not created, the rest retried next "
		    "round", pm->name, msg, nfresh);
	}
	/* A topic that stopped while the records were written is the
	 * destination's own now: nothing of the sync reaches it. */
	for (size_t i = 0; pm->m != NULL && i < r->ncr; i++)
		if (!op_unsent(&r->cr[i]) && !still_wanted(pm, &r->cr[i]))
			r->cr[i].err = -3;
	for (size_t i = 0; pm->m != NULL && i < r->ndl; i++)
		if (r->dl[i].kind == MACL_SYNC && !in_scope(pm, &r->dl[i].b))
			r->dl[i].err = -3;
	if ((r->ncr == 0 && r->ndl == 0) ||
	    (c = pcluster_ctl(pm->pl->dst)) == NULL) {
		round_end(r);
		return;
	}
	if (r->ncr > 0) {
		struct kp_create_acls_request req;
		struct kp_create_acls_request_acl_creation *cr;
		char err[256] = "out of memory";
		int rc = -1;

		/* none recorded (creations_n 0): nothing to send */
		if ((cr = create_req(r->cr, r->ncr, &req)) != NULL)
			rc = req.creations_n == 0 ? 0 : round_send(r, c, 1,
			    KP_API_CREATE_ACLS, &req, create_response, err,
			    sizeof(err));
		if (rc > 0)
			problem(r, 0, (int16_t)rc, "%s", err);
		if (rc != 0)
			ops_failed(r->cr, r->ncr, NULL);
		free(cr);
	}
	if (r->ndl > 0) {
		struct kp_delete_acls_request req;
		struct kp_delete_acls_request_delete_acls_filter *f;
		char err[256] = "out of memory";

		if ((f = delete_req(r->dl, r->ndl, &req)) == NULL ||
		    (req.filters_n > 0 && round_send(r, c, 1,
		    KP_API_DELETE_ACLS, &req, delete_response, err,
		    sizeof(err)) != 0)) {
			problem(r, 0, 0, "DeleteAcls: %s", err);
			ops_failed(r->dl, r->ndl, NULL);
		}
		free(f);
	}
	if (r->pending > 0)
		return;
	round_finish(r);
}

/* The round ends without creating or deleting anything. */
static void round_end(struct acround *r)
{
	/* No answer from the destination says nothing new: the warning
	 * stays. */
	if (r->pa->pm != NULL && (r->dst_ok || r->dst_err != 0)) {
		warn_update(r->pa, r->warn);
		quiet_update(r->pa, r->quiet);
	}
	round_free(r);
}

static void finish_written(void *arg, int ok, const char *msg);

static void round_finish(struct acround *r)
{
	struct pacl *pa = r->pa;
	struct pmirror *pm = pa->pm;
	char text[800];
	struct awrite *aw;

	if (pm == NULL) {
		round_free(r);
		return;
	}
	/* The records the round's answers make us forget, in one group (a
	 * failover of a thousand guarded topics lifts a thousand DENYs); one
	 * not written is forgotten next round (its binding is gone). */
	aw = aw_new(pm->pl);
	for (size_t i = 0; i < r->ncr; i++) {
		struct aop *o = &r->cr[i];
		const char *kind = o->kind == MACL_SYNC ? "sync" : "read-only";

		if (o->err == -2)
			continue;
		if (o->err == -3) {
			/* Not created: its fresh record goes. */
			if (o->fresh)
				(void)aw_add(aw, pm->name, o->kind, &o->b, 0);
			log_info("mirror %s: ACL binding %s not created: its topic "
			    "stopped being mirrored", pm->name,
			    abind_text(&o->b, text, sizeof(text)));
			continue;
		}
		if (o->err == 0) {
			log_info("mirror %s: ACL binding %s created on the destination "
			    "(%s)", pm->name, abind_text(&o->b, text, sizeof(text)),
			    o->kind == MACL_SYNC ? "copied from the source" :
			    "the mirrored topic is read-only");
			if (pm->pl->ms != NULL)
				metrics_counter_inc(METRICS_SERIES(MSTD(pm->pl->ms,
				    ACL_BINDINGS_CREATED), pm->name, kind));
			continue;
		}
		/* Not created: a fresh record goes (nothing of ours is there). */
		if (o->err > 0 && o->fresh)
			(void)aw_add(aw, pm->name, o->kind, &o->b, 0);
		if (o->err > 0)
			problem(r, o->kind == MACL_READONLY, o->err, "the destination refuses to create %s "
			    "(CreateAcls: %s%s%s)", abind_text(&o->b, text, sizeof(text)),
			    kerr_name(o->err), o->msg[0] ? ": " : "", o->msg);
		else
			log_warnx("mirror %s: CreateAcls of %s: %s; retried in %" PRId64
			    " ms", pm->name, abind_text(&o->b, text, sizeof(text)),
			    o->msg[0] ? o->msg : "not sent",
			    pm->conf->metadata_refresh_interval_ms);
	}
	for (size_t i = 0; i < r->ndl; i++) {
		struct aop *o = &r->dl[i];
		const char *kind = o->kind == MACL_SYNC ? "sync" : "read-only";

		if (o->err == -3)
			continue; /* out of scope now: forgotten next round */
		if (o->err == 0) {
			log_info("mirror %s: ACL binding %s deleted from the destination "
			    "(%s)", pm->name, abind_text(&o->b, text, sizeof(text)),
			    o->kind == MACL_SYNC ? "gone from the source" :
			    "the topic's read-only guard is lifted");
			(void)aw_add(aw, pm->name, o->kind, &o->b, 0);
			if (pm->pl->ms != NULL)
				metrics_counter_inc(METRICS_SERIES(MSTD(pm->pl->ms,
				    ACL_BINDINGS_DELETED), pm->name, kind));
		} else if (o->err > 0) {
			problem(r, o->kind == MACL_READONLY, o->err, "the destination refuses to delete %s "
			    "(DeleteAcls: %s%s%s)", abind_text(&o->b, text, sizeof(text)),
			    kerr_name(o->err), o->msg[0] ? ": " : "", o->msg);
		} else {
			log_warnx("mirror %s: DeleteAcls of %s: %s; retried in %" PRId64
			    " ms", pm->name, abind_text(&o->b, text, sizeof(text)),
			    o->msg[0] ? o->msg : "no answer",
			    pm->conf->metadata_refresh_interval_ms);
		}
	}
	aw_write(aw, finish_written, r);
}

static void finish_written(void *arg, int ok, const char *msg)
{
	struct acround *r = arg;
	struct pacl *pa = r->pa;

	if (pa->pm != NULL) {
		if (!ok)
			log_warnx("mirror %s: the ACL bindings deleted this round "
			    "are forgotten next round: %s", pa->pm->name, msg);
		warn_update(pa, r->warn);
		quiet_update(pa, r->quiet);
	}
	round_free(r);
}

/* ---- the round ---------------------------------------------------------------- */

/* 1 when a recorded read-only binding of pm's names a topic no longer
 * mirrored (a stop or failover): the guard goes now, not next interval. */
static int guard_to_lift(const struct pmirror *pm)
{
	const struct mstate *st = pm->pl->st;

	if (!pm->conf->topic_read_only)
		return 0;
	for (size_t i = 0; i < mstate_acl_count(st); i++) {
		const struct macl *a = mstate_acl_get(st, i);
		struct abind b;
		int lift;

		if (a->kind != MACL_READONLY || strcmp(a->mirror, pm->name) != 0 ||
		    abind_parse(a->binding, &b) != 0)
			continue;
		lift = !is_guarded(pm->m, b.name);
		abind_fini(&b);
		if (lift)
			return 1;
	}
	return 0;
}

void pacl_tick(struct pmirror *pm, int64_t now)
{
	struct pacl *pa = pm->acl;
	struct acround *r;
	int lift, want_src;

	if (pm->m == NULL || pm->conf == NULL || pm->pl->draining ||
	    pm->pl->dst == NULL)
		return;
	if (pa == NULL) {
		if ((pa = calloc(1, sizeof(*pa))) == NULL)
			return;
		pa->pm = pm;
		pa->refs = 1;
		pa->next_at = now;
		pm->acl = pa;
	}
	if (pa->round != NULL)
		return;
	lift = now < pa->next_at; /* between rounds: a guard to lift */
	if (lift) {
		if (now < pa->check_at)
			return;
		pa->check_at = now + AC_CHECK_MS;
		if (!guard_to_lift(pm))
			return;
	}
	if (!pm->conf->acls_sync && !pm->conf->topic_read_only) {
		int any = 0;

		for (size_t i = 0; i < mstate_acl_count(pm->pl->st) && !any; i++)
			any = strcmp(mstate_acl_get(pm->pl->st, i)->mirror, pm->name) == 0;
		if (!any) {
			warn_update(pa, "");
			quiet_update(pa, "");
			pa->next_at = now + pm->conf->metadata_refresh_interval_ms;
			return;
		}
	}
	if (pcluster_ctl(pm->pl->dst) == NULL)
		return; /* connecting: a later tick */
	/*
	 * The source is asked in a round of the interval while it can be
	 * read.  Lifting a stopped topic's guard never waits for it: a
	 * failover is when the source is likely down (the health module says
	 * so, pmirror.down_since) or frozen; the sync's bindings then stay as
	 * they are until the source answers.
	 */
	want_src = pm->conf->acls_sync && !lift && pm->src != NULL &&
	    pm->down_since == 0;
	if (want_src && pcluster_ctl(pm->src) == NULL) {
		if (!guard_to_lift(pm))
			return; /* connecting: a later tick */
		want_src = 0;
		lift = 1;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return;
	r->pa = pa;
	pa->refs++;
	pa->round = r;
	if (!lift)
		pa->next_at = now + pm->conf->metadata_refresh_interval_ms;
	pa->check_at = now + AC_CHECK_MS;
	r->want_src = want_src;
	if (send_describe(r, pm->pl->dst, 1) != 0) {
		round_free(r);
		return;
	}
	if (r->want_src)
		(void)send_describe(r, pm->src, 0);
}

/* ---- bindings of deleted mirrors ------------------------------------------------ */

struct paclorph {
	struct pipeline *pl;         /* NULL once the pipeline is gone */
	int refs;
	int inflight;                /* DeleteAcls, then its records */
	int fg_inflight;             /* the SYNC records being forgotten */
	int16_t version;
	int16_t refused;             /* the last refusal said, 0 none */
	int64_t next_at;
	struct aop *dl;
	size_t ndl;
	char **mirror;               /* per dl entry */
};

static void orph_unref(struct paclorph *o)
{
	if (--o->refs > 0)
		return;
	free(o);
}

static void orph_clear(struct paclorph *o)
{
	ops_free(o->dl, o->ndl);
	for (size_t i = 0; i < o->ndl; i++)
		free(o->mirror[i]);
	free(o->mirror);
	o->dl = NULL;
	o->mirror = NULL;
	o->ndl = 0;
}

static void orph_written(void *arg, int ok, const char *msg);

static void orph_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct paclorph *o = arg;
	struct kp_delete_acls_response resp;
	struct karena *a = NULL;
	char text[800];
	struct awrite *aw;

	if (o->pl == NULL)
		goto out;
	if (err != KCONN_E_OK) {
		log_warnx("DeleteAcls of deleted mirrors' read-only bindings: %s; "
		    "retried", errstr);
		o->next_at = clock_mono_ms() + AC_ORPHAN_RETRY_MS;
		goto out;
	}
	if (acl_decode(c, KP_API_DELETE_ACLS, o->version, body, 4u << 20,
	    &resp, &a, "(deleted)", "destination") != 0)
		goto out;
	/* Forgotten in one group, as a round's (round_finish()). */
	aw = aw_new(o->pl);
	for (size_t i = 0; i < o->ndl && (int32_t)i < resp.filter_results_n; i++) {
		int16_t e = resp.filter_results[i].error_code;

		if (e != 0) {
			/* Said once per error; retried less often. */
			if (e != o->refused)
				log_warnx("mirror %s (deleted): the destination refuses to "
				    "delete %s (DeleteAcls: %s); retried every %d s",
				    o->mirror[i], abind_text(&o->dl[i].b, text, sizeof(text)),
				    kerr_name(e), AC_ORPHAN_RETRY_MS / 1000);
			o->refused = e;
			o->next_at = clock_mono_ms() + AC_ORPHAN_RETRY_MS;
			continue;
		}
		o->refused = 0;
		log_info("mirror %s (deleted): ACL binding %s deleted from the "
		    "destination (the mirror's read-only guard is lifted)",
		    o->mirror[i], abind_text(&o->dl[i].b, text, sizeof(text)));
		(void)aw_add(aw, o->mirror[i], MACL_READONLY, &o->dl[i].b, 0);
	}
	karena_free(a);
	aw_write(aw, orph_written, o);
	return;
out:
	karena_free(a);
	o->inflight = 0;
	if (o->pl != NULL)
		orph_clear(o);
	orph_unref(o);
}

/* The records of the bindings DeleteAcls removed (orph_response()). */
static void orph_written(void *arg, int ok, const char *msg)
{
	struct paclorph *o = arg;

	o->inflight = 0;
	if (o->pl != NULL) {
		if (!ok)
			log_warnx("the deleted mirrors' ACL bindings deleted now are "
			    "forgotten at the next try: %s", msg);
		orph_clear(o);
	}
	orph_unref(o);
}

/* The SYNC records of deleted mirrors (pacl_orphans_tick()). */
static void orph_fg_written(void *arg, int ok, const char *msg)
{
	struct paclorph *o = arg;

	o->fg_inflight = 0;
	if (o->pl != NULL && !ok)
		log_warnx("the deleted mirrors' synced ACL bindings are "
		    "forgotten at the next try: %s", msg);
	orph_unref(o);
}

void pacl_orphans_tick(struct pipeline *pl, int64_t now)
{
	struct paclorph *o = pl->acl_orph;
	struct kp_delete_acls_request req;
	struct kp_delete_acls_request_delete_acls_filter *f;
	struct awrite *fg;
	char err[256];
	struct kconn *c;
	int rc;

	if (pl->draining || pl->dst == NULL)
		return;
	if (o == NULL) {
		if ((o = calloc(1, sizeof(*o))) == NULL)
			return;
		o->pl = pl;
		o->refs = 1;
		pl->acl_orph = o;
	}
	if (o->inflight || now < o->next_at)
		return;
	o->next_at = now + AC_CHECK_MS;
	fg = aw_new(pl);
	for (size_t i = 0; i < mstate_acl_count(pl->st); i++) {
		const struct macl *a = mstate_acl_get(pl->st, i);
		struct abind b;

		if (mstate_mirror_find(pl->st, a->mirror) != NULL ||
		    abind_parse(a->binding, &b) != 0)
			continue;
		if (a->kind == MACL_SYNC) {
			/* The copies stay: they are the destination's own now;
			 * forgotten after the walk, in one group. */
			if (!o->fg_inflight)
				(void)aw_add(fg, a->mirror, MACL_SYNC, &b, 0);
		} else if (o->ndl < 1000) {
			char **mv = realloc(o->mirror, (o->ndl + 1) * sizeof(*mv));

			if (mv != NULL) {
				o->mirror = mv;
				if ((mv[o->ndl] = strdup(a->mirror)) != NULL &&
				    op_add(&o->dl, &o->ndl, &b, MACL_READONLY) != 0)
					free(mv[o->ndl]);
			}
		}
		abind_fini(&b);
	}
	if (fg->n > 0) {
		o->fg_inflight = 1;
		o->refs++;
		aw_write(fg, orph_fg_written, o);
	} else {
		aw_free(fg);
	}
	if (o->ndl == 0)
		return;
	if ((c = pcluster_ctl(pl->dst)) == NULL) {
		orph_clear(o);
		return;
	}
	o->refs++;
	o->inflight = 1;
	if ((f = delete_req(o->dl, o->ndl, &req)) == NULL)
		snprintf(err, sizeof(err), "out of memory");
	rc = f == NULL ? -1 : acl_send(pl, c, 1, KP_API_DELETE_ACLS, &req,
	    orph_response, o, &o->version, err, sizeof(err));
	free(f);
	if (rc != 0) {
		log_warnx("DeleteAcls of deleted mirrors' read-only bindings: %s", err);
		o->inflight = 0;
		o->refs--;
		orph_clear(o);
	}
}

void pacl_orphans_free(struct pipeline *pl)
{
	struct paclorph *o = pl->acl_orph;

	if (o == NULL)
		return;
	pl->acl_orph = NULL;
	orph_clear(o);
	o->pl = NULL;
	orph_unref(o);
}
