#!/usr/bin/env python3
"""Admin listener security against the real mirrord, as on a Kafka broker.

A matrix of server.security_protocol (PLAINTEXT, SSL, SSL with required
client certificates, SASL_PLAINTEXT, SASL_SSL) and SASL mechanisms (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512) against three clients: kafka-mirrors (our CLI
with a Kafka-style --command-config), kcat (librdkafka, -L metadata) and
kafka-python (KafkaAdminClient.describe_cluster).  Also: wrong passwords get
SASL_AUTHENTICATION_FAILED (58) with Kafka's message, a request before login
closes the connection and is counted, an unsupported mechanism gets
UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, missing or untrusted
client certificates fail the TLS handshake, the principal of a client
certificate is its RFC 2253 subject, `mirrord --add-user` stores salted keys
only (mode 0600) and SIGHUP reloads them, bad combinations of keys are
refused with file:line, and no password appears in any log.
"""

import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

MIRRORD = h.build_path("daemon", "mirrord")
CLI = h.build_path("daemon", "kafka-mirrors")
TMP = h.test_dir()
PW = {"alice": "alice-Pw-7f3e9", "bob": "bob-Pw-41c2a"}
WRONG = "not-the-Pw-0000"
MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

try:
    from kafka.admin import KafkaAdminClient
    import kafka.errors
except ImportError:
    KafkaAdminClient = None


def run(argv, input=None, timeout=60):
    return subprocess.run(argv, input=input, capture_output=True, text=True,
                          timeout=timeout)


# ---- certificates, made with the openssl CLI ------------------------------

def openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        h.fail("openssl %s: %s" % (args[0], r.stderr))


def make_pki(d):
    os.makedirs(d)
    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                ca + "-key.pem", "-out", ca + ".pem", "-subj",
                "/CN=mirrord %s" % ca, "-days", "2", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, subj, ca, ext in (
            ("server", "/CN=localhost", "ca", "server.ext"),
            ("client", "/O=example/CN=admin", "ca", "client.ext"),
            ("rogue", "/O=example/CN=admin", "rogue-ca", "client.ext"),
            ("server2", "/CN=localhost", "rogue-ca", "server.ext")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout",
                name + "-key.pem", "-out", name + ".csr", "-subj", subj, cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem",
                "-CAkey", ca + "-key.pem", "-CAcreateserial", "-out",
                name + ".pem", "-extfile", ext, "-days", "2", cwd=d)
    return {k: os.path.join(d, k + ".pem") for k in
            ("ca", "server", "server-key", "client", "client-key", "rogue",
             "rogue-key", "rogue-ca", "server2", "server2-key")}


PKI = make_pki(os.path.join(TMP, "pki"))

# ---- the credential store and its command ---------------------------------

CREDS = os.path.join(TMP, "creds")
for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
    r = run([MIRRORD, "--add-user", "alice", "--mechanism", mech,
             "--credentials-file", CREDS], input=PW["alice"] + "\n")
    eq(r.returncode, 0, "mirrord --add-user alice %s (stderr %s)"
       % (mech, r.stderr))
eq(stat.S_IMODE(os.stat(CREDS).st_mode), 0o600, "credentials file mode")
with open(CREDS) as f:
    text = f.read()
h.check(PW["alice"] not in text, "the password is not in the store")
h.check(re.search(r"^alice SCRAM-SHA-512 iterations=4096 salt=\S+ "
                  r"stored_key=\S+ server_key=\S+$", text, re.M),
        "store line for alice SCRAM-SHA-512:\n" + text)
r = run([MIRRORD, "--list-users", "--credentials-file", CREDS])
eq(sorted(r.stdout.splitlines()),
   ["alice SCRAM-SHA-256 iterations=4096",
    "alice SCRAM-SHA-512 iterations=4096"], "--list-users")
r = run([MIRRORD, "--add-user", "x", "--iterations", "100",
         "--credentials-file", CREDS], input="pw\n")
h.check(r.returncode == 2 and "4096..16384" in r.stderr,
        "too few iterations refused: %s" % r.stderr)

# ---- configuration errors name the key and the line -----------------------


def check_config(body, *fragments):
    path = os.path.join(TMP, "bad-%d.yaml" % abs(hash(body)))
    with open(path, "w") as f:
        f.write("destination:\n  bootstrap_servers: \"127.0.0.1:1\"\n" + body)
    r = run([MIRRORD, "--check-config", path])
    h.check(r.returncode == 1, "--check-config accepts:\n" + body)
    for frag in fragments:
        h.check(frag % {"path": path} in r.stderr + r.stdout,
                "expected %r in:\n%s" % (frag % {"path": path},
                                         r.stderr + r.stdout))


check_config("server:\n  security_protocol: SSL\n",
             "%(path)s:4:3: server.security_protocol: SSL needs "
             "server.ssl.certificate_location and server.ssl.key_location")
check_config("server:\n  security_protocol: SASL_SSL\n"
             "  ssl:\n    certificate_location: /x\n    key_location: /y\n",
             "%(path)s:4:3: server.security_protocol: SASL_SSL needs "
             "server.sasl.credentials_file")
check_config("server:\n  ssl:\n    ca_location: /x\n",
             "%(path)s:5:5: server.ssl.ca_location: is set but "
             "server.security_protocol is PLAINTEXT")
check_config("server:\n  security_protocol: SASL_PLAINTEXT\n  sasl:\n"
             "    credentials_file: /x\n    enabled_mechanisms: PLAIN,GSSAPI\n",
             "server.sasl.enabled_mechanisms: unknown mechanism 'GSSAPI'")
check_config("server:\n  security_protocol: SSL\n  ssl:\n"
             "    certificate_location: /x\n    key_location: /y\n"
             "    client_auth: required\n",
             "server.ssl.client_auth: client certificates need "
             "server.ssl.ca_location")

# ---- daemons --------------------------------------------------------------

mc = MockCluster(clusters=1, brokers=1,
                 log_path=os.path.join(TMP, "mock.log"))
DST = mc.bootstrap(0)
daemons = []


def tls_yaml(client_auth="none", cert=PKI["server"], key=PKI["server-key"]):
    return ("  ssl:\n    certificate_location: \"%s\"\n"
            "    key_location: \"%s\"\n    ca_location: \"%s\"\n"
            "    client_auth: %s\n" % (cert, key, PKI["ca"], client_auth))


def sasl_yaml(mechs=",".join(MECHS)):
    return ("  sasl:\n    enabled_mechanisms: \"%s\"\n"
            "    credentials_file: \"%s\"\n" % (mechs, CREDS))


def new_mirrord(name):
    """A Mirrord, not started, whose metrics port differs from its admin
    port (two free_port() calls in a row may return the same port)."""
    d = mt.Mirrord(destination=DST, name=name, start=False)
    while d.metrics_port == d.port:
        old = "127.0.0.1:%d\"\nlog:" % d.metrics_port
        d.metrics_port = h.free_port()
        with open(d.config_path) as f:
            cfg = f.read()
        with open(d.config_path, "w") as f:
            f.write(cfg.replace(old, "127.0.0.1:%d\"\nlog:" % d.metrics_port))
    return d


def start(name, protocol, extra=""):
    # Mirrord writes the server section; ours is spliced into it.
    d = new_mirrord(name)
    with open(d.config_path) as f:
        cfg = f.read()
    cfg = cfg.replace("server:\n", "server:\n  security_protocol: %s\n%s"
                      % (protocol, extra), 1)
    with open(d.config_path, "w") as f:
        f.write(cfg)
    d.start_listening()
    daemons.append(d)
    return d


def props(name, lines):
    path = os.path.join(TMP, name + ".properties")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def client_props(protocol, mech=None, user="alice", password=None,
                 cert=False, jaas=True, ca=True):
    lines = ["security.protocol=%s" % protocol]
    if "SSL" in protocol and ca:
        lines.append("ssl.ca.location=%s" % PKI["ca"])
    if cert:
        lines += ["ssl.certificate.location=%s" % PKI[cert],
                  "ssl.key.location=%s" % PKI[cert + "-key"]]
    if mech:
        pw = PW[user] if password is None else password
        lines.append("sasl.mechanism=%s" % mech)
        if jaas:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                      if mech == "PLAIN" else
                      "org.apache.kafka.common.security.scram.ScramLoginModule")
            lines.append('sasl.jaas.config=%s required username="%s" '
                         'password="%s";' % (module, user, pw))
        else:
            lines += ["sasl.username=%s" % user, "sasl.password=%s" % pw]
    return lines


def cli(d, lines, *args):
    path = props("cc-%d" % (len(os.listdir(TMP))), lines)
    return run([CLI, "--bootstrap-server", d.bootstrap, "--command-config",
                path] + list(args or ["--list"]))


def cli_ok(d, lines, what):
    r = cli(d, lines)
    eq(r.returncode, 0, "%s: kafka-mirrors --list (stderr: %s)"
       % (what, r.stderr))
    h.check("No mirrors found" in r.stdout, "%s: --list output %r"
            % (what, r.stdout))


def kcat_args(protocol, mech=None, user="alice", password=None, cert=None):
    a = ["-X", "security.protocol=%s" % protocol]
    if "SSL" in protocol:
        a += ["-X", "ssl.ca.location=%s" % PKI["ca"]]
    if cert:
        a += ["-X", "ssl.certificate.location=%s" % PKI[cert],
              "-X", "ssl.key.location=%s" % PKI[cert + "-key"]]
    if mech:
        a += ["-X", "sasl.mechanism=%s" % mech, "-X", "sasl.username=%s" % user,
              "-X", "sasl.password=%s" % (PW[user] if password is None
                                          else password)]
    return a


def kcat_ok(d, args, what):
    r = h.kcat(["-L", "-b", d.bootstrap, "-m", "10"] + args)
    eq(r.returncode, 0, "%s: kcat -L (stderr: %s)" % (what, r.stderr))
    h.check("broker 42 at 127.0.0.1:%d" % d.port in r.stdout,
            "%s: kcat -L shows mirrord as broker 42:\n%s" % (what, r.stdout))


def kcat_fails(d, args, what, fragment):
    r = h.kcat(["-L", "-b", d.bootstrap, "-m", "4"] + args)
    h.check(r.returncode != 0, "%s: kcat -L succeeded" % what)
    h.check(fragment in r.stderr, "%s: expected %r in kcat's errors:\n%s"
            % (what, fragment, r.stderr[-2000:]))


def kp_admin(d, **kw):
    a = KafkaAdminClient(bootstrap_servers=d.bootstrap,
                         request_timeout_ms=10000, api_version_auto_timeout_ms=10000,
                         **kw)
    try:
        return a.describe_cluster()
    finally:
        a.close()


def kp_kwargs(protocol, mech=None, user="alice", password=None, cert=None):
    kw = {"security_protocol": protocol}
    if "SSL" in protocol:
        kw.update(ssl_cafile=PKI["ca"], ssl_check_hostname=True)
    if cert:
        kw.update(ssl_certfile=PKI[cert], ssl_keyfile=PKI[cert + "-key"])
    if mech:
        kw.update(sasl_mechanism=mech, sasl_plain_username=user,
                  sasl_plain_password=PW[user] if password is None else password)
    return kw


def kp_ok(d, what, **kw):
    if KafkaAdminClient is None:
        return
    c = kp_admin(d, **kw)
    eq(c.get("controller_id"), 42, "%s: kafka-python describe_cluster "
       "controller (got %r)" % (what, c))


def kp_fails(d, what, **kw):
    if KafkaAdminClient is None:
        return
    try:
        c = kp_admin(d, **kw)
    except (kafka.errors.KafkaError, OSError) as e:  # ssl.SSLError too
        return e
    h.fail("%s: kafka-python describe_cluster succeeded: %r" % (what, c))


def metric(d, reason):
    m = re.search(r'^mirrord_admin_rejected_requests_total\{reason="%s"\} '
                  r'(\d+)' % reason, d.metrics(), re.M)
    return int(m.group(1)) if m else 0


# ---- PLAINTEXT: still the default, and clients are unchanged ---------------

plain = start("plain", "PLAINTEXT")
h.check(mt.api_versions_ok(plain.bootstrap), "PLAINTEXT answers ApiVersions")
cli_ok(plain, ["security.protocol=PLAINTEXT"], "PLAINTEXT")
kcat_ok(plain, [], "PLAINTEXT")
kp_ok(plain, "PLAINTEXT")
# ApiVersions advertises SaslHandshake and SaslAuthenticate; on a
# PLAINTEXT listener a SaslHandshake is ILLEGAL_SASL_STATE, and the
# connection keeps serving.
with mt.connect(plain.bootstrap) as s:
    s.sendall(mt.frame(18, 0, 1))
    resp = mt.recv_frame(s)
    n = struct.unpack(">i", resp[6:10])[0]
    keys = {struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i])[0]:
            struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i])[1:]
            for i in range(n)}
    eq(keys.get(17), (0, 1), "ApiVersions: SaslHandshake range")
    eq(keys.get(36), (0, 2), "ApiVersions: SaslAuthenticate range")
    s.sendall(mt.frame(17, 1, 2, struct.pack(">h", 5) + b"PLAIN"))
    resp = mt.recv_frame(s)
    eq(struct.unpack(">ih", resp[:6]), (2, 34),
       "SaslHandshake on PLAINTEXT: ILLEGAL_SASL_STATE")
    s.sendall(mt.frame(18, 0, 3))
    eq(struct.unpack(">ih", mt.recv_frame(s)[:6]), (3, 0),
       "the PLAINTEXT connection still serves")

# ---- SSL: TLS 1.2+, no client certificate ---------------------------------

# This one's certificate is renewed in place at the end (SIGHUP).
SSL_CERT = os.path.join(TMP, "ssl-server.pem")
SSL_KEY = os.path.join(TMP, "ssl-server-key.pem")
shutil.copy(PKI["server"], SSL_CERT)
shutil.copy(PKI["server-key"], SSL_KEY)
ssl_d = start("ssl", "SSL", tls_yaml("none", SSL_CERT, SSL_KEY))
h.check(not mt.api_versions_ok(ssl_d.bootstrap),
        "SSL listener answered a plaintext ApiVersions")
cli_ok(ssl_d, client_props("SSL"), "SSL")
kcat_ok(ssl_d, kcat_args("SSL"), "SSL")
kp_ok(ssl_d, "SSL", **kp_kwargs("SSL"))
r = cli(ssl_d, ["security.protocol=SSL"])  # system CAs do not know ours
h.check(r.returncode == 3 and "certificate verify failed" in r.stderr,
        "SSL with an unknown server CA: kafka-mirrors refuses (%s)" % r.stderr)

# ---- mTLS: client certificates required; the principal is the subject -----

mtls = start("mtls", "SSL", tls_yaml("required"))
cli_ok(mtls, client_props("SSL", cert="client"), "mTLS")
h.wait_for(lambda: "authenticated by client certificate as "
           "User:CN=admin,O=example" in mtls.log(), 10,
           "the principal of the client certificate in mirrord's log")
kcat_ok(mtls, kcat_args("SSL", cert="client"), "mTLS")
kp_ok(mtls, "mTLS", **kp_kwargs("SSL", cert="client"))
for what, cert in (("no client certificate", None),
                   ("an untrusted client certificate", "rogue")):
    before = metric(mtls, "tls_handshake")
    r = cli(mtls, client_props("SSL", cert=cert))
    h.check(r.returncode == 3, "mTLS with %s: kafka-mirrors exit %d (%s)"
            % (what, r.returncode, r.stderr))
    kcat_fails(mtls, kcat_args("SSL", cert=cert), "mTLS with " + what,
               "alert")
    kp_fails(mtls, "mTLS with " + what, **kp_kwargs("SSL", cert=cert))
    h.wait_for(lambda: metric(mtls, "tls_handshake") > before, 10,
               "refused TLS handshakes counted")
h.check("TLS handshake failed: the client sent no certificate" in mtls.log(),
        "the missing certificate is logged")
h.check("TLS handshake failed: client certificate not accepted" in mtls.log()
        or "TLS handshake failed: sent alert" in mtls.log(),
        "the untrusted certificate is logged:\n" + mtls.log()[-3000:])

# client_auth requested: a certificate is optional, but verified when sent.
req = start("mtls-requested", "SSL", tls_yaml("requested"))
cli_ok(req, client_props("SSL"), "SSL, certificate requested, none sent")
h.check("authenticated by client certificate" not in req.log(),
        "no principal from a certificate that was not sent")
cli_ok(req, client_props("SSL", cert="client"),
       "SSL, certificate requested and sent")
h.wait_for(lambda: "as User:CN=admin,O=example" in req.log(), 10,
           "the principal of a requested certificate")
r = cli(req, client_props("SSL", cert="rogue"))
h.check(r.returncode == 3, "an untrusted certificate is refused even when "
        "only requested (%s)" % r.stderr)

# ---- SASL_PLAINTEXT and SASL_SSL with PLAIN and SCRAM ----------------------

sasl = start("sasl", "SASL_PLAINTEXT", sasl_yaml())
sasl_ssl = start("sasl-ssl", "SASL_SSL", tls_yaml("none") + sasl_yaml())
for d, proto in ((sasl, "SASL_PLAINTEXT"), (sasl_ssl, "SASL_SSL")):
    for mech in MECHS:
        what = "%s %s" % (proto, mech)
        cli_ok(d, client_props(proto, mech), what + " (jaas)")
        cli_ok(d, client_props(proto, mech, jaas=False), what + " (sasl.*)")
        kcat_ok(d, kcat_args(proto, mech), what)
        kp_ok(d, what, **kp_kwargs(proto, mech))
        h.wait_for(lambda: "authenticated as User:alice (SASL %s)" % mech
                   in d.log(), 10, "the SASL principal in the log")
        # Wrong password: 58 with Kafka's message.
        r = cli(d, client_props(proto, mech, password=WRONG))
        eq(r.returncode, 1, "%s wrong password: kafka-mirrors exit (%s)"
           % (what, r.stderr))
        h.check("SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid "
                "username or password" in r.stderr,
                "%s wrong password: error 58 and message: %s" % (what, r.stderr))
        kcat_fails(d, kcat_args(proto, mech, password=WRONG),
                   what + " wrong password", "Authentication failed")
        kp_fails(d, what + " wrong password",
                 **kp_kwargs(proto, mech, password=WRONG))
    r = cli(d, [line.replace('"alice"', '"mallory"') for line in
                client_props(proto, "SCRAM-SHA-512", password=WRONG)])
    h.check(r.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in r.stderr,
            "%s unknown user: same error as a wrong password (%s)"
            % (proto, r.stderr))

# Before login only ApiVersions and the SASL requests are served.
before = metric(sasl, "unauthenticated")
with mt.connect(sasl.bootstrap) as s:
    s.sendall(mt.frame(18, 0, 1))
    eq(struct.unpack(">ih", mt.recv_frame(s)[:6]), (1, 0),
       "ApiVersions before login")
    s.sendall(mt.frame(98, 0, 2, b"\x00", flexible=True))  # ListMirrors
    h.check(mt.closed_by_peer(s), "ListMirrors before login closes")
h.wait_for(lambda: metric(sasl, "unauthenticated") == before + 1, 10,
           "the refused request counted as unauthenticated")
h.check("ListMirrors before SASL authentication completed" in sasl.log(),
        "the refused request is logged")
r = run([CLI, "--bootstrap-server", sasl.bootstrap, "--list"])
eq(r.returncode, 3, "kafka-mirrors without credentials on SASL: exit")

# An unsupported mechanism: 33 with the enabled list, then closed.
scram_only = start("scram-only", "SASL_PLAINTEXT", sasl_yaml("SCRAM-SHA-512"))
with mt.connect(scram_only.bootstrap) as s:
    s.sendall(mt.frame(17, 1, 7, struct.pack(">h", 5) + b"PLAIN"))
    resp = mt.recv_frame(s)
    eq(struct.unpack(">ihi", resp[:10]), (7, 33, 1),
       "SaslHandshake PLAIN: UNSUPPORTED_SASL_MECHANISM, one mechanism")
    eq(resp[10:], struct.pack(">h", 13) + b"SCRAM-SHA-512",
       "the enabled mechanisms are listed")
    h.check(mt.closed_by_peer(s), "closed after an unsupported mechanism")
r = cli(scram_only, client_props("SASL_PLAINTEXT", "PLAIN"))
h.check(r.returncode == 1 and "offers: SCRAM-SHA-512" in r.stderr,
        "kafka-mirrors names the offered mechanisms: %s" % r.stderr)
kcat_fails(scram_only, kcat_args("SASL_PLAINTEXT", "PLAIN"),
           "PLAIN when only SCRAM-SHA-512 is enabled", "SCRAM-SHA-512")

# ---- SIGHUP reloads the credential store -----------------------------------

bob = client_props("SASL_PLAINTEXT", "SCRAM-SHA-512", user="bob")
r = cli(sasl, bob)
eq(r.returncode, 1, "bob before --add-user")
r = run([MIRRORD, "--add-user", "bob", "--credentials-file", CREDS],
        input=PW["bob"] + "\n")
eq(r.returncode, 0, "--add-user bob (%s)" % r.stderr)
sasl.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "3 SCRAM credential(s) reloaded" in sasl.log(), 10,
           "the reload of the credentials file")
cli_ok(sasl, bob, "bob after SIGHUP")
r = run([MIRRORD, "--delete-user", "bob", "--credentials-file", CREDS])
eq(r.returncode, 0, "--delete-user bob (%s)" % r.stderr)
sasl.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "2 SCRAM credential(s) reloaded" in sasl.log(), 10,
           "the second reload")
eq(cli(sasl, bob).returncode, 1, "bob after --delete-user and SIGHUP")
# A store others may read is refused: at reload (the old one stays) ...
os.chmod(CREDS, 0o644)
sasl.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "mode 0644 lets group or others access" in sasl.log(), 10,
           "the refused world-readable store at reload")
cli_ok(sasl, client_props("SASL_PLAINTEXT", "SCRAM-SHA-256"),
       "alice after a refused reload")
# ... and at start.
bad = new_mirrord("bad-mode")
with open(bad.config_path) as f:
    cfg = f.read()
with open(bad.config_path, "w") as f:
    f.write(cfg.replace("server:\n", "server:\n  security_protocol: "
                        "SASL_PLAINTEXT\n" + sasl_yaml(), 1))
p = bad.start(wait=False)
eq(p.wait(30), 1, "mirrord with a world-readable credentials file: exit")
h.check("%s: mode 0644" % CREDS in bad.log(), "start-up names the file and "
        "its mode:\n" + bad.log())
os.chmod(CREDS, 0o600)

# ---- SIGHUP reads the TLS files again: certificates renewed in place --------

shutil.copy(PKI["server2"], SSL_CERT)  # now signed by another CA
shutil.copy(PKI["server2-key"], SSL_KEY)
ssl_d.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "TLS certificate, key and CA files reloaded" in ssl_d.log(),
           10, "the TLS files reloaded")
new_ca = ["security.protocol=SSL", "ssl.ca.location=%s" % PKI["rogue-ca"]]
cli_ok(ssl_d, new_ca, "SSL after the certificate was renewed")
r = cli(ssl_d, client_props("SSL"))
h.check(r.returncode == 3 and "certificate verify failed" in r.stderr,
        "the old certificate is no longer served (%s)" % r.stderr)
with open(SSL_CERT, "w") as f:
    f.write("not a certificate\n")
ssl_d.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "keeping the TLS files loaded before" in ssl_d.log(), 10,
           "a broken certificate file refused at reload")
h.check("server.ssl.certificate_location %s: cannot load" % SSL_CERT
        in ssl_d.log(), "the reload error names the key and the file")
cli_ok(ssl_d, new_ca, "SSL after a refused reload")

# ---- every daemon is still alive and no password is in any log -------------

for d in daemons:
    h.check(d.proc.alive(), "%s still running" % d.name)
for d in daemons:
    eq(d.stop(), 0, "%s exit status" % d.name)
for d in daemons + [bad]:
    log = d.log()
    for secret in list(PW.values()) + [WRONG]:
        h.check(secret not in log, "a password is in %s's log" % d.name)
print("PASS: admin listener security matrix")
