/*
 * pipe_preserve.c: a failback divergence preserved (issue 11).
 *
 * With RecoverMirrorTopics' resolution "preserve", a partition FAILED by
 * "failback divergence at offset N" (pipe_prove.c) copies the destination
 * partition's offsets N..D-1 (the old primary's records never mirrored)
 * into partition p of the topic <topic>.diverged-<epoch> on the
 * destination cluster, then goes on as with skip-over: the records stay
 * where they are too (Kafka cannot remove a partition's tail) and the
 * source's records are copied after them.  Steps, one request at a time,
 * from the prove step's turn (pprove_send):
 *
 *   1. CreateTopics of the aside topic (as many partitions as the topic;
 *      TOPIC_ALREADY_EXISTS is fine: another partition created it);
 *   2. wait for its leader in the destination's metadata;
 *   3. Fetch the destination partition at the next offset (read_committed:
 *      aborted data is never preserved) and take its batch holding it;
 *   4. Produce that batch to the aside partition, without producer id and
 *      with the transactional flag cleared (its transaction committed:
 *      read_committed returned it), acks=all; control batches are skipped.
 *
 * Keys, values, headers and timestamps are preserved byte for byte (the
 * records section of a batch is not touched); offsets in the aside topic
 * start at its end.  A failure leaves the partition FAILED naming it.
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
#include "log.h"
#include "pipe_int.h"
#include "pipe_txn.h"
#include "pipe_wire.h"

#define API_CREATE_TOPICS 19
#define PV_FETCH_BYTES (1 << 20)
#define PV_FRAMING 256    /* an answer's bytes besides its records */

struct pvctx {
	struct ppart *p;
	uint32_t gen;
	int16_t version;
	int reading;      /* a Fetch: its answer's bytes in pl->dreads */
	size_t held;
};

/* The batch kept for its Produce is no longer needed. */
static void pv_drop_buf(struct ppart *p)
{
	free(p->pv_buf);
	p->pv_buf = NULL;
	pl_dread_set(p->pm->pl, &p->pv_held, 0);
}

static const char *pname(const struct ppart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%" PRId32, p->pm->name, p->topic, p->index);
	return buf;
}

static int live(const struct pvctx *x)
{
	return !x->p->dead && x->gen == x->p->gen && x->p->step == PS_PROVE &&
	    x->p->pv_state > 0;
}

static struct pvctx *ctx_new(struct ppart *p, int16_t version)
{
	struct pvctx *x = calloc(1, sizeof(*x));

	if (x != NULL) {
		x->p = p;
		x->gen = p->gen;
		x->version = version;
		p->refs++;
	}
	return x;
}

static void ctx_end(struct pvctx *x)
{
	struct ppart *p = x->p;

	p->step_inflight = 0;
	if (x->reading)
		pl_dread_done(p->pm->pl, &x->held);
	pl_kick(p->pm->pl);
	pl_part_unref(p);
	free(x);
}

static void pv_fail(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void pv_fail(struct ppart *p, const char *fmt, ...)
{
	char why[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	p->pv_state = 0;
	pv_drop_buf(p);
	pl_part_fail_final(p, "failback divergence at offset %" PRId64 ": "
	    "preserving offsets %" PRId64 "..%" PRId64 " into topic %s failed "
	    "after %" PRId64 " records: %s", p->pv_from, p->pv_from,
	    p->pv_end - 1, p->pv_topic, p->pv_records, why);
}

/* ---- 1. CreateTopics -------------------------------------------------- */

static int create_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct ppart *p = msg;
	const struct kcluster_topic *t = pcluster_topic(p->pm->pl->dst, p->topic);

	kw_array(w, 1);
	kw_str(w, kstr_c(p->pv_topic));
	kw_i32(w, t != NULL ? t->npart : p->index + 1);
	kw_i16(w, version >= 4 ? -1 : (int16_t)MAX(1, MIN(3,
	    p->pm->pl->dst->nbrokers)));
	kw_array(w, 0);
	kw_array(w, 0);
	kw_i32(w, 30000);
	kw_bool(w, 0);
	return w->err ? -1 : 0;
}

static void create_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;
	int16_t e = -1;
	int32_t n;

	(void)c;
	if (!live(x))
		goto out;
	if (err != KCONN_E_OK) {
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
		goto out; /* again */
	}
	(void)kr_i32(body);
	n = kr_array(body);
	for (int32_t i = 0; i < n && !body->err; i++) {
		struct kstr name = kr_str(body);
		int16_t ec = kr_i16(body);

		(void)kr_str(body);
		if (kstr_eq(name, p->pv_topic))
			e = ec;
	}
	if (e == 0 || e == 36) {
		p->pv_state = 2;
		pcluster_want_metadata(p->pm->pl->dst);
	} else {
		pv_fail(p, "CreateTopics %s: %s", p->pv_topic, body->err ?
		    "malformed answer" : kerr_name(e));
	}
out:
	(void)errstr;
	ctx_end(x);
}

/* ---- 3. Fetch the old primary's batch ----------------------------------- */

struct pv_fetch {
	struct pw_fetch_req req;
	struct pw_tp tp;
};

static int fetch_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct pv_fetch *f = msg;

	return pw_fetch_encode(w, version, &f->req, &f->tp, 1);
}

static void fetch_part(void *arg, const struct pw_fetch_part *fp)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;
	struct batch_iter it;
	struct batch b;
	struct batch_rewrite rw;
	struct ptxn tx;
	char err[256];
	int rc, verdict;

	if (fp->partition != p->index || !kstr_eq(fp->topic, p->topic) ||
	    !live(x) || p->pv_state != 3)
		return;
	p->pv_state = 30; /* answered */
	if (fp->error != 0) {
		p->pv_state = 3;
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
		pcluster_want_metadata(p->pm->pl->dst);
		return;
	}
	if (ptxn_init(&tx, fp->aborted, fp->naborted, err, sizeof(err)) != 0) {
		pv_fail(p, "the aborted transactions of the Fetch at offset %"
		    PRId64 ": %s", p->pv_at, err);
		return;
	}
	batch_iter_init(&it, fp->records.p, fp->records.len > 0 ?
	    (size_t)fp->records.len : 0);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		verdict = ptxn_batch(&tx, &b, err, sizeof(err));
		if (verdict == PTXN_ERROR) {
			ptxn_fini(&tx);
			pv_fail(p, "batch at offset %" PRId64 ": %s", b.base_offset,
			    err);
			return;
		}
		if (batch_last_offset(&b) < p->pv_at)
			continue;
		ptxn_fini(&tx);
		if (verdict != PTXN_KEEP) {
			p->pv_at = batch_next_offset(&b);
			p->pv_skipped++;
			p->pv_state = p->pv_at >= p->pv_end ? 5 : 3;
			return;
		}
		pv_drop_buf(p);
		p->pv_buf = malloc(b.len);
		if (p->pv_buf == NULL) {
			pv_fail(p, "out of memory");
			return;
		}
		pl_dread_set(p->pm->pl, &p->pv_held, b.len);
		memset(&rw, 0, sizeof(rw));
		rw.base_offset = 0;
		rw.flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN;
		rw.producer_id = -1;
		rw.producer_epoch = -1;
		rw.base_sequence = -1;
		if (batch_rewrite_header(&b, &rw, p->pv_buf, b.len, err,
		    sizeof(err)) != 0) {
			pv_fail(p, "batch at offset %" PRId64 ": %s", b.base_offset,
			    err);
			return;
		}
		p->pv_len = b.len;
		p->pv_count = b.record_count;
		p->pv_next = batch_next_offset(&b);
		p->pv_state = 4;
		return;
	}
	ptxn_fini(&tx);
	if (rc == BATCH_ERROR)
		pv_fail(p, "malformed batch at offset %" PRId64 ": %s", p->pv_at,
		    err);
	else if (fp->high_watermark <= p->pv_at || fp->last_stable_offset <=
	    p->pv_at)
		/* Nothing committed left (an open transaction at the end). */
		p->pv_state = 5;
	else
		p->pv_state = 3; /* a partial batch: again */
}

static void fetch_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;
	int16_t top = 0;

	(void)errstr;
	if (err == KCONN_E_OK)
		pl_dread_grow(p->pm->pl, &x->held, kr_left(body));
	if (live(x) && (err != KCONN_E_OK ||
	    pw_fetch_decode(body, x->version, &top, fetch_part, x) < 0)) {
		if (err == KCONN_E_OK)
			kconn_close(c, KCONN_E_PROTOCOL, "malformed Fetch response");
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	}
	if (live(x) && p->pv_state == 30)
		p->pv_state = 3;
	ctx_end(x);
}

/* ---- 4. Produce it aside ------------------------------------------------ */

struct pv_produce {
	struct pw_tp tp;
};

static int produce_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct pv_produce *r = msg;

	return pw_produce_encode(w, version, -1, 30000, &r->tp, 1);
}

static void produce_part(void *arg, const struct pw_produce_part *pp)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;

	if (!live(x) || p->pv_state != 4 || pp->partition != p->index)
		return;
	if (pp->error == 0) {
		pv_drop_buf(p);
		p->pv_records += p->pv_count;
		p->pv_batches++;
		p->pv_at = p->pv_next;
		p->pv_state = p->pv_at >= p->pv_end ? 5 : 3;
	} else if (pp->error == KERR_NOT_LEADER_OR_FOLLOWER ||
	    pp->error == KERR_LEADER_NOT_AVAILABLE ||
	    pp->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		p->pv_state = 2;
		pcluster_want_metadata(p->pm->pl->dst);
	} else {
		pv_fail(p, "Produce to %s: %s", p->pv_topic, kerr_name(pp->error));
	}
}

static void produce_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;

	(void)c;
	(void)errstr;
	if (live(x) && (err != KCONN_E_OK ||
	    pw_produce_decode(body, x->version, produce_part, x) < 0))
		/* Unknown fate: produced again, a duplicate at worst (said in
		 * the report's wording: "at least"). */
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	ctx_end(x);
}

/* ---- the steps ------------------------------------------------------------ */

int ppreserve_start(struct ppart *p, int64_t from, int64_t end, int32_t epoch)
{
	char *t = NULL;

	if (asprintf(&t, "%s.diverged-%" PRId32, p->topic, MAX(epoch, 0)) < 0)
		return -1;
	if (strlen(t) > 249) {
		free(t);
		return -1;
	}
	free(p->pv_topic);
	p->pv_topic = t;
	p->pv_from = p->pv_at = from;
	p->pv_end = end;
	p->pv_records = p->pv_batches = p->pv_skipped = 0;
	pv_drop_buf(p);
	p->pv_state = 1;
	return 0;
}

/* 1 while preserving (it took the prove step's turn), 0 when done or
 * not preserving. */
int ppreserve_step(struct ppart *p)
{
	struct pcluster *dst = p->pm->pl->dst;
	struct pvctx *x;
	struct kconn *c = NULL;
	char err[256], name[300];
	int v;

	switch (p->pv_state) {
	case 0:
		return 0;
	case 1:
		c = pcluster_ctl(dst);
		v = c != NULL ? kconn_pick_version(c, API_CREATE_TOPICS, 2, 4) : -1;
		if (v < 0 || (x = ctx_new(p, (int16_t)v)) == NULL)
			break;
		if (kconn_send(c, API_CREATE_TOPICS, (int16_t)v, create_encode, p,
		    0, 0, create_done, x, err, sizeof(err)) != 0) {
			pl_part_unref(p);
			free(x);
			break;
		}
		p->step_inflight = 1;
		return 1;
	case 2: {
		const struct kcluster_topic *t = pcluster_topic(dst, p->pv_topic);

		if (t != NULL && t->error == 0 && p->index < t->npart &&
		    t->leader[p->index] >= 0)
			p->pv_state = 3;
		else
			pcluster_want_metadata(dst);
		break;
	}
	case 3: {
		struct pbroker *b = ppart_leader(p, 1);
		struct pv_fetch f;
		size_t want = PV_FETCH_BYTES + PV_FRAMING + strlen(p->topic);

		/* A batch kept from a Produce that failed is fetched again. */
		pv_drop_buf(p);
		c = b != NULL ? pbroker_conn(b) : NULL;
		v = c != NULL ? kconn_pick_version(c, KP_API_FETCH, PW_FETCH_MIN,
		    PW_FETCH_MAX) : -1;
		if (v < 4)
			break;
		if (!pl_dread_room(p->pm->pl, want))
			return 1; /* tried again when a read ends */
		if ((x = ctx_new(p, (int16_t)v)) == NULL)
			break;
		memset(&f, 0, sizeof(f));
		f.req.max_wait_ms = 0;
		f.req.min_bytes = 1;
		f.req.max_bytes = PV_FETCH_BYTES;
		f.req.isolation = 1; /* read_committed */
		f.tp.topic = p->topic;
		f.tp.partition = p->index;
		f.tp.offset = p->pv_at;
		f.tp.max_bytes = PV_FETCH_BYTES;
		f.tp.leader_epoch = -1;
		f.tp.last_epoch = -1;
		x->reading = 1;
		pl_dread_start(p->pm->pl, &x->held, want);
		if (kconn_send(c, KP_API_FETCH, (int16_t)v, fetch_encode, &f, 0,
		    30000, fetch_done, x, err, sizeof(err)) != 0) {
			pl_dread_done(p->pm->pl, &x->held);
			pl_part_unref(p);
			free(x);
			break;
		}
		p->step_inflight = 1;
		return 1;
	}
	case 4: {
		const struct kcluster_topic *t = pcluster_topic(dst, p->pv_topic);
		struct pv_produce r;

		if (t == NULL || p->index >= t->npart || t->leader[p->index] < 0) {
			p->pv_state = 2;
			break;
		}
		for (size_t i = 0; i < dst->nbrokers; i++)
			if (dst->brokers[i]->id == t->leader[p->index])
				c = pbroker_conn(dst->brokers[i]);
		v = c != NULL ? kconn_pick_version(c, KP_API_PRODUCE,
		    PW_PRODUCE_MIN, PW_PRODUCE_MAX) : -1;
		if (v < 0 || (x = ctx_new(p, (int16_t)v)) == NULL)
			break;
		memset(&r, 0, sizeof(r));
		r.tp.topic = p->pv_topic;
		r.tp.partition = p->index;
		r.tp.records = p->pv_buf;
		r.tp.records_len = p->pv_len;
		if (kconn_send(c, KP_API_PRODUCE, (int16_t)v, produce_encode, &r, 0,
		    30000, produce_done, x, err, sizeof(err)) != 0) {
			pl_part_unref(p);
			free(x);
			break;
		}
		p->step_inflight = 1;
		return 1;
	}
	case 5:
		log_warnx("%s: failback divergence at offset %" PRId64 ": offsets "
		    "%" PRId64 "..%" PRId64 " preserved into topic %s partition %"
		    PRId32 " (%" PRId64 " records in %" PRId64 " batches; %" PRId64
		    " control or aborted batches not copied)",
		    pname(p, name, sizeof(name)), p->pv_from, p->pv_from,
		    p->pv_end - 1, p->pv_topic, p->index, p->pv_records,
		    p->pv_batches, p->pv_skipped);
		p->pv_state = 0;
		pv_drop_buf(p);
		return 0;
	default:
		break;
	}
	p->not_before = clock_mono_ms() + 200;
	return 1;
}
