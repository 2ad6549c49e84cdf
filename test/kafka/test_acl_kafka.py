#!/usr/bin/env python3
"""ACL sync and read-only destination topics, on real Apache
Kafka 4.4.0 with an authorizer on both clusters (private pair: mirrord's
principal gets ALTER on the destination cluster, which the shared pair's
other tests must not see).

mirrord reads the source as the super user admin and writes the
destination as bob.  The mirror has mirror.acls.sync=true and maps
User:carol to User:alice; mirror.topic.read.only is left at its default.

1. Source bindings on the mirrored topic (LITERAL, PREFIXED), on a selected
   group, and carol's (mapped) appear on the destination; bindings on an
   unmirrored topic and an unselected group do not; a binding made by hand
   on the destination stays.  alice, who may write the topic through the
   copied PREFIXED grant, gets a DENY WRITE on it, and a real producer
   (librdkafka as alice) is refused with TOPIC_AUTHORIZATION_FAILED, while
   the records produced on the source meanwhile are mirrored: offsets and
   record bytes equal.
2. A binding deleted on the source disappears from the destination; the
   hand-made one is still there.
3. kafka-mirrors --remove (failover): the DENY goes, the copied grants stay,
   and alice's producer writes the topic.
4. mirrord loses ALTER on the destination cluster: the binding of a newly
   mirrored topic is refused with CLUSTER_AUTHORIZATION_FAILED, reported
   (warning of the mirror's partitions, metric by error name, log line),
   never fatal (the topic is mirrored); ALTER granted again, the next round
   creates it and the warning goes.
   An ALLOW WRITE for User:* on the topic is named in the warning, not
   denied.
6. ALTER revoked again, the topic removed (the DENY cannot be deleted), the
   mirror deleted, mirrord killed (-9) and started: once ALTER is back the
   DENY of the deleted mirror is removed (mirrord recorded it); the copied
   bindings stay.
"""

import re

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from test_tconfigs_kafka import metric, rows  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "acl-%s-t" % RUN        # mirrored
T2 = "acl-%s-u" % RUN       # mirrored in step 4
OTHER = "oth-%s" % RUN      # not mirrored
G = "g-acl-%s" % RUN        # selected by mirror.groups.include
GX = "gx-%s" % RUN          # not selected


def lit(kind, name, principal, op, perm="ALLOW", pat="LITERAL"):
    return (kind, name, pat, principal, "*", op, perm)


def produce_as_alice(dst_c, value):
    """One record produced by a real client as alice: the error name or
    None when it was written."""
    try:
        from confluent_kafka import Producer
    except ImportError:
        h.skip("python3-confluent-kafka is not installed")
    cfg = dst_c.client_config(user="alice")
    cfg.update({"message.timeout.ms": 15000, "retries": 0,
                "enable.idempotence": False})
    p = Producer(cfg)
    res = []
    p.produce(T, value=value, partition=0,
              on_delivery=lambda err, msg: res.append(err))
    p.flush(30)
    h.check(len(res) == 1, "no delivery report for the record (%r)" % res)
    return None if res[0] is None else res[0].name()


def same_data(src, dst):
    """Source and destination partition equal: offsets and record bytes."""
    s = src.batches(T, 0)
    d = dst.batches(T, 0)
    if [(b["base_offset"], b["count"]) for b in s] != \
            [(b["base_offset"], b["count"]) for b in d]:
        return False
    return all(kraw.records_section(a["raw"]) == kraw.records_section(b["raw"])
               for a, b in zip(s, d))


def main():
    src_c, dst_c = h.private_kafka(2, "acl")
    rk = h.realkafka()
    for cl in (src_c, dst_c):
        cl.create_topic(T, partitions=1)
        cl.create_topic(OTHER, partitions=1)
        cl.create_topic(T2, partitions=1)
    # mirrord's destination principal: its topics, describe/alter ACLs.
    dst_c.grant("User:bob", ["ALL"], topic="acl-", pattern="prefixed")
    dst_c.grant("User:bob", ["DESCRIBE", "ALTER"], cluster=True)
    # Source bindings.
    src_c.grant("User:alice", ["READ"], topic=T)
    src_c.grant("User:alice", ["WRITE"], topic="acl-%s" % RUN, pattern="prefixed")
    src_c.grant("User:carol", ["DESCRIBE"], topic=T)
    src_c.grant("User:alice", ["READ"], group=G)
    src_c.grant("User:alice", ["READ"], group=GX)
    src_c.grant("User:alice", ["READ"], topic=OTHER)
    # Made by hand on the destination.
    dst_c.grant("User:erin", ["READ"], topic=T)
    hand = lit("TOPIC", T, "User:erin", "READ")
    # (the broker applies a binding from its metadata log a moment later)
    h.wait_for(lambda: hand in dst_c.acls(), 30,
               "the hand-made binding to be there")

    d = mt.Mirrord(destination=dst_c.bootstrap,
                   destination_client=mt.sasl_plain("bob"))
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                    "sasl.password": rk.USERS["admin"],
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000",
                    "mirror.groups.include": "g-acl-.*",
                    "mirror.acls.sync": "true",
                    "mirror.acls.principal.map": "User:carol=User:alice"})
    src = kraw.Cluster(src_c.admin_bootstrap)
    dst = kraw.Cluster(dst_c.admin_bootstrap)
    kw.produce(src, T, 0, kw.batch([(0, b"k0", b"before")]))
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    h.wait_for(lambda: len(rows(d, T)) == 1 and rows(d, T)[0]["state"] == "MIRRORING",
               90, "%s MIRRORING (now %r)" % (T, rows(d, T)))

    want = {lit("TOPIC", T, "User:alice", "READ"),
            lit("TOPIC", "acl-%s" % RUN, "User:alice", "WRITE", pat="PREFIXED"),
            lit("TOPIC", T, "User:alice", "DESCRIBE"),        # carol, mapped
            lit("GROUP", G, "User:alice", "READ")}
    deny = lit("TOPIC", T, "User:alice", "WRITE", perm="DENY")
    h.wait_for(lambda: want | {deny} <= dst_c.acls(), 60,
               "the source's bindings and the DENY on the destination (missing %r)"
               % ((want | {deny}) - dst_c.acls()))
    got = dst_c.acls()
    for b in (lit("GROUP", GX, "User:alice", "READ"),
              lit("TOPIC", OTHER, "User:alice", "READ"),
              lit("TOPIC", T, "User:carol", "DESCRIBE")):
        h.check(b not in got, "%r reached the destination" % (b,))
    h.check(hand in got, "the hand-made binding went")
    h.check(not any(p.get("warningMessage") for p in rows(d, T)),
            "warning on %s: %r" % (T, rows(d, T)))
    err = produce_as_alice(dst_c, b"foreign while mirrored")
    h.check(err == "TOPIC_AUTHORIZATION_FAILED",
            "alice's producer got %r while %s is mirrored" % (err, T))
    for i in range(1, 4):
        kw.produce(src, T, 0, kw.batch([(0, b"k%d" % i, b"v%d" % i)]))
    h.wait_for(lambda: dst.offsets(T, 0) == src.offsets(T, 0), 60,
               "the source's records mirrored (source %r, destination %r)"
               % (src.offsets(T, 0), dst.offsets(T, 0)))
    h.check(same_data(src, dst), "source and destination partitions differ")
    h.check(rows(d, T)[0]["state"] == "MIRRORING", "state %r" % rows(d, T))
    h.check(metric(d, "mirrord_acl_bindings_created_total", mirror="m1",
                   result="sync") >= 4, "sync creations not counted")
    h.check(metric(d, "mirrord_acl_bindings_created_total", mirror="m1",
                   result="read-only") >= 1, "the DENY not counted")
    h.wait_for(lambda: metric(d, "mirrord_acl_bindings", mirror="m1",
                              result="sync") == 4
               and metric(d, "mirrord_acl_bindings", mirror="m1",
                          result="read-only") == 1, 30,
               "mirrord_acl_bindings: 4 synced, 1 read-only")
    print("1. source bindings synced (mapped, scoped), hand-made one kept, "
          "alice refused with TOPIC_AUTHORIZATION_FAILED, mirroring exact",
          flush=True)

    src_c.revoke("User:alice", ["READ"], topic=T)
    gone = lit("TOPIC", T, "User:alice", "READ")
    h.wait_for(lambda: gone not in dst_c.acls(), 60,
               "the binding deleted on the source gone from the destination")
    got = dst_c.acls()
    h.check(hand in got, "the hand-made binding went")
    h.check(deny in got and (want - {gone}) <= got,
            "other bindings went with it: %r" % (got,))
    print("2. a binding deleted on the source is deleted on the destination; "
          "nothing else is", flush=True)

    d.cli_ok("--remove", "--mirror", "m1", "--topic", T)
    h.wait_for(lambda: deny not in dst_c.acls(), 60,
               "the DENY lifted after --remove")
    err = produce_as_alice(dst_c, b"after failover")
    h.check(err is None, "alice's producer got %r after --remove" % err)
    got = dst_c.acls()
    h.check((want - {gone}) <= got and hand in got,
            "bindings went at failover: %r" % (got,))
    print("3. --remove lifts the DENY (alice writes), copied grants stay",
          flush=True)

    dst_c.revoke("User:bob", ["ALTER"])
    src_c.grant("User:alice", ["READ"], topic=T2)
    b2 = lit("TOPIC", T2, "User:alice", "READ")
    kw.produce(src, T2, 0, kw.batch([(0, b"k", b"while refused")]))
    d.cli_ok("--add", "--mirror", "m1", "--topic", T2)

    def refused():
        r = rows(d, T2)
        return r and r[0]["state"] == "MIRRORING" and "CLUSTER_AUTHORIZATION_FAILED" \
            in (r[0].get("warningMessage") or "") and T2 in r[0]["warningMessage"]
    h.wait_for(refused, 60, "the refusal on %s's partition (now %r)" % (T2, rows(d, T2)))
    h.check(b2 not in dst_c.acls(), "the binding was created without ALTER")
    h.check(metric(d, "mirrord_acl_sync_errors_total", mirror="m1",
                   error="CLUSTER_AUTHORIZATION_FAILED") >= 1,
            "mirrord_acl_sync_errors_total{error=CLUSTER_AUTHORIZATION_FAILED} "
            "did not count")
    h.check(re.search(r"mirror m1: .*refuses to create ALLOW READ on TOPIC LITERAL %s"
                      r".*CLUSTER_AUTHORIZATION_FAILED" % re.escape(T2), d.log()),
            "the refusal was not logged")
    h.wait_for(lambda: dst.offsets(T2, 0) == src.offsets(T2, 0), 60,
               "%s's records mirrored while the ACL is refused" % T2)
    # Three rounds refused, one log line: said once per change.
    h.wait_for(lambda: metric(d, "mirrord_acl_sync_errors_total", mirror="m1",
                              error="CLUSTER_AUTHORIZATION_FAILED") >= 6, 60,
               "three refused rounds counted")
    said = re.findall(r"refuses to create ALLOW READ on TOPIC LITERAL %s "
                      % re.escape(T2), d.log())
    h.check(len(said) == 1, "the refusal was logged %d times, not once" % len(said))
    print("4. CreateAcls refused: warning, metric, one log line; %s mirrored "
          "all the same" % T2, flush=True)
    dst_c.grant("User:bob", ["ALTER"], cluster=True)
    h.wait_for(lambda: b2 in dst_c.acls() and not rows(d, T2)[0].get("warningMessage"),
               60, "the binding created and the warning gone once ALTER is back "
               "(now %r)" % rows(d, T2))
    print("5. ALTER granted again: created at the next round, warning cleared",
          flush=True)

    dst_c.grant("User:*", ["WRITE"], topic=T2)

    def wildcard():
        w = rows(d, T2)[0].get("warningMessage") or ""
        return "ALLOW WRITE on TOPIC LITERAL %s for User:* from * lets every " \
            "principal write mirrored topic %s" % (T2, T2) in w
    h.wait_for(wildcard, 60, "the User:* grant named in %s's warning (now %r)"
               % (T2, rows(d, T2)))
    h.check(lit("TOPIC", T2, "User:*", "WRITE", perm="DENY") not in dst_c.acls(),
            "User:* denied (mirrord with it)")
    dst_c.revoke("User:*", ["WRITE"], topic=T2)
    h.wait_for(lambda: not rows(d, T2)[0].get("warningMessage"), 60,
               "the warning gone with the User:* grant")
    print("5b. an ALLOW WRITE for User:* is reported, not denied", flush=True)

    deny2 = lit("TOPIC", T2, "User:alice", "WRITE", perm="DENY")
    h.check(deny2 in dst_c.acls(), "no DENY on %s" % T2)
    dst_c.revoke("User:bob", ["ALTER"])
    d.cli_ok("--remove", "--mirror", "m1", "--topic", T2)
    h.wait_for(lambda: re.search(r"refuses to delete DENY WRITE on TOPIC LITERAL %s "
                                 % re.escape(T2), d.log()), 60,
               "the refused DeleteAcls of the DENY on %s logged" % T2)
    h.check(deny2 in dst_c.acls(), "the DENY went without ALTER")
    d.cli_ok("--delete", "--mirror", "m1")
    d.kill9()
    d.start()
    dst_c.grant("User:bob", ["ALTER"], cluster=True)
    h.wait_for(lambda: deny2 not in dst_c.acls(), 60,
               "the deleted mirror's DENY on %s removed after a restart" % T2)
    got = dst_c.acls()
    h.check(b2 in got and hand in got, "bindings went with the mirror: %r" % (got,))
    # Logged when mirrord reads the DeleteAcls answer, which may be just
    # after the broker applied it (what the wait above saw).
    h.wait_for(lambda: re.search(r"mirror m1 \(deleted\): ACL binding DENY "
                                 r"WRITE on TOPIC LITERAL %s " % re.escape(T2),
                                 d.log()), 30,
               "the removal of the DENY on %s logged" % T2)
    print("6. a mirror deleted while its DENY could not be removed: removed "
          "once possible, after kill -9 and restart; copies stay", flush=True)
    d.stop()
    src.close()
    dst.close()


if __name__ == "__main__":
    main()
