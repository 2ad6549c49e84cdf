/*
 * kafka-mirrors: the operator's CLI for mirrord's mirror admin RPCs.
 *
 * It takes the options of KIP-1279's kafka-mirrors.sh (and the later
 * spellings --start, --stop, --topics as aliases), asks ApiVersions (is the
 * peer mirrord?), then sends exactly one request to mirrord's
 * Kafka-protocol port per action (two for --pause/--resume with patterns,
 * which first resolve names through DescribeMirrors), and prints the
 * result.  Exit status: 0 on success; 1 when mirrord answers with an
 * error (its Kafka error name and message go to stderr); 2 for a usage
 * error; 3 when mirrord cannot be reached or answers garbage, or the peer
 * is not mirrord (its ApiVersions answer, asked first, says so).
 *
 * A CLI may block: this one uses plain blocking sockets with timeouts.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "security.h"
#include "compat.h"
#include "daemonconf.h"
#include "kbuf.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "ksasl.h"
#include "massert.h"
#include "props.h"
#include "tpattern.h"

#define EXIT_KAFKA 1
#define EXIT_USAGE 2
#define EXIT_CONN 3
#define EXIT_WARNING 4        /* done, with a warning to read */
#define EXIT_NOT_COPIED 5     /* --remove --wait: source offsets not copied */
#define EXIT_MAYBE_NOT_COPIED 6 /* --remove --wait: the source could not say */

#define MAX_RESPONSE (64u << 20)

/* Each action, its option name and the mirror RPC it sends (the ApiKey
 * mirrord must list in its ApiVersions answer). */
#define ACTIONS(X) \
	X(CREATE, "create", KP_API_CREATE_MIRROR) \
	X(ADD, "add", KP_API_ADD_TOPICS_TO_MIRROR) \
	X(REMOVE, "remove", KP_API_REMOVE_TOPICS_FROM_MIRROR) \
	X(PAUSE, "pause", KP_API_PAUSE_MIRROR_TOPICS) \
	X(RESUME, "resume", KP_API_RESUME_MIRROR_TOPICS) \
	X(RECOVER, "recover", KP_API_RECOVER_MIRROR_TOPICS) \
	X(DELETE, "delete", KP_API_DELETE_MIRROR) \
	X(LIST, "list", KP_API_LIST_MIRRORS) \
	X(DESCRIBE, "describe", KP_API_DESCRIBE_MIRRORS) \
	X(ALTER, "alter", KP_API_INCREMENTAL_ALTER_CONFIGS)

enum action {
	ACT_NONE = -1,
#define X(e, s, k) ACT_##e,
	ACTIONS(X)
#undef X
	ACT_COUNT
};

static const char *const action_names[] = {
#define X(e, s, k) [ACT_##e] = s,
	ACTIONS(X)
#undef X
};

static const int16_t action_api[] = {
#define X(e, s, k) [ACT_##e] = k,
	ACTIONS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(action_api) == ACT_COUNT, "action table");

struct strlist {
	char **v;
	int n;
};

struct opts {
	const char *bootstrap;
	const char *command_config;
	const char *mirror_config;
	const char *mirror;
	enum action action;
	struct strlist topics;
	struct strlist excludes;
	int json;
	int summary;             /* --describe --summary */
	int failed;              /* --describe --failed */
	int wait_s;              /* --remove --wait SECONDS, 0 none */
	int config;              /* --describe --config */
	struct strlist add_configs;    /* --alter --add-config k=v */
	struct strlist delete_configs; /* --alter --delete-config k */
	const char *resolution;  /* --recover --resolution */
	int yes;                 /* --yes: --resolution realign confirmed */
	int timeout_ms;
	char client_id[128];
	struct clisec sec;       /* security.protocol, ssl.*, sasl.* */
};

static const char *progname = "kafka-mirrors";

static void usage(FILE *f)
{
	fprintf(f,
"usage: kafka-mirrors [--bootstrap-server HOST:PORT] ACTION [OPTIONS]\n"
"\n"
"Drives mirrord's mirror admin RPCs (KIP-1279).  HOST:PORT is mirrord's\n"
"admin listener (server.listen in mirrord.yaml), beside the destination.\n"
"\n"
"Actions (exactly one):\n"
"  --create    create a mirror: --mirror NAME --mirror-config FILE\n"
"  --add       add topics to a mirror: --mirror NAME --topic REGEX\n"
"              (alias --start)\n"
"  --remove    stop mirroring topics and make them writable (failover):\n"
"              --mirror NAME --topic REGEX  (alias --stop) [--wait SECONDS]\n"
"  --pause     pause mirroring of topics: --mirror NAME --topic REGEX\n"
"  --resume    resume paused topics: --mirror NAME --topic REGEX\n"
"  --recover   retry FAILED partitions now: --mirror NAME --topic REGEX\n"
"              [--resolution skip-over|preserve|realign [--yes]] (the\n"
"              decision a foreign write, a failback divergence or a\n"
"              truncated or recreated destination topic needs)\n"
"  --delete    delete a mirror whose topics are all STOPPED: --mirror NAME\n"
"  --list      list mirrors\n"
"  --describe  per-partition state, offsets, lag and reason [--mirror NAME]\n"
"              [--topic REGEX] [--failed] [--summary | --json]; with\n"
"              --config: the mirror's saved patterns and configs (secrets\n"
"              masked) --mirror NAME [--json]\n"
"  --alter     change a mirror's configs in place: --mirror NAME\n"
"              [--add-config K=V[,K=V]] [--delete-config K[,K]]\n"
"              [--mirror-config FILE]\n"
"\n"
"Options:\n"
"  --bootstrap-server HOST:PORT[,HOST:PORT...]  mirrord's admin listener\n"
"                          (default: bootstrap.servers of --command-config,\n"
"                          else " CONFIG_SERVER_LISTEN_DEFAULT ", mirrord's default server.listen)\n"
"  --command-config FILE   client properties: client.id, request.timeout.ms,\n"
"                          security.protocol, ssl.ca.location,\n"
"                          ssl.certificate.location, ssl.key.location,\n"
"                          sasl.mechanism, sasl.jaas.config (or sasl.username\n"
"                          and sasl.password); see kafka-mirrors(1)\n"
"  --mirror NAME           the mirror\n"
"  --mirror-config FILE    Java properties for --create: bootstrap.servers of\n"
"                          the source (required), source security settings\n"
"                          (librdkafka names) and mirror.* options; with\n"
"                          --alter: the keys it sets are set, others kept\n"
"  --add-config K=V,...    with --alter: set configs; a value with commas in\n"
"                          brackets (bootstrap.servers=[h1:9092,h2:9092])\n"
"  --delete-config K,...   with --alter: remove configs (back to defaults)\n"
"  --config                with --describe: the mirror's settings\n"
"  --topic REGEX           a topic name or a regular expression; repeatable,\n"
"                          or comma-separated (alias --topics).  A plain name\n"
"                          ([A-Za-z0-9._-] only) is sent as a name; anything\n"
"                          else as a pattern matched against whole names.\n"
"                          With --describe: only the rows of those topics\n"
"  --exclude REGEX         with --add: patterns to exclude from discovery\n"
"  --json                  with --describe: print a JSON array\n"
"  --summary               with --describe: one line per topic (its state,\n"
"                          MIXED when partitions differ; partitions per\n"
"                          state, total lag, worst reason)\n"
"  --failed                with --describe: only FAILED partitions\n"
"  --wait SECONDS          with --remove: wait up to SECONDS for the topics'\n"
"                          partitions to be STOPPED, then print the failover\n"
"                          report (where each stopped, what was not copied)\n"
"  --resolution ACTION     with --recover: the operator's decision for a\n"
"                          partition FAILED by a foreign write (skip-over)\n"
"                          or a failback divergence (skip-over, preserve);\n"
"                          realign (a failback divergence, a destination\n"
"                          truncated, deleted or recreated): delete the\n"
"                          destination topic and copy it again from the\n"
"                          source, after saying what is deleted and asking\n"
"  --yes                   with --resolution realign: do not ask (needed\n"
"                          when standard input is not a terminal)\n"
"  --help                  this text\n"
"  --version               print the version\n"
"\n"
"Exit status: 0 success, 1 mirrord answered with an error, 2 usage error,\n"
"3 mirrord could not be reached (or HOST:PORT is not mirrord).\n");
}

static void die_usage(const char *fmt, ...) PRINTF_LIKE(1, 2);
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", progname);
	exit(EXIT_USAGE);
}

static void die_conn(const char *fmt, ...) PRINTF_LIKE(1, 2);
static void die_conn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_CONN);
}

/* Comma-separated topics and patterns; "a{1,3}" stays one pattern. */
static void strlist_add_csv(struct strlist *l, const char *arg)
{
	char *copy = strdup(arg), *rest = copy, *tok;

	if (copy == NULL)
		die_conn("out of memory");
	while (rest != NULL) {
		tok = tpattern_list_next(rest, &rest);
		while (isspace((unsigned char)*tok))
			tok++;
		if (*tok == '\0')
			continue;
		l->v = realloc(l->v, sizeof(*l->v) * (size_t)(l->n + 1));
		if (l->v == NULL || (l->v[l->n] = strdup(tok)) == NULL)
			die_conn("out of memory");
		l->n++;
	}
	free(copy);
}

/* --add-config / --delete-config: comma-separated, a comma inside
 * brackets is the value's ("k=[a,b]" is one entry). */
static void strlist_add_configs(struct strlist *l, const char *arg)
{
	const char *p = arg;

	while (*p != '\0') {
		const char *start = p;
		int depth = 0;
		size_t n;

		for (; *p != '\0' && (*p != ',' || depth > 0); p++) {
			if (*p == '[')
				depth++;
			else if (*p == ']' && depth > 0)
				depth--;
		}
		n = (size_t)(p - start);
		if (*p == ',')
			p++;
		while (n > 0 && isspace((unsigned char)*start)) {
			start++;
			n--;
		}
		while (n > 0 && isspace((unsigned char)start[n - 1]))
			n--;
		if (n == 0)
			continue;
		l->v = realloc(l->v, sizeof(*l->v) * (size_t)(l->n + 1));
		if (l->v == NULL || (l->v[l->n] = strndup(start, n)) == NULL)
			die_conn("out of memory");
		l->n++;
	}
}

/* A plain topic name is sent as a name; anything else is a pattern. */
static int is_plain_name(const char *s)
{
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' &&
		    *s != '-')
			return 0;
	return 1;
}

/* ---- the connection ------------------------------------------------ */

struct cli_conn {
	int fd;
	SSL *ssl;                /* on SSL and SASL_SSL */
	int32_t next_corr;
	int timeout_ms;
	char addr[300];
	const char *client_id;
	const struct clisec *sec;
	int redirects;           /* NOT_CONTROLLER answers followed so far */
	/* After following one: what the instance that answered it said (it
	 * names the writer), so a writer that does not answer is reported
	 * as that, not as a bare timeout. */
	char redirected_by[300];
	char redirect_why[600];
	int16_t api_key;         /* of the request being sent */
	int probing;             /* waiting for the first ApiVersions answer */
};

static int connect_one(const char *hostport, int timeout_ms, char *err,
    size_t errlen)
{
	char host[256], *colon;
	struct addrinfo hints, *res = NULL, *ai;
	int fd = -1, rc;

	snprintf(host, sizeof(host), "%s", hostport);
	colon = strrchr(host, ':');
	if (colon == NULL || colon[1] == '\0') {
		snprintf(err, errlen, "%s: expected HOST:PORT", hostport);
		return -1;
	}
	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']') { /* [::1]:9192 */
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host[0] != '\0' ? host : "127.0.0.1", colon + 1, &hints,
	    &res);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", hostport, gai_strerror(rc));
		return -1;
	}
	snprintf(err, errlen, "%s: no usable address", hostport);
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		struct pollfd pfd;
		int soerr = 0, one = 1;
		socklen_t sl = sizeof(soerr);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
		    errno != EINPROGRESS) {
			snprintf(err, errlen, "%s: %s", hostport, strerror(errno));
			goto next;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0) {
			snprintf(err, errlen, "%s: connect timed out after %d ms",
			    hostport, timeout_ms);
			goto next;
		}
		if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
		    soerr != 0) {
			snprintf(err, errlen, "%s: %s", hostport,
			    strerror(soerr != 0 ? soerr : errno));
			goto next;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		freeaddrinfo(res);
		return fd;
next:
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return -1;
}

static void conn_open(struct cli_conn *c, const char *bootstrap, int timeout_ms,
    const char *client_id, const struct clisec *sec)
{
	char *list = strdup(bootstrap), *save = NULL, *tok;
	char err[512] = "no address given";

	if (list == NULL)
		die_conn("out of memory");
	c->fd = -1;
	c->ssl = NULL;
	c->timeout_ms = timeout_ms;
	c->client_id = client_id;
	c->sec = sec;
	c->redirects = 0;
	c->next_corr = 1;
	for (tok = strtok_r(list, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		c->fd = connect_one(tok, timeout_ms, err, sizeof(err));
		if (c->fd >= 0 && sec->tls) {
			char host[256], e2[400], *colon;

			snprintf(host, sizeof(host), "%s", tok);
			if ((colon = strrchr(host, ':')) != NULL)
				*colon = '\0';
			if (host[0] == '[' && colon != NULL && colon[-1] == ']') {
				colon[-1] = '\0';
				memmove(host, host + 1, strlen(host));
			}
			c->ssl = clisec_tls_connect(sec, c->fd, host, timeout_ms,
			    e2, sizeof(e2));
			if (c->ssl == NULL) {
				snprintf(err, sizeof(err), "%.200s: %.300s", tok, e2);
				close(c->fd);
				c->fd = -1;
			}
		}
		if (c->fd >= 0) {
			snprintf(c->addr, sizeof(c->addr), "%s", tok);
			break;
		}
	}
	free(list);
	if (c->fd < 0)
		die_conn("cannot connect to mirrord at %s: %s", bootstrap, err);
}

/* With TLS not configured: the hint for a peer that may expect it. */
static const char *tls_hint(const struct cli_conn *c)
{
	return c->sec->tls ? "" : ", or one that needs TLS (security.protocol="
	    "SSL or SASL_SSL in --command-config)";
}

/* The peer closed the connection (or reset it) before the answer. */
static void conn_closed(struct cli_conn *c)
{
	if (c->probing)
		die_conn("%s closed the connection without answering ApiVersions: "
		    "not mirrord's admin listener (server.listen)%s", c->addr,
		    tls_hint(c));
	die_conn("%s: connection closed by mirrord (the request was refused; "
	    "see mirrord's log)", c->addr);
}

/* One TLS read or write; -1 with *events set when it must wait. */
static ssize_t tls_xfer(struct cli_conn *c, uint8_t *p, size_t len,
    int writing, short *events)
{
	int n, e;
	char buf[256];

	ERR_clear_error();
	n = writing ? SSL_write(c->ssl, p, (int)MIN(len, INT32_MAX)) :
	    SSL_read(c->ssl, p, (int)MIN(len, INT32_MAX));
	if (n > 0)
		return n;
	e = SSL_get_error(c->ssl, n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL &&
	    ERR_peek_error() == 0))
		return 0;
	ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
	die_conn("%s: TLS: %s", c->addr, buf);
	return 0;
}

static void io_all(struct cli_conn *c, void *buf, size_t len, int writing)
{
	uint8_t *p = buf;
	short events = writing ? POLLOUT : POLLIN;

	while (len > 0) {
		struct pollfd pfd = { .fd = c->fd, .events = events };
		ssize_t n;
		int rc;

		if (c->ssl != NULL) {
			/* Try first: TLS may hold decrypted bytes already. */
			n = tls_xfer(c, p, len, writing, &events);
			if (n == 0)
				conn_closed(c);
			if (n > 0) {
				p += n;
				len -= (size_t)n;
				continue;
			}
			pfd.events = events;
		}
		rc = poll(&pfd, 1, c->timeout_ms);

		if (rc == 0 && c->redirects > 0 && c->redirected_by[0] != '\0')
			die_conn("%s: REQUEST_TIMED_OUT: the metadata writer at %s "
			    "did not answer within %d ms (request.timeout.ms); %s "
			    "had answered NOT_CONTROLLER: %s.  The outcome is "
			    "unknown: a writer that is stopped or overloaded "
			    "applies the request if it resumes before the group "
			    "elects another; check with --describe, or try again "
			    "(the group elects a new writer within "
			    "cluster.session_timeout_ms)", kp_api_name(c->api_key),
			    c->addr, c->timeout_ms, c->redirected_by,
			    c->redirect_why);
		if (rc == 0 && c->probing)
			die_conn("%s did not answer ApiVersions within %d ms "
			    "(request.timeout.ms): a mirrord that is stopped or "
			    "overloaded, or not mirrord's admin listener "
			    "(server.listen)%s", c->addr, c->timeout_ms,
			    tls_hint(c));
		if (rc == 0)
			die_conn("%s: no answer within %d ms (request.timeout.ms)",
			    c->addr, c->timeout_ms);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			die_conn("%s: poll: %s", c->addr, strerror(errno));
		}
		if (c->ssl != NULL)
			continue;
		n = writing ? send(c->fd, p, len, MSG_NOSIGNAL) : recv(c->fd, p, len, 0);
		if (n == 0)
			conn_closed(c);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (c->probing && (errno == ECONNRESET || errno == EPIPE))
				conn_closed(c);
			die_conn("%s: %s", c->addr, strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

static void sasl_login(struct cli_conn *c, const struct clisec *sec);
static uint8_t *conn_call(struct cli_conn *c, int16_t key, int16_t ver,
    const struct kw *body, struct kr *r);

/*
 * Several mirrord instances: only the metadata writer changes mirrors; the
 * others answer a mutation NOT_CONTROLLER and name the writer as the
 * controller in Metadata.  Following it is bounded: a group electing a
 * new writer gets a second to settle between attempts.
 */
#define MAX_REDIRECTS 6

static int is_mutation(int16_t key)
{
	switch (key) {
	case KP_API_CREATE_MIRROR:
	case KP_API_DELETE_MIRROR:
	case KP_API_ADD_TOPICS_TO_MIRROR:
	case KP_API_REMOVE_TOPICS_FROM_MIRROR:
	case KP_API_PAUSE_MIRROR_TOPICS:
	case KP_API_RESUME_MIRROR_TOPICS:
	case KP_API_RECOVER_MIRROR_TOPICS:
	case KP_API_INCREMENTAL_ALTER_CONFIGS:
		return 1;
	default:
		return 0;
	}
}

/* The controller's host:port from Metadata v1 on c; -1 when it names none. */
static int find_controller(struct cli_conn *c, char *out, size_t outlen)
{
	struct kp_metadata_request req;
	struct kp_metadata_response resp;
	struct karena *a = karena_new(1u << 20);
	struct kw w;
	struct kr r;
	uint8_t *frame;
	int rc = -1;

	if (a == NULL)
		die_conn("out of memory");
	kp_metadata_request_init(&req);
	req.topics_n = 0;
	kw_init(&w, 1u << 16);
	if (kp_metadata_request_encode(&w, 1, &req) < 0 || w.err)
		die_conn("cannot encode the Metadata request");
	frame = conn_call(c, KP_API_METADATA, 1, &w, &r);
	kw_fini(&w);
	kp_metadata_response_init(&resp);
	if (kp_metadata_response_decode(&r, a, 1, &resp) < 0 || r.err)
		die_conn("%s: malformed Metadata response: %s", c->addr,
		    r.why != NULL ? r.why : "decode error");
	for (int32_t i = 0; i < resp.brokers_n; i++) {
		const struct kp_metadata_response_broker *b = &resp.brokers[i];

		if (b->node_id != resp.controller_id || b->host.len <= 0)
			continue;
		snprintf(out, outlen, "%s%.*s%s:%d",
		    memchr(b->host.p, ':', (size_t)b->host.len) != NULL ? "[" : "",
		    (int)b->host.len, b->host.p,
		    memchr(b->host.p, ':', (size_t)b->host.len) != NULL ? "]" : "",
		    b->port);
		rc = 0;
		break;
	}
	free(frame);
	karena_free(a);
	return rc;
}

/* Closes c and connects (TLS, SASL) to hostport instead. */
static void conn_redirect(struct cli_conn *c, const char *hostport)
{
	int redirects = c->redirects;
	int16_t key = c->api_key;
	char by[sizeof(c->redirected_by)], why[sizeof(c->redirect_why)];

	memcpy(by, c->redirected_by, sizeof(by));
	memcpy(why, c->redirect_why, sizeof(why));
	clisec_tls_close(c->ssl);
	close(c->fd);
	conn_open(c, hostport, c->timeout_ms, c->client_id, c->sec);
	c->redirects = redirects;
	c->api_key = key;
	memcpy(c->redirected_by, by, sizeof(by));
	memcpy(c->redirect_why, why, sizeof(why));
	if (c->sec->sasl)
		sasl_login(c, c->sec);
}

/* A mutation answered NOT_CONTROLLER: 1 after moving c to the controller
 * (the request is then sent again), 0 to report the answer as it is. */
static int follow_controller(struct cli_conn *c, int16_t key,
    const struct kr *r)
{
	struct kr peek = *r;
	struct kstr msg;
	char target[300];
	int16_t code;

	if (!is_mutation(key))
		return 0;
	(void)kr_i32(&peek);
	if (key == KP_API_INCREMENTAL_ALTER_CONFIGS && kr_carray(&peek) < 1)
		return 0;   /* v1: the first resource's code and message */
	code = kr_i16(&peek);
	msg = kr_cstr(&peek);   /* ErrorMessage: every mutation's third field */
	if (peek.err || code != KERR_NOT_CONTROLLER ||
	    c->redirects >= MAX_REDIRECTS)
		return 0;
	c->redirects++;
	snprintf(c->redirected_by, sizeof(c->redirected_by), "%s", c->addr);
	snprintf(c->redirect_why, sizeof(c->redirect_why), "%.*s",
	    msg.len > 0 ? (int)msg.len : 0, msg.len > 0 ? msg.p : "");
	if (find_controller(c, target, sizeof(target)) < 0 ||
	    strcmp(target, c->addr) == 0) {
		/* No writer known, or this one names itself: the group is
		 * electing one.  Wait and ask the same instance again. */
		sleep(1);
		return 1;
	}
	if (c->redirects > 1)
		sleep(1);
	conn_redirect(c, target);
	return 1;
}

/* Frames and sends one request whose body is in body; returns its
 * correlation id. */
static int32_t conn_send(struct cli_conn *c, int16_t key, int16_t ver,
    const struct kw *body)
{
	struct kw w;
	size_t slot;
	int32_t corr = c->next_corr++;
	int reqhv = kp_request_header_version(key, ver);

	c->api_key = key;
	kw_init(&w, body->len + 1024);
	slot = kw_slot32(&w);
	kw_i16(&w, key);
	kw_i16(&w, ver);
	kw_i32(&w, corr);
	kw_str(&w, kstr_c(c->client_id));
	if (reqhv >= 2)
		kw_tags_empty(&w);
	kw_raw(&w, body->buf, body->len);
	kw_put32(&w, slot, (int32_t)(w.len - 4));
	if (w.err || body->err)
		die_conn("cannot encode the request: %s",
		    w.err ? w.why : body->why);
	io_all(c, w.buf, w.len, 1);
	kw_fini(&w);
	return corr;
}

/*
 * Sends one request whose body is in w (flexible, header v2) and returns
 * the response frame; *r is positioned after the response header v1.
 * A mutation answered NOT_CONTROLLER is sent again to the controller.
 */
static uint8_t *conn_call(struct cli_conn *c, int16_t key, int16_t ver,
    const struct kw *body, struct kr *r)
{
	uint8_t szb[4], *resp;
	int32_t size, corr = conn_send(c, key, ver, body);

	io_all(c, szb, 4, 0);
	size = (int32_t)be32_load(szb);
	if (size < 5 || (uint32_t)size > MAX_RESPONSE)
		die_conn("%s: bad response size %d", c->addr, size);
	resp = malloc((size_t)size);
	if (resp == NULL)
		die_conn("out of memory");
	io_all(c, resp, (size_t)size, 0);
	kr_init(r, resp, (size_t)size);
	if (kr_i32(r) != corr)
		die_conn("%s: response correlation id does not match the request",
		    c->addr);
	if (kp_response_header_version(key, ver) >= 1)
		kr_skip_tagged(r);
	if (follow_controller(c, key, r)) {
		free(resp);
		return conn_call(c, key, ver, body, r);
	}
	return resp;
}

/*
 * One round trip for the request struct req of ApiKey key (version 0, as
 * every mirror RPC): encodes it, sends it, and decodes the answer into
 * resp, the response struct of the same key.  Returns the response frame,
 * which resp points into; free it after use.
 */
static uint8_t *rpc(struct cli_conn *c, int16_t key, const void *req,
    void *resp, struct karena *a)
{
	const struct kp_api *api = kp_api_find(key);
	struct kw w;
	struct kr r;
	uint8_t *frame;

	kw_init(&w, MAX_RESPONSE);
	if (api->request_encode(&w, 0, req) < 0 || w.err)
		die_conn("cannot encode the %s request: %s", api->name,
		    w.why != NULL ? w.why : "encode error");
	frame = conn_call(c, key, 0, &w, &r);
	kw_fini(&w);
	api->response_init(resp);
	if (api->response_decode(&r, a, 0, resp) < 0 || r.err)
		die_conn("%s: malformed %s response: %s", c->addr, api->name,
		    r.why != NULL ? r.why : "decode error");
	return frame;
}

/* ---- is the peer mirrord? ------------------------------------------ */

/* A real ApiVersions v0 answer: a few hundred bytes. */
#define PROBE_MAX_RESPONSE (1u << 20)

/* The peer answered with something that is not a Kafka response; head
 * holds its first len bytes. */
static void not_kafka(struct cli_conn *c, const uint8_t *head, size_t len)
{
	char hex[64] = "", text[24] = "";
	size_t n = MIN(len, (size_t)8), h = 0;

	for (size_t i = 0; i < n; i++) {
		h += (size_t)snprintf(hex + h, sizeof(hex) - h, "%s%02x",
		    i ? " " : "", head[i]);
		text[i] = isprint(head[i]) ? (char)head[i] : '.';
	}
	text[n] = '\0';
	/* A TLS record: content type alert (21) or handshake (22), major
	 * version 3. */
	if (len >= 2 && (head[0] == 21 || head[0] == 22) && head[1] == 3 &&
	    !c->sec->tls)
		die_conn("%s answered ApiVersions with TLS (%s): its listener "
		    "needs TLS; set security.protocol=SSL or SASL_SSL in "
		    "--command-config", c->addr, hex);
	die_conn("%s answered ApiVersions with bytes that are not a Kafka "
	    "response (%s%s \"%s\"): not mirrord's admin listener "
	    "(server.listen)", c->addr, hex, len > n ? " ..." : "", text);
}

/*
 * The first request on a connection is ApiVersions v0, which every Kafka
 * listener answers (before SASL too).  A peer whose answer does not list
 * the mirror RPC of the action is a Kafka broker or another Kafka-protocol
 * server, which would close the connection on the unknown ApiKey and log
 * it on its side only: say so here (exit status 3).  One that lists
 * Produce is a broker whatever else it lists: mirrord's admin listener
 * never serves Produce, and a broker's own ApiKeys may coincide with the
 * mirror RPCs' (Kafka 4.4 lists an ApiKey 94 of its own, CreateMirror's
 * here), which must never reach it.  A peer that does not speak Kafka at
 * all (closes, answers garbage or TLS) is named as such.
 */
static void check_peer(struct cli_conn *c, enum action act)
{
	struct kp_api_versions_response resp;
	struct karena *a = karena_new(1u << 20);
	struct kw body;
	struct kr r;
	uint8_t szb[4], *frame;
	int32_t size, corr;
	int16_t need = action_api[act];
	int mirror_apis = 0, listed = -1, broker = 0;

	if (a == NULL)
		die_conn("out of memory");
	c->probing = 1;
	kw_init(&body, 16);   /* ApiVersions v0: empty body */
	corr = conn_send(c, KP_API_API_VERSIONS, 0, &body);
	kw_fini(&body);
	io_all(c, szb, 4, 0);
	size = (int32_t)be32_load(szb);
	if (size < 10 || (uint32_t)size > PROBE_MAX_RESPONSE)
		not_kafka(c, szb, 4);
	if ((frame = malloc(4 + (size_t)size)) == NULL)
		die_conn("out of memory");
	memcpy(frame, szb, 4);
	io_all(c, frame + 4, (size_t)size, 0);
	c->probing = 0;
	kr_init(&r, frame + 4, (size_t)size);
	kp_api_versions_response_init(&resp);
	if (kr_i32(&r) != corr ||
	    kp_api_versions_response_decode(&r, a, 0, &resp) < 0 || r.err ||
	    resp.api_keys_n < 0)
		not_kafka(c, frame, 4 + (size_t)size);
	for (int32_t i = 0; i < resp.api_keys_n; i++) {
		const struct kp_api_versions_response_api_version *v =
		    &resp.api_keys[i];

		for (int k = 0; k < ACT_COUNT; k++)
			if (v->api_key == action_api[k]) {
				mirror_apis++;
				break;
			}
		if (v->api_key == need)
			listed = v->min_version <= 0 && v->max_version >= 0;
		if (v->api_key == KP_API_PRODUCE)
			broker = 1;
	}
	free(frame);
	karena_free(a);
	if (listed == 1 && !broker)
		return;
	if (broker || mirror_apis == 0)
		die_conn("%s is a Kafka broker (or not mirrord): point "
		    "--bootstrap-server at mirrord's server.listen", c->addr);
	die_conn("%s does not serve %s v0, which --%s sends: a mirrord of "
	    "another version than this kafka-mirrors (%s)", c->addr,
	    kp_api_name(need), action_names[act], PACKAGE_VERSION);
}

/* ---- SASL login (SaslHandshake v1, SaslAuthenticate v2) ------------ */

static void sasl_fail(const char *what, int16_t code, struct kstr msg)
{
	const char *m = msg.len >= 0 ? msg.p : kerr_message(code);
	int mlen = msg.len >= 0 ? (int)msg.len : (int)strlen(m);

	fprintf(stderr, "%s: %s: %s: %.*s\n", progname, what, kerr_name(code),
	    mlen, m);
	exit(EXIT_KAFKA);
}

/* One SaslAuthenticate round trip; returns the server's token (in *frame). */
static struct kbytes sasl_round(struct cli_conn *c, const void *tok,
    size_t len, uint8_t **frame, struct karena *a)
{
	struct kp_sasl_authenticate_request req;
	struct kp_sasl_authenticate_response resp;
	struct kw w;
	struct kr r;

	kp_sasl_authenticate_request_init(&req);
	req.auth_bytes = (struct kbytes){ tok, (int32_t)len };
	kw_init(&w, 65536);
	if (kp_sasl_authenticate_request_encode(&w, 2, &req) < 0 || w.err)
		die_conn("cannot encode the SaslAuthenticate request");
	*frame = conn_call(c, KP_API_SASL_AUTHENTICATE, 2, &w, &r);
	OPENSSL_cleanse(w.buf, w.len);
	kw_fini(&w);
	kp_sasl_authenticate_response_init(&resp);
	if (kp_sasl_authenticate_response_decode(&r, a, 2, &resp) < 0 || r.err)
		die_conn("%s: malformed SaslAuthenticate response", c->addr);
	if (resp.error_code != 0)
		sasl_fail("authentication failed", resp.error_code,
		    resp.error_message);
	return resp.auth_bytes;
}

static void sasl_login(struct cli_conn *c, const struct clisec *sec)
{
	struct kp_sasl_handshake_request hreq;
	struct kp_sasl_handshake_response hresp;
	struct karena *a = karena_new(1 << 20);
	struct kw w;
	struct kr r;
	uint8_t *frame;
	char err[256];

	if (a == NULL)
		die_conn("out of memory");
	kp_sasl_handshake_request_init(&hreq);
	hreq.mechanism = kstr_c(ksasl_mech_name(sec->mech));
	kw_init(&w, 4096);
	kp_sasl_handshake_request_encode(&w, 1, &hreq);
	frame = conn_call(c, KP_API_SASL_HANDSHAKE, 1, &w, &r);
	kw_fini(&w);
	kp_sasl_handshake_response_init(&hresp);
	if (kp_sasl_handshake_response_decode(&r, a, 1, &hresp) < 0 || r.err)
		die_conn("%s: malformed SaslHandshake response", c->addr);
	if (hresp.error_code != 0) {
		char offered[256] = "";
		size_t n = 0;

		for (int32_t i = 0; i < hresp.mechanisms_n && n < sizeof(offered); i++)
			n += (size_t)snprintf(offered + n, sizeof(offered) - n,
			    "%s%.*s", i ? ", " : "", (int)hresp.mechanisms[i].len,
			    hresp.mechanisms[i].p);
		fprintf(stderr, "%s: SASL mechanism %s refused: %s (mirrord "
		    "offers: %s)\n", progname, ksasl_mech_name(sec->mech),
		    kerr_name(hresp.error_code), offered[0] ? offered : "none");
		exit(EXIT_KAFKA);
	}
	free(frame);
	if (sec->mech == KSASL_PLAIN) {
		uint8_t *tok;
		size_t tl;

		if (ksasl_plain_token(sec->user, sec->password, &tok, &tl, err,
		    sizeof(err)) < 0)
			die_usage("--command-config: %s", err);
		sasl_round(c, tok, tl, &frame, a);
		OPENSSL_cleanse(tok, tl);
		free(tok);
		free(frame);
	} else {
		struct ksasl_scram *sc = ksasl_scram_new(sec->mech, sec->user,
		    sec->password, NULL, err, sizeof(err));
		const char *msg;
		size_t ml;
		struct kbytes sb;

		if (sc == NULL)
			die_usage("--command-config: %s", err);
		if (ksasl_scram_client_first(sc, &msg, &ml) < 0)
			die_conn("out of memory");
		sb = sasl_round(c, msg, ml, &frame, a);
		if (ksasl_scram_client_final(sc, sb.p, sb.len > 0 ?
		    (size_t)sb.len : 0, &msg, &ml, err, sizeof(err)) < 0)
			die_conn("%s: SCRAM: %s", c->addr, err);
		free(frame);
		sb = sasl_round(c, msg, ml, &frame, a);
		if (ksasl_scram_verify_server(sc, sb.p, sb.len > 0 ?
		    (size_t)sb.len : 0, err, sizeof(err)) < 0)
			die_conn("%s: SCRAM: %s", c->addr, err);
		free(frame);
		ksasl_scram_free(sc);
	}
	karena_free(a);
}

/* ---- output helpers ---------------------------------------------- */

static void print_kafka_error(const char *what, int16_t code, struct kstr msg)
{
	const char *m = msg.len >= 0 ? msg.p : kerr_message(code);
	int mlen = msg.len >= 0 ? (int)msg.len : (int)strlen(m);

	if (what != NULL)
		fprintf(stderr, "%s: %s: %s: %.*s\n", progname, what,
		    kerr_name(code), mlen, m);
	else
		fprintf(stderr, "%s: %s: %.*s\n", progname, kerr_name(code), mlen, m);
}

static void json_str(FILE *f, struct kstr s)
{
	if (s.len < 0) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (int32_t i = 0; i < s.len; i++) {
		unsigned char ch = (unsigned char)s.p[i];

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* ---- tables sized to their content ---------------------------------- */

/*
 * Text output is a table whose columns are as wide as their longest value,
 * header included, one space apart as in the KIP tool; numbers are
 * right-aligned, the last column is not padded.  Cells are copied, control
 * characters turned into spaces so that a message cannot break the layout.
 */
#define TABLE_MAX_COLS 10

struct table {
	int ncols;
	const char *head[TABLE_MAX_COLS];
	unsigned right;        /* bit c: column c is right-aligned */
	char **cells;          /* row-major, ncells / ncols rows */
	size_t ncells, cap;
};

static void table_init(struct table *t, unsigned right, ...)
{
	va_list ap;
	const char *h;

	memset(t, 0, sizeof(*t));
	t->right = right;
	va_start(ap, right);
	while ((h = va_arg(ap, const char *)) != NULL) {
		MR_ASSERT(t->ncols < TABLE_MAX_COLS);
		t->head[t->ncols++] = h;
	}
	va_end(ap);
}

static void table_cell(struct table *t, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void table_cell(struct table *t, const char *fmt, ...)
{
	va_list ap;
	char *c;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (c = malloc((size_t)n + 1)) == NULL)
		die_conn("out of memory");
	va_start(ap, fmt);
	vsnprintf(c, (size_t)n + 1, fmt, ap);
	va_end(ap);
	for (char *q = c; *q != '\0'; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = ' ';
	if (t->ncells == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->cells = realloc(t->cells, t->cap * sizeof(*t->cells));
		if (t->cells == NULL)
			die_conn("out of memory");
	}
	t->cells[t->ncells++] = c;
}

/* A string from the wire; "-" when null or empty. */
static void table_kstr(struct table *t, struct kstr s)
{
	if (s.len <= 0)
		table_cell(t, "-");
	else
		table_cell(t, "%.*s", (int)s.len, s.p);
}

/* A number; -1 (unknown) prints as "-" as in the KIP tool. */
static void table_num(struct table *t, int64_t v)
{
	if (v < 0)
		table_cell(t, "-");
	else
		table_cell(t, "%lld", (long long)v);
}

static void table_print_row(const struct table *t, const char *const *row,
    const size_t *w)
{
	for (int c = 0; c < t->ncols; c++) {
		const char *sep = c + 1 < t->ncols ? " " : "\n";

		if (t->right & (1u << c))
			printf("%*s%s", (int)w[c], row[c], sep);
		else if (c + 1 < t->ncols)
			printf("%-*s%s", (int)w[c], row[c], sep);
		else
			printf("%s%s", row[c], sep);
	}
}

/* Prints and frees the table. */
static void table_print(struct table *t)
{
	size_t w[TABLE_MAX_COLS];

	MR_ASSERT(t->ncols > 0 && t->ncells % (size_t)t->ncols == 0);
	for (int c = 0; c < t->ncols; c++)
		w[c] = strlen(t->head[c]);
	for (size_t i = 0; i < t->ncells; i++)
		w[i % (size_t)t->ncols] = MAX(w[i % (size_t)t->ncols],
		    strlen(t->cells[i]));
	table_print_row(t, t->head, w);
	for (size_t i = 0; i < t->ncells; i += (size_t)t->ncols)
		table_print_row(t, (const char *const *)t->cells + i, w);
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->ncells = t->cap = 0;
}

/* Lag in time, short: 0s, 4.2s, 37s, 5m07s, 3h12m, 2d05h; "-" unknown. */
/* "2m05s", "-" for a negative (unknown) duration. */
static void fmt_duration(char *buf, size_t len, int64_t ms)
{
	int64_t s = ms / 1000;

	if (ms < 0)
		snprintf(buf, len, "-");
	else if (ms == 0)
		snprintf(buf, len, "0s");
	else if (ms < 10000)
		snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
	else if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", (long long)(s / 60),
		    (long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600),
		    (long long)(s / 60 % 60));
	else
		snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400),
		    (long long)(s / 3600 % 24));
}

static void table_duration(struct table *t, int64_t ms)
{
	char buf[32];

	fmt_duration(buf, sizeof(buf), ms);
	table_cell(t, "%s", buf);
}

/* ---- actions ------------------------------------------------------ */

static int do_create(struct cli_conn *c, const struct opts *o)
{
	struct props pr;
	struct kp_create_mirror_request req;
	struct kp_create_mirror_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	char err[512];
	uint8_t *frame;
	int rc = 0;

	props_init(&pr);
	if (props_parse_file(&pr, o->mirror_config, err, sizeof(err)) < 0)
		die_usage("--mirror-config: %s", err);
	kp_create_mirror_request_init(&req);
	req.mirror_name = kstr_c(o->mirror);
	req.configs_n = (int32_t)pr.n;
	req.configs = calloc(pr.n + 1, sizeof(*req.configs));
	if (req.configs == NULL || a == NULL)
		die_conn("out of memory");
	for (size_t i = 0; i < pr.n; i++) {
		req.configs[i].name = kstr_c(pr.names[i]);
		req.configs[i].value = kstr_c(pr.values[i]);
	}
	frame = rpc(c, KP_API_CREATE_MIRROR, &req, &resp, a);
	if (resp.error_code != 0) {
		print_kafka_error(NULL, resp.error_code, resp.error_message);
		rc = EXIT_KAFKA;
	} else {
		printf("Created mirror %s\n", o->mirror);
	}
	free(frame);
	free(req.configs);
	karena_free(a);
	props_fini(&pr);
	return rc;
}

/* A pattern mirrord would refuse is a usage error, with mirrord's reason. */
static void check_pattern(const char *opt, const char *p)
{
	char why[640];

	if (tpattern_check(p, "pattern", why, sizeof(why)) != 0)
		die_usage("%s: %s", opt, why);
}

/* Splits the --topic arguments into names and patterns. */
static void split_topics(const struct strlist *in, struct kstr **names,
    int32_t *nn, struct kstr **pats, int32_t *np)
{
	*names = calloc((size_t)in->n + 1, sizeof(**names));
	*pats = calloc((size_t)in->n + 1, sizeof(**pats));
	if (*names == NULL || *pats == NULL)
		die_conn("out of memory");
	*nn = *np = 0;
	for (int i = 0; i < in->n; i++) {
		if (is_plain_name(in->v[i])) {
			(*names)[(*nn)++] = kstr_c(in->v[i]);
		} else {
			check_pattern("--topic", in->v[i]);
			(*pats)[(*np)++] = kstr_c(in->v[i]);
		}
	}
}

/* Prints the shared per-topic results; returns the exit status. */
static int report_topics(const char *verb, const char *mirror,
    const struct kp_add_topics_to_mirror_response *resp)
{
	int failed = 0, ok = 0;

	if (resp->error_code != 0) {
		print_kafka_error(NULL, resp->error_code, resp->error_message);
		return EXIT_KAFKA;
	}
	for (int32_t i = 0; i < resp->topics_n; i++) {
		const struct kp_add_topics_to_mirror_response_topic_result *t =
		    &resp->topics[i];

		if (t->error_code != 0) {
			char what[400];

			snprintf(what, sizeof(what), "topic %.*s", (int)t->name.len,
			    t->name.p);
			print_kafka_error(what, t->error_code, t->error_message);
			failed++;
		} else {
			ok++;
		}
	}
	if (ok == 0 && failed > 0)
		return EXIT_KAFKA;
	printf("%s %d topic(s) in mirror %s: [", verb, ok, mirror);
	for (int32_t i = 0, k = 0; i < resp->topics_n; i++) {
		if (resp->topics[i].error_code != 0)
			continue;
		printf("%s%.*s", k++ ? ", " : "", (int)resp->topics[i].name.len,
		    resp->topics[i].name.p);
	}
	printf("]\n");
	return failed ? EXIT_KAFKA : 0;
}

/* What RemoveTopicsFromMirror did with the patterns (its tags 0-1). */
static void report_patterns(const char *mirror,
    const struct kp_add_topics_to_mirror_response *resp)
{
	if (resp->error_code != 0)
		return;
	for (int32_t i = 0; i < resp->removed_include_patterns_n; i++)
		printf("Removed include pattern '%.*s' from mirror %s: discovery "
		    "no longer adds the topics it matches\n",
		    (int)resp->removed_include_patterns[i].len,
		    resp->removed_include_patterns[i].p, mirror);
	for (int32_t i = 0; i < resp->added_exclude_patterns_n; i++)
		printf("Added exclude pattern '%.*s' to mirror %s: discovery "
		    "skips the topics it matches\n",
		    (int)resp->added_exclude_patterns[i].len,
		    resp->added_exclude_patterns[i].p, mirror);
}

static int decode_topic_results(struct cli_conn *c, struct kr *r,
    struct karena *a, const char *api,
    struct kp_add_topics_to_mirror_response *resp)
{
	kp_add_topics_to_mirror_response_init(resp);
	if (kp_add_topics_to_mirror_response_decode(r, a, 0, resp) < 0)
		die_conn("%s: malformed %s response: %s", c->addr, api, r->why);
	return 0;
}

static int do_add(struct cli_conn *c, const struct opts *o)
{
	struct kp_add_topics_to_mirror_request req;
	struct kp_add_topics_to_mirror_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	struct kstr *names, *pats, *ex;
	int32_t nn, np;
	struct kw w;
	struct kr r;
	uint8_t *frame;
	int rc;

	split_topics(&o->topics, &names, &nn, &pats, &np);
	ex = calloc((size_t)o->excludes.n + 1, sizeof(*ex));
	if (ex == NULL || a == NULL)
		die_conn("out of memory");
	for (int i = 0; i < o->excludes.n; i++) {
		check_pattern("--exclude", o->excludes.v[i]);
		ex[i] = kstr_c(o->excludes.v[i]);
	}
	kp_add_topics_to_mirror_request_init(&req);
	req.mirror_name = kstr_c(o->mirror);
	req.topics = calloc((size_t)nn + 1, sizeof(*req.topics));
	if (req.topics == NULL)
		die_conn("out of memory");
	for (int32_t i = 0; i < nn; i++)
		req.topics[i].name = names[i];
	req.topics_n = nn;
	req.include_patterns = pats;
	req.include_patterns_n = np;
	req.exclude_patterns = ex;
	req.exclude_patterns_n = o->excludes.n;
	kw_init(&w, MAX_RESPONSE);
	kp_add_topics_to_mirror_request_encode(&w, 0, &req);
	frame = conn_call(c, KP_API_ADD_TOPICS_TO_MIRROR, 0, &w, &r);
	decode_topic_results(c, &r, a, "AddTopicsToMirror", &resp);
	rc = report_topics("Added", o->mirror, &resp);
	if (rc == 0 && resp.topics_n == 0 && np > 0 &&
	    resp.warning_message.len > 0)
		printf("Patterns saved to mirror %s for auto-discovery; no topic "
		    "was matched yet (see the warning).\n", o->mirror);
	else if (rc == 0 && resp.topics_n == 0 && np > 0)
		printf("No matching topics found yet. Patterns saved to mirror %s "
		    "for auto-discovery.\n", o->mirror);
	if (rc == 0 && resp.warning_message.len > 0) {
		fflush(stdout);
		fprintf(stderr, "%s: warning: %.*s\n", progname,
		    (int)resp.warning_message.len, resp.warning_message.p);
		rc = EXIT_WARNING;
	}
	free(frame);
	free(req.topics);
	free(names);
	free(pats);
	free(ex);
	kw_fini(&w);
	karena_free(a);
	return rc;
}

static int describe_call(struct cli_conn *c, const char *mirror,
    struct karena *a, struct kp_describe_mirrors_response *resp,
    uint8_t **frame);

/* Resolves patterns to the mirror's topic names through DescribeMirrors. */
static void resolve_patterns(struct cli_conn *c, const char *mirror,
    struct kstr *pats, int32_t np, struct kstr **names, int32_t *nn,
    struct karena *a, uint8_t **frame)
{
	struct kp_describe_mirrors_response resp;
	struct tpattern **res;

	if (np == 0)
		return;
	if (describe_call(c, mirror, a, &resp, frame) != 0)
		exit(EXIT_KAFKA);
	res = calloc((size_t)np, sizeof(*res));
	if (res == NULL)
		die_conn("out of memory");
	for (int32_t i = 0; i < np; i++) {
		char *p = kstr_dup(pats[i]), why[512];

		if (p == NULL)
			die_conn("out of memory");
		if ((res[i] = tpattern_new(p, why, sizeof(why))) == NULL)
			die_usage("--topic: pattern '%.200s' %s", p, why);
		free(p);
	}
	for (int32_t m = 0; m < resp.mirrors_n; m++) {
		for (int32_t t = 0; t < resp.mirrors[m].topics_n; t++) {
			char *name = kstr_dup(resp.mirrors[m].topics[t].name);

			if (name == NULL)
				die_conn("out of memory");
			for (int32_t i = 0; i < np; i++) {
				if (tpattern_match(res[i], name)) {
					*names = realloc(*names,
					    sizeof(**names) * (size_t)(*nn + 2));
					if (*names == NULL)
						die_conn("out of memory");
					(*names)[(*nn)++] =
					    resp.mirrors[m].topics[t].name;
					break;
				}
			}
			free(name);
		}
	}
	for (int32_t i = 0; i < np; i++)
		tpattern_free(res[i]);
	free(res);
}

/* --remove, --pause, --resume, --recover: same request and response shapes. */
static int describe_call(struct cli_conn *c, const char *mirror,
    struct karena *a, struct kp_describe_mirrors_response *resp,
    uint8_t **frame);

static int kstr_cmp(struct kstr a, struct kstr b);

/* RecoverMirrorTopics with the resolution realign (validate_only: the
 * check and what it would delete, nothing changed); the response frame,
 * resp decoded from it. */
static uint8_t *realign_call(struct cli_conn *c, const struct opts *o,
    const struct kstr *names, int32_t nn, int validate_only,
    struct karena *a, struct kp_add_topics_to_mirror_response *resp)
{
	struct kp_recover_mirror_topics_request rr;
	uint8_t *frame;
	struct kw w;
	struct kr r;

	kw_init(&w, MAX_RESPONSE);
	kp_recover_mirror_topics_request_init(&rr);
	rr.mirror_name = kstr_c(o->mirror);
	rr.topics = calloc((size_t)nn + 1, sizeof(*rr.topics));
	if (rr.topics == NULL)
		die_conn("out of memory");
	for (int32_t i = 0; i < nn; i++)
		rr.topics[i].name = names[i];
	rr.topics_n = nn;
	rr.resolution = kstr_c("realign");
	rr.validate_only = validate_only;
	kp_recover_mirror_topics_request_encode(&w, 0, &rr);
	free(rr.topics);
	frame = conn_call(c, KP_API_RECOVER_MIRROR_TOPICS, 0, &w, &r);
	decode_topic_results(c, &r, a, "RecoverMirrorTopics", resp);
	kw_fini(&w);
	return frame;
}

/* The destination records of one partition, as the plan says them. */
static void realign_partition(const struct kp_describe_mirrors_response_partition *p)
{
	int64_t end = p->destination_offset;

	printf("    partition %d (%.*s): ", (int)p->partition_index,
	    (int)p->state.len, p->state.p);
	if (end > 0)
		printf("%lld record(s), destination offsets 0..%lld\n",
		    (long long)end, (long long)end - 1);
	else if (end == 0)
		printf("empty\n");
	else
		printf("its records (its destination end is not known to mirrord "
		    "now)\n");
}

/*
 * --recover --resolution realign: mirrord checks the request and says what
 * it would delete (ValidateOnly); the plan is printed with each
 * partition's destination end (DescribeMirrors); then the operator
 * confirms (--yes, or y at the prompt on a terminal) and the request is
 * sent for real.  Any topic refused: nothing is sent.
 */
static int do_realign(struct cli_conn *c, const struct opts *o,
    const struct kstr *names, int32_t nn, struct karena *a)
{
	struct kp_add_topics_to_mirror_response resp;
	struct kp_describe_mirrors_response d;
	uint8_t *frame, *dframe = NULL;
	int refused = 0, rc;
	char line[64];

	frame = realign_call(c, o, names, nn, 1, a, &resp);
	if (resp.error_code != 0) {
		print_kafka_error(NULL, resp.error_code, resp.error_message);
		free(frame);
		return EXIT_KAFKA;
	}
	for (int32_t i = 0; i < resp.topics_n; i++) {
		const struct kp_add_topics_to_mirror_response_topic_result *t =
		    &resp.topics[i];
		char what[400];

		if (t->error_code == 0)
			continue;
		snprintf(what, sizeof(what), "topic %.*s", (int)t->name.len,
		    t->name.p);
		print_kafka_error(what, t->error_code, t->error_message);
		refused++;
	}
	if (refused > 0 || resp.topics_n == 0) {
		fprintf(stderr, "%s: nothing was realigned or deleted\n", progname);
		free(frame);
		return EXIT_KAFKA;
	}
	if (describe_call(c, o->mirror, a, &d, &dframe) != 0) {
		free(frame);
		free(dframe);
		return EXIT_KAFKA;
	}
	printf("Realign of mirror %s deletes on mirrord's destination cluster, "
	    "then copies again from the source's start:\n", o->mirror);
	for (int32_t i = 0; i < resp.topics_n; i++) {
		const struct kp_add_topics_to_mirror_response_topic_result *t =
		    &resp.topics[i];

		printf("  topic %.*s: %.*s\n", (int)t->name.len, t->name.p,
		    t->error_message.len > 0 ? (int)t->error_message.len : 0,
		    t->error_message.len > 0 ? t->error_message.p : "");
		for (int32_t m = 0; m < d.mirrors_n; m++)
			for (int32_t k = 0; k < d.mirrors[m].topics_n; k++) {
				const struct kp_describe_mirrors_response_topic *dt =
				    &d.mirrors[m].topics[k];

				if (kstr_cmp(dt->name, t->name) != 0)
					continue;
				for (int32_t p = 0; p < dt->partitions_n; p++)
					realign_partition(&dt->partitions[p]);
			}
	}
	fflush(stdout);
	if (!o->yes && !isatty(STDIN_FILENO)) {
		fprintf(stderr, "%s: --resolution realign deletes the destination "
		    "topics above: confirm with --yes (standard input is not a "
		    "terminal); nothing was changed\n", progname);
		free(frame);
		free(dframe);
		return EXIT_USAGE;
	}
	if (!o->yes) {
		fprintf(stderr, "Delete %s and copy %s again? [y/N] ", resp.topics_n
		    == 1 ? "this topic" : "these topics", resp.topics_n == 1 ?
		    "it" : "them");
		fflush(stderr);
		if (fgets(line, sizeof(line), stdin) == NULL ||
		    (strcasecmp(line, "y\n") != 0 && strcasecmp(line, "yes\n") != 0)) {
			fprintf(stderr, "%s: not confirmed; nothing was changed\n",
			    progname);
			free(frame);
			free(dframe);
			return EXIT_KAFKA;
		}
		/* The answer may have taken longer than the listener keeps
		 * an idle connection: a fresh one. */
		clisec_tls_close(c->ssl);
		close(c->fd);
		conn_open(c, o->bootstrap, o->timeout_ms, o->client_id, &o->sec);
		check_peer(c, o->action);
		if (o->sec.sasl)
			sasl_login(c, &o->sec);
	}
	free(dframe);
	free(frame);
	frame = realign_call(c, o, names, nn, 0, a, &resp);
	rc = report_topics("Realigning", o->mirror, &resp);
	if (rc == 0)
		printf("mirrord deletes the destination topic%s, creates %s again "
		    "and copies the source from its start (see --describe)\n",
		    resp.topics_n == 1 ? "" : "s", resp.topics_n == 1 ? "it" :
		    "them");
	free(frame);
	return rc;
}

static int kstr_cmp(struct kstr a, struct kstr b);

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 if topic name is one --remove stopped (answered 0). */
static int was_removed(const struct kp_add_topics_to_mirror_response *rm,
    struct kstr name)
{
	for (int32_t i = 0; i < rm->topics_n; i++)
		if (rm->topics[i].error_code == 0 &&
		    kstr_cmp(rm->topics[i].name, name) == 0)
			return 1;
	return 0;
}

static int kstr_eqk(struct kstr a, struct kstr b)
{
	return a.len == b.len && (a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

/*
 * The warnings of the partitions just stopped (consumer-group offsets not
 * synced at the stop, a refused ACL change...), one line per text naming
 * its partitions, on stderr.  They change no exit status: what the report
 * says about records stands.
 */
static void print_stop_warnings(const struct kp_describe_mirrors_response *d,
    const struct kp_add_topics_to_mirror_response *rm)
{
	for (int32_t m = 0; m < d->mirrors_n; m++)
		for (int32_t t = 0; t < d->mirrors[m].topics_n; t++)
			for (int32_t p = 0; p < d->mirrors[m].topics[t].partitions_n;
			    p++) {
				const struct kp_describe_mirrors_response_topic *tp =
				    &d->mirrors[m].topics[t];
				struct kstr w = tp->partitions[p].warning_message;
				int seen = 0, n = 0;

				if (!was_removed(rm, tp->name) || w.len <= 0)
					continue;
				/* Said already with an earlier partition? */
				for (int32_t t2 = 0; t2 <= t && !seen; t2++) {
					const struct kp_describe_mirrors_response_topic
					    *u = &d->mirrors[m].topics[t2];

					for (int32_t p2 = 0; p2 < u->partitions_n &&
					    (t2 < t || p2 < p) && !seen; p2++)
						seen = was_removed(rm, u->name) &&
						    kstr_eqk(u->partitions[p2].warning_message,
						    w);
				}
				if (seen)
					continue;
				fprintf(stderr, "%s: warning: ", progname);
				for (int32_t t2 = t; t2 < d->mirrors[m].topics_n; t2++) {
					const struct kp_describe_mirrors_response_topic
					    *u = &d->mirrors[m].topics[t2];

					if (!was_removed(rm, u->name))
						continue;
					for (int32_t p2 = t2 == t ? p : 0;
					    p2 < u->partitions_n; p2++)
						if (kstr_eqk(u->partitions[p2].warning_message,
						    w))
							fprintf(stderr, "%s%.*s-%d", n++ > 0 ?
							    ", " : "", (int)u->name.len,
							    u->name.p,
							    u->partitions[p2].partition_index);
				}
				fprintf(stderr, ": %.*s\n", (int)w.len, w.p);
			}
}

/*
 * --remove --wait: polls DescribeMirrors until every partition of the
 * topics just removed is STOPPED (mirrord stops fetching, waits for what
 * is in flight and records where each partition stopped), then prints the
 * failover report: where each stopped and what it had not copied.  Gives
 * up after o->wait_s seconds naming the partitions still on their way.
 */
static int wait_stopped(struct cli_conn *c, const struct opts *o,
    const struct kp_add_topics_to_mirror_response *rm)
{
	int64_t deadline = now_ms() + (int64_t)o->wait_s * 1000;
	const struct timespec pause = { 0, 200 * 1000000L };

	for (;;) {
		struct kp_describe_mirrors_response d;
		struct karena *a = karena_new(MAX_RESPONSE);
		uint8_t *frame = NULL;
		size_t waiting = 0, total = 0;
		int expired;

		if (a == NULL)
			die_conn("out of memory");
		if (describe_call(c, o->mirror, a, &d, &frame) != 0) {
			free(frame);
			karena_free(a);
			return EXIT_KAFKA;
		}
		expired = now_ms() >= deadline;
		for (int32_t m = 0; m < d.mirrors_n; m++)
			for (int32_t t = 0; t < d.mirrors[m].topics_n; t++) {
				const struct kp_describe_mirrors_response_topic *tp =
				    &d.mirrors[m].topics[t];

				if (!was_removed(rm, tp->name))
					continue;
				for (int32_t p = 0; p < tp->partitions_n; p++) {
					total++;
					if (kstr_eq(tp->partitions[p].state, "STOPPED"))
						continue;
					if (expired)
						fprintf(stderr, "%s: %.*s-%d is still %.*s "
						    "after %d s\n", progname,
						    (int)tp->name.len, tp->name.p,
						    tp->partitions[p].partition_index,
						    (int)tp->partitions[p].state.len,
						    tp->partitions[p].state.p, o->wait_s);
					waiting++;
				}
			}
		if (waiting == 0) {
			struct table tb;
			int64_t sum = 0;
			int unknown = 0, lower = 0, rc;

			table_init(&tb, 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 |
			    1u << 5 | 1u << 6 | 1u << 7, "TOPIC", "PARTITION",
			    "LAST-MIRRORED-OFFSET", "EPOCH", "SOURCE-HIGH-WATERMARK",
			    "NOT-COPIED", "LAG-TIME", "SOURCE-AGE",
			    (const char *)NULL);
			for (int32_t m = 0; m < d.mirrors_n; m++)
				for (int32_t t = 0; t < d.mirrors[m].topics_n; t++) {
					const struct kp_describe_mirrors_response_topic *tp =
					    &d.mirrors[m].topics[t];

					if (!was_removed(rm, tp->name))
						continue;
					for (int32_t p = 0; p < tp->partitions_n; p++) {
						const struct kp_describe_mirrors_response_partition
						    *pp = &tp->partitions[p];

						table_kstr(&tb, tp->name);
						table_cell(&tb, "%d", pp->partition_index);
						table_num(&tb, pp->last_mirrored_offset);
						table_num(&tb, pp->last_mirrored_epoch);
						table_num(&tb, pp->failover_source_offset);
						if (pp->failover_lag >= 0 &&
						    pp->failover_lag_is_lower_bound)
							table_cell(&tb, ">=%lld", (long long)
							    pp->failover_lag);
						else
							table_num(&tb, pp->failover_lag);
						table_duration(&tb, pp->failover_lag_ms);
						table_duration(&tb,
						    pp->failover_source_offset_age_ms);
						if (pp->failover_lag >= 0)
							sum += pp->failover_lag;
						else
							unknown++;
						if (pp->failover_lag >= 0 &&
						    pp->failover_lag_is_lower_bound)
							lower++;
					}
				}
			printf("Failover report of mirror %s: %zu partition(s) "
			    "STOPPED, %s%lld source offset(s) not copied%s%s\n",
			    o->mirror, total, lower || unknown ? "at least " : "",
			    (long long)sum, lower ? " (the source did not answer "
			    "at the stop: NOT-COPIED >=N is counted from its last "
			    "known end, SOURCE-AGE old)" : "", unknown ? " (more "
			    "where NOT-COPIED is -: the source's end is unknown)" :
			    "");
			if (total > 0)
				table_print(&tb);
			rc = lower || unknown ? EXIT_MAYBE_NOT_COPIED : sum > 0 ?
			    EXIT_NOT_COPIED : 0;
			fflush(stdout);
			print_stop_warnings(&d, rm);
			if (rc == EXIT_MAYBE_NOT_COPIED && lower)
				fprintf(stderr, "%s: source records may not have been "
				    "copied: the source could not be asked at the "
				    "stop (exit status %d)\n", progname, rc);
			else if (rc == EXIT_MAYBE_NOT_COPIED)
				fprintf(stderr, "%s: source records may not have been "
				    "copied: what %d partition(s) held is unknown "
				    "(exit status %d)\n", progname, unknown, rc);
			else if (rc == EXIT_NOT_COPIED)
				fprintf(stderr, "%s: %lld source offset(s) were not "
				    "copied before the stop (exit status %d)\n",
				    progname, (long long)sum, rc);
			free(frame);
			karena_free(a);
			return rc;
		}
		free(frame);
		karena_free(a);
		if (expired) {
			fprintf(stderr, "%s: --wait %d: %zu partition(s) not STOPPED "
			    "yet; see --describe --mirror %s\n", progname, o->wait_s,
			    waiting, o->mirror);
			return EXIT_KAFKA;
		}
		nanosleep(&pause, NULL);
	}
}

static int do_topics_op(struct cli_conn *c, const struct opts *o)
{
	struct kp_add_topics_to_mirror_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	struct kstr *names, *pats;
	int32_t nn, np;
	struct kw w;
	struct kr r;
	uint8_t *frame = NULL, *dframe = NULL;
	const char *api, *verb;
	int16_t key;
	int rc;

	if (a == NULL)
		die_conn("out of memory");
	split_topics(&o->topics, &names, &nn, &pats, &np);
	kw_init(&w, MAX_RESPONSE);
	if (o->action == ACT_REMOVE) {
		struct kp_remove_topics_from_mirror_request req;

		kp_remove_topics_from_mirror_request_init(&req);
		req.mirror_name = kstr_c(o->mirror);
		req.topics = calloc((size_t)nn + 1, sizeof(*req.topics));
		if (req.topics == NULL)
			die_conn("out of memory");
		for (int32_t i = 0; i < nn; i++)
			req.topics[i].name = names[i];
		req.topics_n = nn;
		req.patterns = pats;
		req.patterns_n = np;
		kp_remove_topics_from_mirror_request_encode(&w, 0, &req);
		free(req.topics);
		key = KP_API_REMOVE_TOPICS_FROM_MIRROR;
		api = "RemoveTopicsFromMirror";
		verb = "Stopped mirroring for";
	} else {
		struct kp_pause_mirror_topics_request req;

		/* Pause and Resume carry names only: resolve patterns first. */
		resolve_patterns(c, o->mirror, pats, np, &names, &nn, a, &dframe);
		if (nn == 0) {
			fprintf(stderr, "%s: no topic of mirror %s matches the given "
			    "patterns\n", progname, o->mirror);
			exit(EXIT_KAFKA);
		}
		kp_pause_mirror_topics_request_init(&req);
		req.mirror_name = kstr_c(o->mirror);
		req.topics = calloc((size_t)nn + 1, sizeof(*req.topics));
		if (req.topics == NULL)
			die_conn("out of memory");
		for (int32_t i = 0; i < nn; i++)
			req.topics[i].name = names[i];
		req.topics_n = nn;
		if (o->action == ACT_RECOVER && o->resolution != NULL &&
		    strcmp(o->resolution, "realign") == 0) {
			rc = do_realign(c, o, names, nn, a);
			free(dframe);
			free(names);
			free(pats);
			kw_fini(&w);
			karena_free(a);
			return rc;
		}
		/* Resume's request has the same shape as Pause's; Recover's adds a
		 * tagged Resolution. */
		if (o->action == ACT_RECOVER) {
			struct kp_recover_mirror_topics_request rr;

			kp_recover_mirror_topics_request_init(&rr);
			rr.mirror_name = req.mirror_name;
			rr.topics = calloc((size_t)nn + 1, sizeof(*rr.topics));
			if (rr.topics == NULL)
				die_conn("out of memory");
			for (int32_t i = 0; i < nn; i++)
				rr.topics[i].name = names[i];
			rr.topics_n = nn;
			if (o->resolution != NULL)
				rr.resolution = kstr_c(o->resolution);
			kp_recover_mirror_topics_request_encode(&w, 0, &rr);
			free(rr.topics);
		} else {
			kp_pause_mirror_topics_request_encode(&w, 0, &req);
		}
		free(req.topics);
		if (o->action == ACT_RECOVER) {
			key = KP_API_RECOVER_MIRROR_TOPICS;
			api = "RecoverMirrorTopics";
			verb = "Retried the FAILED partitions of";
		} else if (o->action == ACT_PAUSE) {
			key = KP_API_PAUSE_MIRROR_TOPICS;
			api = "PauseMirrorTopics";
			verb = "Paused mirroring for";
		} else {
			key = KP_API_RESUME_MIRROR_TOPICS;
			api = "ResumeMirrorTopics";
			verb = "Resumed mirroring for";
		}
	}
	frame = conn_call(c, key, 0, &w, &r);
	decode_topic_results(c, &r, a, api, &resp);
	if (o->action == ACT_REMOVE)
		report_patterns(o->mirror, &resp);
	rc = report_topics(verb, o->mirror, &resp);
	if (o->action == ACT_REMOVE && o->wait_s > 0 && rc == 0) {
		fflush(stdout);
		rc = wait_stopped(c, o, &resp);
	}
	free(frame);
	free(dframe);
	free(names);
	free(pats);
	kw_fini(&w);
	karena_free(a);
	return rc;
}

static int do_delete(struct cli_conn *c, const struct opts *o)
{
	struct kp_delete_mirror_request req;
	struct kp_delete_mirror_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	uint8_t *frame;
	int rc = 0;

	if (a == NULL)
		die_conn("out of memory");
	kp_delete_mirror_request_init(&req);
	req.mirror_name = kstr_c(o->mirror);
	frame = rpc(c, KP_API_DELETE_MIRROR, &req, &resp, a);
	if (resp.error_code != 0) {
		print_kafka_error(NULL, resp.error_code, resp.error_message);
		rc = EXIT_KAFKA;
	} else {
		printf("Deleted mirror %s\n", o->mirror);
	}
	free(frame);
	karena_free(a);
	return rc;
}

static int kstr_cmp(struct kstr a, struct kstr b)
{
	int32_t n = MIN(a.len, b.len);
	int c = n > 0 ? memcmp(a.p, b.p, (size_t)n) : 0;

	return c != 0 ? c : (a.len > b.len) - (a.len < b.len);
}

static int cmp_mirror_entry(const void *x, const void *y)
{
	const struct kp_list_mirrors_response_mirror *a = x, *b = y;

	return kstr_cmp(a->mirror_name, b->mirror_name);
}

static int do_list(struct cli_conn *c, const struct opts *o)
{
	struct kp_list_mirrors_request req;
	struct kp_list_mirrors_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	uint8_t *frame;

	(void)o;
	if (a == NULL)
		die_conn("out of memory");
	kp_list_mirrors_request_init(&req);
	frame = rpc(c, KP_API_LIST_MIRRORS, &req, &resp, a);
	if (resp.error_code != 0) {
		print_kafka_error(NULL, resp.error_code, resp.error_message);
		return EXIT_KAFKA;
	}
	if (resp.mirrors_n <= 0) {
		printf("No mirrors found\n");
	} else {
		struct table t;

		qsort(resp.mirrors, (size_t)resp.mirrors_n, sizeof(*resp.mirrors),
		    cmp_mirror_entry);
		table_init(&t, 1u << 1, "MIRROR", "TOPICS", "SOURCE-CLUSTER-ID",
		    "SOURCE-BOOTSTRAP-SERVER", (const char *)NULL);
		for (int32_t i = 0; i < resp.mirrors_n; i++) {
			const struct kp_list_mirrors_response_mirror *m =
			    &resp.mirrors[i];

			table_kstr(&t, m->mirror_name);
			table_num(&t, m->topic_count);
			table_kstr(&t, m->source_cluster_id);
			table_kstr(&t, m->source_bootstrap);
		}
		table_print(&t);
	}
	free(frame);
	karena_free(a);
	return 0;
}

static int describe_call(struct cli_conn *c, const char *mirror,
    struct karena *a, struct kp_describe_mirrors_response *resp,
    uint8_t **frame)
{
	struct kp_describe_mirrors_request req;
	struct kstr name = kstr_c(mirror);
	int rc = 0;

	kp_describe_mirrors_request_init(&req);
	if (mirror != NULL) {
		req.mirror_names = &name;
		req.mirror_names_n = 1;
	} else {
		req.mirror_names = NULL;
		req.mirror_names_n = -1;
	}
	*frame = rpc(c, KP_API_DESCRIBE_MIRRORS, &req, resp, a);
	if (resp->error_code != 0) {
		print_kafka_error(NULL, resp->error_code, resp->error_message);
		rc = EXIT_KAFKA;
	}
	for (int32_t i = 0; i < resp->mirrors_n; i++) {
		if (resp->mirrors[i].error_code != 0) {
			char what[300];

			snprintf(what, sizeof(what), "mirror %.*s",
			    (int)resp->mirrors[i].mirror_name.len,
			    resp->mirrors[i].mirror_name.p);
			print_kafka_error(what, resp->mirrors[i].error_code,
			    resp->mirrors[i].error_message);
			rc = EXIT_KAFKA;
		}
	}
	return rc;
}

/* Flattened rows, sorted by mirror, topic, partition; tstate: the topic's
 * state, its partitions' common state or MIXED (over all its partitions,
 * also those --failed leaves out). */
struct drow {
	struct kstr mirror, topic;
	const char *tstate;
	const struct kp_describe_mirrors_response_partition *p;
	char *note;              /* STOPPED: the failover report, or NULL */
	char *why;               /* STOPPED with a reason and a warning: both */
};

/* The failover report of a STOPPED partition, one line; NULL when mirrord
 * sent none (not STOPPED, or stopped by an older mirrord). */
static char *failover_note(const struct kp_describe_mirrors_response_partition *p)
{
	char lag[32], *s = NULL;
	int n;

	if (!kstr_eq(p->state, "STOPPED") || (p->failover_source_offset < 0 &&
	    p->failover_lag < 0 && !p->failover_lag_is_lower_bound))
		return NULL;
	fmt_duration(lag, sizeof(lag), p->failover_lag_ms);
	if (p->failover_lag >= 0 && p->failover_lag_is_lower_bound) {
		char age[32];

		fmt_duration(age, sizeof(age), p->failover_source_offset_age_ms);
		n = asprintf(&s, "stopped with at least %lld source offsets not "
		    "copied: the source did not answer at the stop; its last "
		    "known high watermark %lld (%s before the stop), last "
		    "mirrored offset %lld (epoch %d), lag %s",
		    (long long)p->failover_lag,
		    (long long)p->failover_source_offset, age,
		    (long long)p->last_mirrored_offset, p->last_mirrored_epoch, lag);
	} else if (p->failover_lag == 0)
		n = asprintf(&s, "stopped caught up: source high watermark %lld, "
		    "last mirrored offset %lld (epoch %d)",
		    (long long)p->failover_source_offset,
		    (long long)p->last_mirrored_offset, p->last_mirrored_epoch);
	else if (p->failover_lag > 0)
		n = asprintf(&s, "stopped with %lld source offsets not copied: "
		    "source high watermark %lld, last mirrored offset %lld "
		    "(epoch %d), lag %s", (long long)p->failover_lag,
		    (long long)p->failover_source_offset,
		    (long long)p->last_mirrored_offset, p->last_mirrored_epoch, lag);
	else if (p->failover_source_offset < 0)
		n = asprintf(&s, "stopped while the source could not be read: "
		    "its end was never learnt, so what was not copied is unknown; "
		    "last mirrored offset %lld (epoch %d)",
		    (long long)p->last_mirrored_offset, p->last_mirrored_epoch);
	else
		n = asprintf(&s, "stopped: source high watermark %lld, not copied "
		    "unknown, last mirrored offset %lld (epoch %d)",
		    (long long)p->failover_source_offset,
		    (long long)p->last_mirrored_offset, p->last_mirrored_epoch);
	if (n < 0)
		die_conn("out of memory");
	return s;
}

static int cmp_drow(const void *x, const void *y)
{
	const struct drow *a = x, *b = y;
	int c = kstr_cmp(a->mirror, b->mirror);

	if (c == 0)
		c = kstr_cmp(a->topic, b->topic);
	if (c == 0)
		c = (a->p->partition_index > b->p->partition_index) -
		    (a->p->partition_index < b->p->partition_index);
	return c;
}

/*
 * The state a partition is shown in: its state, or STALLED for one that
 * should be copying (PREPARING, MIRRORING) while mirrord cannot read its
 * source or write its destination (StalledReason set).  A name this tool
 * does not know is UNKNOWN.
 */
static const char *shown_state(const struct kp_describe_mirrors_response_partition *p)
{
	static const char *const names[] = {
		"UNKNOWN", "PREPARING", "MIRRORING", "PAUSING", "PAUSED",
		"STOPPING", "STOPPED", "FAILED",
	};

	if (p->stalled_reason.len > 0 && (kstr_eq(p->state, "MIRRORING") ||
	    kstr_eq(p->state, "PREPARING")))
		return "STALLED";
	for (size_t k = 0; k < ARRAY_SIZE(names); k++)
		if (kstr_eq(p->state, names[k]))
			return names[k];
	return "UNKNOWN";
}

/* The topic-level state: the partitions' common shown state, MIXED when
 * they differ, UNKNOWN for a topic without partitions. */
static const char *topic_state(const struct kp_describe_mirrors_response_topic *t)
{
	const char *first;

	if (t->partitions_n <= 0)
		return "UNKNOWN";
	first = shown_state(&t->partitions[0]);
	for (int32_t i = 1; i < t->partitions_n; i++)
		if (strcmp(shown_state(&t->partitions[i]), first) != 0)
			return "MIXED";
	return first;
}

/*
 * Why a partition is where it is, for the REASON column: the FAILED
 * reason, why it is stalled (or, PAUSED, cannot refresh its source end),
 * the warning of a copying partition that makes no progress, the note of
 * a partition mirrord stopped itself, the failover report of a STOPPED
 * one.  A partition STOPPED with a reason (its source topic deleted, say)
 * and a warning (the consumer-group offsets not synced at the stop) shows
 * both, the reason first.  Empty kstr when none.
 */
static struct kstr partition_reason(const struct drow *r)
{
	const struct kp_describe_mirrors_response_partition *p = r->p;

	if (p->error_message.len > 0 && kstr_eq(p->state, "FAILED"))
		return p->error_message;
	if (p->stalled_reason.len > 0)
		return p->stalled_reason;
	if (r->why != NULL)
		return kstr_c(r->why);
	if (p->warning_message.len > 0)
		return p->warning_message;
	if (p->error_message.len > 0)
		return p->error_message;
	if (r->note != NULL)
		return kstr_c(r->note);
	return (struct kstr){ NULL, 0 };
}

/* Worse first: which reason a topic summary shows. */
static int reason_rank(const struct drow *r)
{
	if (partition_reason(r).len <= 0)
		return 0;
	if (kstr_eq(r->p->state, "FAILED") || r->p->stalled_reason.len > 0)
		return 3;
	return r->p->warning_message.len > 0 ? 2 : 1;
}

static int kstr_has_prefix(struct kstr s, const char *prefix)
{
	size_t n = strlen(prefix);

	return s.len >= 0 && (size_t)s.len >= n && memcmp(s.p, prefix, n) == 0;
}

/* LAG: "-" unknown; ">=N" while mirrord cannot read the source (N is the
 * last known source end minus the destination end: the source may have
 * grown since). */
static void table_lag(struct table *t,
    const struct kp_describe_mirrors_response_partition *p)
{
	if (p->lag >= 0 && p->stalled_reason.len > 0 &&
	    kstr_has_prefix(p->stalled_reason, "cannot read the source"))
		table_cell(t, ">=%lld", (long long)p->lag);
	else
		table_num(t, p->lag);
}

/* Every partition: the KIP tool's columns plus LAG-TIME, and REASON when
 * a partition has one (a healthy table stays narrow). */
static void describe_partitions(const struct drow *rows, size_t n)
{
	struct table t;
	bool reasons = false;

	for (size_t i = 0; i < n; i++)
		reasons = reasons || partition_reason(&rows[i]).len > 0;
	/* The list of headers ends at the first NULL. */
	table_init(&t, 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6,
	    "MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET",
	    "DESTINATION-OFFSET", "LAG", "LAG-TIME", "STATE",
	    reasons ? "REASON" : (const char *)NULL, (const char *)NULL);
	for (size_t i = 0; i < n; i++) {
		const struct kp_describe_mirrors_response_partition *p = rows[i].p;

		table_kstr(&t, rows[i].mirror);
		table_kstr(&t, rows[i].topic);
		table_cell(&t, "%d", p->partition_index);
		table_num(&t, p->source_offset);
		table_num(&t, p->destination_offset);
		table_lag(&t, p);
		table_duration(&t, p->lag_ms);
		table_cell(&t, "%s", shown_state(p));
		if (reasons)
			table_kstr(&t, partition_reason(&rows[i]));
	}
	table_print(&t);
}

/* The order states are counted in a summary: trouble first. */
static const char *const summary_states[] = {
	"FAILED", "STALLED", "UNKNOWN", "PREPARING", "MIRRORING", "PAUSING",
	"PAUSED", "STOPPING", "STOPPED",
};

/* One line per topic: partitions per state, total lag, the worst lag in
 * time and the worst reason (rows are sorted by mirror, topic). */
static void describe_summary(const struct drow *rows, size_t n)
{
	struct table t;
	bool any = false;

	for (size_t i = 0; i < n; i++)
		any = any || partition_reason(&rows[i]).len > 0;
	table_init(&t, 1u << 3 | 1u << 5 | 1u << 6, "MIRROR", "TOPIC",
	    "STATE", "PARTITIONS", "STATES", "LAG", "LAG-TIME",
	    any ? "REASON" : (const char *)NULL, (const char *)NULL);
	for (size_t i = 0, j; i < n; i = j) {
		size_t cnt[ARRAY_SIZE(summary_states) + 1] = { 0 };
		const struct drow *worst = NULL;
		int64_t lag = -1, lag_ms = -1;
		size_t reasons = 0;
		char states[256];
		size_t len = 0;

		for (j = i; j < n && kstr_cmp(rows[j].mirror, rows[i].mirror) == 0 &&
		    kstr_cmp(rows[j].topic, rows[i].topic) == 0; j++) {
			const struct kp_describe_mirrors_response_partition *p =
			    rows[j].p;
			size_t k = 0;

			while (k < ARRAY_SIZE(summary_states) &&
			    strcmp(shown_state(p), summary_states[k]) != 0)
				k++;
			cnt[k]++;
			if (p->lag >= 0)
				lag = MAX(lag, 0) + p->lag;
			lag_ms = MAX(lag_ms, p->lag_ms);
			if (reason_rank(&rows[j]) > 0) {
				reasons++;
				if (worst == NULL || reason_rank(&rows[j]) >
				    reason_rank(worst))
					worst = &rows[j];
			}
		}
		states[0] = '\0';
		for (size_t k = 0; k <= ARRAY_SIZE(summary_states); k++) {
			if (cnt[k] == 0)
				continue;
			len += (size_t)snprintf(states + len, sizeof(states) - len,
			    "%s%s=%zu", len ? "," : "",
			    k < ARRAY_SIZE(summary_states) ? summary_states[k] :
			    "OTHER", cnt[k]);
			len = MIN(len, sizeof(states) - 1);
		}
		table_kstr(&t, rows[i].mirror);
		table_kstr(&t, rows[i].topic);
		table_cell(&t, "%s", rows[i].tstate);
		table_cell(&t, "%zu", j - i);
		table_cell(&t, "%s", states);
		table_num(&t, lag);
		table_duration(&t, lag_ms);
		if (!any) {
			/* no REASON column */
		} else if (worst == NULL) {
			table_cell(&t, "-");
		} else {
			struct kstr r = partition_reason(worst);

			table_cell(&t, "partition %d: %.*s%s", worst->p->partition_index,
			    (int)r.len, r.p, reasons > 1 ? " (and more: see "
			    "--describe without --summary)" : "");
		}
	}
	table_print(&t);
}

/*
 * --describe --topic: the topics whose rows are shown, each entry a name
 * (compared exactly) or a pattern matched against whole names, as the
 * other actions take them.  No entries: every topic.
 */
struct topic_filter {
	const struct strlist *in;
	struct tpattern **pat;   /* per entry; NULL for a plain name */
};

static void topic_filter_init(struct topic_filter *f, const struct strlist *in)
{
	f->in = in;
	f->pat = calloc((size_t)in->n + 1, sizeof(*f->pat));
	if (f->pat == NULL)
		die_conn("out of memory");
	for (int i = 0; i < in->n; i++) {
		char why[512];

		if (is_plain_name(in->v[i]))
			continue;
		check_pattern("--topic", in->v[i]);
		if ((f->pat[i] = tpattern_new(in->v[i], why, sizeof(why))) == NULL)
			die_usage("--topic: pattern '%.200s' %s", in->v[i], why);
	}
}

static int topic_filter_match(const struct topic_filter *f, struct kstr name)
{
	char *s;
	int hit = 0;

	if (f->in->n == 0)
		return 1;
	if ((s = kstr_dup(name)) == NULL)
		die_conn("out of memory");
	for (int i = 0; i < f->in->n && !hit; i++)
		hit = f->pat[i] != NULL ? tpattern_match(f->pat[i], s) :
		    strcmp(f->in->v[i], s) == 0;
	free(s);
	return hit;
}

static void topic_filter_fini(struct topic_filter *f)
{
	for (int i = 0; i < f->in->n; i++)
		tpattern_free(f->pat[i]);
	free(f->pat);
}

static int do_describe(struct cli_conn *c, const struct opts *o)
{
	struct kp_describe_mirrors_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	struct drow *rows = NULL;
	struct topic_filter tf;
	size_t n = 0, cap = 0;
	uint8_t *frame = NULL;
	int rc;

	if (a == NULL)
		die_conn("out of memory");
	topic_filter_init(&tf, &o->topics);
	rc = describe_call(c, o->mirror, a, &resp, &frame);
	for (int32_t m = 0; m < resp.mirrors_n; m++) {
		const struct kp_describe_mirrors_response_mirror *mi = &resp.mirrors[m];

		for (int32_t t = 0; t < mi->topics_n; t++) {
			const char *ts;

			if (!topic_filter_match(&tf, mi->topics[t].name))
				continue;
			ts = topic_state(&mi->topics[t]);

			for (int32_t p = 0; p < mi->topics[t].partitions_n; p++) {
				if (o->failed && !kstr_eq(mi->topics[t].partitions[p].state,
				    "FAILED"))
					continue;
				if (n == cap) {
					cap = cap ? cap * 2 : 64;
					rows = realloc(rows, cap * sizeof(*rows));
					if (rows == NULL)
						die_conn("out of memory");
				}
				rows[n].mirror = mi->mirror_name;
				rows[n].topic = mi->topics[t].name;
				rows[n].tstate = ts;
				rows[n].p = &mi->topics[t].partitions[p];
				rows[n].note = failover_note(rows[n].p);
				rows[n].why = NULL;
				if (kstr_eq(rows[n].p->state, "STOPPED") &&
				    rows[n].p->error_message.len > 0 &&
				    rows[n].p->warning_message.len > 0 &&
				    asprintf(&rows[n].why, "%.*s; %.*s",
				    (int)rows[n].p->error_message.len,
				    rows[n].p->error_message.p,
				    (int)rows[n].p->warning_message.len,
				    rows[n].p->warning_message.p) < 0)
					rows[n].why = NULL;
				n++;
			}
		}
	}
	if (n > 1)
		qsort(rows, n, sizeof(*rows), cmp_drow);
	if (o->json) {
		printf("[");
		for (size_t i = 0; i < n; i++) {
			const struct kp_describe_mirrors_response_partition *p = rows[i].p;

			printf("%s{\"mirror\":", i ? "," : "");
			json_str(stdout, rows[i].mirror);
			printf(",\"topic\":");
			json_str(stdout, rows[i].topic);
			printf(",\"partition\":%d,\"sourceOffset\":%lld,"
			    "\"sourceOffsetAgeMs\":%lld,\"destinationOffset\":%lld,"
			    "\"lag\":%lld,\"lagMs\":%lld,\"caughtUpTimeMs\":%lld,"
			    "\"state\":\"%s\",\"mirrorState\":",
			    p->partition_index, (long long)p->source_offset,
			    (long long)p->source_offset_age_ms,
			    (long long)p->destination_offset, (long long)p->lag,
			    (long long)p->lag_ms, (long long)p->caught_up_time_ms,
			    shown_state(p));
			json_str(stdout, p->state);
			printf(",\"stalled\":%s,\"stalledReason\":",
			    p->stalled_reason.len > 0 ? "true" : "false");
			json_str(stdout, p->stalled_reason);
			printf(",\"stalledSinceMs\":%lld",
			    (long long)p->stalled_since_ms);
			printf(",\"lastMirroredEpoch\":%d,\"lastMirroredOffset\":%lld,"
			    "\"errorMessage\":", p->last_mirrored_epoch,
			    (long long)p->last_mirrored_offset);
			json_str(stdout, p->error_message);
			printf(",\"warningMessage\":");
			json_str(stdout, p->warning_message);
			printf(",\"topicState\":\"%s\",\"failoverSourceOffset\":%lld,"
			    "\"failoverLag\":%lld,\"failoverLagMs\":%lld,"
			    "\"failoverSourceOffsetAgeMs\":%lld,"
			    "\"failoverLagIsLowerBound\":%s}",
			    rows[i].tstate, (long long)p->failover_source_offset,
			    (long long)p->failover_lag, (long long)p->failover_lag_ms,
			    (long long)p->failover_source_offset_age_ms,
			    p->failover_lag_is_lower_bound ? "true" : "false");
		}
		printf("]\n");
	} else if (n == 0) {
		if (rc == 0)
			printf(o->failed ? "No FAILED partitions\n" :
			    "No mirror partitions found\n");
	} else if (o->summary) {
		describe_summary(rows, n);
	} else {
		describe_partitions(rows, n);
	}
	for (size_t i = 0; i < n; i++) {
		free(rows[i].note);
		free(rows[i].why);
	}
	free(rows);
	free(frame);
	karena_free(a);
	topic_filter_fini(&tf);
	return rc;
}

/* ---- a mirror's settings: --describe --config, --alter ------------- */

#define CONFIG_RESOURCE_MIRROR 64   /* KIP-1279's ConfigResource CLUSTER_MIRROR */
#define IAC_SET 0
#define IAC_DELETE 1

static int cmp_config(const void *x, const void *y)
{
	const struct kp_describe_configs_response_describe_configs_resource_result
	    *a = x, *b = y;

	return kstr_cmp(a->name, b->name);
}

static void json_strlist(const struct kstr *v, int32_t n)
{
	printf("[");
	for (int32_t i = 0; i < n; i++) {
		if (i > 0)
			printf(",");
		json_str(stdout, v[i]);
	}
	printf("]");
}

static void text_patterns(const char *what, const struct kstr *v, int32_t n)
{
	printf("%s:", what);
	if (n <= 0)
		printf(" (none)");
	for (int32_t i = 0; i < n; i++)
		printf("%s '%.*s'", i > 0 ? "," : "", (int)v[i].len, v[i].p);
	printf("\n");
}

/* DescribeMirrors for the patterns, DescribeConfigs (v4, resource type 64)
 * for the configs; secret values come back null and are shown masked. */
static int do_describe_config(struct cli_conn *c, const struct opts *o)
{
	struct kp_describe_mirrors_response dm;
	struct kp_describe_configs_request req;
	struct kp_describe_configs_request_describe_configs_resource res;
	struct kp_describe_configs_response resp;
	const struct kp_describe_configs_response_describe_configs_result *cr;
	const struct kp_describe_mirrors_response_mirror *mi;
	struct karena *a = karena_new(MAX_RESPONSE);
	uint8_t *dframe = NULL, *frame;
	struct kw w;
	struct kr r;
	int rc;

	if (a == NULL)
		die_conn("out of memory");
	rc = describe_call(c, o->mirror, a, &dm, &dframe);
	if (rc != 0 || dm.mirrors_n != 1) {
		free(dframe);
		karena_free(a);
		return rc != 0 ? rc : EXIT_KAFKA;
	}
	mi = &dm.mirrors[0];
	kp_describe_configs_request_init(&req);
	kp_describe_configs_request_describe_configs_resource_init(&res);
	res.resource_type = CONFIG_RESOURCE_MIRROR;
	res.resource_name = kstr_c(o->mirror);
	res.configuration_keys = NULL;
	res.configuration_keys_n = -1;
	req.resources = &res;
	req.resources_n = 1;
	kw_init(&w, 1u << 20);
	if (kp_describe_configs_request_encode(&w, 4, &req) < 0 || w.err)
		die_conn("cannot encode the DescribeConfigs request");
	frame = conn_call(c, KP_API_DESCRIBE_CONFIGS, 4, &w, &r);
	kw_fini(&w);
	kp_describe_configs_response_init(&resp);
	if (kp_describe_configs_response_decode(&r, a, 4, &resp) < 0 || r.err)
		die_conn("%s: malformed DescribeConfigs response: %s", c->addr,
		    r.why != NULL ? r.why : "decode error");
	if (resp.results_n != 1)
		die_conn("%s: DescribeConfigs answered %d resources for one",
		    c->addr, resp.results_n);
	cr = &resp.results[0];
	if (cr->error_code != 0) {
		char what[300];

		snprintf(what, sizeof(what), "mirror %s", o->mirror);
		print_kafka_error(what, cr->error_code, cr->error_message);
		rc = EXIT_KAFKA;
		goto out;
	}
	if (cr->configs_n > 1)
		qsort(cr->configs, (size_t)cr->configs_n, sizeof(*cr->configs),
		    cmp_config);
	if (o->json) {
		printf("{\"mirror\":");
		json_str(stdout, kstr_c(o->mirror));
		printf(",\"includePatterns\":");
		json_strlist(mi->include_patterns, MAX(mi->include_patterns_n, 0));
		printf(",\"excludePatterns\":");
		json_strlist(mi->exclude_patterns, MAX(mi->exclude_patterns_n, 0));
		printf(",\"configs\":[");
		for (int32_t i = 0; i < cr->configs_n; i++) {
			const struct kp_describe_configs_response_describe_configs_resource_result
			    *k = &cr->configs[i];

			printf("%s{\"name\":", i > 0 ? "," : "");
			json_str(stdout, k->name);
			printf(",\"value\":");
			json_str(stdout, k->is_sensitive ? KSTR_NULL : k->value);
			printf(",\"sensitive\":%s}", k->is_sensitive ? "true" :
			    "false");
		}
		printf("]}\n");
		goto out;
	}
	printf("Mirror %s\n", o->mirror);
	text_patterns("Include patterns", mi->include_patterns,
	    mi->include_patterns_n);
	text_patterns("Exclude patterns", mi->exclude_patterns,
	    mi->exclude_patterns_n);
	printf("Configs:\n");
	for (int32_t i = 0; i < cr->configs_n; i++) {
		const struct kp_describe_configs_response_describe_configs_resource_result
		    *k = &cr->configs[i];

		if (k->is_sensitive)
			printf("  %.*s=(sensitive)\n", (int)k->name.len, k->name.p);
		else
			printf("  %.*s=%.*s\n", (int)k->name.len, k->name.p,
			    k->value.len > 0 ? (int)k->value.len : 0,
			    k->value.len > 0 ? k->value.p : "");
	}
out:
	free(frame);
	free(dframe);
	karena_free(a);
	return rc;
}

/* One --add-config entry: "k=v" ("k=[v,w]" keeps its commas). */
static void split_config(const char *e, char **k, char **v)
{
	const char *eq = strchr(e, '=');
	size_t vl;

	if (eq == NULL || eq == e)
		die_usage("--add-config: '%s' is not KEY=VALUE", e);
	*k = strndup(e, (size_t)(eq - e));
	eq++;
	vl = strlen(eq);
	if (vl >= 2 && eq[0] == '[' && eq[vl - 1] == ']') {
		eq++;
		vl -= 2;
	}
	*v = strndup(eq, vl);
	if (*k == NULL || *v == NULL)
		die_conn("out of memory");
}

/* IncrementalAlterConfigs (v1) of the mirror: the keys of --mirror-config
 * FILE and --add-config set, those of --delete-config deleted, the others
 * kept, all in one change that mirrord validates as CreateMirror's. */
static int do_alter(struct cli_conn *c, const struct opts *o)
{
	struct kp_incremental_alter_configs_request req;
	struct kp_incremental_alter_configs_request_alter_configs_resource res;
	struct kp_incremental_alter_configs_request_alterable_config *ops;
	struct kp_incremental_alter_configs_response resp;
	struct karena *a = karena_new(MAX_RESPONSE);
	struct props pr;
	size_t n = 0, cap;
	char err[512], **owned;
	uint8_t *frame;
	struct kw w;
	struct kr r;
	int rc = 0;

	props_init(&pr);
	if (o->mirror_config != NULL &&
	    props_parse_file(&pr, o->mirror_config, err, sizeof(err)) < 0)
		die_usage("--mirror-config: %s", err);
	cap = pr.n + (size_t)o->add_configs.n + (size_t)o->delete_configs.n;
	ops = calloc(cap + 1, sizeof(*ops));
	owned = calloc(2 * cap + 1, sizeof(*owned));
	if (ops == NULL || owned == NULL || a == NULL)
		die_conn("out of memory");
	for (size_t i = 0; i < pr.n; i++) {
		kp_incremental_alter_configs_request_alterable_config_init(&ops[n]);
		ops[n].name = kstr_c(pr.names[i]);
		ops[n].config_operation = IAC_SET;
		ops[n++].value = kstr_c(pr.values[i]);
	}
	for (int i = 0; i < o->add_configs.n; i++) {
		char *k, *v;

		split_config(o->add_configs.v[i], &k, &v);
		owned[2 * i] = k;
		owned[2 * i + 1] = v;
		kp_incremental_alter_configs_request_alterable_config_init(&ops[n]);
		ops[n].name = kstr_c(k);
		ops[n].config_operation = IAC_SET;
		ops[n++].value = kstr_c(v);
	}
	for (int i = 0; i < o->delete_configs.n; i++) {
		kp_incremental_alter_configs_request_alterable_config_init(&ops[n]);
		ops[n].name = kstr_c(o->delete_configs.v[i]);
		ops[n].config_operation = IAC_DELETE;
		ops[n++].value = KSTR_NULL;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (kstr_cmp(ops[i].name, ops[j].name) == 0)
				die_usage("config %.*s is given twice (--mirror-config, "
				    "--add-config, --delete-config)",
				    (int)ops[i].name.len, ops[i].name.p);
	kp_incremental_alter_configs_request_init(&req);
	kp_incremental_alter_configs_request_alter_configs_resource_init(&res);
	res.resource_type = CONFIG_RESOURCE_MIRROR;
	res.resource_name = kstr_c(o->mirror);
	res.configs = ops;
	res.configs_n = (int32_t)n;
	req.resources = &res;
	req.resources_n = 1;
	kw_init(&w, MAX_RESPONSE);
	if (kp_incremental_alter_configs_request_encode(&w, 1, &req) < 0 || w.err)
		die_conn("cannot encode the IncrementalAlterConfigs request: %s",
		    w.why != NULL ? w.why : "encode error");
	frame = conn_call(c, KP_API_INCREMENTAL_ALTER_CONFIGS, 1, &w, &r);
	kw_fini(&w);
	kp_incremental_alter_configs_response_init(&resp);
	if (kp_incremental_alter_configs_response_decode(&r, a, 1, &resp) < 0 ||
	    r.err)
		die_conn("%s: malformed IncrementalAlterConfigs response: %s",
		    c->addr, r.why != NULL ? r.why : "decode error");
	if (resp.responses_n != 1)
		die_conn("%s: IncrementalAlterConfigs answered %d resources for one",
		    c->addr, resp.responses_n);
	if (resp.responses[0].error_code != 0) {
		print_kafka_error(NULL, resp.responses[0].error_code,
		    resp.responses[0].error_message);
		rc = EXIT_KAFKA;
	} else {
		printf("Altered the configs of mirror %s: %zu set, %d deleted\n",
		    o->mirror, n - (size_t)o->delete_configs.n,
		    o->delete_configs.n);
	}
	free(frame);
	for (size_t i = 0; i < 2 * cap; i++)
		free(owned[i]);
	free(owned);
	free(ops);
	props_fini(&pr);
	karena_free(a);
	return rc;
}

/* ---- main ---------------------------------------------------------- */

enum {
	OPT_BOOTSTRAP = 256, OPT_COMMAND_CONFIG, OPT_MIRROR_CONFIG, OPT_MIRROR,
	OPT_TOPIC, OPT_EXCLUDE, OPT_JSON, OPT_HELP, OPT_VERSION, OPT_RESOLUTION,
	OPT_SUMMARY, OPT_FAILED, OPT_WAIT, OPT_CONFIG, OPT_ADD_CONFIG,
	OPT_DELETE_CONFIG, OPT_YES,
};

/* The long option the user typed as word ("--mir", "--mirror=x"): its
 * full name, or NULL when none or several match. */
static const char *long_name(const struct option *opts, const char *word)
{
	const char *name = word + strspn(word, "-"), *found = NULL;
	size_t len = strcspn(name, "=");

	for (const struct option *op = opts; op->name != NULL; op++) {
		if (strncmp(op->name, name, len) != 0)
			continue;
		if (op->name[len] == '\0')
			return op->name;
		if (found != NULL && strcmp(found, op->name) != 0)
			return NULL;
		found = op->name;
	}
	return found;
}

/*
 * An option that takes a value got none: it came last, its value is
 * empty, or the next word is another option ("--mirror --list", which
 * getopt takes as the mirror's name).  A value that merely starts with
 * dashes is still accepted when it is not an option's name, or when given
 * as --opt=VALUE.
 */
static void check_value(const struct option *opts, char **argv, int optind_)
{
	const char *opt = argv[optind_ - 1 - (optarg == argv[optind_ - 1])];
	const char *name = long_name(opts, opt);

	if (name == NULL)
		return;
	if (*optarg == '\0' || (optarg == argv[optind_ - 1] &&
	    strncmp(optarg, "--", 2) == 0 && optarg[2] != '\0' &&
	    long_name(opts, optarg) != NULL))
		die_usage("option '--%s' needs a value", name);
}

static void set_action(struct opts *o, enum action a)
{
	if (o->action != ACT_NONE && o->action != a)
		die_usage("--%s and --%s cannot be used together: give exactly "
		    "one action", action_names[o->action], action_names[a]);
	o->action = a;
}

static void load_command_config(struct opts *o)
{
	struct props pr;
	char err[512];
	int rc;

	props_init(&pr);
	if (props_parse_file(&pr, o->command_config, err, sizeof(err)) < 0)
		die_usage("--command-config: %s", err);
	for (size_t i = 0; i < pr.n; i++) {
		const char *k = pr.names[i], *v = pr.values[i];

		if (strcmp(k, "request.timeout.ms") == 0 ||
		    strcmp(k, "default.api.timeout.ms") == 0) {
			char *end;
			long ms = strtol(v, &end, 10);

			if (*end != '\0' || ms <= 0 || ms > 3600000)
				die_usage("--command-config %s: %s must be 1..3600000 "
				    "milliseconds, not '%s'", o->command_config, k, v);
			o->timeout_ms = (int)ms;
		} else if (strcmp(k, "client.id") == 0) {
			snprintf(o->client_id, sizeof(o->client_id), "%s", v);
		} else if ((rc = clisec_prop(&o->sec, k, v, err,
		    sizeof(err))) != 0) {
			if (rc < 0)
				die_usage("--command-config %s: %s",
				    o->command_config, err);
		} else if (strcmp(k, "bootstrap.servers") == 0) {
			if (o->bootstrap == NULL)
				o->bootstrap = strdup(v);
		} else {
			/* Admin-client settings we do not need are harmless. */
			fprintf(stderr, "%s: --command-config %s: ignoring %s\n",
			    progname, o->command_config, k);
		}
	}
	props_fini(&pr);
	if (clisec_check(&o->sec, err, sizeof(err)) < 0)
		die_usage("--command-config %s: %s", o->command_config, err);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "bootstrap-server", required_argument, NULL, OPT_BOOTSTRAP },
		{ "command-config", required_argument, NULL, OPT_COMMAND_CONFIG },
		{ "mirror-config", required_argument, NULL, OPT_MIRROR_CONFIG },
		{ "mirror", required_argument, NULL, OPT_MIRROR },
		{ "topic", required_argument, NULL, OPT_TOPIC },
		{ "topics", required_argument, NULL, OPT_TOPIC },
		{ "exclude", required_argument, NULL, OPT_EXCLUDE },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "summary", no_argument, NULL, OPT_SUMMARY },
		{ "failed", no_argument, NULL, OPT_FAILED },
		{ "wait", required_argument, NULL, OPT_WAIT },
		{ "create", no_argument, NULL, 'C' },
		{ "add", no_argument, NULL, 'A' },
		{ "start", no_argument, NULL, 'A' },
		{ "remove", no_argument, NULL, 'R' },
		{ "stop", no_argument, NULL, 'R' },
		{ "pause", no_argument, NULL, 'P' },
		{ "resume", no_argument, NULL, 'U' },
		{ "recover", no_argument, NULL, 'V' },
		{ "resolution", required_argument, NULL, OPT_RESOLUTION },
		{ "yes", no_argument, NULL, OPT_YES },
		{ "delete", no_argument, NULL, 'D' },
		{ "list", no_argument, NULL, 'L' },
		{ "describe", no_argument, NULL, 'S' },
		{ "alter", no_argument, NULL, 'T' },
		{ "config", no_argument, NULL, OPT_CONFIG },
		{ "add-config", required_argument, NULL, OPT_ADD_CONFIG },
		{ "delete-config", required_argument, NULL, OPT_DELETE_CONFIG },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o;
	struct cli_conn c;
	int ch, rc = 0;

	memset(&o, 0, sizeof(o));
	clisec_init(&o.sec);
	o.action = ACT_NONE;
	o.timeout_ms = 30000;
	snprintf(o.client_id, sizeof(o.client_id), "kafka-mirrors");
	if (argc <= 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (ch != '?' && ch != ':' && optarg != NULL)
			check_value(longopts, argv, optind);
		switch (ch) {
		case OPT_BOOTSTRAP: o.bootstrap = optarg; break;
		case OPT_COMMAND_CONFIG: o.command_config = optarg; break;
		case OPT_MIRROR_CONFIG: o.mirror_config = optarg; break;
		case OPT_MIRROR: o.mirror = optarg; break;
		case OPT_TOPIC: strlist_add_csv(&o.topics, optarg); break;
		case OPT_EXCLUDE: strlist_add_csv(&o.excludes, optarg); break;
		case OPT_JSON: o.json = 1; break;
		case OPT_SUMMARY: o.summary = 1; break;
		case OPT_FAILED: o.failed = 1; break;
		case OPT_WAIT: {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end != '\0' || end == optarg || v < 1 || v > 86400)
				die_usage("--wait: '%s' is not a number of seconds "
				    "1..86400", optarg);
			o.wait_s = (int)v;
			break;
		}
		case 'C': set_action(&o, ACT_CREATE); break;
		case 'A': set_action(&o, ACT_ADD); break;
		case 'R': set_action(&o, ACT_REMOVE); break;
		case 'P': set_action(&o, ACT_PAUSE); break;
		case 'U': set_action(&o, ACT_RESUME); break;
		case 'V': set_action(&o, ACT_RECOVER); break;
		case OPT_RESOLUTION: o.resolution = optarg; break;
		case OPT_YES: o.yes = 1; break;
		case 'D': set_action(&o, ACT_DELETE); break;
		case 'L': set_action(&o, ACT_LIST); break;
		case 'S': set_action(&o, ACT_DESCRIBE); break;
		case 'T': set_action(&o, ACT_ALTER); break;
		case OPT_CONFIG: o.config = 1; break;
		case OPT_ADD_CONFIG: strlist_add_configs(&o.add_configs, optarg); break;
		case OPT_DELETE_CONFIG:
			strlist_add_configs(&o.delete_configs, optarg);
			break;
		case OPT_HELP: usage(stdout); return 0;
		case OPT_VERSION: printf("kafka-mirrors %s\n", PACKAGE_VERSION); return 0;
		case ':': {
			const char *name = long_name(longopts, argv[optind - 1]);

			die_usage("option '--%s' needs a value", name != NULL ? name :
			    argv[optind - 1] + strspn(argv[optind - 1], "-"));
			break;
		}
		default: {
			const char *w = argv[optind - 1];
			const char *name = strncmp(w, "--", 2) == 0 ?
			    long_name(longopts, w) : NULL;

			if (name != NULL && strchr(w, '=') != NULL)
				die_usage("option '--%s' takes no value", name);
			die_usage("unknown option '%s'", w);
		}
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (o.command_config != NULL)
		load_command_config(&o);
	if (o.action == ACT_NONE)
		die_usage("give one action: --create, --add, --remove, --pause, "
		    "--resume, --recover, --delete, --list, --describe or "
		    "--alter");
	if (o.bootstrap == NULL)
		o.bootstrap = CONFIG_SERVER_LISTEN_DEFAULT;
	if (o.mirror == NULL && o.action != ACT_LIST && o.action != ACT_DESCRIBE)
		die_usage("--%s needs --mirror NAME", action_names[o.action]);
	if (o.action == ACT_CREATE && o.mirror_config == NULL)
		die_usage("--create needs --mirror-config FILE (a properties file "
		    "with at least bootstrap.servers of the source cluster)");
	if (o.action != ACT_CREATE && o.action != ACT_ALTER &&
	    o.mirror_config != NULL)
		die_usage("--mirror-config is only for --create and --alter");
	if (o.action == ACT_ALTER && o.mirror_config == NULL &&
	    o.add_configs.n == 0 && o.delete_configs.n == 0)
		die_usage("--alter needs --add-config KEY=VALUE, --delete-config "
		    "KEY or --mirror-config FILE");
	if (o.action != ACT_ALTER && (o.add_configs.n > 0 ||
	    o.delete_configs.n > 0))
		die_usage("--%s is only for --alter", o.add_configs.n > 0 ?
		    "add-config" : "delete-config");
	if (o.config && o.action != ACT_DESCRIBE)
		die_usage("--config is only for --describe");
	if (o.config && o.mirror == NULL)
		die_usage("--describe --config needs --mirror NAME");
	if (o.config && (o.summary || o.failed))
		die_usage("--describe --config shows the mirror's settings; "
		    "--summary and --failed are for its partitions");
	if ((o.action == ACT_ADD || o.action == ACT_REMOVE ||
	    o.action == ACT_PAUSE || o.action == ACT_RESUME ||
	    o.action == ACT_RECOVER) && o.topics.n == 0)
		die_usage("--%s needs --topic NAME_OR_REGEX", action_names[o.action]);
	if (o.action != ACT_ADD && o.action != ACT_REMOVE &&
	    o.action != ACT_PAUSE && o.action != ACT_RESUME &&
	    o.action != ACT_RECOVER && o.action != ACT_DESCRIBE && o.topics.n > 0)
		die_usage("--topic is not used with --%s", action_names[o.action]);
	if (o.excludes.n > 0 && o.action != ACT_ADD)
		die_usage("--exclude is only for --add");
	if (o.resolution != NULL && o.action != ACT_RECOVER)
		die_usage("--resolution is only for --recover");
	if (o.yes && (o.resolution == NULL || strcmp(o.resolution,
	    "realign") != 0))
		die_usage("--yes is only for --recover --resolution realign");
	if (o.json && o.action != ACT_DESCRIBE)
		die_usage("--json is only for --describe");
	if (o.summary && o.action != ACT_DESCRIBE)
		die_usage("--summary is only for --describe");
	if (o.failed && o.action != ACT_DESCRIBE)
		die_usage("--failed is only for --describe");
	if (o.wait_s > 0 && o.action != ACT_REMOVE)
		die_usage("--wait is only for --remove (--stop)");
	if (o.summary && o.json)
		die_usage("--summary is for the text output; --json always lists "
		    "every partition");

	/* Patterns mirrord would refuse are usage errors, found before
	 * anything is sent. */
	for (int i = 0; i < o.topics.n; i++)
		if (!is_plain_name(o.topics.v[i]))
			check_pattern("--topic", o.topics.v[i]);
	for (int i = 0; i < o.excludes.n; i++)
		check_pattern("--exclude", o.excludes.v[i]);

	conn_open(&c, o.bootstrap, o.timeout_ms, o.client_id, &o.sec);
	check_peer(&c, o.action);
	if (o.sec.sasl)
		sasl_login(&c, &o.sec);
	switch (o.action) {
	case ACT_CREATE: rc = do_create(&c, &o); break;
	case ACT_ADD: rc = do_add(&c, &o); break;
	case ACT_REMOVE:
	case ACT_PAUSE:
	case ACT_RESUME:
	case ACT_RECOVER: rc = do_topics_op(&c, &o); break;
	case ACT_DELETE: rc = do_delete(&c, &o); break;
	case ACT_LIST: rc = do_list(&c, &o); break;
	case ACT_DESCRIBE:
		rc = o.config ? do_describe_config(&c, &o) : do_describe(&c, &o);
		break;
	case ACT_ALTER: rc = do_alter(&c, &o); break;
	default: rc = EXIT_USAGE; break;
	}
	clisec_tls_close(c.ssl);
	close(c.fd);
	clisec_fini(&o.sec);
	for (int i = 0; i < o.topics.n; i++)
		free(o.topics.v[i]);
	free(o.topics.v);
	for (int i = 0; i < o.excludes.n; i++)
		free(o.excludes.v[i]);
	free(o.excludes.v);
	for (int i = 0; i < o.add_configs.n; i++)
		free(o.add_configs.v[i]);
	free(o.add_configs.v);
	for (int i = 0; i < o.delete_configs.n; i++)
		free(o.delete_configs.v[i]);
	free(o.delete_configs.v);
	return rc;
}
