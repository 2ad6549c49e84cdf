#!/usr/bin/env python3
"""What mirrord leaves to the destination broker: the CRC of what it
produces, on real Apache Kafka 4.4 (the shared clusters of
test/kafka/realkafka.py; SKIPs with the reason when it cannot run).

mirrord verifies every source batch's CRC-32C when it takes the batch in
and carries the stored CRC over its header rewrite (an O(log n) fix-up);
its strict Produce check does not compute the CRC a second time
(BATCH_VP_CRC_CARRIED, lib/wire/batch.h), because the broker computes it
for every batch a client produces.  This test holds Kafka to that: a
batch whose bytes no longer match its CRC is refused with
CORRUPT_MESSAGE and nothing of it is appended, while the same batch
intact is appended.  If a broker stopped checking, this fails, and the
second pass would have to come back.
"""

import os
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

CORRUPT_MESSAGE = 2


def produce_v3(cl, topic, batch):
    """One raw Produce v3 (acks=-1) of batch to partition 0: (error, offset)."""
    body = (struct.pack(">hhi", -1, -1, 10000) + struct.pack(">i", 1) +
            kraw._s(topic) + struct.pack(">ii", 1, 0) +
            struct.pack(">i", len(batch)) + bytes(batch))
    r = cl.conn(topic, 0).call(0, 3, body)
    r.i32()            # topics
    r.str()
    r.i32()            # partitions
    r.i32()            # index
    err = r.i16()
    return err, r.i64()


def main():
    src, _ = h.real_kafka(2)
    topic = "crc-%d" % os.getpid()
    src.create_topic(topic, 1)
    mt.produce_tagged(src.bootstrap, topic, 0, 3, "crc")
    cl = kraw.Cluster(src.bootstrap)
    try:
        batches = cl.batches(topic, 0)
        h.check(batches and all(b["crc_ok"] for b in batches),
                "the written batches: %r" % batches)
        good = bytearray(batches[-1]["raw"])
        good[0:8] = struct.pack(">q", 0)  # a client's BaseOffset
        end0 = cl.offsets(topic, 0)[1]

        for where, at in (("a record's last byte", len(good) - 1),
                          ("the record count", 57),
                          ("the first timestamp", 27)):
            bad = bytearray(good)
            bad[at] ^= 0x01
            err, off = produce_v3(cl, topic, bad)
            h.eq(err, CORRUPT_MESSAGE, "Produce of a batch with %s changed "
                 "after its CRC: error" % where)
            h.eq(cl.offsets(topic, 0)[1], end0,
                 "end offset after the refused batch (%s changed)" % where)
        err, off = produce_v3(cl, topic, good)
        h.eq(err, 0, "Produce of the intact batch: error")
        h.eq(off, end0, "the intact batch's offset")
        h.eq(cl.offsets(topic, 0)[1], end0 + batches[-1]["count"],
             "end offset after the intact batch")
    finally:
        cl.close()
    print("Kafka refuses a batch whose CRC does not match (CORRUPT_MESSAGE, "
          "nothing appended) and appends it intact", flush=True)


if __name__ == "__main__":
    h.run_main(main)
