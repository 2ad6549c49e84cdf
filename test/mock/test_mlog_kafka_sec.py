#!/usr/bin/env python3
"""The replicated metadata log over SASL_SSL (SCRAM-SHA-512 and TLS with
the test CA, host name checked) on real Kafka 4.4: the log's own
connections (kconn on its network thread, lib/metadata/mlog_kafka_net.c) log in with destination.client's settings, the
topic is created, a mirror survives a restart, and a wrong password is a
start-up failure that names the SASL refusal."""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import mirrordtest as mt  # noqa: E402

RUN = "%d" % (os.getpid() % 100000)
T = h.test_dir()


def daemon(dst, name, topic, password):
    cc = dst.client_config(user="bob", mechanism="SCRAM-SHA-512")
    return mt.Mirrord(
        destination=dst.bootstrap, name=name, start=False,
        storage_kafka={"secret_key_file": os.path.join(T, "secret.key"),
                       "topic": topic, "timeout_ms": 10000},
        destination_client={"security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-512",
                            "sasl.username": "bob", "sasl.password": password,
                            "ssl.ca.location": cc["ssl.ca.location"]})


def main():
    (dst,) = h.private_kafka(1, "sasl,ssl")
    rk = h.realkafka()
    topic = "mlogk-sec-" + RUN
    a = daemon(dst, "a", topic, rk.USERS["bob"])
    a.start()
    h.check("claimed topic %s" % topic in a.proc.output(),
            "no claim logged:\n" + a.proc.tail())
    # The source's security is beside the point here: the tier's own
    # PLAINTEXT listener.
    a.create("m1", {"bootstrap.servers": dst.admin_bootstrap})
    h.check(a.stop() == 0, "mirrord did not stop cleanly")
    a.start()
    names = a.cli_ok("--list").stdout.split()
    h.check("m1" in names, "m1 not back after a restart: %r" % names)
    a.stop()

    w = daemon(dst, "w", topic, "not-the-password")
    w.start(wait=False)
    h.check(w.proc.wait(60) == 1, "mirrord started with a wrong password")
    out = w.proc.output()
    # kconn's refusal: mechanism, user and Kafka's error code (58,
    # SASL_AUTHENTICATION_FAILED), and the broker's address.
    h.check('SASL/SCRAM-SHA-512 authentication as "bob" failed: SASL_AUTHENTICATION_FAILED'
            in out and dst.bootstrap.split(",")[0] in out,
            "the refusal is not named:\n" + w.proc.tail())
    h.check("not-the-password" not in out, "the password is in the log")
    print("ok")


h.run_main(main)
