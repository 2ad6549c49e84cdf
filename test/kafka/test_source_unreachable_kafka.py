#!/usr/bin/env python3
"""A source that cannot be read is reported, not shown healthy: real
Apache Kafka, a private single-node source (the test breaks it) and the
shared destination; mirrord with pipeline.request_timeout_ms 5000 and a
mirror polling with mirror.fetch.wait.max.ms 100, so the stall bound B is
5.1 s (the status interface).

A topic of two partitions is copied and caught up; records keep being
written to the source (its PLAINTEXT admin listener) whenever it takes
them.  Then, one after the other, each cured before the next:

  1. connection refused: the source broker killed (SIGKILL) and, after the
     checks, started again on its data;
  2. no answer: the source broker frozen (SIGSTOP) for about 20 s, then
     SIGCONT;
  3. the source topic deleted.

During 1 and 2, within 2 x B + 5 s, kafka-mirrors --describe shows both
partitions STALLED with a REASON naming the source's host:port, the cause
(refused; timed out or no answer) and since when; --describe --json has
state STALLED, mirrorState, stalled, stalledReason, stalledSinceMs in the
fault's window, sourceOffsetAgeMs and lagMs growing, lag never a made-up
0 (-1, or the last known source end minus the destination end, flagged
by its age, shown `>=N`); /metrics has mirrord_mirror_source_up 0, the
source errors counted by cause (connection_refused, timeout), the stalled
partitions, growing lag seconds and seconds since the last Fetch
answered; GET /mirrors/<name>/ready answers 503 with a reason, /mirrors
says sourceUp false, /readyz fails "sources readable".  Once cured,
nothing is STALLED, the copy catches up, the destination holds the
source's records at the same offsets in the same batches (nothing lost,
nothing twice) and source_up is 1 again.

After 3 the partitions are STOPPED with a REASON saying the source topic
was deleted, naming the source and when (an ISO 8601 UTC time within the
deletion's window); the destination holds exactly what was copied.
"""

import calendar
import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
M = "su"
T = "su-%s" % RUN
NPART = 2


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, = h.private_kafka(1, "plaintext")
    dst = h.real_kafka(2)[1]
    plain = src.admin_bootstrap        # the test's own clients
    src.create_topic(T, partitions=NPART)
    d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=mt.STALL_YAML)
    d.create(M, mt.stall_mirror_configs(src.bootstrap))
    for p in range(NPART):
        mt.produce_tagged(plain, T, p, 300, "before-%d" % p, keyed=True)
    d.cli_ok("--add", "--mirror", M, "--topic", T)
    mt.wait_caught_up(d, M, 120, "%s caught up" % T, count=NPART)
    parts = [(T, p) for p in range(NPART)]
    layout = {T: NPART}

    # 1. Connection refused: the broker killed, started again on its data.
    w = mt.LayoutWriter(plain, {T: range(NPART)})
    w.start()
    f = mt.SourceFault(d, M, src.bootstrap, parts,
                       "connection refused (source broker killed)",
                       r"refused", "connection_refused")
    f.begin()
    src.stop(kill=True)
    f.wait_stalled()
    f.check_stalled()
    src.start_again()
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)

    # 2. No answer: the broker frozen for about 20 s.
    w = mt.LayoutWriter(plain, {T: range(NPART)})
    w.start()
    f = mt.SourceFault(d, M, src.bootstrap, parts,
                       "no answer (source broker frozen)",
                       r"timed out|no answer", "timeout")
    f.begin()
    src.freeze()
    try:
        f.wait_stalled()
        f.check_stalled()
        left = f.t0 + 20 - time.monotonic()
        if left > 0:
            time.sleep(left)           # the fault lasts about 20 s
    finally:
        src.thaw()
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)

    # 3. The source topic deleted: STOPPED, saying so, nothing twice.
    ends = mt.end_offsets(plain, T, NPART)
    want = {(T, p): e for p, e in enumerate(ends)}
    before = mt.records_below(plain, want, "su-before-%s" % RUN)
    from confluent_kafka.admin import AdminClient
    t0 = time.time()
    adm = AdminClient({"bootstrap.servers": plain})
    for fut in adm.delete_topics([T], operation_timeout=30).values():
        fut.result(60)
    last = {}

    def stopped():
        out, rows = mt.describe_table(d, M)
        last["out"] = out
        return all(rows.get(p, {}).get("STATE") == "STOPPED" for p in parts) \
            and rows
    try:
        rows = h.wait_for(stopped, 90, "STOPPED", interval=0.5)
    except AssertionError:
        h.fail("source topic deleted: 90 s later kafka-mirrors --describe "
               "shows:\n%s\nwant both partitions STOPPED" % last.get("out"))
    print(last["out"], flush=True)
    for p in parts:
        reason = rows[p]["REASON"]
        h.check(re.search(r"source topic %s was deleted" % re.escape(T), reason)
                and src.bootstrap in reason,
                "source topic deleted: --describe shows REASON %r for %s-%d, "
                "want it to say the source topic %s was deleted on the source "
                "%s:\n%s" % (reason, p[0], p[1], T, src.bootstrap, last["out"]))
        stamp = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z", reason)
        when = calendar.timegm(time.strptime(stamp.group(1),
                                             "%Y-%m-%dT%H:%M:%S")) \
            if stamp else None
        h.check(when is not None and t0 - 2 <= when <= time.time() + 1,
                "source topic deleted: --describe shows REASON %r for %s-%d, "
                "want the time mirrord saw it deleted (an ISO 8601 UTC time "
                "after %s)" % (reason, p[0], p[1],
                               time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                             time.gmtime(t0))))
    h.eq(mt.end_offsets(dst.bootstrap, T, NPART), ends,
         "destination ends after the source topic was deleted")
    after = mt.records_below(dst.bootstrap, want, "su-after-%s" % RUN)
    for p in parts:
        h.check(after[p] == before[p],
                "%s-%d: the destination differs from what the source held "
                "when its topic was deleted (%d records against %d)"
                % (p[0], p[1], len(after[p]), len(before[p])))
    print("ok")


h.run_main(main)
