#!/usr/bin/env python3
"""Black-box tests of the admin listener's limits against the real mirrord:
the remote crashes, hangs and resource exhaustions it must withstand, each
reproduced and answered the way a user would check.

- DescribeMirrors naming one mirror 100,000 times gets a well-formed answer
  (the mirror once); 100,000 distinct names get an answer or a clean close;
  an answer over server.max_response_bytes is POLICY_VIOLATION naming it;
  the daemon keeps answering.
- 300,000 requests pipelined behind an AddTopicsToMirror whose source
  accepts TCP and never answers are all answered, in order.
- A half-sent frame is closed after server.request_timeout_ms, an idle
  connection after server.idle_timeout_ms, each logged and counted.
- server.max_connections_per_ip refuses the next connection (counted); an
  operator gets in once the idle ones time out.  At server.max_connections
  the connection idle the longest makes room; with none idle the new one is
  refused.
- Several connections holding large partial frames keep mirrord's peak RSS
  within server.max_buffered_bytes_total plus slack; the largest is closed.
  Clients that never read their answers are closed the same way.
- limits.max_mirrors and limits.max_patterns_per_mirror through the CLI:
  POLICY_VIOLATION naming the limit and its value, existing mirrors intact;
  a reload (SIGHUP) changes the limit.
"""

import os
import re
import socket
import struct
import sys
import threading

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

MiB = 1024 * 1024

# Under AddressSanitizer freed memory sits in a quarantine (256 MB by
# default) instead of being reused, which would hide what the RSS bounds
# below are about; keep it small.  Harmless without sanitizers.
os.environ["ASAN_OPTIONS"] = ":".join(
    x for x in (os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=1") if x)


def describe_body(names):
    return mt.uvarint(len(names) + 1) + b"".join(mt.cstr(n) for n in names) + b"\x00"


def describe_top(resp):
    """(correlation id, ErrorCode, ErrorMessage, [(name, code)]) of a
    DescribeMirrors v0 response (mirror names and codes only)."""
    corr = struct.unpack(">i", resp[:4])[0]
    o = 5 + 4                                   # header tags, throttle
    err = struct.unpack(">h", resp[o:o + 2])[0]
    msg, o = mt.read_cstr(resp, o + 2)
    n, o = mt.read_uvarint(resp, o)
    mirrors = []
    if n > 0 and err == 0:
        # Only the first mirror is parsed in full; enough for our cases.
        name, o = mt.read_cstr(resp, o)
        code = struct.unpack(">h", resp[o:o + 2])[0]
        mirrors.append((name, code))
    return corr, err, msg, n - 1, mirrors


def list_mirrors_frame(corr):
    return mt.frame(98, 0, corr, b"\x00", flexible=True)


def list_ok(bootstrap):
    """ListMirrors answers with error 0 on a fresh connection."""
    with mt.connect(bootstrap) as s:
        s.sendall(list_mirrors_frame(77))
        resp = mt.recv_frame(s)
    return struct.unpack(">i", resp[:4])[0] == 77 and \
        struct.unpack(">h", resp[9:11])[0] == 0


def rejected(d, reason):
    total = 0.0
    want = 'mirrord_admin_rejected_requests_total{reason="%s"}' % reason
    for line in d.metrics().splitlines():
        if line.startswith(want + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def admin_connections(d):
    for line in d.metrics().splitlines():
        if line.startswith("mirrord_admin_connections "):
            return int(float(line.split()[1]))
    h.fail("no mirrord_admin_connections in /metrics")


def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    h.fail("no %s in /proc/%d/status" % (key, pid))


def expect_error(r, name, fragment):
    if r.returncode != 1 or name not in r.stderr or fragment not in r.stderr:
        h.fail("expected exit 1 with %s and %r, got exit %d\nstdout: %s\n"
               "stderr: %s" % (name, fragment, r.returncode, r.stdout, r.stderr))


mc, SRC, DST = mt.mock_pair({"orders": 3, "payments": 1, "audit": 1})

# ==== d1: timeouts, per-address limit, buffered bytes, mirror limits ======
LIMITS = (
    "server.idle_timeout_ms: 8000\n"
    "server.request_timeout_ms: 10000\n"
    "server.max_connections_per_ip: 8\n"
    "server.max_request_bytes: 8MiB\n"
    "server.max_buffered_bytes_per_connection: 64KiB\n"
    "server.max_response_bytes: 64KiB\n"
    "server.max_buffered_bytes_total: 1MiB\n"   # raised to 8 MiB + 64 KiB
    "limits.max_mirrors: 2\n"
    "limits.max_patterns_per_mirror: 2\n")
d = mt.Mirrord(destination=DST, name="limits", extra_yaml=LIMITS)

# ---- several connections hold large partial frames: RSS stays bounded ----
# Seven connections each announce an 8 MiB frame and send 7.5 MiB of it:
# 52 MiB if buffered, while the total allowed is 8 MiB.
NCONN, FRAME, SENT = 7, 8 * MiB - 64, 15 * MiB // 2
rss0 = proc_status(d.proc.pid, "VmRSS")
socks = [mt.connect(d.bootstrap) for _ in range(NCONN)]
chunk = b"\x00" * (256 * 1024)


def hold(s):
    try:
        s.sendall(struct.pack(">i", FRAME))
        for _ in range(SENT // len(chunk)):
            s.sendall(chunk)
    except OSError:
        pass   # closed by mirrord for being the largest buffer


threads = [threading.Thread(target=hold, args=(s,)) for s in socks]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
    h.check(not t.is_alive(), "a sender is still blocked after 120 s")
# A round trip through the loop: whatever was sent has been read by now.
h.check(list_ok(d.bootstrap), "ListMirrors while large partial frames are held")
peak = proc_status(d.proc.pid, "VmHWM")
growth = peak - rss0
print("peak RSS grew by %.1f MiB while %d connections sent %.1f MiB each"
      % (growth / MiB, NCONN, SENT / MiB))
h.check(growth < (8 + 16) * MiB,
        "peak RSS grew by %.1f MiB, more than server.max_buffered_bytes_total "
        "(8 MiB) plus 16 MiB of slack" % (growth / MiB))
h.wait_for(lambda: rejected(d, "buffered_bytes_total") >= 1, 30,
           "a connection closed for buffered_bytes_total, and counted")
h.check("server.max_buffered_bytes_total" in d.log(),
        "the log names server.max_buffered_bytes_total")
for s in socks:
    s.close()
h.check(list_ok(d.bootstrap), "ListMirrors after the large partial frames")

# ---- clients that never read their answers: output counts too ------------
# Three connections pipeline 300,000 ApiVersions each (30 MB of answers)
# and read nothing.
# mirrord stops reading from each at 4 MiB of unsent answers; the three
# together pass the 8 MiB total, so the largest is closed.
base = rejected(d, "buffered_bytes_total")
deaf = []
for _ in range(3):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    c.settimeout(60)
    c.connect(("127.0.0.1", d.port))
    deaf.append(c)
pipeline = b"".join(mt.frame(18, 0, i) for i in range(300000))


def flood(c):
    try:
        c.sendall(pipeline)
    except OSError:
        pass   # closed, or mirrord stopped reading (timeout)


threads = [threading.Thread(target=flood, args=(c,)) for c in deaf]
for t in threads:
    t.start()
h.wait_for(lambda: rejected(d, "buffered_bytes_total") >= base + 1, 60,
           "a connection not reading its answers closed for "
           "buffered_bytes_total")
h.check(any(int(m) >= MiB for m in re.findall(
    r"bytes read, (\d+) bytes to send\) while all admin connections hold",
    d.log())), "the log names the unsent answers of the closed connection")
for c in deaf:
    c.close()
for t in threads:
    t.join(90)
h.check(list_ok(d.bootstrap), "ListMirrors after the clients that never read")

# ---- a half-sent frame is closed after server.request_timeout_ms ---------
base = rejected(d, "request_timeout")
with mt.connect(d.bootstrap) as s:
    s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00\x00\x00")
    h.check(mt.closed_by_peer(s, 60),
            "a half-sent frame still open after 60 s (request_timeout_ms 10000)")
h.wait_for(lambda: rejected(d, "request_timeout") >= base + 1, 30,
           "the half-sent frame counted as request_timeout")
h.check("server.request_timeout_ms (10000 ms)" in d.log(),
        "the log names server.request_timeout_ms and its value")

# ---- idle connections are closed after server.idle_timeout_ms ------------
base = rejected(d, "idle_timeout")
with mt.connect(d.bootstrap) as s, mt.connect(d.bootstrap) as s2:
    s2.sendall(mt.frame(18, 0, 5))          # one request, then idle
    eq(struct.unpack(">ih", mt.recv_frame(s2)[:6]), (5, 0),
       "ApiVersions before going idle")
    h.check(mt.closed_by_peer(s, 60), "an idle connection still open after 60 s")
    h.check(mt.closed_by_peer(s2, 60),
            "a connection idle after a request still open after 60 s")
h.wait_for(lambda: rejected(d, "idle_timeout") >= base + 2, 30,
           "both idle connections counted as idle_timeout")
h.check("no activity for server.idle_timeout_ms (8000 ms)" in d.log(),
        "the log names server.idle_timeout_ms and its value")

# ---- server.max_connections_per_ip ------------------------------------------
h.wait_for(lambda: admin_connections(d) == 0, 30,
           "no admin connection left open before the per-address test")
base = rejected(d, "too_many_connections_per_ip")
idle = []
for i in range(8):
    s = mt.connect(d.bootstrap)
    s.sendall(mt.frame(18, 0, 100 + i))
    eq(struct.unpack(">ih", mt.recv_frame(s)[:6]), (100 + i, 0),
       "ApiVersions on connection %d of 8" % (i + 1))
    idle.append(s)
with mt.connect(d.bootstrap) as s:
    h.check(mt.closed_by_peer(s, 30),
            "the 9th connection from 127.0.0.1 was not refused")
h.wait_for(lambda: rejected(d, "too_many_connections_per_ip") >= base + 1, 30,
           "the refused connection counted as too_many_connections_per_ip")
h.check("(server.max_connections_per_ip 8)" in d.log(),
        "the log names server.max_connections_per_ip and its value")
# The eight go idle and time out; then an operator gets in.
h.wait_for(lambda: list_ok(d.bootstrap), 60,
           "ListMirrors on a fresh connection once the idle ones timed out")
for s in idle:
    h.check(mt.closed_by_peer(s, 30), "an idle connection was not closed")
    s.close()
d.cli_ok("--list")

# ---- limits.max_mirrors and limits.max_patterns_per_mirror (the CLI) ------
d.create("a", {"bootstrap.servers": SRC})
d.create("b", {"bootstrap.servers": SRC})
d.cli_ok("--add", "--mirror", "a", "--topic", "orders")
before = d.cli_ok("--list").stdout
r = d.create("c", {"bootstrap.servers": SRC}, expect_ok=False)
expect_error(r, "POLICY_VIOLATION", "limits.max_mirrors (2)")
eq(d.cli_ok("--list").stdout, before, "--list after a refused CreateMirror")
h.check([p["topic"] for p in d.describe_json("a")] == ["orders"] * 3,
        "mirror a keeps its topic after the refusal")
expect_error(d.create("a", {"bootstrap.servers": SRC}, expect_ok=False),
             "CLUSTER_MIRROR_ALREADY_EXISTS", "a")   # not the limit's error
d.cli_ok("--add", "--mirror", "b", "--topic", "pay.*")
d.cli_ok("--add", "--mirror", "b", "--topic", "aud.*")
r = d.cli("--add", "--mirror", "b", "--topic", "ord.*")
expect_error(r, "POLICY_VIOLATION", "limits.max_patterns_per_mirror (2)")
eq(sorted({p["topic"] for p in d.describe_json("b")}), ["audit", "payments"],
   "mirror b's topics after a refused pattern")
# The limits follow a reload (SIGHUP).
with open(d.config_path) as f:
    conf = f.read()
with open(d.config_path, "w") as f:
    f.write(conf.replace("limits.max_mirrors: 2", "limits.max_mirrors: 3"))
reloads = d.log().count("reload complete")
d.proc.signal(1)
h.wait_for(lambda: d.log().count("reload complete") > reloads, 30,
           "the reload with limits.max_mirrors 3")
d.create("c", {"bootstrap.servers": SRC})
expect_error(d.create("d", {"bootstrap.servers": SRC}, expect_ok=False),
             "POLICY_VIOLATION", "limits.max_mirrors (3)")
h.check(d.proc.alive(), "mirrord exited")

# ==== d2: DescribeMirrors, the response cap, the pipeline ====================
d2 = mt.Mirrord(destination=DST, name="describe", extra_yaml=(
    "server.max_request_bytes: 1MiB\n"
    "server.max_response_bytes: 64KiB\n"))
d2.create("m1", {"bootstrap.servers": SRC})
d2.cli_ok("--add", "--mirror", "m1", "--topic", "orders")

# One mirror named 100,000 times (a 300 KB request): described once.
with mt.connect(d2.bootstrap, 60) as s:
    s.sendall(mt.frame(99, 0, 9, describe_body(["m1"] * 100000), flexible=True))
    corr, err, msg, n, mirrors = describe_top(mt.recv_frame(s))
eq((corr, err, n, mirrors), (9, 0, 1, [("m1", 0)]),
   "DescribeMirrors naming m1 100,000 times: correlation, error, mirrors")
h.check(list_ok(d2.bootstrap), "ListMirrors after the repeated names")

# 100,000 distinct names: an answer or a clean close, never a crash.
with mt.connect(d2.bootstrap, 60) as s:
    names = ["n%05d" % i for i in range(100000)]
    s.sendall(mt.frame(99, 0, 10, describe_body(names), flexible=True))
    try:
        corr, err, msg, n, _ = describe_top(mt.recv_frame(s))
        eq(corr, 10, "correlation id of the 100,000-name answer")
        print("100,000 names: error %d (%s), %d mirrors" % (err, msg, n))
    except (EOFError, ConnectionResetError):
        print("100,000 names: connection closed")
h.check(d2.proc.alive(), "mirrord died on 100,000 distinct names")
h.check(list_ok(d2.bootstrap), "ListMirrors after 100,000 distinct names")

# An answer over server.max_response_bytes: POLICY_VIOLATION naming it.
with mt.connect(d2.bootstrap, 60) as s:
    names = ["absent-mirror-%05d" % i for i in range(5000)]
    s.sendall(mt.frame(99, 0, 11, describe_body(names), flexible=True))
    corr, err, msg, n, _ = describe_top(mt.recv_frame(s))
eq((corr, err, n), (11, 44, 0), "DescribeMirrors over the response cap")
h.check(msg is not None and "server.max_response_bytes (65536 bytes)" in msg,
        "the error names server.max_response_bytes and its value: %r" % msg)

# ---- 300,000 requests pipelined behind an AddTopicsToMirror that hangs ----
# The source accepts TCP and never says a word.  Behind the 300,000 small
# requests come 48 ApiVersions v3 of almost 1 MiB each (a long client
# software name): while the AddTopicsToMirror is pending, mirrord may read
# only server.max_buffered_bytes_per_connection (1 MiB) ahead, not 54 MiB.
mute = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
mute.bind(("127.0.0.1", 0))
mute.listen(64)
mute_conns = []


def accept_mute():
    while True:
        try:
            c, _ = mute.accept()
        except OSError:
            return
        mute_conns.append(c)


threading.Thread(target=accept_mute, daemon=True).start()
d2.create("hang", {"bootstrap.servers": "127.0.0.1:%d" % mute.getsockname()[1]})
N = 300000
add = mt.frame(95, 0, 1, mt.cstr("hang") + mt.uvarint(2) + mt.cstr("t") + b"\x00"
               + b"\x00", flexible=True)
BIG, BIGSIZE = 48, 1024 * 1024 - 64
big_body = mt.cstr("a" * BIGSIZE) + mt.cstr("1.0") + b"\x00"
stream = add + b"".join(list_mirrors_frame(2 + i) for i in range(N)) + \
    b"".join(mt.frame(18, 3, N + 2 + i, big_body, flexible=True)
             for i in range(BIG))
rss0 = proc_status(d2.proc.pid, "VmRSS")
s = mt.connect(d2.bootstrap, 120)
send_err = []


def send_all():
    try:
        s.sendall(stream)
    except OSError as e:
        send_err.append(e)


sender = threading.Thread(target=send_all)
sender.start()
buf = b""
want = 1
while want <= N + 1 + BIG:
    try:
        chunk = s.recv(1 << 20)
    except socket.timeout:
        h.fail("no answer for 120 s; waiting for correlation id %d" % want)
    if not chunk:
        h.fail("connection closed before correlation id %d (mirrord %s)"
               % (want, "alive" if d2.proc.alive() else "dead"))
    buf += chunk
    o = 0
    while len(buf) - o >= 8:
        size = struct.unpack(">i", buf[o:o + 4])[0]
        if len(buf) - o < 4 + size:
            break
        corr = struct.unpack(">i", buf[o + 4:o + 8])[0]
        if corr != want:
            h.fail("answer %d has correlation id %d" % (want, corr))
        if want == 1:
            growth = proc_status(d2.proc.pid, "VmHWM") - rss0
            print("AddTopicsToMirror to the mute source answered; peak RSS "
                  "grew by %.1f MiB meanwhile" % (growth / MiB))
            h.check(growth < 24 * MiB,
                    "peak RSS grew by %.1f MiB behind one pending request "
                    "(server.max_buffered_bytes_per_connection is 1 MiB)"
                    % (growth / MiB))
        want += 1
        o += 4 + size
    buf = buf[o:]
sender.join(60)
h.check(not send_err, "sending the pipeline failed: %r" % send_err)
s.close()
h.check(d2.proc.alive(), "mirrord died answering the pipeline")
h.check(list_ok(d2.bootstrap), "ListMirrors after the pipeline")
mute.close()

# ==== d3: at server.max_connections the longest idle makes room ==============
d3 = mt.Mirrord(destination=DST, name="evict", extra_yaml=(
    "server.max_connections: 4\n"))
h.wait_for(lambda: admin_connections(d3) == 0, 30, "no admin connection open")
conns = []
for i in range(4):
    c = mt.connect(d3.bootstrap)
    c.sendall(mt.frame(18, 0, 200 + i))
    eq(struct.unpack(">ih", mt.recv_frame(c)[:6]), (200 + i, 0),
       "ApiVersions on connection %d of 4" % (i + 1))
    conns.append(c)
h.check(mt.api_versions_ok(d3.bootstrap),
        "a 5th connection is served at server.max_connections")
h.check(mt.closed_by_peer(conns[0], 30),
        "the connection idle the longest was not closed")
for i, c in enumerate(conns[1:], 1):
    c.sendall(mt.frame(18, 0, 300 + i))
    eq(struct.unpack(">ih", mt.recv_frame(c)[:6]), (300 + i, 0),
       "connection %d still served" % (i + 1))
h.wait_for(lambda: rejected(d3, "evicted_idle") >= 1, 30,
           "the closed connection counted as evicted_idle")
# With none idle (each holds part of a frame), a new one is refused.
conns[0] = mt.connect(d3.bootstrap)
for c in conns:
    c.sendall(struct.pack(">i", 50) + b"\x00\x12")
h.wait_for(lambda: admin_connections(d3) == 4, 30, "four admin connections")
h.check(mt.closed_by_peer(mt.connect(d3.bootstrap), 30),
        "a connection was accepted with none idle at server.max_connections")
h.wait_for(lambda: rejected(d3, "too_many_connections") >= 1, 30,
           "the refused connection counted as too_many_connections")
for c in conns:
    c.close()

for x in (d, d2, d3):
    eq(x.stop(), 0, "%s exit status after SIGTERM" % x.name)
print("PASS: admin listener limits")
