#!/usr/bin/env python3
"""Group commit of the metadata log: the real mirrord binary and
kafka-mirrors CLI against two librdkafka mock clusters.

Also the asynchronous partition state changes: mirrord is killed while
topics of 200 partitions each start (start_kills()).

While 48 partitions are copied batch after batch, every batch's metadata
records (translation anchors, part-sending, producer identity) go through
asynchronous groups written and fsynced by the log's writer thread.  mirrord
is killed with SIGKILL right after the destination grows (groups are in
flight then), again and again, and restarted on the same data directory:

  * it always starts (the log opens: nothing half-written is trusted);
  * every partition ends MIRRORING with lag 0, none FAILED (a batch at the
    destination whose anchors or producer identity were not durable would
    fail the proof of provenance at the restart);
  * the destination equals the source offset for offset, nothing lost,
    nothing twice;
  * the metrics show groups: fewer fsyncs than metadata records.
"""

import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

PARTS = 48
ROUNDS = 5
PER_ROUND = 12   # records per partition per round, one batch each
START_PARTS = 200
START_ROUNDS = 4

mc = None


def produce_round(bootstrap, rnd):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "acks": "all", "message.timeout.ms": 30000})
    for i in range(PER_ROUND):
        for part in range(PARTS):
            p.produce("gc", key=b"k%d" % part,
                      value=b"gc-%d-%d-%d" % (part, rnd, i), partition=part,
                      on_delivery=lambda err, _m: err and errors.append(str(err)))
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        h.fail("producing round %d: %d unflushed, %s" % (rnd, left, errors[:3]))


def ends(bootstrap, topic="gc", nparts=PARTS):
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(topic, part)[1] for part in range(nparts)]
    finally:
        c.close()


def read_all(bootstrap, want, topic="gc"):
    """{partition: [(offset, value)]} up to want[partition]."""
    nparts = len(want)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "gc-check",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, part, 0) for part in range(nparts)])
    out = {part: [] for part in range(nparts)}
    got, total = 0, sum(want)
    deadline = time.monotonic() + 60
    while got < total:
        if time.monotonic() > deadline:
            h.fail("reading %s from %s: %d of %d records" % (topic, bootstrap,
                                                              got, total))
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out[m.partition()].append((m.offset(), m.value()))
        got += 1
    c.close()
    return out


def metric(text, name):
    m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), text,
                  re.M)
    return float(m.group(1)) if m else None


def start_topics(SRC):
    """The topics start_kills() adds, created and written before mirrord
    runs (the mock creates partitions slowly while it serves Fetches)."""
    topics = ["gs%d" % r for r in range(START_ROUNDS)]
    for t in topics:
        for c in (0, 1):
            mc.cmd("topic %d %s %d random" % (c, t, START_PARTS),
                   timeout=120)
        p = Producer({"bootstrap.servers": SRC, "linger.ms": 5,
                      "acks": "all"})
        for part in range(START_PARTS):
            for i in range(2):
                p.produce(t, value=b"%s-%d-%d" % (t.encode(), part, i),
                          partition=part)
        h.check(p.flush(60) == 0, "producing %s" % t)
    return topics


def start_kills(d, SRC, DST):
    """kill -9 while many partitions start (their PREPARING -> MIRRORING
    state changes go in asynchronous groups): each round adds a topic of
    START_PARTS partitions and kills mirrord as soon as the first of them
    are MIRRORING (the others' state writes are queued or in flight), or
    0.15, 0.3, 0.45 s after the topic was added; after
    the restarts every partition of every round ends MIRRORING with lag 0
    (none stuck PREPARING, none FAILED) and each destination equals its
    source."""
    topics = ["gs%d" % r for r in range(START_ROUNDS)]
    seen_mid = 0
    for t in topics:
        d.cli_ok("--add", "--mirror", "m1", "--topic", t)

        pat = re.compile(r"/%s-[0-9]+: PREPARING -> MIRRORING" % t)
        path = d.proc.log_path

        def started():
            # mirrord logs the move once it is durable and applied.
            with open(path, "rb") as f:
                return len(pat.findall(f.read().decode("utf-8", "replace")))

        rnd = topics.index(t)
        if rnd == 0:
            # Right after the first group of state changes landed.
            h.wait_for(started, 120, "some partition of %s MIRRORING" % t,
                       interval=0.002)
        else:
            # Earlier: destination ends being read, the first state
            # changes being written.
            time.sleep(0.15 * rnd)
        d.kill9()
        n = started()
        if n < START_PARTS:
            seen_mid += 1
        print("%s: killed with %d of %d partitions MIRRORING"
              % (t, n, START_PARTS), flush=True)
        d.start()
    h.check(seen_mid > 0, "no kill came while partitions were still "
            "starting (the test would prove nothing)")
    src_ends = {t: ends(SRC, t, START_PARTS) for t in topics}

    mt.wait_caught_up(
        d, "m1", 180, "every partition of %s MIRRORING with lag 0 (after "
        "kill -9 during the start)" % ", ".join(topics), topic=topics,
        count=len(topics) * START_PARTS, fail_on_failed=True,
        row_ok=lambda r: r["destinationOffset"] == src_ends[r["topic"]][r["partition"]])
    for t in topics:
        h.check(ends(DST, t, START_PARTS) == src_ends[t],
                "%s: destination ends differ from the source's" % t)
        src = read_all(SRC, src_ends[t], t)
        dst = read_all(DST, src_ends[t], t)
        for part in range(START_PARTS):
            if dst[part] != src[part]:
                h.fail("%s-%d: the destination differs from the source "
                       "(%r, %r)" % (t, part, dst[part], src[part]))
    print("kill -9 x%d during the start of %d partitions each (%d with "
          "partitions still PREPARING): all MIRRORING, nothing lost or "
          "duplicated" % (len(topics), START_PARTS, seen_mid), flush=True)


def main():
    global mc
    mc = MockCluster(clusters=2, brokers=1,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
    for c in (0, 1):
        mc.cmd("topic %d gc %d" % (c, PARTS))
    start_topics(SRC)
    d = mt.Mirrord(destination=DST)
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "50"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", "gc")

    kills = 0
    for rnd in range(ROUNDS):
        base = sum(ends(DST))
        produce_round(SRC, rnd)
        # Kill while batches (and their metadata groups) are in flight:
        # as soon as the destination has grown, not once it caught up.
        h.wait_for(lambda: sum(ends(DST)) > base, 60,
                   "the destination to grow in round %d" % rnd)
        d.kill9()
        kills += 1
        d.start()

    src_ends = ends(SRC)
    eq_total = PARTS * ROUNDS * PER_ROUND
    h.check(sum(src_ends) == eq_total, "the source holds %d records, want %d"
            % (sum(src_ends), eq_total))

    mt.wait_caught_up(
        d, "m1", 120, "every gc partition MIRRORING with lag 0 (after kill -9)",
        topic="gc", count=PARTS, fail_on_failed=True,
        row_ok=lambda r: r["destinationOffset"] == src_ends[r["partition"]])
    h.check(ends(DST) == src_ends, "destination ends %r, source ends %r"
            % (ends(DST), src_ends))
    src = read_all(SRC, src_ends)
    dst = read_all(DST, src_ends)
    for part in range(PARTS):
        if dst[part] != src[part]:
            h.fail("gc-%d: the destination differs from the source (%d and %d "
                   "records)" % (part, len(dst[part]), len(src[part])))

    start_kills(d, SRC, DST)

    # New partitions in the last run: their first batches' producer
    # identities, anchors and part-sending records go in groups, fewer
    # fsyncs than records (a copied plain topic writes no metadata after
    # its first batch: the recorded map explains the rest).
    for c in (0, 1):
        mc.cmd("topic %d gc2 %d" % (c, PARTS))
    p = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all"})
    for part in range(PARTS):
        p.produce("gc2", value=b"gc2-%d" % part, partition=part)
    h.check(p.flush(60) == 0, "producing gc2")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "gc2")

    mt.wait_caught_up(d, "m1", 120, "every gc2 partition MIRRORING with lag 0",
                      topic="gc2", count=PARTS,
                      row_ok=lambda r: r["destinationOffset"] == 1)
    text = d.metrics()
    groups = metric(text, "mirrord_metadata_log_groups_total")
    records = metric(text, "mirrord_metadata_log_records_total")
    fsyncs = metric(text, "mirrord_metadata_log_fsync_duration_seconds_count")
    print("last run: %s metadata records, %s asynchronous groups, %s fsyncs"
          % (records, groups, fsyncs), flush=True)
    h.check(groups is not None and groups > 0,
            "no asynchronous metadata group was written: %r" % groups)
    h.check(fsyncs is not None and records is not None and fsyncs < records,
            "%s fsyncs for %s metadata records: no group commit" % (fsyncs, records))
    print("kill -9 x%d with metadata groups in flight: %d records, nothing "
          "lost, duplicated or FAILED" % (kills, sum(src_ends)), flush=True)
    d.stop()


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
