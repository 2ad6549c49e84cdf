#!/usr/bin/env python3
"""Refused writes on real Apache Kafka with ACLs (StandardAuthorizer; two
private clusters of the tier of test/kafka/realkafka.py, SKIPs with the
reason when it cannot run).
mirrord writes to the destination as User:bob, who may describe and read
the mirrored topics but at first write nothing:

  * no WRITE on any topic and no IdempotentWrite: the broker refuses
    InitProducerId (CLUSTER_AUTHORIZATION_FAILED).  The partition is FAILED
    with a reason naming the error, the principal and the topic, /readyz
    answers 503 naming it, mirrord_destination_writes_denied_total counts
    it;
  * WRITE granted on the topic: the partition resumes by itself and the
    destination equals the source, batch for batch at the same offsets;
  * a second topic without WRITE (InitProducerId now allowed through the
    first topic's WRITE): Produce answers TOPIC_AUTHORIZATION_FAILED, the
    partition is FAILED naming it and User:bob, retried past the mirror's
    retry limit; WRITE granted: it resumes, equal, and /readyz is 200;
  * first, without mirrord, the broker behaviour the per-partition
    identities rely on: an epoch bumped by the producer goes on from
    sequence 0, and the older epoch is fenced once a batch of the new one
    is on the partition;
  * a third topic without any ACL (not even DESCRIBE): Metadata answers
    TOPIC_AUTHORIZATION_FAILED, the same named FAILED; granted: resumes.
"""

import os
import re
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_provenance as tp  # noqa: E402  (its helpers; SKIPs without confluent-kafka)

RUN = "%d" % (os.getpid() % 100000)


def produce_as(cluster, topic, template, pid, epoch, seq):
    """One raw Produce (v3, acks=-1) of template re-stamped with producer id
    pid, epoch and base sequence seq; returns (error code, base offset)."""
    raw = bytearray(template)
    raw[0:8] = struct.pack(">q", 0)
    raw[43:57] = struct.pack(">qhi", pid, epoch, seq)
    raw[17:21] = struct.pack(">I", kraw.crc32c(bytes(raw[21:])))
    body = (struct.pack(">hhi", -1, -1, 10000) + struct.pack(">i", 1)
            + kraw._s(topic) + struct.pack(">ii", 1, 0)
            + struct.pack(">i", len(raw)) + bytes(raw))
    r = cluster.conn(topic, 0).call(0, 3, body)
    r.i32()
    r.str()
    r.i32()
    r.i32()
    return r.i16(), r.i64()


def broker_fences_bumped_epochs(dst, topic):
    """What the design of per-partition identities relies on, asked of the
    real broker: a producer id that already wrote a partition may go on at
    epoch + 1 from sequence 0, and from then on its older epoch is refused
    (a late copy of an old request cannot land)."""
    tp.produce(dst.admin_bootstrap, topic, 1, "template")
    c = kraw.Cluster(dst.admin_bootstrap)
    try:
        template = c.batches(topic, 0)[0]["raw"]
        def init_pid():
            w = kraw.Conn(dst.admin_bootstrap)
            try:
                r = w.call(22, 1, struct.pack(">hi", -1, 60000))
            finally:
                w.close()
            r.i32()
            err, pid, epoch = r.i16(), r.i64(), r.i16()
            h.check(err in (0, 14, 15), "InitProducerId error %d" % err)
            return (pid, epoch) if err == 0 else None
        # 14/15: the transaction coordinator is still loading.
        pid, epoch = h.wait_for(init_pid, 60, "InitProducerId to answer")
        eq(produce_as(c, topic, template, pid, epoch, 0)[0], 0, "epoch 0 seq 0")
        eq(produce_as(c, topic, template, pid, epoch, 1)[0], 0, "epoch 0 seq 1")
        eq(produce_as(c, topic, template, pid, epoch + 1, 0)[0], 0,
           "the bumped epoch from sequence 0")
        late = produce_as(c, topic, template, pid, epoch, 2)[0]
        h.check(late in (47, 90), "a late copy under the old epoch: error %d, "
                "want INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90)" % late)
        eq(produce_as(c, topic, template, pid, epoch + 1, 5)[0], 45,
           "a gap in the bumped epoch's sequence")
    finally:
        c.close()
    print("real Kafka: producer id %d epoch %d -> %d from sequence 0 accepted, "
          "the old epoch refused afterwards (error %d)"
          % (pid, epoch, epoch + 1, late), flush=True)


def main():
    # Clusters of this test's own: ACLs are cluster-wide, and a WRITE that
    # another test left for bob on any topic would let InitProducerId by.
    src, dst = h.private_kafka(2, "acl")
    rk = h.realkafka()
    te = "pids-e-" + RUN
    dst.create_topic(te, partitions=1)
    broker_fences_bumped_epochs(dst, te)
    ta, tb, tc = "pids-a-" + RUN, "pids-b-" + RUN, "pids-c-" + RUN
    for cl in (src, dst):
        for t in (ta, tb, tc):
            cl.create_topic(t, partitions=1)
    for t in (ta, tb):
        dst.grant("User:bob", ["DESCRIBE", "READ", "DESCRIBE_CONFIGS"], topic=t)

    d = mt.Mirrord(destination=dst.bootstrap,
                   destination_client=mt.sasl_plain("bob"))
    d.create("k", {"bootstrap.servers": src.bootstrap,
                   "security.protocol": "SASL_PLAINTEXT",
                   "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                   "sasl.password": rk.USERS["admin"],
                   "mirror.fetch.wait.max.ms": "100",
                   "mirror.failed.retry.initial.backoff.ms": "200",
                   "mirror.failed.retry.max.backoff.ms": "1000",
                   "mirror.failed.retry.max.attempts": "2"})

    def denied(api, error):
        m = re.search(r'^mirrord_destination_writes_denied_total\{api="%s",'
                      r'error="%s"\} (\S+)$' % (api, error), d.metrics(), re.M)
        return float(m.group(1)) if m else 0.0

    def failed_denied(topic):
        r = d.row("k", topic, 0)
        return r if r and r["state"] == "FAILED" and \
            "destination access denied" in (r["errorMessage"] or "") else None

    SA = src.admin_bootstrap
    DA = dst.admin_bootstrap

    # 1. No WRITE anywhere: InitProducerId refused.
    tp.produce(SA, ta, 30, "a")
    d.cli_ok("--add", "--mirror", "k", "--topic", ta)
    r = h.wait_for(lambda: failed_denied(ta), 90,
                   "%s-0 FAILED for the refused InitProducerId (log %s)"
                   % (ta, d.proc.log_path))
    msg = r["errorMessage"]
    print("real Kafka, no WRITE: %s" % msg, flush=True)
    for want in ("InitProducerId refused", "CLUSTER_AUTHORIZATION_FAILED",
                 "User:bob", "topic %s partition 0" % ta):
        h.check(want in msg, "the reason names %r: %r" % (want, msg))
    code, body = h.wait_for(lambda: (lambda c: c if c[0] == 503 and
                            "destination access denied" in c[1] else None)(d.readyz()),
                            30, "/readyz 503 for the denial")
    h.check(denied("InitProducerId", "CLUSTER_AUTHORIZATION_FAILED") >= 1,
            "the denial metric counts the refused InitProducerId")
    eq(mt.end_offset(DA, ta), 0, "%s destination end while denied" % ta)

    # 2. WRITE on the topic: resumes by itself.
    dst.grant("User:bob", ["WRITE"], topic=ta)
    tp.produce(SA, ta, 20, "a2")
    tp.wait_end(DA, ta, 50, timeout=120)
    tp.wait_row(d, "k", ta, "MIRRORING", timeout=60)
    eq(mt.same_batches(SA, DA, ta, [0]), 50, "%s records on the destination" % ta)
    print("WRITE granted: %s resumed, 50 records equal at the same offsets"
          % ta, flush=True)

    # 3. Another topic without WRITE: Produce refused.
    tp.produce(SA, tb, 25, "b")
    d.cli_ok("--add", "--mirror", "k", "--topic", tb)
    r = h.wait_for(lambda: failed_denied(tb), 90,
                   "%s-0 FAILED for the refused Produce" % tb)
    msg = r["errorMessage"]
    print("real Kafka, no WRITE on %s: %s" % (tb, msg), flush=True)
    for want in ("TOPIC_AUTHORIZATION_FAILED", "User:bob",
                 "topic %s partition 0" % tb):
        h.check(want in msg, "the reason names %r: %r" % (want, msg))
    h.wait_for(lambda: denied("Produce", "TOPIC_AUTHORIZATION_FAILED") >= 3, 60,
               "three refused Produce requests (past max.attempts=2)")
    # (Between two refusals the partition is briefly PREPARING: a retry.)
    h.wait_for(lambda: d.readyz()[0] == 503, 30, "/readyz 503 while %s is "
               "refused" % tb)
    dst.grant("User:bob", ["WRITE"], topic=tb)
    tp.wait_end(DA, tb, 25, timeout=120)
    tp.wait_row(d, "k", tb, "MIRRORING", timeout=60)
    eq(mt.same_batches(SA, DA, tb, [0]), 25, "%s records on the destination" % tb)
    h.wait_for(lambda: d.readyz()[0] == 200, 30, "/readyz 200 once allowed")
    eq(mt.same_batches(SA, DA, ta, [0]), 50, "%s records on the destination" % ta)
    print("WRITE granted: %s resumed; /readyz ready; both topics equal" % tb,
          flush=True)

    # 4. A topic bob may not even describe: Metadata refused.
    tp.produce(SA, tc, 15, "c")
    d.cli_ok("--add", "--mirror", "k", "--topic", tc)
    r = h.wait_for(lambda: failed_denied(tc), 90,
                   "%s-0 FAILED for the refused Metadata" % tc)
    msg = r["errorMessage"]
    print("real Kafka, no DESCRIBE on %s: %s" % (tc, msg), flush=True)
    for want in ("Metadata for topic %s" % tc, "TOPIC_AUTHORIZATION_FAILED",
                 "User:bob"):
        h.check(want in msg, "the reason names %r: %r" % (want, msg))
    h.wait_for(lambda: d.readyz()[0] == 503, 30, "/readyz 503 while %s is "
               "refused" % tc)
    dst.grant("User:bob", ["DESCRIBE", "READ", "WRITE"], topic=tc)
    tp.wait_end(DA, tc, 15, timeout=120)
    tp.wait_row(d, "k", tc, "MIRRORING", timeout=60)
    eq(mt.same_batches(SA, DA, tc, [0]), 15, "%s records on the destination" % tc)
    h.wait_for(lambda: d.readyz()[0] == 200, 30, "/readyz 200 once allowed")
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
