/*
 * mlog.h: mirrord's durable metadata log.
 *
 * Everything mirrord knows durably (mirrors, topics, partition states,
 * epoch histories, translation anchors, the cluster id) is a sequence of
 * typed records in this log; lib/mstate rebuilds its in-memory model from
 * them at start-up and appends one record per change.  The log itself knows
 * nothing of what the records mean: a record is a 16-bit type and an opaque
 * payload.
 *
 * struct mlog is an interface (an ops table) with two backends: the
 * replicated one, a one-partition topic on the destination cluster
 * (mlog_kafka.c, storage.backend: kafka; its layout, fencing and snapshots
 * are described at the top of that file), and the local file backend
 * (mlog_file.c, the default):
 *
 *   <dir>/LOCK                       flock()ed while a daemon owns the dir
 *   <dir>/snapshot-<seq>.snap        the state as of the start of segment seq
 *   <dir>/mlog-<seq>.log             records appended since that snapshot
 *
 * Every record is a frame (all integers big-endian):
 *
 *   0  u32  payload length (at most the configured max_record)
 *   4  u32  CRC-32C over the type (2 bytes, big-endian) and the payload
 *   8  u16  record type
 *  10  u16  header check: low 16 bits of CRC-32C over bytes 0..9
 *  12  payload
 *
 * The header check lets the reader trust a frame's length before it has read
 * the payload, which is what makes "torn tail" and "corruption" two
 * different, precisely defined things (see mlog_scan()).
 *
 * Durability contract: mlog_append() only buffers; mlog_sync() writes and
 * fsyncs everything appended so far.  A caller that mutates in-memory state
 * appends its records, syncs, and only then applies them; several appends
 * may share one sync.  If the sync fails, every record appended since the
 * previous successful sync is gone (from memory and from the file), so
 * nothing is half-applied.  After an fsync failure the log refuses further
 * writes (the kernel may have dropped the dirty pages): restart to re-read
 * what is really on disk.
 *
 * Followers (mlog_kafka only): an instance that is not the writer has
 * applies_on_sync set; its mlog_sync() forwards the pending records to
 * the writer and returns once they are in the log AND applied here
 * through the open's apply callback (live), with the writer's verdict:
 * the caller must not apply them again, and a refusal carries the
 * writer's Kafka error code in sync_error.  Records other instances write
 * reach the apply callback with mlog_rec.live = 1 (mlog_kafka_poll()).
 *
 * Asynchronous sync (group commit): mlog_sync_async() hands every pending
 * record to the backend as one group and returns at once; the group's done
 * callback runs later on the loop thread (mlog_set_event_base()), groups
 * complete in the order they were started, and a failed group fails every
 * group after it (the log is then broken, as after a failed mlog_sync()).
 * Records appended while groups are in flight form the next group.  A
 * backend without ops->sync_async gets the generic fallback: the group is
 * synced at once (blocking) and done is deferred to the loop.  The blocking
 * mlog_sync() and mlog_compact() first wait for every group in flight and
 * run their done callbacks (so the log order is the apply order): through
 * the backend's ops->wait, or for the fallback's deferred groups in the
 * generic layer.
 *
 * Single-threaded API: one owner (the loop thread) calls every function; a
 * backend may do its I/O on a thread of its own (mlog_file.c's writer).
 */
#ifndef MIRRORD_MLOG_H
#define MIRRORD_MLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct event;

#define MLOG_FRAME_HDR 12u
#define MLOG_MAX_RECORD_DEFAULT (1u << 20)
#define MLOG_MAX_RECORD_LIMIT (64u << 20)   /* largest max_record accepted */
#define MLOG_COMPACT_RECORDS_DEFAULT 100000u
#define MLOG_COMPACT_BYTES_DEFAULT (64u << 20)

/* Record types from 0xff00 up are the log's own framing records; the
 * state model uses types below MLOG_TYPE_RESERVED. */
#define MLOG_TYPE_RESERVED 0xff00u
#define MLOG_T_SEGMENT 0xff01u  /* first frame of a segment file */
#define MLOG_T_SNAPSHOT 0xff02u /* first frame of a snapshot file */
#define MLOG_T_SNAPEND 0xff03u  /* last frame of a snapshot file */
#define MLOG_T_CLAIM 0xff04u    /* mlog_kafka: a writer's claim of the topic */
#define MLOG_T_REPLY 0xff05u    /* mlog_kafka: the writer's answer to a
                                 * follower's forwarded request */

/* One record as the reader hands it to the apply callback.  p points into
 * the reader's buffer and is only valid during the callback. */
struct mlog_rec {
	uint16_t type;
	uint32_t len;
	const uint8_t *p;
	uint64_t off;        /* byte offset of the frame in its file */
	const char *file;    /* file (or other source) the record came from */
	int in_snapshot;     /* 1 while replaying a snapshot */
	int live;            /* 1: a follower tailing the log applies a record
	                      * another instance wrote (hooks fire); 0 during
	                      * the replay at open */
};

/* Replays one record into the caller's state.  Returns 0, or -1 with the
 * reason in err; the open then fails naming the file and offset. */
typedef int (*mlog_apply_fn)(void *arg, const struct mlog_rec *rec,
    char *err, size_t errlen);

/* The snapshot sink handed to a dump callback; put frames with
 * mlog_sink_put().  Errors are sticky: the compaction fails at the end. */
struct mlog_sink {
	int (*put)(struct mlog_sink *sink, uint16_t type, const void *p,
	    size_t len);
	int failed;          /* sticky: a put failed */
	uint64_t records;    /* frames put so far */
};
typedef int (*mlog_dump_fn)(void *arg, struct mlog_sink *sink);
int mlog_sink_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len);

/* I/O hooks so tests can inject ENOSPC/EIO; NULL members use the real
 * system calls.  They follow the system calls' conventions (-1 + errno). */
struct mlog_io {
	ssize_t (*pwrite)(void *arg, int fd, const void *buf, size_t n,
	    off_t off);
	int (*fsync)(void *arg, int fd);
	void *arg;
};

struct mlog_opts {
	const char *dir;           /* storage.data_dir */
	uint32_t max_record;       /* payload cap; 0 = MLOG_MAX_RECORD_DEFAULT */
	uint64_t compact_records;  /* want a snapshot after this many records; 0 = never */
	uint64_t compact_bytes;    /* ... or this many segment bytes; 0 = never */
	const struct mlog_io *io;  /* NULL = real system calls */
	int no_fsync;              /* storage.fsync: false; unsafe, for tests */
};
/* Fills o with the defaults above (dir NULL). */
void mlog_opts_init(struct mlog_opts *o);

struct mlog_stats {
	uint64_t records;          /* records replayed at open plus appended */
	uint64_t bytes;            /* bytes in the live segment */
	uint64_t records_since_snapshot;
	uint64_t bytes_since_snapshot;
	uint64_t pending;          /* appended, not yet synced */
	uint64_t syncs;            /* successful fsync rounds */
	int64_t last_fsync_us;     /* latency of the last fsync; -1 before any */
	int64_t snapshot_wall_ms;  /* wall time of the newest snapshot; -1 if none */
	uint64_t compactions;
	uint64_t torn_bytes_dropped; /* at open */
	int broken;                /* 1 after a failure that forbids writing */
	int fenced;                /* broken because a newer writer claimed
	                            * the log (replicated backend) */
	uint64_t groups;           /* asynchronous groups completed */
	uint64_t last_group_records; /* records in the last fsync round */
	uint64_t max_group_records;  /* most records one fsync round held */
};

/* Completion of mlog_sync_async(): rc 0 every record of the group is
 * durable (with applies_on_sync: and applied through the open's apply
 * callback, live); rc -1 none is, err says why, sync_error as for
 * mlog_sync().  Runs on the loop thread. */
typedef void (*mlog_done_fn)(void *arg, int rc, int16_t sync_error,
    const char *err);
/* sync_error of a group that was not written and may be written again as
 * it is: a follower's request that no writer answered before this
 * instance became the writer (Kafka's REBALANCE_IN_PROGRESS code). */
#define MLOG_E_RESEND 27

struct mlog;
struct mlog_group;
struct mlog_ops {
	const char *name;
	int (*open)(struct mlog *ml, mlog_apply_fn apply, void *arg,
	    char *err, size_t errlen);
	int (*append)(struct mlog *ml, uint16_t type, const void *p,
	    size_t len, char *err, size_t errlen);
	int (*sync)(struct mlog *ml, char *err, size_t errlen);
	void (*discard)(struct mlog *ml);
	int (*compact)(struct mlog *ml, mlog_dump_fn dump, void *arg,
	    char *err, size_t errlen);
	void (*stats)(const struct mlog *ml, struct mlog_stats *out);
	void (*free)(struct mlog *ml);
	/* optional: starts writing every pending record as one group
	 * without blocking; done later on the loop thread, in group
	 * order, never from inside this call, through mlog_group_done().
	 * NULL: the generic code syncs and defers done. */
	int (*sync_async)(struct mlog *ml, mlog_done_fn done, void *arg,
	    char *err, size_t errlen);
	/* required with sync_async: blocks until every group in flight has
	 * completed, calling mlog_group_done() for each in order.  The
	 * generic mlog_sync(), mlog_compact() and mlog_wait() call it
	 * first.  The backend's free op finishes its groups in flight
	 * without calling their done. */
	void (*wait)(struct mlog *ml);
	/* optional: mlog_compact_async(); NULL: the generic code compacts
	 * (blocking) and defers done. */
	int (*compact_async)(struct mlog *ml, mlog_dump_fn dump, void *arg,
	    mlog_done_fn done, void *done_arg, char *err, size_t errlen);
};

/* The interface.  Backends embed it first in their own struct. */
struct mlog {
	const struct mlog_ops *ops;
	struct mlog_opts opts;
	int opened;
	/* mlog_set_sync_hook(); backends leave them zero (calloc). */
	void (*sync_hook)(void *arg, const struct mlog_stats *st);
	void *sync_hook_arg;
	/* Set by a backend whose mlog_sync() itself applies the synced
	 * records through the open's apply callback, in log order (an
	 * mlog_kafka follower: its writes go through the writer and come
	 * back by the tail).  The caller must then not apply them again. */
	int applies_on_sync;
	/* After a failed mlog_sync(): the Kafka error code that says why
	 * (0: an ordinary storage failure).  A follower's request refused
	 * by the writer carries the writer's code; err holds its message. */
	int16_t sync_error;
	/* mlog_set_event_base(); completions are delivered through it. */
	struct event_base *base;
	/* The generic fallback's groups already synced whose done has not
	 * run yet (FIFO), and the event that runs them. */
	struct mlog_group *defer_head, *defer_tail;
	struct event *defer_ev;
	uint64_t groups_in_flight; /* started, done not yet called */
};

/* The local file backend.  Creates dir (mode 0700) if it is missing and
 * takes the exclusive lock; fails if another process holds it.  Nothing is
 * read until mlog_open(). */
struct mlog *mlog_file_new(const struct mlog_opts *opts, char *err,
    size_t errlen);

/* Replays the newest snapshot (if any) and then the log after it through
 * apply, repairs a torn tail, and leaves the log ready for appends.  Fails
 * (nothing written) on corruption before the tail, naming file and byte
 * offset; the caller's state then holds a partial replay: discard it. */
int mlog_open(struct mlog *ml, mlog_apply_fn apply, void *arg, char *err,
    size_t errlen);
/* Buffers one record.  Fails if len is over max_record or the log is
 * broken; an append failure leaves earlier pending records in place (call
 * mlog_discard() to drop the whole group). */
int mlog_append(struct mlog *ml, uint16_t type, const void *p, size_t len,
    char *err, size_t errlen);
/* Writes and fsyncs every pending record.  On failure all pending records
 * are dropped and err names the file and the system error (ml->sync_error
 * may hold a Kafka error code for it).  With ml->applies_on_sync the
 * records were applied through the open's apply callback (live) when it
 * returns 0. */
int mlog_sync(struct mlog *ml, char *err, size_t errlen);
/* The caller's loop; completions of mlog_sync_async() are delivered
 * through it.  Set it before the first mlog_sync_async(). */
void mlog_set_event_base(struct mlog *ml, struct event_base *base);
/* Hands every pending record to the backend as one group and returns at
 * once (0), or -1 if the log cannot take it (broken, not open; done is then
 * never called).  Records appended afterwards belong to the next group.
 * done is never called from inside this call.  Without an event base the
 * completion waits for the next mlog_sync(), mlog_wait(), mlog_compact().
 * Groups complete in order; a failed group fails every group after it (the
 * log is then broken, as after a failed sync).  With nothing pending the
 * group is empty and completes (in order) like any other. */
int mlog_sync_async(struct mlog *ml, mlog_done_fn done, void *arg,
    char *err, size_t errlen);
/* Blocks until every group in flight has completed and its done callback
 * has run.  Only lib-internal callbacks may be registered with
 * mlog_sync_async() if this (or mlog_sync()) is called from inside the
 * caller's code: they run here, synchronously. */
void mlog_wait(struct mlog *ml);
/* Groups started and not yet completed (done not yet called). */
uint64_t mlog_in_flight(const struct mlog *ml);
/* For backends: counts a group of theirs as completed and runs its done
 * (with the sync hook on success).  Call it on the loop thread. */
void mlog_group_done(struct mlog *ml, mlog_done_fn done, void *arg, int rc,
    int16_t sync_error, const char *err);
/* Drops every record appended since the last successful sync (only those
 * not yet handed to a group). */
void mlog_discard(struct mlog *ml);
/* 1 when the configured record or byte threshold since the last snapshot
 * has been reached. */
int mlog_want_compact(const struct mlog *ml);
/* Waits for groups in flight (mlog_wait()), syncs, writes a snapshot of
 * the caller's state (dump puts its records),
 * starts a fresh segment, then removes the files the snapshot replaced.
 * A crash at any point leaves a set of files that opens to the same state. */
int mlog_compact(struct mlog *ml, mlog_dump_fn dump, void *arg, char *err,
    size_t errlen);
/* The same without blocking the loop where the backend can (file: the
 * state is dumped into memory here, the snapshot written, fsynced and
 * renamed, and the new segment started, on the writer thread).  The
 * caller's state must hold every record handed to a group so far (call it
 * when mlog_in_flight() is 0, e.g. from the last group's done); records
 * still pending, and groups started afterwards, go after the snapshot.
 * done (rc 0 or -1 with err) runs on the loop in group order; a failed
 * snapshot leaves the log as it was (unless it cannot be withdrawn: then
 * broken).  -1: not started (done never called). */
int mlog_compact_async(struct mlog *ml, mlog_dump_fn dump, void *arg,
    mlog_done_fn done, void *done_arg, char *err, size_t errlen);
void mlog_stats(const struct mlog *ml, struct mlog_stats *out);
/* fn(arg, stats) after every successful mlog_sync(), with the stats after
 * it (the daemon feeds its metadata-log metrics from them); NULL removes. */
void mlog_set_sync_hook(struct mlog *ml,
    void (*fn)(void *arg, const struct mlog_stats *st), void *arg);
/* Releases the lock and frees.  Pending (unsynced) records are dropped:
 * sync first.  Groups in flight are finished but their done callbacks are
 * not called.  NULL is a no-op. */
void mlog_free(struct mlog *ml);

/*
 * The frame reader, shared by every backend, the fuzz harness and tools.
 *
 * Scans buf[0..len) frame by frame and calls cb for each good one.  Where a
 * frame is bad the scan decides between:
 *
 *   MLOG_SCAN_TORN     the damage reaches the end of the buffer and no
 *                      intact frame follows it: the trace of a write cut
 *                      short by a crash (partial header, partial payload,
 *                      CRC mismatch in a final frame that ends exactly at
 *                      the end, or a zero-filled tail).  Everything before
 *                      good_end is intact; the rest may be dropped.
 *   MLOG_SCAN_CORRUPT  a bad frame with intact data after it (or a frame
 *                      whose checked header declares more than max_record):
 *                      never dropped silently.
 *
 * res->bad_off is the offset of the bad frame, res->why says what is wrong.
 */
enum mlog_scan_end {
	MLOG_SCAN_CLEAN,
	MLOG_SCAN_TORN,
	MLOG_SCAN_CORRUPT,
	MLOG_SCAN_STOPPED,  /* cb returned non-zero */
};
struct mlog_scan_result {
	enum mlog_scan_end end;
	uint64_t nrec;      /* good frames seen (handed to cb) */
	uint64_t good_end;  /* offset just after the last good frame */
	uint64_t bad_off;   /* TORN/CORRUPT/STOPPED: offset of that frame */
	char why[160];
};
typedef int (*mlog_scan_fn)(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off);
void mlog_scan(const uint8_t *buf, size_t len, uint32_t max_record,
    mlog_scan_fn cb, void *arg, struct mlog_scan_result *res);

/* Encodes one frame header for payload p[0..len) into hdr. */
void mlog_frame_header(uint8_t hdr[MLOG_FRAME_HDR], uint16_t type,
    const void *p, uint32_t len);

#endif
