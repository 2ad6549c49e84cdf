#!/usr/bin/env python3
"""A Produce cannot land in a recreated destination topic (a fault
found by the torture test's dst-recreate class): on real Apache Kafka
mirrord names the destination topic by its recorded id in Produce (v13,
KIP-516), so a Produce sent after the topic was deleted and created again
under the same name is refused (UNKNOWN_TOPIC_ID) instead of appended at
offset 0 of the new topic.

mirrord copies 10 records of a topic and is then held by SIGSTOP; the
source gets 5 more records and the destination topic is deleted and
created again.  After SIGCONT mirrord fetches the 5 records and sends
them before its next destination Metadata answer (it refreshes every 30 s
unless something asks sooner): by name they would land at offsets 0..4 of
the new topic.  The test asserts the Produce was refused for the old topic
id (mirrord's log says so: the test exercises the race, not the Metadata
check), the partition is FAILED naming the recreation, and the new
destination topic is empty; a witness topic of the same mirror copies on.
"""

import os
import re
import signal
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    import confluent_kafka  # noqa: F401  (mt.produce_values)
    from confluent_kafka.admin import AdminClient
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    t_rec = "idp-rec-" + RUN
    t_ok = "idp-ok-" + RUN
    for t in (t_rec, t_ok):
        src.create_topic(t, partitions=1)
        dst.create_topic(t, partitions=1)
        mt.produce_values(SRC, t, [b"old-%d" % i for i in range(10)])

    d = mt.Mirrord(destination=DST)
    d.create("idp", {"bootstrap.servers": SRC,
                     "mirror.fetch.wait.max.ms": "200"})
    d.cli_ok("--add", "--mirror", "idp", "--topic", "%s,%s" % (t_rec, t_ok))
    for t in (t_rec, t_ok):
        h.wait_for(lambda: mt.end_offset(DST, t) == 10, 90, "%s mirrored" % t)

    def row(topic):
        r = [x for x in d.describe_json("idp") if x["topic"] == topic]
        return r[0] if r else None

    dadm = AdminClient({"bootstrap.servers": DST})
    d.proc.signal(signal.SIGSTOP)
    try:
        mt.produce_values(SRC, t_rec, [b"new-%d" % i for i in range(5)])
        mt.recreate_topic(dst, dadm, t_rec)
    finally:
        d.proc.signal(signal.SIGCONT)

    m = h.wait_for(lambda: (lambda r: r is not None and r["state"] == "FAILED"
                            and re.search(
                                r"^destination topic %s was deleted and "
                                r"recreated \(topic id ([A-Za-z0-9_-]{22}) -> "
                                r"([A-Za-z0-9_-]{22})\)" % re.escape(t_rec),
                                r["errorMessage"] or ""))(row(t_rec)), 60,
                   "%s FAILED naming the destination recreation" % t_rec)
    print("ok: FAILED: %s" % row(t_rec)["errorMessage"], flush=True)
    # Time passes for anything still in flight: the witness copies on.
    mt.produce_values(SRC, t_ok, [b"late-%d" % i for i in range(10)])
    h.wait_for(lambda: mt.end_offset(DST, t_ok) == 20, 60, "%s copying on" % t_ok)
    h.check(row(t_ok)["state"] == "MIRRORING", "%s MIRRORING" % t_ok)
    h.check(mt.end_offset(DST, t_rec) == 0, "nothing written into the recreated "
            "destination topic %s (it ends at %d)" % (t_rec, mt.end_offset(DST, t_rec)))
    h.check(row(t_rec)["state"] == "FAILED", "%s still FAILED" % t_rec)
    print("ok: the recreated destination topic is empty", flush=True)
    # The race was run: a Produce went out for the old topic id and the
    # broker refused it (an old mirrord wrote offsets 0..4 of the new topic
    # here and failed only on the answer's offset).  The 5 records may
    # reach the source in one batch or several (a loaded machine): each is
    # copied as it is, so the first refused Produce starts at offset 10
    # and ends within 14.
    h.check(re.search(r"Produce for source offsets 10\.\.1[0-4] answered "
                      r"UNKNOWN_TOPIC_ID for destination topic %s id %s"
                      % (re.escape(t_rec), m.group(1)), d.log()) is not None,
            "mirrord's log shows no Produce of offsets 10..14 refused for "
            "the old topic id %s" % m.group(1))
    d.stop()


main()
