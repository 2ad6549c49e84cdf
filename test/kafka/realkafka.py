#!/usr/bin/env python3
"""Real Apache Kafka brokers for mirrord's integration tests.

Python 3 standard library only, so it runs under any python3 and needs no
Kafka client library: it speaks the few requests it needs (ApiVersions,
CreateTopics, Metadata, CreateAcls) itself, over a PLAINTEXT listener that
every cluster keeps for the test tier's own use.

What it does
------------
* fetch: `ensure_libs()` runs Maven once on test/kafka/pom.xml to fill
  $MIRRORD_KAFKA_CACHE/libs (default test/kafka/cache/libs, git-ignored) with
  the pinned broker, Kafka's tools and their runtime jars.  A stamp holding
  the pom's hash makes it run once; an flock makes concurrent tests wait for
  one fetch instead of racing; a failed fetch is remembered for a while so a
  whole `make check` skips quickly instead of every test retrying it.  When
  Java, Maven or the download is missing, `Unavailable` carries the reason
  and tests SKIP with it.
* Kafka releases: KAFKA_VERSION (4.4.0) is the default everywhere;
  `ensure_libs(version)`, `Cluster(version=)`, `Launcher(version=)` (one
  release, or a list with one per cluster) and `h.private_kafka(...,
  version=["3.6.2", "4.4.0"])` run another, 3.6.0 or newer (KRaft without
  ZooKeeper).  Each release has its own jars, libs-<version> and
  stamp-<version> beside the pinned release's libs and stamp, fetched
  with the same pom and -Dkafka.version (3.x without its SLF4J binding to
  reload4j, so every release logs through the same log4j2 settings),
  under the same lock; a release that cannot be fetched is remembered in
  fetch-failed-<version> and SKIPs with Maven's reason.  What differs in
  3.x is handled here: no share-group settings, `kafka-configs` is
  kafka.admin.ConfigCommand (org.apache.kafka.tools in 4.x), and feature
  levels at format time (`features=`) need 3.9 or newer.  The rest is
  the same in 3.6 to 4.4: a static voter (controller.quorum.voters, node
  1 on its CONTROLLER listener), storage formatted by
  kafka.tools.StorageTool with the SCRAM users, the broker as kafka.Kafka.
  Measured on 2 cores with each release's CDS archive: a single-node
  cluster formats in 1-2 s and answers 1.5-2.5 s (3.6.2) or ~3 s (3.9.1,
  4.4.0) after `java` starts on an idle machine, 4-7 s at a load average
  of 12; one of each started together took 4-9 s.
  The shared clusters (`shared()`, `real_kafka()`) always run
  KAFKA_VERSION.
* `Cluster`: one KRaft cluster (a combined broker and controller, node.id
  1; with brokers=N also broker-only nodes 2..N that stop_broker() and
  start_broker() take down and up, node 1 staying up) in its own directory, on free 127.0.0.1 ports, started with a
  small heap in its own process group with PR_SET_PDEATHSIG, so the broker
  dies with the Python process that started it even on SIGKILL.
  A whole cluster goes down with stop() (kill=True: SIGKILL, a crash) and
  comes back on its data and ports with start_again(props), which can
  change its settings on the way (another advertised name, another
  keystore); freeze()/thaw() SIGSTOP/SIGCONT its broker (requests
  accepted, never answered); set_scram_password() rotates a SCRAM user's
  password with Kafka's kafka-configs.
  Security variants (`security=`, comma-separated features):
    ""/"plaintext"  PLAINTEXT client listener
    "sasl"          SASL_PLAINTEXT, SCRAM-SHA-512 users (added at format
                    time) and PLAIN users (JAAS in server.properties)
    "ssl"           SSL with a test CA, broker and client certificates made by
                    the openssl CLI at start (PEM files)
    "mtls"          "ssl" plus ssl.client.auth=required
    "acl"           StandardAuthorizer, super user User:admin; implies "sasl"
                    unless "mtls" names the principal (CN of the certificate)
  `bootstrap` is the client listener the test is about; `admin_bootstrap` is
  the PLAINTEXT listener the tier uses for setup (its principal ANONYMOUS is
  a super user so setup works under "acl"; tests of mirrord must use
  `bootstrap`).
* `Launcher`: N independent clusters started in parallel, stopped together.
* `shared(n, security)`: the pair of clusters shared by the tests of one
  `make check`.  Automake runs every test as its own process, so sharing goes
  through a well-known directory (default $top_builddir/test/kafka/shared-
  <security>): under an flock the first test starts a detached supervisor
  (`realkafka.py serve`) that owns the brokers and writes state.json; every
  test registers a lease file naming its pid and start time and removes it
  at exit.  The supervisor prunes leases whose process is gone and, once no
  lease has been live for --idle-timeout seconds (MIRRORD_KAFKA_IDLE,
  default 60), removes state.json and stops the brokers while holding the
  lock, so a test arriving then waits and starts a fresh pair.  It also stops
  after --max-life seconds whatever happens.  Tests sharing clusters keep
  apart by using distinct topic names and must create the topics they use:
  a pair restarted after an idle gap starts empty.
* Times (2 cores, JVM options in JVM_OPTS): a single-node cluster answers
  about 3.5 s after `java` starts on an idle machine (plus ~1.4 s to format
  its storage); two start in parallel in ~8 s, and in 10-40 s while other
  builds load the machine.  The first broker to stop writes an AppCDS
  archive into the cache (see cds_options), which cuts later starts' CPU
  by ~45%.
* Known limit: librdkafka before 2.6.1 (Debian's 2.0.2 included) cannot log
  in with SCRAM to Kafka 4 brokers (it repeats the client nonce in its final
  message, which Kafka 4 refuses); PLAIN works, and Kafka's Java clients
  (`Cluster.java_tool`) do SCRAM.
* CLI for shell users and the demo:
    realkafka.py start --clusters 2 --dir DIR [--security sasl] [--detach]
                       [--kafka-version 3.9.1]
        prints one JSON object (bootstrap addresses, users, CA file) once all
        clusters answer, then runs until `stop` (or SIGTERM/SIGINT)
    realkafka.py stop --dir DIR     stop it, bounded, nothing left behind
    realkafka.py status --dir DIR   print the JSON again
    realkafka.py fetch [--kafka-version V]   fetch the jars (or print why not)
"""

import argparse
import base64
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

KAFKA_VERSION = "4.4.0"  # the pinned release; the default everywhere
OLDEST_VERSION = (3, 6)   # KRaft without ZooKeeper is production-ready from 3.6
HERE = os.path.dirname(os.path.abspath(__file__))
POM = os.path.join(HERE, "pom.xml")

# Start options: the fastest of those measured on 2 cores (see the report in
# the commit log); a 256 MiB heap is plenty for test traffic.
JVM_OPTS = ["-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "-Xss512k",
            "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8"]

USERS = {"admin": "admin-secret", "alice": "alice-secret",
         "bob": "bob-secret"}
SUPER_USER = "admin"

FETCH_TIMEOUT = float(os.environ.get("MIRRORD_KAFKA_FETCH_TIMEOUT", "900"))
START_TIMEOUT = float(os.environ.get("MIRRORD_KAFKA_START_TIMEOUT", "120"))
STOP_TIMEOUT = 20.0
FAILED_FETCH_MEMORY = 600.0  # seconds a failed fetch is not retried


class Unavailable(Exception):
    """The tier cannot run here; str() says what is missing."""


class KafkaError(Exception):
    """A broker misbehaved or answered with an error."""


def log(msg):
    sys.stderr.write("realkafka: %s\n" % msg)
    sys.stderr.flush()


# ---------------------------------------------------------------- fetching

def cache_dir():
    return os.environ.get("MIRRORD_KAFKA_CACHE") or os.path.join(HERE, "cache")


_java_found = {}


def find_java():
    """The java binary (JAVA_HOME first, then PATH), version 17 or newer;
    checked once per process."""
    if "path" in _java_found:
        return _java_found["path"]
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else None
    if not (java and os.access(java, os.X_OK)):
        java = shutil.which("java")
    if not java:
        raise Unavailable("java not found (install openjdk-17-jdk-headless)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True,
                             text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable("java does not run: %s" % e)
    major = 0
    for word in out.split():
        word = word.strip('"')
        if word[:1].isdigit():
            major = int(word.split(".")[0].split("-")[0].split("+")[0])
            break
    if major < 17:
        raise Unavailable("java 17 or newer needed, found: %s"
                          % (out.splitlines()[0] if out else "?"))
    _java_found["path"] = java
    _java_found["version"] = out
    return java


# Application class-data sharing: the first broker started with a given
# java and set of jars dumps the classes it loaded into an archive when it
# stops (-XX:ArchiveClassesAtExit); later JVMs map it (-XX:SharedArchiveFile),
# which measured ~45% less CPU to reach "ready" (5.5 s -> 3.1 s per broker on
# 2 busy cores).  A claim file names the Python process whose broker dumps.

def _cds_paths(libs):
    st = os.stat(libs)
    key = hashlib.sha256(("%s\n%s\n%s %d" % (
        find_java(), _java_found.get("version", ""), libs,
        st.st_mtime_ns)).encode()).hexdigest()[:16]
    d = os.path.join(cache_dir(), "cds")
    return os.path.join(d, "kafka-%s.jsa" % key)


def cds_options(libs):
    """(JVM options, archive-to-publish-or-None) for one JVM."""
    if os.environ.get("MIRRORD_KAFKA_CDS", "1") == "0":
        return [], None
    try:
        final = _cds_paths(libs)
    except OSError:
        return [], None
    if os.path.exists(final):
        return ["-XX:SharedArchiveFile=" + final, "-Xshare:auto"], None
    claim = final + ".claim"
    try:
        os.makedirs(os.path.dirname(final), exist_ok=True)
        try:
            with open(claim) as f:
                owner = int(f.read().strip() or 0)
            if owner and not _alive(owner):
                os.unlink(claim)
        except (OSError, ValueError):
            pass
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return [], None  # someone else is making it
    os.write(fd, b"%d\n" % os.getpid())
    os.close(fd)
    tmp = "%s.%d.tmp" % (final, os.getpid())
    return ["-XX:ArchiveClassesAtExit=" + tmp], tmp


def cds_use(libs):
    """Options to map the archive if it exists (never to make it)."""
    if os.environ.get("MIRRORD_KAFKA_CDS", "1") == "0":
        return []
    try:
        final = _cds_paths(libs)
    except OSError:
        return []
    return ["-XX:SharedArchiveFile=" + final, "-Xshare:auto"] \
        if os.path.exists(final) else []


def cds_publish(tmp):
    """After the dumping JVM exited: install its archive, drop the claim."""
    final = tmp.rsplit(".", 2)[0]
    try:
        if os.path.getsize(tmp) > 0:
            os.rename(tmp, final)
    except OSError:
        pass
    for p in (tmp, final + ".claim"):
        with contextlib.suppress(OSError):
            os.unlink(p)


@contextlib.contextmanager
def flocked(path, timeout, what):
    """Hold an exclusive flock on path, waiting at most timeout seconds."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() > deadline:
                raise KafkaError("timed out after %.0fs waiting for the lock "
                                 "on %s (%s)" % (timeout, path, what))
            time.sleep(0.1)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _pom_hash():
    with open(POM, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def version_tuple(version):
    """(major, minor, patch) of a release name such as "3.6.2"; ValueError
    naming what is wrong for anything the tier cannot run."""
    parts = str(version).split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError("Kafka version %r: want a release such as %s "
                         "(major.minor.patch)" % (version, KAFKA_VERSION))
    t = tuple(int(p) for p in parts)
    if t[:2] < OLDEST_VERSION:
        raise ValueError("Kafka version %s: the tier runs KRaft clusters, "
                         "%d.%d or newer" % ((version,) + OLDEST_VERSION))
    return t


def _version_files(version):
    """(libs, stamp, fetch-failed) paths of one release in the cache: the
    pinned release keeps the plain names, another gets a -<version>
    suffix."""
    cache = cache_dir()
    suffix = "" if version == KAFKA_VERSION else "-" + version
    return tuple(os.path.join(cache, n + suffix)
                 for n in ("libs", "stamp", "fetch-failed"))


def _mvn_reason(out):
    """What Maven's output says went wrong: its first line naming a
    failure (the artifact it could not resolve, ...), else its last
    lines; colour codes dropped."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l).strip()
             for l in out.strip().splitlines()]
    lines = [l for l in lines if l and l != "[ERROR]"]
    for l in lines:
        if "Failed to execute" in l or "Could not" in l:
            return l[:600]
    return " | ".join(lines[-3:])[-400:]


def ensure_libs(version=None):
    """Return the directory of the jars of Kafka `version` (default
    KAFKA_VERSION), fetching them once.

    Raises Unavailable with the reason when Java, Maven or the download is
    missing, ValueError for a version the tier cannot run."""
    version = version or KAFKA_VERSION
    major = version_tuple(version)[0]
    find_java()
    cache = cache_dir()
    libs, stamp, failed = _version_files(version)
    want = "%s %s\n" % (version, _pom_hash())

    def ready():
        try:
            with open(stamp) as f:
                return f.read() == want and os.path.isdir(libs)
        except OSError:
            return False

    if ready():
        return libs
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError as e:
        raise Unavailable("cannot create the cache %s: %s" % (cache, e))
    with flocked(os.path.join(cache, "lock"), FETCH_TIMEOUT + 60,
                 "another test is fetching Kafka"):
        if ready():
            return libs
        try:
            with open(failed) as f:
                why = f.read().strip()
            if time.time() - os.stat(failed).st_mtime < FAILED_FETCH_MEMORY:
                raise Unavailable(why)
        except OSError:
            pass
        mvn = shutil.which("mvn")
        if not mvn:
            raise Unavailable("mvn not found (install maven)")
        tmp = libs + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        # The pom names the pinned release; another is the same pom with
        # kafka.version set on the command line.  Kafka 3.x's pom also
        # brings an SLF4J binding to reload4j, which SLF4J picks when it
        # comes first on the classpath (it did here), leaving the broker's
        # log empty: left out, so every release logs through the log4j2
        # binding and LOG4J2 (reload4j itself stays: 3.x's
        # Log4jController uses it).
        cmd = [mvn, "-q", "-B", "-f", POM, "dependency:copy-dependencies",
               "-DincludeScope=runtime", "-DoutputDirectory=" + tmp,
               "-Dkafka.version=" + version]
        if major < 4:
            cmd.append("-DexcludeArtifactIds=slf4j-reload4j")
        log("fetching Apache Kafka %s with Maven into %s" % (version, libs))
        why = None
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            try:
                out, _ = p.communicate(timeout=FETCH_TIMEOUT)
                if p.returncode != 0:
                    why = "mvn failed to fetch Apache Kafka %s (exit %d): %s" \
                        % (version, p.returncode, _mvn_reason(out))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                why = "fetching Apache Kafka %s with mvn took longer than " \
                      "%.0fs" % (version, FETCH_TIMEOUT)
        except OSError as e:
            why = "cannot run mvn: %s" % e
        if why is None and not os.path.exists(
                os.path.join(tmp, "kafka_2.13-%s.jar" % version)):
            why = "mvn ran but fetched no kafka_2.13-%s jar" % version
        if why:
            shutil.rmtree(tmp, ignore_errors=True)
            with open(failed, "w") as f:
                f.write(why + "\n")
            raise Unavailable(why)
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(tmp, libs)
        with open(stamp + ".tmp", "w") as f:
            f.write(want)
        os.rename(stamp + ".tmp", stamp)
        with contextlib.suppress(OSError):
            os.unlink(failed)
        return libs


# ------------------------------------------------------- a little protocol

def _str(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


class _Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.o)
        self.o += struct.calcsize(fmt)
        return v[0]

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.d[self.o:self.o + n].decode()
        self.o += n
        return s

    def array(self, item):
        return [item() for _ in range(self.i32())]


ERRORS = {0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
          5: "LEADER_NOT_AVAILABLE", 7: "REQUEST_TIMED_OUT",
          29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
          35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS",
          37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR",
          40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST",
          51: "CONCURRENT_TRANSACTIONS"}


def error_name(code):
    return ERRORS.get(code, "error %d" % code)


class Wire:
    """One blocking PLAINTEXT connection; non-flexible request versions."""

    def __init__(self, host, port, timeout=10.0):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.corr = 0

    def close(self):
        self.s.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise KafkaError("connection closed by the broker")
            buf += chunk
        return buf

    def request(self, key, version, body):
        self.corr += 1
        hdr = struct.pack(">hhi", key, version, self.corr) + _str("realkafka")
        msg = hdr + body
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._recv(4))[0]
        data = self._recv(size)
        if struct.unpack_from(">i", data)[0] != self.corr:
            raise KafkaError("correlation id mismatch")
        return _Reader(data[4:])


def api_versions(host, port, timeout=5.0):
    """ApiVersions v0: {api_key: (min, max)}."""
    w = Wire(host, port, timeout)
    try:
        r = w.request(18, 0, b"")
        err = r.i16()
        if err:
            raise KafkaError("ApiVersions: %s" % error_name(err))
        return dict((k, (lo, hi)) for k, lo, hi in
                    r.array(lambda: (r.i16(), r.i16(), r.i16())))
    finally:
        w.close()


def _split(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


# ------------------------------------------------------------- a cluster

_given_ports = set()
_given_lock = threading.Lock()

# Ports for the tests' listeners (brokers, mirrord, fakes), shared by every
# test process of the machine, which `make check` runs several at once: a
# port is taken from PORT_LO..PORT_HI, below the kernel's ephemeral range
# (32768-60999), so no outgoing connection is given it meanwhile, and
# reserved by a file PORTS_DIR/<port> created exclusively, naming the pid
# that took it.  It stays reserved while that process lives; once it is
# gone the port is free again if nothing listens on it (a shared broker
# outlives the test that started it and keeps its ports by listening).
PORTS_DIR = os.environ.get("MIRRORD_PORTS_DIR") or os.path.join(
    tempfile.gettempdir(), "mirrord-test-ports-%d" % os.getuid())
PORT_LO, PORT_HI = 20000, 32767
_port_rnd = random.Random()


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port():
    """A port of PORT_LO..PORT_HI that nothing listens on, reserved for this
    process (see PORTS_DIR) and never given out twice in it."""
    with _given_lock:
        os.makedirs(PORTS_DIR, exist_ok=True)
        _port_rnd.seed(os.getpid() * 1000003 + time.monotonic_ns())
        for _ in range(20000):
            port = _port_rnd.randint(PORT_LO, PORT_HI)
            if port in _given_ports:
                continue
            path = os.path.join(PORTS_DIR, str(port))
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    with open(path) as f:
                        holder = int(f.read().strip() or "0")
                except (OSError, ValueError):
                    holder = 0
                if holder > 0 and (holder == os.getpid() or _pid_alive(holder)):
                    continue
                try:
                    os.unlink(path)   # its process is gone
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as f:
                f.write("%d\n" % os.getpid())
            if not _bindable(port):
                continue              # someone else's listener: keep it off
            _given_ports.add(port)
            return port
        raise KafkaError("no free port in %d..%d (%s)" % (PORT_LO, PORT_HI,
                                                         PORTS_DIR))


def free_ports(n):
    """n distinct free ports (free_port())."""
    return [free_port() for _ in range(n)]


def _pdeathsig():
    """In the child before exec: die with the parent, own process group."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 -- best effort; the group kill remains
        pass


def _features(security):
    if isinstance(security, str):
        security = [w for w in security.replace(" ", "").split(",") if w]
    feats = set(security) - {"plaintext"}
    unknown = feats - {"sasl", "ssl", "mtls", "acl"}
    if unknown:
        raise ValueError("unknown security feature(s): %s" % ", ".join(sorted(unknown)))
    if "mtls" in feats:
        feats.add("ssl")
    if "acl" in feats and "mtls" not in feats:
        feats.add("sasl")
    return feats


def _protocol(feats):
    if "sasl" in feats and "ssl" in feats:
        return "SASL_SSL"
    if "sasl" in feats:
        return "SASL_PLAINTEXT"
    if "ssl" in feats:
        return "SSL"
    return "PLAINTEXT"


def _openssl(args, cwd):
    p = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        raise KafkaError("openssl %s failed: %s" % (args[0], p.stderr.strip()))


def make_test_ca(d, client_cn="alice"):
    """Make ca.pem, broker.pem (key + chain) and client-{cert,key}.pem in d
    with the openssl CLI; returns the dict of paths."""
    os.makedirs(d, exist_ok=True)
    days = ["-days", "2"]
    _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
              "ca-key.pem", "-out", "ca.pem", "-subj", "/CN=mirrord test CA"]
             + days, d)
    paths = {"ca": os.path.join(d, "ca.pem")}
    for name, cn, ext in (
            ("broker", "localhost",
             "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
             "extendedKeyUsage=serverAuth,clientAuth\n"),
            ("client", client_cn, "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        _openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout",
                  name + "-key.pem", "-out", name + ".csr", "-subj",
                  "/CN=" + cn], d)
        _openssl(["x509", "-req", "-in", name + ".csr", "-CA", "ca.pem",
                  "-CAkey", "ca-key.pem", "-CAcreateserial", "-out",
                  name + "-cert.pem", "-extfile", name + ".ext"] + days, d)
        paths[name + "_cert"] = os.path.join(d, name + "-cert.pem")
        paths[name + "_key"] = os.path.join(d, name + "-key.pem")
    # Kafka's PEM keystore: the PKCS#8 key followed by the certificate chain.
    with open(os.path.join(d, "broker.pem"), "w") as out:
        for part in ("broker-key.pem", "broker-cert.pem", "ca.pem"):
            with open(os.path.join(d, part)) as f:
                out.write(f.read())
    paths["broker_keystore"] = os.path.join(d, "broker.pem")
    with open(os.path.join(d, "client.pem"), "w") as out:
        for part in ("client-key.pem", "client-cert.pem"):
            with open(os.path.join(d, part)) as f:
                out.write(f.read())
    paths["client_keystore"] = os.path.join(d, "client.pem")
    return paths


LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
"""


class _Node:
    """A broker-only node (node.id >= 2) of a multi-broker Cluster: its own
    directory, ports and process; the controller is node 1."""

    def __init__(self, cluster, node_id):
        self.cl = cluster
        self.id = node_id
        self.dir = os.path.join(cluster.dir, "n%d" % node_id)
        self.port = self.admin_port = None
        self.proc = None
        self.pid = None

    @property
    def log_path(self):
        return os.path.join(self.dir, "broker.log")

    def properties(self):
        p = self.cl._properties()
        for k in ("controller.listener.names",):
            p[k] = "CONTROLLER"
        p["process.roles"] = "broker"
        p["node.id"] = str(self.id)
        p["listeners"] = "CLIENT://127.0.0.1:%d,ADMIN://127.0.0.1:%d" \
            % (self.port, self.admin_port)
        p["advertised.listeners"] = p["listeners"]
        p["log.dirs"] = os.path.join(self.dir, "data")
        return p

    def prepare(self):
        os.makedirs(self.dir)
        self.port, self.admin_port = free_ports(2)
        conf = os.path.join(self.dir, "server.properties")
        with open(conf, "w") as f:
            f.write("# written by test/kafka/realkafka.py (broker node %d)\n"
                    % self.id)
            for k, v in self.properties().items():
                f.write("%s=%s\n" % (k, v.replace("\\", "\\\\")))
        log_path = os.path.join(self.dir, "format.log")
        with open(log_path, "w") as out:
            p = subprocess.run(self.cl._java("kafka.tools.StorageTool",
                                             ["format", "-t", self.cl.cluster_id,
                                              "-c", conf], cds_use(self.cl.libs)),
                               stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL,
                               start_new_session=True, timeout=120)
        if p.returncode != 0:
            raise KafkaError("%s node %d: formatting storage failed (exit %d):"
                             "\n%s" % (self.cl.name, self.id, p.returncode,
                                       _tail(log_path, 8)))

    def launch(self):
        out = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            self.cl._java("kafka.Kafka", [os.path.join(self.dir, "server.properties")],
                          cds_use(self.cl.libs)),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            close_fds=True, start_new_session=True, preexec_fn=_pdeathsig)
        out.close()
        self.pid = self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=STOP_TIMEOUT, kill=False):
        if self.pid is None:
            return
        if kill:
            _signal(self.pid, signal.SIGKILL)
        _kill_group(self.pid, self.proc, timeout)
        self.proc = None
        self.pid = None


class Cluster:
    """One KRaft cluster: a single combined broker and controller (node 1),
    plus broker-only nodes 2..N with brokers=N (start_broker/stop_broker
    take one of those up and down; node 1 always runs).  Construct, then
    start(); or rebuild from to_dict() output in another process to use a
    running one.  version: the Kafka release it runs (KAFKA_VERSION by
    default; 3.6.0 or newer), its jars fetched by ensure_libs(version)."""

    def __init__(self, root, name="k0", security="", libs=None,
                 heap_mb=256, extra_props=None, features=None, brokers=1,
                 version=None):
        self.root = os.path.abspath(root)
        self.name = name
        self.dir = os.path.join(self.root, name)
        self.version = version or KAFKA_VERSION
        self.version_tuple = version_tuple(self.version)
        self.feats = _features(security)
        self.security = ",".join(sorted(self.feats)) or "plaintext"
        self.protocol = _protocol(self.feats)
        self.libs = libs
        self.heap_mb = heap_mb
        self.extra_props = dict(extra_props or {})
        # Feature levels set at format time, e.g. {"transaction.version": 1}.
        self.features = dict(features or {})
        if self.features and self.version_tuple < (3, 9):
            # kafka-storage format --feature came with Kafka 3.9 (KIP-1022).
            raise ValueError("%s: feature levels at format time (%s) need "
                             "Kafka 3.9 or newer, not %s"
                             % (name, ", ".join(sorted(self.features)),
                                self.version))
        self.proc = None
        self.pid = None
        self.cluster_id = None
        self.port = self.admin_port = self.controller_port = None
        self.tls = {}
        # Measured by prepare() and launch() .. wait_ready(), in seconds.
        self.format_seconds = self.ready_seconds = None
        self._launched = None
        # Broker-only nodes 2..brokers (node 1, the combined broker and
        # controller, is the cluster's own fields above and never stops).
        if brokers < 1:
            raise ValueError("a cluster has at least one broker")
        self.nodes = {i: _Node(self, i) for i in range(2, brokers + 1)}

    # -- addresses and client settings

    @property
    def bootstrap(self):
        """The client listener (the security variant under test)."""
        return "127.0.0.1:%d" % self.port

    @property
    def admin_bootstrap(self):
        """PLAINTEXT listener for the tier's own setup requests."""
        return "127.0.0.1:%d" % self.admin_port

    @property
    def log_path(self):
        return os.path.join(self.dir, "broker.log")

    def client_config(self, user="alice", password=None,
                      mechanism="PLAIN", client_cert=True):
        """librdkafka properties (confluent-kafka dict, kcat -X) for a client
        of `bootstrap` as `user`; password defaults to the user's own.
        PLAIN by default: librdkafka before 2.6.1 (Debian's 2.0.2 included)
        sends a SCRAM client-final nonce that Kafka 4 brokers refuse, so its
        SCRAM-SHA-512 always fails here; use java_tool for SCRAM."""
        c = {"bootstrap.servers": self.bootstrap,
             "security.protocol": self.protocol.lower()}
        if "sasl" in self.feats:
            c["sasl.mechanism"] = mechanism
            c["sasl.username"] = user
            c["sasl.password"] = USERS.get(user, "") if password is None \
                else password
        if "ssl" in self.feats:
            c["ssl.ca.location"] = self.tls["ca"]
            if client_cert:
                c["ssl.certificate.location"] = self.tls["client_cert"]
                c["ssl.key.location"] = self.tls["client_key"]
        return c

    def kcat_args(self, **kw):
        args = []
        for k, v in self.client_config(**kw).items():
            args += ["-b", v] if k == "bootstrap.servers" else ["-X", "%s=%s" % (k, v)]
        return args

    def java_client_properties(self, path, user="alice", password=None,
                               mechanism="SCRAM-SHA-512", client_cert=True):
        """Write a Java client .properties file for `bootstrap` (used by
        java_tool; Kafka's own clients, e.g. for SCRAM, which librdkafka
        before 2.6.1 cannot do against Kafka 4 brokers); returns path."""
        lines = ["security.protocol=%s" % self.protocol]
        if "sasl" in self.feats:
            pw = USERS.get(user, "") if password is None else password
            module = ("org.apache.kafka.common.security.scram.ScramLoginModule"
                      if mechanism.startswith("SCRAM") else
                      "org.apache.kafka.common.security.plain.PlainLoginModule")
            lines += ["sasl.mechanism=%s" % mechanism,
                      'sasl.jaas.config=%s required username="%s" '
                      'password="%s";' % (module, user, pw)]
        if "ssl" in self.feats:
            lines += ["ssl.truststore.type=PEM",
                      "ssl.truststore.location=%s" % self.tls["ca"]]
            if client_cert:
                lines += ["ssl.keystore.type=PEM",
                          "ssl.keystore.location=%s" % self.tls["client_keystore"]]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def java_tool(self, main, args, input=None, timeout=120):
        """Run one of Kafka's tool classes (e.g.
        "org.apache.kafka.tools.ConsoleProducer") from the fetched jars with
        a small heap; returns subprocess.CompletedProcess (text)."""
        libs = self.libs or ensure_libs(self.version)
        cmd = [find_java(), "-Xmx128m", "-XX:+UseSerialGC",
               "-XX:TieredStopAtLevel=1"] + cds_use(libs) + [
               "-Dlog4j2.configurationFile=" + os.path.join(self.dir, "log4j2-tools.properties"),
               "-cp", os.path.join(libs, "*"), main] + list(args)
        cfg = os.path.join(self.dir, "log4j2-tools.properties")
        if not os.path.exists(cfg):
            with open(cfg, "w") as f:
                f.write(LOG4J2.replace("rootLogger.level = INFO",
                                       "rootLogger.level = WARN"))
        return subprocess.run(cmd, input=input, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)

    def set_scram_password(self, user, password, mechanism="SCRAM-SHA-512",
                           iterations=4096):
        """Give user a new SCRAM password on the broker (Kafka's
        kafka-configs, AlterUserScramCredentials over the PLAINTEXT admin
        listener): new logins must use it, sessions already open live on
        until they end (connections.max.reauth.ms bounds them).
        USERS keeps the password the cluster was formatted with, so
        set_scram_password(user, USERS[user]) sets that back."""
        # kafka-configs moved from core (Scala) to the tools jar in 4.0.
        main = "org.apache.kafka.tools.ConfigCommand" \
            if self.version_tuple >= (4, 0) else "kafka.admin.ConfigCommand"
        r = self.java_tool(main, [
            "--bootstrap-server", self.admin_bootstrap, "--alter",
            "--entity-type", "users", "--entity-name", user,
            "--add-config", "%s=[iterations=%d,password=%s]"
            % (mechanism, iterations, password)])
        if r.returncode != 0:
            raise KafkaError("%s: kafka-configs could not set %s's %s "
                             "password (exit %d): %s"
                             % (self.name, user, mechanism, r.returncode,
                                (r.stderr or r.stdout).strip()[-600:]))

    def to_dict(self):
        return {"name": self.name, "root": self.root, "dir": self.dir,
                "version": self.version,
                "security": self.security, "protocol": self.protocol,
                "bootstrap": self.bootstrap,
                "admin_bootstrap": self.admin_bootstrap,
                "controller": "127.0.0.1:%d" % self.controller_port,
                "cluster_id": self.cluster_id, "pid": self.pid,
                "log": self.log_path, "tls": self.tls,
                "users": USERS if "sasl" in self.feats else {},
                "brokers": {n.id: "127.0.0.1:%d" % n.port
                            for n in self.nodes.values()},
                "super_user": SUPER_USER if "acl" in self.feats else None}

    @classmethod
    def from_dict(cls, d):
        c = cls(d["root"], d["name"], d["security"],
                version=d.get("version"))
        c.port = _split(d["bootstrap"])[1]
        c.admin_port = _split(d["admin_bootstrap"])[1]
        c.controller_port = _split(d["controller"])[1]
        c.cluster_id, c.pid, c.tls = d["cluster_id"], d["pid"], d["tls"]
        return c

    # -- configuration

    def _properties(self):
        data = os.path.join(self.dir, "data")
        proto = self.protocol
        p = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:%d" % self.controller_port,
            "controller.listener.names": "CONTROLLER",
            "listeners": "CLIENT://127.0.0.1:%d,ADMIN://127.0.0.1:%d,"
                         "CONTROLLER://127.0.0.1:%d"
                         % (self.port, self.admin_port, self.controller_port),
            "advertised.listeners": "CLIENT://127.0.0.1:%d,ADMIN://127.0.0.1:%d"
                                    % (self.port, self.admin_port),
            "listener.security.protocol.map":
                "CLIENT:%s,ADMIN:PLAINTEXT,CONTROLLER:PLAINTEXT" % proto,
            "inter.broker.listener.name": "ADMIN",
            "log.dirs": data,
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.flush.interval.messages": "9223372036854775807",
            # A cleaner that wakes up quickly and fits in a small heap, so
            # compaction can be provoked within a test.
            "log.cleaner.enable": "true",
            "log.cleaner.threads": "1",
            "log.cleaner.backoff.ms": "200",
            "log.cleaner.dedupe.buffer.size": "4194304",
            "log.cleaner.io.buffer.size": "262144",
            "log.cleaner.min.compaction.lag.ms": "0",
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            "file.delete.delay.ms": "1000",
        }
        if self.version_tuple >= (4, 0):
            # Share groups' state topic (KIP-932); 3.x does not know it.
            p["share.coordinator.state.topic.replication.factor"] = "1"
            p["share.coordinator.state.topic.min.isr"] = "1"
        if "sasl" in self.feats:
            p["listener.name.client.sasl.enabled.mechanisms"] = "SCRAM-SHA-512,PLAIN"
            p["sasl.enabled.mechanisms"] = "SCRAM-SHA-512,PLAIN"
            p["listener.name.client.scram-sha-512.sasl.jaas.config"] = \
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            p["listener.name.client.plain.sasl.jaas.config"] = \
                "org.apache.kafka.common.security.plain.PlainLoginModule required " \
                + " ".join('user_%s="%s"' % kv for kv in sorted(USERS.items())) + ";"
        if "ssl" in self.feats:
            p["listener.name.client.ssl.keystore.type"] = "PEM"
            p["listener.name.client.ssl.keystore.location"] = self.tls["broker_keystore"]
            p["listener.name.client.ssl.truststore.type"] = "PEM"
            p["listener.name.client.ssl.truststore.location"] = self.tls["ca"]
            p["listener.name.client.ssl.client.auth"] = \
                "required" if "mtls" in self.feats else "none"
            # The certificate's CN is the principal name under mTLS.
            p["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]*).*$/$1/,DEFAULT"
        if "acl" in self.feats:
            p["authorizer.class.name"] = \
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            # ANONYMOUS is the ADMIN and CONTROLLER listeners' principal.
            p["super.users"] = "User:%s;User:ANONYMOUS" % SUPER_USER
            p["allow.everyone.if.no.acl.found"] = "false"
        # A value may name this broker's ports, picked at start:
        # {port}, {admin_port}, {controller_port} (e.g. an advertised
        # client listener that is a test's proxy in front of {port}).
        ports = {"port": self.port, "admin_port": self.admin_port,
                 "controller_port": self.controller_port}
        p.update({k: v.format(**ports) if "{" in v else v
                  for k, v in self.extra_props.items()})
        return p

    def _write_config(self):
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, "server.properties")
        with open(path, "w") as f:
            f.write("# written by test/kafka/realkafka.py\n")
            for k, v in self._properties().items():
                f.write("%s=%s\n" % (k, v.replace("\\", "\\\\")))
        with open(os.path.join(self.dir, "log4j2.properties"), "w") as f:
            f.write(LOG4J2)
        return path

    def _java(self, main, args, cds=None):
        java = find_java()
        cmd = [java, "-Xms%dm" % self.heap_mb, "-Xmx%dm" % self.heap_mb] \
            + JVM_OPTS + (cds or []) + [
            "-Dlog4j2.configurationFile=" + os.path.join(self.dir, "log4j2.properties"),
            "-Dkafka.logs.dir=" + self.dir,
            "-cp", os.path.join(self.libs, "*"), main] + args
        return cmd

    # -- life cycle

    def start(self):
        """Format storage and launch the broker; returns without waiting
        (see wait_ready)."""
        self.prepare()
        self.launch()

    def prepare(self):
        """Pick ports, write the configuration, make certificates and format
        the storage (safe to run in a worker thread)."""
        if self.libs is None:
            self.libs = ensure_libs(self.version)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.port, self.admin_port, self.controller_port = free_ports(3)
        if "ssl" in self.feats:
            self.tls = make_test_ca(os.path.join(self.dir, "tls"))
        conf = self._write_config()
        # Kafka's own ids never start with "-": the tool would take one that
        # does for an option (1 format in 64 failed that way before this).
        self.cluster_id = "-"
        while self.cluster_id.startswith("-"):
            self.cluster_id = base64.urlsafe_b64encode(
                uuid.uuid4().bytes).decode().rstrip("=")
        t0 = time.monotonic()
        fmt = ["format", "-t", self.cluster_id, "-c", conf]
        for name, level in sorted(self.features.items()):
            fmt += ["--feature", "%s=%s" % (name, level)]
        if "sasl" in self.feats:
            for u, pw in sorted(USERS.items()):
                # An explicit salt whose length is a multiple of 3: the
                # tool's default (25 bytes, padded base64) is refused by
                # librdkafka 2.0.2's SCRAM client.
                salt = base64.b64encode(os.urandom(24)).decode()
                fmt += ["--add-scram",
                        "SCRAM-SHA-512=[name=%s,password=%s,salt=%s,"
                        "iterations=4096]" % (u, pw, salt)]
        log_path = os.path.join(self.dir, "format.log")
        for attempt in (1, 2):
            with open(log_path, "w") as out:
                p = subprocess.run(self._java("kafka.tools.StorageTool", fmt,
                                              cds_use(self.libs)),
                                   stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL,
                                   start_new_session=True, timeout=120)
            if p.returncode == 0:
                self.format_seconds = time.monotonic() - t0
                for n in self.nodes.values():
                    n.prepare()
                return
            # Not expected: keep the log, say so, format once more.
            shutil.copy(log_path, log_path + ".failed-%d" % attempt)
            log("%s: formatting storage failed (exit %d), attempt %d:\n%s"
                % (self.name, p.returncode, attempt, _tail(log_path, 8)))
            shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)
        raise KafkaError("%s: formatting storage failed (exit %d):\n%s"
                         % (self.name, p.returncode, _tail(log_path, 8)))

    def launch(self):
        """Start the formatted broker.  Call from the thread that will live
        as long as the broker: PR_SET_PDEATHSIG follows the forking thread."""
        cds, self._cds_tmp = cds_options(self.libs)
        self._launched = time.monotonic()
        out = open(self.log_path, "a")  # a start_again() appends
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", [os.path.join(self.dir, "server.properties")],
                       cds),
            stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            close_fds=True, start_new_session=True, preexec_fn=_pdeathsig)
        out.close()
        self.pid = self.proc.pid
        with open(os.path.join(self.dir, "pid"), "w") as f:
            f.write("%d\n" % self.pid)
        for n in self.nodes.values():
            n.launch()

    def log_tail(self, n=25):
        try:
            with open(self.log_path, errors="replace") as f:
                lines = f.readlines()
        except OSError:
            return "(no broker log)"
        return "".join(lines[-n:])

    def wait_ready(self, deadline):
        """Wait until the broker answers ApiVersions on the admin listener,
        registered itself (Metadata lists it) and accepts TCP on the client
        listener."""
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise KafkaError("%s: broker exited with %s before it was "
                                 "ready; log tail:\n%s"
                                 % (self.name, self.proc.returncode,
                                    self.log_tail()))
            for n in self.nodes.values():
                if n.proc is not None and not n.running():
                    raise KafkaError("%s: broker node %d exited with %s "
                                     "before it was ready; log tail:\n%s"
                                     % (self.name, n.id, n.proc.returncode,
                                        _tail(n.log_path, 25)))
            try:
                api_versions("127.0.0.1", self.admin_port, timeout=2)
                if len(self.metadata([])["brokers"]) == 1 + len(self.nodes):
                    socket.create_connection(("127.0.0.1", self.port),
                                             timeout=2).close()
                    if self._launched is not None:
                        self.ready_seconds = time.monotonic() - self._launched
                    return
                last = "no broker registered yet"
            except (OSError, KafkaError, struct.error) as e:
                last = str(e)
            time.sleep(0.1)
        raise KafkaError("%s: broker not ready after %.0fs (%s); log tail:\n%s"
                         % (self.name, START_TIMEOUT, last, self.log_tail()))

    def stop(self, timeout=STOP_TIMEOUT, kill=False):
        """SIGTERM the broker's process group, SIGKILL after timeout;
        kill=True is SIGKILL at once (a crash).  The data and ports stay:
        start_again() starts the cluster on them."""
        for n in self.nodes.values():
            n.stop(timeout, kill=kill)
        pid = self.pid
        if pid is None:
            return
        if kill:
            _signal(pid, signal.SIGKILL)
        _kill_group(pid, self.proc, timeout)
        self.proc = None
        self.pid = None
        if getattr(self, "_cds_tmp", None):
            cds_publish(self._cds_tmp)
            self._cds_tmp = None

    def start_again(self, props=None, timeout=START_TIMEOUT):
        """After stop(): start the cluster again on its data and ports and
        wait until it is ready.  props ({key: value}) change extra_props
        first (a value None drops the key) and server.properties is
        written again, so a broker can come back with another setting,
        e.g. {"advertised.listeners": "CLIENT://nx.invalid:{port},ADMIN://"
        "127.0.0.1:{admin_port}"} to advertise a name that does not
        resolve, or a client keystore of another CA; start_again({key:
        None}) brings the default back.  Broker-only nodes keep their
        configuration.  Call from the thread that will live as long as
        the broker (see launch)."""
        if self.proc is not None and self.proc.poll() is None:
            raise KafkaError("%s: start_again() while the broker runs; "
                             "stop() it first" % self.name)
        for k, v in (props or {}).items():
            if v is None:
                self.extra_props.pop(k, None)
            else:
                self.extra_props[k] = v
        self._write_config()
        self.launch()
        self.wait_ready(time.monotonic() + timeout)

    def freeze(self):
        """SIGSTOP the broker's process group (node 1) and return once
        every thread of it is stopped (sigstop()): its sockets stay open
        and the kernel still completes new TCP handshakes into the listen
        backlog, so clients see requests that are never answered, not a
        refusal.  thaw() resumes it."""
        if self.pid is None:
            raise KafkaError("%s: freeze() of a stopped broker" % self.name)
        sigstop(self.pid)

    def thaw(self):
        """SIGCONT after freeze()."""
        if self.pid is not None:
            _signal(self.pid, signal.SIGCONT)

    # -- broker nodes of a multi-broker cluster

    @property
    def broker_ids(self):
        """Every node id: [1] for a single-node cluster, [1, 2, 3] for
        brokers=3."""
        return [1] + sorted(self.nodes)

    def _node(self, node_id):
        if node_id not in self.nodes:
            raise ValueError("%s: node %r is not a broker-only node (%s); "
                             "node 1 is the controller and always runs"
                             % (self.name, node_id, sorted(self.nodes)))
        return self.nodes[node_id]

    def stop_broker(self, node_id, timeout=STOP_TIMEOUT, kill=False):
        """Stop broker node_id (2..N): SIGTERM, a controlled shutdown that
        moves its leaderships away first; kill=True is SIGKILL (a crash).
        Waits until the process is gone and the controller no longer lists
        the broker."""
        self._node(node_id).stop(timeout, kill=kill)
        deadline = time.monotonic() + 60
        while any(b[0] == node_id for b in self.metadata([])["brokers"]):
            if time.monotonic() > deadline:
                raise KafkaError("%s: broker %d still registered 60s after "
                                 "it stopped" % (self.name, node_id))
            time.sleep(0.1)

    def start_broker(self, node_id, timeout=START_TIMEOUT):
        """Start broker node_id (2..N) again on its data and ports; waits
        until it is registered."""
        n = self._node(node_id)
        if n.running():
            return
        n.launch()
        deadline = time.monotonic() + timeout
        while not any(b[0] == node_id for b in self.metadata([])["brokers"]):
            if not n.running():
                raise KafkaError("%s: broker %d exited with %s; log tail:\n%s"
                                 % (self.name, node_id, n.proc.returncode,
                                    _tail(n.log_path, 25)))
            if time.monotonic() > deadline:
                raise KafkaError("%s: broker %d not registered after %.0fs"
                                 % (self.name, node_id, timeout))
            time.sleep(0.1)

    def partition(self, topic, partition=0):
        """{'leader': id or -1, 'leader_epoch': n, 'replicas': [...],
        'isr': [...]} of one partition, from Metadata."""
        t = self.metadata([topic])["topics"].get(topic)
        if not t or partition not in t["partitions"]:
            return {"leader": -1, "leader_epoch": -1, "replicas": [], "isr": []}
        return {"leader": t["partitions"][partition],
                "leader_epoch": t["leader_epochs"][partition],
                "replicas": t["replicas"][partition], "isr": t["isr"][partition]}

    # -- admin requests (over the PLAINTEXT admin listener)

    def _wire(self):
        return Wire("127.0.0.1", self.admin_port, timeout=30)

    def metadata(self, topics=None):
        """Metadata v7: {'brokers': [...], 'topics': {name: {'error': code,
        'partitions': {index: leader}, 'replicas': {index: [ids]},
        'isr': {index: [ids]}, 'leader_epochs': {index: epoch}}}}; topics
        None means all."""
        w = self._wire()
        try:
            body = (struct.pack(">i", -1) if topics is None
                    else _array([_str(t) for t in topics])) + b"\x00"
            r = w.request(3, 7, body)
            r.i32()  # throttle
            brokers = r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))
            r.string()  # cluster id
            r.i32()  # controller
            out = {"brokers": brokers, "topics": {}}
            for _ in range(r.i32()):
                err, name, _internal = r.i16(), r.string(), r.i8()
                parts, replicas, isr, epochs = {}, {}, {}, {}
                for _ in range(r.i32()):
                    perr, idx, leader = r.i16(), r.i32(), r.i32()
                    epochs[idx] = r.i32()
                    replicas[idx] = r.array(r.i32)
                    isr[idx] = r.array(r.i32)
                    r.array(r.i32)  # offline replicas
                    parts[idx] = leader if perr == 0 else -1
                out["topics"][name] = {"error": err, "partitions": parts,
                                       "replicas": replicas, "isr": isr,
                                       "leader_epochs": epochs}
            return out
        finally:
            w.close()

    def create_topic(self, name, partitions=1, configs=None, timeout=60.0,
                     replicas=1, assignment=None):
        """Create a topic and wait until every partition has a leader.
        replicas is the replication factor; assignment ({partition: [node
        ids]}, the first the preferred leader) places the replicas instead
        (e.g. {0: [2, 3]} keeps node 1 out of it)."""
        cfg = b"".join(_str(k) + _str(str(v))
                       for k, v in sorted((configs or {}).items()))
        if assignment:
            partitions = len(assignment)
            head = struct.pack(">ih", -1, -1) + _array([
                struct.pack(">i", i) + _array([struct.pack(">i", b) for b in ids])
                for i, ids in sorted(assignment.items())])
        else:
            head = struct.pack(">ih", partitions, replicas) + _array([])
        body = _array([_str(name) + head
                       + struct.pack(">i", len(configs or {}))
                       + cfg]) + struct.pack(">ib", 30000, 0)
        deadline = time.monotonic() + timeout
        while True:
            w = self._wire()
            try:
                r = w.request(19, 4, body)
                r.i32()
                (tname, err, msg), = r.array(
                    lambda: (r.string(), r.i16(), r.string()))
            finally:
                w.close()
            if err == 0:
                break
            if err in (7, 41, 5) and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise KafkaError("%s: creating topic %s: %s: %s"
                             % (self.name, name, error_name(err), msg))
        self.wait_topic(name, partitions, deadline)

    def wait_topic(self, name, partitions, deadline):
        while True:
            t = self.metadata([name])["topics"].get(name)
            if t and t["error"] == 0 and len(t["partitions"]) == partitions \
                    and all(l >= 0 for l in t["partitions"].values()):
                return
            if time.monotonic() > deadline:
                raise KafkaError("%s: topic %s has no leader for every "
                                 "partition in time: %r" % (self.name, name, t))
            time.sleep(0.1)

    def create_compacted_topic(self, name, partitions=1, segment_ms=100,
                               dirty_ratio=0.01, delete_retention_ms=100,
                               segment_bytes=None, extra=None):
        """A cleanup.policy=compact topic whose segments roll quickly so the
        cleaner can be provoked: records are appended, segment.ms passes, one
        more record rolls the segment and the cleaner compacts the closed
        ones within log.cleaner.backoff.ms."""
        cfg = {"cleanup.policy": "compact",
               "segment.ms": segment_ms,
               "min.cleanable.dirty.ratio": dirty_ratio,
               "delete.retention.ms": delete_retention_ms,
               "min.compaction.lag.ms": 0,
               "max.compaction.lag.ms": max(segment_ms, 1)}
        if segment_bytes is not None:
            cfg["segment.bytes"] = segment_bytes
        cfg.update(extra or {})
        self.create_topic(name, partitions, cfg)

    def grant(self, principal, operations, topic=None, group=None,
              cluster=False, pattern="literal", permission="ALLOW",
              transactional_id=None):
        """Allow ACLs (CreateAcls v1) for principal ("User:alice") on a topic,
        a group, a transactional id or the cluster; operations like
        ["WRITE", "DESCRIBE"]; permission="DENY" makes DENY ones
        (revoke(..., permission="DENY") deletes them)."""
        ops = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6,
               "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
               "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
               "IDEMPOTENT_WRITE": 12}
        pats = {"literal": 3, "prefixed": 4}
        if topic is not None:
            rtype, rname = 2, topic
        elif group is not None:
            rtype, rname = 3, group
        elif transactional_id is not None:
            rtype, rname = 5, transactional_id
        elif cluster:
            rtype, rname = 4, "kafka-cluster"
        else:
            raise ValueError("grant: name a topic, a group, a transactional "
                             "id or cluster=True")
        creations = [struct.pack(">b", rtype) + _str(rname)
                     + struct.pack(">b", pats[pattern]) + _str(principal)
                     + _str("*") + struct.pack(">bb", ops[op.upper()],
                                               {"ALLOW": 3, "DENY": 2}[permission])
                     for op in operations]
        w = self._wire()
        try:
            r = w.request(30, 1, _array(creations))
            r.i32()
            for err, msg in r.array(lambda: (r.i16(), r.string())):
                if err:
                    raise KafkaError("CreateAcls: %s: %s" % (error_name(err), msg))
        finally:
            w.close()

    ACL_OPS = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6,
               "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
               "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
               "IDEMPOTENT_WRITE": 12}

    def acls(self):
        """Every ACL binding (DescribeAcls v1) as a set of tuples
        (resource type "TOPIC"/"GROUP"/..., name, "LITERAL"/"PREFIXED",
        principal, host, operation "WRITE"..., "ALLOW"/"DENY")."""
        rtypes = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
        pats = {3: "LITERAL", 4: "PREFIXED"}
        ops = {v: k for k, v in self.ACL_OPS.items()}
        perms = {2: "DENY", 3: "ALLOW"}
        body = (struct.pack(">b", 1) + _str(None) + struct.pack(">b", 1)
                + _str(None) + _str(None) + struct.pack(">bb", 1, 1))
        w = self._wire()
        try:
            r = w.request(29, 1, body)
            r.i32()
            err, msg = r.i16(), r.string()
            if err:
                raise KafkaError("DescribeAcls: %s: %s" % (error_name(err), msg))
            out = set()

            def res():
                rt, name, pt = r.i8(), r.string(), r.i8()
                for pr, host, op, pm in r.array(
                        lambda: (r.string(), r.string(), r.i8(), r.i8())):
                    out.add((rtypes.get(rt, str(rt)), name, pats.get(pt, str(pt)),
                             pr, host, ops.get(op, str(op)), perms.get(pm, str(pm))))
            r.array(res)
            return out
        finally:
            w.close()

    def revoke(self, principal, operations, topic=None, group=None,
               pattern="literal", permission="ALLOW"):
        """Delete ACLs (DeleteAcls v1) granted by grant() (or DENY ones);
        neither topic nor group: the cluster's."""
        pats = {"literal": 3, "prefixed": 4}
        rtype, rname = (2, topic) if topic is not None else \
            (3, group) if group is not None else (4, "kafka-cluster")
        perm = {"ALLOW": 3, "DENY": 2}[permission]
        filters = [struct.pack(">b", rtype) + _str(rname)
                   + struct.pack(">b", pats[pattern]) + _str(principal)
                   + _str("*") + struct.pack(">bb", self.ACL_OPS[op.upper()], perm)
                   for op in operations]
        w = self._wire()
        try:
            r = w.request(31, 1, _array(filters))
            r.i32()

            def fr():
                err, msg = r.i16(), r.string()
                r.array(lambda: (r.i16(), r.string(), r.i8(), r.string(), r.i8(),
                                 r.string(), r.string(), r.i8(), r.i8()))
                if err:
                    raise KafkaError("DeleteAcls: %s: %s" % (error_name(err), msg))
            r.array(fr)
        finally:
            w.close()


def _signal(pid, sig):
    """Signal pid's whole process group when it leads one, else pid alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _thread_states(pid):
    """The state letter of every thread of pid (/proc/PID/task/*/stat)."""
    out = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                s = f.read()
        except OSError:
            continue            # the thread exited meanwhile
        out.append(s[s.rindex(")") + 2:][:1])
    return out


def wait_stopped(pid, timeout=30.0):
    """After SIGSTOP of pid: wait until every thread of it is stopped (or
    the process is gone).  kill() returns once the signal is queued; the
    threads stop only when the one that takes the signal gets a CPU, and
    on a loaded machine the others go on serving requests meanwhile (at a
    load average of 10 a broker answers about one request in 60 sent right
    after kill() returns)."""
    deadline = time.monotonic() + timeout
    while True:
        states = _thread_states(pid)
        if all(s in ("T", "t", "Z", "X") for s in states):
            return
        if time.monotonic() >= deadline:
            raise KafkaError("pid %d: threads not stopped %.0f s after "
                             "SIGSTOP (states %s)"
                             % (pid, timeout, "".join(sorted(states))))
        time.sleep(0.001)


def sigstop(pid):
    """SIGSTOP pid (its process group when it leads one) and return once
    every thread of pid is stopped (wait_stopped())."""
    _signal(pid, signal.SIGSTOP)
    wait_stopped(pid)


def _kill_group(pid, proc=None, timeout=STOP_TIMEOUT):
    """SIGTERM pid (its process group when it leads one), SIGKILL after
    timeout, and wait for pid to go."""
    def gone():
        if proc is not None:
            return proc.poll() is not None
        return not _alive(pid)
    try:
        leader = os.getpgid(pid) == pid
    except OSError:
        leader = False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        _signal(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not gone():
            time.sleep(0.05)
        if gone():
            break
    if leader:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # anything else left in the group


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _per_cluster(value, clusters, what):
    """One value for every cluster, or a list with one per cluster."""
    if isinstance(value, (list, tuple)):
        if len(value) != clusters:
            raise ValueError("one %s per cluster: %d given for %d clusters"
                             % (what, len(value), clusters))
        return list(value)
    return [value] * clusters


class Launcher:
    """N independent clusters under root (single-node, or brokers=N nodes
    each), started in parallel.
    stop() ends them; it also runs at interpreter exit, and the brokers die
    with this process anyway (PR_SET_PDEATHSIG)."""

    def __init__(self, root, clusters=2, security="", heap_mb=256,
                 extra_props=None, features=None, brokers=1, version=None):
        """security: one variant for all clusters, or a list with one
        variant per cluster (e.g. ["ssl", "mtls"]); version likewise: one
        Kafka release for all (default KAFKA_VERSION) or a list, e.g.
        ["3.6.2", "4.4.0"]."""
        self.root = os.path.abspath(root)
        variants = _per_cluster(security, clusters, "security variant")
        versions = _per_cluster(version, clusters, "Kafka version")
        self.start_seconds = None  # format + start + ready, measured
        self.clusters = [Cluster(self.root, "k%d" % i, variants[i],
                                 heap_mb=heap_mb, extra_props=extra_props,
                                 features=features, brokers=brokers,
                                 version=versions[i])
                         for i in range(clusters)]

    def start(self, timeout=START_TIMEOUT):
        libs = {}
        for c in self.clusters:  # one at a time: the fetch holds one lock
            if c.version not in libs:
                libs[c.version] = ensure_libs(c.version)
        os.makedirs(self.root, exist_ok=True)
        import atexit
        atexit.register(self.stop)
        t0 = time.monotonic()
        for attempt in range(3):
            errors = []

            def one(c):
                try:
                    c.libs = libs[c.version]
                    c.prepare()
                except Exception as e:  # noqa: BLE001 -- reported below
                    errors.append(e)
            threads = [threading.Thread(target=one, args=(c,))
                       for c in self.clusters]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if not errors:
                deadline = time.monotonic() + timeout
                try:
                    for c in self.clusters:
                        c.launch()
                    # Waited for together, so that each cluster's
                    # ready_seconds is its own.
                    waits = [threading.Thread(target=self._wait_one,
                                              args=(c, deadline, errors))
                             for c in self.clusters]
                    for t in waits:
                        t.start()
                    for t in waits:
                        t.join()
                    if errors:
                        raise errors[0]
                    self.start_seconds = time.monotonic() - t0
                    return self
                except KafkaError as e:
                    if e not in errors:
                        errors.append(e)
            self.stop()
            # A port taken between free_port() and bind: try new ports.
            if not any("Address already in use" in c.log_tail(200)
                       for c in self.clusters) or attempt == 2:
                raise errors[0]
            log("a port was taken meanwhile; starting again on new ports")
        return self

    @staticmethod
    def _wait_one(c, deadline, errors):
        try:
            c.wait_ready(deadline)
        except KafkaError as e:
            errors.append(e)

    def stop(self):
        threads = [threading.Thread(target=c.stop) for c in self.clusters]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def to_dict(self):
        versions = sorted(set(c.version for c in self.clusters))
        return {"kafka_version": ",".join(versions),
                "start_seconds": round(self.start_seconds, 2),
                "clusters": [c.to_dict() for c in self.clusters]}


# ----------------------------------------------------- shared and the CLI

def default_shared_root(security="plaintext"):
    top = os.environ.get("top_builddir") or os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "build")
    return os.path.join(top, "test", "kafka", "shared-" +
                        (security.replace(",", "-") or "plaintext"))


def _read_state(root):
    try:
        with open(os.path.join(root, "state.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_state(root, state):
    tmp = os.path.join(root, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.rename(tmp, os.path.join(root, "state.json"))


def _stop_recorded(root, state):
    """Stop whatever a state file says is running (supervisor, then brokers)."""
    if state.get("pid") and _alive(state["pid"]):
        _kill_group(state["pid"], timeout=2 * STOP_TIMEOUT + 10)
    for c in state.get("clusters", []):
        if c.get("pid") and _alive(c["pid"]):
            _kill_group(c["pid"])
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(root, "state.json"))


class Lease:
    """A claim on the shared clusters by this process; release() or exit
    drops it."""

    def __init__(self, root, clusters, start_seconds, reused):
        self.root = root
        self.clusters = clusters
        self.start_seconds = start_seconds  # how long their start took
        self.reused = reused  # False: this lease started them
        self.path = os.path.join(root, "leases", "%d" % os.getpid())
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "w") as f:
            f.write(_start_time(os.getpid()) or "")
        import atexit
        atexit.register(self.release)

    def release(self):
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def shared(clusters=2, security="plaintext", root=None, timeout=None):
    """Claim the shared clusters (starting them if needed); returns a Lease
    whose .clusters are Cluster objects.  Raises Unavailable or KafkaError."""
    security = ",".join(sorted(_features(security))) or "plaintext"
    root = root or default_shared_root(security)
    timeout = timeout or START_TIMEOUT
    ensure_libs()  # fetch outside the lock; its own lock serialises it
    os.makedirs(root, exist_ok=True)
    with flocked(os.path.join(root, "lock"), timeout + 60,
                 "another test is starting or stopping the shared clusters"):
        st = _read_state(root)
        if st and st.get("status") == "ready" and _alive(st.get("pid", 0)):
            # A live supervisor: reuse it.  Replace it only when nobody
            # holds a lease (a pid reused by another program, brokers gone
            # or too few clusters); never pull clusters from under a test.
            why = None
            if not _answers(st, 30.0):
                why = "its brokers do not answer"
            elif len(st["clusters"]) < clusters:
                why = "it has %d clusters, %d wanted" % (len(st["clusters"]),
                                                        clusters)
            else:
                return Lease(root, [Cluster.from_dict(c) for c in st["clusters"]],
                             st.get("start_seconds"), reused=True)
            if _live_leases(root):
                raise KafkaError("the shared %s clusters in %s are in use but "
                                 "%s" % (security, root, why))
            log("replacing the shared clusters in %s: %s" % (root, why))
        if st:
            _stop_recorded(root, st)
        lease = Lease(root, [], None, reused=False)
        logf = open(os.path.join(root, "supervisor.log"), "a")
        cmd = [sys.executable, os.path.abspath(__file__), "serve",
               "--dir", root, "--clusters", str(max(clusters, 2)),
               "--security", security,
               "--idle-timeout", os.environ.get("MIRRORD_KAFKA_IDLE", "60"),
               "--max-life", os.environ.get("MIRRORD_KAFKA_MAX_LIFE", "7200")]
        sup = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                               stderr=subprocess.STDOUT, close_fds=True,
                               start_new_session=True, cwd=root)
        logf.close()
        deadline = time.monotonic() + timeout + 30
        while True:
            st = _read_state(root)
            if st and st.get("status") == "ready" and st.get("pid") == sup.pid:
                break
            if sup.poll() is not None:
                raise KafkaError("the shared clusters did not start; see %s:\n%s"
                                 % (os.path.join(root, "supervisor.log"),
                                    _tail(os.path.join(root, "supervisor.log"))))
            if time.monotonic() > deadline:
                _kill_group(sup.pid, sup)
                raise KafkaError("the shared clusters were not ready in time")
            time.sleep(0.1)
        lease.clusters = [Cluster.from_dict(c) for c in st["clusters"]]
        lease.start_seconds = st.get("start_seconds")
        return lease


def _answers(state, within):
    """Does every cluster a state file lists answer ApiVersions (retrying
    for `within` seconds: a loaded machine can be slow to answer)?"""
    deadline = time.monotonic() + within
    while True:
        try:
            for c in state["clusters"]:
                api_versions(*_split(c["admin_bootstrap"]), timeout=5)
            return True
        except KeyError:
            return False
        except (OSError, KafkaError, struct.error) as e:
            if time.monotonic() > deadline:
                log("shared clusters do not answer: %s" % e)
                return False
        time.sleep(0.5)


def _tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def _live_leases(root):
    d = os.path.join(root, "leases")
    live = 0
    for name in os.listdir(d) if os.path.isdir(d) else []:
        path = os.path.join(d, name)
        try:
            with open(path) as f:
                stamp = f.read().strip()
            pid = int(name)
        except (OSError, ValueError):
            continue
        if _alive(pid) and (not stamp or _start_time(pid) == stamp):
            live += 1
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return live


def serve(args, detach_fd=None):
    """Run clusters until a signal, `stop`, idle (leases) or max life."""
    root = os.path.abspath(args.dir)
    os.makedirs(root, exist_ok=True)
    old = _read_state(root)
    if old and old.get("pid") != os.getpid() and _alive(old.get("pid", 0)):
        raise KafkaError("%s is in use by pid %d; stop it first"
                         % (root, old["pid"]))
    launcher = Launcher(root, args.clusters, args.security,
                        version=args.kafka_version)
    # Recorded before the (slow) start so that `stop` finds us meanwhile.
    _write_state(root, {"status": "starting", "pid": os.getpid(),
                        "clusters": []})
    stopping = []

    def on_signal(signum, _frame):
        stopping.append(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    import atexit
    atexit.register(launcher.stop)
    try:
        launcher.start()
    except Exception:
        launcher.stop()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(root, "state.json"))
        raise
    if stopping:  # told to stop while starting
        os.unlink(os.path.join(root, "state.json"))
        launcher.stop()
        return 0
    state = launcher.to_dict()
    state.update(status="ready", pid=os.getpid(), security=args.security,
                 started=time.time())
    _write_state(root, state)
    text = json.dumps(state, indent=1)
    if detach_fd is not None:
        os.write(detach_fd, text.encode() + b"\n")
        os.close(detach_fd)
    else:
        print(text, flush=True)
    start = time.monotonic()
    idle_since = time.monotonic()
    lock = os.path.join(root, "lock")
    while not stopping:
        time.sleep(0.5)
        if time.monotonic() - start > args.max_life:
            log("max life of %.0fs reached, stopping" % args.max_life)
            break
        for c in launcher.clusters:
            if c.proc.poll() is not None:
                log("%s exited unexpectedly (%s); stopping all"
                    % (c.name, c.proc.returncode))
                stopping.append("broker exit")
        if args.idle_timeout <= 0:
            continue
        try:
            with flocked(lock, 0, "idle check"):
                if _live_leases(root):
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > args.idle_timeout:
                    log("no user for %.0fs, stopping" % args.idle_timeout)
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(root, "state.json"))
                    launcher.stop()
                    return 0
        except KafkaError:
            pass  # someone holds the lock: they are using or starting us
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(root, "state.json"))
    launcher.stop()
    return 0


def cmd_start(args):
    if not args.detach:
        return serve(args)
    os.makedirs(args.dir, exist_ok=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        logfd = os.open(os.path.join(args.dir, "supervisor.log"),
                        os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(devnull, 0)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        rc = 1
        try:
            rc = serve(args, detach_fd=w)
        except Exception as e:  # noqa: BLE001 -- reported through the log
            log("error: %s" % e)
        os._exit(rc)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    if not out:
        os.waitpid(pid, 0)
        sys.stderr.write(_tail(os.path.join(args.dir, "supervisor.log")))
        return 1
    sys.stdout.write(out.decode())
    return 0


def cmd_stop(args):
    root = os.path.abspath(args.dir)
    st = _read_state(root)
    if not st:
        log("nothing running in %s" % root)
        return 0
    _stop_recorded(root, st)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("start", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--clusters", type=int, default=2)
        p.add_argument("--dir", required=True)
        p.add_argument("--security", default="plaintext",
                       help="comma list of sasl, ssl, mtls, acl")
        p.add_argument("--idle-timeout", type=float, default=0,
                       help="with leases: stop after this long unused")
        p.add_argument("--max-life", type=float, default=7200)
        p.add_argument("--kafka-version", default=KAFKA_VERSION,
                       help="the Kafka release to run (3.6.0 or newer; "
                       "default %(default)s)")
        if name == "start":
            p.add_argument("--detach", action="store_true",
                           help="return once ready, keep running in background")
    for name in ("stop", "status"):
        sub.add_parser(name).add_argument("--dir", required=True)
    sub.add_parser("fetch").add_argument(
        "--kafka-version", default=KAFKA_VERSION,
        help="the release to fetch (default %(default)s)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(ensure_libs(args.kafka_version))
            return 0
        if args.cmd == "status":
            st = _read_state(os.path.abspath(args.dir))
            print(json.dumps(st, indent=1) if st else "{}")
            return 0 if st else 1
        if args.cmd == "stop":
            return cmd_stop(args)
        args.security = ",".join(sorted(_features(args.security))) or "plaintext"
        return cmd_start(args) if args.cmd == "start" else serve(args)
    except Unavailable as e:
        print("SKIP: real Kafka tier: %s" % e)
        return 77
    except (KafkaError, ValueError) as e:
        log("error: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
