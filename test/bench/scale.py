#!/usr/bin/env python3
"""make bench-scale: thousands of partitions in one mirrord.

Mock part (always): two librdkafka mock clusters (test/tools/mockcluster, 3
brokers each), SCALE_PARTITIONS partitions (default 10,000: 50 topics x
200) created on both, SCALE_RECORDS records written to every source
partition (corpusgen), then one mirror adds them all with one topic
pattern.  Real-Kafka part (SCALE_KAFKA_PARTITIONS > 0, e.g. 2000): the same
on two single-broker Apache Kafka 4.4.0 clusters (test/kafka/realkafka.py),
mirrord creating the destination topics itself.

Reported for each:
  * time from `kafka-mirrors --add` until DescribeMirrors shows every
    partition MIRRORING with lag 0 (polled once a second, so +-1 s);
  * mirrord's CPU over that catch-up (utime + stime, /proc/PID/stat);
  * idle CPU: the share of one core mirrord uses over SCALE_IDLE_S seconds
    (default 30) once everything is caught up and nothing is written;
  * RSS (VmRSS) after the idle period and the peak (VmHWM);
  * DescribeMirrors latency for every partition: the wall time of
    `kafka-mirrors --describe --json` (a separate process: its start-up
    and JSON printing are included), median and worst of 5;
  * a restart (SCALE_RESTART=0 skips it): mirrord stopped, as many
    records again written to every source partition, mirrord started;
    the time from the start until every partition is MIRRORING with lag 0
    again (each reads its destination end, proves it and copies what is
    new) and mirrord's CPU over it; the ends of every eighth partition
    are compared.

Targets for 10,000 partitions: all MIRRORING with lag 0 in
< 60 s, idle CPU < 2% of a core, RSS < 200 MB, DescribeMirrors < 1 s.
Nothing here asserts a speed; it fails only when the mirror does not get
there in SCALE_TIMEOUT seconds (default 600) or data is missing.
SCALE_FSYNC=0 runs mirrord with storage.fsync false, to see what limits
catch-up once the metadata log's fsyncs are out of the way (the state
changes, one per partition at least, share grouped fsyncs off the event
loop).
SCALE_FETCH_SESSIONS=0 sets mirror.fetch.sessions false (Fetch requests
listing every partition, as before KIP-227 sessions); either way the idle
Fetch traffic is reported (requests and request bytes per second, from
mirrord_fetch_requests_total and mirrord_fetch_request_bytes_total).
SCALE_PERF=1 records `perf record -g` of mirrord over the catch-up and the
idle period into the test directory (perf.data.catchup, perf.data.idle).
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

NPART = int(os.environ.get("SCALE_PARTITIONS", "10000"))
KPART = int(os.environ.get("SCALE_KAFKA_PARTITIONS", "0"))
RECORDS = int(os.environ.get("SCALE_RECORDS", "2"))
IDLE_S = float(os.environ.get("SCALE_IDLE_S", "30"))
TIMEOUT = float(os.environ.get("SCALE_TIMEOUT", "600"))
PERF = os.environ.get("SCALE_PERF") == "1"
FSYNC = os.environ.get("SCALE_FSYNC", "1") != "0"
SESSIONS = os.environ.get("SCALE_FETCH_SESSIONS", "1") != "0"
RESTART = os.environ.get("SCALE_RESTART", "1") != "0"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def layout(n):
    """(topics, partitions per topic) for n partitions, at most 64 topics
    (corpusgen's limit)."""
    per = 200 if n >= 2000 else max(1, min(n, 50))
    topics = (n + per - 1) // per
    while topics > 64:
        per *= 2
        topics = (n + per - 1) // per
    return topics, per


def describe_timed(d):
    t0 = time.monotonic()
    r = d.cli("--describe", "--json", timeout=120)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        h.fail("kafka-mirrors --describe exited %d: %s" % (r.returncode, r.stderr))
    return dt, json.loads(r.stdout)


class Perf:
    def __init__(self, pid, name):
        self.p = None
        if PERF:
            out = os.path.join(h.test_dir(), "perf.data.%s" % name)
            self.p = subprocess.Popen(["perf", "record", "--call-graph", "dwarf", "-F", "199",
                                       "-p", str(pid), "-o", out],
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)

    def stop(self):
        if self.p is not None:
            self.p.send_signal(2)
            self.p.wait(60)


def run(label, src_boot, dst_boot, n, topics, prefix, pre_created):
    d = mt.Mirrord(destination=dst_boot, name="mirrord-%s" % label,
                   log_level=os.environ.get("SCALE_LOG_LEVEL", "info"), start=False)
    if not FSYNC:
        with open(d.config_path) as f:
            cfg = f.read()
        with open(d.config_path, "w") as f:
            f.write(cfg.replace("storage:\n", "storage:\n  fsync: false\n", 1))
    d.start()
    pid = d.proc.pid
    d.create("scale", {"bootstrap.servers": src_boot,
                       "mirror.fetch.sessions": "true" if SESSIONS else "false"})
    want = n
    cpu0 = cpu_s(pid)
    perf = Perf(pid, "%s-catchup" % label)
    t0 = time.monotonic()
    d.cli_ok("--add", "--mirror", "scale", "--topic", "%s.*" % prefix)
    lat, last = wait_all(d, label, want, t0)
    catchup = time.monotonic() - t0
    catchup_cpu = cpu_s(pid) - cpu0
    perf.stop()
    # Metadata writes the loop waited for (the rest go in groups off it).
    loop_writes = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total")
    print("  %s catch-up: %d metadata writes on the event loop, %d groups "
          "off it" % (label, loop_writes, mt.metric_value(
              d, "mirrord_metadata_log_groups_total")), flush=True)
    # Every record is there (the describe said lag 0; check the ends too).
    c = kraw.Cluster(dst_boot)
    short = []
    for t, np_ in topics:
        for p in range(0, np_, max(1, np_ // 8)):
            hi = c.offsets(t, p)[1]
            if hi < RECORDS:
                short.append((t, p, hi))
    c.close()
    if short:
        h.fail("%s: destination partitions short of %d records: %s"
               % (label, RECORDS, short[:10]))
    perf = Perf(pid, "%s-idle" % label)
    f0 = fetch_traffic(d)
    i0, it0 = cpu_s(pid), time.monotonic()
    time.sleep(IDLE_S)
    idle_s = time.monotonic() - it0
    idle = (cpu_s(pid) - i0) / idle_s
    f1 = fetch_traffic(d)
    perf.stop()
    freq = {k: (f1[k] - f0[k]) / idle_s for k in f0}
    nreq = freq["full"] + freq["incremental"]
    print("  %s idle Fetch traffic: %.1f requests/s (%.1f full, %.1f incremental), "
          "%.0f request bytes/s, %.0f bytes a request" % (
              label, nreq, freq["full"], freq["incremental"], freq["bytes"],
              freq["bytes"] / nreq if nreq else 0), flush=True)
    lats = sorted(describe_timed(d)[0] for _ in range(5))
    rss, hwm = status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM")
    d.stop()
    restart_s = restart_cpu = None
    if RESTART:
        # A restart with RECORDS more records a partition written while
        # mirrord was down: every partition reads its destination end
        # again, proves it and copies what is new.
        produce(src_boot, topics, "%s source, while mirrord is stopped" % label)
        t1 = time.monotonic()
        d.start()
        pid = d.proc.pid
        perf = Perf(pid, "%s-restart" % label)
        wait_all(d, "%s restart" % label, want, t1)
        restart_s = time.monotonic() - t1
        restart_cpu = cpu_s(pid)
        perf.stop()
        same_ends(src_boot, dst_boot, topics, label)
        d.stop()
    return {"restart_s": restart_s, "restart_cpu_s": restart_cpu,
"label": label + ("" if FSYNC else " (no fsync)") +
            ("" if SESSIONS else " (no sessions)"), "partitions": n, "catchup_s": catchup,
            "catchup_cpu_s": catchup_cpu, "idle_core_pct": idle * 100,
            "rss_mb": rss / 1024.0, "hwm_mb": hwm / 1024.0,
            "describe_median_s": lats[2], "describe_max_s": lats[-1],
            "describe_during_catchup_max_s": max(lat), "states": last,
            "fetch_sessions": SESSIONS, "catchup_loop_writes": loop_writes,
            "idle_fetch_requests_per_s": nreq,
            "idle_fetch_request_bytes_per_s": freq["bytes"]}


def wait_all(d, label, want, t0):
    """Describes until every partition is MIRRORING with lag 0: (the
    describe latencies, the last states)."""
    lat = []
    last = {}
    next_print = t0 + 5
    while True:
        dt, parts = describe_timed(d)
        lat.append(dt)
        states = {}
        for p in parts:
            k = p["state"] if p["state"] != "MIRRORING" or p["lag"] == 0 \
                else "MIRRORING(lag>0)"
            states[k] = states.get(k, 0) + 1
        last = states
        now = time.monotonic()
        if states.get("MIRRORING", 0) == want and len(parts) == want:
            return lat, last
        if now > next_print:
            print("  %s +%.0fs: %s (describe %.2fs)" % (label, now - t0, states, dt),
                  flush=True)
            next_print = now + 5
        if now - t0 > TIMEOUT:
            h.fail("%s: not every partition MIRRORING with lag 0 after %.0fs: %s; "
                   "log %s" % (label, TIMEOUT, states, d.proc.log_path))
        if not d.proc.alive():
            h.fail("mirrord exited: %s" % d.proc.tail())
        time.sleep(max(0.0, 1.0 - dt))


def same_ends(src_boot, dst_boot, topics, label):
    """Every eighth partition ends at the same offset on both sides."""
    s, t = kraw.Cluster(src_boot), kraw.Cluster(dst_boot)
    diff = []
    for name, np_ in topics:
        for p in range(0, np_, max(1, np_ // 8)):
            a, b = s.offsets(name, p)[1], t.offsets(name, p)[1]
            if a != b:
                diff.append((name, p, a, b))
    s.close()
    t.close()
    if diff:
        h.fail("%s: source and destination ends differ after the restart "
               "(topic, partition, source, destination): %s" % (label, diff[:10]))


def fetch_traffic(d):
    """Fetch requests by kind and their bytes so far (mirror "scale")."""
    out = {"full": 0.0, "incremental": 0.0, "bytes": 0.0}
    for line in d.metrics().splitlines():
        if not line.startswith("mirrord_fetch_request") or \
                'mirror="scale"' not in line:
            continue
        v = float(line.rsplit(" ", 1)[1])
        if line.startswith("mirrord_fetch_request_bytes_total"):
            out["bytes"] += v
        elif 'result="full"' in line:
            out["full"] += v
        elif 'result="incremental"' in line:
            out["incremental"] += v
    return out


def produce(boot, topics, what):
    names = [t for t, _ in topics]
    per = topics[0][1]
    mib = RECORDS * len(names) * per * 330 / 1048576.0
    t0 = time.monotonic()
    gen = subprocess.run([h.build_path("test", "bench", "corpusgen"), "-b", boot,
                          "-t", ",".join(names), "-p", str(per),
                          "-m", "%.3f" % mib, "-z", "lz4"],
                         capture_output=True, text=True, timeout=900)
    if gen.returncode != 0:
        h.fail("corpusgen (%s): %s" % (what, gen.stderr[-2000:]))
    corpus = json.loads(gen.stdout.strip().splitlines()[-1])
    print("%s: %d records written in %.1fs" % (what, corpus["messages"],
                                               time.monotonic() - t0), flush=True)
    return corpus


def main():
    results = []
    if NPART > 0:
        nt, per = layout(NPART)
        topics = [("scale-%02d" % i, per) for i in range(nt)]
        n = nt * per
        mc = MockCluster(clusters=2, brokers=3,
                         log_path=os.path.join(h.test_dir(), "mock.log"),
                         timeout=120)
        for c in (0, 1):
            for t, np_ in topics:
                mc.cmd("topic %d %s %d random" % (c, t, np_), timeout=120)
        produce(mc.bootstrap(0), topics, "mock source, %d partitions" % n)
        results.append(run("mock", mc.bootstrap(0), mc.bootstrap(1), n, topics,
                           "scale-", True))
        mc.close()
    if KPART > 0:
        nt, per = layout(KPART)
        topics = [("kscale-%02d" % i, per) for i in range(nt)]
        n = nt * per
        src, dst = h.private_kafka(2, heap_mb=int(os.environ.get(
            "SCALE_HEAP_MB", "1024")), extra_props={
            "log.retention.ms": "-1",
            "log.message.timestamp.before.max.ms": "9223372036854775807",
            "log.segment.bytes": "1048576",
            "log.index.size.max.bytes": "65536"})
        for t, np_ in topics:
            src.create_topic(t, partitions=np_, configs={"retention.ms": "-1"},
                             timeout=300)
        produce(src.bootstrap, topics, "Kafka source, %d partitions" % n)
        results.append(run("kafka", src.bootstrap, dst.bootstrap, n, topics,
                           "kscale-", False))

    print("\n%-16s %10s %11s %12s %10s %8s %8s %14s %14s %10s %12s" % (
        "where", "partitions", "catch-up s", "catch-up CPU", "idle core",
        "RSS", "peak", "describe med", "describe max", "restart s",
        "restart CPU"))
    for r in results:
        rs = ("%10.1f %11.1fs" % (r["restart_s"], r["restart_cpu_s"])
              if r["restart_s"] is not None else "%10s %12s" % ("-", "-"))
        print("%-16s %10d %11.1f %11.1fs %9.2f%% %6.0fMB %6.0fMB %13.3fs %13.3fs %s" % (
            r["label"], r["partitions"], r["catchup_s"], r["catchup_cpu_s"],
            r["idle_core_pct"], r["rss_mb"], r["hwm_mb"], r["describe_median_s"],
            r["describe_max_s"], rs))
    print("\nTargets (10,000 partitions): catch-up < 60 s, idle < 2% "
          "of a core, RSS < 200 MB, DescribeMirrors < 1 s.")
    out = h.build_path("test", "bench", "results-scale.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print("results: %s" % out, flush=True)


if __name__ == "__main__":
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    sys.stdout.flush()
    h._kill_all()
    os._exit(code)
