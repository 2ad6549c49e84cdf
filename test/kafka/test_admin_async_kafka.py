#!/usr/bin/env python3
"""An operator's command never stalls the daemon while its metadata write
is in flight (the command's group is written off the loop), on real Kafka
4.4 with the replicated metadata log (storage.backend: kafka) on a private
destination cluster:

  * the destination broker is stopped (SIGSTOP) with mirrord copying; a
    CreateMirror sent then cannot be made durable, so it waits for its
    answer.  Meanwhile the same mirrord answers /metrics, /readyz,
    ListMirrors and DescribeMirrors (which show the durable state: the new
    mirror is not there yet), and a second CreateMirror of the same name
    and a PauseMirrorTopics queue behind the first (one at a time);
  * the broker continues (SIGCONT): the first CreateMirror succeeds, the
    second is refused as a duplicate (it was checked against the first,
    applied), the pause lands, all in the order sent;
  * the copy goes on (records written during the stop arrive, the same
    offsets and bytes), and after kill -9 and a restart the metadata log
    replays to the same mirrors and states;
  * with a short storage.kafka.timeout_ms, a CreateMirror whose write
    cannot complete is answered with the unknown outcome (not left
    hanging), the log turns read-only, mirrord shuts down by itself with
    exit status 75 (for systemd's Restart=on-failure), and the restart
    finds the mirrors and states intact and copies on.

Before the fix the loop itself waited for the metadata write: nothing was
answered until the broker came back.
"""

import os
import signal
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "async-%s" % RUN
META = "__mirrord_meta_async_%s" % RUN
PARTS = 3


def cli_async(d, *args):
    """kafka-mirrors through d, started and not waited for."""
    return subprocess.Popen(
        [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
         d.bootstrap] + list(args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def props(d, name, bootstrap):
    path = os.path.join(d.dir, "%s.properties" % name)
    with open(path, "w") as f:
        f.write("bootstrap.servers=%s\n" % bootstrap)
    return path


def state(d):
    """What must survive a restart: mirrors, and per partition its state
    and offsets."""
    names = listed(d)
    rows = d.describe_json()
    keep = ("mirror", "topic", "partition", "state", "lastMirroredOffset")
    return names, sorted(tuple((k, r.get(k)) for k in keep) for r in rows)


def listed(d):
    """The mirror names of --list."""
    r = d.cli_ok("--list")
    return sorted(x.split()[0] for x in r.stdout.splitlines()[1:]
                  if x.strip() and x.split()[0] != "No")


def main():
    src_c = h.real_kafka(2)[0]
    dst_c, = h.private_kafka(1)
    src_c.create_topic(T, partitions=PARTS)
    key = os.path.join(h.test_dir(), "secret.key")
    d = mt.Mirrord(destination=dst_c.bootstrap,
                   storage_kafka={"secret_key_file": key, "topic": META,
                                  "timeout_ms": 120000})
    d.create("m1", {"bootstrap.servers": src_c.bootstrap,
                    "mirror.fetch.wait.max.ms": "100"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)
    for p in range(PARTS):
        mt.produce_tagged(src_c.bootstrap, T, p, 50, "before-%d" % p)
    mt.wait_caught_up(d, "m1", 120, "the first records to be copied",
                      count=PARTS)

    # ---- the destination stops: a CreateMirror's write cannot land ----
    h.sigstop(dst_c.pid)
    try:
        for p in range(PARTS):
            mt.produce_tagged(src_c.bootstrap, T, p, 20, "during-%d" % p)
        writing = "its change is being written to the metadata log"
        n = d.log().count(writing)
        first = cli_async(d, "--create", "--mirror", "m2", "--mirror-config",
                          props(d, "m2", src_c.bootstrap))
        h.wait_for(lambda: d.log().count(writing) > n or
                   first.poll() is not None, 20,
                   "the first CreateMirror's write to start")
        time.sleep(0.5)
        if first.poll() is not None:
            h.fail("CreateMirror answered while the metadata log's broker "
                   "is stopped: %r" % (first.communicate(),))
        second = cli_async(d, "--create", "--mirror", "m2",
                           "--mirror-config", props(d, "m2b",
                                                    src_c.bootstrap))
        pause = cli_async(d, "--pause", "--mirror", "m1", "--topic", T)
        h.wait_for(lambda: d.log().count("waits for the change before it")
                   >= 2, 10, "the two later commands to queue")

        # The loop is free: everything that needs no write is answered.
        t0 = time.monotonic()
        status, body = d.readyz()
        metrics = d.metrics()
        names = listed(d)
        rows = d.describe_json("m1")
        took = time.monotonic() - t0
        h.check("mirrord_" in metrics, "no metrics: %r" % metrics[:200])
        h.check(status in (200, 503), "readyz: %d %s" % (status, body))
        h.check(names == ["m1"], "ListMirrors during the write shows the "
                "durable mirrors only, got %r" % names)
        h.check(len(rows) == PARTS and all(
            r["state"] == "MIRRORING" for r in rows),
            "DescribeMirrors during the write: %r" % rows)
        for p, what in ((first, "the first CreateMirror"),
                        (second, "the second CreateMirror"),
                        (pause, "the pause")):
            if p.poll() is not None:
                h.fail("%s was answered while the broker is stopped: %r"
                       % (what, p.communicate()))
        print("broker stopped: /metrics, /readyz, ListMirrors and "
              "DescribeMirrors answered in %.1f s; the CreateMirror and the "
              "two commands behind it wait" % took, flush=True)
    finally:
        os.kill(dst_c.pid, signal.SIGCONT)

    # ---- the broker continues: the commands complete, in order ----------
    out1 = first.communicate(timeout=150)
    h.check(first.returncode == 0, "the first CreateMirror failed: %r"
            % (out1,))
    out2 = second.communicate(timeout=150)
    mt.expect_error(subprocess.CompletedProcess([], second.returncode,
                                                out2[0], out2[1]),
                    "CLUSTER_MIRROR_ALREADY_EXISTS", "m2")
    out3 = pause.communicate(timeout=150)
    h.check(pause.returncode == 0, "the pause failed: %r" % (out3,))
    log = d.log()
    i1 = log.find("mirror m2 created")
    i2 = log.find("CreateMirror m2 from")
    h.check(0 <= i1 < i2, "the duplicate was not checked after the first "
            "create was applied (log order %d, %d)" % (i1, i2))
    print("data-plane writes held behind the commands: %.0f, dropped as "
          "stale: %.0f" % (mt.metric_value(
              d, "mirrord_metadata_log_held_writes_total"), mt.metric_value(
              d, "mirrord_metadata_log_held_refused_total")), flush=True)
    h.wait_for(lambda: all(r["state"] == "PAUSED"
                           for r in d.describe_json("m1")), 60,
               "m1's partitions to pause")
    h.check(listed(d) == ["m1", "m2"], "mirrors: %r" % listed(d))
    for bad in ("record does not apply", "internal error"):
        h.check(bad not in log, "mirrord logged %r:\n%s" % (bad, log[-3000:]))

    # ---- the copy goes on; a crash replays to the same state -------------
    d.cli_ok("--resume", "--mirror", "m1", "--topic", T)
    mt.wait_caught_up(d, "m1", 120, "the records written during the stop",
                      count=PARTS)
    h.check(mt.same_batches(src_c.bootstrap, dst_c.bootstrap, T,
                            range(PARTS)) is not False,
            "source and destination differ")
    for p in range(PARTS):
        h.eq(mt.end_offset(dst_c.bootstrap, T, p),
             mt.end_offset(src_c.bootstrap, T, p), "end of partition %d" % p)
    before = state(d)
    d.kill9()
    d.start()
    h.wait_for(lambda: state(d) == before, 60,
               "the restarted mirrord to replay the same mirrors and states "
               "(before: %r)" % (before,))
    print("after kill -9: mirrors %r and %d partition states replayed; "
          "%d partitions copied byte for byte at the same offsets"
          % (before[0], len(before[1]), PARTS), flush=True)

    # ---- a write that cannot complete: answered with the error ----------
    # The same log, a short storage.kafka.timeout_ms: the broker stopped
    # past it leaves the CreateMirror's outcome unknown.  It is answered
    # with that (not left hanging); the log is then read-only, mirrord
    # shuts down and exits 75 for its service manager to restart it, and
    # the restart re-reads what is really there: m3 or not, the rest
    # intact.
    d.stop()
    d2 = mt.Mirrord(destination=dst_c.bootstrap, name="mirrord2",
                    storage_kafka={"secret_key_file": key, "topic": META,
                                   "timeout_ms": 3000})
    h.wait_for(lambda: state(d2) == before, 60, "the second mirrord to "
               "replay the same mirrors and states")
    h.sigstop(dst_c.pid)
    try:
        t0 = time.monotonic()
        r = d2.cli("--create", "--mirror", "m3", "--mirror-config",
                   props(d2, "m3", src_c.bootstrap), timeout=25)
        took = time.monotonic() - t0
    finally:
        os.kill(dst_c.pid, signal.SIGCONT)
    h.check(r.returncode == 1 and "KAFKA_STORAGE_ERROR" in r.stderr and
            "it may or may not be made" in r.stderr and
            "outcome is unknown" in r.stderr,
            "a CreateMirror whose write timed out: exit %d %s %s"
            % (r.returncode, r.stdout, r.stderr))
    print("write past storage.kafka.timeout_ms: answered in %.1f s: %s"
          % (took, r.stderr.strip()[:160]), flush=True)
    h.wait_for(lambda: "metadata log is read-only" in d2.log(), 30,
               "mirrord to say its metadata log is read-only")
    # It shuts down by itself and asks its service manager for a restart
    # (EX_TEMPFAIL; the unit's Restart=on-failure), which re-reads the log.
    h.wait_for(lambda: not d2.proc.alive(), 60, "mirrord to shut down after "
               "the unknown outcome")
    h.eq(d2.proc.wait(10), 75, "mirrord's exit status after the unknown "
         "outcome")
    h.check("shutting down to start again" in d2.log(),
            "no message saying why it exits: %s" % d2.proc.tail())
    d2.start()
    h.wait_for(lambda: state(d2)[1] == before[1], 60, "the partition "
               "states after the unknown outcome and a restart (before: %r)"
               % (before,))
    names = state(d2)[0]
    h.check(names in (["m1", "m2"], ["m1", "m2", "m3"]),
            "mirrors after the unknown outcome and a restart: %r" % names)
    for p in range(PARTS):
        mt.produce_tagged(src_c.bootstrap, T, p, 10, "after-%d" % p)
    mt.wait_caught_up(d2, "m1", 120, "the records after the restart",
                      count=PARTS)
    mt.same_batches(src_c.bootstrap, dst_c.bootstrap, T, range(PARTS))
    print("restarted: mirrors %r, the states as before, copying on"
          % (names,), flush=True)


if __name__ == "__main__":
    h.run_main(main)
