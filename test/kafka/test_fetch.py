#!/usr/bin/env python3
"""The broker fetch runs Maven once however many tests ask at the same
time, and a failed fetch turns into a SKIP naming the failure without
running Maven again for every test.  A stand-in `mvn` keeps this offline."""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

java = shutil.which("java")
if not java:
    h.skip("real Kafka tier: java not found (install openjdk-17-jdk-headless)")

FAKE_MVN = """#!/bin/sh
# Stand-in for mvn: count the call, then succeed or fail as told.
echo call >> "$FAKE_MVN_CALLS"
if [ -n "$FAKE_MVN_FAIL" ]; then echo "$FAKE_MVN_FAIL"; exit 1; fi
for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done
mkdir -p "$out" && : > "$out/kafka_2.13-4.4.0.jar"
# Stay a moment so that concurrent callers really overlap.
i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done
"""

code = ("import sys; sys.path.insert(0, %r); import realkafka as rk\n"
        "try:\n    print('LIBS', rk.ensure_libs())\n"
        "except rk.Unavailable as e:\n    print('SKIP:', e)\n"
        % h.src_path("test", "kafka"))

with tempfile.TemporaryDirectory(dir=h.build_path()) as tmp:
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir)
    os.symlink(os.path.realpath(java), os.path.join(bin_dir, "java"))
    mvn = os.path.join(bin_dir, "mvn")
    with open(mvn, "w") as f:
        f.write(FAKE_MVN)
    os.chmod(mvn, os.stat(mvn).st_mode | stat.S_IEXEC)
    calls = os.path.join(tmp, "calls")

    def start(cache, fail=""):
        env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
        env.update(PATH=bin_dir + ":/usr/bin:/bin", MIRRORD_KAFKA_CACHE=cache,
                   FAKE_MVN_CALLS=calls, FAKE_MVN_FAIL=fail)
        return subprocess.Popen([sys.executable, "-c", code], env=env,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

    def ncalls():
        try:
            with open(calls) as f:
                return len(f.read().split())
        except OSError:
            return 0

    # Four at once, one fetch.
    cache = os.path.join(tmp, "cache-ok")
    procs = [start(cache) for _ in range(4)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    want = "LIBS " + os.path.join(cache, "libs")
    h.check(outs == [want] * 4, "concurrent fetches said %r" % outs)
    h.check(ncalls() == 1, "mvn ran %d times for 4 concurrent tests" % ncalls())
    h.check(os.path.exists(os.path.join(cache, "libs", "kafka_2.13-4.4.0.jar")),
            "fetched jar missing")
    # Fetched once: later calls do not run mvn.
    out = start(cache).communicate(timeout=120)[0].strip()
    h.check(out == want and ncalls() == 1, "refetched: %r, %d calls" % (out, ncalls()))

    # A failing fetch: SKIP with mvn's words, remembered for the next test.
    os.unlink(calls)
    cache = os.path.join(tmp, "cache-bad")
    out = start(cache, fail="Could not resolve org.apache.kafka:kafka_2.13") \
        .communicate(timeout=120)[0].strip()
    h.check(out.startswith("SKIP: mvn failed to fetch Apache Kafka 4.4.0 (exit 1)")
            and "Could not resolve org.apache.kafka:kafka_2.13" in out,
            "failed fetch said %r" % out)
    out2 = start(cache, fail="second").communicate(timeout=120)[0].strip()
    h.check(out2 == out and ncalls() == 1,
            "after a failure: %r, mvn ran %d times" % (out2, ncalls()))
    h.check(not os.path.exists(os.path.join(cache, "libs")),
            "a failed fetch left a libs directory")
print("PASS: one mvn run for concurrent fetches; a failed fetch is a SKIP with its reason")
