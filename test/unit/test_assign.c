/*
 * Unit tests for lib/assign: the partition assignment of multi-instance
 * mode.  Locality, stability, balance, member loss, one member, no member,
 * determinism whatever the input order, bad input, and a large input.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "compat.h"

#define MAXP 100000

static struct assign_part P[MAXP];
static const char *O[MAXP];
static char err[256];
static char topics[MAXP][32];

/* n partitions of topic "t<i/parts_per_topic>", leaders and owners none. */
static void mkparts(size_t n, size_t per_topic)
{
	for (size_t i = 0; i < n; i++) {
		snprintf(topics[i], sizeof(topics[i]), "t%05zu", i / per_topic);
		P[i].mirror = "m";
		P[i].topic = topics[i];
		P[i].partition = (int32_t)(i % per_topic);
		P[i].leader = -1;
		P[i].current = NULL;
	}
}

static void run(const struct assign_member *m, size_t nm, size_t np)
{
	ck_assert_msg(assign_run(m, nm, P, np, O, err, sizeof(err)) == 0, "%s",
	    err);
}

static size_t count(size_t np, const char *id)
{
	size_t c = 0;

	for (size_t i = 0; i < np; i++)
		c += O[i] != NULL && strcmp(O[i], id) == 0;
	return c;
}

static const struct assign_member M3[] = {
	{ "c", 3 }, { "a", 1 }, { "b", 2 },
};

START_TEST(test_one_member_gets_everything)
{
	static const struct assign_member one[] = { { "solo", 7 } };

	mkparts(50, 10);
	for (size_t i = 0; i < 50; i++) {
		P[i].leader = (int32_t)(i % 4);        /* never broker 7 */
		P[i].current = i % 3 == 0 ? "gone" : i % 3 == 1 ? "" : NULL;
	}
	run(one, 1, 50);
	for (size_t i = 0; i < 50; i++)
		ck_assert_str_eq(O[i], "solo");
}
END_TEST

START_TEST(test_no_member_no_owner)
{
	mkparts(5, 5);
	P[0].current = "a";
	O[0] = "x";
	run(NULL, 0, 5);
	for (size_t i = 0; i < 5; i++)
		ck_assert_ptr_null(O[i]);
}
END_TEST

/* A partition led by a member's local broker goes to that member, even
 * away from a current owner that is still a member. */
START_TEST(test_locality)
{
	mkparts(6, 6);
	for (size_t i = 0; i < 6; i++) {
		P[i].leader = (int32_t)(i % 3) + 1;   /* brokers 1, 2, 3 */
		P[i].current = "a";
	}
	static const char *const want[] = { "a", "b", "c" };
	run(M3, 3, 6);
	for (size_t i = 0; i < 6; i++)
		ck_assert_str_eq(O[i], want[i % 3]);
	ck_assert_str_eq(O[0], "a");
	ck_assert_str_eq(O[1], "b");
	ck_assert_str_eq(O[2], "c");

	/* Two members beside one broker: the lower instance id. */
	static const struct assign_member twin[] = { { "z", 5 }, { "y", 5 } };
	mkparts(3, 3);
	for (size_t i = 0; i < 3; i++)
		P[i].leader = 5;
	run(twin, 2, 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_str_eq(O[i], "y");
}
END_TEST

/* Without a local leader, the current owner keeps its partitions, also
 * when that leaves the load uneven (moves cost a handover). */
START_TEST(test_stability)
{
	mkparts(9, 9);
	for (size_t i = 0; i < 9; i++) {
		P[i].leader = i < 3 ? 42 : -1;        /* no member beside 42 */
		P[i].current = i < 7 ? "b" : "c";
	}
	run(M3, 3, 9);
	for (size_t i = 0; i < 9; i++)
		ck_assert_str_eq(O[i], i < 7 ? "b" : "c");
	ck_assert_uint_eq(count(9, "a"), 0);
}
END_TEST

/* Fresh partitions spread evenly, ties to the lower instance id first. */
START_TEST(test_balance)
{
	mkparts(10, 5);
	run(M3, 3, 10);
	ck_assert_uint_eq(count(10, "a"), 4);
	ck_assert_uint_eq(count(10, "b"), 3);
	ck_assert_uint_eq(count(10, "c"), 3);
	/* In key order: t00000-0 -> a, -1 -> b, -2 -> c, -3 -> a ... */
	ck_assert_str_eq(O[0], "a");
	ck_assert_str_eq(O[1], "b");
	ck_assert_str_eq(O[2], "c");
	ck_assert_str_eq(O[3], "a");

	/* Least-loaded counts what locality and stability already gave. */
	mkparts(8, 8);
	P[0].current = P[1].current = P[2].current = "a";
	P[3].leader = 2;                                  /* b's broker */
	run(M3, 3, 8);
	/* a 3 (kept), b 1 (local); the other 4: c, b, c, b */
	ck_assert_uint_eq(count(8, "a"), 3);
	ck_assert_uint_eq(count(8, "b"), 3);
	ck_assert_uint_eq(count(8, "c"), 2);
	ck_assert_str_eq(O[4], "c");
	ck_assert_str_eq(O[5], "b");
}
END_TEST

/* A member leaves: its partitions go to the least loaded of the others;
 * nobody else's partition moves. */
START_TEST(test_member_loss)
{
	static const struct assign_member two[] = { { "a", -1 }, { "c", -1 } };
	static const struct assign_member three[] = { { "a", -1 }, { "b", -1 },
	    { "c", -1 } };
	const char *before[30];

	mkparts(30, 10);
	run(three, 3, 30);
	ck_assert_uint_eq(count(30, "b"), 10);
	for (size_t i = 0; i < 30; i++) {
		before[i] = O[i];
		P[i].current = O[i];
	}
	run(two, 2, 30);
	for (size_t i = 0; i < 30; i++) {
		if (strcmp(before[i], "b") != 0)
			ck_assert_str_eq(O[i], before[i]);
		else
			ck_assert(strcmp(O[i], "a") == 0 || strcmp(O[i], "c") == 0);
	}
	ck_assert_uint_eq(count(30, "a"), 15);
	ck_assert_uint_eq(count(30, "c"), 15);
	/* And back: the returning member gets only what has no owner left
	 * (nothing here): stability wins. */
	for (size_t i = 0; i < 30; i++)
		P[i].current = O[i];
	run(three, 3, 30);
	ck_assert_uint_eq(count(30, "b"), 0);
}
END_TEST

/* The same inputs in any order give the same owner per key. */
START_TEST(test_deterministic_across_orders)
{
	struct assign_member m[5] = { { "e", -1 }, { "a", 4 }, { "d", -1 },
	    { "b", 2 }, { "c", -1 } };
	static char want[2000][8];
	unsigned seed = 12345;
	size_t n = 2000;

	mkparts(n, 7);
	for (size_t i = 0; i < n; i++) {
		P[i].leader = (int32_t)(i % 6);
		P[i].current = i % 5 == 0 ? "d" : i % 11 == 0 ? "gone" : NULL;
	}
	run(m, 5, n);
	for (size_t i = 0; i < n; i++)
		snprintf(want[i], sizeof(want[i]), "%s", O[i]);
	for (int round = 0; round < 5; round++) {
		/* Shuffle partitions (carrying their expected owner) and
		 * members. */
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = (size_t)rand_r(&seed) % (i + 1);
			struct assign_part tp = P[i];
			char tw[8];

			P[i] = P[j];
			P[j] = tp;
			memcpy(tw, want[i], sizeof(tw));
			memcpy(want[i], want[j], sizeof(tw));
			memcpy(want[j], tw, sizeof(tw));
		}
		for (size_t i = 4; i > 0; i--) {
			size_t j = (size_t)rand_r(&seed) % (i + 1);
			struct assign_member tm = m[i];

			m[i] = m[j];
			m[j] = tm;
		}
		run(m, 5, n);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(strcmp(O[i], want[i]) == 0, "round %d: %s-%d "
			    "went to %s, not %s", round, P[i].topic,
			    (int)P[i].partition, O[i], want[i]);
	}
}
END_TEST

START_TEST(test_bad_input)
{
	static const struct assign_member dup[] = { { "a", 1 }, { "a", 2 } };
	static const struct assign_member empty[] = { { "a", 1 }, { "", 2 } };

	mkparts(2, 2);
	ck_assert_int_eq(assign_run(dup, 2, P, 2, O, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "assignment: instance id a is given twice");
	ck_assert_int_eq(assign_run(empty, 2, P, 2, O, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "assignment: member 1 has no instance id");
}
END_TEST

/* 10,000 partitions on 5 members, and 100,000 on 50: even, every owner a
 * member (Check's default timeout bounds the time). */
START_TEST(test_large)
{
	static const struct assign_member five[] = { { "i1", 1 }, { "i2", 2 },
	    { "i3", 3 }, { "i4", -1 }, { "i5", -1 } };
	static struct assign_member fifty[50];
	static char ids[50][8];

	mkparts(10000, 100);
	for (size_t i = 0; i < 10000; i++)
		P[i].leader = i % 2 == 0 ? (int32_t)(i % 3) + 1 : 99;
	run(five, 5, 10000);
	/* 5000 local (1667/1667/1666 by leader), the 5000 others fill i4
	 * and i5 first and then all five evenly. */
	for (size_t k = 0; k < 5; k++) {
		size_t c = count(10000, five[k].instance_id);

		ck_assert_msg(c >= 1999 && c <= 2001, "%s has %zu",
		    five[k].instance_id, c);
	}
	for (size_t k = 0; k < 50; k++) {
		snprintf(ids[k], sizeof(ids[k]), "n%02zu", k);
		fifty[k].instance_id = ids[k];
		fifty[k].local_broker_id = -1;
	}
	mkparts(MAXP, 1000);
	run(fifty, 50, MAXP);
	for (size_t k = 0; k < 50; k++)
		ck_assert_uint_eq(count(MAXP, ids[k]), MAXP / 50);
}
END_TEST

static Suite *assign_suite(void)
{
	Suite *s = suite_create("assign");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_one_member_gets_everything);
	tcase_add_test(tc, test_no_member_no_owner);
	tcase_add_test(tc, test_locality);
	tcase_add_test(tc, test_stability);
	tcase_add_test(tc, test_balance);
	tcase_add_test(tc, test_member_loss);
	tcase_add_test(tc, test_deterministic_across_orders);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_large);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(assign_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
