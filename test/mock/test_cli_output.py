#!/usr/bin/env python3
"""kafka-mirrors' text output as an operator reads it, through
the real CLI against the real mirrord, librdkafka mock clusters as source
and destination:

  * --describe (every partition, as the KIP tool) and --list: each column
    exactly as wide as its longest value, header included, one space
    apart, numbers right-aligned; a short mirror and topic fit in 80
    columns (the old layout padded MIRROR to 30 and TOPIC to 40), with no
    REASON column while no partition has a reason;
  * the values are DescribeMirrors' (compared with --json): offsets, lag,
    state, and the REASON column names why a partition is FAILED;
  * LAG-TIME: 0s for a caught-up partition, a positive duration for a
    FAILED partition whose source went on, "-" while unknown;
  * --describe --summary: one line per topic with the partitions per
    state, the total lag and the worst reason;
  * --json keeps exactly its keys;
  * mirrord_mirror_partitions{mirror,state} counts the partitions, and
    the metadata log's metrics count its appends and fsyncs;
  * bash completion asks the running mirrord for mirror names (--mirror)
    and the mirror's topic names (--pause --topic), every mirror's topic
    names for --describe --topic.
"""

import json
import os
import re
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    import confluent_kafka  # noqa: F401  (mt.produce_tagged)
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

mc = None

JSON_KEYS = {"mirror", "topic", "partition", "sourceOffset",
             "destinationOffset", "lag", "state", "lastMirroredEpoch",
             "lastMirroredOffset", "errorMessage", "warningMessage",
             "topicState", "failoverSourceOffset", "failoverLag",
             "failoverLagMs", "sourceOffsetAgeMs", "lagMs", "caughtUpTimeMs",
             "mirrorState", "stalled", "stalledReason", "stalledSinceMs",
             "failoverSourceOffsetAgeMs", "failoverLagIsLowerBound"}
DESCRIBE_HEAD = ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET",
                 "DESTINATION-OFFSET", "LAG", "LAG-TIME", "STATE", "REASON"]
SUMMARY_HEAD = ["MIRROR", "TOPIC", "STATE", "PARTITIONS", "STATES", "LAG",
                "LAG-TIME", "REASON"]
LIST_HEAD = ["MIRROR", "TOPICS", "SOURCE-CLUSTER-ID",
             "SOURCE-BOOTSTRAP-SERVER"]


def table(text, head, right):
    """Parses a table and checks its layout byte for byte: the cells are the
    whitespace-separated words (the last column takes the rest of the line),
    each column is as wide as its widest cell or header, columns are one
    space apart, the columns named in right are right-aligned, the last
    is not padded.  Returns the rows as lists of cells."""
    lines = text.rstrip("\n").split("\n")
    n = len(head)
    cells = [l.split(None, n - 1) for l in lines]
    eq(cells[0], head, "table header")
    for l, c in zip(lines, cells):
        h.check(len(c) == n, "a row without %d cells: %r" % (n, l))
    width = [max(len(r[i]) for r in cells) for i in range(n)]
    for l, c in zip(lines, cells):
        want = []
        for i in range(n):
            if head[i] in right:
                want.append(c[i].rjust(width[i]))
            elif i + 1 < n:
                want.append(c[i].ljust(width[i]))
            else:
                want.append(c[i])
        eq(l, " ".join(want), "table line laid out to its content")
    return cells[1:]


SECS = re.compile(r"^(?:(\d+(?:\.\d)?)s|(\d+)m(\d\d)s|(\d+)h(\d\d)m|(\d+)d(\d\d)h)$")


def seconds(cell):
    """A LAG-TIME cell in seconds (None for "-")."""
    if cell == "-":
        return None
    m = SECS.match(cell)
    h.check(m is not None, "LAG-TIME %r is not a duration" % cell)
    g = m.groups()
    if g[0] is not None:
        return float(g[0])
    if g[1] is not None:
        return int(g[1]) * 60 + int(g[2])
    if g[3] is not None:
        return int(g[3]) * 3600 + int(g[4]) * 60
    return int(g[5]) * 86400 + int(g[6]) * 3600


def complete(line):
    """What bash completion offers at the end of line (kafka-mirrors is
    the built program), with etc/completion/kafka-mirrors.bash sourced."""
    cli = h.build_path("daemon", "kafka-mirrors")
    line = line.replace("kafka-mirrors", cli, 1)
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c",
         '. "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; '
         'read -ra COMP_WORDS <<<"$COMP_LINE"; '
         '[[ $COMP_LINE == *" " ]] && COMP_WORDS+=(""); '
         'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _kafka_mirrors; '
         'printf "%s\\n" "${COMPREPLY[@]}"', "sh",
         h.src_path("etc", "completion", "kafka-mirrors.bash"), line],
        capture_output=True, text=True, timeout=30)
    eq(r.returncode, 0, "completion of %r (stderr %r)" % (line, r.stderr))
    return sorted(w for w in r.stdout.split("\n") if w)


def main():
    global mc
    mc = MockCluster(clusters=2, brokers=1,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
    long_topic = "payments.settlement.eu-west.v2"
    for c in (0, 1):
        mc.cmd("topic %d orders 3" % c)
        mc.cmd("topic %d %s 2" % (c, long_topic))
        mc.cmd("topic %d fw 1" % c)
    d = mt.Mirrord(destination=DST)
    d.create("m1", {"bootstrap.servers": SRC,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.max.attempts": "0"})
    d.create("dr-eu-west-long-mirror-name", {"bootstrap.servers": SRC})

    # Nothing yet.
    r = d.cli_ok("--describe")
    eq(r.stdout, "No mirror partitions found\n", "describe with no topics")

    # ---- list: sized to its content -------------------------------------
    rows = table(d.cli_ok("--list").stdout, LIST_HEAD, {"TOPICS"})
    eq([r[:2] for r in rows], [["dr-eu-west-long-mirror-name", "0"],
                               ["m1", "0"]], "list rows")
    eq({r[3] for r in rows}, {SRC}, "list SOURCE-BOOTSTRAP-SERVER")

    # ---- a healthy mirror: narrow, no REASON column ----------------------
    for p in range(3):
        mt.produce_tagged(SRC, "orders", p, 7 * (p + 1), "o%d" % p)
    d.cli_ok("--add", "--mirror", "m1", "--topic", "orders")
    mt.wait_caught_up(d, "m1", 60, "orders to be caught up")
    out = d.cli_ok("--describe", "--mirror", "m1").stdout
    print(out, flush=True)
    rows = table(out, DESCRIBE_HEAD[:-1], {"PARTITION", "SOURCE-OFFSET",
                                           "DESTINATION-OFFSET", "LAG",
                                           "LAG-TIME"})
    eq([r[:3] + r[5:] for r in rows],
       [["m1", "orders", str(p), "0", "0s", "MIRRORING"] for p in range(3)],
       "healthy rows")
    for l in out.splitlines():
        h.check(len(l) <= 80, "a line over 80 columns: %r" % l)

    # ---- fw FAILED by a foreign write ------------------------------------
    mt.produce_tagged(SRC, long_topic, 1, 1234, "pay")
    mt.produce_tagged(SRC, "fw", 0, 10, "fw1")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "fw")
    d.cli_ok("--add", "--mirror", "dr-eu-west-long-mirror-name",
             "--topic", long_topic)
    h.wait_for(lambda: mt.end_offset(DST, "fw", 0) == 10, 60, "fw-0 to be copied")
    mt.produce_tagged(DST, "fw", 0, 3, "intruder")
    mt.produce_tagged(SRC, "fw", 0, 5, "fw2")

    def settled():
        rows = d.describe_json()
        by = {(r["topic"], r["partition"]): r for r in rows}
        fw = by.get(("fw", 0))
        if fw is None or fw["state"] != "FAILED":
            return None
        for k, r in by.items():
            if k[0] != "fw" and (r["state"] != "MIRRORING" or r["lag"] != 0):
                return None
        return rows
    parts = h.wait_for(settled, 60, "orders and %s caught up, fw-0 FAILED"
                       % long_topic)
    print("settled: %s" % json.dumps(parts), flush=True)

    # mirrord_mirror_partitions counts every state of every mirror (the
    # FAILED alert reads it).
    series = {}
    for l in d.metrics().splitlines():
        m = re.match(r'mirrord_mirror_partitions\{mirror="([^"]*)",'
                     r'state="([A-Z]+)"\} (\S+)$', l)
        if m:
            series[(m.group(1), m.group(2))] = float(m.group(3))
    want_counts = {}
    for m_ in ("m1", "dr-eu-west-long-mirror-name"):
        for st in ("UNKNOWN", "PREPARING", "MIRRORING", "PAUSING", "PAUSED",
                   "STOPPING", "STOPPED", "FAILED"):
            want_counts[(m_, st)] = float(sum(
                1 for p in parts if p["mirror"] == m_ and p["state"] == st))
    eq(series, want_counts, "mirrord_mirror_partitions")
    # The metadata log's metrics follow its appends (two CreateMirror, three
    # AddTopics, the state changes): each is an fsync.
    vals = dict(l.rsplit(" ", 1) for l in d.metrics().splitlines()
                if l.startswith("mirrord_metadata_log_"))
    for k in ("mirrord_metadata_log_records_total",
              "mirrord_metadata_log_bytes_total",
              "mirrord_metadata_log_fsync_duration_seconds_count"):
        h.check(float(vals.get(k, 0)) >= 5, "%s: %r" % (k, vals.get(k)))

    # ---- --json: exactly its keys ----------------------------------------
    for p in parts:
        eq(set(p), JSON_KEYS, "--json keys of %s-%d" % (p["topic"], p["partition"]))
    fw = [p for p in parts if p["topic"] == "fw"][0]
    h.check(fw["errorMessage"] and fw["lag"] > 0,
            "fw-0 FAILED with a reason and lag: %r" % fw)

    # ---- --describe: every partition, laid out to its content -----------
    # fw-0's lag in time grows from the last moment it was known caught up
    # (just before the 5 records it did not copy): a second later it is a
    # second at least.
    time.sleep(1.2)
    out = d.cli_ok("--describe").stdout
    print(out, flush=True)
    rows = table(out, DESCRIBE_HEAD, {"PARTITION", "SOURCE-OFFSET",
                                      "DESTINATION-OFFSET", "LAG",
                                      "LAG-TIME"})
    eq([(r[0], r[1], int(r[2])) for r in rows],
       sorted((p["mirror"], p["topic"], p["partition"]) for p in parts),
       "one row per partition, sorted by mirror, topic, partition")
    want = {(p["mirror"], p["topic"], p["partition"]): p for p in parts}
    for r in rows:
        p = want[(r[0], r[1], int(r[2]))]
        what = "%s %s-%s" % (r[0], r[1], r[2])
        num = lambda v: "-" if v < 0 else str(v)  # noqa: E731
        eq(r[3:6], [num(p["sourceOffset"]), num(p["destinationOffset"]),
                    num(p["lag"])], what + " offsets and lag")
        eq(r[7], p["state"], what + " state")
        if p["state"] == "FAILED":
            eq(r[8], p["errorMessage"], what + " REASON is the FAILED reason")
            lt = seconds(r[6])
            h.check(lt is not None and lt >= 1.0,
                    what + ": LAG-TIME of a FAILED partition the source went "
                    "on from, a second later: %r" % r[6])
        else:
            eq(r[8], "-", what + " REASON")
            eq(r[6], "0s", what + " LAG-TIME when caught up")

    # ---- --describe --summary: one line per topic -------------------------
    out = d.cli_ok("--describe", "--summary").stdout
    print(out, flush=True)
    rows = table(out, SUMMARY_HEAD, {"PARTITIONS", "LAG", "LAG-TIME"})
    eq([(r[0], r[1]) for r in rows],
       [("dr-eu-west-long-mirror-name", long_topic), ("m1", "fw"),
        ("m1", "orders")], "one summary row per topic, sorted")
    by = {r[1]: r for r in rows}
    eq(by["orders"][2:7], ["MIRRORING", "3", "MIRRORING=3", "0", "0s"],
       "orders summary")
    eq(by["orders"][7], "-", "orders summary REASON")
    eq(by[long_topic][2:6], ["MIRRORING", "2", "MIRRORING=2", "0"],
       long_topic + " summary")
    eq(by["fw"][2:6], ["FAILED", "1", "FAILED=1", str(fw["lag"])],
       "fw summary")
    eq(by["fw"][7], "partition 0: " + fw["errorMessage"], "fw summary REASON")
    h.check((seconds(by["fw"][6]) or 0) > 0, "fw summary LAG-TIME %r"
            % by["fw"][6])

    # ---- bash completion from the running mirrord -----------------------
    b = "kafka-mirrors --bootstrap-server %s " % d.bootstrap
    eq(complete(b + "--describe --mirror "),
       ["dr-eu-west-long-mirror-name", "m1"], "completion of --mirror")
    eq(complete(b + "--describe --mirror d"), ["dr-eu-west-long-mirror-name"],
       "completion of --mirror d")
    eq(complete(b + "--pause --mirror m1 --topic "), ["fw", "orders"],
       "completion of --topic for --pause")
    eq(complete(b + "--add --mirror m1 --topic "), [],
       "no --topic completion for --add (source topics)")
    eq(complete(b + "--describe --topic "),
       sorted({p["topic"] for p in d.describe_json()}),
       "completion of --topic for --describe: every mirror's topics")
    eq(complete(b + "--describe --mirror m1 --topic o"), ["orders"],
       "completion of --topic for --describe --mirror m1")
    eq(complete(b + "--desc"), ["--describe"], "completion of an option")
    eq(complete("kafka-mirrors --bootstrap-server 127.0.0.1:1 --mirror "), [],
       "completion against no mirrord")

    # ---- usage -------------------------------------------------------------
    for args in (["--describe", "--summary", "--json"], ["--list", "--summary"]):
        r = d.cli(*args)
        eq(r.returncode, 2, "usage error exit status for %s" % args)
        h.check("--summary" in r.stderr, "the usage error names --summary: %r"
                % r.stderr)
    d.stop()
    print("PASS: describe, summary and list laid out to their content", flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
