/*
 * kgroup_probe: one member of a mirrord group (lib/kgroup) that prints
 * what happens to it, one line per event on stdout.  A test tool for
 * test_kgroup_kafka.py.
 *
 *   kgroup_probe -b BOOTSTRAP -g GROUP [-i INSTANCE_ID] [-m METADATA]
 *                [-s SESSION_MS] [-r REBALANCE_MS] [-t HEARTBEAT_MS]
 *                [-X prop=value]... [-v]
 *
 * Lines:
 *   joined gen=N leader=0|1 member=M leader_member=L members=A,B,C
 *       metas=a,b,c assignment=S
 *     members/metas: the instance ids and metadata of the JoinGroup
 *     answer, sorted by instance id (the leader only; "-" otherwise).
 *     S is what this member got in SyncGroup: the leader gives each member
 *     "gen=N|leader=I|members=A,B,C|you=X" (its own instance id I, every
 *     member's instance id, the receiver's X).
 *   revoked why=TEXT (the rest of the line)
 *   lease held=0|1
 *     the membership's lease ran out (0), or was renewed after it had
 *     (1); renewals while it runs print nothing.
 *   left
 * SIGTERM/SIGINT leave the group (LeaveGroup), print "left", exit 0.
 * Diagnostics go to stderr (-v: debug).  Usage errors exit 2.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "compat.h"
#include "kcluster.h"
#include "kconn.h"
#include "kgroup.h"
#include "log.h"

struct probe {
	struct event_base *base;
	struct kgroup *g;
	const char *instance;
	int done;
	int lapsed;
};

static int cmp_member(const void *a, const void *b)
{
	const struct kgroup_member *x = a, *y = b;
	int c = strcmp(x->instance_id, y->instance_id);

	return c != 0 ? c : strcmp(x->member_id, y->member_id);
}

/* The members sorted by instance id (a copy of the array, same strings). */
static struct kgroup_member *sorted(const struct kgroup_member *m, size_t n)
{
	struct kgroup_member *s = calloc(n + 1, sizeof(*s));

	if (s == NULL)
		abort();
	if (n > 0) { /* m is NULL for a follower */
		memcpy(s, m, n * sizeof(*m));
		qsort(s, n, sizeof(*s), cmp_member);
	}
	return s;
}

static void print_names(const struct kgroup_member *m, size_t n, int metas)
{
	for (size_t i = 0; i < n; i++) {
		if (metas)
			printf("%s%.*s", i ? "," : "", (int)m[i].meta_len,
			    m[i].meta != NULL ? (const char *)m[i].meta : "");
		else
			printf("%s%s", i ? "," : "", m[i].instance_id);
	}
	if (n == 0)
		printf("-");
}

static int on_assign(void *arg, int32_t gen, const struct kgroup_member *m,
    size_t n, uint8_t **out, size_t *outlen)
{
	struct probe *p = arg;
	struct kgroup_member *s = sorted(m, n);
	char names[4096];
	size_t used = 0;

	names[0] = '\0';
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(names + used, used < sizeof(names) ?
		    sizeof(names) - used : 0, "%s%s", i ? "," : "",
		    s[i].instance_id);
	free(s);
	if (used >= sizeof(names))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char *a;
		int len = asprintf(&a, "gen=%d|leader=%s|members=%s|you=%s",
		    (int)gen, p->instance, names, m[i].instance_id);

		if (len < 0)
			return -1;
		out[i] = (uint8_t *)a;
		outlen[i] = (size_t)len;
	}
	return 0;
}

static void on_joined(void *arg, int32_t gen, const char *member_id,
    const char *leader_member_id, int is_leader,
    const struct kgroup_member *members, size_t n,
    const uint8_t *assignment, size_t len)
{
	struct kgroup_member *s = sorted(members, n);

	(void)arg;
	printf("joined gen=%d leader=%d member=%s leader_member=%s members=",
	    (int)gen, is_leader, member_id, leader_member_id);
	print_names(s, n, 0);
	printf(" metas=");
	print_names(s, n, 1);
	printf(" assignment=%.*s\n", (int)len,
	    assignment != NULL ? (const char *)assignment : "");
	fflush(stdout);
	free(s);
}

static void on_revoked(void *arg, const char *why)
{
	(void)arg;
	printf("revoked why=%s\n", why);
	fflush(stdout);
}

static void on_lease(void *arg, int64_t until)
{
	struct probe *p = arg;
	int held = until > clock_mono_ms();

	if (held == !p->lapsed)
		return;
	p->lapsed = !held;
	printf("lease held=%d\n", held);
	fflush(stdout);
}

static void on_left(void *arg)
{
	struct probe *p = arg;

	printf("left\n");
	fflush(stdout);
	p->done = 1;
	event_base_loopbreak(p->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct probe *p = arg;

	(void)what;
	fprintf(stderr, "kgroup_probe: signal %d: leaving the group\n", (int)sig);
	kgroup_leave(p->g, on_left, p);
}

static void usage(void)
{
	fprintf(stderr, "usage: kgroup_probe -b BOOTSTRAP -g GROUP [-i INSTANCE_ID] "
	    "[-m METADATA] [-s SESSION_MS] [-r REBALANCE_MS] [-t HEARTBEAT_MS] "
	    "[-X prop=value]... [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct kcluster_config cfg;
	struct kgroup_config gc = { .session_timeout_ms = 6000,
	    .rebalance_timeout_ms = 10000, .heartbeat_interval_ms = 1000 };
	struct kgroup_cbs cbs = { on_assign, on_joined, on_revoked, on_lease };
	struct probe p;
	struct kcluster *cl;
	struct evdns_base *dns;
	struct event *sigterm, *sigint;
	const char *bootstrap = NULL, *meta = "";
	char *props[64];
	int nprops = 0, opt, verbose = 0;
	char err[1024];

	memset(&p, 0, sizeof(p));
	while ((opt = getopt(argc, argv, "b:g:i:m:s:r:t:X:v")) != -1) {
		switch (opt) {
		case 'b':
			bootstrap = optarg;
			break;
		case 'g':
			gc.group_id = optarg;
			break;
		case 'i':
			gc.instance_id = optarg;
			break;
		case 'm':
			meta = optarg;
			break;
		case 's':
			gc.session_timeout_ms = atoi(optarg);
			break;
		case 'r':
			gc.rebalance_timeout_ms = atoi(optarg);
			break;
		case 't':
			gc.heartbeat_interval_ms = atoi(optarg);
			break;
		case 'X':
			if (nprops == (int)(sizeof(props) / sizeof(props[0])) ||
			    strchr(optarg, '=') == NULL)
				usage();
			props[nprops++] = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	if (bootstrap == NULL || gc.group_id == NULL || optind != argc)
		usage();
	p.instance = gc.instance_id != NULL ? gc.instance_id : "-";
	log_init("kgroup_probe", verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO, 0);
	signal(SIGPIPE, SIG_IGN);

	kcluster_config_init(&cfg, "destination");
	cfg.metadata_timeout_ms = 10000;
	cfg.conn.connect_timeout_ms = 5000;
	cfg.conn.request_timeout_ms = 10000;
	cfg.reconnect_backoff_ms = 100;
	cfg.reconnect_backoff_max_ms = 2000;
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
	if ((p.base = event_base_new()) == NULL) {
		fprintf(stderr, "kgroup_probe: event_base_new failed\n");
		return 1;
	}
	dns = evdns_base_new(p.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if ((cl = kcluster_new(p.base, dns, &cfg, err, sizeof(err))) == NULL)
		goto cfgfail;
	if ((p.g = kgroup_new(p.base, cl, &gc, &cbs, &p, err, sizeof(err))) == NULL)
		goto cfgfail;
	sigterm = evsignal_new(p.base, SIGTERM, on_signal, &p);
	sigint = evsignal_new(p.base, SIGINT, on_signal, &p);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	kgroup_start(p.g, (const uint8_t *)meta, strlen(meta));
	while (!p.done)
		event_base_loop(p.base, EVLOOP_ONCE);
	kgroup_free(p.g);
	kcluster_free(cl);
	event_base_loop(p.base, EVLOOP_NONBLOCK); /* deferred frees */
	event_free(sigterm);
	event_free(sigint);
	if (dns != NULL)
		evdns_base_free(dns, 0);
	event_base_free(p.base);
	kcluster_config_fini(&cfg);
	return 0;
cfgfail:
	fprintf(stderr, "kgroup_probe: %s\n", err);
	kcluster_config_fini(&cfg);
	return 2;
}
