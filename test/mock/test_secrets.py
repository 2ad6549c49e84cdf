#!/usr/bin/env python3
"""Secrets at rest and config providers, against the real mirrord binary
with librdkafka mock clusters (test_secrets_kafka.py does the same where
the password is really needed, on SASL brokers).

  * a sasl.password given in clear in CreateMirror is in no file under
    storage.data_dir (log segments, snapshots, every file, byte for byte);
    the sealed form is there instead; after a restart the mirror still
    mirrors (its configs still open);
  * a wrong or missing key file stops the start, naming the key file;
  * a data directory written before secrets were sealed (test/tools/mlog_seed,
    the real log code with no sealer) is migrated at start-up: afterwards
    no file holds the clear value, in the snapshot or the segment;
  * ${file:...} inside mirrors.provider_dirs is accepted and stored as
    the reference, resolved at use (a missing key fails the partitions
    naming key and provider, until it is back); outside, refused naming the
    path, and refused altogether without mirrors.provider_dirs; ${env:...}
    over the wire refused unless mirrors.allow_env_provider; ${credential:}
    never over the wire;
  * destination.client with ${credential:NAME} and $CREDENTIALS_DIRECTORY:
    mirrord.yaml holds no secret, and a missing credential stops the start
    naming it; the key itself from the credential mirrord.secret_key;
    server.ssl.key_password from a credential opens the admin TLS key;
  * no secret in DescribeMirrors, /metrics or the log.
"""

import base64
import os
import stat
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

RUN = os.getpid()
SECRET = "S3cretValue-%d-wire" % RUN
FILE_SECRET = "S3cretValue-%d-file" % RUN
OLD_SNAP = "S3cretValue-%d-old-snapshot" % RUN
OLD_SEG = "S3cretValue-%d-old-segment" % RUN
DEST_SECRET = "S3cretValue-%d-dest" % RUN
T = h.test_dir()


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def start_fails(d, what):
    """Starts d's mirrord and expects it to exit non-zero; its output."""
    p = d.start(wait=False)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        h.fail("mirrord started although %s" % what)
    h.check(rc != 0, "mirrord exited %d although %s" % (rc, what))
    return p.output()


def wait_state(d, mirror, want, timeout=60):
    h.wait_for(lambda: set(d.states(mirror).values()) == {want}, timeout,
               "%s's partitions %s" % (mirror, want))


mc = MockCluster(clusters=2, brokers=1, log_path=os.path.join(T, "mock.log"))
SRC, DST = mc.bootstrap(0), mc.bootstrap(1)
mc.cmd("topic 0 orders 2")
mc.cmd("topic 0 payments 1")

allowed = os.path.join(T, "allowed")
outside = os.path.join(T, "outside")
creds = os.path.join(T, "credentials")
for p in (allowed, outside, creds):
    os.makedirs(p, exist_ok=True)
write(os.path.join(allowed, "secrets.properties"),
      "source.password=%s\n" % FILE_SECRET)
write(os.path.join(outside, "secrets.properties"),
      "source.password=%s\n" % FILE_SECRET)

yaml = ("mirrors:\n"
        "  provider_dirs: [\"%s\"]\n" % allowed)
d = mt.Mirrord(destination=DST, extra_yaml=yaml)
data = d.data_dir

# ---- a clear secret from CreateMirror is sealed before it is written ------
d.create("m1", {"bootstrap.servers": SRC, "sasl.username": "alice",
                "sasl.password": SECRET})
eq(mt.files_holding(data, SECRET), [], "files under data_dir holding the clear password")
h.check(mt.files_holding(data, "enc:v1:"), "no file under %s holds a sealed value" % data)
h.check(mt.files_holding(data, "sasl.username"),
        "the mirror's configs are not in the log at all")
key = os.path.join(data, "secret.key")
h.check(os.path.exists(key), "no key file %s was created" % key)
eq(stat.S_IMODE(os.stat(key).st_mode), 0o600, "mode of %s" % key)
eq(d.cli_ok("--add", "--mirror", "m1", "--topic", "orders").returncode, 0,
   "add orders")
wait_state(d, "m1", "MIRRORING")

# A clean stop writes a snapshot; the clear value is still nowhere.
eq(d.stop(), 0, "exit status of a clean stop")
h.check(any(p.endswith(".snap") for p in mt.files_under(data)),
        "no snapshot after a clean stop: %s" % mt.files_under(data))
eq(mt.files_holding(data, SECRET), [], "files holding the clear password after the snapshot")
d.start()
# The configs still open: the mirror mirrors again after the restart.
wait_state(d, "m1", "MIRRORING")
h.check(SECRET not in d.cli_ok("--describe", "--mirror", "m1").stdout,
        "DescribeMirrors shows the secret")
h.check(SECRET not in d.cli_ok("--list").stdout, "ListMirrors shows the secret")
h.check(SECRET not in d.metrics(), "/metrics shows the secret")

# ---- the key file ---------------------------------------------------------
d.stop()
with open(key, "rb") as f:
    good_key = f.read()
write(key, base64.b64encode(os.urandom(32)).decode() + "\n")
out = start_fails(d, "the key file holds another key")
h.check("storage.secret_key_file %s" % key in out and "does not decrypt" in out,
        "the wrong-key error does not name the key file:\n" + out[-2000:])
os.unlink(key)
out = start_fails(d, "the key file is missing")
h.check(key in out and "does not exist" in out and "restore" in out,
        "the missing-key error does not name the key file:\n" + out[-2000:])
h.check(not os.path.exists(key), "a new key replaced the missing one")
write(key, good_key.decode())
d.start()
wait_state(d, "m1", "MIRRORING")

# ---- references over the wire -----------------------------------------------
inside_ref = "${file:%s/secrets.properties:source.password}" % allowed
r = d.create("f1", {"bootstrap.servers": SRC, "sasl.password": inside_ref,
                    "mirror.failed.retry.max.backoff.ms": "2000"})
eq(r.returncode, 0, "create with ${file:} inside the allowed directory")
eq(mt.files_holding(data, FILE_SECRET), [], "files holding the file provider's secret")
h.check(mt.files_holding(data, inside_ref), "the reference is not stored as written")
eq(d.cli_ok("--add", "--mirror", "f1", "--topic", "payments").returncode, 0,
   "add payments to f1")
wait_state(d, "f1", "MIRRORING")

outside_ref = "${file:%s/secrets.properties:source.password}" % outside
r = d.create("f2", {"bootstrap.servers": SRC, "sasl.password": outside_ref},
             expect_ok=False)
mt.expect_error(r, "INVALID_CONFIG", outside)
h.check("outside the allowed directories" in r.stderr, "why: " + r.stderr)
mt.expect_error(d.create("f3", {"bootstrap.servers": SRC,
                             "sasl.password": "${file:%s/none.properties:k}"
                             % allowed}, expect_ok=False),
             "INVALID_CONFIG", "none.properties")
mt.expect_error(d.create("f4", {"bootstrap.servers": SRC,
                             "sasl.password": "${file:/proc/self/environ:PATH}"},
                      expect_ok=False), "INVALID_CONFIG", "/proc/self/environ")
r = d.create("e1", {"bootstrap.servers": SRC, "sasl.password": "${env:HOME}"},
             expect_ok=False)
mt.expect_error(r, "INVALID_CONFIG", "config provider env is not allowed here")
h.check("mirrors.allow_env_provider" in r.stderr, "no hint: " + r.stderr)
mt.expect_error(d.create("c1", {"bootstrap.servers": SRC,
                             "sasl.password": "${credential:mirrord.secret_key}"},
                      expect_ok=False),
             "INVALID_CONFIG", "config provider credential is not allowed")
mt.expect_error(d.create("b1", {"bootstrap.servers": "${env:HOME}"},
                      expect_ok=False), "INVALID_CONFIG", "bootstrap.servers")
# A key missing from an allowed file is seen at use (the file exists, so
# CreateMirror takes it): adding a topic answers the error, naming the key
# and the provider, not the secret.
d.create("f5", {"bootstrap.servers": SRC, "sasl.password":
                "${file:%s/secrets.properties:no.such.key}" % allowed})
r = d.cli("--add", "--mirror", "f5", "--topic", "orders")
h.check(r.returncode != 0 and "key 'no.such.key' not found" in r.stderr
        and "${file:" in r.stderr, "add to f5: %s %s" % (r.stdout, r.stderr))
h.check(FILE_SECRET not in r.stderr, "the file's secret reached the error")

# With mirrors.allow_env_provider the env provider is accepted, and a
# variable the daemon does not have is refused at once.
d.stop()
# The key f1 reads is gone at the next start: f1's partitions fail, naming
# the key and the provider.
write(os.path.join(allowed, "secrets.properties"), "other.key=x\n")
with open(d.config_path, "a") as f:
    f.write("  allow_env_provider: true\n")
os.environ["MIRRORD_TEST_SOURCE_PW"] = "S3cretValue-%d-env" % RUN
d.start()
eq(d.create("e2", {"bootstrap.servers": SRC,
                   "sasl.password": "${env:MIRRORD_TEST_SOURCE_PW}"}).returncode,
   0, "create with ${env:} when allowed")
mt.expect_error(d.create("e3", {"bootstrap.servers": SRC,
                             "sasl.password": "${env:MIRRORD_TEST_NOT_SET}"},
                      expect_ok=False), "INVALID_CONFIG",
             "environment variable MIRRORD_TEST_NOT_SET is not set")
h.wait_for(lambda: {p["state"] for p in d.describe_json("f1")} == {"FAILED"},
           60, "f1's partitions FAILED once its key is gone")
why = d.describe_json("f1")[0].get("errorMessage") or ""
h.check("key 'source.password' not found" in why and "${file:" in why,
        "f1's failure does not name the key and the provider: %r" % why)
# Once the key is back, f1 resolves again (retried with backoff) and its
# partitions mirror again by themselves.
write(os.path.join(allowed, "secrets.properties"),
      "source.password=%s\n" % FILE_SECRET)
wait_state(d, "f1", "MIRRORING", timeout=120)
eq(mt.files_holding(data, os.environ["MIRRORD_TEST_SOURCE_PW"]), [],
   "files holding the env provider's secret")
h.check(SECRET not in d.log() and FILE_SECRET not in d.log(),
        "a secret reached the log")
d.stop()

# ---- migration of a log written before secrets were sealed ---------------
old = os.path.join(T, "old-data")
seed = subprocess.run(
    [h.build_path("test", "tools", "mlog_seed"), old,
     "old1", "bootstrap.servers=" + SRC, "sasl.password=" + OLD_SNAP,
     "--compact",
     "old2", "bootstrap.servers=" + SRC, "sasl.password=" + OLD_SEG],
    capture_output=True, text=True, timeout=60)
eq(seed.returncode, 0, "mlog_seed: " + seed.stderr)
h.check(mt.files_holding(old, OLD_SNAP) and mt.files_holding(old, OLD_SEG),
        "the seeded log does not hold its clear secrets: %s" % mt.files_under(old))
h.check(any(p.endswith(".snap") for p in mt.files_holding(old, OLD_SNAP)),
        "the first secret is not in a snapshot")
h.check(any(p.endswith(".log") for p in mt.files_holding(old, OLD_SEG)),
        "the second secret is not in a segment")
m = mt.Mirrord(destination=DST, name="migrated", data_dir=old)
eq(mt.files_holding(old, OLD_SNAP) + mt.files_holding(old, OLD_SEG), [],
   "files holding a clear secret after the migration")
h.check("held secrets in clear: 2 values now encrypted" in m.proc.output(),
        "the migration is not logged:\n" + m.proc.tail())
rows = m.cli_ok("--list").stdout
h.check("old1" in rows and "old2" in rows, "migrated mirrors: " + rows)
# By default (no mirrors.provider_dirs) no file may be read by reference:
# mirrord.yaml itself would read as a .properties file.
r = m.create("nofile", {"bootstrap.servers": SRC, "sasl.password":
                        "${file:%s:data_dir}" % m.config_path}, expect_ok=False)
mt.expect_error(r, "INVALID_CONFIG", "config provider file is not allowed here")
h.check("mirrors.provider_dirs" in r.stderr, "no hint: " + r.stderr)
eq(m.cli_ok("--add", "--mirror", "old2", "--topic", "orders").returncode, 0,
   "add to a migrated mirror")
wait_state(m, "old2", "MIRRORING")
m.stop()
m.start()
wait_state(m, "old2", "MIRRORING")
h.check("held secrets in clear" not in m.proc.output(),
        "the second start migrated again")
m.stop()

# ---- destination.client from a systemd credential ---------------------------
write(os.path.join(creds, "dest-password"), DEST_SECRET + "\n")
dyaml = ("destination:\n"
         "  client:\n"
         "    sasl.username: mirrord\n"
         "    sasl.password: ${credential:dest-password}\n")
c = mt.Mirrord(destination=DST, name="credential", start=False)
with open(c.config_path) as f:
    text = f.read()
# Put the client map under the existing destination section.
text = text.replace("destination:\n", dyaml, 1)
with open(c.config_path, "w") as f:
    f.write(text)
os.environ.pop("CREDENTIALS_DIRECTORY", None)
out = start_fails(c, "$CREDENTIALS_DIRECTORY is not set")
h.check("destination.client.sasl.password: ${credential:dest-password}: "
        "$CREDENTIALS_DIRECTORY is not set" in out,
        "the missing credential is not named:\n" + out[-2000:])
os.environ["CREDENTIALS_DIRECTORY"] = creds
# The key as a credential too: nothing secret is kept beside the log.  (The
# failed start above got as far as creating one there: the log was empty.)
os.unlink(os.path.join(c.data_dir, "secret.key"))
write(os.path.join(creds, "mirrord.secret_key"),
      base64.b64encode(os.urandom(32)).decode() + "\n")
c.start()
h.check("from %s/mirrord.secret_key" % creds in c.proc.output(),
        "the key credential is not used:\n" + c.proc.tail())
h.check(not os.path.exists(os.path.join(c.data_dir, "secret.key")),
        "a key file was created beside the log although a credential holds one")
h.check(DEST_SECRET not in open(c.config_path).read(),
        "mirrord.yaml holds the destination secret")
c.create("cm", {"bootstrap.servers": SRC})
eq(c.cli_ok("--add", "--mirror", "cm", "--topic", "orders").returncode, 0,
   "add orders through the credential-configured destination")
wait_state(c, "cm", "MIRRORING")
c.create("cs", {"bootstrap.servers": SRC, "sasl.password": SECRET})
eq(mt.files_holding(c.data_dir, SECRET), [],
   "files holding a password sealed under the credential key")
h.check(mt.files_holding(c.data_dir, "enc:v1:"), "nothing sealed under the credential key")
h.check(DEST_SECRET not in c.log(), "the destination secret reached the log")
eq(mt.files_holding(c.data_dir, DEST_SECRET), [], "files holding the destination secret")
c.stop()
# ---- server.ssl.key_password from a systemd credential ---------------------
KEY_PW = "S3cretValue-%d-keypw" % RUN
pki = os.path.join(T, "pki")
os.makedirs(pki, exist_ok=True)
r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-keyout", "admin-key.pem", "-out", "admin.pem",
                    "-subj", "/CN=localhost", "-days", "2",
                    "-addext", "subjectAltName=IP:127.0.0.1",
                    "-passout", "pass:" + KEY_PW],
                   cwd=pki, capture_output=True, text=True, timeout=60)
eq(r.returncode, 0, "openssl req: " + r.stderr)
with open(os.path.join(pki, "admin-key.pem")) as f:
    h.check("ENCRYPTED" in f.read(), "the admin key is not encrypted")
write(os.path.join(creds, "admin-key-password"), KEY_PW + "\n")
s = mt.Mirrord(destination=DST, name="tlskey", start=False)
with open(s.config_path) as f:
    text = f.read()
text = text.replace("server:\n", "server:\n"
                    "  security_protocol: SSL\n"
                    "  ssl:\n"
                    "    certificate_location: \"%s/admin.pem\"\n"
                    "    key_location: \"%s/admin-key.pem\"\n"
                    "    key_password: ${credential:admin-key-password}\n"
                    % (pki, pki), 1)
with open(s.config_path, "w") as f:
    f.write(text)
h.check(KEY_PW not in text, "mirrord.yaml holds the key password")
s.start_listening()  # its admin key is encrypted
r = h.kcat(["-L", "-b", s.bootstrap, "-m", "10", "-X", "security.protocol=SSL",
            "-X", "ssl.ca.location=%s/admin.pem" % pki])
h.check(r.returncode == 0 and "broker 42" in r.stdout,
        "kcat -L over TLS with the decrypted key: %s %s" % (r.stdout, r.stderr))
s.stop()
os.unlink(os.path.join(creds, "admin-key-password"))
out = start_fails(s, "the key password's credential is missing")
h.check("server.ssl.key_password: ${credential:admin-key-password}:" in out,
        "the missing key password credential is not named:\n" + out[-2000:])
h.check(KEY_PW not in s.log(), "the key password reached the log")
print("PASS: secrets at rest, config providers, systemd credentials")
