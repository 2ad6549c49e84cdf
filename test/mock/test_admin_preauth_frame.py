#!/usr/bin/env python3
"""On a SASL admin listener, a client that has not logged in is held to
Kafka's sasl.server.max.receive.size (524288 bytes), against the real
mirrord with raw sockets:

  * a frame announced at 600 KiB before login is refused at its size
    prefix: the connection is closed at once (the rest of the frame never
    awaited), one log line names the peer and the size, the refusal is
    counted (mirrord_admin_rejected_requests_total{reason=
    "oversized_unauthenticated"}), and mirrord_admin_buffered_bytes is
    back to 0: nothing of it stays buffered;
  * the same before the SaslHandshake and after it (before the
    SaslAuthenticate that completes the login);
  * a frame of at most 512 KiB before login is not refused for its size;
  * after login the listener's normal limits apply: a 600 KiB
    DescribeMirrors, sent in two halves, is buffered (the gauge shows the
    first half while the second is awaited) and answered.
"""

import os
import re
import socket
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402
from mockcluster import MockCluster  # noqa: E402

LIMIT = 524288
BIG = 600 * 1024
PW = "alice-Pw-5d1e0"
mc = None


def rejected(d):
    return mt.metric_value(d, "mirrord_admin_rejected_requests_total",
                           reason="oversized_unauthenticated")


def buffered(d):
    return mt.metric_value(d, "mirrord_admin_buffered_bytes")


def sasl_handshake(s, corr):
    """SaslHandshake v1 for PLAIN; fails unless accepted."""
    s.sendall(mt.frame(17, 1, corr, struct.pack(">h", 5) + b"PLAIN"))
    resp = mt.recv_frame(s)
    eq(struct.unpack(">ih", resp[:6]), (corr, 0), "SaslHandshake PLAIN")


def sasl_authenticate(s, corr):
    """SaslAuthenticate v0 with alice's PLAIN token; fails unless logged in."""
    tok = b"\0alice\0" + PW.encode()
    s.sendall(mt.frame(36, 0, corr, struct.pack(">i", len(tok)) + tok))
    resp = mt.recv_frame(s)
    eq(struct.unpack(">ih", resp[:6]), (corr, 0), "SaslAuthenticate")


def oversized_head(corr):
    """The first 64 KiB of a 600 KiB ApiVersions v0 frame (a size prefix,
    a header, then padding)."""
    hdr = struct.pack(">hhih", 18, 0, corr, 1) + b"t"
    head = struct.pack(">i", BIG) + hdr
    return head + b"\0" * (65536 - len(head))


def refused(d, s, what, before):
    """s, which has just sent the head of a 600 KiB frame, is closed at
    once, counted and logged once; nothing stays buffered."""
    port = s.getsockname()[1]
    h.check(mt.closed_by_peer(s, 10), "%s: the connection is not closed"
            % what)
    h.wait_for(lambda: rejected(d) == before + 1, 10,
               "%s: counted as oversized_unauthenticated" % what)
    lines = [ln for ln in d.log().splitlines()
             if ":%d: " % port in ln and "oversized_unauthenticated" in ln]
    eq(len(lines), 1, "%s: log lines naming the peer" % what)
    h.check("frame of %d bytes before SASL authentication completed "
            "exceeds %d bytes" % (BIG, LIMIT) in lines[0],
            "%s: the log line names the size: %r" % (what, lines[0]))
    h.wait_for(lambda: buffered(d) == 0, 10, "%s: nothing buffered" % what)
    print("ok: %s: refused at the size prefix: %s" % (what, lines[0]),
          flush=True)


def describe_frame(corr, names):
    """DescribeMirrors v0 naming `names` (flexible)."""
    body = mt.uvarint(len(names) + 1) + b"".join(mt.cstr(n) for n in names) \
        + b"\x00"
    return mt.frame(99, 0, corr, body, flexible=True)


def main():
    global mc
    mc = MockCluster(clusters=1, brokers=1,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    creds = os.path.join(h.test_dir(), "admin.creds")
    mt.add_user(creds, "alice", PW)
    d = mt.Mirrord(destination=mc.bootstrap(0), start=False)
    with open(d.config_path) as f:
        cfg = f.read()
    cfg = cfg.replace("server:\n", "server:\n  security_protocol: "
                      "SASL_PLAINTEXT\n  sasl:\n    enabled_mechanisms: "
                      "\"PLAIN,SCRAM-SHA-512\"\n    credentials_file: "
                      "\"%s\"\n" % creds, 1)
    with open(d.config_path, "w") as f:
        f.write(cfg)
    d.start_listening()
    eq(rejected(d), 0, "oversized_unauthenticated at start")
    eq(buffered(d), 0, "mirrord_admin_buffered_bytes at start")

    # Before anything else.
    s = mt.connect(d.bootstrap)
    s.sendall(oversized_head(1))
    refused(d, s, "600 KiB frame first", 0)
    s.close()

    # After the SaslHandshake, before the login completes.
    s = mt.connect(d.bootstrap)
    sasl_handshake(s, 1)
    s.sendall(oversized_head(2))
    refused(d, s, "600 KiB frame after SaslHandshake", 1)
    s.close()

    # The whole frame at once: the daemon closes while it is being sent.
    s = mt.connect(d.bootstrap)
    try:
        s.sendall(oversized_head(1) + b"\0" * (BIG + 4 - 65536))
    except OSError:
        pass
    refused(d, s, "600 KiB frame sent whole", 2)
    s.close()

    # At most 512 KiB before login: not refused for its size (ApiVersions
    # with trailing bytes; whatever the dispatcher makes of them).
    s = mt.connect(d.bootstrap)
    hdr = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    s.sendall(struct.pack(">i", LIMIT) + hdr + b"\0" * (LIMIT - len(hdr)))
    try:
        mt.recv_frame(s)
    except (OSError, EOFError):
        pass
    s.close()
    eq(rejected(d), 3, "a 512 KiB frame before login is not refused for "
       "its size")
    print("ok: a frame of 512 KiB before login is not refused for its size")

    # Logged in: 600 KiB buffered and answered.
    s = mt.connect(d.bootstrap)
    sasl_handshake(s, 1)
    sasl_authenticate(s, 2)
    frame = describe_frame(3, ["nosuch"] * (BIG // 7 + 1))
    h.check(len(frame) > BIG, "the frame is %d bytes" % len(frame))
    half = len(frame) // 2
    s.sendall(frame[:half])
    h.wait_for(lambda: buffered(d) >= half, 10,
               "the first half of a 600 KiB frame buffered after login")
    s.sendall(frame[half:])
    resp = mt.recv_frame(s)
    corr = struct.unpack(">i", resp[:4])[0]
    err = struct.unpack(">h", resp[9:11])[0]
    eq((corr, err), (3, 0), "DescribeMirrors of %d bytes after login: "
       "correlation id, ErrorCode" % len(frame))
    s.close()
    eq(rejected(d), 3, "nothing refused after login")
    h.check(re.search(r"authenticated as User:alice \(SASL PLAIN\)",
                      d.log()), "the login is logged")
    print("ok: after login a %d-byte request is buffered and answered"
          % len(frame))
    d.stop()


if __name__ == "__main__":
    h.run_main(main, lambda: mc is not None and mc.kill())
