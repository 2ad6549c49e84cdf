#!/usr/bin/env python3
"""The replicated metadata log (storage.backend: kafka) on real Kafka 4.4
(one broker per cluster, so the replication factor is capped, with the
warning this test checks):

  * a daemon creates the topic (1 partition, RF capped to 1 with a warning,
    min.insync.replicas capped, unclean election off, infinite retention),
    mirrors a topic, and after a clean restart (which writes a snapshot) and
    a kill -9 restart the mirrors, topics, partition states and translation
    anchors are back, replayed from the snapshot;
  * a second daemon on the same topic becomes the writer: the first one's
    next mutation is refused with a named error (fenced), and the topic
    holds no batch of the first one after the second one's claim;
  * a writer paused (SIGSTOP) with a mutation sent to it, a third daemon
    started meanwhile, the paused one continued (SIGCONT): its late write
    is refused by the broker (INVALID_PRODUCER_EPOCH), never after the claim;
  * a file log migrates into an empty topic (mirrord --migrate-metadata
    --from-dir) with its state intact; a second migration into the now
    non-empty topic is refused.
"""

import os
import time
import signal
import subprocess
import sys

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
MLOG_T_CLAIM = 0xff04
MLOG_T_SNAPSHOT = 0xff02


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        p.produce(topic, value=v)
    if p.flush(60):
        h.fail("records not delivered to %s" % topic)


def transactions(bootstrap, topic):
    """3 aborted and 2 committed records on partition 0: the destination
    offsets move away from the source's, which the translation map of the
    metadata log (its anchors) must remember across restarts."""
    p = Producer({"bootstrap.servers": bootstrap,
                  "transactional.id": "mlogk-txn-" + RUN})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"aborted-%d" % i, partition=0)
    p.flush(60)
    p.abort_transaction(60)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=b"committed-%d" % i, partition=0)
    p.commit_transaction(60)


def hwm(bootstrap, topic, partitions=2):
    """Sum of the high watermarks of the topic's partitions."""
    c = kraw.Cluster(bootstrap)
    try:
        return sum(c.offsets(topic, p)[1] for p in range(partitions))
    except Exception:  # noqa: BLE001 - not there yet
        return -1
    finally:
        c.close()


def kafka_daemon(dst, name, topic):
    """A mirrord whose metadata log is the topic; all share one key."""
    return mt.Mirrord(destination=dst, name=name, start=False,
                      storage_kafka={"secret_key_file": KEY, "topic": topic,
                                     "timeout_ms": 10000})


# x86_64 futex: the loop thread waiting for an answer of the metadata
# log's network thread (lib/metadata/mlog_kafka_net.c)
POLL_SYSCALLS = {"202"}


def stop_in_poll(pid, timeout):
    """SIGSTOP pid the moment its main thread is in a futex wait (a
    handoff with the metadata log's network thread; mirrord's loop
    otherwise waits in epoll_wait).  An operator's command no longer
    waits for its write on the loop, so this is a random moment of the
    write in flight, best effort.  True if caught there; else stops it
    anyway at the deadline."""
    import time
    deadline = time.monotonic() + timeout
    try:
        fd = os.open("/proc/%d/syscall" % pid, os.O_RDONLY)
    except OSError:
        os.kill(pid, signal.SIGSTOP)
        return False
    seen = {}
    try:
        while time.monotonic() < deadline:
            for _ in range(1000):
                nr = os.pread(fd, 8, 0).split(b" ", 1)[0].decode()
                seen[nr] = seen.get(nr, 0) + 1
                if nr in POLL_SYSCALLS:
                    os.kill(pid, signal.SIGSTOP)
                    return True
    except OSError:
        pass
    finally:
        os.close(fd)
    os.kill(pid, signal.SIGSTOP)
    print("main thread not caught waiting on a futex; system calls seen: %r" % seen)
    return False


def log_start(bootstrap, topic):
    c = kraw.Cluster(bootstrap)
    try:
        return c.offsets(topic, 0)[0]
    finally:
        c.close()


def claims(batches):
    return [(off, pid, ep) for off, pid, ep, types in batches
            if MLOG_T_CLAIM in types]


def racing_create(d, mirror, props):
    """kafka-mirrors --create of mirror (configs in the file props) through
    d, started and not waited for."""
    return subprocess.Popen(
        [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
         d.bootstrap, "--create", "--mirror", mirror, "--mirror-config", props],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def race_settled(racing, mirror, dst, topic, claim, names):
    """After a writer paused with racing (racing_create of mirror) in
    flight, and a new writer's claim (a claims() entry) in the metadata log
    topic on dst and its mirror list (names): no batch of another writer
    after the claim, and the create either acknowledged and replayed by
    the new writer or refused naming the fencing and absent.  True when it
    was acknowledged."""
    out, err = racing.communicate(timeout=60)
    late = [x for x in mt.log_batches(dst, topic)
            if x[0] > claim[0] and (x[1], x[2]) != (claim[1], claim[2])]
    h.check(not late, "a late batch after the claim: %r" % late)
    if racing.returncode == 0:
        # It landed before the claim: the new writer replayed it.
        h.check(mirror in names, "%s acknowledged by the paused writer but "
                "not replayed by the new one: %r" % (mirror, names))
    else:
        h.check("fenced" in out + err and mirror not in names,
                "%s refused without naming the fencing, or present: %s %s %r"
                % (mirror, out, err, names))
    return racing.returncode == 0


def state(d, mirror):
    """What must survive a restart: per partition the state and offsets."""
    rows = d.describe_json(mirror)
    keep = ("topic", "partition", "state", "sourceOffset",
            "destinationOffset", "lastMirroredOffset", "lastMirroredEpoch")
    return sorted(tuple((k, r.get(k)) for k in keep) for r in rows)


def state_is(d, mirror, want):
    """True when state(d, mirror) is want; else raises with what it is (so
    a wait that times out shows the difference)."""
    got = state(d, mirror)
    if got != want:
        raise AssertionError("now %r" % (got,))
    return True


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    topic = "mlogk-meta-" + RUN
    t1 = "mlogk-data-" + RUN
    src.create_topic(t1, partitions=2)
    produce(SRC, t1, [b"r-%d" % i for i in range(20)])
    transactions(SRC, t1)

    # ---- a writer creates the topic, mirrors, restarts -----------------
    a = kafka_daemon(DST, "a", topic)
    a.start()
    log = a.log()
    h.check("storage.kafka.replication_factor 3 capped to 1" in log,
            "the replication-factor cap is not logged:\n" + log[-3000:])
    h.check("min_insync_replicas 2 capped to 1" in log,
            "the min.insync.replicas cap is not logged")
    a.create("m1", {"bootstrap.servers": SRC,
                    "mirror.metadata.refresh.interval.ms": "1000",
                    "mirror.fetch.wait.max.ms": "200"})
    a.cli_ok("--add", "--mirror", "m1", "--topic", t1)
    h.wait_for(lambda: hwm(DST, t1) == 22, 90, "%s mirrored" % t1)
    mt.wait_caught_up(a, "m1", 120, "m1 partitions MIRRORING, caught up",
                      count=2)
    before = state(a, "m1")
    shifted = [r for r in a.describe_json("m1")
               if r["sourceOffset"] != r["destinationOffset"]]
    h.check(shifted, "no partition whose offsets differ: the translation "
            "map is not exercised: %r" % a.describe_json("m1"))
    desc_before = a.describe_json("m1")
    h.check(a.stop() == 0, "mirrord a did not stop cleanly")
    b0 = mt.log_batches(DST, topic)
    snaps = [off for off, _, _, types in b0 if MLOG_T_SNAPSHOT in types]
    h.check(snaps, "no snapshot in the topic after a clean stop: %r" % b0)
    start = log_start(DST, topic)
    h.check(start == snaps[-1] and start > 0,
            "the log before the snapshot at %d was not deleted (log start %d)"
            % (snaps[-1], start))

    a.start()
    h.check("replayed from offset %d (snapshot)" % snaps[-1] in
            a.proc.output(), "the restart did not replay from the "
            "snapshot:\n" + a.proc.tail())
    h.wait_for(lambda: state_is(a, "m1", before), 60,
               "state after restart equal to %r" % (before,))
    # The anchors: mirroring continues at the right offsets, no duplicate.
    produce(SRC, t1, [b"s-%d" % i for i in range(10)])
    h.wait_for(lambda: hwm(DST, t1) == 32, 90, "%s mirrored after restart" % t1)
    before = None
    h.wait_for(lambda: all(r["lag"] == 0 for r in a.describe_json("m1")),
               60, "m1 caught up again")
    before = state(a, "m1")
    a.kill9()
    a.start()
    h.wait_for(lambda: state_is(a, "m1", before), 60,
               "state after kill -9 equal to %r" % (before,))
    h.check("replayed from offset %d (snapshot)" % snaps[-1] in
            a.proc.output(), "the restart after kill -9 did not replay from "
            "the snapshot:\n" + a.proc.tail())
    desc_after = {(r["topic"], r["partition"]): r for r in a.describe_json("m1")}
    for r in desc_before:
        h.check((r["topic"], r["partition"]) in desc_after,
                "partition %s-%d lost" % (r["topic"], r["partition"]))
    produce(SRC, t1, [b"k-%d" % i for i in range(5)])
    h.wait_for(lambda: hwm(DST, t1) == 37, 90, "%s mirrored after kill -9" % t1)

    # ---- a second daemon becomes the writer; the first is fenced -------
    b = kafka_daemon(DST, "b", topic)
    b.start()
    h.check(b.states("m1") == a.states("m1") or len(b.states("m1")) == 2,
            "b does not see m1")
    cl = claims(mt.log_batches(DST, topic))
    b_claim = cl[-1]
    r = a.create("m2", {"bootstrap.servers": SRC}, expect_ok=False)
    h.check(r.returncode != 0 and "fenced" in (r.stdout + r.stderr),
            "the deposed writer's mutation was not refused as fenced: rc %d "
            "%s %s" % (r.returncode, r.stdout, r.stderr))
    h.check("fenced" in a.log() and "INVALID_PRODUCER_EPOCH" in a.log()
            or "PRODUCER_FENCED" in a.log(),
            "a does not say it was fenced:\n" + a.log()[-2000:])
    bt = mt.log_batches(DST, topic)
    late = [x for x in bt if x[0] > b_claim[0] and
            (x[1], x[2]) != (b_claim[1], b_claim[2])]
    h.check(not late, "batches of a deposed writer after the claim: %r" % late)
    h.wait_for(lambda: "stopping the data plane of this instance" in
               a.proc.output(), 30, "the fenced instance to stop copying")
    h.check(a.readyz()[0] == 503 and "metadata log writable" in a.readyz()[1],
            "/readyz of the fenced instance: %r" % (a.readyz(),))
    h.check(b.readyz()[0] == 200, "/readyz of the writer: %r" % (b.readyz(),))
    names = [m for m in b.cli_ok("--list").stdout.split()]
    h.check("m2" not in names and "m1" in names,
            "b lists %r" % names)
    b.create("m3", {"bootstrap.servers": SRC})
    # Fenced, it stays up with its copying stopped over several
    # housekeeping rounds (5 s): restarting would take the log back from
    # b.  Only a log broken otherwise (an unknown outcome) makes mirrord
    # exit 75 for a restart.
    time.sleep(12)
    h.check(a.proc.alive() and "shutting down to start again" not in
            a.proc.output(), "the fenced instance shut down to restart "
            "(it would take the log back): %s" % a.proc.tail())
    a.stop()

    # ---- SIGSTOP the writer with a mutation sent, a new writer, SIGCONT -
    b.proc.signal(signal.SIGSTOP)
    props = os.path.join(T, "m4.properties")
    with open(props, "w") as f:
        f.write("bootstrap.servers=%s\n" % SRC)
    late_cli = subprocess.Popen(
        [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
         b.bootstrap, "--create", "--mirror", "m4", "--mirror-config", props],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    c = kafka_daemon(DST, "c", topic)
    c.start()
    c_claim = claims(mt.log_batches(DST, topic))[-1]
    h.check(c_claim[2] > b_claim[2] or c_claim[1] != b_claim[1],
            "c's claim %r does not outrank b's %r" % (c_claim, b_claim))
    b.proc.signal(signal.SIGCONT)
    out, err = late_cli.communicate(timeout=60)
    h.check(late_cli.returncode != 0 and "fenced" in out + err,
            "the paused writer's late mutation was not refused: rc %d %s %s"
            % (late_cli.returncode, out, err))
    bt = mt.log_batches(DST, topic)
    late = [x for x in bt if x[0] > c_claim[0] and
            (x[1], x[2]) != (c_claim[1], c_claim[2])]
    h.check(not late, "a late batch after the claim: %r" % late)
    names = c.cli_ok("--list").stdout.split()
    h.check("m4" not in names and "m3" in names and "m1" in names,
            "c lists %r" % names)
    b.stop()

    # ---- the same with the writer paused while it may be producing ------
    with open(props, "w") as f:
        f.write("bootstrap.servers=%s\n" % SRC)
    racing = racing_create(c, "m5", props)
    c.proc.signal(signal.SIGSTOP)
    e = kafka_daemon(DST, "e", topic)
    e.start()
    e_claim = claims(mt.log_batches(DST, topic))[-1]
    e_names = e.cli_ok("--list").stdout.split()
    c.proc.signal(signal.SIGCONT)
    landed = race_settled(racing, "m5", DST, topic, e_claim, e_names)
    print("paused writer with a mutation in flight: %s" %
          ("landed before the claim" if landed else "refused (fenced)"))
    c.stop()

    # ---- the writer paused inside its Produce round trip ----------------
    # e is the writer, stopped with CreateMirror m6's write in flight
    # (its Produce sent or about to be): either the broker appended the
    # batch before the next claim, so the new writer replays m6 and the
    # paused one, continued, acknowledges it, or m6 is refused as fenced
    # and absent (race_settled()).
    racing = racing_create(e, "m6", props)
    caught = stop_in_poll(e.proc.pid, 20)
    g2 = kafka_daemon(DST, "g2", topic)
    g2.start()
    g2_claim = claims(mt.log_batches(DST, topic))[-1]
    g2_names = g2.cli_ok("--list").stdout.split()
    os.kill(e.proc.pid, signal.SIGCONT)
    landed = race_settled(racing, "m6", DST, topic, g2_claim, g2_names)
    print("writer stopped %s: m6 %s" % (
        "waiting for its Produce" if caught else "(the wait not caught)",
        "landed before the claim and was replayed" if landed
        else "refused (fenced)"))
    e.stop()
    g2.stop()

    # ---- a topic that could lose records is refused ------------------
    bad = "mlogk-bad-" + RUN
    dst.create_topic(bad, partitions=2)
    x = kafka_daemon(DST, "x", bad)
    x.start(wait=False)
    h.check(x.proc.wait(60) == 1, "mirrord started on a 2-partition topic")
    h.check("topic %s has 2 partitions; the metadata log needs exactly 1"
            % bad in x.proc.output(), "no reason given:\n" + x.proc.tail())

    # ---- migration from a file log -------------------------------------
    # A topic of its own, so the file log's mirror copies it (MIRRORING,
    # its producer identities and translation anchors in the file log) and
    # the migrated log must let g go on copying it.
    tm = "mlogk-mig-" + RUN
    src.create_topic(tm, partitions=2)
    produce(SRC, tm, [b"f-%d" % i for i in range(20)])
    transactions(SRC, tm)
    f = mt.Mirrord(destination=DST, name="f")
    f.create("mf", {"bootstrap.servers": SRC,
                    "mirror.metadata.refresh.interval.ms": "1000"})
    f.cli_ok("--add", "--mirror", "mf", "--topic", tm)
    mt.wait_caught_up(f, "mf", 120, "mf partitions MIRRORING, caught up",
                      count=2, fail_on_failed=True)
    # 20 records and 2 committed ones (the aborted ones and the markers are
    # not copied; the translation anchors say where the offsets moved).
    h.wait_for(lambda: hwm(DST, tm) == 22, 90, "%s mirrored by f" % tm)
    f_state = state(f, "mf")
    f_list = sorted(f.cli_ok("--list").stdout.split())
    h.check(f.stop() == 0, "mirrord f did not stop cleanly")
    mtopic = "mlogk-migrated-" + RUN
    g = kafka_daemon(DST, "g", mtopic)
    mig = subprocess.run([h.build_path("daemon", "mirrord"), "-c",
                          g.config_path, "--migrate-metadata", "--from-dir",
                          f.data_dir], capture_output=True, text=True,
                         timeout=120)
    h.check(mig.returncode == 0 and "migrated" in mig.stdout,
            "migration failed: %d %s %s" % (mig.returncode, mig.stdout,
                                            mig.stderr))
    import re
    cid = re.search(r"cluster id (\S+),", mig.stdout)
    h.check(cid and "cluster id %s" % cid.group(1) in f.proc.output(),
            "the migration names another cluster id: %s" % mig.stdout)
    g.start()
    h.check("cluster id %s" % cid.group(1) in g.proc.output(),
            "the migrated log has another cluster id:\n" + g.proc.tail())
    h.check(sorted(g.cli_ok("--list").stdout.split()) == f_list,
            "migrated mirrors differ")
    # g proves the destination end is mirrord's from the migrated producer
    # identities and resumes (a FAILED "unproven destination" here means
    # the migration lost them), then copies what follows.
    mt.wait_caught_up(g, "mf", 120, "mf partitions MIRRORING after migration",
                      count=2, fail_on_failed=True)
    h.check(state(g, "mf") == f_state, "migrated state %r, file %r"
            % (state(g, "mf"), f_state))
    produce(SRC, tm, [b"g-%d" % i for i in range(10)])
    h.wait_for(lambda: hwm(DST, tm) == 32, 90,
               "%s mirrored by g after the migration" % tm)
    g.stop()
    again = subprocess.run([h.build_path("daemon", "mirrord"), "-c",
                            g.config_path, "--migrate-metadata", "--from-dir",
                            f.data_dir], capture_output=True, text=True,
                           timeout=120)
    h.check(again.returncode == 1 and "already holds a metadata log" in
            again.stderr, "a second migration was not refused: %d %s %s"
            % (again.returncode, again.stdout, again.stderr))
    print("ok")


h.run_main(main)
