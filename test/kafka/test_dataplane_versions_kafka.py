#!/usr/bin/env python3
"""mirrord's core data plane between the Kafka releases people run: Apache
Kafka 3.6.2 and 3.9.1 brokers on either side of a mirror, next to the
pinned 4.4.0 (the test tier of test/kafka/realkafka.py; SKIPs with the
reason when a release cannot be fetched).

Three private single-node clusters, one per release, started in parallel,
and five mirrors between them, one mirrord each, running at once:

    3.6.2 -> 4.4.0    3.9.1 -> 4.4.0    3.9.1 -> 3.6.2
    4.4.0 -> 3.6.2    4.4.0 -> 3.9.1

so each 3.x release is both a source and a destination of 4.4.0, and a
3.x mirrors to the other 3.x.  For every pair:

  * codecs: one partition per codec (none, gzip, snappy, lz4, zstd) from
    an idempotent producer; the destination, read back raw, holds the
    same batches at the same offsets with the records sections byte for
    byte equal, and a consumer reads the same records;
  * transactions: committed and aborted transactions then plain records;
    read_committed gives the same records on both sides, and on the
    destination even read_uncommitted sees nothing aborted;
  * kill -9: mirrord killed twice while a producer keeps writing; once
    the producer stops the destination holds the same batches at the same
    offsets (nothing lost, nothing twice) and every partition is
    MIRRORING.

It prints one line per pair saying what passed, and the time each release
took to format and to answer.  A pair that fails does not stop the
others: the failures are listed at the end with the mirrord log to read.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import KafkaException, Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

VERSIONS = ["3.6.2", "4.4.0", "3.9.1"]
PAIRS = [(0, 1), (1, 0), (2, 1), (1, 2), (2, 0)]  # (source, destination)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 300
TXNS = (True, False, True, False, True)  # commit?
RUN = "%d" % (os.getpid() % 100000)
NOW_MS = int(time.time() * 1000)  # the brokers delete data older than 7 days


class PairFailed(Exception):
    pass


class Pair:
    def __init__(self, n, src, dst):
        self.n = n
        self.src, self.dst = src, dst
        self.name = "%s -> %s" % (src.version, dst.version)
        self.t_codecs = "vc-%d-%s" % (n, RUN)
        self.t_txn = "vt-%d-%s" % (n, RUN)
        self.t_load = "vl-%d-%s" % (n, RUN)
        self.passed = []
        self.failure = None
        self.d = None
        self.writer = None

    def step(self, what, fn):
        """Run one check of this pair unless an earlier one failed; a
        failure (h.fail, h.check, a timeout, an error) is recorded and
        ends the pair, not the test."""
        if self.failure:
            return
        try:
            got = fn()
            if isinstance(got, str):  # what passed, said once per check
                self.passed.append(got)
        except SystemExit:  # h.fail printed the reason already
            self.failure = "%s: see the FAIL line above" % what
        except Exception as e:  # noqa: BLE001 -- reported at the end
            self.failure = "%s: %s: %s" % (what, type(e).__name__, e)
        if self.failure:
            log = self.d.proc.log_path if self.d and self.d.proc else "-"
            print("FAIL [%s] %s (mirrord log %s)%s"
                  % (self.name, self.failure, log, self.complaints()),
                  flush=True)

    def complaints(self, n=6):
        """The last n distinct warn/error lines of this pair's mirrord
        logs (what an unsupported API version shows as), indented."""
        if not self.d or not self.d.proc:
            return ""
        seen = []
        for line in self.d.log().splitlines():
            if " warn: " in line or " error: " in line or " crit: " in line:
                msg = line.split("] ", 1)[-1]
                if msg in seen:
                    seen.remove(msg)
                seen.append(msg)
        return "".join("\n    mirrord said: " + m for m in seen[-n:])


def wait_pairs(pairs, what, cond, timeout=120):
    """Wait until cond(pair) returns None (there) for every pair still
    passing, polling them in turn against one deadline (so a pair that
    never gets there costs one timeout, not one per pair); cond returns
    what is missing otherwise.  A pair not there in time fails with what
    and cond's last words."""
    pending = [pr for pr in pairs if not pr.failure]
    last = {}
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for pr in list(pending):
            try:
                last[pr] = cond(pr)
            except Exception as e:  # noqa: BLE001 -- kept for the message
                last[pr] = "%s: %s" % (type(e).__name__, e)
            if last[pr] is None:
                pending.remove(pr)
        time.sleep(0.2)
    for pr in pending:
        pr.step(what, lambda: h.fail(
            "[%s] timed out after %ds waiting for %s (last: %s; log %s)"
            % (pr.name, timeout, what, last.get(pr, "not yet"),
               pr.d.proc.log_path)))


def same_ends(pr, topic, npart):
    """None when every partition of topic ends on the destination where it
    ends on the source, else both ends."""
    want = mt.end_offsets(pr.src.bootstrap, topic, npart)
    try:
        got = mt.end_offsets(pr.dst.bootstrap, topic, npart)
    except (KeyError, ValueError) as e:  # no leader there (yet)
        got = "unknown (%s: %s)" % (type(e).__name__, e)
    if got == want:
        return None
    return "%s ends %s on the destination, %s on the source" % (topic, got, want)


def committed_copied(pr):
    """None once the destination's transactional topic ends at or past
    the number of committed records (markers and aborted data are not
    copied), else its end."""
    want = TXNS.count(True) * 20 + 10
    try:
        got = mt.end_offset(pr.dst.bootstrap, pr.t_txn)
    except (KeyError, ValueError) as e:
        got = "unknown (%s: %s)" % (type(e).__name__, e)
    if isinstance(got, int) and got >= want:
        return None
    return "%s ends %s on the destination, want %d" % (pr.t_txn, got, want)


def producer(bootstrap, **conf):
    c = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
         "message.timeout.ms": 60000}
    c.update(conf)
    return Producer(c)


def read(bootstrap, topic, partition, isolation="read_committed"):
    return mt.read_partition(
        bootstrap, topic, partition, "dpv-%s" % RUN, isolation=isolation,
        config={"check.crcs": True},
        record=lambda m: (m.offset(), m.key(), m.value(), m.headers(),
                          m.timestamp()))


def produce_codecs(pr):
    src = pr.src
    src.create_topic(pr.t_codecs, partitions=len(CODECS))
    for i, codec in enumerate(CODECS):
        p = producer(src.bootstrap, **{"compression.type": codec,
                                       "enable.idempotence": True})
        for k in range(PER_CODEC):
            p.produce(pr.t_codecs, partition=i,
                      key=None if k % 9 == 0 else b"k%d" % k,
                      value=None if k % 13 == 0 else
                      (b'{"i":%d,"c":"%s"}' % (k, codec.encode())) * 3,
                      headers=[("h", b"%d" % k)] if k % 4 == 0 else None,
                      timestamp=NOW_MS - 400000 + k)
        mt.flush_all(p, "%s: codec %s" % (pr.name, codec))


def produce_txns(pr):
    """Committed and aborted transactions, then plain records; retried on
    a fresh topic if the coordinator refuses (a new cluster's transaction
    log may still be loading)."""
    src = pr.src
    for attempt in range(3):
        t = "%s-%d" % (pr.t_txn, attempt)
        src.create_topic(t, partitions=1)
        try:
            tp = producer(src.bootstrap, **{
                "transactional.id": "dpv-tx-%s-%d-%d" % (RUN, pr.n, attempt),
                "transaction.timeout.ms": 10000,
                "message.timeout.ms": 10000})
            tp.init_transactions(30)
            for n, commit in enumerate(TXNS):
                tp.begin_transaction()
                for k in range(20):
                    tp.produce(t, partition=0, key=b"t%d" % n,
                               value=b"txn-%d-%d-%s" % (
                                   n, k, b"commit" if commit else b"abort"))
                if commit:
                    tp.commit_transaction(30)
                else:
                    # librdkafka 2.0.2: abort only once nothing is queued
                    # (HACKING.md).
                    mt.flush_all(tp, "before abort")
                    tp.abort_transaction(30)
            pr.t_txn = t
            break
        except KafkaException as e:
            print("note [%s]: transactional setup on %s failed (%s); again on "
                  "a new topic" % (pr.name, t, e), flush=True)
    else:
        raise PairFailed("the source refused the transactional producer 3 times")
    p = producer(src.bootstrap)
    for k in range(10):
        p.produce(pr.t_txn, partition=0, value=b"plain-%d" % k)
    mt.flush_all(p, "plain after transactions")


def start_mirror(pr):
    src = pr.src
    src.create_topic(pr.t_load, partitions=2)
    pr.d = mt.Mirrord(destination=pr.dst.bootstrap, name="mirrord-%d" % pr.n)
    pr.d.create("v%d" % pr.n, {"bootstrap.servers": src.bootstrap,
                               "mirror.fetch.wait.max.ms": "200"})
    pr.d.cli_ok("--add", "--mirror", "v%d" % pr.n, "--topic",
                ",".join([pr.t_codecs, pr.t_txn, pr.t_load]))


def check_codecs(pr):
    S, D = pr.src.bootstrap, pr.dst.bootstrap
    parts = list(range(len(CODECS)))
    n = mt.same_batches(S, D, pr.t_codecs, parts)
    for i in parts:
        h.eq(read(D, pr.t_codecs, i), read(S, pr.t_codecs, i),
             "[%s] %s-%d (%s) records read back"
             % (pr.name, pr.t_codecs, i, CODECS[i]))
    return "codecs %s: %d records, same batches at the same offsets, " \
        "byte-identical" % ("/".join(CODECS), n)


def check_txns(pr):
    S, D = pr.src.bootstrap, pr.dst.bootstrap
    want = read(S, pr.t_txn, 0)
    h.eq(len(want), TXNS.count(True) * 20 + 10,
         "[%s] committed records on the source (test setup)" % pr.name)
    h.eq([r[1:] for r in read(D, pr.t_txn, 0)], [r[1:] for r in want],
         "[%s] committed records of %s read back" % (pr.name, pr.t_txn))
    seen = read(D, pr.t_txn, 0, isolation="read_uncommitted")
    aborted = [r for r in seen if r[2] and r[2].endswith(b"-abort")]
    h.eq(aborted, [], "[%s] aborted records visible on the destination "
         "(read_uncommitted)" % pr.name)
    h.eq([r[1:] for r in seen], [r[1:] for r in want],
         "[%s] destination records read_uncommitted" % pr.name)
    return "transactions: %d committed records equal, %d aborted transactions " \
        "invisible" % (len(want), TXNS.count(False))


def check_after_kill(pr, kills):
    S, D = pr.src.bootstrap, pr.dst.bootstrap
    n = 0
    for t, np_ in ((pr.t_load, 2), (pr.t_codecs, len(CODECS))):
        n += mt.same_batches(S, D, t, range(np_))
    for i in range(2):
        h.eq(read(D, pr.t_load, i), read(S, pr.t_load, i),
             "[%s] %s-%d records read back after kill -9"
             % (pr.name, pr.t_load, i))
    mt.wait_caught_up(pr.d, "v%d" % pr.n, 60,
                      "[%s] every partition MIRRORING" % pr.name,
                      count=len(CODECS) + 1 + 2)
    return "kill -9 x%d under load: %d records, same batches, nothing lost " \
        "or twice, all MIRRORING" % (kills, n)


def main():
    t0 = time.monotonic()
    clusters = h.private_kafka(len(VERSIONS), "plaintext", version=VERSIONS)
    for c in clusters:
        print("real Kafka %s: formatted in %.1fs, answering %.1fs after start"
              % (c.version, c.format_seconds, c.ready_seconds), flush=True)
    pairs = [Pair(n, clusters[s], clusters[d]) for n, (s, d) in enumerate(PAIRS)]

    for pr in pairs:
        pr.step("producing every codec", lambda: produce_codecs(pr))
        pr.step("producing transactions", lambda: produce_txns(pr))
    for pr in pairs:
        pr.step("starting mirrord", lambda: start_mirror(pr))
    wait_pairs(pairs, "every codec's partition to reach the source's end",
               lambda pr: same_ends(pr, pr.t_codecs, len(CODECS)))
    for pr in pairs:
        pr.step("every codec", lambda: check_codecs(pr))
    # The transactional topic's end: the source's (after its last marker)
    # or, since markers are not copied, the committed records written.
    wait_pairs(pairs, "the committed records on the destination",
               committed_copied)
    for pr in pairs:
        pr.step("transactions", lambda: check_txns(pr))

    # Load on every pair at once; each mirrord killed twice meanwhile.
    kills = 2
    for pr in pairs:
        def load():
            pr.writer = mt.LayoutWriter(pr.src.bootstrap, {pr.t_load: [0, 1]},
                                        pause=0.02)
            pr.writer.start()
        pr.step("starting the load", load)
    for k in range(kills):
        time.sleep(1.5)
        for pr in pairs:
            pr.step("kill -9 #%d" % (k + 1), lambda: pr.d.kill9())
        # A few more lz4 records to copy on the restart, besides the load.
        for pr in pairs:
            def more():
                p = producer(pr.src.bootstrap, **{"compression.type": "lz4"})
                for i in range(100):
                    p.produce(pr.t_codecs, partition=(k + i) % len(CODECS),
                              value=b"late-%d-%d" % (k, i))
                mt.flush_all(p, "late records")
            pr.step("producing while mirrord is down", more)
            pr.step("restarting mirrord", lambda: pr.d.start())
    time.sleep(1.5)
    for pr in pairs:
        if pr.writer:
            pr.step("stopping the load", pr.writer.stop)
    wait_pairs(pairs, "every partition to reach the source's end after "
               "kill -9", lambda pr: same_ends(pr, pr.t_load, 2) or
               same_ends(pr, pr.t_codecs, len(CODECS)))
    for pr in pairs:
        pr.step("after kill -9", lambda: check_after_kill(pr, kills))
    for pr in pairs:
        pr.step("mirrord exit status",
                lambda: h.eq(pr.d.stop(), 0, "[%s] mirrord exit status" % pr.name))

    print("--", flush=True)
    for pr in pairs:
        print("%s %s: %s" % ("FAIL" if pr.failure else "PASS", pr.name,
                             "; ".join(pr.passed) or "nothing"), flush=True)
        if pr.failure:
            print("    failed at %s" % pr.failure, flush=True)
    print("wall time %.0fs" % (time.monotonic() - t0), flush=True)
    failed = [pr for pr in pairs if pr.failure]
    if failed:
        h.fail("%d of %d pairs failed: %s" % (len(failed), len(pairs), ", ".join(
            "%s (log %s)" % (pr.name, pr.d.proc.log_path if pr.d else "-")
            for pr in failed)))
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main)
