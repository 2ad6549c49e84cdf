#!/usr/bin/env python3
"""The control plane's source lookups against real Apache Kafka brokers:
topic names, regular expressions, partition counts and the source cluster
id through the real kafka-mirrors and mirrord, and no topic auto-created on
the source by looking one up (the brokers run with auto-creation off, so a
creation would have to come from an explicit request; we check for it
anyway)."""

import os
import sys
import uuid

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402


src, dst = h.real_kafka(2)
run = uuid.uuid4().hex[:8]
t_orders, t_pay, t_other = ("cp-%s-orders" % run, "cp-%s-payments" % run,
                            "cp-%s-other" % run)
src.create_topic(t_orders, 3)
src.create_topic(t_pay, 2)
src.create_topic(t_other, 1)

d = mt.Mirrord(destination=dst.bootstrap)
d.create("real", {"bootstrap.servers": src.bootstrap})
h.wait_for(lambda: src.cluster_id in d.cli_ok("--list").stdout, 60,
           "the source cluster id %s in --list" % src.cluster_id)

r = d.cli_ok("--add", "--mirror", "real", "--topic", t_orders)
eq(r.stdout.strip(), "Added 1 topic(s) in mirror real: [%s]" % t_orders,
   "add by name")
missing = "cp-%s-missing" % run
r = d.cli("--add", "--mirror", "real", "--topic", missing)
h.check(r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
        and missing in r.stderr, "a missing topic is refused: " + r.stderr)
h.check(missing not in src.metadata().get("topics", {}),
        "looking up a missing topic created it on the source")
r = d.cli_ok("--add", "--mirror", "real", "--topic", "cp-%s-pay.*" % run)
eq(r.stdout.strip(), "Added 1 topic(s) in mirror real: [%s]" % t_pay,
   "add by regular expression")
parts = sorted((p["topic"], p["partition"]) for p in d.describe_json("real"))
eq(parts, [(t_orders, 0), (t_orders, 1), (t_orders, 2), (t_pay, 0),
           (t_pay, 1)], "partitions taken from the source's counts")
d.cli_ok("--remove", "--mirror", "real", "--topic", ".*")
eq(d.stop(), 0, "exit status")
print("PASS: control plane against real Kafka")
