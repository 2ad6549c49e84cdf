/*
 * bench_mlog: how fast mirrord starts from a long metadata log.
 *
 * Writes a log of N state records (default 1,000,000; argv[1] overrides)
 * the way the data plane would: one mirror, one topic of 64 partitions,
 * then a mix of translation anchors (half), epoch-history entries (a
 * quarter) and partition state changes (a quarter), synced every 10,000
 * records.  Then it times, each from a fresh process state:
 *   - the frame scan alone (mlog_open with an apply that only counts),
 *   - the real start-up (mstate_open: scan, decode, apply every record),
 *   - the start-up after a compaction (snapshot plus an empty segment),
 *   - group commit: 3,000 records of 64 writers that each wait for their
 *     record to be durable, fsync per record against asynchronous groups,
 * and prints records/s.  Timing lives here, never in the tests.
 *
 * Run with `make bench-mlog` (part of `make bench`).  The log goes to a
 * temporary directory under $TMPDIR (default /tmp), removed at the end.
 * With MIRRORD_BENCH_KAFKA=host:port the same runs on the replicated
 * backend instead (storage.backend: kafka), in a new topic
 * bench-mlog-<pid> of that cluster (PLAINTEXT), which is left there;
 * MIRRORD_BENCH_KAFKA_TOPIC names the topic instead (to profile one phase
 * against a log written by an earlier run).  BENCH_MLOG_PHASES picks the
 * phases, a comma-separated subset of write, scan, startup, compact,
 * after (the start-up after the compaction) and gcommit (group commit,
 * file backend only); default all of them.
 * Each line also gives the CPU time of the whole process (every thread).
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/resource.h>

#include <event2/event.h>

#include "kbuf.h"
#include "log.h"
#include "mlog.h"
#include "mlog_kafka.h"
#include "mrec.h"
#include "mstate.h"

#define NPART 64
#define SYNC_EVERY 10000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of the process so far, every thread. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Whether BENCH_MLOG_PHASES (default all) names phase. */
static int phase(const char *name)
{
	const char *l = getenv("BENCH_MLOG_PHASES");
	size_t n = strlen(name);

	if (l == NULL || l[0] == '\0')
		return 1;
	while (*l != '\0') {
		size_t w = strcspn(l, ",");

		if (w == n && strncmp(l, name, n) == 0)
			return 1;
		l += w;
		if (*l == ',')
			l++;
	}
	return 0;
}

static void die(const char *what, const char *err)
{
	fprintf(stderr, "bench_mlog: %s: %s\n", what, err);
	exit(1);
}

static struct mlog *new_log(const char *dir)
{
	struct mlog_opts o;
	char err[1024];
	struct mlog *ml;

	mlog_opts_init(&o);
	o.dir = dir;
	o.compact_records = 0;
	o.compact_bytes = 0;
	if (getenv("MIRRORD_BENCH_KAFKA") != NULL) {
		struct mlog_kafka_opts ko;
		static char topic[64];

		mlog_kafka_opts_init(&ko);
		ko.bootstrap = getenv("MIRRORD_BENCH_KAFKA");
		if (getenv("MIRRORD_BENCH_KAFKA_TOPIC") != NULL)
			snprintf(topic, sizeof(topic), "%s",
			    getenv("MIRRORD_BENCH_KAFKA_TOPIC"));
		else
			snprintf(topic, sizeof(topic), "bench-mlog-%ld",
			    (long)getpid());
		ko.topic = topic;
		ko.timeout_ms = 60000;
		ml = mlog_kafka_new(&o, &ko, err, sizeof(err));
	} else {
		ml = mlog_file_new(&o, err, sizeof(err));
	}
	if (ml == NULL)
		die("open", err);
	return ml;
}

static void append_rec(struct mlog *ml, const struct mrec *r)
{
	char err[1024];
	struct kw w;
	uint8_t *b;
	size_t len;

	kw_init(&w, 4096);
	if (mrec_encode(r, &w, err, sizeof(err)) != 0)
		die("encode", err);
	b = kw_take(&w, &len);
	if (b == NULL || mlog_append(ml, r->type, b, len, err,
	    sizeof(err)) != 0)
		die("append", err);
	free(b);
}

static void write_log(const char *dir, long n)
{
	struct mlog *ml = new_log(dir);
	struct mstate *st = mstate_new();
	struct mcfg boot = { (char *)"bootstrap.servers",
		(char *)"127.0.0.1:9092" };
	char err[1024], msg[1024];
	struct mrec r;
	int32_t epoch[NPART] = { 0 };
	int64_t src[NPART] = { 0 };
	int mirroring[NPART];
	double t0;

	if (mstate_open(st, ml, err, sizeof(err)) != 0)
		die("mstate_open", err);
	if (mstate_create_mirror(st, "bench", &boot, 1, msg, sizeof(msg)) ||
	    mstate_add_topic(st, "bench", "orders", NPART, msg, sizeof(msg)))
		die("setup", msg);
	mstate_free(st);   /* the records below go straight to the log */
	for (int p = 0; p < NPART; p++)
		mirroring[p] = 0;
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		int p = (int)(i % NPART);
		memset(&r, 0, sizeof(r));
		r.mirror = kstr_c("bench");
		r.topic = kstr_c("orders");
		r.str = KSTR_NULL;
		r.partition = p;
		switch (i / NPART % 4) {
		case 0:
		case 1:
			/* a hole: the delta changes every time */
			src[p] += 1000;
			r.type = MREC_PART_ANCHOR;
			r.off = src[p];
			r.off2 = src[p] - (src[p] / 1000 % 2);
			break;
		case 2:
			r.type = MREC_PART_EPOCH;
			r.epoch = ++epoch[p];
			r.off = src[p];
			break;
		default:
			/* PREPARING -> MIRRORING, then MIRRORING <-> PAUSING */
			r.type = MREC_PART_STATE;
			r.state = mirroring[p] == 1 ? MPART_PAUSING :
			    MPART_MIRRORING;
			mirroring[p] = mirroring[p] == 1 ? 2 : 1;
			r.str = kstr_c("bench");
			break;
		}
		append_rec(ml, &r);
		if ((i + 1) % SYNC_EVERY == 0 && mlog_sync(ml, err,
		    sizeof(err)) != 0)
			die("sync", err);
	}
	if (mlog_sync(ml, err, sizeof(err)) != 0)
		die("sync", err);
	printf("write:   %ld records in %.3f s, %.0f records/s (sync every "
	    "%d)\n", n, now_s() - t0, (double)n / (now_s() - t0), SYNC_EVERY);
	mlog_free(ml);
}

static int count_only(void *arg, const struct mlog_rec *rec, char *err,
    size_t errlen)
{
	(*(long *)arg)++;
	return 0;
}

static void time_scan(const char *dir)
{
	struct mlog *ml = new_log(dir);
	char err[1024];
	long count = 0;
	double t0 = now_s(), c0 = cpu_s(), dt;

	if (mlog_open(ml, count_only, &count, err, sizeof(err)) != 0)
		die("scan", err);
	dt = now_s() - t0;
	printf("scan:    %ld records in %.3f s, %.0f records/s, cpu %.3f s\n",
	    count, dt, (double)count / dt, cpu_s() - c0);
	mlog_free(ml);
}

static void time_startup(const char *dir, const char *label, int compact)
{
	struct mlog *ml = new_log(dir);
	struct mstate *st = mstate_new();
	struct mlog_stats s;
	char err[1024];
	double t0 = now_s(), c0 = cpu_s(), dt;

	if (mstate_open(st, ml, err, sizeof(err)) != 0)
		die("startup", err);
	dt = now_s() - t0;
	mlog_stats(ml, &s);
	printf("%s %llu records in %.3f s, %.0f records/s, cpu %.3f s\n",
	    label, (unsigned long long)s.records, dt, (double)s.records / dt,
	    cpu_s() - c0);
	if (compact) {
		t0 = now_s();
		if (mstate_compact(st, err, sizeof(err)) != 0)
			die("compact", err);
		printf("compact: snapshot written in %.3f s\n", now_s() - t0);
	}
	mstate_free(st);
	mlog_free(ml);
}

static void rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/*
 * Group commit: GC_RECORDS anchor records written by GC_WRITERS partitions,
 * each waiting for its record to be durable before writing the next (the
 * data plane's pattern).  First with the blocking mlog_sync() after every
 * record (one fsync each, on the caller's thread), then with
 * mlog_sync_async() on an event loop: the writer thread fsyncs every group
 * queued meanwhile at once.  Prints records/s and fsyncs of both.
 */
#define GC_RECORDS 3000
#define GC_WRITERS 64

struct gc_run {
	struct mlog *ml;
	long left;        /* records still to start */
	long done;
	char err[1024];
};

static void gc_anchor(struct mlog *ml, long i)
{
	struct mrec r;

	memset(&r, 0, sizeof(r));
	r.mirror = kstr_c("bench");
	r.topic = kstr_c("orders");
	r.str = KSTR_NULL;
	r.partition = (int32_t)(i % NPART);
	r.type = MREC_PART_ANCHOR;
	r.off = 1000 * i;
	r.off2 = 999 * i;
	append_rec(ml, &r);
}

static void gc_done(void *arg, int rc, int16_t sync_error, const char *err)
{
	struct gc_run *g = arg;

	(void)sync_error;
	if (rc != 0)
		die("group", err);
	g->done++;
	if (g->left > 0) {
		/* This writer's next record, once the last one is durable. */
		gc_anchor(g->ml, g->left--);
		if (mlog_sync_async(g->ml, gc_done, g, g->err,
		    sizeof(g->err)) != 0)
			die("sync_async", g->err);
	}
}

static void group_commit(const char *base)
{
	char dir[512], err[1024];
	struct mlog_stats s0, s1;
	struct mlog *ml;
	double t0, t_block, t_async;

	if (getenv("MIRRORD_BENCH_KAFKA") != NULL)
		return;   /* the file backend's writer thread is measured */
	snprintf(dir, sizeof(dir), "%s/bench_mlog_gc.XXXXXX", base);
	if (mkdtemp(dir) == NULL)
		die("mkdtemp", dir);
	ml = new_log(dir);
	if (mlog_open(ml, NULL, NULL, err, sizeof(err)) != 0)
		die("open", err);
	mlog_stats(ml, &s0);
	t0 = now_s();
	for (long i = 0; i < GC_RECORDS; i++) {
		gc_anchor(ml, i);
		if (mlog_sync(ml, err, sizeof(err)) != 0)
			die("sync", err);
	}
	t_block = now_s() - t0;
	mlog_stats(ml, &s1);
	printf("fsync per record:  %d records in %.3f s, %.0f records/s, "
	    "%llu fsyncs\n", GC_RECORDS, t_block, GC_RECORDS / t_block,
	    (unsigned long long)(s1.syncs - s0.syncs));

	struct event_base *evb = event_base_new();
	struct gc_run g = { .ml = ml, .left = GC_RECORDS };
	if (evb == NULL)
		die("event_base_new", "out of memory");
	mlog_set_event_base(ml, evb);
	s0 = s1;
	t0 = now_s();
	for (int w = 0; w < GC_WRITERS && g.left > 0; w++) {
		gc_anchor(ml, g.left--);
		if (mlog_sync_async(ml, gc_done, &g, err, sizeof(err)) != 0)
			die("sync_async", err);
	}
	while (g.done < GC_RECORDS)
		event_base_loop(evb, EVLOOP_ONCE);
	t_async = now_s() - t0;
	mlog_stats(ml, &s1);
	printf("group commit:      %d records in %.3f s, %.0f records/s, "
	    "%llu fsyncs (%d writers, largest group %llu records), %.1fx\n",
	    GC_RECORDS, t_async, GC_RECORDS / t_async,
	    (unsigned long long)(s1.syncs - s0.syncs), GC_WRITERS,
	    (unsigned long long)s1.max_group_records, t_block / t_async);
	mlog_free(ml);
	event_base_free(evb);
	rm_rf(dir);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR");
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	char dir[512];

	log_init("bench_mlog", LOG_LVL_WARN, 0);
	snprintf(dir, sizeof(dir), "%s/bench_mlog.XXXXXX",
	    base != NULL && base[0] != '\0' ? base : "/tmp");
	if (n <= 0 || mkdtemp(dir) == NULL) {
		fprintf(stderr, "usage: bench_mlog [records]\n");
		return 2;
	}
	if (phase("write"))
		write_log(dir, n);
	if (phase("scan"))
		time_scan(dir);
	if (phase("startup") || phase("compact"))
		time_startup(dir, "startup:", phase("compact"));
	if (phase("after"))
		time_startup(dir, "startup after compaction:", 0);
	rm_rf(dir);
	if (phase("gcommit"))
		group_commit(base != NULL && base[0] != '\0' ? base : "/tmp");
	return 0;
}
