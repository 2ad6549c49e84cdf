/* kfake.c: see kfake.h. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "compat.h"
#include "kbuf.h"
#include "kfake.h"
#include "kproto.h"

size_t kfake_frame(uint8_t *out, size_t cap, int32_t corr, int hdr_tags,
    const void *body, size_t len)
{
	size_t n = 8;

	ck_assert_uint_le(len + 9, cap);
	be32_store(out + 4, (uint32_t)corr);
	if (hdr_tags)
		out[n++] = 0;
	if (len > 0)
		memcpy(out + n, body, len);
	n += len;
	be32_store(out, (uint32_t)(n - 4));
	return n;
}

void kfake_send_raw(struct kfake *f, const void *p, size_t n)
{
	ssize_t w;

	ck_assert_ptr_nonnull(f->peer);
	/* Loopback and small: the kernel takes it all at once. */
	w = send(bufferevent_getfd(f->peer), p, n, MSG_NOSIGNAL);
	ck_assert_int_eq((int)w, (int)n);
}

void kfake_reply(struct kfake *f, int32_t corr, int hdr_tags, const void *body,
    size_t len)
{
	uint8_t *buf = malloc(len + 16);

	ck_assert_ptr_nonnull(buf);
	kfake_send_raw(f, buf, kfake_frame(buf, len + 16, corr, hdr_tags, body,
	    len));
	free(buf);
}

void kfake_apiversions(struct kfake *f, int32_t corr, int version,
    const int16_t (*keys)[3], size_t n)
{
	struct kw w;
	uint8_t *b;
	size_t len = 0;

	kw_init(&w, 65536);
	kw_i16(&w, 0);
	if (version >= 3)
		kw_carray(&w, (int32_t)n);
	else
		kw_array(&w, (int32_t)n);
	for (size_t i = 0; i < n; i++) {
		kw_i16(&w, keys[i][0]);
		kw_i16(&w, keys[i][1]);
		kw_i16(&w, keys[i][2]);
		if (version >= 3)
			kw_tags_empty(&w);
	}
	if (version >= 1)
		kw_i32(&w, 0);
	if (version >= 3)
		kw_tags_empty(&w);
	b = kw_take(&w, &len);
	ck_assert_ptr_nonnull(b);
	/* ApiVersions answers with response header v0 at every version. */
	kfake_reply(f, corr, 0, b, len);
	free(b);
	kw_fini(&w);
}

static void kfake_request(struct kfake *f, const uint8_t *p, size_t len)
{
	struct kr r;
	int16_t key, version;
	int32_t corr;
	struct kstr cid;

	kr_init(&r, p, len);
	key = kr_i16(&r);
	version = kr_i16(&r);
	corr = kr_i32(&r);
	cid = kr_str(&r);
	ck_assert_int_eq(r.err, 0);
	if (kp_request_header_version(key, version) == 2)
		kr_skip_tagged(&r);
	ck_assert_int_eq(r.err, 0);
	if (f->nreq < KFAKE_MAX_REQ) {
		f->keys[f->nreq] = key;
		f->versions[f->nreq] = version;
		f->corrs[f->nreq] = corr;
		f->nreq++;
	}
	snprintf(f->client_id, sizeof(f->client_id), "%.*s",
	    cid.len > 0 ? (int)cid.len : 0, cid.len > 0 ? cid.p : "");
	f->body_len = MIN(kr_left(&r), sizeof(f->body));
	memcpy(f->body, r.p, f->body_len);
	f->fn(f, key, version, corr, &r, f->arg);
}

static int peer_slot(struct kfake *f, struct bufferevent *bev)
{
	for (int i = 0; i < KFAKE_MAX_PEERS; i++)
		if (f->peers[i] == bev)
			return i;
	return -1;
}

static void kfake_read_cb(struct bufferevent *bev, void *arg)
{
	struct kfake *f = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[4];

	f->peer = bev;
	while (f->peer == bev && evbuffer_get_length(in) >= 4) {
		uint32_t size;
		uint8_t *p;

		evbuffer_copyout(in, hdr, 4);
		size = be32_load(hdr);
		ck_assert_uint_lt(size, 1u << 20);
		if (evbuffer_get_length(in) < size + 4)
			break;
		p = evbuffer_pullup(in, size + 4);
		kfake_request(f, p + 4, size);
		if (f->peer != bev)
			return; /* the handler closed it: the buffer is gone */
		evbuffer_drain(in, size + 4);
	}
}

static void kfake_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct kfake *f = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		int i = peer_slot(f, bev);
		if (i >= 0)
			f->peers[i] = NULL;
		if (f->peer == bev)
			f->peer = NULL;
		bufferevent_free(bev);
	}
}

static void kfake_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct kfake *f = arg;
	int i = peer_slot(f, NULL);

	ck_assert_int_ge(i, 0);
	f->accepted++;
	f->peer = bufferevent_socket_new(f->base, fd, BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(f->peer);
	f->peers[i] = f->peer;
	bufferevent_setcb(f->peer, kfake_read_cb, NULL, kfake_event_cb, f);
	bufferevent_enable(f->peer, EV_READ);
}

void kfake_start(struct kfake *f, struct event_base *base, kfake_request_fn fn,
    void *arg)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(f, 0, sizeof(*f));
	f->base = base;
	f->fn = fn;
	f->arg = arg;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lst = evconnlistener_new_bind(base, kfake_accept_cb, f,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
	    (struct sockaddr *)&sin, sizeof(sin));
	ck_assert_ptr_nonnull(f->lst);
	ck_assert_int_eq(getsockname(evconnlistener_get_fd(f->lst),
	    (struct sockaddr *)&sin, &sl), 0);
	f->port = ntohs(sin.sin_port);
}

void kfake_close_peer(struct kfake *f)
{
	int i;

	if (f->peer == NULL)
		return;
	i = peer_slot(f, f->peer);
	if (i >= 0)
		f->peers[i] = NULL;
	bufferevent_free(f->peer);
	f->peer = NULL;
}

void kfake_stop_listening(struct kfake *f)
{
	if (f->lst != NULL) {
		evconnlistener_free(f->lst);
		f->lst = NULL;
	}
}

void kfake_stop(struct kfake *f)
{
	for (int i = 0; i < KFAKE_MAX_PEERS; i++) {
		if (f->peers[i] != NULL)
			bufferevent_free(f->peers[i]);
		f->peers[i] = NULL;
	}
	f->peer = NULL;
	kfake_stop_listening(f);
}

/* ---- running the test's loop ------------------------------------------ */

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

int kfake_run_until(struct event_base *base, const int *flag, int want)
{
	struct timeval tv = { 10, 0 };
	int hit = 0;
	struct event *ev = evtimer_new(base, deadline_cb, &hit);

	ck_assert_ptr_nonnull(ev);
	evtimer_add(ev, &tv);
	while (*flag < want && !hit)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(ev);
	return *flag >= want;
}

struct kfake_waiter {
	int (*pred)(void *);
	void *arg;
	int met;
};

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kfake_waiter *w = arg;

	if (w->pred(w->arg))
		w->met = 1;
}

int kfake_wait_for(struct event_base *base, int (*pred)(void *), void *arg,
    long poll_us)
{
	struct kfake_waiter w = { pred, arg, 0 };
	struct timeval tv = { poll_us / 1000000, poll_us % 1000000 };
	struct event *ev = event_new(base, -1, EV_PERSIST, poll_cb, &w);

	ck_assert_ptr_nonnull(ev);
	evtimer_add(ev, &tv);
	kfake_run_until(base, &w.met, 1);
	event_free(ev);
	return w.met;
}
