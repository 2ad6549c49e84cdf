#!/usr/bin/env python3
"""make bench: mirrord against a consume-and-re-produce baseline.

One corpus (JSON click-stream events from test/bench/corpusgen, identical
records in each variant) is produced into a source mock cluster twice: once
uncompressed and once lz4-compressed.  Each variant is then mirrored to its
own destination cluster by

  * the baseline, test/bench/reproducer: a librdkafka consumer feeding a
    librdkafka producer with the same codec (MirrorMaker 2's job without
    the JVM), and
  * mirrord itself (the real daemon, driven by kafka-mirrors),

in the same run on the same mock clusters (test/tools/mockcluster).  For each it
reports CPU seconds per GB of record payload (user + system time of that
process only: wait4 rusage for the baseline, /proc/PID/stat deltas for
mirrord), MB/s of payload from the first fetch to the last acknowledged
write, peak RSS (VmHWM / ru_maxrss), and the ratios.

The librdkafka mock keeps about 5 MiB per partition, so the corpus is
spread over enough topics and partitions that nothing is dropped; the bench
checks that every destination ends where the source ends.

Environment: BENCH_MB (payload MiB per variant, default 64), BENCH_VARIANTS
(default "none lz4").  Timing lives here and only here: tests assert no
speeds.
"""

import json
import math
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

MB = float(os.environ.get("BENCH_MB", "64"))
VARIANTS = os.environ.get("BENCH_VARIANTS", "none lz4").split()
TOPICS = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def partitions_for(mb):
    # At most ~2.5 MiB of (uncompressed) payload per partition, so the
    # mock's 5 MiB retention never drops anything.
    per_topic = max(4, int(math.ceil(mb / 2.5 / TOPICS)))
    return per_topic


def ends(bootstrap, topics, npart):
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(t, p) for t in topics for p in range(npart)]
    finally:
        c.close()


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def run_baseline(src, dst, topics, codec):
    argv = [h.build_path("test", "bench", "reproducer"), "-s", src, "-d", dst,
            "-t", ",".join(topics), "-z", codec]
    log = open(os.path.join(h.test_dir(), "reproducer-%s.log" % codec), "wb")
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    log.close()
    if status != 0:
        h.fail("reproducer (%s) exited with status %d; see %s"
               % (codec, status, log.name))
    res = json.loads(out.decode().strip().splitlines()[-1])
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": res["wall_s"],
            "process_wall_s": wall, "rss_kb": ru.ru_maxrss,
            "payload_bytes": res["payload_bytes"], "messages": res["messages"]}


def run_mirrord(mc, cluster, src, topics, npart, codec, want):
    dst = mc.bootstrap(cluster)
    d = mt.Mirrord(destination=dst, name="mirrord-%s" % codec, log_level="info")
    d.create("bench", {"bootstrap.servers": src,
                       "mirror.fetch.wait.max.ms": "100"})
    pid = d.proc.pid
    cpu0 = proc_cpu_s(pid)
    t0 = time.monotonic()
    d.cli_ok("--add", "--mirror", "bench", "--topic", ",".join(topics))
    last = [None]

    def done():
        got = [e[1] for e in ends(dst, topics, npart)]
        last[0] = got
        return got == want

    h.wait_for(done, 600, "mirrord (%s) to copy the corpus (last ends %s, "
               "log %s)" % (codec, last[0], d.proc.log_path), interval=0.02)
    wall = time.monotonic() - t0
    cpu = proc_cpu_s(pid) - cpu0
    hwm = proc_hwm_kb(pid)
    d.stop()
    return {"cpu_s": cpu, "wall_s": wall, "rss_kb": hwm}


def main():
    npart = partitions_for(MB)
    ncl = 1 + 2 * len(VARIANTS)
    mc = MockCluster(clusters=ncl, brokers=3,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    src = mc.bootstrap(0)
    results = []
    print("mirrord bench: %.0f MiB of JSON events per variant, %d topics x %d "
          "partitions, librdkafka mock clusters on 127.0.0.1" % (MB, TOPICS, npart),
          flush=True)
    for vi, codec in enumerate(VARIANTS):
        topics = ["bench-%s-%d" % (codec, i) for i in range(TOPICS)]
        base_cl, mirr_cl = 1 + 2 * vi, 2 + 2 * vi
        for c in (0, base_cl, mirr_cl):
            for t in topics:
                mc.cmd("topic %d %s %d" % (c, t, npart))
        gen = subprocess.run(
            [h.build_path("test", "bench", "corpusgen"), "-b", src, "-t",
             ",".join(topics), "-p", str(npart), "-m", str(MB), "-z", codec],
            capture_output=True, text=True, timeout=900)
        if gen.returncode != 0:
            h.fail("corpusgen (%s): %s" % (codec, gen.stderr[-2000:]))
        corpus = json.loads(gen.stdout.strip().splitlines()[-1])
        src_ends = ends(src, topics, npart)
        if any(lo != 0 for lo, _ in src_ends):
            h.fail("the mock dropped corpus data (log start moved): %s; "
                   "lower BENCH_MB" % src_ends)
        want = [hi for _, hi in src_ends]
        if sum(want) != corpus["messages"]:
            h.fail("source holds %d records, corpusgen wrote %d"
                   % (sum(want), corpus["messages"]))
        payload = corpus["payload_bytes"]

        b = run_baseline(src, mc.bootstrap(base_cl), topics, codec)
        got = [e[1] for e in ends(mc.bootstrap(base_cl), topics, npart)]
        if got != want:
            h.fail("baseline (%s) destination ends %s, source %s" % (codec, got, want))
        results.append(dict(b, tool="reproducer", codec=codec, payload=payload))

        m = run_mirrord(mc, mirr_cl, src, topics, npart, codec, want)
        results.append(dict(m, tool="mirrord", codec=codec, payload=payload))
    mc.close()

    print("\n%-8s %-11s %9s %8s %9s %9s %12s %9s" % (
        "codec", "tool", "payload", "wall s", "MB/s", "CPU s", "CPU s/GB",
        "peak RSS"), flush=True)
    for r in results:
        mbs = r["payload"] / 1e6
        r["mb_per_s"] = mbs / r["wall_s"] if r["wall_s"] > 0 else float("inf")
        r["cpu_s_per_gb"] = r["cpu_s"] / (r["payload"] / 1e9)
        print("%-8s %-11s %7.1fMB %8.2f %9.1f %9.2f %12.2f %7.1fMB" % (
            r["codec"], r["tool"], mbs, r["wall_s"], r["mb_per_s"], r["cpu_s"],
            r["cpu_s_per_gb"], r["rss_kb"] / 1024.0))
    print()
    for codec in VARIANTS:
        b = [r for r in results if r["codec"] == codec and r["tool"] == "reproducer"][0]
        m = [r for r in results if r["codec"] == codec and r["tool"] == "mirrord"][0]
        print("%-5s: mirrord uses %.1fx less CPU per GB than the re-producer, "
              "runs at %.2fx its MB/s, peak RSS %.2fx" % (
                  codec, b["cpu_s_per_gb"] / max(m["cpu_s_per_gb"], 1e-9),
                  m["mb_per_s"] / b["mb_per_s"], m["rss_kb"] / max(b["rss_kb"], 1)))
    print("\nNotes: CPU is the mirroring process only (not the mock brokers). "
          "MB/s on the mock is bounded by the mock (one stored entry per "
          "partition per Fetch, one broker thread per cluster), so the CPU "
          "ratio is the meaningful number; the mirrord wall time includes "
          "the bench's 20 ms polling of the destination ends.")
    out = os.path.join(h.build_path("test", "bench"), "results.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print("results: %s" % out)


if __name__ == "__main__":
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    sys.stdout.flush()
    h._kill_all()
    os._exit(code)
