#!/usr/bin/env python3
"""kafka-mirrors' usage errors and defaults, as an operator meets them:

  * bare `kafka-mirrors` prints the whole usage (the text of --help) on
    standard error and exits 2;
  * every option that takes a value, given none (last on the line, followed
    by another option, or empty), says `option '--NAME' needs a value` and
    exits 2, the option named in full even when abbreviated; a value that
    only starts with dashes is still a value;
  * an option that takes no value given one says so;
  * without --bootstrap-server kafka-mirrors connects to 127.0.0.1:9192,
    mirrord's default server.listen (checked in a network namespace of its
    own, where that port is ours).
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402
from harness import eq  # noqa: E402

CLI = h.build_path("daemon", "kafka-mirrors")

# Every option that takes a value, with its alias.
VALUE_OPTIONS = ["--bootstrap-server", "--command-config", "--mirror",
                 "--mirror-config", "--topic", "--topics", "--exclude",
                 "--wait", "--resolution", "--add-config", "--delete-config"]


def run(*args, timeout=30):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def usage_error(r, message, what):
    eq(r.returncode, 2, "%s: exit status (stderr %r)" % (what, r.stderr))
    eq(r.stderr, "kafka-mirrors: %s\nTry 'kafka-mirrors --help'.\n" % message,
       what + ": stderr")
    eq(r.stdout, "", what + ": stdout")


def main():
    help_text = run("--help")
    eq(help_text.returncode, 0, "--help exit status")
    h.check(help_text.stdout.startswith("usage: kafka-mirrors"),
            "--help starts with the usage line: %r" % help_text.stdout[:80])

    # Bare: the whole usage, on stderr, exit 2.
    r = run()
    eq(r.returncode, 2, "bare kafka-mirrors: exit status")
    eq(r.stderr, help_text.stdout, "bare kafka-mirrors prints the full usage")
    eq(r.stdout, "", "bare kafka-mirrors: stdout")
    print("ok: bare kafka-mirrors prints the usage (%d lines) and exits 2"
          % help_text.stdout.count("\n"))

    # The value options listed here are those --help shows with a value.
    shown = set(re.findall(r"^  (--[a-z-]+) [A-Z]", help_text.stdout, re.M))
    shown |= set(re.findall(r"\(alias (--[a-z-]+)\)", help_text.stdout)) & {
        "--topics"}
    missing = shown - set(VALUE_OPTIONS)
    h.check(not missing, "options --help shows with a value that this test "
            "does not check: %s" % sorted(missing))

    for opt in VALUE_OPTIONS:
        want = "option '%s' needs a value" % opt
        usage_error(run("--list", opt), want, "%s last" % opt)
        usage_error(run(opt, "--list"), want, "%s followed by --list" % opt)
        usage_error(run(opt, "--describe", "--list"), want,
                    "%s followed by --describe" % opt)
        usage_error(run("--list", opt + "="), want, "%s= (empty)" % opt)
        usage_error(run("--list", opt, ""), want, "%s '' (empty)" % opt)
    print("ok: %d options without a value each say which needs one"
          % len(VALUE_OPTIONS))

    # Abbreviated as getopt allows: named in full.
    usage_error(run("--list", "--mirror-c"),
                "option '--mirror-config' needs a value", "--mirror-c last")
    usage_error(run("--bootstrap", "--list"),
                "option '--bootstrap-server' needs a value",
                "--bootstrap followed by --list")

    # A value that starts with dashes but names no option is a value: the
    # command goes on to connect (to a port nothing listens on).
    r = run("--delete", "--mirror", "--not-an-option", "--bootstrap-server",
            "127.0.0.1:1")
    eq(r.returncode, 3, "--mirror --not-an-option: taken as the name "
       "(stderr %r)" % r.stderr)

    usage_error(run("--list", "--json=yes"), "option '--json' takes no value",
                "--json=yes")
    usage_error(run("--list", "--frobnicate"), "unknown option '--frobnicate'",
                "an unknown option")
    print("ok: option values that start with dashes, options that take none, "
          "unknown options")

    # The default --bootstrap-server, where 127.0.0.1:9192 is ours: a
    # network namespace with only a loopback interface, a listener there
    # that accepts and closes.
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        print("note: unshare or ip missing; default --bootstrap-server "
              "checked by the error message only")
        r = run("--list")
        h.check(r.returncode == 3 and "127.0.0.1:9192" in r.stderr,
                "--list without --bootstrap-server: exit %d, %r"
                % (r.returncode, r.stderr))
        return
    probe = textwrap.dedent("""\
        import socket, subprocess, sys, threading
        s = socket.socket()
        s.bind(("127.0.0.1", 9192))
        s.listen(4)
        seen = []
        def serve():
            c, _ = s.accept()
            seen.append(1)
            c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        r = subprocess.run([sys.argv[1], "--list"], capture_output=True,
                           text=True, timeout=30)
        t.join(5)
        sys.stdout.write("%d %d\\n%s" % (r.returncode, len(seen), r.stderr))
        """)
    r = subprocess.run(["unshare", "-rn", "sh", "-c",
                        'ip link set lo up && exec python3 -c "$0" "$1"',
                        probe, CLI], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0 and "unshare" in r.stderr:
        print("note: no network namespace here (%s); default "
              "--bootstrap-server checked by the error message only"
              % r.stderr.strip())
        r = run("--list")
        h.check(r.returncode == 3 and "127.0.0.1:9192" in r.stderr,
                "--list without --bootstrap-server: exit %d, %r"
                % (r.returncode, r.stderr))
        return
    head, _, stderr = r.stdout.partition("\n")
    eq(head, "3 1", "kafka-mirrors --list without --bootstrap-server: exit "
       "status and connections to 127.0.0.1:9192 (stderr %r %r)"
       % (stderr, r.stderr))
    h.check(stderr.startswith("kafka-mirrors: 127.0.0.1:9192"),
            "the error names the default address: %r" % stderr)
    print("ok: without --bootstrap-server kafka-mirrors asks 127.0.0.1:9192")


if __name__ == "__main__":
    h.run_main(main)
