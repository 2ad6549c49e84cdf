/*
 * kcluster.c: see kcluster.h.
 *
 * Brokers come from two lists: the bootstrap servers (node ids -1, -2, ...
 * as librdkafka names them) and the brokers of the last metadata.  Each
 * entry (struct cbroker) owns at most one kconn and its reconnect backoff.
 *
 * A refresh is a small state machine driven by one deferred event
 * (ev_step), so no user callback ever runs inside kcluster_refresh():
 *   pick a broker -> (connect) -> Metadata -> apply -> call the waiters
 * A failed broker is marked tried for this refresh and the next one is
 * picked; the errors are collected for the final message.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kp_gen.h"
#include "log.h"

#define KCLUSTER_REMIND_MS 60000  /* a reminder while refreshes fail */
#define API_METADATA 3
#define KCLUSTER_MD_MIN 0
#define KCLUSTER_MD_MAX 12
#define KCLUSTER_MAX_BOOTSTRAP 64
#define KCLUSTER_MAX_PARTITIONS 1000000
#define KCLUSTER_ARENA_CAP (256u << 20)
#define KCLUSTER_ERRLEN 1024

/* ---- configuration --------------------------------------------------- */

void kcluster_config_init(struct kcluster_config *cfg, const char *name)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->name = strdup(name != NULL ? name : "kafka");
	cfg->metadata_refresh_ms = 300000; /* librdkafka's default */
	cfg->metadata_timeout_ms = 30000;
	cfg->reconnect_backoff_ms = 100;
	cfg->reconnect_backoff_max_ms = 10000;
	cfg->refresh_gap_ms = 100;
	kconn_config_init(&cfg->conn);
}

void kcluster_config_fini(struct kcluster_config *cfg)
{
	free(cfg->name);
	free(cfg->bootstrap);
	kconn_config_fini(&cfg->conn);
	memset(cfg, 0, sizeof(*cfg));
}

static int set_ms(const char *prop, const char *value, int lo, int *out,
    char *err, size_t errlen)
{
	char *end;
	long v = strtol(value, &end, 10);

	if (end == value || *end != '\0' || v < lo || v > 86400000) {
		snprintf(err, errlen, "%s: \"%s\" is not an integer in %d..86400000",
		    prop, value, lo);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int kcluster_config_set(struct kcluster_config *cfg, const char *prop,
    const char *value, char *err, size_t errlen)
{
	if (strcmp(prop, "bootstrap.servers") == 0 ||
	    strcmp(prop, "metadata.broker.list") == 0) {
		char *v = strdup(value);
		if (v == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		free(cfg->bootstrap);
		cfg->bootstrap = v;
		return 0;
	}
	if (strcmp(prop, "topic.metadata.refresh.interval.ms") == 0)
		return set_ms(prop, value, 0, &cfg->metadata_refresh_ms, err,
		    errlen);
	if (strcmp(prop, "mirrord.metadata.timeout.ms") == 0)
		return set_ms(prop, value, 1, &cfg->metadata_timeout_ms, err,
		    errlen);
	if (strcmp(prop, "reconnect.backoff.ms") == 0)
		return set_ms(prop, value, 0, &cfg->reconnect_backoff_ms, err,
		    errlen);
	if (strcmp(prop, "reconnect.backoff.max.ms") == 0)
		return set_ms(prop, value, 0, &cfg->reconnect_backoff_max_ms, err,
		    errlen);
	return kconn_config_set(&cfg->conn, prop, value, err, errlen);
}

struct hostport {
	char host[256];
	int port;
};

/*
 * Parses "host:port,[v6]:port,SASL_SSL://host:port" (a missing port is
 * 9092).  Returns the count, or -1 with the reason in err.
 */
static int parse_bootstrap(const char *list, struct hostport *out, int max,
    char *err, size_t errlen)
{
	const char *p = list;
	int n = 0;

	if (list == NULL || *list == '\0') {
		snprintf(err, errlen, "bootstrap.servers is empty");
		return -1;
	}
	while (*p != '\0') {
		const char *end = strchr(p, ','), *hs, *he, *colon;
		size_t len;
		long port = 9092;

		if (end == NULL)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		len = (size_t)(end - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0)
			goto next;
		{
			const char *scheme = NULL;
			for (size_t i = 0; i + 2 < len; i++)
				if (p[i] == ':' && p[i + 1] == '/' && p[i + 2] == '/')
					scheme = p + i + 3;
			if (scheme != NULL) {
				len -= (size_t)(scheme - p);
				p = scheme;
			}
		}
		if (n == max) {
			snprintf(err, errlen, "bootstrap.servers lists more than "
			    "%d servers", max);
			return -1;
		}
		if (p[0] == '[') {
			hs = p + 1;
			he = memchr(p, ']', len);
			if (he == NULL) {
				snprintf(err, errlen, "bootstrap.servers: \"%.*s\" "
				    "has no closing ']'", (int)len, p);
				return -1;
			}
			colon = he + 1 < p + len && he[1] == ':' ? he + 1 : NULL;
		} else {
			hs = p;
			colon = memchr(p, ':', len);
			he = colon != NULL ? colon : p + len;
		}
		if (colon != NULL) {
			char pbuf[8];
			size_t pl = (size_t)(p + len - colon - 1);
			char *pe;
			if (pl == 0 || pl >= sizeof(pbuf))
				goto badport;
			memcpy(pbuf, colon + 1, pl);
			pbuf[pl] = '\0';
			port = strtol(pbuf, &pe, 10);
			if (*pe != '\0' || port < 1 || port > 65535)
				goto badport;
		}
		if (he == hs || (size_t)(he - hs) >= sizeof(out[n].host)) {
			snprintf(err, errlen, "bootstrap.servers: \"%.*s\" has "
			    "no usable host", (int)len, p);
			return -1;
		}
		memcpy(out[n].host, hs, (size_t)(he - hs));
		out[n].host[he - hs] = '\0';
		out[n].port = (int)port;
		n++;
next:
		p = *end == ',' ? end + 1 : end;
		continue;
badport:
		snprintf(err, errlen, "bootstrap.servers: \"%.*s\" has a bad "
		    "port (1..65535)", (int)len, p);
		return -1;
	}
	if (n == 0) {
		snprintf(err, errlen, "bootstrap.servers lists no server");
		return -1;
	}
	return n;
}

int kcluster_config_prepare(struct kcluster_config *cfg, char *err,
    size_t errlen)
{
	struct hostport hp[KCLUSTER_MAX_BOOTSTRAP];
	char e2[512];

	if (parse_bootstrap(cfg->bootstrap, hp, KCLUSTER_MAX_BOOTSTRAP, e2,
		sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s cluster: %s", cfg->name, e2);
		return -1;
	}
	if (kconn_config_prepare(&cfg->conn, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "%s cluster: %s", cfg->name, e2);
		return -1;
	}
	return 0;
}

/* ---- state ----------------------------------------------------------- */

struct cbroker {
	int32_t node;      /* < 0: bootstrap server */
	char *host;
	int port;
	char *rack;
	struct kconn *conn;
	int ready;         /* conn reached READY */
	int fails;         /* consecutive connection failures */
	int64_t retry_at;  /* no new connection before (monotonic ms) */
	char last_err[512];
	unsigned tried;    /* refresh round in which this was tried */
	struct kcluster *cl;
};

struct ctopic {
	struct kcluster_topic pub;  /* what kcluster_topic() hands out */
	char *name;                 /* pub.name */
	int32_t *arr;               /* pub.leader, then pub.leader_epoch */
};

struct waiter {
	kcluster_cb cb;
	kcluster_topics_cb tcb;
	void *arg;
};

struct kcluster {
	struct event_base *base;
	struct evdns_base *dns;
	const struct kcluster_config *cfg;
	kconn_stats_fn stats;
	void *stats_arg;
	kcluster_cb md_cb;
	void *md_arg;
	kcluster_conn_cb conn_cb;
	void *conn_arg;
	kcluster_topics_fn topics_fn;
	void *topics_arg;
	struct want_topic {       /* kcluster_add_topic(): asked besides */
		char *name;
		int refs;
	} *extra;
	size_t nextra;

	struct cbroker *boot;
	int nboot;
	struct cbroker *brokers; /* sorted by node id */
	size_t nbrokers;

	/* metadata */
	int have_md;
	int md_version;
	int64_t md_at;
	char *cluster_id;
	int32_t controller_id;
	struct ctopic *topics; /* sorted by name */
	size_t ntopics;
	int leaders_moved;     /* by the last refresh */

	/* the refresh in progress */
	int refreshing;
	unsigned round;
	int64_t deadline;
	struct cbroker *via;   /* broker whose connection we wait on/use */
	int md_inflight;
	int md_version_inflight;
	struct waiter *waiters;
	size_t nwaiters, capwaiters;
	char errs[KCLUSTER_ERRLEN];
	int nerrs;
	int last_kind;         /* KCONN_E_* of the last failure */

	struct event *ev_step;    /* deferred refresh step */
	struct event *ev_timer;   /* refresh deadline / backoff wake-up */
	struct event *ev_periodic;
	struct event *ev_want;    /* a wanted refresh after the gap */
	struct event *ev_free;
	int wanted;            /* kcluster_want_refresh() since the last start */
	int want_used;         /* it was ever called: failures are retried */
	int64_t last_end;      /* when the last refresh ended (monotonic ms) */
	/* Refreshes failing since (monotonic ms, 0: the last one worked) and
	 * the last line logged about it: one line when they start failing,
	 * a reminder every KCLUSTER_REMIND_MS, one when they work again. */
	int64_t down_since;
	int64_t down_logged;
	int boot_next;         /* control_conn: the next bootstrap server */
	uint64_t rng;
	int busy;
	int freeing;
};

static void cl_enter(struct kcluster *cl)
{
	cl->busy++;
}

static void cl_leave(struct kcluster *cl)
{
	if (--cl->busy == 0 && cl->freeing)
		event_active(cl->ev_free, EV_TIMEOUT, 0);
}

static uint32_t cl_random(struct kcluster *cl)
{
	/* xorshift64*: jitter only, not security. */
	cl->rng ^= cl->rng >> 12;
	cl->rng ^= cl->rng << 25;
	cl->rng ^= cl->rng >> 27;
	return (uint32_t)((cl->rng * 2685821657736338717ull) >> 32);
}

static void broker_fini(struct cbroker *b)
{
	if (b->conn != NULL)
		kconn_free(b->conn);
	free(b->host);
	free(b->rack);
}

static void topics_free(struct ctopic *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].arr);
	}
	free(t);
}

/* ---- connections ----------------------------------------------------- */

/* Records a failed attempt of the refresh in progress. */
static void add_err(struct kcluster *cl, int kind, const char *msg)
{
	size_t used = strlen(cl->errs);

	cl->last_kind = kind;
	if (used + 3 >= sizeof(cl->errs))
		return;
	/* A message cut at the end of the buffer is still worth showing. */
	if (snprintf(cl->errs + used, sizeof(cl->errs) - used, "%s%s",
		cl->nerrs > 0 ? "; " : "", msg) >= (int)(sizeof(cl->errs) - used))
		log_debug("%s cluster: error list truncated", cl->cfg->name);
	cl->nerrs++;
}

static void refresh_start(struct kcluster *cl, kcluster_cb cb,
    kcluster_topics_cb tcb, void *arg);

static void refresh_kick(struct kcluster *cl)
{
	if (cl->refreshing)
		event_active(cl->ev_step, EV_TIMEOUT, 0);
}

static int backoff_ms(struct kcluster *cl, int fails)
{
	int64_t ms = cl->cfg->reconnect_backoff_ms;

	for (int i = 1; i < fails && ms < cl->cfg->reconnect_backoff_max_ms; i++)
		ms *= 2;
	if (ms > cl->cfg->reconnect_backoff_max_ms)
		ms = cl->cfg->reconnect_backoff_max_ms;
	/* +-20% jitter so reconnecting clients do not move in lockstep */
	if (ms > 0)
		ms = ms * 8 / 10 + (int64_t)(cl_random(cl) % (uint32_t)(ms * 4 / 10 + 1));
	return (int)ms;
}

static void conn_event(struct kconn *c, int event, int err, const char *errstr,
    void *arg)
{
	struct cbroker *b = arg;
	struct kcluster *cl = b->cl;

	cl_enter(cl);
	if (event == KCONN_EV_READY) {
		b->ready = 1;
		b->fails = 0;
		b->last_err[0] = '\0';
		log_debug("%s cluster: connected to %s (node %d)", cl->cfg->name,
		    kconn_name(c), b->node);
	} else {
		int was_ready = b->ready;

		b->ready = 0;
		b->fails++;
		b->retry_at = clock_mono_ms() + backoff_ms(cl, b->fails);
		snprintf(b->last_err, sizeof(b->last_err), "%s", errstr);
		b->conn = NULL;
		if (cl->refreshing)
			b->tried = cl->round; /* not again in this refresh */
		kconn_free(c); /* deferred by kconn: we are in its callback */
		if (was_ready && b->node >= 0) {
			log_info("%s cluster: lost broker %d: %s", cl->cfg->name,
			    b->node, errstr);
			/* Its partitions may have moved: look again soon. */
			if (!cl->freeing)
				refresh_start(cl, NULL, NULL, NULL);
		}
		else if (was_ready)
			log_debug("%s cluster: lost bootstrap connection: %s",
			    cl->cfg->name, errstr);
		else
			log_debug("%s cluster: %s", cl->cfg->name, errstr);
		/* A failed Metadata request was already recorded by
		 * md_response(), which cleared via. */
		if (cl->refreshing && cl->via == b) {
			cl->via = NULL;
			add_err(cl, err, errstr);
		}
	}
	refresh_kick(cl);
	if (cl->conn_cb != NULL && !cl->freeing)
		cl->conn_cb(cl, b->node, event, event == KCONN_EV_READY ? NULL :
		    errstr, cl->conn_arg);
	cl_leave(cl);
}

/* The broker's connection, opening one if allowed; NULL + err if not. */
static struct kconn *broker_conn(struct kcluster *cl, struct cbroker *b,
    char *err, size_t errlen)
{
	char e2[512];

	if (b->conn != NULL)
		return b->conn;
	if (b->retry_at > clock_mono_ms()) {
		snprintf(err, errlen, "%s:%d is in reconnect backoff after: %s",
		    b->host, b->port, b->last_err);
		return NULL;
	}
	b->conn = kconn_new(cl->base, cl->dns, &cl->cfg->conn, b->host, b->port,
	    conn_event, b, e2, sizeof(e2));
	if (b->conn == NULL) {
		snprintf(err, errlen, "%s", e2);
		snprintf(b->last_err, sizeof(b->last_err), "%s", e2);
		b->fails++;
		b->retry_at = clock_mono_ms() + backoff_ms(cl, b->fails);
		return NULL;
	}
	if (cl->stats != NULL)
		kconn_set_stats_cb(b->conn, cl->stats, cl->stats_arg);
	return b->conn;
}

/* ---- applying a Metadata response ------------------------------------ */

static int cmp_topic(const void *a, const void *b)
{
	return strcmp(((const struct ctopic *)a)->name,
	    ((const struct ctopic *)b)->name);
}

static int cmp_broker(const void *a, const void *b)
{
	int32_t x = ((const struct cbroker *)a)->node;
	int32_t y = ((const struct cbroker *)b)->node;

	return x < y ? -1 : x > y;
}

static int is_internal_name(struct kstr n)
{
	return kstr_eq(n, "__consumer_offsets") ||
	    kstr_eq(n, "__transaction_state");
}

/*
 * 1 if a partition of now (sorted by name, as old) has another leader than
 * in old, or is new: one merge walk, O(topics + partitions).
 */
static int leaders_moved(const struct ctopic *old, size_t nold,
    const struct ctopic *now, size_t nnow)
{
	size_t i = 0;

	for (size_t j = 0; j < nnow; j++) {
		const struct kcluster_topic *n = &now[j].pub, *o = NULL;
		int c = 1;

		while (i < nold && (c = strcmp(old[i].name, n->name)) < 0)
			i++;
		if (i < nold && c == 0)
			o = &old[i].pub;
		if (o == NULL) {
			if (n->npart > 0)
				return 1;
			continue;
		}
		for (int32_t k = 0; k < n->npart; k++)
			if (k >= o->npart || o->leader[k] != n->leader[k])
				return 1;
	}
	return 0;
}

/*
 * Copies the decoded response into our tables.  Returns -1 with the reason
 * for responses we refuse (bad partition index, duplicate names...).
 */
static int md_apply(struct kcluster *cl, int version,
    const struct kp_metadata_response *m, char *err, size_t errlen)
{
	struct ctopic *topics = NULL;
	struct cbroker *brokers = NULL;
	size_t nt = 0, nb = 0;
	char *cid = NULL;

	if (m->brokers_n < 0 || m->topics_n < 0) {
		snprintf(err, errlen, "null broker or topic array");
		return -1;
	}
	topics = calloc((size_t)m->topics_n + 1, sizeof(*topics));
	brokers = calloc((size_t)m->brokers_n + 1, sizeof(*brokers));
	if (topics == NULL || brokers == NULL)
		goto oom;
	for (int32_t i = 0; i < m->brokers_n; i++) {
		const struct kp_metadata_response_broker *sb = &m->brokers[i];
		struct cbroker *b = &brokers[nb];

		if (sb->port < 1 || sb->port > 65535 || sb->host.len <= 0 ||
		    sb->host.len > 255) {
			snprintf(err, errlen, "broker %d has a bad address "
			    "(port %d)", sb->node_id, sb->port);
			goto fail;
		}
		b->node = sb->node_id;
		b->port = sb->port;
		b->host = kstr_dup(sb->host);
		if (b->host == NULL)
			goto oom;
		if (sb->rack.len >= 0 && (b->rack = kstr_dup(sb->rack)) == NULL)
			goto oom;
		b->cl = cl;
		nb++;
	}
	qsort(brokers, nb, sizeof(*brokers), cmp_broker);
	for (size_t i = 1; i < nb; i++) {
		if (brokers[i].node == brokers[i - 1].node) {
			snprintf(err, errlen, "broker %d is listed twice",
			    brokers[i].node);
			goto fail;
		}
	}
	for (int32_t i = 0; i < m->topics_n; i++) {
		const struct kp_metadata_response_topic *st = &m->topics[i];
		struct ctopic *t = &topics[nt];
		int32_t np = 0;

		if (st->name.len <= 0)
			continue; /* v12+ may leave names null (topic ids only) */
		for (int32_t j = 0; j < st->partitions_n; j++) {
			int32_t idx = st->partitions[j].partition_index;
			if (idx < 0 || idx >= KCLUSTER_MAX_PARTITIONS) {
				snprintf(err, errlen, "topic %.*s: partition "
				    "index %d out of range", (int)st->name.len,
				    st->name.p, idx);
				goto fail;
			}
			if (idx + 1 > np)
				np = idx + 1;
		}
		t->name = kstr_dup(st->name);
		if (t->name == NULL)
			goto oom;
		t->pub.name = t->name;
		t->pub.error = st->error_code;
		t->pub.internal = version >= 1 ? st->is_internal != 0 :
		    is_internal_name(st->name);
		t->pub.npart = np;
		if (version >= 10)
			t->pub.id = st->topic_id;
		nt++;
		if (np == 0)
			continue;
		/* leader and leader_epoch: one allocation */
		t->arr = malloc((size_t)np * 2 * sizeof(*t->arr));
		if (t->arr == NULL)
			goto oom;
		for (int32_t j = 0; j < 2 * np; j++)
			t->arr[j] = j < np ? KCLUSTER_NO_LEADER : -1;
		t->pub.leader = t->arr;
		t->pub.leader_epoch = t->arr + np;
		for (int32_t j = 0; j < st->partitions_n; j++) {
			const struct kp_metadata_response_partition *sp =
			    &st->partitions[j];
			int32_t k = sp->partition_index;

			if (sp->error_code != 0)
				continue;
			if (sp->leader_id >= 0)
				t->arr[k] = sp->leader_id;
			t->arr[np + k] = version >= 7 ? sp->leader_epoch : -1;
		}
	}
	qsort(topics, nt, sizeof(*topics), cmp_topic);
	for (size_t i = 1; i < nt; i++) {
		if (strcmp(topics[i].name, topics[i - 1].name) == 0) {
			snprintf(err, errlen, "topic %s is listed twice",
			    topics[i].name);
			goto fail;
		}
	}
	if (version >= 2 && m->cluster_id.len >= 0 &&
	    (cid = kstr_dup(m->cluster_id)) == NULL)
		goto oom;

	/* Keep the connections of brokers whose address did not change. */
	for (size_t i = 0; i < nb; i++) {
		for (size_t j = 0; j < cl->nbrokers; j++) {
			struct cbroker *o = &cl->brokers[j];
			if (o->node != brokers[i].node)
				continue;
			if (o->port == brokers[i].port &&
			    strcmp(o->host, brokers[i].host) == 0) {
				brokers[i].conn = o->conn;
				brokers[i].ready = o->ready;
				brokers[i].fails = o->fails;
				brokers[i].retry_at = o->retry_at;
				memcpy(brokers[i].last_err, o->last_err,
				    sizeof(o->last_err));
				if (o->conn != NULL)
					kconn_set_event_arg(o->conn,
					    &brokers[i]);
				o->conn = NULL;
			}
			break;
		}
	}
	if (cl->via != NULL && cl->via->node >= 0)
		cl->via = NULL; /* it pointed into the old array */
	for (size_t j = 0; j < cl->nbrokers; j++)
		broker_fini(&cl->brokers[j]);
	free(cl->brokers);
	cl->brokers = brokers;
	cl->nbrokers = nb;
	cl->leaders_moved = leaders_moved(cl->topics, cl->ntopics, topics, nt);
	topics_free(cl->topics, cl->ntopics);
	cl->topics = topics;
	cl->ntopics = nt;
	free(cl->cluster_id);
	cl->cluster_id = cid;
	cl->controller_id = version >= 1 ? m->controller_id : -1;
	cl->md_version = version;
	cl->md_at = clock_mono_ms();
	cl->have_md = 1;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	for (size_t i = 0; i < nb; i++)
		broker_fini(&brokers[i]);
	free(brokers);
	topics_free(topics, nt);
	free(cid);
	return -1;
}

/* ---- refresh --------------------------------------------------------- */

/*
 * Once the brokers are known, bootstrap connections only duplicate broker
 * connections: close the idle ones (they reopen if every broker fails).
 */
static void boot_close_idle(struct kcluster *cl)
{
	for (int i = 0; i < cl->nboot; i++) {
		struct cbroker *b = &cl->boot[i];

		if (b->conn == NULL || kconn_inflight_count(b->conn) > 0)
			continue;
		kconn_free(b->conn); /* deferred if we are in its callback */
		b->conn = NULL;
		b->ready = 0;
	}
}

static void want_arm(struct kcluster *cl);

static void refresh_finish(struct kcluster *cl, int err, const char *errstr)
{
	struct waiter *w = cl->waiters;
	size_t n = cl->nwaiters;
	struct kcluster_topic_info *info = NULL;

	cl->refreshing = 0;
	cl->via = NULL;
	cl->waiters = NULL;
	cl->nwaiters = cl->capwaiters = 0;
	event_del(cl->ev_timer);
	if (err != KCONN_E_OK) {
		int64_t now = clock_mono_ms();

		if (cl->down_since == 0) {
			cl->down_since = cl->down_logged = now;
			log_warnx("%s (retrying)", errstr);
		} else if (now - cl->down_logged >= KCLUSTER_REMIND_MS) {
			cl->down_logged = now;
			log_warnx("%s (failing for %lld s)", errstr,
			    (long long)((now - cl->down_since) / 1000));
		} else {
			log_debug("%s", errstr);
		}
	} else {
		if (cl->down_since != 0)
			log_info("%s cluster: metadata answered again after %lld s",
			    cl->cfg->name, (long long)((clock_mono_ms() -
			    cl->down_since) / 1000));
		cl->down_since = 0;
		log_debug("%s cluster: metadata v%d: %zu brokers, %zu topics",
		    cl->cfg->name, cl->md_version, cl->nbrokers, cl->ntopics);
	}
	if (err == KCONN_E_OK && cl->nbrokers > 0 && !cl->cfg->control_conn)
		boot_close_idle(cl);

	cl->last_end = clock_mono_ms();
	if (err != KCONN_E_OK && cl->want_used && !cl->freeing)
		cl->wanted = 1; /* asked again after the gap */
	if (cl->wanted && !cl->freeing)
		want_arm(cl);
	cl_enter(cl);
	if (cl->md_cb != NULL && !cl->freeing)
		cl->md_cb(cl, err, errstr, cl->md_arg);
	for (size_t i = 0; i < n; i++) {
		if (w[i].cb != NULL) {
			w[i].cb(cl, err, errstr, w[i].arg);
			continue;
		}
		if (w[i].tcb == NULL)
			continue;
		if (err != KCONN_E_OK) {
			w[i].tcb(cl, err, errstr, NULL, 0, w[i].arg);
			continue;
		}
		if (info == NULL)
			info = calloc(cl->ntopics + 1, sizeof(*info));
		if (info == NULL) {
			w[i].tcb(cl, KCONN_E_TRANSPORT, "out of memory", NULL, 0,
			    w[i].arg);
			continue;
		}
		for (size_t j = 0; j < cl->ntopics; j++)
			info[j] = (struct kcluster_topic_info){
				cl->topics[j].name, cl->topics[j].pub.npart,
				cl->topics[j].pub.internal,
				cl->topics[j].pub.error };
		w[i].tcb(cl, KCONN_E_OK, NULL, info, cl->ntopics, w[i].arg);
	}
	free(info);
	free(w);
	if (cl->cfg->metadata_refresh_ms > 0 && !cl->freeing) {
		/* After a failure, retry sooner than the normal interval. */
		int ms = err == KCONN_E_OK ? cl->cfg->metadata_refresh_ms :
		    MIN(cl->cfg->metadata_refresh_ms,
			MAX(cl->cfg->reconnect_backoff_max_ms, 1000));
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
		evtimer_add(cl->ev_periodic, &tv);
	}
	cl_leave(cl);
}

static void refresh_fail(struct kcluster *cl, int err, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
static void refresh_fail(struct kcluster *cl, int err, const char *fmt, ...)
{
	char msg[KCLUSTER_ERRLEN + 256];
	int n;
	va_list ap;

	n = snprintf(msg, sizeof(msg), "%s cluster ", cl->cfg->name);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	refresh_finish(cl, err, msg);
}

static int md_encode(struct kw *w, int16_t version, const void *m)
{
	return kp_metadata_request_encode(w, version, m);
}

static void md_response(struct kconn *c, int err, const char *errstr,
    struct kr *r, void *arg)
{
	struct kcluster *cl = arg;
	struct kp_metadata_response m;
	struct karena *a = NULL;
	char why[600], e2[512];
	int version = cl->md_version_inflight;

	cl_enter(cl);
	cl->md_inflight = 0;
	if (err != KCONN_E_OK) {
		if (cl->refreshing) {
			add_err(cl, err, errstr);
			cl->via = NULL;
			refresh_kick(cl);
		}
		goto out;
	}
	a = karena_new(KCLUSTER_ARENA_CAP);
	if (a == NULL) {
		snprintf(why, sizeof(why), "out of memory for a Metadata "
		    "response");
		goto bad;
	}
	kp_metadata_response_init(&m);
	if (kp_metadata_response_decode(r, a, (int16_t)version, &m) != 0 ||
	    r->err) {
		snprintf(why, sizeof(why), "malformed Metadata v%d response "
		    "at byte %zu: %s", version, r->err_off,
		    r->why ? r->why : "decoder error");
		goto bad;
	}
	if (md_apply(cl, version, &m, e2, sizeof(e2)) != 0) {
		snprintf(why, sizeof(why), "refusing Metadata v%d response: %s",
		    version, e2);
		goto bad;
	}
	/* A late answer (after the deadline) still refreshes the cache. */
	if (cl->refreshing)
		refresh_finish(cl, KCONN_E_OK, NULL);
	goto out;
bad:
	log_warnx("%s cluster %s: %s", cl->cfg->name, kconn_name(c), why);
	/* conn_event() records the error and kicks the next step. */
	kconn_close(c, KCONN_E_PROTOCOL, why);
out:
	karena_free(a);
	cl_leave(cl);
}

/* Sends Metadata (all topics, never creating one) on a ready connection. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The topics the owner names (kcluster_set_topics_fn), sorted, without
 * duplicates (a broker may answer a name asked twice twice, which
 * md_apply() refuses): 0, or -1 for all topics. */
static int md_topics(struct kcluster *cl, struct kp_metadata_request *req)
{
	const char **names = NULL;
	size_t n = 0, k = 0;
	struct kp_metadata_request_topic *t;

	if (cl->topics_fn == NULL ||
	    cl->topics_fn(cl, &names, &n, cl->topics_arg) != 0)
		return -1;
	if (cl->nextra > 0) {
		/* The other users' topics (kcluster_add_topic): the union. */
		const char **all = realloc(names, (n + cl->nextra) *
		    sizeof(*all));

		if (all == NULL) {
			free(names);
			return -1;
		}
		names = all;
		for (size_t i = 0; i < cl->nextra; i++)
			names[n++] = cl->extra[i].name;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_str);
	t = calloc(n + 1, sizeof(*t));
	if (t == NULL || n > INT32_MAX) {
		free(t);
		free(names);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		kp_metadata_request_topic_init(&t[k]);
		t[k++].name = kstr_c(names[i]);
	}
	free(names);
	req->topics = t;
	req->topics_n = (int32_t)k;
	return 0;
}

static int md_send(struct kcluster *cl, struct cbroker *b)
{
	struct kp_metadata_request req;
	char err[512];
	int v = kconn_pick_version(b->conn, API_METADATA, KCLUSTER_MD_MIN,
	    KCLUSTER_MD_MAX);
	int rc;

	if (v < 0) {
		snprintf(err, sizeof(err), "%s: broker supports no Metadata "
		    "version in %d..%d", kconn_name(b->conn), KCLUSTER_MD_MIN,
		    KCLUSTER_MD_MAX);
		goto fail;
	}
	kp_metadata_request_init(&req);
	req.topics = NULL;
	req.topics_n = v == 0 ? 0 : -1; /* v0: empty = all; v1+: null = all */
	/* The names the owner asks for: v0 cannot ask for none (empty means
	 * all), which then asks for all. */
	if (md_topics(cl, &req) == 0 && v == 0 && req.topics_n == 0) {
		free(req.topics);
		req.topics = NULL;
	}
	/* Below v4 the field does not exist (the broker's own setting rules,
	 * and the codec refuses a non-default value there); asking for all
	 * topics is what keeps those versions from creating any. */
	if (v >= 4)
		req.allow_auto_topic_creation = 0;
	cl->md_version_inflight = v;
	rc = kconn_send(b->conn, API_METADATA, (int16_t)v, md_encode, &req, 0,
	    0, md_response, cl, err, sizeof(err));
	free(req.topics);
	if (rc != 0)
		goto fail;
	cl->md_inflight = 1;
	cl->via = b;
	return 0;
fail:
	add_err(cl, KCONN_E_UNSUPPORTED, err);
	return -1;
}

/* Wakes refresh_step() at wake (0: none) or at the deadline if sooner. */
static void refresh_arm(struct kcluster *cl, int64_t wake)
{
	int64_t at = wake != 0 && wake < cl->deadline ? wake : cl->deadline;
	int64_t d = at - clock_mono_ms();
	struct timeval tv;

	if (d < 0)
		d = 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(cl->ev_timer, &tv);
}

static void refresh_step(struct kcluster *cl)
{
	struct cbroker *pick = NULL, *connecting = NULL;
	int64_t now = clock_mono_ms(), wake = 0;
	char err[1024];

	if (!cl->refreshing)
		return;
	if (now >= cl->deadline) {
		if (cl->nerrs > 0)
			refresh_fail(cl, cl->last_kind == KCONN_E_OK ?
			    KCONN_E_TIMEOUT : cl->last_kind, "%s (no metadata "
			    "after %d ms)", cl->errs,
			    cl->cfg->metadata_timeout_ms);
		else if (cl->via != NULL && cl->via->conn != NULL)
			refresh_fail(cl, KCONN_E_TIMEOUT, "%s: no metadata "
			    "after %d ms (%s)", kconn_name(cl->via->conn),
			    cl->cfg->metadata_timeout_ms, cl->md_inflight ?
			    "Metadata request not answered" :
			    "connection not ready");
		else
			refresh_fail(cl, KCONN_E_TIMEOUT, "metadata refresh "
			    "timed out after %d ms",
			    cl->cfg->metadata_timeout_ms);
		return;
	}
	if (cl->md_inflight)
		return; /* md_response() kicks us */
	/* 1. any ready connection; 2. one being opened; 3. open one.  The
	 * bootstrap servers first with control_conn, else the brokers. */
	for (int pass = 0; pass < 2 && pick == NULL; pass++) {
		int boot = (pass == 0) == (cl->cfg->control_conn != 0);
		size_t n = boot ? (size_t)cl->nboot : cl->nbrokers;
		struct cbroker *arr = boot ? cl->boot : cl->brokers;
		for (size_t i = 0; i < n; i++) {
			struct cbroker *b = &arr[i];
			if (b->tried == cl->round || b->conn == NULL)
				continue;
			if (kconn_is_ready(b->conn)) {
				pick = b;
				break;
			}
			if (connecting == NULL && !kconn_is_closed(b->conn))
				connecting = b;
		}
	}
	if (pick != NULL) {
		pick->tried = cl->round;
		if (md_send(cl, pick) != 0)
			refresh_kick(cl);
		return;
	}
	if (connecting != NULL) {
		cl->via = connecting; /* conn_event kicks us */
		refresh_arm(cl, 0);
		return;
	}
	for (int pass = 0; pass < 2; pass++) {
		int boot = (pass == 0) == (cl->cfg->control_conn != 0);
		size_t n = boot ? (size_t)cl->nboot : cl->nbrokers;
		struct cbroker *arr = boot ? cl->boot : cl->brokers;
		for (size_t i = 0; i < n; i++) {
			struct cbroker *b = &arr[i];
			if (b->tried == cl->round)
				continue;
			if (b->conn == NULL && b->retry_at > now) {
				if (wake == 0 || b->retry_at < wake)
					wake = b->retry_at;
				continue;
			}
			if (broker_conn(cl, b, err, sizeof(err)) != NULL) {
				cl->via = b;
				refresh_arm(cl, 0);
				return;
			}
			b->tried = cl->round;
			add_err(cl, KCONN_E_TRANSPORT, err);
		}
	}
	if (wake != 0 && wake < cl->deadline) {
		/* Everything untried is backing off: wait for the first. */
		refresh_arm(cl, wake);
		return;
	}
	if (cl->nerrs == 0)
		refresh_fail(cl, KCONN_E_TRANSPORT, "has no broker to ask "
		    "(all in reconnect backoff)");
	else if (cl->nerrs == 1)
		refresh_fail(cl, cl->last_kind, "%s", cl->errs);
	else
		refresh_fail(cl, cl->last_kind, "unreachable: %s", cl->errs);
}

static void step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kcluster *cl = arg;

	cl_enter(cl);
	refresh_step(cl);
	cl_leave(cl);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kcluster *cl = arg;

	cl_enter(cl);
	refresh_step(cl); /* the deadline or a backoff ended */
	cl_leave(cl);
}

static void add_waiter(struct kcluster *cl, kcluster_cb cb,
    kcluster_topics_cb tcb, void *arg)
{
	if (cl->nwaiters == cl->capwaiters) {
		size_t cap = cl->capwaiters ? cl->capwaiters * 2 : 4;
		struct waiter *w = realloc(cl->waiters, cap * sizeof(*w));
		if (w == NULL)
			fatalx("out of memory");
		cl->waiters = w;
		cl->capwaiters = cap;
	}
	cl->waiters[cl->nwaiters++] = (struct waiter){ cb, tcb, arg };
}

static void refresh_start(struct kcluster *cl, kcluster_cb cb,
    kcluster_topics_cb tcb, void *arg)
{
	struct timeval tv;

	if (cb != NULL || tcb != NULL)
		add_waiter(cl, cb, tcb, arg);
	if (!cl->refreshing) {
		/* This one answers every want so far. */
		cl->wanted = 0;
		event_del(cl->ev_want);
		cl->refreshing = 1;
		cl->round++;
		cl->errs[0] = '\0';
		cl->nerrs = 0;
		cl->last_kind = KCONN_E_OK;
		cl->deadline = clock_mono_ms() + cl->cfg->metadata_timeout_ms;
		tv.tv_sec = cl->cfg->metadata_timeout_ms / 1000;
		tv.tv_usec = (cl->cfg->metadata_timeout_ms % 1000) * 1000;
		evtimer_add(cl->ev_timer, &tv);
	}
	event_active(cl->ev_step, EV_TIMEOUT, 0);
	(void)tv;
}

void kcluster_refresh(struct kcluster *cl, kcluster_cb cb, void *arg)
{
	refresh_start(cl, cb, NULL, arg);
}

void kcluster_list_topics(struct kcluster *cl, kcluster_topics_cb cb,
    void *arg)
{
	refresh_start(cl, NULL, cb, arg);
}

static void periodic_cb(evutil_socket_t fd, short what, void *arg)
{
	kcluster_refresh(arg, NULL, NULL);
}

/* A wanted refresh, not running: now, or when the gap is over. */
static void want_arm(struct kcluster *cl)
{
	int64_t d = cl->last_end + cl->cfg->refresh_gap_ms - clock_mono_ms();
	struct timeval tv;

	if (cl->refreshing || evtimer_pending(cl->ev_want, NULL))
		return;
	if (d < 0)
		d = 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	evtimer_add(cl->ev_want, &tv);
}

static void want_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kcluster *cl = arg;

	if (cl->wanted && !cl->refreshing && !cl->freeing)
		refresh_start(cl, NULL, NULL, NULL);
}

void kcluster_want_refresh(struct kcluster *cl)
{
	if (cl->freeing)
		return;
	cl->want_used = 1;
	if (cl->wanted)
		return; /* already armed, or after the running refresh */
	cl->wanted = 1;
	want_arm(cl); /* refresh_finish() arms it if one runs */
}

/* ---- lifecycle ------------------------------------------------------- */

static void really_free(struct kcluster *cl)
{
	for (int i = 0; i < cl->nboot; i++)
		broker_fini(&cl->boot[i]);
	free(cl->boot);
	for (size_t i = 0; i < cl->nbrokers; i++)
		broker_fini(&cl->brokers[i]);
	free(cl->brokers);
	topics_free(cl->topics, cl->ntopics);
	for (size_t i = 0; i < cl->nextra; i++)
		free(cl->extra[i].name);
	free(cl->extra);
	free(cl->cluster_id);
	free(cl->waiters);
	if (cl->ev_step != NULL)
		event_free(cl->ev_step);
	if (cl->ev_timer != NULL)
		event_free(cl->ev_timer);
	if (cl->ev_periodic != NULL)
		event_free(cl->ev_periodic);
	if (cl->ev_want != NULL)
		event_free(cl->ev_want);
	if (cl->ev_free != NULL)
		event_free(cl->ev_free);
	free(cl);
}

static void free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kcluster *cl = arg;

	if (cl->busy == 0)
		really_free(cl);
}

struct kcluster *kcluster_new(struct event_base *base, struct evdns_base *dns,
    const struct kcluster_config *cfg, char *err, size_t errlen)
{
	struct hostport hp[KCLUSTER_MAX_BOOTSTRAP];
	struct kcluster *cl;
	char e2[512];
	int n;

	n = parse_bootstrap(cfg->bootstrap, hp, KCLUSTER_MAX_BOOTSTRAP, e2,
	    sizeof(e2));
	if (n < 0) {
		snprintf(err, errlen, "%s cluster: %s", cfg->name, e2);
		return NULL;
	}
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL)
		goto oom;
	cl->base = base;
	cl->dns = dns;
	cl->cfg = cfg;
	cl->md_version = -1;
	cl->controller_id = -1;
	cl->rng = (uint64_t)clock_mono_ms() * 0x9e3779b97f4a7c15ull ^
	    (uint64_t)getpid() ^ (uint64_t)(uintptr_t)cl;
	if (cl->rng == 0)
		cl->rng = 1;
	cl->boot = calloc((size_t)n, sizeof(*cl->boot));
	cl->ev_step = event_new(base, -1, 0, step_cb, cl);
	cl->ev_timer = evtimer_new(base, timer_cb, cl);
	cl->ev_periodic = evtimer_new(base, periodic_cb, cl);
	cl->ev_want = evtimer_new(base, want_cb, cl);
	cl->ev_free = event_new(base, -1, 0, free_cb, cl);
	if (cl->boot == NULL || cl->ev_step == NULL || cl->ev_timer == NULL ||
	    cl->ev_periodic == NULL || cl->ev_want == NULL ||
	    cl->ev_free == NULL)
		goto oom;
	for (int i = 0; i < n; i++) {
		cl->boot[i].node = -1 - i;
		cl->boot[i].port = hp[i].port;
		cl->boot[i].cl = cl;
		cl->boot[i].host = strdup(hp[i].host);
		cl->nboot++;
		if (cl->boot[i].host == NULL)
			goto oom;
	}
	return cl;
oom:
	snprintf(err, errlen, "out of memory");
	if (cl != NULL)
		really_free(cl);
	return NULL;
}

void kcluster_free(struct kcluster *cl)
{
	char msg[256];

	if (cl == NULL || cl->freeing)
		return;
	cl->freeing = 1;
	cl_enter(cl);
	event_del(cl->ev_periodic);
	event_del(cl->ev_want);
	if (cl->refreshing) {
		snprintf(msg, sizeof(msg), "%s cluster: closed while refreshing "
		    "metadata", cl->cfg->name);
		refresh_finish(cl, KCONN_E_CLOSED, msg);
	}
	/* Close the connections now; their callbacks must not see us. */
	for (int i = 0; i < cl->nboot; i++) {
		if (cl->boot[i].conn != NULL) {
			kconn_free(cl->boot[i].conn);
			cl->boot[i].conn = NULL;
		}
	}
	for (size_t i = 0; i < cl->nbrokers; i++) {
		if (cl->brokers[i].conn != NULL) {
			kconn_free(cl->brokers[i].conn);
			cl->brokers[i].conn = NULL;
		}
	}
	if (--cl->busy == 0)
		really_free(cl);
}

/* ---- queries --------------------------------------------------------- */

static const struct ctopic *find_topic(const struct kcluster *cl,
    const char *name)
{
	struct ctopic key = { .name = (char *)(uintptr_t)name };

	if (cl->ntopics == 0)
		return NULL;
	return bsearch(&key, cl->topics, cl->ntopics, sizeof(key), cmp_topic);
}

int kcluster_has_metadata(const struct kcluster *cl)
{
	return cl->have_md;
}

const char *kcluster_cluster_id(const struct kcluster *cl)
{
	return cl->cluster_id;
}

int32_t kcluster_controller_id(const struct kcluster *cl)
{
	return cl->controller_id;
}

int kcluster_metadata_version(const struct kcluster *cl)
{
	return cl->md_version;
}

int64_t kcluster_metadata_age_ms(const struct kcluster *cl)
{
	return cl->have_md ? clock_mono_ms() - cl->md_at : -1;
}

const char *kcluster_name(const struct kcluster *cl)
{
	return cl->cfg->name;
}

int32_t kcluster_topic_partitions(const struct kcluster *cl, const char *topic)
{
	const struct ctopic *t = find_topic(cl, topic);

	return t != NULL ? t->pub.npart : -1;
}

const struct kcluster_topic *kcluster_topic(const struct kcluster *cl,
    const char *topic)
{
	const struct ctopic *t = find_topic(cl, topic);

	return t != NULL ? &t->pub : NULL;
}

size_t kcluster_topic_count(const struct kcluster *cl)
{
	return cl->ntopics;
}

const struct kcluster_topic *kcluster_topic_at(const struct kcluster *cl,
    size_t i)
{
	return i < cl->ntopics ? &cl->topics[i].pub : NULL;
}

int kcluster_leaders_moved(const struct kcluster *cl)
{
	return cl->leaders_moved;
}

int32_t kcluster_leader(const struct kcluster *cl, const char *topic,
    int32_t partition, int32_t *leader_epoch)
{
	const struct ctopic *t = find_topic(cl, topic);

	if (leader_epoch != NULL)
		*leader_epoch = -1;
	if (t == NULL || partition < 0 || partition >= t->pub.npart)
		return KCLUSTER_UNKNOWN;
	if (leader_epoch != NULL)
		*leader_epoch = t->pub.leader_epoch[partition];
	return t->pub.leader[partition];
}

size_t kcluster_broker_count(const struct kcluster *cl)
{
	return cl->nbrokers;
}

int kcluster_broker_at(const struct kcluster *cl, size_t i, int32_t *node,
    const char **host, int *port, const char **rack)
{
	if (i >= cl->nbrokers)
		return -1;
	*node = cl->brokers[i].node;
	*host = cl->brokers[i].host;
	*port = cl->brokers[i].port;
	if (rack != NULL)
		*rack = cl->brokers[i].rack;
	return 0;
}

struct kconn *kcluster_broker_conn(struct kcluster *cl, int32_t node,
    char *err, size_t errlen)
{
	struct cbroker key = { .node = node }, *b;
	char e2[1024];
	struct kconn *c;

	b = cl->nbrokers ? bsearch(&key, cl->brokers, cl->nbrokers,
	    sizeof(key), cmp_broker) : NULL;
	if (b == NULL) {
		snprintf(err, errlen, "%s cluster: broker %d is not in the "
		    "metadata", cl->cfg->name, node);
		return NULL;
	}
	c = broker_conn(cl, b, e2, sizeof(e2));
	if (c == NULL)
		snprintf(err, errlen, "%s cluster broker %d: %s", cl->cfg->name,
		    node, e2);
	return c;
}

void kcluster_set_stats_cb(struct kcluster *cl, kconn_stats_fn fn, void *arg)
{
	cl->stats = fn;
	cl->stats_arg = arg;
	for (int i = 0; i < cl->nboot; i++)
		if (cl->boot[i].conn != NULL)
			kconn_set_stats_cb(cl->boot[i].conn, fn, arg);
	for (size_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i].conn != NULL)
			kconn_set_stats_cb(cl->brokers[i].conn, fn, arg);
}

struct kconn *kcluster_leader_conn(struct kcluster *cl, const char *topic,
    int32_t partition, char *err, size_t errlen)
{
	int32_t leader = kcluster_leader(cl, topic, partition, NULL);

	if (leader == KCLUSTER_UNKNOWN) {
		snprintf(err, errlen, "%s cluster: %s-%d is not in the metadata",
		    cl->cfg->name, topic, partition);
		return NULL;
	}
	if (leader == KCLUSTER_NO_LEADER) {
		snprintf(err, errlen, "%s cluster: %s-%d has no leader",
		    cl->cfg->name, topic, partition);
		return NULL;
	}
	return kcluster_broker_conn(cl, leader, err, errlen);
}

struct kconn *kcluster_open_conn(struct kcluster *cl, const char *host,
    int port, kconn_event_cb cb, void *arg, char *err, size_t errlen)
{
	struct kconn *c = kconn_new(cl->base, cl->dns, &cl->cfg->conn, host,
	    port, cb, arg, err, errlen);

	if (c != NULL && cl->stats != NULL)
		kconn_set_stats_cb(c, cl->stats, cl->stats_arg);
	return c;
}

void kcluster_set_metadata_cb(struct kcluster *cl, kcluster_cb cb, void *arg)
{
	cl->md_cb = cb;
	cl->md_arg = arg;
}

void kcluster_set_conn_cb(struct kcluster *cl, kcluster_conn_cb cb, void *arg)
{
	cl->conn_cb = cb;
	cl->conn_arg = arg;
}

void kcluster_set_topics_fn(struct kcluster *cl, kcluster_topics_fn fn,
    void *arg)
{
	cl->topics_fn = fn;
	cl->topics_arg = arg;
}

int kcluster_add_topic(struct kcluster *cl, const char *name)
{
	struct want_topic *v;
	char *copy;

	for (size_t i = 0; i < cl->nextra; i++)
		if (strcmp(cl->extra[i].name, name) == 0) {
			cl->extra[i].refs++;
			return 0;
		}
	v = realloc(cl->extra, (cl->nextra + 1) * sizeof(*v));
	if (v == NULL)
		return -1;
	cl->extra = v;
	if ((copy = strdup(name)) == NULL)
		return -1;
	cl->extra[cl->nextra].name = copy;
	cl->extra[cl->nextra].refs = 1;
	cl->nextra++;
	return 0;
}

void kcluster_remove_topic(struct kcluster *cl, const char *name)
{
	for (size_t i = 0; i < cl->nextra; i++) {
		if (strcmp(cl->extra[i].name, name) != 0)
			continue;
		if (--cl->extra[i].refs > 0)
			return;
		free(cl->extra[i].name);
		cl->extra[i] = cl->extra[--cl->nextra];
		return;
	}
}

static struct kconn *ready_conn(struct cbroker *arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (arr[i].conn != NULL && kconn_is_ready(arr[i].conn))
			return arr[i].conn;
	return NULL;
}

struct kconn *kcluster_control_conn(struct kcluster *cl)
{
	struct kconn *c;
	char err[512];
	int64_t now = clock_mono_ms();

	if (cl->freeing)
		return NULL;
	if (!cl->cfg->control_conn) {
		c = ready_conn(cl->brokers, cl->nbrokers);
		return c != NULL ? c : ready_conn(cl->boot, (size_t)cl->nboot);
	}
	if ((c = ready_conn(cl->boot, (size_t)cl->nboot)) != NULL)
		return c;
	for (int i = 0; i < cl->nboot; i++)
		if (cl->boot[i].conn != NULL)
			return NULL; /* connecting: its event comes */
	/* None open: the next bootstrap server not backing off. */
	for (int k = 0; k < cl->nboot; k++) {
		struct cbroker *b = &cl->boot[(cl->boot_next + k) % cl->nboot];

		if (b->retry_at > now)
			continue;
		cl->boot_next = (cl->boot_next + k + 1) % cl->nboot;
		if (broker_conn(cl, b, err, sizeof(err)) == NULL)
			log_info("%s cluster: %s", cl->cfg->name, err);
		return NULL;
	}
	/* Every bootstrap server backs off: a broker's connection serves. */
	return ready_conn(cl->brokers, cl->nbrokers);
}

void kcluster_conn_stats(const struct kcluster *cl, size_t *ready,
    size_t *inflight_bytes)
{
	*ready = 0;
	*inflight_bytes = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t n = pass == 0 ? (size_t)cl->nboot : cl->nbrokers;
		const struct cbroker *arr = pass == 0 ? cl->boot : cl->brokers;

		for (size_t i = 0; i < n; i++) {
			if (arr[i].conn == NULL || !kconn_is_ready(arr[i].conn))
				continue;
			(*ready)++;
			*inflight_bytes += kconn_inflight_bytes(arr[i].conn);
		}
	}
}

size_t kcluster_unsent_bytes(const struct kcluster *cl)
{
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		size_t cnt = pass == 0 ? (size_t)cl->nboot : cl->nbrokers;
		const struct cbroker *arr = pass == 0 ? cl->boot : cl->brokers;

		for (size_t i = 0; i < cnt; i++)
			if (arr[i].conn != NULL)
				n += kconn_unsent_bytes(arr[i].conn);
	}
	return n;
}
