/*
 * pipeline/ident.c: who the data plane is talking to.  Names are not
 * identities: a topic deleted and recreated under the same name, or
 * bootstrap servers that now lead to another cluster, must not have their
 * records appended after the old ones.
 *
 *   - Topic ids.  Metadata v10+ names each topic's id.  The first id seen
 *     for a mirrored topic, on the source and on the destination, is
 *     recorded in the metadata log (topic-ident records; a log from before
 *     them adopts the id at the next answer).  Every later answer is
 *     compared: another id on either side fails the topic's partitions
 *     (FAILED with no automatic retry) with a reason naming the side, the
 *     topic and both ids.
 *   - The source cluster id recorded on the mirror is compared with the
 *     one the source reports; a mismatch fails the mirror's partitions
 *     naming both.  The destination cluster id a topic was first seen in
 *     is recorded with its destination topic id and compared the same way
 *     (before the topic id, so that the reason names the cluster).
 *   - Absence.  A topic missing from one Metadata answer is not deleted:
 *     an authorization change or a broker that does not know it yet is
 *     enough.  Deletion is confirmed only after PIDENT_ABSENT_ANSWERS
 *     answers in a row over at least pipeline.topic_deletion_confirm_ms.
 *     A source topic deleted goes STOPPING (the KIP's rule) with a note
 *     that DescribeMirrors shows on its STOPPING/STOPPED partitions; a
 *     destination topic deleted fails its partitions.  Partitions of a
 *     topic missing for now keep their state (they wait: a Fetch or
 *     Produce on it fails and is retried).
 *   - Realigning (HACKING.md "Realigning a destination"): a topic added
 *     again keeps the destination id its partitions' write history is of
 *     until an answer names the topic: the same id keeps the history,
 *     another drops it (a reset); the operator's realign deletes the
 *     destination topic by id first (dest_realign()).  pident_start_wait()
 *     holds the partitions until then.
 *
 * The failures of this file (recognised by their reasons,
 * pident_is_identity_failure()) are what the /readyz check "topic and
 * cluster identity" reports.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat.h"
#include "daemonconf.h"
#include "kerr.h"
#include "log.h"
#include "mirrorconf.h"
#include "pipe_int.h"

/* Answers in a row that must miss a topic before it counts as deleted. */
#define PIDENT_ABSENT_ANSWERS 3

#define SIDE_SOURCE 0
#define SIDE_DEST 1

struct pabsent {
	char *topic;
	int side;
	int count;           /* answers in a row without it */
	int64_t since;       /* mono ms of the first of them */
	uint32_t md_gen;     /* the cluster's answer that counted last */
};

/* Kafka's rendering of a topic id: URL-safe base64 without padding. */
static void uuid_str(const struct kuuid *u, char out[23])
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;

	for (size_t i = 0; i < 16; i += 3) {
		uint32_t v = (uint32_t)u->b[i] << 16;
		size_t n = 16 - i >= 3 ? 3 : 16 - i;

		if (n > 1)
			v |= (uint32_t)u->b[i + 1] << 8;
		if (n > 2)
			v |= u->b[i + 2];
		out[o++] = a[(v >> 18) & 63];
		out[o++] = a[(v >> 12) & 63];
		if (n > 1)
			out[o++] = a[(v >> 6) & 63];
		if (n > 2)
			out[o++] = a[v & 63];
	}
	out[o] = '\0';
}

/* uuid_str() backwards (pipe_int.h). */
int pident_id_parse(const char *s, struct kuuid *u)
{
	uint8_t v[22];
	size_t o = 0;

	if (s == NULL || strlen(s) != 22)
		return -1;
	for (size_t i = 0; i < 22; i++) {
		char c = s[i];

		if (c >= 'A' && c <= 'Z')
			v[i] = (uint8_t)(c - 'A');
		else if (c >= 'a' && c <= 'z')
			v[i] = (uint8_t)(c - 'a' + 26);
		else if (c >= '0' && c <= '9')
			v[i] = (uint8_t)(c - '0' + 52);
		else if (c == '-')
			v[i] = 62;
		else if (c == '_')
			v[i] = 63;
		else
			return -1;
	}
	/* 5 groups of 4 characters (3 bytes each), then 2 for the last byte. */
	for (size_t i = 0; i < 20; i += 4) {
		uint32_t w = (uint32_t)v[i] << 18 | (uint32_t)v[i + 1] << 12 |
		    (uint32_t)v[i + 2] << 6 | v[i + 3];

		u->b[o++] = (uint8_t)(w >> 16);
		u->b[o++] = (uint8_t)(w >> 8);
		u->b[o++] = (uint8_t)w;
	}
	if ((v[21] & 15) != 0)
		return -1;
	u->b[o] = (uint8_t)(v[20] << 2 | v[21] >> 4);
	return 0;
}

int pident_dest_id(const struct ppart *p, struct kuuid *id)
{
	const char *s = p->mp != NULL ? p->mp->topic->dst_topic_id : NULL;

	if (s == NULL || pident_id_parse(s, id) != 0 || kuuid_is_zero(id))
		return -1;
	return 0;
}

/* The one wording of a recreation (fail_final() compares reasons). */
static void recreated_why(char *why, size_t len, int side, const char *topic,
    const char *was, const char *now)
{
	if (side == SIDE_SOURCE)
		snprintf(why, len, "source topic %s was deleted and recreated "
		    "(topic id %s -> %s); its records are not appended to the old "
		    "topic's", topic, was, now);
	else
		snprintf(why, len, "destination topic %s was deleted and recreated "
		    "(topic id %s -> %s); mirrord does not write into a topic it "
		    "did not mirror into (kafka-mirrors --recover --resolution "
		    "realign deletes it and copies the topic again)", topic, was,
		    now);
}

static struct pabsent *absent_find(struct pmirror *pm, int side,
    const char *topic)
{
	for (size_t i = 0; i < pm->nabsent; i++)
		if (pm->absent[i].side == side &&
		    strcmp(pm->absent[i].topic, topic) == 0)
			return &pm->absent[i];
	return NULL;
}

static void absent_clear(struct pmirror *pm, int side, const char *topic)
{
	struct pabsent *a = absent_find(pm, side, topic);

	if (a == NULL)
		return;
	if (a->count > 0)
		log_info("mirror %s: %s topic %s is back in the Metadata answers "
		    "(it was missing from %d); not deleted", pm->name,
		    side == SIDE_SOURCE ? "source" : "destination", topic,
		    a->count);
	free(a->topic);
	*a = pm->absent[--pm->nabsent];
}

/* Counts one more answer without the topic.  1 when that confirms the
 * deletion (the entry is then removed, *answers and *secs say what
 * confirmed it), 0 while it does not (or out of memory). */
static int absent_note(struct pmirror *pm, int side, const char *topic,
    int *answers, double *secs)
{
	struct pabsent *a = absent_find(pm, side, topic);
	int64_t now = clock_mono_ms(), need = pm->pl->cfg ?
	    pm->pl->cfg->pipeline_topic_deletion_confirm_ms : 30000;
	struct pcluster *cl = side == SIDE_SOURCE ? pm->src : pm->pl->dst;

	if (a == NULL) {
		struct pabsent *arr = realloc(pm->absent,
		    (pm->nabsent + 1) * sizeof(*arr));
		char *name = strdup(topic);

		if (arr == NULL || name == NULL) {
			if (arr != NULL)
				pm->absent = arr;
			free(name);
			return 0;
		}
		pm->absent = arr;
		a = &arr[pm->nabsent++];
		a->topic = name;
		a->side = side;
		a->count = 0;
		a->since = now;
		a->md_gen = 0;
	}
	/* In a row: an answer in between that did not count (the topic
	 * skipped, or not asked for) starts the count again. */
	if (a->count > 0 && cl != NULL && a->md_gen + 1 != cl->md_gen) {
		a->count = 0;
		a->since = now;
	}
	if (cl != NULL)
		a->md_gen = cl->md_gen;
	a->count++;
	if (a->count >= PIDENT_ABSENT_ANSWERS && now - a->since >= need) {
		*answers = a->count;
		*secs = (double)(now - a->since) / 1000.0;
		free(a->topic);
		*a = pm->absent[--pm->nabsent];
		return 1;
	}
	if (a->count == 1)
		log_warnx("mirror %s: %s topic %s is missing from a Metadata "
		    "answer; it is taken as deleted only if it stays missing "
		    "for %d answers and %" PRId64 " ms "
		    "(pipeline.topic_deletion_confirm_ms)", pm->name,
		    side == SIDE_SOURCE ? "source" : "destination", topic,
		    PIDENT_ABSENT_ANSWERS, need);
	/* The first answers come soon rather than at the periodic refresh;
	 * after them the periodic refresh decides (no Metadata storm while
	 * a topic stays missing). */
	if (cl != NULL && a->count < PIDENT_ABSENT_ANSWERS)
		pcluster_want_metadata(cl);
	return 0;
}

/* The mirror was deleted, possibly in the middle of a follower's metadata
 * write that applied other instances' records (pipe_int.h pl_part_kept()):
 * its model objects are freed, pm itself stays until the next kick. */
static int pm_gone(const struct pmirror *pm)
{
	return pm->dead || pm->m == NULL;
}

static struct ppart *find_ppart(struct pmirror *pm, const struct mpart *mp)
{
	for (size_t i = 0; i < pm->nparts; i++)
		if (pm->parts[i]->mp == mp && !pm->parts[i]->dead)
			return pm->parts[i];
	return NULL;
}

/* The identity failure of p is durable (pl_part_state()'s continuation:
 * p still where it was, its model FAILED with the reason). */
static void failed_then(struct ppart *p)
{
	log_warnx("mirror %s: %s-%d FAILED (no automatic retry): %s",
	    p->pm->name, p->topic, (int)p->index,
	    p->mp->error != NULL ? p->mp->error : "(no reason)");
}

/*
 * FAILED with no automatic retry, unless it already is for this reason or
 * is on its way there.  Written like the data plane's other state changes
 * (pl_part_state(): asynchronous, the partition frozen until the record is
 * durable, so nothing more is fetched or produced for it meanwhile; the
 * queue is dropped first).  A partition without its pipeline record (not
 * set up yet) goes FAILED in the pass's group (PMETA_FAIL).
 */
static void fail_final(struct pmirror *pm, struct mpart *mp, const char *why)
{
	struct ppart *p;
	char msg[512], name[300];

	if (mp->state == MPART_STOPPING || mp->state == MPART_STOPPED)
		return;
	if (!mpart_owned_by(mp, pm->pl->instance))
		return;   /* its owner fails it (multi-instance mode) */
	if (mp->state == MPART_FAILED && mp->retry_attempt == -1 &&
	    mp->error != NULL && strcmp(mp->error, why) == 0)
		return;
	/* A follower's write may delete the mirror (mp with it) before it
	 * is refused: the names are taken first. */
	snprintf(name, sizeof(name), "%s-%d", mp->topic->name, (int)mp->index);
	if ((p = find_ppart(pm, mp)) != NULL) {
		struct pl_state_req rq = { .to = MPART_FAILED, .why = why,
		    .retry = -1, .then = failed_then };
		void (*then)(struct ppart *);
		int r, to = pl_part_heading(p, &then);

		/* Going STOPPING (the model shows it once durable): as
		 * above.  Our final failure on its way: the next answer
		 * compares the reason again once it is durable. */
		if (to == MPART_STOPPING || to == MPART_STOPPED ||
		    (to == MPART_FAILED && then == failed_then))
			return;
		pl_drop_queue(p);
		p->step = PS_IDLE;
		p->retry_at = 0;
		r = pl_part_state(p, &rq, msg, sizeof(msg));
		if (r < 0)
			log_warnx("mirror %s: %s: cannot record the failure "
			    "(%s): %s", pm->name, name, why, msg);
		else if (r == 0)
			log_warnx("mirror %s: %s FAILED (no automatic retry): "
			    "%s", pm->name, name, why);
		return;
	}
	/* Not set up yet: in the pass's group (pipeline/meta.c). */
	pmeta_defer(pm->pl, PMETA_FAIL, pm->name, mp->topic->name, mp->index,
	    why, 0);
}

/* Stops early when a follower's write deleted the mirror (mt is gone). */
static void fail_topic(struct pmirror *pm, struct mtopic *mt, const char *why)
{
	for (int32_t k = 0; k < mt->npart && !pm_gone(pm); k++)
		fail_final(pm, mt->parts[k], why);
}

int pident_source(struct pmirror *pm)
{
	const struct mirror *m = pm->m;
	const char *have = pm->src != NULL ? pm->src->cluster_id : NULL;
	char why[700];

	if (m == NULL || m->source_cluster_id == NULL || have == NULL ||
	    strcmp(m->source_cluster_id, have) == 0)
		return 0;
	snprintf(why, sizeof(why), "source cluster id changed: mirror %s was "
	    "recorded with source cluster %s, its bootstrap servers now answer "
	    "as cluster %s", m->name, m->source_cluster_id, have);
	for (size_t t = 0; !pm_gone(pm) && t < m->ntopics; t++)
		fail_topic(pm, m->topics[t], why);
	return -1;
}

int pident_source_topic(struct pmirror *pm, struct mtopic *mt,
    const struct kcluster_topic *md)
{
	char why[700], id[23], at[40];
	int answers;
	double secs;
	time_t when;
	struct tm tm;

	if (md == NULL || md->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		/* Confirmed already, waiting for its turn in the log: not
		 * counted again. */
		if (pmeta_noted(pm->pl, PMETA_DELETED, pm->name, mt->name, 0))
			return 1;
		if (!absent_note(pm, SIDE_SOURCE, mt->name, &answers, &secs))
			return 1;
		when = (time_t)((clock_wall_ms() - (int64_t)(secs * 1000)) / 1000);
		if (gmtime_r(&when, &tm) == NULL ||
		    strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			snprintf(at, sizeof(at), "?");
		snprintf(why, sizeof(why), "the source topic %s was deleted on "
		    "the source %s: missing from its Metadata since %s (%d answers "
		    "in a row over %.1f s)", mt->name,
		    pm->conf != NULL && pm->conf->bootstrap_servers != NULL ?
		    pm->conf->bootstrap_servers : "?", at, answers, secs);
		log_warnx("mirror %s: %s; its partitions go STOPPING", pm->name,
		    why);
		/* The topic's note and its partitions' STOPPING in one group
		 * at the pass's end (pipeline/meta.c), not on the loop. */
		pmeta_defer(pm->pl, PMETA_DELETED, pm->name, mt->name, 0, why, 0);
		return 1;
	}
	absent_clear(pm, SIDE_SOURCE, mt->name);
	if (md->error != 0 || kuuid_is_zero(&md->id))
		return 0;
	uuid_str(&md->id, id);
	if (mt->src_topic_id == NULL) {
		pmeta_defer(pm->pl, PMETA_IDENT, pm->name, mt->name,
		    MTOPIC_IDENT_SOURCE, id, 0);
		return 0;
	}
	if (strcmp(mt->src_topic_id, id) == 0)
		return 0;
	recreated_why(why, sizeof(why), SIDE_SOURCE, mt->name,
	    mt->src_topic_id, id);
	fail_topic(pm, mt, why);
	return 1;
}

/* The owned partitions of mt that wait for the realign fail (retried
 * automatically: the next try deletes again). */
static void realign_fail(struct pmirror *pm, struct mtopic *mt,
    const char *msg)
{
	for (size_t i = 0; i < pm->nparts && !pm_gone(pm); i++) {
		struct ppart *p = pm->parts[i];
		void (*then)(struct ppart *);

		if (p->dead || p->mp == NULL || p->mp->topic != mt ||
		    !p->owned || p->mp->state != MPART_PREPARING ||
		    pl_part_heading(p, &then) == MPART_FAILED)
			continue;
		pl_part_fail(p, "realign: %s", msg);
	}
}

/*
 * The operator's realign (mt->realign): the destination topic is deleted
 * before anything is copied into the topic of that name again.  By topic
 * id (DeleteTopics v6, pipeline/topic.c), so that nothing but the topic seen
 * is deleted: the id this answer names, or, when the topic is missing
 * from it, the id recorded when the realign was asked (the broker then
 * says whether it is gone).  Once the destination said the id is gone,
 * a topic-realign DELETED record lets the partitions start (they create
 * the topic); answers that still name the deleted id are older than the
 * deletion (mt->gone_dst_topic_id).  One instance deletes: the metadata
 * writer (pl_controller()).
 */
static void dest_realign(struct pmirror *pm, struct mtopic *mt,
    const struct kcluster_topic *md)
{
	const char *cid = pm->pl->dst->cluster_id, *del;
	char why[700], id[23];
	int r;

	if (!pl_controller(pm->pl))
		return;
	if (cid != NULL && mt->dst_cluster_id != NULL &&
	    strcmp(cid, mt->dst_cluster_id) != 0) {
		snprintf(why, sizeof(why), "destination cluster id changed: topic "
		    "%s was mirrored into cluster %s, destination.bootstrap_servers "
		    "now answer as cluster %s; not deleted for the realign",
		    mt->name, mt->dst_cluster_id, cid);
		fail_topic(pm, mt, why);
		return;
	}
	if (md->error == 0 && !kuuid_is_zero(&md->id)) {
		uuid_str(&md->id, id);
		del = id;
	} else if (md->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		del = mt->realign_dst_topic_id;
	} else if (md->error == 0) {
		snprintf(why, sizeof(why), "the destination's Metadata names no "
		    "topic ids (Kafka 2.8 or later needed), so mirrord does not "
		    "delete topic %s; delete it yourself, then --remove and --add "
		    "the topic", mt->name);
		realign_fail(pm, mt, why);
		return;
	} else {
		return; /* the next answer */
	}
	if (del == NULL) {
		/* Missing, and no id recorded: nothing to delete. */
		pmeta_defer(pm->pl, PMETA_REALIGN_DELETED, pm->name, mt->name, 0,
		    NULL, 0);
		return;
	}
	r = ptopic_delete(pm, mt->name, del, why, sizeof(why));
	if (r > 0)
		pmeta_defer(pm->pl, PMETA_REALIGN_DELETED, pm->name, mt->name, 0,
		    del, 0);
	else if (r < 0)
		realign_fail(pm, mt, why);
}

static void dest_topic(struct pmirror *pm, struct mtopic *mt)
{
	const struct kcluster_topic *md = pcluster_topic(pm->pl->dst, mt->name);
	const char *cid = pm->pl->dst->cluster_id;
	char why[700], id[23];
	int answers;
	double secs;

	if (md == NULL)
		return; /* not asked for in this answer */
	if (mt->realign) {
		dest_realign(pm, mt, md);
		return;
	}
	if (md->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		/* Not created yet (PREPARING creates it) unless it had an id. */
		if (mt->dst_topic_id == NULL ||
		    !absent_note(pm, SIDE_DEST, mt->name, &answers, &secs))
			return;
		snprintf(why, sizeof(why), "destination topic %s was deleted "
		    "(topic id %s; missing from %d Metadata answers in a row over "
		    "%.1f s)", mt->name, mt->dst_topic_id, answers, secs);
		fail_topic(pm, mt, why);
		return;
	}
	absent_clear(pm, SIDE_DEST, mt->name);
	if (md->error != 0 || kuuid_is_zero(&md->id))
		return;
	uuid_str(&md->id, id);
	if (cid != NULL && mt->dst_cluster_id != NULL &&
	    strcmp(cid, mt->dst_cluster_id) != 0) {
		snprintf(why, sizeof(why), "destination cluster id changed: topic "
		    "%s was mirrored into cluster %s, destination.bootstrap_servers "
		    "now answer as cluster %s", mt->name, mt->dst_cluster_id, cid);
		fail_topic(pm, mt, why);
		return;
	}
	if (cid != NULL && mt->dst_cluster_id == NULL)
		pmeta_defer(pm->pl, PMETA_IDENT, pm->name, mt->name,
		    MTOPIC_IDENT_DEST_CLUSTER, cid, 0);
	if (mt->dst_topic_id == NULL) {
		if (mt->gone_dst_topic_id != NULL &&
		    strcmp(mt->gone_dst_topic_id, id) == 0) {
			/* Deleted for a realign: this answer is older. */
			pcluster_want_metadata(pm->pl->dst);
			return;
		}
		if (mt->prior_dst_topic_id != NULL &&
		    strcmp(mt->prior_dst_topic_id, id) != 0) {
			/* Added again onto another destination topic (the
			 * operator deleted the old one, or mirrord created
			 * this one): not where the partitions' write history
			 * was written.  Dropped first; the id is recorded by
			 * the next pass. */
			if (!pmeta_noted(pm->pl, PMETA_REALIGN_RESET, pm->name,
			    mt->name, 0))
				log_info("mirror %s: destination topic %s is a new "
				    "topic (topic id %s, the partitions' write "
				    "history is of topic id %s): copied as a new "
				    "topic", pm->name, mt->name, id,
				    mt->prior_dst_topic_id);
			pmeta_defer(pm->pl, PMETA_REALIGN_RESET, pm->name,
			    mt->name, 0, mt->prior_dst_topic_id, 0);
			return;
		}
		pmeta_defer(pm->pl, PMETA_IDENT, pm->name, mt->name,
		    MTOPIC_IDENT_DEST, id, 0);
		return;
	}
	if (strcmp(mt->dst_topic_id, id) == 0)
		return;
	recreated_why(why, sizeof(why), SIDE_DEST, mt->name,
	    mt->dst_topic_id, id);
	fail_topic(pm, mt, why);
}

int pident_restart_ok(struct ppart *p)
{
	struct pmirror *pm = p->pm;
	struct mtopic *mt;
	const struct kcluster_topic *md;
	char why[700], id[23];

	if (p->mp == NULL || p->dead)
		return 1;
	mt = p->mp->topic;
	if (pm->src != NULL && mt->src_topic_id != NULL &&
	    (md = pcluster_topic(pm->src, mt->name)) != NULL && md->error == 0 &&
	    !kuuid_is_zero(&md->id)) {
		uuid_str(&md->id, id);
		if (strcmp(id, mt->src_topic_id) != 0) {
			recreated_why(why, sizeof(why), SIDE_SOURCE, mt->name,
			    mt->src_topic_id, id);
			fail_final(pm, p->mp, why);
			return 0;
		}
	}
	if (mt->dst_topic_id != NULL &&
	    (md = pcluster_topic(pm->pl->dst, mt->name)) != NULL &&
	    md->error == 0 && !kuuid_is_zero(&md->id)) {
		uuid_str(&md->id, id);
		if (strcmp(id, mt->dst_topic_id) != 0) {
			recreated_why(why, sizeof(why), SIDE_DEST, mt->name,
			    mt->dst_topic_id, id);
			fail_final(pm, p->mp, why);
			return 0;
		}
	}
	return 1;
}

int pident_start_wait(struct ppart *p)
{
	const struct mtopic *mt = p->mp->topic;
	struct pcluster *dst = p->pm->pl->dst;
	const struct kcluster_topic *md;

	if (!mt->realign) {
		if (mt->dst_topic_id != NULL || (mt->prior_dst_topic_id == NULL &&
		    mt->gone_dst_topic_id == NULL))
			return 0;
		md = pcluster_topic(dst, mt->name);
		/* Missing: created (check_destination_topic()); no ids: the
		 * history is kept as before. */
		if (md == NULL || md->error != 0 || kuuid_is_zero(&md->id))
			return 0;
	}
	/* The topic's Metadata pass decides (dest_topic()), or the realign's
	 * deletion goes on (dest_realign()). */
	pcluster_want_metadata(dst);
	p->step = PS_IDLE;
	p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	return 1;
}

void pident_destination(struct pipeline *pl)
{
	for (size_t i = 0; i < pl->nmirrors; i++) {
		struct pmirror *pm = pl->mirrors[i];
		const struct mirror *m = pm->m;

		if (m == NULL || pm->dead)
			continue;
		for (size_t t = 0; t < m->ntopics; t++) {
			int s = mtopic_state(m->topics[t]);

			if (s == MPART_STOPPING || s == MPART_STOPPED)
				continue;
			dest_topic(pm, m->topics[t]);
			m = pm->m;
			if (m == NULL)
				break;
		}
	}
	pmeta_flush(pl);
}

void pident_forget(struct pmirror *pm)
{
	for (size_t i = 0; i < pm->nabsent; i++)
		free(pm->absent[i].topic);
	free(pm->absent);
	pm->absent = NULL;
	pm->nabsent = 0;
}

static int identity_changed(const struct mpart *mp)
{
	return mp->retry_attempt == -1 && mp->error != NULL &&
	    pident_is_identity_failure(mp->error);
}

int pipeline_identity_ready(struct pipeline *pl, char *why, size_t whylen)
{
	if (pl == NULL || pl->st == NULL)
		return 1;
	return pl_ready_unless_failed(pl, identity_changed, "for a changed "
	    "identity", why, whylen);
}

int pident_is_identity_failure(const char *error)
{
	return strstr(error, " was deleted and recreated (topic id ") != NULL ||
	    (strncmp(error, "destination topic ", 18) == 0 &&
	    strstr(error, " was deleted (topic id ") != NULL) ||
	    strncmp(error, "source cluster id changed: ", 27) == 0 ||
	    strncmp(error, "destination cluster id changed: ", 32) == 0;
}
