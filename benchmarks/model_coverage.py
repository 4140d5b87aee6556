"""Whole-model coverage: every zoo model (and ONNX exports) tuned on the simulator, compiled ahead of
time, built with `make emu`, run on the athread emulator and compared with torch.

Usage: python benchmarks/model_coverage.py [--trials 16] [--strategy model] [--only NAME,...] [--full]
       [--no-emulate]

Per model: its tasks (conv/dense/batch_matmul, expression and CPE kernel tasks) are tuned in-process
on the simulator (each task's baseline is among its first candidates), the model is compiled with
those schedules, and
its simulated end-to-end time (every step: kernels with spawn/join, MPE work) is reported for the
tuned and for the baseline program. Sizes: reduced widths / inputs by default so the emulator run
stays short on a 2-core machine (listed per model in the JSON under "sizes"); --full uses the
published sizes (slow); --no-emulate skips the build and emulator run (figures only; "mismatches"
is then null). Last line: one JSON object (models_total, models_compiled, mismatches,
mpe_time_fraction, fused_epilogues, end_to_end_speedup_vs_baseline, tuned_slower_than_baseline, ...);
``families`` counts the distinct model families run (a family's torch and ONNX variants are one).

The acceptance compares the emulator's float32 output with torch or TVM llvm (float32) at rtol 1e-3,
atol 1e-5. When those two float32 references themselves differ beyond that tolerance (float32
rounding over many layers on outputs near zero: resnet50), a float32 program cannot be judged by
them, so that model is also compiled and run in float64 (the SW26010's native precision, as swDNN
computes) on the emulator and compared with torch in float64 at the same tolerance; for such models
``mismatches`` counts that float64 check, and the JSON lists them with the reason
(``checked_in_float64``) beside their float32 figures (``mismatches_float32`` counts the float32
check alone for every model). The float64 program uses the float32 tuning's schedule for each
workload where it is valid at float64 (twice the bytes in LDM), else the default schedule.
"""

from __future__ import annotations

import argparse
import copy
import functools
import inspect
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _common import emit  # noqa: F401  (also puts the checkout on sys.path)

from tuner.codegen.emulator.build import launch
from tuner.codegen.emulator.cache import make_emulated

TARGET = "sw26010"
# name -> (zoo model, width, image) at the default (reduced) size; --full: width 1.0, image 224
MODELS: dict[str, tuple[str, float, int]] = {
    "alexnet": ("alexnet", 0.25, 224),
    "vgg19": ("vgg19", 0.25, 64),
    "resnet18": ("resnet18", 0.5, 64),
    "resnet50": ("resnet50", 0.25, 64),
    "mobilenet_v2": ("mobilenet_v2", 0.5, 96),
    "bert_layer": ("bert_layer", 0.25, 0),
    "vit_tiny": ("vit_tiny", 1.0, 112),
    "onnx_mobilenet_v2": ("mobilenet_v2", 0.5, 96),
    "onnx_bert_layer": ("bert_layer", 0.25, 0),
    "onnx_resnet18": ("resnet18", 0.5, 64),
}
# the families of tuner/models/torch_families.py, each through torch and through its ONNX export
_FAMILY_SIZES: dict[str, tuple[float, int]] = {
    "convnext": (0.25, 64), "mobilenet_v3": (0.5, 96), "efficientnet": (0.5, 96), "unet": (0.5, 64),
    "diffusion_resblock": (0.5, 32), "mlp_mixer": (0.25, 64), "gpt2_block": (0.25, 0), "swin_block": (0.5, 56),
    "densenet": (0.5, 64), "audio_cnn1d": (0.5, 0), "lstm_unrolled": (0.5, 0), "shufflenet_v2": (0.5, 64),
    "squeezenet": (0.5, 64),
}
for _family, (_width, _image) in _FAMILY_SIZES.items():
    MODELS[_family] = (_family, _width, _image)
    MODELS[f"onnx_{_family}"] = (_family, _width, _image)
RTOL, ATOL = 1e-3, 1e-5


def _relax(name: str, module: Any, inputs: tuple[Any, ...], work: Path) -> Any:
    import torch

    from tuner.bridge.extract import onnx_to_relax, torch_to_relax

    if not name.startswith("onnx_"):
        return torch_to_relax(module, inputs)
    path = work / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=17)
    return onnx_to_relax(path)


def _tune(mod: Any, trials: int, strategy: str) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Best config per workload key; (configs, tasks, tasks whose best is slower than the baseline)."""
    from tuner.bridge.extract import extract_relax
    from tuner.tune import tune_workloads

    layers = extract_relax(mod).layers
    if not layers:
        return {}, 0, 0
    results = tune_workloads([l.workload for l in layers], TARGET, trials=trials, strategy=strategy, batch=8,
                             weights=[float(l.weight) for l in layers])
    configs, slower = {}, 0
    for layer, r in zip(layers, results):
        # against the baseline as measured by the same backend (the simulator's measurements carry
        # noise; the noise-free model time of the chosen config is what the whole-model figures use)
        base = r.baseline_time
        if r.best_config is None or base is None or r.best_time > base * (1 + 1e-12):
            slower += 1
        if r.best_config is not None:
            configs[layer.workload.key] = r.best_config
    return configs, len(layers), slower


def _emulate(out: Path, x: np.ndarray, dtype: type = np.float32) -> tuple[np.ndarray, float]:
    build = make_emulated(out, "emu", timeout=1800)
    if build.returncode != 0:
        raise RuntimeError(f"make emu failed: {build.stderr[-2000:]}")
    x.astype(dtype).tofile(out / "input.bin")
    start = time.perf_counter()
    run = launch(["./model_emu", "weights.bin", "input.bin", "output.bin"], cwd=out, wait_s=3600, target=TARGET,
                 timeout="1800")
    if run.returncode != 0:
        raise RuntimeError(f"model_emu failed: {run.stderr[-2000:]}")
    return np.fromfile(out / "output.bin", dtype=dtype), time.perf_counter() - start


@contextmanager
def _float64_import() -> Iterator[None]:
    """TVM's torch frontend gives convolutions, linear and matmul ``out_dtype="float32"`` whatever
    their input's dtype (tvm/relax/frontend/torch/base_fx_graph_translator.py), so a float64 module
    does not import; while importing one, those constructors get the model's float64 instead."""
    from tvm import relax

    spots = [(relax.op.nn, n) for n in ("conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose")]
    spots += [(relax.op.linear_algebra, "matmul"), (relax.op.linear_algebra, "linear"), (relax.op, "matmul"),
              (relax.op, "linear")]
    saved = [(ns, n, getattr(ns, n)) for ns, n in spots if hasattr(ns, n)]

    def wrap(f: Any) -> Any:
        sig = inspect.signature(f)

        @functools.wraps(f)
        def g(*a: Any, **k: Any) -> Any:
            bound = sig.bind(*a, **k)
            if bound.arguments.get("out_dtype") == "float32":
                bound.arguments["out_dtype"] = "float64"
            return f(*bound.args, **bound.kwargs)

        return g

    for ns, n, f in saved:
        setattr(ns, n, wrap(f))
    try:
        yield
    finally:
        for ns, n, f in saved:
            setattr(ns, n, f)


def _float64_check(name: str, module: Any, inputs: tuple[Any, ...], configs: dict[str, dict[str, Any]],
                   r64: np.ndarray, work: Path) -> dict[str, Any]:
    """The model compiled and run in float64 on the emulator, against torch in float64."""
    from tuner.aot import compile_model

    m64, x64 = copy.deepcopy(module).double().eval(), [t.double() for t in inputs]
    with _float64_import():
        mod64 = _relax(name + "_f64" if not name.startswith("onnx_") else name, m64, tuple(x64), work)

    def lookup(w: Any) -> dict[str, Any] | None:
        try:  # the float32 tuning's schedule for the same workload (the compiler checks it at float64)
            return configs.get(replace(w, dtype="float32").key)
        except (TypeError, ValueError):
            return None

    result = compile_model(mod64, TARGET, work / f"{name}_f64", lookup, name=f"{name}_f64")
    got, emu_s = _emulate(result.out_dir, x64[0].numpy(), np.float64)
    err = _over_tolerance(got, r64)
    return {"over_tolerance": err, "match": err <= 1.0, "kernels": len(result.kernels),
            "kernels_with_float32_schedule": sum(1 for k in result.kernels if k.tuned), "emulate_s": emu_s}


def _llvm_reference(mod: Any, x: np.ndarray) -> np.ndarray:
    """The model run by TVM's llvm build (the second reference the acceptance allows)."""
    import tvm
    from tvm import relax

    out = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())["main"](tvm.runtime.tensor(x))
    return np.concatenate([np.asarray(p.numpy()).ravel() for p in (out if not hasattr(out, "numpy") else [out])])


def _over_tolerance(got: np.ndarray, ref: np.ndarray, atol: float = ATOL) -> float:
    """max |got - ref| / (atol + rtol |ref|): <= 1 means allclose at (RTOL, atol)."""
    if got.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(got - ref) / (atol + RTOL * np.abs(ref))))


def _epilogue_candidates(graph: Any) -> int:
    """Element-wise steps still reading a kernel's output right after it (not fused: e.g. a residual
    add, or a chain whose vectors did not fit)."""
    kernel_out = {n.output.root.id for n in graph.nodes if n.op in ("kernel", "unpitch")}
    return sum(1 for n in graph.nodes if n.op in ("tir", "channel_affine", "cpe")
               and n.relax_op in ("add", "nn.relu", "clip", "nn.gelu", "multiply", "nn.batch_norm", "sigmoid")
               and any(t.root.id in kernel_out for t in n.inputs))


def run_model(name: str, full: bool, trials: int, strategy: str, work: Path, emulate: bool = True) -> dict[str, Any]:
    import torch

    from tuner.aot import compile_model
    from tuner.models.torch_models import build

    zoo, width, image = MODELS[name]
    if full:
        width, image = 1.0, (224 if image else 0)
    module, inputs = build(zoo, width=width, image=image or 224)
    t0 = time.perf_counter()
    mod = _relax(name, module, inputs, work)
    configs, tasks, slower = _tune(mod, trials, strategy)
    t1 = time.perf_counter()
    result = compile_model(mod, TARGET, work / name, lambda w: configs.get(w.key), name=name)
    t2 = time.perf_counter()
    ok: bool | None = None
    ok_scaled: bool | None = None
    ok_f64: bool | None = None
    f64: dict[str, float] = {}
    checked64: dict[str, Any] | None = None
    err, err_scaled, ref_gap, emu_s = float("nan"), float("nan"), float("nan"), 0.0
    if emulate:
        got, emu_s = _emulate(result.out_dir, inputs[0].numpy())
        with torch.no_grad():
            ref = module(*inputs)
        ref = np.concatenate([r.numpy().ravel() for r in (ref if isinstance(ref, tuple) else (ref,))])
        llvm = _llvm_reference(mod, inputs[0].numpy())
        # the acceptance: torch or TVM llvm at rtol 1e-3, atol 1e-5 (whichever is closer)
        err = min(_over_tolerance(got, ref), _over_tolerance(got, llvm))
        ok = err <= 1.0
        # float32 sums in another order differ by more than 1e-5 absolute on outputs of magnitude ~1
        # after 50 layers (TVM llvm vs torch too: ref_gap); the same check with atol scaled by max |ref|
        scale = float(np.abs(ref).max()) or 1.0
        err_scaled = min(_over_tolerance(got, ref, ATOL * scale), _over_tolerance(got, llvm, ATOL * scale))
        ok_scaled = err_scaled <= 1.0
        ref_gap = _over_tolerance(llvm, ref)
        # the model in float64 (torch): how far each float32 program is from the exact result. When
        # the two float32 references are themselves beyond the tolerance from it (float32 rounding over
        # many layers), the emulator's result is judged by being no further from it than they are.
        import copy

        with torch.no_grad():
            r64 = copy.deepcopy(module).double()(*[t.double() for t in inputs])
        r64 = np.concatenate([r.numpy().ravel() for r in (r64 if isinstance(r64, tuple) else (r64,))])
        f64 = {"emulator": _over_tolerance(got, r64), "torch_f32": _over_tolerance(ref, r64),
               "llvm_f32": _over_tolerance(llvm, r64)}
        ok_f64 = f64["emulator"] <= max(1.0, f64["torch_f32"], f64["llvm_f32"])
        if ref_gap > 1.0:  # the float32 references disagree beyond the tolerance: judge it in float64
            checked64 = _float64_check(name, module, inputs, configs, r64, work)
            checked64["why"] = (f"torch float32 and TVM llvm float32 differ by {ref_gap:.3f}x the tolerance "
                                f"(rtol {RTOL}, atol {ATOL}); the float32 emulator result is "
                                f"{err:.3f}x it from the closer of them")
    mt = result.timing
    assert mt is not None
    sm = mt.summary()
    row = {"model": name, "size": {"width": width, "image": image or None}, "tasks": tasks,
           "tuned_slower_than_baseline": slower, "kernels": len(result.kernels),
           "tuned_kernels": sum(1 for k in result.kernels if k.tuned), "steps": len(mt.steps),
           "match": ok if checked64 is None else checked64["match"], "match_float32": ok,
           "checked_in_float64": checked64, "max_err_over_tolerance": err, "match_scaled_atol": ok_scaled,
           "max_err_over_scaled_tolerance": err_scaled, "llvm_vs_torch_over_tolerance": ref_gap,
           "match_f64": ok_f64, "over_tolerance_vs_f64": f64,
           "tuned_ms": sm["tuned_ms"], "baseline_ms": sm["baseline_ms"],
           "speedup": sm["speedup_vs_baseline"], "mpe_time_fraction": sm["mpe_time_fraction"],
           "kernel_launches": sm["kernel_launches"], "fused_epilogues": result.counts().get("fused epilogue", 0),
           "memory_bound_on_cpes": result.counts().get("CPE (memory-bound)", 0),
           # multi-block memory-bound operators tuned as CPE kernel tasks (tuner.kinds.cpe_kernel), and how many of
           # the program's distinct CPE kernels of such tasks run a tuned config (the rest: on the MPE)
           "cpe_kernel_tasks": sum(1 for k in configs if k.startswith("cpe-")),
           "cpe_kernels_tuned": sum(1 for op in result.cpe_ops if getattr(op, "tuned", False)),
           "cpe_kernels_untuned": sum(1 for op in result.cpe_ops
                                      if getattr(op, "workload", None) is not None and not op.tuned),
           "mpe_steps": result.counts().get("MPE", 0),
           "epilogue_candidates": _epilogue_candidates(result.graph),
           "top_ops": [(o.relax_op, o.where, round(o.share, 3)) for o in mt.by_operator()[:4]],
           "tune_s": t1 - t0, "compile_s": t2 - t1, "emulate_s": emu_s}
    status = "ok " if row["match"] else "-- " if ok is None else "MISMATCH"
    if checked64 is not None:
        status += f" (float64: {checked64['over_tolerance']:.3f}x tol)"
    print(f"{name:18s} {status} tuned {sm['tuned_ms']:8.3f} ms  baseline "
          f"{sm['baseline_ms']:8.3f} ms  {sm['speedup_vs_baseline']:5.2f}x  MPE {sm['mpe_time_fraction']:6.1%}  "
          f"top {row['top_ops'][:2]}  ({t1 - t0:.0f}+{t2 - t1:.0f}+{emu_s:.0f} s)", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--strategy", default="model")
    ap.add_argument("--only", default="")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--no-emulate", action="store_true")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    rows, failed = [], {}
    with tempfile.TemporaryDirectory(prefix="swtune-coverage-") as tmp:
        for name in names:
            try:
                rows.append(run_model(name, args.full, args.trials, args.strategy, Path(tmp), not args.no_emulate))
            except Exception as exc:  # noqa: BLE001 - a model that fails is a figure, not a crash
                failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"{name:18s} FAILED {failed[name]}", flush=True)
    by = {r["model"]: r for r in rows}
    emit({
        "families": len({MODELS[n][0] for n in names}), "models_total": len(names), "models_compiled": len(rows),
        "failed": failed,
        # float64-checked models (checked_in_float64) count by their float64 check
        "mismatches": None if args.no_emulate else sum(1 for r in rows if not r["match"]) + len(failed),
        "mismatches_float32": None if args.no_emulate else sum(1 for r in rows if not r["match_float32"]) + len(failed),
        "checked_in_float64": {n: {k: (float(f"{v:.4g}") if isinstance(v, float) else v)
                                   for k, v in r["checked_in_float64"].items()}
                               for n, r in by.items() if r["checked_in_float64"] is not None},
        "mismatches_atol_scaled_by_output": None if args.no_emulate else
        sum(1 for r in rows if not r["match_scaled_atol"]) + len(failed),
        "llvm_vs_torch_over_tolerance": {n: round(r["llvm_vs_torch_over_tolerance"], 3) for n, r in by.items()},
        # against torch in float64: a mismatch is an emulator result further from it than both float32
        # references are (and beyond the tolerance)
        "mismatches_vs_float64": None if args.no_emulate else
        sum(1 for r in rows if not r["match_f64"]) + len(failed),
        "over_tolerance_vs_float64": {n: {k: round(v, 3) for k, v in r["over_tolerance_vs_f64"].items()}
                                      for n, r in by.items()},
        "mpe_time_fraction": {n: round(r["mpe_time_fraction"], 4) for n, r in by.items()},
        "fused_epilogues": {n: r["fused_epilogues"] for n, r in by.items()},
        "unfused_epilogue_candidates": {n: r["epilogue_candidates"] for n, r in by.items()},
        "memory_bound_on_cpes": {n: r["memory_bound_on_cpes"] for n, r in by.items()},
        "cpe_kernel_tasks": {n: r["cpe_kernel_tasks"] for n, r in by.items()},
        "cpe_kernels_tuned": {n: r["cpe_kernels_tuned"] for n, r in by.items()},
        "cpe_kernels_untuned": sum(r["cpe_kernels_untuned"] for r in rows),
        "mpe_steps": {n: r["mpe_steps"] for n, r in by.items()},
        "end_to_end_speedup_vs_baseline": {n: round(r["speedup"], 3) for n, r in by.items()},
        "tuned_slower_than_baseline": sum(r["tuned_slower_than_baseline"] for r in rows),
        "tasks": sum(r["tasks"] for r in rows), "trials_per_task": args.trials, "strategy": args.strategy,
        "sizes": {n: r["size"] for n, r in by.items()}, "full_size": args.full,
        "max_err_over_tolerance": {n: round(r["max_err_over_tolerance"], 4) for n, r in by.items()},
        "top_ops": {n: r["top_ops"] for n, r in by.items()},
    })


if __name__ == "__main__":
    main()
