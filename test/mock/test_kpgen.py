#!/usr/bin/env python3
"""kpgen rejects broken specs, naming the file, line, column and the problem.

Each case writes a small request/response spec pair with one mistake, runs
proto/kpgen on it, and expects exit status 1, no output files, and exactly
the expected "file:line:col: message" (plus the error count) on stderr.  A
good pair must generate.
"""
import os
import subprocess
import sys
import tempfile

GOOD_REQ = """name: FooRequest
apiKey: 900
type: request
validVersions: "0-2"
flexibleVersions: "1+"
fields:
  - { name: Name, type: string, versions: "0+" }
  - name: Items
    type: "[]Item"
    versions: "0+"
    fields:
      - { name: Id, type: int32, versions: "0+" }
  - { name: Note, type: string, versions: "1+", tag: 0, taggedVersions: "1+", nullableVersions: "1+", default: "null" }
"""
GOOD_RESP = """name: FooResponse
apiKey: 900
type: response
validVersions: "0-2"
flexibleVersions: "1+"
fields:
  - { name: ErrorCode, type: int16, versions: "0+" }
"""

# (description, request text, expected (line, col, fragment)) -- the
# response spec stays GOOD_RESP unless the request text is None.
CASES = [
    ("unknown key", GOOD_REQ.replace("type: request", "type: request\nservedVersion: \"0\""),
     (4, 1, "unknown key 'servedVersion' in a message")),
    ("unknown type", GOOD_REQ.replace("type: int32", "type: int33"),
     (12, 27, "field Id: type 'int33' is neither a primitive type nor a struct with fields")),
    ("nullable int", GOOD_REQ.replace('{ name: Id, type: int32, versions: "0+" }',
                                      '{ name: Id, type: int32, versions: "0+", nullableVersions: "0+" }'),
     (12, 9, "field Id: only strings, bytes, records and arrays can be nullable")),
    ("tag before flexible", GOOD_REQ.replace('versions: "1+", tag: 0, taggedVersions: "1+"',
                                             'versions: "0+", tag: 0, taggedVersions: "0+"'),
     (13, 5, "field Note: tagged in versions that are not flexible")),
    ("bad range", GOOD_REQ.replace('validVersions: "0-2"', 'validVersions: "2-0"'),
     (4, 16, "validVersions: '2-0' is not a version range")),
    ("duplicate field", GOOD_REQ.replace("  - name: Items", "  - { name: Name, type: int8, versions: \"0+\" }\n  - name: Items"),
     (7, 3, "FooRequest: field Name appears twice")),
    ("bad default", GOOD_REQ.replace('{ name: Id, type: int32, versions: "0+" }',
                                     '{ name: Id, type: int8, versions: "0+", default: "300" }'),
     (12, 58, "field Id: default 300 out of range for the type")),
]


def run(kpgen, req, resp):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, text in (("FooRequest.yaml", req), ("FooResponse.yaml", resp)):
            if text is None:
                continue
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                f.write(text)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        p = subprocess.run([kpgen, "-o", out] + paths, capture_output=True, text=True, env=env)
        return p.returncode, p.stderr.replace(tmp + "/", ""), sorted(os.listdir(out))


def main():
    kpgen = os.path.join(os.environ.get("top_builddir", "."), "proto", "kpgen")
    rc, err, files = run(kpgen, GOOD_REQ, GOOD_RESP)
    if rc != 0 or files != ["kp_gen.c", "kp_gen.h", "kp_gen_fill.c", "kp_gen_fill.h"]:
        print("FAIL: the good spec pair did not generate (exit %d): %s %r" % (rc, err, files))
        sys.exit(1)
    failures = 0
    for what, req, (line, col, frag) in CASES:
        rc, err, files = run(kpgen, req, GOOD_RESP)
        want = "FooRequest.yaml:%d:%d: " % (line, col)
        if rc != 1 or files or (want + frag) not in err or err.count("\n") != 2:
            print("FAIL: %s: exit %d, files %r, stderr:\n%s\nexpected: %s%s"
                  % (what, rc, files, err, want, frag))
            failures += 1
    rc, err, files = run(kpgen, GOOD_REQ, None)
    if rc != 1 or "FooRequest (ApiKey 900) has no response spec" not in err or files:
        print("FAIL: a request without a response: exit %d, stderr %s" % (rc, err))
        failures += 1
    if failures:
        sys.exit(1)
    print("ok: %d broken specs rejected with their location" % (len(CASES) + 1))


if __name__ == "__main__":
    main()
