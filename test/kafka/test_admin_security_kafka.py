#!/usr/bin/env python3
"""Apache Kafka's own Java admin client and tools log in to a secured
mirrord as they do to a broker: kafka-cluster.sh's ClusterTool (Admin
describeCluster) and kafka-broker-api-versions.sh's BrokerApiVersionsCommand
from the pinned Kafka jars, with a client.properties in Kafka's convention,
against SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SSL with
required client certificates (PEM keystore; the principal is the
certificate's subject).  A wrong password is refused with Kafka's
SaslAuthenticationException and message.

Needs Java and the Kafka jars (fetched by Maven on first use), not a broker;
SKIP when they cannot be had."""

import os
import re
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

rk = h.realkafka()
try:
    JAVA = rk.find_java()
    LIBS = rk.ensure_libs()
except rk.Unavailable as e:
    h.skip("Kafka's Java client: %s" % e)

MIRRORD = h.build_path("daemon", "mirrord")
TMP = h.test_dir()
PW = "j4va-Admin-Pw-93"
WRONG = "wrong-Pw-1111"


def run(argv, input=None, timeout=180, cwd=None):
    return subprocess.run(argv, input=input, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, start_new_session=True)


def openssl(*args):
    r = run(["openssl"] + list(args), cwd=PKI_DIR, timeout=60)
    if r.returncode != 0:
        h.fail("openssl %s: %s" % (args[0], r.stderr))


PKI_DIR = os.path.join(TMP, "pki")
os.makedirs(PKI_DIR)
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
        "ca-key.pem", "-out", "ca.pem", "-subj", "/CN=mirrord java CA",
        "-days", "2")
with open(os.path.join(PKI_DIR, "server.ext"), "w") as f:
    f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n")
with open(os.path.join(PKI_DIR, "client.ext"), "w") as f:
    f.write("extendedKeyUsage=clientAuth\n")
for name, subj, ext in (("server", "/CN=localhost", "server.ext"),
                        ("client", "/O=example/CN=java-admin", "client.ext")):
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout",
            name + "-key.pem", "-out", name + ".csr", "-subj", subj)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey",
            "ca-key.pem", "-CAcreateserial", "-out", name + ".pem",
            "-extfile", ext, "-days", "2")
P = {k: os.path.join(PKI_DIR, k + ".pem")
     for k in ("ca", "server", "server-key", "client", "client-key")}
# Java's PEM keystore: the (PKCS#8) key followed by the certificate.
KEYSTORE = os.path.join(PKI_DIR, "client-keystore.pem")
with open(KEYSTORE, "w") as out:
    for part in ("client-key", "client"):
        with open(P[part]) as f:
            out.write(f.read())

CREDS = os.path.join(TMP, "creds")
for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
    r = run([MIRRORD, "--add-user", "admin", "--mechanism", mech,
             "--credentials-file", CREDS], input=PW + "\n")
    if r.returncode != 0:
        h.fail("--add-user: %s" % r.stderr)

mc = MockCluster(clusters=1, brokers=1, log_path=os.path.join(TMP, "mock.log"))


def new_mirrord(name):
    """A Mirrord, not started, whose metrics port differs from its admin
    port (two free_port() calls in a row may return the same port)."""
    d = mt.Mirrord(destination=mc.bootstrap(0), name=name, start=False)
    while d.metrics_port == d.port:
        old = "127.0.0.1:%d\"\nlog:" % d.metrics_port
        d.metrics_port = h.free_port()
        with open(d.config_path) as f:
            cfg = f.read()
        with open(d.config_path, "w") as f:
            f.write(cfg.replace(old, "127.0.0.1:%d\"\nlog:" % d.metrics_port))
    return d


def start(name, server_yaml):
    d = new_mirrord(name)
    with open(d.config_path) as f:
        cfg = f.read()
    with open(d.config_path, "w") as f:
        f.write(cfg.replace("server:\n", "server:\n" + server_yaml, 1))
    d.start_listening()
    d.cluster_id = re.search(r"cluster id (\S+)", d.log()).group(1)
    return d


TLS = ("  ssl:\n    certificate_location: \"%s\"\n    key_location: \"%s\"\n"
       "    ca_location: \"%s\"\n" % (P["server"], P["server-key"], P["ca"]))
sasl_ssl = start("sasl-ssl", "  security_protocol: SASL_SSL\n" + TLS +
                 "  sasl:\n    enabled_mechanisms: "
                 "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
                 "    credentials_file: \"%s\"\n" % CREDS)
mtls = start("mtls", "  security_protocol: SSL\n" + TLS +
             "    client_auth: required\n")


def properties(name, lines):
    path = os.path.join(TMP, name + ".properties")
    with open(path, "w") as f:
        f.write("\n".join(lines + ["ssl.truststore.type=PEM",
                                   "ssl.truststore.location=%s" % P["ca"],
                                   "request.timeout.ms=15000",
                                   "default.api.timeout.ms=30000"]) + "\n")
    return path


def sasl_props(mech, password=PW):
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
              if mech == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule")
    return properties("sasl-%s-%s" % (mech, password == PW),
                      ["security.protocol=SASL_SSL", "sasl.mechanism=" + mech,
                       'sasl.jaas.config=%s required username="admin" '
                       'password="%s";' % (module, password)])


def java(main, args):
    log4j = os.path.join(TMP, "log4j2.properties")
    if not os.path.exists(log4j):
        with open(log4j, "w") as f:
            f.write("rootLogger.level = WARN\n"
                    "rootLogger.appenderRef.out.ref = out\n"
                    "appender.out.type = Console\nappender.out.name = out\n"
                    "appender.out.target = SYSTEM_ERR\n"
                    "appender.out.layout.type = PatternLayout\n"
                    "appender.out.layout.pattern = %p %c: %m%n\n")
    return run([JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dlog4j2.configurationFile=" + log4j, "-cp",
                os.path.join(LIBS, "*"), main] + list(args))


def cluster_id(d, props):
    return java("org.apache.kafka.tools.ClusterTool",
                ["cluster-id", "--bootstrap-server", d.bootstrap, "--config",
                 props])


for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
    r = cluster_id(sasl_ssl, sasl_props(mech))
    h.check(r.returncode == 0 and "Cluster ID: %s" % sasl_ssl.cluster_id
            in r.stdout, "ClusterTool over SASL_SSL %s: exit %d\nstdout: %s\n"
            "stderr: %s" % (mech, r.returncode, r.stdout, r.stderr[-3000:]))
    h.wait_for(lambda: "authenticated as User:admin (SASL %s)" % mech
               in sasl_ssl.log(), 10, "the %s login in the log" % mech)
    print("ok: Java ClusterTool over SASL_SSL %s" % mech, flush=True)

r = java("org.apache.kafka.tools.BrokerApiVersionsCommand",
         ["--bootstrap-server", sasl_ssl.bootstrap, "--command-config",
          sasl_props("SCRAM-SHA-512")])
h.check(r.returncode == 0 and "SaslAuthenticate(36): 0 to 2" in r.stdout
        and "SaslHandshake(17): 0 to 1" in r.stdout,
        "kafka-broker-api-versions over SASL_SSL: exit %d\nstdout: %s\n"
        "stderr: %s" % (r.returncode, r.stdout, r.stderr[-3000:]))
print("ok: Java BrokerApiVersionsCommand over SASL_SSL SCRAM-SHA-512")

for mech in ("PLAIN", "SCRAM-SHA-512"):
    r = cluster_id(sasl_ssl, sasl_props(mech, WRONG))
    out = r.stdout + r.stderr
    h.check(r.returncode != 0 and "SaslAuthenticationException" in out and
            "Authentication failed: Invalid username or password" in out,
            "ClusterTool with a wrong %s password: exit %d\n%s"
            % (mech, r.returncode, out[-3000:]))
    print("ok: Java client refused with a wrong %s password" % mech)

r = cluster_id(mtls, properties("mtls", [
    "security.protocol=SSL", "ssl.keystore.type=PEM",
    "ssl.keystore.location=%s" % KEYSTORE]))
h.check(r.returncode == 0 and "Cluster ID: %s" % mtls.cluster_id in r.stdout,
        "ClusterTool over mTLS: exit %d\n%s" % (r.returncode,
                                                (r.stdout + r.stderr)[-3000:]))
h.check("authenticated by client certificate as User:CN=java-admin,O=example"
        in mtls.log(), "the certificate's principal in the log")
r = cluster_id(mtls, properties("mtls-nocert", ["security.protocol=SSL"]))
h.check(r.returncode != 0, "ClusterTool over mTLS without a certificate "
        "succeeded")
print("ok: Java ClusterTool over SSL with a client certificate")

for d in (sasl_ssl, mtls):
    h.check(d.proc.alive(), "%s still running" % d.name)
    if d.stop() != 0:
        h.fail("%s exit status" % d.name)
    for secret in (PW, WRONG):
        h.check(secret not in d.log(), "a password is in %s's log" % d.name)
print("PASS: Kafka's Java admin client against a secured mirrord")
