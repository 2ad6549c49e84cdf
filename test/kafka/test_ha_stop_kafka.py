#!/usr/bin/env python3
"""Several mirrord instances (cluster.enabled) on real Kafka 4.4:
what an operator sees while the metadata writer is stopped (SIGSTOP).

A 3-broker destination, a 1-broker source, three instances a, b, c beside
brokers 1, 2, 3 sharing the metadata log (test_ha_kafka.py's set-up), a
session timeout long enough that the stopped writer stays the group's
leader for a while, under continuous load:

  * the writer is stopped: every follower still answers ListMirrors and
    DescribeMirrors within a few seconds with the state it has (the
    mirror, every partition, its state);
  * a mutation (PauseMirrorTopics) sent to a follower ends within the
    client's request.timeout.ms (set to storage.kafka.timeout_ms) with
    exit status 3 and a message naming the writer instance, its address
    and that it did not answer (REQUEST_TIMED_OUT, outcome unknown), not a
    hang; the follower answers ListMirrors and DescribeMirrors meanwhile;
  * SIGCONT: a mutation through a follower succeeds, and every instance
    shows the same metadata (the partitions PAUSED, then MIRRORING again);
  * the writer stopped past the session timeout: the group elects another
    writer, a mutation through the remaining follower succeeds while the
    old writer is still stopped; after SIGCONT it follows, one writer, the
    same metadata everywhere;
  * at the end every destination partition equals its source partition
    record by record: 0 lost, 0 duplicated.
"""

import os
import signal
import subprocess
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import test_ha_kafka as ha  # noqa: E402  (instance, Load, one_writer, ...)

TOPIC, PARTS = ha.TOPIC, ha.PARTS
SESSION_MS = 25000       # the stopped writer stays the leader this long
STORAGE_TIMEOUT_MS = 10000   # storage.kafka.timeout_ms of ha.instance()
ANSWER_S = 5             # a read-only RPC on a follower answers within


def timed(fn, *args):
    t = time.monotonic()
    out = fn(*args)
    return out, time.monotonic() - t


def view(d):
    """(topic, partition, state) of every partition of m1 as d shows it."""
    return sorted((r["topic"], r["partition"], r["state"])
                  for r in d.describe_json("m1"))


def serves(d, what, want_state=None):
    """ListMirrors and DescribeMirrors on d answer within ANSWER_S with m1
    and all its partitions (in want_state when given)."""
    r, dt = timed(d.cli, "--list")
    h.check(r.returncode == 0 and "m1" in r.stdout.split(),
            "%s: ListMirrors on %s: exit %d stdout %r stderr %r"
            % (what, d.name, r.returncode, r.stdout, r.stderr))
    h.check(dt < ANSWER_S, "%s: ListMirrors on %s took %.1fs" % (what, d.name,
                                                                  dt))
    v, dt = timed(view, d)
    h.check(dt < ANSWER_S, "%s: DescribeMirrors on %s took %.1fs"
            % (what, d.name, dt))
    h.check(len(v) == PARTS, "%s: DescribeMirrors on %s shows %d partitions "
            "of m1, want %d: %r" % (what, d.name, len(v), PARTS, v))
    if want_state is not None:
        h.check(all(x[2] == want_state for x in v),
                "%s: DescribeMirrors on %s: %r, want every partition %s"
                % (what, d.name, v, want_state))
    return v


def same_everywhere(ds, state, timeout=60):
    want = [(TOPIC, p, state) for p in range(PARTS)]
    h.wait_for(lambda: all(view(d) == want for d in ds), timeout,
               "every instance to show every partition of m1 %s: %r"
               % (state, {d.name: view(d) for d in ds}))


def main():
    ha.SESSION_MS = SESSION_MS   # read by ha.instance()
    src, = h.real_kafka(1)
    dst, = h.private_kafka(1, brokers=3)
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(TOPIC, partitions=PARTS)
    t0 = time.monotonic()

    ds = [ha.instance(DST, n, b) for n, b in (("a", 1), ("b", 2), ("c", 3))]
    w, load = ha.start_mirroring(ds, SRC)
    h.wait_for(lambda: ha.hwms(DST) is not None and all(ha.hwms(DST)), 120,
               "every destination partition to receive records (%r)"
               % (ha.hwms(DST),))
    same_everywhere(ds, "MIRRORING")
    print("writer %s; mirroring on every instance (%.0fs)"
          % (w.name, time.monotonic() - t0), flush=True)

    cfg = os.path.join(h.test_dir(), "cli.properties")
    with open(cfg, "w") as f:
        f.write("request.timeout.ms=%d\n" % STORAGE_TIMEOUT_MS)

    # ---- the writer stopped, within the session timeout ------------------
    followers = [d for d in ds if d is not w]
    w.proc.signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    for f in followers:
        serves(f, "writer %s stopped" % w.name, "MIRRORING")
    f = followers[0]
    mut = {}

    def pause():
        t = time.monotonic()
        mut["r"] = subprocess.run(
            [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
             f.bootstrap, "--command-config", cfg, "--pause", "--mirror",
             "m1", "--topic", TOPIC], capture_output=True, text=True,
            timeout=120)
        mut["dt"] = time.monotonic() - t
    th = threading.Thread(target=pause)
    th.start()
    # The follower serves other requests while the mutation waits.
    n = 0
    while th.is_alive():
        serves(f, "a mutation waiting on the stopped writer", "MIRRORING")
        n += 1
        time.sleep(0.5)
    th.join()
    r, dt = mut["r"], mut["dt"]
    print("pause through follower %s with writer %s stopped: exit %d in "
          "%.1fs: %s (%d reads served meanwhile)" % (
              f.name, w.name, r.returncode, dt, r.stderr.strip(), n),
          flush=True)
    h.check(time.monotonic() - stopped_at < SESSION_MS / 1000,
            "the checks took longer than the session timeout: the group may "
            "have elected another writer")
    h.check(r.returncode == 3, "pause with the writer stopped: exit %d, want "
            "3 (mirrord could not be reached): %r" % (r.returncode, r.stderr))
    h.check(dt < STORAGE_TIMEOUT_MS / 1000 + 10,
            "pause with the writer stopped took %.1fs (request.timeout.ms %d)"
            % (dt, STORAGE_TIMEOUT_MS))
    for want in ("REQUEST_TIMED_OUT", "metadata writer",
                 "instance %s" % w.name, w.bootstrap,
                 "did not answer within %d ms" % STORAGE_TIMEOUT_MS,
                 "outcome is unknown"):
        h.check(want in r.stderr, "pause with the writer stopped: %r does "
                "not say %r" % (r.stderr, want))
    h.check(n >= 2, "only %d reads served while the mutation waited" % n)

    # ---- SIGCONT: mutations work again, the same metadata everywhere -----
    w.proc.signal(signal.SIGCONT)
    ha.one_writer(ds, "after SIGCONT of %s" % w.name, timeout=90)
    # The outcome was unknown: the writer read the request before it
    # stopped or reads it now, and may apply it.  Either way every
    # instance ends up showing the same.
    settled = []

    def agreed():
        vs = [view(d) for d in ds]
        states = {x[2] for v in vs for x in v}
        if (all(v == vs[0] for v in vs) and len(vs[0]) == PARTS and
                len(states) == 1 and states <= {"PAUSED", "MIRRORING"}):
            settled[:] = list(states)
            return True
        return False
    h.wait_for(agreed, 60, "every instance to show the same state of m1 "
               "after SIGCONT: %r" % {d.name: view(d) for d in ds})
    print("after SIGCONT the unanswered pause was %s: every partition %s on "
          "every instance" % ("applied" if settled[0] == "PAUSED" else
                              "not applied", settled[0]), flush=True)
    if settled[0] == "PAUSED":
        f.cli_ok("--resume", "--mirror", "m1", "--topic", TOPIC)
        same_everywhere(ds, "MIRRORING")
    f.cli_ok("--pause", "--mirror", "m1", "--topic", TOPIC)
    same_everywhere(ds, "PAUSED")
    f.cli_ok("--resume", "--mirror", "m1", "--topic", TOPIC)
    same_everywhere(ds, "MIRRORING")
    print("SIGCONT %s: pause and resume through %s, the same metadata on "
          "every instance (%.0fs)" % (w.name, f.name, time.monotonic() - t0),
          flush=True)

    # ---- the writer stopped past the session timeout ---------------------
    w = ha.one_writer(ds, "before the second stop")
    rest = [d for d in ds if d is not w]
    w.proc.signal(signal.SIGSTOP)
    for d in rest:
        serves(d, "writer %s stopped again" % w.name)
    w2 = ha.one_writer(rest, "after SIGSTOP of the writer %s past the session "
                       "timeout" % w.name, timeout=SESSION_MS / 1000 + 60)
    f2 = [d for d in rest if d is not w2][0]
    f2.cli_ok("--pause", "--mirror", "m1", "--topic", TOPIC)
    same_everywhere(rest, "PAUSED")
    print("writer %s stopped past the session timeout: new writer %s; pause "
          "through %s (%.0fs)" % (w.name, w2.name, f2.name,
                                  time.monotonic() - t0), flush=True)
    w.proc.signal(signal.SIGCONT)
    ha.one_writer(ds, "after SIGCONT of the former writer %s" % w.name,
                  timeout=90)
    same_everywhere(ds, "PAUSED")
    w.cli_ok("--resume", "--mirror", "m1", "--topic", TOPIC)
    same_everywhere(ds, "MIRRORING")

    # ---- every record once -----------------------------------------------
    load.stop()

    total = ha.check_copy(SRC, DST, load)
    print("ok: %d records (%.0fs)" % (total, time.monotonic() - t0))


if __name__ == "__main__":
    h.run_main(main)
