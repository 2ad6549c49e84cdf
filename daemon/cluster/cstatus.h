/*
 * cstatus.h: the status topic of several instances (cluster.enabled).
 *
 * Every instance publishes the live numbers of the partitions it copies
 * (source high watermark, destination end, lag) every
 * cluster.status_interval_ms as one record of the compacted one-partition
 * topic "<storage.kafka.topic>-status" (key = its instance id), and reads
 * everyone's, so DescribeMirrors on any instance shows the lag of every
 * partition.  It runs on the event loop, on the destination's kcluster
 * (the group client's): every step is a non-blocking request bounded by
 * the timeout; failures are logged (once while the reason stays the same)
 * and retried on the next round.
 *
 * Record value (big-endian): u16 version 2, i64 wall ms of the snapshot,
 * u32 count, then per partition: i16 length + mirror, i16 length + topic,
 * i32 partition, i64 source offset, i64 destination offset, i64 lag,
 * i64 lag ms (-1 unknown), then what is known and since when
 * (pipeline_partition_status()): i64 wall ms of the source's last answer
 * for the partition, i64 wall ms of the last caught-up moment, i64 wall
 * ms the partition stalled at (-1 each when none), i16 length + why it is
 * stalled (empty when it is not).  Version 1 values (without the last
 * four fields) are read as well.
 */
#ifndef MIRRORD_CSTATUS_H
#define MIRRORD_CSTATUS_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct kcluster;
struct cstatus;

#define CSTATUS_SUFFIX "-status"

struct cstatus_part {
	const char *mirror, *topic;
	int32_t partition;
	int64_t src, dst, lag, lag_ms;
	int64_t src_ok_ms, caught_ms, stalled_since;
	const char *reason;        /* NULL or "" when not stalled */
};

/* kc and the strings are borrowed and must outlive it (free it before
 * kc).  The first round starts from the loop; NULL with err. */
struct cstatus *cstatus_new(struct event_base *base, struct kcluster *kc,
    const char *topic, const char *instance_id, int timeout_ms,
    int interval_ms, char *err, size_t errlen);
/* Hands this instance's numbers over (replacing any not yet sent); a round
 * starts now unless one runs: it produces them and reads everyone's. */
void cstatus_publish(struct cstatus *s, const struct cstatus_part *parts,
    size_t n);
/* The numbers instance last published for that partition: 1 with *out
 * (mirror and topic left NULL; reason valid until the next round ends) and
 * the age of that record in ms, else 0. */
int cstatus_lookup(struct cstatus *s, const char *instance,
    const char *mirror, const char *topic, int32_t partition,
    struct cstatus_part *out, int64_t *age_ms);
/* Why the last round failed ("" when it worked). */
void cstatus_last_error(struct cstatus *s, char *buf, size_t len);
/* Frees (at once, or when kc fails the request still outstanding). */
void cstatus_free(struct cstatus *s);

/* Value codec, exposed for tests. */
uint8_t *cstatus_encode(const struct cstatus_part *parts, size_t n,
    int64_t wall_ms, size_t *outlen);

#endif
