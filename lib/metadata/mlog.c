/*
 * mlog.c: the backend-independent half of the metadata log: the frame
 * format, the frame reader that tells a torn tail from corruption, and the
 * thin wrappers over the ops table.  See mlog.h.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "compat.h"
#include "crc32c.h"
#include "massert.h"
#include "mlog.h"

void mlog_opts_init(struct mlog_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_record = MLOG_MAX_RECORD_DEFAULT;
	o->compact_records = MLOG_COMPACT_RECORDS_DEFAULT;
	o->compact_bytes = MLOG_COMPACT_BYTES_DEFAULT;
}

static uint32_t frame_crc(uint16_t type, const void *p, uint32_t len)
{
	uint8_t t[2];

	be16_store(t, type);
	return crc32c(crc32c(0, t, 2), p, len);
}

static uint16_t header_check(const uint8_t *hdr)
{
	return (uint16_t)crc32c(0, hdr, 10);
}

void mlog_frame_header(uint8_t hdr[MLOG_FRAME_HDR], uint16_t type,
    const void *p, uint32_t len)
{
	be32_store(hdr, len);
	be32_store(hdr + 4, frame_crc(type, p, len));
	be16_store(hdr + 8, type);
	be16_store(hdr + 10, header_check(hdr));
}

/* Payload bytes the search below may checksum before it gives up. */
#define INTACT_SEARCH_BUDGET (256u << 20)

/*
 * 1 if an intact frame (checked header, payload inside the buffer, good
 * CRC) starts anywhere in buf[from..len).  Only run on the error path.
 * Headers that pass their check by chance cost a payload CRC each; past a
 * budget the answer is 1, the safe side (refuse rather than truncate).
 */
static int intact_frame_after(const uint8_t *buf, size_t len, size_t from,
    uint32_t max_record)
{
	uint64_t budget = INTACT_SEARCH_BUDGET;

	for (size_t o = from; o + MLOG_FRAME_HDR <= len; o++) {
		const uint8_t *h = buf + o;
		if (be16_load(h + 10) != header_check(h))
			continue;
		uint32_t flen = be32_load(h);
		if (flen > max_record || flen > len - o - MLOG_FRAME_HDR)
			continue;
		if (flen > budget)
			return 1;
		budget -= flen;
		if (frame_crc(be16_load(h + 8), h + MLOG_FRAME_HDR, flen) ==
		    be32_load(h + 4))
			return 1;
	}
	return 0;
}

static void scan_stop(struct mlog_scan_result *res, enum mlog_scan_end end,
    uint64_t off, const char *fmt, ...) PRINTF_LIKE(4, 5);

static void scan_stop(struct mlog_scan_result *res, enum mlog_scan_end end,
    uint64_t off, const char *fmt, ...)
{
	va_list ap;

	res->end = end;
	res->bad_off = off;
	va_start(ap, fmt);
	vsnprintf(res->why, sizeof(res->why), fmt, ap);
	va_end(ap);
}

void mlog_scan(const uint8_t *buf, size_t len, uint32_t max_record,
    mlog_scan_fn cb, void *arg, struct mlog_scan_result *res)
{
	size_t off = 0;

	memset(res, 0, sizeof(*res));
	res->end = MLOG_SCAN_CLEAN;
	while (off < len) {
		const uint8_t *h = buf + off;
		size_t left = len - off;

		if (left < MLOG_FRAME_HDR) {
			scan_stop(res, MLOG_SCAN_TORN, off,
			    "partial frame header (%zu of %u bytes)", left,
			    MLOG_FRAME_HDR);
			return;
		}
		if (be16_load(h + 10) != header_check(h)) {
			if (intact_frame_after(buf, len, off + 1, max_record))
				scan_stop(res, MLOG_SCAN_CORRUPT, off,
				    "frame header check mismatch, with intact "
				    "records after it");
			else
				scan_stop(res, MLOG_SCAN_TORN, off,
				    "damaged frame header and nothing intact "
				    "after it");
			return;
		}
		uint32_t flen = be32_load(h);
		uint16_t type = be16_load(h + 8);
		if (flen > max_record) {
			scan_stop(res, MLOG_SCAN_CORRUPT, off,
			    "record of %u bytes is over the %u-byte maximum "
			    "(storage max record size)", flen, max_record);
			return;
		}
		if (flen > left - MLOG_FRAME_HDR) {
			scan_stop(res, MLOG_SCAN_TORN, off,
			    "record of %u bytes cut short after %zu bytes",
			    flen, left - MLOG_FRAME_HDR);
			return;
		}
		if (frame_crc(type, h + MLOG_FRAME_HDR, flen) !=
		    be32_load(h + 4)) {
			if (flen == left - MLOG_FRAME_HDR)
				scan_stop(res, MLOG_SCAN_TORN, off,
				    "CRC-32C mismatch in the final record "
				    "(type 0x%04x, %u bytes)", type, flen);
			else
				scan_stop(res, MLOG_SCAN_CORRUPT, off,
				    "CRC-32C mismatch in a record of type "
				    "0x%04x, %u bytes, with more data after it",
				    type, flen);
			return;
		}
		if (cb != NULL && cb(arg, type, h + MLOG_FRAME_HDR, flen,
		    off) != 0) {
			scan_stop(res, MLOG_SCAN_STOPPED, off,
			    "record rejected");
			return;
		}
		res->nrec++;
		off += MLOG_FRAME_HDR + flen;
		res->good_end = off;
	}
}

int mlog_sink_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	if (sink->failed)
		return -1;
	if (sink->put(sink, type, p, len) != 0) {
		sink->failed = 1;
		return -1;
	}
	sink->records++;
	return 0;
}

static int not_open(const struct mlog *ml, char *err, size_t errlen)
{
	if (ml->opened)
		return 0;
	snprintf(err, errlen, "metadata log in %s is not open",
	    ml->opts.dir != NULL ? ml->opts.dir : "(none)");
	return -1;
}

int mlog_open(struct mlog *ml, mlog_apply_fn apply, void *arg, char *err,
    size_t errlen)
{
	if (ml->opened) {
		snprintf(err, errlen, "metadata log in %s is already open",
		    ml->opts.dir);
		return -1;
	}
	if (ml->ops->open(ml, apply, arg, err, errlen) != 0)
		return -1;
	ml->opened = 1;
	return 0;
}

int mlog_append(struct mlog *ml, uint16_t type, const void *p, size_t len,
    char *err, size_t errlen)
{
	if (not_open(ml, err, errlen) != 0)
		return -1;
	if (type >= MLOG_TYPE_RESERVED) {
		snprintf(err, errlen, "record type 0x%04x is reserved for the "
		    "log's own framing", type);
		return -1;
	}
	if (len > ml->opts.max_record) {
		snprintf(err, errlen, "record of type 0x%04x is %zu bytes, "
		    "over the %u-byte maximum (storage max record size)",
		    type, len, ml->opts.max_record);
		return -1;
	}
	return ml->ops->append(ml, type, p, len, err, errlen);
}

static void run_sync_hook(struct mlog *ml)
{
	struct mlog_stats st;

	if (ml->sync_hook != NULL) {
		mlog_stats(ml, &st);
		ml->sync_hook(ml->sync_hook_arg, &st);
	}
}

int mlog_sync(struct mlog *ml, char *err, size_t errlen)
{
	ml->sync_error = 0;
	if (not_open(ml, err, errlen) != 0)
		return -1;
	mlog_wait(ml);
	ml->sync_error = 0;
	if (ml->ops->sync(ml, err, errlen) != 0)
		return -1;
	run_sync_hook(ml);
	return 0;
}

/*
 * The generic fallback of mlog_sync_async() for a backend without
 * sync_async: the group is synced at once and its completion waits in a
 * FIFO for the loop (or for the next mlog_wait()).
 */
struct mlog_group {
	struct mlog_group *next;
	mlog_done_fn done;
	void *arg;
	int rc;
	int16_t sync_error;
	char err[256];
};

void mlog_group_done(struct mlog *ml, mlog_done_fn done, void *arg, int rc,
    int16_t sync_error, const char *err)
{
	/* Each group handed to the log completes once. */
	MR_ASSERT(ml->groups_in_flight > 0);
	ml->groups_in_flight--;
	if (rc == 0)
		run_sync_hook(ml);
	if (done != NULL)
		done(arg, rc, sync_error, rc == 0 ? NULL : err);
}

/* Runs the deferred completions queued so far, oldest first, one popped
 * at a time (a done callback that calls mlog_sync() runs the rest in order
 * from there).  Groups a callback starts run on a later pass. */
static void run_deferred(struct mlog *ml)
{
	struct mlog_group *end = ml->defer_tail;

	while (ml->defer_head != NULL) {
		struct mlog_group *g = ml->defer_head;
		int last = g == end;
		ml->defer_head = g->next;
		if (ml->defer_head == NULL)
			ml->defer_tail = NULL;
		mlog_group_done(ml, g->done, g->arg, g->rc, g->sync_error,
		    g->err);
		free(g);
		if (last)
			break;
	}
}

static void on_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct mlog *ml = arg;

	(void)fd;
	(void)what;
	run_deferred(ml);
	if (ml->defer_head != NULL && ml->defer_ev != NULL)
		event_active(ml->defer_ev, 0, 0);
}

void mlog_set_event_base(struct mlog *ml, struct event_base *base)
{
	if (ml->defer_ev != NULL) {
		event_free(ml->defer_ev);
		ml->defer_ev = NULL;
	}
	ml->base = base;
	if (base != NULL)
		ml->defer_ev = event_new(base, -1, 0, on_deferred, ml);
	if (ml->defer_head != NULL && ml->defer_ev != NULL)
		event_active(ml->defer_ev, 0, 0);
}

/* Queues a completed generic group behind the earlier ones (log order)
 * and wakes the loop to deliver it. */
static void defer_push(struct mlog *ml, struct mlog_group *g)
{
	if (ml->defer_tail != NULL)
		ml->defer_tail->next = g;
	else
		ml->defer_head = g;
	ml->defer_tail = g;
	ml->groups_in_flight++;
	if (ml->defer_ev != NULL)
		event_active(ml->defer_ev, 0, 0);
}

/* A generic group for a back end without the asynchronous call: the
 * caller runs the blocking call into g->rc/g->err, then defer_push()es it
 * so done runs from the loop like the asynchronous back ends' groups. */
static struct mlog_group *defer_new(mlog_done_fn done, void *arg,
    char *err, size_t errlen)
{
	struct mlog_group *g = calloc(1, sizeof(*g));

	if (g == NULL) {
		snprintf(err, errlen, "out of memory for a metadata log group");
		return NULL;
	}
	g->done = done;
	g->arg = arg;
	return g;
}

int mlog_sync_async(struct mlog *ml, mlog_done_fn done, void *arg,
    char *err, size_t errlen)
{
	struct mlog_group *g;

	ml->sync_error = 0;
	if (not_open(ml, err, errlen) != 0)
		return -1;
	if (ml->ops->sync_async != NULL) {
		if (ml->ops->sync_async(ml, done, arg, err, errlen) != 0)
			return -1;
		ml->groups_in_flight++;
		return 0;
	}
	g = defer_new(done, arg, err, errlen);
	if (g == NULL)
		return -1;
	/* Earlier deferred groups are durable already; this one is written
	 * after them, so the FIFO keeps the log order. */
	g->rc = ml->ops->sync(ml, g->err, sizeof(g->err));
	g->sync_error = g->rc != 0 ? ml->sync_error : 0;
	defer_push(ml, g);
	return 0;
}

int mlog_compact_async(struct mlog *ml, mlog_dump_fn dump, void *arg,
    mlog_done_fn done, void *done_arg, char *err, size_t errlen)
{
	struct mlog_group *g;

	if (not_open(ml, err, errlen) != 0)
		return -1;
	if (ml->ops->compact_async != NULL) {
		if (ml->ops->compact_async(ml, dump, arg, done, done_arg, err,
		    errlen) != 0)
			return -1;
		ml->groups_in_flight++;
		return 0;
	}
	g = defer_new(done, done_arg, err, errlen);
	if (g == NULL)
		return -1;
	mlog_wait(ml);
	g->rc = ml->ops->compact(ml, dump, arg, g->err, sizeof(g->err));
	defer_push(ml, g);
	return 0;
}

void mlog_wait(struct mlog *ml)
{
	if (ml->ops->sync_async != NULL && ml->ops->wait != NULL &&
	    ml->opened)
		ml->ops->wait(ml);
	while (ml->defer_head != NULL)
		run_deferred(ml);
}

uint64_t mlog_in_flight(const struct mlog *ml)
{
	return ml->groups_in_flight;
}

void mlog_discard(struct mlog *ml)
{
	if (ml->opened)
		ml->ops->discard(ml);
}

int mlog_want_compact(const struct mlog *ml)
{
	struct mlog_stats s;

	if (!ml->opened || ml->applies_on_sync)
		return 0;   /* a follower never writes snapshots */
	ml->ops->stats(ml, &s);
	if (s.broken)
		return 0;
	return (ml->opts.compact_records != 0 &&
	    s.records_since_snapshot >= ml->opts.compact_records) ||
	    (ml->opts.compact_bytes != 0 &&
	    s.bytes_since_snapshot >= ml->opts.compact_bytes);
}

int mlog_compact(struct mlog *ml, mlog_dump_fn dump, void *arg, char *err,
    size_t errlen)
{
	if (not_open(ml, err, errlen) != 0)
		return -1;
	mlog_wait(ml);
	return ml->ops->compact(ml, dump, arg, err, errlen);
}

void mlog_stats(const struct mlog *ml, struct mlog_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->last_fsync_us = -1;
	out->snapshot_wall_ms = -1;
	ml->ops->stats(ml, out);
}

void mlog_set_sync_hook(struct mlog *ml,
    void (*fn)(void *arg, const struct mlog_stats *st), void *arg)
{
	ml->sync_hook = fn;
	ml->sync_hook_arg = arg;
}

void mlog_free(struct mlog *ml)
{
	if (ml == NULL)
		return;
	/* Deferred completions are dropped uncalled (their records are
	 * durable: the next open replays them). */
	while (ml->defer_head != NULL) {
		struct mlog_group *g = ml->defer_head;
		ml->defer_head = g->next;
		free(g);
	}
	ml->defer_tail = NULL;
	if (ml->defer_ev != NULL) {
		event_free(ml->defer_ev);
		ml->defer_ev = NULL;
	}
	ml->ops->free(ml);
}
