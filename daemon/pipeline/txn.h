/*
 * pipeline/txn.h: which batches of one Fetch partition a read_committed
 * consumer skips, decided the way Apache Kafka's consumer decides it.
 *
 * A Fetch answer at read_committed carries, per partition, the aborted
 * transactions that overlap the records it returns: (producer id, first
 * offset) pairs.  Walking the batches in offset order, a producer becomes
 * "aborted" once a batch's last offset reaches the first offset of one of
 * its aborted transactions, and stops being aborted at its abort marker
 * (a control batch whose first record's key says ABORT).  A transactional
 * batch of an aborted producer is aborted data; every control batch is a
 * marker.  Neither is copied.
 *
 * The set of aborted producers has no fixed size: it is an open-addressing
 * hash that grows with the producers actually seen, at most one slot pair
 * per entry of the answer's own aborted list, so memory is bounded by the
 * response.  One struct ptxn lives for one partition of one response
 * (pipeline/copy.c's intake); the list must stay valid while it is used.
 */
#ifndef MIRRORD_PIPE_TXN_H
#define MIRRORD_PIPE_TXN_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "kproto.h"

struct ptxn {
	const struct kp_fetch_response_aborted_transaction *list;
	size_t n;             /* entries of list */
	size_t next;          /* first entry not yet reached */
	int64_t *slot;        /* producer ids, PTXN_FREE where empty; owned */
	size_t cap;           /* slots, a power of two (0 before the first) */
	size_t count;         /* producers in the set */
};

/* Verdicts of ptxn_batch(). */
enum {
	PTXN_ERROR = -1,      /* err says why (out of memory, bad marker) */
	PTXN_KEEP = 0,        /* committed or non-transactional data: copy it */
	PTXN_ABORTED = 1,     /* data of an aborted transaction: skip it */
	PTXN_MARKER = 2,      /* a control batch (commit or abort marker): skip it */
};

/*
 * Starts a walk over one partition's batches.  list must be sorted by
 * first offset (pipe_wire sorts it); producer ids and first offsets must
 * not be negative.  -1 with the reason in err (naming the entry) when the
 * list cannot be used; nothing to free then.
 */
int ptxn_init(struct ptxn *t,
    const struct kp_fetch_response_aborted_transaction *list, size_t n,
    char *err, size_t errlen);
/*
 * The verdict on the next batch of the partition (batches in offset
 * order, each exactly once, including those before the fetch offset).
 */
int ptxn_batch(struct ptxn *t, const struct batch *b, char *err,
    size_t errlen);
/* 1 while pid is an aborted producer of the walk. */
int ptxn_is_aborted(const struct ptxn *t, int64_t pid);
void ptxn_fini(struct ptxn *t);

/* The control record types of a marker's key (Kafka's ControlRecordType). */
#define PTXN_CONTROL_ABORT 0
#define PTXN_CONTROL_COMMIT 1
/*
 * The type of a control batch (its first record's key: version int16,
 * type int16), -2 for a control batch without records, or -1 with the
 * reason in err (compressed, malformed or a negative key version).
 */
int ptxn_control_type(const struct batch *b, char *err, size_t errlen);

#endif
