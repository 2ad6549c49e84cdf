/*
 * Unit tests for mirrorconf: CreateMirror config validation (codes and
 * exact messages), parsed defaults, topic filters, and the client bridges.
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "compat.h"
#include "mirrorconf.h"
#include "props.h"

static int16_t code;
static char msg[512];

/* Validates pairs given as a NULL-terminated name, value, name, value list. */
static int validate(const char *first, ...)
{
	const char *names[300], *values[300];
	size_t n = 0;
	va_list ap;

	va_start(ap, first);
	for (const char *name = first; name != NULL; name = va_arg(ap, const char *)) {
		names[n] = name;
		values[n] = va_arg(ap, const char *);
		n++;
	}
	va_end(ap);
	code = -99;
	msg[0] = '\0';
	return mirrorconf_validate(names, values, n, &code, msg, sizeof(msg));
}

static void expect_error(int16_t want_code, const char *want_msg)
{
	ck_assert_int_eq(code, want_code);
	ck_assert_str_eq(msg, want_msg);
}

START_TEST(test_minimal_and_defaults)
{
	const char *names[] = { "bootstrap.servers" };
	const char *values[] = { "src1:9092, src2:9093" };
	struct mirrorconf *mc;

	ck_assert_int_eq(mirrorconf_parse(names, values, 1, &mc, &code, msg, sizeof(msg)), 0);
	ck_assert_str_eq(mc->bootstrap_servers, "src1:9092,src2:9093");
	ck_assert_ptr_null(mc->source_cluster_id);
	ck_assert_uint_eq(mc->client_n, 0);
	ck_assert_int_eq(mc->fetch_wait_max_ms, 1000);
	ck_assert_int_eq(mc->fetch_min_bytes, 1);
	ck_assert_int_eq(mc->fetch_max_bytes, 1048576);
	ck_assert_int_eq(mc->fetch_response_max_bytes, 10485760);
	ck_assert_int_eq(mc->fetch_backoff_ms, 1000);
	ck_assert_int_eq(mc->metadata_refresh_interval_ms, 30000);
	ck_assert_int_eq(mc->failed_retry_initial_backoff_ms, 1000);
	ck_assert_int_eq(mc->failed_retry_max_backoff_ms, 300000);
	ck_assert_int_eq(mc->failed_retry_max_attempts, 100);
	ck_assert_int_eq(mc->foreign_writes, MIRRORCONF_FOREIGN_FAIL);
	ck_assert_uint_eq(mc->topics_include.n, 0);
	ck_assert_uint_eq(mc->topics_exclude.n, 1);
	ck_assert_str_eq(mc->topics_exclude.src[0], "__.*");
	ck_assert_uint_eq(mc->topic_properties_exclude_n, 8);
	ck_assert_str_eq(mc->topic_properties_exclude[0], "follower.replication.throttled.replicas");
	ck_assert_str_eq(mc->topic_properties_exclude[7], "min.insync.replicas");
	/* An empty include list selects nothing automatically. */
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders"), 0);
	mirrorconf_free(mc);
}
END_TEST

START_TEST(test_everything_set)
{
	const char *names[] = {
		"bootstrap.servers", "mirror.source.cluster.id", "security.protocol",
		"sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
		"mirror.fetch.max.bytes", "mirror.failed.retry.max.attempts",
		"mirror.topics.include", "mirror.topics.exclude",
		"mirror.topic.properties.exclude", "socket.timeout.ms",
		"mirror.foreign.writes",
	};
	const char *values[] = {
		"[::1]:9092", "Wq0k-3_xQ2a1", "SASL_SSL", "SCRAM-SHA-512", "mirror",
		"pw", "/etc/ca.pem", "65536", "0", "orders.*, pay[0-9]+", "orders-internal.*",
		"retention.ms,cleanup.policy", "5000", "skip-over",
	};
	const char *const *cn, *const *cv;
	struct mirrorconf *mc;
	size_t n;

	ck_assert_int_eq(mirrorconf_parse(names, values, ARRAY_SIZE(names), &mc, &code,
	    msg, sizeof(msg)), 0);
	ck_assert_str_eq(mc->source_cluster_id, "Wq0k-3_xQ2a1");
	ck_assert_int_eq(mc->fetch_max_bytes, 65536);
	ck_assert_int_eq(mc->failed_retry_max_attempts, 0);
	ck_assert_int_eq(mc->foreign_writes, MIRRORCONF_FOREIGN_SKIP_OVER);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders-eu"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "pay7"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "payX"), 0);
	/* Patterns match whole names. */
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "old-orders"), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "pay7x"), 0);
	/* Exclude wins over include. */
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders-internal-1"), 0);
	ck_assert_int_eq(mirrorconf_topic_property_excluded(mc, "retention.ms"), 1);
	ck_assert_int_eq(mirrorconf_topic_property_excluded(mc, "mirror.name"), 1);
	ck_assert_int_eq(mirrorconf_topic_property_excluded(mc, "min.insync.replicas"), 0);

	/* Client properties in request order, canonical names. */
	mirrorconf_client_pairs(mc, &cn, &cv, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(cn[0], "security.protocol");
	ck_assert_str_eq(cn[1], "sasl.mechanism");
	ck_assert_str_eq(cv[1], "SCRAM-SHA-512");
	ck_assert_str_eq(cn[3], "sasl.password");
	ck_assert_str_eq(cv[3], "pw");
	ck_assert_str_eq(cn[5], "socket.timeout.ms");
	mirrorconf_free(mc);
}
END_TEST

START_TEST(test_default_exclude_hides_internal_topics)
{
	const char *names[] = { "bootstrap.servers", "mirror.topics.include" };
	const char *values[] = { "s:1", ".*" };
	struct mirrorconf *mc;

	ck_assert_int_eq(mirrorconf_parse(names, values, 2, &mc, &code, msg, sizeof(msg)), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "payments"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "__consumer_offsets"), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "_single"), 1);
	mirrorconf_free(mc);
}
END_TEST

/* Java patterns (tpattern.h): a comma in a quantifier is the pattern's. */
START_TEST(test_java_patterns)
{
	const char *names[] = { "bootstrap.servers", "mirror.topics.include",
		"mirror.topics.exclude" };
	const char *values[] = { "s:1", "(?i)orders-[a-z]{2,3}, \\Qa.b\\E,foo|bar",
		".*-tmp" };
	struct mirrorconf *mc;

	ck_assert_int_eq(mirrorconf_parse(names, values, 3, &mc, &code, msg,
	    sizeof(msg)), 0);
	ck_assert_uint_eq(mc->topics_include.n, 3);
	ck_assert_str_eq(mc->topics_include.src[0], "(?i)orders-[a-z]{2,3}");
	ck_assert_str_eq(mc->topics_include.src[1], "\\Qa.b\\E");
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "ORDERS-eu"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders-e"), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "orders-eu-tmp"), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "a.b"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "axb"), 0);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "bar"), 1);
	ck_assert_int_eq(mirrorconf_topic_selected(mc, "foobar"), 0);
	mirrorconf_free(mc);
	/* Hostile: refused naming the limit, INVALID_CONFIG as any bad value. */
	ck_assert_int_eq(validate("bootstrap.servers", "s:1",
	    "mirror.topics.include", "((.{1,1000}){1,1000})", NULL), -1);
	ck_assert_int_eq(code, 40);
	ck_assert_msg(strstr(msg, "for mirror config mirror.topics.include: "
	    "'((.{1,1000}){1,1000})' is refused: its compiled form is") != NULL,
	    "%s", msg);
	ck_assert_int_eq(validate("bootstrap.servers", "s:1",
	    "mirror.topics.exclude", "(a+)+b", NULL), -1);
	ck_assert_msg(strstr(msg, "hit the match limit (100000 backtracking "
	    "steps)") != NULL, "%s", msg);
}
END_TEST

START_TEST(test_missing_bootstrap_is_invalid_request)
{
	ck_assert_int_eq(validate("mirror.fetch.max.bytes", "1024", NULL), -1);
	expect_error(42, "Missing required mirror config bootstrap.servers (the source cluster's host:port list)");
	/* A null value is the same as absent. */
	ck_assert_int_eq(validate("bootstrap.servers", NULL, NULL), -1);
	expect_error(42, "Missing required mirror config bootstrap.servers (the source cluster's host:port list)");
	ck_assert_int_eq(validate(NULL), -1);
	ck_assert_int_eq(code, 42);
}
END_TEST

START_TEST(test_unknown_keys)
{
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.fetch.max.byte", "5", NULL), -1);
	expect_error(40, "Unknown mirror config 'mirror.fetch.max.byte'; did you mean 'mirror.fetch.max.bytes'?");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "compression.type", "lz4", NULL), -1);
	expect_error(40, "Unknown mirror config 'compression.type'");
	/* An unknown key is reported even before a missing bootstrap.servers. */
	ck_assert_int_eq(validate("bogus", "1", NULL), -1);
	expect_error(40, "Unknown mirror config 'bogus'");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "", "x", NULL), -1);
	expect_error(40, "Empty mirror config name");
}
END_TEST

START_TEST(test_acl_keys)
{
	const char *names[] = { "bootstrap.servers", "mirror.acls.sync",
	    "mirror.acls.principal.map", "mirror.topic.read.only" };
	const char *values[] = { "s:1", "TRUE", "User:carol=User:alice,User:x=Group:y",
	    "false" };
	struct mirrorconf *mc;

	ck_assert_int_eq(mirrorconf_parse(names, values, 1, &mc, &code, msg, sizeof(msg)), 0);
	ck_assert_int_eq(mc->acls_sync, 0);
	ck_assert_int_eq(mc->topic_read_only, 1);
	ck_assert_str_eq(mirrorconf_map_principal(mc, "User:carol"), "User:carol");
	mirrorconf_free(mc);
	ck_assert_int_eq(mirrorconf_parse(names, values, 4, &mc, &code, msg, sizeof(msg)), 0);
	ck_assert_int_eq(mc->acls_sync, 1);
	ck_assert_int_eq(mc->topic_read_only, 0);
	ck_assert_str_eq(mirrorconf_map_principal(mc, "User:carol"), "User:alice");
	ck_assert_str_eq(mirrorconf_map_principal(mc, "User:x"), "Group:y");
	ck_assert_str_eq(mirrorconf_map_principal(mc, "User:bob"), "User:bob");
	mirrorconf_free(mc);
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.acls.principal.map",
	    "User:a", NULL), -1);
	expect_error(40, "Invalid value 'User:a' for mirror config mirror.acls.principal.map: "
	    "expected source=destination principal pairs separated by commas, got \"User:a\"");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.acls.principal.map",
	    "User:a=User:b,alice=User:c", NULL), -1);
	expect_error(40, "Invalid value 'User:a=User:b,alice=User:c' for mirror config "
	    "mirror.acls.principal.map: \"alice=User:c\": a principal is Type:name "
	    "(User:alice) on both sides of '='");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.topic.read.only",
	    "yes", NULL), -1);
	expect_error(40, "Invalid value 'yes' for mirror config mirror.topic.read.only: "
	    "expected true or false");
}
END_TEST

START_TEST(test_bad_values)
{
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.fetch.max.bytes", "lots", NULL), -1);
	expect_error(40, "Invalid value 'lots' for mirror config mirror.fetch.max.bytes: expected an integer from 1 to 1073741824");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.failed.retry.max.attempts", "32768", NULL), -1);
	expect_error(40, "Invalid value '32768' for mirror config mirror.failed.retry.max.attempts: expected an integer from 0 to 32767");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.fetch.wait.max.ms", "-1", NULL), -1);
	expect_error(40, "Invalid value '-1' for mirror config mirror.fetch.wait.max.ms: expected an integer from 0 to 300000");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "security.protocol", "TLS", NULL), -1);
	expect_error(40, "Invalid value 'TLS' for mirror config security.protocol: expected one of plaintext,ssl,sasl_plaintext,sasl_ssl");
	/* Mechanism names are case-sensitive, as in Kafka. */
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "sasl.mechanism", "plain", NULL), -1);
	expect_error(40, "Invalid value 'plain' for mirror config sasl.mechanism: expected one of PLAIN,SCRAM-SHA-256,SCRAM-SHA-512");
	ck_assert_int_eq(validate("bootstrap.servers", "nohost", NULL), -1);
	expect_error(40, "Invalid value 'nohost' for mirror config bootstrap.servers: 'nohost': expected host:port, the port is missing");
	ck_assert_int_eq(validate("bootstrap.servers", "a:1,b:0", NULL), -1);
	expect_error(40, "Invalid value 'a:1,b:0' for mirror config bootstrap.servers: 'b:0': port must be a number from 1 to 65535");
	ck_assert_int_eq(validate("bootstrap.servers", " , ", NULL), -1);
	expect_error(40, "Invalid value ' , ' for mirror config bootstrap.servers: expected at least one host:port");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.topics.include", "ok.*,a(", NULL), -1);
	ck_assert_int_eq(code, 40);
	expect_error(40, "Invalid value 'ok.*,a(' for mirror config mirror.topics.include: "
	    "'a(' is not a valid regular expression: missing closing parenthesis at offset 2");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.source.cluster.id", "a b", NULL), -1);
	expect_error(40, "Invalid value 'a b' for mirror config mirror.source.cluster.id: expected a cluster id of letters, digits, '.', '_' and '-'");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "client.id", "a\nERROR forged", NULL), -1);
	expect_error(40, "Invalid value for mirror config client.id: it contains control characters");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "x\x1b[2J", "1", NULL), -1);
	expect_error(40, "Invalid mirror config name: it contains control characters");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "enable.ssl.certificate.verification", "nope", NULL), -1);
	expect_error(40, "Invalid value 'nope' for mirror config enable.ssl.certificate.verification: expected true or false");
}
END_TEST

START_TEST(test_secret_values_never_echoed)
{
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "sasl.password", "", NULL), -1);
	expect_error(40, "Invalid value for mirror config sasl.password (value hidden): must not be empty");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "sasl.jaas.config",
	    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";", NULL), -1);
	expect_error(40, "Mirror config sasl.jaas.config is not supported: set sasl.mechanism, sasl.username and sasl.password instead");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "ssl.truststore.password", "hunter2", NULL), -1);
	expect_error(40, "Mirror config ssl.truststore.password is not supported: give the CA certificates as a PEM file in ssl.ca.location instead");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "ssl.keystore.location", "/k.jks", NULL), -1);
	expect_error(40, "Mirror config ssl.keystore.location is not supported: give ssl.certificate.location and ssl.key.location (PEM files) instead");

	ck_assert_int_eq(mirrorconf_is_secret("sasl.password"), 1);
	ck_assert_int_eq(mirrorconf_is_secret("ssl.key.password"), 1);
	ck_assert_int_eq(mirrorconf_is_secret("sasl.jaas.config"), 1);
	ck_assert_int_eq(mirrorconf_is_secret("sasl.username"), 0);
	ck_assert_int_eq(mirrorconf_is_secret("bootstrap.servers"), 0);
}
END_TEST

START_TEST(test_duplicates_and_combinations)
{
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "mirror.fetch.min.bytes", "1",
	    "mirror.fetch.min.bytes", "2", NULL), -1);
	expect_error(40, "Mirror config mirror.fetch.min.bytes is given more than once");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "sasl.mechanism", "PLAIN",
	    "sasl.mechanisms", "PLAIN", NULL), -1);
	expect_error(40, "Mirror config sasl.mechanisms is given more than once");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1",
	    "mirror.failed.retry.initial.backoff.ms", "600000", NULL), -1);
	expect_error(40, "mirror.failed.retry.initial.backoff.ms (600000) must not exceed mirror.failed.retry.max.backoff.ms (300000)");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "security.protocol", "sasl_ssl",
	    "sasl.username", "u", NULL), -1);
	expect_error(40, "security.protocol sasl_ssl needs sasl.username and sasl.password");
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "ssl.key.location", "/k.pem", NULL), -1);
	expect_error(40, "ssl.key.location is set but ssl.certificate.location is not");
	/* And the valid counterparts pass. */
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "security.protocol", "SASL_PLAINTEXT",
	    "sasl.username", "u", "sasl.password", "p", "ssl.key.location", "/k.pem",
	    "ssl.certificate.location", "/c.pem", NULL), 0);
	ck_assert_int_eq(code, 0);
	ck_assert_str_eq(msg, "");
}
END_TEST

START_TEST(test_bounds)
{
	const char *names[MIRRORCONF_MAX_CONFIGS + 1], *values[MIRRORCONF_MAX_CONFIGS + 1];
	char longname[MIRRORCONF_MAX_NAME + 2], *longval;

	for (size_t i = 0; i <= MIRRORCONF_MAX_CONFIGS; i++) {
		names[i] = "bootstrap.servers";
		values[i] = "s:1";
	}
	ck_assert_int_eq(mirrorconf_validate(names, values, MIRRORCONF_MAX_CONFIGS + 1,
	    &code, msg, sizeof(msg)), -1);
	expect_error(40, "Too many mirror configs: 257 (at most 256)");

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", longname, "x", NULL), -1);
	ck_assert_int_eq(code, 40);
	ck_assert_msg(strstr(msg, "is longer than 255 bytes") != NULL, "%s", msg);

	longval = malloc(MIRRORCONF_MAX_VALUE + 2);
	memset(longval, 'x', MIRRORCONF_MAX_VALUE + 1);
	longval[MIRRORCONF_MAX_VALUE + 1] = '\0';
	ck_assert_int_eq(validate("bootstrap.servers", "s:1", "client.id", longval, NULL), -1);
	expect_error(40, "Value of mirror config client.id is longer than 65536 bytes");
	free(longval);
}
END_TEST

START_TEST(test_client_prop_check)
{
	char err[256];

	ck_assert_int_eq(mirrorconf_check_client_prop("sasl.username", "u", err, sizeof(err)), 0);
	ck_assert_int_eq(mirrorconf_check_client_prop("security.protocol", "SSL", err, sizeof(err)), 0);
	ck_assert_int_eq(mirrorconf_check_client_prop("bootstrap.servers", "x:1", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "bootstrap.servers is not a client property here; it has its own setting");
	ck_assert_int_eq(mirrorconf_check_client_prop("mirror.fetch.max.bytes", "1", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "mirror.fetch.max.bytes is not a client property here; it has its own setting");
	/* Suggestions come from client properties only. */
	ck_assert_int_eq(mirrorconf_check_client_prop("sasl.usrname", "u", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "Unknown client property 'sasl.usrname'; did you mean 'sasl.username'?");
	ck_assert_int_eq(mirrorconf_check_client_prop("ssl.key.password", "", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "Invalid value for client property ssl.key.password (value hidden): must not be empty");
	ck_assert_int_eq(mirrorconf_is_known("mirror.topics.include"), 1);
	ck_assert_int_eq(mirrorconf_is_known("topics.include"), 0);
}
END_TEST

START_TEST(test_apply_rdkafka)
{
	const char *names[] = {
		"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username",
		"sasl.password", "socket.timeout.ms", "request.timeout.ms", "client.id",
		"connections.max.idle.ms", "mirror.fetch.max.bytes",
	};
	const char *values[] = {
		"127.0.0.1:1", "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "pw", "4321",
		"7000", "mirrord-test", "60000", "4096",
	};
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	struct mirrorconf *mc;
	char err[256], buf[256];
	size_t len;

	ck_assert_int_eq(mirrorconf_parse(names, values, ARRAY_SIZE(names), &mc, &code,
	    msg, sizeof(msg)), 0);
	ck_assert_int_eq(mirrorconf_apply_rdkafka(mc, conf, err, sizeof(err)), 0);
#define GET(k, want) \
	do { \
		len = sizeof(buf); \
		ck_assert_int_eq(rd_kafka_conf_get(conf, k, buf, &len), RD_KAFKA_CONF_OK); \
		ck_assert_str_eq(buf, want); \
	} while (0)
	GET("bootstrap.servers", "127.0.0.1:1");
	GET("security.protocol", "sasl_plaintext");
	GET("sasl.mechanisms", "SCRAM-SHA-256");
	GET("sasl.username", "alice");
	GET("socket.timeout.ms", "4321");
	GET("client.id", "mirrord-test");
	GET("connections.max.idle.ms", "60000");
#undef GET
	rd_kafka_conf_destroy(conf);
	mirrorconf_free(mc);
}
END_TEST

START_TEST(test_example_is_valid_properties)
{
	char *text = NULL, err[256];
	size_t len = 0;
	struct props p;
	FILE *f = open_memstream(&text, &len);

	mirrorconf_write_example(f);
	fclose(f);
	props_init(&p);
	ck_assert_int_eq(props_parse_buf(&p, text, len, "example", err, sizeof(err)), 0);
	ck_assert_int_eq(mirrorconf_validate((const char *const *)p.names,
	    (const char *const *)p.values, p.n, &code, msg, sizeof(msg)), 0);
	ck_assert_str_eq(props_get(&p, "bootstrap.servers"), "127.0.0.1:9092");
	/* Every key is documented in it. */
	ck_assert_ptr_nonnull(strstr(text, "#mirror.topics.exclude=__.*\n"));
	ck_assert_ptr_nonnull(strstr(text, "#mirror.fetch.max.bytes=1048576\n"));
	ck_assert_ptr_nonnull(strstr(text, "#sasl.password=\n"));
	props_fini(&p);
	free(text);
}
END_TEST

START_TEST(test_check_files)
{
	const char *names[] = { "bootstrap.servers", "ssl.ca.location",
	    "ssl.key.password" };
	const char *values[] = { "s:1", "/etc/hostname", "/dev/zero" };
	const char *etc[] = { "/etc", NULL }, *none[] = { NULL };

	ck_assert_int_eq(mirrorconf_is_file_key("ssl.ca.location"), 1);
	ck_assert_int_eq(mirrorconf_is_file_key("ssl.certificate.location"), 1);
	ck_assert_int_eq(mirrorconf_is_file_key("ssl.key.location"), 1);
	ck_assert_int_eq(mirrorconf_is_file_key("ssl.key.password"), 0);
	ck_assert_int_eq(mirrorconf_is_file_key("ssl.keystore.location"), 0);
	ck_assert_int_eq(mirrorconf_is_file_key("bootstrap.servers"), 0);

	/* Only file keys are looked at (ssl.key.password is not a path). */
	if (access("/etc/hostname", R_OK) == 0)
		ck_assert_int_eq(mirrorconf_check_files(names, values, 3, etc,
		    &code, msg, sizeof(msg)), 0);
	values[1] = "/proc/self/fd/4";
	ck_assert_int_eq(mirrorconf_check_files(names, values, 3, etc, &code,
	    msg, sizeof(msg)), -1);
	ck_assert_int_eq(code, 40);
	ck_assert_str_eq(msg, "Invalid value for mirror config ssl.ca.location: "
	    "/proc/self/fd/4: not a regular file (under /proc, /sys or /dev)");
	values[1] = "/etc/hostname";
	ck_assert_int_eq(mirrorconf_check_files(names, values, 3, none, &code,
	    msg, sizeof(msg)), -1);
	ck_assert_str_eq(msg, "Invalid value for mirror config ssl.ca.location: "
	    "/etc/hostname: no file may be named here "
	    "(mirrors.allowed_file_dirs is empty)");
}
END_TEST

static Suite *mirrorconf_suite(void)
{
	Suite *s = suite_create("mirrorconf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_minimal_and_defaults);
	tcase_add_test(tc, test_everything_set);
	tcase_add_test(tc, test_default_exclude_hides_internal_topics);
	tcase_add_test(tc, test_java_patterns);
	tcase_add_test(tc, test_missing_bootstrap_is_invalid_request);
	tcase_add_test(tc, test_unknown_keys);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_acl_keys);
	tcase_add_test(tc, test_secret_values_never_echoed);
	tcase_add_test(tc, test_duplicates_and_combinations);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_client_prop_check);
	tcase_add_test(tc, test_apply_rdkafka);
	tcase_add_test(tc, test_example_is_valid_properties);
	tcase_add_test(tc, test_check_files);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mirrorconf_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
