#!/usr/bin/env python3
"""Consumer-group offset sync, exact, on real Apache Kafka 4.4.

A mirror with mirror.groups.include / exclude mirrors two topics: a plain
one (2 partitions, destination offsets = source offsets) and a
transactional one whose aborted transactions and commit markers are not
copied, so its destination offsets differ from the source's.

  * Group A: a read_committed consumer on the source consumes up to several
    points (inside a transaction, right before a commit marker, after an
    aborted range, at a log that ends in a marker) and commits its position
    with a metadata string.  After each, the destination's committed offset
    is the destination offset of the very record the consumer reads next on
    the source (found by key and value, not computed from mirrord's map),
    the metadata string is kept and the committed leader epoch is -1.
  * Group B has a live member on the destination: its commit there is not
    overwritten while the member is there (mirrord_group_syncs_total
    {result="active"} counts it), and is synced once the member left.
  * Group excl matches mirror.groups.exclude: never committed on the
    destination.
  * Failover: group A commits once more and the topics are removed at once
    (--remove); the final sync commits that position; consumers of group A
    then start on the destination (auto.offset.reset=error: no silent
    reset) and read exactly the records after the last committed one:
    compared one by one with the source, nothing skipped, nothing twice.
"""

import os
import struct
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
PLAIN = "gs-plain-" + RUN
TXN = "gs-txn-" + RUN
GA = "gs-a-" + RUN
GB = "gs-b-" + RUN
GX = "gs-0excl-" + RUN   # sorts before GA: a round that syncs GA saw it


def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def raw_commit(bootstrap, group, offsets, check=True):
    """OffsetCommit v2 as an admin tool sends it (generation -1, no member),
    offsets {(topic, partition): (offset, metadata)}; single-broker
    clusters: the bootstrap broker is every group's coordinator.  An error
    fails the test, or with check=False is returned (the first, 0 none)."""
    bytopic = {}
    for (t, p), (o, m) in sorted(offsets.items()):
        bytopic.setdefault(t, []).append((p, o, m))
    body = _s(group) + struct.pack(">i", -1) + _s("") + struct.pack(">q", -1)
    body += struct.pack(">i", len(bytopic))
    for t, parts in bytopic.items():
        body += _s(t) + struct.pack(">i", len(parts))
        for p, o, m in parts:
            body += struct.pack(">iq", p, o) + _s(m)
    c = kraw.Conn(bootstrap)
    first = 0
    try:
        r = c.call(8, 2, body)
        for _ in range(r.i32()):
            t = r.str()
            for _ in range(r.i32()):
                p, e = r.i32(), r.i16()
                if e != 0 and check:
                    h.fail("test setup: OffsetCommit %s %s-%d: error %d"
                           % (group, t, p, e))
                first = first or e
    finally:
        c.close()
    return first


def raw_fetch(bootstrap, group):
    """OffsetFetch v5: {(topic, partition): (offset, leader_epoch, metadata)}."""
    c = kraw.Conn(bootstrap)
    try:
        r = c.call(9, 5, _s(group) + struct.pack(">i", -1))
        r.i32()  # throttle
        out = {}
        for _ in range(r.i32()):
            t = r.str()
            for _ in range(r.i32()):
                p, o, ep, m, e = r.i32(), r.i64(), r.i32(), r.str(), r.i16()
                if e == 0 and o >= 0:
                    out[(t, p)] = (o, ep, m)
        err = r.i16()
        if err != 0:
            raise AssertionError("OffsetFetch %s: error %d" % (group, err))
        return out
    finally:
        c.close()


def read(bootstrap, topic, partition, start=0):
    """Every committed record (offset, key, value) from start, in order."""
    return mt.read_partition(bootstrap, topic, partition,
                             "gs-reader-%s" % RUN, start)


def position_after(bootstrap, topic, partition, n):
    """A read_committed consumer's position after consuming n records."""
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": "gs-pos-%s" % RUN, "enable.auto.commit": False,
                  "isolation.level": "read_committed",
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, partition, 0)])
    got = 0
    deadline = time.monotonic() + 60
    try:
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got += 1
        eq(got, n, "test setup: records consumed from %s-%d" % (topic, partition))
        return c.position([TopicPartition(topic, partition)])[0].offset
    finally:
        c.close()


def expected_dst(src_recs, dst_recs, dst_end, c):
    """Where a consumer at source offset c resumes on the destination: the
    destination offset of the first source record at or after c (matched
    by key and value), or the destination end if there is none yet."""
    nxt = [(k, v) for o, k, v in src_recs if o >= c]
    if not nxt:
        return dst_end
    for o, k, v in dst_recs:
        if (k, v) == nxt[0]:
            return o
    h.fail("test setup: record %r is not on the destination" % (nxt[0],))


def caught_up(d, topic, nparts, src, dst):
    rows = {r["partition"]: r for r in d.describe_json("gs")
            if r["topic"] == topic}
    for p in range(nparts):
        r = rows.get(p)
        if r is None:
            return False
        if r["state"] == "FAILED":
            h.fail("%s-%d FAILED: %s" % (topic, p, r["errorMessage"]))
        if r["sourceOffset"] != mt.end_offset(src, topic, p) or r["lag"] != 0:
            return False
    return True


def write_source(src):
    SRC = src.bootstrap
    src.create_topic(PLAIN, partitions=2)
    src.create_topic(TXN, partitions=1)
    plain = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all",
                      "enable.idempotence": True})
    for p in range(2):
        for i in range(40):
            plain.produce(PLAIN, partition=p, key=b"k%d-%d" % (p, i),
                          value=b"plain-%d-%d" % (p, i))
    mt.flush_all(plain, "plain records")
    tx = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all",
                   "transactional.id": "gs-%s" % RUN,
                   "transaction.timeout.ms": 60000})
    tx.init_transactions(60)
    n = [0]

    def txn(commit, count):
        tx.begin_transaction()
        for _ in range(count):
            tx.produce(TXN, partition=0, key=b"t%d" % n[0],
                       value=b"%s-%d" % (b"commit" if commit else b"abort", n[0]))
            n[0] += 1
        mt.flush_all(tx, "transactional records")
        if commit:
            tx.commit_transaction(60)
        else:
            tx.abort_transaction(60)

    def single(v):
        plain.produce(TXN, partition=0, key=b"s%d" % n[0], value=v)
        n[0] += 1
        mt.flush_all(plain, "plain record in %s" % TXN)

    for i in range(3):
        single(b"plain-before-%d" % i)
    txn(True, 3)
    txn(False, 2)
    single(b"between")
    txn(True, 2)
    txn(False, 3)
    txn(False, 1)
    single(b"after-aborts")
    txn(True, 4)
    txn(False, 2)
    txn(True, 1)   # the log ends in a commit marker


def check_point(src, dst, group, topic, partition, c, meta):
    """The destination's commit of group for topic-partition is the
    translation of source commit c, with the metadata and epoch -1."""
    SRC, DST = src.bootstrap, dst.bootstrap
    src_recs = read(SRC, topic, partition)
    dst_recs = read(DST, topic, partition)
    want = expected_dst(src_recs, dst_recs, mt.end_offset(DST, topic, partition), c)

    def synced():
        got = raw_fetch(DST, group).get((topic, partition))
        return got is not None and got[0] == want and got
    got = h.wait_for(synced, 60, "group %s %s-%d: destination commit %d for "
                     "source commit %d (now %r)" % (
                         group, topic, partition, want, c,
                         raw_fetch(DST, group).get((topic, partition))))
    eq(got[2], meta, "metadata kept for %s %s-%d" % (group, topic, partition))
    eq(got[1], -1, "committed leader epoch on the destination")
    nxt_src = [r[1:] for r in src_recs if r[0] >= c][:1]
    nxt_dst = [r[1:] for r in dst_recs if r[0] >= want][:1]
    eq(nxt_dst, nxt_src, "the next record after the commit, destination vs "
       "source (%s-%d source %d -> destination %d)" % (topic, partition, c, want))
    print("  %s %s-%d: source %d -> destination %d, next %r" % (
        group, topic, partition, c, want, nxt_src), flush=True)
    return want


def final_sync_only(src, dst, d):
    """A mirror whose interval never comes round again: a commit made after
    its one round reaches the destination only through the sync at
    --remove."""
    SRC, DST = src.bootstrap, dst.bootstrap
    topic, group = "gs-final-" + RUN, "gs-f-" + RUN
    src.create_topic(topic, partitions=1)
    p = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all"})
    for i in range(30):
        p.produce(topic, partition=0, key=b"f%d" % i, value=b"final-%d" % i)
    mt.flush_all(p, "records of %s" % topic)
    d.create("gf", {"bootstrap.servers": SRC,
                    "mirror.fetch.wait.max.ms": "200",
                    "mirror.groups.include": "gs-f-.*",
                    "mirror.groups.sync.interval.ms": "86400000"})
    d.cli_ok("--add", "--mirror", "gf", "--topic", topic)
    rows = lambda: [r for r in d.describe_json("gf") if r["topic"] == topic]  # noqa: E731
    h.wait_for(lambda: rows() and rows()[0]["state"] == "MIRRORING" and
               rows()[0]["lag"] == 0 and rows()[0]["sourceOffset"] == 30, 60,
               "%s caught up" % topic)
    h.wait_for(lambda: (mt.metric_sum(d, "mirrord_group_sync_age_seconds",
                                      mirror="gf") or -1) >= 0, 60,
               "the first round of mirror gf")
    raw_commit(SRC, group, {(topic, 0): (17, "f")})
    eq(raw_fetch(DST, group), {}, "test setup: group %s not on the "
       "destination before --remove (the interval is a day)" % group)
    d.cli_ok("--remove", "--mirror", "gf", "--topic", topic)
    check_point(src, dst, group, topic, 0, 17, "f")
    print("PASS the sync at --remove commits the last position", flush=True)


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    write_source(src)
    src_txn = read(SRC, TXN, 0)
    ntxn = len(src_txn)
    h.check(mt.end_offset(SRC, TXN, 0) > src_txn[-1][0] + 1 and
            [o for o, _, _ in src_txn] != list(range(ntxn)),
            "test setup: %s has holes (aborts, markers) and ends in a marker"
            % TXN)

    d = mt.Mirrord(destination=DST)
    d.create("gs", {"bootstrap.servers": SRC,
                    "mirror.fetch.wait.max.ms": "200",
                    "mirror.groups.include": "gs-.*",
                    "mirror.groups.exclude": "gs-0excl-.*",
                    "mirror.groups.sync.interval.ms": "500"})
    d.cli_ok("--add", "--mirror", "gs", "--topic", PLAIN)
    d.cli_ok("--add", "--mirror", "gs", "--topic", TXN)
    h.wait_for(lambda: caught_up(d, PLAIN, 2, SRC, DST) and
               caught_up(d, TXN, 1, SRC, DST), 90, "mirror caught up")
    dst_txn = read(DST, TXN, 0)
    eq([r[1:] for r in dst_txn], [r[1:] for r in src_txn],
       "test setup: %s committed records on the destination" % TXN)
    h.check([o for o, _, _ in dst_txn] != [o for o, _, _ in src_txn],
            "test setup: destination offsets differ from the source's")

    # The excluded group commits first (see GX).
    raw_commit(SRC, GX, {(PLAIN, 0): (7, "x"), (TXN, 0): (2, "x")})

    # Group A at several points: counts of records consumed on TXN-0
    # (inside a transaction, before a marker, after aborted ranges, the
    # end) and on the plain partitions.
    points = [(4, 5, 9), (6, 17, 1), (7, 20, 30), (9, 33, 2), (ntxn, 40, 40)]
    for i, (nt, n0, n1) in enumerate(points):
        meta = "point-%d" % i
        offs = {(TXN, 0): position_after(SRC, TXN, 0, nt),
                (PLAIN, 0): position_after(SRC, PLAIN, 0, n0),
                (PLAIN, 1): position_after(SRC, PLAIN, 1, n1)}
        raw_commit(SRC, GA, {k: (v, meta) for k, v in offs.items()})
        print("point %d: source commits %r" % (i, offs), flush=True)
        for (t, p), c in sorted(offs.items()):
            check_point(src, dst, GA, t, p, c, meta)
        if i == 1:
            # Two rounds synced group A after the excluded group
            # committed: it would have been synced by now.
            eq(raw_fetch(DST, GX), {}, "excluded group on the destination")
            print("PASS excluded group not synced", flush=True)

    # Group B: a live member on the destination with its own commit.
    member = Consumer({"bootstrap.servers": DST, "group.id": GB,
                       "enable.auto.commit": False,
                       "session.timeout.ms": 30000})
    member.subscribe([PLAIN])
    h.wait_for(lambda: (member.poll(0.2), member.assignment())[1], 60,
               "group %s member assigned on the destination" % GB)
    member.commit(offsets=[TopicPartition(PLAIN, 0, 3)], asynchronous=False)
    raw_commit(SRC, GB, {(PLAIN, 0): (25, "b")})
    active_before = mt.metric_sum(d, "mirrord_group_syncs_total", mirror="gs",
                                  result="active") or 0
    h.wait_for(lambda: (member.poll(0.1), (mt.metric_sum(
        d, "mirrord_group_syncs_total", mirror="gs", result="active") or 0)
        > active_before)[1], 60, "mirrord to find group %s active" % GB)
    member.poll(0.1)
    eq(raw_fetch(DST, GB).get((PLAIN, 0), (None,))[0], 3,
       "the live group's own commit on the destination")
    member.close()
    check_point(src, dst, GB, PLAIN, 0, 25, "b")
    print("PASS a group with a live member on the destination is left alone",
          flush=True)

    # Failover: one more commit, the topics removed at once.
    final = {(TXN, 0): position_after(SRC, TXN, 0, 8),
             (PLAIN, 0): position_after(SRC, PLAIN, 0, 21),
             (PLAIN, 1): position_after(SRC, PLAIN, 1, 13)}
    raw_commit(SRC, GA, {k: (v, "final") for k, v in final.items()})
    d.cli_ok("--remove", "--mirror", "gs", "--topic", PLAIN)
    d.cli_ok("--remove", "--mirror", "gs", "--topic", TXN)
    h.wait_for(lambda: set(d.states("gs").values()) == {"STOPPED"}, 60,
               "the topics to be STOPPED")
    for (t, p), c in sorted(final.items()):
        check_point(src, dst, GA, t, p, c, "final")

    # Consumers of group A on the destination, now the primary.
    cons = Consumer({"bootstrap.servers": DST, "group.id": GA,
                     "enable.auto.commit": False,
                     "isolation.level": "read_committed",
                     "auto.offset.reset": "error",
                     "enable.partition.eof": True,
                     "fetch.wait.max.ms": 100})
    cons.subscribe([PLAIN, TXN])
    got = {k: [] for k in final}
    eof = set()
    deadline = time.monotonic() + 90
    while len(eof) < len(final) and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:
                eof.add((m.topic(), m.partition()))
                continue
            h.fail("destination consumer of %s: %s" % (GA, m.error()))
        got[(m.topic(), m.partition())].append((m.key(), m.value()))
    cons.close()
    eq(eof, set(final), "partitions read to their end on the destination")
    for (t, p), c in sorted(final.items()):
        want = [r[1:] for r in read(SRC, t, p) if r[0] >= c]
        eq(got[(t, p)], want, "records group %s read on the destination from "
           "%s-%d after failover (source commit %d)" % (GA, t, p, c))
        h.check(want, "test setup: records left after the final commit")
        print("  %s-%d: %d records after failover equal the source's"
              % (t, p, len(want)), flush=True)
    print("PASS failover: exactly the next records", flush=True)

    final_sync_only(src, dst, d)

    h.check((mt.metric_sum(d, "mirrord_group_offsets_committed_total",
                           mirror="gs") or 0) > 0,
            "mirrord_group_offsets_committed_total counts")
    h.check((mt.metric_sum(d, "mirrord_group_syncs_total", mirror="gs",
                           result="unchanged") or 0) > 0,
            "rounds that found a group's translation unchanged did not "
            "commit it again (mirrord_group_syncs_total{result=unchanged})")
    h.check(mt.metric_sum(d, "mirrord_group_sync_age_seconds", mirror="gs")
            is not None, "mirrord_group_sync_age_seconds exported")
    eq(d.stop(), 0, "mirrord exit status")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
