/*
 * adminsrv.c: see adminsrv.h.
 *
 * Ownership: the server owns its connections; a connection owns at most one
 * request at a time.  When a peer disconnects while its request is still
 * being handled, the connection is marked dead and freed when the handler
 * answers (never inside a libevent callback of its own bufferevent).
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
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
#include "kbuf.h"
#include "kproto.h"
#include "log.h"

/* Past this much unsent output we stop reading requests from the peer. */
#define OUTPUT_HIGH_WATER (4u << 20)

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
};

struct adminsrv {
	struct event_base *base;
	struct evconnlistener *lst;
	struct adminsrv_opts opts;
	int port;
	int nconns;
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
	karena_free(rq->arena);
	free(rq->frame);
	free(rq);
}

static void conn_free(struct adminsrv_conn *c)
{
	struct adminsrv *srv = c->srv;

	TAILQ_REMOVE(&srv->conns, c, link);
	srv->nconns--;
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	req_free(c->cur);
	event_free(c->free_ev);
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
	if (c->bev != NULL) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	c->dead = 1;
	if (c->cur == NULL)
		conn_free_later(c);
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
	if (srv->opts.auth != NULL && adminauth_tls(srv->opts.auth))
		adminauth_conn_tls_ready(c->auth, bufferevent_openssl_get_ssl(c->bev),
		    c->principal, sizeof(c->principal));
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
	if ((size_t)size > srv->opts.max_request_bytes) {
		char d[96];

		snprintf(d, sizeof(d), "frame of %d bytes exceeds max_request_bytes %zu",
		    size, srv->opts.max_request_bytes);
		conn_reject(c, -1, -1, 0, ADMINSRV_REJECT_OVERSIZED, d);
		return -1;
	}
	if (evbuffer_get_length(in) < 4 + (size_t)size) {
		/* Ask libevent to wake us only when the frame is complete. */
		bufferevent_setwatermark(c->bev, EV_READ, 4 + (size_t)size, 0);
		return 0;
	}
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);

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

/* Starts requests until one is pending or the input runs dry. */
static void conn_pump(struct adminsrv_conn *c)
{
	while (!c->dead && !c->closing && c->cur == NULL) {
		struct evbuffer *out = bufferevent_get_output(c->bev);

		if (evbuffer_get_length(out) > OUTPUT_HIGH_WATER) {
			/* Resume from conn_write_cb once the peer reads. */
			bufferevent_disable(c->bev, EV_READ);
			return;
		}
		bufferevent_enable(c->bev, EV_READ);
		if (conn_try_request(c) <= 0)
			return;
	}
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_pump(arg);
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct adminsrv_conn *c = arg;

	(void)bev;
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
		adminauth_conn_tls_ready(c->auth, bufferevent_openssl_get_ssl(bev),
		    c->principal, sizeof(c->principal));
		return 1;
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

static void accept_cb(struct evconnlistener *lst, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct adminsrv *srv = arg;
	struct adminsrv_conn *c;
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
	int one = 1;

	(void)lst;
	getnameinfo(sa, (socklen_t)salen, host, sizeof(host), port, sizeof(port),
	    NI_NUMERICHOST | NI_NUMERICSERV);
	if (srv->opts.max_connections > 0 &&
	    srv->nconns >= srv->opts.max_connections) {
		log_warnx("admin: %s:%s: refusing connection: %d connections open "
		    "(server.max_connections)", host, port, srv->nconns);
		observe(srv, -1, -1, ADMINSRV_REJECT_TOO_MANY_CONNECTIONS);
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
	if (srv->opts.auth != NULL &&
	    (c->auth = adminauth_conn_new(srv->opts.auth, c->peer)) == NULL)
		fatal("admin: out of memory");
	if (c->bev == NULL || c->free_ev == NULL) {
		if (c->bev != NULL)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		if (c->free_ev != NULL)
			event_free(c->free_ev);
		log_warnx("admin: %s: cannot set up connection", c->peer);
		adminauth_conn_free(c->auth);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->conns, c, link);
	srv->nconns++;
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
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

void adminsrv_set_max_request_bytes(struct adminsrv *srv, size_t max)
{
	srv->opts.max_request_bytes = max;
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
	c = req_finish(rq);
	if (c != NULL)
		conn_pump(c);
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
