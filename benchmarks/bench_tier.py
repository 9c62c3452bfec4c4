#!/usr/bin/env python3
"""The KV tier benchmark as a script (same as `python3 -m fxctl bench tier`); run as root from the repo root:

    python3 benchmarks/bench_tier.py [--size 32m --size 4m] [--total 4G] [--no-lmcache] [--dir ARRAY_MOUNT/x]

(`python3 -m fxctl -o json bench tier ...` prints the full result as JSON.)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fxctl.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["bench", "tier", *sys.argv[1:]])
