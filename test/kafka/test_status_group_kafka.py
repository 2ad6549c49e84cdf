#!/usr/bin/env python3
"""What two mirrord instances of one group say about partitions the other
one copies, on real Kafka 4.4 (a 2-broker destination with the replicated
metadata log, a 1-broker source of our own, instances a and b beside
brokers 1 and 2, each copying the partitions led by its broker):

  * healthy: DescribeMirrors on either instance shows every partition,
    its own and the other's (from the status topic), MIRRORING, caught up,
    with a fresh source offset, and /mirrors/m1/ready answers 200 on both;
  * the source broker killed: within the stall bound both instances show
    every partition STALLED, the other instance's too, with a reason that
    names the source, the cause and since when, a growing lag in time, and
    /mirrors/m1/ready 503 on both;
  * the source back: every partition MIRRORING again on both, and the
    records equal at the same offsets;
  * instance b stopped with SIGSTOP (the group's session timeout is long):
    a names each of b's partitions with the reason "the instance copying
    it (b) has not reported since ...", never a stale "MIRRORING, lag 0";
    b resumed: the reason goes.
"""

import os
import re
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
META = "sg-meta-" + RUN
TOPIC = "sg-" + RUN
PARTS = 4
SESSION_MS = 45000     # b's partitions stay b's while it is stopped
BOUND_S = 5.1 + 0.1    # pipeline.request_timeout_ms + mirror.fetch.wait.max.ms


def instance(dst, name, broker):
    return mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": KEY, "topic": META,
                       "timeout_ms": 10000},
        extra_yaml=("pipeline:\n  request_timeout_ms: 5000\n"
                    "cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"sg-%s\"\n"
                    "  instance_id: \"%s\"\n"
                    "  local_broker_id: %d\n"
                    "  session_timeout_ms: %d\n"
                    "  heartbeat_interval_ms: 1000\n"
                    "  status_interval_ms: 1000\n"
                    % (RUN, name, broker, SESSION_MS)))


def role(d):
    try:
        m = d.metrics()
    except Exception:  # noqa: BLE001 - not up yet
        return None
    for r in ("writer", "follower", "joining"):
        if re.search(r'^mirrord_cluster_role\{role="%s"\} 1$' % r, m, re.M):
            return r
    return None


def rows(d):
    try:
        return {r["partition"]: r for r in d.describe_json("m1")
                if r["topic"] == TOPIC}
    except Exception:  # noqa: BLE001 - a follower mid-restart
        return {}


def owners(ds):
    """{partition: instance name} from the part-owner lines the instances
    log (the newest wins)."""
    lines = []
    for d in ds:
        lines += re.findall(r"^(\S+) .*m1/%s-(\d+): owner \S+ -> (\S+) "
                            r"\(generation" % re.escape(TOPIC), d.log(), re.M)
    out = {}
    for _, p, who in sorted(lines):
        out[int(p)] = who
    return out


def main():
    src, = h.private_kafka(1, "plaintext")
    dst, = h.private_kafka(1, "plaintext", brokers=2, extra_props={
        "offsets.topic.replication.factor": "2",
        "offsets.topic.num.partitions": "2",
        "default.replication.factor": "2"})
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(TOPIC, partitions=PARTS)
    mt.produce_tagged(SRC, TOPIC, 0, 50, "a0")
    for p in range(1, PARTS):
        mt.produce_tagged(SRC, TOPIC, p, 30, "a%d" % p)
    a, b = instance(DST, "a", 1), instance(DST, "b", 2)
    ds = [a, b]
    for d in ds:
        d.start()

    def one_writer():
        rs = [role(d) for d in ds]
        return rs.count("writer") == 1 and rs.count("follower") == 1
    h.wait_for(one_writer, 120, "a writer and a follower")
    w = [d for d in ds if role(d) == "writer"][0]
    w.create("m1", {"bootstrap.servers": SRC,
                    "mirror.fetch.wait.max.ms": "100",
                    "mirror.metadata.refresh.interval.ms": "1000"})
    w.cli_ok("--add", "--mirror", "m1", "--topic", TOPIC)

    def healthy(d):
        r = rows(d)
        return len(r) == PARTS and all(
            x["state"] == "MIRRORING" and x["lag"] == 0 and x["lagMs"] == 0
            and not x["stalled"] and 0 <= x["sourceOffsetAgeMs"] < 15000
            for x in r.values())
    for d in ds:
        h.wait_for(lambda d=d: healthy(d), 120, "every partition MIRRORING "
                   "and current as %s describes them" % d.name)
    own = owners(ds)
    print("owners: %r" % own, flush=True)
    h.check(sorted(set(own.values())) == ["a", "b"], "each instance copies "
            "some of the partitions: %r" % own)
    for d in ds:
        eq(mt.http_get(d.metrics_port, "/mirrors/m1/ready")[0], 200,
           "/mirrors/m1/ready on %s, healthy" % d.name)
    print("healthy: both instances describe every partition as current",
          flush=True)

    # ---- the source broker killed ---------------------------------------
    t0 = time.time()
    src.stop(kill=True)

    def all_stalled(d):
        r = rows(d)
        return len(r) == PARTS and all(x["state"] == "STALLED"
                                       for x in r.values())
    for d in ds:
        h.wait_for(lambda d=d: all_stalled(d), 2 * BOUND_S + 8,
                   "every partition STALLED as %s describes them (own and "
                   "the other's): %r" % (d.name, rows(d)))
    print("stalled %.1f s after the source was killed" % (time.time() - t0),
          flush=True)
    first = {d.name: rows(d) for d in ds}
    time.sleep(2.5)
    for d in ds:
        for p, x in rows(d).items():
            what = "%s describes %s-%d (copied by %s)" % (d.name, TOPIC, p,
                                                       own.get(p))
            reason = x["stalledReason"] or ""
            h.check(SRC in reason and "since " in reason and
                    re.search(r"refused|no answer|timed out", reason),
                    "%s: the reason names the source, the cause and since "
                    "when: %r" % (what, reason))
            h.check(t0 * 1000 - 3000 <= x["stalledSinceMs"] <=
                    time.time() * 1000, "%s: stalledSinceMs %d within the "
                    "fault" % (what, x["stalledSinceMs"]))
            h.check(x["lagMs"] > first[d.name][p]["lagMs"] > 0,
                    "%s: the lag in time grows: %r then %r"
                    % (what, first[d.name][p]["lagMs"], x["lagMs"]))
        code, body = mt.http_get(d.metrics_port, "/mirrors/m1/ready")
        eq(code, 503, "/mirrors/m1/ready on %s with the source down (%r)"
           % (d.name, body))
    print("source down: both instances say so for every partition",
          flush=True)

    # ---- the source back ----------------------------------------------------
    src.start_again()
    mt.produce_tagged(SRC, TOPIC, 0, 20, "b0")
    for d in ds:
        h.wait_for(lambda d=d: healthy(d), 120, "every partition current "
                   "again as %s describes them: %r" % (d.name, rows(d)))
    for p in range(PARTS):
        s = mt.read_partition(SRC, TOPIC, p, "sg-s-%s-%d" % (RUN, p))
        t = mt.read_partition(DST, TOPIC, p, "sg-d-%s-%d" % (RUN, p))
        eq(t, s, "%s-%d: the destination holds the source's records at the "
           "same offsets" % (TOPIC, p))
    print("source back: current again, records equal", flush=True)

    # ---- instance b silent --------------------------------------------------
    bparts = sorted(p for p, who in own.items() if who == "b")
    b.proc.signal(signal.SIGSTOP)
    t1 = time.time()
    try:
        def b_named(r):
            return all(r.get(p, {}).get("stalledReason") and
                       "the instance copying it (b) has not reported since"
                       in r[p]["stalledReason"] for p in bparts)
        h.wait_for(lambda: b_named(rows(a)), 40, "a to name b as silent for "
                   "b's partitions %r: %r" % (bparts, rows(a)))
        r = rows(a)
        for p in bparts:
            h.check(r[p]["state"] == "STALLED", "%s-%d copied by the silent "
                    "b shows as %r" % (TOPIC, p, r[p]["state"]))
        print("b silent for %.0f s: a names it for %r" % (time.time() - t1,
                                                          bparts), flush=True)
    finally:
        b.proc.signal(signal.SIGCONT)
    h.wait_for(lambda: healthy(a), 60, "b's partitions current again as a "
               "describes them: %r" % rows(a))
    print("ok", flush=True)


if __name__ == "__main__":
    h.run_main(main)
