/*
 * test_kcluster_fake: unit tests for kcluster against a fake broker (test/lib/kfake) that answers
 * Metadata with the generated encoder: the version picked from ApiVersions
 * (v12 flexible, v0), the exact "all topics, never create" request bytes,
 * leaders and leader epochs, internal topics, hostile and malformed
 * responses, bootstrap fail-over, unknown brokers and reconnect backoff,
 * named topics with coalesced wanted refreshes, the control connection.
 * The librdkafka mock and real Kafka are covered by test_kcluster.py.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kfake.h"
#include "kproto.h"

enum md_mode {
	MD_GOOD,        /* a well-formed answer */
	MD_BAD_INDEX,   /* a partition index of -1 */
	MD_TRUNCATED,   /* the answer cut in the middle */
};

struct env {
	struct event_base *base;
	struct kfake fake;
	struct kcluster_config cfg;
	struct kcluster *cl;
	int md_max;          /* Metadata versions the fake advertises: 0..md_max */
	int mode;
	int md_requests;
	uint8_t md_body[128]; /* body of the last Metadata request */
	size_t md_body_len;
	int16_t md_version;
	/* refresh outcome */
	int done, err;
	char errstr[1024];
	char listed[512];    /* "name:partitions:internal " of list_topics */
	int free_in_cb;
	int md_events;       /* kcluster_set_metadata_cb calls */
};

static void md_event_cb(struct kcluster *cl, int err, const char *errstr,
    void *arg)
{
	struct env *e = arg;

	ck_assert_int_eq(e->done, 0); /* before the refresh's own callback */
	if (err == KCONN_E_OK)
		e->md_events++; /* failures come here too */
}

static void fake_request(struct kfake *k, int16_t key, int16_t version,
    int32_t corr, struct kr *r, void *arg)
{
	struct env *e = arg;

	if (key == 18) {
		int16_t keys[][3] = { { 3, 0, (int16_t)e->md_max }, { 18, 0, 3 } };
		kfake_apiversions(k, corr, version, keys, ARRAY_SIZE(keys));
		return;
	}
	ck_assert_int_eq(key, 3);
	e->md_requests++;
	e->md_version = version;
	e->md_body_len = MIN(k->body_len, sizeof(e->md_body));
	memcpy(e->md_body, k->body, e->md_body_len);

	struct kp_metadata_response m;
	struct kp_metadata_response_broker b;
	struct kp_metadata_response_topic t[2];
	struct kp_metadata_response_partition p[3], q;
	struct kw w;
	uint8_t *buf;
	size_t len = 0;

	kp_metadata_response_init(&m);
	kp_metadata_response_broker_init(&b);
	b.node_id = 1;
	b.host = kstr_c("127.0.0.1");
	b.port = k->port;
	m.brokers = &b;
	m.brokers_n = 1;
	m.cluster_id = kstr_c("fake-cluster-1");
	m.controller_id = 1;
	for (int i = 0; i < 3; i++) {
		kp_metadata_response_partition_init(&p[i]);
		p[i].partition_index = i;
		p[i].leader_id = i == 1 ? -1 : 1;
		p[i].leader_epoch = 7 + i;
		p[i].replica_nodes_n = p[i].isr_nodes_n = 0;
		p[i].offline_replicas_n = 0;
	}
	if (e->mode == MD_BAD_INDEX)
		p[2].partition_index = -1;
	/* listed out of order on purpose: kcluster places them by index */
	struct kp_metadata_response_partition tmp = p[0];
	p[0] = p[2];
	p[2] = tmp;
	kp_metadata_response_partition_init(&q);
	q.partition_index = 0;
	q.leader_id = 1;
	q.replica_nodes_n = q.isr_nodes_n = q.offline_replicas_n = 0;
	for (int i = 0; i < 2; i++)
		kp_metadata_response_topic_init(&t[i]);
	t[0].name = kstr_c("alpha");
	for (int i = 0; i < 16; i++)
		t[0].topic_id.b[i] = (uint8_t)(0xa0 + i);
	t[0].partitions = p;
	t[0].partitions_n = 3;
	t[1].name = kstr_c("__consumer_offsets");
	t[1].is_internal = 1;
	t[1].partitions = &q;
	t[1].partitions_n = 1;
	m.topics = t;
	m.topics_n = 2;
	kw_init(&w, 65536);
	ck_assert_int_eq(kp_metadata_response_encode(&w, version, &m), 0);
	buf = kw_take(&w, &len);
	ck_assert_ptr_nonnull(buf);
	if (e->mode == MD_TRUNCATED)
		len = len / 2;
	kfake_reply(k, corr, kp_response_header_version(3, version) == 1, buf,
	    len);
	free(buf);
	kw_fini(&w);
}

/* Runs the loop until pred(arg) holds, checking every 10 ms, for at most
 * 10 s (for states that have no callback of their own). */
static int wait_for(struct event_base *base, int (*pred)(void *), void *arg)
{
	return kfake_wait_for(base, pred, arg, 10000);
}

/* A 127.0.0.1 port that nobody listens on (bound, then closed). */
static int closed_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

static void env_start(struct env *e, int md_max, int mode,
    const char *bootstrap_fmt)
{
	char err[256], boot[128];

	memset(e, 0, sizeof(*e));
	e->md_max = md_max;
	e->mode = mode;
	e->base = event_base_new();
	ck_assert_ptr_nonnull(e->base);
	kfake_start(&e->fake, e->base, fake_request, e);
	kcluster_config_init(&e->cfg, "source");
	snprintf(boot, sizeof(boot), bootstrap_fmt, e->fake.port);
	ck_assert_int_eq(kcluster_config_set(&e->cfg, "bootstrap.servers", boot,
	    err, sizeof(err)), 0);
	e->cfg.metadata_refresh_ms = 0;
	e->cfg.metadata_timeout_ms = 5000;
	ck_assert_int_eq(kcluster_config_prepare(&e->cfg, err, sizeof(err)), 0);
	e->cl = kcluster_new(e->base, NULL, &e->cfg, err, sizeof(err));
	ck_assert_msg(e->cl != NULL, "kcluster_new: %s", err);
	kcluster_set_metadata_cb(e->cl, md_event_cb, e);
}

static void env_stop(struct env *e)
{
	if (e->cl != NULL)
		kcluster_free(e->cl);
	event_base_loop(e->base, EVLOOP_NONBLOCK); /* deferred frees */
	kfake_stop(&e->fake);
	kcluster_config_fini(&e->cfg);
	event_base_free(e->base);
}

static void refresh_cb(struct kcluster *cl, int err, const char *errstr,
    void *arg)
{
	struct env *e = arg;

	e->done++;
	e->err = err;
	snprintf(e->errstr, sizeof(e->errstr), "%s", errstr ? errstr : "");
	if (e->free_in_cb) {
		kcluster_free(cl);
		e->cl = NULL;
	}
}

static void topics_cb(struct kcluster *cl, int err, const char *errstr,
    const struct kcluster_topic_info *t, size_t n, void *arg)
{
	struct env *e = arg;
	size_t used = 0;

	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(e->listed + used, sizeof(e->listed) - used,
		    "%s:%d:%d ", t[i].name, t[i].partitions, t[i].internal);
	refresh_cb(cl, err, errstr, arg);
}

/* One kcluster_refresh(), run until its callback. */
static void refresh_once(struct env *e)
{
	kcluster_refresh(e->cl, refresh_cb, e);
	ck_assert(kfake_run_until(e->base, &e->done, 1));
}

/* The topics the last Metadata request (v12) named, as "a,b,c" (static);
 * its AllowAutoTopicCreation in *autocreate when not NULL. */
static const char *asked_topics(const struct env *e, int *autocreate)
{
	static char out[256];
	struct kp_metadata_request req;
	struct karena *a = karena_new(1 << 16);
	struct kr r;
	size_t used = 0;

	ck_assert_ptr_nonnull(a);
	kr_init(&r, e->md_body, e->md_body_len);
	ck_assert_int_eq(kp_metadata_request_decode(&r, a, 12, &req), 0);
	out[0] = '\0';
	for (size_t i = 0; i < (size_t)req.topics_n; i++) {
		int n;

		ck_assert_int_ge(req.topics[i].name.len, 0);
		n = snprintf(out + used, sizeof(out) - used, "%s%.*s",
		    i ? "," : "", (int)req.topics[i].name.len,
		    req.topics[i].name.p);
		ck_assert(n > 0 && (size_t)n < sizeof(out) - used);
		used += (size_t)n;
	}
	if (autocreate != NULL)
		*autocreate = req.allow_auto_topic_creation;
	karena_free(a);
	return out;
}

START_TEST(test_metadata_v12_flexible)
{
	struct env e;
	int32_t epoch;
	/* null topic array, AllowAutoTopicCreation=false,
	 * IncludeTopicAuthorizedOperations=false, no tags (compact forms) */
	static const uint8_t want_req[] = { 0x00, 0x00, 0x00, 0x00 };

	env_start(&e, 12, MD_GOOD, "127.0.0.1:%d");
	kcluster_list_topics(e.cl, topics_cb, &e);
	ck_assert_int_eq(e.done, 0); /* never called from inside */
	ck_assert(kfake_run_until(e.base, &e.done, 1));
	ck_assert_msg(e.err == KCONN_E_OK, "errstr: %s", e.errstr);
	ck_assert_int_eq(e.md_version, 12);
	ck_assert_uint_eq(e.md_body_len, sizeof(want_req));
	ck_assert_int_eq(memcmp(e.md_body, want_req, sizeof(want_req)), 0);
	ck_assert_str_eq(e.listed, "__consumer_offsets:1:1 alpha:3:0 ");
	ck_assert_int_eq(kcluster_metadata_version(e.cl), 12);
	ck_assert_str_eq(kcluster_cluster_id(e.cl), "fake-cluster-1");
	ck_assert_int_eq(kcluster_controller_id(e.cl), 1);
	ck_assert_int_eq(kcluster_topic_partitions(e.cl, "alpha"), 3);
	ck_assert_int_eq(kcluster_topic_partitions(e.cl, "beta"), -1);
	ck_assert_int_eq(kcluster_leader(e.cl, "alpha", 0, &epoch), 1);
	ck_assert_int_eq(epoch, 7);
	ck_assert_int_eq(kcluster_leader(e.cl, "alpha", 1, &epoch),
	    KCLUSTER_NO_LEADER);
	ck_assert_int_eq(epoch, 8);
	ck_assert_int_eq(kcluster_leader(e.cl, "alpha", 2, &epoch), 1);
	ck_assert_int_eq(epoch, 9);
	ck_assert_int_eq(kcluster_leader(e.cl, "alpha", 3, &epoch),
	    KCLUSTER_UNKNOWN);
	ck_assert_int_eq(epoch, -1);
	ck_assert_int_eq(kcluster_leader(e.cl, "beta", 0, NULL),
	    KCLUSTER_UNKNOWN);
	ck_assert_uint_eq(kcluster_broker_count(e.cl), 1);
	int32_t node;
	const char *host, *rack;
	int port;
	ck_assert_int_eq(kcluster_broker_at(e.cl, 0, &node, &host, &port,
	    &rack), 0);
	ck_assert_int_eq(node, 1);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_int_eq(port, e.fake.port);
	ck_assert_ptr_null(rack);
	ck_assert_int_ge(kcluster_metadata_age_ms(e.cl), 0);

	ck_assert_int_eq(e.md_events, 1);

	/* The broker's connection by node id works and is reused. */
	char err[512];
	struct kconn *c = kcluster_broker_conn(e.cl, 1, err, sizeof(err));
	ck_assert_msg(c != NULL, "broker_conn: %s", err);
	ck_assert_ptr_eq(kcluster_broker_conn(e.cl, 1, err, sizeof(err)), c);
	ck_assert_ptr_null(kcluster_broker_conn(e.cl, 99, err, sizeof(err)));
	ck_assert_str_eq(err, "source cluster: broker 99 is not in the metadata");
	ck_assert_ptr_eq(kcluster_leader_conn(e.cl, "alpha", 0, err,
	    sizeof(err)), c);
	ck_assert_ptr_null(kcluster_leader_conn(e.cl, "alpha", 1, err,
	    sizeof(err)));
	ck_assert_str_eq(err, "source cluster: alpha-1 has no leader");
	ck_assert_ptr_null(kcluster_leader_conn(e.cl, "alpha", 3, err,
	    sizeof(err)));
	ck_assert_str_eq(err, "source cluster: alpha-3 is not in the metadata");
	env_stop(&e);
}
END_TEST

/* kcluster_set_topics_fn: the names asked for, each once. */
static int named_topics(struct kcluster *cl, const char ***names, size_t *n,
    void *arg)
{
	static const char *const want[] = { "beta", "alpha", "beta" };
	const char **t = calloc(ARRAY_SIZE(want), sizeof(*t));

	ck_assert_ptr_nonnull(t);
	memcpy(t, want, sizeof(want));
	*names = t;
	*n = ARRAY_SIZE(want);
	return 0;
}

/*
 * Metadata for named topics (the destination's way): the request names
 * each once, never creating one; wanted refreshes coalesce; the topic
 * view has leaders, epochs and the topic id; leaders_moved is 1 after the
 * first answer and 0 after an identical one.
 */
START_TEST(test_named_topics_want_refresh)
{
	struct env e;
	const struct kcluster_topic *t;
	int autocreate = -1;

	env_start(&e, 12, MD_GOOD, "127.0.0.1:%d");
	e.cfg.refresh_gap_ms = 50;
	kcluster_set_topics_fn(e.cl, named_topics, NULL);
	kcluster_want_refresh(e.cl);
	kcluster_want_refresh(e.cl); /* the same one */
	ck_assert(kfake_run_until(e.base, &e.md_events, 1));
	ck_assert_int_eq(e.md_requests, 1);
	ck_assert_int_eq(e.md_version, 12);
	ck_assert_str_eq(asked_topics(&e, &autocreate), "alpha,beta");
	ck_assert_int_eq(autocreate, 0);

	t = kcluster_topic(e.cl, "alpha");
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t->name, "alpha");
	ck_assert_int_eq(t->npart, 3);
	ck_assert_int_eq(t->leader[0], 1);
	ck_assert_int_eq(t->leader[1], KCLUSTER_NO_LEADER);
	ck_assert_int_eq(t->leader_epoch[2], 9);
	for (int i = 0; i < 16; i++)
		ck_assert_uint_eq(t->id.b[i], 0xa0 + i);
	ck_assert_ptr_null(kcluster_topic(e.cl, "beta"));
	ck_assert_uint_eq(kcluster_topic_count(e.cl), 2);
	ck_assert_str_eq(kcluster_topic_at(e.cl, 0)->name, "__consumer_offsets");
	ck_assert_ptr_null(kcluster_topic_at(e.cl, 2));
	ck_assert_int_eq(kcluster_leaders_moved(e.cl), 1);

	/* Wanted again: after the gap, once; nothing moved. */
	kcluster_want_refresh(e.cl);
	kcluster_want_refresh(e.cl);
	ck_assert(kfake_run_until(e.base, &e.md_events, 2));
	ck_assert_int_eq(e.md_requests, 2);
	ck_assert_int_eq(kcluster_leaders_moved(e.cl), 0);
	env_stop(&e);
}
END_TEST

/*
 * Users sharing one kcluster: the owner's topics_fn and the topics others
 * add (kcluster_add_topic) are asked together, each once; a topic added
 * twice stays until removed twice.
 */
START_TEST(test_added_topics_union)
{
	struct env e;

	env_start(&e, 12, MD_GOOD, "127.0.0.1:%d");
	e.cfg.refresh_gap_ms = 10;
	kcluster_set_topics_fn(e.cl, named_topics, NULL);
	ck_assert_int_eq(kcluster_add_topic(e.cl, "status"), 0);
	ck_assert_int_eq(kcluster_add_topic(e.cl, "alpha"), 0);
	ck_assert_int_eq(kcluster_add_topic(e.cl, "status"), 0);
	kcluster_want_refresh(e.cl);
	ck_assert(kfake_run_until(e.base, &e.md_events, 1));
	ck_assert_str_eq(asked_topics(&e, NULL), "alpha,beta,status");

	/* Removed once: still asked; twice: gone; an unknown name: nothing. */
	kcluster_remove_topic(e.cl, "status");
	kcluster_remove_topic(e.cl, "alpha");
	kcluster_remove_topic(e.cl, "nothing");
	kcluster_want_refresh(e.cl);
	ck_assert(kfake_run_until(e.base, &e.md_events, 2));
	ck_assert_str_eq(asked_topics(&e, NULL), "alpha,beta,status");
	kcluster_remove_topic(e.cl, "status");
	kcluster_want_refresh(e.cl);
	ck_assert(kfake_run_until(e.base, &e.md_events, 3));
	ck_assert_str_eq(asked_topics(&e, NULL), "alpha,beta");
	env_stop(&e);
}
END_TEST

static int conn_ready(void *arg)
{
	return kconn_is_ready(arg);
}

/*
 * control_conn: Metadata and control requests on a bootstrap connection
 * of their own, kept open beside the broker's (which data requests use),
 * and Metadata goes there even with the broker's connection ready.
 */
START_TEST(test_control_conn)
{
	struct env e;
	char err[512];
	struct kconn *ctl, *b;
	size_t ready, bytes;

	env_start(&e, 12, MD_GOOD, "127.0.0.1:%d");
	e.cfg.control_conn = 1;
	refresh_once(&e);
	ck_assert_msg(e.err == KCONN_E_OK, "errstr: %s", e.errstr);
	ctl = kcluster_control_conn(e.cl);
	ck_assert_ptr_nonnull(ctl); /* the bootstrap one, still open */
	b = kcluster_broker_conn(e.cl, 1, err, sizeof(err));
	ck_assert_msg(b != NULL, "%s", err);
	ck_assert_ptr_ne(b, ctl);
	ck_assert(wait_for(e.base, conn_ready, b));
	kcluster_conn_stats(e.cl, &ready, &bytes);
	ck_assert_uint_eq(ready, 2);
	ck_assert_ptr_eq(kcluster_control_conn(e.cl), ctl);

	/* One loop pass runs the refresh's step: the request is queued on
	 * the control connection, not on the broker's. */
	e.done = 0;
	kcluster_refresh(e.cl, refresh_cb, &e);
	event_base_loop(e.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(kconn_inflight_count(ctl), 1);
	ck_assert_int_eq(kconn_inflight_count(b), 0);
	ck_assert(kfake_run_until(e.base, &e.done, 1));
	ck_assert_int_eq(e.err, KCONN_E_OK);
	ck_assert_int_eq(e.md_requests, 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_metadata_v0)
{
	struct env e;
	/* v0 has no null array: an empty one means all topics */
	static const uint8_t want_req[] = { 0x00, 0x00, 0x00, 0x00 };

	env_start(&e, 0, MD_GOOD, "127.0.0.1:%d");
	kcluster_list_topics(e.cl, topics_cb, &e);
	ck_assert(kfake_run_until(e.base, &e.done, 1));
	ck_assert_msg(e.err == KCONN_E_OK, "errstr: %s", e.errstr);
	ck_assert_int_eq(e.md_version, 0);
	ck_assert_uint_eq(e.md_body_len, sizeof(want_req));
	ck_assert_int_eq(memcmp(e.md_body, want_req, sizeof(want_req)), 0);
	/* v0: no IsInternal field, internal topics are known by name */
	ck_assert_str_eq(e.listed, "__consumer_offsets:1:1 alpha:3:0 ");
	ck_assert_ptr_null(kcluster_cluster_id(e.cl));
	ck_assert_int_eq(kcluster_controller_id(e.cl), -1);
	int32_t epoch;
	ck_assert_int_eq(kcluster_leader(e.cl, "alpha", 0, &epoch), 1);
	ck_assert_int_eq(epoch, -1); /* no epochs before v7 */
	env_stop(&e);
}
END_TEST

START_TEST(test_metadata_v4_refuses_autocreate)
{
	struct env e;
	/* int32 -1 (null: all topics), AllowAutoTopicCreation = false */
	static const uint8_t want_req[] = { 0xff, 0xff, 0xff, 0xff, 0x00 };

	env_start(&e, 4, MD_GOOD, "127.0.0.1:%d");
	refresh_once(&e);
	ck_assert_int_eq(e.err, KCONN_E_OK);
	ck_assert_uint_eq(e.md_body_len, sizeof(want_req));
	ck_assert_int_eq(memcmp(e.md_body, want_req, sizeof(want_req)), 0);
	env_stop(&e);
}
END_TEST

START_TEST(test_hostile_partition_index)
{
	struct env e;
	char want[256];

	env_start(&e, 12, MD_BAD_INDEX, "127.0.0.1:%d");
	refresh_once(&e);
	snprintf(want, sizeof(want), "source cluster 127.0.0.1:%d: refusing "
	    "Metadata v12 response: topic alpha: partition index -1 out of "
	    "range", e.fake.port);
	ck_assert_int_eq(e.err, KCONN_E_PROTOCOL);
	ck_assert_str_eq(e.errstr, want);
	ck_assert(!kcluster_has_metadata(e.cl));
	ck_assert_int_eq(kcluster_topic_partitions(e.cl, "alpha"), -1);
	env_stop(&e);
}
END_TEST

START_TEST(test_truncated_metadata)
{
	struct env e;
	char want[128];

	env_start(&e, 12, MD_TRUNCATED, "127.0.0.1:%d");
	refresh_once(&e);
	snprintf(want, sizeof(want), "source cluster 127.0.0.1:%d: malformed "
	    "Metadata v12 response at byte ", e.fake.port);
	ck_assert_int_eq(e.err, KCONN_E_PROTOCOL);
	ck_assert_msg(strncmp(e.errstr, want, strlen(want)) == 0, "errstr: %s",
	    e.errstr);
	env_stop(&e);
}
END_TEST

START_TEST(test_bootstrap_failover)
{
	struct env e;

	/* A port nobody listens on, then the fake. */
	char fmt[64];
	snprintf(fmt, sizeof(fmt), "127.0.0.1:%d,127.0.0.1:%%d", closed_port());

	env_start(&e, 2, MD_GOOD, fmt);
	refresh_once(&e);
	ck_assert_msg(e.err == KCONN_E_OK, "errstr: %s", e.errstr);
	ck_assert_int_eq(kcluster_topic_partitions(e.cl, "alpha"), 3);
	env_stop(&e);
}
END_TEST

static int broker_in_backoff(void *arg)
{
	struct env *e = arg;
	char err[1024];

	return kcluster_broker_conn(e->cl, 1, err, sizeof(err)) == NULL;
}

START_TEST(test_reconnect_backoff)
{
	struct env e;
	char err[1024], want[128];
	struct kconn *c;

	env_start(&e, 2, MD_GOOD, "127.0.0.1:%d");
	e.cfg.reconnect_backoff_ms = 60000; /* stays in backoff for the test */
	e.cfg.reconnect_backoff_max_ms = 60000;
	refresh_once(&e);
	ck_assert_int_eq(e.err, KCONN_E_OK);
	c = kcluster_broker_conn(e.cl, 1, err, sizeof(err));
	ck_assert_ptr_nonnull(c);
	/* The broker goes away: the connection fails, backoff starts. */
	kfake_stop(&e.fake);
	ck_assert(wait_for(e.base, broker_in_backoff, &e));
	ck_assert_ptr_null(kcluster_broker_conn(e.cl, 1, err, sizeof(err)));
	snprintf(want, sizeof(want), "source cluster broker 1: 127.0.0.1:%d is "
	    "in reconnect backoff after: 127.0.0.1:%d: ", e.fake.port,
	    e.fake.port);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "err: %s", err);
	env_stop(&e);
}
END_TEST

START_TEST(test_free_inside_callback)
{
	struct env e;

	env_start(&e, 12, MD_GOOD, "127.0.0.1:%d");
	e.free_in_cb = 1;
	kcluster_refresh(e.cl, refresh_cb, &e);
	kcluster_refresh(e.cl, refresh_cb, &e); /* joins the same refresh */
	ck_assert(kfake_run_until(e.base, &e.done, 2));
	ck_assert_int_eq(e.md_requests, 1);
	/* the second waiter still got its one callback */
	ck_assert_int_eq(e.done, 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_bootstrap_parsing)
{
	struct kcluster_config cfg;
	char err[256];
	static const struct {
		const char *in, *err;
	} bad[] = {
		{ "", "source cluster: bootstrap.servers is empty" },
		{ " , ", "source cluster: bootstrap.servers lists no server" },
		{ "h:99999", "source cluster: bootstrap.servers: \"h:99999\" has a "
		    "bad port (1..65535)" },
		{ "h:x", "source cluster: bootstrap.servers: \"h:x\" has a bad "
		    "port (1..65535)" },
		{ "[::1:9092", "source cluster: bootstrap.servers: \"[::1:9092\" "
		    "has no closing ']'" },
		{ ":9092", "source cluster: bootstrap.servers: \":9092\" has no "
		    "usable host" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		kcluster_config_init(&cfg, "source");
		ck_assert_int_eq(kcluster_config_set(&cfg, "bootstrap.servers",
		    bad[i].in, err, sizeof(err)), 0);
		ck_assert_int_eq(kcluster_config_prepare(&cfg, err, sizeof(err)),
		    -1);
		ck_assert_str_eq(err, bad[i].err);
		kcluster_config_fini(&cfg);
	}
	kcluster_config_init(&cfg, "source");
	ck_assert_int_eq(kcluster_config_set(&cfg, "bootstrap.servers",
	    "SASL_SSL://a:1, [::1]:2,b", err, sizeof(err)), 0);
	ck_assert_int_eq(kcluster_config_prepare(&cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(kcluster_config_set(&cfg, "reconnect.backoff.ms", "-1",
	    err, sizeof(err)), -1);
	ck_assert_int_eq(kcluster_config_set(&cfg, "linger.ms", "1", err,
	    sizeof(err)), 1);
	kcluster_config_fini(&cfg);
}
END_TEST

static Suite *kcluster_suite(void)
{
	Suite *s = suite_create("kcluster");
	TCase *tc = tcase_create("fake-broker");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_metadata_v12_flexible);
	tcase_add_test(tc, test_metadata_v0);
	tcase_add_test(tc, test_named_topics_want_refresh);
	tcase_add_test(tc, test_control_conn);
	tcase_add_test(tc, test_metadata_v4_refuses_autocreate);
	tcase_add_test(tc, test_hostile_partition_index);
	tcase_add_test(tc, test_truncated_metadata);
	tcase_add_test(tc, test_bootstrap_failover);
	tcase_add_test(tc, test_reconnect_backoff);
	tcase_add_test(tc, test_free_inside_callback);
	tcase_add_test(tc, test_bootstrap_parsing);
	tcase_add_test(tc, test_added_topics_union);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kcluster_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
