#!/usr/bin/env python3
"""Black-box test of kcluster/kconn through test/kclient_probe.

Against a librdkafka 2.0.2 mock cluster (test/tools/mockcluster):
  * the listed topics and partition counts are exactly the ones created,
    with the leaders the helper assigned, the cluster id the mock reports,
    Metadata v2 (the mock's highest) and ApiVersions v0 (after the mock's
    broken v3 answer) on every broker connection;
  * looking up an unknown topic answers "unknown" and creates nothing (the
    mock auto-creates every topic a Metadata request names; kcat -L, which
    asks for all topics, is the independent witness); a positive control
    shows the witness does see a topic created by name;
  * an unreachable cluster, a silent server and a bad bootstrap list give
    clear errors, each within the probe's timeout.

Against real Apache Kafka (test/kafka/realkafka.py), when it is available:
the same listing and no-auto-create checks (Kafka 4.x, newest Metadata
version, AllowAutoTopicCreation=false), then SASL/PLAIN, SASL/SCRAM-SHA-512
(with a wrong password refused) and TLS.  That part is skipped with the
reason when the real-Kafka tier is unavailable; the mock part still counts.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

PROBE = h.build_path("test", "tools", "kclient_probe")


def probe(bootstrap, *args, timeout_ms=10000, expect_rc=0):
    """Runs kclient_probe; returns its JSON output (and checks the exit)."""
    argv = [PROBE, "-b", bootstrap, "-t", str(timeout_ms)] + list(args)
    # The probe bounds itself; this outer bound only catches a hang.
    p = subprocess.run(argv, capture_output=True, text=True,
                       timeout=timeout_ms / 1000.0 + 60)
    h.check(p.returncode == expect_rc,
            "%s: exit %d, wanted %d\nstdout: %s\nstderr: %s"
            % (" ".join(argv), p.returncode, expect_rc, p.stdout, p.stderr))
    try:
        return json.loads(p.stdout)
    except ValueError:
        h.fail("kclient_probe printed no JSON: %r (stderr %r)"
               % (p.stdout, p.stderr))


def topic_map(out):
    return {t["name"]: t["partitions"] for t in out["topics"]}


def kcat_topics(args):
    """All topic names as kcat -L (a list-all Metadata request) sees them."""
    p = h.kcat(["-L", "-J"] + args)
    h.check(p.returncode == 0, "kcat -L: %s" % p.stderr)
    return {t["topic"] for t in json.loads(p.stdout)["topics"]}


def mock_part():
    log = os.path.join(h.test_dir(), "mockcluster.log")
    mc = MockCluster(clusters=1, brokers=3, log_path=log)
    created = {"orders": 4, "payments": 7, "audit.log-v2": 1}
    for name, n in created.items():
        mc.cmd("topic 0 %s %d" % (name, n))
    boot = mc.bootstrap(0)

    out = probe(boot, "-q", "no-such-topic", "-q", "orders", "-c")
    h.check(topic_map(out) == created,
            "mock listing %r != created %r" % (topic_map(out), created))
    h.check(out["cluster_id"] == mc.cluster_id(0),
            "cluster id %r != %r" % (out["cluster_id"], mc.cluster_id(0)))
    h.check(out["metadata_version"] == 2,
            "Metadata v%d against the mock (its highest is v2)"
            % out["metadata_version"])
    ports = sorted(port for _, port in mc.broker_addrs(0))
    h.check([b["node_id"] for b in out["brokers"]] == [1, 2, 3]
            and sorted(b["port"] for b in out["brokers"]) == ports,
            "brokers %r, bootstrap ports %r" % (out["brokers"], ports))
    for t in out["topics"]:
        want = [(p % 3) + 1 for p in range(t["partitions"])]
        h.check(t["leaders"] == want and not t["internal"]
                and t["error"] == 0,
                "topic %s: leaders %r (want %r), internal %r, error %d"
                % (t["name"], t["leaders"], want, t["internal"], t["error"]))
        h.check(t["epochs"] == [-1] * t["partitions"],
                "epochs before Metadata v7 must be -1: %r" % t["epochs"])
    h.check(out["lookups"] == {"no-such-topic": -1, "orders": 4},
            "lookups %r" % out["lookups"])
    conns = out["connections"]
    h.check(len(conns) == 3 and all(
        c["ready"] and c["apiversions_version"] == 0
        and c["metadata_max"] == 2 for c in conns),
        "broker connections: %r" % conns)

    # Nothing was created by the lookup: our second listing and kcat agree.
    again = probe(boot)
    h.check(topic_map(again) == created,
            "second listing %r != created %r" % (topic_map(again), created))
    if shutil.which("kcat"):
        seen = kcat_topics(["-b", boot])
        h.check(seen == set(created),
                "kcat sees %r after our lookups, created %r" % (seen, created))
        # Positive control: a Metadata request naming a topic does create
        # it on the mock (4 partitions), and we list it.
        h.kcat(["-L", "-b", boot, "-t", "made-by-name"])
        out = probe(boot)
        h.check(topic_map(out).get("made-by-name") == 4,
                "control: topic created by name not listed: %r"
                % topic_map(out))
    else:
        print("NOTE: kcat not found; the independent no-create witness "
              "was skipped (our own second listing still checked)")

    # A broker down: the listing still works through the others.
    mc.cmd("down 0 1")
    out = probe(",".join("%s:%d" % a for a in mc.broker_addrs(0)))
    h.check("orders" in topic_map(out),
            "listing with broker 1 down: %r" % out)
    mc.close()


def unreachable_part():
    port = h.free_port()
    out = probe("127.0.0.1:%d" % port, timeout_ms=3000, expect_rc=1)
    want = "source cluster 127.0.0.1:%d: connection refused" % port
    h.check(out["error"] == want and out["kind"] == "transport",
            "unreachable: %r, wanted %r" % (out, want))

    # The same through a host name (resolved without blocking, /etc/hosts).
    out = probe("localhost:%d" % port, timeout_ms=3000, expect_rc=1)
    want = "source cluster localhost:%d: connection refused" % port
    h.check(out["error"] == want, "unreachable by name: %r, wanted %r"
            % (out, want))

    p2 = h.free_port()
    out = probe("127.0.0.1:%d, 127.0.0.1:%d" % (port, p2), "-n", "dest",
                timeout_ms=3000, expect_rc=1)
    want = ("dest cluster unreachable: 127.0.0.1:%d: connection refused; "
            "127.0.0.1:%d: connection refused" % (port, p2))
    h.check(out["error"] == want, "two unreachable: %r, wanted %r"
            % (out["error"], want))

    # A server that accepts (the kernel does) but never answers.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        sp = s.getsockname()[1]
        out = probe("127.0.0.1:%d" % sp, timeout_ms=1500, expect_rc=1)
    want = "source cluster 127.0.0.1:%d: " % sp
    h.check(out["kind"] == "timeout" and out["error"].startswith(want)
            and "1500 ms" in out["error"],
            "silent server: %r" % out)

    out = probe("127.0.0.1:0", expect_rc=2)
    h.check(out["error"] == 'source cluster: bootstrap.servers: '
            '"127.0.0.1:0" has a bad port (1..65535)', "bad port: %r" % out)


def real_part():
    try:
        plain = h.real_kafka()[0]
    except SystemExit as e:  # harness.skip(): the tier is unavailable
        if e.code != h.SKIP:
            raise
        print("SKIP (real Kafka part only): see the reason above")
        return
    # The shared clusters outlive a test run: names unique to this run.
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    created = {"kcl-alpha-" + tag: 3, "kcl-beta-" + tag: 5}
    for name, n in created.items():
        plain.create_topic(name, partitions=n)
    absent = "kcl-never-created-" + tag
    out = probe(plain.bootstrap, "-q", absent, "-c", timeout_ms=30000)
    got = topic_map(out)
    h.check(all(got.get(k) == v for k, v in created.items()),
            "real Kafka listing %r lacks %r" % (got, created))
    h.check(absent not in got and out["lookups"][absent] == -1,
            "real Kafka lookup: %r" % out["lookups"])
    h.check(out["metadata_version"] == 12 and out["cluster_id"]
            and out["connections"][0]["apiversions_version"] == 3,
            "real Kafka: Metadata v%s, cluster id %r, connections %r"
            % (out["metadata_version"], out["cluster_id"],
               out["connections"]))
    if plain.cluster_id:
        h.check(out["cluster_id"] == plain.cluster_id,
                "cluster id %r != %r" % (out["cluster_id"], plain.cluster_id))
    internal = [t for t in out["topics"] if t["internal"]]
    h.check(all(t["name"].startswith("__") for t in internal),
            "internal topics %r" % internal)
    meta = plain.metadata()
    h.check(absent not in meta["topics"],
            "the lookup created a topic on real Kafka")

    for security in ("sasl", "ssl"):
        try:
            c = h.real_kafka(security=security)[0]
        except SystemExit as e:
            if e.code != h.SKIP:
                raise
            print("SKIP (real Kafka %s part)" % security)
            continue
        topic = "kcl-%s-%s" % (security, tag)
        c.create_topic(topic, partitions=2)
        mechs = ["PLAIN", "SCRAM-SHA-512"] if security == "sasl" else [None]
        for mech in mechs:
            cfg = c.client_config(mechanism=mech) if mech else c.client_config()
            props = []
            for k, v in cfg.items():
                if k != "bootstrap.servers":
                    props += ["-X", "%s=%s" % (k, v)]
            out = probe(c.bootstrap, *props, timeout_ms=30000)
            h.check(topic_map(out).get(topic) == 2,
                    "%s %s: listing %r" % (security, mech, topic_map(out)))
            if mech:
                bad = [x.replace("sasl.password=%s" % cfg["sasl.password"],
                                 "sasl.password=wrong") for x in props]
                out = probe(c.bootstrap, *bad, timeout_ms=30000,
                            expect_rc=1)
                h.check(out["kind"] == "auth" and "wrong" not in out["error"]
                        and "SASL/%s authentication" % mech in out["error"],
                        "%s with a wrong password: %r" % (mech, out))
        if security == "ssl":
            # Without the test CA (system store only) the broker's
            # certificate must be refused, and say so.
            nocafile = []
            for k, v in cfg.items():
                if k not in ("bootstrap.servers", "ssl.ca.location"):
                    nocafile += ["-X", "%s=%s" % (k, v)]
            out = probe(c.bootstrap, *nocafile, timeout_ms=30000,
                        expect_rc=1)
            h.check(out["kind"] == "tls"
                    and "certificate verification" in out["error"]
                    and c.bootstrap in out["error"],
                    "TLS without the test CA: %r" % out)
        print("real Kafka %s: ok" % security)


if not os.access(PROBE, os.X_OK):
    h.fail("%s is not built" % PROBE)
mock_part()
unreachable_part()
real_part()
print("PASS")
