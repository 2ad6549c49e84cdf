#!/usr/bin/env python3
"""Several mirrord instances as one (cluster.enabled) on real
Kafka 4.4: a 3-broker destination cluster, a 1-broker source, three
instances a, b, c (each beside one destination broker:
cluster.local_broker_id 1, 2, 3) sharing the metadata log topic, under
continuous load:

  * exactly one writer; mutations sent to a follower are answered
    NOT_CONTROLLER naming the writer, and kafka-mirrors follows it;
    Metadata on any instance lists the three members, the writer as
    controller;
  * every partition owned by exactly one instance (the one beside its
    destination leader);
  * faults: kill -9 of the writer (restarted), SIGSTOP of an owner past the
    session timeout then SIGCONT, a destination broker restarted, one
    instance's data directory deleted (restarted on an empty one);
  * then: every destination partition equal to its source partition record
    by record (offset, key, value, headers, timestamp): nothing lost,
    duplicated or moved; the metadata (mirrors, partition states, last
    mirrored offsets) identical on every instance;
  * a paused former writer that resumes cannot append a metadata record:
    no batch of its producer epoch lands after the new writer's claim.
"""

import os
import re
import shutil
import signal
import struct
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
META = "ha-meta-" + RUN
TOPIC = "ha-data-" + RUN
PARTS = 6
MLOG_T_CLAIM = 0xff04
SESSION_MS = 6000


def instance(dst, name, broker):
    d = mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": KEY, "topic": META,
                       "timeout_ms": 10000},
        extra_yaml=("cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"ha-%s\"\n"
                    "  instance_id: \"%s\"\n"
                    "  local_broker_id: %d\n"
                    "  session_timeout_ms: %d\n"
                    "  heartbeat_interval_ms: 1000\n"
                    "  status_interval_ms: 1000\n"
                    % (RUN, name, broker, SESSION_MS)))
    return d


def role(d):
    try:
        m = d.metrics()
    except Exception:  # noqa: BLE001 - stopped, or not up yet
        return None
    for r in ("writer", "follower", "joining"):
        if re.search(r'^mirrord_cluster_role\{role="%s"\} 1$' % r, m, re.M):
            return r
    return None


def writers(ds):
    return [d for d in ds if d.proc is not None and d.proc.alive()
            and role(d) == "writer"]


def one_writer(ds, what, timeout=60):
    out = []

    def ok():
        w = writers(ds)
        live = [d for d in ds if d.proc is not None and d.proc.alive()]
        if len(w) == 1 and all(role(d) in ("writer", "follower") for d in live):
            out[:] = w
            return True
        return False
    h.wait_for(ok, timeout, "one writer, every other instance a follower "
               "(%s): roles %r" % (what, {d.name: role(d) for d in ds}))
    return out[0]


class Load:
    """An idempotent producer writing numbered records to every partition
    of the source topic until stopped."""

    def __init__(self, bootstrap):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 5})
        self.n = 0
        self.stopped = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stopped.is_set():
            for _ in range(20):
                self.p.produce(TOPIC, key=b"k%d" % (self.n % 17),
                               value=b"v-%d-%s" % (self.n, b"x" * (self.n % 50)),
                               partition=self.n % PARTS,
                               headers=[("n", b"%d" % self.n)])
                self.n += 1
            self.p.poll(0)
            time.sleep(0.05)

    def stop(self):
        self.stopped.set()
        self.t.join(30)
        if self.p.flush(60):
            h.fail("the load's records were not all delivered")


def read_all(bootstrap, topic, partition):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ha-check-" + RUN,
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition),
                                     timeout=30)
    out = []
    if hi > lo:
        c.assign([TopicPartition(topic, partition, lo)])
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < hi - 1) and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error():
                    continue
                out.append((m.offset(), m.key(), m.value(),
                            tuple(m.headers() or ()), m.timestamp()))
    c.close()
    return lo, hi, out


def hwms(bootstrap):
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(TOPIC, p)[1] for p in range(PARTS)]
    except Exception:  # noqa: BLE001 - topic not there yet
        return None
    finally:
        c.close()


def m1_config(src):
    """The configs of mirror m1 from the source bootstrap src."""
    return {"bootstrap.servers": src,
            "mirror.metadata.refresh.interval.ms": "1000",
            "mirror.fetch.wait.max.ms": "200"}


def start_mirroring(ds, src):
    """Starts every instance of ds, waits for one writer, creates m1 through
    it (TOPIC from the source bootstrap src) and starts a Load: (the
    writer, the load)."""
    for d in ds:
        d.start()
    w = one_writer(ds, "three instances", timeout=90)
    w.create("m1", m1_config(src))
    w.cli_ok("--add", "--mirror", "m1", "--topic", TOPIC)
    return w, Load(src)


def check_records(src, dst):
    """Every record of every partition of TOPIC on the source (bootstrap
    src) is on the destination (dst) once, at its offset, the same (key,
    value, headers, timestamp), and nothing else is: the records
    checked."""
    lost = dup = bad = total = 0
    for p in range(PARTS):
        _, _, srecs = read_all(src, TOPIC, p)
        _, _, drecs = read_all(dst, TOPIC, p)
        total += len(srecs)
        sm = {x[0]: x for x in srecs}
        dm = {}
        for x in drecs:
            if x[0] in dm:
                dup += 1
            dm[x[0]] = x
        for off, x in sm.items():
            y = dm.get(off)
            if y is None:
                lost += 1
            elif y != x:
                bad += 1
                if bad < 5:
                    print("partition %d offset %d: source %r destination %r"
                          % (p, off, x, y))
        dup += len(set(dm) - set(sm))
    print("checked %d records: %d lost, %d duplicated, %d different"
          % (total, lost, dup, bad), flush=True)
    h.check(lost == 0 and dup == 0 and bad == 0,
            "%d lost, %d duplicated, %d different" % (lost, dup, bad))
    return total


def check_copy(src, dst, load):
    """After load stopped: every destination partition reaches its
    source's end (120 s) and holds every record once (check_records), at
    least as many as load produced; the records checked."""
    def caught_up():
        c2 = kraw.Cluster(src)
        try:
            sh = [c2.offsets(TOPIC, p)[1] for p in range(PARTS)]
        finally:
            c2.close()
        return hwms(dst) == sh
    h.wait_for(caught_up, 120, "every destination partition at its source's "
               "end (dst %r)" % (hwms(dst),))
    total = check_records(src, dst)
    h.check(total >= load.n, "fewer records read (%d) than produced (%d)"
            % (total, load.n))
    return total


def owners(ds):
    """{partition: instance} from the newest part-owner line of any
    instance's log (every instance logs the records it applies live)."""
    lines = []
    for d in ds:
        lines += re.findall(r"^(\S+) .*m1/%s-(\d+): owner \S+ -> (\S+) "
                            r"\(generation" % re.escape(TOPIC), d.log(), re.M)
    out = {}
    for _, p, who in sorted(lines):
        out[int(p)] = who
    return out


def readyz(d):
    """(status, body) of d's /readyz; (None, why) when it cannot be asked."""
    try:
        return d.readyz()
    except OSError as e:
        return None, str(e)


def metadata(d):
    """Metadata v1 from d's admin port: ({node id: host:port}, controller)."""
    with mt.connect(d.bootstrap) as sock:
        sock.sendall(mt.frame(3, 1, 7, struct.pack(">i", 0)))
        b = mt.recv_frame(sock)
    o = 4
    n, = struct.unpack_from(">i", b, o)
    o += 4
    brokers = {}
    for _ in range(n):
        node, hl = struct.unpack_from(">ih", b, o)
        o += 6
        host = b[o:o + hl].decode()
        o += hl
        port, rl = struct.unpack_from(">ih", b, o)
        o += 6 + max(rl, 0)
        brokers[node] = "%s:%d" % (host, port)
    controller, = struct.unpack_from(">i", b, o)
    return brokers, controller


def metadata_view(d):
    """What every instance must agree on: mirrors and, per partition, its
    state and last mirrored offset (from the metadata log)."""
    rows = d.describe_json("m1")
    return sorted((r["topic"], r["partition"], r["state"],
                   r.get("lastMirroredOffset")) for r in rows)


def main():
    src, = h.real_kafka(1)
    dst, = h.private_kafka(1, brokers=3)
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(TOPIC, partitions=PARTS)
    t0 = time.monotonic()

    a = instance(DST, "a", 1)
    b = instance(DST, "b", 2)
    c = instance(DST, "c", 3)
    ds = [a, b, c]
    a.start()
    one_writer([a], "a alone")
    b.start()
    c.start()
    w = one_writer(ds, "three instances")
    followers = [d for d in ds if d is not w]
    print("writer: %s (%.0fs)" % (w.name, time.monotonic() - t0), flush=True)

    # ---- the admin plane: NOT_CONTROLLER and the controller ------------
    f = followers[0]
    r = f.create("m1", m1_config(SRC))
    h.check(r.returncode == 0, "create through a follower: %s" % r.stderr)
    h.check("not write the metadata log; the writer is instance %s at %s"
            % (w.name, w.bootstrap) in f.log(),
            "the follower did not answer NOT_CONTROLLER naming the writer "
            "%s at %s:\n%s" % (w.name, w.bootstrap, f.log()[-2000:]))
    f.cli_ok("--add", "--mirror", "m1", "--topic", TOPIC)
    # Every instance learns the members from the log: wait until it has.
    for d in ds:
        def lists_all(d=d):
            brokers, controller = metadata(d)
            return (sorted(brokers.values()) == sorted(x.bootstrap for x in ds)
                    and brokers.get(controller) == w.bootstrap)
        h.wait_for(lists_all, 30, "Metadata of %s to list the three members, "
                   "the writer %s as controller" % (d.name, w.bootstrap))
    for d in ds:
        h.wait_for(lambda d=d: "m1" in d.cli_ok("--list").stdout, 30,
                   "m1 listed by %s" % d.name)

    load = Load(SRC)
    h.wait_for(lambda: hwms(DST) is not None and sum(hwms(DST)) > 500, 120,
               "records mirrored to the destination (%r)" % (hwms(DST),))
    h.wait_for(lambda: all(s == "MIRRORING" for s in
                           w.states("m1").values())
               and len(w.states("m1")) == PARTS, 60, "m1 MIRRORING")
    print("mirroring under load (%.0fs)" % (time.monotonic() - t0), flush=True)

    # ---- kill -9 of the writer ------------------------------------------
    first_claims = [x for x in mt.log_batches(DST, META) if MLOG_T_CLAIM in x[3]]
    w.kill9()
    live = [d for d in ds if d is not w]
    w2 = one_writer(live, "after kill -9 of %s" % w.name,
                    timeout=SESSION_MS / 1000 + 60)
    print("kill -9 %s: new writer %s (%.0fs)"
          % (w.name, w2.name, time.monotonic() - t0), flush=True)
    w.start()
    one_writer(ds, "%s back" % w.name, timeout=60)

    # ---- SIGSTOP of an owner (a follower) past the session timeout -------
    w3 = writers(ds)[0]
    victim = [d for d in ds if d is not w3][0]
    victim.proc.signal(signal.SIGSTOP)
    time.sleep(SESSION_MS / 1000 + 4)
    victim.proc.signal(signal.SIGCONT)
    one_writer(ds, "after SIGSTOP/SIGCONT of %s" % victim.name, timeout=90)
    print("SIGSTOP/SIGCONT %s (%.0fs)" % (victim.name, time.monotonic() - t0),
          flush=True)

    # ---- a destination broker restarted ---------------------------------
    dst.stop_broker(2)
    time.sleep(3)
    dst.start_broker(2)
    print("broker 2 restarted (%.0fs)" % (time.monotonic() - t0), flush=True)

    # ---- one instance's data directory deleted --------------------------
    w4 = one_writer(ds, "after the broker restart", timeout=90)
    gone = [d for d in ds if d is not w4][-1]
    gone.kill9()
    shutil.rmtree(gone.data_dir)
    gone.start()
    one_writer(ds, "%s back on an empty data directory" % gone.name,
               timeout=90)
    print("%s restarted without its data directory (%.0fs)"
          % (gone.name, time.monotonic() - t0), flush=True)

    # ---- a paused former writer cannot append ----------------------------
    old = writers(ds)[0]
    before = mt.log_batches(DST, META)
    old.proc.signal(signal.SIGSTOP)
    rest = [d for d in ds if d is not old]
    new = one_writer(rest, "after SIGSTOP of the writer %s" % old.name,
                     timeout=SESSION_MS / 1000 + 60)
    claims_now = [x for x in mt.log_batches(DST, META) if MLOG_T_CLAIM in x[3]
                  and x[0] > (before[-1][0] if before else -1)]
    h.check(claims_now, "no claim of the new writer %s in %s" % (new.name, META))
    new_claim = claims_now[-1]
    old.proc.signal(signal.SIGCONT)
    one_writer(ds, "after SIGCONT of the former writer %s" % old.name,
               timeout=90)
    print("paused writer %s resumed; writer now %s (%.0fs)"
          % (old.name, writers(ds)[0].name, time.monotonic() - t0), flush=True)

    # ---- settle and check everything ------------------------------------
    load.stop()
    print("load: %d records" % load.n, flush=True)
    final = writers(ds)[0]

    check_copy(SRC, DST, load)

    # metadata identical everywhere
    def same():
        views = [metadata_view(d) for d in ds]
        return all(v == views[0] for v in views) and len(views[0]) == PARTS
    h.wait_for(same, 60, "the same metadata on every instance: %r"
               % {d.name: metadata_view(d) for d in ds})

    # every partition owned by the instance beside its destination leader
    beside = {1: "a", 2: "b", 3: "c"}

    def placed():
        want = {p: beside.get(dst.partition(TOPIC, p)["leader"])
                for p in range(PARTS)}
        return owners(ds) == want
    h.wait_for(placed, 60, "every partition owned by the instance beside "
               "its destination leader: owners %r, leaders %r"
               % (owners(ds), {p: dst.partition(TOPIC, p)["leader"]
                               for p in range(PARTS)}))
    print("owners: %r" % owners(ds), flush=True)

    # every instance shows every partition's live numbers (the status
    # topic): at the end, lag 0 and the destination end at the source's
    c2 = kraw.Cluster(SRC)
    try:
        ends = {p: c2.offsets(TOPIC, p)[1] for p in range(PARTS)}
    finally:
        c2.close()

    def numbers(d):
        return {r["partition"]: (r.get("sourceOffset"),
                                 r.get("destinationOffset"), r.get("lag"))
                for r in d.describe_json("m1")}
    want = {p: (ends[p], ends[p], 0) for p in range(PARTS)}
    for d in ds:
        h.wait_for(lambda d=d: numbers(d) == want, 30,
                   "DescribeMirrors on %s to show every partition caught up "
                   "(%r, want %r)" % (d.name, numbers(d), want))
    print("every instance shows every partition at lag 0", flush=True)

    # /readyz: the writer (log writable) and the followers (members,
    # tailing) all ready
    for d in ds:
        h.wait_for(lambda d=d: readyz(d)[0] == 200, 30,
                   "/readyz of %s (%s) to be 200: %r" % (d.name, role(d),
                                                          readyz(d)))

    # the paused former writer appended nothing after the new claim
    late = [x for x in mt.log_batches(DST, META)
            if x[0] > new_claim[0] and (x[1], x[2]) != (new_claim[1], new_claim[2])
            and x[1] == first_claims[0][1] and x[2] < new_claim[2]
            and MLOG_T_CLAIM not in x[3]]
    h.check(not late, "batches of a deposed writer after the claim of %s: %r"
            % (new.name, late))
    h.check("no longer writes the metadata log" in old.log(),
            "the former writer %s does not say it stopped writing:\n%s"
            % (old.name, old.log()[-3000:]))
    print("ok: %s (%.0fs)" % (final.name, time.monotonic() - t0))


if __name__ == "__main__":
    h.run_main(main)
