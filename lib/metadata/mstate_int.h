/*
 * mstate_int.h: what the three files of the mstate module share and
 * nothing else may use.  mstate.c holds the model (lookups, validation,
 * life cycle, snapshot and text dumps), mstate_apply.c the apply functions
 * (the only writers of the model) and persistence, mstate_ops.c the admin
 * and data-plane operations that validate and then persist.
 */
#ifndef MIRRORD_MSTATE_INT_H
#define MIRRORD_MSTATE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "compat.h"
#include "kbuf.h"
#include "mrec.h"
#include "mstate.h"

#define MAX_HOOKS 8
#define MAX_ERROR_MSG 4096     /* FAILED error messages are cut here */

struct mstate {
	struct mlog *ml;
	char cluster_id[MSTATE_CLUSTER_ID_LEN + 1];
	struct mirror **mirrors;   /* sorted by name */
	size_t nmirrors;
	struct {
		mstate_hook_fn fn;
		void *arg;
	} hooks[MAX_HOOKS];
	size_t nhooks;
	struct mrec_config *cfgbuf; /* decode scratch, MREC_MAX_CONFIGS */
	/* Multi-instance mode: this instance's id (mstate_set_instance()),
	 * NULL in single mode. */
	char *instance;
	/* An open batch (mstate_batch_begin): records appended, not yet
	 * synced, applied at commit in this order. */
	int batch;
	int batch_failed;      /* an append failed: commit fails it all */
	struct mstate_pending {
		uint16_t type;
		uint8_t *buf;
		size_t len;
	} *pending;
	size_t npending;
	/* Secrets at rest (mstate_set_sealer). */
	struct mstate_sealer sealer;
	int replay_clear;      /* replay met a clear secret value */
	/* Multi-instance mode: the last cluster-members record, members
	 * sorted by instance id; generation -1 until one is applied. */
	int32_t generation;
	struct mmember *members;
	size_t nmembers;
	/* ACL bindings mirrord created on the destination (acl-binding). */
	struct macl *acls;
	size_t nacls;
	/* Asynchronous persists (mstate_persist_async): appended, waiting
	 * for the next group (acc); the one group in flight; finished, their
	 * callbacks waiting for cb_ev (done). */
	struct mstate_aop *acc_head, *acc_tail;
	struct mstate_agroup *inflight;
	struct mstate_aop *done_head, *done_tail;
	struct event *cb_ev;
	struct mstate_async_stats astats;
	/* An exclusive write (mstate_excl_begin(), the operator's commands):
	 * while one is wanted or in flight, new asynchronous writes are held
	 * (encoded, not appended) and handed to the log once it is applied,
	 * checked against it when it named their mirror. */
	int excl;                  /* MSTATE_EXCL_* */
	mstate_excl_fn excl_ready; /* WAITING: runs when it is its turn */
	void *excl_arg;            /* its caller (WAITING, OPEN, FLIGHT) */
	/* Exclusive writes asked for while one was wanted or in flight, in
	 * the order they asked: the next becomes WAITING when it ends. */
	struct mstate_xwait *xq_head, *xq_tail;
	struct event *excl_ev;
	struct mstate_aop *excl_op; /* FLIGHT: its op, until applied */
	struct mstate_aop *held_head, *held_tail;
	char **excl_mirrors;       /* the mirrors its records name */
	size_t nexcl_mirrors;
	int excl_all;              /* a record names none: check every op */
	/* mstate_apply_forwarded_async(): the one forwarded request waiting
	 * for its exclusive turn or in flight (busy). */
	struct mstate_fwd {
		const struct mlog_rec *recs;
		size_t n;
		void (*arm)(void *arg, int on);
		mstate_done_fn cb;
		void *arg;
		int busy;
	} fwd;
	/* A scratch model of mstate_apply_forwarded(): a restored topic's
	 * partitions are made only when a record names one (a NULL slot is
	 * a partition the scratch does not hold). */
	int sparse;
};

struct mstate_xwait {
	struct mstate_xwait *next;
	mstate_excl_fn ready;
	void *arg;
};

/* One asynchronous persist: its records (encoded) and its caller. */
struct mstate_aop {
	struct mstate_aop *next;
	size_t n;
	uint16_t *types;
	uint8_t **bufs;
	size_t *lens;
	char *what;
	mstate_done_fn cb;
	void *arg;
	int excl;              /* the exclusive write's op */
	int from_state;        /* held state change: the state it left */
	int from_lost;         /* split_lost(): of a partition moved away */
	int applied;           /* its records were applied to the model */
	int rc;                /* a Kafka error code, once done */
	char *msg;             /* its message (NULL: none) */
};

#define MST_BIT(s) (1u << MPART_##s)

/* What mstate_anchor_check() says an anchor would do. */
enum { MST_ANCHOR_APPEND, MST_ANCHOR_REPLACE, MST_ANCHOR_NOOP,
	MST_ANCHOR_FOLD };

/* snprintf into msg (NULL or 0-length msg: nothing). */
void mstate_fmt(char *buf, size_t len, const char *f, ...) PRINTF_LIKE(3, 4);
/* NUL-terminated copy of a kstr (NULL for null); sets *oom on failure. */
char *mstate_kdup(struct kstr s, int *oom);
/* strcmp of a kstr against a C string. */
int mstate_kcmp(struct kstr a, const char *b);
/* Room for element n of an array whose capacity is implied by its count. */
int mstate_grow(void *arrp, size_t n, size_t elem);
size_t mstate_mirror_pos(const struct mstate *st, struct kstr name, int *found);
size_t mstate_topic_pos(const struct mirror *m, struct kstr name, int *found);
struct mirror *mstate_find_mirror_k(const struct mstate *st, struct kstr name);
struct mtopic *mstate_find_topic_k(const struct mirror *m, struct kstr name);
/* 1 if any / every partition of t is in a state of mask (MST_BIT()s). */
int mtopic_any(const struct mtopic *t, unsigned mask);
int mtopic_all(const struct mtopic *t, unsigned mask);
/* Compiles a topic pattern (tpattern_new()); NULL with "pattern '...'
 * <reason>" in msg. */
struct tpattern *mstate_compile_pattern(const char *pattern, char *msg,
    size_t msglen);
void mstate_mirror_free(struct mirror *m);
void mstate_members_free(struct mmember *m, size_t n);
void mstate_topic_free(struct mtopic *t);
/* Runs the hooks (live changes only). */
void mstate_emit(struct mstate *st, int live, const struct mstate_event *ev);
/* -1 with err when p's topic is being realigned (mtopic.realign): its
 * write history is not recorded until the destination topic is deleted. */
int mstate_realign_check(const struct mpart *p, char *err, size_t errlen);
/* The epoch-history and anchor rules, shared by validation and apply. */
int mstate_epoch_check(const struct mpart *p, int32_t epoch, int64_t start,
    int *noop, char *err, size_t errlen);
/* fold gets the new second-last anchor for MST_ANCHOR_FOLD. */
/* Validates a part-producer record; *noop when it repeats the current one. */
int mstate_producer_check(const struct mpart *p, int64_t pid, int32_t epoch,
    int64_t seq_base, int *noop, char *err, size_t errlen);
int mstate_anchor_check(const struct mpart *p, int64_t src, int64_t dst,
    int *action, struct manchor *fold, char *err, size_t errlen);
/* Index of the first epoch-history entry and of the first anchor that a
 * trim at (src_min, dst_min) keeps (0: none go). */
size_t mstate_trim_epochs_at(const struct mpart *p, int64_t src_min,
    int64_t dst_min);
size_t mstate_trim_anchors_at(const struct mpart *p, int64_t src_min,
    int64_t dst_min);
/* How many of p's last anchors a retract at destination offset dst drops
 * (those above it). */
size_t mstate_retract_anchors_at(const struct mpart *p, int64_t dst);
/* Encodes, appends and syncs n records, then applies them (Kafka code). */
int mstate_persist(struct mstate *st, const struct mrec *recs, size_t n,
    const char *what, char *msg, size_t msglen);
/* Waits for every asynchronous persist (applies them, defers their
 * callbacks): before a synchronous write, a batch, a compaction. */
void mstate_async_drain(struct mstate *st);
/* Frees what the asynchronous persists hold, calling no callback. */
void mstate_async_free(struct mstate *st);
/* The asynchronous form: KERR_NONE when started (cb runs later). */
int mstate_persist_async(struct mstate *st, const struct mrec *recs,
    size_t n, const char *what, mstate_done_fn cb, void *arg, char *msg,
    size_t msglen);
/* Drops an open batch's queued records (not the log's). */
void mstate_batch_clear(struct mstate *st);
void mstate_rec_init(struct mrec *r, uint16_t type, const char *mirror,
    const char *topic);
void mstate_part_rec(struct mrec *r, uint16_t type, const struct mpart *p);
/* One item of a scoped dump: a whole mirror (topic NULL), a whole topic
 * (part -1) or one partition. */
struct mstate_scope {
	const char *mirror;
	const char *topic;
	int32_t part;
};
/* Writes to sink the records a scratch model needs to hold exactly the
 * objects the items name as the model holds them: the cluster id and
 * members, each named mirror's own records and acl bindings, and of its
 * topics only those named (each with its partition count; of its
 * partitions only those named, the others are left empty), so the cost
 * follows the items, not the model.  0 or -1. */
int mstate_dump_scoped(const struct mstate *st,
    const struct mstate_scope *sc, size_t n, struct mlog_sink *sink);
/* Applies an acl-binding record (mstate_ops.c). */
int mstate_acl_apply(struct mstate *st, struct kstr mirror, int kind,
    struct kstr binding, int add, char *err, size_t errlen);

#endif
