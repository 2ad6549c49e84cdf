/*
 * admin.h: mirrord's admin RPCs (doc/protocol.md) on top of the
 * Kafka-protocol listener (adminsrv): ApiVersions, Metadata, the nine
 * mirror RPCs, and DescribeConfigs / IncrementalAlterConfigs of a
 * mirror.  Validation and durable state changes are mstate's; live offsets
 * come from the pipeline; source lookups from srclookup.  This module
 * decodes, calls them, and encodes the answers.
 */
#ifndef MIRRORD_ADMIN_H
#define MIRRORD_ADMIN_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct mstate;
struct mpart;
struct config;
struct pipeline;
struct metrics_std;
struct admin;

/* Binds server.listen; NULL with the reason (naming the address) in err.
 * cfg is borrowed; admin_set_config() replaces it on reload. */
struct admin *admin_new(struct event_base *base, struct mstate *st,
    const struct config *cfg, struct pipeline *pl, struct metrics_std *ms,
    char *err, size_t errlen);
void admin_set_config(struct admin *adm, const struct config *cfg);
void admin_stop_accepting(struct admin *adm);
int admin_port(const struct admin *adm);
void admin_free(struct admin *adm);

/*
 * Several instances (cluster.enabled): the daemon's view of the group.
 * Without it (single mode) this instance is the one broker and controller.
 *  - may_mutate: 1 when this instance writes the metadata log; else 0 with
 *    the NOT_CONTROLLER message (naming the writer instance and its admin
 *    address) in msg.
 *  - brokers: the members as brokers (node id = index in the members
 *    record), at most max; returns how many and sets *controller_id to the
 *    writer's node id (-1 unknown).  0 = answer as a single instance.
 *  - partition_numbers: see below (may be NULL).
 */
struct admin_broker {
	int32_t node_id;
	char host[256];
	int port;
};
/* A partition's numbers as another instance published them (-1 unknown;
 * times are wall-clock ms; reason "" when it is not stalled). */
struct admin_partition_numbers {
	int64_t src, dst, lag, lag_ms;
	int64_t src_age_ms, caught_up_ms, stalled_since_ms;
	char reason[1200];
};
struct admin_cluster_view {
	int (*may_mutate)(void *arg, char *msg, size_t msglen);
	size_t (*brokers)(void *arg, struct admin_broker *out, size_t max,
	    int32_t *controller_id);
	/* Live numbers of a partition another instance copies (its status
	 * record, aged to now): 1 with them, 0 to use this instance's own. */
	int (*partition_numbers)(void *arg, const struct mpart *p,
	    struct admin_partition_numbers *out);
};
void admin_set_cluster(struct admin *adm, const struct admin_cluster_view *v,
    void *arg);

/*
 * Is a mirror current?  Its partitions as DescribeMirrors shows them
 * (this instance's own live, the others' from their status records),
 * summed up for the HTTP status (/mirrors, /mirrors/<name>/ready):
 * counts by state, the stalled ones, the largest lag in offsets and in
 * time (-1 unknown), whether its source is read (source_up) and the
 * first trouble in words.  -1 for an unknown mirror.
 */
struct admin_mirror_status {
	size_t partitions, mirroring, stalled, failed, paused, stopped, other;
	size_t lag_unknown;
	int64_t max_lag, max_lag_ms;
	int source_up;
	char reason[1200];
};
int admin_mirror_status(struct admin *adm, const char *mirror,
    struct admin_mirror_status *out);
/* The mirrors' names, in the model's order: the i-th, NULL past the end. */
const char *admin_mirror_name(struct admin *adm, size_t i);

#endif
