#!/usr/bin/env python3
"""Files named over the wire against real Apache Kafka over TLS (the "ssl"
tier of test/kafka/realkafka.py; SKIPs with the reason when it cannot run).

What a user would check:

  * a mirror whose CA certificate, client certificate and key are PEM files
    inside mirrors.allowed_file_dirs connects to the source over TLS and
    copies records, values equal on both sides (the files are read off the
    event loop and the TLS context is built from memory);
  * the destination's files, named in mirrord.yaml, may live anywhere;
  * the same CA named from outside the allowed directory is refused with
    INVALID_CONFIG naming the key and the path;
  * without a file named (the system trust store), the test CA's broker
    certificate is refused and AddTopicsToMirror says so;
  * a source that requires client certificates (mTLS) accepts the
    certificate chain and key read from the allowed directory.
"""

import os
import shutil
import sys
import uuid

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError:
    h.skip("python3-confluent-kafka is not installed")


def values(cfg, topic, n):
    """The first n values of partition 0, read with cfg (librdkafka)."""
    c = Consumer(dict(cfg, **{"group.id": "files-kafka-%s" % RUN,
                              "enable.auto.commit": False,
                              "auto.offset.reset": "earliest"}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while len(out) < n:
            m = c.poll(10)
            if m is None:
                break
            if m.error() is None:
                out.append(m.value())
        return out
    finally:
        c.close()


def end_offset(cfg, topic):
    c = Consumer(dict(cfg, **{"group.id": "files-kafka-%s" % RUN}))
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        c.close()


RUN = uuid.uuid4().hex[:8]
src, dst = h.real_kafka(2, security="ssl")
scfg, dcfg = src.client_config(), dst.client_config()
TOPIC = "files-%s" % RUN
src.create_topic(TOPIC, 1)

ALLOWED = os.path.join(h.test_dir(), "certs")
os.makedirs(ALLOWED)
files = {}
for key, name in (("ssl.ca.location", "ca.pem"),
                  ("ssl.certificate.location", "client-cert.pem"),
                  ("ssl.key.location", "client-key.pem")):
    files[key] = os.path.join(ALLOWED, name)
    shutil.copy(scfg[key], files[key])

# The destination's files stay where the test tier made them: mirrord.yaml
# is the operator's, any directory is fine there.
dest_client = "".join("    %s: \"%s\"\n" % (k, v) for k, v in dcfg.items()
                      if k != "bootstrap.servers")
d = mt.Mirrord(destination=dst.bootstrap, start=False, extra_yaml=(
    "mirrors:\n  allowed_file_dirs: [\"%s\"]\n" % ALLOWED))
# destination.client goes into the destination section Mirrord wrote.
with open(d.config_path) as f:
    text = f.read()
text = text.replace("destination:\n", "destination:\n  client:\n%s" % dest_client, 1)
with open(d.config_path, "w") as f:
    f.write(text)
d.start()

# Named from outside the allowed directory: refused, naming key and path.
r = d.create("outside", {"bootstrap.servers": src.bootstrap,
                         "security.protocol": "ssl",
                         "ssl.ca.location": scfg["ssl.ca.location"]},
             expect_ok=False)
h.check(r.returncode == 1 and "INVALID_CONFIG" in r.stderr
        and "ssl.ca.location" in r.stderr
        and scfg["ssl.ca.location"] in r.stderr
        and "outside the allowed directories" in r.stderr,
        "a CA outside the allowed directory: exit %d, stderr %s"
        % (r.returncode, r.stderr))

p = Producer(dict(scfg, **{"acks": "all", "linger.ms": 5}))
N = 200
for i in range(N):
    p.produce(TOPIC, value=b"tls-%s-%d" % (RUN.encode(), i), partition=0)
eq(p.flush(60), 0, "records left unsent to the source")

configs = dict({"bootstrap.servers": src.bootstrap, "security.protocol": "ssl",
                "mirror.fetch.wait.max.ms": "200"}, **files)
d.create("tls", configs)
d.cli_ok("--add", "--mirror", "tls", "--topic", TOPIC)
try:
    h.wait_for(lambda: end_offset(dcfg, TOPIC) == N, 120,
               "%d records on the destination over TLS" % N)
except AssertionError as e:
    h.fail("%s\ndescribe: %r\nlog:\n%s" % (e, d.describe_json("tls"),
                                            d.proc.tail(40)))
eq(values(dcfg, TOPIC, N), values(scfg, TOPIC, N),
   "values on the destination and the source")
h.check(all(r["state"] == "MIRRORING" for r in d.describe_json("tls")),
        "partitions MIRRORING: %r" % d.describe_json("tls"))
print("a mirror over TLS with its PEM files in the allowed directory copied "
      "%d records" % N, flush=True)

# No CA named: the system store does not know the test CA.
T2 = TOPIC + "-nocafile"
src.create_topic(T2, 1)
d.create("nocafile", {"bootstrap.servers": src.bootstrap,
                      "security.protocol": "ssl"})
r = d.cli("--add", "--mirror", "nocafile", "--topic", T2)
h.check(r.returncode != 0 and "certificate" in r.stderr,
        "AddTopicsToMirror over TLS without the test CA should name the "
        "certificate problem: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))

# A source that requires client certificates (mTLS): the certificate chain
# and the key, read off the loop, are what the broker checks.
msrc = h.real_kafka(1, security="mtls")[0]
mcfg = msrc.client_config()
MDIR = os.path.join(ALLOWED, "mtls")
os.makedirs(MDIR)
mfiles = {}
for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
    mfiles[key] = os.path.join(MDIR, os.path.basename(mcfg[key]))
    shutil.copy(mcfg[key], mfiles[key])
T3 = TOPIC + "-mtls"
msrc.create_topic(T3, 1)
p = Producer(dict(mcfg, **{"acks": "all", "linger.ms": 5}))
for i in range(N):
    p.produce(T3, value=b"mtls-%s-%d" % (RUN.encode(), i), partition=0)
eq(p.flush(60), 0, "records left unsent to the mTLS source")
d.create("mtls", dict({"bootstrap.servers": msrc.bootstrap,
                       "security.protocol": "ssl",
                       "mirror.fetch.wait.max.ms": "200"}, **mfiles))
d.cli_ok("--add", "--mirror", "mtls", "--topic", T3)
try:
    h.wait_for(lambda: end_offset(dcfg, T3) == N, 120,
               "%d records from the mTLS source on the destination" % N)
except AssertionError as e:
    h.fail("%s\ndescribe: %r\nlog:\n%s" % (e, d.describe_json("mtls"),
                                            d.proc.tail(40)))
eq(values(dcfg, T3, N), values(mcfg, T3, N),
   "values on the destination and the mTLS source")
print("a mirror from an mTLS source with its certificate and key in the "
      "allowed directory copied %d records" % N, flush=True)

eq(d.stop(), 0, "mirrord's exit status on SIGTERM")
print("PASS: files named over the wire against real Kafka over TLS", flush=True)
