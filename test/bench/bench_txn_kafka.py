#!/usr/bin/env python3
"""make bench-txn (part of make bench): mirrord on transactional source
topics, on real Kafka 4.4.0.

Every transaction leaves a gap in a mirrored partition (its commit or
abort marker, and its records when aborted), and mirrord records a
translation anchor for each gap in its metadata log before it produces the
batch.  This bench measures what that costs: one mirrord with the file
metadata log, and a group of three (cluster.enabled, storage.backend
kafka, the metadata log a topic of a 3-broker destination), where a
follower's metadata writes are round trips through the request topic to
the writer.

Two private clusters on 127.0.0.1 (test/kafka/realkafka.py): a 1-broker
source and a 3-broker destination, shared by every scenario; each run has
topics of its own.  The load is test/bench/txnload (librdkafka
transactional producers, each with its own transactional.id): 1-50 records
per transaction over 1-6 distinct partitions, 20% of the transactions
aborted, 100-byte values, for BENCH_TXN_SECONDS (default 30).

Scenarios (BENCH_TXN_SCENARIOS, default all, in this order):

  single-100  one mirrord, file metadata log; one topic of 100 partitions,
              2000 transactions/s aimed at;
  single-1    one mirrord, one partition, 200 transactions/s;
  group-100   three instances a, b, c (cluster.local_broker_id 1, 2, 3)
              with the replicated metadata log; 100 partitions whose
              destination leaders are spread over the three brokers
              (partition p on broker 1 + p % 3), so each instance owns a
              third: the writer's and the followers' reported apart;
  group-1     the same group, one partition, 200 transactions/s, its
              destination leader on a follower's broker (a follower owns
              it: the case the request topic slows down).

The destination topic is created by the bench before the mirror (empty,
replication factor 1, leaders placed as above), the mirror waits until
every partition is MIRRORING, then the load starts.  Targets are scaled by
BENCH_TXN_RATE_SCALE (default 1); the producer count is the target over 50
(4 to 48; BENCH_TXN_PRODUCERS sets it).  A two-core machine takes a few
hundred transactions a second, not 2000: the rate achieved is what the
source broker took, and it is printed beside mirrord's numbers.

Numbers, per scenario and mirrord binary (and per instance in a group):

  * source txn/s: transactions committed plus aborted over the load's
    seconds (txnload's own count: each one the broker completed), beside
    how busy the machine's cores were during the load (/proc/stat, every
    process's) and the load average at its end: the source's rate is what
    the cores left it;
  * lag: every second, the offsets below the source's last stable offset
    (ListOffsets, read_committed: what mirrord can copy) that mirrord has
    not copied yet (DescribeMirrors on every instance: sourceOffset - lag,
    from the partition's owner, whose numbers are live; another
    instance's are up to two cluster.status_interval_ms old), summed over
    the partitions: the largest during the load, the lag when the load
    ends, and the destination's share of the source's progress during the
    load ("copied %");
  * catch-up: from the end of the load until every destination partition
    ends where its source partition ends; after BENCH_TXN_CATCHUP seconds
    (default 120) it gives up and reports "not caught up" with the lag
    left; the same per instance over the partitions it owns;
  * CPU s / 1000 txn: utime + stime of each mirrord process
    (/proc/PID/stat) from the start of the load to the catch-up (or the
    give-up), per 1000 source transactions (committed and aborted);
  * metadata bytes / txn: the file log's bytes appended
    (mirrord_metadata_log_bytes_total, framing included) and the data
    directory's growth; on the replicated log the growth of the metadata
    topic's partition on disk (its .log segments at the partition leader,
    Kafka's batch framing included) and of its end offset (records), the
    request topic's growth (the followers' writes on their way to the
    writer), and the writer's mirrord_metadata_log_bytes_total;
  * correctness, after mirrord stopped: the destination ends equal the
    source's, and a read_committed read of both sides gives the same
    records per partition (count, and a SHA-1 over offset, key, value and
    timestamp of every record); a partition not caught up is compared up
    to where its destination ends.  txnload's committed records must
    equal the source's read_committed count.

BENCH_MIRRORD_OTHER=<path of another mirrord binary> runs every scenario a
second time with that binary (as "mirrord-other", right after this
build's), against the same brokers, so a change is judged by ratios
measured on the same machine at about the same time.  BENCH_HEAP_MB sets
the brokers' heap (default 512), BENCH_TXN_SEED the load's seed (default
1).  A summary table is printed at the end and the numbers are written to
bench_txn.json in the test directory (build/test/tmp/bench_txn_kafka/).
The four scenarios take about 3 minutes with one binary on two busy
cores, the brokers' start included, plus up to BENCH_TXN_CATCHUP seconds
for each scenario that does not catch up (about 10 minutes with
BENCH_MIRRORD_OTHER naming a build whose groups fall behind).
"""

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Consumer, KafkaError, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

SCENARIOS = {
    "single-100": {"instances": 1, "partitions": 100, "rate": 2000},
    "single-1": {"instances": 1, "partitions": 1, "rate": 200},
    "group-100": {"instances": 3, "partitions": 100, "rate": 2000},
    "group-1": {"instances": 3, "partitions": 1, "rate": 200},
}
ORDER = ["single-100", "single-1", "group-100", "group-1"]
SECONDS = float(os.environ.get("BENCH_TXN_SECONDS", "30"))
CATCHUP = float(os.environ.get("BENCH_TXN_CATCHUP", "120"))
RATE_SCALE = float(os.environ.get("BENCH_TXN_RATE_SCALE", "1"))
PRODUCERS = os.environ.get("BENCH_TXN_PRODUCERS")
SEED = int(os.environ.get("BENCH_TXN_SEED", "1"))
HEAP_MB = int(os.environ.get("BENCH_HEAP_MB", "512"))
OTHER = os.environ.get("BENCH_MIRRORD_OTHER")
CLK_TCK = os.sysconf("SC_CLK_TCK")
RUN = "%d" % (os.getpid() % 100000)
SESSION_MS = 6000
WARMUP = float(os.environ.get("BENCH_TXN_WARMUP", "15"))


def scenarios():
    names = os.environ.get("BENCH_TXN_SCENARIOS", " ".join(ORDER)).replace(
        ",", " ").split()
    bad = [n for n in names if n not in SCENARIOS]
    if bad or not names:
        h.fail("BENCH_TXN_SCENARIOS: unknown scenario %s (known: %s)"
               % (", ".join(bad) or "(none given)", ", ".join(ORDER)))
    return names


def cpu_s(pid):
    """utime + stime of pid in seconds (/proc/PID/stat), None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_cpu():
    """(busy, all) CPU seconds of the whole machine since boot
    (/proc/stat), every process's, ours and everyone else's."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / CLK_TCK, sum(v[:8]) / CLK_TCK


def dir_bytes(d, suffix=""):
    """The size of the files below d (those ending in suffix)."""
    total = 0
    for root, _, files in os.walk(d):
        for f in files:
            if f.endswith(suffix):
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
    return total


def metric(d, family):
    """The sum of d's series of family, 0 when there is none or d does not
    answer."""
    try:
        v = mt.metric_sum(d, family)
    except OSError:
        return 0.0
    return v or 0.0


# ------------------------------------------------------------ end offsets

class Offsets:
    """End offsets of every partition of one topic, one ListOffsets v2 per
    partition leader for all its partitions (kraw connections)."""

    def __init__(self, bootstrap, topic, npart):
        self.bootstrap, self.topic, self.npart = bootstrap, topic, npart
        self.c = None

    def _cluster(self):
        if self.c is None:
            c = kraw.Cluster(self.bootstrap)
            if c.partitions.get(self.topic) != self.npart or any(
                    c.leaders.get((self.topic, p), -1) < 0
                    for p in range(self.npart)):
                c.close()
                raise ValueError("%s: no leaders yet" % self.topic)
            self.c = c
        return self.c

    def ends(self, committed=False):
        """[end of partition 0, 1, ...]: the high watermarks, or the last
        stable offsets with committed (read_committed)."""
        try:
            c = self._cluster()
            by_leader = {}
            for p in range(self.npart):
                by_leader.setdefault(c.leaders[(self.topic, p)], []).append(p)
            out = [None] * self.npart
            for node, parts in by_leader.items():
                body = struct.pack(">ib", -1, 1 if committed else 0) + \
                    struct.pack(">i", 1) + kraw._s(self.topic) + \
                    struct.pack(">i", len(parts)) + b"".join(
                        struct.pack(">iq", p, -1) for p in parts)
                r = c.conn(self.topic, parts[0]).call(2, 2, body)
                r.i32()  # throttle
                for _ in range(r.i32()):
                    r.str()
                    for _ in range(r.i32()):
                        p, err, _ts, off = r.i32(), r.i16(), r.i64(), r.i64()
                        if err:
                            raise ValueError("ListOffsets %s-%d: error %d"
                                             % (self.topic, p, err))
                        out[p] = off
            if None in out:
                raise ValueError("ListOffsets %s: partitions missing"
                                 % self.topic)
            return out
        except (OSError, ValueError, KeyError, EOFError) as e:
            self.close()
            raise ValueError(str(e)) from None

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def ends_retry(o, committed=False, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return o.ends(committed)
        except ValueError as e:
            if time.monotonic() > deadline:
                h.fail("end offsets of %s on %s: %s" % (o.topic, o.bootstrap, e))
            time.sleep(0.2)


# ------------------------------------------------------------ mirrord

class BenchMirrord(mt.Mirrord):
    """mt.Mirrord run from a given binary (this build's, or
    BENCH_MIRRORD_OTHER)."""

    def __init__(self, binary, *a, **kw):
        self.binary = binary
        super().__init__(*a, **kw)

    def start(self, wait=True):
        self.starts += 1
        self.proc = h.Proc([self.binary, "-c", self.config_path],
                           name="%s-%d" % (self.name, self.starts))
        if wait:
            h.wait_for(self._answers, 30, "%s to answer on %s (log: %s)"
                       % (self.name, self.bootstrap, self.proc.log_path))
        return self.proc


def role(d):
    try:
        m = d.metrics()
    except Exception:  # noqa: BLE001 - not answering
        return None
    for r in ("writer", "follower", "joining"):
        if re.search(r'^mirrord_cluster_role\{role="%s"\} 1$' % r, m, re.M):
            return r
    return None


def start_group(binary, dst, tag):
    """Three instances a, b, c beside destination brokers 1, 2, 3 on a
    metadata topic of their own; returns (instances, the writer, the
    metadata topic)."""
    meta = "txmeta-%s" % tag
    key = os.path.join(h.test_dir(), "secret-%s.key" % tag)
    ds = []
    for name, broker in (("a", 1), ("b", 2), ("c", 3)):
        ds.append(BenchMirrord(
            binary, destination=dst.bootstrap, name="%s-%s" % (tag, name),
            start=False, log_level="info",
            storage_kafka={"secret_key_file": key, "topic": meta,
                           "timeout_ms": 10000},
            extra_yaml=("cluster:\n"
                        "  enabled: true\n"
                        "  group_id: \"txbench-%s\"\n"
                        "  instance_id: \"%s\"\n"
                        "  local_broker_id: %d\n"
                        "  session_timeout_ms: %d\n"
                        "  heartbeat_interval_ms: 1000\n"
                        "  status_interval_ms: 1000\n"
                        % (tag, name, broker, SESSION_MS))))
        ds[-1].broker = broker
    # The first alone, so the key file is written once.
    ds[0].start()
    h.wait_for(lambda: role(ds[0]) == "writer", 90,
               "%s to become the writer" % ds[0].name)
    for d in ds[1:]:
        d.start()

    def one_writer():
        rs = [role(d) for d in ds]
        return (rs.count("writer") == 1 and
                all(r in ("writer", "follower") for r in rs))
    h.wait_for(one_writer, 90, "one writer and two followers (logs %s)"
               % ", ".join(d.proc.log_path for d in ds))
    w = [d for d in ds if role(d) == "writer"][0]
    return ds, w, meta


# ------------------------------------------------------------ correctness

def read_committed(bootstrap, topic, npart, bounds=None, timeout=180):
    """Reads every partition of topic with read_committed to its end (the
    last stable offset): {partition: (count, sha1 hex)}, the SHA-1 over
    the key, value and timestamp of every record in order (not the offset:
    the destination's offsets are the source's translated).  With bounds
    ({partition: n}), (count, sha1, n', sha1 of the first n' records)
    where n' is bounds[p] or the count when smaller."""
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": "txbench-check-%s" % RUN,
                  "enable.auto.commit": False,
                  "enable.partition.eof": True,
                  "isolation.level": "read_committed",
                  "fetch.max.bytes": 16 << 20,
                  "queued.max.messages.kbytes": 65536})
    digest = {p: hashlib.sha1() for p in range(npart)}
    first = {p: hashlib.sha1() for p in range(npart)}
    count = {p: 0 for p in range(npart)}
    nfirst = {p: 0 for p in range(npart)}
    done = set()
    lows = {}
    for p in range(npart):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        lows[p] = lo
        if hi <= lo:
            done.add(p)
    todo = [p for p in range(npart) if p not in done]
    if todo:
        c.assign([TopicPartition(topic, p, lows[p]) for p in todo])
    deadline = time.monotonic() + timeout
    while len(done) < npart:
        if time.monotonic() > deadline:
            c.close()
            h.fail("read_committed of %s on %s: partitions %s not read to "
                   "their end in %.0f s" % (topic, bootstrap,
                                            sorted(set(range(npart)) - done),
                                            timeout))
        for m in c.consume(10000, 1.0):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                    continue
                c.close()
                h.fail("read_committed of %s on %s: %s" % (topic, bootstrap, err))
            p = m.partition()
            if p in done:
                continue
            rec = struct.pack(">qi", m.timestamp()[1], len(m.key() or b"")) + \
                (m.key() or b"") + (m.value() or b"")
            digest[p].update(rec)
            count[p] += 1
            if bounds is not None and count[p] <= bounds[p]:
                first[p].update(rec)
                nfirst[p] += 1
    c.close()
    if bounds is None:
        return {p: (count[p], digest[p].hexdigest()) for p in range(npart)}
    return {p: (count[p], digest[p].hexdigest(), nfirst[p],
                first[p].hexdigest()) for p in range(npart)}


def check_copy(src, dst, topic, npart, load, done):
    """Compares the two sides after mirrord stopped (done: the source
    offset each partition was copied up to, from DescribeMirrors): a dict
    of the findings, "ok" True when everything matched."""
    se = ends_retry(Offsets(src.bootstrap, topic, npart))
    de = ends_retry(Offsets(dst.bootstrap, topic, npart))
    d = read_committed(dst.bootstrap, topic, npart)
    s = read_committed(src.bootstrap, topic, npart,
                       {p: d[p][0] for p in range(npart)})
    problems = []
    caught = [p for p in range(npart) if done.get(p) == se[p]]
    for p in range(npart):
        if p in caught:
            if (s[p][0], s[p][1]) != (d[p][0], d[p][1]):
                problems.append("partition %d: %d committed records on the "
                                "source, %d on the destination%s"
                                % (p, s[p][0], d[p][0],
                                   ", different" if s[p][0] == d[p][0]
                                   else ""))
        elif s[p][2] != d[p][0] or s[p][3] != d[p][1]:
            problems.append("partition %d (copied up to source offset %s of "
                            "%d): the destination's %d committed records are "
                            "not the source's first %d"
                            % (p, done.get(p), se[p], d[p][0], d[p][0]))
    src_records = sum(s[p][0] for p in range(npart))
    if load and src_records != load["records_committed"]:
        problems.append("the source holds %d committed records, txnload "
                        "committed %d" % (src_records,
                                          load["records_committed"]))
    return {"ok": not problems, "problems": problems[:10],
            "partitions_caught_up": len(caught), "partitions": npart,
            "source_records": src_records,
            "destination_records": sum(d[p][0] for p in range(npart)),
            "source_end": sum(se), "destination_end": sum(de),
            # Destination offsets that hold no committed record (markers,
            # aborted records copied as they were): 0 when the gaps are
            # left out.
            "destination_offsets_without_record":
                sum(de) - sum(d[p][0] for p in range(npart))}


# ------------------------------------------------------------ one run

class Load:
    """test/bench/txnload in the background (harness.Proc: killed at exit
    whatever happens): start() returns once every producer is ready (its
    "started" line), result() waits for its closing line."""

    def __init__(self, src, topic, npart, rate, tag):
        n = int(PRODUCERS) if PRODUCERS else max(4, min(48, int(rate / 50)))
        self.argv = [h.build_path("test", "bench", "txnload"), "-b",
                     src.bootstrap, "-t", topic, "-p", str(npart),
                     "-r", "%g" % rate, "-d", "%g" % SECONDS, "-i", str(n),
                     "-S", str(SEED), "-x", "txbench-%s" % tag]
        self.producers = n
        self.name = "txnload-%s" % tag
        self.proc = None

    def lines(self):
        """txnload's JSON lines so far (its log also has librdkafka's)."""
        return [json.loads(x) for x in self.proc.output().splitlines()
                if x.startswith("{")]

    def start(self):
        self.proc = h.Proc(self.argv, name=self.name)
        h.wait_for(lambda: self.lines() or not self.proc.alive(), 180,
                   "txnload to start (log %s)" % self.proc.log_path,
                   interval=0.2)
        st = (self.lines() or [{}])[0]
        if not st.get("started") or st.get("ready") != st.get("producers"):
            h.fail("txnload did not start: %s (log %s)"
                   % (st or "exited %s" % self.proc.p.returncode,
                      self.proc.log_path))

    def running(self):
        return self.proc.alive()

    def result(self):
        try:
            self.proc.p.wait(SECONDS + 240)
        except subprocess.TimeoutExpired:
            pass
        rc = self.proc.stop(60)
        got = self.lines()
        if rc != 0 or len(got) < 2:
            h.fail("txnload exited %s (log %s)" % (rc, self.proc.log_path))
        return got[-1]


def owners_of(dst, topic, npart, ds):
    """{partition: instance name} from the destination leaders (a
    partition is owned by the instance beside its leader)."""
    c = kraw.Cluster(dst.bootstrap)
    try:
        by_broker = {d.broker: d.name for d in ds}
        return {p: by_broker.get(c.leaders[(topic, p)]) for p in range(npart)}
    finally:
        c.close()


def wait_mirroring(ds, w, topic, npart):
    """Every partition MIRRORING (DescribeMirrors on the writer) and, in a
    group, owned by some instance."""
    def ok():
        rows = [r for r in w.describe_json("bench") if r["topic"] == topic]
        if len(rows) != npart or any(r["state"] != "MIRRORING" for r in rows):
            return False
        if len(ds) > 1:
            return sum(metric(d, "mirrord_cluster_owned_partitions")
                       for d in ds) == npart
        return True
    h.wait_for(ok, 120, "every partition of %s MIRRORING and owned" % topic,
               interval=0.5)


def meta_partition_bytes(dst, meta):
    """(bytes of the .log segments of partition 0 of topic meta on its
    leader, the bytes of the request topic's, its end offset)."""
    c = kraw.Cluster(dst.bootstrap)
    try:
        leader = c.leaders.get((meta, 0))
        rleader = c.leaders.get((meta + "-requests", 0))
        end = c.offsets(meta, 0)[1]
    finally:
        c.close()

    def data_dir(node):
        if node == 1:
            return os.path.join(dst.dir, "data")
        return os.path.join(dst.nodes[node].dir, "data")
    mb = dir_bytes(os.path.join(data_dir(leader), meta + "-0"), ".log")
    rb = 0
    if rleader is not None and rleader >= 1:
        rb = dir_bytes(os.path.join(data_dir(rleader), meta + "-requests-0"),
                       ".log")
    return mb, rb, end


def broker_pids(cluster):
    return [cluster.pid] + [n.pid for n in cluster.nodes.values() if n.pid]


def describe_rows(d, topic):
    """{partition: its DescribeMirrors row} from instance d, {} when d does
    not answer."""
    try:
        r = d.cli("--describe", "--json", "--mirror", "bench", timeout=30)
    except subprocess.TimeoutExpired:
        return {}
    if r.returncode != 0:
        return {}
    return {x["partition"]: x for x in json.loads(r.stdout)
            if x["topic"] == topic}


def row_done(x):
    """The source offset a row says its partition is copied up to
    (sourceOffset - lag: the lag is in source offsets), None when
    unknown."""
    if x["sourceOffset"] < 0 or x["lag"] < 0:
        return None
    return x["sourceOffset"] - x["lag"]


class Sampler:
    """Samples of the source's ends (ListOffsets) and of what mirrord
    copied: DescribeMirrors on every instance, each partition's freshest
    row kept (the one copied furthest).  In a group, an instance's own
    partitions are live in its answer, another's are as their owner last
    published them (up to about two cluster.status_interval_ms old), so
    asking every instance gives each partition its owner's live numbers
    without knowing who owns it."""

    def __init__(self, ds, src, dst, topic, npart):
        self.ds, self.topic, self.npart = ds, topic, npart
        self.srco = Offsets(src.bootstrap, topic, npart)
        self.dsto = Offsets(dst.bootstrap, topic, npart)
        self.samples = []
        self.t0 = time.monotonic()
        self.done = {p: 0 for p in range(npart)}
        self.rows = {}

    def take(self):
        try:
            lso = self.srco.ends(committed=True)
            de = self.dsto.ends()
        except ValueError:
            return None
        for d in self.ds:
            for p, x in describe_rows(d, self.topic).items():
                done = row_done(x)
                if done is None:
                    continue
                prev = self.rows.get(p)
                if prev is None or done >= row_done(prev):
                    self.rows[p] = x
                self.done[p] = max(self.done.get(p, 0), done)
        s = {"t": time.monotonic() - self.t0, "lso": lso, "dst": de,
             "done": [self.done[p] for p in range(self.npart)]}
        self.samples.append(s)
        return s

    def close(self):
        self.srco.close()
        self.dsto.close()


def lag_of(s, parts, ends=None):
    """Source offsets not yet copied (below ends, default the sample's
    source ends) over parts."""
    e = ends or s["lso"]
    return sum(max(0, e[p] - s["done"][p]) for p in parts)


def run(scen, tool, binary, src, dst):
    cfg = SCENARIOS[scen]
    npart, group = cfg["partitions"], cfg["instances"] > 1
    rate = cfg["rate"] * RATE_SCALE
    tag = "%s-%s-%s" % (RUN, scen, tool)
    topic = "tx-%s" % tag
    print("\n== %s, %s: %d partition(s), target %g transactions/s for %g s"
          % (scen, tool, npart, rate, SECONDS), flush=True)
    src.create_topic(topic, partitions=npart)
    if group:
        ds, w, meta = start_group(binary, dst, tag)
        followers = [d for d in ds if d is not w]
        if npart == 1:
            placement = {0: [followers[0].broker]}
        else:
            placement = {p: [1 + p % 3] for p in range(npart)}
    else:
        d = BenchMirrord(binary, destination=dst.bootstrap, name=tag,
                         log_level="info")
        d.broker = None
        ds, w, meta = [d], d, None
        placement = {p: [1 + p % 3] for p in range(npart)}
    dst.create_topic(topic, assignment=placement)
    w.create("bench", {"bootstrap.servers": src.bootstrap,
                       "mirror.fetch.wait.max.ms": "100",
                       "mirror.metadata.refresh.interval.ms": "1000"})
    w.cli_ok("--add", "--mirror", "bench", "--topic", topic)
    wait_mirroring(ds, w, topic, npart)
    owner = owners_of(dst, topic, npart, ds) if group else \
        {p: w.name for p in range(npart)}
    roles = {d.name: (role(d) if group else "single") for d in ds}
    owned_metric = {d.name: metric(d, "mirrord_cluster_owned_partitions")
                    for d in ds}
    owned = {d.name: sorted(p for p in owner if owner[p] == d.name)
             for d in ds}
    if group:
        print("roles: %s; partitions owned: %s" % (
            ", ".join("%s %s" % kv for kv in sorted(roles.items())),
            ", ".join("%s %d" % (n, len(ps)) for n, ps in sorted(owned.items()))),
            flush=True)

    # Baselines.
    load = Load(src, topic, npart, rate, tag)
    sm = Sampler(ds, src, dst, topic, npart)
    first = None
    while first is None:
        first = sm.take()
    mlog0 = {d.name: metric(d, "mirrord_metadata_log_bytes_total") for d in ds}
    mrec0 = {d.name: metric(d, "mirrord_metadata_log_records_total") for d in ds}
    fwd0 = metric(w, "mirrord_cluster_forwarded_requests_total") if group else 0
    dir0 = None if group else dir_bytes(w.data_dir)
    meta0 = meta_partition_bytes(dst, meta) if group else None
    bcpu0 = {pid: cpu_s(pid) for pid in broker_pids(src) + broker_pids(dst)}
    cpu0 = {d.name: cpu_s(d.proc.pid) for d in ds}

    load.start()
    t_start = time.monotonic() - sm.t0
    mcpu0 = machine_cpu()
    while load.running():
        s = sm.take()
        if s is not None and len(sm.samples) % 5 == 0:
            print("  %5.1f s: source +%d offsets, copied +%d, lag %d"
                  % (s["t"] - t_start, sum(s["lso"]) - sum(first["lso"]),
                     sum(s["done"]) - sum(first["done"]),
                     lag_of(s, range(npart))), flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - sm.t0) % 1.0))
    res = load.result()
    mcpu1 = machine_cpu()
    with open("/proc/loadavg") as f:
        loadavg = float(f.read().split()[0])
    # The machine's cores busy during the load, whoever used them.
    busy = (mcpu1[0] - mcpu0[0]) / (mcpu1[1] - mcpu0[1]) * (os.cpu_count() or 1)
    at_end = sm.take() or sm.samples[-1]
    t_end = at_end["t"]
    load_samples = [s for s in sm.samples if s["t"] >= t_start]
    rows = list(sm.rows.values())
    describe_end = {
        "max_lag": max([r["lag"] for r in rows] or [-1]),
        "max_lag_ms": max([r["lagMs"] for r in rows] or [-1]),
        "sum_lag": sum(max(r["lag"], 0) for r in rows)}
    print("load: %d committed, %d aborted transactions (%d records committed) "
          "in %.1f s: %.1f txn/s (target %g, %d producers); the machine's "
          "%d cores %.2f busy, load average %.1f"
          % (res["transactions_committed"], res["transactions_aborted"],
             res["records_committed"], res["seconds"], res["txn_per_s"], rate,
             load.producers, os.cpu_count() or 1, busy, loadavg), flush=True)

    # Catch-up: the source no longer moves.
    final = ends_retry(sm.srco)
    caught = {}
    deadline = time.monotonic() + CATCHUP
    sets = dict(owned, all=list(range(npart)))
    last = at_end
    while True:
        s = sm.take()
        if s is not None:
            last = s
            for n, parts in sets.items():
                if n not in caught and lag_of(s, parts, final) == 0:
                    caught[n] = s["t"] - t_end
        if "all" in caught or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    cpu1 = {d.name: cpu_s(d.proc.pid) for d in ds}
    t_stop = time.monotonic() - sm.t0
    mlog1 = {d.name: metric(d, "mirrord_metadata_log_bytes_total") for d in ds}
    mrec1 = {d.name: metric(d, "mirrord_metadata_log_records_total") for d in ds}
    fwd1 = metric(w, "mirrord_cluster_forwarded_requests_total") if group else 0
    dir1 = None if group else dir_bytes(w.data_dir)
    meta1 = meta_partition_bytes(dst, meta) if group else None
    bcpu = {pid: (cpu_s(pid) or 0) - (v or 0) for pid, v in bcpu0.items()}
    roles_end = {d.name: (role(d) if group else "single") for d in ds}
    for d in ds:
        d.stop()
    sm.close()

    txns = res["transactions_committed"] + res["transactions_aborted"]
    # The transactions copied, estimated from the share of the source's
    # offsets copied (the load is the same everywhere and all the time):
    # all of them once caught up.
    src_total = sum(final[p] - first["lso"][p] for p in range(npart))

    def copied_txns(parts):
        if not src_total:
            return 0.0
        return txns * sum(last["done"][p] - first["done"][p]
                          for p in parts) / float(src_total)

    def per(x, n, k=1.0):
        return x / (n / k) if n else None

    def part_stats(parts):
        parts = list(parts)
        src_prog = sum(at_end["lso"][p] - first["lso"][p] for p in parts)
        done_prog = sum(at_end["done"][p] - first["done"][p] for p in parts)
        return {
            "partitions": len(parts),
            "copied_txns": copied_txns(parts),
            "max_lag": max([lag_of(s, parts) for s in load_samples] or [0]),
            "lag_at_load_end": lag_of(at_end, parts),
            "copied_pct": (100.0 * done_prog / src_prog) if src_prog else None,
            "final_lag": lag_of(last, parts, final),
        }
    out = {"scenario": scen, "tool": tool, "binary": binary,
           "partitions": npart, "instances": len(ds),
           "target_txn_per_s": rate, "producers": load.producers,
           "seconds": SECONDS, "load": res, "source_txn_per_s": res["txn_per_s"],
           "transactions": txns, "load_s": t_end - t_start,
           "window_s": t_stop - t_start, "catchup_limit_s": CATCHUP,
           "machine_cores_busy_during_load": busy,
           "loadavg_at_load_end": loadavg,
           "describe_at_load_end": describe_end,
           "broker_cpu_s": {"source": sum(bcpu[p] for p in broker_pids(src)),
                            "destination": sum(bcpu[p] for p in broker_pids(dst))},
           "samples": [{"t": round(s["t"] - t_start, 2),
                        "source_lso": sum(s["lso"]),
                        "copied_to": sum(s["done"]),
                        "lag": lag_of(s, range(npart)),
                        "destination_end": sum(s["dst"])}
                       for s in sm.samples if s["t"] >= t_start]}
    out.update(part_stats(range(npart)))
    out["catchup_s"] = caught.get("all")
    out["instances_detail"] = []
    cpu_all = 0.0
    for d in ds:
        c = (cpu1[d.name] or 0) - (cpu0[d.name] or 0)
        cpu_all += c
        inst = {"name": d.name, "role": roles_end[d.name],
                "role_at_start": roles[d.name], "cpu_s": c,
                "cpu_s_per_1000_txn": per(c, txns, 1000.0),
                "cpu_s_per_1000_copied_txn": per(c, copied_txns(owned[d.name]),
                                                 1000.0),
                "metadata_log_bytes": mlog1[d.name] - mlog0[d.name],
                "metadata_log_records": mrec1[d.name] - mrec0[d.name],
                "owned_partitions_metric": owned_metric[d.name],
                "catchup_s": caught.get(d.name)}
        inst.update(part_stats(owned[d.name]))
        if not inst["partitions"]:
            inst["catchup_s"] = None
        out["instances_detail"].append(inst)
    out["cpu_s"] = cpu_all
    out["cpu_s_per_1000_txn"] = per(cpu_all, txns, 1000.0)
    out["cpu_s_per_1000_copied_txn"] = per(cpu_all, out["copied_txns"], 1000.0)
    if group:
        out["metadata"] = {
            "topic_bytes": meta1[0] - meta0[0],
            "topic_records": meta1[2] - meta0[2],
            "request_topic_bytes": meta1[1] - meta0[1],
            "writer_log_bytes": mlog1[w.name] - mlog0[w.name],
            "forwarded_requests": fwd1 - fwd0}
        md = out["metadata"]
        mbytes = md["topic_bytes"]
        md["request_topic_bytes_per_copied_txn"] = per(
            md["request_topic_bytes"], out["copied_txns"])
        md["topic_records_per_copied_txn"] = per(md["topic_records"],
                                                 out["copied_txns"])
    else:
        out["metadata"] = {"log_bytes": mlog1[w.name] - mlog0[w.name],
                           "log_records": mrec1[w.name] - mrec0[w.name],
                           "data_dir_growth": dir1 - dir0}
        md = out["metadata"]
        mbytes = md["log_bytes"]
        md["data_dir_growth_per_copied_txn"] = per(md["data_dir_growth"],
                                                   out["copied_txns"])
        md["log_records_per_copied_txn"] = per(md["log_records"],
                                               out["copied_txns"])
    out["metadata_bytes_per_txn"] = per(mbytes, txns)
    out["metadata_bytes_per_copied_txn"] = per(mbytes, out["copied_txns"])
    out["check"] = check_copy(src, dst, topic, npart, res,
                              {p: last["done"][p] for p in range(npart)})
    report(out)
    return out


# ------------------------------------------------------------ output

def catchup_text(s, final_lag, partitions=1):
    if not partitions:
        return "-"
    if s is not None:
        return "%.1f s" % s
    return "not caught up, lag %d" % final_lag


def num(v, fmt):
    return fmt % v if v is not None else "-"


def report(r):
    print("%s, %s: source %.1f txn/s (target %g); lag max %d, at load end %d "
          "(%.0f%% of the source's offsets copied during the load); catch-up "
          "%s; %.0f transactions copied" % (
              r["scenario"], r["tool"], r["source_txn_per_s"],
              r["target_txn_per_s"], r["max_lag"], r["lag_at_load_end"],
              r["copied_pct"] or 0,
              catchup_text(r["catchup_s"], r["final_lag"]), r["copied_txns"]),
          flush=True)
    de = r["describe_at_load_end"]
    print("  DescribeMirrors at the load's end: lag %d offsets in all, at most "
          "%d (%d ms) in one partition" % (de["sum_lag"], de["max_lag"],
                                           de["max_lag_ms"]), flush=True)
    for i in r["instances_detail"]:
        print("  %-28s %-8s %3d partitions: CPU %.2f s, %s s/1000 txn, %s "
              "s/1000 copied txn; lag at load end %d; catch-up %s" % (
                  i["name"], i["role"], i["partitions"], i["cpu_s"],
                  num(i["cpu_s_per_1000_txn"], "%.3f"),
                  num(i["cpu_s_per_1000_copied_txn"], "%.3f"),
                  i["lag_at_load_end"],
                  catchup_text(i["catchup_s"], i["final_lag"],
                               i["partitions"])), flush=True)
    md = r["metadata"]
    if "topic_bytes" in md:
        print("  metadata topic: +%d bytes, +%d records (%s bytes per copied "
              "txn); request topic +%d bytes (%s per copied txn); the writer "
              "appended %d bytes; %d forwarded writes" % (
                  md["topic_bytes"], md["topic_records"],
                  num(r["metadata_bytes_per_copied_txn"], "%.1f"),
                  md["request_topic_bytes"],
                  num(md["request_topic_bytes_per_copied_txn"], "%.1f"),
                  md["writer_log_bytes"], md["forwarded_requests"]),
              flush=True)
    else:
        print("  metadata log: %d bytes appended in %d records (%s bytes per "
              "copied txn); data directory %+d bytes" % (
                  md["log_bytes"], md["log_records"],
                  num(r["metadata_bytes_per_copied_txn"], "%.1f"),
                  md["data_dir_growth"]), flush=True)
    c = r["check"]
    print("  check: %s; %d of %d partitions copied to the source's end; "
          "committed records: source %d, destination %d; ends: source %d, "
          "destination %d%s" % (
              "same records" if c["ok"] else "DIFFERENT",
              c["partitions_caught_up"], c["partitions"], c["source_records"],
              c["destination_records"], c["source_end"], c["destination_end"],
              "".join("\n    " + p for p in c["problems"])), flush=True)


def summary(results):
    head = ("%-10s %-13s %-5s %6s %6s %5s %6s %8s %8s %-24s %6s %7s %7s "
            "%8s %s")
    print("\n" + head % (
        "scenario", "tool", "inst", "target", "src/s", "busy", "txns",
        "max lag",
        "end lag", "catch-up", "CPU s", "CPU/1k", "CPU/1kc", "mdB/txnc",
        "check"))
    for r in results:
        print(head % (
            r["scenario"], r["tool"], "all", "%g" % r["target_txn_per_s"],
            "%.1f" % r["source_txn_per_s"],
            "%.2f" % r["machine_cores_busy_during_load"], r["transactions"],
            r["max_lag"],
            r["lag_at_load_end"], catchup_text(r["catchup_s"], r["final_lag"]),
            "%.2f" % r["cpu_s"], num(r["cpu_s_per_1000_txn"], "%.3f"),
            num(r["cpu_s_per_1000_copied_txn"], "%.3f"),
            num(r["metadata_bytes_per_copied_txn"], "%.1f"),
            "ok" if r["check"]["ok"] else "DIFFERENT"))
        if r["instances"] > 1:
            for i in r["instances_detail"]:
                print(head % (
                    "", "", i["name"].rsplit("-", 1)[1] + ":" + i["role"][0],
                    "", "", "", "%dp" % i["partitions"], i["max_lag"],
                    i["lag_at_load_end"],
                    catchup_text(i["catchup_s"], i["final_lag"],
                                 i["partitions"]),
                    "%.2f" % i["cpu_s"], num(i["cpu_s_per_1000_txn"], "%.3f"),
                    num(i["cpu_s_per_1000_copied_txn"], "%.3f"), "", ""))
    print("""
src/s: transactions a second the source took (target: aimed at); busy:
the machine's cores busy during the load, every process's; txns: all
of them, committed and aborted (an instance's line: the partitions it owns;
inst: a, b, c and w writer or f follower); lag: source offsets not yet
copied (the source's last stable offsets by ListOffsets minus where its
owner's DescribeMirrors says each partition is copied to), the largest
during the load and at its end;
catch-up: from the load's end until nothing is left to copy; CPU s:
mirrord's CPU from the load's start to the catch-up (or the give-up);
CPU/1k: per 1000 source transactions; CPU/1kc: per 1000 transactions
copied (estimated from the share of the source's offsets copied);
mdB/txnc: metadata bytes per transaction copied (file log: bytes
appended; replicated log: the metadata topic's growth on disk).""")
    if OTHER:
        print()
        for r in results:
            if r["tool"] != "mirrord":
                continue
            o = [x for x in results if x["tool"] == "mirrord-other"
                 and x["scenario"] == r["scenario"]]
            if not o:
                continue
            o = o[0]

            def ratio(a, b):
                return "%.2f" % (a / b) if a and b else "-"
            print("%-10s mirrord / mirrord-other: source txn/s %s, CPU per "
                  "1000 copied txn %s, metadata bytes per copied txn %s, lag "
                  "at load end %d / %d, catch-up %s / %s" % (
                      r["scenario"],
                      ratio(r["source_txn_per_s"], o["source_txn_per_s"]),
                      ratio(r["cpu_s_per_1000_copied_txn"],
                            o["cpu_s_per_1000_copied_txn"]),
                      ratio(r["metadata_bytes_per_copied_txn"],
                            o["metadata_bytes_per_copied_txn"]),
                      r["lag_at_load_end"], o["lag_at_load_end"],
                      catchup_text(r["catchup_s"], r["final_lag"]),
                      catchup_text(o["catchup_s"], o["final_lag"])))


def warm_up(src, dst):
    """Transactions into both clusters at once for WARMUP seconds, unmirrored,
    so the first scenario does not meet brokers still compiling their hot
    paths (a cold source took a tenth of the transactions a warm one did)."""
    if WARMUP <= 0:
        return
    procs = []
    for c, name in ((src, "source"), (dst, "destination")):
        topic = "txwarm-%s" % RUN
        c.create_topic(topic, partitions=12)
        procs.append((name, h.Proc([h.build_path("test", "bench", "txnload"),
                                    "-b", c.bootstrap, "-t", topic, "-r", "0",
                                    "-d", "%g" % WARMUP, "-i", "16", "-x",
                                    "txwarm-%s" % RUN],
                                   name="txnload-warmup-%s" % name)))
    for name, p in procs:
        try:
            p.p.wait(WARMUP + 120)
        except subprocess.TimeoutExpired:
            pass
        if p.stop(30) != 0:
            h.fail("warm-up load on the %s exited with an error (log %s)"
                   % (name, p.log_path))
        got = [json.loads(x) for x in p.output().splitlines()
               if x.startswith("{")]
        print("warm-up on the %s: %.0f txn/s for %g s" % (
            name, got[-1]["txn_per_s"] if got else 0, WARMUP), flush=True)


def main():
    names = scenarios()
    tools = [("mirrord", h.build_path("daemon", "mirrord"))]
    if OTHER:
        if not os.access(OTHER, os.X_OK):
            h.fail("BENCH_MIRRORD_OTHER: %s is not an executable file" % OTHER)
        tools.append(("mirrord-other", OTHER))
    for b in (h.build_path("test", "bench", "txnload"),
              h.build_path("daemon", "mirrord")):
        if not os.access(b, os.X_OK):
            h.fail("%s is not built (make -C build bench-txn builds it)" % b)
    src, = h.private_kafka(1, heap_mb=HEAP_MB)
    dst, = h.private_kafka(1, brokers=3, heap_mb=HEAP_MB)
    print("mirrord transactional bench on real Kafka %s: scenarios %s, %g s "
          "of load each, rate scale %g, catch-up limit %g s; source %s, "
          "destination %s (3 brokers)" % (
              h.realkafka().KAFKA_VERSION, " ".join(names), SECONDS,
              RATE_SCALE, CATCHUP, src.bootstrap, dst.bootstrap), flush=True)
    warm_up(src, dst)
    results = []
    for scen in names:
        for tool, binary in tools:
            results.append(run(scen, tool, binary, src, dst))
    summary(results)
    path = os.path.join(h.test_dir(), "bench_txn.json")
    with open(path, "w") as f:
        json.dump({"seconds": SECONDS, "rate_scale": RATE_SCALE,
                   "catchup_limit_s": CATCHUP, "seed": SEED,
                   "kafka": h.realkafka().KAFKA_VERSION,
                   "results": results}, f, indent=1)
    print("results: %s" % path, flush=True)


if __name__ == "__main__":
    h.run_main(main)
