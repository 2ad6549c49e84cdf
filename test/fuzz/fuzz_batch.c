/*
 * fuzz_batch: libFuzzer harness for lib/batch, the decoder of record
 * batches fetched from a source cluster (hostile input).
 *
 * One input is a Fetch partition's Records blob.  It is iterated batch by
 * batch; each whole batch is CRC-checked, then a copy with its CRC fixed up
 * (so the fuzzer gets past the checksum) goes through the Produce
 * validator, the hole test, the hole re-encoder (with a small cap, so
 * compression bombs are exercised) and a header rewrite.  Invariants that
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_iter it;
	struct batch b;
	char err[512];
	size_t prefix, n, seen = 0;
	int rc;

	batch_iter_init(&it, data, size);
	while ((rc = batch_iter_next(&it, &b, err, sizeof(err))) == BATCH_OK) {
		assert(b.len >= BATCH_HEADER_LEN && b.p + b.len <= data + size);
		(void)batch_verify_crc(&b, err, sizeof(err));
		one_batch(&b);
		seen++;
	}
	assert(it.pos <= size);
	/* the cheap helper stops exactly where the iterator did */
	(void)batch_complete_prefix(data, size, &prefix, &n, err, sizeof(err));
	assert(prefix == it.pos);
	assert(n == seen);
	(void)batch_validate_produce(data, size, 0, err, sizeof(err));
	return 0;
}

#ifndef MIRRORD_LIBFUZZER
/* The replay driver: every file given, or under the directories given. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "fuzz_batch: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(len ? (size_t)len : 1);
	if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "fuzz_batch: %s: short read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* an exact-size copy, so ASan sees any over-read */
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

static int replay(const char *path, int *count)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "fuzz_batch: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	if ((d = opendir(path)) == NULL) {
		fprintf(stderr, "fuzz_batch: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char sub[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (replay(sub, count) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	char def[4096];
	const char *src = getenv("top_srcdir");
	int count = 0, rc = 0;

	if (argc < 2) {
		snprintf(def, sizeof(def), "%s/test/fuzz/corpus/batch", src ? src : ".");
		rc = replay(def, &count);
	}
	for (int i = 1; i < argc; i++)
		if (replay(argv[i], &count) < 0)
			rc = -1;
	if (rc == 0 && count == 0) {
		fprintf(stderr, "fuzz_batch: no corpus files found\n");
		return 1;
	}
	printf("fuzz_batch: %d inputs replayed\n", count);
	return rc == 0 ? 0 : 1;
}
#endif
