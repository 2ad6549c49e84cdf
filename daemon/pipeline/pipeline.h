/*
 * pipeline.h: the data plane, as the daemon (daemon/mirrord.c) and the
 * admin server (daemon/admin/admin.c) call it.
 *
 * The pipeline follows the mirror state model (lib/mstate) through its
 * change hooks: every partition in PREPARING or MIRRORING is copied from
 * its source leader to its destination leader batch by batch; PAUSING,
 * STOPPING and deleted mirrors are wound down and acknowledged through
 * mstate's setters (PAUSING -> PAUSED, STOPPING -> STOPPED with the last
 * mirrored offset and epoch).  Everything runs on the daemon's event loop.
 *
 * Design (daemon/pipeline/pipeline.c, pipeline/pcluster.c, pipeline/copy.c, pipeline/wire.c)
 * ------
 * Clusters.  One pcluster per mirror (the source) and one for the
 * destination: a control connection for Metadata (and InitProducerId on the
 * destination), one kconn per broker that leads something we copy, and a
 * topic -> leader cache.  NOT_LEADER, unknown topic, a closed connection or
 * a timeout ask for a coalesced, rate-limited Metadata refresh; the source
 * is also refreshed every mirror.metadata.refresh.interval.ms, which is
 * when include patterns, partition growth and deleted topics are noticed.
 *
 * Fetch.  At most one Fetch per source broker, carrying every partition it
 * leads that is copying and has buffer room (read_committed; in a fetch
 * session where the broker offers one, fsess.h).
 * Each batch is parsed (header only), its CRC-32C verified (a mismatch
 * fails the partition naming the offset, and is counted), control batches
 * and aborted transactional data are dropped exactly as a read_committed
 * consumer skips them (pipeline/txn.h: no cap on aborted producers), a batch
 * with offset holes is re-encoded contiguously, and the batch is queued.
 * Whatever is dropped leaves a gap that becomes a translation anchor
 * (lib/xlate rules), persisted through mstate before the next batch goes.
 * read_committed stops at the source's last stable offset: one that
 * stands still below the high watermark for pipeline.stuck_lso_warn_ms
 * (a transaction left open) is logged, described and exported.
 *
 * Produce.  Pipelined: up to pipeline.max_inflight_batches_per_partition
 * (default 5, the broker's idempotence window) batches of a partition in
 * flight, on one connection, which the broker reads and answers in order.
 * A request carries at most one batch per partition (Kafka refuses more
 * than one batch of a partition in a Produce, and the librdkafka mock
 * corrupts its offsets), so a destination broker gets up to 5 requests
 * per round, each with the next batch of every ready partition it leads.
 * Only brokers that check sequences get more than one batch of a partition
 * at a time: Produce v8+ (Kafka 2.4 and later) and a producer id; the mock
 * (Produce v7, no sequence checks) and the key set to 1 give stop-and-wait.
 * Each answer's base offset must be the batch's own destination offset.
 * Any answer other than success, or none (timeout, lost connection), halts
 * the partition's sending; the other batches in flight are answered (a
 * timeout is the request's alone: the connection and its other requests go
 * on, KCONN_F_KEEP_ON_TIMEOUT), then
 * it settles once (pipeline/copy.c): batches known not appended (leader
 * errors, and the OUT_OF_ORDER_SEQUENCE_NUMBER that follows a gap) are
 * sent again in order with the same sequences; an open outcome re-reads
 * the destination end (SYNC, which must be a boundary of the batches sent,
 * and the proof); a sequence error of the first failed batch changes the
 * identity; a refusal or another offset fails the partition.  A batch that
 * would record a new source leader epoch or a new identity (write-ahead
 * records that say everything below them is written) waits until nothing
 * is in flight, and one with translation anchors to record waits while
 * another batch with recorded anchors is in flight; a part-sending record
 * names the lowest unacknowledged offset.  Only BaseOffset (0, as Kafka 4
 * requires of clients), producer id/epoch/base sequence and the
 * transactional bit are rewritten; the CRC is carried over the rewritten
 * bytes (crc32c_fixup(), batches of 512 bytes and more) or recomputed, and
 * the records are copied byte for byte.  Each destination partition writes
 * under a producer identity of its own (InitProducerId, recorded in the
 * metadata log), and a batch's base sequence follows from the destination
 * offset it lands at, so a broker recognises a late copy of a batch from
 * before a crash or timeout (doc/design.md, "Producer identities").  With
 * MIRRORD_STRICT_PRODUCE every batch passes batch_validate_produce() (its
 * records not walked again when the intake's batch_has_holes() walked
 * them: BATCH_VP_RECORDS_WALKED; its CRC, verified at intake and carried,
 * not computed again: BATCH_VP_CRC_CARRIED).
 *
 * Destination topics.  A PREPARING partition whose destination topic is
 * missing gets it created (CreateTopics with the source's partition count
 * and its topic-level configs from DescribeConfigs, minus
 * mirror.topic.properties.exclude); a source that grew gets the destination
 * grown (CreatePartitions).  A destination without those APIs (the mock)
 * fails the partition with a message saying what to create.
 *
 * Exactly once.  The destination's log end is the truth.  A partition
 * starts, and restarts after any uncertain outcome (timeout, lost
 * connection, crash), in SYNC (after a settle delay, so that a Produce of
 * ours still in a broker's hands lands first): ListOffsets(latest) on the
 * destination leader gives D; the translation map turns D into the source
 * offset S to fetch from (identity without anchors; an empty destination
 * starts at 0 and learns the source log start from OFFSET_OUT_OF_RANGE,
 * anchoring the jump).  A Produce whose base offset is not the expected one, or a SYNC
 * after an uncertain Produce that finds an end other than "written" or
 * "not written", fails the partition naming both offsets.  Nothing is
 * re-sent unless the destination is known not to have it.
 *
 * States.  mstate owns them; the hook only marks work and wakes the loop.
 * The pipeline drives PREPARING -> MIRRORING (after SYNC), PAUSING ->
 * PAUSED and STOPPING -> STOPPED (once nothing is in flight), and FAILED ->
 * PREPARING (mirror.failed.retry.*: exponential backoff, full jitter).
 *
 * Memory.  Batch bytes held (queued, in flight to the destination, and
 * answered but not settled) are capped per partition and in total
 * (pipeline.max_inflight_bytes_*): a full partition is left out of the next
 * Fetch, so a slow destination slows fetching.  The total also counts the
 * batches kept after an uncertain Produce, the answers of the Fetches in
 * flight (reserved before they go, sized from what is left) and Produce
 * requests not yet written (pipeline/copy.c "Memory";
 * mirrord_memory_held_bytes{kind}).
 */
#ifndef MIRRORD_PIPELINE_H
#define MIRRORD_PIPELINE_H

#include <stdint.h>
#include <stddef.h>

struct event_base;
struct mstate;
struct mpart;
struct config;
struct metrics_std;
struct pipeline;
struct kcluster;

/* Creates the data plane; connects nothing yet.  cfg is borrowed (see
 * pipeline_set_config).  NULL with the reason in err. */
struct pipeline *pipeline_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct metrics_std *ms, char *err,
    size_t errlen);
/* Starts work for every partition the replayed state says to mirror. */
void pipeline_start(struct pipeline *pl);
/* A reloaded configuration (only reloadable keys differ). */
void pipeline_set_config(struct pipeline *pl, const struct config *cfg);
/*
 * Graceful stop: no new fetches; in-flight produces finish; then done(arg)
 * is called once from the loop.  The daemon bounds the wait with
 * shutdown.timeout_ms.
 */
void pipeline_shutdown(struct pipeline *pl, void (*done)(void *arg),
    void *arg);
void pipeline_free(struct pipeline *pl);

/* The destination's cluster id from its last Metadata answer, NULL while
 * unknown (admin.c: telling a mirror loop). */
const char *pipeline_destination_cluster_id(struct pipeline *pl);
/* For /readyz: 1 when the destination cluster answered recently, else 0
 * with the reason in why. */
int pipeline_destination_ready(struct pipeline *pl, char *why, size_t whylen);
/* Readiness: 0 with why while a partition is FAILED because a topic or
 * the source cluster is not the one mirrored (recreated, deleted at the
 * destination, another cluster id; pipeline/ident.c), else 1. */
int pipeline_identity_ready(struct pipeline *pl, char *why, size_t whylen);
/* Readiness: 0 with why while a partition is FAILED because its source log
 * lost records already mirrored (pipeline/epoch.c), else 1. */
int pipeline_divergence_ready(struct pipeline *pl, char *why, size_t whylen);
/* Readiness: 0 with why while a partition is FAILED because the destination
 * refuses mirrord's principal (Produce, InitProducerId, Metadata,
 * ListOffsets or Fetch answered an authorization error; retried until it
 * stops), else 1. */
int pipeline_write_access_ready(struct pipeline *pl, char *why,
    size_t whylen);
/* Live numbers for DescribeMirrors: the source high watermark and the
 * destination log end offset of the partition, -1 when unknown. */
void pipeline_partition_offsets(struct pipeline *pl, const struct mpart *p,
    int64_t *source_hwm, int64_t *dest_end);

/* (Added by the pipeline owner.)  Every live number of one partition, for
 * metrics and DescribeMirrors' lag; 0, or -1 if the pipeline does not know
 * the partition. */
struct pipeline_live {
	int64_t source_high_watermark;   /* -1 unknown */
	int64_t source_log_start;        /* -1 unknown */
	int64_t destination_end;         /* -1 unknown */
	int64_t lag;                     /* -1 unknown */
	int64_t last_batch_timestamp_ms; /* MaxTimestamp of the last copied batch, -1 */
	int64_t records;                 /* copied since start */
	int64_t bytes;
	int64_t batches;
	int64_t crc_failures;
	int64_t offset_holes;
	int64_t retries;
	int64_t last_stable_offset;      /* the source's, -1 unknown */
	int64_t lso_stuck_ms;            /* see pipeline_partition_warning, else 0 */
	int64_t divergences;             /* source logs found parted from the mirror */
	int64_t source_deleted;          /* source offsets deleted before they were copied */
	int64_t discarded_bytes;         /* batch bytes fetched, dropped before acknowledged */
	int64_t coalesced;               /* source batches merged into the one before
	                                  * (mirror.coalesce.max.bytes) */
};
int pipeline_partition_live(struct pipeline *pl, const struct mpart *p,
    struct pipeline_live *out);

/*
 * Why a partition that is copying makes no progress, for DescribeMirrors:
 * 1 with the reason in buf, else 0.  Today: the source's last stable
 * offset has stood still below its high watermark for at least
 * pipeline.stuck_lso_warn_ms (a transaction left open on the source holds
 * back every read_committed reader, mirrord included).
 */
int pipeline_partition_warning(struct pipeline *pl, const struct mpart *p,
    char *buf, size_t len);

/*
 * What mirrord knows of a partition it copies here, and since when
 * (pipeline/health.c): 0, or -1 when this instance does not copy it.
 *   source_offset_age_ms  how old live's source high watermark is (since
 *                         the source last answered for the partition),
 *                         -1 unknown; stale: unknown or above the stall
 *                         bound (pipeline.request_timeout_ms +
 *                         mirror.fetch.wait.max.ms)
 *   lag_ms                lag in time: 0 while the latest source answer
 *                         shows the destination caught up, else since the
 *                         last caught-up moment (or since the newest
 *                         copied record was written, when less), -1
 *   caught_up_ms          wall ms of the last caught-up moment, -1
 *   stalled               it cannot read its source or write its
 *                         destination now; reason says which, since when
 *                         and why (naming the cluster and the broker),
 *                         stalled_since_ms when it began (wall ms)
 */
struct pipeline_status {
	int64_t source_offset_age_ms;
	int stale;
	int64_t lag_ms;
	int64_t caught_up_ms;
	int stalled;
	int64_t stalled_since_ms;
	char reason[1200];
};
int pipeline_partition_status(struct pipeline *pl, const struct mpart *p,
    struct pipeline_status *out);

/* A mirror's partitions copied here, summed up (/mirrors, metrics,
 * readiness): -1 for an unknown mirror.  source_up 0 while a partition is
 * stalled by the source or its Metadata failed for the stall bound;
 * reason: the first trouble, in the words of pipeline_status; the ages
 * of the source's last good Metadata and Fetch answers (from the mirror's
 * start in this process before the first). */
struct pipeline_mirror_health {
	int source_up;
	size_t partitions, stalled, failed, paused, stopped, lag_unknown;
	int64_t max_lag, max_lag_ms;
	int64_t metadata_age_ms, fetch_age_ms;
	char reason[1200];
};
int pipeline_mirror_health(struct pipeline *pl, const char *mirror,
    struct pipeline_mirror_health *out);
/* Readiness: 0 with why while some mirror's source cannot be read. */
int pipeline_sources_ready(struct pipeline *pl, char *why, size_t whylen);

/* Totals since start, for logs, tests and the bench. */
struct pipeline_totals {
	int64_t records, bytes, batches, produces, fetches;
	int64_t queued_bytes;       /* buffered now */
	int64_t queued_bytes_peak;
	int64_t inflight_batches;   /* sent to the destination, not answered */
	int64_t partition_inflight_peak; /* most of one partition at once */
	int64_t produce_requests;   /* Produce requests sent to the destination */
	int64_t produce_req_batches; /* the batches they carried */
	int64_t broker_requests_peak; /* most Produce requests to one broker at once */
	int64_t discarded_bytes;    /* fetched batch bytes dropped unacknowledged */
	int64_t held_bytes;         /* record data held now, all kinds */
	int64_t held_bytes_peak;    /* most of it at once since the start */
};
void pipeline_totals(const struct pipeline *pl, struct pipeline_totals *out);

/*
 * Multi-instance mode (doc/ha.md, "Partition ownership").  Ownership of a
 * mirrored partition is its part-owner record (mpart->owner, lib/mstate):
 * with an instance id set, the pipeline copies only the partitions whose
 * owner is that id, and only the owner writes anything about a partition
 * (state acknowledgements PAUSING -> PAUSED and STOPPING -> STOPPED,
 * FAILED and its retries, anchors, producer identities, trims).  A
 * part-owner change applied to the model (also one read from the log's
 * tail) takes effect at once through the mstate hook:
 *   lost    the queue, the batch in flight and every request's bookkeeping
 *           are dropped WITHOUT writing any record; answers to requests
 *           already sent are ignored (a late Produce answer included);
 *   gained  the partition starts as after a restart: SYNC after the settle
 *           delay, the proof of the destination end (pipeline/prove.c knows
 *           every recorded identity), and the last recorded producer
 *           identity reused as it is (no new epoch): a late Produce of the
 *           deposed owner carries the same producer id, epoch and sequence
 *           as the new owner's copy of that batch, so the broker keeps one.
 * NULL (the default) is single mode: every partition is copied, as before.
 */
void pipeline_set_instance(struct pipeline *pl, const char *instance_id);
/* The destination's kcluster, which the data plane owns (created by
 * pipeline_new(), freed by pipeline_free()): the one client of the
 * destination, shared with daemon/cluster/cluster.c (the group, the status topic).
 * A borrower frees what it built on it (kgroup, cstatus) before
 * pipeline_free(), names the topics it needs with kcluster_add_topic()
 * (the data plane asks Metadata only for its own) and never sets the
 * metadata, connection, topics or statistics callbacks, which are the
 * data plane's.  NULL after the pipeline began freeing. */
struct kcluster *pipeline_destination_kcluster(struct pipeline *pl);

/* How often the destination's Metadata is asked again without a reason
 * (default 30 s); multi-instance mode asks every half session timeout, so
 * the writer sees a destination leader move (and moves the partition
 * beside its new leader) within the session timeout. */
void pipeline_set_destination_refresh_ms(struct pipeline *pl, int64_t ms);
/* The instance id set, NULL in single mode. */
const char *pipeline_instance(const struct pipeline *pl);
/*
 * Multi-instance mode: whether this instance is the metadata writer.  Only
 * the writer does a mirror's cluster-wide work: topic discovery through
 * patterns, partition growth in the model, the source cluster id, topic
 * config and ACL sync and the orphaned-ACL pass (every instance would
 * otherwise race to record the same change).  Per-partition work follows
 * ownership.  Single mode ignores it (its one instance does everything).
 */
void pipeline_set_controller(struct pipeline *pl, int is_writer);
/*
 * Multi-instance mode: this instance may write to the destination
 * partitions it owns until until_ms (monotonic, clock_mono_ms()): its group
 * membership's lease, or 0 while it is no proven member.  Past it, no
 * Produce is sent (what is in flight stays in flight) and no producer id
 * fetched; reading goes on, and the partitions show as stalled, why being
 * what stops them (used once until_ms is past; NULL keeps the last one).
 * A later time resumes at once.  Single mode never stops (the default).
 */
void pipeline_set_lease(struct pipeline *pl, int64_t until_ms,
    const char *why);
/* 1 while the lease runs (pipeline_set_lease()). */
int pipeline_lease_held(const struct pipeline *pl);
/* How many partitions this instance copies now (single mode: all of them;
 * also mirrord_cluster_owned_partitions). */
size_t pipeline_owned_partitions(const struct pipeline *pl);
/* The destination leader broker id of a mirrored topic's partition as the
 * last destination Metadata answer gave it, -1 unknown. */
int32_t pipeline_destination_leader(struct pipeline *pl, const char *topic,
    int32_t partition);
/* fn(arg) runs from the loop (never inside a response) after a destination
 * Metadata answer changed the leader of some mirrored partition (the first
 * answer counts as a change); the writer re-runs the assignment then. */
void pipeline_set_leader_hook(struct pipeline *pl, void (*fn)(void *arg),
    void *arg);

#endif
