#!/usr/bin/env python3
"""Failback of a transactional topic onto the old primary, on real Apache
Kafka (the shared pair of test/kafka/realkafka.py, A and B; SKIPs with the
reason when the tier cannot run).

Transaction markers and aborted records are not copied, so a mirror of a
transactional topic is not offset for offset: the failover mirror's marks
say where on the new primary the records after the stop point begin
(dst=), and the old primary is read after the stop point the way a
read_committed consumer reads it.

  * mirrord D1 mirrors topic T (3 partitions) from A to B; every partition
    holds committed and aborted transactions; D1 is paused, and A gets
    more, never mirrored:
      - partition 0: one aborted transaction (nothing committed);
      - partition 1: committed transactions (keys, values, headers and
        timestamps of their own), an aborted one and plain idempotent
        records;
      - partition 2: a committed transaction, then one left open;
    failover: D1 --remove --wait; its marks on B say for each partition
    last=, epoch=, ident=0 and dst= (B's end);
  * B is the primary: records are produced there;
  * failback, mirrord D2 mirrors T from B back onto A:
      - partition 0: aborted records and markers only after the stop
        point: no divergence, B's new records are copied after them (an
        anchor), the note says so;
      - partition 1: FAILED "failback divergence at offset N", the reason
        counting the committed records, the markers and the aborted
        records; partition 2 likewise, naming the transaction still open;
        A untouched; --recover without a resolution is refused, naming
        both resolutions;
  * --recover --resolution preserve: partition 1's committed records are
    in T.diverged-<epoch> partition 1, exactly: read with read_committed
    from A after the stop point and from the aside topic (also
    read_uncommitted: nothing aborted), keys, values, headers, timestamps
    and order equal; the log and the partition's note (--describe) give
    the count, A's offsets and the aside offsets; B's records follow on A;
    partition 2 waits for the open transaction (its note says so, its
    aside partition stays empty); once its producer commits it, its 5
    committed records are preserved and B's records follow.

Today's binary fails first at D1's marks (no dst=).
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_loops_kafka as lk  # noqa: E402  (marks; SKIPs without confluent-kafka)
from confluent_kafka import Producer  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
# The records' own timestamps (ms): recent, or retention takes them.
TS0 = int(time.time() * 1000) - 60000


def read(bootstrap, topic, partition, start=0, isolation="read_committed"):
    """(offset, key, value, headers, timestamp) of every record."""
    return mt.read_partition(
        bootstrap, topic, partition, "fbt-%s" % RUN, start=start,
        isolation=isolation,
        record=lambda m: (m.offset(), m.key(), m.value(),
                          tuple(m.headers() or ()), m.timestamp()[1]))


def content(recs):
    """The records without their offsets."""
    return [r[1:] for r in recs]


def txn_producer(bootstrap, tid):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "enable.idempotence": True, "linger.ms": 5,
                  "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    return p


def txn(p, topic, partition, tag, n, commit=True, ts=None):
    """One transaction of n records on topic-partition, committed or
    aborted (librdkafka 2.0.2: flush before abort_transaction)."""
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=b"%s-k%d" % (tag.encode(), i),
                  value=b"%s-v%d" % (tag.encode(), i), partition=partition,
                  headers=[("tag", tag.encode()), ("i", b"%d" % i)],
                  timestamp=(ts or TS0) + i)
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)
        p.abort_transaction(30)


def plain(bootstrap, topic, partition, tag, n):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"%s-k%d" % (tag.encode(), i),
                  value=b"%s-v%d" % (tag.encode(), i), partition=partition,
                  headers=[("tag", tag.encode())], timestamp=TS0 + 500 + i)
    eq(p.flush(30), 0, "plain records of %s delivered" % tag)


def rows(d, mirror):
    return {p["partition"]: p for p in d.describe_json(mirror)}


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    A, B = h.real_kafka(2)
    topic = "fbt-" + RUN
    A.create_topic(topic, partitions=3)
    tx = txn_producer(A.bootstrap, "fbt-a-" + RUN)
    for p in range(3):
        txn(tx, topic, p, "m%d-a" % p, 4)
        txn(tx, topic, p, "m%d-x" % p, 2, commit=False)
        txn(tx, topic, p, "m%d-b" % p, 3)

    d1 = mt.Mirrord(destination=B.bootstrap, name="d1")
    d1.create("ab", {"bootstrap.servers": A.bootstrap,
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.groups.sync.interval.ms": "300"})
    d1.cli_ok("--add", "--mirror", "ab", "--topic", topic)
    mt.wait_caught_up(d1, "ab", 120, "%s mirrored to B" % topic, count=3,
                      fail_on_failed=True)
    d1.cli_ok("--pause", "--mirror", "ab", "--topic", topic)
    h.wait_for(lambda: all(p["state"] == "PAUSED"
                           for p in d1.describe_json("ab")), 60, "PAUSED")

    # On A only, after the stop point.
    txn(tx, topic, 0, "d0-x", 2, commit=False)
    txn(tx, topic, 1, "d1-a", 3, ts=TS0 + 100)
    txn(tx, topic, 1, "d1-x", 2, commit=False)
    plain(A.bootstrap, topic, 1, "d1-p", 2)
    txn(tx, topic, 1, "d1-b", 2, ts=TS0 + 200)
    txn(tx, topic, 2, "d2-a", 2, ts=TS0 + 300)
    op = txn_producer(A.bootstrap, "fbt-open-" + RUN)
    op.begin_transaction()
    for i in range(3):
        op.produce(topic, key=b"d2-o-k%d" % i, value=b"d2-o-v%d" % i,
                   partition=2, headers=[("tag", b"d2-o")],
                   timestamp=TS0 + 400 + i)
    op.flush(30)
    open_at = mt.end_offset(A.bootstrap, topic, 2) - 3   # the open one's first

    # Failover: not everything was copied (exit status 5).
    r = d1.cli_rc(5, "--remove", "--mirror", "ab", "--topic", topic,
                  "--wait", "60")
    print(r.stdout, flush=True)
    a_id = lk.cluster_id(d1, "ab")
    stop = {p["partition"]: p for p in d1.describe_json("ab")}
    last = {p: stop[p]["lastMirroredOffset"] for p in range(3)}
    epoch = {p: stop[p]["lastMirroredEpoch"] for p in range(3)}
    b_end = {p: mt.end_offset(B.bootstrap, topic, p) for p in range(3)}
    eq(b_end, {0: 7, 1: 7, 2: 7}, "B's ends: the committed records only")
    want = {(topic, p): "mirrord-mirror v1 state=stopped source=%s mirror=ab "
            "last=%d epoch=%d ident=0 dst=%d" % (a_id, last[p], epoch[p],
                                                 b_end[p])
            for p in range(3)}
    h.wait_for(lambda: {k: lk.marks(B.bootstrap).get(k) for k in want}
               == want, 60, "D1's stop marks on B with dst= (want %r, now %r)"
               % (want, lk.marks(B.bootstrap)))
    d1.stop()

    # B is the primary: new records there.
    for p in range(3):
        mt.produce_tagged(B.bootstrap, topic, p, 3, "b%d" % p, keyed=True)
    a_before = {p: read(A.bootstrap, topic, p) for p in range(3)}
    a_raw = {p: read(A.bootstrap, topic, p, isolation="read_uncommitted")
             for p in range(3)}
    a_end = {p: mt.end_offset(A.bootstrap, topic, p) for p in range(3)}
    # What a read_committed consumer of A reads after each stop point.
    div = {p: [r for r in a_before[p] if r[0] > last[p]] for p in range(3)}
    eq([len(div[p]) for p in range(3)], [0, 7, 2],
       "A's committed records after the stop points (2's open one unread)")

    # Failback: D2 mirrors B back onto A.
    d2 = mt.Mirrord(destination=A.bootstrap, name="d2")
    d2.create("ba", {"bootstrap.servers": B.bootstrap,
                     "mirror.fetch.wait.max.ms": "100"})
    d2.cli_ok("--add", "--mirror", "ba", "--topic", topic)

    def settled():
        r = rows(d2, "ba")
        if len(r) != 3 or r[1]["state"] != "FAILED" or \
                r[2]["state"] != "FAILED" or r[0]["state"] != "MIRRORING" \
                or r[0]["lag"] != 0:
            return None
        return r
    by = h.wait_for(settled, 120, "partition 0 copying, 1 and 2 FAILED "
                    "(now %r)" % d2.describe_json("ba"))

    # Partition 0: aborted records and markers only: no divergence.
    b0 = read(B.bootstrap, topic, 0)
    a0 = read(A.bootstrap, topic, 0)
    eq(content(a0), content(a_before[0]) + content(b0[7:]),
       "A0 = A0's committed records, then B0's new ones")
    eq(a0[-3][0], a_end[0], "B0's records start at A0's old end")
    note0 = by[0]["warningMessage"] or ""
    h.check(("failback: no divergence at offset %d: the destination's "
             "offsets %d..%d hold 2 transaction markers and 2 records of "
             "aborted transactions (what mirror ab left out of its copy), "
             "no committed record; source offset 7 is copied to "
             "destination offset %d") % (last[0] + 1, last[0] + 1,
                                         a_end[0] - 1, a_end[0]) in note0,
            "partition 0's note: %r" % note0)

    # Partitions 1 and 2: FAILED, counted, A untouched.
    r1, r2 = by[1]["errorMessage"], by[2]["errorMessage"]
    print("partition 1: %s\npartition 2: %s" % (r1, r2), flush=True)
    n1 = a_end[1] - last[1] - 1
    h.check(("failback divergence at offset %d: the destination partition "
             "(the old primary) holds offsets %d..%d (%d offsets: 7 committed "
             "records at %d..%d, 4 transaction markers and 2 records of "
             "aborted transactions) written after mirror ab stopped copying "
             "it at offset %d (epoch %d)") % (
                 last[1] + 1, last[1] + 1, a_end[1] - 1, n1, div[1][0][0],
                 div[1][-1][0], last[1], epoch[1]) in r1,
            "partition 1's reason: %r" % r1)
    h.check("copies the source's records (from its offset 7) after them, "
            "--resolution preserve also copies the 7 committed records to "
            "topic %s.diverged-%d first" % (topic, epoch[1]) in r1,
            "partition 1's reason names the resolutions: %r" % r1)
    h.check(("holds offsets %d..%d (%d offsets: 2 committed records at "
             "%d..%d, 2 transaction markers and 0 records of aborted "
             "transactions before a transaction still open at offset %d "
             "(not read yet))") % (
                 last[2] + 1, a_end[2] - 1, a_end[2] - last[2] - 1,
                 div[2][0][0], div[2][-1][0], open_at) in r2,
            "partition 2's reason: %r" % r2)
    h.check("--resolution preserve also copies the committed records (2 "
            "before the open transaction, and its own if it commits; both "
            "resolutions wait for it to end)" in r2,
            "partition 2's reason says what preserve will do: %r" % r2)
    for p in (1, 2):
        eq(read(A.bootstrap, topic, p, isolation="read_uncommitted"),
           a_raw[p], "A%d untouched while FAILED" % p)
    r = d2.cli("--recover", "--mirror", "ba", "--topic", topic)
    h.check(r.returncode == 1 and "needs an operator decision" in r.stderr
            and "recover it with the resolution skip-over or preserve"
            in r.stderr, "--recover without a resolution: %r" % r.stderr)

    # The decision: preserve.
    d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
              "--resolution", "preserve")
    aside1 = "%s.diverged-%d" % (topic, epoch[1])
    aside2 = "%s.diverged-%d" % (topic, epoch[2])

    def one_done():
        r = rows(d2, "ba")
        return r if r[1]["state"] == "MIRRORING" and r[1]["lag"] == 0 else None
    by = h.wait_for(one_done, 120, "partition 1 preserved and copying "
                    "(now %r)" % d2.describe_json("ba"))
    kept = read(A.bootstrap, aside1, 1)
    eq(content(kept), content(div[1]),
       "%s partition 1 = A1's committed records after offset %d (keys, "
       "values, headers, timestamps, order)" % (aside1, last[1]))
    eq(content(read(A.bootstrap, aside1, 1, isolation="read_uncommitted")),
       content(div[1]), "nothing aborted in %s partition 1" % aside1)
    eq([o for o, *_ in kept], list(range(7)), "aside offsets 0..6")
    b1 = read(B.bootstrap, topic, 1)
    a1 = read(A.bootstrap, topic, 1)
    eq(content(a1), content(a_before[1]) + content(b1[7:]),
       "A1 keeps its records, B1's new ones follow")
    eq(a1[-3][0], a_end[1], "B1's records start at A1's old end")
    line = ("failback divergence at offset %d: preserved into topic %s "
            "partition 1: 7 committed records of offsets %d..%d (3 batches), "
            "now at offsets 0..6 of %s; 4 transaction markers and 2 records "
            "of aborted transactions not copied") % (
                last[1] + 1, aside1, div[1][0][0], div[1][-1][0], aside1)
    h.check(line in d2.log(), "the log: %r" % line)
    note1 = by[1]["warningMessage"] or ""
    h.check(("failback divergence at offset %d: 7 committed records of "
             "offsets %d..%d preserved in topic %s partition 1 at offsets "
             "0..6 (4 transaction markers and 2 records of aborted "
             "transactions not copied); the old primary's offsets %d..%d are "
             "kept in place, the source's records from its offset 7 follow "
             "at offset %d") % (last[1] + 1, div[1][0][0], div[1][-1][0],
                                aside1, last[1] + 1, a_end[1] - 1, a_end[1])
            in note1, "partition 1's note: %r" % note1)
    out = d2.cli_ok("--describe", "--mirror", "ba").stdout
    h.check("7 committed records of offsets" in out,
            "--describe shows the note:\n%s" % out)

    # Partition 2 waits for its open transaction.
    def waiting():
        r = rows(d2, "ba")[2]
        return r if "waiting for the transaction open on the destination " \
            "partition (the old primary) at offset %d" % open_at in \
            (r["warningMessage"] or "") else None
    r = h.wait_for(waiting, 60, "partition 2 waiting (now %r)"
                   % rows(d2, "ba")[2])
    eq(r["mirrorState"], "PREPARING",
       "partition 2 waits, PREPARING")
    time.sleep(2)
    eq(read(A.bootstrap, aside2, 2), [], "nothing preserved of partition 2 "
       "while its transaction is open")
    eq(read(A.bootstrap, topic, 2, isolation="read_uncommitted"), a_raw[2],
       "A2 untouched while waiting")
    op.commit_transaction(30)
    mt.wait_caught_up(d2, "ba", 120, "partition 2 preserved and copying",
                      count=3, fail_on_failed=True)
    div2 = [r for r in read(A.bootstrap, topic, 2) if last[2] < r[0] < a_end[2] + 1]
    eq(len(div2), 5, "A2's committed records after the stop point, now")
    eq(content(read(A.bootstrap, aside2, 2)), content(div2),
       "%s partition 2 = A2's committed records after offset %d, the "
       "formerly open transaction's included" % (aside2, last[2]))
    a2, b2 = read(A.bootstrap, topic, 2), read(B.bootstrap, topic, 2)
    eq(content(a2), content(a_before[2]) + content(div2[2:]) + content(b2[7:]),
       "A2 keeps its records, B2's new ones follow")
    d2.stop()
    print("PASS: transactional failback: the marks say where B's records "
          "begin, markers and aborted records are no divergence, committed "
          "ones preserved exactly, an open transaction waited for",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
