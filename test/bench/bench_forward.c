/*
 * bench_forward: what the metadata writer pays per forwarded request
 * (mstate_apply_forwarded()) as the model grows.
 *
 * Builds a model of M mirrors (argv[1], default 10), each with one topic
 * (orders-<n>) of P partitions (argv[2], default 1000) holding A translation anchors
 * each (argv[3], default 4), in a file-backed metadata log without fsync
 * under $TMPDIR, then hands the writer R forwarded requests (argv[4],
 * default 2000) of one part-anchor record each, for partitions spread over
 * the whole model, the way a follower's data plane forwards them, and
 * prints the time per request.  Timing lives here, never in the tests.
 * Run with `make bench-forward` (part of `make bench`).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "mlog.h"
#include "mrec.h"
#include "mstate.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *err)
{
	fprintf(stderr, "bench_forward: %s: %s\n", what, err);
	exit(1);
}

int main(int argc, char **argv)
{
	long nm = argc > 1 ? atol(argv[1]) : 10;
	long np = argc > 2 ? atol(argv[2]) : 1000;
	long na = argc > 3 ? atol(argv[3]) : 4;
	long nr = argc > 4 ? atol(argv[4]) : 2000;
	const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
	char dir[512], err[1024], msg[1024], cmd[600];
	struct mcfg boot = { (char *)"bootstrap.servers",
		(char *)"127.0.0.1:9092" };
	struct mlog_opts o;
	struct mlog *ml;
	struct mstate *st;
	double t0, t;

	if (nm < 1 || np < 1 || na < 1 || nr < 1)
		die("usage", "bench_forward [mirrors] [partitions] [anchors] "
		    "[requests]");
	log_init("bench_forward", LOG_LVL_WARN, 0);
	snprintf(dir, sizeof(dir), "%s/bench-forward-%ld", tmp, (long)getpid());
	mlog_opts_init(&o);
	o.dir = dir;
	o.no_fsync = 1;
	o.compact_records = 0;
	o.compact_bytes = 0;
	if ((ml = mlog_file_new(&o, err, sizeof(err))) == NULL)
		die("open", err);
	st = mstate_new();
	if (mstate_open(st, ml, err, sizeof(err)) != 0)
		die("mstate_open", err);
	t0 = now_s();
	for (long m = 0; m < nm; m++) {
		char name[64], topic[64];
		struct mtopic *tp;

		snprintf(name, sizeof(name), "m%04ld", m);
		snprintf(topic, sizeof(topic), "orders-%04ld", m);
		if (mstate_create_mirror(st, name, &boot, 1, msg, sizeof(msg)) ||
		    mstate_add_topic(st, name, topic, (int32_t)np, msg,
		    sizeof(msg)))
			die("setup", msg);
		tp = mirror_topic_find(mstate_mirror_find(st, name), topic);
		if (mstate_batch_begin(st) != 0)
			die("batch", "open");
		for (long p = 0; p < np; p++)
			for (long a = 0; a < na; a++)
				if (mpart_add_anchor_async(st, tp->parts[p],
				    a * 1000, a * 1000, NULL, NULL, NULL, msg,
				    sizeof(msg)) != 0)
					die("anchor", msg);
		if (mstate_batch_commit(st, msg, sizeof(msg)) != 0)
			die("commit", msg);
	}
	printf("model: %ld mirrors x %ld partitions x %ld anchors built in "
	    "%.2f s\n", nm, np, na, now_s() - t0);
	t0 = now_s();
	for (long i = 0; i < nr; i++) {
		long m = i % nm, p = (i / nm) % np;
		char name[64], topic[64];
		struct mrec r = { .type = MREC_PART_ANCHOR };
		struct mlog_rec rec = { .type = MREC_PART_ANCHOR, .live = 1 };
		struct kw w;
		uint8_t *b;
		size_t len;
		int code;

		snprintf(name, sizeof(name), "m%04ld", m);
		snprintf(topic, sizeof(topic), "orders-%04ld", m);
		r.mirror = kstr_c(name);
		r.topic = kstr_c(topic);
		r.str = KSTR_NULL;
		r.partition = (int32_t)p;
		r.off = r.off2 = na * 1000 + i * 10;
		kw_init(&w, 4096);
		if (mrec_encode(&r, &w, err, sizeof(err)) != 0)
			die("encode", err);
		b = kw_take(&w, &len);
		rec.p = b;
		rec.len = (uint32_t)len;
		code = mstate_apply_forwarded(st, &rec, 1, msg, sizeof(msg));
		free(b);
		if (code != KERR_NONE)
			die("forwarded", msg);
	}
	t = now_s() - t0;
	printf("forwarded: %ld requests of one part-anchor record in %.3f s: "
	    "%.1f us per request, %.0f requests/s\n", nr, t, t * 1e6 /
	    (double)nr, (double)nr / t);
	mstate_free(st);
	mlog_free(ml);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_forward: could not remove %s\n", dir);
	return 0;
}
