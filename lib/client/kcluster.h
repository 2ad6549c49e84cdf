/*
 * kcluster.h: a Kafka cluster seen through its bootstrap servers, on a
 * libevent loop.
 *
 * A kcluster keeps the cluster's metadata (cluster id, controller, brokers,
 * topics with their partitions, leaders and leader epochs) fresh with
 * Metadata requests, and one kconn per broker, opened on first use and
 * reopened after a loss with exponential backoff and jitter.
 *
 * It never creates a topic: every Metadata request asks for all topics (v0
 * with an empty list, v1+ with a null list, and AllowAutoTopicCreation=false
 * from v4), because brokers that auto-create (and the librdkafka mock, which
 * always does) create topics a request names.
 *
 * Ownership: the kcluster owns its connections and its metadata copy.
 * Strings and arrays handed to callbacks are valid only during the call;
 * the query functions return pointers valid until the next refresh
 * completes.  Any callback may call kcluster_free(): the memory is released
 * from a deferred event.
 */
#ifndef MIRRORD_KCLUSTER_H
#define MIRRORD_KCLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"
#include "kconn.h"

struct event_base;
struct evdns_base;
struct kcluster;

struct kcluster_config {
	char *name;                   /* "source", for messages and logs */
	char *bootstrap;              /* bootstrap.servers: "h:p,h:p" */
	int metadata_refresh_ms;      /* topic.metadata.refresh.interval.ms; 0: only on demand */
	int metadata_timeout_ms;      /* mirrord.metadata.timeout.ms: one refresh, all attempts */
	int reconnect_backoff_ms;     /* reconnect.backoff.ms */
	int reconnect_backoff_max_ms; /* reconnect.backoff.max.ms */
	int refresh_gap_ms;           /* least time between two wanted refreshes
	                               * (kcluster_want_refresh) */
	/* Metadata (and kcluster_control_conn()) on a connection of its own
	 * to a bootstrap server, kept open, so they never queue behind the
	 * data requests of the broker connections (a Fetch held for its
	 * max wait, a Produce waiting for acks).  0: any ready connection,
	 * idle bootstrap connections closed once the brokers are known. */
	int control_conn;
	struct kconn_config conn;     /* connection and security properties */
};

void kcluster_config_init(struct kcluster_config *cfg, const char *name);
void kcluster_config_fini(struct kcluster_config *cfg);
/* Sets a property by its librdkafka name (cluster ones here, connection
 * ones through kconn_config_set).  0 set, 1 not ours, -1 bad value. */
int kcluster_config_set(struct kcluster_config *cfg, const char *prop,
    const char *value, char *err, size_t errlen);
/* Checks the bootstrap list and prepares the connection config (TLS). */
int kcluster_config_prepare(struct kcluster_config *cfg, char *err,
    size_t errlen);

/*
 * Creates the cluster object; connects nothing until the first refresh or
 * broker lookup.  cfg must outlive the kcluster.  dns resolves host names
 * without blocking (may be NULL if every address is numeric).
 */
struct kcluster *kcluster_new(struct event_base *base, struct evdns_base *dns,
    const struct kcluster_config *cfg, char *err, size_t errlen);
/* Closes every connection; pending refresh callbacks get KCONN_E_CLOSED. */
void kcluster_free(struct kcluster *cl);

/* err is a KCONN_E_* code; errstr names the cluster, the broker and the
 * cause ("source cluster 127.0.0.1:1234: connection refused"). */
typedef void (*kcluster_cb)(struct kcluster *cl, int err, const char *errstr,
    void *arg);

/*
 * Refreshes the metadata now (joining a refresh already running).  cb (may
 * be NULL) is called exactly once, never from inside this call.  A refresh
 * tries a broker with a ready connection first, then the known brokers and
 * bootstrap servers in turn (skipping those in reconnect backoff), until one
 * answers or metadata_timeout_ms passes.
 */
void kcluster_refresh(struct kcluster *cl, kcluster_cb cb, void *arg);

struct kcluster_topic_info {
	const char *name;
	int32_t partitions;
	int internal;   /* IsInternal (v1+); by name for v0 */
	int16_t error;  /* topic-level error code of the metadata */
};

typedef void (*kcluster_topics_cb)(struct kcluster *cl, int err,
    const char *errstr, const struct kcluster_topic_info *topics, size_t n,
    void *arg);

/* Refreshes, then lists every topic (sorted by name) with its partition
 * count.  Never creates a topic.  cb is called exactly once, later. */
void kcluster_list_topics(struct kcluster *cl, kcluster_topics_cb cb,
    void *arg);

/*
 * Asks for a refresh soon, coalesced: at once, unless one ended less than
 * refresh_gap_ms ago (then when that gap is over).  Asked while a refresh
 * runs, another follows it (the running one's answer may predate the
 * reason).  A refresh it started that fails is asked again the same way.
 * Cheap enough for every leader error and cache miss.
 */
void kcluster_want_refresh(struct kcluster *cl);

/* ---- queries on the last metadata (no I/O) ---- */

int kcluster_has_metadata(const struct kcluster *cl);
/* The cluster id (Metadata v2+), or NULL. */
const char *kcluster_cluster_id(const struct kcluster *cl);
int32_t kcluster_controller_id(const struct kcluster *cl);
/* Metadata version of the last refresh, -1 before the first. */
int kcluster_metadata_version(const struct kcluster *cl);
/* Milliseconds since the last successful refresh, -1 before the first. */
int64_t kcluster_metadata_age_ms(const struct kcluster *cl);
const char *kcluster_name(const struct kcluster *cl);

/* Partition count of topic, or -1 if the last metadata does not know it. */
int32_t kcluster_topic_partitions(const struct kcluster *cl, const char *topic);

#define KCLUSTER_NO_LEADER (-1)    /* known partition, no leader now */
#define KCLUSTER_UNKNOWN (-2)      /* unknown topic or partition */
/* The leader's node id, or KCLUSTER_NO_LEADER / KCLUSTER_UNKNOWN.  When
 * leader_epoch is not NULL it gets the epoch (-1 before Metadata v7). */
int32_t kcluster_leader(const struct kcluster *cl, const char *topic,
    int32_t partition, int32_t *leader_epoch);

/* One topic of the last metadata.  leader and leader_epoch are indexed by
 * partition (npart entries, NULL when 0): KCLUSTER_NO_LEADER when the
 * partition has none; a partition with an error code in the metadata has
 * none and epoch -1 (a leader id it names is not usable there:
 * LISTENER_NOT_FOUND).  The epoch is -1 before Metadata v7.  Valid until
 * the next refresh completes. */
struct kcluster_topic {
	const char *name;
	int16_t error;         /* topic-level error code */
	int internal;
	int32_t npart;
	const int32_t *leader;
	const int32_t *leader_epoch;
	struct kuuid id;       /* all zero before Metadata v10 */
};

/* The topic, or NULL: O(log topics). */
const struct kcluster_topic *kcluster_topic(const struct kcluster *cl,
    const char *topic);
/* Topics of the last metadata, sorted by name. */
size_t kcluster_topic_count(const struct kcluster *cl);
const struct kcluster_topic *kcluster_topic_at(const struct kcluster *cl,
    size_t i);
/* 1 if the last refresh gave some partition another leader than the one
 * before, or a partition appeared (the first refresh counts as that). */
int kcluster_leaders_moved(const struct kcluster *cl);

size_t kcluster_broker_count(const struct kcluster *cl);
/* The i-th broker of the last metadata (sorted by node id). */
int kcluster_broker_at(const struct kcluster *cl, size_t i, int32_t *node,
    const char **host, int *port, const char **rack);

/*
 * The connection to broker `node`, opened now if there is none (requests
 * may be sent at once: they wait for the handshake).  NULL with the reason
 * in err if the node is not in the metadata or is in reconnect backoff
 * after a failure.
 */
struct kconn *kcluster_broker_conn(struct kcluster *cl, int32_t node,
    char *err, size_t errlen);

/*
 * The connection to the current leader of topic/partition (as
 * kcluster_broker_conn).  NULL with the reason in err when the topic or
 * partition is unknown, the partition has no leader, or the leader is in
 * backoff; refreshing the metadata is then the caller's next step.
 */
struct kconn *kcluster_leader_conn(struct kcluster *cl, const char *topic,
    int32_t partition, char *err, size_t errlen);

/*
 * A ready connection for control requests (CreateTopics, InitProducerId,
 * DescribeConfigs...): with control_conn, the bootstrap connection
 * Metadata uses (opened now if there is none, walking the bootstrap list
 * and skipping servers in backoff); else any ready connection.  NULL
 * while none is ready: retry after the next connection event.
 */
struct kconn *kcluster_control_conn(struct kcluster *cl);

/* Ready connections of the cluster and their unanswered request bytes. */
void kcluster_conn_stats(const struct kcluster *cl, size_t *ready,
    size_t *inflight_bytes);

/* Request bytes encoded but not yet written, over every connection of
 * the cluster (kconn_unsent_bytes()). */
size_t kcluster_unsent_bytes(const struct kcluster *cl);

/* node is the broker's id (< 0: a bootstrap server); event KCONN_EV_READY
 * or KCONN_EV_CLOSED (errstr then says why). */
typedef void (*kcluster_conn_cb)(struct kcluster *cl, int32_t node,
    int event, const char *errstr, void *arg);
/* Called when any connection of the cluster becomes ready or closes (not
 * from kcluster_free()): the place to retry what waited for one. */
void kcluster_set_conn_cb(struct kcluster *cl, kcluster_conn_cb cb, void *arg);

/*
 * Asks Metadata for the topics fn names (and the brokers) instead of all
 * topics.  fn is called for every request: it returns 0 with *names set
 * to an array of *n names from malloc() (the names stay the caller's,
 * valid during the call; kcluster frees the array, duplicates are
 * harmless), or -1 to ask for all topics.  A named topic the cluster
 * does not have is listed with its error (UNKNOWN_TOPIC_OR_PARTITION).
 */
typedef int (*kcluster_topics_fn)(struct kcluster *cl, const char ***names,
    size_t *n, void *arg);
void kcluster_set_topics_fn(struct kcluster *cl, kcluster_topics_fn fn,
    void *arg);

/*
 * Several users of one kcluster (the destination's is shared by the data
 * plane, the group client and the status topic): the owner sets the
 * topics_fn, the others name the topics they need here.  Metadata then
 * asks for the union.  Counted per name (added twice, removed twice);
 * no effect while every topic is asked (no topics_fn, or it answers -1).
 * The name is copied.  0, or -1 out of memory.
 */
int kcluster_add_topic(struct kcluster *cl, const char *name);
void kcluster_remove_topic(struct kcluster *cl, const char *name);

/*
 * A connection of the caller's own to host:port (the cluster's connection
 * config, resolver and statistics hook), for traffic that must not queue
 * behind the shared connections' requests: a group coordinator holds a
 * JoinGroup for up to the rebalance timeout.  The caller owns it (event
 * callback, kconn_free()).  NULL with the reason in err as kconn_new().
 */
struct kconn *kcluster_open_conn(struct kcluster *cl, const char *host,
    int port, kconn_event_cb cb, void *arg, char *err, size_t errlen);

/* Called after every refresh (periodic ones included), before the
 * refresh's own callbacks, with err KCONN_E_OK and the new metadata in
 * place, or the failure: the place to re-route partitions. */
void kcluster_set_metadata_cb(struct kcluster *cl, kcluster_cb cb, void *arg);

/* Statistics hook applied to every connection of the cluster. */
void kcluster_set_stats_cb(struct kcluster *cl, kconn_stats_fn fn, void *arg);

#endif
