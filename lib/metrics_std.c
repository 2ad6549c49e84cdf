/*
 * metrics_std.c: registers the table of metrics_std.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "metrics_std.h"

/*
 * Each label and bucket list gets a leading placeholder so that an empty
 * list is still a valid array; the real entries start at index 1.
 */
#define X(id, ...) static const char *const ls_##id[] = { "", __VA_ARGS__ };
MSTD_LABELSETS(X)
#undef X
#define X(id, ...) static const double bs_##id[] = { 0, __VA_ARGS__ };
MSTD_BUCKETSETS(X)
#undef X

enum { PP = 1, NO = 0 };

struct mstd_def {
	const char *name;
	enum metric_type type;
	const char *const *labels;
	size_t nlabels;
	const double *buckets;
	size_t nbuckets;
	bool per_partition;
	const char *help;
};

static const struct mstd_def defs[] = {
#define X(id, name, type, ls, bs, pp, help) \
	[MSTD_##id] = { name, METRIC_##type, ls_##ls + 1, \
	    ARRAY_SIZE(ls_##ls) - 1, bs_##bs + 1, ARRAY_SIZE(bs_##bs) - 1, \
	    pp, help },
	MSTD_FAMILIES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(defs) == MSTD_COUNT, "metric family table");

const char *metrics_std_name(enum metrics_std_id id)
{
	return (unsigned)id < MSTD_COUNT ? defs[id].name : "?";
}

bool metrics_std_is_per_partition(enum metrics_std_id id)
{
	return (unsigned)id < MSTD_COUNT && defs[id].per_partition;
}

int metrics_std_init(struct metrics_std *ms, struct metrics *m,
    bool per_partition, char *err, size_t errlen)
{
	memset(ms, 0, sizeof(*ms));
	ms->reg = m;
	for (size_t i = 0; i < MSTD_COUNT; i++) {
		const struct mstd_def *d = &defs[i];

		ms->f[i] = metrics_family_new(m, d->name, d->help, d->type,
		    d->labels, d->nlabels, d->buckets, d->nbuckets, err, errlen);
		if (ms->f[i] == NULL)
			return -1;
	}
	metrics_std_set_per_partition(ms, per_partition);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, BUILD_INFO), PACKAGE_VERSION),
	    1);
	metrics_gauge_set(METRICS_SERIES(MSTD(ms, PROCESS_START_TIME)),
	    (double)clock_wall_ms() / 1000.0);
	return 0;
}

void metrics_std_set_per_partition(struct metrics_std *ms, bool on)
{
	if (ms->per_partition != on)
		log_info("per-partition metrics %s", on ? "on" : "off");
	ms->per_partition = on;
	for (size_t i = 0; i < MSTD_COUNT; i++)
		if (defs[i].per_partition)
			metrics_family_set_enabled(ms->f[i], on);
}

struct metric_series *metrics_std_partition(struct metrics_std *ms,
    enum metrics_std_id id, const char *mirror, const char *topic,
    int32_t partition)
{
	char pbuf[16];

	if ((unsigned)id >= MSTD_COUNT || !ms->per_partition)
		return NULL;
	snprintf(pbuf, sizeof(pbuf), "%d", (int)partition);
	return METRICS_SERIES(ms->f[id], mirror, topic, pbuf);
}

void metrics_std_partition_state(struct metrics_std *ms, const char *mirror,
    const char *topic, int32_t partition, const char *const *states,
    size_t nstates, size_t current)
{
	char pbuf[16];
	const char *v[3] = { mirror, topic, pbuf };

	if (!ms->per_partition)
		return;
	snprintf(pbuf, sizeof(pbuf), "%d", (int)partition);
	(void)metrics_stateset(MSTD(ms, PARTITION_STATE), 3, v, states,
	    nstates, current);
}

void metrics_std_partition_remove(struct metrics_std *ms, const char *mirror,
    const char *topic, int32_t partition)
{
	static const char *const names[] = { "mirror", "topic", "partition" };
	char pbuf[16];
	const char *v[3] = { mirror, topic, pbuf };

	snprintf(pbuf, sizeof(pbuf), "%d", (int)partition);
	(void)metrics_remove_matching(ms->reg, 3, names, v);
}

void metrics_std_mirror_remove(struct metrics_std *ms, const char *mirror)
{
	static const char *const names[] = { "mirror" };
	const char *v[1] = { mirror };

	(void)metrics_remove_matching(ms->reg, 1, names, v);
}
