/*
 * test_kgroup_fake: unit tests for lib/kgroup against a fake coordinator
 * (test/lib/kfake) that answers with the generated encoders and a scripted
 * error per request: what real Kafka does not do on demand.  The requests'
 * fields (protocol type and name, metadata, instance id, member id,
 * generation, the leader's assignments, LeaveGroup's member), then each
 * error class: MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
 * FENCED_INSTANCE_ID (the backoff before joining again), NOT_COORDINATOR
 * (found again, heartbeats resumed, no rebalance), REBALANCE_IN_PROGRESS,
 * COORDINATOR_LOAD_IN_PROGRESS, a silent coordinator (the lease runs out
 * a session timeout after the last heartbeat answered, the membership
 * stays, the next answered heartbeat renews it), KIP-814's SkipAssignment,
 * kgroup_free() inside revoked().  Real Kafka 4.4 is test_kgroup_kafka.py.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "compat.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kerr.h"
#include "kfake.h"
#include "kgroup.h"
#include "kproto.h"

#define SESSION_MS 1000
#define HB_MS 100

struct env {
	struct event_base *base;
	struct kfake fake;
	struct kcluster_config cfg;
	struct kcluster *cl;
	struct kgroup *g;
	/* the fake's script: error codes answered in order, then 0 */
	int16_t join_err[8], sync_err[8], hb_err[8];
	int njoin_err, nsync_err, nhb_err;
	int hb_silent;        /* heartbeats get no answer */
	int dynamic_required; /* MEMBER_ID_REQUIRED to a JoinGroup without member id */
	int follower;         /* someone else leads */
	int skip_assignment;
	int32_t gen;
	/* what the fake saw */
	int finds, joins, syncs, hbs, leaves;
	char join_member[128], join_instance[64], join_ptype[32], join_pname[32];
	char join_meta[64], join_reason[200];
	int32_t join_rebalance, join_session;
	int16_t join_version;
	int32_t hb_gen;
	char hb_member[128];
	char leave_member[128], leave_instance[64];
	int sync_nassign;
	char sync_assign[2][128];
	int64_t fenced_at, join_after_fence_at;
	/* callbacks */
	int assigned, joined, revoked, left;
	int lapses, renewals;
	int64_t lapsed_at, lease_until, last_hb_at;
	size_t assign_n;
	char assign_inst1[64], assign_meta1[64];
	char revoked_why[512];
	char joined_assignment[128];
	int32_t joined_gen;
	int joined_leader;
	size_t joined_n;
	int free_in_revoked;
};

static void kstr_copy(char *dst, size_t cap, struct kstr s)
{
	snprintf(dst, cap, "%.*s", s.len > 0 ? (int)s.len : 0,
	    s.p != NULL ? s.p : "");
}

static void reply(struct kfake *k, int16_t key, int16_t version, int32_t corr,
    struct kw *w)
{
	size_t len = 0;
	uint8_t *buf = kw_take(w, &len);

	ck_assert_ptr_nonnull(buf);
	kfake_reply(k, corr, kp_response_header_version(key, version) == 1, buf,
	    len);
	free(buf);
	kw_fini(w);
}

static int16_t next_err(int16_t *errs, int *n)
{
	int16_t e;

	if (*n == 0)
		return 0;
	e = errs[0];
	memmove(errs, errs + 1, (size_t)(--*n) * sizeof(*errs));
	return e;
}

static void fake_request(struct kfake *k, int16_t key, int16_t version,
    int32_t corr, struct kr *r, void *arg)
{
	struct env *e = arg;
	struct karena *a = karena_new(1 << 20);
	struct kw w;

	kw_init(&w, 1 << 20);
	switch (key) {
	case KP_API_API_VERSIONS: {
		int16_t keys[][3] = { { 3, 0, 12 }, { 10, 0, 3 }, { 11, 0, 9 },
		    { 12, 0, 4 }, { 13, 0, 5 }, { 14, 0, 5 }, { 18, 0, 3 } };
		kfake_apiversions(k, corr, version, keys, ARRAY_SIZE(keys));
		kw_fini(&w);
		break;
	}
	case KP_API_METADATA: {
		struct kp_metadata_response m;
		struct kp_metadata_response_broker b;

		kp_metadata_response_init(&m);
		kp_metadata_response_broker_init(&b);
		b.node_id = 1;
		b.host = kstr_c("127.0.0.1");
		b.port = k->port;
		m.brokers = &b;
		m.brokers_n = 1;
		m.controller_id = 1;
		m.topics_n = 0;
		ck_assert_int_eq(kp_metadata_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	case KP_API_FIND_COORDINATOR: {
		struct kp_find_coordinator_request q;
		struct kp_find_coordinator_response m;

		ck_assert_int_eq(kp_find_coordinator_request_decode(r, a, version, &q), 0);
		ck_assert(kstr_eq(q.key, "grp"));
		e->finds++;
		kp_find_coordinator_response_init(&m);
		m.node_id = 1;
		m.host = kstr_c("127.0.0.1");
		m.port = k->port;
		ck_assert_int_eq(kp_find_coordinator_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	case KP_API_JOIN_GROUP: {
		struct kp_join_group_request q;
		struct kp_join_group_response m;
		struct kp_join_group_response_member mm[2];
		char me[128];

		ck_assert_int_eq(kp_join_group_request_decode(r, a, version, &q), 0);
		e->joins++;
		e->join_version = version;
		kstr_copy(e->join_member, sizeof(e->join_member), q.member_id);
		kstr_copy(e->join_instance, sizeof(e->join_instance), q.group_instance_id);
		kstr_copy(e->join_ptype, sizeof(e->join_ptype), q.protocol_type);
		kstr_copy(e->join_reason, sizeof(e->join_reason), q.reason);
		ck_assert_int_eq(q.protocols_n, 1);
		kstr_copy(e->join_pname, sizeof(e->join_pname), q.protocols[0].name);
		snprintf(e->join_meta, sizeof(e->join_meta), "%.*s",
		    (int)q.protocols[0].metadata.len,
		    (const char *)q.protocols[0].metadata.p);
		e->join_rebalance = q.rebalance_timeout_ms;
		e->join_session = q.session_timeout_ms;
		if (e->fenced_at != 0 && e->join_after_fence_at == 0)
			e->join_after_fence_at = clock_mono_ms();
		kp_join_group_response_init(&m);
		m.error_code = next_err(e->join_err, &e->njoin_err);
		snprintf(me, sizeof(me), "%s", e->join_member[0] ? e->join_member :
		    "m-1");
		if (m.error_code == 0 && e->dynamic_required && !e->join_member[0]) {
			m.error_code = KERR_MEMBER_ID_REQUIRED;
			snprintf(me, sizeof(me), "m-dyn");
		}
		m.member_id = kstr_c(me);
		if (m.error_code == 0) {
			m.generation_id = ++e->gen;
			m.protocol_type = kstr_c("mirrord");
			m.protocol_name = kstr_c("mirrord-v1");
			m.leader = kstr_c(e->follower ? "m-2" : me);
			m.skip_assignment = e->skip_assignment;
			if (!e->follower) {
				kp_join_group_response_member_init(&mm[0]);
				kp_join_group_response_member_init(&mm[1]);
				mm[0].member_id = kstr_c(me);
				mm[0].group_instance_id = q.group_instance_id;
				mm[0].metadata = q.protocols[0].metadata;
				mm[1].member_id = kstr_c("m-2");
				mm[1].group_instance_id = kstr_c("i-2");
				mm[1].metadata.p = (const uint8_t *)"meta2";
				mm[1].metadata.len = 5;
				m.members = mm;
				m.members_n = 2;
			}
		}
		ck_assert_int_eq(kp_join_group_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	case KP_API_SYNC_GROUP: {
		struct kp_sync_group_request q;
		struct kp_sync_group_response m;
		char mine[128] = "from-leader";

		ck_assert_int_eq(kp_sync_group_request_decode(r, a, version, &q), 0);
		e->syncs++;
		ck_assert(kstr_eq(q.protocol_type, "mirrord"));
		ck_assert(kstr_eq(q.protocol_name, "mirrord-v1"));
		ck_assert_int_eq(q.generation_id, e->gen);
		e->sync_nassign = q.assignments_n;
		for (int32_t i = 0; i < q.assignments_n && i < 2; i++) {
			snprintf(e->sync_assign[i], sizeof(e->sync_assign[i]),
			    "%.*s=%.*s", (int)q.assignments[i].member_id.len,
			    q.assignments[i].member_id.p,
			    (int)q.assignments[i].assignment.len,
			    (const char *)q.assignments[i].assignment.p);
			if (kstr_same(q.assignments[i].member_id, q.member_id))
				snprintf(mine, sizeof(mine), "%.*s",
				    (int)q.assignments[i].assignment.len,
				    (const char *)q.assignments[i].assignment.p);
		}
		kp_sync_group_response_init(&m);
		m.error_code = next_err(e->sync_err, &e->nsync_err);
		m.protocol_type = kstr_c("mirrord");
		m.protocol_name = kstr_c("mirrord-v1");
		m.assignment.p = (const uint8_t *)mine;
		m.assignment.len = (int32_t)strlen(mine);
		ck_assert_int_eq(kp_sync_group_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	case KP_API_HEARTBEAT: {
		struct kp_heartbeat_request q;
		struct kp_heartbeat_response m;

		ck_assert_int_eq(kp_heartbeat_request_decode(r, a, version, &q), 0);
		e->hbs++;
		e->last_hb_at = clock_mono_ms();
		e->hb_gen = q.generation_id;
		kstr_copy(e->hb_member, sizeof(e->hb_member), q.member_id);
		if (e->hb_silent) {
			kw_fini(&w);
			break;
		}
		kp_heartbeat_response_init(&m);
		m.error_code = next_err(e->hb_err, &e->nhb_err);
		if (m.error_code == KERR_FENCED_INSTANCE_ID)
			e->fenced_at = clock_mono_ms();
		ck_assert_int_eq(kp_heartbeat_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	case KP_API_LEAVE_GROUP: {
		struct kp_leave_group_request q;
		struct kp_leave_group_response m;
		struct kp_leave_group_response_member_response mr;

		ck_assert_int_eq(kp_leave_group_request_decode(r, a, version, &q), 0);
		ck_assert_int_ge(version, 3);
		e->leaves++;
		ck_assert_int_eq(q.members_n, 1);
		kstr_copy(e->leave_member, sizeof(e->leave_member), q.members[0].member_id);
		kstr_copy(e->leave_instance, sizeof(e->leave_instance),
		    q.members[0].group_instance_id);
		kp_leave_group_response_init(&m);
		kp_leave_group_response_member_response_init(&mr);
		mr.member_id = q.members[0].member_id;
		mr.group_instance_id = q.members[0].group_instance_id;
		m.members = &mr;
		m.members_n = 1;
		ck_assert_int_eq(kp_leave_group_response_encode(&w, version, &m), 0);
		reply(k, key, version, corr, &w);
		break;
	}
	default:
		ck_abort_msg("unexpected ApiKey %d", key);
	}
	karena_free(a);
}

/* ---- callbacks ------------------------------------------------------- */

static int on_assign(void *arg, int32_t gen, const struct kgroup_member *m,
    size_t n, uint8_t **out, size_t *outlen)
{
	struct env *e = arg;

	e->assigned++;
	e->assign_n = n;
	if (n > 1) {
		snprintf(e->assign_inst1, sizeof(e->assign_inst1), "%s",
		    m[1].instance_id);
		snprintf(e->assign_meta1, sizeof(e->assign_meta1), "%.*s",
		    (int)m[1].meta_len, (const char *)m[1].meta);
	}
	for (size_t i = 0; i < n; i++) {
		char *s;

		ck_assert_int_gt(asprintf(&s, "a%d:%s", (int)gen, m[i].member_id), 0);
		out[i] = (uint8_t *)s;
		outlen[i] = strlen(s);
	}
	return 0;
}

static void on_joined(void *arg, int32_t gen, const char *member_id,
    const char *leader_member_id, int is_leader,
    const struct kgroup_member *members, size_t n,
    const uint8_t *assignment, size_t len)
{
	struct env *e = arg;

	(void)member_id;
	(void)leader_member_id;
	ck_assert(is_leader ? members != NULL : members == NULL);
	e->joined++;
	e->joined_gen = gen;
	e->joined_leader = is_leader;
	e->joined_n = n;
	snprintf(e->joined_assignment, sizeof(e->joined_assignment), "%.*s",
	    (int)len, assignment != NULL ? (const char *)assignment : "");
	ck_assert_int_eq(kgroup_generation(e->g), gen);
	ck_assert_int_eq(kgroup_is_leader(e->g), is_leader);
}

static void on_revoked(void *arg, const char *why)
{
	struct env *e = arg;

	e->revoked++;
	snprintf(e->revoked_why, sizeof(e->revoked_why), "%s", why);
	ck_assert_int_eq(kgroup_generation(e->g), -1);
	if (e->free_in_revoked) {
		kgroup_free(e->g);
		e->g = NULL;
	}
}

static void on_lease(void *arg, int64_t until)
{
	struct env *e = arg;

	e->lease_until = until;
	ck_assert_int_eq(kgroup_lease_until(e->g), until);
	if (until <= clock_mono_ms()) {
		e->lapses++;
		e->lapsed_at = clock_mono_ms();
		ck_assert_int_eq(kgroup_lease_held(e->g), 0);
	} else {
		e->renewals++;
		ck_assert_int_eq(kgroup_lease_held(e->g), 1);
	}
}

static void on_left(void *arg)
{
	struct env *e = arg;

	e->left++;
}

/* ---- the loop -------------------------------------------------------- */

struct env_pred {
	int (*pred)(struct env *);
	struct env *e;
};

static int env_pred_holds(void *arg)
{
	struct env_pred *p = arg;

	return p->pred(p->e);
}

/* Runs the loop until pred(e) holds (checked every 5 ms), at most 10 s. */
static int wait_for(struct env *e, int (*pred)(struct env *))
{
	struct env_pred p = { pred, e };

	return kfake_wait_for(e->base, env_pred_holds, &p, 5000);
}

static void env_start(struct env *e, const char *instance)
{
	struct kgroup_config gc = { .group_id = "grp", .instance_id = instance,
	    .session_timeout_ms = SESSION_MS, .rebalance_timeout_ms = 5000,
	    .heartbeat_interval_ms = HB_MS };
	struct kgroup_cbs cbs = { on_assign, on_joined, on_revoked, on_lease };
	char err[256], boot[64];

	e->base = event_base_new();
	ck_assert_ptr_nonnull(e->base);
	kfake_start(&e->fake, e->base, fake_request, e);
	kcluster_config_init(&e->cfg, "destination");
	snprintf(boot, sizeof(boot), "127.0.0.1:%d", e->fake.port);
	ck_assert_int_eq(kcluster_config_set(&e->cfg, "bootstrap.servers", boot,
	    err, sizeof(err)), 0);
	e->cfg.metadata_refresh_ms = 0;
	e->cfg.metadata_timeout_ms = 5000;
	e->cfg.reconnect_backoff_ms = 10;
	ck_assert_int_eq(kcluster_config_prepare(&e->cfg, err, sizeof(err)), 0);
	e->cl = kcluster_new(e->base, NULL, &e->cfg, err, sizeof(err));
	ck_assert_msg(e->cl != NULL, "kcluster_new: %s", err);
	e->g = kgroup_new(e->base, e->cl, &gc, &cbs, e, err, sizeof(err));
	ck_assert_msg(e->g != NULL, "kgroup_new: %s", err);
	ck_assert_str_eq(kgroup_state_name(e->g), "INIT");
	kgroup_start(e->g, (const uint8_t *)"my-meta", 7);
}

static void env_stop(struct env *e)
{
	if (e->g != NULL)
		kgroup_free(e->g);
	kcluster_free(e->cl);
	event_base_loop(e->base, EVLOOP_NONBLOCK); /* deferred frees */
	kfake_stop(&e->fake);
	kcluster_config_fini(&e->cfg);
	event_base_free(e->base);
}

static int p_joined1(struct env *e) { return e->joined >= 1; }
static int p_joined2(struct env *e) { return e->joined >= 2; }
static int p_hbs3(struct env *e) { return e->hbs >= 3; }
static int p_left(struct env *e) { return e->left >= 1; }
static int p_revoked(struct env *e) { return e->revoked >= 1; }
static int p_lapsed(struct env *e) { return e->lapses >= 1; }
static int p_renewed(struct env *e) { return e->renewals >= 1; }
static int p_finds2_hb(struct env *e) { return e->finds >= 2 && e->nhb_err == 0 && e->hbs >= 4; }
static int p_join_after_fence(struct env *e) { return e->join_after_fence_at != 0 && e->joined >= 2; }

/* ---- tests ----------------------------------------------------------- */

START_TEST(test_leader_join_heartbeat_leave)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	/* the JoinGroup */
	ck_assert_int_eq(e.join_version, 9);
	ck_assert_str_eq(e.join_ptype, "mirrord");
	ck_assert_str_eq(e.join_pname, "mirrord-v1");
	ck_assert_str_eq(e.join_meta, "my-meta");
	ck_assert_str_eq(e.join_instance, "i-1");
	ck_assert_str_eq(e.join_member, "");
	ck_assert_int_eq(e.join_session, SESSION_MS);
	ck_assert_int_eq(e.join_rebalance, 5000);
	/* the leader's assignment, handed to the coordinator and back */
	ck_assert_int_eq(e.assigned, 1);
	ck_assert_uint_eq(e.assign_n, 2);
	ck_assert_str_eq(e.assign_inst1, "i-2");
	ck_assert_str_eq(e.assign_meta1, "meta2");
	ck_assert_int_eq(e.sync_nassign, 2);
	ck_assert_str_eq(e.sync_assign[0], "m-1=a1:m-1");
	ck_assert_str_eq(e.sync_assign[1], "m-2=a1:m-2");
	ck_assert_str_eq(e.joined_assignment, "a1:m-1");
	ck_assert_int_eq(e.joined_gen, 1);
	ck_assert_int_eq(e.joined_leader, 1);
	ck_assert_uint_eq(e.joined_n, 2);
	ck_assert_str_eq(kgroup_state_name(e.g), "STABLE");
	ck_assert_str_eq(kgroup_member_id(e.g), "m-1");
	/* heartbeats of generation 1 */
	ck_assert(wait_for(&e, p_hbs3));
	ck_assert_int_eq(e.hb_gen, 1);
	ck_assert_str_eq(e.hb_member, "m-1");
	ck_assert_int_eq(e.revoked, 0);
	ck_assert_int_eq(e.finds, 1);
	/* leave */
	kgroup_leave(e.g, on_left, &e);
	ck_assert_int_eq(e.left, 0); /* never from inside the call */
	ck_assert(wait_for(&e, p_left));
	ck_assert_int_eq(e.leaves, 1);
	ck_assert_str_eq(e.leave_member, "m-1");
	ck_assert_str_eq(e.leave_instance, "i-1");
	ck_assert_str_eq(kgroup_state_name(e.g), "LEFT");
	ck_assert_int_eq(kgroup_generation(e.g), -1);
	ck_assert_int_eq(e.revoked, 0);
	env_stop(&e);
}
END_TEST

START_TEST(test_member_id_required)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	e.dynamic_required = 1;
	e.follower = 1;
	env_start(&e, NULL);
	ck_assert(wait_for(&e, p_joined1));
	ck_assert_int_eq(e.joins, 2);
	ck_assert_str_eq(e.join_member, "m-dyn");
	ck_assert_str_eq(e.join_instance, "");
	ck_assert_int_eq(e.assigned, 0);
	ck_assert_int_eq(e.sync_nassign, 0);
	ck_assert_int_eq(e.joined_leader, 0);
	ck_assert_uint_eq(e.joined_n, 0);
	ck_assert_str_eq(e.joined_assignment, "from-leader");
	ck_assert_int_eq(kgroup_is_leader(e.g), 0);
	env_stop(&e);
}
END_TEST

/* Heartbeat errors that end the membership: revoked, then joined again. */
static void lost_membership(int16_t code, const char *member_after)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	e.hb_err[e.nhb_err++] = code;
	ck_assert(wait_for(&e, p_joined2));
	ck_assert_int_eq(e.revoked, 1);
	ck_assert_msg(strstr(e.revoked_why, kerr_name(code)) != NULL,
	    "revoked why: %s", e.revoked_why);
	ck_assert_int_eq(e.joins, 2);
	ck_assert_str_eq(e.join_member, member_after);
	ck_assert_msg(strstr(e.join_reason, kerr_name(code)) != NULL,
	    "JoinGroup reason: %s", e.join_reason);
	ck_assert_int_eq(e.joined_gen, 2);
	ck_assert_int_eq(kgroup_generation(e.g), 2);
	env_stop(&e);
}

START_TEST(test_illegal_generation)
{
	lost_membership(KERR_ILLEGAL_GENERATION, "m-1");
}
END_TEST

START_TEST(test_unknown_member)
{
	lost_membership(KERR_UNKNOWN_MEMBER_ID, "");
}
END_TEST

START_TEST(test_fenced_instance)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	e.hb_err[e.nhb_err++] = KERR_FENCED_INSTANCE_ID;
	ck_assert(wait_for(&e, p_revoked));
	ck_assert_msg(strstr(e.revoked_why, "FENCED_INSTANCE_ID") != NULL,
	    "revoked why: %s", e.revoked_why);
	ck_assert_int_eq(kgroup_generation(e.g), -1);
	ck_assert(wait_for(&e, p_join_after_fence));
	/* only after a backoff of about the session timeout (-20% jitter) */
	ck_assert_int_ge(e.join_after_fence_at - e.fenced_at, SESSION_MS * 7 / 10);
	ck_assert_str_eq(e.join_member, "");
	ck_assert_int_eq(e.revoked, 1);
	env_stop(&e);
}
END_TEST

START_TEST(test_not_coordinator)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	e.hb_err[e.nhb_err++] = KERR_NOT_COORDINATOR;
	e.hbs = 0;
	ck_assert(wait_for(&e, p_finds2_hb));
	/* found again and resumed: no rebalance, no revocation */
	ck_assert_int_eq(e.joins, 1);
	ck_assert_int_eq(e.revoked, 0);
	ck_assert_int_eq(e.hb_gen, 1);
	ck_assert_int_eq(kgroup_generation(e.g), 1);
	env_stop(&e);
}
END_TEST

START_TEST(test_rebalance_in_progress)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	e.hb_err[e.nhb_err++] = KERR_REBALANCE_IN_PROGRESS;
	ck_assert(wait_for(&e, p_joined2));
	ck_assert_int_eq(e.revoked, 0);
	ck_assert_int_eq(e.joins, 2);
	ck_assert_str_eq(e.join_member, "m-1");
	ck_assert_int_eq(e.joined_gen, 2);
	ck_assert_int_eq(e.assigned, 2);
	ck_assert_str_eq(e.joined_assignment, "a2:m-1");
	env_stop(&e);
}
END_TEST

START_TEST(test_coordinator_loading)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	e.join_err[e.njoin_err++] = KERR_COORDINATOR_LOAD_IN_PROGRESS;
	e.join_err[e.njoin_err++] = KERR_COORDINATOR_LOAD_IN_PROGRESS;
	e.sync_err[e.nsync_err++] = KERR_COORDINATOR_LOAD_IN_PROGRESS;
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	ck_assert_int_eq(e.joins, 4);
	ck_assert_int_eq(e.syncs, 2);
	ck_assert_int_eq(e.revoked, 0);
	env_stop(&e);
}
END_TEST

START_TEST(test_silent_coordinator)
{
	struct env e;
	int64_t t0;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	/* the lease runs from the SyncGroup, then from each heartbeat */
	ck_assert_int_gt(kgroup_lease_until(e.g), clock_mono_ms());
	ck_assert_int_le(kgroup_lease_until(e.g), clock_mono_ms() + SESSION_MS);
	ck_assert(wait_for(&e, p_renewed));
	e.renewals = 0;
	e.hb_silent = 1;
	t0 = clock_mono_ms();
	ck_assert(wait_for(&e, p_lapsed));
	/* a session timeout (here below the rebalance timeout) after the
	 * last heartbeat answered, so at most that after the silence began */
	ck_assert_int_le(e.lapsed_at - t0, SESSION_MS + 50);
	ck_assert_int_le(e.lease_until, e.lapsed_at);
	ck_assert_int_eq(kgroup_lease_held(e.g), 0);
	/* the membership is the coordinator's to end: kept */
	ck_assert_int_eq(e.revoked, 0);
	ck_assert_int_eq(kgroup_generation(e.g), 1);
	ck_assert_int_eq(kgroup_is_leader(e.g), 1);
	/* the coordinator answers again: the same generation, renewed */
	e.hb_silent = 0;
	ck_assert(wait_for(&e, p_renewed));
	ck_assert_int_eq(kgroup_lease_held(e.g), 1);
	ck_assert_int_eq(e.revoked, 0);
	ck_assert_int_eq(e.joins, 1);
	ck_assert_int_eq(kgroup_generation(e.g), 1);
	ck_assert_int_eq(e.hb_gen, 1);
	env_stop(&e);
}
END_TEST

START_TEST(test_skip_assignment)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	e.skip_assignment = 1;
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	ck_assert_int_eq(e.assigned, 0);
	ck_assert_int_eq(e.sync_nassign, 0);
	ck_assert_int_eq(e.joined_leader, 1);
	ck_assert_uint_eq(e.joined_n, 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_free_in_revoked)
{
	struct env e;

	memset(&e, 0, sizeof(e));
	env_start(&e, "i-1");
	ck_assert(wait_for(&e, p_joined1));
	e.free_in_revoked = 1;
	e.hb_err[e.nhb_err++] = KERR_ILLEGAL_GENERATION;
	ck_assert(wait_for(&e, p_revoked));
	ck_assert_ptr_null(e.g);
	/* nothing of the group runs any more */
	e.hbs = 0;
	event_base_loop(e.base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(e.joins, 1);
	env_stop(&e);
}
END_TEST

START_TEST(test_config_checks)
{
	struct kgroup_config gc = { .group_id = "grp", .instance_id = "i",
	    .session_timeout_ms = 1000, .rebalance_timeout_ms = 5000,
	    .heartbeat_interval_ms = 1000 };
	struct kgroup_cbs cbs = { NULL, NULL, NULL, NULL };
	char err[256];

	ck_assert_ptr_null(kgroup_new(NULL, NULL, &gc, &cbs, NULL, err, sizeof(err)));
	ck_assert_msg(strstr(err, "heartbeat interval (1000 ms)") != NULL, "%s", err);
	gc.heartbeat_interval_ms = 100;
	gc.group_id = "";
	ck_assert_ptr_null(kgroup_new(NULL, NULL, &gc, &cbs, NULL, err, sizeof(err)));
	ck_assert_msg(strstr(err, "group id is empty") != NULL, "%s", err);
	gc.group_id = "grp";
	gc.instance_id = "";
	ck_assert_ptr_null(kgroup_new(NULL, NULL, &gc, &cbs, NULL, err, sizeof(err)));
	ck_assert_msg(strstr(err, "instance id is empty") != NULL, "%s", err);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kgroup_fake");
	TCase *tc = tcase_create("kgroup");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_leader_join_heartbeat_leave);
	tcase_add_test(tc, test_member_id_required);
	tcase_add_test(tc, test_illegal_generation);
	tcase_add_test(tc, test_unknown_member);
	tcase_add_test(tc, test_fenced_instance);
	tcase_add_test(tc, test_not_coordinator);
	tcase_add_test(tc, test_rebalance_in_progress);
	tcase_add_test(tc, test_coordinator_loading);
	tcase_add_test(tc, test_silent_coordinator);
	tcase_add_test(tc, test_skip_assignment);
	tcase_add_test(tc, test_free_in_revoked);
	tcase_add_test(tc, test_config_checks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
