/*
 * Unit tests for daemonconf (prefix config_): defaults, a full file read
 * back, every error kind reported together with its position, reload
 * diffs and secret redaction.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemonconf.h"
#include "log.h"

static struct config_errors errs;

static struct config *load(const char *text)
{
	struct config *cfg = NULL;

	config_errors_fini(&errs);
	config_load_string("t.yaml", text, strlen(text), &cfg, &errs);
	return cfg;
}

/* Asserts that the errors are exactly the n expected lines, in order. */
static void expect_errors(const char *const *want, size_t n)
{
	for (size_t i = 0; i < errs.n && i < n; i++)
		ck_assert_str_eq(errs.v[i].text, want[i]);
	ck_assert_msg(errs.n == n, "got %zu errors, want %zu (first extra: %s)",
	    errs.n, n, errs.n > n ? errs.v[n].text : "-");
}

static char *value_of(const struct config *cfg, const char *key)
{
	static char buf[1024];

	ck_assert_int_eq(config_format_value(cfg, key, buf, sizeof(buf)), 0);
	return buf;
}

static void setup(void)
{
	config_errors_init(&errs);
}

static void teardown(void)
{
	config_errors_fini(&errs);
}

START_TEST(test_defaults)
{
	struct config *cfg = config_defaults();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(cfg->server_node_id, 1);
	/* Loopback only unless the operator says otherwise. */
	ck_assert_str_eq(cfg->server_listen.host, "127.0.0.1");
	ck_assert_uint_eq(cfg->server_listen.port, 9192);
	ck_assert_ptr_null(cfg->server_advertised.host);
	ck_assert_int_eq(cfg->server_max_request_bytes, 100 * 1024 * 1024);
	ck_assert_int_eq(cfg->server_max_connections, 1024);
	ck_assert_str_eq(cfg->storage_data_dir, "/var/lib/mirrord");
	ck_assert_int_eq(cfg->storage_snapshot_every_records, 10000);
	ck_assert_int_eq(cfg->storage_fsync, 1);
	ck_assert_ptr_null(cfg->destination_bootstrap_servers);
	ck_assert_uint_eq(cfg->destination_client.n, 0);
	ck_assert_str_eq(cfg->metrics_listen.host, "127.0.0.1");
	ck_assert_uint_eq(cfg->metrics_listen.port, 9193);
	ck_assert_int_eq(cfg->metrics_per_partition, 1);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->log_target, CONFIG_LOG_AUTO);
	ck_assert_int_eq(cfg->pipeline_max_inflight_bytes_per_partition, 8 * 1024 * 1024);
	ck_assert_int_eq(cfg->pipeline_max_inflight_bytes_total, 256 * 1024 * 1024);
	ck_assert_int_eq(cfg->pipeline_request_timeout_ms, 30000);
	ck_assert_int_eq(cfg->shutdown_timeout_ms, 30000);
	config_free(cfg);
}
END_TEST

START_TEST(test_minimal_file_takes_defaults)
{
	struct config *cfg = load("destination:\n  bootstrap_servers: k1:9092\n");

	ck_assert_ptr_nonnull(cfg);
	ck_assert_uint_eq(errs.n, 0);
	ck_assert_str_eq(cfg->destination_bootstrap_servers, "k1:9092");
	ck_assert_str_eq(cfg->path, "t.yaml");
	ck_assert_int_eq(cfg->server_node_id, 1);
	/* advertised is derived: the default listen address and port. */
	ck_assert_ptr_nonnull(cfg->server_advertised.host);
	ck_assert_str_eq(cfg->server_advertised.host, "127.0.0.1");
	ck_assert_uint_eq(cfg->server_advertised.port, 9192);
	config_free(cfg);
	/* On the wildcard address it is this machine's host name. */
	cfg = load("server:\n  listen: 0.0.0.0:9192\n"
	    "destination:\n  bootstrap_servers: k1:9092\n");
	ck_assert_ptr_nonnull(cfg);
	ck_assert_ptr_nonnull(cfg->server_advertised.host);
	ck_assert_str_ne(cfg->server_advertised.host, "0.0.0.0");
	ck_assert_uint_eq(cfg->server_advertised.port, 9192);
	config_free(cfg);
}
END_TEST

static const char full_yaml[] =
    "server:\n"
    "  node_id: 7\n"
    "  listen: 127.0.0.1:0\n"
    "  advertised: mirror.example.net:19192\n"
    "  max_request_bytes: 2MiB\n"
    "  max_connections: 10\n"
    "storage:\n"
    "  data_dir: /srv/mirrord\n"
    "  snapshot_every_records: 500\n"
    "  fsync: false\n"
    "destination:\n"
    "  bootstrap_servers: [k1:9092, \"[::1]:9093\"]\n"
    "  client:\n"
    "    security.protocol: SASL_SSL\n"
    "    sasl.mechanism: SCRAM-SHA-256\n"
    "    sasl.username: mirror\n"
    "    ssl.ca.location: /etc/ca.pem\n"
    "    socket.timeout.ms: 1234\n"
    "metrics:\n"
    "  listen: \"\"\n"
    "  per_partition: no\n"
    "log:\n"
    "  level: DEBUG\n"
    "  target: journal\n"
    "pipeline:\n"
    "  max_inflight_bytes_per_partition: 65536\n"
    "  max_inflight_bytes_total: 1GiB\n"
    "  request_timeout_ms: 1500\n"
    "  retry_backoff_ms: 1s\n"
    "shutdown.timeout_ms: 0\n";

START_TEST(test_full_file)
{
	struct config *cfg = load(full_yaml);

	ck_assert_msg(cfg != NULL, "%s", errs.n ? errs.v[0].text : "?");
	ck_assert_int_eq(cfg->server_node_id, 7);
	ck_assert_str_eq(cfg->server_listen.host, "127.0.0.1");
	ck_assert_uint_eq(cfg->server_listen.port, 0);
	ck_assert_str_eq(cfg->server_advertised.host, "mirror.example.net");
	ck_assert_uint_eq(cfg->server_advertised.port, 19192);
	ck_assert_int_eq(cfg->server_max_request_bytes, 2 * 1024 * 1024);
	ck_assert_int_eq(cfg->server_max_connections, 10);
	ck_assert_str_eq(cfg->storage_data_dir, "/srv/mirrord");
	ck_assert_int_eq(cfg->storage_snapshot_every_records, 500);
	ck_assert_int_eq(cfg->storage_fsync, 0);
	ck_assert_str_eq(cfg->destination_bootstrap_servers, "k1:9092,[::1]:9093");
	ck_assert_uint_eq(cfg->destination_client.n, 5);
	ck_assert_str_eq(cfg->destination_client.names[0], "security.protocol");
	ck_assert_str_eq(cfg->destination_client.values[0], "SASL_SSL");
	ck_assert_str_eq(cfg->destination_client.names[4], "socket.timeout.ms");
	ck_assert_str_eq(cfg->destination_client.values[4], "1234");
	ck_assert_ptr_null(cfg->metrics_listen.host);
	ck_assert_int_eq(cfg->metrics_per_partition, 0);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_DEBUG);
	ck_assert_int_eq(cfg->log_target, CONFIG_LOG_JOURNAL);
	ck_assert_int_eq(cfg->pipeline_max_inflight_bytes_per_partition, 65536);
	ck_assert_int_eq(cfg->pipeline_max_inflight_bytes_total, 1024 * 1024 * 1024);
	ck_assert_int_eq(cfg->pipeline_request_timeout_ms, 1500);
	ck_assert_int_eq(cfg->pipeline_retry_backoff_ms, 1000);
	ck_assert_int_eq(cfg->shutdown_timeout_ms, 0);
	config_free(cfg);
}
END_TEST

START_TEST(test_dump_round_trip)
{
	struct config *a = load(full_yaml), *b;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	ck_assert_ptr_nonnull(a);
	f = open_memstream(&text, &len);
	config_dump(a, f);
	fclose(f);
	b = load(text);
	ck_assert_msg(b != NULL, "dump does not load back: %s\n%s",
	    errs.n ? errs.v[0].text : "?", text);
	for (size_t i = 0; i < config_key_count(); i++) {
		const char *k = config_key_path(i);
		char va[1024];

		snprintf(va, sizeof(va), "%s", value_of(a, k));
		ck_assert_msg(strcmp(va, value_of(b, k)) == 0, "%s: %s != %s", k,
		    va, value_of(b, k));
	}
	config_free(a);
	config_free(b);
	free(text);
}
END_TEST

START_TEST(test_all_errors_at_once)
{
	static const char *const want[] = {
		"t.yaml:2:12: server.node_id: 'abc' is not an integer from 0 to 2147483647",
		"t.yaml:3:3: server.listn: unknown key; did you mean server.listen?",
		"t.yaml:4:20: server.max_connections: 0 is out of range: must be from 1 to 65536",
		"t.yaml:5:3: server.node_id: duplicate key (first set at line 2)",
		"t.yaml:6:1: sever: unknown section; did you mean server?",
		"t.yaml:9:11: metrics.listen: 'localhost': expected host:port, the port is missing",
		"t.yaml:10:18: metrics.per_partition: 'maybe' is not a boolean (true or false)",
		"t.yaml:13:5: destination.client.sasl.pasword: unknown client property 'sasl.pasword'; did you mean 'sasl.password'?",
		"t.yaml:14:23: destination.client.ssl.key.password: invalid value for client property ssl.key.password (value hidden): must not be empty",
		"t.yaml:15:5: destination.client.sasl.jaas.config: client property sasl.jaas.config is not supported: set sasl.mechanism, sasl.username and sasl.password instead",
		"t.yaml:17:10: log.level: 'loud' is not one of error|warn|info|debug",
		"t.yaml:18:11: log.target: expected one of auto|stderr|journal, got a list",
		"t.yaml:11:1: destination.bootstrap_servers: required key is missing",
	};
	struct config *cfg = load(
	    "server:\n"
	    "  node_id: abc\n"
	    "  listn: 0.0.0.0:1\n"
	    "  max_connections: 0\n"
	    "  node_id: 2\n"
	    "sever:\n"
	    "  x: 1\n"
	    "metrics:\n"
	    "  listen: localhost\n"
	    "  per_partition: maybe\n"
	    "destination:\n"
	    "  client:\n"
	    "    sasl.pasword: hunter2\n"
	    "    ssl.key.password: \"\"\n"
	    "    sasl.jaas.config: hunter3\n"
	    "log:\n"
	    "  level: loud\n"
	    "  target: [a]\n");

	ck_assert_ptr_null(cfg);
	expect_errors(want, ARRAY_SIZE(want));
	ck_assert_int_eq(errs.v[0].line, 2);
	ck_assert_int_eq(errs.v[0].column, 12);
	ck_assert_str_eq(errs.v[0].key, "server.node_id");
	for (size_t i = 0; i < errs.n; i++) {
		ck_assert_ptr_null(strstr(errs.v[i].text, "hunter2"));
		ck_assert_ptr_null(strstr(errs.v[i].text, "hunter3"));
	}
}
END_TEST

START_TEST(test_value_errors)
{
	static const char *const want[] = {
		"t.yaml:3:22: server.max_request_bytes: '10XB' is not a size (bytes, or a number with KiB, MiB or GiB) from 1KiB to 1GiB",
		"t.yaml:5:15: server.advertised: 'h:99999': port must be a number from 1 to 65535",
		"t.yaml:6:11: server.listen: '::1:9092': an IPv6 address must be in brackets: [addr]:port",
		"t.yaml:8:22: destination.bootstrap_servers: 'bad': expected host:port, the port is missing",
		"t.yaml:10:13: storage.data_dir: must not be empty",
		"t.yaml:11:27: storage.snapshot_every_records: 99999999999999999999 is out of range: must be from 1 to 2147483647",
		"t.yaml:13:29: pipeline.max_inflight_bytes_total: 99999999999GiB is out of range: must be from 1MiB to 64GiB",
		"t.yaml:14:22: shutdown.timeout_ms: '5 days' is not a duration (milliseconds, or a number with ms, s, m or h) from 0 to 3600000 ms",
	};
	struct config *cfg = load(
	    "server:\n"
	    "  node_id: 1\n"
	    "  max_request_bytes: 10XB\n"
	    "  # a comment line\n"
	    "  advertised: h:99999\n"
	    "  listen: ::1:9092\n"
	    "destination:\n"
	    "  bootstrap_servers: k1:9092,bad\n"
	    "storage:\n"
	    "  data_dir: ''\n"
	    "  snapshot_every_records: 99999999999999999999\n"
	    "pipeline:\n"
	    "  max_inflight_bytes_total: 99999999999GiB\n"
	    "shutdown.timeout_ms: 5 days\n");

	ck_assert_ptr_null(cfg);
	expect_errors(want, ARRAY_SIZE(want));
}
END_TEST

START_TEST(test_cross_key_errors)
{
	static const char *const want[] = {
		"t.yaml:5:3: pipeline.max_inflight_bytes_per_partition: 67108864 is larger than pipeline.max_inflight_bytes_total (33554432)",
		"t.yaml:8:3: metrics.listen: uses port 9000, the same as server.listen",
	};
	struct config *cfg = load(
	    "destination.bootstrap_servers: k:1\n"
	    "server.listen: 0.0.0.0:9000\n"
	    "pipeline:\n"
	    "  max_inflight_bytes_total: 32MiB\n"
	    "  max_inflight_bytes_per_partition: 64MiB\n"
	    "\n"
	    "metrics:\n"
	    "  listen: 127.0.0.1:9000\n");

	ck_assert_ptr_null(cfg);
	expect_errors(want, ARRAY_SIZE(want));
}
END_TEST

START_TEST(test_yaml_structure_errors)
{
	static const char *const want1[] = {
		"t.yaml:3:2: YAML syntax error: did not find expected key while parsing a block mapping",
	};
	static const char *const want2[] = {
		"t.yaml:1:1: the top level must be a mapping of sections (server:, storage:, ...), got a list",
		"t.yaml: destination.bootstrap_servers: required key is missing",
	};
	static const char *const want3[] = {
		"t.yaml:1:32: destination.bootstrap_servers: required key has no value",
		"t.yaml:2:11: server: expected a mapping of server.* keys, got a scalar",
	};
	static const char *const want4[] = {
		"t.yaml:3:1: more than one YAML document; only one is allowed",
	};

	ck_assert_ptr_null(load("server:\n  node_id: 1\n bad: 2\n"));
	expect_errors(want1, ARRAY_SIZE(want1));
	ck_assert_ptr_null(load("- a\n- b\n"));
	expect_errors(want2, ARRAY_SIZE(want2));
	ck_assert_ptr_null(load("destination.bootstrap_servers: ~\nserver:   oops\n"));
	expect_errors(want3, ARRAY_SIZE(want3));
	ck_assert_ptr_null(load("destination.bootstrap_servers: a:1\n---\nx: 1\n"));
	expect_errors(want4, ARRAY_SIZE(want4));
	/* Deep nesting is refused before libyaml builds anything. */
	{
		char *deep = malloc(200001);

		memset(deep, '[', 100000);
		memset(deep + 100000, ']', 100000);
		deep[200000] = '\0';
		memcpy(deep, "server: ", 8);
		ck_assert_ptr_null(load(deep));
		ck_assert_uint_eq(errs.n, 1);
		ck_assert_str_eq(errs.v[0].text, "t.yaml:1:24: nested deeper than 16 levels");
		free(deep);
	}
	/* A NUL inside a double-quoted scalar. */
	ck_assert_ptr_null(load("destination.bootstrap_servers: \"a\\0:1\"\n"));
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_str_eq(errs.v[0].text, "t.yaml:1:32: destination.bootstrap_servers: value contains a NUL character");
}
END_TEST

START_TEST(test_sections)
{
	static const char *const want[] = {
		"t.yaml:2:3: server.data_dir: unknown key; did you mean storage.data_dir?",
		"t.yaml:3:1: server: duplicate section (first at line 1)",
		"t.yaml:5:1: destination.bootstrap_servers: required key is missing",
	};

	ck_assert_ptr_null(load("server:\n  data_dir: /x\nserver:\n  node_id: 3\n"
	    "destination:\n  client: {}\n"));
	expect_errors(want, ARRAY_SIZE(want));
}
END_TEST

START_TEST(test_error_cap)
{
	char *text = malloc(100 * 16);
	size_t used = 0;

	for (int i = 0; i < 100; i++)
		used += (size_t)sprintf(text + used, "bogus%d: 1\n", i);
	ck_assert_ptr_null(load(text));
	ck_assert_uint_eq(errs.n, CONFIG_MAX_ERRORS);
	/* 100 unknown keys plus the missing required key. */
	ck_assert_uint_eq(errs.dropped, 101 - CONFIG_MAX_ERRORS);
	ck_assert_str_eq(errs.v[0].text, "t.yaml:1:1: bogus0: unknown key");
	free(text);
}
END_TEST

START_TEST(test_file_errors)
{
	char path[] = "/tmp/test_config_XXXXXX";
	struct config *cfg = NULL;
	int fd = mkstemp(path);
	static const char text[] = "destination:\n  bootstrap_servers: x:1\nlog.level: warn\n";

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	ck_assert_int_eq(config_load(path, &cfg, &errs), 0);
	ck_assert_str_eq(cfg->path, path);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_WARN);
	config_free(cfg);
	unlink(path);

	ck_assert_int_eq(config_load(path, &cfg, &errs), -1);
	ck_assert_ptr_null(cfg);
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_msg(strncmp(errs.v[0].text, path, strlen(path)) == 0 &&
	    strcmp(errs.v[0].text + strlen(path), ": cannot open: No such file or directory") == 0,
	    "%s", errs.v[0].text);
}
END_TEST

START_TEST(test_log_levels_match_log_module)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char text[128];
		struct config *cfg;

		snprintf(text, sizeof(text), "destination.bootstrap_servers: k:1\nlog.level: %s\n", names[i]);
		cfg = load(text);
		ck_assert_ptr_nonnull(cfg);
		ck_assert_int_eq(cfg->log_level, log_level_parse(names[i]));
		config_free(cfg);
	}
}
END_TEST

START_TEST(test_reload_diff)
{
	struct config *old = load("destination.bootstrap_servers: k:1\nserver.listen: 127.0.0.1:9000\n"
	    "log.level: info\nstorage.data_dir: /a\n");
	struct config *nw = load("destination.bootstrap_servers: k:1\nserver.listen: 127.0.0.1:9001\n"
	    "log.level: debug\nstorage.data_dir: /b\nserver.max_connections: 5\n");
	const char *keys[4];

	ck_assert_ptr_nonnull(old);
	ck_assert_ptr_nonnull(nw);
	/* listen changed, so the derived advertised changed too. */
	ck_assert_uint_eq(config_reload_diff(old, nw, keys, ARRAY_SIZE(keys)), 3);
	ck_assert_str_eq(keys[0], "server.listen");
	ck_assert_str_eq(keys[1], "server.advertised");
	ck_assert_str_eq(keys[2], "storage.data_dir");
	ck_assert_uint_eq(config_reload_diff(old, nw, keys, 1), 3);
	ck_assert_uint_eq(config_reload_diff(old, old, keys, 4), 0);

	ck_assert_int_eq(config_reload_keep(nw, old), 0);
	ck_assert_uint_eq(nw->server_listen.port, 9000);
	ck_assert_uint_eq(nw->server_advertised.port, 9000);
	ck_assert_str_eq(nw->storage_data_dir, "/a");
	/* Reloadable changes stay. */
	ck_assert_int_eq(nw->log_level, LOG_LVL_DEBUG);
	ck_assert_int_eq(nw->server_max_connections, 5);
	ck_assert_uint_eq(config_reload_diff(old, nw, keys, 4), 0);

	ck_assert_int_eq(config_key_reloadable("log.level"), 1);
	ck_assert_int_eq(config_key_reloadable("server.listen"), 0);
	ck_assert_int_eq(config_key_reloadable("no.such"), -1);
	config_free(old);
	config_free(nw);
}
END_TEST

START_TEST(test_reload_keeps_client_map)
{
	struct config *old = load("destination:\n  bootstrap_servers: k:1\n  client:\n"
	    "    sasl.username: a\n    sasl.password: p1\n");
	struct config *nw = load("destination:\n  bootstrap_servers: k:1\n  client:\n"
	    "    sasl.username: a\n    sasl.password: p2\n");
	const char *keys[2];

	ck_assert_uint_eq(config_reload_diff(old, nw, keys, 2), 1);
	ck_assert_str_eq(keys[0], "destination.client");
	ck_assert_int_eq(config_reload_keep(nw, old), 0);
	ck_assert_str_eq(nw->destination_client.values[1], "p1");
	config_free(old);
	config_free(nw);
}
END_TEST

START_TEST(test_allowed_file_dirs)
{
	static const char *const want[] = {
		"t.yaml:3:23: mirrors.allowed_file_dirs: 'etc/mirrord' is not an absolute path",
		"t.yaml:3:36: mirrors.allowed_file_dirs: list entries must be paths, got a list",
	};
	struct config *c;
	const char *keys[2];
	struct config *nw;

	/* The default: two directories, a NULL-terminated list. */
	c = load("destination.bootstrap_servers: k:1\n");
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(c->mirrors_allowed_file_dirs.n, 2);
	ck_assert_str_eq(c->mirrors_allowed_file_dirs.v[0], "/etc/mirrord");
	ck_assert_str_eq(c->mirrors_allowed_file_dirs.v[1], "/etc/ssl/certs");
	ck_assert_ptr_null(c->mirrors_allowed_file_dirs.v[2]);
	ck_assert_str_eq(value_of(c, "mirrors.allowed_file_dirs"),
	    "/etc/mirrord,/etc/ssl/certs");
	config_free(c);

	/* A YAML list, a comma-separated string, and the empty list. */
	c = load("destination.bootstrap_servers: k:1\nmirrors:\n"
	    "  allowed_file_dirs:\n    - /srv/certs/\n    - /etc/kafka\n");
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(c->mirrors_allowed_file_dirs.n, 2);
	ck_assert_str_eq(c->mirrors_allowed_file_dirs.v[0], "/srv/certs/");
	config_free(c);
	c = load("destination.bootstrap_servers: k:1\n"
	    "mirrors.allowed_file_dirs: /a, /b ,/c\n");
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(c->mirrors_allowed_file_dirs.n, 3);
	ck_assert_str_eq(c->mirrors_allowed_file_dirs.v[1], "/b");
	config_free(c);
	for (int i = 0; i < 3; i++) {
		static const char *const empty[] = {
			"mirrors.allowed_file_dirs: []\n",
			"mirrors.allowed_file_dirs: \"\"\n",
			"mirrors.allowed_file_dirs:\n",
		};
		char text[256];

		snprintf(text, sizeof(text), "destination.bootstrap_servers: k:1\n%s",
		    empty[i]);
		c = load(text);
		ck_assert_ptr_nonnull(c);
		ck_assert_uint_eq(c->mirrors_allowed_file_dirs.n, 0);
		ck_assert_ptr_nonnull(c->mirrors_allowed_file_dirs.v);
		ck_assert_ptr_null(c->mirrors_allowed_file_dirs.v[0]);
		config_free(c);
	}

	/* Relative entries and nested lists are named. */
	c = load("destination.bootstrap_servers: k:1\nmirrors:\n"
	    "  allowed_file_dirs: [etc/mirrord, [x]]\n");
	ck_assert_ptr_null(c);
	expect_errors(want, ARRAY_SIZE(want));

	/* SIGHUP may change it. */
	c = load("destination.bootstrap_servers: k:1\n");
	nw = load("destination.bootstrap_servers: k:1\nmirrors.allowed_file_dirs: [/x]\n");
	ck_assert_int_eq(config_key_reloadable("mirrors.allowed_file_dirs"), 1);
	ck_assert_uint_eq(config_reload_diff(c, nw, keys, 2), 0);
	config_free(c);
	config_free(nw);
}
END_TEST

START_TEST(test_secrets)
{
	static const char *const secret[] = {
		"sasl.password", "ssl.key.password", "sasl.jaas.config",
		"sasl.oauthbearer.config", "sasl.oauthbearer.client.secret",
		"ssl.key.pem", "ssl.keystore.password", "SSL.TRUSTSTORE.PASSWORD",
		"ssl.keystore.key",
	};
	static const char *const open[] = {
		"sasl.username", "ssl.key.location", "ssl.certificate.pem",
		"bootstrap.servers", "security.protocol", "sasl.mechanism",
	};
	struct config *cfg;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	for (size_t i = 0; i < ARRAY_SIZE(secret); i++)
		ck_assert_msg(config_key_is_secret(secret[i]), "%s", secret[i]);
	for (size_t i = 0; i < ARRAY_SIZE(open); i++)
		ck_assert_msg(!config_key_is_secret(open[i]), "%s", open[i]);
	ck_assert_str_eq(config_redact("sasl.password", "x"), "(hidden)");
	ck_assert_str_eq(config_redact("sasl.username", "x"), "x");

	cfg = load("destination:\n  bootstrap_servers: k:1\n  client:\n"
	    "    sasl.username: alice\n    sasl.password: Sup3rSecret\n");
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->destination_client.values[1], "Sup3rSecret");
	f = open_memstream(&text, &len);
	config_dump(cfg, f);
	fclose(f);
	ck_assert_ptr_null(strstr(text, "Sup3rSecret"));
	ck_assert_ptr_nonnull(strstr(text, "    sasl.password: (hidden)\n"));
	ck_assert_ptr_nonnull(strstr(text, "    sasl.username: alice\n"));
	ck_assert_str_eq(value_of(cfg, "destination.client"),
	    "{sasl.username: alice, sasl.password: (hidden)}");
	free(text);
	config_free(cfg);
}
END_TEST

START_TEST(test_units_and_forms)
{
	struct config *cfg = load(
	    "destination:\n  bootstrap_servers: \" a:1 , [fe80::1]:2,b.example:3 \"\n"
	    "server:\n  max_request_bytes: 1 GiB\n"
	    "  listen: \"[::]:9192\"\n"
	    "  node_id:\n"                 /* empty: the default */
	    "pipeline:\n  request_timeout_ms: 250ms\n"
	    "storage:\n  fsync: Off\n"
	    "metrics:\n  listen: ~\n"
	    "shutdown.timeout_ms: 1h\n");

	ck_assert_msg(cfg != NULL, "%s", errs.n ? errs.v[0].text : "?");
	ck_assert_str_eq(cfg->destination_bootstrap_servers, "a:1,[fe80::1]:2,b.example:3");
	ck_assert_int_eq(cfg->server_max_request_bytes, 1024 * 1024 * 1024);
	ck_assert_int_eq(cfg->shutdown_timeout_ms, 3600000);
	ck_assert_str_eq(cfg->server_listen.host, "::");
	ck_assert_int_eq(cfg->server_node_id, 1);
	ck_assert_int_eq(cfg->pipeline_request_timeout_ms, 250);
	ck_assert_int_eq(cfg->storage_fsync, 0);
	ck_assert_ptr_null(cfg->metrics_listen.host);
	ck_assert_str_eq(value_of(cfg, "server.listen"), "[::]:9192");
	ck_assert_str_eq(value_of(cfg, "server.max_request_bytes"), "1GiB");
	ck_assert_int_eq(config_format_value(cfg, "server.nope", (char[8]){ 0 }, 8), -1);
	config_free(cfg);

	/* An explicit advertised address on a specific listen address. */
	cfg = load("destination.bootstrap_servers: a:1\nserver.listen: 10.0.0.5:7000\n");
	ck_assert_ptr_nonnull(cfg);
	ck_assert_str_eq(cfg->server_advertised.host, "10.0.0.5");
	ck_assert_uint_eq(cfg->server_advertised.port, 7000);
	config_free(cfg);
}
END_TEST

START_TEST(test_example_and_mdoc_cover_every_key)
{
	char *ex = NULL, *md = NULL;
	size_t exlen = 0, mdlen = 0;
	FILE *f;

	f = open_memstream(&ex, &exlen);
	config_write_example(f);
	fclose(f);
	f = open_memstream(&md, &mdlen);
	config_write_mdoc(f);
	fclose(f);
	for (size_t i = 0; i < config_key_count(); i++) {
		const char *k = config_key_path(i), *leaf = strchr(k, '.') + 1;
		char want[256];

		snprintf(want, sizeof(want), "%s:", leaf);
		ck_assert_msg(strstr(ex, want) != NULL, "example lacks %s", k);
		snprintf(want, sizeof(want), ".It Ic %s Pq", k);
		ck_assert_msg(strstr(md, want) != NULL, "mdoc lacks %s", k);
	}
	/* The example itself loads, and gives the defaults. */
	{
		struct config *cfg = load(ex), *def = config_defaults();

		ck_assert_msg(cfg != NULL, "%s", errs.n ? errs.v[0].text : "?");
		ck_assert_int_eq(cfg->server_max_request_bytes, def->server_max_request_bytes);
		ck_assert_str_eq(cfg->destination_bootstrap_servers, "127.0.0.1:9092");
		config_free(cfg);
		config_free(def);
	}
	free(ex);
	free(md);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_minimal_file_takes_defaults);
	tcase_add_test(tc, test_full_file);
	tcase_add_test(tc, test_dump_round_trip);
	tcase_add_test(tc, test_all_errors_at_once);
	tcase_add_test(tc, test_value_errors);
	tcase_add_test(tc, test_cross_key_errors);
	tcase_add_test(tc, test_yaml_structure_errors);
	tcase_add_test(tc, test_sections);
	tcase_add_test(tc, test_error_cap);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_log_levels_match_log_module);
	tcase_add_test(tc, test_reload_diff);
	tcase_add_test(tc, test_reload_keeps_client_map);
	tcase_add_test(tc, test_allowed_file_dirs);
	tcase_add_test(tc, test_secrets);
	tcase_add_test(tc, test_units_and_forms);
	tcase_add_test(tc, test_example_and_mdoc_cover_every_key);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
