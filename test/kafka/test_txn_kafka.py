#!/usr/bin/env python3
"""Transactions on real Apache Kafka, as a read_committed consumer sees them.

  * Many aborted producers at once: 100 transactional producers each hold a
    transaction open on one partition at the same time, their records
    interleaved with committed ones (a plain idempotent producer and a
    committing transactional one); then all 100 abort.  A second partition
    holds only committed data.  Once mirrord has caught up, each destination
    partition read with read_committed equals the source read with
    read_committed, and not one aborted record is on the destination even
    read_uncommitted, and its lag is 0 (the abort markers, which the
    coordinator writes after the abort returns, may end the log).  Before
    the fix, the 65th and later aborted producers of a Fetch were not
    tracked: 72 aborted records were copied as committed, and the lag
    stayed at the number of trailing markers.
  * A stuck last stable offset: a transaction held open on the source while
    other producers write.  With pipeline.stuck_lso_warn_ms shortened,
    DescribeMirrors (kafka-mirrors --describe, table and --json) names the
    stuck offset and mirrord_partition_lso_stuck_seconds is non-zero; once
    the transaction commits both clear and the committed records arrive.
"""

import concurrent.futures
import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
NPRODUCERS = 100


def read(bootstrap, topic, partition, isolation="read_committed"):
    """Every record (offset, key, value) of the partition, in order."""
    return mt.read_partition(bootstrap, topic, partition, "txn-kafka-%s" % RUN,
                             isolation=isolation, config={"check.crcs": True})


_last_rows = {}


def caught_up(d, mirror, topic, partitions, src):
    """Describe says lag 0 at the source's current high watermark."""
    want = {p: mt.end_offset(src, topic, p) for p in partitions}
    rows = {r["partition"]: r for r in d.describe_json(mirror)
            if r["topic"] == topic}
    _last_rows[topic] = (want, rows)
    for p in partitions:
        r = rows.get(p)
        if r is None or r["state"] == "FAILED":
            h.check(r is not None, "no describe row for %s-%d" % (topic, p))
            h.fail("%s-%d FAILED: %s" % (topic, p, r["errorMessage"]))
        if r["sourceOffset"] != want[p] or r["lag"] != 0:
            return False
    return True


def metric(d, family, topic, partition):
    """The value of family{mirror,topic,partition}, None without a series."""
    for line in d.metrics().splitlines():
        if line.startswith(family + "{") and \
                'topic="%s"' % topic in line and \
                'partition="%d"' % partition in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def many_aborted_producers(src, dst, d):
    SRC, DST = src.bootstrap, dst.bootstrap
    topic = "txn-many-" + RUN
    src.create_topic(topic, partitions=2)
    plain = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all",
                      "enable.idempotence": True})

    def txn_producer(name):
        p = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all",
                      "transactional.id": "txn-%s-%s" % (RUN, name),
                      "transaction.timeout.ms": 120000})
        p.init_transactions(60)
        return p

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        aborters = list(ex.map(txn_producer, ["a%d" % i for i in range(NPRODUCERS)]))
    committer = txn_producer("c")
    print("%d transactional producers ready in %.1f s"
          % (NPRODUCERS + 1, time.monotonic() - t0), flush=True)

    # Partition 0: every aborting producer opens its transaction, so all
    # 100 are open at once, and writes two records in it; committed records
    # (plain and transactional) go in between.  The aborting producers
    # write from a thread pool, which interleaves them.
    def write(i, rnd):
        p = aborters[i]
        if rnd == 0:
            p.begin_transaction()
        p.produce(topic, partition=0, key=b"a%d" % i,
                  value=b"abort-%d-%d" % (i, rnd))
        mt.flush_all(p, "aborting producer %d" % i)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        for rnd in range(2):
            jobs = [ex.submit(write, i, rnd) for i in range(NPRODUCERS)]
            for k in range(12):
                plain.produce(topic, partition=0, value=b"plain-%d-%d" % (rnd, k))
                mt.flush_all(plain, "plain record")
                if k % 4 == 0:
                    committer.begin_transaction()
                    for j in range(3):
                        committer.produce(topic, partition=0,
                                          value=b"commit-%d-%d-%d" % (rnd, k, j))
                    committer.commit_transaction(60)
            for j in jobs:
                j.result()
    # Partition 1: committed data only.
    for k in range(200):
        plain.produce(topic, partition=1, value=b"p1-%d" % k)
    mt.flush_all(plain, "plain records")

    def abort(p):
        mt.flush_all(p, "before abort")  # librdkafka 2.0.2 with Kafka 4 (HACKING)
        p.abort_transaction(60)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(abort, aborters))
    print("records written and %d transactions aborted in %.1f s"
          % (NPRODUCERS, time.monotonic() - t0), flush=True)
    # Committed records after the aborts (the log does not end on markers).
    for k in range(5):
        plain.produce(topic, partition=0, value=b"tail-%d" % k)
        plain.produce(topic, partition=1, value=b"tail1-%d" % k)
    mt.flush_all(plain, "tail records")

    # The coordinator writes the abort markers after abort_transaction()
    # returns; until they are in, the last stable offset stays at the first
    # open transaction and a read_committed read ends there.  Wait for the
    # committed view to reach the tail records.
    views = {}

    def committed_to_tail():
        for p, last in ((0, b"tail-4"), (1, b"tail1-4")):
            views[p] = read(SRC, topic, p)
            if not views[p] or views[p][-1][2] != last:
                return False
        return True
    h.wait_for(committed_to_tail, 60,
               "the source's read_committed view of %s to reach the records "
               "written after the aborts (the abort markers)" % topic)
    want0, want1 = views[0], views[1]
    h.check(want0 and not any(v.startswith(b"abort") for _, _, v in want0),
            "test setup: the source's committed view holds no aborted record")
    eq(sum(1 for _, _, v in read(SRC, topic, 0, "read_uncommitted")
           if v.startswith(b"abort")), 2 * NPRODUCERS,
       "test setup: aborted records in the source partition")
    print("source: %d committed records among %d offsets in %s-0, "
          "%d in %s-1" % (len(want0), mt.end_offset(SRC, topic, 0), topic, len(want1),
                          topic), flush=True)

    d.cli_ok("--add", "--mirror", "tx", "--topic", topic)
    try:
        h.wait_for(lambda: caught_up(d, "tx", topic, (0, 1), SRC), 60,
                   "%s to be caught up (log %s)" % (topic, d.proc.log_path))
    except AssertionError as e:
        print("source high watermarks and describe rows: %r"
              % (_last_rows.get(topic),), flush=True)
        print("destination high watermarks: %r"
              % [mt.end_offset(DST, topic, p) for p in (0, 1)], flush=True)
        aborted = [v for _, _, v in read(DST, topic, 0, "read_uncommitted")
                   if v.startswith(b"abort")]
        h.fail("%s; %d aborted records on the destination, e.g. %r"
               % (e, len(aborted), aborted[:3]))

    got0 = read(DST, topic, 0)
    aborted = [v for _, _, v in read(DST, topic, 0, "read_uncommitted")
               if v.startswith(b"abort")]
    h.check(not aborted, "%d aborted records on the destination, e.g. %r"
            % (len(aborted), aborted[:5]))
    # mirrord drops aborted data and markers, so destination offsets are the
    # source's translated (contiguous); the records match one for one.
    eq([(k, v) for _, k, v in got0], [(k, v) for _, k, v in want0],
       "%s-0 read_committed on the destination vs the source" % topic)
    eq([o for o, _, _ in got0], list(range(len(want0))),
       "%s-0 destination offsets (contiguous)" % topic)
    # Partition 1 is untouched by the aborts: same records at same offsets.
    eq(read(DST, topic, 1), want1, "%s-1 (committed data only)" % topic)
    print("PASS many aborted producers: %d aborted producers, %d committed "
          "records equal, no aborted record" % (NPRODUCERS, len(want0)),
          flush=True)


def stuck_lso(src, dst, d):
    SRC, DST = src.bootstrap, dst.bootstrap
    topic = "txn-stuck-" + RUN
    src.create_topic(topic, partitions=1)
    plain = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all"})
    for k in range(3):
        plain.produce(topic, partition=0, value=b"before-%d" % k)
    mt.flush_all(plain, "records before the transaction")
    d.cli_ok("--add", "--mirror", "tx", "--topic", topic)
    h.wait_for(lambda: caught_up(d, "tx", topic, (0,), SRC), 60,
               "%s to be caught up" % topic)

    holder = Producer({"bootstrap.servers": SRC, "linger.ms": 0, "acks": "all",
                       "transactional.id": "txn-%s-holder" % RUN,
                       "transaction.timeout.ms": 300000})
    holder.init_transactions(60)
    holder.begin_transaction()
    holder.produce(topic, partition=0, value=b"held-0")
    mt.flush_all(holder, "the held transaction's record")
    lso_at = 3
    for k in range(10):
        plain.produce(topic, partition=0, value=b"during-%d" % k)
    mt.flush_all(plain, "records written while the transaction is open")
    end = mt.end_offset(SRC, topic, 0)

    def row():
        return [r for r in d.describe_json("tx") if r["topic"] == topic][0]

    def warned():
        r = row()
        return r["state"] == "MIRRORING" and r.get("warningMessage") and r
    r = h.wait_for(warned, 60, "describe to report the stuck last stable "
                   "offset of %s-0" % topic)
    msg = r["warningMessage"]
    h.check("last stable offset" in msg and str(lso_at) in msg,
            "describe warning names the stuck offset %d: %r" % (lso_at, msg))
    h.check(str(end) in msg, "describe warning names the high watermark %d: %r"
            % (end, msg))
    table = d.cli_ok("--describe", "--mirror", "tx").stdout
    h.check(re.search(r"tx\s+%s\s+0\b.*last stable offset" % re.escape(topic),
                      table, re.S) is not None,
            "kafka-mirrors --describe shows the warning:\n" + table)
    stuck = metric(d, "mirrord_partition_lso_stuck_seconds", topic, 0)
    h.check(stuck is not None and stuck > 0,
            "mirrord_partition_lso_stuck_seconds while stuck: %r" % stuck)
    # Nothing past the open transaction was copied.
    eq([v for _, _, v in read(DST, topic, 0)],
       [b"before-%d" % k for k in range(3)], "destination while stuck")
    print("stuck LSO reported: %s" % msg, flush=True)

    holder.commit_transaction(60)
    plain.produce(topic, partition=0, value=b"after")
    mt.flush_all(plain, "record after the commit")
    h.wait_for(lambda: caught_up(d, "tx", topic, (0,), SRC), 60,
               "%s to be caught up after the commit" % topic)
    h.wait_for(lambda: not row().get("warningMessage"), 30,
               "the describe warning to clear after the commit")
    h.wait_for(lambda: metric(d, "mirrord_partition_lso_stuck_seconds",
                              topic, 0) == 0, 30,
               "mirrord_partition_lso_stuck_seconds to return to 0")
    eq([(k, v) for _, k, v in read(DST, topic, 0)],
       [(k, v) for _, k, v in read(SRC, topic, 0)],
       "%s after the commit" % topic)
    print("PASS stuck LSO: warning and metric, cleared after commit", flush=True)


def main():
    src, dst = h.real_kafka(2)
    d = mt.Mirrord(destination=dst.bootstrap,
                   extra_yaml="pipeline:\n  stuck_lso_warn_ms: 1500\n")
    d.create("tx", {"bootstrap.servers": src.bootstrap,
                    "mirror.fetch.wait.max.ms": "200"})
    many_aborted_producers(src, dst, d)
    stuck_lso(src, dst, d)
    eq(d.stop(), 0, "mirrord exit status")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
