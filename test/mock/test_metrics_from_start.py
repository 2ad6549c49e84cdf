#!/usr/bin/env python3
"""Every metric the shipped dashboard and alerting rules read exists from
the start, so no panel shows "No data" and no alert's expression is empty
on a healthy mirrord (two librdkafka mock clusters, the real binary):

  * right after a mirror is created (no topic yet), its per-mirror series
    are there, at 0 where nothing happened: the source's health
    (mirrord_mirror_source_up, every cause of
    mirrord_mirror_source_errors_total, seconds since the last good
    Metadata and Fetch), stalled partitions, the largest lag and the
    final group syncs missed at a stop;
  * once a topic is copied and caught up, every metric name in
    etc/grafana/mirrord-dashboard.json and etc/prometheus/mirrord-alerts.yml
    has at least one series in a scrape: the partitions' counters
    (records, CRC failures, retries...) at 0 where nothing happened, the
    request error counters of both clusters, the partitions' lag in time
    and source age;
  * the values say what is true: the source is up, nothing is stalled,
    nothing failed, no CRC failure, and the lag is 0.
"""

import json
import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    import yaml
except ImportError as e:
    h.skip("%s (Debian package python3-yaml)" % e)

CAUSES = ["connection_refused", "timeout", "dns", "tls",
          "sasl_authentication", "authorization", "unknown_topic",
          "leader_unavailable", "transport", "config", "other"]

mc = None


def names_used():
    """The mirrord_* families the dashboard and the alerts read."""
    exprs = []
    with open(h.src_path("etc", "grafana", "mirrord-dashboard.json")) as f:
        for p in json.load(f)["panels"]:
            exprs += [t["expr"] for t in p.get("targets", [])]
    with open(h.src_path("etc", "prometheus", "mirrord-alerts.yml")) as f:
        for g in yaml.safe_load(f)["groups"]:
            exprs += [r["expr"] for r in g["rules"]]
    names = set()
    for e in exprs:
        for n in re.findall(r"\b(mirrord_[a-z0-9_]+|process_[a-z0-9_]+)", e):
            names.add(re.sub(r"_(bucket|sum|count)$", "", n))
    return names


def families(text):
    """{family: [(labels, value)]} of a scrape (histograms by family)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)", line)
        if m is None:
            continue
        name = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
        out.setdefault(name, []).append((m.group(2) or "", float(m.group(3))))
    return out


def value(fams, name, **labels):
    for lab, v in fams.get(name, []):
        if all('%s="%s"' % (k, x) in lab for k, x in labels.items()):
            return v
    return None


def main():
    global mc
    topic = "mfs"
    mc, src, dst = mt.mock_pair({topic: 2})
    d = mt.Mirrord(destination=dst)
    d.create("m1", {"bootstrap.servers": src,
                    "mirror.fetch.wait.max.ms": "100"})

    # The mirror exists, no topic yet: its series are there.
    def mirror_series():
        f = families(d.metrics())
        return f if value(f, "mirrord_mirror_source_up", mirror="m1") \
            is not None else None
    h.wait_for(mirror_series, 20, "mirrord_mirror_source_up{mirror=m1}")
    f = mirror_series()
    for c in CAUSES:
        eq(value(f, "mirrord_mirror_source_errors_total", mirror="m1",
                 cause=c), 0.0, "mirrord_mirror_source_errors_total"
           "{mirror=m1,cause=%s} before any error" % c)
    for req in ("Metadata", "Fetch"):
        h.check(value(f, "mirrord_mirror_source_seconds_since_success",
                      mirror="m1", request=req) is not None,
                "mirrord_mirror_source_seconds_since_success{request=%s} "
                "exists" % req)
    eq(value(f, "mirrord_mirror_stalled_partitions", mirror="m1"), 0.0,
       "no partition stalled")
    # The group sync knows the mirror from its first tick (100 ms).
    h.wait_for(lambda: value(families(d.metrics()),
                             "mirrord_group_sync_final_missed_total",
                             mirror="m1") is not None, 5,
               "mirrord_group_sync_final_missed_total{mirror=m1}")
    eq(value(families(d.metrics()), "mirrord_group_sync_final_missed_total",
             mirror="m1"), 0.0,
       "mirrord_group_sync_final_missed_total{mirror=m1} before any stop")
    h.check(value(f, "mirrord_mirror_max_lag_seconds", mirror="m1")
            is not None, "mirrord_mirror_max_lag_seconds{mirror=m1} exists")

    # A topic copied and caught up.
    mt.produce_values(src, topic, [b"v%d" % i for i in range(20)])
    d.cli_ok("--add", "--mirror", "m1", "--topic", topic)
    mt.wait_caught_up(d, "m1", 60, "caught up", topic=topic, count=2)
    f = families(d.metrics())
    missing = sorted(n for n in names_used() if n not in f)
    h.check(not missing, "metrics the dashboard or the alerts read are "
            "missing from a healthy scrape: %s" % ", ".join(missing))
    eq(value(f, "mirrord_mirror_source_up", mirror="m1"), 1.0,
       "the source is up")
    for p in ("0", "1"):
        eq(value(f, "mirrord_partition_crc_failures_total", mirror="m1",
                 topic=topic, partition=p), 0.0, "no CRC failure on " + p)
        eq(value(f, "mirrord_partition_lag_seconds", mirror="m1",
                 topic=topic, partition=p), 0.0, "lag 0 s on " + p)
        eq(value(f, "mirrord_partition_stalled_seconds", mirror="m1",
                 topic=topic, partition=p), 0.0, "not stalled: " + p)
        age = value(f, "mirrord_partition_source_offset_age_seconds",
                    mirror="m1", topic=topic, partition=p)
        h.check(age is not None and 0 <= age < 10, "partition %s's source "
                "offset is fresh: %r s old" % (p, age))
    eq(value(f, "mirrord_mirror_partitions", mirror="m1", state="FAILED"),
       0.0, "no FAILED partition")
    print("PASS: every metric the dashboard and the alerts read exists, "
          "with true values", flush=True)


if __name__ == "__main__":
    h.run_main(main, cleanup=lambda: mc and mc.close())
