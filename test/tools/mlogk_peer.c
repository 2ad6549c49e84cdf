/*
 * mlogk_peer: one instance of the replicated metadata log (lib/mlog_kafka)
 * with the real mstate model on it, as a writer or a follower, driven line
 * by line on stdin by test/test_mlog_follow_kafka.py.
 *
 *   mlogk_peer BOOTSTRAP TOPIC INSTANCE writer|follower [TIMEOUT_MS]
 *       [COMPACT_RECORDS]
 *
 * Commands (one answer line each, "rc CODE MESSAGE" for the mutations):
 *   create M | add M T N | state M T P STATE WHY | anchor M T P SRC DST |
 *   epoch M T P EPOCH START | digest | dump | poll | promote | demote |
 *   role | autopoll on|off | compact | delete M | quit
 *   aanchor M T P SRC DST: the asynchronous anchor write, answered at once
 *   ("rc 0 started ID"), its completion an event line.
 *   acompact: a snapshot started as mstate starts one (mlog_compact_async()),
 *   answered at once, its completion an event line.
 *   apromote: the asynchronous promotion (mlog_kafka_promote_async()),
 *   answered at once, its end an event line; "promote" is the blocking
 *   one.
 * It runs on a libevent loop (the log's completions come back through it)
 * and polls the log every 50 ms (autopoll on, default): a follower tails
 * (a Fetch on the log's thread), the writer answers requests.
 * Asynchronous lines:
 *   event done ID CODE MESSAGE         (an aanchor's group completed)
 *   event compacted ID RC ERROR        (an acompact's snapshot ended)
 *   event promoted ID RC ERROR         (an apromote ended)
 *   event role writer|follower WHY      (the role hook)
 *   event hook KIND MIRROR[/TOPIC-P FROM->TO]   (mstate hooks, live only)
 *
 * The request handler (on the writer) applies a test ownership rule: a
 * record of a topic whose name holds "refuse" is refused (POLICY_VIOLATION,
 * naming the partition and its "owner"); everything else goes through
 * mstate_apply_forwarded_async(), as mirrord's writer does
 * (MLOGK_SYNC_HANDLER=1: mstate_apply_forwarded()).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/evp.h>

#include "kerr.h"
#include "log.h"
#include "mlog.h"
#include "mlog_kafka.h"
#include "mrec.h"
#include "mstate.h"

static struct mstate *st;
static struct mlog *ml;
static const char *instance;
static struct mrec_config *cfgbuf;

static void out(const char *fmt, ...) PRINTF_LIKE(1, 2);

static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Newlines out of messages: one answer is one line. */
static const char *oneline(char *s)
{
	for (char *p = s; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return s;
}

static void role_hook(void *arg, int is_writer, const char *why)
{
	char w[1024];

	(void)arg;
	snprintf(w, sizeof(w), "%s", why);
	out("event role %s %s", is_writer ? "writer" : "follower", oneline(w));
}

static void state_hook(void *arg, const struct mstate_event *ev)
{
	(void)arg;
	switch (ev->kind) {
	case MSTATE_EV_STATE:
		out("event hook state %s/%s-%d %s->%s", ev->mirror->name,
		    ev->topic->name, (int)ev->part->index,
		    mpart_state_name(ev->from), mpart_state_name(ev->to));
		break;
	case MSTATE_EV_TOPIC_ADDED:
		out("event hook topic %s/%s", ev->mirror->name, ev->topic->name);
		break;
	default:
		out("event hook %d %s", (int)ev->kind,
		    ev->mirror != NULL ? ev->mirror->name : "-");
		break;
	}
}

static void handler_arm(void *arg, int on)
{
	(void)arg;
	mlog_kafka_reply_arm(ml, on);
}

static void handler_done(void *arg, int code, const char *msg)
{
	(void)arg;
	mlog_kafka_request_done(ml, code, msg);
}

static int handler(void *arg, const char *inst, const char *member,
    int32_t generation, const struct mlog_rec *recs, size_t n, char *why,
    size_t whylen)
{
	char err[512];
	int code, started;

	(void)arg;
	(void)member;
	(void)generation;
	for (size_t i = 0; i < n; i++) {
		struct mrec r;

		if (mrec_decode(recs[i].type, recs[i].p, recs[i].len, &r, cfgbuf,
		    MREC_MAX_CONFIGS, err, sizeof(err)) != 0)
			continue;       /* mstate_apply_forwarded() says why */
		if (r.topic.len > 0 && memmem(r.topic.p, (size_t)r.topic.len,
		    "refuse", 6) != NULL) {
			snprintf(why, whylen, "partition %.*s-%d of mirror %.*s is "
			    "owned by instance other-owner, not %s (test rule)",
			    (int)r.topic.len, r.topic.p, (int)r.partition,
			    (int)r.mirror.len, r.mirror.p, inst);
			return KERR_POLICY_VIOLATION;
		}
	}
	if (getenv("MLOGK_SYNC_HANDLER") != NULL)
		return mstate_apply_forwarded(st, recs, n, why, whylen);
	/* As mirrord's writer: off the loop, answered later. */
	code = mstate_apply_forwarded_async(st, recs, n, handler_arm,
	    handler_done, NULL, &started, why, whylen);
	return started ? MLOG_KAFKA_PENDING : code;
}

static struct mpart *part(const char *m, const char *t, const char *p,
    char *msg, size_t len)
{
	struct mirror *mi = mstate_mirror_find(st, m);
	struct mtopic *tp = mi != NULL ? mirror_topic_find(mi, t) : NULL;
	int i = atoi(p);

	if (tp == NULL || i < 0 || i >= tp->npart) {
		snprintf(msg, len, "no partition %s/%s-%s here", m, t, p);
		return NULL;
	}
	return tp->parts[i];
}

static void digest(int full)
{
	char *d = mstate_dump(st);
	unsigned char md[32];
	unsigned int mdlen = 0;
	char hex[65];

	if (d == NULL) {
		out("digest error");
		return;
	}
	EVP_Digest(d, strlen(d), md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (full) {
		fputs(d, stdout);
		out("end");
	} else {
		out("digest %s %zu", hex, mstate_mirror_count(st));
	}
	free(d);
}

static int async_id;

static void async_done(void *arg, int code, const char *msg)
{
	char m[2048];

	snprintf(m, sizeof(m), "%s", msg != NULL ? msg : "");
	out("event done %d %d %s", (int)(intptr_t)arg, code, oneline(m));
}

static void compact_done(void *arg, int rc, int16_t sync_error,
    const char *err)
{
	char m[2048];

	(void)sync_error;
	snprintf(m, sizeof(m), "%s", err != NULL ? err : "");
	out("event compacted %d %d %s", (int)(intptr_t)arg, rc, oneline(m));
}

static void promoted(void *arg, int rc, const char *why)
{
	char m[2048];

	snprintf(m, sizeof(m), "%s", why != NULL ? why : "");
	out("event promoted %d %d %s", (int)(intptr_t)arg, rc, oneline(m));
}

static int command(char *line)
{
	char *argv[8], msg[4096] = "", *save = NULL;
	int argc = 0, code = -1;
	struct mpart *p;

	for (char *t = strtok_r(line, " \t\n", &save); t != NULL && argc < 8;
	    t = strtok_r(NULL, " \t\n", &save))
		argv[argc++] = t;
	if (argc == 0)
		return 0;
	if (strcmp(argv[0], "quit") == 0)
		return 1;
	if (strcmp(argv[0], "create") == 0 && argc == 2) {
		char cn[] = "bootstrap.servers", cv[] = "127.0.0.1:9";
		struct mcfg c = { cn, cv };
		code = mstate_create_mirror(st, argv[1], &c, 1, msg, sizeof(msg));
	} else if (strcmp(argv[0], "delete") == 0 && argc == 2) {
		code = mstate_delete_mirror(st, argv[1], msg, sizeof(msg));
	} else if (strcmp(argv[0], "add") == 0 && argc == 4) {
		code = mstate_add_topic(st, argv[1], argv[2], atoi(argv[3]), msg,
		    sizeof(msg));
	} else if (strcmp(argv[0], "state") == 0 && argc >= 5) {
		code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		if ((p = part(argv[1], argv[2], argv[3], msg, sizeof(msg))) != NULL)
			code = mpart_set_state(st, p, mpart_state_parse(argv[4]),
			    argc > 5 ? argv[5] : "test", msg, sizeof(msg));
	} else if (strcmp(argv[0], "anchor") == 0 && argc == 6) {
		code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		if ((p = part(argv[1], argv[2], argv[3], msg, sizeof(msg))) != NULL)
			code = mpart_add_anchor_async(st, p, atoll(argv[4]),
			    atoll(argv[5]), NULL, NULL, NULL, msg, sizeof(msg));
	} else if (strcmp(argv[0], "aanchor") == 0 && argc == 6) {
		/* Asynchronous: answers at once ("rc 0 started" or the
		 * refusal); "event done ID CODE MESSAGE" when its group
		 * completes. */
		int started = 0;

		code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		if ((p = part(argv[1], argv[2], argv[3], msg, sizeof(msg))) != NULL)
			code = mpart_add_anchor_async(st, p, atoll(argv[4]),
			    atoll(argv[5]), async_done, (void *)(intptr_t)
			    ++async_id, &started, msg, sizeof(msg));
		if (code == 0)
			snprintf(msg, sizeof(msg), "%s %d", started ? "started" :
			    "no-op", async_id);
	} else if (strcmp(argv[0], "epoch") == 0 && argc == 6) {
		code = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		if ((p = part(argv[1], argv[2], argv[3], msg, sizeof(msg))) != NULL)
			code = mpart_add_epoch(st, p, atoi(argv[4]), atoll(argv[5]),
			    msg, sizeof(msg));
	} else if (strcmp(argv[0], "digest") == 0) {
		digest(0);
		return 0;
	} else if (strcmp(argv[0], "dump") == 0) {
		digest(1);
		return 0;
	} else if (strcmp(argv[0], "poll") == 0) {
		int n = mlog_kafka_poll(ml, 0, msg, sizeof(msg));
		out("polled %d %s", n, oneline(msg));
		return 0;
	} else if (strcmp(argv[0], "promote") == 0) {
		code = mlog_kafka_promote(ml, msg, sizeof(msg));
		if (code == 0)
			code = mstate_ensure_cluster_id(st, msg, sizeof(msg));
	} else if (strcmp(argv[0], "apromote") == 0) {
		/* As mirrord's cluster promotes: answers at once ("rc 0
		 * started ID", or "rc 1" already the writer), "event promoted
		 * ID RC ERROR" when it ends. */
		code = mlog_kafka_promote_async(ml, promoted,
		    (void *)(intptr_t)++async_id, msg, sizeof(msg));
		if (code == 0)
			snprintf(msg, sizeof(msg), "started %d", async_id);
	} else if (strcmp(argv[0], "demote") == 0) {
		mlog_kafka_demote(ml, "asked by the test");
		code = 0;
	} else if (strcmp(argv[0], "role") == 0) {
		out("role %s", mlog_kafka_is_writer(ml) ? "writer" : "follower");
		return 0;
	} else if (strcmp(argv[0], "compact") == 0) {
		code = mstate_compact(st, msg, sizeof(msg));
	} else if (strcmp(argv[0], "acompact") == 0) {
		/* A snapshot as mstate starts one between groups (give it
		 * none in flight): answers at once, "event compacted ID RC
		 * ERROR" when it is written. */
		code = mlog_compact_async(ml, mstate_dump_records, st,
		    compact_done, (void *)(intptr_t)++async_id, msg,
		    sizeof(msg));
		if (code == 0)
			snprintf(msg, sizeof(msg), "started %d", async_id);
	} else {
		out("rc -1 unknown command %s (%d words)", argv[0], argc);
		return 0;
	}
	out("rc %d %s", code, oneline(msg));
	return 0;
}

/* The loop: stdin lines, and the log polled every 50 ms (autopoll). */
struct peer_loop {
	struct event_base *base;
	struct event *ev_in, *ev_poll;
	char line[4096];
	size_t have;
	int autopoll;
	char lasterr[2048];
};

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	struct peer_loop *pl = arg;
	ssize_t n;
	char *nl;

	(void)fd;
	(void)what;
	n = read(0, pl->line + pl->have, sizeof(pl->line) - 1 - pl->have);
	if (n <= 0) {
		event_base_loopbreak(pl->base);
		return;
	}
	pl->have += (size_t)n;
	pl->line[pl->have] = '\0';
	while ((nl = strchr(pl->line, '\n')) != NULL) {
		*nl = '\0';
		if (strcmp(pl->line, "autopoll off") == 0) {
			pl->autopoll = 0;
			out("rc 0 autopoll off");
		} else if (strcmp(pl->line, "autopoll on") == 0) {
			pl->autopoll = 1;
			out("rc 0 autopoll on");
		} else if (command(pl->line) != 0) {
			event_base_loopbreak(pl->base);
			return;
		}
		pl->have -= (size_t)(nl + 1 - pl->line);
		memmove(pl->line, nl + 1, pl->have + 1);
	}
	if (pl->have == sizeof(pl->line) - 1)
		pl->have = 0;
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct peer_loop *pl = arg;
	char err[2048];

	(void)fd;
	(void)what;
	if (pl->autopoll && mlog_kafka_poll(ml, 0, err, sizeof(err)) < 0 &&
	    strcmp(err, pl->lasterr) != 0) {
		out("event poll-error %s", oneline(err));
		memcpy(pl->lasterr, err, sizeof(pl->lasterr));
	}
}

int main(int argc, char **argv)
{
	struct mlog_opts o;
	struct mlog_kafka_opts ko;
	char err[2048];
	struct peer_loop pl = { .autopoll = 1 };
	struct timeval tick = { 0, 50000 };

	if (argc < 5) {
		fprintf(stderr, "usage: mlogk_peer BOOTSTRAP TOPIC INSTANCE "
		    "writer|follower [TIMEOUT_MS] [COMPACT_RECORDS]\n");
		return 2;
	}
	log_init("mlogk_peer", LOG_LVL_INFO, 0);
	instance = argv[3];
	cfgbuf = calloc(MREC_MAX_CONFIGS, sizeof(*cfgbuf));
	mlog_opts_init(&o);
	if (argc > 6)
		o.compact_records = strtoull(argv[6], NULL, 10);
	mlog_kafka_opts_init(&ko);
	ko.bootstrap = argv[1];
	ko.topic = argv[2];
	ko.replication_factor = 1;
	ko.min_insync_replicas = 1;
	ko.timeout_ms = argc > 5 ? atoi(argv[5]) : 10000;
	ko.follower = strcmp(argv[4], "follower") == 0;
	if ((pl.base = event_base_new()) == NULL ||
	    (ml = mlog_kafka_new(&o, &ko, err, sizeof(err))) == NULL ||
	    (st = mstate_new()) == NULL) {
		fprintf(stderr, "mlogk_peer: %s\n", err);
		return 1;
	}
	mlog_set_event_base(ml, pl.base);
	mlog_kafka_set_identity(ml, instance, "member-1", 1);
	mlog_kafka_set_request_handler(ml, handler, NULL);
	mlog_kafka_set_role_hook(ml, role_hook, NULL);
	mlog_kafka_set_rebuild(ml, mstate_rebuild_fresh_cb,
	    mstate_rebuild_adopt_cb, mstate_rebuild_drop_cb, st);
	mstate_add_hook(st, state_hook, NULL);
	if (mstate_open(st, ml, err, sizeof(err)) != 0) {
		out("open failed %s", oneline(err));
		return 1;
	}
	out("open %s", mlog_kafka_is_writer(ml) ? "writer" : "follower");
	pl.ev_in = event_new(pl.base, 0, EV_READ | EV_PERSIST, on_stdin, &pl);
	pl.ev_poll = event_new(pl.base, -1, EV_PERSIST, on_poll, &pl);
	if (pl.ev_in == NULL || pl.ev_poll == NULL ||
	    event_add(pl.ev_in, NULL) != 0 || event_add(pl.ev_poll, &tick) != 0) {
		fprintf(stderr, "mlogk_peer: cannot set up the loop\n");
		return 1;
	}
	event_base_dispatch(pl.base);
	event_free(pl.ev_in);
	event_free(pl.ev_poll);
	mstate_free(st);
	mlog_free(ml);
	event_base_free(pl.base);
	free(cfgbuf);
	return 0;
}
