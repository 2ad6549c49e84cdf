#!/usr/bin/env python3
"""make bench-mlog-kafka (part of make bench): start-up time of mirrord's
metadata log with 1 million records in the replicated backend
(storage.backend: kafka), on a private single-broker Kafka 4.4 cluster of
its own: test/bench/bench_mlog with MIRRORD_BENCH_KAFKA writes the records into
a new topic and times the replay (every record, as a writer or a follower
replays it at start) and the start after a snapshot.  Prints bench_mlog's
lines; timing lives here, never in the tests.  BENCH_MLOG_RECORDS sets the
record count (default 1000000).  BENCH_MLOG_BASELINE names the bench_mlog
of another build (e.g. the main checkout's), or several separated by
colons, to run first against the same broker, so a change is measured
before and after in one run.  BENCH_MLOG_ROUNDS=N runs every program N
times, alternating their order, so a loaded machine's drift falls on all
of them alike."""

import os
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402


def main():
    n = os.environ.get("BENCH_MLOG_RECORDS", "1000000")
    k, = h.private_kafka(1)
    env = dict(os.environ, MIRRORD_BENCH_KAFKA=k.bootstrap)
    runs = []
    for prog in os.environ.get("BENCH_MLOG_BASELINE", "").split(":"):
        if prog:
            runs.append(("baseline", prog))
    runs.append(("this build", h.build_path("test", "bench", "bench_mlog")))
    rounds = int(os.environ.get("BENCH_MLOG_ROUNDS", "1"))
    for i in range(rounds):
        order = runs if i % 2 == 0 else list(reversed(runs))
        for name, prog in order:
            print("bench_mlog round %d (%s: %s)" % (i + 1, name, prog),
                  flush=True)
            r = subprocess.run([prog, n], env=env, timeout=1800)
            if r.returncode != 0:
                h.fail("%s exited %d" % (prog, r.returncode))


if __name__ == "__main__":
    h.run_main(main)
