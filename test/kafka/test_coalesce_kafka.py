#!/usr/bin/env python3
"""mirror.coalesce.max.bytes on real Apache Kafka 4.4.0: small batches
merged before they are produced, every record where it was.

The source is written as operators with linger.ms 0 write it, one small
batch per record or few, by an idempotent producer, with keys, null keys
and values, headers and timestamps that go back and forth.  Between the
small batches stand batches that must not be merged: an lz4 batch, a
committed and an aborted transaction (markers leave gaps in the offsets),
and a batch larger than the cap.  A mirror with the option on copies it;
then more small batches are copied while the destination broker is
stopped (SIGSTOP past the request timeout: an uncertain Produce of merged
batches), and more again while mirrord is killed with SIGKILL three times.

Checked:
  * a read_committed consumer of the destination reads the same records
    as one of the source: offset, key, value, headers, timestamp;
  * the destination ends where the source ends (nothing twice);
  * the destination holds far fewer batches, none over the cap, each with
    a valid CRC; mirrord_partition_coalesced_batches_total counts exactly
    the source batches merged away (before the kills);
  * the lz4 batch and the large batch are copied byte for byte (records
    section equal, same base offset); the committed transaction's batches
    are merged with each other, the aborted one is not copied;
  * an out-of-range value is refused with INVALID_CONFIG naming the key;
  * a destination topic whose max.message.bytes is below the limit:
    the refused merged batch fails the partition, naming it, and the
    automatic retry merges smaller until the batches fit;
  * without merging, a source batch over the destination's limit as the
    first of a new producer identity: refused alone, nothing lands in its
    place.
"""

import os
import signal
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

try:
    from confluent_kafka import KafkaException, Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
T = "co-" + RUN
CAP = 16384
NOW_MS = int(time.time() * 1000)
SRC = DST = None


def producer(bootstrap, **conf):
    c = {"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
         "enable.idempotence": True}
    c.update(conf)
    return Producer(c)


def small(p, part, tag, n, topic=None):
    """n records, each its own Produce (flushed one by one: one batch
    each), with every kind of field."""
    for k in range(n):
        p.produce(topic or T, partition=part,
                  key=None if k % 7 == 0 else b"%s-k%d" % (tag, k),
                  value=None if k % 11 == 5 else b"%s-v%d-" % (tag, k) * (1 + k % 5),
                  headers=[("h", b"%d" % k), ("e", b"")] if k % 3 == 0 else None,
                  timestamp=NOW_MS - 100000 + (k * 37) % 1000 - (500 if k % 4 else 0))
        if k % 3 != 2:
            p.poll(0)
        p.flush(10)


def feed(done):
    """Small batches into partition 0 until done is set."""
    p = producer(SRC)
    n = 0
    while not done.is_set():
        small(p, 0, b"feed%d" % n, 20)
        n += 1


def view(bootstrap, part, topic=None):
    """What a read_committed consumer reads.  Partition 1's offsets are left
    out: the aborted transaction and the two markers are not copied, so its
    destination offsets run 7 behind after them (the translation map's
    anchor), with or without merging."""
    return mt.read_partition(
        bootstrap, topic or T, part, "co-%s" % RUN, config={"check.crcs": True},
        record=lambda m: ((m.offset(),) if part == 0 else ()) + (
            m.key(), m.value(), m.headers(), m.timestamp()))


def dst_end_want(part):
    return mt.end_offset(SRC, T, part) - (7 if part == 1 else 0)


def batches(bootstrap, part, topic=None):
    c = kraw.Cluster(bootstrap)
    try:
        return c.batches(topic or T, part)
    finally:
        c.close()


def main():
    global SRC, DST
    src, = h.real_kafka(2)[:1]
    dst, = h.private_kafka(1)   # stopped with SIGSTOP below
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(T, partitions=2)

    # Partition 0: small batches only.
    p = producer(SRC)
    small(p, 0, b"a", 600)
    # Partition 1: small batches around batches that must stay as they are.
    small(p, 1, b"b", 150)
    z = producer(SRC, **{"compression.type": "lz4", "linger.ms": 50})
    for k in range(40):
        z.produce(T, partition=1, value=b"lz4-%d" % k)
    mt.flush_all(z, "lz4 batch")
    small(p, 1, b"c", 100)
    big = producer(SRC, **{"linger.ms": 200})
    for k in range(30):
        big.produce(T, partition=1, value=b"big-%d-" % k + b"x" * 1000)
    mt.flush_all(big, "a batch larger than the cap")
    for attempt in range(3):
        try:
            tp = producer(SRC, **{"transactional.id": "co-tx-%s-%d" % (RUN, attempt),
                                  "transaction.timeout.ms": 10000})
            tp.init_transactions(30)
            for commit in (True, False):
                tp.begin_transaction()
                for k in range(5):
                    tp.produce(T, partition=1, value=b"txn-%d-%s" % (k, b"c" if commit else b"a"))
                    tp.flush(10)
                if commit:
                    tp.commit_transaction(30)
                else:
                    tp.abort_transaction(30)
            break
        except KafkaException as e:
            print("note: transactional setup failed (%s); trying again" % e, flush=True)
    else:
        h.fail("test setup: the source refused the transactional producer 3 times")
    small(p, 1, b"d", 150)
    src_b = [batches(SRC, i) for i in range(2)]
    print("source: %d and %d batches" % (len(src_b[0]), len(src_b[1])), flush=True)
    h.check(len(src_b[0]) >= 400, "test setup: the producer wrote only %d "
            "batches for 600 records" % len(src_b[0]))

    d = mt.Mirrord(destination=DST, extra_yaml=(
        "pipeline:\n  request_timeout_ms: 1500\n"))
    r = d.create("bad", {"bootstrap.servers": SRC,
                         "mirror.coalesce.max.bytes": "2000000"}, expect_ok=False)
    h.check(r.returncode != 0 and "INVALID_CONFIG" in r.stderr + r.stdout and
            "mirror.coalesce.max.bytes" in r.stderr + r.stdout,
            "an out-of-range mirror.coalesce.max.bytes is refused naming it: "
            "rc %d %r %r" % (r.returncode, r.stdout, r.stderr))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.coalesce.max.bytes": str(CAP)})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    mt.wait_caught_up(d, "m1", 120, "the mirror to catch up", count=2,
                      fail_on_failed=True)

    dst_b = [batches(DST, i) for i in range(2)]
    for i in range(2):
        eq(dst_b[i][-1]["base_offset"] + dst_b[i][-1]["last_delta"] + 1,
           dst_end_want(i), "%s-%d: where the destination's last batch ends"
           % (T, i))
        eq(mt.end_offset(DST, T, i), dst_end_want(i), "%s-%d destination end"
           % (T, i))
        eq(view(DST, i), view(SRC, i), "%s-%d records (offset, key, value, "
           "headers, timestamp)" % (T, i))
        for b in dst_b[i]:
            h.check(b["crc_ok"], "%s-%d@%d: destination CRC" % (T, i, b["base_offset"]))
            h.check(len(b["raw"]) <= CAP or any(
                s["base_offset"] == b["base_offset"] and len(s["raw"]) > CAP
                for s in src_b[i]),
                "%s-%d@%d: a merged batch of %d bytes passes the cap %d"
                % (T, i, b["base_offset"], len(b["raw"]), CAP))
    h.check(len(dst_b[0]) * 10 <= len(src_b[0]),
            "partition 0: %d source batches became %d, not a tenth"
            % (len(src_b[0]), len(dst_b[0])))
    merged = mt.metric_value(d, "mirrord_partition_coalesced_batches_total",
                             mirror="m1", topic=T, partition="0")
    eq(merged, len(src_b[0]) - len(dst_b[0]),
       "coalesced_batches_total of partition 0 (source batches merged away)")

    # Partition 1: the lz4 batch and the large one as they were.
    at = {b["base_offset"]: b for b in dst_b[1]}
    kept = 0
    for s in src_b[1]:
        codec = s["raw"][22] & 7
        if codec == 0 and len(s["raw"]) <= CAP:
            continue
        b = at.get(s["base_offset"])
        h.check(b is not None, "%s-1: the %s batch at %d is not a batch of the "
                "destination" % (T, "lz4" if codec else "large", s["base_offset"]))
        eq(kraw.records_section(b["raw"]), kraw.records_section(s["raw"]),
           "%s-1@%d records section" % (T, s["base_offset"]))
        kept += 1
    h.check(kept >= 2, "test setup: only %d lz4 or large batches in partition 1"
            % kept)
    # The committed transaction's five batches (one record each) merged:
    # the destination writes committed data as ordinary batches anyway.
    import krawwrite as kw
    txn_b = [sum(1 for _o, _k, v in kw.records_of(b["raw"])
                 if v is not None and v.startswith(b"txn-") and v.endswith(b"-c"))
             for b in dst_b[1] if not b["raw"][22] & 7]
    eq(max(txn_b), 5, "records of the committed transaction in one destination "
       "batch (per batch: %r)" % [n for n in txn_b if n])
    h.check(len(dst_b[1]) < len(src_b[1]) // 3, "partition 1: %d source batches "
            "became %d" % (len(src_b[1]), len(dst_b[1])))
    print("merged: partition 0 %d -> %d batches, partition 1 %d -> %d "
          "(%d copied as they were); records equal" % (
              len(src_b[0]), len(dst_b[0]), len(src_b[1]), len(dst_b[1]), kept),
          flush=True)

    # The destination broker stopped while merged batches are in flight:
    # small batches keep coming, so mirrord keeps merging and producing;
    # the Produce to the stopped broker times out, mirrord re-reads the
    # destination end once the broker is back, and carries on whether or
    # not the batches landed.
    merged0 = merged
    done = threading.Event()
    feeder = threading.Thread(target=lambda: feed(done), daemon=True)
    feeder.start()
    try:
        time.sleep(1.0)
        os.kill(dst.pid, signal.SIGSTOP)
        try:
            h.wait_for(lambda: "re-reading the destination end" in d.log(), 30,
                       "a Produce to the stopped destination broker to time out")
        finally:
            os.kill(dst.pid, signal.SIGCONT)
        time.sleep(1.0)
    finally:
        done.set()
        feeder.join(60)
    mt.wait_caught_up(d, "m1", 120, "the mirror to catch up after the "
                      "destination broker was stopped", count=2,
                      fail_on_failed=True)
    merged = mt.metric_value(d, "mirrord_partition_coalesced_batches_total",
                             mirror="m1", topic=T, partition="0")
    h.check(merged > merged0, "no batch was merged while the destination "
            "broker was stopped (%d before, %d after)" % (merged0, merged))
    eq(mt.end_offset(DST, T, 0), dst_end_want(0),
       "%s-0 destination end after the stopped broker" % T)
    eq(view(DST, 0), view(SRC, 0), "%s-0 records after the stopped broker" % T)
    print("destination broker stopped with merged batches in flight: records "
          "equal, ends equal", flush=True)

    # kill -9 while small batches come: nothing lost, nothing twice.
    for round_ in range(3):
        small(p, round_ % 2, b"late%d" % round_, 200)
        time.sleep(0.2 * round_)
        d.kill9()
        d.start()
    mt.wait_caught_up(d, "m1", 120, "the mirror to catch up after kill -9",
                      count=2, fail_on_failed=True)
    for i in range(2):
        eq(mt.end_offset(DST, T, i), dst_end_want(i),
           "%s-%d destination end after kill -9" % (T, i))
        eq(view(DST, i), view(SRC, i), "%s-%d records after kill -9" % (T, i))
    print("3 kill -9 while small batches came: records equal, ends equal",
          flush=True)

    # Without merging: a source batch larger than the destination topic's
    # max.message.bytes, then small ones.  The refused batch is the first
    # of a new producer identity, which the broker holds no sequence state
    # for: a batch sent behind it would be appended in its place (a first
    # batch is taken whatever its sequence).  So a new identity sends one
    # batch at a time until the broker acknowledged one: the partition
    # fails naming the batch, and nothing lands.
    t3 = T + "-big"
    src.create_topic(t3, partitions=1)
    dst.create_topic(t3, partitions=1, configs={"max.message.bytes": "4096"})
    pb = producer(SRC, **{"linger.ms": 200})
    for k in range(20):
        pb.produce(t3, partition=0, value=b"big-%d-" % k + b"x" * 500)
    mt.flush_all(pb, "a batch larger than the destination's limit")
    small(p, 0, b"after", 50, topic=t3)
    d.create("m3", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.max.attempts": "0"})
    d.cli_ok("--add", "--mirror", "m3", "--topic", t3)
    r = h.wait_for(lambda: (lambda r: r if r and r["state"] == "FAILED" else None)(
        d.row("m3", t3, 0)), 60, "%s to fail on the oversized batch" % t3)
    h.check("MESSAGE_TOO_LARGE" in (r["errorMessage"] or ""),
            "%s FAILED for another reason: %r" % (t3, r["errorMessage"]))
    time.sleep(1.0)
    eq(mt.end_offset(DST, t3, 0), 0, "%s destination end: a batch behind the "
       "refused one must not land in its place" % t3)
    print("%s: the oversized first batch refused alone, FAILED, nothing "
          "landed" % t3, flush=True)

    # A destination topic whose max.message.bytes (4096) is below the
    # limit: the broker refuses the merged batch (MESSAGE_TOO_LARGE, not
    # appended), the partition fails naming it, and its automatic retry
    # merges into batches half the refused size, until they fit.
    t2 = T + "-mm"
    for cl in (src, dst):   # the source sets it too: config sync keeps it
        cl.create_topic(t2, partitions=1, configs={"max.message.bytes": "4096"})
    small(p, 0, b"mm", 300, topic=t2)
    d.create("m2", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.coalesce.max.bytes": str(CAP),
                    "mirror.failed.retry.initial.backoff.ms": "200",
                    "mirror.failed.retry.max.backoff.ms": "500"})
    d.cli_ok("--add", "--mirror", "m2", "--topic", t2)
    mt.wait_caught_up(d, "m2", 120, "%s to catch up with a small "
                      "max.message.bytes" % t2, count=1)
    h.check("merges into batches of at most" in d.log() and
            "MESSAGE_TOO_LARGE" in d.log(), "no MESSAGE_TOO_LARGE warning "
            "about a merged batch in the log")
    eq(mt.end_offset(DST, t2, 0), mt.end_offset(SRC, t2, 0),
       "%s destination end" % t2)
    eq(view(DST, 0, t2), view(SRC, 0, t2), "%s records" % t2)
    db = batches(DST, 0, t2)
    h.check(all(len(b["raw"]) <= 4096 for b in db) and len(db) < 300 // 4,
            "%s: %d destination batches, the largest %d bytes" % (
                t2, len(db), max(len(b["raw"]) for b in db)))
    print("%s: merged batches refused as too large, retried smaller: %d "
          "batches of at most 4096 bytes, records equal" % (t2, len(db)),
          flush=True)
    eq(d.stop(), 0, "mirrord exit status")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
