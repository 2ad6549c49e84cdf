/* Unit tests for crc32c: known vectors and hardware/software agreement. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

START_TEST(test_known_vectors)
{
	/* RFC 3720 (iSCSI) B.4 test vectors. */
	uint8_t zeros[32] = { 0 }, ones[32], inc[32];

	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++)
		inc[i] = (uint8_t)i;
	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(crc32c(0, zeros, 32), 0x8a9136aau);
	ck_assert_uint_eq(crc32c(0, ones, 32), 0x62a8ab43u);
	ck_assert_uint_eq(crc32c(0, inc, 32), 0x46dd794eu);
	ck_assert_uint_eq(crc32c_sw(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(test_hw_sw_agree_and_incremental)
{
	enum { N = 4099 };
	uint8_t *buf = malloc(N + 8);
	uint32_t seed = 12345;

	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < N + 8; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	/* Every length and misalignment up to 64, then a large buffer. */
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len < 64; len++)
			ck_assert_uint_eq(crc32c(0, buf + off, len),
			    crc32c_sw(0, buf + off, len));
	ck_assert_uint_eq(crc32c(0, buf, N), crc32c_sw(0, buf, N));
	/* Chaining over pieces equals one pass. */
	uint32_t whole = crc32c(0, buf, N);
	uint32_t part = crc32c(0, buf, 1000);
	part = crc32c(part, buf + 1000, N - 1000);
	ck_assert_uint_eq(part, whole);
	free(buf);
}
END_TEST

static uint32_t rnd_state = 2463534242u;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

/*
 * The hardware CRC runs long buffers in three lanes joined by linearity
 * (crc32c.c, CRC_LANES_MIN): every length around the point where the
 * lanes start, lengths that leave 0..23 bytes after the lanes, random
 * lengths up to 1 MiB at random misalignments, and a chained start value,
 * all equal to the table-driven CRC.
 */
START_TEST(test_hw_lanes_agree)
{
	enum { N = (1 << 20) + 64 };
	uint8_t *buf = malloc(N);

	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < N; i++)
		buf[i] = (uint8_t)rnd();
	for (size_t len = 700; len < 1100; len++)
		for (size_t off = 0; off < 8; off += 3)
			ck_assert_uint_eq(crc32c(0, buf + off, len),
			    crc32c_sw(0, buf + off, len));
	for (size_t k = 0; k < 24; k++) {
		size_t len = 24 * 4096 + k;

		ck_assert_uint_eq(crc32c(0, buf + 1, len), crc32c_sw(0, buf + 1, len));
		ck_assert_uint_eq(crc32c(0xdeadbeefu, buf, len),
		    crc32c_sw(0xdeadbeefu, buf, len));
	}
	for (int i = 0; i < 200; i++) {
		size_t off = rnd() % 64, len = rnd() % (N - 64);
		uint32_t start = rnd();

		ck_assert_uint_eq(crc32c(start, buf + off, len),
		    crc32c_sw(start, buf + off, len));
	}
	/* A pattern with long runs: 1 MiB of 0xff. */
	memset(buf, 0xff, N);
	ck_assert_uint_eq(crc32c(0, buf, 1 << 20), crc32c_sw(0, buf, 1 << 20));
	free(buf);
}
END_TEST

/*
 * Replacing bytes anywhere in a buffer of any length: the fixed-up CRC
 * equals the full recompute (both implementations), for windows at the
 * start, the middle and the very end (a 0-byte tail), buffers from 1 byte
 * to 4 MiB, and deltas of every length up to 40.
 */
START_TEST(test_fixup_equals_recompute)
{
	static const size_t sizes[] = { 1, 2, 7, 8, 9, 36, 61, 64, 100, 255, 256,
		1000, 4096, 4097, 65535, 65536, 65537, 1 << 20, (4 << 20) + 3 };
	size_t maxlen = (4 << 20) + 3;
	uint8_t *buf = malloc(maxlen), *neu = malloc(maxlen);
	uint8_t delta[40];

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(neu);
	for (size_t i = 0; i < maxlen; i++)
		buf[i] = (uint8_t)rnd();
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t len = sizes[si];
		uint32_t old = crc32c(0, buf, len);

		for (int trial = 0; trial < 12; trial++) {
			size_t dlen = 1 + rnd() % (len < 40 ? len : 40);
			size_t at = trial == 0 ? 0 : trial == 1 ? len - dlen :
			    rnd() % (len - dlen + 1);
			size_t tail = len - at - dlen;

			memcpy(neu + at, buf + at, dlen);
			for (size_t i = 0; i < dlen; i++) {
				neu[at + i] = (uint8_t)rnd();
				delta[i] = buf[at + i] ^ neu[at + i];
			}
			/* neu = buf with the window replaced (copy only what
			 * the CRCs below read) */
			memcpy(neu, buf, at);
			memcpy(neu + at + dlen, buf + at + dlen, tail);
			uint32_t want = crc32c(0, neu, len);

			ck_assert_uint_eq(want, crc32c_sw(0, neu, len));
			ck_assert_msg(crc32c_fixup(old, delta, dlen, tail) == want,
			    "len %zu, %zu bytes at %zu: fix-up 0x%08x, recompute 0x%08x",
			    len, dlen, at, crc32c_fixup(old, delta, dlen, tail), want);
		}
	}
	free(buf);
	free(neu);
}
END_TEST

/* x^(8n) mod P is what n zero bytes do to a bare CRC register. */
START_TEST(test_zeros_equals_feeding_zeros)
{
	static uint8_t zeros[70000];

	for (int trial = 0; trial < 200; trial++) {
		uint32_t reg = rnd();
		size_t n = trial < 70 ? (size_t)trial : rnd() % sizeof(zeros);
		/* bare register: crc32c() inverts on the way in and out */
		uint32_t want = ~crc32c(~reg, zeros, n);

		ck_assert_uint_eq(crc32c_zeros(reg, n), want);
		ck_assert_uint_eq(crc32c_zeros_sw(reg, n), want);
	}
	/* PCLMULQDQ and portable multiplication agree on every digit. */
	for (int trial = 0; trial < 20000; trial++) {
		uint32_t reg = rnd();
		size_t n = trial < 1024 ? (size_t)trial << (8 * (trial % 4)) : rnd();

		ck_assert_uint_eq(crc32c_zeros(reg, n), crc32c_zeros_sw(reg, n));
	}
	printf("crc32c_zeros: %s multiplication\n",
	    crc32c_clmul_available() ? "PCLMULQDQ" : "portable");
	ck_assert_uint_eq(crc32c_zeros(0, 12345), 0);
#if SIZE_MAX > 0xffffffffu
	/* Beyond 4 GiB: (2^32 + 5) zeros = 2^32 zeros then 5. */
	{
		uint32_t a = crc32c_zeros(crc32c_zeros(0x12345678u,
		    (size_t)1 << 32), 5);

		ck_assert_uint_eq(crc32c_zeros(0x12345678u, ((size_t)1 << 32) + 5), a);
		ck_assert_uint_eq(crc32c_zeros(crc32c_zeros(0x12345678u,
		    (size_t)1 << 31), (size_t)1 << 31), crc32c_zeros(0x12345678u,
		    (size_t)1 << 32));
	}
#endif
}
END_TEST

static Suite *crc_suite(void)
{
	Suite *s = suite_create("crc32c");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_known_vectors);
	tcase_add_test(tc, test_hw_sw_agree_and_incremental);
	tcase_add_test(tc, test_fixup_equals_recompute);
	tcase_add_test(tc, test_zeros_equals_feeding_zeros);
	tcase_add_test(tc, test_hw_lanes_agree);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(crc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
