#!/usr/bin/env python3
"""Compacted batches re-sent after an uncertain Produce.

A batch with offset holes (what the log cleaner leaves: records missing
inside, LastOffsetDelta past the last record) is re-encoded contiguously
and its translation anchors are recorded in the metadata log before its
Produce.  When that Produce is uncertain, the batch is fetched again and
yields the same anchors: they must be recognised as recorded already, and
the batch must land exactly once.  The real mirrord binary against two
librdkafka mock clusters (which store what they are sent, so the test
builds its batches with holes itself):

  * the Produce of a batch with holes answered REQUEST_TIMED_OUT (not
    written): the partition goes on MIRRORING, the batch lands once;
  * the destination connection dropped instead of an answer (not written);
  * the Produce applied but answered after mirrord's request timeout
    (written): provenance finds it, it is not written twice;
  * kill -9 of mirrord with anchors recorded and a Produce lost;
an uncertain Produce that did not land sends the same batch bytes again
(so its recorded anchors hold even if the source batch were compacted
again); after a restart the batch is fetched again and its anchors are
recognised as recorded;
and each time the destination holds exactly the records a consumer of the
source sees, in order, at contiguous offsets, none twice.
"""

import os
import signal
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

T = "cu"
mc = None
want = []          # [(key, value)] a consumer of the source sees, in order


def put_plain(src, tag, n):
    recs = [(i, b"%s-%d" % (tag, i), b"%s-value-%d" % (tag, i)) for i in range(n)]
    kw.produce(src, T, 0, kw.batch(recs))
    want.extend((k, v) for _d, k, v in recs)


MIRRORD = []


def put_holes(src, tag):
    """A batch covering 6 offsets with records at deltas 0, 2, 3 only
    (holes at 1, 4 and 5).  The mock numbers a batch by its record count,
    so a filler batch takes the three offsets left over; it lies inside the
    holed batch's range and no consumer (nor mirrord) reads it.  Between the
    two the mock's log ends inside the holed batch, which a real broker
    never shows (a Fetch there is out of range): mirrord is stopped
    (SIGSTOP) while both are written, so it cannot ask in between."""
    recs = [(dl, b"%s-%d" % (tag, dl), b"%s-value-%d" % (tag, dl)) for dl in (0, 2, 3)]
    pid = MIRRORD[0].proc.pid if MIRRORD and MIRRORD[0].proc is not None \
        and MIRRORD[0].proc.alive() else None
    if pid is not None:
        os.kill(pid, signal.SIGSTOP)
    try:
        base = kw.produce(src, T, 0, kw.batch(recs, last_delta=5))
        kw.produce(src, T, 0, kw.batch([(i, b"filler", b"x") for i in range(3)]))
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
    want.extend((k, v) for _d, k, v in recs)
    return base


def dst_records(dst):
    out = []
    for b in dst.batches(T, 0):
        out.extend(kw.records_of(b["raw"]))
    return out


def check_equal(d, dst, what):
    """Waits for the destination to hold every wanted record and the
    partition to be MIRRORING with lag 0; then compares."""
    def done():
        dst.refresh()
        dst.close()
        end = dst.offsets(T, 0)[1]
        r = d.row("m1", T, 0)
        if r is not None and r["state"] == "FAILED":
            h.fail("%s: the partition FAILED: %r" % (what, r.get("errorMessage")))
        return end >= len(want) and r is not None and r["state"] == "MIRRORING" \
            and r["lag"] == 0 and r
    h.wait_for(done, 60, "%s: %d records at the destination, MIRRORING, lag 0 "
               "(now %r)" % (what, len(want), d.row("m1", T, 0)))
    got = dst_records(dst)
    offs = [o for o, _k, _v in got]
    h.check(offs == list(range(len(got))),
            "%s: destination offsets are not contiguous from 0: %r" % (what, offs))
    h.check([(k, v) for _o, k, v in got] == want,
            "%s: destination records differ from the source's (%d vs %d):\n%r\n%r"
            % (what, len(got), len(want), [(k, v) for _o, k, v in got], want))
    h.check(dst.offsets(T, 0)[1] == len(want), "%s: the destination end moved "
            "past the records (a duplicate?)" % what)
    print("%s: %d records equal, offsets 0..%d, MIRRORING" % (what, len(want),
                                                             len(want) - 1), flush=True)


expected_uncertain = [0]


def uncertain(d, cmd, n):
    """Injects cmd on the destination, which makes n Produces uncertain."""
    expected_uncertain[0] += n
    mc.cmd(cmd)


expected_resent = [0]


def check_uncertain(d, what, resent):
    """The fault hit the batch; resent of them did not land and went out
    again as first sent (with the anchors recorded for it)."""
    got = d.log().count("re-reading the destination end")
    h.check(got == expected_uncertain[0], "%s: %d uncertain Produces logged, "
            "want %d (the fault did not hit the batch)" % (what, got,
                                                          expected_uncertain[0]))
    expected_resent[0] += resent
    got = d.log().count("sending it again as it was sent")
    h.check(got == expected_resent[0], "%s: %d batches sent again as they were, "
            "want %d" % (what, got, expected_resent[0]))


def data_bytes(d):
    return sum(os.path.getsize(os.path.join(d.data_dir, f))
               for f in os.listdir(d.data_dir) if f.startswith(("mlog-", "snapshot-")))


def main():
    global mc
    mc, SRC, DST = mt.mock_pair({T: 1})
    src, dst = kraw.Cluster(SRC), kraw.Cluster(DST)
    d = mt.Mirrord(destination=DST, extra_yaml=(
        "pipeline:\n  request_timeout_ms: 1500\n"))
    MIRRORD.append(d)
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                    "mirror.failed.retry.initial.backoff.ms": "100",
                    "mirror.failed.retry.max.backoff.ms": "300",
                    "mirror.failed.retry.max.attempts": "1000"})

    put_plain(src, b"a", 3)
    put_holes(src, b"h1")
    put_plain(src, b"b", 2)
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    check_equal(d, dst, "holes, no fault")

    # The Produce of the next batch (one with holes) answered
    # REQUEST_TIMED_OUT: not written.
    uncertain(d, "err 1 0 7", 1)
    put_holes(src, b"h2")
    put_plain(src, b"c", 2)
    check_equal(d, dst, "REQUEST_TIMED_OUT on a batch with holes")
    check_uncertain(d, "REQUEST_TIMED_OUT on a batch with holes", 1)

    # The connection dropped instead of an answer: not written.
    uncertain(d, "err 1 0 -195", 1)
    put_holes(src, b"h3")
    put_plain(src, b"d", 1)
    check_equal(d, dst, "connection lost on a batch with holes")
    check_uncertain(d, "connection lost on a batch with holes", 1)

    # Two in a row on the same batch.
    uncertain(d, "err 1 0 7 -195", 2)
    put_holes(src, b"h5")
    check_equal(d, dst, "two uncertain Produces of one batch")
    check_uncertain(d, "two uncertain Produces of one batch", 2)

    # Applied, answered after mirrord's timeout: written; provenance must
    # find it and not write it twice.  (After a per-broker delay the mock
    # no longer applies the cluster-wide errors above: this comes last.)
    uncertain(d, "errrtt 1 1 0 0 4000", 1)
    put_holes(src, b"h4")
    put_plain(src, b"e", 2)
    check_equal(d, dst, "Produce written but answered late")
    check_uncertain(d, "Produce written but answered late", 0)

    # kill -9 with the batch's anchors recorded and its Produce lost (the
    # mock holds the answer, an error, for 3 s): a restart reads the
    # destination end, proves it, finds the anchors of the batch recorded
    # already and sends it once.
    mc.cmd("errrtt 1 1 0 7 3000")
    before = data_bytes(d)
    put_holes(src, b"h6")
    h.wait_for(lambda: data_bytes(d) > before, 30,
               "mirrord to record the anchors of batch h6 (its Produce follows)")
    d.kill9()
    h.check(dst.offsets(T, 0)[1] == len(want) - 3,
            "h6 landed before the kill; the test did not exercise a lost Produce")
    d.start()
    put_plain(src, b"f", 2)
    check_equal(d, dst, "kill -9 with anchors recorded, Produce lost")
    h.check("translation anchors are recorded already" in d.log(),
            "after the restart the batch's recorded anchors were not recognised")

    d.stop()
    src.close()
    dst.close()
    mc.close()
    print("compacted batches after uncertain Produces: every record once, in order",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
