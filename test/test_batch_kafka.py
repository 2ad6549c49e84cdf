#!/usr/bin/env python3
"""The strict Produce validator (lib/batch) against a real Apache Kafka
broker: test/test_batch's "realkafka" case produces every validator case raw
(good batches in each codec, batches with holes as they are and re-encoded,
bad CRC, two batches, control, RecordCount 0, producer id without sequence)
and asserts that the broker's verdict is the validator's.  The mock cluster
accepts all of these, so only a real broker can tell."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

binary = h.build_path("test", "test_batch")
if not os.access(binary, os.X_OK):
    h.skip("%s is not built" % binary)
k = h.real_kafka(2)[0]
topic = "batch-validator-%d" % os.getpid()
k.create_topic(topic, partitions=1)
env = dict(os.environ, CK_RUN_CASE="realkafka", CK_VERBOSITY="verbose",
           MIRRORD_BATCH_KAFKA=k.bootstrap.split(",")[0], MIRRORD_BATCH_TOPIC=topic)
p = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=300)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
h.check(p.returncode == 0, "test_batch realkafka case failed (status %d)" % p.returncode)
h.check("100%: Checks: 1, Failures: 0, Errors: 0" in p.stdout,
        "the realkafka case did not run: %r" % p.stdout[-300:])
print("PASS: the validator agrees with Apache Kafka on every case")
