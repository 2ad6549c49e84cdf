/*
 * kclient_probe: look at a Kafka cluster through kcluster and print what it
 * saw as one JSON object on stdout.  A test tool for test_kcluster.py.
 *
 *   kclient_probe -b BOOTSTRAP [-n NAME] [-t TIMEOUT_MS] [-X prop=value]...
 *                 [-q TOPIC]... [-c] [-v]
 *
 * Output on success (exit 0):
 *   {"cluster": NAME, "cluster_id": ..., "controller_id": N,
 *    "metadata_version": V, "brokers": [{"node_id", "host", "port"}...],
 *    "topics": [{"name", "partitions", "internal", "error",
 *                "leaders": [...], "epochs": [...]}...],
 *    "lookups": {TOPIC: partitions or -1},
 *    "connections": [{"node_id", "ready", "error", "apiversions_version",
 *                     "metadata_max"}]}            (with -c)
 * On failure (exit 1): {"error": "...", "kind": "transport|timeout|..."}
 * and the same message on stderr.  Usage errors exit 2.
 *
 * -q TOPIC looks the topic up in the metadata (never by asking the broker
 * about it by name); -c opens a connection to every broker by node id and
 * waits for each to be ready or fail.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "kcluster.h"
#include "kconn.h"
#include "log.h"

#define MAX_LOOKUPS 32
#define MAX_CONNS 64

struct probe {
	struct event_base *base;
	struct kcluster *cl;
	int done;
	int rc;
	const char *lookups[MAX_LOOKUPS];
	int nlookups;
	int check_conns;
	struct {
		int32_t node;
		struct kconn *c;
		int settled;
		int ready;
		char error[512];
	} conns[MAX_CONNS];
	int nconns, nsettled;
};

static void json_str(const char *s)
{
	putchar('"');
	for (; s != NULL && *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void fail_out(struct probe *p, int err, const char *errstr)
{
	printf("{\"error\": ");
	json_str(errstr);
	printf(", \"kind\": ");
	json_str(kconn_err_name(err));
	printf("}\n");
	fprintf(stderr, "kclient_probe: %s\n", errstr);
	p->rc = 1;
	p->done = 1;
	event_base_loopbreak(p->base);
}

static void print_result(struct probe *p, const struct kcluster_topic_info *t,
    size_t n)
{
	struct kcluster *cl = p->cl;
	size_t nb = kcluster_broker_count(cl);

	printf("{\"cluster\": ");
	json_str(kcluster_name(cl));
	printf(", \"cluster_id\": ");
	if (kcluster_cluster_id(cl) != NULL)
		json_str(kcluster_cluster_id(cl));
	else
		printf("null");
	printf(", \"controller_id\": %d, \"metadata_version\": %d",
	    kcluster_controller_id(cl), kcluster_metadata_version(cl));
	printf(", \"brokers\": [");
	for (size_t i = 0; i < nb; i++) {
		int32_t node;
		const char *host, *rack;
		int port;
		kcluster_broker_at(cl, i, &node, &host, &port, &rack);
		printf("%s{\"node_id\": %d, \"host\": ", i ? ", " : "", node);
		json_str(host);
		printf(", \"port\": %d}", port);
	}
	printf("], \"topics\": [");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"name\": ", i ? ", " : "");
		json_str(t[i].name);
		printf(", \"partitions\": %d, \"internal\": %s, \"error\": %d, "
		    "\"leaders\": [", t[i].partitions,
		    t[i].internal ? "true" : "false", t[i].error);
		for (int32_t j = 0; j < t[i].partitions; j++)
			printf("%s%d", j ? ", " : "",
			    kcluster_leader(cl, t[i].name, j, NULL));
		printf("], \"epochs\": [");
		for (int32_t j = 0; j < t[i].partitions; j++) {
			int32_t epoch;
			kcluster_leader(cl, t[i].name, j, &epoch);
			printf("%s%d", j ? ", " : "", epoch);
		}
		printf("]}");
	}
	printf("], \"lookups\": {");
	for (int i = 0; i < p->nlookups; i++) {
		printf("%s", i ? ", " : "");
		json_str(p->lookups[i]);
		printf(": %d", kcluster_topic_partitions(cl, p->lookups[i]));
	}
	printf("}");
	if (p->check_conns) {
		printf(", \"connections\": [");
		for (int i = 0; i < p->nconns; i++) {
			struct kconn *c = p->conns[i].c;
			printf("%s{\"node_id\": %d, \"ready\": %s, \"error\": ",
			    i ? ", " : "", p->conns[i].node,
			    p->conns[i].ready ? "true" : "false");
			json_str(p->conns[i].error);
			printf(", \"apiversions_version\": %d, "
			    "\"metadata_max\": %d}",
			    c && p->conns[i].ready ? kconn_apiversions_version(c) :
			    -1, c && p->conns[i].ready ?
			    kconn_pick_version(c, 3, 0, 32767) : -1);
		}
		printf("]");
	}
	printf("}\n");
	fflush(stdout);
}

/* -c waits for every broker connection's handshake to finish.  kcluster
 * keeps connection events to itself, so this polls the states on a short
 * timer, bounded by the probe's global deadline. */
static void conn_poll_cb(evutil_socket_t fd, short what, void *arg);

static int conns_settle(struct probe *p)
{
	for (int i = 0; i < p->nconns; i++) {
		struct kconn *c = p->conns[i].c;
		if (p->conns[i].settled || c == NULL)
			continue;
		if (kconn_is_ready(c)) {
			p->conns[i].ready = 1;
			p->conns[i].settled = 1;
			p->nsettled++;
		} else if (kconn_is_closed(c)) {
			snprintf(p->conns[i].error, sizeof(p->conns[i].error),
			    "closed before ready");
			p->conns[i].settled = 1;
			p->nsettled++;
		}
	}
	return p->nsettled == p->nconns;
}

static const struct kcluster_topic_info *g_topics;
static size_t g_ntopics;
static struct kcluster_topic_info *g_copy;

static void topics_cb(struct kcluster *cl, int err, const char *errstr,
    const struct kcluster_topic_info *t, size_t n, void *arg)
{
	struct probe *p = arg;
	struct timeval tv = { 0, 20000 };

	if (err != KCONN_E_OK) {
		fail_out(p, err, errstr);
		return;
	}
	if (!p->check_conns) {
		print_result(p, t, n);
		p->done = 1;
		event_base_loopbreak(p->base);
		return;
	}
	/* Keep a copy: the names stay valid until the next refresh. */
	g_copy = calloc(n + 1, sizeof(*g_copy));
	if (g_copy == NULL) {
		fail_out(p, KCONN_E_TRANSPORT, "out of memory");
		return;
	}
	memcpy(g_copy, t, n * sizeof(*t));
	g_topics = g_copy;
	g_ntopics = n;
	for (size_t i = 0; i < kcluster_broker_count(cl) && i < MAX_CONNS; i++) {
		const char *host, *rack;
		int port;
		int32_t node;
		kcluster_broker_at(cl, i, &node, &host, &port, &rack);
		p->conns[i].node = node;
		p->conns[i].c = kcluster_broker_conn(cl, node, p->conns[i].error,
		    sizeof(p->conns[i].error));
		if (p->conns[i].c == NULL) {
			p->conns[i].settled = 1;
			p->nsettled++;
		}
		p->nconns++;
	}
	event_base_once(p->base, -1, EV_TIMEOUT, conn_poll_cb, p, &tv);
}

/* Polls the connections' state; bounded by the probe's global deadline. */
static void conn_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct probe *p = arg;
	struct timeval tv = { 0, 20000 };

	if (conns_settle(p)) {
		print_result(p, g_topics, g_ntopics);
		p->done = 1;
		event_base_loopbreak(p->base);
		return;
	}
	event_base_once(p->base, -1, EV_TIMEOUT, conn_poll_cb, p, &tv);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct probe *p = arg;

	fail_out(p, KCONN_E_TIMEOUT, "kclient_probe: no answer before the "
	    "probe's own deadline");
}

static void usage(void)
{
	fprintf(stderr, "usage: kclient_probe -b BOOTSTRAP [-n NAME] "
	    "[-t TIMEOUT_MS] [-X prop=value]... [-q TOPIC]... [-c] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct kcluster_config cfg;
	struct probe p;
	struct evdns_base *dns = NULL;
	struct event *deadline;
	struct timeval tv;
	char err[1024];
	const char *name = "source";
	int timeout_ms = 10000, opt, verbose = 0;
	char *props[64];
	int nprops = 0;
	const char *bootstrap = NULL;

	memset(&p, 0, sizeof(p));
	while ((opt = getopt(argc, argv, "b:n:t:X:q:cv")) != -1) {
		switch (opt) {
		case 'b':
			bootstrap = optarg;
			break;
		case 'n':
			name = optarg;
			break;
		case 't':
			timeout_ms = atoi(optarg);
			if (timeout_ms <= 0)
				usage();
			break;
		case 'X':
			if (nprops == (int)(sizeof(props) / sizeof(props[0])) ||
			    strchr(optarg, '=') == NULL)
				usage();
			props[nprops++] = optarg;
			break;
		case 'q':
			if (p.nlookups == MAX_LOOKUPS)
				usage();
			p.lookups[p.nlookups++] = optarg;
			break;
		case 'c':
			p.check_conns = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	if (bootstrap == NULL || optind != argc)
		usage();
	log_init("kclient_probe", verbose ? LOG_LVL_DEBUG : LOG_LVL_ERROR, 0);

	kcluster_config_init(&cfg, name);
	cfg.metadata_timeout_ms = timeout_ms;
	cfg.conn.connect_timeout_ms = timeout_ms;
	cfg.conn.request_timeout_ms = timeout_ms;
	cfg.metadata_refresh_ms = 0;
	if (kcluster_config_set(&cfg, "bootstrap.servers", bootstrap, err,
		sizeof(err)) != 0)
		goto cfgfail;
	for (int i = 0; i < nprops; i++) {
		char *eq = strchr(props[i], '=');
		int rc;
		*eq = '\0';
		rc = kcluster_config_set(&cfg, props[i], eq + 1, err, sizeof(err));
		if (rc == 1)
			snprintf(err, sizeof(err), "unknown property %s", props[i]);
		if (rc != 0)
			goto cfgfail;
	}
	if (kcluster_config_prepare(&cfg, err, sizeof(err)) != 0)
		goto cfgfail;

	p.base = event_base_new();
	if (p.base == NULL) {
		fprintf(stderr, "kclient_probe: event_base_new failed\n");
		return 1;
	}
	dns = evdns_base_new(p.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	p.cl = kcluster_new(p.base, dns, &cfg, err, sizeof(err));
	if (p.cl == NULL)
		goto cfgfail;
	kcluster_list_topics(p.cl, topics_cb, &p);
	deadline = evtimer_new(p.base, deadline_cb, &p);
	tv.tv_sec = timeout_ms / 1000 + 5;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(deadline, &tv);
	while (!p.done)
		event_base_loop(p.base, EVLOOP_ONCE);
	kcluster_free(p.cl);
	event_base_loop(p.base, EVLOOP_NONBLOCK); /* deferred frees */
	event_free(deadline);
	if (dns != NULL)
		evdns_base_free(dns, 0);
	event_base_free(p.base);
	free(g_copy);
	kcluster_config_fini(&cfg);
	return p.rc;
cfgfail:
	printf("{\"error\": ");
	json_str(err);
	printf(", \"kind\": \"config\"}\n");
	fprintf(stderr, "kclient_probe: %s\n", err);
	kcluster_config_fini(&cfg);
	return 2;
}
