/*
 * pipeline/pcluster.c: one Kafka cluster as the data plane sees it, on one
 * kcluster (lib/client/kcluster.c): the bootstrap servers, the metadata
 * (topics, partitions, leaders, leader epochs, refreshed every
 * mirror.metadata.refresh.interval.ms and on demand, coalesced, at least
 * pipeline.retry_backoff_ms apart), one connection per broker opened on
 * use and reopened with backoff and jitter, and a control connection of
 * its own for Metadata and control requests.
 *
 * What is the data plane's own stays here: per-broker Fetch state
 * (struct pbroker), the metadata generation partitions cache their leader
 * by, the destination's choice of topics to ask about, the hooks a
 * Metadata answer runs (discovery, identity checks, placement), and the
 * destination's producer ids (InitProducerId).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "fsess.h"
#include "pipe_int.h"
#include "wire.h"

static void on_metadata(struct kcluster *kc, int err, const char *errstr,
    void *arg);
static void on_conn(struct kcluster *kc, int32_t node, int event,
    const char *errstr, void *arg);
static int dst_topics(struct kcluster *kc, const char ***names, size_t *n,
    void *arg);

struct pcluster *pcluster_new(struct pipeline *pl, const char *label,
    int is_source, const char *bootstrap, const char *const *names,
    const char *const *values, size_t n, char *err, size_t errlen)
{
	struct pcluster *cl = calloc(1, sizeof(*cl));
	char e2[600];

	if (cl == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cl->pl = pl;
	cl->is_source = is_source;
	cl->born_ms = clock_wall_ms();
	snprintf(cl->label, sizeof(cl->label), "%s", label);
	kcluster_config_init(&cl->kcfg, label);
	cl->kcfg.metadata_refresh_ms = 30000;
	cl->kcfg.refresh_gap_ms = (int)pl_backoff_ms(pl);
	cl->kcfg.reconnect_backoff_ms = (int)pl_backoff_ms(pl);
	cl->kcfg.control_conn = 1;
	free(cl->kcfg.bootstrap);
	if ((cl->kcfg.bootstrap = strdup(bootstrap != NULL ? bootstrap : "")) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		/* The client properties: connection and security ones (the
		 * cluster's timings are the pipeline's settings). */
		if (kconn_config_set(&cl->kcfg.conn, names[i], values[i], e2,
		    sizeof(e2)) < 0) {
			snprintf(err, errlen, "%s: %s", label, e2);
			goto fail;
		}
	}
	if (kcluster_config_prepare(&cl->kcfg, e2, sizeof(e2)) < 0 ||
	    (cl->kc = kcluster_new(pl->base, pl->dns, &cl->kcfg, e2,
	    sizeof(e2))) == NULL) {
		snprintf(err, errlen, "%s", e2);
		goto fail;
	}
	kcluster_set_metadata_cb(cl->kc, on_metadata, cl);
	kcluster_set_conn_cb(cl->kc, on_conn, cl);
	kcluster_set_stats_cb(cl->kc, pl_request_stats, cl);
	if (!is_source)
		kcluster_set_topics_fn(cl->kc, dst_topics, cl);
	return cl;
fail:
	pcluster_free(cl);
	return NULL;
}

void pcluster_free(struct pcluster *cl)
{
	if (cl == NULL)
		return;
	cl->dying = 1;
	kcluster_free(cl->kc); /* fails its requests now; memory deferred */
	for (size_t i = 0; i < cl->nbrokers; i++) {
		pfsess_free(cl->brokers[i]->fsess);
		free(cl->brokers[i]);
	}
	free(cl->brokers);
	free(cl->cluster_id);
	free(cl->pid_file);
	free(cl->legacy_cluster);
	kcluster_config_fini(&cl->kcfg);
	free(cl);
}

struct kcluster *pipeline_destination_kcluster(struct pipeline *pl)
{
	return pl != NULL && pl->dst != NULL && !pl->dst->dying ?
	    pl->dst->kc : NULL;
}

void pcluster_set_refresh_ms(struct pcluster *cl, int64_t ms)
{
	/* kcluster reads it when it arms the next periodic refresh */
	cl->kcfg.metadata_refresh_ms = (int)MIN(ms, 86400000);
}

int pcluster_ready(const struct pcluster *cl, int64_t *age_ms)
{
	*age_ms = kcluster_metadata_age_ms(cl->kc);
	return cl->md_ok_once;
}

int64_t pcluster_refresh_ms(const struct pcluster *cl)
{
	return cl->kcfg.metadata_refresh_ms;
}

/* ---- brokers ------------------------------------------------------------ */

static struct pbroker *broker_find(struct pcluster *cl, int32_t id)
{
	for (size_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i]->id == id)
			return cl->brokers[i];
	return NULL;
}

/* A pbroker for every broker of the metadata.  Gone ones stay listed (a
 * Fetch's context may point at one; their connection is kcluster's, which
 * has none for them). */
static void brokers_merge(struct pcluster *cl)
{
	size_t n = kcluster_broker_count(cl->kc);

	for (size_t i = 0; i < n; i++) {
		struct pbroker *b, **arr;
		const char *host, *rack;
		int32_t node;
		int port;

		if (kcluster_broker_at(cl->kc, i, &node, &host, &port, &rack) != 0 ||
		    broker_find(cl, node) != NULL)
			continue;
		arr = realloc(cl->brokers, (cl->nbrokers + 1) * sizeof(*arr));
		if (arr == NULL || (b = calloc(1, sizeof(*b))) == NULL) {
			if (arr != NULL)
				cl->brokers = arr;
			log_warnx("%s: out of memory for broker %d", cl->label, node);
			continue;
		}
		cl->brokers = arr;
		b->cl = cl;
		b->id = node;
		cl->brokers[cl->nbrokers++] = b;
	}
}

struct kconn *pbroker_conn(struct pbroker *b)
{
	char err[512];
	struct kconn *c;

	if (b->cl->dying)
		return NULL;
	c = kcluster_broker_conn(b->cl->kc, b->id, err, sizeof(err));
	if (c == NULL)
		log_debug("%s: %s", b->cl->label, err);
	return c != NULL && kconn_is_ready(c) ? c : NULL;
}

static void on_conn(struct kcluster *kc, int32_t node, int event,
    const char *errstr, void *arg)
{
	struct pcluster *cl = arg;
	struct pbroker *b;

	(void)kc;
	if (cl->dying)
		return;
	if (event == KCONN_EV_READY && node >= 0 &&
	    (b = broker_find(cl, node)) != NULL) {
		/* Reached and logged in: a failure before (the broker closed
		 * an idle connection, or was down) is over. */
		ph_ok(&b->health, clock_wall_ms());
	}
	if (event != KCONN_EV_READY) {
		/* Not logged here: a broker that refuses every reconnect
		 * would fill the log; pipeline/health.c logs a mirror's source
		 * going and coming back, kcluster the Metadata failures. */
		if (node >= 0)
			log_debug("%s: connection to broker %d closed: %s", cl->label,
			    node, errstr != NULL ? errstr : "closed");
		if ((b = broker_find(cl, node)) != NULL) {
			b->fetching = 0;
			ph_cl_fail(cl, &b->health, ph_conn_cause(KCONN_E_TRANSPORT,
			    errstr), "broker %d: %s", node, errstr != NULL ? errstr :
			    "connection closed");
		}
		pcluster_want_metadata(cl);
	}
	pl_kick(cl->pl);
}

/* ---- metadata ------------------------------------------------------------ */

const struct kcluster_topic *pcluster_topic(const struct pcluster *cl,
    const char *topic)
{
	return kcluster_topic(cl->kc, topic);
}

struct pbroker *pcluster_leader(struct pcluster *cl, const char *topic,
    int32_t partition)
{
	const struct kcluster_topic *t = kcluster_topic(cl->kc, topic);
	struct pbroker *b;

	if (t == NULL || t->error != 0 || partition < 0 ||
	    partition >= t->npart || t->leader[partition] < 0) {
		pcluster_want_metadata(cl);
		return NULL;
	}
	b = broker_find(cl, t->leader[partition]);
	if (b == NULL)
		pcluster_want_metadata(cl);
	return b;
}

struct pbroker *ppart_leader(struct ppart *p, int is_dst)
{
	struct pcluster *cl = is_dst ? p->pm->pl->dst : p->pm->src;
	struct pbroker **cache = is_dst ? &p->dst_leader : &p->src_leader;
	uint32_t *gen = is_dst ? &p->dst_md_gen : &p->src_md_gen;

	if (*cache == NULL || *gen != cl->md_gen) {
		*cache = pcluster_leader(cl, p->topic, p->index);
		*gen = cl->md_gen;
	}
	if (*cache == NULL)
		pcluster_want_metadata(cl);
	return *cache;
}

struct kconn *pcluster_ctl(struct pcluster *cl)
{
	return cl->dying ? NULL : kcluster_control_conn(cl->kc);
}

void pcluster_want_metadata(struct pcluster *cl)
{
	if (!cl->dying)
		kcluster_want_refresh(cl->kc);
}

/* The destination: only the topics we write (every mirror's, and a
 * failback divergence's aside topic being written, pipeline/preserve.c).  No
 * topics yet: an empty list still names the brokers and the cluster
 * (readiness, the producer identity). */
static int dst_topics(struct kcluster *kc, const char ***names, size_t *n,
    void *arg)
{
	struct pcluster *cl = arg;
	struct pipeline *pl = cl->pl;
	size_t cap = 0, k = 0;
	const char **t;

	(void)kc;
	for (size_t i = 0; i < pl->nmirrors; i++)
		cap += pl->mirrors[i]->nparts * 2;
	if ((t = calloc(cap + 1, sizeof(*t))) == NULL)
		return -1;
	for (size_t i = 0; i < pl->nmirrors; i++)
		for (size_t j = 0; j < pl->mirrors[i]->nparts; j++) {
			const struct ppart *p = pl->mirrors[i]->parts[j];

			if (k == 0 || strcmp(t[k - 1], p->topic) != 0)
				t[k++] = p->topic;
			if (p->pv_state > 0 && p->pv_topic != NULL)
				t[k++] = p->pv_topic;
		}
	*names = t;
	*n = k;
	return 0;
}

static void on_metadata(struct kcluster *kc, int err, const char *errstr,
    void *arg)
{
	struct pcluster *cl = arg;
	const char *cid;

	if (cl->dying)
		return;
	if (err != KCONN_E_OK) {
		/* kcluster logged it and asks again after the gap */
		log_debug("%s: Metadata failed: %s", cl->label, errstr);
		ph_cl_fail(cl, &cl->md, ph_conn_cause(err, errstr), "%s",
		    errstr != NULL ? errstr : "Metadata failed");
		pl_kick(cl->pl);
		return;
	}
	ph_ok(&cl->md, clock_wall_ms());
	brokers_merge(cl);
	cl->md_epochs = kcluster_metadata_version(kc) >= 7;
	if (!cl->is_source && kcluster_leaders_moved(kc))
		cl->pl->leaders_changed = 1;   /* the hook runs from the loop */
	/* The cluster id stays when an answer has none. */
	if ((cid = kcluster_cluster_id(kc)) != NULL && cid[0] != '\0' &&
	    (cl->cluster_id == NULL || strcmp(cl->cluster_id, cid) != 0)) {
		char *c = strdup(cid);

		if (c != NULL) {
			free(cl->cluster_id);
			cl->cluster_id = c;
		}
	}
	cl->md_ok_once = 1;
	cl->md_gen++;
	log_debug("%s: metadata: %zu brokers, %zu topics", cl->label,
	    kcluster_broker_count(kc), kcluster_topic_count(kc));
	if (cl->is_source) {
		for (size_t i = 0; i < cl->pl->nmirrors; i++)
			if (cl->pl->mirrors[i]->src == cl)
				pl_source_metadata(cl->pl->mirrors[i]);
	} else {
		pident_destination(cl->pl);
	}
	pl_kick(cl->pl);
}

/* ---- InitProducerId (destination) ---------------------------------------- */

/*
 * Each destination partition writes with a producer identity of its own
 * (pipeline/copy.c takes it, lib/mstate records it per partition), so a
 * sequence error on one partition never touches another's.  Fresh ids come
 * from a small pool: InitProducerId with a null transactional id hands out
 * a new idempotent producer id each time; the pool asks for as many as
 * partitions found it empty (up to PID_POOL_MAX, PID_INFLIGHT_MAX requests
 * pipelined on the control connection), so 10,000 new partitions cost
 * 10,000 small requests in flight 64 at a time (with 8, each loop sweep
 * over 10,000 partitions handed out 8: 70 ids a second in make
 * bench-scale), and a restart none (the identities are in the metadata
 * log).
 *
 * Versions before per-partition identities kept one id for every partition
 * in <storage.data_dir>/producer-id ("<cluster id> <producer id> <epoch>",
 * then older ids one a line).  That file is only read now: batches written
 * under those ids (sequence = offset) are still recognised as mirrord's.
 */
static void pid_remember(struct pcluster *cl, int64_t pid)
{
	if (pid < 0 || cl->nused >= ARRAY_SIZE(cl->used_pids))
		return;
	for (size_t i = 0; i < cl->nused; i++)
		if (cl->used_pids[i] == pid)
			return;
	cl->used_pids[cl->nused++] = pid;
}

int pcluster_pid_legacy(const struct pcluster *cl, int64_t pid)
{
	/* Ids of another cluster prove nothing here. */
	if (pid < 0 || (cl->legacy_cluster != NULL && cl->cluster_id != NULL &&
	    strcmp(cl->legacy_cluster, "-") != 0 &&
	    strcmp(cl->legacy_cluster, cl->cluster_id) != 0))
		return 0;
	for (size_t i = 0; i < cl->nused; i++)
		if (cl->used_pids[i] == pid)
			return 1;
	return 0;
}

void pcluster_load_pid(struct pcluster *cl, const char *dir)
{
	char path[4096], line[512], cid[256];
	long long pid;
	int epoch;
	FILE *f;

	if (dir == NULL || snprintf(path, sizeof(path), "%s/producer-id", dir) >=
	    (int)sizeof(path))
		return;
	free(cl->pid_file);
	cl->pid_file = strdup(path);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fgets(line, sizeof(line), f) != NULL &&
	    sscanf(line, "%255s %lld %d", cid, &pid, &epoch) == 3 && pid >= 0) {
		free(cl->legacy_cluster);
		cl->legacy_cluster = strdup(cid);
		pid_remember(cl, pid);
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "%lld", &pid) == 1)
				pid_remember(cl, pid);
		log_info("%s: %zu producer id%s of an earlier version read from %s "
		    "(recognised as mirrord's; every partition now writes with "
		    "its own)", cl->label, cl->nused, cl->nused == 1 ? "" : "s",
		    path);
	}
	fclose(f);
}

const char *pcluster_principal(const struct pcluster *cl, char *buf,
    size_t len)
{
	if (cl->kcfg.conn.sasl_username != NULL)
		snprintf(buf, len, "User:%s", cl->kcfg.conn.sasl_username);
	else
		snprintf(buf, len, "the principal of its %s connection",
		    kconn_security_tls(cl->kcfg.conn.security) ? "TLS certificate" :
		    "PLAINTEXT (User:ANONYMOUS)");
	return buf;
}

int pcluster_take_pid(struct pcluster *cl, int64_t *pid, int16_t *epoch)
{
	if (cl->npool == 0) {
		cl->pid_demand++; /* the loop asks after its produce round */
		return -1;
	}
	cl->npool--;
	*pid = cl->pid_pool[cl->npool].pid;
	*epoch = cl->pid_pool[cl->npool].epoch;
	return 0;
}

static int pid_encode(struct kw *w, int16_t version, const void *msg)
{
	return kp_init_producer_id_request_encode(w, version, msg);
}

static void pid_refused(struct pcluster *cl, int16_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The wait before asking again after n refusals in a row: exponential
 * from pipeline.retry_backoff_ms up to 10 s, the upper half jittered. */
static int64_t backoff_for(const struct pipeline *pl, int failures)
{
	int64_t base = pl_backoff_ms(pl), cap = 10000, d = base;

	for (int i = 0; i < failures && d < cap; i++)
		d *= 2;
	d = MIN(d, cap);
	return d / 2 + (d > 1 ? random() % (d / 2 + 1) : 0);
}

/* InitProducerId did not give an id: back off; a refusal is remembered
 * for the partitions waiting (pipeline/copy.c fails them with it). */
static void pid_refused(struct pcluster *cl, int16_t code, const char *fmt, ...)
{
	va_list ap;
	int64_t now = clock_mono_ms();

	/* One step of the backoff per wait: the other requests in flight
	 * when the first refusal came were sent before it and are refused
	 * for the same reason.  (A broker whose block of 1,000 producer ids
	 * ran out answers COORDINATOR_LOAD_IN_PROGRESS until the controller
	 * gives it the next, milliseconds later; counting each of 64
	 * refusals sent the backoff to its 10 s cap, a pause per 1,000
	 * partitions of a new mirror.) */
	if (now >= cl->pid_not_before) {
		cl->pid_failures++;
		cl->pid_not_before = now + backoff_for(cl->pl, cl->pid_failures);
	}
	if (code == 0) {
		char why[400];

		/* pid_why keeps the last refusal's reason for the partitions. */
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		log_info("%s: InitProducerId: %s", cl->label, why);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(cl->pid_why, sizeof(cl->pid_why), fmt, ap);
	va_end(ap);
	if (cl->pid_error != code)
		log_warnx("%s: %s", cl->label, cl->pid_why);
	cl->pid_error = code;
	cl->pid_refused_at = clock_mono_ms();
	pl_kafka_error(cl, KP_API_INIT_PRODUCER_ID, code);
	pl_kick(cl->pl);
}

static void pid_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pcluster *cl = arg;
	struct kp_init_producer_id_response m;
	struct karena *a;
	char who[300];
	int16_t version;
	int rc;

	if (cl->dying)
		return;
	cl->pid_inflight--;
	if (err != KCONN_E_OK) {
		pid_refused(cl, 0, "%s", errstr);
		return;
	}
	version = (int16_t)kconn_pick_version(c, KP_API_INIT_PRODUCER_ID,
	    PW_INIT_PID_MIN, PW_INIT_PID_MAX);
	/* The body has no arrays: the arena is never used. */
	if ((a = karena_new(256)) == NULL) {
		pid_refused(cl, 0, "out of memory");
		return;
	}
	rc = kp_init_producer_id_response_decode(body, a, version, &m);
	karena_free(a);
	if (rc < 0) {
		log_warnx("%s: %s: InitProducerId response does not parse: %s",
		    cl->label, kconn_name(c), body->why);
		pid_refused(cl, 0, "malformed response");
		return;
	}
	if (m.error_code != 0 && !pl_is_denial(m.error_code)) {
		/* COORDINATOR_LOAD_IN_PROGRESS after a broker start, and the
		 * like: asked again after the backoff. */
		pl_kafka_error(cl, KP_API_INIT_PRODUCER_ID, m.error_code);
		pid_refused(cl, 0, "%s answered %s", kconn_name(c),
		    kerr_name(m.error_code));
		return;
	}
	if (m.error_code != 0) {
		pid_refused(cl, m.error_code, "InitProducerId refused by %s: %s (%s "
		    "needs IdempotentWrite on the cluster or WRITE on a topic)",
		    kconn_name(c), kerr_name(m.error_code),
		    pcluster_principal(cl, who, sizeof(who)));
		return;
	}
	if (m.producer_id < 0 || m.producer_epoch < 0) {
		pid_refused(cl, 0, "the answer holds producer id %" PRId64 " epoch %d",
		    m.producer_id, m.producer_epoch);
		return;
	}
	if (cl->pid_error != 0)
		log_info("%s: InitProducerId answers again (it was refused: %s)",
		    cl->label, kerr_name(cl->pid_error));
	cl->pid_error = 0;
	cl->pid_failures = 0;
	if (cl->npool < PID_POOL_MAX) {
		cl->pid_pool[cl->npool].pid = m.producer_id;
		cl->pid_pool[cl->npool].epoch = m.producer_epoch;
		cl->npool++;
	}
	log_debug("%s: fresh producer id %" PRId64 " epoch %d (%zu in the pool)",
	    cl->label, m.producer_id, m.producer_epoch, cl->npool);
	pl_kick(cl->pl);
}

static void ask_pid(struct pcluster *cl, struct kconn *c)
{
	struct kp_init_producer_id_request req;
	char err[256];
	int v = kconn_pick_version(c, KP_API_INIT_PRODUCER_ID, PW_INIT_PID_MIN,
	    PW_INIT_PID_MAX);

	if (v < 0) {
		log_warnx("%s: %s has no InitProducerId v0-v1: producing without "
		    "producer ids", cl->label, kconn_name(c));
		cl->pid_unsupported = 1;
		pl_kick(cl->pl);
		return;
	}
	kp_init_producer_id_request_init(&req);
	req.transactional_id = KSTR_NULL; /* idempotent only */
	req.transaction_timeout_ms = 60000;
	if (kconn_send(c, KP_API_INIT_PRODUCER_ID, (int16_t)v, pid_encode, &req, 0, 0,
	    pid_response, cl, err, sizeof(err)) == 0)
		cl->pid_inflight++;
	else
		log_debug("%s: InitProducerId: %s", cl->label, err);
}

/* How many more InitProducerId requests to send now. */
static size_t pid_wanted(const struct pcluster *cl, int64_t now)
{
	size_t want;

	if (cl->is_source || cl->pid_unsupported || !cl->md_ok_once ||
	    cl->pid_demand == 0 || now < cl->pid_not_before ||
	    cl->pid_inflight >= PID_INFLIGHT_MAX)
		return 0;
	want = MIN(cl->pid_demand, (size_t)PID_POOL_MAX);
	if (cl->npool + (size_t)cl->pid_inflight >= want)
		return 0;
	want -= cl->npool + (size_t)cl->pid_inflight;
	return MIN(want, (size_t)(PID_INFLIGHT_MAX - cl->pid_inflight));
}

void pcluster_tick(struct pcluster *cl)
{
	size_t want_pid;
	struct kconn *c;

	if (cl->dying)
		return;
	/* pipeline.retry_backoff_ms may change with a reload */
	cl->kcfg.refresh_gap_ms = (int)pl_backoff_ms(cl->pl);
	/* Until the first answer (kcluster retries a failed refresh it was
	 * asked for after the gap; this covers one that was never asked). */
	if (!cl->md_ok_once)
		pcluster_want_metadata(cl);
	/* Fresh producer ids once the destination answered Metadata. */
	want_pid = pid_wanted(cl, clock_mono_ms());
	if (want_pid == 0 || (c = pcluster_ctl(cl)) == NULL)
		return;
	for (size_t i = 0; i < want_pid && !cl->pid_unsupported; i++)
		ask_pid(cl, c);
}
