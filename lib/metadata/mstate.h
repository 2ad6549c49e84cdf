/*
 * mstate.h: everything mirrord knows durably, as an in-memory model that is
 * rebuilt from the metadata log (lib/mlog) alone.
 *
 *   mstate          the cluster id (22-char base64url, generated once) and
 *                   the mirrors, sorted by name
 *   struct mirror   name, configs (as given), source cluster id once
 *                   resolved, include/exclude patterns, topics sorted by name
 *   struct mtopic   name and its partitions by index
 *   struct mpart    state, error and retry attempt, last mirrored offset and
 *                   epoch, epoch history, translation anchors, the owner
 *                   instance (multi-instance mode)
 *   members         the instances of the cluster (multi-instance mode: the
 *                   metadata writer records the group after a rebalance)
 *
 * Ownership: mstate owns every mirror, topic and partition.  Callers get
 * read-only pointers; a pointer stays valid until the mirror is deleted
 * (hooks see MSTATE_EV_MIRROR_DELETING first).  Nothing outside mstate.c
 * writes a field: every change is a record (lib/metadata/mrec.h) that an operation
 * validates, appends, syncs and only then applies, through the same apply
 * code that replays the log at start-up.  So a failed disk write changes
 * nothing, and the model after a restart equals the model before it.
 *
 * The operations return a Kafka error code (enum kerr, 0 = success) and
 * write a message naming the mirror/topic into msg.  Disk failures are
 * KAFKA_STORAGE_ERROR (56) with the log's message.
 *
 * Every mutating call fsyncs before it returns (an admin reply must wait for
 * durability; these are rare, small writes).  Not thread-safe: the loop
 * thread owns the model.
 */
#ifndef MIRRORD_MSTATE_H
#define MIRRORD_MSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "mlog.h"

struct mrec_anchor;

/*
 * The seed's partition states, in this order (the values are on disk).
 * Allowed moves (any state may also stay put, and fail):
 *   PREPARING  from UNKNOWN, STOPPED (added again), FAILED (retry)
 *   MIRRORING  from PREPARING, PAUSED, PAUSING (resume), FAILED
 *   PAUSING    from MIRRORING, PREPARING, FAILED (pause)
 *   PAUSED     from PAUSING
 *   STOPPING   from PREPARING, MIRRORING, PAUSING, PAUSED, FAILED
 *   STOPPED    from STOPPING
 */
#define MPART_STATES(X) \
	X(UNKNOWN) \
	X(PREPARING) \
	X(MIRRORING) \
	X(PAUSING) \
	X(PAUSED) \
	X(STOPPING) \
	X(STOPPED) \
	X(FAILED)

enum mpart_state {
#define X(s) MPART_##s,
	MPART_STATES(X)
#undef X
	MPART_STATE_COUNT
};
#define MTOPIC_MIXED (-1)   /* mtopic_state(): partitions differ */

/* "MIRRORING"; "MIXED" for MTOPIC_MIXED; "?" otherwise. */
const char *mpart_state_name(int state);
/* The state for a name (exact, upper case), or -1. */
int mpart_state_parse(const char *name);
/* 1 if from -> to is in the transition table (any state -> itself is). */
int mpart_transition_ok(int from, int to);

#define MSTATE_CLUSTER_ID_LEN 22
#define MSTATE_MAX_PARTITIONS 100000   /* per topic */
/* The epoch history and the translation anchors have no count cap: they
 * shrink only by mpart_trim(), below both logs' start offsets. */
#define MSTATE_MAX_PATTERNS 1024       /* per list per mirror */

struct mcfg {
	char *name;
	char *value;   /* NULL: the request's null value */
};

struct mepoch {
	int32_t epoch;
	int64_t start_offset;
};

/* A producer identity mirrord writes one destination partition with
 * (part-producer records): producer id, epoch, and the destination offset
 * whose batch carries sequence 0 (a batch of this identity at offset o has
 * base sequence (o - seq_base) mod 2^31). */
struct mproducer {
	int64_t pid;
	int32_t epoch;
	int64_t seq_base;
};
#define MPART_MAX_PRODUCERS 16

struct manchor {
	int64_t src;
	int64_t dst;
};

/* What a partition had not copied when it stopped (part-failover
 * records, written with STOPPING -> STOPPED): the source high watermark
 * (asked of the source at the stop, else the last one it answered), the
 * source offsets between the end of what was copied and it (records,
 * plus any control records and aborted data among them), and the lag in
 * time (since the partition was last known caught up, or the age of the
 * newest record copied when less; 0 when nothing was left).  -1 when
 * unknown.  With them (a part-failover-at record in the same write):
 * when that high watermark was learnt and when the partition stopped
 * (wall-clock ms, -1 unknown: a report of an older version), and whether
 * the source answered at the stop (asked): when it did not, lag is only
 * a lower bound of what was not copied. */
struct mfailover {
	int64_t src_hwm;
	int64_t lag;
	int64_t lag_ms;
	int64_t hwm_at;
	int64_t stopped_at;
	int asked;
};

struct mtopic;
struct xlate;
struct mirror;
struct tpattern;

struct mpart {
	struct mtopic *topic;
	int32_t index;
	enum mpart_state state;  /* written only by mstate.c's transition code */
	char *error;             /* why it is FAILED; NULL otherwise */
	int32_t retry_attempt;   /* FAILED: attempt number; -1 = not retryable */
	int64_t last_offset;     /* last mirrored offset; -1 = none */
	int32_t last_epoch;      /* last mirrored epoch; -1 = none */
	struct mepoch *epochs;   /* epoch history, epochs strictly increasing */
	size_t nepochs;
	/* The translation map (lib/metadata/xlate.h), NULL while it has no
	 * anchor; mpart_nanchors()/mpart_anchor() read it. */
	struct xlate *map;
	/* Producer identities it was written with, oldest first, the last
	 * is the current one; the oldest is dropped past MPART_MAX_PRODUCERS
	 * (daemon/pipeline/prove.c recognises batches of the kept ones). */
	struct mproducer producers[MPART_MAX_PRODUCERS];
	size_t nproducers;
	/* The destination offset of the last batch whose anchors were
	 * recorded before its Produce (a part-sending record), -1 none: the
	 * anchors at and above it may describe a batch that never landed, so
	 * mirrord is only known to have written below it. */
	int64_t sending_dst;
	/* Multi-instance mode (doc/ha.md, part-owner records): the
	 * instance id that copies this partition, NULL for nobody, and the
	 * group generation that decided it (-1 none).  Single mode never
	 * sets it (its one instance copies everything). */
	char *owner;
	int32_t owner_generation;
	/* STOPPED: what it had not copied when it stopped (has_failover
	 * set), cleared when it leaves STOPPED.  failover_note: with the
	 * report, what the final consumer-group offset sync at the stop
	 * could not sync (a part-failover-note record in the same write,
	 * at most MREC_MAX_NOTE bytes), NULL when it missed nothing. */
	int has_failover;
	struct mfailover failover;
	char *failover_note;
};

struct mtopic {
	struct mirror *mirror;
	char *name;
	int32_t npart;
	struct mpart **parts;    /* by index */
	/* Identity (topic-ident records): the topic ids (base64url, as Kafka
	 * prints them) that the source and destination reported when mirrord
	 * first saw the topic there, NULL until then, and the destination
	 * cluster id it was first seen in; note: why mirrord itself stopped
	 * the topic (its source topic was deleted), NULL otherwise.  All four
	 * are cleared when the topic is added again (the operator's decision
	 * to mirror what is there now). */
	char *src_topic_id;
	char *dst_topic_id;
	char *note;
	char *dst_cluster_id;
	/*
	 * Realigning (topic-realign records; HACKING.md "Realigning a
	 * destination"): a partition's write history (epochs, anchors,
	 * producer identities, sending mark, last offset) describes one
	 * destination topic, the one whose id dst_topic_id records.
	 *  - prior_dst_topic_id: the topic was added again (all STOPPED):
	 *    the id its history was recorded in, until the data plane sees
	 *    the destination topic.  The same id keeps the history (the
	 *    topic-ident record of it clears this); another one, or a topic
	 *    mirrord created because there was none, is a new topic: a
	 *    RESET drops the history first.
	 *  - realign: the operator's realign (RecoverMirrorTopics, resolution
	 *    realign) dropped the history and waits for mirrord to delete the
	 *    destination topic (realign_dst_topic_id: its id when asked, NULL
	 *    unknown); no partition of the topic starts meanwhile, and no
	 *    write history is recorded for it.
	 *  - gone_dst_topic_id: the destination topic id mirrord deleted: a
	 *    Metadata answer still naming it is older than the deletion.  The
	 *    topic-ident record of the next id clears it.
	 */
	char *prior_dst_topic_id;
	int realign;
	char *realign_dst_topic_id;
	char *gone_dst_topic_id;
};

struct mirror {
	char *name;
	struct mcfg *configs;    /* as given at CreateMirror, in that order;
	                          * secrets sealed (see mstate_set_sealer) */
	size_t nconfigs;
	char *source_cluster_id; /* NULL until resolved */
	char **includes;         /* patterns as given (tpattern.h) */
	size_t nincludes;
	char **excludes;
	size_t nexcludes;
	/* includes and excludes compiled, same indexes; NULL for one that
	 * no longer compiles (replayed from an older log): it matches nothing. */
	struct tpattern **include_re;
	struct tpattern **exclude_re;
	struct mtopic **topics;  /* sorted by name */
	size_t ntopics;
};

/* One instance of the cluster (a cluster-members record). */
struct mmember {
	char *instance_id;
	char *member_id;
	int32_t local_broker_id;  /* -1 none */
	char *admin_addr;         /* "host:port", "" unknown */
	char *http_addr;          /* "" none */
};

/* mtopic_set_ident(): which field. */
#define MTOPIC_IDENT_SOURCE 0
#define MTOPIC_IDENT_DEST 1
#define MTOPIC_IDENT_NOTE 2
#define MTOPIC_IDENT_DEST_CLUSTER 3
#define MTOPIC_IDENT_DEST_PRIOR 4    /* prior_dst_topic_id (snapshots) */
#define MTOPIC_IDENT_DEST_GONE 5     /* gone_dst_topic_id (snapshots) */

struct mstate;

/*
 * ACL bindings mirrord created on the destination (daemon/pipeline/acl.c),
 * recorded before they are created so that mirrord never deletes one it did
 * not create.  Kept by mirror name: they outlive a deleted mirror until the
 * pipeline has removed them.  binding is pipeline/acl.c's text form, opaque
 * here (at most MACL_MAX_BINDING bytes).
 */
#define MACL_SYNC 0       /* copied from the source (mirror.acls.sync) */
#define MACL_READONLY 1   /* DENY WRITE of the read-only guard */
#define MACL_MAX_BINDING 2048
struct macl {
	char *mirror;
	int kind;
	char *binding;
};

/* ---- life cycle -------------------------------------------------------- */

struct mstate *mstate_new(void);
/* Frees the model (not the log).  NULL is a no-op. */
void mstate_free(struct mstate *st);
/*
 * Replays ml into the (empty) model and keeps ml for later appends; ml must
 * outlive st.  Generates and persists the cluster id on first start
 * (not on a follower of the replicated log: the writer does that).
 * Returns 0, or -1 with the log's message (file and offset) in err.
 */
int mstate_open(struct mstate *st, struct mlog *ml, char *err, size_t errlen);
/* Snapshots the model into the log.  The daemon calls this at clean
 * shutdown; the record/byte trigger runs by itself after every persisted
 * change (mstate_maybe_compact).  0 or -1 with err. */
int mstate_compact(struct mstate *st, char *err, size_t errlen);
/* Compacts if the log's record/byte threshold is reached; logs failures
 * (the change that triggered it stands).  Returns 1 if it compacted. */
int mstate_maybe_compact(struct mstate *st);
/*
 * The callback mlog_open() calls for each record: decodes and applies it.
 * Exposed for the fuzz harness and tools (arg is the mstate).
 */
int mstate_apply_rec(void *arg, const struct mlog_rec *rec, char *err,
    size_t errlen);
/*
 * Writes every record of the model (the snapshot) to sink: the callback
 * mlog_compact() takes.  Exposed for tests and tools.
 */
int mstate_dump_records(void *arg, struct mlog_sink *sink);
/*
 * The writer's half of a follower's forwarded write (the
 * request handler calls it; see mlog_kafka.h): validates every record
 * against the model exactly as replay would apply it, on a scratch copy
 * of the mirrors they name (all or nothing), then appends and syncs them
 * (the backend puts its REPLY into that sync) and applies them live.
 * Returns a Kafka error code (0 accepted), msg naming the record and why.
 * Cost: the scratch holds only the mirrors, topics and partitions the
 * records name (mstate_dump_scoped()), so it follows the request, not the
 * model (`make bench-forward`).
 */
int mstate_apply_forwarded(struct mstate *st, const struct mlog_rec *recs,
    size_t n, char *msg, size_t msglen);
/*
 * The same without blocking the loop (the log's event base): it takes
 * the exclusive turn (mstate_excl_begin()), so the records are checked
 * against a model holding every write before them, then appends them and
 * hands them to the log as a group of their own, calling arm(arg, 1) just
 * before and arm(arg, 0) just after (mlog_kafka_reply_arm(): the
 * follower's REPLY joins that group).  Returns KERR_NONE with *started 1:
 * cb(arg, code, msg) runs later on the loop (KERR_NONE once the records
 * are durable and applied, or the refusal or failure); otherwise the
 * result now (*started 0, cb never runs).  recs must stay valid until cb
 * runs.  One forwarded request at a time; mstate_forwarded_cancel()
 * drops the callback of the one in progress (a demoted writer).
 */
int mstate_apply_forwarded_async(struct mstate *st,
    const struct mlog_rec *recs, size_t n, void (*arm)(void *arg, int on),
    void (*cb)(void *arg, int code, const char *msg), void *arg,
    int *started, char *msg, size_t msglen);
void mstate_forwarded_cancel(struct mstate *st);
/*
 * Rebuilding the model from the log without a restart (a follower of the
 * replicated log that fell behind the log start; mstate_rebuild.c):
 * mstate_rebuild_new() is an empty model to replay the newest snapshot and
 * the log after it into (through mstate_apply_rec(), not live: no hooks);
 * mstate_rebuild_adopt() then makes st equal to it in place and frees it.
 * Objects in both keep their addresses and take the new content; the
 * hooks see each difference (a mirror gone: MIRROR_DELETING; new mirrors,
 * topics, partitions: MIRROR_CREATED, TOPIC_ADDED; SOURCE_ID, PATTERNS,
 * STATE, OWNER, MEMBERS).  A mirror deleted and created again under the
 * same name while the follower was behind is deleted and created.  0, or
 * -1 with err (out of memory; st is then partly adopted but whole).
 */
struct mstate *mstate_rebuild_new(const struct mstate *st);
int mstate_rebuild_adopt(struct mstate *st, struct mstate *fresh, char *err,
    size_t errlen);
/* The same with the signatures mlog_kafka_set_rebuild() takes (arg and
 * fresh are struct mstate *). */
void *mstate_rebuild_fresh_cb(void *st);
int mstate_rebuild_adopt_cb(void *st, void *fresh, char *err, size_t errlen);
void mstate_rebuild_drop_cb(void *fresh);
/* Generates and persists a cluster id if the model has none (mstate_open()
 * does it, except on a follower whose writer has not written it yet). */
int mstate_ensure_cluster_id(struct mstate *st, char *err, size_t errlen);
/* A text rendering of every field, for tests, tools and debugging; free()
 * it.  NULL when out of memory.  It holds config values verbatim, secrets
 * included (sasl.jaas.config...): never log it. */
char *mstate_dump(const struct mstate *st);

/* ---- secrets at rest ---------------------------------------------------- */

/*
 * How config values reach the log.  needs_seal says whether the value of
 * config name is a secret in clear, which must not be written as it is
 * (stored: 1 for a value read from the log, which may already be sealed;
 * 0 for one from a request, which is never taken as sealed);
 * seal gives the form to store instead (*out malloc'd; the mirror and the
 * config name are the context it is bound to).  Set it before mstate_open()
 * so that replay notes clear secrets; without one (needs_seal NULL) values
 * are stored as given.
 */
struct mstate_sealer {
	int (*needs_seal)(void *arg, const char *name, const char *value,
	    int stored);
	int (*seal)(void *arg, const char *mirror, const char *name,
	    const char *value, char **out, char *err, size_t errlen);
	void *arg;
};
void mstate_set_sealer(struct mstate *st, const struct mstate_sealer *s);
/*
 * The start-up migration, after mstate_open() and once the sealer can
 * seal: replaces every clear secret of the model by its sealed form (one
 * mirror-configs record per mirror) and, when the replay met a clear
 * secret anywhere (also one of a mirror since deleted), compacts, which
 * removes every older segment and snapshot: afterwards no file of the log
 * holds a clear secret.  *nsealed gets the number of values sealed,
 * *compacted 1 if it compacted.  Returns 0, or -1 with err.
 */
int mstate_seal_clear_secrets(struct mstate *st, size_t *nsealed,
    int *compacted, char *err, size_t errlen);

/* ---- change hooks ------------------------------------------------------ */

enum mstate_ev_kind {
	MSTATE_EV_MIRROR_CREATED,
	MSTATE_EV_MIRROR_DELETING,  /* before its memory is freed */
	MSTATE_EV_SOURCE_ID,        /* source cluster id resolved */
	MSTATE_EV_PATTERNS,         /* include/exclude list changed */
	MSTATE_EV_TOPIC_ADDED,      /* new topic, or partitions added */
	MSTATE_EV_STATE,            /* a partition changed state */
	MSTATE_EV_OWNER,            /* a partition's owner changed (part, why =
	                             * the previous owner, NULL for nobody) */
	MSTATE_EV_MEMBERS,          /* a cluster-members record was applied */
	MSTATE_EV_CONFIGS,          /* the mirror's configs were replaced */
	MSTATE_EV_REALIGNED,        /* the topic's partitions' write history
	                             * was dropped (topic-realign RESET or
	                             * DELETE; after their STATE events) */
};

struct mstate_event {
	enum mstate_ev_kind kind;
	const struct mirror *mirror;
	const struct mtopic *topic;   /* TOPIC_ADDED, STATE, REALIGNED */
	const struct mpart *part;     /* STATE, OWNER */
	enum mpart_state from, to;    /* STATE */
	const char *why;              /* STATE */
};

/* Called after each live change (not during replay).  A hook must not call
 * the mutating operations directly: defer to the loop. */
typedef void (*mstate_hook_fn)(void *arg, const struct mstate_event *ev);
/* Registers a hook; at most 8.  0 or -1. */
int mstate_add_hook(struct mstate *st, mstate_hook_fn fn, void *arg);

/* ---- reading ----------------------------------------------------------- */

const char *mstate_cluster_id(const struct mstate *st);
size_t mstate_mirror_count(const struct mstate *st);
/* The i-th mirror in name order. */
struct mirror *mstate_mirror_at(const struct mstate *st, size_t i);
struct mirror *mstate_mirror_find(const struct mstate *st, const char *name);
/* The topic of that name in that mirror, or NULL. */
struct mtopic *mirror_topic_find(const struct mirror *m, const char *topic);
/* The value of config key (the last one given), or NULL. */
const char *mirror_config_get(const struct mirror *m, const char *key);
/* bootstrap.servers of the mirror (never NULL for a created mirror). */
const char *mirror_bootstrap(const struct mirror *m);
/* 1 if topic matches an include pattern and no exclude pattern (patterns
 * are Java-style regular expressions matched against the whole name, see
 * tpattern.h; a match that hits a limit is no match). */
int mirror_wants_topic(const struct mirror *m, const char *topic);
/* The mirror other than except that holds topic in a state other than
 * STOPPED (NULL if none). */
struct mirror *mstate_topic_holder(const struct mstate *st, const char *topic,
    const struct mirror *except);
/* The partitions' common state, or MTOPIC_MIXED. */
int mtopic_state(const struct mtopic *t);
const char *mtopic_state_name(const struct mtopic *t);
/* 1 if every partition of t is STOPPED. */
int mtopic_all_stopped(const struct mtopic *t);

/* The cluster's members as last recorded (multi-instance mode): *n of
 * them in *out (sorted by instance id); returns their generation, -1 when
 * none was ever recorded. */
int32_t mstate_members(const struct mstate *st, const struct mmember **out,
    size_t *n);
/* The member of that instance id, or NULL. */
const struct mmember *mstate_member_find(const struct mstate *st,
    const char *instance_id);
/* How many translation anchors p has, and anchor i (< that) of them. */
size_t mpart_nanchors(const struct mpart *p);
struct manchor mpart_anchor(const struct mpart *p, size_t i);
/* 1 if p's owner is instance_id (instance_id NULL: single mode, always 1). */
int mpart_owned_by(const struct mpart *p, const char *instance_id);
/*
 * The destination offset after the last mirrored source offset
 * (last_offset) through the translation anchors: where the destination's
 * own records begin once p is STOPPED (a failback copies from there, see
 * daemon/pipeline/mirrormark.h).  -1 when nothing was mirrored or the anchors do
 * not map last_offset.
 */
int64_t mpart_stop_dst(const struct mpart *p);
/*
 * This instance's id in multi-instance mode (copied; NULL: single mode).
 * A group the writer refuses (it validates a follower's group whole) then
 * fails only the writes of partitions this instance no longer owns in the
 * model (the part-owner records that moved them are applied before the
 * refusal is read) and writes the others again, in order, as the next
 * group; without such a write, or with the operator's write in it, the
 * whole group fails as before.  0, or -1 out of memory.
 */
int mstate_set_instance(struct mstate *st, const char *instance_id);

/* ---- validation helpers (also used by the admin server) ------------------ */

/* 0 if name is a valid mirror name, else KERR_INVALID_CLUSTER_MIRROR_NAME
 * with the rule it breaks in msg. */
int mstate_check_mirror_name(const char *name, char *msg, size_t msglen);
/* 0 if name is a legal Kafka topic name, else KERR_INVALID_TOPIC_EXCEPTION. */
int mstate_check_topic_name(const char *name, char *msg, size_t msglen);
/* 1 if the whole of name matches the pattern (compiled for this call;
 * an invalid pattern or a limit hit: 0). */
int mstate_pattern_match(const char *pattern, const char *name);

/* ---- admin operations -------------------------------------------------- */

int mstate_create_mirror(struct mstate *st, const char *name,
    const struct mcfg *configs, size_t nconfigs, char *msg, size_t msglen);
int mstate_delete_mirror(struct mstate *st, const char *name, char *msg,
    size_t msglen);
/*
 * Adds topic with npart partitions (the source's count) in PREPARING.  A
 * topic of this mirror that is STOPPED restarts (-> PREPARING); one that is
 * already mirrored is left as it is (grown if npart is larger).
 */
int mstate_add_topic(struct mstate *st, const char *mirror, const char *topic,
    int32_t npart, char *msg, size_t msglen);
/* Source partition growth: partitions npart_old..npart-1 in PREPARING.
 * Nothing happens for a topic that is stopping or stopped. */
int mstate_grow_topic(struct mstate *st, const char *mirror,
    const char *topic, int32_t npart, char *msg, size_t msglen);
/* Adds include and exclude patterns, each checked by tpattern_check()
 * (invalid or refused: 42 INVALID_REQUEST naming the pattern and why). */
int mstate_add_patterns(struct mstate *st, const char *mirror,
    const char *const *includes, size_t nincludes,
    const char *const *excludes, size_t nexcludes, char *msg, size_t msglen);
int mstate_remove_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen);
/* Per-topic outcome of mstate_remove_pattern(). */
typedef void (*mstate_topic_result_fn)(void *arg, const char *topic,
    int code, const char *msg);
/* What mstate_remove_pattern() did with the pattern itself. */
#define MSTATE_PAT_INCLUDE_REMOVED 1   /* it was a saved include: removed */
#define MSTATE_PAT_EXCLUDE_ADDED 2     /* added to the excludes */
#define MSTATE_PAT_EXCLUDE_KEPT 3      /* already an exclude: unchanged */
/*
 * RemoveTopicsFromMirror's pattern.  A pattern equal to one of the
 * mirror's include patterns removes that include (discovery no longer
 * adds what it matches); any other pattern is added to the excludes.
 * Then every topic of the mirror whose name it matches is removed, each
 * reported through cb.  A pattern that is no include, no exclude yet,
 * and matches none of the mirror's topics changes nothing: 42
 * INVALID_REQUEST saying so and naming the include patterns.  *what gets
 * MSTATE_PAT_*.
 */
int mstate_remove_pattern(struct mstate *st, const char *mirror,
    const char *pattern, mstate_topic_result_fn cb, void *arg, int *what,
    char *msg, size_t msglen);
/* Removes an include pattern (absent: 0, nothing written). */
int mstate_remove_include(struct mstate *st, const char *mirror,
    const char *pattern, char *msg, size_t msglen);
/*
 * Replaces the mirror's configs (IncrementalAlterConfigs; the caller has
 * validated them as CreateMirror's are).  fresh[i] is 1 for a value from
 * the request (a secret is sealed), 0 for one kept as stored (sealed
 * already, or sealed now if the log held it in clear).  Checks: names
 * given, none twice, bootstrap.servers set; 42 INVALID_REQUEST naming
 * what is wrong.  One mirror-configs record.
 */
int mstate_set_mirror_configs(struct mstate *st, const char *mirror,
    const struct mcfg *configs, const int *fresh, size_t nconfigs,
    char *msg, size_t msglen);
int mstate_pause_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen);
int mstate_resume_topic(struct mstate *st, const char *mirror,
    const char *topic, char *msg, size_t msglen);
/* RecoverMirrorTopics: the topic's FAILED partitions -> PREPARING now
 * (none FAILED: 0, no change).  A partition whose reason needs a decision
 * (mpart_needs_resolution) moves only with a resolution it accepts
 * ("skip-over", "preserve"; NULL for none); otherwise INVALID_REQUEST
 * naming it and the resolutions it accepts, or, for a reason no
 * resolution repairs, what the operator can do instead.  The hooks see
 * the resolution in the why of the move ("..., resolution skip-over"). */
int mstate_recover_topic(struct mstate *st, const char *mirror,
    const char *topic, const char *resolution, char *msg, size_t msglen);
/* The resolutions p's reason accepts ("skip-over", "skip-over or
 * preserve"), "" when none repairs it, NULL when a plain retry will do. */
const char *mpart_needs_resolution(const struct mpart *p);
/*
 * The resolution "realign" (mstate_recover_topic() takes it): the
 * destination topic is deleted and copied again from the source.  For a
 * topic with a partition FAILED for a reason that needs a decision about
 * the destination's data (mpart_realign_reason(): a failback divergence,
 * a destination truncated, deleted or recreated); its other partitions
 * must be FAILED so too, MIRRORING or PREPARING (they are copied again as
 * well), none paused or stopped.  One topic-realign DELETE record: every
 * partition PREPARING ("recovered by the operator, resolution realign"),
 * its write history dropped, the destination topic id forgotten, the
 * deletion left to the data plane.  On success msg says what is deleted.
 */
int mpart_realign_reason(const struct mpart *p);
/*
 * The data plane's part of realigning (as mtopic_set_ident(): synchronous,
 * or queued in an open batch).  mtopic_realign_reset(): the destination
 * topic seen after the topic was added again is not prior (which must be
 * t->prior_dst_topic_id): the partitions' write history is dropped.
 * mtopic_realign_deleted(): mirrord deleted the destination topic of the
 * operator's realign (id: the last id it deleted, NULL none known).  A
 * change that no longer applies is a no-op (KERR_NONE).
 */
int mtopic_realign_reset(struct mstate *st, struct mtopic *t,
    const char *prior, char *msg, size_t msglen);
int mtopic_realign_deleted(struct mstate *st, struct mtopic *t,
    const char *id, char *msg, size_t msglen);

/*
 * Batches: one fsync for many operations (an AddTopicsToMirror with many
 * topics, the anchors of many partitions).  Between begin and commit each
 * operation validates against the model as it was at begin, appends its
 * records and returns 0 ("queued") or its error; nothing is applied yet.
 * Commit syncs and applies all of them in order (hooks run then), or, if
 * the disk refuses, applies none and returns KAFKA_STORAGE_ERROR: the
 * caller then reports that for every queued operation.  Give each
 * partition at most one operation per batch (validation does not see
 * earlier queued ones).  Compaction waits until the batch is closed.
 */
int mstate_batch_begin(struct mstate *st);   /* 0, or -1 if one is open */
/*
 * Asynchronous writes (group commit, doc/design.md).  Where an operation
 * has an _async form, it validates against the model, encodes and appends
 * its records and returns at once: KERR_NONE with *started 1 (cb runs
 * later), KERR_NONE with *started 0 (a no-op: nothing to write, cb never
 * runs), or an error code with msg (cb never runs).  Records appended
 * while a group is being written go as the next group when it completes
 * (one fsync per group).  At completion the records are applied to the
 * model in log order (hooks run then) and cb runs from a deferred event on
 * the loop thread (never inside an mstate call) with KERR_NONE, or the
 * error code and message (a group failed because the log is broken fails
 * every later one; one refused with the log usable, such as a follower's
 * group the writer refused, fails only its own writes).  The model does not show a record before its cb's group
 * completed: validation sees only completed writes, so give each object at
 * most one asynchronous write in flight.  cb must re-check that its
 * objects still exist.  A synchronous write (and a batch, a compaction)
 * first waits for the groups in flight (their callbacks stay deferred).
 * Needs the log's event base (mlog_set_event_base()).
 */
typedef void (*mstate_done_fn)(void *arg, int code, const char *msg);
/* 1 when the log has an event base: the _async forms write
 * asynchronously; 0: they write synchronously (*started 0). */
int mstate_async_ready(const struct mstate *st);
/* Waits for every asynchronous write in flight (they are applied; their
 * callbacks stay for the loop, or are dropped by mstate_free()).  Call it
 * before freeing what those callbacks would touch. */
void mstate_async_wait(struct mstate *st);
struct mstate_async_stats {
	uint64_t ops;          /* asynchronous writes completed */
	uint64_t groups;       /* groups they went in */
	uint64_t last_group_ops;
	uint64_t max_group_ops;
	uint64_t in_flight;    /* started, callback not yet run */
	uint64_t held;         /* held behind an operator's write */
	uint64_t held_refused; /* of those, no longer valid after it */
	uint64_t excl_waits;   /* exclusive writes that waited their turn */
	uint64_t sync_writes;  /* synchronous writes while the log had an
	                        * event base: the loop waited for each */
	uint64_t split_groups; /* refused groups whose writes of partitions
	                        * still owned went again (mstate_set_instance()) */
};
void mstate_async_stats(const struct mstate *st,
    struct mstate_async_stats *out);
int mstate_batch_commit(struct mstate *st, char *msg, size_t msglen);
/* Drops every queued operation. */
void mstate_batch_abort(struct mstate *st);

/*
 * Exclusive writes: the operator's commands, without blocking the loop.
 * An operator's change is validated against the model, so the model must
 * hold every write before it, and no write after it may have been
 * validated without it.  mstate_excl_begin() asks for that moment:
 *  - 1: it is now.  A batch is open (as mstate_batch_begin()): run the
 *    operations (synchronous forms: they validate and queue), then
 *    mstate_excl_commit();
 *  - 0: ready(arg) runs later from the loop, once the asynchronous writes
 *    in flight are applied (and the exclusive writes asked for before it,
 *    one at a time, in the order they were asked for: the operator's
 *    commands and the data plane's metadata passes share the turn), with
 *    the batch open; do the same there;
 *  - -1: a batch of the caller's own is open (mstate_batch_begin()), the
 *    log is not open, out of memory, or (without the log's event base)
 *    another exclusive write is open.
 * From the call until the commit's records are applied, new asynchronous
 * writes are held: encoded, not appended.  Once the operator's records
 * are applied they go to the log in order; one with a record in a mirror
 * the operator's change named is first checked again against the model
 * and, if it no longer applies, refused (its callback gets
 * KERR_INVALID_CLUSTER_MIRROR_STATES and why).  A synchronous write
 * meanwhile waits as before (for the operator's write too, if it is in
 * flight).  mstate_excl_commit() hands the batch to the log as a group of
 * its own: KERR_NONE with *started 1 (cb runs once applied, or with the
 * error), or the result now with *started 0 (nothing queued, a failed
 * batch, no event base: then it wrote synchronously).  Without the log's
 * event base everything is synchronous.  mstate_excl_cancel() drops what
 * the caller arg (the arg it gives both mstate_excl_begin() and
 * mstate_excl_commit()) asked for: its turns to come, its waiting
 * request, the callback of its write in flight or applied and not yet
 * called back (shutdown).
 */
enum { MSTATE_EXCL_NONE, MSTATE_EXCL_WAITING, MSTATE_EXCL_OPEN,
	MSTATE_EXCL_FLIGHT };
typedef void (*mstate_excl_fn)(void *arg);
int mstate_excl_begin(struct mstate *st, mstate_excl_fn ready, void *arg);
int mstate_excl_commit(struct mstate *st, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen);
/* Drops what the open exclusive batch queued (it stays open). */
void mstate_excl_discard(struct mstate *st);
void mstate_excl_cancel(struct mstate *st, void *arg);
int mstate_excl_state(const struct mstate *st);   /* MSTATE_EXCL_* */

/* ---- data-plane operations ------------------------------------------- */

/*
 * The one state setter: validates from -> to against the transition table,
 * persists it, logs "mirror/topic-3: PREPARING -> MIRRORING (why)" and runs
 * the hooks.  A move to FAILED records why as the error message.  Refused
 * transitions return KERR_INVALID_CLUSTER_MIRROR_STATES.
 */
int mpart_set_state(struct mstate *st, struct mpart *p, int to,
    const char *why, char *msg, size_t msglen);
/* -> FAILED with the error message and the retry attempt (-1: give up). */
int mpart_fail(struct mstate *st, struct mpart *p, const char *error,
    int32_t retry_attempt, char *msg, size_t msglen);
/*
 * The asynchronous state changes (group commit, as the other _async forms
 * above): validated against the model's state now, applied (hooks, the
 * "A -> B (why)" log line) when their group completes, then cb.  The
 * model's state does not show a change in flight, so the caller keeps at
 * most one state write of a partition in flight and starts none while it
 * is (the data plane: pipeline.c pl_part_state()).  The synchronous forms
 * first wait for every asynchronous write in flight and validate against
 * the state that results, so a state record in the log always applies.
 */
int mpart_set_state_async(struct mstate *st, struct mpart *p, int to,
    const char *why, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen);
int mpart_fail_async(struct mstate *st, struct mpart *p, const char *error,
    int32_t retry_attempt, mstate_done_fn cb, void *arg, int *started,
    char *msg, size_t msglen);
/* STOPPING -> STOPPED, recording the last mirrored offset and epoch. */
int mpart_stopped(struct mstate *st, struct mpart *p, int64_t last_offset,
    int32_t last_epoch, const char *why, char *msg, size_t msglen);
/* The same, with the failover report (what was not copied) persisted in
 * the same write; fo NULL is mpart_stopped().  note (NULL or "": none)
 * goes with fo: what the final consumer-group offset sync missed, cut at
 * MREC_MAX_NOTE bytes (mpart.failover_note). */
int mpart_stopped_report(struct mstate *st, struct mpart *p,
    int64_t last_offset, int32_t last_epoch, const struct mfailover *fo,
    const char *note, const char *why, char *msg, size_t msglen);
int mpart_stopped_report_async(struct mstate *st, struct mpart *p,
    int64_t last_offset, int32_t last_epoch, const struct mfailover *fo,
    const char *note, const char *why, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen);
/* Appends (epoch, start offset) to the epoch history: epoch above the last
 * one, start not below the last start.  Repeating the last entry is a
 * no-op. */
int mpart_add_epoch(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, char *msg, size_t msglen);
int mpart_add_epoch_async(struct mstate *st, struct mpart *p, int32_t epoch,
    int64_t start_offset, mstate_done_fn cb, void *arg, int *started,
    char *msg, size_t msglen);
/* Makes (pid, epoch, seq_base) the partition's current producer identity
 * (appended to its history; repeating the current one is a no-op).
 * pid >= 0, 0 <= epoch <= 32767, seq_base >= 0. */
int mpart_set_producer(struct mstate *st, struct mpart *p, int64_t pid,
    int32_t epoch, int64_t seq_base, char *msg, size_t msglen);
int mpart_set_producer_async(struct mstate *st, struct mpart *p, int64_t pid,
    int32_t epoch, int64_t seq_base, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen);
/* Records that mirrord created (add 1) or no longer owns (add 0: deleted,
 * or left to the destination) an ACL binding for mirror; a no-op when the
 * record would change nothing.  The mirror need not exist (any more). */
int mstate_acl_note(struct mstate *st, const char *mirror, int kind,
    const char *binding, int add, char *msg, size_t msglen);
/* The recorded bindings, in no particular order; an index stays valid
 * until the next mstate_acl_note(). */
size_t mstate_acl_count(const struct mstate *st);
const struct macl *mstate_acl_get(const struct mstate *st, size_t i);
/* Adds a translation anchor with lib/xlate's rules: offsets >= 0 and not
 * going backwards, merged without loss as xlate_rule() says.  Only the
 * asynchronous form exists (the data plane writes anchors, pipeline/copy.c and
 * pipeline/prove.c); cb NULL writes synchronously before it returns (tools and
 * tests, never on the loop), started may then be NULL. */
int mpart_add_anchor_async(struct mstate *st, struct mpart *p, int64_t src,
    int64_t dst, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen);
/*
 * Records, as one part-anchors record, that a run of batches goes to the
 * destination from offset sending_dst (mpart.sending_dst; -1 leaves it)
 * and the anchors v[0..n) that explain them (1 <= n <= MREC_MAX_ANCHORS,
 * ascending from the partition's last, merged as mpart_add_anchor_async()
 * merges each).  cb NULL: synchronous, as for one anchor.
 */
int mpart_add_anchors_async(struct mstate *st, struct mpart *p,
    int64_t sending_dst, const struct mrec_anchor *v, size_t n,
    mstate_done_fn cb, void *arg, int *started, char *msg, size_t msglen);
/*
 * Drops the anchors above destination offset dst (one part-retract
 * record; none when nothing goes: *dropped, if not NULL, says how many).
 * Only for anchors recorded for batches that never landed: the destination
 * ends at dst and nothing mirrord sent before can still land there
 * (pipeline/copy.c fences the earlier producer epoch first).  An anchor
 * above dst is a gap on the source side (the data plane's anchors), which
 * merges with no anchor at or below dst, so what stays maps every offset
 * below dst as before.
 */
int mpart_retract_async(struct mstate *st, struct mpart *p, int64_t dst,
    size_t *dropped, mstate_done_fn cb, void *arg, int *started, char *msg,
    size_t msglen);
/* How many of p's anchors lie above destination offset dst. */
size_t mpart_anchors_above(const struct mpart *p, int64_t dst);
/* Records that the anchors about to be added belong to a batch sent to
 * destination offset dst (mpart.sending_dst); no-op when it is already.
 * cb NULL: synchronous, as for anchors. */
int mpart_note_sending_async(struct mstate *st, struct mpart *p, int64_t dst,
    void (*cb)(void *arg, int code, const char *msg), void *arg,
    int *started, char *msg, size_t msglen);
/*
 * Forgets what no one can ask for any more once the source log starts at
 * src_min and the destination log at dst_min: the anchors below both
 * (xlate_trim_both()) and the epoch-history entries followed by one that
 * starts at or below both.  Persisted as one record, only when something
 * goes (*dropped, if not NULL, says how many entries went).
 */
int mpart_trim(struct mstate *st, struct mpart *p, int64_t src_min,
    int64_t dst_min, size_t *dropped, char *msg, size_t msglen);
/* The asynchronous form (as the other _async forms): *dropped is what the
 * record will drop once applied. */
int mpart_trim_async(struct mstate *st, struct mpart *p, int64_t src_min,
    int64_t dst_min, size_t *dropped, mstate_done_fn cb, void *arg,
    int *started, char *msg, size_t msglen);
int mstate_set_source_cluster_id(struct mstate *st, const char *mirror,
    const char *cluster_id, char *msg, size_t msglen);
/* Sets one identity field of t (which: MTOPIC_IDENT_*) to value (NULL
 * clears; 1-249 characters).  Setting the value it has is a no-op. */
int mtopic_set_ident(struct mstate *st, struct mtopic *t, int which,
    const char *value, char *msg, size_t msglen);

/* ---- multi-instance mode (doc/ha.md; the metadata writer's calls) ------ */

/*
 * Records the cluster's members after a rebalance (a cluster-members
 * record): generation >= 0; instance ids 1-1024 bytes and unique, member
 * ids and addresses up to 1024 bytes (NULL = ""), local_broker_id >= -1;
 * at most MREC_MAX_MEMBERS.  Kafka error code with msg.
 */
int mstate_set_members(struct mstate *st, int32_t generation,
    const struct mmember *members, size_t n, char *msg, size_t msglen);
/*
 * Gives parts[i] to owners[i] (instance id; NULL or "" = nobody), decided
 * by generation: one part-owner record per partition whose owner changes
 * (the others are left as they are), all in one sync (or queued in an open
 * batch).  A partition named twice gets the last owner given.  The hooks see
 * MSTATE_EV_OWNER for each change.  Kafka error code with msg.
 */
int mpart_set_owners(struct mstate *st, struct mpart *const *parts,
    const char *const *owners, size_t n, int32_t generation, char *msg,
    size_t msglen);

/*
 * What a record forwarded by another instance concerns (the writer's
 * request handler checks the owner with it): MSTATE_SCOPE_PART with *out
 * the partition for a partition-scoped record (part-state, -epoch,
 * -anchor, -trim, -producer, -sending); MSTATE_SCOPE_NONE for one that is
 * not (mirrors, patterns, topics: admin decisions and discovery); -1 with
 * err for a payload that does not decode, a partition that does not exist,
 * and the records only the writer itself may write (cluster-id,
 * cluster-members, part-owner) or only snapshots hold (topic-restore,
 * part-restore).
 */
#define MSTATE_SCOPE_NONE 0
#define MSTATE_SCOPE_PART 1
int mstate_record_scope(struct mstate *st, uint16_t type, const uint8_t *p,
    size_t len, struct mpart **out, char *err, size_t errlen);

#endif
