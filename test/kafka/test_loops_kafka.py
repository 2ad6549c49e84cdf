#!/usr/bin/env python3
"""Mirror loops refused, on real Apache Kafka (the shared pair of
test/kafka/realkafka.py, A and B; SKIPs with the reason when the tier
cannot run):

  * mirrord D1 mirrors topic T from A to B and marks it on B: committed
    metadata of T-0 in the group __mirrord_mirrors, "mirrord-mirror v1
    state=active source=<A's cluster id> mirror=ab";
  * mirrord D2 (destination A) is asked to mirror T back from B: refused
    by name and by pattern with INVALID_REQUEST naming the loop (topic,
    the mirror ab, cluster A = D2's destination, the option), nothing
    added; a topic of B that nobody mirrors is added alongside;
  * the same with mirror.allow.loops=true on the mirror: added;
  * failback: once D1 stopped T (--remove), the mark says stopped and D2
    adds T (the loop is gone);
  * the marker group is never synced as a consumer group.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_groupsync_kafka as gk  # noqa: E402  (raw_fetch; SKIPs without confluent-kafka)
from confluent_kafka import Producer  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
MARKS = "__mirrord_mirrors"


def marks(bootstrap):
    """The marks committed on a cluster, {(topic, partition): metadata};
    {} while its group coordinator is not there yet."""
    try:
        return {k: v[2] for k, v in gk.raw_fetch(bootstrap, MARKS).items()}
    except AssertionError as e:
        print("marks on %s: %s" % (bootstrap, e), flush=True)
        return {}


def cluster_id(d, mirror):
    for l in d.cli_ok("--list").stdout.splitlines()[1:]:
        c = l.split()
        if c[0] == mirror:
            return c[2]
    return None


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    A, B = h.real_kafka(2)
    topic, plain = "loop-" + RUN, "plain-" + RUN
    A.create_topic(topic, partitions=2)
    B.create_topic(plain, partitions=1)
    p = Producer({"bootstrap.servers": A.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    h.check(p.flush(30) == 0, "test setup: records produced to A")

    d1 = mt.Mirrord(destination=B.bootstrap, name="d1")
    d1.create("ab", {"bootstrap.servers": A.bootstrap,
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.groups.sync.interval.ms": "300"})
    d1.cli_ok("--add", "--mirror", "ab", "--topic", topic)
    h.wait_for(lambda: all(p["state"] == "MIRRORING"
                           for p in d1.describe_json("ab")) and
               len(d1.describe_json("ab")) == 2, 120, "%s mirrored" % topic)
    a_id = h.wait_for(lambda: cluster_id(d1, "ab") not in (None, "-", "")
                      and cluster_id(d1, "ab"), 60, "A's cluster id")
    want = "mirrord-mirror v1 state=active source=%s mirror=ab" % a_id
    h.wait_for(lambda: marks(B.bootstrap).get((topic, 0)) == want, 60,
               "the mark of %s on B (now %r)" % (topic, marks(B.bootstrap)))

    d2 = mt.Mirrord(destination=A.bootstrap, name="d2")
    d2.create("ba", {"bootstrap.servers": B.bootstrap})
    # Named: refused, naming the loop; the plain topic is added.
    r = d2.cli("--add", "--mirror", "ba", "--topic", topic + "," + plain)
    print(r.stdout, r.stderr, flush=True)
    eq(r.returncode, 1, "exit status of the refused add")
    h.check(("topic %s:" % topic) in r.stderr and "INVALID_REQUEST" in
            r.stderr and ("mirror loop: topic %s on the source cluster %s is "
                          "itself mirrored there by mirror ab from cluster %s, "
                          "which is this mirrord's destination"
                          % (topic, B.bootstrap, a_id)) in r.stderr and
            "mirror.allow.loops=true" in r.stderr,
            "the refusal names the loop: %r" % r.stderr)
    eq(r.stdout, "Added 1 topic(s) in mirror ba: [%s]\n" % plain,
       "the plain topic added")
    eq(sorted({p["topic"] for p in d2.describe_json("ba")}), [plain],
       "only the plain topic in mirror ba")
    # By pattern (its own mirror): refused now, and not discovered later.
    d2.create("ba-pat", {"bootstrap.servers": B.bootstrap,
                         "mirror.metadata.refresh.interval.ms": "1000"})
    r = d2.cli("--add", "--mirror", "ba-pat", "--topic", "loop-%s.*" % RUN)
    print(r.stdout, r.stderr, flush=True)
    h.check(r.returncode == 1 and "mirror loop: topic %s" % topic in r.stderr,
            "a pattern matching the looped topic: %r" % r.stderr)
    h.wait_for(lambda: ("mirror ba-pat: topic %s on the source is the "
                        "destination of mirror ab there (from cluster %s): "
                        "not mirrored back" % (topic, a_id)) in d2.log(), 60,
               "discovery to refuse %s" % topic)
    eq(d2.describe_json("ba-pat"), [], "nothing in mirror ba-pat")
    eq(sorted({p["topic"] for p in d2.describe_json("ba")}), [plain],
       "still only the plain topic in mirror ba")
    d2.cli_ok("--delete", "--mirror", "ba-pat")

    # mirror.allow.loops=true: added (and removed again at once).
    d2.create("ba-loops", {"bootstrap.servers": B.bootstrap,
                           "mirror.allow.loops": "true"})
    d2.cli_ok("--add", "--mirror", "ba-loops", "--topic", topic)
    d2.cli_ok("--remove", "--mirror", "ba-loops", "--topic", topic,
              "--wait", "60")

    # Failback: D1 stops T; the mark turns stopped; D2 may add it.
    d1.cli_ok("--remove", "--mirror", "ab", "--topic", topic, "--wait", "60")
    stopped = "mirrord-mirror v1 state=stopped source=%s mirror=ab last=4 " \
        "epoch=" % a_id
    h.wait_for(lambda: marks(B.bootstrap).get((topic, 0), "").startswith(
        stopped), 60,
               "the mark of %s stopped (now %r)" % (topic, marks(B.bootstrap)))
    r = d2.cli_ok("--add", "--mirror", "ba", "--topic", topic)
    eq(r.stdout, "Added 1 topic(s) in mirror ba: [%s]\n" % topic,
       "added once the loop is gone")
    d2.cli_ok("--remove", "--mirror", "ba", "--topic", topic, "--wait", "60")

    # The marker group is never synced: not on A.
    on_a = marks(A.bootstrap)
    h.check("mirror=ab" not in on_a.get((topic, 0), ""),
            "B's marks were copied to A as a group: %r" % on_a)
    d1.stop()
    d2.stop()
    print("PASS: mirror loops refused, allowed by option, gone at failback",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
