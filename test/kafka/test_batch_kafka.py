#!/usr/bin/env python3
"""lib/batch against a real Apache Kafka broker, the oracle the mock cannot
be (it accepts everything):

1. the strict Produce validator: test/unit/test_batch's "realkafka" case produces
   every validator case raw (good batches in each codec, batches with holes
   as they are and re-encoded, bad CRC, two batches, control, RecordCount 0,
   producer id without sequence, BaseOffset not 0) and asserts that the
   broker's verdict is the validator's;
2. holes made by the real log cleaner: compacted topics (one per codec) are
   written until the cleaner has thinned batches; the same case fetches them
   raw, finds the holes, re-encodes them and the broker must accept the
   result."""
import os
import shutil
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402

binary = h.build_path("test", "unit", "test_batch")
if not os.access(binary, os.X_OK):
    h.skip("%s is not built" % binary)
if not shutil.which("kcat"):
    h.skip("kcat not found (install kcat)")
k = h.real_kafka(2)[0]
pid = os.getpid()
topic = "batch-validator-%d" % pid
k.create_topic(topic, partitions=1)

codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
compacted = {c: "batch-compacted-%s-%d" % (c, pid) for c in codecs}
for t in compacted.values():
    k.create_compacted_topic(t, segment_ms=100)
rounds = [0]


def consumed_offsets(t):
    p = h.kcat(["-C", "-t", t, "-e", "-q", "-f", "%o\\n"] + k.kcat_args(), timeout=60)
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    return [int(o) for o in p.stdout.split()]


def cleaned():
    """One more round per topic (one batch each: a unique key and 20 updates
    of one hot key), then: have all topics got holes?"""
    r = rounds[0] = rounds[0] + 1
    lines = "keep-%d:once\n" % r + "".join("hot:r%d-%d\n" % (r, i) for i in range(20))
    done = True
    for c, t in compacted.items():
        p = h.kcat(["-P", "-t", t, "-K", ":", "-z", c, "-X", "linger.ms=100"]
                   + k.kcat_args(), input=lines)
        if p.returncode != 0:
            raise AssertionError(p.stderr)
        offs = consumed_offsets(t)
        if offs == list(range(len(offs))):
            done = False
    return done


h.wait_for(cleaned, 180, "the log cleaner to thin a batch in every codec", interval=0.2)
env = dict(os.environ, CK_RUN_CASE="realkafka", CK_VERBOSITY="verbose",
           MIRRORD_BATCH_KAFKA=k.bootstrap.split(",")[0], MIRRORD_BATCH_TOPIC=topic,
           MIRRORD_BATCH_COMPACTED=",".join(compacted.values()))
p = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=300)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
h.check(p.returncode == 0, "test_batch realkafka case failed (status %d)" % p.returncode)
h.check("100%: Checks: 2, Failures: 0, Errors: 0" in p.stdout,
        "the realkafka cases did not all run: %r" % p.stdout[-300:])
print("PASS: the validator agrees with Apache Kafka on every case; batches the "
      "cleaner thinned in %s re-encode to batches Kafka accepts" % ", ".join(codecs))
