#!/usr/bin/env python3
"""Translation anchors of batches that never landed, on real Kafka 4.4.0.

A transactional source needs an anchor per transaction (its commit marker
is a gap the destination does not have); mirrord records the anchors of
the batches queued behind the head in one part-anchors record before it
sends them.  Here those batches never land: two transactional topics
(1 partition) of a one-broker source are mirrored into a two-broker
destination whose topics have 2 replicas and min.insync.replicas=2, and
caught up.  Then the destination's second broker stops: every Produce is
refused with NOT_ENOUGH_REPLICAS (mirrord_cluster_request_errors_total)
and nothing is appended (a one-replica topic cannot do this: Kafka caps
min.insync.replicas at the replica count).  mirrord is SIGSTOPped while
200 transactions a topic are written, SIGCONTed, and killed with SIGKILL
once the file metadata log holds, for each topic, a part-anchors record
of the 200 anchors, all but the first above the destination end (10,
unchanged).  min.insync.replicas goes to 1 and mirrord starts again, with
pipeline.request_timeout_ms 2000 (the fence delay, 2 x (timeout + 1 s),
is then 6 s).

  A. retract: before the restart, DeleteRecords on the source into the
     backlog (the source log now starts at the 121st of its
     transactions), so the batches fetched again from the destination end
     are not those the anchors were recorded for.  mirrord logs that the
     source changed under the anchors recorded above the destination end
     (never written), takes a new producer epoch and waits the fence
     delay, logs "dropping the 199 translation anchors above destination
     offset 10"; the metadata log then holds a part-retract record at 10,
     and part-anchors records from (new log start, 10) on;
  B. recognition: the source is left alone; each batch fetched again whose
     anchor was recorded is recognised ("1 of its translation anchors are
     recorded already", for destination offsets 11 to 209, the last
     recorded anchor included): no fence, no "dropping" line, and no
     part-anchors or part-retract record after the restart.

For both, within 60 s of the restart: MIRRORING, lag 0, at the source's
high watermark, no stall, no error, no warning in DescribeMirrors; the
destination read_committed holds what was copied before the backlog,
then the source's committed records from its log start on, at contiguous
offsets; and the translation map (test/tools/xlate_dump, after a clean
stop) maps every committed source record still in the source log to the
destination offset holding its key and value.
"""

import glob
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import krawwrite as kw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
MIRROR = "ar"
TA = "anchret-a-" + RUN      # retract: the source changes while mirrord is down
TB = "anchret-b-" + RUN      # recognition: the source left alone
BEFORE = 10                  # transactions copied before the destination refuses
BACKLOG = 200                # transactions written while mirrord is stopped
CUT = 120                    # TA: the source log starts at backlog transaction CUT
T_PART_ANCHORS, T_PART_RETRACT = 25, 26   # lib/metadata/mrec.h


# ---- the file metadata log (lib/metadata/mlog.h, mrec.h) ------------------

def _uvarint(b, o):
    v = shift = 0
    while True:
        c = b[o]
        o += 1
        v |= (c & 0x7f) << shift
        if not c & 0x80:
            return v, o
        shift += 7


def _cstr(b, o):
    n, o = _uvarint(b, o)
    return b[o:o + n - 1].decode(), o + n - 1


def _frames(path):
    """(type, payload) of every whole frame of a segment or snapshot file,
    its first the file header (a frame still being written ends the
    list)."""
    with open(path, "rb") as f:
        data = f.read()
    out, o = [], 0
    while o + 12 <= len(data):
        ln, _crc, typ = struct.unpack(">IIH", data[o:o + 10])
        if o + 12 + ln > len(data):
            break
        out.append((typ, data[o + 12:o + 12 + ln]))
        o += 12 + ln
    return out


def mlog_records(data_dir, topic):
    """[(kind, offset, anchors)] of the part-anchors and part-retract
    records of MIRROR/topic-0 in the metadata log files under data_dir, in
    log order (the newest snapshot, then the segments from it on): kind
    "anchors" with the part-sending offset and [(src, dst)], or "retract"
    with the destination offset above which anchors went."""
    def seq(p):
        return int(re.search(r"-(\d+)\.(?:log|snap)$", p).group(1))
    snaps = sorted(glob.glob(os.path.join(data_dir, "snapshot-*.snap")), key=seq)
    segs = sorted(glob.glob(os.path.join(data_dir, "mlog-*.log")), key=seq)
    first = seq(snaps[-1]) if snaps else 0
    files = snaps[-1:] + [p for p in segs if seq(p) >= first]
    out = []
    for path in files:
        for typ, p in _frames(path):
            if typ not in (T_PART_ANCHORS, T_PART_RETRACT):
                continue
            m, o = _cstr(p, 1)            # after the version byte
            t, o = _cstr(p, o)
            part, off = struct.unpack(">iq", p[o:o + 12])
            o += 12
            if m != MIRROR or t != topic or part != 0:
                continue
            if typ == T_PART_RETRACT:
                out.append(("retract", off, []))
                continue
            n, o = _uvarint(p, o)
            anchors, s, d = [], 0, 0
            for _ in range(n):
                ds, o = _uvarint(p, o)
                dd, o = _uvarint(p, o)
                s, d = s + ds, d + dd
                anchors.append((s, d))
            out.append(("anchors", off, anchors))
    return out


def xlate(anchors, s):
    """The destination offset of source offset s through the map
    (lib/metadata/xlate.h, from (0, 0) as the offset sync reads it), None
    when s has no partner."""
    anchors = [(0, 0)] + anchors
    i = None
    for k, (a, _d) in enumerate(anchors):
        if a <= s:
            i = k
    if i is None:
        return None
    a, d = anchors[i]
    if i + 1 < len(anchors):
        na, nd = anchors[i + 1]
        if s - a >= min(na - a, nd - d):
            return None
    return d + s - a


def map_of(d, topic):
    """[(src, dst)] of MIRROR/topic-0 (xlate_dump; mirrord stopped)."""
    r = subprocess.run([h.build_path("test", "tools", "xlate_dump"), d.data_dir,
                        MIRROR], capture_output=True, text=True, timeout=60)
    h.check(r.returncode == 0, "xlate_dump: %s" % r.stderr)
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        if f[0] == "A" and f[1] == topic and f[2] == "0":
            out.append((int(f[3]), int(f[4])))
    return out


# ---- Kafka -----------------------------------------------------------------

def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def alter_isr(cluster, topic, value):
    """IncrementalAlterConfigs v0: min.insync.replicas of topic set to
    value."""
    op = struct.pack(">b", 0) + _s(value)
    body = struct.pack(">i", 1) + struct.pack(">b", 2) + _s(topic) + \
        struct.pack(">i", 1) + _s("min.insync.replicas") + op + \
        struct.pack(">b", 0)
    c = kraw.Conn(cluster.admin_bootstrap)
    try:
        r = c.call(44, 0, body)
        r.i32()
        for _ in range(r.i32()):
            err, msg = r.i16(), r.str()
            r.i8()
            r.str()
            if err:
                h.fail("IncrementalAlterConfigs %s min.insync.replicas=%s: "
                       "error %d %s" % (topic, value, err, msg))
    finally:
        c.close()


def write_txns(p, topic, tag, n):
    """n committed transactions of one record each on topic-0."""
    for i in range(n):
        p.begin_transaction()
        p.produce(topic, partition=0, key=b"%s-%d" % (tag, i),
                  value=b"%s-value-%d" % (tag, i))
        p.commit_transaction(60)


def committed_end(cl, topic):
    """(last stable offset, high watermark) of topic-0: ListOffsets v2,
    read_committed and read_uncommitted (cl a kraw.Cluster)."""
    out = []
    for iso in (1, 0):
        body = struct.pack(">ib", -1, iso) + struct.pack(">i", 1) + \
            _s(topic) + struct.pack(">iiq", 1, 0, -1)
        r = cl.conn(topic, 0).call(2, 2, body)
        r.i32()
        r.i32()
        r.str()
        r.i32()
        r.i32()
        err = r.i16()
        r.i64()
        off = r.i64()
        if err:
            h.fail("ListOffsets %s-0: error %d" % (topic, err))
        out.append(off)
    return tuple(out)


def read(bootstrap, topic):
    """(offset, key, value) of every committed record of topic-0 from its
    log start."""
    return mt.read_partition(bootstrap, topic, 0, "anchret-%s" % RUN,
                             config={"auto.offset.reset": "earliest"})


def main():
    src_c = h.real_kafka(2)[0]
    dst_c, = h.private_kafka(1, "plaintext", brokers=2)
    SRC, DST = src_c.bootstrap, dst_c.bootstrap
    for t in (TA, TB):
        src_c.create_topic(t, partitions=1)
        dst_c.create_topic(t, assignment={0: [1, 2]},
                           configs={"min.insync.replicas": "2"})
    d = mt.Mirrord(destination=DST,
                   extra_yaml="pipeline:\n  request_timeout_ms: 2000\n")
    d.create(MIRROR, {"bootstrap.servers": SRC,
                      "mirror.fetch.wait.max.ms": "100",
                      "mirror.metadata.refresh.interval.ms": "1000"})
    prod = {}
    for t in (TA, TB):
        prod[t] = Producer({"bootstrap.servers": SRC, "linger.ms": 0,
                            "acks": "all",
                            "transactional.id": "anchret-%s-%s" % (RUN, t)})
        prod[t].init_transactions(60)
        write_txns(prod[t], t, b"pre", BEFORE)
    d.cli_ok("--add", "--mirror", MIRROR, "--topic", TA)
    d.cli_ok("--add", "--mirror", MIRROR, "--topic", TB)
    mt.wait_caught_up(d, MIRROR, 60, "both topics caught up", topic=(TA, TB),
                      count=2, fail_on_failed=True)
    end0 = {t: mt.end_offset(DST, t) for t in (TA, TB)}
    eq(end0, {TA: BEFORE, TB: BEFORE}, "destination ends once caught up")
    copied = {t: read(DST, t) for t in (TA, TB)}

    # The destination refuses every Produce from now on, appending nothing.
    dst_c.stop_broker(2)
    h.wait_for(lambda: all(dst_c.partition(t)["isr"] == [1] for t in (TA, TB)),
               30, "the destination's in-sync replicas to be node 1 alone")
    d.proc.signal(signal.SIGSTOP)
    time.sleep(0.5)     # a Fetch it had sent is answered, with nothing new
    t0 = time.monotonic()
    for t in (TA, TB):
        write_txns(prod[t], t, b"bl", BACKLOG)
    # The coordinator writes the last commit marker after
    # commit_transaction() returns: mirrord fetches the whole backlog at
    # once only when the source's committed view already ends with it.
    src = kraw.Cluster(SRC)
    h.wait_for(lambda: all(committed_end(src, t) == (2 * (BEFORE + BACKLOG),) * 2
                           for t in (TA, TB)), 30,
               "the source's last stable offsets to reach the ends")
    src.close()
    print("%d transactions a topic written while mirrord was stopped, in "
          "%.1f s" % (BACKLOG, time.monotonic() - t0), flush=True)
    d.proc.signal(signal.SIGCONT)

    seen = {}

    def anchored_above():
        for t in (TA, TB):
            seen[t] = max([sum(1 for _s, dd in a if dd > end0[t])
                           for k, _o, a in mlog_records(d.data_dir, t)
                           if k == "anchors"] + [0])
        seen["refused"] = mt.metric_sum(d, "mirrord_cluster_request_errors_total",
                                        api="Produce", error="NOT_ENOUGH_REPLICAS")
        return all(seen[t] == BACKLOG - 1 for t in (TA, TB)) and \
            (seen["refused"] or 0) > 0
    try:
        h.wait_for(anchored_above, 30, "a part-anchors record of each topic "
                   "holding the anchors of every backlog transaction but the "
                   "first above the destination end (%d), and a Produce "
                   "refused with NOT_ENOUGH_REPLICAS" % (BACKLOG - 1))
    except AssertionError as e:
        h.fail("%s: the most anchors above the destination end in one record "
               "and the refusals counted: %r; destination ends %r; DescribeMirrors "
               "%r (log %s)" % (e, seen, [mt.end_offset(DST, t) for t in (TA, TB)],
                                d.describe_json(MIRROR), d.proc.log_path))
    d.kill9()
    killed = {}
    for t in (TA, TB):
        eq(mt.end_offset(DST, t), end0[t], "test setup: %s's destination end "
           "with one of its two replicas in sync" % t)
        recs = killed[t] = mlog_records(d.data_dir, t)
        big = max(len(a) for k, _o, a in recs if k == "anchors")
        print("%s: part-anchors records %r anchors each, the largest %d"
              % (t, [len(a) for k, _o, a in recs if k == "anchors"], big),
              flush=True)
        h.check(not any(k == "retract" for k, _o, _a in recs),
                "%s: a part-retract record before the restart: %r" % (t, recs))

    # A: the source log now starts inside the backlog.
    srcA = read(SRC, TA)
    bl = [o for o, k, _v in srcA if k.startswith(b"bl-")]
    eq(len(bl), BACKLOG, "test setup: backlog records on the source of %s" % TA)
    cut = bl[CUT]
    src = kraw.Cluster(SRC)
    low = kw.delete_records(src, TA, 0, cut)
    src.close()
    eq(low, cut, "source log start of %s after DeleteRecords" % TA)
    for t in (TA, TB):
        alter_isr(dst_c, t, "1")
    log_before = len(d.log())
    t0 = time.monotonic()
    d.start()
    rows = mt.wait_caught_up(d, MIRROR, 60, "both topics caught up after the "
                             "restart", topic=(TA, TB), count=2,
                             fail_on_failed=True)
    print("caught up %.1f s after the restart" % (time.monotonic() - t0),
          flush=True)
    for r in rows:
        t = r["topic"]
        eq(r["sourceOffset"], mt.end_offset(SRC, t), "%s sourceOffset" % t)
        eq(r["destinationOffset"], mt.end_offset(DST, t), "%s destinationOffset" % t)
        h.check(not r["stalled"] and r["stalledReason"] is None and
                r["errorMessage"] is None and r["warningMessage"] is None,
                "%s: a stale reason in DescribeMirrors: %r" % (t, r))
    log = d.log()[log_before:]

    # A: fenced, then retracted above the destination end.
    pa = "%s/%s-0" % (MIRROR, TA)
    changed = re.search(r"%s: the source batch at offsets \d+\.\.\d+ puts source "
                        r"offset %d at destination offset %d, not where the (\d+) "
                        r"anchors recorded above destination offset %d \(never "
                        r"written\) put it" % (re.escape(pa), cut, BEFORE, BEFORE),
                        log)
    h.check(changed, "%s: no log line naming source offset %d and the anchors "
            "above destination offset %d (log %s)" % (TA, cut, BEFORE,
                                                      d.proc.log_path))
    h.check(re.search(r"%s: .*producer epoch \d+ from the destination end on "
                      r"\(the older epoch fenced\)" % re.escape(pa), log),
            "%s: no new producer epoch logged before the retract" % TA)
    dropped = re.search(r"%s: dropping the (\d+) translation anchors above "
                        r"destination offset %d, recorded for batches that "
                        r"never landed" % (re.escape(pa), BEFORE), log)
    h.check(dropped, "%s: no 'dropping the N translation anchors above "
            "destination offset %d' line (log %s)" % (TA, BEFORE, d.proc.log_path))
    # The record held an anchor per backlog transaction, the first at the
    # destination end itself (the marker before it): the others go.
    eq(int(dropped.group(1)), BACKLOG - 1, "%s: anchors dropped" % TA)
    eq(changed.group(1), dropped.group(1), "%s: anchors named above the "
       "destination end at the fence vs dropped" % TA)
    recs = mlog_records(d.data_dir, TA)
    h.check(recs[:len(killed[TA])] == killed[TA], "%s: the records before the "
            "restart changed" % TA)
    new = recs[len(killed[TA]):]
    h.check(new and new[0] == ("retract", BEFORE, []) and
            all(k == "anchors" for k, _o, _a in new[1:]) and len(new) > 1 and
            new[1][2][0] == (cut, BEFORE),
            "%s: after the restart, a part-retract at destination offset %d, "
            "then part-anchors from (%d, %d): %r"
            % (TA, BEFORE, cut, BEFORE, [(k, o, a[:2]) for k, o, a in new]))
    print("A: source changed under %s anchors above destination offset %d: "
          "fenced, retracted" % (dropped.group(1), BEFORE), flush=True)

    # B: recognised, nothing retracted.
    pb = "%s/%s-0" % (MIRROR, TB)
    h.check(not re.search(r"%s: (dropping|the source batch at offsets|.*the "
                          r"older epoch fenced)" % re.escape(pb), log),
            "%s: the unchanged source was taken as changed (log %s)"
            % (TB, d.proc.log_path))
    # The batch at the destination end starts where the map puts it (no
    # anchor of its own); each batch after it carries its marker's anchor.
    again = {int(x) for x in re.findall(
        r"%s: the batch at source offsets \d+\.\.\d+ for destination offset "
        r"(\d+) is sent again: 1 of its translation anchors are recorded "
        r"already" % re.escape(pb), log)}
    eq(sorted(again), list(range(BEFORE + 1, BEFORE + BACKLOG)),
       "%s: destination offsets of the batches recognised (log %s)"
       % (TB, d.proc.log_path))
    new = mlog_records(d.data_dir, TB)[len(killed[TB]):]
    eq([(k, o, a[:3]) for k, o, a in new], [], "%s: part-anchors or "
       "part-retract records after the restart (every anchor was recorded "
       "already)" % TB)

    # The data, and the map, of both.
    want = {}
    for t in (TA, TB):
        s = read(SRC, t)
        got = read(DST, t)
        want[t] = s
        if t == TA:
            h.check(s and s[0][0] == cut and s[0][1] == b"bl-%d" % CUT,
                    "%s: the source's first committed record: %r" % (t, s[:1]))
        eq([(k, v) for _o, k, v in got],
           [(k, v) for _o, k, v in copied[t]] +
           [(k, v) for _o, k, v in s if not k.startswith(b"pre-")],
           "%s: the destination read_committed vs what was copied before "
           "and the source from its log start" % t)
        eq([o for o, _k, _v in got], list(range(len(got))),
           "%s: destination offsets (contiguous)" % t)
    d.stop()
    for t in (TA, TB):
        m = map_of(d, t)
        dst_at = {o: (k, v) for o, k, v in read(DST, t)}
        for o, k, v in want[t]:
            x = xlate(m, o)
            if x is None or dst_at.get(x) != (k, v):
                h.fail("%s: source offset %d (%r) translates to destination "
                       "offset %r, which holds %r; the map: %r"
                       % (t, o, k, x, dst_at.get(x), m))
        print("%s: %d anchors map all %d committed source records"
              % (t, len(m), len(want[t])), flush=True)
    print("PASS: anchors of batches that never landed retracted after the "
          "source changed, recognised when it did not", flush=True)


if __name__ == "__main__":
    h.run_main(main)
