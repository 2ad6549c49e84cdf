#!/usr/bin/env python3
"""A mirror's settings through the real kafka-mirrors and mirrord, with
librdkafka mock clusters as source and destination:

- `--describe --config` (DescribeMirrors' pattern tags, DescribeConfigs on
  resource type 64 CLUSTER_MIRROR): saved include and exclude patterns and
  the configs, secrets masked in the text and in --json, and nowhere in
  the output or, in clear, in the metadata log;
- `--alter` (IncrementalAlterConfigs): set, delete, --mirror-config FILE;
  refusals naming the key (a bad value, an unknown key, deleting
  bootstrap.servers), an unknown mirror; the change survives a restart;
- RemoveTopicsFromMirror with patterns: a saved include pattern is removed
  (said so), a pattern matching topics is excluded (said so), a pattern
  that is neither and matches nothing is refused, changing nothing;
- ApiVersions lists DescribeConfigs (32) and IncrementalAlterConfigs (44).
"""

import json
import os
import struct
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402
import mirrordtest as mt  # noqa: E402

SECRET = "Old-s3cret-Pa55"
NEWSECRET = "New-s3cret-Pa55"


def config_text(d, mirror):
    return d.cli_ok("--describe", "--mirror", mirror, "--config").stdout


MC = []


def main():
    mc, src, dst = mt.mock_pair({"orders": 2, "zzz1": 1, "audit": 1})
    MC.append(mc)
    d = mt.Mirrord(destination=dst)
    outputs = []

    # ---- ApiVersions lists the config APIs -------------------------------
    with mt.connect(d.bootstrap) as s:
        s.sendall(mt.frame(18, 0, 7))
        resp = mt.recv_frame(s)
    (corr, err, n) = struct.unpack(">ihi", resp[:10])
    keys = {}
    for i in range(n):
        k, lo, hi = struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i])
        keys[k] = (lo, hi)
    eq((err, keys.get(32), keys.get(44)), (0, (0, 4), (0, 1)),
       "ApiVersions: DescribeConfigs and IncrementalAlterConfigs served")

    # ---- --describe --config: patterns, configs, secrets masked ----------
    d.create("sec", {"bootstrap.servers": src,
                     "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": "mirror",
                     "sasl.password": SECRET,
                     "mirror.fetch.wait.max.ms": "200"})
    out = config_text(d, "sec")
    outputs.append(out)
    eq(out, "Mirror sec\n"
       "Include patterns: (none)\n"
       "Exclude patterns: (none)\n"
       "Configs:\n"
       "  bootstrap.servers=%s\n"
       "  mirror.fetch.wait.max.ms=200\n"
       "  sasl.mechanism=PLAIN\n"
       "  sasl.password=(sensitive)\n"
       "  sasl.username=mirror\n"
       "  security.protocol=SASL_PLAINTEXT\n" % src,
       "--describe --config of a mirror with a secret")
    r = d.cli_ok("--describe", "--mirror", "sec", "--config", "--json")
    outputs.append(r.stdout)
    j = json.loads(r.stdout)
    eq((j["mirror"], j["includePatterns"], j["excludePatterns"]),
       ("sec", [], []), "--config --json: name and patterns")
    eq([c for c in j["configs"] if c["name"] == "sasl.password"],
       [{"name": "sasl.password", "value": None, "sensitive": True}],
       "--config --json: the secret masked")
    eq([c for c in j["configs"] if c["name"] == "mirror.fetch.wait.max.ms"],
       [{"name": "mirror.fetch.wait.max.ms", "value": "200",
         "sensitive": False}], "--config --json: a plain config")

    # ---- --alter -----------------------------------------------------------
    r = d.cli_ok("--alter", "--mirror", "sec", "--add-config",
                 "mirror.fetch.wait.max.ms=300,mirror.fetch.max.bytes=65536")
    eq(r.stdout, "Altered the configs of mirror sec: 2 set, 0 deleted\n",
       "--alter --add-config output")
    out = config_text(d, "sec")
    h.check("  mirror.fetch.wait.max.ms=300\n" in out and
            "  mirror.fetch.max.bytes=65536\n" in out,
            "the altered configs are shown:\n" + out)
    # Refusals name the key; nothing changes.
    r = d.cli("--alter", "--mirror", "sec", "--add-config",
              "mirror.fetch.wait.max.ms=soon")
    mt.expect_error(r, "INVALID_CONFIG", "mirror.fetch.wait.max.ms")
    r = d.cli("--alter", "--mirror", "sec", "--add-config", "no.such.key=1")
    mt.expect_error(r, "INVALID_CONFIG", "no.such.key")
    r = d.cli("--alter", "--mirror", "sec", "--add-config",
              "security.protocol=bogus,sasl.password=" + NEWSECRET)
    mt.expect_error(r, "INVALID_CONFIG", "security.protocol")
    outputs += [r.stdout, r.stderr]
    r = d.cli("--alter", "--mirror", "sec", "--delete-config",
              "bootstrap.servers")
    mt.expect_error(r, "INVALID_CONFIG", "bootstrap.servers cannot be deleted")
    r = d.cli("--alter", "--mirror", "nosuch", "--add-config",
              "mirror.fetch.wait.max.ms=300")
    mt.expect_error(r, "UNKNOWN_CLUSTER_MIRROR", "mirror nosuch does not exist")
    r = d.cli("--alter", "--mirror", "sec")
    eq(r.returncode, 2, "--alter without a change is a usage error")
    h.check("--alter needs --add-config" in r.stderr, r.stderr)
    eq(config_text(d, "sec"), out, "refused alterations changed nothing")
    # A properties file: its keys are set, the others kept.
    path = os.path.join(d.dir, "rotate.properties")
    with open(path, "w") as f:
        f.write("sasl.password=%s\n" % NEWSECRET)
    r = d.cli_ok("--alter", "--mirror", "sec", "--mirror-config", path,
                 "--delete-config", "mirror.fetch.max.bytes")
    eq(r.stdout, "Altered the configs of mirror sec: 1 set, 1 deleted\n",
       "--alter --mirror-config --delete-config output")
    out = config_text(d, "sec")
    outputs.append(out)
    h.check("mirror.fetch.max.bytes" not in out and
            "  sasl.password=(sensitive)\n" in out and
            "  sasl.username=mirror\n" in out,
            "deleted key gone, secret still masked, others kept:\n" + out)
    for o in outputs:
        h.check(SECRET not in o and NEWSECRET not in o,
                "a secret was shown: " + o)
    eq(mt.files_holding(d.data_dir, NEWSECRET), [],
       "the new secret is sealed in the metadata log")
    eq(mt.files_holding(d.dir, NEWSECRET), [path],
       "the new secret is only in the operator's file")
    h.check(NEWSECRET not in d.log() and SECRET not in d.log(),
            "a secret in mirrord's log")
    # It survives a restart (replayed from the log, sealed value opened).
    d.stop()
    d.start()
    eq(config_text(d, "sec"), out, "the altered configs after a restart")

    # ---- RemoveTopicsFromMirror with patterns ----------------------------
    d.create("dc1", {"bootstrap.servers": src,
                     "mirror.metadata.refresh.interval.ms": "1000"})
    r = d.cli_ok("--add", "--mirror", "dc1", "--topic", "yyy.*")
    h.check("Patterns saved to mirror dc1" in r.stdout, r.stdout)
    d.cli_ok("--add", "--mirror", "dc1", "--topic", "zzz.*")
    d.cli_ok("--add", "--mirror", "dc1", "--topic", "orders")
    h.check(config_text(d, "dc1").startswith(
        "Mirror dc1\nInclude patterns: 'yyy.*', 'zzz.*'\n"
        "Exclude patterns: (none)\n"), "saved include patterns shown")
    # A saved include that matches nothing: removed, and said so.
    r = d.cli_ok("--remove", "--mirror", "dc1", "--topic", "yyy.*")
    eq(r.stdout, "Removed include pattern 'yyy.*' from mirror dc1: "
       "discovery no longer adds the topics it matches\n"
       "Stopped mirroring for 0 topic(s) in mirror dc1: []\n",
       "--remove of a saved include pattern")
    # Neither an include nor matching a topic: refused, nothing changed.
    r = d.cli("--remove", "--mirror", "dc1", "--topic", "nothing.*")
    mt.expect_error(r, "INVALID_REQUEST",
                    "pattern 'nothing.*' is not an include pattern of cluster "
                    "mirror 'dc1' and matches none of its topics; nothing was "
                    "changed (its include patterns are 'zzz.*')")
    eq(r.stdout, "", "nothing reported as done")
    # A saved include that matches a topic: removed, the topic stopped.
    r = d.cli_ok("--remove", "--mirror", "dc1", "--topic", "zzz.*")
    eq(r.stdout, "Removed include pattern 'zzz.*' from mirror dc1: "
       "discovery no longer adds the topics it matches\n"
       "Stopped mirroring for 1 topic(s) in mirror dc1: [zzz1]\n",
       "--remove of a saved include pattern matching a topic")
    # Not an include, matching a topic: the topic stops, it is excluded.
    r = d.cli_ok("--remove", "--mirror", "dc1", "--topic", "ord.*")
    eq(r.stdout, "Added exclude pattern 'ord.*' to mirror dc1: discovery "
       "skips the topics it matches\n"
       "Stopped mirroring for 1 topic(s) in mirror dc1: [orders]\n",
       "--remove of a pattern matching a mirrored topic")
    r = d.cli_ok("--describe", "--mirror", "dc1", "--config", "--json")
    j = json.loads(r.stdout)
    eq((j["includePatterns"], j["excludePatterns"]), ([], ["ord.*"]),
       "patterns after the removals")
    d.stop()
    d.start()
    r = d.cli_ok("--describe", "--mirror", "dc1", "--config", "--json")
    j = json.loads(r.stdout)
    eq((j["includePatterns"], j["excludePatterns"]), ([], ["ord.*"]),
       "patterns after a restart")
    d.stop()


h.run_main(main, lambda: MC and MC[0].kill())
