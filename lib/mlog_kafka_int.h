/*
 * mlog_kafka_int.h: what the two halves of the replicated metadata log
 * share: lib/mlog_kafka.c (becoming the writer, replay, the mlog ops) and
 * lib/mlog_kafka_io.c (the cluster side: connections, the topic, reading
 * and producing).  Not for other modules.
 */
#ifndef MIRRORD_MLOG_KAFKA_INT_H
#define MIRRORD_MLOG_KAFKA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"
#include "kconn.h"
#include "mlog_kafka.h"

struct kblock;

#define MK_BACKOFF_MS 100     /* between retries of one step */

struct mk {
	struct mlog base;
	struct kconn_config kcfg;
	char **boot_host;
	int *boot_port;
	size_t nboot;
	char *topic;
	char txn_id[320];
	int want_rf, want_isr, timeout_ms, require_empty;
	size_t batch_max;           /* topic max.message.bytes we set */

	struct kblock *conn;        /* to the partition leader */
	int32_t leader_id;
	char leader_host[256];
	int leader_port;
	int nbrokers;

	int64_t pid;
	int16_t epoch;
	int32_t seq;                /* next base sequence */

	struct kw pend;             /* frames appended, not yet synced */
	uint32_t npend;

	int broken;
	char broken_why[768];
	struct mlog_stats st;
};

/* What mk_read_range() hands its callback for each record. */
struct krec {
	int64_t offset;
	int64_t ts;             /* the batch's max timestamp */
	int64_t pid;
	int16_t epoch;
	int snapshot;
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
};
typedef int (*krec_fn)(void *arg, const struct krec *r, char *err,
    size_t errlen);

void mk_sleep_ms(int ms);
/* Marks the log broken (every later write refused with why) and logs it. */
void mk_set_broken(struct mk *k, const char *why);
void mk_drop_conn(struct mk *k);
/* A connection to any bootstrap server. */
struct kblock *mk_connect_any(struct mk *k, char *err, size_t errlen);
/* Creates or checks the topic, then connects k->conn to its leader. */
int mk_ensure_topic(struct mk *k, char *err, size_t errlen);
/* ListOffsets of partition 0 at ts (-2 earliest, -1 latest). */
int mk_list_offset(struct mk *k, int64_t ts, int64_t *out, char *err,
    size_t errlen);
/* Reads every record with an offset in [lo, hi) in order. */
int mk_read_range(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen);
/* Produces frames[0..len) as one batch with the next sequence, acks=all;
 * a refusal of our epoch marks the log broken (fenced). */
int mk_produce_frames(struct mk *k, const uint8_t *frames, size_t len,
    uint32_t count, int snapshot, int64_t *base, char *err, size_t errlen);

#endif
