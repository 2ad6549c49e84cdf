/*
 * Unit tests for daemon/pipeline/groupsync_map.c: which destination offset the
 * consumer-group offset sync commits for a committed source offset, given
 * the partition's translation anchors and how far it is mirrored.  The
 * layouts are the ones the data plane records: aborted transactional data
 * and commit markers as source holes, a trailing marker not yet anchored,
 * a start above the source log start, a trimmed map, thousands of
 * transactions.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "compat.h"
#include "groupsync.h"
#include "mstate.h"
#include "xlate.h"

/* The map the anchors a[0..n) make (as the metadata log's model holds
 * it), NULL for none. */
static struct xlate *map_of(const struct manchor *a, size_t n)
{
	struct xlate *m;

	if (n == 0)
		return NULL;
	ck_assert_ptr_nonnull(m = xlate_new(0));
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(xlate_add(m, a[i].src, a[i].dst, NULL, 0), 0);
	return m;
}

static int64_t tr(const struct manchor *a, size_t n, int64_t src_done,
    int64_t dst_next, int64_t dst_start, int64_t c, int want_kind)
{
	struct xlate *m = map_of(a, n);
	int64_t d = -7;

	ck_assert_int_eq(groupsync_translate(m, src_done, dst_next, dst_start,
	    c, &d), want_kind);
	xlate_free(m);
	return d;
}

START_TEST(test_identity)
{
	/* No anchors: destination offsets are the source's. */
	ck_assert_int_eq(tr(NULL, 0, 100, 100, -1, 0, GS_EXACT), 0);
	ck_assert_int_eq(tr(NULL, 0, 100, 100, -1, 42, GS_EXACT), 42);
	ck_assert_int_eq(tr(NULL, 0, 100, 100, 0, 100, GS_EXACT), 100);
}
END_TEST

START_TEST(test_transactional_holes)
{
	/* Source: 0-2 plain, 3-5 committed txn, 6 marker, 7-8 aborted,
	 * 9 marker, 10 plain, 11-12 committed, 13 marker.  Destination
	 * 0-5 = source 0-5, 6 = source 10, 7-8 = source 11-12; the anchor
	 * (10, 6) was recorded when source 10 was copied; the trailing marker
	 * 13 has no anchor yet but src_done passed it (14), dst_next is 9. */
	const struct manchor a[] = { { 10, 6 } };

	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 4, GS_EXACT), 4);   /* inside a txn */
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 6, GS_EXACT), 6);   /* the marker: next is source 10 */
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 7, GS_EXACT), 6);   /* aborted data */
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 10, GS_EXACT), 6);
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 12, GS_EXACT), 8);
	/* The trailing marker maps to the destination end, not past it. */
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 13, GS_EXACT), 9);
	ck_assert_int_eq(tr(a, 1, 14, 9, -1, 14, GS_EXACT), 9);
}
END_TEST

START_TEST(test_past_mirrored_end)
{
	/* Source committed 120, mirrored up to 100 (destination 90): commit
	 * the mirrored end, never more; reported as lagging. */
	const struct manchor a[] = { { 20, 10 } };

	ck_assert_int_eq(tr(a, 1, 100, 90, -1, 120, GS_LAGGING), 90);
	ck_assert_int_eq(tr(a, 1, 100, 90, -1, 101, GS_LAGGING), 90);
	ck_assert_int_eq(tr(a, 1, 100, 90, -1, 100, GS_EXACT), 90);
}
END_TEST

START_TEST(test_before_start)
{
	/* Mirroring began at source log start 500 on an empty destination:
	 * anchor (500, 0).  A commit below 500 (records the source dropped
	 * before they were copied) resumes at the first mirrored record. */
	const struct manchor a[] = { { 500, 0 } };

	ck_assert_int_eq(tr(a, 1, 600, 100, 0, 300, GS_EXACT), 0);
	ck_assert_int_eq(tr(a, 1, 600, 100, 0, 550, GS_EXACT), 50);
	/* Retention removed destination 0-39: the earliest record left. */
	ck_assert_int_eq(tr(a, 1, 600, 100, 40, 510, GS_BEFORE_START), 40);
	ck_assert_int_eq(tr(a, 1, 600, 100, 40, 545, GS_EXACT), 45);
}
END_TEST

START_TEST(test_trimmed_and_foreign)
{
	/* Destination-only records (a foreign write skipped over) at 55-57:
	 * (100, 50) then (110, 55) and (110, 58) as lib/xlate records it. */
	const struct manchor a[] = { { 100, 50 }, { 110, 55 }, { 110, 58 } };

	ck_assert_int_eq(tr(a, 3, 200, 148, -1, 104, GS_EXACT), 54);
	ck_assert_int_eq(tr(a, 3, 200, 148, -1, 107, GS_EXACT), 58); /* source hole */
	ck_assert_int_eq(tr(a, 3, 200, 148, -1, 110, GS_EXACT), 58);
	ck_assert_int_eq(tr(a, 3, 200, 148, -1, 150, GS_EXACT), 98);
}
END_TEST

START_TEST(test_many_transactions)
{
	/*
	 * 5,000 transactions of 1-7 records, each followed by its marker (a
	 * one-offset source hole), the way the data plane anchors them: the
	 * map holds them in delta-encoded blocks.  Every committed offset
	 * translates to where a consumer that read up to it resumes: a record
	 * to its copy, a marker to the next transaction's first record.
	 */
	struct manchor *a = calloc(5000, sizeof(*a));
	int64_t *want = calloc(50000, sizeof(*want));
	int64_t s = 0, d = 0, got;
	struct xlate *m;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(want);
	for (size_t t = 0; t < 5000; t++) {
		int k = 1 + (int)(t * 7919 % 7);

		if (t > 0) {
			a[t - 1].src = s;
			a[t - 1].dst = d;
		}
		for (int r = 0; r < k; r++)
			want[s++] = d++;
		want[s++] = d;	/* the marker: the next record's copy */
	}
	a[4999].src = s;	/* the last transaction's marker */
	a[4999].dst = d;
	m = map_of(a, 5000);
	ck_assert_uint_eq(xlate_count(m), 5000);
	for (int64_t c = 0; c < s; c++) {
		ck_assert_int_ge(groupsync_translate(m, s, d, -1, c, &got), 0);
		ck_assert_msg(got == want[c], "source %lld: %lld, want %lld",
		    (long long)c, (long long)got, (long long)want[c]);
	}
	xlate_free(m);
	free(a);
	free(want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("groupsync");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_identity);
	tcase_add_test(tc, test_transactional_holes);
	tcase_add_test(tc, test_past_mirrored_end);
	tcase_add_test(tc, test_before_start);
	tcase_add_test(tc, test_trimmed_and_foreign);
	tcase_add_test(tc, test_many_transactions);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
