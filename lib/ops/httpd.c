/*
 * httpd.c: see httpd.h.
 *
 * The listening socket is made here rather than by evhttp_bind_socket(),
 * so that a failure can say which step failed on which address; evhttp
 * then accepts on it and owns it.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "compat.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"

/* A scraper sends a few hundred bytes of headers and no body. */
#define HTTPD_MAX_HEADERS 8192
#define HTTPD_MAX_BODY 1024
#define HTTPD_TIMEOUT_SEC 30
#define HTTPD_BACKLOG 64
#define HTTPD_WHY_MAX 1200

struct ready_check {
	char *name;
	httpd_ready_fn fn;
	void *arg;
};

struct route {
	char *prefix;
	httpd_route_fn fn;
	void *arg;
};

struct httpd {
	struct evhttp *http;
	struct metrics *metrics;
	int port;
	struct ready_check *checks;
	size_t nchecks;
	struct route *routes;
	size_t nroutes;
};

int httpd_split_hostport(const char *s, char *host, size_t hostlen,
    int *port, char *err, size_t errlen)
{
	const char *colon, *hs = s, *he;
	char *end;
	long p;

	if (s == NULL || *s == '\0') {
		seterr(err, errlen, "listen address is empty (want host:port)");
		return -1;
	}
	if (*s == '[') {
		he = strchr(s, ']');
		if (he == NULL || he[1] != ':') {
			seterr(err, errlen, "listen address \"%s\": want "
			    "[ipv6]:port", s);
			return -1;
		}
		hs = s + 1;
		colon = he + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || strchr(s, ':') != colon) {
			seterr(err, errlen, "listen address \"%s\": want "
			    "host:port (IPv6 as [addr]:port)", s);
			return -1;
		}
		he = colon;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 0 ||
	    p > 65535) {
		seterr(err, errlen, "listen address \"%s\": port \"%s\" is not "
		    "a number from 0 to 65535", s, colon + 1);
		return -1;
	}
	if ((size_t)(he - hs) >= hostlen) {
		seterr(err, errlen, "listen address \"%s\": host is longer "
		    "than %zu bytes", s, hostlen - 1);
		return -1;
	}
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	*port = (int)p;
	return 0;
}

/* "host:port", with brackets around an IPv6 literal, for messages. */
static void fmt_addr(char *buf, size_t len, const char *host, int port)
{
	if (host == NULL || *host == '\0')
		snprintf(buf, len, "*:%d", port);
	else if (strchr(host, ':') != NULL)
		snprintf(buf, len, "[%s]:%d", host, port);
	else
		snprintf(buf, len, "%s:%d", host, port);
}

/* A bound, listening, non-blocking socket, or -1 with err set. */
static int listen_socket(const char *host, int port, int *bound_port,
    char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[300], pstr[8];
	const char *step = "socket";
	int fd = -1, rc, one = 1, saved = 0;

	fmt_addr(addr, sizeof(addr), host, port);
	if (port < 0 || port > 65535) {
		seterr(err, errlen, "%s: port out of range 0-65535", addr);
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = getaddrinfo(host != NULL && *host != '\0' ? host : NULL, pstr,
	    &hints, &res);
	if (rc != 0) {
		seterr(err, errlen, "%s: cannot resolve the host: %s", addr,
		    gai_strerror(rc));
		return -1;
	}
	/* The first address that binds wins (IPv6 wildcard also takes v4). */
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		step = "socket";
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1) {
			saved = errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
		    sizeof(one));
		step = "bind";
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			step = "listen";
			if (listen(fd, HTTPD_BACKLOG) == 0)
				break;
		}
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		seterr(err, errlen, "%s: %s: %s", addr, step, strerror(saved));
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1) {
		seterr(err, errlen, "%s: getsockname: %s", addr,
		    strerror(errno));
		close(fd);
		return -1;
	}
	*bound_port = ss.ss_family == AF_INET6 ?
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
	    ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/*
 * evhttp would send a body even to HEAD: answer HEAD with GET's headers,
 * Content-Length included, and no body.
 */
static void send_reply(struct evhttp_request *req, int code,
    const char *reason, struct evbuffer *body)
{
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		char len[32];

		snprintf(len, sizeof(len), "%zu",
		    body != NULL ? evbuffer_get_length(body) : (size_t)0);
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Content-Length", len);
		body = NULL;
	}
	evhttp_send_reply(req, code, reason, body);
}

static void reply_text(struct evhttp_request *req, int code,
    const char *reason, struct evbuffer *body)
{
	struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);

	evhttp_add_header(hdr, "Content-Type", "text/plain; charset=utf-8");
	evhttp_add_header(hdr, "Cache-Control", "no-store");
	send_reply(req, code, reason, body);
}

static void reply_msg(struct evhttp_request *req, int code,
    const char *reason, const char *msg)
{
	struct evbuffer *b = evbuffer_new();

	if (b != NULL)
		evbuffer_add(b, msg, strlen(msg));
	reply_text(req, code, reason, b);
	if (b != NULL)
		evbuffer_free(b);
}

static void serve_metrics(struct httpd *h, struct evhttp_request *req)
{
	struct evbuffer *b;
	char err[256];

	if (h->metrics == NULL) {
		reply_msg(req, 503, "Service Unavailable",
		    "metrics are not set up yet\n");
		return;
	}
	if ((b = evbuffer_new()) == NULL) {
		reply_msg(req, 500, "Internal Server Error", "out of memory\n");
		return;
	}
	if (metrics_render_evbuffer(h->metrics, b, err, sizeof(err)) == -1) {
		log_warnx("GET /metrics: %s", err);
		evbuffer_add_printf(b, "%s\n", err);
		reply_text(req, 500, "Internal Server Error", b);
	} else {
		struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);

		evhttp_add_header(hdr, "Content-Type", METRICS_CONTENT_TYPE);
		evhttp_add_header(hdr, "Cache-Control", "no-store");
		send_reply(req, 200, "OK", b);
	}
	evbuffer_free(b);
}

static void serve_readyz(struct httpd *h, struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();
	size_t failing = 0;

	if (b == NULL) {
		reply_msg(req, 500, "Internal Server Error", "out of memory\n");
		return;
	}
	for (size_t i = 0; i < h->nchecks; i++) {
		struct ready_check *c = &h->checks[i];
		char why[HTTPD_WHY_MAX] = "";

		if (c->fn(c->arg, why, sizeof(why)))
			continue;
		if (failing++ == 0)
			evbuffer_add_printf(b, "not ready:\n");
		evbuffer_add_printf(b, "%s: %s\n", c->name,
		    why[0] != '\0' ? why : "failing");
	}
	if (failing == 0) {
		evbuffer_add_printf(b, "ready\n");
		reply_text(req, 200, "OK", b);
	} else {
		reply_text(req, 503, "Service Unavailable", b);
	}
	evbuffer_free(b);
}

static const struct route *route_find(const struct httpd *h, const char *path)
{
	for (size_t i = 0; i < h->nroutes; i++) {
		size_t n = strlen(h->routes[i].prefix);

		if (strncmp(path, h->routes[i].prefix, n) == 0 &&
		    (path[n] == '\0' || path[n] == '/'))
			return &h->routes[i];
	}
	return NULL;
}

static const char *status_text(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 503: return "Service Unavailable";
	default: return "Internal Server Error";
	}
}

static void serve_route(const struct route *r, struct evhttp_request *req,
    const char *path, const char *query)
{
	struct evbuffer *b = evbuffer_new();
	const char *ctype = NULL;
	int code;

	if (b == NULL) {
		reply_msg(req, 500, "Internal Server Error", "out of memory\n");
		return;
	}
	code = r->fn(r->arg, path, query, b, &ctype);
	if (evbuffer_get_length(b) > HTTPD_ROUTE_MAX) {
		evbuffer_free(b);
		reply_msg(req, 500, "Internal Server Error", "answer too large\n");
		return;
	}
	if (ctype != NULL) {
		struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);

		evhttp_add_header(hdr, "Content-Type", ctype);
		evhttp_add_header(hdr, "Cache-Control", "no-store");
		send_reply(req, code, status_text(code), b);
	} else {
		reply_text(req, code, status_text(code), b);
	}
	evbuffer_free(b);
}

static void handle(struct evhttp_request *req, void *arg)
{
	static const char *const paths[] = { "/metrics", "/healthz", "/readyz" };
	struct httpd *h = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	size_t which;

	if (path == NULL) {
		reply_msg(req, 400, "Bad Request", "bad request URI\n");
		return;
	}
	for (which = 0; which < ARRAY_SIZE(paths); which++)
		if (strcmp(path, paths[which]) == 0)
			break;
	if (which == ARRAY_SIZE(paths) && route_find(h, path) != NULL)
		which = ARRAY_SIZE(paths) + 1;
	if (which == ARRAY_SIZE(paths)) {
		char msg[512];
		size_t n = (size_t)snprintf(msg, sizeof(msg), "not found; try "
		    "/metrics, /healthz");

		for (size_t i = 0; i < h->nroutes && n < sizeof(msg); i++)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, ", %s",
			    i == 0 ? "/readyz" : h->routes[i - 1].prefix);
		if (n < sizeof(msg))
			snprintf(msg + n, sizeof(msg) - n, " or %s\n",
			    h->nroutes > 0 ? h->routes[h->nroutes - 1].prefix :
			    "/readyz");
		reply_msg(req, 404, "Not Found", msg);
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "GET, HEAD");
		reply_msg(req, 405, "Method Not Allowed",
		    "method not allowed; use GET or HEAD\n");
		return;
	}
	switch (which) {
	case 0:
		serve_metrics(h, req);
		break;
	case 1:
		reply_msg(req, 200, "OK", "ok\n");
		break;
	case 2:
		serve_readyz(h, req);
		break;
	default:
		serve_route(route_find(h, path), req, path,
		    evhttp_uri_get_query(uri));
		break;
	}
}

struct httpd *httpd_new(struct event_base *base, const char *host, int port,
    struct metrics *m, char *err, size_t errlen)
{
	struct httpd *h;
	int fd;

	if ((h = calloc(1, sizeof(*h))) == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	h->metrics = m;
	fd = listen_socket(host, port, &h->port, err, errlen);
	if (fd == -1)
		goto fail;
	if ((h->http = evhttp_new(base)) == NULL) {
		seterr(err, errlen, "evhttp_new failed");
		close(fd);
		goto fail;
	}
	/* Every method reaches handle(), which answers 405 itself with an
	 * Allow header instead of evhttp's bare refusal. */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(h->http, HTTPD_MAX_HEADERS);
	evhttp_set_max_body_size(h->http, HTTPD_MAX_BODY);
	evhttp_set_timeout(h->http, HTTPD_TIMEOUT_SEC);
	evhttp_set_gencb(h->http, handle, h);
	if (evhttp_accept_socket_with_handle(h->http, fd) == NULL) {
		char addr[300];

		fmt_addr(addr, sizeof(addr), host, port);
		seterr(err, errlen, "%s: evhttp cannot accept on the socket",
		    addr);
		close(fd);
		goto fail;
	}
	return h;
fail:
	httpd_free(h);
	return NULL;
}

void httpd_free(struct httpd *h)
{
	if (h == NULL)
		return;
	if (h->http != NULL)
		evhttp_free(h->http);
	for (size_t i = 0; i < h->nchecks; i++)
		free(h->checks[i].name);
	free(h->checks);
	for (size_t i = 0; i < h->nroutes; i++)
		free(h->routes[i].prefix);
	free(h->routes);
	free(h);
}

int httpd_port(const struct httpd *h)
{
	return h->port;
}

int httpd_add_route(struct httpd *h, const char *prefix, httpd_route_fn fn,
    void *arg)
{
	struct route *nr;
	char *copy = strdup(prefix);

	if (copy == NULL)
		return -1;
	nr = realloc(h->routes, (h->nroutes + 1) * sizeof(*nr));
	if (nr == NULL) {
		free(copy);
		return -1;
	}
	h->routes = nr;
	nr[h->nroutes].prefix = copy;
	nr[h->nroutes].fn = fn;
	nr[h->nroutes].arg = arg;
	h->nroutes++;
	return 0;
}

int httpd_add_ready_check(struct httpd *h, const char *name,
    httpd_ready_fn fn, void *arg)
{
	struct ready_check *nc;
	char *copy = strdup(name);

	if (copy == NULL)
		return -1;
	nc = realloc(h->checks, (h->nchecks + 1) * sizeof(*nc));
	if (nc == NULL) {
		free(copy);
		return -1;
	}
	h->checks = nc;
	nc[h->nchecks].name = copy;
	nc[h->nchecks].fn = fn;
	nc[h->nchecks].arg = arg;
	h->nchecks++;
	return 0;
}

bool httpd_ready_flag(void *arg, char *why, size_t whylen)
{
	const bool *flag = arg;

	(void)why;
	(void)whylen;
	return *flag;
}
