#!/usr/bin/env python3
"""The failover and failback drill, as an operator runs it (mirrord(8)
FAILOVER AND FAILBACK DRILL gives the same commands), on two private real
Apache Kafka 4.4 clusters with the ACL authorizer (security "acl"): A is
the primary, B the copy.  One mirrord beside each: d_b writes B (mirror ab,
A -> B), d_a writes A (mirror ba, B -> A, the failback).  Both write their
destination as User:bob (not a super user) and read their source as
User:admin; the application's producers and its consumer group `app` are
User:alice, granted the same on both clusters.

  1. ab mirrors 'dr\\..*' but not dr.scratch, with read-only topics: the
     idempotent dr.orders (2 partitions) and the transactional dr.payments
     (committed and aborted transactions) are on B record for record;
     alice's writes to B are refused (DENY WRITE); `app` consumes on A and
     its offsets are synced to B.
  2. d_b is stopped (SIGSTOP): A takes more orders and payments (some
     aborted), then A is killed -9.
  3. d_b resumed, the partitions STALLED; failover on B: --remove --wait
     exits 6 (the source could not be asked), the report says "at least N"
     and N is at most what really stayed on A; B holds exactly what was
     copied; the DENY is lifted, B is writable.
  4. `app` resumes on B exactly at the synced offsets (nothing read twice,
     nothing skipped, relative to what B holds); alice's producers write
     to B; `app` reads part of it and commits on B.
  5. A comes back: nothing of the old mirror ab writes to B again: `app`'s
     offsets on B do not move back (over many group-sync rounds, and after
     a restart of d_b), no ACL, topic config or record changes on B.
  6. d_a creates ba (source B) and adds the same topics: every partition
     FAILED "failback divergence at offset N" naming A's never-mirrored
     offsets; --recover --resolution preserve copies A's divergent
     committed records (none aborted) to <topic>.diverged-<epoch>,
     checked record for record against a read_committed read of A, and
     B's records after the failover are copied after them on A.
  7. Realign, the documented way (--remove, delete the topic on A, --add):
     a fresh copy, A equal to B record for record (dr.orders at the same
     offsets and in the same batches).
  8. Planned switch back: B's producers stopped, ba current (--describe
     --json, GET /mirrors/ba/ready), `app`'s offsets synced to A,
     --remove --wait exits 0; `app` resumes on A exactly, alice writes to
     A again, `app` reads exactly that.

Every step checks every record (keys, values, headers, timestamps) and
every committed offset of `app`: nothing lost, nothing duplicated, nothing
rewound.

DRILL_CONTINUE=a,b,c (off by default) lets the drill go on past the
failure of the assertions tagged a (step 5: app's offsets on B do not move
back), b (step 6: the transactional topic's divergence found and
preserved) and c (step 7: the realigned topics copied afresh): each such
failure is printed, an operator's work-around follows (app's offsets
committed back on B; dr.payments left FAILED until it is realigned; ba
deleted and made again), and the test fails at its end.  It is for
looking at the later steps while one of those fails.
"""

import json
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
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402
from test_groupsync_kafka import raw_commit, raw_fetch  # noqa: E402
from test_tconfigs_kafka import alter, describe as topic_configs  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

ORD, PAY, SCRATCH = "dr.orders", "dr.payments", "dr.scratch"
TPS = [(ORD, 0), (ORD, 1), (PAY, 0)]
PATTERN, EXCLUDE = r"dr\..*", r"dr\.scratch"
GROUP = "app"
TXN_ID = "dr-payments"
SYNC_MS = 500
ROUNDS = 12                      # group-sync intervals watched in step 5
CONTINUE = set(filter(None, os.environ.get("DRILL_CONTINUE", "").split(",")))
KNOWN = []


def step(n, what):
    print("step %s PASS: %s" % (n, what), flush=True)


def known(tag, cond, msg):
    """An assertion tagged for DRILL_CONTINUE: fails the test at once
    unless DRILL_CONTINUE names tag (then it is printed and the test fails
    at its end).  Returns cond."""
    if cond:
        return True
    if tag not in CONTINUE:
        h.fail(msg)
    print("KNOWN FAILURE (%s): %s" % (tag, msg), flush=True)
    KNOWN.append((tag, msg))
    return False


def tpname(tp):
    return "%s-%d" % tp


# ---- what the clusters hold (the test's own reads: the super user's
# PLAINTEXT listener) ---------------------------------------------------------

def rec(m):
    return (m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
            m.timestamp()[1])


def committed(cl, tp, start=0):
    """[(offset, key, value, headers, timestamp)] of every committed record
    of tp on cluster cl from offset start (read_committed)."""
    return mt.read_partition(cl.admin_bootstrap, tp[0], tp[1], "drill-reader",
                             start, record=rec)


def everything(cl, tp):
    """The same, read_uncommitted: aborted records too."""
    return mt.read_partition(cl.admin_bootstrap, tp[0], tp[1], "drill-reader",
                             isolation="read_uncommitted", record=rec)


def content(recs):
    """Records without their offsets."""
    return [r[1:] for r in recs]


def kv(recs):
    return [(r[1], r[2]) for r in recs]


def end(cl, tp):
    return mt.end_offset(cl.admin_bootstrap, tp[0], tp[1])


def group_offsets(cl):
    """{tp: committed offset} of group app on cl."""
    got = raw_fetch(cl.admin_bootstrap, GROUP)
    return {tp: got[tp][0] for tp in TPS if tp in got}


def topics_of(cl):
    return set(cl.metadata()["topics"])


def denies(cl):
    return {b for b in cl.acls() if b[6] == "DENY"}


def deny_write(topic):
    return ("TOPIC", topic, "LITERAL", "User:alice", "*", "WRITE", "DENY")


def next_after(recs, offset):
    """(key, value) of the first record at or after offset, None at the end."""
    for r in recs:
        if r[0] >= offset:
            return (r[1], r[2])
    return None


# ---- the application ------------------------------------------------------

def alice(cl, **extra):
    c = cl.client_config(user="alice")
    c.update(extra)
    return c


class Orders:
    """dr.orders' idempotent producer (alice): order n goes to partition
    n % 2, key order-<n>, value "<site> order <n>", header site."""

    def __init__(self):
        self.n = 0

    def send(self, cl, count, site, flushes=1):
        """count orders, in flushes rounds (each acknowledged before the
        next is produced: batches of their own)."""
        p = Producer(alice(cl, **{"enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5}))
        errors = []
        for i in range(count):
            p.produce(ORD, partition=self.n % 2, key=b"order-%d" % self.n,
                      value=b"%s order %d" % (site.encode(), self.n),
                      headers=[("site", site.encode())],
                      on_delivery=lambda e, _m: e and errors.append(str(e)))
            self.n += 1
            if (i + 1) % -(-count // flushes) == 0:
                mt.flush_all(p, "orders to %s" % cl.label)
        mt.flush_all(p, "orders to %s" % cl.label)
        h.check(not errors, "orders to %s: %s" % (cl.label, errors[:3]))


class Payments:
    """dr.payments' transactional producer (alice, transactional.id
    dr-payments): plan is [(commit?, records)], one transaction each."""

    def __init__(self):
        self.n = 0
        self.aborted = set()   # values of aborted records

    def send(self, cl, plan, site):
        p = Producer(alice(cl, **{"transactional.id": TXN_ID, "acks": "all",
                                  "linger.ms": 5,
                                  "transaction.timeout.ms": 60000}))
        p.init_transactions(60)
        for commit, count in plan:
            p.begin_transaction()
            for _ in range(count):
                v = b"%s payment %d %s" % (site.encode(), self.n,
                                           b"commit" if commit else b"abort")
                p.produce(PAY, partition=0, key=b"pay-%d" % self.n, value=v,
                          headers=[("site", site.encode())])
                if not commit:
                    self.aborted.add(v)
                self.n += 1
            mt.flush_all(p, "payments to %s" % cl.label)
            if commit:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)


def refused_write(cl, topic):
    """One record produced by alice to topic on cl: the error name, or None
    when it was written (then it is a real record of the topic)."""
    p = Producer(alice(cl, **{"message.timeout.ms": 15000, "retries": 0,
                              "enable.idempotence": False}))
    res = []
    p.produce(topic, partition=0, key=b"probe", value=b"write probe",
              on_delivery=lambda e, _m: res.append(e))
    p.flush(30)
    h.check(len(res) == 1, "no delivery report for alice's probe (%r)" % res)
    return None if res[0] is None else res[0].name()


class App:
    """The consumer group `app`, as the application runs it: alice's
    consumer subscribes to dr.orders and dr.payments (read_committed;
    auto.offset.reset=error once the group has offsets, so it never
    resets silently), reads up to take[tp] records of each partition
    (None: to the end), commits after the last one read and leaves, so the
    group is empty between runs.  read[tp] is everything it processed,
    (key, value) in order."""

    def __init__(self):
        self.read = {tp: [] for tp in TPS}

    def run(self, cl, take, first=False):
        before = group_offsets(cl)
        c = Consumer(alice(cl, **{
            "group.id": GROUP, "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest" if first else "error",
            "enable.partition.eof": True, "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10000}))
        c.subscribe([ORD, PAY])
        got = {tp: [] for tp in TPS}
        done = set(tp for tp in TPS if take.get(tp, 0) == 0)
        deadline = time.monotonic() + 90
        try:
            while len(done) < len(TPS):
                if time.monotonic() > deadline:
                    h.fail("app on %s: not done in 90 s: %r" % (
                        cl.label, {tpname(tp): len(v) for tp, v in got.items()}))
                m = c.poll(0.2)
                if m is None:
                    continue
                tp = (m.topic(), m.partition())
                if m.error():
                    if m.error().code() == -191:   # _PARTITION_EOF
                        if take.get(tp, 0) is None:
                            done.add(tp)
                        continue
                    h.fail("app on %s: %s" % (cl.label, m.error()))
                if tp in done:
                    continue      # fetched ahead, not processed
                got[tp].append(rec(m))
                if take[tp] is not None and len(got[tp]) >= take[tp]:
                    done.add(tp)
            offs = [TopicPartition(t, p, got[(t, p)][-1][0] + 1)
                    for t, p in TPS if got[(t, p)]]
            if offs:
                c.commit(offsets=offs, asynchronous=False)
        finally:
            c.close()
        # What it read is what cl holds from its committed offsets on.
        for tp in TPS:
            want = committed(cl, tp, before.get(tp, 0))[:len(got[tp])]
            eq(got[tp], want, "app on %s: %s read from its committed offset "
               "%r" % (cl.label, tpname(tp), before.get(tp)))
            self.read[tp] += kv(got[tp])
        after = group_offsets(cl)
        for tp in TPS:
            if got[tp]:
                eq(after.get(tp), got[tp][-1][0] + 1, "app's commit on %s "
                   "for %s" % (cl.label, tpname(tp)))
        return got


def check_stream(app, stream, where):
    """app processed a prefix of stream ((key, value) in the order of the
    partition): nothing twice, nothing skipped."""
    for tp in TPS:
        r, s = app.read[tp], stream[tp]
        twice = len(r) - len(set(r))
        skipped = [x for x in s[:len(r)] if x not in r]
        h.check(twice == 0 and not skipped and r == s[:len(r)],
                "%s: app's records of %s are not the partition's first %d "
                "records: %d read twice, %d skipped (first difference %r)"
                % (where, tpname(tp), len(r), twice, len(skipped),
                   next(((a, b) for a, b in zip(r, s) if a != b), None)))


def check_synced(src, dst, src_offs, what, tps=TPS, timeout=60):
    """Waits until group app's offsets on dst of the partitions tps
    translate src_offs ({tp: offset} on src): dst's next record is src's
    next record (by key and value), or both are at their end.  Returns
    dst's offsets."""
    s = {tp: committed(src, tp) for tp in tps}
    d = {tp: committed(dst, tp) for tp in tps}

    def ok():
        got = group_offsets(dst)
        for tp in tps:
            if tp not in got or next_after(d[tp], got[tp]) != \
                    next_after(s[tp], src_offs[tp]):
                return False
            if next_after(d[tp], got[tp]) is None and got[tp] != end(dst, tp):
                return False
        return got
    return h.wait_for(ok, timeout, "%s: app's offsets on %s (%r) translate "
                      "those on %s (%r)" % (what, dst.label, group_offsets(dst),
                                           src.label, src_offs))


# ---- mirrord ---------------------------------------------------------------

def mirror_configs(source):
    """The mirror's configs, as the properties file of --create holds them."""
    return mt.sasl_source(source.bootstrap, "admin", **{
        "mirror.groups.include": GROUP,
        "mirror.groups.sync.interval.ms": str(SYNC_MS),
        "mirror.topic.read.only": "true"})


def rows(d, mirror):
    return {(r["topic"], r["partition"]): r for r in d.describe_json(mirror)
            if r["topic"] in (ORD, PAY)}


def caught_up(d, mirror, what, timeout=120):
    return mt.wait_caught_up(d, mirror, timeout, what, topic=(ORD, PAY),
                             count=len(TPS), fail_on_failed=True)


def report_rows(out):
    """The failover report of --remove --wait: (summary line,
    {tp: {column: cell}})."""
    lines = out.rstrip("\n").split("\n")
    i = next(i for i, l in enumerate(lines)
             if l.startswith("Failover report of mirror"))
    head = lines[i + 1].split()
    got = {}
    for l in lines[i + 2:]:
        row = dict(zip(head, l.split()))
        got[(row["TOPIC"], int(row["PARTITION"]))] = row
    return lines[i], got


def grant_mirrord(cl):
    """What the operator grants mirrord's destination principal (bob) on
    each cluster: the dr. topics, ACL management, every group."""
    cl.grant("User:bob", ["ALL"], topic="dr.", pattern="prefixed")
    cl.grant("User:bob", ["DESCRIBE", "ALTER"], cluster=True)
    cl.grant("User:bob", ["ALL"], group="*")


def main():
    A, B = h.private_kafka(2, "acl")
    A.label, B.label = "A", "B"
    for cl in (A, B):
        # mirrord's grants, and the application's: the same on both
        # clusters, so that it can run on either.
        grant_mirrord(cl)
        cl.grant("User:alice", ["READ", "WRITE", "DESCRIBE"], topic="dr.",
                 pattern="prefixed")
        cl.grant("User:alice", ["READ"], group=GROUP)
        cl.grant("User:alice", ["WRITE", "DESCRIBE"], transactional_id=TXN_ID)
    A.create_topic(ORD, partitions=2, configs={"retention.ms": "604800000"})
    A.create_topic(PAY, partitions=1)
    A.create_topic(SCRATCH, partitions=1)

    orders, payments, app = Orders(), Payments(), App()
    orders.send(A, 40, "A")
    payments.send(A, [(True, 3), (False, 2), (True, 2), (False, 1),
                      (True, 4)], "A")
    mt.produce_tagged(A.admin_bootstrap, SCRATCH, 0, 5, "scratch")

    d_b = mt.Mirrord(destination=B.bootstrap, name="d_b",
                     destination_client=mt.sasl_plain("bob"),
                     extra_yaml=mt.STALL_YAML)
    d_a = mt.Mirrord(destination=A.bootstrap, name="d_a",
                     destination_client=mt.sasl_plain("bob"),
                     extra_yaml=mt.STALL_YAML)

    # ---- 1. mirror A -> B ------------------------------------------------
    d_b.create("ab", mirror_configs(A))
    r = d_b.cli_ok("--add", "--mirror", "ab", "--topic", PATTERN,
                   "--exclude", EXCLUDE)
    print(r.stdout, end="", flush=True)
    eq(r.stdout, "Added 2 topic(s) in mirror ab: [%s, %s]\n" % (ORD, PAY),
       "step 1: --add's output")
    caught_up(d_b, "ab", "step 1: ab caught up")
    eq(sorted({t for t, _p in d_b.states("ab")}), [ORD, PAY],
       "step 1: the topics of mirror ab (dr.scratch excluded)")
    h.check(SCRATCH not in topics_of(B), "step 1: dr.scratch created on B")
    cfg = json.loads(d_b.cli_ok("--describe", "--mirror", "ab", "--config",
                                "--json").stdout)
    eq((cfg["includePatterns"], cfg["excludePatterns"]),
       ([PATTERN], [EXCLUDE]), "step 1: ab's saved patterns")
    n = mt.same_batches(A.admin_bootstrap, B.admin_bootstrap, ORD, [0, 1])
    a_pay, b_pay = committed(A, (PAY, 0)), committed(B, (PAY, 0))
    eq(content(b_pay), content(a_pay), "step 1: dr.payments' committed "
       "records on B")
    h.check(not [r for r in everything(B, (PAY, 0))
                 if r[2] in payments.aborted],
            "step 1: an aborted payment on B")
    h.check([r[0] for r in b_pay] != [r[0] for r in a_pay],
            "test setup: dr.payments' offsets differ between A and B "
            "(markers and aborted records are not copied)")
    # The read-only guard denies alice's writes on B.
    want = {deny_write(ORD), deny_write(PAY)}
    h.wait_for(lambda: want <= B.acls(), 60, "step 1: the DENY WRITE on B "
               "(missing %r)" % (want - B.acls()))
    for t in (ORD, PAY):
        eq(refused_write(B, t), "TOPIC_AUTHORIZATION_FAILED",
           "step 1: alice writing %s on B while it is mirrored" % t)
    h.wait_for(lambda: topic_configs(B, ORD).get("retention.ms") ==
               "604800000", 60, "step 1: dr.orders' retention.ms on B")
    # app consumes on A; its offsets reach B.
    app.run(A, {(ORD, 0): 11, (ORD, 1): 7, (PAY, 0): 4}, first=True)
    check_synced(A, B, group_offsets(A), "step 1, first commit")
    app.run(A, {(ORD, 0): 4, (ORD, 1): 9, (PAY, 0): 3})
    synced = check_synced(A, B, group_offsets(A), "step 1, second commit")
    step(1, "ab mirrors dr.orders (%d records, same batches) and dr.payments "
         "(%d committed, none aborted), not dr.scratch; alice's writes to "
         "B refused (DENY WRITE); app's offsets on A synced to B "
         "(%r)" % (n, len(b_pay), {tpname(tp): o for tp, o in synced.items()}))

    # ---- 2. the link stalls, A takes more, A dies ------------------------
    d_b.proc.signal(signal.SIGSTOP)
    orders.send(A, 12, "A", flushes=3)
    payments.send(A, [(True, 3), (False, 2), (True, 2), (False, 3),
                      (True, 1)], "A")
    a_end = {tp: end(A, tp) for tp in TPS}
    a_recs = {tp: committed(A, tp) for tp in TPS}
    a_all = {tp: everything(A, tp) for tp in TPS}
    A.stop(kill=True)
    step(2, "d_b stopped, A took 12 orders and 3 committed and 2 aborted "
         "transactions more (ends %r), A killed -9"
         % {tpname(tp): e for tp, e in a_end.items()})

    # ---- 3. failover on B ------------------------------------------------
    d_b.proc.signal(signal.SIGCONT)

    def stalled():
        _out, t = mt.describe_table(d_b, "ab")
        return len(t) == len(TPS) and all(
            row["STATE"] == "STALLED" and A.bootstrap in row["REASON"]
            for row in t.values()) and t
    t = h.wait_for(stalled, mt.STALL_WITHIN_S + 10, "step 3: ab's partitions "
                   "STALLED naming A (%s)" % mt.describe_table(d_b, "ab")[0])
    print(t[(ORD, 0)]["line"], flush=True)
    r = d_b.cli_rc(6, "--remove", "--mirror", "ab", "--topic", PATTERN,
                   "--wait", "60")
    print(r.stdout + r.stderr, end="", flush=True)
    lines = r.stdout.split("\n")
    eq(lines[:2], ["Removed include pattern '%s' from mirror ab: discovery "
                   "no longer adds the topics it matches" % PATTERN,
                   "Stopped mirroring for 2 topic(s) in mirror ab: [%s, %s]"
                   % (ORD, PAY)], "step 3: --remove's first lines")
    h.check("source records may not have been copied: the source could not "
            "be asked at the stop (exit status 6)" in r.stderr,
            "step 3: why --remove exits 6: %r" % r.stderr)
    summary, rep = report_rows(r.stdout)
    eq(sorted(rep), sorted(TPS), "step 3: the report's partitions")
    L, E, lower = {}, {}, {}
    for tp in TPS:
        L[tp] = int(rep[tp]["LAST-MIRRORED-OFFSET"])
        E[tp] = int(rep[tp]["EPOCH"])
        cell = rep[tp]["NOT-COPIED"]
        h.check(cell.startswith(">="), "step 3: %s NOT-COPIED %r is not a "
                "lower bound" % (tpname(tp), cell))
        lower[tp] = int(cell[2:])
        left = a_end[tp] - L[tp] - 1
        h.check(0 <= lower[tp] <= left, "step 3: %s NOT-COPIED %s, but %d "
                "offsets were not copied" % (tpname(tp), cell, left))
    m = re.match(r"Failover report of mirror ab: 3 partition\(s\) STOPPED, "
                 r"at least (\d+) source offset\(s\) not copied", summary)
    h.check(m and int(m.group(1)) == sum(lower.values()),
            "step 3: the report's summary: %r" % summary)
    js = rows(d_b, "ab")
    for tp in TPS:
        x = js[tp]
        eq((x["state"], x["lastMirroredOffset"], x["failoverLagIsLowerBound"]),
           ("STOPPED", L[tp], True), "step 3: %s in --describe --json"
           % tpname(tp))
    # B holds exactly what was copied: A's records up to L.
    b_fail = {tp: committed(B, tp) for tp in TPS}
    b_fail_end = {tp: end(B, tp) for tp in TPS}
    for tp in TPS:
        copied = [x for x in a_recs[tp] if x[0] <= L[tp]]
        eq(content(b_fail[tp]), content(copied), "step 3: %s on B: A's "
           "records up to the last mirrored offset %d" % (tpname(tp), L[tp]))
        if tp[0] == ORD:
            eq(b_fail[tp], copied, "step 3: %s on B at A's offsets"
               % tpname(tp))
            eq(b_fail_end[tp], L[tp] + 1, "step 3: %s's end on B"
               % tpname(tp))
        h.check(a_end[tp] > L[tp] + 1, "test setup: %s: A holds offsets "
                "never copied (A's end %d, last copied %d)"
                % (tpname(tp), a_end[tp], L[tp]))
    h.wait_for(lambda: not (denies(B) & {deny_write(ORD), deny_write(PAY)}),
               30, "step 3: the DENY WRITE on B's topics lifted")
    step(3, "failover on B: --remove --wait exit 6, %s; last mirrored %r; "
         "B holds exactly A's records up to there; B's topics writable"
         % (summary, {tpname(tp): o for tp, o in L.items()}))

    # ---- 4. B is the primary -----------------------------------------------
    eq(group_offsets(B), synced, "step 4: app's offsets on B before it "
       "resumes (the last ones synced)")
    stream = {tp: kv(b_fail[tp]) for tp in TPS}
    got = app.run(B, {tp: None for tp in TPS})
    check_stream(app, stream, "step 4, app resumed on B")
    for tp in TPS:
        eq(len(app.read[tp]), len(stream[tp]), "step 4: app read %s to its "
           "end on B" % tpname(tp))
    resumed = {tpname(tp): len(v) for tp, v in got.items()}
    orders.send(B, 16, "B")
    payments.send(B, [(True, 2), (False, 2), (True, 3), (False, 1),
                      (True, 2)], "B")
    for tp in TPS:
        h.check(not [x for x in everything(B, tp) if x[2] == b"write probe"],
                "test setup: a refused probe reached B")
    app.run(B, {(ORD, 0): 5, (ORD, 1): 3, (PAY, 0): 4})
    stream = {tp: kv(committed(B, tp)) for tp in TPS}
    check_stream(app, stream, "step 4, app on B")
    b_app = group_offsets(B)
    step(4, "app resumed on B at the synced offsets: read %r, 0 twice, 0 "
         "skipped; alice wrote 16 orders and 5 transactions to B; app "
         "committed %r on B" % (resumed, {tpname(tp): o
                                          for tp, o in b_app.items()}))

    # ---- 5. A comes back -------------------------------------------------
    alter(B, ORD, {"retention.ms": "172800000"})   # B's own now
    # (the broker answers DescribeConfigs from its metadata image, which
    # may not hold the change at once)
    h.wait_for(lambda: topic_configs(B, ORD).get("retention.ms") ==
               "172800000", 60, "step 5: dr.orders' retention.ms on B to be "
               "B's own")
    before = {"acls": B.acls(),
              "configs": {t: topic_configs(B, t) for t in (ORD, PAY)},
              "ends": {tp: end(B, tp) for tp in TPS},
              "records": {tp: committed(B, tp) for tp in TPS}}
    back = time.monotonic()
    A.start_again()

    def watch(what, since):
        """app's offsets on B never move over ROUNDS group-sync intervals
        once d_b has read A's metadata (after since)."""
        def answered():
            v = mt.metric_series(d_b.metrics(),
                                 "mirrord_mirror_source_seconds_since_success",
                                 mirror="ab", request="Metadata")
            return v is not None and 0 <= v < time.monotonic() - since
        h.wait_for(answered, 60, "%s: d_b to read A's metadata again" % what)
        stop = time.monotonic() + ROUNDS * SYNC_MS / 1000.0 + 2
        while time.monotonic() < stop:
            now = group_offsets(B)
            if not known("a", now == b_app, "%s: app's committed offsets on B "
                         "moved from %r to %r: the old mirror ab wrote A's "
                         "offsets of before the failover over them" % (
                             what, {tpname(tp): o for tp, o in b_app.items()},
                             {tpname(tp): o for tp, o in now.items()})):
                # The operator puts app's offsets back.
                raw_commit(B.admin_bootstrap, GROUP,
                           {tp: (o, "") for tp, o in b_app.items()})
                return
            time.sleep(0.1)
    watch("step 5, A back", back)
    d_b.stop()
    restarted = time.monotonic()
    d_b.start()
    watch("step 5, d_b restarted", restarted)
    after = {"acls": B.acls(),
             "configs": {t: topic_configs(B, t) for t in (ORD, PAY)},
             "ends": {tp: end(B, tp) for tp in TPS},
             "records": {tp: committed(B, tp) for tp in TPS}}
    for k in ("acls", "configs", "ends", "records"):
        eq(after[k], before[k], "step 5: B's %s after A came back" % k)
    eq(group_offsets(B), b_app, "step 5: app's offsets on B")
    eq(sorted(set(d_b.states("ab").values())), ["STOPPED"],
       "step 5: ab's partitions")
    step(5, "A is back: over %d group-sync intervals, and after a restart of "
         "d_b, app's offsets on B, B's ACLs, topic configs and records are "
         "unchanged" % ROUNDS)

    # ---- 6. failback: the reverse mirror B -> A --------------------------
    a_back = {tp: everything(A, tp) for tp in TPS}
    eq(a_back, a_all, "step 6: A's records after its restart")
    D = {tp: end(A, tp) for tp in TPS}
    eq(D, a_end, "step 6: A's ends after its restart")
    d_a.create("ba", mirror_configs(B))
    r = d_a.cli_ok("--add", "--mirror", "ba", "--topic", PATTERN,
                   "--exclude", EXCLUDE)
    print(r.stdout, end="", flush=True)
    eq(r.stdout, "Added 2 topic(s) in mirror ba: [%s, %s]\n" % (ORD, PAY),
       "step 6: --add's output")

    def failed():
        x = rows(d_a, "ba")
        return len(x) == len(TPS) and all(v["state"] == "FAILED"
                                          for v in x.values()) and x
    x = h.wait_for(failed, 120, "step 6: ba's partitions FAILED (now %r)"
                   % rows(d_a, "ba"))
    div = {}             # tp: the first divergent offset the reason names
    for tp in TPS:
        why = x[tp]["errorMessage"]
        print("%s: %s" % (tpname(tp), why), flush=True)
        first = min(o for o, *_ in a_recs[tp] if o > L[tp])
        m = re.match(r"failback divergence at offset (\d+): .*?offsets "
                     r"(\d+)\.\.(\d+)", why)
        if tp[0] == ORD:
            eq(why.split(":")[0], "failback divergence at offset %d"
               % (L[tp] + 1), "step 6: %s's reason" % tpname(tp))
            h.check("holds offsets %d..%d (%d offsets) written after mirror ab "
                    "stopped copying it at offset %d (epoch %d)" % (
                        L[tp] + 1, D[tp] - 1, D[tp] - L[tp] - 1, L[tp], E[tp])
                    in why, "step 6: %s's reason names the range: %r"
                    % (tpname(tp), why))
            div[tp] = L[tp] + 1
        elif known("b", m and L[tp] + 1 <= int(m.group(1)) <= first and
                   m.group(1) == m.group(2) and int(m.group(3)) == D[tp] - 1,
                   "step 6: %s: the reason names no failback divergence in "
                   "A's offsets %d..%d: %r" % (tpname(tp), L[tp] + 1,
                                              D[tp] - 1, why)):
            div[tp] = int(m.group(1))
        h.check("--resolution" in why or tp not in div,
                "step 6: %s's reason names the operator's resolutions: %r"
                % (tpname(tp), why))
    out = d_a.cli_ok("--describe", "--failed").stdout
    print(out, end="", flush=True)
    h.check("failback divergence" in out,
            "step 6: --describe --failed shows the divergence")
    eq({tp: everything(A, tp) for tp in TPS}, a_all,
       "step 6: A untouched while FAILED")
    # What is to be preserved: A's divergent range, read_committed now.
    a_div = {tp: committed(A, tp, div[tp]) for tp in div}
    for tp in div:
        eq(a_div[tp], [y for y in a_recs[tp] if y[0] >= div[tp]],
           "step 6: %s: A's committed records from offset %d" % (
               tpname(tp), div[tp]))
    for t in (ORD, PAY):
        r = d_a.cli("--recover", "--mirror", "ba", "--topic", t,
                    "--resolution", "preserve")
        print(r.stdout + r.stderr, end="", flush=True)
        if t == ORD:
            eq((r.returncode, r.stdout), (0, "Retried the FAILED partitions "
               "of 1 topic(s) in mirror ba: [%s]\n" % t),
               "step 6: --recover --resolution preserve of %s" % t)
        else:
            known("b", r.returncode == 0, "step 6: --recover --resolution "
                  "preserve of %s exits %d: %s" % (t, r.returncode,
                                                    r.stderr.strip()))
    preserved = [tp for tp in TPS if tp in div]
    mt.wait_caught_up(d_a, "ba", 120, "step 6: ba copying after the "
                      "decision", topic=(ORD, PAY) if len(preserved) == 3
                      else ORD, fail_on_failed=True)
    # Before anything else: the aside topics hold A's divergent committed
    # records, record for record; nothing aborted.
    log = d_a.log()
    for tp in preserved:
        aside = "%s.diverged-%d" % (tp[0], E[tp])
        diverged = a_div[tp]
        kept = committed(A, (aside, tp[1]))
        eq(content(kept), content(diverged), "step 6: %s partition %d: A's "
           "divergent committed records of %s" % (aside, tp[1], tpname(tp)))
        h.check(not [y for y in everything(A, (aside, tp[1]))
                     if y[2] in payments.aborted],
                "step 6: an aborted record in %s" % aside)
        # The range: the divergent offsets, or those of the records.
        ranges = ("%d..%d" % (div[tp], D[tp] - 1),
                  "%d..%d" % (diverged[0][0], diverged[-1][0]))
        said = [l for l in log.splitlines()
                if "ba/%s: " % tpname(tp) in l and "preserved into topic %s "
                "partition %d" % (aside, tp[1]) in l and
                any(x in l for x in ranges) and re.search(
                    r"\b%d (committed )?records\b" % len(diverged), l)]
        h.check(said, "step 6: d_a's log names %s's range (%s) and count %d"
                % (tpname(tp), " or ".join(ranges), len(diverged)))
        print("  %s: %d records preserved in %s partition %d" % (
            tpname(tp), len(diverged), aside, tp[1]), flush=True)
        # A keeps them in place, and B's records after the failover
        # follow them.
        now = committed(A, tp)
        eq(content([y for y in now if y[0] < D[tp]]),
           content(a_recs[tp]), "step 6: %s: A's own records kept"
           % tpname(tp))
        eq(content([y for y in now if y[0] >= D[tp]]),
           content(committed(B, tp, b_fail_end[tp])),
           "step 6: %s: B's records after the failover, after A's"
           % tpname(tp))
        h.check(not [y for y in everything(A, tp) if y[0] >= D[tp] and
                     y[2] in payments.aborted],
                "step 6: %s: a payment B aborted copied to A" % tpname(tp))
        if tp[0] == ORD:
            eq([y[0] for y in now if y[0] >= D[tp]],
               [y[0] + D[tp] - b_fail_end[tp]
                for y in committed(B, tp, b_fail_end[tp])],
               "step 6: %s: their offsets on A" % tpname(tp))
    check_synced(B, A, group_offsets(B), "step 6", tps=preserved)
    step(6, "failback: every partition FAILED at its divergence; preserved "
         "%s; B's records copied after them; app's offsets on B synced to A"
         % ", ".join(tpname(tp) for tp in preserved))

    # ---- 7. realign: a fresh copy ------------------------------------------
    admin_props = A.java_client_properties(
        os.path.join(h.test_dir(), "admin.properties"), user="admin",
        mechanism="PLAIN")

    def delete_on_a(t):
        """kafka-topics.sh --bootstrap-server A --command-config
        admin.properties --delete --topic t"""
        r = A.java_tool("org.apache.kafka.tools.TopicCommand", [
            "--bootstrap-server", A.bootstrap, "--command-config",
            admin_props, "--delete", "--topic", t])
        eq(r.returncode, 0, "step 7: kafka-topics --delete --topic %s: %s"
           % (t, r.stderr[-500:]))
        h.wait_for(lambda: t not in topics_of(A), 60,
                   "step 7: %s deleted on A" % t)

    for t in (ORD, PAY):
        r = d_a.cli("--remove", "--mirror", "ba", "--topic", t, "--wait", "60")
        print(r.stdout + r.stderr, end="", flush=True)
        h.check((r.returncode == 0 or (t, 0) not in preserved) and
                "Stopped mirroring for 1 topic(s) in mirror ba: [%s]" % t
                in r.stdout, "step 7: --remove %s from ba: exit %d"
                % (t, r.returncode))
        delete_on_a(t)
        r = d_a.cli_ok("--add", "--mirror", "ba", "--topic", t)
        print(r.stdout, end="", flush=True)

    def realigned():
        """Every partition copying and caught up, or FAILED "destination
        truncated" (the known failure c)."""
        x = rows(d_a, "ba")
        return len(x) == len(TPS) and all(
            (v["state"] == "MIRRORING" and v["lag"] == 0) or
            (v["state"] == "FAILED" and "destination truncated" in
             v["errorMessage"]) for v in x.values()) and x
    x = h.wait_for(realigned, 120, "step 7: ba copying the fresh topics "
                   "(now %r)" % rows(d_a, "ba"))
    bad = {tp: v["errorMessage"] for tp, v in x.items()
           if v["state"] == "FAILED"}
    if not known("c", not bad, "step 7: after --remove, delete on A and "
                 "--add: FAILED %r" % {tpname(tp): m for tp, m in bad.items()}):
        # The operator starts ba afresh: every topic removed, the mirror
        # deleted and made again, A's copies deleted, the topics added.
        d_a.cli("--remove", "--mirror", "ba", "--topic", PATTERN,
                "--wait", "60")
        d_a.cli_ok("--delete", "--mirror", "ba")
        for t in (ORD, PAY):
            delete_on_a(t)
        d_a.create("ba", mirror_configs(B))
        d_a.cli_ok("--add", "--mirror", "ba", "--topic", PATTERN,
                   "--exclude", EXCLUDE)
    caught_up(d_a, "ba", "step 7: ba caught up after the realignment")
    n = mt.same_batches(B.admin_bootstrap, A.admin_bootstrap, ORD, [0, 1])
    eq(content(committed(A, (PAY, 0))), content(committed(B, (PAY, 0))),
       "step 7: dr.payments on A after the realignment")
    h.check(not [y for y in everything(A, (PAY, 0))
                 if y[2] in payments.aborted],
            "step 7: an aborted payment on A after the realignment")
    for tp in preserved:
        aside = "%s.diverged-%d" % (tp[0], E[tp])
        eq(content(committed(A, (aside, tp[1]))), content(a_div[tp]),
           "step 7: %s partition %d, kept" % (aside, tp[1]))
    check_synced(B, A, group_offsets(B), "step 7")
    step(7, "realigned: dr.orders on A = B's (%d records, same offsets and "
         "batches), dr.payments' committed records equal" % n)

    # ---- 8. planned switch back to A -----------------------------------
    # B's producers are stopped (nothing more is written to B).
    def current():
        x = rows(d_a, "ba")
        return len(x) == len(TPS) and all(
            v["state"] == "MIRRORING" and v["lag"] == 0 and
            v["stalled"] is False and 0 <= v["sourceOffsetAgeMs"] < 5000
            and v["sourceOffset"] == end(B, tp)
            for tp, v in x.items()) and x
    h.wait_for(current, 60, "step 8: ba current (now %r)" % rows(d_a, "ba"))
    status, body = mt.http_get(d_a.metrics_port, "/mirrors/ba/ready")
    print(body, end="", flush=True)
    h.check(status == 200 and body.startswith("current: mirror ba, 3 "
                                               "partition(s) mirroring"),
            "step 8: GET /mirrors/ba/ready: %d %r" % (status, body))
    a_app = check_synced(B, A, group_offsets(B), "step 8")
    r = d_a.cli_rc(0, "--remove", "--mirror", "ba", "--topic", PATTERN,
                   "--wait", "60")
    print(r.stdout + r.stderr, end="", flush=True)
    eq(r.stdout.split("\n")[:3], [
        "Removed include pattern '%s' from mirror ba: discovery no longer "
        "adds the topics it matches" % PATTERN,
        "Stopped mirroring for 2 topic(s) in mirror ba: [%s, %s]" % (ORD, PAY),
        "Failover report of mirror ba: 3 partition(s) STOPPED, 0 source "
        "offset(s) not copied"], "step 8: --remove --wait's output")
    summary, rep = report_rows(r.stdout)
    for tp in TPS:
        eq(rep[tp]["NOT-COPIED"], "0", "step 8: %s NOT-COPIED" % tpname(tp))
    h.wait_for(lambda: not (denies(A) & {deny_write(ORD), deny_write(PAY)}),
               30, "step 8: the DENY WRITE on A's topics lifted")
    eq(group_offsets(A), a_app, "step 8: app's offsets on A after the final "
       "sync")
    stream = {tp: kv(committed(B, tp)) for tp in TPS}
    app.run(A, {tp: None for tp in TPS})
    check_stream(app, stream, "step 8, app resumed on A")
    for tp in TPS:
        eq(len(app.read[tp]), len(stream[tp]), "step 8: app read %s to its "
           "end on A" % tpname(tp))
    orders.send(A, 8, "A2")
    payments.send(A, [(True, 2), (False, 1), (True, 1)], "A2")
    app.run(A, {tp: None for tp in TPS})
    final = {tp: kv(committed(A, tp)) for tp in TPS}
    check_stream(app, final, "step 8, app on A")
    for tp in TPS:
        eq(len(app.read[tp]), len(final[tp]), "step 8: app read all of %s"
           % tpname(tp))
        h.check(not [v for _k, v in app.read[tp] if v in payments.aborted],
                "step 8: app read an aborted payment")
    step(8, "switched back: ba current, app's offsets synced to A, --remove "
         "--wait exit 0 (0 not copied); app resumed on A exactly and read "
         "%r records in all, each once" % {tpname(tp): len(v)
                                           for tp, v in app.read.items()})
    d_a.stop()
    d_b.stop()
    if KNOWN:
        h.fail("the drill went on past %d known failure(s) (DRILL_CONTINUE): "
               "%s" % (len(KNOWN), "; ".join("(%s) %s" % k for k in KNOWN)))
    print("PASS: the failover and failback drill", flush=True)


if __name__ == "__main__":
    h.run_main(main)
