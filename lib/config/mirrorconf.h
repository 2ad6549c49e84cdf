/*
 * mirrorconf.h: the configs of one mirror, the Name/Value pairs a client
 * sends in CreateMirror (kafka-mirrors --mirror-config FILE).
 *
 * One table in mirrorconf.c (MIRRORCONF_KEYS) lists every accepted key:
 *   - bootstrap.servers (required) and mirror.source.cluster.id;
 *   - source client properties, by librdkafka's names (security.protocol,
 *     sasl.*, ssl.*, timeouts, client.id), which both librdkafka
 *     (mirrorconf_apply_rdkafka) and our own client (kconn_config_set, fed
 *     by mirrorconf_client_pairs) understand;
 *   - mirror.* options: fetch sizing, metadata refresh, FAILED retry
 *     backoff, topic filters.
 * Java-only keys with a librdkafka equivalent (sasl.jaas.config, keystores)
 * are rejected with a message saying what to use instead.
 *
 * Errors follow the wire contract: a missing bootstrap.servers is 42
 * INVALID_REQUEST, anything else wrong is 40 INVALID_CONFIG; the message
 * names the key, and the value unless the key is secret.
 *
 * The same client-property rules check destination.client in mirrord.yaml
 * (mirrorconf_check_client_prop).
 *
 * A client property's value may be a config provider reference
 * (lib/config/cfgprov.h: ${file:...}, ${env:...}...): its type is checked once it
 * is resolved, when the client is configured; other keys refuse them.
 * Validation and parsing here always see resolved values, never the
 * sealed form the metadata log stores secrets in (daemon/config/secrets.h).
 */
#ifndef MIRRORD_MIRRORCONF_H
#define MIRRORD_MIRRORCONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on what a CreateMirror may carry. */
#define MIRRORCONF_MAX_CONFIGS 256
#define MIRRORCONF_MAX_NAME 255
#define MIRRORCONF_MAX_VALUE 65536   /* inline PEM keys and chains fit */
#define MIRRORCONF_MAX_PATTERNS 64   /* per include/exclude list */

struct tpattern;

struct mirrorconf_regexes {
	size_t n;
	char **src;             /* the patterns as given */
	struct tpattern **re;   /* compiled (tpattern.h): a pattern matches a whole name */
};

struct mirrorconf {
	/* Source cluster. */
	char *bootstrap_servers;        /* bootstrap.servers, "h:p,h:p" */
	char *source_cluster_id;        /* mirror.source.cluster.id, NULL = learn it */

	/* Source client properties explicitly given, librdkafka names, in
	 * request order.  Secret values are here in clear: never log them. */
	size_t client_n;
	char **client_names;
	char **client_values;

	/* mirror.* options, defaults applied. */
	int64_t fetch_wait_max_ms;
	int64_t fetch_min_bytes;
	int64_t fetch_max_bytes;            /* per partition */
	int64_t fetch_response_max_bytes;
	int64_t fetch_backoff_ms;
	int64_t fetch_sessions;             /* mirror.fetch.sessions (0/1) */
	int64_t coalesce_max_bytes;         /* mirror.coalesce.max.bytes, 0 off */
	int64_t metadata_refresh_interval_ms;
	int64_t failed_retry_initial_backoff_ms;
	int64_t failed_retry_max_backoff_ms;
	int64_t failed_retry_max_attempts;  /* 0 = never retry automatically */
	int64_t foreign_writes;             /* MIRRORCONF_FOREIGN_* */
	int64_t allow_loops;                /* mirror.allow.loops: 0 false, 1 true */
	struct mirrorconf_regexes topics_include;
	struct mirrorconf_regexes topics_exclude;
	struct mirrorconf_regexes groups_include;   /* consumer-group offset sync */
	struct mirrorconf_regexes groups_exclude;
	int64_t groups_sync_interval_ms;
	size_t topic_properties_exclude_n;  /* topic configs never synced */
	char **topic_properties_exclude;
	int64_t acls_sync;                  /* mirror.acls.sync (0/1) */
	size_t acls_map_n;                  /* mirror.acls.principal.map */
	char **acls_map_from, **acls_map_to;
	int64_t topic_read_only;            /* mirror.topic.read.only (0/1) */
};

/* mirror.foreign.writes */
#define MIRRORCONF_FOREIGN_FAIL 0
#define MIRRORCONF_FOREIGN_SKIP_OVER 1

/*
 * Checks n Name/Value pairs (values[i] may be NULL: unset).  Returns 0 when
 * valid; else -1 with *err_code 40 or 42 and a message in msg naming the
 * first problem.  Needs no network.
 */
int mirrorconf_validate(const char *const *names, const char *const *values,
    size_t n, int16_t *err_code, char *msg, size_t msglen);

/* Validates and parses; on success *out is a new struct mirrorconf. */
int mirrorconf_parse(const char *const *names, const char *const *values,
    size_t n, struct mirrorconf **out, int16_t *err_code, char *msg,
    size_t msglen);
void mirrorconf_free(struct mirrorconf *mc);

/* 1 if the topic is selected by mirror.topics.include and not excluded by
 * mirror.topics.exclude (exclude wins). An empty include selects nothing. */
int mirrorconf_topic_selected(const struct mirrorconf *mc, const char *topic);
/* 1 if the consumer group is selected by mirror.groups.include and not
 * excluded by mirror.groups.exclude (exclude wins). */
int mirrorconf_group_selected(const struct mirrorconf *mc, const char *group);
/* The destination principal of a source principal under
 * mirror.acls.principal.map (itself when not mapped). */
const char *mirrorconf_map_principal(const struct mirrorconf *mc,
    const char *principal);
/* 1 if a source topic config must not be copied to the destination. */
int mirrorconf_topic_property_excluded(const struct mirrorconf *mc,
    const char *name);

/* 1 if the key's value is secret (never echoed, never logged). */
int mirrorconf_is_secret(const char *name);
/* 1 if name is a mirror config key we accept. */
int mirrorconf_is_known(const char *name);

/*
 * One source/destination client property (the librdkafka-named subset
 * mirrord supports): 0 if acceptable, else -1 with a reason in err that
 * names the property (and the value unless it is secret), with a
 * "did you mean" for near misses.
 */
int mirrorconf_check_client_prop(const char *name, const char *value,
    char *err, size_t errlen);

/*
 * The client properties of the request, in request order with canonical
 * names (sasl.mechanisms becomes sasl.mechanism): feed them to
 * kconn_config_set().  bootstrap.servers is mc->bootstrap_servers.
 * Pointers into mc; *n pairs.
 */
void mirrorconf_client_pairs(const struct mirrorconf *mc,
    const char *const **names, const char *const **values, size_t *n);

/* 1 if the key names a file (ssl.ca.location, ssl.certificate.location,
 * ssl.key.location: every *.location key of the table). */
int mirrorconf_is_file_key(const char *name);

/*
 * Checks every file-naming config with safefile_check() against allowed
 * (mirrors.allowed_file_dirs; NULL or empty refuses every file).  Returns 0,
 * or -1 with *err_code 40 and a message naming the key, the path and why.
 * Looks without opening: cheap enough for the admin handler.
 */
int mirrorconf_check_files(const char *const *names,
    const char *const *values, size_t n, const char *const *allowed,
    int16_t *err_code, char *msg, size_t msglen);

/* Applies bootstrap.servers and the client properties to a librdkafka
 * configuration (rd_kafka_conf_set).  Errors never contain secret values. */
struct rd_kafka_conf_s;
int mirrorconf_apply_rdkafka(const struct mirrorconf *mc,
    struct rd_kafka_conf_s *conf, char *err, size_t errlen);

/* Reference of every key for the man pages: an mdoc .Bl list. */
void mirrorconf_write_mdoc(FILE *out);
/* The same as a commented .properties example (kafka-mirrors docs). */
void mirrorconf_write_example(FILE *out);

#endif
