#!/usr/bin/env python3
"""Black-box test of test/tools/mockcluster through test/mockcluster.py.

Two clusters, a topic with pinned leaders, a real client producing and
consuming through them, a leader move, a broker going down and up, and the
command errors a test author will hit.  Asserts what a user of the helper
relies on: addresses, cluster ids, leaders, offsets and bytes.
"""

import json
import os
import socket
import struct
import sys
import tempfile
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
from mockcluster import MockCluster, MockError  # noqa: E402

SKIP = 77


def skip(why):
    print("SKIP: %s" % why, flush=True)
    sys.exit(SKIP)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    interval, last = 0.05, None
    while True:
        try:
            v = cond()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 -- reported on timeout
            last = "%s: %s" % (type(e).__name__, e)
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0fs waiting for %s (last: %r)"
                                 % (timeout, what, last))
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


try:
    import confluent_kafka as ck
    import confluent_kafka.admin  # noqa: F401 -- ck.admin
except ImportError:
    # configure may have found a python3 (pyenv, venv) without Debian's
    # packages: run again under the system interpreter that has them.
    if (os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3"
            and not os.environ.get("MOCKCLUSTER_TEST_REEXEC")):
        os.environ["MOCKCLUSTER_TEST_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    skip("python3-confluent-kafka is not installed for %s" % sys.executable)

tmp = tempfile.mkdtemp(prefix="test_mockcluster.")
out_file = os.path.join(tmp, "clusters.json")
try:
    mc = MockCluster(clusters=2, brokers=3, out_file=out_file,
                     log_path=os.path.join(tmp, "mockcluster.log"))
except FileNotFoundError as e:
    skip(str(e))

# -- the description: stdout and the -o file agree, 2 x 3 loopback brokers
with open(out_file) as f:
    eq(json.load(f), mc.desc, "the -o file and stdout")
eq(os.listdir(tmp).count("clusters.json"), 1, "the -o file")
eq([n for n in os.listdir(tmp) if ".tmp." in n], [], "temporary files left")
eq(len(mc.clusters), 2, "cluster count")
ports = set()
for c in range(2):
    addrs = mc.broker_addrs(c)
    eq(len(addrs), 3, "brokers in cluster %d" % c)
    for host, port in addrs:
        eq(host, "127.0.0.1", "broker host")
        ports.add(port)
    cid = mc.cluster_id(c)
    assert cid and cid.startswith("mockCluster"), "cluster id %r" % cid
eq(len(ports), 6, "distinct broker ports")
assert mc.cluster_id(0) != mc.cluster_id(1), "both clusters have id %s" % mc.cluster_id(0)


def metadata(c, topic=None):
    a = ck.admin.AdminClient({"bootstrap.servers": mc.bootstrap(c), "log_level": 0})
    return a.list_topics(topic=topic, timeout=10)


# -- topic: partition p is led by broker (p % 3) + 1
mc.cmd("topic 0 orders 3")
md = metadata(0)
assert "orders" in md.topics, "topics on cluster 0: %s" % sorted(md.topics)
eq({p: pm.leader for p, pm in md.topics["orders"].partitions.items()},
   {0: 1, 1: 2, 2: 3}, "leaders of orders")
assert "orders" not in metadata(1).topics, "cluster 1 has cluster 0's topic"


def produce(c, topic, part, records):
    """Produce records (key, value) and return the offsets the broker gave."""
    got = []

    def dr(err, msg):
        if err is not None:
            raise AssertionError("delivery to %s/%d failed: %s" % (topic, part, err))
        got.append(msg.offset())

    p = ck.Producer({"bootstrap.servers": mc.bootstrap(c), "linger.ms": 5,
                     "message.timeout.ms": 30000, "log_level": 0})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=part, on_delivery=dr)
    left = p.flush(30)
    eq(left, 0, "messages still queued after flush")
    return got


def consume(c, topic, part, n):
    cons = ck.Consumer({"bootstrap.servers": mc.bootstrap(c), "group.id": "t",
                        "enable.auto.commit": False, "log_level": 0})
    cons.assign([ck.TopicPartition(topic, part, 0)])
    out = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise AssertionError("consume %s/%d: %s" % (topic, part, m.error()))
        out.append((m.offset(), m.key(), m.value()))
    cons.close()
    return out


recs = [(b"k%d" % i, b"value %d \x00\xff" % i) for i in range(10)]
eq(sorted(produce(0, "orders", 1, recs)), list(range(10)), "offsets of the first 10")
eq(consume(0, "orders", 1, 10), [(i, k, v) for i, (k, v) in enumerate(recs)],
   "records read back")

# -- move the leader of partition 1 to broker 3: metadata says so, clients follow
mc.cmd("leader 0 orders 1 3")
wait_for(lambda: metadata(0, "orders").topics["orders"].partitions[1].leader == 3,
         30, "partition 1 led by broker 3")
more = [(b"m%d" % i, b"after the move %d" % i) for i in range(5)]
eq(sorted(produce(0, "orders", 1, more)), list(range(10, 15)), "offsets after the move")
eq([r[2] for r in consume(0, "orders", 1, 15)][10:], [v for _, v in more],
   "records after the move")

# -- down: connections to broker 2 are refused; up: it listens on the same port
host, port = mc.broker_addrs(0)[1]


def connects():
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


assert connects(), "broker 2 refused a connection while up"
mc.cmd("down 0 2")
wait_for(lambda: not connects(), 30, "broker 2 to refuse connections")
mc.cmd("up 0 2")
wait_for(connects, 30, "broker 2 to accept connections again")

# -- leaderless partition: produce fails with a retriable error until fixed
mc.cmd("leader 0 orders 2 -1")
wait_for(lambda: metadata(0, "orders").topics["orders"].partitions[2].leader == -1,
         30, "partition 2 without a leader")
mc.cmd("leader 0 orders 2 1")

# -- error injection is accepted; Produce errors are retried by the client
mc.cmd("err 0 0 6 7")
eq(produce(0, "orders", 0, [(b"x", b"after two injected errors")]), [0],
   "offset after injected NOT_LEADER and REQUEST_TIMED_OUT")
mc.cmd("errrtt 0 1 0 0 10")
mc.cmd("rtt 0 -1 0")
mc.cmd("clear 0 0")


def api_versions(c, broker):
    """{ApiKey: (min, max)} from a raw ApiVersions v0 to one broker."""
    host, port = mc.broker_addrs(c)[broker - 1]
    with socket.create_connection((host, port), timeout=10) as s:
        req = struct.pack(">hhih", 18, 0, 5, 1) + b"t"
        s.sendall(struct.pack(">i", len(req)) + req)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError("broker %d closed during ApiVersions" % broker)
            buf += chunk
    corr, err, n = struct.unpack(">ihi", buf[4:14])
    eq((corr, err), (5, 0), "ApiVersions correlation id and error")
    return {k: (lo, hi) for k, lo, hi in
            (struct.unpack(">hhh", buf[14 + 6 * i:20 + 6 * i]) for i in range(n))}


# -- apiversion narrows what every broker of that cluster advertises
eq(api_versions(1, 2)[3], (0, 2), "Metadata versions before")
mc.cmd("apiversion 1 3 0 1")
eq(api_versions(1, 2)[3], (0, 1), "Metadata versions after apiversion 1 3 0 1")
eq(api_versions(0, 2)[3], (0, 2), "the other cluster's Metadata versions")
mc.cmd("apiversion 1 3 0 2")

# -- mistakes are reported with the reason, and the helper keeps serving
for bad, why in [("leader 0 orders 0 4", "broker '4': expected an integer in [-1, 3]"),
                 ("topic 2 x 1", "cluster '2': expected an integer in [0, 1]"),
                 ("topic 0 x zero", "partition count 'zero': expected an integer in [1, 10000]"),
                 ("down 0", "usage: down C BROKER"),
                 ("apiversion 0 3 2 1", "versions 2..1: give MIN <= MAX, or -1 -1 to disable"),
                 ("frobnicate 0", "unknown command 'frobnicate'")]:
    try:
        mc.cmd(bad)
    except MockError as e:
        assert why in str(e), "%r: error %r does not say %r" % (bad, str(e), why)
    else:
        raise AssertionError("%r was accepted" % bad)
mc.cmd("topic 1 orders 1")
eq(metadata(1, "orders").topics["orders"].partitions[0].leader, 1, "cluster 1 leader")

eq(mc.close(), 0, "exit status after quit")

# -- EOF on stdin is quit: the helper dies with its parent
mc2 = MockCluster(clusters=1, brokers=1)
mc2.p.stdin.close()
wait_for(lambda: mc2.p.poll() is not None, 30, "mockcluster to exit on EOF")
eq(mc2.p.returncode, 0, "exit status on EOF")
mc2.kill()
print("PASS: mockcluster: 2x3 clusters, topics, produce/consume, leader move, "
      "down/up, errors")
