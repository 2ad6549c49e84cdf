#!/usr/bin/env python3
"""The metadata writer of several mirrord instances (cluster.enabled) never
waits for the metadata log on its event loop, on real Kafka
4.4: a 1-broker source, a private 1-broker destination holding the data,
the metadata log and its request topic, instances a and b (each naming
a local broker that does not exist, so that the assignment shares the
partitions out rather than giving them all to the instance beside their
leader), under continuous load:

  * the writer snapshots its log every 8 records (storage.
    snapshot_every_records), so its snapshots are written while all this
    goes on, by the log's thread;
  * a starts alone, becomes the writer and records the new cluster's id
    and its members without its loop waiting for any of it; b joins.  A mirror is created through a
    and its topic added: the writer records the members and the partition
    owners, and b's share of the partitions comes back to it as forwarded
    requests (each of b's state changes).  Every request is accepted, and
    none of it, nor the members or the owners, was a write the writer's
    loop waited for (mirrord_metadata_log_loop_writes_total of a does not
    move while mirrord_cluster_forwarded_requests_total{result=
    "accepted"} grows by at least b's share);
  * the destination broker is stopped (SIGSTOP) for longer than
    storage.kafka.timeout_ms: the writer's reads of the log and of the
    request topic wait on the log's thread, so a answers /metrics,
    ListMirrors and DescribeMirrors within a few seconds the whole time
    (the previous build read both on its loop every 200 ms, each read
    waiting up to the timeout: the answers time out);
  * the broker continues (SIGCONT): one writer, every destination
    partition equal to its source partition record by record (nothing
    lost, duplicated or changed), the same metadata on both instances;
  * the follower killed (kill -9) and started again replays the newest
    snapshot and the log after it: the same metadata again.
  * a mutation through the writer while the broker is stopped past
    storage.kafka.timeout_ms is answered within the CLI's timeout: "not
    made" when the broker went silent before it was sent (the writer stays
    the writer, nothing paused), or the unknown outcome, after which the
    writer shuts down by itself and exits 75 (for Restart=on-failure), the
    other instance becomes the writer and the first, started again,
    follows; then the same metadata on both, and the copy goes on,
    nothing lost.
"""

import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_ha_kafka as ha  # noqa: E402  (Load, one_writer, owners, ...)

RUN = ha.RUN
TOPIC, PARTS = ha.TOPIC, ha.PARTS
META = "ha-loop-meta-" + RUN
TIMEOUT_MS = 10000       # storage.kafka.timeout_ms
STOP_S = 16              # the broker stopped longer than that
ANSWER_S = 5             # what the writer answers within meanwhile
LOOP = "mirrord_metadata_log_loop_writes_total"
FWD = "mirrord_cluster_forwarded_requests_total"
SNAP_EVERY = 8
SNAPSHOT = re.compile(r"snapshot of \d+ records at offset \d+")


def instance(dst, name, local):
    d = mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": os.path.join(h.test_dir(),
                                                       "secret.key"),
                       "topic": META, "timeout_ms": TIMEOUT_MS},
        extra_yaml=("cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"ha-loop-%s\"\n"
                    "  instance_id: \"%s\"\n"
                    "  local_broker_id: %d\n"
                    "  session_timeout_ms: 30000\n"
                    "  heartbeat_interval_ms: 1000\n"
                    "  status_interval_ms: 1000\n" % (RUN, name, local)))
    with open(d.config_path) as f:
        cfg = f.read()
    cfg = cfg.replace("storage:\n", "storage:\n  snapshot_every_records: %d\n"
                      % SNAP_EVERY, 1)
    with open(d.config_path, "w") as f:
        f.write(cfg)
    return d


def main():
    src, = h.real_kafka(1)
    dst, = h.private_kafka(1)
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(TOPIC, partitions=PARTS)
    t0 = time.monotonic()

    a = instance(DST, "a", 91)
    b = instance(DST, "b", 92)
    ds = [a, b]
    a.start()
    ha.one_writer([a], "a alone")
    b.start()
    h.check(ha.one_writer(ds, "b joined") is a,
            "b became the writer instead of a")
    h.wait_for(lambda: len(ha.metadata(a)[0]) == 2, 60,
               "the writer to record both members")
    loop0 = mt.metric_value(a, LOOP)
    acc0 = mt.metric_value(a, FWD, result="accepted")
    print("a writes, b follows (%.0fs); a's loop writes so far %d"
          % (time.monotonic() - t0, loop0), flush=True)
    # Its promotion ran on the log's thread and the new cluster's id went
    # with the members' record, in an exclusive turn: nothing so far.
    h.eq(loop0, 0.0, "metadata writes a's loop waited for from its start "
         "(promotion, cluster id, members)")

    # ---- b's share comes to the writer as forwarded requests -----------
    a.create("m1", ha.m1_config(SRC))
    a.cli_ok("--add", "--mirror", "m1", "--topic", TOPIC)
    load = ha.Load(SRC)
    h.wait_for(lambda: len(a.states("m1")) == PARTS and
               all(s == "MIRRORING" for s in a.states("m1").values()), 90,
               "m1 MIRRORING on the writer: %r" % (a.states("m1"),))
    h.wait_for(lambda: len(ha.owners(ds)) == PARTS, 30,
               "every partition owned: %r" % (ha.owners(ds),))
    mine = sorted(p for p, who in ha.owners(ds).items() if who == "b")
    h.check(0 < len(mine) < PARTS, "the partitions were not shared out: "
            "owners %r" % (ha.owners(ds),))
    h.wait_for(lambda: mt.metric_value(a, FWD, result="accepted") - acc0
               >= len(mine), 60, "b's state changes (partitions %r) to "
               "reach the writer as forwarded requests" % (mine,))
    accepted = mt.metric_value(a, FWD, result="accepted") - acc0
    h.eq(mt.metric_value(a, FWD, result="refused"), 0.0,
         "forwarded requests the writer refused")
    h.eq(mt.metric_value(a, LOOP) - loop0, 0.0,
         "metadata writes a's loop waited for while it recorded the members "
         "and owners and handled %d forwarded requests" % accepted)
    print("%d forwarded requests accepted, b owns %r, no loop write "
          "(%.0fs)" % (accepted, mine, time.monotonic() - t0), flush=True)

    # Every partition's first batch is on the destination (its producer
    # identity was recorded before it) and the metadata log has stopped
    # growing: no metadata write is in flight when the broker stops.  One
    # whose outcome stays unknown past storage.kafka.timeout_ms leaves the
    # writer read-only until a restart (mirrord(8)), which is not what
    # this test is about.
    h.wait_for(lambda: all(x > 0 for x in ha.hwms(DST) or [0]), 60,
               "records in every destination partition: %r"
               % (ha.hwms(DST),))
    settle = {"end": None, "since": 0.0}

    def meta_settled():
        c = kraw.Cluster(DST)
        try:
            e = c.offsets(META, 0)[1]
        finally:
            c.close()
        now = time.monotonic()
        if e != settle["end"]:
            settle.update(end=e, since=now)
        return now - settle["since"] >= 2
    h.wait_for(meta_settled, 60, "the metadata log to stop growing for 2 s "
               "(end %r)" % (settle["end"],))

    # ---- the log's broker stopped: the writer still answers ------------
    dst.freeze()
    try:
        end = time.monotonic() + STOP_S
        rounds = 0
        while time.monotonic() < end:
            while_what = "the metadata log's broker is stopped (%.0f s)" % (
                STOP_S - (end - time.monotonic()))
            m = mt.answered_quickly("/metrics of the writer", a.metrics,
                                    ANSWER_S, while_what)
            h.check("mirrord_cluster_role" in m, "no cluster metrics")
            r = mt.answered_quickly("ListMirrors on the writer",
                                    lambda: a.cli_ok("--list"), ANSWER_S,
                                    while_what)
            h.check("m1" in r.stdout, "ListMirrors: %r" % r.stdout)
            rows = mt.answered_quickly("DescribeMirrors on the writer",
                                       lambda: a.describe_json("m1"),
                                       ANSWER_S, while_what)
            h.eq(len(rows), PARTS, "partitions DescribeMirrors shows")
            rounds += 1
            time.sleep(0.5)
    finally:
        dst.thaw()
    print("the broker stopped %d s: the writer answered %d rounds within "
          "%d s (%.0fs)" % (STOP_S, rounds, ANSWER_S,
                            time.monotonic() - t0), flush=True)

    # ---- afterwards: one writer, the same records, the same metadata ---
    ha.one_writer(ds, "after SIGCONT", timeout=120)
    load.stop()
    print("load: %d records" % load.n, flush=True)
    ha.check_copy(SRC, DST, load)

    def same():
        views = [ha.metadata_view(d) for d in ds]
        return views[0] == views[1] and len(views[0]) == PARTS
    h.wait_for(same, 60, "the same metadata on both instances: %r"
               % {d.name: ha.metadata_view(d) for d in ds})
    w = ha.writers(ds)[0]
    snaps = len(SNAPSHOT.findall(w.log()))
    h.check(snaps >= 2, "the writer %s wrote %d snapshots (every %d records)"
            % (w.name, snaps, SNAP_EVERY))

    # ---- the follower restarted: the snapshot and the log after it -----
    f = [d for d in ds if d is not w][0]
    f.kill9()
    f.start()
    ha.one_writer(ds, "%s restarted" % f.name, timeout=120)
    h.wait_for(same, 60, "the same metadata after %s restarted: %r"
               % (f.name, {d.name: ha.metadata_view(d) for d in ds}))
    print("%d snapshots by %s; %s restarted with the same metadata: ok "
          "(%.0fs)" % (snaps, w.name, f.name, time.monotonic() - t0))

    # ---- a metadata write behind a stopped broker ----------------------
    # A mutation through the writer while the log's broker is stopped past
    # storage.kafka.timeout_ms.  Two answers are right, depending on where
    # the broker stopped: the write was never sent (the writer's reads of
    # the log and of the requests, every few milliseconds, found the broker
    # silent first, so the write waited for a connection that never came):
    # "not made", the writer goes on; or it was sent and no answer came:
    # the outcome is unknown, the writer's log can no longer tell what it
    # holds, so it shuts down (leaving the group, so the other instance
    # becomes the writer meanwhile) and exits 75 for its service manager
    # (Restart=on-failure); started again, as systemd would, it follows.
    # Either way both see the same metadata afterwards, and the copy goes
    # on with nothing lost or duplicated.
    # freeze() returns once every thread of the broker is stopped: kill()
    # alone returns before, and on a loaded machine the broker can still
    # take the pause's write and answer it meanwhile.
    w = ha.one_writer(ds, "before the unknown outcome", timeout=60)
    o = [d for d in ds if d is not w][0]
    dst.freeze()
    try:
        r = w.cli("--pause", "--mirror", "m1", "--topic", TOPIC, timeout=60)
    finally:
        dst.thaw()
    unknown = "may or may not be made" in r.stderr
    h.check(r.returncode != 0 and "KAFKA_STORAGE_ERROR" in r.stderr and
            (unknown or ("the change was not made" in r.stderr and
                         "storage.kafka.timeout_ms" in r.stderr)),
            "a pause whose metadata write timed out: exit %d %s %s"
            % (r.returncode, r.stdout, r.stderr))
    if unknown:
        h.wait_for(lambda: not w.proc.alive(), 90, "the writer %s to shut "
                   "down after the unknown outcome" % w.name)
        h.eq(w.proc.wait(10), 75, "the exit status of %s after the unknown "
             "outcome" % w.name)
        h.check("shutting down to start again" in w.log(),
                "%s does not say why it exits:\n%s" % (w.name, w.proc.tail()))
        h.check(ha.one_writer([o], "%s exited" % w.name, timeout=120) is o,
                "%s did not become the writer" % o.name)
        w.start()
        ha.one_writer(ds, "%s started again" % w.name, timeout=120)
    else:
        h.check(ha.one_writer(ds, "after the write not made",
                              timeout=120) is w and w.proc.alive(),
                "%s stopped being the writer after a write it knows it did "
                "not make" % w.name)
    h.wait_for(same, 60, "the same metadata after the stopped broker: %r"
               % {d.name: ha.metadata_view(d) for d in ds})
    paused = any(r[2] != "MIRRORING" for r in ha.metadata_view(o))
    h.check(unknown or not paused, "the pause said not made, but %s shows "
            "it: %r" % (o.name, ha.metadata_view(o)))
    if paused:
        o.cli_ok("--resume", "--mirror", "m1", "--topic", TOPIC)
    load = ha.Load(SRC)
    time.sleep(3)
    load.stop()
    ha.check_copy(SRC, DST, load)
    if unknown:
        print("unknown outcome: %s exited 75, %s wrote meanwhile, %s followed "
              "after its start (the pause %s); copy complete (%.0fs)"
              % (w.name, o.name, w.name, "landed" if paused else "was lost",
                 time.monotonic() - t0))
    else:
        print("the pause was not made (the broker was silent before it was "
              "sent): %s stays the writer; copy complete (%.0fs)"
              % (w.name, time.monotonic() - t0))


if __name__ == "__main__":
    h.run_main(main)
