/*
 * crc32c.c: see crc32c.h.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
/* Filled once (pthread_once: the metadata log may checksum on its own
 * thread while the loop checksums batches). */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

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
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&table_once, table_init);
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
static int clmul_available(void);

/*
 * One crc32 instruction has a latency of three cycles and a throughput of
 * one per cycle, so a single chain of them runs at a third of the speed
 * the CPU has.  A long buffer is cut in three lanes of equal length that
 * are run side by side (the second and third from a zero register), and
 * joined by linearity: the register after A then B is the register after
 * A moved over |B| zero bytes, xor the register over B from zero
 * (crc32c_zeros(), a few carry-less multiplications).  Below
 * CRC_LANES_MIN bytes, or without PCLMULQDQ, one chain.
 */
#define CRC_LANES_MIN 768

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	if (len >= CRC_LANES_MIN && clmul_available()) {
		size_t lane = len / 24 * 8;
		const uint8_t *q = p + lane, *r = p + 2 * lane, *end = q;
		uint64_t c1 = 0, c2 = 0;

		while (p < end) {
			uint64_t w0, w1, w2;

			memcpy(&w0, p, 8);
			memcpy(&w1, q, 8);
			memcpy(&w2, r, 8);
			c = __builtin_ia32_crc32di(c, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
			p += 8;
			q += 8;
			r += 8;
		}
		c = crc32c_zeros((uint32_t)c, lane) ^ (uint32_t)c1;
		c = crc32c_zeros((uint32_t)c, lane) ^ (uint32_t)c2;
		p = r;
		len -= 3 * lane;
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

/* ---- fix-up ------------------------------------------------------------ */

/*
 * Polynomials over GF(2) modulo P, in the reflected bit order the CRC
 * register uses: bit 31 holds the coefficient of x^0, bit 0 that of x^31.
 * Multiplying by x is then a right shift, reduced by POLY when x^32
 * appears.
 */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	/* r = sum over the terms x^i of a of b * x^i, b stepping by x. */
	for (int i = 0; i < 32; i++) {
		r ^= b & (uint32_t)-(int32_t)((a >> (31 - i)) & 1);
		b = (b >> 1) ^ (POLY & (uint32_t)-(int32_t)(b & 1));
	}
	return r;
}

/*
 * xpow[k][j] = x^(8 * j * 256^k) mod P, for the four base-256 digits of a
 * byte count below 2^32: a shift by n bytes is at most four
 * multiplications, whatever n (two below 64 KiB).
 */
static uint32_t xpow[4][256];
static pthread_once_t xpow_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
#include <wmmintrin.h>

/*
 * With PCLMULQDQ: the carry-less product of two reflected 32-bit values is
 * their product polynomial in bits 62..0 (bit 62 = x^0); shifted left by
 * one it is a 64-bit reflected message, and the crc32 instruction reduces
 * a message m to m * x^32 mod P.  So multiplying by b' = b * x^-32 gives
 * a * b mod P in two instructions; xpowh holds the xpow constants times
 * x^-32.
 */
static uint32_t xpowh[4][256];
static int clmul_state = -1;

__attribute__((target("pclmul,sse4.2"))) static uint32_t
gf_mul_hw(uint32_t a, uint32_t bprime)
{
	__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a),
	    _mm_cvtsi32_si128((int)bprime), 0);
	uint64_t c = (uint64_t)_mm_cvtsi128_si64(p);

	return (uint32_t)__builtin_ia32_crc32di(0, c << 1);
}

static int clmul_available(void)
{
	if (clmul_state < 0) {
		__builtin_cpu_init();
		clmul_state = crc32c_hw_available() &&
		    __builtin_cpu_supports("pclmul") ? 1 : 0;
	}
	return clmul_state;
}
#endif

static void xpow_init(void)
{
	uint32_t step = 0x00800000u; /* x^8: one zero byte */

	for (int k = 0; k < 4; k++) {
		xpow[k][0] = 0x80000000u; /* x^0 */
		for (int j = 1; j < 256; j++)
			xpow[k][j] = gf_mul(xpow[k][j - 1], step);
		step = gf_mul(xpow[k][255], step); /* x^(8 * 256^(k+1)) */
	}
#if defined(__x86_64__) && defined(__GNUC__)
	if (clmul_available()) {
		/* x^-1 = (P - 1) / x: P's coefficients moved down one place */
		uint32_t xinv = (POLY << 1) | 1, xm32 = xinv;

		for (int i = 0; i < 5; i++)
			xm32 = gf_mul(xm32, xm32); /* x^-2, -4, -8, -16, -32 */
		for (int k = 0; k < 4; k++)
			for (int j = 0; j < 256; j++)
				xpowh[k][j] = gf_mul(xpow[k][j], xm32);
	}
#endif
}

uint32_t crc32c_zeros(uint32_t reg, size_t nbytes)
{
	uint64_t n = nbytes, hi = n >> 16 >> 16;

	pthread_once(&xpow_once, xpow_init);
#if defined(__x86_64__) && defined(__GNUC__)
	if (clmul_available()) {
		for (int k = 0; k < 4; k++) {
			unsigned d = (unsigned)(n >> (8 * k)) & 255;

			if (d != 0)
				reg = gf_mul_hw(reg, xpowh[k][d]);
		}
	} else
#endif
	{
		for (int k = 0; k < 4; k++) {
			unsigned d = (unsigned)(n >> (8 * k)) & 255;

			if (d != 0)
				reg = gf_mul(reg, xpow[k][d]);
		}
	}
	if (hi != 0) {
		/* Beyond 4 GiB (never for a record batch): square and multiply
		 * from x^(8 * 2^32). */
		uint32_t pw = gf_mul(xpow[3][255], xpow[3][1]);

		for (; hi != 0; hi >>= 1) {
			if (hi & 1)
				reg = gf_mul(reg, pw);
			pw = gf_mul(pw, pw);
		}
	}
	return reg;
}

/* For the tests: 1 if crc32c_zeros() multiplies with PCLMULQDQ. */
int crc32c_clmul_available(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	return clmul_available();
#else
	return 0;
#endif
}

/* For the tests: the portable multiplication path, whatever the CPU. */
uint32_t crc32c_zeros_sw(uint32_t reg, size_t nbytes)
{
	pthread_once(&xpow_once, xpow_init);
	for (int k = 0; k < 4; k++) {
		unsigned d = (unsigned)((uint64_t)nbytes >> (8 * k)) & 255;

		if (d != 0)
			reg = gf_mul(reg, xpow[k][d]);
	}
	return nbytes >> 16 >> 16 ? crc32c_zeros(reg, nbytes >> 16 >> 16 << 16 << 16) : reg;
}

uint32_t crc32c_fixup(uint32_t crc, const void *delta, size_t dlen,
    size_t tail)
{
	/* The bare CRC of delta: zero start, no final inversion. */
	uint32_t term = ~crc32c(~0u, delta, dlen);

	return crc ^ crc32c_zeros(term, tail);
}
