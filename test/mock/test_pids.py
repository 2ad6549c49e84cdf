#!/usr/bin/env python3
"""Producer identities per destination partition, and refused writes, on
two librdkafka mock clusters (fault injection needs the mock).

What a user would check:

  * every destination partition is written with a producer id of its own;
  * a sequence error on one partition (OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID: the epoch is bumped and the sequence starts again
    at 0; INVALID_PRODUCER_EPOCH: a fresh producer id) changes that
    partition's identity only: the other partitions keep theirs, and every
    partition's batches, offsets and records equal the source's, nothing
    lost or duplicated;
  * identities survive kill -9 (the same producer id and epoch after it);
  * batches of an earlier version's single producer id (kept in
    storage.data_dir/producer-id, sequence = offset) are recognised as
    mirrord's after an upgrade, and new batches get an identity of their
    own;
  * InitProducerId refused (CLUSTER_AUTHORIZATION_FAILED) and Produce
    refused (TOPIC_AUTHORIZATION_FAILED): the partition is FAILED with a
    reason naming the error and the topic, /readyz says not ready, the
    denial metric counts it; once the destination allows it again the
    partition resumes by itself, equal to the source.
"""

import os
import re
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

OUT_OF_ORDER, INVALID_EPOCH, UNKNOWN_PID = 45, 47, 59
TOPIC_DENIED, CLUSTER_DENIED = 29, 31


def produce(bootstrap, topic, partition, n, tag):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "acks": "all", "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, value=("%s-%d" % (tag, i)).encode(),
                  key=b"k%d" % (i % 7), partition=partition,
                  on_delivery=lambda e, m: e and errors.append(str(e)))
        if i % 10 == 9:
            p.flush(30)  # several batches per partition
    if p.flush(60) or errors:
        h.fail("producing to %s-%d: %s" % (topic, partition, errors[:3]))


def identities(topic, partition):
    """Every destination batch's (base offset, count, pid, epoch, seq),
    after checking it equals the source batch at the same offset."""
    s, t = kraw.Cluster(SRC), kraw.Cluster(DST)
    try:
        sb, db = s.batches(topic, partition), t.batches(topic, partition)
    finally:
        s.close()
        t.close()
    eq(len(db), len(sb), "%s-%d batch count" % (topic, partition))
    out = []
    for a, b in zip(sb, db):
        what = "%s-%d batch at %d" % (topic, partition, a["base_offset"])
        eq(b["base_offset"], a["base_offset"], what + ": destination offset")
        eq(b["count"], a["count"], what + ": record count")
        h.check(b["crc_ok"], what + ": destination CRC does not verify")
        if kraw.records_section(b["raw"]) != kraw.records_section(a["raw"]):
            h.fail(what + ": records differ from the source")
        pid, epoch, seq = struct.unpack(">qhi", b["raw"][43:57])
        out.append((b["base_offset"], b["count"], pid, epoch, seq))
    return out


def check_numbering(rows, what):
    """Within one (pid, epoch) sequences are contiguous; each new identity
    starts at sequence 0 (fresh) or 0 after a bump."""
    prev = None
    for off, count, pid, epoch, seq in rows:
        h.check(pid >= 0, "%s: batch at %d has no producer id" % (what, off))
        if prev is not None and prev[2:4] == (pid, epoch):
            eq(seq, prev[4] + prev[1], "%s: sequence of the batch at %d" % (what, off))
        elif prev is not None:
            eq(seq, 0, "%s: first sequence of producer id %d epoch %d at %d"
               % (what, pid, epoch, off))
        prev = (off, count, pid, epoch, seq)


def part(topic, p):
    for r in d.describe_json("m1"):
        if r["topic"] == topic and r["partition"] == p:
            return r
    return None


def denied_metric(api, error):
    pat = re.compile(r'^mirrord_destination_writes_denied_total\{api="%s",'
                     r'error="%s"\} (\S+)$' % (api, error), re.M)
    m = pat.search(d.metrics())
    return float(m.group(1)) if m else 0.0


def wait_mirrored(topic, npart, timeout=90):
    return mt.wait_same_ends(SRC, DST, topic, npart, timeout, d.proc.log_path)


def main():
    global SRC, DST, d
    mc, SRC, DST = mt.mock_pair({"seq": 3, "denied": 1, "wdenied": 1},
                                brokers=3)
    # One destination leader per partition: a broker's injected error
    # reaches that partition's Produce only.
    for p in range(3):
        mc.cmd("leader 1 seq %d %d" % (p, p + 1))
    mc.cmd("leader 1 wdenied 0 2")

    d = mt.Mirrord(destination=DST, extra_yaml=(
        "pipeline:\n  request_timeout_ms: 1500\n"))
    d.create("m1", {"bootstrap.servers": SRC, "mirror.fetch.wait.max.ms": "200",
                    "mirror.failed.retry.initial.backoff.ms": "200",
                    "mirror.failed.retry.max.backoff.ms": "1000",
                    "mirror.failed.retry.max.attempts": "2"})

    # 1. One producer id per partition.
    for p in range(3):
        produce(SRC, "seq", p, 30, "a%d" % p)
    d.cli_ok("--add", "--mirror", "m1", "--topic", "seq")
    wait_mirrored("seq", 3)
    before = [identities("seq", p) for p in range(3)]
    first = [rows[-1][2:4] for rows in before]
    eq(len({pid for pid, _ in first}), 3, "distinct producer ids of seq-0..2 %r"
       % (first,))
    print("three partitions, three producer ids: %r" % (first,), flush=True)

    # 2. A sequence error on each partition in turn; the others untouched.
    cases = [(0, OUT_OF_ORDER, "bump"), (1, UNKNOWN_PID, "bump"),
             (2, INVALID_EPOCH, "fresh")]
    for k, (victim, code, kind) in enumerate(cases):
        ids = [identities("seq", p)[-1][2:4] for p in range(3)]
        mc.cmd("errrtt 1 %d 0 %d 0" % (victim + 1, code))
        for p in range(3):
            produce(SRC, "seq", p, 30, "b%d-%d" % (k, p))
        wait_mirrored("seq", 3, timeout=120)
        after = [identities("seq", p) for p in range(3)]
        for p in range(3):
            check_numbering(after[p], "seq-%d" % p)
            now = after[p][-1][2:4]
            if p != victim:
                eq(now, ids[p], "seq-%d keeps its identity when seq-%d gets "
                   "error %d" % (p, victim, code))
            elif kind == "bump":
                eq(now, (ids[p][0], ids[p][1] + 1), "seq-%d after error %d: the "
                   "same producer id, the epoch bumped" % (p, code))
            else:
                h.check(now[0] != ids[p][0] and now[0] not in
                        [i[0] for i in ids], "seq-%d after error %d: a fresh "
                        "producer id, got %r (before %r)" % (p, code, now, ids))
        print("error %d on seq-%d: %s %r -> %r, the others kept theirs"
              % (code, victim, kind, ids[victim], after[victim][-1][2:4]),
              flush=True)
    h.check("OUT_OF_ORDER_SEQUENCE_NUMBER for producer id" in d.log(),
            "the log names the sequence error and the producer id")

    # 3. kill -9: every partition keeps its identity.
    ids = [identities("seq", p)[-1][2:4] for p in range(3)]
    d.kill9()
    d.start()
    for p in range(3):
        produce(SRC, "seq", p, 20, "c%d" % p)
    wait_mirrored("seq", 3)
    for p in range(3):
        rows = identities("seq", p)
        check_numbering(rows, "seq-%d" % p)
        eq(rows[-1][2:4], ids[p], "seq-%d identity after kill -9" % p)
        eq(sum(r[1] for r in rows), mt.end_offsets(SRC, "seq", 3)[p],
           "seq-%d records on the destination" % p)

    # 4. InitProducerId refused: FAILED with the reason, not ready, counted;
    # then allowed again: it resumes by itself.
    produce(SRC, "denied", 0, 25, "d")
    mc.cmd("err 1 22 " + " ".join([str(CLUSTER_DENIED)] * 8))
    d.cli_ok("--add", "--mirror", "m1", "--topic", "denied")

    def failed_denied(topic):
        r = part(topic, 0)
        return r if r and r["state"] == "FAILED" and \
            "destination access denied" in (r["errorMessage"] or "") else None
    r = h.wait_for(lambda: failed_denied("denied"), 60,
                   "denied-0 FAILED for the refused InitProducerId")
    msg = r["errorMessage"]
    for want in ("InitProducerId refused", "CLUSTER_AUTHORIZATION_FAILED",
                 "topic denied partition 0"):
        h.check(want in msg, "denied-0 reason %r names %r" % (msg, want))
    code, body = h.wait_for(lambda: (lambda c: c if c[0] == 503 and
                            "destination access denied" in c[1] else None)(d.readyz()),
                            30, "/readyz to say not ready for the denial")
    h.check(denied_metric("InitProducerId", "CLUSTER_AUTHORIZATION_FAILED") >= 1,
            "mirrord_destination_writes_denied_total counts the refusal")
    print("InitProducerId refused: %s; /readyz %d: %s" % (msg, code,
          body.strip().splitlines()[-1]), flush=True)
    # The 8 refusals run out: the partition resumes by itself.
    wait_mirrored("denied", 1, timeout=120)
    h.wait_for(lambda: part("denied", 0)["state"] == "MIRRORING", 60,
               "denied-0 back in MIRRORING")
    check_numbering(identities("denied", 0), "denied-0")

    # 5. Produce refused (TOPIC_AUTHORIZATION_FAILED), beyond the mirror's
    # retry limit of 2: still retried, then resumed.
    d.cli_ok("--add", "--mirror", "m1", "--topic", "wdenied")
    for i in range(4):
        mc.cmd("errrtt 1 2 0 %d 0" % TOPIC_DENIED)
    produce(SRC, "wdenied", 0, 25, "w")
    r = h.wait_for(lambda: failed_denied("wdenied"), 60,
                   "wdenied-0 FAILED for the refused Produce")
    for want in ("TOPIC_AUTHORIZATION_FAILED", "topic wdenied partition 0",
                 "User:ANONYMOUS"):
        h.check(want in r["errorMessage"], "wdenied-0 reason %r names %r"
                % (r["errorMessage"], want))
    wait_mirrored("wdenied", 1, timeout=120)
    h.wait_for(lambda: part("wdenied", 0)["state"] == "MIRRORING", 60,
               "wdenied-0 back in MIRRORING")
    check_numbering(identities("wdenied", 0), "wdenied-0")
    h.check(denied_metric("Produce", "TOPIC_AUTHORIZATION_FAILED") >= 4,
            "the denial metric counts the four refused Produce requests")
    h.wait_for(lambda: d.readyz()[0] == 200, 30, "/readyz ready again")
    for p in range(3):
        identities("seq", p)
    print("Produce refused four times: FAILED naming it, retried past "
          "max.attempts=2, resumed; all partitions equal to the source",
          flush=True)
    d.stop()

    # 6. Upgrade: batches an earlier version wrote with its one producer id
    # (sequence = offset, the id in data_dir/producer-id) are mirrord's.
    for c in (0, 1):
        mc.cmd("topic %d legacy 1" % c)
    produce(SRC, "legacy", 0, 40, "l")
    old_pid = 4242000
    s = kraw.Cluster(SRC)
    t = kraw.Cluster(DST)
    try:
        for b in s.batches("legacy", 0):
            raw = bytearray(b["raw"])
            raw[0:8] = struct.pack(">q", 0)
            raw[43:57] = struct.pack(">qhi", old_pid, 0, b["base_offset"])
            raw[17:21] = struct.pack(">I", kraw.crc32c(bytes(raw[21:])))
            body = (struct.pack(">hhi", -1, -1, 5000) + struct.pack(">i", 1)
                    + kraw._s("legacy") + struct.pack(">ii", 1, 0)
                    + struct.pack(">i", len(raw)) + bytes(raw))
            t.conn("legacy", 0).call(0, 3, body)
    finally:
        s.close()
        t.close()
    eq(mt.end_offsets(DST, "legacy", 1), mt.end_offsets(SRC, "legacy", 1), "legacy destination end")
    with open(os.path.join(d.data_dir, "producer-id"), "w") as f:
        f.write("%s %d 0\n" % (mc.cluster_id(1), old_pid))
    d.start()
    d.cli_ok("--add", "--mirror", "m1", "--topic", "legacy")
    produce(SRC, "legacy", 0, 20, "l2")
    wait_mirrored("legacy", 1)
    h.wait_for(lambda: part("legacy", 0)["state"] == "MIRRORING", 60,
               "legacy-0 MIRRORING (the earlier version's batches proven)")
    rows = identities("legacy", 0)
    h.check(rows[0][2] == old_pid and rows[-1][2] not in (old_pid, -1),
            "legacy-0: the earlier id's batches, then a fresh id: %r"
            % ([r[2:4] for r in rows],))
    check_numbering([r for r in rows if r[2] != old_pid], "legacy-0 new batches")
    print("upgrade: %d batches of the earlier single producer id proven as "
          "mirrord's; new batches under producer id %d"
          % (sum(1 for r in rows if r[2] == old_pid), rows[-1][2]), flush=True)
    d.stop()


if __name__ == "__main__":
    h.run_main(main)
