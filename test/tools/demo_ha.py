#!/usr/bin/env python3
"""make demo-ha: three mirrord instances as one, on real Kafka 4.4.

Starts a 3-broker destination cluster and a 1-broker source (private real
Kafka clusters under build/test/), three mirrord instances a, b, c with
cluster.enabled (each beside one destination broker), creates a mirror
through a follower (kafka-mirrors follows NOT_CONTROLLER to the writer),
puts load on a 6-partition topic, kills the instance that writes the
metadata log mid-stream (kill -9), shows a new writer taking over and
mirroring continuing, then stops the load and proves record by record
(offset, key, value, headers, timestamp) that nothing was lost or
duplicated.  Everything runs on 127.0.0.1 and stops at the end.
"""

import os
import subprocess
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import test_ha_kafka as ha  # noqa: E402


def say(msg):
    print("\n== %s" % msg, flush=True)


def show(cmd):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        h.fail("%s exited %d: %s" % (cmd[0], r.returncode, r.stderr))


def roles(ds):
    return ", ".join("%s %s" % (d.name, ha.role(d) if d.proc.alive()
                                else "(killed)") for d in ds)


def main():
    say("starting a 3-broker destination and a 1-broker source (Kafka 4.4)")
    dst, = h.private_kafka(1, brokers=3)
    src, = h.private_kafka(1)
    print("source:      %s\ndestination: %s (brokers 1, 2, 3)"
          % (src.bootstrap, dst.bootstrap))
    src.create_topic(ha.TOPIC, partitions=ha.PARTS)

    say("starting three mirrord instances, one beside each destination broker")
    ds = [ha.instance(dst.bootstrap, n, b) for n, b in
          (("a", 1), ("b", 2), ("c", 3))]
    for d in ds:
        d.start()
        print("instance %s: admin %s, metrics http://127.0.0.1:%d/metrics "
              "(log: %s)" % (d.name, d.bootstrap, d.metrics_port,
                             d.proc.log_path))
    w = ha.one_writer(ds, "three instances")
    print("roles: %s" % roles(ds))

    say("creating a mirror through a follower: it answers NOT_CONTROLLER, "
        "kafka-mirrors follows the writer")
    f = [d for d in ds if d is not w][0]
    cli = [h.build_path("daemon", "kafka-mirrors"), "--bootstrap-server",
           f.bootstrap]
    props = os.path.join(h.test_dir(), "m1.properties")
    with open(props, "w") as fp:
        fp.write("bootstrap.servers=%s\nmirror.metadata.refresh.interval.ms="
                 "1000\nmirror.fetch.wait.max.ms=200\n" % src.bootstrap)
    show(cli + ["--create", "--mirror", "m1", "--mirror-config", props])
    show(cli + ["--add", "--mirror", "m1", "--topic", ha.TOPIC])
    brokers, controller = ha.metadata(f)
    print("Metadata on %s: brokers %s, controller %d (%s)"
          % (f.name, brokers, controller, brokers.get(controller)))

    say("load: an idempotent producer on %d partitions" % ha.PARTS)
    load = ha.Load(src.bootstrap)
    h.wait_for(lambda: ha.hwms(dst.bootstrap) is not None
               and sum(ha.hwms(dst.bootstrap)) > 1000, 120,
               "records mirrored")
    print("destination ends: %s" % ha.hwms(dst.bootstrap))
    show(cli + ["--describe", "--mirror", "m1"])

    say("kill -9 of the writer %s mid-stream" % w.name)
    w.kill9()
    t0 = time.monotonic()
    live = [d for d in ds if d is not w]
    w2 = ha.one_writer(live, "after the kill", timeout=90)
    print("new writer %s after %.1f s; roles: %s"
          % (w2.name, time.monotonic() - t0, roles(ds)))
    n0 = sum(ha.hwms(dst.bootstrap))
    h.wait_for(lambda: sum(ha.hwms(dst.bootstrap)) > n0 + 500, 120,
               "mirroring continuing without %s" % w.name)
    print("mirroring continues: destination ends %s" % ha.hwms(dst.bootstrap))
    say("%s started again: it rejoins as a follower" % w.name)
    w.start()
    ha.one_writer(ds, "all three back", timeout=90)
    print("roles: %s" % roles(ds))

    say("stopping the load and checking every record")
    load.stop()

    def caught_up():
        c = kraw.Cluster(src.bootstrap)
        try:
            s = [c.offsets(ha.TOPIC, p)[1] for p in range(ha.PARTS)]
        finally:
            c.close()
        return ha.hwms(dst.bootstrap) == s
    h.wait_for(caught_up, 120, "the destination at the source's end")
    total = lost = dup = bad = 0
    for p in range(ha.PARTS):
        _, _, s = ha.read_all(src.bootstrap, ha.TOPIC, p)
        _, _, d = ha.read_all(dst.bootstrap, ha.TOPIC, p)
        sm = {x[0]: x for x in s}
        dm = {}
        for x in d:
            dup += x[0] in dm
            dm[x[0]] = x
        lost += sum(1 for o in sm if o not in dm)
        bad += sum(1 for o in sm if o in dm and dm[o] != sm[o])
        dup += len(set(dm) - set(sm))
        total += len(s)
        print("partition %d: %d source records, %d destination records, "
              "offsets %d..%d" % (p, len(s), len(d), s[0][0] if s else 0,
                                  s[-1][0] if s else -1))
    print("\n%d records produced, %d checked: %d lost, %d duplicated, "
          "%d different" % (load.n, total, lost, dup, bad))
    h.check(total >= load.n and lost == dup == bad == 0,
            "the mirror is not exact")
    show(cli + ["--describe", "--mirror", "m1"])
    for d in ds:
        d.stop()
    say("done: one instance killed mid-stream, nothing lost or duplicated")


if __name__ == "__main__":
    h.run_main(main)
