#!/usr/bin/env python3
"""kafka-mirrors pointed at something that is not mirrord's admin listener
says what it found, with exit status 3, instead of blaming mirrord:

  * a TCP listener that closes at once: closed without answering
    ApiVersions, not mirrord's admin listener (or one that needs TLS);
  * one that answers HTTP: bytes that are not a Kafka response, shown;
  * one that answers with a TLS alert: its listener needs TLS;
  * one that accepts and never answers: no ApiVersions answer within
    request.timeout.ms;
  * a Kafka-protocol server whose ApiVersions lists no mirror RPC, or
    lists Produce as a Kafka broker's does (Kafka 4.4 also lists an ApiKey
    94 of its own, CreateMirror's here): `HOST:PORT is a Kafka broker (or
    not mirrord)`, and the request of the action is never sent;
  * one that lists the mirror RPCs but not the version kafka-mirrors sends:
    named as a mirrord of another version.

test_cli_wrong_peer_kafka.py points it at a real Kafka broker.
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
from harness import eq  # noqa: E402

CLI = h.build_path("daemon", "kafka-mirrors")
TLS_HINT = (", or one that needs TLS (security.protocol=SSL or SASL_SSL in "
            "--command-config)")


class Peer:
    """A listener on 127.0.0.1 that runs answer(conn) per connection and
    records the ApiKeys of the Kafka requests it read (read_request)."""

    def __init__(self, answer):
        self.answer = answer
        self.keys = []
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(8)
        self.addr = "127.0.0.1:%d" % self.s.getsockname()[1]
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            c, _ = self.s.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            self.answer(self, c)
        except OSError:
            pass
        finally:
            c.close()

    def read_request(self, c):
        """(api_key, version, correlation id) of the next request, or None
        once the client closed."""
        hdr = b""
        while len(hdr) < 4:
            chunk = c.recv(4 - len(hdr))
            if not chunk:
                return None
            hdr += chunk
        n, = struct.unpack(">i", hdr)
        b = b""
        while len(b) < n:
            chunk = c.recv(n - len(b))
            if not chunk:
                return None
            b += chunk
        key, ver, corr = struct.unpack(">hhi", b[:8])
        self.keys.append(key)
        return key, ver, corr


def api_versions_v0(corr, keys):
    """An ApiVersions v0 answer listing keys [(key, min, max)]."""
    body = struct.pack(">ihi", corr, 0, len(keys))
    for k in keys:
        body += struct.pack(">hhh", *k)
    return struct.pack(">i", len(body)) + body


# What a Kafka 4.4 broker lists, in short: Produce and Fetch, and an
# ApiKey 94 of its own, which is CreateMirror's here.
BROKER_KEYS = [(0, 3, 12), (1, 4, 17), (3, 0, 13), (18, 0, 4), (17, 0, 1),
               (36, 0, 2), (60, 0, 1), (68, 0, 0), (94, 0, 0)]
MIRROR_KEYS = [(k, 0, 0) for k in (94, 95, 96, 98, 99, 102, 103, 104, 105)]


def closes(peer, c):
    pass


def http(peer, c):
    c.recv(4096)
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def tls_alert(peer, c):
    c.recv(4096)
    c.sendall(b"\x15\x03\x03\x00\x02\x02\x46")


def silent(peer, c):
    c.recv(4096)
    c.recv(4096)   # until the client gives up


def broker(peer, c):
    while True:
        req = peer.read_request(c)
        if req is None:
            return
        key, _ver, corr = req
        if key != 18:
            return   # a broker closes on an ApiKey it does not know
        c.sendall(api_versions_v0(corr, BROKER_KEYS))


def other_version(peer, c):
    req = peer.read_request(c)
    if req is not None:
        keys = [(k, 1, 2) if k == 98 else (k, lo, hi)
                for k, lo, hi in MIRROR_KEYS]
        c.sendall(api_versions_v0(req[2], [(3, 0, 12), (18, 0, 3)] + keys))
        peer.read_request(c)


def run(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True,
                          timeout=60)


def conn_error(r, message, what):
    eq((r.returncode, r.stdout), (3, ""), "%s: exit status and stdout "
       "(stderr %r)" % (what, r.stderr))
    eq(r.stderr, "kafka-mirrors: %s\n" % message, what + ": stderr")


def main():
    p = Peer(closes)
    conn_error(run("--bootstrap-server", p.addr, "--list"),
               "%s closed the connection without answering ApiVersions: not "
               "mirrord's admin listener (server.listen)%s"
               % (p.addr, TLS_HINT), "a listener that closes at once")
    print("ok: a listener that closes at once")

    p = Peer(http)
    conn_error(run("--bootstrap-server", p.addr, "--describe"),
               '%s answered ApiVersions with bytes that are not a Kafka '
               'response (48 54 54 50 "HTTP"): not mirrord\'s admin listener '
               '(server.listen)' % p.addr, "an HTTP server")
    print("ok: an HTTP server")

    p = Peer(tls_alert)
    conn_error(run("--bootstrap-server", p.addr, "--list"),
               "%s answered ApiVersions with TLS (15 03 03 00): its listener "
               "needs TLS; set security.protocol=SSL or SASL_SSL in "
               "--command-config" % p.addr, "a TLS listener")
    print("ok: a TLS listener")

    p = Peer(silent)
    cc = os.path.join(h.test_dir(), "timeout.properties")
    with open(cc, "w") as f:
        f.write("request.timeout.ms=1000\n")
    conn_error(run("--bootstrap-server", p.addr, "--command-config", cc,
                   "--list"),
               "%s did not answer ApiVersions within 1000 ms "
               "(request.timeout.ms): a mirrord that is stopped or "
               "overloaded, or not mirrord's admin listener "
               "(server.listen)%s" % (p.addr, TLS_HINT),
               "a listener that never answers")
    print("ok: a listener that never answers")

    p = Peer(broker)
    props = os.path.join(h.test_dir(), "source.properties")
    with open(props, "w") as f:
        f.write("bootstrap.servers=127.0.0.1:1\n")
    for action in (["--list"], ["--describe"], ["--delete", "--mirror", "m"],
                   ["--add", "--mirror", "m", "--topic", "t"],
                   ["--create", "--mirror", "m", "--mirror-config", props]):
        conn_error(run("--bootstrap-server", p.addr, *action),
                   "%s is a Kafka broker (or not mirrord): point "
                   "--bootstrap-server at mirrord's server.listen" % p.addr,
                   "a Kafka-protocol server without mirror RPCs, %s"
                   % action[0])
    eq(sorted(set(p.keys)), [18], "ApiKeys sent to the broker-like peer")
    print("ok: a server without the mirror RPCs is named a Kafka broker; "
          "only ApiVersions was sent")

    p = Peer(other_version)
    conn_error(run("--bootstrap-server", p.addr, "--list"),
               "%s does not serve ListMirrors v0, which --list sends: a "
               "mirrord of another version than this kafka-mirrors (%s)"
               % (p.addr, run("--version").stdout.split()[1]),
               "a server with ListMirrors v1-2 only")
    print("ok: a mirrord of another version")


if __name__ == "__main__":
    h.run_main(main)
