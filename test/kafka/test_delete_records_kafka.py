#!/usr/bin/env python3
"""DeleteRecords inside a batch, on real Apache Kafka 4.4.0.

Kafka Streams purges its repartition topics with DeleteRecords at any
offset, so the source log start lands inside a batch.  A Fetch below it is
out of range; a Fetch at it returns the whole batch (its base offset below
the log start).  mirrord copies batches whole: a batch that still stands in
the source log is copied whole; offsets whose batches are gone become a jump
in the translation map, logged as "source records X..Y deleted before they
were mirrored" and counted in mirrord_partition_source_deleted_offsets_total.
The source batches are written one Produce per batch of 10 records, so the
batch boundaries are known.

  1. mirrord stopped, DeleteRecords on the source into a batch not yet
     mirrored (the batch before it is gone entirely): a jump of 10 offsets,
     the straddling batch copied whole, MIRRORING;
  2. the partition paused, the same with nothing gone whole: no jump;
  3. DeleteRecords into a batch already mirrored: nothing to do;
  4. while mirrord runs, DeleteRecords into the newest batch: copied whole
     whether mirrord got it before or after;
  5. DeleteRecords on the destination inside a mirrored batch, and up to the
     destination's end, then a restart: not a foreign write, mirroring goes
     on.
Each time the destination holds every batch still in the source log, byte
for byte (records section), at the offsets the jumps explain, and the
partition is MIRRORING with lag 0.
"""

import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "dr-" + RUN


def put(src, n_batches, tag):
    """n_batches Produces of one 10-record batch each; their base offsets."""
    bases = []
    for b in range(n_batches):
        recs = [(i, b"%s-%d-%d" % (tag, b, i), b"%s-value-%d-%d" % (tag, b, i))
                for i in range(10)]
        bases.append(kw.produce(src, T, 0, kw.batch(recs)))
    return bases


def metric(d, name):
    pat = re.compile(r'^%s\{[^}]*topic="%s"[^}]*\} (\S+)$' % (re.escape(name),
                                                             re.escape(T)), re.M)
    m = pat.search(d.metrics())
    return float(m.group(1)) if m else 0.0


def wait_caught_up(d, dst, want_end, what):
    def ok():
        r = d.row("m1", T, 0)
        if r is not None and r["state"] == "FAILED":
            h.fail("%s: the partition FAILED: %r" % (what, r.get("errorMessage")))
        dst.refresh()
        dst.close()
        return dst.offsets(T, 0)[1] == want_end and r["state"] == "MIRRORING" \
            and r["lag"] == 0 and r
    return h.wait_for(ok, 90, "%s: the destination to end at %d, MIRRORING, lag 0 "
                      "(now %r)" % (what, want_end, d.row("m1", T, 0)))


def compare(src, dst, pairs, what):
    """pairs: [(source base offset, destination base offset)] of batches
    that must be equal (records section byte for byte, same count)."""
    sb = {b["base_offset"]: b for b in src.batches(T, 0, start=src.offsets(T, 0)[0])}
    db = {b["base_offset"]: b for b in dst.batches(T, 0, start=dst.offsets(T, 0)[0])}
    for s, d in pairs:
        h.check(s in sb, "%s: source batch %d is not in the source log (%r)"
                % (what, s, sorted(sb)))
        h.check(d in db, "%s: no destination batch at %d for source batch %d "
                "(destination batches at %r)" % (what, d, s, sorted(db)))
        h.check(kraw.records_section(sb[s]["raw"]) == kraw.records_section(db[d]["raw"])
                and sb[s]["count"] == db[d]["count"],
                "%s: source batch %d and destination batch %d differ" % (what, s, d))
    first = min(dd for _s, dd in pairs)
    later = sorted(x for x in db if x >= first)
    h.check(later == sorted(dd for _s, dd in pairs),
            "%s: destination batches from %d are %r, want %r" % (
                what, first, later, sorted(dd for _s, dd in pairs)))


def main():
    src_c, dst_c = h.real_kafka(2)
    src_c.create_topic(T, partitions=1)
    dst_c.create_topic(T, partitions=1)
    src, dst = kraw.Cluster(src_c.bootstrap), kraw.Cluster(dst_c.bootstrap)
    d = mt.Mirrord(destination=dst_c.bootstrap)
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.initial.backoff.ms": "200",
                    "mirror.failed.retry.max.backoff.ms": "500",
                    "mirror.failed.retry.max.attempts": "1000"})
    pairs = []          # (source batch base, destination batch base)

    put(src, 2, b"a")                                     # 0..19
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    wait_caught_up(d, dst, 20, "first batches")
    pairs += [(0, 0), (10, 10)]
    compare(src, dst, pairs, "first batches")

    # 1. mirrord stopped; 20..29 deleted whole, the log start inside 30..39.
    d.stop()
    put(src, 3, b"b")                                     # 20..49
    low = kw.delete_records(src, T, 0, 35)
    h.check(low == 35, "source log start after DeleteRecords to 35: %d" % low)
    d.start()
    wait_caught_up(d, dst, 40, "DeleteRecords into a batch not mirrored")
    pairs = [(30, 20), (40, 30)]                          # 0..19 stay; 20..29 gone
    compare(src, dst, pairs, "DeleteRecords into a batch not mirrored")
    log = d.log()
    h.check("source records 20..29 deleted before they were mirrored" in log,
            "the jump over 20..29 was not logged")
    h.check(metric(d, "mirrord_partition_source_deleted_offsets_total") == 10,
            "mirrord_partition_source_deleted_offsets_total should be 10")
    print("1. source log start 35 inside batch 30..39, 20..29 gone: jump of 10 "
          "logged and counted, 30..39 copied whole to 20..29", flush=True)

    # 2. Paused; the log start lands inside the first unmirrored batch.
    d.cli_ok("--pause", "--mirror", "m1", "--topic", T)
    h.wait_for(lambda: d.row("m1", T, 0)["state"] == "PAUSED", 60, "the partition to pause")
    put(src, 2, b"c")                                     # 50..69
    low = kw.delete_records(src, T, 0, 57)
    h.check(low == 57, "source log start after DeleteRecords to 57: %d" % low)
    d.cli_ok("--resume", "--mirror", "m1", "--topic", T)
    wait_caught_up(d, dst, 60, "DeleteRecords into the first batch not mirrored")
    pairs = [(50, 40), (60, 50)]
    compare(src, dst, pairs, "DeleteRecords into the first batch not mirrored")
    h.check(metric(d, "mirrord_partition_source_deleted_offsets_total") == 10,
            "nothing was skipped, yet the deleted-offsets counter moved")
    print("2. paused, log start 57 inside batch 50..59: copied whole, no jump",
          flush=True)

    # 3. Into a batch mirrored already.
    put(src, 1, b"d")                                     # 70..79
    wait_caught_up(d, dst, 70, "one more batch")
    low = kw.delete_records(src, T, 0, 74)
    h.check(low == 74, "source log start after DeleteRecords to 74: %d" % low)
    put(src, 1, b"e")                                     # 80..89
    wait_caught_up(d, dst, 80, "DeleteRecords into a mirrored batch")
    pairs = [(70, 60), (80, 70)]
    compare(src, dst, pairs, "DeleteRecords into a mirrored batch")
    print("3. log start 74 inside the mirrored batch 70..79: nothing to do", flush=True)

    # 4. While running, into the newest batch (mirrord may or may not have
    # copied it yet: whole either way).
    put(src, 1, b"f")                                     # 90..99
    low = kw.delete_records(src, T, 0, 96)
    put(src, 1, b"g")                                     # 100..109
    wait_caught_up(d, dst, 100, "DeleteRecords while running")
    pairs = [(90, 80), (100, 90)]
    compare(src, dst, pairs, "DeleteRecords while running")
    print("4. while running, log start %d inside batch 90..99: copied whole" % low,
          flush=True)

    # 5. DeleteRecords on the destination inside mirrored batches.
    low = kw.delete_records(dst, T, 0, 84)                # inside dst 80..89
    h.check(low == 84, "destination log start after DeleteRecords to 84: %d" % low)
    put(src, 1, b"h")                                     # 110..119 -> 100..109
    wait_caught_up(d, dst, 110, "destination DeleteRecords inside a batch")
    d.stop()
    d.start()                                             # provenance reads back
    put(src, 1, b"i")                                     # 120..129 -> 110..119
    wait_caught_up(d, dst, 120, "destination DeleteRecords, restarted")
    low = kw.delete_records(dst, T, 0, 120)               # up to the end
    h.check(low == 120, "destination log start after DeleteRecords to 120: %d" % low)
    d.kill9()
    d.start()
    put(src, 1, b"j")                                     # 130..139 -> 120..129
    wait_caught_up(d, dst, 130, "destination emptied by DeleteRecords, kill -9")
    pairs = [(130, 120)]
    compare(src, dst, pairs, "destination emptied by DeleteRecords")
    r = d.row("m1", T, 0)
    h.check(r["state"] == "MIRRORING" and not r.get("errorMessage"),
            "the partition after destination DeleteRecords: %r" % r)
    print("5. destination DeleteRecords inside a batch and up to its end, "
          "restarts: MIRRORING, nothing foreign", flush=True)

    d.stop()
    src.close()
    dst.close()
    print("DeleteRecords inside batches: every batch still in the source log "
          "at the destination, byte for byte", flush=True)


if __name__ == "__main__":
    h.run_main(main)
