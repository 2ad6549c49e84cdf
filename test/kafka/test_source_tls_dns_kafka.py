#!/usr/bin/env python3
"""A source that cannot be reached by its name, or whose certificate does
not verify, is reported STALLED with the cause: real Apache Kafka, a
private single-node source with an SSL client listener (the test restarts
it with bad settings) and the shared destination; mirrord with
pipeline.request_timeout_ms 5000, the mirror polling with
mirror.fetch.wait.max.ms 100 (stall bound B 5.1 s), reading the source
over TLS with the test CA.

A topic of two partitions is copied and caught up; records keep being
written to the source through its PLAINTEXT admin listener all along.
Then, one after the other, each cured before the next:

  1. DNS: the broker restarted advertising its client listener as
     mirrord-nx.invalid (RFC 2606: never resolves), so a Metadata answer
     through the bootstrap address works but the partitions' leader
     cannot be resolved; cured by a restart advertising 127.0.0.1;
  2. TLS: the broker restarted with a certificate signed by another CA,
     so mirrord's handshake fails certificate verification; cured by a
     restart with its own certificate.

Within 2 x B + 5 s of the broker's return with the fault, kafka-mirrors
--describe shows both partitions STALLED with a REASON naming the
source's bootstrap host:port, the cause (cannot resolve; TLS/certificate)
and since when (the trouble began when the broker went down for the
restart); --describe --json, /metrics (mirrord_mirror_source_up 0, source
errors by cause dns and tls, stalled partitions, growing lag seconds and
seconds since success), GET /mirrors/<name>/ready 503, /mirrors and
/readyz ("sources readable") say the same, and no sourceOffset is past
the source's real end.  Once cured the copy catches up and the
destination holds the source's records at the same offsets in the same
batches, source_up 1.
"""

import os
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
M = "std"
T = "std-%s" % RUN
NPART = 2
NX = "mirrord-nx.invalid"


def main():
    os.environ.setdefault("MIRRORD_KAFKA_CACHE",
                          os.path.join(h.SRC, "test", "kafka", "cache"))
    rk = h.realkafka()
    src, = h.private_kafka(1, "ssl")
    dst = h.real_kafka(2)[1]
    plain = src.admin_bootstrap        # the test's own clients
    src.create_topic(T, partitions=NPART)
    d = mt.Mirrord(destination=dst.bootstrap, extra_yaml=mt.STALL_YAML +
                   "mirrors:\n  allowed_file_dirs: [\"%s/\"]\n"
                   % os.path.dirname(src.tls["ca"]))
    d.create(M, mt.stall_mirror_configs(src.bootstrap, **{
        "security.protocol": "SSL", "ssl.ca.location": src.tls["ca"]}))
    for p in range(NPART):
        mt.produce_tagged(plain, T, p, 300, "before-%d" % p, keyed=True)
    d.cli_ok("--add", "--mirror", M, "--topic", T)
    mt.wait_caught_up(d, M, 120, "%s caught up" % T, count=NPART)
    parts = [(T, p) for p in range(NPART)]
    layout = {T: NPART}

    # 1. The leader's advertised name does not resolve.
    w = mt.LayoutWriter(plain, {T: range(NPART)})
    w.start()
    f = mt.SourceFault(d, M, src.bootstrap, parts,
                       "DNS (the leader advertised as %s)" % NX,
                       r"resolve", "dns")
    f.begin()
    src.stop()
    src.start_again({"advertised.listeners":
                     "CLIENT://%s:{port},ADMIN://127.0.0.1:{admin_port}" % NX})
    back = time.monotonic()
    f.wait_stalled(start=back)
    f.check_stalled(real_ends={(T, p): e for p, e in
                               enumerate(mt.end_offsets(plain, T, NPART))})
    src.stop()
    src.start_again({"advertised.listeners": None})
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)

    # 2. A certificate from another CA.
    w = mt.LayoutWriter(plain, {T: range(NPART)})
    w.start()
    other = rk.make_test_ca(os.path.join(h.test_dir(), "other-ca"))
    key = "listener.name.client.ssl.keystore.location"
    f = mt.SourceFault(d, M, src.bootstrap, parts,
                       "TLS (a certificate of another CA)",
                       r"TLS|certificate", "tls")
    f.begin()
    src.stop()
    src.start_again({key: other["broker_keystore"]})
    back = time.monotonic()
    f.wait_stalled(start=back)
    f.check_stalled(real_ends={(T, p): e for p, e in
                               enumerate(mt.end_offsets(plain, T, NPART))})
    src.stop()
    src.start_again({key: None})
    w.stop()
    f.check_recovered(plain, dst.bootstrap, layout)
    print("ok")


h.run_main(main)
