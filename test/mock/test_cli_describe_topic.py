#!/usr/bin/env python3
"""kafka-mirrors --describe --topic restricts the rows to the topics named,
through the real CLI against the real mirrord, librdkafka mock clusters as
source and destination:

  * a plain name selects exactly that topic (not `orders2` for `orders`);
  * anything else is a regular expression matched against whole names, as
    Kafka's tools and the other actions take it (`orders.*`, `orders\\..*`);
  * several topics, comma-separated or with --topic repeated, across
    mirrors; with --mirror only that mirror's;
  * the same rows in every form: the table, --json, --summary, and with
    --failed; a topic's state is still over all its partitions;
  * a filter that matches nothing prints `No mirror partitions found`
    (`[]` with --json) and exits 0;
  * an invalid pattern is a usage error (exit 2) found before connecting.
"""

import json
import os
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    import confluent_kafka  # noqa: F401  (mt.produce_tagged)
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

mc = None
TOPICS = {"orders": 2, "orders2": 1, "orders.eu": 2, "payments": 1}


def words(out):
    return [ln.split(None) for ln in out.rstrip("\n").split("\n")]


def rows_of(d, *args):
    """(topic, partition) of the --describe --json rows, in order."""
    out = d.cli_ok("--describe", "--json", *args).stdout
    return [(r["topic"], r["partition"]) for r in json.loads(out)]


def parts(*topics):
    return [(t, p) for t in sorted(topics) for p in range(TOPICS[t])]


def main():
    global mc
    mc, SRC, DST = mt.mock_pair(TOPICS)
    d = mt.Mirrord(destination=DST)
    cfg = {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
           "mirror.failed.retry.max.attempts": "0"}
    d.create("m1", cfg)
    d.create("m2", cfg)
    for t, n in TOPICS.items():
        for p in range(n):
            mt.produce_tagged(SRC, t, p, 3 + p, "%s-%d" % (t, p))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "orders,orders2,orders.eu")
    d.cli_ok("--add", "--mirror", "m2", "--topic", "payments")
    mt.wait_caught_up(d, "m1", 60, "m1 caught up", count=5)
    mt.wait_caught_up(d, "m2", 60, "m2 caught up", count=1)

    # Names and patterns, in --json.
    eq(rows_of(d, "--topic", "orders"), parts("orders"), "--topic orders")
    eq(rows_of(d, "--topic", "orders.*"),
       parts("orders", "orders.eu", "orders2"), "--topic 'orders.*'")
    eq(rows_of(d, "--topic", "orders\\..*"), parts("orders.eu"),
       "--topic 'orders\\..*'")
    eq(rows_of(d, "--topic", "order"), [], "--topic order (a name, whole)")
    eq(rows_of(d, "--topic", "orders,payments"), parts("orders", "payments"),
       "--topic orders,payments")
    eq(rows_of(d, "--topic", "orders", "--topic", "payments"),
       parts("orders", "payments"), "--topic orders --topic payments")
    eq(rows_of(d, "--topic", "orders2|pay.*"), parts("orders2", "payments"),
       "--topic 'orders2|pay.*'")
    eq(rows_of(d, "--mirror", "m1", "--topic", "orders,payments"),
       parts("orders"), "--mirror m1 --topic orders,payments")
    # The rows are DescribeMirrors' own, unchanged (but for the ages,
    # which move between two looks).
    def steady(r):
        return {k: v for k, v in r.items() if k not in
                ("sourceOffsetAgeMs", "lagMs", "caughtUpTimeMs")}
    full = {(r["topic"], r["partition"]): r for r in d.describe_json()}
    for r in json.loads(d.cli_ok("--describe", "--json", "--topic",
                                 "orders.eu").stdout):
        want = full[(r["topic"], r["partition"])]
        eq(steady(r), steady(want), "--topic orders.eu row %s-%d"
           % (r["topic"], r["partition"]))
    print("ok: --describe --json --topic by name, pattern, list, mirror")

    # The table and --summary.
    w = words(d.cli_ok("--describe", "--topic", "orders").stdout)
    eq(w[0][:8], ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET",
                  "DESTINATION-OFFSET", "LAG", "LAG-TIME", "STATE"],
       "--describe --topic orders header")
    eq([(r[0], r[1], r[2], r[7]) for r in w[1:]],
       [("m1", "orders", "0", "MIRRORING"), ("m1", "orders", "1",
                                             "MIRRORING")],
       "--describe --topic orders rows")
    w = words(d.cli_ok("--describe", "--summary", "--topic",
                       "orders.*,payments").stdout)
    eq([r[:5] for r in w[1:]],
       [["m1", "orders", "MIRRORING", "2", "MIRRORING=2"],
        ["m1", "orders.eu", "MIRRORING", "2", "MIRRORING=2"],
        ["m1", "orders2", "MIRRORING", "1", "MIRRORING=1"],
        ["m2", "payments", "MIRRORING", "1", "MIRRORING=1"]],
       "--describe --summary --topic 'orders.*,payments'")
    print("ok: the table and --summary")

    # Nothing matches: said, exit 0.
    r = d.cli_ok("--describe", "--topic", "nothing-here")
    eq(r.stdout, "No mirror partitions found\n", "--topic matching nothing")
    eq(rows_of(d, "--topic", "nothing.*"), [], "--json --topic matching "
       "nothing")

    # --failed: a foreign write fails orders.eu-1.
    h.wait_for(lambda: mt.end_offset(DST, "orders.eu", 1) == 4, 60,
               "orders.eu-1 copied")
    mt.produce_tagged(DST, "orders.eu", 1, 2, "intruder")
    mt.produce_tagged(SRC, "orders.eu", 1, 2, "more")
    h.wait_for(lambda: d.row("m1", "orders.eu", 1)["state"] == "FAILED", 60,
               "orders.eu-1 FAILED by the foreign write")
    out = d.cli_ok("--describe", "--failed", "--json", "--topic",
                   "orders.*").stdout
    eq([(r["topic"], r["partition"], r["state"], r["topicState"])
        for r in json.loads(out)], [("orders.eu", 1, "FAILED", "MIXED")],
       "--failed --json --topic 'orders.*'")
    eq(d.cli_ok("--describe", "--failed", "--topic", "orders").stdout,
       "No FAILED partitions\n", "--failed --topic orders (none FAILED)")
    w = words(d.cli_ok("--describe", "--failed", "--summary", "--topic",
                       "orders.eu").stdout)
    eq([r[:5] for r in w[1:]], [["m1", "orders.eu", "MIXED", "1",
                                 "FAILED=1"]],
       "--failed --summary --topic orders.eu")
    w = words(d.cli_ok("--describe", "--summary", "--topic",
                       "orders.eu").stdout)
    eq([r[:5] for r in w[1:]], [["m1", "orders.eu", "MIXED", "2",
                                 "FAILED=1,MIRRORING=1"]],
       "--summary --topic orders.eu")
    print("ok: --failed with --topic, in every form")

    # An invalid pattern: usage error, before connecting.
    r = subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                        "--bootstrap-server", "127.0.0.1:1", "--describe",
                        "--topic", "orders("], capture_output=True,
                       text=True, timeout=30)
    eq(r.returncode, 2, "an invalid --topic pattern: exit status (%r)"
       % r.stderr)
    h.check(r.stderr.startswith("kafka-mirrors: --topic: ") and
            "missing closing parenthesis" in r.stderr,
            "the usage error names the pattern's fault: %r" % r.stderr)
    d.stop()
    print("PASS: --describe --topic", flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
