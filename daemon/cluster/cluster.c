/*
 * cluster.c: several mirrord instances as one (see cluster.h).
 *
 * Roles.  The group leader is the metadata writer: on joined() as leader
 * it promotes the metadata log (InitProducerId + claim: every earlier
 * writer is fenced by the broker), records the members (cluster-members)
 * and assigns the partitions (part-owner records, only those that change,
 * in one group), each in an exclusive turn of mstate (rebalance()), so
 * the loop never waits for the log.  A member that is not the leader, or
 * whose membership is revoked, demotes the log: it never appends again in
 * that role, and goes on tailing from where its model is.
 *
 * Assignment (lib/assign's rule): a partition whose destination leader is
 * a member's local broker goes to that member; otherwise it keeps a
 * current owner that is still a member; otherwise the least-loaded member.
 * The writer runs it again when a rebalance completes, when partitions
 * appear or leave STOPPED (mstate hook), and when destination leaders move
 * (pipeline leader hook), from a deferred event (hooks must not write).
 *
 * The request handler (writer): a follower's forwarded write is accepted
 * only from a member of the recorded generation (or a newer one the
 * writer has not recorded yet: a rebalance in flight) whose member id
 * matches, and every partition-scoped record in it only from the
 * partition's owner; then mstate_apply_forwarded_async() validates it in
 * the exclusive turn and writes all of it or nothing, the follower's REPLY
 * in the same group (fwd_arm()), and applies it once durable; fwd_done()
 * gives the answer to the log (mlog_kafka_request_done()).  The writer
 * reads the requests, and its own log, on the log's thread every
 * WRITER_POLL_MS: its loop waits for none of it (test_ha_loop_kafka.py).
 *
 * Followers tail the log every POLL_MS (mlog_kafka_poll, a Fetch on the
 * log's thread, the records applied on the loop when it is back); the
 * records they apply fire the mstate hooks, so a part-owner record
 * naming this instance starts the partition here (pipeline).
 *
 * Copying follows the membership's lease (kgroup.h): the partitions this
 * instance owns are written to only while no other member can have been
 * given them (pipeline_set_lease()).  A lease that runs out (the
 * coordinator unreachable, this process stopped) pauses them; an answered
 * heartbeat of the same generation resumes them at once (no other
 * generation was formed).  A revoked membership stops them at once; after
 * a lease that ran out or a revocation, the next generation resumes them
 * only once the model holds that generation's members record: the writer
 * appends it after every owner change of the generations before, so the
 * model then says which partitions are still this instance's.  The writer
 * keeps its role while its lease is out: a writer that took over claimed
 * the log, which fences it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "admin.h"
#include "assign.h"
#include "cluster.h"
#include "compat.h"
#include "cstatus.h"
#include "daemonconf.h"
#include "kcluster.h"
#include "kerr.h"
#include "kgroup.h"
#include "log.h"
#include "metrics.h"
#include "metrics_std.h"
#include "mlog.h"
#include "mlog_kafka.h"
#include "mstate.h"
#include "pipeline.h"

#define META_VERSION 1
#define POLL_MS 200
/* The writer reads the followers' requests this often (a Fetch of the
 * request topic that waits for nothing, on the log's thread): it bounds
 * what a follower's metadata write waits before the writer sees it. */
#define WRITER_POLL_MS 20
#define PROMOTE_RETRY_MS 1000
#define READY_TAIL_MS 30000      /* a follower whose last good poll is older is not ready */

enum role { ROLE_JOINING, ROLE_FOLLOWER, ROLE_WRITER };
static const char *const role_names[] = { "joining", "follower", "writer" };

struct cluster {
	struct event_base *base;
	const struct config *cfg;
	struct mstate *st;
	struct mlog *ml;
	struct pipeline *pl;
	struct admin *adm;
	struct metrics_std *ms;

	char instance_id[1025];
	char admin_addr[300];
	char http_addr[300];
	int32_t local_broker;       /* -1 none */

	struct kcluster *kc;        /* the pipeline's destination (borrowed) */
	struct kgroup *g;
	int started;

	enum role role;
	int32_t generation;         /* live generation, -1 none */
	char member_id[1025];
	char leader_member_id[1025];
	int is_leader;              /* of the live generation */
	int members_pending;        /* members to record after promotion */
	/* The lease (see the top): it ran out in the live generation
	 * (lapsed); copying waits for the members record of the live
	 * generation (need_proof); what stops copying, for the status. */
	int lapsed, need_proof;
	char pause_why[1024];
	int promoting;              /* mlog_kafka_promote_async() out */
	/* A follower whose members record names another member id of its
	 * instance (a static member's new process, see rejoin_if_stale()):
	 * the generation it asked a rebalance in (-1 none), and the count
	 * its member metadata carries. */
	int32_t asked_gen;
	uint32_t rejoins;
	struct mmember *joined_members; /* leader: the generation's members */
	size_t njoined;

	struct event *ev_poll, *ev_reassign, *ev_promote, *ev_status;
	struct cstatus *status;     /* the status topic */
	char status_topic[512];
	int reassign_pending;
	int64_t last_poll_ok_ms;    /* monotonic ms, -1 never */
	char poll_err[512];

	void (*leave_done)(void *arg);
	void *leave_arg;
	struct admin_cluster_view view;

	/* The writer: the forwarded request being written off the loop
	 * (mstate_apply_forwarded_async()), whose instance it came from. */
	int fwd_active;
	char fwd_inst[1025];
	/* The writer's rebalance records in the exclusive turn (rebalance()):
	 * one turn out (rb_busy), another assignment asked for meanwhile
	 * (rb_again); the turn writes the members (rb_members) or the
	 * owners (rb_nchg of rb_np partitions moved); rb_code, rb_msg: the
	 * operation's refusal, when it queued nothing. */
	int rb_busy, rb_again, rb_members, rb_code;
	size_t rb_nchg, rb_np;
	char rb_why[96], rb_msg[1024];
};

/* ---- member metadata ------------------------------------------------ */

/* Room for n more bytes after the len bytes of *p (capacity *cap). */
static int room(uint8_t **p, size_t len, size_t *cap, size_t n)
{
	uint8_t *np;

	if (len + n <= *cap)
		return 0;
	if ((np = realloc(*p, (len + n) * 2)) == NULL)
		return -1;
	*p = np;
	*cap = (len + n) * 2;
	return 0;
}

static int put_str(uint8_t **p, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);

	if (n > INT16_MAX || room(p, *len, cap, 2 + n) != 0)
		return -1;
	be16_store(*p + *len, (uint16_t)n);
	memcpy(*p + *len + 2, s, n);
	*len += 2 + n;
	return 0;
}

static int put_u32(uint8_t **p, size_t *len, size_t *cap, uint32_t v)
{
	if (room(p, *len, cap, 4) != 0)
		return -1;
	be32_store(*p + *len, v);
	*len += 4;
	return 0;
}

uint8_t *cluster_meta_encode(const struct cluster_member_meta *m,
    size_t *outlen)
{
	size_t cap = 64, len = 0;
	uint8_t *p = malloc(cap);

	if (p == NULL)
		return NULL;
	be16_store(p, META_VERSION);
	len = 2;
	if (put_str(&p, &len, &cap, m->instance_id) < 0 ||
	    put_u32(&p, &len, &cap, (uint32_t)m->local_broker_id) < 0 ||
	    put_str(&p, &len, &cap, m->admin_addr) < 0 ||
	    put_str(&p, &len, &cap, m->http_addr) < 0 ||
	    put_u32(&p, &len, &cap, m->rejoins) < 0)
		goto fail;
	*outlen = len;
	return p;
fail:
	free(p);
	return NULL;
}

static int get_str(const uint8_t *p, size_t len, size_t *at, char *out,
    size_t outlen, const char *what, char *err, size_t errlen)
{
	int16_t n;

	if (*at + 2 > len) {
		snprintf(err, errlen, "member metadata ends before the %s", what);
		return -1;
	}
	n = (int16_t)be16_load(p + *at);
	*at += 2;
	if (n < 0 || (size_t)n >= outlen || *at + (size_t)n > len) {
		snprintf(err, errlen, "member metadata: %s of %d bytes does not "
		    "fit", what, n);
		return -1;
	}
	memcpy(out, p + *at, (size_t)n);
	out[n] = '\0';
	if (memchr(out, '\0', (size_t)n) != NULL) {
		snprintf(err, errlen, "member metadata: %s holds a NUL byte", what);
		return -1;
	}
	*at += (size_t)n;
	return 0;
}

int cluster_meta_decode(const uint8_t *p, size_t len,
    struct cluster_member_meta *m, char *err, size_t errlen)
{
	size_t at = 2;
	uint16_t v;

	memset(m, 0, sizeof(*m));
	if (len < 2) {
		snprintf(err, errlen, "member metadata of %zu bytes", len);
		return -1;
	}
	v = be16_load(p);
	if (v != META_VERSION) {
		snprintf(err, errlen, "member metadata version %u (this mirrord "
		    "reads %d)", v, META_VERSION);
		return -1;
	}
	if (get_str(p, len, &at, m->instance_id, sizeof(m->instance_id),
	    "instance id", err, errlen) < 0)
		return -1;
	if (at + 4 > len) {
		snprintf(err, errlen, "member metadata ends before the local "
		    "broker id");
		return -1;
	}
	m->local_broker_id = (int32_t)be32_load(p + at);
	at += 4;
	if (get_str(p, len, &at, m->admin_addr, sizeof(m->admin_addr),
	    "admin address", err, errlen) < 0 ||
	    get_str(p, len, &at, m->http_addr, sizeof(m->http_addr),
	    "http address", err, errlen) < 0)
		return -1;
	if (at + 4 <= len)
		m->rejoins = be32_load(p + at);
	return 0;
}

void cluster_instance_id_of(const struct config *cfg, int admin_port,
    char *out, size_t outlen)
{
	char host[256];

	if (cfg->cluster_instance_id != NULL &&
	    cfg->cluster_instance_id[0] != '\0') {
		snprintf(out, outlen, "%s", cfg->cluster_instance_id);
		return;
	}
	if (gethostname(host, sizeof(host)) < 0 || host[0] == '\0')
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(out, outlen, "%s:%d", host, admin_port);
}

/* ---- metrics ---------------------------------------------------------- */

static void rb_cancel(struct cluster *c);
static uint8_t *member_meta(struct cluster *c, size_t *len);
static void schedule_reassign(struct cluster *c);

static void fwd_cancel(struct cluster *c)
{
	if (!c->fwd_active)
		return;
	c->fwd_active = 0;
	mstate_forwarded_cancel(c->st);
}

static void set_role(struct cluster *c, enum role r)
{
	/* A demoted writer's request in progress: the new writer answers
	 * it (its records may still land, with their REPLY; the tail then
	 * applies them). */
	if (r != ROLE_WRITER) {
		fwd_cancel(c);
		rb_cancel(c);
	}
	if (c->role != r)
		log_info("cluster: instance %s is now %s (generation %" PRId32 ")",
		    c->instance_id, role_names[r], c->generation);
	c->role = r;
	if (c->ev_poll != NULL && event_pending(c->ev_poll, EV_TIMEOUT, NULL)) {
		struct timeval tv = { 0, (r == ROLE_WRITER ? WRITER_POLL_MS :
		    POLL_MS) * 1000 };

		event_add(c->ev_poll, &tv);
	}
	if (c->pl != NULL)
		pipeline_set_controller(c->pl, r == ROLE_WRITER);
	if (c->ms == NULL)
		return;
	for (int i = 0; i < (int)ARRAY_SIZE(role_names); i++)
		metrics_gauge_set(metrics_series(MSTD(c->ms, CLUSTER_ROLE), 1,
		    (const char *[]){ role_names[i] }), i == (int)r ? 1 : 0);
}

static void collect_cluster(struct metric_family *f, void *arg)
{
	struct cluster *c = arg;
	const struct mmember *mv;
	size_t n = 0;
	int64_t pid = -1;
	int16_t epoch = -1;

	(void)f;
	metrics_gauge_set(METRICS_SERIES(MSTD(c->ms, CLUSTER_GENERATION)),
	    (double)c->generation);
	(void)mstate_members(c->st, &mv, &n);
	metrics_gauge_set(METRICS_SERIES(MSTD(c->ms, CLUSTER_MEMBERS)),
	    (double)n);
	if (mlog_kafka_is_writer(c->ml))
		mlog_kafka_writer(c->ml, &pid, &epoch);
	metrics_gauge_set(METRICS_SERIES(MSTD(c->ms, METADATA_WRITER_EPOCH)),
	    mlog_kafka_is_writer(c->ml) ? (double)epoch : -1.0);
}

/* ---- the lease: when this instance may copy --------------------------- */

static int32_t recorded_generation(struct cluster *c)
{
	const struct mmember *mv;
	size_t n = 0;

	return mstate_members(c->st, &mv, &n);
}

/* Tells the data plane until when it may write the partitions this
 * instance owns (the top of this file). */
static void lease_apply(struct cluster *c)
{
	const char *gid = c->cfg->cluster_group_id;
	const char *trouble = c->g != NULL ? kgroup_trouble(c->g) : "";
	int64_t until = 0;
	char why[1100];

	if (c->generation < 0) {
		snprintf(why, sizeof(why), "%s", c->pause_why[0] != '\0' ?
		    c->pause_why : "this instance is not a member of its group: "
		    "copying paused");
	} else if (c->need_proof && recorded_generation(c) < c->generation) {
		snprintf(why, sizeof(why), "instance %.200s is a member of "
		    "generation %" PRId32 " of group %.200s, which the metadata "
		    "log has not recorded yet: copying waits for it (partitions "
		    "may have moved while this instance was no proven member)",
		    c->instance_id, c->generation, gid);
	} else {
		if (c->need_proof)
			log_info("cluster: the members of generation %" PRId32
			    " are recorded: copying resumes", c->generation);
		c->need_proof = 0;
		until = kgroup_lease_until(c->g);
		snprintf(why, sizeof(why), "the membership of instance %.200s in "
		    "group %.200s (generation %" PRId32 ") is not proven since its "
		    "lease ran out (session timeout %" PRId64 " ms from the last "
		    "heartbeat answered)%s%.160s: copying paused, as another instance "
		    "may own its partitions by now", c->instance_id, gid,
		    c->generation, c->cfg->cluster_session_timeout_ms,
		    trouble[0] != '\0' ? "; " : "", trouble);
	}
	pipeline_set_lease(c->pl, until, why);
}

/* The group's lease was renewed or ran out (kgroup's lease()). */
static void g_lease(void *arg, int64_t until)
{
	struct cluster *c = arg;
	int held = until > clock_mono_ms();

	if (!held && !c->lapsed) {
		c->lapsed = 1;
		log_warnx("cluster: instance %s: membership of group %s not proven "
		    "for the session timeout: copying of its %zu partition(s) "
		    "paused until the coordinator answers%s%s", c->instance_id,
		    c->cfg->cluster_group_id, pipeline_owned_partitions(c->pl),
		    kgroup_trouble(c->g)[0] != '\0' ? ": " : "",
		    kgroup_trouble(c->g));
	} else if (held && c->lapsed) {
		c->lapsed = 0;
		log_info("cluster: instance %s: membership of group %s generation %"
		    PRId32 " proven again: copying resumes", c->instance_id,
		    c->cfg->cluster_group_id, c->generation);
	}
	lease_apply(c);
}

/* ---- assignment ------------------------------------------------------- */

/* The destination leader of p's partition as the pipeline last saw it. */
static int32_t dst_leader(struct cluster *c, const struct mtopic *t,
    int32_t p)
{
	return pipeline_destination_leader(c->pl, t->name, p);
}

/* Runs the assignment on the model and queues the owners that change
 * (in the exclusive turn's batch): rb_nchg of rb_np, rb_code. */
static void assign_queue(struct cluster *c, const char *why)
{
	const struct mmember *mv;
	size_t nm = 0, np = 0, cap = 0, nchg = 0;
	struct assign_member *am = NULL;
	struct assign_part *ap = NULL;
	struct mpart **parts = NULL;
	const char **owners = NULL;
	struct mpart **chg = NULL;
	const char **chg_owner = NULL;
	int32_t gen;
	char msg[1024];

	c->rb_nchg = c->rb_np = 0;
	gen = mstate_members(c->st, &mv, &nm);
	if (gen < 0 || nm == 0)
		return;
	am = calloc(nm, sizeof(*am));
	if (am == NULL)
		fatal("cluster: out of memory");
	for (size_t i = 0; i < nm; i++) {
		am[i].instance_id = mv[i].instance_id;
		am[i].local_broker_id = mv[i].local_broker_id;
	}
	for (size_t i = 0; i < mstate_mirror_count(c->st); i++) {
		struct mirror *m = mstate_mirror_at(c->st, i);

		for (size_t t = 0; t < m->ntopics; t++) {
			struct mtopic *tp = m->topics[t];

			for (int32_t p = 0; p < tp->npart; p++) {
				struct mpart *mp = tp->parts[p];

				if (mp->state == MPART_STOPPED)
					continue;
				if (np == cap) {
					size_t nc = cap == 0 ? 64 : cap * 2;
					void *x = realloc(ap, nc * sizeof(*ap));
					void *y = realloc(parts, nc * sizeof(*parts));

					if (x != NULL)
						ap = x;
					if (y != NULL)
						parts = y;
					if (x == NULL || y == NULL)
						fatal("cluster: out of memory");
					cap = nc;
				}
				memset(&ap[np], 0, sizeof(ap[np]));
				ap[np].mirror = m->name;
				ap[np].topic = tp->name;
				ap[np].partition = p;
				ap[np].leader = dst_leader(c, tp, p);
				ap[np].current = mp->owner;
				parts[np] = mp;
				np++;
			}
		}
	}
	owners = calloc(np + 1, sizeof(*owners));
	chg = calloc(np + 1, sizeof(*chg));
	chg_owner = calloc(np + 1, sizeof(*chg_owner));
	if (owners == NULL || chg == NULL || chg_owner == NULL)
		fatal("cluster: out of memory");
	if (assign_run(am, nm, ap, np, owners, msg, sizeof(msg)) != 0) {
		log_warnx("cluster: assignment (%s) failed: %s", why, msg);
		np = 0;
	}
	for (size_t i = 0; i < np; i++) {
		const char *cur = parts[i]->owner != NULL ? parts[i]->owner : "";
		const char *nw = owners[i] != NULL ? owners[i] : "";

		if (strcmp(cur, nw) == 0)
			continue;
		chg[nchg] = parts[i];
		chg_owner[nchg] = nw;
		nchg++;
	}
	if (nchg > 0) {
		c->rb_code = mpart_set_owners(c->st, chg, chg_owner, nchg, gen,
		    c->rb_msg, sizeof(c->rb_msg));
		c->rb_nchg = nchg;
		c->rb_np = np;
	}
	free(am);
	free(ap);
	free(parts);
	free(owners);
	free(chg);
	free(chg_owner);
}

/*
 * The writer's rebalance records, off the loop: the members of the
 * generation it leads (when they are to be recorded), then the partition
 * owners the assignment gives, each in an exclusive turn (the model then
 * holds every write before them, so the assignment reads the members just
 * recorded and every partition as it is).  One turn at a time: asked
 * again while one is out, the assignment runs once more after it.
 */
static void rb_ready(void *arg);
static void rb_done(void *arg, int code, const char *msg);

static void rebalance(struct cluster *c, const char *why)
{
	int r;

	if (c->role != ROLE_WRITER)
		return;
	if (c->rb_busy) {
		c->rb_again = 1;
		return;
	}
	snprintf(c->rb_why, sizeof(c->rb_why), "%s", why);
	c->rb_busy = 1;
	r = mstate_excl_begin(c->st, rb_ready, &c->rb_busy);
	if (r < 0) {
		c->rb_busy = 0;
		log_warnx("cluster: the assignment (%s) cannot take its turn to "
		    "write; trying again", why);
		schedule_reassign(c);
	} else if (r == 1) {
		rb_ready(&c->rb_busy);
	}
}

static void rb_ready(void *arg)
{
	struct cluster *c = container_of(arg, struct cluster, rb_busy);
	char msg[1024];
	int code, started = 0;

	c->rb_code = 0;
	c->rb_msg[0] = '\0';
	c->rb_nchg = 0;
	c->rb_members = 0;
	if (c->role != ROLE_WRITER) {
		/* Demoted while it waited: nothing to write. */
	} else if (c->members_pending) {
		/* A new cluster's first writer names it, in this turn. */
		if (mstate_ensure_cluster_id(c->st, msg, sizeof(msg)) != 0)
			log_warnx("cluster: %s", msg);
		c->members_pending = 0;
		c->rb_members = 1;
		c->rb_code = mstate_set_members(c->st, c->generation,
		    c->joined_members, c->njoined, c->rb_msg,
		    sizeof(c->rb_msg));
	} else {
		assign_queue(c, c->rb_why);
	}
	code = mstate_excl_commit(c->st, rb_done, &c->rb_busy, &started, msg,
	    sizeof(msg));
	if (!started)
		rb_done(&c->rb_busy, code, msg);
}

static void rb_done(void *arg, int code, const char *msg)
{
	struct cluster *c = container_of(arg, struct cluster, rb_busy);
	const struct mmember *mv;
	size_t nm = 0;
	int32_t gen = mstate_members(c->st, &mv, &nm);

	c->rb_busy = 0;
	if (c->rb_code != 0) {
		code = c->rb_code;
		msg = c->rb_msg;
	}
	if (c->rb_members) {
		c->rb_members = 0;
		if (code != 0) {
			log_warnx("cluster: recording the %zu members of generation "
			    "%" PRId32 " failed: %s: %s", c->njoined, c->generation,
			    kerr_name((int16_t)code), msg);
		} else {
			/* The members are recorded: assign among them. */
			c->rb_again = 0;
			rebalance(c, "rebalance");
			return;
		}
	} else if (c->rb_nchg > 0 && code != 0) {
		log_warnx("cluster: assigning %zu partition%s (%s) failed: %s: %s",
		    c->rb_nchg, c->rb_nchg == 1 ? "" : "s", c->rb_why,
		    kerr_name((int16_t)code), msg);
	} else if (c->rb_nchg > 0) {
		log_info("cluster: %zu partition%s of %zu assigned anew (%s, "
		    "generation %" PRId32 ", %zu member%s)", c->rb_nchg,
		    c->rb_nchg == 1 ? "" : "s", c->rb_np, c->rb_why, gen, nm,
		    nm == 1 ? "" : "s");
	}
	if (c->rb_again) {
		c->rb_again = 0;
		rebalance(c, "partitions or destination leaders changed");
	}
}

static void rb_cancel(struct cluster *c)
{
	if (!c->rb_busy)
		return;
	c->rb_busy = 0;
	c->rb_again = 0;
	c->rb_members = 0;
	mstate_excl_cancel(c->st, &c->rb_busy);
}

static void reassign_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;

	(void)fd;
	(void)what;
	c->reassign_pending = 0;
	rebalance(c, "partitions or destination leaders changed");
}

static void schedule_reassign(struct cluster *c)
{
	struct timeval tv = { 0, 100000 };

	if (c->role != ROLE_WRITER || c->reassign_pending)
		return;
	c->reassign_pending = 1;
	evtimer_add(c->ev_reassign, &tv);
}

/*
 * A static member's new process (this instance killed and started again
 * within the session timeout) takes its old membership over in the live
 * generation: Kafka's coordinator answers the JoinGroup of a known
 * group.instance.id in a Stable group with the current generation and a
 * new member id, without a rebalance (it rebalances only when the group's
 * protocol would change), so the writer never learns the new id, and it
 * accepts a request only from the member id it recorded for the instance.
 * Once the model holds the members of the live generation and they name
 * this instance under another member id, this instance joins again with
 * changed metadata (the rejoins count): for a known member that is not the
 * leader, that makes Kafka rebalance, and the writer records the next
 * generation's members, this process's id among them.  At most once a
 * generation.
 */
static void rejoin_if_stale(struct cluster *c)
{
	const struct mmember *me;
	uint8_t *meta;
	size_t len;

	if (c->g == NULL || c->generation < 0 || c->is_leader ||
	    c->asked_gen == c->generation ||
	    recorded_generation(c) != c->generation)
		return;
	me = mstate_member_find(c->st, c->instance_id);
	if (me == NULL || strcmp(me->member_id, c->member_id) == 0)
		return;
	c->asked_gen = c->generation;
	c->rejoins++;
	log_info("cluster: the members of generation %" PRId32 " name instance "
	    "%s as member %s, not %s (this process took its static membership "
	    "over without a rebalance): joining again so that the writer "
	    "records this member", c->generation, c->instance_id,
	    me->member_id, c->member_id);
	meta = member_meta(c, &len);
	kgroup_set_metadata(c->g, meta, len);
	free(meta);
}

static void on_mstate(void *arg, const struct mstate_event *ev)
{
	struct cluster *c = arg;

	switch (ev->kind) {
	case MSTATE_EV_TOPIC_ADDED:
	case MSTATE_EV_MIRROR_CREATED:
		schedule_reassign(c);
		break;
	case MSTATE_EV_STATE:
		if (ev->from == MPART_STOPPED || ev->to == MPART_STOPPED)
			schedule_reassign(c);
		break;
	case MSTATE_EV_MEMBERS:
		if (c->need_proof)
			lease_apply(c);
		rejoin_if_stale(c);
		break;
	default:
		break;
	}
}

static void on_leaders(void *arg)
{
	schedule_reassign(arg);
}

/* ---- roles -------------------------------------------------------------- */

/* Records the members of the generation this writer leads, then assigns. */
static void record_members(struct cluster *c)
{
	if (c->members_pending && c->role == ROLE_WRITER)
		rebalance(c, "rebalance");
}

static void promote_later(struct cluster *c, const char *err)
{
	struct timeval tv = { PROMOTE_RETRY_MS / 1000,
		(PROMOTE_RETRY_MS % 1000) * 1000 };

	log_warnx("cluster: leader of generation %" PRId32 " cannot become the "
	    "metadata writer: %s; trying again", c->generation, err);
	evtimer_add(c->ev_promote, &tv);
}

static void became_writer(struct cluster *c)
{
	set_role(c, ROLE_WRITER);
	record_members(c);
}

/* The log's promotion ended (off the loop: the claim and the read to the
 * log end ran on its thread).  A demotion meanwhile cancelled it. */
static void promoted(void *arg, int rc, const char *why)
{
	struct cluster *c = arg;

	c->promoting = 0;
	if (rc != 0) {
		promote_later(c, why);
		return;
	}
	became_writer(c);
}

static void try_promote(struct cluster *c)
{
	char err[1024];
	int r;

	if (!c->is_leader || c->generation < 0 || c->promoting)
		return;
	r = mlog_kafka_promote_async(c->ml, promoted, c, err, sizeof(err));
	if (r < 0)
		promote_later(c, err);
	else if (r == 1)
		became_writer(c);
	else
		c->promoting = 1;
}

/* Stops being the metadata writer, or becoming it. */
static void demote(struct cluster *c, const char *why)
{
	c->promoting = 0;
	mlog_kafka_demote(c->ml, why);
}

static void promote_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	try_promote(arg);
}

static void on_role(void *arg, int is_writer, const char *why)
{
	struct cluster *c = arg;

	if (is_writer) {
		set_role(c, ROLE_WRITER);
		return;
	}
	log_warnx("cluster: instance %s no longer writes the metadata log: %s",
	    c->instance_id, why != NULL ? why : "demoted");
	set_role(c, c->generation >= 0 ? ROLE_FOLLOWER : ROLE_JOINING);
	/* Fenced while this instance thought it led: the group's view is
	 * stale, so rejoin and let the coordinator say who leads. */
	if (c->is_leader && c->g != NULL)
		kgroup_rejoin(c->g, "fenced as the metadata writer");
}

static void free_joined(struct cluster *c)
{
	for (size_t i = 0; i < c->njoined; i++) {
		free(c->joined_members[i].instance_id);
		free(c->joined_members[i].member_id);
		free(c->joined_members[i].admin_addr);
		free(c->joined_members[i].http_addr);
	}
	free(c->joined_members);
	c->joined_members = NULL;
	c->njoined = 0;
}

static int g_assign(void *arg, int32_t generation,
    const struct kgroup_member *m, size_t n, uint8_t **out, size_t *outlen)
{
	(void)arg;
	(void)generation;
	(void)m;
	/* The assignment is in the metadata log (part-owner records), not in
	 * SyncGroup: every member gets an empty one. */
	for (size_t i = 0; i < n; i++) {
		out[i] = NULL;
		outlen[i] = 0;
	}
	return 0;
}

static void g_joined(void *arg, int32_t generation, const char *member_id,
    const char *leader_member_id, int is_leader,
    const struct kgroup_member *members, size_t nmembers,
    const uint8_t *assignment, size_t len)
{
	struct cluster *c = arg;

	(void)assignment;
	(void)len;
	c->generation = generation;
	snprintf(c->member_id, sizeof(c->member_id), "%s", member_id);
	snprintf(c->leader_member_id, sizeof(c->leader_member_id), "%s",
	    leader_member_id);
	c->is_leader = is_leader;
	/* A lease that ran out before this generation: partitions may have
	 * moved in one formed without this instance. */
	if (c->lapsed)
		c->need_proof = 1;
	c->lapsed = 0;
	lease_apply(c);
	metrics_counter_inc(METRICS_SERIES(MSTD(c->ms, CLUSTER_REBALANCES)));
	mlog_kafka_set_identity(c->ml, c->instance_id, member_id, generation);
	log_info("cluster: joined group %s generation %" PRId32 " as %s "
	    "(member %s%s)", c->cfg->cluster_group_id, generation,
	    is_leader ? "leader" : "follower", member_id,
	    is_leader ? "" : ", the leader writes the metadata log");
	if (!is_leader) {
		demote(c, "another member leads the group");
		set_role(c, ROLE_FOLLOWER);
		rejoin_if_stale(c);
		return;
	}
	free_joined(c);
	c->joined_members = calloc(nmembers + 1, sizeof(*c->joined_members));
	if (c->joined_members == NULL)
		fatal("cluster: out of memory");
	for (size_t i = 0; i < nmembers; i++) {
		struct cluster_member_meta mm;
		struct mmember *o = &c->joined_members[c->njoined];
		char err[256];

		if (cluster_meta_decode(members[i].meta, members[i].meta_len, &mm,
		    err, sizeof(err)) < 0) {
			log_warnx("cluster: member %s (instance %s) left out: %s",
			    members[i].member_id, members[i].instance_id, err);
			continue;
		}
		o->instance_id = strdup(mm.instance_id);
		o->member_id = strdup(members[i].member_id);
		o->local_broker_id = mm.local_broker_id;
		o->admin_addr = strdup(mm.admin_addr);
		o->http_addr = strdup(mm.http_addr);
		if (o->instance_id == NULL || o->member_id == NULL ||
		    o->admin_addr == NULL || o->http_addr == NULL)
			fatal("cluster: out of memory");
		c->njoined++;
	}
	c->members_pending = 1;
	try_promote(c);
}

static void g_revoked(void *arg, const char *why)
{
	struct cluster *c = arg;

	log_warnx("cluster: membership of group %s lost: %s",
	    c->cfg->cluster_group_id, why);
	c->generation = -1;
	c->is_leader = 0;
	c->members_pending = 0;
	c->need_proof = 1;
	c->lapsed = 0;
	snprintf(c->pause_why, sizeof(c->pause_why), "instance %.200s is not "
	    "a member of group %.200s since its membership was revoked "
	    "(%.160s): copying paused", c->instance_id,
	    c->cfg->cluster_group_id, why);
	lease_apply(c);
	demote(c, why);
	set_role(c, ROLE_JOINING);
}

/* ---- the writer's request handler ------------------------------------ */

/* How a forwarded request ended: counted, and a refusal logged. */
static void fwd_outcome(struct cluster *c, const char *instance_id,
    int code, const char *why)
{
	if (code != 0)
		log_warnx("cluster: request of instance %s refused: %s: %s",
		    instance_id, kerr_name((int16_t)code), why);
	metrics_counter_inc(metrics_series(MSTD(c->ms, CLUSTER_FORWARDED), 1,
	    (const char *[]){ code == 0 ? "accepted" : "refused" }));
}

/* The follower's REPLY joins the group of its records. */
static void fwd_arm(void *arg, int on)
{
	struct cluster *c = arg;

	mlog_kafka_reply_arm(c->ml, on);
}

static void fwd_done(void *arg, int code, const char *msg)
{
	struct cluster *c = arg;

	if (!c->fwd_active)
		return;
	c->fwd_active = 0;
	fwd_outcome(c, c->fwd_inst, code, msg);
	mlog_kafka_request_done(c->ml, code, msg);
}

static int on_request(void *arg, const char *instance_id,
    const char *member_id, int32_t generation, const struct mlog_rec *recs,
    size_t n, char *why, size_t whylen)
{
	struct cluster *c = arg;
	const struct mmember *mv, *me;
	size_t nm = 0;
	int32_t gen;
	int code, started;

	gen = mstate_members(c->st, &mv, &nm);
	me = mstate_member_find(c->st, instance_id);
	if (me == NULL) {
		snprintf(why, whylen, "instance %s is not a member of the group "
		    "as recorded (generation %" PRId32 ")", instance_id, gen);
		code = KERR_UNKNOWN_MEMBER_ID;
		goto out;
	}
	if (generation < gen || (generation == gen &&
	    strcmp(me->member_id, member_id) != 0)) {
		snprintf(why, whylen, "request of instance %s from generation %"
		    PRId32 " (member %s); the current generation is %" PRId32
		    " (member %s)", instance_id, generation, member_id, gen,
		    me->member_id);
		code = KERR_ILLEGAL_GENERATION;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct mpart *p = NULL;
		char err[512];
		int scope = mstate_record_scope(c->st, recs[i].type, recs[i].p,
		    recs[i].len, &p, err, sizeof(err));

		if (scope < 0) {
			snprintf(why, whylen, "record %zu of instance %s: %s", i,
			    instance_id, err);
			code = KERR_INVALID_REQUEST;
			goto out;
		}
		if (scope == MSTATE_SCOPE_PART &&
		    !mpart_owned_by(p, instance_id)) {
			snprintf(why, whylen, "partition %s-%" PRId32 " of mirror %s "
			    "is owned by instance %s (generation %" PRId32 "), not "
			    "by %s, which sent the request",
			    p->topic->name, p->index, p->topic->mirror->name,
			    p->owner != NULL && p->owner[0] != '\0' ? p->owner :
			    "(none)", p->owner_generation, instance_id);
			code = KERR_NOT_LEADER_OR_FOLLOWER;
			goto out;
		}
	}
	if (!mstate_async_ready(c->st)) {
		code = mstate_apply_forwarded(c->st, recs, n, why, whylen);
		goto out;
	}
	/* Off the loop: checked again and written in the exclusive turn,
	 * the REPLY in the records' group (fwd_arm()); fwd_done() answers. */
	snprintf(c->fwd_inst, sizeof(c->fwd_inst), "%s", instance_id);
	c->fwd_active = 1;
	code = mstate_apply_forwarded_async(c->st, recs, n, fwd_arm, fwd_done,
	    c, &started, why, whylen);
	if (started)
		return MLOG_KAFKA_PENDING;
	c->fwd_active = 0;
out:
	fwd_outcome(c, instance_id, code, why);
	return code;
}

/* ---- tailing ------------------------------------------------------------ */

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	char err[512];

	(void)fd;
	(void)what;
	if (mlog_kafka_poll(c->ml, 0, err, sizeof(err)) < 0) {
		if (strcmp(err, c->poll_err) != 0)
			log_warnx("cluster: reading the metadata log: %s", err);
		snprintf(c->poll_err, sizeof(c->poll_err), "%s", err);
		return;
	}
	c->poll_err[0] = '\0';
	c->last_poll_ok_ms = clock_mono_ms();
	if (c->role == ROLE_WRITER)
		record_members(c);
}

bool cluster_ready(void *arg, char *why, size_t whylen)
{
	struct cluster *c = arg;
	struct mlog_stats s;

	if (c->generation >= 0 && c->g != NULL && !kgroup_lease_held(c->g)) {
		const char *t = kgroup_trouble(c->g);

		snprintf(why, whylen, "membership of group %s (generation %"
		    PRId32 ") not proven: no heartbeat answered for the session "
		    "timeout (%" PRId64 " ms), %" PRId64 " s ago%s%s; copying "
		    "paused", c->cfg->cluster_group_id, c->generation,
		    c->cfg->cluster_session_timeout_ms, MAX(clock_mono_ms() -
		    kgroup_lease_until(c->g), 0) / 1000, t[0] != '\0' ? ": " :
		    "", t);
		return false;
	}
	if (c->generation >= 0 && c->need_proof &&
	    recorded_generation(c) < c->generation) {
		snprintf(why, whylen, "member of group %s generation %" PRId32
		    ", which the metadata log has not recorded yet: copying "
		    "waits for it", c->cfg->cluster_group_id, c->generation);
		return false;
	}
	if (c->role == ROLE_WRITER) {
		mlog_stats(c->ml, &s);
		if (s.broken || !mlog_kafka_is_writer(c->ml)) {
			snprintf(why, whylen, "the metadata writer's log refuses "
			    "writes");
			return false;
		}
		return true;
	}
	if (c->generation < 0) {
		snprintf(why, whylen, "not a member of group %s (%s)%s",
		    c->cfg->cluster_group_id,
		    c->g != NULL ? kgroup_state_name(c->g) : "not started",
		    c->g != NULL && kgroup_fenced(c->g) ? ": FENCED_INSTANCE_ID, "
		    "another process joined with the same instance id" : "");
		return false;
	}
	if (c->last_poll_ok_ms < 0 ||
	    clock_mono_ms() - c->last_poll_ok_ms > READY_TAIL_MS) {
		snprintf(why, whylen, "not tailing the metadata log%s%s",
		    c->poll_err[0] != '\0' ? ": " : "", c->poll_err);
		return false;
	}
	return true;
}

/* ---- admin view ------------------------------------------------------- */

static const struct mmember *writer_member(struct cluster *c)
{
	const struct mmember *mv;
	size_t n = 0;

	(void)mstate_members(c->st, &mv, &n);
	for (size_t i = 0; i < n; i++)
		if (c->leader_member_id[0] != '\0' &&
		    strcmp(mv[i].member_id, c->leader_member_id) == 0)
			return &mv[i];
	return NULL;
}

static int view_may_mutate(void *arg, char *msg, size_t msglen)
{
	struct cluster *c = arg;
	const struct mmember *w;

	if (c->role == ROLE_WRITER)
		return 1;
	w = writer_member(c);
	if (w != NULL)
		snprintf(msg, msglen, "instance %s does not write the metadata "
		    "log; the writer is instance %s at %s", c->instance_id,
		    w->instance_id, w->admin_addr);
	else
		snprintf(msg, msglen, "instance %s does not write the metadata "
		    "log and no writer is known yet (group %s is electing one); "
		    "try again", c->instance_id, c->cfg->cluster_group_id);
	return 0;
}

static size_t view_brokers(void *arg, struct admin_broker *out, size_t max,
    int32_t *controller_id)
{
	struct cluster *c = arg;
	const struct mmember *mv, *w;
	size_t n = 0, k = 0;

	(void)mstate_members(c->st, &mv, &n);
	w = writer_member(c);
	*controller_id = -1;
	for (size_t i = 0; i < n && k < max; i++) {
		const char *a = mv[i].admin_addr;
		const char *colon = strrchr(a, ':');
		size_t hl;

		if (colon == NULL)
			continue;
		hl = (size_t)(colon - a);
		if (hl > 1 && a[0] == '[' && a[hl - 1] == ']') {
			a++;
			hl -= 2;
		}
		if (hl == 0 || hl >= sizeof(out[k].host))
			continue;
		out[k].node_id = (int32_t)i;
		memcpy(out[k].host, a, hl);
		out[k].host[hl] = '\0';
		out[k].port = atoi(colon + 1);
		if (w == &mv[i])
			*controller_id = (int32_t)i;
		k++;
	}
	return k;
}

/* ---- the status topic (lag of every partition everywhere) ------------- */

/* The stalled reasons of one status snapshot, kept until it is encoded. */
struct reasons {
	char **v;
	size_t n, cap;
};

static const char *reasons_keep(struct reasons *k, const char *why)
{
	char *d;

	if (k->n == k->cap) {
		size_t nc = k->cap == 0 ? 16 : k->cap * 2;
		char **x = realloc(k->v, nc * sizeof(*x));

		if (x == NULL)
			return NULL;
		k->v = x;
		k->cap = nc;
	}
	if ((d = strdup(why)) == NULL)
		return NULL;
	k->v[k->n++] = d;
	return d;
}

static void reasons_free(struct reasons *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	struct cstatus_part *v = NULL;
	struct reasons keep = { NULL, 0, 0 };
	size_t n = 0, cap = 0;

	(void)fd;
	(void)what;
	for (size_t i = 0; i < mstate_mirror_count(c->st); i++) {
		struct mirror *m = mstate_mirror_at(c->st, i);

		for (size_t t = 0; t < m->ntopics; t++) {
			struct mtopic *tp = m->topics[t];

			for (int32_t p = 0; p < tp->npart; p++) {
				const struct mpart *mp = tp->parts[p];
				struct pipeline_live live;
				struct pipeline_status ps;
				int64_t src = -1, dst = -1, now = clock_wall_ms();

				if (mp->owner == NULL ||
				    strcmp(mp->owner, c->instance_id) != 0)
					continue;
				if (n == cap) {
					size_t nc = cap == 0 ? 64 : cap * 2;
					struct cstatus_part *x = realloc(v,
					    nc * sizeof(*x));

					if (x == NULL)
						fatal("cluster: out of memory");
					v = x;
					cap = nc;
				}
				pipeline_partition_offsets(c->pl, mp, &src, &dst);
				v[n].mirror = m->name;
				v[n].topic = tp->name;
				v[n].partition = p;
				v[n].src = src;
				v[n].dst = dst;
				v[n].lag = src >= 0 && dst >= 0 ? MAX(src - dst, 0) : -1;
				v[n].lag_ms = -1;
				v[n].src_ok_ms = v[n].caught_ms = -1;
				v[n].stalled_since = -1;
				v[n].reason = NULL;
				/* As DescribeMirrors computes them here. */
				if (pipeline_partition_live(c->pl, mp, &live) == 0 &&
				    live.lag >= 0)
					v[n].lag = live.lag;
				if (pipeline_partition_status(c->pl, mp, &ps) == 0) {
					v[n].lag_ms = ps.lag_ms;
					v[n].src_ok_ms = ps.source_offset_age_ms >= 0 ?
					    now - ps.source_offset_age_ms : -1;
					v[n].caught_ms = ps.caught_up_ms;
					if (ps.stalled) {
						v[n].stalled_since = ps.stalled_since_ms;
						v[n].reason = reasons_keep(&keep, ps.reason);
					}
				}
				n++;
			}
		}
	}
	cstatus_publish(c->status, v, n);
	reasons_free(&keep);
	free(v);
}

/* An owner's status older than this says nothing about now. */
static int64_t status_stale_ms(const struct cluster *c)
{
	return 3 * c->cfg->cluster_status_interval_ms + 10000;
}

static int view_numbers(void *arg, const struct mpart *p,
    struct admin_partition_numbers *o)
{
	struct cluster *c = arg;
	struct cstatus_part out;
	int64_t age, now = clock_wall_ms();

	if (c->status == NULL || p->owner == NULL || p->owner[0] == '\0' ||
	    strcmp(p->owner, c->instance_id) == 0)
		return 0;
	if (!cstatus_lookup(c->status, p->owner, p->topic->mirror->name,
	    p->topic->name, p->index, &out, &age))
		return 0;
	age = MAX(age, 0);
	o->src = out.src;
	o->dst = out.dst;
	o->lag = out.lag;
	/* The record is age ms old: a lagging partition lags that much more. */
	o->lag_ms = out.lag_ms > 0 ? out.lag_ms + age : out.lag_ms;
	o->src_age_ms = out.src_ok_ms >= 0 ? MAX(now - out.src_ok_ms, 0) : -1;
	o->caught_up_ms = out.caught_ms;
	o->stalled_since_ms = out.stalled_since;
	snprintf(o->reason, sizeof(o->reason), "%s", out.reason != NULL ?
	    out.reason : "");
	if (age > status_stale_ms(c) && o->reason[0] == '\0') {
		char when[40];
		time_t t = (time_t)((now - age) / 1000);
		struct tm tm;

		if (gmtime_r(&t, &tm) == NULL ||
		    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			snprintf(when, sizeof(when), "?");
		/* Its owner went quiet: nothing here is current. */
		snprintf(o->reason, sizeof(o->reason), "the instance copying it "
		    "(%s) has not reported since %s (%" PRId64 " s): its numbers "
		    "are as of then", p->owner, when, age / 1000);
		o->stalled_since_ms = now - age;
		if (o->lag_ms == 0)
			o->lag_ms = age;
	}
	return 1;
}

/* ---- start-up ------------------------------------------------------- */

/* 1 if host (numeric or a name) is one of this machine's addresses. */
static int host_is_local(const char *host, struct ifaddrs *ifa)
{
	struct addrinfo hints, *res = NULL, *r;
	int found = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (r = res; r != NULL && !found; r = r->ai_next)
		for (struct ifaddrs *i = ifa; i != NULL && !found; i = i->ifa_next) {
			if (i->ifa_addr == NULL ||
			    i->ifa_addr->sa_family != r->ai_family)
				continue;
			if (r->ai_family == AF_INET)
				found = memcmp(&((struct sockaddr_in *)(void *)
				    r->ai_addr)->sin_addr,
				    &((struct sockaddr_in *)(void *)
				    i->ifa_addr)->sin_addr, 4) == 0;
			else if (r->ai_family == AF_INET6)
				found = memcmp(&((struct sockaddr_in6 *)(void *)
				    r->ai_addr)->sin6_addr,
				    &((struct sockaddr_in6 *)(void *)
				    i->ifa_addr)->sin6_addr, 16) == 0;
		}
	freeaddrinfo(res);
	return found;
}

static void detect_local_broker(struct cluster *c)
{
	struct ifaddrs *ifa = NULL;
	int32_t found = -1;
	size_t matches = 0;
	char list[512] = "";

	if (getifaddrs(&ifa) != 0) {
		log_warnx("cluster: cannot list this host's addresses; no "
		    "destination broker is local (set cluster.local_broker_id)");
		return;
	}
	for (size_t i = 0; i < kcluster_broker_count(c->kc); i++) {
		int32_t node;
		const char *host, *rack;
		int port;

		if (kcluster_broker_at(c->kc, i, &node, &host, &port, &rack) != 0)
			continue;
		if (!host_is_local(host, ifa))
			continue;
		matches++;
		found = node;
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
		    "%s%" PRId32 " (%s:%d)", matches > 1 ? ", " : "", node, host,
		    port);
	}
	freeifaddrs(ifa);
	if (matches == 1) {
		c->local_broker = found;
		log_info("cluster: the local destination broker is %s", list);
	} else if (matches == 0) {
		log_info("cluster: no destination broker advertises an address "
		    "of this host; no broker is local (set "
		    "cluster.local_broker_id to name one)");
	} else {
		log_warnx("cluster: %zu destination brokers advertise addresses "
		    "of this host: %s; none is taken as local (set "
		    "cluster.local_broker_id to name one)", matches, list);
	}
}

/* This instance's member metadata (malloc'd). */
static uint8_t *member_meta(struct cluster *c, size_t *len)
{
	struct cluster_member_meta mm;
	uint8_t *meta;

	memset(&mm, 0, sizeof(mm));
	snprintf(mm.instance_id, sizeof(mm.instance_id), "%s", c->instance_id);
	mm.local_broker_id = c->local_broker;
	snprintf(mm.admin_addr, sizeof(mm.admin_addr), "%s", c->admin_addr);
	snprintf(mm.http_addr, sizeof(mm.http_addr), "%s", c->http_addr);
	mm.rejoins = c->rejoins;
	meta = cluster_meta_encode(&mm, len);
	if (meta == NULL)
		fatal("cluster: out of memory");
	return meta;
}

static void join(struct cluster *c)
{
	uint8_t *meta;
	size_t len;

	meta = member_meta(c, &len);
	log_info("cluster: instance %s (local broker %" PRId32 ", admin %s) "
	    "joining group %s", c->instance_id, c->local_broker, c->admin_addr,
	    c->cfg->cluster_group_id);
	kgroup_start(c->g, meta, len);
	free(meta);
}

static void refresh_cb(struct kcluster *cl, int err, const char *errstr,
    void *arg)
{
	struct cluster *c = arg;

	(void)cl;
	if (c->started)
		return;
	c->started = 1;
	if (err != 0)
		log_warnx("cluster: destination metadata: %s; no broker taken as "
		    "local", errstr);
	else
		detect_local_broker(c);
	join(c);
}

void cluster_start(struct cluster *c)
{
	struct timeval tv = { 0, (c->role == ROLE_WRITER ? WRITER_POLL_MS :
	    POLL_MS) * 1000 };

	event_add(c->ev_poll, &tv);
	{
		struct timeval st = {
			(time_t)(c->cfg->cluster_status_interval_ms / 1000),
			(suseconds_t)(c->cfg->cluster_status_interval_ms % 1000) * 1000 };

		event_add(c->ev_status, &st);
	}
	if (c->local_broker >= 0 || c->cfg->cluster_local_broker_id >= 0) {
		c->started = 1;
		join(c);
		return;
	}
	kcluster_refresh(c->kc, refresh_cb, c);
}

struct cluster *cluster_new(struct event_base *base, const struct config *cfg,
    struct mstate *st, struct mlog *ml, struct pipeline *pl,
    struct admin *adm, struct metrics_std *ms, int admin_port,
    int http_port, char *err, size_t errlen)
{
	struct cluster *c = calloc(1, sizeof(*c));
	struct kgroup_config gc;
	struct kgroup_cbs cbs = { g_assign, g_joined, g_revoked, g_lease };
	const char *ahost;
	int aport;

	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->base = base;
	c->cfg = cfg;
	c->st = st;
	c->ml = ml;
	c->pl = pl;
	c->adm = adm;
	c->ms = ms;
	c->generation = -1;
	c->asked_gen = -1;
	c->last_poll_ok_ms = -1;
	c->local_broker = (int32_t)cfg->cluster_local_broker_id;
	cluster_instance_id_of(cfg, admin_port, c->instance_id,
	    sizeof(c->instance_id));
	if (cfg->cluster_advertised_admin.host != NULL) {
		ahost = cfg->cluster_advertised_admin.host;
		aport = cfg->cluster_advertised_admin.port;
	} else {
		ahost = cfg->server_advertised.host;
		aport = cfg->server_advertised.port != 0 ?
		    cfg->server_advertised.port : admin_port;
	}
	snprintf(c->admin_addr, sizeof(c->admin_addr), "%s%s%s:%d",
	    strchr(ahost, ':') != NULL ? "[" : "", ahost,
	    strchr(ahost, ':') != NULL ? "]" : "", aport);
	if (cfg->metrics_listen.host != NULL && http_port > 0)
		snprintf(c->http_addr, sizeof(c->http_addr), "%s:%d",
		    cfg->metrics_listen.host, http_port);

	/* One client of the destination: the data plane's kcluster (its
	 * bootstrap, metadata, broker and control connections), created from
	 * the same destination.bootstrap_servers and destination.client. */
	c->kc = pipeline_destination_kcluster(pl);
	if (c->kc == NULL) {
		snprintf(err, errlen, "the data plane has no destination client");
		goto fail;
	}
	memset(&gc, 0, sizeof(gc));
	gc.group_id = cfg->cluster_group_id;
	gc.instance_id = c->instance_id;
	gc.session_timeout_ms = (int)cfg->cluster_session_timeout_ms;
	gc.rebalance_timeout_ms = (int)cfg->cluster_session_timeout_ms;
	gc.heartbeat_interval_ms = (int)cfg->cluster_heartbeat_interval_ms;
	c->g = kgroup_new(base, c->kc, &gc, &cbs, c, err, errlen);
	if (c->g == NULL)
		goto fail;
	c->ev_poll = event_new(base, -1, EV_PERSIST, poll_cb, c);
	c->ev_reassign = evtimer_new(base, reassign_cb, c);
	c->ev_promote = evtimer_new(base, promote_cb, c);
	c->ev_status = event_new(base, -1, EV_PERSIST, status_cb, c);
	if (c->ev_poll == NULL || c->ev_reassign == NULL ||
	    c->ev_promote == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(c->status_topic, sizeof(c->status_topic), "%s%s",
	    cfg->storage_kafka_topic, CSTATUS_SUFFIX);
	c->status = cstatus_new(base, c->kc, c->status_topic, c->instance_id,
	    (int)cfg->storage_kafka_timeout_ms,
	    (int)cfg->cluster_status_interval_ms, err, errlen);
	if (c->status == NULL || c->ev_status == NULL)
		goto fail;
	if (mstate_add_hook(st, on_mstate, c) != 0) {
		snprintf(err, errlen, "too many state hooks");
		goto fail;
	}
	/* Completions of the log's thread (its groups, the tail) come back
	 * through the loop. */
	mlog_set_event_base(ml, base);
	mlog_kafka_set_identity(ml, c->instance_id, "", -1);
	mlog_kafka_set_role_hook(ml, on_role, c);
	mlog_kafka_set_request_handler(ml, on_request, c);
	mlog_kafka_set_rebuild(ml, mstate_rebuild_fresh_cb,
	    mstate_rebuild_adopt_cb, mstate_rebuild_drop_cb, st);
	pipeline_set_instance(pl, c->instance_id);
	/* Nothing is written before this instance is a proven member whose
	 * generation's members are recorded. */
	c->need_proof = 1;
	snprintf(c->pause_why, sizeof(c->pause_why), "instance %.200s has not "
	    "joined group %.200s yet: copying waits for the membership",
	    c->instance_id, cfg->cluster_group_id);
	lease_apply(c);
	if (mstate_set_instance(st, c->instance_id) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	pipeline_set_leader_hook(pl, on_leaders, c);
	pipeline_set_destination_refresh_ms(pl, cfg->cluster_session_timeout_ms / 2);
	c->view.may_mutate = view_may_mutate;
	c->view.brokers = view_brokers;
	c->view.partition_numbers = view_numbers;
	admin_set_cluster(adm, &c->view, c);
	if (ms != NULL)
		metrics_family_on_collect(MSTD(ms, CLUSTER_GENERATION),
		    collect_cluster, c);
	set_role(c, mlog_kafka_is_writer(ml) ? ROLE_WRITER : ROLE_JOINING);
	return c;
fail:
	cluster_free(c);
	return NULL;
}

static void leave_done(void *arg)
{
	struct cluster *c = arg;

	if (c->leave_done != NULL)
		c->leave_done(c->leave_arg);
}

void cluster_leave(struct cluster *c, void (*done)(void *arg), void *arg)
{
	c->leave_done = done;
	c->leave_arg = arg;
	if (c->ev_poll != NULL)
		event_del(c->ev_poll);
	if (c->ev_status != NULL)
		event_del(c->ev_status);
	demote(c, "leaving the group (shutdown)");
	kgroup_leave(c->g, leave_done, c);
}

const char *cluster_instance_id(const struct cluster *c)
{
	return c->instance_id;
}

int cluster_is_writer(const struct cluster *c)
{
	return c->role == ROLE_WRITER;
}

void cluster_free(struct cluster *c)
{
	if (c == NULL)
		return;
	if (c->adm != NULL)
		admin_set_cluster(c->adm, NULL, NULL);
	fwd_cancel(c);
	rb_cancel(c);
	if (c->promoting)           /* its callback would find c freed */
		demote(c, "shutting down");
	cstatus_free(c->status);    /* before c->kc, which it uses */
	c->status = NULL;
	if (c->g != NULL)
		kgroup_free(c->g);
	c->kc = NULL;               /* the pipeline's: pipeline_free() */
	if (c->ev_poll != NULL)
		event_free(c->ev_poll);
	if (c->ev_reassign != NULL)
		event_free(c->ev_reassign);
	if (c->ev_promote != NULL)
		event_free(c->ev_promote);
	if (c->ev_status != NULL)
		event_free(c->ev_status);
	free_joined(c);
	free(c);
}
