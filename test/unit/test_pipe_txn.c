/*
 * Unit tests for daemon/pipe_txn: the read_committed filter of one Fetch
 * partition.  Batches are laid out byte for byte (record batch v2, control
 * records as Kafka writes them) and parsed with lib/batch, then walked in
 * offset order as pipeline/copy.c's intake does; the verdicts are checked
 * against what Apache Kafka's consumer skips.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "compat.h"
#include "txn.h"
#include "testvarint.h"

/* ---- building batches ------------------------------------------------------- */

struct built {
	uint8_t buf[256];
	struct batch b;
};

/* One record: the given key (klen -1 = null) and a 1-byte value. */
static size_t put_record(uint8_t *p, const uint8_t *key, int klen)
{
	uint8_t body[64];
	size_t n = 0;

	body[n++] = 0;                       /* attributes */
	n += put_varint(body + n, 0);        /* timestamp delta */
	n += put_varint(body + n, 0);        /* offset delta */
	n += put_varint(body + n, klen);
	if (klen > 0) {
		memcpy(body + n, key, (size_t)klen);
		n += (size_t)klen;
	}
	n += put_varint(body + n, 1);
	body[n++] = 'v';
	n += put_varint(body + n, 0);        /* headers */
	size_t m = put_varint(p, (int64_t)n);
	memcpy(p + m, body, n);
	return m + n;
}

#define ATTR_TXN BATCH_ATTR_TRANSACTIONAL
#define ATTR_CTRL (BATCH_ATTR_TRANSACTIONAL | BATCH_ATTR_CONTROL)

/* A one-record batch at offset; control batches get a marker key of type
 * ctrl_type (commit 1, abort 0). */
static void build(struct built *o, int64_t offset, int64_t pid, int attrs,
    int ctrl_type)
{
	uint8_t key[4];
	size_t len;
	char err[128];

	memset(o, 0, sizeof(*o));
	be64_store(o->buf, (uint64_t)offset);
	be32_store(o->buf + 12, 0);                  /* leader epoch */
	o->buf[16] = 2;                              /* magic */
	be16_store(o->buf + 21, (uint16_t)attrs);
	be32_store(o->buf + 23, 0);                  /* last offset delta */
	be64_store(o->buf + 43, (uint64_t)pid);
	be16_store(o->buf + 51, 0);
	be32_store(o->buf + 53, 0);
	be32_store(o->buf + 57, 1);                  /* one record */
	be16_store(key, 0);
	be16_store(key + 2, (uint16_t)ctrl_type);
	len = 61 + put_record(o->buf + 61, (attrs & BATCH_ATTR_CONTROL) ? key : NULL,
	    (attrs & BATCH_ATTR_CONTROL) ? 4 : -1);
	be32_store(o->buf + 8, (uint32_t)(len - 12));
	ck_assert_int_eq(batch_parse(o->buf, len, &o->b, err, sizeof(err)), BATCH_OK);
}

static int verdict(struct ptxn *t, int64_t offset, int64_t pid, int attrs,
    int ctrl_type)
{
	struct built o;
	char err[256];
	int v;

	build(&o, offset, pid, attrs, ctrl_type);
	v = ptxn_batch(t, &o.b, err, sizeof(err));
	ck_assert_msg(v != PTXN_ERROR, "batch at %lld: %s", (long long)offset, err);
	return v;
}

typedef struct kp_fetch_response_aborted_transaction abtx;

/* ---- the walk ----------------------------------------------------------------- */

/*
 * 300 producers with overlapping aborted transactions (more than the 64 the
 * old fixed array held), committed transactional data and plain data
 * interleaved, then every abort marker.
 */
START_TEST(test_many_overlapping_aborted_producers)
{
	enum { N = 300 };
	abtx *list = calloc(N, sizeof(*list));
	struct ptxn t;
	char err[256];
	int64_t off = 0;

	ck_assert_ptr_nonnull(list);
	/* producer 1000 + i opens its transaction at offset 3 * i */
	for (int i = 0; i < N; i++) {
		list[i].producer_id = 1000 + i;
		list[i].first_offset = 3 * i;
	}
	ck_assert_int_eq(ptxn_init(&t, list, N, err, sizeof(err)), 0);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(off, 3 * i);
		ck_assert_int_eq(verdict(&t, off++, 1000 + i, ATTR_TXN, 0), PTXN_ABORTED);
		/* a committed transaction of producer 7 and a plain record */
		ck_assert_int_eq(verdict(&t, off++, 7, ATTR_TXN, 0), PTXN_KEEP);
		ck_assert_int_eq(verdict(&t, off++, 9, 0, 0), PTXN_KEEP);
	}
	ck_assert_uint_eq(t.count, N);
	/* the second round of every aborting producer is still aborted */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(verdict(&t, off++, 1000 + i, ATTR_TXN, 0), PTXN_ABORTED);
	ck_assert_int_eq(verdict(&t, off++, 7, ATTR_CTRL, PTXN_CONTROL_COMMIT),
	    PTXN_MARKER);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(verdict(&t, off++, 1000 + i, ATTR_CTRL,
		    PTXN_CONTROL_ABORT), PTXN_MARKER);
	ck_assert_uint_eq(t.count, 0);
	/* after their markers the same producers commit: kept */
	for (int i = 0; i < N; i += 13)
		ck_assert_int_eq(verdict(&t, off++, 1000 + i, ATTR_TXN, 0), PTXN_KEEP);
	ptxn_fini(&t);
	free(list);
}
END_TEST

/* One producer: aborted, committed, aborted again (two list entries). */
START_TEST(test_producer_aborts_commits_aborts)
{
	abtx list[] = { { 5, 0 }, { 5, 4 } };
	struct ptxn t;
	char err[256];

	ck_assert_int_eq(ptxn_init(&t, list, 2, err, sizeof(err)), 0);
	ck_assert_int_eq(verdict(&t, 0, 5, ATTR_TXN, 0), PTXN_ABORTED);
	ck_assert_int_eq(verdict(&t, 1, 5, ATTR_CTRL, PTXN_CONTROL_ABORT), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 2, 5, ATTR_TXN, 0), PTXN_KEEP);
	ck_assert_int_eq(verdict(&t, 3, 5, ATTR_CTRL, PTXN_CONTROL_COMMIT), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 4, 5, ATTR_TXN, 0), PTXN_ABORTED);
	ck_assert_int_eq(verdict(&t, 5, 5, ATTR_CTRL, PTXN_CONTROL_ABORT), PTXN_MARKER);
	ck_assert(!ptxn_is_aborted(&t, 5));
	ptxn_fini(&t);
}
END_TEST

/* Kafka's consumer: only an ABORT marker ends the aborted range; only
 * transactional batches are aborted data; a producer is aborted only from
 * its transaction's first offset on. */
START_TEST(test_consumer_rules)
{
	abtx list[] = { { 3, 2 } };
	struct ptxn t;
	char err[256];

	ck_assert_int_eq(ptxn_init(&t, list, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(verdict(&t, 0, 3, ATTR_TXN, 0), PTXN_KEEP); /* before */
	ck_assert_int_eq(verdict(&t, 1, 3, ATTR_CTRL, PTXN_CONTROL_COMMIT), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 2, 3, ATTR_TXN, 0), PTXN_ABORTED);
	ck_assert_int_eq(verdict(&t, 3, 3, 0, 0), PTXN_KEEP); /* not transactional */
	/* a commit marker of an aborted producer does not end the range */
	ck_assert_int_eq(verdict(&t, 4, 3, ATTR_CTRL, PTXN_CONTROL_COMMIT), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 5, 3, ATTR_TXN, 0), PTXN_ABORTED);
	/* an unknown control type neither */
	ck_assert_int_eq(verdict(&t, 6, 3, ATTR_CTRL, 77), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 7, 3, ATTR_TXN, 0), PTXN_ABORTED);
	ck_assert_int_eq(verdict(&t, 8, 3, ATTR_CTRL, PTXN_CONTROL_ABORT), PTXN_MARKER);
	ck_assert_int_eq(verdict(&t, 9, 3, ATTR_TXN, 0), PTXN_KEEP);
	ptxn_fini(&t);
}
END_TEST

/* A multi-record batch reaches an entry whose first offset lies inside it. */
START_TEST(test_first_offset_inside_a_batch)
{
	abtx list[] = { { 8, 12 } };
	struct ptxn t;
	struct built o;
	char err[256];

	ck_assert_int_eq(ptxn_init(&t, list, 1, err, sizeof(err)), 0);
	build(&o, 10, 8, ATTR_TXN, 0);
	be32_store(o.buf + 23, 4); /* offsets 10..14 */
	ck_assert_int_eq(batch_parse(o.buf, sizeof(o.buf), &o.b, err, sizeof(err)),
	    BATCH_OK);
	ck_assert_int_eq(ptxn_batch(&t, &o.b, err, sizeof(err)), PTXN_ABORTED);
	ptxn_fini(&t);
}
END_TEST

START_TEST(test_bad_lists_named)
{
	abtx neg_pid[] = { { 1, 0 }, { -4, 3 } };
	abtx neg_off[] = { { 1, -1 } };
	abtx unsorted[] = { { 1, 9 }, { 2, 3 } };
	struct ptxn t;
	char err[256];

	ck_assert_int_eq(ptxn_init(&t, neg_pid, 2, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "aborted transaction 2 of 2 has producer id -4");
	ck_assert_int_eq(ptxn_init(&t, neg_off, 1, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "aborted transaction 1 of 1 (producer id 1) has first offset -1");
	ck_assert_int_eq(ptxn_init(&t, unsorted, 2, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "aborted transactions are not in first offset order at entry 2 of 2");
	ck_assert_int_eq(ptxn_init(&t, NULL, 0, err, sizeof(err)), 0);
	ck_assert(!ptxn_is_aborted(&t, 0));
	ptxn_fini(&t);
}
END_TEST

START_TEST(test_control_records)
{
	struct built o;
	char err[256];

	build(&o, 4, 1, ATTR_CTRL, PTXN_CONTROL_ABORT);
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), PTXN_CONTROL_ABORT);
	build(&o, 4, 1, ATTR_CTRL, PTXN_CONTROL_COMMIT);
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), PTXN_CONTROL_COMMIT);
	/* compressed */
	build(&o, 4, 1, ATTR_CTRL | BATCH_CODEC_GZIP, 0);
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "control batch at offset 4 is compressed (gzip)");
	/* no records */
	build(&o, 4, 1, ATTR_CTRL, 0);
	o.b.record_count = 0;
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), -2);
	/* key too short, negative version, cut at every length */
	build(&o, 4, 1, ATTR_CTRL, 0);
	o.buf[61 + 4] = 2; /* key length varint: 1 */
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "control batch at offset 4 has a 1-byte record key, 4 or more expected");
	build(&o, 4, 1, ATTR_CTRL, 0);
	be16_store(o.buf + 61 + 5, 0xffff);
	ck_assert_int_eq(ptxn_control_type(&o.b, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "control batch at offset 4 has control record key version -1");
	build(&o, 4, 1, ATTR_CTRL, 0);
	for (size_t cut = 0; cut < o.b.records_len; cut++) {
		struct batch b = o.b;
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, o.b.records, cut);
		b.records = copy;
		b.records_len = cut;
		ck_assert_msg(ptxn_control_type(&b, err, sizeof(err)) < 0,
		    "control record cut at %zu decoded", cut);
		free(copy);
	}
}
END_TEST

/* The set against a plain array under random adds and removals (growth and
 * backward-shift deletion); consecutive ids cluster in the probe runs. */
START_TEST(test_set_random)
{
	enum { IDS = 4096, OPS = 200000 };
	static unsigned char in[IDS];
	abtx one;
	struct ptxn t;
	struct built o;
	char err[256];
	unsigned seed = 12345;

	memset(in, 0, sizeof(in));
	ck_assert_int_eq(ptxn_init(&t, NULL, 0, err, sizeof(err)), 0);
	build(&o, 0, 0, ATTR_CTRL, PTXN_CONTROL_ABORT);
	for (int k = 0; k < OPS; k++) {
		int64_t id;

		seed = seed * 1103515245u + 12345u;
		id = (int64_t)((seed >> 8) % IDS);
		if ((seed >> 4) & 1) {
			one.producer_id = id;
			one.first_offset = 0;
			t.list = &one;
			t.n = 1;
			t.next = 0;
			ck_assert_int_eq(verdict(&t, 0, id, ATTR_TXN, 0), PTXN_ABORTED);
			in[id] = 1;
		} else {
			t.list = NULL;
			t.n = t.next = 0;
			be64_store(o.buf + 43, (uint64_t)id);
			ck_assert_int_eq(batch_parse(o.buf, sizeof(o.buf), &o.b, err,
			    sizeof(err)), BATCH_OK);
			ck_assert_int_eq(ptxn_batch(&t, &o.b, err, sizeof(err)), PTXN_MARKER);
			in[id] = 0;
		}
		if (k % 997 == 0) {
			size_t n = 0;

			for (int i = 0; i < IDS; i++) {
				ck_assert_int_eq(ptxn_is_aborted(&t, i), in[i]);
				n += in[i];
			}
			ck_assert_uint_eq(t.count, n);
		}
	}
	ptxn_fini(&t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("pipe_txn");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_many_overlapping_aborted_producers);
	tcase_add_test(tc, test_producer_aborts_commits_aborts);
	tcase_add_test(tc, test_consumer_rules);
	tcase_add_test(tc, test_first_offset_inside_a_batch);
	tcase_add_test(tc, test_bad_lists_named);
	tcase_add_test(tc, test_control_records);
	tcase_add_test(tc, test_set_random);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
