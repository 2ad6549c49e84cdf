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

/* The batch being built by enc_begin()/enc_record()/enc_finish(). */
struct enc {
	struct kw w;
	size_t lenslot, crc_at, lod_at, cnt_at;
	int32_t count;
};

static void enc_begin(struct enc *e, size_t room, int64_t producer_id,
    int16_t epoch, int32_t base_seq, int64_t timestamp_ms)
{
	kw_init(&e->w, room);
	e->count = 0;
	kw_i64(&e->w, 0);                    /* base offset */
	e->lenslot = kw_slot32(&e->w);       /* batch length */
	kw_i32(&e->w, -1);                   /* partition leader epoch */
	kw_i8(&e->w, BATCH_MAGIC);
	e->crc_at = e->w.len;
	kw_u32(&e->w, 0);                    /* crc, at the end */
	kw_i16(&e->w, 0);                    /* attributes: no codec, create time */
	e->lod_at = e->w.len;
	kw_i32(&e->w, 0);                    /* last offset delta, at the end */
	kw_i64(&e->w, timestamp_ms);
	kw_i64(&e->w, timestamp_ms);
	kw_i64(&e->w, producer_id);
	kw_i16(&e->w, epoch);
	kw_i32(&e->w, base_seq);
	e->cnt_at = e->w.len;
	kw_i32(&e->w, 0);                    /* record count, at the end */
}

static void enc_record(struct enc *e, const char *key, const uint8_t *v,
    size_t vlen)
{
	struct kw rh;

	/* The record body before the value, to know its length. */
	kw_init(&rh, 64 + (key != NULL ? strlen(key) : 0));
	kw_i8(&rh, 0);                          /* attributes */
	kw_varlong(&rh, 0);                     /* timestamp delta */
	kw_varint(&rh, e->count);               /* offset delta */
	if (key != NULL) {
		kw_varint(&rh, (int32_t)strlen(key));
		kw_raw(&rh, key, strlen(key));
	} else {
		kw_varint(&rh, -1);
	}
	kw_varint(&rh, (int32_t)vlen);
	kw_varint(&e->w, (int32_t)(rh.len + vlen + 1));  /* + header count */
	kw_raw(&e->w, rh.buf, rh.len);
	if (rh.err)
		kw_fail(&e->w, rh.why);
	kw_fini(&rh);
	kw_raw(&e->w, v, vlen);
	kw_varint(&e->w, 0);                    /* no headers */
	e->count++;
}

static uint8_t *enc_finish(struct enc *e, size_t *outlen, char *err,
    size_t errlen)
{
	uint8_t *out;

	if (e->count == 0 || e->w.err) {
		seterr(err, errlen, "cannot encode a batch of %d records: %s",
		    e->count, e->w.err ? e->w.why : "empty");
		kw_fini(&e->w);
		return NULL;
	}
	kw_put32(&e->w, e->lenslot, (int32_t)(e->w.len - BATCH_LOG_OVERHEAD));
	be32_store(e->w.buf + e->lod_at, (uint32_t)(e->count - 1));
	be32_store(e->w.buf + e->cnt_at, (uint32_t)e->count);
	be32_store(e->w.buf + e->crc_at, batch_compute_crc(e->w.buf, e->w.len));
	out = kw_take(&e->w, outlen);
	kw_fini(&e->w);
	if (out == NULL)
		seterr(err, errlen, "out of memory");
	return out;
}

uint8_t *mlog_kafka_encode_batch(const uint8_t *frames, size_t len,
    int snapshot, int64_t producer_id, int16_t epoch, int32_t base_seq,
    int64_t timestamp_ms, size_t *outlen, char *err, size_t errlen)
{
	struct enc e;
	int32_t count = 0;
	size_t off = 0;

	/* Each record adds at most 40 bytes of framing (length, attributes,
	 * timestamp and offset deltas, key, value length, header count). */
	for (size_t o = 0, fl; o < len; o += fl, count++)
		if ((fl = frame_len_at(frames + o, len - o)) == 0)
			break;
	enc_begin(&e, len + (size_t)count * 40 + 128, producer_id, epoch,
	    base_seq, timestamp_ms);
	while (off < len) {
		size_t fl = frame_len_at(frames + off, len - off);

		if (fl == 0) {
			seterr(err, errlen, "pending frame at byte %zu is cut "
			    "short", off);
			kw_fini(&e.w);
			return NULL;
		}
		enc_record(&e, snapshot ? SNAP_KEY : NULL, frames + off, fl);
		off += fl;
	}
	return enc_finish(&e, outlen, err, errlen);
}

uint8_t *mlog_kafka_encode_value_batch(const char *key, const uint8_t *value,
    size_t vlen, int64_t producer_id, int16_t epoch, int32_t base_seq,
    int64_t timestamp_ms, size_t *outlen, char *err, size_t errlen)
{
	struct enc e;

	enc_begin(&e, vlen + (key != NULL ? strlen(key) : 0) + 192,
	    producer_id, epoch, base_seq, timestamp_ms);
	enc_record(&e, key, value, vlen);
	return enc_finish(&e, outlen, err, errlen);
}

/* ---- requests and replies --------------------------------------------- */

uint8_t *mlog_kafka_encode_request(uint64_t id, int32_t generation,
    const char *member_id, const char *instance_id, const uint8_t *frames,
    size_t frames_len, size_t *outlen, char *err, size_t errlen)
{
	struct kw w;
	uint8_t *out;

	kw_init(&w, frames_len + 2 * 32767 + 64);
	kw_u16(&w, MLOG_KAFKA_REQ_VERSION);
	kw_i64(&w, (int64_t)id);
	kw_i32(&w, generation);
	kw_str(&w, kstr_c(member_id != NULL ? member_id : ""));
	kw_str(&w, kstr_c(instance_id != NULL ? instance_id : ""));
	kw_raw(&w, frames, frames_len);
	if (w.err) {
		seterr(err, errlen, "cannot encode the request: %s", w.why);
		kw_fini(&w);
		return NULL;
	}
	out = kw_take(&w, outlen);
	kw_fini(&w);
	if (out == NULL)
		seterr(err, errlen, "out of memory");
	return out;
}

struct req_walk {
	uint32_t n;
	uint16_t bad_type;
	uint64_t bad_off;
};

static int req_frame(void *arg, uint16_t type, const uint8_t *p,
    uint32_t len, uint64_t off)
{
	struct req_walk *rw = arg;

	(void)p;
	(void)len;
	if (type >= MLOG_TYPE_RESERVED) {
		rw->bad_type = type;
		rw->bad_off = off;
		return 1;
	}
	rw->n++;
	return 0;
}

int mlog_kafka_decode_request(const uint8_t *v, size_t len,
    uint32_t max_record, struct mlog_kafka_req *out, char *err,
    size_t errlen)
{
	struct kr r;
	struct kstr m, i;
	uint16_t version;
	size_t hdr;
	struct req_walk rw = { 0, 0, 0 };
	struct mlog_scan_result res;

	memset(out, 0, sizeof(*out));
	kr_init(&r, v, len);
	version = kr_u16(&r);
	if (r.err) {
		seterr(err, errlen, "request of %zu bytes is shorter than its "
		    "version field", len);
		return -1;
	}
	if (version != MLOG_KAFKA_REQ_VERSION) {
		seterr(err, errlen, "request version %u is not %u", version,
		    MLOG_KAFKA_REQ_VERSION);
		return -1;
	}
	out->id = (uint64_t)kr_i64(&r);
	out->generation = kr_i32(&r);
	m = kr_str(&r);
	i = kr_str(&r);
	if (r.err || m.len < 0 || i.len < 0) {
		seterr(err, errlen, "request header of %zu bytes is cut short or "
		    "has a null member or instance id", len);
		return -1;
	}
	out->member_id = m.p;
	out->member_len = (size_t)m.len;
	out->instance_id = i.p;
	out->instance_len = (size_t)i.len;
	hdr = kr_off(&r);
	out->frames = v + hdr;
	out->frames_len = len - hdr;
	mlog_scan(out->frames, out->frames_len, max_record, req_frame, &rw,
	    &res);
	if (res.end == MLOG_SCAN_STOPPED) {
		seterr(err, errlen, "request frame at byte %" PRIu64 " is of "
		    "framing type 0x%04x, not a state record", rw.bad_off,
		    rw.bad_type);
		return -1;
	}
	if (res.end != MLOG_SCAN_CLEAN) {
		seterr(err, errlen, "request frame at byte %" PRIu64 " of %zu: "
		    "%s", res.bad_off, out->frames_len, res.why);
		return -1;
	}
	if (rw.n == 0) {
		seterr(err, errlen, "request holds no record");
		return -1;
	}
	out->nframes = rw.n;
	return 0;
}

uint8_t *mlog_kafka_encode_reply(const char *instance_id, uint64_t id,
    int64_t req_offset, int16_t error, const char *msg, size_t *outlen)
{
	struct kw w;
	size_t ml = msg != NULL ? strlen(msg) : 0;
	size_t il = instance_id != NULL ? strlen(instance_id) : 0;
	uint8_t *out;

	if (ml > MLOG_KAFKA_REPLY_MSG_MAX)
		ml = MLOG_KAFKA_REPLY_MSG_MAX;
	if (il > 32767)
		il = 32767;
	kw_init(&w, ml + il + 64);
	kw_u16(&w, 1);
	kw_str(&w, (struct kstr){ instance_id != NULL ? instance_id : "",
	    (int32_t)il });
	kw_i64(&w, (int64_t)id);
	kw_i64(&w, req_offset);
	kw_i16(&w, error);
	kw_str(&w, (struct kstr){ msg != NULL ? msg : "", (int32_t)ml });
	out = w.err ? NULL : kw_take(&w, outlen);
	kw_fini(&w);
	return out;
}

int mlog_kafka_decode_reply(const uint8_t *p, size_t len,
    struct mlog_kafka_reply *out, char *err, size_t errlen)
{
	struct kr r;
	struct kstr i, m;
	uint16_t version;

	memset(out, 0, sizeof(*out));
	kr_init(&r, p, len);
	version = kr_u16(&r);
	i = kr_str(&r);
	out->id = (uint64_t)kr_i64(&r);
	out->req_offset = kr_i64(&r);
	out->error = kr_i16(&r);
	m = kr_str(&r);
	if (r.err || version != 1 || i.len < 0 || m.len < 0 ||
	    kr_left(&r) != 0 || out->req_offset < 0) {
		seterr(err, errlen, "reply record of %zu bytes is malformed "
		    "(version %u)", len, version);
		return -1;
	}
	out->instance_id = i.p;
	out->instance_len = (size_t)i.len;
	out->msg = m.p;
	out->msg_len = (size_t)m.len;
	return 0;
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
		rec.key = key;
		rec.key_len = key != NULL ? (size_t)klen : 0;
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

static int first_rec(void *arg, const struct mlog_kafka_rec *r)
{
	*(int *)arg = r->snapshot;
	return 1;       /* the first one is enough */
}

int mlog_kafka_batch_is_snapshot(const uint8_t *records, size_t records_len,
    int32_t count)
{
	int snap = 0;
	char e[128];

	if (count < 1 || mlog_kafka_decode_records(0, records, records_len, 1,
	    first_rec, &snap, e, sizeof(e)) < 0)
		return 0;
	return snap;
}
