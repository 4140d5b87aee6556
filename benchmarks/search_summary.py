"""A fixed-seed search's summary: the check that a refactor left the tuner's behaviour unchanged.

Usage: python benchmarks/search_summary.py [--trials 24]

Tunes a fixed set of workloads (a GEMM, a conv, a depthwise conv and a batched matmul) with the
model-guided search on the simulator, seed 0, and prints every task's best config and time. The last
line is one JSON object with ``tasks`` (key -> best time and config) and ``combined``, one hash over
them: two commits with the same hash searched identically.
"""

from __future__ import annotations

import argparse
import hashlib
import json

from _common import emit  # noqa: F401  (also puts the checkout on sys.path)

from tuner.tune import tune_workloads
from tuner.workloads import BatchMatmul, Conv2d, Dense

WORKLOADS = [
    Dense(m=256, n=256, k=512),
    Conv2d(n=1, c=64, h=28, w=28, k=64, r=3, s=3, pad_h=1, pad_w=1),
    Conv2d(n=1, c=96, h=28, w=28, k=96, r=3, s=3, pad_h=1, pad_w=1, groups=96),
    BatchMatmul(b=4, m=128, n=64, k=128),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=24, help="trials per task")
    args = parser.parse_args()
    results = tune_workloads(WORKLOADS, "sw26010", trials=args.trials, seed=0)
    tasks = {r.workload.key: {"best_s": f"{r.best_time:.6e}", "config": r.best_config} for r in results}
    combined = hashlib.sha256(json.dumps(tasks, sort_keys=True, default=str).encode()).hexdigest()[:16]
    emit({"trials": args.trials, "tasks": tasks, "combined": combined})


if __name__ == "__main__":
    main()
