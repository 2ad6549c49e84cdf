/*
 * bench_xlate: what a translation map of a million anchors costs.
 *
 * One partition's map grows by one anchor per hole (a compacted batch
 * re-encoded without its holes, a retention jump, foreign records): a
 * long-lived compacted topic can collect millions.  This writes three
 * metadata logs for one partition, the way the data plane does, and
 * replays each from a fresh process (fork), measuring time and memory:
 *
 *   baseline  N part-anchor records that all keep one delta (decoded,
 *             checked, applied; nothing stored): plain records
 *   epochs    N part-epoch records (each stored, 16 bytes)
 *   map       part-anchor records until the map holds N anchors (holes,
 *             foreign records, runs of skips that merge)
 *
 * then the map's start-up from a snapshot (after a compaction), a trim
 * of half of it, and lookups against a one-anchor map.  Last, a
 * transactional partition: T transactions of 1-50 records, 20% aborted,
 * each leaving one anchor behind its marker, written as the data plane
 * writes them (part-anchors records of up to 256 anchors), replayed from
 * the log and from a snapshot: what a partition with millions of
 * transactions costs at start-up and in memory.  Figures are
 * ratios against the baseline measured in the same run, so they compare
 * across machines; timing lives here, never in the tests.
 *
 * Run with `make bench-xlate` (part of `make bench`); argv[1] overrides N
 * (default 1,000,000), argv[2] T (default 10,000,000).  Logs go to a
 * temporary directory under $TMPDIR (default /tmp), removed at the end.
 * BENCH_XLATE_BASELINE names other builds' bench_xlate (colon-separated):
 * each runs with the same arguments after this one, and the transactional
 * map's replay time and memory are printed as ratios against it.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kbuf.h"
#include "log.h"
#include "mlog.h"
#include "mrec.h"
#include "mstate.h"
#include "xlate.h"

#define SYNC_EVERY 10000

struct result {
	double secs;          /* replay (mstate_open) */
	double rss_mib;       /* resident memory it added */
	size_t nanchors, nepochs;
	double array_mib;     /* the anchor (or epoch) array, with its slack */
	double extra_secs;    /* compaction, trim */
	unsigned long long records;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *err)
{
	fprintf(stderr, "bench_xlate: %s: %s\n", what, err);
	exit(1);
}

static double rss_mib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, res = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
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
	ml = mlog_file_new(&o, err, sizeof(err));
	if (ml == NULL)
		die("open", err);
	return ml;
}

/* A log with one mirror and one topic of one partition, MIRRORING. */
static struct mlog *start_log(const char *dir)
{
	struct mlog *ml;
	struct mstate *st = mstate_new();
	struct mcfg boot = { (char *)"bootstrap.servers",
		(char *)"127.0.0.1:9092" };
	char err[1024], msg[1024];

	if (mkdir(dir, 0700) != 0)
		die("mkdir", dir);
	ml = new_log(dir);
	if (mstate_open(st, ml, err, sizeof(err)) != 0)
		die("mstate_open", err);
	if (mstate_create_mirror(st, "bench", &boot, 1, msg, sizeof(msg)) ||
	    mstate_add_topic(st, "bench", "t", 1, msg, sizeof(msg)))
		die("setup", msg);
	mstate_free(st);   /* the records below go straight to the log */
	return ml;
}

static void append_rec(struct mlog *ml, const struct mrec *r, long *count)
{
	char err[1024];
	struct kw w;
	uint8_t *b;
	size_t len;

	kw_init(&w, 65536);
	if (mrec_encode(r, &w, err, sizeof(err)) != 0)
		die("encode", err);
	b = kw_take(&w, &len);
	if (b == NULL || mlog_append(ml, r->type, b, len, err,
	    sizeof(err)) != 0)
		die("append", err);
	free(b);
	if (++*count % SYNC_EVERY == 0 && mlog_sync(ml, err, sizeof(err)) != 0)
		die("sync", err);
}

static void end_log(struct mlog *ml)
{
	char err[1024];

	if (mlog_sync(ml, err, sizeof(err)) != 0)
		die("sync", err);
	mlog_free(ml);
}

static void rec_init(struct mrec *r, uint16_t type)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->mirror = kstr_c("bench");
	r->topic = kstr_c("t");
	r->str = KSTR_NULL;
	r->partition = 0;
}

static void anchor_rec(struct mlog *ml, int64_t s, int64_t d, long *count)
{
	struct mrec r;

	rec_init(&r, MREC_PART_ANCHOR);
	r.off = s;
	r.off2 = d;
	append_rec(ml, &r, count);
}

static long write_baseline(const char *dir, long n)
{
	struct mlog *ml = start_log(dir);
	long count = 0;

	for (long i = 0; i < n; i++)
		anchor_rec(ml, 1000 + i * 7, i * 7, &count);
	end_log(ml);
	return count;
}

static long write_epochs(const char *dir, long n)
{
	struct mlog *ml = start_log(dir);
	struct mrec r;
	long count = 0;

	for (long i = 0; i < n; i++) {
		rec_init(&r, MREC_PART_EPOCH);
		r.epoch = (int32_t)i;
		r.off = i * 7;
		append_rec(ml, &r, &count);
	}
	end_log(ml);
	return count;
}

/*
 * The data plane's anchors for a compacted topic with foreign writes: a
 * mapped run, then a skip: a source hole (70%), destination-only records
 * (20%) or a run of several skips on both sides (10%, these merge).  The
 * same anchors go into *ref, until it holds n.  Returns the records
 * written; *src_end is the source offset covered.
 */
static long write_map(const char *dir, long n, struct xlate *ref,
    int64_t *src_end)
{
	struct mlog *ml = dir != NULL ? start_log(dir) : NULL;
	int64_t s = 0, d = 0;
	long count = 0;
	char err[256];

	while ((long)xlate_count(ref) < n) {
		uint64_t x = next_rand();
		int kind = (int)(x % 10), skips = kind == 9 ? 2 + (int)(x >> 8) % 3 : 1;

		int64_t run = 1 + (int64_t)((x >> 16) % 20);

		s += run;   /* a mapped run */
		d += run;
		for (int k = 0; k < skips; k++) {
			if (kind < 7 || (kind == 9 && k % 2 == 0))
				s += 1 + (int64_t)((x >> (24 + k)) % 5);
			else
				d += 1 + (int64_t)((x >> (32 + k)) % 3);
			if (ml != NULL)
				anchor_rec(ml, s, d, &count);
			else
				count++;
			if (xlate_add(ref, s, d, err, sizeof(err)) != 0)
				die("xlate_add", err);
		}
	}
	if (ml != NULL)
		end_log(ml);
	*src_end = s;
	return count;
}

/*
 * A transactional partition's anchors: per transaction 1-50 records, then
 * its marker; 20% aborted (records and marker skipped on the destination).
 * One anchor after each marker (those of consecutive aborted transactions
 * merge, as lib/xlate merges them; *ref gets the same), gathered in part-anchors records of up to
 * ANCHORS_PER_REC the way pipeline/copy.c writes them.  Returns the
 * records written.
 */
#define ANCHORS_PER_REC 256
static long write_txns(const char *dir, long ntx, struct xlate *ref)
{
	struct mlog *ml = start_log(dir);
	struct mrec_anchor v[ANCHORS_PER_REC];
	struct mrec r;
	int64_t s = 0, d = 0, sending = 0;
	long count = 0;
	int n = 0;
	char err[256];

	for (long i = 0; i < ntx; i++) {
		uint64_t x = next_rand();
		int64_t k = 1 + (int64_t)(x % 50);

		if ((x >> 8) % 5 == 0) {
			s += k + 1;   /* aborted: nothing reaches the destination */
		} else {
			s += k + 1;
			d += k;
		}
		v[n].src = s;
		v[n].dst = d;
		if (xlate_add(ref, s, d, err, sizeof(err)) != 0)
			die("xlate_add", err);
		if (++n == ANCHORS_PER_REC || i + 1 == ntx) {
			rec_init(&r, MREC_PART_ANCHORS);
			r.off = sending;
			r.anchors = v;
			r.nanchors = n;
			append_rec(ml, &r, &count);
			sending = d;
			n = 0;
		}
	}
	end_log(ml);
	return count;
}

static void rm_rf(const char *dir)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	char path[4096];

	if (dd == NULL)
		return;
	while ((de = readdir(dd)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(dd);
	rmdir(dir);
}

/* Bytes of an array of n elements grown by doubling from 4 (mstate_grow). */
static double array_mib(size_t n, size_t elem)
{
	size_t cap = 4;

	while (cap < n)
		cap *= 2;
	return (double)(n > 0 ? cap : 0) * (double)elem / 1048576.0;
}

enum job { J_REPLAY, J_COMPACT_THEN_REPLAY, J_TRIM };

/* In a child: replays dir (after a compaction or with a trim if asked). */
static void child(const char *dir, enum job job, struct result *res)
{
	struct mlog *ml;
	struct mstate *st;
	struct mpart *p;
	struct mlog_stats ms;
	char err[1024], msg[1024];
	double r0, t0;

	if (job == J_COMPACT_THEN_REPLAY) {
		ml = new_log(dir);
		st = mstate_new();
		if (mstate_open(st, ml, err, sizeof(err)) != 0)
			die("replay", err);
		t0 = now_s();
		if (mstate_compact(st, err, sizeof(err)) != 0)
			die("compact", err);
		res->extra_secs = now_s() - t0;
		mstate_free(st);
		mlog_free(ml);
	}
	r0 = rss_mib();
	ml = new_log(dir);
	st = mstate_new();
	t0 = now_s();
	if (mstate_open(st, ml, err, sizeof(err)) != 0)
		die("replay", err);
	res->secs = now_s() - t0;
	res->rss_mib = rss_mib() - r0;
	mlog_stats(ml, &ms);
	res->records = (unsigned long long)ms.records;
	{
		struct mirror *mi = mstate_mirror_find(st, "bench");
		struct mtopic *tp = mi != NULL ? mirror_topic_find(mi, "t") : NULL;

		if (tp == NULL || tp->npart != 1)
			die("replay", "no partition bench/t-0");
		p = tp->parts[0];
	}
	res->nanchors = mpart_nanchors(p);
	res->nepochs = p->nepochs;
	res->array_mib = (p->map != NULL ? (double)xlate_bytes(p->map) / 1048576.0 :
	    0) + array_mib(p->nepochs, sizeof(*p->epochs));
	if (job == J_TRIM) {
		struct manchor mid = mpart_anchor(p, mpart_nanchors(p) / 2);
		size_t dropped;

		t0 = now_s();
		if (mpart_trim(st, p, mid.src, mid.dst, &dropped, msg,
		    sizeof(msg)) != 0)
			die("trim", msg);
		res->extra_secs = now_s() - t0;
		res->nanchors = mpart_nanchors(p);
	}
	mstate_free(st);
	mlog_free(ml);
}

static void run1(const char *dir, enum job job, struct result *res)
{
	int fds[2], status;
	pid_t pid = -1;

	memset(res, 0, sizeof(*res));
	fflush(stdout);
	if (pipe(fds) != 0 || (pid = fork()) < 0)
		die("fork", "failed");
	if (pid == 0) {
		close(fds[0]);
		child(dir, job, res);
		if (write(fds[1], res, sizeof(*res)) != (ssize_t)sizeof(*res))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], res, sizeof(*res)) != (ssize_t)sizeof(*res) ||
	    waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		die(dir, "the measuring child failed");
	close(fds[0]);
}

/* Replays are timed three times (the best counts: the first also pays for
 * the page cache), the other jobs once. */
static void run(const char *dir, enum job job, struct result *res)
{
	struct result r;

	run1(dir, job, res);
	for (int i = 0; job == J_REPLAY && i < 2; i++) {
		run1(dir, job, &r);
		if (r.secs < res->secs)
			*res = r;
	}
}

/* ns per lookup of n pseudo-random source offsets below end. */
static double lookups(const struct xlate *m, int64_t end, long n)
{
	double t0 = now_s();
	int64_t out, sum = 0;

	for (long i = 0; i < n; i++) {
		int64_t v = (int64_t)(next_rand() % (uint64_t)end);

		if (xlate_src_to_dst(m, v, &out) != XLATE_UNMAPPED)
			sum += out;
	}
	if (sum == 42)
		printf(" ");
	return (now_s() - t0) * 1e9 / (double)n;
}

/*
 * Runs each build BENCH_XLATE_BASELINE names with n and ntx, reads its
 * "txn map:" line (replay seconds, map MiB, RSS) and prints this run's x
 * as ratios against it.
 */
static void compare_builds(long n, long ntx, const struct result *x)
{
	const char *env = getenv("BENCH_XLATE_BASELINE");
	char *list, *save = NULL;

	if (env == NULL || env[0] == '\0')
		return;
	if ((list = strdup(env)) == NULL)
		die("baseline", "out of memory");
	for (char *prog = strtok_r(list, ":", &save); prog != NULL;
	    prog = strtok_r(NULL, ":", &save)) {
		char cmd[1200], line[1024];
		double secs = -1, mib = -1, rss = -1;
		const char *q;
		FILE *f;

		snprintf(cmd, sizeof(cmd), "'%s' %ld %ld", prog, n, ntx);
		fflush(stdout);
		if ((f = popen(cmd, "r")) == NULL)
			die("baseline", prog);
		while (fgets(line, sizeof(line), f) != NULL) {
			if (strncmp(line, "txn map:", 8) != 0)
				continue;
			if ((q = strstr(line, "replay ")) != NULL)
				secs = strtod(q + 7, NULL);
			if ((q = strstr(line, "array ")) != NULL)
				mib = strtod(q + 6, NULL);
			if ((q = strstr(line, "RSS +")) != NULL)
				rss = strtod(q + 5, NULL);
		}
		if (pclose(f) != 0 || secs <= 0 || mib <= 0 || rss <= 0) {
			printf("baseline: %s gave no transactional map figures\n",
			    prog);
			continue;
		}
		printf("baseline: %s: txn map replay %.3f s, %.1f MiB, RSS +%.1f "
		    "MiB; this build %.2fx the time, %.2fx the map, %.2fx the "
		    "RSS\n", prog, secs, mib, rss, x->secs / secs,
		    x->array_mib / mib, x->rss_mib / rss);
	}
	free(list);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR");
	long n = argc > 1 ? atol(argv[1]) : 1000000, nb, nm, nt;
	long ntx = argc > 2 ? atol(argv[2]) : 10000000;
	char dir[512], d_base[600], d_ep[600], d_map[600], d_txn[600];
	struct result b, e, m, c, t, x, xc;
	struct xlate *tx_ref = xlate_new(0);
	struct xlate *ref = xlate_new(0), *one = xlate_new(0);
	int64_t src_end;
	double t0, ns_map, ns_one;

	log_init("bench_xlate", LOG_LVL_WARN, 0);
	snprintf(dir, sizeof(dir), "%s/bench_xlate.XXXXXX",
	    base != NULL && base[0] != '\0' ? base : "/tmp");
	if (n <= 0 || ntx <= 0 || mkdtemp(dir) == NULL || ref == NULL ||
	    one == NULL) {
		fprintf(stderr, "usage: bench_xlate [anchors [transactions]]\n");
		return 2;
	}
	snprintf(d_base, sizeof(d_base), "%s/baseline", dir);
	snprintf(d_ep, sizeof(d_ep), "%s/epochs", dir);
	snprintf(d_map, sizeof(d_map), "%s/map", dir);
	snprintf(d_txn, sizeof(d_txn), "%s/txn", dir);

	t0 = now_s();
	nb = write_baseline(d_base, n);
	write_epochs(d_ep, n);
	nm = write_map(d_map, n, ref, &src_end);
	printf("bench_xlate: %ld anchors of one partition (logs written in "
	    "%.1f s)\n", n, now_s() - t0);

	run(d_base, J_REPLAY, &b);
	run(d_ep, J_REPLAY, &e);
	run(d_map, J_REPLAY, &m);
	if (m.nanchors != xlate_count(ref))
		die("map", "the replayed map differs from lib/xlate's");
	run(d_map, J_COMPACT_THEN_REPLAY, &c);
	if (c.nanchors != m.nanchors)
		die("map", "the map replayed from a snapshot differs");
	run(d_map, J_TRIM, &t);   /* last: it writes to the log */

	printf("baseline: %ld part-anchor records, one delta (none stored): "
	    "replay %.3f s, %.0f records/s\n", nb, b.secs, (double)nb / b.secs);
	printf("epochs:   %ld part-epoch records, all stored: replay %.3f s "
	    "(%.2fx baseline), array %.1f MiB, RSS +%.1f MiB\n", n, e.secs,
	    e.secs / b.secs, e.array_mib, e.rss_mib);
	printf("map:      %ld part-anchor records -> %zu anchors: replay %.3f s "
	    "(%.2fx baseline), array %.1f MiB (%.1f bytes/anchor), RSS +%.1f "
	    "MiB (%.2fx the epochs' RSS)\n", nm, m.nanchors, m.secs,
	    m.secs / b.secs, m.array_mib, m.array_mib * 1048576.0 /
	    (double)m.nanchors, m.rss_mib, e.rss_mib > 0 ? m.rss_mib / e.rss_mib : 0);
	printf("snapshot: compaction %.3f s; start-up from it (%llu records) "
	    "%.3f s (%.2fx baseline)\n", c.extra_secs, c.records, c.secs,
	    c.secs / b.secs);
	printf("trim:     half the map in one record: %.4f s, %zu anchors "
	    "left\n", t.extra_secs, t.nanchors);
	if (xlate_add(one, 0, 0, NULL, 0) != 0)
		die("xlate_add", "one-anchor map");
	ns_map = lookups(ref, src_end, 1000000);
	ns_one = lookups(one, src_end, 1000000);
	printf("lookups:  source->destination, %.0f ns in the %zu-anchor map, "
	    "%.0f ns in a one-anchor map (%.2fx)\n", ns_map, xlate_count(ref),
	    ns_one, ns_map / ns_one);
	printf("memory:   lib/xlate %.1f MiB for %lld source offsets (a map "
	    "per offset would take %.0f MiB: %.3fx)\n",
	    (double)xlate_bytes(ref) / 1048576.0, (long long)src_end,
	    (double)src_end * 16.0 / 1048576.0,
	    (double)xlate_bytes(ref) / ((double)src_end * 16.0));

	t0 = now_s();
	if (tx_ref == NULL)
		die("txn", "out of memory");
	nt = write_txns(d_txn, ntx, tx_ref);
	printf("transactions: %ld of one partition, %ld part-anchors records "
	    "(written in %.1f s)\n", ntx, nt, now_s() - t0);
	run(d_txn, J_REPLAY, &x);
	if (x.nanchors != xlate_count(tx_ref))
		die("txn", "the replayed map lost anchors");
	run(d_txn, J_COMPACT_THEN_REPLAY, &xc);
	if (xc.nanchors != xlate_count(tx_ref))
		die("txn", "the map replayed from a snapshot differs");
	printf("txn map:  %zu anchors: replay %.3f s (%.0f anchors/s), array "
	    "%.1f MiB (%.1f bytes/transaction), RSS +%.1f MiB; from a snapshot "
	    "(%llu records, compaction %.3f s) %.3f s, RSS +%.1f MiB\n",
	    x.nanchors, x.secs, (double)x.nanchors / x.secs, x.array_mib,
	    x.array_mib * 1048576.0 / (double)ntx, x.rss_mib, xc.records,
	    xc.extra_secs, xc.secs, xc.rss_mib);
	rm_rf(d_txn);
	compare_builds(n, ntx, &x);
	xlate_free(tx_ref);
	xlate_free(ref);
	xlate_free(one);
	rm_rf(d_base);
	rm_rf(d_ep);
	rm_rf(d_map);
	rmdir(dir);
	return 0;
}
