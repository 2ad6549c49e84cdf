#!/usr/bin/env python3
"""Black-box test: mirrord trims a partition's translation map once both
logs have moved their start offsets past it, and a restart replays the trim.

Against two librdkafka mock clusters, with the real mirrord binary and the
kafka-mirrors CLI:

  * twice, retention overtakes a paused mirror (the mock keeps about 5 MB per
    partition): on resume mirrord jumps to the new source log start and
    records the jump as a translation anchor;
  * large records, copied one by one, push both the source's and the
    destination's log start past the first jump: mirrord logs that the translation map was
    trimmed below both start offsets (naming the partition and the offsets);
  * after kill -9 and a restart the partition mirrors on from the right
    offsets (the records after the restart arrive, equal to the source) and
    nothing is trimmed again: the replayed map is the trimmed one.
"""

import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]

import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

TOPIC = "trimmed"
TRIM_LINE = "translation map trimmed below source offset"
mc = d = SRC = DST = None


def produce(bootstrap, values):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "acks": "all", "message.timeout.ms": 30000,
                  "message.max.bytes": 1000000})
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda err, _m: err and errors.append(str(err)))
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        h.fail("producing to %s: %d unflushed, errors %s" % (bootstrap, left, errors[:3]))


def offsets(bootstrap):
    """(log start, log end) of the partition."""
    c = kraw.Cluster(bootstrap)
    try:
        return c.offsets(TOPIC, 0)
    finally:
        c.close()


def values(bootstrap, start, end):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "xlate-trim",
                  "enable.auto.commit": False, "check.crcs": True,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(TOPIC, 0, start)])
    out = []
    deadline = time.monotonic() + 60
    while len(out) < end - start:
        if time.monotonic() > deadline:
            h.fail("reading %s from %s: %d of %d records" % (TOPIC, bootstrap, len(out),
                                                            end - start))
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            h.fail("reading %s from %s: %s" % (TOPIC, bootstrap, m.error()))
        if m.offset() < end:
            out.append(m.value())
    c.close()
    return out


def state():
    for p in d.describe_json("m1"):
        if p["topic"] == TOPIC and p["partition"] == 0:
            return p
    return None


def wait_state(want):
    return h.wait_for(lambda: (state() or {}).get("state") == want, 60,
                      "%s-0 to be %s" % (TOPIC, want))


def wait_caught_up():
    """The destination holds everything from the source log start on."""
    def ok():
        row = state()
        src_end = offsets(SRC)[1]
        return (row is not None and row["state"] == "MIRRORING" and row["lag"] == 0
                and row["sourceOffset"] == src_end and offsets(DST)[1] == row["destinationOffset"])
    h.wait_for(ok, 90, "%s-0 to catch up (lag 0; mirrord log %s)"
               % (TOPIC, d.proc.log_path))


def big(tag, n):
    return [(("%s-%d:" % (tag, i)).encode() + bytes([65 + i % 26]) * 400000)
            for i in range(n)]


def main():
    global mc, d, SRC, DST
    mc = MockCluster(clusters=2, brokers=1,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    SRC, DST = src, dst = mc.bootstrap(0), mc.bootstrap(1)
    for c in (0, 1):
        mc.cmd("topic %d %s 1" % (c, TOPIC))
    d = mt.Mirrord(destination=dst, log_level="debug")
    d.create("m1", {"bootstrap.servers": src, "mirror.fetch.wait.max.ms": "200",
                    "mirror.fetch.max.bytes": "2097152"})
    produce(src, [b"small-%d" % i for i in range(20)])
    d.cli_ok("--add", "--mirror", "m1", "--topic", TOPIC)
    h.wait_for(lambda: offsets(dst)[1] == 20, 60, "the first 20 records mirrored")

    # Two retention jumps: two anchors.
    for rnd in (1, 2):
        d.cli_ok("--pause", "--mirror", "m1", "--topic", TOPIC)
        wait_state("PAUSED")
        dst_end = offsets(dst)[1]
        mirrored_to = offsets(src)[1]
        produce(src, big("jump%d" % rnd, 20))
        log_start, src_end = offsets(src)
        h.check(log_start > mirrored_to, "the mock did not drop the old source "
                "records (log start %d, mirrored up to %d): test setup"
                % (log_start, mirrored_to))
        d.cli_ok("--resume", "--mirror", "m1", "--topic", TOPIC)
        want = dst_end + (src_end - log_start)
        h.wait_for(lambda: offsets(dst)[1] == want, 90,
                   "round %d: %s-0 to resume at the source log start %d "
                   "(destination end %d)" % (rnd, TOPIC, log_start, want))
        print("retention jump %d: source log start %d, destination %d..%d"
              % (rnd, log_start, dst_end, want), flush=True)

    # Both logs move past the jumps (the mock may already have dropped enough
    # of the destination to trim after the second one), one record at a time
    # so that retention never overtakes mirrord again: no new anchor.
    for i, v in enumerate(big("push", 30)):
        end = offsets(dst)[1]
        produce(src, [v])
        h.wait_for(lambda: offsets(dst)[1] == end + 1, 60,
                   "push record %d to be mirrored" % i)
    h.wait_for(lambda: TRIM_LINE in d.log(), 60,
               "mirrord to log that it trimmed the translation map (log %s)"
               % d.proc.log_path)
    wait_caught_up()
    s_start, _ = offsets(src)   # log starts only move up: read them after
    d_start, d_end = offsets(dst)
    line = [ln for ln in d.log().splitlines() if TRIM_LINE in ln][-1]
    print("trimmed: %s" % line.split(" info: ", 1)[-1], flush=True)
    m = re.search(r"m1/%s-0: translation map trimmed below source offset (\d+) "
                  r"and destination offset (\d+) .*: (\d+) entries dropped" % TOPIC,
                  line)
    h.check(m is not None, "the trim line names the partition, both log starts "
            "and what went: %r" % line)
    h.check(0 < int(m.group(1)) <= s_start and 0 < int(m.group(2)) <= d_start
            and int(m.group(3)) >= 1, "trimmed below offsets the logs do not "
            "start at (source %d, destination %d): %r" % (s_start, d_start, line))

    # A restart replays the trimmed map: it mirrors on, trims nothing more.
    # kill -9, so that start-up replays the trim record itself (a clean stop
    # writes a snapshot, which test_mstate covers).
    d.kill9()
    d.start()
    wait_state("MIRRORING")
    produce(src, [b"after-%d" % i for i in range(5)])
    h.wait_for(lambda: offsets(dst)[1] == d_end + 5, 60,
               "the 5 records produced after the restart to be mirrored")
    got = values(dst, d_end, d_end + 5)
    h.check(got == [b"after-%d" % i for i in range(5)],
            "records after the restart: %r" % got)
    wait_caught_up()
    run2 = open(d.proc.log_path, "rb").read().decode("utf-8", "replace")
    again = [ln for ln in run2.splitlines() if TRIM_LINE in ln]
    h.check(not again, "the restarted mirrord trimmed again: the replayed map "
            "was not the trimmed one: %s" % again)
    h.check(d.stop() == 0, "mirrord exit status after SIGTERM")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
