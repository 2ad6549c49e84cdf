#!/usr/bin/env python3
"""Followers of the replicated metadata log on real Kafka 4.4:
peers (test/tools/mlogk_peer: the real lib/mlog_kafka and lib/mstate) on one
metadata topic, one writer and followers, checked through the digest of
each peer's whole model (mstate_dump):

  * a follower tails the writer's changes live (its mstate hooks fire) and
    its model is the writer's;
  * a follower's writes go through the writer (request topic, REPLY): they
    are accepted and both models are identical; a write the writer's
    request handler refuses gets the writer's error code and message and
    changes nothing anywhere; a write that no longer applies to the
    writer's model (a stale follower) is refused all or nothing;
  * a follower's asynchronous write (mpart_add_anchor_async) with the
    writer paused: its loop keeps answering while the write is out, and
    the write completes once the writer resumes;
  * the follower's wait on a paused writer ends with "outcome unknown"
    within storage.kafka.timeout_ms, and the request, answered once the
    writer resumes, is applied once on every peer;
  * writer SIGSTOPped, a follower promoted, the old writer SIGCONTed: its
    next append is refused by the broker (fenced) and it demotes itself to
    a follower that catches up with the new writer and writes through it;
  * a follower that fell behind the log start (the writer's snapshot
    deleted what it had not read) rebuilds its model from the newest
    snapshot in place, no restart: its hooks see the mirror deleted, the
    mirrors and topic created and the state changed meanwhile, and its
    model equals the writer's; it then tails and writes on as before;
  * the asynchronous promotion (as mirrord's cluster promotes) with the
    broker stopped: the peer's loop answers at once, a demotion cancels
    it, a second one ends as the writer once the broker continues, and
    the followers write through it;
  * a restart of every peer reads the same model (snapshot + log).
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    Producer = None

RUN = "%d" % (os.getpid() % 100000)
TIMEOUT_MS = 4000


class Peer:
    def __init__(self, bootstrap, topic, name, role, compact=0):
        self.name = name
        self.events = []
        self.lines = queue.Queue()
        self.p = subprocess.Popen(
            [h.build_path("test", "tools", "mlogk_peer"), bootstrap, topic, name, role,
             str(TIMEOUT_MS), str(compact)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(os.path.join(h.test_dir(), name + ".log"), "a"),
            text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()
        first = self.answer(60)
        h.check(first == "open " + role,
                "%s did not open as %s: %r" % (name, role, first))

    def _read(self):
        for line in self.p.stdout:
            line = line.rstrip("\n")
            if line.startswith("event "):
                self.events.append(line)
            else:
                self.lines.put(line)
        self.lines.put(None)

    def answer(self, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            h.fail("%s: no answer within %ds" % (self.name, timeout))
        if line is None:
            h.fail("%s exited (rc %r); its log: %s" % (
                self.name, self.p.wait(10), self.log()[-3000:]))
        return line

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def cmd(self, line, timeout=60):
        self.send(line)
        return self.answer(timeout)

    def rc(self, line, timeout=60):
        """(code, message) of a mutation."""
        a = self.cmd(line, timeout)
        h.check(a.startswith("rc "), "%s: %r answered %r" % (self.name, line, a))
        parts = a.split(" ", 2)
        return int(parts[1]), parts[2] if len(parts) > 2 else ""

    def ok(self, line):
        code, msg = self.rc(line)
        h.check(code == 0, "%s: %r failed: %d %s" % (self.name, line, code, msg))

    def digest(self):
        a = self.cmd("digest")
        h.check(a.startswith("digest "), "%s: digest answered %r" % (self.name, a))
        return a.split()[1]

    def dump(self):
        self.send("dump")
        out = []
        while True:
            line = self.answer()
            if line == "end":
                return "\n".join(out)
            out.append(line)

    def names(self):
        """The mirrors and the topics of the peer's model, by name, from
        its dump's "mirror NAME" and "topic NAME partitions" lines (a
        substring of the whole dump is no test: the random cluster id in
        it may hold "m3")."""
        mirrors, topics = set(), set()
        for line in self.dump().splitlines():
            w = line.split()
            if len(w) == 2 and w[0] == "mirror":
                mirrors.add(w[1])
            elif len(w) >= 3 and w[0] == "topic" and w[2] == "partitions":
                topics.add(w[1])
        return mirrors, topics

    def mirrors(self):
        return self.names()[0]

    def topics(self):
        return self.names()[1]

    def role(self):
        return self.cmd("role").split()[1]

    def log(self):
        with open(os.path.join(h.test_dir(), self.name + ".log")) as f:
            return f.read()

    def stop(self):
        if self.p.poll() is None:
            try:
                self.send("quit")
            except OSError:
                pass
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)

    def signal(self, sig):
        """Signal the peer; SIGSTOP returns once it is stopped (kill()
        returns before, and a loaded machine lets it run on meanwhile)."""
        if sig == signal.SIGSTOP:
            h.sigstop(self.p.pid)
        else:
            os.kill(self.p.pid, sig)


def log_start(bootstrap, topic):
    c = kraw.Cluster(bootstrap)
    try:
        return c.offsets(topic, 0)[0]
    finally:
        c.close()


def same(peers, what, timeout=30):
    """Waits until every peer's model digest is the same; returns it."""
    last = {}

    def check():
        last.clear()
        for p in peers:
            last[p.name] = p.digest()
        return len(set(last.values())) == 1
    h.wait_for(check, timeout, "%s: identical models (%r)" % (what, last))
    return next(iter(last.values()))


def main():
    (dst,) = h.real_kafka(1)
    B = dst.bootstrap
    topic = "mlogf-meta-" + RUN
    peers = []

    def start(name, role, compact=0):
        p = Peer(B, topic, name, role, compact)
        peers.append(p)
        return p

    a = start("a", "writer")
    b = start("b", "follower")
    h.check(a.role() == "writer" and b.role() == "follower",
            "roles after open: a %s, b %s" % (a.role(), b.role()))

    # ---- the follower tails the writer's changes live -------------------
    a.ok("create m1")
    a.ok("add m1 t1 2")
    a.ok("state m1 t1 0 MIRRORING caught-up")
    a.ok("anchor m1 t1 0 100 90")
    same([a, b], "writer's changes tailed")
    h.wait_for(lambda: "event hook state m1/t1-0 PREPARING->MIRRORING"
               in b.events, 10, "the follower's state hook for m1/t1-0 "
               "(events %r)" % b.events)
    h.check("event hook topic m1/t1" in b.events,
            "no topic hook on the follower: %r" % b.events)
    h.check("anchor" not in "".join(a.events) and "m1" in b.mirrors(),
            "m1 not in the follower's model")

    # ---- follower writes through the writer -----------------------------
    b.ok("create m2")
    b.ok("add m2 t2 1")
    b.ok("state m2 t2 0 MIRRORING")
    b.ok("anchor m2 t2 0 10 12")
    b.ok("epoch m2 t2 0 3 0")
    d = same([a, b], "follower's writes accepted")
    mirrors, topics = a.names()
    h.check("m2" in mirrors and "t2" in topics,
            "the follower's mirror is not in the writer's model:\n"
            + a.dump())
    h.check("event hook topic m2/t2" in a.events,
            "no topic hook on the writer for the forwarded write: %r"
            % a.events)

    # ---- a refusal of the handler: the writer's message, nothing changed -
    code, msg = b.rc("add m2 refuse-t 1")
    h.check(code == 44 and "owned by instance other-owner" in msg
            and "refuse-t-0" in msg,
            "refused write: want 44 and the writer's message, got %d %r"
            % (code, msg))
    h.check(same([a, b], "after the refusal") == d,
            "a refused write changed the models")
    h.check("refuse-t" not in a.topics() and "refuse-t" not in b.topics(),
            "the refused topic is in a model")

    # ---- a malformed request: refused with a REPLY, the queue goes on ---
    if Producer is not None:
        pr = Producer({"bootstrap.servers": B, "acks": "all"})
        pr.produce(topic + "-requests", key=b"intruder", value=b"\x00\x01junk")
        if pr.flush(30):
            h.fail("the malformed request was not delivered")
        h.wait_for(lambda: "is malformed" in a.log(), 30,
                   "the writer names the malformed request")
        h.check('from instance "intruder" is malformed: request header'
                in a.log(), "the refusal does not name the instance and "
                "the fault: " + a.log()[-2000:])
        b.ok("add m2 t3 1")      # the queue is not stuck behind it
        d = same([a, b], "after the malformed request")

    # ---- a stale follower's write that no longer applies --------------
    c = start("c", "follower")
    same([a, b, c], "third peer opened")
    c.cmd("autopoll off")
    b.ok("state m1 t1 1 STOPPING")
    code, msg = c.rc("state m1 t1 1 PAUSING")
    h.check(code == 42 and "does not apply to the writer's model" in msg
            and "STOPPING -> PAUSING" in msg,
            "stale write: want 42 naming the transition, got %d %r"
            % (code, msg))
    c.cmd("autopoll on")
    d = same([a, b, c], "after the stale write")
    h.check("event hook state m1/t1-1 PREPARING->STOPPING" in c.events,
            "the stale follower did not apply the writer's change live: %r"
            % c.events)

    # ---- a follower's asynchronous write does not block its loop --------
    # The writer paused: the follower's anchor write (mpart_add_anchor_
    # async) goes out on the log's thread and its group waits for the
    # writer's REPLY; meanwhile the follower's loop answers at once.
    # Resumed, the writer answers; the write completes and is applied on
    # every peer, once.
    a.signal(signal.SIGSTOP)
    try:
        r = c.cmd("aanchor m1 t1 0 200 195", timeout=2)
        h.check(r.startswith("rc 0 started "),
                "the asynchronous write did not start: %r" % r)
        wid = r.split()[3]
        for _ in range(3):
            h.check(c.cmd("role", timeout=3) == "role follower",
                    "the follower's loop did not answer")
            h.check(c.cmd("digest", timeout=3).startswith("digest "),
                    "the follower's loop did not answer a digest")
        outstanding = not any(e.startswith("event done %s " % wid)
                              for e in c.events)
    finally:
        a.signal(signal.SIGCONT)
    h.check(outstanding, "the write completed while the writer was "
            "stopped: %r" % c.events)
    h.wait_for(lambda: any(e.startswith("event done %s " % wid)
                           for e in c.events), 30,
               "the asynchronous write's completion (%r)" % c.events)
    done = [e for e in c.events if e.startswith("event done %s " % wid)][0]
    # Normally accepted (0); if the pause outlived storage.kafka.timeout_ms
    # the outcome was unknown (7) and the tail applies it later anyway.
    h.check(done.split()[3] in ("0", "7"), "async write: %r" % done)
    print("asynchronous follower write while the writer was paused: %s"
          % done)
    h.wait_for(lambda: all("anchor 200 -> 195" in p.dump() for p in (a, b, c)), 30,
               "the anchor 200->195 on every peer")
    d = same([a, b, c], "after the asynchronous write")
    # The writer's own asynchronous write: a Produce on its log's thread.
    r = a.cmd("aanchor m1 t1 0 300 290", timeout=5)
    h.check(r.startswith("rc 0 started "), "the writer's asynchronous "
            "write did not start: %r" % r)
    wid = r.split()[3]
    h.wait_for(lambda: any(e.startswith("event done %s 0" % wid)
                           for e in a.events), 30,
               "the writer's asynchronous write completed (%r)" % a.events)
    h.wait_for(lambda: all("anchor 300 -> 290" in p.dump()
                           for p in (a, b, c)), 30,
               "the anchor 300->290 on every peer")
    d = same([a, b, c], "after the writer's asynchronous write")

    # ---- the writer paused: outcome unknown, applied once later ---------
    a.signal(signal.SIGSTOP)
    t0 = time.monotonic()
    code, msg = b.rc("create m3", timeout=TIMEOUT_MS / 1000 + 30)
    waited = time.monotonic() - t0
    h.check(code != 0 and "outcome unknown" in msg,
            "write to a paused writer: want outcome unknown, got %d %r"
            % (code, msg))
    print("the wait on a paused writer ended after %.1fs: %s" % (waited, msg))
    h.check(b.role() == "follower", "b changed role")
    a.signal(signal.SIGCONT)
    h.wait_for(lambda: "m3" in a.mirrors(), 30, "the resumed writer answers "
               "the request it found waiting")
    h.wait_for(lambda: "m3" in b.mirrors() and "m3" in c.mirrors(), 30,
               "the late accepted m3 tailed by the followers")
    same([a, b, c], "the late request applied")
    h.check(sum(1 for e in b.events if e == "event hook 0 m3") == 1,
            "the late mirror m3 was not applied exactly once on b: %r"
            % [e for e in b.events if "m3" in e])
    code, msg = b.rc("create m3")
    h.check(code != 0, "m3 created twice")

    # ---- promotion and fencing -------------------------------------------
    a.cmd("autopoll off")
    a.signal(signal.SIGSTOP)
    code, msg = b.rc("promote")
    h.check(code == 0, "promote failed: %d %s" % (code, msg))
    h.check(b.role() == "writer", "b is not the writer after promote")
    h.wait_for(lambda: any(e.startswith("event role writer") for e in b.events),
               10, "the role hook on promotion")
    b.ok("create m4")
    a.signal(signal.SIGCONT)
    code, msg = a.rc("create m5")
    h.check(code != 0 and "fenced" in msg,
            "the deposed writer's append: want fenced, got %d %r" % (code, msg))
    h.check(a.role() == "follower", "the fenced writer did not demote")
    h.wait_for(lambda: any(e.startswith("event role follower") and "fenced" in e
                           for e in a.events),
               10, "the role hook on fencing (%r)" % a.events)
    a.cmd("autopoll on")
    same([a, b, c], "after the promotion")
    h.check("m5" not in b.mirrors() and "m4" in a.mirrors(),
            "the fenced write landed, or the old writer did not catch up")
    a.ok("create m6")            # the old writer now writes through b
    d = same([a, b, c], "the demoted writer's forwarded write")
    h.check("m6" in b.mirrors(), "m6 not in the new writer's model")

    # ---- an explicit demotion and promotion -------------------------------
    b.cmd("demote")
    h.check(b.role() == "follower", "b still the writer after demote")
    h.check(any(e.startswith("event role follower asked by the test")
                for e in b.events), "no role hook on demote: %r" % b.events)
    code, msg = b.rc("promote")
    h.check(code == 0 and b.role() == "writer", "re-promote: %d %s"
            % (code, msg))
    c.ok("create m9")
    d = same([a, b, c], "after demote and promote")

    # ---- the asynchronous promotion: the loop is never blocked ------------
    # As mirrord's cluster promotes: InitProducerId, the claim and the
    # read to the log end run on the log's thread.  With the broker
    # stopped, the promoting peer's loop answers at once; a demotion
    # cancels the promotion (no event), a second one goes on after it and
    # ends as the writer once the broker continues.
    b.cmd("demote")
    h.check(b.role() == "follower", "b still the writer after demote")
    h.sigstop(dst.pid)
    try:
        code, msg = c.rc("apromote")
        h.check(code == 0 and msg.startswith("started "),
                "apromote: %d %r" % (code, msg))
        first = msg.split()[1]
        t0 = time.monotonic()
        h.eq(c.role(), "follower", "c's role while its promotion waits on "
             "the stopped broker")
        c.digest()
        waited = time.monotonic() - t0
        h.check(waited < 1.5, "c's loop answered after %.1fs with the "
                "broker stopped: the promotion blocks it" % waited)
        code, msg = c.rc("apromote")
        h.check(code != 0 and "in progress" in msg,
                "a second apromote while one runs: %d %r" % (code, msg))
        c.cmd("demote")          # cancels it
        code, msg = c.rc("apromote")
        h.check(code == 0 and msg.startswith("started "),
                "apromote after the cancel: %d %r" % (code, msg))
        second = msg.split()[1]
        time.sleep(1)
    finally:
        os.kill(dst.pid, signal.SIGCONT)
    h.wait_for(lambda: any(e.startswith("event promoted %s " % second)
                           for e in c.events), TIMEOUT_MS / 1000 + 30,
               "the second promotion's end (%r)" % c.events)
    ev = [e.split()[2:4] for e in c.events
          if e.startswith("event promoted")]
    h.eq(ev, [[second, "0"]],
         "c's promotion events: id, rc (the cancelled one, %s, has none)"
         % first)
    h.eq(c.role(), "writer", "c's role after its promotion")
    h.check(any(e.startswith("event role writer promoted") for e in c.events),
            "no role hook on c's promotion: %r" % c.events)
    b.ok("create m10")           # through the new writer
    same([a, b, c], "m10 tailed")
    a.ok("add m10 t10 1")
    d = same([a, b, c], "after the asynchronous promotion")
    h.check("m10" in c.mirrors(), "m10 not in c's model")

    # ---- restart of every peer reads the same model ---------------------
    for p in list(peers):
        p.stop()
    peers.clear()
    b = start("b2", "writer")
    a = start("a2", "follower")
    h.check(same([a, b], "restarted") == d,
            "the model after a restart differs from before")

    # ---- snapshots: a follower that fell behind the log start -----------
    # With followers the writer deletes only what its previous snapshot
    # replaced: a follower that reads during each snapshot interval (a)
    # keeps up; one that read nothing across two snapshots (c) has lost
    # records and rebuilds its model from the newest snapshot in place,
    # without a restart, its hooks seeing what changed meanwhile.
    c = start("c2", "follower")
    b.ok("create gone")
    b.ok("create m20")
    b.ok("add m20 t20 2")
    h.wait_for(lambda: "gone" in c.mirrors() and "t20" in c.topics(), 20,
               "c tailed gone and m20/t20")
    c.cmd("autopoll off")
    before = len(c.events)
    b.ok("delete gone")
    b.ok("add m20 t21 1")
    b.ok("state m20 t20 0 STOPPING")
    b.ok("create m7")
    b.ok("compact")
    h.check(log_start(B, topic) == 0, "the first snapshot with followers "
            "deleted records (log start %d)" % log_start(B, topic))
    h.wait_for(lambda: "m7" in a.mirrors(), 20, "a tailed m7")
    code, msg = b.rc("create m8")
    h.check(code == 0, "create m8: %d %s" % (code, msg))
    b.ok("compact")
    h.wait_for(lambda: "m8" in a.mirrors(), 20, "a tailed past the snapshots")
    h.check(log_start(B, topic) > 0, "the second snapshot deleted nothing")
    pid = c.p.pid
    answers = []

    def rebuilt():
        # Each poll collects the Fetch the previous one started on the
        # log's thread (the rebuild happens there) and starts the next.
        answers.append(c.cmd("poll"))
        return "rebuilt" in c.log()
    h.wait_for(rebuilt, 30, "c rebuilt its model (polls answered %r, its "
               "log %s)" % (answers, c.log()[-2000:]))
    h.check("fell behind the log start" in c.log() and
            not any(x.startswith("polled -1") or "restart" in x
                    for x in answers),
            "a follower behind the trimmed log start did not rebuild "
            "cleanly: %r" % answers)
    seen = c.events[before:]
    for want in ("event hook 1 gone", "event hook 0 m7", "event hook 0 m8",
                 "event hook topic m20/t21",
                 "event hook state m20/t20-0 PREPARING->STOPPING"):
        h.check(want in seen, "the rebuild did not show %r to the hooks "
                "(events %r)" % (want, seen))
    h.check(not any(e in ("event hook 0 m1", "event hook 0 m2",
                         "event hook 0 m20") for e in seen),
            "the rebuild re-created mirrors that were there: %r" % seen)
    dc = same([a, b, c], "after the rebuild")
    h.check("gone" not in c.mirrors() and c.p.pid == pid and c.p.poll() is None,
            "c is not the same process with mirror gone deleted")
    # It goes on tailing, and writing through the writer, as before.
    c.cmd("autopoll on")
    b.ok("create m11")
    c.ok("create m12")
    h.check(same([a, b, c], "after the rebuild, tailing") != dc,
            "nothing changed after the rebuild")
    h.check("m11" in c.mirrors() and "m12" in b.mirrors(), "m11/m12 missing")
    c.stop()
    c = start("c3", "follower")
    same([a, b, c], "after the snapshot, restarted")
    for p in peers:
        p.stop()


if __name__ == "__main__":
    h.run_main(main)
