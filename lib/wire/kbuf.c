/*
 * kbuf.c: bounded reader, capped writer and arena for the Kafka codec.
 * See kbuf.h for the contract; every read is checked against the bytes left
 * before it touches memory.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "kbuf.h"

/* ---- strings -------------------------------------------------------- */

struct kstr kstr_c(const char *s)
{
	struct kstr k = KSTR_NULL;
	size_t n;

	if (s == NULL)
		return k;
	n = strlen(s);
	k.p = s;
	k.len = n > INT32_MAX ? INT32_MAX : (int32_t)n;
	return k;
}

int kstr_eq(struct kstr a, const char *s)
{
	size_t n;

	if (a.len < 0 || s == NULL)
		return a.len < 0 && s == NULL;
	n = strlen(s);
	return n == (size_t)a.len && (n == 0 || memcmp(a.p, s, n) == 0);
}

int kstr_same(struct kstr a, struct kstr b)
{
	if (a.len < 0 || b.len < 0)
		return a.len < 0 && b.len < 0;
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

char *kstr_dup(struct kstr s)
{
	char *d;

	if (s.len < 0)
		return NULL;
	d = malloc((size_t)s.len + 1);
	if (d == NULL)
		return NULL;
	if (s.len > 0)
		memcpy(d, s.p, (size_t)s.len);
	d[s.len] = '\0';
	return d;
}

int kuuid_is_zero(const struct kuuid *u)
{
	for (size_t i = 0; i < sizeof(u->b); i++)
		if (u->b[i] != 0)
			return 0;
	return 1;
}

/* ---- arena ---------------------------------------------------------- */

#define KARENA_ALIGN 16
#define KARENA_CHUNK 8192

struct karena_chunk {
	struct karena_chunk *next;
	size_t size, used;
	_Alignas(KARENA_ALIGN) uint8_t data[];
};

struct karena {
	struct karena_chunk *head; /* current chunk; older ones follow */
	size_t cap, used;
};

struct karena *karena_new(size_t cap)
{
	struct karena *a = calloc(1, sizeof(*a));

	if (a != NULL)
		a->cap = cap;
	return a;
}

static void karena_free_chunks(struct karena_chunk *c)
{
	while (c != NULL) {
		struct karena_chunk *next = c->next;

		free(c);
		c = next;
	}
}

void karena_free(struct karena *a)
{
	if (a == NULL)
		return;
	karena_free_chunks(a->head);
	free(a);
}

void *karena_alloc(struct karena *a, size_t n)
{
	struct karena_chunk *c;
	size_t need = (n + KARENA_ALIGN - 1) & ~(size_t)(KARENA_ALIGN - 1);
	void *p;

	if (need < n || need == 0)
		need = need == 0 && n == 0 ? KARENA_ALIGN : SIZE_MAX;
	if (need > a->cap || a->used > a->cap - need)
		return NULL;
	c = a->head;
	if (c == NULL || c->size - c->used < need) {
		size_t size = need > KARENA_CHUNK ? need : KARENA_CHUNK;

		c = malloc(sizeof(*c) + size);
		if (c == NULL)
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	p = c->data + c->used;
	c->used += need;
	a->used += need;
	memset(p, 0, n);
	return p;
}

void karena_reset(struct karena *a)
{
	struct karena_chunk *keep = a->head;

	if (keep != NULL) {
		karena_free_chunks(keep->next);
		keep->next = NULL;
		keep->used = 0;
	}
	a->used = 0;
}

size_t karena_used(const struct karena *a)
{
	return a->used;
}

/* ---- reader --------------------------------------------------------- */

void kr_init(struct kr *r, const void *buf, size_t len)
{
	static const uint8_t empty[1];

	if (buf == NULL) /* pointer arithmetic on NULL is undefined, even + 0 */
		buf = empty, len = 0;
	r->start = buf;
	r->p = buf;
	r->end = r->start + len;
	r->err = 0;
	r->why = NULL;
	r->err_off = 0;
	r->max_array = KR_DEFAULT_MAX_ARRAY;
	r->max_str = KR_DEFAULT_MAX_STR;
}

void kr_fail_at(struct kr *r, size_t off, const char *why)
{
	if (r->err)
		return;
	r->err = 1;
	r->why = why;
	r->err_off = off;
}

void kr_fail(struct kr *r, const char *why)
{
	kr_fail_at(r, (size_t)(r->p - r->start), why);
}

size_t kr_left(const struct kr *r)
{
	return (size_t)(r->end - r->p);
}

size_t kr_off(const struct kr *r)
{
	return (size_t)(r->p - r->start);
}

/* n bytes at the cursor, advancing past them; NULL and an error if short. */
static const uint8_t *take(struct kr *r, size_t n, const char *why)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if (kr_left(r) < n) {
		kr_fail(r, why);
		return NULL;
	}
	p = r->p;
	r->p += n;
	return p;
}

int8_t kr_i8(struct kr *r)
{
	const uint8_t *p = take(r, 1, "truncated int8");

	return p ? (int8_t)p[0] : 0;
}

uint16_t kr_u16(struct kr *r)
{
	const uint8_t *p = take(r, 2, "truncated int16");

	return p ? be16_load(p) : 0;
}

int16_t kr_i16(struct kr *r)
{
	return (int16_t)kr_u16(r);
}

uint32_t kr_u32(struct kr *r)
{
	const uint8_t *p = take(r, 4, "truncated int32");

	return p ? be32_load(p) : 0;
}

int32_t kr_i32(struct kr *r)
{
	return (int32_t)kr_u32(r);
}

int64_t kr_i64(struct kr *r)
{
	const uint8_t *p = take(r, 8, "truncated int64");

	return p ? (int64_t)be64_load(p) : 0;
}

double kr_f64(struct kr *r)
{
	const uint8_t *p = take(r, 8, "truncated float64");
	uint64_t bits;
	double d;

	if (p == NULL)
		return 0.0;
	bits = be64_load(p);
	memcpy(&d, &bits, sizeof(d));
	return d;
}

int kr_bool(struct kr *r)
{
	return kr_i8(r) != 0;
}

/* Shared varint loop: at most maxbytes bytes, value must fit in bits. */
static uint64_t read_uvar(struct kr *r, int maxbytes, int bits, const char *what_short,
    const char *what_long)
{
	size_t off = kr_off(r);
	uint64_t v = 0;

	if (r->err)
		return 0;
	for (int i = 0; i < maxbytes; i++) {
		uint8_t b;
		int shift = 7 * i;

		if (r->p >= r->end) {
			kr_fail_at(r, off, what_short);
			r->p = r->start + off;
			return 0;
		}
		b = *r->p++;
		/* The last byte may only carry the bits left in the value. */
		if (shift + 7 > bits && (b & 0x7f) >> (bits - shift) != 0) {
			kr_fail_at(r, off, what_long);
			r->p = r->start + off;
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return v;
	}
	kr_fail_at(r, off, what_long);
	r->p = r->start + off;
	return 0;
}

uint32_t kr_uvarint(struct kr *r)
{
	return (uint32_t)read_uvar(r, 5, 32, "truncated varint", "varint longer than 32 bits");
}

int32_t kr_varint(struct kr *r)
{
	uint32_t u = kr_uvarint(r);

	return (int32_t)(u >> 1) ^ -(int32_t)(u & 1);
}

uint64_t kr_uvarlong(struct kr *r)
{
	return read_uvar(r, 10, 64, "truncated varlong", "varlong longer than 64 bits");
}

int64_t kr_varlong(struct kr *r)
{
	uint64_t u = kr_uvarlong(r);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* Validate a decoded string length and take its bytes. */
static struct kstr str_body(struct kr *r, size_t off, int64_t len)
{
	struct kstr s = KSTR_NULL;

	if (r->err)
		return s;
	if (len < -1) {
		kr_fail_at(r, off, "negative string length");
		return s;
	}
	if (len == -1)
		return s;
	if ((uint64_t)len > r->max_str) {
		kr_fail_at(r, off, "string longer than the limit");
		return s;
	}
	if ((uint64_t)len > kr_left(r)) {
		kr_fail_at(r, off, "string length past the end of input");
		return s;
	}
	s.p = (const char *)r->p;
	s.len = (int32_t)len;
	r->p += len;
	return s;
}

struct kstr kr_str(struct kr *r)
{
	size_t off = kr_off(r);
	int16_t len = kr_i16(r);

	return str_body(r, off, len);
}

struct kstr kr_cstr(struct kr *r)
{
	size_t off = kr_off(r);
	uint32_t n = kr_uvarint(r);

	return str_body(r, off, (int64_t)n - 1);
}

static struct kbytes bytes_body(struct kr *r, size_t off, int64_t len)
{
	struct kbytes b = KBYTES_NULL;

	if (r->err)
		return b;
	if (len < -1) {
		kr_fail_at(r, off, "negative bytes length");
		return b;
	}
	if (len == -1)
		return b;
	if ((uint64_t)len > kr_left(r)) {
		kr_fail_at(r, off, "bytes length past the end of input");
		return b;
	}
	b.p = r->p;
	b.len = (int32_t)len;
	r->p += len;
	return b;
}

struct kbytes kr_bytes(struct kr *r)
{
	size_t off = kr_off(r);
	int32_t len = kr_i32(r);

	return bytes_body(r, off, len);
}

struct kbytes kr_cbytes(struct kr *r)
{
	size_t off = kr_off(r);
	uint32_t n = kr_uvarint(r);

	return bytes_body(r, off, (int64_t)n - 1);
}

void kr_uuid(struct kr *r, struct kuuid *u)
{
	const uint8_t *p = take(r, sizeof(u->b), "truncated uuid");

	if (p != NULL)
		memcpy(u->b, p, sizeof(u->b));
	else
		memset(u->b, 0, sizeof(u->b));
}

static int32_t array_count(struct kr *r, size_t off, int64_t n)
{
	if (r->err)
		return 0;
	if (n < -1) {
		kr_fail_at(r, off, "negative array count");
		return 0;
	}
	if (n == -1)
		return -1;
	if ((uint64_t)n > r->max_array) {
		kr_fail_at(r, off, "array count over the limit");
		return 0;
	}
	if ((uint64_t)n > kr_left(r)) {
		kr_fail_at(r, off, "array count larger than the bytes left");
		return 0;
	}
	return (int32_t)n;
}

int32_t kr_array(struct kr *r)
{
	size_t off = kr_off(r);
	int32_t n = kr_i32(r);

	return array_count(r, off, n);
}

int32_t kr_carray(struct kr *r)
{
	size_t off = kr_off(r);
	uint32_t n = kr_uvarint(r);

	return array_count(r, off, (int64_t)n - 1);
}

const uint8_t *kr_raw(struct kr *r, size_t n)
{
	return take(r, n, "truncated raw bytes");
}

void kr_skip_tagged(struct kr *r)
{
	size_t off = kr_off(r);
	uint32_t n = kr_uvarint(r);

	if (r->err)
		return;
	/* Each tagged field takes at least two bytes (tag and size). */
	if (n > kr_left(r) / 2) {
		kr_fail_at(r, off, "tagged field count larger than the bytes left");
		return;
	}
	for (uint32_t i = 0; i < n && !r->err; i++) {
		size_t foff;
		uint32_t size;

		(void)kr_uvarint(r);
		foff = kr_off(r);
		size = kr_uvarint(r);
		if (r->err)
			return;
		if (size > kr_left(r)) {
			kr_fail_at(r, foff, "tagged field size past the end of input");
			return;
		}
		r->p += size;
	}
}

/* ---- writer --------------------------------------------------------- */

void kw_init(struct kw *w, size_t max)
{
	w->buf = NULL;
	w->len = 0;
	w->cap = 0;
	w->max = max;
	w->err = 0;
	w->why = NULL;
	w->lend_min = 0;
	w->lent = 0;
	w->refs = NULL;
	w->nrefs = 0;
	w->refcap = 0;
}

void kw_expect(struct kw *w, size_t n)
{
	size_t want;
	uint8_t *nb;

	if (w->err || w->len >= w->max)
		return;
	want = n > w->max - w->len ? w->max : w->len + n;
	if (want <= w->cap)
		return;
	nb = realloc(w->buf, want);
	if (nb == NULL)
		return;
	w->buf = nb;
	w->cap = want;
}

void kw_fini(struct kw *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = 0;
	w->cap = 0;
	free(w->refs);
	w->refs = NULL;
	w->nrefs = 0;
	w->refcap = 0;
	w->lent = 0;
}

void kw_reset(struct kw *w)
{
	w->len = 0;
	w->nrefs = 0;
	w->lent = 0;
	w->err = 0;
	w->why = NULL;
}

void kw_fail(struct kw *w, const char *why)
{
	if (w->err)
		return;
	w->err = 1;
	w->why = why;
}

/* Room for n more bytes; returns where they go, or NULL (sticky error). */
static uint8_t *reserve(struct kw *w, size_t n)
{
	size_t want, cap;
	uint8_t *nb;

	if (w->err)
		return NULL;
	if (n > w->max || w->len + w->lent > w->max - n) {
		kw_fail(w, "message larger than the writer's cap");
		return NULL;
	}
	want = w->len + n;
	if (want > w->cap) {
		cap = w->cap ? w->cap : 256;
		while (cap < want)
			cap = cap > SIZE_MAX / 2 ? want : cap * 2;
		if (cap > w->max)
			cap = w->max;
		nb = realloc(w->buf, cap);
		if (nb == NULL) {
			kw_fail(w, "out of memory");
			return NULL;
		}
		w->buf = nb;
		w->cap = cap;
	}
	nb = w->buf + w->len;
	w->len += n;
	return nb;
}

void kw_raw(struct kw *w, const void *p, size_t n)
{
	uint8_t *d = reserve(w, n);

	if (d != NULL && n > 0)
		memcpy(d, p, n);
}

void kw_i8(struct kw *w, int8_t v)
{
	uint8_t *d = reserve(w, 1);

	if (d != NULL)
		d[0] = (uint8_t)v;
}

void kw_u16(struct kw *w, uint16_t v)
{
	uint8_t *d = reserve(w, 2);

	if (d != NULL)
		be16_store(d, v);
}

void kw_i16(struct kw *w, int16_t v)
{
	kw_u16(w, (uint16_t)v);
}

void kw_u32(struct kw *w, uint32_t v)
{
	uint8_t *d = reserve(w, 4);

	if (d != NULL)
		be32_store(d, v);
}

void kw_i32(struct kw *w, int32_t v)
{
	kw_u32(w, (uint32_t)v);
}

void kw_i64(struct kw *w, int64_t v)
{
	uint8_t *d = reserve(w, 8);

	if (d != NULL)
		be64_store(d, (uint64_t)v);
}

void kw_f64(struct kw *w, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	kw_i64(w, (int64_t)bits);
}

void kw_bool(struct kw *w, int v)
{
	kw_i8(w, v ? 1 : 0);
}

void kw_uvarlong(struct kw *w, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	kw_raw(w, tmp, n);
}

void kw_uvarint(struct kw *w, uint32_t v)
{
	kw_uvarlong(w, v);
}

void kw_varint(struct kw *w, int32_t v)
{
	kw_uvarint(w, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

void kw_varlong(struct kw *w, int64_t v)
{
	kw_uvarlong(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

size_t kw_uvarint_size(uint32_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

void kw_str(struct kw *w, struct kstr s)
{
	if (s.len < 0) {
		kw_i16(w, -1);
		return;
	}
	if (s.len > INT16_MAX) {
		kw_fail(w, "string longer than 32767 bytes in an int16-length field");
		return;
	}
	kw_i16(w, (int16_t)s.len);
	kw_raw(w, s.p, (size_t)s.len);
}

void kw_cstr(struct kw *w, struct kstr s)
{
	if (s.len < 0) {
		kw_uvarint(w, 0);
		return;
	}
	kw_uvarint(w, (uint32_t)s.len + 1);
	kw_raw(w, s.p, (size_t)s.len);
}

void kw_lend(struct kw *w, size_t min)
{
	w->lend_min = min;
}

size_t kw_size(const struct kw *w)
{
	return w->len + w->lent;
}

/* The n bytes at p: lent (recorded in w->refs) when lending takes them,
 * else copied. */
static void put_field(struct kw *w, const uint8_t *p, size_t n)
{
	struct kw_ref *r;

	if (w->lend_min == 0 || n < w->lend_min) {
		kw_raw(w, p, n);
		return;
	}
	if (w->err)
		return;
	if (n > w->max || w->len + w->lent > w->max - n) {
		kw_fail(w, "message larger than the writer's cap");
		return;
	}
	if (w->nrefs == w->refcap) {
		size_t cap = w->refcap ? w->refcap * 2 : 8;

		r = realloc(w->refs, cap * sizeof(*r));
		if (r == NULL) {
			kw_fail(w, "out of memory");
			return;
		}
		w->refs = r;
		w->refcap = cap;
	}
	r = &w->refs[w->nrefs++];
	r->at = w->len;
	r->p = p;
	r->n = n;
	w->lent += n;
}

void kw_bytes(struct kw *w, struct kbytes b)
{
	if (b.len < 0) {
		kw_i32(w, -1);
		return;
	}
	kw_i32(w, b.len);
	put_field(w, b.p, (size_t)b.len);
}

void kw_cbytes(struct kw *w, struct kbytes b)
{
	if (b.len < 0) {
		kw_uvarint(w, 0);
		return;
	}
	kw_uvarint(w, (uint32_t)b.len + 1);
	put_field(w, b.p, (size_t)b.len);
}

void kw_uuid(struct kw *w, const struct kuuid *u)
{
	kw_raw(w, u->b, sizeof(u->b));
}

void kw_array(struct kw *w, int32_t n)
{
	kw_i32(w, n < 0 ? -1 : n);
}

void kw_carray(struct kw *w, int32_t n)
{
	kw_uvarint(w, n < 0 ? 0 : (uint32_t)n + 1);
}

size_t kw_slot32(struct kw *w)
{
	size_t at = w->len;

	kw_i32(w, 0);
	return at;
}

void kw_put32(struct kw *w, size_t slot, int32_t v)
{
	if (w->err)
		return;
	if (slot > w->len || w->len - slot < 4) {
		kw_fail(w, "length slot outside the written bytes");
		return;
	}
	be32_store(w->buf + slot, (uint32_t)v);
}

void kw_tags_empty(struct kw *w)
{
	kw_uvarint(w, 0);
}

uint8_t *kw_take(struct kw *w, size_t *len)
{
	uint8_t *b = w->buf;

	if (w->err) {
		*len = 0;
		kw_fini(w);
		return NULL;
	}
	*len = w->len;
	if (b == NULL)
		b = malloc(1); /* an empty message is still a buffer to free */
	w->buf = NULL;
	w->len = 0;
	w->cap = 0;
	w->nrefs = 0;
	w->lent = 0;
	return b;
}
