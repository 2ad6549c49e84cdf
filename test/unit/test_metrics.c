/*
 * Unit tests for metrics: the exact exposition text of a known registry,
 * escaping, cumulative histograms, monotone counters, registration errors,
 * series removal, the per-partition switch, and promtool's verdict on the
 * daemon's full table.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "metrics.h"
#include "metrics_std.h"

static char *render(struct metrics *m)
{
	char err[256] = "";
	size_t len = 0;
	char *s = metrics_render_string(m, &len, err, sizeof(err));

	ck_assert_msg(s != NULL, "render failed: %s", err);
	ck_assert_uint_eq(strlen(s), len);
	return s;
}

/* Long texts: print both on a mismatch (Check caps its own messages). */
static void expect_text(const char *got, const char *want)
{
	size_t i = 0;

	if (strcmp(got, want) == 0)
		return;
	while (got[i] == want[i])
		i++;
	fprintf(stderr, "--- want:\n%s--- got:\n%s--- first difference at "
	    "byte %zu\n", want, got, i);
	ck_abort_msg("exposition differs at byte %zu (both texts on stderr)",
	    i);
}

START_TEST(test_exposition_exact)
{
	static const char *const lbl[] = { "mirror", "topic" };
	static const double bk[] = { 0.01, 0.1, 1 };
	char err[256];
	struct metrics *m = metrics_new();
	struct metric_family *c, *g, *h, *u;
	char *out;

	c = metrics_family_new(m, "mirrord_test_records_total",
	    "Records copied.\nSecond line with a \\ backslash", METRIC_COUNTER,
	    lbl, 2, NULL, 0, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	g = metrics_family_new(m, "mirrord_test_lag_records", "Lag",
	    METRIC_GAUGE, lbl, 2, NULL, 0, err, sizeof(err));
	h = metrics_family_new(m, "mirrord_test_duration_seconds", "Latency",
	    METRIC_HISTOGRAM, lbl, 1, bk, 3, err, sizeof(err));
	u = metrics_family_new(m, "mirrord_test_connections", "Connections",
	    METRIC_GAUGE, NULL, 0, NULL, 0, err, sizeof(err));
	/* A labelled family with no series yet is left out entirely. */
	ck_assert_ptr_nonnull(metrics_family_new(m, "mirrord_test_unused",
	    "Unused", METRIC_GAUGE, lbl, 1, NULL, 0, err, sizeof(err)));
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(u);

	metrics_counter_add(METRICS_SERIES(c, "m1", "orders"), 5);
	metrics_counter_inc(METRICS_SERIES(c, "m1", "orders"));
	metrics_counter_add(METRICS_SERIES(c, "we\"ird\\", "line\nbreak"), 2);
	metrics_gauge_set(METRICS_SERIES(g, "m1", "orders"), 12.5);
	metrics_gauge_set(METRICS_SERIES(g, "m1", "big"), 9007199254740992.0);
	metrics_histogram_observe(METRICS_SERIES(h, "m1"), 0.005);
	metrics_histogram_observe(METRICS_SERIES(h, "m1"), 0.1); /* on a bound */
	metrics_histogram_observe(METRICS_SERIES(h, "m1"), 0.5);
	metrics_histogram_observe(METRICS_SERIES(h, "m1"), 4);
	metrics_gauge_add(METRICS_SERIES(u), 3);
	metrics_gauge_add(METRICS_SERIES(u), -1);

	out = render(m);
	expect_text(out,
	    "# HELP mirrord_test_records_total Records copied.\\nSecond line "
	    "with a \\\\ backslash\n"
	    "# TYPE mirrord_test_records_total counter\n"
	    "mirrord_test_records_total{mirror=\"m1\",topic=\"orders\"} 6\n"
	    "mirrord_test_records_total{mirror=\"we\\\"ird\\\\\","
	    "topic=\"line\\nbreak\"} 2\n"
	    "# HELP mirrord_test_lag_records Lag\n"
	    "# TYPE mirrord_test_lag_records gauge\n"
	    "mirrord_test_lag_records{mirror=\"m1\",topic=\"orders\"} 12.5\n"
	    "mirrord_test_lag_records{mirror=\"m1\",topic=\"big\"} "
	    "9007199254740992\n"
	    "# HELP mirrord_test_duration_seconds Latency\n"
	    "# TYPE mirrord_test_duration_seconds histogram\n"
	    "mirrord_test_duration_seconds_bucket{mirror=\"m1\",le=\"0.01\"} 1\n"
	    "mirrord_test_duration_seconds_bucket{mirror=\"m1\",le=\"0.1\"} 2\n"
	    "mirrord_test_duration_seconds_bucket{mirror=\"m1\",le=\"1\"} 3\n"
	    "mirrord_test_duration_seconds_bucket{mirror=\"m1\",le=\"+Inf\"} 4\n"
	    "mirrord_test_duration_seconds_sum{mirror=\"m1\"} 4.605\n"
	    "mirrord_test_duration_seconds_count{mirror=\"m1\"} 4\n"
	    "# HELP mirrord_test_connections Connections\n"
	    "# TYPE mirrord_test_connections gauge\n"
	    "mirrord_test_connections 2\n");
	free(out);
	metrics_free(m);
}
END_TEST

START_TEST(test_counter_monotone_and_histogram_cumulative)
{
	static const double bk[] = { 1, 2, 3 };
	char err[256];
	struct metrics *m = metrics_new();
	struct metric_family *c = metrics_family_new(m, "x_total", "x",
	    METRIC_COUNTER, NULL, 0, NULL, 0, err, sizeof(err));
	struct metric_family *h = metrics_family_new(m, "h_seconds", "h",
	    METRIC_HISTOGRAM, NULL, 0, bk, 3, err, sizeof(err));
	struct metric_series *cs = METRICS_SERIES(c), *hs = METRICS_SERIES(h);
	char *out;

	metrics_counter_add(cs, 10);
	metrics_counter_add(cs, -4);     /* ignored: counters never go down */
	metrics_counter_add(cs, NAN);    /* ignored */
	metrics_counter_add(cs, 0.5);
	ck_assert_double_eq(metrics_series_value(cs), 10.5);
	metrics_gauge_set(NULL, 1);      /* NULL series: a no-op, no crash */
	metrics_counter_inc(NULL);
	metrics_histogram_observe(NULL, 1);

	/* Bucket counts must never decrease from one bound to the next. */
	for (int i = 0; i < 40; i++)
		metrics_histogram_observe(hs, (double)(i % 5));
	metrics_histogram_observe(hs, NAN); /* ignored */
	out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_bucket{le=\"1\"} 16\n"));
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_bucket{le=\"2\"} 24\n"));
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_bucket{le=\"3\"} 32\n"));
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_bucket{le=\"+Inf\"} 40\n"));
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_sum 80\n"));
	ck_assert_ptr_nonnull(strstr(out, "h_seconds_count 40\n"));
	ck_assert_ptr_nonnull(strstr(out, "x_total 10.5\n"));
	free(out);
	metrics_free(m);
}
END_TEST

START_TEST(test_registration_errors)
{
	static const char *const bad_label[] = { "ok", "9bad" };
	static const char *const le[] = { "le" };
	static const char *const dunder[] = { "__name" };
	static const char *const dup[] = { "a", "a" };
	static const double unsorted[] = { 1, 0.5 };
	static const double inf[] = { 1, INFINITY };
	char err[256];
	struct metrics *m = metrics_new();

	ck_assert_ptr_nonnull(metrics_family_new(m, "a_total", "a",
	    METRIC_COUNTER, NULL, 0, NULL, 0, err, sizeof(err)));
#define BAD(name, type, l, nl, b, nb, want) \
	do { \
		err[0] = '\0'; \
		ck_assert_ptr_null(metrics_family_new(m, name, "help", type, l, \
		    nl, b, nb, err, sizeof(err))); \
		ck_assert_msg(strstr(err, want) != NULL, \
		    "error \"%s\" does not mention \"%s\"", err, want); \
	} while (0)
	BAD("a_total", METRIC_COUNTER, NULL, 0, NULL, 0, "already registered");
	BAD("1abc", METRIC_GAUGE, NULL, 0, NULL, 0, "\"1abc\"");
	BAD("has-dash", METRIC_GAUGE, NULL, 0, NULL, 0, "\"has-dash\"");
	BAD("records", METRIC_COUNTER, NULL, 0, NULL, 0, "must end in _total");
	BAD("lag_total", METRIC_GAUGE, NULL, 0, NULL, 0, "only counters");
	BAD("g", METRIC_GAUGE, bad_label, 2, NULL, 0, "\"9bad\"");
	BAD("g", METRIC_GAUGE, dunder, 1, NULL, 0, "\"__name\"");
	BAD("g", METRIC_GAUGE, dup, 2, NULL, 0, "appears twice");
	BAD("h", METRIC_HISTOGRAM, le, 1, unsorted, 2, "\"le\" is reserved");
	BAD("h", METRIC_HISTOGRAM, NULL, 0, unsorted, 2,
	    "bucket 1 (0.5) is not above bucket 0 (1)");
	BAD("h", METRIC_HISTOGRAM, NULL, 0, inf, 2, "not finite");
	BAD("h", METRIC_HISTOGRAM, NULL, 0, NULL, 0, "0 buckets");
	BAD("g", METRIC_GAUGE, NULL, 0, inf, 1, "only histograms");
#undef BAD
	err[0] = '\0';
	ck_assert_ptr_null(metrics_family_new(m, "g", "", METRIC_GAUGE, NULL,
	    0, NULL, 0, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "help text is empty"));
	metrics_free(m);
}
END_TEST

START_TEST(test_series_lookup_and_removal)
{
	static const char *const lbl[] = { "mirror", "topic", "partition" };
	static const char *const one[] = { "k" };
	char err[256], p[16];
	struct metrics *m = metrics_new();
	struct metric_family *f = metrics_family_new(m, "t_lag", "lag",
	    METRIC_GAUGE, lbl, 3, NULL, 0, err, sizeof(err));
	struct metric_family *o = metrics_family_new(m, "other", "no mirror",
	    METRIC_GAUGE, one, 1, NULL, 0, err, sizeof(err));
	struct metric_series *s;
	const char *const names[] = { "mirror", "topic" };
	const char *const vals[] = { "m2", "t" };
	char *out;

	metrics_gauge_set(METRICS_SERIES(o, "v"), 1);
	/* Enough series to grow the hash table several times. */
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "%d", i);
		metrics_gauge_set(METRICS_SERIES(f, i % 2 ? "m1" : "m2", "t", p),
		    i);
	}
	ck_assert_uint_eq(metrics_family_series_count(f), 5000);
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "%d", i);
		s = METRICS_SERIES(f, i % 2 ? "m1" : "m2", "t", p);
		ck_assert_double_eq(metrics_series_value(s), i);
	}
	ck_assert_uint_eq(metrics_family_series_count(f), 5000);
	/* A wrong label count is refused, not guessed. */
	ck_assert_ptr_null(METRICS_SERIES(f, "m1", "t"));

	s = METRICS_SERIES(f, "m1", "t", "7");
	metrics_series_remove(s);
	ck_assert_ptr_null(metrics_series_find(f, 3,
	    (const char *const[]){ "m1", "t", "7" }));
	ck_assert_uint_eq(metrics_family_series_count(f), 4999);

	/* Mirror m2 is deleted: its 2500 series go, m1's and "other" stay. */
	ck_assert_uint_eq(metrics_remove_matching(m, 2, names, vals), 2500);
	ck_assert_uint_eq(metrics_family_series_count(f), 2499);
	ck_assert_uint_eq(metrics_family_series_count(o), 1);
	out = render(m);
	ck_assert_ptr_null(strstr(out, "mirror=\"m2\""));
	ck_assert_ptr_null(strstr(out, "partition=\"7\""));
	ck_assert_ptr_nonnull(strstr(out,
	    "t_lag{mirror=\"m1\",topic=\"t\",partition=\"4999\"} 4999\n"));
	/* Series keep creation order: partition 1 is the first of m1. */
	ck_assert_ptr_nonnull(strstr(out, "# TYPE t_lag gauge\n"
	    "t_lag{mirror=\"m1\",topic=\"t\",partition=\"1\"} 1\n"
	    "t_lag{mirror=\"m1\",topic=\"t\",partition=\"3\"} 3\n"));
	free(out);
	metrics_free(m);
}
END_TEST

static double answer(void *arg)
{
	return *(double *)arg;
}

static void recount(struct metric_family *f, void *arg)
{
	int *calls = arg;

	(*calls)++;
	metrics_gauge_set(METRICS_SERIES(f, "MIRRORING"), 3);
	metrics_gauge_set(METRICS_SERIES(f, "FAILED"), *calls);
}

START_TEST(test_scrape_time_values)
{
	static const char *const st[] = { "state" };
	char err[256];
	double v = 41;
	int calls = 0;
	struct metrics *m = metrics_new();
	struct metric_family *g = metrics_family_new(m, "age_seconds", "age",
	    METRIC_GAUGE, NULL, 0, NULL, 0, err, sizeof(err));
	struct metric_family *p = metrics_family_new(m, "parts", "parts",
	    METRIC_GAUGE, st, 1, NULL, 0, err, sizeof(err));
	char *out;

	metrics_series_set_fn(METRICS_SERIES(g), answer, &v);
	metrics_family_on_collect(p, recount, &calls);
	v = 42;
	out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "age_seconds 42\n"));
	ck_assert_ptr_nonnull(strstr(out, "parts{state=\"MIRRORING\"} 3\n"
	    "parts{state=\"FAILED\"} 1\n"));
	free(out);
	out = render(m);
	ck_assert_int_eq(calls, 2);
	ck_assert_ptr_nonnull(strstr(out, "parts{state=\"FAILED\"} 2\n"));
	free(out);
	metrics_series_set_fn(METRICS_SERIES(g), NULL, NULL);
	out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "age_seconds 0\n"));
	free(out);
	metrics_free(m);
}
END_TEST

START_TEST(test_output_cap_and_evbuffer)
{
	char err[256] = "";
	struct metrics *m = metrics_new();
	struct metric_family *g = metrics_family_new(m, "g", "gauge",
	    METRIC_GAUGE, NULL, 0, NULL, 0, err, sizeof(err));
	struct evbuffer *eb = evbuffer_new();
	char *s;
	size_t len;

	ck_assert_ptr_nonnull(g);
	evbuffer_add(eb, "x", 1);
	ck_assert_int_eq(metrics_render_evbuffer(m, eb, err, sizeof(err)), 0);
	s = render(m);
	len = strlen(s);
	ck_assert_uint_eq(evbuffer_get_length(eb), 1 + len);
	ck_assert_int_eq(memcmp(evbuffer_pullup(eb, -1) + 1, s, len), 0);
	free(s);

	metrics_set_max_output(m, 10);
	ck_assert_ptr_null(metrics_render_string(m, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "cap of 10 bytes"));
	/* A failed render leaves the buffer as it was. */
	ck_assert_int_eq(metrics_render_evbuffer(m, eb, err, sizeof(err)), -1);
	ck_assert_uint_eq(evbuffer_get_length(eb), 1 + len);
	evbuffer_free(eb);
	metrics_free(m);
}
END_TEST

START_TEST(test_format_value)
{
	char b[32];
	static const double rt[] = { 0.1, 1.0 / 3, 1e-7, 123456.789, 1e300,
	    -2.5e-300 };

	metrics_format_value(b, sizeof(b), 0);
	ck_assert_str_eq(b, "0");
	metrics_format_value(b, sizeof(b), -17);
	ck_assert_str_eq(b, "-17");
	metrics_format_value(b, sizeof(b), 0.1);
	ck_assert_str_eq(b, "0.1");
	metrics_format_value(b, sizeof(b), INFINITY);
	ck_assert_str_eq(b, "+Inf");
	metrics_format_value(b, sizeof(b), -INFINITY);
	ck_assert_str_eq(b, "-Inf");
	metrics_format_value(b, sizeof(b), NAN);
	ck_assert_str_eq(b, "NaN");
	for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++) {
		metrics_format_value(b, sizeof(b), rt[i]);
		ck_assert_msg(strtod(b, NULL) == rt[i], "%s does not read back",
		    b);
	}
}
END_TEST

static const char *const states[] = { "UNKNOWN", "PREPARING", "MIRRORING",
	"PAUSED", "FAILED" };

START_TEST(test_std_per_partition_switch)
{
	char err[256];
	struct metrics *m = metrics_new();
	struct metrics_std ms;
	char *out;

	ck_assert_msg(metrics_std_init(&ms, m, false, err, sizeof(err)) == 0,
	    "%s", err);
	/* Off: no series, nothing rendered, updates are free no-ops. */
	ck_assert_ptr_null(metrics_std_partition(&ms, MSTD_PARTITION_RECORDS,
	    "m", "t", 0));
	metrics_std_partition_state(&ms, "m", "t", 0, states, 5, 2);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_PARTITIONS), "m",
	    "MIRRORING"), 1);
	out = render(m);
	ck_assert_ptr_null(strstr(out, "mirrord_partition_"));
	ck_assert_ptr_nonnull(strstr(out,
	    "mirrord_mirror_partitions{mirror=\"m\",state=\"MIRRORING\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out,
	    "mirrord_build_info{version=\"" PACKAGE_VERSION "\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nprocess_start_time_seconds 1"));
	/* This process uses CPU (spin until a clock tick is counted, 5 s at
	 * most) and memory. */
	ck_assert_ptr_nonnull(strstr(out, "\nprocess_cpu_seconds_total "));
	for (int64_t end = clock_mono_ms() + 5000; clock_mono_ms() < end &&
	    metrics_series_value(METRICS_SERIES(MSTD(&ms, PROCESS_CPU))) == 0;)
		;
	ck_assert_double_gt(metrics_series_value(METRICS_SERIES(MSTD(&ms,
	    PROCESS_CPU))), 0);
	ck_assert_double_gt(metrics_series_value(METRICS_SERIES(MSTD(&ms,
	    PROCESS_RSS))), 1 << 20);
	free(out);

	/* On (a reload): the same calls now produce series. */
	metrics_std_set_per_partition(&ms, true);
	metrics_counter_add(metrics_std_partition(&ms, MSTD_PARTITION_RECORDS,
	    "m", "t", 3), 100);
	metrics_std_partition_state(&ms, "m", "t", 3, states, 5, 2);
	out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "mirrord_partition_records_total{"
	    "mirror=\"m\",topic=\"t\",partition=\"3\"} 100\n"));
	ck_assert_ptr_nonnull(strstr(out, "mirrord_partition_state{mirror="
	    "\"m\",topic=\"t\",partition=\"3\",state=\"MIRRORING\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out, "mirrord_partition_state{mirror="
	    "\"m\",topic=\"t\",partition=\"3\",state=\"FAILED\"} 0\n"));
	free(out);
	/* State change: exactly one state is 1. */
	metrics_std_partition_state(&ms, "m", "t", 3, states, 5, 4);
	out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "partition=\"3\",state=\"MIRRORING\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(out, "partition=\"3\",state=\"FAILED\"} 1\n"));
	free(out);
	ck_assert_uint_eq(metrics_family_series_count(MSTD(&ms,
	    PARTITION_STATE)), 5);

	/* The partition leaves: all its series go, the mirror's stay. */
	metrics_std_partition_remove(&ms, "m", "t", 3);
	out = render(m);
	ck_assert_ptr_null(strstr(out, "mirrord_partition_"));
	ck_assert_ptr_nonnull(strstr(out, "mirrord_mirror_partitions{"));
	free(out);

	/* Off again drops what was created while on. */
	metrics_counter_inc(metrics_std_partition(&ms, MSTD_PARTITION_RETRIES,
	    "m", "t", 1));
	metrics_std_set_per_partition(&ms, false);
	ck_assert_uint_eq(metrics_family_series_count(MSTD(&ms,
	    PARTITION_RETRIES)), 0);
	metrics_std_mirror_remove(&ms, "m");
	out = render(m);
	ck_assert_ptr_null(strstr(out, "mirror=\"m\""));
	free(out);
	metrics_free(m);
}
END_TEST

/* Run promtool's linter over a fully populated daemon registry. */
START_TEST(test_promtool_clean)
{
	char err[256], tmpl[] = "/tmp/mirrord-promtool-XXXXXX", cmd[512];
	char msg[4096] = "";
	struct metrics *m = metrics_new();
	struct metrics_std ms;
	FILE *f;
	char *out;
	int fd, status;
	size_t n;

	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP test_promtool_clean: promtool not found "
		    "(Debian package prometheus)\n");
		metrics_free(m);
		return;
	}
	ck_assert_int_eq(metrics_std_init(&ms, m, true, err, sizeof(err)), 0);
	/* Escaped label values too: promtool parses them back. */
	for (size_t i = 0; i < MSTD_COUNT; i++)
		if (metrics_std_is_per_partition(i) && i != MSTD_PARTITION_STATE)
			metrics_gauge_set(metrics_std_partition(&ms, i, "a\"b",
			    "t\\1", 0), 1);
	metrics_std_partition_state(&ms, "m", "t", 0, states, 5, 1);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_PARTITIONS), "m",
	    "FAILED"), 2);
	metrics_histogram_observe(METRICS_SERIES(MSTD(&ms,
	    CLUSTER_REQUEST_DURATION), "source", "m", "Fetch"), 0.02);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, CLUSTER_REQUEST_ERRORS),
	    "destination", "m", "Produce", "NOT_LEADER_OR_FOLLOWER"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, CLUSTER_INFLIGHT_BYTES),
	    "source", "m"), 1048576);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, CLUSTER_CONNECTIONS),
	    "source", "m"), 3);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, DESTINATION_WRITES_DENIED),
	    "Produce", "TOPIC_AUTHORIZATION_FAILED"));
	metrics_counter_add(METRICS_SERIES(MSTD(&ms, TOPIC_CONFIGS_APPLIED), "m"),
	    3);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, TOPIC_CONFIG_ERRORS), "m",
	    "INVALID_CONFIG"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, ACL_BINDINGS_CREATED), "m",
	    "sync"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, ACL_BINDINGS), "m", "sync"), 4);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, ACL_BINDINGS_DELETED), "m",
	    "read-only"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, ACL_SYNC_ERRORS), "m",
	    "CLUSTER_AUTHORIZATION_FAILED"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, ADMIN_REQUESTS),
	    "CreateMirror", "NONE"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, GROUP_SYNCS), "m",
	    "synced"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, GROUP_OFFSETS_COMMITTED),
	    "m"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, GROUP_SYNC_ERRORS), "m",
	    "OffsetFetch"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, GROUP_SYNC_AGE), "m"), 1.5);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, GROUP_SYNC_LAGGING), "m"), 0);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, ADMIN_REJECTED_REQUESTS),
	    "malformed"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms,
	    ADMIN_AUTHORIZATION_DENIED), "CreateMirror", "alter"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, CONFIG_RELOADS),
	    "success"));
	metrics_histogram_observe(METRICS_SERIES(MSTD(&ms,
	    METADATA_LOG_FSYNC_DURATION)), 0.003);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, CLUSTER_ROLE), "writer"), 1);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, CLUSTER_FORWARDED),
	    "accepted"));
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, FETCH_REQUESTS), "m",
	    "incremental"));
	metrics_counter_add(METRICS_SERIES(MSTD(&ms, FETCH_REQUEST_BYTES), "m"),
	    51);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, FETCH_SESSION_ERRORS), "m",
	    "FETCH_SESSION_ID_NOT_FOUND"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MEMORY_HELD), "queued"), 4096);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MEMORY_HELD),
	    "destination_reads"), 65792);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, GROUP_SYNC_FINAL_MISSED),
	    "m"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_SOURCE_UP), "m"), 0);
	metrics_counter_inc(METRICS_SERIES(MSTD(&ms, MIRROR_SOURCE_ERRORS), "m",
	    "connection_refused"));
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_SOURCE_SINCE_SUCCESS),
	    "m", "Fetch"), 12.5);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_STALLED_PARTITIONS),
	    "m"), 2);
	metrics_gauge_set(METRICS_SERIES(MSTD(&ms, MIRROR_MAX_LAG_SECONDS), "m"),
	    12.5);
	metrics_gauge_set(metrics_std_partition(&ms,
	    MSTD_PARTITION_SOURCE_OFFSET_AGE, "m", "t", 0), 12.5);
	metrics_gauge_set(metrics_std_partition(&ms,
	    MSTD_PARTITION_STALLED_SECONDS, "m", "t", 0), 9.5);
	out = render(m);
	/* Every family of the table is in the output. */
	for (size_t i = 0; i < MSTD_COUNT; i++) {
		char want[160];

		snprintf(want, sizeof(want), "# TYPE %s ", metrics_std_name(i));
		ck_assert_msg(strstr(out, want) != NULL, "%s missing", want);
	}

	fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics >%s 2>&1", tmpl);
	f = popen(cmd, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(out, 1, strlen(out), f), strlen(out));
	status = pclose(f);
	f = fopen(tmpl, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(msg, 1, sizeof(msg) - 1, f);
	msg[n] = '\0';
	fclose(f);
	unlink(tmpl);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != 0)
		fprintf(stderr, "promtool check metrics (status %d) says:\n%s\n"
		    "on:\n%s", status, msg, out);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && n == 0,
	    "promtool check metrics is not clean (details on stderr)");
	free(out);
	metrics_free(m);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_exposition_exact);
	tcase_add_test(tc, test_counter_monotone_and_histogram_cumulative);
	tcase_add_test(tc, test_registration_errors);
	tcase_add_test(tc, test_series_lookup_and_removal);
	tcase_add_test(tc, test_scrape_time_values);
	tcase_add_test(tc, test_output_cap_and_evbuffer);
	tcase_add_test(tc, test_format_value);
	tcase_add_test(tc, test_std_per_partition_switch);
	tcase_add_test(tc, test_promtool_clean);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(metrics_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
