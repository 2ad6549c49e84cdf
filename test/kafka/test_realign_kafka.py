#!/usr/bin/env python3
"""Realigning the old primary after a failback divergence, on real Apache
Kafka (the shared pair A and B of test/kafka/realkafka.py, and one private
cluster K; SKIPs with the reason when the tier cannot run):

  * mirrord D1 mirrors topics M and C (2 partitions each) from A to B;
    partition 1 of each is paused and 7 records are written to it on A
    (never mirrored); failover: D1 --remove --wait; B is the primary and
    gets new records; failback: mirrord D2 mirrors both back from B onto A:
    partition 0 copies on, partition 1 FAILED "failback divergence at
    offset 20";
  * M, the documented manual procedure: --recover --resolution preserve
    (the divergent records copied aside, B's records copied after them,
    a skip-over anchor recorded), then --remove --wait, the topic deleted
    on A, --add: mirrord creates it and copies B's log from offset 0
    (not "destination truncated"); A's partitions equal B's record for
    record at the same offsets, and again after D2 restarts;
  * C, in one command: --recover --resolution realign says what it would
    delete (topic, partitions, records) and refuses without --yes when
    standard input is not a terminal, asks on a terminal (answered "n":
    nothing changes), and with --yes deletes A's topic and copies B's log
    into it: A equals B record for record at the same offsets;
  * the safety checks stay: a destination topic deleted and recreated by
    someone else while MIRRORING goes FAILED as before (its foreign
    records untouched, a plain --recover does not copy into it), and a
    destination truncated below what mirrord wrote (K's log cut while
    mirrord D3 was down) goes FAILED "destination truncated"; each is
    repaired by --resolution realign --yes;
  * realign is refused where it is not for (nothing FAILED for it).
"""

import os
import pty
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
import test_failover_kafka as fk  # noqa: E402  (read; SKIPs without confluent-kafka)
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)


def vals(recs):
    return [(o, k, v) for o, k, v, _ts in recs]


def rows(d, mirror, topic):
    return {p["partition"]: p for p in d.describe_json(mirror)
            if p["topic"] == topic}


def same(src, dst, topic, npart, what):
    """dst's partitions hold src's records at the same offsets (once dst
    ends where src ends)."""
    mt.wait_same_ends(src, dst, topic, npart, 60, what)
    for p in range(npart):
        a, b = fk.read(dst, topic, p), fk.read(src, topic, p)
        eq(vals(a), vals(b), "%s: %s-%d (offsets, keys, values)"
           % (what, topic, p))


def delete_topic(bootstrap, topic):
    """Deletes topic and waits until the cluster no longer lists it."""
    adm = AdminClient({"bootstrap.servers": bootstrap})
    list(adm.delete_topics([topic]).values())[0].result(30)
    h.wait_for(lambda: topic not in adm.list_topics(timeout=10).topics, 60,
               "%s deleted on %s" % (topic, bootstrap))


def realign_cli(d, topic, *extra, stdin=subprocess.DEVNULL):
    return subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                           "--bootstrap-server", d.bootstrap, "--recover",
                           "--mirror", "ba", "--topic", topic,
                           "--resolution", "realign"] + list(extra),
                          stdin=stdin, capture_output=True, text=True,
                          timeout=60)


def realign_on_tty(d, topic, answer):
    """The same on a terminal, answering the prompt; (status, output)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([h.build_path("daemon", "kafka-mirrors"),
                          "--bootstrap-server", d.bootstrap, "--recover",
                          "--mirror", "ba", "--topic", topic,
                          "--resolution", "realign"],
                         stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    os.close(slave)
    try:
        os.write(master, answer.encode())
        out, err = p.communicate(timeout=60)
    finally:
        os.close(master)
    return p.returncode, out, err


def wait_failed(d, mirror, topic, part, what, timeout=120):
    def failed():
        r = rows(d, mirror, topic).get(part)
        return r if r is not None and r["state"] == "FAILED" else None
    return h.wait_for(failed, timeout, "%s (now %r)" % (what,
                                                      rows(d, mirror, topic)))


def failback_setup(A, B, topics):
    """D1 A->B, divergence on partition 1 of each topic, failover; B's new
    records; returns (D2 mirroring B->A, A's partition 1 before)."""
    for t in topics:
        A.create_topic(t, partitions=2)
        mt.produce_tagged(A.bootstrap, t, 0, 30, "a0", keyed=True)
        mt.produce_tagged(A.bootstrap, t, 1, 20, "a1", keyed=True)
    d1 = mt.Mirrord(destination=B.bootstrap, name="d1")
    d1.create("ab", {"bootstrap.servers": A.bootstrap,
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.groups.sync.interval.ms": "300"})
    for t in topics:
        d1.cli_ok("--add", "--mirror", "ab", "--topic", t)
    mt.wait_caught_up(d1, "ab", 120, "mirrored to B", count=2 * len(topics))
    for t in topics:
        d1.cli_ok("--pause", "--mirror", "ab", "--topic", t)
    h.wait_for(lambda: all(p["state"] == "PAUSED"
                           for p in d1.describe_json("ab")), 60, "PAUSED")
    for t in topics:
        mt.produce_tagged(A.bootstrap, t, 1, 7, "late", keyed=True)  # 20..26
        # Exit status 5: the 7 late offsets were not copied.
        d1.cli_rc(5, "--remove", "--mirror", "ab", "--topic", t, "--wait",
                  "60")
    # D1's stop marks on B say where it stopped (the failback reads them).
    import test_loops_kafka as lk
    h.wait_for(lambda: all("state=stopped" in (lk.marks(B.bootstrap)
                                               .get((t, p)) or "")
                           for t in topics for p in (0, 1)), 60,
               "D1's stop marks on B")
    d1.stop()
    for t in topics:
        mt.produce_tagged(B.bootstrap, t, 0, 5, "b0", keyed=True)  # 30..34
        mt.produce_tagged(B.bootstrap, t, 1, 4, "b1", keyed=True)  # 20..23
    d2 = mt.Mirrord(destination=A.bootstrap, name="d2")
    d2.create("ba", {"bootstrap.servers": B.bootstrap,
                     "mirror.fetch.wait.max.ms": "100"})
    for t in topics:
        d2.cli_ok("--add", "--mirror", "ba", "--topic", t)

    def settled():
        for t in topics:
            r = rows(d2, "ba", t)
            if len(r) != 2 or r[1]["state"] != "FAILED" or \
                    r[0]["state"] != "MIRRORING" or r[0]["lag"] != 0:
                return None
        return True
    h.wait_for(settled, 120, "partitions 0 copying, 1 FAILED (now %r)"
               % d2.describe_json("ba"))
    for t in topics:
        reason = rows(d2, "ba", t)[1]["errorMessage"]
        eq(reason.split(":")[0], "failback divergence at offset 20",
           "%s-1's reason" % t)
    return d2


def manual(A, B, d2, topic):
    """(1) The documented procedure, after preserving the divergence."""
    d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
              "--resolution", "preserve")
    mt.wait_caught_up(d2, "ba", 120, "%s copying after preserve" % topic,
                      topic=topic, fail_on_failed=True)
    eq(mt.end_offsets(A.bootstrap, topic, 2), [35, 31],
       "A's ends after preserve (B1's 4 records after A1's 27)")
    r = d2.cli_ok("--remove", "--mirror", "ba", "--topic", topic,
                  "--wait", "60")
    print(r.stdout, flush=True)
    delete_topic(A.bootstrap, topic)
    d2.cli_ok("--add", "--mirror", "ba", "--topic", topic)
    mt.wait_caught_up(d2, "ba", 120, "%s added again onto the deleted "
                      "destination topic" % topic, topic=topic, count=2,
                      fail_on_failed=True)
    same(B.bootstrap, A.bootstrap, topic, 2, "after --remove, delete, --add")
    h.check("destination topic %s is a new topic" % topic in d2.log(),
            "the log says the destination topic is a new one")
    # The decision is in the metadata log: a restart resumes, nothing more.
    d2.stop()
    mt.produce_tagged(B.bootstrap, topic, 1, 3, "after", keyed=True)
    d2.start()
    mt.wait_caught_up(d2, "ba", 120, "%s after a restart" % topic,
                      topic=topic, count=2, fail_on_failed=True)
    same(B.bootstrap, A.bootstrap, topic, 2, "after a restart")
    print("PASS (1): --remove, delete on A, --add: a fresh copy, offsets "
          "equal", flush=True)


def one_command(A, B, d2, topic):
    """(2) --recover --resolution realign."""
    a1_before = fk.read(A.bootstrap, topic, 1)
    r = d2.cli("--recover", "--mirror", "ba", "--topic", topic, "--yes")
    eq((r.returncode, r.stderr), (2, "kafka-mirrors: --yes is only for "
       "--recover --resolution realign\nTry 'kafka-mirrors --help'.\n"),
       "--yes without the resolution realign")
    # The FAILED partition's destination end is read for the plan, also
    # after the restart of D2 above.
    h.wait_for(lambda: rows(d2, "ba", topic)[1]["destinationOffset"] == 27,
               60, "%s-1's destination end known (now %r)"
               % (topic, rows(d2, "ba", topic)))
    # Off a terminal without --yes: the plan, then a refusal.
    r = realign_cli(d2, topic)
    print(r.stdout + r.stderr, flush=True)
    eq(r.returncode, 2, "realign without --yes off a terminal: exit status "
       "(stderr %r)" % r.stderr)
    h.check("--resolution realign deletes the destination topics above: "
            "confirm with --yes (standard input is not a terminal); nothing "
            "was changed" in r.stderr, "the refusal: %r" % r.stderr)
    lines = r.stdout.splitlines()
    eq(lines[0], "Realign of mirror ba deletes on mirrord's destination "
       "cluster, then copies again from the source's start:", "the plan")
    h.check(lines[1].startswith("  topic %s: destination topic %s (topic id "
                                % (topic, topic)) and
            lines[1].endswith(", 2 partitions) is deleted and copied again "
                              "from the source: partition 0 MIRRORING, "
                              "partition 1 FAILED (failback divergence at "
                              "offset 20)"), "the plan's topic: %r" % lines[1])
    eq(lines[2:], ["    partition 0 (MIRRORING): 35 record(s), destination "
                   "offsets 0..34",
                   "    partition 1 (FAILED): 27 record(s), destination "
                   "offsets 0..26"], "the plan's partitions")
    # On a terminal: asked; "n" changes nothing.
    rc, out, err = realign_on_tty(d2, topic, "n\n")
    eq(rc, 1, "answered n: exit status (stderr %r)" % err)
    h.check("Delete this topic and copy it again? [y/N] " in err and
            "not confirmed; nothing was changed" in err, "the prompt: %r" % err)
    eq(rows(d2, "ba", topic)[1]["state"], "FAILED", "still FAILED")
    eq(fk.read(A.bootstrap, topic, 1), a1_before, "A1 untouched")
    # --yes: done.
    r = d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
                  "--resolution", "realign", "--yes")
    print(r.stdout, flush=True)
    h.check("Realigning 1 topic(s) in mirror ba: [%s]\n" % topic in r.stdout,
            "realign --yes: %r" % r.stdout)
    mt.wait_caught_up(d2, "ba", 120, "%s realigned" % topic, topic=topic,
                      count=2, fail_on_failed=True)
    same(B.bootstrap, A.bootstrap, topic, 2, "after --resolution realign")
    h.check("deleted destination topic %s (topic id" % topic in d2.log(),
            "the log names the deleted topic")
    # Nothing left to realign: refused, naming why.
    r = realign_cli(d2, topic, "--yes")
    eq(r.returncode, 1, "realign of a topic copying: exit status")
    h.check("nothing to realign (MIRRORING)" in r.stderr,
            "realign refused: %r" % r.stderr)
    print("PASS (2): --recover --resolution realign --yes: a fresh copy, "
          "offsets equal", flush=True)


def recreated(A, B, d2, topic):
    """(3a) Recreated by someone else while MIRRORING: FAILED as before."""
    B.create_topic(topic, partitions=1)
    mt.produce_tagged(B.bootstrap, topic, 0, 10, "r", keyed=True)
    d2.cli_ok("--add", "--mirror", "ba", "--topic", topic)
    mt.wait_caught_up(d2, "ba", 120, "%s mirrored onto A" % topic,
                      topic=topic, count=1, fail_on_failed=True)
    delete_topic(A.bootstrap, topic)
    A.create_topic(topic, partitions=1)
    mt.produce_tagged(A.bootstrap, topic, 0, 3, "foreign", keyed=True)
    mt.produce_tagged(B.bootstrap, topic, 0, 2, "r2", keyed=True)
    r = wait_failed(d2, "ba", topic, 0, "%s-0 FAILED" % topic)
    msg = r["errorMessage"] or ""
    h.check(msg.startswith("destination topic %s was deleted and recreated "
                           "(topic id " % topic) or
            msg.startswith("destination topic %s was deleted (topic id "
                           % topic), "recreated by someone else: %r" % msg)
    foreign = fk.read(A.bootstrap, topic, 0)
    eq([k for _o, k, _v, _t in foreign],
       [b"foreign-%d" % i for i in range(3)], "the recreated topic untouched")
    d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic)
    r = wait_failed(d2, "ba", topic, 0, "%s-0 FAILED again" % topic)
    eq(fk.read(A.bootstrap, topic, 0), foreign,
       "a plain --recover copies nothing into it")
    d2.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
              "--resolution", "realign", "--yes")
    mt.wait_caught_up(d2, "ba", 120, "%s realigned" % topic, topic=topic,
                      count=1, fail_on_failed=True)
    same(B.bootstrap, A.bootstrap, topic, 1, "recreated, then realigned")
    print("PASS (3a): recreated by someone else: FAILED (%s); realigned on "
          "request" % msg[:60], flush=True)


def produce_txn(bootstrap, topic, n, tag):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id":
                  "realign-%s-%s" % (RUN, tag), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=b"%s-%d" % (tag.encode(), i),
                  value=b"%s-value-%d" % (tag.encode(), i), partition=0)
    p.flush(30)
    p.commit_transaction(30)


def batch_ends(path):
    """The end offset of each record batch of a Kafka .log segment file,
    with the file position after it."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 12 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        last_delta = int.from_bytes(data[pos + 23:pos + 27], "big")
        pos += 12 + length
        out.append((base + last_delta + 1, pos))
    return out


def truncated(B, topic):
    """(3b) A destination log cut below what mirrord wrote, same topic."""
    K, = h.private_kafka(1, "plaintext")
    B.create_topic(topic, partitions=1)
    mt.produce_tagged(B.bootstrap, topic, 0, 10, "t", keyed=True,
                      one_per_batch=True)                           # 0..9
    produce_txn(B.bootstrap, topic, 5, "tx")                        # 10..14, marker 15
    # The coordinator writes the marker after the commit is answered.
    h.wait_for(lambda: mt.end_offset(B.bootstrap, topic) == 16, 30,
               "the commit marker of %s at offset 15" % topic)
    mt.produce_tagged(B.bootstrap, topic, 0, 10, "u", keyed=True)   # 16..25
    d3 = mt.Mirrord(destination=K.bootstrap, name="d3")
    d3.create("ba", {"bootstrap.servers": B.bootstrap,
                     "mirror.fetch.wait.max.ms": "100"})
    d3.cli_ok("--add", "--mirror", "ba", "--topic", topic)
    mt.wait_caught_up(d3, "ba", 120, "%s mirrored onto K" % topic,
                      count=1, fail_on_failed=True)
    eq(mt.end_offset(K.bootstrap, topic), 25, "K's end (the marker left out)")
    # A second transaction and records after it, once that is copied: the
    # anchor after its marker (32 -> 30) is recorded with the part-sending
    # mark 30 (everything below was acknowledged then), so mirrord knows
    # it wrote up to 30 there.  (The first anchor, 16 -> 15, went with the
    # batches queued at the start, when nothing was acknowledged: a log cut
    # above that mark alone could be batches that never landed, and is
    # copied again.)
    produce_txn(B.bootstrap, topic, 5, "ty")                        # 26..30, marker 31
    h.wait_for(lambda: mt.end_offset(B.bootstrap, topic) == 32, 30,
               "the commit marker of %s at offset 31" % topic)
    mt.produce_tagged(B.bootstrap, topic, 0, 5, "v", keyed=True)    # 32..36
    mt.wait_caught_up(d3, "ba", 120, "%s's second transaction on K" % topic,
                      count=1, fail_on_failed=True)
    eq(mt.end_offset(K.bootstrap, topic), 35, "K's end (two markers left out)")
    d3.stop()
    K.stop(kill=True)
    pdir = os.path.join(K.dir, "data", "%s-0" % topic)
    seg = os.path.join(pdir, "%020d.log" % 0)
    # Below the anchored batch's part-sending mark too (the batches before
    # it may have been in flight then): inside the first ten.
    cut = [e for e in batch_ends(seg) if e[0] == 5][0]
    print("cutting K's %s-0 after offset %d" % (topic, cut[0] - 1), flush=True)
    with open(seg, "r+b") as f:
        f.truncate(cut[1])
    for name in os.listdir(pdir):
        if name.endswith((".index", ".timeindex", ".snapshot")):
            os.unlink(os.path.join(pdir, name))
    K.start_again()
    eq(mt.end_offset(K.bootstrap, topic), cut[0], "K's end after the cut")
    d3.start()
    r = wait_failed(d3, "ba", topic, 0, "%s-0 FAILED" % topic)
    msg = r["errorMessage"] or ""
    h.check(msg.startswith("destination truncated: the destination partition "
                           "ends at offset %d, but mirrord wrote offset "
                           % cut[0]), "truncated: %r" % msg)
    d3.cli_ok("--recover", "--mirror", "ba", "--topic", topic,
              "--resolution", "realign", "--yes")
    mt.wait_caught_up(d3, "ba", 120, "%s realigned onto K" % topic,
                      count=1, fail_on_failed=True)
    h.wait_for(lambda: mt.end_offset(K.bootstrap, topic) == 35, 60,
               "K's %s copied again to its end" % topic)
    a, b = fk.read(K.bootstrap, topic, 0), fk.read(B.bootstrap, topic, 0)
    eq([(k, v) for _o, k, v, _t in a], [(k, v) for _o, k, v, _t in b],
       "K holds B's records again")
    d3.stop()
    print("PASS (3b): truncated: FAILED (%s); realigned on request"
          % msg[:70], flush=True)


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    A, B = h.real_kafka(2)
    man, one = "rm-" + RUN, "rc-" + RUN
    d2 = failback_setup(A, B, [man, one])
    manual(A, B, d2, man)
    one_command(A, B, d2, one)
    recreated(A, B, d2, "rr-" + RUN)
    d2.stop()
    truncated(B, "rt-" + RUN)
    print("PASS: realign after a failback divergence, manual and in one "
          "command; recreated and truncated destinations still FAILED",
          flush=True)


if __name__ == "__main__":
    h.run_main(main)
