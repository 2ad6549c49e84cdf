#!/usr/bin/env python3
"""Compacted batches re-sent after an uncertain Produce, on
real Apache Kafka 4.4.0 with a real compacted topic.

The source topic's batches (10 records each, written one Produce per batch)
overwrite half the keys of the batch before them, so once the log cleaner
has run every batch but the last has offset holes, its first record among
them (the resume position after a lost Produce is inside the batch).  mirrord re-encodes such batches and records their translation
anchors before the Produce.

  1. The destination broker (a private cluster) is stopped with SIGSTOP
     while mirrord copies the first 2,000 batches: a Produce of a batch
     with holes times out,
     mirrord re-reads the destination end once the broker is back
     (SIGCONT), and carries on whether or not that Produce landed.
  2. mirrord is killed with SIGKILL right after it recorded the anchors of a
     batch with holes and sent it, again and again (up to 6 times, at least
     twice: on a quiet machine mirrord may copy the rest of the 600 batches
     between a restart and the next poll): each restart proves the
     destination end and either finds the batch (it landed) or sends it once
     with the anchors it recorded.
Then the destination holds exactly the records a consumer of the source
sees, in order, at contiguous offsets, none twice; the partition is
MIRRORING with lag 0.
"""

import os
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "cq-" + RUN
KILLS = 6
FIRST = 2000


def put_set(src, tag, n):
    """n batches; the odd records of batch b overwrite the keys of the even
    ones of batch b-1, so the cleaner leaves batch b-1 its odd offsets."""
    for b in range(n):
        recs = []
        for i in range(10):
            key = b"%s-%d-%d" % (tag, b - 1, i - 1) if i % 2 else b"%s-%d-%d" % (tag, b, i)
            recs.append((i, key, b"%s-v-%d-%d" % (tag, b, i)))
        kw.produce(src, T, 0, kw.batch(recs, base_ts=int(time.time() * 1000)))


def holed(src, lo):
    """Batches with offset holes at or after offset lo."""
    return sum(1 for b in src.batches(T, 0, start=lo)
               if b["count"] != b["last_delta"] + 1)


def compact(src, lo, want, what):
    def ok():
        # One more record rolls the segment once segment.ms has passed, so
        # the cleaner gets a closed segment to compact.
        kw.produce(src, T, 0, kw.batch([(0, b"tick", b"t")],
                                       base_ts=int(time.time() * 1000)))
        return holed(src, lo) >= want
    h.wait_for(ok, 180, "the log cleaner to leave holes in %d batches of %s"
               % (want, what), interval=0.5)


def consumer_view(c):
    """[(key, value)] a consumer reads from the partition, in order."""
    out, pos = [], c.offsets(T, 0)[0]
    for b in c.batches(T, 0, start=pos):
        for off, k, v in kw.records_of(b["raw"]):
            if off >= pos:
                out.append((k, v))
                pos = off + 1
    return out


def anchored(d):
    """Batches whose anchors the running mirrord recorded (its own log
    only: reading every run's log made each poll slower than the copy)."""
    with open(d.proc.log_path, errors="replace") as f:
        return f.read().count("translation anchors of the batch at source offsets")


def caught_up(d):
    r = d.row("m1", T, 0)
    return r is not None and r["state"] == "MIRRORING" and r["lag"] == 0


def main():
    src_c, = h.real_kafka(2)[:1]
    dst_c, = h.private_kafka(1)
    src_c.create_compacted_topic(T, partitions=1)
    dst_c.create_topic(T, partitions=1)
    src, dst = kraw.Cluster(src_c.bootstrap), kraw.Cluster(dst_c.bootstrap)

    # Enough batches that the copy (about a thousand batches a second on a
    # quiet machine, one batch a Fetch) is still going when the destination
    # is stopped.
    put_set(src, b"one", FIRST)
    compact(src, 0, 250, "the first set")
    print("source: %d batches with holes" % holed(src, 0), flush=True)

    d = mt.Mirrord(destination=dst_c.bootstrap, extra_yaml=(
        "pipeline:\n  request_timeout_ms: 1500\n"))
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.fetch.max.bytes": "1",
                    "mirror.failed.retry.initial.backoff.ms": "200",
                    "mirror.failed.retry.max.backoff.ms": "500",
                    "mirror.failed.retry.max.attempts": "1000"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)

    # 1. SIGSTOP the destination broker in the middle of the copy.
    def copying():
        dst.refresh()
        dst.close()
        return dst.offsets(T, 0)[1] >= 30
    h.wait_for(copying, 60, "mirrord to start copying")
    h.check(dst.offsets(T, 0)[1] < len(consumer_view(src)) - 100,
            "mirrord copied nearly everything before the destination could be "
            "stopped; the test would not exercise an uncertain Produce")
    h.sigstop(dst_c.pid)
    try:
        h.wait_for(lambda: "re-reading the destination end" in d.log(), 30,
                   "a Produce to the stopped destination broker to time out")
    finally:
        os.kill(dst_c.pid, signal.SIGCONT)
    print("1. destination broker stopped mid-copy: a Produce of a batch with "
          "holes timed out", flush=True)

    # 2. A second set, compacted while the partition is paused; then kill -9
    # right after the anchors of a batch are recorded, again and again.
    d.cli_ok("--pause", "--mirror", "m1", "--topic", T)
    h.wait_for(lambda: d.row("m1", T, 0)["state"] == "PAUSED", 60, "the partition to pause")
    lo = src.offsets(T, 0)[1]
    put_set(src, b"two", 600)
    compact(src, lo, 500, "the second set")
    d.cli_ok("--resume", "--mirror", "m1", "--topic", T)
    # Up to KILLS times, while batches of the set are left: on a quiet
    # machine mirrord may copy the rest of the set between a restart and
    # the next poll, and then there is nothing left to kill it in.
    kills = 0
    for k in range(KILLS):
        n = anchored(d)
        h.wait_for(lambda: anchored(d) > n or caught_up(d), 60,
                   "kill %d: mirrord to record the anchors of a batch" % (k + 1))
        if anchored(d) <= n:
            break
        d.kill9()
        kills += 1
        d.start()
        h.wait_for(lambda: "resuming at source offset" in open(d.proc.log_path).read(),
                   60, "kill %d: mirrord to resume" % (k + 1))
    h.check(kills >= 2, "only %d kill -9 landed while batches of the second "
            "set were left" % kills)
    print("2. %d kill -9 right after anchors were recorded" % kills, flush=True)

    # Every record once, in order.
    want = consumer_view(src)

    def done():
        r = d.row("m1", T, 0)
        if r is not None and r["state"] == "FAILED":
            h.fail("the partition FAILED: %r" % r.get("errorMessage"))
        dst.refresh()
        dst.close()
        return dst.offsets(T, 0)[1] >= len(want) and r["state"] == "MIRRORING" \
            and r["lag"] == 0
    h.wait_for(done, 120, "the destination to hold %d records, MIRRORING, lag 0 "
               "(now %r)" % (len(want), d.row("m1", T, 0)))
    got = []
    for b in dst.batches(T, 0):
        got.extend(kw.records_of(b["raw"]))
    h.check([o for o, _k, _v in got] == list(range(len(got))),
            "destination offsets are not contiguous from 0")
    h.check(len(got) == len(want), "destination holds %d records, the source %d"
            % (len(got), len(want)))
    h.check([(k, v) for _o, k, v in got] == want,
            "destination records differ from the source's")
    h.check(dst.offsets(T, 0)[1] == len(want), "the destination end is past "
            "the records (a duplicate?)")
    sent_again = d.log().count("translation anchors are recorded already")
    print("compacted topic after a stopped destination and %d kill -9: %d "
          "records equal at offsets 0..%d, none twice; %d batches sent again "
          "with their recorded anchors" % (kills, len(want), len(want) - 1,
                                           sent_again), flush=True)
    d.stop()
    src.close()
    dst.close()


if __name__ == "__main__":
    h.run_main(main)
