#!/usr/bin/env python3
"""A source that refuses mirrord's login or denies it the topic is
reported STALLED with the cause: real Apache Kafka, a private
single-node source with SASL and ACLs (StandardAuthorizer) whose
connections.max.reauth.ms is 3000, so a SASL session ends within 3 s
and every connection logs in again; the shared destination.  mirrord
reads the source as User:alice with SCRAM-SHA-512 (its own client;
librdkafka 2.0.2 cannot do SCRAM against Kafka 4), allowed every topic;
pipeline.request_timeout_ms 5000 and mirror.fetch.wait.max.ms 100 (stall
bound B 5.1 s).  Two topics, A (two partitions) and B (one), are copied
and caught up; records keep being written to both through the source's
PLAINTEXT admin listener during each fault.  Then:

  1. SASL: alice's SCRAM password is changed on the broker
     (kafka-configs).  Within 2 x B + 5 s (+ the 3 s a session may still
     live) kafka-mirrors --describe shows all three partitions STALLED
     with a REASON naming the source's host:port, SASL authentication and
     since when; --describe --json, /metrics (mirrord_mirror_source_up 0,
     source errors with cause sasl_authentication, stalled partitions,
     growing lag seconds and seconds since success), GET
     /mirrors/<name>/ready 503, /mirrors and /readyz ("sources readable")
     say the same; no sourceOffset is past the source's real end.  Cured
     by setting the old password back on the broker: the copy catches up,
     the destination holds the source's records at the same offsets in
     the same batches, source_up 1.
  2. ACL: a DENY of READ and DESCRIBE on topic A for User:alice.  Within
     2 x B + 5 s A's partitions are STALLED with a REASON naming the
     source, TOPIC_AUTHORIZATION_FAILED and since when, the cause
     authorization is counted, stalled partitions is 2, while B's
     partition goes on MIRRORING, not stalled.  Cured by deleting the
     DENY: caught up, the same records at the same offsets, source_up 1.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
M = "sa"
TA = "sa-%s-a" % RUN
TB = "sa-%s-b" % RUN
REAUTH_MS = 3000


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    rk = h.realkafka()
    src, = h.private_kafka(1, "acl", extra_props={
        "connections.max.reauth.ms": str(REAUTH_MS)})
    dst = h.real_kafka(2)[1]
    plain = src.admin_bootstrap        # the test's own clients, a super user
    src.create_topic(TA, partitions=2)
    src.create_topic(TB, partitions=1)
    src.grant("User:alice", ["ALL"], topic="*")
    src.grant("User:alice", ["DESCRIBE", "DESCRIBE_CONFIGS"], cluster=True)
    d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=mt.STALL_YAML)
    d.create(M, mt.stall_mirror_configs(src.bootstrap, **{
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": rk.USERS["alice"]}))
    for t, n in ((TA, 2), (TB, 1)):
        for p in range(n):
            mt.produce_tagged(plain, t, p, 200, "%s-%d" % (t, p), keyed=True)
    d.cli_ok("--add", "--mirror", M, "--topic", "%s,%s" % (TA, TB))
    mt.wait_caught_up(d, M, 120, "%s and %s caught up" % (TA, TB), count=3)
    layout = {TA: 2, TB: 1}
    every = [(TA, 0), (TA, 1), (TB, 0)]

    def real_ends():
        return {(t, p): mt.end_offset(plain, t, p) for t, p in every}

    # 1. SASL: alice's password changed on the broker.
    w = mt.LayoutWriter(plain, {TA: [0, 1], TB: [0]})
    w.start()
    f = mt.SourceFault(d, M, src.bootstrap, every,
                       "SASL (alice's password changed on the broker)",
                       r"SASL|authenticat", "sasl_authentication")
    f.begin()
    src.set_scram_password("alice", "rotated-%s" % RUN)
    changed = time.monotonic()         # the tool's JVM took a while
    try:
        f.wait_stalled(within=mt.STALL_WITHIN_S + REAUTH_MS / 1000.0,
                       start=changed)
        f.check_stalled(real_ends=real_ends())
    finally:
        src.set_scram_password("alice", rk.USERS["alice"])
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)

    # 2. ACL: READ and DESCRIBE on topic A denied to alice.
    w = mt.LayoutWriter(plain, {TA: [0, 1], TB: [0]})
    w.start()
    f = mt.SourceFault(d, M, src.bootstrap, [(TA, 0), (TA, 1)],
                       "authorization (DENY READ, DESCRIBE on %s)" % TA,
                       r"TOPIC_AUTHORIZATION_FAILED", "authorization",
                       whole_source=False)
    f.begin()
    src.grant("User:alice", ["READ", "DESCRIBE"], topic=TA, permission="DENY")
    try:
        f.wait_stalled()
        f.check_stalled(real_ends=real_ends())
        # B is readable: it goes on copying what keeps arriving.
        want = mt.end_offset(plain, TB, 0)
        try:
            h.wait_for(lambda: mt.end_offset(dst.bootstrap, TB, 0) >= want,
                       30, "copied")
        except AssertionError:
            h.fail("%s is not denied but its destination stays below the "
                   "source's end %d while %s is denied; --describe:\n%s"
                   % (TB, want, TA, mt.describe_table(d, M)[0]))
    finally:
        src.revoke("User:alice", ["READ", "DESCRIBE"], topic=TA,
                   permission="DENY")
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)
    print("ok")


h.run_main(main)
