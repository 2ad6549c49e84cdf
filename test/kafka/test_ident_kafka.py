#!/usr/bin/env python3
"""Topic identity on real Apache Kafka: topic ids
from Metadata v10+, recorded when first seen and compared on every answer.

  * a source topic deleted and recreated under the same name: its
    partitions go FAILED naming the recreation and both topic ids, stay
    FAILED (no automatic retry, with a short retry backoff configured), and
    none of the new topic's records reach the destination;
  * a destination topic deleted while MIRRORING: FAILED naming the deleted
    topic and its id once the deletion is confirmed, mirrord does not
    create it again, /readyz says so and mirrord_partition_state shows it;
  * a destination topic deleted and recreated: FAILED naming the
    recreation;
  * a topic of the same mirror that nobody touched keeps MIRRORING
    throughout (it is the witness that time passed for the checks above);
  * the failures survive a restart; then destination.bootstrap_servers is
    pointed at another cluster (the source one, which holds a topic of
    the same name): the witness goes FAILED naming both destination
    cluster ids, and nothing is written there.
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

try:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
UUID = r"([A-Za-z0-9_-]{22})"


def values(bootstrap, topic, end):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ident-" + RUN,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 60
    while len(out) < end:
        if time.monotonic() > deadline:
            h.fail("reading %s: %d of %d records" % (topic, len(out), end))
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            h.fail("reading %s: %s" % (topic, m.error()))
        out.append(m.value())
    c.close()
    return out


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    t_src = "id-src-" + RUN     # recreated on the source
    t_big = "id-big-" + RUN     # recreated on the source, more records
    t_del = "id-del-" + RUN     # deleted on the destination
    t_rec = "id-rec-" + RUN     # recreated on the destination
    t_ok = "id-ok-" + RUN       # left alone
    topics = [t_src, t_big, t_del, t_rec, t_ok]
    for t in topics:
        src.create_topic(t, partitions=1)
        dst.create_topic(t, partitions=1)
        mt.produce_values(SRC, t, [b"old-%d" % i for i in range(10)])

    d = mt.Mirrord(destination=DST, extra_yaml="pipeline:\n"
                   "  topic_deletion_confirm_ms: 8000\n")
    d.create("id", {"bootstrap.servers": SRC,
                    "mirror.metadata.refresh.interval.ms": "1000",
                    "mirror.fetch.wait.max.ms": "200",
                    "mirror.failed.retry.initial.backoff.ms": "100",
                    "mirror.failed.retry.max.backoff.ms": "300"})
    d.cli_ok("--add", "--mirror", "id", "--topic", ",".join(topics))
    for t in topics:
        h.wait_for(lambda: mt.end_offset(DST, t) == 10, 90, "%s mirrored" % t)

    def row(topic):
        r = [x for x in d.describe_json("id") if x["topic"] == topic]
        return r[0] if r else None

    def failed_with(topic, pattern):
        r = row(topic)
        if r is None or r["state"] != "FAILED":
            return None
        return re.search(pattern, r["errorMessage"] or "")

    sadm = AdminClient({"bootstrap.servers": SRC})
    dadm = AdminClient({"bootstrap.servers": DST})

    # 1. The source topic is deleted and recreated; the new one has fewer
    #    records first (mirrord's Fetch is then out of range), more later.
    mt.recreate_topic(src, sadm, t_src)
    mt.produce_values(SRC, t_src, [b"new-%d" % i for i in range(5)])
    m = h.wait_for(lambda: failed_with(
        t_src, r"source topic %s was deleted and recreated \(topic id %s -> %s\)"
        % (re.escape(t_src), UUID, UUID)), 60,
        "%s FAILED naming the source recreation" % t_src)
    h.check(m.group(1) != m.group(2), "old and new topic ids differ: %s"
            % m.group(0))
    mt.produce_values(SRC, t_src, [b"new-%d" % i for i in range(5, 30)])
    #    Another at once holding more records than the old one did.
    mt.recreate_topic(src, sadm, t_big)
    mt.produce_values(SRC, t_big, [b"new-%d" % i for i in range(30)])
    h.wait_for(lambda: failed_with(
        t_big, r"source topic %s was deleted and recreated \(topic id %s -> "
        r"%s\)" % (re.escape(t_big), UUID, UUID)), 60,
        "%s FAILED naming the source recreation" % t_big)
    print("ok: source topic recreated -> FAILED: %s" % row(t_src)["errorMessage"],
          flush=True)

    # 2. The destination topic is deleted while MIRRORING.
    list(dadm.delete_topics([t_del]).values())[0].result(30)
    mt.produce_values(SRC, t_del, [b"more-%d" % i for i in range(5)])
    m = h.wait_for(lambda: failed_with(
        t_del, r"destination topic %s was deleted \(topic id %s; missing from "
        r"(\d+) Metadata answers in a row over ([0-9.]+) s\)"
        % (re.escape(t_del), UUID)), 90,
        "%s FAILED naming the deleted destination topic" % t_del)
    h.check(int(m.group(2)) >= 3 and float(m.group(3)) >= 8.0,
            "the deletion was confirmed by >= 3 answers over >= 8 s: %s"
            % m.group(0))
    h.check(t_del not in dadm.list_topics(timeout=10).topics,
            "mirrord did not create the deleted destination topic again")
    code, body = mt.http_get(d.metrics_port, "/readyz")
    h.check(code == 503 and "topic and cluster identity" in body and
            any(t in body for t in (t_src, t_big, t_del)),
            "/readyz names the identity failure, got %d %r" % (code, body))
    metrics = d.metrics()
    h.check(re.search(r'mirrord_partition_state\{[^}]*topic="%s"[^}]*'
                      r'state="FAILED"[^}]*\} 1' % re.escape(t_del), metrics)
            is not None, "mirrord_partition_state shows %s FAILED" % t_del)
    print("ok: destination topic deleted -> FAILED: %s"
          % row(t_del)["errorMessage"], flush=True)

    # 3. The destination topic is deleted and recreated.
    mt.recreate_topic(dst, dadm, t_rec)
    mt.produce_values(SRC, t_rec, [b"more-%d" % i for i in range(5)])
    h.wait_for(lambda: failed_with(
        t_rec, r"destination topic %s was deleted and recreated \(topic id "
        r"%s -> %s\)" % (re.escape(t_rec), UUID, UUID)), 60,
        "%s FAILED naming the destination recreation" % t_rec)
    print("ok: destination topic recreated -> FAILED: %s"
          % row(t_rec)["errorMessage"], flush=True)

    # The witness copies on; meanwhile nothing turned back to MIRRORING and
    # the new source topic's 30 records were not appended.
    mt.produce_values(SRC, t_ok, [b"late-%d" % i for i in range(10)])
    h.wait_for(lambda: mt.end_offset(DST, t_ok) == 20, 60, "%s copying on" % t_ok)
    h.check(row(t_ok)["state"] == "MIRRORING", "%s MIRRORING" % t_ok)
    for t in (t_src, t_big, t_del, t_rec):
        h.check(row(t)["state"] == "FAILED", "%s still FAILED: %r" % (t, row(t)))
    for t in (t_src, t_big):
        h.check(mt.end_offset(DST, t) == 10, "destination %s still ends at 10, got %d"
                % (t, mt.end_offset(DST, t)))
        h.check(values(DST, t, 10) == [b"old-%d" % i for i in range(10)],
                "destination %s holds only the old topic's records" % t)
    print("ok: no automatic retry; the recreated source topic's records were "
          "not appended", flush=True)

    # After a restart (ids replayed from the metadata log) they stay FAILED.
    d.stop()
    d.start()
    h.wait_for(lambda: row(t_ok) is not None and
               row(t_ok)["state"] == "MIRRORING", 60, "restart")
    for t in (t_src, t_big, t_del, t_rec):
        h.check(row(t)["state"] == "FAILED", "%s FAILED after a restart: %r"
                % (t, row(t)))
    mt.produce_values(SRC, t_ok, [b"after-%d" % i for i in range(5)])
    h.wait_for(lambda: mt.end_offset(DST, t_ok) == 25, 60, "%s after the restart" % t_ok)
    h.check(mt.end_offset(DST, t_src) == 10, "destination %s still ends at 10 after the "
            "restart" % t_src)
    print("ok: identity failures survive a restart", flush=True)
    d.stop()

    end = mt.end_offset(SRC, t_ok)
    with open(d.config_path) as f:
        text = f.read()
    with open(d.config_path, "w") as f:
        f.write(text.replace('bootstrap_servers: "%s"' % DST,
                             'bootstrap_servers: "%s"' % SRC))
    d.start()
    m = h.wait_for(lambda: failed_with(
        t_ok, r"destination cluster id changed: topic %s was mirrored into "
        r"cluster (\S+), destination.bootstrap_servers now answer as cluster "
        r"(\S+)$" % re.escape(t_ok)), 60,
        "%s FAILED naming the other destination cluster" % t_ok)
    h.check(m.group(1) != m.group(2), "two cluster ids: %s" % m.group(0))
    h.check(mt.end_offset(SRC, t_ok) == end, "nothing written into the other cluster's "
            "%s (end %d, was %d)" % (t_ok, mt.end_offset(SRC, t_ok), end))
    print("ok: another destination cluster -> FAILED: %s"
          % row(t_ok)["errorMessage"], flush=True)
    d.stop()


main()
