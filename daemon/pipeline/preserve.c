/*
 * pipeline/preserve.c: what a failback finds after the stop point, and a
 * failback divergence preserved.
 *
 * A failback (pipeline/prove.c) knows from the source's mark that the mirror
 * of the destination cluster (the old primary) stopped copying this
 * partition at offset fb_last.  What the destination holds after it is
 * read here as a read_committed consumer of the old primary reads it
 * (Fetch with isolation 1; pipeline/txn.c decides each batch):
 *
 *   scan      from fb_last to the destination end pv_end.  The batch
 *             holding fb_last must be the one mirrored (it ends there, of
 *             the leader epoch mirrored: else pv_bad).  After it,
 *             committed records (plain, or of committed transactions),
 *             transaction markers and aborted batches are counted.  A
 *             transaction still open stops the scan at the last stable
 *             offset (pv_open).  An answer whose high watermark is not
 *             pv_end means the end moved (a transaction ended, someone
 *             writes): the partition starts again from SYNC.  Then
 *             pprove_failback_scanned() decides: a committed record after
 *             fb_last is a divergence, markers and aborted records alone
 *             are not.
 *   preserve  RecoverMirrorTopics' resolution "preserve": the committed
 *             records of pv_from..pv_end-1 are copied, in order, into
 *             partition p of <topic>.diverged-<epoch> on the destination
 *             cluster; then pipeline/prove.c goes on as with skip-over.  One
 *             request at a time, from the prove step's turn:
 *               CreateTopics (as many partitions as the topic;
 *               TOPIC_ALREADY_EXISTS is fine), the partition's leader in
 *               the destination's metadata, a producer identity of its own
 *               (the destination's pool), then per committed batch a Fetch
 *               at pv_at (markers and aborted batches passed over and
 *               counted) and a Produce of that batch with the identity,
 *               numbered from 0, and the transactional flag cleared (its
 *               transaction committed), acks=all.  A Produce whose answer
 *               is lost is sent again as it was: the broker drops the
 *               duplicate, so each record is in the aside topic once.
 *
 * Keys, values, headers and timestamps are the batch's own, byte for byte
 * (the records section is untouched, unless a batch has offset holes: it
 * is re-encoded with contiguous offsets, records otherwise unchanged); the
 * aside topic gives the records offsets of its own, contiguous, in the
 * order of the old primary's: the log line and the partition's note
 * (ppreserve_note(), DescribeMirrors) name the old primary's offsets
 * preserved and the aside offsets they landed at.  A failure leaves the
 * partition FAILED naming it; nothing is ever written to the partition
 * itself.
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
#include "txn.h"
#include "wire.h"

#define API_CREATE_TOPICS 19
#define PV_FETCH_BYTES (1 << 20)
#define PV_FRAMING 256           /* an answer's bytes besides its records */
#define PV_REENCODE_MAX (64u << 20) /* a batch with holes, re-encoded */
#define PV_WAIT_MS 1000          /* between looks at an open transaction */
#define PV_WAIT_LOG_MS 60000     /* the reminder while it stays open */

struct pvctx {
	struct ppart *p;
	uint32_t gen;
	int16_t version;
	int state;        /* the pv_state it was sent in */
	int answered;     /* the partition was in the answer */
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
	    x->p->pv_state == x->state;
}

static struct pvctx *ctx_new(struct ppart *p, int16_t version)
{
	struct pvctx *x = calloc(1, sizeof(*x));

	if (x != NULL) {
		x->p = p;
		x->gen = p->gen;
		x->version = version;
		x->state = p->pv_state;
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

void ppreserve_set_note(struct ppart *p, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(p->pv_note);
	p->pv_note = s;
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
	p->pv_state = PV_NONE;
	p->preserve_once = 0;
	pv_drop_buf(p);
	ppreserve_set_note(p, "failback divergence at offset %" PRId64 ": preserving "
	    "into topic %s partition %" PRId32 " failed after %" PRId64
	    " records: %s", p->pv_from, p->pv_topic, p->index, p->pv_records,
	    why);
	pl_part_fail_final(p, "failback divergence at offset %" PRId64 ": "
	    "preserving offsets %" PRId64 "..%" PRId64 " into topic %s failed "
	    "after %" PRId64 " records (aside offsets %" PRId64 "..%" PRId64
	    "): %s; nothing was written to the partition itself: --recover "
	    "--resolution preserve copies them again (into the aside topic "
	    "after what it holds), --resolution skip-over keeps them in place "
	    "only", p->pv_from, p->pv_from, p->pv_end - 1, p->pv_topic,
	    p->pv_records, p->pv_aside_lo, p->pv_aside_hi, why);
}

/* A Fetch or Produce answered an error a retry may cure. */
static void retry_later(struct ppart *p, int16_t error)
{
	p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	if (error == KERR_NOT_LEADER_OR_FOLLOWER ||
	    error == KERR_LEADER_NOT_AVAILABLE ||
	    error == KERR_UNKNOWN_TOPIC_OR_PARTITION || error == 74 ||
	    error == 75)
		pcluster_want_metadata(p->pm->pl->dst);
}

/* The counts of one batch after fb_last the copy or scan passed. */
static void count(struct ppart *p, const struct batch *b, int verdict)
{
	if (verdict == PTXN_MARKER) {
		p->pv_markers++;
		p->pv_skipped++;
	} else if (verdict == PTXN_ABORTED) {
		p->pv_aborted += b->record_count;
		p->pv_skipped++;
	} else {
		if (p->pv_first < 0)
			p->pv_first = b->base_offset;
		p->pv_last = batch_last_offset(b);
		p->pv_records += b->record_count;
		p->pv_batches++;
	}
}

static void counts_clear(struct ppart *p)
{
	p->pv_records = p->pv_batches = p->pv_skipped = 0;
	p->pv_markers = p->pv_aborted = 0;
	p->pv_first = p->pv_last = -1;
}

/*
 * The destination's end is not the one the scan started from: start over
 * from SYNC (read the end, the mark, the scan), the operator's decision
 * kept.
 */
static void moved(struct ppart *p, int64_t hw)
{
	char name[300];

	log_info("%s: failback: the destination partition's end moved from %"
	    PRId64 " to %" PRId64 " while it was read after offset %" PRId64
	    " (a transaction ended there, or something writes to it): reading "
	    "it again", pname(p, name, sizeof(name)), p->pv_end, hw, p->fb_last);
	ppreserve_reset(p);
	p->step = PS_SYNC;
	p->sync_lo = p->sync_hi = -1;
	p->fb_state = 0;
	p->not_before = clock_mono_ms() + PV_WAIT_MS;
}

/* ---- CreateTopics ---------------------------------------------------------- */

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
	(void)errstr;
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
	if (e == 0 || e == KERR_TOPIC_ALREADY_EXISTS) {
		p->pv_state = PV_LEADER;
		pcluster_want_metadata(p->pm->pl->dst);
	} else {
		pv_fail(p, "CreateTopics %s: %s", p->pv_topic, body->err ?
		    "malformed answer" : kerr_name(e));
	}
out:
	ctx_end(x);
}

/* ---- the Fetch of the scan and of the copy -------------------------------- */

struct pv_fetch {
	struct pw_fetch_req req;
	struct pw_tp tp;
};

static int fetch_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct pv_fetch *f = msg;

	return pw_fetch_encode(w, version, &f->req, &f->tp, 1);
}

/* The scan's answer: every batch of it counted. */
static void scan_part(struct ppart *p, const struct pw_fetch_part *fp)
{
	struct batch_iter it;
	struct batch b;
	struct ptxn tx;
	char err[256] = "";
	int rc, verdict = PTXN_KEEP, advanced = 0;

	if (fp->error == KERR_OFFSET_OUT_OF_RANGE && p->pv_at == p->fb_last) {
		p->pv_bad = 2;   /* fb_last itself is gone */
		p->pv_state = PV_SCANNED;
		return;
	}
	if (fp->error != 0) {
		retry_later(p, fp->error);
		return;
	}
	if (fp->high_watermark != p->pv_end) {
		moved(p, fp->high_watermark);
		return;
	}
	if (ptxn_init(&tx, fp->aborted, fp->naborted, err, sizeof(err)) != 0) {
		pl_part_fail(p, "failback: reading the destination after offset %"
		    PRId64 ": the aborted transactions of the Fetch at offset %"
		    PRId64 ": %s", p->fb_last, p->pv_at, err);
		p->pv_state = PV_NONE;
		return;
	}
	batch_iter_init(&it, fp->records.p, fp->records.len > 0 ?
	    (size_t)fp->records.len : 0);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		if ((verdict = ptxn_batch(&tx, &b, err, sizeof(err))) == PTXN_ERROR)
			break;
		if (batch_last_offset(&b) < p->pv_at)
			continue;
		if (b.base_offset >= p->pv_end)
			break;
		advanced = 1;
		if (p->pv_at == p->fb_last && b.base_offset <= p->fb_last) {
			/* The batch mirrored last: it ends at fb_last, of
			 * the epoch mirrored, or the log was rewritten. */
			if (batch_last_offset(&b) != p->fb_last ||
			    b.leader_epoch != p->fb_epoch) {
				p->pv_bad = 1;
				p->pv_bad_base = b.base_offset;
				p->pv_bad_last = batch_last_offset(&b);
				p->pv_bad_epoch = b.leader_epoch;
				p->pv_state = PV_SCANNED;
				ptxn_fini(&tx);
				return;
			}
			p->pv_at = p->fb_last + 1;
			continue;
		}
		/* (A batch after fb_last first: fb_last's was removed by
		 * compaction; nothing to compare it with.) */
		count(p, &b, verdict);
		p->pv_at = batch_next_offset(&b);
	}
	ptxn_fini(&tx);
	if (rc == BATCH_ERROR || verdict == PTXN_ERROR) {
		pl_part_fail(p, "failback: reading the destination after offset %"
		    PRId64 ": batch at offset %" PRId64 ": %s", p->fb_last,
		    p->pv_at, err);
		p->pv_state = PV_NONE;
		return;
	}
	if (p->pv_at >= p->pv_end) {
		p->pv_open = -1;
		p->pv_state = PV_SCANNED;
	} else if (!advanced && fp->last_stable_offset >= 0 &&
	    fp->last_stable_offset <= p->pv_at) {
		/* read_committed stops at the last stable offset: a
		 * transaction is open there. */
		p->pv_open = fp->last_stable_offset;
		p->pv_state = PV_SCANNED;
	} else if (!advanced) {
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	}
}

/* The copy's answer: the first committed batch at or after pv_at is
 * taken for its Produce, markers and aborted batches before it counted. */
static void copy_part(struct ppart *p, const struct pw_fetch_part *fp)
{
	struct batch_iter it;
	struct batch b, nb;
	struct batch_rewrite rw;
	struct batch_reencoded re;
	struct ptxn tx;
	char err[256] = "";
	int rc, verdict = PTXN_KEEP;

	if (fp->error != 0) {
		retry_later(p, fp->error);
		return;
	}
	if (fp->high_watermark != p->pv_end) {
		pv_fail(p, "the destination partition's end moved from %" PRId64
		    " to %" PRId64 " while its records were copied: something "
		    "writes to it (a producer still using the old primary?)",
		    p->pv_end, fp->high_watermark);
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
		if ((verdict = ptxn_batch(&tx, &b, err, sizeof(err))) == PTXN_ERROR)
			break;
		if (batch_last_offset(&b) < p->pv_at)
			continue;
		if (b.base_offset >= p->pv_end)
			break;
		if (verdict != PTXN_KEEP) {
			count(p, &b, verdict);
			p->pv_at = batch_next_offset(&b);
			continue;
		}
		ptxn_fini(&tx);
		memset(&re, 0, sizeof(re));
		if (batch_has_holes(&b)) {
			/* The broker takes contiguous offsets only. */
			if (batch_reencode_contiguous(&b, 0, PV_REENCODE_MAX, &re,
			    err, sizeof(err)) != 0 || re.buf == NULL ||
			    batch_parse(re.buf, re.len, &nb, err, sizeof(err)) !=
			    BATCH_OK) {
				batch_reencoded_fini(&re);
				pv_fail(p, "batch at offset %" PRId64 " (with offset "
				    "holes): %s", b.base_offset, re.buf == NULL &&
				    err[0] == '\0' ? "no records" : err);
				return;
			}
		} else {
			nb = b;
		}
		pv_drop_buf(p);
		if ((p->pv_buf = malloc(nb.len)) == NULL) {
			batch_reencoded_fini(&re);
			pv_fail(p, "out of memory");
			return;
		}
		pl_dread_set(p->pm->pl, &p->pv_held, nb.len);
		memset(&rw, 0, sizeof(rw));
		rw.flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN;
		rw.base_offset = 0;
		rw.producer_id = p->pv_pid;
		rw.producer_epoch = p->pv_pid >= 0 ? p->pv_pepoch : -1;
		rw.base_sequence = p->pv_pid >= 0 ? p->pv_seq : -1;
		if (batch_rewrite_header(&nb, &rw, p->pv_buf, nb.len, err,
		    sizeof(err)) != 0) {
			batch_reencoded_fini(&re);
			pv_fail(p, "batch at offset %" PRId64 ": %s", b.base_offset,
			    err);
			return;
		}
		p->pv_len = nb.len;
		p->pv_count = nb.record_count;
		p->pv_at = b.base_offset;
		p->pv_next = batch_next_offset(&b);
		batch_reencoded_fini(&re);
		p->pv_state = PV_PRODUCE;
		return;
	}
	ptxn_fini(&tx);
	if (rc == BATCH_ERROR || verdict == PTXN_ERROR)
		pv_fail(p, "batch at offset %" PRId64 ": %s", p->pv_at, err);
	else if (p->pv_at >= p->pv_end)
		p->pv_state = PV_DONE;
	/* else: more to read (a partial answer): fetched again */
}

static void fetch_part(void *arg, const struct pw_fetch_part *fp)
{
	struct pvctx *x = arg;
	struct ppart *p = x->p;

	if (fp->partition != p->index || !kstr_eq(fp->topic, p->topic) ||
	    !live(x) || x->answered)
		return;
	x->answered = 1;
	if (p->pv_state == PV_SCAN)
		scan_part(p, fp);
	else
		copy_part(p, fp);
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
	} else if (live(x) && !x->answered) {
		/* The partition was not in the answer. */
		retry_later(p, KERR_NOT_LEADER_OR_FOLLOWER);
	}
	ctx_end(x);
}

static int fetch_send(struct ppart *p)
{
	struct pbroker *b = ppart_leader(p, 1);
	struct kconn *c = b != NULL ? pbroker_conn(b) : NULL;
	struct pv_fetch f;
	struct pvctx *x;
	size_t want = PV_FETCH_BYTES + PV_FRAMING + strlen(p->topic);
	char err[256], name[300];
	int v;

	v = c != NULL ? kconn_pick_version(c, KP_API_FETCH, PW_FETCH_MIN,
	    PW_FETCH_MAX) : -1;
	if (v < 4) /* read_committed needs v4 */
		return 0;
	if (!pl_dread_room(p->pm->pl, want))
		return 1; /* tried again when a read ends (pl_dread_done kicks) */
	if ((x = ctx_new(p, (int16_t)v)) == NULL)
		return 0;
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
		log_debug("%s: Fetch (failback): %s", pname(p, name, sizeof(name)),
		    err);
		pl_dread_done(p->pm->pl, &x->held);
		pl_part_unref(p);
		free(x);
		return 0;
	}
	p->step_inflight = 1;
	return 1;
}

/* ---- Produce aside ----------------------------------------------------------- */

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
	int64_t span = p->pv_count, base;

	if (!live(x) || pp->partition != p->index || x->answered)
		return;
	x->answered = 1;
	if (pp->error == 0 || pp->error == KERR_DUPLICATE_SEQUENCE_NUMBER) {
		/* A duplicate landed with the answer that was lost: right
		 * after the last one (one batch in flight, numbered). */
		base = pp->error == 0 ? pp->base_offset : p->pv_aside_hi >= 0 ?
		    p->pv_aside_hi + 1 : -1;
		if (p->pv_aside_lo < 0)
			p->pv_aside_lo = base;
		if (base >= 0)
			p->pv_aside_hi = base + span - 1;
		p->pv_seq = (int32_t)(((int64_t)p->pv_seq + span) & INT32_MAX);
		p->pv_records += p->pv_count;
		p->pv_batches++;
		if (p->pv_first < 0)
			p->pv_first = p->pv_at;
		p->pv_last = p->pv_next - 1;
		pv_drop_buf(p);
		p->pv_at = p->pv_next;
		p->pv_state = p->pv_at >= p->pv_end ? PV_DONE : PV_FETCH;
	} else if (pp->error == KERR_NOT_LEADER_OR_FOLLOWER ||
	    pp->error == KERR_LEADER_NOT_AVAILABLE ||
	    pp->error == KERR_UNKNOWN_TOPIC_OR_PARTITION) {
		/* The same batch, once the leader is known. */
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
		pcluster_want_metadata(p->pm->pl->dst);
	} else if (kerr_retriable(pp->error)) {
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	} else {
		pv_fail(p, "Produce to %s partition %" PRId32 ": %s%s%.*s",
		    p->pv_topic, p->index, kerr_name(pp->error),
		    pp->error_message.len > 0 ? ": " : "",
		    pp->error_message.len > 0 ? (int)pp->error_message.len : 0,
		    pp->error_message.len > 0 ? pp->error_message.p : "");
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
		/* Unknown fate: sent again as it was (the sequence makes a
		 * second copy a duplicate the broker drops). */
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
	ctx_end(x);
}

static int produce_send(struct ppart *p)
{
	struct pcluster *dst = p->pm->pl->dst;
	const struct kcluster_topic *t = pcluster_topic(dst, p->pv_topic);
	struct kconn *c = NULL;
	struct pv_produce r;
	struct pvctx *x;
	char err[256];
	int v;

	if (t == NULL || p->index >= t->npart || t->leader[p->index] < 0) {
		pcluster_want_metadata(dst);
		return 0;
	}
	for (size_t i = 0; i < dst->nbrokers; i++)
		if (dst->brokers[i]->id == t->leader[p->index])
			c = pbroker_conn(dst->brokers[i]);
	v = c != NULL ? kconn_pick_version(c, KP_API_PRODUCE, PW_PRODUCE_MIN,
	    PW_PRODUCE_MAX) : -1;
	if (v < 0 || (x = ctx_new(p, (int16_t)v)) == NULL)
		return 0;
	memset(&r, 0, sizeof(r));
	r.tp.topic = p->pv_topic;
	r.tp.partition = p->index;
	r.tp.records = p->pv_buf;
	r.tp.records_len = p->pv_len;
	if (kconn_send(c, KP_API_PRODUCE, (int16_t)v, produce_encode, &r, 0,
	    30000, produce_done, x, err, sizeof(err)) != 0) {
		pl_part_unref(p);
		free(x);
		return 0;
	}
	p->step_inflight = 1;
	return 1;
}

/* ---- the steps ------------------------------------------------------------- */

void ppreserve_reset(struct ppart *p)
{
	if (p->pv_wait_since != 0) {
		/* "waiting for ...": no longer true; an outcome stays. */
		free(p->pv_note);
		p->pv_note = NULL;
	}
	p->pv_state = PV_NONE;
	pv_drop_buf(p);
	p->pv_wait_since = p->pv_wait_log = 0;
}

void ppreserve_scan(struct ppart *p, int64_t end)
{
	ppreserve_reset(p);
	free(p->pv_topic);
	p->pv_topic = NULL;
	free(p->pv_note);
	p->pv_note = NULL;
	counts_clear(p);
	p->pv_from = p->fb_last + 1;
	p->pv_at = p->fb_last;
	p->pv_end = end;
	p->pv_open = -1;
	p->pv_bad = 0;
	p->pv_state = end > p->fb_last ? PV_SCAN : PV_SCANNED;
}

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
	counts_clear(p);
	p->pv_aside_lo = p->pv_aside_hi = -1;
	p->pv_pid = -1;
	p->pv_pepoch = -1;
	p->pv_seq = 0;
	pv_drop_buf(p);
	p->pv_state = PV_CREATE;
	return 0;
}

void ppreserve_wait(struct ppart *p, const char *what)
{
	int64_t now = clock_mono_ms();
	char name[300];

	if (p->pv_wait_since == 0)
		p->pv_wait_since = now;
	ppreserve_set_note(p, "failback: waiting for the transaction open on the "
	    "destination partition (the old primary) at offset %" PRId64 " to "
	    "end (its producer commits or aborts it, or its coordinator aborts "
	    "it after the producer's transaction.timeout.ms) before %s; "
	    "waiting for %" PRId64 " s", p->pv_open, what,
	    (now - p->pv_wait_since) / 1000);
	if (p->pv_wait_log == 0 || now - p->pv_wait_log >= PV_WAIT_LOG_MS) {
		p->pv_wait_log = now;
		log_warnx("%s: %s", pname(p, name, sizeof(name)), p->pv_note);
	}
	/* Read again from the last stable offset, a moment later: the end
	 * moves when the transaction ends (moved()). */
	p->pv_state = PV_SCAN;
	p->pv_at = p->pv_open;
	p->not_before = now + PV_WAIT_MS;
}

int ppreserve_step(struct ppart *p)
{
	struct pcluster *dst = p->pm->pl->dst;
	struct pvctx *x;
	struct kconn *c = NULL;
	char err[256], name[300];
	int v;

	switch (p->pv_state) {
	case PV_NONE:
	case PV_SCANNED:
		return 0;
	case PV_SCAN:
	case PV_FETCH:
		if (fetch_send(p))
			return 1;
		break;
	case PV_CREATE:
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
	case PV_LEADER: {
		const struct kcluster_topic *t = pcluster_topic(dst, p->pv_topic);

		if (t != NULL && t->error == 0 && p->index < t->npart &&
		    t->leader[p->index] >= 0)
			p->pv_state = PV_PID;
		else
			pcluster_want_metadata(dst);
		break;
	}
	case PV_PID:
		/* An identity of its own, numbered from 0 for the aside
		 * partition (none from a broker without them: a Produce
		 * sent again may then leave a duplicate). */
		if (dst->pid_unsupported || pcluster_take_pid(dst, &p->pv_pid,
		    &p->pv_pepoch) == 0) {
			p->pv_seq = 0;
			p->pv_state = PV_FETCH;
			pl_kick(p->pm->pl);
			return 1;
		}
		pcluster_tick(dst); /* asks for one (pid_demand counts us) */
		break;
	case PV_PRODUCE:
		if (produce_send(p))
			return 1;
		break;
	case PV_DONE:
		log_warnx("%s: failback divergence at offset %" PRId64 ": preserved "
		    "into topic %s partition %" PRId32 ": %" PRId64 " committed "
		    "records of offsets %" PRId64 "..%" PRId64 " (%" PRId64
		    " batches), now at offsets %" PRId64 "..%" PRId64 " of %s; %"
		    PRId64 " transaction markers and %" PRId64 " records of aborted "
		    "transactions not copied", pname(p, name, sizeof(name)),
		    p->pv_from, p->pv_topic, p->index, p->pv_records, p->pv_first,
		    p->pv_last, p->pv_batches, p->pv_aside_lo, p->pv_aside_hi,
		    p->pv_topic, p->pv_markers, p->pv_aborted);
		p->preserve_once = 0;
		pv_drop_buf(p);
		return 0;
	default:
		break;
	}
	if (p->not_before < clock_mono_ms() + 200)
		p->not_before = clock_mono_ms() + 200;
	return 1;
}

int ppreserve_note(const struct ppart *p, char *buf, size_t len)
{
	if (len == 0)
		return 0;
	buf[0] = '\0';
	if (p->step == PS_PROVE && p->pv_state >= PV_CREATE &&
	    p->pv_state < PV_DONE) {
		snprintf(buf, len, "failback divergence at offset %" PRId64 ": "
		    "preserving offsets %" PRId64 "..%" PRId64 " into topic %s "
		    "partition %" PRId32 ": %" PRId64 " committed records copied "
		    "so far", p->pv_from, p->pv_from, p->pv_end - 1, p->pv_topic,
		    p->index, p->pv_records);
		return 1;
	}
	if (p->pv_note == NULL)
		return 0;
	snprintf(buf, len, "%s", p->pv_note);
	return 1;
}
