#!/usr/bin/env python3
"""Leader epochs against the librdkafka mock (which keeps none: its
Metadata has no leader epochs and it has no OffsetForLeaderEpoch), with the
real mirrord and kafka-mirrors:

  * Fetch answered FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH: mirrord asks
    for Metadata and fetches again; the partition stays MIRRORING and every
    record arrives once, at its source offset;
  * a source without epochs cannot be checked: a restart of mirrord (kill -9)
    resumes as before, nothing lost or duplicated.

The divergence checks themselves need real brokers: test_epochs_kafka.py.
"""

import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_provenance as tp  # noqa: E402  (its helpers; SKIPs without confluent-kafka)


def main():
    mc, SRC, DST = mt.mock_pair({"ep": 1})
    d = mt.Mirrord(destination=DST)
    d.create("m", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100"})
    tp.produce(SRC, "ep", 20, "a")
    d.cli_ok("--add", "--mirror", "m", "--topic", "ep")
    tp.wait_end(DST, "ep", 20)
    tp.wait_row(d, "m", "ep", "MIRRORING")

    mc.cmd("err 0 1 74 75 74 75")    # four Fetch answers: fenced, unknown epoch
    tp.produce(SRC, "ep", 20, "b")
    tp.wait_end(DST, "ep", 40)

    def counted():
        m = d.metrics()
        got = {}
        for e in ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"):
            x = re.search(r'mirrord_cluster_request_errors_total\{[^}]*api="Fetch"'
                          r'[^}]*error="%s"[^}]*\} (\d+)' % e, m)
            got[e] = int(x.group(1)) if x else 0
        return got if all(v >= 2 for v in got.values()) else None
    got = h.wait_for(counted, 30, "the injected Fetch errors to be counted")
    print("Fetch errors answered: %r" % got, flush=True)
    r = d.row("m", "ep", 0)
    h.check(r["state"] == "MIRRORING", "after fenced epochs: %r" % r)
    h.check("-> FAILED" not in d.log(), "a partition failed:\n%s" % d.log()[-2000:])
    s, t = tp.read(SRC, "ep", 40), tp.read(DST, "ep", 40)
    h.check(s == t and len(s) == 40, "40 records equal at equal offsets")

    d.kill9()
    d.start()
    tp.produce(SRC, "ep", 10, "c")
    tp.wait_end(DST, "ep", 50)
    tp.wait_row(d, "m", "ep", "MIRRORING")
    s, t = tp.read(SRC, "ep", 50), tp.read(DST, "ep", 50)
    h.check(s == t and len(s) == 50, "50 records equal at equal offsets after a restart")
    h.check("-> FAILED" not in d.log(), "a partition failed:\n%s" % d.log()[-2000:])
    print("a source without leader epochs: restarted, 50 records equal", flush=True)
    d.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
