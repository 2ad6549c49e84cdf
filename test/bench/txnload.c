/*
 * txnload: transactional load for the transaction benchmark.
 *
 * Several librdkafka transactional producers, one thread each with its own
 * transactional.id (a transactional producer has at most one transaction
 * open, so a high rate needs several), write transactions into the given
 * topics for a given time.  Each transaction writes a random number of
 * records (-n, default 1-50) spread over a random number of distinct
 * partitions (-P, default 1-6) chosen among every partition of the topics,
 * and is aborted with probability -a (default 0.2), committed otherwise.
 * The producers together aim at -r transactions a second (0: as fast as
 * they can); a producer more than a second behind its schedule drops the
 * backlog, so the rate achieved is what the broker took.
 *
 *   txnload -b BOOTSTRAP -t TOPIC[,TOPIC...] [-p PARTITIONS] [-r TXN_PER_S]
 *           [-d SECONDS] [-n MIN-MAX] [-P MIN-MAX] [-a ABORT_FRACTION]
 *           [-s VALUE_BYTES] [-i PRODUCERS] [-S SEED] [-x TXN_ID_PREFIX]
 *           [-I] [-R]
 *
 * -p is the partition count of every topic (default: asked of the broker).
 * Records: key "<producer>-<transaction>-<record>", value that key, an
 * abort or commit tag and filler up to -s bytes (default 100), so a
 * consumer can tell the records apart and see what was aborted.  With -I
 * each record also carries a header "id", "<TXN_ID_PREFIX>/<key>", unique
 * across runs with different prefixes (the torture test's checker names
 * records by it).
 *
 * A fatal producer error (a source broker restarted under it) ends that
 * producer, is counted in "errors" and makes the exit status 1; with -R
 * the producer starts again instead under the same transactional.id
 * (init_transactions fences the old one and aborts what it left open) and
 * the restart is counted in "restarts".  An "abort" record is never
 * committed; a "commit" record of a transaction whose commit failed may
 * be either.
 *
 * Once every producer has its producer id (init_transactions) it prints
 * {"started":true,...} and the load begins; at the end (or on SIGINT or
 * SIGTERM, which stop it early) one JSON line with the transactions
 * committed and aborted, the records of each, the seconds from the first
 * transaction begun to the last one ended and the rate achieved.
 *
 * librdkafka 2.0.2 against Kafka 4: every abort is preceded by a flush()
 * (HACKING.md): aborting with records still queued gets a fatal
 * INVALID_TXN_STATE.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define MAX_TOPICS 64
#define MAX_PARTS 65536
#define MAX_PRODUCERS 256
#define MAX_VALUE (1024 * 1024)
#define TXN_TIMEOUT_MS 60000

struct tpart {
	const char *topic;
	int32_t partition;
};

struct opts {
	const char *bootstrap;
	const char *prefix;
	struct tpart *parts;
	int nparts;
	double rate;
	double seconds;
	int rec_min, rec_max;
	int part_min, part_max;
	double abort_frac;
	int value_bytes;
	int producers;
	uint64_t seed;
	int id_header;	/* -I */
	int restart;	/* -R */
};

struct producer {
	const struct opts *o;
	int index;
	pthread_t thread;
	rd_kafka_t *rk;
	uint64_t rng;
	_Atomic int64_t committed, aborted, rec_committed, rec_aborted;
	_Atomic int64_t failed_commits;
	int64_t restarts;
	int error;
	char errmsg[512];
	double first_begin, last_end;
};

static volatile sig_atomic_t stopping;
static pthread_barrier_t started;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stopping)
		;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: cheap and deterministic for a seed */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* A uniform integer in [lo, hi]. */
static int rng_range(uint64_t *s, int lo, int hi)
{
	return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "txnload: %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

/* Records the first fatal error of pr (the producer stops). */
static void pr_fail(struct producer *pr, const char *what, const char *why)
{
	pr->error = 1;
	snprintf(pr->errmsg, sizeof(pr->errmsg), "producer %d: %s: %s",
	    pr->index, what, why);
}

/* Runs an abortable transactional call again while librdkafka calls its
 * error retriable; NULL on success, else the error (caller destroys). */
static rd_kafka_error_t *txn_end(rd_kafka_t *rk, int commit)
{
	rd_kafka_error_t *e;

	for (;;) {
		e = commit ? rd_kafka_commit_transaction(rk, TXN_TIMEOUT_MS) :
		    rd_kafka_abort_transaction(rk, TXN_TIMEOUT_MS);
		if (e == NULL || !rd_kafka_error_is_retriable(e))
			return e;
		rd_kafka_error_destroy(e);
	}
}

/* Aborts the open transaction of pr after a flush (see the top of the
 * file); 0 or -1 (pr failed). */
static int txn_abort(struct producer *pr)
{
	rd_kafka_error_t *e;

	rd_kafka_flush(pr->rk, TXN_TIMEOUT_MS);
	e = txn_end(pr->rk, 0);
	if (e != NULL) {
		pr_fail(pr, "abort_transaction", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		return -1;
	}
	return 0;
}

/* One transaction: 0 done (committed or aborted), -1 pr failed. */
static int txn_one(struct producer *pr, int64_t seq, char *value)
{
	const struct opts *o = pr->o;
	int chosen[64], nrec, npart, i, j, abort_it, keylen, vlen;
	char key[64], id[320];
	rd_kafka_error_t *e;

	nrec = rng_range(&pr->rng, o->rec_min, o->rec_max);
	npart = rng_range(&pr->rng, o->part_min, o->part_max);
	if (npart > nrec)
		npart = nrec;
	if (npart > o->nparts)
		npart = o->nparts;
	for (i = 0; i < npart; i++) {
		int c;

again:
		c = rng_range(&pr->rng, 0, o->nparts - 1);
		for (j = 0; j < i; j++)
			if (chosen[j] == c)
				goto again;
		chosen[i] = c;
	}
	abort_it = rng_unit(&pr->rng) < o->abort_frac;

	if ((e = rd_kafka_begin_transaction(pr->rk)) != NULL) {
		pr_fail(pr, "begin_transaction", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		return -1;
	}
	for (i = 0; i < nrec; i++) {
		const struct tpart *tp = &o->parts[chosen[i % npart]];
		rd_kafka_resp_err_t err;

		keylen = snprintf(key, sizeof(key), "%d-%" PRId64 "-%d", pr->index,
		    seq, i);
		vlen = snprintf(value, (size_t)o->value_bytes + 1, "%s %s ", key,
		    abort_it ? "abort" : "commit");
		if (vlen > o->value_bytes)
			vlen = o->value_bytes;
		for (j = vlen; j < o->value_bytes; j++)
			value[j] = (char)('a' + (rng_next(&pr->rng) >> 40) % 26);
		snprintf(id, sizeof(id), "%s/%s", o->prefix, key);
		for (;;) {
			if (o->id_header)
				err = rd_kafka_producev(pr->rk,
				    RD_KAFKA_V_TOPIC(tp->topic),
				    RD_KAFKA_V_PARTITION(tp->partition),
				    RD_KAFKA_V_KEY(key, (size_t)keylen),
				    RD_KAFKA_V_VALUE(value, (size_t)o->value_bytes),
				    RD_KAFKA_V_HEADER("id", id, -1),
				    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				    RD_KAFKA_V_END);
			else
				err = rd_kafka_producev(pr->rk,
				    RD_KAFKA_V_TOPIC(tp->topic),
				    RD_KAFKA_V_PARTITION(tp->partition),
				    RD_KAFKA_V_KEY(key, (size_t)keylen),
				    RD_KAFKA_V_VALUE(value, (size_t)o->value_bytes),
				    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				    RD_KAFKA_V_END);
			if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
				break;
			rd_kafka_poll(pr->rk, 10);
		}
		if (err) {
			/* The transaction cannot commit without this record. */
			fprintf(stderr, "txnload: producer %d: produce %s [%" PRId32
			    "]: %s; aborting\n", pr->index, tp->topic, tp->partition,
			    rd_kafka_err2str(err));
			abort_it = 1;
			break;
		}
	}
	rd_kafka_poll(pr->rk, 0);
	if (abort_it) {
		if (txn_abort(pr) < 0)
			return -1;
		atomic_fetch_add(&pr->aborted, 1);
		atomic_fetch_add(&pr->rec_aborted, nrec);
		return 0;
	}
	e = txn_end(pr->rk, 1);
	if (e == NULL) {
		atomic_fetch_add(&pr->committed, 1);
		atomic_fetch_add(&pr->rec_committed, nrec);
		return 0;
	}
	if (rd_kafka_error_txn_requires_abort(e)) {
		/* Refused by the broker (a timeout, a fenced write): abort and
		 * count it as aborted; the count of such commits is printed. */
		rd_kafka_error_destroy(e);
		atomic_fetch_add(&pr->failed_commits, 1);
		if (txn_abort(pr) < 0)
			return -1;
		atomic_fetch_add(&pr->aborted, 1);
		atomic_fetch_add(&pr->rec_aborted, nrec);
		return 0;
	}
	pr_fail(pr, "commit_transaction", rd_kafka_error_string(e));
	rd_kafka_error_destroy(e);
	return -1;
}

static rd_kafka_t *pr_new(const struct opts *o, int index);

/*
 * -R: pr failed; a new producer under the same transactional.id, its
 * init_transactions tried once a second until it works (or the run
 * stops).  0, or -1 when stopping.
 */
static int pr_restart(struct producer *pr)
{
	rd_kafka_error_t *e;

	fprintf(stderr, "txnload: %s; starting it again\n", pr->errmsg);
	rd_kafka_destroy(pr->rk);
	pr->rk = NULL;
	while (!stopping) {
		sleep_s(1);
		if ((pr->rk = pr_new(pr->o, pr->index)) == NULL)
			continue;
		e = rd_kafka_init_transactions(pr->rk, TXN_TIMEOUT_MS);
		if (e == NULL) {
			pr->error = 0;
			pr->restarts++;
			return 0;
		}
		fprintf(stderr, "txnload: producer %d: init_transactions: %s\n",
		    pr->index, rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		rd_kafka_destroy(pr->rk);	/* a fresh one next time */
		pr->rk = NULL;
	}
	return -1;
}

static void *pr_run(void *arg)
{
	struct producer *pr = arg;
	const struct opts *o = pr->o;
	rd_kafka_error_t *e;
	char *value;
	double t0, due, interval = 0, end;
	int64_t seq = 0;

	value = malloc((size_t)o->value_bytes + 1);
	if (value == NULL) {
		pr_fail(pr, "start", "out of memory");
		pthread_barrier_wait(&started);
		return NULL;
	}
	e = rd_kafka_init_transactions(pr->rk, TXN_TIMEOUT_MS);
	if (e != NULL) {
		pr_fail(pr, "init_transactions", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	}
	pthread_barrier_wait(&started);
	if (pr->error) {
		free(value);
		return NULL;
	}
	t0 = now_s();
	end = t0 + o->seconds;
	if (o->rate > 0) {
		interval = (double)o->producers / o->rate;
		/* Staggered, so the producers do not begin in step. */
		due = t0 + interval * pr->index / o->producers;
	} else {
		due = t0;
	}
	pr->first_begin = -1;
	while (!stopping && !pr->error) {
		double now = now_s();

		if (now >= end)
			break;
		if (interval > 0) {
			if (due > now) {
				sleep_s(due - now);
				if (stopping)
					break;
			} else if (now - due > 1.0) {
				due = now;  /* more than a second behind: drop it */
			}
			due += interval;
		}
		if (pr->first_begin < 0)
			pr->first_begin = now_s();
		if (txn_one(pr, seq++, value) < 0 &&
		    (!o->restart || pr_restart(pr) < 0))
			break;
		pr->last_end = now_s();
	}
	free(value);
	return NULL;
}

/* "A-B" or "A" into lo..hi (1 <= lo <= hi <= max); 0 or -1. */
static int parse_range(const char *s, int max, int *lo, int *hi)
{
	char *end;
	long a, b;

	errno = 0;
	a = strtol(s, &end, 10);
	b = a;
	if (*end == '-')
		b = strtol(end + 1, &end, 10);
	if (errno || *end != '\0' || a < 1 || b < a || b > max)
		return -1;
	*lo = (int)a;
	*hi = (int)b;
	return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end != '\0' || *out < lo || *out > hi ?
	    -1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: txnload -b BOOTSTRAP -t TOPIC[,TOPIC...] "
	    "[-p PARTITIONS] [-r TXN_PER_S] [-d SECONDS]\n"
	    "               [-n MIN-MAX] [-P MIN-MAX] [-a ABORT_FRACTION] "
	    "[-s VALUE_BYTES] [-i PRODUCERS]\n"
	    "               [-S SEED] [-x TXN_ID_PREFIX] [-I] [-R]\n");
	exit(2);
}

static void bad(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "txnload: %s %s: %s\n", opt, val, want);
	exit(2);
}

/* The partitions of topics (count from the broker when per_topic is 0). */
static int discover(struct opts *o, char **topics, int ntopics, int per_topic)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_t *rk;
	char err[256];
	int rc = -1;

	if (conf_set(c, "bootstrap.servers", o->bootstrap)) {
		rd_kafka_conf_destroy(c);
		return -1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (rk == NULL) {
		fprintf(stderr, "txnload: %s\n", err);
		return -1;
	}
	o->parts = calloc(MAX_PARTS, sizeof(*o->parts));
	if (o->parts == NULL)
		goto out;
	for (int t = 0; t < ntopics; t++) {
		int n = per_topic;

		if (n == 0) {
			const struct rd_kafka_metadata *md = NULL;
			rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topics[t], NULL);
			rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);

			rd_kafka_topic_destroy(rkt);
			if (e || md->topic_cnt != 1 || md->topics[0].err ||
			    md->topics[0].partition_cnt == 0) {
				fprintf(stderr, "txnload: metadata of topic %s: %s\n",
				    topics[t], e ? rd_kafka_err2str(e) :
				    md->topics[0].err ? rd_kafka_err2str(md->topics[0].err) :
				    "no partitions");
				if (md)
					rd_kafka_metadata_destroy(md);
				goto out;
			}
			n = md->topics[0].partition_cnt;
			rd_kafka_metadata_destroy(md);
		}
		for (int p = 0; p < n; p++) {
			if (o->nparts == MAX_PARTS) {
				fprintf(stderr, "txnload: more than %d partitions\n",
				    MAX_PARTS);
				goto out;
			}
			o->parts[o->nparts].topic = topics[t];
			o->parts[o->nparts++].partition = p;
		}
	}
	rc = 0;
out:
	rd_kafka_destroy(rk);
	return rc;
}

static rd_kafka_t *pr_new(const struct opts *o, int index)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	char id[256], tmo[32], err[256];
	rd_kafka_t *rk;

	snprintf(id, sizeof(id), "%s-%d", o->prefix, index);
	snprintf(tmo, sizeof(tmo), "%d", TXN_TIMEOUT_MS);
	if (conf_set(c, "bootstrap.servers", o->bootstrap) ||
	    conf_set(c, "transactional.id", id) ||
	    conf_set(c, "transaction.timeout.ms", tmo) ||
	    conf_set(c, "linger.ms", "1") ||
	    conf_set(c, "socket.nagle.disable", "true")) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (rk == NULL)
		fprintf(stderr, "txnload: producer %s: %s\n", id, err);
	return rk;
}

int main(int argc, char **argv)
{
	static struct opts o = { .rate = 0, .seconds = 30, .rec_min = 1,
		.rec_max = 50, .part_min = 1, .part_max = 6, .abort_frac = 0.2,
		.value_bytes = 100, .producers = 1, .seed = 1 };
	static struct producer prs[MAX_PRODUCERS];
	char *topics_arg = NULL, *topics[MAX_TOPICS], prefix[64], *end;
	int ntopics = 0, per_topic = 0, opt, rc = 0, nerr = 0;
	int64_t c = 0, a = 0, rec_c = 0, rec_a = 0, fc = 0, last_total = 0;
	int64_t restarts = 0;
	double t0, t1, first = -1, last = -1, next_report, elapsed;
	struct sigaction sa;

	snprintf(prefix, sizeof(prefix), "txnload-%ld", (long)getpid());
	o.prefix = prefix;
	while ((opt = getopt(argc, argv, "b:t:p:r:d:n:P:a:s:i:S:x:IR")) != -1) {
		switch (opt) {
		case 'b': o.bootstrap = optarg; break;
		case 't': topics_arg = optarg; break;
		case 'p':
			per_topic = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || per_topic < 1 || per_topic > MAX_PARTS)
				bad("-p", optarg, "want a partition count of 1 or more");
			break;
		case 'r':
			if (parse_double(optarg, 0, 1e7, &o.rate) < 0)
				bad("-r", optarg, "want transactions a second, 0 or more "
				    "(0: as fast as possible)");
			break;
		case 'd':
			if (parse_double(optarg, 0.001, 1e6, &o.seconds) < 0)
				bad("-d", optarg, "want a duration in seconds above 0");
			break;
		case 'n':
			if (parse_range(optarg, 100000, &o.rec_min, &o.rec_max) < 0)
				bad("-n", optarg, "want records per transaction as MIN-MAX, "
				    "1 <= MIN <= MAX <= 100000");
			break;
		case 'P':
			if (parse_range(optarg, 64, &o.part_min, &o.part_max) < 0)
				bad("-P", optarg, "want partitions per transaction as "
				    "MIN-MAX, 1 <= MIN <= MAX <= 64");
			break;
		case 'a':
			if (parse_double(optarg, 0, 1, &o.abort_frac) < 0)
				bad("-a", optarg, "want an abort fraction from 0 to 1");
			break;
		case 's':
			o.value_bytes = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || o.value_bytes < 32 ||
			    o.value_bytes > MAX_VALUE)
				bad("-s", optarg, "want a value size from 32 to 1048576 "
				    "bytes");
			break;
		case 'i':
			o.producers = (int)strtol(optarg, &end, 10);
			if (*end != '\0' || o.producers < 1 ||
			    o.producers > MAX_PRODUCERS)
				bad("-i", optarg, "want 1 to 256 producers");
			break;
		case 'S':
			o.seed = strtoull(optarg, &end, 10);
			if (*end != '\0' || *optarg == '\0')
				bad("-S", optarg, "want a decimal seed");
			break;
		case 'x': o.prefix = optarg; break;
		case 'I': o.id_header = 1; break;
		case 'R': o.restart = 1; break;
		default: usage();
		}
	}
	if (optind != argc || o.bootstrap == NULL || topics_arg == NULL)
		usage();
	for (char *save = NULL, *t = strtok_r(topics_arg, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save)) {
		if (ntopics == MAX_TOPICS)
			bad("-t", "...", "at most 64 topics");
		topics[ntopics++] = t;
	}
	if (ntopics == 0)
		bad("-t", topics_arg, "want at least one topic");
	if (discover(&o, topics, ntopics, per_topic) < 0)
		return 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	pthread_barrier_init(&started, NULL, (unsigned)o.producers + 1);
	for (int i = 0; i < o.producers; i++) {
		prs[i].o = &o;
		prs[i].index = i;
		prs[i].rng = o.seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i + 1;
		if ((prs[i].rk = pr_new(&o, i)) == NULL)
			return 1;
	}
	for (int i = 0; i < o.producers; i++)
		if (pthread_create(&prs[i].thread, NULL, pr_run, &prs[i]) != 0) {
			fprintf(stderr, "txnload: cannot start producer thread %d\n", i);
			return 1;
		}
	pthread_barrier_wait(&started);
	t0 = now_s();
	for (int i = 0; i < o.producers; i++)
		if (prs[i].error)
			nerr++;
	printf("{\"started\":true,\"producers\":%d,\"ready\":%d,"
	    "\"partitions\":%d}\n", o.producers, o.producers - nerr, o.nparts);
	fflush(stdout);

	/* Progress on stderr every 5 s; the threads stop by themselves. */
	next_report = t0 + 5;
	while (!stopping && now_s() < t0 + o.seconds) {
		sleep_s(0.2);
		if (now_s() >= next_report) {
			int64_t total = 0;

			for (int i = 0; i < o.producers; i++)
				total += atomic_load(&prs[i].committed) +
				    atomic_load(&prs[i].aborted);
			fprintf(stderr, "txnload: %.0f s: %" PRId64 " transactions "
			    "(%.0f/s over the last 5 s)\n", now_s() - t0, total,
			    (double)(total - last_total) / 5.0);
			last_total = total;
			next_report += 5;
		}
	}
	nerr = 0;
	for (int i = 0; i < o.producers; i++) {
		pthread_join(prs[i].thread, NULL);
		if (prs[i].error) {
			fprintf(stderr, "txnload: %s\n", prs[i].errmsg);
			nerr++;
		}
		c += prs[i].committed;
		a += prs[i].aborted;
		rec_c += prs[i].rec_committed;
		rec_a += prs[i].rec_aborted;
		fc += prs[i].failed_commits;
		restarts += prs[i].restarts;
		if (prs[i].first_begin > 0 && (first < 0 || prs[i].first_begin < first))
			first = prs[i].first_begin;
		if (prs[i].last_end > last)
			last = prs[i].last_end;
	}
	t1 = now_s();
	for (int i = 0; i < o.producers; i++)
		if (prs[i].rk != NULL)
			rd_kafka_destroy(prs[i].rk);
	elapsed = first > 0 && last > first ? last - first : 0;
	printf("{\"transactions_committed\":%" PRId64 ",\"transactions_aborted\":%"
	    PRId64 ",\"records_committed\":%" PRId64 ",\"records_aborted\":%" PRId64
	    ",\"failed_commits\":%" PRId64 ",\"seconds\":%.3f,\"wall_s\":%.3f,"
	    "\"txn_per_s\":%.1f,\"target_txn_per_s\":%.1f,\"producers\":%d,"
	    "\"partitions\":%d,\"errors\":%d,\"restarts\":%" PRId64 "}\n", c, a,
	    rec_c, rec_a, fc, elapsed, t1 - t0,
	    elapsed > 0 ? (double)(c + a) / elapsed : 0.0, o.rate, o.producers,
	    o.nparts, nerr, restarts);
	if (nerr)
		rc = 1;
	free(o.parts);
	return rc;
}
