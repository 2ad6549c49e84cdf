#!/usr/bin/env python3
"""The Grafana dashboard and the alerting rules against a real Prometheus
(Debian's prometheus, on 127.0.0.1) scraping the real mirrord under load,
librdkafka mock clusters as source and destination:

  * mirrord copies a topic under continuous load; produce errors are
    injected on the destination; a corrupt batch on the source fails its
    partition (a CRC failure and a FAILED partition); an admin client
    pauses and resumes a topic (metadata-log fsyncs); a second target of
    job "mirrord" has nobody listening (an instance down);
  * every target of every panel of etc/grafana/mirrord-dashboard.json,
    with the dashboard's variables set to "All", is valid PromQL on
    Prometheus' HTTP API and returns at least one finite sample;
  * every rule of etc/prometheus/mirrord-alerts.yml is loaded and evaluated
    with health "ok", its expression is valid and every series selector in
    it returns data; the alerts whose condition the test creates (FAILED
    partitions, CRC failures, an instance down) are active in /api/v1/alerts
    with the labels of the partition or instance at fault.
"""

import json
import math
import os
import re
import shutil
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import dashsvg  # noqa: E402
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
    import yaml
except ImportError as e:
    h.skip("%s (Debian packages python3-confluent-kafka, python3-yaml)" % e)

PROMETHEUS = shutil.which("prometheus")
if PROMETHEUS is None:
    h.skip("prometheus not found (Debian package prometheus)")

DASHBOARD = h.src_path("etc", "grafana", "mirrord-dashboard.json")
RULES = h.src_path("etc", "prometheus", "mirrord-alerts.yml")
# Grafana's variables, as "All" and a rate window a 1 s scrape fills.
VARS = {"$instance": ".*", "$mirror": ".*", "$__rate_interval": "20s"}

mc = None
stop = threading.Event()


class Prom:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%d" % port

    def get(self, path, **params):
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:   # 400: bad query, with a reason
            return json.loads(e.read())

    def query(self, expr):
        return self.get("/api/v1/query", query=expr)

    def ready(self):
        try:
            with urllib.request.urlopen(self.base + "/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False


def finite(result):
    return [s for s in result
            if not math.isnan(float(s["value"][1]))
            and not math.isinf(float(s["value"][1]))]


def subst(expr):
    for k, v in VARS.items():
        expr = expr.replace(k, v)
    h.check("$" not in expr, "a variable left in %r" % expr)
    return expr


def selectors(expr):
    """The series selectors of a PromQL expression: metric names, with
    their {matchers} when given."""
    out = []
    for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\s*(\{[^}]*\})?", expr):
        name = m.group(1)
        if name in ("sum", "max", "min", "by", "on", "and", "or", "unless",
                    "offset", "increase", "rate", "changes",
                    "histogram_quantile", "job", "instance", "mirror",
                    "topic", "partition", "le", "state", "cluster", "vector",
                    "without", "ignoring"):
            continue
        # Label names inside by (...) / on (...) lists are skipped above;
        # anything else followed by "(" is a function.
        if expr[m.end():].lstrip().startswith("("):
            continue
        out.append(name + (m.group(2) or ""))
    return sorted(set(out))


def load(src):
    """Produces to load-0..2 until the test ends, 0..1000 records a second
    in a slow wave (so that the picture shows the throughput move)."""
    p = Producer({"bootstrap.servers": src, "linger.ms": 20,
                  "message.timeout.ms": 30000})
    i = 0
    t0 = time.monotonic()
    while not stop.is_set():
        n = int(50 * (1 + math.sin((time.monotonic() - t0) / 15.0)))
        for _ in range(n):
            p.produce("load", value=b"record-%d" % i, partition=i % 3)
            i += 1
        p.poll(0)
        stop.wait(0.1)
    p.flush(10)


def admin_churn(d):
    """Pause and resume a topic: every change is a metadata-log fsync."""
    paused = False
    while not stop.is_set():
        d.cli("--resume" if paused else "--pause", "--mirror", "m1",
              "--topic", "idle", timeout=30)
        paused = not paused
        stop.wait(1.0)


def corrupt_batch(src, topic):
    """Appends a copy of the partition's first batch with one records byte
    flipped (its CRC no longer matches) straight to the mock source."""
    c = kraw.Cluster(src)
    try:
        raw = bytearray(c.batches(topic, 0)[0]["raw"])
        raw[-1] ^= 0xFF
        body = (struct.pack(">hhi", -1, -1, 5000) + struct.pack(">i", 1)
                + kraw._s(topic) + struct.pack(">ii", 1, 0)
                + struct.pack(">i", len(raw)) + bytes(raw))
        c.conn(topic, 0).call(0, 3, body)
    finally:
        c.close()


def main():
    global mc
    mc, SRC, DST = mt.mock_pair({"load": 3, "bad": 1, "idle": 1})
    d = mt.Mirrord(destination=DST, log_level="info")
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.max.attempts": "0"})
    p = Producer({"bootstrap.servers": SRC})
    for i in range(20):
        p.produce("bad", value=b"bad-%d" % i, partition=0)
    p.flush(30)
    d.cli_ok("--add", "--mirror", "m1", "--topic", "load", "--topic", "bad",
             "--topic", "idle")
    h.wait_for(lambda: all(r["state"] == "MIRRORING"
                           for r in d.describe_json("m1")), 60,
               "every partition of m1 MIRRORING")

    # Prometheus: mirrord and a dead instance under job "mirrord".
    pdir = os.path.join(h.test_dir(), "prometheus")
    os.makedirs(pdir)
    dead = h.free_port()
    with open(os.path.join(pdir, "prometheus.yml"), "w") as f:
        yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": [RULES],
            "scrape_configs": [{"job_name": "mirrord", "static_configs": [
                {"targets": ["127.0.0.1:%d" % d.metrics_port,
                             "127.0.0.1:%d" % dead]}]}],
        }, f)
    port = h.free_port()
    prom = Prom(port)
    h.Proc([PROMETHEUS, "--config.file=" + os.path.join(pdir, "prometheus.yml"),
            "--storage.tsdb.path=" + os.path.join(pdir, "data"),
            "--web.listen-address=127.0.0.1:%d" % port,
            "--log.level=warn"], name="prometheus")
    h.wait_for(prom.ready, 60, "Prometheus to be ready on 127.0.0.1:%d" % port)
    print("prometheus ready on 127.0.0.1:%d" % port, flush=True)

    t_start = time.time()
    threads = [threading.Thread(target=load, args=(SRC,), daemon=True),
               threading.Thread(target=admin_churn, args=(d,), daemon=True)]
    for t in threads:
        t.start()
    # Errors the destination answers Produce with (retried by mirrord).
    mc.cmd("err 1 0 6 6 6 6 6 6")
    corrupt_batch(SRC, "bad")
    h.wait_for(lambda: [r for r in d.describe_json("m1")
                        if r["topic"] == "bad" and r["state"] == "FAILED"],
               60, "bad-0 to fail on the corrupt batch")

    # ---- every panel ------------------------------------------------------
    with open(DASHBOARD) as f:
        dash = json.load(f)
    targets = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            targets.append((panel["title"], t["expr"]))
    h.check(len(targets) >= 20, "dashboard targets: %d" % len(targets))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            targets.append(("variable " + v["name"], v["definition"]))

    def query_target(expr):
        if expr.startswith("label_values("):
            m = re.match(r"label_values\((.*), *([a-z_]+)\)$", expr)
            r = prom.get("/api/v1/series", **{"match[]": subst(m.group(1))})
            return r, [s for s in r.get("data", []) if m.group(2) in s]
        r = prom.query(subst(expr))
        return r, finite(r.get("data", {}).get("result", []))

    empty = {}

    def all_panels():
        empty.clear()
        for title, expr in targets:
            r, data = query_target(expr)
            if r.get("status") != "success":
                h.fail("panel %r: %s is not valid: %s" % (title, expr, r))
            if not data:
                empty[title + ": " + expr] = r.get("data")
        return not empty
    try:
        h.wait_for(all_panels, 120, "every dashboard query to return data")
    except AssertionError:
        h.fail("dashboard queries without data after 120 s:\n  " +
               "\n  ".join("%s -> %s" % kv for kv in empty.items()))
    print("all %d dashboard queries valid with data" % len(targets), flush=True)

    # ---- every rule ---------------------------------------------------------
    with open(RULES) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]

    def rules_healthy():
        got = {r["name"]: r for g in prom.get("/api/v1/rules")["data"]["groups"]
               for r in g["rules"]}
        if sorted(got) != sorted(r["alert"] for r in rules):
            return None
        for name, r in got.items():
            if r.get("health") != "ok" or r.get("lastError"):
                h.fail("rule %s: health %r, error %r" % (name, r.get("health"),
                                                         r.get("lastError")))
        return all(r.get("lastEvaluation", "").startswith("20")
                   for r in got.values())
    h.wait_for(rules_healthy, 60, "every rule loaded and evaluated")
    for rule in rules:
        r = prom.query(rule["expr"])
        eq(r.get("status"), "success", "rule %s expression is valid" % rule["alert"])
        sels = selectors(rule["expr"])
        h.check(sels, "no selector found in %s" % rule["alert"])
        for s in sels:
            r = prom.query(s)
            h.check(r.get("status") == "success" and r["data"]["result"],
                    "rule %s: selector %s returns no data: %s"
                    % (rule["alert"], s, r))
    print("all %d rules valid, every selector with data" % len(rules), flush=True)

    # The conditions the test created set their alerts off.
    want = {("MirrordPartitionsFailed", "mirror", "m1"),
            ("MirrordCrcFailures", "topic", "bad"),
            ("MirrordDown", "instance", "127.0.0.1:%d" % dead)}

    def active():
        got = set()
        for a in prom.get("/api/v1/alerts")["data"]["alerts"]:
            for name, label, value in want:
                if a["labels"].get("alertname") == name and \
                        a["labels"].get(label) == value:
                    got.add((name, label, value))
        return got == want
    h.wait_for(active, 60, "alerts %s to be pending or firing" % sorted(want))
    for name, _, _ in want:
        expr = [r["expr"] for r in rules if r["alert"] == name][0]
        r = prom.query(expr)
        h.check(r["data"]["result"], "%s returns no data while active" % name)
    print("alerts active: %s" % sorted(want), flush=True)

    # ---- the picture --------------------------------------------------------
    if os.environ.get("MIRRORD_DASHBOARD_SVG"):
        # Drawing the README's picture: three more minutes of load, with
        # produce errors now and then, so that the lines have a history
        # (not a wait for a condition: nothing is checked on it).
        for k in range(6):
            mc.cmd("err 1 0 %s" % " ".join(["6"] * (2 + 2 * k)))
            time.sleep(30)
    def query_range(expr):
        r = prom.get("/api/v1/query_range", query=expr, start=t_start,
                     end=time.time(), step="1s")
        eq(r.get("status"), "success", "query_range %s" % expr)
        return [(s["metric"], [(float(t), float(v)) for t, v in s["values"]])
                for s in r["data"]["result"]]
    svg = dashsvg.render(dash, query_range, subst)
    path = os.path.join(h.test_dir(), "dashboard.svg")
    with open(path, "w") as f:
        f.write(svg)
    h.check(svg.count("<polyline") >= 10, "lines drawn in %s" % path)
    if os.environ.get("MIRRORD_DASHBOARD_SVG"):
        shutil.copy(path, os.environ["MIRRORD_DASHBOARD_SVG"])
    print("picture: %s" % path, flush=True)

    stop.set()
    for t in threads:
        t.join(30)
    d.stop()
    print("PASS: dashboard and rules against a real Prometheus", flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: (stop.set(), mc is not None and mc.kill()))
