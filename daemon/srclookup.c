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

#include "kcluster.h"
#include "log.h"
#include "mirrorconf.h"
#include "mstate.h"
#include "srclookup.h"

struct srclookup {
	struct event_base *base;
	struct kcluster_config cfg;
	struct kcluster *cl;
	srclookup_cb cb;
	void *arg;
	int done;
};

const struct srctopic *srclookup_find(const struct srctopic *topics, size_t n,
    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(topics[i].name, name) == 0)
			return &topics[i];
	return NULL;
}

static void topics_cb(struct kcluster *cl, int err, const char *errstr,
    const struct kcluster_topic_info *ti, size_t n, void *arg)
{
	struct srclookup *l = arg;
	struct srctopic *topics = NULL;

	if (l->done)
		return;
	l->done = 1;
	if (err != 0) {
		l->cb(l->arg, 0, errstr != NULL ? errstr : "lookup failed", NULL,
		    NULL, 0);
		return;
	}
	topics = calloc(n + 1, sizeof(*topics));
	if (topics == NULL) {
		l->cb(l->arg, 0, "out of memory", NULL, NULL, 0);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		topics[i].name = ti[i].name;
		/* A topic the source reports with an error has no usable
		 * partitions; it counts as missing. */
		topics[i].partitions = ti[i].error == 0 ? ti[i].partitions : 0;
		topics[i].internal = ti[i].internal;
	}
	{
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (topics[i].partitions > 0)
				topics[k++] = topics[i];
		n = k;
	}
	l->cb(l->arg, 1, NULL, kcluster_cluster_id(cl), topics, n);
	free(topics);
}

struct srclookup *srclookup_start(struct event_base *base,
    const struct mirror *m, int timeout_ms, srclookup_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct srclookup *l;
	struct mirrorconf *mc = NULL;
	const char **names, **values;
	const char *const *cn, *const *cv;
	size_t cnt;
	int16_t code;
	char name[300];

	l = calloc(1, sizeof(*l));
	names = calloc(m->nconfigs + 1, sizeof(*names));
	values = calloc(m->nconfigs + 1, sizeof(*values));
	if (l == NULL || names == NULL || values == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < m->nconfigs; i++) {
		names[i] = m->configs[i].name;
		values[i] = m->configs[i].value;
	}
	if (mirrorconf_parse(names, values, m->nconfigs, &mc, &code, err,
	    errlen) < 0)
		goto fail;
	snprintf(name, sizeof(name), "source");
	kcluster_config_init(&l->cfg, name);
	free(l->cfg.bootstrap);
	l->cfg.bootstrap = strdup(mc->bootstrap_servers);
	l->cfg.metadata_timeout_ms = timeout_ms;
	mirrorconf_client_pairs(mc, &cn, &cv, &cnt);
	for (size_t i = 0; i < cnt; i++) {
		if (kcluster_config_set(&l->cfg, cn[i], cv[i], err, errlen) < 0)
			goto fail_cfg;
	}
	if (kcluster_config_prepare(&l->cfg, err, errlen) < 0)
		goto fail_cfg;
	l->cl = kcluster_new(base, NULL, &l->cfg, err, errlen);
	if (l->cl == NULL)
		goto fail_cfg;
	l->base = base;
	l->cb = cb;
	l->arg = arg;
	kcluster_list_topics(l->cl, topics_cb, l);
	mirrorconf_free(mc);
	free(names);
	free(values);
	return l;
fail_cfg:
	kcluster_config_fini(&l->cfg);
fail:
	mirrorconf_free(mc);
	free(names);
	free(values);
	free(l);
	return NULL;
}

static void deferred_free(evutil_socket_t fd, short what, void *arg)
{
	struct srclookup *l = arg;

	(void)fd;
	(void)what;
	kcluster_config_fini(&l->cfg);
	free(l);
}

void srclookup_free(struct srclookup *l)
{
	if (l == NULL)
		return;
	l->done = 1;
	/* May run inside the kcluster's own callback: the cluster releases
	 * itself later, and its config must live until then. */
	kcluster_free(l->cl);
	l->cl = NULL;
	if (event_base_once(l->base, -1, EV_TIMEOUT, deferred_free, l,
	    &(struct timeval){ 0, 0 }) < 0) {
		kcluster_config_fini(&l->cfg);
		free(l);
	}
}
