/*
 * Unit tests for kconn and ksasl: framing, correlation, pipelining,
 * ApiVersions negotiation (including the librdkafka mock's broken v3 answer
 * and the KIP-511 fallback), timeouts, hostile frames and connection loss
 * against a fake broker that runs on the same event loop, and the SCRAM
 * client against RFC 7677's test vector.
 *
 * Every test waits on a condition with a generous deadline; none sleeps.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "compat.h"
#include "kbuf.h"
#include "kconn.h"
#include "kfake.h"
#include "kproto.h"
#include "ksasl.h"

/* ---- the fake broker ------------------------------------------------- */

enum fake_mode {
	FAKE_NORMAL,     /* answers everything, body = "RESP" + request body */
	FAKE_MOCK_AV,    /* ApiVersions v3 answered like librdkafka 2.0.2's mock */
	FAKE_KIP511,     /* ApiVersions v3 unsupported, v0-shaped range 0..2 */
	FAKE_SWAP,       /* answers the 2nd user request before the 1st */
	FAKE_CLOSE_MID,  /* answers the 1st, half of the 2nd, then closes */
	FAKE_SILENT,     /* answers ApiVersions only */
	FAKE_SILENT_AV,  /* answers nothing */
	FAKE_OVERSIZE,   /* answers the 1st user request with a huge frame size */
	FAKE_SASL,       /* SaslHandshake + SaslAuthenticate (PLAIN, SCRAM-SHA-256) */
	FAKE_TLS,        /* a TLS listener: answers with a TLS alert record */
	FAKE_LATE,       /* holds the 1st user answer (300 KB) until the 2nd
	                  * request, then answers both in order */
	FAKE_LATE_MID,   /* sends half of the 1st user answer (300 KB), the
	                  * rest when the 2nd request comes, then answers it */
	FAKE_LARGE,      /* answers user request i with a body of large_sizes[i] */
	FAKE_LARGE_CUT,  /* 20,000 bytes of a 100,000-byte answer, then closes */
};

/* FAKE_LARGE's bodies: around and far above kconn's direct-read size
 * (64 KiB), with small ones between, so frames start inside the bytes
 * another frame's reads brought in. */
static const size_t large_sizes[] = { 70000, 12, 600000, 65531, 3, 300000 };
#define NLARGE (sizeof(large_sizes) / sizeof(large_sizes[0]))

static uint8_t large_byte(size_t i, size_t j)
{
	return (uint8_t)(j * 31 + i * 7 + (j >> 9));
}

/* The fake broker (test/lib/kfake) and what this suite's modes keep. */
struct fake {
	struct kfake k;
	int mode;
	int user_reqs;         /* non-handshake requests seen */
	uint8_t held[64];      /* FAKE_SWAP: the held first answer */
	size_t held_len;
	int32_t late_corr;     /* FAKE_LATE: the first request's */
	int sasl_ok;           /* FAKE_SASL: authentication succeeded */
	int scram_step;        /* -1: PLAIN; 0, 1: SCRAM rounds */
	char scram_cfirst_bare[256];
	char scram_sfirst[256];
};

static void put16(uint8_t *p, int16_t v)
{
	be16_store(p, (uint16_t)v);
}

static void put32(uint8_t *p, int32_t v)
{
	be32_store(p, (uint32_t)v);
}

static void fake_apiversions(struct fake *f, int32_t corr, int version)
{
	int16_t keys[][3] = {
		{ 0, 0, 9 }, { 3, 0, 12 }, { 17, 1, 1 }, { 18, 0, 3 },
		{ 36, 0, 2 },
	};
	uint8_t b[16];

	if (f->mode == FAKE_MOCK_AV && version == 3) {
		/* librdkafka 2.0.2 mock, verbatim (mock notes, section 1) */
		static const uint8_t quirk[] = { 0x00, 0x23, 0x01, 0x00, 0x12,
			0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00 };
		kfake_reply(&f->k, corr, 0, quirk, sizeof(quirk));
		return;
	}
	if (f->mode == FAKE_KIP511 && version == 3) {
		put16(b, 35);
		put32(b + 2, 1);
		put16(b + 6, 18);
		put16(b + 8, 0);
		put16(b + 10, 2);
		kfake_reply(&f->k, corr, 0, b, 12);
		return;
	}
	if (f->mode == FAKE_MOCK_AV)
		keys[1][2] = 2; /* Metadata 0..2 like the mock */
	kfake_apiversions(&f->k, corr, version, keys, ARRAY_SIZE(keys));
}

static void fake_user_reply(struct fake *f, int32_t corr, int flexible,
    const uint8_t *body, size_t len)
{
	uint8_t b[1024];

	ck_assert_uint_lt(len, sizeof(b) - 8);
	memcpy(b, "RESP", 4);
	memcpy(b + 4, body, len);
	kfake_reply(&f->k, corr, flexible, b, len + 4);
}

/* SaslAuthenticate v1 response: error, message, auth bytes, lifetime 0. */
static void fake_sasl_auth_reply(struct fake *f, int32_t corr, int16_t ec,
    const char *emsg, const char *tok)
{
	struct kw w;
	uint8_t *b;
	size_t len = 0;

	kw_init(&w, 4096);
	kw_i16(&w, ec);
	kw_str(&w, kstr_c(emsg));
	kw_bytes(&w, tok ? (struct kbytes){ (const uint8_t *)tok,
	    (int32_t)strlen(tok) } : KBYTES_NULL);
	kw_i64(&w, 0);
	b = kw_take(&w, &len);
	ck_assert_ptr_nonnull(b);
	kfake_reply(&f->k, corr, 0, b, len);
	free(b);
	kw_fini(&w);
}

/* SCRAM-SHA-256 server side with the RFC 7677 salt and password. */
static void fake_scram(struct fake *f, int32_t corr, const uint8_t *tok,
    size_t len)
{
	char msg[400];

	if (f->scram_step == 0) {
		/* client-first "n,,n=user,r=<cnonce>" */
		ck_assert_uint_gt(len, 3);
		ck_assert_int_eq(memcmp(tok, "n,,", 3), 0);
		snprintf(f->scram_cfirst_bare, sizeof(f->scram_cfirst_bare),
		    "%.*s", (int)len - 3, (const char *)tok + 3);
		const char *r = strstr(f->scram_cfirst_bare, ",r=");
		ck_assert_ptr_nonnull(r);
		snprintf(f->scram_sfirst, sizeof(f->scram_sfirst),
		    "r=%s%s,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", r + 3,
		    "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
		f->scram_step = 1;
		fake_sasl_auth_reply(f, corr, 0, NULL, f->scram_sfirst);
		return;
	}
	/* Verify the proof: ClientKey = proof ^ HMAC(StoredKey, auth). */
	uint8_t salt[18], salted[32], ckey[32], stored[32], csig[32];
	uint8_t proof[48], skey[32], ssig[32];
	char auth[512], sig64[64];
	unsigned int hl;
	const char *p = memmem(tok, len, ",p=", 3);

	ck_assert_ptr_nonnull(p);
	size_t wpl = (size_t)(p - (const char *)tok);
	ck_assert_int_eq(EVP_DecodeBlock(salt,
	    (const unsigned char *)"W22ZaJ0SNY7soEsUEjb6gQ==", 24), 18);
	ck_assert_int_eq(PKCS5_PBKDF2_HMAC("pencil", 6, salt, 16, 4096,
	    EVP_sha256(), 32, salted), 1);
	HMAC(EVP_sha256(), salted, 32, (const uint8_t *)"Client Key", 10, ckey,
	    &hl);
	EVP_Digest(ckey, 32, stored, NULL, EVP_sha256(), NULL);
	ck_assert_uint_lt(wpl, 200);
	int an = snprintf(auth, sizeof(auth), "%s,%s,", f->scram_cfirst_bare,
	    f->scram_sfirst);
	ck_assert_int_lt(an + (int)wpl, (int)sizeof(auth));
	memcpy(auth + an, tok, wpl);
	auth[an + (int)wpl] = '\0';
	HMAC(EVP_sha256(), stored, 32, (const uint8_t *)auth, strlen(auth), csig,
	    &hl);
	ck_assert_int_eq(EVP_DecodeBlock(proof, (const unsigned char *)p + 3,
	    (int)(len - wpl - 3)), 33);
	for (int i = 0; i < 32; i++)
		proof[i] ^= csig[i];
	EVP_Digest(proof, 32, ckey, NULL, EVP_sha256(), NULL);
	if (memcmp(ckey, stored, 32) != 0) {
		fake_sasl_auth_reply(f, corr, 58, "bad SCRAM proof", NULL);
		return;
	}
	HMAC(EVP_sha256(), salted, 32, (const uint8_t *)"Server Key", 10, skey,
	    &hl);
	HMAC(EVP_sha256(), skey, 32, (const uint8_t *)auth, strlen(auth), ssig,
	    &hl);
	EVP_EncodeBlock((unsigned char *)sig64, ssig, 32);
	snprintf(msg, sizeof(msg), "v=%s", sig64);
	f->sasl_ok = 1;
	fake_sasl_auth_reply(f, corr, 0, NULL, msg);
}

static void fake_sasl(struct fake *f, int16_t key, int32_t corr,
    struct kr *r)
{
	if (key == 17) {
		struct kw w;
		uint8_t *b;
		size_t len = 0;
		struct kstr m = kr_str(r);
		int known = kstr_eq(m, "PLAIN") || kstr_eq(m, "SCRAM-SHA-256");

		kw_init(&w, 256);
		kw_i16(&w, known ? 0 : 33);
		kw_array(&w, 2);
		kw_str(&w, kstr_c("PLAIN"));
		kw_str(&w, kstr_c("SCRAM-SHA-256"));
		b = kw_take(&w, &len);
		f->scram_step = kstr_eq(m, "SCRAM-SHA-256") ? 0 : -1;
		kfake_reply(&f->k, corr, 0, b, len);
		free(b);
		kw_fini(&w);
		return;
	}
	/* SaslAuthenticate v1 */
	struct kbytes tok = kr_bytes(r);
	ck_assert_int_eq(r->err, 0);
	if (f->scram_step >= 0) {
		fake_scram(f, corr, tok.p, (size_t)tok.len);
		return;
	}
	if (tok.len == 12 && memcmp(tok.p, "\0user\0pencil", 12) == 0) {
		f->sasl_ok = 1;
		fake_sasl_auth_reply(f, corr, 0, NULL, "");
	} else {
		fake_sasl_auth_reply(f, corr, 58, "Invalid username or password",
		    "");
	}
}

/* The late answer of FAKE_LATE and FAKE_LATE_MID: a frame of 300,000
 * zero bytes for request f->late_corr, larger than anything kconn holds
 * for an answer (malloc'd, its length in *n). */
static uint8_t *late_answer(const struct fake *f, size_t *n)
{
	size_t big = 300000;
	uint8_t *body = calloc(1, big), *b = malloc(big + 16);

	ck_assert(body != NULL && b != NULL);
	*n = kfake_frame(b, big + 16, f->late_corr, 0, body, big);
	free(body);
	return b;
}

static void fake_request(struct kfake *k, int16_t key, int16_t version,
    int32_t corr, struct kr *r, void *arg)
{
	struct fake *f = arg;
	int flexible = kp_response_header_version(key, version) == 1;

	if (key == 18 && f->mode == FAKE_TLS) {
		/* TLS 1.2 alert record: fatal, unexpected_message */
		static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02,
			0x02, 0x0a };
		kfake_send_raw(k, alert, sizeof(alert));
		kfake_close_peer(k);
		return;
	}
	if (key == 18) {
		if (f->mode != FAKE_SILENT_AV)
			fake_apiversions(f, corr, version);
		return;
	}
	if (f->mode == FAKE_SASL && (key == 17 || key == 36)) {
		fake_sasl(f, key, corr, r);
		return;
	}
	f->user_reqs++;
	switch (f->mode) {
	case FAKE_SWAP:
		if (f->user_reqs == 1) {
			f->held_len = kfake_frame(f->held, sizeof(f->held), corr, 0,
			    "RESP", 4);
		} else if (f->user_reqs == 2) {
			fake_user_reply(f, corr, 0, r->p, kr_left(r));
			kfake_send_raw(k, f->held, f->held_len);
		}
		break;
	case FAKE_CLOSE_MID:
		if (f->user_reqs == 1) {
			fake_user_reply(f, corr, 0, r->p, kr_left(r));
		} else if (f->user_reqs == 2) {
			uint8_t b[64];
			size_t n = kfake_frame(b, sizeof(b), corr, 0,
			    "RESPxxxxxxxx", 12);
			kfake_send_raw(k, b, n / 2);
			kfake_close_peer(k);
		}
		break;
	case FAKE_LATE:
		if (f->user_reqs == 1) {
			f->late_corr = corr;
		} else {
			if (f->user_reqs == 2) {
				size_t n;
				uint8_t *b = late_answer(f, &n);

				kfake_send_raw(k, b, n);
				free(b);
			}
			fake_user_reply(f, corr, flexible, r->p, kr_left(r));
		}
		break;
	case FAKE_LATE_MID: {
		size_t n;
		uint8_t *b;

		if (f->user_reqs == 1)
			f->late_corr = corr;
		b = late_answer(f, &n);
		if (f->user_reqs == 1)
			kfake_send_raw(k, b, n / 2);
		else if (f->user_reqs == 2)
			kfake_send_raw(k, b + n / 2, n - n / 2);
		free(b);
		if (f->user_reqs > 1)
			fake_user_reply(f, corr, flexible, r->p, kr_left(r));
		break;
	}
	case FAKE_SILENT:
	case FAKE_SILENT_AV:
		break;
	case FAKE_LARGE:
	case FAKE_LARGE_CUT: {
		size_t i = (size_t)(f->user_reqs - 1) % NLARGE;
		size_t len = f->mode == FAKE_LARGE ? large_sizes[i] : 100000;
		uint8_t *b = malloc(len + 16);
		size_t n;

		ck_assert_ptr_nonnull(b);
		for (size_t j = 0; j < len; j++)
			b[j + 8] = large_byte(i, j);
		n = kfake_frame(b, len + 16, corr, 0, b + 8, len);
		if (f->mode == FAKE_LARGE) {
			/* Through the fake's bufferevent: written as the
			 * client reads, in pieces. */
			ck_assert_int_eq(bufferevent_write(k->peer, b, n), 0);
		} else {
			kfake_send_raw(k, b, 20000);
			kfake_close_peer(k);
		}
		free(b);
		break;
	}
	case FAKE_OVERSIZE: {
		uint8_t b[8];
		put32(b, 0x10000000);
		put32(b + 4, corr);
		kfake_send_raw(k, b, 8);
		break;
	}
	default:
		fake_user_reply(f, corr, flexible, r->p, kr_left(r));
		break;
	}
}

static void fake_start(struct fake *f, struct event_base *base, int mode)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	kfake_start(&f->k, base, fake_request, f);
}

static void fake_stop(struct fake *f)
{
	kfake_stop(&f->k);
}

/* ---- the client side ------------------------------------------------- */

struct call {
	int fired;
	int err;
	int order;
	char errstr[512];
	uint8_t body[1100];
	size_t bodylen;
	int free_conn; /* kconn_free() from inside this callback */
};

struct conn_events {
	int ready, closed, err;
	char errstr[512];
};

static int g_order;
static int g_stats;

static void call_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct call *k = arg;

	k->fired++;
	k->err = err;
	k->order = ++g_order;
	snprintf(k->errstr, sizeof(k->errstr), "%s", errstr ? errstr : "");
	if (body != NULL) {
		ck_assert_ptr_null(errstr);
		k->bodylen = MIN(kr_left(body), sizeof(k->body));
		memcpy(k->body, body->p, k->bodylen);
	} else {
		ck_assert_int_ne(err, KCONN_E_OK);
		ck_assert_ptr_nonnull(errstr);
	}
	if (k->free_conn)
		kconn_free(c);
}

static void ev_cb(struct kconn *c, int event, int err, const char *errstr,
    void *arg)
{
	struct conn_events *e = arg;

	if (event == KCONN_EV_READY) {
		e->ready++;
	} else {
		e->closed++;
		e->err = err;
		snprintf(e->errstr, sizeof(e->errstr), "%s", errstr);
	}
}

static void stats_cb(void *arg, int16_t api_key, int err, int64_t latency_us,
    size_t reqb, size_t respb)
{
	ck_assert_uint_gt(reqb, 0);
	g_stats++;
}

/* Counts callbacks of a set of calls. */
static int g_done;

static void done_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	call_cb(c, err, errstr, body, arg);
	g_done++;
}

struct env {
	struct event_base *base;
	struct fake fake;
	struct kconn_config cfg;
	struct conn_events ev;
	struct kconn *c;
};

static void env_start(struct env *e, int mode)
{
	char err[256];

	memset(e, 0, sizeof(*e));
	g_order = 0;
	g_done = 0;
	g_stats = 0;
	e->base = event_base_new();
	ck_assert_ptr_nonnull(e->base);
	fake_start(&e->fake, e->base, mode);
	kconn_config_init(&e->cfg);
	ck_assert_int_eq(kconn_config_set(&e->cfg, "client.id", "mirrord-test",
	    err, sizeof(err)), 0);
	e->cfg.max_response_bytes = 1u << 20;
}

static void env_connect(struct env *e)
{
	char err[256];

	ck_assert_int_eq(kconn_config_prepare(&e->cfg, err, sizeof(err)), 0);
	e->c = kconn_new(e->base, NULL, &e->cfg, "127.0.0.1", e->fake.k.port,
	    ev_cb, &e->ev, err, sizeof(err));
	ck_assert_msg(e->c != NULL, "kconn_new: %s", err);
	kconn_set_stats_cb(e->c, stats_cb, NULL);
}

static void env_stop(struct env *e)
{
	if (e->c != NULL)
		kconn_free(e->c);
	event_base_loop(e->base, EVLOOP_NONBLOCK); /* deferred frees */
	fake_stop(&e->fake);
	kconn_config_fini(&e->cfg);
	event_base_free(e->base);
}

static void send_raw(struct env *e, int16_t key, int16_t version,
    const char *body, int timeout_ms, struct call *k)
{
	char err[256];
	int rc = kconn_send_raw(e->c, key, version, body, strlen(body), 0,
	    timeout_ms, done_cb, k, err, sizeof(err));

	ck_assert_msg(rc == 0, "kconn_send_raw: %s", err);
}

/* ---- tests ----------------------------------------------------------- */

/* Calls k[0..n) were each called back once with err and (has not NULL) a
 * message starting with has (at_start) or holding it. */
static void calls_failed(const struct call *k, int n, int err, const char *has,
    int at_start)
{
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(k[i].fired, 1);
		ck_assert_int_eq(k[i].err, err);
		if (has != NULL)
			ck_assert_msg(at_start ?
			    strncmp(k[i].errstr, has, strlen(has)) == 0 :
			    strstr(k[i].errstr, has) != NULL,
			    "call %d: errstr: %s", i, k[i].errstr);
	}
}

START_TEST(test_pipeline_in_order)
{
	struct env e;
	struct call k[4];
	static const char *bodies[] = { "a", "bb", "ccc", "dddd" };

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_NORMAL);
	env_connect(&e);
	/* Queued before the handshake is done: they go out in order after. */
	for (int i = 0; i < 3; i++)
		send_raw(&e, 3, 1, bodies[i], 0, &k[i]);
	/* Metadata v9 is flexible: request header v2, response header v1. */
	send_raw(&e, 3, 9, bodies[3], 0, &k[3]);
	ck_assert_int_eq(kconn_inflight_count(e.c), 4);
	ck_assert(kfake_run_until(e.base, &g_done, 4));

	for (int i = 0; i < 4; i++) {
		char want[16];
		snprintf(want, sizeof(want), "RESP%s", bodies[i]);
		ck_assert_int_eq(k[i].fired, 1);
		ck_assert_int_eq(k[i].err, KCONN_E_OK);
		ck_assert_int_eq(k[i].order, i + 1);
		ck_assert_uint_eq(k[i].bodylen, strlen(want));
		ck_assert_int_eq(memcmp(k[i].body, want, strlen(want)), 0);
	}
	/* ApiVersions v3 first, then correlation ids in sending order. */
	ck_assert_int_eq(e.fake.k.nreq, 5);
	ck_assert_int_eq(e.fake.k.keys[0], 18);
	ck_assert_int_eq(e.fake.k.versions[0], 3);
	for (int i = 1; i < 5; i++) {
		ck_assert_int_eq(e.fake.k.keys[i], 3);
		ck_assert_int_ne(e.fake.k.corrs[i], e.fake.k.corrs[0]);
		if (i > 1)
			ck_assert_int_eq(e.fake.k.corrs[i], e.fake.k.corrs[i - 1] + 1);
	}
	ck_assert_str_eq(e.fake.k.client_id, "mirrord-test");
	ck_assert_int_eq(e.ev.ready, 1);
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert_int_eq(kconn_apiversions_version(e.c), 3);
	ck_assert_int_eq(kconn_pick_version(e.c, 3, 0, 9), 9);
	ck_assert_int_eq(kconn_pick_version(e.c, 3, 0, 20), 12);
	ck_assert_int_eq(kconn_pick_version(e.c, 3, 13, 14), -1);
	ck_assert_int_eq(kconn_pick_version(e.c, 99, 0, 5), -1);
	ck_assert_int_eq(kconn_inflight_count(e.c), 0);
	ck_assert_uint_eq(kconn_inflight_bytes(e.c), 0);
	ck_assert_int_eq(g_stats, 5); /* ApiVersions + 4 */
	env_stop(&e);
}
END_TEST

/* Many requests in flight whose answers span many reads. */
START_TEST(test_pipeline_many)
{
	enum { N = 300 };
	struct env e;
	struct call *k = calloc(N, sizeof(*k));
	char (*bodies)[1000] = calloc(N, sizeof(*bodies));

	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(bodies);
	env_start(&e, FAKE_NORMAL);
	env_connect(&e);
	for (int i = 0; i < N; i++) {
		/* 1..999 bytes, distinct per request */
		size_t len = 1 + (size_t)(i * 37) % 998;
		memset(bodies[i], 'a' + i % 26, len);
		bodies[i][len] = '\0';
		snprintf(bodies[i], 8, "%05d", i);
		bodies[i][5] = '-';
		send_raw(&e, 3, 1, bodies[i], 0, &k[i]);
	}
	ck_assert_int_eq(kconn_inflight_count(e.c), N);
	ck_assert(kfake_run_until(e.base, &g_done, N));
	for (int i = 0; i < N; i++) {
		size_t len = strlen(bodies[i]);
		ck_assert_int_eq(k[i].fired, 1);
		ck_assert_int_eq(k[i].err, KCONN_E_OK);
		ck_assert_int_eq(k[i].order, i + 1);
		ck_assert_uint_eq(k[i].bodylen, MIN(len + 4, sizeof(k[i].body)));
		ck_assert_int_eq(memcmp(k[i].body + 4, bodies[i],
		    k[i].bodylen - 4), 0);
	}
	ck_assert_uint_eq(kconn_inflight_bytes(e.c), 0);
	env_stop(&e);
	free(k);
	free(bodies);
}
END_TEST

/* ---- sending by reference (kconn_send_lent) ------------------------- */

struct lent_msg {
	uint8_t a[300], b[10], c[400];
};

static int lent_encode(struct kw *w, int16_t version, const void *msg)
{
	const struct lent_msg *m = msg;

	kw_i16(w, 0x0102);
	kw_bytes(w, (struct kbytes){ m->a, sizeof(m->a) });
	kw_bytes(w, (struct kbytes){ m->b, sizeof(m->b) });
	kw_cbytes(w, (struct kbytes){ m->c, sizeof(m->c) });
	kw_i8(w, 7);
	return 0;
}

struct test_loan {
	struct kconn_loan base;
	int *released;
};

struct lender_state {
	int lent, refuse_at, released;
	const uint8_t *ptrs[4];
	size_t lens[4];
};

static void test_loan_release(struct kconn_loan *l)
{
	struct test_loan *t = (struct test_loan *)l;

	(*t->released)++;
	free(t);
}

static struct kconn_loan *test_lend(void *arg, const uint8_t *p, size_t n)
{
	struct lender_state *s = arg;
	struct test_loan *t;

	if (s->lent == s->refuse_at)
		return NULL;
	ck_assert_int_lt(s->lent, 4);
	s->ptrs[s->lent] = p;
	s->lens[s->lent] = n;
	s->lent++;
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->base.release = test_loan_release;
	t->released = &s->released;
	return &t->base;
}

/*
 * A request sent with lending carries the same bytes as one copied (the
 * fake echoes the body), lends exactly the fields of at least min bytes,
 * in order, and releases each loan once, by the time the answer is in;
 * before the handshake (queued) and after it.  A send whose lender refuses
 * fails and releases the loans it took, and its callback never runs.
 */
START_TEST(test_send_lent)
{
	struct env e;
	struct call k[3];
	struct lent_msg m;
	struct lender_state ls[3];
	struct kw w;
	uint8_t *want;
	size_t wantlen;
	char err[256];

	memset(k, 0, sizeof(k));
	memset(ls, 0, sizeof(ls));
	for (size_t i = 0; i < sizeof(m.a); i++)
		m.a[i] = (uint8_t)(i * 7);
	memset(m.b, 0xbb, sizeof(m.b));
	for (size_t i = 0; i < sizeof(m.c); i++)
		m.c[i] = (uint8_t)(i * 13 + 1);
	kw_init(&w, 4096);
	ck_assert_int_eq(lent_encode(&w, 0, &m), 0);
	want = kw_take(&w, &wantlen);
	kw_fini(&w);

	env_start(&e, FAKE_NORMAL);
	env_connect(&e);
	for (int i = 0; i < 3; i++) {
		struct kconn_lender ld = { 100, test_lend, &ls[i] };
		int rc;

		ls[i].refuse_at = i == 2 ? 1 : -1;
		if (i == 1)
			ck_assert(kfake_run_until(e.base, &g_done, 1)); /* READY now */
		rc = kconn_send_lent(e.c, 3, 1, lent_encode, &m, &ld, 0, 0,
		    done_cb, &k[i], err, sizeof(err));
		if (i < 2) {
			ck_assert_msg(rc == 0, "kconn_send_lent: %s", err);
			ck_assert_int_eq(ls[i].lent, 2);
			ck_assert_ptr_eq(ls[i].ptrs[0], m.a);
			ck_assert_uint_eq(ls[i].lens[0], sizeof(m.a));
			ck_assert_ptr_eq(ls[i].ptrs[1], m.c);
			ck_assert_uint_eq(ls[i].lens[1], sizeof(m.c));
			ck_assert_int_eq(ls[i].released, 0); /* not written yet */
		} else {
			ck_assert_int_eq(rc, -1);
			ck_assert_msg(strstr(err, "could not be lent") != NULL,
			    "%s", err);
			ck_assert_int_eq(ls[i].lent, 1);
			ck_assert_int_eq(ls[i].released, 1);
		}
	}
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(k[i].fired, 1);
		ck_assert_int_eq(k[i].err, KCONN_E_OK);
		ck_assert_uint_eq(k[i].bodylen, wantlen + 4);
		ck_assert_mem_eq(k[i].body, "RESP", 4);
		ck_assert_mem_eq(k[i].body + 4, want, wantlen);
		ck_assert_int_eq(ls[i].released, 2);
	}
	ck_assert_int_eq(k[2].fired, 0);
	ck_assert_uint_eq(kconn_unsent_bytes(e.c), 0);
	env_stop(&e);
	free(want);
}
END_TEST

/* A connection closed with lent bytes unwritten releases their loans. */
START_TEST(test_send_lent_dropped)
{
	struct env e;
	struct call k;
	struct lent_msg m;
	struct lender_state ls;
	struct kconn_lender ld = { 100, test_lend, &ls };
	char err[256];

	memset(&k, 0, sizeof(k));
	memset(&m, 0x42, sizeof(m));
	memset(&ls, 0, sizeof(ls));
	ls.refuse_at = -1;
	env_start(&e, FAKE_SILENT_AV);
	env_connect(&e);
	/* Queued until the handshake, which never finishes. */
	ck_assert_int_eq(kconn_send_lent(e.c, 3, 1, lent_encode, &m, &ld, 0,
	    0, done_cb, &k, err, sizeof(err)), 0);
	ck_assert_int_eq(ls.lent, 2);
	ck_assert_uint_ge(kconn_unsent_bytes(e.c), sizeof(m.a) + sizeof(m.c));
	kconn_free(e.c);
	e.c = NULL;
	event_base_loop(e.base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(k.fired, 1);
	ck_assert_int_ne(k.err, KCONN_E_OK);
	ck_assert_int_eq(ls.released, 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_apiversions_mock_quirk)
{
	struct env e;
	struct call k;

	memset(&k, 0, sizeof(k));
	env_start(&e, FAKE_MOCK_AV);
	env_connect(&e);
	send_raw(&e, 3, 2, "x", 0, &k);
	ck_assert(kfake_run_until(e.base, &g_done, 1));
	ck_assert_int_eq(k.err, KCONN_E_OK);
	ck_assert_int_eq(e.ev.ready, 1);
	/* v3 got the mock's broken answer; the retry used v0. */
	ck_assert_int_eq(e.fake.k.versions[0], 3);
	ck_assert_int_eq(e.fake.k.keys[1], 18);
	ck_assert_int_eq(e.fake.k.versions[1], 0);
	ck_assert_int_eq(kconn_apiversions_version(e.c), 0);
	ck_assert_int_eq(kconn_pick_version(e.c, 3, 0, 12), 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_apiversions_kip511)
{
	struct env e;

	env_start(&e, FAKE_KIP511);
	env_connect(&e);
	ck_assert(kfake_run_until(e.base, &e.ev.ready, 1));
	ck_assert_int_eq(e.fake.k.versions[0], 3);
	ck_assert_int_eq(e.fake.k.versions[1], 2); /* the broker's highest */
	ck_assert_int_eq(kconn_apiversions_version(e.c), 2);
	env_stop(&e);
}
END_TEST

START_TEST(test_out_of_order_is_protocol_error)
{
	struct env e;
	struct call k[3];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_SWAP);
	env_connect(&e);
	for (int i = 0; i < 3; i++)
		send_raw(&e, 3, 1, "q", 0, &k[i]);
	ck_assert(kfake_run_until(e.base, &g_done, 3));
	calls_failed(k, 3, KCONN_E_PROTOCOL, "expected", 0);
	ck_assert_int_eq(e.ev.closed, 1);
	ck_assert_int_eq(e.ev.err, KCONN_E_PROTOCOL);
	ck_assert(kconn_is_closed(e.c));
	/* A closed connection refuses new requests without a callback. */
	char err[256];
	ck_assert_int_eq(kconn_send_raw(e.c, 3, 1, "z", 1, 0, 0, done_cb, &k[0],
	    err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "closed"));
	ck_assert_int_eq(k[0].fired, 1);
	env_stop(&e);
}
END_TEST

START_TEST(test_close_mid_response)
{
	struct env e;
	struct call k[3];
	char want[64];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_CLOSE_MID);
	env_connect(&e);
	for (int i = 0; i < 3; i++)
		send_raw(&e, 3, 1, "m", 0, &k[i]);
	ck_assert(kfake_run_until(e.base, &g_done, 3));
	ck_assert_int_eq(k[0].err, KCONN_E_OK);
	snprintf(want, sizeof(want), "127.0.0.1:%d: connection closed by the "
	    "broker", e.fake.k.port);
	calls_failed(k + 1, 2, KCONN_E_TRANSPORT, want, 1);
	ck_assert_int_eq(k[0].fired, 1);
	ck_assert_int_eq(e.ev.closed, 1);
	ck_assert_int_eq(e.ev.err, KCONN_E_TRANSPORT);
	env_stop(&e);
}
END_TEST

START_TEST(test_request_timeout)
{
	struct env e;
	struct call k[3];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_SILENT);
	env_connect(&e);
	send_raw(&e, 3, 1, "t1", 10000, &k[0]);
	send_raw(&e, 3, 1, "t2", 200, &k[1]);
	send_raw(&e, 3, 1, "t3", 10000, &k[2]);
	ck_assert(kfake_run_until(e.base, &g_done, 3));
	/* The one that timed out says so; the others lost their connection. */
	ck_assert_int_eq(k[1].err, KCONN_E_TIMEOUT);
	ck_assert_msg(strstr(k[1].errstr, "timed out after 200 ms") != NULL,
	    "errstr: %s", k[1].errstr);
	ck_assert_int_eq(k[1].order, 1);
	calls_failed(&k[0], 1, KCONN_E_TRANSPORT, "timed out", 0);
	calls_failed(&k[2], 1, KCONN_E_TRANSPORT, "timed out", 0);
	ck_assert_int_eq(k[1].fired, 1);
	ck_assert_int_eq(e.ev.closed, 1);
	env_stop(&e);
}
END_TEST

/* KCONN_F_KEEP_ON_TIMEOUT: the request that timed out fails alone; its
 * late answer (larger than anything held for it) is discarded and the next
 * request on the connection gets its own answer. */
/* Under KCONN_F_KEEP_ON_TIMEOUT request "late" times out after 200 ms
 * alone: the connection stays, and request "next" gets its own answer once
 * the late one (from the fake of mode) was read and discarded. */
static void keep_on_timeout_then_next(int mode)
{
	struct env e;
	struct call k[2];
	char err[256];

	memset(k, 0, sizeof(k));
	env_start(&e, mode);
	env_connect(&e);
	ck_assert_int_eq(kconn_send_raw(e.c, 3, 1, "late", 4,
	    KCONN_F_KEEP_ON_TIMEOUT, 200, done_cb, &k[0], err, sizeof(err)), 0);
	ck_assert(kfake_run_until(e.base, &g_done, 1));
	ck_assert_int_eq(k[0].err, KCONN_E_TIMEOUT);
	ck_assert_msg(strstr(k[0].errstr, "timed out after 200 ms") != NULL,
	    "errstr: %s", k[0].errstr);
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert_int_eq(kconn_late_count(e.c), 1);
	ck_assert_int_eq(kconn_inflight_count(e.c), 1);
	send_raw(&e, 3, 1, "next", 10000, &k[1]);
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	ck_assert_int_eq(k[1].err, KCONN_E_OK);
	ck_assert_uint_eq(k[1].bodylen, 8);
	ck_assert(memcmp(k[1].body, "RESPnext", 8) == 0);
	ck_assert_int_eq(k[0].fired, 1);
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert_int_eq(kconn_late_count(e.c), 0);
	ck_assert_int_eq(kconn_inflight_count(e.c), 0);
	ck_assert_int_eq(kconn_inflight_bytes(e.c), 0);
	ck_assert_int_eq(kconn_late_answers(e.c), 1);
	ck_assert(kconn_is_ready(e.c));
	env_stop(&e);
}

/* KCONN_F_KEEP_ON_TIMEOUT: the request that timed out fails alone; its
 * late answer (larger than anything held for it) is discarded and the next
 * request on the connection gets its own answer. */
START_TEST(test_request_timeout_keeps_connection)
{
	keep_on_timeout_then_next(FAKE_LATE);
}
END_TEST

/* The same when the request times out while kconn reads its large answer
 * straight from the socket (half of it in, kconn.c frame_done()). */
START_TEST(test_request_timeout_mid_large_answer)
{
	keep_on_timeout_then_next(FAKE_LATE_MID);
}
END_TEST

/* A request that timed out under KCONN_F_KEEP_ON_TIMEOUT and is still not
 * answered one more timeout later: the connection is dead after all. */
/* A silent fake: request "a" under KCONN_F_KEEP_ON_TIMEOUT with a 200 ms
 * timeout (callback k[0]), then "b" with 10 s (k[1]). */
static void silent_keep_a_then_b(struct env *e, struct call k[2])
{
	char err[256];

	memset(k, 0, 2 * sizeof(*k));
	env_start(e, FAKE_SILENT);
	env_connect(e);
	ck_assert_int_eq(kconn_send_raw(e->c, 3, 1, "a", 1,
	    KCONN_F_KEEP_ON_TIMEOUT, 200, done_cb, &k[0], err, sizeof(err)), 0);
	send_raw(e, 3, 1, "b", 10000, &k[1]);
}

START_TEST(test_request_timeout_keep_then_dead)
{
	struct env e;
	struct call k[2];

	silent_keep_a_then_b(&e, k);
	ck_assert(kfake_run_until(e.base, &g_done, 1));
	ck_assert_int_eq(k[0].err, KCONN_E_TIMEOUT);
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	ck_assert_int_eq(k[0].fired, 1);
	calls_failed(&k[1], 1, KCONN_E_TRANSPORT, NULL, 0);
	ck_assert_msg(strstr(e.ev.errstr, "still no answer") != NULL,
	    "errstr: %s", e.ev.errstr);
	env_stop(&e);
}
END_TEST

/* The owner frees the connection from the timeout's callback. */
START_TEST(test_request_timeout_keep_free_in_callback)
{
	struct env e;
	struct call k[2];

	silent_keep_a_then_b(&e, k);
	k[0].free_conn = 1;   /* read when the timeout fires, in the loop */
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	e.c = NULL;
	ck_assert_int_eq(k[0].err, KCONN_E_TIMEOUT);
	ck_assert_int_eq(k[1].err, KCONN_E_CLOSED);
	env_stop(&e);
}
END_TEST

START_TEST(test_handshake_timeout)
{
	struct env e;
	struct call k;
	char want[128];

	memset(&k, 0, sizeof(k));
	env_start(&e, FAKE_SILENT_AV);
	e.cfg.connect_timeout_ms = 300;
	env_connect(&e);
	send_raw(&e, 3, 1, "h", 60000, &k);
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	snprintf(want, sizeof(want), "127.0.0.1:%d: timed out after 300 ms "
	    "while waiting for ApiVersions", e.fake.k.port);
	ck_assert_int_eq(e.ev.err, KCONN_E_TIMEOUT);
	ck_assert_str_eq(e.ev.errstr, want);
	ck_assert_int_eq(e.ev.ready, 0);
	calls_failed(&k, 1, KCONN_E_TIMEOUT, NULL, 0);
	env_stop(&e);
}
END_TEST

START_TEST(test_oversized_frame)
{
	struct env e;
	struct call k[2];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_OVERSIZE);
	env_connect(&e);
	send_raw(&e, 3, 1, "o", 0, &k[0]);
	send_raw(&e, 3, 1, "p", 0, &k[1]);
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	calls_failed(k, 2, KCONN_E_PROTOCOL, "response frame of 268435456 "
	    "bytes passes the limit of 1048576", 0);
	ck_assert_int_eq(e.ev.closed, 1);
	env_stop(&e);
}
END_TEST

/*
 * Large answers are read straight from the socket into a frame buffer of
 * their own (kconn.c read_cb()): answers of many sizes back to back, each
 * delivered whole, byte for byte, in order, the connection still usable.
 */
struct large_call {
	size_t idx;  /* which of large_sizes the answer should be */
	int fired, err, order;
	int taken;   /* kconn_take_frame() handed the buffer over */
	size_t len;
	long bad_at; /* first wrong byte, -1 none */
};

static void large_check_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	struct large_call *k = arg;

	k->fired++;
	k->err = err;
	k->order = ++g_order;
	k->bad_at = -1;
	if (body != NULL) {
		size_t size = 0;
		uint8_t *own = kconn_take_frame(c, &size);

		k->len = kr_left(body);
		/* A frame read into kconn's own buffer is handed over: the
		 * body lies in it (and is checked after kconn let go of it);
		 * a small one never is. */
		if (own != NULL) {
			k->taken = 1;
			ck_assert(body->p >= own &&
			    body->p + k->len <= own + size);
		}
		ck_assert(own != NULL || k->len + 4 >= 65536 ||
		    kconn_take_frame(c, &size) == NULL);
		for (size_t j = 0; j < k->len; j++)
			if (body->p[j] != large_byte(k->idx, j)) {
				k->bad_at = (long)j;
				break;
			}
		ck_assert(kconn_take_frame(c, &size) == NULL);
		free(own);
	}
	g_done++;
}

START_TEST(test_large_frames)
{
	struct env e;
	struct large_call k[2 * NLARGE];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_LARGE);
	e.cfg.max_response_bytes = 1u << 20;
	env_connect(&e);
	for (size_t i = 0; i < 2 * NLARGE; i++) {
		char err[256];

		k[i].idx = i % NLARGE;
		ck_assert_msg(kconn_send_raw(e.c, 3, 1, "L", 1, 0, 0,
		    large_check_cb, &k[i], err, sizeof(err)) == 0, "%s", err);
	}
	ck_assert(kfake_run_until(e.base, &g_done, (int)(2 * NLARGE)));
	for (size_t i = 0; i < 2 * NLARGE; i++) {
		ck_assert_int_eq(k[i].fired, 1);
		ck_assert_int_eq(k[i].err, KCONN_E_OK);
		ck_assert_int_eq(k[i].order, (int)i + 1);
		ck_assert_uint_eq(k[i].len, large_sizes[i % NLARGE]);
		ck_assert_msg(k[i].bad_at < 0, "answer %zu: byte %ld differs", i,
		    k[i].bad_at);
	}
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert_int_eq(kconn_inflight_count(e.c), 0);
	/* The 600,000-byte answers cannot come in one read. */
	ck_assert(k[2].taken && k[2 + NLARGE].taken);
	env_stop(&e);
}
END_TEST

/* The broker closes the connection inside a large answer: that request
 * and the one after fail with the transport error, nothing is delivered. */
START_TEST(test_large_frame_cut)
{
	struct env e;
	struct call k[2];
	char want[128];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_LARGE_CUT);
	env_connect(&e);
	send_raw(&e, 3, 1, "c", 0, &k[0]);
	send_raw(&e, 3, 1, "d", 0, &k[1]);
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	/* The frame after its size: the correlation id and 100,000 bytes,
	 * of which the 20,000 bytes sent hold 19,996. */
	snprintf(want, sizeof(want), "127.0.0.1:%d: connection closed by the "
	    "broker 19996 bytes into a 100004-byte response", e.fake.k.port);
	calls_failed(&k[0], 1, KCONN_E_TRANSPORT, want, 1);
	calls_failed(&k[1], 1, KCONN_E_TRANSPORT, want, 0);
	ck_assert_int_eq(e.ev.closed, 1);
	ck_assert_int_eq(e.ev.err, KCONN_E_TRANSPORT);
	env_stop(&e);
}
END_TEST

START_TEST(test_plaintext_to_tls_listener)
{
	struct env e;
	char want[160];

	env_start(&e, FAKE_TLS);
	env_connect(&e);
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	snprintf(want, sizeof(want), "127.0.0.1:%d: the broker answered with "
	    "TLS: this listener needs security.protocol ssl or sasl_ssl, not "
	    "plaintext", e.fake.k.port);
	ck_assert_int_eq(e.ev.err, KCONN_E_PROTOCOL);
	ck_assert_str_eq(e.ev.errstr, want);
	env_stop(&e);
}
END_TEST

START_TEST(test_connection_refused)
{
	struct env e;
	struct call k;
	char want[128];
	int port;

	memset(&k, 0, sizeof(k));
	env_start(&e, FAKE_NORMAL);
	port = e.fake.k.port;
	kfake_stop_listening(&e.fake.k); /* nobody listens there now */
	ck_assert_int_eq(kconn_config_prepare(&e.cfg, want, sizeof(want)), 0);
	e.c = kconn_new(e.base, NULL, &e.cfg, "127.0.0.1", port, ev_cb, &e.ev,
	    want, sizeof(want));
	ck_assert_ptr_nonnull(e.c);
	send_raw(&e, 3, 1, "r", 0, &k);
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	snprintf(want, sizeof(want), "127.0.0.1:%d: connection refused", port);
	ck_assert_str_eq(e.ev.errstr, want);
	ck_assert_int_eq(e.ev.err, KCONN_E_TRANSPORT);
	calls_failed(&k, 1, KCONN_E_TRANSPORT, NULL, 0);
	kconn_free(e.c);
	e.c = NULL;
	event_base_loop(e.base, EVLOOP_NONBLOCK);
	kconn_config_fini(&e.cfg);
	event_base_free(e.base);
}
END_TEST

START_TEST(test_free_inside_callback)
{
	struct env e;
	struct call k[3];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_NORMAL);
	env_connect(&e);
	k[0].free_conn = 1;
	for (int i = 0; i < 3; i++)
		send_raw(&e, 3, 1, "f", 0, &k[i]);
	ck_assert(kfake_run_until(e.base, &g_done, 3));
	ck_assert_int_eq(k[0].err, KCONN_E_OK);
	calls_failed(k + 1, 2, KCONN_E_CLOSED, NULL, 0);
	ck_assert_int_eq(e.ev.closed, 0); /* freed: no event callback */
	e.c = NULL;
	env_stop(&e);
}
END_TEST

START_TEST(test_limits_and_no_response)
{
	struct env e;
	struct call k[3];
	char err[256];

	memset(k, 0, sizeof(k));
	env_start(&e, FAKE_NORMAL);
	e.cfg.max_inflight = 2;
	env_connect(&e);
	send_raw(&e, 3, 1, "l1", 0, &k[0]);
	/* acks=0 style: no callback, not counted; the fake answers anyway
	 * (as the librdkafka mock does) and the answer is dropped. */
	ck_assert_int_eq(kconn_send_raw(e.c, 0, 3, "noresp", 6,
	    KCONN_F_NO_RESPONSE, 0, NULL, NULL, err, sizeof(err)), 0);
	send_raw(&e, 3, 1, "l2", 0, &k[1]);
	ck_assert_int_eq(kconn_send_raw(e.c, 3, 1, "l3", 2, 0, 0, done_cb,
	    &k[2], err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "2 requests already in flight") != NULL,
	    "err: %s", err);
	ck_assert(!kconn_can_send(e.c, 10));
	ck_assert(kfake_run_until(e.base, &g_done, 2));
	ck_assert_msg(k[0].err == KCONN_E_OK, "errstr: %s", k[0].errstr);
	ck_assert_int_eq(k[1].err, KCONN_E_OK);
	ck_assert_int_eq(memcmp(k[1].body, "RESPl2", 6), 0);
	ck_assert_int_eq(k[2].fired, 0);
	ck_assert_int_eq(e.ev.closed, 0);
	ck_assert(kconn_can_send(e.c, 10));
	env_stop(&e);
}
END_TEST

static void sasl_env(struct env *e, const char *mech, const char *pass)
{
	char err[256];

	env_start(e, FAKE_SASL);
	ck_assert_int_eq(kconn_config_set(&e->cfg, "security.protocol",
	    "SASL_PLAINTEXT", err, sizeof(err)), 0);
	ck_assert_int_eq(kconn_config_set(&e->cfg, "sasl.mechanism", mech, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(kconn_config_set(&e->cfg, "sasl.username", "user", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(kconn_config_set(&e->cfg, "sasl.password", pass, err,
	    sizeof(err)), 0);
	env_connect(e);
}

START_TEST(test_sasl_plain)
{
	struct env e;
	struct call k;

	memset(&k, 0, sizeof(k));
	sasl_env(&e, "PLAIN", "pencil");
	send_raw(&e, 3, 1, "s", 0, &k);
	ck_assert(kfake_run_until(e.base, &g_done, 1));
	ck_assert_int_eq(k.err, KCONN_E_OK);
	ck_assert(e.fake.sasl_ok);
	/* ApiVersions, SaslHandshake v1, SaslAuthenticate v1, the request */
	ck_assert_int_eq(e.fake.k.keys[1], 17);
	ck_assert_int_eq(e.fake.k.versions[1], 1);
	ck_assert_int_eq(e.fake.k.keys[2], 36);
	ck_assert_int_eq(e.fake.k.versions[2], 1);
	ck_assert_int_eq(e.fake.k.keys[3], 3);
	env_stop(&e);
}
END_TEST

START_TEST(test_sasl_plain_refused)
{
	struct env e;
	struct call k;

	memset(&k, 0, sizeof(k));
	sasl_env(&e, "PLAIN", "wrong-secret");
	send_raw(&e, 3, 1, "s", 0, &k);
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	ck_assert_int_eq(e.ev.err, KCONN_E_AUTH);
	ck_assert_msg(strstr(e.ev.errstr, "SASL/PLAIN authentication as "
	    "\"user\" failed: SASL_AUTHENTICATION_FAILED: Invalid username or password") != NULL,
	    "errstr: %s", e.ev.errstr);
	ck_assert_ptr_null(strstr(e.ev.errstr, "wrong-secret"));
	calls_failed(&k, 1, KCONN_E_AUTH, NULL, 0);
	ck_assert_int_eq(e.fake.user_reqs, 0); /* never sent */
	env_stop(&e);
}
END_TEST

START_TEST(test_sasl_scram_end_to_end)
{
	struct env e;
	struct call k;

	memset(&k, 0, sizeof(k));
	sasl_env(&e, "SCRAM-SHA-256", "pencil");
	send_raw(&e, 3, 1, "s", 0, &k);
	ck_assert(kfake_run_until(e.base, &g_done, 1));
	ck_assert_msg(k.err == KCONN_E_OK, "errstr: %s", k.errstr);
	ck_assert(e.fake.sasl_ok);
	env_stop(&e);
}
END_TEST

START_TEST(test_sasl_unknown_mechanism)
{
	struct env e;

	sasl_env(&e, "SCRAM-SHA-512", "pencil");
	ck_assert(kfake_run_until(e.base, &e.ev.closed, 1));
	ck_assert_int_eq(e.ev.err, KCONN_E_AUTH);
	ck_assert_msg(strstr(e.ev.errstr, "does not enable SASL mechanism "
	    "SCRAM-SHA-512 (error 33; enabled: PLAIN, SCRAM-SHA-256)") != NULL,
	    "errstr: %s", e.ev.errstr);
	env_stop(&e);
}
END_TEST

/* RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil". */
START_TEST(test_scram_rfc7677_vector)
{
	static const char sfirst[] = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfux"
	    "FIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
	static const char sfinal[] = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsj"
	    "l95G4=";
	char err[256];
	const char *m;
	size_t ml;
	struct ksasl_scram *s = ksasl_scram_new(KSASL_SCRAM_SHA_256, "user",
	    "pencil", "rOprNGfwEbeRWgbNEkqO", err, sizeof(err));

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(ksasl_scram_client_first(s, &m, &ml), 0);
	ck_assert_str_eq(m, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
	ck_assert_uint_eq(ml, strlen(m));
	ck_assert_int_eq(ksasl_scram_client_final(s, (const uint8_t *)sfirst,
	    strlen(sfirst), &m, &ml, err, sizeof(err)), 0);
	ck_assert_str_eq(m, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfux"
	    "FIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
	ck_assert_int_eq(ksasl_scram_verify_server(s, (const uint8_t *)sfinal,
	    strlen(sfinal), err, sizeof(err)), 0);
	/* A different signature is refused. */
	ck_assert_int_eq(ksasl_scram_verify_server(s, (const uint8_t *)
	    "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", 46, err,
	    sizeof(err)), -1);
	ck_assert_str_eq(err, "SCRAM server signature does not match: the "
	    "server does not know the password");
	ck_assert_int_eq(ksasl_scram_verify_server(s, (const uint8_t *)
	    "e=invalid-proof", 15, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "SCRAM server reported error: invalid-proof");
	ksasl_scram_free(s);
}
END_TEST

START_TEST(test_scram_rejects_hostile_server)
{
	char err[256];
	const char *m;
	size_t ml;
	struct ksasl_scram *s = ksasl_scram_new(KSASL_SCRAM_SHA_512, "a=b,c",
	    "pw", "abc", err, sizeof(err));

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(ksasl_scram_client_first(s, &m, &ml), 0);
	ck_assert_str_eq(m, "n,,n=a=3Db=2Cc,r=abc");
#define REJECT(msg, want) \
	do { \
		ck_assert_int_eq(ksasl_scram_client_final(s, \
		    (const uint8_t *)(msg), strlen(msg), &m, &ml, err, \
		    sizeof(err)), -1); \
		ck_assert_msg(strstr(err, want) != NULL, "err: %s", err); \
	} while (0)
	REJECT("r=xyzdef,s=QUJD,i=4096", "does not extend the client nonce");
	REJECT("r=abc,s=QUJD,i=4096", "does not extend the client nonce");
	REJECT("r=abcdef,s=QUJD,i=4095", "iteration count 4095 outside");
	REJECT("r=abcdef,s=QUJD,i=999999", "iteration count 999999 outside");
	REJECT("r=abcdef,s=QUJD,i=12x", "not a number");
	REJECT("r=abcdef,s=QU=D,i=4096", "salt is not valid base64");
	REJECT("r=abcdef,i=4096", "lacks r=, s= or i=");
	REJECT("m=ext,r=abcdef,s=QUJD,i=4096", "mandatory extension");
#undef REJECT
	/* verify before final */
	ck_assert_int_eq(ksasl_scram_verify_server(s, (const uint8_t *)"v=QUJD",
	    6, err, sizeof(err)), -1);
	ksasl_scram_free(s);
	ck_assert_ptr_null(ksasl_scram_new(KSASL_PLAIN, "u", "p", NULL, err,
	    sizeof(err)));
}
END_TEST

START_TEST(test_config_properties)
{
	struct kconn_config cfg;
	char err[256];

	kconn_config_init(&cfg);
	ck_assert_int_eq(kconn_config_set(&cfg, "security.protocol", "SSL", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(cfg.security, KCONN_SEC_SSL);
	ck_assert_int_eq(kconn_config_set(&cfg, "security.protocol", "tls", err,
	    sizeof(err)), -1);
	ck_assert_str_eq(err, "security.protocol: \"tls\" is not one of "
	    "plaintext, ssl, sasl_plaintext, sasl_ssl");
	ck_assert_int_eq(kconn_config_set(&cfg, "linger.ms", "5", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(kconn_config_set(&cfg, "socket.timeout.ms", "-4", err,
	    sizeof(err)), -1);
	ck_assert_int_eq(kconn_config_set(&cfg,
	    "ssl.endpoint.identification.algorithm", "none", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(cfg.ssl_verify_hostname, 0);
	ck_assert_int_eq(kconn_config_set(&cfg, "ssl.ca.location",
	    "/nonexistent/ca.pem", err, sizeof(err)), 0);
	ck_assert_int_eq(kconn_config_prepare(&cfg, err, sizeof(err)), -1);
	ck_assert_msg(strncmp(err, "ssl.ca.location /nonexistent/ca.pem: ",
	    37) == 0, "err: %s", err);
	kconn_config_fini(&cfg);

	kconn_config_init(&cfg);
	ck_assert_int_eq(kconn_config_set(&cfg, "security.protocol",
	    "sasl_plaintext", err, sizeof(err)), 0);
	ck_assert_int_eq(kconn_config_prepare(&cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "security.protocol sasl_plaintext needs "
	    "sasl.username and sasl.password");
	kconn_config_fini(&cfg);
}
END_TEST

static Suite *kconn_suite(void)
{
	Suite *s = suite_create("kconn");
	TCase *tc = tcase_create("fake-broker");
	TCase *ts = tcase_create("sasl");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pipeline_in_order);
	tcase_add_test(tc, test_pipeline_many);
	tcase_add_test(tc, test_send_lent);
	tcase_add_test(tc, test_send_lent_dropped);
	tcase_add_test(tc, test_apiversions_mock_quirk);
	tcase_add_test(tc, test_apiversions_kip511);
	tcase_add_test(tc, test_out_of_order_is_protocol_error);
	tcase_add_test(tc, test_close_mid_response);
	tcase_add_test(tc, test_request_timeout);
	tcase_add_test(tc, test_request_timeout_keeps_connection);
	tcase_add_test(tc, test_request_timeout_keep_then_dead);
	tcase_add_test(tc, test_request_timeout_keep_free_in_callback);
	tcase_add_test(tc, test_handshake_timeout);
	tcase_add_test(tc, test_oversized_frame);
	tcase_add_test(tc, test_large_frames);
	tcase_add_test(tc, test_request_timeout_mid_large_answer);
	tcase_add_test(tc, test_large_frame_cut);
	tcase_add_test(tc, test_connection_refused);
	tcase_add_test(tc, test_plaintext_to_tls_listener);
	tcase_add_test(tc, test_free_inside_callback);
	tcase_add_test(tc, test_limits_and_no_response);
	tcase_add_test(tc, test_config_properties);
	suite_add_tcase(s, tc);
	tcase_set_timeout(ts, 60);
	tcase_add_test(ts, test_scram_rfc7677_vector);
	tcase_add_test(ts, test_scram_rejects_hostile_server);
	tcase_add_test(ts, test_sasl_plain);
	tcase_add_test(ts, test_sasl_plain_refused);
	tcase_add_test(ts, test_sasl_scram_end_to_end);
	tcase_add_test(ts, test_sasl_unknown_mechanism);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kconn_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
