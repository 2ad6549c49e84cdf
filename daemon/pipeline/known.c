/*
 * pipeline/known.c: what the data plane knew of each partition's source,
 * kept across restarts.
 *
 * A mirrord that starts while its source cannot be read would otherwise
 * know nothing of the source: no source end, so no lag and a failover
 * report with "not copied: unknown", and no moment the copy was last
 * current.  So every PK_SAVE_MS, and when the pipeline is freed, the
 * partitions' last known source high watermark, when it was learnt, and
 * the last moment each was known caught up go to storage.data_dir/
 * known-offsets (written beside and renamed over, no fsync: it is advice,
 * and every value carries its own time), and a partition created at the
 * next start takes them as what it knew then.  They are shown with their
 * age (SourceOffsetAgeMs; the lag in time grows from the caught-up
 * moment), never as current, and the first answer of the source replaces
 * them.
 *
 * The file is text, a line a partition:
 *   mirrord-known-offsets 1
 *   <mirror> TAB <topic> TAB <partition> TAB <hwm> TAB <hwm ms> TAB <caught ms>
 * (times in wall-clock ms since the epoch; names never hold a tab or a
 * newline).  A line that does not parse is skipped; a missing file is an
 * empty one.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "daemonconf.h"
#include "log.h"
#include "pipe_int.h"

#define PK_FILE "known-offsets"
#define PK_MAGIC "mirrord-known-offsets 1"
#define PK_SAVE_MS 10000

struct pknown_ent {
	char *key;            /* mirror \t topic \t partition */
	int64_t hwm, hwm_ms, caught_ms;
};

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pknown_ent *)a)->key,
	    ((const struct pknown_ent *)b)->key);
}

static char *key_of(const char *mirror, const char *topic, int32_t partition)
{
	char *k = NULL;

	if (asprintf(&k, "%s\t%s\t%" PRId32, mirror, topic, partition) < 0)
		return NULL;
	return k;
}

static char *path_of(const struct pipeline *pl, const char *suffix)
{
	char *p = NULL;

	if (pl->cfg->storage_data_dir == NULL ||
	    asprintf(&p, "%s/%s%s", pl->cfg->storage_data_dir, PK_FILE,
	    suffix) < 0)
		return NULL;
	return p;
}

/* One line into *e; 0, or -1 when it does not parse. */
static int parse_line(char *line, struct pknown_ent *e)
{
	char *f[6], *end, *save = NULL;
	int n = 0;
	int64_t v[3];
	long part;

	for (char *t = strtok_r(line, "\t", &save); t != NULL && n < 6;
	    t = strtok_r(NULL, "\t", &save))
		f[n++] = t;
	if (n != 6 || strtok_r(NULL, "\t", &save) != NULL)
		return -1;
	errno = 0;
	part = strtol(f[2], &end, 10);
	if (*end != '\0' || part < 0 || part > INT32_MAX || errno != 0)
		return -1;
	for (int i = 0; i < 3; i++) {
		v[i] = strtoll(f[3 + i], &end, 10);
		if (*end != '\0' || errno != 0 || v[i] < -1)
			return -1;
	}
	if ((e->key = key_of(f[0], f[1], (int32_t)part)) == NULL)
		return -1;
	e->hwm = v[0];
	e->hwm_ms = v[1];
	e->caught_ms = v[2];
	return 0;
}

void pknown_load(struct pipeline *pl)
{
	char *path = path_of(pl, ""), *line = NULL;
	size_t cap = 0, n = 0, ncap = 0, bad = 0;
	struct pknown_ent *v = NULL;
	ssize_t len;
	FILE *f;

	if (path == NULL || (f = fopen(path, "r")) == NULL) {
		if (path != NULL && errno != ENOENT)
			log_warnx("%s: %s: the source ends known before the "
			    "start are not used", path, strerror(errno));
		free(path);
		return;
	}
	if ((len = getline(&line, &cap, f)) <= 0 ||
	    strncmp(line, PK_MAGIC "\n", sizeof(PK_MAGIC)) != 0) {
		log_warnx("%s: not a known-offsets file of this version: the "
		    "source ends known before the start are not used", path);
		goto out;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		struct pknown_ent e;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (parse_line(line, &e) != 0) {
			bad++;
			continue;
		}
		if (n == ncap) {
			size_t nc = ncap == 0 ? 64 : ncap * 2;
			struct pknown_ent *x = realloc(v, nc * sizeof(*x));

			if (x == NULL) {
				free(e.key);
				break;
			}
			v = x;
			ncap = nc;
		}
		v[n++] = e;
	}
	if (bad > 0)
		log_warnx("%s: %zu line(s) skipped (they do not parse)", path, bad);
	if (n > 1)
		qsort(v, n, sizeof(*v), ent_cmp);
	pl->known = v;
	pl->nknown = n;
	v = NULL;
	log_debug("%s: %zu partition(s) known before the start", path, n);
out:
	free(v);
	free(line);
	fclose(f);
	free(path);
}

void pknown_seed(struct pipeline *pl, struct ppart *p)
{
	struct pknown_ent key, *e;

	if (pl->nknown == 0 ||
	    (key.key = key_of(p->pm->name, p->topic, p->index)) == NULL)
		return;
	e = bsearch(&key, pl->known, pl->nknown, sizeof(*e), ent_cmp);
	free(key.key);
	if (e == NULL)
		return;
	if (e->hwm >= 0 && e->hwm_ms > 0) {
		p->live.source_high_watermark = e->hwm;
		p->src.ok_ms = e->hwm_ms;
	}
	if (e->caught_ms > 0)
		p->caught_ms = e->caught_ms;
}

/* The line of p, or 0 bytes when it knows nothing worth keeping. */
static int write_part(FILE *f, const struct ppart *p)
{
	if (p->dead || p->mp == NULL || !p->owned ||
	    (p->live.source_high_watermark < 0 && p->caught_ms <= 0))
		return 0;
	return fprintf(f, "%s\t%s\t%" PRId32 "\t%" PRId64 "\t%" PRId64 "\t%"
	    PRId64 "\n", p->pm->name, p->topic, p->index,
	    p->live.source_high_watermark, p->src.ok_ms > 0 ? p->src.ok_ms : -1,
	    p->caught_ms > 0 ? p->caught_ms : -1) < 0 ? -1 : 0;
}

void pknown_save(struct pipeline *pl, int64_t mono, int force)
{
	char *tmp, *path;
	FILE *f;
	int rc = 0;

	if (!force && mono - pl->known_saved_ms < PK_SAVE_MS)
		return;
	pl->known_saved_ms = mono;
	if ((tmp = path_of(pl, ".tmp")) == NULL ||
	    (path = path_of(pl, "")) == NULL) {
		free(tmp);
		return;
	}
	if ((f = fopen(tmp, "w")) == NULL) {
		rc = -1;
	} else {
		if (fprintf(f, "%s\n", PK_MAGIC) < 0)
			rc = -1;
		for (size_t i = 0; rc == 0 && i < pl->nmirrors; i++)
			for (size_t j = 0; rc == 0 && j < pl->mirrors[i]->nparts;
			    j++)
				rc = write_part(f, pl->mirrors[i]->parts[j]);
		if (fclose(f) != 0)
			rc = -1;
	}
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	if (rc != 0) {
		/* Logged once until it works again. */
		if (!pl->known_failed)
			log_warnx("%s: %s: the source ends known now will not be "
			    "there after a restart", path, strerror(errno));
		pl->known_failed = 1;
		(void)unlink(tmp);
	} else {
		pl->known_failed = 0;
	}
	free(tmp);
	free(path);
}

void pknown_free(struct pipeline *pl)
{
	for (size_t i = 0; i < pl->nknown; i++)
		free(pl->known[i].key);
	free(pl->known);
	pl->known = NULL;
	pl->nknown = 0;
}
