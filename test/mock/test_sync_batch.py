#!/usr/bin/env python3
"""The destination ends of many partitions in one ListOffsets:
every partition that starts or resumes reads its destination end first,
and mirrord asks a broker for all of them at once instead of one request
a partition.  The real mirrord and kafka-mirrors against two librdkafka
mock clusters:

  * 3 topics of 25 partitions (75 ends, more than one request's first
    allocation and more than one topic a request), a ListOffsets answered
    NOT_LEADER_OR_FOLLOWER for every partition it carries, then the next
    one: every partition is copied, batch for batch equal at equal offsets;
  * kill -9, more records, a restart: every partition reads its end again
    and copies the rest, nothing lost or twice;
  * the ends go in few requests: at most a handful of ListOffsets to the
    destination for the 75 partitions (mirrord logs each at debug level),
    none answered short.
"""

import os
import re
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    import confluent_kafka  # noqa: F401  (mt.produce_tagged)
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

TOPICS = ("sa", "sb", "sc")
NPART = 25
SENT = re.compile(r"destination: ListOffsets of the ends of (\d+) partitions sent to")


def produce_all(src, tag, n, topics=TOPICS):
    for t in topics:
        for p in range(NPART):
            mt.produce_tagged(src, t, p, n, "%s-%s%d" % (tag, t, p))


def wait_copied(d, src, dst, want, topics=TOPICS, mirror="m", timeout=60):
    # mirrord's own view first: the test's reads of the destination are
    # ListOffsets too, and must not take the error injected for mirrord's.
    last = []

    def settled():
        rows = d.describe_json(mirror)
        last[:] = [r for r in rows if r["state"] != "MIRRORING" or
                   r["lag"] != 0 or r["destinationOffset"] != want]
        return len(rows) == len(topics) * NPART and not last
    try:
        h.wait_for(settled, timeout, "every partition MIRRORING with %d "
                   "records copied" % want)
    except AssertionError as e:
        h.fail("%s; not yet: %s; log %s" % (e, last[:3], d.proc.log_path))
    for t in topics:
        h.eq(mt.end_offsets(dst, t, NPART), [want] * NPART, "%s ends" % t)
    for t in topics:
        n = mt.same_batches(src, dst, t, range(NPART))
        h.eq(n, want * NPART, "%s records compared" % t)


def requests_logged(text):
    """(ListOffsets requests for destination ends, partitions they carried)."""
    sizes = [int(m.group(1)) for m in SENT.finditer(text)]
    return len(sizes), sum(sizes)


def main():
    mc, SRC, DST = mt.mock_pair({t: NPART for t in TOPICS})
    produce_all(SRC, "a", 3)
    d = mt.Mirrord(destination=DST, log_level="debug")
    d.create("m", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100"})
    # The first ListOffsets of the destination fails for every partition
    # it carries: all of them ask again.
    mc.cmd("err 1 2 6")
    d.cli_ok("--add", "--mirror", "m", "--topic", ",".join(TOPICS))
    wait_copied(d, SRC, DST, 3)
    log = d.log()
    nreq, nparts = requests_logged(log)
    print("start: %d ListOffsets requests carried %d partition ends"
          % (nreq, nparts), flush=True)
    h.check(nparts >= 2 * len(TOPICS) * NPART,
            "every partition should have asked twice (the first answer was "
            "an error): %d ends in %d requests" % (nparts, nreq))
    h.check(nreq <= 8, "%d ListOffsets requests for %d ends: not batched"
            % (nreq, nparts))
    h.check("lacks" not in log and "malformed ListOffsets" not in log,
            "a ListOffsets answer was read short:\n%s" % "\n".join(
                l for l in log.splitlines() if "ListOffsets" in l)[-2000:])

    # kill -9, more records, a restart: every end read again.
    d.kill9()
    produce_all(SRC, "b", 2)
    d.start()
    wait_copied(d, SRC, DST, 5)
    with open(d.proc.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    nreq, nparts = requests_logged(log)
    print("restart: %d ListOffsets requests carried %d partition ends"
          % (nreq, nparts), flush=True)
    h.check(nparts >= len(TOPICS) * NPART,
            "every partition should have read its end after the restart: "
            "%d ends in %d requests" % (nparts, nreq))
    h.check(nreq <= 4, "%d ListOffsets requests for %d ends after the "
            "restart: not batched" % (nreq, nparts))
    h.check("lacks" not in log and "malformed ListOffsets" not in log,
            "a ListOffsets answer was read short after the restart")
    h.check("-> FAILED" not in d.log(), "a partition failed")
    d.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
