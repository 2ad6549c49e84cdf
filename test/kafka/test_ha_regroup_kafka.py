#!/usr/bin/env python3
"""Several mirrord instances (cluster.enabled) on real Kafka 4.4: copying
while the group re-forms, and while the metadata writer is away.

A 3-broker destination whose __consumer_offsets has 3 partitions with 3
replicas, a 1-broker source, three instances a, b, c (no broker local to
any: the partitions are shared by load), session timeout 6 s, heartbeat
1 s.  Two topics under continuous load: PLAIN (6 partitions, plain
records: copying them needs no metadata write) and TXN (3 partitions, a
transactional producer: every commit marker leaves a gap in the source
offsets, so each batch after one needs a translation anchor recorded by
the metadata writer before its Produce).  The group id is chosen so that
its coordinator C is broker 2 or 3; the mirrored topics and the metadata
log's topics have their replicas on the two other brokers, so killing C
moves no leader of theirs.  The destination end of every partition is
sampled every 150 ms.

  * kill -9 of C.  Each instance keeps copying the partitions it owns
    while its membership's lease runs (the session timeout from the last
    heartbeat answered: until then no other instance can have been given
    them); past it, and until the new coordinator answers its heartbeat,
    its partitions do not move (nothing of them is written), DescribeMirrors
    on it shows them STALLED naming the group membership and /readyz says
    503 naming the group; once its heartbeat is answered (the same
    generation: nothing moved) they move again within 3 s.  No partition
    goes FAILED.
  * SIGSTOP of the metadata writer past the session timeout, then SIGCONT.
    The followers' PLAIN partitions keep moving (no stall over 2 s); their
    TXN partitions wait for the writer (DescribeMirrors shows them STALLED,
    "the metadata log has not recorded ...") and move again within 3 s of
    the new writer's promotion, without FAILED.  The stopped writer, once
    resumed, is a member again (or, when a metadata write of its was in
    flight, exits 75 and is started again, as its unit does).
  * kill -9 of the writer (started again): the same.
  * at the end every destination partition holds its source's records:
    PLAIN byte for byte at the same offsets, TXN the committed records in
    order.

The stalls measured (the longest time a partition's end stood still in
each phase, per owner and topic) are printed.
"""

import calendar
import os
import re
import signal
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_ha2_kafka as ha2  # noqa: E402  (coordinator)
import test_ha_kafka as ha  # noqa: E402  (one_writer, readyz, m1_config)

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
META = "rg-meta-" + RUN
PLAIN = "rg-plain-" + RUN
TXN = "rg-txn-" + RUN
NPLAIN, NTXN = 6, 3
TPS = [(PLAIN, p) for p in range(NPLAIN)] + [(TXN, p) for p in range(NTXN)]
SESSION = 6.0
HB = 1.0
SAMPLE_S = 0.15


def instance(dst, name, group):
    return mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": KEY, "topic": META,
                       "timeout_ms": 10000},
        extra_yaml=("cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"%s\"\n"
                    "  instance_id: \"%s\"\n"
                    "  session_timeout_ms: %d\n"
                    "  heartbeat_interval_ms: %d\n"
                    "  status_interval_ms: 1000\n"
                    % (group, name, SESSION * 1000, HB * 1000)))


def log_time(line):
    """The wall time (s) of a mirrord log line."""
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", line)
    y, mo, d, hh, mm, ss, ms = (int(x) for x in m.groups())
    return calendar.timegm((y, mo, d, hh, mm, ss)) + ms / 1000.0


def log_lines(d, pattern, after):
    """(wall time, line) of d's log lines matching pattern, logged at or
    after the wall time after."""
    out = []
    for line in d.log().splitlines():
        if re.search(pattern, line) and re.match(r"\d{4}-", line):
            t = log_time(line)
            if t >= after - 0.001:
                out.append((t, line))
    return out


class Ends:
    """A thread sampling the destination end of every partition in TPS
    every SAMPLE_S: samples [(wall time, {tp: end})], each the time its
    answers were all in (a round that failed is left out)."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.samples = []
        self.halt = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        cl = None
        while not self.halt.is_set():
            ends = {}
            try:
                if cl is None:
                    cl = kraw.Cluster(self.bootstrap, timeout=1)
                for tp in TPS:
                    ends[tp] = cl.offsets(*tp)[1]
                self.samples.append((time.time(), ends))
            except Exception:  # noqa: BLE001 - a broker gone: ask again
                if cl is not None:
                    cl.close()
                cl = None
            time.sleep(SAMPLE_S)
        if cl is not None:
            cl.close()

    def stop(self):
        self.halt.set()
        self.t.join(10)

    def wait_past(self, t):
        h.wait_for(lambda: self.samples and self.samples[-1][0] > t + 0.3,
                   30, "a sample of the destination ends after %.1f" % t)

    def stall(self, tp, t0, t1):
        """The longest time tp's end stood still within [t0, t1] (the
        window's edges count as moves)."""
        self.wait_past(t1)
        last_move, last_end, worst = t0, None, 0.0
        for t, ends in self.samples:
            if t < t0:
                last_end = ends[tp]
                continue
            if t > t1:
                break
            if last_end is not None and ends[tp] != last_end:
                worst = max(worst, t - last_move)
                last_move = t
            last_end = ends[tp]
        return max(worst, t1 - last_move)

    def moved(self, tp, t0, t1):
        """How far tp's end moved between the first and the last sample
        within [t0, t1]."""
        self.wait_past(t1)
        inside = [e[tp] for t, e in self.samples if t0 <= t <= t1]
        return inside[-1] - inside[0] if len(inside) > 1 else 0

    def gap(self, t0, t1):
        """The longest time without a sample within [t0, t1]."""
        ts = [t0] + [t for t, _ in self.samples if t0 <= t <= t1] + [t1]
        return max(b - a for a, b in zip(ts, ts[1:]))


class TxnLoad:
    """A transactional producer committing one record per TXN partition
    per transaction until stopped."""

    def __init__(self, bootstrap):
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "transactional.id": "rg-tx-" + RUN,
                           "transaction.timeout.ms": 60000})
        self.p.init_transactions(30)
        self.n = 0
        self.halt = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.halt.is_set():
            self.p.begin_transaction()
            for part in range(NTXN):
                self.p.produce(TXN, key=b"k%d" % self.n,
                               value=b"v%d-" % self.n + b"x" * (self.n % 40),
                               headers=[("n", b"%d" % self.n)],
                               partition=part)
                self.n += 1
            self.p.commit_transaction(60)
            time.sleep(0.1)

    def stop(self):
        self.halt.set()
        self.t.join(120)
        h.check(not self.t.is_alive(), "the transactional load did not stop")


def owners(ds):
    """{(topic, partition): instance} from the newest part-owner record
    any instance logged (every instance logs the records it applies)."""
    lines = []
    for d in ds:
        lines += re.findall(r"^(\S+) .*m1/(rg-(?:plain|txn)-%s)-(\d+): owner "
                            r"\S+ -> (\S+) \(generation" % RUN, d.log(), re.M)
    out = {}
    for _, t, p, who in sorted(lines):
        out[(t, int(p))] = who
    return out


def own_rows(d, tps):
    """d's DescribeMirrors rows of the partitions tps, or None when it
    cannot be asked."""
    try:
        rows = d.describe_json("m1")
    except Exception:  # noqa: BLE001 - stopped, or the CLI timed out
        return None
    return [r for r in rows if (r["topic"], r["partition"]) in tps]


def report(ends, own, what, t0, t1):
    """Prints and returns {(owner, topic): longest stall} over [t0, t1]."""
    per = {}
    for tp in TPS:
        k = (own.get(tp, "?"), tp[0].split("-")[1])
        per[k] = max(per.get(k, 0.0), ends.stall(tp, t0, t1))
    print("%s (%.1f s window): longest stall per owner and topic: %s "
          "(samples at most %.1f s apart)" % (
              what, t1 - t0, ", ".join("%s/%s %.1f s" % (o, t, s)
                                       for (o, t), s in sorted(per.items())),
              ends.gap(t0, t1)), flush=True)
    return per


def no_failed(ds, since, what):
    for d in ds:
        bad = log_lines(d, r"-> FAILED", since)
        h.check(not bad, "%s: %s went FAILED: %s" % (what, d.name, bad[:3]))


def coordinator_killed(dst, ds, ends, coord):
    own = owners(ds)
    t_kill = time.time()
    gone = []

    def kill():
        # waits until the controller no longer lists the broker, seconds
        # in which the instances' leases may run out and come back: the
        # sampling below goes on meanwhile
        dst.stop_broker(coord, kill=True)
        gone.append(time.time())
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    seen = {d.name: [] for d in ds}     # (time, status, body)
    stalled = {d.name: [] for d in ds}  # (time, rows of its own partitions)
    mine = {d.name: [tp for tp in TPS if own.get(tp) == d.name] for d in ds}

    def settled():
        now = time.time()
        for d in ds:
            st, body = ha.readyz(d)
            seen[d.name].append((now, st, body or ""))
            if st != 200:
                # DescribeMirrors between two /readyz that both say 503:
                # the rows of a moment when it was not a proven member
                # (not of one just after its heartbeat was answered)
                rows = own_rows(d, mine[d.name])
                if rows is not None and ha.readyz(d)[0] != 200:
                    stalled[d.name].append((time.time(), rows))
        back = all(any(s == 200 and t > t_kill + SESSION for t, s, _ in
                       seen[d.name]) for d in ds)
        return back and bool(gone) and len(ha.writers(ds)) == 1
    h.wait_for(settled, 90, "every instance a proven member again after "
               "the coordinator's death")
    killer.join(90)
    h.check(gone, "broker %d still registered 90 s after its kill" % coord)
    print("broker %d (the coordinator) killed; registered no more after "
          "%.1f s" % (coord, gone[0] - t_kill), flush=True)
    t_end = time.time() + 3
    report(ends, own, "coordinator killed", t_kill, t_end)
    h.check(owners(ds) == own, "no partition moved while the coordinator "
            "was down: %r, now %r" % (own, owners(ds)))
    checked = []
    for d in ds:
        lapsed = [t for t, s, b in seen[d.name] if s != 200]
        h.check(lapsed, "%s: /readyz never said 503 while its membership "
                "could not be proven: %r" % (d.name, seen[d.name][:3]))
        bodies = [b for t, s, b in seen[d.name] if s != 200]
        h.check(all("group" in b for b in bodies),
                "%s: /readyz 503 without naming the group: %r"
                % (d.name, bodies[:2]))
        t_ready = min(t for t, s, _ in seen[d.name]
                      if s == 200 and t > max(lapsed))
        h.check(max(lapsed) < t_ready,
                "%s: /readyz order: %r" % (d.name, seen[d.name]))
        # when it copies again: its heartbeat answered, or the members
        # recorded after a new join (its log), or else it joined again
        resumed = log_lines(d, r"copying resumes|cluster: joined group",
                            t_kill)
        t_resume = resumed[0][0] if resumed else t_ready
        for tp in mine[d.name]:
            # copying goes on while the lease runs ...
            s = ends.stall(tp, t_kill, t_kill + SESSION - HB - 1.0)
            h.check(s <= 2.0, "%s-%d (owner %s) stood still %.1f s while "
                    "%s's lease still ran" % (tp[0], tp[1], d.name, s, d.name))
            # ... nothing of it is written past the lease, until the
            # membership is proven again ...
            t0, t1 = t_kill + SESSION + 1.0, t_resume - 0.3
            if t1 > t0:
                moved = ends.moved(tp, t0, t1)
                h.check(moved == 0, "%s-%d (owner %s) moved by %d between "
                        "%.1f s and %.1f s after the coordinator's death: "
                        "its owner's membership had lapsed (no heartbeat "
                        "answered for the session timeout), another "
                        "instance may have owned it" % (
                            tp[0], tp[1], d.name, moved, t0 - t_kill,
                            t1 - t_kill))
            # ... and it catches up at once after
            h.check(ends.moved(tp, t_resume, t_resume + 3.0) > 0,
                    "%s-%d (owner %s) did not move within 3 s after %s "
                    "copied again (+%.1f s)" % (tp[0], tp[1], d.name,
                                                d.name, t_resume - t_kill))
        # DescribeMirrors on it: its own partitions STALLED, naming the
        # membership, while they stand still
        good = [t for t, rows in stalled[d.name]
                if rows and all(r["state"] == "STALLED" and r["stalled"] and
                                "group" in (r["stalledReason"] or "") and
                                "membership" in (r["stalledReason"] or "")
                                for r in rows)]
        if stalled[d.name]:
            checked.append(d.name)
            h.check(good, "%s: DescribeMirrors never showed its partitions "
                    "STALLED naming the membership while /readyz said 503: "
                    "%r" % (d.name, [(round(t - t_kill, 1), [
                        (r["topic"], r["partition"], r["state"],
                         r["stalledReason"]) for r in rows])
                        for t, rows in stalled[d.name][:3]]))
        else:
            # its lapse too short to catch between two samples here
            print("%s: no DescribeMirrors between two /readyz 503" % d.name,
                  flush=True)
        lease = log_lines(d, r"membership of group \S+ not proven", t_kill)
        print("%s: lease ran out %s, copying resumed %s, /readyz 200 at "
              "+%.1f s" % (d.name, ["+%.1f s" % (t - t_kill) for t, _ in
                                    lease], ["+%.1f s" % (t - t_kill) for t, _
                                             in resumed], t_ready - t_kill),
              flush=True)
    h.check(checked, "no instance's DescribeMirrors was read while its "
            "/readyz said 503 before and after: %r" % seen)
    no_failed(ds, t_kill, "coordinator killed")
    return t_end


def writer_away(ds, ends, how):
    """The writer SIGSTOPped past the session timeout (how "stop", then
    SIGCONT) or killed (how "kill", then started again)."""
    w = ha.one_writer(ds, "before the writer goes (%s)" % how)
    own = owners(ds)
    rest = [d for d in ds if d is not w]
    mine = [tp for tp in TPS if own.get(tp) in [d.name for d in rest]]
    t0 = time.time()
    if how == "stop":
        w.proc.signal(signal.SIGSTOP)
    else:
        w.kill9()
    seen = []   # (time, instance, rows)

    def new_writer():
        for d in rest:
            rows = own_rows(d, [tp for tp in mine if own[tp] == d.name])
            if rows is not None:
                seen.append((time.time(), d.name, rows))
        return len(ha.writers(rest)) == 1
    h.wait_for(new_writer, 60, "a new writer after the writer %s"
               % ("stopped" if how == "stop" else "died"))
    nw = ha.writers(rest)[0]
    promoted = log_lines(nw, r"cluster: instance \S+ is now writer", t0)
    h.check(promoted, "%s logs its promotion" % nw.name)
    t_new = promoted[0][0]
    time.sleep(4)
    t1 = time.time()
    report(ends, own, "writer %s %s (new writer %s after %.1f s)" % (
        w.name, "stopped" if how == "stop" else "killed", nw.name,
        t_new - t0), t0, t1)
    for tp in mine:
        if tp[0] == PLAIN:
            s = ends.stall(tp, t0, t1)
            h.check(s <= 2.0, "%s-%d (owner %s) stood still %.1f s while the "
                    "writer was away: plain records need no metadata write"
                    % (tp[0], tp[1], own[tp], s))
        else:
            h.check(ends.moved(tp, t_new, t_new + 3.0) > 0,
                    "%s-%d (owner %s) did not move within 3 s after the new "
                    "writer %s was promoted (%.1f s after the old one went)"
                    % (tp[0], tp[1], own[tp], nw.name, t_new - t0))
    # DescribeMirrors tells which partitions wait for the writer, and
    # never shows a plain one stalled.
    waits = [(t, n, r) for t, n, rows in seen for r in rows
             if r["topic"] == TXN and r["state"] == "STALLED" and
             "metadata log has not recorded" in (r["stalledReason"] or "")]
    h.check(waits, "DescribeMirrors of a follower never showed a TXN "
            "partition STALLED waiting for the metadata writer: %r" % (
                [(round(t - t0, 1), n, [(r["topic"], r["partition"],
                                         r["state"], r["stalledReason"])
                                        for r in rows])
                 for t, n, rows in seen[-3:]],))
    plain_stalled = [(round(t - t0, 1), n, r["partition"], r["stalledReason"])
                     for t, n, rows in seen for r in rows
                     if r["topic"] == PLAIN and r["state"] != "MIRRORING"]
    h.check(not plain_stalled, "a follower's PLAIN partitions shown as not "
            "MIRRORING while the writer was away: %r" % plain_stalled[:3])
    if waits:
        print("writer away: %d DescribeMirrors rows of waiting TXN "
              "partitions, e.g. %s" % (len(waits),
                                      waits[0][2]["stalledReason"][:160]),
              flush=True)
    no_failed(rest, t0, "writer away")
    if how == "stop":
        w.proc.signal(signal.SIGCONT)
        ok = lambda: ha.readyz(w)[0] == 200  # noqa: E731
        h.wait_for(lambda: not w.proc.alive() or ok(), 60,
                   "the resumed old writer %s a member again" % w.name)
        if not w.proc.alive():
            # A metadata write of its that was in flight when it stopped
            # has no known outcome: it exits 75 to read the log afresh
            # (doc/ha.md), and its unit starts it again.
            rc = w.proc.wait(10)
            h.check(rc == 75 and "exit status 75" in w.log(),
                    "the resumed old writer %s exited with %r:\n%s"
                    % (w.name, rc, w.proc.tail()))
            print("the resumed old writer exited 75 (a metadata write's "
                  "outcome unknown); started again", flush=True)
            w.start()
    else:
        w.start()
    ha.one_writer(ds, "%s back" % w.name, timeout=90)
    for d in ds:
        h.wait_for(lambda d=d: ha.readyz(d)[0] == 200, 60,
                   "/readyz of %s to be 200: %r" % (d.name, ha.readyz(d)))


def check_txn(src, dst):
    """Every TXN partition: the destination holds the source's committed
    records (key, value, headers), in order (within 120 s)."""
    rec = lambda m: (m.key(), m.value(), m.headers())  # noqa: E731
    deadline = time.monotonic() + 120
    for p in range(NTXN):
        s = mt.read_partition(src, TXN, p, "rg-cs-" + RUN, record=rec)
        while True:
            d = mt.read_partition(dst, TXN, p, "rg-cd-" + RUN, record=rec)
            if s == d or (len(d) < len(s) and d == s[:len(d)] and
                          time.monotonic() < deadline):
                if s == d:
                    break
                time.sleep(1)
                continue
            h.fail("%s-%d: %d committed records on the source, %d on the "
                   "destination; first difference %r" % (
                       TXN, p, len(s), len(d), next(((a, b) for a, b in
                                                     zip(s, d) if a != b),
                                                    None)))
    print("%s: every committed record copied, in order" % TXN, flush=True)


def main():
    src, = h.real_kafka(1)
    dst, = h.private_kafka(1, brokers=3, extra_props={
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": "3",
        "default.replication.factor": "3"})
    SRC, DST = src.bootstrap, dst.bootstrap
    t00 = time.monotonic()

    group = None
    for k in range(40):
        g = "rg-%s-%d" % (RUN, k)
        node, _ = ha2.coordinator(DST, g)
        if node in (2, 3):
            group, coord = g, node
            break
    h.check(group is not None, "no group id of 40 has its coordinator on "
            "broker 2 or 3")
    other = 5 - coord
    print("group %s: coordinator broker %d; data and metadata on brokers "
          "1 and %d" % (group, coord, other), flush=True)

    # Nothing of the copy lives on the coordinator.
    meta_cfg = {"cleanup.policy": "delete", "retention.bytes": "-1",
                "min.insync.replicas": "2",
                "unclean.leader.election.enable": "false",
                "max.message.bytes": "2097152"}
    dst.create_topic(META, assignment={0: [1, other]},
                     configs=dict(meta_cfg, **{"retention.ms": "-1"}))
    dst.create_topic(META + "-requests", assignment={0: [other, 1]},
                     configs=dict(meta_cfg, **{"retention.ms": "3600000"}))
    dst.create_topic(META + "-status", assignment={0: [1, other]},
                     configs={"cleanup.policy": "compact"})
    for t, n in ((PLAIN, NPLAIN), (TXN, NTXN)):
        dst.create_topic(t, assignment={
            p: [1, other] if p % 2 == 0 else [other, 1] for p in range(n)})
        src.create_topic(t, partitions=n)

    ds = [instance(DST, n, group) for n in ("a", "b", "c")]
    for d in ds:
        d.start()
    w = ha.one_writer(ds, "three instances", timeout=90)
    w.create("m1", ha.m1_config(SRC))
    w.cli_ok("--add", "--mirror", "m1", "--topic", PLAIN)
    w.cli_ok("--add", "--mirror", "m1", "--topic", TXN)
    plain = mt.LayoutWriter(SRC, {PLAIN: list(range(NPLAIN))}, pause=0.05)
    plain.start()
    txn = TxnLoad(SRC)
    ends = Ends(DST)

    h.wait_for(lambda: len(owners(ds)) == len(TPS) and
               sorted(owners(ds).values()) == sorted(
                   [d.name for d in ds] * (len(TPS) // 3)), 90,
               "every instance to copy %d partitions: %r"
               % (len(TPS) // 3, owners(ds)))
    for d in ds:
        h.wait_for(lambda d=d: ha.readyz(d)[0] == 200, 60,
                   "/readyz of %s to be 200: %r" % (d.name, ha.readyz(d)))
    h.wait_for(lambda: len(ends.samples) > 20 and all(
        e > 0 for e in ends.samples[-1][1].values()), 60,
        "every destination partition to receive records")
    print("mirroring; owners %r, writer %s (%.0fs)" % (
        owners(ds), w.name, time.monotonic() - t00), flush=True)
    t = time.time()
    time.sleep(4)
    steady = report(ends, owners(ds), "steady state", t, time.time())
    h.check(max(steady.values()) <= 3.0, "a partition stood still in the "
            "steady state: %r" % steady)

    # ---- kill -9 of the group coordinator --------------------------------
    coordinator_killed(dst, ds, ends, coord)
    dst.start_broker(coord)

    # ---- the writer away -------------------------------------------------
    writer_away(ds, ends, "stop")
    writer_away(ds, ends, "kill")

    # ---- everything copied -----------------------------------------------
    plain.stop()
    txn.stop()
    ends.stop()
    no_failed(ds, 0, "the whole run")
    want = mt.wait_same_ends(SRC, DST, PLAIN, NPLAIN, 120, T)
    mt.check_same_records(SRC, DST, {(PLAIN, p): e
                                     for p, e in enumerate(want)},
                          "rg-check-" + RUN)
    print("%s: every record copied at its offset" % PLAIN, flush=True)
    check_txn(SRC, DST)
    print("ok (%.0fs)" % (time.monotonic() - t00))


if __name__ == "__main__":
    h.run_main(main)
