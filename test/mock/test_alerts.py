#!/usr/bin/env python3
"""The Prometheus alerting rules (etc/prometheus/mirrord-alerts.yml):

  * `promtool check rules` accepts them and `promtool test rules` passes
    their unit tests (etc/prometheus/mirrord-alerts.test.yml);
  * each alert the issue asks for exists, has a summary, and a runbook
    annotation naming its own section in mirrord(8), which exists;
  * each alert has a unit test in which it fires and one in which it is
    quiet, and the tests would catch a rule that never fires (each alert's
    expression replaced by one that is never true makes them fail);
  * every metric the rules read is one mirrord exports (lib/ops/metrics_std.h),
    or Prometheus' own `up`.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402

try:
    import yaml
except ImportError:
    h.skip("python3-yaml is not installed")

PROMTOOL = shutil.which("promtool")
if PROMTOOL is None:
    h.skip("promtool not found (Debian package prometheus)")

ALERTS = ["MirrordPartitionsFailed", "MirrordLagHigh", "MirrordNoProgress",
          "MirrordCrcFailures", "MirrordMetadataLogFsyncSlow",
          "MirrordDestinationUnreachable", "MirrordSourceUnreachable",
          "MirrordMirrorLagGrowing", "MirrordPartitionsStalled",
          "MirrordGroupSyncFinalMissed", "MirrordDown"]
RULES = h.src_path("etc", "prometheus", "mirrord-alerts.yml")
TESTS = h.src_path("etc", "prometheus", "mirrord-alerts.test.yml")


def promtool(*args, cwd=None):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def main():
    r = promtool("check", "rules", RULES)
    h.check(r.returncode == 0 and "SUCCESS: %d rules found" % len(ALERTS)
            in r.stdout, "promtool check rules:\n%s%s" % (r.stdout, r.stderr))
    r = promtool("test", "rules", TESTS)
    h.check(r.returncode == 0 and "SUCCESS" in r.stdout,
            "promtool test rules:\n%s%s" % (r.stdout, r.stderr))
    print("promtool check rules and test rules: SUCCESS", flush=True)

    with open(RULES) as f:
        rules = yaml.safe_load(f)
    with open(TESTS) as f:
        tests = yaml.safe_load(f)
    with open(h.src_path("man", "mirrord.8")) as f:
        man = f.read()
    alerts_sec = man.split("\n.Sh ALERTS\n", 1)
    h.check(len(alerts_sec) == 2, "mirrord.8 has no ALERTS section")
    alerts_sec = alerts_sec[1].split("\n.Sh ", 1)[0]
    with open(h.src_path("lib", "ops", "metrics_std.h")) as f:
        exported = set(re.findall(r'"((?:mirrord|process)_[a-z0-9_]+)"', f.read()))
    h.check(len(exported) > 20, "metric names read from lib/ops/metrics_std.h")

    got = [r for g in rules["groups"] for r in g["rules"]]
    eq(sorted(r["alert"] for r in got), sorted(ALERTS), "the alerts")
    for rule in got:
        name = rule["alert"]
        ann = rule.get("annotations", {})
        h.check(ann.get("summary"), "%s has no summary" % name)
        eq(ann.get("runbook"), "mirrord(8), section ALERTS, %s" % name,
           "%s runbook annotation" % name)
        h.check(re.search(r"^\.Ss %s$" % name, alerts_sec, re.M),
                "mirrord.8 has no section ALERTS, %s" % name)
        h.check(rule.get("labels", {}).get("severity") in ("warning", "critical"),
                "%s severity" % name)
        # Metric names: identifiers followed by a selector or range, or
        # standing alone, that are not PromQL words or label names.
        expr = re.sub(r'"[^"]*"', '""', rule["expr"])
        expr = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", "", expr)
        expr = re.sub(r"\{[^}]*\}", "", expr)
        words = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", expr))
        words -= {"sum", "max", "min", "increase", "rate", "changes", "and",
                  "or", "unless", "offset", "histogram_quantile", "delta"}
        h.check(words, "no metric found in %s" % name)
        for w in words:
            base = re.sub(r"_(bucket|sum|count)$", "", w)
            h.check(w == "up" or w in exported or base in exported,
                    "%s reads %s, which mirrord does not export" % (name, w))

    # Each alert fires in one test and is quiet in another.
    fires, quiet = set(), set()
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
    eq(sorted(fires), sorted(ALERTS), "alerts with a unit test that fires")
    eq(sorted(quiet), sorted(ALERTS), "alerts with a unit test that is quiet")

    # The tests would catch each rule never firing.
    tmp = tempfile.mkdtemp(prefix="alerts-", dir=h.test_dir())
    for name in ALERTS:
        broken = yaml.safe_load(open(RULES))
        for g in broken["groups"]:
            for rule in g["rules"]:
                if rule["alert"] == name:
                    rule["expr"] = "vector(1) > 2"
        with open(os.path.join(tmp, "mirrord-alerts.yml"), "w") as f:
            yaml.safe_dump(broken, f)
        shutil.copy(TESTS, os.path.join(tmp, "mirrord-alerts.test.yml"))
        r = promtool("test", "rules", "mirrord-alerts.test.yml", cwd=tmp)
        h.check(r.returncode != 0 and name in r.stdout + r.stderr,
                "the unit tests pass with %s never firing:\n%s%s"
                % (name, r.stdout, r.stderr))
    print("PASS: %d alerts, each tested firing and quiet, with runbooks"
          % len(ALERTS), flush=True)


if __name__ == "__main__":
    h.run_main(main)
