#!/usr/bin/env python3
"""Black-box test of files named over the wire (ssl.*.location in
CreateMirror), against the real mirrord and kafka-mirrors with librdkafka
mock clusters.

What a user would check:

  * CreateMirror naming /proc/self/fd/4 (mirrord's own pipe), /dev/zero, a
    fifo, /etc/shadow, a symbolic link out of the allowed directory, a
    relative path or a .. escape is refused with INVALID_CONFIG naming the
    key, the path and why; the daemon keeps answering, and SIGTERM stops it
    with status 0;
  * a file inside mirrors.allowed_file_dirs is accepted, and the mirror
    copies records (its files read off the event loop first);
  * a stored mirror whose file later became a fifo, a link into /proc, or
    falls outside a narrowed mirrors.allowed_file_dirs: mirrord starts,
    answers, /readyz turns ready, the mirror's partitions are FAILED with
    the key, the path and the reason, and SIGTERM works; once the file is
    good again the partitions recover on their own;
  * AddTopicsToMirror for a mirror whose file went bad names it too.
"""

import os
import shutil
import signal
import sys

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


def expect_refused(r, *fragments):
    """The CLI failed with INVALID_CONFIG and every fragment on stderr."""
    if r.returncode != 1 or "INVALID_CONFIG" not in r.stderr:
        h.fail("expected exit 1 with INVALID_CONFIG, got exit %d\nstdout: %s"
               "\nstderr: %s" % (r.returncode, r.stdout, r.stderr))
    for f in fragments:
        if f not in r.stderr:
            h.fail("expected %r in the error message, got: %s" % (f, r.stderr))


def produce(bootstrap, topic, n, tag):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.timeout.ms": 30000, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"%s-%d" % (tag.encode(), i), partition=0)
    left = p.flush(30)
    eq(left, 0, "records still unsent to %s" % topic)


def end_offset(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "files-test"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def answers(d):
    r = d.cli("--list", timeout=20)
    eq(r.returncode, 0, "kafka-mirrors --list (stderr: %s)" % r.stderr)
    return r.stdout


def started_with_unusable_source(d):
    """/readyz: start-up completed (every check passes) but 'sources
    readable', which names the mirror whose source cannot be used."""
    code, body = mt.http_get(d.metrics_port, "/readyz")
    if code == 200:
        return False    # a mirror whose files are bad is not readable
    failing = [l for l in body.splitlines()[1:] if l]
    return len(failing) == 1 and failing[0].startswith(
        "sources readable: mirror ") and "cannot be used" in failing[0]


def write_config(d, allowed_yaml):
    """Rewrites the mirrors: section of d's config."""
    with open(d.config_path) as f:
        text = f.read()
    text = text.split("mirrors:\n")[0]
    with open(d.config_path, "w") as f:
        f.write(text + "mirrors:\n  allowed_file_dirs: %s\n" % allowed_yaml)


def stop_ok(d, what):
    rc = d.stop(timeout=30)
    if rc != 0:
        h.fail("%s: SIGTERM should stop mirrord with status 0, got %r:\n%s"
               % (what, rc, d.proc.tail()))


def part_rows(d, mirror):
    return [p for p in d.describe_json(mirror)]


def wait_failed_with(d, mirror, *fragments):
    def failed():
        rows = part_rows(d, mirror)
        ok = rows and all(r["state"] == "FAILED" and
                          all(f in (r["errorMessage"] or "") for f in fragments)
                          for r in rows)
        return rows if ok else None
    try:
        return h.wait_for(failed, 60, "mirror %s's partitions FAILED naming %r"
                          % (mirror, fragments))
    except AssertionError as e:
        h.fail("%s\ndescribe: %r\nlog:\n%s" % (e, part_rows(d, mirror),
                                                d.proc.tail()))


def wait_mirroring(d, mirror):
    try:
        h.wait_for(lambda: (lambda rows: rows and all(
            r["state"] == "MIRRORING" for r in rows))(part_rows(d, mirror)),
            60, "mirror %s MIRRORING" % mirror)
    except AssertionError as e:
        h.fail("%s\ndescribe: %r\nlog:\n%s" % (e, part_rows(d, mirror),
                                                d.proc.tail()))


mc, SRC, DST = mt.mock_pair({"files": 1, "later": 1})

ALLOWED = os.path.join(h.test_dir(), "allowed")
OUTSIDE = os.path.join(h.test_dir(), "outside")
os.makedirs(ALLOWED)
os.makedirs(OUTSIDE)
SUBDIR = os.path.join(ALLOWED, "certs.d")
os.makedirs(SUBDIR)
CA = os.path.join(ALLOWED, "ca.pem")
CA2 = os.path.join(ALLOWED, "ca2.pem")
for p in (CA, CA2, os.path.join(OUTSIDE, "secret.pem")):
    with open(p, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot used: plaintext\n"
                "-----END CERTIFICATE-----\n")
FIFO = os.path.join(ALLOWED, "fifo.pem")
os.mkfifo(FIFO)
LINK_OUT = os.path.join(ALLOWED, "link.pem")
os.symlink(os.path.join(OUTSIDE, "secret.pem"), LINK_OUT)

d = mt.Mirrord(destination=DST, extra_yaml=(
    "mirrors:\n  allowed_file_dirs: [%s/]\n" % ALLOWED))

# ---- CreateMirror refuses every file it must not read ----------------------
SSL = {"bootstrap.servers": SRC, "security.protocol": "SSL"}
cases = [
    ("ssl.ca.location", "/proc/self/fd/4", "not a regular file"),
    ("ssl.ca.location", "/proc/self/environ", "not a regular file"),
    ("ssl.ca.location", "/dev/zero", "not a regular file"),
    ("ssl.ca.location", FIFO, "not a regular file (a fifo)"),
    ("ssl.ca.location", "/etc/shadow", "outside the allowed directories"),
    ("ssl.ca.location", LINK_OUT, "outside the allowed directories"),
    ("ssl.ca.location", ALLOWED + "/../outside/secret.pem",
     "outside the allowed directories"),
    ("ssl.ca.location", "ca.pem", "not an absolute path"),
    ("ssl.ca.location", SUBDIR, "not a regular file (a directory)"),
    ("ssl.ca.location", ALLOWED + "/missing.pem", "No such file or directory"),
]
for key, path, why in cases:
    r = d.create("bad", dict(SSL, **{key: path}), expect_ok=False)
    expect_refused(r, key, path, why)
    answers(d)
# The certificate and key are files too.
r = d.create("bad", dict(SSL, **{"ssl.certificate.location": CA,
                                 "ssl.key.location": "/etc/shadow"}),
             expect_ok=False)
expect_refused(r, "ssl.key.location", "/etc/shadow",
               "outside the allowed directories (%s/)" % ALLOWED)
r = d.create("bad", dict(SSL, **{"ssl.certificate.location": "/dev/null",
                                 "ssl.key.location": CA}), expect_ok=False)
expect_refused(r, "ssl.certificate.location", "/dev/null", "not a regular file")
h.check("bad" not in answers(d), "a refused mirror was stored")
print("CreateMirror: %d bad files refused with INVALID_CONFIG" % (len(cases) + 2),
      flush=True)

# A file in the allowed directory is fine (plaintext: named, read, unused).
d.create("good", {"bootstrap.servers": SRC, "ssl.ca.location": CA,
                  "mirror.fetch.wait.max.ms": "100",
                  "mirror.failed.retry.initial.backoff.ms": "200",
                  "mirror.failed.retry.max.backoff.ms": "1000"})
d.create("late", {"bootstrap.servers": SRC, "ssl.ca.location": CA2})
d.cli_ok("--add", "--mirror", "good", "--topic", "files")
produce(SRC, "files", 50, "a")
wait_mirroring(d, "good")
h.wait_for(lambda: end_offset(DST, "files") == 50, 60,
           "the 50 records to reach the destination")
print("a mirror naming a file in the allowed directory copies records", flush=True)

# AddTopicsToMirror reads the mirror's files again (off the loop) and names
# a bad one.
os.unlink(CA2)
os.mkfifo(CA2)
r = d.cli("--add", "--mirror", "late", "--topic", "later")
h.check(r.returncode != 0 and "ssl.ca.location" in r.stderr and CA2 in r.stderr
        and "fifo" in r.stderr,
        "AddTopicsToMirror with a mirror whose CA became a fifo should name "
        "it: exit %d\nstdout: %s\nstderr: %s" % (r.returncode, r.stdout, r.stderr))
answers(d)
stop_ok(d, "after the refusals")

# ---- stored mirrors whose files went bad -----------------------------------
# 1. The CA file became a fifo.
os.unlink(CA)
os.mkfifo(CA)
d.start()
h.wait_for(lambda: started_with_unusable_source(d), 60,
           "/readyz with a mirror whose CA is a fifo")
wait_failed_with(d, "good", "ssl.ca.location", CA, "not a regular file (a fifo)")
answers(d)
stop_ok(d, "with a fifo as CA file")
print("a stored mirror whose CA became a fifo: start-up completes, FAILED "
      "naming it", flush=True)

# 2. A link to mirrord's own descriptors.
os.unlink(CA)
os.symlink("/proc/self/fd/4", CA)
d.start()
h.wait_for(lambda: started_with_unusable_source(d), 60,
           "/readyz with a mirror whose CA links to /proc/self/fd/4")
wait_failed_with(d, "good", "ssl.ca.location", CA, "resolves to /proc/self/fd/4",
                 "not a regular file")
answers(d)
d.proc.signal(signal.SIGTERM)
eq(d.proc.wait(30), 0, "mirrord's status on SIGTERM with a CA linking into /proc")
print("a stored mirror whose CA links into /proc: start-up completes, FAILED "
      "naming it", flush=True)

# 3. A good file, but the operator narrowed the allowed directories (the
# mirror was stored under a permissive configuration).
os.unlink(CA)
shutil.copy(os.path.join(OUTSIDE, "secret.pem"), CA)
write_config(d, "[]")
d.start()
h.wait_for(lambda: started_with_unusable_source(d), 60,
           "/readyz with no allowed file directory")
wait_failed_with(d, "good", "ssl.ca.location", CA,
                 "mirrors.allowed_file_dirs is empty")
r = d.create("again", {"bootstrap.servers": SRC, "ssl.ca.location": CA},
             expect_ok=False)
expect_refused(r, "ssl.ca.location", CA, "mirrors.allowed_file_dirs is empty")

# 4. SIGHUP with the directory allowed again: the mirror recovers by itself
# (its files are read again with backoff, FAILED partitions retried).
write_config(d, "\n    - %s\n" % ALLOWED)
d.proc.signal(signal.SIGHUP)
h.wait_for(lambda: "reload" in d.proc.output().lower(), 30, "the reload")
produce(SRC, "files", 30, "b")
wait_mirroring(d, "good")
h.wait_for(lambda: end_offset(DST, "files") == 80, 90,
           "the 30 new records to reach the destination after the fix")
stop_ok(d, "after the recovery")
print("a fixed file: the mirror recovers without a restart", flush=True)

h.check("Traceback" not in d.log() and "AddressSanitizer" not in d.log(),
        "mirrord's log shows a crash:\n" + d.log()[-3000:])
print("PASS: files named over the wire", flush=True)
