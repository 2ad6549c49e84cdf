#!/usr/bin/env python3
"""Provenance before resume: mirrord resumes a partition only from
a destination end it can prove it wrote.  The real mirrord binary and
kafka-mirrors CLI against two librdkafka mock clusters:

  * someone else writes 10 records to a mirrored destination partition
    (mirror.foreign.writes=fail, the default): the partition goes FAILED
    naming the foreign offsets, and stays FAILED across automatic retries
    and a restart of mirrord; no source record is skipped silently (the
    destination does not grow, the lag is not 0);
  * the same with mirror.foreign.writes=skip-over: the foreign range is
    skipped (a translation anchor) and every source record is at the
    destination after it, equal to the source;
  * a topic added onto an existing non-empty destination topic: FAILED
    naming the offsets found there, not a silent append at its end;
  * a lost storage.data_dir (metadata log and producer ids): the mirror set
    up again finds the destination written by a producer it cannot prove
    is its own: FAILED, not a blind resume;
  * kill -9 while idle leaves a destination end mirrord proves (its own
    producer id and sequences): it resumes and copies what follows.
"""

import os
import re
import shutil
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from confluent_kafka import Consumer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

mc = None


def produce(bootstrap, topic, n, tag):
    """n keyed records to partition 0 (mt.produce_tagged, acks=all).  The
    producer may still split them into several batches (seen on loaded
    machines even with a long linger.ms): how many of mirrord's records
    land after a foreign write depends on it, so the checks below read
    where the skip-over anchored from the destination's end."""
    mt.produce_tagged(bootstrap, topic, 0, n, tag, keyed=True,
                      config={"linger.ms": 5000})


def read(bootstrap, topic, end):
    """[(offset, key, value)] of partition 0 below end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "prov-check",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 30
    while end > 0 and (not out or out[-1][0] < end - 1):
        if time.monotonic() > deadline:
            h.fail("reading %s from %s: got %d of %d" % (topic, bootstrap, len(out), end))
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def wait_row(d, mirror, topic, state, lag=None, timeout=60):
    """The row of partition 0 once it is in state (and, if lag is given,
    shows that lag): the destination broker holds a record before mirrord
    has read its Produce answer, so the lag follows the destination's end."""
    def ok():
        r = d.row(mirror, topic, 0)
        return r if r is not None and r["state"] == state and \
            (lag is None or r["lag"] == lag) else None
    return h.wait_for(ok, timeout, "%s/%s-0 to be %s%s" % (
        mirror, topic, state, "" if lag is None else " with lag %d" % lag))


def wait_end(bootstrap, topic, want, timeout=60):
    h.wait_for(lambda: mt.end_offset(bootstrap, topic) == want, timeout,
               "%s on %s to end at %d" % (topic, bootstrap, want))


def retries_logged(d, what):
    return d.log().count("%s: FAILED -> PREPARING" % what)


def main():
    global mc
    mc = MockCluster(clusters=2, brokers=1,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
    for t in ("fw", "fs", "pre", "lost", "idle"):
        for c in (0, 1):
            mc.cmd("topic %d %s 1" % (c, t))
    d = mt.Mirrord(destination=DST)
    retry = {"mirror.fetch.wait.max.ms": "100",
             "mirror.failed.retry.initial.backoff.ms": "100",
             "mirror.failed.retry.max.backoff.ms": "200",
             "mirror.failed.retry.max.attempts": "100"}
    d.create("m1", dict(retry, **{"bootstrap.servers": SRC}))
    d.create("m2", dict(retry, **{"bootstrap.servers": SRC,
                                  "mirror.foreign.writes": "skip-over"}))
    r = d.create("m9", {"bootstrap.servers": SRC,
                        "mirror.foreign.writes": "ignore"}, expect_ok=False)
    h.check(r.returncode != 0 and "mirror.foreign.writes" in r.stderr,
            "a bad mirror.foreign.writes should be refused naming it: %r" % r.stderr)

    # 1. A foreign write of 10 records, policy fail.
    produce(SRC, "fw", 20, "fw1")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "fw")
    wait_end(DST, "fw", 20)
    wait_row(d, "m1", "fw", "MIRRORING")
    produce(DST, "fw", 10, "intruder")          # destination offsets 20..29
    produce(SRC, "fw", 5, "fw2")                # source offsets 20..24
    def failed_final():
        r = d.row("m1", "fw", 0)
        return r if r["state"] == "FAILED" and "foreign write" in (r["errorMessage"] or "") else None
    r = h.wait_for(failed_final, 60, "fw-0 to fail naming the foreign write")
    msg = r["errorMessage"]
    print("foreign write (fail): %r" % msg, flush=True)
    h.check("20..29" in msg and "10 records" in msg,
            "the reason should name offsets 20..29 (10 records): %r" % msg)
    h.check("mirror.foreign.writes=fail" in msg, "the reason should name the policy: %r" % msg)
    # mirrord's first batch of source 20..24 (all 5 records, or the first
    # of the batches the producer split them into) landed at 30..
    dst_end = mt.end_offset(DST, "fw")
    h.check(31 <= dst_end <= 35 and "mirrord's batches at 30..%d landed"
            % (dst_end - 1) in msg,
            "fw-0 should end after mirrord's misplaced batch, at 31..35 "
            "(%d), as the reason says: %r" % (dst_end, msg))
    # Automatic retries do not bring it back: wait for many retry periods
    # (backoff 100..200 ms) and count the retries logged after the failure.
    n0 = retries_logged(d, "m1/fw-0")
    for _ in range(20):
        time.sleep(0.2)
        r = d.row("m1", "fw", 0)
        h.check(r["state"] == "FAILED", "fw-0 left FAILED: %r" % r)
    h.check(retries_logged(d, "m1/fw-0") == n0,
            "fw-0 was retried automatically after the foreign-write failure")
    h.check(mt.end_offset(DST, "fw") == dst_end, "the destination grew while FAILED")
    h.check(r["lag"] != 0, "a FAILED partition with skipped records shows lag 0: %r" % r)

    # 2. The same, policy skip-over: every source record after the foreign range.
    produce(SRC, "fs", 20, "fs1")
    d.cli_ok("--add", "--mirror", "m2", "--topic", "fs")
    wait_end(DST, "fs", 20)
    produce(DST, "fs", 10, "intruder")          # 20..29
    produce(SRC, "fs", 5, "fs2")                # source 20..24: lands at 30..
    # The first batch of source 20.. lands after the foreign records, at
    # 30..a-1; the skip-over copies source 20.. again from a on.
    def anchored():
        m = re.search(r"m2/fs-0: foreign write: destination offsets 20\.\.29 "
                      r"\(10 records\) .*mirror\.foreign\.writes=skip-over: "
                      r"source offset 20 is copied to destination offset (\d+)",
                      d.log())
        return int(m.group(1)) if m else None
    a = h.wait_for(anchored, 60, "fs-0's skip-over to be logged")
    h.check(31 <= a <= 35, "fs-0 skipped over to destination offset %d, "
            "want 31..35 (after mirrord's misplaced batch)" % a)
    wait_end(DST, "fs", a + 5)                  # source 20..24 at a..a+4
    produce(SRC, "fs", 5, "fs3")                # 25..29 -> a+5..a+9
    wait_end(DST, "fs", a + 10)
    wait_row(d, "m2", "fs", "MIRRORING", lag=0)
    src = read(SRC, "fs", 30)
    dst = read(DST, "fs", a + 10)
    h.check([x[1:] for x in dst[:20]] == [x[1:] for x in src[:20]],
            "fs-0: destination 0..19 differ from the source")
    h.check(all(x[1].startswith(b"intruder") for x in dst[20:30]),
            "fs-0: the foreign records 20..29 should stay where they are")
    h.check([x[1:] for x in dst[30:a]] == [x[1:] for x in src[20:20 + a - 30]],
            "fs-0: the misplaced batch at 30..%d should hold source 20.." % (a - 1))
    h.check([x[1:] for x in dst[a:a + 10]] == [x[1:] for x in src[20:30]],
            "fs-0: source 20..29 should be at destination %d..%d" % (a, a + 9))
    print("foreign write (skip-over): source 20..29 at destination %d..%d"
          % (a, a + 9), flush=True)

    # 3. AddTopics onto an existing non-empty destination topic.
    produce(DST, "pre", 7, "preexisting")
    produce(SRC, "pre", 10, "pre")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "pre")
    r = h.wait_for(lambda: (lambda x: x if x["state"] == "FAILED" else None)(
        d.row("m1", "pre", 0)), 60, "pre-0 to fail")
    msg = r["errorMessage"]
    print("add onto a non-empty destination: %r" % msg, flush=True)
    h.check("0..6" in msg and "not written by mirrord" in msg,
            "pre-0 should name destination offsets 0..6: %r" % msg)
    h.check(mt.end_offset(DST, "pre") == 7, "records were appended to pre-0")

    # 4. kill -9 while idle, then a restart: the end is mirrord's, proven
    # from its producer id and sequences; copying goes on.  The FAILED
    # partition of 1 stays FAILED with its reason.
    produce(SRC, "idle", 15, "idle1")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "idle")
    wait_end(DST, "idle", 15)
    d.kill9()
    produce(SRC, "idle", 5, "idle2")
    d.start()
    wait_end(DST, "idle", 20)
    wait_row(d, "m1", "idle", "MIRRORING")
    h.check([x[1:] for x in read(DST, "idle", 20)] == [x[1:] for x in read(SRC, "idle", 20)],
            "idle-0 differs after kill -9 and restart")
    for _ in range(10):
        time.sleep(0.2)
        r = d.row("m1", "fw", 0)
        h.check(r["state"] == "FAILED" and "20..29" in (r["errorMessage"] or ""),
                "fw-0 after a restart: %r" % r)
    h.check(mt.end_offset(DST, "fw") == dst_end, "fw-0's destination grew after a restart")
    print("restart: idle-0 resumed (proven), fw-0 still FAILED", flush=True)

    # 4b. The operator decides: RecoverMirrorTopics (kafka-mirrors --recover).
    # Without a resolution the foreign write is refused, naming the one
    # that applies; with skip-over every source record is copied after the
    # foreign range.
    r = d.cli("--recover", "--mirror", "m1", "--topic", "fw")
    h.check(r.returncode == 1 and "INVALID_REQUEST" in r.stderr and
            "skip-over" in r.stderr, "recover without a resolution: %r" % (r.stderr,))
    r = d.cli("--recover", "--mirror", "m1", "--topic", "fw", "--resolution", "ignore")
    h.check(r.returncode == 1 and "'ignore' is not one of: skip-over, preserve" in r.stderr,
            "recover with a bad resolution: %r" % (r.stderr,))
    h.check(d.row("m1", "fw", 0)["state"] == "FAILED", "a refused recover changed fw-0")
    r = d.cli_ok("--recover", "--mirror", "m1", "--topic", "fw",
                 "--resolution", "skip-over")
    h.check("fw" in r.stdout, "recover output: %r" % r.stdout)
    produce(SRC, "fw", 5, "fw3")                 # source 25..29
    e0 = dst_end                                 # source 20..29 at e0..e0+9
    wait_end(DST, "fw", e0 + 10)
    wait_row(d, "m1", "fw", "MIRRORING", lag=0)
    src = read(SRC, "fw", 30)
    dst = read(DST, "fw", e0 + 10)
    h.check([x[1:] for x in dst[:20]] == [x[1:] for x in src[:20]],
            "fw-0: destination 0..19 differ from the source")
    h.check([x[1:] for x in dst[e0:e0 + 10]] == [x[1:] for x in src[20:30]],
            "fw-0: source 20..29 should be at destination %d..%d" % (e0, e0 + 9))
    h.check("the operator's skip-over: source offset 20 is copied to destination "
            "offset %d" % e0 in d.log(), "the skip-over anchor should be logged")
    print("operator's --recover --resolution skip-over: source 20..29 at "
          "destination %d..%d" % (e0, e0 + 9), flush=True)

    # 5. storage.data_dir lost: the mirror set up again cannot prove the
    # destination is its own.
    produce(SRC, "lost", 12, "lost1")
    d.cli_ok("--add", "--mirror", "m1", "--topic", "lost")
    wait_end(DST, "lost", 12)
    d.stop()
    shutil.rmtree(d.data_dir)
    produce(SRC, "lost", 3, "lost2")
    d.start()
    d.create("m1", dict(retry, **{"bootstrap.servers": SRC}))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "lost")
    r = h.wait_for(lambda: (lambda x: x if x["state"] == "FAILED" else None)(
        d.row("m1", "lost", 0)), 60, "lost-0 to fail")
    msg = r["errorMessage"]
    print("storage.data_dir lost: %r" % msg, flush=True)
    h.check("0..11" in msg and msg.startswith("unproven destination:") and
            "does not know" in msg,
            "lost-0 should name destination offsets 0..11: %r" % msg)
    h.check(mt.end_offset(DST, "lost") == 12, "records were appended to lost-0")
    d.stop()


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
