#!/usr/bin/env python3
"""make demo: mirrord mirroring between two local clusters, end to end.

Starts two librdkafka mock clusters (source and destination, 3 brokers
each), mirrord beside the destination, creates a mirror with kafka-mirrors,
adds topics by pattern, produces sample data in every codec, waits for lag
0, prints the describe table, proves that offsets and batch bytes are equal
on both sides, then fails over (--remove) and shows the topics STOPPED.
Everything runs on 127.0.0.1 and stops at the end.
"""

import os
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
RECORDS = 2000


def say(msg):
    print("\n== %s" % msg, flush=True)


def run(cmd, show=True):
    if show:
        print("$ " + " ".join(cmd[:1] + [a if " " not in a else repr(a)
                                          for a in cmd[1:]]), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if show and r.stdout:
        print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        h.fail("%s exited %d: %s" % (cmd[0], r.returncode, r.stderr))
    return r


def main():
    say("starting two local Kafka clusters (librdkafka mock, 3 brokers each)")
    mc = MockCluster(clusters=2, brokers=3,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    src, dst = mc.bootstrap(0), mc.bootstrap(1)
    print("source:      %s\ndestination: %s" % (src, dst))
    topics = ["demo.%s" % c for c in CODECS]
    for c in (0, 1):
        for t in topics:
            mc.cmd("topic %d %s %d" % (c, t, PARTITIONS))

    say("starting mirrord beside the destination")
    d = mt.Mirrord(destination=dst, log_level="info")
    print("mirrord admin port %s, metrics http://127.0.0.1:%d/metrics "
          "(log: %s)" % (d.bootstrap, d.metrics_port, d.proc.log_path))
    cli = [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
           d.bootstrap]

    say("creating the mirror and adding every demo topic by pattern")
    props = os.path.join(d.dir, "demo.properties")
    with open(props, "w") as f:
        f.write("bootstrap.servers=%s\n" % src)
    run(cli + ["--create", "--mirror", "demo", "--mirror-config", props])
    run(cli + ["--add", "--mirror", "demo", "--topic", "demo\\..*"])

    say("producing %d records per topic, one topic per codec" % RECORDS)
    for codec in CODECS:
        lines = []
        for i in range(RECORDS):
            key = "" if i % 10 == 0 else "user-%d" % (i % 97)
            lines.append("%s\t{\"event\":\"click\",\"seq\":%d,\"codec\":\"%s\","
                         "\"page\":\"/products/%d\"}" % (key, i, codec, i % 13))
        r = subprocess.run(
            ["kcat", "-P", "-b", src, "-t", "demo.%s" % codec, "-K", "\t",
             "-X", "compression.codec=%s" % codec, "-X", "linger.ms=5", "-X", "batch.num.messages=100",
             "-H", "source=demo"],
            input="\n".join(lines) + "\n", capture_output=True, text=True,
            timeout=120)
        if r.returncode != 0:
            h.fail("kcat produce (%s): %s" % (codec, r.stderr))
        print("  demo.%-7s %d records (%s)" % (codec, RECORDS, codec))

    say("waiting for lag 0 on every partition")
    source = kraw.Cluster(src)
    want = {(t, p): source.offsets(t, p)[1] for t in topics
            for p in range(PARTITIONS)}

    def caught_up():
        rows = d.describe_json("demo")
        got = {(r["topic"], r["partition"]): r for r in rows}
        return all(k in got and got[k]["destinationOffset"] == v
                   and got[k]["lag"] == 0 and got[k]["state"] == "MIRRORING"
                   for k, v in want.items())
    t0 = time.monotonic()
    h.wait_for(caught_up, 120, "every partition at lag 0 (mirrord log: %s)"
               % d.proc.log_path)
    print("caught up in %.1f s" % (time.monotonic() - t0))
    run(cli + ["--describe", "--mirror", "demo"])

    say("proving offsets and bytes are equal on both sides")
    dest = kraw.Cluster(dst)
    print("%-12s %-9s %-8s %-8s %-14s %-11s %s" % (
        "TOPIC", "PARTITION", "BATCHES", "RECORDS", "OFFSETS-EQUAL",
        "BYTES-EQUAL", "CRC-OK"))
    bad = 0
    for t in topics:
        for p in range(PARTITIONS):
            a = source.batches(t, p)
            b = dest.batches(t, p)
            offsets_equal = [x["base_offset"] for x in a] == \
                [x["base_offset"] for x in b] and source.offsets(t, p) == \
                dest.offsets(t, p)
            bytes_equal = [kraw.records_section(x["raw"]) for x in a] == \
                [kraw.records_section(x["raw"]) for x in b]
            crc_ok = all(x["crc_ok"] for x in b)
            nrec = sum(x["count"] for x in b)
            print("%-12s %-9d %-8d %-8d %-14s %-11s %s" % (
                t, p, len(b), nrec, "yes" if offsets_equal else "NO",
                "yes" if bytes_equal else "NO", "yes" if crc_ok else "NO"))
            if not (offsets_equal and bytes_equal and crc_ok):
                bad += 1
    if bad:
        h.fail("%d partition(s) differ between source and destination" % bad)

    say("failover: kafka-mirrors --remove (the topics become writable)")
    run(cli + ["--remove", "--mirror", "demo", "--topic", "demo\\..*"])
    h.wait_for(lambda: set(d.states("demo").values()) == {"STOPPED"}, 60,
               "every partition STOPPED")
    run(cli + ["--describe", "--mirror", "demo"])
    d.stop()
    mc.close()
    say("done: same offsets, same bytes, failover in one command")


if __name__ == "__main__":
    main()
