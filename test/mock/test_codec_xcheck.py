#!/usr/bin/env python3
"""Cross-check the codec's message layouts against kafka-python.

kafka-python (Debian's python3-kafka 2.0.2) carries its own hand-written
schemas for the non-flexible versions of most APIs the codec knows.  For
every request and response class it has for those ApiKeys, this test fills
the schema with random values (no nulls: kafka-python does not know which
fields are nullable), encodes it with kafka-python, and hands the bytes to
`kp_dump decode`.  The codec must decode them using every byte, re-encode
them to the identical bytes, and report the same values in the same wire
order (kp_dump prints one token per value).  A field at the wrong version,
of the wrong type or in the wrong order fails one of the three.

Exit 77 (skip) only when kafka-python cannot be imported by any python3.
"""
import os
import random
import subprocess
import sys

# test/kafka (the real-Kafka tier) would shadow the package as a namespace.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(
    os.path.abspath(__file__))]
try:
    import kafka.protocol.api  # noqa: F401
except ImportError:
    if True:
        # The Debian package lives in the system interpreter's dist-packages.
        if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3") \
                and os.environ.get("XCHECK_REEXEC") != "1":
            os.environ["XCHECK_REEXEC"] = "1"
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        print("SKIP: kafka-python is not installed (apt-get install python3-kafka)")
        sys.exit(77)

import importlib
from kafka.protocol.api import Request, Response
from kafka.protocol.types import (Array, Boolean, Bytes, Int8, Int16, Int32, Int64, Schema,
                                  String)

# The ApiKeys the codec knows that kafka-python also has.
KEYS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 10: "FindCoordinator",
        17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 22: "InitProducerId",
        23: "OffsetForLeaderEpoch", 32: "DescribeConfigs", 36: "SaslAuthenticate",
        11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
        29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls"}
INTS = {Int8: 8, Int16: 16, Int32: 32, Int64: 64}

# Where kafka-python 2.0.2's schema disagrees with Apache Kafka's message
# definitions (clients/src/main/resources/common/message/*.json), the codec
# follows Kafka; these cases are left out, each for the reason given.
KAFKA_PYTHON_BUGS = {
    (0, 8, "response"): "closes the partition array before RecordErrors and ErrorMessage",
    (2, 4, "request"): "CurrentLeaderEpoch is an int64 (Kafka: int32)",
    (2, 5, "request"): "CurrentLeaderEpoch is an int64 (Kafka: int32)",
    (10, 1, "response"): "has no ThrottleTimeMs (Kafka: int32, v1+)",
    (29, 2, "request"): "encodes v2 non-flexible (Kafka: flexible from v2)",
    (29, 2, "response"): "encodes v2 non-flexible (Kafka: flexible from v2)",
}
# The ACL APIs' v0 (no pattern type) is gone from Kafka 4; the codec starts
# at v1.
CODEC_MIN_VERSION = {29: 1, 30: 1, 31: 1}


class Unsupported(Exception):
    pass


def fill(t, rnd):
    if isinstance(t, type) and t in INTS:
        bits = INTS[t]
        return rnd.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if t is Boolean:
        return rnd.random() < 0.5
    if isinstance(t, String):
        return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz._-") for _ in range(rnd.randint(1, 9)))
    if t is Bytes:
        return bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 24)))
    if isinstance(t, Array):
        return [fill(t.array_of, rnd) for _ in range(rnd.randint(1, 2))]
    if isinstance(t, Schema):
        return tuple(fill(f, rnd) for f in t.fields)
    raise Unsupported(getattr(t, "__name__", type(t).__name__))


def tokens(t, v, out):
    if isinstance(t, type) and t in INTS:
        out.append(str(v))
    elif t is Boolean:
        out.append("1" if v else "0")
    elif isinstance(t, String):
        out.append("s:" + v.encode().hex())
    elif t is Bytes:
        out.append("b:" + v.hex())
    elif isinstance(t, Array):
        out.append("n:%d" % len(v))
        for item in v:
            tokens(t.array_of, item, out)
    elif isinstance(t, Schema):
        for f, item in zip(t.fields, v):
            tokens(f, item, out)
    return out


def classes():
    found = set()
    for mod in ("produce", "fetch", "offset", "metadata", "admin", "commit", "group"):
        m = importlib.import_module("kafka.protocol." + mod)
        for obj in vars(m).values():
            if isinstance(obj, type) and issubclass(obj, (Request, Response)) \
                    and obj not in (Request, Response) and getattr(obj, "API_KEY", None) in KEYS:
                found.add(obj)
    return sorted(found, key=lambda c: (c.API_KEY, c.API_VERSION, issubclass(c, Response)))


def main():
    builddir = os.environ.get("top_builddir", ".")
    dump = os.path.join(builddir, "test", "tools", "kp_dump")
    rnd = random.Random(20241)
    cases, skipped = [], []
    for cls in classes():
        direction = "response" if issubclass(cls, Response) else "request"
        if cls.API_VERSION < CODEC_MIN_VERSION.get(cls.API_KEY, 0):
            continue
        bug = KAFKA_PYTHON_BUGS.get((cls.API_KEY, cls.API_VERSION, direction))
        if bug:
            skipped.append("%s v%d %s: kafka-python %s" % (KEYS[cls.API_KEY], cls.API_VERSION,
                                                          direction, bug))
            continue
        for _ in range(4):
            try:
                values = fill(cls.SCHEMA, rnd)
            except Unsupported as e:
                skipped.append("%s v%d %s: kafka-python uses a type this test does not "
                               "handle (%s)" % (KEYS[cls.API_KEY], cls.API_VERSION, direction, e))
                break
            data = cls.SCHEMA.encode(values)
            cases.append((cls, direction, data, tokens(cls.SCHEMA, values, [])))
    lines = "".join("%d %d %s %s\n" % (c.API_KEY, c.API_VERSION, d, data.hex() or "-")
                    for c, d, data, _ in cases)
    out = subprocess.run([dump, "decode"], input=lines, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    if len(out) != len(cases):
        print("FAIL: kp_dump answered %d lines for %d inputs" % (len(out), len(cases)))
        sys.exit(1)
    failures = []
    covered = {}
    for (cls, direction, data, want), line in zip(cases, out):
        what = "%s v%d %s" % (KEYS[cls.API_KEY], cls.API_VERSION, direction)
        words = line.split()
        if words[0] != "ok":
            failures.append("%s: the codec rejects kafka-python's bytes: %s (%s)"
                            % (what, line, data.hex()))
            continue
        reenc = "" if words[1] == "-" else words[1]
        if reenc != data.hex():
            failures.append("%s: re-encoded differently:\n  kafka-python %s\n  codec        %s"
                            % (what, data.hex(), reenc))
            continue
        if words[2:] != want:
            failures.append("%s: values differ:\n  kafka-python %s\n  codec        %s"
                            % (what, " ".join(want), " ".join(words[2:])))
            continue
        covered.setdefault((KEYS[cls.API_KEY], direction), set()).add(cls.API_VERSION)
    for s in skipped:
        print("note: not checked: " + s)
    if failures:
        print("FAIL: %d of %d cases" % (len(failures), len(cases)))
        print("\n".join(failures[:20]))
        sys.exit(1)
    for (api, direction), versions in sorted(covered.items()):
        print("ok: %-16s %-8s v%s" % (api, direction, ",".join(map(str, sorted(versions)))))
    if len(covered) < 16 or len(cases) < 200:
        print("FAIL: too little was checked (%d API directions, %d cases)"
              % (len(covered), len(cases)))
        sys.exit(1)


if __name__ == "__main__":
    main()
