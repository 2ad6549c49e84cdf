#!/usr/bin/env python3
"""Failover, and adding a pattern, while the source is down: the operator
is told what is not known instead of "nothing lost".  Real Apache Kafka,
a private single-node source (the test stops it) and the shared
destination; mirrord with pipeline.request_timeout_ms 5000, the mirror
with mirror.fetch.wait.max.ms 100 and mirror.metadata.refresh.interval.ms
2000.

  * topic P (one partition): 4,100 records copied and caught up, then
    paused, and 3,000 more written to the source (a paused partition's
    source end is refreshed every refresh interval, so mirrord knows the
    source ends at 7,100); topic Q (one partition): 50 records copied,
    MIRRORING when the source goes down;
  * the source broker is stopped; kafka-mirrors --remove --wait of P and
    Q stops both (STOPPED) and exits 6 (the source could not be asked:
    what was not copied is a lower bound); the report's summary says
    `at least 3000 source offset(s) not copied`; P's row has
    LAST-MIRRORED-OFFSET 4099 (not `-`) and NOT-COPIED `>=3000`, Q's 49
    and `>=0`, each with the age of the source end it counts from (SOURCE-AGE,
    not `-`);
  * the destination holds exactly the records copied: P's first 4,100 and
    Q's 50, at their source offsets;
  * still with the source down, kafka-mirrors --add of the pattern
    `fsd-<run>-new-.*` exits 4: the pattern is saved, and the warning
    (`kafka-mirrors: warning: ...`) names the source's host:port and why
    it cannot be read (connection refused);
  * the source started again: the topic that already matched the pattern
    and one created afterwards are discovered and mirrored (caught up,
    the same records at the same offsets), while P and Q stay STOPPED.
"""

import os
import re
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
M = "fsd"
P = "fsd-%s-p" % RUN
Q = "fsd-%s-q" % RUN
PATTERN = "fsd-%s-new-.*" % RUN
N1 = "fsd-%s-new-1" % RUN
N2 = "fsd-%s-new-2" % RUN
REFRESH_MS = 2000


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    src, = h.private_kafka(1, "plaintext")
    dst = h.real_kafka(2)[1]
    plain = src.admin_bootstrap        # the test's own clients
    for t in (P, Q, N1):
        src.create_topic(t, partitions=1)
    d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=mt.STALL_YAML)
    d.create(M, mt.stall_mirror_configs(src.bootstrap, **{
        "mirror.metadata.refresh.interval.ms": str(REFRESH_MS)}))
    mt.produce_tagged(plain, P, 0, 4100, "copied", keyed=True)
    mt.produce_tagged(plain, Q, 0, 50, "q", keyed=True)
    mt.produce_tagged(plain, N1, 0, 20, "n1", keyed=True)
    d.cli_ok("--add", "--mirror", M, "--topic", "%s,%s" % (P, Q))
    mt.wait_caught_up(d, M, 120, "%s and %s caught up" % (P, Q), count=2)

    d.cli_ok("--pause", "--mirror", M, "--topic", P)
    h.wait_for(lambda: d.states(M)[(P, 0)] == "PAUSED", 60, "%s PAUSED" % P)
    mt.produce_tagged(plain, P, 0, 3000, "late", keyed=True)
    eq(mt.end_offset(plain, P, 0), 7100, "%s's source end" % P)
    src_p = mt.read_partition(plain, P, 0, "fsd-a-" + RUN)
    src_q = mt.read_partition(plain, Q, 0, "fsd-b-" + RUN)
    try:
        # What the paused partition's refreshed source end shows (the
        # report below counts from it); not required here: the report is.
        h.wait_for(lambda: d.row(M, P, 0)["sourceOffset"] == 7100,
                   2 * REFRESH_MS / 1000.0 + 2, "7100")
    except AssertionError:
        print("note: %s's describe row still shows %r before the source goes "
              "down" % (P, d.row(M, P, 0)), flush=True)

    # The source goes down; failover.
    src.stop()
    r = d.cli("--remove", "--mirror", M, "--topic", "%s,%s" % (P, Q),
              "--wait", "60")
    print(r.stdout, r.stderr, flush=True)
    h.check(r.returncode == 6,
            "kafka-mirrors --remove --wait while the source is down exited %d, "
            "want 6 (STOPPED, the source could not be asked: what was not "
            "copied is a lower bound):\nstdout: %s\nstderr: %s"
            % (r.returncode, r.stdout, r.stderr))
    lines = r.stdout.rstrip("\n").split("\n")
    at = [i for i, l in enumerate(lines)
          if l.startswith("Failover report of mirror %s: " % M)]
    h.check(at and len(lines) >= at[0] + 4 and lines[at[0]].startswith(
        "Failover report of mirror %s: 2 partition(s) STOPPED, at least 3000 "
        "source offset(s) not copied" % M),
        "the failover report while the source is down says:\n%s\nwant the "
        "summary `... 2 partition(s) STOPPED, at least 3000 source offset(s) "
        "not copied`" % r.stdout)
    head = lines[at[0] + 1].split()
    h.check("SOURCE-AGE" in head, "the report has no SOURCE-AGE column:\n%s"
            % r.stdout)
    rows = {}
    for l in lines[at[0] + 2:]:
        c = dict(zip(head, l.split()))
        rows[c.get("TOPIC")] = c
    for t, last, nc in ((P, "4099", ">=3000"), (Q, "49", ">=0")):
        c = rows.get(t, {})
        eq((c.get("LAST-MIRRORED-OFFSET"), c.get("NOT-COPIED")), (last, nc),
           "%s's report row (LAST-MIRRORED-OFFSET, NOT-COPIED) in:\n%s"
           % (t, r.stdout))
        h.check(c.get("SOURCE-AGE") not in (None, "-"),
                "%s's report row has SOURCE-AGE %r, want the age of the "
                "source end NOT-COPIED counts from:\n%s"
                % (t, c.get("SOURCE-AGE"), r.stdout))
    states = d.states(M)
    eq((states.get((P, 0)), states.get((Q, 0))), ("STOPPED", "STOPPED"),
       "the removed partitions' states")
    eq(d.row(M, P, 0)["lastMirroredOffset"], 4099,
       "%s's lastMirroredOffset in --describe --json" % P)
    eq(mt.read_partition(dst.bootstrap, P, 0, "fsd-c-" + RUN), src_p[:4100],
       "%s on the destination: the first 4100 source records" % P)
    eq(mt.read_partition(dst.bootstrap, Q, 0, "fsd-d-" + RUN), src_q,
       "%s on the destination: its 50 source records" % Q)

    # A pattern added while the source is down: saved, with a warning.
    r = d.cli("--add", "--mirror", M, "--topic", PATTERN)
    print(r.stdout, r.stderr, flush=True)
    h.check(r.returncode == 4,
            "kafka-mirrors --add --topic '%s' while the source is down exited "
            "%d, want 4 (saved, with a warning):\nstdout: %s\nstderr: %s"
            % (PATTERN, r.returncode, r.stdout, r.stderr))
    warn = [l for l in r.stderr.splitlines()
            if l.startswith("kafka-mirrors: warning: ")]
    h.check(warn and src.bootstrap in warn[0] and
            re.search(r"refused", warn[0], re.I),
            "kafka-mirrors --add of a pattern while the source is down "
            "printed:\nstdout: %s\nstderr: %s\nwant `kafka-mirrors: warning: "
            "...` naming the source %s and the cause (connection refused)"
            % (r.stdout, r.stderr, src.bootstrap))

    # The source back: what matches the pattern is mirrored.
    t_back = time.monotonic()
    src.start_again()
    src.create_topic(N2, partitions=1)
    mt.produce_tagged(plain, N2, 0, 30, "n2", keyed=True)
    try:
        mt.wait_caught_up(d, M, 90, "discovered", topic=(N1, N2), count=2,
                          fail_on_failed=True)
    except AssertionError as e:
        h.fail("%.0f s after the source came back, the topics matching the "
               "pattern added while it was down are not mirrored: %s\n"
               "--describe:\n%s" % (time.monotonic() - t_back, e,
                                     mt.describe_table(d, M)[0]))
    for t in (N1, N2):
        mt.wait_same_ends(plain, dst.bootstrap, t, 1, 60, d.proc.log_path)
        mt.same_batches(plain, dst.bootstrap, t, [0])
    states = d.states(M)
    eq((states.get((P, 0)), states.get((Q, 0))), ("STOPPED", "STOPPED"),
       "the removed partitions' states once the source is back")
    print("ok")


h.run_main(main)
