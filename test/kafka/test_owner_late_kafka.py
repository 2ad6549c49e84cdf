#!/usr/bin/env python3
"""The deposed owner's batches land after the handover, past the new
owner's first batch, on real Apache Kafka 4.4 (the shared pair of
test/kafka/realkafka.py; SKIPs with the reason when it cannot run).

What test_ha2_kafka.py once met when a broker stopped and a partition moved
from instance c to instance a: a proved the destination end and started
copying with the producer identity c recorded (no new epoch), but c was
still copying (it had not applied the part-owner record yet) and its
Produce requests landed after a had read the end, more than the broker's
five remembered batches ahead of a's first batch.  a's batch got
OUT_OF_ORDER_SEQUENCE_NUMBER, a bumped the epoch, waited the fence delay
(a minute at the default request timeout), and re-read an end that was
none of its own batch boundaries.  That end is the end of mirrord's own
batches (the same identity, numbered by offset): the new owner must read
and prove it at once, before changing identity, and go on after it with
the same identity; not go FAILED with "another producer writes to the
destination partition", and not stall for the fence delay.

Made deterministic with test/tools/owner_twin (two data planes in one process,
test_owner_handoff_kafka.py): A copies a topic of one partition; B takes
it and proves the end; the process is SIGSTOPped; the source grows by
eight batches and the deposed owner's late Produce of each is sent by hand
with the recorded identity (they land at the source's offsets); SIGCONT.
B then fetches those batches and sends the first at the old end: the
broker refuses it as out of order.  Checked: B read the end before
changing identity, proved A's late batches and went on after them with the
same identity (no new epoch, no fence delay), the partition is MIRRORING
(never FAILED), and the destination equals the source batch for batch (no
record lost or duplicated).
"""

import os
import signal
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_owner_handoff_kafka as oh  # noqa: E402  (Twin)
import test_pids_kafka as pk  # noqa: E402  (produce_as)

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
LATE = 8     # more than the 5 batches a broker remembers per producer


class Source:
    """One record per batch into partition 0 of the source."""

    def __init__(self, bootstrap, topic):
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                           "acks": "all"})
        self.topic = topic
        self.n = 0

    def put(self, count):
        for _ in range(count):
            errs = []
            self.p.produce(self.topic, partition=0, key=b"k%d" % self.n,
                           value=b"late-%s-%d" % (RUN.encode(), self.n),
                           on_delivery=lambda e, _m: e and errs.append(str(e)))
            self.n += 1
            h.check(self.p.flush(30) == 0 and not errs,
                    "source produce: %s" % errs)


def main():
    src, dst = h.real_kafka(2)
    topic = "late-" + RUN
    for cl in (src, dst):
        cl.create_topic(topic, partitions=1)
    # The default request timeout: a fence delay after the sequence error
    # would be 2 x (30 s + 1 s), longer than the waits below.
    d = mt.Mirrord(destination=dst.bootstrap, start=False, name="twin",
                   log_level="info")
    twin = oh.Twin(d.config_path, "east", src.bootstrap, topic, 1)
    try:
        run(twin, src, dst, topic)
    finally:
        if twin.p.poll() is None:
            os.kill(twin.p.pid, signal.SIGCONT)
        twin.close()


def run(twin, src, dst, topic):
    load = Source(src.bootstrap, topic)

    # 1. A copies 20 batches; 2. B takes the partition and proves the end
    # (A's batches): it resumes at source offset 20 and waits for more.
    load.put(20)
    end = 20
    pid, epoch, seq_base = twin.a_then_b(src.bootstrap, dst.bootstrap, topic,
                                         end)

    # 3. B frozen; the source grows by LATE batches and the deposed owner's
    # Produce of each lands at the destination (by hand, A's identity).
    os.kill(twin.p.pid, signal.SIGSTOP)
    try:
        load.put(LATE)
        sc, dc = kraw.Cluster(src.bootstrap), kraw.Cluster(dst.bootstrap)
        try:
            late = sc.batches(topic, 0, end)
            h.check(len(late) == LATE and all(b["count"] == 1 for b in late),
                    "the source's new batches: %s"
                    % [(b["base_offset"], b["count"]) for b in late])
            for b in late:
                err, base = pk.produce_as(dc, topic, b["raw"], pid, epoch,
                                          b["base_offset"] - seq_base)
                h.check(err == 0 and base == b["base_offset"],
                        "the late Produce of the batch at %d: error %d at %d"
                        % (b["base_offset"], err, base))
        finally:
            sc.close()
            dc.close()
    finally:
        os.kill(twin.p.pid, signal.SIGCONT)
    late_end = end + LATE
    h.check(mt.end_offsets(dst.bootstrap, topic, 1)[0] == late_end,
            "destination end after the late batches")

    # 4. B's first batch (at 20) is out of order; B reads the end at once,
    # proves the late batches as mirrord's and goes on after them with the
    # same identity.
    h.wait_for(lambda: "answered OUT_OF_ORDER_SEQUENCE_NUMBER" in twin.log_text(),
               60, "B's Produce at %d to be refused as out of order (log %s)"
               % (end, twin.log_path))
    again = "resuming at source offset %d (destination end %d)" % (
        late_end, late_end)
    h.wait_for(lambda: twin.part0() is not None and
               again in twin.log_text(), 45, "B to prove the late batches "
               "and resume after them without a fence delay (log %s)"
               % twin.log_path)
    load.put(10)
    h.wait_for(lambda: twin.part0() is not None and
               mt.end_offsets(dst.bootstrap, topic, 1) ==
               mt.end_offsets(src.bootstrap, topic, 1), 120,
               "the destination to reach the source's end (log %s)"
               % twin.log_path)
    part = twin.part0()
    h.check(part["state"] == "MIRRORING", "state %s" % part["state"])
    # A FAILED retried at once may be missed by the polls above: the log
    # says whether the partition ever went FAILED.
    failed = [ln for ln in twin.log_text().splitlines() if "-> FAILED" in ln]
    h.check(not failed, "the partition went FAILED: %s" % failed[:2])
    text = twin.log_text()
    h.check("previous owner (same producer identity)" in text,
            "B did not take the end past its batches for the previous "
            "owner's (log %s)" % twin.log_path)
    h.check("reading the end before changing identity" in text and
            "may still be in a broker" not in text and
            "epoch %d from the destination end on" % (epoch + 1) not in text,
            "B changed identity or waited the fence delay (log %s)"
            % twin.log_path)
    h.check(part["identity"] == (pid, epoch, seq_base),
            "B's identity after the late batches: %s, expected A's %s"
            % (part["identity"], (pid, epoch, seq_base)))
    total = mt.same_batches(src.bootstrap, dst.bootstrap, topic, [0])
    h.check(total == load.n, "%d records at the destination, %d produced"
            % (total, load.n))
    print("PASS: B's batch at %d refused as out of order after %d late "
          "batches of A; B proved them at once and went on from %d with "
          "the same identity; %d records copied exactly once"
          % (end, LATE, late_end, total), flush=True)


if __name__ == "__main__":
    h.run_main(main)
