/*
 * srclookup.c: see srclookup.h.  A thin use of kcluster: a private cluster
 * object with the mirror's client settings, one kcluster_list_topics(), and
 * a deferred hand-off of the result.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kp_gen.h"
#include "kproto.h"
#include "log.h"
#include "mirrorconf.h"
#include "mirrormark.h"
#include "mstate.h"
#include "secrets.h"
#include "clientfiles.h"
#include "srclookup.h"

struct srclookup {
	struct event_base *base;
	struct kcluster_config cfg;
	struct kcluster *cl;
	struct mirrorconf *mc;
	struct clientfiles *files;      /* reading the mirror's files */
	struct secrets_resolve *resolving; /* reading the files references name */
	char **allowed;              /* mirrors.allowed_file_dirs, copied */
	struct event *files_timer;   /* bounds that by timeout_ms */
	int timeout_ms;
	srclookup_cb cb;
	void *arg;
	int done;
	/* The answer while the marks are read: topics sorted by name, names
	 * and marks owned. */
	struct srctopic *topics;
	size_t ntopics;
	char *cluster_id;
};

#define SRCLOOKUP_MARK_TIMEOUT_MS 5000

const struct srctopic *srclookup_find(const struct srctopic *topics, size_t n,
    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(topics[i].name, name) == 0)
			return &topics[i];
	return NULL;
}

static void answer(struct srclookup *l)
{
	l->done = 1;
	l->cb(l->arg, 1, NULL, l->cluster_id, l->topics, l->ntopics);
}

static int topic_cmp(const void *a, const void *b)
{
	return strcmp(((const struct srctopic *)a)->name,
	    ((const struct srctopic *)b)->name);
}

static void marks_fetched(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct srclookup *l = arg;
	struct kp_offset_fetch_response resp;
	struct karena *a;

	(void)c;
	if (l->done)
		return;
	if (err != KCONN_E_OK) {
		log_debug("%s: no mirror marks: OffsetFetch: %s", l->cfg.bootstrap,
		    errstr);
		answer(l);
		return;
	}
	if ((a = karena_new(64u << 20)) != NULL &&
	    kp_offset_fetch_response_decode(body, a, 2, &resp) == 0 &&
	    !body->err && resp.error_code == 0) {
		for (int32_t t = 0; t < resp.topics_n; t++) {
			const struct kp_offset_fetch_response_topic *rt =
			    &resp.topics[t];
			struct srctopic key, *st;
			char name[256];

			if (rt->name.len <= 0 || rt->name.len >= (int32_t)sizeof(name))
				continue;
			memcpy(name, rt->name.p, (size_t)rt->name.len);
			name[rt->name.len] = '\0';
			key.name = name;
			st = bsearch(&key, l->topics, l->ntopics, sizeof(*l->topics),
			    topic_cmp);
			for (int32_t i = 0; st != NULL && i < rt->partitions_n; i++) {
				const struct kp_offset_fetch_response_partition *pp =
				    &rt->partitions[i];

				if (pp->partition_index != 0 || pp->error_code != 0 ||
				    pp->committed_offset < 0 || pp->metadata.len <= 0 ||
				    strncmp(pp->metadata.p, MIRRORMARK_PREFIX,
				    MIN((size_t)pp->metadata.len,
				    strlen(MIRRORMARK_PREFIX))) != 0)
					continue;
				free((char *)st->mark);
				st->mark = strndup(pp->metadata.p,
				    (size_t)pp->metadata.len);
			}
		}
	} else {
		log_debug("%s: no mirror marks: OffsetFetch answer malformed or "
		    "refused", l->cfg.bootstrap);
	}
	karena_free(a);
	answer(l);
}

static void marks_coordinator(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct srclookup *l = arg;
	struct kp_find_coordinator_response resp;
	struct kp_offset_fetch_request req;
	struct kp_offset_fetch_request_topic *ts = NULL;
	struct karena *a = NULL;
	struct kconn *coord;
	char e[300];
	static int32_t zero = 0;

	(void)c;
	if (l->done)
		return;
	if (err != KCONN_E_OK || (a = karena_new(1 << 20)) == NULL ||
	    kp_find_coordinator_response_decode(body, a, 1, &resp) < 0 ||
	    body->err || resp.error_code != 0) {
		log_debug("%s: no mirror marks: FindCoordinator: %s",
		    l->cfg.bootstrap, err != KCONN_E_OK ? errstr : "refused");
		goto out;
	}
	coord = kcluster_broker_conn(l->cl, resp.node_id, e, sizeof(e));
	if (coord == NULL || (ts = calloc(l->ntopics + 1, sizeof(*ts))) == NULL) {
		log_debug("%s: no mirror marks: coordinator %d: %s",
		    l->cfg.bootstrap, (int)resp.node_id, coord == NULL ? e :
		    "out of memory");
		goto out;
	}
	for (size_t i = 0; i < l->ntopics; i++) {
		kp_offset_fetch_request_topic_init(&ts[i]);
		ts[i].name = kstr_c(l->topics[i].name);
		ts[i].partition_indexes = &zero;
		ts[i].partition_indexes_n = 1;
	}
	kp_offset_fetch_request_init(&req);
	req.group_id = kstr_c(MIRRORMARK_GROUP);
	req.topics = ts;
	req.topics_n = (int32_t)l->ntopics;
	if (kconn_send_msg(coord, KP_API_OFFSET_FETCH, 2, &req, 0,
	    SRCLOOKUP_MARK_TIMEOUT_MS, marks_fetched, l, e, sizeof(e)) != 0) {
		log_debug("%s: no mirror marks: OffsetFetch: %s", l->cfg.bootstrap, e);
		goto out;
	}
	free(ts);
	karena_free(a);
	return;
out:
	free(ts);
	karena_free(a);
	answer(l);
}

/* Reads the marks of the topics, then answers. */
static void marks_start(struct srclookup *l)
{
	struct kp_find_coordinator_request req;
	struct kconn *c = NULL;
	const char *host, *rack;
	int32_t node;
	int port;
	char e[300] = "no broker";

	if (l->ntopics > 0 && kcluster_broker_count(l->cl) > 0 &&
	    kcluster_broker_at(l->cl, 0, &node, &host, &port, &rack) == 0)
		c = kcluster_broker_conn(l->cl, node, e, sizeof(e));
	if (c == NULL) {
		if (l->ntopics > 0)
			log_debug("%s: no mirror marks: %s", l->cfg.bootstrap, e);
		answer(l);
		return;
	}
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(MIRRORMARK_GROUP);
	req.key_type = 0;
	if (kconn_send_msg(c, KP_API_FIND_COORDINATOR, 1, &req, 0,
	    SRCLOOKUP_MARK_TIMEOUT_MS, marks_coordinator, l, e, sizeof(e)) != 0) {
		log_debug("%s: no mirror marks: FindCoordinator: %s",
		    l->cfg.bootstrap, e);
		answer(l);
	}
}

static void topics_cb(struct kcluster *cl, int err, const char *errstr,
    const struct kcluster_topic_info *ti, size_t n, void *arg)
{
	struct srclookup *l = arg;
	struct srctopic *topics = NULL;
	size_t k = 0;

	if (l->done || l->topics != NULL)
		return;
	if (err != 0) {
		l->done = 1;
		l->cb(l->arg, 0, errstr != NULL ? errstr : "lookup failed", NULL,
		    NULL, 0);
		return;
	}
	topics = calloc(n + 1, sizeof(*topics));
	if (topics == NULL) {
		l->done = 1;
		l->cb(l->arg, 0, "out of memory", NULL, NULL, 0);
		return;
	}
	/* A topic the source reports with an error has no usable
	 * partitions; it counts as missing. */
	for (size_t i = 0; i < n; i++) {
		if (ti[i].error != 0 || ti[i].partitions <= 0)
			continue;
		topics[k].name = strdup(ti[i].name);
		topics[k].partitions = ti[i].partitions;
		topics[k].internal = ti[i].internal;
		if (topics[k].name == NULL)
			break;
		k++;
	}
	l->topics = topics;
	l->ntopics = k;
	if (kcluster_cluster_id(cl) != NULL)
		l->cluster_id = strdup(kcluster_cluster_id(cl));
	if (k > 1)
		qsort(topics, k, sizeof(*topics), topic_cmp);
	marks_start(l);
}

/* The cluster from the final client properties, and the look itself. */
static int lookup_begin(struct srclookup *l, const char *const *cn,
    const char *const *cv, size_t cnt, char *err, size_t errlen)
{
	free(l->cfg.bootstrap);
	l->cfg.bootstrap = strdup(l->mc->bootstrap_servers);
	if (l->cfg.bootstrap == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	l->cfg.metadata_timeout_ms = l->timeout_ms;
	for (size_t i = 0; i < cnt; i++) {
		if (kcluster_config_set(&l->cfg, cn[i], cv[i], err, errlen) < 0)
			return -1;
	}
	if (kcluster_config_prepare(&l->cfg, err, errlen) < 0)
		return -1;
	l->cl = kcluster_new(l->base, NULL, &l->cfg, err, errlen);
	if (l->cl == NULL)
		return -1;
	kcluster_list_topics(l->cl, topics_cb, l);
	return 0;
}

static void files_cb(void *arg, const char *ferr, const char *const *names,
    const char *const *values, size_t n)
{
	struct srclookup *l = arg;
	char err[800];

	l->files = NULL;
	if (l->files_timer != NULL)
		evtimer_del(l->files_timer);
	if (l->done)
		return;
	if (ferr == NULL && lookup_begin(l, names, values, n, err,
	    sizeof(err)) == 0)
		return;
	l->done = 1;
	l->cb(l->arg, 0, ferr != NULL ? ferr : err, NULL, NULL, 0);
}

static void files_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct srclookup *l = arg;
	char err[128];

	(void)fd;
	(void)what;
	if (l->done)
		return;
	clientfiles_cancel(l->files);
	l->files = NULL;
	secrets_resolve_cancel(l->resolving);
	l->resolving = NULL;
	l->done = 1;
	snprintf(err, sizeof(err), "the mirror's files were not read within "
	    "%d ms", l->timeout_ms);
	l->cb(l->arg, 0, err, NULL, NULL, 0);
}

/* Arms the bound on reading the mirror's files (resolve and clientfiles). */
static int arm_timer(struct srclookup *l, char *err, size_t errlen)
{
	struct timeval tv = { l->timeout_ms / 1000, (l->timeout_ms % 1000) * 1000 };

	if (l->files_timer == NULL &&
	    (l->files_timer = evtimer_new(l->base, files_timeout_cb, l)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!evtimer_pending(l->files_timer, NULL))
		evtimer_add(l->files_timer, &tv);
	return 0;
}

/* With the configs resolved: parse them, then read the files they name
 * (clientfiles) or look at the source right away. */
static int lookup_configured(struct srclookup *l, const char *const *names,
    const char *const *values, size_t n, char *err, size_t errlen)
{
	const char *const *cn, *const *cv;
	size_t cnt;
	int16_t code;

	if (mirrorconf_parse(names, values, n, &l->mc, &code, err, errlen) < 0)
		return -1;
	if (clientfiles_count(l->mc) > 0) {
		/* Files named over the wire are read off the loop first. */
		if (arm_timer(l, err, errlen) < 0)
			return -1;
		l->files = clientfiles_start(l->base, l->mc,
		    (const char *const *)l->allowed, files_cb, l, err, errlen);
		return l->files == NULL ? -1 : 0;
	}
	if (l->files_timer != NULL)
		evtimer_del(l->files_timer);
	mirrorconf_client_pairs(l->mc, &cn, &cv, &cnt);
	return lookup_begin(l, cn, cv, cnt, err, errlen);
}

static void resolved_cb(void *arg, const char *rerr, const char *const *names,
    char **values, size_t n)
{
	struct srclookup *l = arg;
	char err[800];
	int rc = -1;

	l->resolving = NULL;
	if (l->done) {
		secrets_values_free(values, n);
		return;
	}
	if (rerr == NULL)
		rc = lookup_configured(l, names, (const char *const *)values, n,
		    err, sizeof(err));
	secrets_values_free(values, n);
	if (rc == 0)
		return;
	if (l->files_timer != NULL)
		evtimer_del(l->files_timer);
	l->done = 1;
	l->cb(l->arg, 0, rerr != NULL ? rerr : err, NULL, NULL, 0);
}

static char **list_dup(const char *const *v)
{
	size_t n = 0;
	char **c;

	while (v != NULL && v[n] != NULL)
		n++;
	if ((c = calloc(n + 1, sizeof(*c))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((c[i] = strdup(v[i])) == NULL) {
			for (size_t j = 0; j < i; j++)
				free(c[j]);
			free(c);
			return NULL;
		}
	return c;
}

static void list_free(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

struct srclookup *srclookup_start(struct event_base *base,
    const struct mirror *m, const char *const *allowed_dirs, int timeout_ms,
    srclookup_cb cb, void *arg, char *err, size_t errlen)
{
	struct srclookup *l;
	const char **names = NULL;
	char **values = NULL;

	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	kcluster_config_init(&l->cfg, "source");
	l->base = base;
	l->cb = cb;
	l->arg = arg;
	l->timeout_ms = timeout_ms;
	if ((l->allowed = list_dup(allowed_dirs)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* Secrets opened and references resolved here, for the client only;
	 * files that references name are read off the loop first. */
	if (secrets_mirror_reads_files(m)) {
		if (arm_timer(l, err, errlen) < 0)
			goto fail;
		l->resolving = secrets_resolve_start(base, m, resolved_cb, l, err,
		    errlen);
		if (l->resolving == NULL)
			goto fail;
		return l;
	}
	if ((names = calloc(m->nconfigs + 1, sizeof(*names))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < m->nconfigs; i++)
		names[i] = m->configs[i].name;
	if (secrets_mirror_values(m, &values, err, errlen) != 0 ||
	    lookup_configured(l, names, (const char *const *)values,
	    m->nconfigs, err, errlen) != 0)
		goto fail;
	free(names);
	secrets_values_free(values, m->nconfigs);
	return l;
fail:
	if (l->files_timer != NULL)
		event_free(l->files_timer);
	clientfiles_cancel(l->files);
	kcluster_free(l->cl);   /* NULL here: lookup_begin failed before */
	kcluster_config_fini(&l->cfg);
	mirrorconf_free(l->mc);
	list_free(l->allowed);
	free(l);
	free(names);
	secrets_values_free(values, m->nconfigs);
	return NULL;
}

static void topics_free(struct srclookup *l)
{
	for (size_t i = 0; i < l->ntopics; i++) {
		free((char *)l->topics[i].name);
		free((char *)l->topics[i].mark);
	}
	free(l->topics);
	free(l->cluster_id);
	l->topics = NULL;
	l->ntopics = 0;
	l->cluster_id = NULL;
}

static void deferred_free(evutil_socket_t fd, short what, void *arg)
{
	struct srclookup *l = arg;

	(void)fd;
	(void)what;
	topics_free(l);
	kcluster_config_fini(&l->cfg);
	mirrorconf_free(l->mc);
	list_free(l->allowed);
	free(l);
}

void srclookup_free(struct srclookup *l)
{
	if (l == NULL)
		return;
	l->done = 1;
	clientfiles_cancel(l->files);   /* not from its callback: files is NULL there */
	l->files = NULL;
	secrets_resolve_cancel(l->resolving);   /* likewise */
	l->resolving = NULL;
	if (l->files_timer != NULL) {
		event_free(l->files_timer);
		l->files_timer = NULL;
	}
	/* May run inside the kcluster's own callback: the cluster releases
	 * itself later, and its config must live until then. */
	kcluster_free(l->cl);
	l->cl = NULL;
	if (event_base_once(l->base, -1, EV_TIMEOUT, deferred_free, l,
	    &(struct timeval){ 0, 0 }) < 0) {
		topics_free(l);
		kcluster_config_fini(&l->cfg);
		mirrorconf_free(l->mc);
		list_free(l->allowed);
		free(l);
	}
}
