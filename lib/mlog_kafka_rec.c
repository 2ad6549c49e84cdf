/*
 * mlog_kafka_rec.c: the record encoding of the replicated metadata log
 * (see mlog_kafka.h): mlog frames as the values of the records of one
 * uncompressed v2 batch, and the walk over such a batch's records that
 * replay runs on what the broker returns.  Kept apart from the network
 * code so the fuzz harness (test/fuzz/fuzz_mlogk.c) links it alone.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "compat.h"
#include "kbuf.h"
#include "mlog_kafka.h"

#define SNAP_KEY MLOG_KAFKA_SNAP_KEY

/* Frame length at p (header included), 0 if p..end does not hold one. */
static size_t frame_len_at(const uint8_t *p, size_t left)
{
	if (left < MLOG_FRAME_HDR)
		return 0;
	uint64_t n = MLOG_FRAME_HDR + (uint64_t)be32_load(p);
	return n <= left ? (size_t)n : 0;
}

uint8_t *mlog_kafka_encode_batch(const uint8_t *frames, size_t len,
    int snapshot, int64_t producer_id, int16_t epoch, int32_t base_seq,
    int64_t timestamp_ms, size_t *outlen, char *err, size_t errlen)
{
	struct kw w;
	int32_t count = 0;
	size_t off = 0, lenslot, crc_at;
	uint8_t *out;

	/* Each record adds at most 40 bytes of framing (length, attributes,
	 * timestamp and offset deltas, key, value length, header count). */
	for (size_t o = 0, fl; o < len; o += fl, count++)
		if ((fl = frame_len_at(frames + o, len - o)) == 0)
			break;
	kw_init(&w, len + (size_t)count * 40 + 128);
	count = 0;
	kw_i64(&w, 0);                    /* base offset */
	lenslot = kw_slot32(&w);          /* batch length */
	kw_i32(&w, -1);                   /* partition leader epoch */
	kw_i8(&w, BATCH_MAGIC);
	crc_at = w.len;
	kw_u32(&w, 0);                    /* crc, below */
	kw_i16(&w, 0);                    /* attributes: no codec, create time */
	size_t lod_at = w.len;
	kw_i32(&w, 0);                    /* last offset delta, below */
	kw_i64(&w, timestamp_ms);
	kw_i64(&w, timestamp_ms);
	kw_i64(&w, producer_id);
	kw_i16(&w, epoch);
	kw_i32(&w, base_seq);
	size_t cnt_at = w.len;
	kw_i32(&w, 0);                    /* record count, below */
	while (off < len) {
		size_t fl = frame_len_at(frames + off, len - off);
		struct kw rh;

		if (fl == 0) {
			seterr(err, errlen, "pending frame at byte %zu is cut "
			    "short", off);
			kw_fini(&w);
			return NULL;
		}
		/* The record body before the value, to know its length. */
		kw_init(&rh, 64);
		kw_i8(&rh, 0);                          /* attributes */
		kw_varlong(&rh, 0);                     /* timestamp delta */
		kw_varint(&rh, count);                  /* offset delta */
		if (snapshot) {
			kw_varint(&rh, (int32_t)strlen(SNAP_KEY));
			kw_raw(&rh, SNAP_KEY, strlen(SNAP_KEY));
		} else {
			kw_varint(&rh, -1);
		}
		kw_varint(&rh, (int32_t)fl);
		size_t body = rh.len + fl + 1;          /* + header count */
		kw_varint(&w, (int32_t)body);
		kw_raw(&w, rh.buf, rh.len);
		kw_fini(&rh);
		kw_raw(&w, frames + off, fl);
		kw_varint(&w, 0);                       /* no headers */
		off += fl;
		count++;
	}
	if (count == 0 || w.err) {
		seterr(err, errlen, "cannot encode a batch of %d records (%zu "
		    "bytes): %s", count, len, w.err ? w.why : "empty");
		kw_fini(&w);
		return NULL;
	}
	kw_put32(&w, lenslot, (int32_t)(w.len - BATCH_LOG_OVERHEAD));
	be32_store(w.buf + lod_at, (uint32_t)(count - 1));
	be32_store(w.buf + cnt_at, (uint32_t)count);
	be32_store(w.buf + crc_at, batch_compute_crc(w.buf, w.len));
	out = kw_take(&w, outlen);
	kw_fini(&w);
	if (out == NULL)
		seterr(err, errlen, "out of memory");
	return out;
}

int mlog_kafka_decode_records(int64_t base_offset, const uint8_t *records,
    size_t records_len, int32_t count, mlog_kafka_rec_fn cb, void *arg,
    char *err, size_t errlen)
{
	struct kr r;

	kr_init(&r, records, records_len);
	for (int32_t i = 0; i < count; i++) {
		int32_t rlen = kr_varint(&r);
		size_t start = kr_off(&r);
		struct mlog_kafka_rec rec = { 0 };
		int32_t klen, vlen, nh;
		const uint8_t *key;

		if (r.err || rlen < 0 || (size_t)rlen > kr_left(&r))
			goto bad;
		kr_i8(&r);
		kr_varlong(&r);
		/* mirrord writes record i with offset delta i, and no
		 * compaction ever removes one: anything else is not ours. */
		if (kr_varint(&r) != i)
			goto bad;
		rec.offset = base_offset + i;
		klen = kr_varint(&r);
		if (klen > 0 && (size_t)klen > kr_left(&r))
			goto bad;
		key = klen > 0 ? kr_raw(&r, (size_t)klen) : NULL;
		rec.snapshot = klen == (int32_t)strlen(SNAP_KEY) && key != NULL &&
		    memcmp(key, SNAP_KEY, (size_t)klen) == 0;
		vlen = kr_varint(&r);
		if (vlen < 0 || (size_t)vlen > kr_left(&r))
			goto bad;
		rec.value = kr_raw(&r, (size_t)vlen);
		rec.value_len = (size_t)vlen;
		nh = kr_varint(&r);
		for (int32_t h = 0; h < nh && !r.err; h++) {
			int32_t hk = kr_varint(&r), hv;
			if (hk < 0 || (size_t)hk > kr_left(&r))
				goto bad;
			kr_raw(&r, (size_t)hk);
			hv = kr_varint(&r);
			if (hv > 0 && (size_t)hv > kr_left(&r))
				goto bad;
			if (hv > 0)
				kr_raw(&r, (size_t)hv);
		}
		if (r.err || kr_off(&r) - start != (size_t)rlen)
			goto bad;
		if (cb(arg, &rec) != 0)
			return 1;
		continue;
bad:
		seterr(err, errlen, "record %d of the batch at offset %" PRId64
		    " is malformed", i, base_offset);
		return -1;
	}
	return 0;
}

