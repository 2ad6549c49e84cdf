#!/usr/bin/env python3
"""The broker's log cleaner runs on a compacted topic within a test: after
enough rounds, consuming with offsets shows holes where superseded records
were removed, and the latest value of every key survives."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

if not shutil.which("kcat"):
    h.skip("real Kafka tier: kcat not found (install kcat)")
a = h.real_kafka(2)[0]
topic = "compaction-%d" % os.getpid()
a.create_compacted_topic(topic, segment_ms=100)

sent = []
rounds = [0]


def read_back():
    p = h.kcat(["-C", "-t", topic, "-e", "-q", "-f", "%o %k %s\\n"]
               + a.kcat_args(), timeout=60)
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    return [(int(o), k, v) for o, k, v in
            (line.split(" ", 2) for line in p.stdout.splitlines())]


def cleaned():
    """One more round of records (a record after segment.ms rolls the
    segment, which makes the previous one cleanable), then look for holes."""
    r = rounds[0] = rounds[0] + 1
    batch = [("keep-%d" % r, "once")] + [("hot", "r%d-%d" % (r, i)) for i in range(20)]
    p = h.kcat(["-P", "-t", topic, "-K", ":"] + a.kcat_args(),
               input="".join("%s:%s\n" % kv for kv in batch))
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    sent.extend(batch)
    rows = read_back()
    offsets = [o for o, _, _ in rows]
    return rows if offsets != list(range(len(offsets))) else None


rows = h.wait_for(cleaned, 120, "the log cleaner to compact %s" % topic,
                  interval=0.2)
offsets = [o for o, _, _ in rows]
holes = len(sent) - len(rows)
h.check(offsets == sorted(set(offsets)), "offsets not increasing: %r" % offsets)
h.check(holes > 0 and max(offsets) == len(sent) - 1,
        "expected holes below offset %d, got %r" % (len(sent) - 1, offsets))
latest = {}
for k, v in sent:
    latest[k] = v
seen = {}
for _, k, v in rows:
    seen[k] = v
h.check(seen == latest, "latest value per key lost: %r vs %r" % (seen, latest))
print("PASS: cleaner removed %d of %d records after %d rounds (offsets %d..%d)"
      % (holes, len(sent), rounds[0], offsets[0], offsets[-1]))
