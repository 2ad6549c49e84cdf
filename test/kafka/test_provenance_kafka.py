#!/usr/bin/env python3
"""Provenance before resume on real Apache Kafka (the tier of
test/kafka/realkafka.py; SKIPs with the reason when it cannot run): the
broker's own idempotence and Fetch decide here, not the mock's.

  * 10 records written by someone else into a mirrored destination
    partition: FAILED naming offsets 20..29, not retried automatically,
    still FAILED after a restart of mirrord; then the operator's
    kafka-mirrors --recover --resolution skip-over: every source record
    after the foreign range is at the destination, in order;
  * a topic added onto an existing non-empty destination topic: FAILED
    naming the offsets found there; nothing appended.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_provenance as tp  # noqa: E402  (its helpers; SKIPs without confluent-kafka)

RUN = "%d" % (os.getpid() % 100000)


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    fw, pre = "prov-fw-" + RUN, "prov-pre-" + RUN
    for cl in (src, dst):
        cl.create_topic(fw, partitions=1)
        cl.create_topic(pre, partitions=1)
    d = mt.Mirrord(destination=DST)
    d.create("k", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                   "mirror.failed.retry.initial.backoff.ms": "100",
                   "mirror.failed.retry.max.backoff.ms": "200"})

    tp.produce(SRC, fw, 20, "a")
    d.cli_ok("--add", "--mirror", "k", "--topic", fw)
    tp.wait_end(DST, fw, 20, timeout=90)
    tp.produce(DST, fw, 10, "intruder")           # destination 20..29
    tp.produce(SRC, fw, 5, "b")                   # source 20..24

    def failed():
        r = d.row("k", fw, 0)
        return r if r["state"] == "FAILED" and "foreign write" in (r["errorMessage"] or "") else None
    msg = h.wait_for(failed, 90, "%s-0 to fail naming the foreign write" % fw)["errorMessage"]
    print("real Kafka foreign write: %r" % msg, flush=True)
    h.check("20..29" in msg and "10 records" in msg, "the reason should name 20..29: %r" % msg)
    n0 = tp.retries_logged(d, "k/%s-0" % fw)
    e0 = mt.end_offset(DST, fw)
    for _ in range(15):
        time.sleep(0.2)
        h.check(d.row("k", fw, 0)["state"] == "FAILED", "%s-0 left FAILED" % fw)
    h.check(tp.retries_logged(d, "k/%s-0" % fw) == n0, "retried automatically")
    d.stop()
    d.start()
    for _ in range(15):
        time.sleep(0.2)
        r = d.row("k", fw, 0)
        h.check(r["state"] == "FAILED" and "20..29" in (r["errorMessage"] or ""),
                "%s-0 after a restart: %r" % (fw, r))
    h.check(mt.end_offset(DST, fw) == e0, "the destination grew while FAILED")

    d.cli_ok("--recover", "--mirror", "k", "--topic", fw, "--resolution", "skip-over")
    tp.produce(SRC, fw, 5, "c")                   # source 25..29
    tp.wait_end(DST, fw, e0 + 10, timeout=90)
    tp.wait_row(d, "k", fw, "MIRRORING")
    s = tp.read(SRC, fw, 30)
    t = tp.read(DST, fw, e0 + 10)
    h.check([x[1:] for x in t[:20]] == [x[1:] for x in s[:20]], "0..19 differ")
    h.check([x[1:] for x in t[e0:e0 + 10]] == [x[1:] for x in s[20:30]],
            "source 20..29 should be at destination %d..%d" % (e0, e0 + 9))
    print("real Kafka skip-over: source 20..29 at destination %d..%d" % (e0, e0 + 9),
          flush=True)

    tp.produce(DST, pre, 7, "preexisting")
    tp.produce(SRC, pre, 10, "p")
    d.cli_ok("--add", "--mirror", "k", "--topic", pre)
    r = h.wait_for(lambda: (lambda x: x if x["state"] == "FAILED" else None)(
        d.row("k", pre, 0)), 90, "%s-0 to fail" % pre)
    h.check("0..6" in (r["errorMessage"] or ""), "%s-0: %r" % (pre, r))
    h.check(mt.end_offset(DST, pre) == 7, "records were appended to %s-0" % pre)
    print("real Kafka add onto a non-empty destination: %r" % r["errorMessage"], flush=True)

    # The destination topic deleted and created again while mirrord is
    # down: a new topic id, and a destination below what mirrord wrote.
    rec = "prov-rec-" + RUN
    for cl in (src, dst):
        cl.create_topic(rec, partitions=1)
    tp.produce(SRC, rec, 10, "r")
    d.cli_ok("--add", "--mirror", "k", "--topic", rec)
    tp.wait_end(DST, rec, 10, timeout=90)
    d.stop()
    from confluent_kafka.admin import AdminClient
    adm = AdminClient({"bootstrap.servers": DST})
    for f in adm.delete_topics([rec]).values():
        f.result(30)
    time.sleep(1)   # KRaft deletes asynchronously; create_topic retries meanwhile
    dst.create_topic(rec, partitions=1)
    d.start()
    r = h.wait_for(lambda: (lambda x: x if x["state"] == "FAILED" else None)(
        d.row("k", rec, 0)), 90, "%s-0 to fail" % rec)
    # Named either by the topic-id check (a new destination topic id) or,
    # when the id was not yet recorded, by the provenance check (the
    # destination ends below what mirrord wrote); never resumed.
    msg = r["errorMessage"] or ""
    h.check(msg.startswith("destination truncated:") or
            ("destination topic %s was deleted and recreated" % rec) in msg,
            "%s-0: %r" % (rec, r))
    print("real Kafka destination topic recreated: %r" % r["errorMessage"], flush=True)
    h.check(mt.end_offset(DST, rec) == 0, "records were written to the recreated %s-0" % rec)
    d.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
