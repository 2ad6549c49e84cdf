#!/usr/bin/env python3
"""The topic identities (source topic id, destination topic id and cluster
id) a Metadata pass learns are recorded in one metadata-log write, on real
Kafka 4.4 (not three records per topic, one fsync each: that would take
minutes for tens of thousands of topics):

  * 60 one-partition topics added at once and copied;
  * every topic has its three identities recorded (DescribeMirrors shows
    the partitions MIRRORING; after kill -9 and a restart nothing is
    refused as a recreated topic, so the recorded ids are the real ones);
  * the metadata log took far fewer fsyncs than the 180 identity records.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

N = 60
RUN = "%d" % (os.getpid() % 100000)
PREFIX = "idb-%s-" % RUN


def fsyncs(d):
    return mt.metric_value(d, "mirrord_metadata_log_fsync_duration_seconds"
                           "_count")


def main():
    src, dst = h.real_kafka(2)
    names = ["%s%02d" % (PREFIX, i) for i in range(N)]
    for t in names:
        src.create_topic(t, partitions=1)
    d = mt.Mirrord(destination=dst.bootstrap, log_level="info")
    d.create("m", {"bootstrap.servers": src.bootstrap,
                   "mirror.fetch.wait.max.ms": "100"})
    for t in names[:5]:
        mt.produce_values(src.bootstrap, t, [b"v-%s" % t.encode()])
    before = fsyncs(d)
    d.cli_ok("--add", "--mirror", "m", "--topic", ",".join(names))
    mt.wait_caught_up(d, "m", 180, "the %d topics" % N, count=N,
                      fail_on_failed=True)
    used = fsyncs(d) - before
    print("%d topics caught up; the metadata log took %d fsyncs meanwhile "
          "(%d identity records among its writes)" % (N, used, 3 * N),
          flush=True)
    h.check(used < 3 * N / 2, "%d fsyncs for %d topics: the identities were "
            "not recorded together" % (used, N))
    for t in names[:5]:
        mt.same_batches(src.bootstrap, dst.bootstrap, t, [0])
    d.kill9()
    d.start()
    for t in names[:5]:
        mt.produce_values(src.bootstrap, t, [b"w-%s" % t.encode()])
    mt.wait_caught_up(d, "m", 120, "the topics after kill -9", count=N,
                      fail_on_failed=True)
    for t in names[:5]:
        mt.same_batches(src.bootstrap, dst.bootstrap, t, [0])
    log = d.log()
    h.check("recreated" not in log and "cluster id changed" not in log,
            "a recorded identity was refused after the restart")
    print("after kill -9: the recorded identities hold, copying on",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
