/*
 * Unit tests for xlate: the exact offset translation map, checked against a
 * naive model that stores every offset.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xlate.h"

START_TEST(test_identity_and_empty)
{
	struct xlate *m = xlate_new(16);
	int64_t out = -7;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(xlate_is_identity(m), 0);
	ck_assert_int_eq(xlate_src_to_dst(m, 5, &out), XLATE_UNMAPPED);
	ck_assert_int_eq(out, -7);
	ck_assert_int_eq(xlate_add(m, 0, 0, NULL, 0), 0);
	/* Offsets advancing 1:1 store nothing more. */
	for (int64_t o = 1; o < 1000; o++)
		ck_assert_int_eq(xlate_add(m, o, o, NULL, 0), 0);
	ck_assert_uint_eq(xlate_count(m), 1);
	ck_assert_int_eq(xlate_is_identity(m), 1);
	ck_assert_int_eq(xlate_src_to_dst(m, 123456789, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 123456789);
	ck_assert_int_eq(xlate_dst_to_src(m, 42, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 42);
	xlate_free(m);
}
END_TEST

START_TEST(test_hole_lookups)
{
	struct xlate *m = xlate_new(16);
	int64_t out;

	/* src 100..104 -> dst 0..4, src 105..109 removed, src 110.. -> dst 5.. */
	ck_assert_int_eq(xlate_add(m, 100, 0, NULL, 0), 0);
	ck_assert_int_eq(xlate_add(m, 110, 5, NULL, 0), 0);
	ck_assert_int_eq(xlate_is_identity(m), 0);
	ck_assert_int_eq(xlate_src_to_dst(m, 99, &out), XLATE_UNMAPPED);
	ck_assert_int_eq(xlate_src_to_dst(m, 104, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 4);
	ck_assert_int_eq(xlate_src_to_dst(m, 105, &out), XLATE_NEXT);
	ck_assert_int_eq(out, 5);
	ck_assert_int_eq(xlate_src_to_dst(m, 109, &out), XLATE_NEXT);
	ck_assert_int_eq(out, 5);
	ck_assert_int_eq(xlate_src_to_dst(m, 110, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 5);
	ck_assert_int_eq(xlate_src_to_dst(m, 200, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 95);
	ck_assert_int_eq(xlate_dst_to_src(m, 4, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 104);
	ck_assert_int_eq(xlate_dst_to_src(m, 5, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 110);
	ck_assert_int_eq(xlate_dst_to_src(m, -1, &out), XLATE_UNMAPPED);
	xlate_free(m);
}
END_TEST

START_TEST(test_add_errors_no_cap)
{
	struct xlate *m = xlate_new(0);
	char err[200];
	size_t before;

	ck_assert_int_eq(xlate_add(m, -1, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "translation anchor -1 -> 0: offsets must not be negative");
	ck_assert_int_eq(xlate_add(m, 10, 10, err, sizeof(err)), 0);
	ck_assert_int_eq(xlate_add(m, 9, 20, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "translation anchor 9 -> 20 goes backwards (last anchor 10 -> 10)");
	ck_assert_int_eq(xlate_add(m, 20, 9, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "translation anchor 20 -> 9 goes backwards (last anchor 10 -> 10)");
	/* No cap: 100,000 distinct shifts are all kept (the old cap was 4096). */
	for (int64_t i = 1; i <= 100000; i++)
		ck_assert_int_eq(xlate_add(m, 10 + i * 10, 10 + i * 9, err, sizeof(err)), 0);
	ck_assert_uint_eq(xlate_count(m), 100001);
	ck_assert_int_eq(xlate_at(m, 0).src, 10);
	/* two one-byte deltas an anchor in sealed blocks, with headers */
	before = xlate_bytes(m);
	ck_assert_uint_ge(before, 100001 * 2);
	ck_assert_uint_le(before, 100001 * 4);
	for (int64_t i = 0; i < 100000; i += 997) {
		int64_t out;

		ck_assert_int_eq(xlate_src_to_dst(m, 10 + i * 10 + 3, &out), XLATE_EXACT);
		ck_assert_int_eq(out, 10 + i * 9 + 3);
		ck_assert_int_eq(xlate_src_to_dst(m, 10 + i * 10 + 9, &out), XLATE_NEXT);
		ck_assert_int_eq(out, 10 + (i + 1) * 9);
	}
	/* a large trim gives memory back */
	ck_assert_uint_eq(xlate_trim_both(m, 10 + 99990 * 10, 10 + 99990 * 9), 99990);
	ck_assert_uint_eq(xlate_count(m), 11);
	ck_assert_uint_lt(xlate_bytes(m), before / 40);
	xlate_free(m);
}
END_TEST

START_TEST(test_holes_on_both_sides)
{
	struct xlate *m = xlate_new(8);
	int64_t out;

	/* An empty batch at the start: src 0..9 gone, nothing written yet. */
	ck_assert_int_eq(xlate_add(m, 0, 0, NULL, 0), 0);
	ck_assert_int_eq(xlate_add(m, 10, 0, NULL, 0), 0);
	ck_assert_uint_eq(xlate_count(m), 2);
	ck_assert_int_eq(xlate_src_to_dst(m, 5, &out), XLATE_NEXT);
	ck_assert_int_eq(out, 0);
	ck_assert_int_eq(xlate_dst_to_src(m, 0, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 10);
	ck_assert_int_eq(xlate_add(m, 20, 10, NULL, 0), 0); /* same delta: dropped */
	ck_assert_uint_eq(xlate_count(m), 2);
	/* src 20..24 removed, then dst 10..16 written by someone else */
	ck_assert_int_eq(xlate_add(m, 25, 10, NULL, 0), 0);
	ck_assert_int_eq(xlate_add(m, 25, 15, NULL, 0), 0);
	ck_assert_uint_eq(xlate_count(m), 4);
	ck_assert_int_eq(xlate_add(m, 25, 17, NULL, 0), 0); /* third on src 25: replaces */
	ck_assert_uint_eq(xlate_count(m), 4);
	ck_assert_int_eq(xlate_at(m, 3).src, 25);
	ck_assert_int_eq(xlate_at(m, 3).dst, 17);
	ck_assert_int_eq(xlate_src_to_dst(m, 19, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 9);
	/* a source record in the hole resumes at the next mapped one, past the foreign records */
	ck_assert_int_eq(xlate_src_to_dst(m, 22, &out), XLATE_NEXT);
	ck_assert_int_eq(out, 17);
	ck_assert_int_eq(xlate_dst_to_src(m, 12, &out), XLATE_NEXT);
	ck_assert_int_eq(out, 25);
	ck_assert_int_eq(xlate_dst_to_src(m, 17, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 25);
	ck_assert_int_eq(xlate_src_to_dst(m, 30, &out), XLATE_EXACT);
	ck_assert_int_eq(out, 22);
	/* beyond int64 there is no partner */
	ck_assert_int_eq(xlate_dst_to_src(m, INT64_MAX, &out), XLATE_UNMAPPED);
	xlate_free(m);
}
END_TEST

START_TEST(test_trim_and_persist)
{
	struct xlate *m = xlate_new(64), *copy = xlate_new(64);
	int64_t a, b;

	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(xlate_add(m, i * 100, i * 90, NULL, 0), 0);
	ck_assert_uint_eq(xlate_count(m), 10);
	for (size_t i = 0; i < xlate_count(m); i++)
		ck_assert_int_eq(xlate_add(copy, xlate_at(m, i).src,
		    xlate_at(m, i).dst, NULL, 0), 0);
	for (int64_t s = 0; s < 1100; s++) {
		int ra = xlate_src_to_dst(m, s, &a), rb = xlate_src_to_dst(copy, s, &b);

		ck_assert_int_eq(ra, rb);
		ck_assert_int_eq(a, b);
	}
	xlate_trim(m, 450);
	ck_assert_uint_eq(xlate_count(m), 6);
	ck_assert_int_eq(xlate_at(m, 0).src, 400);
	/* anchor 400 -> 360 maps 90 offsets; src 490..499 are a hole */
	ck_assert_int_eq(xlate_src_to_dst(m, 450, &a), XLATE_EXACT);
	ck_assert_int_eq(a, 410);
	ck_assert_int_eq(xlate_src_to_dst(m, 489, &a), XLATE_EXACT);
	ck_assert_int_eq(a, 449);
	ck_assert_int_eq(xlate_src_to_dst(m, 490, &a), XLATE_NEXT);
	ck_assert_int_eq(a, 450);
	ck_assert_int_eq(xlate_src_to_dst(m, 410, &a), XLATE_EXACT);
	ck_assert_int_eq(a, 370);
	ck_assert_int_eq(xlate_src_to_dst(m, 399, &a), XLATE_UNMAPPED);
	xlate_clear(m);
	ck_assert_uint_eq(xlate_count(m), 0);
	xlate_free(m);
	xlate_free(copy);
}
END_TEST

/* The naive model: every offset of a window, explicitly. */
#define SPAN 4000
struct model {
	int64_t s0, d0;
	int64_t s2d[SPAN]; /* -1: hole */
	int64_t d2s[SPAN]; /* -1: destination-only */
	int64_t s_end, d_end; /* one past the last generated */
};

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33) % n;
}

/* Expected lookup from the model; the map extends the last run past the end. */
static int model_lookup(const struct model *md, int64_t v, int by_src, int64_t *out)
{
	const int64_t *tab = by_src ? md->s2d : md->d2s;
	int64_t base = by_src ? md->s0 : md->d0, end = by_src ? md->s_end : md->d_end;
	int64_t first = -1;

	for (int64_t i = 0; i < end - base; i++)
		if (tab[i] >= 0) {
			first = base + i;
			break;
		}
	if (first < 0 || v < first)
		return XLATE_UNMAPPED;
	if (v >= end) {
		/* past the model: 1:1 from the last mapped offset */
		int64_t i = end - base - 1;

		while (tab[i] < 0)
			i--;
		*out = tab[i] + (v - (base + i));
		return XLATE_EXACT;
	}
	if (tab[v - base] >= 0) {
		*out = tab[v - base];
		return XLATE_EXACT;
	}
	for (int64_t i = v - base + 1; i < end - base; i++)
		if (tab[i] >= 0) {
			*out = tab[i];
			return XLATE_NEXT;
		}
	return -99; /* the generator always ends with a mapped run */
}

/* Checks every offset of the window (and past it) against the model, from
 * src_min and dst_min up (below them the map may have been trimmed). */
static void check_map(const struct xlate *m, const struct model *md, int round,
    int64_t src_min, int64_t dst_min)
{
	for (int64_t v = src_min; v < md->s0 + SPAN + 50; v++) {
		int64_t got = -5, want = -5;
		int rw = model_lookup(md, v, 1, &want);
		int rg = xlate_src_to_dst(m, v, &got);

		ck_assert_msg(rg == rw && (rw == XLATE_UNMAPPED || got == want),
		    "round %d (from %lld) src %lld: got %d/%lld want %d/%lld", round, (long long)src_min,
		    (long long)v, rg, (long long)got, rw, (long long)want);
	}
	for (int64_t v = dst_min; v < md->d0 + SPAN + 50; v++) {
		int64_t got = -5, want = -5;
		int rw = model_lookup(md, v, 0, &want);
		int rg = xlate_dst_to_src(m, v, &got);

		ck_assert_msg(rg == rw && (rw == XLATE_UNMAPPED || got == want),
		    "round %d (from %lld) dst %lld: got %d/%lld want %d/%lld", round, (long long)dst_min,
		    (long long)v, rg, (long long)got, rw, (long long)want);
	}
}

static struct xlate *copy_of(const struct xlate *m)
{
	struct xlate *c = xlate_new(0);

	for (size_t i = 0; i < xlate_count(m); i++)
		ck_assert_int_eq(xlate_add(c, xlate_at(m, i).src,
		    xlate_at(m, i).dst, NULL, 0), 0);
	return c;
}

static void assert_same_anchors(const struct xlate *a, const struct xlate *b)
{
	ck_assert_uint_eq(xlate_count(a), xlate_count(b));
	for (size_t i = 0; i < xlate_count(a); i++) {
		ck_assert_int_eq(xlate_at(a, i).src, xlate_at(b, i).src);
		ck_assert_int_eq(xlate_at(a, i).dst, xlate_at(b, i).dst);
	}
}

START_TEST(test_random_against_model)
{
	static struct model md;

	rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
	for (int round = 0; round < 40; round++) {
		struct xlate *m = xlate_new(round % 2 ? SPAN : 0), *c;
		int64_t s, d;
		size_t gaps = 0, runs = 0;
		int in_gap = 0;
		/* some rounds skip a lot, with long runs of skips on both sides */
		uint32_t src_pct = round % 4 == 1 ? 30 : 8;
		uint32_t gap_pct = round % 4 == 1 ? 60 : 12;

		memset(md.s2d, 0xff, sizeof(md.s2d));
		memset(md.d2s, 0xff, sizeof(md.d2s));
		md.s0 = s = rnd(1000);
		md.d0 = d = rnd(1000);
		/*
		 * Pairs with holes on either side or both; the map is told as the
		 * data plane does: an anchor where each gap ends, and every pair.
		 */
		for (int first = 1; s - md.s0 < SPAN - 20 && d - md.d0 < SPAN - 20; first = 0) {
			uint32_t r = rnd(100);

			if (!first && r < gap_pct) {
				if (r < src_pct)
					s += 1 + rnd(round % 3 == 0 ? 1 : 7);
				else
					d += 1 + rnd(3);
				ck_assert_int_eq(xlate_add(m, s, d, NULL, 0), 0);
				gaps++;
				runs += !in_gap;
				in_gap = 1;
			} else {
				md.s2d[s - md.s0] = d;
				md.d2s[d - md.d0] = s;
				ck_assert_int_eq(xlate_add(m, s, d, NULL, 0), 0);
				s++;
				d++;
				in_gap = 0;
			}
		}
		/* end on a mapped run */
		for (int k = 0; k < 3; k++) {
			md.s2d[s - md.s0] = d;
			md.d2s[d - md.d0] = s;
			ck_assert_int_eq(xlate_add(m, s, d, NULL, 0), 0);
			s++;
			d++;
		}
		md.s_end = s;
		md.d_end = d;
		/*
		 * Compact: skips in a row merge, so at most two anchors per run
		 * of skips (a hole on each side), plus the first; and at least
		 * one per run (each changes the delta or leaves a hole).
		 */
		ck_assert_uint_le(xlate_count(m), 2 * runs + 1);
		ck_assert_uint_ge(xlate_count(m), runs / 2);
		ck_assert_uint_le(xlate_count(m), gaps + 1);
		check_map(m, &md, round, 0, 0);
		/* Replaying the stored anchors gives the same list (persistence). */
		c = copy_of(m);
		assert_same_anchors(m, c);
		/* Trims: everything at or above both minimums answers as before. */
		for (int t = 0; t < 4; t++) {
			int64_t smin = md.s0 + rnd(SPAN), dmin = md.d0 + rnd(SPAN);
			struct xlate *tr = copy_of(m), *r;
			size_t went;

			if (t == 3)
				dmin = INT64_MAX; /* xlate_trim(): source side only */
			went = xlate_trim_both(tr, smin, dmin);
			ck_assert_uint_eq(xlate_count(tr), xlate_count(m) - went);
			ck_assert_uint_ge(xlate_count(tr), 1);
			check_map(tr, &md, round, smin, t == 3 ? md.d0 + SPAN : dmin);
			/* the trimmed list replays to itself too */
			r = copy_of(tr);
			assert_same_anchors(tr, r);
			xlate_free(r);
			xlate_free(tr);
		}
		xlate_free(c);
		xlate_free(m);
	}
}
END_TEST

/*
 * The block form under edits: a transactional partition's anchors (each
 * transaction's records, then its marker: one anchor per transaction, none
 * merges) kept beside a plain array.  Trims that end inside a block,
 * retracts that reach back into sealed blocks, and adds after them leave
 * the same anchors, in order, with the same lookups as the array.
 */
static int plain_lookup(const struct xlate_anchor *a, size_t n, int64_t v,
    int by_src, int64_t *out)
{
	int rc = XLATE_EXACT;

	for (;;) {
		size_t i = n;

		while (i > 0 && (by_src ? a[i - 1].src : a[i - 1].dst) > v)
			i--;
		if (i == 0)
			return XLATE_UNMAPPED;
		int64_t from = by_src ? a[i - 1].src : a[i - 1].dst;
		int64_t to = by_src ? a[i - 1].dst : a[i - 1].src;
		if (i < n) {
			int64_t span = a[i].src - a[i - 1].src < a[i].dst - a[i - 1].dst ?
			    a[i].src - a[i - 1].src : a[i].dst - a[i - 1].dst;

			if (v - from >= span) {
				v = by_src ? a[i].src : a[i].dst;
				rc = XLATE_NEXT;
				continue;
			}
		}
		*out = to + (v - from);
		return rc;
	}
}

START_TEST(test_blocks_under_edits)
{
	enum { CAP = 6000 };
	struct xlate_anchor *ref = calloc(CAP, sizeof(*ref)), got[300];
	struct xlate *m = xlate_new(0);
	size_t n = 0;
	int64_t s = 0, d = 0;

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(m);
	rng_state = 42;
	for (int round = 0; round < 60; round++) {
		uint32_t op = rnd(10), k;

		if (op < 5 || n < 10) {
			/* transactions: records, then a marker; a big source
			 * jump (retention) now and then: 9-byte deltas */
			for (k = 1 + rnd(300); k > 0 && n < CAP; k--) {
				int64_t ds = 2 + rnd(50) +
				    (rnd(100) == 0 ? (int64_t)1 << 40 : 0);

				/* fewer destination offsets: the shift grows
				 * each time, so no anchor merges */
				s += ds;
				d += 1 + rnd((uint32_t)(ds - 1 < 49 ? ds - 1 : 49));
				ck_assert_int_eq(xlate_add(m, s, d, NULL, 0), 0);
				ref[n].src = s;
				ref[n].dst = d;
				n++;
			}
		} else if (op < 7) {
			k = rnd((uint32_t)n / 2);   /* a trim, anywhere */
			xlate_drop_first(m, k);
			memmove(ref, ref + k, (n - k) * sizeof(*ref));
			n -= k;
		} else {
			k = rnd((uint32_t)(n < 400 ? n : 400)); /* a retract */
			ck_assert_uint_eq(xlate_count_above_dst(m, ref[n - k - 1].dst),
			    (size_t)k);
			ck_assert_int_eq(xlate_drop_last(m, k), 0);
			n -= k;
			s = ref[n - 1].src;
			d = ref[n - 1].dst;
		}
		ck_assert_uint_eq(xlate_count(m), n);
		for (size_t i = 0; i < n; i += 1 + rnd(5)) {
			struct xlate_anchor a = xlate_at(m, i);

			ck_assert_msg(a.src == ref[i].src && a.dst == ref[i].dst,
			    "round %d anchor %zu of %zu", round, i, n);
		}
		for (size_t i = 0, c; i < n; i += c) {
			c = xlate_read(m, i, got, 1 + rnd(300));
			ck_assert_uint_ge(c, 1);
			ck_assert_int_eq(memcmp(got, ref + i, c * sizeof(*got)), 0);
		}
		for (int q = 0; q < 200; q++) {
			size_t i = rnd((uint32_t)n);
			int64_t v = (q & 1 ? ref[i].src : ref[i].dst) + rnd(60) - 5;
			int64_t w = -5, g = -5;
			int rw = plain_lookup(ref, n, v, q & 1, &w);
			int rg = q & 1 ? xlate_src_to_dst(m, v, &g) :
			    xlate_dst_to_src(m, v, &g);

			ck_assert_msg(rg == rw && (rw == XLATE_UNMAPPED || g == w),
			    "round %d %s %lld: got %d/%lld want %d/%lld", round,
			    q & 1 ? "src" : "dst", (long long)v, rg, (long long)g,
			    rw, (long long)w);
		}
	}
	/* a transaction's anchor costs a few bytes, not sixteen */
	ck_assert_uint_lt(xlate_bytes(m), sizeof(*ref) * n / 2 + 16384);
	xlate_free(m);
	free(ref);
}
END_TEST

static Suite *xlate_suite(void)
{
	Suite *s = suite_create("xlate");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_identity_and_empty);
	tcase_add_test(tc, test_hole_lookups);
	tcase_add_test(tc, test_add_errors_no_cap);
	tcase_add_test(tc, test_holes_on_both_sides);
	tcase_add_test(tc, test_trim_and_persist);
	tcase_add_loop_test(tc, test_random_against_model, 0, 4);
	tcase_add_test(tc, test_blocks_under_edits);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(xlate_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
