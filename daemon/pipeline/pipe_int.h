/*
 * pipe_int.h: the data plane's internal types, shared by pipeline.c (the
 * partition machine), pipeline/pcluster.c (brokers, connections, metadata),
 * pipeline/copy.c (fetch and produce), pipeline/ident.c (topic and cluster
 * identity), pipeline/epoch.c (source leader epochs, divergence), pipeline/tconf.c
 * (topic configs following the source) and pipeline/acl.c (ACL sync, read-only
 * topics).  Nothing outside daemon/pipe*.c includes this.
 */
#ifndef MIRRORD_PIPE_INT_H
#define MIRRORD_PIPE_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "batch.h"
#include "kbuf.h"
#include "kcluster.h"
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
struct ptdelete;
struct ptconf;
struct pacl;
struct paclorph;
struct pl_snext;
struct awrite;
struct pmarks;
struct pfsess;
struct sync_pend;
struct pknown_ent;

/* ---- health (pipeline/health.c) ---------------------------------------------- */

/* Why a request to a cluster failed, by kind (the cause label of
 * mirrord_mirror_source_errors_total). */
#define PH_CAUSES(X) \
	X(NONE, "none") \
	X(REFUSED, "connection_refused") \
	X(TIMEOUT, "timeout") \
	X(DNS, "dns") \
	X(TLS, "tls") \
	X(SASL, "sasl_authentication") \
	X(AUTHZ, "authorization") \
	X(UNKNOWN_TOPIC, "unknown_topic") \
	X(LEADER, "leader_unavailable") \
	X(TRANSPORT, "transport") \
	X(CONFIG, "config") \
	X(OTHER, "other")

enum ph_cause {
#define X(e, s) PH_##e,
	PH_CAUSES(X)
#undef X
	PH_NCAUSES
};

/*
 * What one party of the data plane answered lately: a cluster's Metadata,
 * a broker's data requests (Fetch on a source, Produce on the
 * destination), a partition's own part of those answers.  ok_ms is the
 * last good answer; fail_since the first failure after it (0: none since),
 * fail_ms the latest, with its cause and words.  Wall-clock ms: these
 * times are shown to operators ("since 2026-12-06T13:04:05Z").
 */
struct phealth {
	int64_t ok_ms;
	int64_t fail_since;
	int64_t fail_ms;
	int cause;             /* enum ph_cause */
	char why[320];
};

/* ---- clusters -------------------------------------------------------- */

#define PID_POOL_MAX 256          /* fresh producer ids kept or asked for */
#define PID_INFLIGHT_MAX 64       /* InitProducerId requests out at once */

/* The data plane's own state of one broker; its connection is the
 * kcluster's (pbroker_conn).  Never freed before the cluster: request
 * contexts point at them. */
struct pbroker {
	struct pcluster *cl;
	int32_t id;
	int fetching;         /* a Fetch is outstanding (source side) */
	size_t fetch_next;    /* index in the mirror's parts where the next
	                       * Fetch starts (round robin, pipeline/copy.c) */
	struct pfsess *fsess; /* Fetch session with it (pipeline/fsess.h), or NULL */
	int produce_reqs;     /* Produce requests to it not yet answered
	                       * (destination side, pipeline/copy.c) */
	struct phealth health; /* its Fetch (source) or Produce (destination)
	                        * answers and its connection (pipeline/health.c) */
};

/*
 * A cluster of the data plane: one kcluster (bootstrap, metadata of the
 * topics with leaders and leader epochs, per-broker connections with
 * backoff, a control connection; kcfg.conn is the connection and security
 * config) and what the data plane keeps about it.
 */
struct pcluster {
	struct pipeline *pl;
	char label[96];              /* "source of mirror X" / "destination" */
	int is_source;
	struct kcluster_config kcfg;
	struct kcluster *kc;
	struct pbroker **brokers;    /* every broker seen, by first sight */
	size_t nbrokers;
	int md_ok_once;              /* a Metadata answer came */
	struct phealth md;           /* Metadata answers (pipeline/health.c) */
	int64_t born_ms;             /* wall clock when it was made */
	uint32_t md_gen;             /* bumps with every Metadata answer */
	int md_epochs;               /* the last answer had leader epochs (v7+) */
	char *cluster_id;            /* the last one answered (kept when an answer has none) */
	/* Destination: producer ids (pipeline/pcluster.c).  Every partition
	 * writes with an identity of its own (struct ppart's pid); fresh ids
	 * come from this pool, which InitProducerId fills on demand. */
	struct { int64_t pid; int16_t epoch; } pid_pool[PID_POOL_MAX];
	size_t npool;
	size_t pid_demand;           /* partitions that found the pool empty */
	int pid_inflight;            /* InitProducerId requests out */
	int pid_unsupported;         /* no InitProducerId v0+: produce without ids */
	int64_t pid_not_before;
	int pid_failures;            /* consecutive refusals */
	int16_t pid_error;           /* the last refusal's error code, 0 none */
	int64_t pid_refused_at;      /* and when (mono ms) */
	char pid_why[400];           /* and its reason */
	/* Producer ids of mirrord versions that used one id for every
	 * partition (storage.data_dir/producer-id, read only): their
	 * batches carry sequence = offset; pipeline/prove.c recognises them. */
	char *pid_file;
	char *legacy_cluster;        /* the destination cluster id they belong to */
	int64_t used_pids[16];
	size_t nused;
	int dying;
};

/* ---- partitions ------------------------------------------------------ */

/* Most batches of one partition in flight (the broker's idempotence
 * window; pipeline.max_inflight_batches_per_partition). */
#define PL_INFLIGHT_MAX 5

/*
 * A Fetch answer's buffer (kconn_take_frame()) that queued batches point
 * into instead of copies of their own; freed with the last of them.
 * *extra (pipeline.pin_extra) counts its bytes that no live batch covers,
 * so the whole buffer counts against the memory cap while any of it is
 * held (pipeline/copy.c "Memory").
 */
struct pbuf_pin {
	uint8_t *buf;
	size_t size;
	int refs;            /* batches in it, +1 while its answer is taken in,
	                      * +1 a loan (struct ploan) */
	size_t *extra;       /* &pipeline.pin_extra; &own once the pipeline
	                      * is gone and only loans hold it */
	size_t own;
};

/*
 * A batch's bytes lent to a Produce request (kconn_send_lent(): sent by
 * reference, not copied), until the connection has written or dropped
 * them.  It holds a reference to the batch's pin, so the bytes stay (and
 * stay counted, in pin_extra once the batch is freed) until released;
 * a batch whose bytes are lent is not rewritten in place (prepare_head()
 * copies it first).  pipeline.lent is the bytes of the loans not yet
 * released (the destination connections' unsent bytes that are not
 * copies).
 */
struct ploan {
	struct kconn_loan base;      /* first: kconn hands it back */
	struct pipeline *pl;         /* NULL once the pipeline is freed */
	struct pbuf_pin *pin;
	struct pbatch *b;            /* NULL once freed or copied away */
	size_t n;
	TAILQ_ENTRY(ploan) link;     /* pipeline.loans */
};
TAILQ_HEAD(ploanq, ploan);
/* Forgets the pipeline's loans (pipeline_free()): they release later. */
void pl_loans_orphan(struct pipeline *pl);
/* A loan of b's n bytes at p (b->buf, b->len) to a request; NULL when b
 * is not those bytes, is lent already, or out of memory. */
struct kconn_loan *pl_lend_batch(struct pipeline *pl, struct pbatch *b,
    const uint8_t *p, size_t n);
/* q's bytes lent to a request not written yet: a copy of its own instead
 * (the loan keeps the old bytes for that request).  0, or -1 out of
 * memory. */
int pbatch_unlend(struct pbatch *q);
/* batch_rewrite_header() of q in place (b parsed from q's bytes), after
 * pbatch_unlend(): a request queued before and not written yet keeps the
 * bytes it was sent with.  0, or -1 with err set. */
int pbatch_rewrite(struct pbatch *q, struct batch *b,
    const struct batch_rewrite *rw, char *err, size_t errlen);

/* Drops one reference to pin: a batch of len bytes in it (0: the answer's
 * own); frees it with the last. */
void pbuf_pin_drop(struct pbuf_pin *pin, size_t len);

/* One batch fetched and waiting for its Produce. */
struct pbatch {
	TAILQ_ENTRY(pbatch) link;
	uint8_t *buf;                /* owned, or in pin */
	struct pbuf_pin *pin;        /* the Fetch answer buf lies in, or NULL */
	struct ploan *loan;          /* its bytes lent to a request not yet
	                              * written, or NULL */
	size_t len;
	int64_t src_base, src_next;  /* source offsets it covers */
	int64_t dst_base;            /* where it must land */
	int32_t count;
	int32_t epoch;
	int64_t max_ts;
	struct batch_offset_pair *anchors; /* persisted before sending; owned */
	size_t nanchors;
	int anchored;                /* its anchors are recorded */
	int64_t wpid;                /* the producer id and epoch it was last */
	int16_t wepoch;              /* prepared with (prepare_head()) */
	int merged;                  /* source batches merged into it (0: one,
	                              * as it came; mirror.coalesce.max.bytes) */
	int walked;                  /* the source's bytes, uncompressed, and
	                              * batch_has_holes() walked its records
	                              * (the strict check need not again) */
	/* persist_anchors() progress, across asynchronous metadata writes:
	 * 0 nothing done (its epoch next, at the head), 1 its anchors from
	 * pidx on to record, 2 in the part-anchors write in flight (up to
	 * pidx), 3 all durable. */
	int pstep;
	size_t pidx;
};
TAILQ_HEAD(pbatchq, pbatch);

enum pstep {
	PS_IDLE,     /* not copying (paused, stopped, failed, waiting) */
	PS_SYNC,     /* reading the destination end */
	PS_OOR,      /* reading the source log start after OFFSET_OUT_OF_RANGE */
	PS_RUN,      /* fetching and producing */
	PS_PROVE,    /* checking that mirrord wrote the destination end (pipeline/prove.c) */
	PS_EPOCH,    /* checking that the source still holds what was mirrored
	              * (OffsetForLeaderEpoch, pipeline/epoch.c) */
};

struct ppart {
	struct pmirror *pm;
	struct mpart *mp;            /* NULL once the mirror is deleted */
	char *topic;
	int32_t index;
	int refs;                    /* outstanding request contexts */
	int dead;
	int buried;                  /* part_bury() ran: pm->parts no longer
	                              * holds it, the last unref frees it */
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
	int64_t sync_at[PL_INFLIGHT_MAX + 1]; /* or one of these (pipelined) */
	int nsync_at;
	/* PS_PROVE (pipeline/prove.c): the end being proven, the next offset to
	 * read back, the lowest foreign offset seen, the last foreign batch. */
	int64_t prove_end, prove_at, prove_lo, proven_end;
	int64_t prove_pid, prove_hi, prove_hib;
	int32_t prove_seq;
	int prove_steps;
	int skip_over_once;          /* RecoverMirrorTopics' skip-over decision */
	int prove_strict;            /* the end after a halt is past every batch sent:
	                              * mirrord's batch must end there (a deposed
	                              * owner's, same identity), else FAILED */
	/* retract_fenced() asked for a fenced SYNC (retract_arm); the run it
	 * starts (gen retract_gen, retract_ok) may drop the anchors recorded
	 * above the destination end (persist_anchors()). */
	int retract_arm, retract_ok;
	uint32_t retract_gen;
	int seq_probe;               /* a sequence error under the identity the
	                              * deposed owner shares: SYNC reads the end
	                              * before the identity changes (pipeline/copy.c
	                              * identity_shared()) */
	/* Failback (pipeline/prove.c): fb_state 0 not looked at, 1 reading the
	 * source's mark, 2 done; fb_last/fb_epoch: where a mirror of the
	 * destination cluster stopped copying this partition (-1 none);
	 * fb_next: the source offset after it (the mark's dst=, fb_last + 1
	 * when offsets were identical); fb_mirror: that mirror's name. */
	int fb_state;
	int64_t fb_last;
	int32_t fb_epoch;
	int64_t fb_next;
	char *fb_mirror;
	/* The destination after fb_last (pipeline/preserve.c): pv_state (enum
	 * pv_step) 0 none; the scan (read_committed, from
	 * fb_last to pv_end) and, once decided, the preserve of offsets
	 * pv_from..pv_end-1 into pv_topic; the next offset pv_at; the batch
	 * to produce (pv_buf, pv_len, its pv_count records, ending before
	 * pv_next).  Counts of the scan or the copy: committed records
	 * (pv_records in pv_batches, destination offsets pv_first..pv_last),
	 * transaction markers (pv_markers) and aborted batches (pv_skipped
	 * counts both, pv_aborted the aborted records); pv_open: the last
	 * stable offset an open transaction holds the scan at (-1 none);
	 * pv_bad: 1 the batch holding fb_last is not the one mirrored
	 * (pv_bad_*), 2 fb_last is no longer there.  The aside writes: a
	 * producer identity of their own (pv_pid, numbered from 0) and the
	 * aside offsets they landed at (pv_aside_lo..pv_aside_hi).  pv_note:
	 * what the last failback check found and did (DescribeMirrors). */
	int pv_state;
	int preserve_once;           /* RecoverMirrorTopics' preserve decision */
	char *pv_topic;
	int64_t pv_from, pv_end, pv_at, pv_next;
	uint8_t *pv_buf;
	size_t pv_len;
	size_t pv_held;              /* pv_buf's bytes in pl->dreads */
	int32_t pv_count;
	int64_t pv_records, pv_batches, pv_skipped;
	int64_t pv_first, pv_last, pv_markers, pv_aborted, pv_open;
	int pv_bad;
	int64_t pv_bad_base, pv_bad_last;
	int32_t pv_bad_epoch;
	int64_t pv_pid;
	int16_t pv_pepoch;
	int32_t pv_seq;
	int64_t pv_aside_lo, pv_aside_hi;
	int64_t pv_wait_since, pv_wait_log; /* mono ms: waiting for pv_open */
	char *pv_note;
	/* Consumer-group offset sync (groupsync.c): where the final sync
	 * of a STOPPING partition is (GS_FINAL_*, groupsync.h), and until
	 * when it may run (mono ms).  A STOPPED partition is never synced. */
	int gs_final;
	int64_t gs_final_at;
	/* STOPPING: the source high watermark for the failover report, 0 not
	 * asked, 1 asked (until final_deadline, mono ms), 2 given up (or
	 * answered with an error), 3 answered, 4 to be asked again (no
	 * connection yet, until final_deadline). */
	int final_ask;
	int64_t final_deadline;
	int stop_dst;                /* STOPPING, src_done unknown in this
	                              * process: the destination end 0 not
	                              * asked, 1 to be asked, 2 asked (or
	                              * given up) */
	/* The producer identity p writes with (pipeline/copy.c, see HACKING.md
	 * "Producer identities"): pid -1 until taken (the last of
	 * mp->producers, or a fresh id from the destination's pool);
	 * seq_base -1 while the identity is new and not yet recorded (the
	 * first batch's offset becomes sequence 0 and is recorded before the
	 * batch is sent); pid_fresh: the kept one must not be reused;
	 * pid_wait_since: waiting for the pool (mono ms, 0 not waiting);
	 * last_send_ms: the last Produce sent; unsure_sent_ms: when the
	 * newest Produce whose fate is unknown was sent (the start of this
	 * process counts as one: the previous one may have left requests in
	 * a broker), the fence delay after a sequence error runs from it. */
	int64_t pid;
	int16_t pepoch;
	int64_t seq_base;
	int pid_fresh;
	int64_t pid_wait_since;
	int64_t last_send_ms;
	int64_t unsure_sent_ms;
	int fetch_inflight;
	/*
	 * Pipelined produce (pipeline/copy.c): the batches sent and not answered,
	 * oldest first, all on one connection (inflight_conn), at most
	 * pipeline.max_inflight_batches_per_partition of them.  halt: an
	 * answer was not a success (or never came); nothing more is sent
	 * until the rest are answered, then settle() acts once on halt_kind
	 * (the first failure's, escalated by later uncertain ones): the
	 * failed batches (failed, in order) go back to the queue, or the
	 * destination end is re-read (SYNC, expecting halt_lo..halt_hi), or
	 * the identity changes, or the partition already FAILED.
	 */
	struct pbatchq inflight;
	int ninflight;
	struct kconn *inflight_conn;
	int halt;                    /* enum in pipeline/copy.c, 0 none */
	int halt_unsure;             /* some answer since left the outcome open */
	uint32_t halt_gen;           /* gen when the halt began */
	int16_t halt_error;          /* the first failure's error code */
	int64_t halt_lo, halt_hi;    /* destination offsets the failed batches cover */
	char halt_why[200];
	struct pbatchq failed;       /* answered, not appended (or not known), in order */
	/* The destination acknowledged a batch of producer id known_pid epoch
	 * known_epoch since the partition last started: the broker holds that
	 * identity's sequence state, so a batch after a refused one is
	 * refused too.  Until then one batch at a time (part_depth()). */
	int seq_known;
	int64_t known_pid;
	int16_t known_epoch;
	size_t merge_limit;          /* the destination refused a merged batch as
	                              * too large: runs up to this many bytes
	                              * (0: mirror.coalesce.max.bytes) */
	struct pbatchq unsure;       /* an uncertain Produce's anchored batches (pipeline/copy.c) */
	struct pbatchq q;
	size_t qbytes;               /* bytes of q, inflight and failed */
	size_t ubytes;               /* bytes of unsure */
	int64_t last_src;            /* last source offset copied, -1 */
	int32_t last_epoch;          /* newest epoch in the epoch history */
	/* Source leader epochs (pipeline/epoch.c): fetch_epoch is the epoch of the
	 * source batch ending at fetch_epoch_end, the LastFetchedEpoch of a
	 * Fetch at that offset (-1 none).  PS_EPOCH: the epoch asked about,
	 * the source offset after the last mirrored record, the destination end
	 * and the source offset to resume at. */
	int32_t fetch_epoch;
	int64_t fetch_epoch_end;
	int32_t check_epoch;
	int64_t check_src_end, check_dst_end, check_resume;
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
	 * src_gone_gen, which pipeline/ident.c checks first (Fetch names topics,
	 * not ids). */
	int src_gone;
	uint32_t src_gone_gen;

	struct pipeline_live live;
	struct pipeline_live reported; /* counters as last given to metrics */
	/*
	 * What is known and since when (pipeline/health.c).  src and dst: this
	 * partition's own part of the source's answers (a Fetch or ListOffsets
	 * part without error confirms live.source_high_watermark at src.ok_ms)
	 * and of the destination's (Produce, SYNC).  caught_ms: the wall-clock
	 * moment of the newest source answer after which the destination was
	 * seen holding everything up to that answer's end (0 unknown).
	 * run_since: when p last started fetching (PS_RUN), from which a
	 * silence of the source is timed.  PAUSED: paused_lo_at is when its
	 * source end is asked next (mono ms), paused_lo 1 while asked.
	 */
	struct phealth src, dst;
	int64_t caught_ms;
	int64_t run_since;
	int64_t paused_lo_at;
	int paused_lo;
	/* Multi-instance mode (pipeline.c "ownership"): owned is 1 while this
	 * instance copies p (always in single mode); own_gen bumps when it
	 * stops owning p, and an answer to a request sent under an older
	 * own_gen (a Produce of the deposed owner) is ignored. */
	int owned;
	uint32_t own_gen;
	/* An asynchronous metadata write of p's head batch is in flight
	 * (pipeline/copy.c persist_anchors()/prepare_head(); it holds a ref):
	 * the batch is not sent before it completes, and p starts no other
	 * write meanwhile (validation sees only completed writes).  The gens
	 * it was started under, what it records (the callback's message) and
	 * its kind. */
	int mwrite;
	int64_t mwrite_wall;       /* when the write began (wall ms) */
	uint32_t mwrite_gen, mwrite_og;
	int mwrite_kind;
	int64_t mwrite_off;
	char mwrite_what[200];
	/* An asynchronous state change of p is in flight (pl_part_state(),
	 * it holds a ref): p is frozen until it completes (part_step() does
	 * nothing, no request is started) and starts no other state write;
	 * the gens it was started under, the state it goes to and what runs
	 * once it is durable (gens unchanged, the model in that state). */
	int swrite;
	int64_t swrite_wall;       /* when the state write began (wall ms) */
	uint32_t swrite_gen, swrite_og;
	int swrite_to;
	void (*swrite_then)(struct ppart *p);
	/* State changes asked for while one is in flight, in order: each is
	 * started (validated against the model) once the one before it
	 * completes, so the loop never waits for the first. */
	struct pl_snext *snext_head, *snext_tail;
};

/*
 * A follower's metadata write (every mstate_* / mpart_* call that persists,
 * in cluster mode) first applies, live, what other instances wrote before
 * its request: that may fire the hooks that take a partition from this
 * instance (part_lose(): its queue, batches in flight and unsure batches
 * are freed, own_gen bumps) or delete its mirror (the model's mirror,
 * topics and mparts are freed; p->mp goes NULL, p->dead 1, own_gen bumps;
 * the ppart and pmirror themselves stay until the next kick).  So a caller
 * that holds p across such a write notes og = p->own_gen before it and
 * touches nothing but p itself (no pbatch, no mpart, mtopic or mirror it
 * read before) unless pl_part_kept(p, og) afterwards.  A write that
 * succeeded leaves p owned: the writer refuses a request for a partition
 * it no longer owns, and what came after the reply is not applied yet.
 */
static inline int pl_part_kept(const struct ppart *p, uint32_t og)
{
	return p->own_gen == og && !p->dead && p->mp != NULL;
}

struct pmirror {
	struct pipeline *pl;
	const struct mirror *m;      /* NULL once deleted */
	char *name;
	struct mirrorconf *conf;
	struct pcluster *src;
	struct ppart **parts;
	size_t nparts;
	char unusable[600];          /* why src is NULL */
	struct clientfiles *files;      /* reading the source's files; src NULL meanwhile */
	int files_failed;            /* src NULL because a file could not be used */
	int64_t files_retry_at;      /* then: read them again from (monotonic ms) */
	int64_t files_backoff_ms;
	int resolve_failed;          /* src NULL because a config did not resolve
	                              * (retried at files_retry_at) */
	struct secrets_resolve *resolving; /* reading the files references name */
	int64_t files_started_ms;    /* when the running read was queued */
	struct ptcreate **creates;   /* destination topics being created */
	size_t ncreates;
	struct ptdelete **deletes;   /* destination topics being deleted (realign) */
	size_t ndeletes;
	struct pabsent *absent;      /* topics missing from Metadata (pipeline/ident.c) */
	struct ptconf *tconf;        /* topic config sync (pipeline/tconf.c), NULL until the first tick */
	struct pmarks *marks;        /* mirror marks of discovery candidates (pipeline/marks.c) */
	size_t nabsent;
	struct pacl *acl;            /* ACL sync, read-only guard (pipeline/acl.c) */
	int dead;
	/* Source health as logged (pipeline/health.c): down since (wall ms, 0
	 * up), the last line about it (wall ms), the cause then; when src
	 * became unusable (wall ms, 0 while usable); when the mirror was
	 * loaded in this process (wall ms). */
	int64_t down_since;
	int64_t down_logged;
	int down_cause;
	int64_t unusable_since;
	int64_t born_ms;
	/* The mirror's configs were replaced (IncrementalAlterConfigs):
	 * pm_reconfigure() at the next sweep.  src_gen/src_epochs: the
	 * metadata generation and epoch support of a source client that was
	 * dropped, carried into the next one (ppart.src_gone_gen). */
	int reconf;
	uint32_t src_gen;
	int src_epochs;
};

struct pipeline {
	struct event_base *base;
	struct evdns_base *dns;
	struct mstate *st;
	const struct config *cfg;
	struct event *kick_ev, *tick_ev;
	/* kick_cb walks every partition: at scale, sweeps are paced (pl_kick) */
	int64_t last_sweep_ms, sweep_gap_ms;
	struct pcluster *dst;
	struct pmirror **mirrors;
	size_t nmirrors;
	int model_dirty;
	/*
	 * Memory held for record data (pipeline/copy.c "Memory"), all of it under
	 * pipeline.max_inflight_bytes_total: qbytes (batches queued, in flight
	 * to the destination, answered and not settled), ubytes (an uncertain
	 * Produce's anchored batches kept for resending), fetch_reserved (the
	 * largest answers of the Fetches in flight), dreads (reads of the
	 * destination's end: the largest answers of the provenance and
	 * preserve Fetches in flight and the preserved batches held for their
	 * Produce, pl_dread_*), and the Produce request bytes the destination
	 * connections have not written yet (kconn_unsent_bytes); held_peak is
	 * the most of all five at once.
	 * pin_extra: the bytes of Fetch answers' buffers that batches point
	 * into (struct pbuf_pin) outside those batches, so a buffer counts
	 * whole (under fetch_responses); taking: the pin of the answer being
	 * taken in, if any.
	 */
	size_t qbytes;
	size_t ubytes;
	size_t fetch_reserved;
	size_t dreads;
	size_t dread_flight;         /* destination reads in flight */
	int dread_waiting;           /* one was refused room since */
	size_t pin_extra;
	struct pbuf_pin *taking;
	size_t lent;                 /* struct ploan */
	struct ploanq loans;
	int64_t held_peak;
	struct metrics_std *ms;      /* may be NULL (tests) */
	int started;
	int64_t started_ms;
	struct pipeline_totals totals;
	int draining;
	void (*drain_cb)(void *arg);
	void *drain_arg;
	/* mpart -> ppart, open addressing on the mpart pointer (pl_part_of);
	 * rebuilt when pmap_ok is 0 (a partition was buried or it filled). */
	struct ppart **pmap;
	size_t pmap_cap, pmap_n;
	int pmap_ok;
	struct groupsync *gs;        /* consumer-group offset sync */
	struct paclorph *acl_orph;   /* deleted mirrors' ACL bindings (pipeline/acl.c) */
	struct awrite *acl_writes;   /* ACL records waiting or in flight (pipeline/acl.c) */
	struct ppart **graveyard;    /* dead partitions with refs left */
	/* Bumps whenever a partition is lost or its mirror deleted (also in
	 * the middle of a metadata write, see pl_part_kept()). */
	uint64_t losses;
	size_t ngrave;
	/* Multi-instance mode: this instance's id (NULL: single mode, every
	 * partition is copied here); the destination-leader hook and whether a
	 * Metadata answer moved a leader since it last ran. */
	char *instance;
	int controller;  /* pipeline_set_controller() */
	/* pipeline_set_lease(): Produce only before lease_until (monotonic;
	 * INT64_MAX in single mode); lease_off_wall: when it was set to 0;
	 * lease_why: what stops it when it is over. */
	int64_t lease_until, lease_off_wall;
	char lease_why[1100];
	void (*leader_hook)(void *arg);
	void *leader_arg;
	int leaders_changed;
	/* The destination ends asked for in this sweep, one ListOffsets
	 * per broker (pcopy_sync(), pcopy_sync_flush()). */
	struct sync_pend *sync_pend;
	size_t nsync_pend, sync_pend_cap;
	/* What Metadata passes learnt for the metadata log, written in
	 * an exclusive turn (pipeline/meta.c): the noted changes, a hash table
	 * of them (index + 1), the turn (waiting or in flight), how many
	 * changes the write in flight carries and the changes it was made
	 * from (kept until it completes: pmeta_noted()). */
	struct pmeta_w *mw;
	size_t nmw, mw_cap;
	size_t *mw_table;
	size_t mw_tcap;
	int mw_turn;
	size_t mw_queued;
	struct pmeta_w *mw_fl;
	size_t nmw_fl;
	/* What partitions knew of their source before this start
	 * (pipeline/known.c), sorted by key; when it was last saved (mono ms)
	 * and whether that failed (logged once). */
	struct pknown_ent *known;
	size_t nknown;
	int64_t known_saved_ms;
	int known_failed;
	int64_t health_ticked_ms;    /* ph_tick()'s last walk (mono ms) */
};

/* pipeline.c */
void pl_kick(struct pipeline *pl);
/* The live partition record of mp, or NULL: O(1). */
struct ppart *pl_part_of(struct pipeline *pl, const struct mpart *mp);
/* 1 when no partition of pl's mirrors is FAILED with failed(mp) true;
 * else 0 and why: "N partition(s) FAILED <because>, first
 * mirror/topic-index: <error>" (the /readyz checks). */
int pl_ready_unless_failed(const struct pipeline *pl,
    int (*failed)(const struct mpart *mp), const char *because, char *why,
    size_t whylen);
void pl_part_fail(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same, never retried automatically (an operator must decide). */
void pl_part_fail_final(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same for a refusal of the destination's (authorization): retried
 * with backoff for as long as it lasts, mirror.failed.retry.max.attempts
 * notwithstanding; the reason starts with PL_DENIED_PREFIX. */
void pl_part_fail_denied(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define PL_DENIED_PREFIX "destination access denied: "
/* 1 for the authorization errors a destination answers a write with. */
static inline int pl_is_denial(int16_t code)
{
	return code == 29 || code == 31 || code == 53; /* TOPIC_, CLUSTER_,
	                                                 * TRANSACTIONAL_ID_
	                                                 * AUTHORIZATION_FAILED */
}
void pl_part_resync(struct ppart *p, const char *why);
/* 1 if this instance does the mirrors' cluster-wide work (single mode:
 * always; else while it is the metadata writer). */
int pl_controller(const struct pipeline *pl);
/* 1 if this instance copies p (single mode: always; else mpart->owner). */
int pl_part_owned(const struct ppart *p);
void pl_part_unref(struct ppart *p);
/*
 * A state change of p made by the data plane (group commit, HACKING.md
 * "metadata log"): to, why, the retry attempt (FAILED) or, with last set,
 * the last offset and epoch and the failover report fo (STOPPED).  Written
 * asynchronously when the log can (1: p is frozen until it is durable,
 * then `then` runs if p is still where it was, gens unchanged, in state
 * to; a failure is logged with p left in its old state, retried by
 * part_step() a second later).  Asked for while another state write of p
 * is in flight, it is queued behind it (1 as well; validated and started
 * when the one before completes, whose `then` then does not run; a refusal
 * then is logged like a failure).  Synchronously (0: done, then not
 * called) only when the log has no event base or a batch is open; -1 with
 * msg when refused (not an allowed transition, broken log).
 */
struct pl_state_req {
	int to;
	const char *why;
	int32_t retry;
	int last;
	int64_t last_offset;
	int32_t last_epoch;
	const struct mfailover *fo;
	const char *note;   /* with fo: mpart_stopped_report()'s note */
	void (*then)(struct ppart *p);
};
int pl_part_state(struct ppart *p, const struct pl_state_req *rq, char *msg,
    size_t msglen);
/* The state p's last state change asked for goes to (in flight or queued
 * behind it), with its continuation in *then; -1 when none is. */
int pl_part_heading(const struct ppart *p, void (**then)(struct ppart *p));
void pl_drop_queue(struct ppart *p);
/* Everything held for record data now (see struct pipeline), and the
 * Produce request bytes not yet written to the destination alone;
 * pl_held_note() also moves held_peak. */
size_t pl_held_now(const struct pipeline *pl);
size_t pl_held_note(struct pipeline *pl);
size_t pl_unsent_bytes(const struct pipeline *pl);
/*
 * Reads of the destination's end (pipeline/prove.c, pipeline/preserve.c) under
 * the cap, their bytes in pl->dreads.  pl_dread_room(): may a read whose
 * answer may hold want bytes go now?  Yes while it fits under the cap
 * with everything else held, and always when no other destination read
 * is in flight: one read larger than the cap, or one while the copy
 * fills the cap, still makes progress, and a read never waits for one
 * that waits itself (an answered read always ends).
 * pl_dread_start(): a read of want bytes goes (*held = want, counted in
 * flight); pl_dread_grow(): its answer is larger (Kafka returns a first
 * batch whole); pl_dread_done(): answered or failed, *held released, and
 * the pipeline kicked if a read was refused room meanwhile, so it is
 * tried again.
 * pl_dread_set(): bytes held outside a read (a preserved batch waiting
 * for its Produce), *held becomes n.
 */
int pl_dread_room(struct pipeline *pl, size_t want);
void pl_dread_start(struct pipeline *pl, size_t *held, size_t want);
void pl_dread_grow(struct pipeline *pl, size_t *held, size_t n);
void pl_dread_done(struct pipeline *pl, size_t *held);
void pl_dread_set(struct pipeline *pl, size_t *held, size_t n);
/* len bytes of p's fetched batches dropped before the destination
 * acknowledged them (fetched again later). */
void pl_discarded(struct ppart *p, size_t len);
void pbatch_free(struct pbatch *b);
/* Frees every batch of q (no byte accounting). */
void pl_free_batches(struct pbatchq *q);
/* Multi-instance mode, p lost (pipeline.c part_lose()): frees the batches
 * in flight, failed and unsure with their accounting and clears the halt;
 * answers to requests sent before are then ignored by own_gen. */
void pl_produce_forget(struct ppart *p);
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

/* pipeline/pcluster.c */
struct pcluster *pcluster_new(struct pipeline *pl, const char *label,
    int is_source, const char *bootstrap, const char *const *names,
    const char *const *values, size_t n, char *err, size_t errlen);
void pcluster_free(struct pcluster *cl);
/* mirror.metadata.refresh.interval.ms (from the next refresh on). */
void pcluster_set_refresh_ms(struct pcluster *cl, int64_t ms);
int64_t pcluster_refresh_ms(const struct pcluster *cl);
/* 1 once Metadata answered; *age_ms: since the last answer (-1 none). */
int pcluster_ready(const struct pcluster *cl, int64_t *age_ms);
/* The leader broker of topic/partition, or NULL (a refresh is asked). */
struct pbroker *pcluster_leader(struct pcluster *cl, const char *topic,
    int32_t partition);
/* The same through p's cache (is_dst picks the side): O(1) until the next
 * Metadata answer. */
struct pbroker *ppart_leader(struct ppart *p, int is_dst);
/* The topic's metadata (kcluster's), or NULL. */
const struct kcluster_topic *pcluster_topic(const struct pcluster *cl,
    const char *topic);
/* A ready connection to b, or NULL (connecting, or backing off). */
struct kconn *pbroker_conn(struct pbroker *b);
void pcluster_want_metadata(struct pcluster *cl);
/* The ready control connection, or NULL (connecting or backing off):
 * Metadata's own bootstrap connection (kcluster_control_conn). */
struct kconn *pcluster_ctl(struct pcluster *cl);
/* Periodic work: the first metadata, producer ids. */
void pcluster_tick(struct pcluster *cl);
/* Destination: read the producer ids older versions kept in
 * dir/producer-id (recognised by provenance, never produced with). */
void pcluster_load_pid(struct pcluster *cl, const char *dir);
/* Destination: 1 if pid is one of those. */
int pcluster_pid_legacy(const struct pcluster *cl, int64_t pid);
/* Destination: a fresh producer id from the pool: 0, or -1 when the pool
 * is empty (a refill is asked for). */
int pcluster_take_pid(struct pcluster *cl, int64_t *pid, int16_t *epoch);
/* Destination: "User:x" for mirrord's principal there as far as its client
 * configuration says (SASL user name, else the TLS certificate or
 * ANONYMOUS). */
const char *pcluster_principal(const struct pcluster *cl, char *buf,
    size_t len);

/* pipeline/copy.c */
void pcopy_fetch_round(struct pmirror *pm);
void pcopy_produce_round(struct pipeline *pl);
/* SYNC: adds p to the ListOffsets of the destination ends that
 * pcopy_sync_flush() sends at the end of the sweep (one per broker). */
void pcopy_sync(struct ppart *p);
void pcopy_sync_flush(struct pipeline *pl);
void pcopy_oor(struct ppart *p);
/* pipeline/marks.c: 1 when discovery may add topic (cand: every candidate of
 * this pass, asked about together when the answer is not known yet). */
int pmarks_allows(struct pmirror *pm, const char *topic, char **const cand,
    size_t ncand);
void pmarks_forget(struct pmirror *pm);
/* pipeline/preserve.c: the destination after a failback's stop point.
 * ppreserve_scan() reads offsets fb_last..end-1 with read_committed and
 * counts what a consumer would see there (pprove_failback_scanned()
 * decides); ppreserve_start() copies the committed records of
 * from..end-1 into <topic>.diverged-<epoch> (0, or -1 when the name is
 * too long); ppreserve_step() runs either from the prove step (1 while
 * it does, 0 once it is over: pv_state says how).  ppreserve_reset()
 * forgets a scan or copy (the partition starts again); ppreserve_note()
 * is what DescribeMirrors shows of it (1 with buf, 0 nothing). */
void ppreserve_scan(struct ppart *p, int64_t end);
int ppreserve_start(struct ppart *p, int64_t from, int64_t end, int32_t epoch);
int ppreserve_step(struct ppart *p);
void ppreserve_reset(struct ppart *p);
int ppreserve_note(const struct ppart *p, char *buf, size_t len);
/* The note ppreserve_note() shows from now on (pv_note). */
void ppreserve_set_note(struct ppart *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The scan stopped at a transaction open at pv_open: logged (then once a
 * minute) and in the note, saying what waits for it, and read again
 * from there a second later. */
void ppreserve_wait(struct ppart *p, const char *what);
enum pv_step {
	PV_NONE,      /* nothing (pv_state 0) */
	PV_SCAN,      /* reading the destination after fb_last */
	PV_SCANNED,   /* read to pv_end, or to an open transaction: decide */
	PV_CREATE,    /* CreateTopics of pv_topic */
	PV_LEADER,    /* waiting for its partition's leader */
	PV_PID,       /* a producer identity for the aside writes */
	PV_FETCH,     /* the batch holding pv_at, read_committed */
	PV_PRODUCE,   /* pv_buf to the aside partition */
	PV_DONE,      /* copied up to pv_end */
};
/* Reads the source's mark of p's topic and partition for a failback; the
 * answer goes to pprove_failback().  0 when asked, -1 when it cannot be. */
int pmarks_failback(struct ppart *p);
/* pipeline/prove.c: found 0 when the source has no usable mark (src: the
 * cluster the marked mirror copied from; next: the source offset after
 * last, -1 when the mark does not say). */
void pprove_failback(struct ppart *p, int found, const char *src,
    const char *mirror, int64_t last, int32_t epoch, int ident, int64_t next);
/* The scan is over (pv_state PV_SCANNED): the decision. */
void pprove_failback_scanned(struct ppart *p);
/* STOPPING: asks the source leader for the high watermark the failover
 * report compares with (final_hw_response sets live's and final_ask 3
 * when answered, 2 when not).  0 when asked, -1 when it cannot be (no
 * source connection). */
int pcopy_final_hw(struct ppart *p);
/* PAUSED: asks the source leader for its high watermark (and, when the
 * copied end is not known in this process, the destination end first),
 * so a paused partition's lag is the source's.  0 when asked. */
int pcopy_paused_end(struct ppart *p);
/* The destination end d is known (and proven): where to fetch from. */
void pcopy_sync_done(struct ppart *p, int64_t d);
/* The source is known to hold what was mirrored: copy from source offset s
 * into destination end d. */
void pcopy_start_at(struct ppart *p, int64_t d, int64_t s);

/* pipeline/prove.c: 0 when destination end d may be used now; -1 when the
 * partition failed or a PS_PROVE walk was started (it calls
 * pcopy_sync_done() once proven). */
int pprove_start(struct ppart *p, int64_t d);
void pprove_send(struct ppart *p);
/* pipeline/topic.c: a missing destination topic.  1 exists, 0 wait, -1 fail
 * with msg. */
int ptopic_ensure(struct ppart *p, char *msg, size_t msglen);
int ptopic_grow(struct ppart *p, int32_t have, char *msg, size_t msglen);
/* The operator's realign (pipeline/ident.c): DeleteTopics of the destination
 * topic with id (its 22-character form), by id (v6).  1 once the
 * destination said that id is gone (deleted now or before), 0 while
 * waiting (asked, or backing off after a failure), -1 when the last ask
 * failed (msg says why; asked again after the retry backoff). */
int ptopic_delete(struct pmirror *pm, const char *topic, const char *id,
    char *msg, size_t msglen);
/* Forgets what pipeline/topic.c did for topic (a creation done, a deletion):
 * a topic deleted may be created again. */
void ptopic_forget(struct pmirror *pm, const char *topic);
void ptopic_forget_all(struct pmirror *pm);

/* pipeline/tconf.c: destination topic configs follow the source's.
 * ptconf_tick() starts a round every mirror.metadata.refresh.interval.ms;
 * ptconf_warning() gives the topic's refused-configs warning (1, in buf)
 * or 0; ptconf_forget() when the mirror's struct goes. */
void ptconf_tick(struct pmirror *pm, int64_t now);
int ptconf_warning(struct pmirror *pm, const char *topic, char *buf,
    size_t len);
void ptconf_forget(struct pmirror *pm);

/* pipeline/acl.c: ACL bindings follow the source's (mirror.acls.sync) and
 * mirrored topics are read-only (mirror.topic.read.only).  pacl_tick()
 * starts a round every mirror.metadata.refresh.interval.ms (at once when a
 * topic's guard must be lifted); pacl_warning() gives the mirror's
 * warning (1, in buf) or 0; pacl_forget() when the mirror's struct goes.
 * pacl_orphans_tick() removes the read-only bindings of deleted mirrors;
 * pacl_orphans_free() when the pipeline goes, and pacl_writes_free() once
 * the mirrors are gone (their records waiting for the metadata log's turn
 * are dropped: their bindings are neither created nor forgotten). */
void pacl_tick(struct pmirror *pm, int64_t now);
int pacl_warning(struct pmirror *pm, char *buf, size_t len);
void pacl_forget(struct pmirror *pm);
void pacl_orphans_tick(struct pipeline *pl, int64_t now);
void pacl_orphans_free(struct pipeline *pl);
void pacl_writes_free(struct pipeline *pl);

/* pipeline/epoch.c: source leader epochs.  pepoch_start() before a partition
 * (re)starts at destination end d, source offset s, with the last mirrored
 * record ending at source offset s_end: 0 to go on now (nothing to check,
 * or the source keeps no epochs); -1 when a PS_EPOCH check was started
 * (it calls pcopy_start_at() once the source holds what was mirrored, or
 * fails the partition for good naming where the logs part). */
int pepoch_start(struct ppart *p, int64_t d, int64_t s, int64_t s_end);
void pepoch_send(struct ppart *p);
/* The leader epoch Metadata gave for p's source partition, -1 unknown;
 * the same for partition index of topic t (looked up by the caller). */
int32_t pepoch_leader_epoch(struct ppart *p);
int32_t pepoch_topic_leader_epoch(const struct kcluster_topic *t, int32_t index);
/* The LastFetchedEpoch of a Fetch of p at src_fetch, -1 none. */
int32_t pepoch_last_fetched(const struct ppart *p);
/* A Fetch answer of p (error 0) with a DivergingEpoch: 1 when it had one
 * (p re-reads the destination end, whose check names the divergence), 0 if
 * not. */
int pepoch_fetch_diverged(struct ppart *p, int32_t epoch, int64_t end);
/* 1 if error is a divergence reason pipeline/epoch.c gives. */
int pepoch_is_divergence(const char *error);

/* Source metadata arrived: discovery and deletion (pipeline.c). */
void pl_source_metadata(struct pmirror *pm);

/* pipeline/ident.c: topic and cluster identity.  pident_source() checks the
 * mirror's source cluster id (0, or -1 when the partitions were failed and
 * nothing else must be done); pident_source_topic() the topic's source
 * topic id and presence: 1 when the topic was failed or stopped or is
 * missing, or a metadata write deleted the mirror (the caller skips it and
 * checks pm->m), 0 to go on.  pident_destination() checks
 * every mirrored topic against a destination Metadata answer. */
int pident_source(struct pmirror *pm);
int pident_source_topic(struct pmirror *pm, struct mtopic *mt,
    const struct kcluster_topic *md);
void pident_destination(struct pipeline *pl);
/* Before a partition (re)starts (SYNC): 0 when its topic's ids in the
 * last Metadata answers differ from the recorded ones (p is then FAILED),
 * else 1.  So a plain retry or RecoverMirrorTopics cannot copy from or
 * into a recreated topic before the next answer fails it again. */
int pident_restart_ok(struct ppart *p);
/* Before a PREPARING partition reads its destination end (pcopy_sync()):
 * 1 while its topic is being realigned (the destination topic is deleted
 * first), or while the next Metadata pass decides whether the destination
 * topic is the one its write history was recorded in (added again, or
 * after a realign's deletion); p then waits (PS_IDLE, a backoff).  0: go
 * on. */
int pident_start_wait(struct ppart *p);
void pident_forget(struct pmirror *pm);
/* The destination topic id recorded for p's topic, for Produce v13+: 0
 * and *id set, or -1 when none is recorded (yet). */
int pident_dest_id(const struct ppart *p, struct kuuid *id);
/* A topic id as Kafka prints it (22 characters of URL-safe base64) into
 * u: 0, or -1 when s is not one. */
int pident_id_parse(const char *s, struct kuuid *u);
/* 1 if error is a reason pipeline/ident.c gives. */
int pident_is_identity_failure(const char *error);

/* pipeline/meta.c: what a Metadata pass learnt, noted during the pass and
 * written at its end in one group, without blocking the loop (the
 * identities of thousands of topics at a first start, the topics a pattern
 * discovers, growth, the source cluster id, a source topic deleted).  kind
 * PMETA_*; topic NULL for PMETA_SOURCE_ID; which (MTOPIC_IDENT_*) for
 * PMETA_IDENT, the partition for PMETA_FAIL; value the id, or for
 * PMETA_DELETED the reason (the topic's note, and why its partitions go
 * STOPPING), for PMETA_FAIL why the partition goes FAILED with no automatic
 * retry (one without its pipeline record yet), for PMETA_REALIGN_RESET the
 * destination topic id whose write history is dropped, for
 * PMETA_REALIGN_DELETED the id a realign deleted (NULL none); npart for
 * PMETA_GROW and PMETA_ADD.  A change noted again before it is written is kept once
 * (growth: the largest count). */
enum { PMETA_SOURCE_ID, PMETA_GROW, PMETA_ADD, PMETA_IDENT, PMETA_DELETED,
	PMETA_FAIL, PMETA_REALIGN_RESET, PMETA_REALIGN_DELETED };
void pmeta_defer(struct pipeline *pl, int kind, const char *mirror,
    const char *topic, int which, const char *value, int32_t npart);
/* 1 if that change is noted and waits for its turn or is being written. */
int pmeta_noted(const struct pipeline *pl, int kind, const char *mirror,
    const char *topic, int which);
/* At the end of every pass: asks for the turn (mstate_excl_begin()). */
void pmeta_flush(struct pipeline *pl);
/* Shutdown: the turn asked for is given back, the notes dropped. */
void pmeta_free(struct pipeline *pl);

/* pipeline/health.c: what is known and since when (see there). */
const char *ph_cause_name(int cause);
void ph_ok(struct phealth *h, int64_t now);
void ph_vfail(struct phealth *h, int64_t now, int cause, const char *fmt,
    va_list ap) __attribute__((format(printf, 4, 0)));
void ph_fail(struct phealth *h, int64_t now, int cause, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a party of cl, counted when cl is a mirror's source
 * (mirrord_mirror_source_errors_total); wall clock now. */
void ph_cl_fail(struct pcluster *cl, struct phealth *h, int cause,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void ph_count(struct pipeline *pl, const char *mirror, int cause);
/* The cause of a kconn failure (KCONN_E_*, its words) or a Kafka error. */
int ph_conn_cause(int err, const char *errstr);
int ph_kafka_cause(int16_t code);
/* The stall bound: pipeline.request_timeout_ms + mirror.fetch.wait.max.ms. */
int64_t ph_bound_ms(const struct pmirror *pm);
/* p's source answered for it without error at now (wall ms), after
 * live's high watermark and lag were updated from the answer. */
void ph_src_answer(struct ppart *p, int64_t now);
/* p's copied end moved (src_done, live.lag updated). */
void ph_note_copied(struct ppart *p);
/* p's lag in time at now (wall ms), as DescribeMirrors shows it, -1
 * unknown; never 0 when troubled (something keeps p from reading the
 * source or writing the destination, or the source did not answer). */
int64_t ph_lag_ms(const struct ppart *p, int64_t now, int troubled);
/* Periodic: a mirror's source going and coming back, logged. */
void ph_tick(struct pipeline *pl, int64_t mono);
/* pipeline/known.c: the partitions' last known source ends and caught-up
 * moments across restarts (storage.data_dir/known-offsets).  load at
 * pipeline_new(), seed a partition made afterwards, save every 10 s (or
 * now with force) and at the end. */
void pknown_load(struct pipeline *pl);
void pknown_seed(struct pipeline *pl, struct ppart *p);
void pknown_save(struct pipeline *pl, int64_t mono, int force);
void pknown_free(struct pipeline *pl);
/* Scrape time: the health families of a mirror and of a partition. */
void ph_collect_mirror(struct pipeline *pl, const struct pmirror *pm);
void ph_collect_partition(struct pipeline *pl, const struct ppart *p);

#endif
