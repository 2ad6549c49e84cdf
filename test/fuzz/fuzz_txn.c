/*
 * fuzz_txn: libFuzzer harness for daemon/pipe_txn, the read_committed
 * filter that walks a source's Fetch partition (hostile input: the
 * aborted transaction list and the records, control records included).
 *
 * One input is a partition of a Fetch answer:
 *
 *   byte 0          bits 0-6: number of aborted transactions n (0-127);
 *                   bit 7: keep them in input order (else sorted, as
 *                   pipe_wire hands them over)
 *   16 * n bytes    producer id, first offset (int64 big-endian each)
 *   the rest        the Records blob, walked batch by batch
 *
 * Each verdict is checked against a plain reference of Kafka's consumer
 * rules (a linear list of aborted producers), so the hash set, its growth
 * and its deletions must agree with the simplest implementation.
 *
 * Built like fuzz_batch: a libFuzzer binary under --enable-fuzzers and
 * always a replay program for test/fuzz/corpus/txn under `make check`.
 */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "compat.h"
#include "txn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct kp_fetch_response_aborted_transaction abtx;

/* The reference: Kafka's consumer with a plain list. */
struct ref {
	int64_t pid[128];
	size_t n;
};

static int ref_has(const struct ref *r, int64_t pid)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->pid[i] == pid)
			return 1;
	return 0;
}

static int cmp_first(const void *x, const void *y)
{
	const abtx *a = x, *b = y;

	return (a->first_offset > b->first_offset) - (a->first_offset < b->first_offset);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	abtx list[128];
	struct ref ref = { .n = 0 };
	struct batch_iter it;
	struct batch b;
	struct ptxn t;
	size_t n, next = 0;
	char err[512];
	int keep_order;

	if (size < 1)
		return 0;
	n = data[0] & 0x7f;
	keep_order = (data[0] & 0x80) != 0;
	if (n * 16 > size - 1)
		n = (size - 1) / 16;
	for (size_t i = 0; i < n; i++) {
		list[i].producer_id = (int64_t)be64_load(data + 1 + 16 * i);
		list[i].first_offset = (int64_t)be64_load(data + 9 + 16 * i);
	}
	if (!keep_order)
		qsort(list, n, sizeof(list[0]), cmp_first);
	data += 1 + 16 * n;
	size -= 1 + 16 * n;
	if (ptxn_init(&t, list, n, err, sizeof(err)) != 0) {
		assert(err[0] != '\0');
		return 0;
	}
	batch_iter_init(&it, data, size);
	while (batch_iter_next(&it, &b, err, sizeof(err)) == BATCH_OK) {
		int v = ptxn_batch(&t, &b, err, sizeof(err)), want;

		while (next < n && list[next].first_offset <= batch_last_offset(&b)) {
			if (!ref_has(&ref, list[next].producer_id))
				ref.pid[ref.n++] = list[next].producer_id;
			next++;
		}
		if (batch_is_control(&b)) {
			int type = ptxn_control_type(&b, err, sizeof(err));

			if (type == -1) {
				assert(v == PTXN_ERROR);
				break;
			}
			if (type == PTXN_CONTROL_ABORT)
				for (size_t i = 0; i < ref.n; i++)
					if (ref.pid[i] == b.producer_id) {
						ref.pid[i] = ref.pid[--ref.n];
						break;
					}
			want = PTXN_MARKER;
		} else if (batch_is_transactional(&b) && ref_has(&ref, b.producer_id)) {
			want = PTXN_ABORTED;
		} else {
			want = PTXN_KEEP;
		}
		assert(v == want);
		assert(t.count == ref.n);
		for (size_t i = 0; i < ref.n; i++)
			assert(ptxn_is_aborted(&t, ref.pid[i]));
	}
	ptxn_fini(&t);
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/txn (see replay.c). */
const char fuzz_corpus[] = "txn";
