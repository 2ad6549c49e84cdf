#!/usr/bin/env python3
"""kafka-mirrors pointed at a real Apache Kafka broker instead of mirrord's
admin listener: every action says `HOST:PORT is a Kafka broker (or not
mirrord): point --bootstrap-server at mirrord's server.listen` with exit
status 3, and sends the broker nothing but ApiVersions (it logs no
`Unexpected api key`; --create's ApiKey 94 is one Kafka 4.4 lists as its
own, which must not reach it either).  The same kafka-mirrors then works against a real
mirrord beside that broker.
"""

import os
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

CLI = h.build_path("daemon", "kafka-mirrors")


def run(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True,
                          timeout=60)


def broker_log(k):
    """The broker's log so far, or "" when it has none yet."""
    try:
        with open(k.log_path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def main():
    k = h.real_kafka(2)[0]
    addr = k.bootstrap.split(",")[0]
    before = broker_log(k).count("Unexpected api key")
    # --create sends CreateMirror, ApiKey 94, which Kafka 4.4 lists as one
    # of its own.
    props = os.path.join(h.test_dir(), "source.properties")
    with open(props, "w") as f:
        f.write("bootstrap.servers=%s\n" % addr)
    for action in (["--list"], ["--describe", "--json"],
                   ["--add", "--mirror", "m", "--topic", "t"],
                   ["--create", "--mirror", "m", "--mirror-config",
                    props]):
        r = run("--bootstrap-server", addr, *action)
        eq((r.returncode, r.stdout), (3, ""), "%s against a Kafka broker: "
           "exit status and stdout (stderr %r)" % (action[0], r.stderr))
        eq(r.stderr, "kafka-mirrors: %s is a Kafka broker (or not mirrord): "
           "point --bootstrap-server at mirrord's server.listen\n" % addr,
           "%s against a Kafka broker: stderr" % action[0])
    eq(broker_log(k).count("Unexpected api key"), before,
       "the broker logged no unknown ApiKey")
    print("ok: a Kafka broker at %s is named as one; nothing it does not "
          "know was sent" % addr)

    d = mt.Mirrord(destination=k.bootstrap)
    r = d.cli("--list")
    eq((r.returncode, r.stdout, r.stderr), (0, "No mirrors found\n", ""),
       "--list against mirrord beside that broker")
    print("ok: mirrord beside it answers")


if __name__ == "__main__":
    h.run_main(main)
