#!/usr/bin/env python3
"""Black-box test of topic patterns (lib/tpattern, PCRE2) through the real
kafka-mirrors CLI and the real mirrord, librdkafka mock clusters as source
and destination.

- Java syntax people write in topic patterns selects the topics Java's
  Matcher.matches() would: anchored to the whole name ("foo|bar" is exactly
  foo or bar), (?i), \\Q..\\E, \\d, lazy and possessive quantifiers.
- Invalid patterns are refused naming PCRE2's reason and the offset: by the
  CLI (usage error, exit 2) and by mirrord itself (42 INVALID_REQUEST).
- A hostile pattern, ((.{1,1000}){1,1000}), which took 2.8 GB
  and a multi-second stall as POSIX ERE, and a catastrophic-backtracking
  one, are refused by mirrord over the wire with the limit named, within a
  deadline, while mirrord keeps answering (ListMirrors) and its resident
  memory stays small.
- Patterns added are kept for discovery across a kill -9 and restart.
- A source topic that makes an accepted pattern hit the match limit during
  discovery is no match, logged once, and later passes go on.
"""

import os
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

ADD_TOPICS = 95
LIST_MIRRORS = 98
INVALID_REQUEST = 42
RSS_LIMIT_KB = 200 * 1024
HOSTILE = "((.{1,1000}){1,1000})"


def add_topics_body(mirror, includes=(), excludes=()):
    """AddTopicsToMirror v0: no topics by name, patterns in tags 0 and 1."""
    body = mt.cstr(mirror) + mt.uvarint(1)          # empty Topics array
    tags = []
    for tag, pats in ((0, includes), (1, excludes)):
        if pats:
            data = mt.uvarint(len(pats) + 1) + b"".join(mt.cstr(p) for p in pats)
            tags.append(mt.uvarint(tag) + mt.uvarint(len(data)) + data)
    return body + mt.uvarint(len(tags)) + b"".join(tags)


def call(bootstrap, api_key, body, corr, timeout=20):
    """One request, its response body (after the v1 response header)."""
    with mt.connect(bootstrap, timeout) as s:
        s.sendall(mt.frame(api_key, 0, corr, body, flexible=True))
        resp = mt.recv_frame(s)
    eq(struct.unpack(">i", resp[:4])[0], corr, "correlation id")
    ntags, pos = mt.read_uvarint(resp, 4)
    eq(ntags, 0, "response header tagged fields")
    return resp[pos:]


def top_error(body):
    """(ErrorCode, ErrorMessage) of a 95/96/102/103 response."""
    code = struct.unpack(">h", body[4:6])[0]
    n, pos = mt.read_uvarint(body, 6)
    msg = None if n == 0 else body[pos:pos + n - 1].decode()
    return code, msg


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    h.fail("no VmRSS in /proc/%d/status" % pid)


def added(r):
    """Topic names of an 'Added N topic(s) in mirror M: [a, b]' line."""
    out = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
    if ": [" not in out:
        return []
    return sorted(t for t in out.split(": [", 1)[1].rstrip("]").split(", ")
                  if t)


mc = MockCluster(clusters=2, brokers=1,
                 log_path=os.path.join(h.test_dir(), "mock.log"))
SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
# Each case's pattern selects among its own topics only (a topic can be in
# one mirror at a time), and must select exactly the listed ones.
CASES = [
    ("foo|bar", ["foo", "bar", "foobar", "xbar", "fo"], ["bar", "foo"]),
    ("orders\\..*", ["orders.eu", "orders.us", "ordersXeu"],
     ["orders.eu", "orders.us"]),
    ("(?i)archive-.*", ["ARCHIVE-1", "archive-2", "xarchive-3"],
     ["ARCHIVE-1", "archive-2"]),
    ("\\Qa.b\\E", ["a.b", "axb"], ["a.b"]),
    ("[a-z]+-v\\d+", ["payments-v12", "payments-v", "Payments-v1"],
     ["payments-v12"]),
    ("[a-z]++-(dlq|retry)", ["events-dlq", "events-retry", "events-dead"],
     ["events-dlq", "events-retry"]),
    (".*?-tmp", ["scratch-tmp", "scratch-tmpx"], ["scratch-tmp"]),
    # Commas inside {} belong to the pattern; the others separate entries.
    ("x{1,2}-[0-9]{2,3}", ["x-10", "xx-100", "xxx-10", "x-1"],
     ["x-10", "xx-100"]),
    ("sep-a, sep-b{1,2}", ["sep-a", "sep-b", "sep-bb", "sep-bbb"],
     ["sep-a", "sep-b", "sep-bb"]),
    # A prefix of held topics: a prefix match would answer 138 for them.
    ("orders\\.e|archive", [], []),
]
TOPICS = [t for _, ts, _ in CASES for t in ts]
for c in (0, 1):
    for t in TOPICS:
        mc.cmd("topic %d %s 1" % (c, t))

d = mt.Mirrord(destination=DST, log_level="info")
rss_start = rss_kb(d.proc.pid)

# ---- Java syntax, whole names ---------------------------------------------
for i, (pat, _, want) in enumerate(CASES):
    name = "j%d" % i
    d.create(name, {"bootstrap.servers": SRC})
    r = d.cli("--add", "--mirror", name, "--topic", pat)
    eq(r.returncode, 0, "add %r: %s" % (pat, r.stderr))
    eq(added(r), sorted(want), "topics pattern %r selects" % pat)

# ---- invalid patterns: the CLI and mirrord name PCRE2's reason -------------
d.create("m", {"bootstrap.servers": SRC,
               "mirror.metadata.refresh.interval.ms": "1000"})
r = d.cli("--add", "--mirror", "m", "--topic", "a(b")
eq(r.returncode, 2, "an invalid pattern is a usage error: " + r.stderr)
h.check("pattern 'a(b' is not a valid regular expression: missing closing "
        "parenthesis at offset 3" in r.stderr,
        "the CLI names PCRE2's reason and the offset: " + r.stderr)
r = d.cli("--add", "--mirror", "m", "--topic", "foo.*", "--exclude", "x[")
eq(r.returncode, 2, "an invalid --exclude is a usage error: " + r.stderr)
h.check("--exclude: pattern 'x[' is not a valid regular expression: missing "
        "terminating ] for character class at offset 2" in r.stderr,
        "the CLI names the --exclude's reason: " + r.stderr)
r = d.cli("--add", "--mirror", "m", "--topic", HOSTILE)
eq(r.returncode, 2, "the hostile pattern is a usage error: " + r.stderr)
h.check("is refused: its compiled form is" in r.stderr,
        "the CLI says why the hostile pattern is refused: " + r.stderr)

corr = 100
body = call(d.bootstrap, ADD_TOPICS, add_topics_body("m", ["ok.*", "a("]), corr)
code, msg = top_error(body)
eq(code, INVALID_REQUEST, "mirrord's code for an invalid pattern (%s)" % msg)
eq(msg, "include pattern 'a(' is not a valid regular expression: missing "
   "closing parenthesis at offset 2", "mirrord's message")
corr += 1
body = call(d.bootstrap, ADD_TOPICS,
            add_topics_body("m", ["foo"], ["\\p{NoSuch}"]), corr)
code, msg = top_error(body)
eq(code, INVALID_REQUEST, "invalid exclude pattern code (%s)" % msg)
h.check(msg.startswith("exclude pattern '\\p{NoSuch}' is not a valid regular "
                       "expression: unknown property") and "at offset" in msg,
        "invalid exclude pattern message: %r" % msg)

# ---- hostile patterns over the wire: refused, named, bounded --------------
HOSTILES = [
    (HOSTILE, "is refused: its compiled form is"),
    (HOSTILE, "more than the limit of 16384 bytes"),
    ("(a+)+b", "hit the match limit (100000 backtracking steps)"),
    ("(.*a){20}", "hit the match limit"),
    ("(" * 40 + "a" + ")" * 40, "parentheses are too deeply nested (the "
     "limit is 32)"),
    ("a" * 5000, "more than the limit of 4096"),
]
for pat, want in HOSTILES:
    for kind in ("include", "exclude"):
        corr += 1
        inc, exc = ([pat], []) if kind == "include" else (["foo"], [pat])
        body = call(d.bootstrap, ADD_TOPICS, add_topics_body("m", inc, exc),
                    corr)
        code, msg = top_error(body)
        eq(code, INVALID_REQUEST, "code for %s %.40r (%s)" % (kind, pat, msg))
        h.check(msg is not None and msg.startswith(kind + " pattern '") and
                want in msg, "%s %.40r: message %r lacks %r"
                % (kind, pat, msg, want))
        # Still answering, and small, after each.
        r = d.cli_ok("--list")
        h.check(r.stdout.startswith("MIRROR"), "ListMirrors answers: "
                + r.stdout)
        rss = rss_kb(d.proc.pid)
        h.check(rss < RSS_LIMIT_KB, "mirrord's RSS after %.40r is %d kB, "
                "want below %d kB" % (pat, rss, RSS_LIMIT_KB))
# Many in one request, pipelined on one connection.
with mt.connect(d.bootstrap, 30) as s:
    reqs = b"".join(mt.frame(ADD_TOPICS, 0, 1000 + i,
                             add_topics_body("m", [HOSTILE, "(a+)+b"] * 10),
                             flexible=True) for i in range(20))
    s.sendall(reqs)
    for i in range(20):
        resp = mt.recv_frame(s)
        eq(struct.unpack(">i", resp[:4])[0], 1000 + i, "pipelined answer order")
        code, msg = top_error(resp[5:])
        eq(code, INVALID_REQUEST, "pipelined hostile request %d" % i)
# ListMirrors on the wire as well as through the CLI.
corr += 1
body = call(d.bootstrap, LIST_MIRRORS, mt.uvarint(0), corr)
eq(struct.unpack(">h", body[4:6])[0], 0, "ListMirrors error code")
rss = rss_kb(d.proc.pid)
h.check(rss < RSS_LIMIT_KB, "mirrord's RSS after the hostile patterns: %d kB"
        % rss)
h.check(d.proc.alive(), "mirrord is still running")
print("hostile patterns refused; RSS %d kB at start, %d kB after"
      % (rss_start, rss), flush=True)
# Nothing of them was stored.
dump = d.cli_ok("--describe", "--mirror", "m")
h.check("orders" not in dump.stdout, "no topic joined mirror m")

# ---- patterns kept for discovery, across kill -9 --------------------------
r = d.cli_ok("--add", "--mirror", "m", "--topic", "(?i)NEW-\\d+",
             "--exclude", "new-0+")
eq(added(r), [], "nothing matches yet")
d.kill9()
d.start()
# The destination first: discovery may act as soon as the source has them.
for c in (1, 0):
    mc.cmd("topic %d new-7 1" % c)
    mc.cmd("topic %d NEW-8 1" % c)
    mc.cmd("topic %d new-00 1" % c)
    mc.cmd("topic %d new-9x 1" % c)
h.wait_for(lambda: {p["topic"] for p in d.describe_json("m")} ==
           {"new-7", "NEW-8"}, 60,
           "new-7 and NEW-8 (not new-00, new-9x) discovered by mirror m")
h.check("counted as no match" not in d.log(),
        "no pattern hit a limit during discovery so far")
print("discovery after restart: new-7 and NEW-8", flush=True)

# ---- a limit hit during discovery: no match, logged once, no stall --------
# The trial names are built from the pattern's first 8 name characters, so
# this pattern passes them; a source topic of k's then "y-x" makes
# (k+k+)+y backtrack without bound, which the match limit cuts short.
SLOW = "bcdefghi|(k+k+)+y"
SLOW_TOPIC = "k" * 40 + "y-x"
d.create("slow", {"bootstrap.servers": SRC,
                  "mirror.metadata.refresh.interval.ms": "1000"})
d.cli_ok("--add", "--mirror", "slow", "--topic", SLOW)
for c in (1, 0):
    mc.cmd("topic %d %s 1" % (c, SLOW_TOPIC))
    mc.cmd("topic %d bcdefghi 1" % c)
h.wait_for(lambda: {p["topic"] for p in d.describe_json("slow")} ==
           {"bcdefghi"}, 60, "bcdefghi discovered by mirror slow")
# Later passes go on (kky joins) with the hostile name still on the source.
for c in (1, 0):
    mc.cmd("topic %d kky 1" % c)
h.wait_for(lambda: {p["topic"] for p in d.describe_json("slow")} ==
           {"bcdefghi", "kky"}, 60, "kky discovered by mirror slow")
hits = [l for l in d.log().splitlines() if "counted as no match" in l]
eq(len(hits), 1, "limit hits logged (once per pattern): %r" % hits)
h.check("topic pattern '%s'" % SLOW in hits[0] and
        "hit the match limit (100000 backtracking steps)" in hits[0],
        "the log line names the pattern and the limit: " + hits[0])
r = d.cli_ok("--list")
h.check("slow" in r.stdout, "ListMirrors answers: " + r.stdout)
h.check(rss_kb(d.proc.pid) < RSS_LIMIT_KB, "RSS after discovery limit hits")
print("discovery limit hit: no match, logged once", flush=True)
d.stop()
mc.close()
