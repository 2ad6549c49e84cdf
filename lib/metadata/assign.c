/*
 * assign.c: the partition assignment of multi-instance mode (see assign.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"

struct by_broker {
	int32_t broker;
	size_t member;   /* index into the sorted members */
};

/* qsort has no context argument: the arrays being sorted carry pointers. */
static int member_cmp(const void *a, const void *b)
{
	const struct assign_member *const *x = a, *const *y = b;

	return strcmp((*x)->instance_id, (*y)->instance_id);
}

static int broker_cmp(const void *a, const void *b)
{
	const struct by_broker *x = a, *y = b;

	if (x->broker != y->broker)
		return x->broker < y->broker ? -1 : 1;
	/* the same broker: the lower instance id (sorted index) first */
	return x->member < y->member ? -1 : x->member > y->member;
}

static int part_cmp(const void *a, const void *b)
{
	const struct assign_part *const *x = a, *const *y = b;
	int c = strcmp((*x)->mirror, (*y)->mirror);

	if (c == 0)
		c = strcmp((*x)->topic, (*y)->topic);
	if (c == 0 && (*x)->partition != (*y)->partition)
		c = (*x)->partition < (*y)->partition ? -1 : 1;
	return c;
}

/* Index of instance id in the sorted members, or -1. */
static ssize_t member_find(const struct assign_member *const *m, size_t n,
    const char *id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(id, m[mid]->instance_id);

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* The member whose local broker is broker (the first of the sorted list),
 * or -1. */
static ssize_t broker_find(const struct by_broker *b, size_t n, int32_t broker)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b[mid].broker < broker)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && b[lo].broker == broker ? (ssize_t)b[lo].member : -1;
}

int assign_run(const struct assign_member *members, size_t nmembers,
    const struct assign_part *parts, size_t nparts, const char **owners,
    char *err, size_t errlen)
{
	const struct assign_member **m = NULL;
	const struct assign_part **rest = NULL;
	struct by_broker *bb = NULL;
	size_t *load = NULL, nbb = 0, nrest = 0;
	int rc = -1;

	for (size_t i = 0; i < nparts; i++)
		owners[i] = NULL;
	if (nmembers == 0 || nparts == 0)
		return 0;
	m = calloc(nmembers, sizeof(*m));
	bb = calloc(nmembers, sizeof(*bb));
	load = calloc(nmembers, sizeof(*load));
	rest = calloc(nparts, sizeof(*rest));
	if (m == NULL || bb == NULL || load == NULL || rest == NULL) {
		snprintf(err, errlen, "assignment: out of memory");
		goto out;
	}
	for (size_t i = 0; i < nmembers; i++) {
		if (members[i].instance_id == NULL ||
		    members[i].instance_id[0] == '\0') {
			snprintf(err, errlen, "assignment: member %zu has no "
			    "instance id", i);
			goto out;
		}
		m[i] = &members[i];
	}
	qsort(m, nmembers, sizeof(*m), member_cmp);
	for (size_t i = 0; i < nmembers; i++) {
		if (i > 0 && strcmp(m[i - 1]->instance_id, m[i]->instance_id) == 0) {
			snprintf(err, errlen, "assignment: instance id %s is given "
			    "twice", m[i]->instance_id);
			goto out;
		}
		if (m[i]->local_broker_id >= 0) {
			bb[nbb].broker = m[i]->local_broker_id;
			bb[nbb].member = i;
			nbb++;
		}
	}
	qsort(bb, nbb, sizeof(*bb), broker_cmp);

	/* Locality, then stability: each decided on its own. */
	for (size_t i = 0; i < nparts; i++) {
		const struct assign_part *p = &parts[i];
		ssize_t k = p->leader >= 0 ? broker_find(bb, nbb, p->leader) : -1;

		if (k < 0 && p->current != NULL && p->current[0] != '\0')
			k = member_find(m, nmembers, p->current);
		if (k >= 0) {
			owners[i] = m[k]->instance_id;
			load[k]++;
		} else {
			rest[nrest++] = p;
		}
	}
	/* The rest, in key order, to the least loaded (ties: instance id). */
	qsort(rest, nrest, sizeof(*rest), part_cmp);
	for (size_t i = 0; i < nrest; i++) {
		size_t best = 0;

		for (size_t k = 1; k < nmembers; k++)
			if (load[k] < load[best])
				best = k;
		owners[rest[i] - parts] = m[best]->instance_id;
		load[best]++;
	}
	rc = 0;
out:
	free(m);
	free(bb);
	free(load);
	free(rest);
	return rc;
}
