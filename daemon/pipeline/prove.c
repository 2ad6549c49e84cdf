/*
 * pipeline/prove.c: provenance before resume.  Whenever a partition (re)starts
 * (start-up, a FAILED retry, resume, a topic added again or onto an
 * existing destination topic) the destination end D read by the SYNC step
 * is only used once mirrord can show it wrote what ends there:
 *
 *   - D equals the end this process last wrote or proved (nothing moved);
 *   - D is 0 and mirrord's record says it wrote nothing there;
 *   - otherwise the batches at the end are read back (a Fetch of the
 *     destination, read_uncommitted, walking back batch by batch): a batch
 *     mirrord wrote carries one of the partition's producer identities
 *     (recorded in the metadata log, part-producer records) and the base
 *     sequence that identity gives its offset (pipeline/copy.c's prepare_head),
 *     or an id of the earlier single-identity versions with sequence =
 *     offset (storage.data_dir/producer-id).
 *
 * Batches after the last proven one are a foreign write at offsets E..D-1.
 * With mirror.foreign.writes=fail the partition goes FAILED naming them and
 * is never retried automatically; with skip-over the range is recorded as a
 * translation anchor (source offset of E -> D) and copying goes on at D, so
 * every source record after E is copied.  A destination end below what
 * mirrord is known to have written is a truncated (or recreated) topic: also
 * a FAILED that is not retried.
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
#include "wire.h"
#include "xlate.h"

#define PROVE_MAX_STEPS 256       /* Fetches walking back over foreign batches */
#define PROVE_PART_BYTES 65536    /* the first batch comes whole anyway */
#define PROVE_FRAMING 256         /* an answer's bytes besides its records */

struct prove_ctx {
	struct ppart *p;
	uint32_t gen;
	int64_t offset;
	int16_t version;
	size_t held;      /* its answer's bytes, in pl->dreads (pl_dread_*) */
};

struct prove_fetch {
	struct pw_fetch_req req;
	struct pw_tp tp;
};

static const char *pname(const struct ppart *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s-%" PRId32, p->pm->name, p->topic, p->index);
	return buf;
}

/* The lowest destination end mirrord's own record explains: what this
 * process acknowledged, the start of the last epoch and the destination of
 * the last anchor it recorded, but no further than the start of the last
 * batch whose anchors were recorded before its Produce (epoch entries and
 * anchors are recorded before their batch is sent, and that Produce may
 * never have landed: pipeline/copy.c's persist_anchors). */
static int64_t known_written(const struct ppart *p)
{
	const struct mpart *mp = p->mp;
	int64_t k = 0, a;

	if (p->dst_next > k)
		k = p->dst_next;
	/* Epoch entries, like anchors, are recorded before the batch they name
	 * is sent: they prove the offsets below their start, not the start. */
	if (mp->nepochs > 0 && mp->epochs[mp->nepochs - 1].start_offset > k)
		k = mp->epochs[mp->nepochs - 1].start_offset;
	if (mpart_nanchors(mp) > 0) {
		a = mpart_anchor(mp, mpart_nanchors(mp) - 1).dst;
		if (mp->sending_dst >= 0 && mp->sending_dst < a)
			a = mp->sending_dst;
		if (a > k)
			k = a;
	}
	return k;
}

static int wrote_something(const struct ppart *p)
{
	return p->dst_next > 0 || p->mp->nepochs > 0 || mpart_nanchors(p->mp) > 0;
}

/* 1 if pid is a producer id mirrord wrote p's destination partition with
 * (its recorded identities, or the one id of an earlier version). */
static int pid_known(const struct ppart *p, int64_t pid)
{
	const struct mpart *mp = p->mp;

	if (pid < 0)
		return 0;
	if (p->pid == pid)
		return 1;
	for (size_t i = 0; i < mp->nproducers; i++)
		if (mp->producers[i].pid == pid)
			return 1;
	return pcluster_pid_legacy(p->pm->pl->dst, pid);
}

/*
 * A batch of mirrord's: an identity (producer id and epoch) recorded for
 * the partition, numbered from where that identity began (sequence 0 at
 * its seq_base); or an id of an earlier version's, numbered by offset.
 */
static int ours(const struct ppart *p, const struct batch *b)
{
	const struct mpart *mp = p->mp;

	if (batch_is_control(b) || b->producer_id < 0)
		return 0;
	for (size_t i = mp->nproducers; i-- > 0;) {
		const struct mproducer *c = &mp->producers[i];

		if (c->pid == b->producer_id && c->epoch == b->producer_epoch)
			return b->base_offset >= c->seq_base && b->base_sequence ==
			    (int32_t)((b->base_offset - c->seq_base) & INT32_MAX);
	}
	return pcluster_pid_legacy(p->pm->pl->dst, b->producer_id) &&
	    b->base_sequence == (int32_t)(b->base_offset & INT32_MAX);
}

/* The source offset destination offset e stands for. */
static int dst_to_src(const struct ppart *p, int64_t e, int64_t *s)
{
	const struct mpart *mp = p->mp;

	*s = e;
	if (mpart_nanchors(mp) == 0)
		return 0;
	return xlate_dst_to_src(mp->map, e, s) == XLATE_UNMAPPED ? -1 : 0;
}

/*
 * A skip-over anchor (src -> dst: the destination's offsets below dst stay
 * as they are, the source's offset src goes to dst), recorded
 * asynchronously (group commit, HACKING.md "metadata log"): the partition
 * holds its step (step_inflight) and a ref until the anchor is durable,
 * then goes on at dst (pcopy_sync_done()) if it is still where it was (gen,
 * own_gen); a refused or failed write fails it with fail + the reason.
 */
struct pv_anchor {
	struct ppart *p;
	uint32_t gen, og;
	int64_t dst;
	int hole;       /* counts an offset hole */
	char *fail;     /* pl_part_fail()'s message before ": <reason>" */
	char *note;     /* the warning logged once it is durable */
	char *pnote;    /* the partition's note then (a failback's), or NULL */
};

static void pv_anchor_free(struct pv_anchor *a)
{
	free(a->fail);
	free(a->note);
	free(a->pnote);
	free(a);
}

static void skip_recorded(struct ppart *p, const struct pv_anchor *a)
{
	char name[300];

	log_warnx("%s: %s", pname(p, name, sizeof(name)), a->note);
	if (a->pnote != NULL)
		ppreserve_set_note(p, "%s", a->pnote);
	if (a->hole)
		p->live.offset_holes++;
	p->proven_end = a->dst;
	pcopy_sync_done(p, a->dst);
}

static void skip_done(void *arg, int code, const char *msg)
{
	struct pv_anchor *a = arg;
	struct ppart *p = a->p;

	/* The step is this write's until now: nothing else cleared it. */
	p->step_inflight = 0;
	if (!p->dead && p->mp != NULL && p->gen == a->gen &&
	    p->own_gen == a->og) {
		if (code != 0)
			pl_part_fail(p, "%s: %s", a->fail, msg);
		else
			skip_recorded(p, a);
		pl_kick(p->pm->pl);
	}
	pl_part_unref(p);
	pv_anchor_free(a);
}

static void record_skip(struct ppart *p, int64_t src, int64_t dst, int hole,
    const char *fail, const char *note, const char *pnote)
{
	struct pv_anchor *a = calloc(1, sizeof(*a));
	char msg[512];
	int started = 0, r;

	if (a == NULL || (a->fail = strdup(fail)) == NULL ||
	    (a->note = strdup(note)) == NULL || (pnote != NULL &&
	    (a->pnote = strdup(pnote)) == NULL)) {
		if (a != NULL)
			pv_anchor_free(a);
		pl_part_fail(p, "%s: out of memory", fail);
		return;
	}
	a->p = p;
	a->gen = p->gen;
	/* A follower's write may apply a part-owner record that takes p
	 * away first: then it is not started. */
	a->og = p->own_gen;
	a->dst = dst;
	a->hole = hole;
	p->refs++;
	p->step_inflight = 1;
	r = mpart_add_anchor_async(p->pm->pl->st, p->mp, src, dst, skip_done,
	    a, &started, msg, sizeof(msg));
	if (started)
		return;
	/* Written synchronously (no event base) or nothing to write: p
	 * stays in the graveyard if it was buried meanwhile. */
	p->step_inflight = 0;
	p->refs--;
	if (p->own_gen == a->og && !p->dead) {
		if (r != 0)
			pl_part_fail(p, "%s: %s", fail, msg);
		else
			skip_recorded(p, a);
	}
	pv_anchor_free(a);
}

/* The walk is over: mirrord's batches end at e (-1: none left below the
 * foreign ones, the destination log starts at lo). */
static void concluded(struct ppart *p, int64_t e, int64_t lo)
{
	int64_t d = p->prove_end, from = e >= 0 ? e : lo, s, hi;
	char msg[512], what[600];
	const char *kind = "foreign write";
	int n, once;

	p->step_inflight = 0;
	if (p->prove_strict && e != d) {
		/* After a halt the end moved past every batch this instance
		 * sent (pipeline/copy.c's sync_end_deposed()): only mirrord's own
		 * batch may end there, never a skip-over. */
		p->prove_strict = 0;
		if (e >= 0)
			snprintf(what, sizeof(what), "mirrord's batches end at "
			    "offset %" PRId64, e);
		else
			snprintf(what, sizeof(what), "no batch of mirrord's below it");
		pl_part_fail(p, "destination end offset %" PRId64 " after "
		    "uncertain Produce requests is past every batch sent from %"
		    PRId64 " (not written) to %" PRId64 " (all written), and the "
		    "batch ending there is not mirrord's (%s): another producer "
		    "writes to the destination partition", d, p->sync_lo,
		    p->sync_hi, what);
		return;
	}
	if (e == d) {
		p->skip_over_once = 0;
		p->proven_end = d;
		pcopy_sync_done(p, d);
		return;
	}
	if (e < 0 && from >= d) {
		/* Nothing left to read (retention took it all). */
		if (wrote_something(p)) {
			p->proven_end = d;
			pcopy_sync_done(p, d);
			return;
		}
		once = p->skip_over_once;
		p->skip_over_once = 0;
		if (!once && (p->pm->conf == NULL ||
		    p->pm->conf->foreign_writes != MIRRORCONF_FOREIGN_SKIP_OVER)) {
			pl_part_fail_final(p, "unproven destination: the destination "
			    "partition ends at offset %" PRId64 " and starts there (its "
			    "records are deleted), and mirrord has no record of writing "
			    "them (metadata lost, or a topic that was not mirrord's); "
			    "mirror.foreign.writes=fail keeps the partition FAILED until "
			    "an operator decides (kafka-mirrors --recover --resolution "
			    "skip-over)", d);
			return;
		}
		/* Skip over all of it: source offset 0 goes to d. */
		snprintf(msg, sizeof(msg), "unproven destination ending at %"
		    PRId64 ": cannot record the anchor 0 -> %" PRId64, d, d);
		snprintf(what, sizeof(what), "unproven destination: offsets "
		    "below %" PRId64 " are deleted and not known to be mirrord's; "
		    "skip-over: source offset 0 is copied to destination offset %"
		    PRId64, d, d);
		record_skip(p, 0, d, 0, msg, what, NULL);
		return;
	}
	hi = p->prove_hi >= 0 ? p->prove_hi : d - 1;
	if (p->prove_pid >= 0 && p->prove_seq == (int32_t)(p->prove_hib & INT32_MAX))
		kind = "unproven destination"; /* numbered as mirrord numbers */
	n = snprintf(what, sizeof(what), "destination offsets %" PRId64 "..%" PRId64
	    " (%" PRId64 " records) were not written by mirrord (last foreign batch: "
	    "producer id %" PRId64 ", sequence %" PRId32 ")%s", from, hi, hi - from + 1,
	    p->prove_pid, p->prove_seq, kind[0] == 'u' ? ", a producer id mirrord "
	    "does not know although the batches are numbered the way mirrord "
	    "numbers them (storage.data_dir lost or replaced?)" : "");
	if (hi < d - 1 && n > 0 && (size_t)n < sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, "; mirrord's batches "
		    "at %" PRId64 "..%" PRId64 " landed after them, not where it wrote "
		    "them", hi + 1, d - 1);
	if (e < 0 && wrote_something(p) && n > 0 && (size_t)n < sizeof(what))
		snprintf(what + n, sizeof(what) - (size_t)n, "; no batch of "
		    "mirrord's is left below them (metadata lost?)");
	once = p->skip_over_once;
	p->skip_over_once = 0;
	if (!once && (p->pm->conf == NULL ||
	    p->pm->conf->foreign_writes != MIRRORCONF_FOREIGN_SKIP_OVER)) {
		pl_part_fail_final(p, "%s: %s; mirror.foreign.writes=fail keeps the "
		    "partition FAILED until an operator decides (kafka-mirrors "
		    "--recover --resolution skip-over)", kind, what);
		return;
	}
	if (dst_to_src(p, from, &s) != 0) {
		pl_part_fail_final(p, "%s: %s; skip-over needs the source "
		    "offset of destination offset %" PRId64 ", which the translation "
		    "map does not give", kind, what, from);
		return;
	}
	char fail[800], note[800];

	snprintf(fail, sizeof(fail), "%s: %s; cannot record the anchor %" PRId64
	    " -> %" PRId64 " to skip over it", kind, what, s, d);
	snprintf(note, sizeof(note), "%s: %s; %s: source offset %" PRId64 " is "
	    "copied to destination offset %" PRId64, kind, what, once ?
	    "the operator's skip-over" : "mirror.foreign.writes=skip-over", s, d);
	record_skip(p, s, d, 1, fail, note, NULL);
}

/* The decision: the old primary's offsets at..d-1 stay where they are;
 * the source's records from its offset from go after them.  pnote: the
 * partition's note once the anchor is durable. */
static void failback_skip(struct ppart *p, int64_t at, int64_t from, int64_t d,
    const char *how, const char *pnote)
{
	char fail[300], note[900];

	snprintf(fail, sizeof(fail), "failback divergence at offset %" PRId64
	    ": cannot record the anchor %" PRId64 " -> %" PRId64, at, from, d);
	snprintf(note, sizeof(note), "failback divergence at offset %" PRId64
	    ": the destination's offsets %" PRId64 "..%" PRId64 " (never "
	    "mirrored) are kept; %s: source offset %" PRId64 " is copied to "
	    "destination offset %" PRId64, at, at, d - 1, how, from, d);
	record_skip(p, from, d, 1, fail, note, pnote);
}

/*
 * A failback onto the cluster this partition was mirrored from (the old
 * primary): the source's mark says its mirror stopped copying the
 * destination's partition at offset last (epoch epoch), and that the
 * source's records after it begin at source offset next (the same offset
 * when ident).  The destination ends at prove_end.  What lies between is
 * read first (pipeline/preserve.c's scan); pprove_failback_scanned() decides.
 */
void pprove_failback(struct ppart *p, int found, const char *src,
    const char *mirror, int64_t last, int32_t epoch, int ident, int64_t next)
{
	const char *dst = p->pm->pl->dst->cluster_id;
	int64_t d = p->prove_end;
	char name[300];

	p->step_inflight = 0;
	p->fb_state = 2;
	pl_kick(p->pm->pl);
	if (!found || dst == NULL || src == NULL || strcmp(src, dst) != 0)
		return; /* not a failback: the usual walk decides */
	if (ident)
		next = last + 1;
	log_info("%s: failback: the source's topic was mirrored from this "
	    "destination by mirror %s, which stopped copying partition %" PRId32
	    " at offset %" PRId64 " (epoch %" PRId32 "; the source's own records "
	    "begin at its offset %" PRId64 "); the destination ends at %" PRId64,
	    pname(p, name, sizeof(name)), mirror, p->index, last, epoch, next, d);
	if (next < 0) {
		/* A plain retry will do once the mark says it. */
		pl_part_fail(p, "failback mark without a source offset: the "
		    "destination partition (the old primary) was mirrored to the "
		    "source by mirror %s up to offset %" PRId64 " (epoch %" PRId32
		    "), not offset for offset (transaction markers, aborted records "
		    "or holes were left out), and that mirror's mark on the source "
		    "does not say at which source offset the records after it begin "
		    "(an earlier mirrord wrote it); nothing was written: once the "
		    "mirrord of mirror %s runs this version and has written its "
		    "marks again, a retry (kafka-mirrors --recover) goes on", mirror,
		    last, epoch, mirror);
		return;
	}
	if (d < last + 1) {
		pl_part_fail_final(p, "failback: the old primary lost mirrored "
		    "records: divergence at offset %" PRId64 ": "
		    "the destination partition (the old primary) ends there, but "
		    "mirror %s copied it up to offset %" PRId64 " (epoch %" PRId32
		    "): the old primary lost offsets %" PRId64 "..%" PRId64 " after "
		    "the failover (truncated, or an unclean leader election); the "
		    "source still holds them; nothing was written, and no "
		    "resolution applies: to mirror the topic back, realign it "
		    "(remove it from the mirror, delete it on the old primary after "
		    "saving what you need of it, add it again; see FAILBACK in "
		    "kafka-mirrors(1))", d, mirror, last, epoch, d, last);
		return;
	}
	free(p->fb_mirror);
	p->fb_mirror = strdup(mirror);
	p->fb_last = last;
	p->fb_epoch = epoch;
	p->fb_next = next;
	ppreserve_scan(p, d);
}

/* The counts of the scan, for the reason of a divergence. */
static void scanned_what(const struct ppart *p, char *buf, size_t len)
{
	int64_t n = p->pv_end - p->fb_last - 1;

	if (p->pv_open < 0 && p->pv_records == n) {
		snprintf(buf, len, "%" PRId64 " offsets", n);
		return;
	}
	snprintf(buf, len, "%" PRId64 " offsets: %" PRId64 " committed records "
	    "at %" PRId64 "..%" PRId64 ", %" PRId64 " transaction markers and %"
	    PRId64 " records of aborted transactions%s", n, p->pv_records,
	    p->pv_first, p->pv_last, p->pv_markers, p->pv_aborted,
	    p->pv_open >= 0 ? " before a transaction still open at offset" : "");
	if (p->pv_open >= 0) {
		size_t k = strlen(buf);

		if (k < len)
			snprintf(buf + k, len - k, " %" PRId64 " (not read yet)",
			    p->pv_open);
	}
}

void pprove_failback_scanned(struct ppart *p)
{
	int64_t d = p->pv_end, at = p->fb_last + 1, from = p->fb_next;
	const char *mirror = p->fb_mirror != NULL ? p->fb_mirror : "?";
	char what[400], name[300], note[1000], wait[200];
	int64_t n = p->pv_records;
	int skip;

	p->pv_state = PV_NONE;
	if (p->pv_bad == 2) {
		pl_part_fail_final(p, "failback: the old primary no longer holds "
		    "offset %" PRId64 ", the last offset mirror %s copied (epoch %"
		    PRId32 "): its log starts after it (retention or DeleteRecords), "
		    "so what follows cannot be compared with what was mirrored; "
		    "nothing was written, and no resolution applies: to mirror the "
		    "topic back, realign it (remove it from the mirror, delete it on "
		    "the old primary after saving what you need of it, add it "
		    "again; see FAILBACK in kafka-mirrors(1))", p->fb_last, mirror,
		    p->fb_epoch);
		return;
	}
	if (p->pv_bad == 1) {
		pl_part_fail_final(p, "failback: the old primary's log was "
		    "rewritten: divergence at offset %" PRId64 " or before: mirror %s "
		    "copied the destination partition (the old primary) up to offset %"
		    PRId64 " of leader epoch %" PRId32 ", but its batch %" PRId64
		    "..%" PRId64 " is of leader epoch %" PRId32 ": its log was "
		    "rewritten after the failover (unclean leader election?), so "
		    "where it diverged is not known; nothing was written, and no "
		    "resolution applies: to mirror the topic back, realign it "
		    "(remove it from the mirror, delete it on the old primary after "
		    "saving what you need of it, add it again; see FAILBACK in "
		    "kafka-mirrors(1))", p->fb_last, mirror, p->fb_last, p->fb_epoch,
		    p->pv_bad_base, p->pv_bad_last, p->pv_bad_epoch);
		return;
	}
	if (p->pv_records == 0 && p->pv_open < 0) {
		/* Nothing a read_committed consumer reads after the stop
		 * point: no divergence. */
		p->preserve_once = p->skip_over_once = 0;
		if (d == at) {
			log_info("%s: failback: the destination ends at offset %"
			    PRId64 ", after the record mirrored last (epoch %" PRId32
			    "): no divergence; copying the source from its offset %"
			    PRId64, pname(p, name, sizeof(name)), d, p->fb_epoch, from);
		}
		if (from == d) {
			p->proven_end = d;
			pcopy_sync_done(p, d);
			return;
		}
		snprintf(what, sizeof(what), "failback: no divergence at offset %"
		    PRId64 ": the destination's offsets %" PRId64 "..%" PRId64
		    " hold %" PRId64 " transaction markers and %" PRId64 " records "
		    "of aborted transactions (what mirror %s left out of its copy), "
		    "no committed record", at, at, d - 1, p->pv_markers,
		    p->pv_aborted, mirror);
		snprintf(note, sizeof(note), "%s; source offset %" PRId64 " is "
		    "copied to destination offset %" PRId64, d > at ? what :
		    "failback: no divergence", from, d);
		snprintf(what, sizeof(what), "failback: cannot record the anchor %"
		    PRId64 " -> %" PRId64, from, d);
		record_skip(p, from, d, 0, what, note, note);
		return;
	}
	if (p->pv_records == 0) {
		snprintf(wait, sizeof(wait), "telling whether anything diverged "
		    "after offset %" PRId64, p->fb_last);
		ppreserve_wait(p, wait);
		return;
	}
	skip = p->skip_over_once || (p->pm->conf != NULL &&
	    p->pm->conf->foreign_writes == MIRRORCONF_FOREIGN_SKIP_OVER);
	if (p->preserve_once || skip) {
		if (p->pv_open >= 0) {
			snprintf(wait, sizeof(wait), "%s the divergence at offset %"
			    PRId64, p->preserve_once ? "preserving" :
			    "skipping over", at);
			ppreserve_wait(p, wait);
			return;
		}
		if (p->preserve_once) {
			/* Copied aside first (pipeline/preserve.c), then as
			 * skip-over (pprove_send()). */
			if (ppreserve_start(p, at, d, p->fb_epoch) != 0) {
				p->preserve_once = 0;
				pl_part_fail_final(p, "failback divergence at offset %"
				    PRId64 ": cannot preserve it: the topic name "
				    "%s.diverged-%" PRId32 " is too long; --recover "
				    "--resolution skip-over keeps the divergent records "
				    "in place only", at, p->topic, p->fb_epoch);
				return;
			}
			/* (ppreserve_start() cleared the counts: the copy's
			 * from now on.) */
			log_info("%s: failback divergence at offset %" PRId64
			    ": preserving the %" PRId64 " committed records of offsets %"
			    PRId64 "..%" PRId64 " into topic %s", pname(p, name,
			    sizeof(name)), at, n, at, d - 1, p->pv_topic);
			return;
		}
		p->skip_over_once = 0;
		scanned_what(p, what, sizeof(what));
		snprintf(note, sizeof(note), "failback divergence at offset %" PRId64
		    ": the old primary's offsets %" PRId64 "..%" PRId64 " (%s) are "
		    "kept in place (skip-over); the source's records from its "
		    "offset %" PRId64 " follow at offset %" PRId64, at, at, d - 1,
		    what, from, d);
		failback_skip(p, at, from, d, "skip-over", note);
		return;
	}
	scanned_what(p, what, sizeof(what));
	if (p->pv_open >= 0)
		snprintf(wait, sizeof(wait), "committed records (%" PRId64 " before "
		    "the open transaction, and its own if it commits; both "
		    "resolutions wait for it to end)", p->pv_records);
	else
		snprintf(wait, sizeof(wait), "%" PRId64 " committed records",
		    p->pv_records);
	pl_part_fail_final(p, "failback divergence at offset %" PRId64 ": "
	    "the destination partition (the old primary) holds offsets "
	    "%" PRId64 "..%" PRId64 " (%s) written after mirror %s stopped "
	    "copying it at offset %" PRId64 " (epoch %" PRId32 "), never "
	    "mirrored to the source; kept FAILED until an operator decides: "
	    "kafka-mirrors --recover --resolution skip-over keeps them where "
	    "they are and copies the source's records (from its offset %" PRId64
	    ") after them, --resolution preserve also copies the %s to topic "
	    "%s.diverged-%" PRId32 " first, --resolution realign deletes the "
	    "topic and copies the source again (see FAILBACK in "
	    "kafka-mirrors(1))",
	    at, at, d - 1, what, mirror, p->fb_last, p->fb_epoch, from, wait,
	    p->topic, p->fb_epoch);
}

static void prove_part(void *arg, const struct pw_fetch_part *fp)
{
	struct prove_ctx *x = arg;
	struct ppart *p = x->p;
	struct pcluster *dst = p->pm->pl->dst;
	struct batch_iter it;
	struct batch b;
	char err[256], who[300];
	int rc, found = 0;

	if (fp->partition != p->index || !kstr_eq(fp->topic, p->topic) ||
	    x->gen != p->gen || p->step != PS_PROVE || p->dead)
		return;
	p->step_inflight = 0;
	if (fp->error == KERR_OFFSET_OUT_OF_RANGE) {
		concluded(p, -1, p->prove_at + 1);
		return;
	}
	if (fp->error != 0) {
		p->not_before = clock_mono_ms() + pl_backoff_ms(p->pm->pl);
		p->live.retries++;
		if (fp->error == KERR_NOT_LEADER_OR_FOLLOWER ||
		    fp->error == KERR_LEADER_NOT_AVAILABLE ||
		    fp->error == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
		    fp->error == 74 || fp->error == 75)
			pcluster_want_metadata(dst);
		else if (pl_is_denial(fp->error))
			pl_part_fail_denied(p, "Fetch of topic %s partition %" PRId32
			    " at offset %" PRId64 " (checking who wrote it) answered %s "
			    "for %s (it needs READ on the topic)", p->topic, p->index,
			    p->prove_at, kerr_name(fp->error),
			    pcluster_principal(dst, who, sizeof(who)));
		else
			pl_part_fail(p, "Fetch from the destination at offset %" PRId64
			    " (checking who wrote it): %s", p->prove_at,
			    kerr_name(fp->error));
		return;
	}
	batch_iter_init(&it, fp->records.p, fp->records.len > 0 ?
	    (size_t)fp->records.len : 0);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		if (b.base_offset > p->prove_at || batch_last_offset(&b) < p->prove_at)
			continue;
		found = 1;
		break;
	}
	if (!found) {
		if (rc == BATCH_ERROR)
			pl_part_fail(p, "malformed record batch from the destination at "
			    "offset %" PRId64 ": %s", p->prove_at, err);
		else if (fp->log_start_offset > p->prove_at)
			concluded(p, -1, fp->log_start_offset);
		else
			pl_part_fail(p, "Fetch from the destination at offset %" PRId64
			    " returned no batch holding it (high watermark %" PRId64 ")",
			    p->prove_at, fp->high_watermark);
		return;
	}
	if (ours(p, &b)) {
		concluded(p, batch_next_offset(&b), -1);
		return;
	}
	if (p->prove_hi < 0 && !pid_known(p, b.producer_id)) {
		/* The last batch of someone else's (mirrord's own batches above
		 * it landed at offsets it did not expect). */
		p->prove_hi = batch_last_offset(&b);
		p->prove_hib = b.base_offset;
		p->prove_pid = b.producer_id;
		p->prove_seq = b.base_sequence;
	}
	p->prove_lo = b.base_offset;
	if (b.base_offset <= 0) {
		concluded(p, -1, 0);
		return;
	}
	if (++p->prove_steps > PROVE_MAX_STEPS) {
		pl_part_fail_final(p, "foreign write: destination offsets %" PRId64
		    "..%" PRId64 " or more were not written by mirrord (last foreign batch: "
		    "producer id %" PRId64 ", sequence %" PRId32 "), and more than %d "
		    "batches before them neither", b.base_offset, p->prove_end - 1,
		    p->prove_pid, p->prove_seq, PROVE_MAX_STEPS);
		return;
	}
	p->prove_at = b.base_offset - 1;
}

static void prove_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct prove_ctx *x = arg;
	struct ppart *p = x->p;
	struct pipeline *pl = p->pm->pl;
	int16_t top = 0;

	if (p->dead || pl->dst->dying || x->gen != p->gen || p->step != PS_PROVE) {
		p->step_inflight = 0;
		goto out;
	}
	if (err != KCONN_E_OK) {
		p->step_inflight = 0;
		log_info("%s: Fetch (provenance) failed: %s", pl->dst->label, errstr);
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		pcluster_want_metadata(pl->dst);
		goto out;
	}
	/* A first batch larger than asked comes whole: count what came. */
	pl_dread_grow(pl, &x->held, kr_left(body));
	if (pw_fetch_decode(body, x->version, &top, prove_part, x) < 0) {
		p->step_inflight = 0;
		kconn_close(c, KCONN_E_PROTOCOL, "malformed Fetch response");
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		goto out;
	}
	if (p->step_inflight) {
		/* The partition was not in the answer. */
		p->step_inflight = 0;
		p->not_before = clock_mono_ms() + pl_backoff_ms(pl);
		pcluster_want_metadata(pl->dst);
	}
out:
	pl_dread_done(pl, &x->held);
	pl_kick(pl);
	pl_part_unref(p);
	free(x);
}

static int prove_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct prove_fetch *f = msg;

	return pw_fetch_encode(w, version, &f->req, &f->tp, 1);
}

void pprove_send(struct ppart *p)
{
	struct pipeline *pl = p->pm->pl;
	struct pbroker *b = ppart_leader(p, 1);
	struct kconn *c = b ? pbroker_conn(b) : NULL;
	struct prove_fetch f;
	struct prove_ctx *x;
	char err[256], name[300];
	size_t want;
	int v;

	if (c == NULL)
		return;
	if (p->pv_state > 0) {
		char how[400], note[900];

		if (ppreserve_step(p))
			return;
		if (p->pv_state == PV_SCANNED) {
			pprove_failback_scanned(p);
			return;
		}
		if (p->pv_state != PV_DONE)
			return; /* failed */
		p->pv_state = PV_NONE;
		snprintf(how, sizeof(how), "preserved in topic %s partition %"
		    PRId32 " (%" PRId64 " records); skip-over", p->pv_topic,
		    p->index, p->pv_records);
		snprintf(note, sizeof(note), "failback divergence at offset %"
		    PRId64 ": %" PRId64 " committed records of offsets %" PRId64
		    "..%" PRId64 " preserved in topic %s partition %" PRId32 " at "
		    "offsets %" PRId64 "..%" PRId64 " (%" PRId64 " transaction "
		    "markers and %" PRId64 " records of aborted transactions not "
		    "copied); the old primary's offsets %" PRId64 "..%" PRId64
		    " are kept in place, the source's records from its offset %"
		    PRId64 " follow at offset %" PRId64, p->pv_from, p->pv_records,
		    p->pv_first, p->pv_last, p->pv_topic, p->index, p->pv_aside_lo,
		    p->pv_aside_hi, p->pv_markers, p->pv_aborted, p->pv_from,
		    p->pv_end - 1, p->fb_next, p->pv_end);
		failback_skip(p, p->pv_from, p->fb_next, p->pv_end, how, note);
		return;
	}
	if (p->fb_state == 0 && p->prove_steps == 0 && !wrote_something(p)) {
		/* A destination mirrord never wrote: a failback?  The
		 * source's mark says where its mirror stopped copying it. */
		p->fb_state = 1;
		if (pmarks_failback(p) == 0) {
			p->step_inflight = 1;
			return;
		}
		p->fb_state = 2;
	}
	v = kconn_pick_version(c, KP_API_FETCH, PW_FETCH_MIN, PW_FETCH_MAX);
	if (v < 0) {
		pl_part_fail(p, "destination broker %s supports no Fetch version in "
		    "%d..%d (needed to check who wrote the destination end)",
		    kconn_name(c), PW_FETCH_MIN, PW_FETCH_MAX);
		return;
	}
	want = PROVE_PART_BYTES + PROVE_FRAMING + strlen(p->topic);
	if (!pl_dread_room(pl, want))
		return; /* tried again when a read ends (pl_dread_done kicks) */
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return;
	x->p = p;
	x->gen = p->gen;
	x->offset = p->prove_at;
	x->version = (int16_t)v;
	memset(&f, 0, sizeof(f));
	f.req.max_wait_ms = 0;
	f.req.min_bytes = 1;
	f.req.max_bytes = PROVE_PART_BYTES;
	f.req.isolation = 0; /* every batch, also of open transactions */
	f.tp.topic = p->topic;
	f.tp.partition = p->index;
	f.tp.offset = p->prove_at;
	f.tp.max_bytes = PROVE_PART_BYTES;
	f.tp.leader_epoch = -1; /* no fencing, no divergence check here */
	f.tp.last_epoch = -1;
	p->refs++;
	pl_dread_start(pl, &x->held, want);
	if (kconn_send(c, KP_API_FETCH, (int16_t)v, prove_encode, &f, 0,
	    (int)MIN(pl->cfg->pipeline_request_timeout_ms, INT32_MAX),
	    prove_response, x, err, sizeof(err)) != 0) {
		log_debug("%s: Fetch (provenance): %s", pname(p, name, sizeof(name)), err);
		pl_dread_done(pl, &x->held);
		pl_part_unref(p);
		free(x);
		return;
	}
	p->step_inflight = 1;
}

int pprove_start(struct ppart *p, int64_t d)
{
	struct pcluster *dst = p->pm->pl->dst;
	int64_t k;

	ppreserve_reset(p); /* a failback's check starts again */

	if (p->proven_end >= 0 && p->proven_end == d) {
		p->proven_end = -1;
		return 0;
	}
	p->proven_end = -1;
	k = known_written(p);
	if (d < k) {
		pl_part_fail_final(p, "destination truncated: the destination partition "
		    "ends at offset %" PRId64 ", but mirrord wrote offset %" PRId64
		    " there (destination topic deleted and recreated, or its log "
		    "truncated); kafka-mirrors --recover --resolution realign "
		    "deletes the topic and copies it again", d, k - 1);
		return -1;
	}
	if (d == p->dst_next || dst->pid_unsupported)
		return 0; /* as this process left it; or no producer ids at all */
	if (d == 0)
		return 0; /* empty, and mirrord's record says it wrote nothing */
	p->prove_end = d;
	p->prove_at = d - 1;
	p->prove_lo = d;
	p->prove_steps = 0;
	p->prove_pid = -1;
	p->prove_seq = -1;
	p->prove_hi = -1;
	p->fb_state = 0;
	p->fb_last = -1;
	p->fb_epoch = -1;
	p->fb_next = -1;
	p->step = PS_PROVE;
	pl_kick(p->pm->pl);
	return -1;
}
