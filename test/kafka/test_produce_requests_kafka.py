#!/usr/bin/env python3
"""How Produce requests are filled, on real Apache Kafka 4.4 (two private
single-node clusters of test/kafka/realkafka.py; SKIPs with the reason when
it cannot run).

Kafka reads one request of a connection at a time and answers it before the
next, and a request carries at most one batch of a partition, so what a
connection moves per second is the batches per request times the broker's
turnaround.  mirrord keeps at most pipeline.max_inflight_batches_per_partition
Produce requests in flight to a broker, and each takes the next batch of
every partition that has one ready (pipeline/copy.c, produce_conn_cap()):

  * a backlog of small batches (one record each) in 8 partitions is
    mirrored byte- and offset-identical (same offsets, same record bytes,
    good CRCs: nothing lost, nothing twice); no more than 5 Produce requests
    were ever in flight to the broker (mirrord_produce_broker_inflight
    _requests_peak), yet more than one (pipelined), and the requests carried
    at least half of the partitions each on average (mirrord_produce
    _request_batches_total over mirrord_produce_requests_total); before the
    cap, partitions that started at different moments stayed out of step and
    a request carried a single batch, dozens of them in flight;
  * while that backlog drains, each partition at its 64 KiB cap
    (pipeline.max_inflight_bytes_per_partition) is fetched again once half
    of it is written, for that half, not for the 1 KiB each Produce answer
    frees: the Fetch requests (mirrord_fetch_requests_total) are far fewer
    than the Produce requests (before, about one Fetch per two Produce
    requests: the source broker's CPU spent on tiny answers);
  * the destination broker held (SIGSTOP) past pipeline.request_timeout_ms
    while requests carrying batches of many partitions are in flight: every
    request times out with the batches of all its partitions, the broker
    appends what it reads once resumed; after SYNC and the proof every
    partition is equal to the source batch for batch at the same offsets.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_pipeline_kafka as tpk  # noqa: E402  (write, same_batches, gauge...)

NPART = 8
TOPIC = tpk.SMALL
TIMEOUT_MS = 3000
DEPTH = 5


def log(msg):
    print("produce requests: %s" % msg, flush=True)


def request_counts(d):
    return (tpk.gauge(d, "mirrord_produce_requests_total"),
            tpk.gauge(d, "mirrord_produce_request_batches_total"))


def fetch_requests(d):
    """mirrord_fetch_requests_total over its result labels."""
    return sum(float(line.split()[-1]) for line in d.metrics().splitlines()
               if line.startswith("mirrord_fetch_requests_total{"))


def main():
    tpk.NPART = NPART  # the helpers spread and compare over NPART partitions
    tpk.MIRROR = "pr"
    src, dst = h.private_kafka(2, "plaintext")
    src.create_topic(TOPIC, NPART)

    # 1. A backlog of small batches in 8 partitions.
    n_backlog = 600 * NPART
    tpk.write(src.bootstrap, TOPIC, n_backlog, "backlog")
    d = mt.Mirrord(destination=dst.bootstrap, log_level="info",
                   extra_yaml="pipeline:\n  request_timeout_ms: %d\n"
                   "  max_inflight_batches_per_partition: %d\n"
                   "  max_inflight_bytes_per_partition: 64KiB\n"
                   % (TIMEOUT_MS, DEPTH))
    d.create(tpk.MIRROR, {"bootstrap.servers": src.bootstrap,
                          "mirror.fetch.wait.max.ms": "100",
                          "mirror.failed.retry.initial.backoff.ms": "200",
                          "mirror.failed.retry.max.backoff.ms": "2000",
                          "mirror.metadata.refresh.interval.ms": "2000"})
    d.cli_ok("--add", "--mirror", tpk.MIRROR, "--topic", TOPIC)
    h.wait_for(lambda: tpk.settled(d, src.bootstrap, (TOPIC,)), 300,
               "the backlog mirrored (log %s)" % d.proc.log_path)
    n = tpk.same_batches(src.bootstrap, dst.bootstrap, TOPIC, "backlog")
    h.check(n == n_backlog, "backlog: %d batches of one record each, want %d"
            % (n, n_backlog))
    reqs, batches = request_counts(d)
    peak = tpk.gauge(d, "mirrord_produce_broker_inflight_requests_peak")
    h.check(batches >= n_backlog, "backlog: the Produce requests carried %d "
            "batches, fewer than the %d mirrored" % (batches, n_backlog))
    h.check(peak <= DEPTH, "backlog: %d Produce requests were in flight to "
            "the destination broker at once, want at most %d "
            "(pipeline.max_inflight_batches_per_partition)" % (peak, DEPTH))
    h.check(peak >= 2, "backlog: at most %d Produce request in flight at "
            "once: not pipelined" % peak)
    h.check(batches / reqs >= NPART / 2.0, "backlog: %d batches in %d Produce "
            "requests (%.1f a request), want at least %d of the %d partitions "
            "a request" % (batches, reqs, batches / reqs, NPART // 2, NPART))
    fetches = fetch_requests(d)
    h.check(fetches * 4 <= reqs, "backlog: %d Fetch requests for %d Produce "
            "requests, want at most a quarter: a partition at its cap is "
            "fetched in halves, not a batch at a time" % (fetches, reqs))
    log("backlog: %d batches equal, %d Produce requests (%.1f batches each), "
        "at most %d in flight, %d Fetch requests"
        % (n, reqs, batches / reqs, peak, fetches))

    # 2. The destination broker held past the request timeout while requests
    #    carrying batches of many partitions are in flight.
    resync0 = d.log().count("re-reading the destination end")
    tpk.broker_pause(dst)
    try:
        tpk.write(src.bootstrap, TOPIC, 100 * NPART, "held")
        h.wait_for(lambda: tpk.gauge(d, "mirrord_produce_inflight_batches")
                   > NPART, 60, "batches of more than one request in flight "
                   "to the held destination broker")
        held = tpk.gauge(d, "mirrord_produce_inflight_batches")
        time.sleep(TIMEOUT_MS / 1000.0 * 2)
    finally:
        tpk.broker_resume(dst)
    log("%d batches in flight to the held broker, released after %.0f s"
        % (held, TIMEOUT_MS / 1000.0 * 2))
    tpk.write(src.bootstrap, TOPIC, 50 * NPART, "after")
    h.wait_for(lambda: tpk.settled(d, src.bootstrap, (TOPIC,)), 300,
               "mirroring after the destination broker was held (log %s)"
               % d.proc.log_path)
    n = tpk.same_batches(src.bootstrap, dst.bootstrap, TOPIC, "broker held")
    want = n_backlog + 150 * NPART
    h.check(n == want, "broker held: %d batches, want %d" % (n, want))
    h.check(d.log().count("re-reading the destination end") > resync0,
            "broker held: mirrord never re-read the destination end after "
            "the requests timed out")
    peak = tpk.gauge(d, "mirrord_produce_broker_inflight_requests_peak")
    h.check(peak <= DEPTH, "broker held: %d Produce requests in flight at "
            "once, want at most %d" % (peak, DEPTH))
    states = d.states(tpk.MIRROR)
    h.check(len(states) == NPART and
            all(s == "MIRRORING" for s in states.values()),
            "states at the end: %r" % states)
    log("destination broker held past the request timeout: %d batches equal" % n)
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
