#!/usr/bin/env python3
"""A sequence error after a handover that is NOT the deposed owner's doing:
the new owner reads the end first, finds it where its refused batch was,
and only then changes identity (librdkafka mock clusters: the refusal is
injected).

Multi-instance mode hands a partition over with the producer identity the
partition recorded (no epoch bump).  When the new owner's Produce is
refused as out of order, the deposed owner's late batches (the same
identity) may have moved the end: test_owner_late_kafka.py proves those at
once and keeps the identity.  But if the end did not move from the refused
batch, the broker's state for the identity simply is not mirrord's, and the
new owner must do what a single instance does: a new epoch of the same
producer id from that end, after the fence delay, nothing lost or written
twice.  This test makes that case with test/tools/owner_twin (two data planes in
one process) on mock clusters: A copies, B takes over and proves the end,
the destination's next Produce is answered OUT_OF_ORDER_SEQUENCE_NUMBER
(nothing appended), and the source grows.

Checked: B read the end before changing identity, the end had not moved,
B then took epoch + 1 of the same producer id from that end, the
partition is MIRRORING (never FAILED), and the destination equals the
source batch for batch.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_owner_handoff_kafka as oh  # noqa: E402  (Twin)

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

TOPIC = "seqerr"
OUT_OF_ORDER = 45
PRODUCE = 0


def put(bootstrap, n, tag):
    """n records into partition 0 of the source, a batch every 5."""
    errs = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "acks": "all"})
    for i in range(n):
        p.produce(TOPIC, partition=0, key=b"k%d" % i,
                  value=("%s-%d" % (tag, i)).encode(),
                  on_delivery=lambda e, _m: e and errs.append(str(e)))
        if i % 5 == 4:
            p.flush(30)
    h.check(p.flush(30) == 0 and not errs, "source produce: %s" % errs)


def main():
    mc, src, dst = mt.mock_pair({TOPIC: 1})
    # A short request timeout keeps the fence delay (2 x (timeout + 1 s))
    # short.
    d = mt.Mirrord(destination=dst, start=False, name="twin",
                   log_level="info",
                   extra_yaml="pipeline:\n  request_timeout_ms: 1500\n")
    twin = oh.Twin(d.config_path, "east", src, TOPIC, 1)
    try:
        run(twin, mc, src, dst)
    finally:
        twin.close()


def run(twin, mc, src, dst):
    # 1. A copies 20 records; 2. B takes the partition and proves the end.
    put(src, 20, "a")
    end = 20
    pid, epoch, _ = twin.a_then_b(src, dst, TOPIC, end)

    # 3. B's next Produce is refused as out of order, nothing appended.
    mc.cmd("errrtt 1 1 %d %d 0" % (PRODUCE, OUT_OF_ORDER))
    put(src, 10, "b")
    h.wait_for(lambda: "answered OUT_OF_ORDER_SEQUENCE_NUMBER" in
               twin.log_text(), 60, "B's Produce at %d to be refused (log %s)"
               % (end, twin.log_path))

    # 4. The end did not move: epoch + 1 from it, after the fence delay.
    want = (pid, epoch + 1, end)
    h.wait_for(lambda: twin.part0()["identity"] == want, 60,
               "B to write as producer id %d epoch %d from offset %d (log %s)"
               % (want + (twin.log_path,)))
    h.wait_for(lambda: mt.end_offsets(dst, TOPIC, 1) ==
               mt.end_offsets(src, TOPIC, 1), 60,
               "the destination to reach the source's end (log %s)"
               % twin.log_path)
    part = twin.part0()
    h.check(part["state"] == "MIRRORING", "state %s" % part["state"])
    text = twin.log_text()
    probe = text.find("reading the end before changing identity")
    bump = text.find("epoch %d from the destination end on" % (epoch + 1))
    h.check(0 <= probe < bump, "B must read the end before changing "
            "identity (log %s)" % twin.log_path)
    h.check("may still be in a broker" in text[bump:],
            "B must wait the fence delay after changing identity (log %s)"
            % twin.log_path)
    h.check("previous owner (same producer identity)" not in text,
            "the end had not moved; nothing of the previous owner's to "
            "prove (log %s)" % twin.log_path)
    failed = [ln for ln in text.splitlines() if "-> FAILED" in ln]
    h.check(not failed, "the partition went FAILED: %s" % failed[:2])
    total = mt.same_batches(src, dst, TOPIC, [0])
    h.check(total == 30, "%d records at the destination, 30 produced" % total)
    print("PASS: B's Produce at %d refused as out of order with the end "
          "unmoved; B read the end, then went on as epoch %d of producer id "
          "%d from %d; %d records copied exactly once"
          % (end, epoch + 1, pid, end, total), flush=True)


if __name__ == "__main__":
    h.run_main(main)
