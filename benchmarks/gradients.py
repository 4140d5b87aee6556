"""Gradients derived from expressions (issue: gradients from expressions), measured end to end.

Figures, as the issue's acceptance names them:

* ``ops``: every operator of examples/ops/ (the user examples, and nn.py's layers written in stages:
  the built-in conv2d / dense / batch_matmul and the backward list), each differentiated by
  tuner/expr/autodiff.py and checked as ``swtune check-grad`` checks it: Richardson central
  differences in float64, torch autograd where torch has the operator (a twin below or nn.py's
  ``*_torch``), and random valid configs of every gradient operator on the athread emulator (at least
  20 per operator family: ceil(20 / operators), at least 4 each).
* ``useful_mac_fraction``: for the data and weight gradients of ResNet's stride-2 3x3 and 1x1
  convolutions (64 -> 128 channels at 56x56), the forward's multiply-adds that read a real (not
  padding) input element, over the multiply-adds the gradient operators' loops execute.
* ``tuned_over_naive``: each GEMM-like backward operator (ResNet-18's conv gradients, a dense and a
  batch_matmul layer), tuned on the simulator (``--trials``, default noise) against the naive schedule.
* ``bwd_over_fwd``: ResNet-18's conv layers (batch 1, 224x224): the tuned data gradient (its residue
  operators, plus the memory passes it needs: the head's zero padding, the compact copies of the weight
  taps each residue reads and the interleave of the residue pieces, read and written at the target's
  memory bandwidth) and the tuned weight gradient, each over the tuned
  forward (the built-in conv2d task), same trials and noise for all.
* ``check_op_seconds_20_configs`` and ``check_grad_seconds_21_configs``: wall time of ``swtune check-op``
  and ``swtune check-grad`` (7 configs of each of 3 gradient operators) on the 256x192x320 GEMM with a
  per-row scale, fresh processes.

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import subprocess
import sys
import time
from typing import Any

import numpy as np
from _common import ROOT, emit

EXAMPLES = ROOT / "examples" / "ops"


def _torch_twins() -> dict[str, Any]:
    """Torch forms of the examples that torch has (tensors in the operator's input order)."""
    import torch
    import torch.nn.functional as F

    return {
        "conv1d": lambda data, weight, stride=1, **_: F.conv1d(data, weight, stride=stride),
        "conv3d": lambda data, weight, **_: F.conv3d(data, weight),
        # the example's data is the input padded by r - 1: a full correlation with the flipped kernel
        "conv2d_transpose": lambda data, weight, **_: F.conv2d(data, weight.flip(2, 3).transpose(0, 1)),
        "depthwise_separable": lambda data, dw, pw, **_: F.conv2d(
            F.conv2d(data, dw[:, None], groups=dw.shape[0]), pw[:, :, None, None]),
        "gemv": lambda A, x, **_: A @ x,
        "batch_matmul_at": lambda A, B, **_: A.transpose(1, 2) @ B,
        "weighted_gemm": lambda A, B, w, **_: (A * w) @ B,
        "attention_score": lambda Q, K, d=64, **_: Q @ K.transpose(2, 3) / math.sqrt(Q.shape[-1]),
        "row_scaled_gemm": lambda A, B, s, **_: s[:, None] * (A @ B),
        "stencil5": lambda X, **_: 0.5 * X[1:-1, 1:-1] + 0.125 * (X[:-2, 1:-1] + X[2:, 1:-1] + X[1:-1, :-2]
                                                                  + X[1:-1, 2:]),
        "max_plus": lambda A, B, **_: (A[:, :, None] + B[None]).amax(1),
        "l1_distance": lambda X, Y, **_: torch.cdist(X, Y, p=1),
        "exp_gemm": lambda A, B, **_: A @ torch.exp(B),
    }


# (label, FILE:FUNC, small arguments for the checks); nn.py's have a FUNC_torch twin
OPS: list[tuple[str, str, dict[str, Any]]] = [
    ("conv1d", "conv.py:conv1d", {"c": 8, "w": 34, "k": 8, "stride": 2}),
    ("conv3d", "conv.py:conv3d", {"c": 4, "d": 6, "h": 8, "w": 8, "k": 4}),
    ("conv2d_transpose", "conv.py:conv2d_transpose", {"c": 4, "h": 6, "w": 6, "k": 4, "r": 3}),
    ("depthwise_separable", "conv.py:depthwise_separable", {"c": 4, "h": 8, "w": 8, "k": 8}),
    ("gemv", "linalg.py:gemv", {"m": 64, "k": 48}),
    ("batch_matmul_at", "linalg.py:batch_matmul_at", {"b": 2, "m": 16, "n": 12, "k": 20}),
    ("weighted_gemm", "linalg.py:weighted_gemm", {"m": 32, "n": 24, "k": 40}),
    ("attention_score", "linalg.py:attention_score", {"heads": 2, "seq": 16, "d": 8}),
    ("row_scaled_gemm", "linalg.py:row_scaled_gemm", {"m": 32, "n": 24, "k": 40}),
    ("stencil5", "stencil.py:stencil5", {"h": 16, "w": 18}),
    ("max_plus", "stencil.py:max_plus", {"m": 16, "n": 12, "k": 20}),
    ("l1_distance", "mathfn.py:l1_distance", {"m": 16, "n": 12, "d": 8}),
    ("exp_gemm", "mathfn.py:exp_gemm", {"m": 16, "n": 12, "k": 20}),
    ("conv2d_3x3_s1", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8}),
    ("conv2d_3x3_s2", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8, "stride": 2}),
    ("conv2d_1x1_s2", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8, "r": 1, "stride": 2, "padding": 0}),
    ("conv2d_dilated", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8, "dilation": 2, "padding": 2}),
    ("conv2d_depthwise", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8, "groups": 8}),
    ("conv2d_grouped_s2", "nn.py:conv2d", {"c": 8, "h": 10, "w": 10, "k": 8, "groups": 2, "stride": 2}),
    ("max_pool2d", "nn.py:max_pool2d", {"c": 4, "h": 10, "w": 10}),
    ("avg_pool2d", "nn.py:avg_pool2d", {"c": 4, "h": 10, "w": 10}),
    ("dense", "nn.py:dense", {"m": 16, "n": 12, "k": 20}),
    ("batch_matmul", "nn.py:batch_matmul", {"b": 2, "m": 16, "n": 12, "k": 20}),
    ("softmax", "nn.py:softmax", {"m": 8, "n": 16}),
    ("layer_norm", "nn.py:layer_norm", {"m": 8, "n": 16}),
    ("group_norm", "nn.py:group_norm", {"n": 2, "c": 4, "h": 4, "w": 4, "groups": 2}),
    ("batch_norm", "nn.py:batch_norm", {"n": 2, "c": 4, "h": 4, "w": 4}),
    ("gelu", "nn.py:gelu", {"m": 16, "n": 16}),
    ("relu", "nn.py:relu", {"m": 16, "n": 16}),
    ("leaky_relu", "nn.py:leaky_relu", {"m": 16, "n": 16}),
    ("sigmoid", "nn.py:sigmoid", {"m": 16, "n": 16}),
]

# ResNet-18's conv layers at 224x224, batch 1: (name, c, h, k, r, stride, padding)
RESNET18 = [("conv1", 3, 224, 64, 7, 2, 3), ("layer1", 64, 56, 64, 3, 1, 1),
            ("layer2.conv1", 64, 56, 128, 3, 2, 1), ("layer2.downsample", 64, 56, 128, 1, 2, 0),
            ("layer2.conv2", 128, 28, 128, 3, 1, 1), ("layer3.conv1", 128, 28, 256, 3, 2, 1),
            ("layer3.downsample", 128, 28, 256, 1, 2, 0), ("layer3.conv2", 256, 14, 256, 3, 1, 1),
            ("layer4.conv1", 256, 14, 512, 3, 2, 1), ("layer4.downsample", 256, 14, 512, 1, 2, 0),
            ("layer4.conv2", 512, 7, 512, 3, 1, 1)]


def check_ops(target: str, seed: int) -> list[dict[str, Any]]:
    from tuner.backends.gradient_check import check_gradient
    from tuner.expr.autodiff import differentiate
    from tuner.expr.workload import load_function

    twins = _torch_twins()
    rows = []
    for label, ref, args in OPS:
        file, func = ref.split(":")
        tensors = load_function(f"{EXAMPLES / file}:{func}")(**args)
        if file == "nn.py":
            reference: Any = functools.partial(load_function(f"{EXAMPLES / file}:{func}_torch"), **args)
        else:
            reference = functools.partial(twins[func], **args) if func in twins else None
        n_ops = len(differentiate(tensors).operators)
        per_op = max(4, -(-20 // n_ops))
        start = time.perf_counter()
        check = check_gradient(tensors, target, per_op, seed=seed, reference=reference, name=func)
        line = check.as_json()
        rows.append({"op": label, "operator": ref, "args": args, "gradient_operators": n_ops,
                     "configs_per_operator": per_op, "seconds": round(time.perf_counter() - start, 1),
                     **{k: v for k, v in line.items() if k != "operators"}})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _conv(c: int, h: int, k: int, r: int, stride: int, padding: int, dtype: str = "float64") -> list[Any]:
    from tuner.expr.workload import load_function

    return load_function(f"{EXAMPLES}/nn.py:conv2d")(n=1, c=c, h=h, w=h, k=k, r=r, stride=stride, padding=padding,
                                                    dtype=dtype)


def useful_macs(c: int, h: int, k: int, r: int, stride: int, padding: int) -> int:
    """The forward's multiply-adds that read a real input element (not padding)."""
    oh = (h + 2 * padding - r) // stride + 1
    rows = sum(1 for y in range(oh) for i in range(r) if 0 <= y * stride + i - padding < h)
    return k * c * rows * rows


def useful_fractions() -> dict[str, float]:
    from tuner.expr.autodiff import differentiate

    out = {}
    for name, (c, h, k, r, stride, padding) in {"3x3_s2": (64, 56, 128, 3, 2, 1),
                                                 "1x1_s2": (64, 56, 128, 1, 2, 0)}.items():
        grad = differentiate(_conv(c, h, k, r, stride, padding))
        useful = useful_macs(c, h, k, r, stride, padding)
        for wrt, label in (("data", "data"), ("weight", "weight")):
            executed = sum(op.macs for op in grad.operators if op.wrt == wrt)
            out[f"{name}_{label}"] = round(useful / executed, 4)
    return out


def _tune(workload: Any, trials: int, seed: int) -> tuple[float, float]:
    """(tuned seconds, naive seconds) of an expression operator on the simulator, default noise."""
    from tuner.measure.noise import DEFAULT_NOISE
    from tuner.space.expr_space import ExprSpace
    from tuner.tune_expr import naive_and_baseline_seconds, tune_expr

    result = tune_expr(workload, "sw26010", trials=trials, seed=seed, noise=DEFAULT_NOISE)
    naive, _ = naive_and_baseline_seconds(ExprSpace(workload, "sw26010"))
    return result.best_time, naive


def backward_vs_forward(trials: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """ResNet-18's layers: (bwd_over_fwd rows, tuned_over_naive rows of their GEMM-like operators)."""
    from tuner.expr.autodiff import Gather, differentiate
    from tuner.measure.noise import DEFAULT_NOISE
    from tuner.targets import get_target
    from tuner.tune import tune_workloads
    from tuner.workloads import Conv2d

    target = get_target("sw26010")
    rows, gains = [], []
    for name, c, h, k, r, stride, padding in RESNET18:
        fwd = Conv2d(n=1, c=c, h=h, w=h, k=k, r=r, s=r, stride_h=stride, stride_w=stride, pad_h=padding,
                     pad_w=padding)
        fwd_time = tune_workloads([fwd], target, trials=trials, seed=seed, noise=DEFAULT_NOISE)[0].best_time
        grad = differentiate(_conv(c, h, k, r, stride, padding, dtype="float64"))
        times: dict[str, float] = {"data": 0.0, "weight": 0.0}
        for op in grad.operators:
            wl = op.workload()
            tuned, naive = _tune(wl, trials, seed)
            times[op.wrt] += tuned
            if wl.expr.gemm_like:
                gains.append({"layer": name, "operator": op.name, "tuned_s": tuned, "naive_s": naive,
                              "tuned_over_naive": round(naive / tuned, 1)})
        # the memory passes around the data gradient's operators: the head padded with zeros (read
        # and write), and the residue pieces interleaved into the gradient (read and write)
        data_ops = [op for op in grad.operators if op.wrt == "data"]
        head = data_ops[0].operands[str(grad.head.op.name)]
        elements = math.prod(int(s) for s in grad.head.shape)
        padded = math.prod(int(s) + lo + hi for s, lo, hi in zip(grad.head.shape, head.low, head.high))
        pad_bytes = 8 * (elements + padded) if head.needed else 0
        interleave_bytes = 2 * 8 * c * h * h if len(data_ops) > 1 else 0
        # and the compact copies of the weight taps a residue operator reads (tuner.expr.autodiff.Gather)
        gather_bytes = sum(2 * 8 * math.prod(spec.shape) for op in data_ops for spec in op.operands.values()
                           if isinstance(spec, Gather))
        memory_s = (pad_bytes + interleave_bytes + gather_bytes) / target.mem_bandwidth_Bps
        rows.append({"layer": name, "forward_s": fwd_time, "data_s": times["data"] + memory_s,
                     "data_memory_passes_s": memory_s, "weight_s": times["weight"],
                     "data_over_fwd": round((times["data"] + memory_s) / fwd_time, 2),
                     "weight_over_fwd": round(times["weight"] / fwd_time, 2),
                     "data_operators": len(data_ops)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows, gains


def gemm_gains(trials: int, seed: int) -> list[dict[str, Any]]:
    """tuned_over_naive of the dense and batch_matmul gradients at layer sizes."""
    from tuner.expr.autodiff import differentiate
    from tuner.expr.workload import load_function

    out = []
    for label, func, args in (("dense", "dense", {"m": 256, "n": 512, "k": 1024, "dtype": "float64"}),
                              ("batch_matmul", "batch_matmul", {"b": 8, "m": 128, "n": 128, "k": 64,
                                                                "dtype": "float64"})):
        grad = differentiate(load_function(f"{EXAMPLES}/nn.py:{func}")(**args))
        for op in grad.operators:
            wl = op.workload()
            if not wl.expr.gemm_like:
                continue
            tuned, naive = _tune(wl, trials, seed)
            out.append({"layer": label, "operator": op.name, "tuned_s": tuned, "naive_s": naive,
                        "tuned_over_naive": round(naive / tuned, 1)})
    return out


def command_seconds(argv: list[str]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    return seconds, (json.loads(lines[-1]) if lines and lines[-1].startswith("{") else
                     {"exit_code": done.returncode, "stderr": done.stderr[-500:]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-checks", action="store_true", help="no emulator checks of the ops (quick look)")
    opts = parser.parse_args()
    figures: dict[str, Any] = {}
    if not opts.skip_checks:
        ops = check_ops("sw26010", opts.seed)
        figures["ops"] = ops
        figures["ops_count"] = len(ops)
        figures["ops_all_pass"] = all(
            o["fd_max_rel_err"] <= 1e-6 and o.get("autograd_max_rel_err", 0.0) <= 1e-5
            and o["configs_checked"] >= 20 and o["wrong_results"] == o["dma_count_mismatches"]
            == o["compile_failures"] == o["runtime_errors"] == o["tir_mismatches"] == 0 for o in ops)
        figures["ops_failing"] = [o["op"] for o in ops if o["wrong_results"] or o["dma_count_mismatches"]
                                  or o["compile_failures"] or o["runtime_errors"] or o["tir_mismatches"]
                                  or o["fd_max_rel_err"] > 1e-6 or o.get("autograd_max_rel_err", 0.0) > 1e-5]
    figures["useful_mac_fraction"] = useful_fractions()
    layers, gains = backward_vs_forward(opts.trials, opts.seed)
    gains += gemm_gains(opts.trials, opts.seed)
    figures["tuned_over_naive"] = {"min": min(g["tuned_over_naive"] for g in gains),
                                   "median": float(np.median([g["tuned_over_naive"] for g in gains])),
                                   "operators": len(gains), "each": gains}
    figures["bwd_over_fwd"] = layers
    op = "examples/ops/linalg.py:row_scaled_gemm"
    args = '{"m": 256, "n": 192, "k": 320}'
    seconds, check = command_seconds(["check-op", op, "--args", args, "--configs", "20"])
    figures["check_op_seconds_20_configs"] = round(seconds, 1)
    figures["check_op_problems"] = {k: check.get(k) for k in ("wrong_results", "dma_count_mismatches",
                                                              "compile_failures")}
    seconds, check = command_seconds(["check-grad", op, "--args", args, "--configs", "7"])
    figures["check_grad_seconds_21_configs"] = round(seconds, 1)
    figures["check_grad_problems"] = {k: check.get(k) for k in ("configs_checked", "wrong_results",
                                                                "dma_count_mismatches", "compile_failures",
                                                                "fd_max_rel_err")}
    figures["trials"] = opts.trials
    emit(figures)


if __name__ == "__main__":
    main()
