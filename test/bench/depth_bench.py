#!/usr/bin/env python3
"""make bench-depth: pipelined produce measured on real Kafka 4.4.0.

A small-batch corpus (1 KB records, one record per batch, linger 0: a
source written by many small producers) is written once into a source
cluster; then mirrord copies it into a destination cluster of its own once
per value of pipeline.max_inflight_batches_per_partition in BENCH_DEPTHS
(default "1 5": stop-and-wait, then the default pipelining), one run after
the other on the same machine, in this one invocation.  For each: MB/s of
record payload up to the last destination end equal to the source's,
timed from the first record on the destination (start-up is not the
copy), CPU seconds per GB (user + system time of mirrord, from
/proc/PID/stat), peak RSS (VmHWM), and the ratios to the first depth.

Environment: BENCH_SMALL_MB (MiB of payload, default 8), BENCH_PARTITIONS
(default 4), BENCH_DEPTHS.  Timing lives here only: tests assert no speeds.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

MB = float(os.environ.get("BENCH_SMALL_MB", "8"))
NPART = int(os.environ.get("BENCH_PARTITIONS", "4"))
DEPTHS = [int(x) for x in os.environ.get("BENCH_DEPTHS", "1 5").split()]
RECORD = 1000
TOPIC = "small"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def ends(bootstrap):
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(TOPIC, p)[1] for p in range(NPART)]
    finally:
        c.close()


def write_corpus(bootstrap, n):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "linger.ms": 0, "batch.num.messages": 1,
                  "enable.idempotence": True, "compression.type": "none"})
    bad = []
    for i in range(n):
        v = (b'{"event":%d,"user":"u%05d","page":"/p/%d","pad":"' %
             (i, i % 9973, i % 97))
        v = v + b"x" * (RECORD - len(v) - 2) + b'"}'
        while True:
            try:
                p.produce(TOPIC, value=v, partition=i % NPART,
                          on_delivery=lambda e, _m: e and bad.append(e))
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(300) or bad:
        h.fail("writing the corpus: %r" % bad[:3])


def run(depth, src, dst, want, payload):
    d = mt.Mirrord(destination=dst.bootstrap, name="mirrord-depth%d" % depth,
                   log_level="info",
                   extra_yaml="pipeline:\n  max_inflight_batches_per_partition: %d\n"
                   % depth)
    d.create("bench", {"bootstrap.servers": src.bootstrap,
                       "mirror.fetch.wait.max.ms": "100"})
    pid = d.proc.pid
    d.cli_ok("--add", "--mirror", "bench", "--topic", TOPIC)
    # The clock starts at the first record on the destination: start-up
    # (Metadata, InitProducerId on a fresh cluster) is not the copy.
    h.wait_for(lambda: sum(ends(dst.bootstrap)) > 0, 300,
               "mirrord (depth %d) to write its first batch (log %s)"
               % (depth, d.proc.log_path), interval=0.01)
    cpu0 = proc_cpu_s(pid)
    bcpu0 = (proc_cpu_s(src.pid), proc_cpu_s(dst.pid))
    t0 = time.monotonic()
    first = sum(ends(dst.bootstrap))
    h.wait_for(lambda: ends(dst.bootstrap) == want, 1200,
               "mirrord (depth %d) to copy the corpus (log %s)"
               % (depth, d.proc.log_path), interval=0.02)
    wall = time.monotonic() - t0
    cpu = proc_cpu_s(pid) - cpu0
    bcpu = (proc_cpu_s(src.pid) - bcpu0[0], proc_cpu_s(dst.pid) - bcpu0[1])
    payload = payload * (sum(want) - first) / sum(want)
    hwm = proc_hwm_kb(pid)
    peak = None
    reqs = batches = fetches = 0
    for line in d.metrics().splitlines():
        if line.startswith("mirrord_produce_partition_inflight_batches_peak"):
            peak = int(float(line.split()[-1]))
        elif line.startswith("mirrord_produce_requests_total"):
            reqs += int(float(line.split()[-1]))
        elif line.startswith("mirrord_produce_request_batches_total"):
            batches += int(float(line.split()[-1]))
        elif line.startswith("mirrord_fetch_requests_total"):
            fetches += int(float(line.split()[-1]))
    d.stop()
    return {"depth": depth, "wall_s": wall, "cpu_s": cpu, "rss_kb": hwm,
            "mb_s": payload / 1e6 / wall,
            "cpu_s_gb": cpu / (payload / 1e9), "peak": peak,
            "reqs": reqs, "per_req": batches / reqs if reqs else 0,
            "fetches": fetches, "src_cpu_s": bcpu[0], "dst_cpu_s": bcpu[1]}


def main():
    n = int(MB * 1024 * 1024 / RECORD)
    clusters = h.private_kafka(1 + len(DEPTHS), "plaintext")
    src, dsts = clusters[0], clusters[1:]
    src.create_topic(TOPIC, NPART)
    print("bench-depth: %d records of %d bytes, one per batch, %d partitions, "
          "Kafka 4.4.0 on 127.0.0.1; depths %s" % (n, RECORD, NPART, DEPTHS),
          flush=True)
    t0 = time.monotonic()
    write_corpus(src.bootstrap, n)
    want = ends(src.bootstrap)
    if sum(want) != n:
        h.fail("the source holds %d records, want %d" % (sum(want), n))
    print("corpus written in %.1f s" % (time.monotonic() - t0), flush=True)
    payload = n * RECORD
    res = []
    for depth, dst in zip(DEPTHS, dsts):
        dst.create_topic(TOPIC, NPART)
        r = run(depth, src, dst, want, payload)
        res.append(r)
        print("depth %d: %.1f MB/s, %.2f CPU-s/GB, %.1f s, CPU %.2f s, peak RSS "
              "%d KiB, peak batches of a partition in flight %s, %d Produce "
              "requests of %.1f batches on average, %d Fetch requests; "
              "the brokers' CPU over the copy: source %.2f s, destination "
              "%.2f s"
              % (depth, r["mb_s"], r["cpu_s_gb"], r["wall_s"], r["cpu_s"],
                 r["rss_kb"], r["peak"], r["reqs"], r["per_req"],
                 r["fetches"], r["src_cpu_s"], r["dst_cpu_s"]), flush=True)
    base = res[0]
    for r in res[1:]:
        print("depth %d vs %d: %.2fx MB/s, %.2fx CPU-s/GB"
              % (r["depth"], base["depth"], r["mb_s"] / base["mb_s"],
                 r["cpu_s_gb"] / base["cpu_s_gb"] if base["cpu_s_gb"] else 0),
              flush=True)


if __name__ == "__main__":
    h.run_main(main)
