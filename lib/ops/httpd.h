/*
 * httpd.h: the operations HTTP endpoint (metrics.listen), on libevent's
 * evhttp and the daemon's event loop.
 *
 *   GET /metrics   the registry in Prometheus text format 0.0.4
 *   GET /healthz   200 "ok" while the process runs (liveness)
 *   GET /readyz    200 "ready" when every registered readiness check passes,
 *                  else 503 listing each failing check and its reason
 *   GET <prefix>   a route the owner registered (httpd_add_route()): the
 *                  daemon's per-mirror status, /mirrors and /mirrors/<name>/ready
 *
 * HEAD is accepted wherever GET is; any other method gets 405 with an Allow
 * header; any other path 404.  Query strings are ignored but by routes.  Request headers
 * are capped and idle connections time out, so a slow or hostile client
 * cannot hold memory.  The server does not own the registry or the base.
 * Loop thread only.
 */
#ifndef MIRRORD_HTTPD_H
#define MIRRORD_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct metrics;
struct httpd;

/* A readiness check: true when ready; when not, it may say why in why. */
typedef bool (*httpd_ready_fn)(void *arg, char *why, size_t whylen);

/*
 * Listen on host:port (host: an IPv4 or IPv6 literal or a name; NULL or ""
 * for every address; port 0 picks a free port, see httpd_port()).  The
 * metrics registry m may be NULL (then /metrics is 503).  NULL with the
 * reason in err, naming the address ("127.0.0.1:9101: bind: Address already
 * in use").
 */
struct httpd *httpd_new(struct event_base *base, const char *host, int port,
    struct metrics *m, char *err, size_t errlen);
void httpd_free(struct httpd *h);
/* The bound TCP port. */
int httpd_port(const struct httpd *h);
/* Register a readiness check; name is copied, shown in /readyz.  -1 on
 * out of memory. */
int httpd_add_ready_check(struct httpd *h, const char *name,
    httpd_ready_fn fn, void *arg);
/* A ready check over a flag the caller owns: arg is a bool *. */
bool httpd_ready_flag(void *arg, char *why, size_t whylen);

/*
 * A route: GET (or HEAD) of prefix itself or of any path below it
 * ("prefix/..."), answered by fn: it writes the body into out (at most
 * HTTPD_ROUTE_MAX bytes are sent), sets *content_type to a static string
 * (NULL: text/plain) and returns the status code (200, 404, 503...).
 * path is the whole path, query the query string or NULL.  -1 on out of
 * memory.
 */
#define HTTPD_ROUTE_MAX (4u << 20)
struct evbuffer;
typedef int (*httpd_route_fn)(void *arg, const char *path, const char *query,
    struct evbuffer *out, const char **content_type);
int httpd_add_route(struct httpd *h, const char *prefix, httpd_route_fn fn,
    void *arg);

/*
 * Split "host:port", "[v6]:port" or ":port" (every address) for
 * metrics.listen.  host gets "" for every address.  -1 with the reason.
 */
int httpd_split_hostport(const char *s, char *host, size_t hostlen,
    int *port, char *err, size_t errlen);

#endif
