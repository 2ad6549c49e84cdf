#!/usr/bin/env python3
"""Rotating a mirror's source password without failover, on real Apache
Kafka 4.4.0: a SASL source (SCRAM-SHA-512 user bob, which mirrord's own
client logs in with) and a destination.

  * records flow from the source while bob's password is rotated on the
    broker (kafka-configs' ConfigCommand); mirrord is then altered with
    the new password (kafka-mirrors --alter --mirror-config FILE), without
    a restart: the source client is made again with it (logged) and
    copying goes on from every partition's position;
  * a non-connection property (mirror.fetch.wait.max.ms) is altered: the
    source client is kept (logged), --describe --config shows it, and it
    and the new password survive a restart (copying goes on after it,
    which needs the new password);
  * at the end every source record is on the destination once, at the same
    offset (keys, values, headers, timestamps), and the secret is nowhere
    in clear in mirrord's files or output.
"""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

NPART = 2
NEWPW = "bob-rotated-%d" % os.getpid()


def main():
    src, = h.private_kafka(1, "sasl")
    _, dst = h.real_kafka(2)
    topic = "alter-%d" % os.getpid()
    src.create_topic(topic, partitions=NPART)
    d = mt.Mirrord(destination=dst.bootstrap)
    d.create("rot", {"bootstrap.servers": src.bootstrap,
                     "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "bob",
                     "sasl.password": h.realkafka().USERS["bob"],
                     "mirror.fetch.wait.max.ms": "100",
                     "mirror.metadata.refresh.interval.ms": "1000"})
    d.cli_ok("--add", "--mirror", "rot", "--topic", topic)

    def produce(tag, n=300):
        for p in range(NPART):
            mt.produce_tagged(src.admin_bootstrap, topic, p, n, tag)

    def caught_up(what):
        # The source's ends as they are now: describe's lag is as of the
        # source's last answer, which may predate records just written.
        want = mt.end_offsets(src.admin_bootstrap, topic, NPART)
        h.wait_for(lambda: mt.end_offsets(dst.bootstrap, topic, NPART) ==
                   want, 180, "destination ends equal the source's %r (%s)"
                   % (want, what))
        mt.wait_caught_up(d, "rot", 180, what, count=NPART,
                          fail_on_failed=True)

    produce("a")
    caught_up("before the rotation")

    # The broker takes the new password; mirrord still has the old one.
    r = src.java_tool("org.apache.kafka.tools.ConfigCommand",
                      ["--bootstrap-server", src.admin_bootstrap, "--alter",
                       "--add-config",
                       "SCRAM-SHA-512=[iterations=4096,password=%s]" % NEWPW,
                       "--entity-type", "users", "--entity-name", "bob"])
    eq(r.returncode, 0, "ConfigCommand rotating bob's password: %s%s"
       % (r.stdout, r.stderr))
    produce("b")

    # mirrord takes it in place.
    path = os.path.join(d.dir, "rotate.properties")
    with open(path, "w") as f:
        f.write("sasl.password=%s\n" % NEWPW)
    r = d.cli_ok("--alter", "--mirror", "rot", "--mirror-config", path)
    eq(r.stdout, "Altered the configs of mirror rot: 1 set, 0 deleted\n",
       "--alter output")
    h.wait_for(lambda: "mirror rot: the source client is made again from "
               "the new configs" in d.log(), 30,
               "mirrord to make the source client again")
    produce("c")
    caught_up("after the password was altered")
    eq(d.starts, 1, "mirrord was not restarted")
    h.check(d.proc.alive(), "mirrord is running")

    # A property read at each use: the source client stays.
    d.cli_ok("--alter", "--mirror", "rot", "--add-config",
             "mirror.fetch.wait.max.ms=150")
    h.wait_for(lambda: "mirror rot: new configs in force; the source client "
               "is unchanged" in d.log(), 30,
               "mirrord to take a mirror.* option without a new client")
    out = d.cli_ok("--describe", "--mirror", "rot", "--config").stdout
    h.check("  mirror.fetch.wait.max.ms=150\n" in out and
            "  sasl.password=(sensitive)\n" in out,
            "--describe --config after the alterations:\n" + out)
    produce("d")
    caught_up("after mirror.fetch.wait.max.ms was altered")

    # Both survive a restart (and the new password still logs in).
    d.stop()
    d.start()
    eq(d.cli_ok("--describe", "--mirror", "rot", "--config").stdout, out,
       "--describe --config after a restart")
    produce("e")
    caught_up("after the restart")

    want = {(topic, p): e for p, e in
            enumerate(mt.end_offsets(src.admin_bootstrap, topic, NPART))}
    eq(sum(want.values()), 5 * 300 * NPART, "records produced")
    mt.check_same_records(src.admin_bootstrap, dst.bootstrap, want,
                          "alter-check-%d" % os.getpid())
    eq(mt.files_holding(d.data_dir, NEWPW), [],
       "the new password is sealed in the metadata log")
    h.check(NEWPW not in d.log(), "the new password in mirrord's log")
    d.stop()


h.run_main(main)
