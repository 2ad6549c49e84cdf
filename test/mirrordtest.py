"""Run the real mirrord binary and its CLI from black-box tests.

    import harness as h, mirrordtest as mt
    d = mt.Mirrord(destination="127.0.0.1:9092")   # writes a config, starts
    d.cli("--list")                                  # CompletedProcess
    d.create("m1", {"bootstrap.servers": src})
    d.describe_json()                                # list of partition dicts
    d.kill9(); d.start()                             # same data dir

Every wait is bounded; every process is killed at exit (harness.Proc).
"""

import json
import os
import socket
import struct
import subprocess
import time

import harness as h


class Mirrord:
    def __init__(self, destination, name="mirrord", extra_yaml="",
                 start=True, data_dir=None, log_level="debug"):
        self.name = name
        self.dir = os.path.join(h.test_dir(), name)
        os.makedirs(self.dir, exist_ok=True)
        self.data_dir = data_dir or os.path.join(self.dir, "data")
        self.port = h.free_port()
        self.metrics_port = h.free_port()
        while self.metrics_port == self.port:   # the kernel may hand it out twice
            self.metrics_port = h.free_port()
        self.config_path = os.path.join(self.dir, "mirrord.yaml")
        self.destination = destination
        with open(self.config_path, "w") as f:
            f.write(
                "server:\n"
                "  node_id: 42\n"
                "  listen: \"127.0.0.1:%d\"\n"
                "storage:\n"
                "  data_dir: \"%s\"\n"
                "destination:\n"
                "  bootstrap_servers: \"%s\"\n"
                "metrics:\n"
                "  listen: \"127.0.0.1:%d\"\n"
                "log:\n"
                "  level: %s\n"
                "%s" % (self.port, self.data_dir, destination,
                        self.metrics_port, log_level, extra_yaml))
        self.proc = None
        self.starts = 0
        if start:
            self.start()

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def start(self, wait=True):
        self.starts += 1
        self.proc = h.Proc([h.build_path("daemon", "mirrord"), "-c",
                            self.config_path],
                           name="%s-%d" % (self.name, self.starts))
        if wait:
            h.wait_for(self._answers, 30, "mirrord to answer on %s (log: %s)"
                       % (self.bootstrap, self.proc.log_path))
        return self.proc

    def _answers(self):
        if not self.proc.alive():
            raise AssertionError("mirrord exited with %s:\n%s"
                                 % (self.proc.p.returncode, self.proc.tail()))
        return api_versions_ok(self.bootstrap)

    def kill9(self):
        self.proc.signal(9)
        self.proc.wait(10)

    def stop(self, timeout=30):
        return self.proc.stop(timeout)

    def log(self):
        """Every run's output, concatenated."""
        out = []
        for i in range(1, self.starts + 1):
            p = os.path.join(h.test_dir(), "%s-%d.log" % (self.name, i))
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out.append(f.read().decode("utf-8", "replace"))
        return "".join(out)

    # ---- the CLI

    def cli(self, *args, timeout=60):
        return subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                               "--bootstrap-server", self.bootstrap]
                              + list(args), capture_output=True, text=True,
                              timeout=timeout)

    def cli_ok(self, *args):
        r = self.cli(*args)
        if r.returncode != 0:
            h.fail("kafka-mirrors %s exited %d:\nstdout: %s\nstderr: %s"
                   % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def create(self, mirror, configs, expect_ok=True):
        self._nprops = getattr(self, "_nprops", 0) + 1
        path = os.path.join(self.dir, "mirror-%d.properties" % self._nprops)
        with open(path, "w") as f:
            for k, v in configs.items():
                f.write("%s=%s\n" % (k, v))
        r = self.cli("--create", "--mirror", mirror, "--mirror-config", path)
        if expect_ok and r.returncode != 0:
            h.fail("create %s failed: %s" % (mirror, r.stderr))
        return r

    def describe_json(self, mirror=None):
        args = ["--describe", "--json"]
        if mirror:
            args += ["--mirror", mirror]
        r = self.cli_ok(*args)
        return json.loads(r.stdout)

    def states(self, mirror=None):
        """{(topic, partition): state}"""
        return {(p["topic"], p["partition"]): p["state"]
                for p in self.describe_json(mirror)}

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics"
                                    % self.metrics_port, timeout=10) as r:
            return r.read().decode()


# ---- a few raw Kafka-protocol helpers (the contract is simple) ------------

def frame(api_key, version, corr, body=b"", flexible=False, client_id=b"t"):
    hdr = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if flexible:
        hdr += b"\x00"  # empty tagged-field section
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes"
                           % (len(buf), n))
        buf += chunk
    return buf


def recv_frame(s):
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)


def connect(bootstrap, timeout=10):
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s


def api_versions_ok(bootstrap):
    try:
        with connect(bootstrap, 2) as s:
            s.sendall(frame(18, 0, 1))
            resp = recv_frame(s)
            return struct.unpack(">ih", resp[:6]) == (1, 0)
    except OSError:
        return False


def closed_by_peer(s, timeout=10):
    """True if the peer closes the connection (EOF or reset) in time."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class Proxy:
    """A TCP forwarder from 127.0.0.1:port to target (host:port), in threads,
    for a source that 'comes up' at a fixed address later."""

    def __init__(self, port, target):
        import threading
        self.target = target
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", port))
        self.lsock.listen(16)
        self.lsock.settimeout(0.5)
        self.stop = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _pipe(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.close()
                except OSError:
                    pass

    def _accept(self):
        import threading
        while not self.stop:
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            u = connect(self.target)
            u.settimeout(None)
            c.settimeout(None)
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    def close(self):
        self.stop = True
        self.lsock.close()
