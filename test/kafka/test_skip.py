#!/usr/bin/env python3
"""Without Java or Maven the tier SKIPs with one line naming what is
missing (exit 77), both from the launcher and through harness.real_kafka()."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

launcher = h.src_path("test", "kafka", "realkafka.py")
base = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}


def run(argv, path, cache):
    env = dict(base, PATH=path, MIRRORD_KAFKA_CACHE=cache)
    return subprocess.run(argv, env=env, capture_output=True, text=True,
                          timeout=120)


with tempfile.TemporaryDirectory(dir=h.build_path()) as tmp:
    cache = os.path.join(tmp, "cache")
    # No java at all.
    p = run([sys.executable, launcher, "fetch"], "/nonexistent", cache)
    h.check(p.returncode == 77, "launcher exit %d, want 77: %s%s"
            % (p.returncode, p.stdout, p.stderr))
    h.check(p.stdout.strip() == "SKIP: real Kafka tier: java not found "
            "(install openjdk-17-jdk-headless)", "launcher said %r" % p.stdout)

    code = ("import sys; sys.path.insert(0, %r); import harness; "
            "harness.real_kafka(); print('NOT SKIPPED')" % h.src_path("test", "lib"))
    p = run([sys.executable, "-c", code], "/nonexistent", cache)
    h.check(p.returncode == 77 and p.stdout.startswith(
        "SKIP: real Kafka tier: java not found"),
        "real_kafka() without java: exit %d %r %r"
        % (p.returncode, p.stdout, p.stderr))

    # Java but no Maven, nothing fetched yet: the reason names mvn.
    import shutil
    java = shutil.which("java")
    if java:
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        os.symlink(os.path.realpath(java), os.path.join(bin_dir, "java"))
        p = run([sys.executable, "-c", code], bin_dir, cache)
        h.check(p.returncode == 77 and p.stdout.strip() ==
                "SKIP: real Kafka tier: mvn not found (install maven)",
                "real_kafka() without mvn: exit %d %r %r"
                % (p.returncode, p.stdout, p.stderr))
        h.check(not os.path.exists(os.path.join(cache, "libs")),
                "a libs directory appeared without a fetch")
print("PASS: missing java and mvn give one SKIP line each")
