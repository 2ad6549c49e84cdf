/*
 * pipeline/topic.c: creating a missing destination topic during PREPARING.
 *
 * When the destination's Metadata says a mirrored topic does not exist and
 * the destination serves CreateTopics, mirrord creates it with the
 * source's partition count, destination.replication_factor, and the
 * source's topic-level configs (DescribeConfigs, entries whose source is
 * DYNAMIC_TOPIC_CONFIG) minus mirror.topic.properties.exclude.  A broker
 * that lacks DescribeConfigs gets the topic without configs; one that
 * lacks CreateTopics (the librdkafka mock) fails the partition with a
 * message saying to create the topic.
 *
 * One creation per (mirror, topic) is in flight; the partitions of the
 * topic wait for it.  Requests: DescribeConfigs v1-v3 and CreateTopics
 * v2-v4, non-flexible, encoded here.
 *
 * And deleting one for the operator's realign (ptopic_delete(), driven by
 * pipeline/ident.c): DeleteTopics v6 (flexible) naming the topic by id only,
 * so that a topic created under the name meanwhile is never deleted.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "mirrorconf.h"
#include "pipe_int.h"

#define API_CREATE_TOPICS 19
#define API_DELETE_TOPICS 20
#define API_CREATE_PARTITIONS 37
#define API_DESCRIBE_CONFIGS 32
#define CONFIG_SOURCE_DYNAMIC_TOPIC 1
#define MAX_TOPIC_CONFIGS 512

enum { TC_DESCRIBING = 1, TC_CREATING, TC_DONE, TC_FAILED };

struct ptcreate {
	struct pmirror *pm;
	char *topic;
	int32_t npart;
	int state;
	char msg[512];
	size_t nconf;
	char **names, **values;
	int grow;       /* CreatePartitions of an existing topic */
	int dead;       /* the mirror went away while a request was out */
	int refs;
};

/* A deletion for the operator's realign (ptopic_delete()). */
struct ptdelete {
	struct pmirror *pm;
	char *topic;
	char id[23];        /* the id asked about last */
	char gone[23];      /* the last id the destination said is gone, "" */
	int inflight;
	int64_t retry_at;   /* mono ms: after a failure, not before */
	char msg[512];      /* the failure, "" none */
	int dead;           /* forgotten while a request was out */
	int refs;
};

static void tc_free(struct ptcreate *tc)
{
	for (size_t i = 0; i < tc->nconf; i++) {
		free(tc->names[i]);
		free(tc->values[i]);
	}
	free(tc->names);
	free(tc->values);
	free(tc->topic);
	free(tc);
}

static void tc_unref(struct ptcreate *tc)
{
	if (--tc->refs == 0 && tc->dead)
		tc_free(tc);
}

static struct ptcreate *tc_find(struct pmirror *pm, const char *topic)
{
	for (size_t i = 0; i < pm->ncreates; i++)
		if (strcmp(pm->creates[i]->topic, topic) == 0)
			return pm->creates[i];
	return NULL;
}

static void tc_remove(struct pmirror *pm, struct ptcreate *tc)
{
	for (size_t i = 0; i < pm->ncreates; i++)
		if (pm->creates[i] == tc) {
			pm->creates[i] = pm->creates[--pm->ncreates];
			break;
		}
	tc->dead = 1;
	if (tc->refs == 0)
		tc_free(tc);
}

static void td_unref(struct ptdelete *td);

static void td_remove(struct pmirror *pm, struct ptdelete *td);

void ptopic_forget(struct pmirror *pm, const char *topic)
{
	struct ptcreate *tc = tc_find(pm, topic);

	if (tc != NULL)
		tc_remove(pm, tc);
	for (size_t i = 0; i < pm->ndeletes; i++)
		if (strcmp(pm->deletes[i]->topic, topic) == 0) {
			td_remove(pm, pm->deletes[i]);
			break;
		}
}

void ptopic_forget_all(struct pmirror *pm)
{
	while (pm->ncreates > 0)
		tc_remove(pm, pm->creates[0]);
	free(pm->creates);
	pm->creates = NULL;
	while (pm->ndeletes > 0)
		td_remove(pm, pm->deletes[0]);
	free(pm->deletes);
	pm->deletes = NULL;
}

/* ---- CreateTopics ------------------------------------------------------------ */

static int create_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct ptcreate *tc = msg;
	const struct config *cfg = tc->pm->pl->cfg;
	size_t nb = tc->pm->pl->dst->nbrokers;

	kw_array(w, 1);
	kw_str(w, kstr_c(tc->topic));
	kw_i32(w, tc->npart);
	/* v4+: the broker's default.replication.factor; older: up to 3. */
	kw_i16(w, version >= 4 ? -1 : (int16_t)MAX(1, MIN(3, nb)));
	kw_array(w, 0); /* assignments */
	kw_array(w, (int32_t)tc->nconf);
	for (size_t i = 0; i < tc->nconf; i++) {
		kw_str(w, kstr_c(tc->names[i]));
		kw_str(w, kstr_c(tc->values[i]));
	}
	kw_i32(w, (int32_t)MIN(cfg->pipeline_request_timeout_ms, INT32_MAX));
	kw_bool(w, 0); /* validate only */
	(void)version;
	return w->err ? -1 : 0;
}

/*
 * The error code that a CreateTopics or CreatePartitions answer (api; both
 * are [name error_code error_message] after the throttle time) gives
 * tc->topic, its message in *em; -1 with tc FAILED and its reason when the
 * request failed or the answer does not parse or lacks the topic (the
 * connection is then closed).
 */
static int topic_answer(struct ptcreate *tc, const char *api, struct kconn *c,
    int err, const char *errstr, struct kr *body, struct kstr *em)
{
	char why[64];
	int16_t e = -1;
	int32_t n;

	*em = KSTR_NULL;
	if (err != KCONN_E_OK) {
		snprintf(tc->msg, sizeof(tc->msg), "%s %s on the destination: %s",
		    api, tc->topic, errstr);
		tc->state = TC_FAILED;
		return -1;
	}
	(void)kr_i32(body); /* throttle */
	n = kr_array(body);
	for (int32_t i = 0; i < n && !body->err; i++) {
		struct kstr name = kr_str(body);
		int16_t ec = kr_i16(body);
		struct kstr msg = kr_str(body);

		if (kstr_eq(name, tc->topic)) {
			e = ec;
			*em = msg;
		}
	}
	if (body->err || e == -1) {
		snprintf(why, sizeof(why), "malformed %s response", api);
		kconn_close(c, KCONN_E_PROTOCOL, why);
		snprintf(tc->msg, sizeof(tc->msg), "%s %s: the answer does not "
		    "parse or lacks the topic", api, tc->topic);
		tc->state = TC_FAILED;
		return -1;
	}
	return e;
}

static void create_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct ptcreate *tc = arg;
	struct pcluster *dst;
	int e;
	struct kstr em;

	if (tc->dead || tc->pm->pl->dst == NULL || tc->pm->pl->dst->dying)
		goto out;
	dst = tc->pm->pl->dst;
	e = topic_answer(tc, "CreateTopics", c, err, errstr, body, &em);
	if (e < 0)
		goto out;
	if (e == 0 || e == 36 /* TOPIC_ALREADY_EXISTS */) {
		log_info("mirror %s: %s destination topic %s (%" PRId32 " partitions, "
		    "%zu configs copied)", tc->pm->name, e == 0 ? "created" : "found",
		    tc->topic, tc->npart, tc->nconf);
		tc->state = TC_DONE;
		pcluster_want_metadata(dst);
	} else {
		snprintf(tc->msg, sizeof(tc->msg), "CreateTopics %s on the destination: "
		    "%s%s%.*s", tc->topic, kerr_name(e), em.len > 0 ? ": " : "",
		    em.len > 0 ? (int)MIN(em.len, 300) : 0, em.len > 0 ? em.p : "");
		tc->state = TC_FAILED;
	}
out:
	if (!tc->dead)
		pl_kick(tc->pm->pl); /* a no-op once the pipeline is being freed */
	tc_unref(tc);
}

static void send_create(struct ptcreate *tc)
{
	struct pcluster *dst = tc->pm->pl->dst;
	struct kconn *c = pcluster_ctl(dst);
	char err[256];
	int v;

	if (c == NULL) {
		snprintf(tc->msg, sizeof(tc->msg), "no connection to the destination to "
		    "create topic %s", tc->topic);
		tc->state = TC_FAILED;
		return;
	}
	v = kconn_pick_version(c, API_CREATE_TOPICS, 2, 4);
	if (v < 0) {
		snprintf(tc->msg, sizeof(tc->msg), "destination topic %s does not exist "
		    "and the destination supports no CreateTopics version mirrord "
		    "speaks (v2-v4): create it with %" PRId32 " partitions", tc->topic,
		    tc->npart);
		tc->state = TC_FAILED;
		return;
	}
	tc->state = TC_CREATING;
	tc->refs++;
	if (kconn_send(c, API_CREATE_TOPICS, (int16_t)v, create_encode, tc, 0, 0,
	    create_response, tc, err, sizeof(err)) != 0) {
		tc->refs--;
		snprintf(tc->msg, sizeof(tc->msg), "CreateTopics %s: %s", tc->topic, err);
		tc->state = TC_FAILED;
	}
}

/* ---- CreatePartitions ---------------------------------------------------------- */

static int grow_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct ptcreate *tc = msg;

	kw_array(w, 1);
	kw_str(w, kstr_c(tc->topic));
	kw_i32(w, tc->npart);
	kw_array(w, -1); /* assignments: the broker's choice */
	kw_i32(w, (int32_t)MIN(tc->pm->pl->cfg->pipeline_request_timeout_ms, INT32_MAX));
	kw_bool(w, 0);
	(void)version;
	return w->err ? -1 : 0;
}

static void grow_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct ptcreate *tc = arg;
	int e;
	struct kstr em;

	if (tc->dead || tc->pm->pl->dst == NULL || tc->pm->pl->dst->dying)
		goto out;
	e = topic_answer(tc, "CreatePartitions", c, err, errstr, body, &em);
	if (e < 0)
		goto out;
	/* INVALID_PARTITIONS (37) when someone grew it already to this count. */
	if (e == 0 || e == 37) {
		log_info("mirror %s: destination topic %s grown to %" PRId32
		    " partitions", tc->pm->name, tc->topic, tc->npart);
		tc->state = TC_DONE;
		pcluster_want_metadata(tc->pm->pl->dst);
	} else {
		snprintf(tc->msg, sizeof(tc->msg), "CreatePartitions %s to %" PRId32
		    " on the destination: %s%s%.*s", tc->topic, tc->npart, kerr_name(e),
		    em.len > 0 ? ": " : "", em.len > 0 ? (int)MIN(em.len, 300) : 0,
		    em.len > 0 ? em.p : "");
		tc->state = TC_FAILED;
	}
out:
	if (!tc->dead)
		pl_kick(tc->pm->pl); /* a no-op once the pipeline is being freed */
	tc_unref(tc);
}

/*
 * A PREPARING partition whose index the destination topic lacks (the
 * source grew).  Same answers as ptopic_ensure().
 */
int ptopic_grow(struct ppart *p, int32_t have, char *msg, size_t msglen)
{
	struct pmirror *pm = p->pm;
	struct ptcreate *tc = tc_find(pm, p->topic), **arr;
	const struct kcluster_topic *t;
	struct kconn *c;
	char err[256];
	int v;

	if (tc != NULL) {
		switch (tc->state) {
		case TC_DONE:
			t = pcluster_topic(pm->pl->dst, p->topic);
			if (t != NULL && t->error == 0 && p->index < t->npart)
				return 1;
			if (tc->grow || t == NULL || t->error != 0) {
				/* Wait for the Metadata that shows it (ask). */
				pcluster_want_metadata(pm->pl->dst);
				return 0;
			}
			tc_remove(pm, tc); /* created earlier, now it must grow */
			break;
		case TC_FAILED:
			snprintf(msg, msglen, "%s", tc->msg);
			tc_remove(pm, tc);
			return -1;
		default:
			return 0;
		}
	}
	if ((c = pcluster_ctl(pm->pl->dst)) == NULL)
		return 0;
	v = kconn_pick_version(c, API_CREATE_PARTITIONS, 0, 1);
	if (v < 0) {
		snprintf(msg, msglen, "destination topic %s has %" PRId32 " partitions, "
		    "the source has %" PRId32 ": add partitions to it (this destination "
		    "does not let mirrord)", p->topic, have, p->mp->topic->npart);
		return -1;
	}
	tc = calloc(1, sizeof(*tc));
	arr = realloc(pm->creates, (pm->ncreates + 1) * sizeof(*arr));
	if (arr != NULL)
		pm->creates = arr;
	if (tc == NULL || arr == NULL || (tc->topic = strdup(p->topic)) == NULL) {
		free(tc);
		snprintf(msg, msglen, "out of memory growing destination topic %s", p->topic);
		return -1;
	}
	tc->pm = pm;
	tc->grow = 1;
	tc->npart = p->mp->topic->npart;
	tc->state = TC_CREATING;
	pm->creates[pm->ncreates++] = tc;
	tc->refs++;
	if (kconn_send(c, API_CREATE_PARTITIONS, (int16_t)v, grow_encode, tc, 0, 0,
	    grow_response, tc, err, sizeof(err)) != 0) {
		tc->refs--;
		snprintf(tc->msg, sizeof(tc->msg), "CreatePartitions %s: %s", tc->topic, err);
		tc->state = TC_FAILED;
	}
	return 0;
}

/* ---- DescribeConfigs (source) -------------------------------------------------- */

static int describe_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct ptcreate *tc = msg;

	kw_array(w, 1);
	kw_i8(w, 2); /* TOPIC */
	kw_str(w, kstr_c(tc->topic));
	kw_array(w, -1); /* every key */
	kw_bool(w, 0);   /* synonyms */
	if (version >= 3)
		kw_bool(w, 0); /* documentation */
	return w->err ? -1 : 0;
}

static int add_conf(struct ptcreate *tc, struct kstr name, struct kstr value)
{
	char **nn, **nv;

	if (tc->nconf == MAX_TOPIC_CONFIGS)
		return -1;
	nn = realloc(tc->names, (tc->nconf + 1) * sizeof(*nn));
	if (nn != NULL)
		tc->names = nn;
	nv = realloc(tc->values, (tc->nconf + 1) * sizeof(*nv));
	if (nv != NULL)
		tc->values = nv;
	if (nn == NULL || nv == NULL)
		return -1;
	tc->names[tc->nconf] = kstr_dup(name);
	tc->values[tc->nconf] = kstr_dup(value);
	if (tc->names[tc->nconf] == NULL || tc->values[tc->nconf] == NULL) {
		free(tc->names[tc->nconf]);
		free(tc->values[tc->nconf]);
		return -1;
	}
	tc->nconf++;
	return 0;
}

static void describe_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct ptcreate *tc = arg;
	int16_t version;
	int32_t n;

	/* Shutting down, or the mirror is going: nothing to create. */
	if (tc->dead || tc->pm->dead || tc->pm->src == NULL || tc->pm->src->dying ||
	    tc->pm->pl->dst == NULL || tc->pm->pl->dst->dying)
		goto out;
	if (err != KCONN_E_OK) {
		log_warnx("mirror %s: DescribeConfigs %s on the source: %s; creating "
		    "the destination topic without configs", tc->pm->name, tc->topic, errstr);
		send_create(tc);
		goto out;
	}
	version = (int16_t)kconn_pick_version(c, API_DESCRIBE_CONFIGS, 1, 3);
	(void)kr_i32(body);
	n = kr_array(body);
	for (int32_t i = 0; i < n && !body->err; i++) {
		int16_t ec = kr_i16(body);
		struct kstr em = kr_str(body);
		int32_t nc;

		(void)kr_i8(body);
		(void)kr_str(body);
		if (ec != 0 && !body->err) {
			log_warnx("mirror %s: DescribeConfigs %s on the source: %s %.*s; "
			    "creating the destination topic without configs", tc->pm->name,
			    tc->topic, kerr_name(ec), em.len > 0 ? (int)MIN(em.len, 200) : 0,
			    em.len > 0 ? em.p : "");
		}
		nc = kr_array(body);
		for (int32_t k = 0; k < nc && !body->err; k++) {
			struct kstr name = kr_str(body), value = kr_str(body);
			int8_t source;
			int sensitive;
			int32_t ns;

			(void)kr_bool(body); /* read only */
			source = kr_i8(body);
			sensitive = kr_bool(body);
			ns = kr_array(body);
			for (int32_t j = 0; j < ns && !body->err; j++) {
				(void)kr_str(body);
				(void)kr_str(body);
				(void)kr_i8(body);
			}
			if (version >= 3) {
				(void)kr_i8(body);
				(void)kr_str(body);
			}
			if (body->err || ec != 0 || source != CONFIG_SOURCE_DYNAMIC_TOPIC ||
			    sensitive || name.len <= 0 || value.len < 0)
				continue;
			{
				char nbuf[256];

				if ((size_t)name.len >= sizeof(nbuf))
					continue;
				memcpy(nbuf, name.p, (size_t)name.len);
				nbuf[name.len] = '\0';
				if (tc->pm->conf != NULL &&
				    mirrorconf_topic_property_excluded(tc->pm->conf, nbuf))
					continue;
			}
			if (add_conf(tc, name, value) < 0)
				break;
		}
	}
	if (body->err) {
		log_warnx("mirror %s: DescribeConfigs response for %s does not parse "
		    "at byte %zu: %s", tc->pm->name, tc->topic, body->err_off, body->why);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed DescribeConfigs response");
	}
	send_create(tc);
out:
	if (!tc->dead)
		pl_kick(tc->pm->pl); /* a no-op once the pipeline is being freed */
	tc_unref(tc);
}

/*
 * Called by a PREPARING partition whose destination topic is missing.
 * Returns 1 when the topic now exists (go on), 0 to wait, -1 when the
 * partition must fail (msg says why).
 */
int ptopic_ensure(struct ppart *p, char *msg, size_t msglen)
{
	struct pmirror *pm = p->pm;
	struct ptcreate *tc = tc_find(pm, p->topic), **arr;
	const struct kcluster_topic *t;
	struct kconn *sc;
	char err[256];
	int v;

	if (tc != NULL) {
		switch (tc->state) {
		case TC_DONE:
			/*
			 * Wait for the metadata that shows it.  A broker may
			 * answer the first Metadata after CreateTopics without
			 * the topic or with LEADER_NOT_AVAILABLE: ask again
			 * (paced by the retry backoff) rather than wait for
			 * the periodic refresh.
			 */
			t = pcluster_topic(pm->pl->dst, p->topic);
			if (t != NULL && t->error == 0)
				return 1;
			pcluster_want_metadata(pm->pl->dst);
			return 0;
		case TC_FAILED:
			snprintf(msg, msglen, "%s", tc->msg);
			tc_remove(pm, tc); /* the next retry tries again */
			return -1;
		default:
			return 0;
		}
	}
	if (pcluster_ctl(pm->pl->dst) == NULL ||
	    (pm->src != NULL && pcluster_ctl(pm->src) == NULL))
		return 0; /* connecting */
	if (kconn_pick_version(pcluster_ctl(pm->pl->dst), API_CREATE_TOPICS, 2, 4) < 0) {
		snprintf(msg, msglen, "destination topic %s does not exist: create it with "
		    "%" PRId32 " partitions (this destination does not let mirrord create "
		    "topics)", p->topic, p->mp->topic->npart);
		return -1;
	}
	tc = calloc(1, sizeof(*tc));
	arr = realloc(pm->creates, (pm->ncreates + 1) * sizeof(*arr));
	if (arr != NULL)
		pm->creates = arr;
	if (tc == NULL || arr == NULL || (tc->topic = strdup(p->topic)) == NULL) {
		free(tc);
		snprintf(msg, msglen, "out of memory creating destination topic %s", p->topic);
		return -1;
	}
	tc->pm = pm;
	tc->npart = p->mp->topic->npart;
	pm->creates[pm->ncreates++] = tc;
	sc = pm->src != NULL ? pcluster_ctl(pm->src) : NULL;
	v = sc ? kconn_pick_version(sc, API_DESCRIBE_CONFIGS, 1, 3) : -1;
	if (v < 0) {
		if (sc != NULL)
			log_info("mirror %s: the source has no DescribeConfigs v1-v3: "
			    "creating %s without configs", pm->name, p->topic);
		send_create(tc);
		return 0;
	}
	tc->state = TC_DESCRIBING;
	tc->refs++;
	if (kconn_send(sc, API_DESCRIBE_CONFIGS, (int16_t)v, describe_encode, tc, 0, 0,
	    describe_response, tc, err, sizeof(err)) != 0) {
		tc->refs--;
		send_create(tc);
	}
	return 0;
}

/* ---- DeleteTopics (realign) --------------------------------------------------- */

static void td_unref(struct ptdelete *td)
{
	if (--td->refs == 0 && td->dead) {
		free(td->topic);
		free(td);
	}
}

static void td_remove(struct pmirror *pm, struct ptdelete *td)
{
	for (size_t i = 0; i < pm->ndeletes; i++)
		if (pm->deletes[i] == td) {
			pm->deletes[i] = pm->deletes[--pm->ndeletes];
			break;
		}
	td->dead = 1;
	td_unref(td);   /* pm->deletes' reference; a request's stays */
}

static int delete_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct ptdelete *td = msg;
	const struct config *cfg = td->pm->pl->cfg;
	struct kuuid u;

	if (pident_id_parse(td->id, &u) != 0) {
		kw_fail(w, "not a topic id");
		return -1;
	}
	kw_carray(w, 1);
	kw_cstr(w, KSTR_NULL);       /* Name: by id only */
	kw_uuid(w, &u);
	kw_tags_empty(w);
	kw_i32(w, (int32_t)MIN(cfg->pipeline_request_timeout_ms, INT32_MAX));
	kw_tags_empty(w);
	(void)version;
	return w->err ? -1 : 0;
}

static void delete_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct ptdelete *td = arg;
	struct pipeline *pl = NULL;
	struct kuuid want, got;
	int16_t e = -1;
	struct kstr em = KSTR_NULL;
	int32_t n;

	td->inflight = 0;
	/* Forgotten (its mirror may be gone with pm): only the struct. */
	if (td->dead)
		goto out;
	pl = td->pm->pl;
	if (pl->dst == NULL || pl->dst->dying)
		goto out;
	if (err != KCONN_E_OK) {
		snprintf(td->msg, sizeof(td->msg), "DeleteTopics of destination "
		    "topic %s (topic id %s): %s", td->topic, td->id, errstr);
		goto failed;
	}
	(void)pident_id_parse(td->id, &want);
	(void)kr_i32(body); /* throttle */
	n = kr_carray(body);
	for (int32_t i = 0; i < n && !body->err; i++) {
		struct kstr msg;
		int16_t ec;

		(void)kr_cstr(body);   /* Name */
		kr_uuid(body, &got);
		ec = kr_i16(body);
		msg = kr_cstr(body);
		kr_skip_tagged(body);
		if (!body->err && memcmp(got.b, want.b, sizeof(got.b)) == 0) {
			e = ec;
			em = msg;
		}
	}
	if (body->err || e == -1) {
		kconn_close(c, KCONN_E_PROTOCOL, "malformed DeleteTopics response");
		snprintf(td->msg, sizeof(td->msg), "DeleteTopics of destination "
		    "topic %s (topic id %s): the answer does not parse or lacks "
		    "the topic", td->topic, td->id);
		goto failed;
	}
	if (e == 0 || e == KERR_UNKNOWN_TOPIC_ID ||
	    e == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		log_info("mirror %s: %s destination topic %s (topic id %s) for the "
		    "operator's realign", td->pm->name, e == 0 ? "deleted" :
		    "no longer finds", td->topic, td->id);
		memcpy(td->gone, td->id, sizeof(td->gone));
		td->msg[0] = '\0';
		pcluster_want_metadata(pl->dst);
		goto out;
	}
	snprintf(td->msg, sizeof(td->msg), "DeleteTopics of destination topic %s "
	    "(topic id %s) answered %s%s%.*s%s", td->topic, td->id, kerr_name(e),
	    em.len > 0 ? ": " : "", em.len > 0 ? (int)MIN(em.len, 200) : 0,
	    em.len > 0 ? em.p : "", pl_is_denial(e) ? " (mirrord's principal "
	    "needs DELETE on the topic)" : "");
failed:
	log_warnx("mirror %s: %s", td->pm->name, td->msg);
	td->retry_at = clock_mono_ms() + pl_backoff_ms(pl);
out:
	if (pl != NULL && !td->dead)
		pl_kick(pl);
	td_unref(td);
}

int ptopic_delete(struct pmirror *pm, const char *topic, const char *id,
    char *msg, size_t msglen)
{
	struct ptdelete *td = NULL, **arr;
	struct kconn *c;
	char err[256];
	struct kuuid u;
	int v;

	for (size_t i = 0; i < pm->ndeletes; i++)
		if (strcmp(pm->deletes[i]->topic, topic) == 0)
			td = pm->deletes[i];
	if (td != NULL && strcmp(td->gone, id) == 0)
		return 1;
	if (td != NULL && (td->inflight || clock_mono_ms() < td->retry_at))
		return 0;
	if (td != NULL && td->msg[0] != '\0' && strcmp(td->id, id) == 0) {
		/* Reported once; the next call asks again. */
		snprintf(msg, msglen, "%s", td->msg);
		td->msg[0] = '\0';
		return -1;
	}
	if (strlen(id) != 22 || pident_id_parse(id, &u) != 0) {
		snprintf(msg, msglen, "cannot delete destination topic %s: %s is "
		    "not a topic id", topic, id);
		return -1;
	}
	if ((c = pcluster_ctl(pm->pl->dst)) == NULL)
		return 0; /* connecting */
	v = kconn_pick_version(c, API_DELETE_TOPICS, 6, 6);
	if (v < 0) {
		snprintf(msg, msglen, "the destination does not delete topics by id "
		    "(DeleteTopics v6, Kafka 2.8 or later): delete topic %s "
		    "yourself, then --remove and --add it", topic);
		return -1;
	}
	if (td == NULL) {
		td = calloc(1, sizeof(*td));
		arr = realloc(pm->deletes, (pm->ndeletes + 1) * sizeof(*arr));
		if (arr != NULL)
			pm->deletes = arr;
		if (td == NULL || arr == NULL ||
		    (td->topic = strdup(topic)) == NULL) {
			free(td);
			snprintf(msg, msglen, "out of memory deleting destination "
			    "topic %s", topic);
			return -1;
		}
		td->pm = pm;
		td->refs = 1;   /* pm->deletes' */
		pm->deletes[pm->ndeletes++] = td;
	}
	snprintf(td->id, sizeof(td->id), "%s", id);
	td->msg[0] = '\0';
	td->refs++;
	td->inflight = 1;
	if (kconn_send(c, API_DELETE_TOPICS, (int16_t)v, delete_encode, td, 0, 0,
	    delete_response, td, err, sizeof(err)) != 0) {
		td->refs--;
		td->inflight = 0;
		td->retry_at = clock_mono_ms() + pl_backoff_ms(pm->pl);
		snprintf(msg, msglen, "DeleteTopics of destination topic %s (topic "
		    "id %s): %s", topic, id, err);
		return -1;
	}
	log_info("mirror %s: deleting destination topic %s (topic id %s) for the "
	    "operator's realign", pm->name, topic, id);
	return 0;
}
