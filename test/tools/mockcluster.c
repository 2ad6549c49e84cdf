/*
 * mockcluster: librdkafka's mock cluster as a standalone test peer.
 *
 * Starts K clusters of N brokers each inside this process (the mock's
 * control calls only work from the process that owns the clusters, see the
 * mock notes section 11), describes them as one line of JSON on stdout and
 * in the file given with -o (written atomically), then serves line commands
 * on stdin, answering each with "ok" or "error <reason>" on stdout:
 *
 *   topic C NAME PARTITIONS        create; partition p is led by broker (p % N) + 1
 *   topic C NAME PARTITIONS random create; the mock's own (random) leaders: no
 *                                  per-partition pinning, which costs ~75 ms
 *                                  a partition (the scale bench's 10,000)
 *   leader C TOPIC P BROKER        move a leader (-1: leaderless)
 *   topicerr C TOPIC ERR           the topic's error in Metadata answers (0: none)
 *   down C BROKER / up C BROKER    close and refuse connections / listen again
 *   rtt C BROKER MS                delay every response of a broker (-1: all)
 *   err C APIKEY ERR [ERR...]      next requests of APIKEY on any broker fail
 *   errrtt C BROKER APIKEY ERR MS  next request of APIKEY on BROKER: error and delay
 *   apiversion C APIKEY MIN MAX    narrow an ApiKey's versions (-1 -1: disable)
 *   clear C APIKEY                 drop the queued errors of APIKEY
 *   quit                           (as is EOF on stdin: it dies with its parent)
 *
 * Error codes are numbers: Kafka's (6 = NOT_LEADER_OR_FOLLOWER) or
 * librdkafka's negative ones (-195 = drop the connection).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MAX_CLUSTERS 8
#define MAX_BROKERS 16
#define MAX_ARGS 40
#define LINE_MAX_LEN 4096

struct mock {
	rd_kafka_t *owner;
	int nclusters, nbrokers;
	rd_kafka_mock_cluster_t *mc[MAX_CLUSTERS];
	char cluster_id[MAX_CLUSTERS][128];
};

static void usage(void)
{
	fprintf(stderr,
	    "usage: mockcluster [-k CLUSTERS] [-n BROKERS] [-o FILE] [-v]\n"
	    "  -k  clusters to start (1..%d, default 2)\n"
	    "  -n  brokers per cluster (1..%d, default 3)\n"
	    "  -o  also write the JSON description to FILE (atomically)\n"
	    "  -v  let librdkafka log (debug=mock for every request)\n",
	    MAX_CLUSTERS, MAX_BROKERS);
	exit(2);
}

static int reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int reply_error(const char *fmt, ...)
{
	va_list ap;

	fputs("error ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	return -1;
}

static int reply_ok(void)
{
	fputs("ok\n", stdout);
	fflush(stdout);
	return 0;
}

/* A whole-token integer within [lo, hi]; -1 with a message otherwise. */
static int parse_int(const char *s, long lo, long hi, const char *what, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return reply_error("%s '%s': expected an integer in [%ld, %ld]", what, s, lo, hi);
	*out = v;
	return 0;
}

static int parse_cluster(const struct mock *m, const char *s, rd_kafka_mock_cluster_t **mc)
{
	long c;

	if (parse_int(s, 0, m->nclusters - 1, "cluster", &c) < 0)
		return -1;
	*mc = m->mc[c];
	return 0;
}

static int parse_broker(const struct mock *m, const char *s, int allow_all, long *b)
{
	if (parse_int(s, allow_all ? -1 : 1, m->nbrokers, "broker", b) < 0)
		return -1;
	if (*b == 0)
		return reply_error("broker 0 does not exist (brokers are 1..%d%s)",
		    m->nbrokers, allow_all ? ", or -1 for all" : "");
	return 0;
}

static int check_err(rd_kafka_resp_err_t e, const char *what)
{
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
		return reply_error("%s: %s", what, rd_kafka_err2str(e));
	return reply_ok();
}

static int want_args(int argc, int lo, int hi, const char *syntax)
{
	if (argc < lo || argc > hi)
		return reply_error("usage: %s", syntax);
	return 0;
}

/* Runs one command line; answers on stdout.  Returns 1 for quit. */
static int run_command(struct mock *m, char *line)
{
	char *argv[MAX_ARGS + 1], *save = NULL, *tok;
	int argc = 0;
	rd_kafka_mock_cluster_t *mc;
	long a, b, c, d;

	for (tok = strtok_r(line, " \t\r\n", &save); tok != NULL;
	     tok = strtok_r(NULL, " \t\r\n", &save)) {
		if (argc == MAX_ARGS) {
			reply_error("more than %d words", MAX_ARGS);
			return 0;
		}
		argv[argc++] = tok;
	}
	if (argc == 0) {
		reply_error("empty command");
		return 0;
	}
	if (strcmp(argv[0], "quit") == 0) {
		reply_ok();
		return 1;
	}
	if (strcmp(argv[0], "topic") == 0) {
		if (want_args(argc, 4, 5, "topic C NAME PARTITIONS [random]") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[3], 1, 10000, "partition count", &a) < 0)
			return 0;
		if (argc == 5 && strcmp(argv[4], "random") != 0) {
			reply_error("topic: the fifth word must be \"random\", not \"%s\"",
			    argv[4]);
			return 0;
		}
		rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, argv[2], (int)a,
		    m->nbrokers < 3 ? m->nbrokers : 3);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
			reply_error("topic %s: %s", argv[2], rd_kafka_err2str(e));
			return 0;
		}
		/* The mock picks leaders at random; pin them so tests repeat. */
		for (long p = 0; p < a && (argc < 5 || strcmp(argv[4], "random") != 0); p++) {
			e = rd_kafka_mock_partition_set_leader(mc, argv[2], (int32_t)p,
			    (int32_t)(p % m->nbrokers) + 1);
			if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
				reply_error("topic %s partition %ld leader: %s", argv[2], p,
				    rd_kafka_err2str(e));
				return 0;
			}
		}
		reply_ok();
	} else if (strcmp(argv[0], "topicerr") == 0) {
		if (want_args(argc, 4, 4, "topicerr C TOPIC ERR") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[3], 0, 32767, "error code", &a) < 0)
			return 0;
		rd_kafka_mock_topic_set_error(mc, argv[2], (rd_kafka_resp_err_t)a);
		reply_ok();
	} else if (strcmp(argv[0], "leader") == 0) {
		if (want_args(argc, 5, 5, "leader C TOPIC P BROKER") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[3], 0, INT32_MAX, "partition", &a) < 0 ||
		    parse_broker(m, argv[4], 1, &b) < 0)
			return 0;
		check_err(rd_kafka_mock_partition_set_leader(mc, argv[2], (int32_t)a, (int32_t)b),
		    "leader");
	} else if (strcmp(argv[0], "down") == 0 || strcmp(argv[0], "up") == 0) {
		int down = argv[0][0] == 'd';

		if (want_args(argc, 3, 3, down ? "down C BROKER" : "up C BROKER") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 || parse_broker(m, argv[2], 0, &b) < 0)
			return 0;
		check_err(down ? rd_kafka_mock_broker_set_down(mc, (int32_t)b)
			       : rd_kafka_mock_broker_set_up(mc, (int32_t)b), argv[0]);
	} else if (strcmp(argv[0], "rtt") == 0) {
		if (want_args(argc, 4, 4, "rtt C BROKER MS") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 || parse_broker(m, argv[2], 1, &b) < 0 ||
		    parse_int(argv[3], 0, 3600000, "rtt ms", &a) < 0)
			return 0;
		check_err(rd_kafka_mock_broker_set_rtt(mc, (int32_t)b, (int)a), "rtt");
	} else if (strcmp(argv[0], "err") == 0) {
		rd_kafka_resp_err_t errs[MAX_ARGS];

		if (want_args(argc, 4, MAX_ARGS, "err C APIKEY ERR [ERR...]") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[2], 0, INT16_MAX, "api key", &a) < 0)
			return 0;
		for (int i = 3; i < argc; i++) {
			if (parse_int(argv[i], -200, 1000, "error code", &b) < 0)
				return 0;
			errs[i - 3] = (rd_kafka_resp_err_t)b;
		}
		rd_kafka_mock_push_request_errors_array(mc, (int16_t)a, (size_t)(argc - 3), errs);
		reply_ok();
	} else if (strcmp(argv[0], "errrtt") == 0) {
		if (want_args(argc, 6, 6, "errrtt C BROKER APIKEY ERR MS") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 || parse_broker(m, argv[2], 0, &b) < 0 ||
		    parse_int(argv[3], 0, INT16_MAX, "api key", &a) < 0 ||
		    parse_int(argv[4], -200, 1000, "error code", &c) < 0 ||
		    parse_int(argv[5], 0, 3600000, "rtt ms", &d) < 0)
			return 0;
		check_err(rd_kafka_mock_broker_push_request_error_rtts(mc, (int32_t)b, (int16_t)a, 1,
		    (rd_kafka_resp_err_t)c, (int)d), "errrtt");
	} else if (strcmp(argv[0], "apiversion") == 0) {
		if (want_args(argc, 5, 5, "apiversion C APIKEY MIN MAX") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[2], 0, INT16_MAX, "api key", &a) < 0 ||
		    parse_int(argv[3], -1, INT16_MAX, "min version", &b) < 0 ||
		    parse_int(argv[4], -1, INT16_MAX, "max version", &c) < 0)
			return 0;
		if ((b == -1) != (c == -1) || b > c) {
			reply_error("versions %ld..%ld: give MIN <= MAX, or -1 -1 to disable", b, c);
			return 0;
		}
		check_err(rd_kafka_mock_set_apiversion(mc, (int16_t)a, (int16_t)b, (int16_t)c),
		    "apiversion");
	} else if (strcmp(argv[0], "clear") == 0) {
		if (want_args(argc, 3, 3, "clear C APIKEY") < 0 ||
		    parse_cluster(m, argv[1], &mc) < 0 ||
		    parse_int(argv[2], 0, INT16_MAX, "api key", &a) < 0)
			return 0;
		rd_kafka_mock_clear_request_errors(mc, (int16_t)a);
		reply_ok();
	} else {
		reply_error("unknown command '%s' (topic, leader, down, up, rtt, err, errrtt, "
		    "apiversion, clear, quit)", argv[0]);
	}
	return 0;
}

/* The cluster id, from a Metadata round trip with a throwaway client. */
static void fetch_cluster_id(const char *bootstrap, char *out, size_t outlen)
{
	char errstr[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_t *rk;
	char *id;

	out[0] = '\0';
	if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
		rd_kafka_conf_destroy(conf);
		return;
	}
	if ((rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr))) == NULL) {
		rd_kafka_conf_destroy(conf);
		return;
	}
	if ((id = rd_kafka_clusterid(rk, 10000)) != NULL) {
		snprintf(out, outlen, "%s", id);
		rd_kafka_mem_free(rk, id);
	}
	rd_kafka_destroy(rk);
}

/* JSON string body: the ids and addresses here are plain ASCII, escape anyway. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void describe(const struct mock *m, FILE *f)
{
	fprintf(f, "{\"brokers\": %d, \"clusters\": [", m->nbrokers);
	for (int c = 0; c < m->nclusters; c++) {
		fprintf(f, "%s{\"index\": %d, \"bootstrap\": ", c ? ", " : "", c);
		json_str(f, rd_kafka_mock_cluster_bootstraps(m->mc[c]));
		fputs(", \"cluster_id\": ", f);
		if (m->cluster_id[c][0])
			json_str(f, m->cluster_id[c]);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fputs("]}\n", f);
}

static int write_atomically(const struct mock *m, const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
		fprintf(stderr, "mockcluster: output path %s is too long\n", path);
		return -1;
	}
	if ((f = fopen(tmp, "w")) == NULL) {
		fprintf(stderr, "mockcluster: cannot create %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	describe(m, f);
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
		fprintf(stderr, "mockcluster: cannot write %s: %s\n", tmp, strerror(errno));
		fclose(f);
		unlink(tmp);
		return -1;
	}
	fclose(f);
	if (rename(tmp, path) != 0) {
		fprintf(stderr, "mockcluster: cannot rename %s to %s: %s\n", tmp, path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct mock m = { .nclusters = 2, .nbrokers = 3 };
	const char *outpath = NULL;
	char errstr[512], line[LINE_MAX_LEN];
	rd_kafka_conf_t *conf;
	int opt, verbose = 0, rc = 1;
	long v;

	while ((opt = getopt(argc, argv, "k:n:o:vh")) != -1) {
		char *end;

		switch (opt) {
		case 'k':
		case 'n':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 ||
			    v > (opt == 'k' ? MAX_CLUSTERS : MAX_BROKERS)) {
				fprintf(stderr, "mockcluster: -%c %s: expected 1..%d\n", opt, optarg,
				    opt == 'k' ? MAX_CLUSTERS : MAX_BROKERS);
				return 2;
			}
			if (opt == 'k')
				m.nclusters = (int)v;
			else
				m.nbrokers = (int)v;
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	signal(SIGPIPE, SIG_IGN); /* a dead parent shows up as EOF or EPIPE */
#ifdef HAVE_SYS_PRCTL_H
	/* and even if something else holds our stdin open, die with the parent */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif

	conf = rd_kafka_conf_new();
	/* The owner handle only hosts the clusters; it never connects anywhere. */
	if (rd_kafka_conf_set(conf, "log_level", verbose ? "7" : "3", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
	    (verbose && rd_kafka_conf_set(conf, "debug", "mock", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)) {
		fprintf(stderr, "mockcluster: %s\n", errstr);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	if ((m.owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr))) == NULL) {
		fprintf(stderr, "mockcluster: rd_kafka_new: %s\n", errstr);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	for (int c = 0; c < m.nclusters; c++) {
		if ((m.mc[c] = rd_kafka_mock_cluster_new(m.owner, m.nbrokers)) == NULL) {
			fprintf(stderr, "mockcluster: cannot start cluster %d of %d brokers\n", c, m.nbrokers);
			goto out;
		}
		fetch_cluster_id(rd_kafka_mock_cluster_bootstraps(m.mc[c]), m.cluster_id[c],
		    sizeof(m.cluster_id[c]));
	}
	if (outpath != NULL && write_atomically(&m, outpath) < 0)
		goto out;
	describe(&m, stdout);
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin) != NULL) {
		size_t n = strlen(line);

		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			int ch;

			while ((ch = getchar()) != EOF && ch != '\n')
				;
			reply_error("command longer than %d bytes", LINE_MAX_LEN - 2);
			continue;
		}
		if (run_command(&m, line) == 1)
			break;
	}
	rc = 0;
out:
	for (int c = 0; c < m.nclusters; c++)
		if (m.mc[c] != NULL)
			rd_kafka_mock_cluster_destroy(m.mc[c]);
	rd_kafka_destroy(m.owner);
	return rc;
}
