/*
 * mlog_kafka_async.c: the replicated metadata log off the loop thread:
 * ops->sync_async and ops->wait for the writer and the
 * follower, and the follower's tail, with their network I/O on one thread
 * of the log's own.
 *
 * The I/O thread runs jobs in order, each exactly as the synchronous paths
 * do (its requests are kconn requests on the log's network thread,
 * mlog_kafka_net.c, the I/O thread waiting for their answers):
 *   PRODUCE  the writer's group: one batch, acks=all (mk_produce_frames);
 *   REQUEST  a follower's group: one record to the request topic;
 *   FETCH    the follower's tail: one Fetch from the offset after the last
 *            record read, the records copied out of the response;
 *   EMPTY    a group with nothing to write (completes in order);
 *   PEEK     the writer's look at its log after its own records (from
 *            where the jobs before it left the read position): any record
 *            there is another writer's, read and applied by the loop
 *            once the thread is idle (mlog_kafka_poll());
 *   REQFETCH the writer's Fetch of the request topic from the first
 *            request not answered, the records copied out; the loop hands
 *            them to the request handler one at a time (mk_rq_pump()),
 *            and a REPLY goes into the accepted records' group (PRODUCE)
 *            or alone (a PRODUCE of its own);
 *   SNAPSHOT the writer's snapshot (mk_compact_async()): the model's
 *            records, read on the loop between groups, written after the
 *            groups before it and before the ones after it, then the
 *            records it replaces trimmed (mk_snap_write());
 *   PROMOTE  a follower becoming the writer (mlog_kafka_promote_async()):
 *            InitProducerId, the claim, the log end after it
 *            (mk_promote_claim()); the tail's FETCHes then read up to that
 *            end, and the loop switches roles once the thread is idle
 *            (mk_promo_step());
 *   DONE     a result known already, handed back in order.
 * Finished jobs go back to the loop thread (a pipe read by an event of the
 * log's event base; without one, mlog_kafka_poll() and ops->wait collect
 * them), which does everything else: applies fetched records through the
 * open's apply callback (live, in log order), runs the groups' done in
 * order (mlog_group_done()), and takes the fence or a broken log into
 * account.  A follower's group completes when the tail reads the writer's
 * REPLY to its request (or fails with "outcome unknown" past
 * storage.kafka.timeout_ms, the log staying usable, as mlog_sync() does).
 *
 * Ownership: while a job is queued or running, the loop thread does not
 * touch the connections, the producer state (pid, epoch, sequence) or the
 * read position; every blocking path (mlog_sync(), mlog_compact(),
 * promote, demote, the writer's poll, free) first waits for the thread to
 * be idle (mk_quiesce()).  A fence or failure met on the thread is only
 * recorded in the job and applied on the loop thread.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "compat.h"
#include "kerr.h"
#include "log.h"
#include "mlog_kafka_int.h"

enum { JOB_PRODUCE, JOB_REQUEST, JOB_FETCH, JOB_EMPTY, JOB_PEEK,
	JOB_REQFETCH, JOB_SNAPSHOT, JOB_PROMOTE, JOB_DONE };

/* Waits this long on the broker for the REPLY of a request (the thread's
 * Fetch; the loop is not waiting). */
#define REPLY_FETCH_WAIT_MS 100
/* A request the writer refused for the requester's identity is sent again
 * once the identity changed, or after this while it has not. */
#define RESEND_MS 1000
#define RESEND_MAX 20

_Static_assert(MLOG_E_RESEND == KERR_REBALANCE_IN_PROGRESS,
    "MLOG_E_RESEND is Kafka's REBALANCE_IN_PROGRESS");

struct mk_job {
	struct mk_job *next;
	int kind;
	/* PRODUCE, REQUEST: the group */
	uint8_t *buf;
	size_t len;
	uint32_t count;
	mlog_done_fn done;
	void *arg;
	uint64_t req_id;
	int32_t generation;      /* REQUEST: the identity when it was made */
	char *member_id, *instance_id;
	int64_t deadline;
	int replied;
	int16_t reply_error;
	char *reply_msg;
	/* REQUEST refused for its identity: sent again (resend_refused()) */
	int resends;
	int64_t refused_ms;
	/* PRODUCE (writer): the last frame is the REPLY of the request at
	 * reply_off (it joined the group, or is the whole group) */
	int reply;
	int64_t reply_off;
	/* FETCH, PEEK, REQFETCH */
	int64_t from;            /* REQFETCH: -1 from the topic's start */
	int max_wait_ms;
	struct kw recs;          /* copied records: struct copied + payload
	                          * (+ key for REQFETCH) */
	int64_t fnext, hw;
	uint32_t nread;          /* PEEK: records found */
	int64_t expired_from;    /* REQFETCH: below the start from here, -1 */
	struct mk_snap *snap;    /* SNAPSHOT */
	uint64_t promo_id;       /* PROMOTE: base is the claim, hw the end */
	/* results */
	int rc;                  /* 0, -1, -2 (FETCH below the log start) */
	int64_t base;
	int64_t us;
	int fenced, broken;
	char why[768];
	char err[1024];
};

/* A record copied out of a Fetch response. */
struct copied {
	int64_t offset, ts, pid;
	int16_t epoch;
	int snapshot;
	uint16_t type;
	uint32_t len;
	uint32_t key_len;        /* REQFETCH */
};

struct mk_async {
	pthread_t tid;
	int started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mk_job *todo_head, *todo_tail;
	struct mk_job *done_head, *done_tail;
	int running;             /* a job taken off todo, not yet in done */
	size_t queued;           /* jobs not yet collected by the loop */
	int fd[2];
	struct event *ev;
	/* Follower groups whose request is sent, waiting for the REPLY. */
	struct mk_job *wait_head, *wait_tail;
	int fetching;            /* a FETCH is queued or running */
	char tail_err[1024];     /* the last FETCH's failure, "" none */
	char failed[1024];       /* thread only: a PRODUCE failed, why */
	int skipped_polls;       /* the writer's polls skipped while busy */
	/* The writer off the loop: its look at the log, and the requests
	 * one REQFETCH brought, handed out from rq_pos. */
	int peeking, rq_fetching;
	struct kw rq;
	size_t rq_pos;
	int rq_more;             /* the last REQFETCH stopped below the end */
	char peek_err[1024], rq_err[1024];
};

static __thread struct mk_job *on_thread;

int mk_defer_on_thread(struct mk *k, int fenced, const char *why)
{
	struct mk_job *j = on_thread;

	if (j == NULL || k->is_req)
		return 0;
	if (!j->fenced && !j->broken) {
		j->fenced = fenced;
		j->broken = !fenced;
		seterr(j->why, sizeof(j->why), "%s", why);
	}
	return 1;
}

static void job_free(struct mk_job *j)
{
	if (j == NULL)
		return;
	free(j->buf);
	free(j->reply_msg);
	free(j->member_id);
	free(j->instance_id);
	if (j->kind == JOB_FETCH || j->kind == JOB_REQFETCH)
		kw_fini(&j->recs);
	mk_snap_free(j->snap);
	free(j);
}

/* ---- the I/O thread ----------------------------------------------------- */

static int copy_rec(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct mk_job *j = arg;
	struct copied c = { .offset = r->offset, .ts = r->ts, .pid = r->pid,
	    .epoch = r->epoch, .snapshot = r->snapshot, .type = r->type,
	    .len = r->len };

	kw_raw(&j->recs, &c, sizeof(c));
	if (r->len > 0)
		kw_raw(&j->recs, r->p, r->len);
	if (j->recs.err) {
		seterr(err, errlen, "out of memory copying fetched records");
		return -1;
	}
	return 0;
}

/* REQFETCH: a request record, its key after the value. */
static int copy_req(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct mk_job *j = arg;
	struct copied c = { .offset = r->offset, .len = r->len,
	    .key_len = r->key != NULL ? (uint32_t)r->key_len : 0 };

	kw_raw(&j->recs, &c, sizeof(c));
	if (r->len > 0)
		kw_raw(&j->recs, r->p, r->len);
	if (c.key_len > 0)
		kw_raw(&j->recs, r->key, c.key_len);
	if (j->recs.err) {
		seterr(err, errlen, "out of memory copying fetched requests");
		return -1;
	}
	return 0;
}

/* PEEK: only counted (the loop reads them again once idle). */
static int count_rec(void *arg, const struct krec *r, char *err,
    size_t errlen)
{
	struct mk_job *j = arg;

	(void)r;
	(void)err;
	(void)errlen;
	j->nread++;
	return 0;
}

/* REQFETCH, on the thread: the request topic from j->from. */
static void run_reqfetch(struct mk *k, struct mk_job *j)
{
	struct mk *q = k->req;
	int64_t start;

	j->rc = -1;
	j->expired_from = -1;
	if (q->conn == NULL && mk_ensure_topic(q, j->err, sizeof(j->err)) != 0)
		return;
	if (j->from < 0 && mk_list_offset(q, -2, &j->from, j->err,
	    sizeof(j->err)) != 0) {
		mk_drop_conn(q);
		return;
	}
	j->rc = mk_fetch(q, j->from, INT64_MAX, 0, copy_req, j, &j->fnext,
	    &j->hw, j->err, sizeof(j->err));
	if (j->rc != -2)
		return;
	/* Below the start: expired unanswered (retention). */
	if (mk_list_offset(q, -2, &start, j->err, sizeof(j->err)) != 0) {
		j->rc = -1;
		return;
	}
	j->expired_from = j->from;
	j->from = start;
	kw_reset(&j->recs);
	j->rc = mk_fetch(q, j->from, INT64_MAX, 0, copy_req, j, &j->fnext,
	    &j->hw, j->err, sizeof(j->err));
	if (j->rc == -2)
		j->rc = -1;
}

static void run_job(struct mk *k, struct mk_job *j)
{
	int64_t t0 = clock_mono_ms();
	uint8_t *v;
	size_t vlen;

	on_thread = j;
	switch (j->kind) {
	case JOB_PRODUCE:
		/* After a group whose outcome is unknown (or a fence)
		 * nothing more is written: the next sequence would make the
		 * broker take a resend of different records for it.  A group
		 * that was never sent (no broker within the timeout) leaves
		 * the sequence where it was: the log stays writable, as after
		 * the same failure of mlog_sync(). */
		if (k->async->failed[0] != '\0') {
			seterr(j->err, sizeof(j->err), "an earlier write failed: "
			    "%s", k->async->failed);
			j->rc = -1;
			break;
		}
		j->rc = mk_produce_frames(k, j->buf, j->len, j->count, 0,
		    &j->base, j->err, sizeof(j->err));
		if (j->rc != 0 && (j->broken || j->fenced))
			seterr(k->async->failed, sizeof(k->async->failed), "%s",
			    j->err);
		break;
	case JOB_REQUEST:
		j->rc = -1;
		if (mk_req_ready(k, j->err, sizeof(j->err)) != 0)
			break;
		v = mlog_kafka_encode_request(j->req_id, j->generation,
		    j->member_id, j->instance_id, j->buf, j->len, &vlen, j->err,
		    sizeof(j->err));
		if (v == NULL)
			break;
		j->rc = mk_produce_value(k->req, j->instance_id, v, vlen,
		    &j->base, j->err, sizeof(j->err));
		free(v);
		if (j->rc != 0 && k->req->broken) {
			char e2[1024];

			seterr(e2, sizeof(e2), "%s", j->err);
			seterr(j->err, sizeof(j->err), "outcome unknown: request %"
			    PRIu64 " to the writer of topic %s: %s; the change is "
			    "applied here if the writer accepted it", j->req_id,
			    k->topic, e2);
			j->rc = -3;
		}
		break;
	case JOB_FETCH:
		j->rc = mk_fetch(k, j->from, INT64_MAX, j->max_wait_ms, copy_rec,
		    j, &j->fnext, &j->hw, j->err, sizeof(j->err));
		break;
	case JOB_EMPTY:
		j->rc = 0;
		break;
	case JOB_PEEK:
		/* The jobs before it moved the read position past the
		 * writer's own records: what lies after is another's. */
		j->from = k->next;
		j->rc = mk_fetch(k, j->from, INT64_MAX, 0, count_rec, j,
		    &j->fnext, &j->hw, j->err, sizeof(j->err));
		break;
	case JOB_REQFETCH:
		run_reqfetch(k, j);
		break;
	case JOB_SNAPSHOT:
		if (k->async->failed[0] != '\0') {
			seterr(j->err, sizeof(j->err), "an earlier write failed: "
			    "%s", k->async->failed);
			j->rc = -1;
			break;
		}
		j->rc = mk_snap_write(k, j->snap, &j->base, j->err,
		    sizeof(j->err));
		if (j->rc != 0 && (j->broken || j->fenced))
			seterr(k->async->failed, sizeof(k->async->failed), "%s",
			    j->err);
		break;
	case JOB_PROMOTE:
		j->rc = mk_promote_claim(k, &j->base, &j->hw, j->err,
		    sizeof(j->err));
		break;
	case JOB_DONE:
		break;
	}
	on_thread = NULL;
	j->us = (clock_mono_ms() - t0) * 1000;
}

static void *thread_main(void *arg)
{
	struct mk *k = arg;
	struct mk_async *a = k->async;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		struct mk_job *j;
		char one = 1;

		while (a->todo_head == NULL && !a->stop)
			pthread_cond_wait(&a->cv, &a->mu);
		if (a->stop)
			break;
		j = a->todo_head;
		a->todo_head = j->next;
		if (a->todo_head == NULL)
			a->todo_tail = NULL;
		j->next = NULL;
		a->running = 1;
		pthread_mutex_unlock(&a->mu);
		run_job(k, j);
		pthread_mutex_lock(&a->mu);
		a->running = 0;
		if (a->done_tail != NULL)
			a->done_tail->next = j;
		else
			a->done_head = j;
		a->done_tail = j;
		pthread_cond_broadcast(&a->cv);
		if (write(a->fd[1], &one, 1) < 0 && errno != EAGAIN)
			log_warnx("metadata log: topic %s: cannot wake the loop: "
			    "%s", k->topic, strerror(errno));
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

static void on_wake(evutil_socket_t fd, short what, void *arg);

static int async_start(struct mk *k, char *err, size_t errlen)
{
	struct mk_async *a = k->async;

	if (a != NULL && a->started)
		return 0;
	if (a == NULL && (a = k->async = calloc(1, sizeof(*a))) == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	a->fd[0] = a->fd[1] = -1;
	if (pipe(a->fd) != 0) {
		seterr(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		(void)fcntl(a->fd[i], F_SETFL, fcntl(a->fd[i], F_GETFL) |
		    O_NONBLOCK);
		(void)fcntl(a->fd[i], F_SETFD, FD_CLOEXEC);
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	if (k->base.base != NULL) {
		a->ev = event_new(k->base.base, a->fd[0], EV_READ | EV_PERSIST,
		    on_wake, k);
		if (a->ev == NULL || event_add(a->ev, NULL) != 0) {
			seterr(err, errlen, "cannot watch the metadata log's "
			    "thread");
			return -1;
		}
	}
	if (pthread_create(&a->tid, NULL, thread_main, k) != 0) {
		seterr(err, errlen, "cannot start the metadata log's thread");
		return -1;
	}
	a->started = 1;
	return 0;
}

/* The writer's reads that wait for nothing (PEEK, REQFETCH): a job after
 * them may run before them, which is the same as the read being started
 * after it. */
static int read_only(const struct mk_job *j)
{
	return j->kind == JOB_PEEK || j->kind == JOB_REQFETCH;
}

/*
 * Queues j for the thread.  Any other job goes before the writer's reads
 * queued at the tail: the writer polls often, and behind a broker that
 * stopped answering each of them takes storage.kafka.timeout_ms, which a
 * metadata write must not wait for on top of its own.
 */
static void push(struct mk *k, struct mk_job *j)
{
	struct mk_async *a = k->async;
	struct mk_job *prev = NULL, *run = NULL;

	pthread_mutex_lock(&a->mu);
	if (!read_only(j)) {
		/* run: the first of the reads that end the queue. */
		for (struct mk_job *q = a->todo_head, *b = NULL; q != NULL;
		    b = q, q = q->next)
			if (!read_only(q))
				run = NULL;
			else if (run == NULL) {
				run = q;
				prev = b;
			}
	}
	if (run != NULL) {
		j->next = run;
		if (prev != NULL)
			prev->next = j;
		else
			a->todo_head = j;
	} else {
		if (a->todo_tail != NULL)
			a->todo_tail->next = j;
		else
			a->todo_head = j;
		a->todo_tail = j;
	}
	a->queued++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* ---- back on the loop thread -------------------------------------------- */

/* The writer refused the request for who sent it: not a member as it
 * recorded them (a new member before the writer wrote the members), or
 * of an older generation than it recorded (the requester has not joined
 * the rebalance yet, or its request waited for a writer that died).
 * Nothing of it was written. */
static int refused_identity(int16_t code)
{
	return code == KERR_ILLEGAL_GENERATION || code == KERR_UNKNOWN_MEMBER_ID;
}

/*
 * j, at the head of the waits and alone there, was refused for its
 * identity: sent again, as the same group, under the identity the
 * follower has now (at once when it changed, else after RESEND_MS), for
 * up to storage.kafka.timeout_ms from the first refusal.  1 while it is
 * sent again or waits to be, 0 when it ends as refused.
 */
static int resend_refused(struct mk *k, struct mk_job *j, int64_t now)
{
	struct mk_async *a = k->async;
	int changed;
	char *m;

	if (k->writer || k->broken || j->next != NULL || j->kind != JOB_REQUEST ||
	    j->resends >= RESEND_MAX)
		return 0;
	if (j->refused_ms == 0) {
		j->refused_ms = now;
		j->deadline = now + k->timeout_ms;
	}
	if (now >= j->refused_ms + k->timeout_ms)
		return 0;
	changed = j->generation != k->generation || k->member_id == NULL ||
	    j->member_id == NULL || strcmp(j->member_id, k->member_id) != 0;
	if (!changed && now < j->refused_ms + (int64_t)RESEND_MS *
	    (j->resends + 1))
		return 1;
	if ((m = strdup(k->member_id != NULL ? k->member_id : "")) == NULL)
		return 0;
	log_info("metadata log: the writer refused request %" PRIu64 " (%s); "
	    "sending it again as member %s of generation %" PRId32, j->req_id,
	    j->reply_msg != NULL && j->reply_msg[0] != '\0' ? j->reply_msg :
	    kerr_name(j->reply_error), m, k->generation);
	free(j->member_id);
	j->member_id = m;
	j->generation = k->generation;
	j->req_id = ++k->req_seq;
	j->replied = 0;
	j->reply_error = 0;
	free(j->reply_msg);
	j->reply_msg = NULL;
	j->resends++;
	a->wait_head = a->wait_tail = NULL;
	push(k, j);             /* complete() waits for its REPLY again */
	return 1;
}

/* Until when j waits for its REPLY: a writer that took over since the
 * follower's identity changed gets the whole timeout to answer. */
static int64_t wait_deadline(const struct mk *k, const struct mk_job *j)
{
	int64_t d = j->deadline;

	if (!j->replied && k->identity_ms > 0 && k->identity_ms + k->timeout_ms > d)
		d = k->identity_ms + k->timeout_ms;
	return d;
}

/* Completes the follower groups at the head whose answer is known. */
static void finish_waits(struct mk *k)
{
	struct mk_async *a = k->async;
	int64_t now = clock_mono_ms();

	while (a->wait_head != NULL) {
		struct mk_job *j = a->wait_head;
		char e[1400];

		if (!j->replied && !k->broken && now < wait_deadline(k, j))
			break;
		if (j->replied && refused_identity(j->reply_error) &&
		    resend_refused(k, j, now))
			break;
		a->wait_head = j->next;
		if (a->wait_head == NULL)
			a->wait_tail = NULL;
		if (j->replied && j->reply_error == 0) {
			k->st.last_fsync_us = (now - (j->deadline -
			    k->timeout_ms)) * 1000;
			k->st.syncs++;
			mlog_group_done(&k->base, j->done, j->arg, 0, 0, "");
		} else if (j->replied) {
			mlog_group_done(&k->base, j->done, j->arg, -1,
			    j->reply_error, j->reply_msg != NULL &&
			    j->reply_msg[0] != '\0' ? j->reply_msg :
			    kerr_name(j->reply_error));
		} else {
			seterr(e, sizeof(e), "outcome unknown: no reply from the "
			    "writer of topic %s to request %" PRIu64 " (request "
			    "topic %s offset %" PRId64 ") within storage.kafka."
			    "timeout_ms (%d ms)%s%s; the change is applied here "
			    "if the writer accepts it later", k->topic, j->req_id,
			    k->req->topic, j->base, k->timeout_ms,
			    k->broken ? ": " : "", k->broken ? k->broken_why : "");
			mlog_group_done(&k->base, j->done, j->arg, -1,
			    KERR_REQUEST_TIMED_OUT, e);
		}
		job_free(j);
	}
}

void mk_async_void_waiting(struct mk *k)
{
	struct mk_async *a = k->async;

	if (a == NULL)
		return;
	for (struct mk_job *j = a->wait_head; j != NULL; j = j->next) {
		char msg[200];

		if (j->kind != JOB_REQUEST || (j->replied &&
		    !refused_identity(j->reply_error)))
			continue;       /* answered: written, or refused for good */
		if (!j->replied && j->req_id > k->void_upto)
			k->void_upto = j->req_id;
		j->replied = 1;
		j->reply_error = MLOG_E_RESEND;
		snprintf(msg, sizeof(msg), "request %" PRIu64 " was not answered "
		    "before this instance became the metadata writer: written "
		    "again as the writer's", j->req_id);
		free(j->reply_msg);
		j->reply_msg = strdup(msg);
		log_info("metadata log: request %" PRIu64 " (offset %" PRId64 " of "
		    "topic %s) was not answered before this instance became the "
		    "writer: its records go again as the writer's", j->req_id,
		    j->base, k->req->topic);
	}
}

/* The REPLY of a request: its group's answer (the tail reads it). */
void mk_async_reply(struct mk *k, uint64_t id, int16_t error,
    const char *msg, size_t msg_len)
{
	struct mk_async *a = k->async;

	if (a == NULL)
		return;
	for (struct mk_job *j = a->wait_head; j != NULL; j = j->next) {
		if (j->req_id != id || j->replied)
			continue;
		j->replied = 1;
		j->reply_error = error;
		if ((j->reply_msg = malloc(msg_len + 1)) != NULL) {
			memcpy(j->reply_msg, msg, msg_len);
			j->reply_msg[msg_len] = '\0';
		}
		return;
	}
}

/* Applies a FETCH's records, in order, as tail_once() does. */
static int apply_fetch(struct mk *k, struct mk_job *j, char *err,
    size_t errlen)
{
	size_t o = 0;

	while (o + sizeof(struct copied) <= j->recs.len) {
		struct copied c;
		struct krec r;

		memcpy(&c, j->recs.buf + o, sizeof(c));
		o += sizeof(c);
		r = (struct krec){ .offset = c.offset, .ts = c.ts, .pid = c.pid,
		    .epoch = c.epoch, .snapshot = c.snapshot, .type = c.type,
		    .p = j->recs.buf + o, .len = c.len };
		o += c.len;
		if (mk_tail_rec(k, &r, err, errlen) != 0) {
			k->next = c.offset;
			return -1;
		}
		k->next = c.offset + 1;
	}
	if (j->fnext > k->next)
		k->next = j->fnext;
	return 0;
}

/* Puts a group that waits for its REPLY at the end of the queue. */
static void wait_push(struct mk_async *a, struct mk_job *j)
{
	j->next = NULL;
	if (a->wait_tail != NULL)
		a->wait_tail->next = j;
	else
		a->wait_head = j;
	a->wait_tail = j;
}

static void complete(struct mk *k, struct mk_job *j)
{
	struct mk_async *a = k->async;
	char err[1024];

	if (j->fenced)
		mk_fenced(k, j->why);
	else if (j->broken)
		mk_set_broken(k, j->why);
	switch (j->kind) {
	case JOB_PRODUCE:
		if (j->rc == 0) {
			uint32_t n = j->count - (j->reply ? 1 : 0);

			if (j->reply) {
				/* Answered, durably: a snapshot from now on
				 * carries the request as answered. */
				if (j->reply_off == k->cur_off)
					k->cur_replied = 1;
				if (j->reply_off + 1 > k->req_next)
					k->req_next = j->reply_off + 1;
			}
			k->st.last_fsync_us = j->us;
			k->st.syncs++;
			k->st.records += n;
			k->st.records_since_snapshot += n;
			k->st.bytes_since_snapshot += j->len;
			k->st.bytes += j->len;
			mlog_group_done(&k->base, j->done, j->arg, 0, 0, "");
		} else {
			/* As after a failed mlog_sync(): the log is broken
			 * (every later group fails) when the outcome is
			 * unknown or the writer was fenced (complete() took
			 * j->broken, j->fenced above), not when nothing was
			 * sent. */
			mlog_group_done(&k->base, j->done, j->arg, -1, 0, j->err);
		}
		job_free(j);
		break;
	case JOB_REQUEST:
		if (j->rc != 0) {
			mlog_group_done(&k->base, j->done, j->arg, -1,
			    j->rc == -3 ? KERR_REQUEST_TIMED_OUT : 0, j->err);
			job_free(j);
			break;
		}
		/* Sent: its answer comes by the tail. */
		j->deadline = clock_mono_ms() + k->timeout_ms;
		wait_push(a, j);
		break;
	case JOB_FETCH:
		a->fetching = 0;
		a->tail_err[0] = '\0';
		if (j->rc == -2) {
			if (mk_behind(k, j->err, err, sizeof(err)) != 0)
				seterr(a->tail_err, sizeof(a->tail_err), "%s", err);
		} else if (j->rc != 0) {
			seterr(a->tail_err, sizeof(a->tail_err), "topic %s: reading "
			    "at offset %" PRId64 ": %s", k->topic, j->from, j->err);
		} else if (apply_fetch(k, j, err, sizeof(err)) != 0) {
			seterr(a->tail_err, sizeof(a->tail_err), "%s", err);
		}
		job_free(j);
		break;
	case JOB_PEEK:
		a->peeking = 0;
		a->peek_err[0] = '\0';
		if (j->rc == -2 || (j->rc == 0 && j->nread > 0))
			k->foreign = 1;
		else if (j->rc != 0)
			seterr(a->peek_err, sizeof(a->peek_err), "topic %s: reading "
			    "at offset %" PRId64 ": %s", k->topic, j->from, j->err);
		job_free(j);
		break;
	case JOB_REQFETCH:
		a->rq_fetching = 0;
		a->rq_err[0] = '\0';
		if (j->rc != 0) {
			seterr(a->rq_err, sizeof(a->rq_err), "topic %s: reading the "
			    "requests at offset %" PRId64 ": %s", k->req->topic,
			    j->from, j->err);
			job_free(j);
			break;
		}
		if (j->expired_from >= 0 && j->from > j->expired_from)
			log_warnx("metadata log: requests %" PRId64 "..%" PRId64
			    " of topic %s expired unanswered (retention)",
			    j->expired_from, j->from - 1, k->req->topic);
		/* Nothing before the first one read is left to answer. */
		if (j->from > k->req_next)
			k->req_next = j->from;
		if (k->writer) {
			kw_fini(&a->rq);
			a->rq = j->recs;        /* taken over */
			kw_init(&j->recs, 0);
			a->rq_pos = 0;
			a->rq_more = j->fnext > j->from && j->fnext < j->hw;
		}
		job_free(j);
		break;
	case JOB_SNAPSHOT:
		if (j->rc == 0)
			mk_snap_written(k, j->snap, j->base);
		mlog_group_done(&k->base, j->done, j->arg, j->rc, 0, j->err);
		job_free(j);
		break;
	case JOB_PROMOTE:
		/* The next step (the tail's Fetches) is taken by
		 * mk_async_collect(), outside blocking paths. */
		mk_promo_claimed(k, j->promo_id, j->rc, j->base, j->hw, j->err);
		job_free(j);
		break;
	case JOB_DONE:
		mlog_group_done(&k->base, j->done, j->arg, j->rc, 0, j->err);
		job_free(j);
		break;
	case JOB_EMPTY:
		if (j->req_id == 0) {
			mlog_group_done(&k->base, j->done, j->arg, 0, 0, "");
			job_free(j);
			break;
		}
		/* A follower's: after the groups waiting for their REPLY. */
		j->replied = 1;
		j->deadline = clock_mono_ms() + k->timeout_ms;
		wait_push(a, j);
		break;
	}
}

static void start_fetch(struct mk *k, int max_wait_ms)
{
	struct mk_async *a = k->async;
	struct mk_job *j;

	if (a->fetching || k->broken || k->tail == NULL)
		return;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = JOB_FETCH;
	j->from = k->next;
	j->max_wait_ms = max_wait_ms;
	kw_init(&j->recs, (size_t)64 << 20);
	a->fetching = 1;
	push(k, j);
}

/* The writer's look at its log after its own records (one at a time). */
static void start_peek(struct mk *k)
{
	struct mk_async *a = k->async;
	struct mk_job *j;

	if (a->peeking || k->broken || !k->writer)
		return;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = JOB_PEEK;
	a->peeking = 1;
	push(k, j);
}

/* The next Fetch of the requests: once those fetched before are all
 * answered (the handler has none and no REPLY is being written). */
static void start_reqfetch(struct mk *k)
{
	struct mk_async *a = k->async;
	struct mk_job *j;

	if (a->rq_fetching || k->broken || !k->writer || k->req == NULL ||
	    k->rq_state != MK_RQ_IDLE || a->rq_pos < a->rq.len)
		return;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = JOB_REQFETCH;
	j->from = k->req_next;
	kw_init(&j->recs, (size_t)64 << 20);
	a->rq_fetching = 1;
	a->rq_more = 0;
	push(k, j);
}

int mk_async_rq_take(struct mk *k, struct krec *r)
{
	struct mk_async *a = k->async;
	struct copied c;

	if (a == NULL || a->rq_pos + sizeof(c) > a->rq.len)
		return 0;
	memcpy(&c, a->rq.buf + a->rq_pos, sizeof(c));
	a->rq_pos += sizeof(c);
	*r = (struct krec){ .offset = c.offset, .p = a->rq.buf + a->rq_pos,
	    .len = c.len };
	a->rq_pos += c.len;
	if (c.key_len > 0) {
		r->key = a->rq.buf + a->rq_pos;
		r->key_len = c.key_len;
		a->rq_pos += c.key_len;
	}
	return 1;
}

void mk_async_rq_clear(struct mk *k)
{
	struct mk_async *a = k->async;

	if (a == NULL)
		return;
	kw_reset(&a->rq);
	a->rq_pos = 0;
	a->rq_more = 0;
}

int mk_async_writer_poll(struct mk *k, char *err, size_t errlen)
{
	struct mk_async *a;

	if (async_start(k, err, errlen) != 0)
		return -1;
	a = k->async;
	mk_async_collect(k);
	if (!k->writer || k->broken)
		return 0;
	start_peek(k);
	if (k->req_fn != NULL)
		start_reqfetch(k);
	if (a->rq_err[0] != '\0') {
		seterr(err, errlen, "%s", a->rq_err);
		return -1;
	}
	if (a->peek_err[0] != '\0') {
		seterr(err, errlen, "%s", a->peek_err);
		return -1;
	}
	return 0;
}

/* The REPLY written alone is durable (or not): the request is answered,
 * or it is read again from the topic later. */
static void reply_done(void *arg, int rc, int16_t sync_error,
    const char *err)
{
	struct mk *k = arg;

	(void)sync_error;
	if (k->rq_state != MK_RQ_REPLY)
		return;
	if (rc == 0) {
		mk_rq_next(k);        /* mk_async_collect() hands out the next */
		return;
	}
	log_warnx("metadata log: the answer to request at offset %" PRId64
	    " of topic %s was not written: %s; reading it again later",
	    k->cur_off, k->req->topic, err);
	mk_rq_drop(k);
}

int mk_async_reply_alone(struct mk *k, int16_t error, const char *msg,
    char *err, size_t errlen)
{
	struct mk_job *j;

	if (k->broken) {
		seterr(err, errlen, "metadata log is read-only after an earlier "
		    "failure: %s", k->broken_why);
		return -1;
	}
	if (async_start(k, err, errlen) != 0)
		return -1;
	if ((j = calloc(1, sizeof(*j))) == NULL ||
	    (j->buf = mk_reply_frame(k, error, msg, &j->len)) == NULL) {
		free(j);
		seterr(err, errlen, "out of memory");
		return -1;
	}
	j->kind = JOB_PRODUCE;
	j->count = 1;
	j->reply = 1;
	j->reply_off = k->cur_off;
	j->done = reply_done;
	j->arg = k;
	k->base.groups_in_flight++;   /* a group of the log's own */
	push(k, j);
	return 0;
}

/* Completes the finished jobs one at a time, oldest first: a done
 * callback may come back into the log (even into a blocking path that
 * collects), and the next one taken is still the oldest. */
static int drain_done(struct mk *k)
{
	struct mk_async *a = k->async;
	int any = 0;

	for (;;) {
		struct mk_job *j;

		pthread_mutex_lock(&a->mu);
		if ((j = a->done_head) != NULL) {
			a->done_head = j->next;
			if (a->done_head == NULL)
				a->done_tail = NULL;
			a->queued--;
		}
		pthread_mutex_unlock(&a->mu);
		if (j == NULL)
			break;
		j->next = NULL;
		complete(k, j);
		any = 1;
	}
	finish_waits(k);
	return any;
}

/* Collects finished jobs (without waiting); 1 if any was. */
int mk_async_collect(struct mk *k)
{
	struct mk_async *a = k->async;
	char buf[64];
	int any;

	if (a == NULL || !a->started)
		return 0;
	while (read(a->fd[0], buf, sizeof(buf)) > 0)
		;
	any = drain_done(k);
	/* A promotion reads on, or becomes the writer's once idle. */
	mk_promo_step(k);
	/* A follower waiting for REPLYs keeps reading (on the thread). */
	if (a->wait_head != NULL)
		start_fetch(k, REPLY_FETCH_WAIT_MS);
	/* The writer's requests: the next one to the handler, or the next
	 * Fetch of them when the last one stopped below the end. */
	if (k->writer && k->base.base != NULL && k->req_fn != NULL) {
		mk_rq_pump(k);
		if (a->rq_more)
			start_reqfetch(k);
	}
	mk_fire_role(k);
	return any;
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mk_async_collect(arg);
}

int mk_async_busy(struct mk *k)
{
	struct mk_async *a = k->async;

	if (a == NULL || (a->queued == 0 && a->wait_head == NULL)) {
		if (a != NULL)
			a->skipped_polls = 0;
		return 0;
	}
	/* Not forever: a writer always writing would never read the
	 * requests; every tenth poll waits for the thread instead. */
	if (++a->skipped_polls < 10)
		return 1;
	a->skipped_polls = 0;
	mk_quiesce(k);
	return 0;
}

/* Blocks until the thread has nothing queued or running, then completes
 * what it finished (starting no new job). */
void mk_quiesce(struct mk *k)
{
	struct mk_async *a = k->async;

	if (a == NULL || !a->started)
		return;
	/* A done callback may start the next group: until nothing is out. */
	for (;;) {
		int idle;

		pthread_mutex_lock(&a->mu);
		while (a->todo_head != NULL || a->running)
			pthread_cond_wait(&a->cv, &a->mu);
		idle = a->done_head == NULL;
		pthread_mutex_unlock(&a->mu);
		if (!idle) {
			(void)drain_done(k);
			continue;
		}
		finish_waits(k);        /* its callbacks may start more */
		pthread_mutex_lock(&a->mu);
		idle = a->todo_head == NULL && !a->running &&
		    a->done_head == NULL;
		pthread_mutex_unlock(&a->mu);
		if (idle)
			break;
	}
	mk_fire_role(k);
}

/* ---- the mlog ops ------------------------------------------------------- */

int mk_sync_async(struct mlog *ml, mlog_done_fn done, void *arg, char *err,
    size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct mk_job *j;

	if (k->broken) {
		seterr(err, errlen, "metadata log is read-only after an earlier "
		    "failure: %s", k->broken_why);
		mk_discard(k);
		return -1;
	}
	if (async_start(k, err, errlen) != 0) {
		mk_discard(k);
		return -1;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		seterr(err, errlen, "out of memory");
		mk_discard(k);
		return -1;
	}
	j->done = done;
	j->arg = arg;
	if (k->writer && k->reply_armed && !k->cur_replied) {
		/* The handler's accepted records: their REPLY joins them. */
		k->reply_armed = 0;
		if (mk_pend_reply(k, 0, "", err, errlen) != 0) {
			free(j);
			mk_discard(k);
			return -1;
		}
		j->reply = 1;
		j->reply_off = k->cur_off;
	}
	j->count = k->npend;
	j->len = k->pend.len;
	if (j->len > 0 && (j->buf = malloc(j->len)) == NULL) {
		free(j);
		seterr(err, errlen, "out of memory");
		mk_discard(k);
		return -1;
	}
	if (j->len > 0)
		memcpy(j->buf, k->pend.buf, j->len);
	mk_discard(k);
	if (k->writer) {
		j->kind = j->count > 0 ? JOB_PRODUCE : JOB_EMPTY;
	} else if (j->count > 0) {
		j->kind = JOB_REQUEST;
		j->req_id = ++k->req_seq;
		j->generation = k->generation;
		j->member_id = strdup(k->member_id != NULL ? k->member_id : "");
		j->instance_id = strdup(k->instance_id != NULL ?
		    k->instance_id : "");
		if (j->member_id == NULL || j->instance_id == NULL) {
			job_free(j);
			seterr(err, errlen, "out of memory");
			return -1;
		}
	} else {
		/* Nothing to forward: an empty group, complete in order
		 * after the requests before it. */
		j->kind = JOB_EMPTY;
		j->req_id = ++k->req_seq;
	}
	push(k, j);
	return 0;
}

/*
 * The writer's snapshot off the loop: the model is read here, holding
 * every record handed to the log (none may be in flight: mstate starts a
 * snapshot between groups), and the thread writes its batches after the
 * groups before it; records appended but not yet handed over stay pending
 * and go in the next group, after it, as with the file backend.  A
 * follower's is a no-op (its model is the writer's).
 */
int mk_compact_async(struct mlog *ml, mlog_dump_fn dump, void *arg,
    mlog_done_fn done, void *done_arg, char *err, size_t errlen)
{
	struct mk *k = (struct mk *)ml;
	struct mk_job *j;

	if (k->broken) {
		seterr(err, errlen, "metadata log is read-only after an earlier "
		    "failure: %s", k->broken_why);
		return -1;
	}
	if (ml->groups_in_flight > 0) {
		seterr(err, errlen, "cannot start a snapshot with %" PRIu64
		    " metadata log groups in flight", ml->groups_in_flight);
		return -1;
	}
	if (async_start(k, err, errlen) != 0)
		return -1;
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	j->done = done;
	j->arg = done_arg;
	j->kind = JOB_DONE;
	if (!k->writer) {
		j->rc = 0;
	} else if (k->st.records_since_snapshot == 0 &&
	    k->st.snapshot_wall_ms >= 0) {
		j->rc = 0;              /* nothing new since the last one */
	} else if ((j->snap = mk_snap_collect(k, dump, arg, j->err,
	    sizeof(j->err))) == NULL) {
		j->rc = -1;
	} else {
		j->kind = JOB_SNAPSHOT;
	}
	push(k, j);
	return 0;
}

void mk_wait(struct mlog *ml)
{
	struct mk *k = (struct mk *)ml;
	struct mk_async *a = k->async;

	if (a == NULL || !a->started)
		return;
	mk_quiesce(k);
	/* Follower groups still waiting for their REPLY: read the log here
	 * (blocking, as mlog_sync() does) until each is answered or late. */
	while (a->wait_head != NULL) {
		char e[1024];
		int64_t left;

		mk_quiesce(k);          /* callbacks may have started more */
		if (a->wait_head == NULL)
			break;
		left = wait_deadline(k, a->wait_head) - clock_mono_ms();
		if (left > 0 && !k->broken &&
		    mk_tail_once(k, (int)MIN(left, 500), e, sizeof(e)) != 0 &&
		    !k->broken)
			mk_sleep_ms((int)MIN(MK_BACKOFF_MS, MAX(1, left)));
		finish_waits(k);
	}
	mk_fire_role(k);
}

int mk_async_poll(struct mk *k, int *applied, char *err, size_t errlen)
{
	uint64_t before = k->st.records;

	*applied = 0;
	if (async_start(k, err, errlen) != 0)
		return -1;
	mk_async_collect(k);
	if (k->promo == MK_PROMO_NONE)
		start_fetch(k, 0);
	*applied = (int)(k->st.records - before);
	if (k->async->tail_err[0] != '\0') {
		seterr(err, errlen, "%s", k->async->tail_err);
		return -1;
	}
	return 0;
}

int mk_async_promote(struct mk *k, char *err, size_t errlen)
{
	struct mk_job *j;

	if (async_start(k, err, errlen) != 0)
		return -1;
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	j->kind = JOB_PROMOTE;
	j->promo_id = k->promo_id;
	push(k, j);
	return 0;
}

void mk_async_fetch(struct mk *k)
{
	start_fetch(k, 0);
}

int mk_async_fetching(const struct mk *k)
{
	return k->async != NULL && k->async->fetching;
}

const char *mk_async_tail_err(const struct mk *k)
{
	return k->async != NULL ? k->async->tail_err : "";
}

/* Nothing queued, running or finished and not yet collected. */
int mk_async_idle(const struct mk *k)
{
	struct mk_async *a = k->async;
	int idle;

	if (a == NULL || !a->started)
		return 1;
	pthread_mutex_lock(&a->mu);
	idle = a->queued == 0;
	pthread_mutex_unlock(&a->mu);
	return idle;
}

void mk_async_promoted(struct mk *k)
{
	/* Called with the thread idle (after mk_quiesce()). */
	if (k->async != NULL)
		k->async->failed[0] = '\0';
}

void mk_async_free(struct mk *k)
{
	struct mk_async *a = k->async;

	if (a == NULL)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->tid, NULL);
		/* Groups in flight end without their done (mlog.h). */
		while (a->todo_head != NULL) {
			struct mk_job *j = a->todo_head;
			a->todo_head = j->next;
			job_free(j);
		}
		while (a->done_head != NULL) {
			struct mk_job *j = a->done_head;
			a->done_head = j->next;
			job_free(j);
		}
		while (a->wait_head != NULL) {
			struct mk_job *j = a->wait_head;
			a->wait_head = j->next;
			job_free(j);
		}
		pthread_mutex_destroy(&a->mu);
		pthread_cond_destroy(&a->cv);
	}
	kw_fini(&a->rq);
	if (a->ev != NULL)
		event_free(a->ev);
	if (a->fd[0] >= 0)
		close(a->fd[0]);
	if (a->fd[1] >= 0)
		close(a->fd[1]);
	free(a);
	k->async = NULL;
}
