#!/usr/bin/env python3
"""make bench-kafka: mirrord, the re-producer and MirrorMaker 2 on real Kafka.

Two real Apache Kafka 4.4.0 clusters (test/kafka/realkafka.py, one broker
each, on 127.0.0.1): a source and one destination.  For every corpus
variant the same records (test/bench/corpusgen, same seed) are written
three times into the source, once per tool, under topic names that carry
the tool's name (b<run>-<variant>-<tool>-<i>), so each tool mirrors its own
copy into its own topics on the one destination broker, and the tools run
one after the other (never two at once on the 2 cores):

  * mirrord        the daemon, driven by kafka-mirrors (batches copied as
                   they are, so the destination keeps the source's codec);
  * reproducer     test/bench/reproducer: a librdkafka consumer feeding a
                   librdkafka producer with the variant's codec;
  * mirrormaker2   Apache Kafka's connect-mirror (MM2_VERSION, Maven
                   Central, test/bench/mm2-pom.xml) in dedicated mode
                   (org.apache.kafka.connect.mirror.MirrorMaker),
                   IdentityReplicationPolicy, its producer set to the
                   variant's codec, tasks.max 2, JVM options of
                   connect-mirror-maker.sh (-Xms256M -Xmx2G, G1).

Variants (BENCH_VARIANTS, default "none lz4 zstd small"): none, lz4 and
zstd are written in large batches (linger 50 ms, 256 KiB); small is
uncompressed in 1 KiB batches with linger 0 (-B 1024), what a
latency-bound producer writes.

Numbers, per tool and variant:
  * copy window: from the first record seen on the destination to the
    moment every destination partition ends where the source ends (the
    destination end offsets are polled every 50 ms); MB/s is the record
    payload (keys + values, uncompressed) over that window;
  * CPU-s/GB: utime + stime of the mirroring process (/proc/PID/stat)
    over the copy window, per GB of payload; "start CPU" is what the
    process spent before the window (the JVM's start-up for MM2);
  * peak RSS: VmHWM of the process at the end (ru_maxrss for the
    re-producer, which exits by itself).

Each destination is checked: end offsets equal the source's, and the
codecs of the first batch of every partition: the source's for mirrord,
the variant's (or none, for a batch its producer did not compress because
compressing did not shrink it) for the others.  The JVM
brokers' CPU is not counted for anyone.

Environment: BENCH_MB (MiB of payload per large-batch variant, default
48), BENCH_SMALL_MB (small-batch variant, default 8), BENCH_VARIANTS,
BENCH_TOOLS (default "mirrord mirrord-merge reproducer mirrormaker2";
mirrord-merge is mirrord with mirror.coalesce.max.bytes set to
BENCH_MERGE_BYTES, default 524288, run on the uncompressed and small-batch
corpora only), BENCH_PARTITIONS
(per topic, default 4; 2 topics), BENCH_HEAP_MB (broker heap, default
512), BENCH_MM2_LIBS (a directory of the connect-mirror jars; default
$MIRRORD_KAFKA_CACHE/mm2-4.3.1-libs, fetched there by Maven when missing),
BENCH_MIRRORD_OTHER (the path of another mirrord binary, e.g. a build of
an older commit: run as one more tool, "mirrord-other", after the others unless
BENCH_TOOLS places it, so both see the same machine), BENCH_PERF=1 (`perf record --call-graph dwarf` of mirrord while it copies
each corpus, into perf.data.<variant> in the test directory; perf's own
CPU is not mirrord's, but its sampling slows mirrord a little: do not quote
numbers of such a run) or BENCH_PERF=stat (`perf stat` counts of mirrord's
syscalls, page faults and context switches into perf.stat.<variant>: counts
do not depend on how loaded the machine is, CPU seconds do) or
BENCH_PERF=faults (where mirrord's page faults happen, perf.faults.<variant>),
BENCH_FLOOR_MB (MiB moved by test/bench/loopfloor, three times, before
the tools: the CPU-s/GB of a process that only recv()s and send()s between
two loopback connections, the floor under every tool here; default 1024,
0 skips it),
BENCH_ROUNDS (default 1: each variant's tools run that many times, in
reverse order every other round, each round on its own copy of the corpus;
medians and per-round ratios to mirrord are printed, and the closing
"mirrord vs" lines give the medians of those ratios).  The defaults run in about 4 minutes
on 2 cores (15 when other work loads them), brokers' start included; the
README quotes them and a BENCH_MB=256 run of mirrord and the re-producer.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

MM2_VERSION = "4.3.1"
FLOOR_MB = int(os.environ.get("BENCH_FLOOR_MB", "1024"))
FLOOR_RUNS = 3
MB = float(os.environ.get("BENCH_MB", "48"))
SMALL_MB = float(os.environ.get("BENCH_SMALL_MB", "8"))
VARIANTS = os.environ.get("BENCH_VARIANTS", "none lz4 zstd small").split()
TOOLS = os.environ.get("BENCH_TOOLS",
                       "mirrord mirrord-merge reproducer mirrormaker2").split()
# mirrord-merge: mirrord with mirror.coalesce.max.bytes (BENCH_MERGE_BYTES,
# default 524288); it runs on the uncompressed corpora only (compressed
# batches are never merged: it would be mirrord again).
MERGE_BYTES = int(os.environ.get("BENCH_MERGE_BYTES", "524288"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1"))
CUR_ROUND = [0]  # the round being run (perf output names)
TOPICS = 2
NPART = int(os.environ.get("BENCH_PARTITIONS", "4"))
HEAP_MB = int(os.environ.get("BENCH_HEAP_MB", "512"))
COPY_TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "600"))
PERF = os.environ.get("BENCH_PERF", "")
PERF_SYSCALLS = ("recvfrom", "readv", "read", "writev", "write", "sendmsg",
                 "epoll_wait", "ioctl", "setsockopt", "fsync", "fdatasync",
                 "mmap", "munmap", "brk")
OTHER = os.environ.get("BENCH_MIRRORD_OTHER")
if OTHER and "mirrord-other" not in TOOLS:
    TOOLS.append("mirrord-other")
CLK_TCK = os.sysconf("SC_CLK_TCK")
RUN = "%d" % (os.getpid() % 100000)
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def variant_codec(v):
    return "none" if v == "small" else v


def proc_stat(pid):
    """(state, CPU seconds) from /proc/PID/stat; a zombie still has both."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return fields[0], (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_hwm_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Ends:
    """Destination end offsets, one kraw.Cluster kept once every topic is
    known (tools create their destination topics as they start)."""

    def __init__(self, bootstrap, topics):
        self.bootstrap, self.topics, self.c = bootstrap, topics, None

    def get(self):
        try:
            if self.c is None:
                c = kraw.Cluster(self.bootstrap)
                if any(c.partitions.get(t) != NPART for t in self.topics):
                    c.close()
                    return None
                self.c = c
            return [self.c.offsets(t, p)[1] for t in self.topics
                    for p in range(NPART)]
        except (OSError, ValueError, KeyError, EOFError, ConnectionError):
            if self.c is not None:
                self.c.close()
                self.c = None
            return None

    def close(self):
        if self.c is not None:
            self.c.close()


def watch(pid, dst, topics, want, what, log_path, exited=None):
    """Poll until the destination ends equal want; returns the window."""
    _, cpu0 = proc_stat(pid)
    t0 = time.monotonic()
    ends = Ends(dst, topics)
    first = None
    last = None
    deadline = t0 + COPY_TIMEOUT
    try:
        while True:
            state, cpu = proc_stat(pid)
            now = time.monotonic()
            got = ends.get()
            if got is not None:
                last = got
                if first is None and sum(got) > 0:
                    first = (now, cpu)
                if got == want:
                    hwm = proc_hwm_kb(pid)
                    state, cpu = proc_stat(pid)
                    break
            if state == "Z" and (exited is None or not exited()):
                h.fail("%s exited before copying everything (ends %s, want %s); "
                       "see %s" % (what, last, want, log_path))
            if now > deadline:
                h.fail("%s did not copy the corpus in %.0fs (ends %s, want %s); "
                       "see %s" % (what, COPY_TIMEOUT, last, want, log_path))
            time.sleep(0.05)
    finally:
        ends.close()
    if first is None:
        first = (t0, cpu0)
    return {"window_s": max(now - first[0], 1e-3), "cpu_s": cpu - first[1],
            "start_cpu_s": first[1], "rss_kb": hwm}


# ------------------------------------------------------------------ tools

class OtherMirrord(mt.Mirrord):
    """A mirrord binary other than this build's (BENCH_MIRRORD_OTHER)."""

    def start(self, wait=True):
        self.starts += 1
        self.proc = h.Proc([OTHER, "-c", self.config_path],
                           name="%s-%d" % (self.name, self.starts))
        if wait:
            h.wait_for(self._answers, 30, "mirrord to answer on %s (log: %s)"
                       % (self.bootstrap, self.proc.log_path))
        return self.proc


def run_mirrord(src, dst, topics, want, variant, other=False, merge=False):
    rnd = "-r%d" % CUR_ROUND[0] if CUR_ROUND[0] else ""
    extra = {}
    if merge:
        extra["mirror.coalesce.max.bytes"] = str(MERGE_BYTES)
        d = mt.Mirrord(destination=dst.bootstrap, name="mirrord-merge-%s%s"
                       % (variant, rnd), log_level="info")
    elif other:
        d = OtherMirrord(destination=dst.bootstrap, name="mirrord-other-%s%s"
                         % (variant, rnd), log_level="info")
    else:
        d = mt.Mirrord(destination=dst.bootstrap, name="mirrord-%s%s"
                       % (variant, rnd), log_level="info")
    d.create("bench", dict({"bootstrap.servers": src.bootstrap,
                            "mirror.fetch.wait.max.ms": "100"}, **extra))
    perf = None
    if PERF in ("1", "faults", "stat"):
        name = "%s%s%s" % ("other-" if other else "", variant,
                           ".r%d" % CUR_ROUND[0] if CUR_ROUND[0] else "")
        if PERF == "1":
            argv = ["perf", "record", "--call-graph", "dwarf", "-F", "499",
                    "-o", os.path.join(h.test_dir(), "perf.data." + name)]
        elif PERF == "faults":
            argv = ["perf", "record", "--call-graph", "dwarf", "-e",
                    "page-faults", "-o",
                    os.path.join(h.test_dir(), "perf.faults." + name)]
        else:
            argv = ["perf", "stat", "-e", ",".join(
                "syscalls:sys_enter_" + c for c in PERF_SYSCALLS),
                "-e", "page-faults,context-switches,task-clock",
                "-o", os.path.join(h.test_dir(), "perf.stat." + name)]
        perf = subprocess.Popen(argv + ["-p", str(d.proc.pid)],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    d.cli_ok("--add", "--mirror", "bench", "--topic", ",".join(topics))
    try:
        r = watch(d.proc.pid, dst.bootstrap, topics, want,
                  "mirrord (%s)" % variant, d.proc.log_path)
    finally:
        if perf is not None:
            perf.send_signal(2)
            perf.wait(60)
    r["produce"] = produce_counts(d.metrics())
    d.stop()
    return r


def produce_counts(text):
    """(Produce requests, record batches they carried, peak requests in
    flight to one broker) from mirrord's metrics."""
    got = {}
    for name in ("mirrord_produce_requests_total",
                 "mirrord_produce_request_batches_total",
                 "mirrord_produce_broker_inflight_requests_peak"):
        m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % name, text, re.M)
        got[name] = float(m.group(1)) if m else 0.0
    return (got["mirrord_produce_requests_total"],
            got["mirrord_produce_request_batches_total"],
            got["mirrord_produce_broker_inflight_requests_peak"])


def run_reproducer(src, dst, topics, want, variant):
    for t in topics:
        dst.create_topic(t, partitions=NPART, configs={"retention.ms": "-1"})
    argv = [h.build_path("test", "bench", "reproducer"), "-s", src.bootstrap,
            "-d", dst.bootstrap, "-t", ",".join(topics),
            "-z", variant_codec(variant)]
    log_path = os.path.join(h.test_dir(), "reproducer-%s%s.log" % (
        variant, ".r%d" % CUR_ROUND[0] if CUR_ROUND[0] else ""))
    log = open(log_path, "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        r = watch(p.pid, dst.bootstrap, topics, want, "reproducer (%s)" % variant,
                  log_path)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = status
    finally:
        if p.returncode is None:
            p.kill()
            p.wait()
        log.close()
    if status != 0:
        h.fail("reproducer (%s) exited with status %d; see %s"
               % (variant, status, log_path))
    if r["rss_kb"] < 0:
        r["rss_kb"] = ru.ru_maxrss
    return r


def mm2_libs():
    """connect-mirror and its runtime jars, fetched with Maven once."""
    rk = h.realkafka()
    libs = os.environ.get("BENCH_MM2_LIBS") or os.path.join(
        rk.cache_dir(), "mm2-%s-libs" % MM2_VERSION)
    if os.path.isfile(os.path.join(libs, "connect-mirror-%s.jar" % MM2_VERSION)):
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        h.fail("mvn not found: MirrorMaker 2 cannot be fetched (install maven)")
    tmp = libs + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    print("fetching connect-mirror %s with Maven into %s" % (MM2_VERSION, libs),
          flush=True)
    r = subprocess.run([mvn, "-q", "-B", "-f", os.path.join(HERE, "mm2-pom.xml"),
                        "dependency:copy-dependencies", "-DincludeScope=runtime",
                        "-DoutputDirectory=" + tmp],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        h.fail("mvn could not fetch connect-mirror %s: %s"
               % (MM2_VERSION, (r.stdout + r.stderr)[-1500:]))
    os.rename(tmp, libs)
    return libs


def run_mm2(src, dst, topics, want, variant):
    rnd = "r%d" % CUR_ROUND[0] if CUR_ROUND[0] else ""
    d = os.path.join(h.test_dir(), "mm2-%s%s" % (variant, rnd))
    os.makedirs(d, exist_ok=True)
    # A source alias of its own per run: fresh internal topics each time.
    alias = "s%s%s%s" % (RUN, variant, rnd)
    props = {
        "clusters": "%s, dst" % alias,
        "%s.bootstrap.servers" % alias: src.bootstrap,
        "dst.bootstrap.servers": dst.bootstrap,
        "%s->dst.enabled" % alias: "true",
        "dst->%s.enabled" % alias: "false",
        "%s->dst.topics" % alias: "|".join(topics),
        "replication.policy.class":
            "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "dst.producer.compression.type": variant_codec(variant),
        "tasks.max": "2",
        "plugin.discovery": "service_load",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "2",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }
    cfg = os.path.join(d, "mm2.properties")
    with open(cfg, "w") as f:
        for k, v in props.items():
            f.write("%s = %s\n" % (k, v))
    log4j = os.path.join(d, "log4j2.properties")
    with open(log4j, "w") as f:
        f.write("status = warn\n"
                "appender.out.type = Console\n"
                "appender.out.name = OUT\n"
                "appender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = info\n"
                "rootLogger.appenderRef.out.ref = OUT\n")
    java = h.realkafka().find_java()
    argv = [java, "-Xms256M", "-Xmx2G", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            "-Dlog4j2.configurationFile=" + log4j,
            "-cp", os.path.join(mm2_libs(), "*"),
            "org.apache.kafka.connect.mirror.MirrorMaker", cfg]
    log_path = os.path.join(d, "mm2.log")
    log = open(log_path, "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        r = watch(p.pid, dst.bootstrap, topics, want,
                  "MirrorMaker 2 (%s)" % variant, log_path)
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
    return r


RUNNERS = {"mirrord": run_mirrord, "reproducer": run_reproducer,
           "mirrormaker2": run_mm2,
           "mirrord-other": lambda *a: run_mirrord(*a, other=True),
           "mirrord-merge": lambda *a: run_mirrord(*a, merge=True)}


# ------------------------------------------------------------------ checks

def src_ends(cluster, topics):
    c = kraw.Cluster(cluster.bootstrap)
    try:
        return [c.offsets(t, p) for t in topics for p in range(NPART)]
    finally:
        c.close()


def dst_codecs(cluster, topics):
    """The codec of the first batch of every destination partition."""
    c = kraw.Cluster(cluster.bootstrap)
    out = set()
    try:
        for t in topics:
            for p in range(NPART):
                b = c.batches(t, p, 0, 1)
                if b:
                    raw = b[0]["raw"]
                    attrs = int.from_bytes(raw[21:23], "big")
                    out.add(attrs & 7)
    finally:
        c.close()
    return out


def too_few_ticks(cpu_s):
    """CPU times come in clock ticks (10 ms each): under 5 ticks a ratio
    of them says nothing."""
    return cpu_s < 4.5 / CLK_TCK


def cpu_ratio(m, o):
    """One round's CPU-s/GB ratio, or "-" when either tool's CPU is too
    few clock ticks (too_few_ticks())."""
    if too_few_ticks(min(m["cpu_s"], o["cpu_s"])):
        return "-"
    return "%.2f" % (m["cpu_s_per_gb"] / o["cpu_s_per_gb"])


def closing_lines(results):
    """mirrord (and mirrord-merge) against each other tool, per corpus: the
    medians over the rounds of the per-round ratios (both tools measured in
    the same round, under the same machine load); one round: that round's
    ratios."""
    out = []
    for variant, base in [(v, b) for b in ("mirrord", "mirrord-merge")
                          for v in VARIANTS]:
        ms = {r["round"]: r for r in results
              if r["variant"] == variant and r["tool"] == base}
        if not ms:
            continue
        for tool in [t for t in TOOLS if not t.startswith("mirrord")
                     or (base == "mirrord" and t != base)]:
            pairs = [(ms[r["round"]], r) for r in results
                     if r["variant"] == variant and r["tool"] == tool
                     and r["round"] in ms]
            if not pairs:
                continue
            rounds = ("" if len(pairs) == 1 else
                      " (medians of %d rounds)" % len(pairs))
            small = [m["cpu_s"] for m, _ in pairs if too_few_ticks(m["cpu_s"])]
            cpu = ("%5.2fx less CPU per GB" % median(
                       [o["cpu_s_per_gb"] / m["cpu_s_per_gb"] for m, o in pairs])
                   if not small else
                   "CPU too small to divide (%.2fs; raise BENCH_MB)" % min(small))
            out.append("%-6s %s vs %-13s %s, %5.2fx the MB/s, %5.2fx the "
                       "peak RSS%s" % (
                           variant, base, tool + ":", cpu,
                           median([m["mb_per_s"] / o["mb_per_s"]
                                   for m, o in pairs]),
                           median([m["rss_kb"] / max(o["rss_kb"], 1)
                                   for m, o in pairs]), rounds))
    return out


def loopback_floor():
    """The median CPU-s/GB of test/bench/loopfloor (a process that only
    moves bytes between two loopback connections) over FLOOR_RUNS runs of
    FLOOR_MB MiB, or None when BENCH_FLOOR_MB is 0."""
    if FLOOR_MB <= 0:
        return None
    runs = []
    for _ in range(FLOOR_RUNS):
        p = subprocess.run([h.build_path("test", "bench", "loopfloor"),
                            str(FLOOR_MB)], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            h.fail("loopfloor: %s" % p.stderr[-2000:])
        runs.append(json.loads(p.stdout)["cpu_s_per_gb"])
    print("loopback floor: %s CPU-s/GB (%d MiB through a process that only "
          "recv()s and send()s)" % (" ".join("%.2f" % x for x in runs),
                                    FLOOR_MB), flush=True)
    return median(runs)


def main():
    if MM2_VERSION and "mirrormaker2" in TOOLS:
        mm2_libs()
    src, dst = h.private_kafka(2, heap_mb=HEAP_MB, extra_props={
        "log.retention.ms": "-1",
        "log.message.timestamp.before.max.ms": "9223372036854775807"})
    print("mirrord bench on real Kafka %s: variants %s, %d topics x %d "
          "partitions, %.0f MiB per large-batch variant, %.0f MiB small-batch"
          % (h.realkafka().KAFKA_VERSION, " ".join(VARIANTS), TOPICS, NPART,
             MB, SMALL_MB), flush=True)
    floor = loopback_floor()
    results = []
    for variant, rnd, tool in [(v, n, t) for v in VARIANTS
                               for n in range(ROUNDS)
                               for t in (TOOLS if n % 2 == 0 else TOOLS[::-1])
                               if t != "mirrord-merge"
                               or variant_codec(v) == "none"]:
        codec = variant_codec(variant)
        mb = SMALL_MB if variant == "small" else MB
        CUR_ROUND[0] = rnd
        if True:
            topics = ["b%s-%s-%s-%d%s" % (RUN, variant, tool, i,
                                          "-r%d" % rnd if rnd else "")
                      for i in range(TOPICS)]
            for t in topics:
                src.create_topic(t, partitions=NPART,
                                 configs={"retention.ms": "-1"})
            argv = [h.build_path("test", "bench", "corpusgen"), "-b",
                    src.bootstrap, "-t", ",".join(topics), "-p", str(NPART),
                    "-m", str(mb), "-z", codec]
            if variant == "small":
                argv += ["-B", "1024"]
            t0 = time.monotonic()
            gen = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=900)
            if gen.returncode != 0:
                h.fail("corpusgen (%s): %s" % (variant, gen.stderr[-2000:]))
            corpus = json.loads(gen.stdout.strip().splitlines()[-1])
            se = src_ends(src, topics)
            want = [hi for _, hi in se]
            if sum(want) != corpus["messages"] or any(lo for lo, _ in se):
                h.fail("source holds %s, corpusgen wrote %d records"
                       % (se, corpus["messages"]))
            print("%-6s %-13s corpus: %d records, %.1f MB payload, written in "
                  "%.1fs" % (variant, tool, corpus["messages"],
                             corpus["payload_bytes"] / 1e6,
                             time.monotonic() - t0), flush=True)
            r = RUNNERS[tool](src, dst, topics, want, variant)
            got = [e[1] for e in src_ends(dst, topics)]
            if got != want:
                h.fail("%s (%s): destination ends %s, source %s"
                       % (tool, variant, got, want))
            # mirrord copies the source's batches as they are: its codecs
            # are the source's.  A producer (the re-producer's librdkafka,
            # MM2's Java client) sends a batch uncompressed when compressing
            # does not make it smaller: codec 0 is allowed beside the
            # variant's there, but the variant's must be seen.
            codecs = dst_codecs(dst, topics)
            want_codec = CODEC_IDS[codec]
            if tool.startswith("mirrord"):
                ok = codecs == dst_codecs(src, topics)
            else:
                ok = want_codec in codecs and codecs <= {want_codec, 0}
            if not ok:
                h.fail("%s (%s): destination batches use codecs %s, want %s "
                       "(source %s)" % (tool, variant, codecs, want_codec,
                                        dst_codecs(src, topics)))
            r.update(tool=tool, variant=variant, payload=corpus["payload_bytes"],
                     records=corpus["messages"], round=rnd)
            r["mb_per_s"] = r["payload"] / 1e6 / r["window_s"]
            r["cpu_s_per_gb"] = r["cpu_s"] / (r["payload"] / 1e9)
            results.append(r)
            print("%-6s %-13s %.1f MB/s, %.2f CPU-s/GB, peak RSS %.0f MB"
                  % (variant, tool, r["mb_per_s"], r["cpu_s_per_gb"],
                     r["rss_kb"] / 1024.0), flush=True)
            if r.get("produce") and r["produce"][0] > 0:
                nrq, nb, peak = r["produce"]
                print("%-6s %-13s %d Produce requests, %.1f batches each, "
                      "at most %d in flight" % (variant, tool, nrq, nb / nrq,
                                                peak), flush=True)

    print("\n%-6s %-13s %5s %8s %8s %8s %8s %10s %9s %9s" % (
        "corpus", "tool", "round", "payload", "copy s", "MB/s", "CPU s",
        "CPU-s/GB", "start CPU", "peak RSS"))
    for r in results:
        print("%-6s %-13s %5d %6.1fMB %8.2f %8.1f %8.2f %10.2f %8.1fs %7.0fMB"
              % (r["variant"], r["tool"], r["round"], r["payload"] / 1e6,
                 r["window_s"], r["mb_per_s"], r["cpu_s"], r["cpu_s_per_gb"],
                 r["start_cpu_s"], r["rss_kb"] / 1024.0))
    print()
    if ROUNDS > 1:
        # Several rounds (the tools' order reversed every other round):
        # the medians, and mirrord's ratios to each other tool round by
        # round (same machine load within a round).
        for variant in VARIANTS:
            for tool in TOOLS:
                rs = [r for r in results
                      if r["variant"] == variant and r["tool"] == tool]
                if rs:
                    print("%-6s %-13s median of %d: %.1f MB/s, %.2f CPU-s/GB, "
                          "peak RSS %.0f MB" % (
                              variant, tool, len(rs),
                              median([r["mb_per_s"] for r in rs]),
                              median([r["cpu_s_per_gb"] for r in rs]),
                              median([r["rss_kb"] for r in rs]) / 1024.0))
            for tool in TOOLS:
                if tool == "mirrord":
                    continue
                pairs = [(m, o) for m in results for o in results
                         if m["variant"] == o["variant"] == variant
                         and m["round"] == o["round"]
                         and m["tool"] == "mirrord" and o["tool"] == tool]
                if pairs:
                    print("%-6s mirrord / %-13s per round: MB/s %s; CPU-s/GB "
                          "%s" % (variant, tool, " ".join(
                              "%.2f" % (m["mb_per_s"] / o["mb_per_s"])
                              for m, o in pairs), " ".join(
                              cpu_ratio(m, o) for m, o in pairs)))
        print()
    for line in closing_lines(results):
        print(line)
    if floor is not None:
        print("\nThe loopback floor (test/bench/loopfloor: recv() and send() "
              "only, median of %d): %.2f CPU-s/GB of bytes moved." % (
                  FLOOR_RUNS, floor))
        # Uncompressed, the bytes moved are about the payload (plus the
        # batch and record framing); compressed, a fraction of it, and
        # the floor per GB of payload is lower by the compression ratio.
        for variant in VARIANTS:
            rs = [r["cpu_s_per_gb"] for r in results
                  if r["variant"] == variant and r["tool"] == "mirrord"]
            if rs and variant_codec(variant) == "none":
                print("%-6s mirrord: %.1fx the floor (median %.2f CPU-s/GB "
                      "of payload)" % (variant, median(rs) / floor,
                                       median(rs)))
    print("\nTargets: lz4 <= 0.25 CPU-s/GB, uncompressed <= 0.5; "
          "MB/s >= the best other tool's, small-batch >= 5x MirrorMaker 2's.")
    out = h.build_path("test", "bench", "results-kafka.json")
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
