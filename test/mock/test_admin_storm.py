#!/usr/bin/env python3
"""Operators' commands from several clients at once, while the data plane
copies under load and writes its own metadata (an operator's write does
not block the loop; it waits its turn, and the data plane's writes made
meanwhile are held and checked again once it is applied):

  * four clients for 20 s: three pause and resume one topic each, over
    and over (each answer a success, or the refusal the state calls for:
    already paused, not paused), one creates and deletes mirrors and
    lists them;
  * half way mirrord is killed (-9) and started again: it replays its
    log (no record that does not apply: it would not start), and the
    clients go on; only the commands it was serving then are cut;
  * nothing is answered with an internal or storage error, mirrord logs
    no record that does not apply, and the data plane's writes held
    behind the commands are counted (/metrics);
  * everything resumed, every partition catches up with the same batches
    at the same offsets; after kill -9 the metadata log replays to the
    same mirrors and states, and copying goes on.
"""

import os
import random
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

TOPICS = {"s0": 16, "s1": 16, "s2": 16}
SECONDS = 20
# Between the writer's rounds of one record per partition: about 900
# records a second, below what an ASan build of mirrord copies on a loaded
# 2-core machine (some 1,900).  A writer going as fast as Python can
# (3,600 a second) outruns it, and no partition ever catches up.
PAUSE = 0.05
OK_REFUSALS = ("MIRROR_TOPIC_ALREADY_PAUSED", "MIRROR_TOPIC_NOT_PAUSED")


def listed(d):
    r = d.cli_ok("--list")
    return sorted(x.split()[0] for x in r.stdout.splitlines()[1:]
                  if x.strip() and x.split()[0] != "No")


def state(d):
    rows = d.describe_json()
    keep = ("mirror", "topic", "partition", "state")
    return listed(d), sorted(tuple((k, r.get(k)) for k in keep) for r in rows)


MC = []


def main():
    mc, src, dst = mt.mock_pair(TOPICS)
    MC.append(mc)
    d = mt.Mirrord(destination=dst)
    d.create("m1", {"bootstrap.servers": src,
                    "mirror.fetch.wait.max.ms": "50"})
    d.cli_ok("--add", "--mirror", "m1", "--topic", ",".join(sorted(TOPICS)))
    layout = {t: list(range(n)) for t, n in TOPICS.items()}
    # The first records, then every partition caught up with them: lag 0
    # on all 48 partitions at one moment, so the writer stops first.
    w = mt.LayoutWriter(src, layout, pause=PAUSE)
    w.start()
    time.sleep(2)
    w.stop()
    mt.wait_caught_up(d, "m1", 120, "the first records",
                      count=sum(TOPICS.values()))
    # The load of the storm: written until everything is resumed below.
    w = mt.LayoutWriter(src, layout, pause=PAUSE)
    w.start()

    rnd = random.Random(12)
    errors, counts = [], {"ok": 0, "refused": 0, "cut": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS
    # mirrord is killed (-9) once, half way: a command it was serving then
    # is cut (the client sees the connection go), and that is all.
    crash = {"epoch": 0, "down": False}

    def run(what, fn):
        """fn()'s CompletedProcess, or None when a crash cut it."""
        e0 = crash["epoch"]
        r = fn()
        with lock:
            if r.returncode != 0 and (crash["down"] or crash["epoch"] != e0):
                counts["cut"] += 1
                return None
            if r.returncode == 0:
                counts["ok"] += 1
            elif any(x in r.stderr for x in OK_REFUSALS):
                counts["refused"] += 1
            else:
                errors.append("%s: exit %d: %s %s" % (what, r.returncode,
                                                      r.stdout, r.stderr))
        return r

    def flipper(topic, seed):
        my = random.Random(seed)
        while time.monotonic() < deadline:
            op = my.choice(("--pause", "--resume"))
            run("%s %s" % (op, topic), lambda: d.cli(
                op, "--mirror", "m1", "--topic", topic, timeout=30))
            time.sleep(my.random() * 0.2)

    def mirrors():
        k = 0
        while time.monotonic() < deadline:
            k += 1
            name = "x%d" % k
            r = run("create %s" % name, lambda: d.create(
                name, {"bootstrap.servers": src}, expect_ok=False))
            lr = run("list", lambda: d.cli("--list", timeout=30))
            if r is not None and r.returncode == 0 and lr is not None:
                names = [x.split()[0] for x in lr.stdout.splitlines()[1:]
                         if x.strip()]
                with lock:
                    if "m1" not in names or name not in names:
                        errors.append("list after creating %s: %r"
                                      % (name, names))
            if k % 2 == 0:
                run("delete %s" % name, lambda: d.cli(
                    "--delete", "--mirror", name, timeout=30))
            time.sleep(rnd.random() * 0.1)

    threads = [threading.Thread(target=flipper, args=(t, i))
               for i, t in enumerate(sorted(TOPICS))]
    threads.append(threading.Thread(target=mirrors))
    for t in threads:
        t.start()
    time.sleep(SECONDS / 2)
    with lock:
        crash["down"] = True
        crash["epoch"] += 1
    d.kill9()
    d.start()
    time.sleep(0.5)
    with lock:
        crash["down"] = False
        crash["epoch"] += 1
    print("killed (-9) and restarted half way: the log replayed", flush=True)
    for t in threads:
        t.join(SECONDS + 120)
    h.check(not any(t.is_alive() for t in threads), "a client hung")
    h.check(not errors, "%d commands failed; the first: %s"
            % (len(errors), errors[:3]))
    held = mt.metric_value(d, "mirrord_metadata_log_held_writes_total")
    refused = mt.metric_value(d, "mirrord_metadata_log_held_refused_total")
    loop = mt.metric_value(d, "mirrord_metadata_log_loop_writes_total")
    print("%d commands answered, %d refused as the state called for, %d "
          "cut by the crash; since the restart %.0f data-plane writes held "
          "behind them, %.0f dropped as stale, %.0f metadata writes on the "
          "event loop"
          % (counts["ok"], counts["refused"], counts["cut"], held, refused,
             loop), flush=True)
    h.check(counts["ok"] > 20, "too few commands went through: %r" % counts)
    log = d.log()
    for bad in ("record does not apply", "internal error", "cannot record"):
        h.check(bad not in log, "mirrord logged %r" % bad)

    # Everything resumed: every partition catches up, batch for batch.
    for t in sorted(TOPICS):
        r = d.cli("--resume", "--mirror", "m1", "--topic", t)
        h.check(r.returncode == 0 or "MIRROR_TOPIC_NOT_PAUSED" in r.stderr,
                "resume %s: %s" % (t, r.stderr))
    w.stop()
    mt.wait_caught_up(d, "m1", 120, "every partition after the storm",
                      count=sum(TOPICS.values()), fail_on_failed=True)
    n = sum(mt.same_batches(src, dst, t, range(p)) for t, p in TOPICS.items())
    before = state(d)
    d.kill9()
    d.start()
    h.wait_for(lambda: state(d) == before, 60,
               "the restarted mirrord to replay the same mirrors and states")
    w = mt.LayoutWriter(src, layout, pause=PAUSE)
    w.start()
    time.sleep(2)
    w.stop()
    mt.wait_caught_up(d, "m1", 120, "the records after the restart",
                      count=sum(TOPICS.values()), fail_on_failed=True)
    m = sum(mt.same_batches(src, dst, t, range(p)) for t, p in TOPICS.items())
    h.check(m > n, "nothing more copied after the restart")
    print("after the storm: %d records equal, batch for batch; after kill -9 "
          "%d mirrors and %d partition states replayed, %d records equal"
          % (n, len(before[0]), len(before[1]), m), flush=True)


if __name__ == "__main__":
    h.run_main(main, lambda: MC and MC[0].kill())
