/*
 * fuzz_mlogk: libFuzzer harness for what the replicated metadata log
 * (lib/mlog_kafka) reads from the broker: a Fetch's records blob walked
 * batch by batch (lib/batch), each uncompressed batch's records walked by
 * mlog_kafka_decode_records(), and each record value checked as one mlog
 * frame (mlog_scan), as replay does.
 *
 * Promises checked for any input:
 *   - every record handed out lies inside its batch, with offset
 *     base + its index (a record with another delta is malformed);
 *   - the values that are one intact frame, encoded again as a batch
 *     (mlog_kafka_encode_batch), pass the broker's produce checks
 *     (batch_validate_produce) and decode to the same values;
 *   - the input itself and every record value, read as a follower's
 *     request (mlog_kafka_decode_request, what the writer runs on the
 *     request topic) or a REPLY payload (mlog_kafka_decode_reply): an
 *     accepted request's fields and frames lie inside it, its frames are
 *     intact state records, and encoding the fields again gives the same
 *     bytes; the same round trip for a reply.
 *
 * Built like fuzz_mlog: a replay program over test/fuzz/corpus/mlogk under
 * `make check`, and with --enable-fuzzers a libFuzzer binary.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "compat.h"
#include "mlog.h"
#include "mlog_kafka.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_mlogk: %s:%d: promise broken: %s\n", __FILE__, \
	    __LINE__, #cond); \
	abort(); } } while (0)

#define MAX_VALUES 4096

struct walk {
	const struct batch *b;
	int n;
	uint8_t *frames;        /* the intact frames, back to back */
	size_t flen;
	int nframes;
};

static int count_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	(void)arg;
	(void)type;
	(void)p;
	(void)len;
	(void)off;
	return 0;
}

static int has_nul(const char *p, size_t n)
{
	return n > 0 && memchr(p, '\0', n) != NULL;
}

static void request_promises(const uint8_t *v, size_t len)
{
	struct mlog_kafka_req q;
	struct mlog_kafka_reply rep;
	char err[256], *m, *i;
	uint8_t *enc;
	size_t elen;

	if (mlog_kafka_decode_request(v, len, MLOG_MAX_RECORD_DEFAULT, &q, err,
	    sizeof(err)) == 0) {
		CHECK(q.nframes >= 1);
		CHECK(q.frames >= v && q.frames + q.frames_len == v + len);
		CHECK((const uint8_t *)q.member_id >= v &&
		    (const uint8_t *)q.member_id + q.member_len <= q.frames);
		CHECK((const uint8_t *)q.instance_id >= v &&
		    (const uint8_t *)q.instance_id + q.instance_len <= q.frames);
		if (!has_nul(q.member_id, q.member_len) &&
		    !has_nul(q.instance_id, q.instance_len)) {
			m = strndup(q.member_id, q.member_len);
			i = strndup(q.instance_id, q.instance_len);
			CHECK(m != NULL && i != NULL);
			enc = mlog_kafka_encode_request(q.id, q.generation, m, i,
			    q.frames, q.frames_len, &elen, err, sizeof(err));
			CHECK(enc != NULL && elen == len &&
			    memcmp(enc, v, len) == 0);
			free(enc);
			free(m);
			free(i);
		}
	} else {
		CHECK(err[0] != '\0');
	}
	if (mlog_kafka_decode_reply(v, len, &rep, err, sizeof(err)) == 0) {
		CHECK((const uint8_t *)rep.msg + rep.msg_len == v + len);
		if (!has_nul(rep.instance_id, rep.instance_len) &&
		    !has_nul(rep.msg, rep.msg_len) &&
		    rep.msg_len <= MLOG_KAFKA_REPLY_MSG_MAX) {
			m = strndup(rep.msg, rep.msg_len);
			i = strndup(rep.instance_id, rep.instance_len);
			CHECK(m != NULL && i != NULL);
			enc = mlog_kafka_encode_reply(i, rep.id, rep.req_offset,
			    rep.error, m, &elen);
			CHECK(enc != NULL && elen == len &&
			    memcmp(enc, v, len) == 0);
			free(enc);
			free(m);
			free(i);
		}
	}
}

static int on_rec(void *arg, const struct mlog_kafka_rec *r)
{
	struct walk *w = arg;
	struct mlog_scan_result res;

	CHECK(r->value >= w->b->records);
	CHECK(r->value + r->value_len <= w->b->records + w->b->records_len);
	CHECK(r->offset == w->b->base_offset + w->n);
	w->n++;
	request_promises(r->value, r->value_len);
	mlog_scan(r->value, r->value_len, MLOG_MAX_RECORD_DEFAULT, count_frame,
	    NULL, &res);
	if (res.end == MLOG_SCAN_CLEAN && res.nrec == 1 &&
	    w->nframes < MAX_VALUES) {
		memcpy(w->frames + w->flen, r->value, r->value_len);
		w->flen += r->value_len;
		w->nframes++;
	}
	return 0;
}

struct again {
	const uint8_t *frames;
	size_t off;
	int n;
};

static int on_again(void *arg, const struct mlog_kafka_rec *r)
{
	struct again *a = arg;

	CHECK(memcmp(a->frames + a->off, r->value, r->value_len) == 0);
	a->off += r->value_len;
	a->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_iter it;
	struct batch b;
	char err[256];

	request_promises(data, size);
	batch_iter_init(&it, data, size);
	while (batch_iter_next(&it, &b, err, sizeof(err)) == BATCH_OK) {
		struct walk w = { .b = &b };
		uint8_t *enc;
		size_t elen;

		if (batch_codec(&b) != BATCH_CODEC_NONE)
			continue;
		w.frames = malloc(b.records_len + 1);
		CHECK(w.frames != NULL);
		if (mlog_kafka_decode_records(b.base_offset, b.records,
		    b.records_len, b.record_count, on_rec, &w, err,
		    sizeof(err)) == 0)
			CHECK(w.n == b.record_count || b.record_count < 0);
		if (w.nframes > 0) {
			struct batch e;
			struct again a = { .frames = w.frames };

			enc = mlog_kafka_encode_batch(w.frames, w.flen, 0, 7, 1, 0,
			    0, &elen, err, sizeof(err));
			CHECK(enc != NULL);
			CHECK(batch_validate_produce(enc, elen, 64u << 20, err,
			    sizeof(err)) == 0);
			CHECK(batch_parse(enc, elen, &e, err, sizeof(err)) ==
			    BATCH_OK);
			CHECK(mlog_kafka_decode_records(0, e.records,
			    e.records_len, e.record_count, on_again, &a, err,
			    sizeof(err)) == 0);
			CHECK(a.n == w.nframes && a.off == w.flen);
			free(enc);
		}
		free(w.frames);
	}
	return 0;
}

const char fuzz_corpus[] = "mlogk";
