/*
 * kbuf.h: the byte-level half of the Kafka codec.
 *
 *   struct kr      a bounded reader over hostile input with a sticky error:
 *                  the first failure records its reason and byte offset, every
 *                  later read returns zero/null without moving, and the caller
 *                  checks r->err once at the end.
 *   struct kw      a growable writer with a hard cap fixed at kw_init(); going
 *                  past it sets a sticky error instead of growing further.
 *   struct karena  a chunked bump allocator with a byte cap, for the arrays a
 *                  decoder materialises.  Everything is freed at once.
 *
 * Ownership: kstr/kbytes returned by the reader point into the reader's
 * input buffer (never copied, never NUL-terminated); the input must outlive
 * them.  The writer owns its buffer until kw_take() hands it to the caller.
 */
#ifndef MIRRORD_KBUF_H
#define MIRRORD_KBUF_H

#include <stddef.h>
#include <stdint.h>

struct kstr {
	const char *p;
	int32_t len; /* -1 = null */
};

struct kbytes {
	const uint8_t *p;
	int32_t len; /* -1 = null */
};

struct kuuid {
	uint8_t b[16];
};

#define KSTR_NULL ((struct kstr){ NULL, -1 })
#define KBYTES_NULL ((struct kbytes){ NULL, -1 })

/* A kstr over a NUL-terminated C string; NULL gives the null kstr. */
struct kstr kstr_c(const char *s);
/* 1 if a equals the C string s (a null kstr equals only s == NULL). */
int kstr_eq(struct kstr a, const char *s);
/* 1 if both are null or both hold the same bytes. */
int kstr_same(struct kstr a, struct kstr b);
/* A malloc'd NUL-terminated copy; NULL for the null kstr or out of memory. */
char *kstr_dup(struct kstr s);
/* 1 if the uuid is all zeroes (Kafka's "no topic id"). */
int kuuid_is_zero(const struct kuuid *u);

/* ---- arena ---------------------------------------------------------- */

struct karena;

/* A new arena that hands out at most cap bytes in total; NULL if no memory. */
struct karena *karena_new(size_t cap);
void karena_free(struct karena *a);
/* n zeroed bytes aligned for any type; NULL once the cap would be passed. */
void *karena_alloc(struct karena *a, size_t n);
/* Forget every allocation (keeps one chunk for reuse). */
void karena_reset(struct karena *a);
/* Bytes handed out since creation or the last reset. */
size_t karena_used(const struct karena *a);

/* ---- reader --------------------------------------------------------- */

#define KR_DEFAULT_MAX_ARRAY 100000u      /* elements in any one array */
#define KR_DEFAULT_MAX_STR (1u << 20)     /* bytes in any one string */

struct kr {
	const uint8_t *start, *p, *end;
	int err;            /* sticky: nonzero once any read failed */
	const char *why;    /* static string naming the first failure */
	size_t err_off;     /* byte offset (from start) of the failing field */
	uint32_t max_array; /* largest array count accepted */
	uint32_t max_str;   /* longest string accepted (bytes are bounded by input) */
};

void kr_init(struct kr *r, const void *buf, size_t len);
/* Record a failure at the current offset; only the first one is kept. */
void kr_fail(struct kr *r, const char *why);
/* Record a failure at a given offset (from start); only the first is kept. */
void kr_fail_at(struct kr *r, size_t off, const char *why);
size_t kr_left(const struct kr *r);
size_t kr_off(const struct kr *r);

int8_t kr_i8(struct kr *r);
int16_t kr_i16(struct kr *r);
int32_t kr_i32(struct kr *r);
int64_t kr_i64(struct kr *r);
uint16_t kr_u16(struct kr *r);
uint32_t kr_u32(struct kr *r);
double kr_f64(struct kr *r);
int kr_bool(struct kr *r);                /* any nonzero byte is true */
uint32_t kr_uvarint(struct kr *r);        /* at most 5 bytes, must fit 32 bits */
int32_t kr_varint(struct kr *r);          /* zigzag */
uint64_t kr_uvarlong(struct kr *r);       /* at most 10 bytes */
int64_t kr_varlong(struct kr *r);         /* zigzag */
struct kstr kr_str(struct kr *r);         /* int16 length, -1 = null */
struct kstr kr_cstr(struct kr *r);        /* uvarint length+1, 0 = null */
struct kbytes kr_bytes(struct kr *r);     /* int32 length, -1 = null */
struct kbytes kr_cbytes(struct kr *r);    /* uvarint length+1, 0 = null */
void kr_uuid(struct kr *r, struct kuuid *u);
/*
 * Array counts: -1 is null.  A count is checked against the bytes left
 * (every element takes at least one byte) and against max_array.
 */
int32_t kr_array(struct kr *r);           /* int32 count */
int32_t kr_carray(struct kr *r);          /* uvarint count+1, 0 = null */
/* n raw bytes, or NULL (sticky error) if fewer are left. */
const uint8_t *kr_raw(struct kr *r, size_t n);
/* Skip a whole tagged-field section: count, then (tag, size, data) each. */
void kr_skip_tagged(struct kr *r);

/* ---- writer --------------------------------------------------------- */

/*
 * A byte field the writer did not copy (kw_lend()): n bytes at p belong
 * right before buf[at] in the message.  The caller keeps them alive until
 * the message has gone (lib/client/kconn.c sends them by reference).
 */
struct kw_ref {
	size_t at;
	const uint8_t *p;
	size_t n;
};

struct kw {
	uint8_t *buf;
	size_t len, cap, max; /* max: hard cap on len + lent */
	int err;              /* sticky: nonzero once a write failed */
	const char *why;      /* static string naming the first failure */
	/* Lending (kw_lend()): byte fields of at least lend_min bytes (0:
	 * none) are recorded in refs instead of copied; lent is their sum. */
	size_t lend_min, lent;
	struct kw_ref *refs;
	size_t nrefs, refcap;
};

void kw_init(struct kw *w, size_t max);
void kw_fini(struct kw *w);
/* Empty the buffer and clear the error; keeps the allocation. */
void kw_reset(struct kw *w);
void kw_fail(struct kw *w, const char *why);
/* A hint: about n more bytes follow, so the buffer grows once to hold them
 * (never past the cap) instead of doubling (and copying) its way there.
 * Nothing is written; a failed allocation is left to the writes. */
void kw_expect(struct kw *w, size_t n);

void kw_i8(struct kw *w, int8_t v);
void kw_i16(struct kw *w, int16_t v);
void kw_i32(struct kw *w, int32_t v);
void kw_i64(struct kw *w, int64_t v);
void kw_u16(struct kw *w, uint16_t v);
void kw_u32(struct kw *w, uint32_t v);
void kw_f64(struct kw *w, double v);
void kw_bool(struct kw *w, int v);
void kw_uvarint(struct kw *w, uint32_t v);
void kw_varint(struct kw *w, int32_t v);
void kw_uvarlong(struct kw *w, uint64_t v);
void kw_varlong(struct kw *w, int64_t v);
void kw_str(struct kw *w, struct kstr s);      /* int16 length; > 32767 fails */
void kw_cstr(struct kw *w, struct kstr s);
void kw_bytes(struct kw *w, struct kbytes b);
void kw_cbytes(struct kw *w, struct kbytes b);
void kw_uuid(struct kw *w, const struct kuuid *u);
void kw_raw(struct kw *w, const void *p, size_t n);
void kw_array(struct kw *w, int32_t n);        /* -1 = null */
void kw_carray(struct kw *w, int32_t n);       /* -1 = null */
/* Reserve 4 bytes and return their offset, to be filled by kw_put32(). */
size_t kw_slot32(struct kw *w);
void kw_put32(struct kw *w, size_t slot, int32_t v);
/* An empty tagged-field section (a single 0 byte). */
void kw_tags_empty(struct kw *w);
/*
 * Hand the bytes to the caller (free() them) and leave the writer empty.
 * Returns NULL if the writer is in error (the bytes are dropped).  Lent
 * fields (w->refs) are not in them: read w->refs before, they are
 * forgotten here.
 */
uint8_t *kw_take(struct kw *w, size_t *len);

/*
 * Lending: from now on kw_bytes()/kw_cbytes() of at least min bytes (0:
 * never) write their length but only record where their bytes go
 * (w->refs) instead of copying them.  Such a message is buf with each
 * ref's bytes inserted before buf[ref.at]; kw_size() is its length.
 * Offsets (kw_slot32(), kw_put32()) stay offsets into buf.
 */
void kw_lend(struct kw *w, size_t min);
/* The message's length: the written bytes plus the lent ones. */
size_t kw_size(const struct kw *w);

/* Encoded size of an unsigned varint (1-5). */
size_t kw_uvarint_size(uint32_t v);

#endif
