/*
 * batch.h: Kafka record batches (magic v2) as mirrord handles them.
 *
 * mirrord copies batches from a source partition to a destination partition
 * without opening them: this module reads and rewrites only the fixed
 * 61-byte header.  The one exception is a batch with offset holes (a batch
 * from a compacted source topic that the log cleaner thinned out): a broker
 * refuses such a batch from a client, so batch_reencode_contiguous() rewrites
 * its records with contiguous offset deltas, decompressing and recompressing
 * with the batch's own codec when it has one.
 *
 * Layout (all big-endian), offsets from the start of the batch:
 *
 *    0 BaseOffset int64          27 BaseTimestamp int64
 *    8 BatchLength int32         35 MaxTimestamp int64
 *   12 PartitionLeaderEpoch      43 ProducerId int64
 *   16 Magic int8                51 ProducerEpoch int16
 *   17 CRC uint32                53 BaseSequence int32
 *   21 Attributes int16          57 RecordCount int32
 *   23 LastOffsetDelta int32     61 records...
 *
 * BatchLength counts the bytes after itself (so a batch is 12 + BatchLength
 * bytes); the CRC-32C covers Attributes to the end of the batch.
 *
 * Ownership: a struct batch points into the caller's buffer and owns
 * nothing.  Functions that allocate say so and have a matching _fini.
 * Every input is treated as hostile: nothing here reads outside the buffer
 * it is given, whatever the lengths inside the batch say.
 */
#ifndef MIRRORD_BATCH_H
#define MIRRORD_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define BATCH_LOG_OVERHEAD 12 /* BaseOffset + BatchLength */
#define BATCH_HEADER_LEN 61
#define BATCH_MAGIC 2
/* The smallest legal BatchLength: a header with no records. */
#define BATCH_LENGTH_MIN (BATCH_HEADER_LEN - BATCH_LOG_OVERHEAD)

/* Byte offsets of the header fields. */
enum {
	BATCH_OFF_BASE_OFFSET = 0,
	BATCH_OFF_LENGTH = 8,
	BATCH_OFF_LEADER_EPOCH = 12,
	BATCH_OFF_MAGIC = 16,
	BATCH_OFF_CRC = 17,
	BATCH_OFF_ATTRIBUTES = 21,
	BATCH_OFF_LAST_OFFSET_DELTA = 23,
	BATCH_OFF_BASE_TIMESTAMP = 27,
	BATCH_OFF_MAX_TIMESTAMP = 35,
	BATCH_OFF_PRODUCER_ID = 43,
	BATCH_OFF_PRODUCER_EPOCH = 51,
	BATCH_OFF_BASE_SEQUENCE = 53,
	BATCH_OFF_RECORD_COUNT = 57,
	BATCH_OFF_RECORDS = 61,
};

/* Attribute bits. */
#define BATCH_ATTR_CODEC_MASK 0x0007
#define BATCH_ATTR_LOG_APPEND_TIME 0x0008
#define BATCH_ATTR_TRANSACTIONAL 0x0010
#define BATCH_ATTR_CONTROL 0x0020
#define BATCH_ATTR_DELETE_HORIZON 0x0040

/* Compression codecs, as numbered in the attributes. */
#define BATCH_CODEC_TABLE(X) \
	X(NONE, 0, "none")   \
	X(GZIP, 1, "gzip")   \
	X(SNAPPY, 2, "snappy") \
	X(LZ4, 3, "lz4")     \
	X(ZSTD, 4, "zstd")
enum batch_codec {
#define BATCH_CODEC_ENUM(name, num, str) BATCH_CODEC_##name = num,
	BATCH_CODEC_TABLE(BATCH_CODEC_ENUM)
#undef BATCH_CODEC_ENUM
	BATCH_CODEC_COUNT
};
/* "gzip", or "unknown" for 5..7. */
const char *batch_codec_name(int codec);
/* 1 if this build can decompress and recompress the codec (none always). */
int batch_codec_supported(int codec);

/* No producer id in the batch (the producer is not idempotent). */
#define BATCH_NO_PRODUCER_ID (-1)

/* A parsed header.  p/len cover the whole batch inside the caller's buffer. */
struct batch {
	const uint8_t *p;
	size_t len; /* BATCH_LOG_OVERHEAD + batch_length */
	int64_t base_offset;
	int32_t batch_length;
	int32_t leader_epoch;
	int8_t magic;
	uint32_t crc;
	uint16_t attributes;
	int32_t last_offset_delta;
	int64_t base_timestamp;
	int64_t max_timestamp;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int32_t record_count;
	const uint8_t *records; /* p + 61 */
	size_t records_len;	/* len - 61 */
};

/* Return values of batch_parse() and batch_iter_next(). */
enum {
	BATCH_ERROR = -1,
	BATCH_OK = 0,
	BATCH_INCOMPLETE = 1, /* only a prefix of a batch: normal at the end of a Fetch */
	BATCH_END = 2,	      /* batch_iter_next(): the blob is used up */
};

/*
 * Parses the batch at the start of buf.  BATCH_OK fills *b.
 * BATCH_INCOMPLETE means buf ends inside the batch; b->len is then the full
 * size of the batch if at least 12 bytes were there, else 0.
 * BATCH_ERROR (err names the base offset and what is wrong): BatchLength too
 * small or negative, magic other than 2, a negative BaseOffset, or a
 * LastOffsetDelta that runs past INT64_MAX.  The CRC is not checked here.
 */
int batch_parse(const uint8_t *buf, size_t len, struct batch *b, char *err,
    size_t errlen);

/* Walks a records blob (a Fetch partition's Records field) batch by batch. */
struct batch_iter {
	const uint8_t *buf;
	size_t len;
	size_t pos; /* bytes of whole batches returned so far */
};
void batch_iter_init(struct batch_iter *it, const uint8_t *buf, size_t len);
/*
 * BATCH_OK with the next batch in *b, BATCH_END when pos == len,
 * BATCH_INCOMPLETE when the rest is a partial batch (pos stays at its start),
 * BATCH_ERROR with the reason (err also gives the byte position).
 */
int batch_iter_next(struct batch_iter *it, struct batch *b, char *err,
    size_t errlen);

/* Size of the batch at the start of buf: batch_parse() without filling a struct. */
int batch_peek_size(const uint8_t *buf, size_t len, size_t *size, char *err,
    size_t errlen);
/*
 * Length of the longest prefix of buf made of whole batches, and how many
 * there are (nbatches may be NULL).  Stops at the first partial batch.
 * -1 with err if a batch header in the prefix is malformed.
 */
int batch_complete_prefix(const uint8_t *buf, size_t len, size_t *prefix,
    size_t *nbatches, char *err, size_t errlen);
/*
 * Copies the first complete batch of buf into out (outcap bytes) and sets
 * *outlen.  BATCH_INCOMPLETE if buf holds no complete batch; BATCH_ERROR if
 * the header is malformed or the batch does not fit in outcap.
 */
int batch_copy_first(const uint8_t *buf, size_t len, uint8_t *out,
    size_t outcap, size_t *outlen, char *err, size_t errlen);

/* CRC-32C over Attributes..end; -1 with "batch at offset N: ..." if wrong. */
int batch_verify_crc(const struct batch *b, char *err, size_t errlen);
/* The CRC a batch of these bytes should carry (len >= 21). */
uint32_t batch_compute_crc(const uint8_t *p, size_t len);

/* Accessors. */
static inline int batch_is_control(const struct batch *b)
{
	return (b->attributes & BATCH_ATTR_CONTROL) != 0;
}
static inline int batch_is_transactional(const struct batch *b)
{
	return (b->attributes & BATCH_ATTR_TRANSACTIONAL) != 0;
}
static inline int batch_codec(const struct batch *b)
{
	return b->attributes & BATCH_ATTR_CODEC_MASK;
}
/* 0 = CreateTime, 1 = LogAppendTime. */
static inline int batch_timestamp_type(const struct batch *b)
{
	return (b->attributes & BATCH_ATTR_LOG_APPEND_TIME) ? 1 : 0;
}
static inline int batch_has_producer_id(const struct batch *b)
{
	return b->producer_id > BATCH_NO_PRODUCER_ID;
}
static inline int64_t batch_producer_id(const struct batch *b) { return b->producer_id; }
static inline int16_t batch_producer_epoch(const struct batch *b) { return b->producer_epoch; }
static inline int32_t batch_base_sequence(const struct batch *b) { return b->base_sequence; }
static inline int32_t batch_record_count(const struct batch *b) { return b->record_count; }
static inline int32_t batch_last_offset_delta(const struct batch *b) { return b->last_offset_delta; }
static inline int32_t batch_leader_epoch(const struct batch *b) { return b->leader_epoch; }
static inline int64_t batch_last_offset(const struct batch *b)
{
	return b->base_offset + b->last_offset_delta;
}
/* The offset that follows the batch in its source log. */
static inline int64_t batch_next_offset(const struct batch *b)
{
	return b->base_offset + (int64_t)b->last_offset_delta + 1;
}
/* An empty batch: the cleaner kept only the header (for producer state). */
static inline int batch_is_empty(const struct batch *b)
{
	return b->record_count == 0;
}

/* What batch_rewrite_header() changes.  BaseOffset is always written. */
#define BATCH_RW_PRODUCER 0x01	   /* producer_id, producer_epoch, base_sequence */
#define BATCH_RW_LEADER_EPOCH 0x02 /* leader_epoch */
#define BATCH_RW_CLEAR_TXN 0x04	   /* clear the transactional attribute bit */
#define BATCH_RW_FULL_CRC 0x08	   /* recompute the CRC over the whole batch */
#define BATCH_RW_FIXUP_CRC 0x10	   /* fix the CRC up whatever the size */
/* Batches shorter than this get a full recompute (cheaper than a fix-up). */
#define BATCH_FIXUP_MIN_LEN 512
struct batch_rewrite {
	unsigned flags;
	int64_t base_offset;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int32_t leader_epoch;
};
/*
 * Writes b with the header fields of rw into out (outcap >= b->len; out may
 * be b->p for an in-place rewrite) and fixes the CRC up.  The records
 * section is copied byte for byte.  The input CRC is not checked: call
 * batch_verify_crc() first if the batch came from the network.  The new
 * CRC is b->crc (the stored one) with the effect of the changed header
 * bytes applied (crc32c_fixup(), O(log n) instead of a pass over the
 * batch), so it is valid exactly when the input's was: a corrupt input
 * stays detectably corrupt instead of being given a fresh valid CRC.
 * BATCH_RW_FULL_CRC, and any batch under BATCH_FIXUP_MIN_LEN bytes, gets
 * a recompute over the whole batch instead.
 */
int batch_rewrite_header(const struct batch *b, const struct batch_rewrite *rw,
    uint8_t *out, size_t outcap, char *err, size_t errlen);

/*
 * The strict Produce validator: 0 if a broker would accept records (one
 * partition's Records field of a Produce request mirrord is about to send)
 * from a client, else -1 with the rule that is broken in err.  The rules
 * are those of Kafka's log validator for a client append of magic v2 data:
 * exactly one batch, the batch length matches the blob, magic 2, a valid
 * CRC, a known codec, BaseOffset 0 (Kafka 4 checks it; older brokers just
 * overwrote it), RecordCount >= 1, LastOffsetDelta + 1 == RecordCount,
 * no control batch, a producer id implies epoch >= 0 and base sequence >= 0,
 * and at most max_batch_bytes (0: no limit; the broker's max.message.bytes).
 * test/kafka/test_batch_kafka.py checks these verdicts against a real broker.
 * For an uncompressed batch the records are walked as well: each record's
 * framing must fit and record i must have offset delta i (stricter than
 * Kafka 4.4, which stores such a batch and serves overlapping offsets).
 * Compressed records are not opened here (a broker does): add
 * batch_check_records() for that.
 */
int batch_validate_produce(const uint8_t *records, size_t len,
    size_t max_batch_bytes, char *err, size_t errlen);
/*
 * batch_validate_produce() with flags.  BATCH_VP_RECORDS_WALKED: the
 * caller already walked these records (batch_has_holes() returned 0 for
 * them, before a header rewrite that leaves the records as they are), so
 * they are not walked again; the CRC proves they did not change since (a
 * header rewrite fixes the CRC up, it does not recompute it:
 * batch_rewrite_header()): verified here, or by the broker with
 * BATCH_VP_CRC_CARRIED.
 */
#define BATCH_VP_RECORDS_WALKED 1
/*
 * BATCH_VP_CRC_CARRIED: the CRC is not computed again.  For a batch whose
 * stored CRC the caller verified when it took the batch in and then
 * carried over a header rewrite (batch_rewrite_header()'s fix-up): a
 * second pass over every byte found nothing the first did not, and the
 * broker checks the CRC of every batch a client produces anyway (Kafka
 * answers CORRUPT_MESSAGE and appends nothing), so a batch changed in
 * between is still refused whole, by the broker, with the partition
 * failed and its reason named.  The header rules are still checked.
 */
#define BATCH_VP_CRC_CARRIED 2
int batch_validate_produce_flags(const uint8_t *records, size_t len,
    size_t max_batch_bytes, int flags, char *err, size_t errlen);

/*
 * The record-level half of the broker's checks, which batch_validate_produce()
 * leaves out for compressed batches because it costs a decompression: the
 * records (decompressed, at most max_bytes) must be exactly RecordCount
 * well-framed records with offset deltas 0..n-1, as a broker demands of
 * the inner records of a compressed client batch.  0, or -1 with the record
 * index and the reason.  The header is not re-checked.
 */
int batch_check_records(const struct batch *b, size_t max_bytes, char *err,
    size_t errlen);

/* One anchor for the translation map: source offset -> destination offset. */
struct batch_offset_pair {
	int64_t src;
	int64_t dst;
};

/* The output of batch_reencode_contiguous(); owns buf and pairs. */
struct batch_reencoded {
	uint8_t *buf; /* the new batch (malloc'd), NULL for an empty batch */
	size_t len;
	/*
	 * Anchors: (base + delta_i, dst_base + i) for each record whose source
	 * offset does not follow the previous one (and for the first record),
	 * then (src_next, dst_next).  Between two anchors offsets advance 1:1.
	 */
	struct batch_offset_pair *pairs;
	size_t npairs;
	int32_t record_count;
	int64_t src_next; /* source offset after the batch: base + LastOffsetDelta + 1 */
	int64_t dst_next; /* destination offset after the batch: dst_base + RecordCount */
};
void batch_reencoded_fini(struct batch_reencoded *r);

/*
 * Rewrites b with contiguous offset deltas 0..n-1 and BaseOffset dst_base:
 * each record's offsetDelta (and so its length) is rewritten, everything
 * else in the record (attributes, timestamp delta, key, value, headers) is
 * kept.  LastOffsetDelta becomes RecordCount - 1, BatchLength and CRC are
 * recomputed, all other header fields are kept.  A compressed batch is
 * decompressed and recompressed with the same codec (gzip, snappy with the
 * framing it came in, lz4 frames, zstd); a codec this build lacks is an
 * error naming it.  max_bytes caps both the decompressed records and the
 * output (a compression bomb is an error, not an allocation).  An empty
 * batch (RecordCount 0) gives buf NULL and the single pair
 * (src_next, dst_base): there is nothing to send.  The CRC of b is not
 * checked here.  On error *out is left empty.
 */
int batch_reencode_contiguous(const struct batch *b, int64_t dst_base,
    size_t max_bytes, struct batch_reencoded *out, char *err, size_t errlen);

/*
 * 1 if the batch's records need batch_reencode_contiguous() before a broker
 * accepts them: RecordCount != LastOffsetDelta + 1, or (uncompressed only,
 * since it needs the records) a record whose offset delta is not its index.
 */
int batch_has_holes(const struct batch *b);

/*
 * Coalescing (mirror.coalesce.max.bytes): consecutive small uncompressed
 * batches of a partition merged into one, so the destination appends one
 * batch where the source has many.  The merged batch keeps every record's
 * offset, timestamp, key, value and headers: record i of an added batch gets
 * offset delta (its base - the first base) + its delta and timestamp delta
 * (its base timestamp - the first's) + its delta, both re-encoded, and
 * everything after them is copied byte for byte.  The first batch's records
 * are copied as they are.  The header is the first batch's with
 * LastOffsetDelta, RecordCount, MaxTimestamp, BatchLength and CRC made to
 * fit; producer fields are the first's (mirrord rewrites them anyway).
 */
struct batch_merge {
	uint8_t *buf;          /* the merged batch so far (malloc'd) */
	size_t len, alloc;
	size_t cap;            /* most bytes the merged batch may have */
	int64_t base_offset, next_offset;
	int64_t base_timestamp, max_timestamp;
	int32_t leader_epoch;
	uint16_t attributes;
	int32_t record_count;
	int nbatches;
};
/*
 * 1 if b may take part in a merge at all: uncompressed, not control,
 * CreateTime, RecordCount >= 1 and without offset holes (batch_has_holes()
 * walks its records), at most cap bytes.  A transactional batch may: the
 * caller merges only committed ones (mirrord writes them as ordinary
 * batches), and batch_merge_add() only batches of equal attributes.
 */
int batch_mergeable(const struct batch *b, size_t cap);
/* batch_mergeable() without the walk of the records: LastOffsetDelta + 1
 * == RecordCount stands in for it.  Enough for a batch to be added
 * (batch_merge_add() walks its records anyway and refuses holes), not for
 * the first (whose records are copied as they are). */
int batch_mergeable_header(const struct batch *b, size_t cap);
/* Starts a merge with first (batch_mergeable()): its bytes are copied.
 * 0, or -1 out of memory. */
int batch_merge_start(struct batch_merge *m, const struct batch *first,
    size_t cap, char *err, size_t errlen);
/*
 * Appends b's records: 0 added; 1 not added, m unchanged (b does not follow
 * at m's next offset, differs in leader epoch or attributes, has a record
 * whose offset delta is not its index, or the merged batch would pass cap
 * or INT32_MAX records or a timestamp delta overflow); -1 with err (a
 * malformed record, out of memory: m unchanged).  b must be
 * batch_mergeable_header().  The header is fixed by batch_merge_finish().
 */
int batch_merge_add(struct batch_merge *m, const struct batch *b, char *err,
    size_t errlen);
/* Writes the merged header (counts, max timestamp, length, CRC).  m->buf
 * then holds one valid batch of m->len bytes; the caller may take it (set
 * m->buf NULL before batch_merge_fini()). */
void batch_merge_finish(struct batch_merge *m);
void batch_merge_fini(struct batch_merge *m);

/*
 * Decompresses a compressed records section (exposed for tests and tools).
 * *outp is malloc'd; the output is capped at max_bytes.
 */
int batch_decompress(int codec, const uint8_t *in, size_t inlen,
    size_t max_bytes, uint8_t **outp, size_t *outlen, char *err, size_t errlen);
/* Compresses with codec; snappy_xerial selects Kafka's xerial framing. */
int batch_compress(int codec, int snappy_xerial, const uint8_t *in,
    size_t inlen, size_t max_bytes, uint8_t **outp, size_t *outlen,
    char *err, size_t errlen);

#endif
