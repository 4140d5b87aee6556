"""Measurement backend on swemu: generate the athread C of a config, build it with gcc against the
x86 athread emulator, run it on random inputs, check the output against TVM's llvm build of the
op (tuner/codegen/reference.py) and report the emulator's time and DMA counters (source "emulator": a
functional emulator, never hardware timing).
No C compiler or binutils, or an emulator that does not build, is an InfrastructureError (this machine
cannot measure), never a config's compile error.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from tuner.measure.base import InfrastructureError, MeasureResult, Source, Status
from tuner.space.choices import CgSplit
from tuner.space.factory import space_for
from tuner.space.space import Config, ScheduleSpace
from tuner.targets import Family, Target, get_target
from tuner.task_kind import kind_of
from tuner.workloads import Workload

RTOL = {"float32": 1e-4, "float64": 1e-9}


def reference(workload: Workload, *inputs: np.ndarray) -> np.ndarray:
    """The op's result from TVM's llvm build of the PrimFunc its kernel is scheduled from
    (tuner/codegen/reference.py), on the inputs the host program reads."""
    from tuner.codegen.reference import reference as tvm_reference

    return tvm_reference(workload, inputs)


# inputs of a body that compares operands for equality (an argmax, a gradient routed to it): drawn from
# this many small integers, so that the comparison holds at about one point in this many, not never
DISCRETE_VALUES = 9


def random_inputs(workload: Workload, rng: np.random.Generator, discrete: bool = False) -> tuple[np.ndarray, ...]:
    """The op's inputs in the order its host program reads them: uniform in [-1, 1], or with
    ``discrete`` the integers 0 .. DISCRETE_VALUES - 1."""
    from tuner.codegen.reference import input_shapes

    if discrete:
        return tuple(rng.integers(0, DISCRETE_VALUES, shape).astype(workload.dtype) for shape in input_shapes(workload))
    return tuple(rng.uniform(-1, 1, shape).astype(workload.dtype) for shape in input_shapes(workload))


class EmulatorBackend:
    """``measure(workload, target, configs)``: one gcc build and one emulator run per config."""

    source = Source.EMULATOR
    chunk = 1  # each config is a gcc build and an emulator run: seconds each

    def __init__(self, workdir: str | os.PathLike | None = None, timeout_s: float = 60.0, seed: int = 0,
                 keep: bool = False, cflags: Sequence[str] = ("-O2", "-Wno-psabi"),
                 discrete_inputs: bool = False) -> None:
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="swtune_emu_")
        self.workdir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.timeout_s, self.seed, self.keep, self.cflags = timeout_s, seed, keep, tuple(cflags)
        self.discrete_inputs = discrete_inputs  # see random_inputs
        self._emu_obj: Path | None = None
        self._count = 0

    def emulator_object(self) -> Path:
        """The compiled athread emulator, built once; InfrastructureError when it cannot be built here."""
        from tuner.codegen.emulator.build import BuildError, compile_emulator

        if self._emu_obj is None:
            try:
                self._emu_obj = compile_emulator(self.workdir, cflags=self.cflags)
            except (OSError, BuildError) as exc:  # no gcc (FileNotFoundError), or the emulator does not compile
                raise InfrastructureError(f"cannot build the athread emulator: {exc}") from exc
        return self._emu_obj

    def preflight(self) -> None:
        """Build the emulator now (it is reused): raises InfrastructureError without gcc or when it fails."""
        self.emulator_object()

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        target = get_target(target)
        space = space_for(workload, target)
        kind = kind_of(workload)
        results: list[MeasureResult] = []
        for c in configs:
            try:
                results.append(kind.emulate(self, space, dict(c)))
            except InfrastructureError as exc:
                raise InfrastructureError(str(exc), completed=results) from exc
        return results

    def measure_one(self, space: ScheduleSpace, config: Config) -> MeasureResult:
        """One config's result; raises only InfrastructureError (the machine, not the config, failed)."""
        return self.guarded(config, lambda: self._measure(space, config))

    def new_workdir(self) -> Path:
        """A fresh directory under the backend's workdir for one config's program."""
        self._count += 1
        return self.workdir / f"k{self._count:05d}"

    def guarded(self, config: Config, measure: Callable[[], MeasureResult]) -> MeasureResult:
        """``measure()``, with a config's unexpected failure turned into that config's compile error
        (only InfrastructureError, the machine's failure, propagates)."""
        try:
            return measure()
        except InfrastructureError:
            raise
        except Exception as exc:  # a config's unexpected failure is a result of that config
            return MeasureResult(config, Status.COMPILE_ERROR, error=f"{type(exc).__name__}: {exc}",
                                 source=self.source)

    def _fail(self, config: Config, status: Status, error: str, **details: Any) -> MeasureResult:
        return MeasureResult(config, status, error=error[-2000:], source=self.source, details=details)

    def _measure(self, space: ScheduleSpace, config: Config) -> MeasureResult:
        from tuner.codegen.emulator.build import BuildError, build_kernel, launch
        from tuner.codegen.sources import generate

        workload, target = space.workload, space.target
        try:
            row = space.encode(config)
        except ValueError as exc:
            return self._fail(config, Status.INVALID_CONFIG, str(exc))
        an = space.analyze(row[None, :])
        if not an.valid[0]:
            from tuner.space.choices import Reason

            reason = Reason(int(an.reason[0]))
            status = Status.LDM_OVERFLOW if reason is Reason.LDM_OVERFLOW else Status.INVALID_CONFIG
            return self._fail(config, status, reason.label)
        t0 = time.perf_counter()
        try:
            src = generate(workload, target, config)
        except NotImplementedError as exc:
            return self._fail(config, Status.COMPILE_ERROR, f"codegen: {exc}")
        d = src.write(self.new_workdir())
        pro = target.family is Family.SW26010_PRO  # the emulator's Pro API and LDM size
        t1 = time.perf_counter()
        try:
            prog = build_kernel(d, d / "kernel_emu", pro=pro, cflags=self.cflags,
                                emulator_object=self.emulator_object())
        except BuildError as exc:
            return self._fail(config, Status.COMPILE_ERROR, exc.stderr or str(exc))
        except OSError as exc:  # gcc, nm or objcopy missing: no config builds on this machine
            raise InfrastructureError(f"cannot build kernels here: {exc}") from exc
        t2 = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        inputs = random_inputs(workload, rng, self.discrete_inputs)
        in_files = [d / f"in{i}.bin" for i in range(len(inputs))]
        for x, f in zip(inputs, in_files):
            x.tofile(f)
        try:
            proc = launch([prog, *in_files, d / "c.bin"], cwd=d, wait_s=self.timeout_s + 10, target=target,
                          timeout=self.timeout_s, report=d / "report.json", ldm_bytes=target.ldm_bytes)
        except subprocess.TimeoutExpired:
            return self._fail(config, Status.TIMEOUT, f"emulator run exceeded {self.timeout_s} s")
        t3 = time.perf_counter()
        report = self._report(d / "report.json")
        errors = report.get("errors", []) if report else []
        if proc.returncode != 0 or errors:
            kinds = {e.get("type") for e in errors}
            status = (Status.LDM_OVERFLOW if "ldm_overflow" in kinds else Status.TIMEOUT if "timeout" in kinds
                      else Status.RUNTIME_ERROR)
            return self._fail(config, status, proc.stderr or json.dumps(errors), report_errors=errors)
        seconds = _parse_seconds(proc.stdout)
        ref = reference(workload, *inputs)
        out = np.fromfile(d / "c.bin", dtype=workload.dtype)
        details = _dma_details(report, an, src.scheduled)
        details.update(codegen_s=t1 - t0, build_s=t2 - t1, run_s=t3 - t2,
                       ldm_static_bytes=report.get("ldm_static_bytes"),
                       emulator_kernel_wall_ns=report.get("kernel_wall_ns"))
        if out.size != ref.size:
            return self._fail(config, Status.WRONG_RESULT, f"output has {out.size} values, expected {ref.size}",
                              **details)
        rtol = RTOL[workload.dtype]
        # a body outside its domain on these inputs (sqrt of a negative) gives NaN in the reference:
        # the kernel must give NaN at the same points, and the finite points set the scale
        finite = np.isfinite(ref)
        scale = float(np.abs(ref[finite]).max()) if finite.any() else 0.0
        if not np.allclose(out.reshape(ref.shape), ref, rtol=rtol, atol=rtol * max(scale, 1e-30), equal_nan=True):
            err = float(np.nanmax(np.abs(out.reshape(ref.shape) - ref)))
            return self._fail(config, Status.WRONG_RESULT, f"max abs error {err:.3g} (scale {scale:.3g})", **details)
        if not self.keep:
            for f in (*in_files, d / "c.bin", d / "kernel_emu"):
                f.unlink(missing_ok=True)
        if seconds is None or seconds <= 0:
            seconds = max(report.get("kernel_wall_ns", 0) * 1e-9, 1e-9)
        return MeasureResult(config, Status.OK, times=(seconds,), source=self.source, details=details)

    @staticmethod
    def _report(path: Path) -> dict[str, Any]:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}


def _parse_seconds(stdout: str) -> float | None:
    from tuner.codegen.sunway import parse_timing

    return parse_timing(stdout)


def _dma_details(report: dict[str, Any], an: Any, scheduled: Any) -> dict[str, Any]:
    """The emulator's DMA counts against the analysis' plan. On one CG the report's totals are the
    plan; on a chip target each CG's own counts (the report's ``core_groups``) are compared with the
    plan's busiest-CG share, zero for a CG past the kernel's ``cgs``, and for a split reduction plus
    the requests of the pass that adds the partials (whose bytes the plan does not itemise)."""
    expect = {
        "get_reqs": float(an.a.total_requests[0] + an.b.total_requests[0]),
        "get_bytes": float(an.a.total_bytes[0] + an.b.total_bytes[0]),
        "put_reqs": float(an.c.total_requests[0]),
        "put_bytes": float(an.c.total_bytes[0]),
    }
    if "core_groups" not in report:
        tot = report.get("totals", {})
        got = {k: tot.get(k) for k in expect}
        return {"dma": got, "dma_expected": expect, "dma_match": _same(got, expect)}
    from tuner.codegen.host import c_pitch, reduce_requests, shapes

    per_cg = report["core_groups"]
    cgs, split = scheduled.cgs, scheduled.cg_split
    reduction = split is CgSplit.REDUCTION
    n = prod(shapes(scheduled)["c"][:-1]) * c_pitch(scheduled) if reduction else 0
    wanted = []
    for g in per_cg:
        own = dict(expect) if g["cg"] < cgs else dict.fromkeys(expect, 0.0)
        if reduction:
            gets, puts = reduce_requests(n, cgs, g["cg"])
            own = {"get_reqs": own["get_reqs"] + gets, "put_reqs": own["put_reqs"] + puts}
        wanted.append(own)
    match = all(_same({k: g.get(k) for k in w}, w) for g, w in zip(per_cg, wanted))
    return {"dma": per_cg, "dma_expected": wanted, "dma_match": match}


def _same(got: dict[str, Any], expect: dict[str, float]) -> bool:
    return all(got[k] is not None and abs(got[k] - v) < 1e-6 * max(1.0, v) for k, v in expect.items())
