#!/usr/bin/env python3
"""Topic config sync denied by the destination's ACLs, on real
Apache Kafka 4.4.0 with an authorizer.

mirrord writes to the destination as bob, who may DESCRIBE_CONFIGS both
topics but ALTER_CONFIGS only one.  A config changed on both source topics
is applied to the one, and refused for the other with
TOPIC_AUTHORIZATION_FAILED: reported for that topic (warning of its
partitions, metric by error name, log line) while its records are still
mirrored.  Once ALTER_CONFIGS is granted, the next round applies it and the
warning goes.
"""

import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from test_tconfigs_kafka import alter, describe, metric, rows  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
TA = "tca-" + RUN   # bob may not alter its configs at first
TB = "tcb-" + RUN


def main():
    src_c, dst_c = h.real_kafka(2, security="acl")
    for cl in (src_c, dst_c):
        for t in (TA, TB):
            cl.create_topic(t, partitions=1)
    for t in (TA, TB):
        dst_c.grant("User:bob", ["DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS"],
                    topic=t)
    dst_c.grant("User:bob", ["ALTER_CONFIGS"], topic=TB)

    d = mt.Mirrord(destination=dst_c.bootstrap,
                   destination_client=mt.sasl_plain("bob"))
    d.create("m1", mt.sasl_source(src_c.bootstrap))
    d.cli_ok("--add", "--mirror", "m1", "--topic", TA)
    d.cli_ok("--add", "--mirror", "m1", "--topic", TB)
    h.wait_for(lambda: len(rows(d, TA)) == 1 and len(rows(d, TB)) == 1 and all(
        r["state"] == "MIRRORING" for r in rows(d, TA) + rows(d, TB)), 90,
        "both topics MIRRORING (now %r)" % (rows(d, TA) + rows(d, TB)))

    for t in (TA, TB):
        alter(src_c, t, sets={"retention.ms": "5400000"})
    h.wait_for(lambda: describe(dst_c, TB).get("retention.ms") == "5400000", 60,
               "retention.ms on %s (bob may alter it; now %r)"
               % (TB, describe(dst_c, TB)))

    def refused():
        r = rows(d, TA)
        return r and all("TOPIC_AUTHORIZATION_FAILED" in (p.get("warningMessage") or "")
                         and "retention.ms=5400000" in p["warningMessage"] for p in r)
    h.wait_for(refused, 60, "the denial on %s's partition (now %r)" % (TA, rows(d, TA)))
    h.check("retention.ms" not in describe(dst_c, TA),
            "retention.ms reached %s without ALTER_CONFIGS" % TA)
    h.check(not any(p.get("warningMessage") for p in rows(d, TB)),
            "%s carries a warning: %r" % (TB, rows(d, TB)))
    h.check(metric(d, "mirrord_topic_config_errors_total", mirror="m1",
                   error="TOPIC_AUTHORIZATION_FAILED") >= 1,
            "mirrord_topic_config_errors_total{error=TOPIC_AUTHORIZATION_FAILED} "
            "did not count")
    h.check(re.search(r"topic %s: the destination refuses .*TOPIC_AUTHORIZATION_FAILED"
                      % re.escape(TA), d.log()),
            "the denial was not logged for %s" % TA)
    src = kraw.Cluster(src_c.admin_bootstrap)
    dst = kraw.Cluster(dst_c.admin_bootstrap)
    base = kw.produce(src, TA, 0, kw.batch([(0, b"k", b"while denied")]))

    def copied():
        dst.refresh()
        dst.close()
        return dst.offsets(TA, 0)[1] == base + 1
    h.wait_for(copied, 60, "the record written while denied mirrored")
    h.check(rows(d, TA)[0]["state"] == "MIRRORING",
            "the denial changed the partition's state: %r" % rows(d, TA))
    print("1. ALTER_CONFIGS denied on %s: reported (warning, metric, log), %s "
          "synced, records still mirrored" % (TA, TB), flush=True)

    dst_c.grant("User:bob", ["ALTER_CONFIGS"], topic=TA)
    h.wait_for(lambda: describe(dst_c, TA).get("retention.ms") == "5400000"
               and not any(p.get("warningMessage") for p in rows(d, TA)), 60,
               "retention.ms applied once granted and the warning gone (now %r, %r)"
               % (describe(dst_c, TA), rows(d, TA)))
    print("2. ALTER_CONFIGS granted: applied at the next round, warning cleared",
          flush=True)
    d.stop()
    src.close()
    dst.close()


if __name__ == "__main__":
    main()
