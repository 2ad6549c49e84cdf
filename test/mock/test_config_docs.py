"""The documents generated from the config key tables are in step.

- etc/mirrord.yaml is exactly what `config_docgen example` writes from the
  table in lib/config/daemonconf.c, and it loads (`config_docgen check`);
- the key list of man/mirrord.yaml.5 (between the GENERATED KEYS markers)
  is exactly what `config_docgen mdoc` writes, and every key there has its
  type, default and reload behaviour;
- the page is clean under `mandoc -Tlint` (style messages included; only
  references to pages not installed on this machine are tolerated).

On drift it prints a diff and the command that regenerates the file.
"""

import difflib
import os
import re
import shutil
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402

BEGIN = '.\\" BEGIN GENERATED KEYS\n'
END = '.\\" END GENERATED KEYS\n'


def docgen(*args):
    prog = os.path.join(h.BUILD, "test", "tools", "config_docgen")
    if not os.path.exists(prog):
        h.fail("%s is not built (make check builds it)" % prog)
    r = subprocess.run([prog] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    return r.returncode, r.stdout, r.stderr


def diff(want, got, wname, gname):
    return "".join(difflib.unified_diff(want.splitlines(True),
                                        got.splitlines(True), wname, gname))


def main():
    problems = []

    # 1. The annotated example.
    rc, example, err = docgen("example")
    if rc != 0:
        h.fail("config_docgen example failed: %s" % err)
    path = os.path.join(h.SRC, "etc", "mirrord.yaml")
    with open(path) as f:
        committed = f.read()
    if committed != example:
        problems.append(
            "etc/mirrord.yaml differs from the key table; regenerate with\n"
            "  test/tools/config_docgen example > etc/mirrord.yaml\n" +
            diff(committed, example, "etc/mirrord.yaml (committed)",
                 "config_docgen example"))
    else:
        print("ok: etc/mirrord.yaml matches the key table")
    rc, out, err = docgen("check", path)
    if rc != 0:
        problems.append("etc/mirrord.yaml does not load:\n" + err)
    else:
        print("ok: etc/mirrord.yaml loads")

    # 2. The man page's key list.
    rc, mdoc, err = docgen("mdoc")
    if rc != 0:
        h.fail("config_docgen mdoc failed: %s" % err)
    page = os.path.join(h.SRC, "man", "mirrord.yaml.5")
    with open(page) as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        h.fail("man/mirrord.yaml.5 must hold exactly one %r and one %r line"
               % (BEGIN.strip(), END.strip()))
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    if block != mdoc:
        problems.append(
            "the key list in man/mirrord.yaml.5 differs from the key table;"
            " replace the lines between the GENERATED KEYS markers with the"
            " output of\n  test/tools/config_docgen mdoc\n" +
            diff(block, mdoc, "man/mirrord.yaml.5 (committed)",
                 "config_docgen mdoc"))
    else:
        print("ok: man/mirrord.yaml.5 key list matches the key table")

    # Every key of the table (the example's keys) has an entry with its
    # type, default and reload behaviour.
    sections = re.split(r"^\.It Ic ", block, flags=re.M)[1:]
    entries = {s.split(None, 1)[0]: s for s in sections}
    section = None
    keys = []
    for line in example.splitlines():
        m = re.match(r"^([a-z_]+):$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^  #?([a-z_]+):", line)
        if m and section:
            keys.append(section + "." + m.group(1))
    if len(keys) < 15:
        problems.append("found only %d keys in the example: %r" % (len(keys), keys))
    for key in keys:
        body = entries.get(key)
        if body is None:
            problems.append("man/mirrord.yaml.5 does not document %s" % key)
            continue
        flat = " ".join(body.split())
        for what in ("Type:", "Default:", "Reload:"):
            if what not in flat:
                problems.append("man/mirrord.yaml.5: %s has no %s" % (key, what))
    print("ok: checked %d keys for type, default and reload" % len(keys))

    # 2b. A page that carries the mirror config reference (between
    # ".\" BEGIN GENERATED MIRROR CONFIGS" and ".\" END GENERATED MIRROR
    # CONFIGS") carries exactly what `config_docgen mirror-mdoc` writes.
    rc, mirror_mdoc, err = docgen("mirror-mdoc")
    if rc != 0:
        h.fail("config_docgen mirror-mdoc failed: %s" % err)
    mbegin = '.\\" BEGIN GENERATED MIRROR CONFIGS\n'
    mend = '.\\" END GENERATED MIRROR CONFIGS\n'
    mandir = os.path.join(h.SRC, "man")
    carriers = 0
    for name in sorted(os.listdir(mandir)):
        if not re.match(r".*\.[1-9]$", name):
            continue
        with open(os.path.join(mandir, name)) as f:
            t = f.read()
        if mbegin not in t:
            continue
        carriers += 1
        if mend not in t:
            problems.append("man/%s: %r without %r" % (name, mbegin.strip(), mend.strip()))
            continue
        got = t[t.index(mbegin) + len(mbegin):t.index(mend)]
        if got != mirror_mdoc:
            problems.append(
                "the mirror config reference in man/%s differs from the table in"
                " lib/config/mirrorconf.c; replace it with the output of\n"
                "  test/tools/config_docgen mirror-mdoc\n" % name +
                diff(got, mirror_mdoc, "man/%s (committed)" % name,
                     "config_docgen mirror-mdoc"))
        else:
            print("ok: man/%s mirror config reference matches the table" % name)
    if carriers == 0:
        print("note: no page carries the generated mirror config reference")

    # 3. mandoc lint, style level included.
    if shutil.which("mandoc"):
        r = subprocess.run(["mandoc", "-Tlint", page], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        msgs = [m for m in r.stdout.splitlines()
                if m and "referenced manual not found" not in m]
        if msgs:
            problems.append("mandoc -Tlint man/mirrord.yaml.5:\n" + "\n".join(msgs))
        else:
            print("ok: mandoc -Tlint is clean")
    else:
        print("note: mandoc not installed; lint not run")

    if problems:
        for p in problems:
            print("FAIL: " + p)
        sys.exit(1)


if __name__ == "__main__":
    main()
