/*
 * Unit tests for lib/batch: batches are built by hand here (records with
 * varint fields, the header with a CRC from the independent software
 * CRC-32C), then parsed, verified, rewritten, validated and re-encoded.
 * The last test cross-checks the parser against batches a real librdkafka
 * producer wrote into a mock cluster, in every codec, fetched raw.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"
#include "xlate.h"
#include "testvarint.h"

/* ---- a small independent batch builder ------------------------------- */

struct trec {
	int64_t ts_delta;
	int32_t off_delta;
	const char *key;   /* NULL = null key */
	const char *value; /* NULL = null value */
	int nh;
	const char *hk[2];
	const char *hv[2]; /* NULL = null header value */
};

struct thdr {
	int64_t base;
	int32_t epoch;
	uint16_t attrs;
	int32_t lod;
	int64_t bts, mts, pid;
	int16_t pep;
	int32_t seq;
	int32_t count;
};

static size_t t_bytes(uint8_t *p, const char *s)
{
	size_t n;

	if (s == NULL)
		return put_varint(p, -1);
	n = put_varint(p, (int64_t)strlen(s));
	memcpy(p + n, s, strlen(s));
	return n + strlen(s);
}

/* One record with the given offset delta. */
static size_t t_record(uint8_t *out, const struct trec *r, int32_t delta)
{
	uint8_t body[1024];
	size_t n = 0, l;

	body[n++] = 0; /* attributes */
	n += put_varint(body + n, r->ts_delta);
	n += put_varint(body + n, delta);
	n += t_bytes(body + n, r->key);
	n += t_bytes(body + n, r->value);
	n += put_varint(body + n, r->nh);
	for (int i = 0; i < r->nh; i++) {
		n += t_bytes(body + n, r->hk[i]);
		n += t_bytes(body + n, r->hv[i]);
	}
	l = put_varint(out, (int64_t)n);
	memcpy(out + l, body, n);
	return l + n;
}

/* Records with their own deltas, or 0..n-1 if contiguous. */
static size_t t_records(uint8_t *out, const struct trec *recs, int n, int contiguous)
{
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += t_record(out + len, &recs[i], contiguous ? i : recs[i].off_delta);
	return len;
}

static size_t t_batch(uint8_t *out, const struct thdr *h, const uint8_t *body, size_t blen)
{
	size_t len = BATCH_HEADER_LEN + blen;

	be64_store(out, (uint64_t)h->base);
	be32_store(out + 8, (uint32_t)(len - 12));
	be32_store(out + 12, (uint32_t)h->epoch);
	out[16] = 2;
	be16_store(out + 21, h->attrs);
	be32_store(out + 23, (uint32_t)h->lod);
	be64_store(out + 27, (uint64_t)h->bts);
	be64_store(out + 35, (uint64_t)h->mts);
	be64_store(out + 43, (uint64_t)h->pid);
	be16_store(out + 51, (uint16_t)h->pep);
	be32_store(out + 53, (uint32_t)h->seq);
	be32_store(out + 57, (uint32_t)h->count);
	memcpy(out + BATCH_HEADER_LEN, body, blen);
	be32_store(out + 17, crc32c_sw(0, out + 21, len - 21));
	return len;
}

static const struct trec recs4[] = {
	{ 0, 0, "k0", "value zero", 0, { NULL }, { NULL } },
	{ 5, 2, NULL, "tombstone? no: null key", 1, { "h" }, { "v" } },
	{ 9, 3, "k3", NULL, 2, { "a", "b" }, { NULL, "bee" } },
	{ 300, 7, "k7", "the last one, timestamp delta above one varint byte", 0, { NULL }, { NULL } },
};

static struct thdr hdr_default(void)
{
	struct thdr h = { .base = 1000, .epoch = 7, .attrs = 0, .lod = 3,
		.bts = 1700000000000, .mts = 1700000000300, .pid = 4242, .pep = 3,
		.seq = 17, .count = 4 };
	return h;
}

/* The default header with BaseOffset 0, as a client sends it. */
static struct thdr vhdr(void)
{
	struct thdr h = hdr_default();

	h.base = 0;
	return h;
}

/* A contiguous 4-record batch with the given attributes; returns its length. */
static size_t t_simple(uint8_t *out, uint16_t attrs)
{
	uint8_t body[2048];
	struct thdr h = hdr_default();
	size_t blen = t_records(body, recs4, 4, 1);

	h.attrs = attrs;
	return t_batch(out, &h, body, blen);
}

/* Copies into an exact-size heap buffer so ASan sees any over-read. */
static uint8_t *exact(const uint8_t *p, size_t len)
{
	uint8_t *q = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(q);
	memcpy(q, p, len);
	return q;
}

/* ---- parse, accessors, CRC ------------------------------------------- */

START_TEST(test_parse_every_attribute)
{
	/* codec 0..4 x timestamp type x transactional x control x delete horizon */
	for (unsigned a = 0; a < 5 * 16; a++) {
		uint16_t attrs = (uint16_t)((a % 5) | ((a / 5) << 3));
		uint8_t buf[4096];
		char err[256];
		struct batch b;
		size_t len = t_simple(buf, attrs);

		ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
		ck_assert_ptr_eq(b.p, buf);
		ck_assert_uint_eq(b.len, len);
		ck_assert_int_eq(b.base_offset, 1000);
		ck_assert_int_eq(b.batch_length, (int32_t)len - 12);
		ck_assert_int_eq(batch_leader_epoch(&b), 7);
		ck_assert_int_eq(b.magic, 2);
		ck_assert_uint_eq(b.crc, crc32c_sw(0, buf + 21, len - 21));
		ck_assert_uint_eq(b.attributes, attrs);
		ck_assert_int_eq(batch_codec(&b), a % 5);
		ck_assert_int_eq(batch_timestamp_type(&b), (attrs & 8) ? 1 : 0);
		ck_assert_int_eq(batch_is_transactional(&b), (attrs & 0x10) != 0);
		ck_assert_int_eq(batch_is_control(&b), (attrs & 0x20) != 0);
		ck_assert_int_eq(batch_last_offset_delta(&b), 3);
		ck_assert_int_eq(b.base_timestamp, 1700000000000);
		ck_assert_int_eq(b.max_timestamp, 1700000000300);
		ck_assert_int_eq(batch_producer_id(&b), 4242);
		ck_assert_int_eq(batch_has_producer_id(&b), 1);
		ck_assert_int_eq(batch_producer_epoch(&b), 3);
		ck_assert_int_eq(batch_base_sequence(&b), 17);
		ck_assert_int_eq(batch_record_count(&b), 4);
		ck_assert_int_eq(batch_last_offset(&b), 1003);
		ck_assert_int_eq(batch_next_offset(&b), 1004);
		ck_assert_int_eq(batch_is_empty(&b), 0);
		ck_assert_ptr_eq(b.records, buf + 61);
		ck_assert_uint_eq(b.records_len, len - 61);
		ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), 0);
	}
	ck_assert_str_eq(batch_codec_name(BATCH_CODEC_ZSTD), "zstd");
	ck_assert_str_eq(batch_codec_name(2), "snappy");
	ck_assert_str_eq(batch_codec_name(6), "unknown");
}
END_TEST

START_TEST(test_golden_bytes)
{
	/*
	 * One record, key null, value "a", all header fields zero but magic and
	 * count: the bytes and CRC written out by hand.
	 */
	static const uint8_t want[] = {
		0, 0, 0, 0, 0, 0, 0, 0,	      /* base offset */
		0, 0, 0, 0x39,		      /* batch length 57 */
		0, 0, 0, 0,		      /* leader epoch */
		2,			      /* magic */
		0, 0, 0, 0,		      /* crc, filled below */
		0, 0,			      /* attributes */
		0, 0, 0, 0,		      /* last offset delta */
		0, 0, 0, 0, 0, 0, 0, 0,	      /* base timestamp */
		0, 0, 0, 0, 0, 0, 0, 0,	      /* max timestamp */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* producer id -1 */
		0xff, 0xff,		      /* epoch -1 */
		0xff, 0xff, 0xff, 0xff,	      /* sequence -1 */
		0, 0, 0, 1,		      /* count */
		0x0e, 0, 0, 0, 1, 2, 'a', 0,  /* len 7, attrs, ts 0, delta 0, key null, value "a", 0 headers */
	};
	uint8_t buf[sizeof(want)];
	struct batch b;
	char err[200];

	memcpy(buf, want, sizeof(buf));
	be32_store(buf + 17, crc32c_sw(0, buf + 21, sizeof(buf) - 21));
	ck_assert_int_eq(batch_parse(buf, sizeof(buf), &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_has_producer_id(&b), 0);
	ck_assert_int_eq(batch_validate_produce(buf, sizeof(buf), 0, err, sizeof(err)), 0);
	/* the builder agrees byte for byte */
	{
		struct trec r = { 0, 0, NULL, "a", 0, { NULL }, { NULL } };
		struct thdr h = { .pid = -1, .pep = -1, .seq = -1, .count = 1 };
		uint8_t body[64], mine[128];
		size_t blen = t_records(body, &r, 1, 1);

		ck_assert_uint_eq(t_batch(mine, &h, body, blen), sizeof(buf));
		ck_assert_mem_eq(mine, buf, sizeof(buf));
	}
}
END_TEST

START_TEST(test_crc_flip_every_byte)
{
	uint8_t buf[4096];
	size_t len = t_simple(buf, 0);
	char err[256], want[256];
	struct batch b;

	for (size_t i = 0; i < len; i++) {
		int rc;

		buf[i] ^= 0x01;
		rc = batch_parse(buf, len, &b, err, sizeof(err));
		if (i >= 8 && i < 12) {
			/* a changed BatchLength never passes as a good batch */
			ck_assert(rc != BATCH_OK || batch_verify_crc(&b, err, sizeof(err)) == -1);
		} else if (i == 16) {
			ck_assert_int_eq(rc, BATCH_ERROR);
			ck_assert_str_eq(err, "batch at offset 1000: magic 3, only magic 2 is supported");
		} else {
			ck_assert_int_eq(rc, BATCH_OK);
		}
		if (i < 8 || (i > 11 && i < 16)) {
			/* base offset and leader epoch are outside the CRC */
			ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), 0);
		} else if (i > 16) {
			ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), -1);
			snprintf(want, sizeof(want), "batch at offset 1000: CRC-32C mismatch (stored 0x%08x, computed 0x%08x)",
			    (unsigned)be32_load(buf + 17), (unsigned)crc32c_sw(0, buf + 21, len - 21));
			ck_assert_str_eq(err, want);
		}
		buf[i] ^= 0x01;
	}
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_magic_and_length_errors)
{
	uint8_t buf[4096], *q;
	size_t len = t_simple(buf, 0);
	char err[256];
	struct batch b;

	buf[16] = 1;
	/* the magic byte is judged as soon as it is in, before the batch is */
	q = exact(buf, 17);
	ck_assert_int_eq(batch_parse(q, 17, &b, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset 1000: magic 1, only magic 2 is supported");
	free(q);
	buf[16] = 2;
	be32_store(buf + 8, 48);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset 1000: BatchLength 48 is below the minimum 49");
	be32_store(buf + 8, 0x80000000u);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset 1000: BatchLength -2147483648 is below the minimum 49");
	be32_store(buf + 8, (uint32_t)(len - 12));
	be64_store(buf, (uint64_t)-5);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset -5: BaseOffset is negative");
	be64_store(buf, (uint64_t)INT64_MAX - 3);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset 9223372036854775804: LastOffsetDelta 3 runs past the largest offset");
	be64_store(buf, (uint64_t)INT64_MAX - 4);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_next_offset(&b), INT64_MAX);
	be64_store(buf, 1000);
	/* huge but positive: incomplete, with the size it claims */
	be32_store(buf + 8, 0x7fffffffu);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_INCOMPLETE);
	ck_assert_uint_eq(b.len, 12 + (size_t)0x7fffffff);
}
END_TEST

START_TEST(test_iterate_truncated_at_every_length)
{
	uint8_t blob[8192];
	size_t ends[3], total = 0;
	char err[256];

	/* three batches at base offsets 1000, 1004, 1008 */
	for (int i = 0; i < 3; i++) {
		size_t at = total;

		total += t_simple(blob + total, (uint16_t)i);
		be64_store(blob + at, (uint64_t)(1000 + 4 * i));
		ends[i] = total;
	}
	for (size_t cut = 0; cut <= total; cut++) {
		uint8_t *q = exact(blob, cut);
		struct batch_iter it;
		struct batch b;
		size_t whole = 0, prefix, nb;
		int rc, n = 0;

		while (whole < 3 && ends[whole] <= cut)
			whole++;
		batch_iter_init(&it, q, cut);
		while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
			ck_assert_int_eq(b.base_offset, 1000 + 4 * n);
			ck_assert_int_eq(batch_verify_crc(&b, err, sizeof(err)), 0);
			n++;
		}
		ck_assert_int_eq(n, (int)whole);
		ck_assert_uint_eq(it.pos, whole ? ends[whole - 1] : 0);
		ck_assert_int_eq(rc, it.pos == cut ? BATCH_END : BATCH_INCOMPLETE);
		ck_assert_int_eq(batch_complete_prefix(q, cut, &prefix, &nb, err, sizeof(err)), 0);
		ck_assert_uint_eq(prefix, it.pos);
		ck_assert_uint_eq(nb, whole);
		free(q);
	}
}
END_TEST

START_TEST(test_validate_truncated_at_every_length)
{
	uint8_t buf[4096];
	struct thdr h = vhdr();
	uint8_t body[2048];
	size_t len = t_batch(buf, &h, body, t_records(body, recs4, 4, 1));
	char err[512];

	ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), 0);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *q = exact(buf, cut);

		ck_assert_int_eq(batch_validate_produce(q, cut, 0, err, sizeof(err)), -1);
		if (cut == 0)
			ck_assert_str_eq(err, "one-batch rule: the records hold no batch");
		else
			ck_assert_msg(strncmp(err, "batch length: BatchLength says ", 31) == 0,
			    "cut %zu: %s", cut, err);
		free(q);
	}
	/* a BatchLength that says less than the blob: the rest is a second "batch" */
	be32_store(buf + 8, (uint32_t)(len - 12 - 7));
	ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "one-batch rule: 7 bytes follow the first batch (offset 0, 186 bytes); a Produce carries exactly one batch per partition");
}
END_TEST

START_TEST(test_helpers)
{
	uint8_t blob[8192], out[8192];
	size_t l1 = t_simple(blob, 0), l2 = t_simple(blob + l1, 1), size, outlen;
	char err[256];

	ck_assert_int_eq(batch_peek_size(blob, 5, &size, err, sizeof(err)), BATCH_INCOMPLETE);
	ck_assert_uint_eq(size, 0);
	ck_assert_int_eq(batch_peek_size(blob, 20, &size, err, sizeof(err)), BATCH_INCOMPLETE);
	ck_assert_uint_eq(size, l1);
	ck_assert_int_eq(batch_peek_size(blob, l1 + l2, &size, err, sizeof(err)), BATCH_OK);
	ck_assert_uint_eq(size, l1);
	ck_assert_int_eq(batch_copy_first(blob, l1 + l2, out, sizeof(out), &outlen, err, sizeof(err)), BATCH_OK);
	ck_assert_uint_eq(outlen, l1);
	ck_assert_mem_eq(out, blob, l1);
	ck_assert_int_eq(batch_copy_first(blob, l1 - 1, out, sizeof(out), &outlen, err, sizeof(err)), BATCH_INCOMPLETE);
	ck_assert_uint_eq(outlen, 0);
	ck_assert_int_eq(batch_copy_first(blob, l1 + l2, out, 100, &outlen, err, sizeof(err)), BATCH_ERROR);
	ck_assert_str_eq(err, "batch at offset 1000 is 193 bytes, the buffer holds 100");
	/* an error in the second batch: the prefix stops before it and says where */
	blob[l1 + 16] = 0;
	{
		size_t prefix, nb;

		ck_assert_int_eq(batch_complete_prefix(blob, l1 + l2, &prefix, &nb, err, sizeof(err)), -1);
		ck_assert_uint_eq(prefix, l1);
		ck_assert_uint_eq(nb, 1);
		snprintf((char *)out, sizeof(out),
		    "batch at offset 1000: magic 0, only magic 2 is supported (at byte %zu of %zu)", l1, l1 + l2);
		ck_assert_str_eq(err, (char *)out);
	}
}
END_TEST

/* ---- header rewrite -------------------------------------------------- */

START_TEST(test_rewrite_header)
{
	uint8_t buf[4096], out[4096];
	size_t len = t_simple(buf, BATCH_ATTR_TRANSACTIONAL | BATCH_CODEC_LZ4);
	struct batch b, o;
	char err[256];
	struct batch_rewrite rw = { .flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN | BATCH_RW_LEADER_EPOCH,
		.base_offset = 0, .producer_id = 77000, .producer_epoch = 2,
		.base_sequence = 5000, .leader_epoch = 12 };

	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_rewrite_header(&b, &rw, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(batch_parse(out, len, &o, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_verify_crc(&o, err, sizeof(err)), 0);
	ck_assert_uint_eq(o.crc, crc32c_sw(0, out + 21, len - 21));
	ck_assert_mem_eq(out + 61, buf + 61, len - 61); /* records untouched */
	ck_assert_int_eq(o.base_offset, 0);
	ck_assert_int_eq(o.producer_id, 77000);
	ck_assert_int_eq(o.producer_epoch, 2);
	ck_assert_int_eq(o.base_sequence, 5000);
	ck_assert_int_eq(o.leader_epoch, 12);
	ck_assert_int_eq(batch_is_transactional(&o), 0);
	ck_assert_int_eq(batch_codec(&o), BATCH_CODEC_LZ4);
	ck_assert_int_eq(o.last_offset_delta, b.last_offset_delta);
	ck_assert_int_eq(o.record_count, b.record_count);
	ck_assert_int_eq(o.base_timestamp, b.base_timestamp);
	ck_assert_int_eq(o.max_timestamp, b.max_timestamp);

	/* keep everything but the base offset, in place */
	rw.flags = 0;
	rw.base_offset = 555;
	ck_assert_int_eq(batch_rewrite_header(&b, &rw, buf, len, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_parse(buf, len, &o, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(o.base_offset, 555);
	ck_assert_int_eq(o.producer_id, 4242);
	ck_assert_int_eq(o.leader_epoch, 7);
	ck_assert_int_eq(batch_is_transactional(&o), 1);
	ck_assert_int_eq(batch_verify_crc(&o, err, sizeof(err)), 0);

	ck_assert_int_eq(batch_rewrite_header(&b, &rw, out, len - 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "the output holds"));
}
END_TEST

/*
 * The CRC fix-up of the rewrite equals a full recompute for random batches
 * of many sizes: the bare 61-byte header (an empty records section, the
 * 0-length tail after the header fields), small, odd, and multi-MB; every
 * combination of the rewrite flags; in place and into another buffer.  A
 * batch whose stored CRC was wrong still fails verification afterwards.
 */
START_TEST(test_rewrite_crc_fixup_equals_recompute)
{
	static const size_t bodies[] = { 0, 1, 3, 8, 63, 64, 500,
		BATCH_FIXUP_MIN_LEN - BATCH_HEADER_LEN - 1,
		BATCH_FIXUP_MIN_LEN - BATCH_HEADER_LEN, 4093, 16384,
		100003, 1 << 20, (3 << 20) + 1 };
	size_t maxlen = BATCH_HEADER_LEN + ((3 << 20) + 1);
	uint8_t *body = malloc(maxlen), *in = malloc(maxlen);
	uint8_t *a = malloc(maxlen), *f = malloc(maxlen);
	uint32_t seed = 99;
	char err[256];

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(in);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < maxlen; i++) {
		seed = seed * 1103515245u + 12345u;
		body[i] = (uint8_t)(seed >> 16);
	}
	for (size_t bi = 0; bi < sizeof(bodies) / sizeof(bodies[0]); bi++) {
		for (unsigned flags = 0; flags < 8; flags++) {
			struct thdr h = hdr_default();
			struct batch b, o;
			struct batch_rewrite rw = { .flags = flags, .base_offset = 0,
				.producer_id = 0x0102030405060708LL + (int64_t)bi,
				.producer_epoch = (int16_t)(flags * 1000 + 1),
				.base_sequence = (int32_t)(bi * 7919u + flags),
				.leader_epoch = 31 };
			size_t len;

			h.attrs = (uint16_t)(flags & 1 ? BATCH_ATTR_TRANSACTIONAL : 0);
			h.pid = -1 - (int64_t)flags;
			len = t_batch(in, &h, body + bi, bodies[bi]);
			ck_assert_int_eq(batch_parse(in, len, &b, err, sizeof(err)), BATCH_OK);
			/* into another buffer: fix-up, then full recompute */
			ck_assert_int_eq(batch_rewrite_header(&b, &rw, f, len, err, sizeof(err)), 0);
			rw.flags |= BATCH_RW_FULL_CRC;
			ck_assert_int_eq(batch_rewrite_header(&b, &rw, a, len, err, sizeof(err)), 0);
			rw.flags &= ~(unsigned)BATCH_RW_FULL_CRC;
			ck_assert_msg(memcmp(a, f, len) == 0,
			    "body %zu flags %u: fixed-up batch differs from the "
			    "recomputed one (CRC 0x%08x vs 0x%08x)", bodies[bi], flags,
			    be32_load(f + 17), be32_load(a + 17));
			ck_assert_uint_eq(be32_load(f + 17), crc32c_sw(0, f + 21, len - 21));
			ck_assert_int_eq(batch_parse(f, len, &o, err, sizeof(err)), BATCH_OK);
			ck_assert_int_eq(batch_verify_crc(&o, err, sizeof(err)), 0);
			/* in place */
			ck_assert_int_eq(batch_rewrite_header(&b, &rw, in, len, err, sizeof(err)), 0);
			ck_assert_int_eq(memcmp(in, a, len), 0);
			/* the fix-up forced at every size, the bare header too */
			len = t_batch(in, &h, body + bi, bodies[bi]);
			ck_assert_int_eq(batch_parse(in, len, &b, err, sizeof(err)), BATCH_OK);
			rw.flags |= BATCH_RW_FIXUP_CRC;
			ck_assert_int_eq(batch_rewrite_header(&b, &rw, f, len, err, sizeof(err)), 0);
			rw.flags &= ~(unsigned)BATCH_RW_FIXUP_CRC;
			ck_assert_int_eq(memcmp(f, a, len), 0);
			/* a wrong stored CRC is carried, not laundered (small
			 * batches are recomputed) */
			if (BATCH_HEADER_LEN + bodies[bi] < BATCH_FIXUP_MIN_LEN)
				continue;
			len = t_batch(in, &h, body + bi, bodies[bi]);
			in[len - 1 - (bodies[bi] / 2)] ^= 0x10;
			ck_assert_int_eq(batch_parse(in, len, &b, err, sizeof(err)), BATCH_OK);
			ck_assert_int_eq(batch_rewrite_header(&b, &rw, f, len, err, sizeof(err)), 0);
			ck_assert_int_eq(batch_parse(f, len, &o, err, sizeof(err)), BATCH_OK);
			ck_assert_int_eq(batch_verify_crc(&o, err, sizeof(err)), -1);
		}
	}
	free(body);
	free(in);
	free(a);
	free(f);
}
END_TEST

/* ---- the validator --------------------------------------------------- */

/* Builds a batch from h and the 4 records (contiguous or not) and validates it. */
static int validate_hdr(const struct thdr *h, int contiguous, char *err, size_t errlen)
{
	uint8_t body[2048], buf[4096], *q;
	size_t len = t_batch(buf, h, body, t_records(body, recs4, 4, contiguous));
	int rc;

	q = exact(buf, len);
	rc = batch_validate_produce(q, len, 0, err, errlen);
	free(q);
	return rc;
}

START_TEST(test_validator_rules)
{
	uint8_t buf[8192];
	char err[512];
	struct thdr h = vhdr();
	size_t len;

	/* the good batch, in every codec for the header checks */
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), 0);

	ck_assert_int_eq(batch_validate_produce(buf, 0, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "one-batch rule: the records hold no batch");

	len = t_simple(buf, 0);
	ck_assert_int_eq(batch_validate_produce(buf, len - 1, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch length: BatchLength says 193 bytes, the records hold 192");
	ck_assert_uint_eq(len, 193);

	len += t_simple(buf + len, 0);
	ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "one-batch rule: 193 bytes follow the first batch (offset 1000, 193 bytes); a Produce carries exactly one batch per partition");

	len = t_simple(buf, 0);
	buf[100] ^= 0x40;
	ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "corrupt record: batch at offset 1000: CRC-32C mismatch (stored 0x"));
	buf[100] ^= 0x40;

	buf[16] = 1;
	ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch header: batch at offset 1000: magic 1, only magic 2 is supported");
	buf[16] = 2;

	ck_assert_int_eq(batch_validate_produce(buf, len, 192, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "record too large: batch at offset 1000 is 193 bytes, the limit is 192");
	ck_assert_int_eq(batch_validate_produce(buf, len, 193, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "base offset: BaseOffset 1000, a client batch must carry 0 (Kafka 4 refuses others)");
	be64_store(buf, 0); /* outside the CRC */
	ck_assert_int_eq(batch_validate_produce(buf, len, 193, err, sizeof(err)), 0);
	be64_store(buf, 1000);

	h.attrs = 6;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch at offset 0: unknown compression type id 6");
	h = vhdr();

	h.lod = -1;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "offset range: batch has an invalid offset range [0, -1]");
	h = vhdr();

	h.count = 0;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "record count: batch at offset 0 reports 0 records, a client batch needs at least 1");
	h = vhdr();

	/* a compacted batch: 4 records over offsets 1000..1009 */
	h.lod = 9;
	ck_assert_int_eq(validate_hdr(&h, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "offset range: inconsistent batch offset range [0, 9] and count of records 4 (RecordCount must be LastOffsetDelta + 1; a compacted batch with holes needs re-encoding)");
	h = vhdr();

	h.attrs = BATCH_ATTR_CONTROL | BATCH_ATTR_TRANSACTIONAL;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "control batch: batch at offset 0 is a control batch; clients are not allowed to write control records");
	h = vhdr();

	h.seq = -1;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "sequence: invalid sequence number -1 in record batch with producerId 4242");
	h.pid = -1; /* no producer id: a negative sequence is expected */
	h.pep = -1;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), 0);
	h = vhdr();

	h.pep = -1;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "producer epoch: invalid epoch -1 in record batch with producerId 4242");
	h = vhdr();

	/* count == lod + 1 but the deltas jump: 0,2,3,7 over lod 3 */
	ck_assert_int_eq(validate_hdr(&h, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "records: batch at offset 0: record 1 has offset delta 2, a client batch needs contiguous deltas (expected 1)");

	/* records walked by the caller (batch_has_holes()) are not walked
	 * again, but the CRC still proves them unchanged */
	{
		uint8_t body[2048], tb[4096];
		size_t tl = t_batch(tb, &h, body, t_records(body, recs4, 4, 0));
		uint8_t *q = exact(tb, tl);

		ck_assert_int_eq(batch_validate_produce_flags(q, tl, 0,
		    BATCH_VP_RECORDS_WALKED, err, sizeof(err)), 0);
		ck_assert_int_eq(batch_validate_produce_flags(q, tl, 0, 0, err,
		    sizeof(err)), -1);
		q[tl - 3] ^= 0x01; /* a record's byte changed afterwards */
		ck_assert_int_eq(batch_validate_produce_flags(q, tl, 0,
		    BATCH_VP_RECORDS_WALKED, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, "corrupt record") != NULL, "%s", err);
		/* a CRC carried from intake is not recomputed (the broker
		 * checks it), the header rules still are */
		ck_assert_int_eq(batch_validate_produce_flags(q, tl, 0,
		    BATCH_VP_RECORDS_WALKED | BATCH_VP_CRC_CARRIED, err,
		    sizeof(err)), 0);
		be64_store(q, 7); /* BaseOffset */
		ck_assert_int_eq(batch_validate_produce_flags(q, tl, 0,
		    BATCH_VP_RECORDS_WALKED | BATCH_VP_CRC_CARRIED, err,
		    sizeof(err)), -1);
		ck_assert_msg(strstr(err, "base offset: BaseOffset 7") != NULL,
		    "%s", err);
		free(q);
	}

	/* count says 5, the records hold 4 */
	h.count = 5;
	h.lod = 4;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "records: batch at offset 0: RecordCount 5 but the records end after 4");
	/* count says 3: a record is left over */
	h.count = 3;
	h.lod = 2;
	ck_assert_int_eq(validate_hdr(&h, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "bytes follow the last of 3 records"));
	h = vhdr();

	/* a record whose length runs past the batch (with a valid CRC) */
	{
		uint8_t body[2048];

		t_records(body, recs4, 4, 1);
		body[0] = 0x7e; /* record length 63, but only 10 bytes of records */
		len = t_batch(buf, &h, body, 10);
		ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
		ck_assert_str_eq(err, "records: batch at offset 0: record 0: record length 63 does not fit in the 9 bytes left");
	}
	/* compressed batches: header rules only (the records are not opened) */
	for (int c = 1; c <= 4; c++) {
		h.attrs = (uint16_t)c;
		ck_assert_int_eq(validate_hdr(&h, 0, err, sizeof(err)), 0);
	}
}
END_TEST

/* batch_check_records: the inner-record rules, compressed or not. */
START_TEST(test_check_records)
{
	uint8_t body[2048], buf[4096];
	char err[512];
	struct thdr h = hdr_default();
	struct batch b;

	for (int c = 0; c <= 4; c++) {
		for (int contiguous = 0; contiguous < 2; contiguous++) {
			size_t bl = t_records(body, recs4, 4, contiguous), zl, len;
			uint8_t *z;

			h.attrs = (uint16_t)c;
			ck_assert_int_eq(batch_compress(c, 1, body, bl, 1 << 20, &z, &zl, err, sizeof(err)), 0);
			len = t_batch(buf, &h, z, zl);
			free(z);
			ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
			if (contiguous) {
				ck_assert_int_eq(batch_check_records(&b, 1 << 20, err, sizeof(err)), 0);
			} else {
				ck_assert_int_eq(batch_check_records(&b, 1 << 20, err, sizeof(err)), -1);
				ck_assert_str_eq(err, "batch at offset 1000: record 1 has offset delta 2, a client batch needs contiguous deltas (expected 1)");
			}
			/* the cap holds for the decompressed size */
			if (c != BATCH_CODEC_NONE) {
				ck_assert_int_eq(batch_check_records(&b, 16, err, sizeof(err)), -1);
				ck_assert_ptr_nonnull(strstr(err, "decompressed records exceed 16 bytes"));
			}
		}
	}
	/* garbage instead of a compressed stream names the codec */
	h.attrs = BATCH_CODEC_ZSTD;
	memset(body, 0x11, 40);
	ck_assert_int_eq(batch_parse(buf, t_batch(buf, &h, body, 40), &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_check_records(&b, 1 << 20, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "batch at offset 1000: zstd: "));
}
END_TEST

/* ---- decompression on the test side, independent of lib/batch -------- */

static size_t t_decompress(int codec, const uint8_t *in, size_t inlen, uint8_t *out, size_t cap)
{
	switch (codec) {
	case BATCH_CODEC_GZIP: {
		z_stream zs;
		size_t n;

		memset(&zs, 0, sizeof(zs));
		ck_assert_int_eq(inflateInit2(&zs, 15 + 16), Z_OK); /* gzip only */
		zs.next_in = (Bytef *)(uintptr_t)in;
		zs.avail_in = (uInt)inlen;
		zs.next_out = out;
		zs.avail_out = (uInt)cap;
		ck_assert_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
		n = zs.total_out;
		inflateEnd(&zs);
		return n;
	}
	case BATCH_CODEC_SNAPPY: {
		size_t n = 0, pos = 16;

		ck_assert_uint_ge(inlen, 16);
		ck_assert_mem_eq(in, "\x82SNAPPY\0\0\0\0\1\0\0\0\1", 16);
		while (pos < inlen) {
			size_t blen = be32_load(in + pos), m = cap - n;

			pos += 4;
			ck_assert_int_eq(snappy_uncompress((const char *)in + pos, blen, (char *)out + n, &m), SNAPPY_OK);
			n += m;
			pos += blen;
		}
		return n;
	}
	case BATCH_CODEC_LZ4: {
		LZ4F_dctx *d;
		size_t src = inlen, dst = cap, r;
		LZ4F_frameInfo_t fi;
		size_t hl = inlen;

		ck_assert(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
		/* Kafka's reader needs independent blocks */
		r = LZ4F_getFrameInfo(d, &fi, in, &hl);
		ck_assert(!LZ4F_isError(r));
		ck_assert_int_eq(fi.blockMode, LZ4F_blockIndependent);
		src = inlen - hl;
		r = LZ4F_decompress(d, out, &dst, in + hl, &src, NULL);
		ck_assert(!LZ4F_isError(r));
		ck_assert_uint_eq(r, 0);
		LZ4F_freeDecompressionContext(d);
		return dst;
	}
	case BATCH_CODEC_ZSTD: {
		size_t r = ZSTD_decompress(out, cap, in, inlen);

		ck_assert(!ZSTD_isError(r));
		return r;
	}
	default:
		memcpy(out, in, inlen);
		return inlen;
	}
}

/* ---- hole re-encoding ------------------------------------------------ */

static void check_reencode(int codec, int xerial)
{
	uint8_t holes[2048], contig[2048], buf[4096], plain[8192];
	size_t hl = t_records(holes, recs4, 4, 0), cl = t_records(contig, recs4, 4, 1);
	struct thdr h = hdr_default();
	struct batch b, o;
	struct batch_reencoded r;
	uint8_t *packed;
	size_t plen, len, n;
	char err[512];

	h.lod = 9; /* source offsets 1000, 1002, 1003, 1007 of 1000..1009 */
	h.attrs = (uint16_t)codec | BATCH_ATTR_TRANSACTIONAL;
	ck_assert_int_eq(batch_compress(codec, xerial, holes, hl, 1 << 20, &packed, &plen, err, sizeof(err)), 0);
	len = t_batch(buf, &h, packed, plen);
	free(packed);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_has_holes(&b), 1);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 500, 1 << 20, &r, err, sizeof(err)), 0);

	ck_assert_int_eq(batch_parse(r.buf, r.len, &o, err, sizeof(err)), BATCH_OK);
	ck_assert_uint_eq(o.len, r.len);
	ck_assert_int_eq(o.base_offset, 500);
	ck_assert_int_eq(o.last_offset_delta, 3);
	ck_assert_int_eq(o.record_count, 4);
	ck_assert_uint_eq(o.attributes, h.attrs); /* codec and flags kept */
	ck_assert_int_eq(o.producer_id, 4242);
	ck_assert_int_eq(o.base_sequence, 17);
	ck_assert_int_eq(o.leader_epoch, 7);
	ck_assert_int_eq(o.max_timestamp, h.mts);
	ck_assert_uint_eq(o.crc, crc32c_sw(0, r.buf + 21, r.len - 21));
	ck_assert_int_eq(batch_has_holes(&o), 0);
	/* the records are exactly the contiguous encoding of the same records */
	n = t_decompress(codec, o.records, o.records_len, plain, sizeof(plain));
	ck_assert_uint_eq(n, cl);
	ck_assert_mem_eq(plain, contig, cl);
	if (codec == BATCH_CODEC_NONE)
		ck_assert_uint_eq(r.len, 61 + cl);
	/* a broker would take it (after the producer identity is set as usual) */
	{
		struct batch_rewrite rw = { .flags = BATCH_RW_CLEAR_TXN, .base_offset = 0 };

		ck_assert_int_eq(batch_rewrite_header(&o, &rw, r.buf, r.len, err, sizeof(err)), 0);
		ck_assert_int_eq(batch_validate_produce(r.buf, r.len, 0, err, sizeof(err)), 0);
	}
	/* anchors: every jump, then the end */
	ck_assert_uint_eq(r.npairs, 4);
	ck_assert_int_eq(r.pairs[0].src, 1000);
	ck_assert_int_eq(r.pairs[0].dst, 500);
	ck_assert_int_eq(r.pairs[1].src, 1002);
	ck_assert_int_eq(r.pairs[1].dst, 501);
	ck_assert_int_eq(r.pairs[2].src, 1007);
	ck_assert_int_eq(r.pairs[2].dst, 503);
	ck_assert_int_eq(r.pairs[3].src, 1010);
	ck_assert_int_eq(r.pairs[3].dst, 504);
	ck_assert_int_eq(r.src_next, 1010);
	ck_assert_int_eq(r.dst_next, 504);
	batch_reencoded_fini(&r);
	ck_assert_ptr_null(r.buf);
}

START_TEST(test_reencode_none) { check_reencode(BATCH_CODEC_NONE, 0); }
END_TEST
START_TEST(test_reencode_gzip) { check_reencode(BATCH_CODEC_GZIP, 0); }
END_TEST
START_TEST(test_reencode_snappy) { check_reencode(BATCH_CODEC_SNAPPY, 1); }
END_TEST
START_TEST(test_reencode_lz4) { check_reencode(BATCH_CODEC_LZ4, 0); }
END_TEST
START_TEST(test_reencode_zstd) { check_reencode(BATCH_CODEC_ZSTD, 0); }
END_TEST

START_TEST(test_reencode_raw_snappy_and_big)
{
	/* raw (unframed) snappy as librdkafka writes it stays raw */
	enum { N = 3000 };
	static uint8_t body[N * 64], buf[N * 64 + 100], plain[N * 64];
	struct trec *recs = calloc(N, sizeof(*recs));
	static char vals[N][16];
	char err[512];
	struct thdr h = hdr_default();
	struct batch b, o;
	struct batch_reencoded r;
	uint8_t *packed, *back;
	size_t bl, plen, len, backlen;

	for (int i = 0; i < N; i++) {
		snprintf(vals[i], sizeof(vals[i]), "v%05d", i);
		recs[i].value = vals[i];
		recs[i].off_delta = 2 * i; /* every other offset gone */
		recs[i].ts_delta = i;
	}
	bl = t_records(body, recs, N, 0);
	for (int codec = 1; codec <= 4; codec++) {
		h.attrs = (uint16_t)codec;
		h.count = N;
		h.lod = 2 * N - 2;
		ck_assert_int_eq(batch_compress(codec, 0, body, bl, sizeof(buf), &packed, &plen, err, sizeof(err)), 0);
		len = t_batch(buf, &h, packed, plen);
		free(packed);
		ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
		ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), 0);
		ck_assert_uint_eq(r.npairs, N + 1);
		ck_assert_int_eq(r.pairs[N - 1].src, 1000 + 2 * (N - 1));
		ck_assert_int_eq(r.pairs[N - 1].dst, N - 1);
		ck_assert_int_eq(batch_parse(r.buf, r.len, &o, err, sizeof(err)), BATCH_OK);
		if (codec == BATCH_CODEC_SNAPPY)
			ck_assert_int_ne(memcmp(o.records, "\x82SNAPPY", 7), 0);
		ck_assert_int_eq(batch_decompress(codec, o.records, o.records_len, sizeof(plain), &back, &backlen, err, sizeof(err)), 0);
		ck_assert_uint_eq(backlen, t_records(plain, recs, N, 1));
		ck_assert_mem_eq(back, plain, backlen);
		free(back);
		batch_reencoded_fini(&r);
		/* a cap below the decompressed size is an error, not an allocation */
		ck_assert_int_eq(batch_reencode_contiguous(&b, 0, bl / 2, &r, err, sizeof(err)), -1);
		ck_assert_ptr_nonnull(strstr(err, "decompressed records exceed"));
		ck_assert_ptr_null(r.buf);
	}
	free(recs);
}
END_TEST

START_TEST(test_reencode_errors_and_empty)
{
	uint8_t body[2048], buf[4096];
	struct thdr h = hdr_default();
	struct batch b;
	struct batch_reencoded r;
	char err[512];
	struct trec bad[2] = { recs4[0], recs4[1] };
	size_t len;

	/* empty batch left by the cleaner: nothing to send, one anchor */
	memset(body, 0, sizeof(body));
	h.count = 0;
	h.lod = 9;
	len = t_batch(buf, &h, body, 0);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_is_empty(&b), 1);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 70, 1 << 20, &r, err, sizeof(err)), 0);
	ck_assert_ptr_null(r.buf);
	ck_assert_uint_eq(r.npairs, 1);
	ck_assert_int_eq(r.pairs[0].src, 1010);
	ck_assert_int_eq(r.pairs[0].dst, 70);
	batch_reencoded_fini(&r);

	/* deltas going backwards */
	bad[0].off_delta = 3;
	bad[1].off_delta = 1;
	h.count = 2;
	len = t_batch(buf, &h, body, t_records(body, bad, 2, 0));
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch at offset 1000: record 1 has offset delta 1 (previous 3, LastOffsetDelta 9): deltas must increase");
	/* a delta past LastOffsetDelta */
	bad[0].off_delta = 0;
	bad[1].off_delta = 10;
	len = t_batch(buf, &h, body, t_records(body, bad, 2, 0));
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch at offset 1000: record 1 has offset delta 10 (previous 0, LastOffsetDelta 9): deltas must increase");
	/* more records claimed than LastOffsetDelta allows */
	h.count = 11;
	len = t_batch(buf, &h, body, 20);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch at offset 1000: RecordCount 11 does not fit LastOffsetDelta 9");
	/* a hostile count with few bytes: refused before anything is allocated */
	h.count = 9;
	len = t_batch(buf, &h, body, 20);
	ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "batch at offset 1000: RecordCount 9 is impossible in 20 bytes of records");
	/* corrupt compressed data, every codec */
	for (int c = 1; c <= 4; c++) {
		h = hdr_default();
		h.attrs = (uint16_t)c;
		h.lod = 9;
		memset(body, 0x5a, 64);
		len = t_batch(buf, &h, body, 64);
		ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
		ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), -1);
		ck_assert_msg(strncmp(err, "batch at offset 1000: ", 22) == 0 &&
		    strstr(err, batch_codec_name(c)) != NULL, "codec %d: %s", c, err);
	}
}
END_TEST

/* ---- cross-check against librdkafka's own batches -------------------- */

/* Sends a Fetch v4 for topic/partition 0 at offset 0 and returns the records. */
static uint8_t *raw_fetch(const char *hostport, const char *topic, int64_t offset, size_t *rlen)
{
	uint8_t req[256], hdr[4], *resp;
	size_t n = 4, tl = strlen(topic), got = 0, need;
	struct sockaddr_in sa;
	int fd, port = atoi(strchr(hostport, ':') + 1);
	const uint8_t *p, *end;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	be16_store(req + n, 1), n += 2;		/* Fetch */
	be16_store(req + n, 4), n += 2;		/* v4 */
	be32_store(req + n, 99), n += 4;	/* correlation id */
	be16_store(req + n, 1), n += 2;
	req[n++] = 't';				/* client id */
	be32_store(req + n, (uint32_t)-1), n += 4; /* replica */
	be32_store(req + n, 100), n += 4;	/* max wait */
	be32_store(req + n, 1), n += 4;		/* min bytes */
	be32_store(req + n, 1 << 20), n += 4;	/* max bytes */
	req[n++] = 0;				/* isolation */
	be32_store(req + n, 1), n += 4;
	be16_store(req + n, (uint16_t)tl), n += 2;
	memcpy(req + n, topic, tl), n += tl;
	be32_store(req + n, 1), n += 4;
	be32_store(req + n, 0), n += 4;		/* partition */
	be64_store(req + n, (uint64_t)offset), n += 8;
	be32_store(req + n, 1 << 20), n += 4;	/* partition max bytes */
	be32_store(req, (uint32_t)(n - 4));
	ck_assert_int_eq(write(fd, req, n), (ssize_t)n);
	while (got < 4) {
		ssize_t r = read(fd, hdr + got, 4 - got);

		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
	need = be32_load(hdr);
	ck_assert_uint_lt(need, 1 << 22);
	resp = malloc(need);
	for (got = 0; got < need;) {
		ssize_t r = read(fd, resp + got, need - got);

		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
	close(fd);
	/* corr, throttle, [topic: name, [partition, err, hwm, lso, aborted[], records]] */
	p = resp;
	end = resp + need;
	ck_assert_int_eq(be32_load(p), 99);
	p += 8;
	ck_assert_int_eq(be32_load(p), 1);
	p += 4;
	p += 2 + be16_load(p);
	ck_assert_int_eq(be32_load(p), 1);
	p += 4 + 4;
	ck_assert_int_eq(be16_load(p), 0);
	p += 2 + 8 + 8;
	ck_assert_int_le((int32_t)be32_load(p), 0);
	p += 4;
	*rlen = be32_load(p);
	p += 4;
	ck_assert(p + *rlen <= end);
	memmove(resp, p, *rlen);
	return resp;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	int *pending = opaque;

	ck_assert_int_eq(m->err, 0);
	(*pending)--;
	(void)rk;
}

START_TEST(test_librdkafka_batches)
{
	static const char *codecs[] = { "none", "gzip", "snappy", "lz4", "zstd" };
	char errstr[512], err[512], bootstrap[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_t *owner;
	rd_kafka_mock_cluster_t *mc;

	ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof(errstr)), RD_KAFKA_CONF_OK);
	owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	ck_assert_ptr_nonnull(owner);
	mc = rd_kafka_mock_cluster_new(owner, 1);
	ck_assert_ptr_nonnull(mc);
	snprintf(bootstrap, sizeof(bootstrap), "%s", rd_kafka_mock_cluster_bootstraps(mc));

	for (int c = 0; c < 5; c++) {
		char topic[32];
		rd_kafka_t *p;
		int pending = 0;
		uint8_t *records, *plain;
		size_t rlen, plen;
		struct batch_iter it;
		struct batch b;
		int nrec = 0, rc;

		snprintf(topic, sizeof(topic), "codec-%s", codecs[c]);
		ck_assert_int_eq(rd_kafka_mock_topic_create(mc, topic, 1, 1), 0);
		conf = rd_kafka_conf_new();
		ck_assert_int_eq(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof(errstr)), RD_KAFKA_CONF_OK);
		ck_assert_int_eq(rd_kafka_conf_set(conf, "compression.codec", codecs[c], errstr, sizeof(errstr)), RD_KAFKA_CONF_OK);
		ck_assert_int_eq(rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)), RD_KAFKA_CONF_OK);
		ck_assert_int_eq(rd_kafka_conf_set(conf, "linger.ms", "50", errstr, sizeof(errstr)), RD_KAFKA_CONF_OK);
		rd_kafka_conf_set_opaque(conf, &pending);
		rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
		p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
		ck_assert_ptr_nonnull(p);
		for (int i = 0; i < 20; i++) {
			char key[16], val[64];

			snprintf(key, sizeof(key), "key-%d", i);
			snprintf(val, sizeof(val), "value %d compressed with %s, padding padding padding", i, codecs[c]);
			pending++;
			ck_assert_int_eq(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
			    RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(val, strlen(val)),
			    RD_KAFKA_V_HEADER("h", "x", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			    RD_KAFKA_V_END), 0);
		}
		ck_assert_int_eq(rd_kafka_flush(p, 30000), 0);
		ck_assert_int_eq(pending, 0);
		rd_kafka_destroy(p);

		/* The mock returns one stored batch per Fetch: fetch until all 20 seen. */
		for (int round = 0; nrec < 20; round++) {
		ck_assert_int_lt(round, 20);
		records = raw_fetch(bootstrap, topic, nrec, &rlen);
		ck_assert_uint_gt(rlen, 0);
		batch_iter_init(&it, records, rlen);
		while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
			ck_assert_msg(batch_verify_crc(&b, err, sizeof(err)) == 0, "%s: %s", codecs[c], err);
			ck_assert_int_eq(batch_codec(&b), c);
			ck_assert_int_eq(b.base_offset, nrec);
			ck_assert_int_eq(batch_has_producer_id(&b), 1);
			ck_assert_int_ge(b.base_sequence, 0);
			ck_assert_int_eq(b.record_count, b.last_offset_delta + 1);
			ck_assert_int_eq(batch_has_holes(&b), 0);
			{
				uint8_t *copy = malloc(b.len);

				ck_assert_ptr_nonnull(copy);
				memcpy(copy, b.p, b.len);
				be64_store(copy, 0); /* as mirrord sends it */
				ck_assert_msg(batch_validate_produce(copy, b.len, 0, err, sizeof(err)) == 0,
				    "%s: %s", codecs[c], err);
				free(copy);
			}
			ck_assert_int_eq(batch_decompress(c, b.records, b.records_len, 1 << 20, &plain, &plen, err, sizeof(err)), 0);
			/* the first record's value is where we expect it */
			{
				char want[64];

				snprintf(want, sizeof(want), "value %d compressed with %s", nrec, codecs[c]);
				ck_assert_ptr_nonnull(memmem(plain, plen, want, strlen(want)));
			}
			/* re-encoding a hole-free batch gives the same records */
			{
				struct batch_reencoded r;
				struct batch o;
				uint8_t *again;
				size_t alen;

				ck_assert_int_eq(batch_reencode_contiguous(&b, b.base_offset, 1 << 20, &r, err, sizeof(err)), 0);
				ck_assert_int_eq(batch_parse(r.buf, r.len, &o, err, sizeof(err)), BATCH_OK);
				ck_assert_int_eq(batch_decompress(c, o.records, o.records_len, 1 << 20, &again, &alen, err, sizeof(err)), 0);
				ck_assert_uint_eq(alen, plen);
				ck_assert_mem_eq(again, plain, plen);
				if (c == BATCH_CODEC_NONE)
					ck_assert_mem_eq(r.buf, b.p, b.len);
				free(again);
				batch_reencoded_fini(&r);
			}
			nrec += b.record_count;
			free(plain);
		}
		ck_assert_int_ne(rc, BATCH_ERROR);
		free(records);
		}
		ck_assert_int_eq(nrec, 20);
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(owner);
}
END_TEST

/* ---- the validator against a real broker ----------------------------- */

/*
 * Runs only when test/kafka/test_batch_kafka.py hands it a real Apache Kafka
 * broker (MIRRORD_BATCH_KAFKA=host:port, MIRRORD_BATCH_TOPIC with one
 * partition): each case is produced raw and the broker's verdict must be
 * the validator's.  This is the oracle the mock cannot be (it accepts all).
 */
struct kresult {
	int16_t code;
	char msg[512];
};

static int read_full(int fd, uint8_t *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, p + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Produce v8 (acks=all) of records to partition 0; the broker's answer. */
static void raw_produce(const char *hostport, const char *topic, const uint8_t *records,
    size_t rlen, struct kresult *res)
{
	size_t tl = strlen(topic), n = 4, need;
	uint8_t *req = malloc(64 + tl + rlen), hdr[4], *resp;
	struct sockaddr_in sa;
	struct timeval tv = { 30, 0 };
	int fd, port = atoi(strchr(hostport, ':') + 1);
	const uint8_t *p, *end;
	int32_t nerr;
	int16_t ml;

	ck_assert_ptr_nonnull(req);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	be16_store(req + n, 0), n += 2;		/* Produce */
	be16_store(req + n, 8), n += 2;		/* v8 */
	be32_store(req + n, 7), n += 4;		/* correlation id */
	be16_store(req + n, 1), n += 2;
	req[n++] = 't';				/* client id */
	be16_store(req + n, 0xffff), n += 2;	/* transactional id: null */
	be16_store(req + n, 0xffff), n += 2;	/* acks -1 */
	be32_store(req + n, 30000), n += 4;	/* timeout */
	be32_store(req + n, 1), n += 4;
	be16_store(req + n, (uint16_t)tl), n += 2;
	memcpy(req + n, topic, tl), n += tl;
	be32_store(req + n, 1), n += 4;
	be32_store(req + n, 0), n += 4;		/* partition */
	be32_store(req + n, (uint32_t)rlen), n += 4;
	memcpy(req + n, records, rlen), n += rlen;
	be32_store(req, (uint32_t)(n - 4));
	ck_assert_int_eq(write(fd, req, n), (ssize_t)n);
	free(req);
	ck_assert_msg(read_full(fd, hdr, 4) == 0, "no Produce response from %s", hostport);
	need = be32_load(hdr);
	ck_assert_uint_lt(need, 1 << 20);
	resp = malloc(need);
	ck_assert_int_eq(read_full(fd, resp, need), 0);
	close(fd);
	/* corr, [topic: name, [index, err, base, append time, log start, [errors], msg]], throttle */
	p = resp;
	end = resp + need;
	ck_assert_int_eq(be32_load(p), 7);
	p += 4;
	ck_assert_int_eq(be32_load(p), 1);
	p += 4;
	p += 2 + be16_load(p);
	ck_assert_int_eq(be32_load(p), 1);
	p += 4 + 4;
	res->code = (int16_t)be16_load(p);
	p += 2 + 8 + 8 + 8;
	nerr = (int32_t)be32_load(p);
	p += 4;
	res->msg[0] = '\0';
	for (int32_t i = 0; i < nerr; i++) {
		size_t at = strlen(res->msg);

		ck_assert(p + 6 <= end);
		ml = (int16_t)be16_load(p + 4);
		ck_assert(p + 6 + (ml > 0 ? ml : 0) <= end);
		snprintf(res->msg + at, sizeof(res->msg) - at, "record %d: %.*s; ",
		    (int)be32_load(p), ml > 0 ? ml : 4, ml > 0 ? (const char *)p + 6 : "null");
		p += 6 + (ml > 0 ? ml : 0);
	}
	ml = (int16_t)be16_load(p);
	p += 2;
	ck_assert(p + (ml > 0 ? ml : 0) <= end);
	{
		size_t at = strlen(res->msg);

		snprintf(res->msg + at, sizeof(res->msg) - at, "%.*s", ml > 0 ? ml : 4,
		    ml > 0 ? (const char *)p : "null");
	}
	free(resp);
}

/* One case: our verdict and the broker's must agree; returns the broker's code. */
static int16_t kafka_agrees(const char *what, const uint8_t *buf, size_t len, int deep)
{
	const char *hp = getenv("MIRRORD_BATCH_KAFKA"), *topic = getenv("MIRRORD_BATCH_TOPIC");
	char err[512] = "";
	struct kresult kr;
	int ours = batch_validate_produce(buf, len, 0, err, sizeof(err));

	if (ours == 0 && deep) {
		struct batch b;

		ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
		ours = batch_check_records(&b, 1 << 20, err, sizeof(err));
	}
	raw_produce(hp, topic, buf, len, &kr);
	printf("%-40s broker %3d (%s) | mirrord %s\n", what, kr.code, kr.msg,
	    ours == 0 ? "accepts" : err);
	ck_assert_msg((ours == 0) == (kr.code == 0),
	    "%s: broker says %d (%s), the validator says %s", what, kr.code, kr.msg,
	    ours == 0 ? "ok" : err);
	return kr.code;
}

START_TEST(test_validator_against_kafka)
{
	uint8_t body[4096], buf[8192], *z;
	size_t bl, zl, len;
	struct thdr h;
	struct batch b;
	struct batch_reencoded r;
	char err[512], what[64];

	for (int c = 0; c <= 4; c++) {
		/* the good batch, every codec */
		h = vhdr();
		h.pid = -1, h.pep = -1, h.seq = -1;
		h.attrs = (uint16_t)c;
		bl = t_records(body, recs4, 4, 1);
		ck_assert_int_eq(batch_compress(c, 1, body, bl, 1 << 20, &z, &zl, err, sizeof(err)), 0);
		len = t_batch(buf, &h, z, zl);
		free(z);
		snprintf(what, sizeof(what), "good %s", batch_codec_name(c));
		ck_assert_int_eq(kafka_agrees(what, buf, len, 1), 0);

		/* a compacted batch with holes: refused as is, accepted re-encoded */
		h.lod = 9;
		bl = t_records(body, recs4, 4, 0);
		ck_assert_int_eq(batch_compress(c, 1, body, bl, 1 << 20, &z, &zl, err, sizeof(err)), 0);
		len = t_batch(buf, &h, z, zl);
		free(z);
		snprintf(what, sizeof(what), "holes %s", batch_codec_name(c));
		ck_assert_int_eq(kafka_agrees(what, buf, len, 1), 87); /* INVALID_RECORD */
		ck_assert_int_eq(batch_parse(buf, len, &b, err, sizeof(err)), BATCH_OK);
		ck_assert_int_eq(batch_reencode_contiguous(&b, 0, 1 << 20, &r, err, sizeof(err)), 0);
		snprintf(what, sizeof(what), "holes re-encoded %s", batch_codec_name(c));
		ck_assert_int_eq(kafka_agrees(what, r.buf, r.len, 1), 0);
		batch_reencoded_fini(&r);

		/* count == lod + 1 but the inner deltas jump (compressed: inner check) */
		if (c != BATCH_CODEC_NONE) {
			h.lod = 3;
			ck_assert_int_eq(batch_compress(c, 1, body, bl, 1 << 20, &z, &zl, err, sizeof(err)), 0);
			len = t_batch(buf, &h, z, zl);
			free(z);
			snprintf(what, sizeof(what), "inner deltas jump %s", batch_codec_name(c));
			ck_assert_int_ne(kafka_agrees(what, buf, len, 1), 0);
		}
	}
	h = vhdr();
	h.pid = -1, h.pep = -1, h.seq = -1;
	bl = t_records(body, recs4, 4, 1);
	len = t_batch(buf, &h, body, bl);
	buf[120] ^= 1;
	ck_assert_int_eq(kafka_agrees("bad CRC", buf, len, 0), 2); /* CORRUPT_MESSAGE */
	buf[120] ^= 1;
	memcpy(buf + len, buf, len);
	ck_assert_int_ne(kafka_agrees("two batches", buf, 2 * len, 0), 0);
	h.attrs = BATCH_ATTR_CONTROL;
	len = t_batch(buf, &h, body, bl);
	ck_assert_int_eq(kafka_agrees("control batch", buf, len, 0), 87);
	/* compacted source batches can carry the delete horizon (KIP-534) */
	h.attrs = BATCH_ATTR_DELETE_HORIZON;
	len = t_batch(buf, &h, body, bl);
	kafka_agrees("delete horizon bit", buf, len, 0);
	h.attrs = 0;
	h.count = 0;
	len = t_batch(buf, &h, body, bl);
	ck_assert_int_ne(kafka_agrees("RecordCount 0", buf, len, 0), 0);
	h.count = 4;
	h.pid = 91001;
	h.pep = 0;
	h.seq = -1;
	len = t_batch(buf, &h, body, bl);
	ck_assert_int_eq(kafka_agrees("producer id, sequence -1", buf, len, 0), 87);
	h.seq = 0;
	len = t_batch(buf, &h, body, bl);
	ck_assert_int_eq(kafka_agrees("producer id, sequence 0", buf, len, 0), 0);
	h.base = 1000;
	h.seq = 4;
	len = t_batch(buf, &h, body, bl);
	ck_assert_int_eq(kafka_agrees("BaseOffset 1000", buf, len, 0), 87);
	/*
	 * Uncompressed, RecordCount == LastOffsetDelta + 1 but deltas 0,2,3,7:
	 * Kafka 4.4 takes it as is (it checks only the count for uncompressed
	 * data), and readers then see offsets 0,2,3,7 that overlap the next
	 * batch.  The validator refuses it: mirrord must never send one.
	 */
	{
		struct kresult kr;

		h = vhdr();
		h.pid = -1, h.pep = -1, h.seq = -1;
		len = t_batch(buf, &h, body, t_records(body, recs4, 4, 0));
		ck_assert_int_eq(batch_validate_produce(buf, len, 0, err, sizeof(err)), -1);
		raw_produce(getenv("MIRRORD_BATCH_KAFKA"), getenv("MIRRORD_BATCH_TOPIC"), buf, len, &kr);
		printf("%-40s broker %3d (%s) | mirrord %s (stricter on purpose)\n",
		    "inner deltas jump none", kr.code, kr.msg, err);
	}
}
END_TEST

/* Test-side reader of record offset deltas (uncompressed records). */
static int64_t t_varint_read(const uint8_t **p)
{
	uint64_t raw = 0;

	for (int i = 0; i < 10; i++) {
		uint8_t c = *(*p)++;

		raw |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80))
			break;
	}
	return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

static void t_deltas(const uint8_t *recs, size_t len, int n, int64_t *deltas)
{
	const uint8_t *p = recs, *end = recs + len;

	for (int i = 0; i < n; i++) {
		int64_t l = t_varint_read(&p);
		const uint8_t *next = p + l, *q = p + 1;

		ck_assert(next <= end);
		t_varint_read(&q); /* timestamp delta */
		deltas[i] = t_varint_read(&q);
		p = next;
	}
	ck_assert(p == end);
}

/*
 * Batches the Kafka log cleaner really thinned (MIRRORD_BATCH_COMPACTED: a
 * comma-separated list of compacted topics, one partition, one per codec):
 * fetched raw, each must verify, the ones with holes must be found by
 * batch_has_holes(), re-encode to batches the broker accepts, and the
 * anchors must account for every source offset.
 */
START_TEST(test_compacted_from_kafka)
{
	const char *hp = getenv("MIRRORD_BATCH_KAFKA");
	char topics[1024], *save = NULL, err[512], what[128];

	snprintf(topics, sizeof(topics), "%s", getenv("MIRRORD_BATCH_COMPACTED"));
	for (char *t = strtok_r(topics, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		int64_t next = 0, dst = 0;
		int nholes = 0, nbatches = 0, nempty = 0;
		struct xlate *map = xlate_new(4096);
		/* every kept record: source offset -> destination offset */
		static int64_t kept_src[4096], kept_dst[4096];
		size_t nkept = 0;

		for (int round = 0; round < 1000; round++) {
			size_t rlen;
			uint8_t *records = raw_fetch(hp, t, next, &rlen);
			struct batch_iter it;
			struct batch b;
			int rc, got = 0;

			batch_iter_init(&it, records, rlen);
			while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
				struct batch_reencoded r;

				if (batch_last_offset(&b) < next)
					continue; /* a fetch may start inside an earlier batch */
				got++;
				nbatches++;
				ck_assert_msg(batch_verify_crc(&b, err, sizeof(err)) == 0, "%s: %s", t, err);
				/* where each record goes: the map must agree */
				if (!batch_is_empty(&b)) {
					uint8_t *plain;
					size_t plen;
					int64_t deltas[256];

					ck_assert_int_le(b.record_count, 256);
					ck_assert_int_eq(batch_decompress(batch_codec(&b), b.records, b.records_len,
					    1 << 22, &plain, &plen, err, sizeof(err)), 0);
					t_deltas(plain, plen, b.record_count, deltas);
					free(plain);
					for (int i = 0; i < b.record_count; i++) {
						ck_assert_uint_lt(nkept, 4096);
						kept_src[nkept] = b.base_offset + deltas[i];
						kept_dst[nkept] = dst + i;
						nkept++;
					}
				}
				/* the cleaner's output: a whole batch is contiguous, a thinned one has holes */
				if ((int64_t)b.record_count == (int64_t)b.last_offset_delta + 1)
					ck_assert_msg(batch_check_records(&b, 1 << 22, err, sizeof(err)) == 0,
					    "%s: %s", t, err);
				else
					ck_assert_int_eq(batch_has_holes(&b), 1);
				if (batch_is_empty(&b)) {
					nempty++;
				} else if (batch_has_holes(&b)) {
					struct batch_rewrite rw = { .flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN,
						.base_offset = 0, .producer_id = -1, .producer_epoch = -1,
						.base_sequence = -1 };
					struct batch o;

					nholes++;
					ck_assert_msg(batch_reencode_contiguous(&b, dst, 1 << 22, &r, err, sizeof(err)) == 0,
					    "%s at %lld: %s", t, (long long)b.base_offset, err);
					ck_assert_int_ge(r.pairs[0].src, b.base_offset);
					ck_assert_int_eq(r.pairs[0].dst, dst);
					ck_assert_int_eq(r.pairs[r.npairs - 1].src, batch_next_offset(&b));
					ck_assert_int_eq(r.pairs[r.npairs - 1].dst, dst + b.record_count);
					ck_assert_int_eq(batch_parse(r.buf, r.len, &o, err, sizeof(err)), BATCH_OK);
					ck_assert_int_eq(batch_codec(&o), batch_codec(&b));
					ck_assert_int_eq(batch_rewrite_header(&o, &rw, r.buf, r.len, err, sizeof(err)), 0);
					snprintf(what, sizeof(what), "cleaned %s@%lld (%d of %d)", t,
					    (long long)b.base_offset, (int)b.record_count, (int)b.last_offset_delta + 1);
					ck_assert_int_eq(kafka_agrees(what, r.buf, r.len, 1), 0);
					for (size_t i = 0; i < r.npairs; i++)
						ck_assert_int_eq(xlate_add(map, r.pairs[i].src, r.pairs[i].dst,
						    err, sizeof(err)), 0);
					batch_reencoded_fini(&r);
				} else {
					/* copied as is: it starts where the source says */
					ck_assert_int_eq(xlate_add(map, b.base_offset, dst, err, sizeof(err)), 0);
				}
				dst += b.record_count;
				next = batch_next_offset(&b);
			}
			ck_assert_int_ne(rc, BATCH_ERROR);
			free(records);
			if (got == 0)
				break; /* the end of the log */
		}
		printf("%s: %d batches, %d with holes, %d emptied, %lld records kept of %lld, "
		    "%zu anchors\n", t, nbatches, nholes, nempty, (long long)dst, (long long)next,
		    xlate_count(map));
		/* the map translates every kept record exactly, both ways ... */
		for (size_t i = 0; i < nkept; i++) {
			int64_t o;

			ck_assert_int_eq(xlate_src_to_dst(map, kept_src[i], &o), XLATE_EXACT);
			ck_assert_int_eq(o, kept_dst[i]);
			ck_assert_int_eq(xlate_dst_to_src(map, kept_dst[i], &o), XLATE_EXACT);
			ck_assert_int_eq(o, kept_src[i]);
		}
		/* ... and a removed one to the next kept record */
		for (size_t i = 1; i < nkept; i++)
			for (int64_t so = kept_src[i - 1] + 1; so < kept_src[i]; so++) {
				int64_t o;

				ck_assert_int_eq(xlate_src_to_dst(map, so, &o), XLATE_NEXT);
				ck_assert_int_eq(o, kept_dst[i]);
			}
		ck_assert_uint_eq(nkept, (size_t)dst);
		xlate_free(map);
		ck_assert_msg(nholes > 0, "%s: the cleaner left no batch with holes", t);
		ck_assert_int_lt(dst, next);
	}
}
END_TEST

/* ---- coalescing (batch_merge_*) -------------------------------------- */

/* One record of an uncompressed records section, decoded by the test. */
struct tdec {
	int64_t ts_delta, off_delta;
	const uint8_t *rest;   /* key, value, headers */
	size_t rest_len;
};

static int t_decode(const uint8_t *recs, size_t len, struct tdec *out, int max)
{
	const uint8_t *p = recs, *end = recs + len;
	int n = 0;

	while (p < end && n < max) {
		int64_t l = t_varint_read(&p);
		const uint8_t *next = p + l, *q = p + 1;

		ck_assert(next <= end);
		out[n].ts_delta = t_varint_read(&q);
		out[n].off_delta = t_varint_read(&q);
		out[n].rest = q;
		out[n].rest_len = (size_t)(next - q);
		n++;
		p = next;
	}
	ck_assert(p == end);
	return n;
}

static size_t t_mk(uint8_t *out, int64_t base, int32_t epoch, uint16_t attrs,
    int64_t bts, const struct trec *recs, int n)
{
	uint8_t body[4096];
	struct thdr h = hdr_default();
	int64_t mts = bts;

	for (int i = 0; i < n; i++)
		if (bts + recs[i].ts_delta > mts)
			mts = bts + recs[i].ts_delta;
	h.base = base;
	h.epoch = epoch;
	h.attrs = attrs;
	h.count = n;
	h.lod = n - 1;
	h.bts = bts;
	h.mts = mts;
	return t_batch(out, &h, body, t_records(body, recs, n, 1));
}

START_TEST(test_merge)
{
	/* Three batches that follow each other: the second's base timestamp
	 * lies before the first's, the third's far after it (its deltas grow
	 * a varint byte or more). */
	static const int64_t bts[3] = { 1700000000000, 1699999999950, 1700100000000 };
	static const int64_t base[3] = { 1000, 1004, 1006 };
	static const int nrec[3] = { 4, 2, 4 };
	uint8_t raw[3][2048], *in[3];
	size_t len[3];
	struct batch b[3], out;
	struct batch_merge m;
	struct tdec want[3][4], got[16];
	char err[256];
	int k = 0;

	for (int i = 0; i < 3; i++) {
		len[i] = t_mk(raw[i], base[i], 7, 0, bts[i], recs4, nrec[i]);
		in[i] = exact(raw[i], len[i]);
		ck_assert_int_eq(batch_parse(in[i], len[i], &b[i], err, sizeof(err)), BATCH_OK);
		ck_assert_int_eq(batch_mergeable(&b[i], 1 << 20), 1);
		ck_assert_int_eq(t_decode(b[i].records, b[i].records_len, want[i], 4), nrec[i]);
	}
	ck_assert_int_eq(batch_merge_start(&m, &b[0], 1 << 20, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b[1], err, sizeof(err)), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b[2], err, sizeof(err)), 0);
	ck_assert_int_eq(m.nbatches, 3);
	batch_merge_finish(&m);
	ck_assert_int_eq(batch_parse(m.buf, m.len, &out, err, sizeof(err)), BATCH_OK);
	ck_assert_uint_eq(out.len, m.len);
	ck_assert_int_eq(batch_verify_crc(&out, err, sizeof(err)), 0);
	ck_assert_int_eq(out.base_offset, 1000);
	ck_assert_int_eq(out.record_count, 10);
	ck_assert_int_eq(out.last_offset_delta, 9);
	ck_assert_int_eq(out.base_timestamp, bts[0]);
	ck_assert_int_eq(out.max_timestamp, bts[2] + 300);
	ck_assert_int_eq(out.leader_epoch, 7);
	ck_assert_int_eq(out.producer_id, 4242);
	ck_assert_int_eq(batch_has_holes(&out), 0);
	/* Every record at its source offset and timestamp, the rest as it was. */
	ck_assert_int_eq(t_decode(out.records, out.records_len, got, 16), 10);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < nrec[i]; j++, k++) {
			ck_assert_int_eq(out.base_offset + got[k].off_delta,
			    base[i] + want[i][j].off_delta);
			ck_assert_int_eq(out.base_timestamp + got[k].ts_delta,
			    bts[i] + want[i][j].ts_delta);
			ck_assert_uint_eq(got[k].rest_len, want[i][j].rest_len);
			ck_assert(memcmp(got[k].rest, want[i][j].rest, got[k].rest_len) == 0);
		}
	/* The first batch's records are its own bytes. */
	ck_assert(memcmp(out.records, b[0].records, b[0].records_len) == 0);
	/* A client would be allowed to send it (BaseOffset 0, as mirrord sends). */
	be64_store(m.buf, 0);
	ck_assert_msg(batch_validate_produce(m.buf, m.len, 0, err, sizeof(err)) == 0, "%s", err);
	batch_merge_fini(&m);
	for (int i = 0; i < 3; i++)
		free(in[i]);
}
END_TEST

START_TEST(test_merge_refusals)
{
	uint8_t raw[2048], raw2[2048], body[2048];
	size_t l1 = t_mk(raw, 1000, 7, 0, 1700000000000, recs4, 4), l2, before;
	struct batch a, b;
	struct batch_merge m;
	struct thdr h = hdr_default();
	char err[256];

	ck_assert_int_eq(batch_parse(raw, l1, &a, err, sizeof(err)), BATCH_OK);
	/* Not mergeable at all. */
	for (unsigned attrs = 1; attrs <= 4; attrs++) {
		l2 = t_mk(raw2, 1004, 7, (uint16_t)attrs, 1700000000000, recs4, 4);
		ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
		ck_assert_int_eq(batch_mergeable(&b, 1 << 20), 0);
	}
	{
		static const uint16_t no[] = { BATCH_ATTR_CONTROL,
			BATCH_ATTR_TRANSACTIONAL | BATCH_ATTR_CONTROL, BATCH_ATTR_LOG_APPEND_TIME };

		for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
			l2 = t_mk(raw2, 1004, 7, no[i], 1700000000000, recs4, 4);
			ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
			ck_assert_int_eq(batch_mergeable(&b, 1 << 20), 0);
		}
	}
	ck_assert_int_eq(batch_mergeable(&a, l1 - 1), 0);
	/* Offset holes (deltas 0, 2, 3, 7). */
	h.base = 1004;
	l2 = t_batch(raw2, &h, body, t_records(body, recs4, 4, 0));
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_mergeable(&b, 1 << 20), 0);

	/* Mergeable, but not onto this one: m is left as it was. */
	ck_assert_int_eq(batch_merge_start(&m, &a, 1 << 20, err, sizeof(err)), 0);
	before = m.len;
	l2 = t_mk(raw2, 1005, 7, 0, 1700000000000, recs4, 4);      /* a gap */
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1);
	l2 = t_mk(raw2, 1004, 8, 0, 1700000000000, recs4, 4);      /* epoch */
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1);
	l2 = t_mk(raw2, 1004, 7, BATCH_ATTR_TRANSACTIONAL, 1700000000000, recs4, 4);
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_mergeable(&b, 1 << 20), 1); /* committed: may */
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1); /* attrs */
	l2 = t_mk(raw2, 1004, 7, 0, INT64_MIN + 5, recs4, 4);     /* overflow */
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1);
	/* Holes the header does not show (deltas 0, 2, 3, 7 of 4 records with
	 * LastOffsetDelta 3): found by the add's own walk. */
	h = hdr_default();
	h.base = 1004;
	l2 = t_batch(raw2, &h, body, t_records(body, recs4, 4, 0));
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_mergeable_header(&b, 1 << 20), 1);
	ck_assert_int_eq(batch_mergeable(&b, 1 << 20), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.len, before);
	ck_assert_int_eq(m.record_count, 4);
	ck_assert_int_eq(m.nbatches, 1);
	batch_merge_fini(&m);
	/* The cap: a second batch that would pass it is refused. */
	l2 = t_mk(raw2, 1004, 7, 0, 1700000000000, recs4, 4);
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_merge_start(&m, &a, l1 + b.records_len - 1, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 1);
	ck_assert_uint_eq(m.len, l1);
	batch_merge_fini(&m);
	ck_assert_int_eq(batch_merge_start(&m, &a, l1 + b.records_len, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), 0);
	batch_merge_finish(&m);
	ck_assert_uint_eq(m.len, l1 + b.records_len);
	batch_merge_fini(&m);
	/* A malformed record in the added batch is an error naming it. */
	raw2[BATCH_HEADER_LEN] = 0x7f; /* length varint: 63 bytes, past the end */
	ck_assert_int_eq(batch_parse(raw2, l2, &b, err, sizeof(err)), BATCH_OK);
	ck_assert_int_eq(batch_merge_start(&m, &a, 1 << 20, err, sizeof(err)), 0);
	ck_assert_int_eq(batch_merge_add(&m, &b, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "batch at offset 1004: record 0") != NULL, "%s", err);
	ck_assert_uint_eq(m.len, l1);
	batch_merge_fini(&m);
}
END_TEST

static Suite *batch_suite(void)
{
	Suite *s = suite_create("batch");
	TCase *tc = tcase_create("core");
	TCase *tk = tcase_create("librdkafka");

	tcase_add_test(tc, test_parse_every_attribute);
	tcase_add_test(tc, test_golden_bytes);
	tcase_add_test(tc, test_crc_flip_every_byte);
	tcase_add_test(tc, test_magic_and_length_errors);
	tcase_add_test(tc, test_iterate_truncated_at_every_length);
	tcase_add_test(tc, test_helpers);
	tcase_add_test(tc, test_validate_truncated_at_every_length);
	tcase_add_test(tc, test_rewrite_header);
	tcase_add_test(tc, test_rewrite_crc_fixup_equals_recompute);
	tcase_add_test(tc, test_validator_rules);
	tcase_add_test(tc, test_check_records);
	tcase_add_test(tc, test_reencode_none);
	tcase_add_test(tc, test_reencode_gzip);
	tcase_add_test(tc, test_reencode_snappy);
	tcase_add_test(tc, test_reencode_lz4);
	tcase_add_test(tc, test_reencode_zstd);
	tcase_add_test(tc, test_reencode_raw_snappy_and_big);
	tcase_add_test(tc, test_reencode_errors_and_empty);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_merge_refusals);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tk, 60);
	tcase_add_test(tk, test_librdkafka_batches);
	suite_add_tcase(s, tk);
	if (getenv("MIRRORD_BATCH_KAFKA") != NULL && getenv("MIRRORD_BATCH_TOPIC") != NULL) {
		TCase *tr = tcase_create("realkafka");

		tcase_set_timeout(tr, 120);
		tcase_add_test(tr, test_validator_against_kafka);
		if (getenv("MIRRORD_BATCH_COMPACTED") != NULL)
			tcase_add_test(tr, test_compacted_from_kafka);
		suite_add_tcase(s, tr);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(batch_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
