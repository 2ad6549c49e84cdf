/*
 * owner_twin: two data planes in one process, for the ownership tests
 * (test/kafka/test_owner_handoff_kafka.py).
 *
 * Multi-instance mode hands a mirrored partition from one instance to
 * another by a part-owner record (doc/ha.md).  Two real mirrord
 * processes cannot share a file metadata log, and the group machinery that
 * runs them on a replicated one is wired elsewhere; so this program runs
 * the real data plane (daemon/pipeline*.c, unchanged) twice, as instances
 * "A" and "B" (pipeline_set_instance), each with its own connections and
 * producer state, over ONE state model on a file metadata log, and takes
 * ownership changes from its standard input.  Both see a record the moment
 * it is applied (a stronger follower than a real one tailing the log).
 *
 *   owner_twin CONFIG MIRROR SOURCE_BOOTSTRAP TOPIC PARTITIONS
 *
 * CONFIG is a mirrord.yaml (destination, storage.data_dir); the mirror and
 * topic are created on first start.  Commands, one a line; every answer
 * ends with a line "end":
 *   own ID|-   every partition of the topic to instance ID (- = nobody),
 *              one part-owner record each in one sync
 *   pause      PauseMirrorTopics of the topic (mstate_pause_topic)
 *   resume     ResumeMirrorTopics
 *   stats      "part I STATE owner O producer PID EPOCH SEQBASE leader L M"
 *              (L, M: the destination leader as instance A and B know it,
 *              pipeline_destination_leader()), then "records N" (metadata
 *              log records), then per instance "instance A owned N
 *              produces N records N leader_hooks N" (the calls of the
 *              pipeline_set_leader_hook() callback)
 *   trap TYPE N own ID|-
 *   trap TYPE N delete
 *              fault injection: the Nth metadata sync from now whose
 *              records include one of TYPE (an mrec type name, e.g.
 *              part-producer) behaves as a follower's write that the
 *              writer refused: before it "returns", the records another
 *              instance wrote in the meantime are applied live (hooks
 *              fire): every partition of the topic to ID (- nobody), or
 *              the mirror's deletion (every partition STOPPING, STOPPED,
 *              then the mirror-delete record); then it fails with
 *              NOT_LEADER_OR_FOLLOWER and nothing of the caller's records
 *              is kept.  Those injected records are applied to the model
 *              only (the file log never holds them).  The caller holds its
 *              partition, batches and model pointers across that sync: the
 *              pointer audit of pipe_int.h pl_part_kept(), under ASan.
 *   quit       graceful stop of both data planes
 *
 * stats also prints "trapped N" (traps fired so far).  The environment
 * variable OWNER_TWIN_TRAP="TYPE N own ID|-" (or "TYPE N delete") arms a
 * trap before the data planes start (their first writes: topic ids).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemonconf.h"
#include "kerr.h"
#include "log.h"
#include "kbuf.h"
#include "mlog.h"
#include "mrec.h"
#include "mstate.h"
#include "pipeline.h"
#include "secrets.h"

static const char *const NAMES[2] = { "A", "B" };

struct twin {
	struct event_base *base;
	struct config *cfg;
	struct mlog *ml;
	struct mstate *st;
	struct pipeline *pl[2];
	const char *mirror, *topic;
	int32_t gen;
	struct event *in_ev;
	int leader_hooks[2];
	char buf[4096];
	size_t len;
	int stopping;
	/* trap (see above) */
	const struct mlog_ops *ops;   /* the file backend's */
	struct mlog_ops wrap;
	int trap_type;                /* -1 none armed */
	int trap_left;                /* matching syncs until it fires */
	int trap_delete;
	char trap_owner[64];          /* "" nobody */
	int trap_match;               /* a record of trap_type is pending */
	int trapped;
};

static struct twin *the_twin;   /* the mlog wrappers get only the mlog */

static struct mtopic *the_topic(struct twin *t)
{
	return mirror_topic_find(mstate_mirror_find(t->st, t->mirror), t->topic);
}

/* ---- trap ------------------------------------------------------------ */

/* Applies one record live, as a follower's tail applies what another
 * instance wrote. */
static void inject(struct twin *t, const struct mrec *r)
{
	struct kw w;
	char err[512];
	uint8_t *buf;
	size_t len;

	kw_init(&w, 1u << 20);
	if (mrec_encode(r, &w, err, sizeof(err)) != 0 ||
	    (buf = kw_take(&w, &len)) == NULL) {
		kw_fini(&w);
		fatalx("trap: cannot encode a %s record: %s",
		    mrec_type_name(r->type), err);
	}
	if (mstate_apply_rec(t->st, &(struct mlog_rec){ .type = r->type,
	    .len = (uint32_t)len, .p = buf, .file = "trap", .live = 1 },
	    err, sizeof(err)) != 0)
		log_warnx("trap: the injected %s record does not apply: %s",
		    mrec_type_name(r->type), err);
	free(buf);
}

static void trap_fire(struct twin *t)
{
	struct mtopic *tp = the_topic(t);
	struct mrec r;

	t->trapped++;
	memset(&r, 0, sizeof(r));
	r.mirror = kstr_c(t->mirror);
	if (t->trap_delete) {
		/* As the writer's log holds a deletion: every partition
		 * STOPPING, then STOPPED, then the mirror's record. */
		log_info("trap: a metadata write applies the deletion of mirror %s "
		    "first", t->mirror);
		for (int k = 0; k < 2; k++)
			for (int32_t i = 0; tp != NULL && i < tp->npart; i++) {
				r.type = MREC_PART_STATE;
				r.topic = kstr_c(t->topic);
				r.partition = i;
				r.state = k == 0 ? MPART_STOPPING : MPART_STOPPED;
				r.retry = -1;
				r.off = -1;
				r.epoch = -1;
				r.str = kstr_c("trap: DeleteMirror on another instance");
				inject(t, &r);
			}
		memset(&r, 0, sizeof(r));
		r.mirror = kstr_c(t->mirror);
		r.type = MREC_MIRROR_DELETE;
		inject(t, &r);
		return;
	}
	log_info("trap: a metadata write applies part-owner records (every "
	    "partition to %s) first", t->trap_owner[0] ? t->trap_owner :
	    "nobody");
	for (int32_t i = 0; tp != NULL && i < tp->npart; i++) {
		r.type = MREC_PART_OWNER;
		r.topic = kstr_c(t->topic);
		r.partition = i;
		r.str = kstr_c(t->trap_owner);
		r.generation = ++t->gen;
		inject(t, &r);
	}
}

static int trap_append(struct mlog *ml, uint16_t type, const void *p,
    size_t len, char *err, size_t errlen)
{
	struct twin *t = the_twin;

	if (t->trap_type >= 0 && type == (uint16_t)t->trap_type)
		t->trap_match = 1;
	return t->ops->append(ml, type, p, len, err, errlen);
}

static void trap_discard(struct mlog *ml)
{
	the_twin->trap_match = 0;
	the_twin->ops->discard(ml);
}

static int trap_sync(struct mlog *ml, char *err, size_t errlen)
{
	struct twin *t = the_twin;

	if (t->trap_match && t->trap_type >= 0 && --t->trap_left <= 0) {
		t->trap_type = -1;
		t->trap_match = 0;
		trap_fire(t);
		t->ops->discard(ml);
		ml->sync_error = KERR_NOT_LEADER_OR_FOLLOWER;
		snprintf(err, errlen, "refused by the writer (trap): the "
		    "partition is not owned by the requester any more");
		return -1;
	}
	t->trap_match = 0;
	ml->sync_error = 0;
	return t->ops->sync(ml, err, errlen);
}

static int trap_arm(struct twin *t, const char *args, char *msg, size_t len)
{
	char type[64], n[16], what[16], who[64] = "";
	int k = sscanf(args, "%63s %15s %15s %63s", type, n, what, who);

	t->trap_type = -1;
	for (int ty = 1; ty < (int)MLOG_TYPE_RESERVED && k >= 3; ty++)
		if (mrec_type_name((uint16_t)ty) != NULL &&
		    strcmp(mrec_type_name((uint16_t)ty), type) == 0)
			t->trap_type = ty;
	if (t->trap_type < 0 || atoi(n) < 1 || (strcmp(what, "delete") != 0 &&
	    (strcmp(what, "own") != 0 || k != 4))) {
		t->trap_type = -1;
		snprintf(msg, len, "usage: trap TYPE N own ID|- | trap TYPE N "
		    "delete");
		return -1;
	}
	t->trap_left = atoi(n);
	t->trap_delete = strcmp(what, "delete") == 0;
	snprintf(t->trap_owner, sizeof(t->trap_owner), "%s",
	    strcmp(who, "-") == 0 ? "" : who);
	snprintf(msg, len, "armed on sync %d with a %s record", t->trap_left,
	    type);
	return 0;
}

static void stopped_cb(void *arg)
{
	struct twin *t = arg;

	if (--t->stopping == 0)
		event_base_loopexit(t->base, NULL);
}

static void leader_cb(void *arg)
{
	(*(int *)arg)++;
}

static void stats(struct twin *t)
{
	struct mtopic *tp = the_topic(t);
	struct mlog_stats s;

	for (int32_t i = 0; tp != NULL && i < tp->npart; i++) {
		const struct mpart *p = tp->parts[i];
		const struct mproducer *c = p->nproducers > 0 ?
		    &p->producers[p->nproducers - 1] : NULL;

		printf("part %d %s owner %s producer %" PRId64 " %d %" PRId64
		    " leader %d %d\n", (int)i, mpart_state_name(p->state),
		    p->owner != NULL ? p->owner : "-", c != NULL ? c->pid : -1,
		    c != NULL ? (int)c->epoch : -1, c != NULL ? c->seq_base : -1,
		    (int)pipeline_destination_leader(t->pl[0], t->topic, i),
		    (int)pipeline_destination_leader(t->pl[1], t->topic, i));
	}
	mlog_stats(t->ml, &s);
	printf("records %" PRIu64 "\n", s.records);
	printf("trapped %d\n", t->trapped);
	for (int k = 0; k < 2; k++) {
		struct pipeline_totals tot;

		pipeline_totals(t->pl[k], &tot);
		printf("instance %s owned %zu produces %" PRId64 " records %" PRId64
		    " leader_hooks %d\n", NAMES[k],
		    pipeline_owned_partitions(t->pl[k]), tot.produces, tot.records,
		    t->leader_hooks[k]);
	}
}

static void command(struct twin *t, char *line)
{
	struct mtopic *tp = the_topic(t);
	char msg[1024] = "";
	int code = 0;

	if (strncmp(line, "own ", 4) == 0 && tp != NULL) {
		struct mpart **parts = calloc((size_t)tp->npart, sizeof(*parts));
		const char **owners = calloc((size_t)tp->npart, sizeof(*owners));
		const char *who = strcmp(line + 4, "-") == 0 ? NULL : line + 4;

		for (int32_t i = 0; parts != NULL && owners != NULL &&
		    i < tp->npart; i++) {
			parts[i] = tp->parts[i];
			owners[i] = who;
		}
		code = parts != NULL && owners != NULL ? mpart_set_owners(t->st,
		    parts, owners, (size_t)tp->npart, ++t->gen, msg, sizeof(msg)) :
		    KERR_UNKNOWN_SERVER_ERROR;
		free(parts);
		free(owners);
		printf("own %d %s\n", code, msg);
	} else if (strcmp(line, "pause") == 0) {
		code = mstate_pause_topic(t->st, t->mirror, t->topic, msg,
		    sizeof(msg));
		printf("pause %d %s\n", code, msg);
	} else if (strcmp(line, "resume") == 0) {
		code = mstate_resume_topic(t->st, t->mirror, t->topic, msg,
		    sizeof(msg));
		printf("resume %d %s\n", code, msg);
	} else if (strncmp(line, "trap ", 5) == 0) {
		code = trap_arm(t, line + 5, msg, sizeof(msg));
		printf("trap %d %s\n", code, msg);
	} else if (strcmp(line, "stats") == 0) {
		stats(t);
	} else if (strcmp(line, "quit") == 0) {
		if (t->stopping == 0) {
			t->stopping = 2;
			pipeline_shutdown(t->pl[0], stopped_cb, t);
			pipeline_shutdown(t->pl[1], stopped_cb, t);
		}
	} else {
		printf("unknown command '%s'\n", line);
	}
	printf("end\n");
	fflush(stdout);
}

static void stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	struct twin *t = arg;
	ssize_t n;
	char *nl;

	(void)what;
	n = read(fd, t->buf + t->len, sizeof(t->buf) - 1 - t->len);
	if (n <= 0) {
		/* The test went away: stop. */
		event_del(t->in_ev);
		command(t, (char[]){ "quit" });
		return;
	}
	t->len += (size_t)n;
	t->buf[t->len] = '\0';
	while ((nl = strchr(t->buf, '\n')) != NULL) {
		*nl = '\0';
		command(t, t->buf);
		t->len -= (size_t)(nl + 1 - t->buf);
		memmove(t->buf, nl + 1, t->len + 1);
	}
	if (t->len == sizeof(t->buf) - 1)
		t->len = 0;   /* an overlong line: dropped */
}

int main(int argc, char **argv)
{
	struct config_errors errs;
	struct mlog_opts o;
	struct twin t;
	char err[1024];
	int32_t npart;

	if (argc != 6) {
		fprintf(stderr, "usage: owner_twin CONFIG MIRROR SOURCE_BOOTSTRAP "
		    "TOPIC PARTITIONS\n");
		return 2;
	}
	memset(&t, 0, sizeof(t));
	t.mirror = argv[2];
	t.topic = argv[4];
	npart = (int32_t)atoi(argv[5]);
	log_init("owner_twin", LOG_LVL_INFO, 0);
	config_errors_init(&errs);
	if (config_load(argv[1], &t.cfg, &errs) < 0) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.v[i].text);
		return 1;
	}
	config_errors_fini(&errs);
	secrets_set_config(t.cfg);
	if (mkdir(t.cfg->storage_data_dir, 0700) != 0 && errno != EEXIST)
		fatal("%s", t.cfg->storage_data_dir);
	mlog_opts_init(&o);
	o.dir = t.cfg->storage_data_dir;
	if ((t.ml = mlog_file_new(&o, err, sizeof(err))) == NULL ||
	    (t.st = mstate_new()) == NULL)
		fatalx("metadata log: %s", err);
	the_twin = &t;
	t.trap_type = -1;
	t.ops = t.ml->ops;
	t.wrap = *t.ml->ops;
	t.wrap.append = trap_append;
	t.wrap.sync = trap_sync;
	t.wrap.discard = trap_discard;
	t.ml->ops = &t.wrap;
	if (getenv("OWNER_TWIN_TRAP") != NULL &&
	    trap_arm(&t, getenv("OWNER_TWIN_TRAP"), err, sizeof(err)) != 0)
		fatalx("OWNER_TWIN_TRAP: %s", err);
	secrets_attach(t.st, t.cfg);
	if (mstate_open(t.st, t.ml, err, sizeof(err)) != 0 ||
	    secrets_start(t.st, err, sizeof(err)) != 0)
		fatalx("metadata log: %s", err);
	if (mstate_mirror_find(t.st, t.mirror) == NULL) {
		struct mcfg c = { (char *)"bootstrap.servers", argv[3] };

		if (mstate_create_mirror(t.st, t.mirror, &c, 1, err,
		    sizeof(err)) != 0 || mstate_add_topic(t.st, t.mirror, t.topic,
		    npart, err, sizeof(err)) != 0)
			fatalx("%s", err);
	}
	if ((t.base = event_base_new()) == NULL)
		fatalx("out of memory");
	for (int k = 0; k < 2; k++) {
		t.pl[k] = pipeline_new(t.base, t.st, t.cfg, NULL, err, sizeof(err));
		if (t.pl[k] == NULL)
			fatalx("data plane %s: %s", NAMES[k], err);
		pipeline_set_instance(t.pl[k], NAMES[k]);
		pipeline_set_leader_hook(t.pl[k], leader_cb, &t.leader_hooks[k]);
		pipeline_start(t.pl[k]);
	}
	t.in_ev = event_new(t.base, 0, EV_READ | EV_PERSIST, stdin_cb, &t);
	if (t.in_ev == NULL || event_add(t.in_ev, NULL) != 0)
		fatalx("cannot watch standard input");
	printf("ready\nend\n");
	fflush(stdout);
	event_base_dispatch(t.base);
	event_free(t.in_ev);
	for (int k = 0; k < 2; k++)
		pipeline_free(t.pl[k]);
	if (mstate_compact(t.st, err, sizeof(err)) != 0)
		log_warnx("%s", err);
	mstate_free(t.st);
	mlog_free(t.ml);
	secrets_fini();
	config_free(t.cfg);
	event_base_free(t.base);
	return 0;
}
