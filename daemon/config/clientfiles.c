/*
 * config/clientfiles.c: see config/clientfiles.h.  A thin layer over fileload: pick the
 * file-naming properties, read them on the worker, turn each into its
 * ssl.*.pem property.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileload.h"
#include "kconn.h"
#include "mirrorconf.h"
#include "safefile.h"
#include "clientfiles.h"

struct clientfiles {
	const struct mirrorconf *mc;
	struct fileload *fl;
	clientfiles_cb cb;
	void *arg;
};

size_t clientfiles_count(const struct mirrorconf *mc)
{
	const char *const *cn, *const *cv;
	size_t n, k = 0;

	mirrorconf_client_pairs(mc, &cn, &cv, &n);
	for (size_t i = 0; i < n; i++)
		if (kconn_file_prop_pem(cn[i]) != NULL)
			k++;
	return k;
}

static void loaded(void *arg, const struct fileload_result *res, size_t nres)
{
	struct clientfiles *sf = arg;
	const char *const *cn, *const *cv;
	const char **names = NULL, **values = NULL;
	char err[800];
	size_t n, k;

	sf->fl = NULL;      /* fileload frees itself after this call */
	for (size_t i = 0; i < nres; i++) {
		if (res[i].err != NULL) {
			snprintf(err, sizeof(err), "%s: %s", res[i].key,
			    res[i].err);
			sf->cb(sf->arg, err, NULL, NULL, 0);
			free(sf);
			return;
		}
	}
	mirrorconf_client_pairs(sf->mc, &cn, &cv, &n);
	names = calloc(n + nres + 1, sizeof(*names));
	values = calloc(n + nres + 1, sizeof(*values));
	if (names == NULL || values == NULL) {
		sf->cb(sf->arg, "out of memory reading the mirror's files", NULL,
		    NULL, 0);
		goto out;
	}
	for (k = 0; k < n; k++) {
		names[k] = cn[k];
		values[k] = cv[k];
	}
	for (size_t i = 0; i < nres; i++) {
		names[k] = kconn_file_prop_pem(res[i].key);
		values[k] = res[i].data;
		k++;
	}
	sf->cb(sf->arg, NULL, names, values, k);
out:
	free(names);
	free(values);
	free(sf);
}

struct clientfiles *clientfiles_start(struct event_base *base,
    const struct mirrorconf *mc, const char *const *allowed, clientfiles_cb cb,
    void *arg, char *err, size_t errlen)
{
	struct clientfiles *sf = calloc(1, sizeof(*sf));
	const char *const *cn, *const *cv;
	const char **keys = NULL, **paths = NULL;
	size_t n, k = 0;

	mirrorconf_client_pairs(mc, &cn, &cv, &n);
	keys = calloc(n + 1, sizeof(*keys));
	paths = calloc(n + 1, sizeof(*paths));
	if (sf == NULL || keys == NULL || paths == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (kconn_file_prop_pem(cn[i]) == NULL)
			continue;
		keys[k] = cn[i];
		paths[k] = cv[i];
		k++;
	}
	sf->mc = mc;
	sf->cb = cb;
	sf->arg = arg;
	sf->fl = fileload_start(base, keys, paths, k, allowed,
	    SAFEFILE_DEFAULT_MAX, loaded, sf, err, errlen);
	if (sf->fl == NULL)
		goto fail;
	free(keys);
	free(paths);
	return sf;
fail:
	free(keys);
	free(paths);
	free(sf);
	return NULL;
}

void clientfiles_cancel(struct clientfiles *sf)
{
	if (sf == NULL)
		return;
	fileload_cancel(sf->fl);
	free(sf);
}
