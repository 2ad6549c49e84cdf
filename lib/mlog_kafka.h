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

/*
 * Encoding (lib/mlog_kafka_rec.c), exposed for the tests and the fuzz
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
};
typedef int (*mlog_kafka_rec_fn)(void *arg, const struct mlog_kafka_rec *r);
/* Walks the records of one uncompressed batch (header already parsed into
 * base_offset, records/records_len, count); -1 with err if malformed,
 * which includes a record i whose offset delta is not i. */
int mlog_kafka_decode_records(int64_t base_offset, const uint8_t *records,
    size_t records_len, int32_t count, mlog_kafka_rec_fn cb, void *arg,
    char *err, size_t errlen);

#endif
