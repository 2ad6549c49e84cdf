/*
 * pipeline/wire.h: the data plane's view of the standard Kafka APIs it speaks
 * to source and destination brokers: ListOffsets v1-v3, Fetch v4-v12,
 * Produce v3-v8, OffsetForLeaderEpoch v2-v4 (and InitProducerId v0-v1,
 * whose generated structs pipeline/pcluster.c uses directly; Metadata is
 * kcluster's, v0-v12, v10+ with the topic ids pipeline/ident.c checks).  The
 * bytes are the generated kp_
 * codec's (lib/kp_gen.h); this module adds what the pipeline needs on top
 * of it:
 *
 *   - the version ranges it asks kconn_pick_version() for.  All but
 *     Fetch v12 (flexible; LastFetchedEpoch and the
 *     DivergingEpoch answer that pipeline/epoch.c uses) and OffsetForLeaderEpoch
 *     v4 are non-flexible versions that Kafka 4.x still
 *     serves and that the librdkafka 2.0.2 mock
 *     answers correctly: its ListOffsets v4/v5 and
 *     Produce v5 answers are malformed, so the ranges stop at ListOffsets v3
 *     and the Produce picker in pipeline/copy.c skips v5;
 *   - encoders that take the pipeline's flat pw_tp arrays (grouped by
 *     topic here) and fill in the fixed request fields (consumer replica
 *     id, no fetch session, no transactional id);
 *   - decoders that call back once per partition with a struct that points
 *     into the response body (valid during the callback).  Each decodes the
 *     whole response into an arena sized from the body and freed before it
 *     returns; Fetch records stay a kbytes into the response (no copy).
 *     Callbacks run only for a response that decoded completely.
 */
#ifndef MIRRORD_PIPE_WIRE_H
#define MIRRORD_PIPE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"
#include "kproto.h"

/* Our ranges; the broker's ApiVersions narrows them (kconn_pick_version).
 * InitProducerId has no wrapper: pipeline/pcluster.c uses the kp_ structs. */
#define PW_PRODUCE_MIN 3
#define PW_PRODUCE_MAX 8
/* Produce v13 names the topic by id (KIP-516): a request for a topic that
 * was deleted (and perhaps recreated under its name) since is refused with
 * UNKNOWN_TOPIC_ID instead of landing in the new topic.  v9-v12 add
 * nothing mirrord uses; v13 keeps their layout. */
#define PW_PRODUCE_BY_ID 13
#define PW_FETCH_MIN 4
#define PW_FETCH_MAX 12   /* v12: LastFetchedEpoch, DivergingEpoch (KIP-595) */
/* v13: topics by id (KIP-516).  The copy's Fetch uses it when the source
 * names every topic's id: a broker keys a fetch session's partitions by
 * topic and partition, and with names its hash of them clusters for
 * topics named alike (topic-00, topic-01, ...), which makes a session of
 * thousands of partitions cost it seconds per Fetch; ids hash apart. */
#define PW_FETCH_BY_ID 13
#define PW_FETCH_MAX_COPY 13
#define PW_LIST_OFFSETS_MIN 1
#define PW_LIST_OFFSETS_MAX 3
#define PW_OFFSET_FOR_LEADER_EPOCH_MIN 2   /* v2: CurrentLeaderEpoch */
#define PW_OFFSET_FOR_LEADER_EPOCH_MAX 4
#define PW_INIT_PID_MIN 0
#define PW_INIT_PID_MAX 1

#define PW_TS_LATEST (-1)
#define PW_TS_EARLIEST (-2)

/* One topic-partition of a request; the array must be grouped by topic
 * (equal topic pointers or strings adjacent). */
struct pw_tp {
	const char *topic;
	int32_t partition;
	int64_t offset;           /* Fetch: fetch offset; ListOffsets: timestamp */
	/* Fetch, OffsetForLeaderEpoch: the leader epoch Metadata gave (the
	 * broker fences a stale or future one), -1 unknown. */
	int32_t leader_epoch;
	/* Fetch v12+: the epoch of the batch ending at offset (LastFetchedEpoch);
	 * OffsetForLeaderEpoch: the epoch asked about.  -1 none. */
	int32_t last_epoch;
	int32_t max_bytes;        /* Fetch: partition max bytes */
	const uint8_t *records;   /* Produce: exactly one batch */
	size_t records_len;
	/* Produce v13+, Fetch v13+ (also forgotten): the topic's id (equal
	 * within a group) */
	struct kuuid topic_id;
};

/* ---- ListOffsets ----------------------------------------------------- */

struct pw_lo_part {
	struct kstr topic;
	int32_t partition;
	int16_t error;
	int64_t offset;
};
int pw_list_offsets_encode(struct kw *w, int16_t version, const struct pw_tp *tps,
    size_t n);
int pw_list_offsets_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_lo_part *p), void *arg);

/* ---- Fetch ----------------------------------------------------------- */

struct pw_fetch_req {
	int32_t max_wait_ms;
	int32_t min_bytes;
	int32_t max_bytes;
	int8_t isolation;          /* 1 = read_committed */
};
struct pw_fetch_part {
	struct kstr topic;         /* before v13, else null */
	struct kuuid topic_id;     /* v13+, else all zero */
	int32_t partition;
	int16_t error;
	int64_t high_watermark;
	int64_t last_stable_offset;
	int64_t log_start_offset;  /* -1 before v5 */
	/* sorted by first_offset, any number (pipeline/txn.h walks them) */
	const struct kp_fetch_response_aborted_transaction *aborted;
	size_t naborted;
	int32_t preferred_read_replica;
	/* v12+: the source's log parts from the LastFetchedEpoch asked with:
	 * its epoch diverging_epoch ends at diverging_end (-1/-1: no). */
	int32_t diverging_epoch;
	int64_t diverging_end;
	struct kbytes records;
};
int pw_fetch_encode(struct kw *w, int16_t version, const struct pw_fetch_req *req,
    const struct pw_tp *tps, size_t n);
/*
 * A Fetch in a fetch session (KIP-227, v7+): session id and epoch (0/0
 * asks for a new session, closing session id if not 0; 0/-1 no session),
 * tps the partitions added or changed, forgotten (topic and partition
 * only, grouped by topic like tps) the ones leaving the session.
 */
struct pw_fetch_session {
	int32_t id;
	int32_t epoch;
	const struct pw_tp *forgotten;
	size_t nforgotten;
};
int pw_fetch_encode_session(struct kw *w, int16_t version,
    const struct pw_fetch_req *req, const struct pw_fetch_session *sess,
    const struct pw_tp *tps, size_t n);
/* top_error gets the v7+ top-level error (0 before). */
int pw_fetch_decode(struct kr *r, int16_t version, int16_t *top_error,
    void (*cb)(void *arg, const struct pw_fetch_part *p), void *arg);
/* And session_id the v7+ session id of the answer (0 before, or none). */
int pw_fetch_decode_session(struct kr *r, int16_t version, int16_t *top_error,
    int32_t *session_id, void (*cb)(void *arg, const struct pw_fetch_part *p),
    void *arg);

/* ---- OffsetForLeaderEpoch -------------------------------------------- */

struct pw_ofle_part {
	struct kstr topic;
	int32_t partition;
	int16_t error;
	int32_t leader_epoch;     /* the epoch answered for: the asked one, or
	                           * the largest below it the log has; -1 none */
	int64_t end_offset;       /* where that epoch ends on the log; -1 none */
};
/* The entries' last_epoch is the epoch asked about, leader_epoch the
 * current one (-1 unknown); sent as a consumer (replica id -1). */
int pw_ofle_encode(struct kw *w, int16_t version, const struct pw_tp *tps,
    size_t n);
int pw_ofle_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_ofle_part *p), void *arg);

/* ---- Produce --------------------------------------------------------- */

struct pw_produce_part {
	struct kstr topic;        /* before v13, else null */
	struct kuuid topic_id;    /* v13+, else all zero */
	int32_t partition;
	int16_t error;
	int64_t base_offset;
	int64_t log_start_offset;
	struct kstr error_message; /* v8+, else null */
};
int pw_produce_encode(struct kw *w, int16_t version, int16_t acks,
    int32_t timeout_ms, const struct pw_tp *tps, size_t n);
int pw_produce_decode(struct kr *r, int16_t version,
    void (*cb)(void *arg, const struct pw_produce_part *p), void *arg);

#endif
