"""A tiny raw Kafka client for tests and the demo: Metadata v1, ListOffsets
v1 and Fetch v4, returning record batches as the broker stored them.

It exists because a normal client decodes batches; to prove that mirrord
copies batches byte for byte we need them as bytes.  These versions are
spoken by the librdkafka 2.0.2 mock and by Kafka 4.x alike.  Every socket
operation has a timeout.
"""

import socket
import struct

_crc_table = None


def crc32c(data):
    global _crc_table
    if _crc_table is None:
        t = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            t.append(c)
        _crc_table = t
    c = 0xFFFFFFFF
    for b in data:
        c = _crc_table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class Reader:
    def __init__(self, b):
        self.b, self.o = b, 0

    def take(self, n):
        if self.o + n > len(self.b):
            raise ValueError("truncated response at %d (+%d of %d)"
                             % (self.o, n, len(self.b)))
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def i8(self): return struct.unpack(">b", self.take(1))[0]
    def i16(self): return struct.unpack(">h", self.take(2))[0]
    def i32(self): return struct.unpack(">i", self.take(4))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]

    def str(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def bytes(self):
        n = self.i32()
        return None if n < 0 else self.take(n)


def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


class Conn:
    def __init__(self, hostport, timeout=10):
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self.corr = 0

    def close(self):
        self.sock.close()

    def call(self, key, ver, body):
        self.corr += 1
        hdr = struct.pack(">hhi", key, ver, self.corr) + _s("kraw")
        msg = hdr + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._recv(4))[0]
        r = Reader(self._recv(size))
        if r.i32() != self.corr:
            raise ValueError("correlation id mismatch")
        return r

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            c = self.sock.recv(n - len(buf))
            if not c:
                raise EOFError("connection closed")
            buf += c
        return buf


class Cluster:
    """Leaders from Metadata v1 (all topics: never creates one)."""

    def __init__(self, bootstrap, timeout=10):
        self.bootstrap = bootstrap.split(",")[0]
        self.timeout = timeout
        self.conns = {}
        self.refresh()

    def refresh(self):
        c = Conn(self.bootstrap, self.timeout)
        r = c.call(3, 1, struct.pack(">i", -1))
        c.close()
        self.brokers = {}
        for _ in range(r.i32()):
            node, host, port, _rack = r.i32(), r.str(), r.i32(), r.str()
            self.brokers[node] = "%s:%d" % (host, port)
        r.i32()  # controller
        self.leaders = {}
        self.partitions = {}
        for _ in range(r.i32()):
            _err, name, _internal = r.i16(), r.str(), r.i8()
            n = r.i32()
            self.partitions[name] = n
            for _ in range(n):
                _perr, p, leader = r.i16(), r.i32(), r.i32()
                for _ in range(r.i32()):
                    r.i32()
                for _ in range(r.i32()):
                    r.i32()
                self.leaders[(name, p)] = leader

    def conn(self, topic, part):
        node = self.leaders[(topic, part)]
        if node not in self.conns:
            self.conns[node] = Conn(self.brokers[node], self.timeout)
        return self.conns[node]

    def close(self):
        for c in self.conns.values():
            c.close()
        self.conns = {}

    def offsets(self, topic, part):
        """(log start, high watermark)"""
        out = []
        for ts in (-2, -1):
            body = struct.pack(">ii", -1, 1) + _s(topic) + struct.pack(
                ">iiq", 1, part, ts)
            r = self.conn(topic, part).call(2, 1, body)
            r.i32()
            r.str()
            r.i32()
            r.i32()
            err = r.i16()
            r.i64()
            off = r.i64()
            if err:
                raise ValueError("ListOffsets %s-%d: error %d" % (topic, part, err))
            out.append(off)
        return tuple(out)

    def batches(self, topic, part, start=0, end=None):
        """Every record batch of the partition from start to the high
        watermark, as raw bytes (a list of dicts with base_offset, count,
        last_delta, crc_ok, raw)."""
        out = []
        off = start
        while True:
            body = struct.pack(">iiiib", -1, 500, 1, 8 << 20, 0)
            body += struct.pack(">i", 1) + _s(topic) + struct.pack(
                ">iiqi", 1, part, off, 4 << 20)
            r = self.conn(topic, part).call(1, 4, body)
            r.i32()
            r.i32()
            r.str()
            r.i32()
            r.i32()
            err, hwm = r.i16(), r.i64()
            r.i64()
            n = r.i32()
            for _ in range(max(n, 0)):
                r.i64()
                r.i64()
            recs = r.bytes() or b""
            if err:
                raise ValueError("Fetch %s-%d@%d: error %d" % (topic, part, off, err))
            if end is None:
                end = hwm
            got = False
            o = 0
            while o + 12 <= len(recs):
                base, blen = struct.unpack(">qi", recs[o:o + 12])
                if o + 12 + blen > len(recs):
                    break
                raw = recs[o:o + 12 + blen]
                o += 12 + blen
                last_delta = struct.unpack(">i", raw[23:27])[0]
                count = struct.unpack(">i", raw[57:61])[0]
                if base + last_delta < off:
                    continue
                crc = struct.unpack(">I", raw[17:21])[0]
                out.append({"base_offset": base, "count": count,
                            "last_delta": last_delta,
                            "crc_ok": crc32c(raw[21:]) == crc,
                            "attributes": struct.unpack(">h", raw[21:23])[0],
                            "raw": raw})
                off = base + last_delta + 1
                got = True
            if off >= end or not got:
                if off < end and not got:
                    raise ValueError("Fetch %s-%d@%d returned no batch below "
                                     "the high watermark %d" % (topic, part, off, end))
                return out


def records_section(raw):
    """What mirrord must copy unchanged: everything after the 61-byte
    header (the possibly compressed records)."""
    return raw[61:]
