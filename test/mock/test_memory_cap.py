#!/usr/bin/env python3
"""Memory bounded by pipeline.max_inflight_bytes_total, counting everything
held.

The real mirrord binary between two librdkafka mock clusters: a source
holding 8 partitions x 40 batches of 16 KiB (5 MiB, all there before the
copy starts), a destination slowed down (every answer 300 ms late), and a
total cap of 1 MiB with 256 KiB per partition, so 8 full partitions alone
would hold twice the cap.  Everything mirrord holds for record data counts:
batches queued, in flight and kept, the largest answers of the Fetches in
flight (reserved before they go), and Produce requests not yet written.

What must hold:
  * mirrord_memory_held_bytes_peak (the most of all kinds at once) stays
    within the cap, give or take one batch per Fetch answer that the mock
    adds past the response limit (it adds an entry while the answer is
    below the limit; real Kafka goes past the limit only for a first batch
    larger than it);
  * the process's peak RSS grows over its baseline by no more than the cap
    plus allocator slack, far less than the 5 MiB copied;
  * the copy is exact: every record once, in order, at the source's
    offsets, in every partition.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

T = "mem"
PARTS = 8
BATCHES = 40
RECS = 16                 # records a batch
VALUE = 1000              # bytes a value: about 16 KiB a batch
CAP = 1 << 20
PART_CAP = 256 << 10



def sanitized():
    """ASan's quarantine keeps freed memory resident: no RSS bound there."""
    with open(h.build_path("config.h")) as f:
        return "#define MIRRORD_SANITIZERS 1" in f.read()


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    h.fail("no %s in /proc/%d/status" % (field, pid))


def main():
    mc, SRC, DST = mt.mock_pair({T: PARTS})
    src, dst = kraw.Cluster(SRC), kraw.Cluster(DST)
    want = {}
    batch_len = 0
    for part in range(PARTS):
        want[part], n = mt.produce_padded_batches(src, T, part, BATCHES, RECS,
                                                  VALUE, b"k", b"", b"v")
        batch_len = max(batch_len, n)
    total = sum(len(v) for v in want.values()) * (VALUE + 20)
    print("source: %d partitions, %d batches of %d bytes each (%.1f MiB)"
          % (PARTS, BATCHES, batch_len, total / 1048576.0), flush=True)

    d = mt.Mirrord(destination=DST, log_level="info",
                   extra_yaml=mt.pipeline_caps_yaml(CAP, PART_CAP))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "100"})
    pid = d.proc.p.pid
    base_kb = status_kb(pid, "VmRSS")
    mc.cmd("rtt 1 1 300")          # a slow destination: data piles up
    d.cli_ok("--add", "--mirror", "m1", "--topic", T)

    seen = {"fetch_responses": 0, "queued": 0, "sending": 0}

    def sample(_rows):
        for k in seen:
            seen[k] = max(seen[k], mt.metric_sum(d, "mirrord_memory_held_bytes", kind=k) or 0)
    mt.wait_caught_up(d, "m1", 240, "every partition copied, MIRRORING, lag 0",
                      topic=T, count=PARTS, fail_on_failed=True, interval=0.2,
                      poll=sample)

    peak = mt.metric_sum(d, "mirrord_memory_held_bytes_peak")
    hwm_kb = status_kb(pid, "VmHWM")
    print("held bytes: peak %d of a cap of %d; largest seen: %r; RSS %d KiB at "
          "the start, peak %d KiB (+%d KiB)" % (peak, CAP, seen, base_kb, hwm_kb,
                                                hwm_kb - base_kb), flush=True)
    h.check(seen["fetch_responses"] > 0,
            "Fetch answers were never counted as held (a reservation of 0)")
    h.check(peak >= PART_CAP, "the held peak %d is below one partition's cap: "
            "the test did not fill anything" % peak)
    # The mock adds one entry past a Fetch's response limit (see above):
    # at most one batch per answer, counted twice while it is taken in.
    h.check(peak <= CAP + 2 * batch_len,
            "held %d bytes at the peak, more than the cap %d (+ one batch past "
            "the mock's response limit, %d bytes, counted twice)" % (peak, CAP, batch_len))
    h.check(sanitized() or (hwm_kb - base_kb) * 1024 <= CAP + 3 * 1048576,
            "peak RSS grew by %d KiB over the baseline while copying %.1f MiB "
            "under a %d KiB cap" % (hwm_kb - base_kb, total / 1048576.0, CAP // 1024))

    for part in range(PARTS):
        got = mt.stored_records(dst, T, part)
        h.check([o for o, _k, _v in got] == list(range(len(want[part]))),
                "partition %d: destination offsets not 0..%d" % (part, len(want[part]) - 1))
        h.check([(k, v) for _o, k, v in got] == want[part],
                "partition %d: destination records differ from the source's "
                "(lost or duplicated)" % part)
        h.check(dst.offsets(T, part)[1] == src.offsets(T, part)[1],
                "partition %d: destination end differs from the source's" % part)
    print("%d partitions: every record once at equal offsets" % PARTS, flush=True)
    d.stop()
    src.close()
    dst.close()
    mc.close()


if __name__ == "__main__":
    h.run_main(main)
