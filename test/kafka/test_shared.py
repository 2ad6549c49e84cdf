#!/usr/bin/env python3
"""The shared clusters across test processes: two tests arriving at once
get the same clusters from one supervisor; a test killed with SIGKILL
loses its lease; once no test holds one the clusters stop by themselves
and nothing is left running."""
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
root = os.path.join(h.test_dir(), "shared")

USER = """
import json, sys
sys.path.insert(0, %r)
import realkafka as rk
lease = rk.shared(2, root=%r)
st = json.load(open(%r))
print(json.dumps({"bootstrap": [c.bootstrap for c in lease.clusters],
                  "supervisor": st["pid"], "reused": lease.reused}), flush=True)
sys.stdin.readline()  # hold the lease until told to go
""" % (h.src_path("test", "kafka"), root, os.path.join(root, "state.json"))


def procs_under(path):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if path.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


env = dict(os.environ, MIRRORD_KAFKA_IDLE="3")
users = [subprocess.Popen([sys.executable, "-c", USER], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, start_new_session=True)
         for _ in range(2)]
try:
    got = [json.loads(u.stdout.readline() or "null") for u in users]
    h.check(None not in got, "a user got no clusters: %r" % got)
    h.check(got[0]["bootstrap"] == got[1]["bootstrap"]
            and got[0]["supervisor"] == got[1]["supervisor"],
            "two tests got different clusters: %r" % got)
    h.check(sorted(g["reused"] for g in got) == [False, True],
            "want one starter and one reuser: %r" % got)
    sup = got[0]["supervisor"]
    leases = os.path.join(root, "leases")
    h.check(len(os.listdir(leases)) == 2, "leases %r" % os.listdir(leases))

    # A user dies without cleaning up: the clusters stay for the other.
    users[0].kill()
    users[0].wait(10)
    h.wait_for(lambda: len(os.listdir(leases)) == 1, 30,
               "the dead user's lease to be pruned")
    h.check(os.path.exists("/proc/%d" % sup), "supervisor gone while in use")
    for b in got[1]["bootstrap"]:
        host, port = b.split(":")
        rk.api_versions(host, int(port))  # still answering

    # The last user leaves: after the idle time everything stops.
    users[1].stdin.write("bye\n")
    users[1].stdin.flush()
    h.check(users[1].wait(60) == 0, "the second user failed")
    h.check(os.listdir(leases) == [], "lease kept after a clean exit")
    h.wait_for(lambda: procs_under(root) == [], 90,
               "the idle shared clusters to stop")
    h.check(not os.path.exists(os.path.join(root, "state.json")),
            "state.json kept after the idle stop")
    with open(os.path.join(root, "supervisor.log")) as f:
        h.check("no user for 3s, stopping" in f.read(),
                "supervisor.log does not say why it stopped")
finally:
    for u in users:
        if u.poll() is None:
            os.killpg(u.pid, signal.SIGKILL)
            u.wait(10)
    rk.cmd_stop(type("A", (), {"dir": root})())  # whatever is left
print("PASS: one supervisor for concurrent users, leases pruned, idle stop")
