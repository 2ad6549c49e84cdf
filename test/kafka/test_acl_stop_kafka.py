#!/usr/bin/env python3
"""ACLs of a failed-over topic are the new primary's: the old source coming
back never changes them (real Apache Kafka 4.4 with an authorizer on both
clusters, a private pair: A the source, stopped by the test, B the
destination).

mirrord reads A as the super user admin and writes B as bob; mirror m1
(mirror.acls.sync=true, ACL rounds every second) mirrors ORD and AUD, both
under the prefix P; mirror probe mirrors PRB (another prefix), whose
bindings show that ACL rounds read A again.  On A: alice may READ ORD
(LITERAL), WRITE everything under P (PREFIXED) and READ group G; all three
are copied to B, and alice gets a DENY WRITE on ORD and AUD there (the
read-only guard).

  1. mirrord SIGSTOPped; on A: alice's PREFIXED WRITE on P revoked, carol
     granted DESCRIBE on ORD, READ on P (PREFIXED) and READ on G; A killed
     (-9); mirrord resumed; `kafka-mirrors --remove --wait` of ORD while A
     is down.  Within 10 s the DENY WRITE on ORD is gone from B (AUD's
     stays) and a real producer as alice writes ORD on B: the failover
     does not wait for the old source.  A started again: once carol's READ
     on G reaches B (m1 still mirrors AUD, so its groups' bindings are
     synced: m1's rounds read A again), a binding made on A for PRB
     reaches B, and 3 s (3 rounds) more, B still has
     alice's PREFIXED WRITE (deleting it would cut alice off the topic she
     now writes), has neither of carol's topic bindings (carol's PREFIXED
     READ on P would reach ORD), and alice still writes ORD.
  2. AUD removed too (A up): m1 mirrors nothing any more.  On A: carol's
     READ on G revoked, dave granted READ on G.  After a probe binding and
     3 rounds: carol's binding on G is still on B, dave's is not.
     (Every wait for the old source's effects is a probe made on A reaching
     B, m1 having read A's metadata, then 3 of its ACL intervals.)
  3. mirrord restarted while A is down; A back, alice's READ on ORD revoked
     and dave granted READ on ORD and AUD: after a probe and 3 rounds B's
     bindings are those it had before.
"""

import os
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
P = "acs-%s-" % RUN
ORD = P + "orders"
AUD = P + "audit"
PRB = "acp-%s-probe" % RUN
G = "acs-%s-app" % RUN
QUIET_S = 3.0
probes = [0]


def lit(kind, name, principal, op, perm="ALLOW", pat="LITERAL"):
    return (kind, name, pat, principal, "*", op, perm)


def ours(acls):
    """The bindings of this test's resources."""
    return {b for b in acls if b[1].startswith(("acs-%s" % RUN, "acp-%s" % RUN))}


def produce_as_alice(dst_c, topic, value):
    """One record produced by a real client as alice on B: the error name
    or None when it was written."""
    try:
        from confluent_kafka import Producer
    except ImportError:
        h.skip("python3-confluent-kafka is not installed")
    cfg = dst_c.client_config(user="alice")
    cfg.update({"message.timeout.ms": 15000, "retries": 0,
                "enable.idempotence": False})
    p = Producer(cfg)
    res = []
    p.produce(topic, value=value, partition=0,
              on_delivery=lambda err, msg: res.append(err))
    p.flush(30)
    h.check(len(res) == 1, "no delivery report for the record (%r)" % res)
    return None if res[0] is None else res[0].name()


def rounds_reach_a(d, src_c, dst_c, since):
    """A binding made on A for PRB now reaches B (mirror probe's ACL rounds
    read A again) and m1 has read A's metadata since `since` (its rounds
    ask A again).  Then QUIET_S (3 rounds) more."""
    probes[0] += 1
    b = "User:probe%d" % probes[0]
    src_c.grant(b, ["READ"], topic=PRB)
    h.wait_for(lambda: lit("TOPIC", PRB, b, "READ") in dst_c.acls(), 90,
               "the probe binding of %s on B (ACL rounds read A again)" % b)

    def answered():
        v = mt.metric_series(d.metrics(),
                             "mirrord_mirror_source_seconds_since_success",
                             mirror="m1", request="Metadata")
        return v is not None and 0 <= v < time.monotonic() - since
    h.wait_for(answered, 60, "m1 to read A's metadata again")
    time.sleep(QUIET_S)


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src_c, dst_c = h.private_kafka(2, "acl")
    for cl in (src_c, dst_c):
        for t in (ORD, AUD, PRB):
            cl.create_topic(t, partitions=1)
    dst_c.grant("User:bob", ["ALL"], topic="acs-", pattern="prefixed")
    dst_c.grant("User:bob", ["ALL"], topic="acp-", pattern="prefixed")
    dst_c.grant("User:bob", ["DESCRIBE", "ALTER"], cluster=True)
    src_c.grant("User:alice", ["READ"], topic=ORD)
    src_c.grant("User:alice", ["WRITE"], topic=P, pattern="prefixed")
    src_c.grant("User:alice", ["READ"], group=G)
    mt.produce_tagged(src_c.admin_bootstrap, ORD, 0, 50, "ord")

    d = mt.Mirrord(destination=dst_c.bootstrap,
                   destination_client=mt.sasl_plain("bob"),
                   extra_yaml=mt.STALL_YAML)
    for m, inc in (("m1", "acs-%s-.*" % RUN), ("probe", "acp-%s-.*" % RUN)):
        d.create(m, mt.sasl_source(src_c.bootstrap, **{
            "mirror.acls.sync": "true",
            "mirror.groups.include": inc}))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "%s,%s" % (ORD, AUD))
    d.cli_ok("--add", "--mirror", "probe", "--topic", PRB)
    mt.wait_caught_up(d, "m1", 120, "m1 caught up", count=2)
    mt.wait_caught_up(d, "probe", 120, "probe caught up", count=1)
    alice_read = lit("TOPIC", ORD, "User:alice", "READ")
    alice_write = lit("TOPIC", P, "User:alice", "WRITE", pat="PREFIXED")
    alice_group = lit("GROUP", G, "User:alice", "READ")
    deny_ord = lit("TOPIC", ORD, "User:alice", "WRITE", perm="DENY")
    deny_aud = lit("TOPIC", AUD, "User:alice", "WRITE", perm="DENY")
    start = {alice_read, alice_write, alice_group, deny_ord, deny_aud}
    h.wait_for(lambda: start <= dst_c.acls(), 60, "the source's bindings and "
               "the guard's DENYs on B (missing %r)" % (start - dst_c.acls()))
    eq(produce_as_alice(dst_c, ORD, b"while mirrored"),
       "TOPIC_AUTHORIZATION_FAILED", "alice's producer on B while %s is "
       "mirrored" % ORD)

    # ---- 1. ORD failed over while A is down.
    carol_desc = lit("TOPIC", ORD, "User:carol", "DESCRIBE")
    carol_pref = lit("TOPIC", P, "User:carol", "READ", pat="PREFIXED")
    carol_group = lit("GROUP", G, "User:carol", "READ")
    d.proc.signal(signal.SIGSTOP)
    try:
        src_c.revoke("User:alice", ["WRITE"], topic=P, pattern="prefixed")
        src_c.grant("User:carol", ["DESCRIBE"], topic=ORD)
        src_c.grant("User:carol", ["READ"], topic=P, pattern="prefixed")
        src_c.grant("User:carol", ["READ"], group=G)
        src_c.stop(kill=True)
    finally:
        d.proc.signal(signal.SIGCONT)
    r = d.cli("--remove", "--mirror", "m1", "--topic", ORD, "--wait", "60")
    print(r.stdout, r.stderr, flush=True)
    eq(r.returncode, 6, "kafka-mirrors --remove --wait of %s with the source "
       "down (stderr %s)" % (ORD, r.stderr))
    t0 = time.monotonic()
    h.wait_for(lambda: deny_ord not in dst_c.acls(), 10, "the DENY WRITE on "
               "%s lifted while the source is down (B's bindings: %r)"
               % (ORD, ours(dst_c.acls())))
    print("  the guard on %s lifted %.1f s after the stop, the source down"
          % (ORD, time.monotonic() - t0), flush=True)
    h.check(deny_aud in dst_c.acls(), "the DENY on %s (still mirrored) went"
            % AUD)
    eq(produce_as_alice(dst_c, ORD, b"after failover"), None,
       "alice's producer on B after the failover of %s" % ORD)
    before = ours(dst_c.acls())
    back = time.monotonic()
    src_c.start_again()
    # m1 still mirrors AUD: carol's READ on G is synced, by the first of
    # m1's rounds to read A again; the same round would copy or delete
    # what concerns ORD.
    h.wait_for(lambda: carol_group in dst_c.acls(), 90, "carol's READ on "
               "group %s synced to B once A is back (m1 still mirrors %s)"
               % (G, AUD))
    rounds_reach_a(d, src_c, dst_c, back)
    got = ours(dst_c.acls())
    h.check(alice_write in got, "alice's PREFIXED WRITE on %s went from B "
            "when the old source came back (B's bindings %r)" % (P, got))
    for b in (carol_desc, carol_pref):
        h.check(b not in got, "%r reached B from the old source after the "
                "failover of %s" % (b, ORD))
    eq(produce_as_alice(dst_c, ORD, b"after the old source came back"), None,
       "alice's producer on B once the old source is back")
    eq(got - before - {carol_group}, {lit("TOPIC", PRB, "User:probe1",
                                          "READ")},
       "bindings added on B once the old source was back")
    print("PASS 1: the guard lifted without the source; nothing of the old "
          "source reached the stopped topic", flush=True)

    # ---- 2. Nothing mirrored any more: the groups' bindings stay B's.
    d.cli_ok("--remove", "--mirror", "m1", "--topic", AUD, "--wait", "60")
    h.wait_for(lambda: deny_aud not in dst_c.acls(), 10,
               "the DENY WRITE on %s lifted" % AUD)
    dave_group = lit("GROUP", G, "User:dave", "READ")
    src_c.revoke("User:carol", ["READ"], group=G)
    src_c.grant("User:dave", ["READ"], group=G)
    before = ours(dst_c.acls())
    rounds_reach_a(d, src_c, dst_c, time.monotonic())
    got = ours(dst_c.acls())
    h.check(carol_group in got, "carol's READ on group %s went from B after "
            "every topic of m1 stopped" % G)
    h.check(dave_group not in got, "dave's READ on group %s reached B after "
            "every topic of m1 stopped" % G)
    eq(got - before, {lit("TOPIC", PRB, "User:probe2", "READ")},
       "bindings added on B")
    print("PASS 2: a mirror with nothing left to mirror syncs no group "
          "binding", flush=True)

    # ---- 3. mirrord restarted while A is down; A back with changes.
    src_c.stop(kill=True)
    d.stop()
    d.start()
    back = time.monotonic()
    src_c.start_again()
    src_c.revoke("User:alice", ["READ"], topic=ORD)
    src_c.grant("User:dave", ["READ"], topic=ORD)
    src_c.grant("User:dave", ["READ"], topic=AUD)
    before = ours(dst_c.acls())
    rounds_reach_a(d, src_c, dst_c, back)
    got = ours(dst_c.acls())
    eq(got - before, {lit("TOPIC", PRB, "User:probe3", "READ")},
       "bindings added on B after a restart of mirrord")
    eq(before - got, set(), "bindings deleted from B after a restart of "
       "mirrord")
    print("PASS 3: after a restart, the stopped topics' bindings stay B's",
          flush=True)
    eq(d.stop(), 0, "mirrord exit status")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
