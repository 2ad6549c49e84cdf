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
#include "srcfiles.h"
#include "srclookup.h"

struct srclookup {
	struct event_base *base;
	struct kcluster_config cfg;
	struct kcluster *cl;
	struct mirrorconf *mc;
	struct srcfiles *files;      /* reading the mirror's files */
	struct event *files_timer;   /* bounds that by timeout_ms */
	int timeout_ms;
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
	srcfiles_cancel(l->files);
	l->files = NULL;
	l->done = 1;
	snprintf(err, sizeof(err), "the mirror's files were not read within "
	    "%d ms", l->timeout_ms);
	l->cb(l->arg, 0, err, NULL, NULL, 0);
}

struct srclookup *srclookup_start(struct event_base *base,
    const struct mirror *m, const char *const *allowed_dirs, int timeout_ms,
    srclookup_cb cb, void *arg, char *err, size_t errlen)
{
	struct srclookup *l;
	const char **names, **values;
	const char *const *cn, *const *cv;
	size_t cnt;
	int16_t code;

	l = calloc(1, sizeof(*l));
	names = calloc(m->nconfigs + 1, sizeof(*names));
	values = calloc(m->nconfigs + 1, sizeof(*values));
	if (l == NULL || names == NULL || values == NULL) {
		snprintf(err, errlen, "out of memory");
		free(l);
		l = NULL;
		goto fail;
	}
	kcluster_config_init(&l->cfg, "source");
	l->base = base;
	l->cb = cb;
	l->arg = arg;
	l->timeout_ms = timeout_ms;
	for (size_t i = 0; i < m->nconfigs; i++) {
		names[i] = m->configs[i].name;
		values[i] = m->configs[i].value;
	}
	if (mirrorconf_parse(names, values, m->nconfigs, &l->mc, &code, err,
	    errlen) < 0)
		goto fail;
	if (srcfiles_count(l->mc) > 0) {
		/* Files named over the wire are read off the loop first. */
		l->files_timer = evtimer_new(base, files_timeout_cb, l);
		if (l->files_timer == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		l->files = srcfiles_start(base, l->mc, allowed_dirs, files_cb, l,
		    err, errlen);
		if (l->files == NULL)
			goto fail;
		{
			struct timeval tv = { timeout_ms / 1000,
			    (timeout_ms % 1000) * 1000 };

			evtimer_add(l->files_timer, &tv);
		}
	} else {
		mirrorconf_client_pairs(l->mc, &cn, &cv, &cnt);
		if (lookup_begin(l, cn, cv, cnt, err, errlen) < 0)
			goto fail;
	}
	free(names);
	free(values);
	return l;
fail:
	if (l != NULL) {
		if (l->files_timer != NULL)
			event_free(l->files_timer);
		kcluster_free(l->cl);   /* NULL here: lookup_begin failed before */
		kcluster_config_fini(&l->cfg);
		mirrorconf_free(l->mc);
		free(l);
	}
	free(names);
	free(values);
	return NULL;
}

static void deferred_free(evutil_socket_t fd, short what, void *arg)
{
	struct srclookup *l = arg;

	(void)fd;
	(void)what;
	kcluster_config_fini(&l->cfg);
	mirrorconf_free(l->mc);
	free(l);
}

void srclookup_free(struct srclookup *l)
{
	if (l == NULL)
		return;
	l->done = 1;
	srcfiles_cancel(l->files);   /* not from its callback: files is NULL there */
	l->files = NULL;
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
		kcluster_config_fini(&l->cfg);
		mirrorconf_free(l->mc);
		free(l);
	}
}
