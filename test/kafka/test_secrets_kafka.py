#!/usr/bin/env python3
"""Secrets at rest on real SASL brokers (real Kafka tier), where the
passwords are really needed:

  * the destination password comes from a systemd credential
    (${credential:NAME}, $CREDENTIALS_DIRECTORY): mirrord.yaml holds none,
    and mirroring into the SASL destination works;
  * the source password is given in clear in CreateMirror: records are
    mirrored, no file under storage.data_dir holds the password, and after
    a restart (the password read back from its sealed form) new records
    are mirrored too;
  * a source password from ${file:...} inside mirrors.provider_dirs
    works the same, and the file's value is nowhere under data_dir;
  * a wrong password is refused by the broker (so the passwords above did
    matter), and no secret is in the log, DescribeMirrors or /metrics.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import kraw  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Producer
except ImportError:
    h.skip("python3-confluent-kafka is not installed")

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()


def hwm(cluster, topic, partition=0):
    """High watermark, read through the tier's own PLAINTEXT listener."""
    c = kraw.Cluster(cluster.admin_bootstrap)
    try:
        return c.offsets(topic, partition)[1]
    except Exception:  # noqa: BLE001 - not there yet
        return -1
    finally:
        c.close()


def produce(cluster, topic, n, tag):
    p = Producer(dict(cluster.client_config(), **{"linger.ms": 5, "acks": "all"}))
    for i in range(n):
        p.produce(topic, value=("%s-%d" % (tag, i)).encode())
    left = p.flush(60)
    if left:
        h.fail("%d records not delivered to %s" % (left, topic))


src, dst = h.real_kafka(2, security="sasl")
rk = h.realkafka()
SRC_PW = rk.USERS["alice"]
DST_PW = rk.USERS["bob"]
t1, t2 = "secrets-clear-" + RUN, "secrets-file-" + RUN
for t in (t1, t2):
    src.create_topic(t, partitions=1)
produce(src, t1, 10, "a")
produce(src, t2, 7, "b")

creds = os.path.join(T, "credentials")
allowed = os.path.join(T, "allowed")
for p in (creds, allowed):
    os.makedirs(p, exist_ok=True)
with open(os.path.join(creds, "dest-password"), "w") as f:
    f.write(DST_PW + "\n")
with open(os.path.join(allowed, "source.properties"), "w") as f:
    f.write("source.password=%s\n" % SRC_PW)
os.environ["CREDENTIALS_DIRECTORY"] = creds

yaml = ("mirrors:\n"
        "  provider_dirs: [\"%s\"]\n" % allowed)
d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=yaml, start=False,
               destination_client=mt.sasl_plain(
                   "bob", "${credential:dest-password}"))
with open(d.config_path) as f:
    text = f.read()
h.check(DST_PW not in text, "mirrord.yaml holds the destination password")
d.start()

sasl = {"bootstrap.servers": src.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice"}
d.create("clear", dict(sasl, **{"sasl.password": SRC_PW}))
d.create("fromfile", dict(sasl, **{
    "sasl.password": "${file:%s/source.properties:source.password}" % allowed}))
d.create("wrong", dict(sasl, **{"sasl.password": "not-the-password"}))
eq(d.cli_ok("--add", "--mirror", "clear", "--topic", t1).returncode, 0, "add " + t1)
eq(d.cli_ok("--add", "--mirror", "fromfile", "--topic", t2).returncode, 0, "add " + t2)
h.wait_for(lambda: hwm(dst, t1) == 10, 120,
           "%s mirrored into the SASL destination (log %s)" % (t1, d.proc.log_path))
h.wait_for(lambda: hwm(dst, t2) == 7, 120, "%s mirrored with the file's password" % t2)
r = d.cli("--add", "--mirror", "wrong", "--topic", t1)
h.check(r.returncode != 0, "a wrong source password was not refused: %s" % r.stdout)
print("wrong password: %s" % r.stderr.strip(), flush=True)

eq(mt.files_holding(d.data_dir, SRC_PW), [], "files under data_dir holding the source password")
eq(mt.files_holding(d.data_dir, DST_PW), [],
   "files under data_dir holding the destination password")
h.check(mt.files_holding(d.data_dir, "enc:v1:"), "no sealed value under data_dir")

# Restart: the clear mirror's password is read back from its sealed form.
eq(d.stop(), 0, "clean stop")
eq(mt.files_holding(d.data_dir, SRC_PW), [], "files holding the source password after the snapshot")
d.start()
produce(src, t1, 5, "c")
produce(src, t2, 3, "d")
h.wait_for(lambda: hwm(dst, t1) == 15, 120, "%s mirrored after the restart" % t1)
h.wait_for(lambda: hwm(dst, t2) == 10, 120, "%s mirrored after the restart" % t2)
out = (d.cli_ok("--describe").stdout + d.cli_ok("--list").stdout + d.metrics()
       + d.log())
for pw in (SRC_PW, DST_PW):
    h.check(pw not in out, "a password reached the log, DescribeMirrors or /metrics")
eq(mt.files_holding(d.data_dir, SRC_PW), [], "files holding the source password at the end")
d.stop()
print("PASS: SASL mirroring with sealed, file-provided and credential passwords")
