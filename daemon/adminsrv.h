/*
 * adminsrv.h: the Kafka-protocol listener mirrord serves its admin RPCs on.
 *
 * This module owns sockets, framing and ordering only: it accepts
 * connections, reads size-prefixed frames (capped at max_request_bytes),
 * decodes the request header and hands one request at a time per connection
 * to the dispatch callback.  A connection reads no further request until the
 * current one is answered, so pipelined requests are answered strictly in
 * order even when a handler completes asynchronously (as Kafka brokers do by
 * muting the channel).  What a request means is the dispatcher's business
 * (daemon/admin.c).
 *
 * Bad input never reaches an assert: an oversized frame, a header that does
 * not parse, an unknown ApiKey or version, or a body the handler rejects is
 * logged once (peer, key, version, reason), counted, and the connection is
 * closed.  Nothing else is affected.
 */
#ifndef MIRRORD_ADMINSRV_H
#define MIRRORD_ADMINSRV_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"

struct event_base;
struct adminauth;
struct adminsrv;
struct adminsrv_req;

/* Why a request was refused; each has a metrics label. */
#define ADMINSRV_REJECTS(X) \
	X(OVERSIZED, "oversized") \
	X(BAD_FRAME, "bad_frame") \
	X(BAD_HEADER, "bad_header") \
	X(UNKNOWN_API, "unknown_api") \
	X(UNSUPPORTED_VERSION, "unsupported_version") \
	X(MALFORMED_BODY, "malformed_body") \
	X(TOO_MANY_CONNECTIONS, "too_many_connections") \
	X(UNAUTHENTICATED, "unauthenticated") \
	X(TLS_HANDSHAKE, "tls_handshake")

enum adminsrv_reject {
#define X(e, s) ADMINSRV_REJECT_##e,
	ADMINSRV_REJECTS(X)
#undef X
	ADMINSRV_REJECT_COUNT
};

const char *adminsrv_reject_name(int reason);

/*
 * Called once per request.  The request stays valid until it is answered
 * with adminsrv_respond() or refused with adminsrv_reject(); exactly one of
 * the two must be called, now or later.  body is positioned after the
 * request header; arena is freed with the request.
 */
typedef void (*adminsrv_dispatch_fn)(struct adminsrv_req *rq, void *arg);
/* Optional: called after each reject and each response for metrics. */
typedef void (*adminsrv_observe_fn)(void *arg, int16_t api_key,
    int16_t error_code, int reject_reason);

struct adminsrv_opts {
	const char *host;
	int port;
	size_t max_request_bytes;
	int max_connections;
	adminsrv_dispatch_fn dispatch;
	adminsrv_observe_fn observe;
	void *arg;
	/* Listener security (TLS, SASL gate); borrowed, may be NULL. */
	struct adminauth *auth;
};

struct adminsrv *adminsrv_new(struct event_base *base,
    const struct adminsrv_opts *opts, char *err, size_t errlen);
/* Stops accepting; open connections finish their current request. */
void adminsrv_stop_accepting(struct adminsrv *srv);
void adminsrv_free(struct adminsrv *srv);
int adminsrv_port(const struct adminsrv *srv);
int adminsrv_connections(const struct adminsrv *srv);
void adminsrv_set_max_request_bytes(struct adminsrv *srv, size_t max);

/* Accessors for a request in flight. */
int16_t adminsrv_req_api_key(const struct adminsrv_req *rq);
int16_t adminsrv_req_api_version(const struct adminsrv_req *rq);
struct kr *adminsrv_req_body(struct adminsrv_req *rq);
struct karena *adminsrv_req_arena(struct adminsrv_req *rq);
const char *adminsrv_req_peer(const struct adminsrv_req *rq);
/*
 * The authenticated principal of the request's connection, in Kafka's form
 * ("User:alice", "User:CN=client,O=example"); "User:ANONYMOUS" on a
 * connection that has not authenticated (PLAINTEXT, or SSL without a client
 * certificate).  Valid while the request is.
 */
const char *adminsrv_req_principal(const struct adminsrv_req *rq);
struct kstr adminsrv_req_client_id(const struct adminsrv_req *rq);
/* 1 while the client is still connected. */
int adminsrv_req_alive(const struct adminsrv_req *rq);

/*
 * Sends the response body (without header) and frees rq.  error_code is
 * for metrics only.  header_version is 0 or 1 (flexible responses; the
 * ApiVersions response is always 0).
 */
void adminsrv_respond(struct adminsrv_req *rq, int header_version,
    const uint8_t *body, size_t len, int16_t error_code);
/* Logs "peer: api_key K vV: reason", counts it, closes the connection. */
void adminsrv_reject(struct adminsrv_req *rq, int reason, const char *detail);

#endif
