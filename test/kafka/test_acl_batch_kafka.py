#!/usr/bin/env python3
"""The read-only guard of many topics records its ACL bindings in one
metadata write a round, not one each, and off the event loop (the loop
never waits for a binding's write-ahead record), on real Apache
Kafka 4.4.0 with an authorizer on both clusters:

  * on the destination alice may write every topic of a prefix (one
    PREFIXED ALLOW WRITE, made by hand);
  * a mirror takes 40 topics of that prefix by one pattern: mirrord puts a
    DENY WRITE for alice on each of the 40 destination topics, each
    recorded in the metadata log before it is created;
  * the metadata writes the loop waited for meanwhile
    (mirrord_metadata_log_loop_writes_total) are none, and
    alice's producer is refused on a guarded topic while the records
    produced on the source are mirrored (offsets and bytes equal);
  * after kill -9 mirrord still knows the 40 bindings as its own
    (mirrord_acl_bindings), creates none twice;
  * kafka-mirrors --remove of all 40 (failover): the 40 DENYs go, their
    records are forgotten, none of it on the loop either, and alice writes;
  * a second mirror guards 5 more topics and is deleted while mirrord may
    not delete ACLs: once it may again, the sweep of deleted mirrors'
    bindings deletes the 5 DENYs and forgets their records, again without
    a write on the loop, and alice writes there; a restart finds none of
    them recorded.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
from test_tconfigs_kafka import metric  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
PFX = "aclb-%s-" % RUN
N = 40


def deny(t):
    return ("TOPIC", t, "LITERAL", "User:alice", "*", "WRITE", "DENY")


def loop_writes(d):
    return mt.metric_value(d, "mirrord_metadata_log_loop_writes_total")


def produce_as_alice(dst_c, topic):
    from confluent_kafka import Producer
    cfg = dst_c.client_config(user="alice")
    cfg.update({"message.timeout.ms": 15000, "retries": 0,
                "enable.idempotence": False})
    p = Producer(cfg)
    res = []
    p.produce(topic, value=b"by alice", partition=0,
              on_delivery=lambda err, msg: res.append(err))
    p.flush(30)
    h.check(len(res) == 1, "no delivery report (%r)" % res)
    return None if res[0] is None else res[0].name()


def main():
    src_c, dst_c = h.private_kafka(2, "acl")
    topics = [PFX + "%02d" % i for i in range(N)]
    for cl in (src_c, dst_c):
        for t in topics:
            cl.create_topic(t, partitions=1)
    dst_c.grant("User:bob", ["ALL"], topic="aclb-", pattern="prefixed")
    dst_c.grant("User:bob", ["DESCRIBE", "ALTER"], cluster=True)
    dst_c.grant("User:alice", ["WRITE"], topic=PFX, pattern="prefixed")

    d = mt.Mirrord(destination=dst_c.bootstrap,
                   destination_client=mt.sasl_plain("bob"))
    d.create("m1", mt.sasl_source(src_c.bootstrap))
    for t in topics[:5]:
        mt.produce_tagged(src_c.admin_bootstrap, t, 0, 10, "before")

    before = loop_writes(d)
    d.cli_ok("--add", "--mirror", "m1", "--topic", PFX + ".*")
    want = {deny(t) for t in topics}
    h.wait_for(lambda: want <= dst_c.acls(), 120,
               "a DENY WRITE for alice on each of the %d topics (missing %d)"
               % (N, len(want - dst_c.acls())))
    h.wait_for(lambda: metric(d, "mirrord_acl_bindings", mirror="m1",
                              result="read-only") == N, 30,
               "mirrord_acl_bindings: %d read-only" % N)
    mt.wait_caught_up(d, "m1", 120, "the %d topics" % N, count=N)
    used = loop_writes(d) - before
    print("%d DENY bindings recorded and created; %d metadata writes on the "
          "event loop meanwhile" % (N, used), flush=True)
    h.eq(used, 0, "metadata writes the loop waited for while %d bindings "
         "were recorded" % N)
    err = produce_as_alice(dst_c, topics[0])
    h.check(err == "TOPIC_AUTHORIZATION_FAILED",
            "alice's producer got %r on a mirrored topic" % err)
    for t in topics[:5]:
        h.check(mt.same_batches(src_c.admin_bootstrap, dst_c.admin_bootstrap,
                                t, [0]) is not False,
                "%s: source and destination differ" % t)

    # ---- a crash: the records are durable, nothing is created twice ----
    created = metric(d, "mirrord_acl_bindings_created_total", mirror="m1",
                     result="read-only")
    h.eq(created, N, "read-only bindings created")
    d.kill9()
    d.start()
    h.wait_for(lambda: metric(d, "mirrord_acl_bindings", mirror="m1",
                              result="read-only") == N, 60,
               "the %d bindings known again after kill -9" % N)
    mt.wait_caught_up(d, "m1", 120, "the topics after the restart", count=N)
    h.eq(metric(d, "mirrord_acl_bindings_created_total", mirror="m1",
                result="read-only"), 0, "bindings created again after the "
         "restart")
    h.check(want <= dst_c.acls(), "a DENY went missing after the restart")

    # ---- failover: the guard is lifted, forgotten in a few writes -------
    before = loop_writes(d)
    d.cli_ok("--remove", "--mirror", "m1", "--topic", PFX + ".*")
    h.wait_for(lambda: not (want & dst_c.acls()), 120,
               "the %d DENYs to be deleted (left %d)"
               % (N, len(want & dst_c.acls())))
    h.wait_for(lambda: metric(d, "mirrord_acl_bindings", mirror="m1",
                              result="read-only") == 0, 30,
               "mirrord_acl_bindings: none read-only")
    used = loop_writes(d) - before
    print("failover: %d DENY bindings deleted and forgotten; %d metadata "
          "writes on the loop meanwhile" % (N, used), flush=True)
    h.eq(used, 0, "metadata writes the loop waited for while %d bindings "
         "were forgotten" % N)
    h.check(produce_as_alice(dst_c, topics[0]) is None,
            "alice cannot write %s after failover" % topics[0])

    # ---- a deleted mirror's bindings: the sweep removes them -------------
    more = [PFX + "x%d" % i for i in range(5)]
    for cl in (src_c, dst_c):
        for t in more:
            cl.create_topic(t, partitions=1)
    d.create("m2", mt.sasl_source(src_c.bootstrap))
    before = loop_writes(d)
    d.cli_ok("--add", "--mirror", "m2", "--topic", PFX + "x.*")
    want2 = {deny(t) for t in more}
    h.wait_for(lambda: want2 <= dst_c.acls(), 120,
               "a DENY WRITE for alice on each of m2's 5 topics")
    h.wait_for(lambda: metric(d, "mirrord_acl_bindings", mirror="m2",
                              result="read-only") == 5, 30,
               "mirrord_acl_bindings of m2: 5 read-only")
    # Deleted while its DENYs cannot be removed (mirrord may not ALTER
    # the destination's ACLs): they outlive the mirror, with their records.
    dst_c.revoke("User:bob", ["ALTER"])
    d.cli_ok("--remove", "--mirror", "m2", "--topic", PFX + "x.*")
    h.wait_for(lambda: "refuses to delete DENY WRITE on TOPIC LITERAL %s "
               % more[0] in d.log(), 60,
               "the refused DeleteAcls of the DENY on %s logged" % more[0])
    d.cli_ok("--delete", "--mirror", "m2")
    h.check(want2 <= dst_c.acls(), "m2's DENYs went without ALTER")
    dst_c.grant("User:bob", ["ALTER"], cluster=True)
    h.wait_for(lambda: not (want2 & dst_c.acls()), 120,
               "the deleted mirror's 5 DENYs to be deleted (left %d)"
               % len(want2 & dst_c.acls()))
    h.wait_for(lambda: "(deleted): ACL binding" in d.log() and
               d.log().count("(deleted): ACL binding") >= 5, 30,
               "the 5 removals to be logged")
    used = loop_writes(d) - before
    print("deleted mirror: its 5 DENYs deleted and forgotten; %d metadata "
          "writes on the loop" % used, flush=True)
    h.eq(used, 0, "metadata writes the loop waited for with a deleted "
         "mirror's bindings")
    h.check(produce_as_alice(dst_c, more[0]) is None,
            "alice cannot write %s after its mirror was deleted" % more[0])
    d.stop()
    # Nothing of m2 is left in the log: a restart has no record to sweep.
    d.start()
    time.sleep(3)
    with open(d.proc.log_path, errors="replace") as f:
        last = f.read()
    h.check("(deleted)" not in last,
            "a deleted mirror's binding was still recorded after the "
            "restart:\n%s" % last[-2000:])
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
