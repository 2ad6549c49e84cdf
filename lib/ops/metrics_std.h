/*
 * metrics_std.h: every metric family mirrord exports, declared once.
 *
 * The table below decides names, types, labels, buckets and help text; the
 * daemon registers it with metrics_std_init() and reaches a family with
 * MSTD(ms, ID).  mirrord(8) lists these names and test/pkg/test_man.sh checks
 * that it lists all of them.
 *
 * Partition state is a Prometheus "state set": mirrord_partition_state has
 * one series per state (label "state"), 1 for the partition's current state
 * and 0 for the others, so `mirrord_partition_state{state="FAILED"} == 1`
 * selects failed partitions and `sum by (state)` counts them.  That is one
 * series per state per partition; large deployments turn every per-partition
 * family off with metrics.per_partition = false and use
 * mirrord_mirror_partitions{mirror,state} (a count per mirror) instead.
 *
 * Units are base units (seconds, bytes); counters end in _total.  The
 * "error" label of the cluster families holds a Kafka error name
 * (kerr_name()) or a transport failure ("TIMEOUT", "DISCONNECTED"); the
 * admin family uses "NONE" for success.  "cluster" is "source" or
 * "destination"; a destination connection shared by all mirrors uses
 * mirror="" (Prometheus treats an empty label as absent).
 */
#ifndef MIRRORD_METRICS_STD_H
#define MIRRORD_METRICS_STD_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"

/* Label sets: id, label names. */
#define MSTD_LABELSETS(X) \
	X(NONE) \
	X(PART, "mirror", "topic", "partition") \
	X(PART_STATE, "mirror", "topic", "partition", "state") \
	X(MIRROR_STATE, "mirror", "state") \
	X(MIRROR, "mirror") \
	X(MIRROR_ERROR, "mirror", "error") \
	X(MIRROR_CAUSE, "mirror", "cause") \
	X(MIRROR_REQUEST, "mirror", "request") \
	X(MIRROR_RESULT, "mirror", "result") \
	X(MIRROR_STEP, "mirror", "step") \
	X(CONN, "cluster", "mirror") \
	X(CONN_API, "cluster", "mirror", "api") \
	X(CONN_API_ERROR, "cluster", "mirror", "api", "error") \
	X(ADMIN_API_ERROR, "api", "error") \
	X(API_ERROR, "api", "error") \
	X(ADMIN_API_OPERATION, "api", "operation") \
	X(REASON, "reason") \
	X(KIND, "kind") \
	X(RESULT, "result") \
	X(ROLE, "role") \
	X(VERSION, "version")

/* Histogram bucket sets (upper bounds in seconds): id, bounds. */
#define MSTD_BUCKETSETS(X) \
	X(NONE) \
	X(REQUEST, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, \
	    0.25, 0.5, 1, 2.5, 5, 10, 30) \
	X(FSYNC, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, \
	    0.05, 0.1, 0.25, 0.5, 1, 2.5)

/*
 * id, name, type, label set, bucket set, per-partition (PP: turned off by
 * metrics.per_partition = false; NO: always on), help.
 */
#define MSTD_FAMILIES(X) \
	X(PARTITION_STATE, "mirrord_partition_state", GAUGE, PART_STATE, \
	    NONE, PP, "1 for the partition's current mirror state, 0 for the " \
	    "other states") \
	X(PARTITION_LAG_RECORDS, "mirrord_partition_lag_records", GAUGE, \
	    PART, NONE, PP, "Source high watermark minus destination end " \
	    "offset, in offsets") \
	X(PARTITION_LAG_SECONDS, "mirrord_partition_lag_seconds", GAUGE, \
	    PART, NONE, PP, "Lag in time: 0 while the source's latest answer " \
	    "shows the destination caught up, else seconds since the last " \
	    "moment it was known caught up (or, if less, since the newest " \
	    "record copied was written); it grows while the source cannot be " \
	    "read") \
	X(PARTITION_SOURCE_OFFSET_AGE, \
	    "mirrord_partition_source_offset_age_seconds", GAUGE, PART, NONE, \
	    PP, "How old the source high watermark mirrord knows for the " \
	    "partition is: seconds since the source last answered for it") \
	X(PARTITION_STALLED_SECONDS, "mirrord_partition_stalled_seconds", \
	    GAUGE, PART, NONE, PP, "Seconds since mirrord last could read the " \
	    "partition's source or write its destination, while it cannot " \
	    "(STALLED in kafka-mirrors --describe); 0 while it can") \
	X(PARTITION_LSO_STUCK_SECONDS, "mirrord_partition_lso_stuck_seconds", \
	    GAUGE, PART, NONE, PP, "How long the source's last stable offset " \
	    "has stood still below its high watermark (a transaction left " \
	    "open), once that is pipeline.stuck_lso_warn_ms or more; else 0") \
	X(PARTITION_SOURCE_HIGH_WATERMARK, \
	    "mirrord_partition_source_high_watermark", GAUGE, PART, NONE, PP, \
	    "Last high watermark the source reported for the partition") \
	X(PARTITION_DESTINATION_END_OFFSET, \
	    "mirrord_partition_destination_end_offset", GAUGE, PART, NONE, PP, \
	    "Log end offset of the partition on the destination") \
	X(PARTITION_RECORDS, "mirrord_partition_records_total", COUNTER, \
	    PART, NONE, PP, "Records copied to the destination") \
	X(PARTITION_BYTES, "mirrord_partition_bytes_total", COUNTER, PART, \
	    NONE, PP, "Record batch bytes copied to the destination") \
	X(PARTITION_BATCHES, "mirrord_partition_batches_total", COUNTER, \
	    PART, NONE, PP, "Record batches copied to the destination") \
	X(PARTITION_CRC_FAILURES, "mirrord_partition_crc_failures_total", \
	    COUNTER, PART, NONE, PP, "Source record batches whose CRC-32C " \
	    "did not match") \
	X(PARTITION_OFFSET_HOLES, "mirrord_partition_offset_holes_total", \
	    COUNTER, PART, NONE, PP, "Gaps between consecutive source " \
	    "batches (compaction or aborted transactions), copied as gaps") \
	X(PARTITION_COALESCED_BATCHES, \
	    "mirrord_partition_coalesced_batches_total", COUNTER, PART, NONE, \
	    PP, "Source record batches merged into the batch before them " \
	    "(mirror.coalesce.max.bytes)") \
	X(PARTITION_RETRIES, "mirrord_partition_retries_total", COUNTER, \
	    PART, NONE, PP, "Retried fetches or produces of the partition") \
	X(PARTITION_SOURCE_DIVERGENCES, \
	    "mirrord_partition_source_divergences_total", COUNTER, PART, NONE, \
	    PP, "Times the source log was found parted from what was mirrored " \
	    "(leader epochs: an unclean leader election lost mirrored records)") \
	X(PARTITION_DISCARDED_BYTES, \
	    "mirrord_partition_discarded_bytes_total", COUNTER, PART, NONE, \
	    PP, "Record batch bytes fetched from the source and dropped " \
	    "before the destination acknowledged them, to be fetched again " \
	    "(the partition's own uncertain or failed Produce, a re-read of " \
	    "the destination end, a failure, a pause)") \
	X(PARTITION_SOURCE_DELETED, \
	    "mirrord_partition_source_deleted_offsets_total", COUNTER, PART, \
	    NONE, PP, "Source offsets deleted (DeleteRecords or retention) " \
	    "before mirrord copied them, skipped with a translation anchor") \
	X(TOPIC_CONFIGS_APPLIED, "mirrord_topic_configs_applied_total", \
	    COUNTER, MIRROR, NONE, NO, "Topic configs set or deleted on the " \
	    "destination to follow the source's (IncrementalAlterConfigs)") \
	X(TOPIC_CONFIG_ERRORS, "mirrord_topic_config_errors_total", COUNTER, \
	    MIRROR_ERROR, NONE, NO, "Topics whose configs from the source the " \
	    "destination refused (or would not describe), by Kafka error name, " \
	    "counted each time (retried every mirror.metadata.refresh.interval.ms)") \
	X(ACL_BINDINGS_CREATED, "mirrord_acl_bindings_created_total", \
	    COUNTER, MIRROR_RESULT, NONE, NO, "ACL bindings mirrord created on " \
	    "the destination: result=\"synced\" copied from the source " \
	    "(mirror.acls.sync), result=\"read-only\" DENY WRITE of the " \
	    "read-only guard (mirror.topic.read.only)") \
	X(ACL_BINDINGS, "mirrord_acl_bindings", GAUGE, MIRROR_RESULT, NONE, \
	    NO, "ACL bindings on the destination that mirrord created and " \
	    "keeps in step, by the same result label (recorded in the metadata " \
	    "log), as of the mirror's last ACL round") \
	X(ACL_BINDINGS_DELETED, "mirrord_acl_bindings_deleted_total", \
	    COUNTER, MIRROR_RESULT, NONE, NO, "ACL bindings mirrord created and " \
	    "deleted again from the destination (gone from the source, or the " \
	    "read-only guard lifted), by the same result label") \
	X(ACL_SYNC_ERRORS, "mirrord_acl_sync_errors_total", COUNTER, \
	    MIRROR_ERROR, NONE, NO, "Refusals of the ACL sync and the read-only " \
	    "guard (DescribeAcls, CreateAcls, DeleteAcls on either cluster), by " \
	    "Kafka error name, counted each time") \
	X(MIRROR_PARTITIONS, "mirrord_mirror_partitions", GAUGE, \
	    MIRROR_STATE, NONE, NO, "Partitions of the mirror in each state") \
	X(MIRROR_SOURCE_UP, "mirrord_mirror_source_up", GAUGE, MIRROR, NONE, \
	    NO, "1 while mirrord reads the mirror's source, 0 while a " \
	    "partition it copies is stalled by the source (refused, frozen, " \
	    "unresolvable, TLS, SASL, authorization, no leader) or the " \
	    "source's Metadata has failed for the stall bound") \
	X(MIRROR_SOURCE_ERRORS, "mirrord_mirror_source_errors_total", \
	    COUNTER, MIRROR_CAUSE, NONE, NO, "Failed requests to the mirror's " \
	    "source (Metadata, Fetch, ListOffsets, connections), by cause: " \
	    "connection_refused, timeout, dns, tls, sasl_authentication, " \
	    "authorization, unknown_topic, leader_unavailable, transport, " \
	    "config, other") \
	X(MIRROR_SOURCE_SINCE_SUCCESS, \
	    "mirrord_mirror_source_seconds_since_success", GAUGE, \
	    MIRROR_REQUEST, NONE, NO, "Seconds since the mirror's source last " \
	    "answered a request of the kind (request=\"Metadata\" or " \
	    "\"Fetch\") without error; counted from the mirror's start in " \
	    "this process before the first answer") \
	X(MIRROR_STALLED_PARTITIONS, "mirrord_mirror_stalled_partitions", \
	    GAUGE, MIRROR, NONE, NO, "Partitions of the mirror copied here " \
	    "that cannot be read from the source or written to the " \
	    "destination now (STALLED)") \
	X(MIRROR_MAX_LAG_SECONDS, "mirrord_mirror_max_lag_seconds", GAUGE, \
	    MIRROR, NONE, NO, "The largest mirrord_partition_lag_seconds of " \
	    "the mirror's partitions copied here (PREPARING, MIRRORING, " \
	    "PAUSED)") \
	X(CLUSTER_REQUEST_DURATION, \
	    "mirrord_cluster_request_duration_seconds", HISTOGRAM, CONN_API, \
	    REQUEST, NO, "Time from sending a request to a cluster to its " \
	    "response (api is Fetch or Produce)") \
	X(CLUSTER_REQUEST_ERRORS, "mirrord_cluster_request_errors_total", \
	    COUNTER, CONN_API_ERROR, NONE, NO, "Error responses and failed " \
	    "requests to a cluster, by Kafka error name (error=\"NONE\" is " \
	    "always 0: it is there before the first error)") \
	X(FETCH_REQUESTS, "mirrord_fetch_requests_total", COUNTER, \
	    MIRROR_RESULT, NONE, NO, "Fetch requests sent to the source, by " \
	    "kind: result=\"full\" lists every partition fetched (no session, " \
	    "or one being opened), result=\"incremental\" only those whose " \
	    "fetch position changed (KIP-227 fetch session)") \
	X(FETCH_REQUEST_BYTES, "mirrord_fetch_request_bytes_total", COUNTER, \
	    MIRROR, NONE, NO, "Bytes of the Fetch requests sent to the " \
	    "source (size prefix and header included)") \
	X(FETCH_SESSION_ERRORS, "mirrord_fetch_session_errors_total", \
	    COUNTER, MIRROR_ERROR, NONE, NO, "Fetch sessions the source " \
	    "dropped or refused (FETCH_SESSION_ID_NOT_FOUND, " \
	    "INVALID_FETCH_SESSION_EPOCH, ...): the next Fetch is a full one") \
	X(DESTINATION_WRITES_DENIED, \
	    "mirrord_destination_writes_denied_total", COUNTER, API_ERROR, \
	    NONE, NO, "Produce and InitProducerId answers of the destination " \
	    "refusing mirrord's principal, by API and Kafka error name " \
	    "(the partitions concerned are FAILED and retried)") \
	X(GROUP_SYNCS, "mirrord_group_syncs_total", COUNTER, MIRROR_RESULT, \
	    NONE, NO, "Consumer groups handled by the offset sync, by result: " \
	    "synced (offsets committed to the destination), active (members " \
	    "on the destination: left alone), unchanged (already committed so), " \
	    "nothing (no committed offset " \
	    "of a mirrored partition)") \
	X(GROUP_OFFSETS_COMMITTED, "mirrord_group_offsets_committed_total", \
	    COUNTER, MIRROR, NONE, NO, "Translated partition offsets " \
	    "committed to the destination by the consumer-group offset sync") \
	X(GROUP_SYNC_ERRORS, "mirrord_group_sync_errors_total", COUNTER, \
	    MIRROR_STEP, NONE, NO, "Failed steps of the consumer-group offset " \
	    "sync, by request (ListGroups, FindCoordinator, OffsetFetch, " \
	    "DescribeGroups, OffsetCommit, translate); retried next round") \
	X(GROUP_SYNC_AGE, "mirrord_group_sync_age_seconds", GAUGE, MIRROR, \
	    NONE, NO, "Seconds since the consumer-group offset sync of the " \
	    "mirror last completed a round without errors (-1 never)") \
	X(GROUP_SYNC_FINAL_MISSED, "mirrord_group_sync_final_missed_total", \
	    COUNTER, MIRROR, NONE, NO, "Partitions stopped (failover) whose " \
	    "final consumer-group offset sync missed some group: a warning " \
	    "names the groups and why; never synced again") \
	X(GROUP_SYNC_LAGGING, "mirrord_group_sync_lagging_offsets", GAUGE, \
	    MIRROR, NONE, NO, "Group partitions whose source commit was past " \
	    "the mirrored end in the last round (committed at the mirrored " \
	    "end: a failover now would read those records again)") \
	X(CLUSTER_INFLIGHT_BYTES, "mirrord_cluster_inflight_bytes", GAUGE, \
	    CONN, NONE, NO, "Bytes of requests sent to a cluster and not yet " \
	    "answered") \
	X(CLUSTER_CONNECTIONS, "mirrord_cluster_connections", GAUGE, CONN, \
	    NONE, NO, "Open connections to a cluster's brokers") \
	X(CLUSTER_OWNED_PARTITIONS, "mirrord_cluster_owned_partitions", \
	    GAUGE, NONE, NONE, NO, "Mirrored partitions this instance copies " \
	    "(multi-instance mode: the part-owner records naming it; one " \
	    "instance alone: every partition)") \
	X(PRODUCE_INFLIGHT_BATCHES, "mirrord_produce_inflight_batches", \
	    GAUGE, NONE, NONE, NO, "Record batches sent to the destination " \
	    "and not yet answered, all partitions") \
	X(PRODUCE_INFLIGHT_PEAK, \
	    "mirrord_produce_partition_inflight_batches_peak", GAUGE, NONE, \
	    NONE, NO, "Most record batches of one partition in flight to the " \
	    "destination at once since the start (pipelined produce; 1 when " \
	    "each batch waits for the answer to the one before)") \
	X(PRODUCE_REQUESTS, "mirrord_produce_requests_total", COUNTER, NONE, \
	    NONE, NO, "Produce requests sent to the destination") \
	X(PRODUCE_REQUEST_BATCHES, "mirrord_produce_request_batches_total", \
	    COUNTER, NONE, NONE, NO, "Record batches the Produce requests " \
	    "carried (at most one of each partition per request; divided by " \
	    "mirrord_produce_requests_total, the batches per request)") \
	X(PRODUCE_REQUESTS_PEAK, \
	    "mirrord_produce_broker_inflight_requests_peak", GAUGE, NONE, NONE, \
	    NO, "Most Produce requests in flight to one destination broker at " \
	    "once since the start (at most " \
	    "pipeline.max_inflight_batches_per_partition)") \
	X(MEMORY_HELD, "mirrord_memory_held_bytes", GAUGE, KIND, NONE, NO, \
	    "Bytes held for record data, all counted against " \
	    "pipeline.max_inflight_bytes_total, by kind: queued (fetched, " \
	    "waiting for their Produce), sending (in Produce requests not " \
	    "answered, or answered and not settled), unsure (kept after an " \
	    "uncertain Produce to be sent again as they were), " \
	    "fetch_responses (the largest answers of the Fetches in flight, " \
	    "reserved before they are sent, and the bytes of answers' " \
	    "buffers that queued batches point into, outside those " \
	    "batches), produce_requests (encoded " \
	    "Produce requests not yet written to the destination's sockets), " \
	    "destination_reads (the largest answers of the Fetches reading " \
	    "back the destination's end to prove who wrote it or to preserve " \
	    "a failback divergence, and the preserved batches waiting for " \
	    "their Produce)") \
	X(MEMORY_HELD_PEAK, "mirrord_memory_held_bytes_peak", GAUGE, NONE, \
	    NONE, NO, "Most bytes held for record data at once since the " \
	    "start (every kind of mirrord_memory_held_bytes)") \
	X(ADMIN_REQUESTS, "mirrord_admin_requests_total", COUNTER, \
	    ADMIN_API_ERROR, NONE, NO, "Admin listener requests answered, by " \
	    "API and Kafka error name (NONE for success)") \
	X(ADMIN_REJECTED_REQUESTS, "mirrord_admin_rejected_requests_total", \
	    COUNTER, REASON, NONE, NO, "Admin listener requests dropped " \
	    "without an answer (connection closed), by reason") \
	X(ADMIN_AUTHORIZATION_DENIED, \
	    "mirrord_admin_authorization_denied_total", COUNTER, \
	    ADMIN_API_OPERATION, NONE, NO, "Mirrors refused to a principal by " \
	    "authorization (answered with 144), by API and operation " \
	    "(describe or alter)") \
	X(ADMIN_CONNECTIONS, "mirrord_admin_connections", GAUGE, NONE, NONE, \
	    NO, "Open connections to the admin listener") \
	X(ADMIN_BUFFERED, "mirrord_admin_buffered_bytes", GAUGE, NONE, NONE, \
	    NO, "Bytes the admin listener holds: request frames read and not " \
	    "yet handled, requests being handled, answers not yet sent " \
	    "(capped by server.max_buffered_bytes_total)") \
	X(METADATA_LOG_RECORDS, "mirrord_metadata_log_records_total", \
	    COUNTER, NONE, NONE, NO, "Records appended to the metadata log") \
	X(METADATA_LOG_BYTES, "mirrord_metadata_log_bytes_total", COUNTER, \
	    NONE, NONE, NO, "Bytes appended to the metadata log, framing " \
	    "included") \
	X(METADATA_LOG_FSYNC_DURATION, \
	    "mirrord_metadata_log_fsync_duration_seconds", HISTOGRAM, NONE, \
	    FSYNC, NO, "Time spent in fsync of the metadata log") \
	X(METADATA_LOG_GROUPS, "mirrord_metadata_log_groups_total", COUNTER, \
	    NONE, NONE, NO, "Asynchronous write groups of the metadata log " \
	    "completed (group commit: records_total over fsyncs shows the " \
	    "group size)") \
	X(METADATA_LOG_HELD, "mirrord_metadata_log_held_writes_total", \
	    COUNTER, NONE, NONE, NO, "Data-plane metadata writes held back " \
	    "while an exclusive change (an operator's command, or what a " \
	    "Metadata pass learnt) was being written (they go once it is " \
	    "applied)") \
	X(METADATA_LOG_HELD_REFUSED, \
	    "mirrord_metadata_log_held_refused_total", COUNTER, NONE, NONE, \
	    NO, "Held writes dropped because the exclusive change made them " \
	    "stale (decided from a state it changed); the data plane " \
	    "decides again") \
	X(METADATA_LOG_LOOP_WRITES, "mirrord_metadata_log_loop_writes_total", \
	    COUNTER, NONE, NONE, NO, "Metadata log writes made synchronously " \
	    "on the event loop, which waits for each (none once started, " \
	    "in a single instance or as the writer of several; a writer's " \
	    "promotion records the cluster id so); the rest are written in " \
	    "groups off the loop") \
	X(METADATA_LOG_SPLIT_GROUPS, \
	    "mirrord_metadata_log_split_groups_total", COUNTER, NONE, NONE, \
	    NO, "Groups the metadata writer refused because some of their " \
	    "partitions had moved to another instance: those writes failed, " \
	    "the others were written again") \
	X(METADATA_LOG_SNAPSHOT_AGE, \
	    "mirrord_metadata_log_snapshot_age_seconds", GAUGE, NONE, NONE, NO, \
	    "Seconds since the last metadata log snapshot was written") \
	X(CLUSTER_ROLE, "mirrord_cluster_role", GAUGE, ROLE, NONE, NO, \
	    "1 for this instance's role in a group of instances (writer, " \
	    "follower, joining), 0 for the others; standalone without " \
	    "cluster.enabled") \
	X(CLUSTER_GENERATION, "mirrord_cluster_generation", GAUGE, NONE, NONE, \
	    NO, "Generation of the instance group this instance is a member " \
	    "of, -1 while it is not a member") \
	X(CLUSTER_MEMBERS, "mirrord_cluster_members", GAUGE, NONE, NONE, NO, \
	    "Instances in the group as last recorded in the metadata log") \
	X(METADATA_WRITER_EPOCH, "mirrord_metadata_writer_epoch", GAUGE, NONE, \
	    NONE, NO, "Producer epoch of this instance as the metadata " \
	    "writer, -1 when it is not the writer") \
	X(CLUSTER_REBALANCES, "mirrord_cluster_rebalances_total", COUNTER, \
	    NONE, NONE, NO, "Generations of the instance group this instance " \
	    "joined") \
	X(CLUSTER_FORWARDED, "mirrord_cluster_forwarded_requests_total", \
	    COUNTER, RESULT, NONE, NO, "Metadata writes of other instances " \
	    "handled by this instance as the writer, result accepted or refused") \
	X(CONFIG_RELOADS, "mirrord_config_reloads_total", COUNTER, RESULT, \
	    NONE, NO, "Configuration reloads (SIGHUP), result success or " \
	    "failure") \
	X(BUILD_INFO, "mirrord_build_info", GAUGE, VERSION, NONE, NO, \
	    "Always 1; the version label names the running build") \
	X(PROCESS_START_TIME, "process_start_time_seconds", GAUGE, NONE, NONE, \
	    NO, "Start time of the process since the Unix epoch, in seconds") \
	X(PROCESS_CPU, "process_cpu_seconds_total", COUNTER, NONE, NONE, NO, \
	    "User and system CPU time spent by the process, in seconds") \
	X(PROCESS_RSS, "process_resident_memory_bytes", GAUGE, NONE, NONE, \
	    NO, "Resident memory size of the process, in bytes")

enum metrics_std_id {
#define X(id, ...) MSTD_##id,
	MSTD_FAMILIES(X)
#undef X
	MSTD_COUNT
};

struct metrics_std {
	struct metrics *reg;
	struct metric_family *f[MSTD_COUNT];
	bool per_partition;
};

#define MSTD(ms, id) ((ms)->f[MSTD_##id])

/*
 * Register every family of the table in m (which the caller keeps owning),
 * set mirrord_build_info{version=PACKAGE_VERSION} to 1 and
 * process_start_time_seconds to now (call it early in main);
 * process_cpu_seconds_total and process_resident_memory_bytes are read
 * from /proc/self/stat at scrape time (0 where there is no /proc).
 * per_partition false disables the PP families.  -1 with the reason in err.
 */
int metrics_std_init(struct metrics_std *ms, struct metrics *m,
    bool per_partition, char *err, size_t errlen);
/* Turn the PP families on or off (config reload); off drops their series. */
void metrics_std_set_per_partition(struct metrics_std *ms, bool on);
const char *metrics_std_name(enum metrics_std_id id);
bool metrics_std_is_per_partition(enum metrics_std_id id);

/* The series of a per-partition family (id must use labels mirror, topic,
 * partition); NULL when per-partition metrics are off. */
struct metric_series *metrics_std_partition(struct metrics_std *ms,
    enum metrics_std_id id, const char *mirror, const char *topic,
    int32_t partition);
/* Set mirrord_partition_state for the partition: states[current] 1, the
 * others 0 (states is the state name table, nstates its size). */
void metrics_std_partition_state(struct metrics_std *ms, const char *mirror,
    const char *topic, int32_t partition, const char *const *states,
    size_t nstates, size_t current);
/* Drop every series of the partition (it left the mirror). */
void metrics_std_partition_remove(struct metrics_std *ms, const char *mirror,
    const char *topic, int32_t partition);
/* Drop every series labelled with this mirror (the mirror was deleted). */
void metrics_std_mirror_remove(struct metrics_std *ms, const char *mirror);

#endif
