/*
 * Unit tests for daemon/pipe_wire: the data plane's Fetch, Produce,
 * ListOffsets and InitProducerId requests and per-partition
 * response walks over the generated kp_ codec.  Requests are compared
 * with bytes written out by hand from the Kafka protocol guide; responses
 * are laid out field by field here (in the guide's order, independently of
 * the decoder) and decoded, then cut at every length to prove that a
 * truncated answer is an error and never a read past the end.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"
#include "fsess.h"
#include "wire.h"

/* ---- requests ------------------------------------------------------------ */

START_TEST(test_fetch_request_v4)
{
	static const uint8_t want[] = {
		0xff, 0xff, 0xff, 0xff,             /* replica id -1 */
		0x00, 0x00, 0x01, 0xf4,             /* max wait 500 */
		0x00, 0x00, 0x00, 0x01,             /* min bytes 1 */
		0x00, 0xa0, 0x00, 0x00,             /* max bytes 10 MiB */
		0x01,                               /* read_committed */
		0x00, 0x00, 0x00, 0x01,             /* 1 topic */
		0x00, 0x01, 't',
		0x00, 0x00, 0x00, 0x02,             /* 2 partitions */
		0x00, 0x00, 0x00, 0x00,             /* partition 0 */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* offset 7 */
		0x00, 0x10, 0x00, 0x00,             /* 1 MiB */
		0x00, 0x00, 0x00, 0x03,             /* partition 3 */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, /* offset 256 */
		0x00, 0x00, 0x10, 0x00,             /* 4 KiB */
	};
	struct pw_fetch_req req = { 500, 1, 10 << 20, 1 };
	struct pw_tp tps[2] = {
		{ .topic = "t", .partition = 0, .offset = 7, .max_bytes = 1 << 20 },
		{ .topic = "t", .partition = 3, .offset = 256, .max_bytes = 4096 },
	};
	struct kw w;

	kw_init(&w, 4096);
	ck_assert_int_eq(pw_fetch_encode(&w, 4, &req, tps, 2), 0);
	ck_assert_uint_eq(w.len, sizeof(want));
	ck_assert_mem_eq(w.buf, want, sizeof(want));
	kw_fini(&w);
}
END_TEST

START_TEST(test_fetch_request_v11_fields)
{
	struct pw_fetch_req req = { 100, 1, 1024, 1 };
	struct pw_tp tp = { .topic = "ab", .partition = 1, .offset = 5, .max_bytes = 9,
	    .leader_epoch = -1, .last_epoch = -1 };
	struct kw w;
	struct kr r;

	kw_init(&w, 4096);
	ck_assert_int_eq(pw_fetch_encode(&w, 11, &req, &tp, 1), 0);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(kr_i32(&r), -1);
	ck_assert_int_eq(kr_i32(&r), 100);
	ck_assert_int_eq(kr_i32(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 1024);
	ck_assert_int_eq(kr_i8(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 0);   /* session id */
	ck_assert_int_eq(kr_i32(&r), -1);  /* session epoch: sessionless */
	ck_assert_int_eq(kr_array(&r), 1);
	ck_assert(kstr_eq(kr_str(&r), "ab"));
	ck_assert_int_eq(kr_array(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 1);
	ck_assert_int_eq(kr_i32(&r), -1);  /* current leader epoch (v9+) */
	ck_assert_int_eq(kr_i64(&r), 5);
	ck_assert_int_eq(kr_i64(&r), -1);  /* log start offset (v5+) */
	ck_assert_int_eq(kr_i32(&r), 9);
	ck_assert_int_eq(kr_array(&r), 0); /* forgotten topics (v7+) */
	ck_assert(kstr_eq(kr_str(&r), "")); /* rack (v11) */
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);
}
END_TEST

START_TEST(test_fetch_request_session)
{
	struct pw_fetch_req req = { 100, 1, 1024, 1 };
	struct pw_tp tp = { .topic = "ab", .partition = 1, .offset = 5, .max_bytes = 9,
	    .leader_epoch = 4, .last_epoch = -1 };
	/* grouped by topic, as the caller sorts them */
	struct pw_tp fg[3] = {
		{ .topic = "a", .partition = 1 }, { .topic = "a", .partition = 4 },
		{ .topic = "zz", .partition = 0 },
	};
	struct pw_fetch_session sess = { 42, 3, fg, 3 };
	struct kw w;
	struct kr r;

	kw_init(&w, 4096);
	ck_assert_int_eq(pw_fetch_encode_session(&w, 11, &req, &sess, &tp, 1), 0);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(kr_i32(&r), -1);
	ck_assert_int_eq(kr_i32(&r), 100);
	ck_assert_int_eq(kr_i32(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 1024);
	ck_assert_int_eq(kr_i8(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 42);  /* session id */
	ck_assert_int_eq(kr_i32(&r), 3);   /* session epoch */
	ck_assert_int_eq(kr_array(&r), 1);
	ck_assert(kstr_eq(kr_str(&r), "ab"));
	ck_assert_int_eq(kr_array(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 4);   /* current leader epoch */
	ck_assert_int_eq(kr_i64(&r), 5);
	ck_assert_int_eq(kr_i64(&r), -1);
	ck_assert_int_eq(kr_i32(&r), 9);
	ck_assert_int_eq(kr_array(&r), 2); /* forgotten topics */
	ck_assert(kstr_eq(kr_str(&r), "a"));
	ck_assert_int_eq(kr_array(&r), 2);
	ck_assert_int_eq(kr_i32(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 4);
	ck_assert(kstr_eq(kr_str(&r), "zz"));
	ck_assert_int_eq(kr_array(&r), 1);
	ck_assert_int_eq(kr_i32(&r), 0);
	ck_assert(kstr_eq(kr_str(&r), "")); /* rack */
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);

	/* An incremental request may name no partition at all. */
	kw_init(&w, 4096);
	sess.nforgotten = 0;
	ck_assert_int_eq(pw_fetch_encode_session(&w, 7, &req, &sess, NULL, 0), 0);
	kw_fini(&w);
	/* No sessions before v7. */
	kw_init(&w, 4096);
	ck_assert_int_ne(pw_fetch_encode_session(&w, 6, &req, &sess, &tp, 1), 0);
	kw_fini(&w);
}
END_TEST

/* The session table: adds, finds, removes (slots reused), growth. */
START_TEST(test_fetch_session_table)
{
	struct pfsess *s = pfsess_new();
	char t[32];
	int added;

	ck_assert_ptr_nonnull(s);
	for (int i = 0; i < 3000; i++) {
		struct pfs_ent *e;

		snprintf(t, sizeof(t), "topic-%d", i % 37);
		e = pfsess_get(s, t, i, &added);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(added, 1);
		e->offset = i;
	}
	ck_assert_uint_eq(s->n, 3000);
	for (int i = 0; i < 3000; i += 2) {
		struct pfs_ent *e;

		snprintf(t, sizeof(t), "topic-%d", i % 37);
		e = pfsess_find(s, kstr_c(t), i);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(e->offset, i);
		free(pfsess_remove(s, e));
	}
	ck_assert_uint_eq(s->n, 1500);
	for (int i = 0; i < 3000; i++) {
		struct pfs_ent *e;

		snprintf(t, sizeof(t), "topic-%d", i % 37);
		e = pfsess_find(s, kstr_c(t), i);
		if (i % 2 == 0) {
			ck_assert_ptr_null(e);
			e = pfsess_get(s, t, i, &added);
			ck_assert_int_eq(added, 1);
			e->offset = -i;
		} else {
			ck_assert_ptr_nonnull(e);
			ck_assert_int_eq(e->offset, i);
			ck_assert_ptr_eq(pfsess_get(s, t, i, &added), e);
			ck_assert_int_eq(added, 0);
		}
	}
	ck_assert_uint_eq(s->n, 3000);
	/* another topic, same partition; a name that is a prefix */
	ck_assert_ptr_null(pfsess_find(s, kstr_c("topic-1"), 0));
	ck_assert_ptr_null(pfsess_find(s, kstr_c("topic-"), 1));
	ck_assert_ptr_nonnull(pfsess_find(s, kstr_c("topic-1"), 1));
	ck_assert_int_eq(pfsess_find(s, kstr_c("topic-2"), 2)->offset, -2);
	s->id = 7;
	s->epoch = 9;
	pfsess_reset(s, 1);
	ck_assert_uint_eq(s->n, 0);
	ck_assert_int_eq(s->id, 7);
	ck_assert_int_eq(s->epoch, 0);
	ck_assert_ptr_null(pfsess_find(s, kstr_c("topic-1"), 1));
	pfsess_reset(s, 0);
	ck_assert_int_eq(s->id, 0);
	ck_assert_int_eq(pfsess_next_epoch(1), 2);
	ck_assert_int_eq(pfsess_next_epoch(INT32_MAX), 1);
	pfsess_free(s);
}
END_TEST

struct diverged { int n; int32_t epoch; int64_t end; };

static void fetch_diverged_cb(void *arg, const struct pw_fetch_part *p)
{
	struct diverged *g = arg;

	g->n++;
	g->epoch = p->diverging_epoch;
	g->end = p->diverging_end;
}

START_TEST(test_fetch_v12_epochs)
{
	struct pw_fetch_req req = { 100, 1, 1024, 1 };
	struct pw_tp tp = { .topic = "ab", .partition = 1, .offset = 50, .max_bytes = 9,
	    .leader_epoch = 7, .last_epoch = 5 };
	struct kp_fetch_request q;
	struct kp_fetch_response m;
	struct kp_fetch_response_fetchable_topic_response t;
	struct kp_fetch_response_partition_data d;
	struct karena *a = karena_new(1 << 16);
	struct kw w;
	struct kr r;
	struct diverged got = { 0, 0, 0 };
	int16_t top = 1;

	/* The request carries CurrentLeaderEpoch and LastFetchedEpoch. */
	kw_init(&w, 4096);
	ck_assert_int_eq(pw_fetch_encode(&w, 12, &req, &tp, 1), 0);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(kp_fetch_request_decode(&r, a, 12, &q), 0);
	ck_assert_int_eq(q.topics_n, 1);
	ck_assert_int_eq(q.topics[0].partitions_n, 1);
	ck_assert_int_eq(q.topics[0].partitions[0].current_leader_epoch, 7);
	ck_assert_int_eq(q.topics[0].partitions[0].last_fetched_epoch, 5);
	ck_assert_int_eq(q.topics[0].partitions[0].fetch_offset, 50);
	kw_fini(&w);

	/* The answer's DivergingEpoch reaches the partition callback. */
	kp_fetch_response_init(&m);
	kp_fetch_response_fetchable_topic_response_init(&t);
	kp_fetch_response_partition_data_init(&d);
	d.partition_index = 1;
	d.high_watermark = 60;
	d.diverging_epoch.epoch = 5;
	d.diverging_epoch.end_offset = 42;
	d.records = (struct kbytes){ NULL, 0 };
	t.topic = kstr_c("ab");
	t.partitions = &d;
	t.partitions_n = 1;
	m.responses = &t;
	m.responses_n = 1;
	kw_init(&w, 4096);
	ck_assert_int_eq(kp_fetch_response_encode(&w, 12, &m), 0);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(pw_fetch_decode(&r, 12, &top, fetch_diverged_cb, &got), 0);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(got.n, 1);
	ck_assert_int_eq(got.epoch, 5);
	ck_assert_int_eq(got.end, 42);
	kw_fini(&w);

	/* No DivergingEpoch: -1/-1. */
	kp_fetch_response_partition_data_init(&d);
	d.partition_index = 1;
	d.records = (struct kbytes){ NULL, 0 };
	kw_init(&w, 4096);
	ck_assert_int_eq(kp_fetch_response_encode(&w, 12, &m), 0);
	kr_init(&r, w.buf, w.len);
	got.n = 0;
	ck_assert_int_eq(pw_fetch_decode(&r, 12, &top, fetch_diverged_cb, &got), 0);
	ck_assert_int_eq(got.n, 1);
	ck_assert_int_eq(got.epoch, -1);
	ck_assert_int_eq(got.end, -1);
	kw_fini(&w);
	karena_free(a);
}
END_TEST

static void ofle_cb(void *arg, const struct pw_ofle_part *p)
{
	struct pw_ofle_part *out = arg;

	*out = *p;
}

START_TEST(test_offset_for_leader_epoch)
{
	struct pw_tp tps[2] = {
		{ .topic = "t", .partition = 0, .leader_epoch = 9, .last_epoch = 4 },
		{ .topic = "t", .partition = 2, .leader_epoch = -1, .last_epoch = 0 },
	};
	struct kp_offset_for_leader_epoch_request q;
	struct kp_offset_for_leader_epoch_response m;
	struct kp_offset_for_leader_epoch_response_offset_for_leader_topic_result t;
	struct kp_offset_for_leader_epoch_response_epoch_end_offset e;
	struct pw_ofle_part got;
	struct karena *a = karena_new(1 << 16);
	struct kw w;
	struct kr r;

	for (int v = PW_OFFSET_FOR_LEADER_EPOCH_MIN; v <= PW_OFFSET_FOR_LEADER_EPOCH_MAX; v++) {
		kw_init(&w, 4096);
		ck_assert_int_eq(pw_ofle_encode(&w, (int16_t)v, tps, 2), 0);
		kr_init(&r, w.buf, w.len);
		ck_assert_int_eq(kp_offset_for_leader_epoch_request_decode(&r, a,
		    (int16_t)v, &q), 0);
		ck_assert_int_eq(q.topics_n, 1);
		ck_assert_int_eq(q.topics[0].partitions_n, 2);
		ck_assert_int_eq(q.topics[0].partitions[0].current_leader_epoch, 9);
		ck_assert_int_eq(q.topics[0].partitions[0].leader_epoch, 4);
		ck_assert_int_eq(q.topics[0].partitions[1].partition, 2);
		if (v >= 3)
			ck_assert_int_eq(q.replica_id, -1);
		kw_fini(&w);

		kp_offset_for_leader_epoch_response_init(&m);
		kp_offset_for_leader_epoch_response_offset_for_leader_topic_result_init(&t);
		kp_offset_for_leader_epoch_response_epoch_end_offset_init(&e);
		e.partition = 0;
		e.leader_epoch = 3;
		e.end_offset = 1234;
		t.topic = kstr_c("t");
		t.partitions = &e;
		t.partitions_n = 1;
		m.topics = &t;
		m.topics_n = 1;
		kw_init(&w, 4096);
		ck_assert_int_eq(kp_offset_for_leader_epoch_response_encode(&w,
		    (int16_t)v, &m), 0);
		kr_init(&r, w.buf, w.len);
		memset(&got, 0, sizeof(got));
		ck_assert_int_eq(pw_ofle_decode(&r, (int16_t)v, ofle_cb, &got), 0);
		ck_assert(kstr_eq(got.topic, "t"));
		ck_assert_int_eq(got.leader_epoch, 3);
		ck_assert_int_eq(got.end_offset, 1234);
		ck_assert_int_eq(got.error, 0);
		kw_fini(&w);
	}
	karena_free(a);
}
END_TEST

START_TEST(test_produce_request_groups_topics)
{
	static const uint8_t rec1[] = { 1, 2, 3 }, rec2[] = { 4 }, rec3[] = { 5, 6 };
	struct pw_tp tps[3] = {
		{ .topic = "a", .partition = 0, .records = rec1, .records_len = 3 },
		{ .topic = "a", .partition = 2, .records = rec2, .records_len = 1 },
		{ .topic = "b", .partition = 1, .records = rec3, .records_len = 2 },
	};
	static const uint8_t want[] = {
		0xff, 0xff,                         /* transactional id: null */
		0xff, 0xff,                         /* acks -1 */
		0x00, 0x00, 0x75, 0x30,             /* timeout 30000 */
		0x00, 0x00, 0x00, 0x02,             /* 2 topics */
		0x00, 0x01, 'a', 0x00, 0x00, 0x00, 0x02,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 1, 2, 3,
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 4,
		0x00, 0x01, 'b', 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 5, 6,
	};
	struct kw w;

	kw_init(&w, 4096);
	ck_assert_int_eq(pw_produce_encode(&w, 7, -1, 30000, tps, 3), 0);
	ck_assert_uint_eq(w.len, sizeof(want));
	ck_assert_mem_eq(w.buf, want, sizeof(want));
	kw_fini(&w);
}
END_TEST

/* v13 names the topic by id (KIP-516): no name on the wire, and a topic
 * without an id cannot be encoded at all (it would go to whatever topic
 * has the name now). */
START_TEST(test_produce_request_v13_topic_id)
{
	static const uint8_t rec[] = { 7, 8 };
	struct pw_tp tp = { .topic = "a", .partition = 3, .records = rec,
	    .records_len = 2 };
	static const uint8_t want[] = {
		0x00,                               /* transactional id: null */
		0xff, 0xff,                         /* acks -1 */
		0x00, 0x00, 0x03, 0xe8,             /* timeout 1000 */
		0x02,                               /* 1 topic */
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
		0x02,                               /* 1 partition */
		0x00, 0x00, 0x00, 0x03, 0x03, 7, 8, 0x00,
		0x00,                               /* topic tags */
		0x00,                               /* request tags */
	};
	struct kw w;

	for (int i = 0; i < 16; i++)
		tp.topic_id.b[i] = (uint8_t)(i + 1);
	kw_init(&w, 4096);
	ck_assert_int_eq(pw_produce_encode(&w, PW_PRODUCE_BY_ID, -1, 1000, &tp, 1), 0);
	ck_assert_uint_eq(w.len, sizeof(want));
	ck_assert_mem_eq(w.buf, want, sizeof(want));
	kw_reset(&w);
	memset(&tp.topic_id, 0, sizeof(tp.topic_id));
	ck_assert_int_eq(pw_produce_encode(&w, PW_PRODUCE_BY_ID, -1, 1000, &tp, 1), -1);
	kw_fini(&w);
}
END_TEST

START_TEST(test_list_offsets_request_versions)
{
	static const uint8_t v1[] = {
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'x',
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x04,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* earliest */
	};
	struct pw_tp tp = { .topic = "x", .partition = 4, .offset = PW_TS_EARLIEST };
	struct kw w;

	kw_init(&w, 256);
	ck_assert_int_eq(pw_list_offsets_encode(&w, 1, &tp, 1), 0);
	ck_assert_uint_eq(w.len, sizeof(v1));
	ck_assert_mem_eq(w.buf, v1, sizeof(v1));
	kw_reset(&w);
	ck_assert_int_eq(pw_list_offsets_encode(&w, 3, &tp, 1), 0);
	/* v2+: isolation level after the replica id. */
	ck_assert_uint_eq(w.len, sizeof(v1) + 1);
	ck_assert_int_eq(w.buf[4], 0);
	ck_assert_mem_eq(w.buf + 5, v1 + 4, sizeof(v1) - 4);
	kw_fini(&w);
}
END_TEST

/* ---- responses ----------------------------------------------------------- */

struct seen {
	int n;
	struct pw_fetch_part p[4];
	struct kp_fetch_response_aborted_transaction ab[4][4];
	struct kp_fetch_response_aborted_transaction ablast[4];
	int unsorted;          /* adjacent aborted entries out of order */
	uint8_t rec[4][16];
};

static void on_fetch(void *arg, const struct pw_fetch_part *p)
{
	struct seen *s = arg;

	if (s->n < 4) {
		s->p[s->n] = *p;
		for (size_t i = 0; i < p->naborted && i < 4; i++)
			s->ab[s->n][i] = p->aborted[i];
		if (p->naborted > 0)
			s->ablast[s->n] = p->aborted[p->naborted - 1];
		for (size_t i = 1; i < p->naborted; i++)
			s->unsorted += p->aborted[i].first_offset <
			    p->aborted[i - 1].first_offset;
		if (p->records.len > 0 && p->records.len <= 16)
			memcpy(s->rec[s->n], p->records.p, (size_t)p->records.len);
	}
	s->n++;
}

/* A Fetch v11 response: topic "t", partition 2 (error 0, two aborted
 * transactions given out of order, 3 record bytes) and partition 5
 * (OFFSET_OUT_OF_RANGE, null aborted list, null records). */
static void fetch_v11_response(struct kw *w)
{
	kw_i32(w, 0);          /* throttle */
	kw_i16(w, 0);          /* error */
	kw_i32(w, 0);          /* session id */
	kw_array(w, 1);
	kw_str(w, kstr_c("t"));
	kw_array(w, 2);
	kw_i32(w, 2);
	kw_i16(w, 0);
	kw_i64(w, 100);        /* high watermark */
	kw_i64(w, 90);         /* last stable offset */
	kw_i64(w, 10);         /* log start */
	kw_array(w, 2);
	kw_i64(w, 7000); kw_i64(w, 50);
	kw_i64(w, 8000); kw_i64(w, 20);
	kw_i32(w, -1);         /* preferred read replica */
	kw_i32(w, 3);
	kw_raw(w, "abc", 3);
	kw_i32(w, 5);
	kw_i16(w, 1);
	kw_i64(w, -1);
	kw_i64(w, -1);
	kw_i64(w, -1);
	kw_array(w, -1);
	kw_i32(w, -1);
	kw_i32(w, -1);         /* records: null */
}

START_TEST(test_fetch_response_v11)
{
	struct kw w;
	struct kr r;
	struct seen s;
	int16_t top = -1;

	memset(&s, 0, sizeof(s));
	kw_init(&w, 4096);
	fetch_v11_response(&w);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(pw_fetch_decode(&r, 11, &top, on_fetch, &s), 0);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(s.n, 2);
	{
		/* The session id of the answer (KIP-227). */
		struct seen s2;
		struct kw w2;
		struct kr r2;
		int32_t sid = -1;

		memset(&s2, 0, sizeof(s2));
		kw_init(&w2, 4096);
		fetch_v11_response(&w2);
		w2.buf[6] = 0x12;  /* session id 0x12000034 */
		w2.buf[9] = 0x34;
		kr_init(&r2, w2.buf, w2.len);
		ck_assert_int_eq(pw_fetch_decode_session(&r2, 11, &top, &sid,
		    on_fetch, &s2), 0);
		ck_assert_int_eq(sid, 0x12000034);
		ck_assert_int_eq(s2.n, 2);
		kw_fini(&w2);
	}
	ck_assert(kstr_eq(s.p[0].topic, "t"));
	ck_assert_int_eq(s.p[0].partition, 2);
	ck_assert_int_eq(s.p[0].high_watermark, 100);
	ck_assert_int_eq(s.p[0].last_stable_offset, 90);
	ck_assert_int_eq(s.p[0].log_start_offset, 10);
	ck_assert_uint_eq(s.p[0].naborted, 2);
	/* sorted by first offset for the intake walk */
	ck_assert_int_eq(s.ab[0][0].producer_id, 8000);
	ck_assert_int_eq(s.ab[0][0].first_offset, 20);
	ck_assert_int_eq(s.ab[0][1].producer_id, 7000);
	ck_assert_int_eq(s.p[0].records.len, 3);
	ck_assert_mem_eq(s.rec[0], "abc", 3);
	/* zero copy: the records are a view into the response buffer */
	ck_assert(s.p[0].records.p > w.buf && s.p[0].records.p < w.buf + w.len);
	ck_assert_int_eq(s.p[1].partition, 5);
	ck_assert_int_eq(s.p[1].error, 1);
	ck_assert_uint_eq(s.p[1].naborted, 0);
	ck_assert_int_eq(s.p[1].records.len, -1);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);
}
END_TEST

START_TEST(test_fetch_response_truncated_everywhere)
{
	struct kw w;

	kw_init(&w, 4096);
	fetch_v11_response(&w);
	for (size_t cut = 0; cut < w.len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overruns */
		struct kr r;
		struct seen s;
		int16_t top;

		memcpy(copy, w.buf, cut);
		memset(&s, 0, sizeof(s));
		kr_init(&r, copy, cut);
		ck_assert_msg(pw_fetch_decode(&r, 11, &top, on_fetch, &s) == -1,
		    "a Fetch response cut at %zu of %zu bytes decoded", cut, w.len);
		ck_assert_int_ne(r.err, 0);
		ck_assert_int_eq(s.n, 0); /* no partition of a bad answer */
		free(copy);
	}
	kw_fini(&w);
}
END_TEST

/*
 * A partition with far more aborted transactions than the old cap (4096),
 * given in reverse order, next to an ordinary partition: the response
 * decodes, both partitions are called back, and the long list arrives
 * whole and sorted.
 */
START_TEST(test_fetch_response_many_aborted)
{
	enum { N = 20000 };
	struct kw w;
	struct kr r;
	struct seen s;
	int16_t top;
	struct pw_fetch_part big;

	kw_init(&w, 1 << 20);
	kw_i32(&w, 0);         /* throttle */
	kw_array(&w, 1);
	kw_str(&w, kstr_c("t"));
	kw_array(&w, 2);
	kw_i32(&w, 0);
	kw_i16(&w, 0);
	kw_i64(&w, 2 * N);     /* high watermark */
	kw_i64(&w, 2 * N);     /* last stable offset */
	kw_array(&w, N);
	for (int i = N - 1; i >= 0; i--) {
		kw_i64(&w, 100000 + i);   /* producer id */
		kw_i64(&w, 2 * i);        /* first offset */
	}
	kw_i32(&w, 3);
	kw_raw(&w, "xyz", 3);
	kw_i32(&w, 1);         /* partition 1: committed data only */
	kw_i16(&w, 0);
	kw_i64(&w, 7);
	kw_i64(&w, 7);
	kw_array(&w, 0);
	kw_i32(&w, 2);
	kw_raw(&w, "ok", 2);
	memset(&s, 0, sizeof(s));
	kr_init(&r, w.buf, w.len);
	ck_assert_msg(pw_fetch_decode(&r, 4, &top, on_fetch, &s) == 0,
	    "decode: %s", r.why ? r.why : "");
	ck_assert_int_eq(s.n, 2);
	big = s.p[0];
	ck_assert_int_eq(big.partition, 0);
	ck_assert_uint_eq(big.naborted, N);
	ck_assert_int_eq(s.ab[0][0].first_offset, 0);
	ck_assert_int_eq(s.ab[0][0].producer_id, 100000);
	ck_assert_int_eq(s.ablast[0].first_offset, 2 * (N - 1));
	ck_assert_int_eq(s.unsorted, 0);
	ck_assert_int_eq(s.p[1].partition, 1);
	ck_assert_uint_eq(s.p[1].naborted, 0);
	ck_assert_mem_eq(s.rec[1], "ok", 2);
	ck_assert_uint_eq(kr_left(&r), 0);
	kw_fini(&w);
}
END_TEST

struct pseen {
	int n;
	struct pw_produce_part p[2];
	char msg[64];
};

static void on_produce(void *arg, const struct pw_produce_part *p)
{
	struct pseen *s = arg;

	if (s->n < 2) {
		s->p[s->n] = *p;
		if (p->error_message.len > 0 && p->error_message.len < 64) {
			memcpy(s->msg, p->error_message.p, (size_t)p->error_message.len);
			s->msg[p->error_message.len] = '\0';
		}
	}
	s->n++;
}

START_TEST(test_produce_response_v8)
{
	struct kw w;
	struct kr r;
	struct pseen s;

	memset(&s, 0, sizeof(s));
	kw_init(&w, 4096);
	kw_array(&w, 1);
	kw_str(&w, kstr_c("orders"));
	kw_array(&w, 2);
	kw_i32(&w, 0);
	kw_i16(&w, 0);
	kw_i64(&w, 4242);          /* base offset */
	kw_i64(&w, -1);            /* log append time */
	kw_i64(&w, 0);             /* log start */
	kw_array(&w, 0);           /* record errors */
	kw_str(&w, KSTR_NULL);
	kw_i32(&w, 1);
	kw_i16(&w, 87);            /* INVALID_RECORD */
	kw_i64(&w, -1);
	kw_i64(&w, -1);
	kw_i64(&w, -1);
	kw_array(&w, 1);
	kw_i32(&w, 0);
	kw_str(&w, kstr_c("record 0"));
	kw_str(&w, kstr_c("bad base offset"));
	kw_i32(&w, 0);             /* throttle */
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(pw_produce_decode(&r, 8, on_produce, &s), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_int_eq(s.p[0].base_offset, 4242);
	ck_assert_int_eq(s.p[0].error, 0);
	ck_assert_int_eq(s.p[1].partition, 1);
	ck_assert_int_eq(s.p[1].error, 87);
	ck_assert_str_eq(s.msg, "bad base offset");
	ck_assert_uint_eq(kr_left(&r), 0);
	for (size_t cut = 0; cut < w.len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, w.buf, cut);
		memset(&s, 0, sizeof(s));
		kr_init(&r, copy, cut);
		ck_assert_int_eq(pw_produce_decode(&r, 8, on_produce, &s), -1);
		free(copy);
	}
	kw_fini(&w);
}
END_TEST

/* The v13 answer names the topic by id; UNKNOWN_TOPIC_ID comes through. */
START_TEST(test_produce_response_v13)
{
	struct kuuid id;
	struct kw w;
	struct kr r;
	struct pseen s;

	for (int i = 0; i < 16; i++)
		id.b[i] = (uint8_t)(0xa0 + i);
	memset(&s, 0, sizeof(s));
	kw_init(&w, 4096);
	kw_carray(&w, 1);
	kw_uuid(&w, &id);
	kw_carray(&w, 1);
	kw_i32(&w, 5);
	kw_i16(&w, 100);           /* UNKNOWN_TOPIC_ID */
	kw_i64(&w, -1);
	kw_i64(&w, -1);
	kw_i64(&w, -1);
	kw_carray(&w, 0);          /* record errors */
	kw_cstr(&w, KSTR_NULL);
	kw_tags_empty(&w);
	kw_tags_empty(&w);
	kw_i32(&w, 0);             /* throttle */
	kw_tags_empty(&w);
	kr_init(&r, w.buf, w.len);
	ck_assert_int_eq(pw_produce_decode(&r, PW_PRODUCE_BY_ID, on_produce, &s), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_int_eq(s.p[0].partition, 5);
	ck_assert_int_eq(s.p[0].error, 100);
	ck_assert_mem_eq(s.p[0].topic_id.b, id.b, 16);
	ck_assert_int_le(s.p[0].topic.len, 0);
	kw_fini(&w);
}
END_TEST

struct loseen {
	int n;
	struct pw_lo_part p;
};

static void on_lo(void *arg, const struct pw_lo_part *p)
{
	struct loseen *s = arg;

	s->p = *p;
	s->n++;
}

START_TEST(test_list_offsets_response_v1_v3)
{
	for (int16_t v = 1; v <= 3; v += 2) {
		struct kw w;
		struct kr r;
		struct loseen s;

		memset(&s, 0, sizeof(s));
		kw_init(&w, 256);
		if (v >= 2)
			kw_i32(&w, 0);    /* throttle */
		kw_array(&w, 1);
		kw_str(&w, kstr_c("x"));
		kw_array(&w, 1);
		kw_i32(&w, 4);
		kw_i16(&w, 0);
		kw_i64(&w, -1);           /* timestamp */
		kw_i64(&w, 1234);         /* offset */
		kr_init(&r, w.buf, w.len);
		ck_assert_int_eq(pw_list_offsets_decode(&r, v, on_lo, &s), 0);
		ck_assert_int_eq(s.n, 1);
		ck_assert(kstr_eq(s.p.topic, "x"));
		ck_assert_int_eq(s.p.partition, 4);
		ck_assert_int_eq(s.p.error, 0);
		ck_assert_int_eq(s.p.offset, 1234);
		ck_assert_uint_eq(kr_left(&r), 0);
		kw_fini(&w);
	}
}
END_TEST

START_TEST(test_produce_response_v3_v7)
{
	for (int16_t v = 3; v <= 7; v += 4) {
		struct kw w;
		struct kr r;
		struct pseen s;

		memset(&s, 0, sizeof(s));
		kw_init(&w, 256);
		kw_array(&w, 1);
		kw_str(&w, kstr_c("t"));
		kw_array(&w, 1);
		kw_i32(&w, 0);
		kw_i16(&w, 0);
		kw_i64(&w, 77);           /* base offset */
		kw_i64(&w, 1234);         /* log append time (the mock's constant) */
		if (v >= 5)
			kw_i64(&w, 5);    /* log start */
		kw_i32(&w, 0);            /* throttle */
		kr_init(&r, w.buf, w.len);
		ck_assert_int_eq(pw_produce_decode(&r, v, on_produce, &s), 0);
		ck_assert_int_eq(s.n, 1);
		ck_assert_int_eq(s.p[0].base_offset, 77);
		ck_assert_int_eq(s.p[0].log_start_offset, v >= 5 ? 5 : -1);
		ck_assert_int_eq(s.p[0].error_message.len, -1);
		ck_assert_uint_eq(kr_left(&r), 0);
		kw_fini(&w);
	}
}
END_TEST

/* InitProducerId goes straight through the generated codec (pipeline/pcluster.c
 * fills the request and reads the answer at the version kconn picked):
 * check the bytes of the request it builds and the answer it reads at
 * both versions of PW_INIT_PID_MIN..PW_INIT_PID_MAX. */
START_TEST(test_init_pid)
{
	static const uint8_t req[] = {
		0xff, 0xff,                         /* transactional id: null */
		0x00, 0x00, 0xea, 0x60,             /* timeout 60000 */
	};

	for (int16_t v = PW_INIT_PID_MIN; v <= PW_INIT_PID_MAX; v++) {
		struct kp_init_producer_id_request q;
		struct kp_init_producer_id_response m;
		struct karena *a = karena_new(256);
		struct kw w;
		struct kr r;

		ck_assert_ptr_nonnull(a);
		kw_init(&w, 256);
		kp_init_producer_id_request_init(&q);
		q.transactional_id = KSTR_NULL;
		q.transaction_timeout_ms = 60000;
		ck_assert_int_eq(kp_init_producer_id_request_encode(&w, v, &q), 0);
		ck_assert_uint_eq(w.len, sizeof(req));
		ck_assert_mem_eq(w.buf, req, sizeof(req));
		kw_reset(&w);
		kw_i32(&w, 0);            /* throttle */
		kw_i16(&w, 0);
		kw_i64(&w, 4000);
		kw_i16(&w, 3);
		kr_init(&r, w.buf, w.len);
		ck_assert_int_eq(kp_init_producer_id_response_decode(&r, a, v, &m), 0);
		ck_assert_int_eq(m.error_code, 0);
		ck_assert_int_eq(m.producer_id, 4000);
		ck_assert_int_eq(m.producer_epoch, 3);
		ck_assert_uint_eq(kr_left(&r), 0);
		kr_init(&r, w.buf, w.len - 1);
		ck_assert_int_eq(kp_init_producer_id_response_decode(&r, a, v, &m), -1);
		kw_fini(&w);
		karena_free(a);
	}
}
END_TEST

static Suite *pipe_wire_suite(void)
{
	Suite *s = suite_create("pipe_wire");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_fetch_request_v4);
	tcase_add_test(tc, test_fetch_request_v11_fields);
	tcase_add_test(tc, test_fetch_request_session);
	tcase_add_test(tc, test_fetch_session_table);
	tcase_add_test(tc, test_fetch_v12_epochs);
	tcase_add_test(tc, test_offset_for_leader_epoch);
	tcase_add_test(tc, test_produce_request_groups_topics);
	tcase_add_test(tc, test_produce_request_v13_topic_id);
	tcase_add_test(tc, test_list_offsets_request_versions);
	tcase_add_test(tc, test_fetch_response_v11);
	tcase_add_test(tc, test_fetch_response_truncated_everywhere);
	tcase_add_test(tc, test_fetch_response_many_aborted);
	tcase_add_test(tc, test_produce_response_v8);
	tcase_add_test(tc, test_produce_response_v13);
	tcase_add_test(tc, test_list_offsets_response_v1_v3);
	tcase_add_test(tc, test_produce_response_v3_v7);
	tcase_add_test(tc, test_init_pid);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pipe_wire_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
