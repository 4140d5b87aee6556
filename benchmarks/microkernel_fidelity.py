"""How often the generated acc = "reg" micro-kernel issues what tuner/space/compute.py charges.

    python benchmarks/microkernel_fidelity.py [--per-workload 5] [--seed 0]

Samples valid SIMD configs with ``acc = "reg"`` of the codegen-check workloads (sw26010), generates
the slave C and counts the first innermost loop holding vector FMAs (as
tests/codegen_tests/test_microkernel.py does for the best DGEMM and conv configs): vector FMAs vs the
model's FMAs, LDM loads vs its operand loads (an unaligned load, charged as two loads and a merge,
counts once when the model charges one), and whether the output is touched inside. A config "agrees"
when all match exactly; a GEMM config with a reduction tile of 1 has no reduction loop to count
and is tallied apart. Last line: one JSON object with counts per (op, inner axis).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from _common import emit  # noqa: F401  (also puts the checkout on sys.path)
from codegen_check import WORKLOADS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "codegen_tests"))
from test_microkernel import counts, innermost_fma_loop, model  # noqa: E402

from tuner.codegen.sources import generate  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-workload", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tally: Counter = Counter()
    for op, cases in WORKLOADS.items():
        for wl, target in cases:
            if target != "sw26010":
                continue
            space = space_for(wl, target)
            pool = space.sample(4000, rng)
            picked = 0
            for i in np.flatnonzero(space.analyze(pool).valid):
                cfg = space.decode(pool[i])
                if cfg.get("acc") != "reg" or int(cfg["simd"]) == 1 or picked >= args.per_workload:
                    continue
                picked += 1
                if int(cfg[f"tile_{space.geometry.red_axis.name}"]) == 1 and op != "conv2d":
                    # one reduction index per chunk: the block has no reduction loop (straight-line
                    # code per block), so there is no loop body to count
                    tally[f"{op}/inner={cfg['inner']}/no_reduction_loop"] += 1
                    continue
                m = model(wl, cfg)
                try:
                    c = counts(innermost_fma_loop(generate(wl, target, cfg).files["slave.c"]))
                    agree = (c["fma"] == m["u"] and abs(c["loads"] - m["operand_p1"]) < 1e-9
                             and c["output_refs"] == 0 and (c["unaligned"] > 0) == (m["unaligned"] > 0))
                    verdict = "agree" if agree else "differ"
                except AssertionError:  # no register-block loop in the C (no micro-kernel printed)
                    verdict = "no_block"
                tally[f"{op}/inner={cfg['inner']}/{verdict}"] += 1
                print(op, wl.key, cfg, verdict, flush=True)
    total = sum(tally.values())
    emit({"configs": total, "agree": sum(v for k, v in tally.items() if k.endswith("/agree")),
          "by_op_inner": dict(sorted(tally.items()))})


if __name__ == "__main__":
    main()
