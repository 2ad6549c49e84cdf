#!/usr/bin/env python3
"""A source leader epoch whose record a follower could not write is
recorded before any batch of it is sent, on real Kafka 4.4: two instances
a (the writer) and b of a group on the replicated metadata log, a private
one-broker source and destination, an idempotent load on two partitions:

  * the writer a is stopped (SIGSTOP, well within the session timeout of
    30 s: no rebalance) and the source broker restarts, so the partition
    b copies has a new leader epoch: b's record of it goes to a writer
    that does not answer, and fails once b's storage.kafka.timeout_ms (3
    s) has passed; no batch of the new epoch may reach the destination
    meanwhile (its end offsets, read after the source is back and 2 s
    after the failure, stand still);
  * a goes on (SIGCONT), b's retry records the epoch first, and a third
    instance c joins;
  * b is stopped past the session timeout, its partitions go to the others,
    which prove them from the recorded epoch history before copying.

Then every partition is MIRRORING with lag 0, the newest entry of its
epoch history in the log (test/tools/xlate_dump -k) is the source's
current leader epoch, and no instance found the source log diverged:
had b gone on copying the new epoch without recording it, the new owner
would ask the source where the old epoch ends, find it below what was
copied, and fail the partition for a divergence that never happened.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

TOPIC = "ep"
PARTS = 2
SESSION_MS = 30000


def instance(dst, name, i, timeout_ms=10000):
    return mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": os.path.join(h.test_dir(),
                                                       "secret.key"),
                       "topic": "ep-meta", "timeout_ms": timeout_ms},
        extra_yaml=("cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"ep-group\"\n"
                    "  instance_id: \"%s\"\n"
                    # Naming no broker: the one destination broker is on
                    # this host for every instance.
                    "  local_broker_id: %d\n"
                    "  session_timeout_ms: %d\n"
                    "  heartbeat_interval_ms: 1000\n"
                    "  status_interval_ms: 1000\n" % (name, 101 + i,
                                                     SESSION_MS)))


def role(d):
    try:
        m = d.metrics()
    except Exception:  # noqa: BLE001 -- stopped, or not up yet
        return None
    for r in ("writer", "follower", "joining"):
        if re.search(r'^mirrord_cluster_role\{role="%s"\} 1$' % r, m, re.M):
            return r
    return None


def owned(d):
    m = re.search(r"^mirrord_cluster_owned_partitions (\d+)", d.metrics(),
                  re.M)
    return int(m.group(1)) if m else -1


class Load(threading.Thread):
    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 5,
                           "message.timeout.ms": 300000})
        self.quit = False
        self.n = 0

    def run(self):
        while not self.quit:
            for _ in range(20):
                self.p.produce(TOPIC, partition=self.n % PARTS,
                               value=b"v%d" % self.n)
                self.n += 1
            self.p.poll(0.05)
        h.check(self.p.flush(120) == 0, "the load's records were not all "
                "delivered")


def main():
    src, dst = h.private_kafka(2)
    src.create_topic(TOPIC, PARTS)
    a, b, c = (instance(dst.bootstrap, n, i, 3000 if n == "b" else 10000)
               for i, n in enumerate("abc"))
    a.start()
    h.wait_for(lambda: role(a) == "writer", 60, "a to be the writer")
    b.start()
    h.wait_for(lambda: role(b) == "follower", 60, "b to be a follower")
    a.create("m", {"bootstrap.servers": src.bootstrap,
                   "mirror.fetch.wait.max.ms": "200",
                   "mirror.failed.retry.initial.backoff.ms": "200",
                   "mirror.failed.retry.max.backoff.ms": "1000",
                   "mirror.failed.retry.max.attempts": "32767",
                   "mirror.metadata.refresh.interval.ms": "1000"})
    a.cli_ok("--add", "--mirror", "m", "--topic", TOPIC)
    load = Load(src.bootstrap)
    load.start()
    h.wait_for(lambda: all(x["state"] == "MIRRORING" and x["lag"] == 0
                           for x in a.describe_json("m")) and owned(b) > 0,
               90, "both partitions MIRRORING, b copying one")
    epoch0 = src.partition(TOPIC, 0)["leader_epoch"]

    # A new leader epoch on the source while the writer does not answer:
    # b's record of it fails.
    mark, bmark = len(a.log()), len(b.log())
    a.proc.signal(signal.SIGSTOP)
    t_stop = time.monotonic()
    try:
        src.stop()
        src.launch()
        src.wait_ready(time.monotonic() + 180)
        epoch1 = src.partition(TOPIC, 0)["leader_epoch"]
        h.check(epoch1 > epoch0, "the source's leader epoch did not move "
                "(%d, then %d)" % (epoch0, epoch1))
        # Every batch from here on is of the new epoch, which b cannot
        # record, and a (stopped) copies nothing: the destination stands.
        ends = mt.end_offsets(dst.bootstrap, TOPIC, PARTS)
        # (Copying an idempotent load, b has nothing else to record.)
        h.wait_for(lambda: re.search(r"epoch history: |cannot record ",
                                     b.log()[bmark:]) is not None, 60,
                   "b's record of epoch %d to fail" % epoch1)
        time.sleep(2)
        after = mt.end_offsets(dst.bootstrap, TOPIC, PARTS)
        frozen = time.monotonic() - t_stop
    finally:
        a.proc.signal(signal.SIGCONT)
    h.check(frozen < SESSION_MS / 1000, "the writer was stopped %.1f s, past "
            "the session timeout: the test needs no rebalance meanwhile"
            % frozen)
    print("source restarted: leader epoch %d -> %d; b's record of it failed "
          "while the writer was stopped (%.1f s)" % (epoch0, epoch1, frozen),
          flush=True)
    h.check(len(re.findall(r"cluster: joined group", a.log()[mark:])) == 0,
            "a rebalance happened while the writer was stopped")
    h.check(after == ends, "batches of leader epoch %d reached the "
            "destination while their epoch was not recorded: ends %r, 2 s "
            "after the failed record %r" % (epoch1, ends, after))

    # A third instance joins.
    c.start()
    h.wait_for(lambda: sorted(role(d) for d in (a, b, c)) ==
               ["follower", "follower", "writer"], 90, "one writer, two "
               "followers")
    h.wait_for(lambda: all(x["state"] == "MIRRORING" and x["lag"] == 0
                           for x in a.describe_json("m")), 90,
               "every partition caught up after the rebalance")

    # b's partitions to the others, proven from the recorded history.
    b.proc.signal(signal.SIGSTOP)
    try:
        h.wait_for(lambda: owned(a) + owned(c) == PARTS, SESSION_MS / 1000 + 60,
                   "a and c to copy every partition")
        load.quit = True
        load.join(180)

        def settled():
            rows = a.describe_json("m")
            return len(rows) == PARTS and all(
                x["state"] == "MIRRORING" and x["lag"] == 0 for x in rows)
        try:
            h.wait_for(settled, 60, "every partition MIRRORING with lag 0")
        except AssertionError:
            h.fail("not settled: %r" % [(x["partition"], x["state"],
                                         x["errorMessage"])
                                        for x in a.describe_json("m")])
    finally:
        b.proc.signal(signal.SIGCONT)
    # The epoch histories, read from the log's topic as a follower reads it.
    r = subprocess.run([h.build_path("test", "tools", "xlate_dump"), "-k",
                        dst.bootstrap, "ep-meta", "m"], capture_output=True,
                       text=True, timeout=120)
    h.check(r.returncode == 0, "xlate_dump: %s" % r.stderr)
    hist = {p: [] for p in range(PARTS)}
    for line in r.stdout.splitlines():
        f = line.split()
        if f[0] == "E":
            hist[int(f[2])].append(int(f[3]))
    for p in range(PARTS):
        want = src.partition(TOPIC, p)["leader_epoch"]
        h.check(hist[p] and hist[p][-1] == want, "the epoch history of "
                "%s-%d is %r: its newest epoch is not the source's %d"
                % (TOPIC, p, hist[p], want))
    for d in (a, b, c):
        h.check("source log diverged" not in d.log(), "%s found the source "
                "log diverged:\n%s" % (d.name, "\n".join(
                    ln for ln in d.log().splitlines() if "diverged" in ln)))
    print("ok: both partitions MIRRORING at epoch %d, no divergence"
          % epoch1, flush=True)


if __name__ == "__main__":
    h.run_main(main)
