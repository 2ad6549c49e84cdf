/*
 * bench_crc: what the header rewrite of a record batch costs per batch,
 * with its CRC-32C recomputed over the whole batch versus fixed up from
 * the stored CRC (crc32c_fixup(), O(log n)), for batch sizes from 128
 * bytes to 4 MiB.  The data plane verifies the source CRC once when a
 * batch is fetched (one pass over it, kept) and rewrites the header when
 * it is produced; the fix-up removes the second pass.  So the table also
 * shows verify + rewrite, the data plane's whole CRC work per batch, both
 * ways.  Figures are ns per batch, GB/s, and the ratios measured in the
 * same run (timing lives here, never in the tests).
 *
 * Run with `make bench-crc` (part of `make bench`); argv[1] = "sw" uses
 * the table-driven CRC instead of the SSE4.2 instruction for the passes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int use_sw;

static uint32_t pass(const uint8_t *p, size_t len)
{
	return use_sw ? crc32c_sw(0, p + BATCH_OFF_ATTRIBUTES, len - BATCH_OFF_ATTRIBUTES)
		      : batch_compute_crc(p, len);
}

static volatile uint32_t sink;

/* ns per batch of: 0 verify only, 1 rewrite + full CRC, 2 rewrite + fix-up */
static double run(int what, uint8_t *buf, size_t len, long iters)
{
	struct batch b;
	struct batch_rewrite rw = { .flags = BATCH_RW_PRODUCER | BATCH_RW_CLEAR_TXN };
	char err[200];
	double t0;

	if (batch_parse(buf, len, &b, err, sizeof(err)) != BATCH_OK) {
		fprintf(stderr, "bench_crc: %s\n", err);
		exit(1);
	}
	t0 = now_s();
	for (long i = 0; i < iters; i++) {
		rw.producer_id = 1000 + i;
		rw.base_sequence = (int32_t)i;
		if (what == 0) {
			sink ^= pass(buf, len);
			continue;
		}
		if (what == 1 && use_sw) {
			/* the rewrite's stores, then the table-driven pass */
			be64_store(buf + BATCH_OFF_BASE_OFFSET, 0);
			be16_store(buf + BATCH_OFF_ATTRIBUTES, b.attributes);
			be64_store(buf + BATCH_OFF_PRODUCER_ID, (uint64_t)rw.producer_id);
			be16_store(buf + BATCH_OFF_PRODUCER_EPOCH, 0);
			be32_store(buf + BATCH_OFF_BASE_SEQUENCE, (uint32_t)rw.base_sequence);
			be32_store(buf + BATCH_OFF_CRC, pass(buf, len));
		} else {
			if (what == 1)
				rw.flags |= BATCH_RW_FULL_CRC;
			else
				rw.flags = (rw.flags & ~(unsigned)BATCH_RW_FULL_CRC) |
				    BATCH_RW_FIXUP_CRC;
			batch_rewrite_header(&b, &rw, buf, len, err, sizeof(err));
		}
		/* the next round starts from this round's (valid) output */
		b.crc = be32_load(buf + BATCH_OFF_CRC);
		b.producer_id = rw.producer_id;
		sink ^= b.crc;
	}
	return (now_s() - t0) * 1e9 / (double)iters;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 128, 256, 384, 512, 1024, 2048, 4096, 16384, 65536,
		262144, 1 << 20, 4 << 20 };
	size_t maxlen = 4 << 20;
	uint8_t *buf = malloc(maxlen);
	uint32_t seed = 7;

	use_sw = argc > 1 && strcmp(argv[1], "sw") == 0;
	if (buf == NULL)
		return 1;
	for (size_t i = 0; i < maxlen; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	printf("CRC-32C per record batch (%s CRC pass): header rewrite with a full\n"
	    "recompute vs with the fix-up; verify+rewrite = the data plane's CRC\n"
	    "work per batch (source verified once at fetch, kept)\n\n",
	    use_sw ? "table-driven" : crc32c_hw_available() ? "SSE4.2" : "table-driven");
	printf("%9s %10s %10s %10s %8s %9s %9s %8s\n", "batch", "verify", "full",
	    "fixup", "full/fix", "v+full", "v+fixup", "ratio");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t len = sizes[si];
		/* about 0.3 s of full passes per size, at least 2000 rounds */
		long iters = (long)(200000000.0 / (double)len);
		double v, full, fix;

		if (iters < 2000)
			iters = 2000;
		memset(buf, 0, BATCH_HEADER_LEN);
		be32_store(buf + BATCH_OFF_LENGTH, (uint32_t)(len - BATCH_LOG_OVERHEAD));
		buf[BATCH_OFF_MAGIC] = 2;
		be32_store(buf + BATCH_OFF_RECORD_COUNT, 1);
		be32_store(buf + BATCH_OFF_CRC, batch_compute_crc(buf, len));
		v = run(0, buf, len, iters);
		full = run(1, buf, len, iters);
		fix = run(2, buf, len, iters);
		if (batch_compute_crc(buf, len) != be32_load(buf + BATCH_OFF_CRC)) {
			fprintf(stderr, "bench_crc: the fixed-up CRC is wrong at %zu bytes\n", len);
			return 1;
		}
		printf("%9zu %8.0fns %8.0fns %8.0fns %7.1fx %7.0fns %7.0fns %7.2fx\n",
		    len, v, full, fix, full / fix, v + full, v + fix, (v + full) / (v + fix));
	}
	free(buf);
	return 0;
}
