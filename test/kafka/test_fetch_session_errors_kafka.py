#!/usr/bin/env python3
"""Fetch sessions (KIP-227) answered with session errors by real Apache
Kafka 4.4.0 (the test tier of test/kafka/realkafka.py; SKIPs with the
reason when it cannot run).

A private source broker whose session cache holds one session a shard
(max.incremental.fetch.session.cache.slots=8: 8 shards), the shared
destination, a writer writing to every source partition the whole time,
and a raw Kafka client (this script, Fetch v11, and v13 for the incremental
Fetches in mirrord's session, which mirrord opens by topic id: a broker
answers a Fetch by name in it FETCH_SESSION_TOPIC_ID_ERROR) that plays the
other fetchers a broker serves:

  1. INVALID_FETCH_SESSION_EPOCH: with mirrord stopped (SIGSTOP), the
     client sends incremental Fetches with mirrord's session id (from its
     "Fetch session N opened" log line) at every epoch up to past mirrord's:
     the broker's epoch moves on, mirrord's next Fetch carries an old one;
  2. FETCH_SESSION_ID_NOT_FOUND: the client sends a full Fetch naming
     mirrord's session, which closes it (as a broker does for any session
     a full Fetch names);
  3. eviction: once mirrord's session is older than the broker's
     two-minute minimum, the client opens sessions of more partitions than
     mirrord's, one after another round the shards, until the broker evicts
     mirrord's for one of them: FETCH_SESSION_ID_NOT_FOUND again;
  4. no room: with mirrord stopped, the client closes mirrord's session
     and fills every shard with sessions of its own (none old enough to be
     evicted): mirrord's full Fetch gets no session (id 0), so it fetches
     without one (full Fetches) and asks again later; once the client
     closes its sessions mirrord's Fetches are incremental again.

After each: the error is counted (mirrord_fetch_session_errors_total by
error name), logged naming it, a full Fetch follows and the Fetches are
incremental again, and no partition is lost from the new session: a
record written to every partition after the error reaches the destination
in every one.  Last the writer stops and every partition of the
destination holds the source's records at the same offsets with the same
keys, values, headers and timestamps, and every partition is MIRRORING
with lag 0.
"""

import os
import re
import signal
import socket
import struct
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
LAYOUT = {"fse-a-" + RUN: 6, "fse-b-" + RUN: 3}
BIG = "fse-big-" + RUN       # not mirrored: the other fetcher's sessions
BIG_PARTS = 16               # more than mirrord's session holds
EVICTION_S = 120             # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS


def layout():
    """{topic: [partition, ...]} of every mirrored topic."""
    return {t: list(range(n)) for t, n in LAYOUT.items()}


# ---- a raw Fetch v11 client ------------------------------------------------

def _s(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def fetch_body(session_id, epoch, parts=(), max_wait=0):
    """Fetch v11: parts [(topic, partition)] at offset 0; nothing forgotten."""
    by_topic = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    b = struct.pack(">iiiibii", -1, max_wait, 0, 1, 0, session_id, epoch)
    b += struct.pack(">i", len(by_topic))
    for t, ps in sorted(by_topic.items()):
        b += _s(t) + struct.pack(">i", len(ps))
        for p in ps:
            b += struct.pack(">iiqqi", p, -1, 0, -1, 1)
    b += struct.pack(">i", 0) + _s("")
    return b


def fetch13_body(session_id, epoch):
    """Fetch v13 (flexible: compact arrays, tagged fields) naming no
    partition: an incremental Fetch in a session opened by topic id."""
    b = struct.pack(">iiiibii", -1, 0, 0, 1, 0, session_id, epoch)
    return b + b"\x01\x01\x01\x00"  # topics, forgotten, rack "", tags


class RawFetcher:
    """Fetch v11 (or v13) requests on one connection, pipelined in
    rounds."""

    def __init__(self, hostport):
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    def close(self):
        self.sock.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            c = self.sock.recv(n - len(buf))
            if not c:
                raise EOFError("the broker closed the connection")
            buf += c
        return buf

    def calls(self, bodies, version=11):
        """[(error_code, session_id)] of each Fetch, in order."""
        out = []
        for i in range(0, len(bodies), 200):
            corrs = []
            msg = b""
            for body in bodies[i:i + 200]:
                self.corr += 1
                corrs.append(self.corr)
                m = struct.pack(">hhi", 1, version, self.corr) + _s("fse-raw")
                if version >= 12:
                    m += b"\x00"  # request header v2: no tagged fields
                m += body
                msg += struct.pack(">i", len(m)) + m
            self.sock.sendall(msg)
            for corr in corrs:
                size = struct.unpack(">i", self._recv(4))[0]
                r = kraw.Reader(self._recv(size))
                h.check(r.i32() == corr, "Fetch answers out of order")
                if version >= 12:
                    h.check(r.i8() == 0, "tagged fields in a Fetch answer's "
                            "header")
                r.i32()  # throttle
                out.append((r.i16(), r.i32()))
        return out

    def call(self, body):
        return self.calls([body])[0]


# ---- mirrord's side --------------------------------------------------------

def fetches(d, kind):
    return mt.metric_value(d, "mirrord_fetch_requests_total", mirror="m", result=kind)


def session_errors(d, name):
    return mt.metric_value(d, "mirrord_fetch_session_errors_total", mirror="m", error=name)


def sessions_opened(d):
    """[(session id, partitions)] from mirrord's log, oldest first."""
    return [(int(a), int(b)) for a, b in re.findall(
        r"Fetch session (\d+) opened \((\d+) partitions\)", d.log())]


def total_parts():
    return sum(LAYOUT.values())  # fewer than BIG_PARTS


def current_session(d, after=()):
    """mirrord's latest session, opened after those in after: (id,
    partitions when it opened; more join it later)."""
    def one():
        s = [x for x in sessions_opened(d) if x not in after]
        return s[-1] if s else None
    return h.wait_for(one, 120, "mirrord to open a Fetch session (opened so "
                      "far: %r)" % sessions_opened(d))


def ends(bootstrap):
    return mt.partition_ends(bootstrap, layout())


def every_partition_fetched(d, src, dst, what):
    """A record written now to every partition reaches the destination in
    every one: no partition fell out of mirrord's new session."""
    p = Producer({"bootstrap.servers": src.bootstrap, "acks": "all"})
    for t, n in LAYOUT.items():
        for part in range(n):
            p.produce(t, value=b"probe after %s" % what.encode(), partition=part)
    h.check(p.flush(60) == 0, "the probes were not written")
    want = ends(src.bootstrap)

    def caught_up():
        got = ends(dst.bootstrap)
        return all(got[tp] >= e for tp, e in want.items())
    h.wait_for(caught_up, 120, "after %s: every partition's probe on the "
               "destination (source ends %r, destination %r)"
               % (what, want, ends(dst.bootstrap)))


def error_lines(d, error):
    return [ln for ln in d.log().splitlines()
            if error in ln and "the next Fetch lists every partition" in ln]


def mark(d, error):
    """What recovered() compares with: the error's count, its log lines,
    the full Fetches."""
    return (session_errors(d, error), len(error_lines(d, error)),
            fetches(d, "full"))


def recovered(d, src, dst, error, before, what):
    """The session error was counted, logged by name, and followed by a
    full Fetch, incremental ones, and every partition still fetched."""
    count, nlines, full = before
    h.wait_for(lambda: session_errors(d, error) > count, 120,
               "%s: mirrord_fetch_session_errors_total{error=%s} to grow from "
               "%d" % (what, error, count))
    lines = error_lines(d, error)
    h.check(len(lines) > nlines, "%s: no new log line names %s" % (what, error))
    print("%s: %s" % (what, lines[-1].strip()), flush=True)
    h.wait_for(lambda: fetches(d, "full") > full, 60,
               "%s: a full Fetch after %s" % (what, error))
    inc = fetches(d, "incremental")
    h.wait_for(lambda: fetches(d, "incremental") >= inc + 10, 120,
               "%s: incremental Fetches again" % what)
    every_partition_fetched(d, src, dst, what)


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    dst, = h.real_kafka(1)
    src, = h.private_kafka(1, "plaintext", extra_props={
        "max.incremental.fetch.session.cache.slots": "8"})
    for t, n in LAYOUT.items():
        src.create_topic(t, partitions=n)
        dst.create_topic(t, partitions=n)
    src.create_topic(BIG, partitions=BIG_PARTS)

    writer = mt.LayoutWriter(src.bootstrap, layout())
    writer.start()
    d = mt.Mirrord(destination=dst.bootstrap)      # debug log: session ids
    d.create("m", {"bootstrap.servers": src.bootstrap,
                   "mirror.fetch.wait.max.ms": "100"})
    for t in sorted(LAYOUT):
        d.cli_ok("--add", "--mirror", "m", "--topic", t)
    h.wait_for(lambda: len(d.states("m")) == total_parts() and
               set(d.states("m").values()) == {"MIRRORING"}, 120,
               "every partition MIRRORING (now %r)" % d.states("m"))
    sid = current_session(d)
    h.wait_for(lambda: fetches(d, "incremental") >= 10, 60,
               "incremental Fetches in mirrord's session %r" % (sid,))
    broker = src.bootstrap.split(",")[0]

    # 1. Another fetcher moves the session's epoch on while mirrord sleeps.
    before = mark(d, "INVALID_FETCH_SESSION_EPOCH")
    top = int(fetches(d, "incremental")) + 50   # past any epoch of mirrord's
    raw = RawFetcher(broker)
    pid = d.proc.p.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        answers = raw.calls([fetch13_body(sid[0], e)
                             for e in range(1, top + 1)], version=13)
    finally:
        os.kill(pid, signal.SIGCONT)
    took = [e for e, (err, _s) in zip(range(1, top + 1), answers) if err == 0]
    h.check(took, "no epoch in 1..%d of session %d was taken (answers %r)"
            % (top, sid[0], sorted(set(a for a, _ in answers))))
    print("session %d (%d partitions): epochs %d..%d taken by another fetcher"
          % (sid[0], sid[1], took[0], took[-1]), flush=True)
    recovered(d, src, dst, "INVALID_FETCH_SESSION_EPOCH", before, "epoch taken")

    # 2. Another fetcher closes mirrord's session (a full Fetch naming it).
    sid2 = current_session(d, after=[sid])
    before = mark(d, "FETCH_SESSION_ID_NOT_FOUND")
    err, _ = raw.call(fetch_body(sid2[0], -1))
    h.check(err == 0, "the full Fetch closing session %d answered %d" % (sid2[0], err))
    recovered(d, src, dst, "FETCH_SESSION_ID_NOT_FOUND", before, "session closed")

    # 3. The broker evicts mirrord's session for a larger one.
    sid3 = current_session(d, after=[sid, sid2])
    opened = time.monotonic()
    print("waiting %d s: the broker evicts only sessions older than that"
          % (EVICTION_S + 5), flush=True)
    time.sleep(EVICTION_S + 5)
    h.check(current_session(d, after=[sid, sid2]) == sid3,
            "mirrord's session changed by itself during the wait")
    before = mark(d, "FETCH_SESSION_ID_NOT_FOUND")
    big = [(BIG, p) for p in range(BIG_PARTS)]
    mine, tries = 0, 0
    deadline = time.monotonic() + 120
    while session_errors(d, "FETCH_SESSION_ID_NOT_FOUND") == before[0]:
        if time.monotonic() > deadline:
            h.fail("mirrord's session %d (open %.0f s) was never evicted by %d "
                   "sessions of %d partitions" % (sid3[0], time.monotonic() - opened,
                                                  tries, BIG_PARTS))
        # A full Fetch naming our last session closes it and opens the next.
        err, mine = raw.call(fetch_body(mine, 0, big))
        h.check(err == 0, "the other fetcher's full Fetch answered %d" % err)
        tries += 1
        time.sleep(0.2)
    print("evicted after %d sessions of %d partitions opened by another fetcher"
          % (tries, BIG_PARTS), flush=True)
    raw.call(fetch_body(mine, -1))   # closes the other fetcher's session
    recovered(d, src, dst, "FETCH_SESSION_ID_NOT_FOUND", before, "session evicted")

    # 4. No room for a session: mirrord fetches without one, then opens one
    # again once there is room.
    sid4 = current_session(d, after=[sid, sid2, sid3])
    before = mark(d, "FETCH_SESSION_ID_NOT_FOUND")
    os.kill(pid, signal.SIGSTOP)
    try:
        err, _ = raw.call(fetch_body(sid4[0], -1))
        h.check(err == 0, "closing session %d answered %d" % (sid4[0], err))
        theirs = []
        for _ in range(64):
            err, got = raw.call(fetch_body(0, 0, big))
            if got:
                theirs.append(got)
            if len(theirs) == 8:
                break
        h.check(len(theirs) == 8, "the other fetcher opened %d sessions, not 8 "
                "(the whole cache)" % len(theirs))
    finally:
        os.kill(pid, signal.SIGCONT)
    recovered_from = fetches(d, "incremental")
    h.wait_for(lambda: session_errors(d, "FETCH_SESSION_ID_NOT_FOUND") > before[0],
               120, "no room: mirrord's Fetch in its closed session answered "
               "FETCH_SESSION_ID_NOT_FOUND")
    full = fetches(d, "full")
    h.wait_for(lambda: fetches(d, "full") >= full + 20, 120,
               "no room: Fetches without a session (full ones)")
    inc = fetches(d, "incremental")
    every_partition_fetched(d, src, dst, "no room for a session")
    h.check(fetches(d, "incremental") <= inc + 1 and
            sessions_opened(d)[-1] == sid4,
            "no room: mirrord opened a session in a full cache (incremental "
            "Fetches %d -> %d; sessions %r)" % (inc, fetches(d, "incremental"),
                                                sessions_opened(d)[-3:]))
    print("no room: %d full Fetches without a session, every partition fetched "
          "(incremental ones: %d before, %d now)"
          % (fetches(d, "full") - full, recovered_from, fetches(d, "incremental")),
          flush=True)
    for sid_ in theirs:
        raw.call(fetch_body(sid_, -1))
    raw.close()
    h.wait_for(lambda: fetches(d, "incremental") >= inc + 20, 120,
               "room again: mirrord asks again and its Fetches are incremental")
    current_session(d, after=[sid, sid2, sid3, sid4])
    every_partition_fetched(d, src, dst, "a session again")

    # Every record once, at the source's offsets; lag 0 everywhere.
    writer.stop()
    want = ends(src.bootstrap)
    h.wait_for(lambda: ends(dst.bootstrap) == want, 180,
               "the destination ends %r to be the source's %r"
               % (ends(dst.bootstrap), want))
    mt.check_same_records(src.bootstrap, dst.bootstrap, want, "fse-" + RUN)
    mt.wait_caught_up(d, "m", 60, "every partition MIRRORING with lag 0",
                      count=total_parts())
    print("%d records over %d partitions, equal; Fetches: %d full, %d "
          "incremental; session errors: %d epoch, %d not found"
          % (sum(want.values()), len(want), fetches(d, "full"),
             fetches(d, "incremental"),
             session_errors(d, "INVALID_FETCH_SESSION_EPOCH"),
             session_errors(d, "FETCH_SESSION_ID_NOT_FOUND")), flush=True)
    d.stop()
    print("PASS")


if __name__ == "__main__":
    main()
