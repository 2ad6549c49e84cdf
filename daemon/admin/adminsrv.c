/*
 * adminsrv.c: see adminsrv.h.
 *
 * Ownership: the server owns its connections; a connection owns at most one
 * request at a time.  When a peer disconnects while its request is still
 * being handled, the connection is marked dead and freed when the handler
 * answers (never inside a libevent callback of its own bufferevent).
 *
 * Requests of a connection are started by conn_pump(), a loop with a budget
 * that re-arms itself through pump_ev; an answer never starts the next
 * request itself (it schedules pump_ev), so neither a pipeline of thousands
 * of requests nor handlers that answer at once grow the stack.
 *
 * Memory: srv->buffered counts the input and output buffers of all
 * connections plus the frames of requests in flight.  Each connection's
 * input is capped with a read high-watermark (conn_update()), its output by
 * OUTPUT_HIGH_WATER (reading stops past it); the total is checked after
 * every read and every answer (enforce_total()).
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "adminauth.h"
#include "adminsrv.h"
#include "compat.h"
#include "kbuf.h"
#include "kproto.h"
#include "log.h"

/* Past this much unsent output we stop reading requests from the peer. */
#define OUTPUT_HIGH_WATER (4u << 20)
/* Requests one conn_pump() call starts before it yields to the loop. */
#define PUMP_BUDGET 64

/* What the connection's timer is waiting for. */
enum conn_timer {
	TIMER_NONE,    /* a request is being handled: the handler's business */
	TIMER_IDLE,    /* nothing buffered: idle_timeout_ms since the last activity */
	TIMER_READ,    /* part of a frame buffered: request_timeout_ms since it began */
};

/* A peer's address without its port, for the per-address limit. */
struct conn_ip {
	int family;
	uint8_t b[16];
};

struct adminsrv_conn;

struct adminsrv_req {
	struct adminsrv_conn *conn;
	int16_t api_key;
	int16_t api_version;
	int32_t correlation_id;
	struct kstr client_id;
	uint8_t *frame; /* the whole request, owned */
	size_t frame_len;
	struct kr body;
	struct karena *arena;
};

struct adminsrv_conn {
	TAILQ_ENTRY(adminsrv_conn) link;
	struct adminsrv *srv;
	struct bufferevent *bev;
	char peer[INET6_ADDRSTRLEN + 8];
	char principal[512];      /* "User:..." once authenticated */
	struct adminsrv_req *cur; /* the request being handled, if any */
	int dead;                 /* peer gone; free when cur is answered */
	int closing;              /* close once the output is flushed */
	struct adminauth_conn *auth; /* login state (adminauth) */
	struct event *free_ev;    /* frees the struct outside any callback */
	struct event *pump_ev;    /* runs conn_pump() from the loop */
	struct event *timer_ev;   /* idle / request-read deadline */
	struct conn_ip ip;
	int pumping;              /* inside conn_pump() */
	enum conn_timer timer;    /* what timer_ev is armed for */
	uint64_t nreqs;           /* requests started so far */
	uint64_t timer_nreqs;     /* nreqs when the read deadline was armed */
	size_t accounted;         /* input bytes counted in srv->buffered */
	size_t out_accounted;     /* output bytes counted there (conn_out_cb) */
	struct evbuffer_cb_entry *out_cb;
	int64_t last_active_ms;   /* last read or write progress */
};

struct adminsrv {
	struct event_base *base;
	struct evconnlistener *lst;
	struct adminsrv_opts opts;
	int port;
	int nconns;               /* open (not dead) connections */
	size_t buffered;          /* input buffers + frames in flight, bytes */
	TAILQ_HEAD(, adminsrv_conn) conns;
};

static const char *const reject_names[] = {
#define X(e, s) [ADMINSRV_REJECT_##e] = s,
	ADMINSRV_REJECTS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(reject_names) == ADMINSRV_REJECT_COUNT, "reject table");

static void conn_read_cb(struct bufferevent *bev, void *arg);
static void conn_write_cb(struct bufferevent *bev, void *arg);
static void conn_event_cb(struct bufferevent *bev, short what, void *arg);
static void conn_pump(struct adminsrv_conn *c);

const char *adminsrv_reject_name(int reason)
{
	if (reason < 0 || reason >= ADMINSRV_REJECT_COUNT)
		return "unknown";
	return reject_names[reason];
}

static void observe(struct adminsrv *srv, int16_t key, int16_t err, int reject)
{
	if (srv->opts.observe != NULL)
		srv->opts.observe(srv->opts.arg, key, err, reject);
}

static void req_free(struct adminsrv_req *rq)
{
	if (rq == NULL)
		return;
	if (rq->conn != NULL)
		rq->conn->srv->buffered -= rq->frame_len;
	karena_free(rq->arena);
	free(rq->frame);
	free(rq);
}

/* Keeps srv->buffered in step with c's output buffer. */
static void conn_out_cb(struct evbuffer *buf,
    const struct evbuffer_cb_info *info, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)buf;
	c->srv->buffered = c->srv->buffered + info->n_added - info->n_deleted;
	c->out_accounted = c->out_accounted + info->n_added - info->n_deleted;
}

/* Frees the bufferevent; its buffers no longer count. */
static void conn_bev_free(struct adminsrv_conn *c)
{
	if (c->bev == NULL)
		return;
	if (c->out_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	c->out_cb = NULL;
	c->srv->buffered -= c->out_accounted;
	c->out_accounted = 0;
	bufferevent_free(c->bev);
	c->bev = NULL;
}

static void conn_free(struct adminsrv_conn *c)
{
	struct adminsrv *srv = c->srv;

	TAILQ_REMOVE(&srv->conns, c, link);
	if (!c->dead)
		srv->nconns--;
	srv->buffered -= c->accounted;
	conn_bev_free(c);
	req_free(c->cur);
	event_free(c->free_ev);
	event_free(c->pump_ev);
	event_free(c->timer_ev);
	adminauth_conn_free(c->auth);
	free(c);
}

static void conn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_free(arg);
}

/* Frees c from the loop: never inside a callback that still uses it. */
static void conn_free_later(struct adminsrv_conn *c)
{
	static const struct timeval now = { 0, 0 };

	evtimer_add(c->free_ev, &now);
}

/* Closes the socket now; the struct goes once no request refers to it. */
static void conn_close(struct adminsrv_conn *c)
{
	conn_bev_free(c);
	/* Its input is gone: it no longer counts against any limit. */
	c->srv->buffered -= c->accounted;
	c->accounted = 0;
	if (!c->dead)
		c->srv->nconns--;
	c->dead = 1;
	evtimer_del(c->timer_ev);
	c->timer = TIMER_NONE;
	if (c->cur == NULL)
		conn_free_later(c);
}

/* Logs "peer: reason; closing connection" once, counts it, closes. */
static void conn_drop(struct adminsrv_conn *c, int reason,
    const char *fmt, ...) PRINTF_LIKE(3, 4);
static void conn_drop(struct adminsrv_conn *c, int reason,
    const char *fmt, ...)
{
	char d[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d, sizeof(d), fmt, ap);
	va_end(ap);
	log_warnx("admin: %s: %s: %s; closing connection", c->peer,
	    adminsrv_reject_name(reason), d);
	observe(c->srv, -1, -1, reason);
	conn_close(c);
}

/* Brings srv->buffered up to date with c's input buffer. */
static void conn_account(struct adminsrv_conn *c)
{
	size_t len = c->bev != NULL ?
	    evbuffer_get_length(bufferevent_get_input(c->bev)) : 0;

	c->srv->buffered = c->srv->buffered - c->accounted + len;
	c->accounted = len;
}

/*
 * Over server.max_buffered_bytes_total: close the connections with the
 * largest buffers (the ones sending large or slow frames, or not reading
 * their answers) until the total fits.  Frames already in flight cannot be
 * reclaimed this way.
 */
static void enforce_total(struct adminsrv *srv)
{
	size_t cap = srv->opts.max_buffered_bytes_total;

	while (cap > 0 && srv->buffered > cap) {
		struct adminsrv_conn *c, *worst = NULL;

		TAILQ_FOREACH(c, &srv->conns, link)
			if (!c->dead && c->accounted + c->out_accounted > 0 &&
			    (worst == NULL || c->accounted + c->out_accounted >
			    worst->accounted + worst->out_accounted))
				worst = c;
		if (worst == NULL)
			return;
		conn_drop(worst, ADMINSRV_REJECT_BUFFERED_BYTES_TOTAL,
		    "holds the largest buffers (%zu bytes read, %zu bytes to send) "
		    "while all admin connections hold %zu bytes, above "
		    "server.max_buffered_bytes_total (%zu)", worst->accounted,
		    worst->out_accounted, srv->buffered, cap);
	}
}

/* The size announced by the frame at the head of in, or -1 if unknown. */
static int64_t frame_size_peek(struct evbuffer *in)
{
	uint8_t szb[4];

	if (evbuffer_get_length(in) < 4)
		return -1;
	evbuffer_copyout(in, szb, 4);
	return (int32_t)be32_load(szb);
}

static void timer_arm(struct adminsrv_conn *c, enum conn_timer kind,
    int64_t ms)
{
	struct timeval tv;

	c->timer = kind;
	if (ms <= 0) {
		evtimer_del(c->timer_ev);
		return;
	}
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(c->timer_ev, &tv);
}

/*
 * After any progress: caps how much more is read from the peer (the
 * larger of max_buffered_bytes_per_conn and the frame being read; only the
 * former while a request is in flight) and arms the timer for what the
 * connection is waiting for.
 */
static void conn_update(struct adminsrv_conn *c)
{
	struct adminsrv *srv = c->srv;
	struct evbuffer *in;
	size_t len, high = srv->opts.max_buffered_bytes_per_conn;
	int64_t size;

	if (c->dead)
		return;
	in = bufferevent_get_input(c->bev);
	len = evbuffer_get_length(in);
	size = frame_size_peek(in);
	/* Before a SASL login no frame may be larger than this (refused in
	 * conn_try_request()): read no further ahead. */
	if (c->auth != NULL && !adminauth_conn_authenticated(c->auth))
		high = MIN(high, (size_t)ADMINAUTH_MAX_RECEIVE_UNAUTHENTICATED + 4);
	if (c->cur == NULL && size > 0 && (size_t)size + 4 > high)
		high = (size_t)size + 4;
	bufferevent_setwatermark(c->bev, EV_READ, 0, high);

	if (c->cur != NULL) {
		if (c->timer != TIMER_NONE)
			timer_arm(c, TIMER_NONE, 0);
	} else if (len > 0 && evbuffer_get_length(bufferevent_get_output(c->bev))
	    <= OUTPUT_HIGH_WATER) {
		/* The deadline runs from the first byte of this frame. */
		if (c->timer != TIMER_READ || c->timer_nreqs != c->nreqs) {
			c->timer_nreqs = c->nreqs;
			timer_arm(c, TIMER_READ, srv->opts.request_timeout_ms);
		}
	} else {
		timer_arm(c, TIMER_IDLE, srv->opts.idle_timeout_ms);
	}
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->dead || c->cur != NULL)
		return;
	if (c->timer == TIMER_READ)
		conn_drop(c, ADMINSRV_REJECT_REQUEST_TIMEOUT, "%zu bytes of a "
		    "request frame not completed within server.request_timeout_ms "
		    "(%" PRId64 " ms)", c->accounted, c->srv->opts.request_timeout_ms);
	else if (c->timer == TIMER_IDLE)
		conn_drop(c, ADMINSRV_REJECT_IDLE_TIMEOUT, "no activity for "
		    "server.idle_timeout_ms (%" PRId64 " ms)",
		    c->srv->opts.idle_timeout_ms);
}

static void conn_pump_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_pump(arg);
}

/* Runs conn_pump() from the loop, soon. */
static void conn_pump_later(struct adminsrv_conn *c)
{
	static const struct timeval now = { 0, 0 };

	if (!c->dead)
		evtimer_add(c->pump_ev, &now);
}

static void conn_reject(struct adminsrv_conn *c, int16_t key, int16_t ver,
    size_t off, int reason, const char *detail)
{
	log_warnx("admin: %s: api_key %d v%d: %s%s%s (offset %zu); closing connection",
	    c->peer, key, ver, adminsrv_reject_name(reason),
	    detail != NULL ? ": " : "", detail != NULL ? detail : "", off);
	observe(c->srv, key, -1, reason);
	conn_close(c);
}

/*
 * The security gate (adminauth) in front of the dispatcher: SASL requests
 * are answered here, anything else before login closes the connection.
 */
static void conn_dispatch(struct adminsrv_conn *c, struct adminsrv_req *rq)
{
	struct adminsrv *srv = c->srv;
	struct kw w;
	int16_t ec = 0;
	char why[256] = "";
	int v;

	if (c->auth == NULL) {
		srv->opts.dispatch(rq, srv->opts.arg);
		return;
	}
	if (srv->opts.auth != NULL && adminauth_tls(srv->opts.auth) &&
	    adminauth_conn_tls_ready(c->auth, bufferevent_openssl_get_ssl(c->bev),
	    c->principal, sizeof(c->principal)) != 0) {
		adminsrv_reject(rq, ADMINSRV_REJECT_TLS_HANDSHAKE,
		    "the client certificate names no usable principal");
		return;
	}
	kw_init(&w, 65536);
	v = adminauth_request(c->auth, rq->api_key, rq->api_version, &rq->body,
	    rq->arena, &w, &ec, c->principal, sizeof(c->principal), why,
	    sizeof(why));
	if (v != ADMINAUTH_DISPATCH)
		OPENSSL_cleanse(rq->frame, rq->frame_len); /* may hold a password */
	switch (v) {
	case ADMINAUTH_RESPOND_CLOSE:
		c->closing = 1;
		/* FALLTHROUGH */
	case ADMINAUTH_RESPOND:
		adminsrv_respond(rq, kp_response_header_version(rq->api_key,
		    rq->api_version), w.buf, w.len, ec);
		break;
	case ADMINAUTH_CLOSE:
		adminsrv_reject(rq, ADMINSRV_REJECT_UNAUTHENTICATED, why);
		break;
	default:
		srv->opts.dispatch(rq, srv->opts.arg);
		break;
	}
	kw_fini(&w);
}

/*
 * After a SaslHandshake v0 the client sends raw SASL tokens, each with a
 * 4-byte size and no request header, and gets raw tokens back.
 */
static int conn_try_token(struct adminsrv_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	uint8_t szb[4], *tok;
	int32_t size;
	struct kw w;
	char why[256] = "";
	int v;

	evbuffer_copyout(in, szb, 4);
	size = (int32_t)be32_load(szb);
	if (size < 0 || size > ADMINAUTH_MAX_TOKEN) {
		char d[96];

		snprintf(d, sizeof(d), "raw SASL token of %d bytes (at most %d)",
		    size, ADMINAUTH_MAX_TOKEN);
		conn_reject(c, -1, -1, 0, ADMINSRV_REJECT_BAD_FRAME, d);
		return -1;
	}
	if (evbuffer_get_length(in) < 4 + (size_t)size) {
		bufferevent_setwatermark(c->bev, EV_READ, 4 + (size_t)size, 0);
		return 0;
	}
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	tok = malloc((size_t)size + 1);
	if (tok == NULL)
		fatal("admin: out of memory");
	evbuffer_drain(in, 4);
	evbuffer_remove(in, tok, (size_t)size);
	kw_init(&w, 65536);
	v = adminauth_raw_token(c->auth, tok, (size_t)size, &w, c->principal,
	    sizeof(c->principal), why, sizeof(why));
	OPENSSL_cleanse(tok, (size_t)size);
	free(tok);
	if (v != ADMINAUTH_RESPOND) {
		kw_fini(&w);
		conn_reject(c, -1, -1, 0, ADMINSRV_REJECT_UNAUTHENTICATED, why);
		return -1;
	}
	be32_store(szb, (uint32_t)w.len);
	evbuffer_add(bufferevent_get_output(c->bev), szb, 4);
	evbuffer_add(bufferevent_get_output(c->bev), w.buf, w.len);
	kw_fini(&w);
	return 1;
}

/* Reads one whole frame if present; returns 1 if a request was started. */
static int conn_try_request(struct adminsrv_conn *c)
{
	struct adminsrv *srv = c->srv;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	uint8_t szb[4];
	int32_t size;
	struct adminsrv_req *rq;
	int hv = -1, rc;

	if (evbuffer_get_length(in) < 4)
		return 0;
	if (c->auth != NULL && adminauth_conn_raw(c->auth))
		return conn_try_token(c);
	evbuffer_copyout(in, szb, 4);
	size = (int32_t)be32_load(szb);
	if (size < 8) {
		char d[64];

		snprintf(d, sizeof(d), "frame size %d is below the 8-byte minimum", size);
		conn_reject(c, -1, -1, 0, ADMINSRV_REJECT_BAD_FRAME, d);
		return -1;
	}
	if (size > ADMINAUTH_MAX_RECEIVE_UNAUTHENTICATED && c->auth != NULL &&
	    !adminauth_conn_authenticated(c->auth)) {
		char d[160];

		snprintf(d, sizeof(d), "frame of %d bytes before SASL "
		    "authentication completed exceeds %d bytes (Kafka's "
		    "sasl.server.max.receive.size)", size,
		    ADMINAUTH_MAX_RECEIVE_UNAUTHENTICATED);
		conn_reject(c, -1, -1, 0,
		    ADMINSRV_REJECT_OVERSIZED_UNAUTHENTICATED, d);
		return -1;
	}
	if ((size_t)size > srv->opts.max_request_bytes) {
		char d[96];

		snprintf(d, sizeof(d), "frame of %d bytes exceeds max_request_bytes %zu",
		    size, srv->opts.max_request_bytes);
		conn_reject(c, -1, -1, 0, ADMINSRV_REJECT_OVERSIZED, d);
		return -1;
	}
	if (evbuffer_get_length(in) < 4 + (size_t)size)
		return 0;   /* conn_update() lets the rest of the frame in */

	rq = calloc(1, sizeof(*rq));
	if (rq == NULL)
		fatal("admin: out of memory");
	rq->frame = malloc((size_t)size);
	rq->arena = karena_new(srv->opts.max_request_bytes * 4 + 65536);
	if (rq->frame == NULL || rq->arena == NULL)
		fatal("admin: out of memory");
	rq->frame_len = (size_t)size;
	evbuffer_drain(in, 4);
	evbuffer_remove(in, rq->frame, (size_t)size);
	rq->conn = c;
	srv->buffered += rq->frame_len;   /* until req_free() */
	conn_account(c);
	c->nreqs++;

	kr_init(&rq->body, rq->frame, rq->frame_len);
	{
		struct kp_request_header h;

		kp_request_header_init(&h);
		rc = kp_request_header_read(&rq->body, &h, &hv);
		rq->api_key = h.request_api_key;
		rq->api_version = h.request_api_version;
		rq->correlation_id = h.correlation_id;
		rq->client_id = h.client_id;
	}
	if (rc == 0 && hv < 0) {
		char d[64];

		snprintf(d, sizeof(d), "ApiKey %d is not served here", rq->api_key);
		conn_reject(c, rq->api_key, rq->api_version, 0,
		    ADMINSRV_REJECT_UNKNOWN_API, d);
		req_free(rq);
		return -1;
	}
	if (rc < 0 || rq->body.err) {
		conn_reject(c, rq->api_key, rq->api_version, rq->body.err_off,
		    ADMINSRV_REJECT_BAD_HEADER, rq->body.why);
		req_free(rq);
		return -1;
	}
	c->cur = rq;
	conn_dispatch(c, rq);
	return 1;
}

/*
 * Starts requests until one is pending, the input runs dry, or the budget
 * is spent (then again from the loop).  A handler that answers at once
 * returns here through adminsrv_respond(), which sees c->pumping and leaves
 * the next request to this loop.
 */
static void conn_pump(struct adminsrv_conn *c)
{
	int budget = PUMP_BUDGET;

	if (c->pumping)
		return;
	c->pumping = 1;
	while (!c->dead && !c->closing && c->cur == NULL) {
		struct evbuffer *out = bufferevent_get_output(c->bev);

		if (evbuffer_get_length(out) > OUTPUT_HIGH_WATER) {
			/* Resume from conn_write_cb once the peer reads. */
			bufferevent_disable(c->bev, EV_READ);
			break;
		}
		bufferevent_enable(c->bev, EV_READ);
		if (budget-- == 0) {
			conn_pump_later(c);
			break;
		}
		if (conn_try_request(c) <= 0)
			break;
	}
	c->pumping = 0;
	conn_update(c);
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)bev;
	c->last_active_ms = clock_mono_ms();
	conn_account(c);
	enforce_total(c->srv);
	if (c->dead)
		return;
	conn_pump(c);
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)bev;
	c->last_active_ms = clock_mono_ms();
	if (c->closing && c->cur == NULL) {
		conn_close(c); /* the last answer (an auth failure) is out */
		return;
	}
	if (c->cur == NULL)
		conn_pump(c);
}

/*
 * TLS events: the handshake done (a client certificate names the
 * principal), or failed (logged with OpenSSL's reason and counted).
 * Returns 1 when the connection stays open.
 */
static int conn_tls_event(struct adminsrv_conn *c, struct bufferevent *bev,
    short what)
{
	unsigned long e;
	char buf[256] = "TLS error";

	if (c->auth == NULL || !adminauth_tls(c->srv->opts.auth))
		return 0;
	if (what & BEV_EVENT_CONNECTED) {
		if (adminauth_conn_tls_ready(c->auth, bufferevent_openssl_get_ssl(bev),
		    c->principal, sizeof(c->principal)) == 0)
			return 1;
		observe(c->srv, -1, -1, ADMINSRV_REJECT_TLS_HANDSHAKE);
		return 0;
	}
	if (!(what & BEV_EVENT_ERROR) || bufferevent_get_openssl_error(bev) == 0)
		return 0;
	/* The first error that names an OpenSSL library says most. */
	while ((e = bufferevent_get_openssl_error(bev)) != 0)
		if (ERR_GET_LIB(e) != 0 && strcmp(buf, "TLS error") == 0)
			ERR_error_string_n(e, buf, sizeof(buf));
	adminauth_tls_failure(bufferevent_openssl_get_ssl(bev), buf, sizeof(buf));
	if (adminauth_conn_tls_established(c->auth)) {
		log_debug("admin: %s: TLS error: %s", c->peer, buf);
	} else {
		log_warnx("admin: %s: TLS handshake failed: %s; closing connection",
		    c->peer, buf);
		observe(c->srv, -1, -1, ADMINSRV_REJECT_TLS_HANDSHAKE);
	}
	return 0;
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)bev;
	if (conn_tls_event(c, bev, what))
		return;
	if (what & BEV_EVENT_ERROR)
		log_debug("admin: %s: connection error: %s", c->peer,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	else if (what & BEV_EVENT_EOF)
		log_debug("admin: %s: closed by peer", c->peer);
	conn_close(c);
}

static void conn_ip_of(const struct sockaddr *sa, struct conn_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(ip->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(ip->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/*
 * Whether a new connection from ip may be set up: at most
 * max_connections_per_ip per address (refused), at most max_connections in
 * all (the connection idle the longest is closed to make room; refused
 * when none is idle).  0, or -1 when refused (logged and counted).
 */
static int conn_admit(struct adminsrv *srv, const struct conn_ip *ip,
    const char *host, const char *port)
{
	struct adminsrv_conn *c, *oldest = NULL;
	int same = 0;

	if (srv->opts.max_connections_per_ip > 0) {
		TAILQ_FOREACH(c, &srv->conns, link)
			if (!c->dead && memcmp(&c->ip, ip, sizeof(*ip)) == 0)
				same++;
		if (same >= srv->opts.max_connections_per_ip) {
			log_warnx("admin: %s:%s: refusing connection: %d connections "
			    "open from %s (server.max_connections_per_ip %d)", host,
			    port, same, host, srv->opts.max_connections_per_ip);
			observe(srv, -1, -1, ADMINSRV_REJECT_TOO_MANY_CONNECTIONS_PER_IP);
			return -1;
		}
	}
	if (srv->opts.max_connections <= 0 ||
	    srv->nconns < srv->opts.max_connections)
		return 0;
	TAILQ_FOREACH(c, &srv->conns, link)
		if (!c->dead && c->cur == NULL && c->accounted == 0 &&
		    (oldest == NULL || c->last_active_ms < oldest->last_active_ms))
			oldest = c;
	if (oldest == NULL) {
		log_warnx("admin: %s:%s: refusing connection: %d connections open, "
		    "none idle (server.max_connections %d)", host, port,
		    srv->nconns, srv->opts.max_connections);
		observe(srv, -1, -1, ADMINSRV_REJECT_TOO_MANY_CONNECTIONS);
		return -1;
	}
	conn_drop(oldest, ADMINSRV_REJECT_EVICTED_IDLE, "idle for %" PRId64
	    " ms, the longest of %d connections at server.max_connections; "
	    "closed for a new connection from %s:%s",
	    clock_mono_ms() - oldest->last_active_ms, srv->nconns, host, port);
	return 0;
}

static void accept_cb(struct evconnlistener *lst, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct adminsrv *srv = arg;
	struct adminsrv_conn *c;
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
	struct conn_ip ip;
	int one = 1;

	(void)lst;
	getnameinfo(sa, (socklen_t)salen, host, sizeof(host), port, sizeof(port),
	    NI_NUMERICHOST | NI_NUMERICSERV);
	conn_ip_of(sa, &ip);
	if (conn_admit(srv, &ip, host, port) < 0) {
		evutil_closesocket(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		fatal("admin: out of memory");
	c->srv = srv;
	snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
	snprintf(c->principal, sizeof(c->principal), "User:ANONYMOUS");
	if (srv->opts.auth != NULL && adminauth_tls(srv->opts.auth)) {
		SSL *ssl = adminauth_ssl_new(srv->opts.auth);

		c->bev = ssl == NULL ? NULL : bufferevent_openssl_socket_new(
		    srv->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
		    BEV_OPT_CLOSE_ON_FREE);
		if (c->bev == NULL)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	} else {
		c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	}
	c->free_ev = evtimer_new(srv->base, conn_free_cb, c);
	c->pump_ev = evtimer_new(srv->base, conn_pump_cb, c);
	c->timer_ev = evtimer_new(srv->base, conn_timer_cb, c);
	c->ip = ip;
	c->last_active_ms = clock_mono_ms();
	if (srv->opts.auth != NULL &&
	    (c->auth = adminauth_conn_new(srv->opts.auth, c->peer)) == NULL)
		fatal("admin: out of memory");
	if (c->bev == NULL || c->free_ev == NULL || c->pump_ev == NULL ||
	    c->timer_ev == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		if (c->free_ev != NULL)
			event_free(c->free_ev);
		if (c->pump_ev != NULL)
			event_free(c->pump_ev);
		if (c->timer_ev != NULL)
			event_free(c->timer_ev);
		log_warnx("admin: %s: cannot set up connection", c->peer);
		adminauth_conn_free(c->auth);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->conns, c, link);
	srv->nconns++;
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), conn_out_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	conn_update(c);   /* read cap and idle timer */
	log_debug("admin: %s: connected", c->peer);
}

static void accept_error_cb(struct evconnlistener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	/* EMFILE and friends: log and keep listening; libevent retries. */
	log_warn("admin: accept failed");
}

struct adminsrv *adminsrv_new(struct event_base *base,
    const struct adminsrv_opts *opts, char *err, size_t errlen)
{
	struct adminsrv *srv = NULL;
	struct addrinfo hints, *res = NULL;
	char portstr[8];
	int rc;

	srv = calloc(1, sizeof(*srv));
	if (srv == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	srv->base = base;
	srv->opts = *opts;
	TAILQ_INIT(&srv->conns);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", opts->port);
	rc = getaddrinfo(opts->host[0] != '\0' ? opts->host : NULL, portstr,
	    &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "server.listen %s:%d: %s", opts->host,
		    opts->port, gai_strerror(rc));
		goto fail;
	}
	srv->lst = evconnlistener_new_bind(base, accept_cb, srv,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    128, res->ai_addr, (int)res->ai_addrlen);
	if (srv->lst == NULL) {
		snprintf(err, errlen, "server.listen %s:%d: cannot listen: %s",
		    opts->host, opts->port, strerror(errno));
		goto fail;
	}
	evconnlistener_set_error_cb(srv->lst, accept_error_cb);
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		evutil_socket_t fd = evconnlistener_get_fd(srv->lst);

		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			if (ss.ss_family == AF_INET)
				srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
			else if (ss.ss_family == AF_INET6)
				srv->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	freeaddrinfo(res);
	return srv;
fail:
	if (res != NULL)
		freeaddrinfo(res);
	free(srv);
	return NULL;
}

void adminsrv_stop_accepting(struct adminsrv *srv)
{
	if (srv->lst != NULL) {
		evconnlistener_free(srv->lst);
		srv->lst = NULL;
	}
}

void adminsrv_free(struct adminsrv *srv)
{
	struct adminsrv_conn *c;

	if (srv == NULL)
		return;
	adminsrv_stop_accepting(srv);
	while ((c = TAILQ_FIRST(&srv->conns)) != NULL) {
		/* A pending request's handler must not answer after this. */
		req_free(c->cur);
		c->cur = NULL;
		conn_free(c);
	}
	free(srv);
}

int adminsrv_port(const struct adminsrv *srv)
{
	return srv->port;
}

int adminsrv_connections(const struct adminsrv *srv)
{
	return srv->nconns;
}

size_t adminsrv_buffered(const struct adminsrv *srv)
{
	return srv->buffered;
}

void adminsrv_set_max_request_bytes(struct adminsrv *srv, size_t max)
{
	srv->opts.max_request_bytes = max;
}

void adminsrv_set_limits(struct adminsrv *srv, const struct adminsrv_opts *o)
{
	srv->opts.max_request_bytes = o->max_request_bytes;
	srv->opts.max_connections = o->max_connections;
	srv->opts.max_connections_per_ip = o->max_connections_per_ip;
	srv->opts.idle_timeout_ms = o->idle_timeout_ms;
	srv->opts.request_timeout_ms = o->request_timeout_ms;
	srv->opts.max_buffered_bytes_per_conn = o->max_buffered_bytes_per_conn;
	srv->opts.max_buffered_bytes_total = o->max_buffered_bytes_total;
}

int16_t adminsrv_req_api_key(const struct adminsrv_req *rq)
{
	return rq->api_key;
}

int16_t adminsrv_req_api_version(const struct adminsrv_req *rq)
{
	return rq->api_version;
}

struct kr *adminsrv_req_body(struct adminsrv_req *rq)
{
	return &rq->body;
}

struct karena *adminsrv_req_arena(struct adminsrv_req *rq)
{
	return rq->arena;
}

const char *adminsrv_req_principal(const struct adminsrv_req *rq)
{
	return rq->conn->principal;
}

const char *adminsrv_req_peer(const struct adminsrv_req *rq)
{
	return rq->conn->peer;
}

struct kstr adminsrv_req_client_id(const struct adminsrv_req *rq)
{
	return rq->client_id;
}

int adminsrv_req_alive(const struct adminsrv_req *rq)
{
	return !rq->conn->dead;
}

/* Detaches rq from its connection and frees the connection if it died. */
static struct adminsrv_conn *req_finish(struct adminsrv_req *rq)
{
	struct adminsrv_conn *c = rq->conn;

	c->cur = NULL;
	req_free(rq);
	if (c->dead) {
		conn_free_later(c);
		return NULL;
	}
	return c;
}

void adminsrv_respond(struct adminsrv_req *rq, int header_version,
    const uint8_t *body, size_t len, int16_t error_code)
{
	struct adminsrv_conn *c = rq->conn;
	struct adminsrv *srv = c->srv;
	uint8_t hdr[9];
	size_t hlen = 8;
	int16_t key = rq->api_key;

	if (!c->dead) {
		struct evbuffer *out = bufferevent_get_output(c->bev);

		/* size, correlation id, and for header v1 an empty tag section */
		if (header_version >= 1) {
			hdr[8] = 0;
			hlen = 9;
		}
		be32_store(hdr, (uint32_t)(hlen - 4 + len));
		be32_store(hdr + 4, (uint32_t)rq->correlation_id);
		evbuffer_add(out, hdr, hlen);
		evbuffer_add(out, body, len);
	}
	observe(srv, key, error_code, -1);
	enforce_total(srv);   /* may close c: req_finish() then frees it */
	c = req_finish(rq);
	/* Never the next request from here: that recursion is what a long
	 * pipeline behind a slow answer would overflow the stack with. */
	if (c != NULL && !c->pumping)
		conn_pump_later(c);
}

void adminsrv_reject(struct adminsrv_req *rq, int reason, const char *detail)
{
	struct adminsrv_conn *c = rq->conn;
	struct adminsrv *srv = c->srv;
	int16_t key = rq->api_key, ver = rq->api_version;
	size_t off = rq->body.err ? rq->body.err_off : 0;

	c = req_finish(rq);
	if (c == NULL) {
		/* The peer is already gone; only count it. */
		observe(srv, key, -1, reason);
		return;
	}
	conn_reject(c, key, ver, off, reason, detail);
}
