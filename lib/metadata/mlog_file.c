/*
 * mlog_file.c: the local file backend of the metadata log (see mlog.h for
 * the file layout and the durability contract).
 *
 * Start-up: lock the directory, drop leftover *.tmp files, replay the
 * newest snapshot, then segments seq, seq+1, ... in order.  Only the newest
 * segment may end in a torn tail; it is truncated (with a warning naming
 * file, offset and bytes dropped).  Anything else that is damaged stops the
 * open with the file and byte offset.
 *
 * Compaction to snapshot seq+1 goes: sync; write snapshot-<seq+1>.snap.tmp,
 * fsync, rename, fsync dir; create mlog-<seq+1>.log with its header, fsync,
 * fsync dir; switch appends to it; unlink the files with lower sequence
 * numbers.  A crash between any two steps leaves either the old set (the
 * .tmp is ignored) or a snapshot that holds everything the older segment
 * held, so the files always open to the last synced state.
 *
 * Asynchronous groups (mlog_sync_async()) and snapshots
 * (mlog_compact_async()) are jobs for one writer thread per log, started
 * at the first of them.  The loop thread hands over a group's framed
 * records (or a snapshot already dumped into memory); the thread takes
 * every job queued so far, writes the consecutive groups at the end of the
 * live segment with one fsync for all of them (group commit), writes and
 * renames a snapshot and starts its segment exactly as above, and posts
 * the finished jobs back through a pipe the loop watches.  The loop then
 * updates the statistics and runs the done callbacks in job order.  While
 * jobs are out the thread owns the segment (fd, seq, offsets); the loop
 * touches them only once every job is back (ops->wait, before any blocking
 * sync or compaction).  Any failure on the thread (write, fsync, truncate)
 * breaks the log: the unsynced bytes are cut off, the jobs of that round
 * and every later one fail with the reason.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "log.h"
#include "massert.h"
#include "mlog.h"

#define MLOG_MAGIC 0x4d524c47u  /* "MRLG" */
#define MLOG_VERSION 1
#define FILE_HDR_LEN 14u        /* magic u32, version u16, seq u64 */
#define WBUF_MIN (256u << 10)

struct mlog_file {
	struct mlog base;
	char *dir;
	int dirfd, lockfd;
	int fd;                 /* live segment, -1 before open */
	uint64_t seq;           /* live segment's sequence number */
	char seg_path[4096];
	uint64_t synced_off;    /* durable end of the live segment */
	uint64_t written_off;   /* end of what has been handed to pwrite */
	int tail_dirty;         /* bytes may lie past synced_off */
	uint8_t *wbuf;
	size_t wlen, wcap;
	int broken;
	char broken_why[512];
	struct mlog_stats st;
	/* The writer thread (see the top of the file). */
	int thread_started, mu_init;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv_job;     /* thread: a job was queued, or stop */
	pthread_cond_t cv_done;    /* loop: jobs were posted back */
	struct fjob *q_head, *q_tail;       /* queued, under mu */
	struct fjob *d_head, *d_tail;       /* posted back, under mu */
	int stop;                           /* under mu */
	int t_broken;                       /* thread only */
	char t_why[512];                    /* thread only */
	/* Loop only. */
	struct fjob *r_head, *r_tail;       /* back, done not yet run */
	uint64_t jobs_out;                  /* queued, not yet back */
	int pipefd[2];
	struct event *ev;
};

enum { FJOB_GROUP, FJOB_SNAPSHOT };

struct fjob {
	struct fjob *next;
	int kind;
	uint8_t *buf;           /* framed records, or the whole snapshot */
	size_t len;
	uint64_t nrec;
	uint64_t seq;           /* snapshot: its sequence number */
	mlog_done_fn done;
	void *arg;
	/* Results, set by the thread. */
	int rc;
	char err[512];
	int fsynced;            /* the last group of an fsync round */
	int broke;              /* failed: the log is broken */
	uint64_t round_records; /* records in that round (on the last) */
	int64_t fsync_us;
	uint64_t end_off;       /* live segment end after this job */
};

/* snprintf through a va_list: messages embed paths, and a message cut
 * short is better than -Wformat-truncation guessing at every call. */
static void fmt_into(char *buf, size_t len, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
static void fmt_into(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- system calls through the injectable hooks ----------------------- */

static ssize_t io_pwrite(struct mlog_file *f, int fd, const void *buf,
    size_t n, off_t off)
{
	const struct mlog_io *io = f->base.opts.io;

	if (io != NULL && io->pwrite != NULL)
		return io->pwrite(io->arg, fd, buf, n, off);
	return pwrite(fd, buf, n, off);
}

static int io_fsync(struct mlog_file *f, int fd)
{
	const struct mlog_io *io = f->base.opts.io;

	if (io != NULL && io->fsync != NULL)
		return io->fsync(io->arg, fd);
	if (f->base.opts.no_fsync)
		return 0;
	return fsync(fd);
}

/* Writes all n bytes at off; -1 with errno on the first failure. */
static int write_all(struct mlog_file *f, int fd, const uint8_t *p, size_t n,
    uint64_t off)
{
	while (n > 0) {
		ssize_t w = io_pwrite(f, fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static void path_of(char *buf, size_t len, const char *dir, const char *name)
{
	fmt_into(buf, len, "%s/%s", dir, name);
}

static void seg_name(char *buf, size_t len, uint64_t seq)
{
	fmt_into(buf, len, "mlog-%020" PRIu64 ".log", seq);
}

static void snap_name(char *buf, size_t len, uint64_t seq)
{
	fmt_into(buf, len, "snapshot-%020" PRIu64 ".snap", seq);
}

/* Parses "<prefix><20 digits><suffix>" exactly; 0 on a match. */
static int parse_seq(const char *name, const char *prefix, const char *suffix,
    uint64_t *seq)
{
	size_t pl = strlen(prefix), sl = strlen(suffix), nl = strlen(name);
	uint64_t v = 0;

	if (nl != pl + 20 + sl || strncmp(name, prefix, pl) != 0 ||
	    strcmp(name + pl + 20, suffix) != 0)
		return -1;
	for (size_t i = pl; i < pl + 20; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	*seq = v;
	return 0;
}

static void file_hdr(uint8_t p[FILE_HDR_LEN], uint64_t seq)
{
	be32_store(p, MLOG_MAGIC);
	be16_store(p + 4, MLOG_VERSION);
	be64_store(p + 6, seq);
}

/* Appends one frame to a memory buffer (the caller made room). */
static size_t frame_into(uint8_t *dst, uint16_t type, const void *p,
    size_t len)
{
	mlog_frame_header(dst, type, p, (uint32_t)len);
	if (len > 0)
		memcpy(dst + MLOG_FRAME_HDR, p, len);
	return MLOG_FRAME_HDR + len;
}

/* ---- the write path -------------------------------------------------- */

static void set_broken(struct mlog_file *f, const char *why)
{
	f->broken = 1;
	f->st.broken = 1;
	fmt_into(f->broken_why, sizeof(f->broken_why), "%s", why);
	log_errorx("metadata log: %s", why);
}

/* Drops everything after the last successful sync, in memory and on disk. */
static void rollback(struct mlog_file *f)
{
	f->wlen = 0;
	f->st.pending = 0;
	/* A failed write may have put part of its bytes in the file even
	 * though written_off did not move: cut whenever one was tried. */
	if (!f->tail_dirty)
		return;
	if (ftruncate(f->fd, (off_t)f->synced_off) != 0) {
		char why[512];
		fmt_into(why, sizeof(why), "%s: cannot truncate unsynced "
		    "records back to offset %" PRIu64 ": %s; refusing further "
		    "writes until restart", f->seg_path, f->synced_off,
		    strerror(errno));
		set_broken(f, why);
		return;
	}
	f->written_off = f->synced_off;
	f->tail_dirty = 0;
}

static int flush_wbuf(struct mlog_file *f, char *err, size_t errlen)
{
	if (f->wlen == 0)
		return 0;
	f->tail_dirty = 1;
	if (write_all(f, f->fd, f->wbuf, f->wlen, f->written_off) != 0) {
		fmt_into(err, errlen, "%s: write of %zu bytes at offset %"
		    PRIu64 " failed: %s", f->seg_path, f->wlen, f->written_off,
		    strerror(errno));
		rollback(f);
		return -1;
	}
	f->written_off += f->wlen;
	f->wlen = 0;
	return 0;
}

static int check_usable(struct mlog_file *f, char *err, size_t errlen)
{
	if (!f->broken)
		return 0;
	fmt_into(err, errlen, "metadata log is read-only after an earlier "
	    "failure: %s", f->broken_why);
	return -1;
}

static int file_append(struct mlog *ml, uint16_t type, const void *p,
    size_t len, char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	size_t need = MLOG_FRAME_HDR + len;

	if (check_usable(f, err, errlen) != 0)
		return -1;
	if (f->wlen + need > f->wcap) {
		/* Grown, not written: appends never touch the file (the
		 * writer thread may own it); the sync writes it all. */
		size_t cap = MAX(f->wcap * 2, f->wlen + need);
		uint8_t *nb = realloc(f->wbuf, cap);
		if (nb == NULL) {
			fmt_into(err, errlen, "out of memory buffering %zu "
			    "bytes of metadata records", f->wlen + need);
			return -1;
		}
		f->wbuf = nb;
		f->wcap = cap;
	}
	f->wlen += frame_into(f->wbuf + f->wlen, type, p, len);
	f->st.pending++;
	return 0;
}

static int file_sync(struct mlog *ml, char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	struct timespec t0, t1;
	uint64_t pending = f->st.pending;

	if (check_usable(f, err, errlen) != 0)
		return -1;
	if (pending == 0 && f->wlen == 0 && f->written_off == f->synced_off)
		return 0;
	if (flush_wbuf(f, err, errlen) != 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (io_fsync(f, f->fd) != 0) {
		char why[512];
		int e = errno;
		fmt_into(err, errlen, "%s: fsync failed: %s", f->seg_path,
		    strerror(e));
		/* The kernel may have dropped the dirty pages: nothing written
		 * since the last good sync can be trusted either way.  Cut it
		 * off and stop writing; a restart re-reads the disk. */
		rollback(f);
		fmt_into(why, sizeof(why), "%s: fsync failed: %s; refusing "
		    "further writes until restart", f->seg_path, strerror(e));
		set_broken(f, why);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	f->st.last_fsync_us = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000;
	f->st.syncs++;
	f->st.bytes_since_snapshot += f->written_off - f->synced_off;
	f->synced_off = f->written_off;
	f->tail_dirty = 0;
	f->st.bytes = f->synced_off;
	f->st.records += pending;
	f->st.records_since_snapshot += pending;
	f->st.pending = 0;
	return 0;
}

static void file_discard(struct mlog *ml)
{
	struct mlog_file *f = (struct mlog_file *)ml;

	if (f->jobs_out > 0) {
		/* The thread owns the file: nothing of ours is in it yet. */
		f->wlen = 0;
		f->st.pending = 0;
		return;
	}
	if (!f->broken)
		rollback(f);
}

/* ---- reading --------------------------------------------------------- */

struct mapped {
	const uint8_t *p;
	size_t len;
	void *map;
};

static int map_file(int dirfd, const char *name, const char *path,
    struct mapped *m, char *err, size_t errlen)
{
	struct stat sb;
	int fd;

	memset(m, 0, sizeof(*m));
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		fmt_into(err, errlen, "%s: cannot open: %s", path,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	m->len = (size_t)sb.st_size;
	if (m->len > 0) {
		m->map = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m->map == MAP_FAILED) {
			fmt_into(err, errlen, "%s: cannot map %zu bytes: %s",
			    path, m->len, strerror(errno));
			m->map = NULL;
			close(fd);
			return -1;
		}
		m->p = m->map;
	}
	close(fd);
	return 0;
}

static void unmap_file(struct mapped *m)
{
	if (m->map != NULL)
		munmap(m->map, m->len);
	memset(m, 0, sizeof(*m));
}

/* What the frame reader calls while replaying one file. */
struct replay {
	struct mlog_file *f;
	mlog_apply_fn apply;
	void *arg;
	const char *path;
	int snapshot;
	uint64_t seq;          /* expected in the file header */
	uint64_t frames;       /* frames seen, header included */
	uint64_t body;         /* records handed to apply */
	int ended;             /* snapshot: MLOG_T_SNAPEND seen */
	char err[512];
};

static int replay_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	struct replay *rp = arg;
	uint16_t want = rp->snapshot ? MLOG_T_SNAPSHOT : MLOG_T_SEGMENT;

	if (rp->frames++ == 0) {
		if (type != want || len != FILE_HDR_LEN ||
		    be32_load(p) != MLOG_MAGIC) {
			fmt_into(rp->err, sizeof(rp->err), "first record is "
			    "not a %s header (type 0x%04x, %u bytes)",
			    rp->snapshot ? "snapshot" : "segment", type, len);
			return -1;
		}
		if (be16_load(p + 4) != MLOG_VERSION) {
			fmt_into(rp->err, sizeof(rp->err), "format version "
			    "%u is not supported (this build reads %u)",
			    be16_load(p + 4), MLOG_VERSION);
			return -1;
		}
		if (be64_load(p + 6) != rp->seq) {
			fmt_into(rp->err, sizeof(rp->err), "header names "
			    "sequence %" PRIu64 ", the file name %" PRIu64,
			    be64_load(p + 6), rp->seq);
			return -1;
		}
		return 0;
	}
	if (rp->ended) {
		fmt_into(rp->err, sizeof(rp->err), "record after the snapshot "
		    "end marker");
		return -1;
	}
	if (rp->snapshot && type == MLOG_T_SNAPEND) {
		if (len != 8 || be64_load(p) != rp->body) {
			fmt_into(rp->err, sizeof(rp->err), "snapshot end marker "
			    "counts %" PRIu64 " records, the file holds %" PRIu64,
			    len == 8 ? be64_load(p) : 0, rp->body);
			return -1;
		}
		rp->ended = 1;
		return 0;
	}
	if (type >= MLOG_TYPE_RESERVED) {
		fmt_into(rp->err, sizeof(rp->err), "unexpected framing record "
		    "of type 0x%04x", type);
		return -1;
	}
	struct mlog_rec rec = {
		.type = type, .len = len, .p = p, .off = off,
		.file = rp->path, .in_snapshot = rp->snapshot,
	};
	if (rp->apply != NULL &&
	    rp->apply(rp->arg, &rec, rp->err, sizeof(rp->err)) != 0)
		return -1;
	rp->body++;
	return 0;
}

static int replay_snapshot(struct mlog_file *f, uint64_t seq,
    mlog_apply_fn apply, void *arg, char *err, size_t errlen)
{
	char name[64], path[4096];
	struct mapped m;
	struct mlog_scan_result res;
	struct replay rp = { .f = f, .apply = apply, .arg = arg,
	    .path = path, .snapshot = 1, .seq = seq };
	int rc = -1;

	snap_name(name, sizeof(name), seq);
	path_of(path, sizeof(path), f->dir, name);
	if (map_file(f->dirfd, name, path, &m, err, errlen) != 0)
		return -1;
	mlog_scan(m.p, m.len, f->base.opts.max_record, replay_frame, &rp, &res);
	if (res.end == MLOG_SCAN_STOPPED) {
		fmt_into(err, errlen, "%s: record at byte offset %" PRIu64
		    ": %s", path, res.bad_off, rp.err);
		goto out;
	}
	/* A snapshot is renamed into place only after it was fsynced, so
	 * even a torn-looking end is damage, not an interrupted write. */
	if (res.end != MLOG_SCAN_CLEAN) {
		fmt_into(err, errlen, "%s: snapshot damaged at byte offset %"
		    PRIu64 ": %s; refusing to start", path, res.bad_off,
		    res.why);
		goto out;
	}
	if (!rp.ended) {
		fmt_into(err, errlen, "%s: snapshot has no end marker "
		    "(%" PRIu64 " bytes); refusing to start", path,
		    (uint64_t)m.len);
		goto out;
	}
	struct stat sb;
	if (fstatat(f->dirfd, name, &sb, 0) == 0)
		f->st.snapshot_wall_ms = (int64_t)sb.st_mtim.tv_sec * 1000 +
		    sb.st_mtim.tv_nsec / 1000000;
	f->st.records += rp.body;
	rc = 0;
out:
	unmap_file(&m);
	return rc;
}

/* Replays one segment.  *good_end is where appends may continue (the end
 * of the last intact frame, 0 if not even the header is intact). */
static int replay_segment(struct mlog_file *f, uint64_t seq, int last,
    mlog_apply_fn apply, void *arg, uint64_t *good_end, char *err,
    size_t errlen)
{
	char name[64], path[4096];
	struct mapped m;
	struct mlog_scan_result res;
	struct replay rp = { .f = f, .apply = apply, .arg = arg,
	    .path = path, .snapshot = 0, .seq = seq };
	int rc = -1;

	seg_name(name, sizeof(name), seq);
	path_of(path, sizeof(path), f->dir, name);
	if (map_file(f->dirfd, name, path, &m, err, errlen) != 0)
		return -1;
	mlog_scan(m.p, m.len, f->base.opts.max_record, replay_frame, &rp, &res);
	switch (res.end) {
	case MLOG_SCAN_CLEAN:
		break;
	case MLOG_SCAN_STOPPED:
		fmt_into(err, errlen, "%s: record at byte offset %" PRIu64
		    ": %s", path, res.bad_off, rp.err);
		goto out;
	case MLOG_SCAN_CORRUPT:
		fmt_into(err, errlen, "%s: corrupt record at byte offset %"
		    PRIu64 ": %s; refusing to start (restore the file or move "
		    "it away)", path, res.bad_off, res.why);
		goto out;
	case MLOG_SCAN_TORN:
		if (!last) {
			fmt_into(err, errlen, "%s: damaged record at byte "
			    "offset %" PRIu64 " in a segment that is not the "
			    "newest: %s; refusing to start", path, res.bad_off,
			    res.why);
			goto out;
		}
		log_warnx("%s: torn tail at byte offset %" PRIu64 ": %s; "
		    "dropping %" PRIu64 " bytes", path, res.good_end, res.why,
		    (uint64_t)m.len - res.good_end);
		f->st.torn_bytes_dropped += (uint64_t)m.len - res.good_end;
		break;
	}
	*good_end = res.good_end;
	f->st.records += rp.body;
	f->st.records_since_snapshot += rp.body;
	f->st.bytes_since_snapshot += res.good_end;
	rc = 0;
out:
	unmap_file(&m);
	return rc;
}

/* ---- directory handling ---------------------------------------------- */

struct seqlist {
	uint64_t *v;
	size_t n, cap;
};

static int seqlist_add(struct seqlist *l, uint64_t s)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = s;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int list_dir(struct mlog_file *f, struct seqlist *snaps,
    struct seqlist *segs, char *err, size_t errlen)
{
	int fd = dup(f->dirfd);
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		fmt_into(err, errlen, "%s: cannot list: %s", f->dir,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		uint64_t s;
		size_t nl = strlen(de->d_name);
		if (nl > 4 && strcmp(de->d_name + nl - 4, ".tmp") == 0 &&
		    strncmp(de->d_name, "snapshot-", 9) == 0) {
			/* An unfinished snapshot from an interrupted
			 * compaction: never renamed, so never trusted. */
			log_warnx("%s/%s: removing an unfinished snapshot",
			    f->dir, de->d_name);
			if (unlinkat(f->dirfd, de->d_name, 0) != 0)
				log_warn("%s/%s: cannot remove", f->dir,
				    de->d_name);
			continue;
		}
		if (parse_seq(de->d_name, "snapshot-", ".snap", &s) == 0)
			rc |= seqlist_add(snaps, s);
		else if (parse_seq(de->d_name, "mlog-", ".log", &s) == 0)
			rc |= seqlist_add(segs, s);
	}
	closedir(d);
	if (rc != 0) {
		fmt_into(err, errlen, "%s: out of memory listing files", f->dir);
		return -1;
	}
	if (snaps->n > 1)
		qsort(snaps->v, snaps->n, sizeof(uint64_t), cmp_u64);
	if (segs->n > 1)
		qsort(segs->v, segs->n, sizeof(uint64_t), cmp_u64);
	return 0;
}

static int fsync_dir(struct mlog_file *f, char *err, size_t errlen)
{
	if (io_fsync(f, f->dirfd) != 0) {
		fmt_into(err, errlen, "%s: fsync of the directory failed: %s",
		    f->dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Creates (or empties) segment seq, writes and fsyncs its header and the
 * directory.  Returns the fd, or -1. */
static int create_segment(struct mlog_file *f, uint64_t seq, char *err,
    size_t errlen)
{
	char name[64], path[4096];
	uint8_t hdr[FILE_HDR_LEN], frame[MLOG_FRAME_HDR + FILE_HDR_LEN];
	int fd;

	seg_name(name, sizeof(name), seq);
	path_of(path, sizeof(path), f->dir, name);
	fd = openat(f->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		fmt_into(err, errlen, "%s: cannot create: %s", path,
		    strerror(errno));
		return -1;
	}
	file_hdr(hdr, seq);
	frame_into(frame, MLOG_T_SEGMENT, hdr, sizeof(hdr));
	if (write_all(f, fd, frame, sizeof(frame), 0) != 0) {
		fmt_into(err, errlen, "%s: write of the segment header "
		    "failed: %s", path, strerror(errno));
		goto fail;
	}
	if (io_fsync(f, fd) != 0) {
		fmt_into(err, errlen, "%s: fsync failed: %s", path,
		    strerror(errno));
		goto fail;
	}
	if (fsync_dir(f, err, errlen) != 0)
		goto fail;
	return fd;
fail:
	close(fd);
	unlinkat(f->dirfd, name, 0);
	return -1;
}

/* Removes snapshots and segments older than seq (best effort: they are
 * already superseded, a leftover is removed at the next open). */
static void remove_older(struct mlog_file *f, const struct seqlist *snaps,
    const struct seqlist *segs, uint64_t seq)
{
	char name[64], err[256];
	int removed = 0;

	for (size_t i = 0; i < segs->n; i++) {
		if (segs->v[i] >= seq)
			continue;
		seg_name(name, sizeof(name), segs->v[i]);
		if (unlinkat(f->dirfd, name, 0) != 0 && errno != ENOENT)
			log_warn("%s/%s: cannot remove superseded segment",
			    f->dir, name);
		removed = 1;
	}
	for (size_t i = 0; i < snaps->n; i++) {
		if (snaps->v[i] >= seq)
			continue;
		snap_name(name, sizeof(name), snaps->v[i]);
		if (unlinkat(f->dirfd, name, 0) != 0 && errno != ENOENT)
			log_warn("%s/%s: cannot remove superseded snapshot",
			    f->dir, name);
		removed = 1;
	}
	if (removed && fsync_dir(f, err, sizeof(err)) != 0)
		log_warnx("%s", err);
}

static int file_open(struct mlog *ml, mlog_apply_fn apply, void *arg,
    char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	struct seqlist snaps = { 0 }, segs = { 0 };
	uint64_t snap = 0, first, good_end = 0;
	char name[64];
	int rc = -1;
	size_t i;

	if (list_dir(f, &snaps, &segs, err, errlen) != 0)
		goto out;
	if (snaps.n > 0) {
		snap = snaps.v[snaps.n - 1];
		if (replay_snapshot(f, snap, apply, arg, err, errlen) != 0)
			goto out;
	}
	/* Segments older than the snapshot are already inside it. */
	for (i = 0; i < segs.n && segs.v[i] < snap; i++)
		;
	first = snap > 0 ? snap : 1;
	if (i < segs.n && segs.v[i] != first) {
		seg_name(name, sizeof(name), first);
		fmt_into(err, errlen, "%s/%s is missing (found segment %" PRIu64
		    " after %s); refusing to start", f->dir, name, segs.v[i],
		    snap > 0 ? "the snapshot" : "no snapshot");
		goto out;
	}
	for (size_t j = i; j < segs.n; j++) {
		if (j > i && segs.v[j] != segs.v[j - 1] + 1) {
			seg_name(name, sizeof(name), segs.v[j - 1] + 1);
			fmt_into(err, errlen, "%s/%s is missing (found segment "
			    "%" PRIu64 "); refusing to start", f->dir, name,
			    segs.v[j]);
			goto out;
		}
		if (replay_segment(f, segs.v[j], j + 1 == segs.n, apply, arg,
		    &good_end, err, errlen) != 0)
			goto out;
	}
	if (i == segs.n || good_end == 0) {
		/* No segment after the snapshot yet (a compaction stopped
		 * between its steps), or the newest one never got an intact
		 * header: (re)create it empty. */
		f->seq = i == segs.n ? first : segs.v[segs.n - 1];
		f->fd = create_segment(f, f->seq, err, errlen);
		if (f->fd < 0)
			goto out;
		good_end = MLOG_FRAME_HDR + FILE_HDR_LEN;
		f->st.bytes_since_snapshot += good_end;
	} else {
		f->seq = segs.v[segs.n - 1];
		seg_name(name, sizeof(name), f->seq);
		f->fd = openat(f->dirfd, name, O_WRONLY | O_CLOEXEC);
		if (f->fd < 0) {
			fmt_into(err, errlen, "%s/%s: cannot open for "
			    "writing: %s", f->dir, name, strerror(errno));
			goto out;
		}
		struct stat sb;
		if (fstat(f->fd, &sb) == 0 && (uint64_t)sb.st_size != good_end) {
			if (ftruncate(f->fd, (off_t)good_end) != 0 ||
			    io_fsync(f, f->fd) != 0) {
				fmt_into(err, errlen, "%s/%s: cannot truncate "
				    "the torn tail at offset %" PRIu64 ": %s",
				    f->dir, name, good_end, strerror(errno));
				goto out;
			}
		}
	}
	seg_name(name, sizeof(name), f->seq);
	path_of(f->seg_path, sizeof(f->seg_path), f->dir, name);
	f->synced_off = f->written_off = good_end;
	f->st.bytes = good_end;
	remove_older(f, &snaps, &segs, snap);
	rc = 0;
out:
	free(snaps.v);
	free(segs.v);
	return rc;
}

/* ---- compaction ------------------------------------------------------ */

struct snap_sink {
	struct mlog_sink base;
	struct mlog_file *f;
	int fd;
	const char *path;
	uint64_t off;
	char err[512];
};

static int snap_flush(struct snap_sink *s)
{
	struct mlog_file *f = s->f;

	if (f->wlen == 0)
		return 0;
	if (write_all(f, s->fd, f->wbuf, f->wlen, s->off) != 0) {
		fmt_into(s->err, sizeof(s->err), "%s: write of %zu bytes at "
		    "offset %" PRIu64 " failed: %s", s->path, f->wlen, s->off,
		    strerror(errno));
		return -1;
	}
	s->off += f->wlen;
	f->wlen = 0;
	return 0;
}

/* Frames go through the (empty, since we synced) append buffer. */
static int snap_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	struct snap_sink *s = (struct snap_sink *)sink;
	struct mlog_file *f = s->f;

	if (len > f->base.opts.max_record) {
		fmt_into(s->err, sizeof(s->err), "snapshot record of type "
		    "0x%04x is %zu bytes, over the %u-byte maximum", type, len,
		    f->base.opts.max_record);
		return -1;
	}
	if (f->wlen + MLOG_FRAME_HDR + len > f->wcap && snap_flush(s) != 0)
		return -1;
	f->wlen += frame_into(f->wbuf + f->wlen, type, p, len);
	return 0;
}

static int write_snapshot(struct mlog_file *f, uint64_t seq,
    mlog_dump_fn dump, void *arg, char *err, size_t errlen)
{
	char tmp[80], path[4096];
	uint8_t hdr[FILE_HDR_LEN], end[8];
	struct snap_sink s = { .base = { .put = snap_put }, .f = f };
	int rc = -1;

	snap_name(tmp, sizeof(tmp), seq);
	strcat(tmp, ".tmp");
	path_of(path, sizeof(path), f->dir, tmp);
	s.path = path;
	s.fd = openat(f->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600);
	if (s.fd < 0) {
		fmt_into(err, errlen, "%s: cannot create: %s", path,
		    strerror(errno));
		return -1;
	}
	file_hdr(hdr, seq);
	f->wlen = 0;
	f->wlen += frame_into(f->wbuf, MLOG_T_SNAPSHOT, hdr, sizeof(hdr));
	if (dump(arg, &s.base) != 0 || s.base.failed) {
		fmt_into(err, errlen, "%s: %s", path, s.err[0] ? s.err :
		    "the state could not be written out");
		goto out;
	}
	be64_store(end, s.base.records);
	if (snap_put(&s.base, MLOG_T_SNAPEND, end, sizeof(end)) != 0 ||
	    snap_flush(&s) != 0) {
		fmt_into(err, errlen, "%s", s.err);
		goto out;
	}
	if (io_fsync(f, s.fd) != 0) {
		fmt_into(err, errlen, "%s: fsync failed: %s", path,
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	f->wlen = 0;
	close(s.fd);
	if (rc != 0)
		unlinkat(f->dirfd, tmp, 0);
	return rc;
}

static int file_compact(struct mlog *ml, mlog_dump_fn dump, void *arg,
    char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	uint64_t seq = f->seq + 1;
	char tmp[80], name[64], path[4096];
	struct seqlist snaps = { 0 }, segs = { 0 };
	int fd;

	if (check_usable(f, err, errlen) != 0)
		return -1;
	if (file_sync(ml, err, errlen) != 0)
		return -1;
	/* Nothing since the last snapshot (a second clean shutdown): the
	 * files already are the compact form. */
	if (f->st.records_since_snapshot == 0 && f->st.snapshot_wall_ms >= 0)
		return 0;
	if (write_snapshot(f, seq, dump, arg, err, errlen) != 0)
		return -1;
	snap_name(name, sizeof(name), seq);
	fmt_into(tmp, sizeof(tmp), "%s.tmp", name);
	path_of(path, sizeof(path), f->dir, name);
	if (renameat(f->dirfd, tmp, f->dirfd, name) != 0) {
		fmt_into(err, errlen, "%s: cannot rename the new snapshot into "
		    "place: %s", path, strerror(errno));
		unlinkat(f->dirfd, tmp, 0);
		return -1;
	}
	if (fsync_dir(f, err, errlen) != 0)
		goto undo;
	fd = create_segment(f, seq, err, errlen);
	if (fd < 0)
		goto undo;
	close(f->fd);
	f->fd = fd;
	f->seq = seq;
	seg_name(name, sizeof(name), seq);
	path_of(f->seg_path, sizeof(f->seg_path), f->dir, name);
	f->synced_off = f->written_off = MLOG_FRAME_HDR + FILE_HDR_LEN;
	f->st.bytes = f->synced_off;
	f->st.records_since_snapshot = 0;
	f->st.bytes_since_snapshot = f->synced_off;
	f->st.snapshot_wall_ms = clock_wall_ms();
	f->st.compactions++;
	if (list_dir(f, &snaps, &segs, err, errlen) == 0)
		remove_older(f, &snaps, &segs, seq);
	else
		log_warnx("%s", err);
	free(snaps.v);
	free(segs.v);
	return 0;
undo:
	/* The new snapshot is in place but appends still go to the old
	 * segment, which it would hide at the next open: take it back. */
	if (unlinkat(f->dirfd, name, 0) != 0 || fsync_dir(f, path,
	    sizeof(path)) != 0) {
		char why[512];
		fmt_into(why, sizeof(why), "%s/%s: cannot withdraw the snapshot "
		    "of a failed compaction; refusing further writes until "
		    "restart", f->dir, name);
		set_broken(f, why);
	}
	return -1;
}

/* ---- the writer thread ----------------------------------------------- */

/* Thread: cuts the unsynced bytes off and breaks the log. */
static void t_break(struct mlog_file *f, const char *why)
{
	char cut[256] = "";

	if (f->tail_dirty && ftruncate(f->fd, (off_t)f->synced_off) != 0)
		fmt_into(cut, sizeof(cut), " (and the unsynced bytes could "
		    "not be cut back to offset %" PRIu64 ": %s)", f->synced_off,
		    strerror(errno));
	else
		f->tail_dirty = 0;
	f->written_off = f->synced_off;
	f->t_broken = 1;
	fmt_into(f->t_why, sizeof(f->t_why), "%s%s; refusing further writes "
	    "until restart", why, cut);
}

static void t_fail(struct mlog_file *f, struct fjob *j)
{
	j->rc = -1;
	j->broke = 1;
	fmt_into(j->err, sizeof(j->err), "metadata log is read-only after an "
	    "earlier failure: %s", f->t_why);
}

/* Thread: writes the groups first..last (consecutive, all FJOB_GROUP) at
 * the end of the live segment and fsyncs once. */
static void t_groups(struct mlog_file *f, struct fjob *first,
    struct fjob *last)
{
	struct timespec t0, t1;
	uint64_t nrec = 0;
	char why[512];
	struct fjob *j;
	int64_t us;

	if (f->t_broken) {
		for (j = first; ; j = j->next) {
			t_fail(f, j);
			if (j == last)
				break;
		}
		return;
	}
	for (j = first; ; j = j->next) {
		if (j->len > 0) {
			f->tail_dirty = 1;
			if (write_all(f, f->fd, j->buf, j->len,
			    f->written_off) != 0) {
				fmt_into(why, sizeof(why), "%s: write of %zu "
				    "bytes at offset %" PRIu64 " failed: %s",
				    f->seg_path, j->len, f->written_off,
				    strerror(errno));
				goto fail;
			}
			f->written_off += j->len;
		}
		j->end_off = f->written_off;
		nrec += j->nrec;
		if (j == last)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (f->written_off != f->synced_off && io_fsync(f, f->fd) != 0) {
		fmt_into(why, sizeof(why), "%s: fsync failed: %s", f->seg_path,
		    strerror(errno));
		goto fail;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	us = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000;
	f->synced_off = f->written_off;
	f->tail_dirty = 0;
	for (j = first; ; j = j->next) {
		j->rc = 0;
		if (j == last)
			break;
	}
	last->fsynced = 1;
	last->round_records = nrec;
	last->fsync_us = us;
	return;
fail:
	t_break(f, why);
	for (j = first; ; j = j->next) {
		j->rc = -1;
		j->broke = 1;
		fmt_into(j->err, sizeof(j->err), "%s", f->t_why);
		if (j == last)
			break;
	}
}

/* Thread: the steps of file_compact() after the dump, for a snapshot
 * already framed in memory. */
static void t_snapshot(struct mlog_file *f, struct fjob *j)
{
	char tmp[80], name[64], path[4096];
	struct seqlist snaps = { 0 }, segs = { 0 };
	int fd;

	if (f->t_broken) {
		t_fail(f, j);
		return;
	}
	j->rc = -1;
	snap_name(name, sizeof(name), j->seq);
	fmt_into(tmp, sizeof(tmp), "%s.tmp", name);
	path_of(path, sizeof(path), f->dir, tmp);
	fd = openat(f->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		fmt_into(j->err, sizeof(j->err), "%s: cannot create: %s", path,
		    strerror(errno));
		return;
	}
	if (write_all(f, fd, j->buf, j->len, 0) != 0) {
		fmt_into(j->err, sizeof(j->err), "%s: write of %zu bytes "
		    "failed: %s", path, j->len, strerror(errno));
		goto drop_tmp;
	}
	if (io_fsync(f, fd) != 0) {
		fmt_into(j->err, sizeof(j->err), "%s: fsync failed: %s", path,
		    strerror(errno));
		goto drop_tmp;
	}
	close(fd);
	fd = -1;
	path_of(path, sizeof(path), f->dir, name);
	if (renameat(f->dirfd, tmp, f->dirfd, name) != 0) {
		fmt_into(j->err, sizeof(j->err), "%s: cannot rename the new "
		    "snapshot into place: %s", path, strerror(errno));
		goto drop_tmp;
	}
	if (fsync_dir(f, j->err, sizeof(j->err)) != 0)
		goto undo;
	fd = create_segment(f, j->seq, j->err, sizeof(j->err));
	if (fd < 0)
		goto undo;
	close(f->fd);
	f->fd = fd;
	f->seq = j->seq;
	seg_name(name, sizeof(name), j->seq);
	path_of(f->seg_path, sizeof(f->seg_path), f->dir, name);
	f->synced_off = f->written_off = MLOG_FRAME_HDR + FILE_HDR_LEN;
	j->end_off = f->synced_off;
	if (list_dir(f, &snaps, &segs, path, sizeof(path)) == 0)
		remove_older(f, &snaps, &segs, j->seq);
	free(snaps.v);
	free(segs.v);
	j->rc = 0;
	return;
drop_tmp:
	if (fd >= 0)
		close(fd);
	unlinkat(f->dirfd, tmp, 0);
	return;
undo:
	/* As in file_compact(): the old segment goes on, so the snapshot
	 * that would hide it must go. */
	if (unlinkat(f->dirfd, name, 0) != 0 || fsync_dir(f, path,
	    sizeof(path)) != 0) {
		char why[512];
		fmt_into(why, sizeof(why), "%s/%s: cannot withdraw the snapshot "
		    "of a failed compaction", f->dir, name);
		t_break(f, why);
		j->broke = 1;
		fmt_into(j->err, sizeof(j->err), "%s", f->t_why);
	}
}

static void *writer_main(void *arg)
{
	struct mlog_file *f = arg;

	for (;;) {
		struct fjob *batch, *j, *run;
		char one = 1;

		pthread_mutex_lock(&f->mu);
		while (f->q_head == NULL && !f->stop)
			pthread_cond_wait(&f->cv_job, &f->mu);
		batch = f->q_head;
		f->q_head = f->q_tail = NULL;
		pthread_mutex_unlock(&f->mu);
		if (batch == NULL)
			break;   /* stop, and nothing left */
		/* Runs of consecutive groups share one fsync. */
		for (j = batch; j != NULL; ) {
			if (j->kind == FJOB_SNAPSHOT) {
				t_snapshot(f, j);
				j->end_off = f->synced_off;
				j = j->next;
				continue;
			}
			run = j;
			while (j->next != NULL && j->next->kind == FJOB_GROUP)
				j = j->next;
			t_groups(f, run, j);
			j = j->next;
		}
		pthread_mutex_lock(&f->mu);
		for (j = batch; j->next != NULL; j = j->next)
			;
		if (f->d_tail != NULL)
			f->d_tail->next = batch;
		else
			f->d_head = batch;
		f->d_tail = j;
		pthread_cond_broadcast(&f->cv_done);
		pthread_mutex_unlock(&f->mu);
		if (f->pipefd[1] >= 0 && write(f->pipefd[1], &one, 1) < 0) {
			/* full pipe: a wake-up is already pending */
		}
	}
	return NULL;
}

/* Loop: moves the jobs the thread posted back to the ready list. */
static void collect_done(struct mlog_file *f)
{
	struct fjob *h, *t, *j;

	pthread_mutex_lock(&f->mu);
	h = f->d_head;
	t = f->d_tail;
	f->d_head = f->d_tail = NULL;
	pthread_mutex_unlock(&f->mu);
	if (h == NULL)
		return;
	for (j = h; j != NULL; j = j->next) {
		MR_ASSERT(f->jobs_out > 0);
		f->jobs_out--;
	}
	if (f->r_tail != NULL)
		f->r_tail->next = h;
	else
		f->r_head = h;
	f->r_tail = t;
}

/* Loop: accounts for one finished job and runs its done callback. */
static void finish_job(struct mlog_file *f, struct fjob *j)
{
	if (j->rc == 0 && j->kind == FJOB_GROUP) {
		/* Jobs come back in the order they were queued: a group's
		 * end in the live segment is past the one before it. */
		MR_ASSERT_MSG(j->end_off >= f->st.bytes, "%" PRIu64 " < %" PRIu64,
		    j->end_off, f->st.bytes);
		f->st.groups++;
		f->st.records += j->nrec;
		f->st.records_since_snapshot += j->nrec;
		f->st.bytes_since_snapshot += j->len;
		f->st.bytes = j->end_off;
		if (j->fsynced) {
			f->st.syncs++;
			f->st.last_fsync_us = j->fsync_us;
			f->st.last_group_records = j->round_records;
			if (j->round_records > f->st.max_group_records)
				f->st.max_group_records = j->round_records;
		}
	} else if (j->rc == 0) {
		f->st.bytes = j->end_off;
		f->st.snapshot_wall_ms = clock_wall_ms();
		f->st.compactions++;
	} else if (j->broke) {
		if (!f->broken)
			set_broken(f, j->err);
	} else {
		log_errorx("metadata log compaction failed: %s", j->err);
	}
	mlog_group_done(&f->base, j->done, j->arg, j->rc, 0, j->err);
}

/* Loop: runs the ready jobs' callbacks in order, popping one at a time so
 * that a callback which waits (mlog_sync()) keeps the order. */
static void run_ready(struct mlog_file *f)
{
	while (f->r_head != NULL) {
		struct fjob *j = f->r_head;
		f->r_head = j->next;
		if (f->r_head == NULL)
			f->r_tail = NULL;
		j->next = NULL;
		finish_job(f, j);
		free(j->buf);
		free(j);
	}
}

static void on_writer(evutil_socket_t fd, short what, void *arg)
{
	struct mlog_file *f = arg;
	char drain[64];

	(void)what;
	while (read(fd, drain, sizeof(drain)) > 0)
		;
	collect_done(f);
	run_ready(f);
}

static int start_writer(struct mlog_file *f, char *err, size_t errlen)
{
	if (f->ev == NULL && f->base.base != NULL) {
		if (f->pipefd[0] < 0 &&
		    pipe2(f->pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
			fmt_into(err, errlen, "metadata log: cannot create the "
			    "writer's pipe: %s", strerror(errno));
			f->pipefd[0] = f->pipefd[1] = -1;
			return -1;
		}
		f->ev = event_new(f->base.base, f->pipefd[0],
		    EV_READ | EV_PERSIST, on_writer, f);
		if (f->ev == NULL || event_add(f->ev, NULL) != 0) {
			fmt_into(err, errlen, "metadata log: cannot watch the "
			    "writer's pipe");
			return -1;
		}
	}
	if (f->thread_started)
		return 0;
	int e = pthread_create(&f->thread, NULL, writer_main, f);
	if (e != 0) {
		fmt_into(err, errlen, "metadata log: cannot start the writer "
		    "thread: %s", strerror(e));
		return -1;
	}
	f->thread_started = 1;
	return 0;
}

static void queue_job(struct mlog_file *f, struct fjob *j)
{
	pthread_mutex_lock(&f->mu);
	if (f->q_tail != NULL)
		f->q_tail->next = j;
	else
		f->q_head = j;
	f->q_tail = j;
	f->jobs_out++;
	pthread_cond_signal(&f->cv_job);
	pthread_mutex_unlock(&f->mu);
}

static int file_sync_async(struct mlog *ml, mlog_done_fn done, void *arg,
    char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	struct fjob *j;

	if (check_usable(f, err, errlen) != 0)
		return -1;
	if (start_writer(f, err, errlen) != 0)
		return -1;
	j = calloc(1, sizeof(*j));
	if (j == NULL || (f->wlen > 0 && (j->buf = malloc(f->wlen)) == NULL)) {
		free(j);
		fmt_into(err, errlen, "out of memory for a metadata log group");
		return -1;
	}
	j->kind = FJOB_GROUP;
	if (f->wlen > 0)
		memcpy(j->buf, f->wbuf, f->wlen);
	j->len = f->wlen;
	j->nrec = f->st.pending;
	j->done = done;
	j->arg = arg;
	f->wlen = 0;
	f->st.pending = 0;
	queue_job(f, j);
	return 0;
}

/* The memory sink of an asynchronous compaction. */
struct mem_sink {
	struct mlog_sink base;
	uint32_t max_record;
	uint8_t *buf;
	size_t len, cap;
	char err[256];
};

static int mem_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	struct mem_sink *s = (struct mem_sink *)sink;
	size_t need = MLOG_FRAME_HDR + len;

	if (len > s->max_record) {
		fmt_into(s->err, sizeof(s->err), "snapshot record of type "
		    "0x%04x is %zu bytes, over the %u-byte maximum", type, len,
		    s->max_record);
		return -1;
	}
	if (s->len + need > s->cap) {
		size_t cap = MAX(s->cap * 2, s->len + need);
		uint8_t *nb = realloc(s->buf, cap);
		if (nb == NULL) {
			fmt_into(s->err, sizeof(s->err), "out of memory for "
			    "a snapshot of %zu bytes", s->len + need);
			return -1;
		}
		s->buf = nb;
		s->cap = cap;
	}
	s->len += frame_into(s->buf + s->len, type, p, len);
	return 0;
}

static int file_compact_async(struct mlog *ml, mlog_dump_fn dump, void *arg,
    mlog_done_fn done, void *done_arg, char *err, size_t errlen)
{
	struct mlog_file *f = (struct mlog_file *)ml;
	struct mem_sink s = { .base = { .put = mem_put } };
	uint8_t hdr[FILE_HDR_LEN], end[8];
	struct fjob *j;

	if (check_usable(f, err, errlen) != 0)
		return -1;
	if (ml->groups_in_flight > 0) {
		fmt_into(err, errlen, "cannot start a snapshot with %" PRIu64
		    " metadata log groups in flight", ml->groups_in_flight);
		return -1;
	}
	if (start_writer(f, err, errlen) != 0)
		return -1;
	s.max_record = f->base.opts.max_record;
	file_hdr(hdr, f->seq + 1);
	if (mem_put(&s.base, MLOG_T_SNAPSHOT, hdr, sizeof(hdr)) != 0)
		goto fail;
	if (dump(arg, &s.base) != 0 || s.base.failed)
		goto fail;
	be64_store(end, s.base.records);
	if (mem_put(&s.base, MLOG_T_SNAPEND, end, sizeof(end)) != 0)
		goto fail;
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		fmt_into(s.err, sizeof(s.err), "out of memory");
		goto fail;
	}
	j->kind = FJOB_SNAPSHOT;
	j->buf = s.buf;
	j->len = s.len;
	j->seq = f->seq + 1;
	j->done = done;
	j->arg = done_arg;
	/* The threshold is not reached again meanwhile; groups started
	 * from now on go after the snapshot (into its new segment, or the
	 * old one if it fails).  No job is out (no group in flight), so the
	 * loop may read f->seq. */
	f->st.records_since_snapshot = 0;
	f->st.bytes_since_snapshot = MLOG_FRAME_HDR + FILE_HDR_LEN;
	queue_job(f, j);
	return 0;
fail:
	fmt_into(err, errlen, "snapshot-%020" PRIu64 ".snap: %s", f->seq + 1,
	    s.err[0] ? s.err : "the state could not be written out");
	free(s.buf);
	return -1;
}

static void file_wait(struct mlog *ml)
{
	struct mlog_file *f = (struct mlog_file *)ml;

	if (f->thread_started) {
		pthread_mutex_lock(&f->mu);
		while (f->jobs_out > 0 && f->d_head == NULL)
			pthread_cond_wait(&f->cv_done, &f->mu);
		pthread_mutex_unlock(&f->mu);
	}
	for (;;) {
		collect_done(f);
		run_ready(f);
		if (f->jobs_out == 0 || !f->thread_started)
			break;
		pthread_mutex_lock(&f->mu);
		while (f->jobs_out > 0 && f->d_head == NULL)
			pthread_cond_wait(&f->cv_done, &f->mu);
		pthread_mutex_unlock(&f->mu);
	}
}

static void stop_writer(struct mlog_file *f)
{
	if (f->thread_started) {
		pthread_mutex_lock(&f->mu);
		f->stop = 1;
		pthread_cond_signal(&f->cv_job);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL);
		f->thread_started = 0;
	}
	collect_done(f);
	while (f->r_head != NULL) {
		struct fjob *j = f->r_head;
		f->r_head = j->next;
		free(j->buf);
		free(j);
	}
	f->r_tail = NULL;
	if (f->ev != NULL) {
		event_free(f->ev);
		f->ev = NULL;
	}
	for (int i = 0; i < 2; i++)
		if (f->pipefd[i] >= 0) {
			close(f->pipefd[i]);
			f->pipefd[i] = -1;
		}
}

/* ---- life cycle ------------------------------------------------------ */

static void file_stats(const struct mlog *ml, struct mlog_stats *out)
{
	const struct mlog_file *f = (const struct mlog_file *)ml;

	*out = f->st;
}

static void file_free(struct mlog *ml)
{
	struct mlog_file *f = (struct mlog_file *)ml;

	/* Groups in flight are finished, their done callbacks dropped. */
	stop_writer(f);
	if (f->mu_init) {
		pthread_mutex_destroy(&f->mu);
		pthread_cond_destroy(&f->cv_job);
		pthread_cond_destroy(&f->cv_done);
	}
	/* Unsynced records never reach a later open, even those a full
	 * append buffer already pushed into the file. */
	if (f->fd >= 0 && !f->broken)
		rollback(f);
	if (f->fd >= 0)
		close(f->fd);
	if (f->dirfd >= 0)
		close(f->dirfd);
	if (f->lockfd >= 0)
		close(f->lockfd);  /* releases the flock */
	free(f->wbuf);
	free(f->dir);
	free(f);
}

static const struct mlog_ops file_ops = {
	.name = "file",
	.open = file_open,
	.append = file_append,
	.sync = file_sync,
	.discard = file_discard,
	.compact = file_compact,
	.stats = file_stats,
	.free = file_free,
	.sync_async = file_sync_async,
	.wait = file_wait,
	.compact_async = file_compact_async,
};

struct mlog *mlog_file_new(const struct mlog_opts *opts, char *err,
    size_t errlen)
{
	struct mlog_file *f;
	char path[4096], pid[32];
	int n;

	if (opts->dir == NULL || opts->dir[0] == '\0') {
		fmt_into(err, errlen, "storage.data_dir is not set");
		return NULL;
	}
	if (opts->max_record > MLOG_MAX_RECORD_LIMIT) {
		fmt_into(err, errlen, "max record size %u is over the limit of "
		    "%u bytes", opts->max_record, MLOG_MAX_RECORD_LIMIT);
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL) {
		fmt_into(err, errlen, "out of memory");
		return NULL;
	}
	f->base.ops = &file_ops;
	f->base.opts = *opts;
	if (f->base.opts.max_record == 0)
		f->base.opts.max_record = MLOG_MAX_RECORD_DEFAULT;
	f->fd = f->dirfd = f->lockfd = -1;
	f->pipefd[0] = f->pipefd[1] = -1;
	if (pthread_mutex_init(&f->mu, NULL) == 0) {
		pthread_cond_init(&f->cv_job, NULL);
		pthread_cond_init(&f->cv_done, NULL);
		f->mu_init = 1;
	}
	f->st.last_fsync_us = -1;
	f->st.snapshot_wall_ms = -1;
	f->dir = strdup(opts->dir);
	f->base.opts.dir = f->dir;
	f->wcap = MAX((size_t)WBUF_MIN,
	    (size_t)MLOG_FRAME_HDR + f->base.opts.max_record);
	f->wbuf = malloc(f->wcap);
	if (f->dir == NULL || f->wbuf == NULL) {
		fmt_into(err, errlen, "out of memory");
		goto fail;
	}
	if (mkdir(f->dir, 0700) != 0 && errno != EEXIST) {
		fmt_into(err, errlen, "%s: cannot create the data directory: %s",
		    f->dir, strerror(errno));
		goto fail;
	}
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->dirfd < 0) {
		fmt_into(err, errlen, "%s: cannot open the data directory: %s",
		    f->dir, strerror(errno));
		goto fail;
	}
	path_of(path, sizeof(path), f->dir, "LOCK");
	f->lockfd = openat(f->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC,
	    0600);
	if (f->lockfd < 0) {
		fmt_into(err, errlen, "%s: cannot open the lock file: %s",
		    path, strerror(errno));
		goto fail;
	}
	if (flock(f->lockfd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EWOULDBLOCK)
			fmt_into(err, errlen, "data directory %s is in use by "
			    "another mirrord (%s is locked)", f->dir, path);
		else
			fmt_into(err, errlen, "%s: cannot lock: %s", path,
			    strerror(errno));
		goto fail;
	}
	/* The pid is for the operator's eyes only; the flock is the lock. */
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(f->lockfd, 0) != 0 ||
	    pwrite(f->lockfd, pid, (size_t)n, 0) != n)
		log_warn("%s: cannot record the pid", path);
	return &f->base;
fail:
	file_free(&f->base);
	return NULL;
}
