/*
 * mlog_kafka.h: the replicated backend of the metadata log, a one-partition
 * topic on the destination cluster (storage.backend: kafka).  The records
 * are the file backend's frames (mlog.h), one frame per Kafka record value,
 * so the same CRC covers them end to end.  See mlog_kafka.c for the layout
 * of the topic, the fencing protocol and the known limits.
 */
#ifndef MIRRORD_MLOG_KAFKA_H
#define MIRRORD_MLOG_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "mlog.h"

#define MLOG_KAFKA_TOPIC_DEFAULT "__mirrord_metadata"
/* The key of every record of a snapshot; log records have a null key. */
#define MLOG_KAFKA_SNAP_KEY "snapshot"

struct mlog_kafka_opts {
	const char *bootstrap;             /* "host:port,host:port" */
	const char *const *prop_names;     /* destination.client, resolved */
	const char *const *prop_values;
	size_t nprops;
	const char *topic;                 /* storage.kafka.topic */
	int replication_factor;            /* wanted; capped by the broker count */
	int min_insync_replicas;           /* wanted; capped by the replication factor */
	int timeout_ms;                    /* bound of every blocking step */
	/* Migration: open fails, without claiming, unless the topic holds
	 * nothing but claims (no snapshot, no state record). */
	int require_empty;
	/* Open as a follower: replay the newest snapshot and the log after
	 * it without claiming, then stay a reader that tails the log
	 * (mlog_kafka_poll()) and forwards its writes to the writer through
	 * the request topic; mlog_kafka_promote() makes it the writer. */
	int follower;
};
void mlog_kafka_opts_init(struct mlog_kafka_opts *ko);

/*
 * Connects to the destination cluster and parses the client properties;
 * nothing is created or claimed until mlog_open(), which creates or checks
 * the topic, becomes the one writer (fencing any earlier one) and replays.
 */
struct mlog *mlog_kafka_new(const struct mlog_opts *opts,
    const struct mlog_kafka_opts *ko, char *err, size_t errlen);

/* The writer's producer id and epoch (after open), for logs and tests. */
void mlog_kafka_writer(const struct mlog *ml, int64_t *producer_id,
    int16_t *epoch);

/* ---- roles: one writer, any number of followers ----------------------- */

/* The topic followers send their writes to: "<topic>-requests". */
#define MLOG_KAFKA_REQ_SUFFIX "-requests"
#define MLOG_KAFKA_REQ_RETENTION_MS 3600000

/*
 * Follower: fetches the records appended since the last call (waiting up
 * to max_wait_ms for the first) and applies them live, in log order.
 * Writer: reads the log too (a newer writer's claim there demotes it),
 * then handles the pending requests of the request topic.  Returns the
 * number of records applied plus requests handled, or -1 with err.  A
 * follower that fell behind the log start rebuilds its model there
 * (mlog_kafka_set_rebuild()); without a rebuild hook the log is then
 * broken and the instance must restart.
 */
int mlog_kafka_poll(struct mlog *ml, int max_wait_ms, char *err,
    size_t errlen);
/* Follower -> writer: InitProducerId on the transactional id, the claim
 * record, then reads to the end of the log applying live.  0 or -1 (still
 * a follower, err says why).  Calls the role hook on success. */
int mlog_kafka_promote(struct mlog *ml, char *err, size_t errlen);
/*
 * The same without blocking the loop (the log has an event base): the
 * InitProducerId and the claim are a job of the log's thread, the records
 * up to the log end found after the claim are read by the tail's Fetches
 * there and applied live as a follower's are, and once they are all in
 * (and the thread idle) the log becomes the writer's: the role hook runs,
 * then cb(arg, 0, "").  On a failure cb(arg, -1, why) and it stays a
 * follower.  Returns 0 (started: cb follows, from the loop, never from
 * inside this call), 1 (already the writer, or no event base and the
 * synchronous promotion succeeded: no cb) or -1 (err; no cb).  One at a
 * time: while one runs, another call fails.  mlog_kafka_demote() cancels
 * it (no cb).
 */
typedef void (*mlog_kafka_promoted_fn)(void *arg, int rc, const char *why);
int mlog_kafka_promote_async(struct mlog *ml, mlog_kafka_promoted_fn cb,
    void *arg, char *err, size_t errlen);
/* 1 while an asynchronous promotion runs. */
int mlog_kafka_promoting(const struct mlog *ml);
/* Writer -> follower (lost group leadership, or fenced): never appends
 * again in that role; keeps tailing from where its model is.  Calls the
 * role hook.  On a follower it only cancels a promotion in progress. */
void mlog_kafka_demote(struct mlog *ml, const char *why);
int mlog_kafka_is_writer(const struct mlog *ml);
/* The identity stamped on this instance's requests (copied). */
void mlog_kafka_set_identity(struct mlog *ml, const char *instance_id,
    const char *member_id, int32_t generation);
/*
 * The writer's request handler: decides on one follower's request (its
 * records, in order).  Returns a Kafka error code: 0 accepts, and then
 * the handler itself has appended, synced and applied the records
 * (mstate_apply_forwarded()); the backend puts the REPLY into that same
 * sync.  Non-zero refuses: why (the follower's error message) is sent
 * back in the REPLY, which is all the backend appends.
 *
 * With the log's event base the writer reads the requests off the loop
 * and the handler may answer later: it returns MLOG_KAFKA_PENDING and
 * calls mlog_kafka_request_done() from the loop once it has decided
 * (recs, instance_id and member_id stay valid until then; no other
 * request is handed to it meanwhile).  To accept, it arms the REPLY
 * (mlog_kafka_reply_arm(ml, 1)) just before it hands the records to the
 * log as a group (mlog_sync_async(), through mstate_excl_commit()), and
 * disarms it after: the REPLY goes into that group, so the records and
 * their answer land together or not at all.  A REPLY that went into no
 * group (a refusal, a failed write) is written alone with the code and
 * why given to mlog_kafka_request_done().
 */
typedef int (*mlog_kafka_request_fn)(void *arg, const char *instance_id,
    const char *member_id, int32_t generation,
    const struct mlog_rec *recs, size_t n, char *why, size_t whylen);
#define MLOG_KAFKA_PENDING (-1)
void mlog_kafka_set_request_handler(struct mlog *ml,
    mlog_kafka_request_fn fn, void *arg);
void mlog_kafka_request_done(struct mlog *ml, int code, const char *why);
void mlog_kafka_reply_arm(struct mlog *ml, int arm);
/* fn(arg, is_writer, why) after a promotion or a demotion (asked for, or
 * automatic when the leader refuses an append as fenced or a newer
 * writer's claim is read).  Without a role hook a fenced writer's log is
 * broken instead (every later write refused).  The
 * hook runs inside the mlog call that noticed it (mlog_sync(),
 * mlog_kafka_poll(), ...), after the log is consistent again: it may read
 * the model but must not write through the log. */
void mlog_kafka_set_role_hook(struct mlog *ml,
    void (*fn)(void *arg, int is_writer, const char *why), void *arg);

/*
 * A follower that fell behind the log start (the writer deleted records
 * it had not read) rebuilds its model in place instead of breaking the
 * log: fresh(arg) returns an empty model, the apply argument the newest
 * snapshot and the log after it are replayed into (the open's apply
 * callback, not live); adopt(arg, fresh, err, errlen) makes the live model
 * equal to it, its hooks seeing the differences, and frees it (0, or -1
 * with err); drop(fresh) frees one whose replay failed.  The tail then
 * goes on from the log end, live.  Without these the log goes broken
 * ("restart it").  mstate provides the three (mstate_rebuild_*_cb()).
 */
void mlog_kafka_set_rebuild(struct mlog *ml, void *(*fresh)(void *arg),
    int (*adopt)(void *arg, void *fresh, char *err, size_t errlen),
    void (*drop)(void *fresh), void *arg);

/*
 * The request record (value of one record of the request topic, key =
 * instance id), all integers big-endian:
 *   u16 version (1), u64 request id, i32 generation, i16 length + member
 *   id, i16 length + instance id, then the forwarded mlog frames as-is.
 * The REPLY frame's payload (MLOG_T_REPLY, in the metadata log):
 *   u16 version (1), i16 length + instance id, u64 request id, i64 the
 *   request's offset in the request topic, i16 Kafka error code, i16
 *   length + message.
 */
#define MLOG_KAFKA_REQ_VERSION 1
#define MLOG_KAFKA_REPLY_MSG_MAX 2048
struct mlog_kafka_req {
	uint64_t id;
	int32_t generation;
	const char *member_id;        /* not NUL-terminated */
	size_t member_len;
	const char *instance_id;      /* not NUL-terminated */
	size_t instance_len;
	const uint8_t *frames;        /* intact frames, state record types */
	size_t frames_len;
	uint32_t nframes;
};
/* Encodes a request value (malloc'd, *outlen) or NULL with err. */
uint8_t *mlog_kafka_encode_request(uint64_t id, int32_t generation,
    const char *member_id, const char *instance_id, const uint8_t *frames,
    size_t frames_len, size_t *outlen, char *err, size_t errlen);
/* Decodes and checks one request value: header, then every frame intact
 * (no torn or trailing bytes), at most max_record each, of a state record
 * type (below MLOG_TYPE_RESERVED), at least one.  -1 with err naming what
 * is wrong; the header fields decoded before it stay in out. */
int mlog_kafka_decode_request(const uint8_t *v, size_t len,
    uint32_t max_record, struct mlog_kafka_req *out, char *err,
    size_t errlen);
struct mlog_kafka_reply {
	const char *instance_id;
	size_t instance_len;
	uint64_t id;
	int64_t req_offset;
	int16_t error;
	const char *msg;
	size_t msg_len;
};
/* Encodes a REPLY payload (message cut at MLOG_KAFKA_REPLY_MSG_MAX);
 * malloc'd, NULL if out of memory. */
uint8_t *mlog_kafka_encode_reply(const char *instance_id, uint64_t id,
    int64_t req_offset, int16_t error, const char *msg, size_t *outlen);
int mlog_kafka_decode_reply(const uint8_t *p, size_t len,
    struct mlog_kafka_reply *out, char *err, size_t errlen);
/* One uncompressed v2 batch holding one record (key may be NULL), with
 * the producer fields given; malloc'd or NULL with err. */
uint8_t *mlog_kafka_encode_value_batch(const char *key, const uint8_t *value,
    size_t vlen, int64_t producer_id, int16_t epoch, int32_t base_seq,
    int64_t timestamp_ms, size_t *outlen, char *err, size_t errlen);

/*
 * Encoding (lib/metadata/mlog_kafka_rec.c), exposed for the tests and the fuzz
 * harness: one uncompressed v2 record batch
 * holding the frames in frames[0..len) (mlog frames back to back) as record
 * values, keyed snapshot (1) or not (0), with the producer fields given.
 * Returns a malloc'd batch (*outlen bytes) or NULL with err.
 */
uint8_t *mlog_kafka_encode_batch(const uint8_t *frames, size_t len,
    int snapshot, int64_t producer_id, int16_t epoch, int32_t base_seq,
    int64_t timestamp_ms, size_t *outlen, char *err, size_t errlen);

/* One record found in a batch by mlog_kafka_decode_batch(). */
struct mlog_kafka_rec {
	int64_t offset;
	int snapshot;           /* keyed as a snapshot record */
	const uint8_t *value;   /* one mlog frame */
	size_t value_len;
	const uint8_t *key;     /* NULL for a null key */
	size_t key_len;
};
typedef int (*mlog_kafka_rec_fn)(void *arg, const struct mlog_kafka_rec *r);
/* Walks the records of one uncompressed batch (header already parsed into
 * base_offset, records/records_len, count); -1 with err if malformed,
 * which includes a record i whose offset delta is not i. */
int mlog_kafka_decode_records(int64_t base_offset, const uint8_t *records,
    size_t records_len, int32_t count, mlog_kafka_rec_fn cb, void *arg,
    char *err, size_t errlen);
/* 1 if the first record of such a batch is keyed as a snapshot record
 * (mirrord writes a batch all snapshot or none), 0 if not or if it cannot
 * be read (left to the full walk to report). */
int mlog_kafka_batch_is_snapshot(const uint8_t *records, size_t records_len,
    int32_t count);

#endif
