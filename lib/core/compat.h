/*
 * compat.h: small helpers every module may use.  Nothing here allocates or
 * logs; it is macros and inline functions only.
 */
#ifndef MIRRORD_COMPAT_H
#define MIRRORD_COMPAT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#define NORETURN __attribute__((noreturn))
#define UNUSED __attribute__((unused))
#else
#define likely(x) (x)
#define unlikely(x) (x)
#define PRINTF_LIKE(f, a)
#define NORETURN
#define UNUSED
#endif

/*
 * Fills an error buffer (the err, errlen out-parameter pair of the house
 * convention); a NULL or empty buffer is left alone.
 */
static inline void seterr(char *err, size_t errlen, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
static inline void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Big-endian loads and stores for fixed-layout headers (record batches). */
static inline uint16_t be16_load(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t be32_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64_load(const uint8_t *p)
{
	return (uint64_t)be32_load(p) << 32 | be32_load(p + 4);
}
static inline void be16_store(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void be32_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void be64_store(uint8_t *p, uint64_t v)
{
	be32_store(p, (uint32_t)(v >> 32));
	be32_store(p + 4, (uint32_t)v);
}

/* FNV-1a, 32 bits, of n bytes: the hash of the in-memory tables of topic
 * names (Fetch answers, fetch sessions, admin requests). */
static inline uint32_t fnv1a32(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Monotonic and wall clocks in milliseconds. */
int64_t clock_mono_ms(void);
int64_t clock_wall_ms(void);

#endif
