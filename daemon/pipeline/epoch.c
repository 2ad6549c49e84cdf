/*
 * pipeline/epoch.c: source leader epochs, used.  Kafka numbers each leadership
 * of a partition (the leader epoch) and stamps every batch with the epoch
 * of the leader that appended it; a log that a new leader truncated (an
 * unclean leader election) shows it as an epoch that ends earlier than the
 * records mirrord copied from it.  Two checks use that:
 *
 *   - before a partition (re)starts (start-up, resume, a FAILED retry, a
 *     topic added again, a re-read after an uncertain Produce), once the
 *     destination end D is known and proven: OffsetForLeaderEpoch asks the
 *     source leader where the epoch of the last mirrored batch (the newest
 *     entry of the partition's epoch history that starts below D) ends.
 *     An end below the source offset after the last mirrored record, or an
 *     epoch the source does not have, means the source lost records that
 *     the destination holds;
 *   - every Fetch (v12+) sends the current leader epoch (from Metadata; a
 *     stale or future one is fenced, and pipeline/copy.c refreshes Metadata and
 *     retries) and LastFetchedEpoch, the epoch of the batch that ends at
 *     the fetch offset.  A DivergingEpoch answer drops what is queued and
 *     re-reads the destination end, so the check above decides from what
 *     the destination really holds (records fetched but not yet produced
 *     are simply fetched again from the new log).
 *
 * A divergence is a FAILED that is never retried automatically (as
 * pipeline/prove.c's failures): its reason names the source offset and epoch
 * where the logs part, the mirrored source end and the destination end.
 * A source that keeps no epochs (Metadata without leader epochs, batches
 * with epoch -1, no OffsetForLeaderEpoch: the librdkafka mock) cannot be
 * checked, and the partition goes on as before.
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
#include "pipe_int.h"
#include "wire.h"

#define PEPOCH_REASON "source log diverged"

struct epoch_ctx {
	struct ppart *p;
	uint32_t gen;
	int16_t version;
	int found;
	struct pw_ofle_part r;
};

static const char *pname(const struct ppart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%" PRId32, p->pm->name, p->topic, p->index);
	return buf;
}

int32_t pepoch_topic_leader_epoch(const struct kcluster_topic *t, int32_t index)
{
	if (t == NULL || t->error != 0 || index < 0 || index >= t->npart ||
	    t->leader_epoch == NULL)
		return -1;
	return t->leader_epoch[index];
}

int32_t pepoch_leader_epoch(struct ppart *p)
{
	return pepoch_topic_leader_epoch(pcluster_topic(p->pm->src, p->topic),
	    p->index);
}

int32_t pepoch_last_fetched(const struct ppart *p)
{
	return p->fetch_epoch >= 0 && p->fetch_epoch_end == p->src_fetch ?
	    p->fetch_epoch : -1;
}

int pepoch_is_divergence(const char *error)
{
	return error != NULL &&
	    strncmp(error, PEPOCH_REASON, sizeof(PEPOCH_REASON) - 1) == 0;
}

/* The newest epoch-history entry starting below destination offset d: the
 * epoch of the last batch at the destination before d.  -1 if none. */
static int32_t epoch_before(const struct mpart *mp, int64_t d)
{
	size_t lo = 0, hi = mp->nepochs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (mp->epochs[mid].start_offset < d)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 ? mp->epochs[lo - 1].epoch : -1;
}

int pepoch_start(struct ppart *p, int64_t d, int64_t s, int64_t s_end)
{
	int32_t e;

	p->check_epoch = -1;
	e = p->mp != NULL && d > 0 ? epoch_before(p->mp, d) : -1;
	/* The Fetch at s names the batch before it only when nothing was
	 * skipped between (pcopy_start_at() drops it otherwise). */
	p->fetch_epoch = e;
	p->fetch_epoch_end = s_end;
	if (e < 0 || s_end < 0)
		return 0; /* nothing mirrored with an epoch: nothing to check */
	if (p->pm->src == NULL || (p->pm->src->md_gen > 0 && !p->pm->src->md_epochs))
		return 0; /* the source keeps no leader epochs (Metadata < v7) */
	p->check_epoch = e;
	p->check_src_end = s_end;
	p->check_dst_end = d;
	p->check_resume = s;
	p->step = PS_EPOCH;
	pl_kick(p->pm->pl);
	return -1;
}

/* The logs part: fail p for good, naming where. */
static void diverged(struct ppart *p, int32_t answered, int64_t end)
{
	char name[300];

	p->live.divergences++;
	if (answered == p->check_epoch) {
		log_warnx("%s: the source's epoch %" PRId32 " ends at offset %" PRId64
		    " but mirrord copied it up to source offset %" PRId64,
		    pname(p, name, sizeof(name)), p->check_epoch, end, p->check_src_end);
		pl_part_fail_final(p, PEPOCH_REASON " at offset %" PRId64 " (epoch %"
		    PRId32 " ends at %" PRId64 " on the source, mirrored up to %" PRId64
		    ", destination end %" PRId64 "): the source lost records already "
		    "mirrored (unclean leader election?); the destination keeps them",
		    end, p->check_epoch, end, p->check_src_end, p->check_dst_end);
	} else if (end >= 0) {
		int64_t at = MIN(end, p->check_src_end);

		pl_part_fail_final(p, PEPOCH_REASON " at offset %" PRId64 " (epoch %"
		    PRId32 " of the last mirrored batch is not in the source log, "
		    "whose epoch %" PRId32 " ends at %" PRId64 "; mirrored up to %"
		    PRId64 ", destination end %" PRId64 "): the source lost records "
		    "already mirrored (unclean leader election?); the destination "
		    "keeps them", at, p->check_epoch, answered, end, p->check_src_end,
		    p->check_dst_end);
	} else {
		pl_part_fail_final(p, PEPOCH_REASON " before offset %" PRId64 " (epoch %"
		    PRId32 " of the last mirrored batch is unknown to the source "
		    "leader; destination end %" PRId64 "): the source lost records "
		    "already mirrored (unclean leader election?); the destination "
		    "keeps them", p->check_src_end, p->check_epoch, p->check_dst_end);
	}
}

static void ofle_part(void *arg, const struct pw_ofle_part *r)
{
	struct epoch_ctx *x = arg;

	if (!x->found && r->partition == x->p->index && kstr_eq(r->topic, x->p->topic)) {
		x->found = 1;
		x->r = *r;
	}
}

static void ofle_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct epoch_ctx *x = arg;
	struct ppart *p = x->p;
	struct pipeline *pl = p->pm->pl;
	char name[300];

	p->step_inflight = 0;
	if (p->dead || p->pm->src == NULL || p->pm->src->dying || x->gen != p->gen ||
	    p->step != PS_EPOCH)
		goto out;
	if (err != KCONN_E_OK) {
		log_info("%s: OffsetForLeaderEpoch failed: %s",
		    pname(p, name, sizeof(name)), errstr);
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		p->live.retries++;
		pcluster_want_metadata(p->pm->src);
		goto out;
	}
	if (pw_ofle_decode(body, x->version, ofle_part, x) < 0 || !x->found) {
		log_warnx("%s: OffsetForLeaderEpoch v%d response %s", kconn_name(c),
		    x->version, x->found ? body->why : "lacks the partition asked for");
		kconn_close(c, KCONN_E_PROTOCOL, "malformed OffsetForLeaderEpoch response");
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		goto out;
	}
	if (x->r.error != 0) {
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		p->live.retries++;
		switch (x->r.error) {
		case KERR_NOT_LEADER_OR_FOLLOWER:
		case KERR_LEADER_NOT_AVAILABLE:
		case KERR_UNKNOWN_TOPIC_OR_PARTITION:
		case KERR_REPLICA_NOT_AVAILABLE:
		case KERR_FENCED_LEADER_EPOCH:   /* our Metadata is older */
		case KERR_UNKNOWN_LEADER_EPOCH:  /* the broker's is older */
		case KERR_NETWORK_EXCEPTION:
		case 56: /* KAFKA_STORAGE_ERROR */
			log_info("%s: OffsetForLeaderEpoch: %s; asking for Metadata",
			    pname(p, name, sizeof(name)), kerr_name(x->r.error));
			pcluster_want_metadata(p->pm->src);
			break;
		default:
			pl_part_fail(p, "OffsetForLeaderEpoch on the source for epoch %"
			    PRId32 ": %s", p->check_epoch, kerr_name(x->r.error));
			break;
		}
		goto out;
	}
	if (x->r.leader_epoch < p->check_epoch || x->r.end_offset < p->check_src_end) {
		diverged(p, x->r.leader_epoch, x->r.end_offset);
		goto out;
	}
	log_debug("%s: the source's epoch %" PRId32 " ends at %" PRId64 ", at or "
	    "after the mirrored end %" PRId64, pname(p, name, sizeof(name)),
	    p->check_epoch, x->r.end_offset, p->check_src_end);
	p->check_epoch = -1;
	pcopy_start_at(p, p->check_dst_end, p->check_resume);
out:
	pl_kick(pl);
	pl_part_unref(p);
	free(x);
}

static int ofle_encode(struct kw *w, int16_t version, const void *msg)
{
	return pw_ofle_encode(w, version, msg, 1);
}

void pepoch_send(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;
	struct pbroker *b = p->pm->src != NULL ? ppart_leader(p, 0) : NULL;
	struct kconn *c = b ? pbroker_conn(b) : NULL;
	struct epoch_ctx *x;
	struct pw_tp tp;
	char err[256], name[300];
	int v;

	if (c == NULL)
		return;
	v = kconn_pick_version(c, KP_API_OFFSET_FOR_LEADER_EPOCH,
	    PW_OFFSET_FOR_LEADER_EPOCH_MIN, PW_OFFSET_FOR_LEADER_EPOCH_MAX);
	if (v < 0) {
		/* The source cannot answer: it cannot be checked (the mock). */
		log_info("%s: source broker %s has no OffsetForLeaderEpoch v%d..v%d: "
		    "cannot check that the source still holds epoch %" PRId32,
		    pname(p, name, sizeof(name)), kconn_name(c),
		    PW_OFFSET_FOR_LEADER_EPOCH_MIN, PW_OFFSET_FOR_LEADER_EPOCH_MAX,
		    p->check_epoch);
		p->check_epoch = -1;
		pcopy_start_at(p, p->check_dst_end, p->check_resume);
		return;
	}
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return;
	x->p = p;
	x->gen = p->gen;
	x->version = (int16_t)v;
	memset(&tp, 0, sizeof(tp));
	tp.topic = p->topic;
	tp.partition = p->index;
	tp.leader_epoch = pepoch_leader_epoch(p);
	tp.last_epoch = p->check_epoch;
	p->refs++;
	if (kconn_send(c, KP_API_OFFSET_FOR_LEADER_EPOCH, (int16_t)v, ofle_encode,
	    &tp, 0, (int)MIN(pl->cfg->pipeline_request_timeout_ms, INT32_MAX),
	    ofle_response, x, err, sizeof(err)) != 0) {
		log_debug("%s: OffsetForLeaderEpoch: %s", pname(p, name, sizeof(name)), err);
		pl_part_unref(p);
		free(x);
		return;
	}
	p->step_inflight = 1;
}

int pepoch_fetch_diverged(struct ppart *p, int32_t epoch, int64_t end)
{
	char name[300], why[256];

	if (epoch < 0 && end < 0)
		return 0;
	log_warnx("%s: Fetch at source offset %" PRId64 " with last fetched epoch %"
	    PRId32 ": the source's log diverges (its epoch %" PRId32 " ends at %"
	    PRId64 "); checking what the destination holds",
	    pname(p, name, sizeof(name)), p->src_fetch, pepoch_last_fetched(p),
	    epoch, end);
	snprintf(why, sizeof(why), "the source log diverges: epoch %" PRId32
	    " ends at %" PRId64, epoch, end);
	p->fetch_epoch = -1;
	pl_part_resync(p, why);
	return 1;
}

static int failed_diverged(const struct mpart *mp)
{
	return pepoch_is_divergence(mp->error);
}

int pipeline_divergence_ready(struct pipeline *pl, char *why, size_t whylen)
{
	if (pl == NULL)
		return 1;
	return pl_ready_unless_failed(pl, failed_diverged, "because the source log "
	    "diverged from the mirror", why, whylen);
}
