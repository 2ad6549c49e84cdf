/*
 * Unit tests for kbuf (reader, writer, arena) and kerr (error table).
 * Byte vectors are written out by hand from the Kafka protocol guide's
 * primitive type definitions, so a wrong encoder and a matching wrong
 * decoder cannot pass together.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "kerr.h"

/* Encode with fn, compare to the expected bytes. */
#define ENC_EQ(stmt, ...)                                                   \
	do {                                                                \
		static const uint8_t exp_[] = { __VA_ARGS__ };              \
		struct kw w_;                                               \
		kw_init(&w_, 1024);                                         \
		{                                                           \
			struct kw *ew = &w_;                                 \
			stmt;                                               \
		}                                                           \
		ck_assert_int_eq(w_.err, 0);                                \
		ck_assert_uint_eq(w_.len, sizeof(exp_));                    \
		ck_assert_mem_eq(w_.buf, exp_, sizeof(exp_));               \
		kw_fini(&w_);                                               \
	} while (0)

START_TEST(test_fixed_width_roundtrip)
{
	struct kw w;
	struct kr r;

	kw_init(&w, 1024);
	kw_i8(&w, -128);
	kw_i8(&w, 127);
	kw_i16(&w, INT16_MIN);
	kw_i16(&w, INT16_MAX);
	kw_u16(&w, 0xbeef);
	kw_i32(&w, INT32_MIN);
	kw_u32(&w, 0xdeadbeefu);
	kw_i64(&w, INT64_MIN);
	kw_i64(&w, INT64_MAX);
	kw_f64(&w, -0.5);
	kw_bool(&w, 7);
	kw_bool(&w, 0);
	ck_assert_int_eq(w.err, 0);
	ck_assert_uint_eq(w.len, 1 + 1 + 2 + 2 + 2 + 4 + 4 + 8 + 8 + 8 + 1 + 1);
	/* int16 min is 0x8000 big-endian; int32 min is 0x80000000. */
	ck_assert_uint_eq(w.buf[2], 0x80);
	ck_assert_uint_eq(w.buf[3], 0x00);
	ck_assert_uint_eq(w.buf[6], 0xbe);
	ck_assert_uint_eq(w.buf[7], 0xef);
	/* -0.5 as IEEE 754 binary64 is 0xbfe0000000000000. */
	ck_assert_uint_eq(w.buf[32], 0xbf);
	ck_assert_uint_eq(w.buf[33], 0xe0);

	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(kr_i8(&r), -128);
	ck_assert_int_eq(kr_i8(&r), 127);
	ck_assert_int_eq(kr_i16(&r), INT16_MIN);
	ck_assert_int_eq(kr_i16(&r), INT16_MAX);
	ck_assert_uint_eq(kr_u16(&r), 0xbeef);
	ck_assert_int_eq(kr_i32(&r), INT32_MIN);
	ck_assert_uint_eq(kr_u32(&r), 0xdeadbeefu);
	ck_assert(kr_i64(&r) == INT64_MIN);
	ck_assert(kr_i64(&r) == INT64_MAX);
	ck_assert(kr_f64(&r) == -0.5);
	ck_assert_int_eq(kr_bool(&r), 1);
	ck_assert_int_eq(kr_bool(&r), 0);
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);
}
END_TEST

START_TEST(test_uvarint_vectors)
{
	/* Unsigned varints: 7 bits per byte, little-endian groups, MSB = more. */
	ENC_EQ(kw_uvarint(ew, 0), 0x00);
	ENC_EQ(kw_uvarint(ew, 1), 0x01);
	ENC_EQ(kw_uvarint(ew, 127), 0x7f);
	ENC_EQ(kw_uvarint(ew, 128), 0x80, 0x01);
	ENC_EQ(kw_uvarint(ew, 300), 0xac, 0x02);
	ENC_EQ(kw_uvarint(ew, 16383), 0xff, 0x7f);
	ENC_EQ(kw_uvarint(ew, 16384), 0x80, 0x80, 0x01);
	ENC_EQ(kw_uvarint(ew, (1u << 21) - 1), 0xff, 0xff, 0x7f);
	ENC_EQ(kw_uvarint(ew, 1u << 28), 0x80, 0x80, 0x80, 0x80, 0x01);
	ENC_EQ(kw_uvarint(ew, UINT32_MAX), 0xff, 0xff, 0xff, 0xff, 0x0f);
	/* Zigzag: 0->0, -1->1, 1->2, -2->3, INT32_MIN->UINT32_MAX. */
	ENC_EQ(kw_varint(ew, 0), 0x00);
	ENC_EQ(kw_varint(ew, -1), 0x01);
	ENC_EQ(kw_varint(ew, 1), 0x02);
	ENC_EQ(kw_varint(ew, -2), 0x03);
	ENC_EQ(kw_varint(ew, -64), 0x7f);
	ENC_EQ(kw_varint(ew, 64), 0x80, 0x01);
	ENC_EQ(kw_varint(ew, INT32_MAX), 0xfe, 0xff, 0xff, 0xff, 0x0f);
	ENC_EQ(kw_varint(ew, INT32_MIN), 0xff, 0xff, 0xff, 0xff, 0x0f);
	ENC_EQ(kw_varlong(ew, -1), 0x01);
	ENC_EQ(kw_varlong(ew, INT64_MIN),
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	ENC_EQ(kw_varlong(ew, INT64_MAX),
	    0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
}
END_TEST

START_TEST(test_varint_roundtrip_edges)
{
	static const uint32_t u[] = { 0, 1, 127, 128, 255, 16383, 16384,
		(1u << 21) - 1, 1u << 21, (1u << 28) - 1, 1u << 28, INT32_MAX,
		(uint32_t)INT32_MAX + 1, UINT32_MAX };
	static const int32_t s[] = { 0, -1, 1, -64, 63, 64, -65, INT16_MIN,
		INT16_MAX, INT32_MIN, INT32_MAX, INT32_MIN + 1 };
	static const int64_t l[] = { 0, -1, 1, INT32_MIN, INT32_MAX,
		(int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX, INT64_MIN + 1 };
	struct kw w;
	struct kr r;

	kw_init(&w, 4096);
	for (size_t i = 0; i < ARRAY_SIZE(u); i++) {
		size_t before = w.len;

		kw_uvarint(&w, u[i]);
		ck_assert_uint_eq(w.len - before, kw_uvarint_size(u[i]));
	}
	for (size_t i = 0; i < ARRAY_SIZE(s); i++)
		kw_varint(&w, s[i]);
	for (size_t i = 0; i < ARRAY_SIZE(l); i++)
		kw_varlong(&w, l[i]);
	kw_uvarlong(&w, UINT64_MAX);
	ck_assert_int_eq(w.err, 0);

	kr_init(&r, w.buf, w.len);
	for (size_t i = 0; i < ARRAY_SIZE(u); i++)
		ck_assert_uint_eq(kr_uvarint(&r), u[i]);
	for (size_t i = 0; i < ARRAY_SIZE(s); i++)
		ck_assert_int_eq(kr_varint(&r), s[i]);
	for (size_t i = 0; i < ARRAY_SIZE(l); i++)
		ck_assert(kr_varlong(&r) == l[i]);
	ck_assert(kr_uvarlong(&r) == UINT64_MAX);
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);
}
END_TEST

START_TEST(test_varint_malformed)
{
	/* Two good bytes, then a 5-byte varint whose last byte sets bit 32. */
	static const uint8_t over[] = { 0x01, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f };
	/* Six bytes, all with the continuation bit but the last. */
	static const uint8_t longv[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	/* Continuation bit on the last byte of input. */
	static const uint8_t trunc[] = { 0x05, 0x80, 0x80 };
	/* A varlong with 11 bytes. */
	static const uint8_t longl[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		0x80, 0x80, 0x80, 0x80, 0x01 };
	struct kr r;

	kr_init(&r, over, sizeof(over));
	ck_assert_uint_eq(kr_uvarint(&r), 1);
	ck_assert_uint_eq(kr_uvarint(&r), 2);
	ck_assert_uint_eq(kr_uvarint(&r), 0);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 2);
	ck_assert_str_eq(r.why, "varint longer than 32 bits");

	kr_init(&r, longv, sizeof(longv));
	(void)kr_uvarint(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "varint longer than 32 bits");

	kr_init(&r, trunc, sizeof(trunc));
	ck_assert_uint_eq(kr_uvarint(&r), 5);
	ck_assert_int_eq(kr_varint(&r), 0);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "truncated varint");

	kr_init(&r, longl, sizeof(longl));
	ck_assert(kr_varlong(&r) == 0);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "varlong longer than 64 bits");

	kr_init(&r, longl, 0);
	(void)kr_varlong(&r);
	ck_assert_str_eq(r.why, "truncated varlong");
}
END_TEST

START_TEST(test_strings_and_bytes)
{
	struct kw w;
	struct kr r;
	struct kstr s;
	struct kbytes b;
	static const uint8_t raw3[] = { 1, 2, 3 };

	/* int16 strings: -1 is null (ff ff), empty is 00 00. */
	ENC_EQ(kw_str(ew, KSTR_NULL), 0xff, 0xff);
	ENC_EQ(kw_str(ew, kstr_c("")), 0x00, 0x00);
	ENC_EQ(kw_str(ew, kstr_c("ab")), 0x00, 0x02, 'a', 'b');
	/* Compact: length + 1 as a uvarint, 0 = null, 1 = empty. */
	ENC_EQ(kw_cstr(ew, KSTR_NULL), 0x00);
	ENC_EQ(kw_cstr(ew, kstr_c("")), 0x01);
	ENC_EQ(kw_cstr(ew, kstr_c("ab")), 0x03, 'a', 'b');
	ENC_EQ(kw_bytes(ew, KBYTES_NULL), 0xff, 0xff, 0xff, 0xff);
	ENC_EQ(kw_bytes(ew, ((struct kbytes){ raw3, 3 })), 0, 0, 0, 3, 1, 2, 3);
	ENC_EQ(kw_cbytes(ew, KBYTES_NULL), 0x00);
	ENC_EQ(kw_cbytes(ew, ((struct kbytes){ raw3, 0 })), 0x01);
	ENC_EQ(kw_cbytes(ew, ((struct kbytes){ raw3, 3 })), 0x04, 1, 2, 3);

	kw_init(&w, 1024);
	kw_str(&w, KSTR_NULL);
	kw_str(&w, kstr_c(""));
	kw_str(&w, kstr_c("topic"));
	kw_cstr(&w, KSTR_NULL);
	kw_cstr(&w, kstr_c(""));
	kw_cstr(&w, kstr_c("mirror"));
	kw_bytes(&w, KBYTES_NULL);
	kw_cbytes(&w, (struct kbytes){ raw3, 3 });
	ck_assert_int_eq(w.err, 0);

	kr_init(&r, w.buf, w.len);
	s = kr_str(&r);
	ck_assert_int_eq(s.len, -1);
	ck_assert(kstr_eq(s, NULL));
	s = kr_str(&r);
	ck_assert_int_eq(s.len, 0);
	ck_assert(kstr_eq(s, ""));
	ck_assert(!kstr_eq(s, NULL));
	s = kr_str(&r);
	ck_assert(kstr_eq(s, "topic"));
	ck_assert(!kstr_eq(s, "topi"));
	s = kr_cstr(&r);
	ck_assert_int_eq(s.len, -1);
	s = kr_cstr(&r);
	ck_assert_int_eq(s.len, 0);
	s = kr_cstr(&r);
	ck_assert(kstr_eq(s, "mirror"));
	char *d = kstr_dup(s);
	ck_assert_str_eq(d, "mirror");
	free(d);
	ck_assert_ptr_null(kstr_dup(KSTR_NULL));
	b = kr_bytes(&r);
	ck_assert_int_eq(b.len, -1);
	b = kr_cbytes(&r);
	ck_assert_int_eq(b.len, 3);
	ck_assert_mem_eq(b.p, raw3, 3);
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);

	ck_assert(kstr_same(KSTR_NULL, KSTR_NULL));
	ck_assert(!kstr_same(KSTR_NULL, kstr_c("")));
	ck_assert(kstr_same(kstr_c("x"), kstr_c("x")));
}
END_TEST

START_TEST(test_string_errors)
{
	/* offset 0: int16 -2 */
	static const uint8_t neg[] = { 0xff, 0xfe, 'a' };
	/* offset 2: length 4 but 3 bytes follow */
	static const uint8_t past[] = { 0x00, 0x00, 0x00, 0x04, 'a', 'b', 'c' };
	/* compact length 5 (4 bytes) with 2 bytes left */
	static const uint8_t cpast[] = { 0x05, 'a', 'b' };
	/* bytes: int32 -2 at offset 1 */
	static const uint8_t bneg[] = { 0x07, 0xff, 0xff, 0xff, 0xfe };
	static const uint8_t bpast[] = { 0x7f, 0xff, 0xff, 0xff, 0x00 };
	static const uint8_t cbpast[] = { 0x02 };
	struct kr r;
	struct kstr s;
	struct kbytes b;

	kr_init(&r, neg, sizeof(neg));
	s = kr_str(&r);
	ck_assert_int_eq(s.len, -1);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "negative string length");

	kr_init(&r, past, sizeof(past));
	s = kr_str(&r);
	ck_assert_int_eq(s.len, 0);
	s = kr_str(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 2);
	ck_assert_str_eq(r.why, "string length past the end of input");
	/* The cursor did not move past the failed field. */
	ck_assert_uint_eq(kr_left(&r), 3);

	kr_init(&r, cpast, sizeof(cpast));
	s = kr_cstr(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "string length past the end of input");

	/* max_str: a 3-byte string when only 2 are allowed. */
	kr_init(&r, past + 2, 5);
	r.max_str = 2;
	s = kr_str(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_str_eq(r.why, "string longer than the limit");

	kr_init(&r, bneg, sizeof(bneg));
	(void)kr_i8(&r);
	b = kr_bytes(&r);
	ck_assert_int_eq(b.len, -1);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "negative bytes length");

	kr_init(&r, bpast, sizeof(bpast));
	b = kr_bytes(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_str_eq(r.why, "bytes length past the end of input");

	kr_init(&r, cbpast, sizeof(cbpast));
	b = kr_cbytes(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
}
END_TEST

START_TEST(test_fixed_overruns)
{
	static const uint8_t buf[16] = { 0 };
	struct kuuid u;
	struct kr r;

	/* Each fixed-width read with one byte too few fails at offset 1. */
	kr_init(&r, buf, 2);
	(void)kr_i8(&r);
	(void)kr_i16(&r);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "truncated int16");

	kr_init(&r, buf, 4);
	(void)kr_i8(&r);
	(void)kr_i32(&r);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "truncated int32");

	kr_init(&r, buf, 8);
	(void)kr_i8(&r);
	(void)kr_i64(&r);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "truncated int64");

	kr_init(&r, buf, 8);
	(void)kr_i8(&r);
	(void)kr_f64(&r);
	ck_assert_str_eq(r.why, "truncated float64");

	kr_init(&r, buf, 16);
	(void)kr_i8(&r);
	memset(&u, 0xaa, sizeof(u));
	kr_uuid(&r, &u);
	ck_assert_uint_eq(r.err_off, 1);
	ck_assert_str_eq(r.why, "truncated uuid");
	ck_assert(kuuid_is_zero(&u));

	kr_init(&r, buf, 0);
	ck_assert_int_eq(kr_bool(&r), 0);
	ck_assert_str_eq(r.why, "truncated int8");

	kr_init(&r, buf, 5);
	ck_assert_ptr_nonnull(kr_raw(&r, 5));
	ck_assert_ptr_null(kr_raw(&r, 1));
	ck_assert_uint_eq(r.err_off, 5);
}
END_TEST

START_TEST(test_sticky_error)
{
	static const uint8_t buf[] = { 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x42 };
	struct kr r;

	kr_init(&r, buf, 3);
	ck_assert_int_eq(kr_i16(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 0); /* fails at offset 2 */
	kr_fail(&r, "a later reason");   /* must not replace the first */
	/* Reads after the failure return zero/null and do not move. */
	ck_assert_int_eq(kr_i8(&r), 0);
	ck_assert_int_eq(kr_str(&r).len, -1);
	ck_assert_int_eq(kr_carray(&r), 0);
	ck_assert_uint_eq(kr_left(&r), 1);
	ck_assert_uint_eq(r.err_off, 2);
	ck_assert_str_eq(r.why, "truncated int32");

	kr_init(&r, buf, sizeof(buf));
	(void)kr_i16(&r);
	kr_fail(&r, "semantic reason");
	ck_assert_uint_eq(r.err_off, 2);
	ck_assert_str_eq(r.why, "semantic reason");
}
END_TEST

START_TEST(test_array_counts)
{
	/* int32 count 3 with 3 bytes left: accepted (one byte each). */
	static const uint8_t ok[] = { 0, 0, 0, 3, 1, 2, 3 };
	/* int32 count 4 with 3 bytes left. */
	static const uint8_t big[] = { 0, 0, 0, 4, 1, 2, 3 };
	/* Huge count 0x7fffffff. */
	static const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 0 };
	static const uint8_t null32[] = { 0xff, 0xff, 0xff, 0xff };
	static const uint8_t neg[] = { 0xff, 0xff, 0xff, 0xfe };
	/* Compact: 0 null, 1 empty, uvarint 0xffffffff = count 0xfffffffe. */
	static const uint8_t cnull[] = { 0x00, 0x01 };
	static const uint8_t chuge[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0 };
	uint8_t many[64];
	struct kr r;

	kr_init(&r, ok, sizeof(ok));
	ck_assert_int_eq(kr_array(&r), 3);
	ck_assert_int_eq(r.err, 0);

	kr_init(&r, big, sizeof(big));
	ck_assert_int_eq(kr_array(&r), 0);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "array count larger than the bytes left");

	kr_init(&r, huge, sizeof(huge));
	(void)kr_array(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_str_eq(r.why, "array count over the limit");

	kr_init(&r, null32, sizeof(null32));
	ck_assert_int_eq(kr_array(&r), -1);
	ck_assert_int_eq(r.err, 0);

	kr_init(&r, neg, sizeof(neg));
	(void)kr_array(&r);
	ck_assert_str_eq(r.why, "negative array count");

	kr_init(&r, cnull, sizeof(cnull));
	ck_assert_int_eq(kr_carray(&r), -1);
	ck_assert_int_eq(kr_carray(&r), 0);
	ck_assert_int_eq(r.err, 0);

	kr_init(&r, chuge, sizeof(chuge));
	(void)kr_carray(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "array count over the limit");

	/* max_array is enforced even when the bytes would allow the count. */
	memset(many, 0, sizeof(many));
	many[0] = 41; /* compact count 40 */
	kr_init(&r, many, sizeof(many));
	r.max_array = 39;
	(void)kr_carray(&r);
	ck_assert_str_eq(r.why, "array count over the limit");
	kr_init(&r, many, sizeof(many));
	r.max_array = 40;
	ck_assert_int_eq(kr_carray(&r), 40);
	ck_assert_int_eq(r.err, 0);
}
END_TEST

START_TEST(test_skip_tagged)
{
	/* Two tagged fields: tag 0 size 2 "hi", tag 300 (ac 02) size 1, then 0x55. */
	static const uint8_t two[] = { 0x02, 0x00, 0x02, 'h', 'i', 0xac, 0x02, 0x01, 0x09, 0x55 };
	/* Size past the end: tag 1 size 5 with 2 bytes left (size at offset 2). */
	static const uint8_t past[] = { 0x01, 0x01, 0x05, 'a', 'b' };
	/* Count 100 with 4 bytes left. */
	static const uint8_t many[] = { 0x64, 0x00, 0x00, 0x00, 0x00 };
	struct kr r;

	kr_init(&r, two, sizeof(two));
	kr_skip_tagged(&r);
	ck_assert_int_eq(r.err, 0);
	ck_assert_int_eq(kr_i8(&r), 0x55);

	kr_init(&r, (const uint8_t[]){ 0x00 }, 1);
	kr_skip_tagged(&r);
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);

	kr_init(&r, past, sizeof(past));
	kr_skip_tagged(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 2);
	ck_assert_str_eq(r.why, "tagged field size past the end of input");

	kr_init(&r, many, sizeof(many));
	kr_skip_tagged(&r);
	ck_assert_int_eq(r.err, 1);
	ck_assert_uint_eq(r.err_off, 0);
	ck_assert_str_eq(r.why, "tagged field count larger than the bytes left");

	kr_init(&r, two, 0);
	kr_skip_tagged(&r);
	ck_assert_str_eq(r.why, "truncated varint");
}
END_TEST

START_TEST(test_writer_cap_and_slots)
{
	struct kw w;
	uint8_t *out;
	size_t len;

	kw_init(&w, 10);
	kw_i64(&w, 1);
	kw_i16(&w, 2);
	ck_assert_int_eq(w.err, 0);
	ck_assert_uint_eq(w.len, 10);
	kw_i8(&w, 3); /* the 11th byte */
	ck_assert_int_eq(w.err, 1);
	ck_assert_str_eq(w.why, "message larger than the writer's cap");
	ck_assert_uint_eq(w.len, 10);
	ck_assert_uint_le(w.cap, 10);
	out = kw_take(&w, &len);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(len, 0);
	kw_fini(&w);

	/* A string too long for an int16 length. */
	{
		char *big = malloc(40000);

		memset(big, 'x', 40000);
		kw_init(&w, 1 << 20);
		kw_str(&w, (struct kstr){ big, 40000 });
		ck_assert_int_eq(w.err, 1);
		ck_assert_uint_eq(w.len, 0);
		kw_fini(&w);
		free(big);
	}

	/* Slots: size prefix patched after the body is written. */
	kw_init(&w, 1 << 16);
	size_t slot = kw_slot32(&w);
	kw_i16(&w, 18);
	kw_i16(&w, 3);
	size_t inner = kw_slot32(&w);
	kw_tags_empty(&w);
	kw_put32(&w, inner, -2);
	kw_put32(&w, slot, (int32_t)(w.len - slot - 4));
	ck_assert_int_eq(w.err, 0);
	{
		static const uint8_t exp[] = { 0, 0, 0, 9, 0, 18, 0, 3, 0xff, 0xff, 0xff, 0xfe, 0 };

		ck_assert_uint_eq(w.len, sizeof(exp));
		ck_assert_mem_eq(w.buf, exp, sizeof(exp));
	}
	kw_put32(&w, w.len - 2, 1); /* straddles the end */
	ck_assert_int_eq(w.err, 1);
	ck_assert_str_eq(w.why, "length slot outside the written bytes");
	kw_reset(&w);
	ck_assert_int_eq(w.err, 0);
	ck_assert_uint_eq(w.len, 0);
	kw_i32(&w, 0x01020304);
	out = kw_take(&w, &len);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(len, 4);
	ck_assert_uint_eq(out[0], 1);
	ck_assert_uint_eq(out[3], 4);
	ck_assert_ptr_null(w.buf);
	free(out);
	kw_fini(&w);

	/* Growth across many reallocations keeps the bytes. */
	kw_init(&w, 100000);
	for (int i = 0; i < 25000; i++) /* exactly the 100000-byte cap */
		kw_i32(&w, i);
	ck_assert_int_eq(w.err, 0);
	ck_assert_uint_eq(be32_load(w.buf + 4 * 12345), 12345);
	kw_i32(&w, 1);
	ck_assert_int_eq(w.err, 1);
	kw_fini(&w);
}
END_TEST

/* kw_expect(): one allocation for what follows, the bytes and the cap
 * untouched, no effect once in error. */
START_TEST(test_writer_expect)
{
	struct kw w;
	uint8_t big[3000];
	size_t len;
	uint8_t *out;

	memset(big, 0xab, sizeof(big));
	kw_init(&w, 4000);
	kw_i32(&w, 7);
	kw_expect(&w, 3000);
	ck_assert_uint_ge(w.cap, 3004);
	ck_assert_uint_eq(w.len, 4);
	{
		uint8_t *before = w.buf;

		kw_raw(&w, big, sizeof(big));
		ck_assert_ptr_eq(w.buf, before); /* no growth after the hint */
	}
	kw_expect(&w, 1u << 30);           /* clamped to the cap */
	ck_assert_uint_eq(w.cap, 4000);
	ck_assert_int_eq(w.err, 0);
	kw_raw(&w, big, 1000);               /* past the cap: the usual error */
	ck_assert_int_ne(w.err, 0);
	kw_expect(&w, 10);
	out = kw_take(&w, &len);
	ck_assert_ptr_null(out);
	kw_fini(&w);

	kw_init(&w, 100);
	kw_expect(&w, 50);
	kw_i16(&w, 0x0102);
	out = kw_take(&w, &len);
	ck_assert_uint_eq(len, 2);
	ck_assert_uint_eq(out[0], 1);
	ck_assert_uint_eq(out[1], 2);
	free(out);
	kw_fini(&w);
}
END_TEST

/*
 * Lending: byte fields of at least lend_min bytes are recorded, not
 * copied; the message (buf with each ref's bytes inserted at ref.at) is
 * the same bytes a copying writer gives, and the cap counts lent bytes.
 */
START_TEST(test_writer_lend)
{
	struct kw w, c;
	uint8_t big[100], small[3], msg[256];
	size_t len, clen, at = 0, m = 0;
	uint8_t *out, *cout;

	memset(big, 0x5a, sizeof(big));
	memset(small, 0x11, sizeof(small));
	for (int pass = 0; pass < 2; pass++) {
		struct kw *x = pass == 0 ? &w : &c;

		kw_init(x, 300);
		if (pass == 0)
			kw_lend(x, 50);
		kw_i16(x, 7);
		kw_bytes(x, (struct kbytes){ big, sizeof(big) });
		kw_cbytes(x, (struct kbytes){ small, sizeof(small) });
		kw_cbytes(x, (struct kbytes){ big, sizeof(big) });
		kw_i8(x, 9);
	}
	ck_assert_int_eq(w.err, 0);
	ck_assert_uint_eq(w.nrefs, 2);
	ck_assert_uint_eq(w.lent, 200);
	ck_assert_ptr_eq(w.refs[0].p, big);
	ck_assert_uint_eq(w.refs[0].n, 100);
	ck_assert_uint_eq(kw_size(&w), kw_size(&c));
	ck_assert_uint_eq(w.len + 200, c.len);
	/* buf with the refs put back is what the copying writer wrote */
	for (size_t i = 0; i < w.nrefs; i++) {
		memcpy(msg + m, w.buf + at, w.refs[i].at - at);
		m += w.refs[i].at - at;
		at = w.refs[i].at;
		memcpy(msg + m, w.refs[i].p, w.refs[i].n);
		m += w.refs[i].n;
	}
	memcpy(msg + m, w.buf + at, w.len - at);
	m += w.len - at;
	out = kw_take(&w, &len);
	cout = kw_take(&c, &clen);
	ck_assert_uint_eq(m, clen);
	ck_assert_mem_eq(msg, cout, clen);
	ck_assert_uint_eq(w.nrefs, 0); /* forgotten with the bytes */
	free(out);
	free(cout);
	kw_fini(&w);
	kw_fini(&c);

	/* lent bytes count against the cap, both ways round */
	kw_init(&w, 150);
	kw_lend(&w, 50);
	kw_bytes(&w, (struct kbytes){ big, sizeof(big) });
	ck_assert_int_eq(w.err, 0);
	kw_raw(&w, big, 60);
	ck_assert_int_ne(w.err, 0);
	kw_fini(&w);
	kw_init(&w, 150);
	kw_lend(&w, 50);
	kw_raw(&w, big, 60);
	kw_bytes(&w, (struct kbytes){ big, sizeof(big) });
	ck_assert_int_ne(w.err, 0);
	kw_fini(&w);
}
END_TEST

START_TEST(test_uuid)
{
	struct kuuid a, b;
	struct kw w;
	struct kr r;

	for (int i = 0; i < 16; i++)
		a.b[i] = (uint8_t)(0xf0 + i);
	kw_init(&w, 64);
	kw_uuid(&w, &a);
	ck_assert_uint_eq(w.len, 16);
	ck_assert_uint_eq(w.buf[0], 0xf0);
	ck_assert_uint_eq(w.buf[15], 0xff);
	kr_init(&r, w.buf, w.len);
	kr_uuid(&r, &b);
	ck_assert_mem_eq(a.b, b.b, 16);
	ck_assert(!kuuid_is_zero(&b));
	kw_fini(&w);
}
END_TEST

START_TEST(test_arena)
{
	struct karena *a = karena_new(20000);
	uint8_t *p, *q;

	ck_assert_ptr_nonnull(a);
	p = karena_alloc(a, 100);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % 16, 0);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(p[i], 0);
	memset(p, 0xee, 100);
	q = karena_alloc(a, 10000); /* larger than a chunk */
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq((uintptr_t)q % 16, 0);
	ck_assert_uint_eq(q[9999], 0);
	ck_assert_uint_eq(p[99], 0xee); /* earlier allocations stay put */
	ck_assert_uint_eq(karena_used(a), 112 + 10000);
	/* The cap: 20000 - 10112 = 9888 bytes left. */
	ck_assert_ptr_null(karena_alloc(a, 9889));
	ck_assert_ptr_nonnull(karena_alloc(a, 9888));
	ck_assert_ptr_null(karena_alloc(a, 1));
	ck_assert_ptr_null(karena_alloc(a, SIZE_MAX));
	karena_reset(a);
	ck_assert_uint_eq(karena_used(a), 0);
	p = karena_alloc(a, 64);
	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(p[i], 0); /* zeroed again after reuse */
	karena_free(a);
	karena_free(NULL);
}
END_TEST

START_TEST(test_kerr_table)
{
	/* Rows are contiguous from -1 and each name maps back to its code. */
	for (int c = -1; c <= 146; c++) {
		ck_assert(kerr_known((int16_t)c));
		ck_assert_int_eq(kerr_from_name(kerr_name((int16_t)c)), c);
		ck_assert_ptr_nonnull(kerr_message((int16_t)c));
	}
	ck_assert_str_eq(kerr_name(-1), "UNKNOWN_SERVER_ERROR");
	ck_assert_str_eq(kerr_name(0), "NONE");
	ck_assert_str_eq(kerr_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
	ck_assert_str_eq(kerr_name(6), "NOT_LEADER_OR_FOLLOWER");
	ck_assert_str_eq(kerr_name(35), "UNSUPPORTED_VERSION");
	ck_assert_str_eq(kerr_name(40), "INVALID_CONFIG");
	ck_assert_str_eq(kerr_name(42), "INVALID_REQUEST");
	ck_assert_str_eq(kerr_name(58), "SASL_AUTHENTICATION_FAILED");
	ck_assert_str_eq(kerr_name(74), "FENCED_LEADER_EPOCH");
	ck_assert_str_eq(kerr_name(100), "UNKNOWN_TOPIC_ID");
	ck_assert_str_eq(kerr_name(134), "READ_ONLY_TOPIC");
	ck_assert_str_eq(kerr_name(137), "UNKNOWN_CLUSTER_MIRROR");
	ck_assert_str_eq(kerr_name(146), "MIRROR_TOPIC_NOT_STOPPED");
	ck_assert_int_eq(KERR_UNKNOWN_CLUSTER_MIRROR, 137);
	ck_assert_int_eq(KERR_CLUSTER_MIRROR_NOT_EMPTY, 143);
	ck_assert_str_eq(kerr_name(147), "UNKNOWN_CODE");
	ck_assert_str_eq(kerr_name(-2), "UNKNOWN_CODE");
	ck_assert_int_eq(kerr_from_name("unknown_cluster_mirror"), 137);
	ck_assert_int_eq(kerr_from_name("KERR_INVALID_REQUEST"), 42);
	ck_assert_int_eq(kerr_from_name("NO_SUCH_ERROR"), -2);
	ck_assert_int_eq(kerr_from_name(NULL), -2);
	ck_assert(kerr_retriable(6));
	ck_assert(kerr_retriable(7));
	ck_assert(kerr_retriable(74));
	ck_assert(!kerr_retriable(0));
	ck_assert(!kerr_retriable(1));
	ck_assert(!kerr_retriable(35));
	ck_assert(!kerr_retriable(137));
	ck_assert(!kerr_retriable(999));
	ck_assert_str_eq(kerr_message(35), "The version of API is not supported.");
}
END_TEST

static Suite *kbuf_suite(void)
{
	Suite *s = suite_create("kbuf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_fixed_width_roundtrip);
	tcase_add_test(tc, test_uvarint_vectors);
	tcase_add_test(tc, test_varint_roundtrip_edges);
	tcase_add_test(tc, test_varint_malformed);
	tcase_add_test(tc, test_strings_and_bytes);
	tcase_add_test(tc, test_string_errors);
	tcase_add_test(tc, test_fixed_overruns);
	tcase_add_test(tc, test_sticky_error);
	tcase_add_test(tc, test_array_counts);
	tcase_add_test(tc, test_skip_tagged);
	tcase_add_test(tc, test_writer_cap_and_slots);
	tcase_add_test(tc, test_writer_expect);
	tcase_add_test(tc, test_writer_lend);
	tcase_add_test(tc, test_uuid);
	tcase_add_test(tc, test_arena);
	tcase_add_test(tc, test_kerr_table);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kbuf_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
