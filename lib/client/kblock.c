/*
 * kblock.c: blocking Kafka connection (see kblock.h).  Non-blocking socket
 * driven by poll() against a deadline, so no step can hang past it.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "compat.h"
#include "kblock.h"
#include "kbuf.h"
#include "kconn.h"
#include "kerr.h"
#include "kproto.h"
#include "ksasl.h"

#define KBLOCK_MAX_RESPONSE (128u << 20)

struct kblock {
	int fd;
	SSL *ssl;
	int32_t next_corr;
	const char *client_id;
	char addr[300];
};

const char *kblock_addr(const struct kblock *c)
{
	return c->addr;
}

static int left_ms(int64_t deadline)
{
	int64_t l = deadline - clock_mono_ms();

	return l < 0 ? 0 : (int)MIN(l, INT32_MAX);
}

/* Waits for events on fd; 0 ready, -1 timeout or error (err says). */
static int wait_fd(struct kblock *c, short events, int64_t deadline,
    const char *what, char *err, size_t errlen)
{
	for (;;) {
		struct pollfd pfd = { .fd = c->fd, .events = events };
		int rc = poll(&pfd, 1, left_ms(deadline));

		if (rc > 0)
			return 0;
		if (rc == 0) {
			seterr(err, errlen, "%s: %s timed out", c->addr, what);
			return -1;
		}
		if (errno != EINTR) {
			seterr(err, errlen, "%s: poll: %s", c->addr,
			    strerror(errno));
			return -1;
		}
	}
}

/* Moves all len bytes in one direction, TLS or not, before deadline. */
static int io_all(struct kblock *c, uint8_t *p, size_t len, int writing,
    int64_t deadline, char *err, size_t errlen)
{
	const char *what = writing ? "sending the request" :
	    "waiting for the answer";

	while (len > 0) {
		ssize_t n;
		short ev = writing ? POLLOUT : POLLIN;

		if (c->ssl != NULL) {
			int r, e;

			ERR_clear_error();
			r = writing ? SSL_write(c->ssl, p, (int)MIN(len, INT32_MAX)) :
			    SSL_read(c->ssl, p, (int)MIN(len, INT32_MAX));
			if (r > 0) {
				p += r;
				len -= (size_t)r;
				continue;
			}
			e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
				if (wait_fd(c, ev, deadline, what, err, errlen) != 0)
					return -1;
				continue;
			}
			if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL &&
			    ERR_peek_error() == 0)) {
				seterr(err, errlen, "%s: connection closed by the "
				    "broker", c->addr);
			} else {
				char buf[256];

				ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
				seterr(err, errlen, "%s: TLS: %s", c->addr, buf);
			}
			return -1;
		}
		n = writing ? send(c->fd, p, len, MSG_NOSIGNAL) :
		    recv(c->fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			seterr(err, errlen, "%s: connection closed by the broker",
			    c->addr);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			seterr(err, errlen, "%s: %s", c->addr, strerror(errno));
			return -1;
		}
		if (wait_fd(c, ev, deadline, what, err, errlen) != 0)
			return -1;
	}
	return 0;
}

static uint8_t *call_raw(struct kblock *c, int16_t key, int16_t ver,
    const struct kw *body, struct kr *r, int64_t deadline, char *err,
    size_t errlen)
{
	struct kw w;
	uint8_t szb[4], *resp = NULL;
	size_t slot;
	int32_t size, corr = c->next_corr++;

	kw_init(&w, body->len + 1024);
	slot = kw_slot32(&w);
	kw_i16(&w, key);
	kw_i16(&w, ver);
	kw_i32(&w, corr);
	kw_str(&w, kstr_c(c->client_id));
	if (kp_request_header_version(key, ver) >= 2)
		kw_tags_empty(&w);
	kw_raw(&w, body->buf, body->len);
	kw_put32(&w, slot, (int32_t)(w.len - 4));
	if (w.err) {
		seterr(err, errlen, "cannot encode the %s request: %s",
		    kp_api_name(key), w.why);
		goto fail;
	}
	if (io_all(c, w.buf, w.len, 1, deadline, err, errlen) != 0 ||
	    io_all(c, szb, 4, 0, deadline, err, errlen) != 0)
		goto fail;
	size = (int32_t)be32_load(szb);
	if (size < 4 || (uint32_t)size > KBLOCK_MAX_RESPONSE) {
		seterr(err, errlen, "%s: %s response of %d bytes is out of "
		    "bounds", c->addr, kp_api_name(key), size);
		goto fail;
	}
	resp = malloc((size_t)size);
	if (resp == NULL) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	if (io_all(c, resp, (size_t)size, 0, deadline, err, errlen) != 0)
		goto fail;
	kr_init(r, resp, (size_t)size);
	if (kr_i32(r) != corr) {
		seterr(err, errlen, "%s: %s response correlation id does not "
		    "match the request", c->addr, kp_api_name(key));
		goto fail;
	}
	if (kp_response_header_version(key, ver) >= 1)
		kr_skip_tagged(r);
	if (r->err) {
		seterr(err, errlen, "%s: truncated %s response header", c->addr,
		    kp_api_name(key));
		goto fail;
	}
	kw_fini(&w);
	return resp;
fail:
	OPENSSL_cleanse(w.buf, w.len);  /* may hold SASL secrets */
	kw_fini(&w);
	free(resp);
	return NULL;
}

static uint8_t *call_deadline(struct kblock *c, int16_t api_key,
    int16_t version, const void *req, void *resp, struct karena *a,
    int64_t deadline, char *err, size_t errlen)
{
	const struct kp_api *api = kp_api_find(api_key);
	struct kw w;
	struct kr r;
	uint8_t *frame;

	if (api == NULL) {
		seterr(err, errlen, "ApiKey %d is not in the codec", api_key);
		return NULL;
	}
	kw_init(&w, KBLOCK_MAX_RESPONSE);
	if (api->request_encode(&w, version, req) < 0 || w.err) {
		seterr(err, errlen, "cannot encode the %s v%d request: %s",
		    api->name, version, w.why != NULL ? w.why : "encode error");
		kw_fini(&w);
		return NULL;
	}
	frame = call_raw(c, api_key, version, &w, &r, deadline, err, errlen);
	OPENSSL_cleanse(w.buf, w.len);
	kw_fini(&w);
	if (frame == NULL)
		return NULL;
	api->response_init(resp);
	if (api->response_decode(&r, a, version, resp) < 0 || r.err) {
		seterr(err, errlen, "%s: malformed %s v%d response: %s",
		    c->addr, api->name, version,
		    r.why != NULL ? r.why : "decode error");
		free(frame);
		return NULL;
	}
	return frame;
}

uint8_t *kblock_call(struct kblock *c, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms, char *err,
    size_t errlen)
{
	return call_deadline(c, api_key, version, req, resp, a,
	    clock_mono_ms() + timeout_ms, err, errlen);
}

/* ---- connecting ------------------------------------------------------ */

static int tcp_connect(struct kblock *c, const char *host, int port,
    int64_t deadline, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char portstr[16];
	int rc;

	seterr(portstr, sizeof(portstr), "%d", port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0) {
		seterr(err, errlen, "%s: %s", c->addr, gai_strerror(rc));
		return -1;
	}
	seterr(err, errlen, "%s: no usable address", c->addr);
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int soerr = 0, one = 1;
		socklen_t sl = sizeof(soerr);

		c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (c->fd < 0)
			continue;
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
		    errno != EINPROGRESS) {
			seterr(err, errlen, "%s: connect: %s", c->addr,
			    strerror(errno));
			goto next;
		}
		if (wait_fd(c, POLLOUT, deadline, "connect", err, errlen) != 0)
			goto next;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
		    soerr != 0) {
			seterr(err, errlen, "%s: connect: %s", c->addr,
			    strerror(soerr != 0 ? soerr : errno));
			goto next;
		}
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		freeaddrinfo(res);
		return 0;
next:
		close(c->fd);
		c->fd = -1;
	}
	freeaddrinfo(res);
	return -1;
}

static int tls_connect(struct kblock *c, const struct kconn_config *cfg,
    const char *host, int64_t deadline, char *err, size_t errlen)
{
	struct addrinfo hints, *ai = NULL;
	int numeric;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST;
	numeric = getaddrinfo(host, NULL, &hints, &ai) == 0;
	if (ai != NULL)
		freeaddrinfo(ai);
	c->ssl = SSL_new(cfg->ssl_ctx);
	if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
		seterr(err, errlen, "%s: cannot set up TLS", c->addr);
		return -1;
	}
	if (!numeric)
		SSL_set_tlsext_host_name(c->ssl, host);
	if (cfg->ssl_verify_peer && cfg->ssl_verify_hostname) {
		if (numeric)
			X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host);
		else
			SSL_set1_host(c->ssl, host);
	}
	for (;;) {
		int r, e;

		ERR_clear_error();
		r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			if (wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
			    deadline, "TLS handshake", err, errlen) != 0)
				return -1;
			continue;
		}
		char buf[256] = "handshake failed";
		unsigned long ee = ERR_get_error();
		long vr = SSL_get_verify_result(c->ssl);

		if (ee != 0)
			ERR_error_string_n(ee, buf, sizeof(buf));
		if (vr != X509_V_OK)
			seterr(err, errlen, "%s: TLS: certificate verification "
			    "failed: %s", c->addr, X509_verify_cert_error_string(vr));
		else
			seterr(err, errlen, "%s: TLS: %s", c->addr, buf);
		return -1;
	}
}

/* One SaslAuthenticate v2 round; the server's bytes stay in *frame. */
static int sasl_round(struct kblock *c, const void *tok, size_t len,
    struct kbytes *out, uint8_t **frame, struct karena *a, int64_t deadline,
    char *err, size_t errlen)
{
	struct kp_sasl_authenticate_request req;
	struct kp_sasl_authenticate_response resp;

	kp_sasl_authenticate_request_init(&req);
	req.auth_bytes = (struct kbytes){ tok, (int32_t)len };
	*frame = call_deadline(c, KP_API_SASL_AUTHENTICATE, 2, &req, &resp, a,
	    deadline, err, errlen);
	if (*frame == NULL)
		return -1;
	if (resp.error_code != 0) {
		seterr(err, errlen, "%s: SASL authentication failed: %s: %.*s",
		    c->addr, kerr_name(resp.error_code),
		    resp.error_message.len > 0 ? (int)resp.error_message.len : 0,
		    resp.error_message.len > 0 ? resp.error_message.p : "");
		return -1;
	}
	*out = resp.auth_bytes;
	return 0;
}

static int sasl_login(struct kblock *c, const struct kconn_config *cfg,
    int64_t deadline, char *err, size_t errlen)
{
	struct kp_sasl_handshake_request hreq;
	struct kp_sasl_handshake_response hresp;
	struct karena *a = karena_new(1 << 20);
	struct ksasl_scram *sc = NULL;
	uint8_t *frame = NULL, *tok = NULL;
	size_t tl = 0;
	struct kbytes sb;
	const char *msg;
	size_t ml;
	int rc = -1;

	if (a == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	kp_sasl_handshake_request_init(&hreq);
	hreq.mechanism = kstr_c(ksasl_mech_name(cfg->sasl_mech));
	frame = call_deadline(c, KP_API_SASL_HANDSHAKE, 1, &hreq, &hresp, a,
	    deadline, err, errlen);
	if (frame == NULL)
		goto out;
	if (hresp.error_code != 0) {
		seterr(err, errlen, "%s: SASL mechanism %s refused: %s", c->addr,
		    ksasl_mech_name(cfg->sasl_mech), kerr_name(hresp.error_code));
		goto out;
	}
	free(frame);
	frame = NULL;
	if (cfg->sasl_mech == KSASL_PLAIN) {
		if (ksasl_plain_token(cfg->sasl_username, cfg->sasl_password, &tok,
		    &tl, err, errlen) < 0)
			goto out;
		if (sasl_round(c, tok, tl, &sb, &frame, a, deadline, err,
		    errlen) != 0)
			goto out;
		rc = 0;
		goto out;
	}
	sc = ksasl_scram_new(cfg->sasl_mech, cfg->sasl_username,
	    cfg->sasl_password, NULL, err, errlen);
	if (sc == NULL || ksasl_scram_client_first(sc, &msg, &ml) < 0)
		goto out;
	if (sasl_round(c, msg, ml, &sb, &frame, a, deadline, err, errlen) != 0)
		goto out;
	if (ksasl_scram_client_final(sc, sb.p, sb.len > 0 ? (size_t)sb.len : 0,
	    &msg, &ml, err, errlen) < 0)
		goto out;
	free(frame);
	frame = NULL;
	if (sasl_round(c, msg, ml, &sb, &frame, a, deadline, err, errlen) != 0)
		goto out;
	if (ksasl_scram_verify_server(sc, sb.p, sb.len > 0 ? (size_t)sb.len : 0,
	    err, errlen) < 0)
		goto out;
	rc = 0;
out:
	if (tok != NULL) {
		OPENSSL_cleanse(tok, tl);
		free(tok);
	}
	ksasl_scram_free(sc);
	free(frame);
	karena_free(a);
	return rc;
}

struct kblock *kblock_connect(const struct kconn_config *cfg,
    const char *host, int port, int timeout_ms, char *err, size_t errlen)
{
	struct kblock *c = calloc(1, sizeof(*c));
	int64_t deadline = clock_mono_ms() + timeout_ms;

	if (c == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	c->fd = -1;
	c->next_corr = 1;
	c->client_id = cfg->client_id != NULL ? cfg->client_id : "mirrord";
	seterr(c->addr, sizeof(c->addr), "%s:%d", host, port);
	if (tcp_connect(c, host, port, deadline, err, errlen) != 0)
		goto fail;
	if (kconn_security_tls(cfg->security) &&
	    tls_connect(c, cfg, host, deadline, err, errlen) != 0)
		goto fail;
	if (kconn_security_sasl(cfg->security) &&
	    sasl_login(c, cfg, deadline, err, errlen) != 0)
		goto fail;
	return c;
fail:
	kblock_free(c);
	return NULL;
}

void kblock_free(struct kblock *c)
{
	if (c == NULL)
		return;
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}
