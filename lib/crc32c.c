/*
 * crc32c.c: see crc32c.h.
 */
#include "config.h"

#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int table_ready;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^
			    table[0][table[t - 1][i] & 0xff];
	table_ready = 1;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!table_ready)
		table_init();
	crc = ~crc;
	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		/* The table walk below assumes little-endian byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		    table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		    table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

static int hw_state = -1;

int crc32c_hw_available(void)
{
	if (hw_state < 0) {
		__builtin_cpu_init();
		hw_state = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	}
	return hw_state;
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (crc32c_hw_available())
		return crc32c_hw(crc, buf, len);
	return crc32c_sw(crc, buf, len);
}
#else
int crc32c_hw_available(void)
{
	return 0;
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_sw(crc, buf, len);
}
#endif
