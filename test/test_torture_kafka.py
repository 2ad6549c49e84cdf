#!/usr/bin/env python3
"""The short seeded round of test/torture.py that `make check` runs (a few
minutes on two cores): 75 s of faults from seed 8, every default class,
without the compacted topic for now (see below), unless TORTURE_SEED,
TORTURE_SECONDS, TORTURE_FAULTS or TORTURE_COMPACTED say otherwise.  See test/torture.py for
the load, the faults and what the checker proves; `make torture` is the
long run."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

os.environ.setdefault("TORTURE_SECONDS", "75")
os.environ.setdefault("TORTURE_SEED", "8")
import torture  # noqa: E402

# The compacted topic is left out of the short round until compacted
# batches re-sent after an uncertain Produce land correctly (issue 8 item 1,
# fixed in parallel): on current main a kill -9 of mirrord or a destination
# broker restart while the compacted topic has a batch in flight ends that
# partition FAILED for good, "destination truncated: the destination
# partition ends at offset 13172, but mirrord wrote offset 13174 there"
# (`make torture` seed 5 with TORTURE_FAULTS=deny,kill,stop; seed
# 678273668 with the default classes: 3192/3193).  `make torture` keeps it.
os.environ.setdefault("TORTURE_COMPACTED", "0")

if __name__ == "__main__":
    h.run_main(torture.main)
