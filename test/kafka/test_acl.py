#!/usr/bin/env python3
"""StandardAuthorizer variant: the super user may do anything, another user
is denied until granted ACLs, and a wrong password is refused."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness as h  # noqa: E402

if not shutil.which("kcat"):
    h.skip("real Kafka tier: kcat not found (install kcat)")
c, = h.private_kafka(1, "acl")
h.check(c.to_dict()["super_user"] == "admin", "super user %r"
        % c.to_dict()["super_user"])
c.create_topic("acl-t")

p = h.kcat(["-P", "-t", "acl-t"] + c.kcat_args(user="admin"), input="a1\n")
h.check(p.returncode == 0, "super user produce: %s" % p.stderr)
p = h.kcat(["-P", "-t", "acl-t"] + c.kcat_args(user="bob"), input="b1\n")
h.check(p.returncode != 0 and "Topic authorization failed" in p.stderr,
        "bob produced without an ACL: rc %d %s" % (p.returncode, p.stderr))
p = h.kcat(["-C", "-t", "acl-t", "-e", "-q"] + c.kcat_args(user="bob"))
h.check(p.returncode != 0, "bob consumed without an ACL: %r" % p.stdout)

c.grant("User:bob", ["WRITE", "DESCRIBE", "READ"], topic="acl-t")
# ACLs reach the broker's authorizer through the metadata log: wait for it.
h.wait_for(lambda: h.kcat(["-P", "-t", "acl-t"] + c.kcat_args(user="bob"),
                          input="b2\n").returncode == 0,
           30, "bob's WRITE ACL to take effect")
p = h.kcat(["-C", "-t", "acl-t", "-e", "-q"] + c.kcat_args(user="bob"))
h.check(p.returncode == 0 and p.stdout == "a1\nb2\n",
        "bob consume after grant: %r %s" % (p.stdout, p.stderr))

p = h.kcat(["-P", "-t", "acl-t"] + c.kcat_args(user="admin", password="nope"),
           input="x\n")
h.check(p.returncode != 0 and "Invalid username or password" in p.stderr,
        "wrong super user password accepted: %s" % p.stderr)
print("PASS: StandardAuthorizer with super user admin on %s" % c.bootstrap)
