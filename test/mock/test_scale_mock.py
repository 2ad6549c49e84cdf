#!/usr/bin/env python3
"""Thousands of partitions in one mirror (librdkafka mock clusters).

2,000 partitions (10 topics x 200) on a 3-broker source, added to one
mirror by one pattern: every partition ends MIRRORING with lag 0, every
destination partition ends where its source partition ends, and
DescribeMirrors lists each partition exactly once.  At this count the
pipeline paces its sweeps over the partitions (pl_kick), looks partitions
up through its mpart map and cluster topics by binary search: what this
checks is that nothing is lost or left behind by those.  The metadata log
runs without fsync (storage.fsync false) so the test stays short on a
loaded machine; make bench-scale measures the real thing.
"""

import json
import os
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

TOPICS, PER = 10, 200
mc = None


def main():
    global mc
    topics = ["many-%d" % i for i in range(TOPICS)]
    mc = MockCluster(clusters=2, brokers=3,
                     log_path=os.path.join(h.test_dir(), "mock.log"), timeout=60)
    for c in (0, 1):
        for t in topics:
            mc.cmd("topic %d %s %d random" % (c, t, PER), timeout=60)
    src, dst = mc.bootstrap(0), mc.bootstrap(1)
    n = TOPICS * PER
    # About 1.3 records a partition: some partitions hold one, some two.
    gen = subprocess.run([h.build_path("test", "bench", "corpusgen"), "-b", src,
                          "-t", ",".join(topics), "-p", str(PER),
                          "-m", "%.3f" % (n * 1.3 * 330 / 1048576.0), "-z", "lz4"],
                         capture_output=True, text=True, timeout=120)
    if gen.returncode != 0:
        h.fail("corpusgen: %s" % gen.stderr[-2000:])
    corpus = json.loads(gen.stdout.strip().splitlines()[-1])
    s = kraw.Cluster(src)
    want = {(t, p): s.offsets(t, p)[1] for t in topics for p in range(PER)}
    s.close()
    h.check(sum(want.values()) == corpus["messages"],
            "source holds %d records, corpusgen wrote %d"
            % (sum(want.values()), corpus["messages"]))
    h.check(min(want.values()) >= 1, "every source partition has a record")

    d = mt.Mirrord(destination=dst, log_level="info", start=False)
    with open(d.config_path) as f:
        cfg = f.read()
    with open(d.config_path, "w") as f:
        f.write(cfg.replace("storage:\n", "storage:\n  fsync: false\n", 1))
    d.start()
    d.create("many", {"bootstrap.servers": src, "mirror.fetch.wait.max.ms": "200"})
    d.cli_ok("--add", "--mirror", "many", "--topic", "many-.*")

    parts = mt.wait_caught_up(d, "many", 240, "all %d partitions MIRRORING "
                              "with lag 0 (log %s)" % (n, d.proc.log_path),
                              count=n, interval=1.0)
    keys = [(p["topic"], p["partition"]) for p in parts]
    h.check(len(set(keys)) == n and set(keys) == set(want),
            "DescribeMirrors lists each of the %d partitions once (got %d rows, "
            "%d distinct)" % (n, len(keys), len(set(keys))))
    for p in parts:
        h.check(p["sourceOffset"] == want[(p["topic"], p["partition"])] and
                p["destinationOffset"] == p["sourceOffset"],
                "%s-%d: source %s destination %s, source end %d" % (
                    p["topic"], p["partition"], p["sourceOffset"],
                    p["destinationOffset"], want[(p["topic"], p["partition"])]))
    c = kraw.Cluster(dst)
    short = [(t, p, c.offsets(t, p)[1], e) for (t, p), e in sorted(want.items())
             if c.offsets(t, p)[1] != e]
    c.close()
    h.check(not short, "destination ends equal the source ends: %s" % short[:10])
    d.stop()
    mc.close()
    print("ok: %d partitions MIRRORING with lag 0, %d records, ends equal"
          % (n, corpus["messages"]))


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
