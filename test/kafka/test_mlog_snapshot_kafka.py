#!/usr/bin/env python3
"""The writer's snapshot of the replicated metadata log is written off the
event loop, on a private 1-broker Kafka 4.4: test/tools/mlogk_peer
(the real lib/mlog_kafka and lib/mstate on a libevent loop) as the writer,
with a model of 3 mirrors and 60 partitions holding translation anchors:

  * the broker is stopped (SIGSTOP) and a snapshot started the way mstate
    starts one between groups (mlog_compact_async()): the call answers at
    once, and the peer answers its commands (digest, role) while the
    broker stays stopped; an asynchronous write made meanwhile waits
    behind the snapshot; nothing completes before the broker continues;
  * SIGCONT: the snapshot completes, then the write, in that order;
  * a second snapshot the same way: the records before the first one are
    deleted (the log starts at the first snapshot's offset: a writer with
    followers keeps one snapshot interval for them);
  * a follower started on the topic then replays the newest snapshot and
    the log after it: its model is the writer's, write included.

The build before wrote the snapshot on the loop: the call answered only
once the broker continued.
"""

import os
import re
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import test_mlog_follow_kafka as mf  # noqa: E402  (Peer, log_start)

RUN = mf.RUN
TOPIC = "mlog-snap-" + RUN
STOP_S = 2.5             # under the peer's storage.kafka.timeout_ms
ANSWER_S = 1.0


def events(p, kind):
    return [e for e in p.events if e.startswith("event %s " % kind)]


def main():
    k, = h.private_kafka(1)
    B = k.bootstrap
    a = mf.Peer(B, TOPIC, "a", "writer")
    try:
        for m in ("m1", "m2", "m3"):
            a.ok("create " + m)
            for t in (m + "-a", m + "-b"):
                a.ok("add %s %s 10" % (m, t))
                for p in range(10):
                    a.ok("state %s %s %d MIRRORING test" % (m, t, p))
                    for i in range(3):
                        a.ok("anchor %s %s %d %d %d" % (m, t, p, 100 * i + p,
                                                         90 * i + p))
        before = a.digest()

        # ---- the broker stopped: the snapshot waits on the log's thread -
        h.sigstop(k.pid)
        try:
            t0 = time.monotonic()
            r = a.cmd("acompact", timeout=ANSWER_S)
            h.check(r.startswith("rc 0 started"),
                    "acompact answered %r" % r)
            snap_id = int(r.split()[3])
            h.eq(a.digest(), before, "the model while the snapshot is out")
            h.eq(a.role(), "writer", "role while the snapshot is out")
            r = a.cmd("aanchor m1 m1-a 0 1000 990", timeout=ANSWER_S)
            h.check(r.startswith("rc 0 started"), "aanchor answered %r" % r)
            write_id = int(r.split()[3])
            took = time.monotonic() - t0
            h.check(took < STOP_S, "the peer's answers took %.1f s" % took)
            time.sleep(max(0.0, STOP_S - took))
            h.eq(events(a, "compacted") + events(a, "done"), [],
                 "completions while the broker is stopped")
        finally:
            os.kill(k.pid, signal.SIGCONT)
        h.wait_for(lambda: events(a, "done"), 30,
                   "the write after the snapshot to complete")
        got = events(a, "compacted") + events(a, "done")
        h.eq([e.split()[1:4] for e in got],
             [["compacted", str(snap_id), "0"], ["done", str(write_id), "0"]],
             "completions, in order: %r" % got)

        # ---- a second snapshot: the first one's predecessors deleted ---
        r = a.cmd("acompact")
        h.check(r.startswith("rc 0 started"), "acompact answered %r" % r)
        h.wait_for(lambda: len(events(a, "compacted")) == 2, 30,
                   "the second snapshot")
        h.check(events(a, "compacted")[1].split()[3] == "0",
                "the second snapshot failed: %r" % events(a, "compacted"))
        offs = [int(x) for x in re.findall(
            r"snapshot of \d+ records at offset (\d+)", a.log())]
        h.eq(len(offs), 2, "snapshots the writer logged")
        h.wait_for(lambda: mf.log_start(B, TOPIC) == offs[0], 30,
                   "the log to start at the first snapshot (offset %d; "
                   "start %d)" % (offs[0], mf.log_start(B, TOPIC)))

        # ---- a follower replays the snapshot and the write after it ----
        want = a.digest()
        h.check(want != before, "the write after the snapshot is not in "
                "the writer's model")
        f = mf.Peer(B, TOPIC, "f", "follower")
        try:
            h.eq(f.digest(), want, "the follower's model (replayed from the "
                 "snapshot at offset %d)" % offs[1])
        finally:
            f.stop()
        print("snapshots at offsets %r, log start %d: ok"
              % (offs, mf.log_start(B, TOPIC)))
    finally:
        a.stop()


if __name__ == "__main__":
    h.run_main(main)
