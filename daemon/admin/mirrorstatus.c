/*
 * mirrorstatus.c: "is mirror X current?" over HTTP, for load balancers,
 * monitoring and failover scripts (the metrics listener, lib/ops/httpd.c).
 *
 *   GET /mirrors                 every mirror as JSON: the counts of its
 *                                partitions by state, the stalled ones, the
 *                                largest lag in offsets and in time,
 *                                whether its source is read, and why not
 *   GET /mirrors/<name>/ready    200 "current" when every partition that is
 *                                not STOPPED is MIRRORING, none is stalled
 *                                and none lags more than max_lag_seconds
 *                                (query parameter, default 60); else 503
 *                                with one line saying why; 404 for an
 *                                unknown mirror
 *
 * The numbers are DescribeMirrors' (admin_mirror_status()): this
 * instance's own partitions live, the others' from their status records.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "admin.h"
#include "compat.h"
#include "mirrorstatus.h"

#define DEFAULT_MAX_LAG_S 60

static void json_str(struct evbuffer *b, const char *s)
{
	evbuffer_add(b, "\"", 1);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			evbuffer_add_printf(b, "\\%c", c);
		else if (c < 0x20)
			evbuffer_add_printf(b, "\\u%04x", c);
		else
			evbuffer_add(b, s, 1);
	}
	evbuffer_add(b, "\"", 1);
}

/* Why the mirror is not current, or NULL when it is. */
static const char *not_current(const struct admin_mirror_status *s,
    int64_t max_lag_ms, char *buf, size_t len)
{
	size_t live = s->partitions - s->stopped;

	if (live == 0)
		snprintf(buf, len, "no partition is mirrored (%zu stopped)",
		    s->stopped);
	else if (s->stalled > 0 || !s->source_up)
		snprintf(buf, len, "%zu partition(s) stalled: %s", s->stalled,
		    s->reason);
	else if (s->failed > 0)
		snprintf(buf, len, "%zu partition(s) FAILED: %s", s->failed,
		    s->reason);
	else if (s->paused > 0)
		snprintf(buf, len, "%zu partition(s) paused", s->paused);
	else if (s->mirroring < live)
		snprintf(buf, len, "%zu partition(s) not MIRRORING yet",
		    live - s->mirroring);
	else if (s->lag_unknown > 0)
		snprintf(buf, len, "the lag of %zu partition(s) is not known yet",
		    s->lag_unknown);
	else if (s->max_lag_ms > max_lag_ms)
		snprintf(buf, len, "lagging %" PRId64 " ms (more than %" PRId64
		    " ms), %" PRId64 " offset(s)", s->max_lag_ms, max_lag_ms,
		    s->max_lag);
	else
		return NULL;
	return buf;
}

static void mirror_json(struct evbuffer *b, const char *name,
    const struct admin_mirror_status *s)
{
	char why[1400];
	const char *nc = not_current(s, DEFAULT_MAX_LAG_S * 1000, why,
	    sizeof(why));

	evbuffer_add_printf(b, "{\"mirror\":");
	json_str(b, name);
	evbuffer_add_printf(b, ",\"current\":%s,\"sourceUp\":%s,\"reason\":",
	    nc == NULL ? "true" : "false", s->source_up ? "true" : "false");
	if (nc != NULL)
		json_str(b, nc);
	else
		evbuffer_add_printf(b, "null");
	evbuffer_add_printf(b, ",\"partitions\":%zu,\"mirroringPartitions\":%zu,"
	    "\"stalledPartitions\":%zu,\"failedPartitions\":%zu,"
	    "\"pausedPartitions\":%zu,\"stoppedPartitions\":%zu,\"maxLag\":%"
	    PRId64 ",\"maxLagMs\":%" PRId64 "}", s->partitions, s->mirroring,
	    s->stalled, s->failed, s->paused, s->stopped, s->max_lag,
	    s->max_lag_ms);
}

/* max_lag_seconds=N from the query (default otherwise); -1 if malformed. */
static int64_t query_max_lag_ms(const char *query)
{
	const char *p;
	char *end;
	long long v;

	if (query == NULL || (p = strstr(query, "max_lag_seconds=")) == NULL)
		return DEFAULT_MAX_LAG_S * 1000;
	if (p != query && p[-1] != '&')
		return DEFAULT_MAX_LAG_S * 1000;
	p += strlen("max_lag_seconds=");
	v = strtoll(p, &end, 10);
	if (end == p || (*end != '\0' && *end != '&') || v < 0 || v > 86400 * 365)
		return -1;
	return (int64_t)v * 1000;
}

int mstatus_route(void *arg, const char *path, const char *query,
    struct evbuffer *out, const char **content_type)
{
	struct admin *adm = *(struct admin **)arg;
	struct admin_mirror_status s;
	const char *rest = path + strlen("/mirrors"), *name;
	char mirror[256], why[1400];
	int64_t max_lag_ms;
	size_t n;

	if (adm == NULL) {
		evbuffer_add_printf(out, "starting: the mirrors are not loaded "
		    "yet\n");
		return 503;
	}
	if (*rest == '\0' || strcmp(rest, "/") == 0) {
		*content_type = "application/json";
		evbuffer_add(out, "[", 1);
		for (size_t i = 0; (name = admin_mirror_name(adm, i)) != NULL; i++) {
			if (admin_mirror_status(adm, name, &s) != 0)
				continue;
			if (i > 0)
				evbuffer_add(out, ",", 1);
			mirror_json(out, name, &s);
		}
		evbuffer_add(out, "]\n", 2);
		return 200;
	}
	/* "/<name>/ready" */
	rest++;
	n = strcspn(rest, "/");
	if (n == 0 || n >= sizeof(mirror) || strcmp(rest + n, "/ready") != 0) {
		evbuffer_add_printf(out, "not found; try /mirrors or "
		    "/mirrors/<name>/ready\n");
		return 404;
	}
	memcpy(mirror, rest, n);
	mirror[n] = '\0';
	if ((max_lag_ms = query_max_lag_ms(query)) < 0) {
		evbuffer_add_printf(out, "max_lag_seconds must be a whole number "
		    "of seconds\n");
		return 400;
	}
	if (admin_mirror_status(adm, mirror, &s) != 0) {
		evbuffer_add_printf(out, "mirror %s does not exist\n", mirror);
		return 404;
	}
	if (not_current(&s, max_lag_ms, why, sizeof(why)) != NULL) {
		evbuffer_add_printf(out, "mirror %s is not current: %s\n", mirror,
		    why);
		return 503;
	}
	evbuffer_add_printf(out, "current: mirror %s, %zu partition(s) "
	    "mirroring, lag at most %" PRId64 " ms\n", mirror, s.mirroring,
	    s.max_lag_ms);
	return 200;
}
