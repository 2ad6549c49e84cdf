/*
 * pipeline/fsess.c: the table of a Fetch session's partitions (pipeline/fsess.h).
 * Open addressing with linear probing on a hash of topic and partition;
 * deleted slots are marked and dropped when the table is rebuilt.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "compat.h"
#include "fsess.h"

#define PFS_MIN_CAP 16

static uint32_t pfs_hash(const char *t, size_t len, int32_t partition)
{
	uint32_t h = fnv1a32(t, len);

	h ^= (uint32_t)partition * 2654435761u;
	h ^= h >> 15;
	return h;
}

struct pfsess *pfsess_new(void)
{
	return calloc(1, sizeof(struct pfsess));
}

static void pfs_clear(struct pfsess *s)
{
	for (size_t i = 0; i < s->cap; i++)
		if (s->tab[i].state == 1)
			free(s->tab[i].topic);
	free(s->tab);
	s->tab = NULL;
	s->cap = s->n = s->used = 0;
}

void pfsess_free(struct pfsess *s)
{
	if (s == NULL)
		return;
	pfs_clear(s);
	free(s);
}

void pfsess_reset(struct pfsess *s, int keep_id)
{
	pfs_clear(s);
	if (!keep_id)
		s->id = 0;
	s->epoch = 0;
}

int32_t pfsess_next_epoch(int32_t e)
{
	return e >= INT32_MAX || e < 0 ? 1 : e + 1;
}

/* The slot of topic/partition, or of where it would go (-1: full). */
static ssize_t pfs_slot(const struct pfsess *s, const char *t, size_t len,
    int32_t partition, int for_insert)
{
	size_t mask = s->cap - 1, i, tomb = SIZE_MAX;

	if (s->cap == 0)
		return -1;
	i = pfs_hash(t, len, partition) & mask;
	for (size_t k = 0; k < s->cap; k++, i = (i + 1) & mask) {
		const struct pfs_ent *e = &s->tab[i];

		if (e->state == 0)
			return for_insert && tomb != SIZE_MAX ? (ssize_t)tomb : (ssize_t)i;
		if (e->state == 2) {
			if (tomb == SIZE_MAX)
				tomb = i;
			continue;
		}
		if (e->partition == partition && strlen(e->topic) == len &&
		    memcmp(e->topic, t, len) == 0)
			return (ssize_t)i;
	}
	return for_insert && tomb != SIZE_MAX ? (ssize_t)tomb : -1;
}

/* Rebuilds the table with room for n + 1 entries at most half full. */
static int pfs_grow(struct pfsess *s)
{
	size_t cap = PFS_MIN_CAP;
	struct pfs_ent *old = s->tab, *tab;
	size_t oldcap = s->cap;

	while (cap < 2 * (s->n + 1))
		cap *= 2;
	if ((tab = calloc(cap, sizeof(*tab))) == NULL)
		return -1;
	s->tab = tab;
	s->cap = cap;
	s->used = s->n;
	for (size_t i = 0; i < oldcap; i++) {
		ssize_t at;

		if (old[i].state != 1)
			continue;
		at = pfs_slot(s, old[i].topic, strlen(old[i].topic),
		    old[i].partition, 1);
		s->tab[at] = old[i];
	}
	free(old);
	return 0;
}

struct pfs_ent *pfsess_get(struct pfsess *s, const char *topic,
    int32_t partition, int *added)
{
	size_t len = strlen(topic);
	ssize_t at = pfs_slot(s, topic, len, partition, 0);
	struct pfs_ent *e;
	char *t;

	*added = 0;
	if (at >= 0 && s->tab[at].state == 1)
		return &s->tab[at];
	if (2 * (s->used + 1) > s->cap && pfs_grow(s) != 0)
		return NULL;
	at = pfs_slot(s, topic, len, partition, 1);
	if (at < 0)
		return NULL;
	e = &s->tab[at];
	if ((t = strdup(topic)) == NULL)
		return NULL;
	if (e->state == 0)
		s->used++;
	memset(e, 0, sizeof(*e));
	e->topic = t;
	e->state = 1;
	e->partition = partition;
	s->n++;
	*added = 1;
	return e;
}

struct pfs_ent *pfsess_find(const struct pfsess *s, struct kstr topic,
    int32_t partition)
{
	ssize_t at;

	if (topic.len < 0)
		return NULL;
	at = pfs_slot(s, topic.p, (size_t)topic.len, partition, 0);
	return at >= 0 && s->tab[at].state == 1 ? &s->tab[at] : NULL;
}

char *pfsess_remove(struct pfsess *s, struct pfs_ent *e)
{
	char *t = e->topic;

	e->topic = NULL;
	e->state = 2;
	s->n--;
	return t;
}
