/*
 * fuzz_mlog: libFuzzer harness for the metadata log reader: the frame
 * scanner (mlog_scan) that tells torn tails from corruption, the record
 * payload decoders (lib/mrec) and the state model's apply functions
 * (lib/mstate), which is everything start-up runs over the bytes on disk.
 *
 * One input is the image of a segment or snapshot file.  Every good frame
 * is applied to a fresh model (as a snapshot if the first frame says so).
 * Then the same bytes with every frame's checksums recomputed go through
 * again, so that mutated payloads reach the decoders instead of stopping
 * at the CRC.
 * Promises checked for any input:
 *   - the scanner's verdict is consistent (offsets inside the input, a
 *     clean scan covers it all, a bad frame starts where the good ones end);
 *   - whatever model the records built, its snapshot (mstate_dump_records)
 *     replays into a model that renders (mstate_dump) exactly the same.
 *
 * Built two ways: with clang -fsanitize=fuzzer (MIRRORD_LIBFUZZER) under
 * --enable-fuzzers, and always as a plain replay program that runs the
 * saved corpus (test/fuzz/corpus/mlog, or the files and directories on its
 * command line) under `make check`.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compat.h"
#include "log.h"
#include "mlog.h"
#include "mstate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORD (1u << 20)

/* Stops the run loudly: a broken promise, not bad input. */
#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_mlog: %s:%d: promise broken: %s\n", __FILE__, \
	    __LINE__, #cond); \
	abort(); } } while (0)

struct feed {
	struct mstate *st;
	int snapshot;
	int first;
	int failed;
	char err[1024];   /* why the last record was refused */
};

static int feed_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	struct feed *f = arg;
	char *err = f->err;

	if (f->first) {
		f->first = 0;
		f->snapshot = type == MLOG_T_SNAPSHOT;
	}
	if (type >= MLOG_TYPE_RESERVED)
		return 0;   /* the file backend checks its own framing */
	struct mlog_rec rec = { .type = type, .len = len, .p = p, .off = off,
	    .file = "fuzz", .in_snapshot = f->snapshot };
	if (mstate_apply_rec(f->st, &rec, err, sizeof(f->err)) != 0) {
		CHECK(err[0] != '\0');   /* every refusal says why */
		f->failed = 1;
		return -1;
	}
	return 0;
}

/* A snapshot sink that frames records into memory. */
struct memsink {
	struct mlog_sink base;
	uint8_t *buf;
	size_t len, cap;
};

static int memsink_put(struct mlog_sink *sink, uint16_t type, const void *p,
    size_t len)
{
	struct memsink *m = (struct memsink *)sink;
	size_t need = m->len + MLOG_FRAME_HDR + len;

	if (len > MAX_RECORD)
		return -1;
	if (need > m->cap) {
		size_t cap = MAX(need, m->cap * 2);
		uint8_t *b = realloc(m->buf, cap);
		if (b == NULL)
			return -1;
		m->buf = b;
		m->cap = cap;
	}
	mlog_frame_header(m->buf + m->len, type, p, (uint32_t)len);
	memcpy(m->buf + m->len + MLOG_FRAME_HDR, p, len);
	m->len = need;
	return 0;
}

/* Scans and applies one file image and checks the promises. */
static void run_one(const uint8_t *data, size_t size)
{
	struct feed f = { .st = mstate_new(), .first = 1 };
	struct feed g = { .st = mstate_new(), .first = 0, .snapshot = 1 };
	struct memsink ms = { .base = { .put = memsink_put } };
	struct mlog_scan_result res, res2;
	char *a = NULL, *b = NULL;

	if (f.st == NULL || g.st == NULL)
		goto out;
	mlog_scan(data, size, MAX_RECORD, feed_frame, &f, &res);
	CHECK(res.good_end <= size);
	switch (res.end) {
	case MLOG_SCAN_CLEAN:
		CHECK(res.good_end == size);
		break;
	case MLOG_SCAN_TORN:
	case MLOG_SCAN_CORRUPT:
	case MLOG_SCAN_STOPPED:
		CHECK(res.bad_off == res.good_end);
		CHECK(res.bad_off < size);
		CHECK(res.why[0] != '\0');
		CHECK((res.end == MLOG_SCAN_STOPPED) == f.failed);
		break;
	}

	/* Snapshot the model and restore it: the same model. */
	if (mstate_dump_records(f.st, &ms.base) != 0 || ms.base.failed)
		goto out;   /* only out of memory gets here */
	mlog_scan(ms.buf, ms.len, MAX_RECORD, feed_frame, &g, &res2);
	if (res2.end != MLOG_SCAN_CLEAN)
		fprintf(stderr, "restoring the snapshot stopped at %llu: %s\n",
		    (unsigned long long)res2.bad_off, g.err);
	CHECK(res2.end == MLOG_SCAN_CLEAN);
	a = mstate_dump(f.st);
	b = mstate_dump(g.st);
	if (a != NULL && b != NULL && strcmp(a, b) != 0) {
		fprintf(stderr, "model:\n%s\nrestored:\n%s\n", a, b);
		CHECK(!"snapshot restores the same model");
	}
out:
	free(a);
	free(b);
	free(ms.buf);
	mstate_free(f.st);
	mstate_free(g.st);
}

/* Rewrites every frame's checksums so mutated payloads get past them and
 * reach the record decoders and apply functions. */
static void fix_checksums(uint8_t *b, size_t len)
{
	size_t off = 0;

	while (off + MLOG_FRAME_HDR <= len) {
		uint32_t flen = be32_load(b + off);
		if (flen > len - off - MLOG_FRAME_HDR || flen > MAX_RECORD)
			break;
		mlog_frame_header(b + off, be16_load(b + off + 8),
		    b + off + MLOG_FRAME_HDR, flen);
		off += MLOG_FRAME_HDR + flen;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	run_one(data, size);
	copy = malloc(size > 0 ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	fix_checksums(copy, size);
	if (memcmp(copy, data, size) != 0)
		run_one(copy, size);
	free(copy);
	return 0;
}

/* The replay program's corpus: test/fuzz/corpus/mlog (see replay.c). */
const char fuzz_corpus[] = "mlog";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_init("fuzz_mlog", LOG_LVL_ERROR, 0);
	return 0;
}
