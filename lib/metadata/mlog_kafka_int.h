/*
 * mlog_kafka_int.h: what the two halves of the replicated metadata log
 * share: lib/metadata/mlog_kafka.c (becoming the writer, replay, the mlog ops) and
 * lib/metadata/mlog_kafka_io.c (the cluster side: connections, the topic, reading
 * and producing).  Not for other modules.
 */
#ifndef MIRRORD_MLOG_KAFKA_INT_H
#define MIRRORD_MLOG_KAFKA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "mlog_kafka.h"

struct karena;
struct mk_async;
struct mk_conn;
struct mk_net;

#define MK_BACKOFF_MS 100     /* between retries of one step */

struct mk {
	struct mlog base;
	/* destination.client's connection and security settings and the
	 * bootstrap list: the kcluster of the network thread is made of it. */
	struct kcluster_config kcc;
	struct mk_net *net;         /* the network thread (mlog_kafka_net.c);
	                             * the main log's, shared with req */
	int net_owner;
	char **boot_host;
	int *boot_port;
	size_t nboot;
	char *topic;
	char txn_id[320];
	int want_rf, want_isr, timeout_ms, require_empty;
	size_t batch_max;           /* topic max.message.bytes we set */

	struct mk_conn *conn;       /* to the partition leader */
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

	/* Roles (see "Followers" in mlog_kafka.c). */
	int writer;                 /* our claim is the newest one */
	int open_follower;          /* mlog_kafka_opts.follower */
	int is_req;                 /* this mk is the request topic's */
	struct mk_tail *tail;       /* replay state, kept for the tail */
	int64_t next;               /* offset after the last record read */
	int64_t prev_snap;          /* the newest snapshot's offset, -1 none */
	int64_t req_next;           /* request-topic offset not yet replied
	                             * to (-1: no REPLY seen) */
	struct mk *req;             /* the request topic */
	char *instance_id, *member_id;
	int32_t generation;
	int64_t identity_ms;        /* when the generation or member id last
	                             * changed (monotonic), 0 never */
	uint64_t req_seq;           /* id of the last request sent */
	/* This instance's own requests up to this id were left unanswered
	 * when it became the writer: its groups went again as the writer's,
	 * so its handler refuses them (mk_promote_finish()). */
	uint64_t void_upto;
	/* A follower waiting for the REPLY to its request. */
	int waiting, wait_done;
	uint64_t wait_id;
	int16_t wait_error;
	char wait_msg[MLOG_KAFKA_REPLY_MSG_MAX + 1];
	/* The writer handling one request.  Its REPLY joins the next sync
	 * made while the handler runs (cur_active), or the next group
	 * handed to the log while reply_armed (mlog_kafka_reply_arm()). */
	int cur_active, cur_replied, reply_armed;
	int64_t cur_off;
	uint64_t cur_id;
	char *cur_instance;
	/* The writer's requests off the loop (an event base): the ones one
	 * Fetch brought (struct mk_async), handled one at a time; rq_state
	 * says where the current one is; cur_inst and cur_recs are its own
	 * (they outlive the handler's call while it answers later). */
	int rq_state;               /* MK_RQ_* */
	int rq_in_handler;          /* inside req_fn */
	int16_t rq_code;            /* MK_RQ_ANSWERED: the handler's answer */
	char rq_why[MLOG_KAFKA_REPLY_MSG_MAX];
	uint64_t rq_answered;       /* requests answered so far */
	char *cur_inst, *cur_mem;
	struct mlog_rec *cur_recs;
	int foreign;                /* the writer's look at its log found
	                             * records it did not write */
	mlog_kafka_request_fn req_fn;
	void *req_arg;
	void (*role_fn)(void *arg, int is_writer, const char *why);
	void *role_arg;
	int role_pending;           /* a role change not yet told to role_fn */
	char role_why[768];
	/* mlog_kafka_set_rebuild(): a follower behind the log start. */
	void *(*rb_fresh)(void *arg);
	int (*rb_adopt)(void *arg, void *fresh, char *err, size_t errlen);
	void (*rb_drop)(void *fresh);
	void *rb_arg;
	uint64_t rebuilds;          /* models rebuilt so far */
	struct mk_async *async;     /* the I/O thread (mlog_kafka_async.c) */
	/* mlog_kafka_promote_async(): the claim is made on the log's
	 * thread (MK_PROMO_CLAIM), then the tail reads up to the log end
	 * found after it (MK_PROMO_CATCHUP) and, with the thread idle, the
	 * log becomes the writer's.  promo_id tells a cancelled promotion's
	 * late claim from the current one's. */
	int promo;                  /* MK_PROMO_* */
	uint64_t promo_id;
	int64_t promo_claim, promo_end, promo_seen;
	mlog_kafka_promoted_fn promo_cb;
	void *promo_arg;
};

enum { MK_PROMO_NONE, MK_PROMO_CLAIM, MK_PROMO_CATCHUP };

/* The writer's current request: none; with the handler; answered from
 * inside the handler's call (mk_rq_pump() writes the REPLY); its REPLY
 * being written alone. */
enum { MK_RQ_IDLE, MK_RQ_HANDLER, MK_RQ_ANSWERED, MK_RQ_REPLY };

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
	const uint8_t *key;     /* is_req: the record's key (instance id) */
	size_t key_len;
};
typedef int (*krec_fn)(void *arg, const struct krec *r, char *err,
    size_t errlen);

void mk_sleep_ms(int ms);
/* The leader refused our epoch: a writer with a role hook demotes itself
 * (hook called later by mk_fire_role()), otherwise the log is broken. */
void mk_fenced(struct mk *k, const char *why);
int mk_connect_leader(struct mk *k, int64_t deadline, char *err,
    size_t errlen);
/* One Fetch at offset o (waiting up to max_wait_ms): hands cb the records
 * in [o, hi), sets *next after the last record read (o if none) and *hw.
 * 0, -1 with err, or -2 when o is below the log start (trimmed). */
int mk_fetch(struct mk *k, int64_t o, int64_t hi, int max_wait_ms,
    krec_fn cb, void *arg, int64_t *next, int64_t *hw, char *err,
    size_t errlen);
/* Produces one record (key, value as-is) with the next sequence. */
int mk_produce_value(struct mk *k, const char *key, const uint8_t *v,
    size_t vlen, int64_t *base, char *err, size_t errlen);
/* Marks the log broken (every later write refused with why) and logs it. */
void mk_set_broken(struct mk *k, const char *why);
void mk_drop_conn(struct mk *k);
/* A connection to any bootstrap server. */
struct mk_conn *mk_connect_any(struct mk *k, char *err, size_t errlen);
/* Creates or checks the topic, then connects k->conn to its leader. */
int mk_ensure_topic(struct mk *k, char *err, size_t errlen);
/* ListOffsets of partition 0 at ts (-2 earliest, -1 latest). */
int mk_list_offset(struct mk *k, int64_t ts, int64_t *out, char *err,
    size_t errlen);
/* Reads every record with an offset in [lo, hi) in order. */
int mk_read_range(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen);
/* The same for the records of snapshot batches only: the other batches
 * are skipped on their first record's key, unread and unchecked (finding
 * the newest snapshot costs a walk over batch headers, not a replay). */
int mk_read_snapshots(struct mk *k, int64_t lo, int64_t hi, krec_fn cb,
    void *arg, char *err, size_t errlen);
/* Produces frames[0..len) as one batch with the next sequence, acks=all;
 * a refusal of our epoch marks the log broken (fenced). */
int mk_produce_frames(struct mk *k, const uint8_t *frames, size_t len,
    uint32_t count, int flags, int64_t *base, char *err, size_t errlen);
/* Promotion, in two halves: the network part (InitProducerId, the claim,
 * the log end after it), run by the log's thread for the asynchronous
 * form, and the switch to the writer's role once the tail has read up to
 * that end (with the thread idle). */
int mk_promote_claim(struct mk *k, int64_t *claim_off, int64_t *end,
    char *err, size_t errlen);
int mk_promote_finish(struct mk *k, int64_t claim_off, char *err,
    size_t errlen);
/* The asynchronous promotion's next step (mlog_kafka.c): called by the
 * async module when jobs were collected or the tail moved. */
void mk_promo_step(struct mk *k);
/* The claim job's result (its promotion's id: a cancelled one's is
 * ignored). */
void mk_promo_claimed(struct mk *k, uint64_t id, int rc, int64_t claim_off,
    int64_t end, const char *why);
/* The async module's part of it: the claim job, a tail Fetch (if none is
 * out), and whether the thread is idle. */
int mk_async_promote(struct mk *k, char *err, size_t errlen);
void mk_async_fetch(struct mk *k);
int mk_async_idle(const struct mk *k);
int mk_async_fetching(const struct mk *k);
const char *mk_async_tail_err(const struct mk *k);

/* mk_produce_frames() flags: a snapshot batch; leave the read position
 * where it is (a claim written while the tail may still be reading, by
 * the log's thread during a promotion). */
#define MK_PF_SNAPSHOT  1
#define MK_PF_KEEP_NEXT 2

/* mlog_kafka_net.c: connections on the network thread's kcluster.  The
 * calls block their calling thread (never the network thread) on a
 * condition variable until kconn answers. */
struct mk_net *mk_net_new(const struct kcluster_config *cfg, char *err,
    size_t errlen);
void mk_net_free(struct mk_net *n);
/* A ready connection (handshake, TLS, SASL done) to host:port within
 * timeout_ms; NULL with err naming the address and the cause. */
struct mk_conn *mk_conn_open(struct mk_net *n, const char *host, int port,
    int timeout_ms, char *err, size_t errlen);
void mk_conn_free(struct mk_conn *c);
/* "host:port" of the connection. */
const char *mk_conn_addr(const struct mk_conn *c);
/* One round trip: req (api_key's request struct) encoded, sent, the
 * answer decoded into resp within timeout_ms.  Decoded strings point into
 * the returned frame: free() it.  NULL with err on a transport error, a
 * timeout (the connection is then closed: free it) or a malformed
 * answer. */
uint8_t *mk_call(struct mk_conn *c, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms, char *err,
    size_t errlen);
/* The same; *unsent says whether a failed request never left (kconn
 * refused it: the connection was already closed), so a Produce that
 * failed that way did not land. */
uint8_t *mk_call_ex(struct mk_conn *c, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms,
    int *unsent, char *err, size_t errlen);
/* The two halves of mk_call_ex(): the request handed to the network
 * thread (NULL with err if it cannot be encoded), then its answer waited
 * for and decoded (resp NULL: only waited for and dropped).  Every
 * started call must be finished, before its connection is freed. */
struct mk_pending;
struct mk_pending *mk_call_start(struct mk_conn *c, int16_t api_key,
    int16_t version, const void *req, int timeout_ms, char *err,
    size_t errlen);
uint8_t *mk_call_finish(struct mk_pending *pd, void *resp, struct karena *a,
    int *unsent, char *err, size_t errlen);
/* mk_call_start() with check run on the answer's body (len bytes, not
 * yet decoded) on the network thread before it is handed over, so work on
 * it is done there while the caller works on the answer before (replay:
 * the batch CRCs).  check_arg is the caller's, written by check only, and
 * read by the caller once mk_call_finish() returned; check is not run on
 * a failed call. */
typedef void (*mk_check_fn)(void *arg, const uint8_t *body, size_t len);
struct mk_pending *mk_call_start_check(struct mk_conn *c, int16_t api_key,
    int16_t version, const void *req, int timeout_ms, mk_check_fn check,
    void *check_arg, char *err, size_t errlen);

/* ---- shared by mlog_kafka.c and mlog_kafka_async.c --------------------- */

/* mlog_kafka.c */
void mk_discard(struct mk *k);
void mk_fire_role(struct mk *k);
/* Applies one record read by the tail (the fence, REPLYs, live apply). */
int mk_tail_rec(struct mk *k, const struct krec *r, char *err,
    size_t errlen);
int mk_tail_once(struct mk *k, int max_wait_ms, char *err, size_t errlen);
/* The tail's Fetch was below the log start (fetch_err): rebuild, or the
 * log goes broken.  0 rebuilt, -1 with err. */
int mk_behind(struct mk *k, const char *fetch_err, char *err,
    size_t errlen);
/* The request producer, ready (connection, producer id). */
int mk_req_ready(struct mk *k, char *err, size_t errlen);
/* The REPLY frame (header and payload) of the request being handled:
 * malloc'ed, NULL when out of memory. */
uint8_t *mk_reply_frame(struct mk *k, int16_t error, const char *msg,
    size_t *len);
/* The same frame appended to the pending frames (the next group). */
int mk_pend_reply(struct mk *k, int16_t error, const char *msg, char *err,
    size_t errlen);
/* Snapshots: the model's records read in batches (on the loop), then
 * written with the producer, on the loop or as a job of the log's
 * thread (mk_compact_async()), then accounted for on the loop. */
struct mk_snap;
struct mk_snap *mk_snap_collect(struct mk *k, mlog_dump_fn dump, void *arg,
    char *err, size_t errlen);
int mk_snap_write(struct mk *k, const struct mk_snap *sn, int64_t *begin,
    char *err, size_t errlen);
void mk_snap_written(struct mk *k, const struct mk_snap *sn, int64_t begin);
void mk_snap_free(struct mk_snap *sn);
/* The writer's requests off the loop: hands the next ones to the
 * handler, one at a time, until one answers later or none is left. */
void mk_rq_pump(struct mk *k);
/* The current request is answered: the next one may go. */
void mk_rq_next(struct mk *k);
/* Drops the current request and the ones fetched after it (a demoted
 * writer: the new one answers them; a failed REPLY: read again). */
void mk_rq_drop(struct mk *k);

/* mlog_kafka_async.c: the I/O thread */
/* On the I/O thread (main log): records the fence / failure in the job,
 * for the loop thread to apply, and returns 1; elsewhere 0. */
int mk_defer_on_thread(struct mk *k, int fenced, const char *why);
int mk_sync_async(struct mlog *ml, mlog_done_fn done, void *arg, char *err,
    size_t errlen);
void mk_wait(struct mlog *ml);
int mk_compact_async(struct mlog *ml, mlog_dump_fn dump, void *arg,
    mlog_done_fn done, void *done_arg, char *err, size_t errlen);
/* Waits until the thread is idle and collects what it finished. */
void mk_quiesce(struct mk *k);
/* Collects finished jobs without waiting; 1 if any. */
int mk_async_collect(struct mk *k);
/* The writer's poll without an event base: 1 to skip this round (a job
 * is out); every tenth time it waits for the thread instead
 * (mk_quiesce()) and says 0. */
int mk_async_busy(struct mk *k);
/* The writer's poll with an event base: collects, starts a look at the
 * log after its own records and, with a request handler, a Fetch of the
 * requests when the ones fetched before are all answered; never waits. */
int mk_async_writer_poll(struct mk *k, char *err, size_t errlen);
/* The next fetched request, not yet handed out; 0 when none is left. */
int mk_async_rq_take(struct mk *k, struct krec *r);
/* Forgets the fetched requests not yet handed out. */
void mk_async_rq_clear(struct mk *k);
/* Writes the REPLY of the current request alone (error, msg), off the
 * loop; the request is answered when it is durable.  0, or -1. */
int mk_async_reply_alone(struct mk *k, int16_t error, const char *msg,
    char *err, size_t errlen);
/* The follower's poll: collects, starts the next Fetch on the thread. */
int mk_async_poll(struct mk *k, int *applied, char *err, size_t errlen);
/* A REPLY read by the tail, for the follower group waiting for it. */
void mk_async_reply(struct mk *k, uint64_t id, int16_t error,
    const char *msg, size_t msg_len);
/* A new writer role: earlier failed writes no longer stop new ones. */
void mk_async_promoted(struct mk *k);
/* The follower groups still waiting for their REPLY end with
 * MLOG_E_RESEND, their requests void (k->void_upto).  Thread idle. */
void mk_async_void_waiting(struct mk *k);
void mk_async_free(struct mk *k);

#endif
