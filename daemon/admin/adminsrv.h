/*
 * adminsrv.h: the Kafka-protocol listener mirrord serves its admin RPCs on.
 *
 * This module owns sockets, framing and ordering only: it accepts
 * connections, reads size-prefixed frames (capped at max_request_bytes),
 * decodes the request header and hands one request at a time per connection
 * to the dispatch callback.  A connection starts no further request until
 * the current one is answered, so pipelined requests are answered strictly
 * in order even when a handler completes asynchronously (as Kafka brokers do
 * by muting the channel).  Requests are started from the loop, never from
 * inside an answer, so a long pipeline costs no stack.  What a request
 * means is the dispatcher's business (daemon/admin/admin.c).
 *
 * Limits (all in adminsrv_opts): an idle connection is closed after
 * idle_timeout_ms, a request frame not complete request_timeout_ms after its
 * first byte arrived is closed; at most max_connections_per_ip connections
 * per peer address (loopback included); reading from a peer stops while
 * more than max_buffered_bytes_per_conn bytes (or the frame being read, if
 * larger) wait in its buffer; and when all connections together hold more
 * than max_buffered_bytes_total bytes of input, the connection with the
 * largest buffer is closed.  At max_connections, a new connection closes
 * the connection idle the longest to make room (so idle connections cannot
 * lock an operator out); if none is idle, the new one is refused.
 *
 * On a SASL listener a client that has not logged in is held to less
 * (Kafka's sasl.server.max.receive.size): a frame announced larger than
 * ADMINAUTH_MAX_RECEIVE_UNAUTHENTICATED is refused at its size prefix, and
 * no more than that is read ahead from it.
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
	X(TOO_MANY_CONNECTIONS_PER_IP, "too_many_connections_per_ip") \
	X(EVICTED_IDLE, "evicted_idle") \
	X(IDLE_TIMEOUT, "idle_timeout") \
	X(REQUEST_TIMEOUT, "request_timeout") \
	X(BUFFERED_BYTES_TOTAL, "buffered_bytes_total") \
	X(RESPONSE_TOO_LARGE, "response_too_large") \
	X(UNAUTHENTICATED, "unauthenticated") \
	X(TLS_HANDSHAKE, "tls_handshake") \
	X(OVERSIZED_UNAUTHENTICATED, "oversized_unauthenticated")

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
	/* Limits; 0 means none.  adminsrv_set_limits() changes them later. */
	int max_connections_per_ip;
	int64_t idle_timeout_ms;
	int64_t request_timeout_ms;
	size_t max_buffered_bytes_per_conn;
	size_t max_buffered_bytes_total;
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
/* Bytes the listener holds: input buffered, requests in flight, answers
 * not yet sent (what max_buffered_bytes_total caps). */
size_t adminsrv_buffered(const struct adminsrv *srv);
void adminsrv_set_max_request_bytes(struct adminsrv *srv, size_t max);
/* Takes max_request_bytes, max_connections and the limits above from o
 * (reload); open connections follow them from their next event. */
void adminsrv_set_limits(struct adminsrv *srv, const struct adminsrv_opts *o);

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
