#!/usr/bin/env python3
"""Topic configs follow the source, on real Apache Kafka 4.4.0.

Every mirror.metadata.refresh.interval.ms mirrord reads the topic-level
configs set on the source (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG) of
its mirrored topics and the destination's, and applies the difference to
the destination with IncrementalAlterConfigs, leaving out
mirror.topic.properties.exclude.

  1. retention.ms, max.message.bytes and cleanup.policy changed on a
     mirrored source topic appear on the destination; an excluded property
     (min.insync.replicas) set on the source does not;
  2. an override deleted on the source is deleted on the destination; an
     excluded property set on the destination only is left alone;
  3. a value the destination refuses (min.compaction.lag.ms above the
     destination's own max.compaction.lag.ms, excluded from the sync) is
     reported for that topic (log line, metric by error name, the warning
     of its partitions in DescribeMirrors) while another topic's change is
     still applied and records are still mirrored; a value changed with it
     is applied on its own at the next round; once the source value is
     fixed the report goes away.
"""

import os
import re
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "tc-" + RUN
U = "tc2-" + RUN


def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def _ns(v):
    return struct.pack(">h", -1) if v is None else _s(v)


def describe(cluster, topic):
    """{name: value} of the topic's configs set on the topic itself."""
    c = kraw.Conn(cluster.admin_bootstrap)
    try:
        body = struct.pack(">ib", 1, 2) + _s(topic) + struct.pack(">i", -1) \
            + struct.pack(">b", 0)
        r = c.call(32, 1, body)
        r.i32()
        out = {}
        for _ in range(r.i32()):
            err, msg = r.i16(), r.str()
            r.i8()
            r.str()
            if err:
                raise RuntimeError("DescribeConfigs %s: error %d %s" % (topic, err, msg))
            for _ in range(r.i32()):
                name, value = r.str(), r.str()
                r.i8()
                source = r.i8()
                r.i8()
                for _ in range(r.i32()):
                    r.str()
                    r.str()
                    r.i8()
                if source == 1:
                    out[name] = value
        return out
    finally:
        c.close()


def alter(cluster, topic, sets=None, deletes=()):
    """IncrementalAlterConfigs v0 on one topic; raises on a refusal."""
    ops = [(k, 0, v) for k, v in sorted((sets or {}).items())] + \
        [(k, 1, None) for k in deletes]
    body = struct.pack(">i", 1) + struct.pack(">b", 2) + _s(topic) \
        + struct.pack(">i", len(ops)) \
        + b"".join(_s(k) + struct.pack(">b", op) + _ns(v) for k, op, v in ops) \
        + struct.pack(">b", 0)
    c = kraw.Conn(cluster.admin_bootstrap)
    try:
        r = c.call(44, 0, body)
        r.i32()
        for _ in range(r.i32()):
            err, msg = r.i16(), r.str()
            r.i8()
            r.str()
            if err:
                raise RuntimeError("IncrementalAlterConfigs %s: error %d %s"
                                   % (topic, err, msg))
    finally:
        c.close()


def rows(d, topic):
    return [p for p in d.describe_json("m1") if p["topic"] == topic]


def metric(d, name, **labels):
    total = 0.0
    for line in d.metrics().splitlines():
        m = re.match(r'^%s\{([^}]*)\} (\S+)$' % re.escape(name), line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def main():
    src_c, dst_c = h.real_kafka(2)
    src_c.create_topic(T, partitions=2)
    src_c.create_topic(U, partitions=1)
    src, dst = kraw.Cluster(src_c.bootstrap), kraw.Cluster(dst_c.bootstrap)
    d = mt.Mirrord(destination=dst_c.bootstrap)
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000",
                    "mirror.topic.properties.exclude":
                        "min.insync.replicas,max.compaction.lag.ms"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    d.cli_ok("--add", "--mirror", "m1", "--topic", U)
    h.wait_for(lambda: len(rows(d, T)) == 2 and len(rows(d, U)) == 1 and all(
        r["state"] == "MIRRORING" for r in rows(d, T) + rows(d, U)), 90,
        "both topics MIRRORING (now %r)" % (rows(d, T) + rows(d, U)))
    dst.refresh()
    h.check(T in dst.partitions, "the destination topic %s was not created" % T)

    # 1. Changes on the source after creation.
    want = {"retention.ms": "3600000", "max.message.bytes": "2000000",
            "cleanup.policy": "compact,delete"}
    alter(src_c, T, sets=dict(want, **{"min.insync.replicas": "1"}))
    h.wait_for(lambda: all(describe(dst_c, T).get(k) == v for k, v in want.items()),
               60, "the source's new configs on the destination (now %r)"
               % describe(dst_c, T))
    got = describe(dst_c, T)
    h.check("min.insync.replicas" not in got,
            "the excluded min.insync.replicas was copied: %r" % got)
    # Counted and logged when mirrord reads the AlterConfigs answer, which
    # may be just after the broker applied it (what the wait above saw).
    h.wait_for(lambda: metric(d, "mirrord_topic_configs_applied_total",
                              mirror="m1") >= 3, 30,
               "mirrord_topic_configs_applied_total to count 3 or more")
    h.wait_for(lambda: re.search(r"topic %s: .*retention\.ms=3600000"
                                 % re.escape(T), d.log()), 30,
               "the applied configs logged")
    print("1. retention.ms, max.message.bytes, cleanup.policy followed the source; "
          "min.insync.replicas (excluded) was not copied", flush=True)

    # 2. Deleted on the source; an excluded override on the destination stays.
    alter(dst_c, T, sets={"max.compaction.lag.ms": "86400000"})
    alter(src_c, T, deletes=["retention.ms", "cleanup.policy"])
    h.wait_for(lambda: "retention.ms" not in describe(dst_c, T) and
               "cleanup.policy" not in describe(dst_c, T), 60,
               "the overrides deleted on the source gone from the destination "
               "(now %r)" % describe(dst_c, T))
    got = describe(dst_c, T)
    h.check(got.get("max.message.bytes") == "2000000",
            "max.message.bytes, still set on the source, went: %r" % got)
    h.check(got.get("max.compaction.lag.ms") == "86400000",
            "the destination's own excluded max.compaction.lag.ms was touched: %r"
            % got)
    print("2. retention.ms and cleanup.policy deleted on the source were deleted on "
          "the destination; the excluded destination override stayed", flush=True)

    # 3. A value the destination refuses: min.compaction.lag.ms above the
    # destination's max.compaction.lag.ms (1 day).  Valid on the source.
    # With it, in the same change, a value the destination takes: refused
    # together at first, then sent on its own and applied.
    alter(src_c, T, sets={"min.compaction.lag.ms": "172800000",
                          "segment.ms": "7200000"})
    alter(src_c, U, sets={"retention.ms": "7200000"})

    def refused():
        r = rows(d, T)
        return all("min.compaction.lag.ms" in (p.get("warningMessage") or "")
                   and "INVALID_CONFIG" in (p.get("warningMessage") or "")
                   for p in r) and r
    h.wait_for(refused, 60, "the refusal on the partitions of %s (now %r)"
               % (T, rows(d, T)))
    h.wait_for(lambda: describe(dst_c, U).get("retention.ms") == "7200000", 60,
               "the other topic's change applied (now %r)" % describe(dst_c, U))
    h.wait_for(lambda: describe(dst_c, T).get("segment.ms") == "7200000", 60,
               "segment.ms, changed with the refused value, applied on its own "
               "(now %r)" % describe(dst_c, T))
    h.check(describe(dst_c, T).get("min.compaction.lag.ms") is None,
            "the refused value is on the destination")
    h.wait_for(lambda: rows(d, T) and all(
        "segment.ms" not in (p.get("warningMessage") or "") and
        "min.compaction.lag.ms" in (p.get("warningMessage") or "")
        for p in rows(d, T)), 60,
        "the warning to name only the refused min.compaction.lag.ms (now %r)"
        % rows(d, T))
    h.check(not any(p.get("warningMessage") for p in rows(d, U)),
            "the other topic carries a warning: %r" % rows(d, U))
    h.check(metric(d, "mirrord_topic_config_errors_total", mirror="m1",
                   error="INVALID_CONFIG") >= 1,
            "mirrord_topic_config_errors_total{error=INVALID_CONFIG} did not count")
    h.check(re.search(r"topic %s: the destination refuses .*INVALID_CONFIG"
                      % re.escape(T), d.log()),
            "the refusal was not logged for topic %s" % T)
    # Mirroring goes on meanwhile.
    base = kw.produce(src, T, 0, kw.batch([(0, b"k", b"after the refusal")]))

    def copied():
        dst.refresh()
        dst.close()
        return dst.offsets(T, 0)[1] == base + 1
    h.wait_for(copied, 60, "the record written after the refusal mirrored")
    h.check(all(r["state"] == "MIRRORING" for r in rows(d, T) + rows(d, U)),
            "a refused config changed a partition's state: %r"
            % (rows(d, T) + rows(d, U)))
    print("3. min.compaction.lag.ms refused by the destination: reported for %s "
          "(warning, metric, log), segment.ms changed with it applied alone, %s "
          "still synced, records still mirrored"
          % (T, U), flush=True)

    # Fixed on the source: applied, and the warning goes.
    alter(src_c, T, sets={"min.compaction.lag.ms": "3600000"})
    h.wait_for(lambda: describe(dst_c, T).get("min.compaction.lag.ms") == "3600000"
               and not any(p.get("warningMessage") for p in rows(d, T)), 60,
               "the fixed value applied and the warning gone (now %r, %r)"
               % (describe(dst_c, T), rows(d, T)))
    print("4. fixed on the source: applied, the warning cleared", flush=True)

    d.stop()
    src.close()
    dst.close()
    print("topic configs follow the source", flush=True)


if __name__ == "__main__":
    main()
