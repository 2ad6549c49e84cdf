#!/usr/bin/env python3
"""Fair Fetch rotation on the librdkafka mock, with the real mirrord and
kafka-mirrors: eight partitions of one topic, all led by one source
broker, each with a backlog of 100 one-record batches of about 1.2 KB, and
mirror.fetch.response.max.bytes at its minimum (1 KiB), so that every
Fetch response carries one batch (the mock stops adding partitions once
the response holds MaxBytes).  A Fetch that always lists the partitions in
the same order feeds partition 0 until its backlog is gone and the others
wait; with the starting partition rotated, every partition has copied
something by the time twice as many batches as there are partitions have
been copied (progress ordering, not timing).  Then everything arrives,
equal at equal offsets.

The source broker answers after 60 ms (mock rtt) so each Fetch moves at
most one batch between two looks at the destination ends.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

NPART = 8
BACKLOG = 100


def produce_backlog(bootstrap, topic):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "batch.num.messages": 1, "acks": "all",
                  "message.timeout.ms": 30000})

    def dr(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(BACKLOG):
        for part in range(NPART):
            value = ("p%d-r%d-" % (part, i)).encode() + b"x" * 1200
            p.produce(topic, value=value, partition=part, on_delivery=dr)
        p.flush(30)
    h.check(p.flush(30) == 0 and not errors,
            "producing the backlog: errors %s" % errors)


def main():
    mc, SRC, DST = mt.mock_pair({"fair": NPART})
    produce_backlog(SRC, "fair")
    want = mt.end_offsets(SRC, "fair", NPART)
    h.check(want == [BACKLOG] * NPART, "source ends %r" % want)

    mc.cmd("rtt 0 1 60")
    d = mt.Mirrord(destination=DST)
    d.create("m", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100",
                   "mirror.fetch.response.max.bytes": "1024"})
    d.cli_ok("--add", "--mirror", "m", "--topic", "fair")

    seen = []

    def progressed():
        e = mt.end_offsets(DST, "fair", NPART)
        seen.append(e)
        return e if sum(e) >= 2 * NPART else None
    got = h.wait_for(progressed, 120,
                     "%d batches copied (mirrord log %s)"
                     % (2 * NPART, d.proc.log_path), interval=0.01)
    print("destination ends when %d+ batches were copied: %r (after %d looks)"
          % (2 * NPART, got, len(seen)), flush=True)
    h.check(min(got) >= 1,
            "a partition starved: destination ends %r after %d batches were "
            "copied (every one of the %d partitions has a backlog of %d)"
            % (got, sum(got), NPART, BACKLOG))
    h.check(sum(got) < BACKLOG,
            "the look came too late to tell (%r): %d batches copied"
            % (got, sum(got)))

    mc.cmd("rtt 0 1 0")
    h.wait_for(lambda: mt.end_offsets(DST, "fair", NPART) == want, 120,
               "every batch copied (mirrord log %s)" % d.proc.log_path)
    h.check("-> FAILED" not in d.log(), "a partition failed:\n%s"
            % d.log()[-2000:])
    d.stop()
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
