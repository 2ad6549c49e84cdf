#!/usr/bin/env python3
"""Black-box test of mirrord as a Unix daemon, mirroring between two mock
clusters: sd_notify READY/RELOADING/STOPPING on a real notify socket,
/healthz and /readyz, /metrics clean under promtool with per-partition
series equal to what DescribeMirrors shows, SIGHUP with a good and a bad
file, --check-config, and SIGTERM under load exiting 0 with nothing lost.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402


class NotifySocket:
    """A systemd-style notify socket collecting every datagram."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.msgs = []
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            try:
                self.msgs.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def seen(self, word):
        return any(word in m.split("\n") for m in self.msgs)


mc, SRC, DST = mt.mock_pair({"ops": 2}, brokers=3)

# --check-config: a valid file passes, a broken one lists every error.
d = mt.Mirrord(destination=DST, start=False)
r = subprocess.run([h.build_path("daemon", "mirrord"), "--check-config",
                    d.config_path], capture_output=True, text=True, timeout=30)
eq(r.returncode, 0, "--check-config on a valid file (%s)" % r.stderr)
bad = os.path.join(h.test_dir(), "bad.yaml")
with open(bad, "w") as f:
    f.write("server:\n  listen: \"nohost\"\n  nodeid: 3\nlog:\n  level: loud\n")
r = subprocess.run([h.build_path("daemon", "mirrord"), "--check-config", bad],
                   capture_output=True, text=True, timeout=30)
eq(r.returncode, 1, "--check-config on a bad file")
for frag in ("bad.yaml:2:", "bad.yaml:3:", "bad.yaml:5:", "node_id",
             "destination.bootstrap_servers"):
    h.check(frag in r.stderr, "--check-config names %r:\n%s" % (frag, r.stderr))

# Under systemd (JOURNAL_STREAM set) lines carry syslog priority prefixes
# for journald; in a terminal they carry a timestamp and the level.
env = dict(os.environ, JOURNAL_STREAM="8:12345")
r = subprocess.run([h.build_path("daemon", "mirrord"), "-c", bad],
                   capture_output=True, text=True, timeout=30, env=env)
eq(r.returncode, 1, "mirrord with a bad config exits 1")
lines = r.stderr.splitlines()
h.check(lines and all(l.startswith("<3>") for l in lines),
        "journald priority prefixes on every error line:\n" + r.stderr)
h.check(any("bad.yaml:5:" in l and "level" in l for l in lines),
        "the config error reaches the journal with file:line:\n" + r.stderr)
env.pop("JOURNAL_STREAM")
r = subprocess.run([h.build_path("daemon", "mirrord"), "-c", bad],
                   capture_output=True, text=True, timeout=30, env=env)
h.check(all(" mirrord[" in l and " error: " in l for l in r.stderr.splitlines()),
        "timestamped lines with the level in a terminal:\n" + r.stderr)

# Start under a notify socket, as systemd would.
ns = NotifySocket(os.path.join(h.test_dir(), "notify.sock"))
os.environ["NOTIFY_SOCKET"] = ns.path
d.start()
del os.environ["NOTIFY_SOCKET"]
h.wait_for(lambda: ns.seen("READY=1"), 30, "READY=1 on the notify socket")
eq(mt.http_get(d.metrics_port, "/healthz")[0], 200, "/healthz")
h.wait_for(lambda: mt.http_get(d.metrics_port, "/readyz")[0] == 200, 60,
           "/readyz to turn ready once the destination answers")
eq(mt.http_get(d.metrics_port, "/nope")[0], 404, "unknown path")

# Mirror some data so the per-partition series have values.
d.create("ops", {"bootstrap.servers": SRC})
d.cli_ok("--add", "--mirror", "ops", "--topic", "ops")
lines = "".join("k%d\tv%d\n" % (i, i) for i in range(500))
r = subprocess.run(["kcat", "-P", "-b", SRC, "-t", "ops", "-K", "\t",
                    "-X", "compression.codec=lz4"], input=lines,
                   capture_output=True, text=True, timeout=60)
eq(r.returncode, 0, "kcat produce: " + r.stderr)
src = kraw.Cluster(SRC)
want = {p: src.offsets("ops", p)[1] for p in range(2)}
h.wait_for(lambda: all(x["lag"] == 0 and x["destinationOffset"] == want[x["partition"]]
                       for x in d.describe_json("ops")), 60, "lag 0")

body = d.metrics()
promtool = shutil.which("promtool")
if promtool:
    r = subprocess.run([promtool, "check", "metrics"], input=body,
                       capture_output=True, text=True, timeout=30)
    eq((r.returncode, r.stdout + r.stderr), (0, ""), "promtool check metrics")
else:
    print("note: promtool not installed; exposition not linted")
for x in d.describe_json("ops"):
    labels = 'mirror="ops",partition="%d",topic="ops"' % x["partition"]
    for fam, val in (("mirrord_partition_destination_end_offset",
                      x["destinationOffset"]),
                     ("mirrord_partition_source_high_watermark",
                      x["sourceOffset"]),
                     ("mirrord_partition_lag_records", x["lag"])):
        found = [l for l in body.splitlines() if l.startswith(fam + "{")
                 and all(kv in l for kv in labels.split(","))]
        h.check(found, "%s series for partition %d" % (fam, x["partition"]))
        eq(float(found[0].rsplit(" ", 1)[1]), float(val),
           "%s for partition %d equals describe" % (fam, x["partition"]))
h.check('mirrord_partition_state{' in body and 'state="MIRRORING"} 1' in body,
        "partition state series")


def series(body, name):
    """{labels-string: value} of one family."""
    out = {}
    for line in body.splitlines():
        if line.startswith(name + "{"):
            labels, val = line[len(name):].rsplit(" ", 1)
            out[labels] = float(val)
    return out


lag_s = series(body, "mirrord_partition_lag_seconds")
eq(sorted(lag_s.values()), [0.0, 0.0], "lag in seconds of caught-up partitions")
conns = series(body, "mirrord_cluster_connections")
h.check(conns.get('{cluster="destination",mirror=""}', 0) >= 1,
        "open destination connections: %r" % conns)
h.check(conns.get('{cluster="source",mirror="ops"}', 0) >= 1,
        "open source connections of mirror ops: %r" % conns)
h.check('mirrord_cluster_inflight_bytes{cluster="destination",mirror=""}' in body,
        "in-flight bytes series for the destination")
h.check(series(body, "mirrord_cluster_request_duration_seconds_count"),
        "Fetch/Produce latency histograms")

# SIGHUP with a bad file: the old config stays, every error is logged.
good = open(d.config_path).read()
with open(d.config_path, "w") as f:
    f.write(good.replace("level: debug", "level: loud") + "bogus: 1\n")
ns.msgs.clear()
d.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "reload failed" in d.log(), 30, "the failed reload logged")
h.check("loud" in d.log() and "bogus" in d.log(),
        "every error of the bad file is logged")
h.check(mt.api_versions_ok(d.bootstrap), "still serving after a bad reload")
h.wait_for(lambda: ns.seen("RELOADING=1") and ns.seen("READY=1"), 10,
           "RELOADING=1 then READY=1 around the reload")

# SIGHUP with a good file: a reloadable key applies, a restart-only key is
# reported and keeps its running value.
with open(d.config_path, "w") as f:
    f.write(good.replace("level: debug", "level: info")
            .replace("node_id: 42", "node_id: 43"))
d.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "reload complete" in d.log(), 30, "the good reload")
h.check("server.node_id changed but needs a restart" in d.log(),
        "a restart-only key is reported")
r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"])
h.check("broker 42 at" in r.stdout, "node id keeps its running value")

# SIGTERM while the source is being written: exit 0, nothing lost.
stop = threading.Event()


def produce():
    i = 0
    while not stop.is_set() and i < 40:
        subprocess.run(["kcat", "-P", "-b", SRC, "-t", "ops", "-K", "\t"],
                       input="".join("x%d\t%d\n" % (i, j) for j in range(100)),
                       capture_output=True, text=True, timeout=60)
        i += 1


t = threading.Thread(target=produce)
t.start()
time.sleep(0.5)  # let some produces land; correctness does not depend on it
ns.msgs.clear()
rc = d.stop(timeout=60)
stop.set()
t.join(120)
eq(rc, 0, "exit status after SIGTERM under load")
h.check(ns.seen("STOPPING=1"), "STOPPING=1 on the notify socket")
# Restart and let it catch up: the destination equals the source.
d.start()
want = {p: src.offsets("ops", p)[1] for p in range(2)}
h.wait_for(lambda: all(x["lag"] == 0 and x["destinationOffset"] == want[x["partition"]]
                       for x in d.describe_json("ops")), 90,
           "lag 0 after the restart")
dst = kraw.Cluster(DST)
for p in range(2):
    a, b = src.batches("ops", p), dst.batches("ops", p)
    eq([x["base_offset"] for x in b], [x["base_offset"] for x in a],
       "batch offsets of partition %d" % p)
    eq([kraw.records_section(x["raw"]) for x in b],
       [kraw.records_section(x["raw"]) for x in a],
       "batch bytes of partition %d" % p)
eq(d.stop(), 0, "exit status")
ns.stop = True
print("PASS: daemon operations")
