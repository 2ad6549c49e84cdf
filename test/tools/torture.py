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
TORTURE_COMPACTED=0 leaves the compacted topic out.

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
and fails if any count but the last is not 0 (a record whose delivery the
producer reported failed, that the source no longer holds but the
destination does, is "uncertain": compared byte for byte, its offset not
checked), a partition FAILED or
STOPPED for a reason its faults do not explain, or one never settled.
"""

import bisect
import collections
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
              "delete-records-mid", "deny"]
# The classes a run draws from unless TORTURE_FAULTS says otherwise.
DEFAULT_FAULTS = list(ALL_FAULTS)
WEIGHTS = {"kill": 3, "stop": 3, "src-restart": 1, "dst-restart": 1,
           "foreign": 1, "src-recreate": 1, "dst-recreate": 1,
           "delete-records": 2, "delete-records-mid": 2, "deny": 2}
# Victim topics per destructive class (each takes one fault).
VICTIM_CLASSES = {"foreign": "fw", "src-recreate": "sr", "dst-recreate": "dr"}
MIRROR = "t"
SETTLE_SECONDS = 240


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
    topic's partitions, about 40% aborted; the ids of aborted records are
    kept (none may be visible at the destination)."""

    def __init__(self, name, bootstrap, topic, nparts, rnd, aborted):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.nparts = bootstrap, topic, nparts
        self.rnd, self.aborted = rnd, aborted
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
        abort = self.rnd.random() < 0.4
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
        while not self.quit:
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
            time.sleep(self.rnd.random() * 0.1)


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
    def __init__(self, seconds, seed, faults, victims, rate, compacted=True):
        self.seconds, self.seed, self.kinds = seconds, seed, faults
        self.rate, self.compacted = rate, compacted
        self.rnd = random.Random(seed)
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
        self.topics = {"idem": 3, "txn": 2, "cmp": 1, "del": 2}
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
        self.d = mt.Mirrord(destination=self.dst.bootstrap, log_level="info")
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
        self.txns = [TxnWriter("txn-%d" % i, SRC, "txn", 2,
                               random.Random(r.random()), self.aborted)
                     for i in range(2)]
        # Only the topics whose source may lose records need the ledger.
        self.ledgered = {"cmp", "del"} | {t for t, _ in vparts}
        for w in self.writers + self.txns:
            w.start()
        h.wait_for(lambda: self.all_state("MIRRORING"), 120,
                   "every partition to be MIRRORING (log %s)" % self.d.proc.log_path)
        log("set-up done: %d topics, %d partitions MIRRORING"
            % (len(self.topics), sum(self.topics.values())))

    def rows(self):
        return {(x["topic"], x["partition"]): x
                for x in self.d.describe_json(MIRROR)}

    def all_state(self, state):
        rows = self.rows()
        return len(rows) == sum(self.topics.values()) and \
            all(x["state"] == state for x in rows.values())

    # -- faults

    def fault(self, kind):
        r, d = self.rnd, self.d
        if kind == "kill":
            d.kill9()
            time.sleep(r.uniform(0, 2))
            d.start()
            return "mirrord killed (-9) and started again"
        if kind == "stop":
            secs = r.uniform(1, 6)
            d.proc.signal(signal.SIGSTOP)
            time.sleep(secs)
            d.proc.signal(signal.SIGCONT)
            return "mirrord SIGSTOPped for %.1f s" % secs
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
                d.proc.signal(signal.SIGCONT)
            return "DeleteRecords on the source %s, mirrord held: %s" % (
                "inside batches" if mid else "at batch boundaries",
                ", ".join("del-%d below %d" % kv for kv in sorted(want.items())))
        raise ValueError(kind)

    def schedule(self):
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            time.sleep(self.rnd.uniform(1, 5))
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
        for w in self.writers + self.txns:
            w.join(600)
            h.check(not w.is_alive(), "writer %s did not stop" % w.name)
        for w in self.writers:
            if w.errors:
                log("writer %s: delivery errors %s" % (w.name, dict(w.errors)))
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
        while True:
            try:
                rows = self.rows()
                why = {k: self.settled(k, x) for k, x in rows.items()}
                why = {k: v for k, v in why.items() if v is not None}
            except Exception as e:  # noqa: BLE001 -- retried until the deadline
                why = {("?", -1): "%s: %s" % (type(e).__name__, e)}
            if not why:
                log("every partition settled")
                return {}
            if time.monotonic() > deadline:
                return why
            time.sleep(1)

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
                if rid in self.aborted:
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
        a copy of its metadata log."""
        rc = self.d.stop()
        h.check(rc == 0, "mirrord exited with %s at the end" % rc)
        copy = os.path.join(h.test_dir(), "mlog-copy")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.d.data_dir, copy)
        r = subprocess.run([h.build_path("test", "tools", "xlate_dump"), copy, MIRROR],
                           capture_output=True, text=True, timeout=120)
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
        for line in self.d.log().splitlines():
            m = re.search(r": \w+ -> FAILED \((.*)\)", line)
            if m:
                c[re.sub(r"\d+", "N", m.group(1))[:100]] += 1
        return c


def main():
    seconds = int(os.environ.get("TORTURE_SECONDS", "480"))
    seed = os.environ.get("TORTURE_SEED")
    seed = int(seed) if seed else random.SystemRandom().randrange(1, 1 << 31)
    kinds = os.environ.get("TORTURE_FAULTS", ",".join(DEFAULT_FAULTS))
    kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    for k in kinds:
        if k not in ALL_FAULTS:
            h.fail("TORTURE_FAULTS: unknown fault class %r (known: %s)"
                   % (k, ",".join(ALL_FAULTS)))
    victims = int(os.environ.get("TORTURE_VICTIMS", str(max(1, seconds // 120))))
    print("torture: seed %d, %d s of faults, classes %s (replay: TORTURE_SEED=%d "
          "TORTURE_SECONDS=%d TORTURE_FAULTS=%s)"
          % (seed, seconds, ",".join(kinds), seed, seconds, ",".join(kinds)),
          flush=True)
    rate = float(os.environ.get("TORTURE_RATE", "1"))
    compacted = os.environ.get("TORTURE_COMPACTED", "1") != "0"
    if not compacted:
        print("torture: without the compacted topic (TORTURE_COMPACTED=0)",
              flush=True)
    t = Torture(seconds, seed, kinds, victims, rate, compacted)
    t.start()
    t.schedule()
    if not t.d.proc.alive():
        h.fail("mirrord exited:\n%s" % t.d.proc.tail())
    t.stop_load()
    unsettled = t.settle()
    for k, why in sorted(unsettled.items()):
        print("UNSETTLED %s-%d: %s" % (k[0], k[1], why), flush=True)
    counts, problems, failed_ok = t.check(unsettled)
    for p in problems:
        print("PROBLEM %s" % p, flush=True)
    for why, n in sorted(t.transient_failures().items()):
        log("FAILED %d time(s), before settling: %s" % (n, why))
    by_kind = collections.Counter(k for _, k, _ in t.faults)
    log("faults by class: %s" % ", ".join("%s %d" % kv for kv in sorted(by_kind.items())))
    if counts["uncertain"]:
        log("%d records whose delivery failed at the producer are at the "
            "destination (placement not checked)" % counts["uncertain"])
    print("torture: %d faults, %d records checked, %d lost, %d duplicated, "
          "%d corrupted, %d aborted visible, %d partitions FAILED as expected"
          "%s (seed %d)"
          % (len(t.faults), counts["checked"], counts["lost"],
             counts["duplicated"], counts["corrupted"],
             counts["aborted visible"], failed_ok,
             ", %d partitions UNSETTLED" % len(unsettled) if unsettled else "",
             seed), flush=True)
    if unsettled or counts["vacuous"] or counts["lost"] or counts["duplicated"] or \
            counts["corrupted"] or counts["aborted visible"]:
        h.fail("torture found problems (seed %d); see PROBLEM and UNSETTLED "
               "lines above, mirrord's logs in %s" % (seed, h.test_dir()))
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
