#!/usr/bin/env python3
"""The short seeded round of test/tools/torture.py that `make check` runs (a few
minutes on two cores): 75 s of faults from seed 8, every default class
(delete-records-mid included) and the compacted topic, unless TORTURE_SEED,
TORTURE_SECONDS, TORTURE_FAULTS or TORTURE_COMPACTED say otherwise.  See test/tools/torture.py for
the load, the faults and what the checker proves; `make torture` is the
long run."""

import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "lib")]
import harness as h  # noqa: E402

os.environ.setdefault("TORTURE_SECONDS", "75")
os.environ.setdefault("TORTURE_SEED", "8")
import torture  # noqa: E402


if __name__ == "__main__":
    h.run_main(torture.main)
