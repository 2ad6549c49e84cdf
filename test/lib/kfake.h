/*
 * kfake.h: a fake Kafka broker for unit tests, on the test's own libevent
 * loop, listening on 127.0.0.1 (kernel-chosen port), one client at a time.
 *
 * It parses each request's frame and header (the header version comes from
 * kproto's ApiKey table), records the ApiKey, version, correlation id,
 * client id and body of each, and hands the request to the test's handler,
 * which answers with kfake_reply() (or not at all, or badly: that is what
 * the tests are for).  Replies are written straight to the socket so a
 * handler can close the connection right after a partial frame.
 */
#ifndef MIRRORD_TEST_KFAKE_H
#define MIRRORD_TEST_KFAKE_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evconnlistener;
struct bufferevent;
struct kr;
struct kfake;

#define KFAKE_MAX_REQ 64
#define KFAKE_MAX_PEERS 8
#define KFAKE_MAX_BODY 1024

typedef void (*kfake_request_fn)(struct kfake *f, int16_t key, int16_t version,
    int32_t corr, struct kr *body, void *arg);

struct kfake {
	struct event_base *base;
	struct evconnlistener *lst;
	struct bufferevent *peers[KFAKE_MAX_PEERS];
	struct bufferevent *peer;     /* the one whose request is handled now,
	                               * else the last accepted */
	int port;
	int accepted;                 /* connections accepted so far */
	int nreq;                     /* requests recorded (at most KFAKE_MAX_REQ) */
	int16_t keys[KFAKE_MAX_REQ];
	int16_t versions[KFAKE_MAX_REQ];
	int32_t corrs[KFAKE_MAX_REQ];
	char client_id[64];           /* of the last request */
	uint8_t body[KFAKE_MAX_BODY]; /* the last request's body */
	size_t body_len;
	kfake_request_fn fn;
	void *arg;
};

void kfake_start(struct kfake *f, struct event_base *base, kfake_request_fn fn,
    void *arg);
void kfake_stop(struct kfake *f);
/* Stop listening (later connects are refused); keeps the port number. */
void kfake_stop_listening(struct kfake *f);
/* Closes the current client connection (f->peer), if any. */
void kfake_close_peer(struct kfake *f);

/* Writes a frame (size, correlation id, optional empty tag section, body)
 * into out (cap bytes); returns its length. */
size_t kfake_frame(uint8_t *out, size_t cap, int32_t corr, int hdr_tags,
    const void *body, size_t len);
void kfake_send_raw(struct kfake *f, const void *p, size_t n);
/* A response with response header v1 when hdr_tags, else v0. */
void kfake_reply(struct kfake *f, int32_t corr, int hdr_tags, const void *body,
    size_t len);
/* A well-formed ApiVersions response of `version` listing keys[i] =
 * {api_key, min, max}. */
void kfake_apiversions(struct kfake *f, int32_t corr, int version,
    const int16_t (*keys)[3], size_t n);

/* Runs the loop of base until *flag >= want or 10 s pass; returns 1 when
 * *flag reached want. */
int kfake_run_until(struct event_base *base, const int *flag, int want);
/* Runs the loop of base until pred(arg) holds, checked every poll_us
 * microseconds (for states that have no callback of their own), at most
 * 10 s; returns 1 when it held. */
int kfake_wait_for(struct event_base *base, int (*pred)(void *), void *arg,
    long poll_us);

#endif
