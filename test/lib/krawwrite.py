"""The writing side of the tests' raw Kafka client (test/lib/kraw.py reads):
record batches built by hand (so a test can give them offset holes, as the
log cleaner leaves them), Produce v3 of one such batch, DeleteRecords v1,
and a decoder for the records of an uncompressed batch.

These versions are spoken by the librdkafka 2.0.2 mock (Produce) and by
Kafka 4.x (Produce v3, DeleteRecords v1).  Every socket operation has the
timeout of kraw.Conn.
"""

import struct
import time

import kraw


def _varint(v):
    v = (v << 1) ^ (v >> 63)          # zigzag
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def record(delta, key, value, ts_delta=0):
    body = bytes([0]) + _varint(ts_delta) + _varint(delta)
    for f in (key, value):
        body += _varint(-1) if f is None else _varint(len(f)) + f
    body += _varint(0)                # no headers
    return _varint(len(body)) + body


def batch(records, last_delta=None, base_ts=None):
    """One uncompressed v2 batch without producer id.  records is a list of
    (offset_delta, key, value); last_delta defaults to the last record's
    delta (a larger one leaves a hole at the end, as the cleaner does).
    base_ts defaults to now: a fixed old timestamp would let the broker's
    time retention (7 days) delete the records within a second."""
    if base_ts is None:
        base_ts = int(time.time() * 1000)
    if last_delta is None:
        last_delta = records[-1][0]
    recs = b"".join(record(dl, k, v, dl) for dl, k, v in records)
    after_crc = struct.pack(">hiqqqhii", 0, last_delta, base_ts,
                            base_ts + records[-1][0], -1, -1, -1,
                            len(records)) + recs
    crc = kraw.crc32c(after_crc)
    inner = struct.pack(">ibI", 0, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(inner)) + inner


def produce(cluster, topic, part, raw, acks=-1):
    """Produce v3 of raw (one batch) to topic-part; returns the base
    offset, raises ValueError on an error code."""
    body = struct.pack(">hhi", -1, acks, 30000) + struct.pack(">i", 1) + \
        _s(topic) + struct.pack(">ii", 1, part) + struct.pack(">i", len(raw)) + raw
    r = cluster.conn(topic, part).call(0, 3, body)
    r.i32()
    r.str()
    r.i32()
    _idx, err, base = r.i32(), r.i16(), r.i64()
    if err:
        raise ValueError("Produce %s-%d: error %d" % (topic, part, err))
    return base


def delete_records(cluster, topic, part, offset):
    """DeleteRecords v1 up to offset; returns the new log start (low
    watermark), raises ValueError on an error code."""
    body = struct.pack(">i", 1) + _s(topic) + struct.pack(">iiq", 1, part, offset) + \
        struct.pack(">i", 30000)
    r = cluster.conn(topic, part).call(21, 1, body)
    r.i32()                           # throttle
    r.i32()
    r.str()
    r.i32()
    _idx, low, err = r.i32(), r.i64(), r.i16()
    if err:
        raise ValueError("DeleteRecords %s-%d to %d: error %d"
                         % (topic, part, offset, err))
    return low


def read_varint(b, o):
    """(value, next offset) of the zigzag varint at b[o:] (record fields)."""
    v = shift = 0
    while True:
        c = b[o]
        o += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return (v >> 1) ^ -(v & 1), o


def records_of(raw):
    """[(offset, key, value)] of an uncompressed batch from kraw's
    batches()."""
    base = struct.unpack(">q", raw[0:8])[0]
    if struct.unpack(">h", raw[21:23])[0] & 7:
        raise ValueError("batch at %d is compressed" % base)
    n = struct.unpack(">i", raw[57:61])[0]
    o = 61
    out = []
    for _ in range(n):
        ln, o = read_varint(raw, o)
        end = o + ln
        o += 1                        # attributes
        _ts, o = read_varint(raw, o)
        delta, o = read_varint(raw, o)
        f = []
        for _ in range(2):
            ln2, o = read_varint(raw, o)
            if ln2 < 0:
                f.append(None)
            else:
                f.append(bytes(raw[o:o + ln2]))
                o += ln2
        out.append((base + delta, f[0], f[1]))
        o = end
    return out
