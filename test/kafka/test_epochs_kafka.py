#!/usr/bin/env python3
"""Source leader epochs on real Apache Kafka (a 3-broker source cluster of
this test's own, test/kafka/realkafka.py's brokers=3; SKIPs with the reason
when the tier cannot run):

  * a clean leader change (controlled shutdown of the leader while its
    follower is in sync, then the broker back) does not fail the partition
    and loses or duplicates nothing: the destination equals the source,
    byte for byte at the same offsets;
  * an unclean leader election that removes records mirrord already copied
    (the follower stopped, N records written to the leader alone and
    mirrored, the leader stopped, the stale follower elected, more new
    records written at the same offsets and past the mirrored end, so the
    source is not shorter than the destination) puts the partition in FAILED naming the
    source offset and epoch where the logs part and the destination end,
    seen by the Fetch (DivergingEpoch) of a running mirrord and by the
    OffsetForLeaderEpoch check of a mirrord started after the election
    (two forms: the lost records' epoch unknown to the new leader, and
    known to it but ending where its copy ends);
    the FAILED is not retried, the destination keeps its copy untouched,
    and a partition of another topic keeps mirroring.
"""

import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_provenance as tp  # noqa: E402  (its helpers; SKIPs without confluent-kafka)

RUN = "%d" % (os.getpid() % 100000)
N_LOST = 50
N_NEW = N_LOST + 20


def produce(bootstrap, topic, n, tag, one_per_batch=False):
    """n records to partition 0, acks=1 (the leader alone); one_per_batch
    flushes after each record (a batch at every offset)."""
    mt.produce_tagged(bootstrap, topic, 0, n, tag, keyed=True,
                      config={"acks": "1", "enable.idempotence": False},
                      one_per_batch=one_per_batch)


def same(src_boot, dst_boot, topic, n):
    s = tp.read(src_boot, topic, n)
    t = tp.read(dst_boot, topic, n)
    h.check(len(s) == n and s == t[:n] and len(t) == n,
            "%s: the destination differs from the source (offsets, keys, values): "
            "%d source records, %d destination records, first difference %r"
            % (topic, len(s), len(t),
               next(((a, b) for a, b in zip(s, t) if a != b), None)))


def wait_isr(src, topic, want):
    h.wait_for(lambda: sorted(src.partition(topic)["isr"]) == sorted(want), 120,
               "%s ISR to be %r (now %r)" % (topic, want, src.partition(topic)))


def divergence(d, mirror, topic):
    def failed():
        r = d.row(mirror, topic, 0)
        return r if r is not None and r["state"] == "FAILED" else None
    r = h.wait_for(failed, 120, "%s/%s-0 to fail (now %r)"
                   % (mirror, topic, d.row(mirror, topic, 0)))
    return r["errorMessage"] or ""


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    dst0, dst1 = h.real_kafka(2)
    src, = h.private_kafka(1, "plaintext", brokers=3)
    SRC = src.bootstrap
    h.check(src.broker_ids == [1, 2, 3], "3 brokers: %r" % src.broker_ids)
    div, clean, other = ("ep-div-" + RUN, "ep-clean-" + RUN, "ep-other-" + RUN)
    div2 = "ep-div2-" + RUN
    for t in (div, div2):
        src.create_topic(t, assignment={0: [2, 3]},
                         configs={"min.insync.replicas": 1,
                                  "unclean.leader.election.enable": "true"})
    src.create_topic(clean, assignment={0: [2, 3]},
                     configs={"min.insync.replicas": 1})
    src.create_topic(other, assignment={0: [1]})
    for t in (div, div2, clean, other):
        dst1.create_topic(t)
    dst0.create_topic(div)
    conf = {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
            "mirror.failed.retry.initial.backoff.ms": "100",
            "mirror.failed.retry.max.backoff.ms": "200"}
    d = mt.Mirrord(destination=dst1.bootstrap, name="live")
    d.create("k", conf)
    d2 = mt.Mirrord(destination=dst0.bootstrap, name="restarted")
    d2.create("k2", conf)

    for t in (div, div2, clean, other):
        produce(SRC, t, 10, "a")
        d.cli_ok("--add", "--mirror", "k", "--topic", t)
    d2.cli_ok("--add", "--mirror", "k2", "--topic", div)
    for t in (div, div2, clean, other):
        tp.wait_end(dst1.bootstrap, t, 10, timeout=120)
    tp.wait_end(dst0.bootstrap, div, 10, timeout=120)

    # ---- a clean leader change: nothing lost, nothing duplicated.
    wait_isr(src, clean, [2, 3])
    wait_isr(src, div, [2, 3])
    wait_isr(src, div2, [2, 3])
    before = src.partition(clean)
    leader = before["leader"]
    follower = [b for b in (2, 3) if b != leader][0]
    produce(SRC, clean, 10, "b")                   # 10..19 while both in sync
    src.stop_broker(leader)                        # controlled shutdown
    after = src.partition(clean)
    h.check(after["leader"] == follower and after["leader_epoch"] > before["leader_epoch"],
            "a clean leader change to %d: %r -> %r" % (follower, before, after))
    produce(SRC, clean, 10, "c")                   # 20..29 on the new leader
    tp.wait_end(dst1.bootstrap, clean, 30, timeout=120)
    src.start_broker(leader)
    wait_isr(src, clean, [2, 3])
    wait_isr(src, div, [2, 3])
    wait_isr(src, div2, [2, 3])
    produce(SRC, clean, 10, "d")                   # 30..39
    tp.wait_end(dst1.bootstrap, clean, 40, timeout=120)
    same(SRC, dst1.bootstrap, clean, 40)
    h.check(d.row("k", clean, 0)["state"] == "MIRRORING",
            "%s after a clean leader change: %r" % (clean, d.row("k", clean, 0)))
    print("clean leader change %d -> %d (epoch %d -> %d): 40 records equal, "
          "MIRRORING" % (leader, follower, before["leader_epoch"],
                         after["leader_epoch"]), flush=True)

    # ---- an unclean leader election that loses mirrored records.
    p = src.partition(div)
    leader = p["leader"]
    follower = [b for b in (2, 3) if b != leader][0]
    h.check(src.partition(div2)["leader"] == leader, "%s and %s share a leader: %r"
            % (div, div2, src.partition(div2)))
    x = mt.end_offset(SRC, div)                             # 10: both replicas hold 0..9
    # div2: 5 more records in the current epoch on both replicas (mirrored
    # means below the high watermark: the follower has them too).
    produce(SRC, div2, 5, "both")
    tp.wait_end(dst1.bootstrap, div2, 15, timeout=120)
    x2 = 15
    src.stop_broker(follower)
    wait_isr(src, div, [leader])
    wait_isr(src, div2, [leader])
    produce(SRC, div, N_LOST, "lost")               # x..x+49 on the leader alone
    produce(SRC, div2, N_LOST, "lost")              # 15..64 likewise
    epoch = src.partition(div)["leader_epoch"]
    h.check(src.partition(div2)["leader_epoch"] == epoch, "one epoch for both")
    tp.wait_end(dst1.bootstrap, div, x + N_LOST, timeout=120)
    tp.wait_end(dst1.bootstrap, div2, x2 + N_LOST, timeout=120)
    tp.wait_end(dst0.bootstrap, div, x + N_LOST, timeout=120)
    copy1 = tp.read(dst1.bootstrap, div, x + N_LOST)
    copy0 = tp.read(dst0.bootstrap, div, x + N_LOST)
    h.check(copy1 == copy0 and len(copy1) == x + N_LOST, "both copies hold 0..%d" % (x + N_LOST - 1))
    d2.stop()                                        # checks at its next start
    src.stop_broker(leader)                          # no in-sync replica left
    src.start_broker(follower)                       # its log ends at x

    def elected():
        return src.partition(div)["leader"] == follower and \
            src.partition(div2)["leader"] == follower
    try:
        h.wait_for(elected, 20, "the controller to elect %d uncleanly" % follower)
    except AssertionError:
        for t in (div, div2):
            r = src.java_tool("org.apache.kafka.tools.LeaderElectionCommand",
                              ["--bootstrap-server", src.admin_bootstrap,
                               "--election-type", "unclean", "--topic", t,
                               "--partition", "0"])
            print("kafka-leader-election --election-type unclean --topic %s: "
                  "%d %s %s" % (t, r.returncode, r.stdout.strip(),
                                r.stderr.strip()[-300:]), flush=True)
        h.wait_for(elected, 60, "%d to be elected uncleanly" % follower)
    new = src.partition(div)
    h.check(new["leader_epoch"] > epoch, "a new leader epoch: %r" % new)
    # Other records at the lost ones' offsets and past the mirrored end:
    # nothing for an offset check to notice (the source is not shorter).
    # One record per batch: a batch starts at the mirrored end too.
    produce(SRC, div, N_NEW, "new", one_per_batch=True)    # x..x+69
    produce(SRC, div2, N_NEW, "new", one_per_batch=True)   # 15..84
    h.check(mt.end_offset(SRC, div) == x + N_NEW, "the source lost %d records" % N_LOST)
    h.check(mt.end_offset(SRC, div2) == x2 + N_NEW, "the source lost %d records (%s)"
            % (N_LOST, div2))
    print("unclean election of %d (epoch %d): the source ends at %d, the "
          "destinations at %d" % (follower, new["leader_epoch"], x + N_NEW, x + N_LOST),
          flush=True)

    want = ("source log diverged at offset %d (" % x, "mirrored up to %d, "
            "destination end %d)" % (x + N_LOST, x + N_LOST), "epoch %d " % epoch)
    msg = divergence(d, "k", div)
    print("running mirrord: %r" % msg, flush=True)
    h.check(all(w in msg for w in want), "the reason should name %r: %r" % (want, msg))
    # div2: the epoch of the lost records is on the new leader too, ending
    # where its copy of them ends.
    want2 = "source log diverged at offset %d (epoch %d ends at %d on the source, " \
        "mirrored up to %d, destination end %d)" % (x2, epoch, x2, x2 + N_LOST,
                                                   x2 + N_LOST)
    msg2 = divergence(d, "k", div2)
    print("running mirrord, %s: %r" % (div2, msg2), flush=True)
    h.check(msg2.startswith(want2), "the reason should be %r: %r" % (want2, msg2))
    h.check(re.search(r"the source's log diverges \(its epoch \d+ ends at %d\)" % x,
                      d.log()) is not None,
            "the running mirrord should have seen the Fetch's DivergingEpoch")
    produce(SRC, other, 5, "b")                      # another topic keeps going
    tp.wait_end(dst1.bootstrap, other, 15, timeout=120)
    same(SRC, dst1.bootstrap, other, 15)
    h.check(d.row("k", other, 0)["state"] == "MIRRORING", "%s: %r" % (other, d.row("k", other, 0)))

    d2.start()
    msg3 = divergence(d2, "k2", div)
    print("mirrord started after the election: %r" % msg3, flush=True)
    h.check(all(w in msg3 for w in want), "the reason should name %r: %r" % (want, msg3))

    # Never retried, the destinations untouched, counted.
    n0 = tp.retries_logged(d, "k/%s-0" % div)
    for _ in range(20):
        time.sleep(0.2)
        h.check(d.row("k", div, 0)["state"] == "FAILED", "%s left FAILED" % div)
        h.check(d2.row("k2", div, 0)["state"] == "FAILED", "%s left FAILED (k2)" % div)
    h.check(tp.retries_logged(d, "k/%s-0" % div) == n0, "retried automatically")
    h.check(mt.end_offset(dst1.bootstrap, div) == x + N_LOST and
            tp.read(dst1.bootstrap, div, x + N_LOST) == copy1, "destination changed")
    h.check(mt.end_offset(dst0.bootstrap, div) == x + N_LOST and
            tp.read(dst0.bootstrap, div, x + N_LOST) == copy0, "destination changed (k2)")
    m = re.search(r'mirrord_partition_source_divergences_total\{[^}]*topic="%s"[^}]*\} (\d+)'
                  % re.escape(div), d.metrics())
    h.check(m is not None and int(m.group(1)) >= 1,
            "mirrord_partition_source_divergences_total for %s: %r" % (div, m and m.group(0)))
    code, body = mt.http_get(d.metrics_port, "/readyz")
    h.check(code == 503 and "source logs agree with the mirror" in body and
            div in body and "source log diverged at offset %d" % x in body,
            "/readyz names the divergence, got %d %r" % (code, body))
    d.stop()
    d.start()                                        # still FAILED after a restart
    for _ in range(10):
        time.sleep(0.2)
        r = d.row("k", div, 0)
        h.check(r["state"] == "FAILED" and (r["errorMessage"] or "") == msg,
                "%s after a restart: %r" % (div, r))
    d.stop()
    d2.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
