#!/usr/bin/env python3
"""The failover report on real Apache Kafka (the shared pair of
test/kafka/realkafka.py; SKIPs with the reason when the tier cannot run):

  * a topic of two partitions mirrored and caught up, then paused; more
    records are written to partition 0 of the source only;
  * kafka-mirrors --remove --wait stops the topic, waits for STOPPED and
    prints the failover report: per partition the last mirrored offset
    and epoch, the source high watermark at the stop, the source offsets
    not copied (25 on partition 0, 0 on partition 1) and the lag in time;
  * --describe --json carries the same numbers (failoverSourceOffset,
    failoverLag, failoverLagMs) and the table's REASON says it in words;
  * the destination holds exactly what was copied, byte for byte;
  * the report survives a restart of mirrord (metadata log, snapshot at
    clean shutdown) and is gone once the topic is added again.
"""

import json
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)


def read(bootstrap, topic, partition):
    """Every record of the partition as (offset, key, value, timestamp)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fo-" + RUN,
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition),
                                         timeout=30)
        out = []
        if hi <= lo:
            return out
        c.assign([TopicPartition(topic, partition, lo)])
        while not out or out[-1][0] < hi - 1:
            m = c.poll(10)
            if m is None:
                h.fail("%s-%d: no record after offset %r (end %d)"
                       % (topic, partition, out[-1][0] if out else None, hi))
            if m.error():
                continue
            out.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return out
    finally:
        c.close()


def rows(d, topic):
    return {p["partition"]: p for p in d.describe_json("fo")
            if p["topic"] == topic}


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, dst = h.real_kafka(2)
    topic = "fo-" + RUN
    src.create_topic(topic, partitions=2)
    d = mt.Mirrord(destination=dst.bootstrap)
    d.create("fo", {"bootstrap.servers": src.bootstrap,
                    "mirror.fetch.wait.max.ms": "100"})
    mt.produce_tagged(src.bootstrap, topic, 0, 40, "a", keyed=True)
    mt.produce_tagged(src.bootstrap, topic, 1, 30, "b", keyed=True)
    d.cli_ok("--add", "--mirror", "fo", "--topic", topic)
    mt.wait_caught_up(d, "fo", 120, "%s caught up" % topic, topic=topic, count=2)

    # Paused, then 25 more records on partition 0 of the source only.
    d.cli_ok("--pause", "--mirror", "fo", "--topic", topic)
    h.wait_for(lambda: all(p["state"] == "PAUSED"
                           for p in rows(d, topic).values()), 60,
               "%s PAUSED" % topic)
    mt.produce_tagged(src.bootstrap, topic, 0, 25, "late", keyed=True)

    # Failover: --remove --wait prints the report once STOPPED.
    # Exit status 5: source offsets are known not copied.
    r = d.cli_rc(5, "--remove", "--mirror", "fo", "--topic", topic,
                 "--wait", "60")
    print(r.stdout, r.stderr, flush=True)
    h.check("25 source offset(s) were not copied before the stop (exit "
            "status 5)" in r.stderr, "--remove --wait says why it exits 5: "
            "%r" % r.stderr)
    lines = r.stdout.rstrip("\n").split("\n")
    eq(lines[0], "Stopped mirroring for 1 topic(s) in mirror fo: [%s]"
       % topic, "--remove's first line")
    eq(lines[1], "Failover report of mirror fo: 2 partition(s) STOPPED, "
       "25 source offset(s) not copied", "the report's summary line")
    eq(lines[2].split(), ["TOPIC", "PARTITION", "LAST-MIRRORED-OFFSET",
                          "EPOCH", "SOURCE-HIGH-WATERMARK", "NOT-COPIED",
                          "LAG-TIME", "SOURCE-AGE"], "the report's header")
    cells = [l.split() for l in lines[3:]]
    eq(len(cells), 2, "one report row per partition")
    eq(cells[0][:2] + [cells[0][2]] + cells[0][4:6],
       [topic, "0", "39", "65", "25"], "partition 0's report")
    eq(cells[1][:3] + cells[1][4:7], [topic, "1", "29", "30", "0", "0s"],
       "partition 1's report")
    h.check(cells[0][6] not in ("-", "0s"),
            "partition 0's LAG-TIME is a duration: %r" % cells[0][6])

    def check_describe(what):
        by = rows(d, topic)
        for p, hw, lag, last in ((0, 65, 25, 39), (1, 30, 0, 29)):
            x = by[p]
            eq((x["state"], x["failoverSourceOffset"], x["failoverLag"],
                x["lastMirroredOffset"]), ("STOPPED", hw, lag, last),
               "%s: %s-%d's failover report" % (what, topic, p))
            eq(x["topicState"], "STOPPED", what + ": topicState")
        h.check(by[0]["failoverLagMs"] > 0, "%s: %s-0 failoverLagMs %r"
                % (what, topic, by[0]["failoverLagMs"]))
        eq(by[1]["failoverLagMs"], 0, what + ": %s-1 failoverLagMs" % topic)
        eq(by[0]["lastMirroredEpoch"], by[1]["lastMirroredEpoch"],
           what + ": one leader epoch on a one-broker source")
        out = d.cli_ok("--describe", "--mirror", "fo").stdout
        print(out, flush=True)
        reason = {}
        for l in out.splitlines()[1:]:
            c = l.split(None, 8)
            if c[1] == topic:
                reason[int(c[2])] = c[8]
                if what == "after --remove":
                    # The live numbers agree: the source end, the
                    # destination end, the lag between them.
                    want = {0: ["65", "40", "25"], 1: ["30", "30", "0"]}
                    eq(c[3:6], want[int(c[2])], "%s: %s-%s SOURCE-OFFSET, "
                       "DESTINATION-OFFSET, LAG" % (what, topic, c[2]))
        h.check(reason[0].startswith("stopped with 25 source offsets not "
                                     "copied: source high watermark 65, last "
                                     "mirrored offset 39 (epoch %d), lag "
                                     % by[0]["lastMirroredEpoch"]),
                "%s: partition 0's REASON: %r" % (what, reason[0]))
        eq(reason[1], "stopped caught up: source high watermark 30, last "
           "mirrored offset 29 (epoch %d)" % by[1]["lastMirroredEpoch"],
           what + ": partition 1's REASON")
    check_describe("after --remove")

    # The destination holds exactly what was copied.
    for p, n in ((0, 40), (1, 30)):
        s, t = read(src.bootstrap, topic, p), read(dst.bootstrap, topic, p)
        eq(len(t), n, "%s-%d destination records" % (topic, p))
        eq(t, s[:n], "%s-%d destination = the source's first %d records"
           % (topic, p, n))

    # A restart (clean shutdown snapshots the metadata log) keeps it.
    d.stop()
    d.start()
    check_describe("after a restart")

    # Added again: mirroring resumes and the report is gone.
    d.cli_ok("--add", "--mirror", "fo", "--topic", topic)
    by = mt.wait_caught_up(d, "fo", 120, "%s mirroring again" % topic,
                           topic=topic)
    for x in by:
        p = x["partition"]
        eq((x["failoverSourceOffset"], x["failoverLag"], x["failoverLagMs"]),
           (-1, -1, -1), "%s-%d's report after it was added again"
           % (topic, p))
    eq(len(read(dst.bootstrap, topic, 0)), 65, "the 25 records copied after")
    d.stop()
    print("PASS: the failover report: --remove --wait, --describe, a restart",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
