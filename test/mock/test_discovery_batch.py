#!/usr/bin/env python3
"""Topics found by an include pattern are added to the metadata log in one
write per discovery pass, not one each (a pattern matching thousands of
topics must not cost one fsync per topic):

  * a mirror with the include pattern many-.* and no matching topic yet;
  * 300 matching topics appear on the source (librdkafka mock);
  * all 300 are discovered and mirrored, records equal;
  * the metadata log took fewer fsyncs than topics until all of them were
    in the model: one add each would take at least one fsync per topic,
    while the adds of a pass share one (the partitions' own state changes,
    which start as soon as a topic is in, take the rest: fewer of them
    share a group the busier the machine);
  * after kill -9 all 300 are back, replayed.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

N = 300
MC = []


def fsyncs(d):
    return mt.metric_value(d, "mirrord_metadata_log_fsync_duration_seconds"
                           "_count")


def topics(d):
    return sorted({r["topic"] for r in d.describe_json("m")})


def main():
    mc, src, dst = mt.mock_pair({"other": 1})
    MC.append(mc)
    d = mt.Mirrord(destination=dst, log_level="info")
    d.create("m", {"bootstrap.servers": src,
                   "mirror.metadata.refresh.interval.ms": "1000"})
    r = d.cli_ok("--add", "--mirror", "m", "--topic", "many-.*")
    h.check("many-" in r.stdout + r.stderr or r.returncode == 0,
            "the pattern was not accepted: %r" % (r,))
    h.wait_for(lambda: fsyncs(d) > 0, 30, "the first fsyncs to be counted")
    before = fsyncs(d)
    names = ["many-%03d" % i for i in range(N)]
    for c in (1, 0):   # the destination first: discovery may act at once
        for t in names:
            mc.cmd("topic %d %s 1" % (c, t))
    for t in names[:10]:
        mt.produce_values(src, t, [b"v-%s" % t.encode()])
    h.wait_for(lambda: topics(d) == names, 60,
               "all %d topics to be discovered" % N)
    # Counted up to the moment every topic is in the model: the partitions'
    # own state changes, which start at once and take groups of their own
    # (fewer records a group the busier the machine), are not the adds.
    used = fsyncs(d) - before
    rows = mt.wait_caught_up(d, "m", 120, "the discovered topics", count=N)
    log = d.log()
    found = log.count("discovered topic many-")
    h.eq(found, N, "topics logged as discovered")
    print("%d topics discovered and caught up; the metadata log took %d "
          "fsyncs meanwhile, %d of them writes the loop waited for"
          % (len(rows), used, mt.metric_value(
              d, "mirrord_metadata_log_loop_writes_total")), flush=True)
    h.check(used < N, "%d fsyncs for %d discovered topics: the adds "
            "were not written together" % (used, N))
    for t in names[:10]:
        mt.same_batches(src, dst, t, [0])
    d.kill9()
    d.start()
    h.wait_for(lambda: topics(d) == names, 60,
               "the %d topics to be replayed after kill -9" % N)
    print("after kill -9: %d topics replayed" % N, flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: MC and MC[0].kill())
