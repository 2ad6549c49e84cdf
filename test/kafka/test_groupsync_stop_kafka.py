#!/usr/bin/env python3
"""A failed-over topic's consumer groups are the new primary's: the old
source coming back never rewinds them (real Apache Kafka 4.4).

The disaster-recovery drill: A (a private single-node source, stopped and
started by the test) is mirrored to B (the shared destination) by one
mirrord beside B, groups synced every 200 ms; three mirrors of A: dr1
(topic ORD, 3 partitions), dr2 (PAY, 2 partitions) and live (LIVE, never
stopped: its group sync keeps polling A throughout).

  1. A back about a second after the failover.  mirrord is SIGSTOPped,
     A takes 600 more records per partition of ORD and new commits of
     group APP (769) and LATE (300) that mirrord never sees, A is killed
     (-9), mirrord resumes and `kafka-mirrors --remove --wait` fails ORD
     over (exit 6: the source could not be asked).  On B, APP and LATE
     commit (1000+, 100+) as an admin tool would; A starts again a second
     after the stop.  Once mirror live's rounds sync a commit made on A
     after its return, and 3 s (15 rounds) more: B's APP and LATE offsets
     of ORD are exactly what B committed, partition by partition.  The
     operator was told: --remove --wait printed a warning naming ORD's
     three partitions and why their groups were not synced at the stop;
     --describe --json shows it as each STOPPED partition's
     warningMessage; mirrord_group_sync_final_missed_total{mirror="dr1"}
     is 3 (0 before); the log says it once.
  2. A back 25 s after the failover (125 sync rounds; the reminder of a
     lasting outage is due after a minute, so a longer outage would only
     add one reminder line per mirror).  The same with PAY, and this time
     the destination's consumers do it: producers write 100 records per
     partition to B; APP's consumer on B resumes exactly at the synced
     commit (300) and reads every record to the end, compared one by one
     with A's records and B's, commits B's end and leaves; LATE's consumers,
     new on B, commit and leave; BUSY keeps a member on B while A comes
     back.  B's offsets are unchanged after A's return (and after BUSY's
     member leaves).  While A was down, mirrord logged at most 2 lines per
     mirror about its group sync (cannot reach / reaches again), not one
     per round, and no other line more than once per partition.
  3. B's mirrord restarted while A is down; A comes back and takes new
     commits of APP and LATE on ORD and PAY: none reaches B.  The report
     was recorded with the stop: after the restart --describe --json shows
     each STOPPED partition of ORD and PAY the same warningMessage as
     before it.
  4. LIVE removed with A up: its final sync misses nothing, so neither
     --remove --wait nor --describe --json warns of it, the counter stays
     0, and so after another restart (ORD's and PAY's warnings still
     there).
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

try:
    from confluent_kafka import Consumer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")
from test_groupsync_kafka import raw_commit, raw_fetch  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
ORD = "gss-%s-orders" % RUN
PAY = "gss-%s-pay" % RUN
LIVE = "gss-%s-live" % RUN
APP = "gss-%s-app" % RUN
LATE = "gss-%s-late" % RUN
BUSY = "gss-%s-busy" % RUN
PROBE = "gss-%s-probe" % RUN
INTERVAL_MS = 200
QUIET_S = 3.0       # rounds watched once they reach A again
LEAD = "consumer-group offsets not synced at the stop"
LEVEL = re.compile(r"^\S+ mirrord\[\d+\] (warn|info|error): (.*)$")

SRC = DST = None
probes = [0]


def offsets(group, topic):
    """{partition: committed offset} of group on B for topic."""
    return {p: v[0] for (t, p), v in raw_fetch(DST, group).items()
            if t == topic}


def commit_on_a(group, offs):
    """raw_commit() on A, again while A, just started again, is still
    loading its groups (errors 14-16: coordinator loading, not available,
    not the coordinator)."""
    deadline = time.monotonic() + 60
    while True:
        e = raw_commit(SRC, group, offs, check=False)
        if e == 0:
            return
        h.check(e in (14, 15, 16) and time.monotonic() < deadline,
                "test setup: OffsetCommit %s on A: error %d" % (group, e))
        time.sleep(0.5)


def wait_rounds_reach_a():
    """A commit made on A now reaches B through mirror live's rounds: they
    read A again.  Then QUIET_S (15 rounds) more: what A's return could
    set off has had its time."""
    probes[0] += 1
    commit_on_a(PROBE, {(LIVE, 0): (probes[0], "probe")})
    h.wait_for(lambda: offsets(PROBE, LIVE).get(0) == probes[0], 120,
               "the probe commit %d of mirror live on B (mirror live's "
               "rounds read A again)" % probes[0])
    time.sleep(QUIET_S)


def levels(text):
    """(level, message) of the warn/info/error lines of a log slice."""
    out = []
    for line in text.splitlines():
        m = LEVEL.match(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def check_outage_log(text, what, mirrors):
    """The log of an outage, from the kill to the rounds reaching the
    source again: the group sync says it at most twice per
    mirror (cannot reach, reaches again), nothing is said more than 3
    times (once per partition)."""
    lines = levels(text)
    for m in mirrors:
        gs = [msg for _, msg in lines if msg.startswith("mirror %s: " % m)
              and "consumer-group offset sync" in msg]
        h.check(len(gs) <= 2, "%s: %d lines about mirror %s's consumer-group "
                "offset sync (want at most 2: it cannot reach the source, it "
                "reaches it again), the first: %s"
                % (what, len(gs), m, "\n".join(gs[:8])))
    seen = {}
    for _, msg in lines:
        key = re.sub(r"\d+", "N", msg)
        seen[key] = seen.get(key, 0) + 1
    many = sorted((n, k) for k, n in seen.items() if n > 3)
    h.check(not many, "%s: lines said more than 3 times (once for each "
            "partition of a topic): %s"
            % (what, "; ".join("%dx %s" % (n, k[:200]) for n, k in many)))
    print("  %s: %d warn/info lines in all:\n    %s" % (
        what, len(lines), "\n    ".join("%s: %s" % l for l in lines)),
        flush=True)


def final_missed(d, mirror):
    return mt.metric_value(d, "mirrord_group_sync_final_missed_total",
                           mirror=mirror)


def check_report(d, r, mirror, topic, nparts, log_text):
    """What the operator sees of the missed final sync."""
    names = ", ".join("%s-%d" % (topic, p) for p in range(nparts))
    warn = [l for l in r.stderr.splitlines()
            if l.startswith("kafka-mirrors: warning: %s: %s" % (names, LEAD))]
    h.check(len(warn) == 1 and "every group: " in warn[0],
            "kafka-mirrors --remove --wait printed:\nstdout: %s\nstderr: %s\n"
            "want one line `kafka-mirrors: warning: %s: %s ...: every group: "
            "<why>`" % (r.stdout, r.stderr, names, LEAD))
    for row in d.describe_json(mirror):
        if row["topic"] != topic:
            continue
        eq(row["state"], "STOPPED", "%s-%d's state" % (topic, row["partition"]))
        h.check((row.get("warningMessage") or "").startswith(LEAD),
                "--describe --json: %s-%d's warningMessage is %r, want `%s...`"
                % (topic, row["partition"], row.get("warningMessage"), LEAD))
    eq(final_missed(d, mirror), float(nparts),
       "mirrord_group_sync_final_missed_total{mirror=%s}" % mirror)
    said = [msg for _, msg in levels(log_text) if LEAD in msg]
    h.check(len(said) == 1 and said[0].startswith(
        "mirror %s: %s: %s" % (mirror, names, LEAD)),
        "the log says the missed final sync of %s %d times, want once as "
        "`mirror %s: %s: %s ...`:\n%s" % (topic, len(said), mirror, names,
                                           LEAD, "\n".join(said)))
    print("  the report: %s" % warn[0], flush=True)


def final_warnings(d):
    """{(topic, partition): the final-sync part of its warningMessage
    (from LEAD on: the last of the warnings it joins), None without one}
    of every partition, as --describe --json shows them."""
    out = {}
    for row in d.describe_json():
        w = row.get("warningMessage") or ""
        out[(row["topic"], row["partition"])] = (w[w.index(LEAD):]
                                                 if LEAD in w else None)
    return out


def check_warnings_kept(d, want, what):
    """--describe --json shows ORD's and PAY's reports as want, word for
    word, and none for LIVE."""
    got = final_warnings(d)
    for (t, p), w in sorted(want.items()):
        eq(got.get((t, p)), w, "%s: %s-%d's warningMessage (from `%s`)"
           % (what, t, p, LEAD))
    eq(got.get((LIVE, 0)), None, "%s: %s-0's final-sync warning (its final "
       "sync, if any, missed nothing)" % (what, LIVE))


def remove_while_down(d, mirror, topic):
    t0 = time.monotonic()
    r = d.cli("--remove", "--mirror", mirror, "--topic", topic, "--wait", "60")
    took = time.monotonic() - t0
    print(r.stdout, r.stderr, "(%.1f s)" % took, flush=True)
    h.check(r.returncode == 6, "kafka-mirrors --remove --wait of %s with the "
            "source down exited %d, want 6:\nstdout: %s\nstderr: %s"
            % (topic, r.returncode, r.stdout, r.stderr))
    h.check(took < 20, "--remove --wait of %s took %.1f s: the stop waits at "
            "most 3 s for the source's end and 10 s for the groups" % (topic,
                                                                      took))
    return r


def freeze_and_kill(d, src, extra):
    """mirrord stopped (SIGSTOP), extra() done on A, A killed, mirrord
    resumed: what A did last, mirrord never saw."""
    d.proc.signal(signal.SIGSTOP)
    try:
        extra()
        src.stop(kill=True)
    finally:
        d.proc.signal(signal.SIGCONT)


def member(group, topics, reset):
    c = Consumer({"bootstrap.servers": DST, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": reset,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "session.timeout.ms": 30000})
    c.subscribe(topics)
    return c


def read_to_end(c, parts, what):
    """Polls c until every partition of parts is at its end:
    {partition: [(offset, key, value)]}."""
    got = {p: [] for p in parts}
    eof = set()
    deadline = time.monotonic() + 90
    while len(eof) < len(parts) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:
                eof.add(m.partition())
                continue
            h.fail("%s: %s" % (what, m.error()))
        got[m.partition()].append((m.offset(), m.key(), m.value()))
        eof.discard(m.partition())
    eq(eof, set(parts), "%s: partitions read to their end" % what)
    return got


def tagged(tag, p, lo, hi, base=0):
    """The keyed records produce_tagged(tag%p) wrote at offsets [lo, hi),
    its i-th at offset base + i."""
    t = (tag % p).encode()
    return [(o, b"%s-%d" % (t, o - base), b"%s-value-%d" % (t, o - base))
            for o in range(lo, hi)]


def main():
    global SRC, DST
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, = h.private_kafka(1, "plaintext")
    dst = h.real_kafka(2)[1]
    SRC, DST = src.admin_bootstrap, dst.bootstrap
    for t, n, tag in ((ORD, 3, "ord%d"), (PAY, 2, "pay%d"),
                      (LIVE, 1, "liv%d")):
        src.create_topic(t, partitions=n)
        for p in range(n):
            mt.produce_tagged(SRC, t, p, 1000, tag % p, keyed=True)
    d = mt.Mirrord(destination=DST, extra_yaml=mt.STALL_YAML)
    for m, t in (("dr1", ORD), ("dr2", PAY), ("live", LIVE)):
        d.create(m, mt.stall_mirror_configs(src.bootstrap, **{
            "mirror.groups.include": "gss-%s-.*" % RUN,
            "mirror.groups.sync.interval.ms": str(INTERVAL_MS)}))
        d.cli_ok("--add", "--mirror", m, "--topic", t)
    for m, t, n in (("dr1", ORD, 3), ("dr2", PAY, 2), ("live", LIVE, 1)):
        mt.wait_caught_up(d, m, 120, "%s caught up" % t, topic=t, count=n)
        eq(final_missed(d, m), 0.0,
           "mirrord_group_sync_final_missed_total{mirror=%s} from the start"
           % m)
    raw_commit(SRC, APP, dict([((ORD, p), (400, "a")) for p in range(3)] +
                              [((PAY, p), (300, "a")) for p in range(2)]))
    h.wait_for(lambda: offsets(APP, ORD) == {0: 400, 1: 400, 2: 400} and
               offsets(APP, PAY) == {0: 300, 1: 300}, 60,
               "group %s synced to B (now %r)" % (APP, raw_fetch(DST, APP)))

    # ---- 1. A back about a second after the failover.
    print("1. A back a second after the failover of %s" % ORD, flush=True)

    def last_of_a_1():
        for p in range(3):
            mt.produce_tagged(SRC, ORD, p, 600, "ordlate%d" % p, keyed=True)
        raw_commit(SRC, APP, {(ORD, p): (769, "a2") for p in range(3)})
        raw_commit(SRC, LATE, {(ORD, p): (300, "old") for p in range(3)})
    log_at = len(d.log())
    freeze_and_kill(d, src, last_of_a_1)
    r1 = remove_while_down(d, "dr1", ORD)
    t_stop = time.monotonic()
    raw_commit(DST, APP, {(ORD, p): (1000 + 7 * p, "b") for p in range(3)})
    raw_commit(DST, LATE, {(ORD, p): (100 + p, "b") for p in range(3)})
    before = {g: offsets(g, ORD) for g in (APP, LATE)}
    eq(before, {APP: {0: 1000, 1: 1007, 2: 1014}, LATE: {0: 100, 1: 101, 2: 102}},
       "test setup: B's own commits of %s" % ORD)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t_stop)))
    src.start_again()
    wait_rounds_reach_a()
    down_log = d.log()[log_at:]
    for g in (APP, LATE):
        eq(offsets(g, ORD), before[g], "group %s's offsets of %s on B after "
           "the old source came back (B's consumers committed them after the "
           "failover)" % (g, ORD))
    check_report(d, r1, "dr1", ORD, 3, d.log()[log_at:])
    check_outage_log(down_log, "the first outage", ("dr1", "dr2", "live"))
    print("PASS 1: B's offsets kept; the missed final sync reported",
          flush=True)

    # ---- 2. A back 25 s after the failover; B's consumers at work.
    print("2. A back 25 s after the failover of %s" % PAY, flush=True)
    for m, t, n in (("dr2", PAY, 2), ("live", LIVE, 1)):
        mt.wait_caught_up(d, m, 120, "%s caught up again" % t, topic=t,
                          count=n)
    eq(offsets(APP, PAY), {0: 300, 1: 300}, "test setup: %s's offsets of %s "
       "on B before the failover" % (APP, PAY))

    def last_of_a_2():
        for p in range(2):
            mt.produce_tagged(SRC, PAY, p, 400, "paylate%d" % p, keyed=True)
        raw_commit(SRC, APP, {(PAY, p): (800, "a2") for p in range(2)})
        raw_commit(SRC, LATE, {(PAY, p): (600, "old") for p in range(2)})
        raw_commit(SRC, BUSY, {(PAY, p): (700, "old") for p in range(2)})
    log_at = len(d.log())
    freeze_and_kill(d, src, last_of_a_2)
    r2 = remove_while_down(d, "dr2", PAY)
    t_stop = time.monotonic()
    for p in range(2):
        mt.produce_tagged(DST, PAY, p, 100, "bpay%d" % p, keyed=True)
    b_end = {p: mt.end_offset(DST, PAY, p) for p in range(2)}
    app = member(APP, [PAY], "error")
    got = read_to_end(app, [0, 1], "%s's consumer on B" % APP)
    for p in range(2):
        # B: A's records as far as they were copied (a Fetch answered
        # while mirrord was stopped may carry some of the late ones),
        # then B's own 100.
        held = mt.read_partition(DST, PAY, p, "gss-check-%s" % RUN, start=300)
        last = b_end[p] - 100
        eq(held, tagged("pay%d", p, 300, 1000) +
           tagged("paylate%d", p, 1000, last, base=1000) +
           tagged("bpay%d", p, last, b_end[p], base=last),
           "test setup: %s-%d on B from offset 300" % (PAY, p))
        eq(got[p], held, "the records %s's consumer read on B from %s-%d "
           "(resumed at the synced commit 300, to B's end %d)"
           % (APP, PAY, p, b_end[p]))
    app.commit(offsets=[TopicPartition(PAY, p, b_end[p]) for p in range(2)],
               asynchronous=False)
    app.close()
    late = member(LATE, [PAY], "earliest")
    read_to_end(late, [0, 1], "%s's consumer on B" % LATE)
    late.commit(offsets=[TopicPartition(PAY, p, 40 + p) for p in range(2)],
                asynchronous=False)
    late.close()
    busy = member(BUSY, [PAY], "earliest")
    read_to_end(busy, [0, 1], "%s's consumer on B" % BUSY)
    busy.commit(offsets=[TopicPartition(PAY, p, 20 + p) for p in range(2)],
                asynchronous=False)
    before = {g: offsets(g, PAY) for g in (APP, LATE, BUSY)}
    eq(before, {APP: b_end, LATE: {0: 40, 1: 41}, BUSY: {0: 20, 1: 21}},
       "test setup: B's own commits of %s" % PAY)
    while time.monotonic() - t_stop < 25:
        busy.poll(0.5)
    src.start_again()
    busy.poll(0.1)
    wait_rounds_reach_a()
    down_log = d.log()[log_at:]
    busy.poll(0.1)
    for g in (APP, LATE, BUSY):
        eq(offsets(g, PAY), before[g], "group %s's offsets of %s on B after "
           "the old source came back" % (g, PAY))
    busy.close()
    wait_rounds_reach_a()
    eq(offsets(BUSY, PAY), before[BUSY], "group %s's offsets of %s on B once "
       "its member left" % (BUSY, PAY))
    check_report(d, r2, "dr2", PAY, 2, d.log()[log_at:])
    check_outage_log(down_log, "25 s without the source",
                     ("dr1", "dr2", "live"))
    print("PASS 2: B's consumers' offsets kept", flush=True)

    # ---- 3. B's mirrord restarted while A is down.
    print("3. mirrord restarted while A is down", flush=True)
    reported = {k: w for k, w in final_warnings(d).items()
                if k[0] in (ORD, PAY)}
    eq(sorted(k for k, w in reported.items() if w is not None),
       [(ORD, p) for p in range(3)] + [(PAY, p) for p in range(2)],
       "test setup: the partitions with a final-sync warning before the "
       "restart (%r)" % reported)
    src.stop(kill=True)
    eq(d.stop(), 0, "mirrord exit status (the first run)")
    d.start()
    check_warnings_kept(d, reported, "after a restart of mirrord")
    mine = {(g, t): offsets(g, t) for g in (APP, LATE) for t in (ORD, PAY)}
    src.start_again()
    commit_on_a(APP, dict([((ORD, p), (1599, "a3")) for p in range(3)] +
                          [((PAY, p), (1399, "a3")) for p in range(2)]))
    commit_on_a(LATE, dict([((ORD, p), (1500, "a3")) for p in range(3)] +
                           [((PAY, p), (1300, "a3")) for p in range(2)]))
    wait_rounds_reach_a()
    for (g, t), o in sorted(mine.items()):
        eq(offsets(g, t), o, "group %s's offsets of %s on B after a restart "
           "of mirrord and new commits on the old source" % (g, t))
    eq(d.states("dr1"), {(ORD, p): "STOPPED" for p in range(3)},
       "dr1's partitions after the restart")
    check_warnings_kept(d, reported, "after a restart of mirrord and A's "
                        "return")
    print("PASS 3: after a restart, nothing synced to the stopped topics; "
          "the reports of their final syncs kept", flush=True)

    # ---- 4. LIVE removed with A up: nothing missed, nothing reported.
    print("4. %s removed with A up" % LIVE, flush=True)
    r = d.cli("--remove", "--mirror", "live", "--topic", LIVE, "--wait",
              "60")
    print(r.stdout, r.stderr, flush=True)
    h.check(r.returncode == 0 and LEAD not in r.stderr,
            "kafka-mirrors --remove --wait of %s with A up exited %d, want 0 "
            "without a final-sync warning:\nstdout: %s\nstderr: %s"
            % (LIVE, r.returncode, r.stdout, r.stderr))
    eq(d.states("live"), {(LIVE, 0): "STOPPED"}, "live's partition")
    check_warnings_kept(d, reported, "after %s's stop" % LIVE)
    eq(final_missed(d, "live"), 0.0,
       "mirrord_group_sync_final_missed_total{mirror=live}")
    eq(d.stop(), 0, "mirrord exit status (the second run)")
    d.start()
    eq(d.states("live"), {(LIVE, 0): "STOPPED"},
       "live's partition after a restart")
    check_warnings_kept(d, reported, "after a second restart of mirrord")
    print("PASS 4: a final sync that missed nothing is reported nowhere; "
          "the others' reports kept", flush=True)
    eq(d.stop(), 0, "mirrord exit status")
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
