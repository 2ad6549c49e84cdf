#!/usr/bin/env python3
"""Black-box test of authorization on mirrord's admin port: the real mirrord
and kafka-mirrors, librdkafka mock clusters as source and destination.

Every client here is User:ANONYMOUS on a PLAINTEXT listener and the rules
are written for it; test_admin_authz_principals.py runs the matrix for
SASL users and client certificates.

What a user checks:
- a super user may do what a deny rule forbids (User:ANONYMOUS as super user);
- after a SIGHUP reload to describe-on-*, alter-on-dev-*, deny-on-dev-secret*:
  CreateMirror prod-y, AddTopics/Pause/Resume/Remove on prod-x and
  DeleteMirror prod-x answer 144 CLUSTER_MIRROR_AUTHORIZATION_FAILED with the
  contract's message (who, what, which mirror) through kafka-mirrors, exit 1,
  and nothing changed; dev-x works; the deny rule wins over the allow on *;
  ListMirrors and DescribeMirrors without names leave out what the principal
  may not describe; a named one answers 144 whether it exists or not;
- each refusal is logged with principal and peer, and counted in
  mirrord_admin_authorization_denied_total{api,operation};
- a DescribeMirrors naming 20,000 refused mirrors is answered, logs
  one line and a summary, and the daemon keeps serving;
- the warning about anonymous mutations from other hosts appears when
  listening on 0.0.0.0 with authorization off or allowing anonymous alter
  (also after a reload), and not on 127.0.0.1 nor when anonymous may only
  describe.
"""

import json
import os
import re
import signal
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

AUTHZ_FAILED = 144
ANON = "User:ANONYMOUS"
WARNING = "accepts connections from other hosts"


# ---- clients: one per principal (mt.Client: kafka-mirrors as a principal;
# test_admin_authz_principals.py runs these checks for authenticated ones)
Client = mt.Client


# ---- DescribeMirrors on the wire (to see mirrors without topics) ---------

class Rd:
    def __init__(self, b):
        self.b, self.o = b, 0

    def take(self, n):
        v = self.b[self.o:self.o + n]
        if len(v) != n:
            raise ValueError("short response")
        self.o += n
        return v

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uv(self):
        n = shift = 0
        while True:
            c = self.take(1)[0]
            n |= (c & 0x7f) << shift
            shift += 7
            if not c & 0x80:
                return n

    def cstr(self):
        n = self.uv()
        return None if n == 0 else self.take(n - 1).decode()

    def tags(self):
        for _ in range(self.uv()):
            self.uv()
            self.take(self.uv())

    def arr(self, item):
        n = self.uv()
        return [] if n == 0 else [item() for _ in range(n - 1)]


def describe_raw(d, names=None):
    """[(mirror, error code, error message)] of one DescribeMirrors v0."""
    if names is None:
        body = b"\x00"
    else:
        body = mt.uvarint(len(names) + 1) + b"".join(
            mt.uvarint(len(n) + 1) + n.encode() for n in names)
    body += b"\x00"
    with mt.connect(d.bootstrap, 60) as s:
        s.sendall(mt.frame(99, 0, 7, body, flexible=True))
        r = Rd(mt.recv_frame(s))
    eq(r.i32(), 7, "correlation id")
    r.tags()
    r.i32()
    eq(r.i16(), 0, "DescribeMirrors top-level error")
    r.cstr()

    def part():
        r.i32(), r.i64(), r.i64(), r.i64(), r.cstr(), r.cstr(), r.tags()

    def topic():
        r.cstr(), r.arr(part), r.tags()

    def mirror():
        name, code, msg = r.cstr(), r.i16(), r.cstr()
        r.arr(topic)
        r.tags()
        return (name, code, msg)
    return r.arr(mirror)


# ---- config ------------------------------------------------------------------

def set_authorization(d, section):
    """Replace the authorization section of d's config and reload (SIGHUP);
    returns once the reload is logged complete."""
    with open(d.config_path) as f:
        text = f.read()
    text = text.split("authorization:\n")[0] + section
    with open(d.config_path, "w") as f:
        f.write(text)
    before = d.log().count("reload complete")
    d.proc.signal(signal.SIGHUP)
    h.wait_for(lambda: d.log().count("reload complete") > before, 30,
               "mirrord to reload %s" % d.config_path)


def metric(d, api, op):
    pat = re.compile(r'^mirrord_admin_authorization_denied_total\{(.*)\} (\S+)$',
                     re.M)
    for labels, v in pat.findall(d.metrics()):
        if ('api="%s"' % api in labels and 'operation="%s"' % op in labels):
            return float(v)
    return 0.0


SUPER = (
    "authorization:\n"
    "  super_users: [\"User:ANONYMOUS\"]\n"
    "  acls:\n"
    "    - {principal: \"User:*\", operations: [all], mirrors: [\"dev-secret*\"], permission: deny}\n")
RULES = (
    "authorization:\n"
    "  acls:\n"
    "    - principal: User:ANONYMOUS\n"
    "      operations: [describe]\n"
    "      mirrors: [\"*\"]\n"
    "      permission: allow\n"
    "    - principal: User:ANONYMOUS\n"
    "      operations: [alter]\n"
    "      mirrors: [\"dev-*\"]\n"
    "      permission: allow\n"
    "    - principal: \"User:*\"\n"
    "      operations: [all]\n"
    "      mirrors: [\"dev-secret*\"]\n"
    "      permission: deny\n")

mc, SRC, DST = mt.mock_pair({"orders": 2, "payments": 1})

# ---- a super user may do what a deny rule forbids ---------------------------
d = mt.Mirrord(destination=DST, extra_yaml=SUPER)
anon = Client(d)
h.check("authorization: on (1 rule, 1 super user)" in d.log(),
        "the start-up log says what authorization is in force:\n" + d.log())
for m in ("prod-x", "dev-secret-1"):
    r = anon.create(m, SRC)
    eq(r.returncode, 0, "super user creates %s (stderr: %s)" % (m, r.stderr))
anon.ok("--add", "--mirror", "prod-x", "--topic", "orders")
eq(anon.listed(), ["dev-secret-1", "prod-x"], "a super user lists every mirror")
h.check("bootstrap.servers=" in anon.ok("--describe", "--mirror", "prod-x",
                                        "--config").stdout,
        "a super user describes a mirror's configs")

# ---- the rules for anonymous clients --------------------------------------
set_authorization(d, RULES)
h.check("authorization: on (3 rules, 0 super users)" in d.log(),
        "the reload logs the rules in force")
before = {(api, op): metric(d, api, op) for api, op in (
    ("CreateMirror", "alter"), ("AddTopicsToMirror", "alter"),
    ("PauseMirrorTopics", "alter"), ("ResumeMirrorTopics", "alter"),
    ("RemoveTopicsFromMirror", "alter"), ("DeleteMirror", "alter"),
    ("DescribeMirrors", "describe"))}

# Alter on a mirror outside dev-*: 144 through the CLI, nothing changes.
anon.refused(anon.create("prod-y", SRC), "alter", "prod-y", "CreateMirror")
anon.refused(anon.cli("--add", "--mirror", "prod-x", "--topic", "payments"),
             "alter", "prod-x", "AddTopicsToMirror")
anon.refused(anon.cli("--pause", "--mirror", "prod-x", "--topic", "orders"),
             "alter", "prod-x", "PauseMirrorTopics")
anon.refused(anon.cli("--resume", "--mirror", "prod-x", "--topic", "orders"),
             "alter", "prod-x", "ResumeMirrorTopics")
anon.refused(anon.cli("--remove", "--mirror", "prod-x", "--topic", "orders"),
             "alter", "prod-x", "RemoveTopicsFromMirror")
anon.refused(anon.cli("--delete", "--mirror", "prod-x"),
             "alter", "prod-x", "DeleteMirror")
# A mirror that does not exist is refused the same way (no existence leak).
anon.refused(anon.cli("--delete", "--mirror", "prod-ghost"),
             "alter", "prod-ghost", "DeleteMirror")
# A mirror's configs need describe_configs and alter_configs, which
# describe and alter do not imply (as in Kafka).
anon.refused(anon.cli("--describe", "--mirror", "prod-x", "--config"),
             "describe_configs", "prod-x", "DescribeConfigs")
anon.refused(anon.cli("--alter", "--mirror", "dev-secret-1", "--add-config",
                      "mirror.fetch.wait.max.ms=300"),
             "alter_configs", "dev-secret-1", "IncrementalAlterConfigs")
topics = {p["topic"] for p in json.loads(
    anon.ok("--describe", "--json", "--mirror", "prod-x").stdout)}
eq(topics, {"orders"}, "prod-x's topics after the refused operations")
h.check("prod-y" not in anon.listed(), "a refused CreateMirror created nothing")

# Alter on dev-*: allowed.
r = anon.create("dev-x", SRC)
eq(r.returncode, 0, "anonymous creates dev-x (stderr: %s)" % r.stderr)
anon.ok("--add", "--mirror", "dev-x", "--topic", "payments")
anon.ok("--pause", "--mirror", "dev-x", "--topic", "payments")
anon.ok("--resume", "--mirror", "dev-x", "--topic", "payments")
# The deny rule wins over the allow on dev-* (and on describe *).
anon.refused(anon.create("dev-secret-2", SRC), "alter", "dev-secret-2",
             "CreateMirror")

# Listings leave out what may not be described; a named one is 144.
eq(anon.listed(), ["dev-x", "prod-x"], "ListMirrors filtered by describe")
eq(sorted(m for m, _, _ in describe_raw(d)), ["dev-x", "prod-x"],
   "DescribeMirrors without names, filtered by describe")
got = describe_raw(d, ["dev-secret-1", "prod-x", "dev-secret-none"])
eq([(m, c) for m, c, _ in got],
   [("dev-secret-1", AUTHZ_FAILED), ("prod-x", 0),
    ("dev-secret-none", AUTHZ_FAILED)], "DescribeMirrors with names")
eq(got[0][2], "%s may not describe mirror dev-secret-1 (DescribeMirrors)"
   % ANON, "the 144 message of DescribeMirrors")
anon.refused(anon.cli("--describe", "--mirror", "dev-secret-1"), "describe",
             "dev-secret-1", "DescribeMirrors")

# Each refusal is logged (principal, peer, operation, mirror, why).
log = d.log()
for line in ("authorization: User:ANONYMOUS from 127.0.0.1:",
             "may not alter mirror prod-y (CreateMirror): no rule allows it",
             "may not alter mirror dev-secret-2 (CreateMirror): denied by "
             "authorization.acls[2] (%s:" % d.config_path,
             "may not describe mirror dev-secret-1 (DescribeMirrors): denied by"):
    h.check(line in log, "the log has %r:\n%s" % (line, log[-3000:]))

# ... and counted.
want = {("CreateMirror", "alter"): 2, ("AddTopicsToMirror", "alter"): 1,
        ("PauseMirrorTopics", "alter"): 1, ("ResumeMirrorTopics", "alter"): 1,
        ("RemoveTopicsFromMirror", "alter"): 1, ("DeleteMirror", "alter"): 2,
        ("DescribeMirrors", "describe"): 3}
for k, n in want.items():
    eq(metric(d, *k) - before[k], n, "mirrord_admin_authorization_denied_total"
       "{api=%s,operation=%s} increase" % k)

# One hostile request naming 20,000 refused mirrors: answered, one log line
# and a summary, counted, the daemon still serves.  A name repeated many
# times is answered (and refused, logged, counted) once.
got = describe_raw(d, ["dev-secret-1"] * 20000)
eq(len(got), 1, "answers to one refused name given 20,000 times")
h.check(got[0][1] == AUTHZ_FAILED, "the repeated name refused")
lines_before = d.log().count("more mirror(s) of the same DescribeMirrors")
names = ["dev-secret-%d" % i for i in range(20000)]
got = describe_raw(d, names)
eq(len(got), 20000, "answers to 20,000 names")
h.check(all(c == AUTHZ_FAILED for _, c, _ in got), "every one refused")
h.wait_for(lambda: "19999 more mirror(s) of the same DescribeMirrors" in d.log(),
           10, "the summary line of the refusals")
eq(d.log().count("more mirror(s) of the same DescribeMirrors") - lines_before,
   1, "one summary line for 20,000 refusals")
eq(metric(d, "DescribeMirrors", "describe") - before[("DescribeMirrors",
   "describe")], 3 + 1 + 20000, "refusals counted one per mirror")
h.check(mt.api_versions_ok(d.bootstrap), "mirrord answers after the flood")
# ApiVersions and Metadata stay open (kcat -L bootstraps).
r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"])
eq(r.returncode, 0, "kcat -L under authorization (stderr: %s)" % r.stderr)

h.check(WARNING not in d.log(), "no exposure warning on 127.0.0.1:\n"
        + d.log()[-2000:])

# On with no rules (what an authenticating listener gets by default):
# everyone but super users is denied, yet ApiVersions and Metadata answer.
set_authorization(d, "authorization:\n  enabled: true\n")
h.check("authorization: on (0 rules, 0 super users; everyone else is denied)"
        in d.log(), "the reload logs deny-by-default")
eq(anon.listed(), [], "ListMirrors with no rules")
eq(describe_raw(d), [], "DescribeMirrors with no rules")
anon.refused(anon.create("dev-z", SRC), "alter", "dev-z", "CreateMirror")
anon.refused(anon.cli("--describe", "--mirror", "dev-x"), "describe", "dev-x",
             "DescribeMirrors")
r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"])
eq(r.returncode, 0, "kcat -L with everyone denied (stderr: %s)" % r.stderr)
h.check("broker 42 at 127.0.0.1:%d" % d.port in r.stdout,
        "Metadata still names mirrord:\n" + r.stdout)
d.stop()


# ---- the exposure warning ----------------------------------------------------
def on_all_interfaces(name, section):
    x = mt.Mirrord(destination=DST, name=name, extra_yaml=section, start=False)
    with open(x.config_path) as f:
        text = f.read()
    local = 'listen: "127.0.0.1:%d"' % x.port
    h.check(local in text, "the test config names %s" % local)
    with open(x.config_path, "w") as f:
        f.write(text.replace(local, 'listen: "0.0.0.0:%d"' % x.port))
    x.start()
    return x


def warned(x):
    return [l for l in x.log().splitlines() if WARNING in l]


# Authorization off (no rules, PLAINTEXT): one warning naming the address
# and what to configure.
x = on_all_interfaces("exposed", "")
h.wait_for(lambda: warned(x), 10, "the exposure warning")
w = warned(x)
eq(len(w), 1, "exposure warnings at start")
for part in ("0.0.0.0:%d" % x.port, "User:ANONYMOUS", "authorization is off",
             "server.listen", "127.0.0.1:%d" % x.port, "authorization.acls"):
    h.check(part in w[0], "the warning names %r: %s" % (part, w[0]))
x.stop()

# Anonymous may only describe: no warning; a reload that lets it alter
# dev-* warns; one back to describe-only does not warn again.
DESCRIBE_ONLY = (
    "authorization:\n  acls:\n"
    "    - {principal: User:ANONYMOUS, operations: [describe], mirrors: [\"*\"], permission: allow}\n")
x = on_all_interfaces("describe-only", DESCRIBE_ONLY)
h.check(not warned(x), "no warning when anonymous clients may only describe:\n"
        + x.log())
set_authorization(x, RULES)
h.wait_for(lambda: warned(x), 10, "the exposure warning after the reload")
h.check("allowed by authorization.acls or authorization.super_users" in
        warned(x)[0], "the warning says the rules allow it: %s" % warned(x)[0])
set_authorization(x, DESCRIBE_ONLY)
eq(len(warned(x)), 1, "warnings after reloading back to describe-only")
x.stop()

print("ok: authorization checks, 144 answers, filtering, logging, metrics and "
      "the exposure warning")
