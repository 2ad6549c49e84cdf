/*
 * daemonconf.h: mirrord's own configuration, the YAML file given with
 * --config (module prefix config_).
 *
 * Why this is not lib/config.h: every source file starts with
 * #include "config.h" for autoconf's header, and a lib/config.h would shadow
 * it for everything in lib/.
 *
 * One table in daemonconf.c (config_keys[]) drives everything: for each key
 * its dotted path, type, bounds, default, whether SIGHUP may change it and a
 * description.  The parser, config_dump (--check-config), the annotated
 * example etc/mirrord.yaml (config_write_example) and the key list of
 * mirrord.yaml(5) (config_write_mdoc) all come from it; test_config_docs.py
 * fails when the committed files drift from the table.
 *
 * A struct config is immutable once loaded and owns all its strings.  A
 * reload builds a new one with config_load(); the daemon swaps it in only if
 * it loaded without errors, after config_reload_keep() has copied back the
 * values that need a restart (and logged them).
 */
#ifndef MIRRORD_DAEMONCONF_H
#define MIRRORD_DAEMONCONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_MAX_FILE_BYTES (1024 * 1024)
/* server.listen's default, also kafka-mirrors' --bootstrap-server's. */
#define CONFIG_SERVER_LISTEN_DEFAULT "127.0.0.1:9192"
#define CONFIG_MAX_ERRORS 64

struct config_hostport {
	char *host;    /* NULL when unset; IPv6 literals without brackets */
	uint16_t port; /* 0 on a listen address: any free port (tests) */
};

/* A YAML mapping of strings, in file order; names are unique. */
struct config_map {
	size_t n;
	char **names;
	char **values;
};

/* A list of strings, NULL-terminated (v[n] == NULL, v never NULL once
 * loaded), so it can be handed to safefile as an allow list. */
struct config_list {
	size_t n;
	char **v;
};

/* A YAML list of principals ("User:admin"), in file order. */
struct config_principals {
	size_t n;
	char **v;
};

/* One rule of authorization.acls (authz.h says what it means). */
struct config_acl {
	char *principal;  /* "User:alice" or "User:*" */
	unsigned ops;     /* AUTHZ_OP_BIT()s of authz.h */
	int deny;         /* permission: deny (else allow) */
	size_t nmirrors;
	char **mirrors;   /* names, "prefix*" or "*" */
	int line;         /* where the rule starts in the file, 0 if unknown */
};

struct config_acls {
	size_t n;
	struct config_acl *v;
};

/* authorization.enabled; the order is that of the key's choices. */
enum config_authz_mode {
	CONFIG_AUTHZ_AUTO,  /* on when the listener authenticates or rules exist */
	CONFIG_AUTHZ_TRUE,
	CONFIG_AUTHZ_FALSE,
};

/* log.target; the order is that of the key's choices in the table. */
enum config_log_target {
	CONFIG_LOG_AUTO,    /* journald prefixes when JOURNAL_STREAM is set */
	CONFIG_LOG_STDERR,  /* timestamped lines */
	CONFIG_LOG_JOURNAL, /* "<N>" priority prefixes */
};

/* server.security_protocol and server.ssl.client_auth, in the order of the
 * keys' choices in the table. */
enum config_storage_backend {
	CONFIG_STORAGE_FILE,
	CONFIG_STORAGE_KAFKA,
};

enum config_security_protocol {
	CONFIG_SEC_PLAINTEXT,
	CONFIG_SEC_SSL,
	CONFIG_SEC_SASL_PLAINTEXT,
	CONFIG_SEC_SASL_SSL,
};

enum config_client_auth {
	CONFIG_CLIENT_AUTH_NONE,
	CONFIG_CLIENT_AUTH_REQUESTED,
	CONFIG_CLIENT_AUTH_REQUIRED,
};

/*
 * Every key of the table, one field each.  Durations are milliseconds,
 * sizes bytes.  log_level is an enum log_level (log.h) value.
 */
struct config {
	char *path;                              /* file it came from ("<defaults>") */

	int64_t server_node_id;                  /* server.node_id */
	struct config_hostport server_listen;    /* server.listen */
	struct config_hostport server_advertised;/* server.advertised; when unset, derived from
	                                            server.listen (port 0 there stays 0 here:
	                                            use the port actually bound) */
	int64_t server_max_request_bytes;        /* server.max_request_bytes */
	int64_t server_max_connections;          /* server.max_connections */
	int64_t server_max_connections_per_ip;   /* server.max_connections_per_ip */
	int64_t server_idle_timeout_ms;          /* server.idle_timeout_ms */
	int64_t server_request_timeout_ms;       /* server.request_timeout_ms */
	int64_t server_max_buffered_bytes_per_connection;
	int64_t server_max_buffered_bytes_total;
	int64_t server_max_response_bytes;       /* server.max_response_bytes */

	int64_t limits_max_mirrors;              /* limits.max_mirrors */
	int64_t limits_max_patterns_per_mirror;  /* limits.max_patterns_per_mirror */
	int server_security_protocol;            /* enum config_security_protocol */
	char *server_ssl_certificate_location;   /* server.ssl.*: NULL when unset */
	char *server_ssl_key_location;
	char *server_ssl_key_password;
	char *server_ssl_ca_location;
	int server_ssl_client_auth;              /* enum config_client_auth */
	char *server_sasl_enabled_mechanisms;    /* "PLAIN,SCRAM-SHA-512" */
	char *server_sasl_credentials_file;      /* NULL when unset */

	char *storage_data_dir;                  /* storage.data_dir */
	int64_t storage_snapshot_every_records;  /* storage.snapshot_every_records */
	int storage_fsync;                       /* storage.fsync */
	char *storage_secret_key_file;           /* storage.secret_key_file, NULL = derived */
	int storage_backend;                     /* storage.backend: CONFIG_STORAGE_FILE, _KAFKA */
	char *storage_kafka_topic;               /* storage.kafka.topic */
	int64_t storage_kafka_replication_factor; /* storage.kafka.replication_factor */
	int64_t storage_kafka_min_insync_replicas; /* storage.kafka.min_insync_replicas */
	int64_t storage_kafka_timeout_ms;        /* storage.kafka.timeout_ms */

	int cluster_enabled;                     /* cluster.enabled */
	char *cluster_group_id;                  /* cluster.group_id */
	char *cluster_instance_id;               /* cluster.instance_id, NULL = derived */
	int64_t cluster_local_broker_id;         /* cluster.local_broker_id, -1 = detect */
	struct config_hostport cluster_advertised_admin; /* host NULL = server.advertised */
	int64_t cluster_session_timeout_ms;      /* cluster.session_timeout_ms */
	int64_t cluster_heartbeat_interval_ms;   /* cluster.heartbeat_interval_ms */
	int64_t cluster_status_interval_ms;      /* cluster.status_interval_ms */

	char *destination_bootstrap_servers;     /* destination.bootstrap_servers, "h:p,h:p" */
	struct config_map destination_client;    /* destination.client */

	struct config_list mirrors_allowed_file_dirs; /* mirrors.allowed_file_dirs */
	struct config_list mirrors_provider_dirs; /* mirrors.provider_dirs */
	int mirrors_allow_env_provider;          /* mirrors.allow_env_provider */

	struct config_hostport metrics_listen;   /* metrics.listen, host NULL = disabled */
	int metrics_per_partition;               /* metrics.per_partition */

	int log_level;                           /* log.level */
	int log_target;                          /* log.target (enum config_log_target) */

	int64_t pipeline_max_inflight_batches_per_partition;
	int64_t pipeline_max_inflight_bytes_per_partition;
	int64_t pipeline_max_inflight_bytes_total;
	int64_t pipeline_request_timeout_ms;
	int64_t pipeline_retry_backoff_ms;
	int64_t pipeline_stuck_lso_warn_ms;
	int64_t pipeline_topic_deletion_confirm_ms;

	int64_t shutdown_timeout_ms;             /* shutdown.timeout_ms */

	int authorization_enabled;               /* enum config_authz_mode */
	struct config_principals authorization_super_users;
	struct config_acls authorization_acls;
};

/* Errors collected while loading, each "file:line:column: key: message". */
struct config_error {
	int line, column; /* 1-based; 0 when there is no position */
	char *key;        /* dotted key path, or NULL */
	char *text;       /* the full formatted line */
};

struct config_errors {
	size_t n;         /* stored (at most CONFIG_MAX_ERRORS) */
	size_t dropped;   /* found beyond the cap */
	struct config_error v[CONFIG_MAX_ERRORS];
};

void config_errors_init(struct config_errors *errs);
void config_errors_fini(struct config_errors *errs);
/* Writes every error, one per line, and a "N more" line if some dropped. */
void config_errors_print(const struct config_errors *errs, FILE *out);

/*
 * Loads path.  On success returns 0 with *out set.  Otherwise returns -1,
 * *out NULL, and every problem found in errs (unknown keys with a "did you
 * mean", wrong types, values out of range, bad host:port, duplicate keys,
 * missing required keys, YAML syntax errors), never stopping at the first.
 * errs may be NULL.  Values of secret keys never appear in messages.
 */
int config_load(const char *path, struct config **out,
    struct config_errors *errs);
/* The same, from a string (name is used in messages). */
int config_load_string(const char *name, const char *text, size_t len,
    struct config **out, struct config_errors *errs);
/* All defaults; required keys are unset (NULL). Never fails but on ENOMEM. */
struct config *config_defaults(void);
void config_free(struct config *cfg);

/*
 * Reload support.  config_reload_diff() compares old and new key by key and
 * stores in keys[] (up to cap) the dotted paths of keys that changed but
 * need a restart; it returns how many there are (possibly more than cap).
 * config_reload_keep() copies those values from old into new, so new can
 * be swapped in while the restart-only values stay as they are running.
 */
size_t config_reload_diff(const struct config *old, const struct config *nw,
    const char **keys, size_t cap);
int config_reload_keep(struct config *nw, const struct config *old);

/* "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL". */
const char *config_security_protocol_name(int proto);
/*
 * Parses server.sasl.enabled_mechanisms: sets enabled[m] (indexed by
 * ksasl_mech: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; may be NULL) and returns
 * how many were named, or -1 with the reason in why.
 */
int config_sasl_mechanisms(const char *list, int *enabled, char *why,
    size_t whylen);

/* 1 if a property or key name holds a secret whose value is never shown. */
int config_key_is_secret(const char *key);
/* The text to show for a value: "(hidden)" for secret keys, else value. */
const char *config_redact(const char *key, const char *value);

/* Formats one key's current value as it would be written in YAML (secrets
 * redacted).  Returns -1 if key is not a known key. */
int config_format_value(const struct config *cfg, const char *key, char *buf,
    size_t len);

/* Writes the effective configuration as YAML (--check-config). */
void config_dump(const struct config *cfg, FILE *out);
/* Writes the annotated example (etc/mirrord.yaml). */
void config_write_example(FILE *out);
/* Writes the mdoc key list (.Bl ... .El) of mirrord.yaml(5). */
void config_write_mdoc(FILE *out);

/* Table access for tools and tests. */
size_t config_key_count(void);
/* Path of key i ("server.listen"), or NULL past the end. */
const char *config_key_path(size_t i);
/* 1 if key may change on SIGHUP, 0 if not, -1 if unknown. */
int config_key_reloadable(const char *key);

/* Helpers shared with mirrorconf. */
/*
 * Parses "host:port[,host:port...]" (spaces around entries allowed, IPv6
 * addresses in brackets, at most 100 entries).  On success *out is the
 * normalised list, malloc'd ("a:1,[::1]:2"); on failure why names the bad
 * entry and what is wrong with it.
 */
int config_parse_hostlist(const char *s, char **out, char *why, size_t whylen);
/* Levenshtein distance of two short names (SIZE_MAX past 128 bytes). */
size_t config_edit_distance(const char *a, const char *b);
/* Writes prose as mdoc text lines: one sentence per line, wrapped at 78
 * columns, backslashes and leading dots escaped. */
void config_mdoc_text(FILE *out, const char *s);

#endif
