/*
 * Unit tests for mlog: the frame reader's torn-tail/corruption decision,
 * the file backend's round trip, torn-tail repair at every byte of the last
 * frame, refusal on corruption before the tail, compaction and every crash
 * state between its steps, the directory lock, and disk errors (ENOSPC on
 * write, EIO on fsync) through the injectable I/O hooks.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "batch.h"
#include "mlog.h"
#include "mlog_kafka.h"

/* ---- helpers ------------------------------------------------------------ */

static char *tmpdir_new(void)
{
	const char *base = getenv("TMPDIR");
	char *p;

	if (base == NULL || base[0] == '\0')
		base = "/tmp";
	ck_assert_int_gt(asprintf(&p, "%s/test_mlog.XXXXXX", base), 0);
	ck_assert_ptr_nonnull(mkdtemp(p));
	return p;
}

static void rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void write_file(const char *path, const uint8_t *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static int file_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &sb) == 0;
}

static char *path_in(const char *dir, const char *name)
{
	char *p;

	ck_assert_int_gt(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

#define SEG1 "mlog-00000000000000000001.log"
#define SEG2 "mlog-00000000000000000002.log"
#define SNAP2 "snapshot-00000000000000000002.snap"

/* What replay saw: each record's type and payload, in order. */
struct seen {
	size_t n;
	uint16_t type[512];
	size_t len[512];
	uint8_t data[512][1024];
	int snap[512];
	int fail_at;   /* apply fails on this record number (-1: never) */
};

static int collect(void *arg, const struct mlog_rec *rec, char *err,
    size_t errlen)
{
	struct seen *s = arg;

	if ((int)s->n == s->fail_at) {
		snprintf(err, errlen, "test apply refuses record %zu", s->n);
		return -1;
	}
	ck_assert_uint_lt(s->n, 512);
	ck_assert_uint_le(rec->len, 1024);
	s->type[s->n] = rec->type;
	s->len[s->n] = rec->len;
	memcpy(s->data[s->n], rec->p, rec->len);
	s->snap[s->n] = rec->in_snapshot;
	s->n++;
	return 0;
}

/* Record i of the test stream: type 1 + i % 7, i % 290 bytes of pattern. */
static size_t rec_payload(size_t i, uint8_t *buf)
{
	size_t len = (i * 37) % 290;

	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(i * 31 + k);
	return len;
}

static void check_stream(const struct seen *s, size_t n)
{
	uint8_t buf[300];

	ck_assert_uint_eq(s->n, n);
	for (size_t i = 0; i < n; i++) {
		size_t len = rec_payload(i, buf);
		ck_assert_uint_eq(s->type[i], 1 + i % 7);
		ck_assert_uint_eq(s->len[i], len);
		ck_assert_mem_eq(s->data[i], buf, len);
	}
}

static struct mlog *open_log(const char *dir, struct seen *s,
    const struct mlog_io *io)
{
	struct mlog_opts o;
	char err[1024];
	struct mlog *ml;

	mlog_opts_init(&o);
	o.dir = dir;
	o.io = io;
	ml = mlog_file_new(&o, err, sizeof(err));
	ck_assert_msg(ml != NULL, "mlog_file_new: %s", err);
	memset(s, 0, sizeof(*s));
	s->fail_at = -1;
	ck_assert_msg(mlog_open(ml, collect, s, err, sizeof(err)) == 0,
	    "mlog_open: %s", err);
	return ml;
}

/* Opens expecting failure; returns the message. */
static char *open_fails(const char *dir)
{
	struct mlog_opts o;
	static char err[1024];
	struct seen s;
	struct mlog *ml;

	mlog_opts_init(&o);
	o.dir = dir;
	ml = mlog_file_new(&o, err, sizeof(err));
	ck_assert_msg(ml != NULL, "mlog_file_new: %s", err);
	memset(&s, 0, sizeof(s));
	s.fail_at = -1;
	err[0] = '\0';
	ck_assert_int_eq(mlog_open(ml, collect, &s, err, sizeof(err)), -1);
	mlog_free(ml);
	return err;
}

static void append_range(struct mlog *ml, size_t from, size_t to)
{
	uint8_t buf[300];
	char err[1024];

	for (size_t i = from; i < to; i++) {
		size_t len = rec_payload(i, buf);
		ck_assert_msg(mlog_append(ml, (uint16_t)(1 + i % 7), buf, len,
		    err, sizeof(err)) == 0, "append: %s", err);
	}
	ck_assert_msg(mlog_sync(ml, err, sizeof(err)) == 0, "sync: %s", err);
}

/* Offset of frame i (0 = the segment header) in a segment file. */
static size_t frame_off(const uint8_t *b, size_t len, size_t i)
{
	size_t off = 0;

	while (i-- > 0) {
		ck_assert_uint_le(off + MLOG_FRAME_HDR, len);
		off += MLOG_FRAME_HDR + be32_load(b + off);
	}
	return off;
}

/* ---- the frame reader --------------------------------------------------- */

static int count_cb(void *arg, uint16_t type, const uint8_t *p, uint32_t len,
    uint64_t off)
{
	(*(int *)arg)++;
	return 0;
}

static size_t build_frames(uint8_t *buf, int n)
{
	size_t off = 0;

	for (int i = 0; i < n; i++) {
		uint8_t pl[20];
		memset(pl, 'a' + i, sizeof(pl));
		mlog_frame_header(buf + off, (uint16_t)(i + 1), pl, sizeof(pl));
		memcpy(buf + off + MLOG_FRAME_HDR, pl, sizeof(pl));
		off += MLOG_FRAME_HDR + sizeof(pl);
	}
	return off;
}

START_TEST(test_scan_decisions)
{
	uint8_t buf[512];
	size_t len = build_frames(buf, 4);   /* 4 frames of 32 bytes */
	struct mlog_scan_result r;
	int n = 0;

	mlog_scan(buf, len, 1024, count_cb, &n, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_CLEAN);
	ck_assert_int_eq(n, 4);
	ck_assert_uint_eq(r.good_end, 128);

	/* Payload byte of frame 1 flipped: frames follow -> corrupt. */
	buf[32 + MLOG_FRAME_HDR + 3] ^= 0x01;
	mlog_scan(buf, len, 1024, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_CORRUPT);
	ck_assert_uint_eq(r.bad_off, 32);
	ck_assert_uint_eq(r.good_end, 32);
	ck_assert_ptr_nonnull(strstr(r.why, "CRC-32C mismatch"));
	buf[32 + MLOG_FRAME_HDR + 3] ^= 0x01;

	/* Length byte of frame 2 flipped: header check fails, frame 3 is
	 * intact after it -> corrupt, not torn. */
	buf[64 + 3] ^= 0x40;
	mlog_scan(buf, len, 1024, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_CORRUPT);
	ck_assert_uint_eq(r.bad_off, 64);
	ck_assert_ptr_nonnull(strstr(r.why, "header check"));
	buf[64 + 3] ^= 0x40;

	/* Same damage in the last frame: nothing intact after -> torn. */
	buf[96 + 3] ^= 0x40;
	mlog_scan(buf, len, 1024, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_TORN);
	ck_assert_uint_eq(r.good_end, 96);
	buf[96 + 3] ^= 0x40;

	/* CRC mismatch in the final frame that ends at EOF -> torn. */
	buf[len - 1] ^= 0xff;
	mlog_scan(buf, len, 1024, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_TORN);
	ck_assert_uint_eq(r.bad_off, 96);
	ck_assert_ptr_nonnull(strstr(r.why, "final record"));
	buf[len - 1] ^= 0xff;

	/* A zero-filled tail (a crash after the file grew) -> torn. */
	memset(buf + len, 0, 40);
	mlog_scan(buf, len + 40, 1024, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_TORN);
	ck_assert_uint_eq(r.good_end, len);

	/* A checked header declaring more than max_record -> corrupt. */
	mlog_scan(buf, len, 19, NULL, NULL, &r);
	ck_assert_int_eq(r.end, MLOG_SCAN_CORRUPT);
	ck_assert_uint_eq(r.bad_off, 0);
	ck_assert_ptr_nonnull(strstr(r.why, "over the 19-byte maximum"));
}
END_TEST

/* ---- file backend ----------------------------------------------------- */

/* mlog_set_sync_hook(): how often it ran and the stats it last saw. */
struct hook_seen {
	int calls;
	struct mlog_stats last;
};

static void sync_hook(void *arg, const struct mlog_stats *st)
{
	struct hook_seen *hs = arg;

	hs->calls++;
	hs->last = *st;
}

START_TEST(test_round_trip)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog_stats st;
	struct mlog *ml = open_log(dir, s, NULL);
	struct hook_seen hs = { 0 };

	ck_assert_uint_eq(s->n, 0);
	mlog_set_sync_hook(ml, sync_hook, &hs);
	append_range(ml, 0, 100);
	ck_assert_int_eq(hs.calls, 1);
	ck_assert_uint_eq(hs.last.records, 100);
	/* Several appends, one sync: all visible after the sync. */
	append_range(ml, 100, 200);
	ck_assert_int_eq(hs.calls, 2);
	ck_assert_uint_eq(hs.last.records, 200);
	ck_assert_uint_eq(hs.last.syncs, 2);
	ck_assert_int_ge(hs.last.last_fsync_us, 0);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.records, 200);
	ck_assert_uint_eq(st.pending, 0);
	ck_assert_uint_eq(st.syncs, 2);
	ck_assert_int_ge(st.last_fsync_us, 0);
	ck_assert_int_eq(st.snapshot_wall_ms, -1);
	mlog_free(ml);

	ml = open_log(dir, s, NULL);
	check_stream(s, 200);
	for (size_t i = 0; i < s->n; i++)
		ck_assert_int_eq(s->snap[i], 0);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.records, 200);
	/* Appends after a reopen continue the same segment. */
	append_range(ml, 200, 210);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 210);
	mlog_free(ml);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

START_TEST(test_unsynced_records_are_not_written)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml = open_log(dir, s, NULL);
	char err[256];

	append_range(ml, 0, 5);
	ck_assert_int_eq(mlog_append(ml, 1, "xyz", 3, err, sizeof(err)), 0);
	mlog_discard(ml);
	append_range(ml, 5, 6);
	ck_assert_int_eq(mlog_append(ml, 1, "lost", 4, err, sizeof(err)), 0);
	/* Enough unsynced bytes that the append buffer spills into the
	 * file: they must not come back either. */
	{
		static uint8_t big[60000];
		for (int i = 0; i < 20; i++)   /* over the 1 MiB buffer */
			ck_assert_int_eq(mlog_append(ml, 2, big, sizeof(big),
			    err, sizeof(err)), 0);
	}
	mlog_free(ml);   /* never synced: dropped */
	ml = open_log(dir, s, NULL);
	check_stream(s, 6);
	mlog_free(ml);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

START_TEST(test_limits_and_lock)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml = open_log(dir, s, NULL), *ml2;
	struct mlog_opts o;
	char err[1024];
	uint8_t *big = calloc(1, MLOG_MAX_RECORD_DEFAULT + 1);

	ck_assert_int_eq(mlog_append(ml, 1, big, MLOG_MAX_RECORD_DEFAULT + 1,
	    err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "1048577 bytes, over the 1048576-byte"));
	ck_assert_int_eq(mlog_append(ml, 1, big, MLOG_MAX_RECORD_DEFAULT,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(ml, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_append(ml, MLOG_T_SEGMENT, "x", 1, err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "reserved"));

	/* A second owner of the directory is refused, naming it. */
	mlog_opts_init(&o);
	o.dir = dir;
	ml2 = mlog_file_new(&o, err, sizeof(err));
	ck_assert_ptr_null(ml2);
	ck_assert_ptr_nonnull(strstr(err, dir));
	ck_assert_ptr_nonnull(strstr(err, "in use by another mirrord"));
	mlog_free(ml);
	/* Released with the first. */
	ml2 = mlog_file_new(&o, err, sizeof(err));
	ck_assert_msg(ml2 != NULL, "%s", err);
	mlog_free(ml2);
	free(big);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/* Writes 20 records, then cuts the last frame at every byte offset: each
 * open keeps exactly the first 19, truncates the file, and takes appends. */
START_TEST(test_torn_tail_every_byte)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml = open_log(dir, s, NULL);
	char *seg = path_in(dir, SEG1);
	uint8_t *full;
	size_t len, last;
	struct mlog_stats st;

	append_range(ml, 0, 20);
	mlog_free(ml);
	full = read_file(seg, &len);
	ck_assert_ptr_nonnull(full);
	last = frame_off(full, len, 20);   /* header + 19 records */
	ck_assert_uint_gt(len, last + MLOG_FRAME_HDR);
	for (size_t cut = last; cut < len; cut++) {
		size_t after;
		uint8_t *b;
		write_file(seg, full, cut);
		ml = open_log(dir, s, NULL);
		check_stream(s, 19);
		mlog_stats(ml, &st);
		ck_assert_uint_eq(st.torn_bytes_dropped, cut - last);
		b = read_file(seg, &after);
		ck_assert_uint_eq(after, last);
		free(b);
		/* The repaired log takes the record again. */
		append_range(ml, 19, 20);
		mlog_free(ml);
		ml = open_log(dir, s, NULL);
		check_stream(s, 20);
		mlog_free(ml);
	}
	/* A CRC mismatch in the final frame: torn as well. */
	full[len - 1] ^= 0x55;
	write_file(seg, full, len);
	ml = open_log(dir, s, NULL);
	check_stream(s, 19);
	mlog_free(ml);
	free(full);
	free(seg);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

START_TEST(test_corruption_refuses_to_start)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml = open_log(dir, s, NULL);
	char *seg = path_in(dir, SEG1), want[256];
	uint8_t *full;
	size_t len, off;
	char *msg;

	append_range(ml, 0, 10);
	mlog_free(ml);
	full = read_file(seg, &len);
	off = frame_off(full, len, 4);   /* record 3 */

	/* A payload byte: CRC mismatch with records after it. */
	full[off + MLOG_FRAME_HDR + 1] ^= 0x10;
	write_file(seg, full, len);
	msg = open_fails(dir);
	snprintf(want, sizeof(want), "%s: corrupt record at byte offset %zu",
	    seg, off);
	ck_assert_msg(strstr(msg, want) != NULL, "message: %s", msg);
	ck_assert_ptr_nonnull(strstr(msg, "refusing to start"));
	full[off + MLOG_FRAME_HDR + 1] ^= 0x10;

	/* A header byte (the length): also corruption, same offset. */
	full[off + 2] ^= 0x01;
	write_file(seg, full, len);
	msg = open_fails(dir);
	ck_assert_msg(strstr(msg, want) != NULL, "message: %s", msg);
	full[off + 2] ^= 0x01;

	/* Nothing was truncated or rewritten by the refused opens. */
	{
		size_t now;
		uint8_t *b = read_file(seg, &now);
		ck_assert_uint_eq(now, len);
		free(b);
	}
	write_file(seg, full, len);
	ml = open_log(dir, s, NULL);
	check_stream(s, 10);
	mlog_free(ml);

	/* An apply failure names file and offset too. */
	{
		struct mlog_opts o;
		char err[1024];
		struct mlog *m2;
		mlog_opts_init(&o);
		o.dir = dir;
		m2 = mlog_file_new(&o, err, sizeof(err));
		memset(s, 0, sizeof(*s));
		s->fail_at = 3;
		ck_assert_int_eq(mlog_open(m2, collect, s, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "%s: record at byte offset %zu: "
		    "test apply refuses record 3", seg, off);
		ck_assert_msg(strstr(err, want) != NULL, "message: %s", err);
		mlog_free(m2);
	}
	free(full);
	free(seg);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/* ---- compaction -------------------------------------------------------- */

/* The "state" of this test is the record stream itself: a snapshot holds
 * every record seen so far. */
struct stream_state {
	struct seen *s;
};

static int dump_stream(void *arg, struct mlog_sink *sink)
{
	struct seen *s = arg;

	for (size_t i = 0; i < s->n; i++)
		if (mlog_sink_put(sink, s->type[i], s->data[i], s->len[i]) != 0)
			return -1;
	return 0;
}

static void copy_named(const char *from, const char *to, const char *name)
{
	char *a = path_in(from, name), *b = path_in(to, name);
	size_t len;
	uint8_t *d = read_file(a, &len);

	ck_assert_msg(d != NULL, "missing %s", a);
	write_file(b, d, len);
	free(d);
	free(a);
	free(b);
}

START_TEST(test_compaction_round_trip)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s)), *all = calloc(1, sizeof(*all));
	struct mlog *ml;
	struct mlog_stats st;
	char err[1024];

	ml = open_log(dir, s, NULL);
	append_range(ml, 0, 30);
	mlog_free(ml);
	ml = open_log(dir, all, NULL);   /* all: the 30 records */
	check_stream(all, 30);
	ck_assert_msg(mlog_compact(ml, dump_stream, all, err, sizeof(err)) == 0,
	    "compact: %s", err);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.compactions, 1);
	ck_assert_uint_eq(st.records_since_snapshot, 0);
	ck_assert_int_gt(st.snapshot_wall_ms, 0);
	ck_assert(!file_exists(dir, SEG1));
	ck_assert(file_exists(dir, SNAP2));
	ck_assert(file_exists(dir, SEG2));
	/* Nothing new: a second compaction writes nothing. */
	ck_assert_int_eq(mlog_compact(ml, dump_stream, all, err, sizeof(err)),
	    0);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.compactions, 1);
	ck_assert(file_exists(dir, SEG2));
	append_range(ml, 30, 40);
	mlog_free(ml);

	ml = open_log(dir, s, NULL);
	check_stream(s, 40);
	for (size_t i = 0; i < 40; i++)
		ck_assert_int_eq(s->snap[i], i < 30);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.records, 40);
	ck_assert_uint_eq(st.records_since_snapshot, 10);
	mlog_free(ml);

	/* A damaged snapshot is never silently skipped. */
	{
		char *sp = path_in(dir, SNAP2);
		size_t len;
		uint8_t *b = read_file(sp, &len);
		b[len - 1] ^= 1;   /* inside the end marker */
		write_file(sp, b, len);
		char *msg = open_fails(dir);
		ck_assert_msg(strstr(msg, sp) != NULL && strstr(msg,
		    "snapshot damaged at byte offset") != NULL, "%s", msg);
		free(b);
		free(sp);
	}
	rm_rf(dir);
	free(dir);
	free(s);
	free(all);
}
END_TEST

/*
 * The crash states of a compaction from segment 1 to snapshot 2: every
 * set of files that can exist on disk between the steps opens to the same
 * 30 records.
 */
START_TEST(test_compaction_crash_states)
{
	char *before = tmpdir_new(), *after = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s)), *all = calloc(1, sizeof(*all));
	struct mlog *ml;
	char err[1024];
	size_t len;
	uint8_t *snap, *seg2;

	ml = open_log(before, s, NULL);
	append_range(ml, 0, 30);
	mlog_free(ml);
	/* after: the same log compacted */
	copy_named(before, after, SEG1);
	ml = open_log(after, all, NULL);
	ck_assert_int_eq(mlog_compact(ml, dump_stream, all, err, sizeof(err)), 0);
	mlog_free(ml);
	char *sp = path_in(after, SNAP2), *s2 = path_in(after, SEG2);
	snap = read_file(sp, &len);
	size_t seg2len;
	seg2 = read_file(s2, &seg2len);

	for (int state = 0; state < 6; state++) {
		char *d = tmpdir_new();
		char *p;
		copy_named(before, d, SEG1);
		switch (state) {
		case 0:	/* snapshot .tmp half written */
			p = path_in(d, SNAP2 ".tmp");
			write_file(p, snap, len / 2);
			free(p);
			break;
		case 1:	/* .tmp complete, not renamed */
			p = path_in(d, SNAP2 ".tmp");
			write_file(p, snap, len);
			free(p);
			break;
		case 2:	/* renamed; no new segment yet */
			p = path_in(d, SNAP2);
			write_file(p, snap, len);
			free(p);
			break;
		case 3:	/* new segment created, header not yet written */
			p = path_in(d, SNAP2);
			write_file(p, snap, len);
			free(p);
			p = path_in(d, SEG2);
			write_file(p, seg2, 0);
			free(p);
			break;
		case 4:	/* new segment header half written */
			p = path_in(d, SNAP2);
			write_file(p, snap, len);
			free(p);
			p = path_in(d, SEG2);
			write_file(p, seg2, seg2len / 2);
			free(p);
			break;
		case 5:	/* everything new in place, old segment not removed */
			p = path_in(d, SNAP2);
			write_file(p, snap, len);
			free(p);
			p = path_in(d, SEG2);
			write_file(p, seg2, seg2len);
			free(p);
			break;
		}
		ml = open_log(d, s, NULL);
		check_stream(s, 30);
		ck_assert_msg(!file_exists(d, SNAP2 ".tmp"), "state %d", state);
		if (state >= 2)
			ck_assert_msg(!file_exists(d, SEG1) &&
			    file_exists(d, SEG2), "state %d", state);
		/* and the log goes on from there */
		append_range(ml, 30, 33);
		mlog_free(ml);
		ml = open_log(d, s, NULL);
		check_stream(s, 33);
		mlog_free(ml);
		rm_rf(d);
		free(d);
	}
	free(snap);
	free(seg2);
	free(sp);
	free(s2);
	rm_rf(before);
	rm_rf(after);
	free(before);
	free(after);
	free(s);
	free(all);
}
END_TEST

/* ---- disk errors ------------------------------------------------------- */

struct faults {
	int write_errno;   /* fail pwrite with this (0: pass) */
	int fsync_errno;   /* fail fsync with this */
	int short_write;   /* write only part of the buffer before failing */
	int fsync_fail_in; /* > 0: the fsync call this many from now fails */
};

static ssize_t fault_pwrite(void *arg, int fd, const void *buf, size_t n,
    off_t off)
{
	struct faults *f = arg;

	if (f->write_errno != 0) {
		if (f->short_write && n > 1) {
			/* Half the bytes reach the file, then the disk is full. */
			ssize_t w = pwrite(fd, buf, n / 2, off);
			f->short_write = 0;
			return w;
		}
		errno = f->write_errno;
		return -1;
	}
	return pwrite(fd, buf, n, off);
}

static int fault_fsync(void *arg, int fd)
{
	struct faults *f = arg;

	if (f->fsync_errno != 0 ||
	    (f->fsync_fail_in > 0 && --f->fsync_fail_in == 0)) {
		errno = f->fsync_errno != 0 ? f->fsync_errno : EIO;
		return -1;
	}
	return fsync(fd);
}

START_TEST(test_enospc_on_write)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct faults f = { 0 };
	struct mlog_io io = { fault_pwrite, fault_fsync, &f };
	struct mlog *ml = open_log(dir, s, &io);
	char err[1024], want[512];
	struct mlog_stats st;

	char *seg = path_in(dir, SEG1);
	struct stat sb;
	off_t good;

	append_range(ml, 0, 5);
	ck_assert_int_eq(stat(seg, &sb), 0);
	good = sb.st_size;
	f.write_errno = ENOSPC;
	f.short_write = 1;   /* part of the group reaches the file first */
	ck_assert_int_eq(mlog_append(ml, 3, "abc", 3, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_append(ml, 4, "defg", 4, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(ml, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s/%s: write of", dir, SEG1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	ck_assert_ptr_nonnull(strstr(err, strerror(ENOSPC)));
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.pending, 0);
	ck_assert_uint_eq(st.records, 5);
	ck_assert_int_eq(st.broken, 0);
	/* The half-written group was cut off the file again. */
	ck_assert_int_eq(stat(seg, &sb), 0);
	ck_assert_int_eq(sb.st_size, good);
	free(seg);
	/* EIO on write: the same, with its own message. */
	f.write_errno = EIO;
	ck_assert_int_eq(mlog_append(ml, 3, "abc", 3, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(ml, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, want) != NULL && strstr(err,
	    strerror(EIO)) != NULL, "%s", err);
	/* Space comes back: the log goes on, without the failed groups. */
	f.write_errno = 0;
	append_range(ml, 5, 8);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 8);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.torn_bytes_dropped, 0);
	mlog_free(ml);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

START_TEST(test_eio_on_fsync)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct faults f = { 0 };
	struct mlog_io io = { fault_pwrite, fault_fsync, &f };
	struct mlog *ml = open_log(dir, s, &io);
	char err[1024], want[512];
	struct mlog_stats st;

	struct hook_seen hs = { 0 };

	append_range(ml, 0, 5);
	mlog_set_sync_hook(ml, sync_hook, &hs);
	f.fsync_errno = EIO;
	ck_assert_int_eq(mlog_append(ml, 3, "abc", 3, err, sizeof(err)), 0);
	ck_assert_int_eq(mlog_sync(ml, err, sizeof(err)), -1);
	ck_assert_int_eq(hs.calls, 0); /* not after a failed sync */
	snprintf(want, sizeof(want), "%s/%s: fsync failed: %s", dir, SEG1,
	    strerror(EIO));
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	mlog_stats(ml, &st);
	ck_assert_int_eq(st.broken, 1);
	/* Refuses further writes, saying why. */
	f.fsync_errno = 0;
	ck_assert_int_eq(mlog_append(ml, 3, "abc", 3, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "read-only after an earlier failure"));
	ck_assert_ptr_nonnull(strstr(err, "fsync failed"));
	mlog_free(ml);
	/* The unsynced record was cut off the file. */
	ml = open_log(dir, s, NULL);
	check_stream(s, 5);
	mlog_free(ml);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/* A compaction that fails at any of its fsyncs, or writing its snapshot,
 * fails cleanly: the log goes on in the old segment and reopens to every
 * record. */
START_TEST(test_compaction_failures)
{
	struct seen *s = calloc(1, sizeof(*s)), *all = calloc(1, sizeof(*all));
	char err[1024];

	for (int step = 0; step <= 4; step++) {
		char *dir = tmpdir_new();
		struct faults f = { 0 };
		struct mlog_io io = { fault_pwrite, fault_fsync, &f };
		struct mlog *ml = open_log(dir, s, &io);
		struct mlog_stats st;

		append_range(ml, 0, 20);
		mlog_free(ml);
		ml = open_log(dir, all, &io);
		if (step == 0)
			f.write_errno = ENOSPC;   /* writing the snapshot */
		else
			f.fsync_fail_in = step;   /* 1: snapshot, 2: dir after
						   * the rename, 3: new segment,
						   * 4: dir after it */
		ck_assert_int_eq(mlog_compact(ml, dump_stream, all, err,
		    sizeof(err)), -1);
		ck_assert_msg(strstr(err, dir) != NULL, "step %d: %s", step,
		    err);
		ck_assert_msg(strstr(err, step == 0 ? strerror(ENOSPC) :
		    strerror(EIO)) != NULL, "step %d: %s", step, err);
		ck_assert_msg(!file_exists(dir, SNAP2) &&
		    !file_exists(dir, SNAP2 ".tmp") && !file_exists(dir, SEG2),
		    "step %d left new files behind", step);
		f.write_errno = 0;
		f.fsync_fail_in = 0;
		mlog_stats(ml, &st);
		ck_assert_int_eq(st.broken, 0);
		ck_assert_uint_eq(st.compactions, 0);
		append_range(ml, 20, 25);
		mlog_free(ml);
		ml = open_log(dir, s, NULL);
		check_stream(s, 25);
		mlog_free(ml);
		rm_rf(dir);
		free(dir);
	}
	free(s);
	free(all);
}
END_TEST

/* Only the newest segment may end torn; a segment must not be missing. */
START_TEST(test_segment_sequence_errors)
{
	char *before = tmpdir_new(), *d = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml;
	char *p, *msg, want[512];
	size_t len;
	uint8_t *seg;

	ml = open_log(before, s, NULL);
	append_range(ml, 0, 5);
	mlog_free(ml);
	p = path_in(before, SEG1);
	seg = read_file(p, &len);
	free(p);

	/* segment 1 torn, segment 2 after it */
	p = path_in(d, SEG1);
	write_file(p, seg, len - 3);
	free(p);
	p = path_in(d, "mlog-00000000000000000002.log");
	write_file(p, seg, 0);
	free(p);
	msg = open_fails(d);
	snprintf(want, sizeof(want), "%s/%s: damaged record at byte offset",
	    d, SEG1);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	ck_assert_ptr_nonnull(strstr(msg, "not the newest"));

	/* segment 1 gone, segment 2 present */
	p = path_in(d, SEG1);
	unlink(p);
	free(p);
	msg = open_fails(d);
	snprintf(want, sizeof(want), "%s/%s is missing", d, SEG1);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	free(seg);
	rm_rf(before);
	rm_rf(d);
	free(before);
	free(d);
	free(s);
}
END_TEST

/* A real full disk: a 64 KiB tmpfs, where mounting is allowed (root).
 * The teardown unmounts even when an assertion ended the test. */
static char *tmpfs_mnt;

static void tmpfs_teardown(void)
{
	if (tmpfs_mnt == NULL)
		return;
	umount2(tmpfs_mnt, MNT_DETACH);
	rmdir(tmpfs_mnt);
	free(tmpfs_mnt);
	tmpfs_mnt = NULL;
}

START_TEST(test_enospc_real_tmpfs)
{
	char *mnt = tmpfs_mnt = tmpdir_new(), *dir = path_in(mnt, "data");
	struct seen *s = calloc(1, sizeof(*s));
	struct mlog *ml;
	struct mlog_stats st;
	uint8_t rec[1000];
	char err[1024], want[512];
	size_t ok = 0;

	if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
		fprintf(stderr, "test_enospc_real_tmpfs: skipped, cannot mount "
		    "a tmpfs on %s: %s\n", mnt, strerror(errno));
		goto out;
	}
	ml = open_log(dir, s, NULL);
	memset(rec, 0xab, sizeof(rec));
	for (;;) {
		ck_assert_uint_lt(ok, 1000);   /* 64 KiB must fill up */
		ck_assert_int_eq(mlog_append(ml, 1, rec, sizeof(rec), err,
		    sizeof(err)), 0);
		if (mlog_sync(ml, err, sizeof(err)) != 0)
			break;
		ok++;
	}
	snprintf(want, sizeof(want), "%s/%s: write of", dir, SEG1);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	ck_assert_msg(strstr(err, strerror(ENOSPC)) != NULL, "%s", err);
	ck_assert_uint_gt(ok, 10);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.records, ok);
	ck_assert_int_eq(st.broken, 0);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	ck_assert_uint_eq(s->n, ok);
	ck_assert_uint_eq(s->len[ok - 1], sizeof(rec));
	ck_assert_mem_eq(s->data[ok - 1], rec, sizeof(rec));
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.torn_bytes_dropped, 0);
	mlog_free(ml);
out:
	free(dir);
	free(s);
}
END_TEST

/* ---- the replicated backend's batch encoding --------------------------- */

struct kseen {
	int n;
	int64_t off[8];
	int snap[8];
	const uint8_t *v[8];
	size_t vlen[8];
};

static int kseen_rec(void *arg, const struct mlog_kafka_rec *r)
{
	struct kseen *s = arg;

	ck_assert_int_lt(s->n, 8);
	s->off[s->n] = r->offset;
	s->snap[s->n] = r->snapshot;
	s->v[s->n] = r->value;
	s->vlen[s->n] = r->value_len;
	s->n++;
	return 0;
}

START_TEST(test_kafka_batch_round_trip)
{
	static const char *payload[] = { "mirror m1", "", "topic t1 partition 3" };
	uint8_t frames[256];
	size_t flen = 0, blen, at[3];
	char err[256];

	for (int i = 0; i < 3; i++) {
		size_t n = strlen(payload[i]);
		at[i] = flen;
		mlog_frame_header(frames + flen, (uint16_t)(7 + i), payload[i],
		    (uint32_t)n);
		memcpy(frames + flen + MLOG_FRAME_HDR, payload[i], n);
		flen += MLOG_FRAME_HDR + n;
	}
	for (int snap = 0; snap <= 1; snap++) {
		uint8_t *b = mlog_kafka_encode_batch(frames, flen, snap, 4711, 3,
		    40, 1700000000000, &blen, err, sizeof(err));
		struct batch hb;
		struct kseen s = { 0 };

		ck_assert_msg(b != NULL, "%s", err);
		/* What a broker checks of a produced batch. */
		ck_assert_msg(batch_validate_produce(b, blen, 1 << 20, err,
		    sizeof(err)) == 0, "%s", err);
		ck_assert_int_eq(batch_parse(b, blen, &hb, err, sizeof(err)),
		    BATCH_OK);
		ck_assert_int_eq(batch_verify_crc(&hb, err, sizeof(err)), 0);
		ck_assert_int_eq(hb.len, blen);
		ck_assert_int_eq(hb.producer_id, 4711);
		ck_assert_int_eq(hb.producer_epoch, 3);
		ck_assert_int_eq(hb.base_sequence, 40);
		ck_assert_int_eq(hb.record_count, 3);
		ck_assert_int_eq(hb.last_offset_delta, 2);
		ck_assert_int_eq(batch_is_transactional(&hb), 0);
		ck_assert_int_eq(batch_codec(&hb), BATCH_CODEC_NONE);
		ck_assert_int_eq(mlog_kafka_decode_records(100, hb.records,
		    hb.records_len, hb.record_count, kseen_rec, &s, err,
		    sizeof(err)), 0);
		ck_assert_int_eq(s.n, 3);
		for (int i = 0; i < 3; i++) {
			size_t want = MLOG_FRAME_HDR + strlen(payload[i]);
			ck_assert_int_eq(s.off[i], 100 + i);
			ck_assert_int_eq(s.snap[i], snap);
			ck_assert_uint_eq(s.vlen[i], want);
			ck_assert(memcmp(s.v[i], frames + at[i], want) == 0);
		}
		/* Any cut inside the records is malformed, never read past. */
		for (size_t cut = 0; cut < hb.records_len; cut++) {
			struct kseen s2 = { 0 };
			ck_assert_int_eq(mlog_kafka_decode_records(0, hb.records,
			    cut, hb.record_count, kseen_rec, &s2, err,
			    sizeof(err)), -1);
		}
		free(b);
	}
	/* Many small frames: the framing outweighs the payloads. */
	{
		size_t n = 30000, fl = 0, bl;
		uint8_t *many = malloc(n * MLOG_FRAME_HDR), *b;
		struct batch hb;

		ck_assert(many != NULL);
		for (size_t i = 0; i < n; i++, fl += MLOG_FRAME_HDR)
			mlog_frame_header(many + fl, 7, "", 0);
		b = mlog_kafka_encode_batch(many, fl, 1, 1, 0, 0, 0, &bl, err,
		    sizeof(err));
		ck_assert_msg(b != NULL, "%s", err);
		ck_assert_int_eq(batch_parse(b, bl, &hb, err, sizeof(err)),
		    BATCH_OK);
		ck_assert_int_eq(hb.record_count, (int32_t)n);
		free(b);
		free(many);
	}
	/* A frame cut short is refused, not encoded. */
	ck_assert(mlog_kafka_encode_batch(frames, flen - 1, 0, 1, 0, 0, 0,
	    &blen, err, sizeof(err)) == NULL);
}
END_TEST

/* ---- asynchronous groups (group commit on the writer thread) ---------- */

/* An fsync hook the test can hold (the writer thread blocks in it until
 * released) and fail at a given call. */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int hold;          /* 1: the next fsync blocks until hold is 0 */
	int inside;        /* a blocked fsync is waiting */
	int calls;         /* fsyncs of segment data so far */
	int fail_call;     /* > 0: this call fails with EIO */
};

static int gate_fsync(void *arg, int fd)
{
	struct gate *g = arg;
	int fail;

	pthread_mutex_lock(&g->mu);
	g->calls++;
	fail = g->fail_call > 0 && g->calls == g->fail_call;
	if (g->hold) {
		g->inside = 1;
		pthread_cond_broadcast(&g->cv);
		while (g->hold)
			pthread_cond_wait(&g->cv, &g->mu);
		g->inside = 0;
	}
	pthread_mutex_unlock(&g->mu);
	if (fail) {
		errno = EIO;
		return -1;
	}
	return fsync(fd);
}

static void gate_wait_inside(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	while (!g->inside)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

static void gate_release(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->hold = 0;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

struct done_log {
	int n;
	int id[64];
	int rc[64];
	char err[64][512];
	struct mlog_stats seen_at[64];
	struct mlog *ml;
};

struct done_arg {
	struct done_log *dl;
	int id;
};

static void on_done(void *arg, int rc, int16_t sync_error, const char *err)
{
	struct done_arg *da = arg;
	struct done_log *dl = da->dl;

	ck_assert_int_eq(sync_error, 0);
	ck_assert_int_lt(dl->n, 64);
	dl->id[dl->n] = da->id;
	dl->rc[dl->n] = rc;
	snprintf(dl->err[dl->n], sizeof(dl->err[0]), "%s",
	    err != NULL ? err : "");
	mlog_stats(dl->ml, &dl->seen_at[dl->n]);
	dl->n++;
}

/* Appends records from..to and starts them as one group. */
static void async_range(struct mlog *ml, size_t from, size_t to,
    struct done_arg *da)
{
	uint8_t buf[300];
	char err[1024];

	for (size_t i = from; i < to; i++) {
		size_t len = rec_payload(i, buf);
		ck_assert_msg(mlog_append(ml, (uint16_t)(1 + i % 7), buf, len,
		    err, sizeof(err)) == 0, "append: %s", err);
	}
	ck_assert_msg(mlog_sync_async(ml, on_done, da, err, sizeof(err)) == 0,
	    "sync_async: %s", err);
}

/* Runs the loop until n completions were seen (a deadline fails). */
static void loop_until(struct event_base *base, struct done_log *dl, int n)
{
	for (int i = 0; i < 20000 && dl->n < n; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK),
		    usleep(i < 100 ? 0 : 1000);
	ck_assert_msg(dl->n >= n, "only %d of %d groups completed", dl->n, n);
}

/*
 * Groups complete on the loop in order; groups started while the writer
 * thread is inside an fsync share the next fsync (group commit); a done
 * callback never runs inside mlog_sync_async(); everything reopens.
 */
START_TEST(test_async_group_commit)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct gate g = { .mu = PTHREAD_MUTEX_INITIALIZER,
	    .cv = PTHREAD_COND_INITIALIZER };
	struct mlog_io io = { NULL, gate_fsync, &g };
	struct mlog *ml = open_log(dir, s, &io);
	struct event_base *base = event_base_new();
	struct done_log dl = { .ml = ml };
	struct done_arg da[5];
	struct hook_seen hs = { 0 };
	struct mlog_stats st;

	g.hold = 1;   /* after the open's own fsyncs */
	mlog_set_event_base(ml, base);
	mlog_set_sync_hook(ml, sync_hook, &hs);
	for (int i = 0; i < 5; i++)
		da[i] = (struct done_arg){ &dl, i };
	async_range(ml, 0, 10, &da[0]);
	ck_assert_int_eq(dl.n, 0);
	gate_wait_inside(&g);   /* group 0 is in its fsync */
	async_range(ml, 10, 20, &da[1]);
	async_range(ml, 20, 25, &da[2]);
	async_range(ml, 25, 40, &da[3]);
	ck_assert_uint_eq(mlog_in_flight(ml), 4);
	ck_assert_int_eq(dl.n, 0);
	gate_release(&g);
	loop_until(base, &dl, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(dl.id[i], i);
		ck_assert_int_eq(dl.rc[i], 0);
	}
	/* Groups 1..3 went in one fsync round after group 0's. */
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.syncs, 2);
	ck_assert_uint_eq(st.groups, 4);
	ck_assert_uint_eq(st.records, 40);
	ck_assert_uint_eq(st.last_group_records, 30);
	ck_assert_uint_eq(st.max_group_records, 30);
	ck_assert_int_ge(st.last_fsync_us, 0);
	ck_assert_uint_eq(mlog_in_flight(ml), 0);
	/* Group 0's stats are visible in its callback. */
	ck_assert_uint_eq(dl.seen_at[0].records, 10);
	ck_assert_int_eq(hs.calls, 4);
	/* An empty group completes in order like any other. */
	async_range(ml, 40, 40, &da[4]);
	loop_until(base, &dl, 5);
	ck_assert_int_eq(dl.rc[4], 0);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 40);
	mlog_free(ml);
	event_base_free(base);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/*
 * A failed fsync fails its group and every group after it, naming the
 * file and the error; the log is then broken; reopening keeps exactly the
 * groups acknowledged before.
 */
START_TEST(test_async_fsync_failure)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct gate g = { .mu = PTHREAD_MUTEX_INITIALIZER,
	    .cv = PTHREAD_COND_INITIALIZER };
	struct mlog_io io = { NULL, gate_fsync, &g };
	struct mlog *ml = open_log(dir, s, &io);
	struct event_base *base = event_base_new();
	struct done_log dl = { .ml = ml };
	struct done_arg da[4];
	char err[1024], want[512];
	struct mlog_stats st;

	mlog_set_event_base(ml, base);
	for (int i = 0; i < 4; i++)
		da[i] = (struct done_arg){ &dl, i };
	async_range(ml, 0, 5, &da[0]);
	loop_until(base, &dl, 1);
	ck_assert_int_eq(dl.rc[0], 0);
	/* The next round fails; group 2 waits behind it. */
	pthread_mutex_lock(&g.mu);
	g.hold = 1;
	g.fail_call = g.calls + 1;
	pthread_mutex_unlock(&g.mu);
	async_range(ml, 5, 8, &da[1]);
	gate_wait_inside(&g);
	async_range(ml, 8, 12, &da[2]);
	gate_release(&g);
	loop_until(base, &dl, 3);
	snprintf(want, sizeof(want), "%s/%s: fsync failed: %s", dir, SEG1,
	    strerror(EIO));
	ck_assert_int_eq(dl.id[1], 1);
	ck_assert_int_eq(dl.rc[1], -1);
	ck_assert_msg(strstr(dl.err[1], want) != NULL, "%s", dl.err[1]);
	ck_assert_int_eq(dl.id[2], 2);
	ck_assert_int_eq(dl.rc[2], -1);
	ck_assert_msg(strstr(dl.err[2], "read-only after an earlier failure")
	    != NULL && strstr(dl.err[2], want) != NULL, "%s", dl.err[2]);
	mlog_stats(ml, &st);
	ck_assert_int_eq(st.broken, 1);
	ck_assert_uint_eq(st.records, 5);
	/* Broken: no new group, no append. */
	ck_assert_int_eq(mlog_sync_async(ml, on_done, &da[3], err,
	    sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "fsync failed"));
	ck_assert_int_eq(mlog_append(ml, 3, "abc", 3, err, sizeof(err)), -1);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 5);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.torn_bytes_dropped, 0);
	mlog_free(ml);
	event_base_free(base);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/* The blocking mlog_sync() after asynchronous groups: it waits for them
 * and runs their callbacks (in order) before writing its own records;
 * without an event base completions wait for mlog_wait(). */
START_TEST(test_async_then_blocking_sync)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s));
	struct gate g = { .mu = PTHREAD_MUTEX_INITIALIZER,
	    .cv = PTHREAD_COND_INITIALIZER };
	struct mlog_io io = { NULL, gate_fsync, &g };
	struct mlog *ml = open_log(dir, s, &io);
	struct done_log dl = { .ml = ml };
	struct done_arg da[3];
	struct mlog_stats st;

	for (int i = 0; i < 3; i++)
		da[i] = (struct done_arg){ &dl, i };
	/* No event base at all. */
	g.hold = 1;
	async_range(ml, 0, 4, &da[0]);
	gate_wait_inside(&g);
	async_range(ml, 4, 9, &da[1]);
	gate_release(&g);
	ck_assert_int_eq(dl.n, 0);
	append_range(ml, 9, 15);   /* blocking: waits, then writes */
	ck_assert_int_eq(dl.n, 2);
	ck_assert_int_eq(dl.id[0], 0);
	ck_assert_int_eq(dl.id[1], 1);
	ck_assert_uint_eq(dl.seen_at[1].records, 9);
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.records, 15);
	async_range(ml, 15, 16, &da[2]);
	mlog_wait(ml);
	ck_assert_int_eq(dl.n, 3);
	ck_assert_int_eq(dl.rc[2], 0);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 16);
	mlog_free(ml);
	rm_rf(dir);
	free(dir);
	free(s);
}
END_TEST

/* A snapshot written on the writer thread, with groups started after it
 * in flight: they land in the new segment; everything reopens; a failed
 * snapshot leaves the log going on in the old segment. */
START_TEST(test_async_compaction)
{
	char *dir = tmpdir_new();
	struct seen *s = calloc(1, sizeof(*s)), *all = calloc(1, sizeof(*all));
	struct gate g = { .mu = PTHREAD_MUTEX_INITIALIZER,
	    .cv = PTHREAD_COND_INITIALIZER };
	struct mlog_io io = { NULL, gate_fsync, &g };
	struct event_base *base = event_base_new();
	struct mlog *ml;
	struct done_log dl;
	struct done_arg da[6];
	char err[1024];
	struct mlog_stats st;

	ml = open_log(dir, s, NULL);
	append_range(ml, 0, 30);
	mlog_free(ml);
	ml = open_log(dir, all, &io);
	memset(&dl, 0, sizeof(dl));
	dl.ml = ml;
	for (int i = 0; i < 6; i++)
		da[i] = (struct done_arg){ &dl, i };
	mlog_set_event_base(ml, base);
	/* Held in the snapshot's fsync while two groups queue behind. */
	g.hold = 1;
	ck_assert_msg(mlog_compact_async(ml, dump_stream, all, on_done, &da[0],
	    err, sizeof(err)) == 0, "compact_async: %s", err);
	/* A second one while it is out is refused. */
	ck_assert_int_eq(mlog_compact_async(ml, dump_stream, all, on_done,
	    &da[5], err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "in flight"));
	gate_wait_inside(&g);
	async_range(ml, 30, 35, &da[1]);
	async_range(ml, 35, 40, &da[2]);
	gate_release(&g);
	loop_until(base, &dl, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(dl.id[i], i);
		ck_assert_msg(dl.rc[i] == 0, "%s", dl.err[i]);
	}
	ck_assert(!file_exists(dir, SEG1));
	ck_assert(file_exists(dir, SNAP2));
	ck_assert(file_exists(dir, SEG2));
	mlog_stats(ml, &st);
	ck_assert_uint_eq(st.compactions, 1);
	ck_assert_uint_eq(st.records_since_snapshot, 10);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 40);
	for (size_t i = 0; i < 40; i++)
		ck_assert_int_eq(s->snap[i], i < 30);
	mlog_free(ml);

	/* The snapshot's fsync fails: the group behind it still lands (in
	 * segment 2), and the log is whole at the next open. */
	ml = open_log(dir, all, &io);
	memset(&dl, 0, sizeof(dl));
	dl.ml = ml;
	mlog_set_event_base(ml, base);
	pthread_mutex_lock(&g.mu);
	g.fail_call = g.calls + 1;
	pthread_mutex_unlock(&g.mu);
	ck_assert_int_eq(mlog_compact_async(ml, dump_stream, all, on_done,
	    &da[0], err, sizeof(err)), 0);
	async_range(ml, 40, 45, &da[1]);
	loop_until(base, &dl, 2);
	ck_assert_int_eq(dl.rc[0], -1);
	ck_assert_msg(strstr(dl.err[0], "snapshot-00000000000000000003.snap"
	    ".tmp: fsync failed") != NULL, "%s", dl.err[0]);
	ck_assert_int_eq(dl.rc[1], 0);
	mlog_stats(ml, &st);
	ck_assert_int_eq(st.broken, 0);
	mlog_free(ml);
	ml = open_log(dir, s, NULL);
	check_stream(s, 45);
	mlog_free(ml);
	event_base_free(base);
	rm_rf(dir);
	free(dir);
	free(s);
	free(all);
}
END_TEST

static Suite *mlog_suite(void)
{
	Suite *s = suite_create("mlog");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scan_decisions);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_unsynced_records_are_not_written);
	tcase_add_test(tc, test_limits_and_lock);
	tcase_add_test(tc, test_torn_tail_every_byte);
	tcase_add_test(tc, test_corruption_refuses_to_start);
	tcase_add_test(tc, test_compaction_round_trip);
	tcase_add_test(tc, test_compaction_crash_states);
	tcase_add_test(tc, test_enospc_on_write);
	tcase_add_test(tc, test_eio_on_fsync);
	tcase_add_test(tc, test_compaction_failures);
	tcase_add_test(tc, test_segment_sequence_errors);
	tcase_add_test(tc, test_kafka_batch_round_trip);
	tcase_add_test(tc, test_async_group_commit);
	tcase_add_test(tc, test_async_fsync_failure);
	tcase_add_test(tc, test_async_then_blocking_sync);
	tcase_add_test(tc, test_async_compaction);
	suite_add_tcase(s, tc);
	tc = tcase_create("tmpfs");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, NULL, tmpfs_teardown);
	tcase_add_test(tc, test_enospc_real_tmpfs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mlog_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
