#!/usr/bin/env python3
"""A partition's state change asked for while its previous one is still
being written waits behind it instead of stalling the daemon (the event
loop never waits for either write), on real Apache Kafka 4.4.0 with the
replicated metadata log (storage.backend: kafka) on a private destination
cluster of two brokers: node 1 (the controller) leads the log's topic,
node 2 the mirrored topic's destination partition.

  * a mirror copies a topic; node 2 is stopped (SIGSTOP) and 10 more
    records are written on the source: their Produce waits on node 2;
  * the operator pauses the topic (PAUSING is durable on node 1), then
    node 1 is stopped and node 2 continues: the Produce is answered and
    the partition's move to PAUSED goes to the log, where it waits;
  * the source topic is deleted and created again (a new topic id): the
    partition must go FAILED, a second state change while the first is in
    flight.  It waits for its turn (logged), and meanwhile /metrics,
    /readyz and DescribeMirrors are answered at once, DescribeMirrors
    showing only what is durable (PAUSING);
  * node 1 continues: the partition goes PAUSED, then FAILED with the
    recreated topic as the reason, in that order; none of it was a write
    the loop waited for (mirrord_metadata_log_loop_writes_total); the 40
    records are on the destination byte for byte at the source's offsets;
  * kill -9 and a restart replay the same state.

With the previous build the loop waited for the first write: the answers
in the third step time out.
"""

import os
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "sq-%s" % RUN
META = "__mirrord_meta_sq_%s" % RUN


def row(d):
    r = [x for x in d.describe_json("m1") if x["topic"] == T]
    h.eq(len(r), 1, "DescribeMirrors rows of %s" % T)
    return r[0]




def main():
    from confluent_kafka.admin import AdminClient

    src_c = h.real_kafka(2)[0]
    dst_c, = h.private_kafka(1, "plaintext", brokers=2)
    h.check(dst_c.broker_ids == [1, 2], "2 brokers: %r" % dst_c.broker_ids)
    node2 = dst_c.nodes[2]
    dst_c.create_topic(META, partitions=1, assignment={0: [1]},
                       configs={"cleanup.policy": "delete",
                                "retention.ms": "-1",
                                "retention.bytes": "-1",
                                "unclean.leader.election.enable": "false"})
    dst_c.create_topic(T, partitions=1, assignment={0: [2]})
    src_c.create_topic(T, partitions=1)
    key = os.path.join(h.test_dir(), "secret.key")
    d = mt.Mirrord(destination=dst_c.bootstrap, log_level="debug",
                   storage_kafka={"secret_key_file": key, "topic": META,
                                  "replication_factor": 1,
                                  "min_insync_replicas": 1,
                                  "timeout_ms": 120000})
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    mt.produce_tagged(src_c.bootstrap, T, 0, 30, "before")
    mt.wait_caught_up(d, "m1", 120, "the first 30 records", count=1)
    loop_writes = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total")

    # ---- a Produce waits on node 2 while the topic is paused ------------
    h.sigstop(node2.pid)
    stopped = [node2.pid]
    try:
        mt.produce_tagged(src_c.bootstrap, T, 0, 10, "paused")
        h.wait_for(lambda: (row(d).get("lag") or 0) > 0, 30,
                   "mirrord to see the 10 records")
        time.sleep(1.5)   # their Produce goes to node 2, which is stopped
        d.cli_ok("--pause", "--mirror", "m1", "--topic", T)
        h.eq(row(d)["state"], "PAUSING", "state after --pause")
        # ---- node 1 (the log) stops, node 2 answers: PAUSED waits -------
        h.sigstop(dst_c.pid)
        stopped.append(dst_c.pid)
        os.kill(node2.pid, signal.SIGCONT)
        stopped.remove(node2.pid)
        time.sleep(2)   # the Produce is answered, PAUSED goes to node 1
        h.check("m1/%s-0: PAUSING -> PAUSED" % T not in d.log(),
                "PAUSED was written with the log's broker stopped")
        src_batches = kraw.Cluster(src_c.bootstrap).batches(T, 0)
        h.eq(sum(b["count"] for b in src_batches), 40,
             "records on the source before it is recreated")
        adm = AdminClient({"bootstrap.servers": src_c.bootstrap})
        mt.recreate_topic(src_c, adm, T)
        waiting = "m1/%s-0: the move to FAILED waits for the move to " \
            "PAUSED in flight" % T
        deadline = time.monotonic() + 60
        while waiting not in d.log():
            mt.answered_quickly("/metrics", d.metrics)
            h.check(time.monotonic() < deadline,
                    "the move to FAILED never waited for PAUSED:\n%s"
                    % d.log()[-3000:])
            time.sleep(0.5)
        for _ in range(3):
            metrics = mt.answered_quickly("/metrics", d.metrics)
            h.check("mirrord_" in metrics, "no metrics: %r" % metrics[:200])
            status, _ = mt.answered_quickly("/readyz", d.readyz)
            h.check(status in (200, 503), "readyz answered %r" % status)
            r = mt.answered_quickly("DescribeMirrors", lambda: row(d))
            h.eq(r["state"], "PAUSING", "state while both writes wait "
                 "(durable only)")
            time.sleep(1)
        print("log's broker stopped: PAUSED in flight, FAILED waiting "
              "behind it; /metrics, /readyz and DescribeMirrors answered "
              "at once (PAUSING)", flush=True)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)

    # ---- the log continues: PAUSED, then FAILED --------------------------
    def failed():
        r = row(d)
        return r["state"] == "FAILED" and r
    r = h.wait_for(failed, 120, "%s-0 to go FAILED" % T)
    h.check("recreated" in (r.get("errorMessage") or ""),
            "the reason: %r" % r.get("errorMessage"))
    log = d.log()
    a = log.find("m1/%s-0: PAUSING -> PAUSED" % T)
    b = log.find("m1/%s-0: PAUSED -> FAILED" % T)
    h.check(0 <= a < b, "PAUSED then FAILED, in order (at %d and %d):\n%s"
            % (a, b, log[-3000:]))
    for bad in ("record does not apply", "internal error"):
        h.check(bad not in log, "mirrord logged %r:\n%s" % (bad, log[-3000:]))
    sync = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total") - \
        loop_writes
    h.eq(sync, 0, "metadata writes the loop waited for")
    dst_batches = kraw.Cluster(dst_c.bootstrap).batches(T, 0)
    h.eq([(x["base_offset"], x["count"]) for x in dst_batches],
         [(x["base_offset"], x["count"]) for x in src_batches],
         "destination batches (offset, count)")
    for x, y in zip(src_batches, dst_batches):
        h.check(kraw.records_section(x["raw"]) ==
                kraw.records_section(y["raw"]),
                "batch at %d: records differ" % x["base_offset"])
    print("after SIGCONT: PAUSED then FAILED (%s); 40 records byte for "
          "byte at the same offsets; no metadata write on the loop"
          % r["errorMessage"], flush=True)

    # ---- a crash replays the same state ---------------------------------
    d.kill9()
    d.start()
    r2 = h.wait_for(lambda: row(d)["state"] == "FAILED" and row(d), 60,
                    "the restarted mirrord to replay FAILED")
    h.eq(r2.get("errorMessage"), r.get("errorMessage"),
         "the reason after kill -9")
    print("after kill -9: FAILED with the same reason", flush=True)
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
