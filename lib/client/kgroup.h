/*
 * kgroup.h: membership of a Kafka group through the classic group protocol
 * (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup), on a
 * libevent loop, over our own client (kcluster for the brokers, one kconn
 * of its own to the coordinator so a JoinGroup the coordinator holds for
 * the rebalance never delays anyone else's requests).
 *
 * The group is mirrord's own: protocol type "mirrord", one protocol
 * "mirrord-v1" whose metadata is the caller's bytes (kgroup never looks
 * inside them).  Membership is static when cfg->instance_id is set
 * (group.instance.id, KIP-345): a second process joining with the same
 * instance id takes the membership over and the first one is told
 * FENCED_INSTANCE_ID on its next request.
 *
 * Life of a member:
 *   kgroup_start() -> find the coordinator -> JoinGroup (again with the
 *   member id the broker gives on MEMBER_ID_REQUIRED) -> the leader's
 *   assign() -> SyncGroup -> joined() -> Heartbeat every
 *   heartbeat_interval_ms ... -> a rebalance (REBALANCE_IN_PROGRESS) joins
 *   again and ends in joined() with the new generation; revoked() only when
 *   the coordinator says the membership is gone:
 *     ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID  revoked, join again at once;
 *     FENCED_INSTANCE_ID                     revoked, an error naming the
 *                                            instance id, join again only
 *                                            after a backoff (growing while
 *                                            the fencing repeats);
 *     NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, connection lost
 *                                            find the coordinator again
 *                                            (at least every second while
 *                                            a membership is held) and
 *                                            resume the heartbeats of the
 *                                            live generation there.
 *
 * The lease.  A member is dropped by the coordinator only once it has
 * been silent for session_timeout_ms, or has not joined a rebalance within
 * rebalance_timeout_ms of its start; either begins after the coordinator
 * took the last request it answered without an error (a Heartbeat, the
 * SyncGroup).  So until that request's send time plus the smaller timeout
 * no other member can have been given this member's work: the lease
 * (kgroup_lease_until()).  lease() tells each renewal and the moment it
 * runs out.  Running out ends nothing here: the coordinator may still count
 * the member in (it moved, and the new one loaded the group), so the
 * member keeps its generation and reaches the coordinator again; the next
 * Heartbeat it answers renews the lease or revokes the membership.  A
 * REBALANCE_IN_PROGRESS answer renews nothing.
 * Every request has a deadline (JoinGroup and SyncGroup: the rebalance
 * timeout + 5 s, as Kafka's clients; others: the session timeout, at
 * least 3 s); every retry waits an exponential backoff with jitter.
 * Errors are logged with Kafka's error names.
 *
 * Callbacks run on the loop, never from inside a kgroup_* call; any of them
 * may call any kgroup_* function, kgroup_free() included.  Pointers handed
 * to callbacks are valid only during the call.
 */
#ifndef MIRRORD_KGROUP_H
#define MIRRORD_KGROUP_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct kcluster;
struct kgroup;

#define KGROUP_PROTOCOL_TYPE "mirrord"
#define KGROUP_PROTOCOL_NAME "mirrord-v1"

struct kgroup_config {
	const char *group_id;
	const char *instance_id;   /* group.instance.id; NULL: dynamic member */
	int session_timeout_ms;    /* the broker accepts group.min/max.session.timeout.ms */
	int rebalance_timeout_ms;  /* how long the coordinator waits for rejoins */
	int heartbeat_interval_ms;
};

struct kgroup_member {
	const char *member_id;
	const char *instance_id;   /* "" for a dynamic member */
	const uint8_t *meta;       /* its JoinGroup protocol metadata */
	size_t meta_len;
};

struct kgroup_cbs {
	/* Leader only, after JoinGroup: fill out[i] (malloc'd, kgroup frees
	 * it; may be NULL/0) for members[i].  0, or -1 to refuse (logged;
	 * the member joins again after a backoff).  Not called when the
	 * broker says the leader must not assign (KIP-814: a static leader
	 * that rejoined a stable group keeps the assignment it made). */
	int (*assign)(void *arg, int32_t generation,
	    const struct kgroup_member *m, size_t n,
	    uint8_t **out, size_t *outlen);
	/* After SyncGroup: a new generation is live.  members (the JoinGroup
	 * answer, ordered as the broker sent them) for the leader, else NULL
	 * and 0.  assignment is this member's, as the leader made it. */
	void (*joined)(void *arg, int32_t generation, const char *member_id,
	    const char *leader_member_id, int is_leader,
	    const struct kgroup_member *members, size_t nmembers,
	    const uint8_t *assignment, size_t len);
	/* Membership lost (why names the coordinator's error): stop acting
	 * as a member until the next joined().  Once per joined(). */
	void (*revoked)(void *arg, const char *why);
	/* Optional.  The lease of the live generation is until until_ms
	 * (monotonic, clock_mono_ms()): renewed by a Heartbeat's answer, or
	 * run out (until_ms is past).  Not called around joined() and
	 * revoked(), which change it too (kgroup_lease_until()). */
	void (*lease)(void *arg, int64_t until_ms);
};

/* Checks the config (group id, timeouts: heartbeat < session) and copies
 * it; cbs is copied too.  cl must outlive the group.  NULL + err. */
struct kgroup *kgroup_new(struct event_base *base, struct kcluster *cl,
    const struct kgroup_config *cfg, const struct kgroup_cbs *cbs,
    void *arg, char *err, size_t errlen);
/* Starts joining with this protocol metadata (copied). */
void kgroup_start(struct kgroup *g, const uint8_t *meta, size_t len);
/* New metadata (copied); joins again so the leader sees it. */
void kgroup_set_metadata(struct kgroup *g, const uint8_t *meta, size_t len);
/* Joins again (a rebalance); why goes to the log and the JoinGroup Reason. */
void kgroup_rejoin(struct kgroup *g, const char *why);
/*
 * Leaves the group: LeaveGroup with the member id (and instance id) when
 * there is a membership to leave, bounded by the request deadline; then
 * done(arg) once, from the loop (never from inside this call).  No other
 * callback runs after kgroup_leave().  done may be NULL.
 */
void kgroup_leave(struct kgroup *g, void (*done)(void *arg), void *arg);
/* Stops at once (no LeaveGroup, no callbacks) and frees. */
void kgroup_free(struct kgroup *g);

/* The live generation (between joined() and revoked()), -1 none. */
int32_t kgroup_generation(const struct kgroup *g);
/* 1 while this member leads the live generation. */
int kgroup_is_leader(const struct kgroup *g);
/* "INIT", "FIND_COORDINATOR", "CONNECTING", "JOINING", "SYNCING",
 * "STABLE", "BACKOFF", "LEAVING", "LEFT". */
const char *kgroup_state_name(const struct kgroup *g);
/* The member id the coordinator gave ("" none yet). */
const char *kgroup_member_id(const struct kgroup *g);
/* 1 from a FENCED_INSTANCE_ID (another process joined with this instance
 * id; already so when revoked() runs) until this member joins again. */
int kgroup_fenced(const struct kgroup *g);
/* The end of the live generation's lease (monotonic ms; may be past), 0
 * without a membership. */
int64_t kgroup_lease_until(const struct kgroup *g);
/* 1 while the live generation's lease runs. */
int kgroup_lease_held(const struct kgroup *g);
/* Why the coordinator was last not reached ("" since it answered). */
const char *kgroup_trouble(const struct kgroup *g);

#endif
