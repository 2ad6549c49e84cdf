/*
 * testvarint.h: the zigzag varint of Kafka's record format, written into
 * a plain buffer, for the unit tests that build record batches byte by
 * byte (test_batch.c, test_pipe_lend.c, test_pipe_txn.c).  The library's
 * own writer (kw_varlong(), lib/wire/kbuf.h) needs a struct kw; these
 * tests build into stack arrays.
 */
#ifndef MIRRORD_TESTVARINT_H
#define MIRRORD_TESTVARINT_H

#include <stddef.h>
#include <stdint.h>

/* Writes v at p (at most 10 bytes); returns how many bytes. */
static inline size_t put_varint(uint8_t *p, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 0;

	while (z >= 0x80) {
		p[n++] = (uint8_t)(z | 0x80);
		z >>= 7;
	}
	p[n++] = (uint8_t)z;
	return n;
}

#endif
