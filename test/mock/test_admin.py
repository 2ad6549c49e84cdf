#!/usr/bin/env python3
"""Black-box test of mirrord's control plane: every admin RPC and error code
of the wire contract through the real kafka-mirrors CLI against the real
mirrord binary, with librdkafka mock clusters as source and destination.

Also: generic clients bootstrapping against mirrord's port (kcat -L,
kafka-python's admin client), hostile input on the admin port (malformed,
truncated, oversized, unknown key and version: the connection is closed and
the daemon keeps serving), pipelining, KIP-511 ApiVersions fallback, many
connections, kill -9 and restart keeping every mirror, and secrets never
echoed.
"""

import os
import socket
import struct
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    import confluent_kafka.admin as cka
except ImportError:
    h.skip("python3-confluent-kafka is not installed")


def source_topics(bootstrap):
    a = cka.AdminClient({"bootstrap.servers": bootstrap})
    return set(a.list_topics(timeout=10).topics)


mc, SRC, DST = mt.mock_pair({"orders": 3, "payments": 1, "audit.log": 2,
                             "other": 1}, brokers=3)

d = mt.Mirrord(destination=DST)

# ---- generic clients see a well-behaved Kafka endpoint -------------------
r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"])
eq(r.returncode, 0, "kcat -L exit status (stderr: %s)" % r.stderr)
h.check("broker 42 at 127.0.0.1:%d (controller)" % d.port in r.stdout,
        "kcat -L shows mirrord as broker 42 and controller:\n" + r.stdout)
h.check(" 0 topics" in r.stdout, "kcat -L lists no topics:\n" + r.stdout)

try:
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=d.bootstrap, request_timeout_ms=10000,
                          api_version_auto_timeout_ms=10000)
    eq(ka.list_topics(), [], "kafka-python admin: topics on mirrord")
    cl = ka.describe_cluster()
    eq((cl["controller_id"], [b["node_id"] for b in cl["brokers"]]), (42, [42]),
       "kafka-python admin: controller and brokers")
    ka.close()
except ImportError:
    print("note: python3-kafka missing; kafka-python bootstrap not checked")

# ---- CreateMirror ------------------------------------------------------
r = d.cli_ok("--list")
eq(r.stdout.strip(), "No mirrors found", "--list before any mirror")
r = d.create("m1", {"bootstrap.servers": SRC})
eq(r.stdout.strip(), "Created mirror m1", "create output")
mt.expect_error(d.create("m1", {"bootstrap.servers": SRC}, expect_ok=False),
             "CLUSTER_MIRROR_ALREADY_EXISTS", "m1")
for bad in ("bad/name", "x.removed", "y.paused", "..", "a" * 250):
    mt.expect_error(d.create(bad, {"bootstrap.servers": SRC},
                          expect_ok=False), "INVALID_CLUSTER_MIRROR_NAME")
mt.expect_error(d.create("m2", {"client.id": "x"}, expect_ok=False),
             "INVALID_REQUEST", "bootstrap.servers")
mt.expect_error(d.create("m2", {"bootstrap.servers": SRC, "no.such.key": "1"},
                      expect_ok=False), "INVALID_CONFIG", "no.such.key")
SECRET = "s3cr3t-Pa55word"
r = d.create("m2", {"bootstrap.servers": SRC, "security.protocol": "bogus",
                    "sasl.password": SECRET}, expect_ok=False)
mt.expect_error(r, "INVALID_CONFIG", "security.protocol")
h.check(SECRET not in r.stderr, "a secret was echoed in an error")
# A mirror can be created while its source is unreachable.
d.create("down", {"bootstrap.servers": "127.0.0.1:1"})
r = d.cli_ok("--list")
lines = r.stdout.splitlines()
eq(lines[0].split(), ["MIRROR", "TOPICS", "SOURCE-CLUSTER-ID",
                      "SOURCE-BOOTSTRAP-SERVER"], "list header")
rows = {l.split()[0]: l.split() for l in lines[1:]}
eq(sorted(rows), ["down", "m1"], "listed mirrors")
eq(rows["down"][1:], ["0", "-", "127.0.0.1:1"], "unreachable source row")
# m1's source cluster id is resolved in the background.
mock_id = mc.cluster_id(0)
h.wait_for(lambda: d.cli_ok("--list").stdout.count(mock_id) == 1, 30,
           "m1's source cluster id %s in --list" % mock_id)

# A source that is down when its mirror is created is resolved once it is up.
late_port = h.free_port()
d.create("late", {"bootstrap.servers": "127.0.0.1:%d" % late_port})
h.check(d.cli_ok("--list").stdout.count(mock_id) == 1,
        "the late mirror has no cluster id while its source is down")
proxy = mt.Proxy(late_port, SRC.split(",")[0])
h.wait_for(lambda: d.cli_ok("--list").stdout.count(mock_id) == 2, 90,
           "the late mirror's source cluster id once its source is up")
proxy.close()
d.cli_ok("--delete", "--mirror", "late")

# ---- AddTopicsToMirror ----------------------------------------------------
before = source_topics(SRC)
r = d.cli("--add", "--mirror", "m1", "--topic", "orders")
eq(r.returncode, 0, "add orders: " + r.stderr)
eq(r.stdout.strip(), "Added 1 topic(s) in mirror m1: [orders]", "add output")
r = d.cli("--add", "--mirror", "m1", "--topic", "nosuch")
mt.expect_error(r, "UNKNOWN_TOPIC_OR_PARTITION", "nosuch")
eq(source_topics(SRC), before, "source topics after looking up a missing "
   "topic (nothing may be auto-created)")
h.check("nosuch" not in source_topics(SRC), "nosuch was auto-created")
mt.expect_error(d.cli("--add", "--mirror", "nope", "--topic", "orders"),
             "UNKNOWN_CLUSTER_MIRROR", "nope")
r = d.cli("--add", "--mirror", "down", "--topic", "orders")
h.check(r.returncode == 1 and "127.0.0.1:1" in r.stderr,
        "adding to a mirror whose source is down names the source: " + r.stderr)
d.create("m3", {"bootstrap.servers": SRC})
mt.expect_error(d.cli("--add", "--mirror", "m3", "--topic", "orders"),
             "TOPIC_ALREADY_IN_CLUSTER_MIRROR", "orders")
# Patterns: match whole names on the source, internal topics never.
r = d.cli_ok("--add", "--mirror", "m3", "--topic", "pay.*|audit\\..*")
eq(r.stdout.strip(), "Added 2 topic(s) in mirror m3: [audit.log, payments]",
   "add by pattern")
parts = d.describe_json("m3")
eq(sorted((p["topic"], p["partition"]) for p in parts),
   [("audit.log", 0), ("audit.log", 1), ("payments", 0)],
   "partitions of the pattern-added topics")
for p in parts:
    h.check(p["state"] in ("PREPARING", "MIRRORING"),
            "new partition state %r" % p["state"])
r = d.cli("--add", "--mirror", "m3", "--topic", "a(b")
eq(r.returncode, 2, "a bad regular expression is a usage error")

# Many topics in one request (one fsync), a topic both named and matched
# by a pattern counted once.
for i in range(60):
    mc.cmd("topic 0 bulk-%03d 1" % i)
d.create("bulk", {"bootstrap.servers": SRC})
r = d.cli_ok("--add", "--mirror", "bulk", "--topic", "bulk-007",
             "--topic", "bulk-.*")
added = r.stdout.strip().split(": [", 1)[1].rstrip("]").split(", ")
h.check(r.stdout.startswith("Added 60 topic(s) in mirror bulk: "),
        "60 topics added: " + r.stdout[:200])
eq(sorted(added), ["bulk-%03d" % i for i in range(60)],
   "each bulk topic added exactly once")
eq(len(d.describe_json("bulk")), 60, "partitions of the bulk mirror")

# ---- describe ------------------------------------------------------------
r = d.cli_ok("--describe", "--mirror", "m1")
lines = r.stdout.splitlines()
eq(lines[0].split(), ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET",
                      "DESTINATION-OFFSET", "LAG", "LAG-TIME", "STATE"],
   "describe header (no REASON column: no partition has one)")
eq([l.split()[:3] for l in lines[1:]],
   [["m1", "orders", "0"], ["m1", "orders", "1"], ["m1", "orders", "2"]],
   "one describe row per partition, sorted")
mt.expect_error(d.cli("--describe", "--mirror", "ghost"), "UNKNOWN_CLUSTER_MIRROR")

# ---- Pause / Resume --------------------------------------------------------
mt.expect_error(d.cli("--pause", "--mirror", "m1", "--topic", "payments"),
             "TOPIC_NOT_IN_CLUSTER_MIRROR", "payments")
r = d.cli_ok("--pause", "--mirror", "m1", "--topic", "orders")
eq(r.stdout.strip(), "Paused mirroring for 1 topic(s) in mirror m1: [orders]",
   "pause output")
h.wait_for(lambda: set(d.states("m1").values()) == {"PAUSED"}, 60,
           "orders to be PAUSED")
mt.expect_error(d.cli("--pause", "--mirror", "m1", "--topic", "orders"),
             "MIRROR_TOPIC_ALREADY_PAUSED")
r = d.cli_ok("--resume", "--mirror", "m1", "--topic", "ord.*")
eq(r.stdout.strip(), "Resumed mirroring for 1 topic(s) in mirror m1: [orders]",
   "resume by pattern output")
h.check(set(d.states("m1").values()) <= {"MIRRORING", "PREPARING"},
        "after resume: %r" % d.states("m1"))
mt.expect_error(d.cli("--resume", "--mirror", "m1", "--topic", "orders"),
             "MIRROR_TOPIC_NOT_PAUSED")

# ---- Remove (failover) and Delete -----------------------------------------
mt.expect_error(d.cli("--delete", "--mirror", "m1"), "CLUSTER_MIRROR_NOT_EMPTY")
r = d.cli_ok("--remove", "--mirror", "m1", "--topic", "orders")
eq(r.stdout.strip(), "Stopped mirroring for 1 topic(s) in mirror m1: [orders]",
   "remove output")
h.wait_for(lambda: set(d.states("m1").values()) == {"STOPPED"}, 60,
           "orders to be STOPPED")
mt.expect_error(d.cli("--pause", "--mirror", "m1", "--topic", "orders"),
             "MIRROR_TOPIC_BEING_STOPPED")
mt.expect_error(d.cli("--resume", "--mirror", "m1", "--topic", "orders"),
             "MIRROR_TOPIC_BEING_STOPPED")
d.cli_ok("--remove", "--mirror", "m1", "--topic", "orders")  # no-op success
# A STOPPED topic may join another mirror.
d.cli_ok("--add", "--mirror", "m3", "--topic", "orders")
d.cli_ok("--remove", "--mirror", "m3", "--topic", ".*")
h.wait_for(lambda: set(d.states("m3").values()) == {"STOPPED"}, 60,
           "every m3 topic to be STOPPED")
r = d.cli_ok("--delete", "--mirror", "m1")
eq(r.stdout.strip(), "Deleted mirror m1", "delete output")
mt.expect_error(d.cli("--delete", "--mirror", "m1"), "UNKNOWN_CLUSTER_MIRROR")
mt.expect_error(d.cli("--remove", "--mirror", "m1", "--topic", "orders"),
             "UNKNOWN_CLUSTER_MIRROR")

# ---- usage errors ----------------------------------------------------------
for args in (["--list", "--describe"], ["--add", "--mirror", "x"],
             ["--create", "--mirror", "x"], ["--bogus"]):
    r = d.cli(*args)
    eq(r.returncode, 2, "usage error exit status for %s" % args)
r = subprocess.run([h.build_path("daemon", "kafka-mirrors"), "--list",
                    "--bootstrap-server", "127.0.0.1:1"], capture_output=True,
                   text=True, timeout=30)
eq(r.returncode, 3, "exit status when mirrord cannot be reached")
h.check("127.0.0.1:1" in r.stderr, "unreachable error names the address")

# ---- hostile input on the admin port ---------------------------------------
def rejected_total():
    total = 0
    for line in d.metrics().splitlines():
        if line.startswith("mirrord_admin_rejected_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


base_rejects = rejected_total()
cases = {
    "oversized frame": struct.pack(">i", 200 * 1024 * 1024),
    "negative size": struct.pack(">i", -5),
    "unknown api key": mt.frame(250, 0, 7),
    "unsupported version": mt.frame(94, 9, 7, flexible=True),
    "truncated body": mt.frame(94, 0, 7, b"\x05ab", flexible=True),
    # ApiVersions v0 whose client id claims 32767 bytes and has none.
    "garbage header": struct.pack(">i", 10) + b"\x00\x12\x00\x00"
                      b"\x00\x00\x00\x01\x7f\xff",
    "bad compact string": mt.frame(99, 0, 7, b"\x02\xff\xff\xff\xff\x7f",
                                   flexible=True),
}
for what, data in cases.items():
    with mt.connect(d.bootstrap) as s:
        s.sendall(data)
        h.check(mt.closed_by_peer(s), "connection not closed after " + what)
h.check(mt.api_versions_ok(d.bootstrap), "daemon answers after bad input")
h.wait_for(lambda: rejected_total() >= base_rejects + len(cases), 10,
           "each rejected request counted in mirrord_admin_rejected_requests_total")
log = d.log()
h.check("api_key 250" in log and "unknown_api" in log,
        "the log names the peer, key and reason for an unknown key")

# KIP-511: a too-new ApiVersions gets error 35 in the v0 shape.
with mt.connect(d.bootstrap) as s:
    s.sendall(mt.frame(18, 9, 5, b"\x00", flexible=True))
    resp = mt.recv_frame(s)
    corr, err, n = struct.unpack(">ihi", resp[:10])
    eq((corr, err, n), (5, 35, 1), "ApiVersions v9: correlation, error, count")
    eq(struct.unpack(">hhh", resp[10:16]), (18, 0, 3),
       "ApiVersions v9 lists ApiVersions' own range")

# Metadata at every served version names mirrord and its cluster id.
import re  # noqa: E402
m = re.search(r"cluster id (\S+)", d.log())
h.check(m, "the log names mirrord's cluster id")
cluster_id = m.group(1).encode()
for v in range(0, 13):
    flexible = v >= 9
    if v == 0:
        body = struct.pack(">i", 0)            # v0: empty array = all topics
    elif flexible:
        body = b"\x00"                         # compact null array
    else:
        body = struct.pack(">i", -1)           # null array = all topics
    if v >= 4:
        body += b"\x00"                        # AllowAutoTopicCreation
    if v >= 8:
        body += (b"\x00\x00" if v <= 10 else b"\x00")  # authorized ops flags
    if flexible:
        body += b"\x00"                        # tagged fields
    with mt.connect(d.bootstrap) as s:
        s.sendall(mt.frame(3, v, 300 + v, body, flexible=flexible))
        resp = mt.recv_frame(s)
    eq(struct.unpack(">i", resp[:4])[0], 300 + v, "Metadata v%d correlation" % v)
    h.check(b"127.0.0.1" in resp, "Metadata v%d names the advertised host" % v)
    h.check(struct.pack(">i", d.port) in resp,
            "Metadata v%d names the admin port" % v)
    if v >= 2:
        h.check(cluster_id in resp, "Metadata v%d carries the cluster id" % v)
h.check(mt.api_versions_ok(d.bootstrap), "daemon answers after Metadata v0-v12")

# Pipelined requests are answered in order.
with mt.connect(d.bootstrap) as s:
    s.sendall(mt.frame(18, 0, 11) + mt.frame(98, 0, 12, b"\x00", flexible=True)
              + mt.frame(18, 1, 13))
    eq([struct.unpack(">i", mt.recv_frame(s)[:4])[0] for _ in range(3)],
       [11, 12, 13], "correlation ids of pipelined responses")

# Many concurrent connections.
socks = [mt.connect(d.bootstrap) for _ in range(64)]
for i, s in enumerate(socks):
    s.sendall(mt.frame(18, 2, 1000 + i))
for i, s in enumerate(socks):
    eq(struct.unpack(">ih", mt.recv_frame(s)[:6]), (1000 + i, 0),
       "answer on connection %d" % i)
    s.close()

# ---- crash and restart keep every mirror -------------------------------------
before = d.describe_json()
before_list = d.cli_ok("--list").stdout
d.kill9()
d.start()
eq(d.cli_ok("--list").stdout, before_list, "--list after kill -9 and restart")
eq([(p["mirror"], p["topic"], p["partition"], p["state"]) for p in d.describe_json()],
   [(p["mirror"], p["topic"], p["partition"], p["state"]) for p in before],
   "describe after kill -9 and restart")

# A torn tail (a half-written record) is dropped with a warning.
d.stop()
segs = sorted(f for f in os.listdir(d.data_dir) if f.endswith(".log"))
h.check(segs, "a log segment in %s" % d.data_dir)
with open(os.path.join(d.data_dir, segs[-1]), "ab") as f:
    f.write(b"\x00\x00\x00\x40\x12\x34")
d.start()
eq(d.cli_ok("--list").stdout, before_list, "--list after a torn tail")
h.check("torn" in d.log().lower(), "the torn tail is reported in the log")

h.check(SECRET not in d.log(), "a secret reached the log")
rc = d.stop()
eq(rc, 0, "exit status after SIGTERM")
print("PASS: control plane")
