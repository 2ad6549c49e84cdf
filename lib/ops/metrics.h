/*
 * metrics.h: a small Prometheus registry and its text exposition (format
 * 0.0.4).
 *
 * A registry (struct metrics) owns families; a family (struct metric_family)
 * has a name, help text, a type (counter, gauge, histogram) and a fixed list
 * of label names; a family owns its series (struct metric_series), one per
 * distinct tuple of label values, found through a hash map and kept in
 * creation order so the exposition is stable.  Callers keep the series
 * pointer they get from metrics_series() and update it directly on the hot
 * path; a lookup is only needed when a series is first created.
 *
 * A NULL series is a valid no-op target for every update function.  That is
 * how a disabled family (metrics_family_set_enabled(f, false), e.g.
 * metrics.per_partition = false) costs nothing: metrics_series() returns
 * NULL for it and the callers' updates fall through.
 *
 * Threading: everything here runs on the event loop thread and takes no
 * locks.  Do not touch a registry from librdkafka's threads; hand values to
 * the loop first.
 *
 * Naming (checked at registration): names match [a-zA-Z_:][a-zA-Z0-9_:]*,
 * label names [a-zA-Z_][a-zA-Z0-9_]* and do not start with "__"; counters
 * end in "_total"; histograms may not use the label "le".  Every name the
 * daemon uses is declared once in metrics_std.h.
 */
#ifndef MIRRORD_METRICS_H
#define MIRRORD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compat.h"

struct evbuffer;
struct metrics;
struct metric_family;
struct metric_series;

#define METRIC_TYPES(X) \
	X(COUNTER, "counter") \
	X(GAUGE, "gauge") \
	X(HISTOGRAM, "histogram")

enum metric_type {
#define X(e, s) METRIC_##e,
	METRIC_TYPES(X)
#undef X
	METRIC_TYPE_COUNT
};

#define METRICS_MAX_LABELS 8
#define METRICS_MAX_BUCKETS 32
/* Default cap on one exposition; past it rendering fails rather than grows. */
#define METRICS_DEFAULT_MAX_OUTPUT (64u * 1024 * 1024)

/* A value owned elsewhere, read at scrape time. */
typedef double (*metrics_value_fn)(void *arg);
/* Called at scrape time just before family f is rendered; it may create,
 * update and remove f's series (e.g. recount partitions per state). */
typedef void (*metrics_collect_fn)(struct metric_family *f, void *arg);

struct metrics *metrics_new(void);
/* Frees the registry, its families and all their series. */
void metrics_free(struct metrics *m);
/* Cap on the bytes of one exposition (0 = METRICS_DEFAULT_MAX_OUTPUT). */
void metrics_set_max_output(struct metrics *m, size_t max_bytes);
const char *metric_type_name(enum metric_type t);

/*
 * Register a family.  labels: nlabels label names (copied).  buckets: the
 * upper bounds of a histogram, strictly increasing and finite (+Inf is
 * implicit), copied; NULL/0 for other types.  A family without labels gets
 * its one series at once, so it is exported (as 0) from the start.
 * Returns NULL with the reason in err on a bad name, label or bucket list,
 * or a name already registered.
 */
struct metric_family *metrics_family_new(struct metrics *m, const char *name,
    const char *help, enum metric_type type, const char *const *labels,
    size_t nlabels, const double *buckets, size_t nbuckets, char *err,
    size_t errlen);
struct metric_family *metrics_family_find(const struct metrics *m,
    const char *name);
const char *metrics_family_name(const struct metric_family *f);
size_t metrics_family_series_count(const struct metric_family *f);
/* Disabling drops every series of f and makes metrics_series() return NULL
 * until it is enabled again. */
void metrics_family_set_enabled(struct metric_family *f, bool enabled);
bool metrics_family_enabled(const struct metric_family *f);
void metrics_family_on_collect(struct metric_family *f,
    metrics_collect_fn fn, void *arg);

/*
 * The series of f with these label values (n must equal the family's label
 * count; values are copied), created at 0 if new.  NULL when f is NULL or
 * disabled, or on a label count mismatch or out of memory (both logged).
 */
struct metric_series *metrics_series(struct metric_family *f, size_t n,
    const char *const *values);
#define METRICS_SERIES(f, ...) \
	metrics_series((f), \
	    ARRAY_SIZE(((const char *const[]){ __VA_ARGS__ })), \
	    (const char *const[]){ __VA_ARGS__ })
/* The series if it exists, without creating it. */
struct metric_series *metrics_series_find(const struct metric_family *f,
    size_t n, const char *const *values);
/* Remove and free one series; any pointer to it is dead afterwards. */
void metrics_series_remove(struct metric_series *s);
/*
 * Remove, from every family, every series whose labels include all n
 * name=value pairs (e.g. mirror="m", topic="t", partition="3" when a
 * partition leaves).  Families lacking one of the names are untouched.
 * Walks every series: meant for rare events, not the hot path.  Returns the
 * number of series removed.
 */
size_t metrics_remove_matching(struct metrics *m, size_t n,
    const char *const *names, const char *const *values);

/* Updates.  All accept NULL.  Counters only go up: a negative or NaN
 * increment is ignored. */
void metrics_counter_add(struct metric_series *s, double v);
static inline void metrics_counter_inc(struct metric_series *s)
{
	metrics_counter_add(s, 1.0);
}
void metrics_gauge_set(struct metric_series *s, double v);
void metrics_gauge_add(struct metric_series *s, double v);
void metrics_histogram_observe(struct metric_series *s, double v);
/* Evaluate fn(arg) at scrape time instead of the stored value (gauges and
 * counters); fn NULL goes back to the stored value. */
void metrics_series_set_fn(struct metric_series *s, metrics_value_fn fn,
    void *arg);
/* The current value of a counter or gauge (fn evaluated), or a histogram's
 * observation count. */
double metrics_series_value(const struct metric_series *s);
/* A histogram's sum of observations (0 for other types). */
double metrics_series_sum(const struct metric_series *s);

/*
 * A "state set" in one gauge family whose last label is the state: for the
 * n-1 leading label values given, set the series for states[current] to 1
 * and the other nstates-1 states to 0.  Returns -1 if the family's label
 * count is not n+1 or current >= nstates.
 */
int metrics_stateset(struct metric_family *f, size_t n,
    const char *const *values, const char *const *states, size_t nstates,
    size_t current);

/*
 * Exposition, text format 0.0.4: "# HELP", "# TYPE", then one line per
 * sample; families in registration order, series in creation order;
 * families with no series are left out.  Collect hooks run first.
 */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Appends to out; -1 (out unchanged) if the output would pass the cap or
 * memory runs out. */
int metrics_render_evbuffer(struct metrics *m, struct evbuffer *out,
    char *err, size_t errlen);
/* A NUL-terminated malloc'd copy, its length in *len; NULL on error. */
char *metrics_render_string(struct metrics *m, size_t *len, char *err,
    size_t errlen);

/* Format v the way Prometheus reads it back exactly: integers without a
 * decimal point, otherwise the shortest round-trip form; "+Inf", "-Inf",
 * "NaN".  buf needs 32 bytes. */
void metrics_format_value(char *buf, size_t len, double v);

#endif
