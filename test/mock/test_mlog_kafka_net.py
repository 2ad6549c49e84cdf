#!/usr/bin/env python3
"""The replicated metadata log's connections when the destination broker
goes away (storage.backend: kafka, real Kafka 4.4; the log talks to Kafka
through kconn on a network thread of its own, lib/metadata/mlog_kafka_net.c):

  * the destination broker stopped while a write is in flight (a
    CreateMirror waiting for its Produce; ListMirrors answered meanwhile,
    without it) and started again within storage.kafka.timeout_ms: the
    write completes on a new connection, the next write works, and a
    restarted mirrord replays both;
  * the broker down for longer than storage.kafka.timeout_ms: the write
    fails with a message naming the topic, the broker's address and the
    timeout, and the daemon stays up; as nothing was sent (the connection
    was known closed) the log stays writable: once the broker is back the
    next write works without a restart;
  * mirrord started while the only bootstrap server is down, or with one
    that accepts connections and never answers: it exits 1 with a message
    naming the broker it could not reach (and the timeout).
"""

import os
import socket
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")


def daemon(dst, name, topic, timeout_ms):
    return mt.Mirrord(destination=dst.bootstrap, name=name, start=False,
                      storage_kafka={"secret_key_file": KEY, "topic": topic,
                                     "timeout_ms": timeout_ms})


def mirror_props(d, src, n):
    path = os.path.join(d.dir, "m%d.properties" % n)
    with open(path, "w") as f:
        f.write("bootstrap.servers=%s\n" % src.bootstrap)
    return path


WRITING = "its change is being written to the metadata log"


class Silent:
    """A destination address that accepts TCP connections and never
    answers (no ApiVersions response)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.bootstrap = "127.0.0.1:%d" % self.sock.getsockname()[1]


def main():
    # ---- a bootstrap server that never answers -------------------------
    silent = Silent()
    s = daemon(silent, "s", "mlogk-net-silent-" + RUN, 3000)
    s.start(wait=False)
    h.check(s.proc.wait(60) == 1, "mirrord started without its metadata log")
    out = s.proc.output()
    h.check("cannot reach the destination cluster" in out and
            silent.bootstrap in out and "timed out" in out,
            "the start-up failure does not name the silent broker %s and "
            "the timeout:\n%s" % (silent.bootstrap, s.proc.tail()))
    print("silent broker: %s" % [x for x in out.splitlines()
                                 if silent.bootstrap in x][-1])

    src, dst = h.private_kafka(2)
    topic = "mlogk-net-" + RUN
    broker = dst.bootstrap.split(",")[0]

    # ---- the broker restarted while a write waits for it ---------------
    a = daemon(dst, "a", topic, 120000)
    a.start()
    a.create("m1", {"bootstrap.servers": src.bootstrap})
    # m1's source cluster id is learnt after its creation and recorded by
    # a metadata write of mirrord's own, which the operator's next write
    # waits for: recorded before the broker stops, or m2 would wait for it
    # (up to storage.kafka.timeout_ms), not for its own write.
    h.wait_for(lambda: src.cluster_id in a.cli_ok("--list").stdout, 60,
               "m1's source cluster id %s in --list" % src.cluster_id)
    dst.stop()
    print("%s destination broker stopped" % time.strftime("%H:%M:%S"),
          flush=True)
    cmd = os.path.join(a.dir, "slow.properties")
    with open(cmd, "w") as f:
        f.write("request.timeout.ms=150000\n")
    writing = a.log().count(WRITING)
    racing = subprocess.Popen(
        [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
         a.bootstrap, "--command-config", cmd, "--create", "--mirror", "m2",
         "--mirror-config", mirror_props(a, src, 2)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The write cannot land while the broker is down: the command waits
    # for it, and the CLI for mirrord.  The loop does not: it answers
    # ListMirrors meanwhile, from the durable state.
    h.wait_for(lambda: racing.poll() is not None or
               a.log().count(WRITING) > writing, 60,
               "the metadata write of m2 to start")
    listed = a.cli_ok("--list").stdout.split()
    if racing.poll() is not None:
        h.fail("CreateMirror m2 answered while the metadata log's broker "
               "is down: %r" % (racing.communicate(),))
    h.check("m1" in listed and "m2" not in listed, "ListMirrors while m2 "
            "is being written: %r" % listed)
    print("%s the write waits; starting the broker again"
          % time.strftime("%H:%M:%S"), flush=True)
    dst.launch()
    dst.wait_ready(time.monotonic() + 180)
    print("%s destination broker ready" % time.strftime("%H:%M:%S"),
          flush=True)
    out, err = racing.communicate(timeout=170)
    h.check(racing.returncode == 0, "CreateMirror m2 across the broker "
            "restart failed: %s %s\n%s" % (out, err, a.proc.tail()))
    a.create("m3", {"bootstrap.servers": src.bootstrap})
    names = a.cli_ok("--list").stdout.split()
    h.check({"m1", "m2", "m3"} <= set(names), "mirrors missing: %r" % names)
    # Every source cluster id recorded, so that b, started on this log,
    # has none to learn and record while the broker is down below.
    h.wait_for(lambda: a.cli_ok("--list").stdout.count(src.cluster_id) == 3,
               60, "the source cluster id of m1, m2 and m3 in --list")
    h.check(a.stop() == 0, "mirrord a did not stop cleanly")
    a.start()
    names = a.cli_ok("--list").stdout.split()
    h.check({"m1", "m2", "m3"} <= set(names),
            "mirrors missing after a restart: %r" % names)
    a.stop()
    print("a write across a broker restart: completed and replayed")

    # ---- the broker down past storage.kafka.timeout_ms -----------------
    b = daemon(dst, "b", topic, 4000)
    b.start()
    dst.stop()
    r = b.create("m4", {"bootstrap.servers": src.bootstrap}, expect_ok=False)
    h.check(r.returncode != 0, "CreateMirror m4 succeeded with the "
            "metadata log's broker down")
    msg = r.stdout + r.stderr
    h.check("storage.kafka.timeout_ms (4000 ms)" in msg and topic in msg
            and broker in msg,
            "the failed write does not name the topic, the broker %s and "
            "the timeout: %r" % (broker, msg))
    h.check(b.proc.alive(), "mirrord exited after a failed write:\n"
            + b.proc.tail())
    names = b.cli_ok("--list").stdout.split()
    h.check("m4" not in names, "m4 listed after its write failed: %r" % names)
    print("a write with the broker down: %s" % msg.strip().splitlines()[-1])
    # Nothing was sent (the connection was known closed): the outcome is
    # not unknown, so the log stays writable once the broker is back.
    h.check("outcome is unknown" not in msg, "a write never sent is "
            "reported as of unknown outcome: %r" % msg)
    dst.launch()
    dst.wait_ready(time.monotonic() + 180)
    b.create("m5", {"bootstrap.servers": src.bootstrap})
    names = b.cli_ok("--list").stdout.split()
    h.check("m5" in names and "m4" not in names,
            "after the broker is back: %r" % names)
    b.stop()
    dst.stop()

    # ---- start with the broker down ------------------------------------
    c = daemon(dst, "c", topic, 4000)
    c.start(wait=False)
    h.check(c.proc.wait(60) == 1, "mirrord started without its metadata log")
    out = c.proc.output()
    h.check("cannot reach the destination cluster" in out and broker in out,
            "the start-up failure does not name the broker %s:\n%s"
            % (broker, c.proc.tail()))
    print("ok")


h.run_main(main)
