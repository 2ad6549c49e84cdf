#!/usr/bin/env python3
"""The destination ends of many partitions in one ListOffsets per broker
on real Apache Kafka (the tier of test/kafka/realkafka.py;
SKIPs with the reason when it cannot run), with the real mirrord and
kafka-mirrors:

  * 3 topics of 25 partitions, created on both sides: all 75 ends come in a
    few ListOffsets (mirrord logs each at debug level), none read short,
    and every partition is copied batch for batch at equal offsets;
  * kill -9, more records written meanwhile, a restart: every partition
    reads its end again, in a few requests, and copies the rest, nothing
    lost or twice.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_sync_batch as sb  # noqa: E402  (its helpers; SKIPs without confluent-kafka)

RUN = "%d" % (os.getpid() % 100000)


def produce_all(src, topics, tag, n):
    """n records to every partition of topics, one producer, acks=all."""
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": src, "acks": "all", "linger.ms": 5})
    for t in topics:
        for part in range(sb.NPART):
            for i in range(n):
                p.produce(t, partition=part, value=b"%s-%d-%d" % (
                    tag.encode(), part, i), on_delivery=lambda e, _m:
                    e and errors.append(str(e)))
    left = p.flush(60)
    if left or errors:
        h.fail("producing %s: %d unflushed, %s" % (tag, left, errors[:3]))


def check_requests(log, what, want_ends):
    nreq, nparts = sb.requests_logged(log)
    print("%s: %d ListOffsets requests carried %d partition ends"
          % (what, nreq, nparts), flush=True)
    h.check(nparts >= want_ends, "%s: every partition should have read its "
            "destination end: %d ends in %d requests" % (what, nparts, nreq))
    h.check(nreq <= 6, "%s: %d ListOffsets requests for %d ends: not batched"
            % (what, nreq, nparts))
    h.check("lacks" not in log and "malformed ListOffsets" not in log,
            "%s: a ListOffsets answer was read short" % what)


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    topics = tuple("syncb-%s-%s" % (x, RUN) for x in "abc")
    for cl in (src, dst):
        for t in topics:
            cl.create_topic(t, partitions=sb.NPART)
    produce_all(SRC, topics, "a", 3)
    d = mt.Mirrord(destination=DST, log_level="debug")
    d.create("k", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100"})
    d.cli_ok("--add", "--mirror", "k", "--topic", ",".join(topics))
    sb.wait_copied(d, SRC, DST, 3, topics=topics, mirror="k", timeout=120)
    check_requests(d.log(), "start", len(topics) * sb.NPART)

    d.kill9()
    produce_all(SRC, topics, "b", 2)
    d.start()
    sb.wait_copied(d, SRC, DST, 5, topics=topics, mirror="k", timeout=120)
    with open(d.proc.log_path, encoding="utf-8", errors="replace") as f:
        check_requests(f.read(), "restart", len(topics) * sb.NPART)
    h.check("-> FAILED" not in d.log(), "a partition failed")
    d.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
