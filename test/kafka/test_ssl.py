#!/usr/bin/env python3
"""SSL variants with a test CA made by openssl: a client trusting the CA
produces and consumes; one that does not trust it is refused; under mTLS a
client without a certificate is refused and one with it gets through."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

if not shutil.which("kcat"):
    h.skip("real Kafka tier: kcat not found (install kcat)")
if not shutil.which("openssl"):
    h.skip("real Kafka tier: openssl not found (install openssl)")


def without(args, prop):
    out = []
    for a in args:
        if a.startswith(prop + "="):
            out.pop()  # its -X
        else:
            out.append(a)
    return out


for c in h.private_kafka(2, ["ssl", "mtls"]):
    security = c.security
    h.check(c.protocol == "SSL", "%s: protocol %s" % (security, c.protocol))
    topic = "tls-" + security.replace(",", "-")
    c.create_topic(topic)
    lines = "".join("%s-%d\n" % (security, i) for i in range(5))
    p = h.kcat(["-P", "-t", topic] + c.kcat_args(), input=lines)
    h.check(p.returncode == 0, "%s produce: %s" % (security, p.stderr))
    p = h.kcat(["-C", "-t", topic, "-e", "-q"] + c.kcat_args())
    h.check(p.returncode == 0 and p.stdout == lines,
            "%s consume: %r %s" % (security, p.stdout, p.stderr))
    # Not trusting the test CA (system store only): refused.  (kcat -P gives
    # up as soon as every broker connection failed; -L would wait it out.)
    p = h.kcat(["-P", "-t", topic] + without(c.kcat_args(), "ssl.ca.location"),
               input="x\n")
    h.check(p.returncode != 0 and "certificate verify failed" in p.stderr,
            "%s: untrusted broker accepted: rc %d %s"
            % (security, p.returncode, p.stderr))
    p = h.kcat(["-P", "-t", topic] + c.kcat_args(client_cert=False),
               input="nocert\n")
    if "mtls" in c.feats:
        h.check(p.returncode != 0, "mtls: client without certificate accepted")
    else:
        h.check(p.returncode == 0, "ssl: client without certificate refused: %s"
                % p.stderr)
print("PASS: SSL and mTLS with an openssl-made CA")
