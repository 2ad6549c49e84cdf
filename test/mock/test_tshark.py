#!/usr/bin/env python3
"""Wireshark's Kafka dissector agrees with our codec.

test/tools/kp_dump prints framed ApiVersions (v0-v3) and Metadata (v0-v12)
requests and responses built with the codec.  Each request/response pair
becomes one TCP conversation from an ephemeral port to 9092 in a pcap
written here byte by byte (tshark matches a response to the request with
the same correlation id in the same stream, so the request goes first).
tshark -V must decode every Kafka PDU without a "Malformed" mark, and the
api key, version and correlation id it shows must be the ones we encoded;
for ApiVersions responses the advertised ranges must match too.  Versions
newer than the installed dissector knows (Wireshark 4.0 stops at Metadata
v9) are reported and left out, but at least ApiVersions v0-v3 and Metadata
v0-v9 must be checked.

Exit 77 (skip) only when tshark is not installed.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

API_KEYS = {"ApiVersions": 18, "Metadata": 3}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def packet(src_port, dst_port, seq, ack, flags, payload, to_server):
    """Ethernet + IPv4 + TCP, 127.0.0.1 both ends, valid checksums."""
    ip_src = ip_dst = bytes([127, 0, 0, 1])
    tcp_len = 20
    tcp = struct.pack("!HHIIBBHHH", src_port, dst_port, seq, ack, tcp_len << 2, flags,
                      65535, 0, 0)
    pseudo = ip_src + ip_dst + struct.pack("!BBH", 0, 6, tcp_len + len(payload))
    csum = checksum(pseudo + tcp + payload)
    tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
    total = 20 + tcp_len + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, ip_src, ip_dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    mac_c, mac_s = b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02"
    eth = (mac_s + mac_c if to_server else mac_c + mac_s) + b"\x08\x00"
    return eth + ip + tcp + payload


def conversation(port, request, response):
    """Handshake, the request, its response, as client port -> 9092."""
    SYN, ACK, PSH = 0x02, 0x10, 0x08
    cseq, sseq = 1000, 5000
    pkts = [
        packet(port, 9092, cseq, 0, SYN, b"", True),
        packet(9092, port, sseq, cseq + 1, SYN | ACK, b"", False),
        packet(port, 9092, cseq + 1, sseq + 1, ACK, b"", True),
        packet(port, 9092, cseq + 1, sseq + 1, PSH | ACK, request, True),
        packet(9092, port, sseq + 1, cseq + 1 + len(request), PSH | ACK, response, False),
    ]
    return pkts


def write_pcap(path, packets):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # LINKTYPE_ETHERNET
        for i, p in enumerate(packets):
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(p), len(p)))
            f.write(p)


def main():
    tshark = shutil.which("tshark")
    if tshark is None:
        print("SKIP: tshark is not installed (apt-get install tshark)")
        sys.exit(77)
    builddir = os.environ.get("top_builddir", ".")
    dump = os.path.join(builddir, "test", "tools", "kp_dump")
    out = subprocess.run([dump], check=True, capture_output=True, text=True).stdout
    lines = [l.split() for l in out.splitlines() if l.strip()]
    if len(lines) != 2 * (4 + 13):
        fail("kp_dump printed %d messages, expected %d" % (len(lines), 2 * 17))

    packets, expect = [], []
    port = 40000
    for i in range(0, len(lines), 2):
        rq, rs = lines[i], lines[i + 1]
        if rq[2] != "request" or rs[2] != "response" or rq[3] != rs[3]:
            fail("kp_dump lines out of order: %r %r" % (rq[:4], rs[:4]))
        packets += conversation(port, bytes.fromhex(rq[4]), bytes.fromhex(rs[4]))
        expect.append((port, rq[0], int(rq[1]), int(rq[3])))
        port += 1

    with tempfile.TemporaryDirectory() as tmp:
        pcap = os.path.join(tmp, "kafka.pcap")
        write_pcap(pcap, packets)
        common = [tshark, "-n", "-r", pcap, "-d", "tcp.port==9092,kafka",
                  "-o", "tcp.check_checksum:TRUE"]
        verbose = subprocess.run(common + ["-V"], capture_output=True, text=True)
        if verbose.returncode != 0:
            fail("tshark -V exited %d: %s" % (verbose.returncode, verbose.stderr))
        # One block of -V output per frame; conversation i is frames 5i+1..5i+5.
        blocks = ("\n" + verbose.stdout).split("\nFrame ")[1:]
        if len(blocks) != len(packets):
            fail("tshark printed %d frames, the pcap has %d" % (len(blocks), len(packets)))
        checked = []
        for i, (port, api, version, corr) in enumerate(expect):
            text = "".join(blocks[5 * i:5 * i + 5])
            if "Unsupported %s version" % api in text:
                # This Wireshark's dissector stops below our version: say so,
                # and require below that every version was checked.
                print("note: this tshark does not dissect %s v%d" % (api, version))
                continue
            # "Unknown API key" is expected: the mirror keys in ApiVersions responses.
            for bad in ("Malformed", "Bad checksum", "[Expert Info (Error"):
                if bad in text:
                    where = text.index(bad)
                    fail("%s v%d: tshark reported %r:\n%s"
                         % (api, version, bad, text[max(0, where - 1500):where + 300]))
            checked.append((port, api, version, corr))
        versions = {}
        for _, api, version, _ in checked:
            versions.setdefault(api, []).append(version)
        if versions.get("ApiVersions") != [0, 1, 2, 3]:
            fail("ApiVersions versions checked: %r" % versions.get("ApiVersions"))
        metadata = versions.get("Metadata", [])
        if metadata != list(range(len(metadata))) or len(metadata) < 10:
            fail("Metadata versions checked: %r (Wireshark 4.0 dissects v0-9)" % metadata)
        expect = checked

        fields = subprocess.run(
            common + ["-Y", "kafka", "-T", "fields", "-E", "separator=|",
                      "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "kafka.request_key",
                      "-e", "kafka.response_key", "-e", "kafka.request.version",
                      "-e", "kafka.response.version", "-e", "kafka.correlation_id",
                      "-e", "kafka.request_frame"],
            capture_output=True, text=True, check=True).stdout.splitlines()
        if len(fields) != 2 * len(lines) // 2:
            fail("tshark shows %d Kafka PDUs, expected %d:\n%s"
                 % (len(fields), len(lines), "\n".join(fields)))
        seen = {}
        for row in fields:
            src, dst, rqkey, rskey, rqv, rsv, corr, reqframe = row.split("|")
            client = int(src) if dst == "9092" else int(dst)
            direction = "request" if dst == "9092" else "response"
            if direction == "response" and not reqframe:
                fail("tshark did not match the response on port %d to its request" % client)
            seen[(client, direction)] = (rqkey or rskey, rqv or rsv, corr)
        for port, api, version, corr in expect:
            want = (str(API_KEYS[api]), str(version), str(corr))
            for direction in ("request", "response"):
                got = seen.get((port, direction))
                if got != want:
                    fail("%s v%d %s: tshark shows key/version/correlation %r, expected %r"
                         % (api, version, direction, got, want))

        # The ApiVersions responses list the ranges we encoded.
        ranges = subprocess.run(
            common + ["-Y", "kafka.api_versions.api_key", "-T", "fields", "-E",
                      "separator=|", "-e", "kafka.api_versions.api_key",
                      "-e", "kafka.api_versions.min_version",
                      "-e", "kafka.api_versions.max_version"],
            capture_output=True, text=True, check=True).stdout.splitlines()
        if len(ranges) != 4:
            fail("expected 4 ApiVersions responses with ranges, tshark shows %d" % len(ranges))
        for row in ranges:
            keys, mins, maxs = (c.split(",") for c in row.split("|"))
            table = {int(k): (int(a), int(b)) for k, a, b in zip(keys, mins, maxs)}
            if table.get(18) != (0, 3) or table.get(3) != (0, 12) or table.get(94) != (0, 0):
                fail("ApiVersions ranges as decoded by tshark: %r" % table)
        # The v3 request's compact strings come out whole.
        sw = subprocess.run(
            common + ["-Y", "kafka.client_software_name", "-T", "fields", "-E", "separator=|",
                      "-e", "kafka.client_software_name", "-e", "kafka.client_software_version"],
            capture_output=True, text=True, check=True).stdout.split()
        if sw != ["mirrord-kp-dump|0.1.0"]:
            fail("ApiVersions v3 client software as decoded by tshark: %r" % sw)
        # Metadata responses name the broker and topic we put in.
        meta = subprocess.run(
            common + ["-Y", "kafka.response.version && kafka.topic_name && kafka.response.version <= %d"
                      % max(metadata), "-T", "fields", "-e", "kafka.topic_name"],
            capture_output=True, text=True, check=True).stdout.splitlines()
        if not meta or any("orders" not in m for m in meta):
            fail("Metadata topic names as decoded by tshark: %r" % meta)
    print("ok: tshark decoded %d Kafka conversations without errors (Metadata v0-%d)"
          % (len(expect), max(metadata)))


if __name__ == "__main__":
    main()
