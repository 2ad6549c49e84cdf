/*
 * pipe_int.h: the data plane's internal types, shared by pipeline.c (the
 * partition machine), pipe_cluster.c (brokers, connections, metadata),
 * pipe_copy.c (fetch and produce) and pipe_ident.c (topic and cluster
 * identity).  Nothing outside daemon/pipe*.c includes this.
 */
#ifndef MIRRORD_PIPE_INT_H
#define MIRRORD_PIPE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "batch.h"
#include "kbuf.h"
#include "kconn.h"
#include "mstate.h"
#include "pipeline.h"

struct event;
struct event_base;
struct evdns_base;
struct mirrorconf;
struct metrics_std;
struct pipeline;
struct pcluster;
struct pmirror;
struct ptcreate;

/* ---- clusters -------------------------------------------------------- */

struct pbroker {
	struct pcluster *cl;
	int32_t id;
	char *host;
	int port;
	struct kconn *conn;
	int ready;
	int fetching;         /* a Fetch is outstanding (source side) */
	int64_t retry_at;     /* no reconnect before (mono ms) */
	int failures;         /* consecutive connection failures */
};

struct ptopicmd {
	char *name;
	int16_t error;
	int32_t npart;
	int32_t *leader;      /* by partition index, -1 none */
	struct kuuid id;      /* topic id; all zero when unknown (Metadata < v10) */
};

struct pcluster {
	struct pipeline *pl;
	char label[96];              /* "source of mirror X" / "destination" */
	int is_source;
	char **boot_host;
	int *boot_port;
	size_t nboot, boot_next;
	struct kconn_config kcfg;
	struct kconn *ctl;           /* Metadata and InitProducerId */
	int ctl_ready;
	int64_t ctl_retry_at;
	int ctl_failures;
	struct pbroker **brokers;
	size_t nbrokers;
	struct ptopicmd *topics;
	size_t ntopics;
	int md_inflight, md_wanted, md_ok_once;
	uint32_t md_gen;             /* bumps with every Metadata answer */
	int64_t md_not_before, md_last_ok, md_interval_ms;
	char *cluster_id;
	/* Destination: mirrord's idempotent producer identity. */
	int64_t pid;
	int16_t pepoch;
	int pid_state;               /* 0 none, 1 asking, 2 have, 3 unsupported */
	int64_t pid_not_before;
	char *pid_file;              /* where the identity is kept across restarts */
	int64_t saved_pid;           /* from pid_file, -1 none */
	int16_t saved_epoch;
	char *saved_cluster;         /* the destination cluster id it belongs to */
	int64_t used_pids[16];       /* producer ids mirrord wrote with, newest first */
	size_t nused;
	int dying;
};

/* ---- partitions ------------------------------------------------------ */

/* One batch fetched and waiting for its Produce. */
struct pbatch {
	TAILQ_ENTRY(pbatch) link;
	uint8_t *buf;                /* owned */
	size_t len;
	int64_t src_base, src_next;  /* source offsets it covers */
	int64_t dst_base;            /* where it must land */
	int32_t count;
	int32_t epoch;
	int64_t max_ts;
	struct batch_offset_pair *anchors; /* persisted before sending; owned */
	size_t nanchors;
	int anchored;                /* its anchors are recorded */
};
TAILQ_HEAD(pbatchq, pbatch);

enum pstep {
	PS_IDLE,     /* not copying (paused, stopped, failed, waiting) */
	PS_SYNC,     /* reading the destination end */
	PS_OOR,      /* reading the source log start after OFFSET_OUT_OF_RANGE */
	PS_RUN,      /* fetching and producing */
	PS_PROVE,    /* checking that mirrord wrote the destination end (pipe_prove.c) */
};

struct ppart {
	struct pmirror *pm;
	struct mpart *mp;            /* NULL once the mirror is deleted */
	char *topic;
	int32_t index;
	int refs;                    /* outstanding request contexts */
	int dead;
	uint32_t gen;                /* bumps whenever queued work is dropped */
	enum pstep step;
	int step_inflight;           /* a ListOffsets of SYNC/OOR is out */
	int64_t not_before;          /* backoff (mono ms) */
	int64_t retry_at;            /* FAILED: retry time, 0 none */
	int attempts;

	/* Positions. */
	int64_t src_fetch;           /* next source offset to fetch */
	int64_t src_copied;          /* source offset after the last queued batch */
	int64_t dst_tail;            /* destination offset after the last queued batch */
	int64_t dst_next;            /* destination end as far as we know */
	int64_t src_done;            /* source offset matching dst_next, -1 */
	int64_t sync_lo, sync_hi;    /* a SYNC after an uncertain Produce expects one of these */
	/* PS_PROVE (pipe_prove.c): the end being proven, the next offset to
	 * read back, the lowest foreign offset seen, the last foreign batch. */
	int64_t prove_end, prove_at, prove_lo, proven_end;
	int64_t prove_pid, prove_hi, prove_hib;
	int32_t prove_seq;
	int prove_steps;
	int skip_over_once;          /* RecoverMirrorTopics' skip-over decision */
	int fetch_inflight;
	struct pbatch *sending;      /* the Produce in flight */
	struct pbatch *unsure;       /* an uncertain Produce's anchored batch (pipe_copy.c) */
	struct pbatchq q;
	size_t qbytes;
	int64_t last_src;            /* last source offset copied, -1 */
	int32_t last_epoch;
	/* The source's last stable offset (live.last_stable_offset) stands
	 * still below its high watermark since lso_since (mono ms, 0 when it
	 * does not); lso_warned once pipeline.stuck_lso_warn_ms passed. */
	int64_t lso_since;
	int lso_warned;
	/* The destination log start from Produce responses (-1 unknown) and
	 * when the translation map may next be trimmed (mono ms). */
	int64_t dst_log_start;
	int64_t trim_at;
	/* A Fetch was out of range below the source log start: source offsets
	 * from deleted_from were deleted (DeleteRecords or retention) before
	 * mirrord copied them; reported with the first batch after (-1 none). */
	int64_t deleted_from;

	/* Leaders, cached per metadata generation. */
	struct pbroker *src_leader, *dst_leader;
	uint32_t src_md_gen, dst_md_gen;
	/* A Fetch got a leader error (the topic unknown, being deleted, maybe
	 * recreated): no Fetch until a Metadata answer newer than
	 * src_gone_gen, which pipe_ident.c checks first (Fetch names topics,
	 * not ids). */
	int src_gone;
	uint32_t src_gone_gen;

	struct pipeline_live live;
	struct pipeline_live reported; /* counters as last given to metrics */
};

struct pmirror {
	struct pipeline *pl;
	const struct mirror *m;      /* NULL once deleted */
	char *name;
	struct mirrorconf *conf;
	struct pcluster *src;
	struct ppart **parts;
	size_t nparts;
	char unusable[600];          /* why src is NULL */
	struct srcfiles *files;      /* reading the source's files; src NULL meanwhile */
	int files_failed;            /* src NULL because a file could not be used */
	int64_t files_retry_at;      /* then: read them again from (monotonic ms) */
	int64_t files_backoff_ms;
	int resolve_failed;          /* src NULL because a config did not resolve
	                              * (retried at files_retry_at) */
	struct secrets_resolve *resolving; /* reading the files references name */
	int64_t files_started_ms;    /* when the running read was queued */
	struct ptcreate **creates;   /* destination topics being created */
	size_t ncreates;
	struct pabsent *absent;      /* topics missing from Metadata (pipe_ident.c) */
	size_t nabsent;
	int dead;
};

struct pipeline {
	struct event_base *base;
	struct evdns_base *dns;
	struct mstate *st;
	const struct config *cfg;
	struct event *kick_ev, *tick_ev;
	struct pcluster *dst;
	struct pmirror **mirrors;
	size_t nmirrors;
	int model_dirty;
	size_t qbytes;
	struct metrics_std *ms;      /* may be NULL (tests) */
	int started;
	int64_t started_ms;
	struct pipeline_totals totals;
	int draining;
	void (*drain_cb)(void *arg);
	void *drain_arg;
	size_t hint_mirror, hint_part; /* part_of(): where the last answer was */
	struct ppart **graveyard;    /* dead partitions with refs left */
	size_t ngrave;
};

/* pipeline.c */
void pl_kick(struct pipeline *pl);
void pl_part_fail(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same, never retried automatically (an operator must decide). */
void pl_part_fail_final(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void pl_part_resync(struct ppart *p, const char *why);
void pl_part_unref(struct ppart *p);
void pl_drop_queue(struct ppart *p);
void pbatch_free(struct pbatch *b);
int pl_part_wants_run(const struct ppart *p);
int64_t pl_backoff_ms(const struct pipeline *pl);

/* pipeline.c: metrics of one finished request (kconn stats callback). */
/* Counts a partition-level Kafka error of a Produce (0) or Fetch (1). */
void pl_kafka_error(struct pcluster *cl, int16_t api_key, int16_t code);
void pl_request_stats(void *arg, int16_t api_key, int err, int64_t latency_us,
    size_t request_bytes, size_t response_bytes);

void pl_update_lag(struct ppart *p);
/* A Fetch answer's last stable offset and high watermark for p. */
void pl_note_lso(struct ppart *p, int64_t lso, int64_t hwm);
/* How long p's source LSO has stood still below the high watermark, once
 * that is at least pipeline.stuck_lso_warn_ms (0 turns it off); else 0. */
int64_t pl_lso_stuck_ms(const struct ppart *p, int64_t now);

/* pipe_cluster.c */
struct pcluster *pcluster_new(struct pipeline *pl, const char *label,
    int is_source, const char *bootstrap, const char *const *names,
    const char *const *values, size_t n, char *err, size_t errlen);
void pcluster_free(struct pcluster *cl);
/* The leader broker of topic/partition, or NULL (a refresh is asked). */
struct pbroker *pcluster_leader(struct pcluster *cl, const char *topic,
    int32_t partition);
/* The same through p's cache (is_dst picks the side): O(1) until the next
 * Metadata answer. */
struct pbroker *ppart_leader(struct ppart *p, int is_dst);
/* The topic's metadata, or NULL. */
const struct ptopicmd *pcluster_topic(const struct pcluster *cl,
    const char *topic);
/* A ready connection to b, or NULL (connecting, or backing off). */
struct kconn *pbroker_conn(struct pbroker *b);
void pcluster_want_metadata(struct pcluster *cl);
/* The ready control connection, or NULL (connecting or backing off). */
struct kconn *pcluster_ctl(struct pcluster *cl);
/* Periodic work: metadata, producer id, reconnects. */
void pcluster_tick(struct pcluster *cl);
/* Destination: keep the producer identity in dir/producer-id, reuse it. */
void pcluster_load_pid(struct pcluster *cl, const char *dir);
/* Destination: drop the identity (the broker refused it). */
void pcluster_reset_pid(struct pcluster *cl);
/* Destination: 1 if mirrord produced with pid (now or kept from before). */
int pcluster_pid_known(const struct pcluster *cl, int64_t pid);

/* pipe_copy.c */
void pcopy_fetch_round(struct pmirror *pm);
void pcopy_produce_round(struct pipeline *pl);
void pcopy_sync(struct ppart *p);
void pcopy_oor(struct ppart *p);
/* The destination end d is known (and proven): where to fetch from. */
void pcopy_sync_done(struct ppart *p, int64_t d);

/* pipe_prove.c: 0 when destination end d may be used now; -1 when the
 * partition failed or a PS_PROVE walk was started (it calls
 * pcopy_sync_done() once proven). */
int pprove_start(struct ppart *p, int64_t d);
void pprove_send(struct ppart *p);
/* pipe_topic.c: a missing destination topic.  1 exists, 0 wait, -1 fail
 * with msg. */
int ptopic_ensure(struct ppart *p, char *msg, size_t msglen);
int ptopic_grow(struct ppart *p, int32_t have, char *msg, size_t msglen);
void ptopic_forget_all(struct pmirror *pm);

/* Source metadata arrived: discovery and deletion (pipeline.c). */
void pl_source_metadata(struct pmirror *pm);

/* pipe_ident.c: topic and cluster identity.  pident_source() checks the
 * mirror's source cluster id (0, or -1 when the partitions were failed and
 * nothing else must be done); pident_source_topic() the topic's source
 * topic id and presence: 1 when the topic was failed or stopped or is
 * missing (the caller skips it), 0 to go on.  pident_destination() checks
 * every mirrored topic against a destination Metadata answer. */
int pident_source(struct pmirror *pm);
int pident_source_topic(struct pmirror *pm, struct mtopic *mt,
    const struct ptopicmd *md);
void pident_destination(struct pipeline *pl);
/* Before a partition (re)starts (SYNC): 0 when its topic's ids in the
 * last Metadata answers differ from the recorded ones (p is then FAILED),
 * else 1.  So a plain retry or RecoverMirrorTopics cannot copy from or
 * into a recreated topic before the next answer fails it again. */
int pident_restart_ok(struct ppart *p);
void pident_forget(struct pmirror *pm);
/* 1 if error is a reason pipe_ident.c gives. */
int pident_is_identity_failure(const char *error);

#endif
