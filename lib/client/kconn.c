/*
 * kconn.c: see kconn.h.
 *
 * Life of a connection (one setter, conn_set_state, writes c->state):
 *
 *   CONNECTING --(TCP, TLS)--> APIVERSIONS --> [SASL_HANDSHAKE --> SASL_AUTH]
 *       --> READY --> CLOSED
 *
 * Requests live in two FIFO queues: `inflight` (written to the bufferevent,
 * waiting for their response, in wire order) and `waitq` (accepted before
 * READY; their bytes wait in `pending` and are moved to the socket, in order,
 * when the handshake is done).  The handshake's own requests go straight to
 * the socket.  One timer covers the connect deadline and every request
 * deadline; it may fire early, in which case it just re-arms.
 *
 * Re-entrancy: every entry from libevent or from the owner's calls into a
 * user callback runs between conn_enter() and conn_leave().  While c->busy is
 * nonzero the bufferevent and the struct stay allocated even if the
 * connection is closed or freed; conn_leave() finishes the job.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "compat.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kproto.h"
#include "ksasl.h"
#include "log.h"
#include "massert.h"

#define API_APIVERSIONS 18
#define API_SASL_HANDSHAKE 17
#define API_SASL_AUTHENTICATE 36
#define KCONN_NORESP_RING 64     /* recent acks=0 correlation ids */
#define KCONN_APIVERSIONS_MAX 3  /* the version we ask first */
#define KCONN_MAX_ERRSTR 512
#define KCONN_WRITE_MAX (4 * 1024 * 1024) /* most bytes one writev is given */

/* ---- tables ---------------------------------------------------------- */

static const char *const err_names[] = {
#define X(e, s) [KCONN_E_##e] = s,
	KCONN_ERRORS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(err_names) == KCONN_E_COUNT, "error table");

const char *kconn_err_name(int err)
{
	if (err < 0 || err >= KCONN_E_COUNT)
		return "?";
	return err_names[err];
}

/*
 * First flexible version (KIP-482) of the standard requests the generated
 * table (kproto) does not carry yet; it decides request header v1 vs v2 and
 * response header v0 vs v1.  The generated table wins where it has the key.
 */
static const struct {
	int16_t key;
	int16_t first_flexible; /* -1: never flexible */
	const char *name;
} api_extra[] = {
	{ 0, 9, "Produce" }, { 1, 12, "Fetch" }, { 2, 6, "ListOffsets" },
	{ 8, 8, "OffsetCommit" }, { 9, 6, "OffsetFetch" },
	{ 10, 3, "FindCoordinator" }, { 17, -1, "SaslHandshake" },
	{ 19, 5, "CreateTopics" }, { 20, 4, "DeleteTopics" },
	{ 21, 2, "DeleteRecords" },
	{ 22, 2, "InitProducerId" }, { 23, 4, "OffsetForLeaderEpoch" },
	{ 32, 4, "DescribeConfigs" }, { 36, 2, "SaslAuthenticate" },
	{ 37, 2, "CreatePartitions" }, { 60, 0, "DescribeCluster" },
};

static int api_flexible(int16_t key, int16_t version)
{
	int hv = kp_request_header_version(key, version);

	if (hv >= 0)
		return hv == 2;
	for (size_t i = 0; i < ARRAY_SIZE(api_extra); i++)
		if (api_extra[i].key == key)
			return api_extra[i].first_flexible >= 0 &&
			    version >= api_extra[i].first_flexible;
	return 0;
}

static const char *api_name(int16_t key)
{
	if (kp_api_find(key) != NULL)
		return kp_api_name(key);
	for (size_t i = 0; i < ARRAY_SIZE(api_extra); i++)
		if (api_extra[i].key == key)
			return api_extra[i].name;
	return "ApiKey?";
}

/* ---- connection state ------------------------------------------------ */

#define KCONN_STATES(X) \
	X(CONNECTING, "CONNECTING") \
	X(APIVERSIONS, "APIVERSIONS") \
	X(SASL_HANDSHAKE, "SASL_HANDSHAKE") \
	X(SASL_AUTH, "SASL_AUTH") \
	X(READY, "READY") \
	X(CLOSED, "CLOSED")

enum conn_state {
#define X(e, s) CS_##e,
	KCONN_STATES(X)
#undef X
	CS_COUNT
};

static const char *const state_names[] = {
#define X(e, s) [CS_##e] = s,
	KCONN_STATES(X)
#undef X
};
_Static_assert(ARRAY_SIZE(state_names) == CS_COUNT, "state table");

struct kreq {
	TAILQ_ENTRY(kreq) link;
	int32_t corr;
	int16_t api_key, version;
	int flexible;
	int timeout_ms;
	int64_t deadline_ms;
	int64_t sent_us;
	size_t bytes;
	int keep;     /* KCONN_F_KEEP_ON_TIMEOUT */
	int late;     /* timed out and answered as such; its answer is discarded */
	kconn_resp_cb cb;
	void *arg;
};
TAILQ_HEAD(kreq_q, kreq);

struct kconn {
	struct event_base *base;
	struct evdns_base *dns;
	const struct kconn_config *cfg;
	struct bufferevent *bev;
	struct event *ev_timer;
	struct event *ev_free;
	char *host;
	int port;
	char name[300];
	int state;
	int tls;

	kconn_event_cb cb;
	void *cbarg;
	kconn_stats_fn stats;
	void *stats_arg;

	struct kreq_q inflight;
	struct kreq_q waitq;
	struct evbuffer *pending;
	int nreq;          /* in inflight + waitq */
	size_t req_bytes;  /* their encoded bytes */
	int32_t next_corr;
	int32_t noresp[KCONN_NORESP_RING];
	unsigned noresp_n;
	unsigned noresp_next;

	int64_t connect_deadline;
	int64_t timer_at; /* 0 = not armed */
	size_t skip;      /* bytes of a late answer still to discard */
	int nlate;        /* requests in inflight that timed out (kreq.late) */
	int64_t late_answers; /* late answers discarded since the start */

	struct kconn_api_range apis[KCONN_MAX_API_KEY];
	int have_apis;
	int av_version;   /* ApiVersions version in flight / answered */
	int av_retried;

	struct ksasl_scram *scram;
	int sasl_step;
	int16_t sasl_auth_version;
	int lifetime_logged;

	int busy;     /* > 0 while inside a callback */
	int freeing;  /* kconn_free() was called while busy */

	/*
	 * A large response frame read straight from the socket (plain TCP
	 * only; see "Reading large frames"): frame_len bytes after the size
	 * prefix, frame_have of them in frame so far; frame_on while one is
	 * being read.  The buffer (frame_cap bytes) is kept for the next
	 * large frame up to KCONN_FRAME_KEEP bytes.
	 */
	uint8_t *frame;
	size_t frame_len, frame_have, frame_cap;
	int frame_on;
	int frame_giving;        /* frame is being handed on (kconn_take_frame) */
	struct event *ev_frame;  /* reads the socket while frame_on */
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The only writer of c->state: checks the move and logs it. */
static void conn_set_state(struct kconn *c, int s, const char *why)
{
	static const uint8_t allowed[CS_COUNT] = {
		[CS_CONNECTING] = 1u << CS_APIVERSIONS,
		[CS_APIVERSIONS] = 1u << CS_SASL_HANDSHAKE | 1u << CS_READY,
		[CS_SASL_HANDSHAKE] = 1u << CS_SASL_AUTH,
		[CS_SASL_AUTH] = 1u << CS_READY,
	};

	if (c->state == s)
		return; /* e.g. the ApiVersions retry */
	/* Our own invariant, never the peer's doing: any state may close. */
	MR_ASSERT_MSG(s == CS_CLOSED || (allowed[c->state] & (1u << s)) != 0,
	    "%s -> %s", state_names[c->state], state_names[s]);
	log_debug("kconn %s: %s -> %s (%s)", c->name, state_names[c->state],
	    state_names[s], why);
	c->state = s;
}

static void conn_really_free(struct kconn *c)
{
	if (c->ev_frame != NULL)   /* before the socket closes with bev */
		event_free(c->ev_frame);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	if (c->ev_timer != NULL)
		event_free(c->ev_timer);
	if (c->ev_free != NULL)
		event_free(c->ev_free);
	if (c->pending != NULL)
		evbuffer_free(c->pending);
	ksasl_scram_free(c->scram);
	free(c->frame);
	free(c->host);
	free(c);
}

static void conn_enter(struct kconn *c)
{
	c->busy++;
}

/* Leaves a callback scope; finishes a close or free left pending. */
static void conn_leave(struct kconn *c)
{
	MR_ASSERT(c->busy > 0);
	if (--c->busy > 0)
		return;
	if (c->state == CS_CLOSED && c->bev != NULL) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (c->freeing)
		event_active(c->ev_free, EV_TIMEOUT, 0);
}

static void deferred_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kconn *c = arg;

	if (c->busy == 0)
		conn_really_free(c);
}

static void req_finish(struct kconn *c, struct kreq *rq, int err,
    const char *errstr, struct kr *body, size_t resp_bytes)
{
	/* A late request's owner had its answer (the timeout) already. */
	if (rq->late) {
		free(rq);
		return;
	}
	if (c->stats != NULL)
		c->stats(c->stats_arg, rq->api_key, err,
		    rq->sent_us ? now_us() - rq->sent_us : 0, rq->bytes,
		    resp_bytes);
	if (rq->cb != NULL)
		rq->cb(c, err, errstr, body, rq->arg);
	free(rq);
}

/*
 * Closes the connection and fails every request: first (if given) gets
 * first_err/first_msg, all others err with "closed: errstr".  notify: tell
 * the owner through the event callback.  Safe to call while busy.
 */
static void conn_fail(struct kconn *c, int err, const char *errstr,
    struct kreq *first, int first_err, const char *first_msg, int notify)
{
	struct kreq_q q;
	struct kreq *rq;
	char msg[KCONN_MAX_ERRSTR];

	if (c->state == CS_CLOSED) {
		if (first != NULL)
			req_finish(c, first, first_err, first_msg, NULL, 0);
		return;
	}
	conn_set_state(c, CS_CLOSED, errstr);
	/* A large frame being read: its event goes before the socket may
	 * close with the bufferevent. */
	if (c->ev_frame != NULL)
		event_del(c->ev_frame);
	c->frame_on = 0;
	if (c->bev != NULL) {
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
		if (c->busy == 0) {
			bufferevent_free(c->bev);
			c->bev = NULL;
		}
	}
	event_del(c->ev_timer);
	c->timer_at = 0;
	evbuffer_drain(c->pending, evbuffer_get_length(c->pending));
	ksasl_scram_free(c->scram);
	c->scram = NULL;

	/* Take the queues first: callbacks may call back into us. */
	TAILQ_INIT(&q);
	TAILQ_CONCAT(&q, &c->inflight, link);
	TAILQ_CONCAT(&q, &c->waitq, link);
	c->nreq = 0;
	c->req_bytes = 0;
	c->nlate = 0;
	c->skip = 0;

	conn_enter(c);
	if (first != NULL)
		req_finish(c, first, first_err, first_msg, NULL, 0);
	snprintf(msg, sizeof(msg), "%s (request not answered)", errstr);
	while ((rq = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, rq, link);
		req_finish(c, rq, err, msg, NULL, 0);
	}
	if (notify && !c->freeing && c->cb != NULL)
		c->cb(c, KCONN_EV_CLOSED, err, errstr, c->cbarg);
	conn_leave(c);
}

static void conn_failf(struct kconn *c, int err, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
static void conn_failf(struct kconn *c, int err, const char *fmt, ...)
{
	char msg[KCONN_MAX_ERRSTR];
	int n;
	va_list ap;

	n = snprintf(msg, sizeof(msg), "%s: ", c->name);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	conn_fail(c, err, msg, NULL, 0, NULL, 1);
}

/* ---- timer ----------------------------------------------------------- */

static void conn_arm(struct kconn *c, int64_t at)
{
	struct timeval tv;
	int64_t d;

	if (c->state == CS_CLOSED)
		return;
	if (c->timer_at != 0 && c->timer_at <= at)
		return;
	d = at - clock_mono_ms();
	if (d < 0)
		d = 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	c->timer_at = at;
	evtimer_add(c->ev_timer, &tv);
}

static const char *state_doing(int s)
{
	switch (s) {
	case CS_CONNECTING:
		return "while connecting";
	case CS_APIVERSIONS:
		return "while waiting for ApiVersions";
	case CS_SASL_HANDSHAKE:
	case CS_SASL_AUTH:
		return "during SASL authentication";
	default:
		return "";
	}
}

static struct kreq *expired_in(struct kreq_q *q, int64_t now, int64_t *next)
{
	struct kreq *rq;

	TAILQ_FOREACH(rq, q, link) {
		if (rq->deadline_ms <= now)
			return rq;
		if (*next == 0 || rq->deadline_ms < *next)
			*next = rq->deadline_ms;
	}
	return NULL;
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kconn *c = arg;
	int64_t now = clock_mono_ms(), next = 0;
	struct kreq *rq;
	kconn_resp_cb cb;
	char msg[KCONN_MAX_ERRSTR], why[KCONN_MAX_ERRSTR];

	c->timer_at = 0;
	if (c->state == CS_CLOSED)
		return;
	conn_enter(c);
	if (c->state != CS_READY && now >= c->connect_deadline) {
		conn_failf(c, KCONN_E_TIMEOUT, "timed out after %d ms %s",
		    c->cfg->connect_timeout_ms, state_doing(c->state));
		goto out;
	}
	if (c->state != CS_READY)
		next = c->connect_deadline;
again:
	rq = expired_in(&c->inflight, now, &next);
	if (rq != NULL && rq->keep && !rq->late) {
		/*
		 * Only this request: its owner gets the timeout now; the
		 * broker answers in order, so its answer still comes before
		 * the later ones' and is discarded unread (conn_skip_late()).
		 * No answer for another timeout: the connection is dead.
		 */
		rq->late = 1;
		c->nlate++;
		rq->deadline_ms = now + rq->timeout_ms;
		snprintf(msg, sizeof(msg), "%s: request %s v%d (correlation id "
		    "%d) timed out after %d ms (its answer, if it comes, is "
		    "discarded; the connection's other requests go on)", c->name,
		    api_name(rq->api_key), rq->version, rq->corr, rq->timeout_ms);
		log_warnx("%s", msg);
		if (c->stats != NULL)
			c->stats(c->stats_arg, rq->api_key, KCONN_E_TIMEOUT,
			    now_us() - rq->sent_us, rq->bytes, 0);
		/* The callback may close c, which frees rq: nothing of rq
		 * is touched after it. */
		cb = rq->cb;
		rq->cb = NULL;
		if (cb != NULL)
			cb(c, KCONN_E_TIMEOUT, msg, NULL, rq->arg);
		if (c->state == CS_CLOSED || c->freeing)
			goto out;
		next = 0;
		if (c->state != CS_READY)
			next = c->connect_deadline;
		goto again;
	}
	if (rq != NULL)
		TAILQ_REMOVE(&c->inflight, rq, link);
	else if ((rq = expired_in(&c->waitq, now, &next)) != NULL)
		TAILQ_REMOVE(&c->waitq, rq, link);
	if (rq != NULL && rq->late) {
		MR_ASSERT(c->nreq > 0 && c->req_bytes >= rq->bytes &&
		    c->nlate > 0);
		c->nreq--;
		c->req_bytes -= rq->bytes;
		c->nlate--;
		snprintf(why, sizeof(why), "%s: connection closed: request %s v%d "
		    "(correlation id %d) timed out and still no answer %d ms later",
		    c->name, api_name(rq->api_key), rq->version, rq->corr,
		    rq->timeout_ms);
		log_warnx("%s", why);
		conn_fail(c, KCONN_E_TRANSPORT, why, rq, KCONN_E_TIMEOUT, why, 1);
		goto out;
	}
	if (rq != NULL) {
		MR_ASSERT(c->nreq > 0 && c->req_bytes >= rq->bytes);
		c->nreq--;
		c->req_bytes -= rq->bytes;
		snprintf(msg, sizeof(msg), "%s: request %s v%d (correlation id "
		    "%d) timed out after %d ms", c->name, api_name(rq->api_key),
		    rq->version, rq->corr, rq->timeout_ms);
		snprintf(why, sizeof(why), "%s: connection closed after "
		    "request %s v%d timed out", c->name, api_name(rq->api_key),
		    rq->version);
		log_warnx("%s", msg);
		conn_fail(c, KCONN_E_TRANSPORT, why, rq, KCONN_E_TIMEOUT, msg,
		    1);
		goto out;
	}
	if (next != 0)
		conn_arm(c, next);
out:
	conn_leave(c);
}

/* ---- sending --------------------------------------------------------- */

static void free_ref(const void *data, size_t len, void *extra)
{
	free((void *)(uintptr_t)data);
}

static void loan_release(const void *data, size_t len, void *extra)
{
	struct kconn_loan *l = extra;

	(void)data;
	(void)len;
	l->release(l);
}

/*
 * The request in w with its lent fields (w->refs) as one evbuffer: the
 * written bytes copied around the lent ones, which are added by reference
 * with a loan each.  NULL with err set when a loan or memory is refused
 * (the loans made are released).
 */
static struct evbuffer *lent_request(struct kconn *c, struct kw *w,
    const struct kconn_lender *ld, char *err, size_t errlen)
{
	struct evbuffer *eb = evbuffer_new();
	size_t at = 0;

	if (eb == NULL)
		goto oom;
	for (size_t i = 0; i < w->nrefs; i++) {
		const struct kw_ref *r = &w->refs[i];
		struct kconn_loan *l;

		if (r->at > at && evbuffer_add(eb, w->buf + at, r->at - at) != 0)
			goto oom;
		at = r->at;
		if ((l = ld->lend(ld->arg, r->p, r->n)) == NULL) {
			snprintf(err, errlen, "%s: %zu request bytes could not be "
			    "lent", c->name, r->n);
			evbuffer_free(eb);
			return NULL;
		}
		if (evbuffer_add_reference(eb, r->p, r->n, loan_release, l) != 0) {
			l->release(l);
			goto oom;
		}
	}
	if (w->len > at && evbuffer_add(eb, w->buf + at, w->len - at) != 0)
		goto oom;
	return eb;
oom:
	snprintf(err, errlen, "out of memory");
	if (eb != NULL)
		evbuffer_free(eb);
	return NULL;
}

static int conn_queue(struct kconn *c, int16_t api_key, int16_t version,
    kconn_encode_fn enc, const void *msg, const void *raw, size_t rawlen,
    const struct kconn_lender *ld, int flags, int timeout_ms,
    kconn_resp_cb cb, void *arg, int internal, char *err, size_t errlen)
{
	struct kw w;
	struct kreq *rq = NULL;
	struct evbuffer *eb = NULL;
	uint8_t *bytes = NULL;
	size_t len = 0, slot;
	int flexible = api_flexible(api_key, version);
	int noresp = (flags & KCONN_F_NO_RESPONSE) != 0;
	const char *cid = c->cfg->client_id ? c->cfg->client_id : "mirrord";
	int rc = -1;

	kw_init(&w, c->cfg->max_request_bytes + 4);
	if (c->state == CS_CLOSED) {
		snprintf(err, errlen, "%s: connection is closed", c->name);
		goto out;
	}
	if (noresp && cb != NULL) {
		snprintf(err, errlen, "a request without response takes no "
		    "callback");
		goto out;
	}
	/* The handshake's own requests are never refused for the limits. */
	if (!noresp && !internal && c->nreq >= c->cfg->max_inflight) {
		snprintf(err, errlen, "%s: %d requests already in flight (the "
		    "limit)", c->name, c->nreq);
		goto out;
	}
	slot = kw_slot32(&w);
	if (ld != NULL)
		kw_lend(&w, ld->min);
	kw_i16(&w, api_key);
	kw_i16(&w, version);
	kw_i32(&w, c->next_corr);
	kw_str(&w, kstr_c(cid));
	if (flexible)
		kw_tags_empty(&w);
	if (enc != NULL) {
		if (enc(&w, version, msg) != 0 && !w.err)
			kw_fail(&w, "the encoder refused the message");
	} else if (rawlen > 0) {
		kw_raw(&w, raw, rawlen);
	}
	if (w.err) {
		snprintf(err, errlen, "%s: cannot encode %s v%d request: %s",
		    c->name, api_name(api_key), version,
		    w.why ? w.why : "error");
		goto out;
	}
	kw_put32(&w, slot, (int32_t)(kw_size(&w) - 4));
	if (w.nrefs > 0) {
		len = kw_size(&w);
	} else if ((bytes = kw_take(&w, &len)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (!internal && c->nreq > 0 &&
	    c->req_bytes + len > c->cfg->max_inflight_bytes) {
		snprintf(err, errlen, "%s: %zu request bytes already in flight, "
		    "%zu more would pass the limit of %zu", c->name,
		    c->req_bytes, len, c->cfg->max_inflight_bytes);
		goto out;
	}
	if (bytes == NULL && (eb = lent_request(c, &w, ld, err, errlen)) == NULL)
		goto out;
	if (!noresp) {
		rq = calloc(1, sizeof(*rq));
		if (rq == NULL) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		rq->corr = c->next_corr;
		rq->api_key = api_key;
		rq->version = version;
		rq->flexible = flexible;
		rq->timeout_ms = timeout_ms > 0 ? timeout_ms :
		    c->cfg->request_timeout_ms;
		rq->deadline_ms = clock_mono_ms() + rq->timeout_ms;
		rq->bytes = len;
		rq->keep = (flags & KCONN_F_KEEP_ON_TIMEOUT) != 0;
		rq->cb = cb;
		rq->arg = arg;
	} else {
		c->noresp[c->noresp_next] = c->next_corr;
		c->noresp_next = (c->noresp_next + 1) % KCONN_NORESP_RING;
		if (c->noresp_n < KCONN_NORESP_RING)
			c->noresp_n++;
	}
	c->next_corr = c->next_corr == INT32_MAX ? 0 : c->next_corr + 1;

	if (c->state == CS_READY || internal) {
		if (eb != NULL ? evbuffer_add_buffer(bufferevent_get_output(c->bev),
			eb) != 0 : evbuffer_add_reference(bufferevent_get_output(
			c->bev), bytes, len, free_ref, NULL) != 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		bytes = NULL;
		if (rq != NULL) {
			rq->sent_us = now_us();
			TAILQ_INSERT_TAIL(&c->inflight, rq, link);
		}
	} else {
		if (eb != NULL ? evbuffer_add_buffer(c->pending, eb) != 0 :
		    evbuffer_add_reference(c->pending, bytes, len, free_ref,
			NULL) != 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		bytes = NULL;
		if (rq != NULL)
			TAILQ_INSERT_TAIL(&c->waitq, rq, link);
	}
	if (rq != NULL) {
		c->nreq++;
		c->req_bytes += len;
		conn_arm(c, rq->deadline_ms);
		rq = NULL;
	}
	rc = 0;
out:
	free(rq);
	free(bytes);
	if (eb != NULL)
		evbuffer_free(eb); /* empty once moved; else releases its loans */
	kw_fini(&w);
	return rc;
}

int kconn_send(struct kconn *c, int16_t api_key, int16_t version,
    kconn_encode_fn enc, const void *msg, int flags, int timeout_ms,
    kconn_resp_cb cb, void *arg, char *err, size_t errlen)
{
	if (enc == NULL) {
		snprintf(err, errlen, "kconn_send needs an encoder");
		return -1;
	}
	return conn_queue(c, api_key, version, enc, msg, NULL, 0, NULL, flags,
	    timeout_ms, cb, arg, 0, err, errlen);
}

int kconn_send_lent(struct kconn *c, int16_t api_key, int16_t version,
    kconn_encode_fn enc, const void *msg, const struct kconn_lender *ld,
    int flags, int timeout_ms, kconn_resp_cb cb, void *arg, char *err,
    size_t errlen)
{
	if (enc == NULL || ld == NULL || ld->lend == NULL) {
		snprintf(err, errlen, "kconn_send_lent needs an encoder and a "
		    "lender");
		return -1;
	}
	return conn_queue(c, api_key, version, enc, msg, NULL, 0,
	    ld->min > 0 ? ld : NULL, flags, timeout_ms, cb, arg, 0, err,
	    errlen);
}

int kconn_send_msg(struct kconn *c, int16_t api_key, int16_t version,
    const void *msg, int flags, int timeout_ms, kconn_resp_cb cb, void *arg,
    char *err, size_t errlen)
{
	const struct kp_api *api = kp_api_find(api_key);

	if (api == NULL || api->request_encode == NULL) {
		snprintf(err, errlen, "ApiKey %d has no request encoder",
		    (int)api_key);
		return -1;
	}
	return kconn_send(c, api_key, version, api->request_encode, msg, flags,
	    timeout_ms, cb, arg, err, errlen);
}

int kconn_send_raw(struct kconn *c, int16_t api_key, int16_t version,
    const void *body, size_t len, int flags, int timeout_ms,
    kconn_resp_cb cb, void *arg, char *err, size_t errlen)
{
	return conn_queue(c, api_key, version, NULL, NULL, body, len, NULL, flags,
	    timeout_ms, cb, arg, 0, err, errlen);
}

/* ---- handshake: ApiVersions, SASL ------------------------------------ */

static void conn_ready(struct kconn *c)
{
	struct kreq *rq;
	int64_t now = now_us();

	conn_set_state(c, CS_READY, "handshake done");
	/* Everything queued before READY goes out now, in order. */
	TAILQ_FOREACH(rq, &c->waitq, link)
		rq->sent_us = now;
	TAILQ_CONCAT(&c->inflight, &c->waitq, link);
	if (evbuffer_get_length(c->pending) > 0)
		bufferevent_write_buffer(c->bev, c->pending);
	if (c->cb != NULL)
		c->cb(c, KCONN_EV_READY, KCONN_E_OK, NULL, c->cbarg);
}

static void internal_send(struct kconn *c, int16_t key, int16_t version,
    const void *body, size_t len, kconn_resp_cb cb)
{
	char err[KCONN_MAX_ERRSTR];

	if (conn_queue(c, key, version, NULL, NULL, body, len, NULL, 0,
		c->cfg->connect_timeout_ms, cb, NULL, 1, err, sizeof(err)) != 0)
		conn_fail(c, KCONN_E_TRANSPORT, err, NULL, 0, NULL, 1);
}

/* Copies at most 200 printable bytes of a peer's string for a message. */
static void peer_text(char *dst, size_t len, struct kstr s)
{
	size_t n = 0;

	if (s.len <= 0) {
		snprintf(dst, len, "(no message)");
		return;
	}
	for (int32_t i = 0; i < s.len && i < 200 && n + 1 < len; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		dst[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	dst[n] = '\0';
}

static void sasl_start(struct kconn *c);
static void apiversions_send(struct kconn *c, int version);

int kconn_apiversions_parse(struct kr *r, int version,
    struct kconn_api_range *ranges, int *retry_version, int16_t *errcode)
{
	int16_t ec;
	int32_t n;

	*errcode = 0;
	for (int i = 0; i < KCONN_MAX_API_KEY; i++)
		ranges[i].min = ranges[i].max = -1;
	ec = kr_i16(r);
	if (r->err)
		return -1;
	*errcode = ec;
	if (ec == 35 && version > 0) {
		/*
		 * KIP-511: a broker that does not know our version answers in
		 * the v0 shape with its own ApiVersions range.  The librdkafka
		 * 2.0.2 mock writes a 1-byte count instead, so when the v0
		 * shape does not parse, trust only the error code and use v0.
		 */
		struct kr r0 = *r;
		int next = 0;

		n = kr_array(&r0);
		for (int32_t i = 0; i < n && !r0.err; i++) {
			int16_t key = kr_i16(&r0);
			(void)kr_i16(&r0);
			int16_t mx = kr_i16(&r0);
			if (!r0.err && key == API_APIVERSIONS && mx >= 0 &&
			    mx < version)
				next = mx;
		}
		*retry_version = r0.err ? 0 : next;
		return 1;
	}
	if (ec != 0) {
		kr_fail(r, "ApiVersions error code");
		return -1;
	}
	n = version >= 3 ? kr_carray(r) : kr_array(r);
	if (n < 0 && !r->err)
		kr_fail(r, "null ApiVersions array");
	for (int32_t i = 0; i < n && !r->err; i++) {
		size_t off = kr_off(r);
		int16_t key = kr_i16(r), mn = kr_i16(r), mx = kr_i16(r);

		if (version >= 3)
			kr_skip_tagged(r);
		if (r->err)
			break;
		if (mn < 0 || mx < mn) {
			kr_fail_at(r, off, "ApiVersions range with min < 0 or "
			    "min > max");
			break;
		}
		if (key >= 0 && key < KCONN_MAX_API_KEY) {
			ranges[key].min = mn;
			ranges[key].max = mx;
		}
	}
	if (version >= 1)
		(void)kr_i32(r); /* throttle_time_ms */
	if (version >= 3)
		kr_skip_tagged(r);
	return r->err ? -1 : 0;
}

static void apiversions_cb(struct kconn *c, int err, const char *errstr,
    struct kr *r, void *arg)
{
	int v = c->av_version, next = 0, rc;
	int16_t ec;

	if (err != KCONN_E_OK)
		return; /* the connection is already failing */
	rc = kconn_apiversions_parse(r, v, c->apis, &next, &ec);
	if (rc == 1 && !c->av_retried) {
		c->av_retried = 1;
		log_debug("kconn %s: ApiVersions v%d unsupported, retrying "
		    "with v%d", c->name, v, next);
		apiversions_send(c, next);
		return;
	}
	if (ec != 0) {
		conn_failf(c, KCONN_E_UNSUPPORTED, "ApiVersions v%d failed: "
		    "error %d", v, ec);
		return;
	}
	if (rc != 0) {
		log_warnx("kconn %s: malformed ApiVersions v%d response at "
		    "byte %zu: %s", c->name, v, r->err_off, r->why);
		conn_failf(c, KCONN_E_PROTOCOL, "malformed ApiVersions v%d "
		    "response at byte %zu: %s", v, r->err_off,
		    r->why ? r->why : "?");
		return;
	}
	c->have_apis = 1;
	if (kconn_security_sasl(c->cfg->security)) {
		sasl_start(c);
		return;
	}
	conn_ready(c);
}

static void apiversions_send(struct kconn *c, int version)
{
	struct kw w;
	uint8_t *body;
	size_t len = 0;

	c->av_version = version;
	conn_set_state(c, CS_APIVERSIONS, "connected");
	kw_init(&w, 1024);
	if (version >= 3) {
		kw_cstr(&w, kstr_c("mirrord"));
		kw_cstr(&w, kstr_c(PACKAGE_VERSION));
		kw_tags_empty(&w);
	}
	body = kw_take(&w, &len);
	kw_fini(&w);
	internal_send(c, API_APIVERSIONS, (int16_t)version, body, len,
	    apiversions_cb);
	free(body);
}

static void sasl_auth_send(struct kconn *c, const void *tok, size_t len);

static void sasl_auth_cb(struct kconn *c, int err, const char *errstr,
    struct kr *r, void *arg)
{
	int16_t ec;
	int64_t lifetime = 0;
	struct kstr emsg;
	struct kbytes tok;
	char text[256], e2[KCONN_MAX_ERRSTR];
	const char *msg;
	size_t mlen;

	if (err != KCONN_E_OK)
		return;
	ec = kr_i16(r);
	emsg = kr_str(r);
	tok = kr_bytes(r);
	if (c->sasl_auth_version >= 1)
		lifetime = kr_i64(r);
	if (r->err) {
		conn_failf(c, KCONN_E_PROTOCOL, "malformed SaslAuthenticate "
		    "response at byte %zu: %s", r->err_off, r->why);
		return;
	}
	if (ec != 0) {
		peer_text(text, sizeof(text), emsg);
		conn_failf(c, KCONN_E_AUTH, "SASL/%s authentication as \"%s\" "
		    "failed: %s: %s", ksasl_mech_name(c->cfg->sasl_mech),
		    c->cfg->sasl_username, kerr_name(ec), text);
		return;
	}
	if (lifetime > 0 && !c->lifetime_logged) {
		/* KIP-368 re-authentication is not implemented: the broker
		 * will close the connection and the owner reconnects. */
		log_info("kconn %s: the broker ends SASL sessions after %lld "
		    "ms; mirrord reconnects then instead of re-authenticating",
		    c->name, (long long)lifetime);
		c->lifetime_logged = 1;
	}
	if (c->cfg->sasl_mech == KSASL_PLAIN) {
		conn_ready(c);
		return;
	}
	if (tok.len < 0)
		tok.len = 0;
	if (c->sasl_step == 1) {
		if (ksasl_scram_client_final(c->scram, tok.p, (size_t)tok.len,
			&msg, &mlen, e2, sizeof(e2)) != 0) {
			conn_failf(c, KCONN_E_AUTH, "%s", e2);
			return;
		}
		c->sasl_step = 2;
		sasl_auth_send(c, msg, mlen);
		return;
	}
	if (ksasl_scram_verify_server(c->scram, tok.p, (size_t)tok.len, e2,
		sizeof(e2)) != 0) {
		conn_failf(c, KCONN_E_AUTH, "%s", e2);
		return;
	}
	ksasl_scram_free(c->scram);
	c->scram = NULL;
	conn_ready(c);
}

static void sasl_auth_send(struct kconn *c, const void *tok, size_t len)
{
	struct kw w;
	uint8_t *body;
	size_t blen = 0;

	kw_init(&w, len + 16);
	kw_bytes(&w, (struct kbytes){ tok, (int32_t)len });
	body = kw_take(&w, &blen);
	kw_fini(&w);
	internal_send(c, API_SASL_AUTHENTICATE, c->sasl_auth_version, body,
	    blen, sasl_auth_cb);
	if (body != NULL) {
		OPENSSL_cleanse(body, blen);
		free(body);
	}
}

static void sasl_handshake_cb(struct kconn *c, int err, const char *errstr,
    struct kr *r, void *arg)
{
	int16_t ec;
	int32_t n;
	char list[256] = "", e2[KCONN_MAX_ERRSTR];
	size_t used = 0;
	const char *msg;
	size_t mlen;
	int v;

	if (err != KCONN_E_OK)
		return;
	ec = kr_i16(r);
	n = kr_array(r);
	for (int32_t i = 0; i < n && !r->err; i++) {
		struct kstr m = kr_str(r);
		char t[64];
		if (r->err)
			break;
		peer_text(t, sizeof(t), m);
		if (used + strlen(t) + 3 < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used,
			    "%s%s", used ? ", " : "", t);
	}
	if (r->err) {
		conn_failf(c, KCONN_E_PROTOCOL, "malformed SaslHandshake "
		    "response at byte %zu: %s", r->err_off, r->why);
		return;
	}
	if (ec != 0) {
		conn_failf(c, KCONN_E_AUTH, "broker does not enable SASL "
		    "mechanism %s (error %d; enabled: %s)",
		    ksasl_mech_name(c->cfg->sasl_mech), ec,
		    used ? list : "none");
		return;
	}
	v = kconn_pick_version(c, API_SASL_AUTHENTICATE, 0, 1);
	if (v < 0) {
		conn_failf(c, KCONN_E_UNSUPPORTED, "broker does not support "
		    "SaslAuthenticate v0-v1");
		return;
	}
	c->sasl_auth_version = (int16_t)v;
	conn_set_state(c, CS_SASL_AUTH, "mechanism accepted");
	if (c->cfg->sasl_mech == KSASL_PLAIN) {
		uint8_t *tok;
		size_t tlen;
		if (ksasl_plain_token(c->cfg->sasl_username,
			c->cfg->sasl_password, &tok, &tlen, e2,
			sizeof(e2)) != 0) {
			conn_failf(c, KCONN_E_AUTH, "%s", e2);
			return;
		}
		sasl_auth_send(c, tok, tlen);
		OPENSSL_cleanse(tok, tlen);
		free(tok);
		return;
	}
	c->scram = ksasl_scram_new(c->cfg->sasl_mech, c->cfg->sasl_username,
	    c->cfg->sasl_password, NULL, e2, sizeof(e2));
	if (c->scram == NULL ||
	    ksasl_scram_client_first(c->scram, &msg, &mlen) != 0) {
		conn_failf(c, KCONN_E_AUTH, "%s", c->scram ? "out of memory" :
		    e2);
		return;
	}
	c->sasl_step = 1;
	sasl_auth_send(c, msg, mlen);
}

static void sasl_start(struct kconn *c)
{
	struct kw w;
	uint8_t *body;
	size_t len = 0;

	if (kconn_pick_version(c, API_SASL_HANDSHAKE, 1, 1) < 0) {
		conn_failf(c, KCONN_E_UNSUPPORTED, "broker does not support "
		    "SaslHandshake v1 (is its listener SASL?)");
		return;
	}
	conn_set_state(c, CS_SASL_HANDSHAKE, "ApiVersions done");
	kw_init(&w, 64);
	kw_str(&w, kstr_c(ksasl_mech_name(c->cfg->sasl_mech)));
	body = kw_take(&w, &len);
	kw_fini(&w);
	internal_send(c, API_SASL_HANDSHAKE, 1, body, len, sasl_handshake_cb);
	free(body);
}

/* ---- receiving ------------------------------------------------------- */

static int noresp_known(const struct kconn *c, int32_t corr)
{
	for (unsigned i = 0; i < c->noresp_n; i++)
		if (c->noresp[i] == corr)
			return 1;
	return 0;
}

/* One complete response frame (without its size prefix). */
static void conn_frame(struct kconn *c, const uint8_t *p, size_t len)
{
	struct kreq *rq = TAILQ_FIRST(&c->inflight);
	struct kr r;
	int32_t corr;

	kr_init(&r, p, len);
	corr = kr_i32(&r);
	if (rq == NULL || rq->corr != corr) {
		if (noresp_known(c, corr)) {
			log_debug("kconn %s: dropping a response to a request "
			    "sent without one expected (correlation id %d)",
			    c->name, corr);
			return;
		}
		if (rq == NULL) {
			log_warnx("kconn %s: unexpected response with "
			    "correlation id %d: nothing in flight", c->name, corr);
			conn_failf(c, KCONN_E_PROTOCOL, "unexpected response "
			    "with correlation id %d: nothing in flight", corr);
		} else {
			log_warnx("kconn %s: response with correlation id %d, "
			    "expected %d (%s v%d)", c->name, corr, rq->corr,
			    api_name(rq->api_key), rq->version);
			conn_failf(c, KCONN_E_PROTOCOL, "response with "
			    "correlation id %d, expected %d (%s v%d)", corr,
			    rq->corr, api_name(rq->api_key), rq->version);
		}
		return;
	}
	/* ApiVersions answers with response header v0 at every version. */
	if (rq->flexible && rq->api_key != API_APIVERSIONS)
		kr_skip_tagged(&r);
	if (r.err) {
		conn_failf(c, KCONN_E_PROTOCOL, "malformed response header for "
		    "%s v%d at byte %zu: %s", api_name(rq->api_key),
		    rq->version, r.err_off, r.why);
		return;
	}
	TAILQ_REMOVE(&c->inflight, rq, link);
	/* nreq and req_bytes count the requests queued and in flight. */
	MR_ASSERT(c->nreq > 0 && c->req_bytes >= rq->bytes);
	c->nreq--;
	c->req_bytes -= rq->bytes;
	req_finish(c, rq, KCONN_E_OK, NULL, &r, len + 4);
}

/* The answer (size bytes after its length) to rq, the oldest request in
 * flight, which timed out (kreq.late): rq goes, the answer is discarded. */
static void late_drop(struct kconn *c, struct kreq *rq, size_t size)
{
	log_info("kconn %s: the answer to %s v%d (correlation id %d, %zu bytes) "
	    "came after its timeout: discarded", c->name, api_name(rq->api_key),
	    rq->version, rq->corr, size);
	MR_ASSERT(rq->late && c->nreq > 0 && c->req_bytes >= rq->bytes &&
	    c->nlate > 0);
	TAILQ_REMOVE(&c->inflight, rq, link);
	c->nreq--;
	c->req_bytes -= rq->bytes;
	c->nlate--;
	c->late_answers++;
	free(rq);
}

/*
 * The next frame answers the oldest request in flight.  When that one timed
 * out (kreq.late), its answer is dropped as it arrives, never held whole:
 * 1 when the frame (size bytes after the length) is such an answer and
 * c->skip now counts what is left of it.
 */
static int conn_skip_late(struct kconn *c, struct evbuffer *in, size_t avail,
    uint32_t size)
{
	struct kreq *rq = TAILQ_FIRST(&c->inflight);
	uint8_t hdr[8];

	if (rq == NULL || !rq->late || avail < 8)
		return 0;
	evbuffer_copyout(in, hdr, 8);
	if ((int32_t)be32_load(hdr + 4) != rq->corr)
		return 0; /* conn_frame() says what is wrong */
	late_drop(c, rq, size);
	c->skip = (size_t)size + 4;
	return 1;
}

/*
 * Reading large frames.  libevent 2.1 reads a socket at most 4 KiB at a
 * time (one readv, one FIONREAD ioctl and one trip through the event loop
 * each, into malloc'd chains), and evbuffer_pullup() then copies the chains
 * of a frame into one block: for Fetch responses of megabytes that was most
 * of mirrord's CPU.  So on a plain TCP connection, once the size prefix and
 * correlation id of a frame of KCONN_FRAME_DIRECT bytes or more are in and
 * the rest is not, the frame gets a buffer of its own: what the bufferevent
 * holds of it is moved there, the bufferevent stops reading, and an event
 * of kconn's own (ev_frame) reads the rest straight from the socket into
 * place, with plain readiness: each wake-up takes everything the kernel
 * has, in one recv() of up to the rest of the frame.  The kernel's receive
 * buffer and window are left alone: SO_RCVLOWAT (tried, to wake less often)
 * made Linux clamp the receive window to the low-water mark, so the broker
 * sent one low-water mark at a time and waited for mirrord to read it, which
 * cost more MB/s than the wake-ups it saved.  When the frame is complete the
 * bufferevent reads again and the frame is handed on.  Bytes stay in order:
 * nothing else reads the socket meanwhile.  TLS connections keep the
 * bufferevent's reading (their bytes are records, not frames).
 */
#define KCONN_FRAME_DIRECT (64 * 1024)
#define KCONN_FRAME_KEEP (16 * 1024 * 1024)

static void frame_ev_cb(evutil_socket_t fd, short what, void *arg);

/* Starts reading a frame of len bytes (its size prefix consumed): 0, or -1
 * out of memory. */
static int frame_start(struct kconn *c, size_t len)
{
	if (c->ev_frame == NULL) {
		c->ev_frame = event_new(c->base, bufferevent_getfd(c->bev),
		    EV_READ | EV_PERSIST, frame_ev_cb, c);
		if (c->ev_frame == NULL)
			return -1;
	}
	if (c->frame_cap < len) {
		free(c->frame);
		c->frame_cap = 0;
		if ((c->frame = malloc(len)) == NULL)
			return -1;
		c->frame_cap = len;
	}
	c->frame_len = len;
	c->frame_have = 0;
	c->frame_on = 1;
	return 0;
}

/*
 * One recv() of the rest of the frame: 0, or -1 when the connection failed
 * (closed by the broker, or an error).  A short read means the socket had
 * no more; ev_frame is level-triggered and wakes again for what comes next.
 */
static int frame_recv(struct kconn *c)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	ssize_t n;

	/* Only the rest of the frame, into its own buffer. */
	MR_ASSERT(c->frame_on && c->frame_have < c->frame_len &&
	    c->frame_len <= c->frame_cap);
	do
		n = recv(fd, c->frame + c->frame_have,
		    c->frame_len - c->frame_have, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		c->frame_have += (size_t)n;
		return 0;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n == 0)
		conn_failf(c, KCONN_E_TRANSPORT, "connection closed by the "
		    "broker %zu bytes into a %zu-byte response", c->frame_have,
		    c->frame_len);
	else
		conn_failf(c, KCONN_E_TRANSPORT, "reading a %zu-byte response: "
		    "%s", c->frame_len, strerror(errno));
	return -1;
}

/*
 * The frame being read is complete: reading goes back to the bufferevent
 * and the frame is handed on (or dropped, when its request timed out while
 * it came).  Called inside conn_enter().
 */
static void frame_done(struct kconn *c)
{
	struct kreq *rq = TAILQ_FIRST(&c->inflight);

	MR_ASSERT(c->frame_on && c->frame_have == c->frame_len);
	c->frame_on = 0;
	if (event_pending(c->ev_frame, EV_READ, NULL)) {
		event_del(c->ev_frame);
		bufferevent_enable(c->bev, EV_READ);
	}
	if (rq != NULL && rq->late &&
	    (int32_t)be32_load(c->frame) == rq->corr)
		late_drop(c, rq, c->frame_len);
	else {
		c->frame_giving = 1;
		conn_frame(c, c->frame, c->frame_len);
		c->frame_giving = 0;
	}
	if (c->frame_cap > KCONN_FRAME_KEEP) {
		free(c->frame);
		c->frame = NULL;
		c->frame_cap = 0;
	}
}

/* Waits for the rest of the frame on ev_frame (the bufferevent does not read
 * meanwhile).  Called inside conn_enter(). */
static void frame_wait(struct kconn *c)
{
	if (event_pending(c->ev_frame, EV_READ, NULL))
		return;
	bufferevent_disable(c->bev, EV_READ);
	if (event_add(c->ev_frame, NULL) != 0)
		conn_failf(c, KCONN_E_TRANSPORT, "cannot wait for the rest of "
		    "a %zu-byte response", c->frame_len);
}

static void frame_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kconn *c = arg;

	(void)fd;
	(void)what;
	conn_enter(c);
	if (c->state != CS_CLOSED && !c->freeing && c->frame_on &&
	    frame_recv(c) == 0 && c->frame_have == c->frame_len)
		frame_done(c);
	conn_leave(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct kconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	conn_enter(c);
	while (c->state != CS_CLOSED && !c->freeing) {
		size_t avail = evbuffer_get_length(in);
		uint8_t hdr[4];
		uint32_t size;
		const uint8_t *frame;

		if (c->skip > 0) {
			/* The rest of a late answer: dropped as it comes. */
			size_t n = MIN(avail, c->skip);

			evbuffer_drain(in, n);
			c->skip -= n;
			if (c->skip > 0)
				break;
			continue;
		}
		if (avail < 4)
			break;
		evbuffer_copyout(in, hdr, 4);
		size = be32_load(hdr);
		if (!c->tls && c->state == CS_APIVERSIONS &&
		    (hdr[0] == 0x15 || hdr[0] == 0x16) && hdr[1] == 0x03) {
			/* A TLS record (alert or handshake), not a frame. */
			conn_failf(c, KCONN_E_PROTOCOL, "the broker answered "
			    "with TLS: this listener needs security.protocol "
			    "ssl or sasl_ssl, not %s",
			    kconn_security_name(c->cfg->security));
			break;
		}
		if (size > c->cfg->max_response_bytes || size > INT32_MAX) {
			log_warnx("kconn %s: response frame of %u bytes passes "
			    "the limit of %zu", c->name, size,
			    c->cfg->max_response_bytes);
			conn_failf(c, KCONN_E_PROTOCOL, "response frame of %u "
			    "bytes passes the limit of %zu (receive.message."
			    "max.bytes)", size, c->cfg->max_response_bytes);
			break;
		}
		if (size < 4) {
			conn_failf(c, KCONN_E_PROTOCOL, "response frame of %u "
			    "bytes cannot hold a correlation id", size);
			break;
		}
		if (conn_skip_late(c, in, avail, size))
			continue;
		if (avail - 4 < size) {
			int n;

			/* 8 bytes: conn_skip_late() has seen the correlation
			 * id. */
			if (c->tls || size < KCONN_FRAME_DIRECT || avail < 8)
				break;
			if (frame_start(c, size) != 0) {
				conn_failf(c, KCONN_E_TRANSPORT, "out of memory "
				    "reading a %u-byte response", size);
				break;
			}
			evbuffer_drain(in, 4);
			n = evbuffer_remove(in, c->frame, size);
			c->frame_have = n > 0 ? (size_t)n : 0;
			if (frame_recv(c) != 0)
				break;
			if (c->frame_have < c->frame_len) {
				frame_wait(c);
				break;
			}
			frame_done(c);
			continue;
		}
		frame = evbuffer_pullup(in, (ev_ssize_t)size + 4);
		if (frame == NULL) {
			conn_failf(c, KCONN_E_TRANSPORT, "out of memory reading "
			    "a %u-byte response", size);
			break;
		}
		conn_frame(c, frame + 4, size);
		/* The bufferevent outlives a close while we are busy. */
		evbuffer_drain(in, (size_t)size + 4);
	}
	conn_leave(c);
}

static void lower_first(char *s)
{
	if (s[0] != '\0' && s[1] != '\0' && !isupper((unsigned char)s[1]))
		s[0] = (char)tolower((unsigned char)s[0]);
}

/*
 * Requests go out as soon as they are written.  With Nagle's algorithm a
 * request smaller than a segment written while an earlier one is not yet
 * acknowledged waits for that acknowledgement, which the broker may delay
 * (delayed ACK) when it has nothing to answer yet: a pipelined Produce, a
 * metadata-log append behind a Fetch that waits for records.  Kafka's own
 * clients and brokers disable it too.  A failure only costs latency.
 */
static void set_nodelay(struct kconn *c)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	int one = 1;

	if (fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		sizeof(one)) != 0)
		log_debug("kconn %s: TCP_NODELAY: %s", c->name,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct kconn *c = arg;
	char why[256];

	conn_enter(c);
	if (what & BEV_EVENT_CONNECTED) {
		log_debug("kconn %s: connected%s", c->name,
		    c->tls ? " (TLS)" : "");
		set_nodelay(c);
		apiversions_send(c, KCONN_APIVERSIONS_MAX);
		goto out;
	}
	if (what & BEV_EVENT_EOF) {
		conn_failf(c, KCONN_E_TRANSPORT, "connection closed by the "
		    "broker%s%s", c->state == CS_READY ? "" : " ",
		    state_doing(c->state));
		goto out;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		int dnserr = bufferevent_socket_get_dns_error(bev);
		int serr = EVUTIL_SOCKET_ERROR();
		unsigned long sslerr = 0;
		int kerr = KCONN_E_TRANSPORT;

		if (c->tls)
			sslerr = bufferevent_get_openssl_error(bev);
		if (dnserr != 0) {
			snprintf(why, sizeof(why), "cannot resolve %s: %s",
			    c->host, evutil_gai_strerror(dnserr));
		} else if (sslerr != 0) {
			SSL *ssl = bufferevent_openssl_get_ssl(bev);
			long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
			char se[160];

			ERR_error_string_n(sslerr, se, sizeof(se));
			while (bufferevent_get_openssl_error(bev) != 0)
				;
			if (vr != X509_V_OK)
				snprintf(why, sizeof(why), "TLS handshake "
				    "failed: certificate verification: %s",
				    X509_verify_cert_error_string(vr));
			else
				snprintf(why, sizeof(why), "TLS failed: %s", se);
			kerr = KCONN_E_TLS;
		} else if (serr != 0) {
			snprintf(why, sizeof(why), "%s",
			    evutil_socket_error_to_string(serr));
			lower_first(why);
		} else {
			snprintf(why, sizeof(why), "connection error%s%s",
			    c->state == CS_READY ? "" : " ",
			    state_doing(c->state));
		}
		conn_failf(c, kerr, "%s", why);
	}
out:
	conn_leave(c);
}

/* ---- public ---------------------------------------------------------- */

struct kconn *kconn_new(struct event_base *base, struct evdns_base *dns,
    const struct kconn_config *cfg, const char *host, int port,
    kconn_event_cb cb, void *arg, char *err, size_t errlen)
{
	struct kconn *c = NULL;
	struct addrinfo hints, *ai = NULL;
	char portstr[16];
	int numeric = 0;

	if (port <= 0 || port > 65535 || host == NULL || host[0] == '\0') {
		snprintf(err, errlen, "bad broker address \"%s:%d\"",
		    host ? host : "", port);
		return NULL;
	}
	if (kconn_security_tls(cfg->security) && cfg->ssl_ctx == NULL) {
		snprintf(err, errlen, "TLS is configured but "
		    "kconn_config_prepare() was not called");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		goto oom;
	c->base = base;
	c->dns = dns;
	c->cfg = cfg;
	c->port = port;
	c->cb = cb;
	c->cbarg = arg;
	c->tls = kconn_security_tls(cfg->security);
	c->sasl_auth_version = 0;
	TAILQ_INIT(&c->inflight);
	TAILQ_INIT(&c->waitq);
	for (int i = 0; i < KCONN_MAX_API_KEY; i++)
		c->apis[i].min = c->apis[i].max = -1;
	c->host = strdup(host);
	c->pending = evbuffer_new();
	c->ev_timer = evtimer_new(base, timer_cb, c);
	c->ev_free = event_new(base, -1, 0, deferred_free_cb, c);
	if (c->host == NULL || c->pending == NULL || c->ev_timer == NULL ||
	    c->ev_free == NULL)
		goto oom;
	snprintf(c->name, sizeof(c->name), strchr(host, ':') ? "[%s]:%d" :
	    "%s:%d", host, port);
	c->state = CS_CONNECTING;
	c->connect_deadline = clock_mono_ms() + cfg->connect_timeout_ms;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	numeric = getaddrinfo(host, portstr, &hints, &ai) == 0;
	if (!numeric && dns == NULL) {
		snprintf(err, errlen, "%s: a host name needs a DNS resolver",
		    c->name);
		goto fail;
	}

	if (c->tls) {
		SSL *ssl = SSL_new(cfg->ssl_ctx);
		if (ssl == NULL)
			goto oom;
		if (!numeric)
			SSL_set_tlsext_host_name(ssl, host);
		if (cfg->ssl_verify_peer && cfg->ssl_verify_hostname) {
			if (numeric)
				X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
				    host);
			else
				SSL_set1_host(ssl, host);
		}
		c->bev = bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (c->bev == NULL) {
			SSL_free(ssl);
			goto oom;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	} else {
		c->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (c->bev == NULL)
			goto oom;
		/* libevent writes 16 KiB per wake-up unless told otherwise:
		 * a Produce of megabytes would take hundreds of writev calls
		 * and loop iterations.  The kernel takes what fits. */
		bufferevent_set_max_single_write(c->bev, KCONN_WRITE_MAX);
	}
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	conn_arm(c, c->connect_deadline);
	if (numeric) {
		if (bufferevent_socket_connect(c->bev, ai->ai_addr,
			(int)ai->ai_addrlen) != 0) {
			snprintf(err, errlen, "%s: cannot start connecting: %s",
			    c->name, evutil_socket_error_to_string(
				EVUTIL_SOCKET_ERROR()));
			goto fail;
		}
	} else if (bufferevent_socket_connect_hostname(c->bev, dns, AF_UNSPEC,
		       host, port) != 0) {
		snprintf(err, errlen, "%s: cannot start resolving", c->name);
		goto fail;
	}
	if (ai != NULL)
		freeaddrinfo(ai);
	log_debug("kconn %s: connecting (%s)", c->name,
	    kconn_security_name(cfg->security));
	return c;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	if (ai != NULL)
		freeaddrinfo(ai);
	if (c != NULL)
		conn_really_free(c);
	return NULL;
}

void kconn_close(struct kconn *c, int err, const char *why)
{
	char msg[KCONN_MAX_ERRSTR];

	snprintf(msg, sizeof(msg), "%s: %s", c->name,
	    why ? why : "closed by its owner");
	conn_enter(c);
	conn_fail(c, err, msg, NULL, 0, NULL, 1);
	conn_leave(c);
}

void kconn_set_event_arg(struct kconn *c, void *arg)
{
	c->cbarg = arg;
}

void kconn_free(struct kconn *c)
{
	char msg[KCONN_MAX_ERRSTR];

	if (c == NULL || c->freeing)
		return;
	snprintf(msg, sizeof(msg), "%s: connection freed by its owner",
	    c->name);
	c->freeing = 1; /* no event callback from here on */
	conn_enter(c);
	conn_fail(c, KCONN_E_CLOSED, msg, NULL, 0, NULL, 0);
	if (--c->busy == 0)
		conn_really_free(c); /* not inside any callback of c */
	/* else the outermost conn_leave() schedules the deferred free */
}

int kconn_pick_version(const struct kconn *c, int16_t api_key, int16_t our_min,
    int16_t our_max)
{
	int16_t mn, mx, hi;

	if (kconn_api_range(c, api_key, &mn, &mx) != 0)
		return -1;
	hi = MIN(mx, our_max);
	if (hi < MAX(mn, our_min))
		return -1;
	return hi;
}

int kconn_api_range(const struct kconn *c, int16_t api_key, int16_t *min,
    int16_t *max)
{
	if (!c->have_apis || api_key < 0 || api_key >= KCONN_MAX_API_KEY ||
	    c->apis[api_key].min < 0)
		return -1;
	*min = c->apis[api_key].min;
	*max = c->apis[api_key].max;
	return 0;
}

int kconn_is_ready(const struct kconn *c)
{
	return c->state == CS_READY;
}

int kconn_is_closed(const struct kconn *c)
{
	return c->state == CS_CLOSED;
}

const char *kconn_name(const struct kconn *c)
{
	return c->name;
}

int kconn_inflight_count(const struct kconn *c)
{
	return c->nreq;
}

size_t kconn_inflight_bytes(const struct kconn *c)
{
	return c->req_bytes;
}

int kconn_late_count(const struct kconn *c)
{
	return c->nlate;
}

void *kconn_take_frame(struct kconn *c, size_t *size)
{
	void *p = c->frame;

	if (!c->frame_giving || p == NULL)
		return NULL;
	*size = c->frame_cap;
	c->frame = NULL;
	c->frame_cap = 0;
	return p;
}

int64_t kconn_late_answers(const struct kconn *c)
{
	return c->late_answers;
}

size_t kconn_unsent_bytes(const struct kconn *c)
{
	size_t n = evbuffer_get_length(c->pending);

	if (c->bev != NULL && c->state != CS_CLOSED)
		n += evbuffer_get_length(bufferevent_get_output(c->bev));
	return n;
}

int kconn_can_send(const struct kconn *c, size_t len)
{
	if (c->state == CS_CLOSED || c->nreq >= c->cfg->max_inflight)
		return 0;
	return c->nreq == 0 || c->req_bytes + len <= c->cfg->max_inflight_bytes;
}

int kconn_apiversions_version(const struct kconn *c)
{
	return c->have_apis ? c->av_version : -1;
}

void kconn_set_stats_cb(struct kconn *c, kconn_stats_fn fn, void *arg)
{
	c->stats = fn;
	c->stats_arg = arg;
}
