#!/usr/bin/env python3
"""Failback onto the old primary on real Apache Kafka (the shared pair of
test/kafka/realkafka.py, A and B; SKIPs with the reason when the tier
cannot run):

  * mirrord D1 mirrors topic T (2 partitions) from A to B; partition 1 is
    paused and 7 more records are written to it on A (never mirrored);
    failover: D1 --remove --wait (STOPPED at 29 and 19); D1's marks on B
    say where each partition stopped;
  * B is the primary now: records are produced to T on B;
  * failback, mirrord D2 mirrors T from B back onto A:
      - partition 0 (A ends where the mirror stopped, same leader epoch):
        no divergence, D2 copies B's new records after it, and A's
        partition equals B's record for record;
      - partition 1 (A holds 7 offsets after the stop): FAILED, never
        retried, the reason naming the divergence at offset 20 and the
        offsets 20..26; A is left untouched;
  * --recover --resolution preserve: A's 7 records are copied to the topic
    T.diverged-<epoch> (partition 1, keys and values equal), stay where
    they are too (Kafka cannot cut a partition's tail), and B's new records
    are copied after them; nothing dropped.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_failover_kafka as fk  # noqa: E402  (produce, read; SKIPs without confluent-kafka)
import test_loops_kafka as lk  # noqa: E402  (marks)

RUN = "%d" % (os.getpid() % 100000)


def vals(recs):
    return [(o, k, v) for o, k, v, _ts in recs]


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    A, B = h.real_kafka(2)
    topic = "fb-" + RUN
    A.create_topic(topic, partitions=2)
    mt.produce_tagged(A.bootstrap, topic, 0, 30, "a0", keyed=True)
    mt.produce_tagged(A.bootstrap, topic, 1, 20, "a1", keyed=True)

    d1 = mt.Mirrord(destination=B.bootstrap, name="d1")
    d1.create("ab", {"bootstrap.servers": A.bootstrap,
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.groups.sync.interval.ms": "300"})
    d1.cli_ok("--add", "--mirror", "ab", "--topic", topic)

    mt.wait_caught_up(d1, "ab", 120, "%s mirrored to B" % topic, count=2)
    d1.cli_ok("--pause", "--mirror", "ab", "--topic", topic)
    h.wait_for(lambda: all(p["state"] == "PAUSED"
                           for p in d1.describe_json("ab")), 60, "PAUSED")
    mt.produce_tagged(A.bootstrap, topic, 1, 7, "late", keyed=True)  # A1 offsets 20..26
    # Exit status 5: the 7 records of partition 1 were not copied.
    r = d1.cli_rc(5, "--remove", "--mirror", "ab", "--topic", topic,
                  "--wait", "60")
    print(r.stdout, flush=True)
    a_id = lk.cluster_id(d1, "ab")
    by = {p["partition"]: p for p in d1.describe_json("ab")}
    e0, e1 = by[0]["lastMirroredEpoch"], by[1]["lastMirroredEpoch"]
    eq((by[0]["lastMirroredOffset"], by[1]["lastMirroredOffset"]), (29, 19),
       "where D1 stopped")
    want = {0: "mirrord-mirror v1 state=stopped source=%s mirror=ab last=29 "
               "epoch=%d ident=1 dst=30" % (a_id, e0),
            1: "mirrord-mirror v1 state=stopped source=%s mirror=ab last=19 "
               "epoch=%d ident=1 dst=20" % (a_id, e1)}
    h.wait_for(lambda: all(lk.marks(B.bootstrap).get((topic, p)) == w
                           for p, w in want.items()), 60,
               "D1's stop marks on B (now %r)" % lk.marks(B.bootstrap))
    d1.stop()

    # B is the primary: new records there.
    mt.produce_tagged(B.bootstrap, topic, 0, 5, "b0", keyed=True)  # B0 offsets 30..34
    mt.produce_tagged(B.bootstrap, topic, 1, 4, "b1", keyed=True)  # B1 offsets 20..23
    a1_before = fk.read(A.bootstrap, topic, 1)
    eq(len(a1_before), 27, "A1 before the failback")

    # Failback: D2 mirrors B back onto A.
    d2 = mt.Mirrord(destination=A.bootstrap, name="d2")
    d2.create("ba", {"bootstrap.servers": B.bootstrap,
                     "mirror.fetch.wait.max.ms": "100"})
    d2.cli_ok("--add", "--mirror", "ba", "--topic", topic)

    def settled():
        r = {p["partition"]: p for p in d2.describe_json("ba")}
        if len(r) != 2 or r[1]["state"] != "FAILED" or \
                r[0]["state"] != "MIRRORING" or r[0]["lag"] != 0:
            return None
        return r
    by = h.wait_for(settled, 120, "partition 0 copying, partition 1 FAILED "
                    "(now %r)" % d2.describe_json("ba"))
    reason = by[1]["errorMessage"]
    print("partition 1: %s" % reason, flush=True)
    eq(reason.split(":")[0], "failback divergence at offset 20",
       "partition 1's reason")
    h.check("holds offsets 20..26 (7 offsets) written after mirror ab "
            "stopped copying it at offset 19 (epoch %d)" % e1 in reason,
            "the reason names the divergent offsets: %r" % reason)
    aside = "%s.diverged-%d" % (topic, e1)
    h.check("--resolution preserve also copies the 7 committed records to "
            "topic %s first" % aside in reason,
            "the reason names the aside topic: %r" % reason)
    # Partition 0: A equals B, record for record.
    a0, b0 = fk.read(A.bootstrap, topic, 0), fk.read(B.bootstrap, topic, 0)
    eq(len(a0), 35, "A0 records after the failback")
    eq(vals(a0), vals(b0), "A0 = B0 (offsets, keys, values)")
    # Partition 1: untouched, and stays FAILED.
    eq(fk.read(A.bootstrap, topic, 1), a1_before, "A1 untouched while FAILED")
    h.check("failback divergence" in d2.cli_ok("--describe", "--failed")
            .stdout, "--describe --failed shows it")

    # A plain retry is refused: the divergence needs a decision.
    r = d2.cli("--recover", "--mirror", "ba", "--topic", topic)
    h.check(r.returncode == 1 and "needs an operator decision" in r.stderr
            and "skip-over" in r.stderr,
            "--recover without a resolution: %r" % r.stderr)
    # The operator's decision: preserve A's tail aside, keep it in place,
    # copy B's records after it.
    d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
              "--resolution", "preserve")
    mt.wait_caught_up(d2, "ba", 120, "partition 1 copying after the decision")
    a1 = fk.read(A.bootstrap, topic, 1)
    b1 = fk.read(B.bootstrap, topic, 1)
    eq(vals(a1[:27]), vals(a1_before), "A1's own 27 records kept")
    eq([(k, v) for _o, k, v in vals(a1[27:])],
       [(k, v) for _o, k, v in vals(b1[20:])],
       "B1's new records after A1's tail")
    kept = fk.read(A.bootstrap, aside, 1)
    eq([(k, v, ts) for _o, k, v, ts in kept],
       [(k, v, ts) for _o, k, v, ts in a1_before[20:]],
       "the divergent records preserved in %s partition 1" % aside)
    h.check("preserved in topic %s partition 1 (7 records)" % aside
            in d2.log(), "the log names the aside topic")
    d2.stop()
    print("PASS: failback: clean partition resumed, divergence found at "
          "offset 20, kept, and copied after on decision", flush=True)


if __name__ == "__main__":
    h.run_main(main)
