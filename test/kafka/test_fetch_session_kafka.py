#!/usr/bin/env python3
"""Fetch sessions (KIP-227) against real Apache Kafka 4.4.0 (the test tier
of test/kafka/realkafka.py; SKIPs with the reason when it cannot run).

A private source cluster of two brokers (node 1 also the controller, node
2 a broker alone, so it can be restarted), the shared destination.  A
writer keeps writing to every source partition the whole time while the
session is churned:

  * the mirror starts with two topics (partitions on both brokers): each
    broker opens a session and the Fetches become incremental
    (mirrord_fetch_requests_total{result="incremental"} grows);
  * a third topic is added while mirroring (partitions join the session);
  * a topic is paused (its partitions leave the session: forgotten) and
    resumed (they join again at the position they stopped at);
  * broker 2 is restarted (its session is gone: the Fetch in flight fails,
    the next one is full and opens a new session, then incremental again).

Last a transaction is committed to an idle topic: the commit markers end
its partitions, mirrord skips them, and the lag must still reach 0 though
the broker leaves those partitions out of its answers from then on
(nothing new for them).

Then the writer stops and every partition of the destination holds the
source's records at the same offsets with the same keys, values, headers
and timestamps: nothing lost, nothing twice, whatever the broker left out
of its incremental answers.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
# topic -> {partition: [replica nodes]}
LAYOUT = {
    "fs-a-" + RUN: {0: [2], 1: [2], 2: [1], 3: [2], 4: [1], 5: [2]},
    "fs-b-" + RUN: {0: [1], 1: [2]},
    "fs-c-" + RUN: {0: [2], 1: [1], 2: [2], 3: [1]},
}
A, B, C = sorted(LAYOUT)
# Written once, in a committed transaction: its last offset is the marker.
T = "fs-t-" + RUN


def layout():
    """{topic: [partition, ...]} of every topic the writer writes to."""
    return {t: sorted(parts) for t, parts in LAYOUT.items()}


def fetches(d, kind):
    return mt.metric_value(d, "mirrord_fetch_requests_total", mirror="m", result=kind)


def grows(d, kind, by, what):
    start = fetches(d, kind)
    h.wait_for(lambda: fetches(d, kind) >= start + by, 120,
               "%s: %d more %s Fetches (from %d, now %d)"
               % (what, by, kind, start, fetches(d, kind)))


def ends(bootstrap):
    return mt.partition_ends(bootstrap, layout())


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    dst, = h.real_kafka(1)
    src, = h.private_kafka(1, "plaintext", brokers=2)
    h.check(src.broker_ids == [1, 2], "2 brokers: %r" % src.broker_ids)
    for t, assignment in LAYOUT.items():
        src.create_topic(t, assignment=assignment)
        dst.create_topic(t, partitions=len(assignment))
    src.create_topic(T, assignment={0: [1], 1: [2]})
    dst.create_topic(T, partitions=2)

    writer = mt.LayoutWriter(src.bootstrap, layout(), pause=0.02)
    writer.start()
    d = mt.Mirrord(destination=dst.bootstrap)
    d.create("m", {"bootstrap.servers": src.bootstrap,
                   "mirror.fetch.wait.max.ms": "100"})
    d.cli_ok("--add", "--mirror", "m", "--topic", A)
    d.cli_ok("--add", "--mirror", "m", "--topic", B)
    d.cli_ok("--add", "--mirror", "m", "--topic", T)
    h.wait_for(lambda: set(d.states("m").values()) == {"MIRRORING"}, 120,
               "every partition MIRRORING (now %r)" % d.states("m"))

    # Sessions open (one full Fetch per broker at least) and the Fetches
    # become incremental.
    grows(d, "incremental", 20, "sessions with both brokers")
    h.check(fetches(d, "full") >= 2, "full Fetches: %d" % fetches(d, "full"))

    # Partitions added while mirroring.
    d.cli_ok("--add", "--mirror", "m", "--topic", C)
    h.wait_for(lambda: sum(1 for (t, _), s in d.states("m").items()
                           if t == C and s == "MIRRORING") == len(LAYOUT[C]),
               120, "%s MIRRORING (now %r)" % (C, d.states("m")))
    grows(d, "incremental", 20, "after adding %s" % C)

    # A paused topic leaves the sessions; resumed, it joins again.
    d.cli_ok("--pause", "--mirror", "m", "--topic", A)
    h.wait_for(lambda: all(s == "PAUSED" for (t, _), s in d.states("m").items()
                           if t == A), 120, "%s PAUSED (now %r)" % (A, d.states("m")))
    grows(d, "incremental", 20, "with %s paused" % A)
    d.cli_ok("--resume", "--mirror", "m", "--topic", A)
    h.wait_for(lambda: all(s == "MIRRORING" for (t, _), s in d.states("m").items()
                           if t == A), 120, "%s MIRRORING again (now %r)"
               % (A, d.states("m")))
    grows(d, "incremental", 20, "after resuming %s" % A)

    # Broker 2 restarted mid-session: a full Fetch opens a new session.
    full = fetches(d, "full")
    src.stop_broker(2)
    src.start_broker(2)
    h.wait_for(lambda: fetches(d, "full") > full, 120,
               "a full Fetch after broker 2's restart (full Fetches: %d)"
               % fetches(d, "full"))
    grows(d, "incremental", 20, "after broker 2's restart")

    # A committed transaction on the idle topic: lag 0 after the markers.
    tx = Producer({"bootstrap.servers": src.bootstrap,
                   "transactional.id": "fs-tx-" + RUN})
    tx.init_transactions(60)
    tx.begin_transaction()
    for part in (0, 1):
        for i in range(5):
            tx.produce(T, value=b"tx-%d-%d" % (part, i), partition=part)
    tx.commit_transaction(60)
    c = kraw.Cluster(src.bootstrap)
    h.wait_for(lambda: [c.offsets(T, p)[1] for p in (0, 1)] == [6, 6], 60,
               "%s to end at 6 after the commit (5 records and the marker): %r"
               % (T, [c.offsets(T, p)[1] for p in (0, 1)]))
    c.close()

    mt.wait_caught_up(d, "m", 60, "%s MIRRORING with lag 0 after the commit "
                      "markers" % T, topic=T, count=2)
    mt.check_same_records(src.bootstrap, dst.bootstrap, {(T, 0): 5, (T, 1): 5},
                          "fs-" + RUN)

    writer.stop()
    want = ends(src.bootstrap)
    h.check(all(e > 0 for e in want.values()), "source ends %r" % want)
    h.wait_for(lambda: ends(dst.bootstrap) == want, 180,
               "the destination ends %r to be the source's %r"
               % (ends(dst.bootstrap), want))
    mt.check_same_records(src.bootstrap, dst.bootstrap, want, "fs-" + RUN)
    inc, full = fetches(d, "incremental"), fetches(d, "full")
    byts = mt.metric_value(d, "mirrord_fetch_request_bytes_total", mirror="m")
    print("Fetches: %d full, %d incremental, %.0f request bytes in all "
          "(%.0f a request); %d records over %d partitions, equal"
          % (full, inc, byts, byts / max(inc + full, 1),
             sum(want.values()), len(want)))
    h.check(inc > full, "more incremental Fetches than full ones: %d, %d"
            % (inc, full))
    d.stop()
    print("PASS")


if __name__ == "__main__":
    main()
