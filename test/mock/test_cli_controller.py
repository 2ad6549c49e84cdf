#!/usr/bin/env python3
"""kafka-mirrors follows NOT_CONTROLLER (several mirrord instances: only
the metadata writer changes mirrors; the others answer a mutation 41 and
name the writer as controller in Metadata), against fake admin servers:

  * a follower answering NOT_CONTROLLER and naming another server as the
    controller: the request is sent again there and its answer reported;
  * a server that answers NOT_CONTROLLER and names itself (no writer yet)
    every time: kafka-mirrors gives up after a bounded number of attempts
    and reports the error with the server's message;
  * read-only requests are never redirected.
"""

import os
import socket
import struct
import subprocess
import sys
import threading

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402


class Fake:
    """Answers ApiVersions as mirrord does, Metadata v1 naming `controller`
    (host:port, or itself) and every mirror mutation with `code` and
    message `msg`; counts requests by ApiKey."""

    def __init__(self, code, msg, controller=None):
        self.code, self.msg, self.controller = code, msg, controller
        self.counts = {}
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(8)
        self.port = self.s.getsockname()[1]
        threading.Thread(target=self.run, daemon=True).start()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def run(self):
        while True:
            c, _ = self.s.accept()
            threading.Thread(target=self.conn, args=(c,), daemon=True).start()

    def conn(self, c):
        try:
            while True:
                hdr = c.recv(4)
                if len(hdr) < 4:
                    return
                n, = struct.unpack(">i", hdr)
                b = b""
                while len(b) < n:
                    chunk = c.recv(n - len(b))
                    if not chunk:
                        return
                    b += chunk
                key, ver, corr = struct.unpack(">hhi", b[:8])
                self.counts[key] = self.counts.get(key, 0) + 1
                if key == 18:
                    # ApiVersions v0: Metadata and the mirror RPCs, as
                    # mirrord lists them.
                    keys = [(3, 0, 12), (18, 0, 3)] + [
                        (k, 0, 0) for k in (94, 95, 96, 98, 99, 102, 103,
                                            104, 105)]
                    body = struct.pack(">ihi", corr, 0, len(keys)) + b"".join(
                        struct.pack(">hhh", *k) for k in keys)
                elif key == 3:
                    host, port = (self.controller or self.addr).rsplit(":", 1)
                    hb = host.encode()
                    body = (struct.pack(">i", corr) + struct.pack(">i", 1) +
                            struct.pack(">ih", 7, len(hb)) + hb +
                            struct.pack(">ih", int(port), -1) +
                            struct.pack(">i", 7) + struct.pack(">i", 0))
                else:
                    m = self.msg.encode()
                    body = (struct.pack(">i", corr) + b"\x00" +
                            struct.pack(">ih", 0, self.code) +
                            bytes([len(m) + 1]) + m + b"\x00")
                c.sendall(struct.pack(">i", len(body)) + body)
        finally:
            c.close()


def cli(server, *args):
    return subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                           "--bootstrap-server", server] + list(args),
                          capture_output=True, text=True, timeout=60)


def main():
    writer = Fake(0, "")
    follower = Fake(41, "instance b does not write the metadata log; the "
                    "writer is instance a at %s" % "x", writer.addr)
    r = cli(follower.addr, "--delete", "--mirror", "m1")
    h.check(r.returncode == 0 and "m1" in r.stdout,
            "delete through a follower: exit %d, %s %s"
            % (r.returncode, r.stdout, r.stderr))
    h.check(follower.counts.get(104) == 1 and follower.counts.get(3) == 1
            and writer.counts.get(104) == 1,
            "requests: follower %r writer %r" % (follower.counts,
                                                 writer.counts))
    print("ok: a mutation answered NOT_CONTROLLER went to the controller")

    lost = Fake(41, "instance b does not write the metadata log and no "
                "writer is known yet")
    r = cli(lost.addr, "--delete", "--mirror", "m1")
    h.check(r.returncode != 0 and "NOT_CONTROLLER" in r.stderr
            and "no writer is known yet" in r.stderr,
            "no controller: exit %d, %s" % (r.returncode, r.stderr))
    n = lost.counts.get(104, 0)
    h.check(2 <= n <= 10, "the DeleteMirror was sent %d times: not bounded "
            "or never retried" % n)
    print("ok: gave up after %d attempts: %s" % (n, r.stderr.strip()))

    ro = Fake(41, "never")
    r = cli(ro.addr, "--list")
    h.check(ro.counts.get(3, 0) == 0,
            "a read-only request asked for the controller: %r" % ro.counts)
    print("ok: --list is not redirected")


if __name__ == "__main__":
    h.run_main(main)
