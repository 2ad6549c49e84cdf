#!/usr/bin/env python3
"""Black-box test of mirrord's data plane against two librdkafka mock
clusters: the real mirrord binary, driven by the real kafka-mirrors CLI.

What a user would check, and nothing weaker:

  * every codec (none, gzip, snappy, lz4, zstd), keys, null keys,
    tombstones, headers, explicit timestamps and idempotent-producer
    batches arrive with destination offsets equal to source offsets, the
    records section of every batch byte for byte equal, a valid CRC-32C,
    mirrord's own producer id and contiguous sequences; and every record
    reads back through librdkafka with check.crcs=true, equal to the source;
  * kill -9 of mirrord, again and again, while producers write: in the end
    the destination equals the source, nothing lost, nothing twice;
  * leader moves on both sides, NOT_LEADER on Produce and Fetch, and a
    Produce whose answer is lost (the mock applies it, the answer comes
    after mirrord's timeout): no duplicate;
  * pause (PAUSED, nothing copied) and resume; remove (STOPPED with the
    last mirrored offset) and add again;
  * a batch with a bad CRC fails its partition (offset in the message) and
    only that partition; a foreign write to the destination fails the
    partition naming both offsets.
"""

import os
import struct
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# ---- producing and consuming with librdkafka --------------------------------

def produce(bootstrap, topic, partition, records, codec="none",
            idempotent=False, linger_ms=5, batch_size=1000000):
    """records: [(key, value, headers, timestamp_ms)]; all acknowledged."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                  "linger.ms": linger_ms, "enable.idempotence": idempotent,
                  "batch.size": batch_size,
                  "acks": "all", "message.timeout.ms": 30000})

    def dr(err, _msg):
        if err is not None:
            errors.append(str(err))

    for key, value, headers, ts in records:
        kw = {"key": key, "value": value, "partition": partition,
              "on_delivery": dr}
        if headers is not None:
            kw["headers"] = headers
        if ts is not None:
            kw["timestamp"] = ts
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(60)
    if left or errors:
        h.fail("producing to %s-%d: %d unflushed, errors %s"
               % (topic, partition, left, errors[:3]))


def consume_all(bootstrap, topic, partition, end, start=0):
    """Every record of the partition in [start, end), read with check.crcs."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dataplane-check",
                  "enable.auto.commit": False, "check.crcs": True,
                  "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, partition, start)])
    out = []
    deadline = time.monotonic() + 60
    while (not out or out[-1][0] < end - 1) and end > start:
        if time.monotonic() > deadline:
            h.fail("reading %s-%d from %s: got up to offset %s of %d"
                   % (topic, partition, bootstrap,
                      out[-1][0] if out else None, end))
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            h.fail("reading %s-%d from %s: %s" % (topic, partition, bootstrap,
                                                 m.error()))
        if m.offset() < end:
            out.append((m.offset(), m.key(), m.value(), m.headers(),
                        m.timestamp()))
    c.close()
    return out


def records_for(n, tag, seed=0):
    """Keys, null keys, tombstones, headers and explicit timestamps."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else ("%s-key-%d" % (tag, i % 50)).encode()
        if i % 11 == 5:
            value = None  # tombstone
        else:
            value = ('{"tag":"%s","i":%d,"pad":"%s"}'
                     % (tag, i, "x" * ((i * 37 + seed) % 300))).encode()
        headers = None
        if i % 3 == 0:
            headers = [("trace", ("t-%d" % i).encode()), ("empty", b""),
                       ("nul", None)]
        ts = 1600000000000 + seed * 1000000 + i * 13 if i % 2 == 0 else None
        out.append((key, value, headers, ts))
    return out


# ---- the raw view -------------------------------------------------------------

def compare_batches(topic, partition, expect_foreign_pid=False):
    """Source and destination batches: same offsets and records bytes,
    valid CRCs, mirrord's producer id and contiguous sequences."""
    s, t = kraw.Cluster(SRC), kraw.Cluster(DST)
    try:
        sb = s.batches(topic, partition)
        db = t.batches(topic, partition)
    finally:
        s.close()
        t.close()
    eq(len(db), len(sb), "%s-%d batch count" % (topic, partition))
    pids = []
    for a, b in zip(sb, db):
        what = "%s-%d batch at %d" % (topic, partition, a["base_offset"])
        eq(b["base_offset"], a["base_offset"], what + ": destination base offset")
        eq(b["count"], a["count"], what + ": record count")
        eq(b["last_delta"], a["last_delta"], what + ": last offset delta")
        h.check(a["crc_ok"], what + ": the source CRC is bad (test bug)")
        h.check(b["crc_ok"], what + ": destination CRC-32C does not verify")
        if kraw.records_section(b["raw"]) != kraw.records_section(a["raw"]):
            h.fail(what + ": records section differs")
        eq(b["attributes"] & ~0x10, a["attributes"] & ~0x10, what + ": attributes")
        eq(b["raw"][12:16], a["raw"][12:16], what + ": partition leader epoch")
        eq(b["raw"][27:43], a["raw"][27:43], what + ": timestamps")
        pid, epoch, bseq = struct.unpack(">qhi", b["raw"][43:57])
        spid = struct.unpack(">q", a["raw"][43:51])[0]
        h.check(pid >= 0, what + ": mirrord produced without a producer id")
        if expect_foreign_pid and spid >= 0:
            h.check(pid != spid, what + ": destination kept the source producer id")
        # mirrord keeps its producer id across restarts and numbers each
        # batch by the destination offset it lands at, so a late duplicate
        # of a batch is recognisable by a broker.
        eq(bseq, b["base_offset"] & 0x7FFFFFFF, what + ": destination base sequence")
        if pid not in pids:
            pids.append(pid)
    eq(len(pids), 1, "%s-%d: producer ids on the destination" % (topic, partition))
    return len(sb)


def compare_records(topic, partition):
    end = mt.end_offsets(SRC, topic, partition + 1)[partition]
    a = consume_all(SRC, topic, partition, end)
    b = consume_all(DST, topic, partition, end)
    eq(len(b), len(a), "%s-%d record count read back" % (topic, partition))
    for x, y in zip(a, b):
        if x != y:
            h.fail("%s-%d offset %d differs:\n source %r\n dest   %r"
                   % (topic, partition, x[0], x, y))
    return len(a)


def sanitized():
    try:
        with open(h.build_path("config.h")) as f:
            return "#define MIRRORD_SANITIZERS 1" in f.read()
    except OSError:
        return False


def proc_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def part_state(topic, partition, mirror="m1"):
    for p in d.describe_json(mirror):
        if p["topic"] == topic and p["partition"] == partition:
            return p
    return None


def wait_state(topic, npart, state, mirror="m1", timeout=60):
    def ok():
        got = [part_state(topic, p, mirror) for p in range(npart)]
        return all(g is not None and g["state"] == state for g in got) and got
    return h.wait_for(ok, timeout, "%s to be %s" % (topic, state))


def wait_mirrored(topic, npart, timeout=90):
    return mt.wait_same_ends(SRC, DST, topic, npart, timeout, d.proc.log_path)


def main():
    global mc, d, SRC, DST
    # ---- the clusters and mirrord ------------------------------------------------------

    mc = MockCluster(clusters=2, brokers=3,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
    TOPICS = {"codecs": len(CODECS), "idem": 2, "live": 4, "pr": 1, "bad": 2,
              "foreign": 1, "retention": 1, "disc.one": 2, "slow": 12}
    for name, n in TOPICS.items():
        for c in (0, 1):
            mc.cmd("topic %d %s %d" % (c, name, n))

    d = mt.Mirrord(destination=DST, extra_yaml=(
        "pipeline:\n  request_timeout_ms: 1500\n"
        "  max_inflight_bytes_per_partition: 1MiB\n"
        "  max_inflight_bytes_total: 3MiB\n"))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "200",
                    "mirror.failed.retry.initial.backoff.ms": "200",
                    "mirror.failed.retry.max.backoff.ms": "1000",
                    "mirror.failed.retry.max.attempts": "3"})

    # 1. Every codec, keys, null keys, tombstones, headers, timestamps.
    for i, codec in enumerate(CODECS):
        produce(SRC, "codecs", i, records_for(300, codec, seed=i), codec=codec)
        produce(SRC, "codecs", i, records_for(40, codec + "-b", seed=i + 10),
                codec=codec, linger_ms=0)
    for p in range(2):
        produce(SRC, "idem", p, records_for(200, "idem%d" % p, seed=p),
                codec="lz4", idempotent=True)

    d.cli_ok("--add", "--mirror", "m1", "--topic", "codecs,idem")
    wait_mirrored("codecs", len(CODECS))
    wait_mirrored("idem", 2)
    wait_state("codecs", len(CODECS), "MIRRORING")
    nb = 0
    for p in range(len(CODECS)):
        nb += compare_batches("codecs", p)
        compare_records("codecs", p)
    for p in range(2):
        nb += compare_batches("idem", p, expect_foreign_pid=True)
        compare_records("idem", p)
    print("codecs and idempotent batches: %d batches byte-identical" % nb, flush=True)

    # The live numbers: DescribeMirrors shows source and destination ends.
    want = mt.end_offsets(SRC, "codecs", len(CODECS))


    def describe_caught_up():
        rows = [part_state("codecs", p) for p in range(len(CODECS))]
        return all(r["destinationOffset"] == want[r["partition"]] and
                   r["sourceOffset"] == want[r["partition"]] and r["lag"] == 0
                   for r in rows) and rows


    h.wait_for(describe_caught_up, 30, "DescribeMirrors to show codecs caught up")

    # 2. kill -9 again and again while producing, with leader moves and
    # injected errors on the way: nothing lost, nothing twice.
    LIVE = TOPICS["live"]
    stop_producing = threading.Event()
    produced = [0]


    def producer_loop():
        n = 0
        # Until told to stop (bounded, so a hung test cannot fill the mock).
        while not stop_producing.is_set() and n < 1000:
            for p in range(LIVE):
                produce(SRC, "live", p,
                        [(b"k%d" % n, b"live-%d-%d" % (p, n * 10 + i), None, None)
                         for i in range(10)], codec=CODECS[n % len(CODECS)])
            n += 1
            produced[0] = n


    d.cli_ok("--add", "--mirror", "m1", "--topic", "live")
    t = threading.Thread(target=producer_loop, daemon=True)
    t.start()
    injections = [
        "leader 0 live 0 2",          # source leader moves
        "leader 1 live 1 3",          # destination leader moves
        "err 1 0 6 6",                # two Produce requests: NOT_LEADER
        "err 0 1 6",                  # one Fetch: NOT_LEADER
        "errrtt 1 1 0 0 4000",        # a Produce applied, its answer after the timeout
        "down 0 2",                   # a source leader goes away (leads live-0, live-1)
        "up 0 2",                     # and comes back on the same port
    ]
    for k in range(len(injections)):
        # While a source leader is down (the mock never moves leadership)
        # the test's own producer is stuck on its partitions, so growth is
        # not waited for between "down" and "up".
        after_down = k > 0 and injections[k - 1].startswith("down")
        if not after_down:
            base = sum(mt.end_offsets(DST, "live", LIVE))
            h.wait_for(lambda: sum(mt.end_offsets(DST, "live", LIVE)) > base, 60,
                       "the destination to grow before kill %d" % (k + 1))
        mc.cmd(injections[k])
        if k % 2 == 0:
            d.kill9()
            d.start()
    stop_producing.set()
    t.join(120)
    h.check(not t.is_alive(), "the producer thread did not finish")
    wait_mirrored("live", LIVE, timeout=120)
    for p in range(LIVE):
        n = compare_records("live", p)
        eq(n, produced[0] * 10, "live-%d records on the destination" % p)
        compare_batches("live", p)
    print("kill -9 x%d, leader moves, a source broker down and up, NOT_LEADER "
          "and a lost Produce answer: %d records, nothing lost or duplicated"
          % ((len(injections) + 1) // 2, produced[0] * 10 * LIVE), flush=True)

    # 3. Pause and resume.
    produce(SRC, "pr", 0, records_for(50, "pr1"))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "pr")
    wait_mirrored("pr", 1)
    d.cli_ok("--pause", "--mirror", "m1", "--topic", "pr")
    wait_state("pr", 1, "PAUSED")
    paused_end = mt.end_offsets(DST, "pr", 1)
    produce(SRC, "pr", 0, records_for(50, "pr2"))
    # A negative check needs a window: several fetch intervals, on a deadline.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        eq(mt.end_offsets(DST, "pr", 1), paused_end, "destination end of a PAUSED partition")
        time.sleep(0.2)
    d.cli_ok("--resume", "--mirror", "m1", "--topic", "pr")
    wait_state("pr", 1, "MIRRORING")
    wait_mirrored("pr", 1)
    compare_batches("pr", 0)
    compare_records("pr", 0)

    # 4. Remove (STOPPED, last mirrored offset recorded), then add again.
    d.cli_ok("--remove", "--mirror", "m1", "--topic", "pr")
    rows = wait_state("pr", 1, "STOPPED")
    end = mt.end_offsets(SRC, "pr", 1)[0]
    eq(rows[0]["lastMirroredOffset"], end - 1, "lastMirroredOffset of STOPPED pr-0")
    # The last mirrored epoch is the newest source PartitionLeaderEpoch copied.
    c = kraw.Cluster(SRC)
    epochs = [struct.unpack(">i", b["raw"][12:16])[0] for b in c.batches("pr", 0)]
    c.close()
    eq(rows[0]["lastMirroredEpoch"], max(epochs) if max(epochs) >= 0 else -1,
       "lastMirroredEpoch of STOPPED pr-0 (source epochs %s)" % sorted(set(epochs)))
    produce(SRC, "pr", 0, records_for(30, "pr3"))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "pr")
    wait_state("pr", 1, "MIRRORING")
    wait_mirrored("pr", 1)
    compare_batches("pr", 0)
    compare_records("pr", 0)
    print("pause/resume and remove/add again: offsets and bytes equal", flush=True)

    # 5. A corrupt batch fails its partition, naming the offset; the other
    # partition of the topic keeps mirroring.
    produce(SRC, "bad", 0, records_for(20, "bad0"))
    produce(SRC, "bad", 1, records_for(20, "bad1"))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "bad")
    wait_mirrored("bad", 2)
    good = kraw.Cluster(SRC).batches("bad", 0)[0]["raw"]
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a records byte: the CRC no longer matches
    bad_offset = mt.end_offsets(SRC, "bad", 2)[0]
    sc = kraw.Cluster(SRC)
    body = (struct.pack(">hhi", -1, -1, 5000) + struct.pack(">i", 1) + kraw._s("bad")
            + struct.pack(">ii", 1, 0) + struct.pack(">i", len(corrupt)) + bytes(corrupt))
    r = sc.conn("bad", 0).call(0, 3, body)
    sc.close()
    produce(SRC, "bad", 1, records_for(20, "bad1b"))
    row = h.wait_for(lambda: (lambda r: r if r["state"] == "FAILED" else None)(
        part_state("bad", 0)), 60, "bad-0 to fail on the corrupt batch")
    h.check("CRC" in (row["errorMessage"] or "") and str(bad_offset) in row["errorMessage"],
            "bad-0 error message should name the CRC and offset %d: %r"
            % (bad_offset, row["errorMessage"]))
    wait_mirrored_1 = mt.end_offsets(SRC, "bad", 2)[1]
    h.wait_for(lambda: mt.end_offsets(DST, "bad", 2)[1] == wait_mirrored_1, 60,
               "bad-1 to keep mirroring while bad-0 is FAILED")
    eq(part_state("bad", 1)["state"], "MIRRORING", "state of bad-1")
    h.check(mt.end_offsets(DST, "bad", 2)[0] == bad_offset,
            "the corrupt batch reached the destination")
    print("corrupt batch: %r" % row["errorMessage"], flush=True)

    # 6. Someone else writes to the destination: the partition fails and says
    # which offsets disagree.
    d.create("m2", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "200",
                    "mirror.failed.retry.max.attempts": "0"})
    produce(SRC, "foreign", 0, records_for(10, "f1"))
    d.cli_ok("--add", "--mirror", "m2", "--topic", "foreign")
    wait_mirrored("foreign", 1)
    produce(DST, "foreign", 0, records_for(3, "intruder"))
    produce(SRC, "foreign", 0, records_for(5, "f2"))
    row = h.wait_for(lambda: (lambda r: r if r["state"] == "FAILED" else None)(
        part_state("foreign", 0, "m2")), 60, "foreign-0 to fail")
    msg = row["errorMessage"] or ""
    h.check("13" in msg and "10" in msg and "another producer" in msg,
            "foreign-0 message should name offsets 13 and 10: %r" % msg)
    print("foreign write: %r" % msg, flush=True)


    # 7. Metrics: the per-partition series a dashboard reads.
    text = d.metrics()
    for p in range(len(CODECS)):
        lbl = 'mirror="m1",topic="codecs",partition="%d"' % p
        for line in ("mirrord_partition_destination_end_offset{%s} %d" % (lbl, want[p]),
                     "mirrord_partition_source_high_watermark{%s} %d" % (lbl, want[p]),
                     "mirrord_partition_lag_records{%s} 0" % lbl,
                     'mirrord_partition_state{%s,state="MIRRORING"} 1' % lbl):
            h.check(line in text, "metrics lack %r" % line)
    import re
    m = re.search(r'^mirrord_partition_crc_failures_total\{mirror="m1",topic="bad",'
                  r'partition="0"\} (\d+)$', text, re.M)
    h.check(m is not None and int(m.group(1)) >= 1,
            "metrics do not count the CRC failure of bad-0")

    # 8. Retention overtakes a paused mirror: OFFSET_OUT_OF_RANGE, resume at
    # the new log start, the jump recorded as a translation anchor.
    produce(SRC, "retention", 0, records_for(20, "ret1"))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "retention")
    wait_mirrored("retention", 1)
    d.cli_ok("--pause", "--mirror", "m1", "--topic", "retention")
    wait_state("retention", 1, "PAUSED")
    dst_before = mt.end_offsets(DST, "retention", 1)[0]
    big = [(None, bytes([65 + i % 26]) * 400000, None, None) for i in range(20)]
    for rec in big:
        produce(SRC, "retention", 0, [rec], linger_ms=0)
    c = kraw.Cluster(SRC)
    log_start, src_end = c.offsets("retention", 0)
    c.close()
    h.check(log_start > dst_before, "the mock did not drop the old records "
            "(log start %d, mirrored up to %d): test setup" % (log_start, dst_before))
    d.cli_ok("--resume", "--mirror", "m1", "--topic", "retention")
    expect_end = dst_before + (src_end - log_start)
    h.wait_for(lambda: mt.end_offsets(DST, "retention", 1)[0] == expect_end, 60,
               "retention-0 to resume at the source log start %d" % log_start)
    a = consume_all(SRC, "retention", 0, src_end, start=log_start)
    b = consume_all(DST, "retention", 0, expect_end)
    eq([r[2] for r in b[dst_before:]], [r[2] for r in a],
       "records after the retention jump")
    row = part_state("retention", 0)
    eq(row["state"], "MIRRORING", "retention-0 state")
    # Offsets differ after the jump; the lag is counted in source offsets.
    h.wait_for(lambda: part_state("retention", 0)["lag"] == 0, 30,
               "DescribeMirrors to show retention-0 caught up (lag 0) although "
               "source end %d != destination end %d" % (src_end, expect_end))
    h.check("deleted before they were mirrored (DeleteRecords or retention)" in d.log(),
            "the retention jump was not logged")
    print("retention overtook a paused mirror: resumed at %d, %d records" %
          (log_start, len(a)), flush=True)

    # 9. Include patterns are re-evaluated on the metadata refresh: a topic
    # created on the source later is found and mirrored.
    d.create("m3", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "200",
                    "mirror.metadata.refresh.interval.ms": "1000"})
    produce(SRC, "disc.one", 1, records_for(30, "disc1"))
    d.cli_ok("--add", "--mirror", "m3", "--topic", "disc\\..*")
    wait_mirrored("disc.one", 2)
    for c in (0, 1):
        mc.cmd("topic %d disc.two 3" % c)
    produce(SRC, "disc.two", 2, records_for(30, "disc2"))
    h.wait_for(lambda: part_state("disc.two", 2, "m3") is not None, 30,
               "disc.two to be discovered by m3's include pattern")
    wait_mirrored("disc.two", 3)
    compare_batches("disc.two", 2)
    print("pattern discovery: disc.two found and mirrored", flush=True)

    # 10. A slow destination slows fetching: memory stays bounded by
    # pipeline.max_inflight_bytes_total (3 MiB here) and the fetch response
    # size (1 MiB for this mirror) while ~48 MB wait at the source.
    d.create("m4", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "200",
                    "mirror.fetch.response.max.bytes": "1048576",
                    "mirror.fetch.max.bytes": "262144"})
    for p in range(TOPICS["slow"]):
        produce(SRC, "slow", p, [(None, b"s" * 2000, None, None)] * 2000,
                linger_ms=5, batch_size=65536)
    hwm_before = proc_hwm_kb(d.proc.pid)
    mc.cmd("rtt 1 -1 150")
    d.cli_ok("--add", "--mirror", "m4", "--topic", "slow")
    wait_mirrored("slow", TOPICS["slow"], timeout=180)
    mc.cmd("rtt 1 -1 0")
    grew = proc_hwm_kb(d.proc.pid) - hwm_before
    total = sum(mt.end_offsets(SRC, "slow", TOPICS["slow"])) * 2000 // 1024
    # ASan's quarantine keeps freed memory resident: no RSS bound there.
    h.check(sanitized() or grew < 16 * 1024, "peak RSS grew by %d KiB while %d KiB went through a "
            "slow destination (caps: 3 MiB queued, 1 MiB per fetch)" % (grew, total))
    print("slow destination: peak RSS grew %d KiB for %d KiB copied" % (grew, total),
          flush=True)

    rc = d.stop()
    eq(rc, 0, "mirrord exit status after SIGTERM")
    mc.close()
    print("PASS", flush=True)


mc = d = SRC = DST = None

if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
