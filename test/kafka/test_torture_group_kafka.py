#!/usr/bin/env python3
"""The short seeded round of test/tools/torture.py's group mode that `make
check` runs: three instances on the replicated metadata log
(TORTURE_GROUP=3), 30 s of faults from seed 5 with every default class of
the group mode, unless TORTURE_SEED, TORTURE_SECONDS, TORTURE_FAULTS or
TORTURE_TXN_RATE say otherwise.  See test/tools/torture.py for the load,
the faults and what the checker proves; `make torture-group` is the long
run."""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402

os.environ["TORTURE_GROUP"] = "3"
os.environ.setdefault("TORTURE_SECONDS", "30")
os.environ.setdefault("TORTURE_SEED", "5")
import torture  # noqa: E402


if __name__ == "__main__":
    h.run_main(torture.main)
