#!/usr/bin/env python3
"""The launcher leaves no process behind: after `stop`, after SIGTERM to a
foreground `start`, and when its supervisor is SIGKILLed."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

rk = h.realkafka()
try:
    rk.ensure_libs()
except rk.Unavailable as e:
    h.skip("real Kafka tier: %s" % e)
launcher = h.src_path("test", "kafka", "realkafka.py")
d = os.path.join(h.test_dir(), "clusters")


def procs_under(path):
    """pids whose command line mentions path (our brokers and launcher)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if path in cmd:
            found.append((int(pid), cmd[:120]))
    return found


def start_detached(n):
    p = subprocess.run([sys.executable, launcher, "start", "--clusters", str(n),
                        "--dir", d, "--detach"], capture_output=True,
                       text=True, timeout=300)
    h.check(p.returncode == 0, "start --detach: %s" % p.stderr)
    state = json.loads(p.stdout)
    h.check(len(state["clusters"]) == n, "state %r" % state)
    for c in state["clusters"]:
        host, port = c["bootstrap"].split(":")
        rk.api_versions(host, int(port))  # raises unless it answers
        h.check(os.path.exists("/proc/%d" % c["pid"]), "broker pid missing")
    return state


# 1. start --detach, stop.
state = start_detached(2)
h.check(len(procs_under(d)) == 3, "want 2 brokers + supervisor: %r"
        % procs_under(d))
p = subprocess.run([sys.executable, launcher, "stop", "--dir", d],
                   capture_output=True, text=True, timeout=120)
h.check(p.returncode == 0, "stop: %s" % p.stderr)
h.check(procs_under(d) == [], "left after stop: %r" % procs_under(d))
h.check(not os.path.exists(os.path.join(d, "state.json")), "state.json kept")

# 2. the supervisor dies by SIGKILL: its brokers follow (PR_SET_PDEATHSIG).
state = start_detached(1)
os.kill(state["pid"], signal.SIGKILL)
h.wait_for(lambda: procs_under(d) == [], 60,
           "brokers to exit after their supervisor was killed")

# 3. foreground start, SIGTERM.
fg = h.Proc([sys.executable, launcher, "start", "--clusters", "1",
             "--dir", d], name="foreground")
h.wait_for(lambda: '"status": "ready"' in fg.output(), 180,
           "the foreground launcher to print its JSON")
h.check(len(procs_under(d)) == 2, "want broker + launcher: %r" % procs_under(d))
fg.signal(signal.SIGTERM)
rc = fg.wait(120)
h.check(rc == 0, "foreground launcher exit %d: %s" % (rc, fg.tail()))
h.check(procs_under(d) == [], "left after SIGTERM: %r" % procs_under(d))
print("PASS: no process left after stop, supervisor SIGKILL and SIGTERM")
