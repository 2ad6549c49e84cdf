#!/usr/bin/env python3
"""Offset commits larger than a broker writes in one batch, on real Kafka
4.4: a broker writes one OffsetCommit's offsets as one batch of its offsets
topic and refuses the whole commit (UNKNOWN_SERVER_ERROR) when that batch
is over message.max.bytes.  A mirror of thousands of partitions marks every
one of them in the group __mirrord_mirrors, and a consumer group may have
offsets on as many; on a real broker (1 MiB by default) 10,000 partitions
were refused.  Here the destination broker's limit is 50,000 bytes and the
topic has 500 partitions (about 75 KB of marks):

  * every partition's mirror mark reaches the destination;
  * a consumer group with an offset on every partition is synced: the
    destination group holds the same offset (plain topic: offsets are
    equal) and metadata on every partition;
  * mirrord logged no OffsetCommit refusal.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_groupsync_kafka as gk  # noqa: E402  (SKIPs without confluent-kafka)
from confluent_kafka import Producer  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
MARKS = "__mirrord_mirrors"
PARTS = 500
LIMIT = 50000


def fetched(bootstrap, group):
    try:
        return gk.raw_fetch(bootstrap, group)
    except AssertionError as e:   # the coordinator is not there yet
        print("OffsetFetch %s: %s" % (group, e), flush=True)
        return {}


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src = h.real_kafka()[0]
    dst, = h.private_kafka(1, "plaintext", extra_props={
        "message.max.bytes": str(LIMIT)})
    topic = "marks-large-" + RUN
    group = "marks-large-g-" + RUN
    src.create_topic(topic, partitions=PARTS)
    p = Producer({"bootstrap.servers": src.bootstrap, "acks": "all",
                  "linger.ms": 5})
    for i in range(2 * PARTS):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTS)
    if p.flush(60):
        h.fail("test setup: records not delivered")
    gk.raw_commit(src.bootstrap, group,
                  {(topic, i): (1 + i % 2, "g-%d" % i) for i in range(PARTS)})

    d = mt.Mirrord(destination=dst.bootstrap)
    d.create("big", {"bootstrap.servers": src.bootstrap,
                     "mirror.groups.include": group,
                     "mirror.groups.sync.interval.ms": "1000"})
    d.cli_ok("--add", "--mirror", "big", "--topic", topic)
    h.wait_for(lambda: set(d.states("big").values()) == {"MIRRORING"}, 120,
               "all %d partitions MIRRORING" % PARTS)

    def all_marked():
        m = fetched(dst.bootstrap, MARKS)
        return sum(1 for (t, _), v in m.items()
                   if t == topic and "mirror=big" in (v[2] or "")) == PARTS
    h.wait_for(all_marked, 90, "the mirror marks of all %d partitions on the "
               "destination" % PARTS)
    marks = fetched(dst.bootstrap, MARKS)
    size = sum(len(v[2] or "") + len(topic) + len(MARKS) + 40
               for (t, _), v in marks.items() if t == topic)
    h.check(size > LIMIT, "test setup: the marks (about %d bytes) fit in "
            "one batch of %d bytes" % (size, LIMIT))
    print("marks: %d partitions, about %d bytes (broker limit %d)"
          % (PARTS, size, LIMIT))

    want = {(topic, i): (1 + i % 2, "g-%d" % i) for i in range(PARTS)}

    def synced():
        g = fetched(dst.bootstrap, group)
        return {k: (v[0], v[2]) for k, v in g.items()} == want
    h.wait_for(synced, 90, "group %s synced on all %d partitions"
               % (group, PARTS))
    print("group %s: %d offsets synced" % (group, PARTS))
    out = d.log()
    h.check("OffsetCommit on the destination refused" not in out,
            "mirrord logged a refused OffsetCommit:\n%s" % "\n".join(
                x for x in out.splitlines() if "refused" in x)[-2000:])
    h.check(d.stop() == 0, "mirrord did not stop cleanly")
    print("ok")


if __name__ == "__main__":
    h.run_main(main)
