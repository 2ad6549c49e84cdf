#!/usr/bin/env python3
"""What a Metadata pass learns (topics an include pattern discovers,
partitions a source topic grows, topic identities) is written to the
metadata log without stalling the daemon (written in a group off the loop,
never waited for on it), on real Kafka
4.4 with the replicated metadata log (storage.backend: kafka) on a private
destination cluster:

  * a mirror copies a topic and mirrors the include pattern disc-<run>-.*;
    its first matching topic is discovered and copied;
  * the destination broker is stopped (SIGSTOP): the metadata log cannot
    take a write.  Three new matching topics appear on the source, the
    first one grows from 1 to 2 partitions, records are written to all of
    them.  Several discovery passes run (1 s refresh) and note the changes,
    which wait for their turn in the log; meanwhile /metrics, /readyz,
    ListMirrors and DescribeMirrors are answered at once, and
    DescribeMirrors shows only what is durable (not the new topics);
  * the broker continues (SIGCONT): the new topics and the new partition
    are added in order, each logged as discovered exactly once, and copied
    byte for byte at the same offsets; none of it was a metadata write the
    loop waited for (mirrord_metadata_log_loop_writes_total);
  * the broker is stopped again and one of the discovered topics is
    deleted on the source: mirrord confirms the deletion (3 answers, 1 s)
    and its note and its partitions' STOPPING wait for the log like the
    rest, the daemon answering at once and DescribeMirrors still showing
    them MIRRORING; after SIGCONT they go STOPPED with the note as their
    reason, the others keep copying, still no write on the loop;
  * kill -9 and a restart replay the same topics, partitions and states;
    no record that does not apply was written.

With the previous build the loop waited for the write: the answers in the
second step time out.
"""

import os
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "fixed-%s" % RUN
PAT = "disc-%s-" % RUN
META = "__mirrord_meta_disc_%s" % RUN


def rows_by_topic(d):
    out = {}
    for r in d.describe_json("m1"):
        out.setdefault(r["topic"], set()).add(r["partition"])
    return out


def state(d):
    keep = ("topic", "partition", "state", "lastMirroredOffset")
    return sorted(tuple((k, r.get(k)) for k in keep)
                  for r in d.describe_json("m1"))




def main():
    from confluent_kafka.admin import AdminClient, NewPartitions

    src_c = h.real_kafka(2)[0]
    dst_c, = h.private_kafka(1)
    src_c.create_topic(T, partitions=2)
    key = os.path.join(h.test_dir(), "secret.key")
    d = mt.Mirrord(destination=dst_c.bootstrap, log_level="debug",
                   extra_yaml="pipeline:\n  topic_deletion_confirm_ms: 1000\n",
                   storage_kafka={"secret_key_file": key, "topic": META,
                                  "timeout_ms": 120000})
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    d.cli_ok("--add", "--mirror", "m1", "--topic", PAT + ".*")
    src_c.create_topic(PAT + "0", partitions=1)   # after: discovered
    for p in range(2):
        mt.produce_tagged(src_c.bootstrap, T, p, 30, "before-%d" % p)
    mt.produce_tagged(src_c.bootstrap, PAT + "0", 0, 30, "before")
    h.wait_for(lambda: PAT + "0" in rows_by_topic(d), 60,
               "the first matching topic to be discovered")
    mt.wait_caught_up(d, "m1", 120, "the first topics to be copied",
                      count=3)
    h.check(d.log().count("discovered topic %s0 " % PAT) == 1,
            "the first matching topic was not discovered once")

    # ---- the log's broker stops: the passes' writes wait ----------------
    new = [PAT + str(i) for i in (1, 2, 3)]
    loop_writes = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total")
    # A pass's changes either wait for the turn (another write is in
    # flight) or go in flight at once and wait there for the stopped
    # broker; either line shows they reached the log.
    writing = ("Metadata answers wait for their turn in the metadata log",
               "Metadata answers are being written")

    def n_writing():
        log = d.log()
        return sum(log.count(w) for w in writing)
    n_wait = n_writing()
    os.kill(dst_c.pid, signal.SIGSTOP)
    try:
        for t in new:
            src_c.create_topic(t, partitions=2)
        sadm = AdminClient({"bootstrap.servers": src_c.bootstrap})
        list(sadm.create_partitions([NewPartitions(PAT + "0", 2)])
             .values())[0].result(30)
        for t in new:
            for p in range(2):
                mt.produce_tagged(src_c.bootstrap, t, p, 20, "new-%d" % p)
        for p in range(2):
            mt.produce_tagged(src_c.bootstrap, PAT + "0", p, 10, "grown")
        # Several 1 s passes see the new topics and the growth.
        h.wait_for(lambda: n_writing() > n_wait, 30,
                   "a pass's changes to wait for the metadata log")
        time.sleep(3)
        for _ in range(3):
            metrics = mt.answered_quickly("/metrics", d.metrics)
            h.check("mirrord_" in metrics, "no metrics: %r" % metrics[:200])
            status, _ = mt.answered_quickly("/readyz", d.readyz)
            h.check(status in (200, 503), "readyz answered %r" % status)
            r = mt.answered_quickly("ListMirrors", lambda: d.cli_ok("--list"))
            h.check("m1" in r.stdout, "ListMirrors: %r" % r.stdout)
            seen = mt.answered_quickly("DescribeMirrors",
                                       lambda: rows_by_topic(d))
            h.eq(seen, {T: {0, 1}, PAT + "0": {0}},
                 "DescribeMirrors while the write waits (durable only)")
            time.sleep(1)
        print("broker stopped: the passes' changes wait for the log; "
              "/metrics, /readyz, ListMirrors and DescribeMirrors answered "
              "at once, showing the durable topics only", flush=True)
    finally:
        os.kill(dst_c.pid, signal.SIGCONT)

    # ---- the broker continues: added, grown, copied ----------------------
    want = {T: {0, 1}, PAT + "0": {0, 1}}
    want.update({t: {0, 1} for t in new})
    h.wait_for(lambda: rows_by_topic(d) == want, 150,
               "the discovered topics and the new partition to be added")
    mt.wait_caught_up(d, "m1", 150, "the new topics and partition", count=10)
    log = d.log()
    for t in [PAT + "0"] + new:
        h.eq(log.count("discovered topic %s " % t), 1,
             "times %s was logged as discovered" % t)
    for t in [T, PAT + "0"] + new:
        h.check(mt.same_batches(src_c.bootstrap, dst_c.bootstrap, t,
                                range(2)) is not False,
                "%s: source and destination differ" % t)
        for p in range(2):
            h.eq(mt.end_offset(dst_c.bootstrap, t, p),
                 mt.end_offset(src_c.bootstrap, t, p),
                 "end of %s-%d" % (t, p))
    for bad in ("record does not apply", "internal error"):
        h.check(bad not in log, "mirrord logged %r:\n%s" % (bad, log[-3000:]))
    sync = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total") - \
        loop_writes
    h.eq(sync, 0, "metadata writes the loop waited for while 3 topics were "
         "discovered, one grew and 7 partitions started")
    print("after SIGCONT: 3 topics discovered once each and one partition "
          "added; 10 partitions copied byte for byte at the same offsets; "
          "no metadata write on the loop", flush=True)

    # ---- a source topic deleted while the log's broker is stopped ------
    gone = new[2]
    deleted = "the source topic %s was deleted" % gone
    # The deletion is noted once, so its group may well go in flight at
    # once: look for either line after the confirmation.

    def deletion_writing():
        log = d.log()
        at = log.find(deleted)
        return at >= 0 and any(w in log[at:] for w in writing)
    os.kill(dst_c.pid, signal.SIGSTOP)
    try:
        list(sadm.delete_topics([gone]).values())[0].result(30)
        h.wait_for(lambda: deleted in d.log(), 60,
                   "mirrord to confirm the deletion of %s" % gone)
        h.wait_for(deletion_writing, 30,
                   "the deletion's records to wait for the metadata log")
        for _ in range(3):
            metrics = mt.answered_quickly("/metrics", d.metrics)
            h.check("mirrord_" in metrics, "no metrics: %r" % metrics[:200])
            rows = mt.answered_quickly("DescribeMirrors",
                         lambda: [r for r in d.describe_json("m1")
                                 if r["topic"] == gone])
            # The state machine's state is the durable one; the table
            # may show it STALLED (its source topic is gone).
            h.eq(sorted(r["mirrorState"] for r in rows), ["MIRRORING"] * 2,
                 "%s while its STOPPING waits (durable only)" % gone)
            time.sleep(1)
        print("broker stopped, source topic deleted: its STOPPING waits for "
              "the log; /metrics and DescribeMirrors answered at once",
              flush=True)
    finally:
        os.kill(dst_c.pid, signal.SIGCONT)

    def stopped():
        rows = [r for r in d.describe_json("m1") if r["topic"] == gone]
        return (len(rows) == 2 and
                all(r["state"] == "STOPPED" for r in rows)) and rows
    rows = h.wait_for(stopped, 120, "%s to go STOPPED" % gone)
    for r in rows:
        h.check(deleted in (r.get("errorMessage") or ""),
                "%s-%d: reason %r" % (gone, r["partition"],
                                      r.get("errorMessage")))
    others = [r for r in d.describe_json("m1") if r["topic"] != gone]
    h.eq(sorted(r["state"] for r in others), ["MIRRORING"] * 8,
         "the other partitions after the deletion")
    h.eq(d.log().count("; its partitions go STOPPING"), 1,
         "times the deletion was confirmed")
    sync = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total") - \
        loop_writes
    h.eq(sync, 0, "metadata writes the loop waited for, with the deletion")
    print("after SIGCONT: %s STOPPED with its note, the other 8 partitions "
          "MIRRORING, no metadata write on the loop" % gone, flush=True)

    # ---- a crash replays the same state ---------------------------------
    before = state(d)
    d.kill9()
    d.start()
    h.wait_for(lambda: state(d) == before, 60,
               "the restarted mirrord to replay the same topics and states "
               "(before: %r)" % (before,))
    print("after kill -9: %d partition states replayed" % len(before),
          flush=True)
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
