#!/usr/bin/env python3
"""Authorization for real principals: the security matrix of the admin
listener against the real mirrord, kafka-mirrors, kcat and kafka-python,
with a librdkafka mock cluster as source and destination.

Two listeners, each on 0.0.0.0 (clients use 127.0.0.1), one daemon each:
- SASL_SSL with SCRAM-SHA-512 (and PLAIN) users from `mirrord --add-user`:
  alice may alter dev-* and describe *, bob may describe *, carol has no
  rule, admin is a super user, and a deny rule on dev-secret* for User:*
  wins over alice's allows (not over the super user);
- SSL with client certificates required, where the principal is the
  certificate's RFC 2253 subject: User:CN=ops,O=Example\\, Inc. may alter
  ops-* and describe *, User:CN=root,O=example is a super user and
  User:CN=intern,O=example has no rule; a trusted certificate whose
  subject is too long to be a principal (593 bytes) is refused, not cut to
  the 511 bytes that name another super user; one that fits (465 bytes)
  gets a 144 message naming it whole, the operation and the mirror.

What a user checks, for every principal through kafka-mirrors
(--command-config): allowed operations exit 0 and show in --list and
--describe; denied ones exit 1 with CLUSTER_MIRROR_AUTHORIZATION_FAILED
(144) and the contract's message naming the principal, the operation and
the mirror, change nothing, are logged with the principal and the peer and
counted in mirrord_admin_authorization_denied_total{api,operation};
ListMirrors and DescribeMirrors leave out what the principal may not
describe; with only a super user configured everyone else is denied
(SASL turns authorization on by default); rule changes by SIGHUP reach the
next request.  Metadata answers every authenticated principal (kcat -L and
kafka-python's describe_cluster, also for principals without any rule); a
wrong password is SASL_AUTHENTICATION_FAILED (58), before any
authorization.  No password (SCRAM logins, PLAIN logins that send it in
clear, wrong ones) shows in mirrord's log, in any file under
storage.data_dir, in kafka-mirrors' output (DescribeMirrors included) or
in /metrics.  The exposure warning: none for these two listeners on
0.0.0.0; one for PLAINTEXT and for SSL without client certificates on
0.0.0.0 with authorization off.
"""

import collections
import json
import os
import re
import signal
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

try:
    from kafka.admin import KafkaAdminClient
    import kafka.errors
except ImportError:
    h.skip("kafka-python (Debian's python3-kafka) is not installed")

TMP = h.test_dir()
PW = {"alice": "alice-Kq7-pw-31x8", "bob": "bob-Kq7-pw-f02m",
      "carol": "carol-Kq7-pw-9zt4", "admin": "admin-Kq7-pw-u6e1"}
WRONG = "wrong-Kq7-pw-0000"
WARNING = "accepts connections from other hosts"

OPS = "User:CN=ops,O=Example\\, Inc."
ROOT = "User:CN=root,O=example"
INTERN = "User:CN=intern,O=example"


def ous(n):
    """n organizational units of 60 letters: a long subject."""
    return ["OU=" + chr(ord("a") + i) * 60 for i in range(n)]


# A principal holds at most 511 bytes: wide's subject fits (465 bytes),
# long's (593) does not, and must not be cut to a name that matches a rule.
WIDE = "User:" + ",".join(["CN=wide"] + ous(7)[::-1] + ["O=example"])
LONG = "User:" + ",".join(["CN=long"] + ous(9)[::-1] + ["O=example"])
LONG_CUT = LONG[:511]
PKI = mt.make_pki(os.path.join(TMP, "pki"), {
    "ops": "/O=Example, Inc./CN=ops", "root": "/O=example/CN=root",
    "intern": "/O=example/CN=intern",
    "wide": "/O=example/%s/CN=wide" % "/".join(ous(7)),
    "long": "/O=example/%s/CN=long" % "/".join(ous(9))})

CREDS = os.path.join(TMP, "credentials")
for user, pw in sorted(PW.items()):
    mt.add_user(CREDS, user, pw)


mc = MockCluster(clusters=2, brokers=1,
                 log_path=os.path.join(TMP, "mock.log"))
SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
# A topic is in one mirror at a time: each mirror has its own.
for c in (0, 1):
    for topic, n in (("orders", 2), ("payments", 1), ("refunds", 1),
                     ("audit", 1), ("ledger", 1), ("billing", 1),
                     ("events", 1)):
        mc.cmd("topic %d %s %d" % (c, topic, n))


# ---- daemons ----------------------------------------------------------------

def tls_yaml(client_auth):
    return ("  ssl:\n    certificate_location: \"%s\"\n"
            "    key_location: \"%s\"\n    ca_location: \"%s\"\n"
            "    client_auth: %s\n" % (PKI["server"], PKI["server-key"],
                                       PKI["ca"], client_auth))


SASL_YAML = ("  sasl:\n    enabled_mechanisms: \"SCRAM-SHA-512,PLAIN\"\n"
             "    credentials_file: \"%s\"\n" % CREDS)


def start(name, protocol, server_yaml="", authorization=""):
    """mirrord listening on 0.0.0.0 (advertising 127.0.0.1, where the
    clients go) with this security and authorization section."""
    d = mt.Mirrord(destination=DST, name=name, extra_yaml=authorization,
                   start=False)
    with open(d.config_path) as f:
        text = f.read()
    local = "  listen: \"127.0.0.1:%d\"\n" % d.port
    h.check(local in text, "the test config names %s" % local)
    text = text.replace(local, "  listen: \"0.0.0.0:%d\"\n"
                        "  advertised: \"127.0.0.1:%d\"\n"
                        "  security_protocol: %s\n%s"
                        % (d.port, d.port, protocol, server_yaml))
    with open(d.config_path, "w") as f:
        f.write(text)
    d.start_listening()
    return d


def reload(d, section):
    """Replace d's authorization section and SIGHUP; returns once the
    reload is logged complete."""
    with open(d.config_path) as f:
        text = f.read()
    with open(d.config_path, "w") as f:
        f.write(text.split("authorization:\n")[0] + section)
    before = d.log().count("reload complete")
    d.proc.signal(signal.SIGHUP)
    h.wait_for(lambda: d.log().count("reload complete") > before, 30,
               "%s to reload %s" % (d.name, d.config_path))


def warned(d):
    return [line for line in d.log().splitlines() if WARNING in line]


# ---- refusals: answered, logged and counted ---------------------------------

class Refusals:
    """Expects each refusal once in d's log and counts it, to compare with
    mirrord_admin_authorization_denied_total at the end."""

    def __init__(self, d):
        self.d = d
        self.base = mt.denied_total(d)
        self.want = collections.Counter()

    def logged(self, who, op, mirror, api, why):
        pat = re.compile(r"authorization: %s from 127\.0\.0\.1:\d+ may not "
                         r"%s mirror %s \(%s\): %s"
                         % tuple(map(re.escape, (who, op, mirror, api, why))))
        return len(pat.findall(self.d.log()))

    def __call__(self, c, run, op, mirror, api, why=""):
        """run() is one kafka-mirrors call by client c that must be refused
        with 144 for op on mirror (api); why is the start of the logged
        reason."""
        before = self.logged(c.principal, op, mirror, api, why)
        c.refused(run(), op, mirror, api)
        h.wait_for(lambda: self.logged(c.principal, op, mirror, api, why)
                   == before + 1, 10, "the refusal of %s %s %s for %s in the "
                   "log (%s)" % (api, op, mirror, c.principal,
                                 self.d.proc.log_path))
        self.want[(api, op)] += 1

    def check_counted(self):
        got = mt.denied_total(self.d)
        h.check(sum(self.want.values()) > 0, "no refusal was tested")
        for k in set(got) | set(self.want):
            eq(got.get(k, 0) - self.base.get(k, 0), self.want[k],
               "%s: mirrord_admin_authorization_denied_total{api=%s,"
               "operation=%s} increase" % ((self.d.name,) + k))


def topics_of(c, mirror):
    return {p["topic"]: p["state"] for p in json.loads(
        c.ok("--describe", "--json", "--mirror", mirror).stdout)}


def kp_describe_cluster(d, **kw):
    a = KafkaAdminClient(bootstrap_servers=d.bootstrap,
                         request_timeout_ms=10000,
                         api_version_auto_timeout_ms=10000, **kw)
    try:
        return a.describe_cluster()
    finally:
        a.close()


def kcat_metadata(d, args, who):
    r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"] + args)
    eq(r.returncode, 0, "%s: kcat -L (stderr: %s)" % (who, r.stderr))
    h.check("broker 42 at 127.0.0.1:%d" % d.port in r.stdout,
            "%s: kcat -L shows mirrord as broker 42:\n%s" % (who, r.stdout))


# =============================================================================
# SASL_SSL with SCRAM-SHA-512 users
# =============================================================================

def sasl_props(user, password=None, mech="SCRAM-SHA-512"):
    pw = PW[user] if password is None else password
    p = {"security.protocol": "SASL_SSL", "ssl.ca.location": PKI["ca"],
         "sasl.mechanism": mech}
    if mech == "PLAIN":
        p.update({"sasl.username": user, "sasl.password": pw})
    else:
        p["sasl.jaas.config"] = ("org.apache.kafka.common.security.scram."
                                 "ScramLoginModule required username=\"%s\" "
                                 "password=\"%s\";" % (user, pw))
    return p


ONLY_ADMIN = "authorization:\n  super_users: [\"User:admin\"]\n"
RULES = (
    "authorization:\n"
    "  super_users: [\"User:admin\"]\n"
    "  acls:\n"
    "    - {principal: \"User:alice\", operations: [alter], mirrors: [\"dev-*\"], permission: allow}\n"
    "    - {principal: \"User:alice\", operations: [describe], mirrors: [\"*\"], permission: allow}\n"
    "    - {principal: \"User:bob\", operations: [describe], mirrors: [\"*\"], permission: allow}\n"
    "    - {principal: \"User:*\", operations: [all], mirrors: [\"dev-secret*\"], permission: deny}\n")
CAROL_PROD = RULES + (
    "    - {principal: \"User:carol\", operations: [describe], mirrors: [\"prod-*\"], permission: allow}\n")

sd = start("sasl-ssl", "SASL_SSL", tls_yaml("none") + SASL_YAML, ONLY_ADMIN)
alice = mt.Client(sd, "User:alice", sasl_props("alice"))
alice_plain = mt.Client(sd, "User:alice", sasl_props("alice", mech="PLAIN"))
bob = mt.Client(sd, "User:bob", sasl_props("bob"))
carol = mt.Client(sd, "User:carol", sasl_props("carol"))
admin = mt.Client(sd, "User:admin", sasl_props("admin"))
sasl_clients = [alice, alice_plain, bob, carol, admin]
deny = Refusals(sd)

h.check("authorization: on (0 rules, 1 super user; everyone else is denied)"
        in sd.log(), "SASL turns authorization on, deny by default:\n"
        + sd.log()[-3000:])

# ---- only a super user: everyone else is denied -------------------------
for m, topic in (("prod-x", "orders"), ("dev-secret-1", "audit")):
    eq(admin.create(m, SRC).returncode, 0, "the super user creates %s" % m)
    admin.ok("--add", "--mirror", m, "--topic", topic)
eq(admin.listed(), ["dev-secret-1", "prod-x"], "the super user's --list")
eq(admin.described(), ["dev-secret-1", "prod-x"], "the super user's --describe")
h.wait_for(lambda: "authenticated as User:admin (SASL SCRAM-SHA-512)"
           in sd.log(), 10, "the SCRAM principal in the log")
for c in (alice, bob, carol):
    eq(c.listed(), [], "%s's --list with no rule" % c.principal)
    eq(c.described(), [], "%s's --describe with no rule" % c.principal)
deny(alice, lambda: alice.create("dev-a", SRC), "alter", "dev-a",
     "CreateMirror", "no rule allows it")
deny(bob, lambda: bob.cli("--describe", "--mirror", "prod-x"), "describe",
     "prod-x", "DescribeMirrors", "no rule allows it")
deny(carol, lambda: carol.cli("--delete", "--mirror", "prod-x"), "alter",
     "prod-x", "DeleteMirror", "no rule allows it")
eq(admin.listed(), ["dev-secret-1", "prod-x"], "mirrors after the refusals")

# ---- the rules, by SIGHUP ---------------------------------------------------
reload(sd, RULES)
h.check("authorization: on (4 rules, 1 super user)" in sd.log(),
        "the reload logs the rules in force")

# alice: alter dev-*, describe *; the deny on dev-secret* wins.
eq(alice.create("dev-a", SRC).returncode, 0, "alice creates dev-a")
alice.ok("--add", "--mirror", "dev-a", "--topic", "payments")
alice.ok("--pause", "--mirror", "dev-a", "--topic", "payments")
h.wait_for(lambda: topics_of(alice, "dev-a") == {"payments": "PAUSED"}, 30,
           "dev-a's payments PAUSED by alice")
alice.ok("--resume", "--mirror", "dev-a", "--topic", "payments")
h.wait_for(lambda: topics_of(alice, "dev-a").get("payments") not in
           ("PAUSED", "PAUSING"), 30, "dev-a's payments resumed by alice")
alice.ok("--add", "--mirror", "dev-a", "--topic", "refunds")
h.check("refunds" in topics_of(alice, "dev-a"), "alice added refunds to dev-a")
alice.ok("--remove", "--mirror", "dev-a", "--topic", "refunds")
h.wait_for(lambda: topics_of(alice, "dev-a").get("refunds") == "STOPPED", 30,
           "refunds removed from dev-a (STOPPED) by alice")
eq(alice.listed(), ["dev-a", "prod-x"], "alice's --list (dev-secret-1 denied)")
eq(alice.described(), ["dev-a", "prod-x"], "alice's --describe")
eq(set(topics_of(alice, "prod-x")), {"orders"}, "alice describes prod-x")
deny(alice, lambda: alice.create("prod-y", SRC), "alter", "prod-y",
     "CreateMirror", "no rule allows it")
deny(alice, lambda: alice.cli("--add", "--mirror", "prod-x", "--topic",
                              "payments"),
     "alter", "prod-x", "AddTopicsToMirror")
deny(alice, lambda: alice.cli("--pause", "--mirror", "prod-x", "--topic",
                              "orders"),
     "alter", "prod-x", "PauseMirrorTopics")
deny(alice, lambda: alice.cli("--resume", "--mirror", "prod-x", "--topic",
                              "orders"),
     "alter", "prod-x", "ResumeMirrorTopics")
deny(alice, lambda: alice.cli("--remove", "--mirror", "prod-x", "--topic",
                              "orders"),
     "alter", "prod-x", "RemoveTopicsFromMirror")
deny(alice, lambda: alice.cli("--delete", "--mirror", "prod-x"), "alter",
     "prod-x", "DeleteMirror")
deny(alice, lambda: alice.create("dev-secret-2", SRC), "alter",
     "dev-secret-2", "CreateMirror",
     "denied by authorization.acls[3] (%s:" % sd.config_path)
deny(alice, lambda: alice.cli("--describe", "--mirror", "dev-secret-1"),
     "describe", "dev-secret-1", "DescribeMirrors", "denied by")
deny(alice, lambda: alice.cli("--delete", "--mirror", "dev-secret-1"),
     "alter", "dev-secret-1", "DeleteMirror", "denied by")
# The same principal through SASL/PLAIN.
h.check(alice_plain.listed() == ["dev-a", "prod-x"], "alice's --list over "
        "SASL/PLAIN")
h.wait_for(lambda: "authenticated as User:alice (SASL PLAIN)" in sd.log(), 10,
           "the PLAIN principal in the log")
deny(alice_plain, lambda: alice_plain.create("prod-p", SRC), "alter",
     "prod-p", "CreateMirror")

# bob: describe only.
eq(bob.listed(), ["dev-a", "prod-x"], "bob's --list")
eq(bob.described(), ["dev-a", "prod-x"], "bob's --describe")
eq(set(topics_of(bob, "dev-a")), {"payments", "refunds"},
   "bob describes dev-a")
deny(bob, lambda: bob.create("dev-b", SRC), "alter", "dev-b", "CreateMirror")
deny(bob, lambda: bob.cli("--add", "--mirror", "dev-a", "--topic", "orders"),
     "alter", "dev-a", "AddTopicsToMirror")
deny(bob, lambda: bob.cli("--pause", "--mirror", "dev-a", "--topic",
                          "payments"),
     "alter", "dev-a", "PauseMirrorTopics")
deny(bob, lambda: bob.cli("--remove", "--mirror", "dev-a", "--topic",
                          "payments"),
     "alter", "dev-a", "RemoveTopicsFromMirror")
deny(bob, lambda: bob.cli("--delete", "--mirror", "dev-a"), "alter", "dev-a",
     "DeleteMirror")
deny(bob, lambda: bob.cli("--describe", "--mirror", "dev-secret-1"),
     "describe", "dev-secret-1", "DescribeMirrors", "denied by")

# carol: no rule, so nothing.
eq(carol.listed(), [], "carol's --list")
eq(carol.described(), [], "carol's --describe")
deny(carol, lambda: carol.create("dev-c", SRC), "alter", "dev-c",
     "CreateMirror", "no rule allows it")
deny(carol, lambda: carol.cli("--add", "--mirror", "dev-a", "--topic",
                              "orders"),
     "alter", "dev-a", "AddTopicsToMirror")
deny(carol, lambda: carol.cli("--resume", "--mirror", "dev-a", "--topic",
                              "payments"),
     "alter", "dev-a", "ResumeMirrorTopics")
deny(carol, lambda: carol.cli("--delete", "--mirror", "dev-a"), "alter",
     "dev-a", "DeleteMirror")
deny(carol, lambda: carol.cli("--describe", "--mirror", "prod-x"),
     "describe", "prod-x", "DescribeMirrors", "no rule allows it")

# Nothing refused changed anything.
eq(set(topics_of(admin, "prod-x")), {"orders"}, "prod-x's topics")
h.check(topics_of(admin, "prod-x")["orders"] not in ("PAUSED", "PAUSING"),
        "prod-x's orders not paused")
eq(set(topics_of(admin, "dev-a")), {"payments", "refunds"}, "dev-a's topics")
h.check(topics_of(admin, "dev-a")["payments"] not in ("PAUSED", "PAUSING"),
        "dev-a's payments not paused")
eq(admin.listed(), ["dev-a", "dev-secret-1", "prod-x"],
   "the mirrors after the refusals")

# admin: a super user does everything, the deny rule on User:* included.
eq(admin.create("dev-secret-2", SRC).returncode, 0,
   "the super user creates dev-secret-2 despite the deny rule")
admin.ok("--add", "--mirror", "dev-secret-2", "--topic", "ledger")
eq(admin.described(), ["dev-a", "dev-secret-1", "dev-secret-2", "prod-x"],
   "the super user's --describe")
admin.ok("--pause", "--mirror", "dev-secret-2", "--topic", "ledger")
h.wait_for(lambda: topics_of(admin, "dev-secret-2") == {"ledger": "PAUSED"},
           30, "dev-secret-2's ledger PAUSED by the super user")
admin.ok("--resume", "--mirror", "dev-secret-2", "--topic", "ledger")
admin.ok("--remove", "--mirror", "dev-secret-2", "--topic", "ledger")
h.wait_for(lambda: topics_of(admin, "dev-secret-2") == {"ledger": "STOPPED"},
           30, "dev-secret-2's ledger STOPPED by the super user")
admin.ok("--delete", "--mirror", "dev-secret-2")
h.wait_for(lambda: "dev-secret-2" not in admin.listed(), 30,
           "dev-secret-2 deleted by the super user")
admin.ok("--pause", "--mirror", "dev-a", "--topic", "payments")
h.wait_for(lambda: topics_of(bob, "dev-a")["payments"] == "PAUSED", 30,
           "the super user pauses alice's dev-a")

# ---- a rule change by SIGHUP reaches the next request -------------------
reload(sd, CAROL_PROD)
eq(carol.listed(), ["prod-x"], "carol's --list with describe on prod-*")
eq(carol.described(), ["prod-x"], "carol's --describe with describe on prod-*")
deny(carol, lambda: carol.cli("--describe", "--mirror", "dev-a"), "describe",
     "dev-a", "DescribeMirrors", "no rule allows it")
deny(carol, lambda: carol.cli("--pause", "--mirror", "prod-x", "--topic",
                              "orders"),
     "alter", "prod-x", "PauseMirrorTopics", "no rule allows it")

# ---- Metadata for every authenticated principal -------------------------
for user in ("carol", "bob", "admin"):
    got = kp_describe_cluster(sd, security_protocol="SASL_SSL",
                              ssl_cafile=PKI["ca"],
                              sasl_mechanism="SCRAM-SHA-512",
                              sasl_plain_username=user,
                              sasl_plain_password=PW[user])
    eq(got.get("controller_id"), 42, "kafka-python describe_cluster as "
       "User:%s (%r)" % (user, got))
kcat_metadata(sd, ["-X", "security.protocol=SASL_SSL", "-X",
                   "ssl.ca.location=%s" % PKI["ca"], "-X",
                   "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=carol",
                   "-X", "sasl.password=%s" % PW["carol"]], "kcat as carol")

# ---- a wrong password: 58, before any authorization ----------------------
counted = mt.denied_total(sd)
refusals = sd.log().count("authorization: User:")
for c, props in ((carol, sasl_props("carol", WRONG)),
                 (alice, sasl_props("alice", WRONG, mech="PLAIN"))):
    who = c.principal.split(":", 1)[1]
    failed = sd.log().count("authentication failed for user '%s'" % who)
    wrong = mt.Client(sd, c.principal, props)
    r = wrong.create("dev-w", SRC)
    eq(r.returncode, 1, "%s with a wrong password: exit (%s)"
       % (c.principal, r.stderr))
    h.check("SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid "
            "username or password" in r.stderr and
            "CLUSTER_MIRROR_AUTHORIZATION_FAILED" not in r.stderr,
            "%s with a wrong password: 58, not 144: %s" % (c.principal,
                                                           r.stderr))
    h.wait_for(lambda: sd.log().count("authentication failed for user '%s'"
                                      % who) > failed, 10,
               "the failed login of %s in the log" % who)
    sasl_clients.append(wrong)
# kafka-python reports a failed login at bootstrap as NoBrokersAvailable;
# mirrord's log says why.
failed = sd.log().count("authentication failed for user 'bob'")
try:
    kp_describe_cluster(sd, security_protocol="SASL_SSL", ssl_cafile=PKI["ca"],
                        sasl_mechanism="SCRAM-SHA-512",
                        sasl_plain_username="bob", sasl_plain_password=WRONG)
    h.fail("kafka-python logged in as bob with a wrong password")
except kafka.errors.KafkaError:
    pass
h.wait_for(lambda: sd.log().count("authentication failed for user 'bob'")
           > failed, 10, "kafka-python's failed login in mirrord's log")
eq(mt.denied_total(sd), counted, "authorization refusals counted after the "
   "wrong passwords")
eq(sd.log().count("authorization: User:"), refusals,
   "authorization log lines after the wrong passwords")
h.check("dev-w" not in admin.listed(), "nothing created with a wrong password")

deny.check_counted()
h.check(not warned(sd), "no exposure warning for SASL_SSL on 0.0.0.0 with "
        "authorization on:\n" + "\n".join(warned(sd)))

# ---- no password anywhere ---------------------------------------------------


def leaks(secrets, texts=(), dirs=()):
    """[(where, secret)] for every secret found in the named texts or in
    any file under dirs."""
    hits = [(where, s) for where, text in texts for s in secrets
            if s in text]
    for top in dirs:
        for root, _, files in os.walk(top):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                hits += [(os.path.join(root, name), s) for s in secrets
                         if s.encode() in data]
    return hits


SECRETS = list(PW.values()) + [WRONG]
metrics_text = sd.metrics()
described = [admin.ok("--describe").stdout,
             admin.ok("--describe", "--json").stdout]
h.check("prod-x" in described[0] and json.loads(described[1]),
        "DescribeMirrors output to scan: %r" % described)
# The scan finds a password where one is: in the clients' properties.
h.check(leaks([PW["alice"]], dirs=[sd.dir]), "the scan for passwords finds "
        "none in the clients' properties under %s" % sd.dir)
eq(sd.stop(), 0, "mirrord (SASL_SSL) exit status")
data_files = sum(len(f) for _, _, f in os.walk(sd.data_dir))
h.check(data_files > 0, "files under %s" % sd.data_dir)
found = leaks(SECRETS, texts=[("mirrord's log", sd.log()),
                              ("/metrics", metrics_text)]
              + [("kafka-mirrors output of %s" % c.principal, "".join(
                  c.outputs)) for c in sasl_clients],
              dirs=[sd.data_dir])
eq(found, [], "passwords found")

# =============================================================================
# mTLS: the principal is the certificate's subject
# =============================================================================


def cert_props(name):
    return {"security.protocol": "SSL", "ssl.ca.location": PKI["ca"],
            "ssl.certificate.location": PKI[name],
            "ssl.key.location": PKI[name + "-key"]}


MTLS_RULES = (
    "authorization:\n"
    "  super_users: [\"%s\", \"%s\"]\n"
    "  acls:\n"
    "    - principal: '%s'\n"
    "      operations: [alter]\n"
    "      mirrors: [\"ops-*\"]\n"
    "      permission: allow\n"
    "    - principal: '%s'\n"
    "      operations: [describe]\n"
    "      mirrors: [\"*\"]\n"
    "      permission: allow\n" % (ROOT, LONG_CUT, OPS, OPS))

td = start("mtls", "SSL", tls_yaml("required"), MTLS_RULES)
ops = mt.Client(td, OPS, cert_props("ops"))
root = mt.Client(td, ROOT, cert_props("root"))
intern = mt.Client(td, INTERN, cert_props("intern"))
deny = Refusals(td)
h.check("authorization: on (2 rules, 2 super users)" in td.log(),
        "client certificates turn authorization on:\n" + td.log()[-3000:])

eq(root.create("prod-m", SRC).returncode, 0, "the super user creates prod-m")
root.ok("--add", "--mirror", "prod-m", "--topic", "billing")
h.wait_for(lambda: "authenticated by client certificate as %s" % ROOT
           in td.log(), 10, "the certificate's principal in the log")
eq(ops.create("ops-1", SRC).returncode, 0, "%s creates ops-1" % OPS)
ops.ok("--add", "--mirror", "ops-1", "--topic", "events")
ops.ok("--pause", "--mirror", "ops-1", "--topic", "events")
h.wait_for(lambda: topics_of(ops, "ops-1") == {"events": "PAUSED"}, 30,
           "ops-1's events PAUSED")
h.check("authenticated by client certificate as %s" % OPS in td.log(),
        "the principal with an escaped comma in the log")
eq(ops.listed(), ["ops-1", "prod-m"], "%s's --list" % OPS)
eq(ops.described(), ["ops-1", "prod-m"], "%s's --describe" % OPS)
deny(ops, lambda: ops.create("prod-z", SRC), "alter", "prod-z",
     "CreateMirror", "no rule allows it")
deny(ops, lambda: ops.cli("--add", "--mirror", "prod-m", "--topic",
                          "events"),
     "alter", "prod-m", "AddTopicsToMirror")
deny(ops, lambda: ops.cli("--delete", "--mirror", "prod-m"), "alter",
     "prod-m", "DeleteMirror")
eq(intern.listed(), [], "%s's --list" % INTERN)
eq(intern.described(), [], "%s's --describe" % INTERN)
deny(intern, lambda: intern.create("ops-2", SRC), "alter", "ops-2",
     "CreateMirror", "no rule allows it")
deny(intern, lambda: intern.cli("--resume", "--mirror", "ops-1", "--topic",
                                "events"),
     "alter", "ops-1", "ResumeMirrorTopics")
deny(intern, lambda: intern.cli("--describe", "--mirror", "ops-1"),
     "describe", "ops-1", "DescribeMirrors", "no rule allows it")
eq(root.listed(), ["ops-1", "prod-m"], "the mirrors after the refusals")
eq(topics_of(root, "ops-1"), {"events": "PAUSED"}, "ops-1 after the "
   "refusals")
root.ok("--remove", "--mirror", "ops-1", "--topic", "events")
h.wait_for(lambda: topics_of(ops, "ops-1") == {"events": "STOPPED"}, 30,
           "ops-1's events STOPPED by the super user")
root.ok("--delete", "--mirror", "ops-1")
h.wait_for(lambda: root.listed() == ["prod-m"], 30,
           "ops-1 deleted by the super user")

# A long subject that fits: the 144 message still names all of it, the
# operation and the mirror.
wide = mt.Client(td, WIDE, cert_props("wide"))
eq(wide.listed(), [], "--list of the certificate with a 465-byte subject")
deny(wide, lambda: wide.create("ops-" + "w" * 200, SRC), "alter",
     "ops-" + "w" * 200, "CreateMirror", "no rule allows it")
# One too long to be a principal is refused at the handshake, logged and
# counted; cut short it would be the super user LONG_CUT.
def tls_rejected(d):
    m = re.search(r'^mirrord_admin_rejected_requests_total'
                  r'\{reason="tls_handshake"\} (\d+)', d.metrics(), re.M)
    return int(m.group(1)) if m else 0


tls_refused = tls_rejected(td)
lng = mt.Client(td, LONG, cert_props("long"))
r = lng.create("prod-long", SRC)
h.check(r.returncode != 0 and "CreateMirror" not in r.stdout,
        "a client certificate with a 593-byte subject: exit %d\n%s%s"
        % (r.returncode, r.stdout, r.stderr))
h.wait_for(lambda: "the client certificate's subject (CN=long,OU=%s...) is "
           "%d bytes, longer than the 506 a principal may hold; closing "
           "connection" % ("i" * 53, len(LONG) - 5) in td.log(), 10,
           "the refused subject in the log (%s)" % td.proc.log_path)
h.wait_for(lambda: tls_rejected(td) > tls_refused, 10,
           "the refused certificate counted (tls_handshake)")
h.check("User:CN=long" not in td.log(), "no principal made of the long "
        "subject:\n" + td.log()[-3000:])
eq(root.listed(), ["prod-m"], "the mirrors after the long subject")

got = kp_describe_cluster(td, security_protocol="SSL", ssl_cafile=PKI["ca"],
                          ssl_certfile=PKI["intern"],
                          ssl_keyfile=PKI["intern-key"])
eq(got.get("controller_id"), 42, "kafka-python describe_cluster as %s (%r)"
   % (INTERN, got))
kcat_metadata(td, ["-X", "security.protocol=SSL", "-X",
                   "ssl.ca.location=%s" % PKI["ca"], "-X",
                   "ssl.certificate.location=%s" % PKI["intern"], "-X",
                   "ssl.key.location=%s" % PKI["intern-key"]],
              "kcat as " + INTERN)
deny.check_counted()
h.check(not warned(td), "no exposure warning for SSL with required client "
        "certificates on 0.0.0.0:\n" + "\n".join(warned(td)))
eq(td.stop(), 0, "mirrord (mTLS) exit status")

# =============================================================================
# The exposure warning where anonymous clients may change mirrors
# =============================================================================

for name, proto, server in (("plaintext", "PLAINTEXT", ""),
                            ("ssl-anonymous", "SSL", tls_yaml("none"))):
    x = start(name, proto, server)
    h.wait_for(lambda: warned(x), 10, "the exposure warning (%s)" % proto)
    w = warned(x)
    eq(len(w), 1, "%s: exposure warnings" % proto)
    for part in ("0.0.0.0:%d" % x.port, "User:ANONYMOUS",
                 "authorization is off", "server.security_protocol"):
        h.check(part in w[0], "%s: the warning names %r: %s"
                % (proto, part, w[0]))
    eq(x.stop(), 0, "mirrord (%s) exit status" % proto)

print("ok: authorization per principal over SASL_SSL (SCRAM-SHA-512, PLAIN) "
      "and mTLS, Metadata for all, 58 before authorization, refusals logged "
      "and counted, no password leaked, the exposure warning")
