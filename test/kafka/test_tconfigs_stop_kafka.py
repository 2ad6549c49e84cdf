#!/usr/bin/env python3
"""A topic that fails over while the old source is frozen: the rounds that
were asking the source when it stopped answering write nothing to the
stopped topic when it answers again (real Apache Kafka 4.4; A a private
single-node source the test freezes, B the shared destination; mirrord
with the default request timeout, 30 s, so requests to the frozen source
stay in flight until it is thawed).

Mirror tc mirrors T (configs synced every second, groups every second);
mirror live mirrors L from the same source and shows that rounds read A
again once it is thawed (a config change and a group commit of L reach B).

  * retention.ms=3600000 on A's T reaches B; group APP's commit 10 on T
    reaches B.
  * mirrord SIGSTOPped; on A: retention.ms=7200000 on T and APP commits 40;
    A frozen (SIGSTOP: requests accepted, never answered); mirrord
    resumed: its next config round asks A for T's configs and its next
    group round lists A's groups, and neither is answered.
  * `kafka-mirrors --remove --wait` of T: STOPPED after the final group
    sync's 10 s (the round before it never ended), exit 6; it prints the
    warning that T-0's groups were not synced at the stop because no
    round could start in time; mirrord_group_sync_final_missed_total is 1.
  * B's operator sets retention.ms=1800000 on T and APP commits 25 on B.
  * A thawed: it answers the config and group requests of before the
    stop.  Once a config change and a commit made on A for L reach B, and
    3 s more: B's T still has retention.ms=1800000, APP's offset of T-0 on
    B is still 25.
  * A frozen again and mirrord stopped (SIGTERM) while its config round
    waits for A: it exits 0.
"""

import os
import signal
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from test_tconfigs_kafka import alter, describe  # noqa: E402

try:
    import confluent_kafka  # noqa: F401
except ImportError:
    h.skip("python3-confluent-kafka is not installed")
from test_groupsync_kafka import raw_commit, raw_fetch  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = "tcs-%s-t" % RUN
L = "tcs-%s-live" % RUN
APP = "tcs-%s-app" % RUN
PROBE = "tcs-%s-probe" % RUN
LEAD = "consumer-group offsets not synced at the stop"


def offset(bootstrap, group, topic):
    return raw_fetch(bootstrap, group).get((topic, 0), (None,))[0]


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, = h.private_kafka(1, "plaintext")
    dst = h.real_kafka(2)[1]
    SRC, DST = src.admin_bootstrap, dst.bootstrap
    for t in (T, L):
        src.create_topic(t, partitions=1)
        mt.produce_tagged(SRC, t, 0, 100, t[-4:])
    d = mt.Mirrord(destination=DST)
    for m, t in (("tc", T), ("live", L)):
        d.create(m, {"bootstrap.servers": src.bootstrap,
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.metadata.refresh.interval.ms": "1000",
                     "mirror.groups.include": "tcs-%s-.*" % RUN,
                     "mirror.groups.sync.interval.ms": "1000"})
        d.cli_ok("--add", "--mirror", m, "--topic", t)
        mt.wait_caught_up(d, m, 120, "%s caught up" % t, topic=t, count=1)
    alter(src, T, sets={"retention.ms": "3600000"})
    raw_commit(SRC, APP, {(T, 0): (10, "a")})
    h.wait_for(lambda: describe(dst, T).get("retention.ms") == "3600000" and
               offset(DST, APP, T) == 10, 60, "T's config and APP's commit on "
               "B (now %r, %r)" % (describe(dst, T), raw_fetch(DST, APP)))

    d.proc.signal(signal.SIGSTOP)
    try:
        alter(src, T, sets={"retention.ms": "7200000"})
        raw_commit(SRC, APP, {(T, 0): (40, "a2")})
        src.freeze()
    finally:
        d.proc.signal(signal.SIGCONT)
    try:
        # The config and group rounds due since the SIGSTOP start now and
        # ask the frozen source (both intervals are 1 s).
        time.sleep(1.5)
        t0 = time.monotonic()
        r = d.cli("--remove", "--mirror", "tc", "--topic", T, "--wait", "60")
        took = time.monotonic() - t0
        print(r.stdout, r.stderr, "(%.1f s)" % took, flush=True)
        eq(r.returncode, 6, "kafka-mirrors --remove --wait of %s with the "
           "source frozen (stderr %s)" % (T, r.stderr))
        h.check(took < 20, "--remove --wait took %.1f s" % took)
        eq(d.states("tc"), {(T, 0): "STOPPED"}, "tc's partitions")
        alter(dst, T, sets={"retention.ms": "1800000"})
        raw_commit(DST, APP, {(T, 0): (25, "b")})
    finally:
        src.thaw()
    # The broker, fenced by its controller while frozen, takes a moment to
    # coordinate groups again.
    h.wait_for(lambda: raw_commit(SRC, PROBE, {(L, 0): (7, "p")},
                                  check=False) == 0, 60,
               "A to take a commit once thawed")
    alter(src, L, sets={"retention.ms": "5400000"})
    h.wait_for(lambda: describe(dst, L).get("retention.ms") == "5400000" and
               offset(DST, PROBE, L) == 7, 90, "a config and a commit of %s "
               "made on A once thawed, on B (rounds read A again)" % L)
    time.sleep(3.0)
    eq(describe(dst, T).get("retention.ms"), "1800000", "retention.ms of the "
       "stopped topic %s on B once the old source answered the config round "
       "of before the stop" % T)
    eq(offset(DST, APP, T), 25, "group %s's offset of %s-0 on B once the old "
       "source answered the group round of before the stop" % (APP, T))
    warn = [l for l in r.stderr.splitlines()
            if l.startswith("kafka-mirrors: warning: %s-0: %s" % (T, LEAD))]
    h.check(len(warn) == 1 and "no round could start within 10 s of the "
            "stop" in warn[0], "--remove --wait printed:\n%s\nwant the warning "
            "that %s-0's groups were not synced: no round could start within "
            "10 s of the stop" % (r.stderr, T))
    eq(mt.metric_value(d, "mirrord_group_sync_final_missed_total",
                       mirror="tc"), 1.0,
       "mirrord_group_sync_final_missed_total{mirror=tc}")
    # Stopped while a config round waits for the frozen source: the
    # source's answer fails last, after the destination was freed.
    src.freeze()
    try:
        time.sleep(2.5)   # the next rounds (every second) ask it
        eq(d.stop(), 0, "mirrord's exit status, stopped while a config round "
           "waits for the frozen source")
    finally:
        src.thaw()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
