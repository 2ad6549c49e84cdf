#!/usr/bin/env python3
"""A topic missing from one source Metadata answer is not deleted, on the
librdkafka mock.

The mock answers Metadata with the topic's error set by `topicerr`
(UNKNOWN_TOPIC_OR_PARTITION, what a deleted topic looks like; a transient
ACL change looks the same to mirrord).

  * the topic disappears from the source's answers for a moment (mirrord
    logs it missing, then back): the partitions stay MIRRORING and the
    records written afterwards are copied;
  * with pipeline.topic_deletion_confirm_ms shortened (SIGHUP reload) and
    the topic gone for good, the deletion is confirmed: the partitions go
    STOPPED and DescribeMirrors says why (the source topic was deleted,
    after how many answers), which an operator's RemoveTopics never says;
  * the mirror's bootstrap servers (a proxy here) lead to another cluster
    after a restart: its partitions go FAILED naming both cluster ids, and
    /readyz says so.
"""

import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

TOPIC = "absent-orders"


def produce(bootstrap, n, tag):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "acks": "all", "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(TOPIC, value=b"%s-%d" % (tag, i), partition=0)
    if p.flush(30):
        h.fail("producing to %s: not all delivered" % bootstrap)


def hwm(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "absence"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    finally:
        c.close()


def rows(d):
    return [r for r in d.describe_json("m") if r["topic"] == TOPIC]


mc = MockCluster(clusters=3, brokers=1)
DST = mc.bootstrap(1)
for c in range(3):
    mc.cmd("topic %d %s 1" % (c, TOPIC))   # the mock has no CreateTopics
# The mirror reaches its source through a proxy, retargeted at the end.
PROXY_PORT = h.free_port()
proxy = mt.Proxy(PROXY_PORT, mc.bootstrap(0))
SRC = "127.0.0.1:%d" % PROXY_PORT

EXTRA = "pipeline:\n  topic_deletion_confirm_ms: %d\n"
d = mt.Mirrord(destination=DST, extra_yaml=EXTRA % 3600000)
d.create("m", {"bootstrap.servers": SRC,
               "mirror.metadata.refresh.interval.ms": "1000",
               "mirror.fetch.wait.max.ms": "100"})
d.cli_ok("--add", "--mirror", "m", "--topic", TOPIC)
produce(SRC, 5, b"a")
h.wait_for(lambda: hwm(DST) == 5, 60, "the first 5 records on the destination")

# A transient absence: mirrord sees the topic missing, then back.
missing = "source topic %s is missing from a Metadata answer" % TOPIC
back = "source topic %s is back in the Metadata answers" % TOPIC
mc.cmd("topicerr 0 %s 3" % TOPIC)
h.wait_for(lambda: missing in d.log(), 30, "mirrord to see the topic missing")
mc.cmd("topicerr 0 %s 0" % TOPIC)
h.wait_for(lambda: back in d.log(), 30, "mirrord to see the topic back")
states = {r["state"] for r in rows(d)}
h.check(states == {"MIRRORING"},
        "after a transient absence the partition is MIRRORING, got %s" % states)
produce(SRC, 5, b"b")
h.wait_for(lambda: hwm(DST) == 10, 60,
           "records written after the transient absence on the destination")
h.check({r["state"] for r in rows(d)} == {"MIRRORING"},
        "still MIRRORING after copying on")
print("ok: a topic missing from Metadata answers for a moment keeps MIRRORING "
      "and copying", flush=True)

# Confirmed deletion: shorten the confirmation time and take the topic away.
with open(d.config_path) as f:
    text = f.read()
with open(d.config_path, "w") as f:
    f.write(text.replace(EXTRA % 3600000, EXTRA % 1000))
d.proc.signal(1)
h.wait_for(lambda: "SIGHUP: reloading" in d.log(), 30, "mirrord to reload")
mc.cmd("topicerr 0 %s 3" % TOPIC)


def stopped():
    r = rows(d)
    return r if r and all(x["state"] == "STOPPED" for x in r) else None


got = h.wait_for(stopped, 60, "the partition to stop once the deletion is "
                 "confirmed")
msg = got[0]["errorMessage"] or ""
m = re.search(r"the source topic %s was deleted on the source \S+: missing "
              r"from its Metadata since \S+Z \((\d+) answers in a row over "
              r"([0-9.]+) s\)" % TOPIC, msg)
h.check(m is not None, "describe says the source topic was deleted, got %r"
        % msg)
h.check(int(m.group(1)) >= 3 and float(m.group(2)) >= 1.0,
        "the deletion was confirmed by >= 3 answers over >= 1 s: %r" % msg)
print("ok: a topic missing for good is STOPPED with the reason %r" % msg,
      flush=True)

# Another source cluster behind the same bootstrap servers.
T2 = "absent-other"
for c in (0, 1, 2):
    mc.cmd("topic %d %s 1" % (c, T2))
d.cli_ok("--add", "--mirror", "m", "--topic", T2)
h.wait_for(lambda: any(r["topic"] == T2 and r["state"] == "MIRRORING"
                       for r in d.describe_json("m")), 60, "%s MIRRORING" % T2)
d.stop()
proxy.target = mc.bootstrap(2)
d.start()
want = (r"source cluster id changed: mirror m was recorded with source cluster "
        r"%s, its bootstrap servers now answer as cluster %s"
        % (re.escape(mc.cluster_id(0)), re.escape(mc.cluster_id(2))))


def cluster_failed():
    r = [x for x in d.describe_json("m") if x["topic"] == T2]
    return (r and r[0]["state"] == "FAILED" and
            re.search(want, r[0]["errorMessage"] or "") and r[0])


got = h.wait_for(cluster_failed, 60, "%s FAILED naming both cluster ids" % T2)
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
try:
    urllib.request.urlopen("http://127.0.0.1:%d/readyz" % d.metrics_port,
                           timeout=10)
    h.fail("/readyz is ready with a partition FAILED for another cluster")
except urllib.error.HTTPError as e:
    body = e.read().decode()
    h.check(e.code == 503 and "topic and cluster identity" in body and
            "source cluster id changed" in body, "/readyz: %d %r" % (e.code, body))
print("ok: another source cluster -> FAILED: %s" % got["errorMessage"],
      flush=True)
d.stop()
proxy.close()
