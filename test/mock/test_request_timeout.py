#!/usr/bin/env python3
"""A Produce timeout touches only the partitions of that request.

The real mirrord binary between two librdkafka mock clusters of one broker
each.  Partitions 0 and 1 of topic "rt" share the destination broker, so
their Produce requests travel on one connection, which the broker answers
in order.  The destination holds the answer to the Produce of partition 0's
batch (applied at once) for longer than mirrord's Produce timeout; while it
is held, partition 1's batch goes out in the next request on the same
connection, and the source's answers are slowed down (the mock's rtt) so
that this request is sent late enough to be answered before its own
deadline once the held answer is released (the broker answers in order).

What must hold:
  * partition 0's Produce times out alone: the connection stays open, the
    late answer is discarded when it comes, partition 0 re-reads the
    destination end, finds its batch written and does not write it again;
  * partition 1's batch, in flight on that connection when the timeout
    came, is answered and taken: nothing of partition 1 is dropped or
    fetched again (mirrord_partition_discarded_bytes_total stays 0), and
    partition 1 never re-reads its destination end;
  * both partitions end with every source record exactly once, in order,
    at the source's offsets.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

T = "rt"
TIMEOUT_MS = 6000          # pipeline.request_timeout_ms; a Produce waits 1 s more
HOLD_MS = TIMEOUT_MS + 1000 + 500   # the held answer comes 0.5 s after the timeout
SOURCE_RTT_MS = 1500       # so partition 1's batch goes out >= 1.5 s after partition 0's


def put(src, part, tag, n):
    recs = [(i, b"%s-%d" % (tag, i), b"%s-value-%d" % (tag, i)) for i in range(n)]
    kw.produce(src, T, part, kw.batch(recs))
    return [(k, v) for _d, k, v in recs]


def records(cl, part):
    out = []
    for b in cl.batches(T, part):
        out.extend(kw.records_of(b["raw"]))
    return out


def caught_up(d, src, dst, want, what):
    def done():
        for part in (0, 1):
            r = d.row("m1", T, part)
            if r is not None and r["state"] == "FAILED":
                h.fail("%s: partition %d FAILED: %s" % (what, part, r.get("errorMessage")))
            dst.refresh()
            dst.close()
            if dst.offsets(T, part)[1] < len(want[part]) or r is None or \
                    r["state"] != "MIRRORING" or r["lag"] != 0:
                return False
        return True
    h.wait_for(done, 90, "%s: both partitions copied, MIRRORING, lag 0" % what)
    for part in (0, 1):
        got = records(dst, part)
        h.check([o for o, _k, _v in got] == list(range(len(got))),
                "%s: partition %d: destination offsets not contiguous: %r"
                % (what, part, [o for o, _k, _v in got]))
        h.check([(k, v) for _o, k, v in got] == want[part],
                "%s: partition %d: destination records differ from the source's "
                "(lost or duplicated):\n%r\n%r" % (what, part, got, want[part]))
        h.check([(k, v) for _o, k, v in records(src, part)] == want[part],
                "%s: the source partition %d is not what the test wrote" % (what, part))
        h.check(dst.offsets(T, part)[1] == src.offsets(T, part)[1],
                "%s: partition %d: destination end %d, source end %d"
                % (what, part, dst.offsets(T, part)[1], src.offsets(T, part)[1]))
    print("%s: %d + %d records equal at equal offsets" % (what, len(want[0]),
                                                          len(want[1])), flush=True)


def main():
    mc, SRC, DST = mt.mock_pair({T: 2})
    src, dst = kraw.Cluster(SRC), kraw.Cluster(DST)
    d = mt.Mirrord(destination=DST, extra_yaml=(
        "pipeline:\n  request_timeout_ms: %d\n" % TIMEOUT_MS))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100"})
    want = {0: [], 1: []}
    for part in (0, 1):
        want[part] += put(src, part, b"first-%d" % part, 3)
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    caught_up(d, src, dst, want, "before the fault")
    resyncs = d.log().count("re-reading the destination end")

    # The next Produce to the destination broker is applied at once and
    # answered HOLD_MS later; the source answers SOURCE_RTT_MS late.
    mc.cmd("errrtt 1 1 0 0 %d" % HOLD_MS)
    mc.cmd("rtt 0 1 %d" % SOURCE_RTT_MS)
    want[0] += put(src, 0, b"held", 2)
    h.wait_for(lambda: (mt.metric_sum(d, "mirrord_produce_inflight_batches") or 0) >= 1,
               30, "mirrord to send partition 0's batch (its answer is held)")
    t_held = time.monotonic()
    want[1] += put(src, 1, b"meanwhile", 4)
    h.wait_for(lambda: (mt.metric_sum(d, "mirrord_produce_inflight_batches") or 0) >= 2,
               30, "partition 1's batch in flight behind the held answer")
    sent_after = time.monotonic() - t_held
    h.check(sent_after < (TIMEOUT_MS + 1000) / 1000.0 - 1,
            "partition 1's batch went out %.1f s after partition 0's: too late "
            "for the held request's timeout to find it in flight" % sent_after)
    mc.cmd("rtt 0 1 0")
    want[0] += put(src, 0, b"after", 1)
    want[1] += put(src, 1, b"after", 1)
    caught_up(d, src, dst, want, "after the Produce timeout")

    log = d.log()
    p1 = mt.metric_sum(d, "mirrord_partition_discarded_bytes_total", topic=T,
                       partition="1")
    p0 = mt.metric_sum(d, "mirrord_partition_discarded_bytes_total", topic=T,
                       partition="0")
    # (a counter without any increase has no series yet)
    h.check(p1 in (None, 0), "partition 1 dropped %r bytes it had fetched (to fetch them "
            "again) although its own Produce was answered" % p1)
    h.check(p0 is not None and p0 > 0, "partition 0's uncertain batch was not "
            "counted as dropped (%r): the metric does not count" % p0)
    h.check("Produce v7 (correlation id" in log and "timed out after %d ms (its "
            "answer, if it comes, is discarded" % (TIMEOUT_MS + 1000) in log,
            "no Produce timed out: the test did not exercise the fault")
    h.check("came after its timeout: discarded" in log,
            "the held answer was not read and discarded on the open connection")
    h.check("connection closed" not in log,
            "a connection was closed:\n%s" % "\n".join(
                l for l in log.splitlines() if "connection closed" in l))
    lines = [l for l in log.splitlines() if "re-reading the destination end" in l]
    h.check(len(lines) == resyncs + 1 and "rt-0" in lines[-1],
            "want exactly one re-read of the destination end, partition 0's; "
            "got:\n%s" % "\n".join(lines))
    print("Produce timeout of partition 0: partition 1's batch on the same "
          "connection taken, %d bytes of partition 0 dropped and fetched again"
          % p0, flush=True)
    d.stop()
    src.close()
    dst.close()
    mc.close()


if __name__ == "__main__":
    h.run_main(main)
