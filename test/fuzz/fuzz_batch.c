/*
 * fuzz_batch: libFuzzer harness for lib/batch, the decoder of record
 * batches fetched from a source cluster (hostile input).
 *
 * One input is a Fetch partition's Records blob.  It is iterated batch by
 * batch; each whole batch is CRC-checked, then a copy with its CRC fixed up
 * (so the fuzzer gets past the checksum) goes through the Produce
 * validator, the hole test, the hole re-encoder (with a small cap, so
 * compression bombs are exercised) and a header rewrite; runs of mergeable
 * batches are merged (batch_merge_*) and the result checked.  Invariants that
 * must hold for any input are asserted; they are our own promises, not
 * properties of the input.
 *
 * Built two ways: with clang -fsanitize=fuzzer (MIRRORD_LIBFUZZER) under
 * --enable-fuzzers, and always as a plain replay program that runs the
 * saved corpus (test/fuzz/corpus/batch, or the files and directories on its
 * command line) under `make check`.
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "batch.h"
#include "compat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_BYTES (1u << 20)

static void one_batch(const struct batch *b)
{
	char err[512];
	uint8_t *copy = malloc(b->len);
	struct batch c;
	struct batch_reencoded r;

	if (copy == NULL)
		return;
	memcpy(copy, b->p, b->len);
	be32_store(copy + BATCH_OFF_CRC, batch_compute_crc(copy, b->len));
	if (batch_parse(copy, b->len, &c, err, sizeof(err)) != BATCH_OK)
		abort(); /* the same bytes parsed a moment ago */
	assert(batch_verify_crc(&c, err, sizeof(err)) == 0);
	(void)batch_validate_produce(copy, b->len, 0, err, sizeof(err));
	(void)batch_has_holes(&c);
	(void)batch_check_records(&c, FUZZ_MAX_BYTES, err, sizeof(err));

	if (batch_reencode_contiguous(&c, 12345, FUZZ_MAX_BYTES, &r, err, sizeof(err)) == 0) {
		if (r.buf != NULL) {
			struct batch o;

			/* What we produce must be a well-formed batch that we accept. */
			assert(batch_parse(r.buf, r.len, &o, err, sizeof(err)) == BATCH_OK);
			assert(o.len == r.len);
			assert(batch_verify_crc(&o, err, sizeof(err)) == 0);
			assert(o.record_count == c.record_count);
			assert(o.last_offset_delta == c.record_count - 1);
			assert(batch_has_holes(&o) == 0);
		}
		assert(r.npairs >= 1);
		assert(r.pairs[r.npairs - 1].src == batch_next_offset(&c));
		for (size_t i = 1; i < r.npairs; i++)
			assert(r.pairs[i].src > r.pairs[i - 1].src &&
			    r.pairs[i].dst > r.pairs[i - 1].dst);
		batch_reencoded_fini(&r);
	}

	{
		struct batch_rewrite rw = { .flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN,
			.base_offset = 0, .producer_id = 1, .producer_epoch = 0, .base_sequence = 0 };
		struct batch o;

		assert(batch_rewrite_header(&c, &rw, copy, b->len, err, sizeof(err)) == 0);
		assert(batch_parse(copy, b->len, &o, err, sizeof(err)) == BATCH_OK);
		assert(batch_verify_crc(&o, err, sizeof(err)) == 0);
		assert(memcmp(o.records, b->records, b->records_len) == 0);
	}
	free(copy);
}

/* A merge that ended: it must be one well-formed batch without holes,
 * holding every record of the batches merged. */
static void merge_done(struct batch_merge *m, int64_t want_count)
{
	char err[512];
	struct batch o;

	if (m->buf == NULL)
		return;
	batch_merge_finish(m);
	assert(batch_parse(m->buf, m->len, &o, err, sizeof(err)) == BATCH_OK);
	assert(o.len == m->len && o.len <= m->cap);
	assert(batch_verify_crc(&o, err, sizeof(err)) == 0);
	assert(o.record_count == want_count);
	assert(o.last_offset_delta == o.record_count - 1);
	assert(batch_has_holes(&o) == 0);
	batch_merge_fini(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_iter it;
	struct batch b;
	struct batch_merge m;
	char err[512];
	size_t prefix, n, seen = 0;
	int64_t merged = 0;
	int rc;

	memset(&m, 0, sizeof(m));
	batch_iter_init(&it, data, size);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		assert(b.len >= BATCH_HEADER_LEN && b.p + b.len <= data + size);
		(void)batch_verify_crc(&b, err, sizeof(err));
		one_batch(&b);
		seen++;
		/* Consecutive mergeable batches merged (mirror.coalesce.max.bytes). */
		if (!batch_mergeable(&b, 4096)) {
			merge_done(&m, merged);
			continue;
		}
		if (m.buf != NULL) {
			size_t before = m.len;
			int r = batch_merge_add(&m, &b, err, sizeof(err));

			if (r == 0) {
				merged += b.record_count;
				continue;
			}
			assert(m.len == before); /* refused: left as it was */
			merge_done(&m, merged);
		}
		if (batch_merge_start(&m, &b, 8192, err, sizeof(err)) == 0)
			merged = b.record_count;
	}
	merge_done(&m, merged);
	assert(it.pos <= size);
	/* the cheap helper stops exactly where the iterator did */
	(void)batch_complete_prefix(data, size, &prefix, &n, err, sizeof(err));
	assert(prefix == it.pos);
	assert(n == seen);
	(void)batch_validate_produce(data, size, 0, err, sizeof(err));
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/batch (see replay.c). */
const char fuzz_corpus[] = "batch";
