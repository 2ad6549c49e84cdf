#!/usr/bin/env python3
"""kafka-mirrors --describe --failed and the topic-level state,
through the real CLI against the real mirrord, librdkafka mock clusters as
source and destination:

  * a topic whose partitions are in different states is MIXED (--summary's
    STATE column, --json's topicState), one whose partitions agree shows
    their common state;
  * --describe --failed lists only the FAILED partitions, in every output
    form (table, --summary, --json), with the topic's state still taken
    over all its partitions;
  * with nothing FAILED, --failed says so and exits 0;
  * --failed with another action is a usage error naming it.
"""

import json
import os
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


def words(out):
    return [l.split(None) for l in out.rstrip("\n").split("\n")]


mc = None


def main():
    global mc
    mc, SRC, DST = mt.mock_pair({"mixed": 3, "calm": 2})
    d = mt.Mirrord(destination=DST)
    d.create("m1", {"bootstrap.servers": SRC,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.max.attempts": "0"})
    for p in range(3):
        mt.produce_tagged(SRC, "mixed", p, 5 + p, "m%d" % p)
    for p in range(2):
        mt.produce_tagged(SRC, "calm", p, 4, "c%d" % p)
    d.cli_ok("--add", "--mirror", "m1", "--topic", "mixed,calm")
    mt.wait_caught_up(d, "m1", 60, "both topics caught up", count=5)

    # Nothing FAILED yet: --failed says so, exit 0; topics agree.
    r = d.cli_ok("--describe", "--failed")
    eq(r.stdout, "No FAILED partitions\n", "--failed with nothing FAILED")
    eq(json.loads(d.cli_ok("--describe", "--failed", "--json").stdout), [],
       "--failed --json with nothing FAILED")
    for p in d.describe_json("m1"):
        eq(p["topicState"], "MIRRORING", "topicState of %s-%d while all "
           "copy" % (p["topic"], p["partition"]))

    # A foreign write into mixed-1 on the destination: mixed-1 FAILED, the
    # other partitions of mixed go on, so mixed is MIXED.
    h.wait_for(lambda: mt.end_offset(DST, "mixed", 1) == 6, 60, "mixed-1 copied")
    mt.produce_tagged(DST, "mixed", 1, 2, "intruder")
    mt.produce_tagged(SRC, "mixed", 1, 3, "more")

    def settled():
        rows = d.describe_json("m1")
        by = {(r["topic"], r["partition"]): r for r in rows}
        if by[("mixed", 1)]["state"] != "FAILED":
            return None
        return by
    by = h.wait_for(settled, 60, "mixed-1 FAILED by the foreign write")
    fw = by[("mixed", 1)]
    msg = fw["errorMessage"] or ""
    h.check("foreign write" in msg or "another producer" in msg,
            "mixed-1's reason names the foreign write: %r" % fw)
    for k, p in by.items():
        want = "MIXED" if k[0] == "mixed" else "MIRRORING"
        eq(p["topicState"], want, "topicState of %s-%d" % k)

    # --failed --json: only mixed-1, topicState still over the whole topic.
    rows = json.loads(d.cli_ok("--describe", "--failed", "--json").stdout)
    eq([(r["topic"], r["partition"], r["state"], r["topicState"])
        for r in rows], [("mixed", 1, "FAILED", "MIXED")],
       "--describe --failed --json rows")
    eq(rows[0]["errorMessage"], fw["errorMessage"], "--failed --json reason")

    # --failed table: the header and one row, with its REASON.
    out = d.cli_ok("--describe", "--failed").stdout
    print(out, flush=True)
    lines = out.rstrip("\n").split("\n")
    eq(len(lines), 2, "--describe --failed: header and one row")
    eq(lines[0].split(), ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET",
                          "DESTINATION-OFFSET", "LAG", "LAG-TIME", "STATE",
                          "REASON"], "--failed table header")
    cells = lines[1].split(None, 8)
    eq(cells[:3] + [cells[7]], ["m1", "mixed", "1", "FAILED"],
       "--failed table row")
    eq(cells[8], fw["errorMessage"], "--failed table REASON")
    # The same with --mirror naming the mirror (LAG-TIME, the age of the
    # newest copied record, moves between the two calls: compared apart).
    def no_lag_time(text):
        rows = [ln.split(None, 8) for ln in text.rstrip("\n").split("\n")]
        return [r[:6] + r[7:] for r in rows]
    out2 = d.cli_ok("--describe", "--mirror", "m1", "--failed").stdout
    eq(no_lag_time(out2), no_lag_time(out), "--failed with --mirror")

    # --summary: STATE is the topic's state.
    out = d.cli_ok("--describe", "--summary").stdout
    print(out, flush=True)
    w = words(out)
    eq(w[0][:7], ["MIRROR", "TOPIC", "STATE", "PARTITIONS", "STATES", "LAG",
                  "LAG-TIME"], "summary header")
    sm = {r[1]: r for r in w[1:]}
    eq(sm["calm"][2:5], ["MIRRORING", "2", "MIRRORING=2"], "calm summary")
    eq(sm["mixed"][2:5], ["MIXED", "3", "FAILED=1,MIRRORING=2"],
       "mixed summary")
    # --failed --summary: only the topic with a FAILED partition, counting
    # its FAILED partitions, its state still MIXED.
    w = words(d.cli_ok("--describe", "--summary", "--failed").stdout)
    eq([r[:5] for r in w[1:]], [["m1", "mixed", "MIXED", "1", "FAILED=1"]],
       "--failed --summary")

    # Usage.
    for args in (["--list", "--failed"],
                 ["--pause", "--mirror", "m1", "--topic", "calm",
                  "--failed"]):
        r = d.cli(*args)
        eq(r.returncode, 2, "usage error exit status for %s" % args)
        h.check("--failed" in r.stderr, "the usage error names --failed: %r"
                % r.stderr)
    d.stop()
    print("PASS: --describe --failed and MIXED topic state", flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
