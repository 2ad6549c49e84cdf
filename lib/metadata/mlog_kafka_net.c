/*
 * mlog_kafka_net.c: the replicated metadata log's connections, on our
 * asynchronous client (lib/client/kcluster + kconn) instead of a blocking
 * one of its own.
 *
 * One network thread per log (the main log and its request topic share
 * it) runs a private event_base with a kcluster made from the storage
 * config (destination.client's connection and security settings:
 * TLS, SASL, client id; the bootstrap list of storage.kafka).  Every
 * connection the log uses is a kconn of that kcluster
 * (kcluster_open_conn()), so the handshake (ApiVersions, TLS, SASL),
 * framing, correlation and request timeouts are kconn's, exactly as for
 * the data plane, the group client and the status topic.
 *
 * The code above (mlog_kafka.c, mlog_kafka_io.c) keeps its sequential
 * shape: mk_conn_open() and mk_call() hand the step to the network thread
 * (an operation queued under a mutex, the thread woken through a pipe
 * its event base watches) and wait on a condition variable for kconn's
 * answer.  They are called on the log's I/O thread (mlog_kafka_async.c:
 * the writer's Produce, a follower's request and its tail Fetch) and on
 * the synchronous paths (open and replay, mlog_sync(), compaction,
 * promote), which block their caller as before.  The network thread
 * never blocks: several waits may be out at once (one per calling
 * thread), each on its own connection.
 *
 * Deadlines: a connection is bounded by storage.kafka.timeout_ms
 * (kconn's connect timeout, set from it), a call by the timeout its
 * caller passes (kconn's request timeout); the waiting side adds a
 * margin of its own and closes the connection if kconn has not answered
 * by then, so no wait outlives its bound by more than that margin.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/crypto.h>

#include "compat.h"
#include "kbuf.h"
#include "kcluster.h"
#include "kconn.h"
#include "kproto.h"
#include "log.h"
#include "mlog_kafka_int.h"

/* Past its own deadline, the waiting side gives kconn this long before it
 * closes the connection itself. */
#define NET_MARGIN_MS 2000

enum { OP_CONNECT, OP_CALL, OP_CLOSE, OP_FREE, OP_STOP };

struct mk_conn {
	struct mk_net *net;
	struct kconn *c;            /* network thread only */
	int state;                  /* CONN_* (under net->mu) */
	char addr[300];
	char why[512];
};

enum { CONN_CONNECTING, CONN_READY, CONN_CLOSED };

struct net_op {
	struct net_op *next;
	int kind;
	struct mk_conn *conn;
	char host[256];
	int port;
	/* OP_CALL */
	int16_t api_key, version;
	const uint8_t *body;
	size_t body_len;
	int timeout_ms;
	mk_check_fn check;          /* run on the answer, network thread */
	void *check_arg;
	/* results (under net->mu) */
	int done;
	int rc;
	int unsent;                 /* OP_CALL: refused before sending */
	uint8_t *resp;              /* malloc'd; the answer at resp_skip */
	size_t resp_skip, resp_len;
	char err[512];
};

struct mk_net {
	pthread_t tid;
	int started;
	struct event_base *base;
	struct evdns_base *dns;
	struct kcluster *kc;
	struct event *wake_ev;
	int fd[2];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct net_op *head, *tail;
};

static int64_t mono_ms(void)
{
	return clock_mono_ms();
}

/* ---- the network thread ------------------------------------------------ */

static void op_finish(struct mk_net *n, struct net_op *op, int rc,
    const char *err)
{
	pthread_mutex_lock(&n->mu);
	op->rc = rc;
	if (err != NULL)
		seterr(op->err, sizeof(op->err), "%s", err);
	op->done = 1;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

static void conn_event(struct kconn *c, int event, int err,
    const char *errstr, void *arg)
{
	struct mk_conn *mc = arg;
	struct mk_net *n = mc->net;

	(void)c;
	(void)err;
	pthread_mutex_lock(&n->mu);
	if (event == KCONN_EV_READY) {
		mc->state = CONN_READY;
	} else {
		mc->state = CONN_CLOSED;
		seterr(mc->why, sizeof(mc->why), "%s", errstr != NULL ?
		    errstr : "connection closed");
	}
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

static void call_done(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct net_op *op = arg;
	struct mk_net *n = op->conn->net;
	uint8_t *copy = NULL, *frame;
	size_t len = 0, cap, skip = 0;

	if (err != KCONN_E_OK || body == NULL) {
		op_finish(n, op, -1, errstr != NULL ? errstr : "no answer");
		return;
	}
	len = (size_t)(body->end - body->p);
	/* A large answer (a replay's Fetch) was read into a buffer of
	 * kconn's own: taken over as it is, not copied. */
	if ((frame = kconn_take_frame(c, &cap)) != NULL) {
		copy = frame;
		skip = (size_t)(body->p - frame);
	} else if ((copy = malloc(len > 0 ? len : 1)) == NULL) {
		op_finish(n, op, -1, "out of memory");
		return;
	} else {
		memcpy(copy, body->p, len);
	}
	/* Before the hand-over: what check writes is the caller's once
	 * op_finish() (under the mutex) says done. */
	if (op->check != NULL)
		op->check(op->check_arg, copy + skip, len);
	pthread_mutex_lock(&n->mu);
	op->resp = copy;
	op->resp_skip = skip;
	op->resp_len = len;
	pthread_mutex_unlock(&n->mu);
	op_finish(n, op, 0, NULL);
}

static void run_op(struct mk_net *n, struct net_op *op)
{
	struct mk_conn *mc = op->conn;
	char err[512];

	switch (op->kind) {
	case OP_CONNECT:
		mc->c = kcluster_open_conn(n->kc, op->host, op->port,
		    conn_event, mc, err, sizeof(err));
		if (mc->c == NULL) {
			pthread_mutex_lock(&n->mu);
			mc->state = CONN_CLOSED;
			seterr(mc->why, sizeof(mc->why), "%s", err);
			pthread_mutex_unlock(&n->mu);
			op_finish(n, op, -1, err);
			return;
		}
		op_finish(n, op, 0, NULL);
		return;
	case OP_CALL:
		if (mc->c == NULL || kconn_send_raw(mc->c, op->api_key,
		    op->version, op->body, op->body_len, 0, op->timeout_ms,
		    call_done, op, err, sizeof(err)) != 0) {
			/* kconn took nothing: the broker never saw it. */
			op->unsent = 1;
			op_finish(n, op, -1, mc->c == NULL ?
			    "not connected" : err);
		}
		return;         /* call_done() finishes it */
	case OP_CLOSE:
		if (mc->c != NULL && !kconn_is_closed(mc->c))
			kconn_close(mc->c, KCONN_E_TIMEOUT, "no answer in time");
		op_finish(n, op, 0, NULL);
		return;
	case OP_FREE:
		/* Fire and forget: nobody waits for this one. */
		if (mc->c != NULL)
			kconn_free(mc->c);
		free(mc);
		free(op);
		return;
	case OP_STOP:
		event_base_loopbreak(n->base);
		op_finish(n, op, 0, NULL);
		return;
	}
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mk_net *n = arg;
	char buf[64];

	(void)what;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	for (;;) {
		struct net_op *op;

		pthread_mutex_lock(&n->mu);
		op = n->head;
		if (op != NULL) {
			n->head = op->next;
			if (n->head == NULL)
				n->tail = NULL;
		}
		pthread_mutex_unlock(&n->mu);
		if (op == NULL)
			break;
		run_op(n, op);
	}
}

static void *net_main(void *arg)
{
	struct mk_net *n = arg;
	sigset_t all;

	/* Signals go to the other threads (SIGPIPE of a closed socket
	 * stays pending here, harmless). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	event_base_loop(n->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* ---- the calling side ---------------------------------------------------- */

static void post(struct mk_net *n, struct net_op *op)
{
	char b = 1;

	op->next = NULL;
	pthread_mutex_lock(&n->mu);
	if (n->tail != NULL)
		n->tail->next = op;
	else
		n->head = op;
	n->tail = op;
	pthread_mutex_unlock(&n->mu);
	while (write(n->fd[1], &b, 1) < 0 && errno == EINTR)
		;
}

/* Waits on n->cv until ms (monotonic); n->mu held. */
static void cv_wait_until(struct mk_net *n, int64_t until_ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(until_ms / 1000);
	ts.tv_nsec = (long)(until_ms % 1000) * 1000000L;
	pthread_cond_timedwait(&n->cv, &n->mu, &ts);
}

/* Waits for op; past deadline (+ the margin) closes its connection, so
 * kconn fails what is still out on it.  Returns op->rc. */
static int wait_op(struct mk_net *n, struct net_op *op, int64_t deadline)
{
	int closed = 0;

	pthread_mutex_lock(&n->mu);
	while (!op->done) {
		if (!closed && mono_ms() >= deadline + NET_MARGIN_MS &&
		    op->conn != NULL) {
			struct net_op cl = { .kind = OP_CLOSE, .conn = op->conn };

			closed = 1;
			pthread_mutex_unlock(&n->mu);
			post(n, &cl);
			pthread_mutex_lock(&n->mu);
			while (!cl.done)
				pthread_cond_wait(&n->cv, &n->mu);
			continue;
		}
		cv_wait_until(n, closed ? mono_ms() + 1000 :
		    deadline + NET_MARGIN_MS);
	}
	pthread_mutex_unlock(&n->mu);
	return op->rc;
}

struct mk_net *mk_net_new(const struct kcluster_config *cfg, char *err,
    size_t errlen)
{
	struct mk_net *n = calloc(1, sizeof(*n));
	pthread_condattr_t ca;
	char e2[512];

	if (n == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	n->fd[0] = n->fd[1] = -1;
	pthread_mutex_init(&n->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe(n->fd) != 0) {
		seterr(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < 2; i++) {
		(void)fcntl(n->fd[i], F_SETFL, fcntl(n->fd[i], F_GETFL) |
		    O_NONBLOCK);
		(void)fcntl(n->fd[i], F_SETFD, FD_CLOEXEC);
	}
	n->base = event_base_new();
	if (n->base == NULL) {
		seterr(err, errlen, "cannot create an event base");
		goto fail;
	}
	/* Host names resolved without blocking the thread's loop. */
	n->dns = evdns_base_new(n->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (n->dns == NULL)
		n->dns = evdns_base_new(n->base, 0);
	n->kc = kcluster_new(n->base, n->dns, cfg, e2, sizeof(e2));
	if (n->kc == NULL) {
		seterr(err, errlen, "%s", e2);
		goto fail;
	}
	n->wake_ev = event_new(n->base, n->fd[0], EV_READ | EV_PERSIST,
	    wake_cb, n);
	if (n->wake_ev == NULL || event_add(n->wake_ev, NULL) != 0) {
		seterr(err, errlen, "cannot create an event");
		goto fail;
	}
	if (pthread_create(&n->tid, NULL, net_main, n) != 0) {
		seterr(err, errlen, "cannot start the metadata log's network "
		    "thread");
		goto fail;
	}
	n->started = 1;
	return n;
fail:
	mk_net_free(n);
	return NULL;
}

void mk_net_free(struct mk_net *n)
{
	if (n == NULL)
		return;
	if (n->started) {
		struct net_op op = { .kind = OP_STOP };

		post(n, &op);
		(void)wait_op(n, &op, INT64_MAX / 4);
		pthread_join(n->tid, NULL);
	}
	/* Operations posted after the stop (frees of connections): run them
	 * here, the thread is gone. */
	while (n->head != NULL) {
		struct net_op *op = n->head;

		n->head = op->next;
		run_op(n, op);
	}
	if (n->wake_ev != NULL)
		event_free(n->wake_ev);
	kcluster_free(n->kc);
	if (n->dns != NULL)
		evdns_base_free(n->dns, 0);
	if (n->base != NULL)
		event_base_free(n->base);
	for (int i = 0; i < 2; i++)
		if (n->fd[i] >= 0)
			close(n->fd[i]);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}

struct mk_conn *mk_conn_open(struct mk_net *n, const char *host, int port,
    int timeout_ms, char *err, size_t errlen)
{
	struct mk_conn *mc = calloc(1, sizeof(*mc));
	struct net_op op = { .kind = OP_CONNECT, .port = port };
	int64_t deadline = mono_ms() + timeout_ms;
	int st;

	if (mc == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	mc->net = n;
	mc->state = CONN_CONNECTING;
	seterr(mc->addr, sizeof(mc->addr), strchr(host, ':') != NULL ?
	    "[%s]:%d" : "%s:%d", host, port);
	seterr(op.host, sizeof(op.host), "%s", host);
	op.conn = mc;
	post(n, &op);
	if (wait_op(n, &op, deadline) != 0) {
		/* kconn_new()'s reason names the address. */
		seterr(err, errlen, "%s", op.err);
		mk_conn_free(mc);
		return NULL;
	}
	/* kconn's connect timeout (storage.kafka.timeout_ms) ends the
	 * handshake; the margin only guards against it not doing so. */
	pthread_mutex_lock(&n->mu);
	while (mc->state == CONN_CONNECTING &&
	    mono_ms() < deadline + NET_MARGIN_MS)
		cv_wait_until(n, deadline + NET_MARGIN_MS);
	st = mc->state;
	pthread_mutex_unlock(&n->mu);
	if (st == CONN_READY)
		return mc;
	if (st == CONN_CONNECTING)
		seterr(err, errlen, "%s: connecting timed out after %d ms",
		    mc->addr, timeout_ms);
	else
		seterr(err, errlen, "%s", mc->why);
	mk_conn_free(mc);
	return NULL;
}

void mk_conn_free(struct mk_conn *mc)
{
	struct net_op *op;

	if (mc == NULL)
		return;
	op = calloc(1, sizeof(*op));
	if (op == NULL) {
		/* Cannot hand it over: leak the connection rather than race
		 * the network thread. */
		log_errorx("metadata log: out of memory closing %s", mc->addr);
		return;
	}
	op->kind = OP_FREE;
	op->conn = mc;
	post(mc->net, op);
}

const char *mk_conn_addr(const struct mk_conn *mc)
{
	return mc->addr;
}

uint8_t *mk_call(struct mk_conn *mc, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms, char *err,
    size_t errlen)
{
	return mk_call_ex(mc, api_key, version, req, resp, a, timeout_ms, NULL,
	    err, errlen);
}

/* A request sent and not yet waited for (mk_call_start()). */
struct mk_pending {
	struct net_op op;
	struct kw w;
	int64_t deadline;
	int16_t api_key, version;
};

struct mk_pending *mk_call_start(struct mk_conn *mc, int16_t api_key,
    int16_t version, const void *req, int timeout_ms, char *err,
    size_t errlen)
{
	return mk_call_start_check(mc, api_key, version, req, timeout_ms, NULL,
	    NULL, err, errlen);
}

struct mk_pending *mk_call_start_check(struct mk_conn *mc, int16_t api_key,
    int16_t version, const void *req, int timeout_ms, mk_check_fn check,
    void *check_arg, char *err, size_t errlen)
{
	const struct kp_api *api = kp_api_find(api_key);
	struct mk_pending *pd;

	if (api == NULL) {
		seterr(err, errlen, "ApiKey %d is not in the codec", api_key);
		return NULL;
	}
	if ((pd = calloc(1, sizeof(*pd))) == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	kw_init(&pd->w, 256u << 20);
	if (api->request_encode(&pd->w, version, req) < 0 || pd->w.err) {
		seterr(err, errlen, "cannot encode the %s v%d request: %s",
		    api->name, version, pd->w.why != NULL ? pd->w.why :
		    "encode error");
		kw_fini(&pd->w);
		free(pd);
		return NULL;
	}
	pd->api_key = api_key;
	pd->version = version;
	pd->deadline = mono_ms() + MAX(1, timeout_ms);
	pd->op = (struct net_op){ .kind = OP_CALL, .conn = mc,
	    .api_key = api_key, .version = version,
	    .timeout_ms = MAX(1, timeout_ms), .body = pd->w.buf,
	    .body_len = pd->w.len, .check = check, .check_arg = check_arg };
	post(mc->net, &pd->op);
	return pd;
}

uint8_t *mk_call_finish(struct mk_pending *pd, void *resp, struct karena *a,
    int *unsent, char *err, size_t errlen)
{
	const struct kp_api *api = kp_api_find(pd->api_key);
	struct mk_conn *mc = pd->op.conn;
	uint8_t *frame = NULL;
	struct kr r;

	(void)wait_op(mc->net, &pd->op, pd->deadline);
	OPENSSL_cleanse(pd->w.buf, pd->w.len);
	kw_fini(&pd->w);
	if (unsent != NULL)
		*unsent = pd->op.unsent;
	if (pd->op.rc != 0) {
		/* kconn's message names the broker and the request. */
		seterr(err, errlen, "%s", pd->op.err);
		free(pd->op.resp);
		goto out;
	}
	if (resp == NULL) {
		/* Not wanted after all (a prefetch given up). */
		free(pd->op.resp);
		goto out;
	}
	kr_init(&r, pd->op.resp + pd->op.resp_skip, pd->op.resp_len);
	api->response_init(resp);
	if (api->response_decode(&r, a, pd->version, resp) < 0 || r.err) {
		seterr(err, errlen, "%s: malformed %s v%d response: %s",
		    mc->addr, api->name, pd->version,
		    r.why != NULL ? r.why : "decode error");
		free(pd->op.resp);
		goto out;
	}
	frame = pd->op.resp;
out:
	free(pd);
	return frame;
}

uint8_t *mk_call_ex(struct mk_conn *mc, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms,
    int *unsent, char *err, size_t errlen)
{
	struct mk_pending *pd;

	if (unsent != NULL)
		*unsent = 0;
	pd = mk_call_start(mc, api_key, version, req, timeout_ms, err, errlen);
	if (pd == NULL)
		return NULL;
	return mk_call_finish(pd, resp, a, unsent, err, errlen);
}
