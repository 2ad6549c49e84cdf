/*
 * Unit tests for httpd: a real listener on 127.0.0.1 (a free port) served
 * by an event loop on a second thread, fetched with a plain blocking socket
 * client; status codes, content types, bodies, readiness flipping, bind
 * errors.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/event.h>

#include "compat.h"
#include "httpd.h"
#include "metrics.h"

#define IO_DEADLINE_MS 20000

/* The server side: an event loop on its own thread, stopped by a pipe. */
struct server {
	struct event_base *base;
	struct httpd *h;
	struct event *stop_ev;
	int stop_pipe[2];
	pthread_t thr;
};

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(arg);
}

static void *loop_main(void *arg)
{
	struct server *s = arg;

	event_base_dispatch(s->base);
	return NULL;
}

/* Set up the server; checks may be added before server_run(). */
static void server_init(struct server *s, struct metrics *m)
{
	char err[256] = "";

	memset(s, 0, sizeof(*s));
	s->base = event_base_new();
	ck_assert_ptr_nonnull(s->base);
	s->h = httpd_new(s->base, "127.0.0.1", 0, m, err, sizeof(err));
	ck_assert_msg(s->h != NULL, "httpd_new: %s", err);
	ck_assert_int_gt(httpd_port(s->h), 0);
	ck_assert_int_eq(pipe(s->stop_pipe), 0);
	s->stop_ev = event_new(s->base, s->stop_pipe[0], EV_READ, on_stop,
	    s->base);
	event_add(s->stop_ev, NULL);
}

static void server_run(struct server *s)
{
	ck_assert_int_eq(pthread_create(&s->thr, NULL, loop_main, s), 0);
}

static void server_stop(struct server *s)
{
	ck_assert_int_eq(write(s->stop_pipe[1], "x", 1), 1);
	pthread_join(s->thr, NULL);
	httpd_free(s->h);
	event_free(s->stop_ev);
	event_base_free(s->base);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
}

struct resp {
	int status;
	char head[4096];   /* status line and headers */
	char body[65536];
	size_t body_len;
};

/* One HTTP/1.1 exchange with "Connection: close", read to EOF. */
static void fetch(int port, const char *method, const char *target,
    struct resp *r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char req[512], buf[70000];
	size_t got = 0;
	int fd, n;
	char *sep;

	memset(r, 0, sizeof(*r));
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	    "connect 127.0.0.1:%d: %s", port, strerror(errno));
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Connection: close\r\n\r\n", method, target);
	ck_assert_int_eq(write(fd, req, (size_t)n), n);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t rd;

		ck_assert_msg(poll(&p, 1, IO_DEADLINE_MS) == 1,
		    "no answer to %s %s within %d ms", method, target,
		    IO_DEADLINE_MS);
		rd = read(fd, buf + got, sizeof(buf) - 1 - got);
		ck_assert_int_ge(rd, 0);
		if (rd == 0)
			break;
		got += (size_t)rd;
		ck_assert_uint_lt(got, sizeof(buf) - 1);
	}
	close(fd);
	buf[got] = '\0';
	sep = strstr(buf, "\r\n\r\n");
	ck_assert_msg(sep != NULL, "no end of headers in: %s", buf);
	ck_assert_uint_lt((size_t)(sep - buf), sizeof(r->head));
	memcpy(r->head, buf, (size_t)(sep - buf));
	r->body_len = got - (size_t)(sep + 4 - buf);
	memcpy(r->body, sep + 4, r->body_len);
	r->body[r->body_len] = '\0';
	ck_assert_int_eq(sscanf(buf, "HTTP/1.%*d %d", &r->status), 1);
}

/* The value of header name, or NULL. */
static const char *header(const struct resp *r, const char *name,
    char *out, size_t outlen)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(r->head, "\r\n"); p != NULL;
	    p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *end = strstr(line, "\r\n");
		size_t len = end != NULL ? (size_t)(end - line) : strlen(line);

		if (len > nl + 1 && strncasecmp(line, name, nl) == 0 &&
		    line[nl] == ':') {
			const char *v = line + nl + 1;

			while (*v == ' ')
				v++;
			snprintf(out, outlen, "%.*s", (int)(len - (size_t)(v -
			    line)), v);
			return out;
		}
	}
	return NULL;
}

START_TEST(test_metrics_endpoint)
{
	static const char *const lbl[] = { "mirror" };
	char err[256], ct[128];
	struct metrics *m = metrics_new();
	struct metric_family *f = metrics_family_new(m, "mirrord_t_total",
	    "test counter", METRIC_COUNTER, lbl, 1, NULL, 0, err, sizeof(err));
	struct server s;
	struct resp r;
	char *want;

	metrics_counter_add(METRICS_SERIES(f, "eu\"west"), 7);
	server_init(&s, m);
	server_run(&s);

	fetch(httpd_port(s.h), "GET", "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(header(&r, "Content-Type", ct, sizeof(ct)));
	ck_assert_str_eq(ct, "text/plain; version=0.0.4; charset=utf-8");
	want = metrics_render_string(m, NULL, err, sizeof(err));
	ck_assert_str_eq(r.body, want);
	ck_assert_ptr_nonnull(strstr(r.body,
	    "mirrord_t_total{mirror=\"eu\\\"west\"} 7\n"));

	/* Query strings do not change the route. */
	fetch(httpd_port(s.h), "GET", "/metrics?name[]=x", &r);
	ck_assert_int_eq(r.status, 200);

	/* HEAD: the headers of GET, the length of its body, no body. */
	fetch(httpd_port(s.h), "HEAD", "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(header(&r, "Content-Type", ct, sizeof(ct)));
	ck_assert_str_eq(ct, METRICS_CONTENT_TYPE);
	ck_assert_uint_eq(r.body_len, 0);
	ck_assert_ptr_nonnull(header(&r, "Content-Length", ct, sizeof(ct)));
	ck_assert_uint_eq(strtoul(ct, NULL, 10), strlen(want));
	free(want);
	server_stop(&s);
	metrics_free(m);
}
END_TEST

START_TEST(test_health_and_errors)
{
	char allow[64], ct[128];
	struct server s;
	struct resp r;

	server_init(&s, NULL);
	server_run(&s);

	fetch(httpd_port(s.h), "GET", "/healthz", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "ok\n");
	ck_assert_ptr_nonnull(header(&r, "Content-Type", ct, sizeof(ct)));
	ck_assert_str_eq(ct, "text/plain; charset=utf-8");

	/* No checks registered: ready. */
	fetch(httpd_port(s.h), "GET", "/readyz", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "ready\n");

	/* No registry yet: /metrics says so instead of an empty 200. */
	fetch(httpd_port(s.h), "GET", "/metrics", &r);
	ck_assert_int_eq(r.status, 503);
	ck_assert_str_eq(r.body, "metrics are not set up yet\n");

	fetch(httpd_port(s.h), "GET", "/", &r);
	ck_assert_int_eq(r.status, 404);
	fetch(httpd_port(s.h), "GET", "/metricsx", &r);
	ck_assert_int_eq(r.status, 404);
	ck_assert_str_eq(r.body,
	    "not found; try /metrics, /healthz or /readyz\n");

	fetch(httpd_port(s.h), "POST", "/metrics", &r);
	ck_assert_int_eq(r.status, 405);
	ck_assert_ptr_nonnull(header(&r, "Allow", allow, sizeof(allow)));
	ck_assert_str_eq(allow, "GET, HEAD");
	fetch(httpd_port(s.h), "DELETE", "/readyz", &r);
	ck_assert_int_eq(r.status, 405);
	server_stop(&s);
}
END_TEST

/* Readiness checks whose state the test thread flips between requests. */
static atomic_bool log_loaded, listeners_bound;

static bool check_log(void *arg, char *why, size_t whylen)
{
	if (atomic_load(&log_loaded))
		return true;
	snprintf(why, whylen, "replaying %s", (const char *)arg);
	return false;
}

static bool check_listeners(void *arg, char *why, size_t whylen)
{
	return atomic_load(&listeners_bound);
}

START_TEST(test_readyz_flips)
{
	struct server s;
	struct resp r;
	bool flag = false;

	server_init(&s, NULL);
	ck_assert_int_eq(httpd_add_ready_check(s.h, "metadata log loaded",
	    check_log, (void *)"segment 3"), 0);
	ck_assert_int_eq(httpd_add_ready_check(s.h, "listeners bound",
	    check_listeners, NULL), 0);
	atomic_store(&log_loaded, false);
	atomic_store(&listeners_bound, false);
	server_run(&s);

	fetch(httpd_port(s.h), "GET", "/readyz", &r);
	ck_assert_int_eq(r.status, 503);
	ck_assert_str_eq(r.body, "not ready:\n"
	    "metadata log loaded: replaying segment 3\n"
	    "listeners bound: failing\n");

	atomic_store(&log_loaded, true);
	fetch(httpd_port(s.h), "GET", "/readyz", &r);
	ck_assert_int_eq(r.status, 503);
	ck_assert_str_eq(r.body, "not ready:\nlisteners bound: failing\n");

	atomic_store(&listeners_bound, true);
	fetch(httpd_port(s.h), "GET", "/readyz", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "ready\n");

	/* And back: readiness is evaluated on every request. */
	atomic_store(&log_loaded, false);
	fetch(httpd_port(s.h), "GET", "/readyz", &r);
	ck_assert_int_eq(r.status, 503);
	/* Liveness does not follow readiness. */
	fetch(httpd_port(s.h), "GET", "/healthz", &r);
	ck_assert_int_eq(r.status, 200);
	server_stop(&s);

	ck_assert(!httpd_ready_flag(&flag, NULL, 0));
	flag = true;
	ck_assert(httpd_ready_flag(&flag, NULL, 0));
}
END_TEST

static bool nonlocal_bind_allowed(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
	int v = 0;

	if (f == NULL)
		return false;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v != 0;
}

START_TEST(test_bind_errors)
{
	char err[256] = "", want[128];
	struct event_base *base = event_base_new();
	struct httpd *a, *b;

	a = httpd_new(base, "127.0.0.1", 0, NULL, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	b = httpd_new(base, "127.0.0.1", httpd_port(a), NULL, err,
	    sizeof(err));
	ck_assert_ptr_null(b);
	snprintf(want, sizeof(want), "127.0.0.1:%d: bind: Address already in "
	    "use", httpd_port(a));
	ck_assert_str_eq(err, want);

	ck_assert_ptr_null(httpd_new(base, "no-such-host.invalid", 9101, NULL,
	    err, sizeof(err)));
	ck_assert_msg(strncmp(err, "no-such-host.invalid:9101: cannot "
	    "resolve the host: ", 46) == 0, "%s", err);
	/* TEST-NET-1 is never a local address (unless the host allows
	 * binding to non-local addresses, which makes the bind succeed). */
	if (!nonlocal_bind_allowed()) {
		ck_assert_ptr_null(httpd_new(base, "192.0.2.1", 9101, NULL, err,
		    sizeof(err)));
		ck_assert_str_eq(err, "192.0.2.1:9101: bind: Cannot assign "
		    "requested address");
	}
	ck_assert_ptr_null(httpd_new(base, "127.0.0.1", 70000, NULL, err,
	    sizeof(err)));
	ck_assert_str_eq(err, "127.0.0.1:70000: port out of range 0-65535");
	httpd_free(a);
	event_base_free(base);
}
END_TEST

START_TEST(test_split_hostport)
{
	char host[64], err[256];
	int port = -1;

	ck_assert_int_eq(httpd_split_hostport("127.0.0.1:9101", host,
	    sizeof(host), &port, err, sizeof(err)), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_int_eq(port, 9101);
	ck_assert_int_eq(httpd_split_hostport("[::1]:80", host, sizeof(host),
	    &port, err, sizeof(err)), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_int_eq(port, 80);
	ck_assert_int_eq(httpd_split_hostport(":9101", host, sizeof(host),
	    &port, err, sizeof(err)), 0);
	ck_assert_str_eq(host, "");
	ck_assert_int_eq(httpd_split_hostport("metrics.local:0", host,
	    sizeof(host), &port, err, sizeof(err)), 0);
	ck_assert_str_eq(host, "metrics.local");
	ck_assert_int_eq(port, 0);

	ck_assert_int_eq(httpd_split_hostport("127.0.0.1", host, sizeof(host),
	    &port, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "listen address \"127.0.0.1\": want host:port "
	    "(IPv6 as [addr]:port)");
	ck_assert_int_eq(httpd_split_hostport("::1:80", host, sizeof(host),
	    &port, err, sizeof(err)), -1);
	ck_assert_int_eq(httpd_split_hostport("h:99999", host, sizeof(host),
	    &port, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "listen address \"h:99999\": port \"99999\" is "
	    "not a number from 0 to 65535");
	ck_assert_int_eq(httpd_split_hostport("h:", host, sizeof(host), &port,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(httpd_split_hostport("[::1]80", host, sizeof(host),
	    &port, err, sizeof(err)), -1);
	ck_assert_int_eq(httpd_split_hostport("", host, sizeof(host), &port,
	    err, sizeof(err)), -1);
}
END_TEST

static Suite *httpd_suite(void)
{
	Suite *s = suite_create("httpd");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_metrics_endpoint);
	tcase_add_test(tc, test_health_and_errors);
	tcase_add_test(tc, test_readyz_flips);
	tcase_add_test(tc, test_bind_errors);
	tcase_add_test(tc, test_split_hostport);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(httpd_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
