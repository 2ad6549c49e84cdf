/*
 * kconn.h: one connection to one Kafka broker, on a libevent loop.
 *
 * A kconn connects (TCP, optionally TLS), negotiates ApiVersions, runs SASL
 * when configured, and then carries requests: it assigns correlation ids,
 * frames requests with the right request header, pipelines them (bounded by
 * count and bytes), matches responses in order, and hands each response body
 * to its callback as a struct kr positioned after the response header.
 * Requests sent before the handshake is done wait in a queue and go out,
 * in order, once the connection is ready.
 *
 * Guarantees:
 *  - every request accepted by kconn_send() gets its callback exactly once:
 *    with the body, or with an error (KCONN_E_*) and a message naming the
 *    broker and the cause;
 *  - a peer that breaks the protocol (correlation mismatch, frame larger than
 *    max_response_bytes, truncated header) fails every request and closes
 *    the connection; Kafka answers in order, so a request timeout does too,
 *    unless the request was sent with KCONN_F_KEEP_ON_TIMEOUT: then only
 *    that request fails (KCONN_E_TIMEOUT), the connection and its other
 *    requests go on, and the late answer, which still comes before theirs,
 *    is dropped as it arrives (never held whole); no answer for another
 *    timeout closes the connection as above;
 *  - the owner's event callback sees KCONN_EV_READY at most once and
 *    KCONN_EV_CLOSED exactly once (unless the owner frees the connection
 *    first);
 *  - any callback may call kconn_free() on its own connection: the memory
 *    is released from a deferred event, never under the caller's feet.
 *
 * A kconn is one-shot: after KCONN_EV_CLOSED, free it and make a new one.
 * Reconnect policy (backoff, which broker) belongs to the owner (kcluster).
 *
 * The struct kconn_config is the owner's; it must outlive every kconn made
 * from it.  It holds secrets: never log its fields.
 */
#ifndef MIRRORD_KCONN_H
#define MIRRORD_KCONN_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evdns_base;
struct kr;
struct kw;
struct ssl_ctx_st;
struct kconn;

/* ---- configuration (librdkafka property names) ----------------------- */

/* X(enum suffix, security.protocol value, tls, sasl) */
#define KCONN_SECURITY(X) \
	X(PLAINTEXT, "plaintext", 0, 0) \
	X(SSL, "ssl", 1, 0) \
	X(SASL_PLAINTEXT, "sasl_plaintext", 0, 1) \
	X(SASL_SSL, "sasl_ssl", 1, 1)

enum kconn_security {
#define X(e, s, t, a) KCONN_SEC_##e,
	KCONN_SECURITY(X)
#undef X
	KCONN_SEC_COUNT
};

struct kconn_config {
	char *client_id;            /* client.id (default "mirrord") */
	int security;               /* security.protocol (enum kconn_security) */
	int sasl_mech;              /* sasl.mechanism (enum ksasl_mech) */
	char *sasl_username;        /* sasl.username */
	char *sasl_password;        /* sasl.password (secret) */
	char *ssl_ca_location;      /* ssl.ca.location (NULL: system store) */
	char *ssl_cert_location;    /* ssl.certificate.location */
	char *ssl_key_location;     /* ssl.key.location */
	char *ssl_key_password;     /* ssl.key.password (secret) */
	/* The contents of the three files (ssl.ca.pem, ssl.certificate.pem,
	 * ssl.key.pem, librdkafka's names).  A caller that must not block
	 * reads the files off the loop (fileload) and sets these; when one is
	 * unset, kconn_config_prepare() reads its *_location itself. */
	char *ssl_ca_pem;
	char *ssl_cert_pem;
	char *ssl_key_pem;          /* secret */
	int ssl_verify_peer;        /* enable.ssl.certificate.verification */
	int ssl_verify_hostname;    /* ssl.endpoint.identification.algorithm=https */
	int connect_timeout_ms;     /* socket.connection.setup.timeout.ms: TCP+TLS+handshake */
	int request_timeout_ms;     /* socket.timeout.ms: default per request */
	int max_inflight;           /* max.in.flight.requests.per.connection */
	size_t max_inflight_bytes;  /* mirrord.max.in.flight.bytes: queued+sent request bytes */
	size_t max_request_bytes;   /* mirrord.max.request.bytes: one encoded request */
	size_t max_response_bytes;  /* receive.message.max.bytes: one response frame */
	struct ssl_ctx_st *ssl_ctx; /* built by kconn_config_prepare() */
};

void kconn_config_init(struct kconn_config *cfg);
/* Frees the strings (secrets are wiped first) and the TLS context. */
void kconn_config_fini(struct kconn_config *cfg);
/*
 * Sets one property by its librdkafka name.  Returns 0 when set, 1 when the
 * name is not one kconn uses (the caller decides whether that is an error),
 * -1 with the reason in err for a bad value.  Errors name the property and,
 * except for secrets, the value.
 */
int kconn_config_set(struct kconn_config *cfg, const char *name,
    const char *value, char *err, size_t errlen);
/*
 * Checks the combination (SASL needs a user and password, a key needs a
 * certificate, ...) and builds the TLS context from memory (PEM BIOs), so a
 * bad file is reported at startup.  A *_location whose *_pem was not set is
 * read here, synchronously, with safefile_read() and no directory
 * restriction: only for operator-trusted settings (mirrord.yaml, tools,
 * tests), never for names from the wire.  Call once after the last
 * kconn_config_set() and before kconn_new().
 */
int kconn_config_prepare(struct kconn_config *cfg, char *err, size_t errlen);
/* For a property that names a file ("ssl.ca.location"), the property that
 * carries its contents instead ("ssl.ca.pem"); NULL for any other name. */
const char *kconn_file_prop_pem(const char *name);
const char *kconn_security_name(int security);
/* 1 if that security.protocol runs TLS / SASL. */
int kconn_security_tls(int security);
int kconn_security_sasl(int security);

/* ---- errors ---------------------------------------------------------- */

/* X(enum suffix, name) */
#define KCONN_ERRORS(X) \
	X(OK, "ok") \
	X(TRANSPORT, "transport") /* refused, reset, closed by the peer */ \
	X(TIMEOUT, "timeout")     /* connect, handshake or request deadline */ \
	X(PROTOCOL, "protocol")   /* the peer broke framing or ordering */ \
	X(TLS, "tls")             /* TLS handshake or certificate */ \
	X(AUTH, "auth")           /* SASL refused or failed */ \
	X(UNSUPPORTED, "unsupported") /* the broker lacks a needed API version */ \
	X(CLOSED, "closed")       /* the owner closed or freed the connection */

enum kconn_err {
#define X(e, s) KCONN_E_##e,
	KCONN_ERRORS(X)
#undef X
	KCONN_E_COUNT
};

const char *kconn_err_name(int err);

/* ---- connections ----------------------------------------------------- */

enum kconn_event {
	KCONN_EV_READY,  /* handshake done, versions known */
	KCONN_EV_CLOSED, /* err/errstr say why; every request has been failed */
};

typedef void (*kconn_event_cb)(struct kconn *c, int event, int err,
    const char *errstr, void *arg);

/*
 * A response or a failure.  On success err is KCONN_E_OK, errstr is NULL
 * and body reads the response body (after the response header); the bytes
 * are only valid during the call.  On failure body is NULL and errstr says
 * what happened ("127.0.0.1:9092: request Metadata v1 timed out after
 * 5000 ms").
 */
typedef void (*kconn_resp_cb)(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg);

/* Writes a request body; the generated kp_*_request_encode() functions have
 * this shape apart from the message pointer type (wrap them). */
typedef int (*kconn_encode_fn)(struct kw *w, int16_t version, const void *msg);

/* Per-request statistics for the metrics module: called once per finished
 * request (also on failure), before the request's own callback. */
typedef void (*kconn_stats_fn)(void *arg, int16_t api_key, int err,
    int64_t latency_us, size_t request_bytes, size_t response_bytes);

/*
 * Creates a connection to host:port and starts connecting at once.  dns
 * resolves host names without blocking; it may be NULL when host is a
 * numeric address.  cb reports READY and CLOSED.  Returns NULL with the
 * reason in err only for immediate failures (bad address, out of memory);
 * connection failures arrive later as KCONN_EV_CLOSED.
 */
struct kconn *kconn_new(struct event_base *base, struct evdns_base *dns,
    const struct kconn_config *cfg, const char *host, int port,
    kconn_event_cb cb, void *arg, char *err, size_t errlen);

/* Fails every request with KCONN_E_CLOSED, then frees (deferred if called
 * from one of c's callbacks).  The event callback is not called. */
void kconn_free(struct kconn *c);

/* Closes now: every request fails with err (a KCONN_E_* code, e.g.
 * KCONN_E_PROTOCOL when the owner found a response malformed) and
 * "host:port: why", and the event callback gets KCONN_EV_CLOSED.  The
 * object stays until freed. */
void kconn_close(struct kconn *c, int err, const char *why);

/* Changes the argument the event callback gets (the owner moved). */
void kconn_set_event_arg(struct kconn *c, void *arg);

#define KCONN_F_NO_RESPONSE 0x1 /* acks=0 Produce: nothing comes back */
/* A timeout fails only this request (see the guarantees above); the data
 * plane's Fetch and Produce, whose owners settle a timeout per request. */
#define KCONN_F_KEEP_ON_TIMEOUT 0x2

/*
 * Queues a request.  enc(w, version, msg) writes the body (or use
 * kconn_send_raw with a prebuilt body).  timeout_ms <= 0 takes the config's
 * request_timeout_ms.  With KCONN_F_NO_RESPONSE, cb must be NULL and the
 * request is done once queued (a response that arrives anyway, as the
 * librdkafka mock sends for acks=0, is discarded).
 *
 * Returns 0 if queued (cb will be called exactly once, never from inside
 * this call), or -1 with the reason in err if the connection is closed, a
 * limit (in-flight count or bytes, request size) would be passed, or the
 * encoder failed; then cb is never called.
 */
int kconn_send(struct kconn *c, int16_t api_key, int16_t version,
    kconn_encode_fn enc, const void *msg, int flags, int timeout_ms,
    kconn_resp_cb cb, void *arg, char *err, size_t errlen);
/*
 * Sending by reference.  A lender's loan stands for bytes the request
 * refers to instead of copying them: kconn_send_lent() encodes with
 * lending (kw_lend()) for byte fields of at least ld->min bytes, calls
 * ld->lend(ld->arg, p, n) for each such field, in the order they appear
 * in the request, and queues the bytes at p as they are (no copy).  The
 * lender keeps them unchanged and alive until kconn calls the loan's
 * release(): once they are written to the socket, or dropped (the
 * connection closed; that may come from a later loop iteration, after
 * kconn_free()).  lend() returning NULL fails the send; the loans made
 * for a send that fails are released before kconn_send_lent() returns.
 * Lent bytes still count in kconn_unsent_bytes() until written: the
 * lender subtracts what it lent.
 */
struct kconn_loan {
	void (*release)(struct kconn_loan *l);
};
struct kconn_lender {
	size_t min;
	struct kconn_loan *(*lend)(void *arg, const uint8_t *p, size_t n);
	void *arg;
};
int kconn_send_lent(struct kconn *c, int16_t api_key, int16_t version,
    kconn_encode_fn enc, const void *msg, const struct kconn_lender *ld,
    int flags, int timeout_ms, kconn_resp_cb cb, void *arg, char *err,
    size_t errlen);
/* kconn_send() with the request encoder of api_key's row in the ApiKey
 * table (kp_api_find()): msg is that API's kp_*_request. */
int kconn_send_msg(struct kconn *c, int16_t api_key, int16_t version,
    const void *msg, int flags, int timeout_ms, kconn_resp_cb cb, void *arg,
    char *err, size_t errlen);
int kconn_send_raw(struct kconn *c, int16_t api_key, int16_t version,
    const void *body, size_t len, int flags, int timeout_ms,
    kconn_resp_cb cb, void *arg, char *err, size_t errlen);

/*
 * The highest version of api_key that both we (our_min..our_max) and the
 * broker support, or -1 if none or if the connection is not ready yet.
 */
int kconn_pick_version(const struct kconn *c, int16_t api_key, int16_t our_min,
    int16_t our_max);
/* The broker's range for api_key: 0, or -1 if it does not list the key. */
int kconn_api_range(const struct kconn *c, int16_t api_key, int16_t *min,
    int16_t *max);

int kconn_is_ready(const struct kconn *c);
int kconn_is_closed(const struct kconn *c);
/* "host:port", for messages. */
const char *kconn_name(const struct kconn *c);
/* Requests waiting for a response (or for the handshake) and their bytes. */
int kconn_inflight_count(const struct kconn *c);
size_t kconn_inflight_bytes(const struct kconn *c);
/* Requests that timed out under KCONN_F_KEEP_ON_TIMEOUT whose late answer
 * has not come yet (still counted in kconn_inflight_count/bytes), and how
 * many such late answers were discarded since the connection opened. */
int kconn_late_count(const struct kconn *c);
int64_t kconn_late_answers(const struct kconn *c);
/*
 * Inside a response callback only: when the response was read into a
 * buffer of kconn's own (a large frame on a plain TCP connection), that
 * buffer is handed over, so what the body points at outlives the callback;
 * the caller frees it with free().  Returns its start (the body lies in
 * it) and its size in *size; NULL when the body is in kconn's input buffer
 * (gone once the callback returns).
 */
void *kconn_take_frame(struct kconn *c, size_t *size);
/* Request bytes accepted and not yet written to the socket (the copies of
 * what is being sent that this connection holds in memory). */
size_t kconn_unsent_bytes(const struct kconn *c);
/* 1 if a request of len bytes would be accepted now (back-pressure). */
int kconn_can_send(const struct kconn *c, size_t len);
/* ApiVersions version the broker finally answered (for tests/logs). */
int kconn_apiversions_version(const struct kconn *c);

void kconn_set_stats_cb(struct kconn *c, kconn_stats_fn fn, void *arg);

/* ---- parsing (exposed for the fuzz harness and tests) ---------------- */

#define KCONN_MAX_API_KEY 256 /* ApiKeys whose ranges are kept */

struct kconn_api_range {
	int16_t min, max; /* min -1: the broker does not list the key */
};

/*
 * Parses an ApiVersions response body of `version` into ranges[0..255].
 * Returns 0 on success; 1 when the broker answered UNSUPPORTED_VERSION,
 * with *retry_version the version to ask next (KIP-511: the highest the
 * broker lists below ours, or 0 when the v0-shaped body does not parse, as
 * from the librdkafka 2.0.2 mock); -1 when the body is malformed (r->why,
 * r->err_off) or carries another error (*errcode).
 */
int kconn_apiversions_parse(struct kr *r, int version,
    struct kconn_api_range *ranges, int *retry_version, int16_t *errcode);

#endif
