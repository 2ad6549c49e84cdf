"""Shared helpers for mirrord's black-box tests (Python 3 standard library).

A test script is run by `make check` with top_builddir and top_srcdir in the
environment; by hand it falls back to this repository and its build/.

    import harness as h
    h.wait_for(lambda: ..., 30, "the mirror to reach MIRRORING")
    h.eq(got, want, "what was compared")   # FAIL: what: got .., want ..
    d = h.test_dir()                       # fresh, kept after the run
    p = h.Proc([h.build_path("daemon/mirrord"), ...], name="mirrord")
    a, b = h.real_kafka()                  # or SKIP with the reason

Exit status 77 is SKIP (print why first), 0 pass, anything else fail.
"""

import atexit
import os
import signal
import socket
import subprocess
import sys
import time

SRC = os.environ.get("top_srcdir") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("top_builddir") or os.path.join(SRC, "build")

SKIP = 77



# Tests of one tier import helpers of another (test_provenance from a
# Kafka test, test_owner_handoff_kafka from a mock one): both tiers are on
# the path, after the test's own directory and this one.
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _tier in ("mock", "kafka", "tools"):
    if os.path.join(_TESTS, _tier) not in sys.path:
        sys.path.append(os.path.join(_TESTS, _tier))

def skip(reason):
    """Print `SKIP: reason` and exit 77."""
    print("SKIP: %s" % reason, flush=True)
    sys.exit(SKIP)


def fail(msg):
    """Print `FAIL: msg` and exit 1."""
    print("FAIL: %s" % msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    """Fail with msg unless cond."""
    if not cond:
        fail(msg)


def eq(got, want, what):
    """Fail naming what, with both values, unless got == want."""
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def wait_for(cond, timeout, what, interval=0.05):
    """Poll cond() until it returns something true (returned) or timeout
    seconds pass (AssertionError naming `what` and the last value/error)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = cond()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 -- reported if we time out
            last = "%s: %s" % (type(e).__name__, e)
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0fs waiting for %s "
                                 "(last: %r)" % (timeout, what, last))
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on, reserved for this
    test process among all those `make check` runs at once, never one it
    was given before (realkafka.free_port())."""
    return realkafka().free_port()


def build_path(*parts):
    return os.path.join(BUILD, *parts)


def src_path(*parts):
    return os.path.join(SRC, *parts)


def test_name():
    """The test's name: test_foo for test/mock/test_foo.py and
    test/kafka/test_foo_kafka.py, kafka-test_foo for test/kafka/test_foo.py
    (the tier's own tests, named without the _kafka suffix)."""
    path = os.path.abspath(sys.argv[0] or "test")
    name = os.path.splitext(os.path.basename(path))[0] or "test"
    parent = os.path.basename(os.path.dirname(path))
    if parent == "kafka" and not name.endswith("_kafka"):
        return "kafka-" + name
    return name


_test_dir = None


def test_dir():
    """This test's scratch directory under the build tree, emptied at the
    first call and left in place afterwards for post-mortems."""
    global _test_dir
    if _test_dir is None:
        import shutil
        d = build_path("test", "tmp", test_name())
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        _test_dir = d
    return _test_dir


_procs = []


class Proc:
    """A subprocess in its own process group, its stdout and stderr in
    <test_dir>/<name>.log, killed (whole group) at exit whatever happens."""

    def __init__(self, argv, name=None, env=None, cwd=None, stdin=None):
        self.name = name or os.path.basename(argv[0])
        self.log_path = os.path.join(test_dir(), "%s.log" % self.name)
        self._out = open(self.log_path, "ab")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen(
            argv, stdout=self._out, stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin == "pipe" else subprocess.DEVNULL,
            env=full_env, cwd=cwd, start_new_session=True, close_fds=True)
        self.pid = self.p.pid
        _procs.append(self)

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        """Signal the group; SIGSTOP returns once every thread of the
        process is stopped (sigstop())."""
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGSTOP:
            realkafka().wait_stopped(self.pid)

    def wait(self, timeout):
        """Wait for exit; returns the exit status (negative: signal)."""
        return self.p.wait(timeout=timeout)

    def stop(self, timeout=10.0):
        """SIGTERM the group, SIGKILL after timeout; returns the status."""
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.signal(signal.SIGKILL)
        rc = self.p.wait(timeout=10)
        self._out.close()
        return rc

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tail(self, n=30):
        return "".join(self.output().splitlines(True)[-n:])


def _kill_all():
    for p in _procs:
        if p.p.poll() is None:
            p.signal(signal.SIGKILL)
            try:
                p.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def run_main(main, cleanup=None):
    """Runs a test's main() and exits with its status, without returning.

    confluent-kafka 1.7 can crash in interpreter finalisation, so the test
    leaves with os._exit once everything of ours is stopped: every process
    the harness started, then cleanup() (e.g. a mock cluster of the test's
    own).  An exception is printed and counts as a failure."""
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 -- printed, then a failure
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    _kill_all()
    if cleanup is not None:
        cleanup()
    os._exit(code)

atexit.register(_kill_all)


def _exit_on_signal(signum, _frame):
    sys.exit(128 + signum)  # runs the atexit handlers


for _s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_s, _exit_on_signal)


# ------------------------------------------------------ real Apache Kafka

def realkafka():
    """The test/kafka/realkafka.py module."""
    d = src_path("test", "kafka")
    if d not in sys.path:
        sys.path.insert(0, d)
    import realkafka as rk
    return rk


def sigstop(pid):
    """SIGSTOP pid (its process group when it leads one) and return once
    every thread of it is stopped: kill() returns as soon as the signal is
    queued, and on a loaded machine the process goes on for a while (a
    broker still answers requests sent after it)."""
    realkafka().sigstop(pid)


_lease = {}


def real_kafka(clusters=2, security="plaintext"):
    """The real Apache Kafka clusters shared by this `make check` (a list of
    realkafka.Cluster: .bootstrap, .client_config(), .create_topic(), ...),
    started on first use and stopped once no test has used them for a
    while.  Use topic names unique to your test.  SKIPs with the reason when
    Java, Maven or the broker download is missing."""
    rk = realkafka()
    key = (clusters, security)
    if key not in _lease:
        try:
            _lease[key] = rk.shared(clusters, security)
        except rk.Unavailable as e:
            skip("real Kafka tier: %s" % e)
        lease = _lease[key]
        print("real Kafka: %s shared %s clusters (start took %ss)"
              % ("reusing" if lease.reused else "started", security,
                 lease.start_seconds), flush=True)
    return _lease[key].clusters[:clusters]


_private = []


def private_kafka(clusters=1, security="plaintext", **kw):
    """Clusters of this test's own (for tests that change broker settings or
    stop brokers), under test_dir(); stopped at exit.  security is one
    variant or a list with one per cluster; so is version=, the Kafka
    release (default the pinned one, e.g. version=["3.6.2", "4.4.0"]),
    each fetched on first use.  SKIPs like real_kafka()."""
    rk = realkafka()
    name = "-".join(security) if isinstance(security, (list, tuple)) else security
    _private.append(name)
    name = "kafka-%s-%d" % (name.replace(",", "-"), len(_private))
    launcher = rk.Launcher(os.path.join(test_dir(), name), clusters, security,
                           **kw)
    atexit.register(launcher.stop)
    try:
        launcher.start()
    except rk.Unavailable as e:
        skip("real Kafka tier: %s" % e)
    print("real Kafka: started %d private %s cluster(s) of Kafka %s in %.1fs"
          % (clusters, security, ", ".join(c.version for c in launcher.clusters),
             launcher.start_seconds), flush=True)
    return launcher.clusters


def kcat(args, input=None, timeout=60):
    """Run kcat; returns CompletedProcess (text).  Bounded in time."""
    return subprocess.run(["kcat"] + list(args), input=input,
                          capture_output=True, text=True, timeout=timeout)
