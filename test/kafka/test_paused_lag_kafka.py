#!/usr/bin/env python3
"""A paused topic's lag is real, and so is the failover report of what it
did not copy: real Apache Kafka (the shared pair), a mirror with
mirror.metadata.refresh.interval.ms 2000 and mirror.fetch.wait.max.ms 100,
mirrord with pipeline.request_timeout_ms 5000.

  * a one-partition topic is copied (300 records) and caught up, then
    kafka-mirrors --pause makes it PAUSED; 500 more records are written
    to the source;
  * within 2 x the refresh interval (+ 2 s for the polling)
    kafka-mirrors --describe shows the partition PAUSED with
    SOURCE-OFFSET 800, DESTINATION-OFFSET 300 and LAG 500, LAG-TIME not
    0s; --describe --json has state and mirrorState PAUSED, stalled
    false, lag 500, sourceOffset 800 and a sourceOffsetAgeMs no older
    than 2 x the refresh interval (the source end read by ListOffsets
    while paused); GET /mirrors/<name>/ready answers 503 (a paused
    partition is not current);
  * kafka-mirrors --remove --wait stops it and exits 5 (STOPPED, but
    source offsets are known not copied); its report says 500 source
    offset(s) not copied, LAST-MIRRORED-OFFSET 299, SOURCE-HIGH-WATERMARK
    800, NOT-COPIED 500;
  * the destination holds exactly the 300 copied records.
"""

import json
import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
M = "pl"
T = "pl-%s" % RUN
REFRESH_MS = 2000


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, dst = h.real_kafka(2)
    src.create_topic(T, partitions=1)
    d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=mt.STALL_YAML)
    d.create(M, mt.stall_mirror_configs(src.bootstrap, **{
        "mirror.metadata.refresh.interval.ms": str(REFRESH_MS)}))
    mt.produce_tagged(src.bootstrap, T, 0, 300, "copied", keyed=True)
    d.cli_ok("--add", "--mirror", M, "--topic", T)
    mt.wait_caught_up(d, M, 120, "%s caught up" % T, count=1)
    before = mt.read_partition(src.bootstrap, T, 0, "pl-a-" + RUN)
    eq(len(before), 300, "records copied before the pause")

    d.cli_ok("--pause", "--mirror", M, "--topic", T)
    h.wait_for(lambda: d.states(M) == {(T, 0): "PAUSED"}, 60, "%s PAUSED" % T)
    mt.produce_tagged(src.bootstrap, T, 0, 500, "late", keyed=True)
    t0 = time.monotonic()
    eq(mt.end_offset(src.bootstrap, T, 0), 800, "the source's end")

    # The describe table and JSON: PAUSED, lag 500, a fresh source end.
    last = {}

    def real_lag():
        out, rows = mt.describe_table(d, M)
        last["out"] = out
        r = rows.get((T, 0), {})
        return (r.get("STATE"), r.get("SOURCE-OFFSET"),
                r.get("DESTINATION-OFFSET"), r.get("LAG")) == \
            ("PAUSED", "800", "300", "500") and r
    try:
        row = h.wait_for(real_lag, 2 * REFRESH_MS / 1000.0 + 2, "lag 500",
                         interval=0.2)
    except AssertionError:
        h.fail("%.1f s after 500 records were written to the paused topic's "
               "source, kafka-mirrors --describe shows:\n%s\nwant %s-0 PAUSED "
               "with SOURCE-OFFSET 800, DESTINATION-OFFSET 300, LAG 500"
               % (time.monotonic() - t0, last.get("out"), T))
    print(last["out"], flush=True)
    h.check(row["LAG-TIME"] not in ("-", "0s"),
            "a paused partition 500 records behind shows LAG-TIME %r:\n%s"
            % (row["LAG-TIME"], last["out"]))
    r = d.row(M, T, 0)
    show = json.dumps(r)
    eq((r["state"], r.get("mirrorState"), r.get("stalled"), r["lag"],
        r["sourceOffset"], r["destinationOffset"]),
       ("PAUSED", "PAUSED", False, 500, 800, 300),
       "--describe --json of the paused partition (%s): state, mirrorState, "
       "stalled, lag, sourceOffset, destinationOffset" % show)
    age = r.get("sourceOffsetAgeMs")
    h.check(isinstance(age, int) and 0 <= age <= 2 * REFRESH_MS + 1000,
            "the paused partition's sourceOffsetAgeMs is %r, want a source "
            "end read within 2 x %d ms: %s" % (age, REFRESH_MS, show))
    code, body = mt.http_get(d.metrics_port, "/mirrors/%s/ready" % M)
    h.check(code == 503 and body.strip(),
            "GET /mirrors/%s/ready answered %d %r for a paused mirror 500 "
            "records behind, want 503 saying why" % (M, code, body))

    # Failover: exit 5, 500 not copied.
    r = d.cli("--remove", "--mirror", M, "--topic", T, "--wait", "60")
    print(r.stdout, r.stderr, flush=True)
    h.check(r.returncode == 5,
            "kafka-mirrors --remove --wait of a paused topic with 500 source "
            "offsets not copied exited %d, want 5 (STOPPED, records known "
            "not copied):\nstdout: %s\nstderr: %s"
            % (r.returncode, r.stdout, r.stderr))
    lines = r.stdout.rstrip("\n").split("\n")
    eq(lines[1], "Failover report of mirror %s: 1 partition(s) STOPPED, 500 "
       "source offset(s) not copied" % M, "the report's summary line")
    head = lines[2].split()
    cells = dict(zip(head, lines[3].split()))
    eq((cells.get("TOPIC"), cells.get("PARTITION"),
        cells.get("LAST-MIRRORED-OFFSET"), cells.get("SOURCE-HIGH-WATERMARK"),
        cells.get("NOT-COPIED")), (T, "0", "299", "800", "500"),
       "the report's row (%r)" % lines[3])

    after = mt.read_partition(dst.bootstrap, T, 0, "pl-b-" + RUN)
    eq(after, before, "the destination holds exactly the 300 copied records")
    print("ok")


h.run_main(main)
