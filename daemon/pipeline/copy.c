/*
 * pipeline/copy.c: the copy itself.  Fetch rounds (one Fetch per source broker,
 * many partitions), batch intake (CRC, control and aborted data, holes),
 * Produce rounds (one batch per partition per request, up to
 * pipeline.max_inflight_batches_per_partition requests with a batch of the
 * partition in flight: see "Pipelined produce" below), and the two
 * ListOffsets steps: SYNC (destination end ->
 * source position) and OOR (source log start after OFFSET_OUT_OF_RANGE).
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
#include "massert.h"
#include "metrics_std.h"
#include "mirrorconf.h"
#include "mrec.h"
#include "fsess.h"
#include "pipe_int.h"
#include "txn.h"
#include "wire.h"
#include "xlate.h"

/* A request's context: the partitions it carries, each with the
 * generation and offset it was sent for. */
struct pctx {
	struct pipeline *pl;
	struct pbroker *b;
	struct pcluster *cl;
	int16_t version;
	size_t n;
	size_t hint;   /* ctx_find: after the last entry found */
	size_t id_hint; /* Fetch v13+: the last entry an answer's id named */
	size_t *grp;   /* Fetch: where each topic's run of entries starts */
	size_t ngrp;   /* (ctx_group(); NULL/0: none, ctx_find scans) */
	uint32_t *fh;  /* Fetch: entries by topic and partition (fetch_index()) */
	size_t fhmask; /* (its size less one; NULL: ctx_find only) */
	const char *fh_topic; /* Fetch: the answer's last topic looked up */
	int32_t fh_tlen;      /* (its length) */
	uint32_t fh_thash;    /* (and its hash) */
	struct pfsess *sess; /* Fetch: its session (pipeline/fsess.h), or NULL */
	uint32_t sround;     /* Fetch: the session's round when sent */
	int sfull;           /* Fetch: a full request (the session opens) */
	int news;            /* Fetch: its answer was more than "nothing new" */
	size_t reserved; /* Fetch: its answer's bytes, in pl->fetch_reserved */
	size_t copies;   /* Fetch: and the copies of its batches not queued yet */
	struct {
		struct ppart *p;
		uint32_t gen;
		int64_t offset;
		uint32_t ogen;  /* p->own_gen when sent (pipeline.c part_lose) */
		int done;
		int got;       /* Fetch: the answer carried records */
		size_t slot;   /* Fetch: index in the mirror's parts when sent */
		struct kuuid tid;    /* Produce, Fetch v13+: the topic id it was sent for */
		struct pbatch *b;    /* Produce: the batch, until answered */
	} e[];
};

static struct pctx *ctx_new(struct pipeline *pl, struct pcluster *cl,
    struct pbroker *b, size_t n)
{
	struct pctx *x = calloc(1, sizeof(*x) + n * sizeof(x->e[0]));

	if (x != NULL) {
		x->pl = pl;
		x->cl = cl;
		x->b = b;
	}
	return x;
}

static void ctx_add(struct pctx *x, struct ppart *p, int64_t offset)
{
	x->e[x->n].p = p;
	x->e[x->n].gen = p->gen;
	x->e[x->n].ogen = p->own_gen;
	x->e[x->n].offset = offset;
	x->n++;
	p->refs++;
}

static void ctx_free(struct pctx *x)
{
	for (size_t i = 0; i < x->n; i++)
		pl_part_unref(x->e[i].p);
	free(x->grp);
	free(x->fh);
	free(x);
}

/*
 * Notes where each topic's run of entries starts (a Fetch lists each
 * topic once, its partitions together).  A broker may answer the topics
 * in another order than asked: without this each topic of the answer
 * costs ctx_find() a scan of the whole request from the hint.  Without
 * memory ctx_find() scans as before.
 */
static int ctx_new_topic(const struct pctx *x, size_t i)
{
	const char *a = x->e[i].p->topic, *b = x->e[i - 1].p->topic;

	return a != b && strcmp(a, b) != 0;
}

static void ctx_group(struct pctx *x)
{
	size_t n = 0;

	free(x->grp);
	x->grp = NULL;
	x->ngrp = 0;
	for (size_t i = 0; i < x->n; i++)
		if (i == 0 || ctx_new_topic(x, i))
			n++;
	if (n == 0 || (x->grp = malloc(n * sizeof(*x->grp))) == NULL)
		return;
	for (size_t i = 0; i < x->n; i++)
		if (i == 0 || ctx_new_topic(x, i))
			x->grp[x->ngrp++] = i;
}

static int ctx_match(const struct pctx *x, size_t i, struct kstr topic,
    int32_t partition)
{
	return !x->e[i].done && x->e[i].p->index == partition &&
	    kstr_eq(topic, x->e[i].p->topic);
}

/*
 * The entry of x for topic/partition that is not answered yet, or -1.
 * Brokers answer in the order asked, so the search starts after the last
 * entry found: O(1) a partition instead of O(n) (O(n^2) a response).
 */
static ssize_t ctx_find(struct pctx *x, struct kstr topic, int32_t partition)
{
	size_t i = x->hint;

	if (i < x->n && ctx_match(x, i, topic, partition))
		goto found;
	/* Not the next one: the topic's run first (ctx_group()), one name
	 * compared a topic; every entry found is checked in full. */
	for (size_t g = 0; g < x->ngrp; g++) {
		size_t s = x->grp[g], e = g + 1 < x->ngrp ? x->grp[g + 1] : x->n;

		if (s >= x->n || e > x->n || !kstr_eq(topic, x->e[s].p->topic))
			continue;
		for (i = s; i < e; i++)
			if (ctx_match(x, i, topic, partition))
				goto found;
	}
	for (size_t k = 0; k < x->n; k++) {
		i = (x->hint + k) % x->n;
		if (ctx_match(x, i, topic, partition))
			goto found;
	}
	return -1;
found:
	x->hint = i + 1 < x->n ? i + 1 : 0;
	return (ssize_t)i;
}

static uint32_t topic_hash_n(const char *s, size_t len)
{
	return fnv1a32(s, len);
}

static uint32_t topic_hash(const char *s)
{
	return fnv1a32(s, strlen(s));
}

static size_t fetch_slot(uint32_t thash, int32_t partition, size_t mask)
{
	uint32_t h = thash ^ ((uint32_t)partition * 0x9e3779b1u);

	return (size_t)(h ^ (h >> 16)) & mask;
}

/*
 * A Fetch's entries by topic and partition, for its answer: the broker
 * need not answer in the order asked (the mock does not), and a miss of
 * ctx_find()'s hint costs a scan of the topic's run.  Without memory
 * ctx_find() does it.
 */
static void fetch_index(struct pctx *x)
{
	size_t cap = 16;
	const char *last = NULL;
	uint32_t th = 0;

	if (x->n == 0 || x->n > UINT32_MAX / 2)
		return;
	while (cap < 2 * x->n)
		cap *= 2;
	if ((x->fh = malloc(cap * sizeof(*x->fh))) == NULL)
		return;
	x->fhmask = cap - 1;
	memset(x->fh, 0xff, cap * sizeof(*x->fh));
	for (size_t i = 0; i < x->n; i++) {
		const struct ppart *p = x->e[i].p;
		size_t k;

		if (last == NULL || (p->topic != last && strcmp(p->topic, last) != 0))
			th = topic_hash(last = p->topic);
		k = fetch_slot(th, p->index, x->fhmask);
		while (x->fh[k] != UINT32_MAX)
			k = (k + 1) & x->fhmask;
		x->fh[k] = (uint32_t)i;
	}
}

/* The entry of Fetch x for topic/partition not answered yet, or -1. */
static ssize_t fetch_lookup(struct pctx *x, struct kstr topic, int32_t partition)
{
	size_t k;

	if (x->fh == NULL || topic.len < 0)
		return ctx_find(x, topic, partition);
	if (topic.p != x->fh_topic || topic.len != x->fh_tlen) {
		x->fh_topic = topic.p;
		x->fh_tlen = topic.len;
		x->fh_thash = topic_hash_n(topic.p, (size_t)topic.len);
	}
	for (k = fetch_slot(x->fh_thash, partition, x->fhmask);
	    x->fh[k] != UINT32_MAX; k = (k + 1) & x->fhmask)
		if (ctx_match(x, x->fh[k], topic, partition))
			return (ssize_t)x->fh[k];
	return -1;
}

/* ctx_find() for a Produce answer: v13+ names the topic by id. */
static ssize_t ctx_find_produced(struct pctx *x, const struct pw_produce_part *pp)
{
	if (x->version < PW_PRODUCE_BY_ID)
		return ctx_find(x, pp->topic, pp->partition);
	/* From the last one found, as ctx_find(): a request now carries every
	 * ready partition of the broker. */
	for (size_t k = 0, i = x->hint; k < x->n; k++, i = i + 1 < x->n ? i + 1 : 0)
		if (!x->e[i].done && x->e[i].p->index == pp->partition &&
		    memcmp(&x->e[i].tid, &pp->topic_id, sizeof(pp->topic_id)) == 0) {
			x->hint = i + 1 < x->n ? i + 1 : 0;
			return (ssize_t)i;
		}
	return -1;
}

static const char *pname(const struct ppart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%" PRId32, p->pm->name, p->topic, p->index);
	return buf;
}

static int64_t pcap(const struct pipeline *pl)
{
	return pl->cfg->pipeline_max_inflight_bytes_per_partition;
}

static int64_t tcap(const struct pipeline *pl)
{
	return pl->cfg->pipeline_max_inflight_bytes_total;
}

/* Errors after which the leader may have moved: refresh and retry. */
static int leader_error(int16_t e)
{
	switch (e) {
	case KERR_NOT_LEADER_OR_FOLLOWER:
	case KERR_LEADER_NOT_AVAILABLE:
	case KERR_UNKNOWN_TOPIC_OR_PARTITION:
	case KERR_REPLICA_NOT_AVAILABLE:
	case 56: /* KAFKA_STORAGE_ERROR */
	case 74: /* FENCED_LEADER_EPOCH */
	case 75: /* UNKNOWN_LEADER_EPOCH */
	case 13: /* NETWORK_EXCEPTION */
	case KERR_UNKNOWN_TOPIC_ID:       /* by id: deleted, or not yet known */
	case KERR_INCONSISTENT_TOPIC_ID:  /* recreated under the same name */
		return 1;
	default:
		return 0;
	}
}

/* ---- ListOffsets steps ------------------------------------------------------- */

/* A ListOffsets request of n partitions (send_list_offsets(): one). */
struct lo_many {
	const struct pw_tp *tps;
	size_t n;
};

static int lo_encode_many(struct kw *w, int16_t version, const void *msg)
{
	const struct lo_many *m = msg;

	return pw_list_offsets_encode(w, version, m->tps, m->n);
}

struct lo_res {
	struct pctx *x;
	int found;
	int16_t error;
	int64_t offset;
};

static void lo_part(void *arg, const struct pw_lo_part *lp)
{
	struct lo_res *r = arg;

	if (!r->found && lp->partition == r->x->e[0].p->index &&
	    kstr_eq(lp->topic, r->x->e[0].p->topic)) {
		r->found = 1;
		r->error = lp->error;
		r->offset = lp->offset;
	}
}

/*
 * The batches of an uncertain Produce whose anchors were recorded are kept
 * (settle()).  If the destination end d says the first of them did not
 * land, it goes out again as it was sent, with the ones after it that
 * follow on without a gap, so they land with exactly the anchors recorded
 * for them even if the source batches changed since (compacted again);
 * the rest are dropped.  Called with the positions set from d.
 */
/* Frees one batch of p->unsure (dropped, so counted as discarded). */
static void unsure_free_one(struct ppart *p, struct pbatch *u)
{
	MR_ASSERT_MSG(p->ubytes >= u->len && p->pm->pl->ubytes >= p->ubytes,
	    "%zu, %zu, %zu", u->len, p->ubytes, p->pm->pl->ubytes);
	TAILQ_REMOVE(&p->unsure, u, link);
	p->ubytes -= u->len;
	p->pm->pl->ubytes -= u->len;
	pl_discarded(p, u->len);
	pbatch_free(u);
}

static void unsure_free(struct ppart *p)
{
	struct pbatch *u;

	while ((u = TAILQ_FIRST(&p->unsure)) != NULL)
		unsure_free_one(p, u);
}

static void resend_unsure(struct ppart *p, int64_t d)
{
	struct pipeline *pl = p->pm->pl;
	struct pbatch *u, *first = NULL, *last = NULL;
	struct pbatchq keep;
	char name[300];

	TAILQ_INIT(&keep);
	TAILQ_FOREACH(u, &p->unsure, link)
		if (u->dst_base == d) {
			first = u;
			break;
		}
	if (first == NULL || !TAILQ_EMPTY(&p->q) || p->src_fetch < first->src_base ||
	    p->src_fetch >= first->src_next) {
		unsure_free(p);
		return;
	}
	while ((u = TAILQ_FIRST(&p->unsure)) != first)
		unsure_free_one(p, u);
	while ((u = TAILQ_FIRST(&p->unsure)) != NULL && (last == NULL ||
	    (u->dst_base == last->dst_base + last->count &&
	    u->src_base >= last->src_next))) {
		MR_ASSERT(p->ubytes >= u->len && pl->ubytes >= p->ubytes);
		TAILQ_REMOVE(&p->unsure, u, link);
		p->ubytes -= u->len;
		pl->ubytes -= u->len;
		TAILQ_INSERT_TAIL(&keep, u, link);
		last = u;
	}
	unsure_free(p);
	while ((u = TAILQ_FIRST(&keep)) != NULL) {
		log_info("%s: the batch at source offsets %" PRId64 "..%" PRId64 " did "
		    "not land at destination offset %" PRId64 ": sending it again as "
		    "it was sent (its translation anchors are recorded)", pname(p, name,
		    sizeof(name)), u->src_base, u->src_next - 1, u->dst_base);
		TAILQ_REMOVE(&keep, u, link);
		TAILQ_INSERT_TAIL(&p->q, u, link);
		p->qbytes += u->len;
		pl->qbytes += u->len;
	}
	p->src_fetch = p->src_copied = last->src_next;
	p->dst_tail = last->dst_base + last->count;
}

/* 1 if d is an end the destination may have after the uncertain Produce
 * requests settle() named: the start of the first failed batch or the end
 * of a batch answered since. */
static int sync_end_expected(const struct ppart *p, int64_t d)
{
	if (d == p->sync_lo || d == p->sync_hi)
		return 1;
	for (int i = 0; i < p->nsync_at; i++)
		if (p->sync_at[i] == d)
			return 1;
	return 0;
}

/*
 * 1 if destination end d after a halt, past every batch p sent, may be the
 * end of batches another instance wrote with p's identity: in
 * multi-instance mode the deposed owner goes on copying until it applies
 * the part-owner record, and its requests already sent may land after the
 * handover.  They carry the identity this instance reused, numbered by
 * offset, and so stop in sequence (the broker takes them only in order)
 * at a batch boundary of the source: the proof, strict (prove_strict),
 * recognises the batch that ends at d as mirrord's or fails the partition.
 * Needs producer ids; single mode keeps the plain check.
 */
static int sync_end_deposed(const struct ppart *p, int64_t d)
{
	const struct pipeline *pl = p->pm->pl;

	return pl->instance != NULL && !pl->dst->pid_unsupported &&
	    d > p->sync_hi && pl_part_wants_run(p);
}

static void identity_change_fenced(struct ppart *p, int16_t error);

/* Decides where to fetch from once the destination end D is known. */
void pcopy_sync_done(struct ppart *p, int64_t d)
{
	const struct mpart *mp = p->mp;
	int64_t s = d, s_end = d;
	char name[300];
	int strict = 0;

	p->live.destination_end = d;
	if (p->seq_probe) {
		p->seq_probe = 0;
		if (d == p->sync_lo) {
			/* Nothing landed from the refused batch on: the
			 * broker's state for the identity is not mirrord's. */
			identity_change_fenced(p, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
			return;
		}
	}
	if (p->sync_lo >= 0 && !sync_end_expected(p, d) && p->prove_strict &&
	    p->proven_end == d) {
		/* The strict proof found mirrord's batch ending at d. */
	} else if (p->sync_lo >= 0 && !sync_end_expected(p, d) &&
	    sync_end_deposed(p, d)) {
		log_info("%s: destination end offset %" PRId64 " is past every "
		    "batch sent from %" PRId64 " (not written) to %" PRId64 ": "
		    "batches of the previous owner (same producer identity) may "
		    "have landed after the handover; checking that the batch "
		    "ending there is mirrord's", pname(p, name, sizeof(name)), d,
		    p->sync_lo, p->sync_hi);
		strict = 1;
	} else if (p->sync_lo >= 0 && !sync_end_expected(p, d)) {
		if (p->nsync_at > 2)
			pl_part_fail(p, "destination end offset %" PRId64 " after "
			    "uncertain Produce requests is not the end of any batch "
			    "sent from %" PRId64 " (not written) to %" PRId64 " (all "
			    "written): another producer writes to the destination "
			    "partition", d, p->sync_lo, p->sync_hi);
		else
			pl_part_fail(p, "destination end offset %" PRId64 " after an "
			    "uncertain Produce is neither %" PRId64 " (not written) nor %"
			    PRId64 " (written): another producer writes to the "
			    "destination partition", d, p->sync_lo, p->sync_hi);
		return;
	}
	p->prove_strict = strict;
	if (pl_part_wants_run(p) && pprove_start(p, d) != 0)
		return; /* being proven (calls back), or FAILED */
	if (mpart_nanchors(mp) > 0) {
		int rc = xlate_dst_to_src(mp->map, d, &s);

		/* Where the last mirrored record ends on the source (-1: the
		 * map cannot say; no epoch check then). */
		if (d == 0 || xlate_dst_to_src(mp->map, d - 1, &s_end) != XLATE_EXACT)
			s_end = -1;
		else
			s_end++;
		if (rc == XLATE_UNMAPPED && mp->nepochs > 0 &&
		    mp->epochs[0].start_offset <= d && d < mpart_anchor(mp, 0).dst) {
			/* Between the first offset written (where a start
			 * anchor would stand, were the copy not 1:1 there)
			 * and the first anchor: offsets are the source's.
			 * The anchors above d were recorded ahead of batches
			 * that may never have landed (gathered, above the
			 * part-sending mark, which pprove_start() checked);
			 * the batches fetched again are recognised against
			 * them, or they are retracted. */
			s = s_end = d;
		} else if (rc == XLATE_UNMAPPED) {
			pl_part_fail(p, "destination end offset %" PRId64 " is below the "
			    "first translated offset %" PRId64 ": the destination partition "
			    "lost data mirrord wrote", d, mpart_anchor(mp, 0).dst);
			return;
		}
	}
	/* What was copied is known now, also while the source cannot be
	 * asked about its epochs (the lag, a failover report).  Only where
	 * it keeps src_done and dst_next a pair (the offset sync translates
	 * with both): dst_next moves at pcopy_start_at(). */
	if (p->dst_next < 0 || p->dst_next == d) {
		p->src_done = s;
		if (s > 0)
			p->last_src = s - 1;
		pl_update_lag(p);
	}
	if (pl_part_wants_run(p) && pepoch_start(p, d, s, s_end) != 0)
		return; /* being checked against the source (calls back), or FAILED */
	pcopy_start_at(p, d, s);
}

static void start_run(struct ppart *p);

void pcopy_start_at(struct ppart *p, int64_t d, int64_t s)
{
	struct pipeline *pl = p->pm->pl;
	char msg[512], name[300];

	/* A (re)start from the destination end: nothing of p is queued or
	 * in flight whose answer could still move that end. */
	MR_ASSERT_MSG(TAILQ_EMPTY(&p->q) && p->ninflight == 0 &&
	    TAILQ_EMPTY(&p->failed), "%d in flight", p->ninflight);
	if (p->live.source_high_watermark >= 0 && s > p->live.source_high_watermark &&
	    p->mp->state != MPART_PAUSING && p->mp->state != MPART_STOPPING) {
		/* Checked again by the first Fetch (OFFSET_OUT_OF_RANGE). */
		log_info("%s: destination end %" PRId64 " maps to source offset %" PRId64
		    ", past the last known source high watermark %" PRId64,
		    pname(p, name, sizeof(name)), d, s, p->live.source_high_watermark);
	}
	p->dst_next = p->dst_tail = d;
	p->src_fetch = p->src_copied = s;
	p->src_done = s;
	p->deleted_from = -1;
	p->seq_known = 0; /* the broker may have dropped the state meanwhile */
	pl_update_lag(p);
	p->last_src = s > 0 ? s - 1 : p->last_src;
	if (p->fetch_epoch_end != s)
		p->fetch_epoch = -1; /* the batch before s is not known */
	p->sync_lo = p->sync_hi = -1;
	if (!pl_part_wants_run(p)) {
		unsure_free(p);
		p->step = PS_IDLE;
		pl_kick(pl);
		return;
	}
	if (p->mp->state == MPART_PREPARING) {
		char why[128];
		struct pl_state_req rq = { .to = MPART_MIRRORING, .why = why,
		    .then = start_run };
		int rc;

		snprintf(why, sizeof(why), "destination end %" PRId64 ", fetching "
		    "from source offset %" PRId64, d, s);
		/* Asynchronous (group commit): p fetches nothing until
		 * MIRRORING is durable; start_run() then goes on from here
		 * (p->dst_next is d while p is frozen). */
		p->step = PS_IDLE;
		rc = pl_part_state(p, &rq, msg, sizeof(msg));
		if (rc < 0) {
			log_warnx("%s: %s", pname(p, name, sizeof(name)), msg);
			p->not_before = clock_mono_ms() + 1000;
			return;
		}
		if (rc > 0)
			return;
	} else {
		log_info("%s: resuming at source offset %" PRId64 " (destination end %"
		    PRId64 ")", pname(p, name, sizeof(name)), s, d);
	}
	start_run(p);
}

/* Copying starts (or resumes) at the destination end p->dst_next: the
 * unsure batches first (resend_unsure()). */
static void start_run(struct ppart *p)
{
	if (p->retract_arm) {
		/* After retract_fenced(): nothing of the earlier copy can
		 * land any more, this run may drop what it recorded above the
		 * destination end. */
		p->retract_arm = 0;
		p->retract_ok = 1;
		p->retract_gen = p->gen;
	}
	resend_unsure(p, p->dst_next);
	p->step = PS_RUN;
	p->run_since = clock_wall_ms();
	pl_kick(p->pm->pl);
}

/* Checks the destination topic before the first SYNC of a PREPARING
 * partition.  0 to go on, -1 when the partition failed or must wait. */
static int check_destination_topic(struct ppart *p)
{
	struct pcluster *dst = p->pm->pl->dst;
	const struct kcluster_topic *t = pcluster_topic(dst, p->topic);

	if (t == NULL) {
		pcluster_want_metadata(dst);
		return -1;
	}
	if (t->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		char msg[600];
		int rc;

		/* Mirrored into before: deleted, not to be created again
		 * (pipeline/ident.c confirms it and fails the partition). */
		if (p->mp != NULL && p->mp->topic->dst_topic_id != NULL) {
			pcluster_want_metadata(dst);
			return -1;
		}
		rc = ptopic_ensure(p, msg, sizeof(msg));

		if (rc < 0)
			pl_part_fail(p, "%s", msg);
		return -1; /* created or not: wait for the next Metadata */
	}
	if (pl_is_denial(t->error)) {
		char who[300];

		pl_part_fail_denied(p, "Metadata for topic %s answered %s for %s (it "
		    "needs DESCRIBE, READ and WRITE on the topic)", p->topic,
		    kerr_name(t->error), pcluster_principal(dst, who, sizeof(who)));
		return -1;
	}
	if (t->error != 0) {
		pcluster_want_metadata(dst);
		return -1;
	}
	if (p->index >= t->npart) {
		char msg[600];
		int rc = ptopic_grow(p, t->npart, msg, sizeof(msg));

		if (rc < 0)
			pl_part_fail(p, "%s", msg);
		return rc > 0 ? 0 : -1;
	}
	return 0;
}

/* 0 when the request is out (step_inflight set), -1 when not. */
static int send_list_offsets(struct ppart *p, struct pcluster *cl, int64_t ts,
    kconn_resp_cb cb)
{
	struct pipeline *pl = p->pm->pl;
	struct pbroker *b = ppart_leader(p, cl == p->pm->pl->dst);
	struct kconn *c = b ? pbroker_conn(b) : NULL;
	struct pw_tp tp;
	struct lo_many m = { &tp, 1 };
	struct pctx *x;
	char err[256], name[300];
	int v;

	if (c == NULL)
		return -1;
	v = kconn_pick_version(c, KP_API_LIST_OFFSETS, PW_LIST_OFFSETS_MIN,
	    PW_LIST_OFFSETS_MAX);
	if (v < 0) {
		pl_part_fail(p, "%s broker %s supports no ListOffsets version in %d..%d",
		    cl->label, kconn_name(c), PW_LIST_OFFSETS_MIN, PW_LIST_OFFSETS_MAX);
		return -1;
	}
	x = ctx_new(pl, cl, b, 1);
	if (x == NULL)
		return -1;
	x->version = (int16_t)v;
	ctx_add(x, p, ts);
	memset(&tp, 0, sizeof(tp));
	tp.topic = p->topic;
	tp.partition = p->index;
	tp.offset = ts;
	if (kconn_send(c, KP_API_LIST_OFFSETS, (int16_t)v, lo_encode_many, &m, 0,
	    0, cb, x, err, sizeof(err)) != 0) {
		log_debug("%s: ListOffsets: %s", pname(p, name, sizeof(name)), err);
		ctx_free(x);
		return -1;
	}
	p->step_inflight = 1;
	return 0;
}

/*
 * SYNC: the destination's end of every partition that starts or resumes
 * (a restart, an uncertain Produce, a retry).  One ListOffsets a partition
 * cost a broker turnaround each, and Kafka reads a connection's requests
 * one at a time: 10,000 partitions waited for 10,000 turnarounds (25 s on
 * a quiet machine) before the first byte was copied, at every start of
 * mirrord.  So pcopy_sync() only adds the partition to the request of its
 * destination leader being collected during the sweep, and
 * pcopy_sync_flush(), at the end of the sweep, sends one ListOffsets per
 * broker (a broker with more than SYNC_BATCH_MAX waiting gets one request
 * per SYNC_BATCH_MAX).  The partition is in flight (step_inflight) from
 * the moment it is added, so the sweep adds it once.
 */
#define SYNC_BATCH_MAX 1000

struct sync_pend {
	struct pbroker *b;
	struct pctx *x;   /* its partitions, or NULL */
	size_t cap;       /* entries x has room for */
};

struct lo_res_many {
	struct pctx *x;
	struct lo_got {
		int found;
		int16_t error;
		int64_t offset;
	} *got;
};

static void lo_part_many(void *arg, const struct pw_lo_part *lp)
{
	struct lo_res_many *r = arg;
	ssize_t i = ctx_find(r->x, lp->topic, lp->partition);

	if (i < 0)
		return; /* not asked for (or answered twice): ignored */
	r->x->e[i].done = 1;
	r->got[i].found = 1;
	r->got[i].error = lp->error;
	r->got[i].offset = lp->offset;
}

/* The answer for one partition of a SYNC request (p->step == PS_SYNC,
 * the entry's generation). */
static void sync_one(struct pctx *x, struct ppart *p, const struct lo_got *g)
{
	if (g->error != 0) {
		ph_fail(&p->dst, clock_wall_ms(), ph_kafka_cause(g->error),
		    "broker %" PRId32 ": ListOffsets: %s", x->b->id,
		    kerr_name(g->error));
		p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
		p->live.retries++;
		if (leader_error(g->error)) {
			pcluster_want_metadata(x->cl);
		} else if (pl_is_denial(g->error)) {
			char who[300];

			pl_part_fail_denied(p, "ListOffsets of topic %s partition %"
			    PRId32 " answered %s for %s (it needs DESCRIBE on the "
			    "topic)", p->topic, p->index, kerr_name(g->error),
			    pcluster_principal(x->cl, who, sizeof(who)));
		} else {
			pl_part_fail(p, "ListOffsets on the destination: %s",
			    kerr_name(g->error));
		}
		return;
	}
	pcopy_sync_done(p, g->offset);
}

static void sync_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;
	struct lo_res_many r = { .x = x };
	size_t missing = 0;
	int ok = err == KCONN_E_OK;

	if (ok && (r.got = calloc(x->n, sizeof(*r.got))) == NULL)
		ok = 0;
	if (ok && pw_list_offsets_decode(body, x->version, lo_part_many, &r) < 0) {
		log_warnx("%s: ListOffsets v%d response %s", kconn_name(c),
		    x->version, body->why);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed ListOffsets response");
		ok = 0;
	}
	for (size_t i = 0; ok && i < x->n; i++)
		missing += !r.got[i].found;
	if (missing > 0) {
		log_warnx("%s: the ListOffsets response lacks %zu of the %zu "
		    "partitions asked for", kconn_name(c), missing, x->n);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed ListOffsets response");
	}
	/* Each entry holds a reference: a partition lost or failed by the
	 * answer of one before it is still there, dead or of another
	 * generation. */
	for (size_t i = 0; i < x->n; i++) {
		struct ppart *p = x->e[i].p;

		p->step_inflight = 0;
		if (x->cl->dying || p->dead || x->e[i].gen != p->gen ||
		    p->step != PS_SYNC)
			continue;
		if (!ok || !r.got[i].found) {
			p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
			if (!ok) {
				p->live.retries++;
				pcluster_want_metadata(x->cl);
			}
			continue;
		}
		if (r.got[i].error == 0)
			ph_ok(&p->dst, clock_wall_ms());
		sync_one(x, p, &r.got[i]);
	}
	if (!x->cl->dying) {
		if (ok)
			ph_ok(&x->b->health, clock_wall_ms());
		else if (err != KCONN_E_OK)
			ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err, errstr),
			    "broker %" PRId32 ": %s", x->b->id, errstr);
	}
	free(r.got);
	pl_kick(x->pl);
	ctx_free(x);
}

static int sync_cmp(const void *a, const void *b)
{
	const struct ppart *p = *(struct ppart *const *)a;
	const struct ppart *q = *(struct ppart *const *)b;
	int c = strcmp(p->topic, q->topic);

	return c != 0 ? c : (p->index > q->index) - (p->index < q->index);
}

/* Sends sp's request (and forgets it): on any failure its partitions
 * are asked for again by the next sweep. */
static void sync_send(struct pipeline *pl, struct sync_pend *sp)
{
	struct pctx *x = sp->x;
	struct pcluster *dst = pl->dst;
	struct kconn *c;
	struct pw_tp *tps = NULL;
	struct lo_many m;
	char err[256];
	int v = -1;

	sp->x = NULL;
	sp->cap = 0;
	if (x == NULL)
		return;
	if (x->n == 0 || (c = pbroker_conn(sp->b)) == NULL)
		goto unsent;
	v = kconn_pick_version(c, KP_API_LIST_OFFSETS, PW_LIST_OFFSETS_MIN,
	    PW_LIST_OFFSETS_MAX);
	if (v < 0) {
		for (size_t i = 0; i < x->n; i++)
			pl_part_fail(x->e[i].p, "%s broker %s supports no "
			    "ListOffsets version in %d..%d", dst->label,
			    kconn_name(c), PW_LIST_OFFSETS_MIN, PW_LIST_OFFSETS_MAX);
		goto unsent;
	}
	/* Each topic once, its partitions together (the encoder groups
	 * runs of one topic): the entries sorted whole (their first member
	 * is the partition). */
	qsort(x->e, x->n, sizeof(x->e[0]), sync_cmp);
	ctx_group(x);
	if ((tps = calloc(x->n, sizeof(*tps))) == NULL)
		goto unsent;
	for (size_t i = 0; i < x->n; i++) {
		tps[i].topic = x->e[i].p->topic;
		tps[i].partition = x->e[i].p->index;
		tps[i].offset = PW_TS_LATEST;
	}
	x->version = (int16_t)v;
	m.tps = tps;
	m.n = x->n;
	if (kconn_send(c, KP_API_LIST_OFFSETS, (int16_t)v, lo_encode_many, &m,
	    0, 0, sync_response, x, err, sizeof(err)) != 0) {
		log_debug("%s: ListOffsets of %zu partitions: %s", dst->label,
		    x->n, err);
		goto unsent;
	}
	log_debug("%s: ListOffsets of the ends of %zu partitions sent to %s",
	    dst->label, x->n, kconn_name(c));
	free(tps);
	return;
unsent:
	for (size_t i = 0; i < x->n; i++)
		x->e[i].p->step_inflight = 0;
	free(tps);
	ctx_free(x);
}

void pcopy_sync(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;
	struct sync_pend *sp = NULL;
	struct pbroker *b;

	/* The end is read once, with no Produce of p in flight. */
	MR_ASSERT(!p->step_inflight && p->ninflight == 0);
	if (p->mp->state == MPART_PREPARING && (pident_start_wait(p) ||
	    check_destination_topic(p) < 0))
		return;
	if ((b = ppart_leader(p, 1)) == NULL || pbroker_conn(b) == NULL)
		return; /* the next sweep, once there is a leader and a connection */
	for (size_t i = 0; i < pl->nsync_pend; i++)
		if (pl->sync_pend[i].b == b) {
			sp = &pl->sync_pend[i];
			break;
		}
	if (sp == NULL) {
		if (pl->nsync_pend == pl->sync_pend_cap) {
			size_t cap = pl->sync_pend_cap ? 2 * pl->sync_pend_cap : 4;
			struct sync_pend *a = realloc(pl->sync_pend,
			    cap * sizeof(*a));

			if (a == NULL)
				return;
			pl->sync_pend = a;
			pl->sync_pend_cap = cap;
		}
		sp = &pl->sync_pend[pl->nsync_pend++];
		sp->b = b;
		sp->x = NULL;
		sp->cap = 0;
	}
	if (sp->x != NULL && sp->x->n == SYNC_BATCH_MAX)
		sync_send(pl, sp);
	if (sp->x == NULL || sp->x->n == sp->cap) {
		size_t cap = sp->x == NULL ? 16 : MIN(2 * sp->cap, SYNC_BATCH_MAX);
		struct pctx *x;

		if (sp->x == NULL)
			x = ctx_new(pl, pl->dst, b, cap);
		else if ((x = realloc(sp->x, sizeof(*x) +
		    cap * sizeof(x->e[0]))) != NULL)
			/* ctx_add() sets only some of an entry (ctx_new()
			 * zeroes them all). */
			memset(&x->e[sp->cap], 0, (cap - sp->cap) *
			    sizeof(x->e[0]));
		if (x == NULL)
			return; /* asked for again by the next sweep */
		sp->x = x;
		sp->cap = cap;
	}
	ctx_add(sp->x, p, PW_TS_LATEST);
	p->step_inflight = 1;
}

void pcopy_sync_flush(struct pipeline *pl)
{
	for (size_t i = 0; i < pl->nsync_pend; i++)
		sync_send(pl, &pl->sync_pend[i]);
	pl->nsync_pend = 0;
}

static void oor_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;
	struct ppart *p = x->e[0].p;
	struct lo_res r = { .x = x };
	char name[300];

	p->step_inflight = 0;
	if (x->cl->dying || p->dead || x->e[0].gen != p->gen || p->step != PS_OOR)
		goto out;
	if (err != KCONN_E_OK) {
		ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err, errstr),
		    "broker %" PRId32 ": %s", x->b->id, errstr);
		p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
		pcluster_want_metadata(x->cl);
		goto out;
	}
	if (pw_list_offsets_decode(body, x->version, lo_part, &r) < 0 || !r.found) {
		kconn_close(c, KCONN_E_PROTOCOL, "malformed ListOffsets response");
		p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
		goto out;
	}
	if (r.error != 0) {
		ph_cl_fail(x->cl, &p->src, ph_kafka_cause(r.error), "broker %"
		    PRId32 ": ListOffsets: %s", x->b->id, kerr_name(r.error));
		p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
		if (leader_error(r.error))
			pcluster_want_metadata(x->cl);
		else
			pl_part_fail(p, "ListOffsets on the source: %s", kerr_name(r.error));
		goto out;
	}
	ph_ok(&p->src, clock_wall_ms());
	p->live.source_log_start = r.offset;
	if (r.offset <= p->src_fetch) {
		pl_part_fail(p, "fetching source offset %" PRId64 " is out of range "
		    "but the source log starts at %" PRId64 ": the source log ends "
		    "before offset %" PRId64 " (truncated or recreated topic?)",
		    p->src_fetch, r.offset, p->src_fetch);
		goto out;
	}
	log_info("%s: the source log starts at %" PRId64 ", above fetch offset %"
	    PRId64 " (DeleteRecords or retention); fetching from there",
	    pname(p, name, sizeof(name)), r.offset, p->src_fetch);
	/* src_copied stays: the next batch anchors (its base, dst_tail).  A
	 * batch holding the new log start still comes whole (intake()); what
	 * is really gone is reported with it. */
	if (p->deleted_from < 0)
		p->deleted_from = p->src_fetch;
	p->src_fetch = r.offset;
	p->step = PS_RUN;
out:
	pl_kick(x->pl);
	ctx_free(x);
}

void pcopy_oor(struct ppart *p)
{
	send_list_offsets(p, p->pm->src, PW_TS_EARLIEST, oor_response);
}

/* The failover report's source high watermark (pipeline.c part_stopped). */
static void final_hw_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;
	struct ppart *p = x->e[0].p;
	struct lo_res r = { .x = x };

	if (x->cl->dying || p->dead || p->final_ask != 1)
		goto out;
	p->final_ask = 2;
	if (err != KCONN_E_OK) {
		ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err, errstr),
		    "broker %" PRId32 ": %s", x->b->id, errstr);
		goto out;
	}
	if (pw_list_offsets_decode(body, x->version, lo_part, &r) < 0 || !r.found) {
		kconn_close(c, KCONN_E_PROTOCOL, "malformed ListOffsets response");
		goto out;
	}
	if (r.error == 0 && r.offset >= 0) {
		p->live.source_high_watermark = r.offset;
		pl_update_lag(p);
		ph_src_answer(p, clock_wall_ms());
		p->final_ask = 3;
	} else if (r.error != 0) {
		ph_cl_fail(x->cl, &p->src, ph_kafka_cause(r.error), "broker %"
		    PRId32 ": ListOffsets: %s", x->b->id, kerr_name(r.error));
	}
out:
	pl_kick(x->pl);
	ctx_free(x);
}

/*
 * A PAUSED partition's ends (pcopy_paused_end()): the destination end
 * first when this process does not know what was copied (src_done: a
 * start while paused), translated to the source offset it stands for;
 * then the source's high watermark.  A STOPPING one that never synced
 * here asks the destination end the same way, for its failover report.  Nobody writes a paused partition, so
 * the destination end needs no proof here: resuming proves it as always.
 * The same for a FAILED partition whose decision is a realign's (its
 * destination end says what a realign deletes; pipeline.c asks once).
 */
static int paused_dst_to_src(struct ppart *p, int64_t d, int64_t *s)
{
	const struct mpart *mp = p->mp;

	*s = d;
	if (mp == NULL || mpart_nanchors(mp) == 0)
		return 0;
	return xlate_dst_to_src(mp->map, d, s) == XLATE_UNMAPPED ? -1 : 0;
}

static void paused_end_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;
	struct ppart *p = x->e[0].p;
	struct lo_res r = { .x = x };
	int64_t s;

	p->paused_lo = 0;
	if (x->cl->dying || p->dead || x->e[0].gen != p->gen || p->mp == NULL ||
	    (p->mp->state != MPART_PAUSED && p->mp->state != MPART_STOPPING &&
	    p->mp->state != MPART_FAILED))
		goto out;
	if (err != KCONN_E_OK) {
		ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err, errstr),
		    "broker %" PRId32 ": %s", x->b->id, errstr);
		goto out;
	}
	if (pw_list_offsets_decode(body, x->version, lo_part, &r) < 0 || !r.found) {
		kconn_close(c, KCONN_E_PROTOCOL, "malformed ListOffsets response");
		goto out;
	}
	if (r.error != 0) {
		ph_cl_fail(x->cl, x->cl->is_source ? &p->src : &p->dst,
		    ph_kafka_cause(r.error), "broker %" PRId32 ": ListOffsets: %s",
		    x->b->id, kerr_name(r.error));
		if (leader_error(r.error))
			pcluster_want_metadata(x->cl);
		goto out;
	}
	ph_ok(&x->b->health, clock_wall_ms());
	if (!x->cl->is_source) {
		ph_ok(&p->dst, clock_wall_ms());
		p->live.destination_end = r.offset;
		if (paused_dst_to_src(p, r.offset, &s) == 0) {
			p->src_done = s;
			if (s > 0 && p->last_src < 0)
				p->last_src = s - 1;
			pl_update_lag(p);
			/* The source's end next, at once. */
			p->paused_lo_at = 0;
		}
		goto out;
	}
	p->live.source_high_watermark = r.offset;
	pl_update_lag(p);
	ph_src_answer(p, clock_wall_ms());
out:
	pl_kick(x->pl);
	ctx_free(x);
}

int pcopy_paused_end(struct ppart *p)
{
	int dst = p->src_done < 0;
	struct pcluster *cl = dst ? p->pm->pl->dst : p->pm->src;

	if (cl == NULL || send_list_offsets(p, cl, PW_TS_LATEST,
	    paused_end_response) != 0)
		return -1;
	p->step_inflight = 0;   /* not a step: resuming does not wait for it */
	p->paused_lo = 1;
	return 0;
}

int pcopy_final_hw(struct ppart *p)
{
	if (p->pm->src == NULL || send_list_offsets(p, p->pm->src, PW_TS_LATEST,
	    final_hw_response) != 0)
		return -1;
	p->step_inflight = 0;   /* not a step: it does not hold the stop */
	return 0;
}

/* ---- Fetch ------------------------------------------------------------------ */

/*
 * Memory.  Everything held for record data counts against
 * pipeline.max_inflight_bytes_total (struct pipeline: qbytes, ubytes,
 * fetch_reserved, the destination connections' unsent Produce bytes).  A
 * Fetch reserves the largest answer it may get before it goes: its
 * response limit and each partition's limit come from what is left under
 * the cap, plus FETCH_PART_OVERHEAD a partition (and its topic name) for
 * the answer's framing.  Half of what is left, not all of it: while an
 * answer is taken in its batches are copied into the queues before its
 * buffer is freed, so the reservation is twice the answer (x->reserved
 * for the answer, x->copies for the copies, which move into the queued
 * bytes as they are made, fetch_part()); the rest is released once the
 * answer has been taken in (fetch_response()).  A Produce request is a
 * copy of its batches too until the socket takes it: one is built only
 * while it fits under the cap, or when nothing else is being written
 * (produce_request()).  A late answer to a Fetch that timed out is dropped
 * by kconn as it arrives, never held.
 * Kafka may still answer with more than asked when the first batch alone
 * is larger (KIP-74: progress), so the reservation grows to the answer's
 * size while it is taken in (fetch_reserve_answer()).
 */
#define FETCH_PART_OVERHEAD 64
#define FETCH_MIN_BYTES 16384

/* A Fetch's share of the cap: every source broker of every mirror may
 * have one in flight at once, so the first ones asked (and answered) in a
 * round cannot take all there is and starve the others. */
static int64_t fetch_share(const struct pipeline *pl)
{
	int64_t n = 0;

	for (size_t i = 0; i < pl->nmirrors; i++)
		if (!pl->mirrors[i]->dead && pl->mirrors[i]->src != NULL)
			n += (int64_t)pl->mirrors[i]->src->nbrokers;
	return tcap(pl) / 2 / MAX(n, 1);
}

/* The most a Fetch may get for its answer now (0: nothing left): half of
 * what is left under the cap (the answer and its copies), at most its
 * share. */
static int64_t fetch_room(struct pipeline *pl, int64_t share)
{
	int64_t avail = tcap(pl) - (int64_t)pl_held_now(pl);

	return avail > 0 ? MIN(avail / 2, share) : 0;
}

/* A partition's share of a Fetch's reservation: its limit plus framing. */
static int64_t fetch_part_overhead(const struct ppart *p)
{
	return FETCH_PART_OVERHEAD + (int64_t)strlen(p->topic);
}

static void fetch_reserve_answer(struct pctx *x, const struct kr *body)
{
	size_t len = kr_left(body);

	if (len > x->reserved) {
		x->pl->fetch_reserved += len - x->reserved;
		x->reserved = len;
		(void)pl_held_note(x->pl);
	}
}

static void fetch_release(struct pctx *x)
{
	/* fetch_reserved is the sum of the Fetches' reserved + copies. */
	MR_ASSERT_MSG(x->pl->fetch_reserved >= x->reserved + x->copies,
	    "%zu < %zu + %zu", x->pl->fetch_reserved, x->reserved, x->copies);
	x->pl->fetch_reserved -= x->reserved + x->copies;
	x->reserved = x->copies = 0;
}

/* moved bytes of x's answer were copied into the queues (and counted
 * there): their share of the reservation goes. */
static void fetch_copied(struct pctx *x, size_t moved)
{
	moved = MIN(moved, x->copies);
	MR_ASSERT(x->pl->fetch_reserved >= moved);
	x->copies -= moved;
	x->pl->fetch_reserved -= moved;
}

struct fetch_req {
	struct pw_fetch_req req;
	struct pw_tp *tps;
	size_t n;
	int in_session;             /* sess applies (else no session, 0/-1) */
	struct pw_fetch_session sess;
};

static int fetch_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct fetch_req *f = msg;

	if (f->in_session)
		return pw_fetch_encode_session(w, version, &f->req, &f->sess,
		    f->tps, f->n);
	return pw_fetch_encode(w, version, &f->req, f->tps, f->n);
}

/*
 * Fetch sessions (KIP-227).  The broker holds each session's partitions
 * with the fetch position last sent for them and answers an incremental
 * Fetch with only the partitions that have something new (records, a
 * moved high watermark or log start, an error): one absent from the
 * answer has nothing new.  So every Fetch to a broker in a session still
 * stands for all the partitions to fetch from it now (its context lists
 * them all), but names only the ones added or whose position, limit or
 * epochs changed since they were last sent, and forgets the ones no
 * longer fetched from it (paused, stopped, halted, at the memory cap,
 * backing off, lost to another instance, removed, led by another broker):
 * the broker must not go on reading a partition for us at a position
 * nobody updates.  Any failure (the request, a session error, a
 * reconnection) makes the next Fetch a full one that opens a new session;
 * a broker that answers session id 0 to that (the librdkafka mock, a full
 * session cache) is fetched in full, without session, and asked again
 * after PL_FSESS_RETRY requests.
 */
#define PL_FSESS_RETRY 100

/* The broker's session for this request, NULL to send none. */
static struct pfsess *fetch_session(struct pbroker *b,
    const struct mirrorconf *mc, int version, struct kconn *c)
{
	struct pfsess *s = b->fsess;

	if (!mc->fetch_sessions || version < 7) {
		if (s != NULL && s->epoch != 0)
			pfsess_reset(s, 1); /* turned off: start anew if on again */
		return NULL;
	}
	if (s == NULL && (s = b->fsess = pfsess_new()) == NULL)
		return NULL;
	if (s->conn != c) {
		/* A new connection: whatever was in flight on the old one
		 * may or may not have reached the broker. */
		if (s->epoch != 0)
			pfsess_reset(s, 1);
		s->conn = c;
		s->retry_in = 0;
	}
	/* A session holds topics by name or by id, never both (the broker
	 * answers FETCH_SESSION_TOPIC_ID_ERROR); a topic whose id changed
	 * (deleted and created again) is a new partition to the broker. */
	if (s->epoch != 0 && (s->stale || s->by_id != (version >= PW_FETCH_BY_ID)))
		pfsess_reset(s, 1);
	s->stale = 0;
	s->by_id = version >= PW_FETCH_BY_ID;
	if (s->retry_in > 0) {
		s->retry_in--;
		return NULL;
	}
	return s;
}

static int tp_cmp(const void *x, const void *y)
{
	const struct pw_tp *a = x, *b = y;
	int c = strcmp(a->topic, b->topic);

	if (c != 0)
		return c;
	return a->partition < b->partition ? -1 : a->partition > b->partition;
}

/*
 * Puts the request's partitions (f->tps, in x's order: all of them) in
 * session s: a full request (epoch 0) makes them the session; an
 * incremental one keeps in f->tps only those added or changed and lists
 * the session's others in f->sess.forgotten (their names are the
 * caller's to free).  -1 when memory is short (the session is then reset).
 */
static int fetch_session_plan(struct pfsess *s, struct fetch_req *f,
    struct pctx *x)
{
	uint32_t round = ++s->round;
	size_t keep = 0, nf = 0, touched = 0;
	struct pw_tp *fg = NULL;

	if (s->epoch == 0)
		pfsess_reset(s, 1);
	for (size_t i = 0; i < f->n; i++) {
		const struct pw_tp *t = &f->tps[i];
		int added;
		struct pfs_ent *e = pfsess_get(s, t->topic, t->partition, &added);

		if (e == NULL)
			goto oom;
		touched += e->round != round;
		e->round = round;
		e->ctx = i;
		if (!added && s->by_id &&
		    memcmp(&e->tid, &t->topic_id, sizeof(e->tid)) != 0) {
			/* Sent again under its new id below; the broker
			 * still holds it under the old one until the next
			 * request, which starts a new session. */
			s->stale = 1;
			added = 1;
		}
		e->tid = t->topic_id;
		if (added || e->offset != t->offset || e->max_bytes != t->max_bytes ||
		    e->leader_epoch != t->leader_epoch ||
		    e->last_epoch != t->last_epoch) {
			e->offset = t->offset;
			e->max_bytes = t->max_bytes;
			e->leader_epoch = t->leader_epoch;
			e->last_epoch = t->last_epoch;
			f->tps[keep++] = *t; /* stays grouped by topic */
		}
	}
	f->n = keep;
	if (s->n > touched) {
		size_t cap = s->n - touched;

		if ((fg = calloc(cap, sizeof(*fg))) == NULL)
			goto oom;
		for (size_t k = 0; k < s->cap && nf < cap; k++) {
			struct pfs_ent *e = &s->tab[k];

			if (e->state != 1 || e->round == round)
				continue;
			fg[nf].partition = e->partition;
			fg[nf].topic_id = e->tid;
			fg[nf++].topic = pfsess_remove(s, e);
		}
		qsort(fg, nf, sizeof(*fg), tp_cmp);
	}
	f->in_session = 1;
	f->sess.id = s->id;
	f->sess.epoch = s->epoch;
	f->sess.forgotten = fg;
	f->sess.nforgotten = nf;
	x->sess = s;
	x->sround = round;
	x->sfull = s->epoch == 0;
	return 0;
oom:
	pfsess_reset(s, 1);
	return -1;
}

static void fetch_forgotten_free(struct fetch_req *f)
{
	for (size_t i = 0; i < f->sess.nforgotten; i++)
		free((char *)(uintptr_t)f->sess.forgotten[i].topic);
	free((void *)(uintptr_t)f->sess.forgotten);
	f->sess.forgotten = NULL;
	f->sess.nforgotten = 0;
}

/* The mirror a source cluster belongs to. */
static const char *fetch_mirror_name(const struct pcluster *cl)
{
	for (size_t i = 0; i < cl->pl->nmirrors; i++)
		if (cl->pl->mirrors[i]->src == cl)
			return cl->pl->mirrors[i]->name;
	return "";
}

/* What the answer to a Fetch in session x->sess means for the session. */
static void fetch_session_answer(struct pctx *x, struct kconn *c, int16_t top,
    int32_t sid)
{
	struct pfsess *s = x->sess;
	const char *mirror = x->b->cl->label;

	if (top == KERR_FETCH_SESSION_ID_NOT_FOUND ||
	    top == KERR_INVALID_FETCH_SESSION_EPOCH ||
	    top == KERR_FETCH_SESSION_TOPIC_ID_ERROR) {
		log_info("%s: %s: Fetch session %" PRId32 " at epoch %" PRId32
		    ": %s; the next Fetch lists every partition", mirror,
		    kconn_name(c), s->id, s->epoch, kerr_name(top));
		if (x->pl->ms != NULL)
			metrics_counter_inc(METRICS_SERIES(MSTD(x->pl->ms,
			    FETCH_SESSION_ERRORS), fetch_mirror_name(x->cl),
			    kerr_name(top)));
		pfsess_reset(s, top != KERR_FETCH_SESSION_ID_NOT_FOUND);
		return;
	}
	if (top != 0) {
		pfsess_reset(s, 1);
		return;
	}
	if (x->sfull) {
		if (sid == 0) {
			/* No session (not supported, or no room for one). */
			pfsess_reset(s, 0);
			s->retry_in = PL_FSESS_RETRY;
			return;
		}
		if (sid != s->id)
			log_debug("%s: %s: Fetch session %" PRId32 " opened "
			    "(%zu partitions)", mirror, kconn_name(c), sid, s->n);
		s->id = sid;
		s->epoch = 1;
		return;
	}
	if (sid != s->id) {
		log_info("%s: %s: Fetch session %" PRId32 " answered as "
		    "session %" PRId32 "; the next Fetch lists every partition",
		    mirror, kconn_name(c), s->id, sid);
		pfsess_reset(s, 0);
		return;
	}
	s->epoch = pfsess_next_epoch(s->epoch);
}

/*
 * Nothing queued and nothing in flight: every source offset before
 * src_fetch is on the destination or was skipped (markers, aborted data),
 * so the lag counts from there.  Without this a log ending in a commit
 * marker would show a lag of 1 for ever.
 */
static void skipped_done(struct ppart *p)
{
	if (p->step == PS_RUN && p->ninflight == 0 && TAILQ_EMPTY(&p->q) &&
	    p->src_done >= 0 && p->src_fetch > p->src_done) {
		p->src_done = p->src_fetch;
		pl_update_lag(p);
	}
}

/* Queues one batch (its bytes are copied, or kept in the Fetch answer's
 * pinned buffer; own: a merged batch's malloc'd buffer b lies in, taken
 * over whatever happens; walked: b's records are known to have no holes).
 * straddle: it starts before the fetch position; it is copied whole if
 * none of its records is before the copy position (src_copied), else p
 * FAILED. */
static int enqueue_own(struct ppart *p, const struct batch *b, int straddle,
    uint8_t *own, int walked)
{
	struct pipeline *pl = p->pm->pl;
	struct pbatch *q = calloc(1, sizeof(*q));
	struct batch_reencoded re;
	char err[256];
	size_t gap = b->base_offset != p->src_copied ? 1 : 0;

	if (q == NULL) {
		free(own);
		return -1;
	}
	q->src_base = b->base_offset;
	q->src_next = batch_next_offset(b);
	q->dst_base = p->dst_tail;
	q->epoch = b->leader_epoch;
	q->max_ts = b->max_timestamp;
	if (own == NULL && !walked && batch_has_holes(b)) {
		if (batch_reencode_contiguous(b, p->dst_tail, (size_t)pcap(pl) * 4, &re,
		    err, sizeof(err)) != 0) {
			free(q);
			pl_part_fail(p, "source batch at offset %" PRId64 " has offset "
			    "holes and cannot be re-encoded: %s", b->base_offset, err);
			return -1;
		}
		if (straddle && re.npairs > 0 && re.pairs[0].src < p->src_copied) {
			pl_part_fail(p, "source batch %" PRId64 "..%" PRId64 " straddles "
			    "the resume offset %" PRId64 ": its record at %" PRId64 " is "
			    "before it, and a batch cannot be split", b->base_offset,
			    batch_last_offset(b), p->src_copied, re.pairs[0].src);
			batch_reencoded_fini(&re);
			free(q);
			return -1;
		}
		q->buf = re.buf;
		q->len = re.len;
		q->count = re.record_count;
		q->anchors = calloc(re.npairs + gap, sizeof(*q->anchors));
		if (q->anchors == NULL) {
			batch_reencoded_fini(&re);
			free(q);
			return -1;
		}
		for (size_t i = 0; i < re.npairs; i++)
			q->anchors[q->nanchors++] = re.pairs[i];
		re.buf = NULL;
		batch_reencoded_fini(&re);
		p->live.offset_holes++;
	} else {
		if (straddle && b->base_offset < p->src_copied) {
			free(q);
			pl_part_fail(p, "source batch %" PRId64 "..%" PRId64 " straddles "
			    "the resume offset %" PRId64 ": a batch cannot be split",
			    b->base_offset, batch_last_offset(b), p->src_copied);
			return -1;
		}
		struct pbuf_pin *pin = p->pm->pl->taking;

		q->len = b->len;
		q->count = b->record_count;
		q->walked = batch_codec(b) == BATCH_CODEC_NONE;
		if (gap)
			q->anchors = calloc(1, sizeof(*q->anchors));
		if (gap && q->anchors == NULL) {
			free(own);
			pbatch_free(q);
			return -1;
		}
		if (own != NULL)
			q->buf = own; /* a merged batch: its own bytes */
		else if (pin != NULL && b->p >= pin->buf &&
		    b->len <= pin->size - (size_t)(b->p - pin->buf)) {
			/* In the answer's buffer, which stays (pbuf_pin). */
			q->buf = (uint8_t *)(uintptr_t)b->p;
			q->pin = pin;
			pin->refs++;
			/* Its bytes move from the pin's into the queued ones. */
			MR_ASSERT(*pin->extra >= b->len);
			*pin->extra -= b->len;
		} else {
			if ((q->buf = malloc(b->len)) == NULL) {
				pbatch_free(q);
				return -1;
			}
			memcpy(q->buf, b->p, b->len);
		}
		if (gap) {
			q->anchors[0].src = b->base_offset;
			q->anchors[0].dst = p->dst_tail;
			q->nanchors = 1;
			p->live.offset_holes++;
		}
	}
	/* The queue's source offsets only grow: intake() takes a batch
	 * only when it ends past the fetch position, never below src_copied. */
	MR_ASSERT_MSG(q->src_next > p->src_copied && q->dst_base == p->dst_tail,
	    "batch %" PRId64 "..%" PRId64 ", copied to %" PRId64, q->src_base,
	    q->src_next, p->src_copied);
	TAILQ_INSERT_TAIL(&p->q, q, link);
	p->qbytes += q->len;
	pl->qbytes += q->len;
	if ((int64_t)pl->qbytes > pl->totals.queued_bytes_peak)
		pl->totals.queued_bytes_peak = (int64_t)pl->qbytes;
	(void)pl_held_note(pl);
	p->src_copied = q->src_next;
	p->dst_tail += q->count;
	return 0;
}

static int enqueue(struct ppart *p, const struct batch *b, int straddle)
{
	return enqueue_own(p, b, straddle, NULL, 0);
}

/*
 * Coalescing (mirror.coalesce.max.bytes, batch.h's batch_merge_*): intake()
 * gathers consecutive mergeable batches of one Fetch answer into a run and
 * queues the run as one batch.  Nothing downstream knows the difference: a
 * queued batch covers source offsets src_base..src_next-1 and lands at
 * dst_base, whether the source had it as one batch or twenty, and every
 * run ends where a source batch ends, so a restart resumes at a source
 * batch's start.  A run of one is queued as it came (no copy).
 */
struct crun {
	int on;
	struct batch first;
	struct batch_merge m; /* m.buf NULL until a second batch joins */
};

/* Only batches of at most 1/CRUN_SMALL of the limit are merged: merging
 * larger ones saves the destination little per-batch work and costs a copy
 * of their bytes (bench-kafka's 256 KiB batches with a 512 KiB limit:
 * 1.4x mirrord's CPU per GB, MB/s level). */
#define CRUN_SMALL 4

static size_t crun_cap(const struct ppart *p)
{
	const struct mirrorconf *mc = p->pm->conf;
	size_t cap = mc != NULL && mc->coalesce_max_bytes > 0 ?
	    (size_t)mc->coalesce_max_bytes : 0;

	return p->merge_limit > 0 && p->merge_limit < cap ? p->merge_limit : cap;
}

static size_t crun_len(const struct crun *r)
{
	return !r->on ? 0 : r->m.buf != NULL ? r->m.len : r->first.len;
}

/* Queues the run (and closes it): 0, or -1 with p FAILED. */
static int crun_flush(struct ppart *p, struct crun *r)
{
	struct batch mb;
	char err[256];
	int rc;

	if (!r->on)
		return 0;
	r->on = 0;
	if (r->m.buf == NULL || r->m.nbatches < 2) {
		batch_merge_fini(&r->m);
		/* Walked when the run began (batch_mergeable()). */
		return enqueue_own(p, &r->first, 0, NULL, 1);
	}
	batch_merge_finish(&r->m);
	if (batch_parse(r->m.buf, r->m.len, &mb, err, sizeof(err)) != BATCH_OK) {
		pl_part_fail(p, "merging source batches %" PRId64 "..%" PRId64
		    ": the merged batch does not parse: %s", r->m.base_offset,
		    r->m.next_offset - 1, err);
		batch_merge_fini(&r->m);
		return -1;
	}
	p->live.coalesced += r->m.nbatches - 1;
	rc = enqueue_own(p, &mb, 0, r->m.buf, 1);
	if (rc == 0)
		TAILQ_LAST(&p->q, pbatchq)->merged = r->m.nbatches;
	r->m.buf = NULL;
	batch_merge_fini(&r->m);
	return rc;
}

/* Adds b to the open run: 0 added, 1 it does not join (flush first), -1
 * p FAILED. */
static int crun_add(struct ppart *p, struct crun *r, const struct batch *b,
    size_t cap)
{
	char err[256];
	int rc;

	if (r->m.buf == NULL &&
	    batch_merge_start(&r->m, &r->first, cap, err, sizeof(err)) != 0) {
		pl_part_fail(p, "merging source batches at offset %" PRId64 ": %s",
		    r->first.base_offset, err);
		return -1;
	}
	rc = batch_merge_add(&r->m, b, err, sizeof(err));
	if (rc < 0)
		pl_part_fail(p, "merging the source batch at offset %" PRId64
		    " into the one at %" PRId64 ": %s", b->base_offset,
		    r->first.base_offset, err);
	return rc;
}

/*
 * The first batch after an out-of-range Fetch (a source log start above the
 * fetch position): the offsets between the old position and this batch
 * were deleted before mirrord copied them, and become a jump in the
 * translation map (enqueue()'s anchor).  A batch that holds the new log
 * start begins below it and is copied whole, as it still stands in the
 * source log (a consumer would skip its records below the log start).
 */
static void report_deleted(struct ppart *p, const struct batch *b)
{
	char name[300];
	int64_t from = p->deleted_from;

	p->deleted_from = -1;
	if (b->base_offset > from) {
		p->live.source_deleted += b->base_offset - from;
		p->live.offset_holes++;
		log_warnx("%s: source records %" PRId64 "..%" PRId64 " deleted before "
		    "they were mirrored (DeleteRecords or retention); continuing at "
		    "%" PRId64 "%s", pname(p, name, sizeof(name)), from,
		    b->base_offset - 1, b->base_offset, b->base_offset <
		    p->src_fetch ? ", whose batch holds the new source log start "
		    "and is copied whole" : "");
	} else {
		log_info("%s: the source log start %" PRId64 " is inside the batch "
		    "%" PRId64 "..%" PRId64 " (DeleteRecords inside a batch): copied "
		    "whole, nothing skipped", pname(p, name, sizeof(name)),
		    p->src_fetch, b->base_offset, batch_last_offset(b));
	}
}

/*
 * The records of one partition of a Fetch response.  What a read_committed
 * consumer skips (transaction markers, aborted data: pipeline/txn.h) is not
 * copied; the gap it leaves becomes an anchor.
 */
static void intake(struct ppart *p, const struct pw_fetch_part *fp)
{
	struct batch_iter it;
	struct batch b;
	struct ptxn txn;
	struct crun run;
	size_t cap = crun_cap(p);
	char err[256];
	int rc, v;

	memset(&run, 0, sizeof(run));
	if (fp->records.len <= 0)
		return;
	if (ptxn_init(&txn, fp->aborted, fp->naborted, err, sizeof(err)) != 0) {
		pl_part_fail(p, "Fetch from the source at offset %" PRId64 ": the "
		    "partition's aborted transaction list cannot be used: %s",
		    p->src_fetch, err);
		return;
	}
	batch_iter_init(&it, fp->records.p, (size_t)fp->records.len);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		int64_t next = batch_next_offset(&b);

		if (next <= p->src_fetch) {
			/* Before our position (a batch we have); the consumer's
			 * walk still sees it. */
			if (ptxn_batch(&txn, &b, err, sizeof(err)) == PTXN_ERROR) {
				pl_part_fail(p, "source batch at offset %" PRId64 ": %s",
				    b.base_offset, err);
				goto out;
			}
			continue;
		}
		if (p->deleted_from >= 0)
			report_deleted(p, &b);
		if (batch_verify_crc(&b, err, sizeof(err)) != 0) {
			p->live.crc_failures++;
			pl_part_fail(p, "CRC-32C mismatch in the source: %s", err);
			goto out;
		}
		v = ptxn_batch(&txn, &b, err, sizeof(err));
		if (v == PTXN_ERROR) {
			pl_part_fail(p, "source batch at offset %" PRId64 ": %s",
			    b.base_offset, err);
			goto out;
		}
		if (v == PTXN_MARKER || v == PTXN_ABORTED || batch_is_empty(&b)) {
			p->src_fetch = next; /* never copied */
			p->fetch_epoch = b.leader_epoch;
			p->fetch_epoch_end = next;
			continue;
		}
		if (cap > 0 && b.base_offset >= p->src_fetch &&
		    batch_mergeable_header(&b, cap / CRUN_SMALL)) {
			/* Into the open run (whose add walks b's records), or
			 * a new run (b walked here, once). */
			if (run.on && (int64_t)(p->qbytes + crun_len(&run) +
			    b.len) <= pcap(p->pm->pl)) {
				int joined = crun_add(p, &run, &b, cap);

				if (joined < 0) {
					run.on = 0;
					goto out;
				}
				if (joined == 0)
					goto taken;
			}
			if (crun_flush(p, &run) < 0)
				goto fail_queue;
			if (p->qbytes > 0 &&
			    (int64_t)(p->qbytes + b.len) > pcap(p->pm->pl))
				break; /* no room: fetched again later */
			if (batch_has_holes(&b))
				goto plain;
			run.on = 1;
			run.first = b;
			goto taken;
		}
		if (crun_flush(p, &run) < 0)
			goto fail_queue;
		if (p->qbytes > 0 && (int64_t)(p->qbytes + b.len) > pcap(p->pm->pl))
			break; /* no room: fetched again later */
plain:
		if (enqueue(p, &b, b.base_offset < p->src_fetch) < 0)
			goto fail_queue;
taken:
		p->src_fetch = next;
		p->fetch_epoch = b.leader_epoch;
		p->fetch_epoch_end = next;
	}
	if (rc == BATCH_ERROR)
		pl_part_fail(p, "malformed record batch from the source at fetch "
		    "offset %" PRId64 ": %s", p->src_fetch, err);
	if (crun_flush(p, &run) < 0)
		goto fail_queue;
	goto out;
fail_queue:
	if (p->step == PS_RUN)
		pl_part_fail(p, "out of memory queueing a batch");
out:
	batch_merge_fini(&run.m);
	ptxn_fini(&txn);
}

static void mwrite_begin(struct ppart *p, uint32_t og, int kind, int64_t off,
    const char *what);
static void mwrite_cancel(struct ppart *p);
static void mwrite_done(void *arg, int code, const char *msg);
enum { MW_EPOCH, MW_ANCHORS, MW_RETRACT, MW_PRODUCER, MW_TRIM };

/*
 * Drops the translation anchors and epoch-history entries below both logs'
 * start offsets (nobody can ask for those offsets any more).  Checking is
 * two bisections; a record is written only when something goes, and then
 * not again for PL_TRIM_EVERY_MS on that partition.  Asynchronous, as p's
 * other metadata writes (one in flight at a time: with one in flight the
 * trim waits for a later call); mwrite_done() logs the outcome.
 */
#define PL_TRIM_EVERY_MS 60000
static void maybe_trim(struct ppart *p)
{
	struct mpart *mp = p->mp;
	int64_t s = p->live.source_log_start, d = p->dst_log_start, now;
	char msg[512], name[300];
	uint32_t og = p->own_gen;
	size_t dropped;
	int r, started;

	if (mp == NULL || s < 0 || d < 0 || (mpart_nanchors(mp) < 2 && mp->nepochs < 2))
		return;
	now = clock_mono_ms();
	if (now < p->trim_at || p->mwrite)
		return;
	mwrite_begin(p, og, MW_TRIM, 0, "the trim of the translation map");
	r = mpart_trim_async(p->pm->pl->st, mp, s, d, &dropped, mwrite_done, p,
	    &started, msg, sizeof(msg));
	if (!started)
		mwrite_cancel(p);
	if (p->own_gen != og)
		return;
	if (r != 0) {
		p->trim_at = now + PL_TRIM_EVERY_MS;
		log_warnx("%s: trimming the translation map: %s",
		    pname(p, name, sizeof(name)), msg);
	} else if (dropped > 0) {
		p->trim_at = now + PL_TRIM_EVERY_MS;
		if (started)   /* for the line mwrite_done() logs */
			snprintf(p->mwrite_what, sizeof(p->mwrite_what), "source "
			    "offset %" PRId64 " and destination offset %" PRId64
			    " (the log starts): %zu entries dropped", s, d,
			    dropped);
		else           /* written at once (no event loop) */
			log_info("%s: translation map trimmed below source offset "
			    "%" PRId64 " and destination offset %" PRId64 " (the "
			    "log starts): %zu entries dropped, %zu anchors and %zu "
			    "epochs kept", pname(p, name, sizeof(name)), s, d,
			    dropped, mpart_nanchors(mp), mp->nepochs);
	}
}

/* fetch_part(): the context entry of fp, through the session's table
 * when there is one (an incremental answer has its own order). */
static ssize_t fetch_find(struct pctx *x, const struct pw_fetch_part *fp)
{
	if (x->sess != NULL && x->sround == x->sess->round) {
		struct pfs_ent *e = pfsess_find(x->sess, fp->topic, fp->partition);

		if (e != NULL && e->round == x->sround && e->ctx < x->n &&
		    !x->e[e->ctx].done && x->e[e->ctx].p->index == fp->partition &&
		    kstr_eq(fp->topic, x->e[e->ctx].p->topic))
			return (ssize_t)e->ctx;
	}
	return fetch_lookup(x, fp->topic, fp->partition);
}

/*
 * A partition an incremental answer left out has nothing new: no records,
 * the high watermark, last stable offset and log start of the answer
 * before.  What a sessionless Fetch's empty answer did for it is done
 * elsewhere too (the lag and the offsets skipped after trailing markers:
 * produce answers; a log start that moved is news), except the warning
 * that the last stable offset stands still below the high watermark: it
 * is noted here, for the partitions behind only (no work per idle one).
 */
static void fetch_unchanged(struct pctx *x, size_t i)
{
	struct ppart *p = x->e[i].p;

	if (p->dead || x->e[i].gen != p->gen || p->step != PS_RUN)
		return;
	/* The source's end is confirmed as of now. */
	ph_src_answer(p, clock_wall_ms());
	if (p->lso_since != 0 && !p->lso_warned)
		pl_note_lso(p, p->live.last_stable_offset,
		    p->live.source_high_watermark);
}

/*
 * A Fetch v13+ answer names topics by id: the part with its topic's name,
 * from the request's entry of that id (entries come a topic at a time, and
 * answers in the order asked, so the search from the last one found is
 * short).  -1: an id the request did not ask for.
 */
static int fetch_named(struct pctx *x, const struct pw_fetch_part *fp,
    struct pw_fetch_part *out)
{
	for (size_t k = 0; k < x->n; k++) {
		size_t i = (x->id_hint + k) % x->n;

		if (memcmp(&x->e[i].tid, &fp->topic_id, sizeof(fp->topic_id)) == 0) {
			x->id_hint = i;
			*out = *fp;
			out->topic = kstr_c(x->e[i].p->topic);
			return 0;
		}
	}
	return -1;
}

static void fetch_part(void *arg, const struct pw_fetch_part *fp0)
{
	struct pctx *x = arg;
	const struct pw_fetch_part *fp = fp0;
	struct pw_fetch_part named;
	ssize_t i;
	struct ppart *p;
	char name[300];
	size_t held;

	if (x->version >= PW_FETCH_BY_ID) {
		if (fetch_named(x, fp0, &named) != 0)
			return;
		fp = &named;
	}
	if ((i = fetch_find(x, fp)) < 0)
		return;
	x->e[i].done = 1;
	x->e[i].got = fp->error == 0 && fp->records.len > 0;
	p = x->e[i].p;
	p->fetch_inflight = 0;
	if (p->dead || x->e[i].gen != p->gen || p->step != PS_RUN ||
	    x->e[i].offset != p->src_fetch) {
		x->news = 1;
		return;
	}
	if (fp->error == 0 && fp->records.len <= 0 && fp->diverging_epoch < 0 &&
	    fp->high_watermark == p->live.source_high_watermark &&
	    fp->last_stable_offset == p->live.last_stable_offset &&
	    (fp->log_start_offset < 0 ||
	    fp->log_start_offset == p->live.source_log_start)) {
		/* Nothing new: what an incremental answer leaving it out
		 * does (an idle source's common case). */
		fetch_unchanged(x, (size_t)i);
		skipped_done(p);
		return;
	}
	x->news = 1;
	if (fp->error == 0) {
		if (pepoch_fetch_diverged(p, fp->diverging_epoch, fp->diverging_end))
			return;
		p->live.source_high_watermark = fp->high_watermark;
		if (fp->log_start_offset >= 0)
			p->live.source_log_start = fp->log_start_offset;
		pl_note_lso(p, fp->last_stable_offset, fp->high_watermark);
		pl_update_lag(p);
		ph_src_answer(p, clock_wall_ms());
		held = p->qbytes;
		intake(p, fp);
		if (!p->dead && p->qbytes > held)
			fetch_copied(x, p->qbytes - held);
		skipped_done(p);
		if (!p->dead)
			maybe_trim(p);
		return;
	}
	pl_kafka_error(x->cl, 1, fp->error);
	p->live.retries++;
	if (fp->error == KERR_OFFSET_OUT_OF_RANGE) {
		log_info("%s: fetch offset %" PRId64 " out of range on the source",
		    pname(p, name, sizeof(name)), p->src_fetch);
		pcluster_want_metadata(x->cl);   /* recreated? (pipeline/ident.c) */
		p->step = PS_OOR;
		return;
	}
	ph_cl_fail(x->cl, &p->src, ph_kafka_cause(fp->error), "broker %" PRId32
	    ": Fetch at offset %" PRId64 ": %s", x->b->id, p->src_fetch,
	    kerr_name(fp->error));
	p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
	if (leader_error(fp->error)) {
		/* Also what a topic being deleted answers: wait for news. */
		p->src_gone = 1;
		p->src_gone_gen = x->cl->md_gen;
		pcluster_want_metadata(x->cl);
		return;
	}
	if (fp->error == KERR_TOPIC_AUTHORIZATION_FAILED ||
	    fp->error == KERR_CLUSTER_AUTHORIZATION_FAILED) {
		/*
		 * The source refuses mirrord's principal: nothing to decide
		 * and nothing lost.  The partition stays where it is, shown
		 * STALLED with the refusal (pipeline/health.c), and is fetched
		 * again every mirror.fetch.backoff.ms until an ACL allows it.
		 */
		p->not_before = clock_mono_ms() + MAX(p->pm->conf != NULL ?
		    p->pm->conf->fetch_backoff_ms : 1000, pl_backoff_ms(x->pl));
		return;
	}
	pl_part_fail(p, "Fetch from the source at offset %" PRId64 ": %s",
	    p->src_fetch, kerr_name(fp->error));
}

/*
 * The answer's buffer, when kconn read it into one of its own: taken over,
 * so the batches queued from it point into it instead of being copied
 * (struct pbuf_pin; enqueue()).  Its bytes move from the answer's
 * reservation into pl->pin_extra, from where each batch queued moves its
 * own into the queued bytes (fetch_copied() releases the copy it did not
 * need); the buffer is freed with the last batch in it.  NULL: batches are
 * copied.
 */
static struct pbuf_pin *fetch_pin(struct pctx *x, struct kconn *c)
{
	struct pbuf_pin *pin = calloc(1, sizeof(*pin));
	size_t moved;

	if (pin == NULL)
		return NULL;
	if ((pin->buf = kconn_take_frame(c, &pin->size)) == NULL) {
		free(pin);
		return NULL;
	}
	pin->refs = 1;
	pin->extra = &x->pl->pin_extra;
	x->pl->pin_extra += pin->size;
	moved = MIN(x->reserved, pin->size);
	MR_ASSERT(x->pl->fetch_reserved >= moved);
	x->reserved -= moved;
	x->pl->fetch_reserved -= moved;
	x->pl->taking = pin;
	return pin;
}

static void fetch_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;
	struct pbuf_pin *pin = NULL;
	int16_t top = 0;
	int32_t sid = 0;
	int insess = 0, incremental = 0, quiet = 0;

	if (!x->cl->dying)
		x->b->fetching = 0;
	if (x->cl->dying)
		goto out;
	/* Is this the answer to the session's latest request?  In an
	 * incremental answer an absent partition has nothing new. */
	insess = x->sess != NULL && x->sround == x->sess->round;
	incremental = insess && !x->sfull;
	x->pl->totals.fetches++;
	if (err != KCONN_E_OK) {
		/* pipeline/health.c logs the source going and coming back. */
		log_debug("%s: Fetch failed: %s", x->cl->label, errstr);
		if (err == KCONN_E_TIMEOUT)
			ph_cl_fail(x->cl, &x->b->health, PH_TIMEOUT, "broker %"
			    PRId32 " (%s): no answer to Fetch within %lld ms",
			    x->b->id, kconn_name(c), (long long)(x->pl->cfg->
			    pipeline_request_timeout_ms + (x->n > 0 &&
			    x->e[0].p->pm->conf != NULL ?
			    x->e[0].p->pm->conf->fetch_wait_max_ms : 0)));
		else
			ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err,
			    errstr), "broker %" PRId32 ": %s", x->b->id, errstr);
		if (insess)
			pfsess_reset(x->sess, 1);
		pcluster_want_metadata(x->cl);
		goto out;
	}
	fetch_reserve_answer(x, body);
	pin = fetch_pin(x, c);
	if (pw_fetch_decode_session(body, x->version, &top, &sid, fetch_part, x) < 0) {
		log_warnx("%s: %s: Fetch v%d response does not parse at byte %zu: %s",
		    x->cl->label, kconn_name(c), x->version, body->err_off, body->why);
		if (insess)
			pfsess_reset(x->sess, 1);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed Fetch response");
		goto out;
	}
	if (insess)
		fetch_session_answer(x, c, top, sid);
	if (incremental && top == 0)
		for (size_t i = 0; i < x->n; i++)
			if (!x->e[i].done)
				fetch_unchanged(x, i);
	if (top == KERR_FETCH_SESSION_ID_NOT_FOUND ||
	    top == KERR_INVALID_FETCH_SESSION_EPOCH ||
	    top == KERR_FETCH_SESSION_TOPIC_ID_ERROR) {
		/* Fetched again at once, in full. */
		incremental = 1;
	} else if (top != 0) {
		log_info("%s: %s: Fetch: %s", x->cl->label, kconn_name(c), kerr_name(top));
		ph_cl_fail(x->cl, &x->b->health, ph_kafka_cause(top), "broker %"
		    PRId32 " (%s): Fetch: %s", x->b->id, kconn_name(c),
		    kerr_name(top));
		pcluster_want_metadata(x->cl);
	}
	if (top == 0)
		ph_ok(&x->b->health, clock_wall_ms());
	/*
	 * The next Fetch to this broker starts after the last partition that
	 * got records: when the response cap cut this one short, the ones it
	 * did not reach come first next time.
	 */
	for (size_t i = x->n; i-- > 0;)
		if (x->e[i].got) {
			x->b->fetch_next = x->e[i].slot + 1;
			break;
		}
	if (top != 0 || incremental)
		x->news = 1;
	else if (!x->news)
		quiet = 1;
out:
	if (pin != NULL) {
		x->pl->taking = NULL;
		pbuf_pin_drop(pin, 0);
	}
	for (size_t i = 0; i < x->n; i++)
		if (!x->e[i].done) {
			x->e[i].p->fetch_inflight = 0;
			if (err == KCONN_E_OK && !x->cl->dying && !incremental)
				x->e[i].p->not_before = clock_mono_ms() + pl_backoff_ms(x->pl);
		}
	fetch_release(x);
	/*
	 * An answer with nothing new (no records, no error, the same
	 * offsets: an idle source) needs no sweep of every partition: the
	 * next Fetch to this broker goes with the next one (another answer
	 * or the periodic sweep, at most SWEEP_TICK_GAPS sweep gaps away;
	 * every 100 ms below a few thousand partitions).
	 */
	if (!quiet || x->pl->sweep_gap_ms == 0)
		pl_kick(x->pl);
	ctx_free(x);
}

/*
 * Groups the entries of f by topic (the request lists each topic once),
 * keeping the rotated order: topics in the order they first appear, the
 * partitions of each in the order they came; sel (indexes in the
 * mirror's parts) moves along.  O(entries): each entry finds its topic's
 * group through a hash of the name (one strcmp per entry, not one per
 * entry and topic), then a stable counting sort by group.  Without memory
 * the entries stay as they are only if already grouped; otherwise the old
 * quadratic pull-up does it.
 */
static void fetch_group_slow(struct fetch_req *f, size_t *sel)
{
	for (size_t g = 0; g < f->n;) {
		const char *topic = f->tps[g].topic;
		size_t end = g + 1;

		for (size_t i = g + 1; i < f->n; i++) {
			struct pw_tp t;
			size_t s;

			if (f->tps[i].topic != topic && strcmp(f->tps[i].topic, topic) != 0)
				continue;
			t = f->tps[i];
			s = sel[i];
			memmove(&f->tps[end + 1], &f->tps[end], (i - end) * sizeof(t));
			memmove(&sel[end + 1], &sel[end], (i - end) * sizeof(s));
			f->tps[end] = t;
			sel[end] = s;
			end++;
		}
		g = end;
	}
}

static void fetch_group_topics(struct fetch_req *f, size_t *sel)
{
	size_t cap = 16, ngroups = 0, n = f->n;
	size_t *slot = NULL, *grp = NULL, *count = NULL, *sel2 = NULL;
	const char **gname = NULL;
	struct pw_tp *tps2 = NULL;

	if (n < 2)
		return;
	while (cap < 2 * n)
		cap *= 2;
	slot = malloc(cap * sizeof(*slot));
	grp = malloc(n * sizeof(*grp));
	gname = malloc(n * sizeof(*gname));
	count = calloc(n + 1, sizeof(*count));
	sel2 = malloc(n * sizeof(*sel2));
	tps2 = malloc(n * sizeof(*tps2));
	if (slot == NULL || grp == NULL || gname == NULL || count == NULL ||
	    sel2 == NULL || tps2 == NULL) {
		fetch_group_slow(f, sel);
		goto out;
	}
	for (size_t k = 0; k < cap; k++)
		slot[k] = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		const char *t = f->tps[i].topic;
		size_t k;

		/* The same topic as the entry before: the common case. */
		if (i > 0 && (t == f->tps[i - 1].topic || strcmp(t, f->tps[i - 1].topic) == 0)) {
			grp[i] = grp[i - 1];
			continue;
		}
		k = topic_hash(t) & (cap - 1);
		while (slot[k] != SIZE_MAX && strcmp(gname[slot[k]], t) != 0)
			k = (k + 1) & (cap - 1);
		if (slot[k] == SIZE_MAX) {
			slot[k] = ngroups;
			gname[ngroups++] = t;
		}
		grp[i] = slot[k];
	}
	for (size_t i = 0; i < n; i++)
		count[grp[i] + 1]++;
	for (size_t g = 0; g < ngroups; g++)
		count[g + 1] += count[g];
	for (size_t i = 0; i < n; i++) {
		size_t at = count[grp[i]]++;

		tps2[at] = f->tps[i];
		sel2[at] = sel[i];
	}
	memcpy(f->tps, tps2, n * sizeof(*tps2));
	memcpy(sel, sel2, n * sizeof(*sel2));
out:
	free(slot);
	free(grp);
	free(gname);
	free(count);
	free(sel2);
	free(tps2);
}

/*
 * A partition may be fetched while it holds at most half its cap: one
 * that is behind (its queue filled up because the destination takes
 * batches more slowly than the source gives them) waits until half has
 * been written and then asks for that half at once, rather than for the
 * few KiB each Produce answer frees.  Fetching those few KiB at a time
 * made one Fetch per two Produce requests on a small-batch source (the
 * source broker's CPU for nothing).  A partition that keeps up holds far
 * less than half, so its latency does not change.
 */
static int fetch_room_ok(const struct pipeline *pl, const struct ppart *p)
{
	return (int64_t)p->qbytes <= pcap(pl) / 2;
}

/*
 * A partition a Fetch could carry now, leaving out the answer's budget
 * (that depends on what the request holds before it) and the leader.
 */
static int fetch_candidate(struct pipeline *pl, struct pcluster *cl,
    struct ppart *p, int64_t now)
{
	return p->step == PS_RUN && !p->fetch_inflight && now >= p->not_before &&
	    pl_part_wants_run(p) && fetch_room_ok(pl, p) &&
	    !(p->src_gone && p->src_gone_gen == cl->md_gen);
}

/*
 * pepoch_leader_epoch() for the partitions of a Fetch in turn: the
 * topic's metadata looked up once a run of the same topic, not once a
 * partition (*name and *t carry it from one call to the next).
 */
static int32_t fetch_leader_epoch(struct pcluster *cl, const struct ppart *p,
    const char **name, const struct kcluster_topic **t)
{
	if (*name == NULL || (p->topic != *name && strcmp(p->topic, *name) != 0)) {
		*t = pcluster_topic(cl, p->topic);
		*name = p->topic;
	}
	return pepoch_topic_leader_epoch(*t, p->index);
}

/* A partition of the round's single walk: its index in the mirror's
 * parts and its leader's index in the source's brokers. */
struct fetch_cand {
	uint32_t i;
	uint32_t bi;
};

/*
 * One walk of the mirror's partitions for all the brokers that can take
 * a Fetch now (not one walk per broker): the candidates, in the parts'
 * order, each with its leader.  Returns how many, or SIZE_MAX without
 * memory; *out is NULL when there are none.
 */
static size_t fetch_candidates(struct pmirror *pm, int64_t now,
    struct fetch_cand **out)
{
	struct pcluster *cl = pm->src;
	struct fetch_cand *c = NULL;
	size_t n = 0, nfree = 0;

	*out = NULL;
	for (size_t bi = 0; bi < cl->nbrokers; bi++)
		if (!cl->brokers[bi]->fetching)
			nfree++;
	if (nfree == 0 || pm->nparts == 0)
		return 0;
	for (size_t i = 0; i < pm->nparts; i++) {
		struct ppart *p = pm->parts[i];
		struct pbroker *b;
		size_t bi;

		if (!fetch_candidate(pm->pl, cl, p, now) ||
		    (b = ppart_leader(p, 0)) == NULL || b->fetching)
			continue;
		for (bi = 0; bi < cl->nbrokers && cl->brokers[bi] != b; bi++)
			;
		if (bi == cl->nbrokers || i > UINT32_MAX || bi > UINT32_MAX)
			continue;
		if (c == NULL && (c = malloc(pm->nparts * sizeof(*c))) == NULL)
			return SIZE_MAX;
		c[n].i = (uint32_t)i;
		c[n].bi = (uint32_t)bi;
		n++;
	}
	*out = c;
	return n;
}

void pcopy_fetch_round(struct pmirror *pm)
{
	struct pipeline *pl = pm->pl;
	struct pcluster *cl = pm->src;
	int64_t now = clock_mono_ms();
	const struct mirrorconf *mc = pm->conf;
	struct fetch_cand *cand = NULL;
	size_t ncand = fetch_candidates(pm, now, &cand);

	if (ncand == SIZE_MAX) {
		log_warnx("%s: Fetch: out of memory", cl->label);
		return;
	}
	for (size_t bi = 0; bi < cl->nbrokers; bi++) {
		struct pbroker *b = cl->brokers[bi];
		struct fetch_req f;
		struct pctx *x = NULL;
		struct kconn *c;
		struct pfsess *sess;
		char err[256];
		size_t *sel = NULL, start, inflight0, first = 0, mine = 0;
		const char *ltopic = NULL;
		const struct kcluster_topic *lmeta = NULL;
		int v, ids = 1;
		/* What this Fetch's answer may hold, and its framing so far. */
		int64_t share = fetch_share(pl), froom, fover = 0;
		int64_t fmin = MIN(MIN(mc->fetch_max_bytes, FETCH_MIN_BYTES), share);

		if (b->fetching || (froom = fetch_room(pl, share)) < fmin)
			continue;
		f.n = 0;
		f.tps = NULL;
		f.in_session = 0;
		memset(&f.sess, 0, sizeof(f.sess));
		/*
		 * Round robin: the request starts at b->fetch_next (moved on
		 * by each answer) and wraps, so a response cap that fills up
		 * does not always fall on the same partitions.
		 */
		start = pm->nparts > 0 ? b->fetch_next % pm->nparts : 0;
		b->fetch_next = start + 1; /* if no answer says better */
		for (size_t k = 0; k < ncand; k++)
			if (cand[k].bi == bi) {
				if (cand[k].i < start)
					first = k + 1;
				mine++;
			}
		if (mine == 0)
			continue;
		/* The candidates are in the parts' order: the first at or
		 * after start is where the rotation begins. */
		for (size_t k = 0; k < ncand; k++) {
			struct fetch_cand *fc = &cand[(first + k) % ncand];
			size_t i = fc->i;
			struct ppart *p = pm->parts[i];
			int64_t room = pcap(pl) - (int64_t)p->qbytes;

			if (fc->bi != bi ||
			    froom - fover - fetch_part_overhead(p) < fmin)
				continue;
			if (f.tps == NULL) {
				f.tps = calloc(mine, sizeof(*f.tps));
				sel = calloc(mine, sizeof(*sel));
				if (f.tps == NULL || sel == NULL)
					break;
			}
			sel[f.n] = i;
			f.tps[f.n].topic = p->topic;
			f.tps[f.n].partition = p->index;
			f.tps[f.n].offset = p->src_fetch;
			f.tps[f.n].leader_epoch = fetch_leader_epoch(cl, p,
			    &ltopic, &lmeta);
			if (lmeta != NULL)
				f.tps[f.n].topic_id = lmeta->id;
			ids &= lmeta != NULL && !kuuid_is_zero(&lmeta->id);
			f.tps[f.n].last_epoch = pepoch_last_fetched(p);
			fover += fetch_part_overhead(p);
			f.tps[f.n].max_bytes = (int32_t)MIN(MIN(room, froom - fover),
			    MIN(mc->fetch_max_bytes, INT32_MAX));
			f.n++;
		}
		/* The context holds the partitions taken only (this broker's
		 * share), not room for every partition of the mirror. */
		if (f.n > 0 && f.tps != NULL && sel != NULL)
			x = ctx_new(pl, cl, b, f.n);
		if (f.n == 0 || x == NULL || sel == NULL ||
		    (c = pbroker_conn(b)) == NULL) {
			free(f.tps);
			free(x);
			free(sel);
			continue;
		}
		/* By topic id where the source gave every topic's (Metadata
		 * v10+), by name otherwise (pipeline/wire.h, PW_FETCH_BY_ID). */
		v = kconn_pick_version(c, KP_API_FETCH, PW_FETCH_MIN,
		    ids ? PW_FETCH_MAX_COPY : PW_FETCH_MAX);
		if (v < 0) {
			log_warnx("%s: %s supports no Fetch version in %d..%d", cl->label,
			    kconn_name(c), PW_FETCH_MIN, PW_FETCH_MAX_COPY);
			free(f.tps);
			free(x);
			free(sel);
			continue;
		}
		fetch_group_topics(&f, sel);
		for (size_t i = 0; i < f.n; i++) {
			/* One Fetch of a partition at a time, and only of
			 * one this instance copies (fetch_candidate()). */
			MR_ASSERT(!pm->parts[sel[i]]->fetch_inflight &&
			    pl_part_wants_run(pm->parts[sel[i]]));
			ctx_add(x, pm->parts[sel[i]], f.tps[i].offset);
			x->e[x->n - 1].slot = sel[i];
			x->e[x->n - 1].tid = f.tps[i].topic_id;
		}
		free(sel);
		fetch_index(x);
		if (x->fh == NULL)
			ctx_group(x);   /* ctx_find()'s topic runs instead */
		x->version = (int16_t)v;
		sess = fetch_session(b, mc, v, c);
		if (sess != NULL && fetch_session_plan(sess, &f, x) != 0) {
			log_warnx("%s: Fetch: out of memory", cl->label);
			ctx_free(x);
			free(f.tps);
			continue;
		}
		f.req.max_wait_ms = (int32_t)MIN(mc->fetch_wait_max_ms, INT32_MAX);
		f.req.min_bytes = (int32_t)MIN(mc->fetch_min_bytes, INT32_MAX);
		f.req.max_bytes = (int32_t)MIN(MIN(mc->fetch_response_max_bytes,
		    froom - fover), INT32_MAX);
		f.req.isolation = 1;
		inflight0 = kconn_inflight_bytes(c);
		if (kconn_send(c, KP_API_FETCH, (int16_t)v, fetch_encode, &f,
		    KCONN_F_KEEP_ON_TIMEOUT,
		    (int)MIN(mc->fetch_wait_max_ms + pl->cfg->pipeline_request_timeout_ms, INT32_MAX),
		    fetch_response, x, err, sizeof(err)) != 0) {
			log_debug("%s: Fetch: %s", cl->label, err);
			if (sess != NULL)
				pfsess_reset(sess, 1);
			ctx_free(x);
		} else {
			x->reserved = (size_t)(f.req.max_bytes + fover);
			x->copies = (size_t)f.req.max_bytes;
			pl->fetch_reserved += x->reserved + x->copies;
			(void)pl_held_note(pl);
			b->fetching = 1;
			for (size_t i = 0; i < x->n; i++)
				x->e[i].p->fetch_inflight = 1;
			if (pl->ms != NULL) {
				size_t sent = kconn_inflight_bytes(c);

				metrics_counter_inc(METRICS_SERIES(MSTD(pl->ms,
				    FETCH_REQUESTS), pm->name, f.in_session &&
				    f.sess.epoch != 0 ? "incremental" : "full"));
				metrics_counter_add(METRICS_SERIES(MSTD(pl->ms,
				    FETCH_REQUEST_BYTES), pm->name), sent > inflight0 ?
				    (double)(sent - inflight0) : 0);
			}
		}
		fetch_forgotten_free(&f);
		free(f.tps);
	}
	free(cand);
}

/* ---- Produce ---------------------------------------------------------------- */

struct produce_req {
	int32_t timeout_ms;
	struct pw_tp *tps;
	size_t n;
	struct pctx *x;      /* x->e[i].b is the batch of tps[i] */
	size_t lend_at;      /* produce_lend()'s place in tps */
};

/*
 * Sending by reference.  A Produce request does not copy its batches:
 * kconn_send_lent() queues each batch of at least PRODUCE_LEND_MIN bytes
 * where it lies (the Fetch answer's buffer, struct pbuf_pin, or the
 * batch's own buffer, which becomes a pin of its own) with a loan (struct
 * ploan) that holds the pin until the connection has written the bytes;
 * only the request's framing is copied.  Smaller batches are copied (a
 * copy of a few KiB costs less than a loan and an iovec of its own).
 */
#define PRODUCE_LEND_MIN 4096

/* kconn_send_lent()'s lender: a loan of the batch at p. */
static struct kconn_loan *produce_lend(void *arg, const uint8_t *p, size_t n)
{
	struct produce_req *r = arg;

	while (r->lend_at < r->n && r->tps[r->lend_at].records != p)
		r->lend_at++;
	if (r->lend_at == r->n)
		return NULL;
	return pl_lend_batch(r->x->pl, r->x->e[r->lend_at++].b, p, n);
}

static int produce_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct produce_req *r = msg;

	return pw_produce_encode(w, version, -1, r->timeout_ms, r->tps, r->n);
}

/*
 * Pipelined produce.  A partition has up to
 * pipeline.max_inflight_batches_per_partition batches sent and not yet
 * answered (p->inflight, oldest first), each in its own Produce request
 * (Kafka takes one batch per partition per request), all on one
 * connection, which the broker reads and answers in order.  Each batch
 * carries the sequence its destination offset gives it (prepare_head()),
 * so the broker appends them in order or refuses the rest: once batch k
 * is not appended, k+1.. get OUT_OF_ORDER_SEQUENCE_NUMBER (or the same
 * error as k), never a place of their own.
 *
 * The rule when an answer is not a success: stop sending for the
 * partition (p->halt), let every other batch in flight be answered, then
 * settle() acts once:
 *   - HALT_REQUEUE: every failed batch is known not to be appended (a
 *     leader error, an unknown topic id, or a sequence error after such a
 *     batch): they go back to the head of the queue in order and are sent
 *     again after a backoff, with the same sequences;
 *   - HALT_UNSURE: some answer leaves the outcome open (a timeout, a lost
 *     connection, an answer missing from the response, NOT_ENOUGH_REPLICAS
 *     _AFTER_APPEND, DUPLICATE_SEQUENCE_NUMBER): SYNC re-reads the
 *     destination end, which must be one of the batch boundaries from the
 *     first failed batch on (halt_lo, then the end of each batch answered
 *     since, up to halt_hi), and the proof recognises whatever landed;
 *   - HALT_IDENTITY: the first failure was a sequence error of its own
 *     (the broker's state for the identity is not mirrord's): a new
 *     identity, the fence delay, SYNC and proof (identity_change());
 *   - HALT_FAILED: the destination refused a batch or stored it at
 *     another offset; the partition went FAILED at that answer.
 * A success after a failure must still land at its own offset: one that
 * does not is a foreign write (FAILED), as without pipelining.
 */
enum { HALT_NONE, HALT_REQUEUE, HALT_UNSURE, HALT_IDENTITY, HALT_FAILED };

/* Most batches in flight per partition: the broker's idempotence window. */
#define PRODUCE_DEPTH_MAX PL_INFLIGHT_MAX
/* The first Produce version whose brokers check batch sequences (Kafka
 * 2.4+); the librdkafka mock (v7 at most) checks none, so a batch after a
 * lost one would land in its place: one batch at a time there. */
#define PW_PRODUCE_PIPELINED 8

static void held_free(struct ppart *p, struct pbatch *s)
{
	MR_ASSERT_MSG(p->qbytes >= s->len && p->pm->pl->qbytes >= p->qbytes,
	    "%zu, %zu, %zu", s->len, p->qbytes, p->pm->pl->qbytes);
	p->qbytes -= s->len;
	p->pm->pl->qbytes -= s->len;
	pbatch_free(s);
}

/* Answered batches end at e: one more destination end a SYNC after the
 * halt may find. */
static void halt_boundary(struct ppart *p, int64_t e)
{
	if (p->nsync_at < PL_INFLIGHT_MAX + 1)
		p->sync_at[p->nsync_at++] = e;
	if (e > p->halt_hi)
		p->halt_hi = e;
}

/*
 * s (out of p->inflight) was answered with something other than a success
 * at its offset, or not at all: kind is what this answer alone calls for.
 * s joins p->failed (still counted in the queued bytes) until settle().
 */
static void halt_note(struct ppart *p, struct pbatch *s, int kind,
    int16_t error, const char *why)
{
	if (p->halt == HALT_NONE) {
		p->halt = kind;
		p->halt_gen = p->gen;
		p->halt_error = error;
		p->halt_unsure = 0;
		snprintf(p->halt_why, sizeof(p->halt_why), "%s", why);
		p->halt_lo = p->halt_hi = s->dst_base;
		p->nsync_at = 0;
		halt_boundary(p, s->dst_base);
	} else {
		if (kind == HALT_FAILED ||
		    (kind == HALT_UNSURE && p->halt == HALT_REQUEUE)) {
			p->halt = kind;
			snprintf(p->halt_why, sizeof(p->halt_why), "%s", why);
		}
		if (s->dst_base < p->halt_lo) {
			/* an earlier batch answered after a later one */
			p->halt_lo = s->dst_base;
			halt_boundary(p, s->dst_base);
		}
	}
	if (kind == HALT_UNSURE)
		p->halt_unsure = 1;
	halt_boundary(p, s->dst_base + s->count);
	/* In offset order: the answers of batches sent on two connections
	 * (a leader that moved between them) may come in either order. */
	{
		struct pbatch *t = TAILQ_LAST(&p->failed, pbatchq);

		while (t != NULL && t->dst_base > s->dst_base)
			t = TAILQ_PREV(t, pbatchq, link);
		if (t == NULL)
			TAILQ_INSERT_HEAD(&p->failed, s, link);
		else
			TAILQ_INSERT_AFTER(&p->failed, t, s, link);
	}
}

/*
 * The broker's sequence state for p's identity no longer matches
 * mirrord's (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID), or
 * someone holds a higher epoch of it (INVALID_PRODUCER_EPOCH).  p alone
 * takes a new identity: the same producer id with the epoch bumped (as
 * Kafka's idempotent producer does, KIP-360: a higher epoch of the id is
 * accepted with sequence 0, and once a batch of it is on the partition the
 * broker fences every older epoch, so a late copy of an old request can no
 * longer land), or a fresh id when the epoch is exhausted or was fenced.
 * settle() then waits the fence delay (a request sent under the old
 * identity and still queued in a broker has had its time) and re-reads and
 * proves the destination end (pipeline/prove.c recognises batches of every
 * identity the partition recorded), so a late copy that did land is taken
 * as written.
 */
static void identity_change(struct ppart *p, int16_t error, char *why,
    size_t whylen)
{
	char name[300];

	if (error == KERR_INVALID_PRODUCER_EPOCH || p->pepoch >= INT16_MAX ||
	    p->pid < 0) {
		snprintf(why, whylen, "Produce answered %s for producer id "
		    "%" PRId64 " epoch %d: a fresh producer id for this partition",
		    kerr_name(error), p->pid, p->pepoch);
		p->pid = -1;
		p->pid_fresh = 1;
	} else {
		snprintf(why, whylen, "Produce answered %s for producer id "
		    "%" PRId64 " epoch %d: epoch %d from the destination end on, "
		    "the older epoch fenced", kerr_name(error), p->pid, p->pepoch,
		    p->pepoch + 1);
		p->pepoch++;
	}
	p->seq_base = -1;
	log_warnx("%s: %s", pname(p, name, sizeof(name)), why);
}

/*
 * After a sequence error (a certain answer: not appended): a new identity,
 * then SYNC once the fence delay is over (what may still be queued in a
 * broker under the old identity was sent before unsure_sent_ms).
 */
static void identity_change_fenced(struct ppart *p, int16_t error)
{
	const struct pipeline *pl = p->pm->pl;
	char why[300], name[300];
	int64_t fence;

	identity_change(p, error, why, sizeof(why));
	fence = p->unsure_sent_ms + 2 * (pl->cfg->pipeline_request_timeout_ms + 1000);
	pl_part_resync(p, why);
	if (p->not_before < fence) {
		log_info("%s: a Produce of the old identity may still be in a "
		    "broker: re-reading the destination end in %" PRId64 " ms",
		    pname(p, name, sizeof(name)), fence - clock_mono_ms());
		p->not_before = fence;
	}
}

/*
 * 1 if a sequence error under p's identity may come from the deposed
 * owner: in multi-instance mode the new owner reuses the identity the
 * partition recorded (no epoch bump), and the old owner, copying until it
 * applies the part-owner record, can move the end more than the broker's
 * five remembered batches past the new owner's first.  Then the end is
 * read and proven (strictly) before the identity changes: mirrord's own
 * batches there are taken as written and copying goes on after them with
 * the same identity, at once; no fence delay, and the deposed owner's
 * still later batches are the same batches with the same sequences
 * (duplicates), not a second copy.
 */
static int identity_shared(const struct ppart *p, int16_t error)
{
	const struct pipeline *pl = p->pm->pl;
	const struct mpart *mp = p->mp;
	const struct mproducer *c;

	if (error != KERR_OUT_OF_ORDER_SEQUENCE_NUMBER || pl->instance == NULL ||
	    pl->dst->pid_unsupported || p->pid < 0 || p->pid_fresh ||
	    mp->nproducers == 0)
		return 0;
	c = &mp->producers[mp->nproducers - 1];
	return c->pid == p->pid && c->epoch == p->pepoch &&
	    c->seq_base == p->seq_base;
}

/*
 * Nothing of p is in flight any more after a halt: act on it once (see
 * above).  The failed batches are dropped, re-queued, or kept in
 * p->unsure when their anchors were recorded (resend_unsure()).
 */
static void settle(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;
	struct pbatch *s;
	int kind = p->halt;
	char why[400];

	if (kind == HALT_NONE || p->ninflight > 0 || p->dead)
		return;
	MR_ASSERT(TAILQ_EMPTY(&p->inflight));
	p->halt = HALT_NONE;
	switch (kind) {
	case HALT_REQUEUE:
		if (p->gen == p->halt_gen && p->step == PS_RUN) {
			const struct pbatch *l = TAILQ_LAST(&p->failed, pbatchq);
			const struct pbatch *h = TAILQ_FIRST(&p->q);

			/* Not appended: the same batches again, in order,
			 * with the same sequences, once the leader is known.
			 * They end where the queue goes on. */
			MR_ASSERT(l == NULL || h == NULL ||
			    l->dst_base + l->count == h->dst_base);
			while ((s = TAILQ_LAST(&p->failed, pbatchq)) != NULL) {
				TAILQ_REMOVE(&p->failed, s, link);
				TAILQ_INSERT_HEAD(&p->q, s, link);
			}
			p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		}
		pcluster_want_metadata(pl->dst);
		break;
	case HALT_UNSURE:
	case HALT_IDENTITY:
		/* The destination end will say what landed: one of the
		 * boundaries from the first failed batch on. */
		p->sync_lo = p->halt_lo;
		p->sync_hi = p->halt_hi;
		unsure_free(p);
		while ((s = TAILQ_FIRST(&p->failed)) != NULL) {
			TAILQ_REMOVE(&p->failed, s, link);
			if (s->anchored) {
				/* Still held: counted in ubytes until resent or
				 * dropped (resend_unsure()). */
				MR_ASSERT(p->qbytes >= s->len && pl->qbytes >= s->len);
				p->qbytes -= s->len;
				pl->qbytes -= s->len;
				p->ubytes += s->len;
				pl->ubytes += s->len;
				TAILQ_INSERT_TAIL(&p->unsure, s, link);
			} else {
				pl_discarded(p, s->len);
				held_free(p, s);
			}
		}
		if (kind == HALT_UNSURE || p->halt_unsure)
			p->unsure_sent_ms = p->last_send_ms;
		if (kind == HALT_UNSURE) {
			pl_part_resync(p, p->halt_why);
			break;
		}
		if (identity_shared(p, p->halt_error)) {
			/* Maybe the deposed owner's batches (this identity)
			 * moved the end: read it first (pcopy_sync_done()). */
			snprintf(why, sizeof(why), "Produce answered %s for producer "
			    "id %" PRId64 " epoch %d, which the previous owner also "
			    "writes with: reading the end before changing identity",
			    kerr_name(p->halt_error), p->pid, p->pepoch);
			p->seq_probe = 1;
			pl_part_resync(p, why);
			break;
		}
		identity_change_fenced(p, p->halt_error);
		break;
	default:
		break;
	}
	while ((s = TAILQ_FIRST(&p->failed)) != NULL) {
		TAILQ_REMOVE(&p->failed, s, link);
		pl_discarded(p, s->len);
		held_free(p, s);
	}
}

/*
 * p's producer identity for its next batch: 0 ready (p->pid, or -1 when
 * the destination has no producer ids at all), 1 wait for the pool, -1 p
 * failed (InitProducerId refused while it waited).
 */
static int part_identity(struct ppart *p, struct pcluster *dst)
{
	const struct mpart *mp = p->mp;
	int64_t now = clock_mono_ms();

	if (p->pid >= 0)
		return 0;
	if (dst->pid_unsupported)
		return 0;
	if (!p->pid_fresh && mp->nproducers > 0) {
		const struct mproducer *c = &mp->producers[mp->nproducers - 1];

		p->pid = c->pid;
		p->pepoch = (int16_t)c->epoch;
		p->seq_base = c->seq_base;
		return 0;
	}
	if (pcluster_take_pid(dst, &p->pid, &p->pepoch) == 0) {
		p->pid_fresh = 0;
		p->pid_wait_since = 0;
		p->seq_base = -1;
		return 0;
	}
	p->pid = -1;
	if (p->pid_wait_since == 0)
		p->pid_wait_since = now;
	if (dst->pid_error != 0 && dst->pid_refused_at >= p->pid_wait_since) {
		p->pid_wait_since = 0;
		pl_part_fail_denied(p, "%s; no producer id for topic %s partition %"
		    PRId32, dst->pid_why, p->topic, p->index);
		return -1;
	}
	return 1;
}

static void produce_ok(struct ppart *p, struct pbatch *s)
{
	struct pipeline *pl = p->pm->pl;

	/* What the destination holds only grows while batches are in
	 * flight (SYNC, the only other writer, waits until none is). */
	MR_ASSERT_MSG(s->dst_base >= p->dst_next && s->src_next >= p->src_done,
	    "batch at %" PRId64 " (source end %" PRId64 "), destination end %"
	    PRId64 " (source %" PRId64 ")", s->dst_base, s->src_next,
	    p->dst_next, p->src_done);
	p->dst_next = s->dst_base + s->count;
	p->live.destination_end = p->dst_next;
	p->last_src = s->src_next - 1;
	p->live.records += s->count;
	p->live.bytes += (int64_t)s->len;
	p->live.batches++;
	p->live.last_batch_timestamp_ms = s->max_ts;
	pl->totals.records += s->count;
	pl->totals.bytes += (int64_t)s->len;
	pl->totals.batches++;
	p->attempts = 0;
	p->src_done = s->src_next;
	if (s->wpid >= 0) {
		p->seq_known = 1;
		p->known_pid = s->wpid;
		p->known_epoch = s->wepoch;
	}
	pl_update_lag(p);
}

/* The answer to p's batch s (out of p->inflight), error 0. */
static void produce_success(struct pctx *x, struct ppart *p, struct pbatch *s,
    const struct pw_produce_part *pp)
{
	char why[300];

	if (pp->base_offset != s->dst_base) {
		snprintf(why, sizeof(why), "the destination stored the batch for "
		    "source offsets %" PRId64 "..%" PRId64 " at offset %" PRId64
		    ", expected %" PRId64 ": another producer writes to the "
		    "destination partition", s->src_base, s->src_next - 1,
		    pp->base_offset, s->dst_base);
		if (p->halt != HALT_FAILED)
			pl_part_fail(p, "%s", why);
		halt_note(p, s, HALT_FAILED, 0, why);
		return;
	}
	if (pp->log_start_offset >= 0)
		p->dst_log_start = pp->log_start_offset;
	ph_ok(&p->dst, clock_wall_ms());
	produce_ok(p, s);
	if (p->halt != HALT_NONE)
		halt_boundary(p, s->dst_base + s->count);
	held_free(p, s);
	skipped_done(p);
	if (!p->dead)
		maybe_trim(p);
	(void)x;
}

/* The answer to p's batch s (out of p->inflight), an error. */
static void produce_error(struct pctx *x, struct ppart *p, struct pbatch *s,
    const struct pw_produce_part *pp)
{
	char why[600], name[300], who[300];

	pl_kafka_error(x->cl, 0, pp->error);
	p->live.retries++;
	snprintf(why, sizeof(why), "Produce answered %s", kerr_name(pp->error));
	ph_fail(&p->dst, clock_wall_ms(), ph_kafka_cause(pp->error), "broker %"
	    PRId32 ": Produce: %s", x->b->id, kerr_name(pp->error));
	if (pp->error == KERR_NOT_LEADER_OR_FOLLOWER || pp->error == KERR_LEADER_NOT_AVAILABLE ||
	    pp->error == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
	    pp->error == KERR_NOT_ENOUGH_REPLICAS ||
	    pp->error == KERR_FENCED_LEADER_EPOCH ||
	    pp->error == KERR_UNKNOWN_LEADER_EPOCH) {
		/* Not appended: sent again once the leader is known. */
		halt_note(p, s, HALT_REQUEUE, pp->error, why);
		pcluster_want_metadata(x->cl);
		return;
	}
	if (pp->error == KERR_UNKNOWN_TOPIC_ID) {
		/*
		 * The Produce named the recorded destination topic id and the
		 * broker does not know it: the topic was deleted (and perhaps
		 * created again under its name).  Nothing was appended.  The
		 * batch waits; the next destination Metadata answer shows the
		 * new id or the absence and pipeline/ident.c fails the partition
		 * (recreated, or deleted once confirmed).  A broker that merely
		 * lags on metadata answers the same, so this alone does not fail
		 * it: the retries go on naming the old id and cannot land.
		 */
		log_warnx("%s: Produce for source offsets %" PRId64 "..%" PRId64
		    " answered UNKNOWN_TOPIC_ID for destination topic %s id %s: not "
		    "written; checking whether the topic was deleted or recreated",
		    pname(p, name, sizeof(name)), s->src_base, s->src_next - 1,
		    p->topic, p->mp != NULL && p->mp->topic->dst_topic_id != NULL ?
		    p->mp->topic->dst_topic_id : "?");
		halt_note(p, s, HALT_REQUEUE, pp->error, why);
		pcluster_want_metadata(x->cl);
		return;
	}
	if (pp->error == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER ||
	    pp->error == KERR_UNKNOWN_PRODUCER_ID ||
	    pp->error == KERR_INVALID_PRODUCER_EPOCH) {
		/* Not appended.  After an earlier batch of this partition
		 * failed, the gap it left is the cause: nothing more to do
		 * than for that one.  Else the broker's state for the
		 * identity is not mirrord's: this partition alone changes
		 * identity (identity_change()). */
		halt_note(p, s, p->halt != HALT_NONE ? HALT_REQUEUE :
		    HALT_IDENTITY, pp->error, why);
		return;
	}
	if (pp->error == KERR_REQUEST_TIMED_OUT ||
	    pp->error == KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
	    pp->error == KERR_NETWORK_EXCEPTION ||
	    pp->error == KERR_DUPLICATE_SEQUENCE_NUMBER) {
		halt_note(p, s, HALT_UNSURE, pp->error, why);
		return;
	}
	if (pl_is_denial(pp->error)) {
		/* Not applied: copying resumes at the same place once allowed. */
		snprintf(why, sizeof(why), "Produce to topic %s partition %" PRId32
		    " answered %s for %s (it needs WRITE on the topic%s); the batch "
		    "for source offsets %" PRId64 "..%" PRId64 " was not written",
		    p->topic, p->index, kerr_name(pp->error),
		    pcluster_principal(x->cl, who, sizeof(who)),
		    pp->error == KERR_TOPIC_AUTHORIZATION_FAILED ? "" :
		    " and IdempotentWrite on the cluster", s->src_base, s->src_next - 1);
		if (p->halt != HALT_FAILED)
			pl_part_fail_denied(p, "%s", why);
		halt_note(p, s, HALT_FAILED, pp->error, why);
		return;
	}
	snprintf(why, sizeof(why), "the destination refused the batch for source "
	    "offsets %" PRId64 "..%" PRId64 ": %s%s%.*s", s->src_base,
	    s->src_next - 1, kerr_name(pp->error),
	    pp->error_message.len > 0 ? ": " : "",
	    pp->error_message.len > 0 ? (int)MIN(pp->error_message.len, 200) : 0,
	    pp->error_message.len > 0 ? pp->error_message.p : "");
	if (s->merged > 1 && (pp->error == KERR_MESSAGE_TOO_LARGE ||
	    pp->error == KERR_RECORD_LIST_TOO_LARGE)) {
		/* mirror.coalesce.max.bytes passes the destination topic's
		 * max.message.bytes: nothing was appended; the retry merges
		 * into batches half this size (at worst, one source batch
		 * each, which the source's own limit let through). */
		size_t limit = s->len / 2;

		if (p->merge_limit == 0 || limit < p->merge_limit)
			p->merge_limit = limit;
		log_warnx("%s: the destination refused a batch of %zu bytes merged "
		    "from %d source batches (%s): this partition merges into "
		    "batches of at most %zu bytes from now on; set "
		    "mirror.coalesce.max.bytes below the destination topic's "
		    "max.message.bytes", pname(p, name, sizeof(name)), s->len,
		    s->merged, kerr_name(pp->error), p->merge_limit);
		snprintf(why + strlen(why), sizeof(why) - strlen(why), " (a batch "
		    "of %zu bytes merged from %d source batches: retried with "
		    "merged batches of at most %zu bytes)", s->len, s->merged,
		    p->merge_limit);
	}
	if (p->halt != HALT_FAILED)
		pl_part_fail(p, "%s", why);
	halt_note(p, s, HALT_FAILED, pp->error, why);
}

/* Takes s out of p's in-flight batches.  Answers come in the order the
 * requests went on the one connection, so s is the oldest; 0 if so. */
static int inflight_take(struct ppart *p, struct pbatch *s)
{
	int first = s == TAILQ_FIRST(&p->inflight);
	const struct pbatch *b;

	/* An answer names a batch of p's in-flight list (own_gen drops the
	 * answers to batches pl_produce_forget() freed). */
	TAILQ_FOREACH(b, &p->inflight, link)
		if (b == s)
			break;
	MR_ASSERT(b == s && p->ninflight > 0);
	TAILQ_REMOVE(&p->inflight, s, link);
	p->ninflight--;
	p->pm->pl->totals.inflight_batches--;
	return first ? 0 : -1;
}

void pl_produce_forget(struct ppart *p)
{
	struct pbatch *s;

	while ((s = TAILQ_FIRST(&p->inflight)) != NULL) {
		(void)inflight_take(p, s);
		pl_discarded(p, s->len);
		held_free(p, s);
	}
	while ((s = TAILQ_FIRST(&p->failed)) != NULL) {
		TAILQ_REMOVE(&p->failed, s, link);
		pl_discarded(p, s->len);
		held_free(p, s);
	}
	unsure_free(p);
	MR_ASSERT_MSG(p->ninflight == 0, "%d", p->ninflight);
	p->inflight_conn = NULL;
	p->halt = HALT_NONE;
	p->halt_unsure = 0;
	p->nsync_at = 0;
}

static void produce_part(void *arg, const struct pw_produce_part *pp)
{
	struct pctx *x = arg;
	ssize_t i = ctx_find_produced(x, pp);
	struct ppart *p;
	struct pbatch *s;

	if (i < 0)
		return;
	x->e[i].done = 1;
	p = x->e[i].p;
	s = x->e[i].b;
	x->e[i].b = NULL;
	/* Sent before this instance lost p (and perhaps got it back since):
	 * not an answer about what p sends now; s went with p's in-flight
	 * list (pl_produce_forget()). */
	if (x->e[i].ogen != p->own_gen || s == NULL || p->dead)
		return;
	if (inflight_take(p, s) != 0)
		/* Cannot happen on one connection; if it does, the
		 * destination end says what landed. */
		halt_note(p, s, HALT_UNSURE, 0, "a Produce answer came before "
		    "the answer to an earlier one");
	else if (pp->error == 0)
		produce_success(x, p, s, pp);
	else
		produce_error(x, p, s, pp);
	settle(p);
}

static void produce_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pctx *x = arg;

	if (x->cl->dying) {
		for (size_t i = 0; i < x->n; i++) {
			struct ppart *p = x->e[i].p;
			struct pbatch *s = x->e[i].b;

			/* Shutting down: the next start re-reads the destination. */
			if (x->e[i].ogen != p->own_gen || s == NULL || p->dead)
				continue;
			(void)inflight_take(p, s);
			held_free(p, s);
		}
		ctx_free(x);
		return;
	}
	x->pl->totals.produces++;
	x->b->produce_reqs--;
	if (err != KCONN_E_OK) {
		log_info("%s: Produce failed: %s", x->cl->label, errstr);
		ph_cl_fail(x->cl, &x->b->health, ph_conn_cause(err, errstr),
		    "broker %" PRId32 ": %s", x->b->id, errstr);
		pcluster_want_metadata(x->cl);
	} else if (pw_produce_decode(body, x->version, produce_part, x) < 0) {
		log_warnx("%s: %s: Produce v%d response does not parse at byte %zu: %s",
		    x->cl->label, kconn_name(c), x->version, body->err_off, body->why);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed Produce response");
	} else {
		ph_ok(&x->b->health, clock_wall_ms());
	}
	for (size_t i = 0; i < x->n; i++) {
		struct ppart *p = x->e[i].p;
		struct pbatch *s = x->e[i].b;

		x->e[i].b = NULL;
		/* Sent before this instance lost p: nothing about what p
		 * sends now (the batch was freed with p's in-flight list). */
		if (x->e[i].done || x->e[i].ogen != p->own_gen || s == NULL ||
		    p->dead)
			continue;
		(void)inflight_take(p, s);
		halt_note(p, s, HALT_UNSURE, 0, err != KCONN_E_OK ? errstr :
		    "the Produce response lacks the partition");
		settle(p);
	}
	pl_kick(x->pl);
	ctx_free(x);
}

/*
 * The completion of p's asynchronous metadata write (group commit: the
 * records are durable and applied to the model when it runs, or the log is
 * broken).  p may have been lost (own_gen), its queue dropped (gen) or p
 * buried meanwhile: then nothing of p's batches is touched (they may be
 * freed); only the reference goes.
 */
static void mwrite_done(void *arg, int code, const char *msg)
{
	struct ppart *p = arg;
	struct pipeline *pl = p->pm->pl;
	char name[300];

	MR_ASSERT(p->mwrite);   /* one completion per write */
	p->mwrite = 0;
	if (!p->dead && p->gen == p->mwrite_gen && p->own_gen == p->mwrite_og) {
		if (code != 0 && p->mwrite_kind == MW_TRIM)
			log_warnx("%s: trimming the translation map: %s",
			    pname(p, name, sizeof(name)), msg);
		else if (p->mwrite_kind == MW_TRIM && p->mp != NULL)
			log_info("%s: translation map trimmed below %s, %zu "
			    "anchors and %zu epochs kept", pname(p, name,
			    sizeof(name)), p->mwrite_what, mpart_nanchors(p->mp),
			    p->mp->nepochs);
		else if (code != 0)
			pl_part_fail(p, "cannot record %s: %s", p->mwrite_what, msg);
		else if (p->mwrite_kind == MW_PRODUCER) {
			p->seq_base = p->mwrite_off;
			log_info("%s/%s-%" PRId32 ": writing as producer id %" PRId64
			    " epoch %d, sequence 0 at destination offset %" PRId64,
			    p->pm->name, p->topic, p->index, p->pid, p->pepoch,
			    p->seq_base);
		}
		pl_kick(pl);
	}
	pl_part_unref(p);
}

/*
 * Before an _async call: p waits for the write it may start, holding a ref
 * (with a follower's log the call itself may apply other instances'
 * records, lose p or bury it: the callback still finds p, and sees the
 * old own_gen).  mwrite_cancel() when the call started nothing.
 */
static void mwrite_begin(struct ppart *p, uint32_t og, int kind, int64_t off,
    const char *what)
{
	/* One metadata write of p at a time: each is validated against a
	 * model that shows only completed ones. */
	MR_ASSERT(!p->mwrite);
	p->mwrite = 1;
	p->mwrite_wall = clock_wall_ms();
	p->mwrite_gen = p->gen;
	p->mwrite_og = og;
	p->mwrite_kind = kind;
	p->mwrite_off = off;
	snprintf(p->mwrite_what, sizeof(p->mwrite_what), "%s", what);
	p->refs++;
}

/* p is not freed here even when buried meanwhile (the graveyard keeps it
 * until the pipeline goes): the caller still looks at it. */
static void mwrite_cancel(struct ppart *p)
{
	MR_ASSERT(p->mwrite && p->refs > 0);
	p->mwrite = 0;
	p->refs--;
}

/*
 * Most batches, and most anchors, that one part-anchors record covers.  A
 * follower's metadata write is a round trip to the writer: what queued
 * up meanwhile goes in one record, so a partition carrying many small
 * transactions (an anchor each) records them at the rate they come.
 */
#define PERSIST_MAX_BATCHES 512
#define PERSIST_MAX_ANCHORS 256

/*
 * Puts the batches of p whose anchors the write that just completed made
 * durable (pstep 2, from the head on) at pstep 3.  A batch with more
 * anchors than one record holds goes back to pstep 1 for its next record.
 */
static void persist_finish(struct ppart *p)
{
	struct pbatch *x;
	char name[300];

	TAILQ_FOREACH(x, &p->q, link) {
		if (x->pstep != 2)
			break;
		if (x->pidx < x->nanchors) {
			x->pstep = 1;
			break;
		}
		if (x->nanchors > 0) {
			x->anchored = 1;
			log_debug("%s: translation anchors of the batch at source "
			    "offsets %" PRId64 "..%" PRId64 " recorded; sending it to "
			    "destination offset %" PRId64, pname(p, name, sizeof(name)),
			    x->src_base, x->src_next - 1, x->dst_base);
		}
		free(x->anchors);
		x->anchors = NULL;
		x->nanchors = 0;
		x->pidx = 0;
		x->pstep = 3;
	}
}

/* Undoes a gathering that stopped: the batches after the head start over. */
static void persist_ungather(struct ppart *p)
{
	struct pbatch *x;

	TAILQ_FOREACH(x, &p->q, link) {
		if (x->pstep != 2)
			break;
		x->pstep = x == TAILQ_FIRST(&p->q) ? 1 : 0;
		x->pidx = 0;
	}
}

/*
 * A new producer epoch, then SYNC once no Produce of the old one can still
 * land (the fence delay of identity_change_fenced()); the run after it may
 * retract the anchors recorded above its first batch (persist_anchors()).
 */
static void retract_fenced(struct ppart *p, const char *what)
{
	const struct pipeline *pl = p->pm->pl;
	char why[900], name[300];
	int64_t fence;

	if (p->pepoch >= INT16_MAX || p->pid < 0) {
		p->pid = -1;
		p->pid_fresh = 1;
		snprintf(why, sizeof(why), "%s: a fresh producer id, then the "
		    "anchors recorded above the destination end are dropped", what);
	} else {
		p->pepoch++;
		snprintf(why, sizeof(why), "%s: producer epoch %d from the "
		    "destination end on (the older epoch fenced), then the anchors "
		    "recorded above the destination end are dropped", what,
		    p->pepoch);
	}
	p->seq_base = -1;
	p->retract_arm = 1;
	log_warnx("%s: %s", pname(p, name, sizeof(name)), why);
	fence = p->unsure_sent_ms + 2 * (pl->cfg->pipeline_request_timeout_ms + 1000);
	pl_part_resync(p, "source batches changed under recorded anchors");
	if (p->not_before < fence) {
		log_info("%s: a Produce of the old identity may still be in a "
		    "broker: re-reading the destination end in %" PRId64 " ms",
		    pname(p, name, sizeof(name)), fence - clock_mono_ms());
		p->not_before = fence;
	}
}

/*
 * The anchors x carries that the recorded map holds already (x fetched
 * again after an uncertain Produce or a restart): *first is the index of
 * its first new anchor.  0, or -1 when one of them disagrees with the map
 * (*bad says which).
 */
static int recognise(struct ppart *p, struct pbatch *x, size_t *first,
    size_t *bad, int64_t *got_out, int *how_out)
{
	const struct mpart *mp = p->mp;
	size_t i, n = mpart_nanchors(mp);

	for (i = 0; i < x->nanchors && n > 0; i++) {
		struct manchor l = mpart_anchor(mp, n - 1);
		int64_t s = x->anchors[i].src, d = x->anchors[i].dst, got = -1;
		int how;

		if (s == l.src && d == l.dst)
			continue; /* the last one recorded */
		if (s >= l.src && d >= l.dst)
			break; /* new from here on */
		how = xlate_src_to_dst(mp->map, s, &got);
		if (how != XLATE_EXACT || got != d) {
			*bad = i;
			*got_out = got;
			*how_out = how;
			return -1;
		}
	}
	*first = i;
	return 0;
}

/*
 * Persists the anchors of b, and of the batches queued after it, before
 * their Produce (the translation map must explain the destination before
 * a batch can be there), in one part-anchors record that also names
 * where the first of them goes (part-sending: until acknowledged, mirrord
 * is only known to have written below that, pipeline/prove.c).  Every
 * batch queued behind b with nothing recorded yet and no new source
 * leader epoch joins, up to PERSIST_MAX_BATCHES batches and
 * PERSIST_MAX_ANCHORS anchors (a batch with more anchors than that, a
 * compacted one full of holes, takes several records).
 *
 * After an uncertain Produce (or a restart) that did not land, the same
 * batches are fetched again and yield the same anchors, which go back from
 * the last recorded one.  Those are recognised when the recorded map
 * already maps each of them exactly so, and not added again.  One that the
 * map explains otherwise means the source batch is not the one whose
 * anchors were recorded: compacted again in between, or gone below the
 * source's log start.  Anchors recorded above the destination end were
 * recorded for batches that never landed; once nothing of the earlier
 * copy can still land (a new producer epoch and the fence delay,
 * retract_fenced()) they are dropped (part-retract) and the batches' new
 * anchors recorded.  A disagreement with anchors of batches that landed
 * is a source that changed under data already copied (or a damaged map):
 * FAILED, naming both.
 *
 * Also records b's source leader epoch when it starts a new one: the epoch
 * history must name the epoch of every batch that may be at the
 * destination, or a restart's check (pipeline/epoch.c) would ask about an
 * older epoch than the last one copied.
 *
 * The writes are asynchronous (group commit, doc/design.md): one write of
 * p is in flight at a time, validated against the model once the one
 * before it has been applied; other partitions' records share its group.
 * Returns 0 when everything is durable (b may go), 1 while a write is in
 * flight (b->pstep says where to go on: mwrite_done() kicks the
 * pipeline), -1 when p failed, was lost or starts again from SYNC.
 */
static int persist_anchors(struct ppart *p, struct pbatch *b)
{
	struct mstate *st = p->pm->pl->st;
	struct mpart *mp = p->mp;
	struct mrec_anchor *v = NULL;
	struct pbatch *x;
	char msg[512], name[300], what[200];
	size_t nv = 0, nb = 0;
	int64_t from;
	int rc = -1, started;
	/* A follower's metadata write applies what other instances wrote
	 * first (mlog_kafka): p may be lost on the way (part_lose() frees its
	 * queue, b included).  Then nothing of b or p is touched again. */
	uint32_t og = p->own_gen;

	if (b->pstep == 0 && b->epoch >= 0 && b->epoch > p->last_epoch) {
		int32_t epoch = b->epoch;
		int r;

		snprintf(what, sizeof(what), "source leader epoch %d from "
		    "destination offset %" PRId64, epoch, b->dst_base);
		mwrite_begin(p, og, MW_EPOCH, b->dst_base, what);
		r = mpart_add_epoch_async(st, mp, b->epoch, b->dst_base,
		    mwrite_done, p, &started, msg, sizeof(msg));
		if (!started)
			mwrite_cancel(p);
		if (p->own_gen != og)
			return -1;
		if (r != 0) {
			/* Not recorded, not sent: a restart's divergence check
			 * (pipeline/epoch.c) asks the source about the newest
			 * recorded epoch, which must be that of every batch
			 * copied.  The retry records it again (pl_drop_queue()
			 * takes last_epoch back from the model). */
			pl_part_fail(p, "cannot record %s: %s", what, msg);
			return -1;
		}
		p->last_epoch = epoch;
		b->pstep = 1;
		if (started)
			return 1;
	}
	if (b->pstep == 0)
		b->pstep = 1;
	if (b->pstep == 2) {
		/* The write that covered it completed (p->mwrite is 0 and p
		 * did not fail). */
		persist_finish(p);
		if (b->pstep == 3)
			return 0;
	}

	/* Gather b and the batches after it. */
	if ((v = calloc(PERSIST_MAX_ANCHORS, sizeof(*v))) == NULL) {
		pl_part_fail(p, "out of memory recording translation anchors");
		return -1;
	}
	for (x = b; x != NULL && nb < PERSIST_MAX_BATCHES; x = TAILQ_NEXT(x, link)) {
		size_t first = 0, bad = 0, take;
		int64_t got = -1;
		int how = 0, r;

		if (x != b && (x->pstep != 0 || (x->epoch >= 0 &&
		    x->epoch > p->last_epoch)))
			break;
		if (x->pidx == 0 && x->nanchors > 0) {
			r = recognise(p, x, &first, &bad, &got, &how);
			if (r == -1) {
				int64_t s = x->anchors[bad].src, d = x->anchors[bad].dst;
				size_t above = mpart_anchors_above(mp, b->dst_base);

				persist_ungather(p);
				if (above == 0) {
					pl_part_fail(p, "the source batch at offsets %" PRId64
					    "..%" PRId64 ", fetched again for destination offset %"
					    PRId64 " (after an uncertain Produce or a restart), "
					    "puts source offset %" PRId64 " at destination offset %"
					    PRId64 ", but the translation recorded for the data "
					    "already copied %s %" PRId64 ": the source changed "
					    "under it", x->src_base, x->src_next - 1, x->dst_base,
					    s, d, how == XLATE_EXACT ? "puts it at" : "has no "
					    "record at it; the next is at", got);
					goto out;
				}
				if (!p->retract_ok || p->retract_gen != p->gen) {
					char why[600];

					snprintf(why, sizeof(why), "the source batch at "
					    "offsets %" PRId64 "..%" PRId64 " puts source offset %"
					    PRId64 " at destination offset %" PRId64 ", not where "
					    "the %zu anchors recorded above destination offset %"
					    PRId64 " (never written) put it: the source changed "
					    "since (compacted again, or below its log start)",
					    x->src_base, x->src_next - 1, s, d, above,
					    b->dst_base);
					retract_fenced(p, why);
					goto out;
				}
				p->retract_ok = 0;
				snprintf(what, sizeof(what), "the %zu translation anchors "
				    "above destination offset %" PRId64, above, b->dst_base);
				mwrite_begin(p, og, MW_RETRACT, b->dst_base, what);
				r = mpart_retract_async(st, mp, b->dst_base, NULL,
				    mwrite_done, p, &started, msg, sizeof(msg));
				if (!started)
					mwrite_cancel(p);
				if (p->own_gen != og)
					goto out;
				if (r != 0) {
					pl_part_fail(p, "cannot drop %s: %s", what, msg);
					goto out;
				}
				log_warnx("%s: dropping %s, recorded for batches that never "
				    "landed: the source batches there changed since",
				    pname(p, name, sizeof(name)), what);
				if (started) {
					rc = 1;
					goto out;
				}
				/* Written synchronously (no event base): again. */
				free(v);
				return persist_anchors(p, b);
			}
			x->pidx = first;
			if (first > 0)
				log_info("%s: the batch at source offsets %" PRId64 "..%"
				    PRId64 " for destination offset %" PRId64 " is sent "
				    "again: %zu of its translation anchors are recorded "
				    "already", pname(p, name, sizeof(name)), x->src_base,
				    x->src_next - 1, x->dst_base, first);
		}
		take = x->nanchors - x->pidx;
		if (take > PERSIST_MAX_ANCHORS - nv) {
			if (x != b)
				break;  /* the next record */
			take = PERSIST_MAX_ANCHORS - nv;
		}
		for (size_t i = 0; i < take; i++) {
			v[nv].src = x->anchors[x->pidx + i].src;
			v[nv].dst = x->anchors[x->pidx + i].dst;
			nv++;
		}
		x->pidx += take;
		x->pstep = 2;
		nb++;
		if (x->pidx < x->nanchors)
			break;  /* b's own anchors fill the record */
	}
	if (nv == 0) {
		persist_finish(p);
		rc = 0;
		goto out;
	}
	/* With batches in flight before b (pipelined), what is known
	 * written ends where the first of them starts (p->dst_next), not at
	 * b. */
	from = p->dst_next >= 0 && p->dst_next < b->dst_base ? p->dst_next :
	    b->dst_base;
	snprintf(what, sizeof(what), "%zu translation anchors of %zu batches "
	    "from destination offset %" PRId64 " (%" PRId64 " -> %" PRId64
	    " first)", nv, nb, b->dst_base, v[0].src, v[0].dst);
	mwrite_begin(p, og, MW_ANCHORS, from, what);
	{
		int r = mpart_add_anchors_async(st, mp, from, v, nv, mwrite_done, p,
		    &started, msg, sizeof(msg));

		if (!started)
			mwrite_cancel(p);
		if (p->own_gen != og)
			goto out;
		if (r != 0) {
			pl_part_fail(p, "cannot record %s: %s", what, msg);
			goto out;
		}
	}
	if (started) {
		rc = 1;
		goto out;
	}
	persist_finish(p);
	rc = b->pstep == 3 ? 0 : 1;
	if (rc == 1) {
		free(v);
		return persist_anchors(p, b);
	}
out:
	free(v);
	return rc;
}

/* Rewrites the header of the head batch of p for sending and makes its
 * records durable: 0 ready, 1 a metadata write is in flight, -1 failed. */
static int prepare_head(struct ppart *p, struct pcluster *dst)
{
	struct pbatch *q = TAILQ_FIRST(&p->q);
	struct batch b;
	struct batch_rewrite rw;
	char err[256];

	if (p->mwrite)
		return 1;   /* its metadata write is not durable yet */
	if (batch_parse(q->buf, q->len, &b, err, sizeof(err)) != BATCH_OK) {
		pl_part_fail(p, "queued batch at source offset %" PRId64 " no longer "
		    "parses: %s", q->src_base, err);
		return -1;
	}
	if (p->pid >= 0 && p->seq_base >= 0 && q->dst_base < p->seq_base) {
		/* The destination log is below where this identity began (a
		 * topic recreated and added again): the broker may still hold
		 * the identity's state from before, so a new epoch, sequence 0
		 * here. */
		log_info("%s/%s-%" PRId32 ": destination offset %" PRId64 " lies below "
		    "the start (%" PRId64 ") of producer id %" PRId64 " epoch %d: "
		    "a new epoch", p->pm->name, p->topic, p->index, q->dst_base,
		    p->seq_base, p->pid, p->pepoch);
		if (p->pepoch >= INT16_MAX) {
			p->pid = -1;
			p->pid_fresh = 1;
			pl_kick(p->pm->pl);
			return -1; /* a fresh id on a later round */
		}
		p->pepoch++;
		p->seq_base = -1;
	}
	if (p->pid >= 0 && p->seq_base < 0) {
		/* A new identity: sequence 0 at this batch, recorded before the
		 * batch can be on the destination (provenance reads it). */
		char msg[512], what[160];
		uint32_t og = p->own_gen;
		int started, r;

		snprintf(what, sizeof(what), "producer id %" PRId64 " epoch %d "
		    "from destination offset %" PRId64, p->pid, p->pepoch,
		    q->dst_base);
		mwrite_begin(p, og, MW_PRODUCER, q->dst_base, what);
		r = mpart_set_producer_async(p->pm->pl->st, p->mp, p->pid,
		    p->pepoch, q->dst_base, mwrite_done, p, &started, msg,
		    sizeof(msg));
		if (!started)
			mwrite_cancel(p);
		/* Lost while the follower's write applied others' records:
		 * q went with p's queue (part_lose()). */
		if (p->own_gen != og)
			return -1;
		if (r != 0) {
			pl_part_fail(p, "cannot record producer id %" PRId64 " epoch %d "
			    "from destination offset %" PRId64 ": %s", p->pid, p->pepoch,
			    q->dst_base, msg);
			return -1;
		}
		if (started)
			return 1; /* mwrite_done() sets seq_base once durable */
		p->seq_base = q->dst_base;
		log_info("%s/%s-%" PRId32 ": writing as producer id %" PRId64
		    " epoch %d, sequence 0 at destination offset %" PRId64,
		    p->pm->name, p->topic, p->index, p->pid, p->pepoch, q->dst_base);
	}
	/* An identity is used only from where it is recorded to begin. */
	MR_ASSERT_MSG(p->pid < 0 || (p->seq_base >= 0 &&
	    q->dst_base >= p->seq_base), "producer id %" PRId64 " from %" PRId64
	    ", batch at %" PRId64, p->pid, p->seq_base, q->dst_base);
	memset(&rw, 0, sizeof(rw));
	rw.flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN;
	rw.base_offset = 0; /* brokers assign offsets; Kafka 4 wants 0 from clients */
	rw.producer_id = p->pid;
	rw.producer_epoch = p->pid >= 0 ? p->pepoch : -1;
	/*
	 * The sequence is the batch's distance from where the identity began
	 * (mod 2^31, as Kafka wraps it): the same batch always carries the
	 * same sequence, also after a restart (the identity is recorded), so a
	 * broker that still holds an in-flight copy from before a crash or
	 * timeout rejects the second one as a duplicate.
	 */
	rw.base_sequence = p->pid >= 0 ?
	    (int32_t)((q->dst_base - p->seq_base) & INT32_MAX) : -1;
	/* A copy of its own first if a request not written yet still sends
	 * these bytes (pbatch_rewrite()). */
	if (pbatch_rewrite(q, &b, &rw, err, sizeof(err)) != 0) {
		pl_part_fail(p, "cannot rewrite the batch at source offset %" PRId64
		    ": %s", q->src_base, err);
		return -1;
	}
	/* The bytes sent carry the identity and the sequence that is the
	 * batch's distance from where the identity began. */
	MR_ASSERT(p->pid < 0 || ((int64_t)be64_load(q->buf +
	    BATCH_OFF_PRODUCER_ID) == p->pid && (int32_t)be32_load(q->buf +
	    BATCH_OFF_BASE_SEQUENCE) == (int32_t)((q->dst_base - p->seq_base) &
	    INT32_MAX)));
	q->wpid = rw.producer_id;
	q->wepoch = rw.producer_epoch;
#ifdef MIRRORD_STRICT_PRODUCE
	/* Its CRC was verified at intake and carried over the rewrite; the
	 * broker verifies it again (CORRUPT_MESSAGE).  A second pass here
	 * cost a tenth of mirrord's CPU on an uncompressed copy. */
	if (batch_validate_produce_flags(q->buf, q->len, 0, BATCH_VP_CRC_CARRIED |
	    (q->walked ? BATCH_VP_RECORDS_WALKED : 0), err, sizeof(err)) != 0) {
		pl_part_fail(p, "the batch for source offset %" PRId64 " would break "
		    "the broker's rules (strict produce check): %s", q->src_base, err);
		return -1;
	}
#endif
	if (q->pstep == 3)
		return 0;
	return persist_anchors(p, q);
}

/* How many batches of p may be in flight on a connection that speaks
 * Produce version v. */
/*
 * Batches of p that may be in flight.  More than one only once the broker
 * holds the sequence state of p's identity (seq_known): a broker with no
 * state for a producer id (a new identity, or one whose state it expired)
 * appends that producer's first batch whatever its sequence, so when the
 * batch before is refused (MESSAGE_TOO_LARGE, say) the next one would land
 * in its place.  With the state, it is refused as out of order.
 */
static int part_depth(const struct ppart *p, int v)
{
	int64_t n = p->pm->pl->cfg->pipeline_max_inflight_batches_per_partition;

	if (v < PW_PRODUCE_PIPELINED || p->pid < 0 || n <= 1)
		return 1;
	if (!p->seq_known || p->known_pid != p->pid ||
	    p->known_epoch != p->pepoch)
		return 1;
	return (int)MIN(n, PRODUCE_DEPTH_MAX);
}

/* 1 if a batch of p in flight had translation anchors recorded. */
static int inflight_anchored(const struct ppart *p)
{
	const struct pbatch *b;

	TAILQ_FOREACH(b, &p->inflight, link)
		if (b->anchored)
			return 1;
	return 0;
}

/*
 * 1 when p's head batch must wait for p's batches in flight: it would
 * record something that says the destination holds everything below it
 * (a new source leader epoch or a new producer identity starting at it:
 * pipeline/prove.c's known_written() reads both as written); or it would
 * record translation anchors while another batch whose anchors were
 * recorded is in flight (after an uncertain answer the batches from the
 * destination end on are fetched again, and their anchors are recognised
 * against the recorded map only when nothing after the first of them was
 * recorded: persist_anchors(); so at most one batch with recorded anchors
 * is beyond the acknowledged end, as without pipelining); or it would go
 * on another connection (answers are only in order on one).
 */
static int part_barrier(const struct ppart *p, const struct pbatch *q,
    const struct kconn *c)
{
	if (p->ninflight == 0)
		return 0;
	return p->inflight_conn != c || (q->epoch >= 0 && q->epoch > p->last_epoch) ||
	    p->pid < 0 || p->seq_base < 0 || q->dst_base < p->seq_base ||
	    (q->nanchors > 0 && inflight_anchored(p));
}

/*
 * Most Produce requests in flight to one destination broker: the
 * per-partition depth (configured, at most 5), whatever the partitions.
 *
 * Kafka reads one request of a connection at a time and answers it before
 * it reads the next, so the broker's turnaround per request bounds how many
 * requests a connection carries per second, however many are in flight; a
 * request carries at most one batch of a partition, so what a connection
 * moves per second is the batches per request times that rate.  Without a
 * cap on requests, partitions that started at different moments stay out of
 * step: each answer frees one partition's slot and the next request carries
 * that one batch alone (a 1 KiB batch per broker turnaround: 1.7 MB/s on
 * the small-batch corpus, bench_kafka).  With at most `depth` requests in
 * flight, a partition that is at its depth has a batch in every request in
 * flight, so the answer that frees a request slot also frees a slot of
 * every partition: the next request carries a batch of every partition
 * that has one ready.
 */
static int produce_conn_cap(const struct pipeline *pl)
{
	int64_t n = pl->cfg->pipeline_max_inflight_batches_per_partition;

	return (int)MAX(1, MIN(n, PRODUCE_DEPTH_MAX));
}

/* The Produce version for c (0, or -1 when none is usable). */
static int produce_version(struct pcluster *dst, struct kconn *c)
{
	/*
	 * By topic id when the broker can (the request cannot land in a
	 * topic recreated under the name since mirrord checked it).  Older
	 * brokers get the name: a topic recreated while a Produce is in
	 * flight, or before the next Metadata answer shows the new id, takes
	 * the batch at offset 0..; the answer's offset then fails the
	 * partition (pipeline/ident.c names the recreation at the next answer)
	 * but the records are there.
	 */
	int v = kconn_pick_version(c, KP_API_PRODUCE, PW_PRODUCE_BY_ID,
	    PW_PRODUCE_BY_ID);

	if (v < 0)
		v = kconn_pick_version(c, KP_API_PRODUCE, 6, PW_PRODUCE_MAX);
	if (v < 0)
		v = kconn_pick_version(c, KP_API_PRODUCE, PW_PRODUCE_MIN, 4);
	if (v < 0)
		log_warnx("%s: %s supports no usable Produce version", dst->label,
		    kconn_name(c));
	return v;
}

/*
 * One Produce to broker b with the next batch of every partition it leads
 * that may send one more: the number of batches sent, 0 when none was
 * ready (or the request could not go), -1 when b cannot be written to now.
 * *c and *v are the connection and version, found with the first ready
 * partition.
 */
/*
 * Drops from a Produce request being built the entries of partitions lost
 * (or whose mirror was deleted) since they were added: part_lose() freed
 * a lost one's batch (it was in p->inflight); a dead one's stays in
 * p->inflight until the partition is freed.  Nothing of the batch is
 * touched.  Returns the bytes dropped.
 */
static size_t request_purge(struct pctx *x, struct produce_req *r)
{
	size_t k = 0, dropped = 0;

	for (size_t i = 0; x != NULL && i < x->n; i++) {
		struct ppart *p = x->e[i].p;

		if (pl_part_kept(p, x->e[i].ogen)) {
			x->e[k] = x->e[i];
			r->tps[k] = r->tps[i];
			k++;
			continue;
		}
		dropped += r->tps[i].records_len;
		log_info("%s/%s-%" PRId32 ": lost while a Produce request was being "
		    "built (a metadata write applied another instance's record): "
		    "its batch is not sent", p->pm->name, p->topic, p->index);
		pl_part_unref(p);
	}
	if (x != NULL)
		x->n = r->n = k;
	return dropped;
}

static int produce_request(struct pipeline *pl, struct pbroker *b,
    struct kconn **cp, int *vp, size_t total)
{
	if (b->produce_reqs >= produce_conn_cap(pl))
		return 0; /* the next answer frees a slot (and kicks) */
	struct pcluster *dst = pl->dst;
	struct produce_req r = { 0 };
	struct pctx *x = NULL;
	int64_t now = clock_mono_ms();
	size_t bytes = 0, copied = 0, held = pl_held_now(pl);
	size_t unsent = pl_unsent_bytes(pl);
	struct kconn_lender ld = { PRODUCE_LEND_MIN, produce_lend, &r };
	char err[256];
	int rc = 0, ph;
	uint64_t losses;

	for (size_t mi = 0; mi < pl->nmirrors; mi++) {
		struct pmirror *pm = pl->mirrors[mi];

		for (size_t i = 0; i < pm->nparts; i++) {
			struct ppart *p = pm->parts[i];
			struct kuuid tid = { { 0 } };
			struct pbatch *q;

			if (p->step != PS_RUN || p->halt != HALT_NONE ||
			    TAILQ_EMPTY(&p->q) || !pl_part_wants_run(p) ||
			    now < p->not_before || ppart_leader(p, 1) != b)
				continue;
			if (*cp == NULL) {
				if ((*cp = pbroker_conn(b)) == NULL ||
				    (*vp = produce_version(dst, *cp)) < 0) {
					rc = -1;
					goto out;
				}
			}
			if (p->ninflight > 0 && p->ninflight >= part_depth(p, *vp))
				continue;
			if (r.tps == NULL) {
				r.tps = calloc(total, sizeof(*r.tps));
				x = ctx_new(pl, dst, b, total);
				if (r.tps == NULL || x == NULL) {
					rc = -1;
					goto out;
				}
			}
			q = TAILQ_FIRST(&p->q);
			if (r.n > 0 && bytes + q->len > dst->kcfg.conn.max_request_bytes / 2)
				continue; /* the next request */
			/* The request copies its small batches (and one whose
			 * last send is not written yet: pbatch_rewrite()) until written:
			 * under the cap, or alone (else nothing could move).  The
			 * others are lent, already counted. */
			size_t copy = q->len < PRODUCE_LEND_MIN || q->loan != NULL ?
			    q->len : 0;

			if ((int64_t)(held + copied + copy) > tcap(pl) &&
			    (r.n > 0 || unsent > 0))
				continue;
			if (part_barrier(p, q, *cp))
				continue; /* once the batches in flight are answered */
			if (*vp >= PW_PRODUCE_BY_ID && pident_dest_id(p, &tid) != 0) {
				/* No recorded id yet: the next answer. */
				pcluster_want_metadata(dst);
				continue;
			}
			if (part_identity(p, dst) != 0)
				continue; /* waiting for a producer id, or failed */
			losses = pl->losses;
			ph = prepare_head(p, dst);
			/* Its metadata write (a follower's) may have applied
			 * records that took partitions already in this request
			 * away: their batches are freed, their entries go. */
			if (pl->losses != losses)
				bytes -= request_purge(x, &r);
			if (ph != 0)
				continue; /* failed, or its metadata write is in flight */
			/* One owner per partition: only this instance's
			 * partitions are produced to. */
			MR_ASSERT(p->owned && pl_part_owned(p));
			/* Batches in flight follow each other under one
			 * identity, without a gap: their sequences follow on. */
			const struct pbatch *prev = TAILQ_LAST(&p->inflight, pbatchq);

			MR_ASSERT(prev == NULL || (prev->dst_base + prev->count ==
			    q->dst_base && prev->wpid == q->wpid &&
			    prev->wepoch == q->wepoch));
			/* Still counted in the queued bytes until answered. */
			TAILQ_REMOVE(&p->q, q, link);
			TAILQ_INSERT_TAIL(&p->inflight, q, link);
			p->ninflight++;
			pl->totals.inflight_batches++;
			if (p->ninflight > pl->totals.partition_inflight_peak)
				pl->totals.partition_inflight_peak = p->ninflight;
			p->inflight_conn = *cp;
			p->last_send_ms = now;
			bytes += q->len;
			copied += q->len < PRODUCE_LEND_MIN ? q->len : 0;
			r.tps[r.n].topic = p->topic;
			r.tps[r.n].partition = p->index;
			r.tps[r.n].records = q->buf;
			r.tps[r.n].records_len = q->len;
			r.tps[r.n].topic_id = tid;
			r.n++;
			ctx_add(x, p, q->dst_base);
			x->e[x->n - 1].tid = tid;
			x->e[x->n - 1].b = q;
		}
	}
	if (r.n == 0)
		goto out;
	/* Group by topic for the encoder (stable insertion sort of both). */
	for (size_t i = 1; i < r.n; i++) {
		struct pw_tp t = r.tps[i];
		__typeof__(x->e[0]) e = x->e[i];
		size_t j = i;

		while (j > 0 && strcmp(r.tps[j - 1].topic, t.topic) > 0) {
			r.tps[j] = r.tps[j - 1];
			x->e[j] = x->e[j - 1];
			j--;
		}
		r.tps[j] = t;
		x->e[j] = e;
	}
	/* No partition lost since it was added (request_purge()). */
	for (size_t i = 0; i < x->n; i++)
		MR_ASSERT(pl_part_kept(x->e[i].p, x->e[i].ogen) &&
		    x->e[i].p->owned);
	x->version = (int16_t)*vp;
	r.timeout_ms = (int32_t)MIN(pl->cfg->pipeline_request_timeout_ms, INT32_MAX);
	r.x = x;
	r.lend_at = 0;
	/* A timeout settles this request's batches alone (uncertain: SYNC
	 * and proof); the others on the connection are still answered. */
	if (kconn_send_lent(*cp, KP_API_PRODUCE, (int16_t)*vp, produce_encode,
	    &r, &ld, KCONN_F_KEEP_ON_TIMEOUT,
	    (int)MIN(pl->cfg->pipeline_request_timeout_ms + 1000, INT32_MAX),
	    produce_response, x, err, sizeof(err)) != 0) {
		/* Not sent: the batches go back (each is its partition's
		 * newest in flight). */
		for (size_t i = 0; i < x->n; i++) {
			struct ppart *p = x->e[i].p;
			struct pbatch *q = x->e[i].b;

			MR_ASSERT(q == TAILQ_LAST(&p->inflight, pbatchq) &&
			    p->ninflight > 0);
			TAILQ_REMOVE(&p->inflight, q, link);
			p->ninflight--;
			pl->totals.inflight_batches--;
			TAILQ_INSERT_HEAD(&p->q, q, link);
			x->e[i].b = NULL;
		}
		log_debug("%s: Produce: %s", dst->label, err);
		rc = -1;
		goto out;
	}
	rc = (int)r.n;
	x = NULL;
	b->produce_reqs++;
	pl->totals.produce_requests++;
	pl->totals.produce_req_batches += (int64_t)r.n;
	if (pl->ms != NULL) {
		metrics_counter_inc(metrics_series(MSTD(pl->ms, PRODUCE_REQUESTS),
		    0, NULL));
		metrics_counter_add(metrics_series(MSTD(pl->ms,
		    PRODUCE_REQUEST_BATCHES), 0, NULL), (double)r.n);
	}
	if (b->produce_reqs > pl->totals.broker_requests_peak)
		pl->totals.broker_requests_peak = b->produce_reqs;
	(void)pl_held_note(pl); /* the request's copies, until written */
out:
	free(r.tps);
	if (x != NULL)
		ctx_free(x);
	return rc;
}

void pcopy_produce_round(struct pipeline *pl)
{
	struct pcluster *dst = pl->dst;
	size_t total = 0;

	dst->pid_demand = 0; /* counted again below */
	/* pl->qbytes counts every batch a partition holds (queued, in
	 * flight, failed, unsure): none, nothing to send, and no walk of
	 * every partition per broker on each kick of an idle pipeline. */
	if (pl->qbytes == 0)
		return;
	/* No proven group membership: another instance may own these
	 * partitions by now (pipeline_set_lease()). */
	if (!pipeline_lease_held(pl))
		return;
	for (size_t i = 0; i < pl->nmirrors; i++)
		total += pl->mirrors[i]->nparts;
	if (total == 0)
		return;
	for (size_t bi = 0; bi < dst->nbrokers; bi++) {
		struct kconn *c = NULL;
		int v = -1;

		/* Each request takes one more batch of every partition that
		 * may have one more in flight, up to the broker's cap. */
		for (int k = 0; k < PRODUCE_DEPTH_MAX; k++)
			if (produce_request(pl, dst->brokers[bi], &c, &v, total) <= 0)
				break;
	}
}
