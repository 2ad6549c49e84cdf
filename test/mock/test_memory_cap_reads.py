#!/usr/bin/env python3
"""Reads of the destination's end counted and capped by
pipeline.max_inflight_bytes_total (memory bounded by the caps counting
everything held).

Before resuming a partition whose destination end it cannot explain,
mirrord reads that end back, batch by batch, to prove who wrote it
(pipeline/prove.c); each of those Fetches may bring back up to 64 KiB.  Here
a topic is added onto a destination topic of 32 partitions that someone
else already wrote 6 batches of 16 KiB to, every partition at once, with
mirror.foreign.writes=skip-over, a destination slowed down (every answer
300 ms late) and a total cap of 1 MiB: 32 reads of 64 KiB in flight at
once would hold twice the cap.

What must hold:
  * the reads are counted: mirrord_memory_held_bytes{kind=
    "destination_reads"} is seen above 0 while they run;
  * the cap holds: mirrord_memory_held_bytes_peak (the most of all kinds
    at once) stays within the cap, give or take one read (one may always
    go when no other is in flight, so a read never waits for ever) and
    one batch past a Fetch's limit (the mock adds one);
  * every partition is proven foreign, skipped over and then mirrored:
    the foreign batches stay at offsets 0..D-1 unchanged, the source's
    records follow at D.. in order, each once.

Then a second topic whose destination partitions end in a foreign batch
larger than the whole cap (one read's answer is bigger than the cap, as
Kafka returns a first batch whole): it is still read, proven foreign and
mirrored after, with normal partitions proving alongside.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

T = "memr"
T2 = "memr-big"
PARTS2 = 4
BIG = 20                  # records of BIG_VALUE bytes: a batch above the cap
BIG_VALUE = 60000
PARTS = 32
FOREIGN = 6               # foreign batches a destination partition
RECS = 16                 # records a foreign batch
VALUE = 1000              # bytes a value: about 16 KiB a batch
SOURCE = 3                # source batches a partition (small)
CAP = 1 << 20
PART_CAP = 256 << 10
READ = 65536 + 256 + len(T)   # what one provenance read reserves



def main():
    mc, SRC, DST = mt.mock_pair({T: PARTS, T2: PARTS2})
    src, dst = kraw.Cluster(SRC), kraw.Cluster(DST)
    foreign, want = {}, {}
    batch_len = 0
    for part in range(PARTS):
        foreign[part], n = mt.produce_padded_batches(dst, T, part, FOREIGN, RECS,
                                                     VALUE, b"x", b"foreign-", b"f")
        batch_len = max(batch_len, n)
        want[part] = []
        for b in range(SOURCE):
            recs = [(i, b"s-%d-%d-%d" % (part, b, i), b"source-%d-%d-%d" % (part, b, i))
                    for i in range(4)]
            kw.produce(src, T, part, kw.batch(recs))
            want[part].extend((k, v) for _d, k, v in recs)
    print("destination: %d partitions with %d foreign batches of %d bytes each "
          "(%.1f MiB); one provenance read reserves %d bytes, %d at once would "
          "hold %.1f MiB under a %.1f MiB cap"
          % (PARTS, FOREIGN, batch_len, PARTS * FOREIGN * batch_len / 1048576.0,
             READ, PARTS, PARTS * READ / 1048576.0, CAP / 1048576.0), flush=True)

    d = mt.Mirrord(destination=DST, log_level="info",
                   extra_yaml=mt.pipeline_caps_yaml(CAP, PART_CAP))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.foreign.writes": "skip-over"})
    mc.cmd("rtt 1 1 300")          # a slow destination: reads pile up
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)

    seen = {"destination_reads": 0}

    def sample(_rows):
        seen["destination_reads"] = max(seen["destination_reads"], mt.metric_sum(
            d, "mirrord_memory_held_bytes", kind="destination_reads") or 0)
    mt.wait_caught_up(d, "m1", 240, "every partition proven, skipped over, "
                      "MIRRORING, lag 0", topic=T, count=PARTS,
                      fail_on_failed=True, interval=0.1, poll=sample)

    peak = mt.metric_sum(d, "mirrord_memory_held_bytes_peak")
    now = mt.metric_sum(d, "mirrord_memory_held_bytes", kind="destination_reads")
    print("held bytes: peak %d of a cap of %d; destination reads: largest seen %d, "
          "now %r" % (peak, CAP, seen["destination_reads"], now), flush=True)
    h.check(seen["destination_reads"] > 0,
            "the provenance reads were never counted as held")
    h.check(now == 0, "destination reads still held after every partition "
            "was proven: %r bytes" % now)
    h.check(peak <= CAP + READ + 2 * batch_len,
            "held %d bytes at the peak, more than the cap %d (+ one read of %d "
            "bytes and one batch past the mock's limit counted twice, %d)"
            % (peak, CAP, READ, 2 * batch_len))
    log = d.log()
    h.check(log.count("mirror.foreign.writes=skip-over") >= PARTS,
            "not every partition logged its skip-over of the foreign write")

    for part in range(PARTS):
        got = mt.stored_records(dst, T, part)
        n = len(foreign[part])
        h.check([o for o, _k, _v in got] == list(range(n + len(want[part]))),
                "partition %d: destination offsets not 0..%d" % (part, n + len(want[part]) - 1))
        h.check([(k, v) for _o, k, v in got[:n]] == foreign[part],
                "partition %d: the foreign records at 0..%d changed" % (part, n - 1))
        h.check([(k, v) for _o, k, v in got[n:]] == want[part],
                "partition %d: the source's records after the foreign ones differ "
                "(lost or duplicated)" % part)
    print("%d partitions: foreign records kept, every source record once after "
          "them" % PARTS, flush=True)

    # A read whose answer is larger than the cap still goes.
    foreign2, want2 = {}, {}
    for part in range(PARTS2):
        big = part == 0
        recs = [(i, b"y-%d-%d" % (part, i),
                 (b"big-%d-%d-" % (part, i)).ljust(BIG_VALUE if big else VALUE, b"b"))
                for i in range(BIG if big else RECS)]
        raw = kw.batch(recs)
        if big:
            h.check(len(raw) > CAP, "the big batch (%d bytes) is not above the "
                    "cap" % len(raw))
            print("%s-0 ends in one foreign batch of %d bytes" % (T2, len(raw)),
                  flush=True)
        kw.produce(dst, T2, part, raw)
        foreign2[part] = [(k, v) for _d, k, v in recs]
        recs = [(i, b"s2-%d-%d" % (part, i), b"source2-%d-%d" % (part, i))
                for i in range(4)]
        kw.produce(src, T2, part, kw.batch(recs))
        want2[part] = [(k, v) for _d, k, v in recs]
    d.cli_ok("--add", "--mirror", "m1", "--topic", T2)

    mt.wait_caught_up(d, "m1", 120, "%s: every partition proven (one read larger "
                      "than the cap), MIRRORING, lag 0" % T2, topic=T2,
                      count=PARTS2, fail_on_failed=True, interval=0.2)
    for part in range(PARTS2):
        got = mt.stored_records(dst, T2, part)
        n = len(foreign2[part])
        h.check([(k, v) for _o, k, v in got] == foreign2[part] + want2[part] and
                [o for o, _k, _v in got] == list(range(n + len(want2[part]))),
                "%s-%d: the destination is not the foreign records then the "
                "source's, each once" % (T2, part))
    h.check(mt.metric_sum(d, "mirrord_memory_held_bytes", kind="destination_reads") == 0,
            "destination reads still held after %s was proven" % T2)
    print("%s: proven and mirrored, the read larger than the cap included" % T2,
          flush=True)
    d.stop()
    src.close()
    dst.close()
    mc.close()


if __name__ == "__main__":
    h.run_main(main)
