#!/usr/bin/env python3
"""The shared pair of real Kafka clusters: two independent clusters that
answer, create plain and compacted topics, and carry records a real client
(kcat, librdkafka) produces and consumes."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

if not shutil.which("kcat"):
    h.skip("real Kafka tier: kcat not found (install kcat)")
a, b = h.real_kafka(2)
rk = h.realkafka()
tag = "clusters-%d" % os.getpid()  # the pair is shared: keep names apart


def consume(c, topic, n):
    """All n records of topic as (partition, offset, key, value)."""
    def attempt():
        p = h.kcat(["-C", "-t", topic, "-e", "-q", "-f", "%p %o %k %s\\n"]
                   + c.kcat_args(), timeout=60)
        if p.returncode != 0:
            raise AssertionError(p.stderr)
        rows = [tuple(line.split(" ", 3)) for line in p.stdout.splitlines()]
        return rows if len(rows) == n else None
    rows = h.wait_for(attempt, 60, "%d records in %s" % (n, topic))
    return [(int(p), int(o), k, v) for p, o, k, v in rows]


def produce(c, topic, lines):
    p = h.kcat(["-P", "-t", topic, "-K", ":"] + c.kcat_args(),
               input="".join("%s:%s\n" % kv for kv in lines))
    h.check(p.returncode == 0, "kcat produce to %s: %s" % (topic, p.stderr))


# Two clusters, each answering on its own addresses with its own identity.
h.check(a.bootstrap != b.bootstrap, "both clusters on %s" % a.bootstrap)
h.check(a.cluster_id != b.cluster_id, "one cluster id for both clusters")
for c in (a, b):
    host, port = c.bootstrap.split(":")
    h.check(host == "127.0.0.1", "bootstrap %s is not on 127.0.0.1" % c.bootstrap)
    versions = rk.api_versions(host, int(port))
    h.check(0 in versions and 1 in versions,
            "%s: ApiVersions lacks Produce or Fetch: %r" % (c.name, versions))
    p = h.kcat(["-L", "-J"] + c.kcat_args())
    h.check(p.returncode == 0, "kcat -L on %s: %s" % (c.bootstrap, p.stderr))
    brokers = json.loads(p.stdout)["brokers"]
    h.check(brokers == [{"id": 1, "name": c.bootstrap}],
            "metadata of %s advertises %r" % (c.bootstrap, brokers))

# A plain topic with three partitions: every record comes back, keys stay
# on one partition, offsets count from 0 without gaps.
plain = tag + "-plain"
a.create_topic(plain, partitions=3)
sent = [("key%d" % (i % 7), "value-%d" % i) for i in range(60)]
produce(a, plain, sent)
got = consume(a, plain, len(sent))
h.check(sorted((k, v) for _, _, k, v in got) == sorted(sent),
        "records differ: sent %r got %r" % (sent[:5], got[:5]))
part_of = {}
for p, _, k, _ in got:
    h.check(part_of.setdefault(k, p) == p, "key %s on two partitions" % k)
for p in range(3):
    offs = sorted(o for q, o, _, _ in got if q == p)
    h.check(offs == list(range(len(offs))),
            "partition %d offsets not 0..n-1: %r" % (p, offs))
h.check(len(set(part_of.values())) > 1, "all keys landed on one partition")
# Per key, records come back in the order they were sent.
for k in part_of:
    mine = [v for _, o, kk, v in sorted(got, key=lambda r: r[1]) if kk == k]
    h.check(mine == [v for kk, v in sent if kk == k], "order broken for %s" % k)

# The same topic name on the other cluster is a different log.
a_meta = a.metadata([plain])["topics"][plain]
b_meta = b.metadata([plain])["topics"][plain]
h.check(a_meta["error"] == 0 and len(a_meta["partitions"]) == 3,
        "cluster a lost %s: %r" % (plain, a_meta))
h.check(b_meta["error"] == 3,
        "cluster b has a's topic %s: %r" % (plain, b_meta))
b.create_topic(plain, partitions=1)
produce(b, plain, [("only", "on-b")])
got_b = consume(b, plain, 1)
h.check(got_b == [(0, 0, "only", "on-b")], "cluster b has %r" % got_b)
h.check(len(consume(a, plain, len(sent))) == len(sent),
        "cluster a changed after producing to b")

# A compacted topic takes keyed records like any other.
compacted = tag + "-compacted"
a.create_compacted_topic(compacted)
produce(a, compacted, [("k1", "v1"), ("k2", "v2"), ("k1", "v3")])
got = consume(a, compacted, 3)
h.check([(k, v) for _, _, k, v in got] == [("k1", "v1"), ("k2", "v2"), ("k1", "v3")],
        "compacted topic returned %r" % got)

# Creating an existing topic is refused with Kafka's own error.
try:
    a.create_topic(plain, partitions=3)
    h.fail("creating %s twice succeeded" % plain)
except rk.KafkaError as e:
    h.check("TOPIC_ALREADY_EXISTS" in str(e), "unexpected error: %s" % e)

print("PASS: two real Kafka %s clusters at %s and %s"
      % (rk.KAFKA_VERSION, a.bootstrap, b.bootstrap))
