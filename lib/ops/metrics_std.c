/*
 * metrics_std.c: registers the table of metrics_std.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/*
 * /proc/self/stat field n (1-based, as in proc(5)) as a number; -1 when
 * unreadable.  The second field, the command name, may hold spaces and
 * parentheses: the fields are counted from the last ')'.
 */
static double proc_stat_field(int n)
{
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t len;
	double v = -1;

	if (f == NULL)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	p++;
	for (int i = 3; i <= n && p != NULL; i++) {
		while (*p == ' ')
			p++;
		if (i == n)
			v = strtod(p, NULL);
		p = strchr(p, ' ');
	}
	return v;
}

static double process_cpu_seconds(void *arg)
{
	double ut = proc_stat_field(14), st = proc_stat_field(15);
	long hz = sysconf(_SC_CLK_TCK);

	(void)arg;
	return ut < 0 || st < 0 || hz <= 0 ? 0 : (ut + st) / (double)hz;
}

static double process_resident_bytes(void *arg)
{
	double pages = proc_stat_field(24);
	long psz = sysconf(_SC_PAGESIZE);

	(void)arg;
	return pages < 0 || psz <= 0 ? 0 : pages * (double)psz;
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
	metrics_series_set_fn(METRICS_SERIES(MSTD(ms, PROCESS_CPU)),
	    process_cpu_seconds, NULL);
	metrics_series_set_fn(METRICS_SERIES(MSTD(ms, PROCESS_RSS)),
	    process_resident_bytes, NULL);
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
