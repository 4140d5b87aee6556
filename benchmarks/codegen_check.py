"""Codegen check: random valid configs per op -> TVM schedule -> athread C -> gcc + swemu; output vs
TVM's llvm build of the op and the emulator's DMA request/byte counts vs the analysis layer.

Usage: python benchmarks/codegen_check.py [--per-op 200] [--jobs 2] [--share none,bcast,mesh] [--seed 0]
(--per-op is split over the op's workloads; a workload with no valid mesh config gets fewer.)
Last line: one JSON object (configs_checked, wrong_results, dma_count_mismatches, compile_failures,
seconds_per_config, ...).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _common import emit  # noqa: F401  (also puts the checkout on sys.path)

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.space.factory import space_for
from tuner.workloads import BatchMatmul, Conv2d, Dense

# small shapes (each run is fast) with ragged tiles, strides, padding, groups and depthwise
WORKLOADS = {
    "conv2d": [
        (Conv2d(1, 8, 9, 9, 8, 3, 3, pad_h=1, pad_w=1), "sw26010"),
        (Conv2d(2, 4, 11, 11, 8, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1), "sw26010"),
        (Conv2d(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=8), "sw26010"),
        (Conv2d(1, 4, 12, 12, 6, 3, 3, stride_h=2, stride_w=2, groups=2, dtype="float64"), "sw26010"),
        (Conv2d(1, 6, 8, 8, 6, 3, 3, pad_h=2, pad_w=2, dil_h=2, dil_w=2, groups=3), "sw26010-pro"),
    ],
    "dense": [
        (Dense(20, 24, 36), "sw26010"),
        (Dense(17, 12, 40, "float64"), "sw26010"),
        (Dense(33, 20, 28), "sw26010-pro"),
    ],
    "batch_matmul": [
        (BatchMatmul(3, 12, 10, 24), "sw26010"),
        (BatchMatmul(2, 9, 16, 20, "float64"), "sw26010"),
        (BatchMatmul(4, 8, 12, 16), "sw26010-pro"),
    ],
}


def configs_for(op: str, per_op: int, shares: tuple[str, ...], rng: np.random.Generator):
    wls = WORKLOADS[op]
    out = []
    for i, (wl, target) in enumerate(wls):
        n = per_op // len(wls) + (1 if i < per_op % len(wls) else 0)
        space = space_for(wl, target, restrict={"share": list(shares)} if shares else None)
        rows = space.sample(n, rng)
        out += [(wl, target, space.decode(r)) for r in rows]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-op", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--share", default="none,bcast,mesh", help="share choices to sample")
    ap.add_argument("--ops", default="conv2d,dense,batch_matmul")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-tir", dest="tir", action="store_false", help="skip the TIR-walk vs analysis check")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    shares = tuple(s for s in args.share.split(",") if s)
    backend = EmulatorBackend(workdir=args.workdir, keep=bool(args.workdir))
    backend.emulator_object()
    jobs = []
    for op in args.ops.split(","):
        jobs += [(op, *j) for j in configs_for(op, args.per_op, shares, rng)]
    start = time.perf_counter()

    def run(job):
        op, wl, target, cfg = job
        res = backend.measure(wl, target, [cfg])[0]
        tir = None
        if args.tir:  # the independent TIR walk (LDM and DMA per buffer) vs the analysis
            from tuner.codegen.schedule import build_schedule
            from tuner.codegen.tir_check import compare_with_analysis

            tir = compare_with_analysis(build_schedule(wl, target, cfg))
        return op, wl, target, cfg, res, tir

    status = Counter()
    per_op = Counter()
    mismatches = 0
    tir_mismatches = 0
    failures = []
    with ThreadPoolExecutor(max(1, min(args.jobs, 2))) as pool:
        for op, wl, target, cfg, res, tir in pool.map(run, jobs):
            if tir:
                tir_mismatches += 1
                failures.append((op, wl.key, target, cfg, "tir_check", str(tir)))
            status[res.status] += 1
            per_op[op] += 1
            bad_dma = res.ok and not res.details.get("dma_match", False)
            mismatches += bad_dma
            if not res.ok or bad_dma:
                failures.append((op, wl.key, target, cfg, res.status, res.error[:300],
                                 res.details.get("dma"), res.details.get("dma_expected")))
    elapsed = time.perf_counter() - start
    for f in failures[: (len(failures) if args.verbose else 15)]:
        print("FAIL", *f, file=sys.stderr)
    checked = sum(status.values())
    print(f"configs per op: {dict(per_op)}")
    print(f"statuses: {dict(status)}")
    print(f"DMA count mismatches (emulator vs analysis): {mismatches}; TIR walk vs analysis: "
          f"{tir_mismatches if args.tir else 'skipped'}; {elapsed / max(checked, 1):.2f} s per config")
    emit({
        "configs_checked": checked,
        "wrong_results": status.get("wrong_result", 0),
        "dma_count_mismatches": mismatches,
        "compile_failures": status.get("compile_error", 0),
        "runtime_errors": status.get("runtime_error", 0) + status.get("timeout", 0),
        "tir_check_mismatches": tir_mismatches if args.tir else None,
        "ldm_overflows": status.get("ldm_overflow", 0),
        "ok": status.get("ok", 0),
        "shares": list(shares),
        "seconds_per_config": round(elapsed / max(checked, 1), 3),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
