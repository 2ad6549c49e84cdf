#!/usr/bin/env python3
"""lib/kgroup (mirrord's group membership) against real Apache Kafka 4.4.

Members are test/tools/kgroup_probe processes, static members (instance ids),
protocol type "mirrord".  Each prints `joined gen=N leader=0|1 ...
assignment=S`, `revoked why=...` and `lease held=0|1` lines; the leader assigns every member
"gen=N|leader=I|members=A,B,C|you=X", so a member's line shows the
assignment the leader made for it in that generation.

On one private single-broker cluster:
  0. a dynamic member (no instance id) is asked for a member id first
     (MEMBER_ID_REQUIRED) and then joins;
  1. three members join: one generation, exactly one leader, the leader
     sees all three instance ids (and their metadata), everyone gets the
     leader's assignment of that generation;
  2. SIGTERM of one (session timeout 45 s): it leaves (LeaveGroup) and the
     other two are in a new generation without it long before the broker
     could have dropped it for silence (deadline 30 s < 45 s);
  3. (session timeout 6 s) kill -9 of one: the others rebalance without it
     after its session timeout;
  4. SIGSTOP of the leader past the session timeout: the other member
     leads a new generation alone; SIGCONT: the old leader reports revoked
     and joins again as a follower of the new leader;
  5. a second process with the same instance id takes the membership over:
     the first reports revoked with FENCED_INSTANCE_ID;
  6. the broker (the coordinator) stopped: every member's lease runs out
     once its session timeout passes, and no member reports revoked (the
     membership is the coordinator's to end); started again on its data:
     every member's lease is renewed or it joins again, and they end in
     one generation with every member.
"""
import os
import signal
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402

PROBE = h.build_path("test", "tools", "kgroup_probe")
PROBES = []


class Probe:
    def __init__(self, kafka, group, instance, meta, session_ms, name=None):
        """instance None: a dynamic member (no group.instance.id)."""
        self.instance = instance
        self.name = name or instance
        d = h.test_dir()
        self.out_path = os.path.join(d, "%s.out" % self.name)
        self.err_path = os.path.join(d, "%s.log" % self.name)
        self.out = open(self.out_path, "wb")
        self.err = open(self.err_path, "ab")
        argv = [PROBE, "-b", kafka.bootstrap, "-g", group] \
            + (["-i", instance] if instance else []) + ["-m", meta, "-s", str(session_ms), "-r", "20000", "-t", "500",
                "-v"]
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=self.err,
                                  stdin=subprocess.DEVNULL,
                                  start_new_session=True, close_fds=True)
        PROBES.append(self)

    def events(self):
        """[(kind, fields, line)] in order; fields of joined lines as a dict."""
        ev = []
        with open(self.out_path, "rb") as f:
            for raw in f.read().decode("utf-8", "replace").splitlines():
                if raw.startswith("joined "):
                    fields = dict(kv.split("=", 1) for kv in raw.split(" ")[1:])
                    ev.append(("joined", fields, raw))
                elif raw.startswith("revoked why="):
                    ev.append(("revoked", {"why": raw[len("revoked why="):]}, raw))
                elif raw == "left":
                    ev.append(("left", {}, raw))
                elif raw.startswith("lease held="):
                    ev.append(("lease", {"held": raw[len("lease held="):]},
                               raw))
        return ev

    def last(self):
        """The last joined, revoked or left line."""
        ev = [e for e in self.events() if e[0] != "lease"]
        return ev[-1] if ev else (None, {}, "")

    def signal(self, sig):
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self):
        self.signal(signal.SIGKILL)
        self.p.wait(timeout=10)

    def describe(self):
        return "%s: %s" % (self.name, " / ".join(e[2] for e in self.events()[-4:])
                           or "(nothing yet)")


def cleanup():
    for p in PROBES:
        if p.p.poll() is None:
            p.signal(signal.SIGCONT)
            p.signal(signal.SIGKILL)
            try:
                p.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def converged(probes, min_gen=0):
    """The generation every probe's last line agrees on, or None: same
    generation (> min_gen), exactly one leader, whose member list is every
    probe's instance id, and every probe's assignment is the one the leader
    made for it in that generation."""
    lasts = [p.last() for p in probes]
    if any(kind != "joined" for kind, _, _ in lasts):
        return None
    gens = {f["gen"] for _, f, _ in lasts}
    if len(gens) != 1:
        return None
    gen = int(gens.pop())
    if gen <= min_gen:
        return None
    leaders = [p for p, (_, f, _) in zip(probes, lasts) if f["leader"] == "1"]
    if len(leaders) != 1:
        return None
    names = ",".join(sorted(p.instance for p in probes))
    lf = leaders[0].last()[1]
    if lf["members"] != names:
        return None
    for p, (_, f, _) in zip(probes, lasts):
        want = "gen=%d|leader=%s|members=%s|you=%s" % (gen, leaders[0].instance,
                                                        names, p.instance)
        if f["assignment"] != want:
            return None
    return gen, leaders[0]


def wait_converged(probes, timeout, what, min_gen=0):
    try:
        return h.wait_for(lambda: converged(probes, min_gen), timeout, what)
    except AssertionError as e:
        h.fail("%s\n%s" % (e, "\n".join(p.describe() for p in probes)))


def wait_event(p, pred, timeout, what, after=0):
    def found():
        ev = p.events()[after:]
        return next((e for e in ev if pred(e)), None)
    try:
        return h.wait_for(found, timeout, what)
    except AssertionError as e:
        h.fail("%s\n%s" % (e, p.describe()))


def main():
    k, = h.private_kafka(1, "plaintext")
    tag = str(os.getpid())

    # 0: a dynamic member (no instance id): the broker asks for a member id
    # first (MEMBER_ID_REQUIRED), then it joins and leads alone.
    dyn = Probe(k, "kg-dyn-%s" % tag, None, "dyn", 6000, name="dyn")
    j = wait_event(dyn, lambda e: e[0] == "joined", 60, "the dynamic member joins")
    h.check(j[1]["leader"] == "1" and j[1]["members"] == "" and
            j[1]["assignment"] == "gen=%s|leader=-|members=|you=" % j[1]["gen"],
            "the dynamic member leads alone: %s" % j[2])
    err = open(dyn.err_path, errors="replace").read()
    h.check("MEMBER_ID_REQUIRED: joining again as" in err,
            "the broker asked for a member id first")
    dyn.signal(signal.SIGTERM)
    h.check(dyn.p.wait(timeout=30) == 0, "the dynamic member exits 0")
    print("a dynamic member joined generation %s after MEMBER_ID_REQUIRED"
          % j[1]["gen"], flush=True)

    # 1-2: join, then one leaves with LeaveGroup (session timeout 45 s).
    g1 = "kg-leave-%s" % tag
    ps = [Probe(k, g1, "%s-%s" % (n, tag), "meta-%s" % n, 45000, name="l" + n)
          for n in ("a", "b", "c")]
    gen, leader = wait_converged(ps, 60, "three members in one generation")
    metas = leader.last()[1]["metas"]
    h.check(metas == "meta-a,meta-b,meta-c",
            "the leader saw every member's metadata: %r" % metas)
    print("three members joined generation %d, leader %s" % (gen, leader.instance),
          flush=True)
    gone = ps[2]
    gone.signal(signal.SIGTERM)
    rc = gone.p.wait(timeout=30)
    h.check(rc == 0, "the SIGTERMed member exits 0 (got %d)" % rc)
    h.check(gone.last()[0] == "left", "it printed left: %s" % gone.describe())
    err = open(gone.err_path, errors="replace").read()
    h.check("LeaveGroup: NONE" in err, "LeaveGroup answered NONE: %s"
            % err[-2000:])
    # 30 s < the 45 s session timeout: only the LeaveGroup explains it.
    gen2, leader2 = wait_converged(ps[:2], 30, "a new generation without the "
                                   "member that left", min_gen=gen)
    print("after LeaveGroup: generation %d with %s" % (gen2, [p.instance for p in ps[:2]]),
          flush=True)
    for p in ps[:2]:
        p.signal(signal.SIGTERM)
    for p in ps[:2]:
        h.check(p.p.wait(timeout=30) == 0, "%s exits 0" % p.name)

    # 3: kill -9 of one (session timeout 6 s, the broker's minimum).
    g2 = "kg-fail-%s" % tag
    ps = [Probe(k, g2, "%s-%s" % (n, tag), "m" + n, 6000, name="f" + n)
          for n in ("a", "b", "c")]
    gen, leader = wait_converged(ps, 60, "three members in one generation (6 s)")
    victim = next(p for p in ps if p is not leader)
    victim.kill()
    rest = [p for p in ps if p is not victim]
    gen, leader = wait_converged(rest, 60, "a generation without the killed "
                                 "member", min_gen=gen)
    print("after kill -9 of %s: generation %d, leader %s"
          % (victim.instance, gen, leader.instance), flush=True)

    # 4: SIGSTOP of the leader past the session timeout, then SIGCONT.
    other = next(p for p in rest if p is not leader)
    n_old = len(leader.events())
    leader.signal(signal.SIGSTOP)
    gen_alone, _ = wait_converged([other], 60, "the other member leading alone",
                                  min_gen=gen)
    h.check(other.last()[1]["leader"] == "1", "the remaining member leads")
    print("leader %s stopped: %s leads generation %d alone"
          % (leader.instance, other.instance, gen_alone), flush=True)
    leader.signal(signal.SIGCONT)
    rev = wait_event(leader, lambda e: e[0] == "revoked", 30,
                     "the resumed old leader reports revoked", after=n_old)
    gen3, new_leader = wait_converged(rest, 60, "the old leader back as a "
                                      "follower", min_gen=gen_alone)
    h.check(new_leader is other, "the member that led alone still leads "
            "(leader %s)" % new_leader.instance)
    print("old leader resumed: %s; generation %d led by %s"
          % (rev[2], gen3, other.instance), flush=True)

    # 5: a second process with the same instance id fences the first.
    first = leader
    n_old = len(first.events())
    twin = Probe(k, g2, first.instance, "twin", 6000, name="twin")
    fenced = wait_event(first, lambda e: e[0] == "revoked" and
                        "FENCED_INSTANCE_ID" in e[1]["why"], 60,
                        "the first process reports FENCED_INSTANCE_ID",
                        after=n_old)
    first.kill()  # before its backoff ends and it fences the twin in turn
    err = open(first.err_path, errors="replace").read()
    h.check("instance id %s is FENCED_INSTANCE_ID" % first.instance in err,
            "an error line names the fenced instance id")
    members = [other, twin]
    gen4, _ = wait_converged(members, 60, "the twin in the group")
    print("twin took instance %s over: %s; generation %d"
          % (first.instance, fenced[2], gen4), flush=True)

    # 6: the coordinator (the only broker) stops and starts again.
    marks = [len(p.events()) for p in members]
    k.stop()
    for p, m in zip(members, marks):
        wait_event(p, lambda e: e == ("lease", {"held": "0"}, "lease held=0"),
                   60, "%s: its lease runs out while the coordinator is down"
                   % p.name, after=m)
    for p, m in zip(members, marks):
        h.check(not any(e[0] == "revoked" for e in p.events()[m:]),
                "%s keeps its membership while the coordinator is down: %s"
                % (p.name, p.describe()))
    k.launch()
    k.wait_ready(time.monotonic() + 120)
    for p, m in zip(members, marks):
        wait_event(p, lambda e: e[0] == "joined" or
                   e == ("lease", {"held": "1"}, "lease held=1"), 90,
                   "%s: its lease renewed, or joined again, after the broker "
                   "restart" % p.name, after=m)
    gen5, leader5 = wait_converged(members, 90, "every member back after the "
                                   "broker restart")
    how = ["%s %s" % (p.name, "joined again" if any(
        e[0] == "joined" for e in p.events()[m:]) else "resumed")
        for p, m in zip(members, marks)]
    print("broker restarted: generation %d led by %s (%s)"
          % (gen5, leader5.instance, ", ".join(how)), flush=True)
    for p in members:
        p.signal(signal.SIGTERM)
    for p in members:
        h.check(p.p.wait(timeout=30) == 0, "%s exits 0" % p.name)
    print("PASS", flush=True)


if __name__ == "__main__":
    h.run_main(main, cleanup)
