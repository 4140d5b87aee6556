"""Operators written as tensor expressions (examples/ops/): derived spaces, analysis speed, tuning gains,
and the built-in ops written as expressions against the built-in path.

Usage: python benchmarks/custom_ops.py [--trials 200] [--target sw26010] [--regression-configs 10000]

Per operator: the workload key, the space size, ``tuned_over_naive`` = the OpenACC-like baseline's
simulated time (tuner/baseline.py, the schedule `swtune demo` compares against) over the tuned best
after ``--trials`` model-guided measurements, and ``tuned_over_elementwise`` against the
space's element-wise naive config. ``analysis_configs_per_s``: the slowest operator's rate.
``builtin_regression``: dense, batch_matmul and conv2d written as expressions, analysed and simulated
on the same random configs as the built-in path; the largest relative differences.
``tile_check`` per operator (``--check-configs`` random valid configs of a small instance,
tuner/codegen/tilecheck.py): each output tile computed only from the operand boxes the schedule fetches,
against TVM's llvm run of the whole expression, and the DMA requests of those fetches against the
analysis. ``emulator_check`` per operator (``--emu-configs`` random valid configs of the same small
instance, tuner/backends/expr_check.py): the generated athread C (slave + host) built against swemu and
run, its output against TVM's llvm run, the emulator's DMA counters and the lowered TIR's DMA figures
against the analysis; a config that does not generate or build is a compile failure.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import fields, is_dataclass

import numpy as np
from _common import ROOT, emit

from tuner.backends.expr_check import emulator_check
from tuner.codegen.tilecheck import check_space
from tuner.expr.workload import ExprWorkload, workload_from_op
from tuner.measure.simulator import simulate
from tuner.space.expr_space import ExprSpace
from tuner.space.factory import space_for
from tuner.tune_expr import naive_and_baseline_seconds, tune_expr
from tuner.workloads import BatchMatmul, Conv2d, Dense

OPS = {  # name -> (FILE:FUNC under examples/ops, args, GEMM-like); tuned at the functions' default sizes
    "conv1d": ("conv.py:conv1d", {}, True),
    "conv3d": ("conv.py:conv3d", {}, True),
    "conv2d_transpose": ("conv.py:conv2d_transpose", {}, True),
    "depthwise_separable": ("conv.py:depthwise_separable", {}, True),
    "gemv": ("linalg.py:gemv", {}, False),
    "batch_matmul_at": ("linalg.py:batch_matmul_at", {}, True),
    "weighted_gemm": ("linalg.py:weighted_gemm", {}, True),
    "attention_score": ("linalg.py:attention_score", {}, True),
    "stencil5": ("stencil.py:stencil5", {}, False),
    "max_plus": ("stencil.py:max_plus", {}, True),
    "l1_distance": ("mathfn.py:l1_distance", {}, True),  # te.abs: vector fabs
    "exp_gemm": ("mathfn.py:exp_gemm", {}, True),  # te.exp: a libm call, scalar only
}
# Small instances for the tile check (every tile is executed in numpy): ragged tiles, strides, halos.
CHECK_ARGS = {
    "conv1d": {"n": 2, "c": 6, "w": 19, "k": 10, "s": 3, "stride": 2},
    "conv3d": {"n": 1, "c": 3, "d": 6, "h": 7, "w": 8, "k": 5, "r": 3},
    "conv2d_transpose": {"n": 1, "c": 4, "h": 5, "w": 6, "k": 6, "r": 3},
    "depthwise_separable": {"n": 1, "c": 6, "h": 9, "w": 10, "k": 7, "r": 3},
    "gemv": {"m": 40, "k": 36},
    "batch_matmul_at": {"b": 3, "m": 10, "n": 12, "k": 14},
    "weighted_gemm": {"m": 24, "n": 20, "k": 36},
    "attention_score": {"batch": 1, "heads": 2, "seq": 12, "d": 8},
    "stencil5": {"h": 14, "w": 18},
    "max_plus": {"m": 12, "n": 16, "k": 20},
    "l1_distance": {"m": 12, "n": 10, "d": 9},
    "exp_gemm": {"m": 12, "n": 10, "k": 9},
}


def analysis_rate(space: ExprSpace, n: int = 100_000) -> float:
    idx = np.random.default_rng(0).integers(0, space.sizes, size=(n, len(space.sizes)))
    space.analyze(idx[:1000])
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        space.analyze(idx)
        best = min(best, time.perf_counter() - start)
    return n / best


def builtin_expressions() -> list[tuple[object, list]]:
    from tvm import te

    def dense(m, n, k):
        a, w = te.placeholder((m, k), name="data"), te.placeholder((n, k), name="weight")
        rk = te.reduce_axis((0, k), name="k")
        return [a, w, te.compute((m, n), lambda m, n: te.sum(a[m, rk] * w[n, rk], axis=rk), name="dense")]

    def bmm(b, m, n, k):
        x, y = te.placeholder((b, m, k), name="A"), te.placeholder((b, n, k), name="B")
        rk = te.reduce_axis((0, k), name="k")
        return [x, y, te.compute((b, m, n), lambda b, m, n: te.sum(x[b, m, rk] * y[b, n, rk], axis=rk), name="bmm")]

    def conv(n, c, h, w, k, r, s, st, dil=1):
        # the built-in conv's data layout [N, G, C/G, H, W] with G = 1 (tuner/codegen/te_ops.py): the
        # unit G dimension stops a strided DMA descriptor from spanning n (one descriptor per image)
        x, wt = te.placeholder((n, 1, c, h, w), name="data"), te.placeholder((k, c, r, s), name="weight")
        rc = te.reduce_axis((0, c), name="c")
        rr, rs = te.reduce_axis((0, r), name="r"), te.reduce_axis((0, s), name="s")
        shape = (n, k, (h - dil * (r - 1) - 1) // st + 1, (w - dil * (s - 1) - 1) // st + 1)
        return [x, wt, te.compute(shape, lambda n, k, oh, ow: te.sum(
            x[n, 0, rc, oh * st + rr * dil, ow * st + rs * dil] * wt[k, rc, rr, rs], axis=[rc, rr, rs]), name="conv")]

    # AlexNet-sized layers, and a strided dilated conv (over an already padded input: the expression path
    # has no host pre-pass)
    return [(Dense(1, 4096, 9216), dense(1, 4096, 9216)), (BatchMatmul(12, 128, 128, 64), bmm(12, 128, 128, 64)),
            (Conv2d(1, 96, 31, 31, 256, 5, 5), conv(1, 96, 31, 31, 256, 5, 5, 1)),
            (Conv2d(2, 64, 29, 29, 96, 3, 3, stride_h=2, stride_w=2, dil_h=2, dil_w=2),
             conv(2, 64, 29, 29, 96, 3, 3, 2, 2))]


def analysis_arrays(a: object) -> dict[str, np.ndarray]:
    """Every per-config figure of an Analysis, nested plans flattened (``a.requests``, ``compute.cycles``)."""
    out: dict[str, np.ndarray] = {}
    for f in fields(a):  # type: ignore[arg-type]
        value = getattr(a, f.name)
        if is_dataclass(value):
            out.update({f"{f.name}.{k}": v for k, v in analysis_arrays(value).items()})
        elif isinstance(value, np.ndarray):
            out[f.name] = value.astype(float)
    return out


def regression(n_configs: int, target: str) -> dict[str, dict[str, float]]:
    """Built-in ops through their own spec vs written as expressions through the generic path: every
    analysis figure and the simulated time on the same random configs (keyed by op, a second conv
    instance as conv2d_strided_dilated)."""
    out = {}
    for builtin, tensors in builtin_expressions():
        old, new = space_for(builtin, target), space_for(ExprWorkload.from_tensors(tensors), target)
        rows = np.random.default_rng(2).integers(0, old.sizes, size=(n_configs, len(old.sizes)))
        new_rows = np.stack([new.encode(old.decode(r)) for r in rows])
        a_old, a_new = old.analyze(rows), new.analyze(new_rows)
        x_all, y_all = analysis_arrays(a_old), analysis_arrays(a_new)
        diffs = {f: float(np.max(np.abs(x - y_all[f]) / np.maximum(np.abs(x), 1e-12))) for f, x in x_all.items()}
        t_old, t_new = simulate(old, rows, a_old), simulate(new, new_rows, a_new)
        both = np.isfinite(t_old) & np.isfinite(t_new)
        key = builtin.op if builtin.op not in out else f"{builtin.op}_strided_dilated"
        out[key] = {
            "configs": n_configs, "valid": int(a_old.valid.sum()), "fields_compared": len(diffs),
            "validity_mismatches": int((a_old.valid != a_new.valid).sum()),
            "reason_mismatches": int((a_old.reason != a_new.reason).sum()),
            "max_rel_diff_analysis": max(diffs.values()),
            "max_rel_diff_sim_time": (float(np.max(np.abs(t_old[both] - t_new[both]) / t_old[both]))
                                      if both.any() else 0.0),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--target", default="sw26010")
    p.add_argument("--regression-configs", type=int, default=10_000)
    p.add_argument("--check-configs", type=int, default=50)
    p.add_argument("--emu-configs", type=int, default=50)
    args = p.parse_args()
    ops: dict[str, dict[str, object]] = {}
    rates = []
    for name, (ref, kwargs, gemm_like) in OPS.items():
        start = time.perf_counter()
        wl = workload_from_op(str(ROOT / "examples" / "ops" / ref), kwargs)
        space = space_for(wl, args.target)
        rate = analysis_rate(space)
        rates.append(rate)
        result = tune_expr(wl, args.target, trials=args.trials, seed=0)
        naive, baseline = naive_and_baseline_seconds(space)
        geo = space.geometry
        ops[name] = {
            "workload": wl.key, "gemm_like": gemm_like, "space_points": float(space.size),
            "rows": list(geo.row_axes), "cols": list(geo.col_axes), "tiled_reduction": geo.red_axis.name,
            "operands": {op.access.tensor: op.group for op in geo.operands},
            "gflops": wl.flops / result.best_time / 1e9, "best_time_s": result.best_time,
            "openacc_time_s": baseline, "tuned_over_naive": baseline / result.best_time,
            "tuned_over_elementwise": naive / result.best_time, "analysis_configs_per_s": rate,
            "seconds": time.perf_counter() - start,
        }
        small = space_for(workload_from_op(str(ROOT / "examples" / "ops" / ref), CHECK_ARGS[name]), args.target)
        check = check_space(small, args.check_configs, seed=0)
        ops[name]["tile_check"] = {"workload": small.workload.key, **check.as_json()}
        emu_start = time.perf_counter()
        emu = emulator_check(small, args.emu_configs, seed=0)
        ops[name]["emulator_check"] = {"workload": small.workload.key, **emu.as_json(),
                                       "seconds": time.perf_counter() - emu_start}
        print(f"{name:22s} {wl.key:44s} x{baseline / result.best_time:7.1f} over OpenACC-like, "
              f"{wl.flops / result.best_time / 1e9:7.1f} GFLOPS, {rate:,.0f} configs/s, tile check "
              f"{check.configs_checked} configs, {check.wrong_results} wrong, "
              f"{check.dma_count_mismatches} DMA mismatches; emulator {emu.configs_checked} configs, "
              f"{emu.wrong_results} wrong, {emu.dma_count_mismatches} DMA / {emu.tir_mismatches} TIR mismatches, "
              f"{emu.compile_failures} compile failures", flush=True)
    reg = regression(args.regression_configs, args.target)
    gemm = [o["tuned_over_naive"] for o in ops.values() if o["gemm_like"]]
    emit({
        "ops": ops, "n_ops": len(ops), "target": args.target, "trials": args.trials,
        "min_tuned_over_naive_gemm_like": min(gemm),  # type: ignore[type-var]
        "analysis_configs_per_s": min(rates),
        "builtin_regression": reg,
        "tile_check_totals": {k: sum(o["tile_check"][k] for o in ops.values())  # type: ignore[index,misc]
                              for k in ("configs_checked", "wrong_results", "dma_count_mismatches")},
        "emulator_totals": {k: sum(o["emulator_check"][k] for o in ops.values())  # type: ignore[index,misc]
                            for k in ("configs_checked", "wrong_results", "dma_count_mismatches",
                                      "tir_mismatches", "compile_failures", "runtime_errors")},
        "min_emulator_configs_per_op": min(o["emulator_check"]["configs_checked"]  # type: ignore[index]
                                           for o in ops.values()),
    })


if __name__ == "__main__":
    main()
