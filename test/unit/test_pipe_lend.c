/*
 * Unit tests for daemon/pipeline/lend.c: Produce batches sent by reference.
 *
 * A batch lies in a Fetch answer's buffer (a pin) and is lent to a
 * request through kconn_send_lent(), as pipeline/copy.c's produce_request()
 * does.  While that request is not written yet, the batch is re-sent: its
 * header is rewritten (pbatch_rewrite(), what prepare_head() calls: a new
 * producer epoch after a timeout, say) and it goes out again.  The fake
 * broker (test/lib/kfake) then reads both requests: the first must carry the
 * batch's original bytes, the second the rewritten ones, and every loan
 * and pin must be released with the bytes counted back to where they
 * started.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"
#include "kconn.h"
#include "kfake.h"
#include "kproto.h"
#include "pipe_int.h"
#include "testvarint.h"

/* ---- a record batch, byte for byte ----------------------------------- */

#define NRECS 40
#define VALLEN 120
#define PAD 16         /* answer bytes before and after the batch */

/* A v2 batch of NRECS records (no key, VALLEN-byte values) at base offset
 * 1000, no producer id, a valid CRC; returns its length. */
static size_t build_batch(uint8_t *out, size_t cap)
{
	size_t n = 61;

	for (int i = 0; i < NRECS; i++) {
		uint8_t body[VALLEN + 32];
		size_t m = 0;

		body[m++] = 0;                         /* attributes */
		m += put_varint(body + m, i);          /* timestamp delta */
		m += put_varint(body + m, i);          /* offset delta */
		m += put_varint(body + m, -1);         /* null key */
		m += put_varint(body + m, VALLEN);
		for (int j = 0; j < VALLEN; j++)
			body[m++] = (uint8_t)(i * 31 + j);
		m += put_varint(body + m, 0);          /* headers */
		ck_assert_uint_le(n + m + 5, cap);
		n += put_varint(out + n, (int64_t)m);
		memcpy(out + n, body, m);
		n += m;
	}
	be64_store(out, 1000);                         /* base offset */
	be32_store(out + 8, (uint32_t)(n - 12));       /* batch length */
	be32_store(out + 12, 5);                       /* leader epoch */
	out[16] = 2;                                   /* magic */
	be16_store(out + 21, 0);                       /* attributes */
	be32_store(out + 23, NRECS - 1);               /* last offset delta */
	be64_store(out + 27, 1700000000000ull);        /* base timestamp */
	be64_store(out + 35, 1700000000000ull + NRECS - 1);
	be64_store(out + 43, (uint64_t)-1);            /* producer id */
	be16_store(out + 51, (uint16_t)-1);            /* producer epoch */
	be32_store(out + 53, (uint32_t)-1);            /* base sequence */
	be32_store(out + 57, NRECS);
	be32_store(out + 17, crc32c(0, out + 21, n - 21));
	return n;
}

/* ---- the fake broker: keeps each Produce body ------------------------ */

#define MAXREQ 4

struct fake {
	struct kfake k;
	int answer_av;               /* answer ApiVersions (else never READY) */
	int nprod;                   /* Produce requests read */
	int32_t tags[MAXREQ];
	uint8_t *recs[MAXREQ];       /* each one's records field */
	size_t lens[MAXREQ];
};

static void fake_request(struct kfake *k, int16_t key, int16_t version,
    int32_t corr, struct kr *r, void *arg)
{
	struct fake *f = arg;
	struct kbytes b;

	if (key == KP_API_API_VERSIONS) {
		const int16_t keys[][3] = { { 0, 0, 9 }, { 18, 0, 3 } };

		if (f->answer_av)
			kfake_apiversions(k, corr, version, keys, ARRAY_SIZE(keys));
		return;
	}
	ck_assert_int_eq(key, KP_API_PRODUCE);
	ck_assert_int_lt(f->nprod, MAXREQ);
	f->tags[f->nprod] = kr_i32(r);
	b = kr_bytes(r);
	ck_assert_int_eq(r->err, 0);
	ck_assert_int_ge(b.len, 0);
	f->recs[f->nprod] = malloc((size_t)b.len);
	ck_assert_ptr_nonnull(f->recs[f->nprod]);
	memcpy(f->recs[f->nprod], b.p, (size_t)b.len);
	f->lens[f->nprod] = (size_t)b.len;
	f->nprod++;
	kfake_reply(k, corr, 0, "OK", 2);
	(void)version;
}

/* ---- sending: a tag and the batch, the batch lent --------------------- */

struct msg {
	int32_t tag;
	const uint8_t *p;
	size_t n;
};

static int msg_encode(struct kw *w, int16_t version, const void *arg)
{
	const struct msg *m = arg;

	(void)version;
	kw_i32(w, m->tag);
	kw_bytes(w, (struct kbytes){ m->p, (int32_t)m->n });
	return 0;
}

struct lender {
	struct pipeline *pl;
	struct pbatch *b;
	int calls;
};

static struct kconn_loan *lend(void *arg, const uint8_t *p, size_t n)
{
	struct lender *ld = arg;

	ld->calls++;
	return pl_lend_batch(ld->pl, ld->b, p, n);
}

static int g_answers;

static void resp_cb(struct kconn *c, int err, const char *errstr,
    struct kr *body, void *arg)
{
	(void)c;
	(void)errstr;
	(void)body;
	(void)arg;
	ck_assert_msg(err == KCONN_E_OK || err == KCONN_E_CLOSED,
	    "answer: %d %s", err, errstr ? errstr : "");
	g_answers++;
}

static void ev_cb(struct kconn *c, int event, int err, const char *errstr,
    void *arg)
{
	(void)c;
	(void)event;
	(void)err;
	(void)errstr;
	(void)arg;
}

static void send_lent(struct kconn *c, struct pipeline *pl, struct pbatch *q,
    int32_t tag)
{
	struct msg m = { tag, q->buf, q->len };
	struct lender st = { pl, q, 0 };
	struct kconn_lender ld = { 1024, lend, &st };
	char err[256];

	ck_assert_msg(kconn_send_lent(c, KP_API_PRODUCE, 3, msg_encode, &m, &ld,
	    0, 0, resp_cb, NULL, err, sizeof(err)) == 0,
	    "kconn_send_lent: %s", err);
	ck_assert_int_eq(st.calls, 1);
	ck_assert_ptr_nonnull(q->loan); /* lent, not copied */
}

/* The environment: a pipeline (only its loan bookkeeping), a batch in a
 * Fetch answer's buffer, a connection to the fake broker. */
struct env {
	struct event_base *base;
	struct fake fake;
	struct kconn_config cfg;
	struct kconn *c;
	struct pipeline *pl;
	struct pbatch *q;
	uint8_t orig[8192];
	size_t len;
};

static void env_start(struct env *e, int answer_av)
{
	struct pbuf_pin *pin;
	char err[256];

	memset(e, 0, sizeof(*e));
	g_answers = 0;
	e->base = event_base_new();
	ck_assert_ptr_nonnull(e->base);
	e->fake.answer_av = answer_av;
	kfake_start(&e->fake.k, e->base, fake_request, &e->fake);
	kconn_config_init(&e->cfg);
	ck_assert_int_eq(kconn_config_prepare(&e->cfg, err, sizeof(err)), 0);
	e->c = kconn_new(e->base, NULL, &e->cfg, "127.0.0.1", e->fake.k.port,
	    ev_cb, NULL, err, sizeof(err));
	ck_assert_msg(e->c != NULL, "kconn_new: %s", err);

	e->pl = calloc(1, sizeof(*e->pl));
	ck_assert_ptr_nonnull(e->pl);
	TAILQ_INIT(&e->pl->loans);
	e->len = build_batch(e->orig, sizeof(e->orig));
	ck_assert_uint_ge(e->len, BATCH_FIXUP_MIN_LEN);
	/* The answer's buffer: the batch between other bytes, which count
	 * in pin_extra as intake counts them. */
	pin = calloc(1, sizeof(*pin));
	ck_assert_ptr_nonnull(pin);
	pin->size = e->len + 2 * PAD;
	pin->buf = malloc(pin->size);
	ck_assert_ptr_nonnull(pin->buf);
	memset(pin->buf, 0xee, pin->size);
	memcpy(pin->buf + PAD, e->orig, e->len);
	pin->refs = 1;
	pin->extra = &e->pl->pin_extra;
	e->pl->pin_extra = 2 * PAD;
	e->q = calloc(1, sizeof(*e->q));
	ck_assert_ptr_nonnull(e->q);
	e->q->buf = pin->buf + PAD;
	e->q->pin = pin;
	e->q->len = e->len;
}

static void env_stop(struct env *e)
{
	for (int i = 0; i < e->fake.nprod; i++)
		free(e->fake.recs[i]);
	if (e->c != NULL)
		kconn_free(e->c);
	event_base_loop(e->base, EVLOOP_NONBLOCK);
	kfake_stop(&e->fake.k);
	kconn_config_fini(&e->cfg);
	event_base_free(e->base);
	free(e->pl);
}

/* The header prepare_head() writes: a producer identity, offset 0. */
static void rewrite(struct pbatch *q)
{
	struct batch b;
	struct batch_rewrite rw;
	char err[256];

	ck_assert_int_eq(batch_parse(q->buf, q->len, &b, err, sizeof(err)),
	    BATCH_OK);
	memset(&rw, 0, sizeof(rw));
	rw.flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN;
	rw.base_offset = 0;
	rw.producer_id = 4242;
	rw.producer_epoch = 7;
	rw.base_sequence = 100;
	ck_assert_msg(pbatch_rewrite(q, &b, &rw, err, sizeof(err)) == 0,
	    "pbatch_rewrite: %s", err);
}

/* recs is the original batch with the rewritten header, its CRC valid. */
static void check_rewritten(const uint8_t *orig, const uint8_t *recs,
    size_t len)
{
	struct batch b;
	char err[256];

	ck_assert_int_eq(batch_parse(recs, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_msg(batch_verify_crc(&b, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(b.base_offset, 0);
	ck_assert_int_eq(batch_producer_id(&b), 4242);
	ck_assert_int_eq(batch_producer_epoch(&b), 7);
	ck_assert_int_eq(batch_base_sequence(&b), 100);
	ck_assert_int_eq(batch_record_count(&b), NRECS);
	ck_assert_mem_eq(recs + 61, orig + 61, len - 61);
}

/*
 * The batch is lent to a first request that is not written (queued until
 * the connection's handshake), then rewritten: the first request goes out
 * with the original bytes; the batch, sent again, with the new header;
 * once both are written no loan is left and the pins' bytes are counted
 * back to what they were.
 */
START_TEST(test_rewrite_while_lent)
{
	struct env e;
	struct pbuf_pin *answer;

	env_start(&e, 1);
	answer = e.q->pin;
	send_lent(e.c, e.pl, e.q, 1);
	ck_assert_uint_eq(e.pl->lent, e.len);
	ck_assert_int_eq(answer->refs, 2); /* the batch and its loan */

	rewrite(e.q);
	check_rewritten(e.orig, e.q->buf, e.q->len);

	/* What the first request put on the wire. */
	ck_assert(kfake_run_until(e.base, &g_answers, 1));
	ck_assert_int_eq(e.fake.nprod, 1);
	ck_assert_int_eq(e.fake.tags[0], 1);
	ck_assert_uint_eq(e.fake.lens[0], e.len);
	ck_assert_msg(memcmp(e.fake.recs[0], e.orig, e.len) == 0,
	    "the first request's batch is not the one it was sent with "
	    "(producer id %lld epoch %d in its header)",
	    (long long)be64_load(e.fake.recs[0] + 43),
	    (int16_t)be16_load(e.fake.recs[0] + 51));

	/* The batch has a copy of its own; the answer's buffer went with
	 * the first request's loan once written. */
	ck_assert_ptr_null(e.q->loan);
	ck_assert_ptr_null(e.q->pin);
	ck_assert_uint_eq(e.pl->lent, 0);
	ck_assert_uint_eq(e.pl->pin_extra, 0);

	send_lent(e.c, e.pl, e.q, 2);
	ck_assert_uint_eq(e.pl->lent, e.len);
	ck_assert(kfake_run_until(e.base, &g_answers, 2));
	ck_assert_int_eq(e.fake.nprod, 2);
	ck_assert_int_eq(e.fake.tags[1], 2);
	ck_assert_uint_eq(e.fake.lens[1], e.len);
	check_rewritten(e.orig, e.fake.recs[1], e.fake.lens[1]);

	/* Written: every loan released. */
	ck_assert_uint_eq(e.pl->lent, 0);
	ck_assert(TAILQ_EMPTY(&e.pl->loans));
	ck_assert_ptr_null(e.q->loan);
	ck_assert_uint_eq(e.pl->pin_extra, 0);
	pbatch_free(e.q);
	ck_assert_uint_eq(e.pl->pin_extra, 0);
	env_stop(&e);
}
END_TEST

/*
 * Three sends queued unwritten, the batch rewritten between them (the
 * second send's copy is itself lent when the next rewrite comes): each
 * request carries the bytes it was sent with.
 */
START_TEST(test_rewrite_twice)
{
	struct env e;
	uint8_t second[8192];

	env_start(&e, 1);
	send_lent(e.c, e.pl, e.q, 1);
	rewrite(e.q);
	memcpy(second, e.q->buf, e.q->len);
	send_lent(e.c, e.pl, e.q, 2);
	/* The same header again (an answer lost, the batch re-sent), then a
	 * new epoch. */
	{
		struct batch b;
		struct batch_rewrite rw;
		char err[256];

		ck_assert_int_eq(batch_parse(e.q->buf, e.q->len, &b, err,
		    sizeof(err)), BATCH_OK);
		memset(&rw, 0, sizeof(rw));
		rw.flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN;
		rw.producer_id = 4242;
		rw.producer_epoch = 8;
		rw.base_sequence = 0;
		ck_assert_int_eq(pbatch_rewrite(e.q, &b, &rw, err, sizeof(err)), 0);
	}
	send_lent(e.c, e.pl, e.q, 3);
	ck_assert_uint_eq(e.pl->lent, 3 * e.len);

	ck_assert(kfake_run_until(e.base, &g_answers, 3));
	ck_assert_int_eq(e.fake.nprod, 3);
	ck_assert_mem_eq(e.fake.recs[0], e.orig, e.len);
	ck_assert_mem_eq(e.fake.recs[1], second, e.len);
	ck_assert_int_eq(be16_load(e.fake.recs[2] + 51), 8);
	ck_assert_int_eq(be32_load(e.fake.recs[2] + 53), 0);
	ck_assert_mem_eq(e.fake.recs[2] + 61, e.orig + 61, e.len - 61);
	ck_assert_uint_eq(e.pl->lent, 0);
	ck_assert_uint_eq(e.pl->pin_extra, 0);
	pbatch_free(e.q);
	ck_assert_uint_eq(e.pl->pin_extra, 0);
	env_stop(&e);
}
END_TEST

/*
 * A batch freed (its partition lost, say) while its bytes are lent to a
 * request that never goes out: the loan keeps the answer's buffer, counted
 * in pin_extra, until the connection drops the request; then all is
 * freed and counted back.
 */
START_TEST(test_free_while_lent)
{
	struct env e;

	env_start(&e, 0); /* never READY: the request stays queued */
	send_lent(e.c, e.pl, e.q, 1);
	pbatch_free(e.q);
	e.q = NULL;
	ck_assert_uint_eq(e.pl->pin_extra, 2 * PAD + e.len);
	ck_assert_uint_eq(e.pl->lent, e.len);
	kconn_free(e.c);
	e.c = NULL;
	event_base_loop(e.base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(g_answers, 1); /* failed, closed */
	ck_assert_uint_eq(e.pl->lent, 0);
	ck_assert(TAILQ_EMPTY(&e.pl->loans));
	ck_assert_uint_eq(e.pl->pin_extra, 0);
	env_stop(&e);
}
END_TEST

static Suite *lend_suite(void)
{
	Suite *s = suite_create("pipe_lend");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_rewrite_while_lent);
	tcase_add_test(tc, test_rewrite_twice);
	tcase_add_test(tc, test_free_while_lent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lend_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
