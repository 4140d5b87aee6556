"""How long `swtune check-op` takes at a user's shape: a 256x192x320 GEMM with a per-row scale
(examples/ops/linalg.py:row_scaled_gemm), 20 random configs, everything included (import, the tile check,
generating, building and running each config on the emulator, the lowered-TIR cross-check). The target
is at most 120 s on this 2-core machine (issue: gradients, item 5).

The command runs as a user runs it, in a fresh process; its wall time is the figure. ``--configs`` and
``--args`` change the operator's size or the count.

Last line: one JSON object (check_op_seconds_20_configs or check_op_seconds, the check's own figures).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import ROOT, emit

OP = "examples/ops/linalg.py:row_scaled_gemm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--args", default='{"m": 256, "n": 192, "k": 320}', help="JSON arguments of the operator")
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    command = [sys.executable, "-m", "cli", "check-op", OP, "--args", opts.args, "--configs", str(opts.configs),
               "--seed", str(opts.seed)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    if not lines:
        sys.exit(f"check-op printed nothing (exit {done.returncode}): {done.stderr[-2000:]}")
    check = json.loads(lines[-1])
    key = "check_op_seconds_20_configs" if opts.configs == 20 else "check_op_seconds"
    emit({key: round(seconds, 2), "configs": opts.configs, "operator": OP, "args": json.loads(opts.args),
          "exit_code": done.returncode, "within_120_s": seconds <= 120.0, **{k: v for k, v in check.items()
                                                                            if k != "problems"}})


if __name__ == "__main__":
    main()
