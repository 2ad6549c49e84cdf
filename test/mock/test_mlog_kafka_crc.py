#!/usr/bin/env python3
"""A damaged batch in the replicated metadata log stops the start-up
(storage.backend: kafka, a private real Kafka 4.4 broker).

Replay checks the CRC-32C of every batch it reads; most of them are checked
on the log's network thread as each Fetch answer arrives, while the answer
before is applied (lib/metadata/mlog_kafka_io.c fetch_check()).  Here a
byte inside one batch in the middle of the log is flipped in the broker's
segment file while the broker is down (a clean stop: the broker does not
check the segment again at start, and serves the bytes as they are); the
batch is one of those after the newest snapshot, which replay reads:

  * a mirrord on that log refuses to start (exit 1) with a message naming
    the topic, the damaged batch's offset and the CRC mismatch;
  * the log as written (the byte flipped back) starts again with every
    mirror, so the refusal was about that one byte.
"""

import glob
import os
import signal
import struct
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
from krawwrite import read_varint as varint  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
MIRRORS = 12


def daemon(k, name, topic):
    return mt.Mirrord(destination=k.bootstrap, name=name, start=False,
                      storage_kafka={"secret_key_file": KEY, "topic": topic,
                                     "timeout_ms": 20000})


def mirrors(d):
    """The MIRROR column of kafka-mirrors --list, sorted."""
    lines = d.cli_ok("--list").stdout.splitlines()
    return sorted(x.split()[0] for x in lines[1:] if x.strip())


def first_key(data, pos):
    """The key of the first record of the batch at pos (None if null)."""
    p = pos + 61                      # the batch header
    _, p = varint(data, p)            # record length
    p += 1                            # attributes
    _, p = varint(data, p)            # timestamp delta
    _, p = varint(data, p)            # offset delta
    klen, p = varint(data, p)
    return None if klen < 0 else bytes(data[p:p + klen])


def batches(data):
    """(position, length, base offset, snapshot) of every batch of a
    segment file; snapshot: its records are keyed as snapshot records."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack(">qi", data[pos:pos + 12])
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, 12 + length, base,
                    first_key(data, pos) == b"snapshot"))
        pos += 12 + length
    return out


def main():
    k, = h.private_kafka(1)
    topic = "mlogk-crc-" + RUN
    a = daemon(k, "a", topic)
    a.start()
    for i in range(MIRRORS):
        a.create("m%d" % i, {"bootstrap.servers": k.bootstrap})
    want = sorted("m%d" % i for i in range(MIRRORS))
    got = mirrors(a)
    h.check(got == want, "mirrors before the damage: %r, want %r"
            % (got, want))
    h.check(a.stop() == 0, "mirrord a did not stop cleanly")
    # a wrote a snapshot as it stopped: replay starts there.  So more
    # writes after it, and no snapshot at the end (SIGKILL).
    a2 = daemon(k, "a2", topic)
    a2.start()
    for i in range(MIRRORS, 2 * MIRRORS):
        a2.create("m%d" % i, {"bootstrap.servers": k.bootstrap})
    want = sorted("m%d" % i for i in range(2 * MIRRORS))
    got = mirrors(a2)
    h.check(got == want, "mirrors before the damage: %r, want %r"
            % (got, want))
    a2.proc.signal(signal.SIGKILL)
    a2.proc.wait(30)

    k.stop()
    segs = glob.glob(os.path.join(k.dir, "data", topic + "-0", "*.log"))
    h.check(len(segs) == 1, "segment files of %s-0: %r" % (topic, segs))
    with open(segs[0], "rb") as f:
        data = bytearray(f.read())
    found = batches(data)
    snaps = [i for i, x in enumerate(found) if x[3]]
    h.check(snaps, "no snapshot batch in %s" % segs[0])
    after = found[snaps[-1] + 1:]
    h.check(len(after) >= MIRRORS, "%d batches after the snapshot in %s, "
            "want at least %d" % (len(after), segs[0], MIRRORS))
    # A batch in the middle of those replayed after the snapshot (not the
    # first of a Fetch answer), its last byte: covered by the CRC only.
    pos, length, base, _ = after[len(after) // 2]
    at = pos + length - 1
    data[at] ^= 0x01
    with open(segs[0], "wb") as f:
        f.write(data)
    print("flipped byte %d of %s (batch at offset %d)" % (at, segs[0], base))
    k.launch()
    k.wait_ready(time.monotonic() + 180)

    b = daemon(k, "b", topic)
    b.start(wait=False)
    h.wait_for(lambda: not b.proc.alive() or "ready: admin listener" in
               b.proc.output(), 120, "mirrord b to exit or be ready")
    h.check(not b.proc.alive(), "mirrord started on a damaged log:\n"
            + b.proc.tail())
    h.check(b.proc.wait(10) == 1, "mirrord b exited with status %s"
            % b.proc.wait(10))
    out = b.proc.output()
    h.check("topic %s partition 0: batch at offset %d: CRC-32C mismatch"
            % (topic, base) in out and "refusing to start" in out,
            "the refusal does not name the topic, the batch at offset %d "
            "and the CRC:\n%s" % (base, b.proc.tail()))
    print("refused: %s" % [x for x in out.splitlines()
                           if "CRC-32C mismatch" in x][-1])

    k.stop()
    data[at] ^= 0x01
    with open(segs[0], "wb") as f:
        f.write(data)
    k.launch()
    k.wait_ready(time.monotonic() + 180)
    c = daemon(k, "c", topic)
    c.start()
    got = mirrors(c)
    h.check(got == want, "mirrors after the repair: %r, want %r"
            % (got, want))
    c.stop()
    print("ok")


h.run_main(main)
