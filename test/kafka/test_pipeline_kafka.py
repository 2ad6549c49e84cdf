#!/usr/bin/env python3
"""Pipelined produce on real Apache Kafka 4.4 (two private single-node
clusters of test/kafka/realkafka.py; SKIPs with the reason when it cannot
run): up to pipeline.max_inflight_batches_per_partition (default 5) batches
of one partition in flight, with the same exactly-once outcome.

  * first, without mirrord: Kafka 4.4 refuses two batches of one partition
    in one Produce (INVALID_RECORD), which is why each request carries one
    batch per partition and the pipeline is made of successive requests;

  * a small-batch source (thousands of 1 KB batches, one record each) is
    mirrored byte- and offset-identical: every destination batch has the
    source batch's offsets, record count and record bytes; the peak of
    batches of one partition in flight (mirrord_produce_partition_inflight
    _batches_peak) is more than 1, so the copy really was pipelined;
  * faults while several batches are in flight (the destination broker
    held by SIGSTOP while a burst arrives, mirrord_produce_inflight_batches
    seen at 2 or more before each fault):
      - the destination broker SIGSTOPped past pipeline.request_timeout_ms,
        then SIGCONT: the requests time out one by one (each settles its
        own batches), the connection stays open, and once the broker
        resumes it appends what it reads and its late answers are
        discarded;
      - mirrord killed (-9) with batches in flight, the broker resumed
        while mirrord is down, mirrord started again;
      - the destination broker killed (-9) with batches in flight and
        started again;
    and a plain restart of the destination broker under load.  After each,
    the partitions come back to MIRRORING with lag 0 at the source's end,
    and the destination equals the source batch for batch at the same
    offsets: nothing lost, nothing duplicated.
"""

import os
import signal
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import krawwrite  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

MIRROR = "pp"
SMALL, FAULTS = "small", "faulty"
NPART = 2
TIMEOUT_MS = 3000


def log(msg):
    print("pipeline: %s" % msg, flush=True)


def small_producer(bootstrap):
    # One record per batch: a source written in small batches.
    return Producer({"bootstrap.servers": bootstrap, "acks": "all",
                     "linger.ms": 0, "batch.num.messages": 1,
                     "enable.idempotence": True,
                     "compression.type": "none"})


def write(bootstrap, topic, n, tag):
    p = small_producer(bootstrap)
    errors = []

    def done(err, _m):
        if err is not None:
            errors.append(err)

    for i in range(n):
        value = (b"%s-%06d-" % (tag.encode(), i)) * 64
        p.produce(topic, value=value[:1000], key=b"k%d" % i,
                  partition=i % NPART, on_delivery=done)
        if i % 500 == 0:
            p.poll(0)
    left = p.flush(120)
    if left or errors:
        h.fail("writing %s: %d not delivered, errors %r" % (topic, left, errors[:3]))


def gauge(d, name):
    for line in d.metrics().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.split()[-1])
    h.fail("metric %s missing" % name)


def settled(d, src, topics):
    c = kraw.Cluster(src)
    try:
        rows = d.describe_json(MIRROR)
        if len(rows) != len(topics) * NPART:
            return False
        for x in rows:
            end = c.offsets(x["topic"], x["partition"])[1]
            if x["state"] != "MIRRORING" or x["lag"] != 0 or x["sourceOffset"] != end:
                return False
        return True
    finally:
        c.close()


def same_batches(src, dst, topic, what):
    """The destination holds the source's batches at the same offsets with
    the same records (byte for byte after the 61-byte header): nothing
    lost, nothing twice.  The number of batches compared."""
    s, t = kraw.Cluster(src), kraw.Cluster(dst)
    n = 0
    try:
        for part in range(NPART):
            sb, db = s.batches(topic, part), t.batches(topic, part)
            so = [(b["base_offset"], b["count"]) for b in sb]
            do = [(b["base_offset"], b["count"]) for b in db]
            if so != do:
                diff = next((i for i, (a, b) in enumerate(zip(so, do)) if a != b),
                            min(len(so), len(do)))
                h.fail("%s: %s-%d: destination batches differ from the source "
                       "from batch %d: source %r, destination %r (%d vs %d batches)"
                       % (what, topic, part, diff, so[diff:diff + 3],
                          do[diff:diff + 3], len(so), len(do)))
            for a, b in zip(sb, db):
                if not b["crc_ok"]:
                    h.fail("%s: %s-%d batch at %d: bad CRC at the destination"
                           % (what, topic, part, b["base_offset"]))
                if kraw.records_section(a["raw"]) != kraw.records_section(b["raw"]):
                    h.fail("%s: %s-%d batch at %d: records differ"
                           % (what, topic, part, a["base_offset"]))
            n += len(sb)
    finally:
        s.close()
        t.close()
    return n


def broker_pause(cl):
    h.sigstop(cl.pid)


def broker_resume(cl):
    os.kill(cl.pid, signal.SIGCONT)


def broker_crash(cl):
    os.killpg(cl.pid, signal.SIGKILL)
    cl.proc.wait(60)
    cl.proc = None
    cl.pid = None


def broker_start(cl):
    cl.launch()
    cl.wait_ready(time.monotonic() + 180)


def burst_in_flight(d, src, dst, n, tag):
    """With the destination broker held (SIGSTOP), writes a burst of small
    batches and waits until mirrord has at least 2 of them in flight."""
    broker_pause(dst)
    try:
        write(src.bootstrap, FAULTS, n, tag)
        h.wait_for(lambda: gauge(d, "mirrord_produce_inflight_batches") >= 2, 60,
                   "batches in flight to the held destination broker")
        got = gauge(d, "mirrord_produce_inflight_batches")
        log("%s: %d batches in flight to the held destination broker"
            % (tag, got))
    except BaseException:
        broker_resume(dst)
        raise


def main():
    src, dst = h.private_kafka(2, "plaintext")
    for t in (SMALL, FAULTS):
        src.create_topic(t, NPART)

    # 0. Without mirrord, the broker behaviour this relies on: Kafka takes
    #    one batch per partition in a Produce, so the batches of a partition
    #    must travel in separate requests.
    dst.create_topic("probe", 1)
    c = kraw.Cluster(dst.bootstrap)
    try:
        two = krawwrite.batch([(0, b"a", b"1")]) + krawwrite.batch([(0, b"b", b"2")])
        try:
            krawwrite.produce(c, "probe", 0, two)
            h.fail("Kafka accepted two batches of one partition in one Produce")
        except ValueError as e:
            h.check("error 87" in str(e), "two batches of one partition in one "
                    "Produce: %s, want INVALID_RECORD (87)" % e)
        # (a topic just created may answer NOT_LEADER_OR_FOLLOWER for a
        # moment: asked again until it answers)
        end = h.wait_for(lambda: c.offsets("probe", 0), 30,
                         "ListOffsets of probe-0")[1]
        h.check(end == 0, "the refused Produce wrote records")
    finally:
        c.close()
    log("Kafka refuses two batches of one partition in one Produce (INVALID_RECORD)")

    # 1. A backlog of small batches, mirrored with pipelining (the default).
    write(src.bootstrap, SMALL, 4000, "small")
    # The faulty topic's partitions take their producer ids now: with the
    # destination broker held, InitProducerId could not be answered.
    write(src.bootstrap, FAULTS, 100, "warm")
    d = mt.Mirrord(destination=dst.bootstrap, log_level="info",
                   extra_yaml="pipeline:\n  request_timeout_ms: %d\n" % TIMEOUT_MS)
    d.create(MIRROR, {"bootstrap.servers": src.bootstrap,
                      "mirror.fetch.wait.max.ms": "100",
                      "mirror.failed.retry.initial.backoff.ms": "200",
                      "mirror.failed.retry.max.backoff.ms": "2000",
                      "mirror.metadata.refresh.interval.ms": "2000"})
    d.cli_ok("--add", "--mirror", MIRROR, "--topic", "%s,%s" % (SMALL, FAULTS))
    h.wait_for(lambda: settled(d, src.bootstrap, (SMALL, FAULTS)), 300,
               "the small-batch backlog mirrored (log %s)" % d.proc.log_path)
    n = same_batches(src.bootstrap, dst.bootstrap, SMALL, "small batches")
    h.check(n == 4000, "small batches: %d batches of one record each, want 4000" % n)
    peak = gauge(d, "mirrord_produce_partition_inflight_batches_peak")
    h.check(peak > 1, "small batches: at most %d batch(es) of a partition were "
            "in flight at once: the produce was not pipelined" % peak)
    log("small batches: %d batches mirrored byte- and offset-identical, up to "
        "%d of a partition in flight" % (n, peak))

    # 2. The destination broker held past the request timeout.
    resync0 = d.log().count("re-reading the destination end")
    burst_in_flight(d, src, dst, 600, "stop")
    time.sleep(TIMEOUT_MS / 1000.0 * 2)
    broker_resume(dst)
    write(src.bootstrap, FAULTS, 200, "after-stop")
    h.wait_for(lambda: settled(d, src.bootstrap, (SMALL, FAULTS)), 300,
               "mirroring after the destination broker was held (log %s)"
               % d.proc.log_path)
    n = same_batches(src.bootstrap, dst.bootstrap, FAULTS, "broker held")
    h.check(d.log().count("re-reading the destination end") > resync0,
            "broker held: mirrord never re-read the destination end after "
            "the requests timed out")
    log("destination broker held past the request timeout: %d batches equal" % n)

    # 3. mirrord killed (-9) with batches in flight; the broker resumes
    #    while it is down.
    burst_in_flight(d, src, dst, 600, "kill")
    d.kill9()
    broker_resume(dst)
    write(src.bootstrap, FAULTS, 200, "after-kill")
    d.start()
    h.wait_for(lambda: settled(d, src.bootstrap, (SMALL, FAULTS)), 300,
               "mirroring after mirrord was killed (log %s)" % d.proc.log_path)
    n = same_batches(src.bootstrap, dst.bootstrap, FAULTS, "mirrord killed")
    log("mirrord killed with batches in flight: %d batches equal" % n)

    # 4. The destination broker killed (-9) with batches in flight.
    burst_in_flight(d, src, dst, 600, "crash")
    broker_crash(dst)
    broker_start(dst)
    write(src.bootstrap, FAULTS, 200, "after-crash")
    h.wait_for(lambda: settled(d, src.bootstrap, (SMALL, FAULTS)), 300,
               "mirroring after the destination broker crashed (log %s)"
               % d.proc.log_path)
    n = same_batches(src.bootstrap, dst.bootstrap, FAULTS, "broker crashed")
    log("destination broker killed with batches in flight: %d batches equal" % n)

    # 5. A plain destination broker restart under a steady load.
    w = threading.Thread(target=write, args=(src.bootstrap, FAULTS, 3000,
                                            "restart"))
    w.start()
    time.sleep(1)
    dst.stop()
    broker_start(dst)
    w.join(300)
    h.check(not w.is_alive(), "the writer did not finish")
    h.wait_for(lambda: settled(d, src.bootstrap, (SMALL, FAULTS)), 300,
               "mirroring after the destination broker restarted (log %s)"
               % d.proc.log_path)
    n = same_batches(src.bootstrap, dst.bootstrap, FAULTS, "broker restarted")
    h.check(n >= 5400, "faulty: %d batches, want at least 5400" % n)
    log("destination broker restarted under load: %d batches equal" % n)
    states = d.states(MIRROR)
    h.check(all(s == "MIRRORING" for s in states.values()),
            "states at the end: %r" % states)
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
