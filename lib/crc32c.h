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

#endif
