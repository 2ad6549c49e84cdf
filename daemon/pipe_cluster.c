/*
 * pipe_cluster.c: one Kafka cluster as the data plane sees it: bootstrap
 * servers, a control connection for Metadata (and, on the destination,
 * InitProducerId), one connection per broker that leads something we copy,
 * and the topic -> leader cache.
 *
 * Metadata refreshes are coalesced (one in flight) and rate limited
 * (pipeline.retry_backoff_ms between two), and a periodic one runs every
 * mirror.metadata.refresh.interval.ms.  A broker whose connection fails is
 * retried with exponential backoff; the control connection walks the
 * bootstrap list.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "log.h"
#include "pipe_fsess.h"
#include "pipe_int.h"
#include "pipe_wire.h"

static int split_hostport(const char *s, size_t len, char **host, int *port)
{
	const char *colon = NULL;
	char *end;
	long v;
	char tmp[16];

	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			colon = s + i;
	if (colon == NULL || colon == s || (size_t)(s + len - colon - 1) >= sizeof(tmp) ||
	    s + len - colon - 1 == 0)
		return -1;
	memcpy(tmp, colon + 1, (size_t)(s + len - colon - 1));
	tmp[s + len - colon - 1] = '\0';
	v = strtol(tmp, &end, 10);
	if (*end != '\0' || v <= 0 || v > 65535)
		return -1;
	if (s[0] == '[' && colon[-1] == ']')
		*host = strndup(s + 1, (size_t)(colon - s - 2));
	else
		*host = strndup(s, (size_t)(colon - s));
	*port = (int)v;
	return *host == NULL ? -1 : 0;
}

struct pcluster *pcluster_new(struct pipeline *pl, const char *label,
    int is_source, const char *bootstrap, const char *const *names,
    const char *const *values, size_t n, char *err, size_t errlen)
{
	struct pcluster *cl = calloc(1, sizeof(*cl));
	const char *s = bootstrap;
	char e2[256];

	if (cl == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cl->pl = pl;
	cl->is_source = is_source;
	snprintf(cl->label, sizeof(cl->label), "%s", label);
	kconn_config_init(&cl->kcfg);
	cl->md_interval_ms = 30000;
	cl->md_wanted = 1;
	while (s != NULL && *s != '\0') {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		char **nh;
		int *np;

		while (len > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			len--;
		}
		while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
			len--;
		if (len > 0) {
			nh = realloc(cl->boot_host, (cl->nboot + 1) * sizeof(*nh));
			np = realloc(cl->boot_port, (cl->nboot + 1) * sizeof(*np));
			if (nh != NULL)
				cl->boot_host = nh;
			if (np != NULL)
				cl->boot_port = np;
			if (nh == NULL || np == NULL) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			if (split_hostport(s, len, &cl->boot_host[cl->nboot],
			    &cl->boot_port[cl->nboot]) < 0) {
				snprintf(err, errlen, "%s: bootstrap server \"%.*s\" is not host:port",
				    label, (int)len, s);
				goto fail;
			}
			cl->nboot++;
		}
		s = comma ? comma + 1 : NULL;
	}
	if (cl->nboot == 0) {
		snprintf(err, errlen, "%s: no bootstrap servers", label);
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = kconn_config_set(&cl->kcfg, names[i], values[i], e2, sizeof(e2));

		if (rc < 0) {
			snprintf(err, errlen, "%s: %s", label, e2);
			goto fail;
		}
	}
	if (kconn_config_prepare(&cl->kcfg, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: %s", label, e2);
		goto fail;
	}
	cl->boot_next = (size_t)random() % cl->nboot;
	return cl;
fail:
	pcluster_free(cl);
	return NULL;
}

static void topics_clear(struct ptopicmd *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].leader);
	}
	free(t);
}

void pcluster_free(struct pcluster *cl)
{
	if (cl == NULL)
		return;
	cl->dying = 1;
	if (cl->ctl)
		kconn_free(cl->ctl);
	for (size_t i = 0; i < cl->nbrokers; i++) {
		if (cl->brokers[i]->conn)
			kconn_free(cl->brokers[i]->conn);
		free(cl->brokers[i]->host);
		pfsess_free(cl->brokers[i]->fsess);
		free(cl->brokers[i]);
	}
	free(cl->brokers);
	topics_clear(cl->topics, cl->ntopics);
	for (size_t i = 0; i < cl->nboot; i++)
		free(cl->boot_host[i]);
	free(cl->boot_host);
	free(cl->boot_port);
	free(cl->cluster_id);
	free(cl->pid_file);
	free(cl->legacy_cluster);
	kconn_config_fini(&cl->kcfg);
	free(cl);
}

static int64_t backoff_for(const struct pipeline *pl, int failures)
{
	int64_t base = pl_backoff_ms(pl), cap = 10000, d = base;

	for (int i = 0; i < failures && d < cap; i++)
		d *= 2;
	d = MIN(d, cap);
	return d / 2 + (d > 1 ? random() % (d / 2 + 1) : 0);
}

/* ---- broker connections ------------------------------------------------ */

static void broker_event(struct kconn *c, int event, int err,
    const char *errstr, void *arg)
{
	struct pbroker *b = arg;

	(void)c;
	(void)err;
	if (event == KCONN_EV_READY) {
		b->ready = 1;
		b->failures = 0;
		log_debug("%s: broker %d (%s) ready", b->cl->label, b->id,
		    kconn_name(b->conn));
	} else {
		log_info("%s: connection to broker %d closed: %s", b->cl->label,
		    b->id, errstr ? errstr : "closed");
		kconn_free(b->conn);
		b->conn = NULL;
		b->ready = 0;
		b->fetching = 0;
		b->failures++;
		b->retry_at = clock_mono_ms() + backoff_for(b->cl->pl, b->failures);
		pcluster_want_metadata(b->cl);
	}
	pl_kick(b->cl->pl);
}

struct kconn *pbroker_conn(struct pbroker *b)
{
	char err[256];

	if (b->conn != NULL)
		return b->ready ? b->conn : NULL;
	if (b->cl->dying || clock_mono_ms() < b->retry_at)
		return NULL;
	b->conn = kconn_new(b->cl->pl->base, b->cl->pl->dns, &b->cl->kcfg, b->host,
	    b->port, broker_event, b, err, sizeof(err));
	if (b->conn != NULL)
		kconn_set_stats_cb(b->conn, pl_request_stats, b->cl);
	if (b->conn == NULL) {
		log_warnx("%s: broker %d: %s", b->cl->label, b->id, err);
		b->failures++;
		b->retry_at = clock_mono_ms() + backoff_for(b->cl->pl, b->failures);
	}
	return NULL;
}

static struct pbroker *broker_find(struct pcluster *cl, int32_t id)
{
	for (size_t i = 0; i < cl->nbrokers; i++)
		if (cl->brokers[i]->id == id)
			return cl->brokers[i];
	return NULL;
}

static int topicmd_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ptopicmd *)a)->name,
	    ((const struct ptopicmd *)b)->name);
}

/* cl->topics is sorted by name (md_response): O(log topics). */
const struct ptopicmd *pcluster_topic(const struct pcluster *cl,
    const char *topic)
{
	size_t lo = 0, hi = cl->ntopics;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(cl->topics[mid].name, topic);

		if (c == 0)
			return &cl->topics[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct pbroker *pcluster_leader(struct pcluster *cl, const char *topic,
    int32_t partition)
{
	const struct ptopicmd *t = pcluster_topic(cl, topic);
	struct pbroker *b;

	if (t == NULL || t->error != 0 || partition >= t->npart ||
	    t->leader[partition] < 0) {
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

/* ---- control connection and Metadata ----------------------------------- */

static void ctl_event(struct kconn *c, int event, int err, const char *errstr,
    void *arg)
{
	struct pcluster *cl = arg;

	(void)err;
	if (event == KCONN_EV_READY) {
		cl->ctl_ready = 1;
		cl->ctl_failures = 0;
	} else {
		if (!cl->dying)
			log_info("%s: control connection %s closed: %s", cl->label,
			    kconn_name(c), errstr ? errstr : "closed");
		kconn_free(cl->ctl);
		cl->ctl = NULL;
		cl->ctl_ready = 0;
		cl->ctl_failures++;
		cl->ctl_retry_at = clock_mono_ms() + backoff_for(cl->pl, cl->ctl_failures);
	}
	pl_kick(cl->pl);
}

/* The control connection: a known broker if there is one, else the next
 * bootstrap server. */
static struct kconn *ctl_conn(struct pcluster *cl)
{
	char err[256];
	const char *host;
	int port;

	if (cl->ctl != NULL)
		return cl->ctl_ready ? cl->ctl : NULL;
	if (cl->dying || clock_mono_ms() < cl->ctl_retry_at)
		return NULL;
	if (cl->nbrokers > 0 && cl->ctl_failures % 2 == 1) {
		struct pbroker *b = cl->brokers[(size_t)random() % cl->nbrokers];

		host = b->host;
		port = b->port;
	} else {
		host = cl->boot_host[cl->boot_next];
		port = cl->boot_port[cl->boot_next];
		cl->boot_next = (cl->boot_next + 1) % cl->nboot;
	}
	cl->ctl = kconn_new(cl->pl->base, cl->pl->dns, &cl->kcfg, host, port,
	    ctl_event, cl, err, sizeof(err));
	if (cl->ctl == NULL) {
		log_warnx("%s: %s", cl->label, err);
		cl->ctl_failures++;
		cl->ctl_retry_at = clock_mono_ms() + backoff_for(cl->pl, cl->ctl_failures);
	}
	return NULL;
}

struct kconn *pcluster_ctl(struct pcluster *cl)
{
	return ctl_conn(cl);
}

void pcluster_want_metadata(struct pcluster *cl)
{
	if (!cl->md_wanted) {
		cl->md_wanted = 1;
		pl_kick(cl->pl);
	}
}

/* A Metadata answer being collected. */
struct mdctx {
	struct pcluster *cl;
	struct pbroker **brokers;
	size_t nbrokers;
	struct ptopicmd *topics;
	size_t ntopics, cap;
	char *cluster_id;
	int oom;
};

static void md_broker(void *arg, const struct pw_md_broker *b)
{
	struct mdctx *x = arg;
	struct pbroker *nb, **arr;

	if (b->host.len <= 0 || b->port <= 0 || b->port > 65535)
		return;
	arr = realloc(x->brokers, (x->nbrokers + 1) * sizeof(*arr));
	nb = calloc(1, sizeof(*nb));
	if (arr != NULL)
		x->brokers = arr;
	if (arr == NULL || nb == NULL || (nb->host = kstr_dup(b->host)) == NULL) {
		free(nb);
		x->oom = 1;
		return;
	}
	nb->id = b->node_id;
	nb->port = b->port;
	nb->cl = x->cl;
	x->brokers[x->nbrokers++] = nb;
}

static void md_cluster_id(void *arg, struct kstr id)
{
	struct mdctx *x = arg;

	if (id.len > 0 && id.len < 256) {
		free(x->cluster_id);
		x->cluster_id = kstr_dup(id);
	}
}

static void md_part(void *arg, const struct pw_md_part *p)
{
	struct mdctx *x = arg;
	struct ptopicmd *t = NULL;

	if (p->topic.len <= 0)
		return;
	if (x->ntopics > 0 && kstr_eq(p->topic, x->topics[x->ntopics - 1].name))
		t = &x->topics[x->ntopics - 1];
	if (t == NULL) {
		if (x->ntopics == x->cap) {
			size_t cap = x->cap ? 2 * x->cap : 16;
			struct ptopicmd *arr = realloc(x->topics, cap * sizeof(*arr));

			if (arr == NULL) {
				x->oom = 1;
				return;
			}
			x->topics = arr;
			x->cap = cap;
		}
		t = &x->topics[x->ntopics];
		memset(t, 0, sizeof(*t));
		t->name = kstr_dup(p->topic);
		t->error = p->topic_error;
		t->id = p->topic_id;
		t->npart = p->npart;
		if (t->npart > MSTATE_MAX_PARTITIONS)
			t->npart = 0;
		/* leader and leader_epoch: one allocation */
		t->leader = t->npart > 0 ? malloc((size_t)t->npart * 2 * sizeof(int32_t)) : NULL;
		t->leader_epoch = t->leader != NULL ? t->leader + t->npart : NULL;
		if (t->name == NULL || (t->npart > 0 && t->leader == NULL)) {
			free(t->name);
			free(t->leader);
			x->oom = 1;
			return;
		}
		for (int32_t i = 0; i < t->npart; i++)
			t->leader[i] = t->leader_epoch[i] = -1;
		x->ntopics++;
	}
	if (p->partition >= 0 && p->partition < t->npart) {
		t->leader[p->partition] = p->error == 0 ? p->leader : -1;
		t->leader_epoch[p->partition] = p->error == 0 ? p->leader_epoch : -1;
	}
}

/*
 * 1 if a partition of the new answer has another leader than in the old
 * one (or is new).  Answers list the topics in the order asked, so the
 * same index is tried first: O(topics) for the usual answer.
 */
static int leaders_moved(const struct ptopicmd *old, size_t nold,
    const struct ptopicmd *now, size_t nnow)
{
	for (size_t i = 0; i < nnow; i++) {
		const struct ptopicmd *o = NULL;

		if (i < nold && strcmp(old[i].name, now[i].name) == 0)
			o = &old[i];
		for (size_t j = 0; o == NULL && j < nold; j++)
			if (strcmp(old[j].name, now[i].name) == 0)
				o = &old[j];
		if (o == NULL) {
			if (now[i].npart > 0)
				return 1;
			continue;
		}
		for (int32_t k = 0; k < now[i].npart; k++)
			if (k >= o->npart || o->leader[k] != now[i].leader[k])
				return 1;
	}
	return 0;
}

static void md_response(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct pcluster *cl = arg;
	struct mdctx x = { .cl = cl };
	struct pw_md_cb cb = { md_broker, md_cluster_id, md_part, &x };
	int16_t version;

	cl->md_inflight = 0;
	if (cl->dying)
		return;
	cl->md_not_before = clock_mono_ms() + pl_backoff_ms(cl->pl);
	if (err != KCONN_E_OK) {
		log_info("%s: Metadata failed: %s", cl->label, errstr);
		cl->md_wanted = 1;
		pl_kick(cl->pl);
		return;
	}
	version = (int16_t)kconn_pick_version(c, KP_API_METADATA, PW_METADATA_MIN,
	    PW_METADATA_MAX);
	if (pw_metadata_decode(body, version, &cb) < 0 || x.oom) {
		log_warnx("%s: %s: Metadata v%d response does not parse at byte %zu: %s",
		    cl->label, kconn_name(c), version, body->err_off,
		    x.oom ? "out of memory" : body->why);
		kconn_close(c, KCONN_E_PROTOCOL, "malformed Metadata response");
		goto out;
	}
	/* Merge brokers: keep connections of brokers whose address is unchanged. */
	for (size_t i = 0; i < x.nbrokers; i++) {
		struct pbroker *old = broker_find(cl, x.brokers[i]->id);

		if (old != NULL && strcmp(old->host, x.brokers[i]->host) == 0 &&
		    old->port == x.brokers[i]->port) {
			free(x.brokers[i]->host);
			free(x.brokers[i]);
			x.brokers[i] = old;
		}
	}
	for (size_t i = 0; i < cl->nbrokers; i++) {
		int kept = 0;

		for (size_t j = 0; j < x.nbrokers; j++)
			kept |= x.brokers[j] == cl->brokers[i];
		if (!kept) {
			/* Keep a gone broker whose Fetch is out until it answers:
			 * its context points at it.  Simplest: keep it listed. */
			struct pbroker **arr = realloc(x.brokers, (x.nbrokers + 1) * sizeof(*arr));

			if (arr == NULL) {
				x.oom = 1;
				continue;
			}
			x.brokers = arr;
			x.brokers[x.nbrokers++] = cl->brokers[i];
		}
	}
	free(cl->brokers);
	cl->brokers = x.brokers;
	cl->nbrokers = x.nbrokers;
	x.brokers = NULL;
	x.nbrokers = 0;
	cl->md_epochs = version >= 7;
	if (!cl->is_source && leaders_moved(cl->topics, cl->ntopics, x.topics,
	    x.ntopics))
		cl->pl->leaders_changed = 1;   /* the hook runs from the loop */
	topics_clear(cl->topics, cl->ntopics);
	if (x.ntopics > 1)
		qsort(x.topics, x.ntopics, sizeof(*x.topics), topicmd_cmp);
	cl->topics = x.topics;
	cl->ntopics = x.ntopics;
	x.topics = NULL;
	x.ntopics = 0;
	if (x.cluster_id != NULL) {
		free(cl->cluster_id);
		cl->cluster_id = x.cluster_id;
		x.cluster_id = NULL;
	}
	cl->md_last_ok = clock_mono_ms();
	cl->md_ok_once = 1;
	cl->md_gen++;
	log_debug("%s: metadata: %zu brokers, %zu topics", cl->label, cl->nbrokers,
	    cl->ntopics);
	if (cl->is_source) {
		for (size_t i = 0; i < cl->pl->nmirrors; i++)
			if (cl->pl->mirrors[i]->src == cl)
				pl_source_metadata(cl->pl->mirrors[i]);
	} else {
		pident_destination(cl->pl);
	}
	pl_kick(cl->pl);
out:
	for (size_t i = 0; i < x.nbrokers; i++) {
		free(x.brokers[i]->host);
		free(x.brokers[i]);
	}
	free(x.brokers);
	topics_clear(x.topics, x.ntopics);
	free(x.cluster_id);
}

struct md_topics {
	const char **names;
	size_t n;
};

static int md_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct md_topics *t = msg;

	return pw_metadata_encode(w, version, t->names, t->n);
}

static void send_metadata(struct pcluster *cl, struct kconn *c)
{
	struct md_topics t = { NULL, 0 };
	char err[256];
	int v = kconn_pick_version(c, KP_API_METADATA, PW_METADATA_MIN, PW_METADATA_MAX);

	if (v < 0) {
		log_warnx("%s: %s supports no Metadata version in %d..%d", cl->label,
		    kconn_name(c), PW_METADATA_MIN, PW_METADATA_MAX);
		kconn_close(c, KCONN_E_PROTOCOL, "no usable Metadata version");
		return;
	}
	if (!cl->is_source) {
		/* The destination: only the topics we write (all topics of
		 * every mirror; duplicates are harmless). */
		struct pipeline *pl = cl->pl;
		size_t n = 0;

		for (size_t i = 0; i < pl->nmirrors; i++)
			n += pl->mirrors[i]->nparts * 2;
		t.names = calloc(n + 1, sizeof(*t.names));
		if (t.names == NULL)
			return;
		for (size_t i = 0; i < pl->nmirrors; i++)
			for (size_t j = 0; j < pl->mirrors[i]->nparts; j++) {
				const char *name = pl->mirrors[i]->parts[j]->topic;

				if (t.n == 0 || strcmp(t.names[t.n - 1], name) != 0)
					t.names[t.n++] = name;
				/* A failback divergence being copied aside
				 * (pipe_preserve.c) writes there too. */
				if (pl->mirrors[i]->parts[j]->pv_state > 0 &&
				    pl->mirrors[i]->parts[j]->pv_topic != NULL)
					t.names[t.n++] = pl->mirrors[i]->parts[j]->pv_topic;
			}
		/* No topics yet: an empty list still names the brokers and the
		 * cluster (readiness, the producer identity). */
	}
	if (kconn_send(c, KP_API_METADATA, (int16_t)v, md_encode, &t, 0, 0,
	    md_response, cl, err, sizeof(err)) == 0) {
		cl->md_inflight = 1;
		cl->md_wanted = 0;
	} else {
		log_warnx("%s: Metadata: %s", cl->label, err);
	}
	free(t.names);
}

/* ---- InitProducerId (destination) ---------------------------------------- */

/*
 * Each destination partition writes with a producer identity of its own
 * (pipe_copy.c takes it, lib/mstate records it per partition), so a
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
	if (cl->kcfg.sasl_username != NULL)
		snprintf(buf, len, "User:%s", cl->kcfg.sasl_username);
	else
		snprintf(buf, len, "the principal of its %s connection",
		    kconn_security_tls(cl->kcfg.security) ? "TLS certificate" :
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

/* InitProducerId did not give an id: back off; a refusal is remembered
 * for the partitions waiting (pipe_copy.c fails them with it). */
static void pid_refused(struct pcluster *cl, int16_t code, const char *fmt, ...)
{
	va_list ap;

	cl->pid_failures++;
	cl->pid_not_before = clock_mono_ms() + backoff_for(cl->pl, cl->pid_failures);
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
	int64_t now = clock_mono_ms();
	size_t want_pid;
	struct kconn *c;

	if (cl->dying)
		return;
	if (cl->md_ok_once && now - cl->md_last_ok >= cl->md_interval_ms)
		cl->md_wanted = 1;
	/* Fresh producer ids once the destination answered Metadata. */
	want_pid = pid_wanted(cl, now);
	if (want_pid == 0 && (!cl->md_wanted || cl->md_inflight || now < cl->md_not_before))
		return;
	c = ctl_conn(cl);
	if (c == NULL)
		return;
	for (size_t i = 0; i < want_pid && !cl->pid_unsupported; i++)
		ask_pid(cl, c);
	if (cl->md_wanted && !cl->md_inflight && now >= cl->md_not_before)
		send_metadata(cl, c);
}
