#!/usr/bin/env python3
"""Torture test of mirrord's data plane on real Apache Kafka 4.4.0, with a
checker.  `make torture` runs it for TORTURE_SECONDS (default
480); test/kafka/test_torture_kafka.py runs a short seeded round in `make check`.

Two private single-node clusters (this test restarts their brokers), the
real daemon/mirrord and kafka-mirrors, confluent-kafka clients.  Load, all
the time, on one mirror:

  idem    3 partitions, idempotent producers (codecs none, gzip, lz4, zstd)
  txn     2 partitions, two transactional producers, about 40% of their
          transactions aborted (flush() before abort_transaction(): see
          HACKING.md on librdkafka 2.0.2)
  cmp     1 partition, cleanup.policy=compact, 64 keys rewritten, some
          tombstones
  del     2 partitions, idempotent; the target of DeleteRecords
  tv-*    one-partition victim topics, idempotent, light load; each takes
          at most one destructive fault

Faults, on a schedule drawn from TORTURE_SEED (printed at the start; the
schedule, the choices and the record contents replay, the interleaving with
the brokers does not), among the classes of TORTURE_FAULTS (comma list,
default all of them):

  kill          kill -9 of mirrord, started again
  stop          SIGSTOP of mirrord for 1-6 s, then SIGCONT
  src-restart   the source broker stopped and started again
  dst-restart   the destination broker stopped and started again
  foreign       1-10 records written by someone else into a mirrored
                destination partition (a victim)
  src-recreate  a source topic (a victim) deleted and created again, load
                going on into the new topic
  dst-recreate  a destination topic (a victim) deleted and created again
  delete-records  mirrord held by SIGSTOP while the load goes on, then
                DeleteRecords on the source partitions of `del` up to a
                batch boundary among the last 60 offsets (data mirrord has
                not copied), then SIGCONT
  delete-records-mid  the same up to an offset inside a batch (mirrord
                records the jump over the deleted part of the batch)
  deny          a DENY ACL on READ and DESCRIBE of one of idem, txn, cmp,
                del for mirrord's source principal, 2-8 s (the source runs
                with ACLs and SASL when this class is on; the test's own
                clients use its PLAINTEXT admin listener as a super user)

TORTURE_VICTIMS victim topics per destructive class (default one per 120 s
of faults), TORTURE_RATE multiplies the load (default 1),
TORTURE_COMPACTED=0 leaves the compacted topic out.  TORTURE_TXN_RATE paces
the transactional producers to that many transactions a second in all (0,
the default of one instance: each as fast as it goes with a pause of up to
0.1 s), TORTURE_TXN_PRODUCERS says how many there are, and TORTURE_TXN_LOAD
which: python (the default of one instance: confluent-kafka producers in
this process) or c (the default of the group mode: test/bench/txnload, C
librdkafka producers, which reach hundreds of transactions a second; its
records carry an id header, and their values say whether their transaction
was aborted, which the checker reads).

The group mode (TORTURE_GROUP=N, N >= 2; `make torture-group` is
TORTURE_GROUP=3) runs N instances a, b, c, ... instead of one: cluster.enabled,
one group, the replicated metadata log (storage.backend: kafka) in a topic
of the destination cluster, a session timeout of 6 s, each its own
cluster.local_broker_id naming no broker (the one destination broker
advertises this host to all of them), so that the partitions are shared by
the assignment's balance.  The same load, but txn has 6 partitions and by
default 48 producers of test/bench/txnload aiming at 300 transactions a
second in all, about 30% aborted.  Every instance that exits by itself is started again, as the
unit's Restart=on-failure would (status 75, the replicated log broke, is
expected after a destination broker restart; any other status is a
problem).  The faults kill and stop hit a random instance (its role,
writer or follower, and how many partitions it copied are logged);
delete-records holds every instance; and one more class:

  handoff       an instance that copies partitions SIGSTOPped (or killed -9)
                until the partitions it copied have other owners (past the
                6 s session timeout), then SIGCONT (or started again): the
                deposed owner resumes with whatever it had in flight

The status checks and the settling ask DescribeMirrors of any live
instance (a random one each time); once settled, every instance's answer
must show the same.  The checker reads the translation maps from the
metadata log's topic (xlate_dump -k, as a follower reads it) once every
instance is stopped (each must exit 0).

Then the load stops, and every partition must settle: a victim in FAILED
(or STOPPED for a deleted source topic) with the reason its fault calls for,
every other partition MIRRORING with lag 0 at the source's end.  The
checker reads every partition of both clusters with read_committed and
proves, per partition, against the source and the producers' ledger of
acknowledged records:

  * every committed source record is at the destination exactly once, in
    order, at its translated offset (the source offset, shifted only across
    a range DeleteRecords removed before mirrord copied it), byte-equal in
    key, value, headers and timestamp (lost, duplicated, corrupted);
  * no record of an aborted transaction is visible (aborted visible);
  * nothing else is there but the foreign writes (corrupted);
  * records the source no longer has (compacted, deleted by DeleteRecords,
    the old incarnation of a recreated topic) may be absent, but if present
    they obey the same rules; a compacted record may also be absent when
    the destination holds a later record with its key (its own cleaner);
  * a partition FAILED as expected may miss records (nothing after its
    fault is owed), everything else holds for it too; a recreated source
    topic's new records must never reach the destination.

It ends with one line
  torture: F faults, N records checked, 0 lost, 0 duplicated,
  0 corrupted, 0 aborted visible, P partitions FAILED as expected
(after a line with the transaction rate the load achieved)
and fails if any count but the last is not 0 (a record whose delivery the
producer reported failed, that the source no longer holds but the
destination does, is "uncertain": compared byte for byte, its offset not
checked), a partition FAILED or
STOPPED for a reason its faults do not explain, or one never settled; in
the group mode also if an instance exited by itself with a status other
than 75, a handoff's partitions never moved, or the instances' answers
disagree once settled.
"""

import bisect
import collections
import json
import shutil
import subprocess
import os
import random
import re
import signal
import struct
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import (Consumer, KafkaException, Producer,
                                 TopicPartition)
    from confluent_kafka.admin import AdminClient
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

ALL_FAULTS = ["kill", "stop", "src-restart", "dst-restart", "foreign",
              "src-recreate", "dst-recreate", "delete-records",
              "delete-records-mid", "deny", "handoff"]
# Only with several instances.
GROUP_FAULTS = {"handoff"}
# The classes a run draws from unless TORTURE_FAULTS says otherwise.
DEFAULT_FAULTS = [k for k in ALL_FAULTS if k not in GROUP_FAULTS]
WEIGHTS = {"kill": 3, "stop": 3, "src-restart": 1, "dst-restart": 1,
           "foreign": 1, "src-recreate": 1, "dst-recreate": 1,
           "delete-records": 2, "delete-records-mid": 2, "deny": 2,
           "handoff": 2}
# Victim topics per destructive class (each takes one fault).
VICTIM_CLASSES = {"foreign": "fw", "src-recreate": "sr", "dst-recreate": "dr"}
MIRROR = "t"
SETTLE_SECONDS = 240
# The group mode: the metadata log's topic, the group, its session timeout.
META = "torture-meta"
GROUP_ID = "torture-group"
SESSION_MS = 6000
# mirrord's exit status asking for a restart (the replicated log broke).
EXIT_RESTART = 75


def log(msg):
    print("torture %7.1fs: %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


# ------------------------------------------------------------------ records

class Rec:
    """One record as a client sees it: what is compared byte for byte."""
    __slots__ = ("key", "value", "headers", "ts")

    def __init__(self, key, value, headers, ts):
        self.key, self.value, self.headers, self.ts = key, value, headers, ts

    def same(self, o):
        return (self.key == o.key and self.value == o.value and
                (self.headers or []) == (o.headers or []) and self.ts == o.ts)

    def rid(self):
        for k, v in self.headers or []:
            if k == "id":
                return v
        return None

    def foreign(self):
        return any(k == "foreign" for k, _ in self.headers or [])


def msg_rec(m):
    return Rec(m.key(), m.value(), m.headers(), m.timestamp()[1])


class Ledger:
    """Records the source acknowledged, by (topic, incarnation, partition)
    and offset: the truth for what the source no longer holds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.recs = collections.defaultdict(dict)
        # Records whose delivery failed (a fatal producer error after a
        # broker restart): maybe in the log, offset unknown, by id.
        self.uncertain = {}

    def add(self, tip, offset, rec):
        with self.lock:
            self.recs[tip][offset] = rec


class Writer(threading.Thread):
    """An idempotent producer writing records to its partitions at a rate,
    each with a unique id header; pausable per topic (to recreate one)."""

    def __init__(self, name, bootstrap, parts, rate, rnd, ledger,
                 compression="none", keys=None):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.parts, self.rate = bootstrap, list(parts), rate
        self.rnd, self.ledger, self.keys = rnd, ledger, keys
        self.compression = compression
        self.inc = collections.defaultdict(int)     # topic -> incarnation
        self.paused = set()
        self.cv = threading.Condition()
        self.quit = False
        self.seq = 0
        self.sent = 0
        self.errors = collections.Counter()
        self.p = self._producer()

    def _producer(self):
        return Producer({"bootstrap.servers": self.bootstrap,
                         "enable.idempotence": True, "acks": "all",
                         "linger.ms": 20, "compression.type": self.compression,
                         "message.timeout.ms": 600000,
                         "queue.buffering.max.messages": 200000})

    def pause(self, topic):
        """Stop writing to topic; returns once its records are delivered."""
        with self.cv:
            self.paused.add(topic)
        self.p.flush(120)

    def resume(self, topic, new_incarnation=False):
        with self.cv:
            if new_incarnation:
                self.inc[topic] += 1
            self.paused.discard(topic)

    def record(self, topic, part):
        self.seq += 1
        rid = ("%s/%d/%d/%s/%d" % (topic, self.inc[topic], part, self.name,
                                   self.seq)).encode()
        n = self.rnd.randrange(0, 160)
        if self.keys is not None:
            key = b"key-%02d" % self.rnd.randrange(self.keys)
            value = None if self.rnd.random() < 0.03 else \
                rid + b":" + self.rnd.randbytes(n)
        else:
            key = None if self.rnd.random() < 0.2 else b"k%d" % self.seq
            value = rid + b":" + self.rnd.randbytes(n)
        headers = [("id", rid)]
        if self.rnd.random() < 0.3:
            headers.append(("h", self.rnd.randbytes(self.rnd.randrange(0, 20))))
        return Rec(key, value, headers, int(time.time() * 1000))

    def renew(self, e):
        """librdkafka 2.0.2's idempotent producer can go fatal after a
        broker restart (a "rewound sequence number"): fail what it still
        holds (their delivery reports make them uncertain) and carry on
        with a new one."""
        self.errors["fatal: %s" % e.args[0].code()] += 1
        log("%s: producer fatal, starting a new one: %s" % (self.name, e))
        old, self.p = self.p, self._producer()
        try:
            old.flush(30)
        except KafkaException:
            pass

    def run(self):
        tick = 0.05
        per_tick = max(1, int(self.rate * tick))
        while True:
            with self.cv:
                if self.quit:
                    break
                live = [tp for tp in self.parts if tp[0] not in self.paused]
                inc = collections.defaultdict(int, self.inc)
            for _ in range(per_tick):
                if not live:
                    break
                topic, part = live[self.rnd.randrange(len(live))]
                rec = self.record(topic, part)
                tip = (topic, inc[topic], part)

                if self.ledger is None:
                    def done(err, _m):
                        if err is not None:
                            self.errors[str(err)] += 1
                else:
                    def done(err, m, rec=rec, tip=tip):
                        if err is not None:
                            self.errors[str(err)] += 1
                            with self.ledger.lock:
                                self.ledger.uncertain[rec.rid()] = rec
                            return
                        self.ledger.add(tip, m.offset(), rec)
                try:
                    self.p.produce(topic, partition=part, key=rec.key,
                                   value=rec.value, headers=rec.headers,
                                   timestamp=rec.ts, on_delivery=done)
                    self.sent += 1
                except BufferError:
                    break
                except KafkaException as e:
                    self.renew(e)
                    break
            # poll() returns as soon as it served a callback: pace by the
            # clock, or the rate is whatever the brokers take.
            t_end = time.monotonic() + tick
            while True:
                left = t_end - time.monotonic()
                if left <= 0:
                    break
                try:
                    self.p.poll(left)
                except KafkaException as e:
                    self.renew(e)
        left = self.p.flush(300)
        if left:
            self.errors["%d records never delivered" % left] += 1


class TxnWriter(threading.Thread):
    """A transactional producer: transactions of 1-40 records over the txn
    topic's partitions, a fraction abort_frac of them aborted; the ids of
    aborted records are kept (none may be visible at the destination).
    With an interval, one transaction begins every interval seconds
    (staggered by offset; more than a second behind, the backlog is
    dropped), else one after the other with a pause of up to 0.1 s."""

    def __init__(self, name, bootstrap, topic, nparts, rnd, aborted,
                 abort_frac=0.4, interval=0.0, offset=0.0):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.nparts = bootstrap, topic, nparts
        self.rnd, self.aborted = rnd, aborted
        self.abort_frac, self.interval, self.offset = abort_frac, interval, offset
        self.quit = False
        self.seq = 0
        self.commits = self.aborts = self.broken = 0
        self.p = None

    def _new(self):
        if self.p is not None:
            try:
                self.p.flush(1)
            except Exception:  # noqa: BLE001 -- a broken producer
                pass
        self.p = Producer({"bootstrap.servers": self.bootstrap,
                           "transactional.id": "torture-%s" % self.name,
                           "transaction.timeout.ms": 30000,
                           "linger.ms": 5, "acks": "all",
                           "compression.type": "lz4"})
        deadline = time.monotonic() + 300
        while True:
            try:
                self.p.init_transactions(30)
                return
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise
                log("%s: init_transactions: %s (retrying)" % (self.name, e))
                time.sleep(1)

    def one(self):
        ids = []
        self.p.begin_transaction()
        for _ in range(self.rnd.randrange(1, 41)):
            self.seq += 1
            part = self.rnd.randrange(self.nparts)
            rid = ("%s/0/%d/%s/%d" % (self.topic, part, self.name,
                                      self.seq)).encode()
            ids.append(rid)
            self.p.produce(self.topic, partition=part, key=b"t%d" % self.seq,
                           value=rid + b":" + self.rnd.randbytes(
                               self.rnd.randrange(0, 120)),
                           headers=[("id", rid)],
                           timestamp=int(time.time() * 1000))
        abort = self.rnd.random() < self.abort_frac
        left = self.p.flush(60)
        if left:
            raise KafkaException("%d records not flushed" % left)
        if abort:
            self.aborted.update(ids)
            self.p.abort_transaction(60)
            self.aborts += 1
        else:
            self.p.commit_transaction(60)
            self.commits += 1

    def run(self):
        self._new()
        due = time.monotonic() + self.offset
        while not self.quit:
            if self.interval:
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                elif now - due > 1:
                    due = now
                due += self.interval
            try:
                self.one()
            except KafkaException as e:
                # A broker restart: start over with a new producer (the
                # coordinator aborts what the old one left open).
                self.broken += 1
                log("%s: transaction broken: %s" % (self.name, e))
                try:
                    self._new()
                except KafkaException as e2:
                    log("%s: giving up: %s" % (self.name, e2))
                    return
            if not self.interval:
                time.sleep(self.rnd.random() * 0.1)



class CTxnLoad:
    """The transactional load of the group mode by default: test/bench/txnload
    (C, librdkafka), producers transactions of 1-40 records over 1-6 of the
    txn topic's partitions, a fraction abort_frac aborted, paced to rate in
    all.  Each record carries a header id "torture-c/<key>" and its value
    says "abort" or "commit"; a producer broken by a broker restart starts
    again under its transactional id (-R).  The interface of TxnWriter that
    the run uses: start(), quit, join(), is_alive(), name and the counts."""

    PREFIX = "torture-c"

    def __init__(self, bootstrap, topic, nparts, rate, producers, seed,
                 abort_frac):
        self.name = "txnload"
        self.argv = [h.build_path("test", "bench", "txnload"), "-b", bootstrap,
                     "-t", topic, "-p", str(nparts), "-r", "%g" % rate,
                     "-d", "1000000", "-n", "1-40", "-P", "1-6",
                     "-a", "%g" % abort_frac, "-s", "64", "-i", str(producers),
                     "-S", str(seed), "-x", self.PREFIX, "-I", "-R"]
        self.proc = None
        self.quit = False
        self.commits = self.aborts = self.broken = 0

    def lines(self):
        return [json.loads(x) for x in self.proc.output().splitlines()
                if x.startswith("{")]

    def start(self):
        self.proc = h.Proc(self.argv, name="txnload")
        h.wait_for(lambda: self.lines() or not self.proc.alive(), 300,
                   "txnload to start (log %s)" % self.proc.log_path,
                   interval=0.2)
        st = (self.lines() or [{}])[0]
        h.check(st.get("started") and st.get("ready") == st.get("producers"),
                "txnload did not start: %s (log %s)"
                % (st or "exited", self.proc.log_path))

    def join(self, timeout):
        """Stops it (SIGTERM: every producer ends its transaction) and
        reads its counts."""
        rc = self.proc.stop(timeout)
        end = [x for x in self.lines() if "transactions_committed" in x]
        h.check(end, "txnload ended without its counts (status %s, log %s)"
                % (rc, self.proc.log_path))
        self.commits = end[-1]["transactions_committed"]
        self.aborts = end[-1]["transactions_aborted"]
        self.broken = end[-1].get("restarts", 0)
        h.check(rc == 0, "txnload exited %s: %d producers failed for good "
                "(log %s)" % (rc, end[-1]["errors"], self.proc.log_path))

    def is_alive(self):
        return self.proc is not None and self.proc.alive()

    @classmethod
    def aborted(cls, rec):
        """1 if rec is a record of an aborted transaction of this load."""
        rid = rec.rid()
        return (rid is not None and rid.startswith(cls.PREFIX.encode() + b"/")
                and rec.value is not None and b" abort " in rec.value[:100])


# ------------------------------------------------------------------ helpers

def delete_records(cl, topic, offsets):
    """DeleteRecords v1 on the (single) broker: {partition: offset};
    returns {partition: (low watermark, error)}."""
    rk = h.realkafka()
    body = struct.pack(">i", 1) + rk._str(topic) + struct.pack(">i", len(offsets))
    for p, o in sorted(offsets.items()):
        body += struct.pack(">iq", p, o)
    body += struct.pack(">i", 30000)
    w = rk.Wire("127.0.0.1", cl.admin_port, timeout=40)
    try:
        r = w.request(21, 1, body)
        r.i32()
        out = {}
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                p = r.i32()
                low = r.take(">q")
                out[p] = (low, r.i16())
        return out
    finally:
        w.close()


def acls(cl, api, entries, principal="User:alice"):
    """CreateAcls (api 30) or DeleteAcls (31), v1, of (topic, operation,
    permission type) entries for principal, literal topic names, any host;
    raises on an error."""
    rk = h.realkafka()
    body = struct.pack(">i", len(entries))
    for topic, op, perm in entries:
        body += struct.pack(">b", 2) + rk._str(topic) + struct.pack(">b", 3) + \
            rk._str(principal) + rk._str("*") + struct.pack(">bb", op, perm)
    w = rk.Wire("127.0.0.1", cl.admin_port, timeout=30)
    try:
        r = w.request(api, 1, body)
        r.i32()
        for _ in range(r.i32()):
            err, msg = r.i16(), r.string()
            if err:
                raise AssertionError("%s: error %d: %s" % (
                    "CreateAcls" if api == 30 else "DeleteAcls", err, msg))
            if api == 31:
                for _ in range(r.i32()):
                    r.i16(), r.string(), r.i8(), r.string(), r.i8()
                    r.string(), r.string(), r.i8(), r.i8()
    finally:
        w.close()


def translate(anchors, s):
    """The destination offset of source offset s by a translation map
    (lib/metadata/xlate.h's rules, an implicit anchor (0, 0) first), None for a
    hole."""
    a = [(0, 0)] + anchors
    i = bisect.bisect_right([x[0] for x in a], s) - 1
    src, dst = a[i]
    if i + 1 < len(a):
        nsrc, ndst = a[i + 1]
        if s - src >= min(nsrc - src, ndst - dst):
            return None
    return dst + s - src


def offsets(bootstrap, topic, part):
    c = kraw.Cluster(bootstrap)
    try:
        return c.offsets(topic, part)
    finally:
        c.close()


def read_all(bootstrap, topic, part, what):
    """[(offset, Rec)] of a partition, read_committed, to its end."""
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": "torture-check", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "check.crcs": True,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "fetch.message.max.bytes": 4 << 20})
    c.assign([TopicPartition(topic, part, -2)])   # OFFSET_BEGINNING
    out = []
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            for m in c.consume(2000, 0.5):
                if m.error():
                    if m.error().code() == -191:   # _PARTITION_EOF
                        return out
                    raise AssertionError("reading %s %s-%d: %s"
                                         % (what, topic, part, m.error()))
                out.append((m.offset(), msg_rec(m)))
        raise AssertionError("reading %s %s-%d did not reach the end"
                             % (what, topic, part))
    finally:
        c.close()


def delete_topic(cl, topic):
    adm = AdminClient({"bootstrap.servers": cl.admin_bootstrap})
    for f in adm.delete_topics([topic], operation_timeout=30).values():
        f.result(60)
    h.wait_for(lambda: topic not in cl.metadata([topic])["topics"] or
               cl.metadata([topic])["topics"][topic]["error"] != 0, 60,
               "%s to be gone from %s" % (topic, cl.name))


def recreate_topic(cl, topic, partitions=1):
    delete_topic(cl, topic)
    deadline = time.monotonic() + 60
    while True:
        try:
            cl.create_topic(topic, partitions)
            return
        except h.realkafka().KafkaError as e:
            if "TOPIC_ALREADY_EXISTS" in str(e) and time.monotonic() < deadline:
                time.sleep(0.3)
                continue
            raise


def restart_broker(cl):
    cl.stop()
    cl.launch()
    cl.wait_ready(time.monotonic() + 180)


# ------------------------------------------------------------------ the run

class Torture:
    def __init__(self, seconds, seed, faults, victims, rate, compacted=True,
                 group=0, txn_rate=0.0, txn_producers=2, txn_load="python"):
        self.seconds, self.seed, self.kinds = seconds, seed, faults
        self.txn_load = txn_load
        self.rate, self.compacted = rate, compacted
        self.group = group
        self.txn_rate, self.txn_producers = txn_rate, txn_producers
        self.rnd = random.Random(seed)
        # For the instance asked (not seeded: how often it is drawn
        # depends on timing, and must not move the schedule).
        self.qrnd = random.Random()
        self.problems = []                    # of the group mode, for the end
        self.restarts = collections.Counter()  # exit status -> restarts
        self.nvictims = victims
        self.ledger = Ledger()
        self.aborted = set()
        self.faults = []                      # (t, kind, detail)
        self.expect = {}                      # (topic, part) -> (kind, [regex], states)
        self.deletions = collections.defaultdict(list)   # (topic, part) -> [low watermark]
        self.recreated_src = set()            # topics whose source was recreated
        self.victims = {cls: ["tv-%s-%d" % (cls, i) for i in range(victims)]
                        for cls in VICTIM_CLASSES.values()}
        self.free = {cls: list(v) for cls, v in self.victims.items()}

    # -- set-up

    def start(self):
        acl = "deny" in self.kinds
        self.src, self.dst = h.private_kafka(
            2, ["acl", "plaintext"] if acl else "plaintext")
        # The test's own clients use the source's PLAINTEXT listener (a
        # super user under ACLs); mirrord alone is subject to the ACLs.
        SRC = self.src_boot = self.src.admin_bootstrap if acl else self.src.bootstrap
        src_client = {"bootstrap.servers": self.src.bootstrap}
        if acl:
            src_client = self.src.client_config(user="alice")
            self.src.grant("User:alice", ["ALL"], topic="*")
            self.src.grant("User:alice", ["DESCRIBE", "DESCRIBE_CONFIGS"],
                           cluster=True)
        self.topics = {"idem": 3, "txn": 6 if self.group else 2, "cmp": 1,
                       "del": 2}
        if not self.compacted:
            del self.topics["cmp"]
        for cls in self.victims.values():
            for t in cls:
                self.topics[t] = 1
        for t, n in self.topics.items():
            if t == "cmp":
                self.src.create_compacted_topic(t, n, segment_ms=3000,
                                                delete_retention_ms=2000)
            else:
                self.src.create_topic(t, n)
        if self.group:
            self.ds = [self.instance(chr(ord("a") + i), i)
                       for i in range(self.group)]
            for d in self.ds:
                d.start()
            h.wait_for(self.one_writer, 120, "one writer among %s"
                       % ", ".join(d.name for d in self.ds))
        else:
            self.ds = [mt.Mirrord(destination=self.dst.bootstrap,
                                  log_level="info")]
        self.d = self.ds[0]
        self.d.create(MIRROR, dict(src_client, **{
            "mirror.fetch.wait.max.ms": "200",
            "mirror.failed.retry.initial.backoff.ms": "200",
            "mirror.failed.retry.max.backoff.ms": "2000",
            "mirror.failed.retry.max.attempts": "32767",
            "mirror.metadata.refresh.interval.ms": "2000"}))
        self.d.cli_ok("--add", "--mirror", MIRROR, "--topic",
                      ",".join(sorted(self.topics)))
        r = self.rnd
        rate = self.rate
        vparts = [(t, 0) for cls in self.victims.values() for t in cls]
        self.writers = [
            Writer("idem-a", SRC, [("idem", p) for p in range(3)], 600 * rate,
                   random.Random(r.random()), None, "none"),
            Writer("idem-b", SRC, [("idem", p) for p in range(3)], 400 * rate,
                   random.Random(r.random()), None, "zstd"),
            Writer("idem-c", SRC, [("idem", 0)], 200 * rate,
                   random.Random(r.random()), None, "gzip"),
            Writer("del", SRC, [("del", 0), ("del", 1)], 300 * rate,
                   random.Random(r.random()), self.ledger, "snappy"),
            Writer("vic", SRC, vparts, 20 * len(vparts),
                   random.Random(r.random()), self.ledger, "none"),
        ]
        self.vic = self.writers[-1]
        cmp_rnd = random.Random(r.random())
        if self.compacted:
            self.writers.append(Writer("cmp", SRC, [("cmp", 0)], 200 * rate,
                                       cmp_rnd, self.ledger, "lz4", keys=64))
        n = self.txn_producers
        interval = n / self.txn_rate if self.txn_rate > 0 else 0.0
        if self.txn_load == "c":
            self.txns = [CTxnLoad(SRC, "txn", self.topics["txn"],
                                  self.txn_rate, n, r.randrange(1 << 30),
                                  0.3 if self.group else 0.4)]
        else:
            self.txns = [TxnWriter("txn-%d" % i, SRC, "txn", self.topics["txn"],
                               random.Random(r.random()), self.aborted,
                               abort_frac=0.3 if self.group else 0.4,
                               interval=interval, offset=interval * i / n)
                         for i in range(n)]
        # Only the topics whose source may lose records need the ledger.
        self.ledgered = {"cmp", "del"} | {t for t, _ in vparts}
        self.load_t0 = time.monotonic()
        for w in self.writers + self.txns:
            w.start()
        h.wait_for(lambda: self.all_state("MIRRORING"), 120,
                   "every partition to be MIRRORING (logs %s)"
                   % ", ".join(d.proc.log_path for d in self.ds))
        log("set-up done: %d topics, %d partitions MIRRORING%s"
            % (len(self.topics), sum(self.topics.values()),
               "" if not self.group else ", copied by %s" % ", ".join(
                   "%s (%s) %d" % (d.name, self.role(d), self.owned(d))
                   for d in self.ds)))

    # -- the instances of the group mode

    def instance(self, name, i):
        """Instance name of the group: its own local broker id, naming no
        broker (the one destination broker advertises this host to every
        instance, which would make it local to all of them and give it
        every partition)."""
        return mt.Mirrord(
            destination=self.dst.bootstrap, name=name, start=False,
            log_level="info",
            storage_kafka={"secret_key_file": os.path.join(h.test_dir(),
                                                           "secret.key"),
                           "topic": META, "timeout_ms": 10000},
            extra_yaml=("cluster:\n"
                        "  enabled: true\n"
                        "  group_id: \"%s\"\n"
                        "  instance_id: \"%s\"\n"
                        "  local_broker_id: %d\n"
                        "  session_timeout_ms: %d\n"
                        "  heartbeat_interval_ms: 1000\n"
                        "  status_interval_ms: 1000\n"
                        % (GROUP_ID, name, 101 + i, SESSION_MS)))

    @staticmethod
    def metric(d, pattern):
        try:
            m = d.metrics()
        except Exception:  # noqa: BLE001 -- stopped, or not up yet
            return None
        return re.search(pattern, m, re.M)

    def role(self, d):
        """writer, follower or joining from d's metrics; "single" for the
        one instance; None if it does not answer."""
        if not self.group:
            return "single"
        for r in ("writer", "follower", "joining"):
            if self.metric(d, r'^mirrord_cluster_role\{role="%s"\} 1$' % r):
                return r
        return None

    def owned(self, d):
        """How many partitions d copies (its metrics), -1 if unknown."""
        m = self.metric(d, r"^mirrord_cluster_owned_partitions (\d+)")
        return int(m.group(1)) if m else -1

    def one_writer(self):
        live = self.live()
        roles = [self.role(d) for d in live]
        return len(live) == len(self.ds) and roles.count("writer") == 1 and \
            all(r in ("writer", "follower") for r in roles)

    def owners(self):
        """{(topic, partition): instance} from the newest part-owner line
        of the instances' logs (each logs the records it applies live)."""
        lines = []
        for d in self.ds:
            lines += re.findall(r"^(\S+) .* %s/(\S+)-(\d+): owner \S+ -> "
                                r"(\S+) \(generation" % MIRROR, d.log(), re.M)
        out = {}
        for _, t, p, who in sorted(lines):
            out[(t, int(p))] = who
        return out

    def live(self):
        return [d for d in self.ds if d.proc is not None and d.proc.alive()]

    def supervise(self):
        """Starts again every instance that exited by itself, as the
        unit's Restart=on-failure would; an exit status other than 75 is
        a problem."""
        for d in self.ds:
            if d.proc is None or d.proc.alive():
                continue
            rc = d.proc.p.returncode
            self.restarts[rc] += 1
            if rc != EXIT_RESTART:
                self.problems.append("instance %s exited by itself with "
                                     "status %s (log %s)"
                                     % (d.name, rc, d.proc.log_path))
            log("instance %s exited by itself with status %s%s: starting it "
                "again" % (d.name, rc, " (the metadata log broke)"
                           if rc == EXIT_RESTART else ""))
            try:
                d.start()
            except AssertionError as e:
                log("instance %s: %s" % (d.name, str(e)[:300]))

    def describe(self, d):
        r = d.cli("--describe", "--json", "--mirror", MIRROR, timeout=60)
        if r.returncode != 0:
            raise AssertionError("DescribeMirrors of %s: exit %d: %s" % (
                d.name, r.returncode, r.stderr.strip()[-300:]))
        return {(x["topic"], x["partition"]): x for x in json.loads(r.stdout)}

    def rows(self):
        """DescribeMirrors of the mirror from a live instance, a random
        one in the group mode (the next one if it does not answer)."""
        ds = self.live()
        self.qrnd.shuffle(ds)
        why = "no instance is running"
        for d in ds:
            try:
                return self.describe(d)
            except (AssertionError, subprocess.TimeoutExpired, ValueError) as e:
                why = str(e)
        raise AssertionError(why)

    def all_state(self, state):
        rows = self.rows()
        return len(rows) == sum(self.topics.values()) and \
            all(x["state"] == state for x in rows.values())

    # -- faults

    def victim(self):
        """A random instance and what it is, "instance b (writer, 7
        partitions)", or mirrord itself (no draw: a seed's schedule
        stays what it was before the group mode)."""
        if not self.group:
            return self.d, "mirrord"
        return self.victim_named(self.rnd.choice(self.ds))

    def handoff(self, r):
        """An instance that copies partitions held (SIGSTOP, or killed)
        until they have other owners, then let go (SIGCONT, or started
        again)."""
        # One draw whatever the instances copy now (the seed's schedule).
        x, kill = r.random(), r.random() < 0.3
        ds = [d for d in self.ds if self.owned(d) > 0] or self.ds
        d, what = self.victim_named(ds[int(x * len(ds))])
        before = self.owners()
        mine = sorted(k for k, who in before.items() if who == d.name)
        t0 = time.monotonic()
        if kill:
            d.kill9()
        else:
            d.proc.signal(signal.SIGSTOP)
        try:
            def moved():
                now = self.owners()
                return all(now.get(k) not in (None, d.name) for k in mine)
            try:
                h.wait_for(moved, SESSION_MS / 1000 + 60, "the partitions of "
                           "%s to move" % d.name, interval=1)
                took = "its %d partitions moved in %.1f s" % (
                    len(mine), time.monotonic() - t0)
            except AssertionError:
                now = self.owners()
                left = [k for k in mine if now.get(k) in (None, d.name)]
                self.problems.append(
                    "handoff: %d partitions of instance %s had no other "
                    "owner %.0f s after it was %s: %s" % (
                        len(left), d.name, time.monotonic() - t0,
                        "killed" if kill else "stopped",
                        ", ".join("%s-%d" % k for k in left[:10])))
                took = "its partitions did NOT move"
            time.sleep(r.uniform(0, 2))
        finally:
            if kill:
                d.start()
            else:
                d.proc.signal(signal.SIGCONT)
        return "%s %s until its partitions moved (%s), then %s" % (
            what, "killed (-9)" if kill else "SIGSTOPped", took,
            "started again" if kill else "SIGCONT")

    def victim_named(self, d):
        return d, "instance %s (%s, %d partitions)" % (d.name, self.role(d),
                                                       self.owned(d))

    def fault(self, kind):
        r, d = self.rnd, self.d
        if kind == "kill":
            d, what = self.victim()
            d.kill9()
            time.sleep(r.uniform(0, 2))
            d.start()
            return "%s killed (-9) and started again" % what
        if kind == "stop":
            d, what = self.victim()
            secs = r.uniform(1, 6)
            d.proc.signal(signal.SIGSTOP)
            time.sleep(secs)
            d.proc.signal(signal.SIGCONT)
            return "%s SIGSTOPped for %.1f s" % (what, secs)
        if kind == "handoff":
            return self.handoff(r)
        if kind in ("src-restart", "dst-restart"):
            cl = self.src if kind == "src-restart" else self.dst
            t0 = time.monotonic()
            cl.stop()
            time.sleep(r.uniform(0, 3))
            cl.launch()
            cl.wait_ready(time.monotonic() + 180)
            return "%s broker down and up again in %.1f s" % (
                "source" if cl is self.src else "destination",
                time.monotonic() - t0)
        if kind == "foreign":
            t = self.free["fw"].pop(0)
            n = r.randint(1, 10)
            p = Producer({"bootstrap.servers": self.dst.bootstrap,
                          "acks": "all", "linger.ms": 5})
            for i in range(n):
                p.produce(t, partition=0, key=b"intruder-%d" % i,
                          value=r.randbytes(r.randrange(1, 50)),
                          headers=[("foreign", b"1")])
            left = p.flush(60)
            h.check(left == 0, "foreign write to %s: %d not delivered" % (t, left))
            self.expect[(t, 0)] = ("foreign", [r"^foreign write: destination offsets \d+\.\.\d+"],
                                   ("FAILED",))
            return "%d foreign records written to destination %s-0" % (n, t)
        if kind == "src-recreate":
            t = self.free["sr"].pop(0)
            self.vic.pause(t)
            # Expected from the moment the topic goes.
            self.expect[(t, 0)] = ("src-recreate", [
                r"^source topic %s was deleted and recreated \(topic id" % t,
                r"^the source topic %s was deleted on the source " % t],
                ("FAILED", "STOPPING", "STOPPED"))
            self.recreated_src.add(t)
            recreate_topic(self.src, t)
            self.vic.resume(t, new_incarnation=True)
            return "source topic %s deleted and created again" % t
        if kind == "dst-recreate":
            t = self.free["dr"].pop(0)
            self.expect[(t, 0)] = ("dst-recreate", [
                r"^destination topic %s was deleted" % t,
                r"^destination truncated: "], ("FAILED",))
            recreate_topic(self.dst, t)
            return "destination topic %s deleted and created again" % t
        if kind == "deny":
            t = r.choice(sorted(set(self.topics) & {"idem", "txn", "cmp", "del"}))
            secs = r.uniform(2, 8)
            acls(self.src, 30, [(t, op, 2) for op in (3, 8)])    # DENY READ, DESCRIBE
            try:
                time.sleep(secs)
            finally:
                acls(self.src, 31, [(t, op, 2) for op in (3, 8)])
            return "mirrord's source principal denied READ and DESCRIBE on " \
                "topic %s for %.1f s" % (t, secs)
        if kind in ("delete-records", "delete-records-mid"):
            mid = kind == "delete-records-mid"
            for d in self.ds:
                d.proc.signal(signal.SIGSTOP)
            try:
                time.sleep(r.uniform(1.5, 3))
                want = {}
                for p in range(self.topics["del"]):
                    start, end = offsets(self.src_boot, "del", p)
                    if end - start <= 60:
                        continue
                    c = kraw.Cluster(self.src_boot)
                    try:
                        bs = c.batches("del", p, end - 60, end)
                    finally:
                        c.close()
                    if mid:
                        # Inside a batch of several records.
                        cand = [b["base_offset"] + r.randint(1, b["last_delta"])
                                for b in bs if b["last_delta"] > 0]
                    else:
                        # A batch boundary.
                        cand = [b["base_offset"] for b in bs[1:]]
                    if cand:
                        want[p] = r.choice(cand)
                got = delete_records(self.src, "del", want) if want else {}
                for p, (low, err) in got.items():
                    h.check(err == 0, "DeleteRecords del-%d to %d: error %d"
                            % (p, want[p], err))
                    self.deletions[("del", p)].append(low)
            finally:
                for d in self.ds:
                    d.proc.signal(signal.SIGCONT)
            return "DeleteRecords on the source %s, mirrord held: %s" % (
                "inside batches" if mid else "at batch boundaries",
                ", ".join("del-%d below %d" % kv for kv in sorted(want.items())))
        raise ValueError(kind)

    def schedule(self):
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            time.sleep(self.rnd.uniform(1, 5))
            if self.group:
                self.supervise()
            kinds = [k for k in self.kinds
                     if k not in VICTIM_CLASSES or self.free[VICTIM_CLASSES[k]]]
            kind = self.rnd.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
            t = time.monotonic() - T0
            what = self.fault(kind)
            self.faults.append((t, kind, what))
            log("fault %d (%s): %s" % (len(self.faults), kind, what))

    # -- the end

    def stop_load(self):
        time.sleep(5)   # records after the last fault, for every partition
        for w in self.writers + self.txns:
            w.quit = True
        self.load_secs = time.monotonic() - self.load_t0
        for w in self.writers + self.txns:
            w.join(600)
            h.check(not w.is_alive(), "writer %s did not stop" % w.name)
        for w in self.writers:
            if w.errors:
                log("writer %s: delivery errors %s" % (w.name, dict(w.errors)))
        self.ntxn = sum(t.commits + t.aborts for t in self.txns)
        log("load stopped: %d idempotent records sent, %d transactions "
            "committed, %d aborted, %d broken by faults"
            % (sum(w.sent for w in self.writers),
               sum(t.commits for t in self.txns),
               sum(t.aborts for t in self.txns),
               sum(t.broken for t in self.txns)))

    def settled(self, key, x):
        """None when the partition's end state is final and right, else
        why not (yet)."""
        exp = self.expect.get(key)
        msg = x["errorMessage"] or ""
        if exp is not None:
            kind, pats, states = exp
            if x["state"] in states and any(re.search(p, msg) for p in pats):
                return None
            return "%s, expected after %s: %s %r" % (x["state"], kind,
                                                    "/".join(states), msg)
        if x["state"] != "MIRRORING":
            return "%s: %s" % (x["state"], msg)
        end = offsets(self.src_boot, key[0], key[1])[1]
        if x["lag"] != 0 or x["sourceOffset"] != end:
            return "MIRRORING, lag %s, source offset %s of %d" % (
                x["lag"], x["sourceOffset"], end)
        return None

    def settle(self):
        deadline = time.monotonic() + SETTLE_SECONDS
        say = time.monotonic() + 15
        while True:
            if self.group:
                self.supervise()
            try:
                rows = self.rows()
                why = {k: self.settled(k, x) for k, x in rows.items()}
                why = {k: v for k, v in why.items() if v is not None}
            except Exception as e:  # noqa: BLE001 -- retried until the deadline
                why = {("?", -1): "%s: %s" % (type(e).__name__, e)}
            if not why:
                log("every partition settled")
                if self.group:
                    self.settled_everywhere(deadline)
                return {}
            if time.monotonic() > deadline:
                return why
            if time.monotonic() > say:
                say += 15
                log("not settled yet: %s" % "; ".join(
                    "%s-%d: %s" % (k[0], k[1], v)
                    for k, v in sorted(why.items())[:3]))
            time.sleep(1)

    def settled_everywhere(self, deadline):
        """Every instance's DescribeMirrors shows the partitions settled
        (what the others copy comes from the status topic, a little late)."""
        for d in self.ds:
            why = {}
            while True:
                try:
                    rows = self.describe(d)
                    why = {k: self.settled(k, x) for k, x in rows.items()}
                    why = {k: v for k, v in why.items() if v is not None}
                    if len(rows) != sum(self.topics.values()):
                        why[("?", -1)] = "%d partitions, not %d" % (
                            len(rows), sum(self.topics.values()))
                except Exception as e:  # noqa: BLE001 -- retried until the deadline
                    why = {("?", -1): "%s: %s" % (type(e).__name__, e)}
                if not why or time.monotonic() > deadline + 60:
                    break
                time.sleep(1)
            for k, v in sorted(why.items())[:5]:
                self.problems.append("instance %s shows %s-%d not settled, "
                                     "though another does: %s"
                                     % (d.name, k[0], k[1], v))
        log("every instance shows every partition settled")

    # -- the checker

    def check_partition(self, topic, part, failed_ok, counts, problems):
        key = (topic, part)

        def problem(kind, text):
            counts[kind] += 1
            if sum(1 for p in problems if p.startswith("%s-%d" % key)) < 5:
                problems.append("%s-%d: %s: %s" % (topic, part, kind, text))

        truth = {}       # id -> (source offset, Rec, required)
        forbidden = set()
        src_now = read_all(self.src_boot, topic, part, "source")
        if topic in self.recreated_src:
            forbidden = {rec.rid() for _, rec in src_now}
        else:
            for off, rec in src_now:
                truth[rec.rid()] = (off, rec, True)
        if topic in self.ledgered:
            with self.ledger.lock:
                old = dict(self.ledger.recs.get((topic, 0, part), {}))
            for off, rec in old.items():
                rid = rec.rid()
                if rid not in truth:
                    truth[rid] = (off, rec, False)
                elif truth[rid][0] != off:
                    problem("corrupted", "the source holds record %s at %d, "
                            "its producer was told %d" % (rid, truth[rid][0], off))
        anchors = self.anchors.get(key, [])
        dst = read_all(self.dst.bootstrap, topic, part, "destination")
        seen = set()
        later_key = {}      # key -> highest source offset at the destination
        prev = None
        kind = self.expect.get(key, (None,))[0]
        nforeign = 0
        for d_off, rec in dst:
            if rec.foreign():
                counts["foreign"] += 1
                nforeign += 1
                continue
            rid = rec.rid()
            if rid in forbidden:
                problem("corrupted", "destination offset %d holds %s, a record "
                        "of the recreated source topic" % (d_off, rid))
                continue
            t = truth.get(rid)
            if t is None and rid in self.ledger.uncertain and rid not in seen:
                seen.add(rid)
                if self.ledger.uncertain[rid].same(rec):
                    counts["uncertain"] += 1
                else:
                    problem("corrupted", "destination offset %d holds %s, not "
                            "what was produced" % (d_off, rid))
                continue
            if t is None:
                if rid in self.aborted or CTxnLoad.aborted(rec):
                    problem("aborted visible", "destination offset %d holds %s "
                            "of an aborted transaction" % (d_off, rid))
                else:
                    problem("corrupted", "destination offset %d holds %r, no "
                            "source record" % (d_off, (rid or rec.value or b"")[:60]))
                continue
            s_off, srec, _ = t
            if rid in seen:
                problem("duplicated", "source offset %d (%s) again at "
                        "destination offset %d" % (s_off, rid, d_off))
                continue
            seen.add(rid)
            if not srec.same(rec):
                problem("corrupted", "source offset %d (%s) differs at "
                        "destination offset %d" % (s_off, rid, d_off))
                continue
            counts["checked"] += 1
            if rec.key is not None:
                later_key[rec.key] = max(later_key.get(rec.key, -1), s_off)
            ps, pd = prev if prev is not None else (-1, -1)
            want = translate(anchors, s_off)
            if s_off <= ps:
                problem("corrupted", "source offset %d at destination offset %d "
                        "after source offset %d at %d: out of order"
                        % (s_off, d_off, ps, pd))
            elif want != d_off and not (
                    kind == "foreign" and want is not None and
                    d_off == want + nforeign):
                # (After a foreign write under mirror.foreign.writes=fail,
                # mirrord's batches already on their way land behind the
                # foreign records, shifted by exactly their number, before
                # mirrord notices and fails the partition.)
                problem("corrupted", "source offset %d at destination offset "
                        "%d; its translated offset is %s%s" % (
                            s_off, d_off, "a hole" if want is None else want,
                            " (written into the recreated destination topic)"
                            if kind == "dst-recreate" else ""))
            prev = (s_off, d_off)
        owed = 0
        compacted = topic == "cmp"
        for rid, (s_off, srec, required) in truth.items():
            if not required or rid in seen:
                continue
            if compacted and (srec.value is None or
                              later_key.get(srec.key, -1) > s_off):
                continue
            if failed_ok:
                owed += 1
                continue
            problem("lost", "source offset %d (%s) is not at the destination"
                    % (s_off, rid))
        return len(src_now), len(dst), owed

    def read_maps(self):
        """Stops mirrord and reads every partition's translation map from
        a copy of its metadata log (from the metadata log's topic once
        every instance has stopped, in the group mode)."""
        for d in self.ds:
            rc = d.stop()
            h.check(rc == 0, "%s exited with %s at the end" % (
                "instance %s" % d.name if self.group else "mirrord", rc))
        if self.group:
            args = ["-k", self.dst.bootstrap, META]
        else:
            copy = os.path.join(h.test_dir(), "mlog-copy")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(self.d.data_dir, copy)
            args = [copy]
        r = subprocess.run([h.build_path("test", "tools", "xlate_dump")] + args
                           + [MIRROR], capture_output=True, text=True, timeout=120)
        h.check(r.returncode == 0, "xlate_dump: %s" % r.stderr)
        self.anchors = collections.defaultdict(list)
        for line in r.stdout.splitlines():
            f = line.split()
            if f[0] == "A":
                self.anchors[(f[1], int(f[2]))].append((int(f[3]), int(f[4])))

    def check(self, unsettled):
        counts = collections.Counter()
        problems = []
        rows = self.rows()
        self.read_maps()
        failed_ok = 0
        for (topic, part), x in sorted(rows.items()):
            exp = (topic, part) in self.expect
            ok = exp and (topic, part) not in unsettled
            failed_ok += ok
            before = counts["checked"]
            bad0 = {k: counts[k] for k in ("lost", "duplicated", "corrupted",
                                           "aborted visible")}
            n_src, n_dst, owed = self.check_partition(topic, part, ok, counts,
                                                      problems)
            if not exp and counts["checked"] == before:
                # Never vacuous: every partition had load and was mirrored.
                counts["vacuous"] += 1
                problems.append("%s-%d: no record was checked (source %d, "
                                "destination %d records)" % (topic, part, n_src, n_dst))
            log("checked %s-%d: %s%s, source %d, destination %d records, "
                "%d anchors%s" % (topic, part, x["state"],
                   " (%s)" % self.expect[(topic, part)][0] if exp else "",
                   n_src, n_dst, len(self.anchors.get((topic, part), [])),
                   ", %d not owed after the fault" % owed if owed else "")
                + "".join(", %d %s" % (counts[k] - v, k)
                          for k, v in bad0.items() if counts[k] != v))
        return counts, problems, failed_ok

    def transient_failures(self):
        c = collections.Counter()
        for line in "".join(d.log() for d in self.ds).splitlines():
            m = re.search(r": \w+ -> FAILED \((.*)\)", line)
            if m:
                c[re.sub(r"\d+", "N", m.group(1))[:100]] += 1
        return c


def env_number(name, default, conv, low, what):
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        n = conv(v)
    except ValueError:
        n = None
    if n is None or n < low:
        h.fail("%s=%s: want %s" % (name, v, what))
    return n


def main():
    group = env_number("TORTURE_GROUP", 0, int, 0,
                       "a number of instances (0 or 1: one mirrord, 2 or "
                       "more: a group)")
    if group == 1:
        group = 0
    seconds = int(os.environ.get("TORTURE_SECONDS", "480"))
    seed = os.environ.get("TORTURE_SEED")
    seed = int(seed) if seed else random.SystemRandom().randrange(1, 1 << 31)
    default = DEFAULT_FAULTS + (sorted(GROUP_FAULTS) if group else [])
    kinds = os.environ.get("TORTURE_FAULTS", ",".join(default))
    kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    for k in kinds:
        if k not in ALL_FAULTS:
            h.fail("TORTURE_FAULTS: unknown fault class %r (known: %s)"
                   % (k, ",".join(ALL_FAULTS)))
        if k in GROUP_FAULTS and not group:
            h.fail("TORTURE_FAULTS: fault class %r needs several instances "
                   "(TORTURE_GROUP=3)" % k)
    txn_rate = env_number("TORTURE_TXN_RATE", 300.0 if group else 0.0, float,
                          0, "transactions a second, 0 or more (0: unpaced)")
    txn_load = os.environ.get("TORTURE_TXN_LOAD", "c" if group else "python")
    if txn_load not in ("c", "python"):
        h.fail("TORTURE_TXN_LOAD=%s: want c (test/bench/txnload) or python"
               % txn_load)
    txn_producers = env_number("TORTURE_TXN_PRODUCERS",
                               48 if txn_load == "c" else 12 if group else 2,
                               int, 1, "a number of producers, 1 or more")
    victims = int(os.environ.get("TORTURE_VICTIMS", str(max(1, seconds // 120))))
    print("torture: seed %d, %d s of faults, classes %s (replay: %sTORTURE_SEED=%d "
          "TORTURE_SECONDS=%d TORTURE_FAULTS=%s)"
          % (seed, seconds, ",".join(kinds),
             "TORTURE_GROUP=%d " % group if group else "", seed, seconds,
             ",".join(kinds)), flush=True)
    if group:
        print("torture: a group of %d instances, the metadata log in topic %s "
              "of the destination; %d transactional producers (%s), %s"
              % (group, META, txn_producers,
                 "test/bench/txnload" if txn_load == "c" else "Python",
                 "%g transactions a second in all" % txn_rate if txn_rate
                 else "unpaced"), flush=True)
    rate = float(os.environ.get("TORTURE_RATE", "1"))
    compacted = os.environ.get("TORTURE_COMPACTED", "1") != "0"
    if not compacted:
        print("torture: without the compacted topic (TORTURE_COMPACTED=0)",
              flush=True)
    t = Torture(seconds, seed, kinds, victims, rate, compacted, group,
                txn_rate, txn_producers, txn_load)
    t.start()
    t.schedule()
    if group:
        t.supervise()
    elif not t.d.proc.alive():
        h.fail("mirrord exited:\n%s" % t.d.proc.tail())
    t.stop_load()
    unsettled = t.settle()
    for k, why in sorted(unsettled.items()):
        print("UNSETTLED %s-%d: %s" % (k[0], k[1], why), flush=True)
    counts, problems, failed_ok = t.check(unsettled)
    problems = t.problems + problems
    for p in problems:
        print("PROBLEM %s" % p, flush=True)
    for why, n in sorted(t.transient_failures().items()):
        log("FAILED %d time(s), before settling: %s" % (n, why))
    by_kind = collections.Counter(k for _, k, _ in t.faults)
    log("faults by class: %s" % ", ".join("%s %d" % kv for kv in sorted(by_kind.items())))
    if t.restarts:
        log("instances started again after exiting by themselves: %s" % ", ".join(
            "%d after status %s" % (n, rc) for rc, n in sorted(t.restarts.items())))
    if counts["uncertain"]:
        log("%d records whose delivery failed at the producer are at the "
            "destination (placement not checked)" % counts["uncertain"])
    print("torture: %d transactions in %.0f s of load, %.1f a second%s "
          "(%d producers)" % (t.ntxn, t.load_secs, t.ntxn / t.load_secs,
                              " (aimed at %g)" % txn_rate if txn_rate else "",
                              txn_producers), flush=True)
    print("torture: %d faults, %d records checked, %d lost, %d duplicated, "
          "%d corrupted, %d aborted visible, %d partitions FAILED as expected"
          "%s (seed %d)"
          % (len(t.faults), counts["checked"], counts["lost"],
             counts["duplicated"], counts["corrupted"],
             counts["aborted visible"], failed_ok,
             ", %d partitions UNSETTLED" % len(unsettled) if unsettled else "",
             seed), flush=True)
    if unsettled or counts["vacuous"] or counts["lost"] or counts["duplicated"] or \
            counts["corrupted"] or counts["aborted visible"] or t.problems:
        h.fail("torture found problems (seed %d); see PROBLEM and UNSETTLED "
               "lines above, mirrord's logs in %s" % (seed, h.test_dir()))
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
