"""Python handle on test/tools/mockcluster: librdkafka mock clusters in a child.

    from mockcluster import MockCluster
    mc = MockCluster(clusters=2, brokers=3)
    mc.bootstrap(0)                 # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
    mc.cmd("topic 0 orders 4")      # raises MockError on "error ..."
    mc.cmd("leader 0 orders 0 2")
    mc.close()

The child runs in its own process group and is killed (the whole group) at
exit, whatever happens; it also exits on EOF of its stdin, so it dies with
us even on SIGKILL.  Every wait has a deadline; nothing sleeps blindly.
"""

import atexit
import json
import os
import select
import signal
import subprocess
import time

_SRC = os.environ.get("top_srcdir") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
_BUILD = os.environ.get("top_builddir") or os.path.join(_SRC, "build")

_live = []


class MockError(Exception):
    """mockcluster answered `error <reason>`, or did not answer in time."""


def _kill_all():
    for m in list(_live):
        m.kill()


atexit.register(_kill_all)


class MockCluster:
    def __init__(self, clusters=2, brokers=3, binary=None, out_file=None,
                 log_path=None, timeout=30.0):
        self.binary = binary or os.path.join(_BUILD, "test", "tools", "mockcluster")
        if not os.access(self.binary, os.X_OK):
            raise FileNotFoundError("%s is not built (make all)" % self.binary)
        argv = [self.binary, "-k", str(clusters), "-n", str(brokers)]
        if out_file:
            argv += ["-o", out_file]
        self._log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self._log,
                                  start_new_session=True, close_fds=True)
        _live.append(self)
        self._buf = b""
        line = self._readline(timeout, "the cluster description")
        try:
            self.desc = json.loads(line)
        except ValueError as e:
            self.kill()
            raise MockError("mockcluster printed %r, not JSON: %s" % (line, e))
        self.brokers = self.desc["brokers"]
        self.clusters = self.desc["clusters"]

    def bootstrap(self, c):
        return self.clusters[c]["bootstrap"]

    def broker_addrs(self, c):
        """[(host, port)] in broker id order (id 1 first)."""
        out = []
        for hp in self.bootstrap(c).split(","):
            host, port = hp.rsplit(":", 1)
            out.append((host, int(port)))
        return out

    def cluster_id(self, c):
        return self.clusters[c]["cluster_id"]

    def _readline(self, timeout, what):
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise MockError("mockcluster gave no %s within %.0fs" % (what, timeout))
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise MockError("mockcluster exited (status %r) before %s"
                                % (self.p.poll(), what))
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def cmd(self, line, timeout=30.0):
        """Send one command; return on `ok`, raise MockError on `error`."""
        if "\n" in line:
            raise ValueError("one command per call: %r" % line)
        try:
            self.p.stdin.write(line.encode() + b"\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise MockError("mockcluster is gone (status %r); %r not sent"
                            % (self.p.poll(), line))
        reply = self._readline(timeout, "answer to %r" % line)
        if reply == "ok":
            return
        if reply.startswith("error "):
            raise MockError("%s: %s" % (line, reply[6:]))
        raise MockError("%s: unexpected answer %r" % (line, reply))

    def close(self, timeout=10.0):
        """quit, wait for a clean exit; kill the group if it does not come."""
        if self.p.poll() is None:
            try:
                self.cmd("quit", timeout)
                self.p.wait(timeout=timeout)
            except (MockError, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()
        return self.p.returncode

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass
        if self._log is not subprocess.DEVNULL:
            self._log.close()
            self._log = subprocess.DEVNULL
        if self in _live:
            _live.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
