/*
 * daemonconf.c: see daemonconf.h.  The key table comes first; everything
 * below it (value parsers, the YAML walk, defaults, reload) is driven by it
 * and knows no key by name, except the few cross-key checks in
 * check_combination() and the derivation of server.advertised.  The
 * writers (dump, example, man page list) are in daemonconf_doc.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "authz.h"
#include "cfgprov.h"
#include "compat.h"
#include "daemonconf.h"
#include "daemonconf_int.h"
#include "log.h"
#include "mirrorconf.h"

#define F(field) offsetof(struct config, field)
#define KiB (INT64_C(1024))
#define MiB (INT64_C(1024) * KiB)
#define GiB (INT64_C(1024) * MiB)
#define DAY_MS (INT64_C(86400000))

/* The one table.  Keys of a section stay together, sections in this order. */
const struct ckey config_keys[] = {
	{ "server.node_id", CT_INT, F(server_node_id), "1", 0, INT32_MAX, NULL, 0, NULL,
	  "Broker id mirrord reports for itself in Metadata responses on its admin port. "
	  "Clients see mirrord as a one-broker cluster with this id as broker and controller." },
	{ "server.listen", CT_HOSTPORT, F(server_listen), CONFIG_SERVER_LISTEN_DEFAULT, 0, 0, NULL, KF_PORT0, NULL,
	  "Address of the Kafka-protocol admin listener that serves the mirror RPCs to kafka-mirrors and Kafka admin clients. "
	  "The default accepts connections from this machine only. "
	  "To serve other hosts use one of this machine's addresses, or 0.0.0.0 or [::] for all interfaces, together with authentication (server.security_protocol) and authorization (the authorization section): "
	  "mirrord logs a warning at start when clients on other hosts could change mirrors anonymously. "
	  "Port 0 takes any free port, which is meant for tests." },
	{ "server.advertised", CT_HOSTPORT, F(server_advertised), "", 0, 0, NULL, KF_EMPTY, NULL,
	  "Address mirrord names as its broker in Metadata responses, the one clients connect to after bootstrapping. "
	  "Empty means the listen address, with this machine's host name when listening on all interfaces." },
	{ "server.max_request_bytes", CT_SIZE, F(server_max_request_bytes), "100MiB", 1 * KiB, 1 * GiB, NULL, KF_RELOAD, NULL,
	  "Largest request frame accepted on the admin listener. "
	  "A client that announces a larger frame is disconnected before anything is read." },
	{ "server.max_connections", CT_INT, F(server_max_connections), "1024", 1, 65536, NULL, KF_RELOAD, NULL,
	  "Most admin connections open at once. "
	  "At the limit, a new connection closes the connection that has been idle the longest (nothing buffered, no request in flight), so idle connections cannot lock an operator out; "
	  "when none is idle the new connection is closed at once. "
	  "Both are logged and counted in mirrord_admin_rejected_requests_total (evicted_idle, too_many_connections)." },
	{ "server.max_connections_per_ip", CT_INT, F(server_max_connections_per_ip), "128", 1, 65536, NULL, KF_RELOAD, NULL,
	  "Most admin connections open at once from one peer address, loopback included. "
	  "Further connections from that address are closed at once, logged and counted (too_many_connections_per_ip)." },
	{ "server.idle_timeout_ms", CT_DURATION, F(server_idle_timeout_ms), "600000", 100, 7 * DAY_MS, NULL, KF_RELOAD, NULL,
	  "An admin connection with no request in flight, nothing buffered and no traffic for this long is closed, logged and counted (idle_timeout), like Kafka's connections.max.idle.ms." },
	{ "server.request_timeout_ms", CT_DURATION, F(server_request_timeout_ms), "30000", 100, 3600000, NULL, KF_RELOAD, NULL,
	  "Time a client has to send the rest of a request frame once its first byte arrived. "
	  "A frame still incomplete after it is closed, logged and counted (request_timeout)." },
	{ "server.max_buffered_bytes_per_connection", CT_SIZE, F(server_max_buffered_bytes_per_connection), "1MiB", 4 * KiB, 1 * GiB, NULL, KF_RELOAD, NULL,
	  "Most bytes read ahead from one admin connection and not yet handled, such as pipelined requests queued behind one being handled. "
	  "Past it mirrord stops reading from that peer until it catches up; a single frame may still be up to server.max_request_bytes." },
	{ "server.max_buffered_bytes_total", CT_SIZE, F(server_max_buffered_bytes_total), "256MiB", 1 * MiB, 64 * GiB, NULL, KF_RELOAD, NULL,
	  "Most bytes buffered by all admin connections together: partial and queued request frames, requests being handled, and answers not yet sent. "
	  "Past it the connection holding the largest buffers is closed, logged and counted (buffered_bytes_total). "
	  "When smaller than server.max_request_bytes plus server.max_response_bytes, that sum is used instead, so a request and an answer of the largest sizes always fit." },
	{ "server.max_response_bytes", CT_SIZE, F(server_max_response_bytes), "64MiB", 64 * KiB, 1 * GiB, NULL, KF_RELOAD, NULL,
	  "Largest response mirrord encodes on the admin listener. "
	  "A DescribeMirrors or ListMirrors answer that would be larger is replaced by POLICY_VIOLATION (44) naming this limit; "
	  "a topic operation's answer drops its per-topic messages first." },
	{ "server.security_protocol", CT_ENUM, F(server_security_protocol), "PLAINTEXT", 0, 0, "PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL", 0, NULL,
	  "Security of the admin listener, with a Kafka broker's listener names: PLAINTEXT (none), SSL (TLS 1.2 or later; with server.ssl.client_auth the principal is the client certificate's subject), SASL_PLAINTEXT and SASL_SSL (clients log in with SaslHandshake and SaslAuthenticate; SASL_PLAINTEXT sends PLAIN passwords in clear). "
	  "Before a SASL client has logged in only ApiVersions, SaslHandshake and SaslAuthenticate are answered, "
	  "and a request frame larger than 512 KiB closes the connection at its size prefix, as Kafka's sasl.server.max.receive.size does (counted as oversized_unauthenticated)." },
	{ "server.ssl.certificate_location", CT_STRING, F(server_ssl_certificate_location), NULL, 0, 0, NULL, 0, "/etc/mirrord/tls/admin.pem",
	  "PEM file with the admin listener's certificate (and any intermediate certificates after it). "
	  "Required with SSL and SASL_SSL; read again on SIGHUP, so a renewed certificate can replace it in place." },
	{ "server.ssl.key_location", CT_STRING, F(server_ssl_key_location), NULL, 0, 0, NULL, 0, "/etc/mirrord/tls/admin-key.pem",
	  "PEM file with the private key of server.ssl.certificate_location. "
	  "Required with SSL and SASL_SSL; keep it readable by mirrord only." },
	{ "server.ssl.key_password", CT_STRING, F(server_ssl_key_password), NULL, 0, 0, NULL, 0, "changeme",
	  "Password of an encrypted server.ssl.key_location. "
	  "It may be a config provider reference read at start-up and reload, such as ${credential:NAME} for a systemd credential (see SECRETS in mirrord.yaml(5)). "
	  "Its value is never logged or printed." },
	{ "server.ssl.ca_location", CT_STRING, F(server_ssl_ca_location), NULL, 0, 0, NULL, 0, "/etc/mirrord/tls/clients-ca.pem",
	  "PEM file of the certificate authorities whose client certificates are accepted. "
	  "Required when server.ssl.client_auth is requested or required; read again on SIGHUP." },
	{ "server.ssl.client_auth", CT_ENUM, F(server_ssl_client_auth), "none", 0, 0, "none|requested|required", 0, NULL,
	  "Client certificates on SSL and SASL_SSL, as Kafka's ssl.client.auth: none asks for none, requested verifies one if the client sends it, required refuses the TLS handshake without a certificate signed by server.ssl.ca_location. "
	  "On SSL the principal of a verified certificate is User: followed by its subject in RFC 2253 form (User:CN=admin,O=example); without one it is User:ANONYMOUS." },
	{ "server.sasl.enabled_mechanisms", CT_STRING, F(server_sasl_enabled_mechanisms), "SCRAM-SHA-256,SCRAM-SHA-512", 0, 0, NULL, 0, NULL,
	  "Comma-separated SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. "
	  "PLAIN checks the password against the user's SCRAM-SHA-512 (else SCRAM-SHA-256) credential." },
	{ "server.sasl.credentials_file", CT_STRING, F(server_sasl_credentials_file), NULL, 0, 0, NULL, 0, "/etc/mirrord/admin-credentials",
	  "File of SCRAM credentials (salt, iterations, StoredKey and ServerKey per user and mechanism; never passwords), managed with mirrord --add-user and --delete-user. "
	  "Required with SASL_PLAINTEXT and SASL_SSL; mode 0600; read again on SIGHUP." },

	{ "limits.max_mirrors", CT_INT, F(limits_max_mirrors), "1000", 1, 1000000, NULL, KF_RELOAD, NULL,
	  "Most mirrors mirrord holds. "
	  "CreateMirror beyond it is refused with POLICY_VIOLATION (44) naming this limit; existing mirrors are not affected when it is lowered." },
	{ "limits.max_patterns_per_mirror", CT_INT, F(limits_max_patterns_per_mirror), "100", 1, 100000, NULL, KF_RELOAD, NULL,
	  "Most topic patterns (include and exclude together) one mirror holds. "
	  "AddTopicsToMirror or RemoveTopicsFromMirror that would go beyond it is refused with POLICY_VIOLATION (44) naming this limit, and nothing changes." },

	{ "storage.data_dir", CT_STRING, F(storage_data_dir), "/var/lib/mirrord", 0, 0, NULL, 0, NULL,
	  "Directory of the metadata log and its snapshots: mirrors, their topics and partition states (with storage.backend kafka the log is in a topic and this directory keeps only the daemon's own small files, such as the default secret key). "
	  "It must be writable by mirrord and must not be shared by two daemons." },
	{ "storage.snapshot_every_records", CT_INT, F(storage_snapshot_every_records), "10000", 1, INT32_MAX, NULL, KF_RELOAD, NULL,
	  "A snapshot of the metadata state is written after this many log records, and older log segments are removed. "
	  "Smaller values mean faster restarts and more writes." },
	{ "storage.fsync", CT_BOOL, F(storage_fsync), "true", 0, 0, NULL, 0, NULL,
	  "Whether every metadata log append is flushed to disk with fsync before the RPC that caused it is answered. "
	  "Turning it off loses acknowledged changes on power failure and is only meant for tests." },
	{ "storage.secret_key_file", CT_STRING, F(storage_secret_key_file), "", 0, 0, NULL, KF_EMPTY, NULL,
	  "File of the 256-bit key that encrypts the secrets of CreateMirror configs (sasl.password, ssl.key.password) in the metadata log and its snapshots (AES-256-GCM): base64 on one line, or 32 raw bytes. "
	  "Empty means the systemd credential mirrord.secret_key when $CREDENTIALS_DIRECTORY holds one, else <storage.data_dir>/secret.key, created with mode 0600 at the first start. "
	  "Keep a copy: without it the stored secrets cannot be read and mirrord refuses to start." },
	{ "storage.backend", CT_ENUM, F(storage_backend), "file", 0, 0, "file|kafka", 0, NULL,
	  "Where the metadata log lives: file keeps it in storage.data_dir (one instance); kafka keeps it in the topic storage.kafka.topic of the destination cluster, reached with destination.bootstrap_servers and destination.client, replicated by the brokers. "
	  "With kafka one instance at a time writes: a newly started mirrord becomes the writer and the broker refuses every later write of the one before, whose metadata changes then fail naming the fencing. "
	  "Instances sharing the topic must share storage.secret_key_file. "
	  "mirrord --migrate-metadata --from-dir DIR copies a file log into an empty topic." },
	{ "storage.kafka.topic", CT_STRING, F(storage_kafka_topic), "__mirrord_metadata", 0, 0, NULL, 0, NULL,
	  "Topic of the metadata log with storage.backend kafka. "
	  "mirrord creates it with one partition, cleanup.policy=delete and infinite retention, unclean leader election off; an existing topic with more partitions, compaction or a finite retention is refused." },
	{ "storage.kafka.replication_factor", CT_INT, F(storage_kafka_replication_factor), "3", 1, 32767, NULL, 0, NULL,
	  "Replication factor of a topic mirrord creates, capped by the number of brokers (with a warning)." },
	{ "storage.kafka.min_insync_replicas", CT_INT, F(storage_kafka_min_insync_replicas), "2", 1, 32767, NULL, 0, NULL,
	  "min.insync.replicas of a topic mirrord creates, capped by its replication factor (with a warning). "
	  "Every write uses acks=all, so a change is acknowledged once this many replicas hold it." },
	{ "storage.kafka.timeout_ms", CT_DURATION, F(storage_kafka_timeout_ms), "15000", 100, 600000, NULL, 0, NULL,
	  "Longest one metadata write (or one step of start-up) waits for the destination cluster, resends included. "
	  "The write blocks the daemon meanwhile, as fsync does with the file backend; a write whose outcome is still unknown after it stops all further metadata writes until a restart." },

	{ "cluster.enabled", CT_BOOL, F(cluster_enabled), "false", 0, 0, NULL, 0, NULL,
	  "Whether this instance runs as one member of a group of mirrord instances sharing the metadata log (requires storage.backend kafka). "
	  "The instances join the consumer group cluster.group_id on the destination cluster; its leader writes the metadata log and assigns the mirrored partitions, every other member follows the log and copies the partitions assigned to it. "
	  "See RUNNING SEVERAL INSTANCES in mirrord(8)." },
	{ "cluster.group_id", CT_STRING, F(cluster_group_id), "mirrord", 0, 0, NULL, 0, NULL,
	  "Group id of the instances on the destination cluster (protocol type mirrord). "
	  "Instances sharing storage.kafka.topic must share it." },
	{ "cluster.instance_id", CT_STRING, F(cluster_instance_id), "", 0, 0, NULL, KF_EMPTY, NULL,
	  "Name of this instance in the group, stable across restarts (Kafka's static membership, group.instance.id): a second process started with the same name fences the first. "
	  "Empty means <host name>:<admin port>." },
	{ "cluster.local_broker_id", CT_INT, F(cluster_local_broker_id), "-1", -1, INT32_MAX, NULL, 0, NULL,
	  "Node id of the destination broker running beside this instance: the partitions whose destination leader it is are assigned to this instance, so produce traffic stays on the host. "
	  "The value -1 detects it: the one destination broker whose advertised host is an address of this machine; with none or several matching, no broker is local (logged), and the instance gets a share of the other partitions." },
	{ "cluster.advertised_admin", CT_HOSTPORT, F(cluster_advertised_admin), "", 0, 0, NULL, KF_EMPTY, NULL,
	  "Admin address the other instances name for this one (NOT_CONTROLLER answers, Metadata brokers), which kafka-mirrors connects to. "
	  "Empty means server.advertised." },
	{ "cluster.session_timeout_ms", CT_DURATION, F(cluster_session_timeout_ms), "10000", 1000, 300000, NULL, 0, NULL,
	  "Group session timeout: an instance that sends no heartbeat for this long leaves the group, and its partitions (or the metadata writer's role) move to the others; an instance whose heartbeats have not been answered for this long stops writing its partitions until one is. "
	  "The broker bounds it with group.min.session.timeout.ms and group.max.session.timeout.ms." },
	{ "cluster.heartbeat_interval_ms", CT_DURATION, F(cluster_heartbeat_interval_ms), "3000", 100, 100000, NULL, 0, NULL,
	  "Interval of the group heartbeats; must be below cluster.session_timeout_ms (a third of it is usual)." },
	{ "cluster.status_interval_ms", CT_DURATION, F(cluster_status_interval_ms), "5000", 100, 600000, NULL, 0, NULL,
	  "Interval at which each instance publishes the live numbers (offsets, lag) of the partitions it copies to the compacted topic <storage.kafka.topic>-status, which every instance reads so DescribeMirrors shows the lag of every partition." },

	{ "destination.bootstrap_servers", CT_HOSTLIST, F(destination_bootstrap_servers), NULL, 0, 0, NULL, KF_REQUIRED,
	  "\"127.0.0.1:9092\"",
	  "Bootstrap servers of the destination cluster, the cluster mirrord writes to and runs beside. "
	  "Either a comma-separated string or a YAML list of host:port entries." },
	{ "destination.client", CT_MAP, F(destination_client), NULL, 0, 0, NULL, 0,
	  "security.protocol: SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\nsasl.username: mirrord\nsasl.password: ${credential:mirrord.destination_password}\nssl.ca.location: /etc/ssl/certs/ca-certificates.crt",
	  "Client properties for connections to the destination cluster, with librdkafka's names: security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm, client.id and the timeouts. "
	  "Values may be config provider references, resolved at start-up and never stored: ${credential:NAME} (a systemd credential, LoadCredential=), ${file:/path/file.properties:key}, ${dir:/path/dir:filename}, ${env:VARIABLE}. "
	  "Values of secret properties are never logged or printed." },

	{ "mirrors.allowed_file_dirs", CT_PATHLIST, F(mirrors_allowed_file_dirs), "/etc/mirrord,/etc/ssl/certs", 0, 0, NULL, KF_RELOAD | KF_EMPTY, NULL,
	  "Directories holding the files a CreateMirror request may name in its configs (ssl.ca.location, ssl.certificate.location, ssl.key.location). "
	  "Such a file must be a regular file of at most 1 MiB inside one of these directories once every symbolic link is resolved; devices, fifos, sockets and anything under /proc, /sys or /dev are always refused. "
	  "A request naming any other file is refused with INVALID_CONFIG (40), and a stored mirror whose file is refused or unreadable when it is used has its partitions FAILED with the key, the path and the reason. "
	  "Files are read by a worker thread, never on the event loop. "
	  "Either a comma-separated string or a YAML list of absolute directory names; an empty list ([] or \"\") means no file may be named over the wire at all. "
	  "The files of destination.client come from this file and may be anywhere, but must be regular files too." },

	{ "mirrors.provider_dirs", CT_PATHLIST, F(mirrors_provider_dirs), "", 0, 0, NULL, KF_RELOAD | KF_EMPTY, NULL,
	  "Directories whose files CreateMirror configs may read with the ${file:PATH:KEY} and ${dir:DIR:NAME} config providers, checked and read as for mirrors.allowed_file_dirs. "
	  "Empty (the default) refuses both providers in CreateMirror. "
	  "The value read is sent to the mirror's source brokers, which the admin client chooses: list only directories holding secrets meant for mirrors, never the one of mirrord.yaml or of the secret key." },
	{ "mirrors.allow_env_provider", CT_BOOL, F(mirrors_allow_env_provider), "false", 0, 0, NULL, KF_RELOAD, NULL,
	  "Whether CreateMirror configs may use the ${env:VARIABLE} config provider. "
	  "Off by default: any admin client could otherwise send mirrord's environment to a broker of its own as a SASL password. "
	  "The ${credential:NAME} provider is never accepted from CreateMirror for the same reason." },

	{ "metrics.listen", CT_HOSTPORT, F(metrics_listen), "127.0.0.1:9193", 0, 0, NULL, KF_EMPTY | KF_PORT0, NULL,
	  "Address of the HTTP listener serving /metrics (Prometheus text format), /healthz and /readyz. "
	  "An empty value disables it." },
	{ "metrics.per_partition", CT_BOOL, F(metrics_per_partition), "true", 0, 0, NULL, KF_RELOAD, NULL,
	  "Whether lag, offset and state series are exported per mirrored partition. "
	  "Turn it off when mirroring many thousands of partitions; per-mirror totals remain." },

	{ "log.level", CT_ENUM, F(log_level), "info", 0, 0, "error|warn|info|debug", KF_RELOAD, NULL,
	  "Least severe level that is logged." },
	{ "log.target", CT_ENUM, F(log_target), "auto", 0, 0, "auto|stderr|journal", 0, NULL,
	  "Where and how log lines are written. "
	  "The value stderr writes timestamped lines, journal writes lines with syslog priority prefixes for journald, and auto picks journal when started by systemd." },

	{ "pipeline.max_inflight_batches_per_partition", CT_INT, F(pipeline_max_inflight_batches_per_partition), "5", 1, 5, NULL, KF_RELOAD, NULL,
	  "Most record batches of one partition sent to the destination and not yet acknowledged (pipelined produce). "
	  "Each Produce request carries at most one batch of a partition, so several batches of one partition travel in successive requests on the same connection, which the broker answers in order; the broker's idempotent producer state deduplicates and orders up to 5 batches per producer, hence the upper bound. "
	  "Used only when the destination broker speaks Produce v8 or later (Kafka 2.4 and later, which check batch sequences); brokers that check no sequences (the librdkafka mock) always get one batch at a time. "
	  "It also caps the Produce requests in flight to one destination broker, each carrying the next batch of every partition that has one ready, so that partitions stay in step and requests stay full. "
	  "The value 1 sends one batch of a partition at a time and waits for its answer." },
	{ "pipeline.max_inflight_bytes_per_partition", CT_SIZE, F(pipeline_max_inflight_bytes_per_partition), "8MiB", 64 * KiB, 1 * GiB, NULL, KF_RELOAD, NULL,
	  "Most bytes of one partition fetched from the source and not yet acknowledged by the destination. "
	  "When reached, that partition stops fetching until the destination has acknowledged half of it, and then fetches that half at once: "
	  "a partition that is behind is fetched in large pieces, not a few KiB per Produce answer." },
	{ "pipeline.max_inflight_bytes_total", CT_SIZE, F(pipeline_max_inflight_bytes_total), "256MiB", 1 * MiB, 64 * GiB, NULL, KF_RELOAD, NULL,
	  "Most bytes held for record data across all partitions, which bounds the memory used for it: batches fetched and not yet acknowledged (queued, in flight, kept after an uncertain Produce), the largest answer of every Fetch in flight with the copies of its batches (reserved before the Fetch is sent, which asks for at most half of what is left), and encoded Produce requests not yet written to the destination. "
	  "Only a single batch larger than what is left may pass it (a broker returns the first batch of a Fetch whole), so that copying moves on; mirrord_memory_held_bytes shows each kind. "
	  "It must be at least pipeline.max_inflight_bytes_per_partition." },
	{ "pipeline.request_timeout_ms", CT_DURATION, F(pipeline_request_timeout_ms), "30000", 100, 3600000, NULL, KF_RELOAD, NULL,
	  "How long a Fetch to the source or a Produce to the destination may take before it is abandoned and retried. "
	  "Only the partitions of the request that timed out are affected: the connection stays open, the late answer is discarded when it comes, and the other requests on it are still answered; a connection that sends no answer for one more such period is closed." },
	{ "pipeline.retry_backoff_ms", CT_DURATION, F(pipeline_retry_backoff_ms), "100", 0, 60000, NULL, KF_RELOAD, NULL,
	  "Pause before retrying a request that failed with a retriable error." },
	{ "pipeline.stuck_lso_warn_ms", CT_DURATION, F(pipeline_stuck_lso_warn_ms), "300000", 0, 604800000, NULL, KF_RELOAD, NULL,
	  "How long a source partition's last stable offset may stand still below its high watermark (a transaction left open, which stops every read_committed reader, mirrord included) before mirrord logs a warning, DescribeMirrors reports it and mirrord_partition_lso_stuck_seconds shows it. "
	  "The value 0 turns the check off." },
	{ "pipeline.topic_deletion_confirm_ms", CT_DURATION, F(pipeline_topic_deletion_confirm_ms), "30000", 0, 3600000, NULL, KF_RELOAD, NULL,
	  "How long a mirrored topic must stay missing from the Metadata answers of a cluster, in at least 3 answers in a row, before mirrord takes it as deleted: one missing answer (a transient authorization change, a broker that does not know the topic yet) is never a deletion. "
	  "A source topic taken as deleted goes STOPPING and then STOPPED, with DescribeMirrors saying the source topic was deleted; a destination topic taken as deleted fails its partitions (FAILED, no automatic retry). "
	  "A topic that comes back under another topic id is a recreation, FAILED at once, whatever this says." },

	{ "shutdown.timeout_ms", CT_DURATION, F(shutdown_timeout_ms), "30000", 0, 3600000, NULL, KF_RELOAD, NULL,
	  "On SIGTERM, how long mirrord waits for in-flight produce requests to finish before it exits anyway. "
	  "Anything not acknowledged is fetched again after the restart." },

	{ "authorization.enabled", CT_ENUM, F(authorization_enabled), "auto", 0, 0, "auto|true|false", KF_RELOAD, NULL,
	  "Whether the mirror RPCs are checked against authorization.super_users and authorization.acls. "
	  "The value auto turns checking on when the admin listener authenticates clients (SASL_PLAINTEXT or SASL_SSL, or SSL with server.ssl.client_auth requested or required) or when any rule or super user is configured, and leaves it off otherwise: then every client, User:ANONYMOUS on a PLAINTEXT or plain SSL listener, may do everything. "
	  "Once on, authorization denies by default: a principal that is not a super user may do only what an allow rule grants and no deny rule takes away, so with no rules everyone but the super users is refused with CLUSTER_MIRROR_AUTHORIZATION_FAILED (144). "
	  "ApiVersions and Metadata are never checked." },
	{ "authorization.super_users", CT_PRINCIPALS, F(authorization_super_users), NULL, 0, 0, NULL, KF_RELOAD,
	  "- User:admin",
	  "Principals allowed every operation on every mirror while authorization is on: User:name for a SASL user, User: followed by the certificate's distinguished name for a TLS client (User:CN=ops,O=example), User:ANONYMOUS for clients that did not authenticate. "
	  "Wildcards are not accepted here." },
	{ "authorization.acls", CT_ACLS, F(authorization_acls), NULL, 0, 0, NULL, KF_RELOAD,
	  "- principal: User:alice\n  operations: [describe, alter]\n  mirrors: [\"dev-*\"]\n  permission: allow\n"
	  "- principal: \"User:*\"\n  operations: [describe]\n  mirrors: [\"*\"]\n  permission: allow",
	  "Authorization rules, a list of mappings with four keys. "
	  "The key principal names whom the rule is for: User:alice, or User:* for every user, User:ANONYMOUS included. "
	  "The key operations lists describe (ListMirrors, DescribeMirrors), alter (CreateMirror, AddTopicsToMirror, RemoveTopicsFromMirror, PauseMirrorTopics, ResumeMirrorTopics, RecoverMirrorTopics, DeleteMirror), describe_configs (DescribeConfigs of a mirror: kafka-mirrors --describe --config), alter_configs (IncrementalAlterConfigs of a mirror: kafka-mirrors --alter) or all; allowing alter also allows describe, and allowing alter_configs also allows describe_configs. "
	  "The key mirrors lists mirror names, prefixes ending in * (prod-*), or * for every mirror. "
	  "The key permission is allow or deny, and a deny rule that matches wins over any allow rule. "
	  "ListMirrors and DescribeMirrors without names leave out the mirrors the principal may not describe; a mirror named in a request the principal may not make is answered with CLUSTER_MIRROR_AUTHORIZATION_FAILED (144), logged with the principal and peer, and counted in mirrord_admin_authorization_denied_total." },
};

#define NKEYS ARRAY_SIZE(config_keys)
const size_t config_nkeys = NKEYS;

/* ---- small helpers --------------------------------------------------- */

void *config_field(const void *cfg, const struct ckey *k)
{
	return (char *)(uintptr_t)cfg + k->off;
}

const struct ckey *config_key_find(const char *path)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(config_keys[i].path, path) == 0)
			return &config_keys[i];
	return NULL;
}

/* Section of a key: "server" for "server.listen". */
size_t config_section_len(const char *path)
{
	const char *dot = strchr(path, '.');

	return dot ? (size_t)(dot - path) : 0;
}

/* 1 if path is a proper prefix (a section) of some key: "server". */
static int is_section(const char *path)
{
	size_t n = strlen(path);

	for (size_t i = 0; i < NKEYS; i++)
		if (strncmp(config_keys[i].path, path, n) == 0 && config_keys[i].path[n] == '.')
			return 1;
	return 0;
}

size_t config_key_count(void)
{
	return NKEYS;
}

const char *config_key_path(size_t i)
{
	return i < NKEYS ? config_keys[i].path : NULL;
}

int config_key_reloadable(const char *key)
{
	const struct ckey *k = config_key_find(key);

	return k == NULL ? -1 : !!(k->flags & KF_RELOAD);
}

int config_key_is_secret(const char *key)
{
	static const char *const marks[] = {
		"password", "secret", "jaas", "oauthbearer.config", "token",
		"credential", "key.pem", "private", "keystore.key",
	};

	if (key == NULL)
		return 0;
	/* A key naming a file holds a path, not a secret (storage.secret_key_file). */
	if (strlen(key) > 5 && strcmp(key + strlen(key) - 5, "_file") == 0)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(marks); i++)
		if (strcasestr(key, marks[i]) != NULL)
			return 1;
	return 0;
}

const char *config_redact(const char *key, const char *value)
{
	return config_key_is_secret(key) ? "(hidden)" : value;
}

/* Levenshtein distance, capped: both strings are short key names. */
size_t config_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[129];

	if (la > 128 || lb > 128)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t prev = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cur = row[j];
			size_t sub = prev + (a[i - 1] != b[j - 1]);

			row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), sub);
			prev = cur;
		}
	}
	return row[lb];
}

/* The closest key to path, if close enough to be a typo. */
static const char *suggest(const char *path)
{
	const char *best = NULL, *leaf;
	size_t bestd = SIZE_MAX, limit = MAX(strlen(path) / 4, 2);

	for (size_t i = 0; i < NKEYS; i++) {
		size_t d = config_edit_distance(path, config_keys[i].path);

		if (d < bestd) {
			bestd = d;
			best = config_keys[i].path;
		}
	}
	if (bestd <= limit)
		return best;
	/* The right key in the wrong section: "server.data_dir". */
	leaf = strrchr(path, '.');
	for (size_t i = 0; leaf != NULL && i < NKEYS; i++) {
		const char *kl = strrchr(config_keys[i].path, '.');

		if (kl != NULL && strcmp(kl, leaf) == 0)
			return config_keys[i].path;
	}
	return NULL;
}

/* A section name close to name, e.g. "sever" -> "server". */
static int suggest_section(const char *name, char *out, size_t outlen)
{
	size_t limit = MAX(strlen(name) / 4, 2), bestd = SIZE_MAX;

	out[0] = '\0';
	for (size_t i = 0; i < NKEYS; i++) {
		const char *dot = strchr(config_keys[i].path, '.');
		char sec[128];
		size_t d;

		if (dot == NULL || (size_t)(dot - config_keys[i].path) >= sizeof(sec))
			continue;
		memcpy(sec, config_keys[i].path, (size_t)(dot - config_keys[i].path));
		sec[dot - config_keys[i].path] = '\0';
		d = config_edit_distance(name, sec);
		if (d < bestd && d <= limit) {
			bestd = d;
			if (strlen(sec) < outlen)
				memcpy(out, sec, strlen(sec) + 1);
		}
	}
	return out[0] != '\0';
}

/* ---- errors ---------------------------------------------------------- */

void config_errors_init(struct config_errors *errs)
{
	memset(errs, 0, sizeof(*errs));
}

void config_errors_fini(struct config_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++) {
		free(errs->v[i].key);
		free(errs->v[i].text);
	}
	config_errors_init(errs);
}

void config_errors_print(const struct config_errors *errs, FILE *out)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(out, "%s\n", errs->v[i].text);
	if (errs->dropped > 0)
		fprintf(out, "(%zu more errors not shown)\n", errs->dropped);
}

struct lctx {
	const char *name;          /* file name for messages */
	struct config *cfg;
	struct config_errors *errs;
	size_t nerr;               /* errors found, stored or not */
	yaml_document_t *doc;
	int seen_line[NKEYS];      /* 1-based line where key i was set, 0 = not */
	int seen_col[NKEYS];
	struct {
		char path[64];
		int line, col;
	} secs[16];                /* sections met, for duplicates and positions */
	size_t nsecs;
};

PRINTF_LIKE(5, 6)
static void lerr(struct lctx *c, int line, int col, const char *key,
    const char *fmt, ...)
{
	struct config_error *e;
	char msg[512], text[1024];
	va_list ap;

	c->nerr++;
	if (c->errs == NULL)
		return;
	if (c->errs->n == CONFIG_MAX_ERRORS) {
		c->errs->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0 && key != NULL)
		snprintf(text, sizeof(text), "%s:%d:%d: %s: %s", c->name, line, col, key, msg);
	else if (line > 0)
		snprintf(text, sizeof(text), "%s:%d:%d: %s", c->name, line, col, msg);
	else if (key != NULL)
		snprintf(text, sizeof(text), "%s: %s: %s", c->name, key, msg);
	else
		snprintf(text, sizeof(text), "%s: %s", c->name, msg);
	e = &c->errs->v[c->errs->n];
	e->line = line;
	e->column = col;
	e->key = key != NULL ? strdup(key) : NULL;
	e->text = strdup(text);
	if (e->text == NULL) {
		free(e->key);
		c->errs->dropped++;
		return;
	}
	c->errs->n++;
}

#define MARK(n) (int)(n)->start_mark.line + 1, (int)(n)->start_mark.column + 1

/* ---- value parsers (shared by defaults and the file) ----------------- */

static int parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (*s == '\0' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s)
		return -1;
	if (errno == ERANGE)
		return -2; /* well-formed, but out of any range */
	*out = v;
	return (int)(end - s);
}

/* number[unit] with the multiplier of the unit, overflow-checked. */
static int parse_scaled(const char *s, const char *const *units,
    const int64_t *mult, size_t nunits, int64_t *out)
{
	int64_t v;
	int used = parse_i64(s, &v);

	if (used < 0)
		return used;
	s += used;
	if (*s == '\0') {
		*out = v;
		return 0;
	}
	while (*s == ' ')
		s++;
	for (size_t i = 0; i < nunits; i++) {
		if (strcasecmp(s, units[i]) == 0) {
			if (v > INT64_MAX / mult[i] || v < INT64_MIN / mult[i])
				return -2; /* well-formed, but out of any range */
			*out = v * mult[i];
			return 0;
		}
	}
	return -1;
}

static int parse_size(const char *s, int64_t *out)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	static const int64_t m[] = { 1, KiB, MiB, GiB, 1024 * GiB };

	return parse_scaled(s, u, m, ARRAY_SIZE(u), out);
}

static int parse_duration(const char *s, int64_t *out)
{
	static const char *const u[] = { "ms", "s", "m", "h" };
	static const int64_t m[] = { 1, 1000, 60000, 3600000 };

	return parse_scaled(s, u, m, ARRAY_SIZE(u), out);
}

static int parse_bool(const char *s, int *out)
{
	static const char *const t[] = { "true", "yes", "on" };
	static const char *const f[] = { "false", "no", "off" };

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		if (strcasecmp(s, t[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, f[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static int parse_enum(const char *s, const char *choices, int *out)
{
	size_t n = strlen(s);
	int idx = 0;

	for (const char *p = choices;; idx++) {
		const char *bar = strchr(p, '|');
		size_t len = bar != NULL ? (size_t)(bar - p) : strlen(p);

		if (len == n && strncasecmp(p, s, n) == 0) {
			*out = idx;
			return 0;
		}
		if (bar == NULL)
			return -1;
		p = bar + 1;
	}
}

static int valid_hostname(const char *h, size_t n)
{
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];

		if (!isalnum((unsigned char)c) && c != '-' && c != '.' && c != '_')
			return 0;
	}
	return h[0] != '.' && h[0] != '-';
}

/*
 * "host:port" or "[v6]:port" into hp.  why gets the reason on failure.
 */
static int parse_hostport(const char *s, int port0, struct config_hostport *hp,
    char *why, size_t whylen)
{
	const char *colon, *hs = s;
	size_t hn;
	int64_t port;
	char v6[64];

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL || rb[1] != ':') {
			snprintf(why, whylen, "expected [ipv6-address]:port");
			return -1;
		}
		hs = s + 1;
		hn = (size_t)(rb - hs);
		colon = rb + 1;
		if (hn == 0 || hn >= sizeof(v6)) {
			snprintf(why, whylen, "bad IPv6 address");
			return -1;
		}
		memcpy(v6, hs, hn);
		v6[hn] = '\0';
		{
			struct in6_addr a;

			if (inet_pton(AF_INET6, v6, &a) != 1) {
				snprintf(why, whylen, "bad IPv6 address '%s'", v6);
				return -1;
			}
		}
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			snprintf(why, whylen, "expected host:port, the port is missing");
			return -1;
		}
		hn = (size_t)(colon - s);
		if (memchr(s, ':', hn) != NULL) {
			snprintf(why, whylen, "an IPv6 address must be in brackets: [addr]:port");
			return -1;
		}
		if (hn == 0) {
			snprintf(why, whylen, "expected host:port, the host is missing (0.0.0.0 means all interfaces)");
			return -1;
		}
		if (!valid_hostname(s, hn)) {
			snprintf(why, whylen, "bad host name '%.*s'", (int)MIN(hn, 64), s);
			return -1;
		}
	}
	if (parse_i64(colon + 1, &port) < 0 || colon[1 + strspn(colon + 1, "0123456789")] != '\0' ||
	    port < (port0 ? 0 : 1) || port > 65535) {
		snprintf(why, whylen, "port must be a number from %d to 65535", port0 ? 0 : 1);
		return -1;
	}
	if ((hp->host = strndup(hs, hn)) == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	hp->port = (uint16_t)port;
	return 0;
}

/* Appends one validated host:port to a comma list (*list grows). */
static int hostlist_add(char **list, const char *item, char *why, size_t whylen)
{
	struct config_hostport hp = { 0 };
	size_t old = *list ? strlen(*list) : 0, add;
	char *nl;
	int v6;

	if (parse_hostport(item, 0, &hp, why, whylen) < 0)
		return -1;
	v6 = strchr(hp.host, ':') != NULL;
	add = strlen(hp.host) + 8 + (size_t)(v6 ? 2 : 0);
	if ((nl = realloc(*list, old + add + 1)) == NULL) {
		free(hp.host);
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	snprintf(nl + old, add + 1, "%s%s%s%s:%u", old ? "," : "", v6 ? "[" : "",
	    hp.host, v6 ? "]" : "", hp.port);
	*list = nl;
	free(hp.host);
	return 0;
}

int config_parse_hostlist(const char *s, char **out, char *why, size_t whylen)
{
	char r[160];
	char *copy = strdup(s), *save = NULL, *tok;
	char *list = NULL;
	size_t count = 0;

	if (copy == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		for (size_t n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		if (*tok == '\0')
			continue;
		if (++count > 100) {
			snprintf(why, whylen, "more than 100 servers");
			goto fail;
		}
		if (hostlist_add(&list, tok, r, sizeof(r)) < 0) {
			snprintf(why, whylen, "'%.64s': %s", tok, r);
			goto fail;
		}
	}
	free(copy);
	if (list == NULL) {
		snprintf(why, whylen, "expected at least one host:port");
		return -1;
	}
	*out = list;
	return 0;
fail:
	free(copy);
	free(list);
	return -1;
}

#define CONFIG_MAX_PATHS 64

static void list_free(struct config_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Appends one absolute path (checked) to l, which stays NULL-terminated. */
static int list_add_path(struct config_list *l, const char *s, char *why,
    size_t whylen)
{
	char **nv;

	if (s[0] != '/') {
		snprintf(why, whylen, "'%.200s' is not an absolute path", s);
		return -1;
	}
	if (strlen(s) >= PATH_MAX) {
		snprintf(why, whylen, "'%.64s...' is longer than %d bytes", s,
		    PATH_MAX - 1);
		return -1;
	}
	if (l->n >= CONFIG_MAX_PATHS) {
		snprintf(why, whylen, "more than %d entries", CONFIG_MAX_PATHS);
		return -1;
	}
	if ((nv = realloc(l->v, (l->n + 2) * sizeof(*nv))) == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	l->v = nv;
	if ((l->v[l->n] = strdup(s)) == NULL) {
		l->v[l->n] = NULL;
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	l->v[++l->n] = NULL;
	return 0;
}

/* An empty but loaded list: v is { NULL }. */
static int list_empty(struct config_list *l)
{
	list_free(l);
	if ((l->v = calloc(1, sizeof(*l->v))) == NULL)
		return -1;
	return 0;
}

/* "a,b,c": comma-separated absolute paths, spaces around entries ignored. */
static int parse_pathlist(const char *s, struct config_list *out, char *why,
    size_t whylen)
{
	struct config_list l = { 0 };
	char *copy = strdup(s), *save = NULL, *tok;

	if (copy == NULL || list_empty(&l) < 0) {
		free(copy);
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		for (size_t n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		if (*tok == '\0')
			continue;
		if (list_add_path(&l, tok, why, whylen) < 0) {
			free(copy);
			list_free(&l);
			return -1;
		}
	}
	free(copy);
	list_free(out);
	*out = l;
	return 0;
}

const char *config_type_name(const struct ckey *k, char *buf, size_t len)
{
	switch (k->type) {
	case CT_STRING: return "string";
	case CT_INT: return "integer";
	case CT_BOOL: return "boolean";
	case CT_DURATION: return "duration";
	case CT_SIZE: return "size";
	case CT_ENUM:
		snprintf(buf, len, "one of %s", k->choices);
		return buf;
	case CT_HOSTPORT: return "host:port";
	case CT_HOSTLIST: return "list of host:port";
	case CT_MAP: return "map of client properties";
	case CT_PATHLIST: return "list of absolute directories";
	case CT_PRINCIPALS: return "list of principals";
	case CT_ACLS: return "list of rules";
	}
	return "?";
}

void config_format_bound(const struct ckey *k, int64_t v, char *buf, size_t len)
{
	if (k->type == CT_SIZE && v != 0 && v % GiB == 0)
		snprintf(buf, len, "%" PRId64 "GiB", v / GiB);
	else if (k->type == CT_SIZE && v != 0 && v % MiB == 0)
		snprintf(buf, len, "%" PRId64 "MiB", v / MiB);
	else if (k->type == CT_SIZE && v != 0 && v % KiB == 0)
		snprintf(buf, len, "%" PRId64 "KiB", v / KiB);
	else
		snprintf(buf, len, "%" PRId64, v);
}

/* Range phrase: "from 1KiB to 1GiB". */
void config_range_text(const struct ckey *k, char *buf, size_t len)
{
	char lo[32], hi[32];

	config_format_bound(k, k->lo, lo, sizeof(lo));
	config_format_bound(k, k->hi, hi, sizeof(hi));
	snprintf(buf, len, "from %s to %s%s", lo, hi,
	    k->type == CT_DURATION ? " ms" : "");
}

/*
 * Parses a scalar value for key k and stores it into cfg (freeing what was
 * there).  Returns 0, or -1 with the reason in why.  The value itself is
 * quoted in why only for non-secret keys.
 */
static int set_scalar(struct config *cfg, const struct ckey *k, const char *s,
    char *why, size_t whylen)
{
	void *f = config_field(cfg, k);
	/* No key of the table is secret today; keep it so if one becomes so. */
	const char *sv = config_key_is_secret(k->path) ? "(value hidden)" : s;
	char r[96], tn[96];
	int64_t v;
	int rc;

	switch (k->type) {
	case CT_STRING:
		if (*s == '\0' && (k->flags & KF_EMPTY)) {
			free(*(char **)f);
			*(char **)f = NULL;  /* unset: the key's derived default */
			return 0;
		}
		if (*s == '\0') {
			snprintf(why, whylen, "must not be empty");
			return -1;
		}
		free(*(char **)f);
		if ((*(char **)f = strdup(s)) == NULL) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		return 0;
	case CT_INT:
	case CT_DURATION:
	case CT_SIZE:
		config_range_text(k, r, sizeof(r));
		if (k->type == CT_INT) {
			rc = parse_i64(s, &v);
			rc = rc == (int)strlen(s) ? 0 : rc == -2 ? -2 : -1;
		}
		else if (k->type == CT_DURATION)
			rc = parse_duration(s, &v);
		else
			rc = parse_size(s, &v);
		if (rc == -2) {
			snprintf(why, whylen, "%.64s is out of range: must be %s", sv, r);
			return -1;
		}
		if (rc < 0) {
			snprintf(why, whylen, "'%.64s' is not %s %s", sv,
			    k->type == CT_INT ? "an integer" :
			    k->type == CT_SIZE ? "a size (bytes, or a number with KiB, MiB or GiB)" :
			    "a duration (milliseconds, or a number with ms, s, m or h)", r);
			return -1;
		}
		if (v < k->lo || v > k->hi) {
			snprintf(why, whylen, "%.64s is out of range: must be %s", sv, r);
			return -1;
		}
		*(int64_t *)f = v;
		return 0;
	case CT_BOOL:
		if (parse_bool(s, (int *)f) < 0) {
			snprintf(why, whylen, "'%.64s' is not a boolean (true or false)", sv);
			return -1;
		}
		return 0;
	case CT_ENUM:
		if (parse_enum(s, k->choices, (int *)f) < 0) {
			snprintf(why, whylen, "'%.64s' is not %s", sv, config_type_name(k, tn, sizeof(tn)));
			return -1;
		}
		return 0;
	case CT_HOSTPORT: {
		struct config_hostport hp = { 0 };

		if (*s == '\0' && (k->flags & KF_EMPTY)) {
			free(((struct config_hostport *)f)->host);
			memset(f, 0, sizeof(hp));
			return 0;
		}
		if (parse_hostport(s, !!(k->flags & KF_PORT0), &hp, r, sizeof(r)) < 0) {
			snprintf(why, whylen, "'%.64s': %s", sv, r);
			return -1;
		}
		free(((struct config_hostport *)f)->host);
		*(struct config_hostport *)f = hp;
		return 0;
	}
	case CT_HOSTLIST: {
		char *list = NULL;

		if (config_parse_hostlist(s, &list, why, whylen) < 0)
			return -1;
		free(*(char **)f);
		*(char **)f = list;
		return 0;
	}
	case CT_MAP:
		snprintf(why, whylen, "expected a mapping of property names to values");
		return -1;
	case CT_PATHLIST:
		return parse_pathlist(s, f, why, whylen);
	case CT_PRINCIPALS:
	case CT_ACLS:
		snprintf(why, whylen, "expected a list");
		return -1;
	}
	return -1;
}

/* ---- object lifecycle ------------------------------------------------ */

static void map_free(struct config_map *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->names[i]);
		if (m->values[i] != NULL) {
			/* Secrets do not linger in freed heap. */
			memset(m->values[i], 0, strlen(m->values[i]));
			free(m->values[i]);
		}
	}
	free(m->names);
	free(m->values);
	memset(m, 0, sizeof(*m));
}

static int map_add(struct config_map *m, const char *name, const char *value)
{
	char **nn, **nv;

	if ((nn = realloc(m->names, (m->n + 1) * sizeof(*nn))) == NULL)
		return -1;
	m->names = nn;
	if ((nv = realloc(m->values, (m->n + 1) * sizeof(*nv))) == NULL)
		return -1;
	m->values = nv;
	m->names[m->n] = strdup(name);
	m->values[m->n] = strdup(value);
	if (m->names[m->n] == NULL || m->values[m->n] == NULL) {
		free(m->names[m->n]);
		free(m->values[m->n]);
		return -1;
	}
	m->n++;
	return 0;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void principals_free(struct config_principals *p)
{
	strv_free(p->v, p->n);
	memset(p, 0, sizeof(*p));
}

static void acl_fini(struct config_acl *a)
{
	free(a->principal);
	strv_free(a->mirrors, a->nmirrors);
	memset(a, 0, sizeof(*a));
}

static void acls_free(struct config_acls *l)
{
	for (size_t i = 0; i < l->n; i++)
		acl_fini(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Appends a copy of s to the string vector *v of *n entries. */
static int strv_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (nv == NULL)
		return -1;
	*v = nv;
	if ((nv[*n] = strdup(s)) == NULL)
		return -1;
	(*n)++;
	return 0;
}

/* Appends a deep copy of a to l. */
static int acls_add(struct config_acls *l, const struct config_acl *a)
{
	struct config_acl *nv = realloc(l->v, (l->n + 1) * sizeof(*nv)), *d;

	if (nv == NULL)
		return -1;
	l->v = nv;
	d = &nv[l->n];
	memset(d, 0, sizeof(*d));
	d->ops = a->ops;
	d->deny = a->deny;
	d->line = a->line;
	if ((d->principal = strdup(a->principal)) == NULL)
		return -1;
	for (size_t i = 0; i < a->nmirrors; i++) {
		if (strv_add(&d->mirrors, &d->nmirrors, a->mirrors[i]) < 0) {
			acl_fini(d);
			return -1;
		}
	}
	l->n++;
	return 0;
}

static void field_free(struct config *cfg, const struct ckey *k)
{
	void *f = config_field(cfg, k);

	switch (k->type) {
	case CT_STRING:
	case CT_HOSTLIST:
		free(*(char **)f);
		*(char **)f = NULL;
		break;
	case CT_HOSTPORT:
		free(((struct config_hostport *)f)->host);
		memset(f, 0, sizeof(struct config_hostport));
		break;
	case CT_MAP:
		map_free(f);
		break;
	case CT_PATHLIST:
		list_free(f);
		break;
	case CT_PRINCIPALS:
		principals_free(f);
		break;
	case CT_ACLS:
		acls_free(f);
		break;
	default:
		break;
	}
}

void config_free(struct config *cfg)
{
	if (cfg == NULL)
		return;
	for (size_t i = 0; i < NKEYS; i++)
		field_free(cfg, &config_keys[i]);
	free(cfg->path);
	free(cfg);
}

struct config *config_defaults(void)
{
	struct config *cfg = calloc(1, sizeof(*cfg));
	char why[256];

	if (cfg == NULL)
		return NULL;
	if ((cfg->path = strdup("<defaults>")) == NULL)
		goto fail;
	for (size_t i = 0; i < NKEYS; i++) {
		if (config_keys[i].def == NULL)
			continue;
		/* The table's own defaults always parse; test_config checks. */
		if (set_scalar(cfg, &config_keys[i], config_keys[i].def, why, sizeof(why)) < 0)
			goto fail;
	}
	return cfg;
fail:
	config_free(cfg);
	return NULL;
}

/* ---- the YAML walk ----------------------------------------------------- */

static int scalar_is_null(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;

	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	return n->data.scalar.length == 0 || strcmp(v, "~") == 0 ||
	    strcasecmp(v, "null") == 0;
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE: return "a scalar";
	case YAML_SEQUENCE_NODE: return "a list";
	case YAML_MAPPING_NODE: return "a mapping";
	default: return "nothing";
	}
}

/* A scalar's text, or NULL (error reported) if it holds a NUL byte. */
static const char *scalar_text(struct lctx *c, const yaml_node_t *n, const char *key)
{
	if (memchr(n->data.scalar.value, '\0', n->data.scalar.length) != NULL) {
		lerr(c, MARK(n), key, "value contains a NUL character");
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

/* "Unknown x" -> "unknown x", to read as the tail of "file:l:c: key: ". */
static char *lower_first(char *s)
{
	if (isupper((unsigned char)s[0]) && islower((unsigned char)s[1]))
		s[0] = (char)tolower((unsigned char)s[0]);
	return s;
}

static void load_map(struct lctx *c, const struct ckey *k, const yaml_node_t *v)
{
	struct config_map *m = config_field(c->cfg, k);
	char why[512], path[512];

	if (v->type == YAML_SCALAR_NODE && scalar_is_null(v))
		return;
	if (v->type != YAML_MAPPING_NODE) {
		lerr(c, MARK(v), k->path, "expected a mapping of property names to values, got %s",
		    node_kind(v));
		return;
	}
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
		const char *name, *val;
		size_t j;

		if (kn == NULL || vn == NULL)
			continue;
		if (kn->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(kn), k->path, "property names must be scalars, got %s", node_kind(kn));
			continue;
		}
		if ((name = scalar_text(c, kn, k->path)) == NULL)
			continue;
		snprintf(path, sizeof(path), "%s.%.200s", k->path, name);
		if (vn->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(vn), path, "expected a scalar value, got %s", node_kind(vn));
			continue;
		}
		if ((val = scalar_text(c, vn, path)) == NULL)
			continue;
		for (j = 0; j < m->n; j++)
			if (strcmp(m->names[j], name) == 0)
				break;
		if (j < m->n) {
			lerr(c, MARK(kn), path, "duplicate property");
			continue;
		}
		if (m->n >= MIRRORCONF_MAX_CONFIGS) {
			lerr(c, MARK(kn), path, "more than %d properties", MIRRORCONF_MAX_CONFIGS);
			return;
		}
		/* A bad name is reported at the name, a bad value at the value. */
		if (mirrorconf_check_client_prop(name, NULL, why, sizeof(why)) < 0) {
			lerr(c, MARK(kn), path, "%s", lower_first(why));
			continue;
		}
		if (mirrorconf_check_client_prop(name, val, why, sizeof(why)) < 0) {
			lerr(c, MARK(vn), path, "%s", lower_first(why));
			continue;
		}
		/* References are the operator's own: every provider, read at
		 * start-up (a missing credential stops the start then). */
		if (cfgprov_check(path, val, &(struct cfgprov_opts){
		    .allowed = CFGPROV_ALL }, 0, why, sizeof(why)) < 0) {
			lerr(c, MARK(vn), NULL, "%s", why);
			continue;
		}
		if (map_add(m, name, val) < 0)
			lerr(c, MARK(kn), path, "out of memory");
	}
}

static void load_hostlist_seq(struct lctx *c, const struct ckey *k, const yaml_node_t *v)
{
	char **f = config_field(c->cfg, k), *list = NULL, why[256];
	size_t count = 0;
	int bad = 0;

	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *n = yaml_document_get_node(c->doc, *it);
		const char *s;

		if (n == NULL)
			continue;
		if (n->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(n), k->path, "list entries must be host:port strings, got %s", node_kind(n));
			bad = 1;
			continue;
		}
		if ((s = scalar_text(c, n, k->path)) == NULL) {
			bad = 1;
			continue;
		}
		if (++count > 100) {
			lerr(c, MARK(n), k->path, "more than 100 servers");
			bad = 1;
			break;
		}
		if (hostlist_add(&list, s, why, sizeof(why)) < 0) {
			lerr(c, MARK(n), k->path, "'%.64s': %s", s, why);
			bad = 1;
		}
	}
	if (!bad && list == NULL)
		lerr(c, MARK(v), k->path, "expected at least one host:port");
	if (bad || list == NULL) {
		free(list);
		return;
	}
	free(*f);
	*f = list;
}

static void load_pathlist_seq(struct lctx *c, const struct ckey *k, const yaml_node_t *v)
{
	struct config_list l = { 0 };
	char why[300];
	int bad = 0;

	if (list_empty(&l) < 0) {
		lerr(c, MARK(v), k->path, "out of memory");
		return;
	}
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *n = yaml_document_get_node(c->doc, *it);
		const char *s;

		if (n == NULL)
			continue;
		if (n->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(n), k->path, "list entries must be paths, got %s", node_kind(n));
			bad = 1;
			continue;
		}
		if ((s = scalar_text(c, n, k->path)) == NULL) {
			bad = 1;
			continue;
		}
		if (list_add_path(&l, s, why, sizeof(why)) < 0) {
			lerr(c, MARK(n), k->path, "%s", why);
			bad = 1;
		}
	}
	if (bad) {
		list_free(&l);
		return;
	}
	list_free(config_field(c->cfg, k));
	*(struct config_list *)config_field(c->cfg, k) = l;
}

/* ---- authorization: lists of principals and of rules ------------------ */

/* A scalar counts as a list of one, so "mirrors: prod-*" works too. */
static size_t list_len(const yaml_node_t *v)
{
	if (v->type == YAML_SEQUENCE_NODE)
		return (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	return 1;
}

static yaml_node_t *list_at(struct lctx *c, const yaml_node_t *v, size_t i)
{
	if (v->type == YAML_SEQUENCE_NODE)
		return yaml_document_get_node(c->doc, v->data.sequence.items.start[i]);
	return (yaml_node_t *)(uintptr_t)v;
}

/* The text of list item n, or NULL (reported) if it is not a plain value. */
static const char *list_text(struct lctx *c, const yaml_node_t *n,
    const char *path, const char *what)
{
	if (n->type != YAML_SCALAR_NODE) {
		lerr(c, MARK(n), path, "list entries must be %s, got %s", what, node_kind(n));
		return NULL;
	}
	if (scalar_is_null(n)) {
		lerr(c, MARK(n), path, "empty list entry; expected %s", what);
		return NULL;
	}
	return scalar_text(c, n, path);
}

static void load_principals(struct lctx *c, const struct ckey *k, const yaml_node_t *v)
{
	struct config_principals *pl = config_field(c->cfg, k);
	char why[256];

	if (v->type == YAML_SCALAR_NODE && scalar_is_null(v))
		return;
	if (v->type == YAML_MAPPING_NODE) {
		lerr(c, MARK(v), k->path, "expected a list of principals (User:name), got a mapping");
		return;
	}
	for (size_t i = 0; i < list_len(v); i++) {
		const yaml_node_t *n = list_at(c, v, i);
		const char *s;
		size_t j;

		if (n == NULL || (s = list_text(c, n, k->path, "principals (User:name)")) == NULL)
			continue;
		if (pl->n >= AUTHZ_MAX_SUPER_USERS) {
			lerr(c, MARK(n), k->path, "more than %d principals", AUTHZ_MAX_SUPER_USERS);
			return;
		}
		if (authz_check_principal(s, 0, why, sizeof(why)) < 0) {
			lerr(c, MARK(n), k->path, "%s", why);
			continue;
		}
		for (j = 0; j < pl->n; j++)
			if (strcmp(pl->v[j], s) == 0)
				break;
		if (j < pl->n) {
			lerr(c, MARK(n), k->path, "duplicate principal %.64s", s);
			continue;
		}
		if (strv_add(&pl->v, &pl->n, s) < 0)
			lerr(c, MARK(n), k->path, "out of memory");
	}
}

static const char *const acl_fields[] = { "principal", "operations", "mirrors", "permission" };

/* One rule; 0 with *a filled (the caller frees it either way) or -1. */
static int load_acl(struct lctx *c, const char *rpath, const yaml_node_t *v,
    struct config_acl *a)
{
	int seen[ARRAY_SIZE(acl_fields)] = { 0 }, bad = 0;
	char path[320], why[256];

	a->line = (int)v->start_mark.line + 1;
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
		const char *name, *s;
		size_t f;

		if (kn == NULL || vn == NULL)
			continue;
		if (kn->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(kn), rpath, "keys must be scalars, got %s", node_kind(kn));
			bad = 1;
			continue;
		}
		if ((name = scalar_text(c, kn, rpath)) == NULL) {
			bad = 1;
			continue;
		}
		snprintf(path, sizeof(path), "%s.%.64s", rpath, name);
		for (f = 0; f < ARRAY_SIZE(acl_fields); f++)
			if (strcmp(name, acl_fields[f]) == 0)
				break;
		if (f == ARRAY_SIZE(acl_fields)) {
			const char *best = NULL;
			size_t bestd = 3;

			for (size_t j = 0; j < ARRAY_SIZE(acl_fields); j++) {
				size_t d = config_edit_distance(name, acl_fields[j]);

				if (d < bestd) {
					bestd = d;
					best = acl_fields[j];
				}
			}
			if (best != NULL)
				lerr(c, MARK(kn), path, "unknown rule key; did you mean %s?", best);
			else
				lerr(c, MARK(kn), path, "unknown rule key; a rule has principal, operations, mirrors and permission");
			bad = 1;
			continue;
		}
		if (seen[f] != 0) {
			lerr(c, MARK(kn), path, "duplicate key (first set at line %d)", seen[f]);
			bad = 1;
			continue;
		}
		seen[f] = (int)kn->start_mark.line + 1;
		if (f == 0 || f == 3) {         /* principal, permission: one value */
			if (vn->type != YAML_SCALAR_NODE || scalar_is_null(vn)) {
				lerr(c, MARK(vn), path, "expected %s, got %s",
				    f == 0 ? "a principal (User:name or User:*)" : "allow or deny",
				    vn->type == YAML_SCALAR_NODE ? "nothing" : node_kind(vn));
				bad = 1;
				continue;
			}
			if ((s = scalar_text(c, vn, path)) == NULL) {
				bad = 1;
				continue;
			}
			if (f == 0 && authz_check_principal(s, 1, why, sizeof(why)) < 0) {
				lerr(c, MARK(vn), path, "%s", why);
				bad = 1;
			} else if (f == 0 && (a->principal = strdup(s)) == NULL) {
				lerr(c, MARK(vn), path, "out of memory");
				bad = 1;
			} else if (f == 3 && strcasecmp(s, "allow") != 0 && strcasecmp(s, "deny") != 0) {
				lerr(c, MARK(vn), path, "'%.64s' is not allow or deny", s);
				bad = 1;
			} else if (f == 3) {
				a->deny = strcasecmp(s, "deny") == 0;
			}
			continue;
		}
		/* operations, mirrors: a list, or one value. */
		if (vn->type == YAML_MAPPING_NODE ||
		    (vn->type == YAML_SCALAR_NODE && scalar_is_null(vn)) || list_len(vn) == 0) {
			lerr(c, MARK(vn), path, "expected a list of %s, got %s",
			    f == 1 ? "describe, alter, describe_configs, alter_configs or all" : "mirror names, prefixes ending in * or *",
			    vn->type == YAML_MAPPING_NODE ? "a mapping" :
			    vn->type == YAML_SEQUENCE_NODE ? "an empty list" : "nothing");
			bad = 1;
			continue;
		}
		if (f == 2 && list_len(vn) > AUTHZ_MAX_PATTERNS) {
			lerr(c, MARK(vn), path, "more than %d mirror patterns", AUTHZ_MAX_PATTERNS);
			bad = 1;
			continue;
		}
		for (size_t i = 0; i < list_len(vn); i++) {
			const yaml_node_t *n = list_at(c, vn, i);
			unsigned m;

			if (n == NULL || (s = list_text(c, n, path, f == 1 ?
			    "operations (describe, alter, describe_configs, alter_configs or all)" : "mirror patterns")) == NULL) {
				bad = 1;
				continue;
			}
			if (f == 1 && authz_parse_op(s, &m) < 0) {
				lerr(c, MARK(n), path, "'%.64s' is not an operation: expected describe, alter, describe_configs, alter_configs or all", s);
				bad = 1;
			} else if (f == 1) {
				a->ops |= m;
			} else if (authz_check_pattern(s, why, sizeof(why)) < 0) {
				lerr(c, MARK(n), path, "%s", why);
				bad = 1;
			} else if (strv_add(&a->mirrors, &a->nmirrors, s) < 0) {
				lerr(c, MARK(n), path, "out of memory");
				bad = 1;
			}
		}
	}
	for (size_t f = 0; f < ARRAY_SIZE(acl_fields); f++) {
		if (seen[f] == 0) {
			lerr(c, MARK(v), rpath, "the rule has no %s%s", acl_fields[f],
			    f == 3 ? " (allow or deny)" : "");
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

static void load_acls(struct lctx *c, const struct ckey *k, const yaml_node_t *v)
{
	struct config_acls *l = config_field(c->cfg, k);
	char rpath[96];

	if (v->type == YAML_SCALAR_NODE && scalar_is_null(v))
		return;
	if (v->type != YAML_SEQUENCE_NODE) {
		lerr(c, MARK(v), k->path, "expected a list of rules (mappings with principal, "
		    "operations, mirrors and permission), got %s", node_kind(v));
		return;
	}
	if (list_len(v) > AUTHZ_MAX_RULES) {
		lerr(c, MARK(v), k->path, "more than %d rules", AUTHZ_MAX_RULES);
		return;
	}
	for (size_t i = 0; i < list_len(v); i++) {
		const yaml_node_t *n = list_at(c, v, i);
		struct config_acl a;

		if (n == NULL)
			continue;
		snprintf(rpath, sizeof(rpath), "%s[%zu]", k->path, i);
		if (n->type != YAML_MAPPING_NODE) {
			lerr(c, MARK(n), rpath, "expected a rule (a mapping with principal, "
			    "operations, mirrors and permission), got %s", node_kind(n));
			continue;
		}
		memset(&a, 0, sizeof(a));
		if (load_acl(c, rpath, n, &a) == 0 && acls_add(l, &a) < 0)
			lerr(c, MARK(n), rpath, "out of memory");
		acl_fini(&a);
	}
}

static void load_key(struct lctx *c, const struct ckey *k, const yaml_node_t *kn,
    const yaml_node_t *v)
{
	size_t idx = (size_t)(k - config_keys);
	char why[512];
	const char *s;

	if (c->seen_line[idx] != 0) {
		lerr(c, MARK(kn), k->path, "duplicate key (first set at line %d)", c->seen_line[idx]);
		return;
	}
	c->seen_line[idx] = (int)kn->start_mark.line + 1;
	c->seen_col[idx] = (int)kn->start_mark.column + 1;
	if (k->type == CT_MAP) {
		load_map(c, k, v);
		return;
	}
	if (k->type == CT_PRINCIPALS) {
		load_principals(c, k, v);
		return;
	}
	if (k->type == CT_ACLS) {
		load_acls(c, k, v);
		return;
	}
	if (k->type == CT_HOSTLIST && v->type == YAML_SEQUENCE_NODE) {
		load_hostlist_seq(c, k, v);
		return;
	}
	if (k->type == CT_PATHLIST && v->type == YAML_SEQUENCE_NODE) {
		load_pathlist_seq(c, k, v);
		return;
	}
	if (v->type != YAML_SCALAR_NODE) {
		char tn[96];

		lerr(c, MARK(v), k->path, "expected %s, got %s", config_type_name(k, tn, sizeof(tn)), node_kind(v));
		return;
	}
	if (scalar_is_null(v)) {
		if (k->flags & KF_REQUIRED)
			lerr(c, MARK(v), k->path, "required key has no value");
		else if (k->flags & KF_EMPTY)
			set_scalar(c->cfg, k, "", why, sizeof(why));
		/* Otherwise the default stays. */
		return;
	}
	if ((s = scalar_text(c, v, k->path)) == NULL)
		return;
	if (set_scalar(c->cfg, k, s, why, sizeof(why)) < 0)
		lerr(c, MARK(v), k->path, "%s", why);
}

static void walk(struct lctx *c, const yaml_node_t *map, const char *prefix)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
		const struct ckey *k;
		const char *name, *sug;
		char path[256], sec[64];

		if (kn == NULL || vn == NULL)
			continue;
		if (kn->type != YAML_SCALAR_NODE) {
			lerr(c, MARK(kn), prefix, "keys must be scalars, got %s", node_kind(kn));
			continue;
		}
		if ((name = scalar_text(c, kn, prefix)) == NULL)
			continue;
		if (strlen(name) + (prefix ? strlen(prefix) + 1 : 0) >= sizeof(path)) {
			lerr(c, MARK(kn), NULL, "unknown key '%.64s...' (too long)", name);
			continue;
		}
		snprintf(path, sizeof(path), "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name);
		if ((k = config_key_find(path)) != NULL) {
			load_key(c, k, kn, vn);
			continue;
		}
		if (is_section(path)) {
			size_t j;

			for (j = 0; j < c->nsecs; j++)
				if (strcmp(c->secs[j].path, path) == 0)
					break;
			if (j < c->nsecs) {
				lerr(c, MARK(kn), path, "duplicate section (first at line %d)",
				    c->secs[j].line);
				continue;
			}
			if (c->nsecs < ARRAY_SIZE(c->secs) && strlen(path) < sizeof(c->secs[0].path)) {
				memcpy(c->secs[c->nsecs].path, path, strlen(path) + 1);
				c->secs[c->nsecs].line = (int)kn->start_mark.line + 1;
				c->secs[c->nsecs].col = (int)kn->start_mark.column + 1;
				c->nsecs++;
			}
			if (vn->type == YAML_MAPPING_NODE)
				walk(c, vn, path);
			else if (!(vn->type == YAML_SCALAR_NODE && scalar_is_null(vn)))
				lerr(c, MARK(vn), path, "expected a mapping of %s.* keys, got %s",
				    path, node_kind(vn));
			continue;
		}
		if (c->nerr >= CONFIG_MAX_ERRORS) {
			/* Past the cap only the count matters: skip the suggestions. */
			lerr(c, MARK(kn), path, "unknown key");
			continue;
		}
		if ((sug = suggest(path)) != NULL)
			lerr(c, MARK(kn), path, "unknown key; did you mean %s?", sug);
		else if (prefix == NULL && suggest_section(path, sec, sizeof(sec)))
			lerr(c, MARK(kn), path, "unknown section; did you mean %s?", sec);
		else
			lerr(c, MARK(kn), path, "unknown key");
	}
}

/* Checks that involve more than one key; pos points at the key to blame. */
/* Where key path was set (0, 0 when it was not). */
static void seen_at(struct lctx *c, const char *path, int *line, int *col)
{
	size_t i = (size_t)(config_key_find(path) - config_keys);

	*line = c->seen_line[i];
	*col = c->seen_col[i];
}

/* server.security_protocol against the server.ssl.* and server.sasl.* keys. */
static void check_security(struct lctx *c)
{
	static const char *const ssl_keys[] = {
		"server.ssl.certificate_location", "server.ssl.key_location",
		"server.ssl.key_password", "server.ssl.ca_location",
	};
	struct config *cfg = c->cfg;
	int proto = cfg->server_security_protocol, line, col;
	bool tls = proto == CONFIG_SEC_SSL || proto == CONFIG_SEC_SASL_SSL;
	bool sasl = proto == CONFIG_SEC_SASL_PLAINTEXT || proto == CONFIG_SEC_SASL_SSL;
	const char *pname = config_security_protocol_name(proto);

	seen_at(c, "server.security_protocol", &line, &col);
	if (tls && (cfg->server_ssl_certificate_location == NULL ||
	    cfg->server_ssl_key_location == NULL))
		lerr(c, line, col, "server.security_protocol",
		    "%s needs server.ssl.certificate_location and "
		    "server.ssl.key_location (PEM files)", pname);
	if (sasl && cfg->server_sasl_credentials_file == NULL)
		lerr(c, line, col, "server.security_protocol",
		    "%s needs server.sasl.credentials_file (create it with "
		    "mirrord --add-user)", pname);
	if (!tls) {
		for (size_t j = 0; j < ARRAY_SIZE(ssl_keys); j++) {
			const struct ckey *k = config_key_find(ssl_keys[j]);

			if (*(char **)config_field(cfg, k) == NULL)
				continue;
			seen_at(c, k->path, &line, &col);
			lerr(c, line, col, k->path, "is set but "
			    "server.security_protocol is %s: use SSL or SASL_SSL",
			    pname);
		}
		if (cfg->server_ssl_client_auth != CONFIG_CLIENT_AUTH_NONE) {
			seen_at(c, "server.ssl.client_auth", &line, &col);
			lerr(c, line, col, "server.ssl.client_auth", "is not none "
			    "but server.security_protocol is %s: use SSL or "
			    "SASL_SSL", pname);
		}
	} else {
		if (cfg->server_ssl_client_auth != CONFIG_CLIENT_AUTH_NONE &&
		    cfg->server_ssl_ca_location == NULL) {
			seen_at(c, "server.ssl.client_auth", &line, &col);
			lerr(c, line, col, "server.ssl.client_auth", "client "
			    "certificates need server.ssl.ca_location (the CAs "
			    "that sign them)");
		}
		if (cfg->server_ssl_key_password != NULL &&
		    cfg->server_ssl_key_location == NULL) {
			seen_at(c, "server.ssl.key_password", &line, &col);
			lerr(c, line, col, "server.ssl.key_password", "is set "
			    "without server.ssl.key_location");
		}
	}
	if (!sasl && cfg->server_sasl_credentials_file != NULL) {
		seen_at(c, "server.sasl.credentials_file", &line, &col);
		lerr(c, line, col, "server.sasl.credentials_file", "is set but "
		    "server.security_protocol is %s: use SASL_PLAINTEXT or "
		    "SASL_SSL", pname);
	}
	if (cfg->server_sasl_enabled_mechanisms != NULL) {
		char why[256];

		if (config_sasl_mechanisms(cfg->server_sasl_enabled_mechanisms,
		    NULL, why, sizeof(why)) < 0) {
			seen_at(c, "server.sasl.enabled_mechanisms", &line, &col);
			lerr(c, line, col, "server.sasl.enabled_mechanisms", "%s",
			    why);
		}
	}
}

const char *config_security_protocol_name(int proto)
{
	static const char *const names[] = { "PLAINTEXT", "SSL",
		"SASL_PLAINTEXT", "SASL_SSL" };

	return proto >= 0 && proto < (int)ARRAY_SIZE(names) ? names[proto] : "?";
}

int config_sasl_mechanisms(const char *list, int *enabled, char *why,
    size_t whylen)
{
	static const char *const names[] = { "PLAIN", "SCRAM-SHA-256",
		"SCRAM-SHA-512" };
	const char *p = list;
	int n = 0;

	if (enabled != NULL)
		for (size_t j = 0; j < ARRAY_SIZE(names); j++)
			enabled[j] = 0;
	while (*p != '\0') {
		size_t len = strcspn(p, ","), j;
		const char *s = p;

		while (len > 0 && *s == ' ') {
			s++;
			len--;
		}
		while (len > 0 && s[len - 1] == ' ')
			len--;
		for (j = 0; j < ARRAY_SIZE(names); j++)
			if (strlen(names[j]) == len && strncmp(names[j], s, len) == 0)
				break;
		if (j == ARRAY_SIZE(names)) {
			snprintf(why, whylen, "unknown mechanism '%.*s' (PLAIN, "
			    "SCRAM-SHA-256 and SCRAM-SHA-512 are supported)",
			    (int)MIN(len, 64), s);
			return -1;
		}
		if (enabled != NULL)
			enabled[j] = 1;
		n++;
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	if (n == 0) {
		snprintf(why, whylen, "names no mechanism");
		return -1;
	}
	return n;
}

static void check_combination(struct lctx *c)
{
	struct config *cfg = c->cfg;
	const struct ckey *k;
	size_t i;

	k = config_key_find("pipeline.max_inflight_bytes_per_partition");
	i = (size_t)(k - config_keys);
	if (cfg->pipeline_max_inflight_bytes_per_partition > cfg->pipeline_max_inflight_bytes_total)
		lerr(c, c->seen_line[i], c->seen_col[i], k->path,
		    "%" PRId64 " is larger than pipeline.max_inflight_bytes_total (%" PRId64 ")",
		    cfg->pipeline_max_inflight_bytes_per_partition,
		    cfg->pipeline_max_inflight_bytes_total);

	check_security(c);

	k = config_key_find("cluster.enabled");
	i = (size_t)(k - config_keys);
	if (cfg->cluster_enabled && cfg->storage_backend != CONFIG_STORAGE_KAFKA)
		lerr(c, c->seen_line[i], c->seen_col[i], k->path,
		    "true requires storage.backend kafka (the instances share "
		    "the metadata log in a topic of the destination cluster), "
		    "but storage.backend is file");
	k = config_key_find("cluster.heartbeat_interval_ms");
	i = (size_t)(k - config_keys);
	if (cfg->cluster_heartbeat_interval_ms >= cfg->cluster_session_timeout_ms)
		lerr(c, c->seen_line[i], c->seen_col[i], k->path,
		    "%" PRId64 " is not below cluster.session_timeout_ms (%" PRId64 ")",
		    cfg->cluster_heartbeat_interval_ms,
		    cfg->cluster_session_timeout_ms);

	k = config_key_find("metrics.listen");
	i = (size_t)(k - config_keys);
	if (cfg->metrics_listen.host != NULL && cfg->server_listen.host != NULL &&
	    cfg->metrics_listen.port != 0 &&
	    cfg->metrics_listen.port == cfg->server_listen.port)
		lerr(c, c->seen_line[i], c->seen_col[i], k->path,
		    "uses port %u, the same as server.listen", cfg->metrics_listen.port);
}

/* server.advertised defaults to the listen address (host name if wildcard). */
static int derive_advertised(struct config *cfg)
{
	struct config_hostport *a = &cfg->server_advertised;
	const struct config_hostport *l = &cfg->server_listen;
	char host[256];

	if (a->host != NULL)
		return 0;
	if (strcmp(l->host, "0.0.0.0") == 0 || strcmp(l->host, "::") == 0) {
		if (gethostname(host, sizeof(host)) < 0 || host[0] == '\0')
			snprintf(host, sizeof(host), "localhost");
		host[sizeof(host) - 1] = '\0';
	} else {
		snprintf(host, sizeof(host), "%s", l->host);
	}
	if ((a->host = strdup(host)) == NULL)
		return -1;
	a->port = l->port;
	return 0;
}

/*
 * libyaml's loader slows down badly on deeply nested input, and no valid
 * file nests deeper than section/key/list: a first pass over the events
 * refuses deep nesting before anything is built.  Syntax errors are left to
 * the loader, which reports them with their position.
 */
#define CONFIG_MAX_DEPTH 16

static int depth_ok(struct lctx *c, const char *text, size_t len)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int depth = 0, ok = 1;

	if (!yaml_parser_initialize(&parser))
		return 1; /* the loader will fail the same way and say so */
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (yaml_parser_parse(&parser, &ev)) {
		yaml_event_type_t t = ev.type;

		if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
			if (++depth > CONFIG_MAX_DEPTH) {
				lerr(c, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
				    NULL, "nested deeper than %d levels", CONFIG_MAX_DEPTH);
				ok = 0;
			}
		} else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
			depth--;
		}
		yaml_event_delete(&ev);
		if (!ok || t == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&parser);
	return ok;
}

int config_load_string(const char *name, const char *text, size_t len,
    struct config **out, struct config_errors *errs)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	struct lctx c;
	yaml_node_t *root;
	int rc = -1, have_doc = 0;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	c.name = name;
	c.errs = errs;
	c.doc = &doc;
	if ((c.cfg = config_defaults()) == NULL) {
		lerr(&c, 0, 0, NULL, "out of memory");
		return -1;
	}
	free(c.cfg->path);
	if ((c.cfg->path = strdup(name)) == NULL) {
		lerr(&c, 0, 0, NULL, "out of memory");
		goto out;
	}
	if (!depth_ok(&c, text, len))
		goto out;
	if (!yaml_parser_initialize(&parser)) {
		lerr(&c, 0, 0, NULL, "out of memory");
		goto out;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		lerr(&c, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1,
		    NULL, "YAML syntax error: %s%s%s", parser.problem ? parser.problem : "unknown",
		    parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		goto out;
	}
	have_doc = 1;
	root = yaml_document_get_root_node(&doc);
	if (root != NULL) {
		yaml_document_t extra;

		/* A second document would be silently ignored: refuse it. */
		if (yaml_parser_load(&parser, &extra)) {
			yaml_node_t *r2 = yaml_document_get_root_node(&extra);

			if (r2 != NULL)
				lerr(&c, MARK(r2), NULL, "more than one YAML document; only one is allowed");
			yaml_document_delete(&extra);
		}
	}
	yaml_parser_delete(&parser);
	if (root != NULL && root->type == YAML_MAPPING_NODE)
		walk(&c, root, NULL);
	else if (root != NULL && !(root->type == YAML_SCALAR_NODE && scalar_is_null(root)))
		lerr(&c, MARK(root), NULL, "the top level must be a mapping of sections (server:, storage:, ...), got %s",
		    node_kind(root));

	for (size_t i = 0; i < NKEYS; i++) {
		size_t j, sl = config_section_len(config_keys[i].path);

		if (!(config_keys[i].flags & KF_REQUIRED) || c.seen_line[i] != 0)
			continue;
		/* Point at the key's section when the file has one. */
		for (j = 0; j < c.nsecs; j++)
			if (strlen(c.secs[j].path) == sl &&
			    strncmp(c.secs[j].path, config_keys[i].path, sl) == 0)
				break;
		if (j < c.nsecs)
			lerr(&c, c.secs[j].line, c.secs[j].col, config_keys[i].path,
			    "required key is missing");
		else
			lerr(&c, 0, 0, config_keys[i].path, "required key is missing");
	}
	if (c.nerr == 0)
		check_combination(&c);
	if (c.nerr == 0 && derive_advertised(c.cfg) < 0)
		lerr(&c, 0, 0, NULL, "out of memory");
	if (c.nerr == 0) {
		*out = c.cfg;
		c.cfg = NULL;
		rc = 0;
	}
out:
	if (have_doc)
		yaml_document_delete(&doc);
	config_free(c.cfg);
	return rc;
}

int config_load(const char *path, struct config **out, struct config_errors *errs)
{
	struct lctx c;
	struct stat st;
	char *buf = NULL;
	size_t n;
	FILE *f;
	int rc = -1;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	c.name = path;
	c.errs = errs;
	if ((f = fopen(path, "rb")) == NULL) {
		lerr(&c, 0, 0, NULL, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		lerr(&c, 0, 0, NULL, "not a regular file");
		goto out;
	}
	if (st.st_size > CONFIG_MAX_FILE_BYTES) {
		lerr(&c, 0, 0, NULL, "larger than %d bytes", CONFIG_MAX_FILE_BYTES);
		goto out;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		lerr(&c, 0, 0, NULL, "out of memory");
		goto out;
	}
	n = fread(buf, 1, (size_t)st.st_size + 1, f);
	if (ferror(f)) {
		lerr(&c, 0, 0, NULL, "read error: %s", strerror(errno));
		goto out;
	}
	if (n > (size_t)st.st_size) {
		lerr(&c, 0, 0, NULL, "file changed while being read");
		goto out;
	}
	rc = config_load_string(path, buf, n, out, errs);
out:
	free(buf);
	fclose(f);
	return rc;
}

/* ---- comparison, reload ---------------------------------------------- */

static int str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* 1 if two string vectors hold the same strings in the same order. */
static int strv_eq(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (!str_eq(a[i], b[i]))
			return 0;
	return 1;
}

static int field_eq(const struct config *a, const struct config *b, const struct ckey *k)
{
	const void *fa = config_field(a, k), *fb = config_field(b, k);

	switch (k->type) {
	case CT_STRING:
	case CT_HOSTLIST:
		return str_eq(*(char *const *)fa, *(char *const *)fb);
	case CT_INT:
	case CT_DURATION:
	case CT_SIZE:
		return *(const int64_t *)fa == *(const int64_t *)fb;
	case CT_BOOL:
	case CT_ENUM:
		return *(const int *)fa == *(const int *)fb;
	case CT_HOSTPORT: {
		const struct config_hostport *ha = fa, *hb = fb;

		return str_eq(ha->host, hb->host) && ha->port == hb->port;
	}
	case CT_MAP: {
		const struct config_map *ma = fa, *mb = fb;

		if (ma->n != mb->n)
			return 0;
		for (size_t i = 0; i < ma->n; i++)
			if (!str_eq(ma->names[i], mb->names[i]) || !str_eq(ma->values[i], mb->values[i]))
				return 0;
		return 1;
	}
	case CT_PATHLIST: {
		const struct config_list *la = fa, *lb = fb;

		return strv_eq(la->v, la->n, lb->v, lb->n);
	}
	case CT_PRINCIPALS: {
		const struct config_principals *pa = fa, *pb = fb;

		return strv_eq(pa->v, pa->n, pb->v, pb->n);
	}
	case CT_ACLS: {
		const struct config_acls *la = fa, *lb = fb;

		if (la->n != lb->n)
			return 0;
		for (size_t i = 0; i < la->n; i++) {
			const struct config_acl *x = &la->v[i], *y = &lb->v[i];

			if (!str_eq(x->principal, y->principal) || x->ops != y->ops ||
			    x->deny != y->deny || x->nmirrors != y->nmirrors)
				return 0;
			for (size_t j = 0; j < x->nmirrors; j++)
				if (!str_eq(x->mirrors[j], y->mirrors[j]))
					return 0;
		}
		return 1;
	}
	}
	return 0;
}

size_t config_reload_diff(const struct config *old, const struct config *nw,
    const char **out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < NKEYS; i++) {
		if ((config_keys[i].flags & KF_RELOAD) || field_eq(old, nw, &config_keys[i]))
			continue;
		if (n < cap)
			out[n] = config_keys[i].path;
		n++;
	}
	return n;
}

static int field_copy(struct config *dst, const struct config *src, const struct ckey *k)
{
	void *fd = config_field(dst, k);
	const void *fs = config_field(src, k);

	field_free(dst, k);
	switch (k->type) {
	case CT_STRING:
	case CT_HOSTLIST:
		if (*(char *const *)fs != NULL &&
		    (*(char **)fd = strdup(*(char *const *)fs)) == NULL)
			return -1;
		return 0;
	case CT_INT:
	case CT_DURATION:
	case CT_SIZE:
		*(int64_t *)fd = *(const int64_t *)fs;
		return 0;
	case CT_BOOL:
	case CT_ENUM:
		*(int *)fd = *(const int *)fs;
		return 0;
	case CT_HOSTPORT: {
		const struct config_hostport *hs = fs;
		struct config_hostport *hd = fd;

		hd->port = hs->port;
		if (hs->host != NULL && (hd->host = strdup(hs->host)) == NULL)
			return -1;
		return 0;
	}
	case CT_MAP: {
		const struct config_map *ms = fs;

		for (size_t i = 0; i < ms->n; i++)
			if (map_add(fd, ms->names[i], ms->values[i]) < 0)
				return -1;
		return 0;
	}
	case CT_PATHLIST: {
		const struct config_list *ls = fs;
		char why[64];

		if (list_empty(fd) < 0)
			return -1;
		for (size_t i = 0; i < ls->n; i++)
			if (list_add_path(fd, ls->v[i], why, sizeof(why)) < 0)
				return -1;
		return 0;
	}
	case CT_PRINCIPALS: {
		const struct config_principals *ps = fs;
		struct config_principals *pd = fd;

		for (size_t i = 0; i < ps->n; i++)
			if (strv_add(&pd->v, &pd->n, ps->v[i]) < 0)
				return -1;
		return 0;
	}
	case CT_ACLS: {
		const struct config_acls *ls = fs;

		for (size_t i = 0; i < ls->n; i++)
			if (acls_add(fd, &ls->v[i]) < 0)
				return -1;
		return 0;
	}
	}
	return -1;
}

int config_reload_keep(struct config *nw, const struct config *old)
{
	for (size_t i = 0; i < NKEYS; i++) {
		if ((config_keys[i].flags & KF_RELOAD) || field_eq(old, nw, &config_keys[i]))
			continue;
		if (field_copy(nw, old, &config_keys[i]) < 0)
			return -1;
	}
	return 0;
}
