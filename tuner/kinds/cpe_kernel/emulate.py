"""A memory-bound CPE kernel measured on swemu (the cpe_kernel kind's emulator build and check).

The operator's one-operator module (constants bound to random values) is compiled ahead of time with
the config as its tuning log (tuner.aot: the same slave C a model gets), built with ``make emu`` and
run on random inputs. The output is checked against TVM's llvm build of the operator's PrimFunc and
the emulator's DMA counters against the analysis' plan of that config (``dma_match``). The time is
the emulator's wall time of the run: a functional emulator, never hardware timing.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from tuner.codegen.emulator.build import launch
from tuner.codegen.emulator.cache import make_emulated
from tuner.errors import InvalidConfigError
from tuner.measure.base import InfrastructureError, MeasureResult, Source, Status
from tuner.space.cpe.space import CpeKernelSpace
from tuner.space.space import Config

RTOL = {"float32": 1e-4, "float64": 1e-9}


def _fail(config: Config, status: Status, error: str, **details: Any) -> MeasureResult:
    return MeasureResult(config, status, error=error[-2000:], source=Source.EMULATOR, details=details)


def measure_on_emulator(space: CpeKernelSpace, config: Config, workdir: Path, timeout_s: float,
                        seed: int) -> MeasureResult:
    """One config's result on swemu; raises InfrastructureError only when this machine cannot build."""
    from tuner.aot import compile_model
    from tuner.ir import llvm
    from tuner.space.cpe.cuts import dma_plan
    from tuner.space.cpe.plan import CpeOp
    from tuner.space.cpe.rebuild import random_module

    wl, target = space.workload, space.target
    try:
        space.check(config)
    except InvalidConfigError as exc:
        return _fail(config, Status.INVALID_CONFIG, str(exc))
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    module = random_module(wl.script, rng)
    result = compile_model(module, target, workdir, lambda w: config if w.key == wl.key else None,
                           name="kernel", cpe_mode="all", group_launches=False)
    ops = [op for op in result.cpe_ops if isinstance(op, CpeOp)]
    if len(ops) != 1 or not ops[0].tuned or ops[0].config != dict(config):
        return _fail(config, Status.INVALID_CONFIG, "the config does not apply to the rebuilt operator")
    op = ops[0]
    t1 = time.perf_counter()
    try:
        build = make_emulated(workdir, "emu")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"cannot build kernels here: {exc}") from exc
    if build.returncode != 0:
        return _fail(config, Status.COMPILE_ERROR, build.stderr)
    node = next(n for n in result.graph.nodes if n.op == "cpe")
    inputs = {t.id: rng.uniform(-1, 1, t.shape).astype(wl.dtype) for t in result.graph.inputs}
    for i, t in enumerate(result.graph.inputs):
        inputs[t.id].tofile(workdir / f"in{i}.bin")
    t2 = time.perf_counter()
    try:
        run = launch(["./model_emu", "weights.bin", *(f"in{i}.bin" for i in range(len(inputs))), "out.bin"],
                     cwd=workdir, wait_s=timeout_s + 10, target=target, timeout=timeout_s,
                     report=workdir / "report.json")
    except subprocess.TimeoutExpired:
        return _fail(config, Status.TIMEOUT, f"emulator run exceeded {timeout_s} s")
    seconds = time.perf_counter() - t2
    try:
        report = json.loads((workdir / "report.json").read_text())
    except (OSError, ValueError):
        report = {}
    errors = report.get("errors", [])
    if run.returncode != 0 or errors:
        kinds = {e.get("type") for e in errors}
        status = Status.LDM_OVERFLOW if "ldm_overflow" in kinds else Status.RUNTIME_ERROR
        return _fail(config, status, run.stderr or json.dumps(errors))
    args = [inputs[t.root.id] if t.root.id in inputs else np.asarray(t.root.data).reshape(t.shape)
            for t in node.inputs]
    (ref,) = llvm.run(node.attrs["prim_func"], args, [(node.output.shape, wl.dtype)], opt_level=0)
    out = np.fromfile(workdir / "out.bin", dtype=wl.dtype)
    keys = ("get_reqs", "get_bytes", "put_reqs", "put_bytes")
    expect = dma_plan(op, int(np.dtype(wl.dtype).itemsize))
    got = {k: report.get("totals", {}).get(k) for k in keys}
    details = {"dma": got, "dma_expected": expect, "dma_match": got == expect, "codegen_s": t1 - t0,
               "build_s": t2 - t1, "model_seconds": op.seconds}
    if out.size != ref.size or not np.allclose(out.reshape(ref.shape), ref, rtol=RTOL[wl.dtype],
                                               atol=RTOL[wl.dtype] * max(float(np.abs(ref).max()), 1e-30)):
        err = float(np.abs(out.reshape(ref.shape) - ref).max()) if out.size == ref.size else float("nan")
        return _fail(config, Status.WRONG_RESULT, f"max abs error {err:.3g}", **details)
    return MeasureResult(config, Status.OK, times=(seconds,), source=Source.EMULATOR, details=details)
