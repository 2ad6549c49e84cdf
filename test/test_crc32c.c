/* Unit tests for crc32c: known vectors and hardware/software agreement. */
#include "config.h"

#include <check.h>
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

static Suite *crc_suite(void)
{
	Suite *s = suite_create("crc32c");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_known_vectors);
	tcase_add_test(tc, test_hw_sw_agree_and_incremental);
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
