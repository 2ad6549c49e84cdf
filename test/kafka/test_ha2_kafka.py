#!/usr/bin/env python3
"""Several mirrord instances (cluster.enabled) on real Kafka 4.4:
the group coordinator moving between brokers, and /readyz of an instance
that is not a group member.

A 3-broker destination whose __consumer_offsets has 3 partitions with 3
replicas (so a group's coordinator can move), a 1-broker source, three
instances a, b, c beside brokers 1, 2, 3, under continuous load:

  * the group id is chosen so that its coordinator (the leader of its
    __consumer_offsets partition) is broker 2 or 3 (node 1 is the
    controller and always runs); that broker is stopped: FindCoordinator
    then names another broker, and every instance reaches the new
    coordinator (resumes its heartbeats there or joins again through it);
    mirroring goes on, one writer remains;
  * /readyz: 200 on every member; a second process started with c's
    instance id fences c (FENCED_INSTANCE_ID, static membership): c is no
    group member until its backoff ends, and its /readyz answers 503
    naming the group and its state; once the intruder is gone c joins
    again and answers 200;
  * at the end every destination partition equals its source partition
    record by record (offset, key, value, headers, timestamp): 0 lost,
    0 duplicated, and exactly one writer.
"""

import os
import re
import struct
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
import kraw  # noqa: E402
import test_ha_kafka as ha  # noqa: E402  (instance, Load, read_all, ...)

RUN = ha.RUN
TOPIC, PARTS = ha.TOPIC, ha.PARTS


def find_coordinator(bootstrap, group):
    """(error, node, "host:port") of FindCoordinator v1 for group."""
    c = kraw.Conn(bootstrap.split(",")[0])
    try:
        r = c.call(10, 1, kraw._s(group) + struct.pack(">b", 0))
        r.i32()                      # throttle
        err = r.i16()
        r.str()                      # message
        node, host, port = r.i32(), r.str(), r.i32()
        return err, node, "%s:%d" % (host, port)
    finally:
        c.close()


def coordinator(bootstrap, group, timeout=60, avoid=None):
    out = []

    def ok():
        err, node, addr = find_coordinator(bootstrap, group)
        if err == 0 and node != avoid:
            out[:] = [node, addr]
            return True
        return False
    h.wait_for(ok, timeout, "FindCoordinator of group %s%s" % (
        group, "" if avoid is None else " to name a broker other than %d"
        % avoid))
    return out[0], out[1]


def member(dst, name, broker, group, instance_id=None):
    d = ha.instance(dst, name, broker)
    with open(d.config_path) as f:
        cfg = f.read()
    cfg = cfg.replace('group_id: "ha-%s"' % RUN, 'group_id: "%s"' % group)
    h.check(group in cfg, "group id not set in %s" % d.config_path)
    if instance_id is not None:
        cfg = cfg.replace('instance_id: "%s"' % name,
                          'instance_id: "%s"' % instance_id)
        h.check('instance_id: "%s"' % instance_id in cfg,
                "instance id not set in %s" % d.config_path)
    with open(d.config_path, "w") as f:
        f.write(cfg)
    return d


def main():
    src, = h.real_kafka(1)
    dst, = h.private_kafka(1, brokers=3, extra_props={
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "default.replication.factor": "3"})
    SRC, DST = src.bootstrap, dst.bootstrap
    src.create_topic(TOPIC, partitions=PARTS)
    t0 = time.monotonic()

    # A group whose coordinator is a broker that can be stopped.
    group = None
    for k in range(40):
        g = "ha2-%s-%d" % (RUN, k)
        node, _ = coordinator(DST, g)
        if node in (2, 3):
            group = g
            break
    h.check(group is not None, "no group id of 40 has its coordinator on "
            "broker 2 or 3")
    coord, coord_addr = coordinator(DST, group)
    print("group %s: coordinator broker %d (%s)" % (group, coord, coord_addr),
          flush=True)

    a = member(DST, "a", 1, group)
    b = member(DST, "b", 2, group)
    c = member(DST, "c", 3, group)
    ds = [a, b, c]
    w, load = ha.start_mirroring(ds, SRC)
    h.wait_for(lambda: (ha.hwms(DST) or [0])[0] > 0 and
               all(x > 0 for x in ha.hwms(DST)), 90,
               "every destination partition to receive records")
    for d in ds:
        h.wait_for(lambda d=d: ha.readyz(d)[0] == 200, 30,
                   "/readyz of member %s to be 200: %r" % (d.name, ha.readyz(d)))
    print("mirroring, every member ready (%.0fs)" % (time.monotonic() - t0),
          flush=True)

    # ---- the coordinator moves ------------------------------------------
    marks = {d.name: len(d.log()) for d in ds}
    dst.stop_broker(coord)
    new, new_addr = coordinator(DST, group, avoid=coord)
    print("broker %d stopped: coordinator now broker %d (%s) (%.0fs)"
          % (coord, new, new_addr, time.monotonic() - t0), flush=True)

    def reached(d):
        tail = d.log()[marks[d.name]:]
        return ("group %s: coordinator %s reached" % (group, new_addr) in tail
                or re.search(r"group %s: joined generation \d+"
                             % re.escape(group), tail) is not None)
    for d in ds:
        h.wait_for(lambda d=d: reached(d), 60, "%s to reach the new "
                   "coordinator %s:\n%s" % (d.name, new_addr,
                                            d.log()[marks[d.name]:][-2000:]))
    ha.one_writer(ds, "after the coordinator moved", timeout=60)
    before = ha.hwms(DST)
    h.wait_for(lambda: all(x > y for x, y in zip(ha.hwms(DST) or before,
                                                  before)), 60,
               "every destination partition to grow with broker %d down"
               % coord)
    print("every instance reached the new coordinator; mirroring goes on "
          "(%.0fs)" % (time.monotonic() - t0), flush=True)
    dst.start_broker(coord)

    # ---- /readyz of a non-member ----------------------------------------
    for d in ds:
        h.wait_for(lambda d=d: ha.readyz(d)[0] == 200, 60,
                   "/readyz of member %s to be 200: %r" % (d.name, ha.readyz(d)))
    mark = len(c.log())
    # Its own ports and data directory, c's instance id.
    twin = member(DST, "c2", 3, group, instance_id="c")
    twin.start()
    h.wait_for(lambda: "FENCED_INSTANCE_ID" in c.log()[mark:], 60,
               "c to be fenced by a second process with its instance id")
    got = []

    def not_ready():
        got[:] = [ha.readyz(c)]
        return got[0][0] == 503
    h.wait_for(not_ready, 30, "/readyz of the fenced c to be 503: %r" % got)
    status, body = got[0]
    h.check("not a member of group %s" % group in body,
            "/readyz of the fenced c: %d %r, want the reason 'not a member "
            "of group %s'" % (status, body, group))
    print("fenced c: /readyz %d %r" % (status, body.strip()), flush=True)
    twin.stop()
    h.wait_for(lambda: ha.readyz(c)[0] == 200, 90,
               "/readyz of c to be 200 once it is a member again: %r"
               % (ha.readyz(c),))

    # ---- everything copied once; one writer -----------------------------
    load.stop()

    total = ha.check_copy(SRC, DST, load)
    final = ha.one_writer(ds, "at the end")
    print("ok: %d records, writer %s (%.0fs)" % (total, final.name,
                                                time.monotonic() - t0))


if __name__ == "__main__":
    h.run_main(main)
