#!/usr/bin/env python3
"""The replicated metadata log's start-up replay when its connection fails
midway (storage.backend: kafka, real Kafka 4.4).  The destination broker
advertises its client listener at a proxy, so every connection mirrord
makes to it goes through the proxy, which can cut one of them after a
given number of bytes of answers:

  * a mirror of 400 partitions reaches MIRRORING; mirrord stops cleanly
    (the log then ends in a snapshot of all of it);
  * mirrord starts again and the connection that reads the log is cut in
    the middle of a Fetch answer: mirrord says so, reads again on a new
    connection from the offset it had reached, and starts with every
    partition in the state it had (nothing replayed twice, nothing
    missing), then copies new records with the same offsets;
  * the same cut with the broker then unreachable: mirrord gives up after
    storage.kafka.timeout_ms and exits 1 with a message naming the topic,
    the offset it was reading and the cause.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
PARTS = 400
# Answers on one connection before the cut: past the start-up requests
# (ApiVersions, Metadata, DescribeConfigs, ListOffsets: a few hundred
# bytes each), inside the snapshot of 400 partitions.
CUT_AFTER = 8192


def produce(bootstrap, topic, n, tag):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"%s-%d" % (tag, i), partition=i % PARTS)
    if p.flush(60):
        h.fail("records not delivered to %s" % topic)


def ends(bootstrap, topic):
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(topic, p)[1] for p in range(PARTS)]
    finally:
        c.close()


def log_bytes(bootstrap, topic):
    """Bytes of the batches from the log start (the snapshot's trims the
    log before it) to the end: what a replay reads."""
    c = kraw.Cluster(bootstrap)
    try:
        start = c.offsets(topic, 0)[0]
        return sum(len(b["raw"]) for b in c.batches(topic, 0, start))
    finally:
        c.close()


def snapshot(d):
    """{(topic, partition): state} of every partition d mirrors."""
    return {(p["topic"], p["partition"]): p["state"]
            for p in d.describe_json()}


def main():
    src = h.real_kafka()[0]
    px_port = h.free_port()
    proxy = mt.Proxy(px_port, "127.0.0.1:1")
    dst, = h.private_kafka(1, "plaintext", extra_props={
        "advertised.listeners":
            "CLIENT://127.0.0.1:%d,ADMIN://127.0.0.1:{admin_port}" % px_port})
    proxy.target = dst.bootstrap
    via = "127.0.0.1:%d" % px_port
    mlog = "mlogk-replay-" + RUN
    topic = "replay-cut-" + RUN
    src.create_topic(topic, partitions=PARTS)
    produce(src.bootstrap, topic, 2 * PARTS, b"a")

    d = mt.Mirrord(destination=via, name="a", start=False,
                   storage_kafka={"secret_key_file": KEY, "topic": mlog,
                                  "timeout_ms": 15000})
    d.start()
    d.create("m", {"bootstrap.servers": src.bootstrap})
    d.cli_ok("--add", "--mirror", "m", "--topic", topic)
    want = ends(src.bootstrap, topic)
    h.wait_for(lambda: set(snapshot(d).values()) == {"MIRRORING"} and
               ends(via, topic) == want, 180,
               "all %d partitions MIRRORING with the source's ends" % PARTS)
    before = snapshot(d)
    h.check(len(before) == PARTS, "%d partitions described, not %d"
            % (len(before), PARTS))
    h.check(d.stop() == 0, "mirrord did not stop cleanly")
    size = log_bytes(via, mlog)
    print("metadata log %s: %d bytes" % (mlog, size))
    h.check(size > 4 * CUT_AFTER, "the metadata log holds %d bytes, too "
            "few for a cut inside its replay" % size)

    # ---- the log's connection cut midway through the replay -----------
    proxy.cut_after(CUT_AFTER)
    d.start()
    h.check(proxy.cuts == 1, "the proxy cut %d connections, not 1"
            % proxy.cuts)
    out = d.proc.output()
    h.check("metadata log: topic %s: reading offset" % mlog in out and
            "trying again" in out,
            "mirrord did not say the replay's read failed and was tried "
            "again:\n%s" % d.proc.tail())
    h.check("reading again from offset" in out,
            "mirrord did not say it read again:\n%s" % d.proc.tail())
    for line in out.splitlines():
        if "metadata log: topic %s: read" % mlog in line:
            print("mirrord: %s" % line.strip())
    after = snapshot(d)
    h.check(after == before, "the model after the cut replay differs: "
            "%d partitions, %d changed" % (len(after), sum(
                1 for k, v in before.items() if after.get(k) != v)))
    produce(src.bootstrap, topic, PARTS, b"b")
    want = ends(src.bootstrap, topic)
    h.wait_for(lambda: ends(via, topic) == want, 120,
               "new records copied after the cut replay")
    h.check(d.stop() == 0, "mirrord did not stop cleanly after the cut "
            "replay")
    print("replay cut midway: read again, %d partitions as before, new "
          "records copied with the same offsets" % PARTS)

    # ---- the same cut, and the broker then out of reach ---------------
    d2 = mt.Mirrord(destination=via, name="b", start=False,
                    storage_kafka={"secret_key_file": KEY, "topic": mlog,
                                   "timeout_ms": 4000})
    # Refused from the cut on (set by the proxy itself, so that no
    # connection made again in between reads the log).
    proxy.cut_after(CUT_AFTER, then_refuse=True)
    t0 = time.monotonic()
    d2.start(wait=False)
    h.wait_for(lambda: proxy.cuts == 2 or not d2.proc.alive(), 60,
               "the second cut")
    proxy.refuse = True
    rc = d2.proc.wait(60)
    took = time.monotonic() - t0
    out = d2.proc.output()
    h.check(rc == 1, "mirrord exited %s with its metadata log out of reach, "
            "not 1:\n%s" % (rc, d2.proc.tail()))
    h.check(proxy.cuts == 2, "the second start was not cut in its replay "
            "(%d cuts)" % proxy.cuts)
    h.check("metadata log: topic %s: reading offset" % mlog in out,
            "no word of the failed read:\n%s" % d2.proc.tail())
    fatal = [x for x in out.splitlines() if " error: " in x]
    h.check(fatal and "topic %s: reading offset" % mlog in fatal[-1] and
            "failed for 4000 ms (storage.kafka.timeout_ms)" in fatal[-1],
            "the error does not name the topic %s, the offset and the "
            "timeout:\n%s" % (mlog, d2.proc.tail()))
    print("broker out of reach after the cut: exit 1 after %.1f s: %s"
          % (took, fatal[-1].split(" error: ", 1)[1]))
    proxy.close()


h.run_main(main)
