/*
 * batch.c: record batch v2 header parse, CRC, header rewrite, the strict
 * Produce validator and the re-encoding of batches with offset holes.
 * See batch.h for the layout and the contracts.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "batch.h"
#include "compat.h"
#include "crc32c.h"
#include "massert.h"

/* Formats the reason into err (if any); always returns -1. */
static int PRINTF_LIKE(3, 4) fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *const codec_names[8] = {
#define BATCH_CODEC_NAME(name, num, str) [num] = str,
	BATCH_CODEC_TABLE(BATCH_CODEC_NAME)
#undef BATCH_CODEC_NAME
};
_Static_assert(BATCH_CODEC_COUNT == 5, "codec table and enum disagree");

const char *batch_codec_name(int codec)
{
	if (codec < 0 || codec >= (int)ARRAY_SIZE(codec_names) || codec_names[codec] == NULL)
		return "unknown";
	return codec_names[codec];
}

int batch_codec_supported(int codec)
{
	return codec >= BATCH_CODEC_NONE && codec < BATCH_CODEC_COUNT;
}

/* ---- header ---------------------------------------------------------- */

static void header_load(const uint8_t *p, struct batch *b)
{
	b->base_offset = (int64_t)be64_load(p + BATCH_OFF_BASE_OFFSET);
	b->batch_length = (int32_t)be32_load(p + BATCH_OFF_LENGTH);
	b->leader_epoch = (int32_t)be32_load(p + BATCH_OFF_LEADER_EPOCH);
	b->magic = (int8_t)p[BATCH_OFF_MAGIC];
	b->crc = be32_load(p + BATCH_OFF_CRC);
	b->attributes = be16_load(p + BATCH_OFF_ATTRIBUTES);
	b->last_offset_delta = (int32_t)be32_load(p + BATCH_OFF_LAST_OFFSET_DELTA);
	b->base_timestamp = (int64_t)be64_load(p + BATCH_OFF_BASE_TIMESTAMP);
	b->max_timestamp = (int64_t)be64_load(p + BATCH_OFF_MAX_TIMESTAMP);
	b->producer_id = (int64_t)be64_load(p + BATCH_OFF_PRODUCER_ID);
	b->producer_epoch = (int16_t)be16_load(p + BATCH_OFF_PRODUCER_EPOCH);
	b->base_sequence = (int32_t)be32_load(p + BATCH_OFF_BASE_SEQUENCE);
	b->record_count = (int32_t)be32_load(p + BATCH_OFF_RECORD_COUNT);
}

int batch_parse(const uint8_t *buf, size_t len, struct batch *b, char *err,
    size_t errlen)
{
	int64_t base;
	int32_t blen;

	memset(b, 0, sizeof(*b));
	if (len < BATCH_LOG_OVERHEAD)
		return BATCH_INCOMPLETE;
	base = (int64_t)be64_load(buf + BATCH_OFF_BASE_OFFSET);
	blen = (int32_t)be32_load(buf + BATCH_OFF_LENGTH);
	b->base_offset = base;
	b->batch_length = blen;
	if (blen < BATCH_LENGTH_MIN)
		return fail(err, errlen,
		    "batch at offset %" PRId64 ": BatchLength %" PRId32
		    " is below the minimum %d", base, blen, BATCH_LENGTH_MIN);
	b->len = (size_t)BATCH_LOG_OVERHEAD + (size_t)blen;
	/* Refuse a non-v2 batch as soon as the magic byte is in. */
	if (len > BATCH_OFF_MAGIC && buf[BATCH_OFF_MAGIC] != BATCH_MAGIC)
		return fail(err, errlen,
		    "batch at offset %" PRId64 ": magic %d, only magic 2 is supported",
		    base, (int)(int8_t)buf[BATCH_OFF_MAGIC]);
	if (base < 0)
		return fail(err, errlen, "batch at offset %" PRId64 ": BaseOffset is negative", base);
	if (len < b->len)
		return BATCH_INCOMPLETE;
	header_load(buf, b);
	/* base + LastOffsetDelta + 1 must be an offset (the accessors rely on it) */
	if (b->last_offset_delta > 0 && base > INT64_MAX - 1 - b->last_offset_delta)
		return fail(err, errlen, "batch at offset %" PRId64 ": LastOffsetDelta %" PRId32
		    " runs past the largest offset", base, b->last_offset_delta);
	b->p = buf;
	b->records = buf + BATCH_OFF_RECORDS;
	b->records_len = b->len - BATCH_OFF_RECORDS;
	return BATCH_OK;
}

void batch_iter_init(struct batch_iter *it, const uint8_t *buf, size_t len)
{
	it->buf = buf;
	it->len = len;
	it->pos = 0;
}

int batch_iter_next(struct batch_iter *it, struct batch *b, char *err,
    size_t errlen)
{
	char why[200];
	int rc;

	if (it->pos >= it->len)
		return BATCH_END;
	rc = batch_parse(it->buf + it->pos, it->len - it->pos, b, why, sizeof(why));
	if (rc == BATCH_ERROR)
		return fail(err, errlen, "%s (at byte %zu of %zu)", why, it->pos, it->len);
	if (rc == BATCH_OK)
		it->pos += b->len;
	return rc;
}

int batch_peek_size(const uint8_t *buf, size_t len, size_t *size, char *err,
    size_t errlen)
{
	struct batch b;
	int rc = batch_parse(buf, len, &b, err, errlen);

	*size = b.len;
	return rc;
}

int batch_complete_prefix(const uint8_t *buf, size_t len, size_t *prefix,
    size_t *nbatches, char *err, size_t errlen)
{
	struct batch_iter it;
	struct batch b;
	size_t n = 0;
	int rc;

	batch_iter_init(&it, buf, len);
	while ((rc = batch_iter_next(&it, &b, err, errlen)) == BATCH_OK)
		n++;
	*prefix = it.pos;
	if (nbatches != NULL)
		*nbatches = n;
	return rc == BATCH_ERROR ? -1 : 0;
}

int batch_copy_first(const uint8_t *buf, size_t len, uint8_t *out,
    size_t outcap, size_t *outlen, char *err, size_t errlen)
{
	struct batch b;
	int rc;

	*outlen = 0;
	rc = batch_parse(buf, len, &b, err, errlen);
	if (rc != BATCH_OK)
		return rc;
	if (b.len > outcap)
		return fail(err, errlen,
		    "batch at offset %" PRId64 " is %zu bytes, the buffer holds %zu",
		    b.base_offset, b.len, outcap);
	memcpy(out, buf, b.len);
	*outlen = b.len;
	return BATCH_OK;
}

/* ---- CRC and header rewrite ------------------------------------------ */

uint32_t batch_compute_crc(const uint8_t *p, size_t len)
{
	return crc32c(0, p + BATCH_OFF_ATTRIBUTES, len - BATCH_OFF_ATTRIBUTES);
}

int batch_verify_crc(const struct batch *b, char *err, size_t errlen)
{
	uint32_t crc = batch_compute_crc(b->p, b->len);

	if (crc != b->crc)
		return fail(err, errlen,
		    "batch at offset %" PRId64 ": CRC-32C mismatch (stored 0x%08" PRIx32
		    ", computed 0x%08" PRIx32 ")", b->base_offset, b->crc, crc);
	return 0;
}

int batch_rewrite_header(const struct batch *b, const struct batch_rewrite *rw,
    uint8_t *out, size_t outcap, char *err, size_t errlen)
{
	uint16_t attrs = b->attributes;
	/* The CRC-covered header bytes that may change: attributes through
	 * base sequence (21..56), as old ^ new for the fix-up. */
	uint8_t delta[BATCH_OFF_RECORD_COUNT - BATCH_OFF_ATTRIBUTES];
	enum { DLEN = sizeof(delta) };

	if (outcap < b->len)
		return fail(err, errlen,
		    "batch at offset %" PRId64 " is %zu bytes, the output holds %zu",
		    b->base_offset, b->len, outcap);
	if (out != b->p)
		memmove(out, b->p, b->len);
	memcpy(delta, out + BATCH_OFF_ATTRIBUTES, DLEN);
	be64_store(out + BATCH_OFF_BASE_OFFSET, (uint64_t)rw->base_offset);
	if (rw->flags & BATCH_RW_LEADER_EPOCH)
		be32_store(out + BATCH_OFF_LEADER_EPOCH, (uint32_t)rw->leader_epoch);
	if (rw->flags & BATCH_RW_CLEAR_TXN)
		attrs &= (uint16_t)~BATCH_ATTR_TRANSACTIONAL;
	be16_store(out + BATCH_OFF_ATTRIBUTES, attrs);
	if (rw->flags & BATCH_RW_PRODUCER) {
		be64_store(out + BATCH_OFF_PRODUCER_ID, (uint64_t)rw->producer_id);
		be16_store(out + BATCH_OFF_PRODUCER_EPOCH, (uint16_t)rw->producer_epoch);
		be32_store(out + BATCH_OFF_BASE_SEQUENCE, (uint32_t)rw->base_sequence);
	}
	/*
	 * Below about 512 bytes a pass over the batch costs less than the fix-up's
	 * multiplications (measured by `make bench-crc`), so small batches
	 * are recomputed.
	 */
	if ((rw->flags & BATCH_RW_FULL_CRC) ||
	    (b->len < BATCH_FIXUP_MIN_LEN && !(rw->flags & BATCH_RW_FIXUP_CRC))) {
		be32_store(out + BATCH_OFF_CRC, batch_compute_crc(out, b->len));
		return 0;
	}
	/* The stored CRC carried over the changed bytes (crc32c.h): O(log n),
	 * not a pass over the records. */
	for (size_t i = 0; i < DLEN; i++)
		delta[i] ^= out[BATCH_OFF_ATTRIBUTES + i];
	be32_store(out + BATCH_OFF_CRC, crc32c_fixup(b->crc, delta, DLEN,
	    b->len - BATCH_OFF_RECORD_COUNT));
	return 0;
}

/* ---- records --------------------------------------------------------- */

/*
 * Kafka's varints are zigzag-encoded base-128, at most 5 bytes for an
 * int32 and 10 for an int64.  Returns bytes used, 0 if malformed or cut.
 */
static size_t varint_read(const uint8_t *p, size_t len, size_t maxbytes,
    int64_t *v)
{
	uint64_t raw = 0;

	for (size_t i = 0; i < len && i < maxbytes; i++) {
		raw |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if ((p[i] & 0x80) == 0) {
			*v = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
			return i + 1;
		}
	}
	return 0;
}

static size_t varint_size(int64_t v)
{
	uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 1;

	while (raw >= 0x80) {
		raw >>= 7;
		n++;
	}
	return n;
}

static size_t varint_write(uint8_t *p, int64_t v)
{
	uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	size_t n = 0;

	while (raw >= 0x80) {
		p[n++] = (uint8_t)(raw | 0x80);
		raw >>= 7;
	}
	p[n++] = (uint8_t)raw;
	return n;
}

/* length, attributes, timestampDelta, offsetDelta, key, value, header count */
#define REC_MIN 7

/* Where the parts of one record are, relative to its first byte. */
struct rec {
	size_t size;	      /* length varint + body */
	size_t len_bytes;     /* size of the length varint */
	size_t delta_at;      /* first byte of the offsetDelta varint */
	size_t delta_len;     /* its size */
	size_t rest_at;	      /* first byte after offsetDelta */
	int64_t offset_delta;
};

/*
 * Parses one record (length, attributes, timestampDelta, offsetDelta, key,
 * value, headers) at p; every part must lie inside the declared length and
 * the parts must use it up exactly.  -1 with the reason otherwise.
 */
static int rec_scan(const uint8_t *p, size_t len, struct rec *r, char *err,
    size_t errlen)
{
	int64_t body_len, v, nheaders;
	size_t n, pos, end;

	if ((n = varint_read(p, len, 5, &body_len)) == 0)
		return fail(err, errlen, "record length varint is malformed or cut");
	if (body_len < 1 || (uint64_t)body_len > len - n)
		return fail(err, errlen, "record length %" PRId64 " does not fit in the %zu bytes left",
		    body_len, len - n);
	r->len_bytes = n;
	pos = n + 1; /* attributes */
	end = n + (size_t)body_len;
	if (pos > end)
		return fail(err, errlen, "record too short for its attributes");
	if ((n = varint_read(p + pos, end - pos, 10, &v)) == 0)
		return fail(err, errlen, "record timestampDelta varlong is malformed or cut");
	pos += n;
	r->delta_at = pos;
	if ((n = varint_read(p + pos, end - pos, 5, &v)) == 0)
		return fail(err, errlen, "record offsetDelta varint is malformed or cut");
	r->delta_len = n;
	r->offset_delta = v;
	pos += n;
	r->rest_at = pos;
	/* key, value: varint length (-1 = null) then the bytes */
	for (int i = 0; i < 2; i++) {
		if ((n = varint_read(p + pos, end - pos, 5, &v)) == 0)
			return fail(err, errlen, "record %s length varint is malformed or cut",
			    i == 0 ? "key" : "value");
		pos += n;
		if (v < -1 || (v > 0 && (uint64_t)v > end - pos))
			return fail(err, errlen, "record %s length %" PRId64 " does not fit in the %zu bytes left",
			    i == 0 ? "key" : "value", v, end - pos);
		if (v > 0)
			pos += (size_t)v;
	}
	if ((n = varint_read(p + pos, end - pos, 5, &nheaders)) == 0)
		return fail(err, errlen, "record header count varint is malformed or cut");
	pos += n;
	if (nheaders < 0 || (uint64_t)nheaders > end - pos)
		return fail(err, errlen, "record header count %" PRId64 " is impossible in %zu bytes",
		    nheaders, end - pos);
	for (int64_t h = 0; h < nheaders; h++) {
		for (int i = 0; i < 2; i++) {
			if ((n = varint_read(p + pos, end - pos, 5, &v)) == 0)
				return fail(err, errlen, "record header %" PRId64 " %s length is malformed or cut",
				    h, i == 0 ? "key" : "value");
			pos += n;
			/* A header key may not be null; a header value may. */
			if (v < (i == 0 ? 0 : -1) || (v > 0 && (uint64_t)v > end - pos))
				return fail(err, errlen, "record header %" PRId64 " %s length %" PRId64 " is invalid",
				    h, i == 0 ? "key" : "value", v);
			if (v > 0)
				pos += (size_t)v;
		}
	}
	if (pos != end)
		return fail(err, errlen, "record has %zu bytes after its headers", end - pos);
	r->size = end;
	return 0;
}

/*
 * Walks an uncompressed records section of count records.  With
 * want_contiguous, record i must have offset delta i.  -1 with the record
 * index and the reason otherwise.
 */
static int records_check(const uint8_t *p, size_t len, int32_t count,
    int want_contiguous, int64_t base, char *err, size_t errlen)
{
	char why[160];
	struct rec r;
	size_t pos = 0;

	for (int32_t i = 0; i < count; i++) {
		if (pos >= len)
			return fail(err, errlen,
			    "batch at offset %" PRId64 ": RecordCount %" PRId32
			    " but the records end after %" PRId32, base, count, i);
		if (rec_scan(p + pos, len - pos, &r, why, sizeof(why)) < 0)
			return fail(err, errlen, "batch at offset %" PRId64 ": record %" PRId32 ": %s",
			    base, i, why);
		if (want_contiguous && r.offset_delta != i)
			return fail(err, errlen,
			    "batch at offset %" PRId64 ": record %" PRId32 " has offset delta %" PRId64
			    ", a client batch needs contiguous deltas (expected %" PRId32 ")",
			    base, i, r.offset_delta, i);
		pos += r.size;
	}
	if (pos != len)
		return fail(err, errlen,
		    "batch at offset %" PRId64 ": %zu bytes follow the last of %" PRId32 " records",
		    base, len - pos, count);
	return 0;
}

int batch_has_holes(const struct batch *b)
{
	if ((int64_t)b->last_offset_delta + 1 != b->record_count)
		return 1;
	if (batch_codec(b) != BATCH_CODEC_NONE)
		return 0;
	/* Count matches; look for a jump inside (deltas 0,2,2 say). */
	return records_check(b->records, b->records_len, b->record_count, 1,
	    b->base_offset, NULL, 0) < 0;
}

/* ---- the strict Produce validator ------------------------------------ */

int batch_validate_produce(const uint8_t *records, size_t len,
    size_t max_batch_bytes, char *err, size_t errlen)
{
	return batch_validate_produce_flags(records, len, max_batch_bytes, 0,
	    err, errlen);
}

int batch_validate_produce_flags(const uint8_t *records, size_t len,
    size_t max_batch_bytes, int flags, char *err, size_t errlen)
{
	char why[200];
	struct batch b;
	int rc;

	if (len == 0)
		return fail(err, errlen, "one-batch rule: the records hold no batch");
	rc = batch_parse(records, len, &b, why, sizeof(why));
	if (rc == BATCH_ERROR)
		return fail(err, errlen, "batch header: %s", why);
	if (rc == BATCH_INCOMPLETE)
		return fail(err, errlen,
		    "batch length: BatchLength says %zu bytes, the records hold %zu",
		    b.len, len);
	if (b.len != len)
		return fail(err, errlen,
		    "one-batch rule: %zu bytes follow the first batch (offset %" PRId64
		    ", %zu bytes); a Produce carries exactly one batch per partition",
		    len - b.len, b.base_offset, b.len);
	if (!(flags & BATCH_VP_CRC_CARRIED) &&
	    batch_verify_crc(&b, why, sizeof(why)) < 0)
		return fail(err, errlen, "corrupt record: %s", why);
	if (max_batch_bytes > 0 && b.len > max_batch_bytes)
		return fail(err, errlen,
		    "record too large: batch at offset %" PRId64 " is %zu bytes, the limit is %zu",
		    b.base_offset, b.len, max_batch_bytes);
	if (!batch_codec_supported(batch_codec(&b)))
		return fail(err, errlen,
		    "batch at offset %" PRId64 ": unknown compression type id %d",
		    b.base_offset, batch_codec(&b));
	if (b.base_offset != 0)
		return fail(err, errlen,
		    "base offset: BaseOffset %" PRId64 ", a client batch must carry 0 "
		    "(Kafka 4 refuses others)", b.base_offset);
	if (b.last_offset_delta < 0)
		return fail(err, errlen,
		    "offset range: batch has an invalid offset range [%" PRId64 ", %" PRId64 "]",
		    b.base_offset, batch_last_offset(&b));
	if (b.record_count <= 0)
		return fail(err, errlen,
		    "record count: batch at offset %" PRId64 " reports %" PRId32
		    " records, a client batch needs at least 1",
		    b.base_offset, b.record_count);
	if ((int64_t)b.last_offset_delta + 1 != b.record_count)
		return fail(err, errlen,
		    "offset range: inconsistent batch offset range [%" PRId64 ", %" PRId64
		    "] and count of records %" PRId32
		    " (RecordCount must be LastOffsetDelta + 1; a compacted batch with holes needs re-encoding)",
		    b.base_offset, batch_last_offset(&b), b.record_count);
	if (batch_is_control(&b))
		return fail(err, errlen,
		    "control batch: batch at offset %" PRId64
		    " is a control batch; clients are not allowed to write control records",
		    b.base_offset);
	if (batch_has_producer_id(&b) && b.base_sequence < 0)
		return fail(err, errlen,
		    "sequence: invalid sequence number %" PRId32
		    " in record batch with producerId %" PRId64,
		    b.base_sequence, b.producer_id);
	if (batch_has_producer_id(&b) && b.producer_epoch < 0)
		return fail(err, errlen,
		    "producer epoch: invalid epoch %d in record batch with producerId %" PRId64,
		    (int)b.producer_epoch, b.producer_id);
	if (batch_codec(&b) == BATCH_CODEC_NONE &&
	    !(flags & BATCH_VP_RECORDS_WALKED) &&
	    records_check(b.records, b.records_len, b.record_count, 1,
		b.base_offset, why, sizeof(why)) < 0)
		return fail(err, errlen, "records: %s", why);
	return 0;
}

/* ---- compression ----------------------------------------------------- */

/* xerial snappy-java stream header: magic, version 1, compatible version 1. */
static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };
#define XERIAL_HEADER_LEN 16
#define XERIAL_BLOCK 32768

/* A growable output buffer with a hard cap. */
struct obuf {
	uint8_t *p;
	size_t len, cap, max;
};

static int obuf_reserve(struct obuf *o, size_t more)
{
	size_t want, ncap;
	uint8_t *np;

	if (more > o->max || o->len > o->max - more)
		return -1;
	want = o->len + more;
	/* Always hold a buffer, even for zero bytes: o->p + o->len must be valid. */
	if (o->p != NULL && want <= o->cap)
		return 0;
	ncap = o->cap ? o->cap : MAX(MIN((size_t)4096, o->max), (size_t)1);
	while (ncap < want)
		ncap = ncap > o->max / 2 ? o->max : ncap * 2;
	if ((np = realloc(o->p, ncap)) == NULL)
		return -1;
	o->p = np;
	o->cap = ncap;
	return 0;
}

static int gzip_inflate(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	z_stream zs;
	int zrc, rc = -1;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 15 + 32) != Z_OK) /* gzip or zlib header */
		return fail(err, errlen, "gzip: inflateInit2 failed");
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)MIN(inlen, (size_t)UINT32_MAX);
	for (;;) {
		if (o->len == o->cap && obuf_reserve(o, 1) < 0) {
			fail(err, errlen, "gzip: decompressed records exceed %zu bytes", o->max);
			goto out;
		}
		zs.next_out = o->p + o->len;
		zs.avail_out = (uInt)MIN(o->cap - o->len, (size_t)UINT32_MAX);
		zrc = inflate(&zs, Z_NO_FLUSH);
		o->len = (size_t)(zs.next_out - o->p);
		if (zrc == Z_STREAM_END)
			break;
		if (zrc == Z_BUF_ERROR && zs.avail_in == 0) {
			fail(err, errlen, "gzip: stream is truncated");
			goto out;
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			fail(err, errlen, "gzip: %s", zs.msg ? zs.msg : "inflate failed");
			goto out;
		}
	}
	rc = 0;
out:
	inflateEnd(&zs);
	return rc;
}

static int gzip_deflate(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	z_stream zs;
	int rc = -1;
	uLong bound;

	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
		Z_DEFAULT_STRATEGY) != Z_OK)
		return fail(err, errlen, "gzip: deflateInit2 failed");
	bound = deflateBound(&zs, (uLong)inlen) + 32;
	if (obuf_reserve(o, bound) < 0) {
		fail(err, errlen, "gzip: compressed records would exceed %zu bytes", o->max);
		goto out;
	}
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)inlen;
	zs.next_out = o->p + o->len;
	zs.avail_out = (uInt)(o->cap - o->len);
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
		fail(err, errlen, "gzip: deflate did not finish");
		goto out;
	}
	o->len = (size_t)(zs.next_out - o->p);
	rc = 0;
out:
	deflateEnd(&zs);
	return rc;
}

static int lz4_decompress(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	LZ4F_dctx *dctx = NULL;
	size_t pos = 0, hint = 1, n_in, n_out;
	int rc = -1;

	if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		return fail(err, errlen, "lz4: cannot create a decompression context");
	while (hint != 0) {
		if (pos >= inlen) {
			fail(err, errlen, "lz4: frame is truncated");
			goto out;
		}
		if (o->len == o->cap && obuf_reserve(o, 1) < 0) {
			fail(err, errlen, "lz4: decompressed records exceed %zu bytes", o->max);
			goto out;
		}
		n_in = inlen - pos;
		n_out = o->cap - o->len;
		hint = LZ4F_decompress(dctx, o->p + o->len, &n_out, in + pos, &n_in, NULL);
		if (LZ4F_isError(hint)) {
			fail(err, errlen, "lz4: %s", LZ4F_getErrorName(hint));
			goto out;
		}
		pos += n_in;
		o->len += n_out;
		if (n_in == 0 && n_out == 0 && o->len < o->cap) {
			fail(err, errlen, "lz4: decoder made no progress");
			goto out;
		}
	}
	if (pos != inlen) {
		fail(err, errlen, "lz4: %zu bytes follow the frame", inlen - pos);
		goto out;
	}
	rc = 0;
out:
	LZ4F_freeDecompressionContext(dctx);
	return rc;
}

static int lz4_compress(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	LZ4F_preferences_t prefs;
	size_t bound, n;

	/*
	 * Kafka's reader wants independent blocks and no content size; 64 KiB
	 * blocks as Kafka's own writer uses.
	 */
	memset(&prefs, 0, sizeof(prefs));
	prefs.frameInfo.blockSizeID = LZ4F_max64KB;
	prefs.frameInfo.blockMode = LZ4F_blockIndependent;
	bound = LZ4F_compressFrameBound(inlen, &prefs);
	if (obuf_reserve(o, bound) < 0)
		return fail(err, errlen, "lz4: compressed records would exceed %zu bytes", o->max);
	n = LZ4F_compressFrame(o->p + o->len, o->cap - o->len, in, inlen, &prefs);
	if (LZ4F_isError(n))
		return fail(err, errlen, "lz4: %s", LZ4F_getErrorName(n));
	o->len += n;
	return 0;
}

static int zstd_decompress(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer ib = { in, inlen, 0 };
	size_t r = 1;
	int rc = -1;

	if (ds == NULL)
		return fail(err, errlen, "zstd: cannot create a decompression stream");
	ZSTD_initDStream(ds);
	/* Frames may follow one another; stop when all input is used and a frame ended. */
	while (ib.pos < ib.size || r != 0) {
		ZSTD_outBuffer ob;
		size_t before = ib.pos;

		if (o->len == o->cap && obuf_reserve(o, 1) < 0) {
			fail(err, errlen, "zstd: decompressed records exceed %zu bytes", o->max);
			goto out;
		}
		ob.dst = o->p;
		ob.size = o->cap;
		ob.pos = o->len;
		r = ZSTD_decompressStream(ds, &ob, &ib);
		if (ZSTD_isError(r)) {
			fail(err, errlen, "zstd: %s", ZSTD_getErrorName(r));
			goto out;
		}
		if (ob.pos == o->len && ib.pos == before && r != 0 && ib.pos == ib.size) {
			fail(err, errlen, "zstd: frame is truncated");
			goto out;
		}
		o->len = ob.pos;
	}
	rc = 0;
out:
	ZSTD_freeDStream(ds);
	return rc;
}

static int zstd_compress(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	size_t bound = ZSTD_compressBound(inlen), n;

	if (obuf_reserve(o, bound) < 0)
		return fail(err, errlen, "zstd: compressed records would exceed %zu bytes", o->max);
	n = ZSTD_compress(o->p + o->len, o->cap - o->len, in, inlen, 3);
	if (ZSTD_isError(n))
		return fail(err, errlen, "zstd: %s", ZSTD_getErrorName(n));
	o->len += n;
	return 0;
}

static int snappy_raw_decompress(const uint8_t *in, size_t inlen,
    struct obuf *o, char *err, size_t errlen)
{
	size_t n;

	if (snappy_uncompressed_length((const char *)in, inlen, &n) != SNAPPY_OK)
		return fail(err, errlen, "snappy: block header is invalid");
	if (obuf_reserve(o, n) < 0)
		return fail(err, errlen, "snappy: decompressed records exceed %zu bytes", o->max);
	if (snappy_uncompress((const char *)in, inlen, (char *)o->p + o->len, &n) != SNAPPY_OK)
		return fail(err, errlen, "snappy: block is corrupt");
	o->len += n;
	return 0;
}

static int snappy_decompress(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	size_t pos = XERIAL_HEADER_LEN;

	if (inlen < XERIAL_HEADER_LEN || memcmp(in, xerial_magic, sizeof(xerial_magic)) != 0)
		return snappy_raw_decompress(in, inlen, o, err, errlen);
	while (pos < inlen) {
		uint32_t blen;

		if (inlen - pos < 4)
			return fail(err, errlen, "snappy: xerial block length is cut at byte %zu", pos);
		blen = be32_load(in + pos);
		pos += 4;
		if (blen > inlen - pos)
			return fail(err, errlen, "snappy: xerial block of %" PRIu32
			    " bytes at byte %zu runs past the %zu bytes", blen, pos, inlen);
		if (snappy_raw_decompress(in + pos, blen, o, err, errlen) < 0)
			return -1;
		pos += blen;
	}
	return 0;
}

static int snappy_compress_one(const uint8_t *in, size_t inlen, struct obuf *o,
    char *err, size_t errlen)
{
	size_t n = snappy_max_compressed_length(inlen);

	if (obuf_reserve(o, n) < 0)
		return fail(err, errlen, "snappy: compressed records would exceed %zu bytes", o->max);
	if (snappy_compress((const char *)in, inlen, (char *)o->p + o->len, &n) != SNAPPY_OK)
		return fail(err, errlen, "snappy: compression failed");
	o->len += n;
	return 0;
}

static int snappy_compress_records(const uint8_t *in, size_t inlen, int xerial,
    struct obuf *o, char *err, size_t errlen)
{
	if (!xerial)
		return snappy_compress_one(in, inlen, o, err, errlen);
	if (obuf_reserve(o, XERIAL_HEADER_LEN) < 0)
		return fail(err, errlen, "snappy: output cap %zu is too small", o->max);
	memcpy(o->p + o->len, xerial_magic, sizeof(xerial_magic));
	be32_store(o->p + o->len + 8, 1);
	be32_store(o->p + o->len + 12, 1);
	o->len += XERIAL_HEADER_LEN;
	for (size_t pos = 0; pos < inlen; pos += XERIAL_BLOCK) {
		size_t at, chunk = MIN(XERIAL_BLOCK, inlen - pos);

		if (obuf_reserve(o, 4) < 0)
			return fail(err, errlen, "snappy: compressed records would exceed %zu bytes", o->max);
		at = o->len;
		o->len += 4;
		if (snappy_compress_one(in + pos, chunk, o, err, errlen) < 0)
			return -1;
		be32_store(o->p + at, (uint32_t)(o->len - at - 4));
	}
	return 0;
}

/* "No compression": the records as they are, within the output cap. */
static int obuf_copy(struct obuf *o, const uint8_t *in, size_t inlen,
    char *err, size_t errlen)
{
	if (obuf_reserve(o, inlen == 0 ? 1 : inlen) < 0)
		return fail(err, errlen, "records of %zu bytes exceed %zu", inlen,
		    o->max);
	if (inlen > 0) {
		memcpy(o->p, in, inlen);
		o->len = inlen;
	}
	return 0;
}

/* The codec's decompression or (compress) compression of in into a new
 * buffer of at most max_bytes; snappy_xerial: the framing of a snappy
 * compression. */
static int codec_run(int codec, int compress, int snappy_xerial,
    const uint8_t *in, size_t inlen, size_t max_bytes, uint8_t **outp,
    size_t *outlen, char *err, size_t errlen)
{
	struct obuf o = { NULL, 0, 0, max_bytes };
	int rc;

	*outp = NULL;
	*outlen = 0;
	switch (codec) {
	case BATCH_CODEC_NONE:
		rc = obuf_copy(&o, in, inlen, err, errlen);
		break;
	case BATCH_CODEC_GZIP:
		rc = compress ? gzip_deflate(in, inlen, &o, err, errlen) :
		    gzip_inflate(in, inlen, &o, err, errlen);
		break;
	case BATCH_CODEC_SNAPPY:
		rc = compress ? snappy_compress_records(in, inlen, snappy_xerial,
		    &o, err, errlen) : snappy_decompress(in, inlen, &o, err, errlen);
		break;
	case BATCH_CODEC_LZ4:
		rc = compress ? lz4_compress(in, inlen, &o, err, errlen) :
		    lz4_decompress(in, inlen, &o, err, errlen);
		break;
	case BATCH_CODEC_ZSTD:
		rc = compress ? zstd_compress(in, inlen, &o, err, errlen) :
		    zstd_decompress(in, inlen, &o, err, errlen);
		break;
	default:
		rc = fail(err, errlen, "unknown compression type id %d", codec);
		break;
	}
	if (rc < 0) {
		free(o.p);
		return -1;
	}
	*outp = o.p;
	*outlen = o.len;
	return 0;
}

int batch_decompress(int codec, const uint8_t *in, size_t inlen,
    size_t max_bytes, uint8_t **outp, size_t *outlen, char *err, size_t errlen)
{
	return codec_run(codec, 0, 0, in, inlen, max_bytes, outp, outlen, err,
	    errlen);
}

int batch_compress(int codec, int snappy_xerial, const uint8_t *in,
    size_t inlen, size_t max_bytes, uint8_t **outp, size_t *outlen,
    char *err, size_t errlen)
{
	return codec_run(codec, 1, snappy_xerial, in, inlen, max_bytes, outp,
	    outlen, err, errlen);
}

int batch_check_records(const struct batch *b, size_t max_bytes, char *err,
    size_t errlen)
{
	char why[200];
	uint8_t *plain = NULL;
	size_t plain_len;
	int rc;

	if (b->record_count < 0)
		return fail(err, errlen, "batch at offset %" PRId64 ": RecordCount %" PRId32
		    " is negative", b->base_offset, b->record_count);
	if (batch_codec(b) == BATCH_CODEC_NONE)
		return records_check(b->records, b->records_len, b->record_count, 1,
		    b->base_offset, err, errlen);
	if (batch_decompress(batch_codec(b), b->records, b->records_len, max_bytes,
		&plain, &plain_len, why, sizeof(why)) < 0)
		return fail(err, errlen, "batch at offset %" PRId64 ": %s", b->base_offset, why);
	rc = records_check(plain, plain_len, b->record_count, 1, b->base_offset, err, errlen);
	free(plain);
	return rc;
}

/* ---- hole re-encoding ------------------------------------------------ */

void batch_reencoded_fini(struct batch_reencoded *r)
{
	free(r->buf);
	free(r->pairs);
	memset(r, 0, sizeof(*r));
}

/*
 * Rewrites count records of an uncompressed records section with offset
 * delta i for record i into out (which holds at least len bytes: deltas only
 * shrink).  Appends an anchor to pairs for every record whose source offset
 * does not follow the previous record's.
 */
static int records_make_contiguous(const uint8_t *in, size_t len, int32_t count,
    int64_t base, int32_t last_delta, int64_t dst_base, uint8_t *out,
    size_t *outlen, struct batch_offset_pair *pairs, size_t *npairs,
    char *err, size_t errlen)
{
	char why[160];
	size_t pos = 0, opos = 0, np = 0;
	int64_t prev = -1;

	for (int32_t i = 0; i < count; i++) {
		struct rec r;
		int64_t body_len, old_body;

		if (pos >= len)
			return fail(err, errlen, "batch at offset %" PRId64 ": RecordCount %" PRId32
			    " but the records end after %" PRId32, base, count, i);
		if (rec_scan(in + pos, len - pos, &r, why, sizeof(why)) < 0)
			return fail(err, errlen, "batch at offset %" PRId64 ": record %" PRId32 ": %s",
			    base, i, why);
		if (r.offset_delta <= prev || r.offset_delta > last_delta)
			return fail(err, errlen,
			    "batch at offset %" PRId64 ": record %" PRId32 " has offset delta %" PRId64
			    " (previous %" PRId64 ", LastOffsetDelta %" PRId32 "): deltas must increase",
			    base, i, r.offset_delta, prev, last_delta);
		/* Deltas strictly increase from 0, so i <= offset_delta: the
		 * record never grows, and out (len bytes) holds every one;
		 * pairs (count + 1) an anchor per record at most. */
		MR_ASSERT(varint_size(i) <= r.delta_len && np <= (size_t)i);
		if (i == 0 || r.offset_delta != prev + 1) {
			pairs[np].src = base + r.offset_delta;
			pairs[np].dst = dst_base + i;
			np++;
		}
		prev = r.offset_delta;
		/* body = everything after the length varint */
		old_body = (int64_t)(r.size - r.len_bytes);
		body_len = old_body - (int64_t)r.delta_len + (int64_t)varint_size(i);
		opos += varint_write(out + opos, body_len);
		/* attributes and timestampDelta, unchanged */
		memcpy(out + opos, in + pos + r.len_bytes, r.delta_at - r.len_bytes);
		opos += r.delta_at - r.len_bytes;
		opos += varint_write(out + opos, i);
		memcpy(out + opos, in + pos + r.rest_at, r.size - r.rest_at);
		opos += r.size - r.rest_at;
		pos += r.size;
	}
	if (pos != len)
		return fail(err, errlen, "batch at offset %" PRId64 ": %zu bytes follow the last of %"
		    PRId32 " records", base, len - pos, count);
	*outlen = opos;
	*npairs = np;
	return 0;
}

int batch_reencode_contiguous(const struct batch *b, int64_t dst_base,
    size_t max_bytes, struct batch_reencoded *out, char *err, size_t errlen)
{
	const int codec = batch_codec(b);
	uint8_t *plain = NULL, *fixed = NULL, *packed = NULL;
	size_t plain_len = 0, fixed_len = 0, packed_len = 0, np = 0;
	const uint8_t *body;
	size_t body_len;
	int xerial = 0, rc = -1;
	uint8_t *nb;
	char why[200];

	memset(out, 0, sizeof(*out));
	if (b->p == NULL || b->len < BATCH_HEADER_LEN)
		return fail(err, errlen, "batch is not parsed");
	if (b->last_offset_delta < 0)
		return fail(err, errlen, "batch at offset %" PRId64 ": LastOffsetDelta %" PRId32
		    " is negative", b->base_offset, b->last_offset_delta);
	if (b->record_count < 0 || (int64_t)b->record_count > (int64_t)b->last_offset_delta + 1)
		return fail(err, errlen, "batch at offset %" PRId64 ": RecordCount %" PRId32
		    " does not fit LastOffsetDelta %" PRId32, b->base_offset, b->record_count,
		    b->last_offset_delta);
	/* A record takes at least REC_MIN bytes: this bounds the anchor array. */
	if ((size_t)b->record_count >
	    (codec == BATCH_CODEC_NONE ? b->records_len : max_bytes) / REC_MIN)
		return fail(err, errlen, "batch at offset %" PRId64 ": RecordCount %" PRId32
		    " is impossible in %zu bytes of records", b->base_offset, b->record_count,
		    codec == BATCH_CODEC_NONE ? b->records_len : max_bytes);
	if (!batch_codec_supported(codec))
		return fail(err, errlen, "batch at offset %" PRId64 ": unknown compression type id %d",
		    b->base_offset, codec);
	if (dst_base < 0 || dst_base > INT64_MAX - 1 - b->record_count)
		return fail(err, errlen, "destination base offset %" PRId64 " is out of range", dst_base);
	out->record_count = b->record_count;
	out->src_next = batch_next_offset(b);
	out->dst_next = dst_base + b->record_count;
	/* one anchor per record at most, plus the end */
	out->pairs = calloc((size_t)b->record_count + 1, sizeof(*out->pairs));
	if (out->pairs == NULL) {
		fail(err, errlen, "out of memory for %" PRId32 " anchors", b->record_count + 1);
		goto out;
	}
	if (b->record_count == 0) {
		out->pairs[0].src = out->src_next;
		out->pairs[0].dst = out->dst_next;
		out->npairs = 1;
		rc = 0;
		goto out;
	}

	body = b->records;
	body_len = b->records_len;
	if (codec != BATCH_CODEC_NONE) {
		xerial = codec == BATCH_CODEC_SNAPPY && body_len >= XERIAL_HEADER_LEN &&
		    memcmp(body, xerial_magic, sizeof(xerial_magic)) == 0;
		if (batch_decompress(codec, body, body_len, max_bytes, &plain, &plain_len,
			why, sizeof(why)) < 0) {
			fail(err, errlen, "batch at offset %" PRId64 ": %s", b->base_offset, why);
			goto out;
		}
		body = plain;
		body_len = plain_len;
	}
	if ((fixed = malloc(body_len ? body_len : 1)) == NULL) {
		fail(err, errlen, "out of memory for %zu bytes of records", body_len);
		goto out;
	}
	if (records_make_contiguous(body, body_len, b->record_count, b->base_offset,
		b->last_offset_delta, dst_base, fixed, &fixed_len, out->pairs, &np,
		err, errlen) < 0)
		goto out;
	if (codec != BATCH_CODEC_NONE) {
		if (batch_compress(codec, xerial, fixed, fixed_len, max_bytes, &packed,
			&packed_len, why, sizeof(why)) < 0) {
			fail(err, errlen, "batch at offset %" PRId64 ": %s", b->base_offset, why);
			goto out;
		}
	} else {
		packed = fixed;
		packed_len = fixed_len;
		fixed = NULL;
	}
	if (max_bytes < BATCH_HEADER_LEN || packed_len > max_bytes - BATCH_HEADER_LEN ||
	    packed_len > (size_t)INT32_MAX - BATCH_HEADER_LEN) {
		fail(err, errlen, "batch at offset %" PRId64 ": re-encoded batch would exceed %zu bytes",
		    b->base_offset, max_bytes);
		goto out;
	}
	if ((nb = malloc(BATCH_HEADER_LEN + packed_len)) == NULL) {
		fail(err, errlen, "out of memory for the re-encoded batch");
		goto out;
	}
	memcpy(nb, b->p, BATCH_HEADER_LEN);
	memcpy(nb + BATCH_HEADER_LEN, packed, packed_len);
	be64_store(nb + BATCH_OFF_BASE_OFFSET, (uint64_t)dst_base);
	be32_store(nb + BATCH_OFF_LENGTH, (uint32_t)(BATCH_HEADER_LEN + packed_len - BATCH_LOG_OVERHEAD));
	be32_store(nb + BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(b->record_count - 1));
	be32_store(nb + BATCH_OFF_CRC, batch_compute_crc(nb, BATCH_HEADER_LEN + packed_len));
	out->buf = nb;
	out->len = BATCH_HEADER_LEN + packed_len;
	/* The end anchor: what follows the batch in the source maps to dst_next. */
	out->pairs[np].src = out->src_next;
	out->pairs[np].dst = out->dst_next;
	out->npairs = np + 1;
	rc = 0;
out:
	free(plain);
	free(fixed);
	free(packed);
	if (rc < 0)
		batch_reencoded_fini(out);
	return rc;
}

/* ---- coalescing ------------------------------------------------------ */

int batch_mergeable_header(const struct batch *b, size_t cap)
{
	return b->p != NULL && b->len <= cap &&
	    b->len >= BATCH_HEADER_LEN &&
	    batch_codec(b) == BATCH_CODEC_NONE && !batch_is_control(b) &&
	    batch_timestamp_type(b) == 0 && b->record_count >= 1 &&
	    (int64_t)b->last_offset_delta + 1 == b->record_count;
}

int batch_mergeable(const struct batch *b, size_t cap)
{
	return batch_mergeable_header(b, cap) && !batch_has_holes(b);
}

void batch_merge_fini(struct batch_merge *m)
{
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

static int merge_reserve(struct batch_merge *m, size_t more, char *err,
    size_t errlen)
{
	size_t want;
	uint8_t *nb;

	if (more > SIZE_MAX - m->len)
		return fail(err, errlen, "merged batch size overflows");
	want = m->len + more;
	if (want <= m->alloc)
		return 0;
	if (want < m->alloc * 2)
		want = m->alloc * 2;
	if ((nb = realloc(m->buf, want)) == NULL)
		return fail(err, errlen, "out of memory for a merged batch of %zu bytes",
		    want);
	m->buf = nb;
	m->alloc = want;
	return 0;
}

int batch_merge_start(struct batch_merge *m, const struct batch *first,
    size_t cap, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	if (merge_reserve(m, first->len, err, errlen) != 0)
		return -1;
	memcpy(m->buf, first->p, first->len);
	m->len = first->len;
	m->cap = cap;
	m->base_offset = first->base_offset;
	m->next_offset = batch_next_offset(first);
	m->base_timestamp = first->base_timestamp;
	m->max_timestamp = first->max_timestamp;
	m->leader_epoch = first->leader_epoch;
	m->attributes = first->attributes;
	m->record_count = first->record_count;
	m->nbatches = 1;
	return 0;
}

/* Per record, how much longer re-encoding can make it: an offset delta of
 * up to 5 bytes where it had 1, a timestamp delta of up to 10, and the
 * length varint one more. */
#define MERGE_REC_GROWTH 14

int batch_merge_add(struct batch_merge *m, const struct batch *b, char *err,
    size_t errlen)
{
	const uint8_t *in = b->records;
	size_t len = b->records_len, pos = 0, opos, room;
	int64_t tshift;
	int32_t oshift = m->record_count;
	char why[160];

	if (b->base_offset != m->next_offset || b->leader_epoch != m->leader_epoch ||
	    b->attributes != m->attributes)
		return 1;
	if (b->record_count > INT32_MAX - m->record_count)
		return 1;
	if ((m->base_timestamp < 0 && b->base_timestamp > INT64_MAX + m->base_timestamp) ||
	    (m->base_timestamp > 0 && b->base_timestamp < INT64_MIN + m->base_timestamp))
		return 1;
	tshift = b->base_timestamp - m->base_timestamp;
	/* A lower bound first: the records only grow. */
	if (len > m->cap || m->len > m->cap - len)
		return 1;
	if ((size_t)b->record_count > (SIZE_MAX - len) / MERGE_REC_GROWTH ||
	    merge_reserve(m, len + (size_t)b->record_count * MERGE_REC_GROWTH,
	    err, errlen) != 0)
		return -1;
	opos = m->len;
	room = m->len + len + (size_t)b->record_count * MERGE_REC_GROWTH;
	for (int32_t i = 0; i < b->record_count; i++) {
		struct rec r;
		int64_t tsd, body_len;
		size_t tn, at = 0;
		uint8_t *o = m->buf + opos;

		if (pos >= len || rec_scan(in + pos, len - pos, &r, why,
		    sizeof(why)) < 0)
			return fail(err, errlen, "batch at offset %" PRId64 ": record %"
			    PRId32 ": %s", b->base_offset, i, pos >= len ?
			    "the records end early" : why);
		if (r.offset_delta != i)
			return 1; /* holes: batch_reencode_contiguous()'s */
		tn = varint_read(in + pos + r.len_bytes + 1,
		    r.delta_at - r.len_bytes - 1, 10, &tsd);
		if (tn == 0 || tn != r.delta_at - r.len_bytes - 1)
			return fail(err, errlen, "batch at offset %" PRId64 ": record %"
			    PRId32 ": timestampDelta is malformed", b->base_offset, i);
		if ((tshift > 0 && tsd > INT64_MAX - tshift) ||
		    (tshift < 0 && tsd < INT64_MIN - tshift))
			return 1;
		tsd += tshift;
		body_len = 1 + (int64_t)varint_size(tsd) +
		    (int64_t)varint_size((int64_t)oshift + r.offset_delta) +
		    (int64_t)(r.size - r.rest_at);
		/* At most MERGE_REC_GROWTH longer than before: the room
		 * reserved above holds it. */
		MR_ASSERT_MSG(opos + varint_size(body_len) + (size_t)body_len <=
		    room, "record %" PRId32 " of the batch at %"
		    PRId64 ": %zu + %" PRId64 " bytes past %zu", i,
		    b->base_offset, opos, body_len, room);
		at += varint_write(o + at, body_len);
		o[at++] = in[pos + r.len_bytes];        /* attributes */
		at += varint_write(o + at, tsd);
		at += varint_write(o + at, (int64_t)oshift + r.offset_delta);
		memcpy(o + at, in + pos + r.rest_at, r.size - r.rest_at);
		at += r.size - r.rest_at;
		opos += at;
		pos += r.size;
	}
	if (pos != len)
		return fail(err, errlen, "batch at offset %" PRId64 ": %zu bytes follow "
		    "the last of %" PRId32 " records", b->base_offset, len - pos,
		    b->record_count);
	if (opos > m->cap || opos - BATCH_LOG_OVERHEAD > (size_t)INT32_MAX)
		return 1;
	m->len = opos;
	m->next_offset = batch_next_offset(b);
	m->record_count += b->record_count;
	if (b->max_timestamp > m->max_timestamp)
		m->max_timestamp = b->max_timestamp;
	m->nbatches++;
	return 0;
}

void batch_merge_finish(struct batch_merge *m)
{
	/* Started with a batch, never past its cap (batch_merge_add()). */
	MR_ASSERT_MSG(m->buf != NULL && m->len >= BATCH_HEADER_LEN &&
	    m->len <= m->cap && m->record_count > 0, "%zu bytes (cap %zu), %"
	    PRId32 " records", m->len, m->cap, m->record_count);
	be32_store(m->buf + BATCH_OFF_LENGTH,
	    (uint32_t)(m->len - BATCH_LOG_OVERHEAD));
	be32_store(m->buf + BATCH_OFF_LAST_OFFSET_DELTA,
	    (uint32_t)(m->record_count - 1));
	be64_store(m->buf + BATCH_OFF_MAX_TIMESTAMP, (uint64_t)m->max_timestamp);
	be32_store(m->buf + BATCH_OFF_RECORD_COUNT, (uint32_t)m->record_count);
	be32_store(m->buf + BATCH_OFF_CRC, batch_compute_crc(m->buf, m->len));
}
