/*
 * crc32c.h: CRC-32C (Castagnoli), the checksum of Kafka record batches and
 * of mirrord's metadata log records.  Uses the SSE4.2 crc32 instruction when
 * the CPU has it (checked once at run time) and a slicing-by-8 table
 * otherwise.  crc32c(0, buf, len) is the value Kafka stores in a batch.
 */
#ifndef MIRRORD_CRC32C_H
#define MIRRORD_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over len bytes. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* The portable implementation, exposed so tests can compare the two. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* 1 if the hardware path is in use. */
int crc32c_hw_available(void);

/*
 * Fix-up without a full recompute.  CRC-32C is linear over GF(2): for two
 * messages of the same length, crc(A) ^ crc(B) depends only on A ^ B, and
 * leading zero bytes of A ^ B do not change it.  So when dlen bytes of a
 * message are replaced and tail bytes follow them, the new CRC is
 *   crc ^ crc32c_fixup_term(delta, dlen, tail)
 * where delta is old ^ new over the replaced bytes.  The term costs one
 * pass over delta plus O(log tail) work (a multiplication by
 * x^(8 * tail) mod P), not a pass over the tail.
 */
uint32_t crc32c_fixup(uint32_t crc, const void *delta, size_t dlen,
    size_t tail);
/* The register value times x^(8 * nbytes) mod P: the state of a bare
 * (no pre/post inversion) CRC after nbytes zero bytes. */
uint32_t crc32c_zeros(uint32_t reg, size_t nbytes);
/* The same with the portable multiplication (the tests compare the two),
 * and 1 if crc32c_zeros() uses PCLMULQDQ. */
uint32_t crc32c_zeros_sw(uint32_t reg, size_t nbytes);
int crc32c_clmul_available(void);

#endif
