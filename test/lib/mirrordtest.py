"""Run the real mirrord binary and its CLI from black-box tests.

    import harness as h, mirrordtest as mt
    d = mt.Mirrord(destination="127.0.0.1:9092")   # writes a config, starts
    d.cli("--list")                                  # CompletedProcess
    d.create("m1", {"bootstrap.servers": src})
    d.describe_json()                                # list of partition dicts
    d.kill9(); d.start()                             # same data dir
    mt.Mirrord(destination=dst, storage_kafka={"secret_key_file": key,
               "topic": "meta", "timeout_ms": 10000})   # metadata log on Kafka
    alice = mt.Client(d, "User:alice", {"security.protocol": "SASL_SSL", ...})
    alice.refused(alice.cli("--delete", "--mirror", "x"), "alter", "x",
                  "DeleteMirror")                    # 144, the message
    pki = mt.make_pki(dir, {"ops": "/O=example/CN=ops"})   # CA, server, clients

Every wait is bounded; every process is killed at exit (harness.Proc).
"""

import json
import os
import re
import socket
import struct
import subprocess
import tempfile
import time

import harness as h


def client_yaml(props, indent="  "):
    """A `client:` block of destination client properties, or ""."""
    if not props:
        return ""
    return indent + "client:\n" + "".join(
        '%s  %s: "%s"\n' % (indent, k, v) for k, v in props.items())


def storage_kafka_yaml(kafka, indent="  "):
    """The storage lines of the replicated metadata log (storage.backend:
    kafka), or "".  kafka: "secret_key_file" (every instance on one topic
    shares the key) and the storage.kafka keys, e.g.
    {"secret_key_file": key, "topic": "meta", "timeout_ms": 10000};
    strings are written quoted, numbers as they are."""
    if not kafka:
        return ""

    def val(v):
        return '"%s"' % v if isinstance(v, str) else "%s" % v
    keys = dict(kafka)
    out = indent + "backend: kafka\n"
    if "secret_key_file" in keys:
        out += "%ssecret_key_file: %s\n" % (indent,
                                           val(keys.pop("secret_key_file")))
    return out + indent + "kafka:\n" + "".join(
        "%s  %s: %s\n" % (indent, k, val(v)) for k, v in keys.items())


def sasl_source(bootstrap, user="admin", **configs):
    """Mirror configs for a SASL/PLAIN source (a realkafka cluster started
    with security="sasl") as `user`, polled quickly (fetch wait 100 ms,
    metadata every second), plus configs (names with dots: pass a dict
    as **{...})."""
    out = {"bootstrap.servers": bootstrap,
           "mirror.fetch.wait.max.ms": "100",
           "mirror.metadata.refresh.interval.ms": "1000"}
    out.update(sasl_plain(user))
    out.update(configs)
    return out


def answered_quickly(what, fn, limit=10.0,
                     while_what="the metadata log's broker is stopped"):
    """fn()'s value, failing the test unless it came within limit seconds
    (the event loop is free) while_what."""
    t0 = time.monotonic()
    try:
        v = fn()
    except Exception as e:  # noqa: BLE001 -- a timeout: the loop is blocked
        h.fail("%s was not answered while %s (%.1f s): %s"
               % (what, while_what, time.monotonic() - t0, e))
    took = time.monotonic() - t0
    h.check(took < limit, "%s took %.1f s" % (what, took))
    return v


def sasl_plain(user, password=None):
    """Client properties for SASL/PLAIN as `user` on a realkafka cluster
    started with security="sasl" (password: realkafka.USERS)."""
    if password is None:
        password = h.realkafka().USERS[user]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": password}


class Mirrord:
    def __init__(self, destination, name="mirrord", extra_yaml="",
                 start=True, data_dir=None, log_level="debug",
                 destination_client=None, storage_kafka=None):
        """destination_client: client properties for destination.client
        (e.g. sasl_plain("bob")); values are written as YAML strings.
        storage_kafka: the metadata log on a Kafka topic instead of files
        (storage_kafka_yaml())."""
        self.name = name
        self.dir = os.path.join(h.test_dir(), name)
        os.makedirs(self.dir, exist_ok=True)
        self.data_dir = data_dir or os.path.join(self.dir, "data")
        self.port = h.free_port()
        self.metrics_port = h.free_port()
        while self.metrics_port == self.port:   # the kernel may hand it out twice
            self.metrics_port = h.free_port()
        self.config_path = os.path.join(self.dir, "mirrord.yaml")
        self.destination = destination
        with open(self.config_path, "w") as f:
            f.write(
                "server:\n"
                "  node_id: 42\n"
                "  listen: \"127.0.0.1:%d\"\n"
                "storage:\n"
                "  data_dir: \"%s\"\n"
                "%s"
                "destination:\n"
                "  bootstrap_servers: \"%s\"\n"
                "%s"
                "metrics:\n"
                "  listen: \"127.0.0.1:%d\"\n"
                "log:\n"
                "  level: %s\n"
                "%s" % (self.port, self.data_dir,
                        storage_kafka_yaml(storage_kafka), destination,
                        client_yaml(destination_client), self.metrics_port,
                        log_level, extra_yaml))
        self.proc = None
        self.starts = 0
        if start:
            self.start()

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def start(self, wait=True):
        self.starts += 1
        self.proc = h.Proc([h.build_path("daemon", "mirrord"), "-c",
                            self.config_path],
                           name="%s-%d" % (self.name, self.starts))
        if wait:
            h.wait_for(self._answers, 30, "mirrord to answer on %s (log: %s)"
                       % (self.bootstrap, self.proc.log_path))
        return self.proc

    def start_listening(self):
        """Starts mirrord and waits (30 s) for its log to say the admin
        listener is ready, for a listener the plain ApiVersions probe of
        start() cannot reach (TLS, SASL); fails if mirrord exits."""
        self.start(wait=False)
        h.wait_for(lambda: not self.proc.alive() or "ready: admin listener"
                   in self.log(), 30, "%s to start (log %s)"
                   % (self.name, self.proc.log_path))
        h.check(self.proc.alive(), "%s did not start:\n%s"
                % (self.name, self.log()))
        return self.proc

    def _answers(self):
        if not self.proc.alive():
            raise AssertionError("mirrord exited with %s:\n%s"
                                 % (self.proc.p.returncode, self.proc.tail()))
        return api_versions_ok(self.bootstrap)

    def kill9(self):
        self.proc.signal(9)
        self.proc.wait(10)

    def stop(self, timeout=30):
        return self.proc.stop(timeout)

    def log(self):
        """Every run's output, concatenated."""
        out = []
        for i in range(1, self.starts + 1):
            p = os.path.join(h.test_dir(), "%s-%d.log" % (self.name, i))
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out.append(f.read().decode("utf-8", "replace"))
        return "".join(out)

    # ---- the CLI

    def cli(self, *args, timeout=60):
        return subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                               "--bootstrap-server", self.bootstrap]
                              + list(args), capture_output=True, text=True,
                              timeout=timeout)

    def cli_ok(self, *args):
        return self.cli_rc(0, *args)

    def cli_rc(self, want, *args):
        """The CLI run that must exit with status want."""
        r = self.cli(*args)
        if r.returncode != want:
            h.fail("kafka-mirrors %s exited %d, not %d:\nstdout: %s\n"
                   "stderr: %s" % (" ".join(args), r.returncode, want,
                                   r.stdout, r.stderr))
        return r

    def create(self, mirror, configs, expect_ok=True):
        self._nprops = getattr(self, "_nprops", 0) + 1
        path = os.path.join(self.dir, "mirror-%d.properties" % self._nprops)
        with open(path, "w") as f:
            for k, v in configs.items():
                f.write("%s=%s\n" % (k, v))
        r = self.cli("--create", "--mirror", mirror, "--mirror-config", path)
        if expect_ok and r.returncode != 0:
            h.fail("create %s failed: %s" % (mirror, r.stderr))
        return r

    def describe_json(self, mirror=None):
        args = ["--describe", "--json"]
        if mirror:
            args += ["--mirror", mirror]
        r = self.cli_ok(*args)
        return json.loads(r.stdout)

    def states(self, mirror=None):
        """{(topic, partition): state}"""
        return {(p["topic"], p["partition"]): p["state"]
                for p in self.describe_json(mirror)}

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics"
                                    % self.metrics_port, timeout=10) as r:
            return r.read().decode()

    def readyz(self):
        """(HTTP status, body) of GET /readyz on the metrics listener."""
        return http_get(self.metrics_port, "/readyz")

    def row(self, mirror, topic, partition):
        """The describe --json row of topic-partition in mirror, or None."""
        for p in self.describe_json(mirror):
            if p["topic"] == topic and p["partition"] == partition:
                return p
        return None


def files_under(d):
    """Every file below directory d (paths)."""
    out = []
    for root, _dirs, files in os.walk(d):
        for f in files:
            out.append(os.path.join(root, f))
    return out


def files_holding(d, needle):
    """Every file below directory d whose bytes contain needle (str or
    bytes): where a secret must not be."""
    n = needle.encode() if isinstance(needle, str) else needle
    found = []
    for p in files_under(d):
        with open(p, "rb") as f:
            if n in f.read():
                found.append(p)
    return found


def http_get(port, path):
    """(status, body) of GET http://127.0.0.1:port/path (10 s); an HTTP
    error status is returned, not raised."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def expect_error(r, name, fragment=None):
    """kafka-mirrors (r: CompletedProcess) exited 1 naming the Kafka error
    name on stderr, and fragment too unless None."""
    if r.returncode != 1 or name not in r.stderr:
        h.fail("expected exit 1 with %s, got exit %d\nstdout: %s\nstderr: %s"
               % (name, r.returncode, r.stdout, r.stderr))
    if fragment is not None and fragment not in r.stderr:
        h.fail("expected %r in the error message, got: %s"
               % (fragment, r.stderr))


def mock_pair(topics, brokers=1):
    """Two librdkafka mock clusters of brokers each, source (0) and
    destination (1), with topics ({name: partitions}) on both, logging to
    <test_dir>/mock.log; returns (mc, source bootstrap, destination
    bootstrap).  The caller stops mc (h.run_main's cleanup)."""
    from mockcluster import MockCluster
    mc = MockCluster(clusters=2, brokers=brokers,
                     log_path=os.path.join(h.test_dir(), "mock.log"))
    for c in (0, 1):
        for name, n in topics.items():
            mc.cmd("topic %d %s %d" % (c, name, n))
    return mc, mc.bootstrap(0), mc.bootstrap(1)


def pipeline_caps_yaml(total, per_partition):
    """The daemon config's pipeline section capping the bytes held in all
    (max_inflight_bytes_total) and per partition."""
    return ("pipeline:\n  max_inflight_bytes_total: %d\n"
            "  max_inflight_bytes_per_partition: %d\n" % (total, per_partition))


# ---- kafka-mirrors as one principal ----------------------------------------

class Client:
    """kafka-mirrors run as one principal: User:ANONYMOUS without
    properties, else the client properties (a dict, written to a
    --command-config file) that log in as principal."""

    def __init__(self, d, principal="User:ANONYMOUS", properties=None):
        self.d = d
        self.principal = principal
        self.args = []
        self.outputs = []   # every stdout and stderr, to look for secrets
        if properties:
            fd, path = tempfile.mkstemp(suffix=".properties", dir=d.dir)
            with os.fdopen(fd, "w") as f:
                for k, v in properties.items():
                    f.write("%s=%s\n" % (k, v))
            self.args = ["--command-config", path]

    def cli(self, *args):
        r = subprocess.run([h.build_path("daemon", "kafka-mirrors"),
                            "--bootstrap-server", self.d.bootstrap]
                           + self.args + list(args), capture_output=True,
                           text=True, timeout=60)
        self.outputs += [r.stdout, r.stderr]
        return r

    def ok(self, *args):
        r = self.cli(*args)
        if r.returncode != 0:
            h.fail("%s: kafka-mirrors %s exited %d:\n%s%s"
                   % (self.principal, " ".join(args), r.returncode, r.stdout,
                      r.stderr))
        return r

    def create(self, mirror, source):
        path = os.path.join(self.d.dir, "src-%s.properties" % mirror)
        with open(path, "w") as f:
            f.write("bootstrap.servers=%s\n" % source)
        return self.cli("--create", "--mirror", mirror, "--mirror-config", path)

    def refused(self, r, operation, mirror, api):
        """kafka-mirrors exited 1 naming 144 and the contract's message:
        the caller may not do this to this mirror."""
        msg = "%s may not %s mirror %s (%s)" % (self.principal, operation,
                                                 mirror, api)
        if (r.returncode != 1 or "CLUSTER_MIRROR_AUTHORIZATION_FAILED" not in
                r.stderr or msg not in r.stderr):
            h.fail("expected exit 1 with CLUSTER_MIRROR_AUTHORIZATION_FAILED: "
                   "%s\ngot exit %d\nstdout: %s\nstderr: %s"
                   % (msg, r.returncode, r.stdout, r.stderr))

    def listed(self):
        """The mirror names of --list."""
        r = self.ok("--list")
        return sorted(l.split()[0] for l in r.stdout.splitlines()[1:]
                      if l.strip() and l.split()[0] != "No")

    def described(self):
        """The mirror names that --describe (DescribeMirrors without
        names) shows partitions of."""
        r = self.ok("--describe", "--json")
        return sorted({p["mirror"] for p in json.loads(r.stdout)})


def metric_sum(d, family, **labels):
    """The sum of d's /metrics series of family whose labels include
    these (label=value), None when there is none."""
    total = None
    for line in d.metrics().splitlines():
        if line.startswith(family + "{") or line.startswith(family + " "):
            if all('%s="%s"' % kv in line for kv in labels.items()):
                total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


def wait_caught_up(d, mirror, timeout, what, topic=None, count=None,
                   fail_on_failed=False, row_ok=None, interval=0.05, poll=None):
    """Waits (timeout s) until every DescribeMirrors row of mirror (only
    those of topic, a name or a collection of names, when given) is
    MIRRORING with lag 0 as of a fresh source answer (lagMs 0), and
    row_ok(row) when given, and there are count
    of them (at least one when count is None); returns those rows.
    poll(rows), when given, is called on every poll first (to sample
    metrics while waiting).  With fail_on_failed a FAILED row fails at
    once, naming the partition and its error.  On timeout the failure
    names what and the first rows not caught up."""
    topics = None if topic is None else \
        {topic} if isinstance(topic, str) else set(topic)
    last = {"rows": []}

    def good(r):
        # lagMs 0: caught up as of a source answer younger than the stall
        # bound, not as last known.
        return (r["state"] == "MIRRORING" and r["lag"] == 0 and
                r.get("lagMs", 0) == 0 and (row_ok is None or row_ok(r)))

    def ok():
        rows = [r for r in d.describe_json(mirror)
                if topics is None or r["topic"] in topics]
        last["rows"] = rows
        if poll is not None:
            poll(rows)
        if fail_on_failed:
            for r in rows:
                if r["state"] == "FAILED":
                    h.fail("%s: %s-%d FAILED: %s" % (what, r["topic"], r["partition"],
                                                     r.get("errorMessage")))
        if not rows or (count is not None and len(rows) != count):
            return False
        return all(good(r) for r in rows) and rows
    try:
        return h.wait_for(ok, timeout, what, interval=interval)
    except AssertionError as e:
        behind = [r for r in last["rows"] if not good(r)]
        raise AssertionError("%s; %d rows%s, %d not caught up, the first: %r"
                             % (e, len(last["rows"]),
                                "" if count is None else " (want %d)" % count,
                                len(behind), behind[:10])) from None


def metric_value(d, family, **labels):
    """The value of d's /metrics series of family whose labels are exactly
    these (label=value), 0 when there is none."""
    want = sorted('%s="%s"' % kv for kv in labels.items())
    for line in d.metrics().splitlines():
        m = re.match(r"^%s(?:\{([^}]*)\})? (\S+)$" % re.escape(family),
                     line)
        got = sorted(m.group(1).split(",")) if m and m.group(1) else []
        if m and got == want:
            return float(m.group(2))
    return 0.0


def denied_total(d):
    """{(api, operation): n} of mirrord_admin_authorization_denied_total."""
    pat = re.compile(r'^mirrord_admin_authorization_denied_total'
                     r'\{api="([^"]*)",operation="([^"]*)"\} (\S+)$', re.M)
    return {(a, o): float(v) for a, o, v in pat.findall(d.metrics())}


# ---- Kafka data: producing, end offsets, comparing -------------------------

def end_offset(bootstrap, topic, partition=0):
    """The high watermark of topic-partition (kraw ListOffsets)."""
    import kraw
    c = kraw.Cluster(bootstrap)
    try:
        return c.offsets(topic, partition)[1]
    finally:
        c.close()


def end_offsets(bootstrap, topic, npart):
    """[high watermark of partition 0, 1, ... npart-1] of topic."""
    import kraw
    c = kraw.Cluster(bootstrap)
    try:
        return [c.offsets(topic, p)[1] for p in range(npart)]
    finally:
        c.close()


def wait_same_ends(src, dst, topic, npart, timeout, log_path):
    """Waits (timeout s) until every partition of topic ends on the
    destination (bootstrap dst) where it ended on the source (src) when
    called; returns those ends.  log_path: the mirrord log to name."""
    want = end_offsets(src, topic, npart)
    h.wait_for(lambda: end_offsets(dst, topic, npart) == want, timeout,
               "%s to reach the source ends %s on the destination (log %s)"
               % (topic, want, log_path))
    return want


def stored_records(cl, topic, partition):
    """[(offset, key, value)] of every record of every batch of
    topic-partition as the cluster (a kraw.Cluster) stores it."""
    import krawwrite
    out = []
    for b in cl.batches(topic, partition):
        out.extend(krawwrite.records_of(b["raw"]))
    return out


def produce_padded_batches(cl, topic, partition, batches, recs, value_len,
                           key_tag, value_tag, fill):
    """batches uncompressed batches of recs records each appended to
    topic-partition of cl (a kraw.Cluster, krawwrite.produce): record i
    of batch b keyed <key_tag>-<partition>-<b>-<i>, its value
    <value_tag><partition>-<b>-<i>- padded with fill to value_len bytes.
    Returns ([(key, value)] in order, the largest batch's length)."""
    import krawwrite
    out, largest = [], 0
    for b in range(batches):
        rs = [(i, b"%s-%d-%d-%d" % (key_tag, partition, b, i),
               (b"%s%d-%d-%d-" % (value_tag, partition, b, i)).ljust(value_len, fill))
              for i in range(recs)]
        raw = krawwrite.batch(rs)
        largest = max(largest, len(raw))
        krawwrite.produce(cl, topic, partition, raw)
        out.extend((k, v) for _d, k, v in rs)
    return out, largest


def log_batches(bootstrap, topic):
    """[(base_offset, producer_id, epoch, [frame types])] of every batch of
    topic-partition 0 from its log start: the metadata log's records, each
    value starting with its framing (the type a big-endian u16 at byte
    8)."""
    import kraw
    from krawwrite import read_varint
    c = kraw.Cluster(bootstrap)
    try:
        out = []
        for b in c.batches(topic, 0, start=c.offsets(topic, 0)[0]):
            raw = b["raw"]
            pid, epoch = struct.unpack(">qh", raw[43:53])
            types = []
            o = 61
            for _ in range(b["count"]):
                ln, o = read_varint(raw, o)
                end = o + ln
                o += 1                            # attributes
                _, o = read_varint(raw, o)        # timestamp delta
                _, o = read_varint(raw, o)        # offset delta
                kl, o = read_varint(raw, o)
                o += max(kl, 0)
                _, o = read_varint(raw, o)        # value length
                types.append(struct.unpack(">H", raw[o + 8:o + 10])[0])
                o = end
            out.append((b["base_offset"], pid, epoch, types))
        return out
    finally:
        c.close()


def flush_all(p, what):
    """Flush a confluent_kafka Producer (60 s); fail naming what unless
    every message was delivered."""
    left = p.flush(60)
    if left:
        h.fail("%s: %d messages not delivered" % (what, left))


def produce_tagged(bootstrap, topic, partition, n, tag, keyed=False,
                   config=None, one_per_batch=False):
    """n records to topic-partition, all acknowledged (30 s): values
    b"<tag>-<i>" without keys, or with keyed keys b"<tag>-<i>" and values
    b"<tag>-value-<i>".  The producer has acks=all, linger.ms=5 and
    message.timeout.ms=30000 unless config overrides them;
    one_per_batch flushes after every record (a batch at each offset)."""
    from confluent_kafka import Producer
    errors = []
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 30000}
    conf.update(config or {})
    p = Producer(conf)
    t = tag.encode()
    for i in range(n):
        if keyed:
            kv = {"key": b"%s-%d" % (t, i), "value": b"%s-value-%d" % (t, i)}
        else:
            kv = {"value": b"%s-%d" % (t, i)}
        p.produce(topic, partition=partition,
                  on_delivery=lambda err, _m: err and errors.append(str(err)),
                  **kv)
        if one_per_batch:
            p.flush(30)
    left = p.flush(30)
    if left or errors:
        h.fail("producing %s to %s: %d unflushed, %s"
               % (tag, topic, left, errors[:3]))


def produce_values(bootstrap, topic, values):
    """The values (bytes), without keys, to topic-0; all acknowledged
    (acks=all, 60 s)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "acks": "all", "message.timeout.ms": 30000})
    for v in values:
        p.produce(topic, value=v, partition=0)
    if p.flush(60):
        h.fail("producing to %s on %s: not all delivered" % (topic, bootstrap))


def read_partition(bootstrap, topic, partition, group, start=0,
                   isolation="read_committed", config=None, record=None):
    """Every record of topic-partition from offset start to the end (the
    consumer's partition EOF), in order, read within 60 s by a consumer
    of group with isolation (and the consumer properties in config);
    record(message) makes each entry, by default (offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "enable.auto.commit": False, "isolation.level": isolation,
            "enable.partition.eof": True, "fetch.wait.max.ms": 100}
    conf.update(config or {})
    record = record or (lambda m: (m.offset(), m.key(), m.value()))
    c = Consumer(conf)
    c.assign([TopicPartition(topic, partition, start)])
    out = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return out
                h.fail("reading %s-%d: %s" % (topic, partition, m.error()))
            out.append(record(m))
        h.fail("reading %s-%d from %s did not reach the end"
               % (topic, partition, bootstrap))
    finally:
        c.close()


class LayoutWriter:
    """A thread writing small records (key, value, one header) round every
    partition of layout ({topic: [partition, ...]}) to bootstrap, pausing
    pause s between rounds, until stop().  Delivery failures while a
    broker is down do not matter: tests compare the destination with what
    the source holds."""

    def __init__(self, bootstrap, layout, pause=0.05):
        import threading
        from confluent_kafka import Producer
        self.layout = {t: sorted(ps) for t, ps in layout.items()}
        self.pause = pause
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "acks": "all", "message.timeout.ms": 120000})
        self.halt = threading.Event()
        self.n = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def _run(self):
        while not self.halt.is_set():
            for topic, parts in sorted(self.layout.items()):
                for part in parts:
                    try:
                        self.p.produce(topic, key=b"k%d" % self.n,
                                       value=b"%s/%d/%d " % (topic.encode(), part, self.n) * 8,
                                       headers=[("n", b"%d" % self.n)],
                                       partition=part)
                    except BufferError:
                        self.p.poll(0.1)
                    self.n += 1
            self.p.poll(0)
            time.sleep(self.pause)
        self.p.flush(120)

    def stop(self):
        self.halt.set()
        self.thread.join(180)
        h.check(not self.thread.is_alive(), "the writer did not stop")


def partition_ends(bootstrap, layout):
    """{(topic, partition): high watermark} of every partition of layout
    ({topic: [partition, ...]})."""
    import kraw
    c = kraw.Cluster(bootstrap)
    try:
        return {(t, p): c.offsets(t, p)[1]
                for t, parts in layout.items() for p in parts}
    finally:
        c.close()


def records_below(bootstrap, want, group):
    """{(topic, partition): [(offset, key, value, headers, timestamp)]}
    of every record below the end in want ({(topic, partition): end}),
    read within 120 s by a consumer of group."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(t, p, 0) for (t, p), e in want.items() if e > 0])
    out = {tp: [] for tp in want}
    deadline = time.monotonic() + 120
    try:
        while any(len(out[tp]) < e for tp, e in want.items()):
            if time.monotonic() > deadline:
                h.fail("reading %s: got %r of %r" % (bootstrap,
                       {tp: len(v) for tp, v in out.items()}, want))
            for m in c.consume(500, 1.0):
                if m.error():
                    continue
                tp = (m.topic(), m.partition())
                if m.offset() < want[tp]:
                    out[tp].append((m.offset(), m.key(), m.value(),
                                    m.headers(), m.timestamp()))
    finally:
        c.close()
    return out


def check_same_records(src, dst, want, group):
    """Every partition of want ({(topic, partition): end}) holds below its
    end the same records (offsets, keys, values, headers, timestamps) on
    the destination (bootstrap dst) as on the source (src); fails naming
    the partition, the counts and the first difference."""
    s, t = records_below(src, want, group), records_below(dst, want, group)
    for tp in sorted(want):
        h.check(s[tp] == t[tp],
                "%s-%d: the destination differs from the source (%d records"
                " against %d; first difference %r)"
                % (tp[0], tp[1], len(t[tp]), len(s[tp]),
                   next(((a, b) for a, b in zip(s[tp], t[tp]) if a != b), None)))


def recreate_topic(cluster, adm, topic):
    """Deletes topic (confluent_kafka AdminClient adm) and creates it again
    with one partition on cluster (a realkafka.Cluster), retrying
    TOPIC_ALREADY_EXISTS while the deletion completes (60 s)."""
    list(adm.delete_topics([topic]).values())[0].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.create_topic(topic, partitions=1)
            return
        except Exception as e:  # noqa: BLE001
            if time.monotonic() > deadline:
                h.fail("recreating %s: %s" % (topic, e))
            time.sleep(0.2)


def same_batches(src, dst, topic, partitions):
    """The destination (bootstrap dst) holds the source's batches of topic
    at the same offsets with the same record counts, and every batch's
    records section (all after the 61-byte header) byte for byte equal:
    nothing lost, nothing twice.  partitions: the partition numbers.
    Returns the number of records compared."""
    import kraw
    total = 0
    sc, dc = kraw.Cluster(src), kraw.Cluster(dst)
    try:
        for part in partitions:
            sb, db = sc.batches(topic, part), dc.batches(topic, part)
            h.eq([(b["base_offset"], b["count"]) for b in db],
                 [(b["base_offset"], b["count"]) for b in sb],
                 "%s-%d batches" % (topic, part))
            for a, b in zip(sb, db):
                if kraw.records_section(a["raw"]) != \
                        kraw.records_section(b["raw"]):
                    h.fail("%s-%d batch at %d: records differ"
                           % (topic, part, a["base_offset"]))
            total += sum(b["count"] for b in db)
    finally:
        sc.close()
        dc.close()
    return total


# ---- certificates, made with the openssl CLI ------------------------------

def _openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        h.fail("openssl %s: %s" % (args[0], r.stderr))


def make_pki(d, clients):
    """A CA, a server certificate for 127.0.0.1 and localhost, and one
    client certificate per {name: subject in openssl's /K=v form}, all
    P-256; returns {name: path} with name-key for the keys."""
    os.makedirs(d, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
           "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", "ca-key.pem", "-out", "ca.pem",
             "-subj", "/CN=mirrord test CA", "-days", "2", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    out = {"ca": os.path.join(d, "ca.pem")}
    for name, subj in [("server", "/CN=localhost")] + sorted(clients.items()):
        _openssl("req", *key, "-keyout", name + "-key.pem", "-out",
                 name + ".csr", "-subj", subj, cwd=d)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem",
                 "-CAkey", "ca-key.pem", "-CAcreateserial", "-out",
                 name + ".pem", "-extfile",
                 "server.ext" if name == "server" else "client.ext",
                 "-days", "2", cwd=d)
        out[name] = os.path.join(d, name + ".pem")
        out[name + "-key"] = os.path.join(d, name + "-key.pem")
    return out


def add_user(creds, user, password, mechanism="SCRAM-SHA-512"):
    """mirrord --add-user, the password on standard input."""
    r = subprocess.run([h.build_path("daemon", "mirrord"), "--add-user", user,
                        "--mechanism", mechanism, "--credentials-file", creds],
                       input=password + "\n", capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        h.fail("mirrord --add-user %s: exit %d: %s" % (user, r.returncode,
                                                        r.stderr))


# ---- a few raw Kafka-protocol helpers (the contract is simple) ------------

def frame(api_key, version, corr, body=b"", flexible=False, client_id=b"t"):
    hdr = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if flexible:
        hdr += b"\x00"  # empty tagged-field section
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def uvarint(n):
    """n >= 0 as an unsigned varint (flexible versions' lengths)."""
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def read_uvarint(b, o):
    """(value, next offset) of the unsigned varint at b[o:]."""
    n = shift = 0
    while True:
        c = b[o]
        o += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, o
        shift += 7


def cstr(s):
    """A compact (flexible-version) string."""
    b = s.encode()
    return uvarint(len(b) + 1) + b


def read_cstr(b, o):
    """(string or None, next offset) of the compact string at b[o:]."""
    n, o = read_uvarint(b, o)
    if n == 0:
        return None, o
    return b[o:o + n - 1].decode(), o + n - 1


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes"
                           % (len(buf), n))
        buf += chunk
    return buf


def recv_frame(s):
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)


def connect(bootstrap, timeout=10):
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s


def api_versions_ok(bootstrap):
    try:
        with connect(bootstrap, 2) as s:
            s.sendall(frame(18, 0, 1))
            resp = recv_frame(s)
            return struct.unpack(">ih", resp[:6]) == (1, 0)
    except OSError:
        return False


def closed_by_peer(s, timeout=10):
    """True if the peer closes the connection (EOF or reset) in time."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class Proxy:
    """A TCP forwarder from 127.0.0.1:port to target (host:port), in threads,
    for a source that 'comes up' at a fixed address later.

    cut_after(n): the next connection through which more than n bytes come
    back from the target is closed (both ends) at that point, once; `cuts`
    counts the connections cut so; cut_after(n, then_refuse=True) sets
    `refuse` at that moment.  With `refuse` set, new connections are
    closed at once."""

    def __init__(self, port, target):
        import threading
        self.target = target
        self.cut_at = None
        self.refuse_at_cut = False
        self.cuts = 0
        self.refuse = False
        self.mu = threading.Lock()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", port))
        self.lsock.listen(16)
        self.lsock.settimeout(0.5)
        self.stop = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def cut_after(self, n, then_refuse=False):
        with self.mu:
            self.cut_at = n
            self.refuse_at_cut = then_refuse

    def _pipe(self, a, b, back=False):
        seen = 0
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                if back:
                    seen += len(data)
                    with self.mu:
                        cut = self.cut_at is not None and seen > self.cut_at
                        if cut:
                            self.cut_at = None
                            self.cuts += 1
                            if self.refuse_at_cut:
                                self.refuse = True
                    if cut:
                        # The first bytes past the mark go, then nothing.
                        b.sendall(data[:len(data) // 2])
                        break
                b.sendall(data)
        except OSError:
            pass
        finally:
            # shutdown first: the other direction's thread may sit in a
            # recv() on the same socket, and a close() alone sends no FIN
            # while it does.
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    x.close()
                except OSError:
                    pass

    def _accept(self):
        import threading
        while not self.stop:
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.refuse:
                c.close()
                continue
            try:
                u = connect(self.target)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            c.settimeout(None)
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, True),
                             daemon=True).start()

    def close(self):
        self.stop = True
        self.lsock.close()


# ---- status truth: what an operator sees when a source cannot be read ------
#
# The contract (STALLED, its REASON, the --describe --json keys, the source
# metrics, /mirrors/<name>/ready, the /readyz check "sources readable"):
# a copying partition whose source has not answered it for B =
# pipeline.request_timeout_ms + mirror.fetch.wait.max.ms, or has failed
# explicitly (refused, DNS, TLS, SASL, a Kafka error) for 3 s, is STALLED.
# The tests run mirrord with STALL_YAML and mirrors made by
# stall_mirror_configs(), so B = 5.1 s, and expect STALLED within
# STALL_WITHIN_S.  SourceFault checks one fault from its start to its
# cure; every failure says what kafka-mirrors, /metrics or the HTTP
# endpoints showed the operator.

STALL_REQUEST_TIMEOUT_MS = 5000
STALL_FETCH_WAIT_MS = 100
STALL_B_MS = STALL_REQUEST_TIMEOUT_MS + STALL_FETCH_WAIT_MS
STALL_WITHIN_S = 2 * STALL_B_MS / 1000.0 + 5
STALL_YAML = "pipeline:\n  request_timeout_ms: %d\n" % STALL_REQUEST_TIMEOUT_MS


def stall_mirror_configs(bootstrap, **configs):
    """Mirror configs for a source at bootstrap polled as the status tests
    need (fetch wait 100 ms, metadata every 2 s), plus configs (names
    with dots: pass a dict as **{...})."""
    out = {"bootstrap.servers": bootstrap,
           "mirror.fetch.wait.max.ms": str(STALL_FETCH_WAIT_MS),
           "mirror.metadata.refresh.interval.ms": "2000"}
    out.update(configs)
    return out


def wall_ms():
    return int(time.time() * 1000)


def describe_table(d, mirror):
    """kafka-mirrors --describe --mirror mirror as printed: (the whole
    output, {(topic, partition): {column name: cell, "line": the row}});
    REASON is "" when the table has none."""
    out = d.cli_ok("--describe", "--mirror", mirror).stdout
    lines = out.splitlines()
    rows = {}
    if not lines or not lines[0].startswith("MIRROR"):
        return out, rows
    head = lines[0].split()
    for l in lines[1:]:
        cells = l.split(None, len(head) - 1)
        if len(cells) < 8:
            continue
        row = dict(zip(head, cells))
        row.setdefault("REASON", "")
        row["line"] = l
        rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    return out, rows


def metric_series(text, family, **labels):
    """The value of the series of family whose labels are exactly these in
    a /metrics text, None when there is no such series."""
    want = sorted('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        m = re.match(r"^%s(?:\{([^}]*)\})? (\S+)$" % re.escape(family), line)
        if not m:
            continue
        got = sorted(m.group(1).split(",")) if m.group(1) else []
        if got == want:
            return float(m.group(2))
    return None


def metric_lines(text, *families):
    """The lines of a /metrics text of these families (for a message)."""
    return "\n".join(l for l in text.splitlines()
                     if l.split("{")[0].split(" ")[0] in families) or \
        "(no series of %s)" % ", ".join(families)


class SourceFault:
    """One fault that makes a mirror's source unreadable, checked as the
    operator sees it.

        f = mt.SourceFault(d, "m", src.bootstrap, parts, "refused",
                           r"refused", "connection_refused")
        f.begin()                  # the moment the fault starts
        ... break the source ...
        f.wait_stalled()           # STALLED rows, REASON, within the bound
        f.check_stalled()          # JSON keys, two looks, metrics, HTTP
        ... cure it ...
        f.check_recovered(src_plain, dst, layout)

    parts: the (topic, partition) the fault affects; every other
    partition of the mirror must stay unstalled.  source: the host:port
    every REASON names.  cause_re: a regular expression (case-blind) the
    cause part of the REASON matches.  metric_cause: the cause label of
    mirrord_mirror_source_errors_total.  whole_source=False: the source
    still answers the mirror's other partitions (a topic denied by an
    ACL), so its seconds since a successful Fetch need not grow."""

    def __init__(self, d, mirror, source, parts, what, cause_re, metric_cause,
                 whole_source=True):
        self.d, self.mirror, self.source = d, mirror, source
        self.parts = sorted(parts)
        self.whole_source = whole_source
        self.what = what
        self.cause_re = cause_re
        self.metric_cause = metric_cause
        self.t0_ms = self.t0 = None

    def begin(self):
        self.t0 = time.monotonic()
        self.t0_ms = wall_ms()

    def _say(self, msg):
        return "%s: %s" % (self.what, msg)

    def _reason_ok(self, reason):
        return (reason and self.source in reason and "since " in reason and
                re.search(self.cause_re, reason, re.I) is not None)

    def _want_reason(self):
        return ("a REASON naming the source %s, the cause (/%s/) and "
                "'since '" % (self.source, self.cause_re))

    def wait_stalled(self, within=None, start=None):
        """Waits until `kafka-mirrors --describe` shows every affected
        partition STALLED with a REASON naming the source, the cause and
        since when: within STALL_WITHIN_S (or `within`) of begin() (or of
        `start`, a monotonic time: e.g. when a restarted broker came back
        with the fault).  Returns the table's rows."""
        start = self.t0 if start is None else start
        within = STALL_WITHIN_S if within is None else within
        last = {}

        def ok():
            out, rows = describe_table(self.d, self.mirror)
            last["out"] = out
            return all(p in rows and rows[p]["STATE"] == "STALLED" and
                       self._reason_ok(rows[p]["REASON"])
                       for p in self.parts) and rows
        left = max(start + within - time.monotonic(), 0.5)
        try:
            rows = h.wait_for(ok, left, "STALLED", interval=0.5)
        except AssertionError:
            h.fail(self._say("%.1f s after the fault began, kafka-mirrors "
                             "--describe shows:\n%s\nwant %s STALLED with %s"
                             % (time.monotonic() - self.t0, last.get("out"),
                                ", ".join("%s-%d" % p for p in self.parts),
                                self._want_reason())))
        print("%s: STALLED %.1f s after the fault began:\n%s"
              % (self.what, time.monotonic() - self.t0, last["out"]), flush=True)
        return rows

    def _json(self):
        return {(r["topic"], r["partition"]): r
                for r in self.d.describe_json(self.mirror)}

    def _check_row(self, r, real_end=None):
        tp = "%s-%d" % (r["topic"], r["partition"])
        show = json.dumps(r)
        h.check(r.get("state") == "STALLED",
                self._say("--describe --json of %s says state %r: %s"
                          % (tp, r.get("state"), show)))
        h.check(r.get("mirrorState") in ("MIRRORING", "PREPARING"),
                self._say("%s: mirrorState %r, want the state machine's "
                          "MIRRORING or PREPARING: %s"
                          % (tp, r.get("mirrorState"), show)))
        h.check(r.get("stalled") is True,
                self._say("%s: stalled %r, want true: %s"
                          % (tp, r.get("stalled"), show)))
        h.check(self._reason_ok(r.get("stalledReason")),
                self._say("%s: stalledReason %r, want %s"
                          % (tp, r.get("stalledReason"), self._want_reason())))
        since = r.get("stalledSinceMs")
        h.check(isinstance(since, int) and
                self.t0_ms - 2000 <= since <= wall_ms() + 1000,
                self._say("%s: stalledSinceMs %r (%+d ms from the fault's "
                          "start at %d), want a time between the fault's "
                          "start (less 2 s) and now: %s"
                          % (tp, since, since - self.t0_ms
                             if isinstance(since, int) else 0, self.t0_ms,
                             show)))
        for k in ("sourceOffsetAgeMs", "lagMs"):
            h.check(isinstance(r.get(k), int) and r[k] > 0,
                    self._say("%s: %s %r, want a positive age: %s"
                              % (tp, k, r.get(k), show)))
        lag, so, do = r.get("lag"), r.get("sourceOffset"), r.get("destinationOffset")
        # Never a made-up number: unknown (-1), or the last known source
        # end minus the destination end, that source end flagged stale.
        h.check(lag == -1 or (isinstance(so, int) and so >= 0 and
                              lag == so - do),
                self._say("%s: lag %r with sourceOffset %r and "
                          "destinationOffset %r: want -1 or the last known "
                          "source end minus the destination end: %s"
                          % (tp, lag, so, do, show)))
        if real_end is not None and isinstance(so, int) and so >= 0:
            h.check(so <= real_end,
                    self._say("%s: sourceOffset %d is past the source's "
                              "real end %d: %s" % (tp, so, real_end, show)))

    def check_stalled(self, real_ends=None):
        """While the fault lasts (call after wait_stalled()): every affected
        partition's --describe --json row (state STALLED, mirrorState,
        stalled, stalledReason, stalledSinceMs in the fault's window,
        sourceOffsetAgeMs and lagMs growing between two looks, lag -1 or
        last known and flagged by its age), the table's LAG (`>=N` or `-`)
        and LAG-TIME, the metrics (source_up 0, errors by cause, stalled
        partitions, lag seconds and seconds since success growing), the
        mirror's /ready (503 with a reason), /mirrors, /readyz ("sources
        readable").  The other partitions of the mirror are not STALLED.
        real_ends: {(topic, partition): the source's end now} when the
        source can still be asked (a sourceOffset is never past it)."""
        d, m = self.d, self.mirror
        first = self._json()
        text1 = d.metrics()
        for p in self.parts:
            h.check(p in first, self._say("--describe --json has no row "
                                          "for %s-%d" % p))
            self._check_row(first[p], (real_ends or {}).get(p))
        for p, r in sorted(first.items()):
            if p not in self.parts:
                h.check(r.get("state") != "STALLED" and
                        r.get("stalled") is not True,
                        self._say("%s-%d is not affected by the fault but "
                                  "shows %s" % (p[0], p[1], json.dumps(r))))
        # The second look: the ages grow, the stale source end is flagged.
        later = {}

        def grown():
            now = self._json()
            later["rows"] = now
            for p in self.parts:
                a, b = first[p], now[p]
                if not (b.get("state") == "STALLED" and
                        b.get("sourceOffsetAgeMs", -1) >=
                        max(a.get("sourceOffsetAgeMs", 0) + 1000,
                            STALL_B_MS + 500) and
                        b.get("lagMs", -1) >= a.get("lagMs", 0) + 1000):
                    return False
            return True
        try:
            h.wait_for(grown, 15, "the ages to grow", interval=0.5)
        except AssertionError:
            h.fail(self._say("sourceOffsetAgeMs and lagMs do not grow past "
                             "the stall bound while the source cannot be "
                             "read: first look %s, last look %s"
                             % ([first[p] for p in self.parts],
                                [later.get("rows", {}).get(p)
                                 for p in self.parts])))
        for p in self.parts:
            self._check_row(later["rows"][p], (real_ends or {}).get(p))
        out, table = describe_table(d, m)
        for p in self.parts:
            r, row = later["rows"][p], table.get(p)
            h.check(row is not None, self._say("--describe shows no %s-%d:"
                                               "\n%s" % (p[0], p[1], out)))
            want = "-" if r["lag"] == -1 else ">=%d" % r["lag"]
            h.check(row["LAG"] == want and row["STATE"] == "STALLED",
                    self._say("--describe shows LAG %r STATE %r for %s-%d, "
                              "want LAG %r (the source end is %d ms old) "
                              "and STALLED:\n%s"
                              % (row["LAG"], row["STATE"], p[0], p[1], want,
                                 r["sourceOffsetAgeMs"], out)))
            h.check(row["LAG-TIME"] not in ("-", "0s"),
                    self._say("--describe shows LAG-TIME %r for %s-%d while "
                              "nothing was read for %d ms:\n%s"
                              % (row["LAG-TIME"], p[0], p[1],
                                 r["sourceOffsetAgeMs"], out)))
        text2 = d.metrics()
        fams = ("mirrord_mirror_source_up", "mirrord_mirror_source_errors_total",
                "mirrord_mirror_stalled_partitions",
                "mirrord_mirror_source_seconds_since_success",
                "mirrord_partition_lag_seconds",
                "mirrord_partition_stalled_seconds")
        shown = metric_lines(text2, *fams)
        up = metric_series(text2, "mirrord_mirror_source_up", mirror=m)
        h.check(up == 0, self._say("/metrics has mirrord_mirror_source_up"
                                   "{mirror=\"%s\"} %r, want 0:\n%s"
                                   % (m, up, shown)))
        errs = metric_series(text2, "mirrord_mirror_source_errors_total",
                             mirror=m, cause=self.metric_cause)
        h.check(errs is not None and errs > 0,
                self._say("/metrics has mirrord_mirror_source_errors_total"
                          "{cause=\"%s\"} %r, want > 0:\n%s"
                          % (self.metric_cause, errs, shown)))
        st = metric_series(text2, "mirrord_mirror_stalled_partitions", mirror=m)
        h.check(st == len(self.parts),
                self._say("/metrics has mirrord_mirror_stalled_partitions %r, "
                          "want %d:\n%s" % (st, len(self.parts), shown)))
        a = metric_series(text1, "mirrord_mirror_source_seconds_since_success",
                          mirror=m, request="Fetch")
        b = metric_series(text2, "mirrord_mirror_source_seconds_since_success",
                          mirror=m, request="Fetch")
        h.check(a is not None and b is not None and
                (b > a >= 0 or not self.whole_source),
                self._say("mirrord_mirror_source_seconds_since_success"
                          "{request=\"Fetch\"} does not grow: %r then %r:\n%s"
                          % (a, b, shown)))
        for t, p in self.parts:
            lab = dict(mirror=m, topic=t, partition=str(p))
            a = metric_series(text1, "mirrord_partition_lag_seconds", **lab)
            b = metric_series(text2, "mirrord_partition_lag_seconds", **lab)
            h.check(a is not None and b is not None and b > a,
                    self._say("mirrord_partition_lag_seconds of %s-%d does "
                              "not grow: %r then %r:\n%s" % (t, p, a, b, shown)))
            s = metric_series(text2, "mirrord_partition_stalled_seconds", **lab)
            h.check(s is not None and s > 0,
                    self._say("mirrord_partition_stalled_seconds of %s-%d is "
                              "%r, want > 0:\n%s" % (t, p, s, shown)))
        code, body = http_get(d.metrics_port, "/mirrors/%s/ready" % m)
        h.check(code == 503 and len(body.strip().splitlines()) == 1,
                self._say("GET /mirrors/%s/ready answered %d %r, want 503 "
                          "and one line saying why" % (m, code, body)))
        code, body = http_get(d.metrics_port, "/mirrors")
        mine = None
        try:
            mine = [x for x in json.loads(body) if x.get("mirror") == m]
        except (ValueError, AttributeError, TypeError):
            pass
        h.check(code == 200 and mine and mine[0].get("sourceUp") is False and
                mine[0].get("stalledPartitions") == len(self.parts) and
                mine[0].get("reason"),
                self._say("GET /mirrors answered %d %r, want mirror %s with "
                          "sourceUp false, stalledPartitions %d and a reason"
                          % (code, body, m, len(self.parts))))
        code, body = d.readyz()
        h.check(code == 503 and "sources readable" in body,
                self._say("GET /readyz answered %d %r, want 503 failing "
                          "\"sources readable\"" % (code, body)))
        print("%s: as the operator sees it:\n%s\n%s\n/mirrors/%s/ready: %s"
              % (self.what, out, shown, m,
                 http_get(d.metrics_port, "/mirrors/%s/ready" % m)[1].strip()),
              flush=True)

    def check_recovered(self, src, dst, layout, timeout=120):
        """After the cure: no partition of the mirror STALLED any more, every
        partition of layout ({topic: npartitions}) caught up (MIRRORING,
        lag 0), the destination ends where the source ends with the same
        records at the same offsets and the same batches (nothing lost,
        nothing twice), source_up 1, no stalled partition, the mirror's
        /ready 200 and /readyz 200.  src and dst: bootstraps the test's
        own clients read (PLAINTEXT)."""
        d, m = self.d, self.mirror
        try:
            wait_caught_up(d, m, timeout, "caught up", fail_on_failed=True,
                           row_ok=lambda r: r.get("stalled") is False and
                           r.get("stalledReason") is None)
        except AssertionError as e:
            h.fail(self._say("after the cure the mirror does not catch up: "
                             "%s\n--describe:\n%s"
                             % (e, describe_table(d, m)[0])))
        want = {}
        for t, n in sorted(layout.items()):
            ends = wait_same_ends(src, dst, t, n, timeout, d.proc.log_path)
            want.update({(t, p): e for p, e in enumerate(ends)})
            same_batches(src, dst, t, range(n))
        check_same_records(src, dst, want, "sf-%d" % os.getpid())
        text = d.metrics()
        shown = metric_lines(text, "mirrord_mirror_source_up",
                             "mirrord_mirror_stalled_partitions")
        h.check(metric_series(text, "mirrord_mirror_source_up", mirror=m) == 1
                and metric_series(text, "mirrord_mirror_stalled_partitions",
                                  mirror=m) == 0,
                self._say("after the cure /metrics shows:\n%s\nwant source_up "
                          "1 and no stalled partition" % shown))
        code, body = http_get(d.metrics_port, "/mirrors/%s/ready" % m)
        h.check(code == 200 and body.startswith("current: "),
                self._say("after the cure GET /mirrors/%s/ready answered %d "
                          "%r, want 200 \"current\"" % (m, code, body)))
        h.wait_for(lambda: d.readyz()[0] == 200, 10,
                   self._say("/readyz 200 after the cure (now %r)"
                             % (d.readyz(),)))
        print("%s: cured, %d records equal at the same offsets"
              % (self.what, sum(want.values())), flush=True)
        return want
