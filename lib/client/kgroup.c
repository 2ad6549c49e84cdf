/*
 * kgroup.c: Kafka group membership on libevent (see kgroup.h).
 *
 * One step at a time.  g->seq numbers the step in progress: every request
 * carries the seq it was sent under, and an answer whose seq is no longer
 * current (the member moved on: a rejoin, a lost connection, leave) is
 * dropped.  Requests carry a small token (struct kgreq) that the answer's
 * callback frees; kgroup_free() detaches the tokens, so an answer arriving
 * on a kcluster connection after the group is gone finds g == NULL.
 *
 * Connections: g->conn is ours (kcluster_open_conn).  To find the
 * coordinator it goes to one broker of the metadata (round robin over
 * attempts); when that broker is the coordinator it stays, else it is
 * replaced by one to the coordinator's advertised address.  Losing it, or
 * a request timing out on it (kconn closes the connection), means finding
 * the coordinator again.
 *
 * Callbacks: g->busy counts calls into the user; kgroup_free() from inside
 * one marks the group and the outermost caller frees it when the callback
 * returns (cb_*() then return -1 and the caller returns at once).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kerr.h"
#include "kgroup.h"
#include "kproto.h"
#include "log.h"

#define KG_BACKOFF_MS 100       /* first retry */
#define KG_BACKOFF_MAX_MS 5000  /* retries of a failing step */
#define KG_FIND_HELD_MS 1000    /* finding the coordinator while a membership is held */
#define KG_FENCED_MAX_MS 60000  /* repeated fencing */
#define KG_JOIN_EXTRA_MS 5000   /* JoinGroup/SyncGroup deadline past the rebalance timeout */
#define KG_ARENA (4 << 20)      /* decoding one answer (a JoinGroup lists every member) */
#define KG_WHY 400

#define KGROUP_STATES(X) \
	X(INIT, "INIT") \
	X(FIND, "FIND_COORDINATOR") \
	X(CONNECT, "CONNECTING") \
	X(JOIN, "JOINING") \
	X(SYNC, "SYNCING") \
	X(STABLE, "STABLE") \
	X(BACKOFF, "BACKOFF") \
	X(LEAVE, "LEAVING") \
	X(LEFT, "LEFT")

enum kg_state {
#define X(e, s) KG_##e,
	KGROUP_STATES(X)
#undef X
	KG_STATE_COUNT
};

static const char *const state_names[] = {
#define X(e, s) [KG_##e] = s,
	KGROUP_STATES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(state_names) == KG_STATE_COUNT, "state table");

/* What the step timer does when it fires. */
enum kg_action { ACT_NONE, ACT_FIND, ACT_JOIN, ACT_HEARTBEAT, ACT_LEAVE_DONE };

/* What g->conn is for. */
enum kg_role { ROLE_NONE, ROLE_FIND, ROLE_COORD };

enum kg_kind { REQ_REFRESH, REQ_FIND, REQ_JOIN, REQ_SYNC, REQ_HEARTBEAT, REQ_LEAVE };

struct kgreq {
	struct kgroup *g;       /* NULL once the group is freed */
	struct kgreq *prev, *next;
	unsigned seq;
	int kind;
	int16_t version;
	int64_t sent_ms;        /* when it was handed to the connection */
};

struct kgroup {
	struct event_base *base;
	struct kcluster *cl;
	char *group_id;
	char *instance_id;      /* NULL: dynamic */
	int session_ms, rebalance_ms, hb_ms, req_ms;
	struct kgroup_cbs cbs;
	void *arg;
	uint8_t *meta;
	size_t meta_len;

	int state;
	int started, leaving;
	char *member_id;        /* never NULL; "" none */
	int32_t generation;     /* the live one, -1 none */
	char *leader_id;
	int is_leader;
	int active;             /* joined() was called, revoked() not yet */
	int32_t live_gen;       /* the generation joined() told of */
	int live_leader;
	int rejoin_pending;     /* rejoin once the step in progress ends */
	char reason[KG_WHY];    /* JoinGroup Reason (v8+) */

	/* coordinator */
	struct kconn *conn;
	int role;
	int32_t conn_node;      /* broker node g->conn goes to (-1 unknown) */
	int32_t coord_node;
	char *coord_host;
	int coord_port;
	unsigned fc_next;       /* round robin over brokers for FindCoordinator */

	unsigned seq;
	struct kgreq *reqs;
	int hb_inflight;
	int64_t hb_sent_ms;
	int64_t last_ok_ms;     /* last answer proving the membership */
	/* The lease: until lease_ms (monotonic) no other member can have
	 * been given this member's work (kgroup.h); lease_held while the
	 * lease callback last said so. */
	int64_t lease_ms;
	int lease_held;
	char trouble[KG_WHY];   /* why the coordinator cannot be reached, "" */

	int fails;              /* consecutive failures of the step */
	int fenced;             /* consecutive FENCED_INSTANCE_ID */

	struct event *ev_step;
	int action;
	struct event *ev_session;

	struct kgroup_member *members; /* the leader's view of the last JoinGroup */
	size_t nmembers;

	void (*leave_done)(void *arg);
	void *leave_arg;

	uint64_t rng;
	int busy;
	int freeing;
};

static void really_free(struct kgroup *g);

/* ---- small helpers --------------------------------------------------- */

static uint32_t kg_random(struct kgroup *g)
{
	/* xorshift64*: jitter only. */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return (uint32_t)((g->rng * 2685821657736338717ull) >> 32);
}

/* base * 2^(n-1), capped, with +-20% jitter. */
static int backoff(struct kgroup *g, int base, int cap, int n)
{
	int64_t ms = base;

	for (int i = 1; i < n && ms < cap; i++)
		ms *= 2;
	if (ms > cap)
		ms = cap;
	if (ms > 0)
		ms = ms * 8 / 10 + (int64_t)(kg_random(g) % (uint32_t)(ms * 4 / 10 + 1));
	return (int)ms;
}

static void set_state(struct kgroup *g, int st, const char *why)
{
	if (g->state == st)
		return;
	log_debug("group %s: %s -> %s (%s)", g->group_id, state_names[g->state],
	    state_names[st], why);
	g->state = st;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s != NULL ? s : "");

	if (p == NULL)
		fatalx("out of memory");
	return p;
}

static void set_str(char **dst, const char *s)
{
	char *p = xstrdup(s);

	free(*dst);
	*dst = p;
}

/* A kstr as a malloc'd C string ("" for null). */
static char *kstr_xdup(struct kstr s)
{
	char *p;

	if (s.p == NULL || s.len <= 0)
		return xstrdup("");
	if ((p = malloc((size_t)s.len + 1)) == NULL)
		fatalx("out of memory");
	memcpy(p, s.p, (size_t)s.len);
	p[s.len] = '\0';
	return p;
}

static void members_clear(struct kgroup *g)
{
	for (size_t i = 0; i < g->nmembers; i++) {
		free((char *)g->members[i].member_id);
		free((char *)g->members[i].instance_id);
		free((uint8_t *)g->members[i].meta);
	}
	free(g->members);
	g->members = NULL;
	g->nmembers = 0;
}

static int in_cb_enter(struct kgroup *g)
{
	g->busy++;
	return 0;
}

/* After a user callback: -1 if the group was freed meanwhile (nothing may
 * touch g any more), else 0. */
static int in_cb_leave(struct kgroup *g)
{
	if (--g->busy == 0 && g->freeing) {
		really_free(g);
		return -1;
	}
	return g->freeing ? -1 : 0;
}

/* ---- request tokens -------------------------------------------------- */

static struct kgreq *req_new(struct kgroup *g, int kind, int16_t version)
{
	struct kgreq *r = calloc(1, sizeof(*r));

	if (r == NULL)
		fatalx("out of memory");
	r->g = g;
	r->seq = g->seq;
	r->kind = kind;
	r->version = version;
	r->sent_ms = clock_mono_ms();
	r->next = g->reqs;
	if (g->reqs != NULL)
		g->reqs->prev = r;
	g->reqs = r;
	return r;
}

/* Unlinks and frees the token; returns its group if the answer is still
 * wanted (the group lives and the step is current), else NULL. */
static struct kgroup *req_done(struct kgreq *r)
{
	struct kgroup *g = r->g;
	int current;

	if (g == NULL) {
		free(r);
		return NULL;
	}
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		g->reqs = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	current = r->seq == g->seq && !g->freeing;
	free(r);
	return current ? g : NULL;
}

/* ---- timers and steps ------------------------------------------------ */

static void step_arm(struct kgroup *g, int action, int delay_ms)
{
	struct timeval tv;

	if (delay_ms < 0)
		delay_ms = 0;
	tv.tv_sec = delay_ms / 1000;
	tv.tv_usec = (delay_ms % 1000) * 1000;
	g->action = action;
	event_add(g->ev_step, &tv);
}

static void step_cancel(struct kgroup *g)
{
	event_del(g->ev_step);
	g->action = ACT_NONE;
}

/* Moves on from whatever was in flight: older answers become stale. */
static void step_new(struct kgroup *g)
{
	g->seq++;
	g->hb_inflight = 0;
	step_cancel(g);
}

static void conn_drop(struct kgroup *g)
{
	struct kconn *c = g->conn;

	g->conn = NULL;
	g->role = ROLE_NONE;
	g->conn_node = -1;
	if (c != NULL)
		kconn_free(c); /* fails its requests: stale by then */
}

/* The lease's length: the coordinator drops a member that is silent for
 * the session timeout, or that does not join a rebalance within the
 * rebalance timeout (which begins after an answer that showed none). */
static int lease_len(const struct kgroup *g)
{
	return g->session_ms < g->rebalance_ms ? g->session_ms : g->rebalance_ms;
}

/* The timer ends the lease (session_cb()). */
static void lease_arm(struct kgroup *g)
{
	int64_t left = g->lease_ms - clock_mono_ms();
	struct timeval tv;

	if (!g->active || !g->lease_held) {
		event_del(g->ev_session);
		return;
	}
	if (left < 0)
		left = 0;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)((left % 1000) * 1000);
	event_add(g->ev_session, &tv);
}

/* An answer came: the coordinator counts this member in (for the log). */
static void proved(struct kgroup *g)
{
	g->last_ok_ms = clock_mono_ms();
}

/*
 * An answer of the coordinator to a request sent at sent_ms proves the
 * membership of the live generation: the coordinator took the request
 * after sent_ms, and drops the member no earlier than the lease's length
 * after that.  tell: run the lease callback (not when joined() follows,
 * which reads kgroup_lease_until()).  -1 if the group was freed.
 */
static int lease_renew(struct kgroup *g, int64_t sent_ms, int tell)
{
	int64_t until = sent_ms + lease_len(g), now = clock_mono_ms();
	int64_t lapsed = g->lease_ms;
	int was = g->lease_held;

	if (until > g->lease_ms)
		g->lease_ms = until;
	g->trouble[0] = '\0';
	if (g->lease_ms <= now)
		return 0;       /* an answer older than the lease's length */
	g->lease_held = 1;
	lease_arm(g);
	if (!was && g->active && tell)
		log_info("group %s: membership of generation %" PRId32 " proven "
		    "again, %" PRId64 " ms after its lease ran out", g->group_id,
		    g->live_gen, lapsed > 0 ? now - lapsed : 0);
	if (!tell || g->cbs.lease == NULL || !g->active)
		return 0;
	in_cb_enter(g);
	g->cbs.lease(g->arg, g->lease_ms);
	return in_cb_leave(g);
}

/* Membership lost: revoked() once.  -1 if the group was freed. */
static int lose_membership(struct kgroup *g, const char *why)
{
	if (!g->active)
		return 0;
	g->active = 0;
	g->live_leader = 0;
	g->live_gen = -1;
	g->lease_ms = 0;
	g->lease_held = 0;
	event_del(g->ev_session);
	log_warnx("group %s: membership of member %s (instance %s) revoked: %s",
	    g->group_id, g->member_id[0] ? g->member_id : "-",
	    g->instance_id ? g->instance_id : "-", why);
	if (g->cbs.revoked == NULL)
		return 0;
	in_cb_enter(g);
	g->cbs.revoked(g->arg, why);
	if (in_cb_leave(g) < 0)
		return -1;
	return g->leaving ? -1 : 0; /* the callback left: nothing more */
}

static void leave_finish(struct kgroup *g, const char *how);

/*
 * The lease ran out without an answer proving the membership (the
 * coordinator unreachable, or this process stopped): another member may
 * have this member's work from now on.  The membership itself is the
 * coordinator's to end: the member keeps its generation and goes on
 * reaching the coordinator; a heartbeat it answers renews the lease, or
 * says the membership is gone (revoked, join again).
 */
static void session_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kgroup *g = arg;
	int64_t now = clock_mono_ms();

	(void)fd;
	(void)what;
	if (g->state == KG_LEAVE) {
		leave_finish(g, "LeaveGroup: no answer in time");
		return;
	}
	if (!g->active || !g->lease_held || g->leaving)
		return;
	if (now < g->lease_ms) {
		lease_arm(g);
		return;
	}
	g->lease_held = 0;
	log_warnx("group %s: membership of member %s (instance %s) in "
	    "generation %" PRId32 " not proven for %" PRId64 " ms (lease of %d "
	    "ms from the last heartbeat answered ran out)%s%s; reaching the "
	    "coordinator again", g->group_id, g->member_id[0] ? g->member_id :
	    "-", g->instance_id ? g->instance_id : "-", g->live_gen,
	    g->last_ok_ms > 0 ? now - g->last_ok_ms : 0, lease_len(g),
	    g->trouble[0] ? ": " : "", g->trouble);
	if (g->cbs.lease == NULL)
		return;
	in_cb_enter(g);
	g->cbs.lease(g->arg, g->lease_ms);
	(void)in_cb_leave(g);
}

/* Retry step `action` after a backoff; state BACKOFF.  Finding the
 * coordinator while a membership is held retries at least every second:
 * the lease runs meanwhile. */
static void retry_later(struct kgroup *g, int action, const char *why)
{
	int ms, cap = KG_BACKOFF_MAX_MS;

	g->fails++;
	if (action == ACT_FIND && g->active)
		cap = g->hb_ms < KG_FIND_HELD_MS ? (g->hb_ms > KG_BACKOFF_MS ?
		    g->hb_ms : KG_BACKOFF_MS) : KG_FIND_HELD_MS;
	ms = backoff(g, KG_BACKOFF_MS, cap, g->fails);
	step_new(g);
	set_state(g, KG_BACKOFF, why);
	step_arm(g, action, ms);
}

/* Membership lost for why: revoked, then joining again after a backoff. */
static void rejoin_later(struct kgroup *g, const char *why)
{
	if (lose_membership(g, why) == 0)
		retry_later(g, ACT_JOIN, why);
}

/* The coordinator is unknown or unreachable: find it again. */
static void coord_lost(struct kgroup *g, const char *why)
{
	char where[300];

	if (g->coord_host != NULL && g->coord_node >= 0)
		snprintf(where, sizeof(where), "coordinator broker %" PRId32
		    " (%s:%d)", g->coord_node, g->coord_host, g->coord_port);
	else
		snprintf(where, sizeof(where), "coordinator not found yet");
	snprintf(g->trouble, sizeof(g->trouble), "%s: %s", where, why);
	/* every 10th failure in a row at info: an outage is said, not spammed */
	if (g->fails % 10 == 0)
		log_info("group %s: %s: %s; finding it again (failure %d in a "
		    "row)", g->group_id, where, why, g->fails + 1);
	else
		log_debug("group %s: %s: %s; finding it again", g->group_id,
		    where, why);
	conn_drop(g);
	g->coord_node = -1;
	retry_later(g, ACT_FIND, why);
}

/*
 * Sends msg (api_key's kp_*_request) on g->conn, answered by done with a
 * fresh token of kind.  -1 with err set when it could not be queued (the
 * token is gone; the caller decides what the step does then).
 */
static int kg_send(struct kgroup *g, int kind, int16_t api_key, int v,
    const void *msg, int timeout_ms, kconn_resp_cb done, char *err,
    size_t errlen)
{
	struct kgreq *r = req_new(g, kind, (int16_t)v);

	if (kconn_send_msg(g->conn, api_key, (int16_t)v, msg, 0, timeout_ms,
	    done, r, err, errlen) == 0)
		return 0;
	r->g = NULL;
	req_done(r);
	return -1;
}

/*
 * The start every answer shares: decodes api_key's response at version into
 * resp with a new arena of arena_size bytes (*a, which the caller frees,
 * NULL included).  -1 with why set ("<Api>: <transport error>", or a
 * malformed answer, logged) when there is no usable answer: the caller
 * fails its step (coord_lost(), or finishes the leave).
 */
static int kg_answer(struct kgroup *g, int16_t api_key, int16_t version,
    int err, const char *errstr, struct kr *body, size_t arena_size,
    void *resp, struct karena **a, char *why, size_t whylen)
{
	const struct kp_api *api = kp_api_find(api_key);

	if (err != KCONN_E_OK) {
		snprintf(why, whylen, "%s: %s", api->name, errstr);
		return -1;
	}
	if ((*a = karena_new(arena_size)) == NULL)
		fatalx("out of memory");
	if (api->response_decode(body, *a, version, resp) < 0 || body->err) {
		snprintf(why, whylen, "%s v%d from %s: malformed answer (%s)",
		    api->name, version, kconn_name(g->conn),
		    body->why ? body->why : "?");
		log_warnx("group %s: %s", g->group_id, why);
		return -1;
	}
	return 0;
}

static void do_find(struct kgroup *g);
static void send_find(struct kgroup *g);
static void send_join(struct kgroup *g);
static void send_heartbeat(struct kgroup *g);
static void send_leave(struct kgroup *g);
static void leave_finish(struct kgroup *g, const char *how);

/*
 * A connection to the coordinator is ready.  A member still holding its
 * membership (the coordinator moved or the connection broke) only resumes
 * its heartbeats: the answer says whether the generation still stands
 * (else ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID: revoked, join again), and
 * a rejoin would make the leader's coordinator start a rebalance.
 */
static void coord_ready(struct kgroup *g)
{
	/* (a JoinGroup answered but no SyncGroup: the assignment of that
	 * generation is still to be had) */
	if (!g->active || g->rejoin_pending || g->generation != g->live_gen) {
		send_join(g);
		return;
	}
	log_info("group %s: coordinator %s:%d reached; resuming the heartbeats "
	    "of generation %" PRId32, g->group_id, g->coord_host, g->coord_port,
	    g->live_gen);
	step_new(g);
	set_state(g, KG_STABLE, "coordinator found again");
	send_heartbeat(g);
}

static void step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kgroup *g = arg;
	int action = g->action;

	(void)fd;
	(void)what;
	g->action = ACT_NONE;
	switch (action) {
	case ACT_FIND:
		do_find(g);
		break;
	case ACT_JOIN:
		if (g->conn != NULL && g->role == ROLE_COORD &&
		    kconn_is_ready(g->conn))
			send_join(g);
		else
			do_find(g);
		break;
	case ACT_HEARTBEAT:
		send_heartbeat(g);
		break;
	case ACT_LEAVE_DONE: {
		void (*done)(void *) = g->leave_done;

		g->leave_done = NULL;
		if (done != NULL) {
			in_cb_enter(g);
			done(g->leave_arg);
			in_cb_leave(g);
		}
		break;
	}
	default:
		break;
	}
}

/* ---- the coordinator connection -------------------------------------- */

static void conn_event(struct kconn *c, int event, int err, const char *errstr,
    void *arg)
{
	struct kgroup *g = arg;

	(void)err;
	if (c != g->conn)
		return;
	if (event == KCONN_EV_READY) {
		if (g->role == ROLE_FIND && g->state == KG_FIND)
			send_find(g);
		else if (g->role == ROLE_COORD && g->state == KG_CONNECT)
			coord_ready(g);
		else if (g->role == ROLE_COORD && g->state == KG_LEAVE)
			send_leave(g);
		return;
	}
	/* CLOSED: every request on it has been failed already. */
	g->conn = NULL;
	g->role = ROLE_NONE;
	kconn_free(c);
	if (g->state == KG_LEAVE) {
		leave_finish(g, errstr);
		return;
	}
	if (g->leaving || g->state == KG_LEFT || g->state == KG_INIT)
		return;
	coord_lost(g, errstr);
}

static void refresh_done(struct kcluster *cl, int err, const char *errstr,
    void *arg)
{
	struct kgroup *g = req_done(arg);

	(void)cl;
	if (g == NULL)
		return;
	if (err != KCONN_E_OK) {
		log_info("group %s: metadata of the cluster: %s", g->group_id,
		    errstr);
		retry_later(g, ACT_FIND, errstr);
		return;
	}
	do_find(g);
}

/* Finds the coordinator: a connection to one broker, FindCoordinator. */
static void do_find(struct kgroup *g)
{
	size_t n = kcluster_broker_count(g->cl);
	const char *host, *rack;
	int32_t node;
	int port;
	char err[512];

	if (g->leaving)
		return;
	step_new(g);
	conn_drop(g);
	set_state(g, KG_FIND, "finding the coordinator");
	if (!kcluster_has_metadata(g->cl) || n == 0) {
		kcluster_refresh(g->cl, refresh_done, req_new(g, REQ_REFRESH, 0));
		return;
	}
	kcluster_broker_at(g->cl, g->fc_next++ % n, &node, &host, &port, &rack);
	g->conn = kcluster_open_conn(g->cl, host, port, conn_event, g, err,
	    sizeof(err));
	if (g->conn == NULL) {
		log_info("group %s: FindCoordinator via broker %" PRId32 ": %s",
		    g->group_id, node, err);
		kcluster_refresh(g->cl, NULL, NULL); /* the broker may be gone */
		retry_later(g, ACT_FIND, err);
		return;
	}
	g->role = ROLE_FIND;
	g->conn_node = node;
	/* send_find() once the connection is ready (conn_event) */
}

static void find_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct kgreq *r = arg;
	int16_t version = r->version;
	struct kgroup *g = req_done(r);
	struct kp_find_coordinator_response resp;
	struct karena *a = NULL;
	char why[KG_WHY], e2[512];

	(void)c;
	if (g == NULL)
		return;
	if (kg_answer(g, KP_API_FIND_COORDINATOR, version, err, errstr, body,
	    KG_ARENA, &resp, &a, why, sizeof(why)) < 0) {
		coord_lost(g, why);
		goto out;
	}
	if (resp.error_code != 0) {
		snprintf(why, sizeof(why), "FindCoordinator: %s",
		    kerr_name(resp.error_code));
		log_info("group %s: %s from %s", g->group_id, why,
		    kconn_name(g->conn));
		snprintf(g->trouble, sizeof(g->trouble), "%.200s from %.150s",
		    why, kconn_name(g->conn));
		if (resp.error_code == KERR_GROUP_AUTHORIZATION_FAILED)
			log_errorx("group %s: the principal may not use the group "
			    "(GROUP_AUTHORIZATION_FAILED): it needs READ on the "
			    "group", g->group_id);
		conn_drop(g);
		retry_later(g, ACT_FIND, why);
		goto out;
	}
	g->coord_node = resp.node_id;
	free(g->coord_host);
	g->coord_host = kstr_xdup(resp.host);
	g->coord_port = resp.port;
	/* (g->fails goes on counting until the coordinator answers a group
	 * request: a coordinator named but unreachable is a failure too) */
	log_debug("group %s: coordinator is broker %" PRId32 " at %s:%d",
	    g->group_id, resp.node_id, g->coord_host, g->coord_port);
	if (resp.node_id == g->conn_node && g->conn != NULL &&
	    kconn_is_ready(g->conn)) {
		g->role = ROLE_COORD;
		coord_ready(g);
		goto out;
	}
	conn_drop(g);
	step_new(g);
	set_state(g, KG_CONNECT, "connecting to the coordinator");
	g->conn = kcluster_open_conn(g->cl, g->coord_host, g->coord_port,
	    conn_event, g, e2, sizeof(e2));
	if (g->conn == NULL) {
		coord_lost(g, e2);
		goto out;
	}
	g->role = ROLE_COORD;
	g->conn_node = resp.node_id;
out:
	karena_free(a);
}

static void send_find(struct kgroup *g)
{
	struct kp_find_coordinator_request req;
	char err[512];
	int v;

	v = kconn_pick_version(g->conn, KP_API_FIND_COORDINATOR, 0, 3);
	if (v < 0) {
		log_errorx("group %s: broker %s does not support FindCoordinator "
		    "v0-3", g->group_id, kconn_name(g->conn));
		conn_drop(g);
		retry_later(g, ACT_FIND, "FindCoordinator unsupported");
		return;
	}
	kp_find_coordinator_request_init(&req);
	req.key = kstr_c(g->group_id);
	req.key_type = 0;
	if (kg_send(g, REQ_FIND, KP_API_FIND_COORDINATOR, v, &req, g->req_ms,
	    find_done, err, sizeof(err)) != 0)
		coord_lost(g, err);
}

/* ---- JoinGroup ------------------------------------------------------- */

static void join_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg);

static void send_join(struct kgroup *g)
{
	struct kp_join_group_request req;
	struct kp_join_group_request_protocol proto;
	char err[512];
	int v;

	if (g->leaving)
		return;
	step_new(g);
	g->rejoin_pending = 0;
	v = kconn_pick_version(g->conn, KP_API_JOIN_GROUP, 5, 9);
	if (v < 0) {
		log_errorx("group %s: coordinator %s does not support JoinGroup "
		    "v5-9 (static membership needs v5, Kafka 2.3)", g->group_id,
		    kconn_name(g->conn));
		conn_drop(g);
		g->fails += 4; /* not going to change soon */
		retry_later(g, ACT_FIND, "JoinGroup v5+ unsupported");
		return;
	}
	set_state(g, KG_JOIN, g->reason[0] ? g->reason : "joining");
	kp_join_group_request_init(&req);
	req.group_id = kstr_c(g->group_id);
	req.session_timeout_ms = g->session_ms;
	req.rebalance_timeout_ms = g->rebalance_ms;
	req.member_id = kstr_c(g->member_id);
	req.group_instance_id = kstr_c(g->instance_id);
	req.protocol_type = kstr_c(KGROUP_PROTOCOL_TYPE);
	proto.name = kstr_c(KGROUP_PROTOCOL_NAME);
	proto.metadata.p = g->meta;
	proto.metadata.len = (int32_t)g->meta_len;
	req.protocols = &proto;
	req.protocols_n = 1;
	req.reason = g->reason[0] ? kstr_c(g->reason) : KSTR_NULL;
	log_debug("group %s: JoinGroup v%d member %s instance %s (%s)",
	    g->group_id, v, g->member_id[0] ? g->member_id : "-",
	    g->instance_id ? g->instance_id : "-",
	    g->reason[0] ? g->reason : "first join");
	if (kg_send(g, REQ_JOIN, KP_API_JOIN_GROUP, v, &req,
	    g->rebalance_ms + KG_JOIN_EXTRA_MS, join_done, err,
	    sizeof(err)) != 0)
		coord_lost(g, err);
}

static void sync_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg);

/* SyncGroup with these assignments (the leader's) or none. */
static void send_sync(struct kgroup *g,
    struct kp_sync_group_request_assignment *as, int32_t n)
{
	struct kp_sync_group_request req;
	char err[512];
	int v;

	step_new(g);
	v = kconn_pick_version(g->conn, KP_API_SYNC_GROUP, 3, 5);
	if (v < 0) {
		log_errorx("group %s: coordinator %s does not support SyncGroup "
		    "v3-5", g->group_id, kconn_name(g->conn));
		conn_drop(g);
		g->fails += 4;
		retry_later(g, ACT_FIND, "SyncGroup v3+ unsupported");
		return;
	}
	set_state(g, KG_SYNC, "joined, syncing");
	kp_sync_group_request_init(&req);
	req.group_id = kstr_c(g->group_id);
	req.generation_id = g->generation;
	req.member_id = kstr_c(g->member_id);
	req.group_instance_id = kstr_c(g->instance_id);
	req.protocol_type = kstr_c(KGROUP_PROTOCOL_TYPE);
	req.protocol_name = kstr_c(KGROUP_PROTOCOL_NAME);
	req.assignments = as;
	req.assignments_n = n;
	if (kg_send(g, REQ_SYNC, KP_API_SYNC_GROUP, v, &req,
	    g->rebalance_ms + KG_JOIN_EXTRA_MS, sync_done, err,
	    sizeof(err)) != 0)
		coord_lost(g, err);
}

/*
 * An error answer to JoinGroup, SyncGroup or Heartbeat that every one of
 * them handles alike.  Returns 1 if handled (or the group was freed), 0 if
 * the caller handles the code.
 */
static int group_error(struct kgroup *g, const char *api, int16_t code)
{
	char why[KG_WHY];
	int ms;

	snprintf(why, sizeof(why), "%s: %s", api, kerr_name(code));
	switch (code) {
	case KERR_NOT_COORDINATOR:
	case KERR_COORDINATOR_NOT_AVAILABLE:
		coord_lost(g, why);
		return 1;
	case KERR_COORDINATOR_LOAD_IN_PROGRESS:
		log_info("group %s: %s; again after a backoff", g->group_id, why);
		retry_later(g, g->state == KG_STABLE ? ACT_HEARTBEAT : ACT_JOIN, why);
		return 1;
	case KERR_UNKNOWN_MEMBER_ID:
	case KERR_ILLEGAL_GENERATION:
		snprintf(g->reason, sizeof(g->reason), "rejoin after %.300s", why);
		if (lose_membership(g, why) < 0)
			return 1;
		if (code == KERR_UNKNOWN_MEMBER_ID)
			set_str(&g->member_id, ""); /* the broker forgot us */
		log_info("group %s: %s; joining again", g->group_id, why);
		g->fails = 0;
		send_join(g);
		return 1;
	case KERR_FENCED_INSTANCE_ID:
		g->fenced++;
		ms = backoff(g, g->session_ms, KG_FENCED_MAX_MS, g->fenced);
		log_errorx("group %s: instance id %s is FENCED_INSTANCE_ID (%s): "
		    "another process joined with the same group.instance.id; "
		    "joining again in %d ms", g->group_id,
		    g->instance_id ? g->instance_id : "-", api, ms);
		snprintf(g->reason, sizeof(g->reason), "rejoin after %.300s", why);
		if (lose_membership(g, why) < 0)
			return 1;
		set_str(&g->member_id, "");
		step_new(g);
		set_state(g, KG_BACKOFF, why);
		step_arm(g, ACT_JOIN, ms);
		return 1;
	case KERR_REBALANCE_IN_PROGRESS:
		snprintf(g->reason, sizeof(g->reason), "%s", why);
		log_info("group %s: %s; joining again", g->group_id, why);
		send_join(g);
		return 1;
	default:
		return 0;
	}
}

static void join_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct kgreq *r = arg;
	int16_t version = r->version;
	struct kgroup *g = req_done(r);
	struct kp_join_group_response resp;
	struct kp_sync_group_request_assignment *as = NULL;
	uint8_t **out = NULL;
	size_t *outlen = NULL;
	struct karena *a = NULL;
	char why[KG_WHY];
	int32_t nas = 0;
	size_t nout = 0;
	int rc;

	(void)c;
	if (g == NULL)
		return;
	if (kg_answer(g, KP_API_JOIN_GROUP, version, err, errstr, body,
	    KG_ARENA, &resp, &a, why, sizeof(why)) < 0) {
		coord_lost(g, why);
		goto out;
	}
	if (resp.error_code == KERR_MEMBER_ID_REQUIRED) {
		/* KIP-394: join again with the id the broker made for us. */
		free(g->member_id);
		g->member_id = kstr_xdup(resp.member_id);
		log_debug("group %s: MEMBER_ID_REQUIRED: joining again as %s",
		    g->group_id, g->member_id);
		send_join(g);
		goto out;
	}
	if (resp.error_code != 0) {
		if (group_error(g, "JoinGroup", resp.error_code))
			goto out;
		snprintf(why, sizeof(why), "JoinGroup: %s", kerr_name(resp.error_code));
		log_errorx("group %s: %s (member %s, instance %s); joining again "
		    "after a backoff", g->group_id, why,
		    g->member_id[0] ? g->member_id : "-",
		    g->instance_id ? g->instance_id : "-");
		if (resp.error_code == KERR_INCONSISTENT_GROUP_PROTOCOL)
			log_errorx("group %s: the group is used by clients of "
			    "another protocol type than \"%s\" (a consumer "
			    "group of the same name?)", g->group_id,
			    KGROUP_PROTOCOL_TYPE);
		rejoin_later(g, why);
		goto out;
	}
	if (resp.protocol_name.p != NULL &&
	    !kstr_eq(resp.protocol_name, KGROUP_PROTOCOL_NAME)) {
		snprintf(why, sizeof(why), "JoinGroup chose protocol \"%.*s\", not "
		    "\"%s\"", (int)resp.protocol_name.len, resp.protocol_name.p,
		    KGROUP_PROTOCOL_NAME);
		log_errorx("group %s: %s", g->group_id, why);
		rejoin_later(g, why);
		goto out;
	}
	proved(g);
	free(g->member_id);
	g->member_id = kstr_xdup(resp.member_id);
	free(g->leader_id);
	g->leader_id = kstr_xdup(resp.leader);
	g->is_leader = strcmp(g->leader_id, g->member_id) == 0;
	/* The live generation is the new one from here: SyncGroup and the
	 * heartbeats use it.  (A member still active keeps its membership
	 * through the rebalance; joined() tells of the new generation.) */
	g->generation = resp.generation_id;
	members_clear(g);
	if (g->is_leader && resp.members_n > 0) {
		g->members = calloc((size_t)resp.members_n, sizeof(*g->members));
		if (g->members == NULL)
			fatalx("out of memory");
		g->nmembers = (size_t)resp.members_n;
		for (int32_t i = 0; i < resp.members_n; i++) {
			const struct kp_join_group_response_member *m = &resp.members[i];
			uint8_t *meta = NULL;

			if (m->metadata.len > 0) {
				if ((meta = malloc((size_t)m->metadata.len)) == NULL)
					fatalx("out of memory");
				memcpy(meta, m->metadata.p, (size_t)m->metadata.len);
			}
			g->members[i].member_id = kstr_xdup(m->member_id);
			g->members[i].instance_id = kstr_xdup(m->group_instance_id);
			g->members[i].meta = meta;
			g->members[i].meta_len = m->metadata.len > 0 ?
			    (size_t)m->metadata.len : 0;
		}
	}
	log_info("group %s: joined generation %" PRId32 " as %s (member %s, "
	    "leader %s, %d members known)%s", g->group_id, g->generation,
	    g->is_leader ? "leader" : "follower", g->member_id, g->leader_id,
	    (int)resp.members_n, resp.skip_assignment ? "; the broker keeps the "
	    "assignment (static leader rejoined)" : "");
	if (g->is_leader && !resp.skip_assignment && g->cbs.assign != NULL &&
	    g->nmembers > 0) {
		unsigned seq = g->seq;

		nout = g->nmembers;
		out = calloc(g->nmembers, sizeof(*out));
		outlen = calloc(g->nmembers, sizeof(*outlen));
		as = calloc(g->nmembers, sizeof(*as));
		if (out == NULL || outlen == NULL || as == NULL)
			fatalx("out of memory");
		in_cb_enter(g);
		rc = g->cbs.assign(g->arg, g->generation, g->members, g->nmembers,
		    out, outlen);
		if (in_cb_leave(g) < 0) {
			g = NULL;
			goto out;
		}
		if (seq != g->seq || g->leaving) /* the callback moved us on */
			goto out;
		if (rc != 0) {
			snprintf(why, sizeof(why), "the assignment of generation "
			    "%" PRId32 " failed", g->generation);
			log_errorx("group %s: %s; joining again after a backoff",
			    g->group_id, why);
			snprintf(g->reason, sizeof(g->reason), "%s", why);
			retry_later(g, ACT_JOIN, why);
			goto out;
		}
		for (size_t i = 0; i < g->nmembers; i++) {
			kp_sync_group_request_assignment_init(&as[i]);
			as[i].member_id = kstr_c(g->members[i].member_id);
			as[i].assignment.p = out[i] != NULL ? out[i] : (const uint8_t *)"";
			as[i].assignment.len = out[i] != NULL ? (int32_t)outlen[i] : 0;
		}
		nas = (int32_t)g->nmembers;
	}
	send_sync(g, as, nas);
out:
	for (size_t i = 0; out != NULL && i < nout; i++)
		free(out[i]);
	free(out);
	free(outlen);
	free(as);
	karena_free(a);
}

/* ---- SyncGroup ------------------------------------------------------- */

static void sync_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct kgreq *r = arg;
	int16_t version = r->version;
	int64_t sent = r->sent_ms;
	struct kgroup *g = req_done(r);
	struct kp_sync_group_response resp;
	struct karena *a = NULL;
	char why[KG_WHY];
	int was_active;
	unsigned seq;

	(void)c;
	if (g == NULL)
		return;
	if (kg_answer(g, KP_API_SYNC_GROUP, version, err, errstr, body,
	    KG_ARENA, &resp, &a, why, sizeof(why)) < 0) {
		coord_lost(g, why);
		goto out;
	}
	if (resp.error_code != 0) {
		if (group_error(g, "SyncGroup", resp.error_code))
			goto out;
		snprintf(why, sizeof(why), "SyncGroup: %s", kerr_name(resp.error_code));
		log_errorx("group %s: %s (generation %" PRId32 "); joining again "
		    "after a backoff", g->group_id, why, g->generation);
		rejoin_later(g, why);
		goto out;
	}
	proved(g);
	g->fails = 0;
	g->fenced = 0;
	g->reason[0] = '\0';
	was_active = g->active;
	g->active = 1;
	g->live_gen = g->generation;
	g->live_leader = g->is_leader;
	(void)lease_renew(g, sent, 0);  /* joined() reads it */
	step_new(g);
	set_state(g, KG_STABLE, "synced");
	step_arm(g, ACT_HEARTBEAT, g->hb_ms);
	g->hb_sent_ms = clock_mono_ms();
	log_info("group %s: generation %" PRId32 " live as %s (%s), assignment "
	    "%d bytes", g->group_id, g->generation,
	    g->is_leader ? "leader" : "follower", was_active ? "rebalanced" :
	    "new membership", resp.assignment.len > 0 ? resp.assignment.len : 0);
	seq = g->seq;
	if (g->cbs.joined != NULL) {
		in_cb_enter(g);
		g->cbs.joined(g->arg, g->generation, g->member_id, g->leader_id,
		    g->is_leader, g->is_leader ? g->members : NULL,
		    g->is_leader ? g->nmembers : 0,
		    resp.assignment.len > 0 ? resp.assignment.p : NULL,
		    resp.assignment.len > 0 ? (size_t)resp.assignment.len : 0);
		if (in_cb_leave(g) < 0)
			goto out; /* freed: a is ours, still released below */
	}
	if (g->seq == seq && g->rejoin_pending && !g->leaving)
		send_join(g);
out:
	karena_free(a);
}

/* ---- Heartbeat ------------------------------------------------------- */

static void hb_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct kgreq *r = arg;
	int16_t version = r->version;
	int64_t sent = r->sent_ms;
	struct kgroup *g = req_done(r);
	struct kp_heartbeat_response resp;
	struct karena *a = NULL;
	char why[KG_WHY];
	int64_t next;

	(void)c;
	if (g == NULL)
		return;
	g->hb_inflight = 0;
	if (kg_answer(g, KP_API_HEARTBEAT, version, err, errstr, body,
	    1 << 16, &resp, &a, why, sizeof(why)) < 0) {
		coord_lost(g, why);
		goto out;
	}
	/* REBALANCE_IN_PROGRESS: the coordinator still counts us in, but the
	 * rebalance began earlier and ends within its timeout from then
	 * without us unless we join: no longer lease. */
	if (resp.error_code == KERR_REBALANCE_IN_PROGRESS)
		proved(g);
	if (resp.error_code != 0) {
		if (group_error(g, "Heartbeat", resp.error_code))
			goto out;
		snprintf(why, sizeof(why), "Heartbeat: %s", kerr_name(resp.error_code));
		log_errorx("group %s: %s (generation %" PRId32 "); joining again",
		    g->group_id, why, g->generation);
		rejoin_later(g, why);
		goto out;
	}
	proved(g);
	g->fails = 0;
	next = g->hb_sent_ms + g->hb_ms - clock_mono_ms();
	step_arm(g, ACT_HEARTBEAT, next > 0 ? (int)next : 0);
	(void)lease_renew(g, sent, 1);  /* last: the callback may free g */
out:
	karena_free(a);
}

static void send_heartbeat(struct kgroup *g)
{
	struct kp_heartbeat_request req;
	char err[512];
	int v;

	if (g->state != KG_STABLE && g->state != KG_BACKOFF)
		return;
	if (g->conn == NULL || g->role != ROLE_COORD) {
		coord_lost(g, "no connection to the coordinator");
		return;
	}
	if (!g->active || g->rejoin_pending) {
		send_join(g);
		return;
	}
	set_state(g, KG_STABLE, "heartbeat");
	v = kconn_pick_version(g->conn, KP_API_HEARTBEAT, 3, 4);
	if (v < 0) {
		coord_lost(g, "the coordinator does not support Heartbeat v3-4");
		return;
	}
	kp_heartbeat_request_init(&req);
	req.group_id = kstr_c(g->group_id);
	req.generation_id = g->generation;
	req.member_id = kstr_c(g->member_id);
	req.group_instance_id = kstr_c(g->instance_id);
	g->hb_sent_ms = clock_mono_ms();
	g->hb_inflight = 1;
	if (kg_send(g, REQ_HEARTBEAT, KP_API_HEARTBEAT, v, &req, g->req_ms,
	    hb_done, err, sizeof(err)) != 0) {
		g->hb_inflight = 0;
		coord_lost(g, err);
	}
}

/* ---- LeaveGroup ------------------------------------------------------ */

static void leave_finish(struct kgroup *g, const char *how)
{
	step_new(g);
	conn_drop(g);
	event_del(g->ev_session);
	g->active = 0;
	g->live_leader = 0;
	g->live_gen = -1;
	g->lease_ms = 0;
	g->lease_held = 0;
	set_state(g, KG_LEFT, how);
	log_info("group %s: left (%s)", g->group_id, how);
	step_arm(g, ACT_LEAVE_DONE, 0);
}

static void leave_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct kgreq *r = arg;
	int16_t version = r->version;
	struct kgroup *g = req_done(r);
	struct kp_leave_group_response resp;
	struct karena *a = NULL;
	char how[KG_WHY];

	(void)c;
	if (g == NULL)
		return;
	if (kg_answer(g, KP_API_LEAVE_GROUP, version, err, errstr, body,
	    1 << 16, &resp, &a, how, sizeof(how)) < 0)
		goto out;
	snprintf(how, sizeof(how), "LeaveGroup: %s", kerr_name(resp.error_code));
	for (int32_t i = 0; resp.error_code == 0 && i < resp.members_n; i++)
		if (resp.members[i].error_code != 0)
			snprintf(how, sizeof(how), "LeaveGroup: member %.*s: %s",
			    (int)(resp.members[i].member_id.len > 0 ?
			    resp.members[i].member_id.len : 0),
			    resp.members[i].member_id.p ? resp.members[i].member_id.p : "",
			    kerr_name(resp.members[i].error_code));
out:
	karena_free(a);
	leave_finish(g, how);
}

static void send_leave(struct kgroup *g)
{
	struct kp_leave_group_request req;
	struct kp_leave_group_request_member_identity mi;
	char err[512];
	int v;

	v = kconn_pick_version(g->conn, KP_API_LEAVE_GROUP, 3, 5);
	if (v < 0) {
		leave_finish(g, "the coordinator does not support LeaveGroup v3-5");
		return;
	}
	kp_leave_group_request_init(&req);
	kp_leave_group_request_member_identity_init(&mi);
	req.group_id = kstr_c(g->group_id);
	mi.member_id = kstr_c(g->member_id);
	mi.group_instance_id = kstr_c(g->instance_id);
	mi.reason = kstr_c("the member stops");
	req.members = &mi;
	req.members_n = 1;
	if (kg_send(g, REQ_LEAVE, KP_API_LEAVE_GROUP, v, &req, g->req_ms,
	    leave_done, err, sizeof(err)) != 0)
		leave_finish(g, err);
}

void kgroup_leave(struct kgroup *g, void (*done)(void *arg), void *arg)
{
	char err[512];

	g->leave_done = done;
	g->leave_arg = arg;
	if (g->leaving)
		return;
	g->leaving = 1;
	step_new(g);
	event_del(g->ev_session);
	if (!g->started || g->member_id[0] == '\0' || g->coord_host == NULL) {
		leave_finish(g, g->member_id[0] == '\0' ? "no membership to leave" :
		    "the coordinator is unknown: the broker drops the member at "
		    "its session timeout");
		return;
	}
	set_state(g, KG_LEAVE, "leaving");
	{
		/* the whole leave is bounded: session_cb ends it */
		struct timeval tv = { g->req_ms / 1000, (g->req_ms % 1000) * 1000 };

		event_add(g->ev_session, &tv);
	}
	/* A JoinGroup held by the coordinator would hold the LeaveGroup behind
	 * it: a fresh connection unless this one is idle and ready. */
	if (g->conn != NULL && g->role == ROLE_COORD && kconn_is_ready(g->conn) &&
	    kconn_inflight_count(g->conn) == 0) {
		send_leave(g);
		return;
	}
	conn_drop(g);
	g->conn = kcluster_open_conn(g->cl, g->coord_host, g->coord_port,
	    conn_event, g, err, sizeof(err));
	if (g->conn == NULL) {
		leave_finish(g, err);
		return;
	}
	g->role = ROLE_COORD;
	g->conn_node = g->coord_node;
	/* send_leave() when ready; the connection's own deadlines bound it */
}

/* ---- public ---------------------------------------------------------- */

struct kgroup *kgroup_new(struct event_base *base, struct kcluster *cl,
    const struct kgroup_config *cfg, const struct kgroup_cbs *cbs,
    void *arg, char *err, size_t errlen)
{
	struct kgroup *g;

	if (cfg->group_id == NULL || cfg->group_id[0] == '\0') {
		snprintf(err, errlen, "group: the group id is empty");
		return NULL;
	}
	if (cfg->instance_id != NULL && cfg->instance_id[0] == '\0') {
		snprintf(err, errlen, "group %s: the instance id is empty",
		    cfg->group_id);
		return NULL;
	}
	if (cfg->session_timeout_ms <= 0 || cfg->heartbeat_interval_ms <= 0 ||
	    cfg->heartbeat_interval_ms >= cfg->session_timeout_ms) {
		snprintf(err, errlen, "group %s: the heartbeat interval (%d ms) "
		    "must be positive and below the session timeout (%d ms)",
		    cfg->group_id, cfg->heartbeat_interval_ms,
		    cfg->session_timeout_ms);
		return NULL;
	}
	if (cfg->rebalance_timeout_ms <= 0) {
		snprintf(err, errlen, "group %s: the rebalance timeout (%d ms) "
		    "must be positive", cfg->group_id, cfg->rebalance_timeout_ms);
		return NULL;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->base = base;
	g->cl = cl;
	g->group_id = xstrdup(cfg->group_id);
	g->instance_id = cfg->instance_id ? xstrdup(cfg->instance_id) : NULL;
	g->session_ms = cfg->session_timeout_ms;
	g->rebalance_ms = cfg->rebalance_timeout_ms;
	g->hb_ms = cfg->heartbeat_interval_ms;
	g->req_ms = g->session_ms < 3000 ? 3000 : g->session_ms > 30000 ?
	    30000 : g->session_ms;
	if (cbs != NULL)
		g->cbs = *cbs;
	g->arg = arg;
	g->state = KG_INIT;
	g->member_id = xstrdup("");
	g->generation = -1;
	g->live_gen = -1;
	g->conn_node = -1;
	g->coord_node = -1;
	g->rng = ((uint64_t)clock_mono_ms() << 20) ^ (uint64_t)getpid() ^
	    (uint64_t)(uintptr_t)g;
	if (g->rng == 0)
		g->rng = 0x9e3779b97f4a7c15ull;
	g->ev_step = evtimer_new(base, step_cb, g);
	g->ev_session = evtimer_new(base, session_cb, g);
	if (g->ev_step == NULL || g->ev_session == NULL) {
		snprintf(err, errlen, "out of memory");
		really_free(g);
		return NULL;
	}
	return g;
}

static void set_meta(struct kgroup *g, const uint8_t *meta, size_t len)
{
	uint8_t *p = NULL;

	if (len > 0) {
		if ((p = malloc(len)) == NULL)
			fatalx("out of memory");
		memcpy(p, meta, len);
	}
	free(g->meta);
	g->meta = p;
	g->meta_len = len;
}

void kgroup_start(struct kgroup *g, const uint8_t *meta, size_t len)
{
	set_meta(g, meta, len);
	if (g->started || g->leaving)
		return;
	g->started = 1;
	log_info("group %s: joining as instance %s (session %d ms, rebalance "
	    "%d ms, heartbeat %d ms)", g->group_id,
	    g->instance_id ? g->instance_id : "- (dynamic)", g->session_ms,
	    g->rebalance_ms, g->hb_ms);
	step_arm(g, ACT_FIND, 0);
}

void kgroup_rejoin(struct kgroup *g, const char *why)
{
	if (!g->started || g->leaving)
		return;
	snprintf(g->reason, sizeof(g->reason), "%s", why ? why : "rejoin");
	log_info("group %s: joining again: %s", g->group_id, g->reason);
	switch (g->state) {
	case KG_STABLE:
		/* send from the loop: callbacks never run inside kgroup_* */
		step_new(g);
		step_arm(g, ACT_JOIN, 0);
		break;
	default:
		/* after the step in progress (a JoinGroup in flight has the old
		 * metadata; a member finding its coordinator would only resume
		 * its heartbeats) */
		g->rejoin_pending = 1;
		break;
	}
}

void kgroup_set_metadata(struct kgroup *g, const uint8_t *meta, size_t len)
{
	set_meta(g, meta, len);
	kgroup_rejoin(g, "the member's metadata changed");
}

static void really_free(struct kgroup *g)
{
	while (g->reqs != NULL) {
		struct kgreq *r = g->reqs;

		g->reqs = r->next;
		r->g = NULL;
		r->prev = r->next = NULL;
	}
	conn_drop(g);
	if (g->ev_step != NULL)
		event_free(g->ev_step);
	if (g->ev_session != NULL)
		event_free(g->ev_session);
	members_clear(g);
	free(g->group_id);
	free(g->instance_id);
	free(g->member_id);
	free(g->leader_id);
	free(g->coord_host);
	free(g->meta);
	free(g);
}

void kgroup_free(struct kgroup *g)
{
	if (g == NULL)
		return;
	if (g->busy > 0) {
		/* inside one of our callbacks: stop everything now, free when
		 * the callback returns (in_cb_leave) */
		g->freeing = 1;
		step_new(g);
		event_del(g->ev_session);
		conn_drop(g);
		return;
	}
	really_free(g);
}

int32_t kgroup_generation(const struct kgroup *g)
{
	return g->active ? g->live_gen : -1;
}

int kgroup_is_leader(const struct kgroup *g)
{
	return g->active && g->live_leader;
}

const char *kgroup_state_name(const struct kgroup *g)
{
	return state_names[g->state];
}

const char *kgroup_member_id(const struct kgroup *g)
{
	return g->member_id;
}

int kgroup_fenced(const struct kgroup *g)
{
	return !g->active && g->fenced > 0;
}

int64_t kgroup_lease_until(const struct kgroup *g)
{
	return g->active ? g->lease_ms : 0;
}

int kgroup_lease_held(const struct kgroup *g)
{
	return g->active && g->lease_held && clock_mono_ms() < g->lease_ms;
}

const char *kgroup_trouble(const struct kgroup *g)
{
	return g->trouble;
}
