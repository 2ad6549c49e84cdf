/*
 * mlog_kafka.c: the metadata log in a topic of the destination cluster
 * (storage.backend: kafka): becoming the writer, replay, the mlog ops.
 * See mlog.h for the interface and the frame format, mlog_kafka.h for the
 * options, mlog_kafka_io.c for the cluster side (connections, the topic,
 * Fetch and Produce) and mlog_kafka_rec.c for the record encoding.
 *
 * The topic.  One partition; created by mirrord if missing with the wanted
 * replication factor (capped by the broker count, with a warning),
 * min.insync.replicas (capped by the replication factor, with a warning),
 * unclean.leader.election.enable=false, cleanup.policy=delete with
 * retention.ms=-1 and retention.bytes=-1 (nothing is ever deleted by the
 * broker), and max.message.bytes large enough for one record of
 * storage max size.  An existing topic is checked: more than one
 * partition, compaction, or a finite retention refuse the start (each of
 * them would lose or reorder records); a lower replication factor or
 * min.insync.replicas than wanted is a warning.  Every Produce uses
 * acks=all.
 *
 * The records.  Each Kafka record's value is exactly one mlog frame (the
 * 12-byte checked header and the payload), so replay checks the same
 * CRC-32C as the file backend.  Records of a snapshot carry the key
 * "snapshot"; the records of the log have a null key.  One mlog_sync() is
 * one record batch (Kafka appends a batch atomically: all of a sync's
 * records or none).
 *
 * One writer, fenced.  Every writer gets its producer id and epoch from
 * InitProducerId with the transactional id "mirrord-metadata-<topic>"; the
 * transaction coordinator bumps the epoch on every call, so the newest
 * writer holds the highest epoch.  What the partition leader checks: it
 * keeps, per producer id, the newest epoch and the last sequences of the
 * batches appended to the partition, and refuses a batch whose epoch is
 * older than that state's (INVALID_PRODUCER_EPOCH for a client's Produce).
 * The coordinator's bump does not reach the leader (no transaction is
 * open, so no marker is written): the leader learns an epoch only when a
 * batch carrying it is appended, so a new writer's first act is to
 * append a claim record (type MLOG_T_CLAIM, naming its producer id and
 * epoch) and only then read the log to its end.  From the moment the claim
 * is appended the leader refuses every batch of an older epoch of that
 * producer id with INVALID_PRODUCER_EPOCH; a deposed writer's late batch
 * therefore either landed before the claim (and the new writer replays it)
 * or is refused.  A writer refused that way marks the log broken ("fenced")
 * and every later mutation fails with that message: it never writes again.
 * The batches are idempotent (producer id, epoch, sequence) but not
 * transactional: no AddPartitionsToTxn/EndTxn is needed for the epoch
 * check, which the leader applies to every batch with a producer id (this
 * is checked against Kafka 4.4 by test/kafka/test_mlog_kafka.py).  The sequence
 * numbers make a resend after a lost answer exact: the leader answers a
 * duplicate with the first append's offset.
 *
 * Replay applies the fence again, independently of the broker: after a
 * claim, a batch from any other producer id or epoch is skipped with a
 * warning (it cannot appear while the broker keeps the producer's state;
 * see the known limits).
 *
 * Snapshots.  mlog_compact() appends a snapshot: a MLOG_T_SNAPSHOT record,
 * the dump's records, then MLOG_T_SNAPEND holding the record count and the
 * offset of the MLOG_T_SNAPSHOT record, all keyed "snapshot", written by
 * one writer (one producer epoch).  At open the newest complete snapshot
 * is found by reading backwards from the end in growing windows (the log
 * after a snapshot is bounded by storage.snapshot_every_records), and the
 * replay starts there; snapshot records met later in the replay (an
 * unfinished snapshot of a fenced writer) are skipped.  After a snapshot
 * the writer also deletes the records before it (DeleteRecords), so the
 * log normally starts at its newest snapshot.  Either way start-up reads
 * the newest snapshot and the log after it, not the history.  The
 * snapshot mstate starts between groups (mlog_compact_async()) is read
 * from the model on the loop and written by the log's thread
 * (mk_compact_async(), a SNAPSHOT job), after the groups before it and
 * before those after it, so the loop does not wait for it; records
 * appended meanwhile stay pending for the next group, after it.
 *
 * Followers.  With mlog_kafka_opts.follower the open claims
 * nothing: it replays the newest snapshot and the log after it, and the
 * instance stays a reader that tails the log (mlog_kafka_poll(), one
 * Fetch from the offset after the last record read), applying every new
 * record live (struct mlog_rec.live = 1, so mstate's hooks fire for
 * changes another instance wrote).  The tail applies the fence like the
 * replay (records of any producer but the newest claim's are skipped) and
 * skips snapshot records (its model is already current).  A follower's
 * writes go through the writer: its mlog_sync() produces ONE record to the
 * request topic "<topic>-requests" (1 partition, delete policy,
 * retention.ms 3600000, acks=all, an idempotent producer id of its own,
 * created or checked like the metadata topic) holding its identity
 * (mlog_kafka_set_identity()), a request id unique across its restarts and
 * the pending frames as they are (layout in mlog_kafka.h); then it tails
 * the log, applying everything in log order, until the writer's REPLY
 * (MLOG_T_REPLY) for that request id, and returns its verdict: 0, or -1
 * with the writer's Kafka error code in mlog.sync_error and its message.
 * Because the records arrive through the tail, struct mlog's
 * applies_on_sync is set on a follower and mstate does not apply them a
 * second time.  No REPLY within storage.kafka.timeout_ms: -1 "outcome
 * unknown" (REQUEST_TIMED_OUT), the log stays usable, and if the writer
 * accepts the request later the tail applies it then, once.
 *
 * The writer's mlog_kafka_poll() first reads its own log from where it
 * is (a newer writer's claim there demotes it even when it writes
 * nothing), then the request topic from the offset after the last request
 * it finds answered (every REPLY names its request's offset; a snapshot's
 * MLOG_T_SNAPSHOT record, version 2, carries that offset so trimming loses
 * nothing), and hands each request to the request handler, one at a time,
 * in order.  On accept the handler writes the records: synchronously
 * (mstate_apply_forwarded(): validate on a scratch copy of only the
 * objects the records name, append, sync, apply), the first sync made
 * while the handler runs carrying the REPLY; or, with the log's event
 * base, later (mstate_apply_forwarded_async() in mstate's exclusive turn,
 * the REPLY armed for the records' group, mlog_kafka_request_done() when
 * it is durable).  Either way the records and their answer land in one
 * batch, together or not at all, and a new writer never answers twice.  A
 * refusal, or a request that does not decode (named: version, header,
 * which frame is torn or of a framing type), gets only its REPLY.  With
 * an event base both reads are jobs of the log's thread (PEEK, REQFETCH
 * in mlog_kafka_async.c) and a REPLY written alone is one too, so the
 * writer's loop waits for none of it; only records of another writer
 * found after its own (a newer writer's claim) are read on the loop, once
 * the thread is idle, to demote it.
 *
 * Roles.  mlog_kafka_promote() turns a follower into the writer exactly
 * as the open of a writer does: InitProducerId, claim, then read to the
 * end applying live (the claim must still be the newest).  A writer whose
 * append the leader refuses as fenced, or that reads a newer claim, or
 * that mlog_kafka_demote() is called on, becomes a follower: its model is
 * a prefix of the log, so it tails on from where it is; the mutation that
 * met the fence fails with "metadata log fenced: ...".  The role hook
 * (mlog_kafka_set_role_hook()) hears of every change; without one a
 * fenced writer's log is broken.
 *
 * A follower that falls behind the log start (DeleteRecords after a
 * snapshot removed records it had not read yet) cannot catch up by
 * tailing.  With a rebuild hook (mlog_kafka_set_rebuild(); the daemon and
 * the test peer install mstate's) it replays the newest snapshot and the
 * log after it into a fresh model, which mstate_rebuild_adopt() then makes
 * the live model in place (objects keep their addresses, the hooks see
 * each difference), and tails on from the log end: no restart.  Without
 * one the log goes broken ("restart it").  To make it rare, a writer
 * with a request handler (cluster mode) deletes only the records before
 * its PREVIOUS snapshot, so a follower falls behind only if it read
 * nothing during a whole snapshot interval (storage.snapshot_every_records);
 * a writer alone deletes the records before its newest snapshot.
 *
 * Off the loop (mlog_kafka_async.c): mlog_sync_async() (ops->sync_async,
 * ops->wait) hands a group to the log's I/O thread (the writer's Produce,
 * the follower's request, completed when the tail reads its REPLY), a
 * follower's mlog_kafka_poll() starts the next Fetch there and applies
 * the records the previous one brought, and the writer's starts its look
 * at the log and its Fetch of the requests there; the loop never waits
 * for them.
 *
 * Connections (mlog_kafka_net.c): every request is a kconn request on a
 * kcluster of the log's own (destination.client's connection and
 * security settings, the storage.kafka bootstrap list), run by a network
 * thread with its own event base; the sequential code here and in
 * mlog_kafka_io.c waits for each answer on a condition variable (on the
 * I/O thread, or on the calling thread of a synchronous path).  A
 * Produce kconn refused because the connection was already closed never
 * left: it does not make the outcome unknown.
 *
 * Known limits:
 *  - Blocking: the synchronous mlog_sync() is a Produce round trip waited
 *    for on the calling (loop) thread, bounded by storage.kafka.timeout_ms, as the
 *    file backend blocks on fsync (it first waits for the thread's groups);
 *    a follower's also waits for the REPLY (same bound).  With an event
 *    base the writer's reads (its log, the request topic), its groups,
 *    its snapshots and a promotion (mlog_kafka_promote_async()) run on
 *    the log's thread; open, a writer's read of another writer's records
 *    and a follower's rebuild (a snapshot read) still run on the loop.  A
 *    writer's answer lost past the timeout leaves the outcome unknown:
 *    the log is then broken (mlog_stats.broken; mirrord restarts, which
 *    re-reads what is really there).
 *  - A follower's sync applies, in log order, whatever other instances
 *    wrote before its REPLY: mstate hooks fire inside that mlog_sync()
 *    (or the completion of an asynchronous group, or the poll),
 *    and a mirror may even be deleted there; callers must not keep model
 *    pointers across a persist on a follower without the DELETING hook.
 *  - Trimming: after each snapshot the writer deletes the records before
 *    it (DeleteRecords); retention stays infinite, so the broker itself
 *    never deletes anything.  A trim that fails is retried at the next
 *    snapshot.
 *  - The broker forgets a producer id's state once no batch of it was
 *    appended for producer.id.expiration.ms (one day by default).  A
 *    deposed writer paused longer than that, with no write of the new
 *    writer in between, could then append after the claim; replay skips
 *    such a batch (see above), but the deposed writer itself would not
 *    learn it was fenced until a later write is refused.  The same holds
 *    once the epochs of the producer id run out (32767 claims): the
 *    coordinator then hands out a new producer id, whose claim does not
 *    raise the old id's epoch at the leader.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kproto.h"
#include "log.h"
#include "mlog_kafka_int.h"

#define CLAIM_LEN 26u            /* pid i64, epoch i16, wall ms i64, pid of the process i64 */
#define SNAPEND_LEN 16u          /* body count u64, begin offset i64 */
#define SCAN_WINDOW 4096         /* first backward window, in offsets */
#define TXN_TIMEOUT_MS 60000

void mlog_kafka_opts_init(struct mlog_kafka_opts *ko)
{
	memset(ko, 0, sizeof(*ko));
	ko->topic = MLOG_KAFKA_TOPIC_DEFAULT;
	ko->replication_factor = 3;
	ko->min_insync_replicas = 2;
	ko->timeout_ms = 15000;
}

void mlog_kafka_writer(const struct mlog *ml, int64_t *producer_id,
    int16_t *epoch)
{
	const struct mk *k = (const struct mk *)ml;

	*producer_id = k->pid;
	*epoch = k->epoch;
}



static int check_usable(struct mk *k, char *err, size_t errlen)
{
	if (!k->broken)
		return 0;
	seterr(err, errlen, "metadata log is read-only after an earlier "
	    "failure: %s", k->broken_why);
	return -1;
}

/* ---- becoming the writer -------------------------------------------------- */

static int init_producer(struct mk *k, char *err, size_t errlen)
{
	int64_t deadline = clock_mono_ms() + k->timeout_ms;
	struct karena *a = karena_new(1 << 16);
	char last[512] = "";
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	for (;;) {
		struct kp_find_coordinator_request fr;
		struct kp_find_coordinator_response fresp;
		struct kp_init_producer_id_request ir;
		struct kp_init_producer_id_response iresp;
		struct kstr key = kstr_c(k->txn_id);
		struct mk_conn *c = mk_connect_any(k, last, sizeof(last)), *coord = NULL;
		uint8_t *frame = NULL;
		char host[256];
		int port;
		int16_t e = -1;

		if (c == NULL)
			goto retry;
		if (k->txn_id[0] == '\0') {
			/* An idempotent producer (the request topic): any
			 * broker hands out a producer id. */
			coord = c;
			seterr(host, sizeof(host), "%s", mk_conn_addr(c));
			port = 0;
			goto init;
		}
		kp_find_coordinator_request_init(&fr);
		fr.key_type = 1;                /* transaction */
		fr.coordinator_keys = &key;
		fr.coordinator_keys_n = 1;
		karena_reset(a);
		frame = mk_call(c, KP_API_FIND_COORDINATOR, 4, &fr, &fresp, a,
		    k->timeout_ms, last, sizeof(last));
		mk_conn_free(c);
		if (frame == NULL)
			goto retry;
		if (fresp.coordinators_n != 1 ||
		    fresp.coordinators[0].error_code != 0) {
			seterr(last, sizeof(last), "FindCoordinator(%s): %s",
			    k->txn_id, fresp.coordinators_n == 1 ? kerr_name(
			    fresp.coordinators[0].error_code) : "no answer");
			free(frame);
			goto retry;
		}
		seterr(host, sizeof(host), "%.*s",
		    (int)fresp.coordinators[0].host.len,
		    fresp.coordinators[0].host.p);
		port = fresp.coordinators[0].port;
		free(frame);
		coord = mk_conn_open(k->net, host, port, k->timeout_ms, last,
		    sizeof(last));
		if (coord == NULL)
			goto retry;
init:
		kp_init_producer_id_request_init(&ir);
		ir.transactional_id = k->txn_id[0] != '\0' ? kstr_c(k->txn_id) :
		    KSTR_NULL;
		ir.transaction_timeout_ms = TXN_TIMEOUT_MS;
		ir.producer_id = -1;
		ir.producer_epoch = -1;
		karena_reset(a);
		frame = mk_call(coord, KP_API_INIT_PRODUCER_ID, 4, &ir, &iresp,
		    a, k->timeout_ms, last, sizeof(last));
		mk_conn_free(coord);
		if (frame == NULL)
			goto retry;
		e = iresp.error_code;
		if (e == 0) {
			k->pid = iresp.producer_id;
			k->epoch = iresp.producer_epoch;
			k->seq = 0;
			free(frame);
			rc = 0;
			break;
		}
		free(frame);
		seterr(last, sizeof(last), "InitProducerId(%s) at %s:%d: %s",
		    k->txn_id[0] != '\0' ? k->txn_id : "idempotent", host, port,
		    kerr_name(e));
		if (!kerr_retriable(e) && e != KERR_CONCURRENT_TRANSACTIONS)
			break;
retry:
		if (clock_mono_ms() + MK_BACKOFF_MS >= deadline)
			break;
		mk_sleep_ms(MK_BACKOFF_MS);
	}
	if (rc != 0)
		seterr(err, errlen, "cannot become the writer of topic %s: %s",
		    k->topic, last);
	karena_free(a);
	return rc;
}

static int claim(struct mk *k, int64_t *off, char *err, size_t errlen)
{
	uint8_t f[MLOG_FRAME_HDR + CLAIM_LEN], *p = f + MLOG_FRAME_HDR;

	be64_store(p, (uint64_t)k->pid);
	be16_store(p + 8, (uint16_t)k->epoch);
	be64_store(p + 10, (uint64_t)clock_wall_ms());
	be64_store(p + 18, (uint64_t)getpid());
	mlog_frame_header(f, MLOG_T_CLAIM, p, CLAIM_LEN);
	/* The tail reads the claim in its turn, with what lies before it. */
	return mk_produce_frames(k, f, sizeof(f), 1, MK_PF_KEEP_NEXT, off,
	    err, errlen);
}

/* ---- open: find the newest snapshot, replay -------------------------------- */

struct find_snap {
	int64_t begin;      /* newest SNAPEND's begin offset, -1 none */
	int64_t end_off;
};

static int find_cb(void *arg, const struct krec *r, char *err, size_t errlen)
{
	struct find_snap *fs = arg;

	(void)err;
	(void)errlen;
	if (r->snapshot && r->type == MLOG_T_SNAPEND && r->len == SNAPEND_LEN) {
		fs->begin = (int64_t)be64_load(r->p + 8);
		fs->end_off = r->offset;
	}
	return 0;
}

/* The offset of the newest complete snapshot in [start, end), or -1. */
static int find_snapshot(struct mk *k, int64_t start, int64_t end,
    int64_t *snap, char *err, size_t errlen)
{
	int64_t hi = end, w = SCAN_WINDOW;

	*snap = -1;
	while (hi > start) {
		int64_t lo = hi - w < start ? start : hi - w;
		struct find_snap fs = { .begin = -1 };

		if (mk_read_snapshots(k, lo, hi, find_cb, &fs, err,
		    errlen) != 0)
			return -1;
		if (fs.begin >= start && fs.begin < fs.end_off) {
			*snap = fs.begin;
			return 0;
		}
		hi = lo;
		w = w > INT64_MAX / 4 ? INT64_MAX : w * 4;
	}
	return 0;
}

struct mk_tail {
	struct mk *k;
	mlog_apply_fn apply;
	void *arg;
	int64_t snap;            /* offset of the snapshot replayed, -1 none */
	int in_snap, snap_done;
	uint64_t snap_body;
	int64_t owner_pid;       /* writer of the latest claim, -1 none yet */
	int16_t owner_epoch;
	uint64_t applied, since_snap, bytes_since_snap, skipped;
	int64_t snap_ts;
	int live;                /* 1 once the open's replay is done */
	char file[300];
};

/* A REPLY read from the log: the request topic resumes after it, and
 * the follower waiting for it has its answer. */
static void see_reply(struct mk *k, const struct krec *r)
{
	struct mlog_kafka_reply rep;
	char e[200];

	if (mlog_kafka_decode_reply(r->p, r->len, &rep, e, sizeof(e)) != 0) {
		log_warnx("metadata log: topic %s offset %" PRId64 ": %s; "
		    "skipped", k->topic, r->offset, e);
		return;
	}
	if (rep.req_offset + 1 > k->req_next)
		k->req_next = rep.req_offset + 1;
	if (k->instance_id == NULL ||
	    rep.instance_len != strlen(k->instance_id) ||
	    memcmp(rep.instance_id, k->instance_id, rep.instance_len) != 0)
		return;
	mk_async_reply(k, rep.id, rep.error, rep.msg, rep.msg_len);
	if (!k->waiting || rep.id != k->wait_id)
		return;
	k->wait_done = 1;
	k->wait_error = rep.error;
	seterr(k->wait_msg, sizeof(k->wait_msg), "%.*s", (int)rep.msg_len,
	    rep.msg);
}

static int replay_cb(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct mk_tail *rp = arg;
	struct mk *k = rp->k;

	if (r->snapshot) {
		if (r->offset == rp->snap) {
			if (r->type != MLOG_T_SNAPSHOT) {
				seterr(err, errlen, "topic %s offset %" PRId64 ": "
				    "the snapshot starts with a record of type "
				    "0x%04x", k->topic, r->offset, r->type);
				return -1;
			}
			rp->in_snap = 1;
			rp->snap_ts = r->ts;
			/* Version 2 carries the request-topic offset the
			 * writer had answered up to. */
			if (r->len >= 16 && be16_load(r->p + 4) >= 2 &&
			    (int64_t)be64_load(r->p + 8) > k->req_next)
				k->req_next = (int64_t)be64_load(r->p + 8);
			rp->owner_pid = r->pid;
			rp->owner_epoch = r->epoch;
			return 0;
		}
		if (!rp->in_snap)
			return 0;   /* an older or unfinished snapshot */
		if (r->pid != rp->owner_pid || r->epoch != rp->owner_epoch) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": snapshot "
			    "record of producer %" PRId64 " epoch %d inside the "
			    "snapshot of producer %" PRId64 " epoch %d", k->topic,
			    r->offset, r->pid, r->epoch, rp->owner_pid,
			    rp->owner_epoch);
			return -1;
		}
		if (r->type == MLOG_T_SNAPEND) {
			if (r->len != SNAPEND_LEN || be64_load(r->p) != rp->snap_body) {
				seterr(err, errlen, "topic %s offset %" PRId64 ": "
				    "snapshot end counts %" PRIu64 " records, "
				    "the snapshot holds %" PRIu64, k->topic,
				    r->offset, r->len == SNAPEND_LEN ?
				    be64_load(r->p) : 0, rp->snap_body);
				return -1;
			}
			rp->in_snap = 0;
			rp->snap_done = 1;
			return 0;
		}
		if (r->type >= MLOG_TYPE_RESERVED) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": framing "
			    "record 0x%04x inside a snapshot", k->topic,
			    r->offset, r->type);
			return -1;
		}
		struct mlog_rec rec = { .type = r->type, .len = r->len,
		    .p = r->p, .off = (uint64_t)r->offset, .file = rp->file,
		    .in_snapshot = 1 };
		if (rp->apply != NULL && rp->apply(rp->arg, &rec, err,
		    errlen) != 0)
			return -1;
		rp->snap_body++;
		rp->applied++;
		return 0;
	}
	if (rp->in_snap) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": log record "
		    "inside the snapshot that starts at offset %" PRId64,
		    k->topic, r->offset, rp->snap);
		return -1;
	}
	if (r->type == MLOG_T_CLAIM) {
		if (r->len != CLAIM_LEN || (int64_t)be64_load(r->p) != r->pid ||
		    (int16_t)be16_load(r->p + 8) != r->epoch) {
			seterr(err, errlen, "topic %s offset %" PRId64 ": claim "
			    "record does not name the producer that wrote it",
			    k->topic, r->offset);
			return -1;
		}
		rp->owner_pid = r->pid;
		rp->owner_epoch = r->epoch;
		if (k->writer && (r->pid != k->pid || r->epoch != k->epoch)) {
			char why[600];

			seterr(why, sizeof(why), "fenced: producer %" PRId64
			    " epoch %d claimed topic %s at offset %" PRId64
			    " after us (producer %" PRId64 " epoch %d)", r->pid,
			    r->epoch, k->topic, r->offset, k->pid, k->epoch);
			mk_fenced(k, why);
		}
		return 0;
	}
	if (rp->owner_pid < 0) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": record before "
		    "any writer's claim; refusing to start", k->topic,
		    r->offset);
		return -1;
	}
	if (r->pid != rp->owner_pid || r->epoch != rp->owner_epoch) {
		log_warnx("metadata log: topic %s offset %" PRId64 ": skipping a "
		    "record of producer %" PRId64 " epoch %d written after the "
		    "claim of producer %" PRId64 " epoch %d (a deposed writer's "
		    "late write)", k->topic, r->offset, r->pid, r->epoch,
		    rp->owner_pid, rp->owner_epoch);
		rp->skipped++;
		return 0;
	}
	if (r->type == MLOG_T_REPLY) {
		see_reply(k, r);
		return 0;
	}
	if (r->type >= MLOG_TYPE_RESERVED) {
		seterr(err, errlen, "topic %s offset %" PRId64 ": unexpected "
		    "framing record 0x%04x", k->topic, r->offset, r->type);
		return -1;
	}
	struct mlog_rec rec = { .type = r->type, .len = r->len, .p = r->p,
	    .off = (uint64_t)r->offset, .file = rp->file, .in_snapshot = 0,
	    .live = rp->live };
	if (rp->apply != NULL && rp->apply(rp->arg, &rec, err, errlen) != 0)
		return -1;
	rp->applied++;
	rp->since_snap++;
	rp->bytes_since_snap += MLOG_FRAME_HDR + r->len;
	return 0;
}

/* Migration: anything but claims in [start, end) means a log is there. */
struct emptiness {
	uint64_t state;
	int64_t first;
};

static int empty_cb(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct emptiness *em = arg;

	(void)err;
	(void)errlen;
	if (r->type != MLOG_T_CLAIM) {
		if (em->state++ == 0)
			em->first = r->offset;
	}
	return 0;
}

static int check_empty(struct mk *k, char *err, size_t errlen)
{
	int64_t start, end;
	struct emptiness em = { 0, -1 };

	if (mk_list_offset(k, -2, &start, err, errlen) != 0 ||
	    mk_list_offset(k, -1, &end, err, errlen) != 0)
		return -1;
	if (start < end && mk_read_range(k, start, end, empty_cb, &em, err,
	    errlen) != 0)
		return -1;
	if (em.state > 0 || start > 0) {
		seterr(err, errlen, "topic %s already holds a metadata log "
		    "(%" PRIu64 " records from offset %" PRId64 ", log end %"
		    PRId64 "); refusing to write over it", k->topic, em.state,
		    em.first >= 0 ? em.first : start, end);
		return -1;
	}
	return 0;
}

/* Replays [from, end) (the newest snapshot at rp->snap, if any). */
static int replay_range(struct mk *k, int64_t from, int64_t end, char *err,
    size_t errlen)
{
	struct mk_tail *rp = k->tail;

	seterr(rp->file, sizeof(rp->file), "topic %s", k->topic);
	if (from < end && mk_read_range(k, from, end, replay_cb, rp, err,
	    errlen) != 0)
		return -1;
	if (rp->snap >= 0 && !rp->snap_done) {
		seterr(err, errlen, "topic %s: the snapshot at offset %" PRId64
		    " ends before its end marker", k->topic, rp->snap);
		return -1;
	}
	k->next = end;
	k->st.records = rp->applied;
	k->st.records_since_snapshot = rp->since_snap;
	k->st.bytes_since_snapshot = rp->bytes_since_snap;
	k->st.bytes = rp->bytes_since_snap;
	if (rp->snap >= 0)
		k->st.snapshot_wall_ms = rp->snap_ts;
	k->prev_snap = rp->snap;
	if (rp->skipped > 0)
		log_warnx("metadata log: topic %s: %" PRIu64 " late record%s of "
		    "deposed writers skipped", k->topic, rp->skipped,
		    rp->skipped == 1 ? "" : "s");
	log_info("metadata log: topic %s replayed from offset %" PRId64 " (%s) "
	    "to %" PRId64 ": %" PRIu64 " records%s", k->topic, from,
	    rp->snap >= 0 ? "snapshot" : "log start", end, rp->applied,
	    k->open_follower && !k->writer ? " (follower)" : "");
	return 0;
}

static int kafka_open(struct mlog *ml, mlog_apply_fn apply, void *arg,
    char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct mk_tail *rp;
	int64_t claim_off = -1, start, end, from;

	if (k->tail == NULL && (k->tail = calloc(1, sizeof(*k->tail))) == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	rp = k->tail;
	*rp = (struct mk_tail){ .k = k, .apply = apply, .arg = arg, .snap = -1,
	    .owner_pid = -1 };
	if (mk_ensure_topic(k, err, errlen) != 0)
		return -1;
	if (k->open_follower) {
		/* A follower claims nothing: it reads what is there. */
		if (mk_ensure_topic(k->req, err, errlen) != 0)
			return -1;
		if (mk_list_offset(k, -2, &start, err, errlen) != 0 ||
		    mk_list_offset(k, -1, &end, err, errlen) != 0)
			return -1;
		if (find_snapshot(k, start, end, &rp->snap, err, errlen) != 0)
			return -1;
		from = rp->snap >= 0 ? rp->snap : start;
		if (replay_range(k, from, end, err, errlen) != 0)
			return -1;
		rp->live = 1;
		k->base.applies_on_sync = 1;
		return 0;
	}
	if (k->require_empty && check_empty(k, err, errlen) != 0)
		return -1;
	if (init_producer(k, err, errlen) != 0)
		return -1;
	/* Write first: from here on the leader refuses older epochs. */
	if (claim(k, &claim_off, err, errlen) != 0)
		return -1;
	log_info("metadata log: claimed topic %s at offset %" PRId64 " as "
	    "producer id %" PRId64 " epoch %d (transactional id %s)", k->topic,
	    claim_off, k->pid, k->epoch, k->txn_id);
	/* ... then read to the end, so that every write of an earlier writer
	 * that landed before the claim is replayed. */
	if (mk_list_offset(k, -2, &start, err, errlen) != 0 ||
	    mk_list_offset(k, -1, &end, err, errlen) != 0)
		return -1;
	if (end <= claim_off) {
		seterr(err, errlen, "topic %s: log end %" PRId64 " is not past "
		    "our claim at offset %" PRId64, k->topic, end, claim_off);
		return -1;
	}
	if (find_snapshot(k, start, end, &rp->snap, err, errlen) != 0)
		return -1;
	from = rp->snap >= 0 ? rp->snap : start;
	if (replay_range(k, from, end, err, errlen) != 0)
		return -1;
	if (rp->owner_pid != k->pid || rp->owner_epoch != k->epoch) {
		char why[600];

		seterr(why, sizeof(why), "fenced: producer %" PRId64 " epoch %d "
		    "claimed topic %s after us (producer %" PRId64 " epoch %d) "
		    "while we were opening", rp->owner_pid, rp->owner_epoch,
		    k->topic, k->pid, k->epoch);
		seterr(err, errlen, "metadata log %s", why);
		return -1;
	}
	rp->live = 1;
	k->writer = 1;
	return 0;
}

/* ---- append, sync, compact ------------------------------------------------- */

static int kafka_append(struct mlog *ml, uint16_t type, const void *p,
    size_t len, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	uint8_t hdr[MLOG_FRAME_HDR];

	if (check_usable(k, err, errlen) != 0)
		return -1;
	mlog_frame_header(hdr, type, p, (uint32_t)len);
	kw_raw(&k->pend, hdr, sizeof(hdr));
	if (len > 0)
		kw_raw(&k->pend, p, len);
	if (k->pend.err) {
		seterr(err, errlen, "pending metadata records are over %zu bytes "
		    "(one batch of topic %s)", k->batch_max, k->topic);
		return -1;
	}
	k->npend++;
	k->st.pending = k->npend;
	return 0;
}

static void kafka_discard(struct mlog *ml)
{
	struct mk *k = (struct mk *)ml;

	kw_reset(&k->pend);
	k->npend = 0;
	k->st.pending = 0;
}

void mk_discard(struct mk *k)
{
	kafka_discard(&k->base);
}

/* Tells the role hook about a role change noticed earlier (after the
 * log is consistent again). */
void mk_fire_role(struct mk *k)
{
	char why[sizeof(k->role_why)];

	if (!k->role_pending)
		return;
	k->role_pending = 0;
	memcpy(why, k->role_why, sizeof(why));
	if (k->role_fn != NULL)
		k->role_fn(k->role_arg, k->writer, why);
}

static void become_follower(struct mk *k, const char *why)
{
	/* The requests fetched and not answered: the new writer's now.  One
	 * with the handler is dropped when the handler's call returns. */
	if (!k->rq_in_handler)
		mk_rq_drop(k);
	k->writer = 0;
	k->base.applies_on_sync = 1;
	k->role_pending = 1;
	seterr(k->role_why, sizeof(k->role_why), "%s", why);
	log_warnx("metadata log: topic %s: now a follower: %s", k->topic, why);
}

void mk_fenced(struct mk *k, const char *why)
{
	if (mk_defer_on_thread(k, 1, why))
		return;         /* applied by the loop thread */
	if (k->role_fn != NULL && k->writer && !k->is_req) {
		become_follower(k, why);
	} else {
		k->st.fenced = 1;
		mk_set_broken(k, why);
	}
}

/*
 * Fell behind the log start: replays the newest snapshot and the log
 * after it into a fresh model (the rebuild hook's), which the hook then
 * makes the live model, in place, its hooks seeing the differences; the
 * tail goes on after it, live.  Blocking like the replay at open (a
 * whole snapshot is read), bounded by storage.kafka.timeout_ms per read.
 */
static int rebuild(struct mk *k, char *err, size_t errlen)
{
	struct mk_tail *old = k->tail, *rp;
	int64_t start, end, snap, from = k->next;
	void *fresh;

	if (mk_list_offset(k, -2, &start, err, errlen) != 0 ||
	    mk_list_offset(k, -1, &end, err, errlen) != 0 ||
	    find_snapshot(k, start, end, &snap, err, errlen) != 0)
		return -1;
	if (snap < 0 && start > 0) {
		seterr(err, errlen, "no complete snapshot between the log start "
		    "%" PRId64 " and the log end %" PRId64, start, end);
		return -1;
	}
	if ((rp = calloc(1, sizeof(*rp))) == NULL ||
	    (fresh = k->rb_fresh(k->rb_arg)) == NULL) {
		free(rp);
		seterr(err, errlen, "out of memory");
		return -1;
	}
	log_warnx("metadata log: topic %s: this follower fell behind the log "
	    "start (it was at offset %" PRId64 ", the log starts at %" PRId64
	    "): rebuilding its model from the snapshot at offset %" PRId64,
	    k->topic, from, start, snap >= 0 ? snap : start);
	*rp = (struct mk_tail){ .k = k, .apply = old->apply, .arg = fresh,
	    .snap = snap, .owner_pid = -1 };
	k->tail = rp;
	if (replay_range(k, snap >= 0 ? snap : start, end, err, errlen) != 0) {
		k->tail = old;
		k->next = from;
		k->rb_drop(fresh);
		free(rp);
		return -1;
	}
	/* From here on the tail applies to the live model again. */
	rp->arg = old->arg;
	rp->live = 1;
	free(old);
	k->rebuilds++;
	if (k->rb_adopt(k->rb_arg, fresh, err, errlen) != 0)
		return -1;      /* the live model is whole, the tail goes on */
	log_info("metadata log: topic %s: model rebuilt from offset %" PRId64
	    " to %" PRId64 " without a restart", k->topic, snap >= 0 ? snap :
	    start, end);
	return 0;
}

void mlog_kafka_set_rebuild(struct mlog *ml, void *(*fresh)(void *arg),
    int (*adopt)(void *arg, void *fresh, char *err, size_t errlen),
    void (*drop)(void *fresh), void *arg)
{
	struct mk *k = (struct mk *)ml;

	k->rb_fresh = fresh;
	k->rb_adopt = adopt;
	k->rb_drop = drop;
	k->rb_arg = arg;
}

/* One Fetch of the log from k->next, applying live.  0, -1 with err. */
static int tail_once(struct mk *k, int max_wait_ms, char *err,
    size_t errlen)
{
	int64_t next, hw;
	int rc;

	if (k->tail == NULL) {
		seterr(err, errlen, "metadata log topic %s is not open", k->topic);
		return -1;
	}
	rc = mk_fetch(k, k->next, INT64_MAX, max_wait_ms, replay_cb, k->tail,
	    &next, &hw, err, errlen);
	if (rc == -2) {
		char e2[1024];

		seterr(e2, sizeof(e2), "%s", err);
		return mk_behind(k, e2, err, errlen);
	}
	if (rc != 0)
		return -1;
	k->next = next;
	return 0;
}

int mk_behind(struct mk *k, const char *fetch_err, char *err, size_t errlen)
{
	char why[1400], e2[768];

	/* The writer deleted records this instance had not read yet
	 * (DeleteRecords after a snapshot): rebuild the model from the
	 * newest snapshot, in place (mlog_kafka_set_rebuild()). */
	if (k->rb_fresh != NULL && rebuild(k, e2, sizeof(e2)) == 0) {
		if (errlen > 0)
			err[0] = '\0';
		return 0;
	}
	if (k->rb_fresh == NULL)
		seterr(e2, sizeof(e2), "no rebuild hook: restart it to re-read "
		    "the newest snapshot");
	seterr(why, sizeof(why), "topic %s: this follower fell behind the log "
	    "start (it was at offset %" PRId64 ", the records before the newest "
	    "snapshot were deleted: %s) and cannot rebuild its model: %s",
	    k->topic, k->next, fetch_err, e2);
	mk_set_broken(k, why);
	seterr(err, errlen, "%s", why);
	return -1;
}

int mk_tail_rec(struct mk *k, const struct krec *r, char *err,
    size_t errlen)
{
	uint64_t before = k->tail->applied;
	int rc = replay_cb(k->tail, r, err, errlen);

	k->st.records += k->tail->applied - before;
	return rc;
}

int mk_tail_once(struct mk *k, int max_wait_ms, char *err, size_t errlen)
{
	return tail_once(k, max_wait_ms, err, errlen);
}

/* The REPLY frame for the request being handled, appended to pend. */
int mk_pend_reply(struct mk *k, int16_t error, const char *msg,
    char *err, size_t errlen)
{
	size_t len;
	uint8_t *f = mk_reply_frame(k, error, msg, &len);

	if (f == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	kw_raw(&k->pend, f, len);
	free(f);
	if (k->pend.err) {
		seterr(err, errlen, "the reply does not fit in one batch of "
		    "topic %s", k->topic);
		return -1;
	}
	k->npend++;
	return 0;
}

/* The writer's sync; while a request is handled its REPLY (error, msg)
 * joins the first batch written. */
static int writer_sync(struct mk *k, int16_t error, const char *msg,
    char *err, size_t errlen)
{
	int64_t t0, base;
	size_t bytes = k->pend.len;
	uint32_t n = k->npend, reply = 0;
	int rc, carry = (k->cur_active || k->reply_armed) && !k->cur_replied;

	if (n == 0 && !carry)
		return 0;
	/* Handling a follower's request: its REPLY goes into this batch. */
	if (carry) {
		if (mk_pend_reply(k, error, msg, err, errlen) != 0) {
			kafka_discard(&k->base);
			return -1;
		}
		reply = 1;
	}
	t0 = clock_mono_ms();
	rc = mk_produce_frames(k, k->pend.buf, k->pend.len, n + reply, 0, &base,
	    err, errlen);
	kafka_discard(&k->base);
	if (rc != 0)
		return -1;
	if (reply) {
		k->cur_replied = 1;
		if (k->cur_off + 1 > k->req_next)
			k->req_next = k->cur_off + 1;
	}
	k->st.last_fsync_us = (clock_mono_ms() - t0) * 1000;
	k->st.syncs++;
	k->st.records += n;
	k->st.records_since_snapshot += n;
	k->st.bytes_since_snapshot += bytes;
	k->st.bytes += bytes;
	return 0;
}

/* The request producer (an idempotent one of our own), ready. */
int mk_req_ready(struct mk *k, char *err, size_t errlen)
{
	struct mk *q = k->req;

	if (q->broken) {
		/* An earlier request's outcome was unknown or its sequence
		 * refused: start over with a fresh producer id. */
		q->broken = 0;
		q->st.broken = 0;
		q->pid = -1;
	}
	if (q->conn == NULL && mk_ensure_topic(q, err, errlen) != 0)
		return -1;
	if (q->pid < 0 && init_producer(q, err, errlen) != 0)
		return -1;
	return 0;
}

/*
 * A follower's sync: one request record with the pending frames, then
 * the tail (applying everything in log order) until the writer's REPLY.
 */
static int follower_sync(struct mk *k, char *err, size_t errlen)
{
	uint8_t *v;
	size_t vlen;
	uint32_t n = k->npend;
	int64_t base, t0 = clock_mono_ms(), deadline;
	uint64_t id;
	char e2[768] = "";
	int rc;

	if (mk_req_ready(k, err, errlen) != 0) {
		kafka_discard(&k->base);
		return -1;
	}
	id = ++k->req_seq;
	v = mlog_kafka_encode_request(id, k->generation, k->member_id,
	    k->instance_id, k->pend.buf, k->pend.len, &vlen, err, errlen);
	kafka_discard(&k->base);
	if (v == NULL)
		return -1;
	rc = mk_produce_value(k->req, k->instance_id, v, vlen, &base, err,
	    errlen);
	free(v);
	if (rc != 0) {
		if (k->req->broken) {
			/* Sent or not: unknown. */
			seterr(e2, sizeof(e2), "%s", err);
			seterr(err, errlen, "outcome unknown: request %" PRIu64
			    " to the writer of topic %s: %s; the change is "
			    "applied here if the writer accepted it", id,
			    k->topic, e2);
			k->base.sync_error = KERR_REQUEST_TIMED_OUT;
		}
		return -1;
	}
	k->waiting = 1;
	k->wait_done = 0;
	k->wait_id = id;
	deadline = t0 + k->timeout_ms;
	while (!k->wait_done) {
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0 || k->broken)
			break;
		if (tail_once(k, (int)MIN(left, 500), e2, sizeof(e2)) != 0) {
			if (k->broken)
				break;
			mk_sleep_ms((int)MIN(MK_BACKOFF_MS, MAX(1, left)));
		}
	}
	k->waiting = 0;
	if (!k->wait_done) {
		seterr(err, errlen, "outcome unknown: no reply from the writer of "
		    "topic %s to request %" PRIu64 " (request topic %s offset %"
		    PRId64 ") within storage.kafka.timeout_ms (%d ms)%s%s; the "
		    "change is applied here if the writer accepts it later",
		    k->topic, id, k->req->topic, base, k->timeout_ms,
		    e2[0] ? ": " : "", e2);
		k->base.sync_error = KERR_REQUEST_TIMED_OUT;
		return -1;
	}
	if (k->wait_error != 0) {
		seterr(err, errlen, "%s", k->wait_msg[0] ? k->wait_msg :
		    kerr_name(k->wait_error));
		k->base.sync_error = k->wait_error;
		return -1;
	}
	k->st.last_fsync_us = (clock_mono_ms() - t0) * 1000;
	k->st.syncs++;
	(void)n;
	return 0;
}

static int kafka_sync(struct mlog *ml, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	int rc;

	mk_quiesce(k);          /* the thread's jobs first, in order */
	if (check_usable(k, err, errlen) != 0) {
		kafka_discard(ml);
		return -1;
	}
	if (k->writer)
		rc = writer_sync(k, 0, "", err, errlen);
	else if (k->npend == 0)
		rc = 0;
	else
		rc = follower_sync(k, err, errlen);
	mk_fire_role(k);
	return rc;
}

struct ksink {
	struct mlog_sink base;
	struct mk *k;
	struct kw buf;
	uint32_t n;
	int64_t begin;          /* offset of the MLOG_T_SNAPSHOT record */
	struct mk_snap *collect; /* non-NULL: batches kept, not produced */
	char err[768];
};

/* A snapshot's records in batches, read from the model on the loop and
 * written with mk_snap_write() there or on the log's thread. */
struct mk_snap {
	struct mk_snap_batch {
		uint8_t *buf;
		size_t len;
		uint32_t n;
	} *b;
	size_t nb;
	uint64_t records;       /* the dump's, without header and end */
	size_t bytes;
	int16_t epoch;          /* the writer's when it was read */
	int64_t req_next;       /* where the request topic resumes */
};

void mk_snap_free(struct mk_snap *sn)
{
	if (sn == NULL)
		return;
	for (size_t i = 0; i < sn->nb; i++)
		free(sn->b[i].buf);
	free(sn->b);
	free(sn);
}

static int ksink_flush(struct ksink *s)
{
	int64_t base;

	if (s->n == 0)
		return 0;
	if (s->collect != NULL) {
		struct mk_snap *sn = s->collect;
		struct mk_snap_batch *nb = realloc(sn->b, (sn->nb + 1) *
		    sizeof(*sn->b));
		uint8_t *copy = malloc(s->buf.len);

		if (nb != NULL)
			sn->b = nb;
		if (nb == NULL || copy == NULL) {
			free(copy);
			seterr(s->err, sizeof(s->err), "out of memory");
			return -1;
		}
		memcpy(copy, s->buf.buf, s->buf.len);
		sn->b[sn->nb++] = (struct mk_snap_batch){ .buf = copy,
		    .len = s->buf.len, .n = s->n };
		sn->bytes += s->buf.len;
	} else {
		if (mk_produce_frames(s->k, s->buf.buf, s->buf.len, s->n,
		    MK_PF_SNAPSHOT, &base, s->err, sizeof(s->err)) != 0)
			return -1;
		if (s->begin < 0)
			s->begin = base;
	}
	kw_reset(&s->buf);
	s->n = 0;
	return 0;
}

static int ksink_frame(struct ksink *s, uint16_t type, const void *p,
    size_t len)
{
	uint8_t hdr[MLOG_FRAME_HDR];

	if (len > s->k->base.opts.max_record) {
		seterr(s->err, sizeof(s->err), "snapshot record of type 0x%04x "
		    "is %zu bytes, over the %u-byte maximum", type, len,
		    s->k->base.opts.max_record);
		return -1;
	}
	/* Batches of about half the topic's limit; one big record alone. */
	if (s->n > 0 && s->buf.len + MLOG_FRAME_HDR + len > s->k->batch_max / 2 &&
	    ksink_flush(s) != 0)
		return -1;
	mlog_frame_header(hdr, type, p, (uint32_t)len);
	kw_raw(&s->buf, hdr, sizeof(hdr));
	if (len > 0)
		kw_raw(&s->buf, p, len);
	s->n++;
	return s->buf.err ? -1 : 0;
}

static int ksink_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	return ksink_frame((struct ksink *)sink, type, p, len);
}

/*
 * Moves the log start offset up to the newest snapshot (DeleteRecords),
 * so the topic holds one snapshot and the log after it.  Safe against a
 * newer writer: it trims only below a snapshot whose end marker was
 * acknowledged, so before any later claim, and a newer writer replays
 * from the newest complete snapshot, which is that one or a later one.
 * A failure costs only space: logged, the log is intact.
 */
static void trim_before(struct mk *k, int64_t off)
{
	struct kp_delete_records_request req;
	struct kp_delete_records_response resp;
	struct kp_delete_records_request_delete_records_topic t;
	struct kp_delete_records_request_delete_records_partition p;
	struct karena *a = karena_new(1 << 16);
	char err[512] = "out of memory";
	uint8_t *frame = NULL;
	int16_t e = -1;

	if (a == NULL || k->conn == NULL)
		goto out;
	kp_delete_records_request_init(&req);
	kp_delete_records_request_delete_records_topic_init(&t);
	kp_delete_records_request_delete_records_partition_init(&p);
	p.partition_index = 0;
	p.offset = off;
	t.name = kstr_c(k->topic);
	t.partitions = &p;
	t.partitions_n = 1;
	req.topics = &t;
	req.topics_n = 1;
	req.timeout_ms = k->timeout_ms;
	frame = mk_call(k->conn, KP_API_DELETE_RECORDS, 2, &req, &resp, a,
	    k->timeout_ms, err, sizeof(err));
	if (frame == NULL) {
		mk_drop_conn(k);
		goto out;
	}
	if (resp.topics_n == 1 && resp.topics[0].partitions_n == 1)
		e = resp.topics[0].partitions[0].error_code;
	if (e == 0) {
		log_debug("metadata log: topic %s: records before offset %" PRId64
		    " deleted (the newest snapshot starts there)", k->topic, off);
		free(frame);
		karena_free(a);
		return;
	}
	seterr(err, sizeof(err), "%s", e < 0 ? "no answer for the partition" :
	    kerr_name(e));
out:
	log_warnx("metadata log: topic %s: cannot delete the records before "
	    "the snapshot at offset %" PRId64 " (they only take space; the next "
	    "snapshot tries again): %s", k->topic, off, err);
	free(frame);
	karena_free(a);
}

/* The model's records (dump), in batches: NULL with err. */
struct mk_snap *mk_snap_collect(struct mk *k, mlog_dump_fn dump, void *arg,
    char *err, size_t errlen)
{
	struct mk_snap *sn = calloc(1, sizeof(*sn));
	struct ksink s = { .base = { .put = ksink_put }, .k = k, .begin = -1,
	    .collect = sn };
	int rc = -1;

	if (sn == NULL) {
		seterr(err, errlen, "topic %s: snapshot not written: out of "
		    "memory", k->topic);
		return NULL;
	}
	sn->epoch = k->epoch;
	sn->req_next = k->req_next;
	kw_init(&s.buf, k->batch_max + MLOG_FRAME_HDR);
	if (dump(arg, &s.base) == 0 && !s.base.failed && ksink_flush(&s) == 0)
		rc = 0;
	sn->records = s.base.records;
	kw_fini(&s.buf);
	if (rc != 0) {
		seterr(err, errlen, "topic %s: snapshot not written: %s", k->topic,
		    s.err[0] ? s.err : "the state could not be written out");
		mk_snap_free(sn);
		return NULL;
	}
	return sn;
}

/* Writes a collected snapshot with the producer (on the loop after
 * mk_quiesce(), or as a job of the log's thread): its MLOG_T_SNAPSHOT
 * record alone (the batch's offset names the snapshot), the model's
 * batches, the end naming both; then trims the records it replaces. */
int mk_snap_write(struct mk *k, const struct mk_snap *sn, int64_t *begin,
    char *err, size_t errlen)
{
	struct ksink s = { .base = { .put = ksink_put }, .k = k, .begin = -1 };
	uint8_t hdr[16], end[SNAPEND_LEN];
	int64_t base;
	int rc = -1;

	kw_init(&s.buf, k->batch_max + MLOG_FRAME_HDR);
	be32_store(hdr, 0x4d524c47u);   /* "MRLG" */
	be16_store(hdr + 4, 2);
	be16_store(hdr + 6, (uint16_t)sn->epoch);
	/* Version 2: where the request topic resumes, as the REPLYs the
	 * snapshot replaces said. */
	be64_store(hdr + 8, (uint64_t)sn->req_next);
	if (ksink_frame(&s, MLOG_T_SNAPSHOT, hdr, sizeof(hdr)) != 0 ||
	    ksink_flush(&s) != 0)
		goto out;
	for (size_t i = 0; i < sn->nb; i++)
		if (mk_produce_frames(k, sn->b[i].buf, sn->b[i].len, sn->b[i].n,
		    MK_PF_SNAPSHOT, &base, s.err, sizeof(s.err)) != 0)
			goto out;
	be64_store(end, sn->records);
	be64_store(end + 8, (uint64_t)s.begin);
	if (ksink_frame(&s, MLOG_T_SNAPEND, end, sizeof(end)) != 0 ||
	    ksink_flush(&s) != 0)
		goto out;
	*begin = s.begin;
	/* With followers (a request handler is installed: cluster mode)
	 * the records before the PREVIOUS snapshot go, so a follower has a
	 * whole snapshot interval to read what this one replaces; alone, the
	 * records before this one go. */
	if (k->req_fn == NULL)
		trim_before(k, s.begin);
	else if (k->prev_snap >= 0)
		trim_before(k, k->prev_snap);
	k->prev_snap = s.begin;
	rc = 0;
out:
	if (rc != 0)
		seterr(err, errlen, "topic %s: snapshot not written: %s", k->topic,
		    s.err[0] ? s.err : "the state could not be written out");
	kw_fini(&s.buf);
	return rc;
}

/* A snapshot is in the log (on the loop). */
void mk_snap_written(struct mk *k, const struct mk_snap *sn, int64_t begin)
{
	k->st.records_since_snapshot = 0;
	k->st.bytes_since_snapshot = 0;
	k->st.snapshot_wall_ms = clock_wall_ms();
	k->st.compactions++;
	log_info("metadata log: topic %s: snapshot of %" PRIu64 " records at "
	    "offset %" PRId64, k->topic, sn->records, begin);
}

static int kafka_compact(struct mlog *ml, mlog_dump_fn dump, void *arg,
    char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct mk_snap *sn;
	int64_t begin;
	int rc = -1;

	mk_quiesce(k);
	if (!k->writer)
		return 0;       /* a follower's model is the writer's */
	if (check_usable(k, err, errlen) != 0 || kafka_sync(ml, err, errlen) != 0)
		return -1;
	if (k->st.records_since_snapshot == 0 && k->st.snapshot_wall_ms >= 0)
		return 0;
	if ((sn = mk_snap_collect(k, dump, arg, err, errlen)) != NULL &&
	    mk_snap_write(k, sn, &begin, err, errlen) == 0) {
		mk_snap_written(k, sn, begin);
		rc = 0;
	}
	mk_snap_free(sn);
	mk_fire_role(k);           /* a snapshot may meet the fence too */
	return rc;
}

/* ---- roles: follower tail, promotion, the writer's requests ----------- */

int mlog_kafka_is_writer(const struct mlog *ml)
{
	return ((const struct mk *)ml)->writer;
}

void mlog_kafka_set_identity(struct mlog *ml, const char *instance_id,
    const char *member_id, int32_t generation)
{
	struct mk *k = (struct mk *)ml;
	char *i = strdup(instance_id != NULL ? instance_id : "");
	char *m = strdup(member_id != NULL ? member_id : "");

	if (i == NULL || m == NULL) {
		free(i);
		free(m);
		return;         /* keeps the previous identity */
	}
	if (k->generation != generation || k->member_id == NULL ||
	    strcmp(k->member_id, m) != 0)
		k->identity_ms = clock_mono_ms();
	free(k->instance_id);
	free(k->member_id);
	k->instance_id = i;
	k->member_id = m;
	k->generation = generation;
}

void mlog_kafka_set_request_handler(struct mlog *ml,
    mlog_kafka_request_fn fn, void *arg)
{
	struct mk *k = (struct mk *)ml;

	k->req_fn = fn;
	k->req_arg = arg;
}

void mlog_kafka_set_role_hook(struct mlog *ml,
    void (*fn)(void *arg, int is_writer, const char *why), void *arg)
{
	struct mk *k = (struct mk *)ml;

	k->role_fn = fn;
	k->role_arg = arg;
}

/* No promotion in progress any more (its callback is the caller's). */
static void promo_clear(struct mk *k)
{
	k->promo = MK_PROMO_NONE;
	k->promo_cb = NULL;
	k->promo_arg = NULL;
}

void mlog_kafka_demote(struct mlog *ml, const char *why)
{
	struct mk *k = (struct mk *)ml;

	if (k->promo != MK_PROMO_NONE) {
		/* Cancelled: a claim made meanwhile is ignored when it
		 * comes back (promo_id), no callback. */
		promo_clear(k);
		k->promo_id++;
	}
	if (!k->writer)
		return;       /* nothing a quiesce could make it */
	mk_quiesce(k);
	if (!k->writer)
		return;
	kafka_discard(ml);
	become_follower(k, why != NULL ? why : "demoted");
	mk_fire_role(k);
}

/*
 * The network half of a promotion: a fresh producer epoch on the
 * transactional id (fencing the writer before), the claim record, and the
 * log end after it.  Touches the producer state, not the read position:
 * the asynchronous form runs it on the log's thread while the loop may
 * still apply the tail's last Fetch.
 */
int mk_promote_claim(struct mk *k, int64_t *claim_off, int64_t *end,
    char *err, size_t errlen)
{
	if (init_producer(k, err, errlen) != 0 ||
	    claim(k, claim_off, err, errlen) != 0)
		return -1;
	return mk_list_offset(k, -1, end, err, errlen);
}

/*
 * The switch to the writer's role, once the tail has applied every record
 * up to the log end found after our claim, with the log's thread idle:
 * the newest claim read must be ours, else someone claimed after us.
 */
int mk_promote_finish(struct mk *k, int64_t claim_off, char *err,
    size_t errlen)
{
	struct mk_tail *rp = k->tail;

	if (rp->owner_pid != k->pid || rp->owner_epoch != k->epoch) {
		seterr(err, errlen, "metadata log fenced: producer %" PRId64
		    " epoch %d claimed topic %s after us (producer %" PRId64
		    " epoch %d) while we were promoting", rp->owner_pid,
		    rp->owner_epoch, k->topic, k->pid, k->epoch);
		return -1;
	}
	/* What a follower appended and did not hand to the log is dropped,
	 * as a demotion drops the writer's. */
	kafka_discard(&k->base);
	k->writer = 1;
	k->base.applies_on_sync = 0;
	mk_rq_drop(k);
	k->foreign = 0;
	mk_async_promoted(k);
	/* This instance's requests still waiting for a REPLY were answered
	 * by no writer before our claim (the log is read up to it), and only
	 * we write after it: they go again as the writer's own groups
	 * (MLOG_E_RESEND), and the handler refuses them when it reads them. */
	mk_async_void_waiting(k);
	k->role_pending = 1;
	seterr(k->role_why, sizeof(k->role_why), "promoted: claimed topic %s "
	    "at offset %" PRId64 " as producer id %" PRId64 " epoch %d",
	    k->topic, claim_off, k->pid, k->epoch);
	mk_fire_role(k);
	return 0;
}

static int promote_check(struct mk *k, char *err, size_t errlen)
{
	if (!k->base.opened || k->tail == NULL) {
		seterr(err, errlen, "metadata log topic %s is not open", k->topic);
		return -1;
	}
	return check_usable(k, err, errlen);
}

int mlog_kafka_promote(struct mlog *ml, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	int64_t claim_off, end;

	mk_quiesce(k);
	if (k->writer)
		return 0;
	if (k->promo != MK_PROMO_NONE) {
		seterr(err, errlen, "a promotion is in progress");
		return -1;
	}
	if (promote_check(k, err, errlen) != 0)
		return -1;
	kafka_discard(ml);
	if (mk_promote_claim(k, &claim_off, &end, err, errlen) != 0)
		return -1;
	log_info("metadata log: promoting: claimed topic %s at offset %" PRId64
	    " as producer id %" PRId64 " epoch %d", k->topic, claim_off, k->pid,
	    k->epoch);
	while (k->next < end) {
		int64_t before = k->next;

		if (tail_once(k, 0, err, errlen) != 0)
			return -1;
		if (k->next == before) {
			seterr(err, errlen, "topic %s: no record readable at "
			    "offset %" PRId64 " (log end %" PRId64 ")", k->topic,
			    k->next, end);
			return -1;
		}
	}
	return mk_promote_finish(k, claim_off, err, errlen);
}

int mlog_kafka_promote_async(struct mlog *ml, mlog_kafka_promoted_fn cb,
    void *arg, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;

	if (k->writer)
		return 1;
	if (k->promo != MK_PROMO_NONE) {
		seterr(err, errlen, "a promotion is in progress");
		return -1;
	}
	if (ml->base == NULL)
		return mlog_kafka_promote(ml, err, errlen) == 0 ? 1 : -1;
	if (promote_check(k, err, errlen) != 0)
		return -1;
	k->promo = MK_PROMO_CLAIM;
	k->promo_id++;
	k->promo_cb = cb;
	k->promo_arg = arg;
	if (mk_async_promote(k, err, errlen) != 0) {
		k->promo = MK_PROMO_NONE;
		return -1;
	}
	return 0;
}

int mlog_kafka_promoting(const struct mlog *ml)
{
	return ((const struct mk *)ml)->promo != MK_PROMO_NONE;
}

/* Ends the asynchronous promotion: its callback, with the state cleared
 * first (the callback may start another). */
static void promo_end(struct mk *k, int rc, const char *why)
{
	mlog_kafka_promoted_fn cb = k->promo_cb;
	void *arg = k->promo_arg;

	promo_clear(k);
	if (rc != 0)
		log_warnx("metadata log: promotion failed: %s", why);
	if (cb != NULL)
		cb(arg, rc, why);
}

/* Called by the async module: the claim is made (the job's result), or
 * the tail moved, or jobs were collected. */
void mk_promo_claimed(struct mk *k, uint64_t id, int rc, int64_t claim_off,
    int64_t end, const char *why)
{
	if (k->promo != MK_PROMO_CLAIM || id != k->promo_id) {
		/* Cancelled.  A claim it made is only a record in the log:
		 * the tail reads it, and the next promotion's claim is newer. */
		log_info("metadata log: a cancelled promotion ended (%s)",
		    rc == 0 ? "its claim was written" : why);
		return;
	}
	if (rc != 0) {
		promo_end(k, -1, why);
		return;
	}
	log_info("metadata log: promoting: claimed topic %s at offset %" PRId64
	    " as producer id %" PRId64 " epoch %d; reading up to offset %"
	    PRId64, k->topic, claim_off, k->pid, k->epoch, end);
	k->promo = MK_PROMO_CATCHUP;
	k->promo_claim = claim_off;
	k->promo_end = end;
	k->promo_seen = -1;
	mk_promo_step(k);
}

void mk_promo_step(struct mk *k)
{
	char err[1024];

	if (k->promo != MK_PROMO_CATCHUP || mk_async_fetching(k))
		return;
	if (k->broken) {
		promo_end(k, -1, k->broken_why);
		return;
	}
	if (k->next < k->promo_end) {
		/* The tail's last Fetch (ours or the follower's poll's) is
		 * in: an error, or no progress, ends it; else the next. */
		if (k->promo_seen >= 0 && mk_async_tail_err(k)[0] != '\0') {
			promo_end(k, -1, mk_async_tail_err(k));
			return;
		}
		if (k->promo_seen == k->next) {
			seterr(err, sizeof(err), "topic %s: no record readable at "
			    "offset %" PRId64 " (log end %" PRId64 ")", k->topic,
			    k->next, k->promo_end);
			promo_end(k, -1, err);
			return;
		}
		k->promo_seen = k->next;
		mk_async_fetch(k);
		return;
	}
	/* Everything up to the end is applied: the role changes once the
	 * follower's jobs still out (its requests) are collected. */
	if (!mk_async_idle(k))
		return;
	if (mk_promote_finish(k, k->promo_claim, err, sizeof(err)) != 0) {
		promo_end(k, -1, err);
		return;
	}
	promo_end(k, 0, "");
}

/* Writes the REPLY alone (a refusal, or an acceptance without records). */
static int reply_alone(struct mk *k, int16_t error, const char *msg,
    char *err, size_t errlen)
{
	kafka_discard(&k->base);
	k->cur_active = 1;
	k->cur_replied = 0;
	return writer_sync(k, error, msg, err, errlen);
}

struct frame_list {
	struct mlog_rec *recs;
	size_t n;
	const char *file;
	uint64_t base;
};

static int collect_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	struct frame_list *fl = arg;

	fl->recs[fl->n++] = (struct mlog_rec){ .type = type, .len = len,
	    .p = p, .off = fl->base, .file = fl->file, .live = 1 };
	(void)off;
	return 0;
}

/* Forgets the request being handled (not its place in the topic). */
static void cur_clear(struct mk *k)
{
	free(k->cur_inst);
	free(k->cur_mem);
	free(k->cur_recs);
	k->cur_inst = k->cur_mem = NULL;
	k->cur_recs = NULL;
	k->cur_instance = NULL;
	k->cur_active = 0;
	k->reply_armed = 0;
}

static char *dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s != NULL) {
		if (n > 0)
			memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/*
 * Hands one request (record r of the request topic) to the handler.
 * 0 with *code: 0 accepted (written by the handler), else refused with
 * why; 1: the handler answers later (mlog_kafka_request_done()); -1 out
 * of memory.  k->cur_* describe the request until cur_clear().
 */
static int decide(struct mk *k, const struct krec *r, int16_t *code,
    char *why, size_t whylen)
{
	struct mlog_kafka_req q;
	struct mlog_scan_result res;
	struct frame_list fl = { 0 };
	char e[512];
	int rc;

	cur_clear(k);
	k->cur_replied = 0;
	k->cur_off = r->offset;
	why[0] = '\0';
	if (mlog_kafka_decode_request(r->p, r->len, k->base.opts.max_record,
	    &q, e, sizeof(e)) != 0) {
		/* Answer whoever the key or the header names. */
		k->cur_inst = q.instance_id != NULL ?
		    dup_n(q.instance_id, q.instance_len) :
		    dup_n(r->key != NULL ? (const char *)r->key : "",
		    r->key != NULL ? r->key_len : 0);
		if (k->cur_inst == NULL)
			return -1;
		k->cur_instance = k->cur_inst;
		k->cur_id = q.id;
		seterr(why, whylen, "request at offset %" PRId64 " of topic %s "
		    "from instance \"%s\" is malformed: %s", r->offset,
		    k->req->topic, k->cur_inst, e);
		log_warnx("metadata log: %s", why);
		*code = KERR_INVALID_REQUEST;
		return 0;
	}
	k->cur_inst = dup_n(q.instance_id, q.instance_len);
	k->cur_mem = dup_n(q.member_id, q.member_len);
	fl.recs = calloc(q.nframes + 1, sizeof(*fl.recs));
	k->cur_recs = fl.recs;
	if (k->cur_inst == NULL || k->cur_mem == NULL || fl.recs == NULL)
		return -1;
	k->cur_instance = k->cur_inst;
	k->cur_id = q.id;
	if (q.id <= k->void_upto && k->instance_id != NULL &&
	    strcmp(k->cur_inst, k->instance_id) == 0) {
		/* Ours, sent before we became the writer: its records went
		 * again as our own group. */
		seterr(why, whylen, "request %" PRIu64 " of instance %s was "
		    "written again by that instance as the metadata writer",
		    q.id, k->cur_inst);
		*code = MLOG_E_RESEND;
		return 0;
	}
	fl.file = k->req->topic;
	fl.base = (uint64_t)r->offset;
	mlog_scan(q.frames, q.frames_len, k->base.opts.max_record,
	    collect_frame, &fl, &res);
	if (k->req_fn == NULL) {
		*code = KERR_NOT_CONTROLLER;
		seterr(why, whylen, "the writer has no request handler");
		return 0;
	}
	/* A sync the handler makes now carries the REPLY (writer_sync()). */
	k->cur_active = 1;
	k->rq_in_handler = 1;
	rc = k->req_fn(k->req_arg, k->cur_inst, k->cur_mem, q.generation,
	    fl.recs, fl.n, why, whylen);
	k->rq_in_handler = 0;
	k->cur_active = 0;
	if (rc == MLOG_KAFKA_PENDING)
		return 1;
	*code = (int16_t)rc;
	if (*code != 0 && why[0] == '\0')
		seterr(why, whylen, "refused by the writer: %s", kerr_name(*code));
	return 0;
}

struct req_ctx {
	struct mk *k;
	int handled;
	int stop;
	char err[768];
};

/* Without an event base: each request decided and answered here. */
static int request_cb(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct req_ctx *rc = arg;
	struct mk *k = rc->k;
	char why[MLOG_KAFKA_REPLY_MSG_MAX];
	int16_t code = 0;
	int d;

	(void)err;
	(void)errlen;
	if (!k->writer || rc->stop)
		return 1;
	k->rq_state = MK_RQ_HANDLER;
	d = decide(k, r, &code, why, sizeof(why));
	k->rq_state = MK_RQ_IDLE;
	if (d < 0) {
		seterr(rc->err, sizeof(rc->err), "out of memory");
		cur_clear(k);
		rc->stop = 1;
		return 1;
	}
	if (d == 1) {
		/* Only with an event base may a handler answer later. */
		code = KERR_UNKNOWN_SERVER_ERROR;
		seterr(why, sizeof(why), "internal error: the handler of a "
		    "writer without an event loop cannot answer later");
	}
	if (!k->writer) {
		/* Demoted (fenced) while handling it: the new writer answers. */
		cur_clear(k);
		rc->stop = 1;
		return 1;
	}
	if (!k->cur_replied && reply_alone(k, code, why, rc->err,
	    sizeof(rc->err)) != 0) {
		cur_clear(k);
		rc->stop = 1;
		return 1;
	}
	if (k->cur_off + 1 > k->req_next)
		k->req_next = k->cur_off + 1;
	cur_clear(k);
	rc->handled++;
	return 0;
}

/* The writer without an event base: every request not yet answered, in
 * order.  Idle, one Fetch from the first unanswered offset. */
static int handle_requests(struct mk *k, char *err, size_t errlen)
{
	struct mk *q = k->req;
	struct req_ctx rc = { .k = k };
	int64_t o = k->req_next, start;
	int restarted = 0;

	if (q->conn == NULL && mk_ensure_topic(q, err, errlen) != 0)
		return -1;
	if (o < 0) {
		/* No request answered yet in this log: from the start. */
		if (mk_list_offset(q, -2, &o, err, errlen) != 0) {
			mk_drop_conn(q);
			return -1;
		}
	}
	while (k->writer && !rc.stop) {
		int64_t next, hw;
		int r = mk_fetch(q, o, INT64_MAX, 0, request_cb, &rc, &next, &hw,
		    err, errlen);

		if (rc.stop)
			break;
		if (r == -2 && !restarted) {
			/* Below the start: expired unanswered (retention). */
			restarted = 1;
			if (mk_list_offset(q, -2, &start, err, errlen) != 0)
				return -1;
			if (start > o)
				log_warnx("metadata log: requests %" PRId64 "..%"
				    PRId64 " of topic %s expired unanswered "
				    "(retention)", o, start - 1, q->topic);
			o = start;
			if (start > k->req_next)
				k->req_next = start;
			continue;
		}
		if (r != 0)
			return -1;
		if (next == o || next >= hw)
			break;
		o = next;
	}
	if (rc.stop && rc.err[0] != '\0') {
		seterr(err, errlen, "%s", rc.err);
		return -1;
	}
	return rc.handled;
}

/* ---- the writer's requests off the loop (an event base) ----------------- */

uint8_t *mk_reply_frame(struct mk *k, int16_t error, const char *msg,
    size_t *len)
{
	uint8_t *p, *f;
	size_t plen;

	p = mlog_kafka_encode_reply(k->cur_instance, k->cur_id, k->cur_off,
	    error, msg, &plen);
	if (p == NULL)
		return NULL;
	if ((f = malloc(MLOG_FRAME_HDR + plen)) != NULL) {
		mlog_frame_header(f, MLOG_T_REPLY, p, (uint32_t)plen);
		memcpy(f + MLOG_FRAME_HDR, p, plen);
		*len = MLOG_FRAME_HDR + plen;
	}
	free(p);
	return f;
}

void mk_rq_next(struct mk *k)
{
	if (k->cur_off + 1 > k->req_next)
		k->req_next = k->cur_off + 1;
	cur_clear(k);
	k->rq_state = MK_RQ_IDLE;
	k->rq_answered++;
}

void mk_rq_drop(struct mk *k)
{
	cur_clear(k);
	k->rq_state = MK_RQ_IDLE;
	mk_async_rq_clear(k);
}

/* The handler decided (code, why): the REPLY is in the log already (it
 * joined the records' group), or it goes alone now. */
static void answer(struct mk *k, int16_t code, const char *why)
{
	char err[1024];

	if (!k->writer) {
		mk_rq_drop(k);         /* the new writer answers */
		return;
	}
	if (k->cur_replied) {
		mk_rq_next(k);
		return;
	}
	if (mk_async_reply_alone(k, code, why, err, sizeof(err)) != 0) {
		log_warnx("metadata log: cannot answer request at offset %"
		    PRId64 " of topic %s: %s; reading it again later",
		    k->cur_off, k->req->topic, err);
		mk_rq_drop(k);
		return;
	}
	k->rq_state = MK_RQ_REPLY;
}

void mk_rq_pump(struct mk *k)
{
	char why[MLOG_KAFKA_REPLY_MSG_MAX];
	struct krec r;
	int16_t code = 0;
	int d;

	while (k->writer && !k->broken && k->rq_state == MK_RQ_IDLE &&
	    mk_async_rq_take(k, &r)) {
		k->rq_state = MK_RQ_HANDLER;
		k->rq_code = 0;
		k->rq_why[0] = '\0';
		d = decide(k, &r, &code, why, sizeof(why));
		if (d < 0) {
			log_warnx("metadata log: out of memory handling request "
			    "at offset %" PRId64 " of topic %s; reading it again "
			    "later", r.offset, k->req->topic);
			mk_rq_drop(k);
			return;
		}
		if (d == 1) {
			if (k->rq_state != MK_RQ_ANSWERED)
				return;        /* mlog_kafka_request_done() */
			code = k->rq_code;
			seterr(why, sizeof(why), "%s", k->rq_why);
		}
		answer(k, code, why);
	}
}

void mlog_kafka_request_done(struct mlog *ml, int code, const char *why)
{
	struct mk *k = (struct mk *)ml;

	if (k->rq_state != MK_RQ_HANDLER)
		return;                /* dropped meanwhile (demoted) */
	k->reply_armed = 0;
	if (why == NULL || why[0] == '\0')
		why = code != 0 ? kerr_name((int16_t)code) : "";
	if (k->rq_in_handler) {
		/* From inside the handler's call: mk_rq_pump() answers. */
		k->rq_state = MK_RQ_ANSWERED;
		k->rq_code = (int16_t)code;
		seterr(k->rq_why, sizeof(k->rq_why), "%s", why);
		return;
	}
	answer(k, (int16_t)code, why);
	mk_rq_pump(k);
}

void mlog_kafka_reply_arm(struct mlog *ml, int arm)
{
	struct mk *k = (struct mk *)ml;

	k->reply_armed = arm && k->rq_state == MK_RQ_HANDLER && k->writer;
}

int mlog_kafka_poll(struct mlog *ml, int max_wait_ms, char *err,
    size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	uint64_t before, rebuilds;
	int n = 0, rc = 0;

	if (!ml->opened || k->tail == NULL) {
		seterr(err, errlen, "metadata log topic %s is not open", k->topic);
		return -1;
	}
	if (k->broken) {
		seterr(err, errlen, "%s", k->broken_why);
		return -1;
	}
	rebuilds = k->rebuilds;
	if (!k->writer) {
		/* The follower's tail: a Fetch on the log's thread, its
		 * records applied here when it is back. */
		rc = mk_async_poll(k, &n, err, errlen);
		return rc != 0 ? -1 : n;
	}
	if (k->base.base != NULL) {
		/* Off the loop: the writer's look at its log and its Fetch of
		 * the requests are jobs of the log's thread, the requests are
		 * handed to the handler as they come, and it may answer
		 * later.  Only another writer's records in the log (a newer
		 * writer's claim) are read here, once the thread is idle. */
		uint64_t answered = k->rq_answered;

		rc = mk_async_writer_poll(k, err, errlen);
		if (rc == 0 && k->foreign && k->writer) {
			k->foreign = 0;
			mk_quiesce(k);
			before = k->tail->applied;
			if (tail_once(k, 0, err, errlen) != 0)
				rc = -1;
			n = (int)(k->tail->applied - (k->rebuilds == rebuilds ?
			    before : 0));
			k->st.records += (uint64_t)n;
		}
		n += (int)(k->rq_answered - answered);
		mk_fire_role(k);
		return rc != 0 ? -1 : n;
	}
	/* The writer's groups on the thread first: its reads below use the
	 * same connection (this round is skipped while they are out). */
	mk_async_collect(k);
	if (mk_async_busy(k))
		return 0;
	before = k->tail->applied;
	/* The writer reads the log too: a newer writer's claim demotes it
	 * even when it has nothing to write. */
	if (tail_once(k, k->writer ? 0 : max_wait_ms, err, errlen) != 0)
		rc = -1;
	/* A rebuild replaced the tail: everything it replayed counts. */
	n = (int)(k->tail->applied - (k->rebuilds == rebuilds ? before : 0));
	k->st.records += (uint64_t)n;
	if (rc == 0 && k->writer && k->req_fn != NULL) {
		int h = handle_requests(k, err, errlen);
		if (h < 0)
			rc = -1;
		else
			n += h;
	}
	mk_fire_role(k);
	return rc != 0 ? -1 : n;
}

/* ---- life cycle ------------------------------------------------------------ */

static void kafka_stats(const struct mlog *ml, struct mlog_stats *out)
{
	*out = ((const struct mk *)ml)->st;
}

static void kafka_free(struct mlog *ml)
{
	struct mk *k = (struct mk *)ml;

	mk_async_free(k);
	cur_clear(k);
	mk_drop_conn(k);
	if (k->req != NULL)
		kafka_free(&k->req->base);
	/* After every connection of both logs was handed back to it. */
	if (k->net_owner)
		mk_net_free(k->net);
	free(k->tail);
	free(k->instance_id);
	free(k->member_id);
	kw_fini(&k->pend);
	kcluster_config_fini(&k->kcc);
	for (size_t i = 0; i < k->nboot; i++)
		free(k->boot_host[i]);
	free(k->boot_host);
	free(k->boot_port);
	free(k->topic);
	free(k);
}

static const struct mlog_ops kafka_ops = {
	.name = "kafka",
	.open = kafka_open,
	.append = kafka_append,
	.sync = kafka_sync,
	.discard = kafka_discard,
	.compact = kafka_compact,
	.stats = kafka_stats,
	.free = kafka_free,
	.sync_async = mk_sync_async,
	.wait = mk_wait,
	.compact_async = mk_compact_async,
};

static int parse_bootstrap(struct mk *k, const char *list, char *err,
    size_t errlen)
{
	char *copy = strdup(list != NULL ? list : ""), *save = NULL, *tok;
	int rc = 0;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ", ", &save); tok != NULL && rc == 0;
	    tok = strtok_r(NULL, ", ", &save)) {
		char *colon = strrchr(tok, ':'), *end;
		long port;
		char **nh;
		int *np;

		port = colon != NULL ? strtol(colon + 1, &end, 10) : 0;
		if (colon == NULL || colon == tok || *end != '\0' || port <= 0 ||
		    port > 65535) {
			seterr(err, errlen, "bootstrap server \"%s\" is not "
			    "host:port", tok);
			rc = -1;
			break;
		}
		*colon = '\0';
		nh = realloc(k->boot_host, (k->nboot + 1) * sizeof(*nh));
		if (nh != NULL)
			k->boot_host = nh;
		np = realloc(k->boot_port, (k->nboot + 1) * sizeof(*np));
		if (np != NULL)
			k->boot_port = np;
		if (nh == NULL || np == NULL ||
		    (k->boot_host[k->nboot] = strdup(tok)) == NULL) {
			seterr(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		k->boot_port[k->nboot++] = (int)port;
	}
	free(copy);
	if (rc == 0 && k->nboot == 0) {
		seterr(err, errlen, "no bootstrap servers for the metadata log");
		rc = -1;
	}
	return rc;
}

static struct mk *mk_new(const struct mlog_opts *opts,
    const struct mlog_kafka_opts *ko, int is_req, char *err, size_t errlen)
{
	struct mk *k = calloc(1, sizeof(*k));
	char e2[512];

	if (k == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	k->base.ops = &kafka_ops;
	k->base.opts = *opts;
	if (k->base.opts.max_record == 0)
		k->base.opts.max_record = MLOG_MAX_RECORD_DEFAULT;
	k->base.opts.dir = NULL;
	kcluster_config_init(&k->kcc, "destination");
	k->st.last_fsync_us = -1;
	k->st.snapshot_wall_ms = -1;
	k->pid = -1;
	k->epoch = -1;
	k->leader_id = -1;
	k->want_rf = ko->replication_factor > 0 ? ko->replication_factor : 3;
	k->want_isr = ko->min_insync_replicas > 0 ? ko->min_insync_replicas : 2;
	k->timeout_ms = ko->timeout_ms > 0 ? ko->timeout_ms : 15000;
	k->require_empty = ko->require_empty;
	/* One record of the largest size plus room for the rest of a write. */
	k->batch_max = (size_t)k->base.opts.max_record + (1u << 20);
	kw_init(&k->pend, k->batch_max - 4096);
	k->topic = strdup(ko->topic != NULL && ko->topic[0] != '\0' ? ko->topic :
	    MLOG_KAFKA_TOPIC_DEFAULT);
	if (k->topic == NULL) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	k->is_req = is_req;
	k->req_next = -1;
	k->generation = -1;
	if (!is_req)
		seterr(k->txn_id, sizeof(k->txn_id), "mirrord-metadata-%s",
		    k->topic);
	if (parse_bootstrap(k, ko->bootstrap, err, errlen) != 0)
		goto fail;
	for (size_t i = 0; i < ko->nprops; i++) {
		int rc = kconn_config_set(&k->kcc.conn, ko->prop_names[i],
		    ko->prop_values[i], e2, sizeof(e2));
		if (rc < 0) {
			seterr(err, errlen, "destination.client: %s", e2);
			goto fail;
		}
	}
	if (kconn_config_prepare(&k->kcc.conn, e2, sizeof(e2)) != 0) {
		seterr(err, errlen, "destination.client: %s", e2);
		goto fail;
	}
	/* Every step is bounded by storage.kafka.timeout_ms, a connection's
	 * handshake too; the network thread's kcluster refreshes nothing on
	 * its own (the log asks the topic's Metadata itself). */
	k->kcc.conn.connect_timeout_ms = k->timeout_ms;
	k->kcc.conn.request_timeout_ms = k->timeout_ms;
	k->kcc.metadata_refresh_ms = 0;
	k->kcc.bootstrap = strdup(ko->bootstrap);
	if (k->kcc.bootstrap == NULL) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	return k;
fail:
	kafka_free(&k->base);
	return NULL;
}

struct mlog *mlog_kafka_new(const struct mlog_opts *opts,
    const struct mlog_kafka_opts *ko, char *err, size_t errlen)
{
	struct mlog_kafka_opts qo = *ko;
	char qt[512], host[256] = "localhost", id[320];
	struct mk *k = mk_new(opts, ko, 0, err, errlen);

	if (k == NULL)
		return NULL;
	k->open_follower = ko->follower;
	seterr(qt, sizeof(qt), "%s%s", k->topic, MLOG_KAFKA_REQ_SUFFIX);
	qo.topic = qt;
	if ((k->req = mk_new(opts, &qo, 1, err, errlen)) == NULL) {
		kafka_free(&k->base);
		return NULL;
	}
	/* One network thread (one kcluster) for both topics. */
	if ((k->net = mk_net_new(&k->kcc, err, errlen)) == NULL) {
		kafka_free(&k->base);
		return NULL;
	}
	k->net_owner = 1;
	k->req->net = k->net;
	/* Until mlog_kafka_set_identity(): this host and process. */
	(void)gethostname(host, sizeof(host) - 1);
	seterr(id, sizeof(id), "%s:%ld", host, (long)getpid());
	k->instance_id = strdup(id);
	k->member_id = strdup("");
	/* Request ids: unique across restarts of this instance too. */
	k->req_seq = (uint64_t)clock_wall_ms() << 16;
	if (k->instance_id == NULL || k->member_id == NULL) {
		seterr(err, errlen, "out of memory");
		kafka_free(&k->base);
		return NULL;
	}
	return &k->base;
}
