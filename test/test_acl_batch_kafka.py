#!/usr/bin/env python3
"""The read-only guard of many topics records its ACL bindings in one
metadata write a round, not one each (issue 12: every write-ahead record
of a binding was a synchronous write the event loop waited for), on real
Apache Kafka 4.4.0 with an authorizer on both clusters:

  * on the destination alice may write every topic of a prefix (one
    PREFIXED ALLOW WRITE, made by hand);
  * a mirror takes 40 topics of that prefix by one pattern: mirrord puts a
    DENY WRITE for alice on each of the 40 destination topics, each
    recorded in the metadata log before it is created;
  * the metadata writes the loop waited for meanwhile
    (mirrord_metadata_log_loop_writes_total) are a handful, not 40, and
    alice's producer is refused on a guarded topic while the records
    produced on the source are mirrored (offsets and bytes equal);
  * after kill -9 mirrord still knows the 40 bindings as its own
    (mirrord_acl_bindings), creates none twice;
  * kafka-mirrors --remove of all 40 (failover): the 40 DENYs go, their
    records are forgotten in a handful of writes too, and alice writes.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
    rk = h.realkafka()
    topics = [PFX + "%02d" % i for i in range(N)]
    for cl in (src_c, dst_c):
        for t in topics:
            cl.create_topic(t, partitions=1)
    dst_c.grant("User:bob", ["ALL"], topic="aclb-", pattern="prefixed")
    dst_c.grant("User:bob", ["DESCRIBE", "ALTER"], cluster=True)
    dst_c.grant("User:alice", ["WRITE"], topic=PFX, pattern="prefixed")

    d = mt.Mirrord(destination=dst_c.bootstrap, start=False)
    with open(d.config_path) as f:
        text = f.read()
    text = text.replace("destination:\n", "destination:\n"
                        "  client:\n"
                        "    security.protocol: SASL_PLAINTEXT\n"
                        "    sasl.mechanism: PLAIN\n"
                        "    sasl.username: bob\n"
                        "    sasl.password: %s\n" % rk.USERS["bob"], 1)
    with open(d.config_path, "w") as f:
        f.write(text)
    d.start()
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                    "sasl.password": rk.USERS["admin"],
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000"})
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
    h.check(used <= 6, "%d metadata writes on the loop for %d bindings: "
            "their records were not written together" % (used, N))
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
    h.check(used <= 6, "%d metadata writes on the loop to forget %d "
            "bindings" % (used, N))
    h.check(produce_as_alice(dst_c, topics[0]) is None,
            "alice cannot write %s after failover" % topics[0])
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
