#!/usr/bin/env python3
"""Several mirrord instances (cluster.enabled) on real Kafka 4.4: a
follower killed and started again within the session timeout.

The shared source and destination pair, three instances a, b, c (static
membership, session timeout 10 s, heartbeat 1 s; no broker local to any,
so the partitions are shared by load).  Two topics under continuous load:
PLAIN (3 partitions, plain records) and TXN (6 partitions, a transactional
producer: each batch after a commit marker needs a translation anchor,
which a follower records through the metadata writer).

A follower that owns a TXN partition is killed with SIGKILL and started
again at once.  Its new process joins the group under a new member id
with the same group.instance.id, well within the session timeout, and
Kafka's coordinator hands it the old membership in the same generation
without a rebalance.  The writer knows members by the id it recorded,
so the instance makes the group rebalance once its model shows the
writer's record names its old process.  What the operator sees is
checked:

  * the restarted instance's partitions are MIRRORING with lag 0 in its
    DescribeMirrors within BOUND s of its start (1-3 s seen; while the
    writer refused every metadata write of the new process until some
    later rebalance, they were not within the 30 s waited);
  * the new process joined a newer generation under the member id it
    was given;
  * DescribeMirrors, read on every instance every 0.3 s from the kill
    until the end, never shows a partition FAILED, and no instance logs a
    partition going FAILED;
  * the writer refused no request of the restarted process past the
    rebalance it asked for;
  * then a fourth instance joins and leaves three times under a
    transactional load at full speed: requests in flight across those
    rebalances are sent again under the new generation (no FAILED
    either), and no partition moves;
  * at the end PLAIN equals the source record for record at the same
    offsets, and TXN holds the source's committed records (key, value,
    headers) in order, read with read_committed.

The time the restarted instance's partitions took is printed.
"""

import json
import os
import re
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_ha_kafka as ha  # noqa: E402  (one_writer, readyz, m1_config)

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()
KEY = os.path.join(T, "secret.key")
META = "rj-meta-" + RUN
PLAIN = "rj-plain-" + RUN
TXN = "rj-txn-" + RUN
NPLAIN, NTXN = 3, 6
TPS = [(PLAIN, p) for p in range(NPLAIN)] + [(TXN, p) for p in range(NTXN)]
SESSION_MS = 10000
BOUND = 10.0


def instance(dst, name, group):
    return mt.Mirrord(
        destination=dst, name=name, start=False, log_level="info",
        storage_kafka={"secret_key_file": KEY, "topic": META,
                       "timeout_ms": 10000},
        extra_yaml=("cluster:\n"
                    "  enabled: true\n"
                    "  group_id: \"%s\"\n"
                    "  instance_id: \"%s\"\n"
                    "  local_broker_id: 99\n"
                    "  session_timeout_ms: %d\n"
                    "  heartbeat_interval_ms: 1000\n"
                    "  status_interval_ms: 1000\n"
                    % (group, name, SESSION_MS)))


class TxnLoad:
    """A transactional producer committing one record per TXN partition
    per transaction, a few transactions a second, until stopped."""

    def __init__(self, bootstrap):
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "transactional.id": "rj-tx-" + RUN,
                           "transaction.timeout.ms": 60000})
        self.p.init_transactions(30)
        self.n = 0
        self.pause = 0.25
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
            time.sleep(self.pause)

    def stop(self):
        self.halt.set()
        self.t.join(120)
        h.check(not self.t.is_alive(), "the transactional load did not stop")


def owners(ds):
    """{(topic, partition): instance} from the newest part-owner record
    any instance logged."""
    lines = []
    for d in ds:
        lines += re.findall(r"^(\S+) .*m1/(rj-(?:plain|txn)-%s)-(\d+): owner "
                            r"\S+ -> (\S+) \(generation" % RUN, d.log(), re.M)
    out = {}
    for _, t, p, who in sorted(lines):
        out[(t, int(p))] = who
    return out


def describe(d):
    """d's DescribeMirrors rows of m1, or None when it cannot tell them
    (starting, killed, or m1 not yet in its model)."""
    try:
        r = d.cli("--describe", "--json", "--mirror", "m1", timeout=20)
    except Exception:  # noqa: BLE001 - timed out
        return None
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


class Watch:
    """A thread reading DescribeMirrors of m1 on every live instance every
    0.3 s: rows [(time, instance, row)]."""

    def __init__(self, ds):
        self.ds = ds
        self.rows = []
        self.halt = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.halt.is_set():
            for d in self.ds:
                if d.proc is None or not d.proc.alive():
                    continue
                rows = describe(d)
                if rows is None:
                    continue
                now = time.time()
                self.rows += [(now, d.name, r) for r in rows]
            time.sleep(0.3)

    def stop(self):
        self.halt.set()
        self.t.join(30)


def check_txn(src, dst):
    rec = lambda m: (m.key(), m.value(), m.headers())  # noqa: E731
    deadline = time.monotonic() + 120
    for p in range(NTXN):
        s = mt.read_partition(src, TXN, p, "rj-cs-" + RUN, record=rec)
        while True:
            d = mt.read_partition(dst, TXN, p, "rj-cd-" + RUN, record=rec)
            if s == d:
                break
            if (len(d) < len(s) and d == s[:len(d)] and
                    time.monotonic() < deadline):
                time.sleep(1)
                continue
            h.fail("%s-%d: %d committed records on the source, %d on the "
                   "destination; first difference %r" % (
                       TXN, p, len(s), len(d), next(((a, b) for a, b in
                                                     zip(s, d) if a != b),
                                                    None)))
    print("%s: every committed record copied, in order" % TXN, flush=True)


def main():
    src, dst = h.real_kafka(2)
    SRC, DST = src.bootstrap, dst.bootstrap
    t00 = time.monotonic()
    for t, n in ((PLAIN, NPLAIN), (TXN, NTXN)):
        src.create_topic(t, partitions=n)
        dst.create_topic(t, partitions=n)

    ds = [instance(DST, n, "rj-" + RUN) for n in ("a", "b", "c")]
    for d in ds:
        d.start()
    w = ha.one_writer(ds, "three instances", timeout=90)
    w.create("m1", ha.m1_config(SRC))
    w.cli_ok("--add", "--mirror", "m1", "--topic", PLAIN)
    w.cli_ok("--add", "--mirror", "m1", "--topic", TXN)
    plain = mt.LayoutWriter(SRC, {PLAIN: list(range(NPLAIN))}, pause=0.05)
    plain.start()
    txn = TxnLoad(SRC)

    h.wait_for(lambda: len(owners(ds)) == len(TPS) and
               sorted(owners(ds).values()) == sorted(
                   [d.name for d in ds] * (len(TPS) // 3)), 90,
               "every instance to copy %d partitions: %r"
               % (len(TPS) // 3, owners(ds)))
    for d in ds:
        h.wait_for(lambda d=d: ha.readyz(d)[0] == 200, 60,
                   "/readyz of %s to be 200: %r" % (d.name, ha.readyz(d)))
    own = owners(ds)
    # the victim: a follower owning a TXN partition
    f = next(d for d in ds if d is not w and
             any(own[tp] == d.name for tp in TPS if tp[0] == TXN))
    mine = [tp for tp in TPS if own[tp] == f.name]

    def caught_up(d, tps):
        rows = [r for r in describe(d) or []
                if (r["topic"], r["partition"]) in tps]
        return len(rows) == len(tps) and all(
            r["state"] == "MIRRORING" and r["lag"] == 0 for r in rows)
    h.wait_for(lambda: caught_up(f, mine), 60, "%s's partitions %r "
               "MIRRORING with lag 0 before the kill" % (f.name, mine))
    print("mirroring; owners %r, writer %s; killing follower %s (%s) "
          "(%.0fs)" % (own, w.name, f.name, mine, time.monotonic() - t00),
          flush=True)

    watch = Watch(ds)
    time.sleep(2)
    t_kill = time.time()
    f.kill9()
    t_start = time.time()
    f.start()
    print("%s started again %.1f s after its kill" % (f.name,
                                                      t_start - t_kill),
          flush=True)
    # what the operator sees: its partitions caught up
    seen = []

    def back():
        ok = caught_up(f, mine)
        seen.append((time.time(), ok))
        return ok
    h.wait_for(back, 30, "%s's partitions %r MIRRORING with lag 0 after its "
               "restart" % (f.name, mine))
    took = seen[-1][0] - t_start
    # the static rejoin: the same generation, under a new member id
    joins = re.findall(r"cluster: joined group \S+ generation (\d+) as "
                       r"(\w+) \(member (\S+?)[,)]",
                       open(f.proc.log_path, "rb").read().decode(
                           "utf-8", "replace"))
    print("%s's joins after the restart: %r" % (f.name, joins), flush=True)
    h.check(joins and len(joins) >= 2 and int(joins[1][0]) > int(joins[0][0])
            and all(m == joins[0][2] for _, _, m in joins),
            "%s's new process did not join a new generation under its new "
            "member id: %r" % (f.name, joins))
    # the writer refused nothing of the new process once the generation
    # after its static rejoin was recorded
    refused = re.findall(r"request of instance %s from generation (\d+) "
                         r"\(member (\S+)\); the current generation is "
                         r"(\d+)" % f.name, w.log())
    late = [r for r in refused if r[1] == joins[0][2] and
            int(r[0]) > int(joins[0][0])]
    h.check(not late, "the writer refused requests of %s's new process in "
            "the generation it rejoined: %r" % (f.name, late[:3]))
    resent = len(re.findall(r"writer refused request .* sending it",
                            open(f.proc.log_path, "rb").read().decode(
                                "utf-8", "replace")))
    print("the writer refused %d requests of %s's processes; its new one "
          "sent %d again" % (len(refused), f.name, resent), flush=True)
    print("%s's partitions MIRRORING with lag 0 %.1f s after its start "
          "(bound %.1f s)" % (f.name, took, BOUND), flush=True)
    h.check(owners(ds) == own, "partitions moved: %r, now %r"
            % (own, owners(ds)))
    h.check(took < BOUND, "%s's partitions took %.1f s to be MIRRORING with "
            "lag 0 after its restart (bound %.1f s)" % (f.name, took, BOUND))
    t_cycles = time.time()

    # Requests in flight across rebalances: a fourth instance joins and
    # leaves, three times (it is given nothing: owners stay while they
    # are members).
    x = instance(DST, "x", "rj-" + RUN)
    txn.pause = 0.0
    for _ in range(3):
        x.start()
        time.sleep(3)
        x.stop()
        time.sleep(3)
    txn.pause = 0.25
    h.check(owners(ds) == own, "partitions moved while x joined and left: "
            "%r, now %r" % (own, owners(ds)))
    watch.stop()
    again = sum(len(re.findall(r"writer refused request .* sending it",
                               d.log())) for d in ds)
    print("%d requests of the instances sent again after a refusal"
          % again, flush=True)
    failed = [(round(t - t_kill, 1), n, r["topic"], r["partition"],
               r["errorMessage"]) for t, n, r in watch.rows
              if r["state"] == "FAILED"]
    print("DescribeMirrors read %d rows on the instances from the kill on "
          "(%.1f s), x joining and leaving from +%.1f s" % (
              len(watch.rows), time.time() - t_kill, t_cycles - t_kill),
          flush=True)
    h.check(not failed, "DescribeMirrors showed partitions FAILED (s after "
            "the kill): %r" % failed[:5])
    for d in ds:
        bad = [ln for ln in d.log().splitlines() if "-> FAILED" in ln]
        h.check(not bad, "%s logged a partition going FAILED: %r"
                % (d.name, bad[:3]))

    plain.stop()
    txn.stop()
    want = mt.wait_same_ends(SRC, DST, PLAIN, NPLAIN, 120, T)
    mt.check_same_records(SRC, DST, {(PLAIN, p): e
                                     for p, e in enumerate(want)},
                          "rj-check-" + RUN)
    print("%s: every record copied at its offset" % PLAIN, flush=True)
    check_txn(SRC, DST)
    for d in ds:
        d.stop()
    print("ok (%.0fs)" % (time.monotonic() - t00))


if __name__ == "__main__":
    h.run_main(main)
