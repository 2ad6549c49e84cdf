/*
 * cluster.h: several mirrord instances as one (cluster.enabled; see
 * doc/ha.md and RUNNING SEVERAL INSTANCES in mirrord(8)).
 *
 * Each instance is a member of the Kafka group cluster.group_id on the
 * destination cluster (lib/kgroup).  The group leader writes the metadata
 * log (mlog_kafka promoted to writer), records the members and assigns the
 * mirrored partitions (lib/assign; part-owner records); every other member
 * follows the log (mlog_kafka_poll on a timer) and copies the partitions
 * the log names it the owner of (pipeline_set_instance).  The writer also
 * decides on the followers' forwarded metadata writes (the request
 * handler): a partition-scoped record is accepted only from the
 * partition's owner in the current generation.
 *
 * Start-up order (daemon/mirrord.c): the metadata log is opened as a
 * follower and replayed, the pipeline and the admin server are created,
 * then cluster_start() joins the group.
 */
#ifndef MIRRORD_CLUSTER_H
#define MIRRORD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct config;
struct mstate;
struct mlog;
struct pipeline;
struct admin;
struct metrics_std;
struct cluster;

/* The instance id cluster.instance_id gives, or <host name>:<admin port>
 * (the port bound, so call after the admin listener is up). */
void cluster_instance_id_of(const struct config *cfg, int admin_port,
    char *out, size_t outlen);

/* ml is the metadata log opened as a follower; everything is borrowed and
 * must outlive the cluster.  NULL with err. */
struct cluster *cluster_new(struct event_base *base, const struct config *cfg,
    struct mstate *st, struct mlog *ml, struct pipeline *pl,
    struct admin *adm, struct metrics_std *ms, int admin_port,
    int http_port, char *err, size_t errlen);
/* Learns the destination's brokers (for cluster.local_broker_id -1), then
 * joins the group. */
void cluster_start(struct cluster *c);
/* Leaves the group (LeaveGroup, so the others rebalance at once), then
 * done(arg) once, from the loop. */
void cluster_leave(struct cluster *c, void (*done)(void *arg), void *arg);
void cluster_free(struct cluster *c);

const char *cluster_instance_id(const struct cluster *c);
/* 1 while this instance writes the metadata log. */
int cluster_is_writer(const struct cluster *c);
/* /readyz: a follower is ready when it is a member and tails the log, the
 * writer when its log is writable. */
bool cluster_ready(void *arg, char *why, size_t whylen);

/* Member metadata (JoinGroup protocol metadata), exposed for tests. */
struct cluster_member_meta {
	char instance_id[1025];
	int32_t local_broker_id;
	char admin_addr[300];
	char http_addr[300];
	/* Bumped each time the instance asks for a rebalance (a known
	 * member's JoinGroup with changed metadata makes one); an optional
	 * trailing field, which earlier versions skip. */
	uint32_t rejoins;
};
uint8_t *cluster_meta_encode(const struct cluster_member_meta *m,
    size_t *outlen);
int cluster_meta_decode(const uint8_t *p, size_t len,
    struct cluster_member_meta *m, char *err, size_t errlen);

#endif
